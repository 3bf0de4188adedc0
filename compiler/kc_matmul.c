/* kc_matmul.c — matmul (batched, either operand transposed) and 2-D convolution (implicit
 * im2col) as one tiled, double-buffered GEMM schedule on the matrix unit.
 *
 * The GEMM C[M][N] = A[M][K] x B[K][N] is cut into TM x TN output tiles (edge tiles smaller),
 * each computed over TK-deep K slices that alternate between two scratchpad buffer sets, so
 * that the DMA engine fetches slice l + 1 while the array multiplies slice l:
 *
 *   per slice (buffer b):
 *     DMA  wait free[b]; A slice -> A[b] (a transposed A goes to a staging buffer and the VPU
 *          transposes it into A[b]); B slice -> B[b]; signal full[b]
 *     MXU  wait full[b]; mxu.load B[b]; mxu.mm acc (set on the tile's first slice, else
 *          accumulate); signal free[b]
 *   per tile:
 *     MXU  wait cfree; mxu.drain acc -> C (with the epilogue's fused scale, bias, activation);
 *          signal cfull (through the VPU when the epilogue has vector steps)
 *     DMA  wait cfull; C -> HBM; signal cfree
 *
 * The regular part of the schedule is loops (kc_loop) with register steps: batches, rows of
 * full tiles, full tiles of a row and pairs of full K slices; edge tiles and slices are
 * emitted once after their loop, so a kernel's size grows with its distinct tile shapes, not
 * with tiles x slices. Buffers alternate across tiles as well; a loop whose body flips the
 * buffer parity an odd number of times runs over pairs of iterations. A convolution's A
 * slices are gathered by strided dma.copy straight from the NHWC input (no im2col matrix in
 * HBM); its loops stay loops where tiles are whole output rows (M) and slices whole filter
 * rows (K), else those iterations are emitted one by one. With several cores the tile grid
 * is cut into one block of rows x columns per core. docs/compiler.md has the whole story.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "kc_matmul.h"

static uint64_t min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }
static uint64_t cdiv(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

/* ---- tiles ---------------------------------------------------------------------------------- */

np_status kc_gemm_tiles(const arch_config *cfg, const kc_gemm_shape *g, uint64_t spad,
                        uint64_t acc, uint64_t *tm_io, uint64_t *tn_io, uint64_t *tk_io,
                        np_err *err)
{
    if (!g->m || !g->n || !g->k)
        return np_err_set(err, NP_ERR_RANGE, "a %llux%llux%llu GEMM: M, N and K must be >= 1",
                          (unsigned long long)g->m, (unsigned long long)g->n,
                          (unsigned long long)g->k);
    uint64_t e = g->e, ce = g->ce;
    uint64_t R = (uint64_t)cfg->core.array_rows, C = (uint64_t)cfg->core.array_cols;
    /* The dimension the dataflow streams through time (os: K, ws: M, is: N) gets the largest
     * tile the memories allow: splitting it makes every fold pay its fill and drain again.
     * The two spatial dimensions get 4 array widths, so folds stay whole. The buffers beyond
     * A, B (double) and C count as kc_gemm_shape says. */
    uint64_t tm = *tm_io, tn = *tn_io, tk = *tk_io;
    uint64_t ea = e * (2 + g->extra_mk), fixed_n = g->extra_n, fixed_m = g->extra_m;
    switch (cfg->core.dataflow) {
    case ARCH_DATAFLOW_OS:
        tm = tm ? tm : min_u64(g->m, 4 * R);
        tn = tn ? tn : min_u64(g->n, 4 * C);
        tm = min_u64(tm, 65535), tn = min_u64(tn, 65535);
        if (!*tm_io) /* the accumulators bound the spatial tile */
            while (tm > 1 && tm * tn * 4 > acc)
                tm = (tm + 1) / 2;
        if (!tk) {
            uint64_t fixed = tm * tn * (ce + g->extra_mn) + tn * fixed_n + tm * fixed_m + g->extra;
            tk = spad > fixed ? (spad - fixed) / (ea * tm + 2 * tn * e) : 0;
            tk = min_u64(min_u64(g->k, 65535), tk);
        }
        break;
    case ARCH_DATAFLOW_IS:
        tk = tk ? tk : min_u64(g->k, 4 * R);
        tm = tm ? tm : min_u64(g->m, 4 * C);
        tk = min_u64(tk, 65535), tm = min_u64(tm, 65535);
        if (!tn) {
            uint64_t by_acc = acc / (4 * tm), fixed = ea * tm * tk + tm * fixed_m + g->extra;
            uint64_t by_spad = spad > fixed ? (spad - fixed) / (2 * tk * e + tm * (ce + g->extra_mn) + fixed_n) : 0;
            tn = min_u64(min_u64(g->n, 65535), min_u64(by_acc, by_spad));
        }
        break;
    default: /* WS */
        tk = tk ? tk : min_u64(g->k, 4 * R);
        tn = tn ? tn : min_u64(g->n, 4 * C);
        tk = min_u64(tk, 65535), tn = min_u64(tn, 65535);
        if (!tm) {
            uint64_t by_acc = acc / (4 * tn), fixed = 2 * tk * tn * e + tn * fixed_n + g->extra;
            uint64_t by_spad = spad > fixed ? (spad - fixed) / (ea * tk + tn * (ce + g->extra_mn) + fixed_m) : 0;
            tm = min_u64(min_u64(g->m, 65535), min_u64(by_acc, by_spad));
        }
        break;
    }
    /* With several cores, enough output tiles for all of them: halve the larger of the
     * output tile sizes not given. */
    for (uint64_t cores = g->cores ? g->cores : 1; cores > 1 && tm && tn;) {
        uint64_t tiles = cdiv(g->m, tm) * cdiv(g->n, tn);
        bool can_m = !*tm_io && tm > 1, can_n = !*tn_io && tn > 1;
        if (tiles >= cores || (!can_m && !can_n))
            break;
        if (can_m && (!can_n || tm >= tn))
            tm = (tm + 1) / 2;
        else
            tn = (tn + 1) / 2;
    }
    if (!tm || !tn || !tk)
        return np_err_set(err, NP_ERR_RANGE,
                          "a %llux%llux%llu GEMM: no tile fits the scratchpad (%llu bytes free) "
                          "and accumulators (%llu bytes free)",
                          (unsigned long long)g->m, (unsigned long long)g->n,
                          (unsigned long long)g->k, (unsigned long long)spad,
                          (unsigned long long)acc);
    if (tm * tn * 4 > acc)
        return np_err_set(err, NP_ERR_RANGE, "a %llux%llu tile needs %llu accumulator bytes, "
                          "more than the %llu free", (unsigned long long)tm,
                          (unsigned long long)tn, (unsigned long long)(tm * tn * 4),
                          (unsigned long long)acc);
    uint64_t need = kc_gemm_spad_bytes(g, tm, tn, tk);
    if (need > spad)
        return np_err_set(err, NP_ERR_RANGE, "%llux%llux%llu tiles (double-buffered) need %llu "
                          "scratchpad bytes, more than the %llu free",
                          (unsigned long long)tm, (unsigned long long)tn,
                          (unsigned long long)tk, (unsigned long long)need,
                          (unsigned long long)spad);
    *tm_io = tm, *tn_io = tn, *tk_io = tk;
    return NP_OK;
}

uint64_t kc_gemm_spad_bytes(const kc_gemm_shape *g, uint64_t tm, uint64_t tn, uint64_t tk)
{
    return (2 + g->extra_mk) * tm * tk * g->e + 2 * tk * tn * g->e +
           tm * tn * (g->ce + g->extra_mn) + tn * g->extra_n + tm * g->extra_m + g->extra;
}

/* ---- the plan of one kernel ----------------------------------------------------------------- */

typedef enum { KMM_A_ROWS, KMM_A_COLS, KMM_A_CONV } kmm_akind;

/* A convolution's geometry as the gathers need it (elements; the input is NHWC). */
typedef struct kmm_conv {
    uint64_t h, w, c, r, s, sh, sw, e_out, f_out; /* e_out x f_out output pixels */
    uint64_t sc;                                  /* S x C: one filter row's window run */
    bool rows_ok; /* a gather may step over filter rows (W x C x e fits src_s1) */
} kmm_conv;

/* An operand of the epilogue: where its tile for output tile (i0, j0) comes from. */
typedef struct kmm_arg {
    uint64_t base;       /* HBM address of the element for output (0, 0) of batch 0 */
    int64_t sbat[3];     /* bytes per batch index of each batch loop */
    int64_t sm, sn;      /* bytes per output row / column (0: broadcast) */
    isa_dtype dt;
    isa_bcast bcast;     /* how the VPU reads the loaded tile */
    bool cast;           /* loaded in dt, converted to the output's type (or fp32 for a bias) */
    unsigned reg;
    uint64_t raw, buf;   /* scratchpad: as loaded, and converted (== raw without a cast) */
} kmm_arg;

/* One vector step of the epilogue on the drained C tile. */
typedef struct kmm_step {
    isa_op op;
    int arg;   /* index into args, or -1 */
    float imm; /* VPU_MULS */
} kmm_step;

#define KMM_MAX_BATCH 3

typedef struct kmm {
    kc_ctx *x;
    uint64_t M, N, K, TM, TN, TK;
    isa_dtype dt, cdt;
    uint64_t e, ce;
    kmm_akind ak;
    bool b_cols;             /* B is stored column-major (N rows of K) */
    uint64_t a_base, b_base, c_base;
    int64_t lda, ldb, ldc;   /* bytes between rows: A (ROWS: i, COLS: k), B (k, or n), C (i) */
    int nb;                  /* batch loops */
    uint64_t bcount[KMM_MAX_BATCH];
    int64_t bsa[KMM_MAX_BATCH], bsb[KMM_MAX_BATCH], bsc[KMM_MAX_BATCH];
    kmm_conv cv;
    bool m_regular, k_regular; /* rows of full tiles / pairs of full slices can loop */
    /* the epilogue: the drain's fused part, then vector steps */
    isa_act act;
    float scale;
    int bias;                /* arg index of the drain's bias, or -1 */
    int n_args, n_steps;
    kmm_arg args[KC_MAX_EPI];
    kmm_step steps[KC_MAX_EPI];
    /* this core's resources */
    unsigned rA, rB, rC;
    unsigned s_full[2], s_free[2], s_staged[2], s_cfull, s_cfree, s_drained, s_eready, s_braw,
        s_bready;
    uint64_t abuf[2], bbuf[2], stage[2], cbuf, acc;
    /* traffic, counted as emitted times the enclosing loops' counts */
    uint64_t mult, rd, wr;
} kmm;

