/* kc_reduce.c — reductions over any axis (reduce_sum, reduce_mean, reduce_max, sum_to) and
 * the two ops that go the other way (broadcast_to, reduce_max_grad).
 *
 * Reductions. The input's dims, after dims of 1 are dropped and neighbours that step alike
 * are merged, are reduced (R) or kept (K); the output holds the kept ones. The innermost dim
 * decides the tile:
 *   - kept (the axis is not the last, e.g. a bias gradient [B, S, H] -> [H]): tiles of TR
 *     rows of the innermost reduced dim x TC columns of the last, each loaded with one
 *     strided dma.copy (a row stride of that dim: the "strided DMA layout"), reduced down
 *     the columns (vpu.csum / vpu.cmax) into TC partials;
 *   - reduced (the last axis): tiles of TR rows of the innermost kept dim x TC columns of
 *     the last, reduced along the rows (vpu.rsum / vpu.rmax) into TR partials.
 * An output tile accumulates its partials over every chunk of the tile's reduced dim and
 * every index of the other reduced dims (loops), then is finished (mean: / the count; the
 * output's dtype) and stored; the other kept dims are loops over output tiles, the outermost
 * split over the placed cores. Sums accumulate in fp32 (each tile converted first), maxima in
 * the input's dtype (exact). Loads are double-buffered and each output tile's first chunk is
 * loaded before the previous output tile is stored, so the DMA streams while the vector unit
 * reduces. Chunks of a reduced dim are exact (its last one smaller, with code of its own);
 * tiles of kept dims follow kc_vec.h (the last one shifted back: computed twice, written
 * twice, the same values).
 *
 * broadcast_to and reduce_max_grad are streaming kernels of the engine (kc_vec.h):
 * broadcast_to copies its input's tile into every tile of the output (a broadcast row or
 * column made full by vpu.sel of a zero mask); reduce_max_grad (x, y = max(x), dy) -> dx takes
 * tiles that cover the axis whole and sends dy to the first maximal element, found in x as
 * the framework finds it (y is not read): vpu.rmax / vpu.cmax of x, vpu.cmpeq with it, then
 * among the matches the smallest index (vpu.iota of -index, vpu.sels, vpu.rmax / vpu.cmax),
 * then vpu.cmpeq of the index with it times dy. An axis too long for a tile goes in four
 * phases (maxgrad_phased): reduce_max, the first maxima's -index per element, reduce_max of
 * that, then dx.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kc_emit.h"
#include "kc_phase.h"
#include "kc_vec.h"

static uint64_t min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }
static uint64_t cdiv(uint64_t a, uint64_t b) { return (a + b - 1) / b; }
static uint64_t align64(uint64_t v) { return (v + 63) & ~(uint64_t)63; }

#define KR_MAX_CNT 65535u
#define KR_TILE 65536u /* elements of a chunk, at most */

/* ---- the plan ------------------------------------------------------------------------------- */

typedef enum { KR_SUM, KR_MEAN, KR_MAX } kr_kind;

/* A level of the loop nest. */
typedef enum { KL_OUT, KL_TILEK, KL_ACC, KL_TILER } kl_kind;

typedef struct kr_level {
    kl_kind kind;
    uint64_t extent, t;          /* indices; a tile's (TILEK, TILER; else 1) */
    int64_t sx, so;              /* bytes per index: input, output (0 for reduced levels) */
    uint64_t nfull;
    bool shifted;                /* TILEK: a last tile shifted back */
    uint64_t edge;               /* TILER: the last chunk's length (0: none) */
} kr_level;

typedef struct kr {
    kc_ctx *x;
    kr_kind kind;
    const kc_tensor *in, *out;
    isa_dtype dt, odt, adt;      /* input, output, accumulator */
    uint64_t e, oe, ae;
    bool cast;                   /* tiles converted to fp32 before they are summed */
    bool square;                 /* reduce_sum square=1: each tile squared in place first */
    bool col;                    /* the last dim is kept: reduce down the columns */
    int n_lv;
    kr_level lv[KC_MAX_DIMS + 2];
    int tk, tr;                  /* the levels of the tile's kept and reduced dims */
    uint64_t count;              /* elements reduced into each output element */
    /* this core */
    uint64_t rows, cols;         /* a full chunk's tile */
    unsigned rx, ro, lag;
    unsigned s_free[2], s_full[2], s_oready, s_ofree;
    uint64_t xbuf[2], cbuf, pbuf, abuf, obuf;
    kce em;                      /* its copies' HBM bytes (em.x is x; em.mult the loops' trips) */
} kr;

static void sem_wait(kr *r, isa_unit u, unsigned s)
{
    kce_wait(&r->em, u, s, 1);
}

static void sem_signal(kr *r, isa_unit u, unsigned s)
{
    kce_signal(&r->em, u, s, 1);
}

static void dma(kr *r, isa_opnd dst, isa_opnd src, isa_dtype dt, uint64_t n0, uint64_t n1,
                uint64_t n2, uint64_t ds1, uint64_t ss1, uint64_t ds2, uint64_t ss2)
{
    kce_dma(&r->em, dst, src, dt, n0, n1, n2, ds1, ss1, ds2, ss2);
}

/* A rows x cols tile between HBM (row stride sr, column stride sc) and a packed buffer. */
static void move(kr *r, isa_opnd hbm, uint64_t spad, isa_dtype dt, uint64_t rows, uint64_t cols,
                 int64_t sr, int64_t sc, bool store)
{
    int64_t e = (int64_t)isa_dtype_size[dt];
    isa_opnd sp = isa_spad(0, spad), dst = store ? hbm : sp, src = store ? sp : hbm;
    if (sc == e || cols == 1) {
        int64_t h1 = sr, p1 = (int64_t)cols * e;
        dma(r, dst, src, dt, cols, rows, 1, store ? h1 : p1, store ? p1 : h1, 0, 0);
    } else {
        int64_t h1 = sc, p1 = e, h2 = sr, p2 = (int64_t)cols * e;
        dma(r, dst, src, dt, 1, cols, rows, store ? h1 : p1, store ? p1 : h1, store ? h2 : p2,
            store ? p2 : h2);
    }
}

/* Input strides of the tile's rows and columns. */
static void tile_strides(const kr *r, int64_t *sr, int64_t *sc)
{
    const kr_level *K = &r->lv[r->tk], *R = &r->lv[r->tr];
    *sr = r->col ? R->sx : K->sx;
    *sc = r->col ? K->sx : R->sx;
}

/* One chunk: rows x cols of the input at static offsets (ox) in buffer b, reduced into the
 * accumulator. */
