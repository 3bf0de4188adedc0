/* test_mxu.c — the systolic-array timing model (hw-model/mxu_timing) against two independent
 * references:
 *
 *  1. A cycle-by-cycle register-level model of an R x C array written here: operands move one
 *     PE per cycle through pipeline registers, partial sums move down (ws/is), every fold of
 *     the GEMM is enumerated and simulated, and the product it computes is checked against a
 *     plain triple loop (so the model really is a systolic array). Its cycle count must equal
 *     the closed form for every shape, array and dataflow.
 *  2. SCALE-Sim v2's own golden reports (test/general/golden_trace_user_{os,ws,is} in
 *     scalesim-project/scale-sim-v2: GEMM M=256 N=128 K=256 on a 32x32 array; the compute
 *     cycles there are Total Cycles - Stall Cycles, since that run had DRAM stalls).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "mxu_timing.h"
#include "mxu_scalecfg.h"
#include "mxu_topo.h"

/* ---- the cycle-level reference ------------------------------------------------------------ */

typedef struct pe_reg {
    int64_t v;
    int64_t tag; /* ws: which streamed row the value belongs to */
    int valid;
} pe_reg;

/* One output-stationary fold on a padded R x C array: A is R x T (row i feeds array row i),
 * B is T x C (column j feeds array column j). Adds the R x C products into acc; returns the
 * cycles from the first operand entering to the last MAC, inclusive. */
static uint64_t os_fold(uint64_t R, uint64_t C, uint64_t T, const int64_t *A, const int64_t *B,
                        int64_t *acc)
{
    pe_reg *a = calloc(R * C, sizeof *a), *b = calloc(R * C, sizeof *b);
    pe_reg *na = calloc(R * C, sizeof *na), *nb = calloc(R * C, sizeof *nb);
    uint64_t macs = 0, last = 0;
    for (uint64_t t = 0; macs < R * C * T; t++) {
        for (uint64_t i = 0; i < R; i++)
            for (uint64_t j = 0; j < C; j++) {
                pe_reg *x = &na[i * C + j], *y = &nb[i * C + j];
                if (j == 0) {
                    int64_t s = (int64_t)t - (int64_t)i; /* skewed entry of row i */
                    x->valid = s >= 0 && s < (int64_t)T;
                    x->v = x->valid ? A[i * T + (uint64_t)s] : 0;
                } else {
                    *x = a[i * C + j - 1];
                }
                if (i == 0) {
                    int64_t s = (int64_t)t - (int64_t)j;
                    y->valid = s >= 0 && s < (int64_t)T;
                    y->v = y->valid ? B[(uint64_t)s * C + j] : 0;
                } else {
                    *y = b[(i - 1) * C + j];
                }
            }
        memcpy(a, na, R * C * sizeof *a);
        memcpy(b, nb, R * C * sizeof *b);
        for (uint64_t p = 0; p < R * C; p++)
            if (a[p].valid && b[p].valid) {
                acc[p] += a[p].v * b[p].v;
                macs++;
                last = t;
            }
    }
    free(a), free(b), free(na), free(nb);
    return last + 1;
}

/* One weight-stationary fold: W (R x C) is shifted in from the top, one row per cycle, bottom
 * row first (R cycles); then X (T x R) streams in from the left, row r skewed by r cycles,
 * and partial sums flow down. Output (t, j) leaves the bottom of column j; adds it to
 * out[t * C + j]. Returns cycles from the first preload to the last output, inclusive. */
static uint64_t ws_fold(uint64_t R, uint64_t C, uint64_t T, const int64_t *W, const int64_t *X,
                        int64_t *out)
{
    int64_t *w = calloc(R * C, sizeof *w), *nw = calloc(R * C, sizeof *nw);
    pe_reg *x = calloc(R * C, sizeof *x), *nx = calloc(R * C, sizeof *nx);
    pe_reg *p = calloc(R * C, sizeof *p), *np = calloc(R * C, sizeof *np);
    uint64_t t = 0, outs = 0, last = 0;
    for (; t < R; t++) { /* preload */
        for (uint64_t i = 0; i < R; i++)
            for (uint64_t j = 0; j < C; j++)
                nw[i * C + j] = i == 0 ? W[(R - 1 - t) * C + j] : w[(i - 1) * C + j];
        memcpy(w, nw, R * C * sizeof *w);
    }
    for (; outs < T * C; t++) {
        for (uint64_t i = 0; i < R; i++)
            for (uint64_t j = 0; j < C; j++) {
                pe_reg *xi = &nx[i * C + j], *po = &np[i * C + j];
                if (j == 0) {
                    int64_t s = (int64_t)t - (int64_t)R - (int64_t)i;
                    xi->valid = s >= 0 && s < (int64_t)T;
                    xi->v = xi->valid ? X[(uint64_t)s * R + i] : 0;
                    xi->tag = s;
                } else {
                    *xi = x[i * C + j - 1];
                }
                po->valid = xi->valid;
                if (xi->valid) {
                    int64_t in = 0;
                    if (i > 0) {
                        const pe_reg *up = &p[(i - 1) * C + j];
                        CU_ASSERT_FATAL(up->valid && up->tag == xi->tag);
                        in = up->v;
                    }
                    po->v = in + xi->v * w[i * C + j];
                    po->tag = xi->tag;
                }
            }
        memcpy(x, nx, R * C * sizeof *x);
        memcpy(p, np, R * C * sizeof *p);
        for (uint64_t j = 0; j < C; j++) {
            const pe_reg *o = &p[(R - 1) * C + j];
            if (o->valid) {
                out[(uint64_t)o->tag * C + j] += o->v;
                outs++;
                last = t;
            }
        }
    }
    free(w), free(nw), free(x), free(nx), free(p), free(np);
    return last + 1;
}

typedef struct ref_result {
    uint64_t cycles;
    double mapping_pct, util_pct; /* SCALE-Sim's per-fold means */
} ref_result;

static int64_t elem(uint64_t i, uint64_t j, uint64_t salt)
{
    return (int64_t)((i * 2654435761u + j * 40503u + salt * 97u) % 13) - 6;
}

