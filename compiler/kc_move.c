/* kc_move.c — permute, concat, slice and pad: data movement without arithmetic.
 *
 * Every one of them is a copy between two strided views of the same shape (kmove_copy): dims
 * of one element are dropped, dims that step alike on both sides merged, and the innermost
 * run (packed on both sides) becomes n0 of a dma.copy straight from HBM to HBM, the next two
 * dims its n1 and n2 (where the strides fit the fields), and the rest loops stepping the two
 * addresses; the outermost dim is split between the cores. No vector work:
 *
 *   slice   the input's window [start, end) along axis -> the output
 *   concat  input i -> the output's window along axis, one copy per input
 *   pad     the input -> the output's window [before, before + n); the two pads are written
 *           from a zeroed scratchpad block
 *   permute when the output's last dim is the input's last dim, one copy with the strides
 *           permuted; otherwise the last dim moves (a transpose of two dims A and B, the rest
 *           a batch): the row schedule (kc_row.h) reads rows of B of the input's A-runs, the
 *           vector unit transposes each tile (vpu.transpose), and the tile goes out as A rows
 *           of B elements — one pass of it per batch index.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kc_row.h"

#define KM_N0 ((1u << 20) - 1)  /* dma.copy's fields */
#define KM_N1 65535u
#define KM_S1 ((INT64_C(1) << 24) - 1)
#define KM_S2 ((INT64_C(1) << 27) - 1)

/* A copy of n elements per dim between src (strides ss) and dst (strides ds), bytes. */
typedef struct kmv {
    int nd;
    int64_t n[KC_MAX_DIMS + 1], ss[KC_MAX_DIMS + 1], ds[KC_MAX_DIMS + 1];
} kmv;

/* Drops dims of one element and merges dims that step alike on both sides (outer first). */
static void kmv_normalize(kmv *v)
{
    kmv o = {0};
    for (int d = 0; d < v->nd; d++) {
        if (v->n[d] == 1)
            continue;
        if (o.nd && o.ss[o.nd - 1] == v->ss[d] * v->n[d] && o.ds[o.nd - 1] == v->ds[d] * v->n[d]) {
            o.n[o.nd - 1] *= v->n[d];
            o.ss[o.nd - 1] = v->ss[d], o.ds[o.nd - 1] = v->ds[d];
            continue;
        }
        o.n[o.nd] = v->n[d], o.ss[o.nd] = v->ss[d], o.ds[o.nd] = v->ds[d];
        o.nd++;
    }
    *v = o;
}

/* Emits the copy v of e-byte elements from src to dst on the cores core0 .. core0 + cores-1
 * (the outermost dim split between them). src is in HBM, unless fixed gives each core a
 * packed scratchpad block of fixed_max bytes that every instruction reads afresh (a block of
 * zeros). Returns the number of cores used (0 after an error). */
