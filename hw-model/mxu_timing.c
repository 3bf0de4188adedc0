/* mxu_timing.c — closed-form systolic-array compute timing (see mxu_timing.h and
 * docs/hw-model.md for the derivation from SCALE-Sim v2's demand matrices). */
#include "mxu_timing.h"

static uint64_t ceil_div(uint64_t a, uint64_t b) { return a / b + (a % b != 0); }

/* a * b, false when it overflows 64 bits. */
static bool mul_ok(uint64_t a, uint64_t b, uint64_t *out)
{
    if (a != 0 && b > UINT64_MAX / a)
        return false;
    *out = a * b;
    return true;
}

void mxu_array_from_arch(const arch_config *cfg, mxu_array *out)
{
    out->rows = (uint64_t)cfg->core.array_rows;
    out->cols = (uint64_t)cfg->core.array_cols;
    out->dataflow = cfg->core.dataflow;
    out->weight_double_buffer = cfg->core.mxu_weight_double_buffer != 0;
    out->pipelined = cfg->core.mxu_pipelined_folds != 0;
}

uint64_t mxu_fold_gap(const mxu_array *a, uint64_t t_prev, uint64_t t_next)
{
    const uint64_t R = a->rows, C = a->cols;
    bool os = a->dataflow == ARCH_DATAFLOW_OS;
    if (!a->pipelined) /* the whole fold, its preload hidden when double-buffered */
        return (os ? R : 2 * R) + C + t_prev - 2 - (a->weight_double_buffer && !os ? R : 0);
    if (os) {
        /* the stream's feeders, and each column's outputs leaving through the bottom edge one
         * a cycle: fold f's R outputs of column j leave at s + t_prev - 1 + j + i (i < R),
         * the next fold's at s' + t_next - 1 + j + i, after them */
        uint64_t edge = t_prev + R > t_next ? t_prev + R - t_next : 0;
        return t_prev > edge ? t_prev : edge;
    }
    /* ws, is: the next stationary tile shifts in (R cycles a column) while the current one
     * computes (double-buffered), or after its last use (T + R - 1 from the stream's start) */
    if (a->weight_double_buffer)
        return t_prev > R ? t_prev : R;
    return t_prev + R - 1;
}

void mxu_sched_of(const mxu_array *a, uint64_t folds, uint64_t stream, mxu_sched *out)
{
    const uint64_t R = a->rows, C = a->cols;
    out->folds = folds;
    out->stream = stream;
    out->lead = a->dataflow == ARCH_DATAFLOW_OS ? 0 : R;
    out->period = mxu_fold_gap(a, stream, stream);
    out->tail = stream + R + C - 2;
    out->cycles = out->lead + (folds - 1) * out->period + out->tail;
}

np_status mxu_conv_gemm(const mxu_conv *c, uint64_t *m, uint64_t *n, uint64_t *k, np_err *err)
{
    if (!c->ifmap_h || !c->ifmap_w || !c->filt_h || !c->filt_w || !c->channels ||
        !c->num_filt || !c->stride_h || !c->stride_w)
        return np_err_set(err, NP_ERR_RANGE, "conv layer: every dimension and stride must be >= 1");
    if (c->filt_h > c->ifmap_h || c->filt_w > c->ifmap_w)
        return np_err_set(err, NP_ERR_RANGE,
                          "conv layer: filter %llux%llu is larger than the input %llux%llu",
                          (unsigned long long)c->filt_h, (unsigned long long)c->filt_w,
                          (unsigned long long)c->ifmap_h, (unsigned long long)c->ifmap_w);
    /* SCALE-Sim: ofmap = ceil((ifmap - filt + stride) / stride), no padding. */
    uint64_t eh = ceil_div(c->ifmap_h - c->filt_h + c->stride_h, c->stride_h);
    uint64_t ew = ceil_div(c->ifmap_w - c->filt_w + c->stride_w, c->stride_w);
    uint64_t mm, kk;
    if (!mul_ok(eh, ew, &mm) || !mul_ok(c->filt_h, c->filt_w, &kk) || !mul_ok(kk, c->channels, &kk))
        return np_err_set(err, NP_ERR_RANGE, "conv layer: size overflows 64 bits");
    *m = mm;
    *n = c->num_filt;
    *k = kk;
    return NP_OK;
}

