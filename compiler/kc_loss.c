/* kc_loss.c — cross-entropy (logits [..., C], integer labels [...] -> the mean over rows of
 * log-sum-exp - the label's logit) and its gradient ((softmax - onehot(label)) x dy / rows),
 * on the row schedule (kc_row.h): the logits are read once.
 *
 * Per core, before its tiles: its labels (int32, or int8 converted) become two flat indices
 * per row — i x ld + label (into the logits tile in HBM) and i x C + label (into the packed
 * output tile) — relative to the tile's first row, with an iota built by doubling. Per tile:
 *
 *   load   the logits tile, and dma.gather of each row's label logit x[i][label_i]
 *   work   m = rmax(x); E = fexp(x - m), s = its row sums; lse = m + log s
 *          forward:   acc += rsum(lse - x[label])
 *          gradient:  y = fma(E x (dy / (rows s)) + 0); q = (exp(x[label] - lse) - 1) x dy / rows
 *   store  gradient: dma.scatter of q over each row's label element of y's tile, then y
 *
 * so every element of the gradient is rounded once. The forward's per-core sums are combined
 * through an HBM buffer of the kernel's own after a barrier, by the first core, which scales
 * by 1 / rows and writes the scalar.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kc_row.h"

typedef struct kce {
    bool grad;
    isa_dtype dt, ot, lt;     /* logits, output, labels */
    uint64_t C, rows;
    int64_t ld, ldy;
    uint64_t lab_addr, dy_addr;
    uint64_t W, nc;           /* chunk width and chunks (1: whole rows) */
    uint64_t x, y;            /* streaming: the logits' and the gradient's HBM addresses */
    uint32_t core0;
    struct kce_core {
        unsigned rv;          /* register at the tile's flat indices */
        uint64_t one, zero, kdy, nkdy, acc;
        uint64_t flat_h, flat_s, E, m, mf, s, t1, t2, t3, picked[2], q[2];
        uint64_t row0, rows;  /* the core's rows */
        uint64_t M, S, P;     /* streaming: per row of the core, the running max and sum and
                                 the label's logit (fp32) */
        uint64_t flat_y, qv;  /* streaming gradient: i x ldy / e + label over the core's rows,
                                 and the label elements' values */
    } pc[KC_ROW_MAX_CORES];
} kce;

/* v[0 .. n) = i x step, int32, by doubling (log2 n instructions). */
static void iota(kc_ctx *x, uint64_t v, uint64_t n, uint64_t step)
{
    krw_fill(x, v, 0.0f, 1, ISA_DTYPE_INT32);
    for (uint64_t k = 1; k < n; k *= 2)
        krw_scalar(x, ISA_OP_VPU_ADDS, v + 4 * k, v, (float)(k * step), k < n - k ? k : n - k,
                  ISA_DTYPE_INT32);
}

