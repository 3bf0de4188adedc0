    vpu.iota spad[0], r1+0x10000000000, 0, 1, 1, 1, fp32
