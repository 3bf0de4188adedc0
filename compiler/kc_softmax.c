/* kc_softmax.c — softmax and log-softmax over the last dim, and softmax's gradient, on the row
 * schedule (kc_row.h). softmax takes Megatron-LM's fused scale and causal mask (attributes
 * `scale`, `causal`: FusedScaleMaskSoftmax, the composite attention's one pass over its
 * scores), softmax_grad the same (the scale folded into the gradient).
 *
 * A row that fits the scratchpad is done in one pass over HBM (read once, written once); per
 * tile of TR rows (x in dtype, y in the output's):
 *
 *   m  = rmax(x)                                   exact in x's dtype
 *   E  = fexp(x x 1 + (-m)), s = its row sums      fp32, one transcendental pass
 *   softmax:      y = fma(E x (1/s) + 0)           rounded once to y's dtype
 *   log_softmax:  y = fma(x x 1 + (-m - log s))    (E's values are not needed: written in
 *                                                   x's dtype, only s is)
 *
 * A row too wide for the scratchpad (or wider than the vector unit's 65535 columns, or with
 * the `chunk` attribute) is streamed in chunks of W columns, one pass of the row schedule per
 * chunk: nc passes keep each row's running max M and sum S (online softmax: with the chunk's
 * max mc, M' = max(M, mc), S' = S x exp(M - M') + sum exp(x - M')), then nc passes write
 * softmax = fexp(x + (-M - log S)) or log_softmax = fma(x + (-M - log S)): x is read twice.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kc_row.h"

typedef struct ksm {
    bool log, grad;    /* log_softmax; softmax_grad */
    isa_dtype dt, ot;
    uint64_t D, W, nc; /* row width, chunk width, chunks (1: whole rows) */
    uint64_t x, y, dy; /* softmax_grad: x is y (the softmax's output), dy the gradient */
    int64_t ldx, ldy, lddy;
    float scale;       /* the fused scale (1: none) */
    bool scaled, causal;
    unsigned xpos;     /* causal: the stepped register (1 a row) of the tiles' rows */
    uint64_t sq;       /* causal: queries (the second-to-last dim) */
    uint32_t core0;
    struct ksm_core {
        uint64_t one, zero, sc, E, m, mf, t1, t2, t3, s, xm, mk, qi, qt, qv;
        unsigned rv;   /* streaming: register at the tile's rows of the core's stats */
        unsigned rq;   /* causal: the register of the tiles' rows */
        uint64_t row0; /* causal: the core's first row */
        uint64_t M, S; /* streaming: the core's running max and sum, a float per row */
    } pc[KC_ROW_MAX_CORES];
} ksm;

static void sm_prologue(kc_ctx *x, void *ctx, uint32_t core, uint64_t row0, uint64_t rows,
                        uint64_t tr, const unsigned *xreg)
{
    (void)row0;
    ksm *k = ctx;
    struct ksm_core *b = KC_ROW_PC(k, core);
    b->rv = xreg[0];
    b->rq = k->causal ? xreg[k->xpos] : 0;
    b->row0 = row0;
    b->one = krw_alloc(x, 4);
    krw_fill(x, b->one, 1.0f, 1, ISA_DTYPE_FP32);
    b->zero = krw_alloc(x, 4);
    krw_fill(x, b->zero, 0.0f, 1, ISA_DTYPE_FP32);
    b->sc = b->one;
    if (k->scaled) {
        b->sc = krw_alloc(x, 4);
        krw_fill(x, b->sc, k->scale, 1, ISA_DTYPE_FP32);
    }
    if (k->causal) { /* the masked tile (softmax), the mask (fp32), the rows' queries */
        b->xm = k->grad ? 0 : krw_alloc(x, tr * k->W * isa_dtype_size[k->dt]);
        b->mk = krw_alloc(x, tr * k->W * 4);
        b->qi = krw_alloc(x, tr * 4);
        b->qt = krw_alloc(x, tr * 4);
        b->qv = krw_alloc(x, tr * 4);
    }
    b->E = krw_alloc(x, tr * k->W * 4);
    b->m = krw_alloc(x, tr * 4);
    b->mf = krw_alloc(x, tr * 4);
    b->t1 = krw_alloc(x, tr * 4);
    b->t2 = krw_alloc(x, tr * 4);
    b->t3 = krw_alloc(x, tr * 4);
    b->s = krw_alloc(x, tr * 4);
    if (k->nc > 1) {
        b->M = krw_alloc(x, rows * 4);
        b->S = krw_alloc(x, rows * 4);
    }
}

