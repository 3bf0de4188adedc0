/* kc_gemm_emit.c — the tiled, double-buffered GEMM schedule of matmul and conv2d, emitted
 * (kc_matmul.c plans it, kc_gemm_cost.c estimates it).
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

#include "kc_gemm.h"

#define min_u64 kmm_min
#define cdiv kmm_cdiv

/* ---- emitting ------------------------------------------------------------------------------- */

static void sem_wait(kmm *m, isa_unit u, unsigned s)
{
    ISA_EMIT(m->x->e, SEM_WAIT, isa_enum(u), isa_sem(s));
}

static void sem_signal(kmm *m, isa_unit u, unsigned s)
{
    ISA_EMIT(m->x->e, SEM_SIGNAL, isa_enum(u), isa_sem(s));
}

/* dma.copy of n2 x n1 x n0 elements of dt; strides in bytes (ignored where a count is 1). A
 * read of an operand staged in the global buffer counts as the buffer's (gb_rd). */
static void dma(kmm *m, isa_opnd dst, isa_opnd src, isa_dtype dt, uint64_t n0, uint64_t n1,
                uint64_t n2, uint64_t ds1, uint64_t ss1, uint64_t ds2, uint64_t ss2)
{
    uint64_t rd = m->em.rd;
    kce_dma(&m->em, dst, src, dt, n0, n1, n2, ds1, ss1, ds2, ss2);
    if (src.space == ISA_SPACE_HBM && ((m->a_gb && src.reg == m->rA && m->ak != KMM_A_CONV) ||
                                       (m->b_gb && src.reg == m->rB))) {
        m->gb_rd += m->em.rd - rd;
        m->em.rd = rd;
    }
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
    uint64_t saved = m->em.mult;
    m->em.mult *= iters;
    unsigned q = parity;
    for (uint64_t k = 0; k < per; k++)
        q = body(m, p, k, q, l.real, ctx);
    m->em.mult = saved;
    kc_loop_end(m->x, &l);
    if (per == 2 && count % 2) /* the odd one out, after the loop (registers back at the start) */
        parity = body(m, p, count - 1, parity, false, ctx);
    return parity;
}

/* ---- a convolution: the staged block and the A slices gathered from it ------------------ */

/* The pieces of the M tile [i0, i0 + tm): each a partial output row or a run of whole output
 * rows. With fn non-NULL, calls it per piece; returns the count. */
uint64_t kmm_tile_pieces(uint64_t F, uint64_t i0, uint64_t tm,
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
    uint64_t sa, i0, oh0, k0, tk, klo, khi;
} gather_ctx;

/* The block element of pixel q's window element at run u, offset t in the run, for the block
 * whose first output row is oh0. */
static uint64_t block_el(const kmm_conv *g, uint64_t oh0, uint64_t q, uint64_t u, uint64_t t)
{
    return kmm_run_base(g, u) + (q / g->f_out - oh0) * g->row_step +
           (q % g->f_out) * g->pix_step + t;
}

/* Per piece: one gather per run that columns [klo, khi) of the slice touch, of its part:
 * n0 = that part, n1 = pixels of a row (src step: a pixel of the block), n2 = output rows
 * (src step: an output row of the block). */
static void gather_piece(void *v, uint64_t q, uint64_t cnt, uint64_t rows)
{
    const gather_ctx *x = v;
    kmm *m = x->m;
    const kmm_conv *g = &m->cv;
    uint64_t e = m->e, U = g->unit;
    for (uint64_t u = x->klo / U; u * U < x->khi; u++) {
        uint64_t lo = u * U > x->klo ? u * U : x->klo, hi = min_u64((u + 1) * U, x->khi);
        dma(m, isa_spad(0, x->sa + ((q - x->i0) * x->tk + (lo - x->k0)) * e),
            isa_spad(g->rG, block_el(g, x->oh0, q, u, lo - u * U) * e), m->dt, hi - lo, cnt,
            rows, x->tk * e, g->pix_step * e, g->f_out * x->tk * e, g->row_step * e);
    }
}

/* The longest run of runs from u on (before end) whose block offsets step evenly: its end,
 * and the step in *st (elements). */
static uint64_t even_runs(const kmm_conv *g, uint64_t u, uint64_t end, uint64_t *st)
{
    if (u + 1 >= end) {
        *st = 0;
        return end;
    }
    *st = kmm_run_base(g, u + 1) - kmm_run_base(g, u);
    uint64_t v = u + 1;
    while (v + 1 < end && v + 1 - u < 65535 && kmm_run_base(g, v + 1) - kmm_run_base(g, v) == *st)
        v++;
    return v + 1;
}

/* Copies of the slice's whole runs [ra, rb) done per output row the tile touches, evenly
 * stepped runs in one copy each: their count. */
static uint64_t gathers_per_row(const kmm_conv *g, uint64_t i0, uint64_t tm, uint64_t ra,
                                uint64_t rb)
{
    uint64_t segs = 0, st;
    for (uint64_t u = ra; u < rb; u = even_runs(g, u, rb, &st))
        segs++;
    return ((i0 + tm - 1) / g->f_out - i0 / g->f_out + 1) * segs;
}

/* The gathers of one A slice from the block (its first output row oh0): tile rows [i0, i0 +
 * tm) (output pixels), K columns [k0, k0 + tk), into the scratchpad at sa (tm rows of tk
 * elements). The slice's whole runs [ra, rb) are gathered either per piece and run
 * (gather_piece) or, when that takes more copies, per output row the tile touches with one
 * copy for every evenly stepped stretch of runs (n0 = a run, n1 = runs, n2 = pixels); the
 * partial runs at the slice's ends always per piece. */