/* Runs the GEMM fold by fold on the cycle model and checks the product. */
static ref_result ref_gemm(uint64_t R, uint64_t C, arch_dataflow df, uint64_t M, uint64_t N,
                           uint64_t K)
{
    int64_t *A = malloc(M * K * sizeof *A), *B = malloc(K * N * sizeof *B);
    int64_t *out = calloc(M * N, sizeof *out);
    for (uint64_t i = 0; i < M; i++)
        for (uint64_t k = 0; k < K; k++)
            A[i * K + k] = elem(i, k, 1);
    for (uint64_t k = 0; k < K; k++)
        for (uint64_t j = 0; j < N; j++)
            B[k * N + j] = elem(k, j, 2);
    uint64_t Sr = df == ARCH_DATAFLOW_OS ? M : K;
    uint64_t Sc = df == ARCH_DATAFLOW_IS ? M : N;
    uint64_t T = df == ARCH_DATAFLOW_OS ? K : df == ARCH_DATAFLOW_WS ? M : N;
    ref_result r = {0};
    double map_sum = 0, util_sum = 0;
    uint64_t nfold = 0;
    for (uint64_t c0 = 0; c0 < Sc; c0 += C)
        for (uint64_t r0 = 0; r0 < Sr; r0 += R) {
            uint64_t ru = Sr - r0 < R ? Sr - r0 : R, cu = Sc - c0 < C ? Sc - c0 : C;
            int64_t *S = calloc(R * (T > C ? T : C) + R * C, sizeof *S); /* stationary/left */
            int64_t *F = calloc(T * (R > C ? R : C), sizeof *F);         /* streamed */
            uint64_t cyc;
            if (df == ARCH_DATAFLOW_OS) {
                int64_t *acc = calloc(R * C, sizeof *acc);
                for (uint64_t i = 0; i < ru; i++) /* A rows r0.., R x T */
                    for (uint64_t t = 0; t < T; t++)
                        S[i * T + t] = A[(r0 + i) * K + t];
                for (uint64_t t = 0; t < T; t++) /* B cols c0.., T x C */
                    for (uint64_t j = 0; j < cu; j++)
                        F[t * C + j] = B[t * N + c0 + j];
                cyc = os_fold(R, C, T, S, F, acc);
                for (uint64_t i = 0; i < ru; i++)
                    for (uint64_t j = 0; j < cu; j++)
                        out[(r0 + i) * N + c0 + j] += acc[i * C + j];
                free(acc);
            } else {
                int64_t *o = calloc(T * C, sizeof *o);
                for (uint64_t i = 0; i < ru; i++)
                    for (uint64_t j = 0; j < cu; j++) /* stationary R x C */
                        S[i * C + j] = df == ARCH_DATAFLOW_WS ? B[(r0 + i) * N + c0 + j]
                                                              : A[(c0 + j) * K + r0 + i];
                for (uint64_t t = 0; t < T; t++) /* streamed T x R */
                    for (uint64_t i = 0; i < ru; i++)
                        F[t * R + i] = df == ARCH_DATAFLOW_WS ? A[t * K + r0 + i]
                                                              : B[(r0 + i) * N + t];
                cyc = ws_fold(R, C, T, S, F, o);
                for (uint64_t t = 0; t < T; t++)
                    for (uint64_t j = 0; j < cu; j++) {
                        if (df == ARCH_DATAFLOW_WS)
                            out[t * N + c0 + j] += o[t * C + j];
                        else
                            out[(c0 + j) * N + t] += o[t * C + j];
                    }
                free(o);
            }
            free(S), free(F);
            r.cycles += cyc;
            /* SCALE-Sim's fold length for utilization: the ofmap demand (T-1 prefix + R rows,
             * C wide, skewed) for os; the filter (ws) / ifmap (is) demand before skew
             * (R rows + R+C+T-2 suffix, C wide) for ws/is: rows + width - 1. */
            uint64_t util_cyc = df == ARCH_DATAFLOW_OS ? (T - 1 + R) + C - 1
                                                       : (R + (R + C + T - 2)) + C - 1;
            map_sum += (double)(ru * cu) / (double)(R * C);
            util_sum += (double)(ru * cu * T) / (double)(R * C * util_cyc);
            nfold++;
        }
    for (uint64_t i = 0; i < M; i++) /* the array computed the right product */
        for (uint64_t j = 0; j < N; j++) {
            int64_t s = 0;
            for (uint64_t k = 0; k < K; k++)
                s += A[i * K + k] * B[k * N + j];
            CU_ASSERT_EQUAL_FATAL(out[i * N + j], s);
        }
    r.mapping_pct = 100.0 * map_sum / (double)nfold;
    r.util_pct = 100.0 * util_sum / (double)nfold;
    free(A), free(B), free(out);
    return r;
}

static const uint64_t shapes[][3] = {
    {1, 1, 1},   {4, 4, 4},   {5, 7, 3},   {17, 9, 13}, {8, 8, 8},   {3, 20, 11},
    {33, 2, 9},  {1, 31, 7},  {12, 1, 5},  {9, 9, 1},   {16, 4, 23}, {7, 13, 29},
    {2, 2, 40},  {40, 3, 2},  {6, 17, 6},  {25, 25, 25}, {11, 5, 19}, {13, 16, 4},
    {30, 7, 7},  {1, 1, 50},  {50, 1, 1},  {10, 30, 20}, {19, 23, 17}, {4, 33, 3},
};
static const uint64_t arrays[][2] = {{4, 4}, {8, 4}, {3, 5}, {1, 1}, {7, 2}};
static const arch_dataflow dfs[] = {ARCH_DATAFLOW_OS, ARCH_DATAFLOW_WS, ARCH_DATAFLOW_IS};

static int close_pct(double a, double b) { return a - b < 1e-9 && b - a < 1e-9; }

TEST(closed_form_equals_the_cycle_level_array_for_every_shape_array_and_dataflow)
{
    unsigned checked = 0;
    for (size_t a = 0; a < sizeof arrays / sizeof arrays[0]; a++)
        for (size_t d = 0; d < 3; d++)
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
                mxu_array arr = {arrays[a][0], arrays[a][1], dfs[d], false, false};
                uint64_t M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
                mxu_timing t;
                np_err e = {0};
                CU_ASSERT_EQUAL_FATAL(mxu_gemm_timing(&arr, M, N, K, &t, &e), NP_OK);
                ref_result r = ref_gemm(arr.rows, arr.cols, dfs[d], M, N, K);
                CU_ASSERT_EQUAL(t.cycles, r.cycles);
                CU_ASSERT_EQUAL(t.scalesim_cycles, r.cycles - 1);
                CU_ASSERT_EQUAL(mxu_gemm_cycles(&arr, M, N, K), r.cycles);
                CU_ASSERT(close_pct(t.mapping_efficiency_pct, r.mapping_pct));
                CU_ASSERT(close_pct(t.compute_util_pct, r.util_pct));
                CU_ASSERT_EQUAL(t.macs, M * N * K);
                checked++;
            }
    CU_ASSERT_EQUAL(checked, 5 * 3 * 24);
}