/* The tile's row max as fp32 at mf. */
static void row_max(kc_ctx *x, const ksm *k, const struct ksm_core *b, uint64_t in,
                    uint64_t rows, uint64_t w)
{
    ISA_EMIT(x->e, VPU_RMAX, isa_spad(0, k->dt == ISA_DTYPE_FP32 ? b->mf : b->m), isa_spad(0, in),
             isa_imm((int64_t)rows), isa_imm((int64_t)w), isa_enum(k->dt));
    if (k->dt != ISA_DTYPE_FP32)
        krw_cast(x, b->mf, b->m, rows, ISA_DTYPE_FP32, k->dt);
}

/* The tile's mask (causal): dst = src where key <= query, else fill (mt: their dtype). The
 * rows are the tensor's rows: row g is query g mod Sq (computed per row in int32: g - Sq
 * round((2 g - Sq + 1) / (2 Sq)), exact), the columns keys c0 .. c0 + w - 1 (the chunk's). */
static void sm_mask(kc_ctx *x, const ksm *k, const struct ksm_core *b, const kc_row_tile *t,
                    uint64_t w, uint64_t c0, isa_dtype mt, uint64_t dst, uint64_t src,
                    float fill)
{
    const isa_dtype I = ISA_DTYPE_INT32, F = ISA_DTYPE_FP32;
    uint64_t R = t->rows;
    float sq = (float)k->sq;
    ISA_EMIT(x->e, VPU_IOTA, isa_spad(0, b->qi), isa_val(b->rq, t->xoff[k->xpos] + (int64_t)b->row0),
             isa_imm(1), isa_imm(0), isa_imm((int64_t)R), isa_imm(1), isa_enum(I));
    krw_scalar(x, ISA_OP_VPU_MULS, b->qt, b->qi, 2.0f, R, I);
    krw_scalar(x, ISA_OP_VPU_ADDS, b->qt, b->qt, 1.0f - sq, R, I);
    krw_scalar(x, ISA_OP_VPU_DIVS, b->qt, b->qt, 2.0f * sq, R, I);
    krw_scalar(x, ISA_OP_VPU_MULS, b->qt, b->qt, sq, R, I);
    krw_binary(x, ISA_OP_VPU_SUB, b->qi, b->qi, b->qt, 1, R, I, ISA_BCAST_FULL);
    krw_cast(x, b->qv, b->qi, R, F, I);
    ISA_EMIT(x->e, VPU_IOTA, isa_spad(0, b->mk), isa_val(0, (int64_t)c0), isa_imm(0), isa_imm(1),
             isa_imm((int64_t)R), isa_imm((int64_t)w), isa_enum(F));
    krw_binary(x, ISA_OP_VPU_CMPLE, b->mk, b->mk, b->qv, R, w, F, ISA_BCAST_COL);
    if (mt != F)
        krw_cast(x, b->mk, b->mk, R * w, mt, F);
    ISA_EMIT(x->e, VPU_SELS, isa_spad(0, dst), isa_spad(0, b->mk), isa_spad(0, src), isa_f32(fill),
             isa_imm((int64_t)R), isa_imm((int64_t)w), isa_enum(mt));
}

