/* kc_norm.c — layer norm and RMS norm over the last dim and their gradient ops, on the row
 * schedule (kc_row.h): one read of x (and g) and one write per element, fp32 inside, one
 * rounding to the output's dtype. Per tile of R rows of D (x in dtype; vectors fp32 [R]):
 *
 *   layernorm   s1 = rdot(x, 1); -mean = s1 x (-1/D); xc = fma(x x 1 + (-mean))   (fp32)
 *               rstd = rsqrt(rdot(xc, xc) / D + eps)          (two-pass variance)
 *               y = fma(xc x rstd + 0) without gamma; else xh = fma(xc x rstd + 0),
 *               y = fma(xh x gamma + beta)                    (gamma, beta fp32 per core)
 *   rmsnorm     rstd = rsqrt(rdot(x, x) / D + eps); y = fma(x x rstd + 0), or
 *               xh = fma(x x rstd + 0), y = fma(xh x gamma + 0)
 *   layernorm_grad (x, g = dy x gamma): xc, rstd and xh as above; gf = fma(g x 1 + 0) with
 *               its row sums sg; sgx = rdot(xh, gf); t = fma(xh x (-rstd sgx / D) + (-rstd
 *               sg / D)); dx = fma(g x rstd + t) = rstd (g - mean(g) - xh mean(g xh))
 *   rmsnorm_grad (x, g): rstd; sgx = rdot(x, g); t = fma(x x (-rstd^3 sgx / D) + 0);
 *               dx = fma(g x rstd + t) = rstd (g - xh mean(g xh))
 *
 * gamma and beta (the framework's [D] parameters) are loaded once per core and converted to
 * fp32 (streamed rows: a chunk's columns of them before each normalizing pass); the gradients
 * of gamma and beta are framework ops of their own (mul, sum_to).
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kc_row.h"

typedef struct knorm {
    nn_op op;
    bool rms, grad;
    int n_aff;                /* forward: 0, 1 (gamma) or 2 (gamma, beta) */
    isa_dtype dt, ot;
    uint64_t D;
    float eps;
    uint64_t gamma_addr, beta_addr;
    isa_dtype gdt;            /* gamma's and beta's dtype */
    uint32_t core0;
    uint64_t W, nc;           /* chunk width and chunks (1: whole rows) */
    uint64_t x, g, y;         /* streaming: the operands' HBM addresses */
    struct knorm_core {
        uint64_t one, zero, one_dt, inv_d, epsv, gamma, beta, stage, stage_b;
        unsigned sg;          /* streaming: DMA -> VPU, a chunk of gamma and beta loaded */
        uint64_t xc, gf, s1, nm, s2, rstd, t1, t2, t3;
        unsigned rv;          /* streaming: register at the tile's rows of the core's stats */
        uint64_t A, B, C, E;  /* streaming: per row of the core (mean, M2; sums) */
    } pc[KC_ROW_MAX_CORES];
} knorm;