static uint32_t kmove_copy(kc_ctx *x, kmv v, uint64_t src, uint64_t dst, isa_dtype dt,
                           const uint64_t *fixed, uint64_t fixed_max, uint32_t core0,
                           uint32_t cores)
{
    int64_t e = (int64_t)isa_dtype_size[dt];
    kmv_normalize(&v);
    if (v.nd == 0) { /* one element */
        v.nd = 1, v.n[0] = 1, v.ss[0] = e, v.ds[0] = e;
    }
    /* the innermost run: packed on both sides (else rows of one element) */
    if (v.ss[v.nd - 1] != e || v.ds[v.nd - 1] != e) {
        if (v.nd == KC_MAX_DIMS + 1)
            return kc_fail(x, NP_ERR_RANGE, "a copy of %d dims without a packed run", v.nd), 0;
        v.n[v.nd] = 1, v.ss[v.nd] = e, v.ds[v.nd] = e;
        v.nd++;
    }
    /* a run longer than n0's field (or the fixed block): split by its largest divisor that
     * fits */
    int64_t run_max = (int64_t)KM_N0;
    if (fixed && (int64_t)(fixed_max / (uint64_t)e) < run_max)
        run_max = (int64_t)(fixed_max / (uint64_t)e);
    if (v.n[v.nd - 1] > run_max) {
        if (v.nd == KC_MAX_DIMS + 1)
            return kc_fail(x, NP_ERR_RANGE, "a copy of %d dims with a run too long", v.nd), 0;
        int64_t n = v.n[v.nd - 1], f = run_max;
        while (n % f)
            f--;
        v.n[v.nd - 1] = n / f, v.ss[v.nd - 1] = f * e, v.ds[v.nd - 1] = f * e;
        v.n[v.nd] = f, v.ss[v.nd] = e, v.ds[v.nd] = e;
        v.nd++;
    }
    int in0 = v.nd - 1;
    /* n1, n2: the next dims out when their counts and strides fit (a fixed block: packed,
     * and within its bytes) */
    int dims[2] = {-1, -1}, nk = 0;
    uint64_t block = (uint64_t)(v.n[in0] * e);
    for (int d = in0 - 1; d >= 0 && nk < 2; d--) {
        int64_t lim = nk ? KM_S2 : KM_S1;
        if (v.n[d] > (int64_t)KM_N1 || v.ds[d] > lim || v.ds[d] <= 0 ||
            (!fixed && (v.ss[d] > lim || v.ss[d] <= 0)) ||
            (fixed && block * (uint64_t)v.n[d] > fixed_max))
            break;
        block *= (uint64_t)v.n[d];
        dims[nk++] = d;
    }
    int loop_lo = nk ? dims[nk - 1] : in0; /* dims [0, loop_lo) are loops */
    if (loop_lo > 3)
        return kc_fail(x, NP_ERR_RANGE, "a copy of %d dims that do not merge into 3 loops and a "
                       "dma.copy", v.nd), 0;
    /* the split between cores: the outermost dim */
    int64_t outer = v.n[0];
    uint32_t used = outer < (int64_t)cores ? (uint32_t)outer : cores;
    for (uint32_t c = 0; c < used; c++) {
        int64_t o0 = outer * c / used, o1 = outer * (c + 1) / used;
        kmv w = v;
        w.n[0] = o1 - o0;
        uint64_t s0 = src + (uint64_t)(o0 * v.ss[0]), d0 = dst + (uint64_t)(o0 * v.ds[0]);
        kc_core(x, core0 + c);
        unsigned rs = 0, rd, sem;
        if (!fixed)
            kc_reg_alloc(x, &rs);
        kc_reg_alloc(x, &rd);
        kc_sem_alloc(x, &sem);
        if (!fixed)
            ISA_EMIT(x->e, LI, isa_reg(rs), isa_imm((int64_t)s0));
        ISA_EMIT(x->e, LI, isa_reg(rd), isa_imm((int64_t)d0));
        kc_loop l[3];
        for (int d = 0; d < loop_lo; d++) {
            unsigned regs[2] = {rd, rs};
            int64_t steps[2] = {w.ds[d], fixed ? 0 : w.ss[d]};
            kc_loop_begin(x, &l[d], (uint64_t)w.n[d], fixed ? 1 : 2, regs, steps);
        }
        int64_t n1 = nk > 0 ? w.n[dims[0]] : 1, n2 = nk > 1 ? w.n[dims[1]] : 1;
        int64_t row = w.n[in0] * e;
        int64_t ds1 = nk > 0 ? w.ds[dims[0]] : 0, ds2 = nk > 1 ? w.ds[dims[1]] : 0;
        int64_t ss1 = nk > 0 && !fixed ? w.ss[dims[0]] : 0;
        int64_t ss2 = nk > 1 && !fixed ? w.ss[dims[1]] : 0;
        ds1 = ds1 == row ? 0 : ds1, ss1 = ss1 == row ? 0 : ss1;
        ds2 = ds2 == n1 * (ds1 ? ds1 : row) ? 0 : ds2;
        ss2 = ss2 == n1 * (ss1 ? ss1 : row) ? 0 : ss2;
        ISA_EMIT(x->e, DMA_COPY, isa_hbm(rd, 0), fixed ? isa_spad(0, fixed[c]) : isa_hbm(rs, 0),
                 isa_enum(dt), isa_imm(w.n[in0]), isa_imm(n1), isa_imm(n2),
                 .dst_s1 = isa_imm(ds1), .src_s1 = isa_imm(ss1), .dst_s2 = isa_imm(ds2),
                 .src_s2 = isa_imm(ss2));
        for (int d = loop_lo - 1; d >= 0; d--)
            kc_loop_end(x, &l[d]);
        krw_signal(x, ISA_UNIT_DMA, sem); /* the DMA queue ends on its own copies */
        krw_wait(x, ISA_UNIT_DMA, sem);
    }
    return used;
}

