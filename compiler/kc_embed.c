/* kc_embed.c — embedding (table [V, D], integer indices [...] -> [..., D]) as indexed DMA,
 * and its gradient (indices, dy [..., D] -> [V, D]) as a scatter-add; both also over a
 * vocabulary shard (a third input: the i32/i8 scalar offset of the shard's first row, as the
 * tensor-parallel plans make them: an index outside [offset, offset + V) gives a row of
 * zeros / adds nothing).
 *
 * embedding: each core takes a block of the indices and moves its rows with dma.gather
 *   straight from the table to the output (HBM to HBM, 65535 rows per instruction, the
 *   indices read from HBM); no vector work. int8 indices are first brought to the scratchpad
 *   and widened to int32 by the vector unit; over a shard the vector unit also subtracts the
 *   offset (read from HBM once per core) and the gather skips what falls outside the table
 *   (skip=1: a row of zeros).
 * embedding_grad: the gradient table is zeroed (the row schedule, kc_row.h, storing zero
 *   tiles; a dense table with rows too wide as narrower rows), then every row of dy (in
 *   column pieces when whole rows do not fit) is added into the row its index names with
 *   dma.scatter
 *   red=add — rows applied in index order, so repeated indices accumulate (over a shard the
 *   indices as above; the scatter drops the rows outside the table). With an fp32
 *   gradient dy's rows go from HBM to HBM; a 16-bit gradient is accumulated in fp32 in an HBM
 *   buffer of the kernel's own (dy converted by the vector unit on the way) and converted
 *   once at the end, so each element is rounded once, as the reference does. With several
 *   cores the indices are split between them (their adds to one row are read-modify-writes
 *   at the memory, in the order they arrive there) and barriers separate the phases.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kc_row.h"

#define KE_CHUNK 65535u /* rows per indexed copy (its n1 field) */

typedef struct kemb {
    bool grad, shard;
    isa_dtype dt, it, ot;        /* rows, indices, the shard's offset */
    uint64_t V, D, N;
    uint64_t idx, off;           /* indices, offset (HBM) */
    int64_t ld_table, ld_rows;
} kemb;

/* The scratchpad and semaphores of one core's index staging (kidx_begin). */
typedef struct kidx {
    bool staged;                 /* indices go through the scratchpad (i8, or a shard) */
    uint64_t raw, buf, offr, offb;
    unsigned sd, sv;
} kidx;

/* Resources of a core taking index chunks of up to `chunk` (sd/sv its own semaphores). */
static void kidx_begin(kc_ctx *x, const kemb *k, uint64_t chunk, kidx *s)
{
    memset(s, 0, sizeof *s);
    s->staged = k->it != ISA_DTYPE_INT32 || k->shard;
    kc_sem_alloc(x, &s->sd), kc_sem_alloc(x, &s->sv);
    if (!s->staged)
        return;
    s->buf = krw_alloc(x, chunk * 4);
    if (k->it != ISA_DTYPE_INT32)
        s->raw = krw_alloc(x, chunk);
    if (k->shard)
        s->offb = krw_alloc(x, 4), s->offr = k->ot != ISA_DTYPE_INT32 ? krw_alloc(x, 1) : s->offb;
}

/* The index operand of chunk [i0, i0 + n): straight from HBM (int32, no shard) or staged in
 * the scratchpad as int32 (int8 widened, the offset subtracted: read once per core, with the
 * core's first chunk); the DMA queue waits for the vector unit. */
static isa_opnd kidx_chunk(kc_ctx *x, const kemb *k, kidx *s, uint64_t i0, uint64_t n, bool first)
{
    if (!s->staged)
        return isa_hbm(0, k->idx + i0 * 4);
    bool wide = k->it != ISA_DTYPE_INT32;
    krw_copy(x, isa_spad(0, wide ? s->raw : s->buf),
             isa_hbm(0, k->idx + i0 * isa_dtype_size[k->it]), k->it, n, 1, 0, 0);
    if (k->shard && first)
        krw_copy(x, isa_spad(0, s->offr), isa_hbm(0, k->off), k->ot, 1, 1, 0, 0);
    krw_signal(x, ISA_UNIT_DMA, s->sd);
    krw_wait(x, ISA_UNIT_VPU, s->sd);
    if (wide)
        krw_cast(x, s->buf, s->raw, n, ISA_DTYPE_INT32, k->it);
    if (k->shard) {
        if (first && s->offr != s->offb)
            krw_cast(x, s->offb, s->offr, 1, ISA_DTYPE_INT32, k->ot);
        krw_binary(x, ISA_OP_VPU_SUB, s->buf, s->buf, s->offb, 1, n, ISA_DTYPE_INT32,
                   ISA_BCAST_SCALAR);
    }
    krw_signal(x, ISA_UNIT_VPU, s->sv);
    krw_wait(x, ISA_UNIT_DMA, s->sv);
    return isa_spad(0, s->buf);
}