static void sm_work(kc_ctx *x, void *ctx, const kc_row_tile *t)
{
    ksm *k = ctx;
    const struct ksm_core *b = KC_ROW_PC(k, t->core);
    uint64_t R = t->rows, in = t->in[0];
    const isa_dtype F = ISA_DTYPE_FP32;
    float ns = -k->scale; /* -s: the exponentials' shift is -s m */
    if (k->causal) { /* the masked tile stands for the input from here on */
        uint64_t c0 = k->nc > 1 ? (t->pass % k->nc) * k->W : 0;
        uint64_t w = k->nc > 1 ? k->D - c0 : k->D;
        w = w < k->W ? w : k->W;
        sm_mask(x, k, b, t, w, c0, k->dt, b->xm, in, -INFINITY);
        in = b->xm;
    }
    if (k->nc == 1) { /* whole rows */
        row_max(x, k, b, in, R, k->D);
        krw_scalar(x, ISA_OP_VPU_MULS, b->t1, b->mf, ns, R, F);                    /* -s m */
        krw_fma(x, ISA_OP_VPU_FEXP, b->E, in, b->sc, b->t1, R, k->D, k->dt,
               k->log ? k->dt : F, ISA_BCAST_SCALAR, ISA_BCAST_COL, (int64_t)b->s);
        if (!k->log) {
            krw_unary(x, ISA_OP_VPU_RECIP, b->s, b->s, R, F);
            krw_fma(x, ISA_OP_VPU_FMA, t->out[0], b->E, b->s, b->zero, R, k->D, F, k->ot,
                   ISA_BCAST_COL, ISA_BCAST_SCALAR, -1);
        } else {
            krw_unary(x, ISA_OP_VPU_LOG, b->s, b->s, R, F);
            krw_binary(x, ISA_OP_VPU_SUB, b->t1, b->t1, b->s, 1, R, F, ISA_BCAST_FULL);
            krw_fma(x, ISA_OP_VPU_FMA, t->out[0], in, b->one, b->t1, R, k->D, k->dt, k->ot,
                   ISA_BCAST_SCALAR, ISA_BCAST_COL, -1);
        }
        return;
    }
    /* streaming: the stats of the tile's rows at rv + xoff */
    uint64_t M = KRW_AT(b->rv, b->M + (uint64_t)t->xoff[0]);
    uint64_t S = KRW_AT(b->rv, b->S + (uint64_t)t->xoff[0]);
    uint64_t w = k->D - (t->pass % k->nc) * k->W;
    w = w < k->W ? w : k->W;
    if (t->pass < k->nc) {
        row_max(x, k, b, in, R, w);
        if (t->pass == 0) { /* M = mc; S = sum exp(s x - s M) */
            krw_unary(x, ISA_OP_VPU_COPY, M, b->mf, R, F);
            krw_scalar(x, ISA_OP_VPU_MULS, b->t1, b->mf, ns, R, F);
            krw_fma(x, ISA_OP_VPU_FEXP, b->E, in, b->sc, b->t1, R, w, k->dt, k->dt,
                   ISA_BCAST_SCALAR, ISA_BCAST_COL, (int64_t)S);
            return;
        }
        krw_binary(x, ISA_OP_VPU_MAX, b->t2, M, b->mf, 1, R, F, ISA_BCAST_FULL);    /* M' */
        krw_scalar(x, ISA_OP_VPU_MULS, b->t1, b->t2, ns, R, F);                    /* -s M' */
        krw_fma(x, ISA_OP_VPU_FEXP, b->t3, M, b->sc, b->t1, 1, R, F, F,            /* e^(s(M-M')) */
               ISA_BCAST_SCALAR, ISA_BCAST_FULL, -1);
        krw_binary(x, ISA_OP_VPU_MUL, S, S, b->t3, 1, R, F, ISA_BCAST_FULL);
        krw_fma(x, ISA_OP_VPU_FEXP, b->E, in, b->sc, b->t1, R, w, k->dt, k->dt,
               ISA_BCAST_SCALAR, ISA_BCAST_COL, (int64_t)b->s);
        krw_binary(x, ISA_OP_VPU_ADD, S, S, b->s, 1, R, F, ISA_BCAST_FULL);
        krw_unary(x, ISA_OP_VPU_COPY, M, b->t2, R, F);                             /* M = M' */
        return;
    }
    /* c = -s M - log S; softmax = exp(s x + c), log_softmax = x + c */
    krw_unary(x, ISA_OP_VPU_LOG, b->t1, S, R, F);
    if (k->scaled) {
        krw_scalar(x, ISA_OP_VPU_MULS, b->t2, M, k->scale, R, F);
        krw_binary(x, ISA_OP_VPU_ADD, b->t1, b->t1, b->t2, 1, R, F, ISA_BCAST_FULL);
    } else {
        krw_binary(x, ISA_OP_VPU_ADD, b->t1, b->t1, M, 1, R, F, ISA_BCAST_FULL);
    }
    krw_scalar(x, ISA_OP_VPU_MULS, b->t1, b->t1, -1.0f, R, F);
    krw_fma(x, k->log ? ISA_OP_VPU_FMA : ISA_OP_VPU_FEXP, t->out[0], in, b->sc, b->t1, R, w,
           k->dt, k->ot, ISA_BCAST_SCALAR, ISA_BCAST_COL, -1);
}