static void ce_prologue(kc_ctx *x, void *ctx, uint32_t core, uint64_t row0, uint64_t rows,
                        uint64_t tr, const unsigned *xreg)
{
    kce *k = ctx;
    struct kce_core *b = KC_ROW_PC(k, core);
    b->rv = xreg[0];
    const isa_dtype F = ISA_DTYPE_FP32, I = ISA_DTYPE_INT32;
    uint64_t tiles = (rows + tr - 1) / tr, n = tiles * tr, ee = isa_dtype_size[k->dt];
    b->one = krw_alloc(x, 4), b->zero = krw_alloc(x, 4);
    krw_fill(x, b->one, 1.0f, 1, F);
    krw_fill(x, b->zero, 0.0f, 1, F);
    /* the labels, as int32 */
    unsigned s, s2; /* DMA -> VPU, VPU -> DMA */
    kc_sem_alloc(x, &s);
    kc_sem_alloc(x, &s2);
    uint64_t raw = krw_alloc(x, n * isa_dtype_size[k->lt]);
    uint64_t lab = k->lt == I ? raw : krw_alloc(x, n * 4);
    krw_copy(x, isa_spad(0, raw), isa_hbm(0, k->lab_addr + row0 * isa_dtype_size[k->lt]), k->lt,
            rows, 1, 0, 0);
    x->res->hbm_read_bytes += rows * isa_dtype_size[k->lt];
    if (k->grad) {
        b->kdy = krw_alloc(x, 4), b->nkdy = krw_alloc(x, 4);
        krw_load_f32(x, b->kdy, b->nkdy, k->dy_addr, 1, k->dt);
    }
    krw_signal(x, ISA_UNIT_DMA, s);
    krw_wait(x, ISA_UNIT_VPU, s);
    if (k->lt != I)
        krw_cast(x, lab, raw, rows, I, k->lt);
    if (rows < n) /* the last tile's rows past the end: a valid index */
        krw_fill(x, lab + 4 * rows, 0.0f, n - rows, I);
    /* flat indices: + i x ld / e (the HBM tile) and + i x C (the packed output tile) */
    uint64_t io = krw_alloc(x, tr * 4);
    b->flat_h = krw_alloc(x, n * 4);
    iota(x, io, tr, (uint64_t)k->ld / ee);
    krw_binary(x, ISA_OP_VPU_ADD, b->flat_h, lab, io, tiles, tr, I, ISA_BCAST_ROW);
    b->row0 = row0, b->rows = rows;
    if (k->nc > 1) {
        b->M = krw_alloc(x, n * 4), b->S = krw_alloc(x, n * 4), b->P = krw_alloc(x, n * 4);
        if (k->grad) { /* flat indices into the core's rows of the gradient in HBM */
            uint64_t ioa = krw_alloc(x, n * 4);
            b->flat_y = krw_alloc(x, n * 4), b->qv = krw_alloc(x, n * isa_dtype_size[k->ot]);
            iota(x, ioa, n, (uint64_t)k->ldy / isa_dtype_size[k->ot]);
            krw_binary(x, ISA_OP_VPU_ADD, b->flat_y, lab, ioa, 1, n, I, ISA_BCAST_FULL);
        }
    }
    if (k->grad && k->nc > 1) {
        krw_scalar(x, ISA_OP_VPU_MULS, b->kdy, b->kdy, (float)(1.0 / (double)k->rows), 1, F);
        krw_scalar(x, ISA_OP_VPU_MULS, b->nkdy, b->kdy, -1.0f, 1, F);
    } else if (k->grad) {
        b->flat_s = krw_alloc(x, n * 4);
        iota(x, io, tr, k->C);
        krw_binary(x, ISA_OP_VPU_ADD, b->flat_s, lab, io, tiles, tr, I, ISA_BCAST_ROW);
        krw_scalar(x, ISA_OP_VPU_MULS, b->kdy, b->kdy, (float)(1.0 / (double)k->rows), 1, F);
        krw_scalar(x, ISA_OP_VPU_MULS, b->nkdy, b->kdy, -1.0f, 1, F);
    } else {
        b->acc = krw_alloc(x, 4);
        krw_fill(x, b->acc, 0.0f, 1, F);
    }
    /* the first gather reads the indices: after them */
    krw_signal(x, ISA_UNIT_VPU, s2);
    krw_wait(x, ISA_UNIT_DMA, s2);
    b->E = krw_alloc(x, tr * k->W * (k->grad ? 4 : ee));
    b->m = krw_alloc(x, tr * 4), b->mf = krw_alloc(x, tr * 4), b->s = krw_alloc(x, tr * 4);
    b->t1 = krw_alloc(x, tr * 4), b->t2 = krw_alloc(x, tr * 4), b->t3 = krw_alloc(x, tr * 4);
    for (int i = 0; i < 2; i++) {
        b->picked[i] = krw_alloc(x, tr * ee);
        if (k->grad)
            b->q[i] = krw_alloc(x, tr * isa_dtype_size[k->ot]);
    }
}

static void ce_load(kc_ctx *x, void *ctx, const kc_row_tile *t)
{
    kce *k = ctx;
    if (t->pass) /* streaming: the first pass (chunk 0, at the rows' starts) gathers */
        return;
    const struct kce_core *b = KC_ROW_PC(k, t->core);
    uint64_t ee = isa_dtype_size[k->dt];
    ISA_EMIT(x->e, DMA_GATHER, isa_spad(0, b->picked[t->parity]),
             isa_hbm(t->in_reg[0], t->in_off[0]), isa_spad(b->rv, b->flat_h + (uint64_t)t->xoff[0]),
             isa_enum(k->dt), isa_imm(1), isa_imm((int64_t)t->rows),
             isa_imm((int64_t)(t->rows * ((uint64_t)k->ld / ee))), .src_s1 = isa_imm((int64_t)ee));
}