/* The indices' (and a shard offset's) checks, common to both kernels: fills it, ot, shard,
 * idx, off. */
static np_status kemb_indices(kc_ctx *x, kemb *k, const kc_tensor *I, int off_in)
{
    const kc_kernel *kk = x->k;
    if (kk->n_in != 2 && kk->n_in != 3)
        return kc_fail(x, NP_ERR_INCONSISTENT, "%d inputs: 2, or 3 over a vocabulary shard "
                       "(the offset of its first row last)", kk->n_in);
    if (I->dtype != NN_I32 && I->dtype != NN_I8)
        return kc_fail(x, NP_ERR_INCONSISTENT, "indices are %s: i32 or i8",
                       nn_dtype_name(I->dtype));
    if (kc_tensor_bytes(I) != kc_tensor_extent(I))
        return kc_fail(x, NP_ERR_INCONSISTENT, "the indices must be packed");
    k->it = kc_isa_dtype(I->dtype), k->idx = I->addr;
    k->shard = kk->n_in == 3;
    if (k->shard) {
        const kc_tensor *O = &kk->in[off_in];
        if ((O->dtype != NN_I32 && O->dtype != NN_I8) || kc_tensor_numel(O) != 1)
            return kc_fail(x, NP_ERR_INCONSISTENT, "the shard's offset must be one i32 or i8 "
                           "element");
        k->ot = kc_isa_dtype(O->dtype), k->off = O->addr;
    }
    return NP_OK;
}

