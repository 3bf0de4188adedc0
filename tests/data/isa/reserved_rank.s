rank: nop