static void ce_store(kc_ctx *x, void *ctx, const kc_row_tile *t)
{
    kce *k = ctx;
    const struct kce_core *b = KC_ROW_PC(k, t->core);
    uint64_t eo = isa_dtype_size[k->ot];
    ISA_EMIT(x->e, DMA_SCATTER, isa_spad(0, t->out[0]), isa_spad(0, b->q[t->parity]),
             isa_spad(b->rv, b->flat_s + (uint64_t)t->xoff[0]), isa_enum(k->ot), isa_imm(1),
             isa_imm((int64_t)t->rows), isa_imm((int64_t)(t->rows * k->C)),
             .dst_s1 = isa_imm((int64_t)eo), .src_s1 = isa_imm((int64_t)eo));
}

/* Rows too wide for the scratchpad: passes 0 .. nc-1 keep each row's running max M and sum S
 * (online, as softmax's) and the label's logit P (gathered by the first); the forward adds
 * lse - P of the tile's rows at the last chunk; the gradient's passes nc .. 2nc-1 write
 * exp(x - lse) dy / rows per chunk (the label elements are put right after the passes). */
static void ce_work_stream(kc_ctx *x, const kce *k, const struct kce_core *b,
                           const kc_row_tile *t)
{
    const isa_dtype F = ISA_DTYPE_FP32;
    const isa_bcast S = ISA_BCAST_SCALAR, C = ISA_BCAST_COL, T = ISA_BCAST_FULL;
    uint64_t R = t->rows, in = t->in[0], c = t->pass % k->nc, w = k->C - c * k->W;
    w = w < k->W ? w : k->W;
    uint64_t M = KRW_AT(b->rv, b->M + (uint64_t)t->xoff[0]);
    uint64_t Sv = KRW_AT(b->rv, b->S + (uint64_t)t->xoff[0]);
    uint64_t P = KRW_AT(b->rv, b->P + (uint64_t)t->xoff[0]);
    if (t->pass >= k->nc) { /* gradient: y = exp(x - lse) dy / rows */
        krw_unary(x, ISA_OP_VPU_LOG, b->t2, Sv, R, F);
        krw_binary(x, ISA_OP_VPU_ADD, b->t2, b->t2, M, 1, R, F, T);
        krw_scalar(x, ISA_OP_VPU_MULS, b->t2, b->t2, -1.0f, R, F);                /* -lse */
        krw_fma(x, ISA_OP_VPU_FEXP, b->E, in, b->one, b->t2, R, w, k->dt, F, S, C, -1);
        krw_fma(x, ISA_OP_VPU_FMA, t->out[0], b->E, b->kdy, b->zero, R, w, F, k->ot, S, S, -1);
        return;
    }
    ISA_EMIT(x->e, VPU_RMAX, isa_spad(0, k->dt == F ? b->mf : b->m), isa_spad(0, in),
             isa_imm((int64_t)R), isa_imm((int64_t)w), isa_enum(k->dt));
    if (k->dt != F)
        krw_cast(x, b->mf, b->m, R, F, k->dt);
    if (c == 0) { /* M = mc; S = sum exp(x - M); P = the gathered label logits */
        krw_unary(x, ISA_OP_VPU_COPY, M, b->mf, R, F);
        krw_scalar(x, ISA_OP_VPU_MULS, b->t1, b->mf, -1.0f, R, F);
        krw_fma(x, ISA_OP_VPU_FEXP, b->E, in, b->one, b->t1, R, w, k->dt, k->grad ? F : k->dt,
                S, C, (int64_t)Sv);
        if (k->dt != F)
            krw_cast(x, P, b->picked[t->parity], R, F, k->dt);
        else
            krw_unary(x, ISA_OP_VPU_COPY, P, b->picked[t->parity], R, F);
    } else {
        krw_binary(x, ISA_OP_VPU_MAX, b->t2, M, b->mf, 1, R, F, T);                /* M' */
        krw_scalar(x, ISA_OP_VPU_MULS, b->t1, b->t2, -1.0f, R, F);                /* -M' */
        krw_fma(x, ISA_OP_VPU_FEXP, b->t3, M, b->one, b->t1, 1, R, F, F, S, T, -1); /* e^(M-M') */
        krw_binary(x, ISA_OP_VPU_MUL, Sv, Sv, b->t3, 1, R, F, T);
        krw_fma(x, ISA_OP_VPU_FEXP, b->E, in, b->one, b->t1, R, w, k->dt, k->grad ? F : k->dt,
                S, C, (int64_t)b->s);
        krw_binary(x, ISA_OP_VPU_ADD, Sv, Sv, b->s, 1, R, F, T);
        krw_unary(x, ISA_OP_VPU_COPY, M, b->t2, R, F);
    }
    if (k->grad || c + 1 < k->nc)
        return;
    /* forward, the last chunk: acc += sum over the tile's rows of lse - P */
    krw_unary(x, ISA_OP_VPU_LOG, b->t2, Sv, R, F);
    krw_binary(x, ISA_OP_VPU_ADD, b->t2, b->t2, M, 1, R, F, T);
    krw_binary(x, ISA_OP_VPU_SUB, b->t2, b->t2, P, 1, R, F, T);
    ISA_EMIT(x->e, VPU_RSUM, isa_spad(0, b->t1), isa_spad(0, b->t2), isa_imm(1),
             isa_imm((int64_t)R), isa_enum(F));
    krw_binary(x, ISA_OP_VPU_ADD, b->acc, b->acc, b->t1, 1, 1, F, T);
}

