/* kc_embed.c — embedding (table [V, D], integer indices [...] -> [..., D]) as indexed DMA,
 * and its gradient (indices, dy [..., D] -> [V, D]) as a scatter-add.
 *
 * embedding: each core takes a block of the indices and moves its rows with dma.gather
 *   straight from the table to the output (HBM to HBM, 65535 rows per instruction, the
 *   indices read from HBM); no vector work. int8 indices are first brought to the scratchpad
 *   and widened to int32 by the vector unit.
 * embedding_grad: the gradient table is zeroed (the row schedule, kc_row.h, storing zero
 *   tiles), then every row of dy is added into the row its index names with dma.scatter
 *   red=add — rows applied in index order, so repeated indices accumulate. With an fp32
 *   gradient dy's rows go from HBM to HBM; a 16-bit gradient is accumulated in fp32 in an HBM
 *   buffer of the kernel's own (dy converted by the vector unit on the way) and converted
 *   once at the end, so each element is rounded once, as the reference does. With several
 *   cores the indices are split between them (their adds to one row are read-modify-writes
 *   at the memory, in the order they arrive there) and barriers separate the phases.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#include "kc_row.h"

#define KE_CHUNK 65535u /* rows per indexed copy (its n1 field) */

typedef struct kemb {
    bool grad;
    isa_dtype dt, it;            /* rows, indices */
    uint64_t V, D, N;
    uint64_t table, idx, rows;   /* table (gather src / scatter dst), indices, dense rows */
    int64_t ld_table, ld_rows;
} kemb;

/* Indices [i0, i0 + n) as int32 in the scratchpad at buf (staged at raw), for int8 ones;
 * the DMA waits for the conversion. */
static void widen(kc_ctx *x, const kemb *k, uint64_t i0, uint64_t n, uint64_t raw, uint64_t buf,
                  unsigned sd, unsigned sv)
{
    krw_copy(x, isa_spad(0, raw), isa_hbm(0, k->idx + i0), ISA_DTYPE_INT8, n, 1, 0, 0);
    krw_signal(x, ISA_UNIT_DMA, sd);
    krw_wait(x, ISA_UNIT_VPU, sd);
    krw_cast(x, buf, raw, n, ISA_DTYPE_INT32, ISA_DTYPE_INT8);
    krw_signal(x, ISA_UNIT_VPU, sv);
    krw_wait(x, ISA_UNIT_DMA, sv);
}

