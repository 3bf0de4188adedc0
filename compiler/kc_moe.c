/* kc_moe.c — the routing kernels of a mixture-of-experts layer (framework/op_moe.c): topk,
 * moe_dispatch, moe_combine and moe_combine_grad, on the first core of their placement.
 *
 *   topk            scores [R, E] -> idx [R, k] i32: row tiles of the scores in fp32; per
 *                   choice vpu.rmax, the lowest column holding it (vpu.cmpeq, vpu.sel of the
 *                   column index, vpu.rmin), that column knocked out (vpu.sels to -FLT_MAX);
 *                   the k columns transposed into rows and stored as i32
 *   the routing     (km_slots, shared by the other three) the row of every assignment in the
 *                   layout of op_moe.c's header, computed from idx on the VPU: blocks of
 *                   assignments in token order as one-hot rows (vpu.cmpeq of the expert index
 *                   against the column index), pass 1 their column sums (the counts; the
 *                   experts' first rows an exclusive prefix sum over the counts by doubling
 *                   steps), pass 2 each block's running count per expert (a Hillis-Steele
 *                   prefix sum over the block's rows, plus the carry of the blocks before),
 *                   the row of an assignment a row dot product of its one-hot row with
 *                   first + running count - 1; with capacity, rows past C moved outside the
 *                   table (dropped: dma.gather/scatter skip them). Exact in fp32 below 2^24.
 *   moe_dispatch    zeros (with capacity: the empty rows), then per choice j dma.scatter of
 *                   the tokens' rows to their rows (weighted: per token tile, the rows scaled
 *                   by w[:, j] with vpu.fma, scattered from the scratchpad)
 *   moe_combine     per token tile: per choice dma.gather of the rows (dropped ones zero),
 *                   accumulated in fp32 times w[:, j] (vpu.fma), rounded once and stored
 *   moe_combine_grad per token tile: dout's rows, per choice the gathered rows' dot products
 *                   with them (vpu.rdot), transposed to [tile, k] and stored
 *
 * Values: topk and the layout are exact; dispatch is one rounding of w x x to the dtype;
 * combine and combine_grad sum in fp32 (the reference in double): within the dtype's ulp. */
#include <float.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "kc_moe.h"
#include "kc_phase.h"


np_status km_sems_alloc(kc_ctx *x, km_sems *s)
{
    kc_sem_alloc(x, &s->dv);
    kc_sem_alloc(x, &s->vd);
    kc_sem_alloc(x, &s->dd);
    return kc_status(x);
}

void km_sync(kc_ctx *x, isa_unit from, isa_unit to, const km_sems *s)
{
    unsigned n = from == ISA_UNIT_VPU ? s->vd : to == ISA_UNIT_VPU ? s->dv : s->dd;
    ISA_EMIT(x->e, SEM_SIGNAL, isa_enum(from), isa_sem(n));
    ISA_EMIT(x->e, SEM_WAIT, isa_enum(to), isa_sem(n));
}

int64_t km_attr(const kc_kernel *k, const char *name, int64_t dflt)
{
    const kc_attr *a = kc_kernel_attr(k, name);
    return a ? a->i : dflt;
}

bool km_dense(const kc_tensor *t)
{
    kc_tensor d;
    kc_tensor_dense(&d, t->addr, t->dtype, t->ndim, t->shape);
    return !memcmp(d.stride, t->stride, sizeof(int64_t) * (size_t)t->ndim);
}

/* ---- the routing layout --------------------------------------------------------------------- */

