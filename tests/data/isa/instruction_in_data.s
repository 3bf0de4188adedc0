.data
    nop