static void norm_prologue(kc_ctx *x, void *ctx, uint32_t core, uint64_t row0, uint64_t rows,
                          uint64_t tr, const unsigned *xreg)
{
    (void)row0;
    knorm *k = ctx;
    struct knorm_core *b = KC_ROW_PC(k, core);
    const isa_dtype F = ISA_DTYPE_FP32;
    b->one = krw_alloc(x, 4), b->zero = krw_alloc(x, 4), b->one_dt = krw_alloc(x, 4);
    b->inv_d = krw_alloc(x, 4), b->epsv = krw_alloc(x, 4);
    krw_fill(x, b->one, 1.0f, 1, F);
    krw_fill(x, b->zero, 0.0f, 1, F);
    krw_fill(x, b->one_dt, 1.0f, 1, k->dt);
    krw_fill(x, b->inv_d, (float)(1.0 / (double)k->D), 1, F);
    krw_fill(x, b->epsv, k->eps, 1, F);
    if (k->n_aff && k->nc > 1) { /* streaming: a chunk of them, loaded by each pass */
        b->stage = krw_alloc(x, k->W * isa_dtype_size[k->gdt]);
        b->gamma = krw_alloc(x, k->W * 4);
        if (k->n_aff > 1)
            b->stage_b = krw_alloc(x, k->W * isa_dtype_size[k->gdt]),
            b->beta = krw_alloc(x, k->W * 4);
        kc_sem_alloc(x, &b->sg);
    } else if (k->n_aff) {
        b->stage = krw_alloc(x, k->D * isa_dtype_size[k->gdt]);
        b->gamma = krw_alloc(x, k->D * 4);
        krw_load_f32(x, b->gamma, b->stage, k->gamma_addr, k->D, k->gdt);
        if (k->n_aff > 1) {
            b->beta = krw_alloc(x, k->D * 4);
            krw_load_f32(x, b->beta, b->stage, k->beta_addr, k->D, k->gdt);
        }
    }
    if (!k->rms || k->n_aff || k->grad)
        b->xc = krw_alloc(x, tr * k->W * 4);
    if (k->grad && !k->rms)
        b->gf = krw_alloc(x, tr * k->W * 4);
    b->s1 = krw_alloc(x, tr * 4), b->nm = krw_alloc(x, tr * 4), b->s2 = krw_alloc(x, tr * 4);
    b->rstd = krw_alloc(x, tr * 4), b->t1 = krw_alloc(x, tr * 4), b->t2 = krw_alloc(x, tr * 4);
    b->t3 = krw_alloc(x, tr * 4);
    if (k->nc > 1) {
        b->rv = xreg[0];
        b->A = krw_alloc(x, rows * 4), b->B = krw_alloc(x, rows * 4);
        if (k->grad && !k->rms)
            b->C = krw_alloc(x, rows * 4), b->E = krw_alloc(x, rows * 4);
    }
}

/* rstd = rsqrt(s2 / D + eps) for R rows */
static void norm_rstd(kc_ctx *x, const struct knorm_core *b, uint64_t R)
{
    krw_fma(x, ISA_OP_VPU_FMA, b->rstd, b->s2, b->inv_d, b->epsv, 1, R, ISA_DTYPE_FP32,
           ISA_DTYPE_FP32, ISA_BCAST_SCALAR, ISA_BCAST_SCALAR, -1);
    krw_unary(x, ISA_OP_VPU_RSQRT, b->rstd, b->rstd, R, ISA_DTYPE_FP32);
}

/* Rows too wide for the scratchpad: pass phase x nc + c is chunk c (w columns, after n_a)
 * of phase
 *   0   layernorm(_grad): the chunk's mean and centred sum of squares merged into the row's
 *       (Chan et al.: delta = mean_c - mean, mean += delta w / n, M2 += M2_c + delta^2 n_a w
 *       / n); rmsnorm(_grad): sums of x^2 (and x g)
 *   1   layernorm, rmsnorm: the chunk normalized (gamma's and beta's columns of the chunk);
 *       layernorm_grad: sums of g and of xh g; rmsnorm_grad: dx
 *   2   layernorm_grad: dx
 * A (mean or sum x^2), B (M2 or sum x g), C (sum g), E (sum xh g) per row of the core,
 * fp32. */
