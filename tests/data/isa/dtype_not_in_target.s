.target rows=4, cols=4, cores=1, spad=65536, acc=4096, dtypes=bf16
    mxu.mm acc[0], spad[0], 4, int8
