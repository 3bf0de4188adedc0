.core 5
    nop
