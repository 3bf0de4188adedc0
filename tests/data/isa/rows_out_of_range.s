    vpu.exp spad[0], spad[0], 70000, 4, fp32
