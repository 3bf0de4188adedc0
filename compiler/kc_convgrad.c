/* kc_convgrad.c — the two gradients of conv2d as implicit GEMMs on the matrix unit, for any
 * stride, padding and dilation (per dimension) and groups; depthwise ones go to the vector
 * unit (kc_depthwise_grad, kc_pool.c). docs/compiler.md ("Convolution gradients") has the
 * whole story.
 *
 * Layouts are the conv2d kernel's: images channels-last (NHWC in memory, any pixel, row and
 * image strides), the weights as the GEMM's [(kh, kw, c)][o] (o contiguous). Per group g (a
 * loop; its channels cg, its outputs og):
 *
 *   conv2d_grad_weight  dw[(kh, kw, c)][o] = sum over images and output pixels (oh, ow) of
 *                       x[ih, iw][c] dy[oh, ow][o], ih = oh sh - ph + kh dh (iw alike).
 *     Per tap (kh, kw) a GEMM over the pixels where the tap lies inside the image (a
 *     rectangle of output rows x columns: no padding is ever read): C = dw's tap block,
 *     tiles of TM channels x TN outputs, K slices of R output rows of that rectangle of one
 *     image. A slice's x pixels are gathered (one strided copy) pixel-major and transposed by
 *     the vector unit into the array's A (TM x pixels); its dy pixels (one copy) are the
 *     stationary operand. Images and runs of rows are loops.
 *   conv2d_grad_input   dx[ih, iw][c] = sum over taps and o of dy[oh, ow][o] w[(kh, kw, c)][o]
 *                       where ih = oh sh - ph + kh dh.
 *     Output pixels are split into sh x sw phases (ih = rh + sh i', iw = rw + sw j'); in a
 *     phase only the taps with (rh + ph - kh dh) divisible by sh (and alike in w) contribute,
 *     each from dy at (i' + a, j' + b) for constants a, b — a stride-1 gather. Tiles of R
 *     phase rows x the phase's whole width (TN channels), K slices of (tap, TK outputs): dy
 *     gathered (one copy; the pixels outside dy zeroed by the vector unit), w's tap block
 *     loaded transposed. Rows of tiles where every tap stays inside dy are a loop; the
 *     border rows are emitted once each.
 *
 * Both: the accumulators are zeroed by a multiply of zeros (so every slice accumulates and
 * one loop body serves them all), slices are double-buffered (two buffer sets swapped through
 * registers every slice, counting semaphores), the tile drained and stored at its end. With
 * several cores, the weight gradient splits its channel x output tiles, the input gradient
 * its images. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kc_emit.h"
#include "kc_gemm.h"
#include "kc_phase.h"
#include "kc_pool.h"

static isa_opnd SP(unsigned reg, uint64_t off) { return isa_spad(reg, off); }
static uint64_t al64(uint64_t n) { return (n + 63) & ~(uint64_t)63; }
static uint64_t mn(uint64_t a, uint64_t b) { return a < b ? a : b; }
static int64_t imax(int64_t a, int64_t b) { return a > b ? a : b; }
static int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }

/* An image operand (NHWC: channels contiguous). */
typedef struct kg_img {
    uint64_t addr;
    int64_t sn, sh, sw;
} kg_img;

typedef struct kg {
    kc_ctx *x;
    kce c;
    bool wgrad;
    uint64_t N, C, H, W, O, KH, KW, OH, OW, G, cg, og;
    int64_t sh, sw, ph, pw, dh, dw;
    isa_dtype dt, odt;
    uint64_t e, oe;
    kg_img xi, dy, dx;
    uint64_t w_addr;
    int64_t w_sc, w_skh, w_skw; /* w's row (c), tap strides; o is contiguous */
    /* tiles */
    uint64_t TM, TN, TK, R, Hph_max, Wph_max;
    /* scratchpad: per slice bank A [TM x TK] (pitch TK), B, staging; C tile; zeros */
    uint64_t bank[2], ba, bb, bst, bband, cbuf, zero, acc;
    uint64_t t0, t1;   /* weight gradient: this core's taps (kh KW + kw), stacked in M */
    uint64_t nimg;     /* ... and its images */
    uint64_t pk;       /* cores sharing a tile block's images */
    uint64_t wres;     /* input gradient: w's resident blocks */
    uint64_t span;     /* ... and the most dy rows a phase's taps reach beyond a tile's */
    unsigned rWo, s_bfree, s_bfull;
    /* the weight gradient's images split over pk cores of a tile block: kpart 0 none, 1 the
     * root (adds the others' partial sums, arriving over the mesh, and stores), 2 a peer */
    int kpart;
    uint32_t kroot, kpeers[16];
    unsigned n_kpeers, tag;
    uint64_t pbuf;
    unsigned s_pfree, s_pready, s_reduced;
    /* registers: A's and B's HBM (x / dy, dy / w), C's HBM, the bank pair, a temporary */
    unsigned rA, rB, rC, rK, rK2, rT;
    unsigned s_free, s_full, s_ready, s_cfree, s_cfull, s_zeroed, s_band;
} kg;

/* Offsets of a body's position from the registers' values (the loops step the registers). */
typedef struct kg_pos {
    int64_t a, b, cc;
} kg_pos;

/* ---- shared pieces ------------------------------------------------------------------------ */

static isa_opnd kg_hbm(kg *g, unsigned reg, int64_t off)
{
    if (off >= 0)
        return isa_hbm(reg, (uint64_t)off);
    kce_addi(&g->c, g->rT, reg, off); /* MEM offsets are unsigned */
    return isa_hbm(g->rT, 0);
}

/* acc (m x n) = 0: a multiply of zeros, so every slice after accumulates. */
static void kg_zero_acc(kg *g, uint64_t m, uint64_t n)
{
    isa_emit *e = g->x->e;
    ISA_EMIT(e, MXU_LOAD, SP(0, g->zero), isa_imm(1), isa_imm((int64_t)n), isa_enum(g->dt));
    ISA_EMIT(e, MXU_MM, isa_acc(0, g->acc), SP(0, g->zero), isa_imm((int64_t)m),
             isa_enum(g->dt), isa_enum(ISA_ACCM_SET));
}

/* The slice's multiply: W = the B buffer (k x n, rows ws bytes apart; stored transposed, n
 * rows of k, when trans), A (m x k, rows TK elements apart). */
static void kg_mm(kg *g, uint64_t m, uint64_t n, uint64_t k, bool trans, uint64_t ws)
{
    isa_emit *e = g->x->e;
    kce *c = &g->c;
    uint64_t pitch = g->TK * g->e;
    kce_wait(c, ISA_UNIT_MXU, g->s_ready, 1);
    ISA_EMIT(e, MXU_LOAD, SP(g->rK, g->bb), isa_imm((int64_t)k), isa_imm((int64_t)n),
             isa_enum(g->dt), isa_imm(trans),
             isa_imm(ws == (trans ? k : n) * g->e || (trans ? n : k) < 2 ? 0 : (int64_t)ws));
    ISA_EMIT(e, MXU_MM, isa_acc(0, g->acc), SP(g->rK, g->ba), isa_imm((int64_t)m),
             isa_enum(g->dt), isa_enum(ISA_ACCM_ACCUM),
             isa_imm(pitch == k * g->e || m < 2 ? 0 : (int64_t)pitch));
    kce_signal(c, ISA_UNIT_MXU, g->s_free, 1);
    kce_swap(c, g->rK, g->rK2, g->rT);
}

/* The tile's end: drained and stored as n2 x n1 x n0 (n0 channels) with the given HBM
 * strides from C's register + off. */
static void kg_store(kg *g, uint64_t m, uint64_t n, int64_t off, uint64_t n1, uint64_t n2,
                     uint64_t ds1, uint64_t ds2)
{
    isa_emit *e = g->x->e;
    kce *c = &g->c;
    kce_wait(c, ISA_UNIT_MXU, g->s_cfree, 1);
    ISA_EMIT(e, MXU_DRAIN, SP(0, g->cbuf), isa_acc(0, g->acc), isa_imm((int64_t)m),
             isa_imm((int64_t)n), isa_enum(g->odt));
    kce_signal(c, ISA_UNIT_MXU, g->s_cfull, 1);
    kce_wait(c, ISA_UNIT_DMA, g->s_cfull, 1);
    isa_opnd dst = kg_hbm(g, g->rC, off);
    kce_dma(c, dst, SP(0, g->cbuf), g->odt, n, n1, n2, ds1, n * g->oe, ds2, n1 * n * g->oe);
    kce_signal(c, ISA_UNIT_DMA, g->s_cfree, 1);
}

/* A loop of count over body at the registers stepped by (da, db, dc) per iteration: count 1
 * is straight. */
typedef struct kg_loop {
    kc_loop l;
    uint64_t saved;
} kg_loop;

