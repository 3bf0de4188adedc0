    vpu.exp spad[0], spad[0], 4, 4, fp32, dst_ss=8