static np_status embedding_compile(kc_ctx *x)
{
    const kc_kernel *kk = x->k;
    const kc_tensor *T = &kk->in[0], *I = &kk->in[1], *Y = &kk->out[0];
    kemb k = {0};
    if (I->dtype != NN_I32 && I->dtype != NN_I8)
        return kc_fail(x, NP_ERR_INCONSISTENT, "indices are %s: i32 or i8",
                       nn_dtype_name(I->dtype));
    if (T->ndim != 2 || Y->ndim != I->ndim + 1 || Y->dtype != T->dtype ||
        Y->shape[Y->ndim - 1] != T->shape[1])
        return kc_fail(x, NP_ERR_INCONSISTENT, "table must be [V, D] and out [..., D] of its "
                       "dtype");
    for (int d = 0; d < I->ndim; d++)
        if (Y->shape[d] != I->shape[d])
            return kc_fail(x, NP_ERR_INCONSISTENT, "out must be the indices' shape plus D");
    k.dt = kc_isa_dtype(T->dtype), k.it = kc_isa_dtype(I->dtype);
    k.V = (uint64_t)T->shape[0], k.D = (uint64_t)T->shape[1];
    uint64_t e = isa_dtype_size[k.dt], rows, w;
    if (kc_tensor_bytes(I) != kc_tensor_extent(I))
        return kc_fail(x, NP_ERR_INCONSISTENT, "the indices must be packed");
    if (kc_rows_of(x, Y, "out", &rows, &w, &k.ld_rows) != NP_OK)
        return kc_status(x);
    k.N = (uint64_t)kc_tensor_numel(I);
    k.ld_table = T->stride[0];
    if ((T->shape[1] > 1 && T->stride[1] != (int64_t)e) || k.D > 65535 || k.V >= (1u << 24) ||
        k.ld_table >= (1 << 24) || k.ld_rows >= (1 << 24))
        return kc_fail(x, NP_ERR_RANGE, "a table of %" PRIu64 " x %" PRIu64 " (rows packed, D at "
                       "most 65535, V below 2^24, row strides below 16 MiB)", k.V, k.D);
    const kc_place *pl = &kk->place;
    uint32_t cores = pl->n_cores ? pl->n_cores : 1;
    cores = k.N < cores ? (uint32_t)k.N : cores;
    for (uint32_t c = 0; c < cores; c++) {
        uint64_t i0 = k.N * c / cores, i1 = k.N * (c + 1) / cores;
        kc_core(x, pl->core0 + c);
        unsigned sd, sv, ss;
        kc_sem_alloc(x, &sd), kc_sem_alloc(x, &sv), kc_sem_alloc(x, &ss);
        uint64_t chunk = i1 - i0 < KE_CHUNK ? i1 - i0 : KE_CHUNK, raw = 0, buf = 0;
        if (k.it != ISA_DTYPE_INT32)
            raw = krw_alloc(x, chunk), buf = krw_alloc(x, chunk * 4);
        for (uint64_t a = i0; a < i1; a += chunk) {
            uint64_t n = i1 - a < chunk ? i1 - a : chunk;
            isa_opnd idx = isa_hbm(0, I->addr + a * 4);
            if (k.it != ISA_DTYPE_INT32) {
                k.idx = I->addr;
                widen(x, &k, a, n, raw, buf, sd, sv);
                idx = isa_spad(0, buf);
            }
            ISA_EMIT(x->e, DMA_GATHER, isa_hbm(0, Y->addr + a * (uint64_t)k.ld_rows),
                     isa_hbm(0, T->addr), idx, isa_enum(k.dt), isa_imm((int64_t)k.D),
                     isa_imm((int64_t)n), isa_imm((int64_t)k.V),
                     .dst_s1 = isa_imm(k.ld_rows == (int64_t)(k.D * e) ? 0 : k.ld_rows),
                     .src_s1 = isa_imm(k.ld_table == (int64_t)(k.D * e) ? 0 : k.ld_table));
        }
        krw_signal(x, ISA_UNIT_DMA, ss); /* the DMA queue ends on its own copies */
        krw_wait(x, ISA_UNIT_DMA, ss);
    }
    x->res->hbm_read_bytes = k.N * (k.D * e + isa_dtype_size[k.it]);
    x->res->hbm_write_bytes = k.N * k.D * e;
    /* the minimum: the rows named (not the whole table), the indices, the output */
    x->res->hbm_bytes_min = x->res->hbm_read_bytes + x->res->hbm_write_bytes;
    x->res->cores = cores;
    snprintf(x->res->schedule, sizeof x->res->schedule, "dma.gather of %" PRIu64 " rows on %"
             PRIu32 " cores", k.N, cores);
    return kc_status(x);
}

/* ---- the gradient ---------------------------------------------------------------------------- */

/* The row schedule's work of the zeroing and the final conversion. */
typedef struct keg_rows {
    bool cast;
    isa_dtype dt;
    uint64_t D;
} keg_rows;

static void zero_work(kc_ctx *x, void *ctx, const kc_row_tile *t)
{
    keg_rows *z = ctx;
    ISA_EMIT(x->e, VPU_FILL, isa_spad(0, t->out[0]), isa_f32(0), isa_imm((int64_t)t->rows),
             isa_imm((int64_t)z->D), isa_enum(z->dt));
}

static void cast_work(kc_ctx *x, void *ctx, const kc_row_tile *t)
{
    keg_rows *z = ctx;
    ISA_EMIT(x->e, VPU_CAST, isa_spad(0, t->out[0]), isa_spad(0, t->in[0]),
             isa_imm((int64_t)t->rows), isa_imm((int64_t)z->D), isa_enum(z->dt),
             isa_enum(ISA_DTYPE_FP32));
}