static void ce_pass(kc_ctx *x, void *ctx, unsigned pass, kc_row_plan *p)
{
    (void)x;
    kce *k = ctx;
    if (k->nc == 1)
        return;
    uint64_t c = pass % k->nc, w = k->C - c * k->W;
    w = w < k->W ? w : k->W;
    p->in[0].addr = k->x + c * k->W * isa_dtype_size[k->dt], p->in[0].width = w;
    if (pass < k->nc) {
        p->n_out = 0;
    } else {
        p->out[0].addr = k->y + c * k->W * isa_dtype_size[k->ot];
        p->out[0].width = w;
    }
}

/* The streamed gradient's label elements, after the passes (whose stores the DMA queues have
 * waited for): per core q = (exp(P - lse) - 1) dy / rows of its rows, scattered into the
 * gradient in HBM at i x ldy / e + label. */
static void ce_stream_labels(kc_ctx *x, const kce *k, const kc_row_plan *p)
{
    const isa_dtype F = ISA_DTYPE_FP32;
    const isa_bcast S = ISA_BCAST_SCALAR, T = ISA_BCAST_FULL;
    for (uint32_t c = k->core0; c < k->core0 + p->cores_used; c++) {
        const struct kce_core *b = KC_ROW_PC(k, c);
        uint64_t n = b->rows, eo = isa_dtype_size[k->ot];
        kc_core(x, c);
        uint64_t lse = krw_alloc(x, n * 4), pl = krw_alloc(x, n * 4);
        unsigned sv, ss;
        kc_sem_alloc(x, &sv), kc_sem_alloc(x, &ss);
        krw_unary(x, ISA_OP_VPU_LOG, lse, b->S, n, F);
        krw_binary(x, ISA_OP_VPU_ADD, lse, lse, b->M, 1, n, F, T);
        krw_scalar(x, ISA_OP_VPU_MULS, lse, lse, -1.0f, n, F);                    /* -lse */
        krw_fma(x, ISA_OP_VPU_FEXP, pl, b->P, b->one, lse, 1, n, F, F, S, T, -1); /* p[label] */
        krw_fma(x, ISA_OP_VPU_FMA, b->qv, pl, b->kdy, b->nkdy, 1, n, F, k->ot, S, S, -1);
        krw_signal(x, ISA_UNIT_VPU, sv);
        krw_wait(x, ISA_UNIT_DMA, sv);
        ISA_EMIT(x->e, DMA_SCATTER, isa_hbm(0, k->y + b->row0 * (uint64_t)k->ldy),
                 isa_spad(0, b->qv), isa_spad(0, b->flat_y), isa_enum(k->ot), isa_imm(1),
                 isa_imm((int64_t)n), isa_imm((int64_t)(n * ((uint64_t)k->ldy / eo))),
                 .dst_s1 = isa_imm((int64_t)eo), .src_s1 = isa_imm((int64_t)eo));
        krw_signal(x, ISA_UNIT_DMA, ss);
        krw_wait(x, ISA_UNIT_DMA, ss);
        x->res->hbm_write_bytes += n * eo;
    }
}