/* The representative position of a body: batch byte offsets and output tile origin. */
typedef struct kmm_pos {
    int64_t oa, ob, oc, oarg[KC_MAX_EPI];
    uint64_t i0, j0;
} kmm_pos;

/* ---- emitting ------------------------------------------------------------------------------- */

static void sem_wait(kmm *m, isa_unit u, unsigned s)
{
    ISA_EMIT(m->x->e, SEM_WAIT, isa_enum(u), isa_sem(s));
}

static void sem_signal(kmm *m, isa_unit u, unsigned s)
{
    ISA_EMIT(m->x->e, SEM_SIGNAL, isa_enum(u), isa_sem(s));
}

/* dma.copy of n2 x n1 x n0 elements of dt; strides in bytes (ignored where a count is 1). */
static void dma(kmm *m, isa_opnd dst, isa_opnd src, isa_dtype dt, uint64_t n0, uint64_t n1,
                uint64_t n2, uint64_t ds1, uint64_t ss1, uint64_t ds2, uint64_t ss2)
{
    bool rows = n1 > 1 || n2 > 1, planes = n2 > 1;
    uint64_t row = n0 * isa_dtype_size[dt];
    /* strides equal to the packed layout are left out (0 means packed) */
    if (!rows || ds1 == row)
        ds1 = 0;
    if (!rows || ss1 == row)
        ss1 = 0;
    if (!planes || ds2 == n1 * (ds1 ? ds1 : row))
        ds2 = 0;
    if (!planes || ss2 == n1 * (ss1 ? ss1 : row))
        ss2 = 0;
    ISA_EMIT(m->x->e, DMA_COPY, dst, src, isa_enum(dt), isa_imm((int64_t)n0),
             isa_imm((int64_t)n1), isa_imm((int64_t)n2), isa_imm((int64_t)ds1),
             isa_imm((int64_t)ss1), isa_imm((int64_t)ds2), isa_imm((int64_t)ss2));
    uint64_t bytes = n0 * n1 * n2 * isa_dtype_size[dt] * m->mult;
    if (src.space == ISA_SPACE_HBM)
        m->rd += bytes;
    if (dst.space == ISA_SPACE_HBM)
        m->wr += bytes;
}

/* A loop over count iterations of a body that flips the buffer parity `flip` times (mod 2)
 * per iteration, stepping the registers by steps[] per iteration; body(k) emits iteration k
 * with its offsets as for iteration k relative to the loop's first. Pairs of iterations when
 * flip is odd; iterations one by one when !regular. Returns the parity after it. */
typedef unsigned (*kmm_body)(kmm *m, const kmm_pos *p, uint64_t k, unsigned parity, bool in_loop,
                             void *ctx);

static unsigned kmm_loop(kmm *m, const kmm_pos *p, uint64_t count, unsigned flip, bool regular,
                         unsigned n, const unsigned *regs, const int64_t *steps, kmm_body body,
                         void *ctx, unsigned parity)
{
    if (count == 0)
        return parity;
    if (count == 1 || !regular) {
        for (uint64_t k = 0; k < count; k++)
            parity = body(m, p, k, parity, false, ctx);
        return parity;
    }
    uint64_t iters = flip & 1 ? count / 2 : count, per = flip & 1 ? 2 : 1;
    int64_t st[KC_LOOP_MAX_REGS];
    for (unsigned i = 0; i < n; i++)
        st[i] = steps[i] * (int64_t)per;
    kc_loop l;
    kc_loop_begin(m->x, &l, iters, n, regs, st);
    uint64_t saved = m->mult;
    m->mult *= iters;
    unsigned q = parity;
    for (uint64_t k = 0; k < per; k++)
        q = body(m, p, k, q, l.real, ctx);
    m->mult = saved;
    kc_loop_end(m->x, &l);
    if (per == 2 && count % 2) /* the odd one out, after the loop (registers back at the start) */
        parity = body(m, p, count - 1, parity, false, ctx);
    return parity;
}

/* ---- A slices of a convolution: gathers from the NHWC input ---------------------------------- */

/* The pieces of the M tile [i0, i0 + tm): each a partial output row or a run of whole output
 * rows. With fn non-NULL, calls it per piece; returns the count. */
static uint64_t tile_pieces(uint64_t F, uint64_t i0, uint64_t tm,
                            void (*fn)(void *, uint64_t, uint64_t, uint64_t), void *ctx)
{
    uint64_t end = i0 + tm, n = 0;
    for (uint64_t q = i0; q < end; n++) {
        uint64_t cnt, rows;
        if (q % F || end - q < F)
            cnt = min_u64(F - q % F, end - q), rows = 1;
        else
            cnt = F, rows = (end - q) / F;
        if (fn)
            fn(ctx, q, cnt, rows);
        q += cnt * rows;
    }
    return n;
}

typedef struct gather_ctx {
    kmm *m;
    uint64_t sa, i0, k0, tk, klo, khi;
    int64_t base; /* byte offset of the slice's image and, relative to rA's loop start */
} gather_ctx;

/* Per piece: one gather per filter row that columns [klo, khi) of the slice touch, of the
 * contiguous (s, c) run of that row: n0 = the run, n1 = pixels of a row (src step
 * stride_w x C), n2 = output rows (src step stride x W x C). */
static void gather_piece(void *v, uint64_t q, uint64_t cnt, uint64_t rows)
{
    const gather_ctx *x = v;
    kmm *m = x->m;
    const kmm_conv *g = &m->cv;
    uint64_t oh = q / g->f_out, ow = q % g->f_out, e = m->e;
    for (uint64_t fr = x->klo / g->sc; fr * g->sc < x->khi; fr++) {
        uint64_t lo = fr * g->sc > x->klo ? fr * g->sc : x->klo;
        uint64_t hi = min_u64((fr + 1) * g->sc, x->khi);
        uint64_t src = ((oh * g->sh + fr) * g->w + ow * g->sw) * g->c + (lo - fr * g->sc);
        dma(m, isa_spad(0, x->sa + ((q - x->i0) * x->tk + (lo - x->k0)) * e),
            isa_hbm(m->rA, (uint64_t)x->base + src * e), m->dt, hi - lo, cnt, rows, x->tk * e,
            g->sw * g->c * e, g->f_out * x->tk * e, g->sh * g->w * g->c * e);
    }
}

/* The gathers of one A slice: tile rows [i0, i0 + tm) (output pixels), K columns [k0, k0 +
 * tk), into the scratchpad at sa (tm rows of tk elements). The slice's whole filter rows
 * [ra, rb) are gathered either per piece and filter row (gather_piece) or, when that takes
 * more copies, per output row the tile touches with one copy for all of them (n0 = S x C,
 * n1 = filter rows, src step W x C; n2 = pixels); the partial filter rows at the slice's ends
 * always per piece. */
static void emit_gather(kmm *m, int64_t base, uint64_t sa, uint64_t i0, uint64_t tm,
                        uint64_t k0, uint64_t tk)
{
    const kmm_conv *g = &m->cv;
    uint64_t F = g->f_out, SC = g->sc, e = m->e;
    uint64_t ra = (k0 + SC - 1) / SC, rb = (k0 + tk) / SC;
    gather_ctx x = {m, sa, i0, k0, tk, k0, k0 + tk, base};
    if (rb > ra && g->rows_ok) {
        uint64_t pieces = tile_pieces(F, i0, tm, NULL, NULL);
        uint64_t touched = (i0 + tm - 1) / F - i0 / F + 1;
        if (touched < pieces * (rb - ra)) {
            if (k0 < ra * SC) /* the head: part of filter row ra - 1 */
                x.klo = k0, x.khi = ra * SC, tile_pieces(F, i0, tm, gather_piece, &x);
            for (uint64_t oh = i0 / F; oh * F < i0 + tm; oh++) {
                uint64_t lo = oh * F > i0 ? oh * F : i0, hi = min_u64((oh + 1) * F, i0 + tm);
                uint64_t src = ((oh * g->sh + ra) * g->w + (lo - oh * F) * g->sw) * g->c;
                dma(m, isa_spad(0, sa + ((lo - i0) * tk + (ra * SC - k0)) * e),
                    isa_hbm(m->rA, (uint64_t)base + src * e), m->dt, SC, rb - ra, hi - lo,
                    SC * e, g->w * g->c * e, tk * e, g->sw * g->c * e);
            }
            if (rb * SC < k0 + tk) /* the tail: part of filter row rb */
                x.klo = rb * SC, x.khi = k0 + tk, tile_pieces(F, i0, tm, gather_piece, &x);
            return;
        }
    }
    tile_pieces(F, i0, tm, gather_piece, &x);
}

/* ---- slices and tiles ----------------------------------------------------------------------- */

