/* kc_bnorm.c — batch norm over N and the spatial dims per channel of x [N, C, ...]:
 * training (batchnorm: the batch's statistics), its gradient op (batchnorm_grad (x, g = dy x
 * gamma)) and inference (batchnorm_infer: running mean and var given), on the row schedule
 * (kc_row.h), for x channels-last (C packed innermost, as conv2d writes it: rows are pixels,
 * columns channels) or NCHW (each (n, c) a row of the spatial extent S).
 *
 *   statistics pass (batchnorm, batchnorm_grad): sums per channel of xs = x - K (K: the
 *     channel's first element, a shift that keeps E[xs^2] - E[xs]^2 from cancelling), xs^2
 *     and, for the gradient, g and g xs — channels-last by column sums of each tile (vpu.csum)
 *     added up per core, NCHW by row sums (vpu.rdot) kept per row and folded per channel. With
 *     several cores each writes its sums to an HBM buffer of the kernel's own and, after a
 *     barrier, every core adds them all up.
 *   per channel (vectors of C): mean = K + s1 / n, var = s2 / n - (s1 / n)^2, rstd =
 *     rsqrt(var + eps); forward y = x a + b with a = gamma rstd, b = beta - mean a; gradient
 *     dx = g p + x q + r with p = rstd, q = -rstd^2 mgx, r = mean rstd^2 mgx - rstd mg
 *     (mg = sum g / n, mgx = rstd (sum g xs - (s1 / n) sum g) / n).
 *   normalizing pass: one fma per element (forward), two (gradient), the coefficients as rows
 *     (channels-last) or per-row columns (NCHW).
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kc_row.h"

#define KBN_STATS 4

typedef struct kbn {
    nn_op op;
    bool grad, infer, cl;       /* cl: channels-last */
    isa_dtype dt, ot, pdt;      /* x (and g), out, the parameters */
    uint64_t N, C, S, n;        /* n = N x S values per channel */
    uint64_t width, x;
    int64_t ld;
    uint64_t gamma, beta, mean, var; /* HBM, 0 when absent */
    float eps;
    unsigned nstat;
    uint64_t ws;                /* HBM: the cores' sums */
    uint32_t core0, cores;
    struct kbn_core {
        uint64_t row0, rows, local;  /* its rows; NCHW: local samples (rows / C) */
        unsigned rv;
        uint64_t one, zero, one_dt, stage;
        uint64_t K, nK, acc, co, t1, t2, t3;  /* [C]; acc: nstat x C; co: 3 x C */
        uint64_t rowv;               /* NCHW: per-row vectors (-K, nstat sums, 3 coefficients) */
        uint64_t xs, gf, xq;         /* work tiles, fp32 */
    } pc[KC_ROW_MAX_CORES];
} kbn;

/* NCHW per-row vector j of the core (rows_core fp32 each) for the tile at xoff. */
static uint64_t rowvec(const struct kbn_core *b, unsigned j, int64_t xoff)
{
    return KRW_AT(b->rv, b->rowv + j * b->rows * 4 + (uint64_t)xoff);
}

/* dst[local x C] = the [C] vector v in every row (an fma of any finite tile x 0 + v). */
static void spread(kc_ctx *x, const struct kbn_core *b, uint64_t dst, uint64_t v, uint64_t C)
{
    krw_fma(x, ISA_OP_VPU_FMA, dst, b->rowv, b->zero, v, b->local, C, ISA_DTYPE_FP32,
           ISA_DTYPE_FP32, ISA_BCAST_SCALAR, ISA_BCAST_ROW, -1);
}

/* Coefficients from the per-channel vectors: forward a, b into co[0], co[1]; gradient p, q, r
 * into co[0..2]. The statistics (acc) are the totals; infer: from mean and var given. */