static void ce_work(kc_ctx *x, void *ctx, const kc_row_tile *t)
{
    kce *k = ctx;
    const struct kce_core *b = KC_ROW_PC(k, t->core);
    if (k->nc > 1) {
        ce_work_stream(x, k, b, t);
        return;
    }
    const isa_dtype F = ISA_DTYPE_FP32;
    const isa_bcast S = ISA_BCAST_SCALAR, C = ISA_BCAST_COL, T = ISA_BCAST_FULL;
    uint64_t R = t->rows, in = t->in[0];
    ISA_EMIT(x->e, VPU_RMAX, isa_spad(0, k->dt == F ? b->mf : b->m), isa_spad(0, in),
             isa_imm((int64_t)R), isa_imm((int64_t)k->C), isa_enum(k->dt));
    if (k->dt != F)
        krw_cast(x, b->mf, b->m, R, F, k->dt);
    krw_scalar(x, ISA_OP_VPU_MULS, b->t1, b->mf, -1.0f, R, F);
    krw_fma(x, ISA_OP_VPU_FEXP, b->E, in, b->one, b->t1, R, k->C, k->dt, k->grad ? F : k->dt, S,
           C, (int64_t)b->s);
    krw_unary(x, ISA_OP_VPU_LOG, b->t2, b->s, R, F);
    krw_binary(x, ISA_OP_VPU_ADD, b->t2, b->t2, b->mf, 1, R, F, T);          /* lse */
    uint64_t pf = b->picked[t->parity];
    if (k->dt != F) {
        krw_cast(x, b->m, pf, R, F, k->dt);
        pf = b->m;
    }
    if (!k->grad) {
        krw_binary(x, ISA_OP_VPU_SUB, b->t2, b->t2, pf, 1, R, F, T);
        ISA_EMIT(x->e, VPU_RSUM, isa_spad(0, b->t1), isa_spad(0, b->t2), isa_imm(1),
                 isa_imm((int64_t)R), isa_enum(F));
        krw_binary(x, ISA_OP_VPU_ADD, b->acc, b->acc, b->t1, 1, 1, F, T);
        return;
    }
    krw_unary(x, ISA_OP_VPU_RECIP, b->t1, b->s, R, F);
    krw_binary(x, ISA_OP_VPU_MUL, b->t1, b->t1, b->kdy, 1, R, F, S);
    krw_fma(x, ISA_OP_VPU_FMA, t->out[0], b->E, b->t1, b->zero, R, k->C, F, k->ot, C, S, -1);
    krw_scalar(x, ISA_OP_VPU_MULS, b->t2, b->t2, -1.0f, R, F);                 /* -lse */
    krw_fma(x, ISA_OP_VPU_FEXP, b->s, pf, b->one, b->t2, 1, R, F, F, S, T, -1); /* p[label] */
    krw_fma(x, ISA_OP_VPU_FMA, b->q[t->parity], b->s, b->kdy, b->nkdy, 1, R, F, k->ot, S, S, -1);
}