static uint32_t place_cores(const kc_kernel *k) { return k->place.n_cores ? k->place.n_cores : 1; }

/* The view of t with its window [lo, lo + n) along axis (n 0: t's own extent there). */
static kmv view_of(const kc_tensor *t, const kc_tensor *shape_of, int axis, int64_t lo,
                   uint64_t *addr)
{
    kmv v = {.nd = shape_of->ndim};
    for (int d = 0; d < v.nd; d++)
        v.n[d] = shape_of->shape[d], v.ds[d] = t->stride[d];
    *addr = t->addr + (uint64_t)(lo * t->stride[axis]);
    return v;
}

static void set_src(kmv *v, const kc_tensor *t, uint64_t *addr, int axis, int64_t lo)
{
    for (int d = 0; d < v->nd; d++)
        v->ss[d] = t->stride[d];
    *addr = t->addr + (uint64_t)(lo * t->stride[axis]);
}

static void move_result(kc_ctx *x, uint64_t rd, uint64_t wr, uint32_t cores, const char *how)
{
    x->res->hbm_read_bytes += rd;
    x->res->hbm_write_bytes += wr;
    x->res->cores = cores > x->res->cores ? cores : x->res->cores;
    snprintf(x->res->schedule, sizeof x->res->schedule, "%s", how);
}

/* ---- slice, concat, pad ---------------------------------------------------------------------- */

static int axis_attr(kc_ctx *x, int ndim)
{
    int64_t a = kc_attr_int(x, "axis");
    if (a < 0)
        a += ndim;
    if (a < 0 || a >= ndim) {
        kc_fail(x, NP_ERR_RANGE, "axis %" PRId64 " of a %d-dim tensor", kc_attr_int(x, "axis"),
                ndim);
        return -1;
    }
    return (int)a;
}

static bool same_but(const kc_tensor *a, const kc_tensor *b, int axis)
{
    if (a->ndim != b->ndim || a->dtype != b->dtype)
        return false;
    for (int d = 0; d < a->ndim; d++)
        if (d != axis && a->shape[d] != b->shape[d])
            return false;
    return true;
}

static np_status slice_compile(kc_ctx *x)
{
    const kc_kernel *k = x->k;
    const kc_tensor *X = &k->in[0], *Y = &k->out[0];
    int ax = axis_attr(x, X->ndim);
    if (ax < 0)
        return kc_status(x);
    int64_t start = kc_attr_int(x, "start");
    if (!same_but(X, Y, ax) || start + Y->shape[ax] > X->shape[ax])
        return kc_fail(x, NP_ERR_INCONSISTENT, "out must be x's window [%" PRId64 ", %" PRId64
                       ") along axis %d (x has %" PRId64 ")", start, start + Y->shape[ax], ax,
                       X->shape[ax]);
    uint64_t sa, da;
    kmv v = view_of(Y, Y, ax, 0, &da);
    set_src(&v, X, &sa, ax, start);
    uint32_t c = kmove_copy(x, v, sa, da, kc_isa_dtype(X->dtype), NULL, 0, k->place.core0,
                            place_cores(k));
    move_result(x, kc_tensor_bytes(Y), kc_tensor_bytes(Y), c, "dma.copy HBM to HBM");
    /* the minimum reads the window, not all of x: the window once, out once */
    x->res->hbm_bytes_min = 2 * kc_tensor_bytes(Y);
    return kc_status(x);
}