np_status km_slots(kc_ctx *x, const kc_tensor *idx, km_route *r)
{
    isa_emit *em = x->e;
    int64_t T = r->T, k = r->k, E = r->E, n_all = T * k, n = (r->hi - r->lo) * k;
    int64_t i_lo = r->lo * k;
    if (idx->ndim != 2 || (idx->dtype != NN_I32) || !km_dense(idx))
        return kc_fail(x, NP_ERR_INCONSISTENT, "the expert indices must be dense i32 [tokens, k]");
    if (T > KM_MAX || E > KM_MAX || n_all * 2 >= (1 << 24))
        return kc_fail(x, NP_ERR_RANGE, "%" PRId64 " tokens x %" PRId64 " choices of %" PRId64
                       " experts (at most 65535 tokens and experts, rows below 2^23)", T, k, E);
    uint64_t core = isa_emit_cur_core(x->e), fixed = (uint64_t)n * 12 + (uint64_t)E * 24 + 4096;
    uint64_t avail = kc_spad_avail(x, core);
    if (avail < fixed + (uint64_t)E * 20 + 8)
        return kc_fail(x, NP_ERR_RANGE, "the routing of %" PRId64 " assignments needs %" PRIu64
                       " bytes of scratchpad, the core has %" PRIu64, n, fixed, avail);
    /* blocks take half of what is left: the other half is the kernel's tiles' */
    int64_t nb = (int64_t)((avail - fixed) / 2 / ((uint64_t)E * 16 + 8));
    nb = nb < 1 ? 1 : nb;
    nb = nb > n_all ? n_all : nb;
    nb = nb > 8192 ? 8192 : nb;
    uint64_t s_S, s_St, s_idx, s_iv, s_iota, s_o, s_p[2], s_cnt, s_q[2], s_base, s_carry, s_tmp;
    kc_spad_alloc(x, (uint64_t)n * 4, 64, &s_S);
    kc_spad_alloc(x, (uint64_t)n * 4, 64, &s_St);
    kc_spad_alloc(x, (uint64_t)n * 4, 64, &r->si);
    kc_spad_alloc(x, (uint64_t)nb * 4, 64, &s_idx);
    kc_spad_alloc(x, (uint64_t)nb * 4, 64, &s_iv);
    kc_spad_alloc(x, (uint64_t)(nb * E) * 4, 64, &s_iota);
    kc_spad_alloc(x, (uint64_t)(nb * E) * 4, 64, &s_o);
    kc_spad_alloc(x, (uint64_t)(nb * E) * 4, 64, &s_p[0]);
    kc_spad_alloc(x, (uint64_t)(nb * E) * 4, 64, &s_p[1]);
    kc_spad_alloc(x, (uint64_t)E * 4, 64, &s_cnt);
    kc_spad_alloc(x, (uint64_t)E * 4, 64, &s_q[0]);
    kc_spad_alloc(x, (uint64_t)E * 4, 64, &s_q[1]);
    kc_spad_alloc(x, (uint64_t)E * 4, 64, &s_base);
    kc_spad_alloc(x, (uint64_t)E * 4, 64, &s_carry);
    kc_spad_alloc(x, (uint64_t)(E > nb ? E : nb) * 4, 64, &s_tmp);
    if (km_sems_alloc(x, &r->sem) != NP_OK)
        return kc_status(x);
    const km_sems *s = &r->sem;
    ISA_EMIT(em, VPU_IOTA, isa_spad(0, s_iota), isa_val(0, 0), isa_imm(0), isa_imm(1),
             isa_imm(nb), isa_imm(E), isa_enum(KM_F));
    ISA_EMIT(em, VPU_FILL, isa_spad(0, s_cnt), isa_f32(0), isa_imm(1), isa_imm(E), isa_enum(KM_F));
    ISA_EMIT(em, VPU_FILL, isa_spad(0, s_carry), isa_f32(0), isa_imm(1), isa_imm(E),
             isa_enum(KM_F));
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) { /* the experts' first rows: base = first - 1 */
            if (r->C > 0) {
                ISA_EMIT(em, VPU_IOTA, isa_spad(0, s_base), isa_val(0, -1), isa_imm(0),
                         isa_imm(r->C), isa_imm(1), isa_imm(E), isa_enum(KM_F));
            } else { /* inclusive prefix of the counts by doubling, minus the counts, minus 1 */
                int q = 0;
                ISA_EMIT(em, VPU_COPY, isa_spad(0, s_q[0]), isa_spad(0, s_cnt), isa_imm(1),
                         isa_imm(E), isa_enum(KM_F));
                for (int64_t sh = 1; sh < E; sh *= 2, q ^= 1) {
                    ISA_EMIT(em, VPU_ADD, isa_spad(0, s_q[q ^ 1] + (uint64_t)sh * 4),
                             isa_spad(0, s_q[q] + (uint64_t)sh * 4), isa_spad(0, s_q[q]),
                             isa_imm(1), isa_imm(E - sh), isa_enum(KM_F));
                    ISA_EMIT(em, VPU_COPY, isa_spad(0, s_q[q ^ 1]), isa_spad(0, s_q[q]),
                             isa_imm(1), isa_imm(sh), isa_enum(KM_F));
                }
                ISA_EMIT(em, VPU_SUB, isa_spad(0, s_base), isa_spad(0, s_q[q]),
                         isa_spad(0, s_cnt), isa_imm(1), isa_imm(E), isa_enum(KM_F));
                ISA_EMIT(em, VPU_ADDS, isa_spad(0, s_base), isa_spad(0, s_base), isa_f32(-1),
                         isa_imm(1), isa_imm(E), isa_enum(KM_F));
            }
        }
        /* pass 1: [0, i_lo) (then its counts are the carry), [i_lo, n_all); pass 2: the core's */
        int64_t from = pass ? i_lo : 0, to = pass ? i_lo + n : n_all;
        for (int64_t i0 = from, m = 0; i0 < to; i0 += m) {
            m = (pass == 0 && i0 < i_lo ? i_lo : to) - i0;
            m = m < nb ? m : nb;
            ISA_EMIT(em, DMA_COPY, isa_spad(0, s_idx), isa_hbm(0, idx->addr + (uint64_t)i0 * 4),
                     isa_enum(ISA_DTYPE_INT32), isa_imm(m));
            km_sync(x, ISA_UNIT_DMA, ISA_UNIT_VPU, s);
            ISA_EMIT(em, VPU_CAST, isa_spad(0, s_iv), isa_spad(0, s_idx), isa_imm(m), isa_imm(1),
                     isa_enum(KM_F), isa_enum(ISA_DTYPE_INT32));
            km_sync(x, ISA_UNIT_VPU, ISA_UNIT_DMA, s); /* s_idx free for the next block */
            ISA_EMIT(em, VPU_CMPEQ, isa_spad(0, s_o), isa_spad(0, s_iota), isa_spad(0, s_iv),
                     isa_imm(m), isa_imm(E), isa_enum(KM_F), .bcast = isa_enum(ISA_BCAST_COL));
            if (pass == 0) {
                ISA_EMIT(em, VPU_CSUM, isa_spad(0, s_tmp), isa_spad(0, s_o), isa_imm(m),
                         isa_imm(E), isa_enum(KM_F));
                ISA_EMIT(em, VPU_ADD, isa_spad(0, s_cnt), isa_spad(0, s_cnt), isa_spad(0, s_tmp),
                         isa_imm(1), isa_imm(E), isa_enum(KM_F));
                if (i0 + m == i_lo)
                    ISA_EMIT(em, VPU_COPY, isa_spad(0, s_carry), isa_spad(0, s_cnt), isa_imm(1),
                             isa_imm(E), isa_enum(KM_F));
                continue;
            }
            /* the running count per expert inside the block (inclusive), by doubling */
            int p = 0;
            ISA_EMIT(em, VPU_COPY, isa_spad(0, s_p[0]), isa_spad(0, s_o), isa_imm(m), isa_imm(E),
                     isa_enum(KM_F));
            for (int64_t sh = 1; sh < m; sh *= 2, p ^= 1) {
                uint64_t off = (uint64_t)(sh * E) * 4;
                ISA_EMIT(em, VPU_ADD, isa_spad(0, s_p[p ^ 1] + off), isa_spad(0, s_p[p] + off),
                         isa_spad(0, s_p[p]), isa_imm(m - sh), isa_imm(E), isa_enum(KM_F));
                ISA_EMIT(em, VPU_COPY, isa_spad(0, s_p[p ^ 1]), isa_spad(0, s_p[p]),
                         isa_imm(sh), isa_imm(E), isa_enum(KM_F));
            }
            /* + the blocks before: the count up to and including the assignment */
            ISA_EMIT(em, VPU_ADD, isa_spad(0, s_p[p]), isa_spad(0, s_p[p]), isa_spad(0, s_carry),
                     isa_imm(m), isa_imm(E), isa_enum(KM_F), .bcast = isa_enum(ISA_BCAST_ROW));
            ISA_EMIT(em, VPU_CSUM, isa_spad(0, s_tmp), isa_spad(0, s_o), isa_imm(m), isa_imm(E),
                     isa_enum(KM_F));
            ISA_EMIT(em, VPU_ADD, isa_spad(0, s_carry), isa_spad(0, s_carry), isa_spad(0, s_tmp),
                     isa_imm(1), isa_imm(E), isa_enum(KM_F));
            uint64_t dst = s_S + (uint64_t)(i0 - i_lo) * 4;
            if (r->C > 0) { /* q = the count (position + 1); row = first - 1 + q unless q > C */
                ISA_EMIT(em, VPU_RDOT, isa_spad(0, s_tmp), isa_spad(0, s_o), isa_spad(0, s_p[p]),
                         isa_imm(m), isa_imm(E), isa_enum(KM_F), isa_enum(KM_F));
                ISA_EMIT(em, VPU_RDOT, isa_spad(0, dst), isa_spad(0, s_o), isa_spad(0, s_base),
                         isa_imm(m), isa_imm(E), isa_enum(KM_F), isa_enum(KM_F),
                         .bcast = isa_enum(ISA_BCAST_ROW));
                ISA_EMIT(em, VPU_ADD, isa_spad(0, dst), isa_spad(0, dst), isa_spad(0, s_tmp),
                         isa_imm(m), isa_imm(1), isa_enum(KM_F));
                ISA_EMIT(em, VPU_CMPLES, isa_spad(0, s_tmp), isa_spad(0, s_tmp),
                         isa_f32((float)r->C), isa_imm(m), isa_imm(1), isa_enum(KM_F));
                ISA_EMIT(em, VPU_SELS, isa_spad(0, dst), isa_spad(0, s_tmp), isa_spad(0, dst),
                         isa_f32((float)(r->N + 1)), isa_imm(m), isa_imm(1), isa_enum(KM_F));
            } else {
                ISA_EMIT(em, VPU_ADD, isa_spad(0, s_p[p]), isa_spad(0, s_p[p]),
                         isa_spad(0, s_base), isa_imm(m), isa_imm(E), isa_enum(KM_F),
                         .bcast = isa_enum(ISA_BCAST_ROW));
                ISA_EMIT(em, VPU_RDOT, isa_spad(0, dst), isa_spad(0, s_o), isa_spad(0, s_p[p]),
                         isa_imm(m), isa_imm(E), isa_enum(KM_F), isa_enum(KM_F));
            }
        }
    }
    /* [T, k] -> [k, T], as i32: each choice's rows contiguous for the indexed copies */
    ISA_EMIT(em, VPU_TRANSPOSE, isa_spad(0, s_St), isa_spad(0, s_S), isa_imm(r->hi - r->lo),
             isa_imm(k), isa_enum(KM_F));
    ISA_EMIT(em, VPU_CAST, isa_spad(0, r->si), isa_spad(0, s_St), isa_imm(k),
             isa_imm(r->hi - r->lo), isa_enum(ISA_DTYPE_INT32), isa_enum(KM_F));
    km_sync(x, ISA_UNIT_VPU, ISA_UNIT_DMA, s);
    return kc_status(x);
}