static void norm_work_stream(kc_ctx *x, const knorm *k, const struct knorm_core *b,
                             const kc_row_tile *t)
{
    const isa_dtype F = ISA_DTYPE_FP32;
    const isa_bcast S = ISA_BCAST_SCALAR, C = ISA_BCAST_COL, W = ISA_BCAST_ROW,
                    T = ISA_BCAST_FULL;
    uint64_t R = t->rows, D = k->D, in = t->in[0], out = t->out[0];
    uint64_t phase = t->pass / k->nc, c = t->pass % k->nc, na = c * k->W;
    uint64_t w = D - na < k->W ? D - na : k->W;
    uint64_t A = KRW_AT(b->rv, b->A + (uint64_t)t->xoff[0]);
    uint64_t B = KRW_AT(b->rv, b->B + (uint64_t)t->xoff[0]);
    uint64_t Cs = KRW_AT(b->rv, b->C + (uint64_t)t->xoff[0]);
    uint64_t Es = KRW_AT(b->rv, b->E + (uint64_t)t->xoff[0]);
    float m1d = (float)(-1.0 / (double)D);
    if (k->rms) {
        if (phase == 0) { /* A += sum x^2; grad: B += sum x g */
            krw_rdot(x, c ? b->s2 : A, in, in, R, w, k->dt, F, T);
            if (c)
                krw_binary(x, ISA_OP_VPU_ADD, A, A, b->s2, 1, R, F, T);
            if (k->grad) {
                krw_rdot(x, c ? b->s1 : B, in, t->in[1], R, w, k->dt, F, T);
                if (c)
                    krw_binary(x, ISA_OP_VPU_ADD, B, B, b->s1, 1, R, F, T);
            }
            return;
        }
        krw_unary(x, ISA_OP_VPU_COPY, b->s2, A, R, F);
        norm_rstd(x, b, R);
        if (k->grad) { /* t1 = -rstd^3 sum(x g) / D; dx = g rstd + x t1 */
            krw_binary(x, ISA_OP_VPU_MUL, b->t1, b->rstd, b->rstd, 1, R, F, T);
            krw_binary(x, ISA_OP_VPU_MUL, b->t1, b->t1, b->rstd, 1, R, F, T);
            krw_binary(x, ISA_OP_VPU_MUL, b->t1, b->t1, B, 1, R, F, T);
            krw_scalar(x, ISA_OP_VPU_MULS, b->t1, b->t1, m1d, R, F);
            krw_fma(x, ISA_OP_VPU_FMA, b->xc, in, b->t1, b->zero, R, w, k->dt, F, C, S, -1);
            krw_fma(x, ISA_OP_VPU_FMA, out, t->in[1], b->rstd, b->xc, R, w, k->dt, k->ot, C, T,
                    -1);
        } else if (k->n_aff) {
            krw_fma(x, ISA_OP_VPU_FMA, b->xc, in, b->rstd, b->zero, R, w, k->dt, F, C, S, -1);
            krw_fma(x, ISA_OP_VPU_FMA, out, b->xc, b->gamma, b->zero, R, w, F, k->ot, W,
                    S, -1);
        } else {
            krw_fma(x, ISA_OP_VPU_FMA, out, in, b->rstd, b->zero, R, w, k->dt, k->ot, C, S, -1);
        }
        return;
    }
    if (phase == 0) { /* the chunk's mean (t1) and M2 (s2), merged into A and B */
        krw_rdot(x, b->s1, in, b->one_dt, R, w, k->dt, F, S);
        krw_scalar(x, ISA_OP_VPU_MULS, b->t1, b->s1, (float)(1.0 / (double)w), R, F);
        krw_scalar(x, ISA_OP_VPU_MULS, b->nm, b->t1, -1.0f, R, F);
        krw_fma(x, ISA_OP_VPU_FMA, b->xc, in, b->one, b->nm, R, w, k->dt, F, S, C, -1);
        krw_rdot(x, b->s2, b->xc, b->xc, R, w, F, F, T);
        if (c == 0) {
            krw_unary(x, ISA_OP_VPU_COPY, A, b->t1, R, F);
            krw_unary(x, ISA_OP_VPU_COPY, B, b->s2, R, F);
            return;
        }
        double n = (double)(na + w);
        krw_binary(x, ISA_OP_VPU_SUB, b->t2, b->t1, A, 1, R, F, T);                 /* delta */
        krw_scalar(x, ISA_OP_VPU_MULS, b->t3, b->t2, (float)((double)w / n), R, F);
        krw_binary(x, ISA_OP_VPU_ADD, A, A, b->t3, 1, R, F, T);
        krw_binary(x, ISA_OP_VPU_MUL, b->t2, b->t2, b->t2, 1, R, F, T);
        krw_scalar(x, ISA_OP_VPU_MULS, b->t2, b->t2, (float)((double)na * (double)w / n), R, F);
        krw_binary(x, ISA_OP_VPU_ADD, B, B, b->s2, 1, R, F, T);
        krw_binary(x, ISA_OP_VPU_ADD, B, B, b->t2, 1, R, F, T);
        return;
    }
    /* rstd from M2, xh (or xc) of the chunk */
    krw_unary(x, ISA_OP_VPU_COPY, b->s2, B, R, F);
    norm_rstd(x, b, R);
    krw_scalar(x, ISA_OP_VPU_MULS, b->nm, A, -1.0f, R, F);
    krw_fma(x, ISA_OP_VPU_FMA, b->xc, in, b->one, b->nm, R, w, k->dt, F, S, C, -1);
    if (!k->grad) {
        if (k->n_aff) {
            krw_fma(x, ISA_OP_VPU_FMA, b->xc, b->xc, b->rstd, b->zero, R, w, F, F, C, S, -1);
            krw_fma(x, ISA_OP_VPU_FMA, out, b->xc, b->gamma, k->n_aff > 1 ? b->beta : b->zero,
                    R, w, F, k->ot, W,
                    k->n_aff > 1 ? W : S, -1);
        } else {
            krw_fma(x, ISA_OP_VPU_FMA, out, b->xc, b->rstd, b->zero, R, w, F, k->ot, C, S, -1);
        }
        return;
    }
    krw_fma(x, ISA_OP_VPU_FMA, b->xc, b->xc, b->rstd, b->zero, R, w, F, F, C, S, -1); /* xh */
    if (phase == 1) { /* C += sum g, E += sum xh g */
        krw_fma(x, ISA_OP_VPU_FMA, b->gf, t->in[1], b->one, b->zero, R, w, k->dt, F, S, S,
                (int64_t)(c ? b->s1 : Cs));
        krw_rdot(x, c ? b->s2 : Es, b->xc, b->gf, R, w, F, F, T);
        if (c) {
            krw_binary(x, ISA_OP_VPU_ADD, Cs, Cs, b->s1, 1, R, F, T);
            krw_binary(x, ISA_OP_VPU_ADD, Es, Es, b->s2, 1, R, F, T);
        }
        return;
    }
    /* dx = g rstd + xh (-rstd sum(xh g) / D) + (-rstd sum(g) / D) */
    krw_binary(x, ISA_OP_VPU_MUL, b->t1, b->rstd, Es, 1, R, F, T);
    krw_scalar(x, ISA_OP_VPU_MULS, b->t1, b->t1, m1d, R, F);
    krw_binary(x, ISA_OP_VPU_MUL, b->t2, b->rstd, Cs, 1, R, F, T);
    krw_scalar(x, ISA_OP_VPU_MULS, b->t2, b->t2, m1d, R, F);
    krw_fma(x, ISA_OP_VPU_FMA, b->xc, b->xc, b->t1, b->t2, R, w, F, F, C, C, -1);
    krw_fma(x, ISA_OP_VPU_FMA, out, t->in[1], b->rstd, b->xc, R, w, k->dt, k->ot, C, T, -1);
}