static np_status concat_compile(kc_ctx *x)
{
    const kc_kernel *k = x->k;
    const kc_tensor *Y = &k->out[0];
    int ax = axis_attr(x, Y->ndim);
    if (ax < 0)
        return kc_status(x);
    if (k->n_in < 1)
        return kc_fail(x, NP_ERR_INCONSISTENT, "no inputs");
    int64_t at = 0;
    for (int i = 0; i < k->n_in; i++) {
        if (!same_but(&k->in[i], Y, ax))
            return kc_fail(x, NP_ERR_INCONSISTENT, "input %d differs from out outside axis %d "
                           "(or in dtype)", i, ax);
        at += k->in[i].shape[ax];
    }
    if (at != Y->shape[ax])
        return kc_fail(x, NP_ERR_INCONSISTENT, "the inputs' dim %d adds up to %" PRId64 ", out "
                       "has %" PRId64, ax, at, Y->shape[ax]);
    at = 0;
    uint32_t used = 0;
    for (int i = 0; i < k->n_in; i++) {
        uint64_t sa, da;
        kmv v = view_of(Y, &k->in[i], ax, at, &da);
        set_src(&v, &k->in[i], &sa, ax, 0);
        uint32_t c = kmove_copy(x, v, sa, da, kc_isa_dtype(Y->dtype), NULL, 0, k->place.core0,
                                place_cores(k));
        used = c > used ? c : used;
        at += k->in[i].shape[ax];
    }
    move_result(x, kc_tensor_bytes(Y), kc_tensor_bytes(Y), used, "dma.copy HBM to HBM per input");
    return kc_status(x);
}

/* Zeroes Y's window [lo, lo + n) along axis from a zeroed scratchpad block on each core. */
static uint32_t zero_window(kc_ctx *x, const kc_tensor *Y, int ax, int64_t lo, int64_t n)
{
    const kc_kernel *k = x->k;
    kc_tensor w = *Y;
    w.shape[ax] = n;
    uint64_t da;
    kmv v = view_of(Y, &w, ax, lo, &da);
    isa_dtype dt = kc_isa_dtype(Y->dtype);
    uint64_t e = isa_dtype_size[dt], total = (uint64_t)kc_tensor_numel(&w) * e;
    uint32_t cores = place_cores(k);
    uint64_t block = kc_spad_avail(x, k->place.core0) / 4, fixed[KC_ROW_MAX_CORES];
    block = (block < total ? block : total) / e * e;
    block = block ? block : e;
    if (cores > KC_ROW_MAX_CORES)
        return kc_fail(x, NP_ERR_RANGE, "%" PRIu32 " cores", cores), 0;
    for (uint32_t c = 0; c < cores; c++) {
        kc_core(x, k->place.core0 + c);
        fixed[c] = krw_alloc(x, block);
        unsigned s;
        kc_sem_alloc(x, &s);
        krw_fill(x, fixed[c], 0.0f, block / e, dt);
        krw_signal(x, ISA_UNIT_VPU, s);
        krw_wait(x, ISA_UNIT_DMA, s);
    }
    x->res->hbm_write_bytes += total;
    return kmove_copy(x, v, 0, da, dt, fixed, block, k->place.core0, cores);
}

static np_status pad_compile(kc_ctx *x)
{
    const kc_kernel *k = x->k;
    const kc_tensor *X = &k->in[0], *Y = &k->out[0];
    int ax = axis_attr(x, X->ndim);
    if (ax < 0)
        return kc_status(x);
    int64_t before = kc_attr_int(x, "before"), after = Y->shape[ax] - X->shape[ax] - before;
    if (!same_but(X, Y, ax) || after < 0)
        return kc_fail(x, NP_ERR_INCONSISTENT, "out must be x padded by %" PRId64 " before it "
                       "along axis %d", before, ax);
    uint64_t sa, da;
    kmv v = view_of(Y, X, ax, before, &da);
    set_src(&v, X, &sa, ax, 0);
    uint32_t c = kmove_copy(x, v, sa, da, kc_isa_dtype(X->dtype), NULL, 0, k->place.core0,
                            place_cores(k));
    if (before)
        zero_window(x, Y, ax, 0, before);
    if (after)
        zero_window(x, Y, ax, before + X->shape[ax], after);
    move_result(x, kc_tensor_bytes(X), kc_tensor_bytes(X), c,
                "dma.copy HBM to HBM, the pads from a zeroed block");
    return kc_status(x);
}