static void emit_chunk(kr *r, int64_t ox, uint64_t rows, uint64_t cols, unsigned b)
{
    kc_ctx *x = r->x;
    int64_t sr, sc;
    tile_strides(r, &sr, &sc);
    sem_wait(r, ISA_UNIT_DMA, r->s_free[b]);
    move(r, isa_hbm(r->rx, (uint64_t)((int64_t)r->in->addr + ox)), r->xbuf[b], r->dt, rows, cols,
         sr, sc, false);
    sem_signal(r, ISA_UNIT_DMA, r->s_full[b]);
    sem_wait(r, ISA_UNIT_VPU, r->s_full[b]);
    uint64_t src = r->xbuf[b];
    if (r->cast) {
        ISA_EMIT(x->e, VPU_CAST, isa_spad(0, r->cbuf), isa_spad(0, src), isa_imm((int64_t)rows),
                 isa_imm((int64_t)cols), isa_enum(ISA_DTYPE_FP32), isa_enum(r->dt));
        src = r->cbuf;
    }
    if (r->square)
        kce_bin(&r->em, ISA_OP_VPU_MUL, isa_spad(0, src), isa_spad(0, src), isa_spad(0, src), rows,
                cols, r->adt, ISA_BCAST_FULL, 0, 0, 0);
    isa_op red = r->col ? (r->kind == KR_MAX ? ISA_OP_VPU_CMAX : ISA_OP_VPU_CSUM)
                        : (r->kind == KR_MAX ? ISA_OP_VPU_RMAX : ISA_OP_VPU_RSUM);
    isa_insn in;
    isa_insn_init(&in, red);
    in.VPU_RSUM.dst = isa_spad(0, r->pbuf), in.VPU_RSUM.src = isa_spad(0, src);
    in.VPU_RSUM.rows = isa_imm((int64_t)rows), in.VPU_RSUM.cols = isa_imm((int64_t)cols);
    in.VPU_RSUM.dtype = isa_enum(r->adt);
    isa_emit_insn(x->e, &in);
    sem_signal(r, ISA_UNIT_VPU, r->s_free[b]);
    uint64_t n = r->col ? cols : rows;
    isa_insn_init(&in, r->kind == KR_MAX ? ISA_OP_VPU_MAX : ISA_OP_VPU_ADD);
    in.VPU_ADD.dst = isa_spad(0, r->abuf), in.VPU_ADD.a = isa_spad(0, r->abuf);
    in.VPU_ADD.b = isa_spad(0, r->pbuf), in.VPU_ADD.rows = isa_imm(1);
    in.VPU_ADD.cols = isa_imm((int64_t)n), in.VPU_ADD.dtype = isa_enum(r->adt);
    isa_emit_insn(x->e, &in);
}

/* The previous output tile's store (its position in the lag register). */
static void emit_store(kr *r)
{
    sem_wait(r, ISA_UNIT_DMA, r->s_oready);
    const kr_level *K = &r->lv[r->tk];
    uint64_t n = K->t;
    if (r->col)
        move(r, isa_hbm(r->lag, r->out->addr), r->obuf, r->odt, 1, n, 0, K->so, true);
    else
        move(r, isa_hbm(r->lag, r->out->addr), r->obuf, r->odt, n, 1, K->so, 0, true);
    sem_signal(r, ISA_UNIT_DMA, r->s_ofree);
}

static uint64_t chunks_inside(const kr *r, int lv)
{
    uint64_t n = 1;
    for (int d = lv; d < r->n_lv; d++) {
        const kr_level *L = &r->lv[d];
        n *= L->nfull + (L->shifted || L->edge ? 1 : 0);
    }
    return n;
}

typedef struct kr_pos {
    int64_t x, o; /* static byte offsets of the input and the output */
} kr_pos;

static kr_pos at_index(const kr_level *L, kr_pos p, uint64_t i)
{
    return (kr_pos){p.x + (int64_t)i * L->sx, p.o + (int64_t)i * L->so};
}

typedef unsigned (*kr_body)(kr *r, int lv, kr_pos p, unsigned b);

/* Iterations k0 .. nfull - 1 of level lv (tiles of t indices from p): a loop, over pairs
 * when a body flips the buffer parity an odd number of times. */
static unsigned emit_run(kr *r, int lv, kr_pos p, uint64_t k0, kr_body body, unsigned b)
{
    const kr_level *L = &r->lv[lv];
    if (k0 >= L->nfull)
        return b;
    uint64_t m = L->nfull - k0;
    kr_pos q = at_index(L, p, k0 * L->t);
    if (m == 1)
        return body(r, lv, q, b);
    bool odd = chunks_inside(r, lv + 1) & 1;
    uint64_t per = odd ? 2 : 1, iters = m / per;
    unsigned regs[2] = {r->rx, r->ro};
    int64_t steps[2] = {(int64_t)(L->t * per) * L->sx, (int64_t)(L->t * per) * L->so};
    kc_loop l;
    kc_loop_begin(r->x, &l, iters, 2, regs, steps);
    uint64_t saved = r->em.mult;
    r->em.mult *= iters;
    for (uint64_t k = 0; k < per; k++)
        b = body(r, lv, at_index(L, q, k * L->t), b);
    r->em.mult = saved;
    kc_loop_end(r->x, &l);
    if (per == 2 && m % 2)
        b = body(r, lv, at_index(L, q, (m - 1) * L->t), b);
    return b;
}

/* ---- the reduction levels: the chunks of one output tile ---- */

static unsigned emit_red(kr *r, int lv, kr_pos p, bool cfirst, bool ofirst, unsigned b);

/* One chunk at p (the edge chunk when edge); the output tile's first is followed by the
 * previous output tile's store. */
static unsigned chunk(kr *r, kr_pos p, bool edge, bool cfirst, bool ofirst, unsigned b)
{
    const kr_level *R = &r->lv[r->tr];
    uint64_t rows = r->rows, cols = r->cols;
    if (edge) {
        if (r->col)
            rows = R->edge;
        else
            cols = R->edge;
    }
    emit_chunk(r, p.x, rows, cols, b);
    if (cfirst && !ofirst)
        emit_store(r);
    return b ^ 1;
}

static unsigned red_iter(kr *r, int lv, kr_pos p, bool cfirst, bool ofirst, unsigned b)
{
    return lv == r->n_lv - 1 ? chunk(r, p, false, cfirst, ofirst, b)
                             : emit_red(r, lv + 1, p, cfirst, ofirst, b);
}

static unsigned red_body(kr *r, int lv, kr_pos p, unsigned b)
{
    return red_iter(r, lv, p, false, false, b);
}

static unsigned emit_red(kr *r, int lv, kr_pos p, bool cfirst, bool ofirst, unsigned b)
{
    const kr_level *L = &r->lv[lv];
    uint64_t k0 = 0;
    if (cfirst && L->nfull) {
        b = red_iter(r, lv, p, true, ofirst, b);
        k0 = 1;
    }
    b = emit_run(r, lv, p, k0, red_body, b);
    if (L->edge) /* TILER only */
        b = chunk(r, at_index(L, p, L->nfull * L->t), true, cfirst && !L->nfull, ofirst, b);
    return b;
}

/* ---- the output levels ---- */

