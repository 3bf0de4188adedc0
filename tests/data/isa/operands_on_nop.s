    nop 1
