    loop 2, r1+=0x10000000000
    endloop
