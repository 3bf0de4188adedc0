    vpu.exp spad[0], spad[0], 4, 4, fp32, dst_s=8, dst_s=16