/* ---- pipelined folds: the cycle-level array with overlapping folds -------------------------
 *
 * The same registers as above, with what lets folds overlap: each PE of an os array drives its
 * column's output line (one value a cycle, leaving through the bottom edge) in the cycle of its
 * T-th MAC and starts the next fold at 0; a ws/is array shifts the next stationary tile down
 * a transport register per PE (bottom row's value first, one a cycle per column), each PE
 * capturing its own value as it passes — into a shadow register that the fold's first
 * streamed element swaps in (double-buffered), or straight into the weight register. Every
 * register carries the fold (and stream row) it belongs to, so an overlap the hardware cannot
 * do shows as a hazard: two folds on one feeder or output line in a cycle, a PE meeting
 * operands of two folds, a weight or partial sum of another fold, a shadow overwritten before
 * it was swapped in. Each fold is then placed greedily, as early as the array allows: its
 * tile's load per column, then its stream, each the earliest cycle for which a simulation of
 * it beside the fold before shows no hazard (found by bisection: later never hurts). The
 * whole sequence is finally simulated with every hazard fatal, the products checked against
 * a triple loop, and the cycles (to the last output) compared with the closed form. */

#define PS_MAX 16
#define PS_FAR (INT64_MAX / 4)

typedef struct pfold {
    uint64_t T;          /* streamed rows */
    const int64_t *S;    /* os: A part, R x T; ws/is: stationary tile, R x C */
    const int64_t *X;    /* os: B part, T x C; ws/is: streamed, T x R */
    int64_t *out;        /* os: R x C; ws/is: T x C (added to) */
    int64_t s;           /* its stream's first cycle */
    int64_t L[PS_MAX];   /* ws/is: the cycle each column's load of its tile starts */
    int64_t last;        /* its last cycle of activity (the simulation's) */
} pfold;

typedef struct preg {
    int64_t v, f, t; /* value, fold, stream row (transport: destination row) */
    int valid;
} preg;

/* Marks fold f on line `line` of an occupancy table at cycle c; a second fold is a hazard. */
static int occ_mark(int32_t *occ, int64_t n_cyc, uint64_t line, int64_t c, int32_t f)
{
    if (c < 0 || c >= n_cyc)
        return 0;
    int32_t *o = &occ[line * (uint64_t)n_cyc + (uint64_t)c];
    if (*o >= 0)
        return 1;
    *o = f;
    return 0;
}

/* Simulates folds fs[0..n) on an R x C array; returns the number of hazards (stopping at the
 * first unless fatal, when each fails the test) and the cycles to the last activity in *cyc. */
static unsigned psim(uint64_t R, uint64_t C, bool os, bool db, pfold *fs, unsigned n, bool fatal,
                     uint64_t *cyc)
{
    int64_t end = 0;
    for (unsigned f = 0; f < n; f++) {
        if (fs[f].s < PS_FAR && fs[f].s + (int64_t)(fs[f].T + R + C) + 2 > end)
            end = fs[f].s + (int64_t)(fs[f].T + R + C) + 2;
        for (uint64_t j = 0; !os && j < C; j++)
            if (fs[f].L[j] < PS_FAR && fs[f].L[j] + (int64_t)(2 * R + C) > end)
                end = fs[f].L[j] + (int64_t)(2 * R + C);
    }
    unsigned hz = 0;
#define HAZARD()                                                                                    \
    do {                                                                                           \
        hz++;                                                                                      \
        if (fatal)                                                                                 \
            CU_FAIL("hazard in the pipelined array");                                              \
        goto out;                                                                                  \
    } while (0)
    /* who drives each left feeder (rows) and top feeder (columns) at each cycle */
    int32_t *rows = malloc(R * (uint64_t)end * sizeof *rows);
    int32_t *cols = malloc(C * (uint64_t)end * sizeof *cols);
    preg *a = calloc(R * C, sizeof *a), *na = calloc(R * C, sizeof *na); /* os A, ws x */
    preg *b = calloc(R * C, sizeof *b), *nb = calloc(R * C, sizeof *nb); /* os B, ws psum */
    preg *tr = calloc(R * C, sizeof *tr), *ntr = calloc(R * C, sizeof *ntr);
    preg *act = calloc(R * C, sizeof *act), *sh = calloc(R * C, sizeof *sh);
    int64_t *acc = calloc(R * C, sizeof *acc), *cnt = calloc(R * C, sizeof *cnt);
    int64_t *cur = malloc(R * C * sizeof *cur);
    memset(rows, 0xff, R * (uint64_t)end * sizeof *rows);
    memset(cols, 0xff, C * (uint64_t)end * sizeof *cols);
    for (uint64_t p = 0; p < R * C; p++)
        cur[p] = -1;
    for (unsigned f = 0; f < n; f++) {
        fs[f].last = -1;
        for (uint64_t t = 0; fs[f].s < PS_FAR && t < fs[f].T; t++) {
            for (uint64_t i = 0; i < R; i++)
                if (occ_mark(rows, end, i, fs[f].s + (int64_t)(t + i), (int32_t)f))
                    HAZARD();
            for (uint64_t j = 0; os && j < C; j++)
                if (occ_mark(cols, end, j, fs[f].s + (int64_t)(t + j), (int32_t)f))
                    HAZARD();
        }
        for (uint64_t j = 0; !os && j < C; j++)
            for (uint64_t q = 0; fs[f].L[j] < PS_FAR && q < R; q++)
                if (occ_mark(cols, end, j, fs[f].L[j] + (int64_t)q, (int32_t)f))
                    HAZARD();
    }
    for (int64_t c = 0; c < end; c++) {
        for (uint64_t i = 0; i < R; i++)
            for (uint64_t j = 0; j < C; j++) {
                uint64_t p = i * C + j;
                preg *x = &na[p];
                if (j > 0) {
                    *x = a[p - 1];
                } else {
                    int32_t f = rows[i * (uint64_t)end + (uint64_t)c];
                    x->valid = f >= 0;
                    if (f >= 0) {
                        uint64_t t = (uint64_t)(c - fs[f].s) - i;
                        x->f = f, x->t = (int64_t)t;
                        x->v = os ? fs[f].S[i * fs[f].T + t] : fs[f].X[t * R + i];
                    }
                }
                if (os) { /* B from the top */
                    preg *y = &nb[p];
                    if (i > 0) {
                        *y = b[p - C];
                    } else {
                        int32_t f = cols[j * (uint64_t)end + (uint64_t)c];
                        y->valid = f >= 0;
                        if (f >= 0) {
                            uint64_t t = (uint64_t)(c - fs[f].s) - j;
                            y->f = f, y->t = (int64_t)t, y->v = fs[f].X[t * C + j];
                        }
                    }
                } else { /* the tile's transport from the top */
                    preg *y = &ntr[p];
                    if (i > 0) {
                        *y = tr[p - C];
                        if (y->valid && y->t == (int64_t)i - 1)
                            y->valid = 0; /* captured a row above */
                    } else {
                        int32_t f = cols[j * (uint64_t)end + (uint64_t)c];
                        y->valid = f >= 0;
                        if (f >= 0) {
                            uint64_t row = R - 1 - (uint64_t)(c - fs[f].L[j]);
                            y->f = f, y->t = (int64_t)row, y->v = fs[f].S[row * C + j];
                        }
                    }
                }
            }
        bool line[PS_MAX] = {false};
        for (uint64_t i = 0; i < R; i++)
            for (uint64_t j = 0; j < C; j++) {
                uint64_t p = i * C + j;
                const preg *x = &na[p];
                if (os) {
                    const preg *y = &nb[p];
                    if (!x->valid && !y->valid)
                        continue;
                    if (!x->valid || !y->valid || x->f != y->f || x->t != y->t)
                        HAZARD(); /* operands of two folds or rows meet */
                    if (cur[p] != x->f) {
                        if (cnt[p])
                            HAZARD(); /* the PE has not finished its fold */
                        cur[p] = x->f, acc[p] = 0;
                    }
                    acc[p] += x->v * y->v;
                    if (++cnt[p] == (int64_t)fs[x->f].T) { /* onto the column's output line */
                        if (line[j])
                            HAZARD();
                        line[j] = true;
                        fs[x->f].out[p] += acc[p];
                        fs[x->f].last = c;
                        cnt[p] = 0, cur[p] = -1;
                    }
                    continue;
                }
                preg *o = &nb[p];
                o->valid = 0;
                const preg *up = i > 0 ? &b[p - C] : NULL;
                if (x->valid) {
                    if (db && (!act[p].valid || act[p].f != x->f)) { /* the fold's first row */
                        if (!sh[p].valid || sh[p].f != x->f)
                            HAZARD(); /* its weight is not there yet */
                        act[p] = sh[p];
                        sh[p].valid = 0;
                    }
                    if (!act[p].valid || act[p].f != x->f)
                        HAZARD(); /* another fold's weight */
                    int64_t in = 0;
                    if (up) {
                        if (!up->valid || up->f != x->f || up->t != x->t)
                            HAZARD(); /* another row's partial sum */
                        in = up->v;
                    }
                    *o = (preg){in + x->v * act[p].v, x->f, x->t, 1};
                } else if (up && up->valid) {
                    HAZARD(); /* a partial sum without its input */
                }
                const preg *w = &ntr[p];
                if (w->valid && w->t == (int64_t)i) { /* capture this PE's weight */
                    preg *dst = db ? &sh[p] : &act[p];
                    if (db && sh[p].valid)
                        HAZARD(); /* the shadow's tile was not swapped in yet */
                    *dst = (preg){w->v, w->f, 0, 1};
                }
            }
        if (!os)
            for (uint64_t j = 0; j < C; j++) {
                const preg *o = &nb[(R - 1) * C + j];
                if (o->valid) {
                    fs[o->f].out[(uint64_t)o->t * C + j] += o->v;
                    fs[o->f].last = c;
                }
            }
        preg *t;
        t = a, a = na, na = t;
        t = b, b = nb, nb = t;
        t = tr, tr = ntr, ntr = t;
    }
out:
#undef HAZARD
    *cyc = 0;
    for (unsigned f = 0; f < n; f++)
        if (fs[f].last + 1 > (int64_t)*cyc)
            *cyc = (uint64_t)(fs[f].last + 1);
    free(rows), free(cols), free(a), free(na), free(b), free(nb), free(tr), free(ntr);
    free(act), free(sh), free(acc), free(cnt), free(cur);
    return hz;
}

