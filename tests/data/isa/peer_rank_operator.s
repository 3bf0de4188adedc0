comm.send peer(g0[rank*2], 0), spad[0], 64, 1