/* ---- permute --------------------------------------------------------------------------------- */

/* The input axis of each output dim, from the attribute's digits (-1: the identity). */
static np_status perm_of(kc_ctx *x, int nd, int *axes)
{
    int64_t a = kc_attr_int(x, "axes");
    bool seen[KC_MAX_DIMS] = {false};
    for (int d = nd - 1; d >= 0; d--) {
        axes[d] = a < 0 ? d : (int)(a % 10);
        a = a < 0 ? a : a / 10;
        if (axes[d] >= nd || seen[axes[d]])
            return kc_fail(x, NP_ERR_RANGE, "axes=%" PRId64 " is not a permutation of 0..%d (one "
                           "digit per output dim: the input axis it takes)",
                           kc_attr_int(x, "axes"), nd - 1);
        seen[axes[d]] = true;
    }
    if (a > 0)
        return kc_fail(x, NP_ERR_RANGE, "axes=%" PRId64 " has more digits than %d dims",
                       kc_attr_int(x, "axes"), nd);
    return NP_OK;
}

/* A transpose pass: the tiles of one batch index. */
typedef struct ktr {
    isa_dtype dt;
    uint64_t A;                 /* the input's packed run, the output's rows (a chunk's) */
    uint64_t A0, Ac;            /* rows in chunks: the whole run, a chunk */
    int64_t ds_a;               /* rows in chunks: the output's stride of A */
    uint64_t src, dst;          /* batch index 0 */
    int nb;                     /* batch dims */
    int64_t bn[KC_MAX_DIMS], bss[KC_MAX_DIMS], bds[KC_MAX_DIMS];
} ktr;

static void tr_work(kc_ctx *x, void *ctx, const kc_row_tile *t)
{
    ktr *k = ctx;
    ISA_EMIT(x->e, VPU_TRANSPOSE, isa_spad(0, t->out[0]), isa_spad(0, t->in[0]),
             isa_imm((int64_t)t->rows), isa_imm((int64_t)k->A), isa_enum(k->dt));
}

static void tr_pass(kc_ctx *x, void *ctx, unsigned pass, kc_row_plan *p)
{
    (void)x;
    ktr *k = ctx;
    uint64_t so = 0, dof = 0, q = pass;
    for (int d = k->nb - 1; d >= 0; d--) {
        uint64_t i = q % (uint64_t)k->bn[d];
        q /= (uint64_t)k->bn[d];
        so += i * (uint64_t)k->bss[d], dof += i * (uint64_t)k->bds[d];
    }
    p->in[0].addr = k->src + so;
    p->out[0].addr = k->dst + dof;
}

/* Chunk `pass` of Ac columns of a transpose whose rows go in chunks (the last one shorter). */
static void tr_chunk_pass(kc_ctx *x, void *ctx, unsigned pass, kc_row_plan *p)
{
    (void)x;
    ktr *k = ctx;
    uint64_t c0 = pass * k->Ac, w = k->A0 - c0 < k->Ac ? k->A0 - c0 : k->Ac;
    k->A = w;
    p->in[0].addr = k->src + c0 * isa_dtype_size[k->dt], p->in[0].width = w;
    p->out[0].addr = k->dst + c0 * (uint64_t)k->ds_a, p->out[0].planes = w;
}