/* Slice k (of TK) of the tile at p (tm x tn): the DMA and MXU halves. */
static void emit_slice(kmm *m, const kmm_pos *p, uint64_t tm, uint64_t tn, uint64_t k0,
                       uint64_t tk, unsigned b, isa_accm mode)
{
    isa_emit *e = m->x->e;
    uint64_t es = m->e;
    sem_wait(m, ISA_UNIT_DMA, m->s_free[b]);
    switch (m->ak) {
    case KMM_A_ROWS:
        dma(m, isa_spad(0, m->abuf[b]),
            isa_hbm(m->rA, (uint64_t)(p->oa + (int64_t)p->i0 * m->lda) + k0 * es), m->dt, tk,
            tm, 1, tk * es, (uint64_t)m->lda, 0, 0);
        break;
    case KMM_A_COLS:
        dma(m, isa_spad(0, m->stage[b]),
            isa_hbm(m->rA, (uint64_t)(p->oa + (int64_t)k0 * m->lda) + p->i0 * es), m->dt, tm,
            tk, 1, tm * es, (uint64_t)m->lda, 0, 0);
        break;
    case KMM_A_CONV:
        emit_gather(m, p->oa, m->abuf[b], p->i0, tm, k0, tk);
        break;
    }
    if (!m->b_cols)
        dma(m, isa_spad(0, m->bbuf[b]),
            isa_hbm(m->rB, (uint64_t)(p->ob + (int64_t)k0 * m->ldb) + p->j0 * es), m->dt, tn, tk,
            1, tn * es, (uint64_t)m->ldb, 0, 0);
    else
        dma(m, isa_spad(0, m->bbuf[b]),
            isa_hbm(m->rB, (uint64_t)(p->ob + (int64_t)p->j0 * m->ldb) + k0 * es), m->dt, tk, tn,
            1, tk * es, (uint64_t)m->ldb, 0, 0);
    if (m->ak == KMM_A_COLS) {
        sem_signal(m, ISA_UNIT_DMA, m->s_staged[b]);
        sem_wait(m, ISA_UNIT_VPU, m->s_staged[b]);
        ISA_EMIT(e, VPU_TRANSPOSE, isa_spad(0, m->abuf[b]), isa_spad(0, m->stage[b]),
                 isa_imm((int64_t)tk), isa_imm((int64_t)tm), isa_enum(m->dt));
        sem_signal(m, ISA_UNIT_VPU, m->s_full[b]);
    } else {
        sem_signal(m, ISA_UNIT_DMA, m->s_full[b]);
    }
    sem_wait(m, ISA_UNIT_MXU, m->s_full[b]);
    ISA_EMIT(e, MXU_LOAD, isa_spad(0, m->bbuf[b]), isa_imm((int64_t)tk), isa_imm((int64_t)tn),
             isa_enum(m->dt), isa_imm(m->b_cols));
    ISA_EMIT(e, MXU_MM, isa_acc(0, m->acc), isa_spad(0, m->abuf[b]), isa_imm((int64_t)tm),
             isa_enum(m->dt), isa_enum(mode));
    sem_signal(m, ISA_UNIT_MXU, m->s_free[b]);
}

typedef struct slice_ctx {
    uint64_t tm, tn, first; /* the loop's first full slice */
} slice_ctx;

/* A body of the loop over the full slices after a tile's head: they accumulate. */
static unsigned body_slice(kmm *m, const kmm_pos *p, uint64_t k, unsigned b, bool in_loop, void *v)
{
    (void)in_loop;
    const slice_ctx *s = v;
    emit_slice(m, p, s->tm, s->tn, (s->first + k) * m->TK, m->TK, b, ISA_ACCM_ACCUM);
    return b ^ 1;
}

/* Where an epilogue operand's tile for the tile at p starts, relative to its register. */
static uint64_t arg_off(const kmm *m, const kmm_pos *p, int a)
{
    const kmm_arg *g = &m->args[a];
    return (uint64_t)(p->oarg[a] + (int64_t)p->i0 * g->sm + (int64_t)p->j0 * g->sn);
}

/* Loads operand a's tile (tm x tn of the output, as broadcast) into its raw buffer. */
static void load_arg(kmm *m, const kmm_pos *p, int a, uint64_t tm, uint64_t tn)
{
    const kmm_arg *g = &m->args[a];
    uint64_t ae = isa_dtype_size[g->dt];
    isa_opnd src = isa_hbm(g->reg, arg_off(m, p, a)), dst = isa_spad(0, g->raw);
    switch (g->bcast) {
    case ISA_BCAST_ROW: dma(m, dst, src, g->dt, tn, 1, 1, 0, 0, 0, 0); break;
    case ISA_BCAST_COL: dma(m, dst, src, g->dt, 1, tm, 1, ae, (uint64_t)g->sm, 0, 0); break;
    case ISA_BCAST_SCALAR: dma(m, dst, src, g->dt, 1, 1, 1, 0, 0, 0, 0); break;
    default: dma(m, dst, src, g->dt, tn, tm, 1, tn * ae, (uint64_t)g->sm, 0, 0); break;
    }
}

/* The elements of arg a's loaded tile (rows x cols as the VPU reads it). */
static void arg_shape(const kmm *m, int a, uint64_t tm, uint64_t tn, uint64_t *rows,
                      uint64_t *cols)
{
    switch (m->args[a].bcast) {
    case ISA_BCAST_ROW: *rows = 1, *cols = tn; break;
    case ISA_BCAST_COL: *rows = 1, *cols = tm; break;
    case ISA_BCAST_SCALAR: *rows = 1, *cols = 1; break;
    default: *rows = tm, *cols = tn; break;
    }
}

static void cast_arg(kmm *m, int a, uint64_t tm, uint64_t tn, isa_dtype to)
{
    const kmm_arg *g = &m->args[a];
    uint64_t rows, cols;
    arg_shape(m, a, tm, tn, &rows, &cols);
    ISA_EMIT(m->x->e, VPU_CAST, isa_spad(0, g->buf), isa_spad(0, g->raw), isa_imm((int64_t)rows),
             isa_imm((int64_t)cols), isa_enum(to), isa_enum(g->dt));
}

/* The end of the tile at p, its slices done: the epilogue's operands, the drain and the
 * epilogue's vector steps (the store follows with emit_store, after the next tile's first
 * slice when there is one). */
static void emit_drain(kmm *m, const kmm_pos *p, uint64_t tm, uint64_t tn)
{
    isa_emit *e = m->x->e;
    /* operands of the epilogue: loaded after the tile's slices (the DMA queue is free then) */
    if (m->bias >= 0) {
        load_arg(m, p, m->bias, tm, tn);
        if (m->args[m->bias].cast) {
            sem_signal(m, ISA_UNIT_DMA, m->s_braw);
            sem_wait(m, ISA_UNIT_VPU, m->s_braw);
            cast_arg(m, m->bias, tm, tn, ISA_DTYPE_FP32);
            sem_signal(m, ISA_UNIT_VPU, m->s_bready);
        } else {
            sem_signal(m, ISA_UNIT_DMA, m->s_bready);
        }
    }
    if (m->n_steps) {
        bool any = false;
        for (int a = 0; a < m->n_args; a++)
            if (a != m->bias) {
                load_arg(m, p, a, tm, tn);
                any = true;
            }
        if (any)
            sem_signal(m, ISA_UNIT_DMA, m->s_eready);
    }
    sem_wait(m, ISA_UNIT_MXU, m->s_cfree);
    if (m->bias >= 0)
        sem_wait(m, ISA_UNIT_MXU, m->s_bready);
    ISA_EMIT(e, MXU_DRAIN, isa_spad(0, m->cbuf), isa_acc(0, m->acc), isa_imm((int64_t)tm),
             isa_imm((int64_t)tn), isa_enum(m->cdt), isa_enum(m->act), isa_f32(m->scale),
             m->bias >= 0 ? isa_spad(0, m->args[m->bias].buf) : isa_none());
    if (m->n_steps) {
        sem_signal(m, ISA_UNIT_MXU, m->s_drained);
        sem_wait(m, ISA_UNIT_VPU, m->s_drained);
        bool loaded = false;
        for (int a = 0; a < m->n_args; a++)
            loaded = loaded || a != m->bias;
        if (loaded)
            sem_wait(m, ISA_UNIT_VPU, m->s_eready);
        for (int a = 0; a < m->n_args; a++)
            if (a != m->bias && m->args[a].cast)
                cast_arg(m, a, tm, tn, m->cdt);
        isa_opnd c = isa_spad(0, m->cbuf), rows = isa_imm((int64_t)tm), cols = isa_imm((int64_t)tn);
        for (int i = 0; i < m->n_steps; i++) {
            const kmm_step *s = &m->steps[i];
            isa_insn in;
            isa_insn_init(&in, s->op);
            if (isa_ops[s->op].family == ISA_FAMILY_VPU_BINARY) {
                in.VPU_ADD.dst = c, in.VPU_ADD.a = c, in.VPU_ADD.b = isa_spad(0, m->args[s->arg].buf);
                in.VPU_ADD.rows = rows, in.VPU_ADD.cols = cols, in.VPU_ADD.dtype = isa_enum(m->cdt);
                in.VPU_ADD.bcast = isa_enum(m->args[s->arg].bcast);
            } else if (isa_ops[s->op].family == ISA_FAMILY_VPU_SCALAR) {
                in.VPU_ADDS.dst = c, in.VPU_ADDS.a = c, in.VPU_ADDS.imm = isa_f32(s->imm);
                in.VPU_ADDS.rows = rows, in.VPU_ADDS.cols = cols, in.VPU_ADDS.dtype = isa_enum(m->cdt);
            } else {
                in.VPU_EXP.dst = c, in.VPU_EXP.src = c;
                in.VPU_EXP.rows = rows, in.VPU_EXP.cols = cols, in.VPU_EXP.dtype = isa_enum(m->cdt);
            }
            isa_emit_insn(e, &in);
        }
        sem_signal(m, ISA_UNIT_VPU, m->s_cfull);
    } else {
        sem_signal(m, ISA_UNIT_MXU, m->s_cfull);
    }
}

/* The store of the drained tile at p. */
static void emit_store(kmm *m, const kmm_pos *p, uint64_t tm, uint64_t tn)
{
    sem_wait(m, ISA_UNIT_DMA, m->s_cfull);
    dma(m, isa_hbm(m->rC, (uint64_t)(p->oc + (int64_t)p->i0 * m->ldc) + p->j0 * m->ce),
        isa_spad(0, m->cbuf), m->cdt, tn, tm, 1, (uint64_t)m->ldc, tn * m->ce, 0, 0);
    sem_signal(m, ISA_UNIT_DMA, m->s_cfree);
}

