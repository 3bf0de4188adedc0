/* kgen_matmul.c — standalone matmul and convolution programs built on the kernel ABI
 * (see kgen_matmul.h). */
#include "kgen_matmul.h"

#include <stdlib.h>
#include <string.h>

#include "isa_asm.h"
#include "kc_matmul.h"
#include "kernel.h"

isa_dtype kgen_matmul_out_dtype(isa_dtype in) { return in == ISA_DTYPE_INT8 ? ISA_DTYPE_INT32 : in; }

static kc_gemm_shape gemm_shape(const kgen_matmul *mm)
{
    isa_dtype d = mm->dtype < ISA_DTYPE_COUNT ? mm->dtype : ISA_DTYPE_FP32;
    return (kc_gemm_shape){mm->m, mm->n, mm->k, isa_dtype_size[d],
                           isa_dtype_size[kgen_matmul_out_dtype(d)], mm->cores, 0, 0, 0, 0, 0,
                           0, 0};
}

np_status kgen_matmul_tiles(const arch_config *cfg, kgen_matmul *mm, np_err *err)
{
    if (mm->dtype >= ISA_DTYPE_COUNT)
        return np_err_set(err, NP_ERR_RANGE, "matmul: unknown dtype %d", (int)mm->dtype);
    kc_gemm_shape g = gemm_shape(mm);
    uint64_t tm = mm->tm, tn = mm->tn, tk = mm->tk;
    if (kc_gemm_tiles(cfg, &g, cfg->core.sram_bytes, cfg->core.acc_bytes, &tm, &tn, &tk, err) !=
        NP_OK) {
        np_err_prefix(err, "matmul");
        return err->status;
    }
    mm->tm = tm, mm->tn = tn, mm->tk = tk;
    return NP_OK;
}

/* A program on cores 0 .. cores-1 with .bss buffers names[i] of bytes[i] (in that order), the
 * kernel *k (operand addresses filled by fill), then halt; its disassembly in *text. */
static np_status build_program(const arch_config *cfg, uint64_t cores, const char *const *names,
                               const uint64_t *bytes, int n_bufs, kc_kernel *k,
                               void (*fill)(kc_kernel *, const uint64_t *, const void *),
                               const void *ctx, char **text, isa_program **prog, np_err *err)
{
    *text = NULL;
    if (prog)
        *prog = NULL;
    if (cores > (uint64_t)cfg->chip.cores)
        return np_err_set(err, NP_ERR_RANGE, "%s: %llu cores asked for, the chip has %lld",
                          nn_op_name(k->op), (unsigned long long)cores, (long long)cfg->chip.cores);
    kc_prog *p;
    if (kc_prog_new(cfg, &(kc_prog_opts){.cores = (uint32_t)cores}, &p, err) != NP_OK)
        return err->status;
    uint64_t addr[4];
    for (int i = 0; i < n_bufs; i++)
        if (kc_prog_bss(p, names[i], bytes[i], &addr[i], err) != NP_OK) {
            np_err_prefix(err, "%s: its operands do not fit the HBM (%llu bytes)",
                          nn_op_name(k->op), (unsigned long long)cfg->chip.hbm_bytes);
            kc_prog_free(p);
            return err->status;
        }
    fill(k, addr, ctx);
    k->place.n_cores = (uint32_t)cores;
    if (kc_compile(p, k, NULL, err) != NP_OK || kc_prog_finish(p, err) != NP_OK) {
        kc_prog_free(p);
        return err->status;
    }
    isa_program *q = kc_prog_take(p);
    kc_prog_free(p);
    if (isa_disasm(q, text, err) != NP_OK) {
        isa_program_free(q);
        return err->status;
    }
    if (prog)
        *prog = q;
    else
        isa_program_free(q);
    return NP_OK;
}

static void fill_matmul(kc_kernel *k, const uint64_t *addr, const void *ctx)
{
    const kgen_matmul *mm = ctx;
    nn_dtype d = kc_nn_dtype(mm->dtype), cd = kc_nn_dtype(kgen_matmul_out_dtype(mm->dtype));
    int64_t M = (int64_t)mm->m, N = (int64_t)mm->n, K = (int64_t)mm->k;
    kc_tensor_dense(&k->in[0], addr[0], d, 2, (int64_t[]){M, K});
    kc_tensor_dense(&k->in[1], addr[1], d, 2, (int64_t[]){K, N});
    kc_tensor_dense(&k->out[0], addr[2], cd, 2, (int64_t[]){M, N});
}

np_status kgen_matmul_build(const arch_config *cfg, const kgen_matmul *in, char **text,
                            isa_program **prog, np_err *err)
{
    *text = NULL;
    if (prog)
        *prog = NULL;
    kgen_matmul mm = *in;
    if (kgen_matmul_tiles(cfg, &mm, err) != NP_OK)
        return err->status;
    uint64_t e = isa_dtype_size[mm.dtype], ce = isa_dtype_size[kgen_matmul_out_dtype(mm.dtype)];
    static const char *const names[] = {"A", "B", "C"};
    uint64_t bytes[] = {mm.m * mm.k * e, mm.k * mm.n * e, mm.m * mm.n * ce};
    /* the array streams A (SCALE-Sim's mapping of the GEMM) */
    kc_kernel k = {.op = NN_OP_MATMUL, .n_in = 2, .n_out = 1, .n_attrs = 4,
                   .attrs = {KC_INT("tm", mm.tm), KC_INT("tn", mm.tn), KC_INT("tk", mm.tk),
                             KC_INT("ct", 1)}};
    return build_program(cfg, mm.cores ? mm.cores : 1, names, bytes, 3, &k, fill_matmul, &mm,
                         text, prog, err);
}

