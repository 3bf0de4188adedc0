    dma.copy spad[0], hbm[0], bf16