static void kg_loop_begin(kg *g, kg_loop *l, uint64_t count, int64_t da, int64_t db, int64_t dc)
{
    unsigned regs[3] = {g->rA, g->rB, g->rC};
    int64_t st[3] = {da, db, dc};
    kc_loop_begin(g->x, &l->l, count, 3, regs, st);
    l->saved = g->c.mult;
    g->c.mult *= count;
}

static void kg_loop_end(kg *g, kg_loop *l)
{
    g->c.mult = l->saved;
    kc_loop_end(g->x, &l->l);
}

/* ---- the weight gradient -------------------------------------------------------------------- */

/* A tap's rectangle of output pixels inside the image: rows [r0, r1), columns [q0, q1). */
static void wg_rect(const kg *g, uint64_t kh, uint64_t kw, int64_t *r0, int64_t *r1, int64_t *q0,
                    int64_t *q1)
{
    /* ih = oh sh - ph + kh dh in [0, H) */
    int64_t bh = (int64_t)kh * g->dh - g->ph, bw = (int64_t)kw * g->dw - g->pw;
    *r0 = bh >= 0 ? 0 : (-bh + g->sh - 1) / g->sh;
    *r1 = imin((int64_t)g->OH, ((int64_t)g->H - 1 - bh) / g->sh + 1);
    *q0 = bw >= 0 ? 0 : (-bw + g->sw - 1) / g->sw;
    *q1 = imin((int64_t)g->OW, ((int64_t)g->W - 1 - bw) / g->sw + 1);
    if ((int64_t)g->H - 1 - bh < 0)
        *r1 = 0;
    if ((int64_t)g->W - 1 - bw < 0)
        *q1 = 0;
}

/* The core's taps [t0, t1) (kh KW + kw) and the rows of x a run of output rows starting at
 * oh0 (rows of them) reads: [lo, hi), clipped to the image. */
static void wg_band(const kg *g, int64_t oh0, uint64_t rows, int64_t *lo, int64_t *hi)
{
    uint64_t kh0 = g->t0 / g->KW, kh1 = (g->t1 - 1) / g->KW;
    *lo = imax(0, oh0 * g->sh - g->ph + (int64_t)kh0 * g->dh);
    *hi = imin((int64_t)g->H, (oh0 + (int64_t)rows - 1) * g->sh - g->ph + (int64_t)kh1 * g->dh + 1);
}

/* One K slice: output rows [oh0, oh0 + rows) of one image, every column. The rows of x they
 * read (tm channels) come in as a band (one copy), each tap's pixels are copied from it inside
 * the scratchpad into the staging matrix (pixels x taps x TM channels, zeroed first: what a tap
 * reads outside the image stays 0), the vector unit transposes that into the array's A (taps x
 * TM rows), dy's pixels (one copy) are the stationary operand. oh0 is relative to the
 * registers' run; row0 the run's first row in the image (for the taps' rectangles). */
static void wg_slice(kg *g, uint64_t tm, uint64_t tn, int64_t xo, int64_t yo, int64_t row0,
                     uint64_t rows)
{
    kce *c = &g->c;
    uint64_t e = g->e, TM = g->TM, nt = g->t1 - g->t0, ntm = nt * TM, OW = g->OW;
    uint64_t pix = rows * OW, st = ntm * e;
    int64_t blo, bhi;
    wg_band(g, row0, rows, &blo, &bhi);
    /* the vector unit zeroes the staging matrix once the array is done with the bank */
    kce_wait(c, ISA_UNIT_VPU, g->s_free, 1);
    kce_fill(c, SP(g->rK, g->bst), 0.0f, pix, ntm, g->dt, st);
    kce_signal(c, ISA_UNIT_VPU, g->s_zeroed, 1);
    kce_wait(c, ISA_UNIT_DMA, g->s_zeroed, 1);
    if (bhi > blo) {
        isa_opnd src = kg_hbm(g, g->rA, xo + blo * g->xi.sh);
        kce_dma(c, SP(g->rK, g->bband), src, g->dt, tm, g->W, (uint64_t)(bhi - blo), TM * e,
                (uint64_t)g->xi.sw, g->W * TM * e, (uint64_t)g->xi.sh);
        /* the band must have landed before the copies out of it start */
        kce_signal(c, ISA_UNIT_DMA, g->s_band, 1);
        kce_wait(c, ISA_UNIT_DMA, g->s_band, 1);
    }
    for (uint64_t t = g->t0; t < g->t1; t++) {
        uint64_t kh = t / g->KW, kw = t % g->KW;
        int64_t r0, r1, q0, q1;
        wg_rect(g, kh, kw, &r0, &r1, &q0, &q1);
        r0 = imax(r0, row0), r1 = imin(r1, row0 + (int64_t)rows);
        if (r1 <= r0 || q1 <= q0)
            continue;
        int64_t ih = r0 * g->sh - g->ph + (int64_t)kh * g->dh - blo;
        int64_t iw = q0 * g->sw - g->pw + (int64_t)kw * g->dw;
        uint64_t src = g->bband + ((uint64_t)ih * g->W + (uint64_t)iw) * TM * e;
        uint64_t dst = g->bst + ((uint64_t)(r0 - row0) * OW + (uint64_t)q0) * st +
                       (t - g->t0) * TM * e;
        kce_dma(c, SP(g->rK, dst), SP(g->rK, src), g->dt, tm, (uint64_t)(q1 - q0),
                (uint64_t)(r1 - r0), st, (uint64_t)g->sw * TM * e, OW * st,
                (uint64_t)g->sh * g->W * TM * e);
    }
    isa_opnd src = kg_hbm(g, g->rB, yo + row0 * g->dy.sh);
    kce_dma(c, SP(g->rK, g->bb), src, g->dt, tn, OW, rows, tn * e, (uint64_t)g->dy.sw, OW * tn * e,
            (uint64_t)g->dy.sh);
    kce_signal(c, ISA_UNIT_DMA, g->s_full, 1);
    kce_wait(c, ISA_UNIT_VPU, g->s_full, 1);
    kce_un(c, ISA_OP_VPU_TRANSPOSE, SP(g->rK, g->ba), SP(g->rK, g->bst), pix, ntm, g->dt,
           g->TK * e, st);
    kce_signal(c, ISA_UNIT_VPU, g->s_ready, 1);
    kg_mm(g, ntm, tn, pix, false, tn * e);
}

/* One output tile: the core's taps x tm channels x tn outputs at position p, summed over the
 * images and runs of R output rows (the runs whose rows every tap sees inside the image a
 * loop, the others once each). */
