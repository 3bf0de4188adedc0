    vpu.exp spad[0], spad[0], rows=4, 4, fp32