static np_status permute_compile(kc_ctx *x)
{
    const kc_kernel *k = x->k;
    const kc_tensor *X = &k->in[0], *Y = &k->out[0];
    int nd = X->ndim, axes[KC_MAX_DIMS];
    if (Y->ndim != nd || Y->dtype != X->dtype)
        return kc_fail(x, NP_ERR_INCONSISTENT, "out must have x's rank and dtype");
    if (perm_of(x, nd, axes) != NP_OK)
        return kc_status(x);
    kmv v = {.nd = nd};
    for (int d = 0; d < nd; d++) {
        if (Y->shape[d] != X->shape[axes[d]])
            return kc_fail(x, NP_ERR_INCONSISTENT, "out dim %d is %" PRId64 ", x's axis %d %"
                           PRId64,
                           d, Y->shape[d], axes[d], X->shape[axes[d]]);
        v.n[d] = Y->shape[d], v.ss[d] = X->stride[axes[d]], v.ds[d] = Y->stride[d];
    }
    isa_dtype dt = kc_isa_dtype(X->dtype);
    int64_t e = (int64_t)isa_dtype_size[dt];
    uint64_t bytes = kc_tensor_bytes(Y);
    kmv m = v;
    kmv_normalize(&m);
    /* the last dim stays (or moves among dims of one): strided copies */
    if (m.nd == 0 || (m.ss[m.nd - 1] == e && m.ds[m.nd - 1] == e)) {
        uint32_t c = kmove_copy(x, v, X->addr, Y->addr, dt, NULL, 0, k->place.core0,
                                place_cores(k));
        move_result(x, bytes, bytes, c, "dma.copy HBM to HBM with the strides permuted");
        return kc_status(x);
    }
    /* a transpose of dims A (packed in x) and B (packed in out), the others a batch */
    int a = -1, b = m.nd - 1;
    for (int d = 0; d < m.nd; d++)
        if (m.ss[d] == e)
            a = d;
    if (a < 0 || m.ds[b] != e || a == b) {
        uint32_t c = kmove_copy(x, v, X->addr, Y->addr, dt, NULL, 0, k->place.core0,
                                place_cores(k));
        move_result(x, bytes, bytes, c, "dma.copy HBM to HBM, rows of one element");
        return kc_status(x);
    }
    ktr t = {.dt = dt, .A = (uint64_t)m.n[a], .A0 = (uint64_t)m.n[a], .src = X->addr,
             .dst = Y->addr};
    uint64_t passes = 1;
    for (int d = 0; d < m.nd; d++)
        if (d != a && d != b) {
            t.bn[t.nb] = m.n[d], t.bss[t.nb] = m.ss[d], t.bds[t.nb] = m.ds[d];
            passes *= (uint64_t)m.n[d];
            t.nb++;
        }
    uint64_t A = t.A, Ac = A; /* A in chunks of Ac columns when a row of A does not fit */
    kc_row_plan p = {.rows = (uint64_t)m.n[b], .n_in = 1, .n_out = 1, .work = tr_work,
                     .ctx = &t, .tr = (uint64_t)kc_attr_int(x, "tr"), .tr_max = 65535};
    for (;; Ac = (Ac + 1) / 2) {
        p.in[0] = (kc_row_stream){X->addr, m.ss[b], dt, Ac, 1, 0};
        p.out[0] = (kc_row_stream){Y->addr, e, dt, 1, Ac, m.ds[a]};
        uint64_t want = p.rows < 16 ? p.rows : 16; /* rows a tile should hold */
        if (Ac == 1 || (Ac <= 65535 && kc_rows_fit(x, &p, k->place.core0) >= want))
            break;
    }
    uint64_t chunks = A / Ac, rem = A % Ac;
    if (chunks > 1 || rem) { /* the chunks as passes (a shorter last one), the batch as loops */
        if (t.nb > KC_ROW_MAX_LOOPS)
            return kc_fail(x, NP_ERR_RANGE, "a transpose of rows of %" PRIu64 " elements in "
                           "chunks over %d batch dims (at most %d)", A, t.nb, KC_ROW_MAX_LOOPS);
        t.Ac = Ac;
        t.ds_a = m.ds[a];
        p.n_loop = (unsigned)t.nb;
        for (int d = 0; d < t.nb; d++) {
            p.loop_n[d] = (uint64_t)t.bn[d];
            p.loop_in[d][0] = t.bss[d], p.loop_out[d][0] = t.bds[d];
        }
        p.pass = tr_chunk_pass, p.n_pass = (unsigned)(chunks + (rem ? 1 : 0));
        if (kc_rows_emit(x, &p) != NP_OK)
            return kc_status(x);
        char how[128];
        snprintf(how, sizeof how, "tiles of %" PRIu64 " x %" PRIu64 " transposed by the vector "
                 "unit, %" PRIu64 " passes, rows in %u chunks", p.tr_used, Ac, passes, p.n_pass);
        move_result(x, 0, 0, p.cores_used, how);
        return kc_status(x);
    }
    if (t.nb <= KC_ROW_MAX_LOOPS) { /* the batch indices as loops: one pass in the program */
        p.n_loop = (unsigned)t.nb;
        for (int d = 0; d < t.nb; d++) {
            p.loop_n[d] = (uint64_t)t.bn[d];
            p.loop_in[d][0] = t.bss[d], p.loop_out[d][0] = t.bds[d];
        }
    } else if (passes > 65535) {
        return kc_fail(x, NP_ERR_RANGE, "a transpose over %" PRIu64 " batch indices in %d dims "
                       "(at most 65535 in more than %d)", passes, t.nb, KC_ROW_MAX_LOOPS);
    } else {
        p.pass = tr_pass, p.n_pass = (unsigned)passes;
    }
    if (kc_rows_emit(x, &p) != NP_OK)
        return kc_status(x);
    char how[96];
    snprintf(how, sizeof how, "tiles of %" PRIu64 " x %" PRIu64 " transposed by the vector unit, "
             "%" PRIu64 " passes", p.tr_used, t.A, passes);
    move_result(x, 0, 0, p.cores_used, how);
    return kc_status(x);
}