/* softmax_grad's tile: d = rdot(dy, y) (or its running sum S over the chunks), then dx. */
static void sg_work(kc_ctx *x, void *ctx, const kc_row_tile *t)
{
    ksm *k = ctx;
    const struct ksm_core *b = KC_ROW_PC(k, t->core);
    uint64_t R = t->rows, y = t->in[0], dy = t->in[1];
    const isa_dtype F = ISA_DTYPE_FP32;
    uint64_t c0 = k->nc > 1 ? (t->pass % k->nc) * k->W : 0, w = k->D - c0;
    w = w < k->W ? w : k->W;
    uint64_t d = b->s;
    if (k->nc > 1) {
        uint64_t S = KRW_AT(b->rv, b->S + (uint64_t)t->xoff[0]);
        if (t->pass < k->nc) { /* S (+)= rdot(dy, y) over this chunk */
            krw_rdot(x, t->pass ? b->s : S, dy, y, R, w, k->dt, F, ISA_BCAST_FULL);
            if (t->pass)
                krw_binary(x, ISA_OP_VPU_ADD, S, S, b->s, 1, R, F, ISA_BCAST_FULL);
            return;
        }
        d = S;
    } else {
        krw_rdot(x, d, dy, y, R, w, k->dt, F, ISA_BCAST_FULL);
    }
    krw_scalar(x, ISA_OP_VPU_MULS, b->t1, d, -k->scale, R, F);                      /* -s d */
    krw_fma(x, ISA_OP_VPU_FMA, b->E, dy, b->sc, b->t1, R, w, k->dt, F, ISA_BCAST_SCALAR,
           ISA_BCAST_COL, -1);                                                       /* s dy - s d */
    if (k->causal)
        sm_mask(x, k, b, t, w, c0, F, b->E, b->E, 0.0f);
    krw_fma(x, ISA_OP_VPU_FMA, t->out[0], y, b->E, b->zero, R, w, k->dt, k->ot, ISA_BCAST_FULL,
           ISA_BCAST_SCALAR, -1);
}

static void sm_pass(kc_ctx *x, void *ctx, unsigned pass, kc_row_plan *p)
{
    (void)x;
    ksm *k = ctx;
    if (k->nc == 1)
        return;
    uint64_t c = pass % k->nc, w = k->D - c * k->W;
    w = w < k->W ? w : k->W;
    p->in[0].addr = k->x + c * k->W * isa_dtype_size[k->dt];
    p->in[0].width = w;
    if (k->grad) {
        p->in[1].addr = k->dy + c * k->W * isa_dtype_size[k->dt];
        p->in[1].width = w;
    }
    if (pass < k->nc) {
        p->n_out = 0;
    } else {
        p->out[0].addr = k->y + c * k->W * isa_dtype_size[k->ot];
        p->out[0].width = w;
    }
}