static void coefficients(kc_ctx *x, kbn *k, struct kbn_core *b)
{
    const isa_dtype F = ISA_DTYPE_FP32;
    const isa_bcast T = ISA_BCAST_FULL;
    uint64_t C = k->C, a0 = b->acc, a1 = b->acc + C * 4, a2 = b->acc + 2 * C * 4,
             a3 = b->acc + 3 * C * 4;
    uint64_t co0 = b->co, co1 = b->co + C * 4, co2 = b->co + 2 * C * 4;
    float inv_n = (float)(1.0 / (double)k->n);
    uint64_t mean = b->t1, rstd = b->t2, tmp = b->t3;
    if (k->infer) { /* acc holds mean (a0) and var (a1) as loaded */
        krw_unary(x, ISA_OP_VPU_COPY, mean, a0, C, F);
        krw_scalar(x, ISA_OP_VPU_ADDS, rstd, a1, k->eps, C, F);
    } else {
        krw_scalar(x, ISA_OP_VPU_MULS, a0, a0, inv_n, C, F);            /* m1 = s1 / n */
        krw_binary(x, ISA_OP_VPU_MUL, tmp, a0, a0, 1, C, F, T);
        krw_scalar(x, ISA_OP_VPU_MULS, rstd, a1, inv_n, C, F);
        krw_binary(x, ISA_OP_VPU_SUB, rstd, rstd, tmp, 1, C, F, T);      /* var */
        krw_scalar(x, ISA_OP_VPU_ADDS, rstd, rstd, k->eps, C, F);
        krw_binary(x, ISA_OP_VPU_ADD, mean, a0, b->K, 1, C, F, T);       /* mean */
    }
    krw_unary(x, ISA_OP_VPU_RSQRT, rstd, rstd, C, F);
    if (!k->grad) { /* a = gamma rstd, b = beta - mean a */
        if (k->gamma)
            krw_binary(x, ISA_OP_VPU_MUL, co0, a2, rstd, 1, C, F, T); /* gamma loaded at a2 */
        else
            krw_unary(x, ISA_OP_VPU_COPY, co0, rstd, C, F);
        krw_binary(x, ISA_OP_VPU_MUL, tmp, mean, co0, 1, C, F, T);
        if (k->beta)
            krw_binary(x, ISA_OP_VPU_SUB, co1, a3, tmp, 1, C, F, T);  /* beta loaded at a3 */
        else
            krw_scalar(x, ISA_OP_VPU_MULS, co1, tmp, -1.0f, C, F);
        return;
    }
    /* mgx = rstd (sgx - m1 sg) / n; p = rstd; q = -rstd^2 mgx; r = mean rstd^2 mgx - rstd mg */
    krw_binary(x, ISA_OP_VPU_MUL, tmp, a0, a2, 1, C, F, T);
    krw_binary(x, ISA_OP_VPU_SUB, a3, a3, tmp, 1, C, F, T);
    krw_binary(x, ISA_OP_VPU_MUL, a3, a3, rstd, 1, C, F, T);
    krw_scalar(x, ISA_OP_VPU_MULS, a3, a3, inv_n, C, F);                  /* mgx */
    krw_unary(x, ISA_OP_VPU_COPY, co0, rstd, C, F);                       /* p */
    krw_binary(x, ISA_OP_VPU_MUL, tmp, rstd, rstd, 1, C, F, T);
    krw_binary(x, ISA_OP_VPU_MUL, tmp, tmp, a3, 1, C, F, T);              /* rstd^2 mgx */
    krw_scalar(x, ISA_OP_VPU_MULS, co1, tmp, -1.0f, C, F);                /* q */
    krw_binary(x, ISA_OP_VPU_MUL, co2, tmp, mean, 1, C, F, T);
    krw_scalar(x, ISA_OP_VPU_MULS, a2, a2, inv_n, C, F);                  /* mg */
    krw_binary(x, ISA_OP_VPU_MUL, tmp, rstd, a2, 1, C, F, T);
    krw_binary(x, ISA_OP_VPU_SUB, co2, co2, tmp, 1, C, F, T);             /* r */
}

