.kernel k
    nop
.kernel k
