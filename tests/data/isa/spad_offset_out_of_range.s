    vpu.exp spad[0x100000000], spad[0], 4, 4, fp32