/* NCHW: the coefficients as per-row vectors (rowv slots 1 + nstat ..). */
static void spread_coefficients(kc_ctx *x, const kbn *k, const struct kbn_core *b)
{
    if (k->cl)
        return;
    for (unsigned j = 0; j < (k->grad ? 3u : 2u); j++)
        spread(x, b, b->rowv + (1 + k->nstat + j) * b->rows * 4, b->co + j * k->C * 4, k->C);
}

static void bn_prologue(kc_ctx *x, void *ctx, uint32_t core, uint64_t row0, uint64_t rows,
                        uint64_t tr, const unsigned *xreg)
{
    kbn *k = ctx;
    struct kbn_core *b = KC_ROW_PC(k, core);
    const isa_dtype F = ISA_DTYPE_FP32;
    uint64_t C = k->C;
    b->row0 = row0, b->rows = rows, b->local = k->cl ? 0 : rows / C, b->rv = xreg[0];
    b->one = krw_alloc(x, 4), b->zero = krw_alloc(x, 4), b->one_dt = krw_alloc(x, 4);
    krw_fill(x, b->one, 1.0f, 1, F);
    krw_fill(x, b->zero, 0.0f, 1, F);
    krw_fill(x, b->one_dt, 1.0f, 1, k->dt);
    b->K = krw_alloc(x, C * 4), b->nK = krw_alloc(x, C * 4);
    b->acc = krw_alloc(x, KBN_STATS * C * 4), b->co = krw_alloc(x, 3 * C * 4);
    b->t1 = krw_alloc(x, C * 4), b->t2 = krw_alloc(x, C * 4), b->t3 = krw_alloc(x, C * 4);
    b->stage = krw_alloc(x, C * (isa_dtype_size[k->dt] > isa_dtype_size[k->pdt]
                                    ? isa_dtype_size[k->dt] : isa_dtype_size[k->pdt]));
    if (!k->cl)
        b->rowv = krw_alloc(x, (1 + k->nstat + 3) * rows * 4);
    b->xs = krw_alloc(x, tr * k->width * 4);
    if (k->grad)
        b->gf = krw_alloc(x, tr * k->width * 4);
    if (k->cl)
        b->xq = krw_alloc(x, tr * k->width * 4);
    ISA_EMIT(x->e, VPU_FILL, isa_spad(0, b->acc), isa_f32(0), isa_imm(KBN_STATS),
             isa_imm((int64_t)C), isa_enum(F));
    if (!k->cl) /* a finite tile for spread() */
        ISA_EMIT(x->e, VPU_FILL, isa_spad(0, b->rowv), isa_f32(0), isa_imm((int64_t)b->local),
                 isa_imm((int64_t)C), isa_enum(F));
    if (k->infer) { /* mean, var, gamma, beta into acc's slots 0..3 */
        uint64_t src[4] = {k->mean, k->var, k->gamma, k->beta};
        for (int j = 0; j < 4; j++)
            krw_load_f32(x, b->acc + (uint64_t)j * C * 4, b->stage, src[j], C, k->pdt);
        coefficients(x, k, b);
        spread_coefficients(x, k, b);
        return;
    }
    /* the shift: each channel's first element (channels-last: x's first row) */
    unsigned s;
    kc_sem_alloc(x, &s);
    krw_copy(x, isa_spad(0, b->stage), isa_hbm(0, k->x), k->dt, k->cl ? C : 1, k->cl ? 1 : C, 0,
            k->cl ? 0 : k->ld);
    krw_signal(x, ISA_UNIT_DMA, s);
    krw_wait(x, ISA_UNIT_VPU, s);
    krw_cast(x, b->K, b->stage, C, F, k->dt);
    krw_scalar(x, ISA_OP_VPU_MULS, b->nK, b->K, -1.0f, C, F);
    if (!k->cl)
        spread(x, b, b->rowv, b->nK, C); /* -K per row */
    x->res->hbm_read_bytes += C * isa_dtype_size[k->dt];
    if (!k->grad) { /* gamma and beta into acc's slots 2, 3 after the sums are taken */
        if (k->gamma)
            krw_load_f32(x, b->co + 2 * C * 4, b->stage, k->gamma, C, k->pdt);
        if (k->beta)
            krw_load_f32(x, b->t3, b->stage, k->beta, C, k->pdt);
    }
}