np_status km_route_of(kc_ctx *x, int ii, km_route *r)
{
    const kc_tensor *idx = &x->k->in[ii];
    r->E = kc_attr_int(x, "experts");
    r->C = kc_attr_int(x, "capacity");
    r->T = idx->ndim == 2 ? idx->shape[0] : 0;
    r->k = idx->ndim == 2 ? idx->shape[1] : 0;
    r->N = r->C > 0 ? r->E * r->C : r->T * r->k;
    if (r->T < 1 || r->k < 1)
        return kc_fail(x, NP_ERR_INCONSISTENT, "the expert indices must be [tokens, k]");
    return NP_OK;
}

int64_t km_tile_rows(kc_ctx *x, uint64_t per_row, int64_t T)
{
    uint64_t avail = kc_spad_avail(x, isa_emit_cur_core(x->e)) / 4 * 3;
    int64_t tt = (int64_t)(avail / (per_row ? per_row : 1));
    tt = tt > T ? T : tt;
    return tt > KM_MAX ? KM_MAX : tt;
}

/* w[t0 .. t0 + m, j] as a packed fp32 column at col (via staging st, w's dtype). */
static void km_wcol(kc_ctx *x, const kc_tensor *w, int64_t t0, int64_t m, int64_t j, int64_t k,
                    uint64_t st, uint64_t col, const km_sems *s)
{
    int64_t e = (int64_t)nn_dtype_size(w->dtype);
    isa_dtype dt = kc_isa_dtype(w->dtype);
    ISA_EMIT(x->e, DMA_COPY, isa_spad(0, st), isa_hbm(0, w->addr + (uint64_t)((t0 * k + j) * e)),
             isa_enum(dt), isa_imm(1), .n1 = isa_imm(m), .src_s1 = isa_imm(k * e));
    km_sync(x, ISA_UNIT_DMA, ISA_UNIT_VPU, s);
    ISA_EMIT(x->e, VPU_CAST, isa_spad(0, col), isa_spad(0, st), isa_imm(m), isa_imm(1),
             isa_enum(KM_F), isa_enum(dt));
}

uint32_t km_cores(const kc_ctx *x, int64_t T)
{
    int64_t n = x->k->place.n_cores ? x->k->place.n_cores : 1;
    n = n > T ? T : n;
    int64_t per = (T + n - 1) / n;
    return (uint32_t)((T + per - 1) / per);
}

void km_split(int64_t n, uint32_t nc, uint32_t c, int64_t *lo, int64_t *hi)
{
    int64_t per = (n + nc - 1) / nc;
    *lo = per * c < n ? per * c : n;
    *hi = *lo + per < n ? *lo + per : n;
}

/* ---- moe_dispatch ------------------------------------------------------------------------- */