/* Whether fold f placed as it is runs beside fold f - 1 without a hazard (outputs discarded). */
static bool pfits(uint64_t R, uint64_t C, bool os, bool db, const pfold *fs, unsigned f)
{
    pfold two[2];
    unsigned n = 0;
    int64_t *scratch[2];
    for (unsigned k = f ? f - 1 : f; k <= f; k++) {
        two[n] = fs[k];
        scratch[n] = calloc((fs[k].T > R ? fs[k].T : R) * C, sizeof **scratch);
        two[n].out = scratch[n];
        n++;
    }
    uint64_t cyc;
    unsigned hz = psim(R, C, os, db, two, n, false, &cyc);
    for (unsigned k = 0; k < n; k++)
        free(scratch[k]);
    return hz == 0;
}

/* The least value in [lo, lo + span] for which fits() holds (bisection: later never hurts). */
static int64_t pearliest(uint64_t R, uint64_t C, bool os, bool db, pfold *fs, unsigned f,
                         int64_t *field, int64_t lo, int64_t span)
{
    int64_t hi = lo + span;
    *field = hi;
    CU_ASSERT_FATAL(pfits(R, C, os, db, fs, f));
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        *field = mid;
        if (pfits(R, C, os, db, fs, f))
            hi = mid;
        else
            lo = mid + 1;
    }
    *field = lo;
    return lo;
}

/* Places folds fs[0..n) greedily, each as early as the array allows after the one before. */
static void pplace(uint64_t R, uint64_t C, bool os, bool db, pfold *fs, unsigned n)
{
    for (unsigned f = 0; f < n; f++) {
        int64_t span = (int64_t)(4 * (R + C) + 2 * (fs[f].T + (f ? fs[f - 1].T : 0)) + 8);
        fs[f].s = PS_FAR;
        for (uint64_t j = 0; j < PS_MAX; j++)
            fs[f].L[j] = PS_FAR;
        for (uint64_t j = 0; !os && j < C; j++) /* each column's load, the others not loading */
            pearliest(R, C, os, db, fs, f, &fs[f].L[j], f ? fs[f - 1].L[j] + (int64_t)R : 0, span);
        pearliest(R, C, os, db, fs, f, &fs[f].s, f ? fs[f - 1].s + 1 : 0, span);
    }
}

/* One GEMM's folds on the model (operands from A, B; products into out), as ref_gemm cuts
 * them; appends them to fs (returns how many). The buffers are freed by pfree. */
