/* kc_rope.c — rotary position embedding of x [..., S, Dh] (the framework's rope: pairs (i,
 * i + Dh/2) of the row at position p turn by dir x p x base^(-2i/Dh)), on the row schedule
 * (kc_row.h) with the positions as its rows.
 *
 * The row schedule's row p is position p of every sequence (the leading dims, B x H of
 * them): its streams are the first and the second halves of those rows (planes, S x Dh
 * apart), so a tile of TP positions is, in the scratchpad, B x H rows of TP x Dh/2 — and the
 * cos and sin of those positions are one row of TP x Dh/2 fp32 values, broadcast to every
 * sequence. The compiler computes the cos / sin table on the host (as the framework does, in
 * double) into the program's .data; each core loads its positions' part once. Per tile:
 *
 *   t  = fma(x2 x (-sin) + 0);  y1 = fma(x1 x cos + t)     (fp32, then the output's dtype)
 *   u  = fma(x1 x sin + 0);     y2 = fma(x2 x cos + u)
 *
 * More sequences than fit are done in passes of as many as fit.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kc_row.h"

typedef struct krope {
    isa_dtype dt, ot;
    uint64_t S, h, seqs;
    uint64_t table;          /* HBM: cos, sin, -sin tables, [S][h] fp32 each */
    uint64_t x, y;
    int64_t ldx, ldy, psx, psy; /* position and sequence strides */
    uint64_t block;          /* sequences a pass */
    uint32_t core0;
    struct krope_core {
        unsigned rv;
        uint64_t cs, sn, nsn, zero, t, u;
    } pc[KC_ROW_MAX_CORES];
} krope;

static void rope_prologue(kc_ctx *x, void *ctx, uint32_t core, uint64_t row0, uint64_t rows,
                          uint64_t tr, const unsigned *xreg)
{
    krope *k = ctx;
    struct krope_core *b = KC_ROW_PC(k, core);
    b->rv = xreg[0];
    uint64_t n = rows * k->h;
    b->cs = krw_alloc(x, n * 4), b->sn = krw_alloc(x, n * 4), b->nsn = krw_alloc(x, n * 4);
    b->zero = krw_alloc(x, 4);
    b->t = krw_alloc(x, k->block * tr * k->h * 4);
    b->u = krw_alloc(x, k->block * tr * k->h * 4);
    unsigned s;
    kc_sem_alloc(x, &s);
    uint64_t tab[3] = {b->cs, b->sn, b->nsn};
    for (int i = 0; i < 3; i++)
        krw_copy(x, isa_spad(0, tab[i]), isa_hbm(0, k->table + (i * k->S + row0) * k->h * 4),
                ISA_DTYPE_FP32, n, 1, 0, 0);
    x->res->hbm_read_bytes += 3 * n * 4;
    krw_signal(x, ISA_UNIT_DMA, s);
    krw_wait(x, ISA_UNIT_VPU, s);
    krw_fill(x, b->zero, 0.0f, 1, ISA_DTYPE_FP32);
}

static void rope_work(kc_ctx *x, void *ctx, const kc_row_tile *t)
{
    krope *k = ctx;
    const struct krope_core *b = KC_ROW_PC(k, t->core);
    const isa_dtype F = ISA_DTYPE_FP32;
    const isa_bcast W = ISA_BCAST_ROW, S = ISA_BCAST_SCALAR, T = ISA_BCAST_FULL;
    uint64_t seqs = k->seqs - t->pass * k->block;
    seqs = seqs < k->block ? seqs : k->block;
    uint64_t cols = t->rows * k->h, off = (uint64_t)t->xoff[0];
    uint64_t cs = KRW_AT(b->rv, b->cs + off), sn = KRW_AT(b->rv, b->sn + off),
             nsn = KRW_AT(b->rv, b->nsn + off);
    uint64_t x1 = t->in[0], x2 = t->in[1];
    krw_fma(x, ISA_OP_VPU_FMA, b->t, x2, nsn, b->zero, seqs, cols, k->dt, F, W, S, -1);
    krw_fma(x, ISA_OP_VPU_FMA, t->out[0], x1, cs, b->t, seqs, cols, k->dt, k->ot, W, T, -1);
    krw_fma(x, ISA_OP_VPU_FMA, b->u, x1, sn, b->zero, seqs, cols, k->dt, F, W, S, -1);
    krw_fma(x, ISA_OP_VPU_FMA, t->out[1], x2, cs, b->u, seqs, cols, k->dt, k->ot, W, T, -1);
}