/* ---- the table rows -------------------------------------------------------------------------- */

static int64_t attr_of(const kc_kernel *k, const char *name, int64_t dflt)
{
    for (int i = 0; i < k->n_attrs; i++)
        if (k->attrs[i].name && strcmp(k->attrs[i].name, name) == 0)
            return k->attrs[i].i;
    return dflt;
}

static np_status move_reference(nn_graph *g, const kc_kernel *k, nn_tensor *const *in,
                                nn_tensor **out, np_err *err)
{
    int ax = (int)attr_of(k, "axis", 0);
    switch (k->op) {
    case NN_OP_PERMUTE: {
        int axes[KC_MAX_DIMS], nd = in[0]->ndim;
        int64_t a = attr_of(k, "axes", -1);
        for (int d = nd - 1; d >= 0; d--, a = a < 0 ? a : a / 10)
            axes[d] = a < 0 ? d : (int)(a % 10);
        out[0] = nn_permute(g, in[0], axes);
        break;
    }
    case NN_OP_CONCAT: out[0] = nn_concat(g, k->n_in, in, ax); break;
    case NN_OP_SLICE: {
        int64_t s = attr_of(k, "start", 0);
        out[0] = nn_slice(g, in[0], ax, s, s + k->out[0].shape[ax < 0 ? ax + k->out[0].ndim : ax]);
        break;
    }
    default: {
        int a2 = ax < 0 ? ax + k->out[0].ndim : ax;
        int64_t b = attr_of(k, "before", 0);
        out[0] = nn_pad(g, in[0], ax, b, k->out[0].shape[a2] - in[0]->ne[a2] - b);
        break;
    }
    }
    return out[0] ? NP_OK : nn_graph_status(g, err);
}

static const kc_attr_def move_keys[] = {
    {"shape", KC_ATTR_SHAPE, KC_REQUIRED, 0, 0,
     "the input's shape, AxBx... (concat: each input's)"},
    {"dtype", KC_ATTR_DTYPE, NN_BF16, 0, 0, "element type"},
    {"n", KC_ATTR_INT, 2, 1, KC_MAX_IN, "concat: inputs"},
    {"end", KC_ATTR_INT, 1, 1, 1e12, "slice: the window's end"},
    {"after", KC_ATTR_INT, 0, 0, 1e12, "pad: zeros after"},
};

