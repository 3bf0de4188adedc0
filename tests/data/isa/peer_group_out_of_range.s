comm.send peer(g16[rank+1], 0), spad[0], 64, 1