/* The output tile at p: its accumulator, its chunks, the finish. */
static unsigned emit_otile(kr *r, kr_pos p, bool ofirst, unsigned b)
{
    kc_ctx *x = r->x;
    uint64_t n = r->lv[r->tk].t;
    ISA_EMIT(x->e, VPU_FILL, isa_spad(0, r->abuf), isa_f32(r->kind == KR_MAX ? -INFINITY : 0),
             isa_imm(1), isa_imm((int64_t)n), isa_enum(r->adt));
    b = emit_red(r, r->tk + 1, p, true, ofirst, b);
    sem_wait(r, ISA_UNIT_VPU, r->s_ofree);
    if (r->kind == KR_MEAN)
        ISA_EMIT(x->e, VPU_DIVS, isa_spad(0, r->abuf), isa_spad(0, r->abuf),
                 isa_f32((float)r->count), isa_imm(1), isa_imm((int64_t)n), isa_enum(r->adt));
    if (r->odt != r->adt)
        ISA_EMIT(x->e, VPU_CAST, isa_spad(0, r->obuf), isa_spad(0, r->abuf), isa_imm(1),
                 isa_imm((int64_t)n), isa_enum(r->odt), isa_enum(r->adt));
    else
        ISA_EMIT(x->e, VPU_COPY, isa_spad(0, r->obuf), isa_spad(0, r->abuf), isa_imm(1),
                 isa_imm((int64_t)n), isa_enum(r->odt));
    sem_signal(r, ISA_UNIT_VPU, r->s_oready);
    ISA_EMIT(x->e, ADDI, isa_reg(r->lag), isa_reg(r->ro), isa_imm(p.o));
    return b;
}

static unsigned emit_out(kr *r, int lv, kr_pos p, bool ofirst, unsigned b);

static unsigned out_iter(kr *r, int lv, kr_pos p, bool ofirst, unsigned b)
{
    return lv == r->tk ? emit_otile(r, p, ofirst, b) : emit_out(r, lv + 1, p, ofirst, b);
}

static unsigned out_body(kr *r, int lv, kr_pos p, unsigned b)
{
    return out_iter(r, lv, p, false, b);
}

static unsigned emit_out(kr *r, int lv, kr_pos p, bool ofirst, unsigned b)
{
    const kr_level *L = &r->lv[lv];
    uint64_t k0 = 0;
    if (ofirst) {
        b = out_iter(r, lv, p, true, b);
        k0 = 1;
    }
    b = emit_run(r, lv, p, k0, out_body, b);
    if (L->shifted)
        b = out_iter(r, lv, at_index(L, p, L->extent - L->t), false, b);
    return b;
}

/* ---- planning ------------------------------------------------------------------------------- */

/* x's dims as kept or reduced, with the output's stride of each kept one. */
typedef struct kr_dims {
    int n;
    int64_t shape[KC_MAX_DIMS], sx[KC_MAX_DIMS], so[KC_MAX_DIMS];
    bool red[KC_MAX_DIMS];
} kr_dims;

/* Drops dims of 1; merges neighbours of one kind that step as one in the input (and, kept,
 * in the output). */
static void merge_dims(const kr_dims *in, kr_dims *out)
{
    memset(out, 0, sizeof *out);
    for (int d = 0; d < in->n; d++) {
        if (in->shape[d] == 1)
            continue;
        int k = out->n - 1;
        if (k >= 0 && out->red[k] == in->red[d] && out->sx[k] == in->sx[d] * in->shape[d] &&
            (in->red[d] || out->so[k] == in->so[d] * in->shape[d])) {
            out->shape[k] *= in->shape[d];
            out->sx[k] = in->sx[d], out->so[k] = in->so[d];
            continue;
        }
        out->shape[++k] = in->shape[d];
        out->sx[k] = in->sx[d], out->so[k] = in->so[d], out->red[k] = in->red[d];
        out->n = k + 1;
    }
}

