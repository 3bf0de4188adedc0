/* krun.c — a kernel compiled alone and run on the core model (see krun.h). */
#include "krun.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core_func.h"

/* Writes the row-major values of v (numel of t) into buf laid out as t's strides say, with
 * t's dtype; buf starts at t's address. */
static void marshal(const kc_tensor *t, const float *v, uint8_t *buf)
{
    isa_dtype d = kc_isa_dtype(t->dtype);
    int64_t n = kc_tensor_numel(t), idx[KC_MAX_DIMS] = {0};
    for (int64_t i = 0; i < n; i++) {
        uint64_t off = 0;
        for (int k = 0; k < t->ndim; k++)
            off += (uint64_t)(idx[k] * t->stride[k]);
        core_elem_put(buf + off, d, v[i]);
        for (int k = t->ndim - 1; k >= 0; k--) {
            if (++idx[k] < t->shape[k])
                break;
            idx[k] = 0;
        }
    }
}

static void unmarshal(const kc_tensor *t, const uint8_t *buf, float *v)
{
    isa_dtype d = kc_isa_dtype(t->dtype);
    int64_t n = kc_tensor_numel(t), idx[KC_MAX_DIMS] = {0};
    for (int64_t i = 0; i < n; i++) {
        uint64_t off = 0;
        for (int k = 0; k < t->ndim; k++)
            off += (uint64_t)(idx[k] * t->stride[k]);
        v[i] = (float)core_elem_get(buf + off, d);
        for (int k = t->ndim - 1; k >= 0; k--) {
            if (++idx[k] < t->shape[k])
                break;
            idx[k] = 0;
        }
    }
}

static bool same_shape(const kc_tensor *t, const nn_tensor *v)
{
    if (!v || !v->data || t->ndim != v->ndim)
        return false;
    for (int d = 0; d < t->ndim; d++)
        if (t->shape[d] != v->ne[d])
            return false;
    return true;
}

/* One operand of the run: its tensor (rebased) and host bytes. */
typedef struct krun_buf {
    kc_tensor *t;
    nn_tensor *v;
    uint8_t *bytes;
    uint64_t n;
    bool out;
} krun_buf;