/* Registers and steps of a level: A, B, C and the epilogue operands. */
typedef struct kmm_steps {
    unsigned n;
    unsigned reg[3 + KC_MAX_EPI];
    int64_t step[3 + KC_MAX_EPI];
} kmm_steps;

static void steps_add(kmm_steps *s, unsigned reg, int64_t step)
{
    if (step) {
        s->reg[s->n] = reg;
        s->step[s->n++] = step;
    }
}

/* A tile's slices in order: the full ones (TK deep), then the edge one. Its head is the first
 * KMM_HEAD of them (the first sets the accumulators), issued before the previous tile's
 * store so that the array goes on from one tile to the next while the DMA stores. */
#define KMM_HEAD 2

static uint64_t head_slices(const kmm *m) { return min_u64(KMM_HEAD, cdiv(m->K, m->TK)); }

static unsigned emit_head(kmm *m, const kmm_pos *p, uint64_t tm, uint64_t tn, unsigned b)
{
    for (uint64_t i = 0; i < head_slices(m); i++, b ^= 1)
        emit_slice(m, p, tm, tn, i * m->TK, min_u64(m->TK, m->K - i * m->TK), b,
                   i ? ISA_ACCM_ACCUM : ISA_ACCM_SET);
    return b;
}

/* A tile's slices after its head (the full ones in a loop of pairs, then the edge one) and
 * its drain. */
static unsigned emit_rest(kmm *m, const kmm_pos *p, uint64_t tm, uint64_t tn, unsigned b)
{
    uint64_t full = m->K / m->TK, edge = m->K % m->TK, h = head_slices(m);
    slice_ctx sc = {tm, tn, h};
    kmm_steps st = {0};
    int64_t dk_a = m->ak == KMM_A_ROWS ? (int64_t)(m->TK * m->e)
                   : m->ak == KMM_A_COLS ? (int64_t)m->TK * m->lda
                                         : (int64_t)(m->TK / m->cv.sc * m->cv.w * m->cv.c * m->e);
    steps_add(&st, m->rA, dk_a);
    steps_add(&st, m->rB, m->b_cols ? (int64_t)(m->TK * m->e) : (int64_t)m->TK * m->ldb);
    if (full > h)
        b = kmm_loop(m, p, full - h, 1, m->k_regular, st.n, st.reg, st.step, body_slice, &sc, b);
    if (edge && full + 1 > h) {
        emit_slice(m, p, tm, tn, full * m->TK, edge, b, ISA_ACCM_ACCUM);
        b ^= 1;
    }
    emit_drain(m, p, tm, tn);
    return b;
}

/* Slices of one tile (mod 2): how a tile flips the buffer parity. */
static unsigned tile_flip(const kmm *m) { return (unsigned)(cdiv(m->K, m->TK) & 1); }

/* A tile row's body: its tiles are tm high. */
typedef struct row_ctx {
    uint64_t tm;
} row_ctx;

/* Iteration k of a row's loop over its full tiles, rotated so that the DMA fetches the next
 * tile's first slice before it stores this tile: the rest of tile k, the first slice of tile
 * k + 1, the store of tile k. */
static unsigned body_col(kmm *m, const kmm_pos *p, uint64_t k, unsigned b, bool in_loop, void *v)
{
    (void)in_loop;
    const row_ctx *r = v;
    kmm_pos q = *p, nx = *p;
    q.j0 = p->j0 + k * m->TN;
    nx.j0 = q.j0 + m->TN;
    b = emit_rest(m, &q, r->tm, m->TN, b);
    b = emit_head(m, &nx, r->tm, m->TN, b);
    emit_store(m, &q, r->tm, m->TN);
    return b;
}

static void col_steps(const kmm *m, kmm_steps *st)
{
    steps_add(st, m->rB, m->b_cols ? (int64_t)m->TN * m->ldb : (int64_t)(m->TN * m->e));
    steps_add(st, m->rC, (int64_t)(m->TN * m->ce));
    for (int a = 0; a < m->n_args; a++)
        steps_add(st, m->args[a].reg, m->args[a].sn * (int64_t)m->TN);
}

/* The column tiles [c0, c1) of the tile row at p, tm high: the first tile's first slice, the
 * full tiles but the last in a (rotated) loop, then the last tiles, each store after the next
 * tile's first slice. */
static unsigned emit_row(kmm *m, const kmm_pos *p, uint64_t tm, uint64_t c0, uint64_t c1,
                         unsigned b)
{
    uint64_t cols = cdiv(m->N, m->TN);
    bool edge = c1 == cols && m->N % m->TN;
    uint64_t full = c1 - c0 - (edge ? 1 : 0), tn_edge = m->N - (c1 - 1) * m->TN;
    row_ctx r = {tm};
    kmm_pos q = *p, last = *p, ed = *p;
    q.j0 = c0 * m->TN;
    ed.j0 = (c1 - 1) * m->TN;
    if (!full) { /* only the edge tile */
        b = emit_head(m, &ed, tm, tn_edge, b);
        b = emit_rest(m, &ed, tm, tn_edge, b);
        emit_store(m, &ed, tm, tn_edge);
        return b;
    }
    b = emit_head(m, &q, tm, m->TN, b);
    kmm_steps st = {0};
    col_steps(m, &st);
    b = kmm_loop(m, &q, full - 1, tile_flip(m), true, st.n, st.reg, st.step, body_col, &r, b);
    last.j0 = q.j0 + (full - 1) * m->TN;
    b = emit_rest(m, &last, tm, m->TN, b);
    if (edge) {
        b = emit_head(m, &ed, tm, tn_edge, b);
        emit_store(m, &last, tm, m->TN);
        b = emit_rest(m, &ed, tm, tn_edge, b);
        emit_store(m, &ed, tm, tn_edge);
    } else {
        emit_store(m, &last, tm, m->TN);
    }
    return b;
}

/* The tile rows [r0, r1) x columns [c0, c1) of one batch at p. */
typedef struct region_ctx {
    uint64_t c0, c1;
} region_ctx;

static unsigned body_row(kmm *m, const kmm_pos *p, uint64_t k, unsigned b, bool in_loop, void *v)
{
    (void)in_loop;
    const region_ctx *r = v;
    kmm_pos q = *p;
    q.i0 = p->i0 + k * m->TM;
    return emit_row(m, &q, m->TM, r->c0, r->c1, b);
}

static void row_steps(const kmm *m, kmm_steps *st)
{
    int64_t dm_a = m->ak == KMM_A_ROWS ? (int64_t)m->TM * m->lda
                   : m->ak == KMM_A_COLS ? (int64_t)(m->TM * m->e)
                                         : (int64_t)(m->TM / m->cv.f_out * m->cv.sh * m->cv.w *
                                                     m->cv.c * m->e);
    steps_add(st, m->rA, dm_a);
    steps_add(st, m->rC, (int64_t)m->TM * m->ldc);
    for (int a = 0; a < m->n_args; a++)
        steps_add(st, m->args[a].reg, m->args[a].sm * (int64_t)m->TM);
}

/* How a whole row of c tiles flips the parity. */
static unsigned row_flip(const kmm *m, uint64_t ncols) { return (unsigned)(ncols & tile_flip(m)); }

typedef struct batch_ctx {
    int d;
    uint64_t r0, r1, c0, c1;
} batch_ctx;

static unsigned emit_region(kmm *m, const kmm_pos *p, const batch_ctx *bc, unsigned b)
{
    uint64_t rows = cdiv(m->M, m->TM);
    bool edge = bc->r1 == rows && m->M % m->TM;
    uint64_t full = bc->r1 - bc->r0 - (edge ? 1 : 0);
    region_ctx r = {bc->c0, bc->c1};
    kmm_pos q = *p;
    q.i0 = bc->r0 * m->TM;
    kmm_steps st = {0};
    row_steps(m, &st);
    b = kmm_loop(m, &q, full, row_flip(m, bc->c1 - bc->c0), m->m_regular, st.n, st.reg, st.step,
                 body_row, &r, b);
    if (edge) {
        q.i0 = (bc->r1 - 1) * m->TM;
        b = emit_row(m, &q, m->M - q.i0, bc->c0, bc->c1, b);
    }
    return b;
}

static unsigned body_batch(kmm *m, const kmm_pos *p, uint64_t k, unsigned b, bool in_loop,
                           void *v);

static unsigned emit_batches(kmm *m, const kmm_pos *p, const batch_ctx *bc, unsigned b)
{
    if (bc->d == m->nb)
        return emit_region(m, p, bc, b);
    int d = bc->d;
    kmm_steps st = {0};
    steps_add(&st, m->rA, m->bsa[d]);
    steps_add(&st, m->rB, m->bsb[d]);
    steps_add(&st, m->rC, m->bsc[d]);
    for (int a = 0; a < m->n_args; a++)
        steps_add(&st, m->args[a].reg, m->args[a].sbat[d]);
    /* the parity flip of one iteration: the whole region times the inner batch loops */
    uint64_t tiles = (bc->r1 - bc->r0) * (bc->c1 - bc->c0);
    for (int i = d + 1; i < m->nb; i++)
        tiles *= m->bcount[i];
    batch_ctx inner = *bc;
    inner.d = d + 1;
    return kmm_loop(m, p, m->bcount[d], (unsigned)(tiles & tile_flip(m)), true, st.n, st.reg,
                    st.step, body_batch, &inner, b);
}

static unsigned body_batch(kmm *m, const kmm_pos *p, uint64_t k, unsigned b, bool in_loop,
                           void *v)
{
    (void)in_loop;
    const batch_ctx *bc = v;
    int d = bc->d - 1;
    kmm_pos q = *p;
    q.oa += (int64_t)k * m->bsa[d];
    q.ob += (int64_t)k * m->bsb[d];
    q.oc += (int64_t)k * m->bsc[d];
    for (int a = 0; a < m->n_args; a++)
        q.oarg[a] += (int64_t)k * m->args[a].sbat[d];
    return emit_batches(m, &q, bc, b);
}