static np_status reduce_emit(kc_ctx *x, kr_kind kind, bool square, const kr_dims *raw)
{
    const kc_kernel *k = x->k;
    kr r;
    memset(&r, 0, sizeof r);
    r.x = r.em.x = x, r.kind = kind, r.in = &k->in[0], r.out = &k->out[0];
    r.dt = kc_isa_dtype(r.in->dtype), r.odt = kc_isa_dtype(r.out->dtype);
    r.adt = kind == KR_MAX ? r.dt : ISA_DTYPE_FP32;
    r.e = isa_dtype_size[r.dt], r.oe = isa_dtype_size[r.odt], r.ae = isa_dtype_size[r.adt];
    r.cast = r.adt != r.dt;
    r.square = square;
    kr_dims d;
    merge_dims(raw, &d);
    r.count = 1;
    for (int i = 0; i < d.n; i++)
        if (d.red[i])
            r.count *= (uint64_t)d.shape[i];
    /* the tile's dims: the last, and the innermost of the other kind */
    r.col = d.n == 0 || !d.red[d.n - 1];
    int ik = -1, ir = -1;
    for (int i = d.n - 1; i >= 0; i--) {
        if (d.red[i] && ir < 0)
            ir = i;
        if (!d.red[i] && ik < 0)
            ik = i;
    }
    /* levels: the other kept dims, the tile's kept dim, the other reduced dims, the tile's
     * reduced dim (a dim of 1 stands in for a missing one) */
    int n = 0;
    for (int i = 0; i < d.n; i++)
        if (!d.red[i] && i != ik)
            r.lv[n++] = (kr_level){KL_OUT, (uint64_t)d.shape[i], 1, d.sx[i], d.so[i], 0, 0, 0};
    r.tk = n;
    r.lv[n++] = ik >= 0
                    ? (kr_level){KL_TILEK, (uint64_t)d.shape[ik], 1, d.sx[ik], d.so[ik], 0, 0, 0}
                    : (kr_level){KL_TILEK, 1, 1, 0, 0, 0, 0, 0};
    for (int i = 0; i < d.n; i++)
        if (d.red[i] && i != ir)
            r.lv[n++] = (kr_level){KL_ACC, (uint64_t)d.shape[i], 1, d.sx[i], 0, 0, 0, 0};
    r.tr = n;
    r.lv[n++] = ir >= 0 ? (kr_level){KL_TILER, (uint64_t)d.shape[ir], 1, d.sx[ir], 0, 0, 0, 0}
                        : (kr_level){KL_TILER, 1, 1, 0, 0, 0, 0, 0};
    r.n_lv = n;
    /* the cores split the outermost kept level (the tile's, when it is the only one) */
    const kc_place *pl = &k->place;
    uint64_t n_cores = pl->n_cores ? pl->n_cores : 1;
    int split = -1;
    for (int i = 0; i <= r.tk && split < 0; i++)
        if (r.lv[i].extent >= n_cores)
            split = i;
    if (split < 0) {
        split = 0;
        for (int i = 1; i <= r.tk; i++)
            if (r.lv[i].extent > r.lv[split].extent)
                split = i;
    }
    uint64_t total = r.lv[split].extent, used = min_u64(n_cores, total);
    /* tiles: the kept dim's up to 4096 wide (col) or 256 rows (row), the reduced one's to
     * KR_TILE elements, both within the scratchpad */
    uint64_t budget = x->cfg->core.sram_bytes;
    for (uint32_t c = pl->core0; c < pl->core0 + n_cores; c++)
        budget = min_u64(budget, kc_spad_avail(x, c));
    kr_level *K = &r.lv[r.tk], *R = &r.lv[r.tr];
    uint64_t k_ext = split == r.tk ? total / used : K->extent;
    uint64_t kt = min_u64(min_u64(k_ext, KR_MAX_CNT), r.col ? 4096 : 256);
    if (kc_attr_int(x, "tk"))
        kt = min_u64(kt, (uint64_t)kc_attr_int(x, "tk"));
    kt = cdiv(k_ext, cdiv(k_ext, kt));
    uint64_t rt = min_u64(min_u64(R->extent, KR_MAX_CNT), KR_TILE / kt ? KR_TILE / kt : 1);
    if (kc_attr_int(x, "tr"))
        rt = min_u64(rt, (uint64_t)kc_attr_int(x, "tr"));
    for (;;) {
        uint64_t bytes = align64(kt * rt * r.e) * 2 + (r.cast ? align64(kt * rt * 4) : 0) +
                         align64(kt * 4) * 2 + align64(kt * r.oe) + 256;
        if (bytes <= budget || (kt == 1 && rt == 1))
            break;
        if (rt > 1)
            rt -= (rt + 7) / 8;
        else
            kt -= (kt + 7) / 8;
    }
    int64_t sr = r.col ? R->sx : K->sx, sc = r.col ? K->sx : R->sx;
    uint64_t rows = r.col ? rt : kt, cols = r.col ? kt : rt;
    int64_t row_lim = sc == (int64_t)r.e || cols == 1 ? (int64_t)1 << 24 : (int64_t)1 << 27;
    if (rows > 1 && sr >= row_lim) {
        if (r.col)
            rt = 1;
        else
            kt = 1;
    }
    if (cols > 1 && sc != (int64_t)r.e && sc >= ((int64_t)1 << 24)) {
        if (r.col)
            kt = 1;
        else
            rt = 1;
    }
    if (K->so && K->so != (int64_t)r.oe && K->so >= ((int64_t)1 << 24))
        kt = 1;
    K->t = kt;
    R->t = rt;
    R->nfull = R->extent / rt, R->edge = R->extent % rt;
    r.rows = r.col ? rt : kt, r.cols = r.col ? kt : rt;
    uint64_t bytes = align64(kt * rt * r.e) * 2 + (r.cast ? align64(kt * rt * 4) : 0) +
                     align64(kt * 4) * 2 + align64(kt * r.oe);
    if (bytes > budget)
        return kc_fail(x, NP_ERR_RANGE, "a tile needs %" PRIu64 " scratchpad bytes, more than the "
                       "%" PRIu64 " free", bytes, budget);
    for (int i = 0; i < r.n_lv; i++)
        if (r.lv[i].kind == KL_ACC)
            r.lv[i].nfull = r.lv[i].extent;
    r.em.mult = 1;
    for (uint64_t c = 0; c < used; c++) {
        uint64_t base = total / used, extra = total % used;
        uint64_t lo = c * base + (c < extra ? c : extra), ext = base + (c < extra ? 1 : 0);
        for (int i = 0; i <= r.tk; i++) {
            kr_level *L = &r.lv[i];
            uint64_t e = i == split ? ext : L->extent;
            if (i == r.tk) {
                L->t = min_u64(kt, e);
                L->t = cdiv(e, cdiv(e, L->t));
            }
            L->nfull = e / L->t, L->shifted = e % L->t != 0;
            L->extent = e;
        }
        if (r.col)
            r.cols = r.lv[r.tk].t;
        else
            r.rows = r.lv[r.tk].t;
        if (kc_core(x, pl->core0 + (uint32_t)c) != NP_OK)
            return kc_status(x);
        uint64_t blk = 0, off[6];
        uint64_t sizes[6] = {align64(kt * rt * r.e), align64(kt * rt * r.e),
                             r.cast ? align64(kt * rt * 4) : 0, align64(kt * 4), align64(kt * r.ae),
                             align64(kt * r.oe)};
        for (int i = 0; i < 6; i++)
            off[i] = blk, blk += sizes[i];
        uint64_t at;
        kc_spad_alloc(x, blk, 64, &at);
        r.xbuf[0] = at + off[0], r.xbuf[1] = at + off[1], r.cbuf = at + off[2];
        r.pbuf = at + off[3], r.abuf = at + off[4], r.obuf = at + off[5];
        for (int b = 0; b < 2; b++) {
            kc_sem_alloc(x, &r.s_free[b]);
            kc_sem_alloc(x, &r.s_full[b]);
        }
        kc_sem_alloc(x, &r.s_oready);
        kc_sem_alloc(x, &r.s_ofree);
        kc_reg_alloc(x, &r.rx);
        kc_reg_alloc(x, &r.ro);
        kc_reg_alloc(x, &r.lag);
        if (kc_status(x) != NP_OK)
            return kc_status(x);
        const kr_level *S = &r.lv[split];
        ISA_EMIT(x->e, LI, isa_reg(r.rx), isa_imm((int64_t)lo * S->sx));
        ISA_EMIT(x->e, LI, isa_reg(r.ro), isa_imm((int64_t)lo * S->so));
        sem_signal(&r, ISA_UNIT_DMA, r.s_free[0]);
        sem_signal(&r, ISA_UNIT_DMA, r.s_free[1]);
        sem_signal(&r, ISA_UNIT_DMA, r.s_ofree);
        emit_out(&r, 0, (kr_pos){0, 0}, true, 0);
        emit_store(&r);
        sem_wait(&r, ISA_UNIT_DMA, r.s_free[0]);
        sem_wait(&r, ISA_UNIT_DMA, r.s_free[1]);
        sem_wait(&r, ISA_UNIT_DMA, r.s_ofree);
        r.lv[split].extent = total;
        if (kc_status(x) != NP_OK)
            return kc_status(x);
    }
    kc_result *res = x->res;
    res->cores = (uint32_t)used;
    res->hbm_read_bytes = r.em.rd, res->hbm_write_bytes = r.em.wr;
    res->flops = (uint64_t)kc_tensor_numel(r.in) * (r.square ? 2 : 1);
    snprintf(res->schedule, sizeof res->schedule, "%s of %" PRIu64 " elements each, %s; tiles %"
             PRIu64 " x %" PRIu64 ", %" PRIu64 " core%s", nn_op_name(k->op), r.count,
             r.col ? "down the columns (the last dim kept)"
                   : "along the rows (the last dim reduced)",
             r.col ? rt : kt, r.col ? kt : rt, used, used == 1 ? "" : "s");
    return kc_status(x);
}

/* ---- reduce_sum, reduce_mean, reduce_max, sum_to ---------------------------------------------- */

static int axis_of(kc_ctx *x, int ndim)
{
    int64_t a = kc_attr_int(x, "axis");
    return (int)(a < 0 ? a + ndim : a);
}

