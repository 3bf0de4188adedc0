/* layer_sim.c — one layer of `npusim layer`: SCALE-Sim's compute figures and the simulated
 * kernel (layer_sim.h). */
#include <stdlib.h>

#include "human.h"
#include "layer_sim.h"

uint64_t layer_sim_mul(uint64_t a, uint64_t b)
{
    return b && a > UINT64_MAX / b ? UINT64_MAX : a * b;
}

np_status layer_sim_check_fits(const arch_config *cfg, const char *what, uint64_t in_elems,
                               uint64_t w_elems, uint64_t out_elems, np_err *err)
{
    unsigned __int128 bytes = ((unsigned __int128)in_elems + w_elems + out_elems) * 2;
    if (bytes <= cfg->chip.hbm_bytes)
        return NP_OK;
    char h[NP_HUMAN_MAX];
    np_human_bytes(cfg->chip.hbm_bytes, h, sizeof h);
    if (bytes >> 64)
        return np_err_set(err, NP_ERR_RANGE, "%s: its operands hold more than 2^64 bytes; "
                          "the chip's HBM holds %s", what, h);
    char b[NP_HUMAN_MAX];
    np_human_bytes((uint64_t)bytes, b, sizeof b);
    return np_err_set(err, NP_ERR_RANGE, "%s: its operands and result (bf16) take %s, more "
                      "than the chip's HBM (%s)", what, b, h);
}

kgen_conv layer_sim_scalesim_conv(const mxu_conv *c)
{
    uint64_t e = (c->ifmap_h - c->filt_h + c->stride_h + c->stride_h - 1) / c->stride_h;
    uint64_t f = (c->ifmap_w - c->filt_w + c->stride_w + c->stride_w - 1) / c->stride_w;
    return (kgen_conv){.h = (e - 1) * c->stride_h + c->filt_h,
                       .w = (f - 1) * c->stride_w + c->filt_w,
                       .c = c->channels,
                       .r = c->filt_h,
                       .s = c->filt_w,
                       .filters = c->num_filt,
                       .stride = c->stride_h,
                       .stride_w = c->stride_w,
                       .dtype = ISA_DTYPE_BF16,
                       .cores = 1};
}

/* The program of the layer: the conv kernel, or the GEMM (also a conv's whose kernel does not
 * fit the core: *as_gemm). */
static np_status ls_build(const arch_config *cfg, uint64_t m, uint64_t n, uint64_t k,
                          const kgen_conv *cv, uint64_t cores, isa_program **p, bool *as_gemm,
                          np_err *err)
{
    kgen_matmul mm = {m, n, k, ISA_DTYPE_BF16, 0, 0, 0, cores};
    char *text = NULL;
    *as_gemm = false;
    np_status built = cv ? kgen_conv_build(cfg, cv, &text, p, err)
                         : kgen_matmul_build(cfg, &mm, &text, p, err);
    if (built == NP_ERR_RANGE && cv) { /* the conv's GEMM, else the conv's own error */
        np_err conv_err = *err;
        *as_gemm = kgen_matmul_build(cfg, &mm, &text, p, err) == NP_OK;
        if (!*as_gemm) {
            *err = conv_err;
            return conv_err.status;
        }
    } else if (built != NP_OK) {
        return err->status;
    }
    free(text);
    return NP_OK;
}

/* SCALE-Sim's figures of the layer from the run's cycles (out->t, sim_total set). */
static void ls_figures(const mxu_array *arr, uint64_t cores, bool calc, layer_result *out)
{
    uint64_t share = (out->t.folds + cores - 1) / cores;
    /* what double-buffered weights save per fold after the first (0 without them) */
    uint64_t fold_saved = out->t.folds > 1 ? (out->t.folds * out->t.fold_cycles - out->t.cycles) /
                                                 (out->t.folds - 1)
                                           : 0;
    out->compute_core = cores == 1 ? out->t.scalesim_cycles
                                   : share * out->t.fold_cycles - (share - 1) * fold_saved -
                                         (out->t.cycles - out->t.scalesim_cycles);
    if (calc) { /* SCALE-Sim's CALC: the memory never stalls the array */
        out->total = out->compute_core;
        out->stall = 0;
    } else {
        out->total = out->sim_total;
        out->stall = out->total > out->compute_core ? out->total - out->compute_core : 0;
    }
    double pes = (double)arr->rows * (double)arr->cols * (double)cores;
    out->overall_pct = out->total ? 100.0 * (double)out->t.macs / ((double)out->total * pes) : 0;
}

np_status layer_sim_run(const arch_config *cfg, const mxu_array *arr, uint64_t m, uint64_t n,
                        uint64_t k, const kgen_conv *cv, uint64_t cores, bool calc,
                        const core_sim_opts *so, layer_result *out, core_report **report,
                        np_err *err)
{
    if (mxu_gemm_timing(arr, m, n, k, &out->t, err) != NP_OK)
        return err->status;
    isa_program *p = NULL;
    bool as_gemm;
    if (ls_build(cfg, m, n, k, cv, cores, &p, &as_gemm, err) != NP_OK)
        return err->status;
    core_report *r = NULL;
    core_sim_opts none = {0};
    np_status st = core_sim_run_opts(cfg, p, so ? so : &none, NULL, &r, err);
    isa_program_free(p);
    if (st != NP_OK)
        return st;
    out->total_ps = r->total_ps;
    out->kernel = cv && !as_gemm ? "conv" : "matmul";
    out->sim_total = r->total_cycles;
    ls_figures(arr, cores, calc, out);
    double seconds = (double)r->total_ps * 1e-12;
    out->dram_rd = r->hbm_read_bytes, out->dram_wr = r->hbm_write_bytes;
    out->dram_gbs = seconds > 0 ? (double)(out->dram_rd + out->dram_wr) / seconds / 1e9 : 0;
    out->hbm_mesh = out->l2 = NULL;
    if (r->n_hbm_ctrls || r->l2.present) {
        json_t *rj = core_report_json(r);
        out->hbm_mesh = json_incref(json_object_get(rj, "hbm_mesh"));
        out->l2 = json_incref(json_object_get(rj, "l2"));
        json_decref(rj);
        if ((r->n_hbm_ctrls && !out->hbm_mesh) || (r->l2.present && !out->l2)) {
            json_decref(out->hbm_mesh);
            json_decref(out->l2);
            core_report_free(r);
            return np_err_set(err, NP_ERR_NOMEM, "out of memory reporting the HBM mesh");
        }
    }
    if (report)
        *report = r;
    else
        core_report_free(r);
    return NP_OK;
}
