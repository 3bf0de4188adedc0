/* kgen_matmul.c — tiled double-buffered matmul as ISA assembly (see kgen_matmul.h). */
#include "kgen_matmul.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "isa_asm.h"
#include "kgen_text.h"

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
    /* With several cores, enough output tiles for all of them: halve the larger of the
     * output tile sizes not given. */
    for (uint64_t cores = mm->cores ? mm->cores : 1; cores > 1 && tm && tn;) {
        uint64_t tiles = ((mm->m + tm - 1) / tm) * ((mm->n + tn - 1) / tn);
        bool can_m = !mm->tm && tm > 1, can_n = !mm->tn && tn > 1;
        if (tiles >= cores || (!can_m && !can_n))
            break;
        if (can_m && (!can_n || tm >= tn))
            tm = (tm + 1) / 2;
        else
            tn = (tn + 1) / 2;
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

/* A convolution's geometry as the gathers need it. */
typedef struct conv_geo {
    uint64_t h, w, c, r, s, sh, sw, e_out, f_out; /* e_out x f_out output pixels */
    uint64_t sc;                                  /* S x C: one filter row's window run */
    bool rows_ok; /* a gather may step over filter rows (W x C x e fits src_s1) */
} conv_geo;

/* One gather: n2 x n1 x n0 elements from X + src to the scratchpad at dst (offsets in
 * elements x e for src, bytes for dst); strides in bytes, omitted where unused. */
static void emit_copy(kgen_text *b, const char *dt, uint64_t dst, uint64_t src, uint64_t n0,
                      uint64_t n1, uint64_t n2, uint64_t ds1, uint64_t ss1, uint64_t ds2,
                      uint64_t ss2)
{
    kgen_emit(b, "    dma.copy spad[0x%llx], hbm[X+0x%llx], %s, %llu", (unsigned long long)dst,
         (unsigned long long)src, dt, (unsigned long long)n0);
    if (n1 > 1 || n2 > 1)
        kgen_emit(b, ", %llu, %llu, dst_s1=%llu, src_s1=%llu", (unsigned long long)n1,
             (unsigned long long)n2, (unsigned long long)ds1, (unsigned long long)ss1);
    if (n2 > 1)
        kgen_emit(b, ", dst_s2=%llu, src_s2=%llu", (unsigned long long)ds2, (unsigned long long)ss2);
    kgen_emit(b, "\n");
}

/* The pieces of the M tile [i0, i0 + tm): each a partial output row or a run of whole
 * output rows. With fn non-NULL, calls it per piece; returns the count. */
static uint64_t tile_pieces(uint64_t F, uint64_t i0, uint64_t tm,
                            void (*fn)(void *, uint64_t, uint64_t, uint64_t), void *ctx)
{
    uint64_t end = i0 + tm, n = 0;
    for (uint64_t p = i0; p < end; n++) {
        uint64_t cnt, rows;
        if (p % F || end - p < F)
            cnt = min_u64(F - p % F, end - p), rows = 1;
        else
            cnt = F, rows = (end - p) / F;
        if (fn)
            fn(ctx, p, cnt, rows);
        p += cnt * rows;
    }
    return n;
}

typedef struct gather_ctx {
    kgen_text *b;
    const conv_geo *g;
    uint64_t e, sa, i0, k0, tk, klo, khi, *n;
    const char *dt;
} gather_ctx;

/* Per piece: one gather per filter row that columns [klo, khi) of the slice touch, of the
 * contiguous (s, c) run of that row: n0 = the run, n1 = pixels of a row (src step
 * stride_w x C), n2 = output rows (src step stride x W x C). */
static void gather_piece(void *v, uint64_t p, uint64_t cnt, uint64_t rows)
{
    const gather_ctx *x = v;
    const conv_geo *g = x->g;
    uint64_t oh = p / g->f_out, ow = p % g->f_out, e = x->e;
    for (uint64_t fr = x->klo / g->sc; fr * g->sc < x->khi; fr++) {
        uint64_t lo = fr * g->sc > x->klo ? fr * g->sc : x->klo;
        uint64_t hi = min_u64((fr + 1) * g->sc, x->khi);
        uint64_t src = ((oh * g->sh + fr) * g->w + ow * g->sw) * g->c + (lo - fr * g->sc);
        emit_copy(x->b, x->dt, x->sa + ((p - x->i0) * x->tk + (lo - x->k0)) * e, src * e,
                  hi - lo, cnt, rows, x->tk * e, g->sw * g->c * e, g->f_out * x->tk * e,
                  g->sh * g->w * g->c * e);
        ++*x->n;
    }
}

/* Emits the gathers of one A slice: tile rows [i0, i0 + tm) (output pixels), K columns
 * [k0, k0 + tk), into the scratchpad at sa (tm rows of tk elements). *n counts them.
 * The slice's whole filter rows [ra, rb) are gathered either per piece and filter row
 * (gather_piece) or, when that takes more copies, per output row the tile touches with one
 * copy for all of them (n0 = S x C, n1 = filter rows, src step W x C; n2 = pixels); the
 * partial filter rows at the slice's ends always per piece. */
static void emit_gather(kgen_text *b, const conv_geo *g, uint64_t e, const char *dt, uint64_t sa,
                        uint64_t i0, uint64_t tm, uint64_t k0, uint64_t tk, uint64_t *n)
{
    uint64_t F = g->f_out, SC = g->sc;
    uint64_t ra = (k0 + SC - 1) / SC, rb = (k0 + tk) / SC;
    gather_ctx x = {b, g, e, sa, i0, k0, tk, k0, k0 + tk, n, dt};
    if (rb > ra && g->rows_ok) {
        uint64_t pieces = tile_pieces(F, i0, tm, NULL, NULL);
        uint64_t touched = (i0 + tm - 1) / F - i0 / F + 1;
        if (touched < pieces * (rb - ra)) {
            if (k0 < ra * SC) /* the head: part of filter row ra - 1 */
                x.klo = k0, x.khi = ra * SC, tile_pieces(F, i0, tm, gather_piece, &x);
            for (uint64_t oh = i0 / F; oh * F < i0 + tm; oh++) {
                uint64_t lo = oh * F > i0 ? oh * F : i0, hi = min_u64((oh + 1) * F, i0 + tm);
                uint64_t src = ((oh * g->sh + ra) * g->w + (lo - oh * F) * g->sw) * g->c;
                emit_copy(b, dt, sa + ((lo - i0) * tk + (ra * SC - k0)) * e, src * e, SC,
                          rb - ra, hi - lo, SC * e, g->w * g->c * e, tk * e,
                          g->sw * g->c * e);
                ++*n;
            }
            if (rb * SC < k0 + tk) /* the tail: part of filter row rb */
                x.klo = rb * SC, x.khi = k0 + tk, tile_pieces(F, i0, tm, gather_piece, &x);
            return;
        }
    }
    tile_pieces(F, i0, tm, gather_piece, &x);
}

/* The matmul; for a convolution (g non-NULL) its A slices are gathered from X. */
static np_status build(const arch_config *cfg, const kgen_matmul *in, const conv_geo *g,
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
    uint64_t a_bytes = g ? 0 : M * K * e, b_bytes = K * N * e, c_bytes = M * N * ce;
    uint64_t x_bytes = g ? g->h * g->w * g->c * e : 0;
    if (KGEN_HBM_BASE + a_bytes + b_bytes + c_bytes + x_bytes + 4 * 64 > cfg->chip.hbm_bytes)
        return np_err_set(err, NP_ERR_RANGE, "%s: its operands (%llu bytes) do not fit the "
                          "HBM (%llu bytes)", g ? "conv" : "matmul",
                          (unsigned long long)(a_bytes + b_bytes + c_bytes + x_bytes),
                          (unsigned long long)cfg->chip.hbm_bytes);
    /* scratchpad layout: A0, A1 (TM x TK), B0, B1 (TK x TN), C (TM x TN) */
    uint64_t A0 = 0, A1 = TM * TK * e, B0 = 2 * TM * TK * e, B1 = B0 + TK * TN * e,
             C0 = B1 + TK * TN * e;
    const char *dt = isa_dtype_names[mm.dtype];
    kgen_text b;
    kgen_text_init(&b);
    if (g)
        kgen_emit(&b, "; conv %llux%llux%llu, %llux%llu filters, stride %llux%llu: implicit im2col "
             "(generated by kgen_matmul)\n", (unsigned long long)g->h, (unsigned long long)g->w,
             (unsigned long long)g->c, (unsigned long long)g->r, (unsigned long long)g->s,
             (unsigned long long)g->sh, (unsigned long long)g->sw);
    kgen_emit(&b, "; matmul %llux%llux%llu %s, tiles %llux%llux%llu (generated by kgen_matmul)\n",
         (unsigned long long)M, (unsigned long long)N, (unsigned long long)K, dt,
         (unsigned long long)TM, (unsigned long long)TN, (unsigned long long)TK);
    if (g)
        kgen_emit(&b, ".bss 0x%x\nB: .space %llu\n.align 64\nC: .space %llu\n.align 64\n"
             "X: .space %llu\n", KGEN_HBM_BASE, (unsigned long long)b_bytes,
             (unsigned long long)c_bytes, (unsigned long long)x_bytes);
    else
        kgen_emit(&b, ".bss 0x%x\nA: .space %llu\n.align 64\nB: .space %llu\n.align 64\n"
             "C: .space %llu\n", KGEN_HBM_BASE, (unsigned long long)a_bytes,
             (unsigned long long)b_bytes, (unsigned long long)c_bytes);
    uint64_t n_cores = mm.cores ? mm.cores : 1;
    uint64_t tiles_n = (N + TN - 1) / TN;
    for (uint64_t core = 0; core < n_cores && !b.oom; core++) {
        uint64_t insns = 4; /* this core's count: the signals, fence and halt */
        kgen_emit(&b, ".core %llu\n", (unsigned long long)core);
        kgen_emit(&b, ".kernel %s\n    sem.signal dma, s2\n    sem.signal dma, s3\n",
             g ? "conv" : "matmul");
        uint64_t slice = 0; /* buffers alternate across tiles too */
        for (uint64_t i0 = 0; i0 < M; i0 += TM)
            for (uint64_t j0 = 0; j0 < N; j0 += TN) {
                if (((i0 / TM) * tiles_n + j0 / TN) % n_cores != core)
                    continue; /* output tiles go round-robin over the cores */
                uint64_t tm = min_u64(TM, M - i0), tn = min_u64(TN, N - j0);
                for (uint64_t k0 = 0; k0 < K; k0 += TK, slice++) {
                    uint64_t tk = min_u64(TK, K - k0), bb = slice % 2;
                    uint64_t sa = bb ? A1 : A0, sb = bb ? B1 : B0;
                    kgen_emit(&b, "    sem.wait dma, s%llu\n", (unsigned long long)(2 + bb));
                    if (g)
                        emit_gather(&b, g, e, dt, sa, i0, tm, k0, tk, &insns);
                    else {
                        kgen_emit(&b, "    dma.copy spad[0x%llx], hbm[A+0x%llx], %s, %llu, %llu, "
                             "src_s1=%llu\n", (unsigned long long)sa,
                             (unsigned long long)((i0 * K + k0) * e), dt, (unsigned long long)tk,
                             (unsigned long long)tm, (unsigned long long)(K * e));
                        insns++;
                    }
                    kgen_emit(&b, "    dma.copy spad[0x%llx], hbm[B+0x%llx], %s, %llu, %llu, src_s1=%llu\n",
                         (unsigned long long)sb, (unsigned long long)((k0 * N + j0) * e), dt,
                         (unsigned long long)tn, (unsigned long long)tk, (unsigned long long)(N * e));
                    kgen_emit(&b, "    sem.signal dma, s%llu\n    sem.wait mxu, s%llu\n",
                         (unsigned long long)bb, (unsigned long long)bb);
                    kgen_emit(&b, "    mxu.load spad[0x%llx], %llu, %llu, %s\n", (unsigned long long)sb,
                         (unsigned long long)tk, (unsigned long long)tn, dt);
                    kgen_emit(&b, "    mxu.mm acc[0], spad[0x%llx], %llu, %s, mode=%s\n",
                         (unsigned long long)sa, (unsigned long long)tm, dt, k0 ? "accum" : "set");
                    kgen_emit(&b, "    sem.signal mxu, s%llu\n", (unsigned long long)(2 + bb));
                    insns += 8;
                }
                kgen_emit(&b, "    mxu.drain spad[0x%llx], acc[0], %llu, %llu, %s\n",
                     (unsigned long long)C0, (unsigned long long)tm, (unsigned long long)tn,
                     isa_dtype_names[cd]);
                kgen_emit(&b, "    sem.signal mxu, s4\n    sem.wait dma, s4\n");
                kgen_emit(&b, "    dma.copy hbm[C+0x%llx], spad[0x%llx], %s, %llu, %llu, dst_s1=%llu\n",
                     (unsigned long long)((i0 * N + j0) * ce), (unsigned long long)C0,
                     isa_dtype_names[cd], (unsigned long long)tn, (unsigned long long)tm,
                     (unsigned long long)(N * ce));
                insns += 4;
                if (insns > ISA_ASM_MAX_INSNS) {
                    kgen_text_free(&b);
                    return np_err_set(err, NP_ERR_RANGE, "conv: more than %u instructions on "
                                      "core %llu; use larger tiles", ISA_ASM_MAX_INSNS,
                                      (unsigned long long)core);
                }
            }
        kgen_emit(&b, "    fence\n    halt\n");
    }
    return kgen_text_finish(&b, cfg, "kgen_matmul.s", text, prog, err);
}

np_status kgen_matmul_build(const arch_config *cfg, const kgen_matmul *mm, char **text,
                            isa_program **prog, np_err *err)
{
    return build(cfg, mm, NULL, text, prog, err);
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
    /* The streamed dimension may shrink without costing a fold: cut it on window
     * boundaries (whole output rows / whole filter rows), keeping the tile count. */
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

np_status kgen_conv_build(const arch_config *cfg, const kgen_conv *cv, char **text,
                          isa_program **prog, np_err *err)
{
    *text = NULL;
    if (prog)
        *prog = NULL;
    kgen_matmul mm;
    if (kgen_conv_tiles(cfg, cv, &mm, err) != NP_OK)
        return err->status;
    if (cv->dtype >= ISA_DTYPE_COUNT)
        return np_err_set(err, NP_ERR_RANGE, "conv: unknown dtype %d", (int)cv->dtype);
    uint64_t e = isa_dtype_size[cv->dtype];
    conv_geo g = {cv->h, cv->w, cv->c, cv->r, cv->s, cv->stride, conv_sw(cv),
                  (cv->h - cv->r) / cv->stride + 1, 0, cv->s * cv->c,
                  cv->w * cv->c * e < (1u << 24) && cv->r <= 65535};
    g.f_out = mm.m / g.e_out;
    /* the gathers' fields: n0 20 bits, n1/n2 16 bits, s1 strides 24 bits, s2 27 bits; a
     * piece has at most min(TM, F) pixels a row and TM / F rows (the row strides matter
     * only when a tile can hold two whole output rows) */
    uint64_t tm_max = min_u64(mm.tm, mm.m);
    bool multi_rows = tm_max >= 2 * g.f_out;
    if (min_u64(g.sc, mm.tk) >= (1u << 20) || min_u64(g.f_out, tm_max) > 65535 ||
        tm_max / g.f_out > 65535 || mm.tk * e >= (1u << 24) || g.sw * g.c * e >= (1u << 24) ||
        (multi_rows && (g.sh * g.w * g.c * e >= (1u << 27) ||
                        g.f_out * mm.tk * e >= (1u << 27))))
        return np_err_set(err, NP_ERR_RANGE, "conv: too large for the gathers' dma.copy fields");
    return build(cfg, &mm, &g, text, prog, err);
}