static void rope_pass(kc_ctx *x, void *ctx, unsigned pass, kc_row_plan *p)
{
    (void)x;
    krope *k = ctx;
    uint64_t q0 = pass * k->block, n = k->seqs - q0 < k->block ? k->seqs - q0 : k->block;
    uint64_t he = k->h * isa_dtype_size[k->dt], ho = k->h * isa_dtype_size[k->ot];
    p->in[0].addr = k->x + q0 * (uint64_t)k->psx, p->in[1].addr = p->in[0].addr + he;
    p->out[0].addr = k->y + q0 * (uint64_t)k->psy, p->out[1].addr = p->out[0].addr + ho;
    for (int i = 0; i < 2; i++)
        p->in[i].planes = p->out[i].planes = n;
}

/* The sequences of t (its dims before the last two) as one stride: fails unless they merge. */
static np_status seq_stride(kc_ctx *x, const kc_tensor *t, const char *what, uint64_t *n,
                            int64_t *stride)
{
    int nd = t->ndim;
    *n = 1;
    *stride = t->stride[nd - 2] * t->shape[nd - 2];
    int64_t next = -1;
    for (int d = nd - 3; d >= 0; d--) {
        if (t->shape[d] == 1)
            continue;
        if (next < 0)
            *stride = t->stride[d];
        else if (t->stride[d] != next)
            return kc_fail(x, NP_ERR_INCONSISTENT, "%s: the dims before [S, Dh] do not merge",
                           what);
        next = t->stride[d] * t->shape[d];
        *n *= (uint64_t)t->shape[d];
    }
    return NP_OK;
}

static np_status rope_compile(kc_ctx *x)
{
    const kc_kernel *kk = x->k;
    const kc_tensor *X = &kk->in[0], *Y = &kk->out[0];
    if (!kc_is_float(X->dtype) || !kc_is_float(Y->dtype) || !kc_same_shape(X, Y))
        return kc_fail(x, NP_ERR_INCONSISTENT, "x and out: float, one shape");
    int nd = X->ndim;
    if (nd < 2 || X->shape[nd - 1] % 2)
        return kc_fail(x, NP_ERR_INCONSISTENT, "x must be [..., S, Dh] with Dh even");
    krope k = {.core0 = kk->place.core0, .dt = kc_isa_dtype(X->dtype),
               .ot = kc_isa_dtype(Y->dtype), .x = X->addr,
               .y = Y->addr};
    k.S = (uint64_t)X->shape[nd - 2], k.h = (uint64_t)X->shape[nd - 1] / 2;
    for (int i = 0; i < 2; i++) {
        const kc_tensor *t = i ? Y : X;
        if (t->stride[nd - 1] != (int64_t)nn_dtype_size(t->dtype))
            return kc_fail(x, NP_ERR_INCONSISTENT, "%s: the last dim must be packed",
                           i ? "out" : "x");
    }
    k.ldx = X->stride[nd - 2], k.ldy = Y->stride[nd - 2];
    if (seq_stride(x, X, "x", &k.seqs, &k.psx) != NP_OK ||
        seq_stride(x, Y, "out", &k.seqs, &k.psy) != NP_OK)
        return kc_status(x);
    /* the table, as the framework computes it */
    double base = kc_attr_real(x, "base"), dir = kc_attr_real(x, "dir");
    double off = (double)kc_attr_int(x, "offset");
    uint64_t n = k.S * k.h;
    float *tab = malloc(3 * n * sizeof *tab);
    if (!tab)
        return kc_fail(x, NP_ERR_NOMEM, "out of memory");
    for (uint64_t p = 0; p < k.S; p++)
        for (uint64_t i = 0; i < k.h; i++) {
            double ang = dir * ((double)p + off) * pow(base, -2.0 * (double)i / (double)(2 * k.h));
            tab[p * k.h + i] = (float)cos(ang);
            tab[n + p * k.h + i] = (float)sin(ang);
            tab[2 * n + p * k.h + i] = -(float)sin(ang);
        }
    np_status st = isa_emit_data(x->e, NULL, tab, 3 * n * 4, 64, &k.table);
    free(tab);
    if (st != NP_OK)
        return kc_status(x);
    kc_row_plan p = {.rows = k.S, .n_in = 2, .n_out = 2, .work = rope_work,
                     .prologue = rope_prologue, .pass = rope_pass, .ctx = &k,
                     .tr = (uint64_t)kc_attr_int(x, "tr"), .tr_max = 65535 / k.h};
    uint64_t he = k.h * isa_dtype_size[k.dt], ho = k.h * isa_dtype_size[k.ot];
    /* as many sequences a pass as fit (with TP = 1) */
    const kc_place *pl = &kk->place;
    uint32_t cores = pl->n_cores ? pl->n_cores : 1;
    uint64_t rows_core = (k.S + cores - 1) / cores;
    for (k.block = k.seqs > 65535 ? 65535 : k.seqs;; k.block = (k.block + 1) / 2) {
        p.in[0] = (kc_row_stream){k.x, k.ldx, k.dt, k.h, k.block, k.psx};
        p.in[1] = (kc_row_stream){k.x + he, k.ldx, k.dt, k.h, k.block, k.psx};
        p.out[0] = (kc_row_stream){k.y, k.ldy, k.ot, k.h, k.block, k.psy};
        p.out[1] = (kc_row_stream){k.y + ho, k.ldy, k.ot, k.h, k.block, k.psy};
        p.work_row_bytes = 2 * k.block * k.h * 4 + 64;
        p.fixed_bytes = 3 * rows_core * k.h * 4 + 5 * 64;
        if (kc_rows_fit(x, &p, pl->core0) >= 1)
            break;
        if (k.block == 1)
            return kc_fail(x, NP_ERR_RANGE, "one position of one sequence (Dh %" PRIu64 ") and "
                           "the core's cos/sin table (%" PRIu64 " positions) do not fit the "
                           "scratchpad", 2 * k.h, rows_core);
    }
    p.n_xreg = 1, p.xstep[0] = (int64_t)(k.h * 4);
    p.n_pass = (unsigned)((k.seqs + k.block - 1) / k.block);
    if (kc_rows_emit(x, &p) != NP_OK)
        return kc_status(x);
    x->res->flops = 3 * k.seqs * k.S * 2 * k.h;
    snprintf(x->res->schedule, sizeof x->res->schedule, "tiles of %" PRIu64 " positions x %"
             PRIu64 " sequences on %" PRIu32 " cores", p.tr_used, k.block, p.cores_used);
    return kc_status(x);
}