static void wg_tile(kg *g, const kg_pos *p, uint64_t tm, uint64_t tn)
{
    uint64_t TM = g->TM, nt = g->t1 - g->t0, R = g->R, OH = g->OH;
    kg_zero_acc(g, nt * TM, tn);
    int64_t lo = 0, hi = (int64_t)OH;
    for (uint64_t t = g->t0; t < g->t1; t++) {
        int64_t r0, r1, q0, q1;
        wg_rect(g, t / g->KW, t % g->KW, &r0, &r1, &q0, &q1);
        lo = imax(lo, r0), hi = imin(hi, r1);
    }
    uint64_t runs = kmm_cdiv(OH, R), k0 = lo > 0 ? kmm_cdiv((uint64_t)lo, R) : 0, k1 = k0;
    while (k1 < runs && (int64_t)((k1 + 1) * R) <= hi && (k1 + 1) * R <= OH)
        k1++;
    int64_t rx = (int64_t)R * g->sh * g->xi.sh, ry = (int64_t)R * g->dy.sh;
    kg_loop li;
    kg_loop_begin(g, &li, g->nimg, g->xi.sn, g->dy.sn, 0); /* images */
    for (uint64_t k = 0; k < runs; k++) {
        if (k == k0 && k1 > k0) { /* the interior runs: the registers step R rows */
            kg_loop lr;
            kg_loop_begin(g, &lr, k1 - k0, rx, ry, 0);
            wg_slice(g, tm, tn, p->a, p->b, (int64_t)(k0 * R), R);
            kg_loop_end(g, &lr);
            k = k1 - 1;
            continue;
        }
        wg_slice(g, tm, tn, p->a, p->b, (int64_t)(k * R), mn(R, OH - k * R));
    }
    kg_loop_end(g, &li);
    /* drained; each tap's block of dw stored: rows c (w_sc apart), columns o */
    isa_emit *e = g->x->e;
    kce *c = &g->c;
    if (g->kpart) { /* partial sums: the peers send theirs to the root, which adds them */
        uint64_t bytes = nt * TM * tn * 4;
        uint32_t chip = g->x->k->place.chip;
        kce_wait(c, ISA_UNIT_MXU, g->s_pfree, 1);
        ISA_EMIT(e, MXU_DRAIN, SP(0, g->pbuf), isa_acc(0, g->acc), isa_imm((int64_t)(nt * TM)),
                 isa_imm((int64_t)tn), isa_enum(ISA_DTYPE_FP32));
        kce_signal(c, ISA_UNIT_MXU, g->s_pready, 1);
        kce_wait(c, ISA_UNIT_COMM, g->s_pready, 1);
        if (g->kpart == 2) {
            ISA_EMIT(e, COMM_SEND, isa_peer(chip, g->kroot), SP(0, g->pbuf),
                     isa_imm((int64_t)bytes), isa_imm(g->tag));
            kce_signal(c, ISA_UNIT_COMM, g->s_pfree, 1);
            return;
        }
        for (unsigned i = 0; i < g->n_kpeers; i++)
            ISA_EMIT(e, COMM_RECV, isa_peer(chip, g->kpeers[i]), SP(0, g->pbuf),
                     isa_imm((int64_t)bytes), isa_imm(g->tag), isa_enum(ISA_RED_ADD),
                     isa_enum(ISA_DTYPE_FP32));
        kce_signal(c, ISA_UNIT_COMM, g->s_reduced, 1);
        kce_wait(c, ISA_UNIT_VPU, g->s_reduced, 1);
        kce_wait(c, ISA_UNIT_VPU, g->s_cfree, 1);
        kce_cast(c, SP(0, g->cbuf), SP(0, g->pbuf), nt * TM, tn, g->odt, ISA_DTYPE_FP32, 0, 0);
        kce_signal(c, ISA_UNIT_VPU, g->s_pfree, 1);
        kce_signal(c, ISA_UNIT_VPU, g->s_cfull, 1);
    } else {
        kce_wait(c, ISA_UNIT_MXU, g->s_cfree, 1);
        ISA_EMIT(e, MXU_DRAIN, SP(0, g->cbuf), isa_acc(0, g->acc), isa_imm((int64_t)(nt * TM)),
                 isa_imm((int64_t)tn), isa_enum(g->odt));
        kce_signal(c, ISA_UNIT_MXU, g->s_cfull, 1);
    }
    kce_wait(c, ISA_UNIT_DMA, g->s_cfull, 1);
    for (uint64_t t = g->t0; t < g->t1; t++) {
        int64_t off = p->cc + (int64_t)(t / g->KW) * g->w_skh + (int64_t)(t % g->KW) * g->w_skw;
        isa_opnd dst = kg_hbm(g, g->rC, off);
        kce_dma(c, dst, SP(0, g->cbuf + (t - g->t0) * TM * tn * g->oe), g->odt, tn, tm, 1,
                (uint64_t)g->w_sc, tn * g->oe, 0, 0);
    }
    kce_signal(c, ISA_UNIT_DMA, g->s_cfree, 1);
}

/* The tiles of one core: channel chunks [i0, i1) x output chunks [j0, j1) of every group,
 * each with the core's taps stacked. */
static void wg_core(kg *g, uint64_t i0, uint64_t i1, uint64_t j0, uint64_t j1)
{
    uint64_t TM = g->TM, TN = g->TN, e = g->e, oe = g->oe;
    uint64_t ci = kmm_cdiv(g->cg, TM), cj = kmm_cdiv(g->og, TN);
    kg_loop lg;
    kg_loop_begin(g, &lg, g->G, (int64_t)(g->cg * e), (int64_t)(g->og * e),
                  (int64_t)(g->og * oe));
    /* channel chunks: the full ones of this core as a loop, the edge one after (the
     * registers start at this core's first chunk) */
    uint64_t ifull = i1 - i0 - (i1 == ci && g->cg % TM ? 1 : 0);
    for (int part = 0; part < 2; part++) {
        uint64_t ni = part ? (ifull < i1 - i0 ? 1 : 0) : ifull;
        uint64_t tm = part ? g->cg - (ci - 1) * TM : TM;
        uint64_t ib = part ? ifull : 0;
        if (!ni)
            continue;
        kg_loop lc;
        kg_loop_begin(g, &lc, ni, (int64_t)(TM * e), 0, (int64_t)TM * g->w_sc);
        uint64_t jfull = j1 - j0 - (j1 == cj && g->og % TN ? 1 : 0);
        for (int pj = 0; pj < 2; pj++) {
            uint64_t nj = pj ? (jfull < j1 - j0 ? 1 : 0) : jfull;
            uint64_t tn = pj ? g->og - (cj - 1) * TN : TN;
            uint64_t jb = pj ? jfull : 0;
            if (!nj)
                continue;
            kg_loop lo;
            kg_loop_begin(g, &lo, nj, 0, (int64_t)(TN * e), (int64_t)(TN * oe));
            kg_pos p = {(int64_t)(ib * TM * e), (int64_t)(jb * TN * e),
                        (int64_t)(ib * TM) * g->w_sc + (int64_t)(jb * TN * oe)};
            wg_tile(g, &p, tm, tn);
            kg_loop_end(g, &lo);
        }
        kg_loop_end(g, &lc);
    }
    kg_loop_end(g, &lg);
}

/* ---- the input gradient --------------------------------------------------------------------- */

/* A phase (rh, rw): its rows and columns, and its taps with their dy offsets (a, b): dy
 * pixel (i' + a, j' + b) feeds phase pixel (i', j'). */
typedef struct ig_phase {
    uint64_t rh, rw, hph, wph, nt;
    uint64_t kh[64], kw[64];
    int64_t a[64], b[64];
} ig_phase;

/* floor division */
static int64_t fdiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

static void ig_phase_of(const kg *g, uint64_t rh, uint64_t rw, ig_phase *f)
{
    memset(f, 0, sizeof *f);
    f->rh = rh, f->rw = rw;
    f->hph = rh < g->H ? (g->H - rh + (uint64_t)g->sh - 1) / (uint64_t)g->sh : 0;
    f->wph = rw < g->W ? (g->W - rw + (uint64_t)g->sw - 1) / (uint64_t)g->sw : 0;
    for (uint64_t kh = 0; kh < g->KH; kh++) {
        int64_t th = (int64_t)rh + g->ph - (int64_t)kh * g->dh;
        if (((th % g->sh) + g->sh) % g->sh)
            continue;
        for (uint64_t kw = 0; kw < g->KW; kw++) {
            int64_t tw = (int64_t)rw + g->pw - (int64_t)kw * g->dw;
            if (((tw % g->sw) + g->sw) % g->sw || f->nt == 64)
                continue;
            f->kh[f->nt] = kh, f->kw[f->nt] = kw;
            f->a[f->nt] = fdiv(th, g->sh), f->b[f->nt] = fdiv(tw, g->sw);
            f->nt++;
        }
    }
}

/* Tap t's valid phase rows [lo, hi) and columns [clo, chi) (dy inside). */
static void ig_valid(const kg *g, const ig_phase *f, uint64_t t, int64_t *lo, int64_t *hi,
                     int64_t *clo, int64_t *chi)
{
    *lo = imax(0, -f->a[t]);
    *hi = imin((int64_t)f->hph, (int64_t)g->OH - f->a[t]);
    *clo = imax(0, -f->b[t]);
    *chi = imin((int64_t)f->wph, (int64_t)g->OW - f->b[t]);
}

/* The phase's taps' dy row offsets: the smallest and largest a. */
static void ig_arange(const ig_phase *f, int64_t *amin, int64_t *amax)
{
    *amin = INT64_MAX, *amax = INT64_MIN;
    for (uint64_t t = 0; t < f->nt; t++)
        *amin = imin(*amin, f->a[t]), *amax = imax(*amax, f->a[t]);
}

/* w's blocks for phase f and the channel chunk at p (tn channels): per output chunk of TK
 * (the last tk_e), tn rows of the phase's taps x tk outputs stacked, resident until the next
 * chunk (the array frees them). */
static void ig_wload(kg *g, const kg_pos *p, const ig_phase *f, uint64_t tn)
{
    kce *c = &g->c;
    uint64_t TK = g->TK, e = g->e, nco = kmm_cdiv(g->og, TK), pitch = f->nt * TK * e;
    kce_wait(c, ISA_UNIT_DMA, g->s_bfree, 1);
    for (uint64_t j = 0; j < nco; j++) {
        uint64_t tk = mn(TK, g->og - j * TK);
        for (uint64_t t = 0; t < f->nt; t++) {
            int64_t off = p->b + (int64_t)f->kh[t] * g->w_skh + (int64_t)f->kw[t] * g->w_skw +
                          (int64_t)(j * TK * e);
            isa_opnd src = kg_hbm(g, g->rB, off);
            kce_dma(c, SP(0, g->wres + j * g->TN * pitch + t * tk * e), src, g->dt, tk, tn, 1,
                    pitch, (uint64_t)g->w_sc, 0, 0);
        }
    }
    kce_signal(c, ISA_UNIT_DMA, g->s_bfull, 1);
    kce_wait(c, ISA_UNIT_MXU, g->s_bfull, 1);
}