static void bn_work(kc_ctx *x, void *ctx, const kc_row_tile *t)
{
    kbn *k = ctx;
    const struct kbn_core *b = KC_ROW_PC(k, t->core);
    const isa_dtype F = ISA_DTYPE_FP32;
    const isa_bcast S = ISA_BCAST_SCALAR, W = ISA_BCAST_ROW, C = ISA_BCAST_COL, T = ISA_BCAST_FULL;
    uint64_t R = t->rows, w = k->width, in = t->in[0], g = k->grad ? t->in[1] : 0;
    bool stats = !k->infer && t->pass == 0;
    if (stats && k->cl) {
        krw_fma(x, ISA_OP_VPU_FMA, b->xs, in, b->one, b->nK, R, w, k->dt, F, S, W, -1);
        uint64_t terms[4] = {b->xs, b->xq, b->gf, b->xq};
        krw_binary(x, ISA_OP_VPU_MUL, b->xq, b->xs, b->xs, R, w, F, T);
        for (unsigned j = 0; j < k->nstat; j++) {
            if (j == 2)
                krw_fma(x, ISA_OP_VPU_FMA, b->gf, g, b->one, b->zero, R, w, k->dt, F, S, S, -1);
            if (j == 3)
                krw_binary(x, ISA_OP_VPU_MUL, b->xq, b->gf, b->xs, R, w, F, T);
            ISA_EMIT(x->e, VPU_CSUM, isa_spad(0, b->t1), isa_spad(0, terms[j]), isa_imm((int64_t)R),
                     isa_imm((int64_t)w), isa_enum(F));
            krw_binary(x, ISA_OP_VPU_ADD, b->acc + j * k->C * 4, b->acc + j * k->C * 4, b->t1, 1,
                      k->C, F, T);
        }
        return;
    }
    if (stats) { /* NCHW: row sums into the per-row vectors */
        krw_fma(x, ISA_OP_VPU_FMA, b->xs, in, b->one, rowvec(b, 0, t->xoff[0]), R, w, k->dt,
               F, S, C, -1);
        krw_rdot(x, rowvec(b, 1, t->xoff[0]), b->xs, b->one, R, w, F, F, S);
        krw_rdot(x, rowvec(b, 2, t->xoff[0]), b->xs, b->xs, R, w, F, F, T);
        if (k->grad) {
            krw_fma(x, ISA_OP_VPU_FMA, b->gf, g, b->one, b->zero, R, w, k->dt, F, S, S,
                   (int64_t)rowvec(b, 3, t->xoff[0]));
            krw_rdot(x, rowvec(b, 4, t->xoff[0]), b->xs, b->gf, R, w, F, F, T);
        }
        return;
    }
    /* normalize */
    uint64_t c0, c1, c2;
    isa_bcast bc = k->cl ? W : C;
    if (k->cl) {
        c0 = b->co, c1 = b->co + k->C * 4, c2 = b->co + 2 * k->C * 4;
    } else {
        c0 = rowvec(b, 1 + k->nstat, t->xoff[0]), c1 = rowvec(b, 2 + k->nstat, t->xoff[0]);
        c2 = rowvec(b, 3 + k->nstat, t->xoff[0]);
    }
    if (!k->grad) {
        krw_fma(x, ISA_OP_VPU_FMA, t->out[0], in, c0, c1, R, w, k->dt, k->ot, bc, bc, -1);
        return;
    }
    krw_fma(x, ISA_OP_VPU_FMA, b->xs, in, c1, c2, R, w, k->dt, F, bc, bc, -1);
    krw_fma(x, ISA_OP_VPU_FMA, t->out[0], g, c0, b->xs, R, w, k->dt, k->ot, bc, T, -1);
}