static np_status dispatch_compile(kc_ctx *x)
{
    const kc_kernel *k = x->k;
    const kc_tensor *X = &k->in[0], *W = k->n_in > 2 ? &k->in[2] : NULL, *Y = &k->out[0];
    km_route r;
    if (km_route_of(x, 1, &r) != NP_OK)
        return kc_status(x);
    int64_t D = X->ndim == 2 ? X->shape[1] : 0, e = (int64_t)nn_dtype_size(X->dtype);
    if (X->ndim != 2 || X->shape[0] != r.T || Y->ndim != 2 || Y->shape[0] != r.N ||
        Y->shape[1] != D || Y->dtype != X->dtype || !km_dense(X) || !km_dense(Y) ||
        (W && (W->dtype != X->dtype || !km_dense(W))))
        return kc_fail(x, NP_ERR_INCONSISTENT, "x [tokens, D] and out [%" PRId64 ", D] dense, "
                       "of one dtype (and the weights [tokens, k])", r.N);
    if (D > KM_MAX)
        return kc_fail(x, NP_ERR_RANGE, "rows of %" PRId64 " elements (at most 65535)", D);
    isa_emit *em = x->e;
    isa_dtype dt = kc_isa_dtype(X->dtype);
    uint32_t nc = km_cores(x, r.T);
    if (r.C > 0) { /* empty rows are zero: the output zeroed first (its rows over the cores) */
        for (uint32_t c = 0; c < nc; c++) {
            int64_t lo, hi;
            km_split(r.N, nc, c, &lo, &hi);
            if (hi <= lo)
                continue;
            kc_core(x, k->place.core0 + c);
            int64_t tz = km_tile_rows(x, (uint64_t)(D * e), hi - lo);
            uint64_t s_z;
            km_sems zs;
            if (tz < 1 || kc_spad_alloc(x, (uint64_t)(tz * D * e), 64, &s_z) != NP_OK ||
                km_sems_alloc(x, &zs) != NP_OK)
                return kc_fail(x, NP_ERR_RANGE, "a row of %" PRId64 " elements does not fit the "
                               "scratchpad", D);
            ISA_EMIT(em, VPU_FILL, isa_spad(0, s_z), isa_f32(0), isa_imm(tz), isa_imm(D),
                     isa_enum(dt));
            km_sync(x, ISA_UNIT_VPU, ISA_UNIT_DMA, &zs);
            for (int64_t r0 = lo; r0 < hi; r0 += tz) {
                int64_t m = hi - r0 < tz ? hi - r0 : tz;
                ISA_EMIT(em, DMA_COPY, isa_hbm(0, Y->addr + (uint64_t)(r0 * D * e)),
                         isa_spad(0, s_z), isa_enum(dt), isa_imm(D), .n1 = isa_imm(m));
            }
            km_sync(x, ISA_UNIT_DMA, ISA_UNIT_DMA, &zs);
        }
        if (kc_phase_end(x) != NP_OK) /* every core's zeros before any core's rows */
            return kc_status(x);
    }
    int64_t tt = 0;
    for (uint32_t c = 0; c < nc; c++) {
        km_split(r.T, nc, c, &r.lo, &r.hi);
        kc_core(x, k->place.core0 + c);
        if (km_slots(x, &k->in[1], &r) != NP_OK)
            return kc_status(x);
        int64_t Tc = r.hi - r.lo;
        tt = km_tile_rows(x, (uint64_t)(D * 2 * e + 16), Tc);
        if (tt < 1)
            return kc_fail(x, NP_ERR_RANGE, "a row of %" PRId64 " elements does not fit the "
                           "scratchpad", D);
        uint64_t s_x, s_y, s_w, s_wc, s_zero;
        kc_spad_alloc(x, 64, 64, &s_zero);
        kc_spad_alloc(x, (uint64_t)(tt * D * e), 64, &s_x);
        kc_spad_alloc(x, (uint64_t)(tt * D * e), 64, &s_y);
        kc_spad_alloc(x, (uint64_t)tt * 4, 64, &s_w);
        kc_spad_alloc(x, (uint64_t)tt * 4, 64, &s_wc);
        if (kc_status(x) != NP_OK)
            return kc_status(x);
        ISA_EMIT(em, VPU_FILL, isa_spad(0, s_zero), isa_f32(0), isa_imm(1), isa_imm(1),
                 isa_enum(KM_F));
        for (int64_t t0 = r.lo; t0 < r.hi; t0 += tt) {
            int64_t m = r.hi - t0 < tt ? r.hi - t0 : tt;
            if (W) {
                km_sync(x, ISA_UNIT_VPU, ISA_UNIT_DMA, &r.sem); /* the last tile's rows are out */
                ISA_EMIT(em, DMA_COPY, isa_spad(0, s_x),
                         isa_hbm(0, X->addr + (uint64_t)(t0 * D * e)), isa_enum(dt), isa_imm(D),
                         .n1 = isa_imm(m));
            }
            for (int64_t j = 0; j < r.k; j++) {
                uint64_t ix = r.si + (uint64_t)(j * Tc + t0 - r.lo) * 4;
                if (!W) { /* HBM to HBM */
                    ISA_EMIT(em, DMA_SCATTER, isa_hbm(0, Y->addr),
                             isa_hbm(0, X->addr + (uint64_t)(t0 * D * e)), isa_spad(0, ix),
                             isa_enum(dt), isa_imm(D), isa_imm(m), isa_imm(r.N),
                             .skip = isa_imm(1));
                    continue;
                }
                km_wcol(x, W, t0, m, j, r.k, s_w, s_wc, &r.sem);
                ISA_EMIT(em, VPU_FMA, isa_spad(0, s_y), isa_spad(0, s_x), isa_spad(0, s_wc),
                         isa_spad(0, s_zero), isa_imm(m), isa_imm(D), isa_enum(dt), isa_enum(dt),
                         .bb = isa_enum(ISA_BCAST_COL), .cb = isa_enum(ISA_BCAST_SCALAR));
                km_sync(x, ISA_UNIT_VPU, ISA_UNIT_DMA, &r.sem);
                ISA_EMIT(em, DMA_SCATTER, isa_hbm(0, Y->addr), isa_spad(0, s_y), isa_spad(0, ix),
                         isa_enum(dt), isa_imm(D), isa_imm(m), isa_imm(r.N), .skip = isa_imm(1));
                km_sync(x, ISA_UNIT_DMA, ISA_UNIT_VPU, &r.sem); /* s_y free again */
            }
        }
        km_sync(x, ISA_UNIT_DMA, ISA_UNIT_DMA, &r.sem);
    }
    uint64_t rows = (uint64_t)(r.T * D * e);
    x->res->hbm_read_bytes = rows * (W ? 1 : (uint64_t)r.k) + (uint64_t)(r.T * r.k) * 4 * nc +
                             (W ? (uint64_t)(r.T * r.k) * (uint64_t)e : 0);
    x->res->hbm_write_bytes = (uint64_t)(r.N * D * e) * (r.C > 0 ? 2 : 1);
    x->res->hbm_bytes_min = rows + (uint64_t)(r.T * r.k) * 4 + (uint64_t)(r.N * D * e);
    x->res->cores = nc;
    snprintf(x->res->schedule, sizeof x->res->schedule, "routing on the VPU, dma.scatter of "
             "%" PRId64 "x%" PRId64 " rows%s, token tiles of %" PRId64 " over %u cores", r.T, r.k,
             W ? " scaled by the weights" : " HBM to HBM", tt, nc);
    return kc_status(x);
}

/* ---- moe_combine and moe_combine_grad ----------------------------------------------------- */