static np_status reduce_compile(kc_ctx *x)
{
    const kc_kernel *k = x->k;
    const kc_tensor *X = &k->in[0], *Y = &k->out[0];
    kr_dims d;
    memset(&d, 0, sizeof d);
    d.n = X->ndim;
    if (k->op == NN_OP_SUM_TO) {
        if (Y->ndim > X->ndim)
            return kc_fail(x, NP_ERR_INCONSISTENT, "the output has more dims than the input");
        for (int i = 0; i < X->ndim; i++) {
            int j = i - (X->ndim - Y->ndim);
            d.shape[i] = X->shape[i], d.sx[i] = X->stride[i];
            if (j >= 0 && Y->shape[j] == X->shape[i]) {
                d.so[i] = Y->stride[j];
            } else if (j < 0 || Y->shape[j] == 1) {
                d.red[i] = true;
            } else {
                return kc_fail(x, NP_ERR_INCONSISTENT, "output dim %d (%" PRId64 ") is neither "
                               "the input's (%" PRId64 ") nor 1", j, Y->shape[j], X->shape[i]);
            }
        }
    } else {
        int axis = axis_of(x, X->ndim);
        bool keep = kc_attr_int(x, "keepdim");
        if (axis < 0 || axis >= X->ndim)
            return kc_fail(x, NP_ERR_RANGE, "axis %" PRId64 " of a %d-dim input",
                           kc_attr_int(x, "axis"), X->ndim);
        if (Y->ndim != X->ndim - (keep ? 0 : 1))
            return kc_fail(x, NP_ERR_INCONSISTENT, "the output needs %d dims",
                           X->ndim - (keep ? 0 : 1));
        for (int i = 0, j = 0; i < X->ndim; i++) {
            d.shape[i] = X->shape[i], d.sx[i] = X->stride[i];
            if (i == axis) {
                d.red[i] = true;
                if (keep && Y->shape[j++] != 1)
                    return kc_fail(x, NP_ERR_INCONSISTENT, "output dim %d must be 1", j - 1);
                continue;
            }
            if (Y->shape[j] != X->shape[i])
                return kc_fail(x, NP_ERR_INCONSISTENT, "output dim %d is %" PRId64 ", the input's "
                               "%" PRId64, j, Y->shape[j], X->shape[i]);
            d.so[i] = Y->stride[j++];
        }
    }
    if (k->in[0].dtype != k->out[0].dtype)
        return kc_fail(x, NP_ERR_INCONSISTENT, "the output's dtype must be the input's");
    /* a mean of integers is a fraction: the vector unit would round it to the type, the
     * framework keeps it (PyTorch refuses an integer mean) */
    if (k->op == NN_OP_REDUCE_MEAN && (X->dtype == NN_I8 || X->dtype == NN_I32))
        return kc_fail(x, NP_ERR_TYPE, "%s is not supported: the mean of integers is "
                       "a fraction; cast to a float type first",
                       isa_dtype_names[kc_isa_dtype(X->dtype)]);
    kr_kind kind = k->op == NN_OP_REDUCE_MAX    ? KR_MAX
                   : k->op == NN_OP_REDUCE_MEAN ? KR_MEAN
                                                : KR_SUM;
    return reduce_emit(x, kind, k->op == NN_OP_REDUCE_SUM && kc_attr_int(x, "square"), &d);
}

/* ---- broadcast_to ------------------------------------------------------------------------------ */

static void bcast_tile(kc_ctx *x, const kv_tile *t, void *ctx)
{
    (void)ctx;
    kv_buf in = t->in[0];
    if (in.bcast == ISA_BCAST_FULL) {
        kv_unary(x, t, ISA_OP_VPU_COPY, t->out[0].addr, in);
        return;
    }
    uint64_t z = t->tmp[0];
    ISA_EMIT(x->e, VPU_FILL, isa_spad(0, z), isa_f32(0), isa_imm((int64_t)t->rows),
             isa_imm((int64_t)t->cols), isa_enum(in.dt));
    ISA_EMIT(x->e, VPU_SEL, isa_spad(0, t->out[0].addr), isa_spad(0, z), isa_spad(0, z),
             isa_spad(0, in.addr), isa_imm((int64_t)t->rows), isa_imm((int64_t)t->cols),
             isa_enum(in.dt), isa_enum(in.bcast));
}

static np_status bcast_compile(kc_ctx *x)
{
    const kc_kernel *k = x->k;
    if (k->in[0].dtype != k->out[0].dtype)
        return kc_fail(x, NP_ERR_INCONSISTENT, "the output's dtype must be the input's");
    kv_plan p;
    memset(&p, 0, sizeof p);
    p.ndim = k->out[0].ndim;
    memcpy(p.shape, k->out[0].shape, sizeof p.shape);
    p.n_in = 1, p.n_out = 1;
    p.in[0] = k->in[0], p.out[0] = k->out[0];
    p.n_tmp = 1, p.tmp_bytes[0] = nn_dtype_size(k->in[0].dtype);
    p.max_tile = (uint64_t)kc_attr_int(x, "tile");
    p.tile = bcast_tile;
    p.what = "broadcast_to";
    if (kv_emit(x, &p) != NP_OK)
        return kc_status(x);
    x->res->flops = 0;
    return kc_status(x);
}

/* ---- reduce_max_grad --------------------------------------------------------------------------- */

#define KR_NO_INDEX (-1073741824.0f) /* below every -index */

static void maxgrad_tile(kc_ctx *x, const kv_tile *t, void *ctx)
{
    (void)ctx;
    kv_buf X = t->in[0], D = t->in[1];
    bool along_cols = t->pos_col[0] == -1; /* the axis: the tile's columns, or its rows */
    uint64_t m = t->tmp[0], c = t->tmp[1], idx = t->tmp[2];
    kv_buf f32c = {c, ISA_BCAST_FULL, ISA_DTYPE_FP32};
    isa_opnd rows = isa_imm((int64_t)t->rows), cols = isa_imm((int64_t)t->cols);
    isa_bcast per = along_cols ? ISA_BCAST_COL : ISA_BCAST_ROW;
    isa_insn in; /* the maximum along the axis, from x itself as the framework takes it */
    isa_insn_init(&in, along_cols ? ISA_OP_VPU_RMAX : ISA_OP_VPU_CMAX);
    in.VPU_RSUM.dst = isa_spad(0, c), in.VPU_RSUM.src = isa_spad(0, X.addr);
    in.VPU_RSUM.rows = rows, in.VPU_RSUM.cols = cols, in.VPU_RSUM.dtype = isa_enum(X.dt);
    isa_emit_insn(x->e, &in);
    kv_binary(x, t, ISA_OP_VPU_CMPEQ, m, X, (kv_buf){c, per, X.dt}); /* where it is */
    kv_cast(x, t, c, (kv_buf){m, ISA_BCAST_FULL, X.dt}, ISA_DTYPE_FP32);
    ISA_EMIT(x->e, VPU_IOTA, isa_spad(0, idx), t->pos[0], isa_imm(t->pos_row[0]),
             isa_imm(t->pos_col[0]), rows, cols, isa_enum(ISA_DTYPE_FP32)); /* -index */
    ISA_EMIT(x->e, VPU_SELS, isa_spad(0, c), isa_spad(0, c), isa_spad(0, idx), isa_f32(KR_NO_INDEX),
             rows, cols, isa_enum(ISA_DTYPE_FP32));
    /* the first of them: the largest -index */
    isa_insn_init(&in, along_cols ? ISA_OP_VPU_RMAX : ISA_OP_VPU_CMAX);
    in.VPU_RSUM.dst = isa_spad(0, m), in.VPU_RSUM.src = isa_spad(0, c);
    in.VPU_RSUM.rows = rows, in.VPU_RSUM.cols = cols, in.VPU_RSUM.dtype = isa_enum(ISA_DTYPE_FP32);
    isa_emit_insn(x->e, &in);
    kv_binary(x, t, ISA_OP_VPU_CMPEQ, c, (kv_buf){idx, ISA_BCAST_FULL, ISA_DTYPE_FP32},
              (kv_buf){m, per, ISA_DTYPE_FP32});
    if (D.dt != ISA_DTYPE_FP32)
        kv_cast(x, t, c, f32c, D.dt);
    kv_binary(x, t, ISA_OP_VPU_MUL, t->out[0].addr, (kv_buf){c, ISA_BCAST_FULL, D.dt}, D);
}