/* ---- the table row --------------------------------------------------------------------------- */

static np_status rope_reference(nn_graph *g, const kc_kernel *k, nn_tensor *const *in,
                                nn_tensor **out, np_err *err)
{
    double base = 10000, dir = 1, off = 0;
    for (int i = 0; i < k->n_attrs; i++) {
        if (k->attrs[i].name && !strcmp(k->attrs[i].name, "offset"))
            off = (double)k->attrs[i].i;
        if (k->attrs[i].name && !strcmp(k->attrs[i].name, "base"))
            base = k->attrs[i].f;
        if (k->attrs[i].name && !strcmp(k->attrs[i].name, "dir"))
            dir = k->attrs[i].f;
    }
    out[0] = nn_node(g, NN_OP_ROPE, 1, in, NULL, (double[NN_MAX_FPARAMS]){base, dir, off});
    return out[0] ? NP_OK : nn_graph_status(g, err);
}

static np_status rope_build(kc_prog *p, const kc_spec *s, kc_kernel *k, np_err *err)
{
    return kc_spec_unary(p, s, k, err);
}

static const kc_attr_def rope_attrs[] = {
    {"base", KC_ATTR_REAL, 10000, 1e-6, 1e12,
     "frequency base (Llama: 10000; the framework's fp[0])"},
    {"dir", KC_ATTR_REAL, 1, -1, 1, "1 forward, -1 the inverse rotation of the backward (fp[1])"},
    {"offset", KC_ATTR_INT, 0, 0, (double)(1 << 30),
     "the position of row 0 (inference: tokens already in the kv cache; the framework's fp[2])"},
    {"tr", KC_ATTR_INT, 0, 0, 65535, "tile: positions per tile (0: chosen)"},
};

const kc_kernel_def kc_rope_def = {
    .op = NN_OP_ROPE, .n_in = 1, .n_out = 1,
    .attrs = rope_attrs, .n_attrs = sizeof rope_attrs / sizeof rope_attrs[0],
    .compile = rope_compile, .reference = rope_reference,
    .keys = kc_unary_keys, .n_keys = KC_UNARY_N_KEYS, .build = rope_build,
    .doc = "positions TP at a time for all sequences, halves as planes; cos/sin from .data, "
           "four fma passes of half width",
};