static void norm_work(kc_ctx *x, void *ctx, const kc_row_tile *t)
{
    knorm *k = ctx;
    const struct knorm_core *b = KC_ROW_PC(k, t->core);
    if (k->nc > 1) {
        norm_work_stream(x, k, b, t);
        return;
    }
    const isa_dtype F = ISA_DTYPE_FP32;
    const isa_bcast S = ISA_BCAST_SCALAR, C = ISA_BCAST_COL, W = ISA_BCAST_ROW,
                    T = ISA_BCAST_FULL;
    uint64_t R = t->rows, D = k->D, in = t->in[0], out = t->out[0];
    float m1d = (float)(-1.0 / (double)D);
    if (k->rms) {
        krw_rdot(x, b->s2, in, in, R, D, k->dt, F, T);
        norm_rstd(x, b, R);
        if (k->grad) { /* k1 = -rstd^3 sgx / D */
            krw_rdot(x, b->s1, in, t->in[1], R, D, k->dt, F, T);
            krw_binary(x, ISA_OP_VPU_MUL, b->t1, b->rstd, b->rstd, 1, R, F, T);
            krw_binary(x, ISA_OP_VPU_MUL, b->t1, b->t1, b->rstd, 1, R, F, T);
            krw_binary(x, ISA_OP_VPU_MUL, b->t1, b->t1, b->s1, 1, R, F, T);
            krw_scalar(x, ISA_OP_VPU_MULS, b->t1, b->t1, m1d, R, F);
            krw_fma(x, ISA_OP_VPU_FMA, b->xc, in, b->t1, b->zero, R, D, k->dt, F, C, S, -1);
            krw_fma(x, ISA_OP_VPU_FMA, out, t->in[1], b->rstd, b->xc, R, D, k->dt, k->ot, C, T, -1);
        } else if (k->n_aff) {
            krw_fma(x, ISA_OP_VPU_FMA, b->xc, in, b->rstd, b->zero, R, D, k->dt, F, C, S, -1);
            krw_fma(x, ISA_OP_VPU_FMA, out, b->xc, b->gamma, b->zero, R, D, F, k->ot, W, S, -1);
        } else {
            krw_fma(x, ISA_OP_VPU_FMA, out, in, b->rstd, b->zero, R, D, k->dt, k->ot, C, S, -1);
        }
        return;
    }
    /* layer norm: centred, then the variance of the centred values */
    krw_rdot(x, b->s1, in, b->one_dt, R, D, k->dt, F, S);
    krw_scalar(x, ISA_OP_VPU_MULS, b->nm, b->s1, m1d, R, F);
    krw_fma(x, ISA_OP_VPU_FMA, b->xc, in, b->one, b->nm, R, D, k->dt, F, S, C, -1);
    krw_rdot(x, b->s2, b->xc, b->xc, R, D, F, F, T);
    norm_rstd(x, b, R);
    if (k->grad) {
        krw_fma(x, ISA_OP_VPU_FMA, b->xc, b->xc, b->rstd, b->zero, R, D, F, F, C, S, -1); /* xh */
        krw_fma(x, ISA_OP_VPU_FMA, b->gf, t->in[1], b->one, b->zero, R, D, k->dt, F, S, S,
               (int64_t)b->s1);                                                   /* sg */
        krw_rdot(x, b->s2, b->xc, b->gf, R, D, F, F, T);                            /* sgx */
        krw_binary(x, ISA_OP_VPU_MUL, b->t1, b->rstd, b->s2, 1, R, F, T);
        krw_scalar(x, ISA_OP_VPU_MULS, b->t1, b->t1, m1d, R, F);
        krw_binary(x, ISA_OP_VPU_MUL, b->t2, b->rstd, b->s1, 1, R, F, T);
        krw_scalar(x, ISA_OP_VPU_MULS, b->t2, b->t2, m1d, R, F);
        krw_fma(x, ISA_OP_VPU_FMA, b->xc, b->xc, b->t1, b->t2, R, D, F, F, C, C, -1);
        krw_fma(x, ISA_OP_VPU_FMA, out, t->in[1], b->rstd, b->xc, R, D, k->dt, k->ot, C, T, -1);
    } else if (k->n_aff) {
        krw_fma(x, ISA_OP_VPU_FMA, b->xc, b->xc, b->rstd, b->zero, R, D, F, F, C, S, -1);
        krw_fma(x, ISA_OP_VPU_FMA, out, b->xc, b->gamma, k->n_aff > 1 ? b->beta : b->zero, R, D,
               F, k->ot, W, k->n_aff > 1 ? W : S, -1);
    } else {
        krw_fma(x, ISA_OP_VPU_FMA, out, b->xc, b->rstd, b->zero, R, D, F, k->ot, C, S, -1);
    }
}