/* One K slice: every tap of the phase for the tk outputs of the chunk at rA / rWo, the tile's
 * rows [i0, i0 + rows). The dy rows the taps read come in as a band (one copy of all their
 * columns), each tap's pixels are copied from it inside the scratchpad into its column block
 * of A (zeroed first: what lies outside dy stays 0), and the array multiplies A by the
 * resident w block. */
static void ig_slice(kg *g, const kg_pos *p, const ig_phase *f, int64_t i0, uint64_t rows,
                     uint64_t tn, uint64_t tk)
{
    kce *c = &g->c;
    isa_emit *em = g->x->e;
    uint64_t e = g->e, wph = f->wph, TK = g->TK, OW = g->OW, ap = f->nt * TK * e;
    int64_t amin, amax;
    ig_arange(f, &amin, &amax);
    int64_t blo = imax(0, i0 + amin), bhi = imin((int64_t)g->OH, i0 + (int64_t)rows + amax);
    kce_wait(c, ISA_UNIT_VPU, g->s_free, 1);
    kce_fill(c, SP(g->rK, g->ba), 0.0f, rows * wph, f->nt * TK, g->dt, ap);
    kce_signal(c, ISA_UNIT_VPU, g->s_zeroed, 1);
    kce_wait(c, ISA_UNIT_DMA, g->s_zeroed, 1);
    if (bhi > blo) {
        isa_opnd src = kg_hbm(g, g->rA, p->a + blo * g->dy.sh);
        kce_dma(c, SP(g->rK, g->bband), src, g->dt, tk, OW, (uint64_t)(bhi - blo), TK * e,
                (uint64_t)g->dy.sw, OW * TK * e, (uint64_t)g->dy.sh);
        kce_signal(c, ISA_UNIT_DMA, g->s_band, 1); /* landed before the copies out of it */
        kce_wait(c, ISA_UNIT_DMA, g->s_band, 1);
        for (uint64_t t = 0; t < f->nt; t++) {
            int64_t lo, hi, clo, chi;
            ig_valid(g, f, t, &lo, &hi, &clo, &chi);
            int64_t r0 = imax(lo, i0), r1 = imin(hi, i0 + (int64_t)rows);
            if (r1 <= r0 || chi <= clo)
                continue;
            uint64_t from = g->bband + ((uint64_t)(r0 + f->a[t] - blo) * OW +
                                        (uint64_t)(clo + f->b[t])) * TK * e;
            uint64_t dst = g->ba + ((uint64_t)(r0 - i0) * wph + (uint64_t)clo) * ap + t * tk * e;
            kce_dma(c, SP(g->rK, dst), SP(g->rK, from), g->dt, tk, (uint64_t)(chi - clo),
                    (uint64_t)(r1 - r0), ap, TK * e, wph * ap, OW * TK * e);
        }
    }
    kce_signal(c, ISA_UNIT_DMA, g->s_full, 1);
    kce_wait(c, ISA_UNIT_MXU, g->s_full, 1);
    uint64_t k = f->nt * tk, m = rows * wph;
    ISA_EMIT(em, MXU_LOAD, SP(g->rWo, 0), isa_imm((int64_t)k), isa_imm((int64_t)tn),
             isa_enum(g->dt), isa_imm(1), isa_imm(ap == k * e || tn < 2 ? 0 : (int64_t)ap));
    ISA_EMIT(em, MXU_MM, isa_acc(0, g->acc), SP(g->rK, g->ba), isa_imm((int64_t)m),
             isa_enum(g->dt), isa_enum(ISA_ACCM_ACCUM),
             isa_imm(ap == k * e || m < 2 ? 0 : (int64_t)ap));
    kce_signal(c, ISA_UNIT_MXU, g->s_free, 1);
    kce_swap(c, g->rK, g->rK2, g->rT);
}

/* One tile: rows [i0, i0 + rows) of phase f, tn channels (position p): the output chunks as
 * a loop (dy's channel register and the w block's stepped), drained and stored. */
static void ig_tile(kg *g, const kg_pos *p, const ig_phase *f, int64_t i0, uint64_t rows,
                    uint64_t tn)
{
    kce *c = &g->c;
    uint64_t wph = f->wph, TK = g->TK, e = g->e, full = g->og / TK, rest = g->og - full * TK;
    int64_t wblk = (int64_t)(g->TN * f->nt * TK * e);
    kg_zero_acc(g, rows * wph, tn);
    ISA_EMIT(g->x->e, LI, isa_reg(g->rWo), isa_imm((int64_t)g->wres));
    if (!f->nt) /* no tap reaches this phase: its pixels' gradient is 0 */
        full = rest = 0;
    if (full) {
        kc_loop l;
        unsigned regs[2] = {g->rA, g->rWo};
        int64_t st[2] = {(int64_t)(TK * e), wblk};
        kc_loop_begin(g->x, &l, full, 2, regs, st);
        uint64_t saved = c->mult;
        c->mult *= full;
        ig_slice(g, p, f, i0, rows, tn, TK);
        c->mult = saved;
        kc_loop_end(g->x, &l);
    }
    if (rest) {
        kg_pos q = *p;
        q.a += (int64_t)(full * TK * e);
        kce_addi(c, g->rWo, g->rWo, (int64_t)full * wblk);
        ig_slice(g, &q, f, i0, rows, tn, rest);
    }
    /* dx: phase pixel (i', j') is (rh + sh i', rw + sw j') */
    int64_t off = p->cc + (int64_t)(f->rh + (uint64_t)g->sh * (uint64_t)i0) * g->dx.sh +
                  (int64_t)f->rw * g->dx.sw;
    kg_store(g, rows * wph, tn, off, wph, rows, (uint64_t)(g->sw * g->dx.sw),
             (uint64_t)(g->sh * g->dx.sh));
}

/* The rows of phase f for a channel chunk at p: the tiles whose rows every tap sees inside dy
 * as a loop, the others once each. */
static void ig_rows(kg *g, const kg_pos *p, const ig_phase *f, uint64_t tn)
{
    int64_t lo = 0, hi = (int64_t)f->hph;
    for (uint64_t t = 0; t < f->nt; t++) {
        int64_t l, h, cl, ch;
        ig_valid(g, f, t, &l, &h, &cl, &ch);
        lo = imax(lo, l), hi = imin(hi, h);
    }
    uint64_t R = mn(g->R, f->hph), tiles = kmm_cdiv(f->hph, R);
    uint64_t t0 = lo > 0 ? kmm_cdiv((uint64_t)lo, R) : 0, t1 = t0;
    while (t1 < tiles && (int64_t)((t1 + 1) * R) <= hi && (t1 + 1) * R <= f->hph)
        t1++;
    int64_t ry = (int64_t)R * g->dy.sh, rx = (int64_t)((uint64_t)g->sh * R) * g->dx.sh;
    for (uint64_t i = 0; i < tiles; i++) {
        if (i == t0 && t1 > t0) {
            kg_loop l;
            kg_loop_begin(g, &l, t1 - t0, ry, 0, rx);
            ig_tile(g, p, f, (int64_t)(t0 * R), R, tn);
            kg_loop_end(g, &l);
            i = t1 - 1;
            continue;
        }
        ig_tile(g, p, f, (int64_t)(i * R), mn(R, f->hph - i * R), tn);
    }
}

/* One core's images: per group, phase and channel chunk, w's blocks loaded once, then every
 * image's rows. */
static void ig_core(kg *g, uint64_t nimg)
{
    uint64_t TN = g->TN, e = g->e, oe = g->oe, cj = kmm_cdiv(g->cg, TN);
    kg_loop lg;
    kg_loop_begin(g, &lg, g->G, (int64_t)(g->og * e), (int64_t)(g->og * e),
                  (int64_t)(g->cg * oe));
    for (uint64_t rh = 0; rh < (uint64_t)g->sh; rh++)
        for (uint64_t rw = 0; rw < (uint64_t)g->sw; rw++) {
            ig_phase f;
            ig_phase_of(g, rh, rw, &f);
            if (!f.hph || !f.wph)
                continue;
            uint64_t full = g->cg / TN;
            for (int part = 0; part < 2; part++) {
                uint64_t n = part ? (cj > full ? 1 : 0) : full, tn = part ? g->cg - full * TN : TN;
                if (!n)
                    continue;
                kg_pos p = {0, part ? (int64_t)full * (int64_t)TN * g->w_sc : 0,
                            part ? (int64_t)(full * TN * oe) : 0};
                kg_loop lc;
                kg_loop_begin(g, &lc, n, 0, (int64_t)TN * g->w_sc, (int64_t)(TN * oe));
                if (f.nt)
                    ig_wload(g, &p, &f, tn);
                kg_loop ln;
                kg_loop_begin(g, &ln, nimg, g->dy.sn, 0, g->dx.sn);
                ig_rows(g, &p, &f, tn);
                kg_loop_end(g, &ln);
                if (f.nt)
                    kce_signal(&g->c, ISA_UNIT_MXU, g->s_bfree, 1); /* w's blocks read */
                kg_loop_end(g, &lc);
            }
        }
    kg_loop_end(g, &lg);
}