static np_status ce_compile(kc_ctx *x)
{
    const kc_kernel *kk = x->k;
    const kc_tensor *X = &kk->in[0], *L = &kk->in[1], *Y = &kk->out[0];
    kce k = {.core0 = kk->place.core0, .grad = kk->op == NN_OP_CROSS_ENTROPY_GRAD};
    if (!kc_is_float(X->dtype) || !kc_is_float(Y->dtype))
        return kc_fail(x, NP_ERR_INCONSISTENT, "logits are %s, out %s: float types only",
                       nn_dtype_name(X->dtype), nn_dtype_name(Y->dtype));
    if (L->dtype != NN_I32 && L->dtype != NN_I8)
        return kc_fail(x, NP_ERR_INCONSISTENT, "labels are %s: i32 or i8", nn_dtype_name(L->dtype));
    k.dt = kc_isa_dtype(X->dtype), k.ot = kc_isa_dtype(Y->dtype), k.lt = kc_isa_dtype(L->dtype);
    if (kc_rows_of(x, X, "logits", &k.rows, &k.C, &k.ld) != NP_OK)
        return kc_status(x);
    bool ok = L->ndim == X->ndim - 1;
    for (int d = 0; ok && d < L->ndim; d++)
        ok = L->shape[d] == X->shape[d];
    if (!ok)
        return kc_fail(x, NP_ERR_INCONSISTENT, "labels must have the logits' shape without the "
                       "last dim");
    if (kc_tensor_bytes(L) != kc_tensor_extent(L))
        return kc_fail(x, NP_ERR_INCONSISTENT, "the labels must be packed");
    k.lab_addr = L->addr;
    if ((uint64_t)k.ld % isa_dtype_size[k.dt])
        return kc_fail(x, NP_ERR_INCONSISTENT, "the logits' row stride is not a whole number of "
                       "elements");
    kc_row_plan p = {.rows = k.rows, .n_in = 1, .work = ce_work, .prologue = ce_prologue,
                     .load_more = ce_load, .pass = ce_pass, .ctx = &k,
                     .tr = (uint64_t)kc_attr_int(x, "tr")};
    k.x = X->addr, k.y = Y->addr, k.W = k.C, k.nc = 1;
    p.in[0] = (kc_row_stream){X->addr, k.ld, k.dt, k.C, 1, 0};
    uint64_t ee = isa_dtype_size[k.dt];
    if (k.grad) {
        if (!kc_same_shape(X, Y))
            return kc_fail(x, NP_ERR_INCONSISTENT, "out must have the logits' shape");
        if (kc_tensor_numel(&kk->in[2]) != 1 || kk->in[2].dtype != X->dtype)
            return kc_fail(x, NP_ERR_INCONSISTENT, "dy must be a scalar of the logits' dtype");
        uint64_t yr, yw;
        int64_t yld;
        if (kc_rows_of(x, Y, "out", &yr, &yw, &yld) != NP_OK)
            return kc_status(x);
        k.dy_addr = kk->in[2].addr, k.ldy = yld;
        p.n_out = 1;
        p.out[0] = (kc_row_stream){Y->addr, yld, k.ot, k.C, 1, 0};
        p.store_more = ce_store;
    } else if (kc_tensor_numel(Y) != 1) {
        return kc_fail(x, NP_ERR_INCONSISTENT, "out must be a scalar");
    }
    /* the gathers' table: TR rows of ld / e one-element rows, within the limit field */
    uint64_t per = (uint64_t)k.ld / ee;
    p.tr_max = ((1u << 24) - 1) / (per > k.C ? per : k.C);
    const kc_place *pl = &kk->place;
    uint32_t cores = pl->n_cores ? pl->n_cores : 1;
    cores = k.rows < cores ? (uint32_t)k.rows : cores;
    /* whole rows when one fits; else chunks of W columns, the per-row state of the core's
     * rows (labels, indices, M, S, P) in the scratchpad */
    uint64_t rows_core = (k.rows + cores - 1) / cores, chunk = (uint64_t)kc_attr_int(x, "chunk");
    uint64_t per_col = 2 * ee + (k.grad ? 2 * (uint64_t)isa_dtype_size[k.ot] + 4 : ee);
    for (k.W = chunk ? chunk : k.C;;) {
        k.nc = (k.C + k.W - 1) / k.W;
        p.in[0].width = k.W;
        if (k.grad)
            p.out[0].width = k.W;
        p.work_row_bytes = k.W * (k.grad ? 4 : ee) + 9 * 4 + 2 * ee + 2 * 4 + 12 * 64;
        p.fixed_bytes = 1024 + (k.nc > 1 ? rows_core * 4 * 12 + 8 * 64 : 0);
        if (k.W <= 65535 && kc_rows_fit(x, &p, pl->core0) >= 1)
            break;
        if (kc_chunk_narrow(x, pl->core0, chunk, k.C, "classes", rows_core * 4 * 12 + 8192,
                            per_col + 1, &k.W) != NP_OK)
            return kc_status(x);
    }
    if (k.nc > 1) {
        p.n_pass = (unsigned)(k.grad ? 2 * k.nc : k.nc);
        p.store_more = NULL; /* the label elements after the passes (ce_stream_labels) */
        if (k.grad && rows_core * ((uint64_t)k.ldy / isa_dtype_size[k.ot]) >= (1u << 24))
            return kc_fail(x, NP_ERR_RANGE, "a core's %" PRIu64 " rows of %" PRIu64 " classes: "
                           "their label elements are beyond one scatter's reach (2^24)",
                           rows_core, k.C);
    }
    p.n_xreg = 1, p.xstep[0] = 4;
    uint64_t wsa = 0;
    if (!k.grad && cores > 1 && kc_prog_bss(x->prog, NULL, 64 * cores, &wsa, NULL) != NP_OK)
        return kc_fail(x, NP_ERR_NOMEM, "no HBM for the per-core sums");
    if (kc_rows_emit(x, &p) != NP_OK)
        return kc_status(x);
    if (k.grad && k.nc > 1)
        ce_stream_labels(x, &k, &p);
    x->res->hbm_read_bytes += k.rows * ee;      /* the gathered label logits */
    x->res->flops = 5 * k.rows * k.C;
    snprintf(x->res->schedule, sizeof x->res->schedule, "tiles of %" PRIu64 " rows on %" PRIu32
             " cores%s", p.tr_used, p.cores_used, !k.grad && cores > 1 ? ", sums combined by "
             "core 0 after a barrier" : "");
    if (k.nc > 1) {
        size_t n = strlen(x->res->schedule);
        snprintf(x->res->schedule + n, sizeof x->res->schedule - n, ", rows streamed in %" PRIu64
                 " chunks of %" PRIu64 " columns", k.nc, k.W);
    }
    if (k.grad)
        return kc_status(x);
    /* the per-core sums -> the mean; semaphores one per direction (DMA -> VPU, VPU -> DMA,
     * DMA -> DMA) */
    unsigned sd, sv, ss;
    const uint64_t one_row = 64; /* each core's sum in a 64-byte slot of its own */
    for (uint32_t c = pl->core0; c < pl->core0 + cores; c++) {
        kc_core(x, c);
        kc_sem_alloc(x, &sv);
        kc_sem_alloc(x, &ss);
        krw_signal(x, ISA_UNIT_VPU, sv);
        krw_wait(x, ISA_UNIT_DMA, sv);
        if (cores > 1) {
            krw_copy(x, isa_hbm(0, wsa + (c - pl->core0) * one_row),
                    isa_spad(0, KC_ROW_PC(&k, c)->acc),
                    ISA_DTYPE_FP32, 1, 1, 0, 0);
            krw_signal(x, ISA_UNIT_DMA, ss);
            krw_wait(x, ISA_UNIT_DMA, ss);
        }
    }
    if (cores > 1) {
        np_err e = {0};
        if (kc_barrier(x->prog, &e) != NP_OK)
            return kc_status(x);
        kc_core(x, pl->core0);
        kc_sem_alloc(x, &sd);
        kc_sem_alloc(x, &sv);
        kc_sem_alloc(x, &ss);
        uint64_t part = krw_alloc(x, cores * 4);
        krw_copy(x, isa_spad(0, part), isa_hbm(0, wsa), ISA_DTYPE_FP32, 1, cores, 0,
                (int64_t)one_row);
        krw_signal(x, ISA_UNIT_DMA, sd);
        krw_wait(x, ISA_UNIT_VPU, sd);
        ISA_EMIT(x->e, VPU_RSUM, isa_spad(0, KC_ROW_PC(&k, pl->core0)->acc), isa_spad(0, part),
                 isa_imm(1),
                 isa_imm((int64_t)cores), isa_enum(ISA_DTYPE_FP32));
        x->res->hbm_read_bytes += cores * 4;
        x->res->hbm_write_bytes += cores * 4;
    } else {
        kc_core(x, pl->core0);
        kc_sem_alloc(x, &sv);
        kc_sem_alloc(x, &ss);
    }
    uint64_t o = krw_alloc(x, 4), acc = KC_ROW_PC(&k, pl->core0)->acc;
    krw_scalar(x, ISA_OP_VPU_MULS, acc, acc, (float)(1.0 / (double)k.rows), 1, ISA_DTYPE_FP32);
    krw_cast(x, o, acc, 1, k.ot, ISA_DTYPE_FP32);
    krw_signal(x, ISA_UNIT_VPU, sv);
    krw_wait(x, ISA_UNIT_DMA, sv);
    krw_copy(x, isa_hbm(0, Y->addr), isa_spad(0, o), k.ot, 1, 1, 0, 0);
    krw_signal(x, ISA_UNIT_DMA, ss);
    krw_wait(x, ISA_UNIT_DMA, ss);
    x->res->hbm_write_bytes += isa_dtype_size[k.ot];
    return kc_status(x);
}