static unsigned pfolds(uint64_t R, uint64_t C, arch_dataflow df, uint64_t M, uint64_t N,
                       uint64_t K, const int64_t *A, const int64_t *B, int64_t *out, pfold *fs)
{
    bool os = df == ARCH_DATAFLOW_OS;
    uint64_t Sr = os ? M : K, Sc = df == ARCH_DATAFLOW_IS ? M : N;
    uint64_t T = os ? K : df == ARCH_DATAFLOW_WS ? M : N;
    unsigned n = 0;
    for (uint64_t c0 = 0; c0 < Sc; c0 += C)
        for (uint64_t r0 = 0; r0 < Sr; r0 += R, n++) {
            uint64_t ru = Sr - r0 < R ? Sr - r0 : R, cu = Sc - c0 < C ? Sc - c0 : C;
            int64_t *S = calloc(R * (T > C ? T : C), sizeof *S);
            int64_t *X = calloc(T * (R > C ? R : C), sizeof *X);
            for (uint64_t i = 0; i < ru; i++)
                for (uint64_t t = 0; os && t < T; t++)
                    S[i * T + t] = A[(r0 + i) * K + t];
            for (uint64_t t = 0; os && t < T; t++)
                for (uint64_t j = 0; j < cu; j++)
                    X[t * C + j] = B[t * N + c0 + j];
            for (uint64_t i = 0; !os && i < ru; i++)
                for (uint64_t j = 0; j < cu; j++)
                    S[i * C + j] = df == ARCH_DATAFLOW_WS ? B[(r0 + i) * N + c0 + j]
                                                          : A[(c0 + j) * K + r0 + i];
            for (uint64_t t = 0; !os && t < T; t++)
                for (uint64_t i = 0; i < ru; i++)
                    X[t * R + i] = df == ARCH_DATAFLOW_WS ? A[t * K + r0 + i] : B[(r0 + i) * N + t];
            fs[n] = (pfold){.T = T, .S = S, .X = X, .out = calloc((T > R ? T : R) * C, sizeof(int64_t))};
            /* where this fold's outputs go: kept in the fold's own buffer, added up below */
            (void)out;
        }
    return n;
}

/* Adds each fold's outputs into the GEMM's out (M x N), the inverse of pfolds' cut. */
static void pgather(uint64_t R, uint64_t C, arch_dataflow df, uint64_t M, uint64_t N, uint64_t K,
                    const pfold *fs, int64_t *out)
{
    bool os = df == ARCH_DATAFLOW_OS;
    uint64_t Sr = os ? M : K, Sc = df == ARCH_DATAFLOW_IS ? M : N;
    uint64_t T = os ? K : df == ARCH_DATAFLOW_WS ? M : N;
    unsigned n = 0;
    for (uint64_t c0 = 0; c0 < Sc; c0 += C)
        for (uint64_t r0 = 0; r0 < Sr; r0 += R, n++) {
            uint64_t ru = Sr - r0 < R ? Sr - r0 : R, cu = Sc - c0 < C ? Sc - c0 : C;
            const int64_t *o = fs[n].out;
            for (uint64_t i = 0; os && i < ru; i++)
                for (uint64_t j = 0; j < cu; j++)
                    out[(r0 + i) * N + c0 + j] += o[i * C + j];
            for (uint64_t t = 0; !os && t < T; t++)
                for (uint64_t j = 0; j < cu; j++) {
                    if (df == ARCH_DATAFLOW_WS)
                        out[t * N + c0 + j] += o[t * C + j];
                    else
                        out[(c0 + j) * N + t] += o[t * C + j];
                }
        }
}

static void pfree(pfold *fs, unsigned n)
{
    for (unsigned f = 0; f < n; f++)
        free((void *)fs[f].S), free((void *)fs[f].X), free(fs[f].out);
}

/* A GEMM's operands and the product they must give. */
typedef struct pgemm {
    uint64_t M, N, K;
    int64_t *A, *B, *out;
} pgemm;

static pgemm pgemm_new(uint64_t M, uint64_t N, uint64_t K, uint64_t salt)
{
    pgemm g = {M, N, K, malloc(M * K * sizeof(int64_t)), malloc(K * N * sizeof(int64_t)),
               calloc(M * N, sizeof(int64_t))};
    for (uint64_t i = 0; i < M; i++)
        for (uint64_t k = 0; k < K; k++)
            g.A[i * K + k] = elem(i, k, 1 + salt);
    for (uint64_t k = 0; k < K; k++)
        for (uint64_t j = 0; j < N; j++)
            g.B[k * N + j] = elem(k, j, 2 + salt);
    return g;
}

static void pgemm_check_free(pgemm *g)
{
    for (uint64_t i = 0; i < g->M; i++)
        for (uint64_t j = 0; j < g->N; j++) {
            int64_t s = 0;
            for (uint64_t k = 0; k < g->K; k++)
                s += g->A[i * g->K + k] * g->B[k * g->N + j];
            CU_ASSERT_EQUAL_FATAL(g->out[i * g->N + j], s);
        }
    free(g->A), free(g->B), free(g->out);
}

static uint64_t pfold_count(uint64_t R, uint64_t C, arch_dataflow df, uint64_t M, uint64_t N,
                            uint64_t K)
{
    uint64_t Sr = df == ARCH_DATAFLOW_OS ? M : K, Sc = df == ARCH_DATAFLOW_IS ? M : N;
    return ((Sr + R - 1) / R) * ((Sc + C - 1) / C);
}

/* The shapes of the pipelined checks: the shapes above but the largest (the cycle model of a
 * whole sequence is slower than the fold-by-fold one). */
static bool pshape_ok(uint64_t M, uint64_t N, uint64_t K) { return M * N * K <= 4000; }

TEST(pipelined_closed_form_equals_the_cycle_level_array_with_overlapping_folds)
{
    unsigned checked = 0;
    for (size_t a = 0; a < sizeof arrays / sizeof arrays[0]; a++)
        for (size_t d = 0; d < 3; d++)
            for (int db = 0; db < (dfs[d] == ARCH_DATAFLOW_OS ? 1 : 2); db++)
                for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
                    uint64_t M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
                    uint64_t R = arrays[a][0], C = arrays[a][1];
                    if (!pshape_ok(M, N, K))
                        continue;
                    bool os = dfs[d] == ARCH_DATAFLOW_OS;
                    mxu_array arr = {R, C, dfs[d], db != 0, true};
                    uint64_t F = pfold_count(R, C, dfs[d], M, N, K);
                    pfold *fs = calloc(F, sizeof *fs);
                    pgemm g = pgemm_new(M, N, K, s);
                    CU_ASSERT_EQUAL_FATAL(pfolds(R, C, dfs[d], M, N, K, g.A, g.B, g.out, fs), F);
                    pplace(R, C, os, db, fs, (unsigned)F);
                    uint64_t cyc;
                    CU_ASSERT_EQUAL(psim(R, C, os, db, fs, (unsigned)F, true, &cyc), 0u);
                    pgather(R, C, dfs[d], M, N, K, fs, g.out);
                    pgemm_check_free(&g);
                    mxu_timing t;
                    np_err e = {0};
                    CU_ASSERT_EQUAL_FATAL(mxu_gemm_timing(&arr, M, N, K, &t, &e), NP_OK);
                    if (t.cycles != cyc)
                        fprintf(stderr, "\n    %s%s %llux%llu GEMM %llux%llux%llu: the array %llu "
                                "cycles, the closed form %llu\n", os ? "os" : dfs[d] == ARCH_DATAFLOW_WS ? "ws" : "is",
                                db ? " db" : "", (unsigned long long)R, (unsigned long long)C,
                                (unsigned long long)M, (unsigned long long)N, (unsigned long long)K,
                                (unsigned long long)cyc, (unsigned long long)t.cycles);
                    CU_ASSERT_EQUAL(t.cycles, cyc);
                    CU_ASSERT_EQUAL(fs[0].s, (int64_t)t.lead);
                    for (uint64_t f = 1; f < F; f++)
                        CU_ASSERT_EQUAL(fs[f].s - fs[f - 1].s, (int64_t)t.period);
                    /* SCALE-Sim's figures do not move */
                    arr.pipelined = false;
                    mxu_timing u;
                    CU_ASSERT_EQUAL_FATAL(mxu_gemm_timing(&arr, M, N, K, &u, &e), NP_OK);
                    CU_ASSERT_EQUAL(t.scalesim_cycles, u.scalesim_cycles);
                    CU_ASSERT(t.cycles <= u.cycles);
                    pfree(fs, (unsigned)F);
                    free(fs);
                    checked++;
                }
    CU_ASSERT(checked >= 5 * 5 * 16);
}