/* Phases of a streamed row (norm_work_stream). */
static uint64_t norm_phases(const knorm *k) { return k->grad && !k->rms ? 3 : 2; }

static void norm_pass(kc_ctx *x, void *ctx, unsigned pass, kc_row_plan *p)
{
    (void)x;
    knorm *k = ctx;
    if (k->nc == 1)
        return;
    uint64_t phase = pass / k->nc, c = pass % k->nc, w = k->D - c * k->W;
    w = w < k->W ? w : k->W;
    uint64_t ex = isa_dtype_size[k->dt], ey = isa_dtype_size[k->ot];
    p->in[0].addr = k->x + c * k->W * ex, p->in[0].width = w;
    bool g = k->grad && (k->rms || phase >= 1);
    p->n_in = g ? 2 : 1;
    if (g)
        p->in[1].addr = k->g + c * k->W * ex, p->in[1].width = w;
    if (phase + 1 == norm_phases(k))
        p->out[0].addr = k->y + c * k->W * ey, p->out[0].width = w;
    else
        p->n_out = 0;
    if (!k->n_aff || phase != 1)
        return;
    /* the normalizing passes: gamma's (and beta's) columns of the chunk on every core, after
     * the last pass's tiles (its DMA waited for their work) and before this one's */
    uint64_t eg = isa_dtype_size[k->gdt];
    for (uint32_t core = k->core0; core < k->core0 + p->cores_used; core++) {
        const struct knorm_core *b = KC_ROW_PC(k, core);
        kc_core(x, core);
        krw_copy(x, isa_spad(0, b->stage), isa_hbm(0, k->gamma_addr + c * k->W * eg), k->gdt,
                 w, 1, 0, 0);
        if (k->n_aff > 1)
            krw_copy(x, isa_spad(0, b->stage_b), isa_hbm(0, k->beta_addr + c * k->W * eg),
                     k->gdt, w, 1, 0, 0);
        krw_signal(x, ISA_UNIT_DMA, b->sg);
        krw_wait(x, ISA_UNIT_VPU, b->sg);
        krw_cast(x, b->gamma, b->stage, w, ISA_DTYPE_FP32, k->gdt);
        if (k->n_aff > 1)
            krw_cast(x, b->beta, b->stage_b, w, ISA_DTYPE_FP32, k->gdt);
        x->res->hbm_read_bytes += w * eg * (uint64_t)k->n_aff;
    }
}