/* ---- one core ------------------------------------------------------------------------------- */

/* Takes this core's resources, emits its block of the tile grid [r0, r1) x [c0, c1), and
 * settles its semaphores back to zero. */
static np_status emit_core(kmm *m, uint32_t core, uint64_t r0, uint64_t r1, uint64_t c0,
                           uint64_t c1)
{
    kc_ctx *x = m->x;
    isa_emit *e = x->e;
    if (kc_core(x, core) != NP_OK)
        return kc_status(x);
    /* scratchpad: A0 A1 B0 B1 C [staging 0 1] [epilogue operands], one block */
    uint64_t es = m->e, a_sz = m->TM * m->TK * es, b_sz = m->TK * m->TN * es;
    uint64_t c_sz = m->TM * m->TN * m->ce, work = 2 * a_sz + 2 * b_sz + c_sz, at;
    if (m->ak == KMM_A_COLS)
        work += 2 * a_sz;
    for (int a = 0; a < m->n_args; a++) {
        kmm_arg *g = &m->args[a];
        uint64_t rows, cols;
        arg_shape(m, a, m->TM, m->TN, &rows, &cols);
        g->raw = work;
        work += rows * cols * isa_dtype_size[g->dt];
        if (g->cast) {
            g->buf = work;
            work += rows * cols * (a == m->bias ? 4 : m->ce);
        }
    }
    kc_spad_alloc(x, work, 64, &at);
    uint64_t acc;
    kc_acc_alloc(x, m->TM * m->TN * 4, 64, &acc);
    if (kc_status(x) != NP_OK)
        return kc_status(x);
    m->acc = acc;
    m->abuf[0] = at, m->abuf[1] = at + a_sz;
    m->bbuf[0] = at + 2 * a_sz, m->bbuf[1] = at + 2 * a_sz + b_sz;
    m->cbuf = at + 2 * a_sz + 2 * b_sz;
    if (m->ak == KMM_A_COLS)
        m->stage[0] = m->cbuf + c_sz, m->stage[1] = m->cbuf + c_sz + a_sz;
    for (int a = 0; a < m->n_args; a++) {
        m->args[a].raw += at;
        m->args[a].buf = m->args[a].cast ? m->args[a].buf + at : m->args[a].raw;
    }
    /* semaphores and registers */
    for (int b = 0; b < 2; b++) {
        kc_sem_alloc(x, &m->s_full[b]);
        kc_sem_alloc(x, &m->s_free[b]);
        if (m->ak == KMM_A_COLS)
            kc_sem_alloc(x, &m->s_staged[b]);
    }
    kc_sem_alloc(x, &m->s_cfull);
    kc_sem_alloc(x, &m->s_cfree);
    if (m->n_steps)
        kc_sem_alloc(x, &m->s_drained), kc_sem_alloc(x, &m->s_eready);
    if (m->bias >= 0) {
        kc_sem_alloc(x, &m->s_bready);
        if (m->args[m->bias].cast)
            kc_sem_alloc(x, &m->s_braw);
    }
    kc_reg_alloc(x, &m->rA);
    kc_reg_alloc(x, &m->rB);
    kc_reg_alloc(x, &m->rC);
    for (int a = 0; a < m->n_args; a++)
        kc_reg_alloc(x, &m->args[a].reg);
    if (kc_status(x) != NP_OK)
        return kc_status(x);
    ISA_EMIT(e, LI, isa_reg(m->rA), isa_imm((int64_t)m->a_base));
    ISA_EMIT(e, LI, isa_reg(m->rB), isa_imm((int64_t)m->b_base));
    ISA_EMIT(e, LI, isa_reg(m->rC), isa_imm((int64_t)m->c_base));
    for (int a = 0; a < m->n_args; a++)
        ISA_EMIT(e, LI, isa_reg(m->args[a].reg), isa_imm((int64_t)m->args[a].base));
    /* both buffers and the C tile start free */
    sem_signal(m, ISA_UNIT_DMA, m->s_free[0]);
    sem_signal(m, ISA_UNIT_DMA, m->s_free[1]);
    sem_signal(m, ISA_UNIT_DMA, m->s_cfree);
    kmm_pos p = {0};
    batch_ctx bc = {0, r0, r1, c0, c1};
    m->mult = 1;
    emit_batches(m, &p, &bc, 0);
    /* settle: the DMA queue takes back the credits (and so waits for its own last copies) */
    sem_wait(m, ISA_UNIT_DMA, m->s_free[0]);
    sem_wait(m, ISA_UNIT_DMA, m->s_free[1]);
    sem_wait(m, ISA_UNIT_DMA, m->s_cfree);
    return kc_status(x);
}

/* Cuts the tile grid (rows x cols tiles) into pr x pc blocks for up to `cores` cores: the
 * split with the fewest tiles on the busiest core, then the fewest blocks. */
static void split_grid(uint64_t rows, uint64_t cols, uint64_t cores, uint64_t *pr, uint64_t *pc)
{
    uint64_t best = UINT64_MAX, br = 1, bcn = 1;
    for (uint64_t r = 1; r <= cores && r <= rows; r++)
        for (uint64_t c = 1; r * c <= cores && c <= cols; c++) {
            uint64_t worst = cdiv(rows, r) * cdiv(cols, c);
            if (worst < best || (worst == best && r * c < br * bcn)) {
                best = worst;
                br = r, bcn = c;
            }
        }
    *pr = br, *pc = bcn;
}

/* Block i of n of [0, total): as even as possible, the larger ones first. */
static void block(uint64_t total, uint64_t n, uint64_t i, uint64_t *lo, uint64_t *hi)
{
    uint64_t base = total / n, extra = total % n;
    *lo = i * base + (i < extra ? i : extra);
    *hi = *lo + base + (i < extra ? 1 : 0);
}

static np_status kmm_emit(kmm *m)
{
    kc_ctx *x = m->x;
    const kc_place *pl = &x->k->place;
    uint64_t n_cores = pl->n_cores ? pl->n_cores : 1;
    uint64_t rows = cdiv(m->M, m->TM), cols = cdiv(m->N, m->TN), pr, pc;
    split_grid(rows, cols, n_cores, &pr, &pc);
    for (uint64_t i = 0; i < pr * pc; i++) {
        uint64_t r0, r1, c0, c1;
        block(rows, pr, i / pc, &r0, &r1);
        block(cols, pc, i % pc, &c0, &c1);
        if (emit_core(m, pl->core0 + (uint32_t)i, r0, r1, c0, c1) != NP_OK)
            return kc_status(x);
    }
    x->res->cores = (uint32_t)(pr * pc);
    x->res->hbm_read_bytes = m->rd;
    x->res->hbm_write_bytes = m->wr;
    return kc_status(x);
}

/* ---- from a kernel description to the plan --------------------------------------------------- */

/* Strides of t over the dims of an output of out_nd dims (numpy broadcasting): 0 where t has
 * no such dim or it is 1. */
static void bcast_strides(const kc_tensor *t, int out_nd, int64_t *s)
{
    for (int d = 0; d < out_nd; d++) {
        int dt = d - (out_nd - t->ndim);
        s[d] = dt < 0 || t->shape[dt] == 1 ? 0 : t->stride[dt];
    }
}

/* The epilogue: the drain's fused prefix [scale] [bias] [activation], the rest vector steps.
 * The output has nd dims; bdims[0..nbd) are those of the batch loops, mdim and ndim those of
 * the GEMM's rows and columns (for a conv the pixel dim ow; then an operand's stride along
 * dim mouter, oh, must be m_outer_ratio = OW times its stride along ow; mouter -1: none). */
static np_status plan_epilogue(kmm *m, int nd, const int *bdims, int nbd, int mdim, int ndim,
                               int64_t m_outer_ratio, int mouter)
{
    kc_ctx *x = m->x;
    const kc_kernel *k = x->k;
    m->act = ISA_ACT_NONE;
    m->scale = 1.0f;
    m->bias = -1;
    int i = 0;
    if (i < k->n_epi && k->epi[i].op == NN_OP_SCALE)
        m->scale = (float)k->epi[i++].f;
    for (; i < k->n_epi; i++) {
        const kc_epi *s = &k->epi[i];
        int64_t st[KC_MAX_DIMS];
        kmm_arg g = {0};
        if (s->has_arg) {
            bcast_strides(&s->arg, nd, st);
            g.base = s->arg.addr;
            g.dt = kc_isa_dtype(s->arg.dtype);
            g.sm = st[mdim];
            g.sn = st[ndim];
            if (mouter >= 0 && st[mouter] != g.sm * m_outer_ratio)
                return kc_fail(x, NP_ERR_INCONSISTENT, "epilogue step %d: its operand's "
                               "pixel rows are not %" PRId64 " pixels apart", i, m_outer_ratio);
            for (int b = 0; b < nbd; b++)
                g.sbat[b] = st[bdims[b]];
            uint64_t ae = isa_dtype_size[g.dt];
            if (g.sn && g.sn != (int64_t)ae)
                return kc_fail(x, NP_ERR_INCONSISTENT, "epilogue step %d: its operand's last "
                               "dim must be contiguous (stride %" PRId64 ", element %" PRIu64
                               " bytes)", i, g.sn, ae);
            g.bcast = !g.sm && !g.sn ? ISA_BCAST_SCALAR : !g.sm ? ISA_BCAST_ROW
                      : !g.sn        ? ISA_BCAST_COL : ISA_BCAST_FULL;
        }
        /* the drain's bias: the first step, an add of a row vector (after a scale) */
        bool batch_free = true;
        for (int b = 0; b < nbd; b++)
            batch_free = batch_free && !g.sbat[b];
        if (m->bias < 0 && m->n_args == 0 && m->n_steps == 0 && m->act == ISA_ACT_NONE &&
            s->op == NN_OP_ADD && g.bcast == ISA_BCAST_ROW && batch_free) {
            g.cast = g.dt != ISA_DTYPE_FP32;
            m->bias = m->n_args;
            m->args[m->n_args++] = g;
            continue;
        }
        isa_act act = s->op == NN_OP_RELU ? ISA_ACT_RELU : s->op == NN_OP_GELU ? ISA_ACT_GELU
                      : s->op == NN_OP_SILU ? ISA_ACT_SILU : s->op == NN_OP_TANH ? ISA_ACT_TANH
                                            : ISA_ACT_NONE;
        if (act != ISA_ACT_NONE && m->act == ISA_ACT_NONE && m->n_steps == 0) {
            m->act = act;
            continue;
        }
        kmm_step *v = &m->steps[m->n_steps++];
        v->arg = -1;
        switch (s->op) {
        case NN_OP_ADD: v->op = ISA_OP_VPU_ADD; break;
        case NN_OP_SUB: v->op = ISA_OP_VPU_SUB; break;
        case NN_OP_MUL: v->op = ISA_OP_VPU_MUL; break;
        case NN_OP_DIV: v->op = ISA_OP_VPU_DIV; break;
        case NN_OP_SCALE: v->op = ISA_OP_VPU_MULS, v->imm = (float)s->f; break;
        case NN_OP_RELU: v->op = ISA_OP_VPU_RELU; break;
        case NN_OP_GELU: v->op = ISA_OP_VPU_GELU; break;
        case NN_OP_SILU: v->op = ISA_OP_VPU_SILU; break;
        case NN_OP_TANH: v->op = ISA_OP_VPU_TANH; break;
        default: v->op = ISA_OP_VPU_EXP; break; /* EXP (kc_compile allows no other) */
        }
        if (s->has_arg) {
            g.cast = g.dt != m->cdt;
            v->arg = m->n_args;
            m->args[m->n_args++] = g;
        }
    }
    return NP_OK;
}

