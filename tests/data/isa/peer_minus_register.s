comm.recv peer(g0[rank-r3], 0), spad[0], 64, 1