/* Before the normalizing pass: the cores' sums combined, the coefficients. */
static void bn_pass(kc_ctx *x, void *ctx, unsigned pass, kc_row_plan *p)
{
    kbn *k = ctx;
    const isa_dtype F = ISA_DTYPE_FP32;
    uint32_t cores = p->cores_used;
    if (k->infer) {
        p->n_in = k->grad ? 2 : 1;
        return;
    }
    if (pass == 0) { /* statistics: nothing written */
        p->n_out = 0;
        return;
    }
    uint64_t C = k->C, slot = k->nstat * C * 4;
    for (uint32_t i = 0; i < cores; i++) {
        struct kbn_core *b = &k->pc[i];
        kc_core(x, k->core0 + i);
        if (!k->cl) /* fold the per-row sums: [local x C] -> [C] */
            for (unsigned j = 0; j < k->nstat; j++)
                ISA_EMIT(x->e, VPU_CSUM, isa_spad(0, b->acc + j * C * 4),
                         isa_spad(0, b->rowv + (1 + j) * b->rows * 4),
                         isa_imm((int64_t)b->local), isa_imm((int64_t)C), isa_enum(F));
        if (cores > 1) {
            unsigned sv, ss;
            kc_sem_alloc(x, &sv), kc_sem_alloc(x, &ss);
            krw_signal(x, ISA_UNIT_VPU, sv);
            krw_wait(x, ISA_UNIT_DMA, sv);
            krw_copy(x, isa_hbm(0, k->ws + i * slot), isa_spad(0, b->acc), F, k->nstat * C, 1,
                     0, 0);
            krw_signal(x, ISA_UNIT_DMA, ss);
            krw_wait(x, ISA_UNIT_DMA, ss);
        }
    }
    if (cores > 1) {
        np_err e = {0};
        kc_barrier(x->prog, &e);
        x->res->hbm_write_bytes += cores * slot;
        x->res->hbm_read_bytes += cores * cores * slot;
    }
    for (uint32_t i = 0; i < cores; i++) {
        struct kbn_core *b = &k->pc[i];
        kc_core(x, k->core0 + i);
        if (cores > 1) { /* every core adds up all the cores' sums */
            unsigned sd;
            kc_sem_alloc(x, &sd);
            uint64_t all = krw_alloc(x, cores * slot);
            krw_copy(x, isa_spad(0, all), isa_hbm(0, k->ws), F, k->nstat * C, cores, 0, 0);
            krw_signal(x, ISA_UNIT_DMA, sd);
            krw_wait(x, ISA_UNIT_VPU, sd);
            for (unsigned j = 0; j < k->nstat; j++)
                ISA_EMIT(x->e, VPU_CSUM, isa_spad(0, b->acc + j * C * 4),
                         isa_spad(0, all + j * C * 4), isa_imm((int64_t)cores),
                         isa_imm((int64_t)C), isa_enum(F), .src_s = isa_imm((int64_t)slot));
        }
        if (!k->grad) { /* gamma, beta (loaded by the prologue) into slots 2, 3 */
            if (k->gamma)
                krw_unary(x, ISA_OP_VPU_COPY, b->acc + 2 * C * 4, b->co + 2 * C * 4, C, F);
            if (k->beta)
                krw_unary(x, ISA_OP_VPU_COPY, b->acc + 3 * C * 4, b->t3, C, F);
        }
        coefficients(x, k, b);
        spread_coefficients(x, k, b);
    }
}

