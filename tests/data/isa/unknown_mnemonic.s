.core 0
    vpu.ad spad[0], spad[0], spad[0], 4, 4, fp32