np_status krun_kernel(const arch_config *cfg, const kc_kernel *k0, const krun_io *io,
                      const krun_opts *opts, krun_result *r, np_err *err)
{
    memset(r, 0, sizeof *r);
    krun_opts o = opts ? *opts : (krun_opts){0};
    kc_kernel k = *k0;
    uint32_t n_cores = k.place.n_cores ? k.place.n_cores : 1;
    if (!o.prog_cores)
        o.prog_cores = k.place.core0 + n_cores;
    if (o.prog_cores > (uint32_t)cfg->chip.cores)
        return np_err_set(err, NP_ERR_RANGE, "%s: %" PRIu32 " cores, the chip has %lld",
                          nn_op_name(k.op), o.prog_cores, (long long)cfg->chip.cores);
    if (o.functional && !io)
        return np_err_set(err, NP_ERR_INCONSISTENT, "a functional run needs values (krun_io)");
    krun_buf bufs[KC_MAX_IN + KC_MAX_EPI + KC_MAX_OUT];
    int nb = 0;
    for (int i = 0; i < k.n_in && i < KC_MAX_IN; i++)
        bufs[nb++] = (krun_buf){&k.in[i], io ? io->in[i] : NULL, NULL, 0, false};
    for (int i = 0; i < k.n_epi && i < KC_MAX_EPI; i++)
        if (k.epi[i].has_arg)
            bufs[nb++] = (krun_buf){&k.epi[i].arg, io ? io->epi[i] : NULL, NULL, 0, false};
    for (int i = 0; i < k.n_out && i < KC_MAX_OUT; i++)
        bufs[nb++] = (krun_buf){&k.out[i], io ? io->out[i] : NULL, NULL, 0, true};
    if (o.functional)
        for (int i = 0; i < nb; i++) {
            nn_tensor *v = bufs[i].v;
            if (bufs[i].out && v && !v->data && !nn_tensor_alloc(v))
                return np_err_set(err, NP_ERR_NOMEM, "out of memory");
            if (!same_shape(bufs[i].t, v))
                return np_err_set(err, NP_ERR_INCONSISTENT, "%s: operand %d's values are missing "
                                  "or not shaped like it", nn_op_name(k.op), i);
        }
    kc_prog *p;
    if (kc_prog_new(cfg, &(kc_prog_opts){.cores = o.prog_cores, .tiles = o.tiles}, &p, err) !=
        NP_OK)
        return err->status;
    np_status st = NP_OK;
    for (int i = 0; i < nb && st == NP_OK; i++) {
        bufs[i].n = kc_tensor_extent(bufs[i].t);
        st = kc_prog_bss(p, NULL, bufs[i].n, &bufs[i].t->addr, err);
    }
    if (st == NP_OK)
        st = kc_compile(p, &k, &r->kernel, err);
    if (st == NP_OK)
        st = kc_prog_finish(p, err);
    if (st != NP_OK) {
        kc_prog_free(p);
        return st;
    }
    r->prog = kc_prog_take(p);
    kc_prog_free(p);
    core_hbm_io ins[KC_MAX_IN + KC_MAX_EPI], outs[KC_MAX_OUT];
    size_t n_ins = 0, n_outs = 0;
    if (o.functional)
        for (int i = 0; i < nb; i++) {
            if (!(bufs[i].bytes = calloc(1, bufs[i].n))) {
                st = np_err_set(err, NP_ERR_NOMEM, "out of memory");
                break;
            }
            kc_tensor rel = *bufs[i].t;
            if (!bufs[i].out) {
                marshal(&rel, bufs[i].v->data, bufs[i].bytes);
                ins[n_ins++] = (core_hbm_io){rel.addr, bufs[i].bytes, bufs[i].n, 0};
            } else {
                outs[n_outs++] = (core_hbm_io){rel.addr, bufs[i].bytes, bufs[i].n, 0};
            }
        }
    if (st == NP_OK) {
        core_sim_opts so = {.functional = o.functional, .inputs = ins, .n_inputs = n_ins,
                            .outputs = outs, .n_outputs = n_outs, .trace = o.trace,
                            .trace_ctx = o.trace_ctx};
        st = core_sim_run_opts(cfg, r->prog, &so, NULL, &r->report, err);
    }
    if (st == NP_OK && o.functional)
        for (int i = 0; i < nb; i++)
            if (bufs[i].out)
                unmarshal(bufs[i].t, bufs[i].bytes, bufs[i].v->data);
    for (int i = 0; i < nb; i++)
        free(bufs[i].bytes);
    if (st != NP_OK)
        krun_result_free(r);
    return st;
}

void krun_result_free(krun_result *r)
{
    core_report_free(r->report);
    isa_program_free(r->prog);
    r->report = NULL;
    r->prog = NULL;
}

krun_diff krun_compare(const nn_tensor *got, const nn_tensor *want, double rtol, double atol)
{
    krun_diff d = {0};
    d.n = nn_numel(want);
    if (!got->data || !want->data || nn_numel(got) != d.n) {
        d.bad = d.n ? d.n : 1;
        return d;
    }
    for (int64_t i = 0; i < d.n; i++) {
        double g = got->data[i], w = want->data[i], diff;
        bool bad;
        if (isnan(g) || isnan(w)) {
            diff = isnan(g) && isnan(w) ? 0 : INFINITY;
            bad = diff > 0;
        } else if (g == w) { /* equal infinities too */
            diff = 0, bad = false;
        } else if (isinf(g) || isinf(w)) {
            diff = INFINITY, bad = true;
        } else {
            diff = fabs(g - w);
            bad = diff > atol + rtol * fabs(w);
        }
        d.bad += bad;
        if (diff > d.max_abs) {
            d.max_abs = diff;
            d.worst = i;
        }
        if (w != 0 && isfinite(w) && diff / fabs(w) > d.max_rel)
            d.max_rel = diff / fabs(w);
    }
    return d;
}

/* ---- values made here ----------------------------------------------------------------------- */

/* The epilogue of k as framework ops on y: every kc_epi step, the fused-chain extension's
 * too (swap: the step's operand first; cast's target; relu's clamp; dropout's p and seed;
 * the causal mask's fill; the activations' gradients with the running value as x or, with
 * swap, as dy). */