static np_status bn_compile(kc_ctx *x)
{
    const kc_kernel *kk = x->k;
    const kc_tensor *X = &kk->in[0], *Y = &kk->out[0];
    kbn k = {.op = kk->op, .grad = kk->op == NN_OP_BATCHNORM_GRAD,
             .infer = kk->op == NN_OP_BATCHNORM_INFER, .eps = (float)kc_attr_real(x, "eps"),
             .core0 = kk->place.core0};
    int want = k.grad ? 2 : k.infer ? 5 : -1;
    if ((want > 0 && kk->n_in != want) || (want < 0 && kk->n_in != 1 && kk->n_in != 3))
        return kc_fail(x, NP_ERR_INCONSISTENT, "%d inputs: %s takes %s", kk->n_in,
                       nn_op_name(kk->op), k.grad ? "x, g" : k.infer ? "x, gamma, beta, mean, var"
                                                                  : "x [, gamma, beta]");
    if (!kc_is_float(X->dtype) || !kc_is_float(Y->dtype) || !kc_same_shape(X, Y) || X->ndim < 2)
        return kc_fail(x, NP_ERR_INCONSISTENT, "x and out: float [N, C, ...] of one shape");
    if (k.grad && (!kc_same_shape(X, &kk->in[1]) || kk->in[1].dtype != X->dtype))
        return kc_fail(x, NP_ERR_INCONSISTENT, "g must be like x");
    k.dt = kc_isa_dtype(X->dtype), k.ot = kc_isa_dtype(Y->dtype), k.x = X->addr;
    k.N = (uint64_t)X->shape[0], k.C = (uint64_t)X->shape[1];
    k.S = (uint64_t)(kc_tensor_numel(X) / X->shape[0] / X->shape[1]);
    k.n = k.N * k.S;
    k.nstat = k.grad ? 4 : 2;
    if (!k.grad && kk->n_in > 1) {
        for (int i = 1; i < kk->n_in; i++) {
            const kc_tensor *a = &kk->in[i];
            if (a->ndim != 1 || (uint64_t)a->shape[0] != k.C || a->dtype != kk->in[1].dtype ||
                !kc_is_float(a->dtype) || kc_tensor_bytes(a) != kc_tensor_extent(a))
                return kc_fail(x, NP_ERR_INCONSISTENT, "input %d must be a packed float [%" PRIu64
                               "] (all parameters of one dtype)", i, k.C);
        }
        k.pdt = kc_isa_dtype(kk->in[1].dtype);
        k.gamma = kk->in[1].addr, k.beta = kk->in[2].addr;
        if (k.infer)
            k.mean = kk->in[3].addr, k.var = kk->in[4].addr;
    } else {
        k.pdt = ISA_DTYPE_FP32;
    }
    /* the layout: channels-last (C packed, the rest one row stride) or NCHW (S packed) */
    int64_t e = (int64_t)isa_dtype_size[k.dt];
    uint64_t rows = 0;
    bool cl = X->stride[1] == e && k.C > 1; /* else NCHW */
    k.cl = cl;
    const kc_tensor *ops[3] = {X, Y, k.grad ? &kk->in[1] : NULL};
    int64_t lds[3] = {0, 0, 0};
    for (int i = 0; i < 3; i++) {
        if (!ops[i])
            continue;
        kc_tensor w = *ops[i];
        if (cl && ops[i]->stride[1] != (int64_t)nn_dtype_size(ops[i]->dtype))
            return kc_fail(x, NP_ERR_INCONSISTENT, "x, out (and g) must have one layout");
        if (cl) {
            for (int d = 1; d < w.ndim - 1; d++)
                w.shape[d] = ops[i]->shape[d + 1], w.stride[d] = ops[i]->stride[d + 1];
            w.shape[w.ndim - 1] = ops[i]->shape[1], w.stride[w.ndim - 1] = ops[i]->stride[1];
        } else { /* [N, C, S] -> rows (n, c) of S */
            if (ops[i]->stride[1] == (int64_t)nn_dtype_size(ops[i]->dtype) && k.C > 1)
                return kc_fail(x, NP_ERR_INCONSISTENT, "x, out (and g) must have one layout");
            int64_t s = 1;
            for (int d = 2; d < w.ndim; d++)
                s *= w.shape[d];
            w.ndim = 3, w.shape[2] = s, w.stride[2] = ops[i]->stride[ops[i]->ndim - 1];
            if (ops[i]->ndim == 2)
                w.shape[2] = 1, w.stride[2] = (int64_t)nn_dtype_size(w.dtype);
            if (s > 1 && ops[i]->ndim > 3)
                for (int d = 2; d < ops[i]->ndim - 1; d++)
                    if (ops[i]->stride[d] != ops[i]->stride[d + 1] * ops[i]->shape[d + 1])
                        return kc_fail(x, NP_ERR_INCONSISTENT, "the spatial dims must be packed "
                                       "(or the channels: channels-last)");
        }
        uint64_t r, wd;
        if (kc_rows_of(x, &w, i == 0 ? "x" : i == 1 ? "out" : "g", &r, &wd, &lds[i]) != NP_OK)
            return kc_status(x);
        rows = r, k.width = wd;
    }
    k.ld = lds[0];
    kc_row_plan p = {.rows = rows, .n_in = k.grad ? 2 : 1, .n_out = 1, .work = bn_work,
                     .prologue = bn_prologue, .pass = bn_pass, .ctx = &k,
                     .n_pass = k.infer ? 1 : 2, .n_xreg = 1, .xstep = {4},
                     .row_align = cl ? 1 : k.C, .tr = (uint64_t)kc_attr_int(x, "tr")};
    p.in[0] = (kc_row_stream){X->addr, k.ld, k.dt, k.width, 1, 0};
    if (k.grad)
        p.in[1] = (kc_row_stream){kk->in[1].addr, lds[2], k.dt, k.width, 1, 0};
    p.out[0] = (kc_row_stream){Y->addr, lds[1], k.ot, k.width, 1, 0};
    const kc_place *pl = &kk->place;
    uint32_t cores = pl->n_cores ? pl->n_cores : 1;
    uint64_t units = cl ? rows : k.N;
    cores = units < cores ? (uint32_t)units : cores;
    uint64_t rows_core = (units + cores - 1) / cores * (cl ? 1 : k.C);
    p.work_row_bytes = k.width * 4 * (k.grad ? 2 : 1) + (cl ? k.width * 4 : 0) + 3 * 64;
    p.fixed_bytes = k.C * 4 * (KBN_STATS + 3 + 5) + k.C * 4 +
                    (cl ? 0 : (1 + k.nstat + 3) * rows_core * 4) + 16 * 64 +
                    (cores > 1 ? cores * k.nstat * k.C * 4 : 0);
    if (!k.infer && cores > 1 &&
        kc_prog_bss(x->prog, NULL, cores * k.nstat * k.C * 4, &k.ws, NULL) != NP_OK)
        return kc_fail(x, NP_ERR_NOMEM, "no HBM for the cores' sums");
    if (k.C > 65535 || (!cl && k.N > 65535))
        return kc_fail(x, NP_ERR_RANGE, "%" PRIu64 " channels (at most 65535)", k.C);
    if (kc_rows_emit(x, &p) != NP_OK)
        return kc_status(x);
    x->res->flops = (uint64_t)(k.grad ? 10 : 5) * k.n * k.C;
    snprintf(x->res->schedule, sizeof x->res->schedule, "%s, tiles of %" PRIu64 " rows on %"
             PRIu32 " cores%s", cl ? "channels-last" : "NCHW", p.tr_used, p.cores_used,
             k.infer ? "" : ", a statistics pass and a normalizing pass");
    return kc_status(x);
}