static np_status embedding_grad_compile(kc_ctx *x)
{
    const kc_kernel *kk = x->k;
    const kc_tensor *I = &kk->in[0], *G = &kk->in[1], *Y = &kk->out[0];
    kemb k = {.grad = true};
    if (I->dtype != NN_I32 && I->dtype != NN_I8)
        return kc_fail(x, NP_ERR_INCONSISTENT, "indices are %s: i32 or i8",
                       nn_dtype_name(I->dtype));
    if (!kc_is_float(G->dtype) || Y->dtype != G->dtype || Y->ndim != 2 ||
        G->ndim != I->ndim + 1 || Y->shape[1] != G->shape[G->ndim - 1])
        return kc_fail(x, NP_ERR_INCONSISTENT, "dy must be float [..., D] and out [V, D] of its "
                       "dtype");
    for (int d = 0; d < I->ndim; d++)
        if (G->shape[d] != I->shape[d])
            return kc_fail(x, NP_ERR_INCONSISTENT, "dy must be the indices' shape plus D");
    if (kc_tensor_bytes(I) != kc_tensor_extent(I))
        return kc_fail(x, NP_ERR_INCONSISTENT, "the indices must be packed");
    k.dt = kc_isa_dtype(G->dtype), k.it = kc_isa_dtype(I->dtype);
    k.V = (uint64_t)Y->shape[0], k.D = (uint64_t)Y->shape[1], k.N = (uint64_t)kc_tensor_numel(I);
    uint64_t e = isa_dtype_size[k.dt], rows, w, vr, vw;
    int64_t ldy;
    if (kc_rows_of(x, G, "dy", &rows, &w, &k.ld_rows) != NP_OK ||
        kc_rows_of(x, Y, "out", &vr, &vw, &ldy) != NP_OK)
        return kc_status(x);
    if (k.D > 65535 || k.V >= (1u << 24) || ldy >= (1 << 24) || k.ld_rows >= (1 << 24))
        return kc_fail(x, NP_ERR_RANGE, "a table of %" PRIu64 " x %" PRIu64 " (D at most 65535, V "
                       "below 2^24, row strides below 16 MiB)", k.V, k.D);
    bool wide = k.dt != ISA_DTYPE_FP32; /* accumulate in an fp32 buffer of the kernel's own */
    uint64_t acc = Y->addr;
    int64_t ld_acc = ldy;
    if (wide) {
        ld_acc = (int64_t)(k.D * 4);
        if (kc_prog_bss(x->prog, NULL, k.V * k.D * 4, &acc, NULL) != NP_OK)
            return kc_fail(x, NP_ERR_NOMEM, "no HBM for the fp32 accumulation buffer (%" PRIu64
                           " bytes)", k.V * k.D * 4);
    }
    const kc_place *pl = &kk->place;
    uint32_t cores = pl->n_cores ? pl->n_cores : 1;
    np_err be = {0};
    /* 1. zero the accumulation table */
    keg_rows z = {false, wide ? ISA_DTYPE_FP32 : k.dt, k.D};
    kc_row_plan zp = {.rows = k.V, .n_out = 1, .work = zero_work, .ctx = &z};
    /* the phases' buffers stay the kernel's to its end: each takes a part of the scratchpad */
    zp.tr_max = kc_spad_avail(x, pl->core0) / 8 / (2 * k.D * 4 + 64);
    zp.tr_max = zp.tr_max ? zp.tr_max : 1;
    zp.out[0] = (kc_row_stream){acc, ld_acc, z.dt, k.D, 1, 0};
    if (kc_rows_emit(x, &zp) != NP_OK)
        return kc_status(x);
    if (zp.cores_used > 1 || cores > 1)
        if (kc_barrier(x->prog, &be) != NP_OK)
            return kc_status(x);
    /* 2. scatter-add dy's rows */
    uint32_t sc = k.N < cores ? (uint32_t)(k.N ? k.N : 1) : cores;
    for (uint32_t c = 0; c < sc; c++) {
        uint64_t i0 = k.N * c / sc, i1 = k.N * (c + 1) / sc;
        kc_core(x, pl->core0 + c);
        unsigned sd, sv, ss;
        kc_sem_alloc(x, &sd), kc_sem_alloc(x, &sv), kc_sem_alloc(x, &ss);
        uint64_t chunk = i1 - i0 < KE_CHUNK ? i1 - i0 : KE_CHUNK;
        if (wide) { /* dy converted in the scratchpad: chunks as large as fit */
            uint64_t per = k.D * (e + 4) + 5, room = kc_spad_avail(x, pl->core0 + c) / 2;
            uint64_t fit = room > 4096 ? (room - 4096) / per : 0;
            chunk = fit < chunk ? fit : chunk;
            if (!chunk)
                return kc_fail(x, NP_ERR_RANGE, "a row of dy (%" PRIu64 " elements) does not fit "
                               "the scratchpad to be converted", k.D);
        }
        uint64_t raw = 0, buf = 0, rin = 0, rf = 0;
        if (k.it != ISA_DTYPE_INT32)
            raw = krw_alloc(x, chunk), buf = krw_alloc(x, chunk * 4);
        if (wide)
            rin = krw_alloc(x, chunk * k.D * e), rf = krw_alloc(x, chunk * k.D * 4);
        k.idx = I->addr;
        for (uint64_t a = i0; a < i1; a += chunk) {
            uint64_t n = i1 - a < chunk ? i1 - a : chunk;
            isa_opnd idx = isa_hbm(0, I->addr + a * isa_dtype_size[k.it]);
            if (k.it != ISA_DTYPE_INT32) {
                widen(x, &k, a, n, raw, buf, sd, sv);
                idx = isa_spad(0, buf);
            }
            isa_opnd src = isa_hbm(0, G->addr + a * (uint64_t)k.ld_rows);
            int64_t ss1 = k.ld_rows;
            if (wide) {
                krw_copy(x, isa_spad(0, rin), src, k.dt, k.D, n, 0, k.ld_rows);
                krw_signal(x, ISA_UNIT_DMA, sd);
                krw_wait(x, ISA_UNIT_VPU, sd);
                ISA_EMIT(x->e, VPU_CAST, isa_spad(0, rf), isa_spad(0, rin), isa_imm((int64_t)n),
                         isa_imm((int64_t)k.D), isa_enum(ISA_DTYPE_FP32), isa_enum(k.dt));
                krw_signal(x, ISA_UNIT_VPU, sv);
                krw_wait(x, ISA_UNIT_DMA, sv);
                src = isa_spad(0, rf), ss1 = (int64_t)(k.D * 4);
            }
            uint64_t row = k.D * (wide ? 4 : e);
            ISA_EMIT(x->e, DMA_SCATTER, isa_hbm(0, acc), src, idx,
                     isa_enum(wide ? ISA_DTYPE_FP32 : k.dt), isa_imm((int64_t)k.D),
                     isa_imm((int64_t)n), isa_imm((int64_t)k.V),
                     .dst_s1 = isa_imm(ld_acc == (int64_t)row ? 0 : ld_acc),
                     .src_s1 = isa_imm(ss1 == (int64_t)row ? 0 : ss1),
                     .red = isa_enum(ISA_RED_ADD));
        }
        krw_signal(x, ISA_UNIT_DMA, ss);
        krw_wait(x, ISA_UNIT_DMA, ss);
    }
    uint64_t rd = k.N * (k.D * e + isa_dtype_size[k.it]) + k.N * k.D * (wide ? 4 : e);
    uint64_t wr = k.N * k.D * (wide ? 4 : e);
    /* 3. a 16-bit gradient: the fp32 sums converted, once */
    if (wide) {
        if (sc > 1 || cores > 1)
            if (kc_barrier(x->prog, &be) != NP_OK)
                return kc_status(x);
        keg_rows cz = {true, k.dt, k.D};
        kc_row_plan cp = {.rows = k.V, .n_in = 1, .n_out = 1, .work = cast_work, .ctx = &cz};
        cp.in[0] = (kc_row_stream){acc, ld_acc, ISA_DTYPE_FP32, k.D, 1, 0};
        cp.out[0] = (kc_row_stream){Y->addr, ldy, k.dt, k.D, 1, 0};
        if (kc_rows_emit(x, &cp) != NP_OK)
            return kc_status(x);
    }
    x->res->hbm_read_bytes += rd;
    x->res->hbm_write_bytes += wr;
    x->res->cores = cores;
    x->res->flops = k.N * k.D;
    /* the minimum: indices and dy read once, the table written once */
    x->res->hbm_bytes_min = k.N * (isa_dtype_size[k.it] + k.D * e) + k.V * k.D * e;
    snprintf(x->res->schedule, sizeof x->res->schedule, "zero, dma.scatter red=add of %" PRIu64
             " rows%s on %" PRIu32 " cores", k.N, wide ? " into fp32, convert" : "", cores);
    return kc_status(x);
}

