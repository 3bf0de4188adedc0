; sendrecv.s — a send/recv pair between the two cores of a chip, with a reduction on
; arrival: core 1 receives core 0's vector and adds it to its own (the step of a ring
; all-reduce), then sends the sum back.

.equ N, 256                     ; fp32 elements
.equ BYTES, N * 4

.data 0x0
a:      .float 1.0, 2.0, 3.0, 4.0
        .zero BYTES - 16
b:      .float 10.0, 20.0, 30.0, 40.0
        .zero BYTES - 16
.bss
sum:    .space BYTES

.core 0
.kernel send_and_collect
    dma.copy spad[0], hbm[a], fp32, N
    sem.signal dma, s0
    sem.wait comm, s0
    comm.send peer(0, 1), spad[0], BYTES, 1
    comm.recv peer(0, 1), spad[0], BYTES, 2          ; the sum comes back
    sem.signal comm, s1
    sem.wait dma, s1
    dma.copy hbm[sum], spad[0], fp32, N
    fence
    halt

.core 1
.kernel reduce
    dma.copy spad[0], hbm[b], fp32, N
    sem.signal dma, s0
    sem.wait comm, s0
    comm.recv peer(0, 0), spad[0], BYTES, 1, add, fp32   ; spad += a, element by element
    comm.send peer(0, 0), spad[0], BYTES, 2
    halt