/* t with a dim of 1 (stride 0) inserted at axis. */
static kc_tensor with_axis(const kc_tensor *t, int axis)
{
    kc_tensor r = *t;
    for (int d = t->ndim; d > axis; d--)
        r.shape[d] = t->shape[d - 1], r.stride[d] = t->stride[d - 1];
    r.shape[axis] = 1, r.stride[axis] = 0;
    r.ndim = t->ndim + 1;
    return r;
}

/* The phased schedule's z = (x == m) ? -index : below every -index (fp32), m broadcast along
 * the axis. */
static void maxgrad_z_tile(kc_ctx *x, const kv_tile *t, void *ctx)
{
    (void)ctx;
    kv_buf X = t->in[0], M = t->in[1];
    uint64_t m = t->tmp[0], c = t->tmp[1];
    isa_opnd rows = isa_imm((int64_t)t->rows), cols = isa_imm((int64_t)t->cols);
    kv_binary(x, t, ISA_OP_VPU_CMPEQ, m, X, M);
    kv_cast(x, t, c, (kv_buf){m, ISA_BCAST_FULL, X.dt}, ISA_DTYPE_FP32);
    ISA_EMIT(x->e, VPU_IOTA, isa_spad(0, m), t->pos[0], isa_imm(t->pos_row[0]),
             isa_imm(t->pos_col[0]), rows, cols, isa_enum(ISA_DTYPE_FP32)); /* -index */
    ISA_EMIT(x->e, VPU_SELS, isa_spad(0, t->out[0].addr), isa_spad(0, c), isa_spad(0, m),
             isa_f32(KR_NO_INDEX), rows, cols, isa_enum(ISA_DTYPE_FP32));
}

/* The phased schedule's dx = (-index == f) x dy, f (the first maximum's -index) and dy
 * broadcast along the axis. */
static void maxgrad_dx_tile(kc_ctx *x, const kv_tile *t, void *ctx)
{
    (void)ctx;
    kv_buf F = t->in[0], D = t->in[1];
    uint64_t idx = t->tmp[0], c = t->tmp[1];
    isa_opnd rows = isa_imm((int64_t)t->rows), cols = isa_imm((int64_t)t->cols);
    ISA_EMIT(x->e, VPU_IOTA, isa_spad(0, idx), t->pos[0], isa_imm(t->pos_row[0]),
             isa_imm(t->pos_col[0]), rows, cols, isa_enum(ISA_DTYPE_FP32));
    kv_binary(x, t, ISA_OP_VPU_CMPEQ, c, (kv_buf){idx, ISA_BCAST_FULL, ISA_DTYPE_FP32}, F);
    if (D.dt != ISA_DTYPE_FP32)
        kv_cast(x, t, c, (kv_buf){c, ISA_BCAST_FULL, ISA_DTYPE_FP32}, D.dt);
    kv_binary(x, t, ISA_OP_VPU_MUL, t->out[0].addr, (kv_buf){c, ISA_BCAST_FULL, D.dt}, D);
}

/* A dense scratch buffer in HBM shaped like t with dim axis of one element (keep) or like t
 * (whole), of dtype dt; the view of it with dim axis broadcast (stride 0) to t's extent. */
static np_status maxgrad_scratch(kc_ctx *x, const kc_tensor *t, int axis, bool reduced,
                                 isa_dtype dt, kc_tensor *buf, kc_tensor *view)
{
    int64_t sh[KC_MAX_DIMS];
    memcpy(sh, t->shape, sizeof sh);
    if (reduced)
        sh[axis] = 1;
    kc_tensor_dense(buf, 0, kc_nn_dtype(dt), t->ndim, sh);
    np_err e = {0};
    if (kc_prog_bss(x->prog, NULL, kc_tensor_bytes(buf), &buf->addr, &e) != NP_OK)
        return kc_fail(x, e.status, "a scratch buffer: %s", e.msg);
    *view = *buf;
    if (reduced)
        view->shape[axis] = t->shape[axis], view->stride[axis] = 0;
    return NP_OK;
}

/* reduce_max_grad over an axis too long for a tile (or with phased=1), in four phases with
 * a barrier between them: m = reduce_max(x) (keepdim), z = (x == m) ? -index : -2^30 (fp32),
 * f = reduce_max(z) (the first maximum's -index), dx = (-index == f) x dy — x is read twice, z
 * written and read once more: the price of the axis. */
static np_status maxgrad_phased(kc_ctx *x, const kc_tensor *X, const kc_tensor *DY, int axis,
                                bool keep)
{
    const kc_kernel *k = x->k;
    isa_dtype dt = kc_isa_dtype(X->dtype);
    kc_tensor m, mb, z, zv, f, fb;
    uint64_t rd = 0, wr = 0;
    if (maxgrad_scratch(x, X, axis, true, dt, &m, &mb) != NP_OK ||
        maxgrad_scratch(x, X, axis, false, ISA_DTYPE_FP32, &z, &zv) != NP_OK ||
        maxgrad_scratch(x, X, axis, true, ISA_DTYPE_FP32, &f, &fb) != NP_OK)
        return kc_status(x);
    kc_kernel r = {.op = NN_OP_REDUCE_MAX, .n_in = 1, .n_out = 1, .in = {*X}, .out = {m},
                   .n_attrs = 2, .attrs = {KC_INT("axis", axis), KC_INT("keepdim", 1)},
                   .place = k->place};
    if (kc_phase_run(x, &r) != NP_OK)
        return kc_status(x);
    rd += x->res->hbm_read_bytes, wr += x->res->hbm_write_bytes;
    if (kc_phase_end(x) != NP_OK)
        return kc_status(x);
    kv_plan p;
    memset(&p, 0, sizeof p);
    p.ndim = X->ndim;
    memcpy(p.shape, X->shape, sizeof p.shape);
    p.n_in = 2, p.n_out = 1, p.in[0] = *X, p.in[1] = mb, p.out[0] = z;
    p.n_pos = 1, p.pos_stride[0][axis] = -1;
    p.n_tmp = 2, p.tmp_bytes[0] = p.tmp_bytes[1] = 4;
    p.tile = maxgrad_z_tile;
    p.what = "reduce_max_grad's first maxima";
    if (kv_emit(x, &p) != NP_OK)
        return kc_status(x);
    rd += x->res->hbm_read_bytes, wr += x->res->hbm_write_bytes;
    if (kc_phase_end(x) != NP_OK)
        return kc_status(x);
    r.in[0] = z, r.out[0] = f;
    if (kc_phase_run(x, &r) != NP_OK)
        return kc_status(x);
    rd += x->res->hbm_read_bytes, wr += x->res->hbm_write_bytes;
    if (kc_phase_end(x) != NP_OK)
        return kc_status(x);
    p.in[0] = fb, p.in[1] = keep ? *DY : with_axis(DY, axis), p.out[0] = k->out[0];
    p.tile = maxgrad_dx_tile;
    p.what = "reduce_max_grad in four phases (the axis too long for a tile)";
    if (kv_emit(x, &p) != NP_OK)
        return kc_status(x);
    x->res->hbm_read_bytes += rd, x->res->hbm_write_bytes += wr;
    return kc_status(x);
}