/* ---- the table rows -------------------------------------------------------------------------- */

static np_status embedding_reference(nn_graph *g, const kc_kernel *k, nn_tensor *const *in,
                                     nn_tensor **out, np_err *err)
{
    if (k->op == NN_OP_EMBEDDING)
        out[0] = nn_embedding(g, in[0], in[1]);
    else
        out[0] = nn_node(g, NN_OP_EMBEDDING_GRAD, 2, in,
                         (int64_t[NN_MAX_IPARAMS]){k->out[0].shape[0]},
                         NULL);
    return out[0] ? NP_OK : nn_graph_status(g, err);
}

static int64_t embedding_index_bound(const kc_kernel *k, int in)
{
    if (k->op == NN_OP_EMBEDDING)
        return in == 1 ? k->in[0].shape[0] : 0;
    return in == 0 ? k->out[0].shape[0] : 0;
}

static const kc_attr_def embedding_keys[] = {
    {"shape", KC_ATTR_SHAPE, KC_REQUIRED, 0, 0, "the indices' shape, AxB..."},
    {"vocab", KC_ATTR_INT, 32000, 1, (1 << 24) - 1, "table rows V"},
    {"dim", KC_ATTR_INT, 4096, 1, 65535, "row width D"},
    {"dtype", KC_ATTR_DTYPE, NN_BF16, 0, 0, "the table's element type"},
    {"index", KC_ATTR_DTYPE, NN_I32, 0, 0, "the indices' element type (i32 or i8)"},
};