/* Two GEMMs back to back on a pipelined array (two mxu.mm with nothing between): the second's
 * first fold streams mxu_fold_gap(T1, T2) after the first's last, T1 != T2 included. */
TEST(pipelined_gemms_back_to_back_go_on_from_each_others_folds)
{
    static const uint64_t pairs[][6] = {
        {7, 9, 5, 3, 9, 5},  {3, 9, 5, 11, 9, 5}, {5, 6, 2, 5, 6, 13}, {9, 4, 12, 2, 4, 3},
        {1, 8, 8, 6, 8, 8},  {12, 5, 7, 12, 5, 1},
    };
    unsigned checked = 0;
    for (size_t a = 0; a < sizeof arrays / sizeof arrays[0]; a++)
        for (size_t d = 0; d < 3; d++)
            for (int db = 0; db < (dfs[d] == ARCH_DATAFLOW_OS ? 1 : 2); db++)
                for (size_t s = 0; s < sizeof pairs / sizeof pairs[0]; s++) {
                    uint64_t R = arrays[a][0], C = arrays[a][1];
                    bool os = dfs[d] == ARCH_DATAFLOW_OS;
                    mxu_array arr = {R, C, dfs[d], db != 0, true};
                    const uint64_t *p = pairs[s];
                    uint64_t F1 = pfold_count(R, C, dfs[d], p[0], p[1], p[2]);
                    uint64_t F2 = pfold_count(R, C, dfs[d], p[3], p[4], p[5]);
                    pfold *fs = calloc(F1 + F2, sizeof *fs);
                    pgemm g1 = pgemm_new(p[0], p[1], p[2], 3), g2 = pgemm_new(p[3], p[4], p[5], 7);
                    pfolds(R, C, dfs[d], p[0], p[1], p[2], g1.A, g1.B, g1.out, fs);
                    pfolds(R, C, dfs[d], p[3], p[4], p[5], g2.A, g2.B, g2.out, fs + F1);
                    pplace(R, C, os, db, fs, (unsigned)(F1 + F2));
                    uint64_t cyc;
                    CU_ASSERT_EQUAL(psim(R, C, os, db, fs, (unsigned)(F1 + F2), true, &cyc), 0u);
                    pgather(R, C, dfs[d], p[0], p[1], p[2], fs, g1.out);
                    pgather(R, C, dfs[d], p[3], p[4], p[5], fs + F1, g2.out);
                    pgemm_check_free(&g1);
                    pgemm_check_free(&g2);
                    mxu_timing t1, t2;
                    np_err e = {0};
                    CU_ASSERT_EQUAL_FATAL(mxu_gemm_timing(&arr, p[0], p[1], p[2], &t1, &e), NP_OK);
                    CU_ASSERT_EQUAL_FATAL(mxu_gemm_timing(&arr, p[3], p[4], p[5], &t2, &e), NP_OK);
                    int64_t end1 = -1;
                    for (uint64_t f = 0; f < F1; f++)
                        end1 = fs[f].last > end1 ? fs[f].last : end1;
                    CU_ASSERT_EQUAL((uint64_t)(end1 + 1), t1.cycles); /* the first as alone */
                    int64_t s2 = fs[F1 - 1].s + (int64_t)mxu_fold_gap(&arr, t1.t, t2.t);
                    CU_ASSERT_EQUAL(fs[F1].s, s2);
                    CU_ASSERT_EQUAL(cyc, (uint64_t)s2 + (F2 - 1) * t2.period + t2.tail);
                    pfree(fs, (unsigned)(F1 + F2));
                    free(fs);
                    checked++;
                }
    CU_ASSERT_EQUAL(checked, 5 * 5 * 6);
}

/* SCALE-Sim v2 golden COMPUTE_REPORT / DETAILED_ACCESS_REPORT rows for GEMM 256x128x256 on a
 * 32x32 array (test/general/golden_trace_user_*): total - stall cycles, compute util %,
 * SRAM ifmap/filter reads and ofmap writes. */
TEST(gemm_matches_scalesim_golden_reports_for_os_ws_and_is)
{
    static const struct {
        arch_dataflow df;
        uint64_t total, stall;
        double util, overall_util_of_total;
        uint64_t ifmap, filter, ofmap;
    } gold[] = {
        {ARCH_DATAFLOW_OS, 52447, 42272, 80.50314465408806, 15.619577859553454, 262144, 262144, 34816},
        {ARCH_DATAFLOW_WS, 52447, 41248, 67.19160104986877, 15.619577859553454, 262144, 32768, 262144},
        {ARCH_DATAFLOW_IS, 19984, 5777, 50.59288537549407, 40.99279423538831, 65536, 262144, 262144},
    };
    for (size_t i = 0; i < 3; i++) {
        mxu_array arr = {32, 32, gold[i].df, false, false};
        mxu_timing t;
        np_err e = {0};
        CU_ASSERT_EQUAL_FATAL(mxu_gemm_timing(&arr, 256, 128, 256, &t, &e), NP_OK);
        CU_ASSERT_EQUAL(t.scalesim_cycles, gold[i].total - gold[i].stall);
        CU_ASSERT(close_pct(t.compute_util_pct, gold[i].util));
        CU_ASSERT(close_pct(t.mapping_efficiency_pct, 100.0));
        /* SCALE-Sim's overall util divides by its total (stalled) cycles. */
        double overall = 100.0 * (double)t.macs / ((double)gold[i].total * 1024.0);
        CU_ASSERT(close_pct(overall, gold[i].overall_util_of_total));
        CU_ASSERT_EQUAL(t.sram_ifmap_reads, gold[i].ifmap);
        CU_ASSERT_EQUAL(t.sram_filter_reads, gold[i].filter);
        CU_ASSERT_EQUAL(t.sram_ofmap_writes, gold[i].ofmap);
    }
}

