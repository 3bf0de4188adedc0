    vpu.exp spad[0], spad[0], 4, 4, bf61
