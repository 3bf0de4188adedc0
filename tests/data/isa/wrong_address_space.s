    mxu.load hbm[r1], 4, 4, bf16
