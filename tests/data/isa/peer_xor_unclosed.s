comm.send peer(g0[rank^(r3+1], 0), spad[0], 64, 1
