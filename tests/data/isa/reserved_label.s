spad: nop
