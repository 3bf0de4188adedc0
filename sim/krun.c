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
    if (kc_prog_new(cfg, &(kc_prog_opts){.cores = o.prog_cores}, &p, err) != NP_OK)
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
        double g = got->data[i], w = want->data[i], diff = fabs(g - w);
        bool nan = isnan(g) != isnan(w);
        if (isnan(g) && isnan(w))
            diff = 0;
        if (nan || diff > atol + rtol * fabs(w))
            d.bad++;
        if (nan || diff > d.max_abs) {
            d.max_abs = nan ? INFINITY : diff;
            d.worst = i;
        }
        if (w != 0 && diff / fabs(w) > d.max_rel)
            d.max_rel = diff / fabs(w);
    }
    return d;
}