static np_status norm_compile(kc_ctx *x)
{
    const kc_kernel *kk = x->k;
    knorm k = {.core0 = kk->place.core0, .op = kk->op,
               .rms = kk->op == NN_OP_RMSNORM || kk->op == NN_OP_RMSNORM_GRAD,
               .grad = kk->op == NN_OP_LAYERNORM_GRAD || kk->op == NN_OP_RMSNORM_GRAD,
               .eps = (float)kc_attr_real(x, "eps")};
    const kc_tensor *X = &kk->in[0], *Y = &kk->out[0];
    int max_in = k.grad ? 2 : k.rms ? 2 : 3;
    if (kk->n_in < (k.grad ? 2 : 1) || kk->n_in > max_in)
        return kc_fail(x, NP_ERR_INCONSISTENT, "%d inputs: %s takes %s", kk->n_in,
                       nn_op_name(kk->op), k.grad ? "x and g" : k.rms ? "x [, gamma]"
                                                           : "x [, gamma [, beta]]");
    if (!kc_is_float(X->dtype) || !kc_is_float(Y->dtype))
        return kc_fail(x, NP_ERR_INCONSISTENT, "x is %s, out %s: float types only",
                       nn_dtype_name(X->dtype), nn_dtype_name(Y->dtype));
    if (!kc_same_shape(X, Y) || (k.grad && !kc_same_shape(X, &kk->in[1])))
        return kc_fail(x, NP_ERR_INCONSISTENT, "out%s must have x's shape", k.grad ? " and g" : "");
    if (k.grad && kk->in[1].dtype != X->dtype)
        return kc_fail(x, NP_ERR_INCONSISTENT, "g is %s, x %s: one dtype",
                       nn_dtype_name(kk->in[1].dtype), nn_dtype_name(X->dtype));
    k.dt = kc_isa_dtype(X->dtype), k.ot = kc_isa_dtype(Y->dtype);
    uint64_t rows, r2, w2;
    int64_t ldx, ldy, ldg = 0;
    if (kc_rows_of(x, X, "x", &rows, &k.D, &ldx) != NP_OK ||
        kc_rows_of(x, Y, "out", &r2, &w2, &ldy) != NP_OK ||
        (k.grad && kc_rows_of(x, &kk->in[1], "g", &r2, &w2, &ldg) != NP_OK))
        return kc_status(x);
    if (!k.grad) {
        k.n_aff = kk->n_in - 1;
        for (int i = 1; i < kk->n_in; i++) {
            const kc_tensor *a = &kk->in[i];
            if (a->ndim != 1 || (uint64_t)a->shape[0] != k.D || !kc_is_float(a->dtype) ||
                a->dtype != kk->in[1].dtype || (a->shape[0] > 1 &&
                                                a->stride[0] != (int64_t)nn_dtype_size(a->dtype)))
                return kc_fail(x, NP_ERR_INCONSISTENT, "%s must be a packed float [%" PRIu64 "] "
                               "(gamma and beta of one dtype)", i == 1 ? "gamma" : "beta", k.D);
        }
        if (k.n_aff) {
            k.gdt = kc_isa_dtype(kk->in[1].dtype);
            k.gamma_addr = kk->in[1].addr;
            k.beta_addr = k.n_aff > 1 ? kk->in[2].addr : 0;
        }
    }
    kc_row_plan p = {.rows = rows, .n_in = k.grad ? 2 : 1, .n_out = 1, .work = norm_work,
                     .prologue = norm_prologue, .pass = norm_pass, .ctx = &k,
                     .tr = (uint64_t)kc_attr_int(x, "tr")};
    k.x = X->addr, k.y = Y->addr, k.g = k.grad ? kk->in[1].addr : 0;
    const kc_place *pl = &kk->place;
    uint64_t cores = pl->n_cores ? pl->n_cores : 1, rows_core = (rows + cores - 1) / cores;
    uint64_t chunk = (uint64_t)kc_attr_int(x, "chunk"), ex = isa_dtype_size[k.dt];
    uint64_t eg = k.n_aff ? isa_dtype_size[k.gdt] : 0, aff_col = (4 + eg) * (uint64_t)k.n_aff;
    uint64_t work = k.grad && !k.rms ? 8 : 4, stats = 4 * rows_core * 4 + 4 * 64;
    /* whole rows when one fits; else the widest chunk that does, with the stats per row */
    for (k.W = chunk ? chunk : k.D;;) {
        k.nc = (k.D + k.W - 1) / k.W;
        p.in[0] = (kc_row_stream){X->addr, ldx, k.dt, k.W, 1, 0};
        if (k.grad)
            p.in[1] = (kc_row_stream){kk->in[1].addr, ldg, k.dt, k.W, 1, 0};
        p.out[0] = (kc_row_stream){Y->addr, ldy, k.ot, k.W, 1, 0};
        p.work_row_bytes = work * k.W + 7 * 4 + 7 * 64;
        /* gamma and beta in fp32 (and staged): whole, or a chunk's when streaming */
        p.fixed_bytes = (k.n_aff ? k.W * aff_col + 5 * 64 : 0) + (k.nc > 1 ? stats : 0);
        if (k.W <= 65535 && kc_rows_fit(x, &p, pl->core0) >= 1)
            break;
        uint64_t per = 2 * ex * (k.grad ? 2 : 1) + 2 * isa_dtype_size[k.ot] + work + aff_col + 1;
        if (kc_chunk_narrow(x, pl->core0, chunk, k.D, "elements", stats + 4096, per, &k.W) != NP_OK)
            return kc_status(x);
    }
    if (k.nc > 1) {
        p.n_xreg = 1, p.xstep[0] = 4;
        p.n_pass = (unsigned)(norm_phases(&k) * k.nc);
    }
    if (kc_rows_emit(x, &p) != NP_OK)
        return kc_status(x);
    x->res->flops = (k.grad ? 10 : 5) * rows * k.D;
    snprintf(x->res->schedule, sizeof x->res->schedule, "tiles of %" PRIu64 " rows on %" PRIu32
             " cores", p.tr_used, p.cores_used);
    if (k.nc > 1) {
        size_t n = strlen(x->res->schedule);
        snprintf(x->res->schedule + n, sizeof x->res->schedule - n, ", rows streamed in %" PRIu64
                 " chunks of %" PRIu64 " columns, %" PRIu64 " passes", k.nc, k.W,
                 norm_phases(&k));
    }
    return kc_status(x);
}