static nn_tensor *epilogue_graph(nn_graph *g, const kc_kernel *k, nn_tensor *y, nn_tensor **args)
{
    for (int i = 0; i < k->n_epi && y; i++) {
        const kc_epi *s = &k->epi[i];
        nn_tensor *a = args[i], *l = s->swap ? a : y, *r = s->swap ? y : a;
        double fp[NN_MAX_FPARAMS] = {s->f};
        switch (s->op) {
        case NN_OP_ADD: y = nn_add(g, l, r); break;
        case NN_OP_SUB: y = nn_sub(g, l, r); break;
        case NN_OP_MUL: y = nn_mul(g, l, r); break;
        case NN_OP_DIV: y = nn_div(g, l, r); break;
        case NN_OP_SCALE: y = nn_scale(g, y, s->f); break;
        case NN_OP_RELU: y = nn_node(g, NN_OP_RELU, 1, &y, NULL, fp); break;
        case NN_OP_GELU: y = nn_gelu(g, y); break;
        case NN_OP_SILU: y = nn_silu(g, y); break;
        case NN_OP_TANH: y = nn_tanh(g, y); break;
        case NN_OP_EXP: y = nn_exp(g, y); break;
        case NN_OP_LOG: y = nn_log(g, y); break;
        case NN_OP_CAST: y = nn_cast(g, y, s->to); break;
        case NN_OP_DROPOUT: y = nn_dropout(g, y, s->f, s->seed); break;
        case NN_OP_CAUSAL_MASK: y = nn_causal_mask(g, y, s->f); break;
        case NN_OP_RELU_GRAD: case NN_OP_GELU_GRAD: case NN_OP_SILU_GRAD: case NN_OP_TANH_GRAD:
            y = l && r ? nn_node(g, s->op, 2, (nn_tensor *[]){l, r}, NULL, fp) : NULL;
            break;
        default: y = NULL; break; /* kc_compile refuses any other step */
        }
    }
    return y;
}

static nn_tensor *leaf_like(nn_graph *g, const char *name, const kc_tensor *t)
{
    return nn_input(g, name, t->dtype, t->ndim, t->shape);
}

/* Seeded normal(0, 1) values representable in t's dtype (integers: normal(0, 16) rounded and
 * clamped to int8, normal(0, 1000) rounded for int32), so the kernel reads what the reference
 * computes with. */
static bool leaf_values(nn_tensor *t, uint64_t seed)
{
    if (!nn_tensor_randn(t, seed, 1.0))
        return false;
    for (int64_t i = 0; i < nn_numel(t); i++) {
        float v = t->data[i];
        switch (t->dtype) {
        case NN_BF16: v = nn_round_bf16(v); break;
        case NN_F16: v = nn_round_f16(v); break;
        case NN_I8: v = fminf(fmaxf(nearbyintf(v * 16), -127), 127); break;
        case NN_I32: v = nearbyintf(v * 1000); break;
        default: break;
        }
        t->data[i] = v;
    }
    return true;
}