static void emit_gather(kmm *m, uint64_t sa, uint64_t oh0, uint64_t i0, uint64_t tm,
                        uint64_t k0, uint64_t tk)
{
    const kmm_conv *g = &m->cv;
    uint64_t F = g->f_out, U = g->unit, e = m->e;
    uint64_t ra = (k0 + U - 1) / U, rb = (k0 + tk) / U;
    gather_ctx x = {m, sa, i0, oh0, k0, tk, k0, k0 + tk};
    if (rb > ra) {
        uint64_t pieces = kmm_tile_pieces(F, i0, tm, NULL, NULL);
        if (gathers_per_row(g, i0, tm, ra, rb) < pieces * (rb - ra)) {
            if (k0 < ra * U) /* the head: part of run ra - 1 */
                x.klo = k0, x.khi = ra * U, kmm_tile_pieces(F, i0, tm, gather_piece, &x);
            for (uint64_t oh = i0 / F; oh * F < i0 + tm; oh++) {
                uint64_t lo = oh * F > i0 ? oh * F : i0, hi = min_u64((oh + 1) * F, i0 + tm), st;
                for (uint64_t u = ra, v; u < rb; u = v) {
                    v = even_runs(g, u, rb, &st);
                    dma(m, isa_spad(0, sa + ((lo - i0) * tk + (u * U - k0)) * e),
                        isa_spad(g->rG, block_el(g, oh0, lo, u, 0) * e), m->dt, U, v - u,
                        hi - lo, U * e, st * e, tk * e, g->pix_step * e);
                }
            }
            if (rb * U < k0 + tk) /* the tail: part of run rb */
                x.klo = rb * U, x.khi = k0 + tk, kmm_tile_pieces(F, i0, tm, gather_piece, &x);
            return;
        }
    }
    kmm_tile_pieces(F, i0, tm, gather_piece, &x);
}

uint64_t kmm_gather_count(const kmm_conv *g, uint64_t i0, uint64_t tm, uint64_t k0, uint64_t tk)
{
    uint64_t U = g->unit, ra = (k0 + U - 1) / U, rb = (k0 + tk) / U;
    uint64_t pieces = kmm_tile_pieces(g->f_out, i0, tm, NULL, NULL);
    uint64_t per_piece = pieces * ((k0 + tk - 1) / U - k0 / U + 1);
    if (rb > ra) {
        uint64_t per_row = gathers_per_row(g, i0, tm, ra, rb);
        if (per_row < pieces * (rb - ra))
            return per_row + (k0 < ra * U ? pieces : 0) + (rb * U < k0 + tk ? pieces : 0);
    }
    return per_piece;
}

/* Fills rows x len elements (each row len long, rows stride bytes apart; stride 0: packed)
 * at off with zeros, in as few vpu.fill as the 16-bit counts allow. */
static void fill_zero(kmm *m, uint64_t off, uint64_t rows, uint64_t len, uint64_t stride)
{
    uint64_t e = m->e;
    if (!stride) { /* packed: any shape of the same elements */
        uint64_t n = rows * len;
        while (n) {
            uint64_t c = min_u64(n, 65535), r = min_u64(n / c, 65535);
            ISA_EMIT(m->x->e, VPU_FILL, isa_spad(0, off), isa_f32(0.0f), isa_imm((int64_t)r),
                     isa_imm((int64_t)c), isa_enum(m->dt));
            off += r * c * e, n -= r * c;
        }
        return;
    }
    for (uint64_t r0 = 0; r0 < rows; r0 += 65535)
        for (uint64_t c0 = 0; c0 < len; c0 += 65535)
            ISA_EMIT(m->x->e, VPU_FILL, isa_spad(0, off + r0 * stride + c0 * e), isa_f32(0.0f),
                     isa_imm((int64_t)min_u64(rows - r0, 65535)),
                     isa_imm((int64_t)min_u64(len - c0, 65535)), isa_enum(m->dt),
                     isa_imm((int64_t)stride));
}

/* Zeros block rows [r0, r1) of the block (every channel). */
static void fill_block_rows(kmm *m, uint64_t r0, uint64_t r1)
{
    const kmm_conv *g = &m->cv;
    uint64_t e = m->e;
    if (r1 <= r0)
        return;
    if (!g->cm)
        fill_zero(m, g->sb + r0 * g->wp * g->c * e, 1, (r1 - r0) * g->wp * g->c, 0);
    else
        fill_zero(m, g->sb + r0 * g->wp * e, g->c, (r1 - r0) * g->wp, g->rb * g->wp * e);
}

/* A DMA fence: the queue's later copies start after its earlier ones completed. */
static void dma_fence(kmm *m)
{
    sem_signal(m, ISA_UNIT_DMA, m->cv.s_fence);
    sem_wait(m, ISA_UNIT_DMA, m->cv.s_fence);
}

/* Stages the block of the tile row at p (tm pixels from p->i0): after the gathers of the
 * previous block (a fence), the input rows it needs that exist are copied from HBM into the
 * zeroed block at their padded places; its rows above or below the input are zeroed by the
 * VPU meanwhile (the columns beside it are never written: zeroed once at the start). The
 * gathers that follow see it landed (a fence, or the wait for the zeros). */
static void emit_stage(kmm *m, const kmm_pos *p, uint64_t tm)
{
    const kmm_conv *g = &m->cv;
    uint64_t e = m->e, i0 = p->i0;
    uint64_t ihp_lo = i0 / g->f_out * g->sh, rows = kmm_block_rows(g, i0, tm);
    uint64_t va = ihp_lo > g->ph ? ihp_lo : g->ph;                   /* padded coordinates */
    uint64_t vb = min_u64(ihp_lo + rows, g->ph + g->h);             /* exclusive */
    uint64_t top = va - ihp_lo, bot = vb > va ? ihp_lo + rows - vb : 0;
    if (vb <= va)
        top = rows, vb = va;
    dma_fence(m);
    bool zero = top || bot;
    if (zero) {
        sem_signal(m, ISA_UNIT_DMA, g->s_zf);
        sem_wait(m, ISA_UNIT_VPU, g->s_zf);
        fill_block_rows(m, 0, top);
        fill_block_rows(m, rows - bot, rows);
        sem_signal(m, ISA_UNIT_VPU, g->s_zd);
    }
    if (vb > va) {
        uint64_t n = vb - va, j = va - ihp_lo;
        isa_opnd src = isa_hbm(m->rA, (uint64_t)p->oa + (va - g->ph) * g->xrow);
        if (g->cm) /* per channel: n rows of wcopy; channels as planes */
            dma(m, isa_spad(0, g->sb + (j * g->wp + g->pw) * e), src, m->dt, g->wcopy, n, g->c,
                g->wp * e, g->xrow, g->rb * g->wp * e, g->xchan);
        else if (g->c == g->ctot) /* n rows of wcopy pixels x c */
            dma(m, isa_spad(0, g->sb + (j * g->wp + g->pw) * g->c * e), src, m->dt,
                g->wcopy * g->c, n, 1, g->wp * g->c * e, g->xrow, 0, 0);
        else /* a group's channels of every pixel: c per pixel, wcopy pixels, n rows */
            dma(m, isa_spad(0, g->sb + (j * g->wp + g->pw) * g->c * e), src, m->dt, g->c,
                g->wcopy, n, g->c * e, g->ctot * e, g->wp * g->c * e, g->xrow);
    }
    if (zero)
        sem_wait(m, ISA_UNIT_DMA, g->s_zd);
    else
        dma_fence(m);
}

