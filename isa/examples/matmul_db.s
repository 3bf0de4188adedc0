; matmul_db.s — C = A x B in bf16, tiled for the matrix unit with double buffering.
;
; A is M x K, B is K x N, C is M x N, all row-major in HBM. C is computed in TM x TN output
; tiles; for each, the K dimension is walked in TK-deep slices, two per loop iteration: the
; "ping" slice goes through scratchpad buffers A0/B0 and the "pong" slice through A1/B1, so
; the DMA engine fetches one slice while the matrix unit multiplies the other.
;
; Semaphores (all start at 0):
;   s0 / s1   buffer 0 / 1 is full   (DMA signals, MXU waits)
;   s2 / s3   buffer 0 / 1 is free   (MXU signals, DMA waits; primed once at the start)
;   s4        the output tile is drained (MXU signals, DMA waits before storing it)
;
; Built for the `tiny` preset (4x4 array, 64 KiB scratchpad, 4 KiB accumulators): tiles
; larger than the array are folded by the array model.

.equ M, 64
.equ N, 64
.equ K, 128
.equ TM, 32
.equ TN, 16
.equ TK, 32
.equ E, 2                       ; bytes per bf16 element

; Scratchpad layout
.equ A0, 0x0000                 ; TM x TK
.equ A1, A0 + TM * TK * E
.equ B0, A1 + TM * TK * E       ; TK x TN
.equ B1, B0 + TK * TN * E
.equ C0, B1 + TK * TN * E       ; TM x TN output tile

.bss 0x100000
A:      .space M * K * E
B:      .space K * N * E
C:      .space M * N * E

.core 0
.kernel matmul
    li r1, A                    ; A[m, k]: row block m, column slice k
    li r2, B                    ; B[k, n]
    li r3, C                    ; C[m, n]
    sem.signal dma, s2          ; both buffers start free
    sem.signal dma, s3
    trace.begin "matmul"
    loop M / TM, r1+=TM * K * E, r3+=TM * N * E
        loop N / TN, r2+=TN * E, r3+=TN * E
            loop K / TK / 2, r1+=2 * TK * E, r2+=2 * TK * N * E
                ; ping: slice k into buffer 0
                sem.wait dma, s2
                dma.copy spad[A0], hbm[r1], bf16, TK, TM, src_s1=K * E
                dma.copy spad[B0], hbm[r2], bf16, TN, TK, src_s1=N * E
                sem.signal dma, s0
                sem.wait mxu, s0
                mxu.load spad[B0], TK, TN, bf16
                mxu.mm acc[0], spad[A0], TM, bf16, mode=first
                sem.signal mxu, s2
                ; pong: slice k + 1 into buffer 1
                sem.wait dma, s3
                dma.copy spad[A1], hbm[r1+TK * E], bf16, TK, TM, src_s1=K * E
                dma.copy spad[B1], hbm[r2+TK * N * E], bf16, TN, TK, src_s1=N * E
                sem.signal dma, s1
                sem.wait mxu, s1
                mxu.load spad[B1], TK, TN, bf16
                mxu.mm acc[0], spad[A1], TM, bf16, mode=accum
                sem.signal mxu, s3
            endloop
            ; the output tile: accumulators -> bf16 in the scratchpad -> HBM
            mxu.drain spad[C0], acc[0], TM, TN, bf16
            sem.signal mxu, s4
            sem.wait dma, s4
            dma.copy hbm[r3], spad[C0], bf16, TN, TM, dst_s1=N * E
        endloop
    endloop
    trace.end "matmul"
    fence
    halt
