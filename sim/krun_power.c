/* krun_power.c — one kernel under the chip's power cap (krun.h krun_power_cap): the DVFS
 * governor of hw-model/energy.h, simulating the kernel on the core model at each clock it
 * tries. */
#include "krun.h"

#include <string.h>

typedef struct kp_ctx {
    const arch_config *cfg;
    const kc_kernel *k;
    krun_opts o;
    krun_result r; /* the last run (r.report NULL: none) */
} kp_ctx;

static np_status kp_sim(void *ctx, double ghz, uint64_t *ps, energy_counts *acts, np_err *err)
{
    kp_ctx *c = ctx;
    arch_config cfg = *c->cfg;
    cfg.core.clock_ghz = ghz;
    if (c->r.report)
        krun_result_free(&c->r);
    memset(&c->r, 0, sizeof c->r);
    np_status st = krun_kernel(&cfg, c->k, NULL, &c->o, &c->r, err);
    if (st != NP_OK) {
        memset(&c->r, 0, sizeof c->r);
        return st;
    }
    *ps = c->r.report->total_ps;
    energy_counts_of_report(c->r.report, acts);
    return NP_OK;
}

np_status krun_power_cap(const arch_config *cfg, const kc_kernel *k, const krun_opts *opts,
                         krun_result *r, energy_throttle *th, np_err *err)
{
    energy_counts acts;
    energy_counts_of_report(r->report, &acts);
    uint32_t chips = r->report->n_chips ? r->report->n_chips : 1;
    kp_ctx c = {.cfg = cfg, .k = k};
    if (opts)
        c.o = *opts;
    c.o.functional = false;
    c.o.trace = NULL;
    c.o.trace_ctx = NULL;
    np_status st = energy_govern(cfg, chips, r->report->total_ps, &acts, kp_sim, &c, th, err);
    if (st != NP_OK || !th->capped) {
        if (c.r.report)
            krun_result_free(&c.r);
        return st;
    }
    krun_result_free(r);
    *r = c.r;
    return NP_OK;
}