np_status krun_kernel_check(const arch_config *cfg, const kc_kernel *k, uint64_t seed,
                            const krun_opts *opts, krun_result *r, krun_check *c, np_err *err)
{
    memset(r, 0, sizeof *r);
    memset(c, 0, sizeof *c);
    const kc_kernel_def *d = kc_kernel_find(k->op);
    if (!d || !d->reference)
        return np_err_set(err, NP_ERR_UNKNOWN_KEY, "%s has no reference to check against",
                          nn_op_name(k->op));
    nn_graph *g = nn_graph_new(seed);
    if (!g)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory");
    krun_io io;
    memset(&io, 0, sizeof io);
    nn_tensor *out[KC_MAX_OUT] = {0}, *args[KC_MAX_EPI] = {0};
    np_status st = NP_OK;
    for (int i = 0; i < k->n_in && st == NP_OK; i++) {
        int64_t bound = d->index_bound ? d->index_bound(k, i) : 0;
        if (!(io.in[i] = leaf_like(g, "in", &k->in[i])) ||
            !leaf_values(io.in[i], seed + (uint64_t)i))
            st = NP_ERR_NOMEM;
        for (int64_t j = 0; bound > 0 && st == NP_OK && j < nn_numel(io.in[i]); j++)
            io.in[i]->data[j] = (float)(((uint64_t)fabsf(io.in[i]->data[j]) + (uint64_t)j * 7) %
                                        (uint64_t)bound);
    }
    for (int i = 0; i < k->n_epi && st == NP_OK; i++)
        if (k->epi[i].has_arg && (!(io.epi[i] = args[i] = leaf_like(g, "epi", &k->epi[i].arg)) ||
                                  !leaf_values(args[i], seed + 100 + (uint64_t)i)))
            st = NP_ERR_NOMEM;
    if (st == NP_OK)
        st = d->reference(g, k, io.in, out, err);
    if (st == NP_OK && k->n_epi && k->n_out == 1 &&
        !(out[0] = epilogue_graph(g, k, out[0], args)))
        st = nn_graph_status(g, err) != NP_OK ? err->status
             : np_err_set(err, NP_ERR_INCONSISTENT, "%s: an epilogue step the check cannot "
                          "compute", nn_op_name(k->op));
    if (st == NP_OK)
        st = nn_graph_compute(g, err);
    for (int i = 0; i < k->n_out && st == NP_OK; i++)
        if (!(io.out[i] = leaf_like(g, "got", &k->out[i])) || !nn_tensor_alloc(io.out[i]))
            st = NP_ERR_NOMEM;
    if (st == NP_ERR_NOMEM && err->status != NP_ERR_NOMEM)
        np_err_set(err, NP_ERR_NOMEM, "out of memory");
    krun_opts o = opts ? *opts : (krun_opts){0};
    o.functional = true;
    if (st == NP_OK)
        st = krun_kernel(cfg, k, &io, &o, r, err);
    for (int i = 0; i < k->n_out && st == NP_OK; i++) {
        kc_tol tol = kc_tol_ulp(k->out[i].dtype);
        if (d->tolerance)
            d->tolerance(k, i, &tol);
        double big = 0;
        for (int64_t j = 0; j < nn_numel(out[i]); j++) /* -inf (a mask) bounds nothing */
            if (isfinite(out[i]->data[j]) && fabs(out[i]->data[j]) > big)
                big = fabs(out[i]->data[j]);
        double atol = tol.atol + tol.atol_max * big;
        krun_diff df = krun_compare(io.out[i], out[i], tol.rtol, atol);
        c->out[i] = (krun_check_out){df.n, df.bad, df.max_abs, tol.rtol, atol};
        c->n += df.n;
        c->bad += df.bad;
        c->max_abs = df.max_abs > c->max_abs ? df.max_abs : c->max_abs;
    }
    c->n_out = st == NP_OK ? k->n_out : 0;
    nn_graph_free(g);
    return st;
}

/* ---- figures -------------------------------------------------------------------------------- */

static double macs_per_pe(const arch_config *cfg, nn_dtype t)
{
    switch (t) {
    case NN_BF16: return cfg->core.macs_per_pe_bf16;
    case NN_F16: return cfg->core.macs_per_pe_fp16;
    case NN_F32: return cfg->core.macs_per_pe_fp32;
    case NN_I8: return cfg->core.macs_per_pe_int8;
    default: return 0;
    }
}