static np_status combine_compile(kc_ctx *x)
{
    const kc_kernel *k = x->k;
    bool grad = k->op == NN_OP_MOE_COMBINE_GRAD;
    const kc_tensor *Yr = &k->in[0], *Out = &k->out[0];
    const kc_tensor *W = !grad && k->n_in > 2 ? &k->in[2] : NULL, *G = grad ? &k->in[2] : NULL;
    km_route r;
    if (km_route_of(x, 1, &r) != NP_OK)
        return kc_status(x);
    int64_t D = Yr->ndim == 2 ? Yr->shape[1] : 0, e = (int64_t)nn_dtype_size(Yr->dtype);
    bool ok = Yr->ndim == 2 && Yr->shape[0] == r.N && km_dense(Yr) && km_dense(Out) &&
              Out->dtype == Yr->dtype && Out->ndim == 2 && Out->shape[0] == r.T &&
              Out->shape[1] == (grad ? r.k : D);
    if (W)
        ok = ok && W->dtype == Yr->dtype && km_dense(W);
    if (G)
        ok = ok && G->dtype == Yr->dtype && km_dense(G) && G->ndim == 2 && G->shape[0] == r.T &&
             G->shape[1] == D;
    if (!ok)
        return kc_fail(x, NP_ERR_INCONSISTENT, "rows [%" PRId64 ", D], dense, of one dtype, "
                       "and the output [tokens, %s]", r.N, grad ? "k" : "D");
    if (D > KM_MAX || r.k > 64)
        return kc_fail(x, NP_ERR_RANGE, "rows of %" PRId64 " elements (at most 65535), %" PRId64
                       " choices (at most 64)", D, r.k);
    isa_emit *em = x->e;
    isa_dtype dt = kc_isa_dtype(Yr->dtype);
    uint32_t nc = km_cores(x, r.T);
    int64_t tt = 0;
    for (uint32_t c = 0; c < nc; c++) {
        km_split(r.T, nc, c, &r.lo, &r.hi);
        kc_core(x, k->place.core0 + c);
        if (km_slots(x, &k->in[1], &r) != NP_OK)
            return kc_status(x);
        int64_t Tc = r.hi - r.lo;
        uint64_t per = grad ? (uint64_t)(2 * D * e + 8 * r.k + 16)
                            : (uint64_t)(D * (2 * e + 4) + 16);
        tt = km_tile_rows(x, per, Tc);
        if (tt < 1)
            return kc_fail(x, NP_ERR_RANGE, "a row of %" PRId64 " elements does not fit the "
                           "scratchpad", D);
        uint64_t s_g, s_a, s_o, s_w, s_wc, s_one, s_r = 0, s_rt = 0;
        kc_spad_alloc(x, (uint64_t)(tt * D * e), 64, &s_g);
        kc_spad_alloc(x, (uint64_t)(tt * D) * (grad ? (uint64_t)e : 4), 64, &s_a);
        kc_spad_alloc(x, (uint64_t)(tt * (grad ? r.k : D) * e), 64, &s_o);
        kc_spad_alloc(x, (uint64_t)tt * 4, 64, &s_w);
        kc_spad_alloc(x, (uint64_t)tt * 4, 64, &s_wc);
        kc_spad_alloc(x, 64, 64, &s_one);
        if (grad) {
            kc_spad_alloc(x, (uint64_t)(tt * r.k) * 4, 64, &s_r);
            kc_spad_alloc(x, (uint64_t)(tt * r.k) * 4, 64, &s_rt);
        }
        if (kc_status(x) != NP_OK)
            return kc_status(x);
        ISA_EMIT(em, VPU_FILL, isa_spad(0, s_one), isa_f32(1), isa_imm(1), isa_imm(1),
                 isa_enum(KM_F));
        for (int64_t t0 = r.lo; t0 < r.hi; t0 += tt) {
            int64_t m = r.hi - t0 < tt ? r.hi - t0 : tt;
            if (grad) /* dout's rows */
                ISA_EMIT(em, DMA_COPY, isa_spad(0, s_a),
                         isa_hbm(0, G->addr + (uint64_t)(t0 * D * e)), isa_enum(dt), isa_imm(D),
                         .n1 = isa_imm(m));
            else
                ISA_EMIT(em, VPU_FILL, isa_spad(0, s_a), isa_f32(0), isa_imm(m), isa_imm(D),
                         isa_enum(KM_F));
            for (int64_t j = 0; j < r.k; j++) {
                uint64_t ix = r.si + (uint64_t)(j * Tc + t0 - r.lo) * 4;
                ISA_EMIT(em, DMA_GATHER, isa_spad(0, s_g), isa_hbm(0, Yr->addr), isa_spad(0, ix),
                         isa_enum(dt), isa_imm(D), isa_imm(m), isa_imm(r.N), .skip = isa_imm(1));
                if (W) {
                    km_wcol(x, W, t0, m, j, r.k, s_w, s_wc, &r.sem); /* (syncs the gather) */
                } else {
                    km_sync(x, ISA_UNIT_DMA, ISA_UNIT_VPU, &r.sem);
                }
                if (grad)
                    ISA_EMIT(em, VPU_RDOT, isa_spad(0, s_r + (uint64_t)(j * tt) * 4),
                             isa_spad(0, s_g), isa_spad(0, s_a), isa_imm(m), isa_imm(D),
                             isa_enum(dt), isa_enum(KM_F));
                else
                    ISA_EMIT(em, VPU_FMA, isa_spad(0, s_a), isa_spad(0, s_g),
                             isa_spad(0, W ? s_wc : s_one), isa_spad(0, s_a), isa_imm(m),
                             isa_imm(D), isa_enum(dt), isa_enum(KM_F),
                             .bb = isa_enum(W ? ISA_BCAST_COL : ISA_BCAST_SCALAR),
                             .cb = isa_enum(ISA_BCAST_FULL));
                km_sync(x, ISA_UNIT_VPU, ISA_UNIT_DMA, &r.sem); /* s_g (and s_w) free again */
            }
            if (grad) { /* [k, m] -> [m, k] */
                ISA_EMIT(em, VPU_TRANSPOSE, isa_spad(0, s_rt), isa_spad(0, s_r), isa_imm(r.k),
                         isa_imm(m), isa_enum(KM_F), .src_s = isa_imm(tt * 4));
                ISA_EMIT(em, VPU_CAST, isa_spad(0, s_o), isa_spad(0, s_rt), isa_imm(m),
                         isa_imm(r.k), isa_enum(dt), isa_enum(KM_F));
            } else {
                ISA_EMIT(em, VPU_CAST, isa_spad(0, s_o), isa_spad(0, s_a), isa_imm(m), isa_imm(D),
                         isa_enum(dt), isa_enum(KM_F));
            }
            km_sync(x, ISA_UNIT_VPU, ISA_UNIT_DMA, &r.sem);
            int64_t cols = grad ? r.k : D;
            ISA_EMIT(em, DMA_COPY, isa_hbm(0, Out->addr + (uint64_t)(t0 * cols * e)),
                     isa_spad(0, s_o), isa_enum(dt), isa_imm(cols), .n1 = isa_imm(m));
            km_sync(x, ISA_UNIT_DMA, ISA_UNIT_VPU, &r.sem); /* s_o and dout's rows free again */
        }
        km_sync(x, ISA_UNIT_DMA, ISA_UNIT_DMA, &r.sem);
    }
    uint64_t assign = (uint64_t)(r.T * r.k);
    x->res->hbm_read_bytes = assign * (uint64_t)(D * e) + assign * 4 * nc +
                             (W ? assign * (uint64_t)e : 0) + (G ? (uint64_t)(r.T * D * e) : 0);
    x->res->hbm_write_bytes = kc_tensor_bytes(Out);
    x->res->hbm_bytes_min = kc_tensor_bytes(Yr) + assign * 4 + (W ? assign * (uint64_t)e : 0) +
                            (G ? kc_tensor_bytes(G) : 0) + kc_tensor_bytes(Out);
    x->res->cores = nc;
    snprintf(x->res->schedule, sizeof x->res->schedule, "routing on the VPU, dma.gather of "
             "%" PRId64 "x%" PRId64 " rows, %s, token tiles of %" PRId64 " over %u cores", r.T,
             r.k, grad ? "vpu.rdot with dout" : "summed in fp32 by vpu.fma", tt, nc);
    return kc_status(x);
}

/* ---- topk ----------------------------------------------------------------------------------- */

/* fp32 tiles of a topk row tile: v [m, n] packed, the column index io [tr, n], a mask and a
 * candidate tile as large */
typedef struct km_topk {
    isa_emit *em;
    int64_t m;
    uint64_t io, msk, cand;
} km_topk;

/* One round over v [m, n]: am[i] = the lowest column holding row i's maximum (the maximum into
 * mx[i]); with knock that column becomes -FLT_MAX (it cannot be chosen again). */