/* ---- the plan ----------------------------------------------------------------------------- */

static np_status kg_img_of(kg *g, kg_img *o, const kc_tensor *t, const char *what, uint64_t c,
                           uint64_t h, uint64_t w)
{
    kc_ctx *x = g->x;
    if (t->ndim != 4 || (uint64_t)t->shape[0] != g->N || (uint64_t)t->shape[1] != c ||
        (uint64_t)t->shape[2] != h || (uint64_t)t->shape[3] != w)
        return kc_fail(x, NP_ERR_INCONSISTENT, "%s must be [%" PRIu64 ", %" PRIu64 ", %" PRIu64
                       ", %" PRIu64 "]", what, g->N, c, h, w);
    uint64_t e = nn_dtype_size(t->dtype);
    if (t->stride[1] != (int64_t)e && c > 1)
        return kc_fail(x, NP_ERR_INCONSISTENT, "%s must be channels-last (NHWC in memory: "
                       "channel stride %" PRIu64 " bytes, not %" PRId64 ")", what, e, t->stride[1]);
    o->addr = t->addr, o->sn = t->stride[0], o->sh = t->stride[2], o->sw = t->stride[3];
    return NP_OK;
}

/* A slice bank's bytes: the input gradient's A and band of dy; the weight gradient's A (nt
 * taps x TM channels x TK pixels), its transposed staging, B (TK
 * pixels x TN) and the band of x the slice reads (br rows x W pixels x TM channels). */
static uint64_t kg_bank(const kg *g, uint64_t TM, uint64_t TN, uint64_t TK, uint64_t nt,
                        uint64_t br)
{
    uint64_t e = g->e;
    if (!g->wgrad) /* A (TM pixels x nt taps x TK outputs), the band of dy (br x OW x TK) */
        return al64(TM * nt * TK * e) + al64(br * g->OW * TK * e);
    return 2 * al64(nt * TM * TK * e) + al64(TK * TN * e) + al64(br * g->W * TM * e);
}

/* Scratchpad bytes: two slice banks, the C tile (m rows), the zeros, the partial sums (the
 * weight gradient's images split over cores). */
static uint64_t kg_spad(const kg *g, uint64_t TM, uint64_t TN, uint64_t TK, uint64_t nt,
                        uint64_t br)
{
    uint64_t m = g->wgrad ? nt * TM : TM;
    uint64_t w = g->wgrad ? 0 : kmm_cdiv(g->og, TK) * al64(TN * nt * TK * g->e); /* w resident */
    return 2 * kg_bank(g, TM, TN, TK, nt, br) + al64(m * TN * g->oe) +
           al64((m > TN ? m : TN) * g->e) + (g->pk > 1 ? al64(m * TN * 4) : 0) + w;
}

/* Rows of x a run of R output rows reads (at most, all taps). */
static uint64_t kg_band_rows(const kg *g, uint64_t R)
{
    return mn(g->H, (R - 1) * (uint64_t)g->sh + (g->KH - 1) * (uint64_t)g->dh + 1);
}

