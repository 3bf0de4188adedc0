    li r1, 4 / 0