static void km_argmax(const km_topk *t, uint64_t v, int64_t n, uint64_t mx, uint64_t am,
                      bool knock)
{
    isa_emit *em = t->em;
    int64_t m = t->m;
    ISA_EMIT(em, VPU_RMAX, isa_spad(0, mx), isa_spad(0, v), isa_imm(m), isa_imm(n), isa_enum(KM_F));
    ISA_EMIT(em, VPU_CMPEQ, isa_spad(0, t->msk), isa_spad(0, v), isa_spad(0, mx), isa_imm(m),
             isa_imm(n), isa_enum(KM_F), .bcast = isa_enum(ISA_BCAST_COL));
    ISA_EMIT(em, VPU_SELS, isa_spad(0, t->cand), isa_spad(0, t->msk), isa_spad(0, t->io),
             isa_f32((float)n), isa_imm(m), isa_imm(n), isa_enum(KM_F));
    ISA_EMIT(em, VPU_RMIN, isa_spad(0, am), isa_spad(0, t->cand), isa_imm(m), isa_imm(n),
             isa_enum(KM_F));
    if (!knock)
        return;
    ISA_EMIT(em, VPU_CMPNE, isa_spad(0, t->msk), isa_spad(0, t->io), isa_spad(0, am), isa_imm(m),
             isa_imm(n), isa_enum(KM_F), .bcast = isa_enum(ISA_BCAST_COL));
    ISA_EMIT(em, VPU_SELS, isa_spad(0, v), isa_spad(0, t->msk), isa_spad(0, v),
             isa_f32(-FLT_MAX), isa_imm(m), isa_imm(n), isa_enum(KM_F));
}

/* A column [m] of a tile whose rows are `stride` bytes apart, copied packed (or back). */
static void km_col(isa_emit *em, uint64_t dst, int64_t dst_s, uint64_t src, int64_t src_s,
                   int64_t m, int64_t cols)
{
    ISA_EMIT(em, VPU_COPY, isa_spad(0, dst), isa_spad(0, src), isa_imm(m), isa_imm(cols),
             isa_enum(KM_F), .dst_s = isa_imm(dst_s), .src_s = isa_imm(src_s));
}

/* Group-limited routing on v [m, E] (G groups of gs, the keep best by the sum of their top
 * `per`): the experts of the other groups pushed to -3e38, below any score. */
static void km_groups(const km_topk *t, uint64_t v, int64_t E, int64_t G, int64_t keep,
                      int64_t per, uint64_t io_g, uint64_t io_G, uint64_t w, uint64_t gsc,
                      uint64_t kept, uint64_t mx, uint64_t am)
{
    isa_emit *em = t->em;
    int64_t m = t->m, gs = E / G;
    km_topk tg = *t;
    tg.io = io_g;
    for (int64_t g = 0; g < G; g++) { /* a group's score: the sum of its top `per` */
        km_col(em, w, gs * 4, v + (uint64_t)(g * gs) * 4, E * 4, m, gs);
        for (int64_t p = 0; p < per; p++) {
            km_argmax(&tg, w, gs, mx, am, p + 1 < per);
            if (p == 0)
                km_col(em, gsc + (uint64_t)g * 4, G * 4, mx, 4, m, 1);
            else
                ISA_EMIT(em, VPU_ADD, isa_spad(0, gsc + (uint64_t)g * 4),
                         isa_spad(0, gsc + (uint64_t)g * 4), isa_spad(0, mx), isa_imm(m),
                         isa_imm(1), isa_enum(KM_F), .dst_s = isa_imm(G * 4),
                         .a_s = isa_imm(G * 4), .b_s = isa_imm(4));
        }
    }
    tg.io = io_G;
    ISA_EMIT(em, VPU_FILL, isa_spad(0, kept), isa_f32(0), isa_imm(m), isa_imm(G), isa_enum(KM_F));
    for (int64_t n = 0; n < keep; n++) { /* the keep best groups (lowest index on ties) */
        km_argmax(&tg, gsc, G, mx, am, true);
        ISA_EMIT(em, VPU_CMPEQ, isa_spad(0, t->cand), isa_spad(0, io_G), isa_spad(0, am),
                 isa_imm(m), isa_imm(G), isa_enum(KM_F), .bcast = isa_enum(ISA_BCAST_COL));
        ISA_EMIT(em, VPU_ADD, isa_spad(0, kept), isa_spad(0, kept), isa_spad(0, t->cand),
                 isa_imm(m), isa_imm(G), isa_enum(KM_F));
    }
    for (int64_t g = 0; g < G; g++) { /* v += (kept - 1) x 3e38 over the group's experts */
        km_col(em, mx, 4, kept + (uint64_t)g * 4, G * 4, m, 1);
        ISA_EMIT(em, VPU_ADDS, isa_spad(0, mx), isa_spad(0, mx), isa_f32(-1), isa_imm(m),
                 isa_imm(1), isa_enum(KM_F));
        ISA_EMIT(em, VPU_MULS, isa_spad(0, mx), isa_spad(0, mx), isa_f32(3e38f), isa_imm(m),
                 isa_imm(1), isa_enum(KM_F));
        km_col(em, w, gs * 4, v + (uint64_t)(g * gs) * 4, E * 4, m, gs);
        ISA_EMIT(em, VPU_ADD, isa_spad(0, w), isa_spad(0, w), isa_spad(0, mx), isa_imm(m),
                 isa_imm(gs), isa_enum(KM_F), .bcast = isa_enum(ISA_BCAST_COL));
        km_col(em, v + (uint64_t)(g * gs) * 4, E * 4, w, gs * 4, m, gs);
    }
}