static np_status embedding_compile(kc_ctx *x)
{
    const kc_kernel *kk = x->k;
    const kc_tensor *T = &kk->in[0], *I = &kk->in[1], *Y = &kk->out[0];
    kemb k = {0};
    if (kemb_indices(x, &k, I, 2) != NP_OK)
        return kc_status(x);
    if (T->ndim != 2 || Y->ndim != I->ndim + 1 || Y->dtype != T->dtype ||
        Y->shape[Y->ndim - 1] != T->shape[1])
        return kc_fail(x, NP_ERR_INCONSISTENT, "table must be [V, D] and out [..., D] of its "
                       "dtype");
    for (int d = 0; d < I->ndim; d++)
        if (Y->shape[d] != I->shape[d])
            return kc_fail(x, NP_ERR_INCONSISTENT, "out must be the indices' shape plus D");
    k.dt = kc_isa_dtype(T->dtype);
    k.V = (uint64_t)T->shape[0], k.D = (uint64_t)T->shape[1];
    uint64_t e = isa_dtype_size[k.dt], rows, w;
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
        uint64_t chunk = i1 - i0 < KE_CHUNK ? i1 - i0 : KE_CHUNK;
        kidx ix;
        unsigned ss;
        kidx_begin(x, &k, chunk, &ix);
        kc_sem_alloc(x, &ss);
        for (uint64_t a = i0; a < i1; a += chunk) {
            uint64_t n = i1 - a < chunk ? i1 - a : chunk;
            isa_opnd idx = kidx_chunk(x, &k, &ix, a, n, a == i0);
            ISA_EMIT(x->e, DMA_GATHER, isa_hbm(0, Y->addr + a * (uint64_t)k.ld_rows),
                     isa_hbm(0, T->addr), idx, isa_enum(k.dt), isa_imm((int64_t)k.D),
                     isa_imm((int64_t)n), isa_imm((int64_t)k.V),
                     .dst_s1 = isa_imm(k.ld_rows == (int64_t)(k.D * e) ? 0 : k.ld_rows),
                     .src_s1 = isa_imm(k.ld_table == (int64_t)(k.D * e) ? 0 : k.ld_table),
                     .skip = isa_imm(k.shard));
        }
        krw_signal(x, ISA_UNIT_DMA, ss); /* the DMA queue ends on its own copies */
        krw_wait(x, ISA_UNIT_DMA, ss);
    }
    uint64_t extra = k.shard ? cores * isa_dtype_size[k.ot] : 0; /* each core's offset */
    x->res->hbm_read_bytes = k.N * (k.D * e + isa_dtype_size[k.it]) + extra;
    x->res->hbm_write_bytes = k.N * k.D * e;
    /* the minimum: the rows named (not the whole table; over a shard, as if every index fell
     * inside it), the indices, the offset once, the output */
    x->res->hbm_bytes_min = x->res->hbm_read_bytes - extra + (k.shard ? isa_dtype_size[k.ot] : 0) +
                            x->res->hbm_write_bytes;
    x->res->cores = cores;
    snprintf(x->res->schedule, sizeof x->res->schedule, "dma.gather of %" PRIu64 " rows%s on %"
             PRIu32 " cores", k.N, k.shard ? " of a vocabulary shard" : "", cores);
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
    if (kemb_indices(x, &k, I, 2) != NP_OK)
        return kc_status(x);
    if (!kc_is_float(G->dtype) || Y->dtype != G->dtype || Y->ndim != 2 ||
        G->ndim != I->ndim + 1 || Y->shape[1] != G->shape[G->ndim - 1])
        return kc_fail(x, NP_ERR_INCONSISTENT, "dy must be float [..., D] and out [V, D] of its "
                       "dtype");
    for (int d = 0; d < I->ndim; d++)
        if (G->shape[d] != I->shape[d])
            return kc_fail(x, NP_ERR_INCONSISTENT, "dy must be the indices' shape plus D");
    k.dt = kc_isa_dtype(G->dtype);
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
    /* the phases' buffers stay the kernel's to its end: each takes a part of the scratchpad;
     * a dense table whose rows are too wide for that part is zeroed as narrower rows (a
     * divisor of V x D elements) */
    uint64_t part = UINT64_MAX, ze = isa_dtype_size[z.dt];
    for (uint32_t c = pl->core0; c < pl->core0 + cores; c++)
        part = kc_spad_avail(x, c) / 8 < part ? kc_spad_avail(x, c) / 8 : part;
    uint64_t zrows = k.V, zw = k.D;
    if (2 * k.D * ze + 64 > part && ld_acc == (int64_t)(k.D * ze)) {
        uint64_t total = k.V * k.D;
        for (zw = (part - 64) / (2 * ze); zw > 1 && total % zw; zw--)
            ;
        zw = zw ? zw : 1, zrows = total / zw;
        z.D = zw;
    }
    zp.rows = zrows;
    zp.tr_max = part / (2 * zw * ze + 64);
    zp.tr_max = zp.tr_max ? zp.tr_max : 1;
    zp.out[0] = (kc_row_stream){acc, zw == k.D ? ld_acc : (int64_t)(zw * ze), z.dt, zw, 1, 0};
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
        uint64_t chunk = i1 - i0 < KE_CHUNK ? i1 - i0 : KE_CHUNK, dc = k.D;
        if (wide) { /* dy converted in the scratchpad: chunks as large as fit, of rows in
                       column pieces of dc when whole rows leave fewer than 16 a chunk */
            uint64_t room = kc_spad_avail(x, pl->core0 + c) / 2, want = chunk < 16 ? chunk : 16;
            uint64_t fit;
            for (;; dc = (dc + 1) / 2) {
                uint64_t per = dc * (e + 4) + 5;
                fit = room > 4096 ? (room - 4096) / per : 0;
                if (fit >= want || dc == 1)
                    break;
            }
            chunk = fit < chunk ? fit : chunk;
            if (!chunk)
                return kc_fail(x, NP_ERR_RANGE, "a row of dy (%" PRIu64 " elements) does not fit "
                               "the scratchpad to be converted", k.D);
        }
        kidx ix;
        kidx_begin(x, &k, chunk, &ix);
        uint64_t rin = 0, rf = 0;
        if (wide)
            rin = krw_alloc(x, chunk * dc * e), rf = krw_alloc(x, chunk * dc * 4);
        for (uint64_t a = i0; a < i1; a += chunk) {
            uint64_t n = i1 - a < chunk ? i1 - a : chunk;
            isa_opnd idx = kidx_chunk(x, &k, &ix, a, n, a == i0);
            for (uint64_t c0 = 0; c0 < k.D; c0 += dc) { /* column pieces (one: whole rows) */
                uint64_t pw = k.D - c0 < dc ? k.D - c0 : dc;
                isa_opnd src = isa_hbm(0, G->addr + a * (uint64_t)k.ld_rows + c0 * e);
                int64_t ss1 = k.ld_rows;
                if (wide) {
                    krw_copy(x, isa_spad(0, rin), src, k.dt, pw, n, 0, k.ld_rows);
                    krw_signal(x, ISA_UNIT_DMA, sd);
                    krw_wait(x, ISA_UNIT_VPU, sd);
                    ISA_EMIT(x->e, VPU_CAST, isa_spad(0, rf), isa_spad(0, rin),
                             isa_imm((int64_t)n), isa_imm((int64_t)pw), isa_enum(ISA_DTYPE_FP32),
                             isa_enum(k.dt));
                    krw_signal(x, ISA_UNIT_VPU, sv);
                    krw_wait(x, ISA_UNIT_DMA, sv);
                    src = isa_spad(0, rf), ss1 = (int64_t)(pw * 4);
                }
                uint64_t row = pw * (wide ? 4 : e);
                ISA_EMIT(x->e, DMA_SCATTER, isa_hbm(0, acc + c0 * (wide ? 4 : e)), src, idx,
                         isa_enum(wide ? ISA_DTYPE_FP32 : k.dt), isa_imm((int64_t)pw),
                         isa_imm((int64_t)n), isa_imm((int64_t)k.V),
                         .dst_s1 = isa_imm(ld_acc == (int64_t)row ? 0 : ld_acc),
                         .src_s1 = isa_imm(ss1 == (int64_t)row ? 0 : ss1),
                         .red = isa_enum(ISA_RED_ADD), .skip = isa_imm(k.shard));
            }
        }
        krw_signal(x, ISA_UNIT_DMA, ss);
        krw_wait(x, ISA_UNIT_DMA, ss);
    }
    uint64_t off_bytes = k.shard ? isa_dtype_size[k.ot] : 0;
    uint64_t rd = k.N * (k.D * e + isa_dtype_size[k.it]) + k.N * k.D * (wide ? 4 : e) +
                  sc * off_bytes;
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
        /* rows too wide for what is left, both tables dense: narrower rows (a divisor of V x
         * D elements) */
        uint64_t left = UINT64_MAX, per = 2 * (4 + e);
        for (uint32_t c = pl->core0; c < pl->core0 + cores; c++)
            left = kc_spad_avail(x, c) < left ? kc_spad_avail(x, c) : left;
        bool fits = true;
        for (uint32_t c = pl->core0; c < pl->core0 + cores; c++)
            fits = fits && kc_rows_fit(x, &cp, c) >= 1;
        if (!fits && ldy == (int64_t)(k.D * e) && left > 4096) {
            uint64_t total = k.V * k.D, cw = (left - 4096) / per;
            for (cw = cw < k.D ? cw : k.D; cw > 1 && total % cw; cw--)
                ;
            cw = cw ? cw : 1, cz.D = cw, cp.rows = total / cw;
            cp.in[0] = (kc_row_stream){acc, (int64_t)(cw * 4), ISA_DTYPE_FP32, cw, 1, 0};
            cp.out[0] = (kc_row_stream){Y->addr, (int64_t)(cw * e), k.dt, cw, 1, 0};
        }
        if (kc_rows_emit(x, &cp) != NP_OK)
            return kc_status(x);
    }
    x->res->hbm_read_bytes += rd;
    x->res->hbm_write_bytes += wr;
    x->res->cores = cores;
    x->res->flops = k.N * k.D;
    /* the minimum: indices and dy read once, the table written once */
    x->res->hbm_bytes_min = k.N * (isa_dtype_size[k.it] + k.D * e) + k.V * k.D * e + off_bytes;
    snprintf(x->res->schedule, sizeof x->res->schedule, "zero, dma.scatter red=add of %" PRIu64
             " rows%s%s on %" PRIu32 " cores", k.N, k.shard ? " of a vocabulary shard" : "",
             wide ? " into fp32, convert" : "", cores);
    return kc_status(x);
}

