/* run_energy.c — a run's energy and power from its action counts (run_energy.h). */
#include "run_energy.h"

void run_energy_of(const arch_config *cfg, const run_result *r, double flops, run_energy *out)
{
    run_energy e = {0};
    double peak_dyn = 0;
    for (uint32_t i = 0; i < r->ranks; i++) {
        energy_counts_add(&e.acts, &r->rank[i].acts, 1);
        if (r->rank[i].peak_dynamic_w > peak_dyn)
            peak_dyn = r->rank[i].peak_dynamic_w;
    }
    for (uint32_t l = 0; l < r->n_links; l++)
        e.acts.link_bytes += r->links[l].bytes;
    uint32_t chips = r->ranks ? r->ranks : 1;
    energy_figures_of(cfg, &e.acts, chips, r->time_ps, flops, &e.fig);
    e.per_step_j = e.fig.total_j / (r->steps ? r->steps : 1);
    e.avg_w_per_chip = e.fig.avg_w / chips;
    e.peak_w_per_chip = peak_dyn + cfg->energy.static_w;
    *out = e;
}
