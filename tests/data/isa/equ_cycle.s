.equ A, B + 1
.equ B, A * 2
    li r1, A