/* ---- the table rows -------------------------------------------------------------------------- */

static np_status embedding_reference(nn_graph *g, const kc_kernel *k, nn_tensor *const *in,
                                     nn_tensor **out, np_err *err)
{
    if (k->op == NN_OP_EMBEDDING)
        out[0] = k->n_in == 3 ? nn_embedding_shard(g, in[0], in[1], in[2])
                              : nn_embedding(g, in[0], in[1]);
    else
        out[0] = nn_node(g, NN_OP_EMBEDDING_GRAD, k->n_in, in,
                         (int64_t[NN_MAX_IPARAMS]){k->out[0].shape[0]}, NULL);
    return out[0] ? NP_OK : nn_graph_status(g, err);
}

/* Indices below V; over a shard below 3V, with the offset below V: some indices fall before
 * the shard, some in it, some after it. */
static int64_t embedding_index_bound(const kc_kernel *k, int in)
{
    int64_t V = k->op == NN_OP_EMBEDDING ? k->in[0].shape[0] : k->out[0].shape[0];
    int idx = k->op == NN_OP_EMBEDDING ? 1 : 0;
    if (in == idx)
        return k->n_in == 3 ? 3 * V : V;
    return in == 2 ? V : 0;
}

static const kc_attr_def embedding_keys[] = {
    {"shape", KC_ATTR_SHAPE, KC_REQUIRED, 0, 0, "the indices' shape, AxB..."},
    {"vocab", KC_ATTR_INT, 32000, 1, (1 << 24) - 1, "table rows V"},
    {"dim", KC_ATTR_INT, 4096, 1, 65535, "row width D"},
    {"dtype", KC_ATTR_DTYPE, NN_BF16, 0, 0, "the table's element type"},
    {"index", KC_ATTR_DTYPE, NN_I32, 0, 0, "the indices' element type (i32 or i8)"},
    {"shard", KC_ATTR_BOOL, 0, 0, 1, "a vocabulary shard: a third input, the i32 offset of its "
     "first row"},
};

