    li r16, 0