TEST(conv_maps_to_gemm_with_scalesim_no_padding_output_size)
{
    np_err e = {0};
    uint64_t m, n, k;
    /* ResNet conv1: 224x224x3, 7x7, 64 filters, stride 2 -> ceil((224-7+2)/2) = 110 (the
     * ordinary no-padding size floor((224-7)/2)+1 would be 109: SCALE-Sim's differs whenever
     * the stride does not divide H - R). */
    mxu_conv c1 = {224, 224, 7, 7, 3, 64, 2, 2};
    CU_ASSERT_EQUAL_FATAL(mxu_conv_gemm(&c1, &m, &n, &k, &e), NP_OK);
    CU_ASSERT_EQUAL(m, 110u * 110u);
    CU_ASSERT_EQUAL(n, 64u);
    CU_ASSERT_EQUAL(k, 147u);
    /* Odd: 13x10 input, 3x2 filter, 5 channels, 7 filters, stride 3x2 -> ceil(13/3) x
     * ceil(10/2) = 5 x 5 outputs (ordinary: 4 x 5). */
    mxu_conv c2 = {13, 10, 3, 2, 5, 7, 3, 2};
    CU_ASSERT_EQUAL_FATAL(mxu_conv_gemm(&c2, &m, &n, &k, &e), NP_OK);
    CU_ASSERT_EQUAL(m, 25u);
    CU_ASSERT_EQUAL(n, 7u);
    CU_ASSERT_EQUAL(k, 30u);
    /* A GEMM row of a topology file is the conv (M, K, 1, K, 1, N, 1): M x 1 outputs. */
    mxu_conv g = {37, 19, 1, 19, 1, 11, 1, 1};
    CU_ASSERT_EQUAL_FATAL(mxu_conv_gemm(&g, &m, &n, &k, &e), NP_OK);
    CU_ASSERT(m == 37 && n == 11 && k == 19);
    mxu_conv bad = {3, 3, 4, 1, 1, 1, 1, 1};
    CU_ASSERT_EQUAL(mxu_conv_gemm(&bad, &m, &n, &k, &e), NP_ERR_RANGE);
    mxu_conv zero = {3, 3, 1, 1, 1, 1, 0, 1};
    CU_ASSERT_EQUAL(mxu_conv_gemm(&zero, &m, &n, &k, &e), NP_ERR_RANGE);
}

TEST(weight_double_buffering_hides_every_preload_but_the_first)
{
    /* 100x70x50 on 16x16, ws: Sr=K=50 -> 4 row folds, Sc=N=70 -> 5 col folds, T=100.
     * SCALE-Sim: 20 x (32 + 16 + 100 - 2) = 2920; double-buffered: 20 x 130 + 16 = 2616. */
    mxu_array ws = {16, 16, ARCH_DATAFLOW_WS, false, false};
    np_err e = {0};
    mxu_timing t;
    CU_ASSERT_EQUAL_FATAL(mxu_gemm_timing(&ws, 100, 70, 50, &t, &e), NP_OK);
    CU_ASSERT_EQUAL(t.folds, 20u);
    CU_ASSERT_EQUAL(t.cycles, 2920u);
    ws.weight_double_buffer = true;
    CU_ASSERT_EQUAL_FATAL(mxu_gemm_timing(&ws, 100, 70, 50, &t, &e), NP_OK);
    CU_ASSERT_EQUAL(t.cycles, 2616u);
    /* os keeps nothing stationary to preload: unchanged (4 x 5 folds... M=100 -> 7, N=70 -> 5,
     * 35 x (16 + 16 + 50 - 2) = 2800). */
    mxu_array os = {16, 16, ARCH_DATAFLOW_OS, true, false};
    CU_ASSERT_EQUAL(mxu_gemm_cycles(&os, 100, 70, 50), 2800u);
}

TEST(invalid_shapes_and_arrays_are_range_errors)
{
    mxu_array arr = {8, 8, ARCH_DATAFLOW_WS, false, false};
    mxu_timing t;
    memset(&t, 0x5a, sizeof t);
    mxu_timing before = t;
    np_err e = {0};
    CU_ASSERT_EQUAL(mxu_gemm_timing(&arr, 0, 4, 4, &t, &e), NP_ERR_RANGE);
    CU_ASSERT(memcmp(&t, &before, sizeof t) == 0);
    CU_ASSERT_EQUAL(mxu_gemm_cycles(&arr, 4, 4, 0), 0u);
    arr.rows = 0;
    CU_ASSERT_EQUAL(mxu_gemm_timing(&arr, 4, 4, 4, &t, &e), NP_ERR_RANGE);
    arr.rows = 8;
    CU_ASSERT_EQUAL(mxu_gemm_timing(&arr, UINT64_MAX, UINT64_MAX, 2, &t, &e), NP_ERR_RANGE);
}

TEST(architecture_keys_configure_the_array)
{
    arch_config cfg;
    arch_defaults(&cfg);
    mxu_array a;
    mxu_array_from_arch(&cfg, &a);
    CU_ASSERT_EQUAL(a.rows, (uint64_t)cfg.core.array_rows);
    CU_ASSERT_EQUAL(a.cols, (uint64_t)cfg.core.array_cols);
    CU_ASSERT_EQUAL(a.dataflow, cfg.core.dataflow);
    CU_ASSERT_FALSE(a.weight_double_buffer); /* off by default: equals SCALE-Sim */
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(arch_set(&cfg, "core.mxu_weight_double_buffer=1", &e), NP_OK);
    mxu_array_from_arch(&cfg, &a);
    CU_ASSERT_TRUE(a.weight_double_buffer);
}