/* ---- the table rows -------------------------------------------------------------------------- */

static np_status bn_reference(nn_graph *g, const kc_kernel *k, nn_tensor *const *in,
                              nn_tensor **out, np_err *err)
{
    double eps = 1e-5;
    for (int i = 0; i < k->n_attrs; i++)
        if (k->attrs[i].name && strcmp(k->attrs[i].name, "eps") == 0)
            eps = k->attrs[i].f;
    out[0] = nn_node(g, k->op, k->n_in, in, NULL, (double[NN_MAX_FPARAMS]){eps});
    return out[0] ? NP_OK : nn_graph_status(g, err);
}

static const kc_attr_def bn_keys[] = {
    {"shape", KC_ATTR_SHAPE, KC_REQUIRED, 0, 0, "x's shape N x C x ... (NCHW in memory)"},
    {"dtype", KC_ATTR_DTYPE, NN_BF16, 0, 0, "element type"},
};

static np_status bn_build(kc_prog *p, const kc_spec *s, kc_kernel *k, np_err *err)
{
    const kc_spec_val *sh = kc_spec_get(s, "shape"), *dt = kc_spec_get(s, "dtype");
    if (!sh || !dt || sh->ndim < 2)
        return np_err_set(err, NP_ERR_MISSING, "%s: shape=NxCx... is needed", nn_op_name(s->op));
    nn_dtype t = (nn_dtype)dt->i;
    k->n_in = s->op == NN_OP_BATCHNORM_GRAD ? 2 : s->op == NN_OP_BATCHNORM_INFER ? 5 : 3;
    k->n_out = 1;
    if (kc_spec_tensor(p, "X", t, sh->ndim, sh->shape, &k->in[0], err) ||
        kc_spec_tensor(p, "Y", t, sh->ndim, sh->shape, &k->out[0], err))
        return err->status;
    for (int i = 1; i < k->n_in; i++) {
        char name[16];
        snprintf(name, sizeof name, "P%d", i);
        if (s->op == NN_OP_BATCHNORM_GRAD
                ? kc_spec_tensor(p, "G", t, sh->ndim, sh->shape, &k->in[i], err)
                : kc_spec_tensor(p, name, t, 1, &sh->shape[1], &k->in[i], err))
            return err->status;
    }
    return NP_OK;
}

