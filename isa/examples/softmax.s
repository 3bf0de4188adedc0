; softmax.s — row-wise softmax of an R x COLS fp32 matrix on the vector unit:
;   y[i][j] = exp(x[i][j] - max_j x[i][j]) / sum_j exp(x[i][j] - max_j x[i][j])
; in tiles of TR rows. Per tile: DMA in, five vector passes, DMA out; semaphores hand the
; tile from the DMA queue to the vector queue and back.

.equ R, 64
.equ COLS, 64
.equ TR, 16
.equ E, 4                       ; fp32

; Scratchpad layout
.equ X, 0x0000                  ; TR x COLS tile
.equ MX, X + TR * COLS * E      ; TR row maxima
.equ SM, MX + TR * E            ; TR row sums

.bss 0x200000
x:      .space R * COLS * E
y:      .space R * COLS * E

.core 0
.kernel softmax
    li r1, x
    li r2, y
    loop R / TR, r1+=TR * COLS * E, r2+=TR * COLS * E
        dma.copy spad[X], hbm[r1], fp32, COLS, TR
        sem.signal dma, s0
        sem.wait vpu, s0
        trace.begin "softmax_tile"
        vpu.rmax spad[MX], spad[X], TR, COLS, fp32
        vpu.sub spad[X], spad[X], spad[MX], TR, COLS, fp32, bcast=col
        vpu.exp spad[X], spad[X], TR, COLS, fp32
        vpu.rsum spad[SM], spad[X], TR, COLS, fp32
        vpu.recip spad[SM], spad[SM], TR, 1, fp32
        vpu.mul spad[X], spad[X], spad[SM], TR, COLS, fp32, bcast=col
        trace.end "softmax_tile"
        sem.signal vpu, s1
        sem.wait dma, s1
        dma.copy hbm[r2], spad[X], fp32, COLS, TR
    endloop
    fence
    halt