static np_status move_build(kc_prog *p, const kc_spec *s, kc_kernel *k, np_err *err)
{
    const kc_spec_val *sh = kc_spec_get(s, "shape"), *dt = kc_spec_get(s, "dtype");
    if (!sh || !dt || sh->ndim < 1)
        return np_err_set(err, NP_ERR_MISSING, "%s: shape=AxBx... is needed", nn_op_name(s->op));
    const kc_spec_val *axv = kc_spec_get(s, "axis"), *n = kc_spec_get(s, "n");
    int nd = sh->ndim, ax = axv ? (int)axv->i : 0;
    ax = ax < 0 ? ax + nd : ax;
    if (s->op != NN_OP_PERMUTE && (ax < 0 || ax >= nd))
        return np_err_set(err, NP_ERR_RANGE, "%s: axis out of range", nn_op_name(s->op));
    int64_t out[KC_MAX_DIMS];
    memcpy(out, sh->shape, sizeof out);
    k->n_in = 1, k->n_out = 1;
    switch (s->op) {
    case NN_OP_PERMUTE: {
        const kc_spec_val *a = kc_spec_get(s, "axes");
        int64_t v = a ? a->i : -1;
        for (int d = nd - 1; d >= 0; d--, v = v < 0 ? v : v / 10)
            out[d] = sh->shape[v < 0 ? d : (int)(v % 10) % nd];
        break;
    }
    case NN_OP_CONCAT:
        k->n_in = n ? (int)n->i : 2;
        out[ax] *= k->n_in;
        break;
    case NN_OP_SLICE: {
        const kc_spec_val *st = kc_spec_get(s, "start"), *en = kc_spec_get(s, "end");
        out[ax] = (en ? en->i : 1) - (st ? st->i : 0);
        break;
    }
    default: {
        const kc_spec_val *b = kc_spec_get(s, "before"), *af = kc_spec_get(s, "after");
        out[ax] += (b ? b->i : 0) + (af ? af->i : 0);
        break;
    }
    }
    for (int i = 0; i < k->n_in; i++) {
        char name[16];
        snprintf(name, sizeof name, "X%d", i);
        if (kc_spec_tensor(p, name, (nn_dtype)dt->i, nd, sh->shape, &k->in[i], err) != NP_OK)
            return err->status;
    }
    return kc_spec_tensor(p, "Y", (nn_dtype)dt->i, nd, out, &k->out[0], err);
}

static const kc_attr_def permute_attrs[] = {
    {"axes", KC_ATTR_INT, -1, -1, 543210, "per output dim (one decimal digit each, outermost "
                                          "first) the input axis it takes; -1: the identity"},
    {"tr", KC_ATTR_INT, 0, 0, 65535, "tile: rows per tile of a transpose (0: chosen)"},
};
static const kc_attr_def concat_attrs[] = {
    {"axis", KC_ATTR_INT, 0, -6, 5, "the dim the inputs follow one another along"},
};
static const kc_attr_def slice_attrs[] = {
    {"axis", KC_ATTR_INT, 0, -6, 5, "the sliced dim"},
    {"start", KC_ATTR_INT, 0, 0, 1e12, "the window's first index (its end: start + out's dim)"},
};
static const kc_attr_def pad_attrs[] = {
    {"axis", KC_ATTR_INT, 0, -6, 5, "the padded dim"},
    {"before", KC_ATTR_INT, 0, 0, 1e12, "zeros before (after: what out's dim leaves)"},
};

#define MOVE_ROW(NAME, OP, NIN, ATTRS, COMPILE, DOC)                                            \
    const kc_kernel_def NAME = {                                                                \
        .op = OP, .n_in = NIN, .n_out = 1, .attrs = ATTRS,                                      \
        .n_attrs = sizeof ATTRS / sizeof ATTRS[0], .compile = COMPILE,                          \
        .reference = move_reference, .keys = move_keys,                                          \
        .n_keys = sizeof move_keys / sizeof move_keys[0], .build = move_build, .doc = DOC,      \
    }
MOVE_ROW(kc_permute_def, NN_OP_PERMUTE, 1, permute_attrs, permute_compile,
         "strided dma.copy HBM to HBM; a moved last dim: tiles transposed by the vector unit");
MOVE_ROW(kc_concat_def, NN_OP_CONCAT, -1, concat_attrs, concat_compile,
         "one strided dma.copy HBM to HBM per input into its window");
MOVE_ROW(kc_slice_def, NN_OP_SLICE, 1, slice_attrs, slice_compile,
         "one strided dma.copy HBM to HBM of the window");
MOVE_ROW(kc_pad_def, NN_OP_PAD, 1, pad_attrs, pad_compile,
         "strided dma.copy of the input into its window, the pads from a zeroed block");