/* The scratchpad the epilogue's operand tiles take, as kc_gemm_shape counts it. */
static void epilogue_spad(const kmm *m, kc_gemm_shape *g)
{
    for (int a = 0; a < m->n_args; a++) {
        const kmm_arg *r = &m->args[a];
        uint64_t per = isa_dtype_size[r->dt] + (r->cast ? (a == m->bias ? 4 : m->ce) : 0);
        switch (r->bcast) {
        case ISA_BCAST_ROW: g->extra_n += per; break;
        case ISA_BCAST_COL: g->extra_m += per; break;
        case ISA_BCAST_SCALAR: g->extra += per; break;
        default: g->extra_mn += per; break;
        }
    }
}

/* Tiles: the attributes tm, tn, tk where given, the rest chosen for the placed cores' free
 * memories. */
static np_status plan_tiles(kmm *m, kc_gemm_shape *g)
{
    kc_ctx *x = m->x;
    const kc_place *pl = &x->k->place;
    uint64_t n = pl->n_cores ? pl->n_cores : 1, spad = UINT64_MAX, acc = UINT64_MAX;
    for (uint32_t c = pl->core0; c < pl->core0 + n; c++) {
        spad = min_u64(spad, kc_spad_avail(x, c));
        acc = min_u64(acc, kc_acc_avail(x, c));
    }
    g->cores = n;
    m->TM = (uint64_t)kc_attr_int(x, "tm");
    m->TN = (uint64_t)kc_attr_int(x, "tn");
    m->TK = (uint64_t)kc_attr_int(x, "tk");
    np_err e = {0};
    if (kc_gemm_tiles(x->cfg, g, spad, acc, &m->TM, &m->TN, &m->TK, &e) != NP_OK)
        return kc_fail(x, e.status, "%s", e.msg);
    return NP_OK;
}

static void plan_result(kmm *m, uint64_t batches)
{
    kc_result *r = m->x->res;
    uint64_t mn = m->M * m->N * batches;
    r->mxu_flops = 2 * mn * m->K;
    r->flops = r->mxu_flops + mn * (uint64_t)(m->x->k->n_epi);
    snprintf(r->schedule, sizeof r->schedule, "%" PRIu64 "x%" PRIu64 "x%" PRIu64 " GEMM%s, tiles "
             "%" PRIu64 "x%" PRIu64 "x%" PRIu64 " (M x N x K)", m->M, m->N, m->K,
             batches > 1 ? " per batch" : "", m->TM, m->TN, m->TK);
}

/* matmul: in[0] A [..., M, K], in[1] B [..., K, N], out [..., M, N]; batch dims broadcast.
 * Each matrix is row-major (last stride = element) or column-major (the other). */
static np_status matmul_compile(kc_ctx *x)
{
    const kc_kernel *k = x->k;
    const kc_tensor *A = &k->in[0], *B = &k->in[1], *C = &k->out[0];
    kmm m;
    memset(&m, 0, sizeof m);
    m.x = x;
    if (A->ndim < 2 || B->ndim < 2 || C->ndim < 2)
        return kc_fail(x, NP_ERR_INCONSISTENT, "operands need at least 2 dims (A %d, B %d, "
                       "out %d)", A->ndim, B->ndim, C->ndim);
    int nd = C->ndim;
    m.M = (uint64_t)A->shape[A->ndim - 2];
    m.K = (uint64_t)A->shape[A->ndim - 1];
    m.N = (uint64_t)B->shape[B->ndim - 1];
    if ((uint64_t)B->shape[B->ndim - 2] != m.K || (uint64_t)C->shape[nd - 2] != m.M ||
        (uint64_t)C->shape[nd - 1] != m.N)
        return kc_fail(x, NP_ERR_INCONSISTENT, "A is %" PRIu64 "x%" PRIu64 ", B %" PRId64 "x%"
                       PRId64 ", out %" PRId64 "x%" PRId64 ": not (M x K) (K x N) (M x N)", m.M,
                       m.K, B->shape[B->ndim - 2], B->shape[B->ndim - 1], C->shape[nd - 2],
                       C->shape[nd - 1]);
    if (A->dtype != B->dtype)
        return kc_fail(x, NP_ERR_INCONSISTENT, "A is %s, B %s: the array multiplies one type",
                       nn_dtype_name(A->dtype), nn_dtype_name(B->dtype));
    m.dt = kc_isa_dtype(A->dtype);
    m.cdt = kc_isa_dtype(C->dtype);
    m.e = isa_dtype_size[m.dt];
    m.ce = isa_dtype_size[m.cdt];
    isa_program *prog = isa_emit_program(x->e);
    if (!(prog->target.dtypes & (1u << m.dt)))
        return kc_fail(x, NP_ERR_INCONSISTENT, "the array does not multiply %s",
                       isa_dtype_names[m.dt]);
    /* layouts */
    int64_t a1 = A->stride[A->ndim - 1], a2 = A->stride[A->ndim - 2];
    int64_t b1 = B->stride[B->ndim - 1], b2 = B->stride[B->ndim - 2];
    if (a1 == (int64_t)m.e || m.K == 1)
        m.ak = KMM_A_ROWS, m.lda = a2;
    else if (a2 == (int64_t)m.e || m.M == 1)
        m.ak = KMM_A_COLS, m.lda = a1;
    else
        return kc_fail(x, NP_ERR_INCONSISTENT, "A (strides %" PRId64 ", %" PRId64 " bytes) is "
                       "neither row- nor column-major", a2, a1);
    if (b1 == (int64_t)m.e || m.N == 1)
        m.b_cols = false, m.ldb = b2;
    else if (b2 == (int64_t)m.e || m.K == 1)
        m.b_cols = true, m.ldb = b1;
    else
        return kc_fail(x, NP_ERR_INCONSISTENT, "B (strides %" PRId64 ", %" PRId64 " bytes) is "
                       "neither row- nor column-major", b2, b1);
    if (C->stride[nd - 1] != (int64_t)m.ce && m.N > 1)
        return kc_fail(x, NP_ERR_INCONSISTENT, "out must be row-major (last stride %" PRId64
                       ", element %" PRIu64 " bytes)", C->stride[nd - 1], m.ce);
    m.ldc = C->stride[nd - 2];
    m.a_base = A->addr, m.b_base = B->addr, m.c_base = C->addr;
    /* batch dims: out's leading dims; A's and B's broadcast to them; then merged where every
     * operand's strides allow and dims of 1 dropped */
    int64_t sa[KC_MAX_DIMS], sb[KC_MAX_DIMS];
    kc_tensor Ab = *A, Bb = *B;
    Ab.ndim -= 2, Bb.ndim -= 2;
    bcast_strides(&Ab, nd - 2, sa);
    bcast_strides(&Bb, nd - 2, sb);
    for (int d = 0; d < nd - 2; d++) {
        int da = d - (nd - 2 - Ab.ndim), db = d - (nd - 2 - Bb.ndim);
        if ((da >= 0 && Ab.shape[da] != 1 && Ab.shape[da] != C->shape[d]) ||
            (db >= 0 && Bb.shape[db] != 1 && Bb.shape[db] != C->shape[d]))
            return kc_fail(x, NP_ERR_INCONSISTENT, "batch dim %d: A's and B's do not broadcast "
                           "to out's %" PRId64, d, C->shape[d]);
    }
    int bdims[KC_MAX_DIMS], nbd = 0;
    uint64_t cnt[KC_MAX_DIMS];
    int64_t bsa[KC_MAX_DIMS], bsb[KC_MAX_DIMS], bsc[KC_MAX_DIMS];
    for (int d = 0; d < nd - 2; d++) {
        if (C->shape[d] == 1)
            continue;
        if (nbd && bsa[nbd - 1] == sa[d] * C->shape[d] && bsb[nbd - 1] == sb[d] * C->shape[d] &&
            bsc[nbd - 1] == C->stride[d] * C->shape[d] && k->n_epi == 0) {
            cnt[nbd - 1] *= (uint64_t)C->shape[d]; /* the outer dim steps as the inner runs on */
            bsa[nbd - 1] = sa[d], bsb[nbd - 1] = sb[d], bsc[nbd - 1] = C->stride[d];
            bdims[nbd - 1] = d;
            continue;
        }
        bdims[nbd] = d;
        cnt[nbd] = (uint64_t)C->shape[d];
        bsa[nbd] = sa[d], bsb[nbd] = sb[d], bsc[nbd] = C->stride[d];
        nbd++;
    }
    if (nbd > KMM_MAX_BATCH)
        return kc_fail(x, NP_ERR_RANGE, "%d batch dims that do not merge (at most %d)", nbd,
                       KMM_MAX_BATCH);
    m.nb = nbd;
    uint64_t batches = 1;
    for (int b = 0; b < nbd; b++) {
        m.bcount[b] = cnt[b], m.bsa[b] = bsa[b], m.bsb[b] = bsb[b], m.bsc[b] = bsc[b];
        batches *= cnt[b];
    }
    m.m_regular = m.k_regular = true;
    if (plan_epilogue(&m, nd, bdims, nbd, nd - 2, nd - 1, 0, -1) != NP_OK)
        return kc_status(x);
    kc_gemm_shape g = {m.M, m.N, m.K, m.e, m.ce, 1, m.ak == KMM_A_COLS ? 2 : 0, 0, 0, 0, 0};
    epilogue_spad(&m, &g);
    if (plan_tiles(&m, &g) != NP_OK)
        return kc_status(x);
    plan_result(&m, batches);
    return kmm_emit(&m);
}

