    li r1, tile_b
tile_a: nop