static np_status softmax_compile(kc_ctx *x)
{
    const kc_kernel *kk = x->k;
    bool grad = kk->op == NN_OP_SOFTMAX_GRAD;
    const kc_tensor *X = &kk->in[0], *DY = grad ? &kk->in[1] : NULL, *Y = &kk->out[0];
    if (!kc_is_float(X->dtype) || !kc_is_float(Y->dtype))
        return kc_fail(x, NP_ERR_INCONSISTENT, "%s is %s, out %s: float types only",
                       grad ? "y" : "x", nn_dtype_name(X->dtype), nn_dtype_name(Y->dtype));
    if (!kc_same_shape(X, Y) || (DY && !kc_same_shape(DY, Y)))
        return kc_fail(x, NP_ERR_INCONSISTENT, "out must have %s's shape", grad ? "y" : "x");
    if (DY && DY->dtype != X->dtype)
        return kc_fail(x, NP_ERR_INCONSISTENT, "dy is %s, y %s: one type",
                       nn_dtype_name(DY->dtype), nn_dtype_name(X->dtype));
    double sc = kk->op == NN_OP_LOG_SOFTMAX ? 0 : kc_attr_real(x, "scale");
    ksm k = {.core0 = kk->place.core0, .log = kk->op == NN_OP_LOG_SOFTMAX, .grad = grad,
             .dt = kc_isa_dtype(X->dtype), .ot = kc_isa_dtype(Y->dtype), .x = X->addr,
             .y = Y->addr, .dy = DY ? DY->addr : 0, .scale = sc > 0 ? (float)sc : 1.0f,
             .scaled = sc > 0 && (float)sc != 1.0f,
             .causal = kk->op != NN_OP_LOG_SOFTMAX && kc_attr_int(x, "causal")};
    uint64_t rows, wy, ry; /* out's rows and width are x's (same shape) */
    if (kc_rows_of(x, X, grad ? "y" : "x", &rows, &k.D, &k.ldx) != NP_OK ||
        kc_rows_of(x, Y, "out", &ry, &wy, &k.ldy) != NP_OK ||
        (DY && kc_rows_of(x, DY, "dy", &ry, &wy, &k.lddy) != NP_OK))
        return kc_status(x);
    if (k.causal) {
        if (X->ndim < 2)
            return kc_fail(x, NP_ERR_INCONSISTENT, "causal needs a matrix: x has %d dim",
                           X->ndim);
        k.sq = (uint64_t)X->shape[X->ndim - 2];
    }
    uint64_t ex = isa_dtype_size[k.dt], ey = isa_dtype_size[k.ot];
    kc_row_plan p = {.rows = rows, .n_in = grad ? 2 : 1, .n_out = 1,
                     .work = grad ? sg_work : sm_work, .pass = sm_pass, .prologue = sm_prologue,
                     .ctx = &k, .tr = (uint64_t)kc_attr_int(x, "tr")};
    uint64_t chunk = (uint64_t)kc_attr_int(x, "chunk");
    const kc_place *pl = &kk->place;
    uint64_t cores = pl->n_cores ? pl->n_cores : 1, rows_core = (rows + cores - 1) / cores;
    /* bytes a column of a tile row needs beside the streams: the exponentials (grad: T) in
     * fp32, causal the masked tile and its mask */
    uint64_t mcol = k.causal ? (grad ? 4 : 4 + ex) : 0;
    /* whole rows when one fits; else the widest chunk that does, with the stats per row */
    k.W = chunk ? chunk : k.D;
    for (;;) {
        k.nc = (k.D + k.W - 1) / k.W;
        p.in[0] = (kc_row_stream){k.x, k.ldx, k.dt, k.W, 1, 0};
        if (grad)
            p.in[1] = (kc_row_stream){k.dy, k.lddy, k.dt, k.W, 1, 0};
        p.out[0] = (kc_row_stream){k.y, k.ldy, k.ot, k.W, 1, 0};
        /* (the causal rows' queries: three vectors more; the scale: a constant) */
        p.work_row_bytes = k.W * (4 + mcol) + (k.causal ? 9 * 4 + 12 * 64 : 6 * 4 + 7 * 64);
        p.fixed_bytes = (k.nc > 1 ? 2 * rows_core * 4 + 128 : 0) + (k.scaled ? 64 : 0);
        if (k.W <= 65535 && kc_rows_fit(x, &p, pl->core0) >= 1)
            break;
        if (kc_chunk_narrow(x, pl->core0, chunk, k.D, "elements", 2 * rows_core * 4 + 4096,
                            (grad ? 3 : 2) * ex + 2 * ey + 4 + mcol + 1, &k.W) != NP_OK)
            return kc_status(x);
    }
    if (k.nc > 1) {
        p.n_xreg = 1, p.xstep[0] = 4;
        p.n_pass = 2 * (unsigned)k.nc;
    }
    if (k.causal) { /* a register stepped 1 a row: the tile's first row */
        k.xpos = p.n_xreg;
        p.xstep[p.n_xreg++] = 1;
    }
    if (kc_rows_emit(x, &p) != NP_OK)
        return kc_status(x);
    uint64_t n = rows * k.D;
    x->res->flops = ((grad ? 4 : 5) + (sc > 0) + k.causal) * n;
    snprintf(x->res->schedule, sizeof x->res->schedule, "tiles of %" PRIu64 " rows%s%s on %"
             PRIu32 " cores", p.tr_used, k.nc > 1 ? " streamed in chunks" : "",
             k.causal ? ", causal mask" : "", p.cores_used);
    if (k.nc > 1) {
        char *e = x->res->schedule + strlen(x->res->schedule);
        snprintf(e, sizeof x->res->schedule - (size_t)(e - x->res->schedule),
                 " (%" PRIu64 " chunks of %" PRIu64 " columns)", k.nc, k.W);
    }
    return kc_status(x);
}

