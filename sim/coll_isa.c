/* coll_isa.c — a collective's ISA programs on the core model (coll_isa.h). */
#include <stdlib.h>

#include "coll_isa.h"

np_status coll_isa_run(const arch_config *cfg, const kgen_coll *kc, core_trace_fn trace,
                       void *trace_ctx, coll_result *r, core_report **report, np_err *err)
{
    kgen_coll_prog kp;
    if (kgen_coll_build(cfg, kc, &kp, err) != NP_OK)
        return err->status;
    uint32_t n_chips = 0;
    for (uint32_t k = 0; k < kp.ranks; k++)
        n_chips = kp.ring[k] + 1 > n_chips ? kp.ring[k] + 1 : n_chips;
    const isa_program **pv = calloc(n_chips, sizeof *pv);
    isa_program *idle = NULL;
    np_status st = pv ? NP_OK : np_err_set(err, NP_ERR_NOMEM, "out of memory");
    if (st == NP_OK && n_chips > kp.ranks)
        st = kgen_coll_idle(cfg, &idle, err);
    core_report *rep = NULL;
    if (st == NP_OK) {
        for (uint32_t c = 0; c < n_chips; c++)
            pv[c] = idle;
        for (uint32_t k = 0; k < kp.ranks; k++)
            pv[kp.ring[k]] = kp.prog; /* one text for every rank */
        core_group g = {.id = kp.group, .n = kp.ranks, .chips = kp.ring};
        core_sim_opts o = {.trace = trace, .trace_ctx = trace_ctx, .groups = &g, .n_groups = 1};
        st = core_sim_run_chips(cfg, pv, n_chips, &o, NULL, &rep, err);
    }
    free(pv);
    isa_program_free(idle);
    uint32_t ranks = kp.ranks;
    kgen_coll_prog_free(&kp);
    if (st != NP_OK)
        return st;
    *r = (coll_result){.algo = COLL_ALGO_RING, .ranks = ranks, .bytes = kc->bytes,
                       .t_end_ps = rep->total_ps, .bytes_sent = rep->c2c_bytes};
    if (report)
        *report = rep;
    else
        core_report_free(rep);
    return NP_OK;
}
