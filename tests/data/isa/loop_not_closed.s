    loop 4
    nop
