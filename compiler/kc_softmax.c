/* kc_softmax.c — softmax and log-softmax over the last dim, on the row schedule (kc_row.h).
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
    bool log;
    isa_dtype dt, ot;
    uint64_t D, W, nc; /* row width, chunk width, chunks (1: whole rows) */
    uint64_t x, y;
    int64_t ldx, ldy;
    uint32_t core0;
    struct ksm_core {
        uint64_t one, zero, E, m, mf, t1, t2, t3, s;
        unsigned rv;   /* streaming: register at the tile's rows of the core's stats */
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
    b->one = krw_alloc(x, 4);
    krw_fill(x, b->one, 1.0f, 1, ISA_DTYPE_FP32);
    b->zero = krw_alloc(x, 4);
    krw_fill(x, b->zero, 0.0f, 1, ISA_DTYPE_FP32);
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

static void sm_work(kc_ctx *x, void *ctx, const kc_row_tile *t)
{
    ksm *k = ctx;
    const struct ksm_core *b = KC_ROW_PC(k, t->core);
    uint64_t R = t->rows, in = t->in[0];
    const isa_dtype F = ISA_DTYPE_FP32;
    if (k->nc == 1) { /* whole rows */
        row_max(x, k, b, in, R, k->D);
        krw_scalar(x, ISA_OP_VPU_MULS, b->t1, b->mf, -1.0f, R, F);                 /* -m */
        krw_fma(x, ISA_OP_VPU_FEXP, b->E, in, b->one, b->t1, R, k->D, k->dt,
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
        if (t->pass == 0) { /* M = mc; S = sum exp(x - M) */
            krw_unary(x, ISA_OP_VPU_COPY, M, b->mf, R, F);
            krw_scalar(x, ISA_OP_VPU_MULS, b->t1, b->mf, -1.0f, R, F);
            krw_fma(x, ISA_OP_VPU_FEXP, b->E, in, b->one, b->t1, R, w, k->dt, k->dt,
                   ISA_BCAST_SCALAR, ISA_BCAST_COL, (int64_t)S);
            return;
        }
        krw_binary(x, ISA_OP_VPU_MAX, b->t2, M, b->mf, 1, R, F, ISA_BCAST_FULL);    /* M' */
        krw_scalar(x, ISA_OP_VPU_MULS, b->t1, b->t2, -1.0f, R, F);                 /* -M' */
        krw_fma(x, ISA_OP_VPU_FEXP, b->t3, M, b->one, b->t1, 1, R, F, F,           /* e^(M-M') */
               ISA_BCAST_SCALAR, ISA_BCAST_FULL, -1);
        krw_binary(x, ISA_OP_VPU_MUL, S, S, b->t3, 1, R, F, ISA_BCAST_FULL);
        krw_fma(x, ISA_OP_VPU_FEXP, b->E, in, b->one, b->t1, R, w, k->dt, k->dt,
               ISA_BCAST_SCALAR, ISA_BCAST_COL, (int64_t)b->s);
        krw_binary(x, ISA_OP_VPU_ADD, S, S, b->s, 1, R, F, ISA_BCAST_FULL);
        krw_unary(x, ISA_OP_VPU_COPY, M, b->t2, R, F);                             /* M = M' */
        return;
    }
    /* c = -M - log S; softmax = exp(x + c), log_softmax = x + c */
    krw_unary(x, ISA_OP_VPU_LOG, b->t1, S, R, F);
    krw_binary(x, ISA_OP_VPU_ADD, b->t1, b->t1, M, 1, R, F, ISA_BCAST_FULL);
    krw_scalar(x, ISA_OP_VPU_MULS, b->t1, b->t1, -1.0f, R, F);
    krw_fma(x, k->log ? ISA_OP_VPU_FMA : ISA_OP_VPU_FEXP, t->out[0], in, b->one, b->t1, R, w,
           k->dt, k->ot, ISA_BCAST_SCALAR, ISA_BCAST_COL, -1);
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
    const kc_tensor *X = &kk->in[0], *Y = &kk->out[0];
    if (!kc_is_float(X->dtype) || !kc_is_float(Y->dtype))
        return kc_fail(x, NP_ERR_INCONSISTENT, "x is %s, out %s: float types only",
                       nn_dtype_name(X->dtype), nn_dtype_name(Y->dtype));
    if (!kc_same_shape(X, Y))
        return kc_fail(x, NP_ERR_INCONSISTENT, "out must have x's shape");
    ksm k = {.core0 = kk->place.core0, .log = kk->op == NN_OP_LOG_SOFTMAX,
             .dt = kc_isa_dtype(X->dtype),
             .ot = kc_isa_dtype(Y->dtype), .x = X->addr, .y = Y->addr};
    uint64_t rows, wy, ry; /* out's rows and width are x's (same shape) */
    if (kc_rows_of(x, X, "x", &rows, &k.D, &k.ldx) != NP_OK ||
        kc_rows_of(x, Y, "out", &ry, &wy, &k.ldy) != NP_OK)
        return kc_status(x);
    uint64_t ex = isa_dtype_size[k.dt], ey = isa_dtype_size[k.ot];
    kc_row_plan p = {.rows = rows, .n_in = 1, .n_out = 1, .work = sm_work, .pass = sm_pass,
                     .prologue = sm_prologue, .ctx = &k, .tr = (uint64_t)kc_attr_int(x, "tr")};
    uint64_t chunk = (uint64_t)kc_attr_int(x, "chunk");
    const kc_place *pl = &kk->place;
    uint64_t cores = pl->n_cores ? pl->n_cores : 1, rows_core = (rows + cores - 1) / cores;
    /* whole rows when one fits; else the widest chunk that does, with the stats per row */
    k.W = chunk ? chunk : k.D;
    for (;;) {
        k.nc = (k.D + k.W - 1) / k.W;
        p.in[0] = (kc_row_stream){k.x, k.ldx, k.dt, k.W, 1, 0};
        p.out[0] = (kc_row_stream){k.y, k.ldy, k.ot, k.W, 1, 0};
        p.work_row_bytes = k.W * 4 + 6 * 4 + 7 * 64;
        p.fixed_bytes = k.nc > 1 ? 2 * rows_core * 4 + 128 : 0;
        if (k.W <= 65535 && kc_rows_fit(x, &p, pl->core0) >= 1)
            break;
        if (kc_chunk_narrow(x, pl->core0, chunk, k.D, "elements", 2 * rows_core * 4 + 4096,
                            2 * ex + 2 * ey + 4 + 1, &k.W) != NP_OK)
            return kc_status(x);
    }
    if (k.nc > 1) {
        p.n_xreg = 1, p.xstep[0] = 4;
        p.n_pass = 2 * (unsigned)k.nc;
    }
    if (kc_rows_emit(x, &p) != NP_OK)
        return kc_status(x);
    x->res->flops = 5 * rows * k.D;
    snprintf(x->res->schedule, sizeof x->res->schedule, "tiles of %" PRIu64 " rows%s on %" PRIu32
             " cores", p.tr_used, k.nc > 1 ? " streamed in chunks" : "", p.cores_used);
    if (k.nc > 1) {
        char *e = x->res->schedule + strlen(x->res->schedule);
        snprintf(e, sizeof x->res->schedule - (size_t)(e - x->res->schedule),
                 " (%" PRIu64 " chunks of %" PRIu64 " columns)", k.nc, k.W);
    }
    return kc_status(x);
}

/* ---- the table rows -------------------------------------------------------------------------- */

static np_status softmax_reference(nn_graph *g, const kc_kernel *k, nn_tensor *const *in,
                                   nn_tensor **out, np_err *err)
{
    out[0] = k->op == NN_OP_LOG_SOFTMAX ? nn_log_softmax(g, in[0]) : nn_softmax(g, in[0]);
    return out[0] ? NP_OK : nn_graph_status(g, err);
}

static np_status softmax_build(kc_prog *p, const kc_spec *s, kc_kernel *k, np_err *err)
{
    return kc_spec_unary(p, s, k, err);
}

static const kc_attr_def softmax_attrs[] = {
    {"tr", KC_ATTR_INT, 0, 0, 65535, "tile: rows per tile (0: chosen)"},
    {"chunk", KC_ATTR_INT, 0, 0, 65535, "tile: columns per chunk, streaming the rows in two "
                                        "passes (0: whole rows when they fit)"},
};

#define SOFTMAX_ROW(NAME, OP)                                                                   \
    const kc_kernel_def NAME = {                                                                \
        .op = OP, .n_in = 1, .n_out = 1,                                                        \
        .attrs = softmax_attrs, .n_attrs = sizeof softmax_attrs / sizeof softmax_attrs[0],      \
        .compile = softmax_compile, .reference = softmax_reference,                              \
        .keys = kc_unary_keys, .n_keys = KC_UNARY_N_KEYS, .build = softmax_build,               \
        .doc = "rows of the last dim, TR at a time, double-buffered: max, exp with its sums, "  \
               "one scaling pass; rows too wide streamed in chunks (online max and sum)",       \
    }
SOFTMAX_ROW(kc_softmax_def, NN_OP_SOFTMAX);
SOFTMAX_ROW(kc_log_softmax_def, NN_OP_LOG_SOFTMAX);
