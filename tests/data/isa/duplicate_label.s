a: nop
a: nop