/* ---- the table rows -------------------------------------------------------------------------- */

static np_status norm_reference(nn_graph *g, const kc_kernel *k, nn_tensor *const *in,
                                nn_tensor **out, np_err *err)
{
    double eps = 1e-5;
    for (int i = 0; i < k->n_attrs; i++)
        if (k->attrs[i].name && strcmp(k->attrs[i].name, "eps") == 0)
            eps = k->attrs[i].f;
    switch (k->op) {
    case NN_OP_LAYERNORM:
        out[0] = nn_layernorm(g, in[0], k->n_in > 1 ? in[1] : NULL, k->n_in > 2 ? in[2] : NULL,
                              eps);
        break;
    case NN_OP_RMSNORM:
        out[0] = nn_rmsnorm(g, in[0], k->n_in > 1 ? in[1] : NULL, eps);
        break;
    default:
        out[0] = nn_node(g, k->op, 2, in, NULL, (double[NN_MAX_FPARAMS]){eps});
        break;
    }
    return out[0] ? NP_OK : nn_graph_status(g, err);
}

static const kc_attr_def norm_keys[] = {
    {"shape", KC_ATTR_SHAPE, KC_REQUIRED, 0, 0,
     "x's shape, AxBx... (normalized over the last dim)"},
    {"dtype", KC_ATTR_DTYPE, NN_BF16, 0, 0, "element type"},
    {"affine", KC_ATTR_INT, 2, 0, 2, "forward: 0 none, 1 gamma, 2 gamma and beta (rmsnorm: "
                                    "at most 1)"},
};