/* ---- the table rows -------------------------------------------------------------------------- */

/* Attribute name of k, 0 when not given: a REAL's f (real), else its i. */
static double sm_attr(const kc_kernel *k, const char *name, bool real)
{
    for (int i = 0; i < k->n_attrs; i++)
        if (!strcmp(k->attrs[i].name, name))
            return real ? k->attrs[i].f : (double)k->attrs[i].i;
    return 0;
}

static np_status softmax_reference(nn_graph *g, const kc_kernel *k, nn_tensor *const *in,
                                   nn_tensor **out, np_err *err)
{
    double sc = sm_attr(k, "scale", true);
    bool causal = sm_attr(k, "causal", false) != 0;
    if (k->op == NN_OP_LOG_SOFTMAX)
        out[0] = nn_log_softmax(g, in[0]);
    else if (k->op == NN_OP_SOFTMAX_GRAD)
        out[0] = nn_softmax_grad(g, in[0], in[1], sc, causal);
    else
        out[0] = sc > 0 || causal ? nn_softmax_masked(g, in[0], sc, causal) : nn_softmax(g, in[0]);
    return out[0] ? NP_OK : nn_graph_status(g, err);
}

/* A softmax's (softmax_grad's) fused scale fp[0] and mask ip[0] as its attributes. */
static np_status softmax_from_node(const nn_tensor *t, kc_kernel *k, np_err *err)
{
    if (t->op == NN_OP_LOG_SOFTMAX || (t->fp[0] == 0 && !t->ip[0]))
        return NP_OK;
    if (k->n_attrs + 2 > KC_MAX_ATTRS)
        return np_err_set(err, NP_ERR_RANGE, "%s: no room for its attributes",
                          nn_op_name(t->op));
    k->attrs[k->n_attrs++] = KC_REAL("scale", t->fp[0]);
    k->attrs[k->n_attrs++] = KC_INT("causal", t->ip[0] != 0);
    return NP_OK;
}