static np_status maxgrad_compile(kc_ctx *x)
{
    const kc_kernel *k = x->k;
    const kc_tensor *X = &k->in[0];
    int axis = axis_of(x, X->ndim);
    if (axis < 0 || axis >= X->ndim)
        return kc_fail(x, NP_ERR_RANGE, "axis %" PRId64 " of a %d-dim input",
                       kc_attr_int(x, "axis"), X->ndim);
    bool keep = kc_attr_int(x, "keepdim");
    /* a tile holds the axis whole (x, dy, dx and three fp32 temporaries, double-buffered) in
     * a quarter of the scratchpad, or the axis goes in phases */
    uint64_t per = 2 * (nn_dtype_size(X->dtype) + 2 * nn_dtype_size(k->in[2].dtype)) + 12;
    uint64_t room = UINT64_MAX;
    for (uint32_t c = k->place.core0; c < k->place.core0 + (k->place.n_cores ? k->place.n_cores
                                                                                : 1); c++)
        room = kc_spad_avail(x, c) < room ? kc_spad_avail(x, c) : room;
    if (kc_attr_int(x, "phased") || X->shape[axis] > 65535 ||
        (uint64_t)X->shape[axis] * per > room / 4) {
        if (k->in[1].dtype != X->dtype || k->out[0].dtype != k->in[2].dtype)
            return kc_fail(x, NP_ERR_INCONSISTENT, "y must be typed like x, dx like dy");
        return maxgrad_phased(x, X, &k->in[2], axis, keep);
    }
    kv_plan p;
    memset(&p, 0, sizeof p);
    p.ndim = X->ndim;
    memcpy(p.shape, X->shape, sizeof p.shape);
    /* y is not read: the maximum is taken from x in the tile, as the framework does */
    p.n_in = 2, p.n_out = 1;
    p.in[0] = *X;
    p.in[1] = keep ? k->in[2] : with_axis(&k->in[2], axis);
    p.out[0] = k->out[0];
    if (k->in[1].dtype != X->dtype || k->out[0].dtype != k->in[2].dtype)
        return kc_fail(x, NP_ERR_INCONSISTENT, "y must be typed like x, dx like dy");
    p.n_pos = 1;
    p.pos_stride[0][axis] = -1;
    p.whole = axis + 1;
    p.n_tmp = 3, p.tmp_bytes[0] = p.tmp_bytes[1] = p.tmp_bytes[2] = 4;
    p.max_tile = (uint64_t)kc_attr_int(x, "tile");
    p.tile = maxgrad_tile;
    p.what = "reduce_max_grad (the axis whole in each tile)";
    if (kv_emit(x, &p) != NP_OK)
        return kc_status(x);
    x->res->flops = 0; /* the framework counts a data movement */
    return kc_status(x);
}

/* ---- the framework's computation (checks) ----------------------------------------------------- */

static np_status red_reference(nn_graph *g, const kc_kernel *k, nn_tensor *const *in,
                               nn_tensor **out, np_err *err)
{
    const kc_attr *ax = kc_kernel_attr(k, "axis"), *kd = kc_kernel_attr(k, "keepdim");
    const kc_attr *sq = kc_kernel_attr(k, "square");
    int axis = ax ? (int)ax->i : -1;
    bool keep = kd && kd->i;
    const kc_tensor *o = &k->out[0];
    switch (k->op) {
    case NN_OP_REDUCE_SUM:
        out[0] = sq && sq->i ? nn_sum_squares(g, in[0], axis, keep)
                             : nn_reduce_sum(g, in[0], axis, keep);
        break;
    case NN_OP_REDUCE_MEAN: out[0] = nn_reduce_mean(g, in[0], axis, keep); break;
    case NN_OP_REDUCE_MAX: out[0] = nn_reduce_max(g, in[0], axis, keep); break;
    case NN_OP_SUM_TO: out[0] = nn_sum_to(g, in[0], o->ndim, o->shape); break;
    case NN_OP_BROADCAST_TO: out[0] = nn_broadcast_to(g, in[0], o->ndim, o->shape); break;
    default: {
        int a = axis < 0 ? axis + in[0]->ndim : axis;
        out[0] = nn_node(g, NN_OP_REDUCE_MAX_GRAD, 3, in, (int64_t[NN_MAX_IPARAMS]){a, keep}, NULL);
        break;
    }
    }
    return out[0] ? NP_OK : nn_graph_status(g, err);
}

/* ---- `npusim kernel --op` --------------------------------------------------------------------- */

static np_status red_build(kc_prog *p, const kc_spec *s, kc_kernel *k, np_err *err)
{
    const kc_spec_val *sh = kc_spec_get(s, "shape"), *dt = kc_spec_get(s, "dtype");
    const kc_spec_val *to = kc_spec_get(s, "to");
    const kc_spec_val *ax = kc_spec_get(s, "axis"), *kd = kc_spec_get(s, "keepdim");
    if (!sh || !sh->ndim)
        return np_err_set(err, NP_ERR_MISSING, "%s: give the input's shape (shape=AxBx...)",
                          nn_op_name(s->op));
    memset(k, 0, sizeof *k);
    k->op = s->op, k->n_out = 1;
    k->n_in = s->op == NN_OP_REDUCE_MAX_GRAD ? 3 : 1;
    nn_dtype t = dt ? (nn_dtype)dt->i : NN_BF16;
    if (s->op == NN_OP_SUM_TO || s->op == NN_OP_BROADCAST_TO) {
        if (!to || !to->ndim)
            return np_err_set(err, NP_ERR_MISSING, "%s: give the output's shape (to=AxBx...)",
                              nn_op_name(s->op));
        np_status st = kc_tensor_fresh(p, &k->in[0], t, sh->ndim, sh->shape, err);
        return st == NP_OK ? kc_tensor_fresh(p, &k->out[0], t, to->ndim, to->shape, err) : st;
    }
    int a = ax ? (int)ax->i : -1, n = sh->ndim;
    a = a < 0 ? a + n : a;
    if (a < 0 || a >= n)
        return np_err_set(err, NP_ERR_RANGE, "%s: axis %d of a %d-dim shape", nn_op_name(s->op),
                          a, n);
    int64_t r[KC_MAX_DIMS];
    int rn = 0;
    for (int i = 0; i < n; i++)
        if (i != a)
            r[rn++] = sh->shape[i];
        else if (kd && kd->i)
            r[rn++] = 1;
    np_status st = kc_tensor_fresh(p, &k->in[0], t, n, sh->shape, err);
    if (s->op == NN_OP_REDUCE_MAX_GRAD) {
        if (st == NP_OK)
            st = kc_tensor_fresh(p, &k->in[1], t, rn, r, err);
        if (st == NP_OK)
            st = kc_tensor_fresh(p, &k->in[2], t, rn, r, err);
        return st == NP_OK ? kc_tensor_fresh(p, &k->out[0], t, n, sh->shape, err) : st;
    }
    return st == NP_OK ? kc_tensor_fresh(p, &k->out[0], t, rn, r, err) : st;
}