static np_status norm_build(kc_prog *p, const kc_spec *s, kc_kernel *k, np_err *err)
{
    const kc_spec_val *sh = kc_spec_get(s, "shape"), *dt = kc_spec_get(s, "dtype");
    const kc_spec_val *af = kc_spec_get(s, "affine");
    if (!sh || !dt || sh->ndim < 1)
        return np_err_set(err, NP_ERR_MISSING, "%s: shape=AxBx... is needed", nn_op_name(s->op));
    nn_dtype t = (nn_dtype)dt->i;
    bool grad = s->op == NN_OP_LAYERNORM_GRAD || s->op == NN_OP_RMSNORM_GRAD;
    int64_t aff = grad ? 0 : af ? af->i : 2;
    if (s->op == NN_OP_RMSNORM && aff > 1)
        aff = 1;
    k->n_in = 1 + (grad ? 1 : (int)aff), k->n_out = 1;
    if (kc_spec_tensor(p, "X", t, sh->ndim, sh->shape, &k->in[0], err) != NP_OK ||
        kc_spec_tensor(p, "Y", t, sh->ndim, sh->shape, &k->out[0], err) != NP_OK ||
        (grad && kc_spec_tensor(p, "G", t, sh->ndim, sh->shape, &k->in[1], err) != NP_OK))
        return err->status;
    for (int i = 0; !grad && i < aff; i++)
        if (kc_spec_tensor(p, i ? "BETA" : "GAMMA", t, 1, &sh->shape[sh->ndim - 1], &k->in[1 + i],
                           err) != NP_OK)
            return err->status;
    return NP_OK;
}

static const kc_attr_def norm_attrs[] = {
    {"eps", KC_ATTR_REAL, 1e-5, 0, 1, "added to the variance (the framework's fp[0])"},
    {"tr", KC_ATTR_INT, 0, 0, 65535, "tile: rows per tile (0: chosen)"},
    {"chunk", KC_ATTR_INT, 0, 0, 65535, "tile: columns per chunk of a streamed row (0: whole "
     "rows when they fit)"},
};

#define NORM_ROW(NAME, OP, NIN, DOC)                                                            \
    const kc_kernel_def NAME = {                                                                \
        .op = OP, .n_in = NIN, .n_out = 1,                                                      \
        .attrs = norm_attrs, .n_attrs = sizeof norm_attrs / sizeof norm_attrs[0],               \
        .compile = norm_compile, .reference = norm_reference,                                    \
        .keys = norm_keys, .n_keys = sizeof norm_keys / sizeof norm_keys[0],                    \
        .build = norm_build, .doc = DOC,                                                        \
    }
NORM_ROW(kc_layernorm_def, NN_OP_LAYERNORM, -1,
         "rows TR at a time, double-buffered: centred two-pass statistics and the affine part "
         "in fp32, one rounding");
NORM_ROW(kc_rmsnorm_def, NN_OP_RMSNORM, -1,
         "rows TR at a time, double-buffered: sum of squares, scale (and gamma) in fp32");
NORM_ROW(kc_layernorm_grad_def, NN_OP_LAYERNORM_GRAD, 2,
         "rows TR at a time: statistics recomputed from x, rstd (g - mean g - xh mean(g xh))");
NORM_ROW(kc_rmsnorm_grad_def, NN_OP_RMSNORM_GRAD, 2,
         "rows TR at a time: rstd (g - xh mean(g xh)) with the sums from x and g");