static np_status kg_compile(kc_ctx *x, bool wgrad)
{
    const kc_kernel *k = x->k;
    kg g;
    memset(&g, 0, sizeof g);
    g.x = x, g.wgrad = wgrad, g.c = (kce){x, 1, 0, 0};
    const kc_tensor *img = wgrad ? &k->in[0] : &k->out[0], *dy = wgrad ? &k->in[1] : &k->in[0];
    const kc_tensor *w = wgrad ? &k->out[0] : &k->in[1];
    if (img->ndim != 4 || dy->ndim != 4 || w->ndim != 4)
        return kc_fail(x, NP_ERR_INCONSISTENT, "operands must be 4-D (NCHW images, OIHW weights)");
    g.N = (uint64_t)img->shape[0], g.C = (uint64_t)img->shape[1], g.H = (uint64_t)img->shape[2];
    g.W = (uint64_t)img->shape[3], g.O = (uint64_t)w->shape[0];
    g.KH = (uint64_t)w->shape[2], g.KW = (uint64_t)w->shape[3];
    g.G = (uint64_t)kc_attr_int(x, "groups");
    g.sh = kc_attr_int(x, "stride"), g.sw = kc_attr_int(x, "stride_w");
    g.sw = g.sw ? g.sw : g.sh;
    g.ph = kc_attr_int(x, "pad"), g.pw = kc_attr_int(x, "pad_w");
    g.pw = g.pw >= 0 ? g.pw : g.ph;
    g.dh = kc_attr_int(x, "dilation"), g.dw = kc_attr_int(x, "dilation_w");
    g.dw = g.dw ? g.dw : g.dh;
    if (g.C % g.G || g.O % g.G || (uint64_t)w->shape[1] * g.G != g.C)
        return kc_fail(x, NP_ERR_INCONSISTENT, "%" PRIu64 " channels, %" PRIu64 " outputs and w's %"
                       PRId64 " channels a group do not make %" PRIu64 " groups", g.C, g.O,
                       w->shape[1], g.G);
    g.cg = g.C / g.G, g.og = g.O / g.G;
    bool depthwise = g.cg == 1 && g.og == 1;
    int64_t eh = (int64_t)g.H + 2 * g.ph - g.dh * ((int64_t)g.KH - 1) - 1;
    int64_t ew = (int64_t)g.W + 2 * g.pw - g.dw * ((int64_t)g.KW - 1) - 1;
    if (eh < 0 || ew < 0)
        return kc_fail(x, NP_ERR_INCONSISTENT, "the filter is larger than the padded image");
    g.OH = (uint64_t)(eh / g.sh + 1), g.OW = (uint64_t)(ew / g.sw + 1);
    if (kg_img_of(&g, wgrad ? &g.xi : &g.dx, img, wgrad ? "x" : "dx", g.C, g.H, g.W) != NP_OK ||
        kg_img_of(&g, &g.dy, dy, "dy", g.O, g.OH, g.OW) != NP_OK)
        return kc_status(x);
    if (w->shape[1] != (int64_t)g.cg)
        return kc_fail(x, NP_ERR_INCONSISTENT, "w must be [%" PRIu64 ", %" PRIu64 ", %" PRIu64
                       ", %" PRIu64 "]", g.O, g.cg, g.KH, g.KW);
    g.dt = kc_isa_dtype(dy->dtype);
    g.odt = kc_isa_dtype(k->out[0].dtype);
    g.e = isa_dtype_size[g.dt], g.oe = isa_dtype_size[g.odt];
    const kc_tensor *other = wgrad ? img : w;
    if (other->dtype != dy->dtype)
        return kc_fail(x, NP_ERR_INCONSISTENT, "%s is %s, dy %s: the %s multiplies one type",
                       wgrad ? "x" : "w", nn_dtype_name(other->dtype), nn_dtype_name(dy->dtype),
                       depthwise ? "vector unit" : "array");
    if (g.dt == ISA_DTYPE_INT8 || g.dt == ISA_DTYPE_INT32 || g.odt == ISA_DTYPE_INT8 ||
        g.odt == ISA_DTYPE_INT32)
        return kc_fail(x, NP_ERR_INCONSISTENT, "the gradients take floats");
    if (depthwise) /* the vector unit, every channel a lane (kc_pool.c) */
        return kc_depthwise_grad(x, wgrad);
    if (!(isa_emit_program(x->e)->target.dtypes & (1u << g.dt)))
        return kc_fail(x, NP_ERR_INCONSISTENT, "the array does not multiply %s",
                       isa_dtype_names[g.dt]);
    uint64_t we = isa_dtype_size[kc_isa_dtype(w->dtype)];
    if (w->stride[0] != (int64_t)we && g.O > 1)
        return kc_fail(x, NP_ERR_INCONSISTENT, "w must be laid out as [(kh, kw, c)][o] (o "
                       "contiguous: stride %" PRIu64 ", not %" PRId64 ")", we, w->stride[0]);
    g.w_addr = w->addr, g.w_sc = w->stride[1], g.w_skh = w->stride[2], g.w_skw = w->stride[3];
    /* tiles that fit: weight gradient TM channels x TN outputs over TK-pixel slices; input
     * gradient R phase rows (TM = R x the phase's width) x TN channels over TK outputs */
    const kc_place *pl = &k->place;
    uint64_t n_cores = pl->n_cores ? pl->n_cores : 1, spad = UINT64_MAX, accb = UINT64_MAX;
    for (uint32_t cc = pl->core0; cc < pl->core0 + n_cores; cc++) {
        spad = mn(spad, kc_spad_avail(x, cc));
        accb = mn(accb, kc_acc_avail(x, cc));
    }
    uint64_t Rr = (uint64_t)x->cfg->core.array_rows, Cc = (uint64_t)x->cfg->core.array_cols;
    uint64_t taps = g.KH * g.KW, nt = taps, pr = 1, pc = 1, tg = 1, pk = 1;
    if (wgrad) {
        /* TN outputs x TM channels of every tap a core takes (taps split over the cores when
         * the channel x output tiles are fewer), summed over slices of R output rows */
        g.TN = mn(g.og, 4 * Cc);
        g.TM = mn(g.cg, 4 * Rr);
        for (int pass = 0; pass < 2; pass++) {
            kmm_split_grid(kmm_cdiv(g.cg, g.TM), kmm_cdiv(g.og, g.TN), n_cores, &pr, &pc);
            /* cores left over share a tile block's images (partial sums added over the mesh),
             * or, with one image, its taps */
            g.pk = pk = mn(mn(g.N, 16), n_cores / (pr * pc));
            tg = pk > 1 ? 1 : mn(taps, n_cores / (pr * pc));
            nt = kmm_cdiv(taps, tg);
            while (g.TM > 1 && nt * g.TM * g.TN * 4 > accb)
                g.TM = (g.TM + 1) / 2;
            while (g.TN > 1 && nt * g.TM * g.TN * 4 > accb)
                g.TN = (g.TN + 1) / 2;
        }
        g.R = mn(g.OH, 65535 / g.OW);
        while (g.R > 1 && (kg_spad(&g, g.TM, g.TN, g.R * g.OW, nt, kg_band_rows(&g, g.R)) > spad ||
                           g.R * g.OW > 4096))
            g.R--;
        while (g.TM > 1 && kg_spad(&g, g.TM, g.TN, g.R * g.OW, nt, kg_band_rows(&g, g.R)) > spad)
            g.TM = (g.TM + 1) / 2;
        g.TK = g.R * g.OW;
        uint64_t need = kg_spad(&g, g.TM, g.TN, g.TK, nt, kg_band_rows(&g, g.R));
        if (need > spad || nt * g.TM * g.TN * 4 > accb || g.TK > 65535 || nt * g.TM > 65535)
            return kc_fail(x, NP_ERR_RANGE, "slices of one output row (%" PRIu64 " pixels) need %"
                           PRIu64 " scratchpad bytes (%" PRIu64 " free) and %" PRIu64
                           " accumulator bytes (%" PRIu64 " free)", g.OW, need, spad,
                           nt * g.TM * g.TN * 4, accb);
    } else {
        /* R phase rows of the widest phase x TN channels, summed over slices of TK outputs of
         * every tap of the phase (the phase with the most taps sizes the buffers) */
        g.TN = mn(g.cg, 4 * Cc);
        g.TK = mn(g.og, 4 * Rr);
        g.Wph_max = kmm_cdiv(g.W, (uint64_t)g.sw), g.Hph_max = kmm_cdiv(g.H, (uint64_t)g.sh);
        uint64_t wph = g.Wph_max, span = 0;
        nt = 1;
        for (uint64_t rh = 0; rh < (uint64_t)g.sh; rh++)
            for (uint64_t rw = 0; rw < (uint64_t)g.sw; rw++) {
                ig_phase f;
                ig_phase_of(&g, rh, rw, &f);
                int64_t amin, amax;
                ig_arange(&f, &amin, &amax);
                nt = f.nt > nt ? f.nt : nt;
                if (f.nt && (uint64_t)(amax - amin) > span)
                    span = (uint64_t)(amax - amin);
            }
        for (;;) {
            uint64_t rmax = accb / (wph * g.TN * 4);
            for (g.R = mn(rmax, g.Hph_max); g.R > 1 &&
                 (kg_spad(&g, g.R * wph, g.TN, g.TK, nt, mn(g.OH, g.R + span)) > spad ||
                  g.R * wph > 4096);)
                g.R--;
            if (g.R >= 1 && rmax >= 1 &&
                kg_spad(&g, g.R * wph, g.TN, g.TK, nt, mn(g.OH, g.R + span)) <= spad)
                break;
            if (g.TN == 1 && g.TK == 1)
                return kc_fail(x, NP_ERR_RANGE, "a row of %" PRIu64 " pixels does not fit the "
                               "scratchpad (%" PRIu64 " bytes free) and the accumulators (%" PRIu64
                               " free)", wph, spad, accb);
            if (g.TN >= g.TK)
                g.TN = (g.TN + 1) / 2;
            else
                g.TK = (g.TK + 1) / 2;
        }
        g.span = span;
        while (g.TK > 1 && nt * g.TK > 65535) /* the zero fills' columns */
            g.TK = (g.TK + 1) / 2;
        g.TM = g.R * wph;
        if (g.TM > 65535)
            return kc_fail(x, NP_ERR_RANGE, "a tile of %" PRIu64 " pixels (at most 65535)", g.TM);
    }
    /* the result */
    kc_result *r = x->res;
    uint64_t macs = g.N * g.OH * g.OW * g.O * g.cg * g.KH * g.KW;
    r->flops = r->mxu_flops = 2 * macs;
    if (wgrad)
        snprintf(r->schedule, sizeof r->schedule, "x^T dy with the taps stacked: %" PRIu64
                 " groups, tiles %" PRIu64 " taps x %" PRIu64 " channels x %" PRIu64 " outputs, "
                 "slices of %" PRIu64 " output rows", g.G, nt, g.TM, g.TN, g.R);
    else
        snprintf(r->schedule, sizeof r->schedule, "dy W^T per stride phase: %" PRIu64 " groups, "
                 "tiles %" PRIu64 " pixels (%" PRIu64 " rows) x %" PRIu64 " channels, slices of %"
                 PRIu64 " outputs", g.G, g.TM, g.R, g.TN, g.TK);
    /* cores: the weight gradient splits its channel x output tiles, then its taps; the input
     * gradient its images */
    uint64_t ci = kmm_cdiv(g.cg, g.TM), cj = kmm_cdiv(g.og, g.TN);
    uint64_t units = wgrad ? pr * pc * tg * pk : mn(n_cores, g.N);
    for (uint64_t u = 0; u < units; u++) {
        kg q = g;
        q.c = (kce){x, 1, 0, 0};
        uint64_t i0 = 0, i1 = 0, j0 = 0, j1 = 0, n0 = 0, n1 = g.N, t0 = 0, t1 = 0;
        if (wgrad) {
            uint64_t blk = u / (tg * pk), part = u % (tg * pk);
            kmm_block(ci, pr, blk / pc, &i0, &i1);
            kmm_block(cj, pc, blk % pc, &j0, &j1);
            kmm_block(taps, tg, part % tg, &t0, &t1);
            kmm_block(g.N, pk, part / tg, &n0, &n1);
            q.kpart = pk == 1 ? 0 : part == 0 ? 1 : 2;
            q.kroot = pl->core0 + (uint32_t)(blk * tg * pk);
            q.n_kpeers = 0;
            for (uint64_t i = 1; i < pk; i++)
                q.kpeers[q.n_kpeers++] = q.kroot + (uint32_t)i;
            q.tag = (unsigned)(((q.w_addr >> 6) ^ (q.xi.addr >> 4) ^ (q.dy.addr >> 2)) & 0xffff);
        } else {
            kmm_block(g.N, units, u, &n0, &n1);
        }
        q.t0 = t0, q.t1 = t1, q.nimg = n1 - n0;
        if (kc_core(x, pl->core0 + (uint32_t)u) != NP_OK)
            return kc_status(x);
        uint64_t at, m = wgrad ? nt * q.TM : q.TM;
        uint64_t br = wgrad ? kg_band_rows(&q, q.R) : mn(q.OH, q.R + q.span);
        uint64_t bank = kg_bank(&q, q.TM, q.TN, q.TK, nt, br);
        kc_spad_alloc(x, kg_spad(&q, q.TM, q.TN, q.TK, nt, br), 64, &at);
        kc_acc_alloc(x, m * q.TN * 4, 64, &q.acc);
        if (kc_status(x) != NP_OK)
            return kc_status(x);
        q.bank[0] = at, q.bank[1] = at + bank;
        q.ba = 0;
        if (wgrad) { /* A, staging, B, band */
            q.bst = al64(nt * q.TM * q.TK * q.e);
            q.bb = 2 * q.bst;
            q.bband = q.bb + al64(q.TK * q.TN * q.e);
        } else { /* A, band */
            q.bband = al64(q.TM * nt * q.TK * q.e);
        }
        q.cbuf = at + 2 * bank, q.zero = q.cbuf + al64(m * q.TN * q.oe);
        q.pbuf = q.zero + al64((m > q.TN ? m : q.TN) * q.e);
        q.wres = q.pbuf + (q.pk > 1 ? al64(m * q.TN * 4) : 0);
        unsigned *regs[] = {&q.rA, &q.rB, &q.rC, &q.rK, &q.rK2, &q.rT, &q.rWo};
        for (size_t i = 0; i < sizeof regs / sizeof regs[0]; i++)
            kc_reg_alloc(x, regs[i]);
        unsigned *sems[] = {&q.s_free, &q.s_full, &q.s_ready, &q.s_cfree, &q.s_cfull,
                            &q.s_zeroed, &q.s_band, &q.s_pfree, &q.s_pready, &q.s_reduced,
                            &q.s_bfree, &q.s_bfull};
        for (size_t i = 0; i < sizeof sems / sizeof sems[0]; i++)
            kc_sem_alloc(x, sems[i]);
        if (kc_status(x) != NP_OK)
            return kc_status(x);
        isa_emit *e = x->e;
        if (wgrad) {
            ISA_EMIT(e, LI, isa_reg(q.rA), isa_imm((int64_t)q.xi.addr + (int64_t)(i0 * q.TM * q.e) +
                                                   (int64_t)n0 * q.xi.sn));
            ISA_EMIT(e, LI, isa_reg(q.rB), isa_imm((int64_t)q.dy.addr + (int64_t)(j0 * q.TN * q.e) +
                                                   (int64_t)n0 * q.dy.sn));
            ISA_EMIT(e, LI, isa_reg(q.rC), isa_imm((int64_t)q.w_addr +
                                                   (int64_t)(i0 * q.TM) * q.w_sc +
                                                   (int64_t)(j0 * q.TN * q.oe)));
        } else {
            ISA_EMIT(e, LI, isa_reg(q.rA), isa_imm((int64_t)q.dy.addr + (int64_t)n0 * q.dy.sn));
            ISA_EMIT(e, LI, isa_reg(q.rB), isa_imm((int64_t)q.w_addr));
            ISA_EMIT(e, LI, isa_reg(q.rC), isa_imm((int64_t)q.dx.addr + (int64_t)n0 * q.dx.sn));
        }
        ISA_EMIT(e, LI, isa_reg(q.rK), isa_imm((int64_t)q.bank[0]));
        ISA_EMIT(e, LI, isa_reg(q.rK2), isa_imm((int64_t)q.bank[1]));
        kce *c = &q.c;
        kce_fill(c, SP(0, q.zero), 0.0f, 1, m > q.TN ? m : q.TN, q.dt, 0);
        kce_signal(c, ISA_UNIT_VPU, q.s_ready, 1); /* the zeros are there */
        kce_wait(c, ISA_UNIT_MXU, q.s_ready, 1);
        /* both banks start free (the vector unit zeroes a bank first) */
        isa_unit fu = ISA_UNIT_VPU;
        kce_signal(c, fu, q.s_free, 2);
        kce_signal(c, ISA_UNIT_DMA, q.s_cfree, 1);
        if (q.kpart)
            kce_signal(c, ISA_UNIT_MXU, q.s_pfree, 1);
        if (!wgrad)
            kce_signal(c, ISA_UNIT_MXU, q.s_bfree, 1);
        if (wgrad)
            wg_core(&q, i0, i1, j0, j1);
        else
            ig_core(&q, n1 - n0);
        kce_wait(c, fu, q.s_free, 2);
        kce_wait(c, ISA_UNIT_DMA, q.s_cfree, 1);
        if (q.kpart)
            kce_wait(c, ISA_UNIT_MXU, q.s_pfree, 1);
        if (!wgrad)
            kce_wait(c, ISA_UNIT_DMA, q.s_bfree, 1);
        r->hbm_read_bytes += q.c.rd;
        r->hbm_write_bytes += q.c.wr;
    }
    r->cores = (uint32_t)units;
    return kc_status(x);
}