TEST(topology_files_give_gemm_and_conv_layers_with_depthwise_split_per_channel)
{
    const char *src = "Layer name, H, W, R, S, C, NF, Stride,\n"
                      "conv_a, 13, 13, 3, 3, 5, 7, 3,\n"
                      "\n"
                      "DP_b, 6, 6, 3, 3, 2, 1, 1,\r\n"
                      "fc, 256, 128, 256,\n"
                      "rect, 10, 9, 3, 2, 4, 8, 3, 2\n";
    mxu_topology t;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(mxu_topology_parse(src, strlen(src), "t.csv", &t, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(t.n, 5u);
    /* conv_a: E = ceil(13/3) = 5 -> 25 x 7 x 45. */
    CU_ASSERT(t.layers[0].m == 25 && t.layers[0].n == 7 && t.layers[0].k == 45);
    /* DP_b: two one-channel layers: E = 4 -> 16 x 1 x 9. */
    CU_ASSERT_STRING_EQUAL(t.layers[1].name, "DP_bChannel_0");
    CU_ASSERT_STRING_EQUAL(t.layers[2].name, "DP_bChannel_1");
    CU_ASSERT(t.layers[2].m == 16 && t.layers[2].n == 1 && t.layers[2].k == 9);
    CU_ASSERT(t.layers[3].m == 256 && t.layers[3].n == 128 && t.layers[3].k == 256);
    /* rect: stride 3 x 2: ceil((10-3+3)/3) = 4, ceil((9-2+2)/2) = 5 -> 20 x 8 x 24. */
    CU_ASSERT(t.layers[4].m == 20 && t.layers[4].n == 8 && t.layers[4].k == 24);
    mxu_topology_free(&t);

    const char *bad = "h\nfc, 4, x, 4,\n";
    CU_ASSERT_EQUAL(mxu_topology_parse(bad, strlen(bad), "b.csv", &t, &e), NP_ERR_SYNTAX);
    CU_ASSERT_EQUAL(e.line, 2);
    CU_ASSERT_EQUAL(e.col, 8); /* "fc, 4, x": the x is the 8th character */
    const char *short_ = "h\nfc, 4, 4,\n";
    CU_ASSERT_EQUAL(mxu_topology_parse(short_, strlen(short_), "b.csv", &t, &e), NP_ERR_SYNTAX);
    const char *big = "h\nc, 3, 3, 4, 1, 1, 1, 1,\n";
    CU_ASSERT_EQUAL(mxu_topology_parse(big, strlen(big), "b.csv", &t, &e), NP_ERR_RANGE);
    CU_ASSERT_EQUAL(e.line, 2);
    CU_ASSERT_EQUAL(mxu_topology_parse("h\n", 2, "e.csv", &t, &e), NP_ERR_MISSING);
    CU_ASSERT_EQUAL(mxu_topology_load("/nonexistent/x.csv", &t, &e), NP_ERR_IO);
}

TEST(scalesim_config_files_become_architecture_overrides)
{
    mxu_scalecfg c;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(mxu_scalecfg_load(harness_src_path("tests/data/hw/scale_32x32_os.cfg"),
                                            1.5, &c, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(c.n_sets, 5u);
    CU_ASSERT_STRING_EQUAL(c.sets[0], "core.array_rows=32");
    CU_ASSERT_STRING_EQUAL(c.sets[1], "core.array_cols=32");
    CU_ASSERT_STRING_EQUAL(c.sets[2], "core.dataflow=os");
    CU_ASSERT_STRING_EQUAL(c.sets[3], "core.sram_bytes=192 KiB"); /* 3 x 64 KiB */
    CU_ASSERT_STRING_EQUAL(c.sets[4], "chip.hbm_gb_per_s=96");    /* 64 B/cycle x 1.5 GHz */
    /* The overrides are valid config assignments. */
    arch_config cfg;
    arch_defaults(&cfg);
    for (size_t i = 0; i < c.n_sets; i++)
        CU_ASSERT_EQUAL(arch_set(&cfg, c.sets[i], &e), NP_OK);
    CU_ASSERT_EQUAL(cfg.core.sram_bytes, 192u * 1024u);

    const char *calc = "[a]\nArrayHeight: 8\nArrayWidth = 4 ; comment\nDataflow : is\n"
                       "Bandwidth : 10\n[run_presets]\nInterfaceBandwidth: CALC\n";
    CU_ASSERT_EQUAL_FATAL(mxu_scalecfg_parse(calc, strlen(calc), "c.cfg", 1.0, &c, &e), NP_OK);
    CU_ASSERT_EQUAL(c.n_sets, 3u); /* no SRAM sizes, CALC bandwidth: architecture's kept */
    const char *bad = "[a]\nArrayHeight: 8\nDataflow : xs\n";
    CU_ASSERT_EQUAL(mxu_scalecfg_parse(bad, strlen(bad), "b.cfg", 1.0, &c, &e),
                    NP_ERR_UNKNOWN_KEY);
    CU_ASSERT_EQUAL(e.line, 3);
    CU_ASSERT_EQUAL(e.col, 12); /* "Dataflow : xs": the value starts at column 12 */
    const char *missing = "[a]\nArrayHeight: 8\n";
    CU_ASSERT_EQUAL(mxu_scalecfg_parse(missing, strlen(missing), "m.cfg", 1.0, &c, &e),
                    NP_ERR_MISSING);
    const char *junk = "[a]\nwhat is this\n";
    CU_ASSERT_EQUAL(mxu_scalecfg_parse(junk, strlen(junk), "j.cfg", 1.0, &c, &e), NP_ERR_SYNTAX);
}

/* SCALE-Sim v2's golden COMPUTE_REPORT for AlexNet Conv1 (224x224x3, 11x11, 96 filters,
 * stride 4) on its 32x32 ws example (test/golden_trace, topologies/conv_nets/alexnet_part.csv
 * in scalesim-project/scale-sim-v2): 112283 cycles, 0 stalls, overall 91.68309650614964 %,
 * mapping 94.53125 %, compute 90.78000992063485 %. Its E = ceil((224 - 11 + 4) / 4) = 55 (the
 * ordinary rule gives 54), so this also checks the output-size convention. */
TEST(conv_layer_matches_scalesim_golden_report_through_the_topology_reader)
{
    const char *src = "Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, "
                      "Channels, Num Filter, Strides,\nConv1,  224, 224,    11, 11,    3,      "
                      "96,     4,";
    mxu_topology t;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(mxu_topology_parse(src, strlen(src), "alexnet_part.csv", &t, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(t.n, 1u);
    CU_ASSERT_EQUAL(t.layers[0].m, 55u * 55u);
    mxu_array arr = {32, 32, ARCH_DATAFLOW_WS, false, false};
    mxu_timing tm;
    CU_ASSERT_EQUAL_FATAL(mxu_gemm_timing(&arr, t.layers[0].m, t.layers[0].n, t.layers[0].k, &tm,
                                          &e), NP_OK);
    CU_ASSERT_EQUAL(tm.scalesim_cycles, 112283u);
    CU_ASSERT(close_pct(tm.overall_util_pct, 91.68309650614964));
    CU_ASSERT(close_pct(tm.mapping_efficiency_pct, 94.53125));
    CU_ASSERT(close_pct(tm.compute_util_pct, 90.78000992063485));
    mxu_topology_free(&t);
}
