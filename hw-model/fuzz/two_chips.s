; two_chips.s — a seed of fuzz_core.c: chip 0 sends a vector to chip 1, which adds it to its
; own and sends the sum back; the line ";--- chip 1" starts chip 1's program.
.core 0
    dma.copy spad[0], hbm[0x100], fp32, 16
    sem.signal dma, s0
    sem.wait comm, s0
    comm.send peer(1, 0), spad[0], 64, 1
    comm.recv peer(1, 0), spad[0x400], 64, 2
    sem.signal comm, s1
    sem.wait dma, s1
    dma.copy hbm[0x200], spad[0x400], fp32, 16
.core 1
    vpu.relu spad[0x800], spad[0x800], 4, 4, fp32
    barrier 1
;--- chip 1
.core 0
    dma.copy spad[0], hbm[0x100], fp32, 16
    comm.recv peer(0, 0), spad[0], 64, 1, add, fp32
    comm.send peer(0, 0), spad[0], 64, 2
    loop 3, r1+=0x40
    vpu.exp spad[r1+0x100], spad[0], 4, 4, fp32
    endloop
