comm.send peer(g0[rank+600000], 0), spad[0], 64, 1
