    vpu.fill spad[0], r1, 4, 4, fp32
