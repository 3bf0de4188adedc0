    li r1, 1.5