static np_status embedding_build(kc_prog *p, const kc_spec *s, kc_kernel *k, np_err *err)
{
    const kc_spec_val *sh = kc_spec_get(s, "shape"), *dt = kc_spec_get(s, "dtype");
    const kc_spec_val *v = kc_spec_get(s, "vocab"), *d = kc_spec_get(s, "dim");
    const kc_spec_val *it = kc_spec_get(s, "index");
    if (!sh || !dt || !v || !d || sh->ndim < 1 || sh->ndim >= KC_MAX_DIMS)
        return np_err_set(err, NP_ERR_MISSING, "%s: shape=AxB... is needed", nn_op_name(s->op));
    int64_t rows[KC_MAX_DIMS], tab[2] = {v->i, d->i};
    for (int i = 0; i < sh->ndim; i++)
        rows[i] = sh->shape[i];
    rows[sh->ndim] = d->i;
    nn_dtype t = (nn_dtype)dt->i, itt = it ? (nn_dtype)it->i : NN_I32;
    k->n_in = 2, k->n_out = 1;
    if (s->op == NN_OP_EMBEDDING) {
        if (kc_spec_tensor(p, "TABLE", t, 2, tab, &k->in[0], err) ||
            kc_spec_tensor(p, "IDX", itt, sh->ndim, sh->shape, &k->in[1], err) ||
            kc_spec_tensor(p, "OUT", t, sh->ndim + 1, rows, &k->out[0], err))
            return err->status;
    } else if (kc_spec_tensor(p, "IDX", itt, sh->ndim, sh->shape, &k->in[0], err) ||
               kc_spec_tensor(p, "DY", t, sh->ndim + 1, rows, &k->in[1], err) ||
               kc_spec_tensor(p, "OUT", t, 2, tab, &k->out[0], err)) {
        return err->status;
    }
    return NP_OK;
}

const kc_kernel_def kc_embedding_def = {
    .op = NN_OP_EMBEDDING, .n_in = 2, .n_out = 1, .compile = embedding_compile,
    .reference = embedding_reference,
    .keys = embedding_keys, .n_keys = sizeof embedding_keys / sizeof embedding_keys[0],
    .build = embedding_build, .index_bound = embedding_index_bound,
    .doc = "dma.gather of the table's rows straight into the output, the indices read from HBM",
};

const kc_kernel_def kc_embedding_grad_def = {
    .op = NN_OP_EMBEDDING_GRAD, .n_in = 2, .n_out = 1, .compile = embedding_grad_compile,
    .reference = embedding_reference,
    .keys = embedding_keys, .n_keys = sizeof embedding_keys / sizeof embedding_keys[0],
    .build = embedding_build, .index_bound = embedding_index_bound,
    .doc = "zeroed table, dma.scatter red=add of dy's rows in index order (16-bit: into fp32, "
           "converted once)",
};
