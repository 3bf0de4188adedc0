    li r1 5