/* ---- slices and tiles ----------------------------------------------------------------------- */

/* Slice k (of TK) of the tile at p (tm x tn): the DMA, VPU (transposes) and MXU parts. */
static void emit_slice(kmm *m, const kmm_pos *p, uint64_t tm, uint64_t tn, uint64_t k0,
                       uint64_t tk, unsigned b, isa_accm mode)
{
    k0 += m->kb; /* this core's part of K */
    isa_emit *e = m->x->e;
    uint64_t es = m->e;
    bool ta = kmm_a_transposed(m), tb = kmm_b_transposed(m);
    sem_wait(m, ISA_UNIT_DMA, m->s_free[b]);
    switch (m->ak) {
    case KMM_A_ROWS: /* (kept in the slab under reuse) */
        if (!m->reuse)
            dma(m, isa_spad(0, m->abuf[b]),
                isa_hbm(m->rA, (uint64_t)(p->oa + (int64_t)p->i0 * m->lda) + k0 * es), m->dt, tk,
                tm, 1, tk * es, (uint64_t)m->lda, 0, 0);
        break;
    case KMM_A_COLS: /* tk rows of tm: staged for a transpose, or held as they are (ct) */
        dma(m, isa_spad(0, ta ? m->stage[b] : m->abuf[b]),
            isa_hbm(m->rA, (uint64_t)(p->oa + (int64_t)k0 * m->lda) + p->i0 * es), m->dt, tm,
            tk, 1, tm * es, (uint64_t)m->lda, 0, 0);
        break;
    case KMM_A_CONV: /* from the tile row's block */
        emit_gather(m, m->abuf[b], p->i0 / m->cv.f_out, p->i0, tm, k0, tk);
        break;
    }
    if (!m->b_cols) /* tk rows of tn (staged for a transpose under ct) */
        dma(m, isa_spad(0, tb ? m->bstage[b] : m->bbuf[b]),
            isa_hbm(m->rB, (uint64_t)(p->ob + (int64_t)k0 * m->ldb) + p->j0 * es), m->dt, tn, tk,
            1, tn * es, (uint64_t)m->ldb, 0, 0);
    else /* tn rows of tk */
        dma(m, isa_spad(0, m->bbuf[b]),
            isa_hbm(m->rB, (uint64_t)(p->ob + (int64_t)p->j0 * m->ldb) + k0 * es), m->dt, tk, tn,
            1, tk * es, (uint64_t)m->ldb, 0, 0);
    if (ta || tb) {
        sem_signal(m, ISA_UNIT_DMA, m->s_staged[b]);
        sem_wait(m, ISA_UNIT_VPU, m->s_staged[b]);
        if (ta) /* tk x tm -> the streamed tm x tk */
            ISA_EMIT(e, VPU_TRANSPOSE, isa_spad(0, m->abuf[b]), isa_spad(0, m->stage[b]),
                     isa_imm((int64_t)tk), isa_imm((int64_t)tm), isa_enum(m->dt));
        if (tb) /* tk x tn -> the streamed tn x tk */
            ISA_EMIT(e, VPU_TRANSPOSE, isa_spad(0, m->bbuf[b]), isa_spad(0, m->bstage[b]),
                     isa_imm((int64_t)tk), isa_imm((int64_t)tn), isa_enum(m->dt));
        sem_signal(m, ISA_UNIT_VPU, m->s_full[b]);
    } else {
        sem_signal(m, ISA_UNIT_DMA, m->s_full[b]);
    }
    sem_wait(m, ISA_UNIT_MXU, m->s_full[b]);
    /* A's slice: its buffer, or its columns of the slab (rows kl elements apart) */
    isa_opnd a = m->reuse ? isa_spad(m->rS, (k0 - m->kb) * es) : isa_spad(0, m->abuf[b]);
    isa_opnd as = isa_imm(m->reuse && m->kl != tk ? (int64_t)(m->kl * es) : 0);
    if (!m->ct) { /* hold B (tk x tn), stream A */
        ISA_EMIT(e, MXU_LOAD, isa_spad(0, m->bbuf[b]), isa_imm((int64_t)tk),
                 isa_imm((int64_t)tn), isa_enum(m->dt), isa_imm(m->b_cols));
        ISA_EMIT(e, MXU_MM, isa_acc(0, m->acc), a, isa_imm((int64_t)tm), isa_enum(m->dt),
                 isa_enum(mode), as);
    } else { /* hold A^T (tk x tm: A's slice, transposed unless it is column-major), stream B^T */
        ISA_EMIT(e, MXU_LOAD, a, isa_imm((int64_t)tk), isa_imm((int64_t)tm), isa_enum(m->dt),
                 isa_imm(m->ak != KMM_A_COLS), as);
        ISA_EMIT(e, MXU_MM, isa_acc(0, m->acc), isa_spad(0, m->bbuf[b]), isa_imm((int64_t)tn),
                 isa_enum(m->dt), isa_enum(mode));
    }
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

static void emit_finish(kmm *m, uint64_t tm, uint64_t tn);

/* The end of a tile of a split K: every core drains its partial sums (fp32, int32 for int8
 * inputs, in the accumulators' orientation); the others send theirs to the root over the
 * mesh, the root receives and adds them (then, in emit_post, converts the sum to C's type
 * and runs the epilogue on the VPU: nothing is fused into the drain). */
static void emit_drain_split(kmm *m, const kmm_pos *p, uint64_t tm, uint64_t tn)
{
    isa_emit *e = m->x->e;
    uint64_t bytes = tm * tn * 4, ar = m->ct ? tn : tm, ac = m->ct ? tm : tn;
    uint32_t chip = m->x->k->place.chip;
    /* the accumulators' type: int32 for int8 inputs, else fp32 */
    isa_dtype pdt = m->dt == ISA_DTYPE_INT8 ? ISA_DTYPE_INT32 : ISA_DTYPE_FP32;
    if (m->kpart == 1)
        for (int a = 0; a < m->n_args; a++)
            load_arg(m, p, a, tm, tn);
    if (m->kpart == 1 && m->n_args)
        sem_signal(m, ISA_UNIT_DMA, m->s_eready);
    sem_wait(m, ISA_UNIT_MXU, m->s_pfree);
    ISA_EMIT(e, MXU_DRAIN, isa_spad(0, m->pbuf), isa_acc(0, m->acc), isa_imm((int64_t)ar),
             isa_imm((int64_t)ac), isa_enum(pdt));
    sem_signal(m, ISA_UNIT_MXU, m->s_pready);
    sem_wait(m, ISA_UNIT_COMM, m->s_pready);
    if (m->kpart == 2) {
        ISA_EMIT(e, COMM_SEND, isa_peer(chip, m->kroot), isa_spad(0, m->pbuf),
                 isa_imm((int64_t)bytes), isa_imm(m->tag));
        sem_signal(m, ISA_UNIT_COMM, m->s_pfree);
        return;
    }
    for (unsigned i = 0; i < m->n_kpeers; i++)
        ISA_EMIT(e, COMM_RECV, isa_peer(chip, m->kpeers[i]), isa_spad(0, m->pbuf),
                 isa_imm((int64_t)bytes), isa_imm(m->tag), isa_enum(ISA_RED_ADD), isa_enum(pdt));
    sem_signal(m, ISA_UNIT_COMM, m->s_reduced);
}

/* The epilogue's vector steps on the C tile at c (tm x tn; its operands loaded; casts
 * first). */
static void emit_steps(kmm *m, uint64_t c_at, uint64_t tm, uint64_t tn)
{
    isa_emit *e = m->x->e;
    for (int a = 0; a < m->n_args; a++)
        if (a != m->bias && m->args[a].cast)
            cast_arg(m, a, tm, tn, m->cdt);
    isa_opnd c = isa_spad(0, c_at), rows = isa_imm((int64_t)tm), cols = isa_imm((int64_t)tn);
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
}

/* The VPU's work on the drained tile in cbuf (in the accumulators' orientation: C^T under
 * ct): into C's orientation for the vector steps, the steps, then into the orientation C is
 * stored in (kmm_c_transposes); the store reads m->sbuf. */
static void emit_finish(kmm *m, uint64_t tm, uint64_t tn)
{
    isa_emit *e = m->x->e;
    bool t = m->ct;
    uint64_t at = m->cbuf;
    if (m->n_steps) {
        if (t) { /* tn x tm -> tm x tn */
            ISA_EMIT(e, VPU_TRANSPOSE, isa_spad(0, m->tbuf), isa_spad(0, at), isa_imm((int64_t)tn),
                     isa_imm((int64_t)tm), isa_enum(m->cdt));
            at = m->tbuf, t = false;
        }
        emit_steps(m, at, tm, tn);
    }
    if (t != m->c_cols) {
        uint64_t to = at == m->cbuf ? m->tbuf : m->cbuf;
        ISA_EMIT(e, VPU_TRANSPOSE, isa_spad(0, to), isa_spad(0, at),
                 isa_imm((int64_t)(t ? tn : tm)), isa_imm((int64_t)(t ? tm : tn)),
                 isa_enum(m->cdt));
        at = to;
    }
}

/* The end of the tile at p, its slices done: the epilogue's operands and the drain (the VPU's
 * work and the store follow with emit_store, after the next tile's head when there is
 * one). */
static void emit_drain(kmm *m, const kmm_pos *p, uint64_t tm, uint64_t tn)
{
    if (m->kpart) {
        emit_drain_split(m, p, tm, tn);
        return;
    }
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
    bool loaded = false;
    if (m->n_steps) {
        for (int a = 0; a < m->n_args; a++)
            if (a != m->bias) {
                load_arg(m, p, a, tm, tn);
                loaded = true;
            }
        if (loaded)
            sem_signal(m, ISA_UNIT_DMA, m->s_eready);
    }
    sem_wait(m, ISA_UNIT_MXU, m->s_cfree);
    if (m->bias >= 0)
        sem_wait(m, ISA_UNIT_MXU, m->s_bready);
    ISA_EMIT(e, MXU_DRAIN, isa_spad(0, m->cbuf), isa_acc(0, m->acc),
             isa_imm((int64_t)(m->ct ? tn : tm)), isa_imm((int64_t)(m->ct ? tm : tn)),
             isa_enum(m->cdt), isa_enum(m->act), isa_f32(m->scale),
             m->bias >= 0 ? isa_spad(0, m->args[m->bias].buf) : isa_none());
    sem_signal(m, ISA_UNIT_MXU, kmm_vpu_after_drain(m) ? m->s_drained : m->s_cfull);
}

/* The VPU's part of the end of the tile at p (after its drain): with a split K, the sum's
 * conversion and the whole epilogue; else the steps and transposes emit_finish does. It is
 * emitted after the next tile's head, so the VPU transposes that head's slices first and the
 * array need not wait for them behind this tile's drain. */
static void emit_post(kmm *m, uint64_t tm, uint64_t tn)
{
    if (m->kpart == 2)
        return;
    if (m->kpart == 1) {
        isa_dtype pdt = m->dt == ISA_DTYPE_INT8 ? ISA_DTYPE_INT32 : ISA_DTYPE_FP32;
        sem_wait(m, ISA_UNIT_VPU, m->s_reduced);
        sem_wait(m, ISA_UNIT_VPU, m->s_cfree);
        ISA_EMIT(m->x->e, VPU_CAST, isa_spad(0, m->cbuf), isa_spad(0, m->pbuf),
                 isa_imm((int64_t)(m->ct ? tn : tm)), isa_imm((int64_t)(m->ct ? tm : tn)),
                 isa_enum(m->cdt), isa_enum(pdt));
        sem_signal(m, ISA_UNIT_VPU, m->s_pfree);
        if (m->n_args)
            sem_wait(m, ISA_UNIT_VPU, m->s_eready);
        emit_finish(m, tm, tn);
        sem_signal(m, ISA_UNIT_VPU, m->s_cfull);
        return;
    }
    if (!kmm_vpu_after_drain(m))
        return;
    bool loaded = false;
    for (int a = 0; a < m->n_args && m->n_steps; a++)
        loaded = loaded || a != m->bias;
    sem_wait(m, ISA_UNIT_VPU, m->s_drained);
    if (loaded)
        sem_wait(m, ISA_UNIT_VPU, m->s_eready);
    emit_finish(m, tm, tn);
    sem_signal(m, ISA_UNIT_VPU, m->s_cfull);
}

/* Where the tile at p starts in C, relative to rC. */
static uint64_t c_off(const kmm *m, const kmm_pos *p)
{
    return m->c_cols ? (uint64_t)(p->oc + (int64_t)p->j0 * m->ldc) + p->i0 * m->ce
                     : (uint64_t)(p->oc + (int64_t)p->i0 * m->ldc) + p->j0 * m->ce;
}

/* The VPU's part of the end of the tile at p (emit_post), then its store (none on the cores
 * that send their partial sums): tm rows of tn, or for a column-major C tn rows of tm. */
static void emit_store(kmm *m, const kmm_pos *p, uint64_t tm, uint64_t tn)
{
    emit_post(m, tm, tn);
    if (m->kpart == 2)
        return;
    sem_wait(m, ISA_UNIT_DMA, m->s_cfull);
    uint64_t n0 = m->c_cols ? tm : tn, n1 = m->c_cols ? tn : tm;
    dma(m, isa_hbm(m->rC, c_off(m, p)), isa_spad(0, m->sbuf), m->cdt, n0, n1, 1,
        (uint64_t)m->ldc, n0 * m->ce, 0, 0);
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

static uint64_t head_slices(const kmm *m) { return min_u64(KMM_HEAD, cdiv(m->kl, m->TK)); }

static unsigned emit_head(kmm *m, const kmm_pos *p, uint64_t tm, uint64_t tn, unsigned b)
{
    for (uint64_t i = 0; i < head_slices(m); i++, b ^= 1)
        emit_slice(m, p, tm, tn, i * m->TK, min_u64(m->TK, m->kl - i * m->TK), b,
                   i ? ISA_ACCM_ACCUM : ISA_ACCM_SET);
    return b;
}

/* A tile's slices after its head (the full ones in a loop of pairs, then the edge one) and
 * its drain. */
static unsigned emit_rest(kmm *m, const kmm_pos *p, uint64_t tm, uint64_t tn, unsigned b)
{
    uint64_t full = m->kl / m->TK, edge = m->kl % m->TK, h = head_slices(m);
    slice_ctx sc = {tm, tn, h};
    kmm_steps st = {0};
    if (m->ak == KMM_A_CONV) /* the gathers' slice of the block */
        steps_add(&st, m->cv.rG, m->cv.kstep);
    else if (m->reuse) /* the slice's columns of the slab */
        steps_add(&st, m->rS, (int64_t)(m->TK * m->e));
    else
        steps_add(&st, m->rA, m->ak == KMM_A_ROWS ? (int64_t)(m->TK * m->e)
                                                  : (int64_t)m->TK * m->lda);
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
static unsigned tile_flip(const kmm *m) { return (unsigned)(cdiv(m->kl, m->TK) & 1); }

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
    steps_add(st, m->rC, m->c_cols ? (int64_t)m->TN * m->ldc : (int64_t)(m->TN * m->ce));
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
    if (m->ak == KMM_A_CONV)
        emit_stage(m, p, tm);
    if (m->reuse) /* the row's A rows, this core's part of K, into the slab */
        dma(m, isa_spad(0, m->slab),
            isa_hbm(m->rA, (uint64_t)(p->oa + (int64_t)p->i0 * m->lda) + m->kb * m->e), m->dt,
            m->kl, tm, 1, m->kl * m->e, (uint64_t)m->lda, 0, 0);
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
                                         : (int64_t)(m->TM / m->cv.f_out * m->cv.sh * m->cv.xrow);
    steps_add(st, m->rA, dm_a);
    steps_add(st, m->rC, m->c_cols ? (int64_t)(m->TM * m->ce) : (int64_t)m->TM * m->ldc);
    for (int a = 0; a < m->n_args; a++)
        steps_add(st, m->args[a].reg, m->args[a].sm * (int64_t)m->TM);
}

/* How a whole row of c tiles flips the parity. */
static unsigned row_flip(const kmm *m, uint64_t ncols) { return (unsigned)(ncols & tile_flip(m)); }

typedef struct batch_ctx {
    int d;
    uint64_t r0, r1, c0, c1;
    uint64_t b0, b1; /* this core's part of the outermost batch loop */
} batch_ctx;

/* Whether tile row i of a convolution has a block that reaches past the input (padding rows
 * to zero: such rows are emitted one by one). */
static bool row_clipped(const kmm *m, uint64_t i)
{
    const kmm_conv *g = &m->cv;
    uint64_t i0 = i * m->TM, tm = min_u64(m->TM, m->M - i0), top = i0 / g->f_out * g->sh;
    return top < g->ph || top + kmm_block_rows(g, i0, tm) > g->ph + g->h;
}

/* The tile rows [r0, r1) of one batch: the full ones in a loop — for a convolution those
 * whose block lies inside the input, the others one by one before and after it — then the
 * edge row. */
static unsigned emit_region(kmm *m, const kmm_pos *p, const batch_ctx *bc, unsigned b)
{
    uint64_t rows = cdiv(m->M, m->TM);
    bool edge = bc->r1 == rows && m->M % m->TM;
    uint64_t full = bc->r1 - (edge ? 1 : 0), pa = bc->r0, pb = full;
    while (m->ak == KMM_A_CONV && pa < pb && row_clipped(m, pa))
        pa++;
    while (m->ak == KMM_A_CONV && pb > pa && row_clipped(m, pb - 1))
        pb--;
    region_ctx r = {bc->c0, bc->c1};
    kmm_pos q = *p;
    kmm_steps st = {0};
    row_steps(m, &st);
    unsigned flip = row_flip(m, bc->c1 - bc->c0);
    q.i0 = bc->r0 * m->TM;
    b = kmm_loop(m, &q, pa - bc->r0, flip, false, st.n, st.reg, st.step, body_row, &r, b);
    q.i0 = pa * m->TM;
    b = kmm_loop(m, &q, pb - pa, flip, m->m_regular, st.n, st.reg, st.step, body_row, &r, b);
    q.i0 = pb * m->TM;
    b = kmm_loop(m, &q, full - pb, flip, false, st.n, st.reg, st.step, body_row, &r, b);
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
    uint64_t count = d ? m->bcount[d] : bc->b1 - bc->b0;
    kmm_pos q = *p;
    if (!d) { /* this core's batches start at b0 */
        q.oa += (int64_t)bc->b0 * m->bsa[0];
        q.ob += (int64_t)bc->b0 * m->bsb[0];
        q.oc += (int64_t)bc->b0 * m->bsc[0];
        for (int a = 0; a < m->n_args; a++)
            q.oarg[a] += (int64_t)bc->b0 * m->args[a].sbat[0];
    }
    return kmm_loop(m, &q, count, (unsigned)(tiles & tile_flip(m)), true, st.n, st.reg,
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
static np_status emit_core(kmm *m, uint32_t core, const kmm_part *pt)
{
    kc_ctx *x = m->x;
    isa_emit *e = x->e;
    if (kc_core(x, core) != NP_OK)
        return kc_status(x);
    /* scratchpad, one block: A0 A1 B0 B1 C [A staging 0 1] [B staging 0 1] [transposed C]
     * [partial sums] [epilogue operands] */
    uint64_t es = m->e, a_sz = m->reuse ? 0 : m->TM * m->TK * es, b_sz = m->TK * m->TN * es;
    uint64_t c_sz = m->TM * m->TN * m->ce, work = 2 * a_sz + 2 * b_sz + c_sz, at;
    uint64_t st_at = work, bst_at, t_at;
    if (kmm_a_transposed(m))
        work += 2 * a_sz;
    bst_at = work;
    if (kmm_b_transposed(m))
        work += 2 * b_sz;
    t_at = work;
    if (kmm_c_transposes(m))
        work += c_sz;
    uint64_t p_at = work;
    if (m->kpart)
        work += m->TM * m->TN * 4; /* the fp32 partial sums */
    uint64_t sb_at = work, sb_sz = 0;
    if (m->ak == KMM_A_CONV) /* the staged block */
        work += sb_sz = m->cv.rb * m->cv.wp * m->cv.c * es;
    else if (m->reuse) /* the slab */
        work += m->TM * m->kl * es;
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
    m->stage[0] = at + st_at, m->stage[1] = at + st_at + a_sz;
    m->bstage[0] = at + bst_at, m->bstage[1] = at + bst_at + b_sz;
    m->tbuf = at + t_at;
    m->sbuf = kmm_c_transposes(m) & 1 ? m->tbuf : m->cbuf;
    m->pbuf = at + p_at;
    m->cv.sb = m->slab = at + sb_at;
    for (int a = 0; a < m->n_args; a++) {
        m->args[a].raw += at;
        m->args[a].buf = m->args[a].cast ? m->args[a].buf + at : m->args[a].raw;
    }
    /* semaphores and registers */
    for (int b = 0; b < 2; b++) {
        kc_sem_alloc(x, &m->s_full[b]);
        kc_sem_alloc(x, &m->s_free[b]);
        if (kmm_a_transposed(m) || kmm_b_transposed(m))
            kc_sem_alloc(x, &m->s_staged[b]);
    }
    kc_sem_alloc(x, &m->s_cfull);
    kc_sem_alloc(x, &m->s_cfree);
    if (kmm_vpu_after_drain(m))
        kc_sem_alloc(x, &m->s_drained);
    if (m->n_steps)
        kc_sem_alloc(x, &m->s_eready);
    if (m->bias >= 0) {
        kc_sem_alloc(x, &m->s_bready);
        if (m->args[m->bias].cast)
            kc_sem_alloc(x, &m->s_braw);
    }
    if (m->kpart) {
        kc_sem_alloc(x, &m->s_pready);
        kc_sem_alloc(x, &m->s_pfree);
        kc_sem_alloc(x, &m->s_reduced);
        if (m->n_args && !m->n_steps)
            kc_sem_alloc(x, &m->s_eready);
    }
    if (m->ak == KMM_A_CONV) {
        kc_sem_alloc(x, &m->cv.s_fence);
        kc_sem_alloc(x, &m->cv.s_zf);
        kc_sem_alloc(x, &m->cv.s_zd);
        kc_sem_alloc(x, &m->cv.s_init);
        kc_reg_alloc(x, &m->cv.rG);
    }
    if (m->reuse)
        kc_reg_alloc(x, &m->rS);
    kc_reg_alloc(x, &m->rA);
    kc_reg_alloc(x, &m->rB);
    kc_reg_alloc(x, &m->rC);
    for (int a = 0; a < m->n_args; a++)
        kc_reg_alloc(x, &m->args[a].reg);
    if (kc_status(x) != NP_OK)
        return kc_status(x);
    if (m->reuse)
        ISA_EMIT(e, LI, isa_reg(m->rS), isa_imm((int64_t)m->slab));
    ISA_EMIT(e, LI, isa_reg(m->rA), isa_imm((int64_t)m->a_base));
    ISA_EMIT(e, LI, isa_reg(m->rB), isa_imm((int64_t)m->b_base));
    ISA_EMIT(e, LI, isa_reg(m->rC), isa_imm((int64_t)m->c_base));
    for (int a = 0; a < m->n_args; a++)
        ISA_EMIT(e, LI, isa_reg(m->args[a].reg), isa_imm((int64_t)m->args[a].base));
    /* both buffers and the C tile (and the partial sums) start free */
    sem_signal(m, ISA_UNIT_DMA, m->s_free[0]);
    sem_signal(m, ISA_UNIT_DMA, m->s_free[1]);
    sem_signal(m, ISA_UNIT_DMA, m->s_cfree);
    if (m->kpart)
        sem_signal(m, ISA_UNIT_MXU, m->s_pfree);
    if (m->ak == KMM_A_CONV) { /* the block starts zeroed: its padding columns stay so */
        ISA_EMIT(e, LI, isa_reg(m->cv.rG), isa_imm((int64_t)m->cv.sb));
        fill_zero(m, m->cv.sb, 1, sb_sz / es, 0);
        sem_signal(m, ISA_UNIT_VPU, m->cv.s_init);
        sem_wait(m, ISA_UNIT_DMA, m->cv.s_init);
    }
    kmm_pos p = {0};
    batch_ctx bc = {0, pt->r0, pt->r1, pt->c0, pt->c1, pt->b0, pt->b1};
    m->em.mult = 1;
    emit_batches(m, &p, &bc, 0);
    /* settle: the DMA queue takes back the credits (and so waits for its own last copies) */
    sem_wait(m, ISA_UNIT_DMA, m->s_free[0]);
    sem_wait(m, ISA_UNIT_DMA, m->s_free[1]);
    sem_wait(m, ISA_UNIT_DMA, m->s_cfree);
    if (m->kpart)
        sem_wait(m, ISA_UNIT_MXU, m->s_pfree);
    return kc_status(x);
}

void kmm_split_grid(uint64_t rows, uint64_t cols, uint64_t cores, uint64_t *pr, uint64_t *pc)
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

void kmm_operand_bytes(const kmm *m, uint64_t *a, uint64_t *b, uint64_t *c)
{
    uint64_t ba = 1, bb = 1, bc = 1;
    for (int i = 0; i < m->nb; i++) {
        ba *= m->bsa[i] ? m->bcount[i] : 1;
        bb *= m->bsb[i] ? m->bcount[i] : 1;
        bc *= m->bcount[i];
    }
    *a = (m->ak == KMM_A_CONV ? m->cv.h * m->cv.w * m->cv.c : m->M * m->K) * m->e * ba;
    *b = m->K * m->N * m->e * bb;
    *c = m->M * m->N * m->ce * bc;
}

void kmm_gbuf_plan(const kmm *m, const arch_config *cfg, bool *stage_a, bool *stage_b)
{
    *stage_a = *stage_b = false;
    if (!cfg->chip.l2_bytes || cfg->chip.l2_mode != ARCH_L2_MODE_BUFFER || m->nb)
        return;
    uint64_t rows = cdiv(m->M, m->TM), cols = cdiv(m->N, m->TN), a, b, c;
    kmm_operand_bytes(m, &a, &b, &c);
    uint64_t room = cfg->chip.l2_bytes, round = 256;
    bool b_first = rows > cols;
    for (int i = 0; i < 2; i++) {
        bool is_b = (i == 0) == b_first;
        uint64_t bytes = (is_b ? b : a) + round, reads = is_b ? rows : cols;
        if ((!is_b && m->ak == KMM_A_CONV) || reads < 2 || bytes > room)
            continue;
        *(is_b ? stage_b : stage_a) = true;
        room -= bytes;
    }
}

double kmm_l2_hbm(const kmm *m, const arch_config *cfg, uint64_t pr, uint64_t pc)
{
    uint64_t rows = cdiv(m->M, m->TM), cols = cdiv(m->N, m->TN);
    uint64_t br = cdiv(rows, pr), bc = cdiv(cols, pc), a, b, c;
    kmm_operand_bytes(m, &a, &b, &c);
    if (cfg->chip.l2_mode == ARCH_L2_MODE_BUFFER) { /* staged once, else every tile's read */
        bool sa, sb;
        kmm_gbuf_plan(m, cfg, &sa, &sb);
        return (double)a * (sa || m->ak == KMM_A_CONV ? 1.0 : (double)cols) +
               (double)b * (sb ? 1.0 : (double)rows) + (double)c;
    }
    double cap = (double)cfg->chip.l2_bytes;
    /* one step: every core's tile, its A band and B band over K and its C tile; the pr block
     * rows' cores share their A bands, the pc block columns' their B bands */
    double step = (double)pr * (double)(m->TM * m->K * m->e) +
                  (double)pc * (double)(m->K * m->TN * m->e) +
                  (double)(pr * pc) * (double)(m->TM * m->TN * m->ce);
    /* A band: the next tile of the core's row, a step later (a convolution's A is staged per
     * tile row anyway); B band: the core's next row, bc steps later */
    double fa = m->ak == KMM_A_CONV || step <= cap ? 1.0 : (double)bc;
    double fb = (double)bc * step <= cap ? 1.0 : (double)br;
    return (double)a * fa + (double)b * fb + (double)c;
}

void kmm_split(const kmm *m, const arch_config *cfg, uint64_t cores, uint64_t *pb, uint64_t *pr,
               uint64_t *pc)
{
    uint64_t rows = cdiv(m->M, m->TM), cols = cdiv(m->N, m->TN), nb = m->nb ? m->bcount[0] : 1;
    uint64_t best = UINT64_MAX, bb = 1, br = 1, bcn = 1;
    /* with an L2 cache, among the splits as good, the one that reads the HBM least */
    bool l2 = cfg && cfg->chip.l2_bytes && cfg->chip.l2_mode == ARCH_L2_MODE_CACHE;
    double best_hbm = 0;
    for (uint64_t q = 1; q <= cores && q <= nb; q++)
        for (uint64_t r = 1; q * r <= cores && r <= rows; r++)
            for (uint64_t c = 1; q * r * c <= cores && c <= cols; c++) {
                uint64_t worst = cdiv(nb, q) * cdiv(rows, r) * cdiv(cols, c);
                double hbm = l2 && worst <= best ? kmm_l2_hbm(m, cfg, r, c) : 0;
                if (worst < best || (worst == best && (hbm < best_hbm ||
                                                       (hbm == best_hbm &&
                                                        q * r * c < bb * br * bcn)))) {
                    best = worst;
                    best_hbm = hbm;
                    bb = q, br = r, bcn = c;
                }
            }
    *pb = bb, *pr = br, *pc = bcn;
}

/* Block i of n of [0, total): as even as possible, the larger ones first. */
void kmm_block(uint64_t total, uint64_t n, uint64_t i, uint64_t *lo, uint64_t *hi)
{
    uint64_t base = total / n, extra = total % n;
    *lo = i * base + (i < extra ? i : extra);
    *hi = *lo + base + (i < extra ? 1 : 0);
}

void kmm_part_of(const kmm *m, uint64_t pb, uint64_t pr, uint64_t pc, uint64_t blk,
                 kmm_part *pt)
{
    uint64_t rows = cdiv(m->M, m->TM), cols = cdiv(m->N, m->TN), nb = m->nb ? m->bcount[0] : 1;
    (void)pb;
    kmm_block(nb, pb, blk / (pr * pc), &pt->b0, &pt->b1);
    kmm_block(rows, pr, blk % (pr * pc) / pc, &pt->r0, &pt->r1);
    kmm_block(cols, pc, blk % pc, &pt->c0, &pt->c1);
}

/* Stages the operands kmm_gbuf_plan picks into the global buffer, from its first address
 * (chip.hbm_bytes) on, packed: each core of the placement copies its share of the rows (a
 * barrier before, as an earlier kernel may still read the buffer, and one after, as every core
 * reads every row); the schedule then reads them there. */
static np_status stage_gbuf(kmm *m, uint64_t n_cores)
{
    kc_ctx *x = m->x;
    bool sa, sb;
    kmm_gbuf_plan(m, x->cfg, &sa, &sb);
    if (!sa && !sb)
        return NP_OK;
    np_err e = {0};
    if (kc_barrier(x->prog, &e) != NP_OK)
        return kc_fail(x, e.status, "%s", e.msg);
    uint64_t at = x->cfg->chip.hbm_bytes, es = m->e;
    m->em.mult = 1;
    for (int i = 0; i < 2; i++) {
        bool is_b = i == 1;
        if (!(is_b ? sb : sa))
            continue;
        /* rows of the operand as stored: A's M rows of K (COLS: K rows of M), B's K rows of
         * N (column-major: N rows of K) */
        uint64_t rows = is_b ? (m->b_cols ? m->N : m->K) : (m->ak == KMM_A_ROWS ? m->M : m->K);
        uint64_t w = is_b ? (m->b_cols ? m->K : m->N) : (m->ak == KMM_A_ROWS ? m->K : m->M);
        uint64_t base = is_b ? m->b_base : m->a_base, ld = (uint64_t)(is_b ? m->ldb : m->lda);
        for (uint64_t c = 0; c < n_cores; c++) {
            uint64_t lo, hi;
            kmm_block(rows, n_cores, c, &lo, &hi);
            if (kc_core(x, x->k->place.core0 + (uint32_t)c) != NP_OK)
                return kc_status(x);
            for (uint64_t r = lo; r < hi; r += 65535) { /* n1 is 16 bits */
                uint64_t n = min_u64(hi - r, 65535), wr = m->em.wr;
                kce_dma(&m->em, isa_hbm(0, at + r * w * es), isa_hbm(0, base + r * ld), m->dt, w,
                        n, 1, 0, ld, 0, 0);
                m->em.wr = wr; /* into the buffer, not the HBM */
            }
        }
        if (is_b)
            m->b_base = at, m->ldb = (int64_t)(w * es), m->b_gb = true;
        else
            m->a_base = at, m->lda = (int64_t)(w * es), m->a_gb = true;
        at += (rows * w * es + 255) / 256 * 256;
    }
    if (kc_barrier(x->prog, &e) != NP_OK)
        return kc_fail(x, e.status, "%s", e.msg);
    return kc_status(x);
}

np_status kmm_emit(kmm *m)
{
    kc_ctx *x = m->x;
    const kc_place *pl = &x->k->place;
    uint64_t n_cores = pl->n_cores ? pl->n_cores : 1;
    uint64_t pb, pr, pc, pk = m->pk ? m->pk : 1, slices = cdiv(m->K, m->TK);
    kmm_split(m, x->cfg, n_cores / pk, &pb, &pr, &pc);
    /* a tag of the kernel's own (messages between two cores with one tag stay in order) */
    m->tag = (unsigned)(((m->c_base >> 6) ^ (m->a_base >> 4) ^ (m->b_base >> 2)) & 0xffff);
    if (stage_gbuf(m, pb * pr * pc * pk) != NP_OK)
        return kc_status(x);
    for (uint64_t i = 0; i < pb * pr * pc * pk; i++) {
        uint64_t blk = i / pk, g = i % pk, s0, s1;
        kmm_part pt;
        kmm_part_of(m, pb, pr, pc, blk, &pt);
        kmm_block(slices, pk, g, &s0, &s1); /* this core's K: whole slices */
        m->kb = s0 * m->TK;
        m->kl = min_u64(m->K, s1 * m->TK) - m->kb;
        m->kpart = pk == 1 ? 0 : g == 0 ? 1 : 2;
        m->kroot = pl->core0 + (uint32_t)(blk * pk);
        m->n_kpeers = 0;
        for (uint64_t q = 1; q < pk; q++)
            m->kpeers[m->n_kpeers++] = m->kroot + (uint32_t)q;
        if (emit_core(m, pl->core0 + (uint32_t)i, &pt) != NP_OK)
            return kc_status(x);
    }
    x->res->cores = (uint32_t)(pb * pr * pc * pk);
    x->res->hbm_read_bytes = m->em.rd;
    x->res->hbm_write_bytes = m->em.wr;
    return kc_status(x);
}