static const kc_attr_def bn_attrs[] = {
    {"eps", KC_ATTR_REAL, 1e-5, 0, 1, "added to the variance (the framework's fp[0])"},
    {"tr", KC_ATTR_INT, 0, 0, 65535, "tile: rows per tile (0: chosen)"},
};

/* docs/compiler.md's bound of the batch norms: fp32 2^-18 (shifted sums over N x S values,
 * the gradient's cancelling terms), else one ulp of the output. */
static void bn_tolerance(const kc_kernel *k, int out, kc_tol *t)
{
    *t = kc_tol_ulp(k->out[out].dtype);
    if (k->out[out].dtype == NN_F32)
        t->rtol = 0x1p-18, t->atol_max = 0x1p-18 / 8;
}

#define BN_ROW(NAME, OP, NIN, DOC)                                                              \
    const kc_kernel_def NAME = {                                                                \
        .op = OP, .n_in = NIN, .n_out = 1, .attrs = bn_attrs,                                   \
        .n_attrs = sizeof bn_attrs / sizeof bn_attrs[0], .compile = bn_compile,                 \
        .reference = bn_reference, .keys = bn_keys, .n_keys = sizeof bn_keys / sizeof bn_keys[0], \
        .build = bn_build, .doc = DOC, .tolerance = bn_tolerance,                               \
    }
BN_ROW(kc_batchnorm_def, NN_OP_BATCHNORM, -1,
       "a statistics pass (shifted sums per channel, combined over the cores), then x a + b");
BN_ROW(kc_batchnorm_grad_def, NN_OP_BATCHNORM_GRAD, 2,
       "a statistics pass over x and g, then g p + x q + r per channel");
BN_ROW(kc_batchnorm_infer_def, NN_OP_BATCHNORM_INFER, 5,
       "one pass: x a + b with a, b from the running statistics");