/* conv2d: in[0] x [N, C, H, W], in[1] w [O, C, KH, KW], out [N, O, OH, OW], in the layouts
 * of implicit im2col: x channels-last (NHWC in memory), w as the GEMM's B [(kh, kw, c)][o],
 * out as C [(oh, ow)][o] (NHWC). */
static np_status conv2d_compile(kc_ctx *x)
{
    const kc_kernel *k = x->k;
    const kc_tensor *X = &k->in[0], *W = &k->in[1], *Y = &k->out[0];
    kmm m;
    memset(&m, 0, sizeof m);
    m.x = x;
    if (X->ndim != 4 || W->ndim != 4 || Y->ndim != 4)
        return kc_fail(x, NP_ERR_INCONSISTENT, "x, w and out must be 4-D (NCHW, OIHW, NCHW)");
    if (X->dtype != W->dtype)
        return kc_fail(x, NP_ERR_INCONSISTENT, "x is %s, w %s: the array multiplies one type",
                       nn_dtype_name(X->dtype), nn_dtype_name(W->dtype));
    m.dt = kc_isa_dtype(X->dtype), m.cdt = kc_isa_dtype(Y->dtype);
    m.e = isa_dtype_size[m.dt], m.ce = isa_dtype_size[m.cdt];
    if (!(isa_emit_program(x->e)->target.dtypes & (1u << m.dt)))
        return kc_fail(x, NP_ERR_INCONSISTENT, "the array does not multiply %s",
                       isa_dtype_names[m.dt]);
    int64_t pad = kc_attr_int(x, "pad"), dil = kc_attr_int(x, "dilation");
    int64_t groups = kc_attr_int(x, "groups");
    if (pad != 0 || dil != 1 || groups != 1)
        return kc_fail(x, NP_ERR_INCONSISTENT, "pad %" PRId64 ", dilation %" PRId64 ", groups %"
                       PRId64 ": the implicit-im2col kernel takes pad 0, dilation 1, groups 1 "
                       "(pad the input first)", pad, dil, groups);
    uint64_t N = (uint64_t)X->shape[0], Cc = (uint64_t)X->shape[1], H = (uint64_t)X->shape[2],
             Wd = (uint64_t)X->shape[3], O = (uint64_t)W->shape[0], R = (uint64_t)W->shape[2],
             S = (uint64_t)W->shape[3];
    uint64_t sh = (uint64_t)kc_attr_int(x, "stride"), sw = (uint64_t)kc_attr_int(x, "stride_w");
    sw = sw ? sw : sh;
    if ((uint64_t)W->shape[1] != Cc || R > H || S > Wd)
        return kc_fail(x, NP_ERR_INCONSISTENT, "w [%" PRIu64 ", %" PRId64 ", %" PRIu64 ", %"
                       PRIu64 "] does not fit x [%" PRIu64 ", %" PRIu64 ", %" PRIu64 ", %" PRIu64
                       "]", O, W->shape[1], R, S, N, Cc, H, Wd);
    uint64_t E = (H - R) / sh + 1, F = (Wd - S) / sw + 1;
    if ((uint64_t)Y->shape[0] != N || (uint64_t)Y->shape[1] != O || (uint64_t)Y->shape[2] != E ||
        (uint64_t)Y->shape[3] != F)
        return kc_fail(x, NP_ERR_INCONSISTENT, "out must be [%" PRIu64 ", %" PRIu64 ", %" PRIu64
                       ", %" PRIu64 "]", N, O, E, F);
    int64_t e = (int64_t)m.e, ce = (int64_t)m.ce;
    if (X->stride[1] != e || X->stride[3] != (int64_t)Cc * e ||
        X->stride[2] != (int64_t)(Wd * Cc) * e)
        return kc_fail(x, NP_ERR_INCONSISTENT, "x must be channels-last (NHWC in memory: "
                       "strides C %" PRId64 ", W %" PRId64 ", H %" PRId64 " bytes)", e,
                       (int64_t)Cc * e, (int64_t)(Wd * Cc) * e);
    if (W->stride[0] != e || W->stride[1] != (int64_t)O * e ||
        W->stride[3] != (int64_t)(Cc * O) * e || W->stride[2] != (int64_t)(S * Cc * O) * e)
        return kc_fail(x, NP_ERR_INCONSISTENT, "w must be laid out as [(kh, kw, c)][o] (strides "
                       "O %" PRId64 ", C %" PRId64 ", KW %" PRId64 ", KH %" PRId64 " bytes)", e,
                       (int64_t)O * e, (int64_t)(Cc * O) * e, (int64_t)(S * Cc * O) * e);
    if ((Y->stride[1] != ce && O > 1) || Y->stride[3] != (int64_t)O * ce ||
        Y->stride[2] != (int64_t)(F * O) * ce)
        return kc_fail(x, NP_ERR_INCONSISTENT, "out must be channels-last (NHWC in memory)");
    m.M = E * F, m.N = O, m.K = R * S * Cc;
    m.ak = KMM_A_CONV;
    m.a_base = X->addr, m.b_base = W->addr, m.c_base = Y->addr;
    m.ldb = (int64_t)O * e, m.ldc = (int64_t)O * ce;
    m.cv = (kmm_conv){H, Wd, Cc, R, S, sh, sw, E, F, S * Cc,
                      Wd * Cc * m.e < (1u << 24) && R <= 65535};
    int bdims[1] = {0}, nbd = 0;
    if (N > 1) {
        m.nb = nbd = 1;
        m.bcount[0] = N, m.bsa[0] = X->stride[0], m.bsb[0] = 0, m.bsc[0] = Y->stride[0];
    }
    /* the epilogue sees out's dims [N, O, OH, OW]: GEMM rows are pixels (ow; oh = F pixels) */
    if (plan_epilogue(&m, 4, bdims, nbd, 3, 1, (int64_t)F, 2) != NP_OK)
        return kc_status(x);
    kc_gemm_shape g = {m.M, m.N, m.K, m.e, m.ce, 1, 0, 0, 0, 0, 0};
    epilogue_spad(&m, &g);
    bool tm_given = kc_attr_given(x, "tm") && kc_attr_int(x, "tm"),
         tk_given = kc_attr_given(x, "tk") && kc_attr_int(x, "tk");
    if (plan_tiles(&m, &g) != NP_OK)
        return kc_status(x);
    /* The streamed dimension may shrink without costing a fold: cut it on window boundaries
     * (whole output rows / whole filter rows), keeping the tile count. */
    if (x->cfg->core.dataflow == ARCH_DATAFLOW_WS && !tm_given) {
        uint64_t n = cdiv(m.M, m.TM), tm = cdiv(E, n) * F;
        if (tm <= m.TM)
            m.TM = tm;
    }
    if (x->cfg->core.dataflow == ARCH_DATAFLOW_OS && !tk_given) {
        uint64_t n = cdiv(m.K, m.TK), tk = cdiv(R, n) * m.cv.sc;
        if (tk <= m.TK)
            m.TK = tk;
    }
    /* the gathers' fields: n0 20 bits, n1/n2 16 bits, s1 strides 24 bits, s2 27 bits; a
     * piece has at most min(TM, F) pixels a row and TM / F rows (the row strides matter only
     * when a tile can hold two whole output rows) */
    uint64_t tm_max = min_u64(m.TM, m.M);
    bool multi_rows = tm_max >= 2 * F;
    if (min_u64(m.cv.sc, m.TK) >= (1u << 20) || min_u64(F, tm_max) > 65535 ||
        tm_max / F > 65535 || m.TK * m.e >= (1u << 24) || sw * Cc * m.e >= (1u << 24) ||
        (multi_rows && (sh * Wd * Cc * m.e >= (1u << 27) || F * m.TK * m.e >= (1u << 27))))
        return kc_fail(x, NP_ERR_RANGE, "too large for the gathers' dma.copy fields");
    m.m_regular = m.TM % F == 0;
    m.k_regular = m.TK % m.cv.sc == 0;
    plan_result(&m, N);
    return kmm_emit(&m);
}

/* ---- the framework's computation of each (for checks) ---------------------------------------- */

static np_status graph_status(nn_graph *g, nn_tensor **out, nn_tensor *t, np_err *err)
{
    out[0] = t;
    return t ? NP_OK : nn_graph_status(g, err);
}

static np_status matmul_reference(nn_graph *g, const kc_kernel *k, nn_tensor *const *in,
                                  nn_tensor **out, np_err *err)
{
    (void)k;
    return graph_status(g, out, nn_matmul(g, in[0], in[1]), err);
}

static const kc_attr *find_attr(const kc_kernel *k, const char *name)
{
    for (int i = 0; i < k->n_attrs; i++)
        if (k->attrs[i].name && strcmp(k->attrs[i].name, name) == 0)
            return &k->attrs[i];
    return NULL;
}

