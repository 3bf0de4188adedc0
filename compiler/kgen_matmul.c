/* kgen_matmul.c — tiled double-buffered matmul as ISA assembly (see kgen_matmul.h). */
#include "kgen_matmul.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "isa_asm.h"

#define KGEN_HBM_BASE 0x100000u /* where A, B, C start in HBM */

static uint64_t min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }

isa_dtype kgen_matmul_out_dtype(isa_dtype in) { return in == ISA_DTYPE_INT8 ? ISA_DTYPE_INT32 : in; }

np_status kgen_matmul_tiles(const arch_config *cfg, kgen_matmul *mm, np_err *err)
{
    if (!mm->m || !mm->n || !mm->k)
        return np_err_set(err, NP_ERR_RANGE, "matmul %llux%llux%llu: M, N and K must be >= 1",
                          (unsigned long long)mm->m, (unsigned long long)mm->n,
                          (unsigned long long)mm->k);
    if (mm->dtype >= ISA_DTYPE_COUNT)
        return np_err_set(err, NP_ERR_RANGE, "matmul: unknown dtype %d", (int)mm->dtype);
    uint64_t e = isa_dtype_size[mm->dtype], ce = isa_dtype_size[kgen_matmul_out_dtype(mm->dtype)];
    uint64_t R = (uint64_t)cfg->core.array_rows, C = (uint64_t)cfg->core.array_cols;
    /* The dimension the dataflow streams through time (os: K, ws: M, is: N) gets the largest
     * tile the memories allow: splitting it makes every fold pay its fill and drain again.
     * The two spatial dimensions get 4 array widths, so folds stay whole. */
    uint64_t sram = cfg->core.sram_bytes, acc = cfg->core.acc_bytes;
    uint64_t tm = mm->tm, tn = mm->tn, tk = mm->tk;
    switch (cfg->core.dataflow) {
    case ARCH_DATAFLOW_OS:
        tm = tm ? tm : min_u64(mm->m, 4 * R);
        tn = tn ? tn : min_u64(mm->n, 4 * C);
        tm = min_u64(tm, 65535), tn = min_u64(tn, 65535);
        if (!mm->tm) /* the accumulators bound the spatial tile */
            while (tm > 1 && tm * tn * 4 > acc)
                tm = (tm + 1) / 2;
        if (!tk) {
            uint64_t fixed = tm * tn * ce;
            tk = sram > fixed ? (sram - fixed) / (2 * (tm + tn) * e) : 0;
            tk = min_u64(min_u64(mm->k, 65535), tk);
        }
        break;
    case ARCH_DATAFLOW_IS:
        tk = tk ? tk : min_u64(mm->k, 4 * R);
        tm = tm ? tm : min_u64(mm->m, 4 * C);
        tk = min_u64(tk, 65535), tm = min_u64(tm, 65535);
        if (!tn) {
            uint64_t by_acc = acc / (4 * tm), fixed = 2 * tm * tk * e;
            uint64_t by_spad = sram > fixed ? (sram - fixed) / (2 * tk * e + tm * ce) : 0;
            tn = min_u64(min_u64(mm->n, 65535), min_u64(by_acc, by_spad));
        }
        break;
    default: /* WS */
        tk = tk ? tk : min_u64(mm->k, 4 * R);
        tn = tn ? tn : min_u64(mm->n, 4 * C);
        tk = min_u64(tk, 65535), tn = min_u64(tn, 65535);
        if (!tm) {
            uint64_t by_acc = acc / (4 * tn), fixed = 2 * tk * tn * e;
            uint64_t by_spad = sram > fixed ? (sram - fixed) / (2 * tk * e + tn * ce) : 0;
            tm = min_u64(min_u64(mm->m, 65535), min_u64(by_acc, by_spad));
        }
        break;
    }
    if (!tm || !tn || !tk)
        return np_err_set(err, NP_ERR_RANGE,
                          "matmul %llux%llux%llu: no tile fits the scratchpad (%llu bytes) and "
                          "accumulators (%llu bytes)",
                          (unsigned long long)mm->m, (unsigned long long)mm->n,
                          (unsigned long long)mm->k, (unsigned long long)cfg->core.sram_bytes,
                          (unsigned long long)cfg->core.acc_bytes);
    if (tm * tn * 4 > cfg->core.acc_bytes)
        return np_err_set(err, NP_ERR_RANGE, "matmul: a %llux%llu tile needs %llu accumulator "
                          "bytes, more than the %llu there are", (unsigned long long)tm,
                          (unsigned long long)tn, (unsigned long long)(tm * tn * 4),
                          (unsigned long long)cfg->core.acc_bytes);
    if (2 * (tm * tk + tk * tn) * e + tm * tn * ce > cfg->core.sram_bytes)
        return np_err_set(err, NP_ERR_RANGE, "matmul: %llux%llux%llu tiles (double-buffered) "
                          "need more than the %llu scratchpad bytes", (unsigned long long)tm,
                          (unsigned long long)tn, (unsigned long long)tk,
                          (unsigned long long)cfg->core.sram_bytes);
    mm->tm = tm, mm->tn = tn, mm->tk = tk;
    return NP_OK;
}