np_status mxu_gemm_timing(const mxu_array *a, uint64_t m, uint64_t n, uint64_t k,
                          mxu_timing *out, np_err *err)
{
    if (!a->rows || !a->cols)
        return np_err_set(err, NP_ERR_RANGE, "systolic array %llux%llu: both sides must be >= 1",
                          (unsigned long long)a->rows, (unsigned long long)a->cols);
    if (!m || !n || !k)
        return np_err_set(err, NP_ERR_RANGE, "GEMM %llux%llux%llu: M, N and K must be >= 1",
                          (unsigned long long)m, (unsigned long long)n, (unsigned long long)k);
    const uint64_t R = a->rows, C = a->cols;
    mxu_timing t = {0};
    switch (a->dataflow) {
    case ARCH_DATAFLOW_OS: t.sr = m, t.sc = n, t.t = k; break;
    case ARCH_DATAFLOW_WS: t.sr = k, t.sc = n, t.t = m; break;
    case ARCH_DATAFLOW_IS: t.sr = k, t.sc = m, t.t = n; break;
    default: return np_err_set(err, NP_ERR_USAGE, "unknown dataflow %d", (int)a->dataflow);
    }
    t.row_folds = ceil_div(t.sr, R);
    t.col_folds = ceil_div(t.sc, C);
    bool os = a->dataflow == ARCH_DATAFLOW_OS;
    /* Every term below is bounded by products checked here; R, C <= 2^32 in practice. */
    uint64_t mn, pes, rc_fold;
    if (!mul_ok(t.row_folds, t.col_folds, &t.folds) || !mul_ok(m, n, &mn) ||
        !mul_ok(mn, k, &t.macs) || !mul_ok(R, C, &pes) || R > UINT32_MAX || C > UINT32_MAX ||
        t.t > UINT64_MAX / 4)
        return np_err_set(err, NP_ERR_RANGE, "GEMM %llux%llux%llu: size overflows 64 bits",
                          (unsigned long long)m, (unsigned long long)n, (unsigned long long)k);
    t.fold_cycles = (os ? R : 2 * R) + C + t.t - 2;
    /* SCALE-Sim's per-fold cycle count for compute utilization (shape of its ofmap demand for
     * os, of its filter/ifmap demand before skew for ws/is). */
    uint64_t util_fold_cycles = os ? t.fold_cycles : 2 * R + 2 * C + t.t - 3;
    if (!mul_ok(t.folds, t.fold_cycles, &t.cycles) || !mul_ok(t.folds, pes, &rc_fold))
        return np_err_set(err, NP_ERR_RANGE, "GEMM %llux%llux%llu: cycle count overflows 64 bits",
                          (unsigned long long)m, (unsigned long long)n, (unsigned long long)k);
    if (a->weight_double_buffer && !os)
        t.cycles -= (t.folds - 1) * R; /* only the first fold's preload is exposed */
    t.scalesim_cycles = t.cycles - 1;  /* SCALE-Sim's, pipelined or not */
    mxu_sched sc;
    mxu_sched_of(a, t.folds, t.t, &sc); /* <= the unpipelined count: no overflow */
    t.lead = sc.lead, t.period = sc.period, t.tail = sc.tail, t.cycles = sc.cycles;
    /* Used PEs summed over the fold grid is exactly Sr x Sc. */
    double used = (double)t.sr * (double)t.sc;
    t.mapping_efficiency_pct = 100.0 * used / (double)rc_fold;
    t.compute_util_pct = 100.0 * used * (double)t.t / ((double)rc_fold * (double)util_fold_cycles);
    t.overall_util_pct = t.scalesim_cycles
                             ? 100.0 * (double)t.macs / ((double)t.scalesim_cycles * (double)pes)
                             : 100.0;
    /* SRAM element counts, as SCALE-Sim's demand generators add them up. */
    uint64_t srsc = t.sr * t.sc; /* <= macs */
    switch (a->dataflow) {
    case ARCH_DATAFLOW_OS:
        t.sram_ifmap_reads = t.col_folds * t.sr * t.t;
        t.sram_filter_reads = t.row_folds * t.sc * t.t;
        t.sram_ofmap_writes = srsc + t.folds * (R + C);
        break;
    case ARCH_DATAFLOW_WS:
        t.sram_ifmap_reads = t.col_folds * t.t * t.sr;
        t.sram_filter_reads = srsc;
        t.sram_ofmap_writes = t.row_folds * t.t * t.sc;
        break;
    default: /* IS */
        t.sram_ifmap_reads = srsc;
        t.sram_filter_reads = t.col_folds * t.t * t.sr;
        t.sram_ofmap_writes = t.row_folds * t.sc * t.t;
        break;
    }
    *out = t;
    return NP_OK;
}

uint64_t mxu_gemm_cycles(const mxu_array *a, uint64_t m, uint64_t n, uint64_t k)
{
    mxu_timing t;
    np_err e = {0};
    return mxu_gemm_timing(a, m, n, k, &t, &e) == NP_OK ? t.cycles : 0;
}