/* ---- the table rows -------------------------------------------------------------------------- */

static np_status ce_reference(nn_graph *g, const kc_kernel *k, nn_tensor *const *in,
                              nn_tensor **out, np_err *err)
{
    out[0] = k->op == NN_OP_CROSS_ENTROPY ? nn_cross_entropy(g, in[0], in[1])
                                          : nn_node(g, k->op, 3, in, NULL, NULL);
    return out[0] ? NP_OK : nn_graph_status(g, err);
}

static int64_t ce_index_bound(const kc_kernel *k, int in)
{
    return in == 1 ? k->in[0].shape[k->in[0].ndim - 1] : 0;
}

static const kc_attr_def ce_keys[] = {
    {"shape", KC_ATTR_SHAPE, KC_REQUIRED, 0, 0, "the logits' shape, AxBx... (classes last)"},
    {"dtype", KC_ATTR_DTYPE, NN_BF16, 0, 0, "the logits' element type"},
    {"labels", KC_ATTR_DTYPE, NN_I32, 0, 0, "the labels' element type (i32 or i8)"},
};

static np_status ce_build(kc_prog *p, const kc_spec *s, kc_kernel *k, np_err *err)
{
    const kc_spec_val *sh = kc_spec_get(s, "shape"), *dt = kc_spec_get(s, "dtype");
    const kc_spec_val *lt = kc_spec_get(s, "labels");
    if (!sh || !dt || sh->ndim < 1)
        return np_err_set(err, NP_ERR_MISSING, "%s: shape=AxBx... is needed", nn_op_name(s->op));
    bool grad = s->op == NN_OP_CROSS_ENTROPY_GRAD;
    k->n_in = grad ? 3 : 2, k->n_out = 1;
    if (kc_spec_tensor(p, "LOGITS", (nn_dtype)dt->i, sh->ndim, sh->shape, &k->in[0], err) ||
        kc_spec_tensor(p, "LABELS", lt ? (nn_dtype)lt->i : NN_I32, sh->ndim - 1, sh->shape,
                       &k->in[1], err) ||
        (grad && kc_spec_tensor(p, "DY", (nn_dtype)dt->i, 0, NULL, &k->in[2], err)) ||
        kc_spec_tensor(p, "OUT", (nn_dtype)dt->i, grad ? sh->ndim : 0, sh->shape, &k->out[0], err))
        return err->status;
    return NP_OK;
}