/* ---- the framework's layouts: permute phases around the kernel ---------------------------- */

/* An [N, C, H, W] image with C > 1 whose channels are not contiguous (the framework's NCHW). */
static bool kg_channel_major(const kc_tensor *t)
{
    return t->ndim == 4 && t->shape[1] > 1 && t->stride[1] != (int64_t)nn_dtype_size(t->dtype);
}

/* An [O, Cg, KH, KW] filter whose outputs are not contiguous (the framework's OIHW). */
static bool kg_filter_oihw(const kc_tensor *t)
{
    return t->ndim == 4 && t->shape[0] > 1 && t->stride[0] != (int64_t)nn_dtype_size(t->dtype);
}

/* A scratch HBM buffer holding t's elements in the kernels' layout (an image channels-last,
 * a filter as [(kh, kw, c)][o]): *s is t's shape with those strides, *dense the same bytes
 * as the dense tensor of permuted dims that permute reads or writes. */
static np_status kg_scratch(kc_ctx *x, const kc_tensor *t, bool filter, kc_tensor *s,
                            kc_tensor *dense)
{
    int64_t e = (int64_t)nn_dtype_size(t->dtype), A = t->shape[0], B = t->shape[1],
            H = t->shape[2], W = t->shape[3];
    uint64_t addr;
    np_err err = {0};
    if (kc_prog_bss(x->prog, NULL, (uint64_t)(A * B * H * W * e), &addr, &err) != NP_OK)
        return kc_fail(x, err.status, "a scratch buffer for %s layout: %s",
                       filter ? "the filter's" : "an image's", err.msg);
    *s = *t;
    s->addr = addr;
    if (filter) { /* [O, Cg, KH, KW] as [KH][KW][Cg][O] */
        int64_t st[4] = {e, A * e, W * B * A * e, B * A * e};
        memcpy(s->stride, st, sizeof st);
        kc_tensor_dense(dense, addr, t->dtype, 4, (int64_t[]){H, W, B, A});
    } else { /* [N, C, H, W] as NHWC */
        int64_t st[4] = {H * W * B * e, e, W * B * e, B * e};
        memcpy(s->stride, st, sizeof st);
        kc_tensor_dense(dense, addr, t->dtype, 4, (int64_t[]){A, H, W, B});
    }
    return NP_OK;
}

/* A permute phase from `in` to `out` (axes: out dim d takes in's axis digit d). */
static np_status kg_permute(kc_ctx *x, const kc_tensor *in, const kc_tensor *out, int64_t axes)
{
    kc_kernel pk = {.op = NN_OP_PERMUTE, .n_in = 1, .n_out = 1, .in = {*in}, .out = {*out},
                    .n_attrs = 1, .attrs = {KC_INT("axes", axes)}, .place = x->k->place};
    return kc_phase_run(x, &pk);
}

/* The gradient with operands in the framework's layouts: images channel-major and filters
 * OIHW are permuted into scratch buffers in the kernels' layouts (a phase), the kernel runs
 * on them (a phase), and a converted result is permuted back. Each conversion reads and
 * writes its tensor once more: the honest price of the layout. */
static np_status kg_compile_any(kc_ctx *x, bool wgrad)
{
    const kc_kernel *k = x->k;
    /* operands: the weight gradient x, dy -> dw; the input gradient dy, w -> dx */
    bool conv_in[2] = {kg_channel_major(&k->in[0]),
                       wgrad ? kg_channel_major(&k->in[1]) : kg_filter_oihw(&k->in[1])};
    bool conv_out = wgrad ? kg_filter_oihw(&k->out[0]) : kg_channel_major(&k->out[0]);
    if (!conv_in[0] && !conv_in[1] && !conv_out)
        return kg_compile(x, wgrad);
    for (int i = 0; i < 2; i++)
        if (k->in[i].ndim != 4)
            return kc_fail(x, NP_ERR_INCONSISTENT, "operands must be 4-D (NCHW images, OIHW "
                           "weights)");
    kc_kernel kk = *k;
    kc_tensor dense;
    for (int i = 0; i < 2; i++) {
        bool filter = !wgrad && i == 1;
        if (conv_in[i] && (kg_scratch(x, &k->in[i], filter, &kk.in[i], &dense) != NP_OK ||
                           kg_permute(x, &k->in[i], &dense, filter ? 2310 : 231) != NP_OK))
            return kc_status(x);
    }
    kc_tensor out_dense;
    if (conv_out && kg_scratch(x, &k->out[0], wgrad, &kk.out[0], &out_dense) != NP_OK)
        return kc_status(x);
    if (kc_phase_end(x) != NP_OK || kc_phase_run(x, &kk) != NP_OK)
        return kc_status(x);
    char how[sizeof x->res->schedule];
    snprintf(how, sizeof how, "%s", x->res->schedule);
    if (conv_out && (kc_phase_end(x) != NP_OK ||
                     kg_permute(x, &out_dense, &k->out[0], wgrad ? 3201 : 312) != NP_OK))
        return kc_status(x);
    snprintf(x->res->schedule, sizeof x->res->schedule, "%.100s; framework layouts permuted",
             how);
    return kc_status(x);
}