void krun_figures_of(const arch_config *cfg, const kc_kernel *k, const krun_result *r,
                     krun_figures *f)
{
    memset(f, 0, sizeof *f);
    const core_report *rep = r->report;
    f->cores = k->place.n_cores ? k->place.n_cores : 1;
    f->cycles = rep->total_cycles;
    double s = (double)rep->total_ps * 1e-12;
    f->time_us = s * 1e6;
    f->flops = r->kernel.flops;
    f->hbm_bytes = rep->hbm_read_bytes + rep->hbm_write_bytes;
    f->hbm_bytes_min = r->kernel.hbm_bytes_min;
    double hz = cfg->core.clock_ghz * 1e9;
    double mxu_peak = 2.0 * (double)cfg->core.array_rows * (double)cfg->core.array_cols *
                      macs_per_pe(cfg, k->n_in ? k->in[0].dtype : NN_BF16) * hz * f->cores;
    /* a lane's operation may be a multiply-add (vpu.fma, vpu.rdot), two FLOPs as kc_result
     * counts them: the vector units' peak is two FLOPs per lane-op */
    double vpu_peak = 2.0 * (double)cfg->core.vector_lanes * (double)cfg->core.vector_ops_per_lane *
                      hz * f->cores;
    double peak = r->kernel.mxu_flops ? mxu_peak : vpu_peak;
    f->peak_tflops = peak / 1e12;
    f->peak_gbps = cfg->chip.hbm_gb_per_s;
    if (s > 0) {
        f->tflops = (double)f->flops / s / 1e12;
        f->gbps = (double)f->hbm_bytes / s / 1e9;
        if (r->kernel.mxu_flops && mxu_peak > 0)
            f->mxu_util_pct = 100.0 * (double)r->kernel.mxu_flops / s / mxu_peak;
    }
    if (rep->l2.present) {
        f->l2 = true;
        f->l2_bytes = rep->l2.read_bytes + rep->l2.write_bytes;
        f->l2_dirty_bytes = rep->l2.dirty_bytes;
        f->l2_hit_pct = rep->l2.hit_pct;
        f->l2_peak_gbps = cfg->chip.l2_gb_per_s;
        f->l2_gbps = s > 0 ? (double)f->l2_bytes / s / 1e9 : 0;
    }
    double t_compute = peak > 0 ? (double)f->flops / peak : 0;
    double t_memory = (double)f->hbm_bytes_min / (f->peak_gbps * 1e9);
    f->compute_bound = t_compute >= t_memory;
    if (s > 0)
        f->roofline_pct = 100.0 * (f->compute_bound ? t_compute : t_memory) / s;
    arch_area_of(cfg, &f->area);
    f->tflops_per_mm2 = f->area.chip_mm2 > 0 ? f->tflops / f->area.chip_mm2 : 0;
    energy_counts_of_report(rep, &f->actions);
    energy_figures_of(cfg, &f->actions, rep->n_chips ? rep->n_chips : 1, rep->total_ps,
                      (double)f->flops, &f->energy);
}

/* ---- the tuner ------------------------------------------------------------------------------ */

void krun_with_tiling(kc_kernel *k, const kc_tiling *t)
{
    for (unsigned i = 0; i < t->n_attrs; i++) {
        int j = 0;
        while (j < k->n_attrs && strcmp(k->attrs[j].name, t->attrs[i].name))
            j++;
        if (j == k->n_attrs && k->n_attrs < KC_MAX_ATTRS)
            k->n_attrs++;
        if (j < KC_MAX_ATTRS)
            k->attrs[j] = t->attrs[i];
    }
}

np_status krun_tune(const arch_config *cfg, const kc_kernel *k, unsigned top,
                    const krun_opts *opts, krun_tuned *out, np_err *err)
{
    memset(out, 0, sizeof *out);
    const kc_kernel_def *d = kc_kernel_find(k->op);
    for (int i = 0; i < k->n_attrs; i++)
        if (d && kc_attr_is_tiling(d, k->attrs[i].name))
            return np_err_set(err, NP_ERR_INCONSISTENT, "%s: the kernel gives its tiling "
                              "attribute '%s': nothing to tune", nn_op_name(k->op),
                              k->attrs[i].name);
    krun_opts o = opts ? *opts : (krun_opts){0};
    o.functional = false;
    o.tiles = NULL; /* the cost model's candidates, not a cached choice */
    o.trace = NULL;
    krun_result r;
    if (krun_kernel(cfg, k, NULL, &o, &r, err) != NP_OK)
        return err->status;
    kc_result first = r.kernel;
    out->cycles[0] = r.report->total_cycles;
    krun_result_free(&r);
    if (!first.n_cands)
        return np_err_set(err, NP_ERR_INCONSISTENT, "%s: the kernel offers no tilings to tune",
                          nn_op_name(k->op));
    unsigned n = top < first.n_cands ? top : first.n_cands;
    if (n == 0)
        n = 1;
    out->tried = n;
    out->est[0] = first.cands[0].est_cycles;
    for (unsigned i = 1; i < n; i++) {
        kc_kernel ki = *k;
        krun_with_tiling(&ki, &first.cands[i]);
        out->est[i] = first.cands[i].est_cycles;
        if (krun_kernel(cfg, &ki, NULL, &o, &r, err) != NP_OK)
            return err->status;
        out->cycles[i] = r.report->total_cycles;
        krun_result_free(&r);
        if (out->cycles[i] < out->cycles[out->best_index])
            out->best_index = i;
    }
    out->best = first.cands[out->best_index];
    return NP_OK;
}