static const kc_attr_def ce_attrs[] = {
    {"tr", KC_ATTR_INT, 0, 0, 65535, "tile: rows per tile (0: chosen)"},
    {"chunk", KC_ATTR_INT, 0, 0, 65535, "tile: columns per chunk of a streamed row (0: whole "
     "rows when they fit)"},
};

const kc_kernel_def kc_cross_entropy_def = {
    .op = NN_OP_CROSS_ENTROPY, .n_in = 2, .n_out = 1,
    .attrs = ce_attrs, .n_attrs = sizeof ce_attrs / sizeof ce_attrs[0], .compile = ce_compile,
    .reference = ce_reference,
    .keys = ce_keys, .n_keys = sizeof ce_keys / sizeof ce_keys[0], .build = ce_build,
    .index_bound = ce_index_bound,
    .doc = "rows TR at a time: max, exp with its sums, the labels' logits gathered by DMA; "
           "per-core sums combined by core 0",
};

const kc_kernel_def kc_cross_entropy_grad_def = {
    .op = NN_OP_CROSS_ENTROPY_GRAD, .n_in = 3, .n_out = 1,
    .attrs = ce_attrs, .n_attrs = sizeof ce_attrs / sizeof ce_attrs[0], .compile = ce_compile,
    .reference = ce_reference,
    .keys = ce_keys, .n_keys = sizeof ce_keys / sizeof ce_keys[0], .build = ce_build,
    .index_bound = ce_index_bound,
    .doc = "rows TR at a time: softmax x dy / rows, the labels' elements scattered in by DMA "
           "before the store",
};