static np_status grad_input_compile(kc_ctx *x) { return kg_compile_any(x, false); }
static np_status grad_weight_compile(kc_ctx *x) { return kg_compile_any(x, true); }

/* ---- the framework's computation of each -------------------------------------------------- */

static int64_t kg_attr(const kc_kernel *k, const char *name, int64_t dflt)
{
    for (int i = 0; i < k->n_attrs; i++)
        if (!strcmp(k->attrs[i].name, name))
            return k->attrs[i].i;
    return dflt;
}

static np_status kg_reference(nn_graph *g, const kc_kernel *k, nn_tensor *const *in,
                              nn_tensor **out, np_err *err)
{
    int64_t s = kg_attr(k, "stride", 1), p = kg_attr(k, "pad", 0), d = kg_attr(k, "dilation", 1);
    int64_t sw = kg_attr(k, "stride_w", 0), pw = kg_attr(k, "pad_w", -1),
            dw = kg_attr(k, "dilation_w", 0);
    if ((sw && sw != s) || (pw >= 0 && pw != p) || (dw && dw != d))
        return np_err_set(err, NP_ERR_INCONSISTENT, "%s: the framework's convolution has one "
                          "stride, pad and dilation for both dims", nn_op_name(k->op));
    const kc_tensor *o = &k->out[0];
    int64_t ip[NN_MAX_IPARAMS] = {s, p, d, kg_attr(k, "groups", 1), o->shape[2], o->shape[3]};
    out[0] = nn_node(g, k->op, 2, (nn_tensor *[]){in[0], in[1]}, ip, NULL);
    return out[0] ? NP_OK : nn_graph_status(g, err);
}

/* The gradients' node parameters (framework/op_linalg.c, conv2d's): ip[0] stride, ip[1] pad,
 * ip[2] dilation, ip[3] groups (one of each for both dims); ip[4..5] the output's H and W. */
static np_status kg_from_node(const nn_tensor *t, kc_kernel *k, np_err *err)
{
    if (k->n_attrs + 4 > KC_MAX_ATTRS)
        return np_err_set(err, NP_ERR_RANGE, "%s: no room for its attributes", nn_op_name(t->op));
    k->attrs[k->n_attrs++] = KC_INT("stride", t->ip[0]);
    k->attrs[k->n_attrs++] = KC_INT("pad", t->ip[1]);
    k->attrs[k->n_attrs++] = KC_INT("dilation", t->ip[2]);
    k->attrs[k->n_attrs++] = KC_INT("groups", t->ip[3]);
    return NP_OK;
}

/* ---- `npusim kernel --op` ------------------------------------------------------------------ */

static const kc_attr_def kg_keys[] = {
    {"n", KC_ATTR_INT, 1, 1, 65536, "images"},
    {"h", KC_ATTR_INT, KC_REQUIRED, 1, 1048576, "input height"},
    {"w", KC_ATTR_INT, KC_REQUIRED, 1, 1048576, "input width"},
    {"c", KC_ATTR_INT, KC_REQUIRED, 1, 1048576, "input channels"},
    {"k", KC_ATTR_INT, KC_REQUIRED, 1, 1048576, "output channels (filters)"},
    {"r", KC_ATTR_INT, KC_REQUIRED, 1, 65535, "filter height"},
    {"s", KC_ATTR_INT, KC_REQUIRED, 1, 65535, "filter width"},
    {"dtype", KC_ATTR_DTYPE, NN_BF16, 0, 0, "every operand's type"},
};

static int64_t spec_i(const kc_spec *s, const char *name, int64_t dflt)
{
    const kc_spec_val *v = kc_spec_get(s, name);
    return v ? v->i : dflt;
}

/* x, dy channels-last, w as [(r, s, c)][k]: the layouts the conv2d kernels take. */
static np_status kg_build(kc_prog *p, const kc_spec *s, kc_kernel *k, np_err *err)
{
    nn_dtype dt = (nn_dtype)spec_i(s, "dtype", NN_BF16);
    int64_t N = spec_i(s, "n", 1), H = spec_i(s, "h", 1), W = spec_i(s, "w", 1),
            C = spec_i(s, "c", 1), O = spec_i(s, "k", 1), R = spec_i(s, "r", 1),
            S = spec_i(s, "s", 1), G = spec_i(s, "groups", 1);
    int64_t sh = spec_i(s, "stride", 1), sw = spec_i(s, "stride_w", 0);
    int64_t ph = spec_i(s, "pad", 0), pw = spec_i(s, "pad_w", -1);
    int64_t dh = spec_i(s, "dilation", 1), dw = spec_i(s, "dilation_w", 0);
    sw = sw ? sw : sh, pw = pw >= 0 ? pw : ph, dw = dw ? dw : dh;
    int64_t E = (H + 2 * ph - dh * (R - 1) - 1) / sh + 1;
    int64_t F = (W + 2 * pw - dw * (S - 1) - 1) / sw + 1;
    if (E < 1 || F < 1 || C % G || O % G)
        return np_err_set(err, NP_ERR_RANGE, "%s: a %" PRId64 "x%" PRId64 " filter on %" PRId64
                          "x%" PRId64 " with %" PRId64 " groups of %" PRId64 " channels and %"
                          PRId64 " outputs does not fit", nn_op_name(s->op), R, S, H, W, G, C, O);
    int64_t e = (int64_t)nn_dtype_size(dt), cg = C / G;
    uint64_t ax, aw, ay;
    if (kc_prog_bss(p, "X", (uint64_t)(N * H * W * C * e), &ax, err) != NP_OK ||
        kc_prog_bss(p, "W", (uint64_t)(R * S * cg * O * e), &aw, err) != NP_OK ||
        kc_prog_bss(p, "DY", (uint64_t)(N * E * F * O * e), &ay, err) != NP_OK)
        return err->status;
    kc_tensor tx = {ax, dt, 4, {N, C, H, W}, {H * W * C * e, e, W * C * e, C * e}};
    kc_tensor tw = {aw, dt, 4, {O, cg, R, S}, {e, O * e, S * cg * O * e, cg * O * e}};
    kc_tensor ty = {ay, dt, 4, {N, O, E, F}, {E * F * O * e, e, F * O * e, O * e}};
    k->n_in = 2, k->n_out = 1;
    if (s->op == NN_OP_CONV2D_GRAD_INPUT)
        k->in[0] = ty, k->in[1] = tw, k->out[0] = tx;
    else
        k->in[0] = tx, k->in[1] = ty, k->out[0] = tw;
    return NP_OK;
}

/* ---- the table rows ----------------------------------------------------------------------- */

static const kc_attr_def kg_attrs[] = {
    {"stride", KC_ATTR_INT, 1, 1, 65535, "vertical stride (and horizontal unless stride_w)"},
    {"stride_w", KC_ATTR_INT, 0, 0, 65535, "horizontal stride (0: stride)"},
    {"pad", KC_ATTR_INT, 0, 0, 65535, "zero padding above and below (and beside unless pad_w)"},
    {"pad_w", KC_ATTR_INT, -1, -1, 65535, "zero padding left and right (-1: pad)"},
    {"dilation", KC_ATTR_INT, 1, 1, 65535, "vertical dilation (and horizontal unless dilation_w)"},
    {"dilation_w", KC_ATTR_INT, 0, 0, 65535, "horizontal filter dilation (0: dilation)"},
    {"groups", KC_ATTR_INT, 1, 1, 65535, "channel groups (groups = channels: depthwise)"},
};

const kc_kernel_def kc_conv2d_grad_input_def = {
    .op = NN_OP_CONV2D_GRAD_INPUT, .n_in = 2, .n_out = 1,
    .attrs = kg_attrs, .n_attrs = sizeof kg_attrs / sizeof kg_attrs[0],
    .compile = grad_input_compile, .reference = kg_reference, .from_node = kg_from_node,
    .keys = kg_keys, .n_keys = sizeof kg_keys / sizeof kg_keys[0], .build = kg_build,
    .doc = "implicit GEMM per stride phase: dy gathered with a tap's constant shift (outside "
           "zeroed), w's tap blocks loaded transposed, border rows emitted once; depthwise on "
           "the vector unit",
};

const kc_kernel_def kc_conv2d_grad_weight_def = {
    .op = NN_OP_CONV2D_GRAD_WEIGHT, .n_in = 2, .n_out = 1,
    .attrs = kg_attrs, .n_attrs = sizeof kg_attrs / sizeof kg_attrs[0],
    .compile = grad_weight_compile, .reference = kg_reference, .from_node = kg_from_node,
    .keys = kg_keys, .n_keys = sizeof kg_keys / sizeof kg_keys[0], .build = kg_build,
    .doc = "implicit GEMM per tap over the output pixels the tap sees: x gathered and "
           "transposed, dy stationary, images and runs of rows as loops; depthwise on the "
           "vector unit",
};