static np_status softmax_build(kc_prog *p, const kc_spec *s, kc_kernel *k, np_err *err)
{
    if (s->op != NN_OP_SOFTMAX_GRAD)
        return kc_spec_unary(p, s, k, err);
    const kc_spec_val *sh = kc_spec_get(s, "shape"), *dt = kc_spec_get(s, "dtype");
    if (!sh || !dt || sh->ndim < 1)
        return np_err_set(err, NP_ERR_MISSING, "%s: shape=AxBx... is needed", nn_op_name(s->op));
    k->n_in = 2, k->n_out = 1;
    nn_dtype d = (nn_dtype)dt->i;
    if (kc_spec_tensor(p, "Y", d, sh->ndim, sh->shape, &k->in[0], err) != NP_OK ||
        kc_spec_tensor(p, "DY", d, sh->ndim, sh->shape, &k->in[1], err) != NP_OK ||
        kc_spec_tensor(p, "DX", d, sh->ndim, sh->shape, &k->out[0], err) != NP_OK)
        return err->status;
    return NP_OK;
}

static const kc_attr_def log_softmax_attrs[] = {
    {"tr", KC_ATTR_INT, 0, 0, 65535, "tile: rows per tile (0: chosen)"},
    {"chunk", KC_ATTR_INT, 0, 0, 65535, "tile: columns per chunk, streaming the rows in two "
                                        "passes (0: whole rows when they fit)"},
};

static const kc_attr_def softmax_attrs[] = {
    {"tr", KC_ATTR_INT, 0, 0, 65535, "tile: rows per tile (0: chosen)"},
    {"chunk", KC_ATTR_INT, 0, 0, 65535, "tile: columns per chunk, streaming the rows in two "
                                        "passes (0: whole rows when they fit)"},
    {"scale", KC_ATTR_REAL, 0, 0, 1e30, "the input's scale, fused (0: none)"},
    {"causal", KC_ATTR_BOOL, 0, 0, 1, "mask the elements above the diagonal of the last two "
                                      "dims, fused"},
};

static const kc_attr_def softmax_grad_keys[KC_UNARY_N_KEYS] = {
    {"shape", KC_ATTR_SHAPE, KC_REQUIRED, 0, 0, "y's shape, AxBx... (the last dim is the row; "
                                                "dy and dx alike)"},
    {"dtype", KC_ATTR_DTYPE, NN_BF16, 0, 0, "element type"},
};

#define SOFTMAX_ROW(NAME, OP, NIN, ATTRS, KEYS, TEXT)                                          \
    const kc_kernel_def NAME = {                                                                \
        .op = OP, .n_in = NIN, .n_out = 1,                                                      \
        .attrs = ATTRS, .n_attrs = sizeof ATTRS / sizeof ATTRS[0],                              \
        .compile = softmax_compile, .reference = softmax_reference,                              \
        .keys = KEYS, .n_keys = KC_UNARY_N_KEYS, .build = softmax_build, .doc = TEXT,           \
        .from_node = softmax_from_node,                                                         \
    }
SOFTMAX_ROW(kc_softmax_def, NN_OP_SOFTMAX, 1, softmax_attrs, kc_unary_keys,
            "rows of the last dim, TR at a time, double-buffered: [the fused causal mask,] max, "
            "exp of the scaled row with its sums, one scaling pass; rows too wide streamed in "
            "chunks (online max and sum)");
SOFTMAX_ROW(kc_log_softmax_def, NN_OP_LOG_SOFTMAX, 1, log_softmax_attrs, kc_unary_keys,
            "rows of the last dim, TR at a time, double-buffered: max, exp with its sums, one "
            "pass; rows too wide streamed in chunks (online max and sum)");
SOFTMAX_ROW(kc_softmax_grad_def, NN_OP_SOFTMAX_GRAD, 2, softmax_attrs, softmax_grad_keys,
            "rows of y and dy, TR at a time: rdot(dy, y), then scale y (dy - it) rounded once "
            "[, the causal mask]; rows too wide in two passes of chunks");