static np_status conv2d_reference(nn_graph *g, const kc_kernel *k, nn_tensor *const *in,
                                  nn_tensor **out, np_err *err)
{
    const kc_attr *st = find_attr(k, "stride"), *sw = find_attr(k, "stride_w");
    const kc_attr *pad = find_attr(k, "pad"), *dil = find_attr(k, "dilation");
    const kc_attr *grp = find_attr(k, "groups");
    int64_t s = st ? st->i : 1;
    if (sw && sw->i && sw->i != s)
        return np_err_set(err, NP_ERR_INCONSISTENT, "conv2d: the framework's conv2d has one "
                          "stride for both dims (stride %" PRId64 ", stride_w %" PRId64 ")", s,
                          sw->i);
    return graph_status(g, out, nn_conv2d(g, in[0], in[1], (int)s, pad ? (int)pad->i : 0,
                                          dil ? (int)dil->i : 1, grp ? (int)grp->i : 1), err);
}

/* ---- `npusim kernel --op` ------------------------------------------------------------------- */

static int64_t spec_i(const kc_spec *s, const char *name)
{
    const kc_spec_val *v = kc_spec_get(s, name);
    return v ? v->i : 0;
}

static const kc_attr_def matmul_keys[] = {
    {"m", KC_ATTR_INT, KC_REQUIRED, 1, 4294967295.0, "rows of A and of the output"},
    {"n", KC_ATTR_INT, KC_REQUIRED, 1, 4294967295.0, "columns of B and of the output"},
    {"k", KC_ATTR_INT, KC_REQUIRED, 1, 4294967295.0, "columns of A, rows of B"},
    {"batch", KC_ATTR_INT, 1, 1, 65536, "independent matmuls (A, B and the output batched)"},
    {"ta", KC_ATTR_BOOL, 0, 0, 1, "A stored transposed (column-major)"},
    {"tb", KC_ATTR_BOOL, 0, 0, 1, "B stored transposed (column-major)"},
    {"dtype", KC_ATTR_DTYPE, NN_BF16, 0, 0, "A's and B's type (the output's too; int8 gives int32)"},
    {"pad", KC_ATTR_INT, 0, 0, 65536, "elements of padding after every matrix row (a leading dimension that does not map every row to the same HBM channels)"},
};

/* A [batch, M, K] (or [M, K]) in a fresh buffer, column-major when trans, every stored row
 * pad elements longer than its data. */
static np_status spec_matrix(kc_prog *p, const char *name, nn_dtype dt, int64_t batch, int64_t r,
                             int64_t c, bool trans, int64_t pad, kc_tensor *t, np_err *err)
{
    int64_t e = (int64_t)nn_dtype_size(dt);
    int64_t rows = trans ? c : r, len = (trans ? r : c) + pad; /* stored rows x their length */
    uint64_t addr;
    if (kc_prog_bss(p, name, (uint64_t)(batch * rows * len * e), &addr, err) != NP_OK)
        return err->status;
    int nd = batch > 1 ? 3 : 2;
    int64_t shape[3] = {batch, r, c};
    kc_tensor_dense(t, addr, dt, nd, batch > 1 ? shape : shape + 1);
    t->stride[nd - 2] = trans ? e : len * e;
    t->stride[nd - 1] = trans ? len * e : e;
    if (nd == 3)
        t->stride[0] = rows * len * e;
    return NP_OK;
}

static np_status matmul_build(kc_prog *p, const kc_spec *s, kc_kernel *k, np_err *err)
{
    nn_dtype dt = (nn_dtype)spec_i(s, "dtype"), od = dt == NN_I8 ? NN_I32 : dt;
    int64_t M = spec_i(s, "m"), N = spec_i(s, "n"), K = spec_i(s, "k"), B = spec_i(s, "batch");
    int64_t pad = spec_i(s, "pad");
    k->n_in = 2, k->n_out = 1;
    if (spec_matrix(p, "A", dt, B, M, K, spec_i(s, "ta"), pad, &k->in[0], err) != NP_OK ||
        spec_matrix(p, "B", dt, B, K, N, spec_i(s, "tb"), pad, &k->in[1], err) != NP_OK ||
        spec_matrix(p, "C", od, B, M, N, false, pad, &k->out[0], err) != NP_OK)
        return err->status;
    return NP_OK;
}

static const kc_attr_def conv2d_keys[] = {
    {"n", KC_ATTR_INT, 1, 1, 65536, "images"},
    {"h", KC_ATTR_INT, KC_REQUIRED, 1, 1048576, "input height"},
    {"w", KC_ATTR_INT, KC_REQUIRED, 1, 1048576, "input width"},
    {"c", KC_ATTR_INT, KC_REQUIRED, 1, 1048576, "input channels"},
    {"k", KC_ATTR_INT, KC_REQUIRED, 1, 1048576, "output channels (filters)"},
    {"r", KC_ATTR_INT, KC_REQUIRED, 1, 65535, "filter height"},
    {"s", KC_ATTR_INT, KC_REQUIRED, 1, 65535, "filter width"},
    {"dtype", KC_ATTR_DTYPE, NN_BF16, 0, 0, "input and filter type (the output's too; int8 gives int32)"},
};

/* x NHWC, w as [(r, s, c)][k], out NHWC (the layouts the conv2d kernel takes). */
static np_status conv2d_build(kc_prog *p, const kc_spec *s, kc_kernel *k, np_err *err)
{
    nn_dtype dt = (nn_dtype)spec_i(s, "dtype"), od = dt == NN_I8 ? NN_I32 : dt;
    int64_t N = spec_i(s, "n"), H = spec_i(s, "h"), W = spec_i(s, "w"), C = spec_i(s, "c"),
            O = spec_i(s, "k"), R = spec_i(s, "r"), S = spec_i(s, "s");
    int64_t sh = spec_i(s, "stride"), sw = spec_i(s, "stride_w") ? spec_i(s, "stride_w") : sh;
    int64_t pad = spec_i(s, "pad"), dil = spec_i(s, "dilation");
    int64_t E = (H + 2 * pad - dil * (R - 1) - 1) / sh + 1, F = (W + 2 * pad - dil * (S - 1) - 1) / sw + 1;
    if (E < 1 || F < 1)
        return np_err_set(err, NP_ERR_RANGE, "conv2d: a %" PRId64 "x%" PRId64 " filter does not "
                          "fit a %" PRId64 "x%" PRId64 " input", R, S, H, W);
    int64_t e = (int64_t)nn_dtype_size(dt), ce = (int64_t)nn_dtype_size(od);
    uint64_t ax, aw, ay;
    if (kc_prog_bss(p, "X", (uint64_t)(N * H * W * C * e), &ax, err) != NP_OK ||
        kc_prog_bss(p, "W", (uint64_t)(R * S * C * O * e), &aw, err) != NP_OK ||
        kc_prog_bss(p, "Y", (uint64_t)(N * E * F * O * ce), &ay, err) != NP_OK)
        return err->status;
    k->n_in = 2, k->n_out = 1;
    k->in[0] = (kc_tensor){ax, dt, 4, {N, C, H, W}, {H * W * C * e, e, W * C * e, C * e}};
    k->in[1] = (kc_tensor){aw, dt, 4, {O, C, R, S}, {e, O * e, S * C * O * e, C * O * e}};
    k->out[0] = (kc_tensor){ay, od, 4, {N, O, E, F}, {E * F * O * ce, ce, F * O * ce, O * ce}};
    return NP_OK;
}

/* ---- the table rows --------------------------------------------------------------------------- */

#define KMM_TILE_ATTRS                                                                          \
    {"tm", KC_ATTR_INT, 0, 0, 65535, "output tile rows (0: chosen)"},                          \
    {"tn", KC_ATTR_INT, 0, 0, 65535, "output tile columns (0: chosen)"},                       \
    {"tk", KC_ATTR_INT, 0, 0, 65535, "K slice depth (0: chosen)"}

static const kc_attr_def matmul_attrs[] = {KMM_TILE_ATTRS};

static const kc_attr_def conv2d_attrs[] = {
    {"stride", KC_ATTR_INT, 1, 1, 65535, "vertical stride (and horizontal unless stride_w)"},
    {"stride_w", KC_ATTR_INT, 0, 0, 65535, "horizontal stride (0: stride)"},
    {"pad", KC_ATTR_INT, 0, 0, 65535, "zero padding on every side"},
    {"dilation", KC_ATTR_INT, 1, 1, 65535, "filter dilation"},
    {"groups", KC_ATTR_INT, 1, 1, 65535, "channel groups"},
    KMM_TILE_ATTRS,
};

const kc_kernel_def kc_matmul_def = {
    .op = NN_OP_MATMUL, .flags = KC_DEF_EPILOGUE, .n_in = 2, .n_out = 1,
    .attrs = matmul_attrs, .n_attrs = sizeof matmul_attrs / sizeof matmul_attrs[0],
    .compile = matmul_compile,
    .keys = matmul_keys, .n_keys = sizeof matmul_keys / sizeof matmul_keys[0],
    .build = matmul_build,
    .reference = matmul_reference,
    .doc = "tiled, double-buffered GEMM on the matrix unit; batches, rows of tiles, tiles and "
           "pairs of K slices as loops",
};

const kc_kernel_def kc_conv2d_def = {
    .op = NN_OP_CONV2D, .flags = KC_DEF_EPILOGUE, .n_in = 2, .n_out = 1,
    .attrs = conv2d_attrs, .n_attrs = sizeof conv2d_attrs / sizeof conv2d_attrs[0],
    .compile = conv2d_compile,
    .keys = conv2d_keys, .n_keys = sizeof conv2d_keys / sizeof conv2d_keys[0],
    .build = conv2d_build,
    .reference = conv2d_reference,
    .doc = "implicit im2col: the GEMM schedule of matmul with each A slice gathered from the "
           "NHWC input by strided DMA",
};