static uint64_t conv_sw(const kgen_conv *cv) { return cv->stride_w ? cv->stride_w : cv->stride; }

np_status kgen_conv_gemm(const kgen_conv *cv, kgen_matmul *mm, np_err *err)
{
    if (!cv->h || !cv->w || !cv->c || !cv->r || !cv->s || !cv->filters || !cv->stride)
        return np_err_set(err, NP_ERR_RANGE, "conv: every dimension and the stride must be >= 1");
    if (cv->r > cv->h || cv->s > cv->w)
        return np_err_set(err, NP_ERR_RANGE, "conv: a %llux%llu filter does not fit a %llux%llu "
                          "input", (unsigned long long)cv->r, (unsigned long long)cv->s,
                          (unsigned long long)cv->h, (unsigned long long)cv->w);
    uint64_t E = (cv->h - cv->r) / cv->stride + 1, F = (cv->w - cv->s) / conv_sw(cv) + 1;
    *mm = (kgen_matmul){E * F, cv->filters, cv->r * cv->s * cv->c, cv->dtype,
                        cv->tm, cv->tn, cv->tk, cv->cores};
    return NP_OK;
}

np_status kgen_conv_tiles(const arch_config *cfg, const kgen_conv *cv, kgen_matmul *mm,
                          np_err *err)
{
    kgen_matmul t;
    if (kgen_conv_gemm(cv, &t, err) != NP_OK || kgen_matmul_tiles(cfg, &t, err) != NP_OK)
        return err->status;
    uint64_t E = (cv->h - cv->r) / cv->stride + 1, F = t.m / E, SC = cv->s * cv->c;
    /* as the conv2d kernel cuts them (compiler/kc_matmul.c) */
    if (cfg->core.dataflow == ARCH_DATAFLOW_WS && !cv->tm) {
        uint64_t n = (t.m + t.tm - 1) / t.tm, tm = (E + n - 1) / n * F;
        if (tm <= t.tm)
            t.tm = tm;
    }
    if (cfg->core.dataflow == ARCH_DATAFLOW_OS && !cv->tk) {
        uint64_t n = (t.k + t.tk - 1) / t.tk, tk = (cv->r + n - 1) / n * SC;
        if (tk <= t.tk)
            t.tk = tk;
    }
    *mm = t;
    return NP_OK;
}

static void fill_conv(kc_kernel *k, const uint64_t *addr, const void *ctx)
{
    const kgen_conv *cv = ctx;
    nn_dtype d = kc_nn_dtype(cv->dtype), cd = kc_nn_dtype(kgen_matmul_out_dtype(cv->dtype));
    int64_t e = (int64_t)nn_dtype_size(d), ce = (int64_t)nn_dtype_size(cd);
    int64_t H = (int64_t)cv->h, W = (int64_t)cv->w, C = (int64_t)cv->c, R = (int64_t)cv->r,
            S = (int64_t)cv->s, O = (int64_t)cv->filters;
    int64_t E = (H - R) / (int64_t)cv->stride + 1, F = (W - S) / (int64_t)conv_sw(cv) + 1;
    /* buffers B (filters [(r, s, c)][o]), C (output [(oh, ow)][o]), X (input NHWC) */
    k->in[0] = (kc_tensor){addr[2], d, 4, {1, C, H, W}, {H * W * C * e, e, W * C * e, C * e}};
    k->in[1] = (kc_tensor){addr[0], d, 4, {O, C, R, S}, {e, O * e, S * C * O * e, C * O * e}};
    k->out[0] = (kc_tensor){addr[1], cd, 4, {1, O, E, F}, {E * F * O * ce, ce, F * O * ce, O * ce}};
}

np_status kgen_conv_build(const arch_config *cfg, const kgen_conv *cv, char **text,
                          isa_program **prog, np_err *err)
{
    *text = NULL;
    if (prog)
        *prog = NULL;
    kgen_matmul mm;
    if (cv->dtype >= ISA_DTYPE_COUNT)
        return np_err_set(err, NP_ERR_RANGE, "conv: unknown dtype %d", (int)cv->dtype);
    if (kgen_conv_tiles(cfg, cv, &mm, err) != NP_OK)
        return err->status;
    uint64_t e = isa_dtype_size[cv->dtype], ce = isa_dtype_size[kgen_matmul_out_dtype(cv->dtype)];
    static const char *const names[] = {"B", "C", "X"};
    uint64_t bytes[] = {mm.k * mm.n * e, mm.m * mm.n * ce, cv->h * cv->w * cv->c * e};
    kc_kernel k = {.op = NN_OP_CONV2D, .name = "conv", .n_in = 2, .n_out = 1, .n_attrs = 6,
                   .attrs = {KC_INT("stride", cv->stride), KC_INT("stride_w", conv_sw(cv)),
                             KC_INT("tm", mm.tm), KC_INT("tn", mm.tn), KC_INT("tk", mm.tk),
                             KC_INT("ct", 1)}};
    return build_program(cfg, cv->cores ? cv->cores : 1, names, bytes, 3, &k, fill_conv, cv, text,
                         prog, err);
}