static np_status topk_compile(kc_ctx *x)
{
    const kc_kernel *k = x->k;
    const kc_tensor *S = &k->in[0], *O = &k->out[0];
    int64_t K = kc_attr_int(x, "k"), E = S->ndim ? S->shape[S->ndim - 1] : 0;
    int64_t G = kc_attr_int(x, "groups"), keep = kc_attr_int(x, "keep");
    int64_t per = kc_attr_int(x, "group_top");
    bool grouped = G > 1 && keep < G;
    if (!km_dense(S) || !km_dense(O) || O->dtype != NN_I32 || O->ndim != S->ndim ||
        O->shape[O->ndim - 1] != K || K < 1 || K > E || kc_tensor_numel(O) / K !=
        kc_tensor_numel(S) / E)
        return kc_fail(x, NP_ERR_INCONSISTENT, "scores [..., E] dense and out [..., k] i32");
    if (E > KM_MAX || K > 64)
        return kc_fail(x, NP_ERR_RANGE, "%" PRId64 " experts (at most 65535), k %" PRId64
                       " (at most 64)", E, K);
    if (grouped && (E % G || keep < 1 || per < 1 || per > E / G || K > keep * (E / G)))
        return kc_fail(x, NP_ERR_RANGE, "top-%" PRId64 " of %" PRId64 " experts in %" PRId64
                       " groups keeping %" PRId64 " (group score: the sum of its top %" PRId64
                       ")", K, E, G, keep, per);
    int64_t R = kc_tensor_numel(S) / E, e = (int64_t)nn_dtype_size(S->dtype);
    int64_t gs = grouped ? E / G : 0, Gg = grouped ? G : 0;
    isa_emit *em = x->e;
    isa_dtype dt = kc_isa_dtype(S->dtype);
    uint32_t nc = km_cores(x, R);
    int64_t tr = 0;
    for (uint32_t c = 0; c < nc; c++) {
        int64_t lo, hi;
        km_split(R, nc, c, &lo, &hi);
        kc_core(x, k->place.core0 + c);
        /* per row: the scores (dtype, fp32), the column index, a mask, a candidate; k x 3;
         * grouped: a group's scores, the groups' index, scores and kept mask */
        tr = km_tile_rows(x, (uint64_t)(E * (e + 16) + 12 * K + 16 + gs * 8 + Gg * 12 + 8),
                          hi - lo);
        if (tr < 1)
            return kc_fail(x, NP_ERR_RANGE, "a row of %" PRId64 " scores does not fit", E);
        uint64_t s_in, s_v, s_r, s_rt, s_o, s_mx = 0, s_iog = 0, s_ioG = 0, s_w = 0, s_gs = 0;
        uint64_t s_kept = 0;
        km_topk t = {.em = em};
        km_sems sem;
        kc_spad_alloc(x, (uint64_t)(tr * E * e), 64, &s_in);
        kc_spad_alloc(x, (uint64_t)(tr * E) * 4, 64, &s_v);
        kc_spad_alloc(x, (uint64_t)(tr * E) * 4, 64, &t.io);
        kc_spad_alloc(x, (uint64_t)(tr * E) * 4, 64, &t.msk);
        kc_spad_alloc(x, (uint64_t)(tr * E) * 4, 64, &t.cand);
        kc_spad_alloc(x, (uint64_t)(tr * K) * 4, 64, &s_r);
        kc_spad_alloc(x, (uint64_t)(tr * K) * 4, 64, &s_rt);
        kc_spad_alloc(x, (uint64_t)(tr * K) * 4, 64, &s_o);
        if (grouped) {
            kc_spad_alloc(x, (uint64_t)tr * 4, 64, &s_mx);
            kc_spad_alloc(x, (uint64_t)(tr * gs) * 4, 64, &s_iog);
            kc_spad_alloc(x, (uint64_t)(tr * gs) * 4, 64, &s_w);
            kc_spad_alloc(x, (uint64_t)(tr * G) * 4, 64, &s_ioG);
            kc_spad_alloc(x, (uint64_t)(tr * G) * 4, 64, &s_gs);
            kc_spad_alloc(x, (uint64_t)(tr * G) * 4, 64, &s_kept);
        }
        if (km_sems_alloc(x, &sem) != NP_OK)
            return kc_status(x);
        ISA_EMIT(em, VPU_IOTA, isa_spad(0, t.io), isa_val(0, 0), isa_imm(0), isa_imm(1),
                 isa_imm(tr), isa_imm(E), isa_enum(KM_F));
        if (grouped) {
            ISA_EMIT(em, VPU_IOTA, isa_spad(0, s_iog), isa_val(0, 0), isa_imm(0), isa_imm(1),
                     isa_imm(tr), isa_imm(gs), isa_enum(KM_F));
            ISA_EMIT(em, VPU_IOTA, isa_spad(0, s_ioG), isa_val(0, 0), isa_imm(0), isa_imm(1),
                     isa_imm(tr), isa_imm(G), isa_enum(KM_F));
        }
        for (int64_t r0 = lo; r0 < hi; r0 += tr) {
            int64_t m = hi - r0 < tr ? hi - r0 : tr;
            t.m = m;
            ISA_EMIT(em, DMA_COPY, isa_spad(0, s_in),
                     isa_hbm(0, S->addr + (uint64_t)(r0 * E * e)), isa_enum(dt), isa_imm(m * E));
            km_sync(x, ISA_UNIT_DMA, ISA_UNIT_VPU, &sem);
            ISA_EMIT(em, VPU_CAST, isa_spad(0, s_v), isa_spad(0, s_in), isa_imm(m), isa_imm(E),
                     isa_enum(KM_F), isa_enum(dt));
            if (grouped)
                km_groups(&t, s_v, E, G, keep, per, s_iog, s_ioG, s_w, s_gs, s_kept, s_mx,
                          s_r);
            for (int64_t j = 0; j < K; j++) {
                uint64_t rj = s_r + (uint64_t)(j * tr) * 4;
                km_argmax(&t, s_v, E, rj, rj, j + 1 < K);
            }
            ISA_EMIT(em, VPU_TRANSPOSE, isa_spad(0, s_rt), isa_spad(0, s_r), isa_imm(K),
                     isa_imm(m), isa_enum(KM_F), .src_s = isa_imm(tr * 4));
            ISA_EMIT(em, VPU_CAST, isa_spad(0, s_o), isa_spad(0, s_rt), isa_imm(m), isa_imm(K),
                     isa_enum(ISA_DTYPE_INT32), isa_enum(KM_F));
            km_sync(x, ISA_UNIT_VPU, ISA_UNIT_DMA, &sem);
            ISA_EMIT(em, DMA_COPY, isa_hbm(0, O->addr + (uint64_t)(r0 * K) * 4),
                     isa_spad(0, s_o), isa_enum(ISA_DTYPE_INT32), isa_imm(m * K));
        }
        km_sync(x, ISA_UNIT_DMA, ISA_UNIT_DMA, &sem);
    }
    x->res->hbm_read_bytes = kc_tensor_bytes(S);
    x->res->hbm_write_bytes = kc_tensor_bytes(O);
    x->res->hbm_bytes_min = kc_tensor_bytes(S) + kc_tensor_bytes(O);
    x->res->cores = nc;
    snprintf(x->res->schedule, sizeof x->res->schedule, "row tiles of %" PRId64 " over %u cores: "
             "%sk rounds of vpu.rmax, the lowest column holding it (vpu.rmin), knocked out", tr,
             nc, grouped ? "the best groups kept, " : "");
    return kc_status(x);
}

/* ---- the framework's nodes ------------------------------------------------------------------ */

static np_status km_reference(nn_graph *g, const kc_kernel *k, nn_tensor *const *in,
                              nn_tensor **out, np_err *err)
{
    int64_t ip[NN_MAX_IPARAMS] = {0};
    if (k->op == NN_OP_TOPK) {
        int64_t groups = km_attr(k, "groups", 0);
        ip[0] = km_attr(k, "k", 1);
        ip[1] = groups > 1 ? groups : 0;
        ip[2] = groups > 1 ? km_attr(k, "keep", 0) : 0;
        ip[3] = groups > 1 ? km_attr(k, "group_top", 0) : 0;
    } else {
        ip[0] = km_attr(k, "experts", 1);
        ip[1] = km_attr(k, "capacity", 0);
    }
    out[0] = nn_node(g, k->op, k->n_in, in, ip, NULL);
    return out[0] ? NP_OK : nn_graph_status(g, err);
}