/* ---- the table rows --------------------------------------------------------------------------- */

#define KR_TILES                                                                            \
    {"tk", KC_ATTR_INT, 0, 0, KR_MAX_CNT, "tile: kept elements of a tile (0: chosen)"},     \
    {"tr", KC_ATTR_INT, 0, 0, KR_MAX_CNT, "tile: reduced elements of a tile (0: chosen)"}
static const kc_attr_def axis_attrs[] = {
    {"axis", KC_ATTR_INT, -1, -KC_MAX_DIMS, KC_MAX_DIMS - 1,
     "the dim reduced (negative: from the end)"},
    {"keepdim", KC_ATTR_BOOL, 0, 0, 1, "the output keeps the reduced dim as 1"},
    KR_TILES,
};
static const kc_attr_def sum_attrs[] = {
    {"axis", KC_ATTR_INT, -1, -KC_MAX_DIMS, KC_MAX_DIMS - 1,
     "the dim reduced (negative: from the end)"},
    {"keepdim", KC_ATTR_BOOL, 0, 0, 1, "the output keeps the reduced dim as 1"},
    {"square", KC_ATTR_BOOL, 0, 0, 1, "the sum of the squares (each tile squared on the vector "
     "unit before it is summed: a norm, the elements read once)"},
    KR_TILES,
};
static const kc_attr_def sum_to_attrs[] = {KR_TILES};
static const kc_attr_def maxgrad_attrs[] = {
    {"axis", KC_ATTR_INT, -1, -KC_MAX_DIMS, KC_MAX_DIMS - 1,
     "the dim reduced (negative: from the end)"},
    {"keepdim", KC_ATTR_BOOL, 0, 0, 1, "y and dy keep the reduced dim as 1"},
    {"tile", KC_ATTR_INT, 0, 0, 1 << 30, "tile: elements of a tile at most (0: chosen)"},
    {"phased", KC_ATTR_BOOL, 0, 0, 1, "tile: the four-phase schedule of an axis too long for "
     "a tile even when it fits (0: only then)"},
};
static const kc_attr_def bcast_attrs[] = {
    {"tile", KC_ATTR_INT, 0, 0, 1 << 30, "tile: elements of a tile at most (0: chosen)"},
};
static const kc_attr_def shape_keys[] = {
    {"shape", KC_ATTR_SHAPE, KC_REQUIRED, 0, 0, "the input's shape, AxBx..."},
    {"dtype", KC_ATTR_DTYPE, NN_BF16, 0, 0, "the element type"},
};
static const kc_attr_def to_keys[] = {
    {"shape", KC_ATTR_SHAPE, KC_REQUIRED, 0, 0, "the input's shape, AxBx..."},
    {"to", KC_ATTR_SHAPE, 0, 0, 0, "the output's shape, AxBx..."},
    {"dtype", KC_ATTR_DTYPE, NN_BF16, 0, 0, "the element type"},
};

#define KR_N(a) (unsigned)(sizeof a / sizeof a[0])
#define KR_RED_DOC "any axis: tiles of the innermost kept x reduced dims by strided DMA, " \
                   "reduced down the columns or along the rows into fp32 (max: exact) " \
                   "accumulators, double-buffered"
/* docs/compiler.md's bound of sums and means: one ulp of the output plus n x 4 x 2^-23 for n
 * values below 4 in magnitude (fp32 partial sums in another order; a mean: divided by n; sums
 * of squares, below 16: n x 16 x 2^-23). */
static void red_tolerance(const kc_kernel *k, int out, kc_tol *t)
{
    *t = kc_tol_ulp(k->out[out].dtype);
    int64_t no = kc_tensor_numel(&k->out[out]);
    double n = no ? (double)kc_tensor_numel(&k->in[0]) / (double)no : 1;
    bool sq = false;
    for (int i = 0; i < k->n_attrs; i++)
        sq = sq || (k->attrs[i].name && strcmp(k->attrs[i].name, "square") == 0 && k->attrs[i].i);
    if (k->op == NN_OP_REDUCE_SUM || k->op == NN_OP_SUM_TO)
        t->atol = n * (sq ? 16 : 4) * 0x1p-23;
    else if (k->op == NN_OP_REDUCE_MEAN)
        t->atol = 4 * 0x1p-23;
}

#define KR_DEF(name, OP, nin, fn, ad, nad, kd, doc_)                                              \
    const kc_kernel_def name = {                                                                 \
        .op = OP, .n_in = nin, .n_out = 1, .attrs = ad, .n_attrs = nad, .compile = fn,           \
        .keys = kd, .n_keys = KR_N(kd), .build = red_build, .doc = doc_,                         \
        .reference = red_reference, .tolerance = red_tolerance,                                  \
    };

KR_DEF(kc_reduce_sum_def, NN_OP_REDUCE_SUM, 1, reduce_compile, sum_attrs, KR_N(sum_attrs),
       shape_keys, KR_RED_DOC)
KR_DEF(kc_reduce_mean_def, NN_OP_REDUCE_MEAN, 1, reduce_compile, axis_attrs, KR_N(axis_attrs),
       shape_keys, KR_RED_DOC)
KR_DEF(kc_reduce_max_def, NN_OP_REDUCE_MAX, 1, reduce_compile, axis_attrs, KR_N(axis_attrs),
       shape_keys, KR_RED_DOC)
KR_DEF(kc_sum_to_def, NN_OP_SUM_TO, 1, reduce_compile, sum_to_attrs, KR_N(sum_to_attrs), to_keys,
       "the reductions' schedule over every dim that broadcasting stretched")
KR_DEF(kc_broadcast_to_def, NN_OP_BROADCAST_TO, 1, bcast_compile, bcast_attrs, KR_N(bcast_attrs),
       to_keys,
       "the elementwise engine: the input's tile (loaded once where it does not move) copied "
       "into every output tile")
KR_DEF(kc_reduce_max_grad_def, NN_OP_REDUCE_MAX_GRAD, 3, maxgrad_compile, maxgrad_attrs,
       KR_N(maxgrad_attrs), shape_keys,
       "the elementwise engine with tiles covering the axis whole: dy to the first maximum "
       "(compare, iota, select, max of -index)")