static np_status embedding_build(kc_prog *p, const kc_spec *s, kc_kernel *k, np_err *err)
{
    const kc_spec_val *sh = kc_spec_get(s, "shape"), *dt = kc_spec_get(s, "dtype");
    const kc_spec_val *v = kc_spec_get(s, "vocab"), *d = kc_spec_get(s, "dim");
    const kc_spec_val *it = kc_spec_get(s, "index"), *sd = kc_spec_get(s, "shard");
    if (!sh || !dt || !v || !d || sh->ndim < 1 || sh->ndim >= KC_MAX_DIMS)
        return np_err_set(err, NP_ERR_MISSING, "%s: shape=AxB... is needed", nn_op_name(s->op));
    int64_t rows[KC_MAX_DIMS], tab[2] = {v->i, d->i};
    for (int i = 0; i < sh->ndim; i++)
        rows[i] = sh->shape[i];
    rows[sh->ndim] = d->i;
    nn_dtype t = (nn_dtype)dt->i, itt = it ? (nn_dtype)it->i : NN_I32;
    k->n_in = sd && sd->i ? 3 : 2, k->n_out = 1;
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
    if (k->n_in == 3 && kc_spec_tensor(p, "OFFSET", NN_I32, 0, NULL, &k->in[2], err))
        return err->status;
    return NP_OK;
}

const kc_kernel_def kc_embedding_def = {
    .op = NN_OP_EMBEDDING, .n_in = -1, .n_out = 1, .compile = embedding_compile,
    .reference = embedding_reference,
    .keys = embedding_keys, .n_keys = sizeof embedding_keys / sizeof embedding_keys[0],
    .build = embedding_build, .index_bound = embedding_index_bound,
    .doc = "dma.gather of the table's rows straight into the output, the indices read from HBM "
           "(over a vocabulary shard: the offset subtracted by the vector unit, rows outside "
           "skipped as zeros)",
};

const kc_kernel_def kc_embedding_grad_def = {
    .op = NN_OP_EMBEDDING_GRAD, .n_in = -1, .n_out = 1, .compile = embedding_grad_compile,
    .reference = embedding_reference,
    .keys = embedding_keys, .n_keys = sizeof embedding_keys / sizeof embedding_keys[0],
    .build = embedding_build, .index_bound = embedding_index_bound,
    .doc = "zeroed table, dma.scatter red=add of dy's rows in index order (16-bit: into fp32, "
           "converted once; over a vocabulary shard: rows outside dropped)",
};