typedef struct sbuf {
    char *s;
    size_t len, cap;
    bool oom;
} sbuf;

static void emit(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void emit(sbuf *b, const char *fmt, ...)
{
    if (b->oom)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->oom = true;
            return;
        }
        if ((size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        size_t nc = b->cap * 2 + (size_t)n + 1;
        char *ns = realloc(b->s, nc);
        if (!ns) {
            b->oom = true;
            return;
        }
        b->s = ns, b->cap = nc;
    }
}

/* The matmul, preceded for a convolution (cv non-NULL) by its im2col copies. */
static np_status build(const arch_config *cfg, const kgen_matmul *in, const kgen_conv *cv,
                       char **text, isa_program **prog, np_err *err)
{
    *text = NULL;
    if (prog)
        *prog = NULL;
    kgen_matmul mm = *in;
    if (kgen_matmul_tiles(cfg, &mm, err) != NP_OK)
        return err->status;
    if (mm.cores > (uint64_t)cfg->chip.cores)
        return np_err_set(err, NP_ERR_RANGE, "matmul: %llu cores asked for, the chip has %lld",
                          (unsigned long long)mm.cores, (long long)cfg->chip.cores);
    uint64_t e = isa_dtype_size[mm.dtype];
    isa_dtype cd = kgen_matmul_out_dtype(mm.dtype);
    uint64_t ce = isa_dtype_size[cd];
    uint64_t M = mm.m, N = mm.n, K = mm.k, TM = mm.tm, TN = mm.tn, TK = mm.tk;
    uint64_t n_tiles = ((M + TM - 1) / TM) * ((N + TN - 1) / TN), n_slices = (K + TK - 1) / TK;
    if (n_tiles * (n_slices * 9 + 6) + 8 > ISA_ASM_MAX_INSNS)
        return np_err_set(err, NP_ERR_RANGE, "matmul: %llu tiles x %llu slices is too long a "
                          "program; use larger tiles", (unsigned long long)n_tiles,
                          (unsigned long long)n_slices);
    uint64_t a_bytes = M * K * e, b_bytes = K * N * e, c_bytes = M * N * ce;
    uint64_t x_bytes = cv ? cv->h * cv->w * cv->c * e : 0;
    if (KGEN_HBM_BASE + a_bytes + b_bytes + c_bytes + x_bytes + 4 * 64 > cfg->chip.hbm_bytes)
        return np_err_set(err, NP_ERR_RANGE, "matmul: its operands (%llu bytes) do not fit the "
                          "HBM (%llu bytes)",
                          (unsigned long long)(a_bytes + b_bytes + c_bytes + x_bytes),
                          (unsigned long long)cfg->chip.hbm_bytes);
    /* scratchpad layout: A0, A1 (TM x TK), B0, B1 (TK x TN), C (TM x TN) */
    uint64_t A0 = 0, A1 = TM * TK * e, B0 = 2 * TM * TK * e, B1 = B0 + TK * TN * e,
             C0 = B1 + TK * TN * e;
    const char *dt = isa_dtype_names[mm.dtype];
    sbuf b = {malloc(4096), 0, 4096, false};
    if (!b.s)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory generating the matmul");
    emit(&b, "; matmul %llux%llux%llu %s, tiles %llux%llux%llu (generated by kgen_matmul)\n",
         (unsigned long long)M, (unsigned long long)N, (unsigned long long)K, dt,
         (unsigned long long)TM, (unsigned long long)TN, (unsigned long long)TK);
    emit(&b, ".bss 0x%x\nA: .space %llu\n.align 64\nB: .space %llu\n.align 64\nC: .space %llu\n",
         KGEN_HBM_BASE, (unsigned long long)a_bytes, (unsigned long long)b_bytes,
         (unsigned long long)c_bytes);
    if (cv)
        emit(&b, ".align 64\nX: .space %llu\n", (unsigned long long)x_bytes);
    uint64_t n_cores = mm.cores ? mm.cores : 1;
    uint64_t tiles_n = (N + TN - 1) / TN;
    for (uint64_t core = 0; core < n_cores; core++) {
        emit(&b, ".core %llu\n", (unsigned long long)core);
        if (cv && core == 0) {
            /* A[(oh, ow)][(r, s, c)] = X[oh * st + r][ow * st + s][c]: for each filter row r
             * one copy of E planes x F rows x S*C contiguous elements, HBM to HBM. */
            uint64_t E = (cv->h - cv->r) / cv->stride + 1, F = (cv->w - cv->s) / cv->stride + 1;
            emit(&b, ".kernel im2col\n");
            for (uint64_t r = 0; r < cv->r; r++)
                emit(&b, "    dma.copy hbm[A+0x%llx], hbm[X+0x%llx], %s, %llu, %llu, %llu, "
                     "dst_s1=%llu, src_s1=%llu, dst_s2=%llu, src_s2=%llu\n",
                     (unsigned long long)(r * cv->s * cv->c * e),
                     (unsigned long long)(r * cv->w * cv->c * e), dt,
                     (unsigned long long)(cv->s * cv->c), (unsigned long long)F,
                     (unsigned long long)E, (unsigned long long)(K * e),
                     (unsigned long long)(cv->stride * cv->c * e),
                     (unsigned long long)(F * K * e),
                     (unsigned long long)(cv->stride * cv->w * cv->c * e));
        }
        if (cv && n_cores > 1) /* every core waits for core 0's im2col */
            emit(&b, "    barrier 1\n");
        emit(&b, ".kernel matmul\n    sem.signal dma, s2\n    sem.signal dma, s3\n");
        uint64_t slice = 0; /* buffers alternate across tiles too */
        for (uint64_t i0 = 0; i0 < M; i0 += TM)
            for (uint64_t j0 = 0; j0 < N; j0 += TN) {
                if (((i0 / TM) * tiles_n + j0 / TN) % n_cores != core)
                    continue; /* output tiles go round-robin over the cores */
                uint64_t tm = min_u64(TM, M - i0), tn = min_u64(TN, N - j0);
                for (uint64_t k0 = 0; k0 < K; k0 += TK, slice++) {
                    uint64_t tk = min_u64(TK, K - k0), bb = slice % 2;
                    uint64_t sa = bb ? A1 : A0, sb = bb ? B1 : B0;
                    emit(&b, "    sem.wait dma, s%llu\n", (unsigned long long)(2 + bb));
                    emit(&b, "    dma.copy spad[0x%llx], hbm[A+0x%llx], %s, %llu, %llu, src_s1=%llu\n",
                         (unsigned long long)sa, (unsigned long long)((i0 * K + k0) * e), dt,
                         (unsigned long long)tk, (unsigned long long)tm, (unsigned long long)(K * e));
                    emit(&b, "    dma.copy spad[0x%llx], hbm[B+0x%llx], %s, %llu, %llu, src_s1=%llu\n",
                         (unsigned long long)sb, (unsigned long long)((k0 * N + j0) * e), dt,
                         (unsigned long long)tn, (unsigned long long)tk, (unsigned long long)(N * e));
                    emit(&b, "    sem.signal dma, s%llu\n    sem.wait mxu, s%llu\n",
                         (unsigned long long)bb, (unsigned long long)bb);
                    emit(&b, "    mxu.load spad[0x%llx], %llu, %llu, %s\n", (unsigned long long)sb,
                         (unsigned long long)tk, (unsigned long long)tn, dt);
                    emit(&b, "    mxu.mm acc[0], spad[0x%llx], %llu, %s, mode=%s\n",
                         (unsigned long long)sa, (unsigned long long)tm, dt, k0 ? "accum" : "set");
                    emit(&b, "    sem.signal mxu, s%llu\n", (unsigned long long)(2 + bb));
                }
                emit(&b, "    mxu.drain spad[0x%llx], acc[0], %llu, %llu, %s\n",
                     (unsigned long long)C0, (unsigned long long)tm, (unsigned long long)tn,
                     isa_dtype_names[cd]);
                emit(&b, "    sem.signal mxu, s4\n    sem.wait dma, s4\n");
                emit(&b, "    dma.copy hbm[C+0x%llx], spad[0x%llx], %s, %llu, %llu, dst_s1=%llu\n",
                     (unsigned long long)((i0 * N + j0) * ce), (unsigned long long)C0,
                     isa_dtype_names[cd], (unsigned long long)tn, (unsigned long long)tm,
                     (unsigned long long)(N * ce));
            }
        emit(&b, "    fence\n    halt\n");
    }
    if (b.oom) {
        free(b.s);
        return np_err_set(err, NP_ERR_NOMEM, "out of memory generating the matmul");
    }
    if (prog) {
        isa_target t;
        isa_target_from_arch(cfg, &t);
        isa_asm_opts o = {.target = &t};
        if (isa_asm(b.s, b.len, "kgen_matmul.s", &o, prog, err) != NP_OK) {
            free(b.s);
            return err->status;
        }
    }
    *text = b.s;
    return NP_OK;
}

np_status kgen_matmul_build(const arch_config *cfg, const kgen_matmul *mm, char **text,
                            isa_program **prog, np_err *err)
{
    return build(cfg, mm, NULL, text, prog, err);
}

np_status kgen_conv_gemm(const kgen_conv *cv, kgen_matmul *mm, np_err *err)
{
    if (!cv->h || !cv->w || !cv->c || !cv->r || !cv->s || !cv->filters || !cv->stride)
        return np_err_set(err, NP_ERR_RANGE, "conv: every dimension and the stride must be >= 1");
    if (cv->r > cv->h || cv->s > cv->w)
        return np_err_set(err, NP_ERR_RANGE, "conv: a %llux%llu filter does not fit a %llux%llu "
                          "input", (unsigned long long)cv->r, (unsigned long long)cv->s,
                          (unsigned long long)cv->h, (unsigned long long)cv->w);
    uint64_t E = (cv->h - cv->r) / cv->stride + 1, F = (cv->w - cv->s) / cv->stride + 1;
    *mm = (kgen_matmul){E * F, cv->filters, cv->r * cv->s * cv->c, cv->dtype, 0, 0, 0, cv->cores};
    return NP_OK;
}

np_status kgen_conv_build(const arch_config *cfg, const kgen_conv *cv, char **text,
                          isa_program **prog, np_err *err)
{
    *text = NULL;
    if (prog)
        *prog = NULL;
    kgen_matmul mm;
    if (kgen_conv_gemm(cv, &mm, err) != NP_OK)
        return err->status;
    uint64_t e = isa_dtype_size[cv->dtype];
    /* the DMA fields: n0 20 bits, n1/n2 16 bits, strides 24/27 bits */
    if (cv->s * cv->c >= (1u << 20) || mm.m > 65535u * 65535u ||
        (cv->w - cv->s) / cv->stride + 1 > 65535 || (cv->h - cv->r) / cv->stride + 1 > 65535 ||
        mm.k * e >= (1u << 24) || cv->stride * cv->c * e >= (1u << 24) ||
        cv->stride * cv->w * cv->c * e >= (1u << 27) ||
        ((cv->w - cv->s) / cv->stride + 1) * mm.k * e >= (1u << 27))
        return np_err_set(err, NP_ERR_RANGE, "conv: too large for the im2col copies' fields");
    return build(cfg, &mm, cv, text, prog, err);
}