static np_status km_from_node(const nn_tensor *t, kc_kernel *k, np_err *err)
{
    if (k->n_attrs + 4 > KC_MAX_ATTRS)
        return np_err_set(err, NP_ERR_RANGE, "%s: no room for its attributes", nn_op_name(t->op));
    if (t->op == NN_OP_TOPK) {
        k->attrs[k->n_attrs++] = KC_INT("k", t->ip[0]);
        k->attrs[k->n_attrs++] = KC_INT("groups", t->ip[1]);
        k->attrs[k->n_attrs++] = KC_INT("keep", t->ip[2]);
        k->attrs[k->n_attrs++] = KC_INT("group_top", t->ip[3]);
    } else {
        k->attrs[k->n_attrs++] = KC_INT("experts", t->ip[0]);
        k->attrs[k->n_attrs++] = KC_INT("capacity", t->ip[1]);
    }
    return NP_OK;
}

/* The indices (input 1) lie below the experts. */
static int64_t km_index_bound(const kc_kernel *k, int in)
{
    return in == 1 ? km_attr(k, "experts", 1) : 0;
}

/* ---- `npusim kernel --op` ------------------------------------------------------------------- */

static np_status km_build(kc_prog *p, const kc_spec *s, kc_kernel *k, np_err *err)
{
    nn_dtype dt = (nn_dtype)kc_spec_get(s, "dtype")->i;
    memset(k, 0, sizeof *k);
    k->op = s->op, k->n_out = 1;
    np_status st = NP_OK;
    if (s->op == NN_OP_TOPK) {
        const kc_spec_val *sh = kc_spec_get(s, "shape");
        int64_t o[KC_MAX_DIMS];
        memcpy(o, sh->shape, sizeof(int64_t) * (size_t)sh->ndim);
        o[sh->ndim - 1] = kc_spec_get(s, "k")->i;
        k->n_in = 1;
        st = kc_tensor_fresh(p, &k->in[0], dt, sh->ndim, sh->shape, err);
        return st == NP_OK ? kc_tensor_fresh(p, &k->out[0], NN_I32, sh->ndim, o, err) : st;
    }
    int64_t T = kc_spec_get(s, "tokens")->i, K = kc_spec_get(s, "k")->i;
    int64_t D = kc_spec_get(s, "d")->i, E = kc_spec_get(s, "experts")->i;
    int64_t C = kc_spec_get(s, "capacity")->i, N = C > 0 ? E * C : T * K;
    bool w = kc_spec_get(s, "weighted")->i != 0 && s->op != NN_OP_MOE_COMBINE_GRAD;
    k->n_in = s->op == NN_OP_MOE_COMBINE_GRAD || w ? 3 : 2;
    int64_t xs[2] = {s->op == NN_OP_MOE_DISPATCH ? T : N, D};
    st = kc_tensor_fresh(p, &k->in[0], dt, 2, xs, err);
    if (st == NP_OK)
        st = kc_tensor_fresh(p, &k->in[1], NN_I32, 2, (int64_t[]){T, K}, err);
    if (st == NP_OK && k->n_in == 3)
        st = s->op == NN_OP_MOE_COMBINE_GRAD ? kc_tensor_fresh(p, &k->in[2], dt, 2, (int64_t[]){T, D}, err)
                                            : kc_tensor_fresh(p, &k->in[2], dt, 2, (int64_t[]){T, K}, err);
    int64_t os[2] = {s->op == NN_OP_MOE_DISPATCH ? N : T,
                     s->op == NN_OP_MOE_COMBINE_GRAD ? K : D};
    return st == NP_OK ? kc_tensor_fresh(p, &k->out[0], dt, 2, os, err) : st;
}

static const kc_attr_def topk_attrs[] = {
    {"k", KC_ATTR_INT, 1, 1, 64, "the experts chosen per row"},
    {"groups", KC_ATTR_INT, 0, 0, 65535, "group-limited routing's groups (0: plain top-k)"},
    {"keep", KC_ATTR_INT, 0, 0, 65535, "the groups kept"},
    {"group_top", KC_ATTR_INT, 0, 0, 65535, "a group's score: the sum of its top group_top"},
};
static const kc_attr_def topk_keys[] = {
    {"shape", KC_ATTR_SHAPE, KC_REQUIRED, 0, 0, "the scores' shape, ...xE"},
    {"dtype", KC_ATTR_DTYPE, NN_F32, 0, 0, "the scores' element type"},
};
static const kc_attr_def route_attrs[] = {
    {"experts", KC_ATTR_INT, 1, 1, 65535, "the experts E"},
    {"capacity", KC_ATTR_INT, 0, 0, 1 << 24, "rows per expert C (0: dropless, T k rows)"},
};
static const kc_attr_def route_keys[] = {
    {"tokens", KC_ATTR_INT, KC_REQUIRED, 1, 65535, "tokens T"},
    {"k", KC_ATTR_INT, 2, 1, 64, "the experts per token"},
    {"d", KC_ATTR_INT, KC_REQUIRED, 1, 65535, "a row's elements D"},
    {"weighted", KC_ATTR_BOOL, 0, 0, 1, "a weights input [T, k] (dispatch, combine)"},
    {"dtype", KC_ATTR_DTYPE, NN_BF16, 0, 0, "the rows' element type"},
};

#define KM_ROUTE_DEF(OP, name_, fn_, doc_)                                                      \
    const kc_kernel_def name_ = {                                                            \
        .op = OP, .n_in = -1, .n_out = 1, .attrs = route_attrs, .n_attrs = 2,                \
        .compile = fn_,                                                                      \
        .keys = route_keys, .n_keys = 5, .build = km_build, .doc = doc_,                     \
        .reference = km_reference, .index_bound = km_index_bound,                            \
        .from_node = km_from_node,                                                           \
    }

const kc_kernel_def kc_topk_def = {
    .op = NN_OP_TOPK, .n_in = 1, .n_out = 1, .attrs = topk_attrs, .n_attrs = 4,
    .compile = topk_compile, .keys = topk_keys, .n_keys = 2, .build = km_build,
    .doc = "row tiles on the VPU: k rounds of vpu.rmax, the lowest column holding it, knocked out",
    .reference = km_reference, .from_node = km_from_node,
};
KM_ROUTE_DEF(NN_OP_MOE_DISPATCH, kc_moe_dispatch_def, dispatch_compile,
             "the routing on the VPU, then dma.scatter of the tokens' rows to their experts' rows");
KM_ROUTE_DEF(NN_OP_MOE_COMBINE, kc_moe_combine_def, combine_compile,
             "the routing on the VPU, then dma.gather of each token's rows, weighted sum in fp32");
KM_ROUTE_DEF(NN_OP_MOE_COMBINE_GRAD, kc_moe_combine_grad_def, combine_compile,
             "the routing on the VPU, then dma.gather of each token's rows, vpu.rdot with dout");
