/* run_energy.h — the energy and power of a run (`npusim run`), from its result's action
 * counts (hw-model/energy.h; docs/energy.md): every compute task's kernel actions (the counts of
 * its simulation on the core model, run_ktime.acts, summed per rank by the engine), every
 * chip-to-chip link's bytes (each link a message crosses counts once: bits x hops), and each
 * chip's static power over the run's time. No second model: the counts are the ones the
 * timing came from.
 *
 *   run_energy e;
 *   run_energy_of(&cfg, result, hw_flops, &e);
 *   if (e.fig.modelled) printf("%.1f W per chip\n", e.avg_w_per_chip);
 */
#ifndef NPUSIM_SIM_RUN_ENERGY_H
#define NPUSIM_SIM_RUN_ENERGY_H

#include "arch.h"
#include "energy.h"
#include "run_engine.h"

typedef struct run_energy {
    energy_figures fig;     /* over the whole run, all chips (fig.modelled: some key set) */
    energy_counts acts;     /* the run's actions, all chips, links included */
    double per_step_j;      /* fig.total_j / steps */
    double avg_w_per_chip;  /* fig.avg_w / chips */
    double peak_w_per_chip; /* the highest power of one chip while one kernel runs: that
                               kernel's dynamic energy over its duration plus the chip's
                               static power (communication's link power beside it not added) */
} run_energy;

/* The energy of result r on cfg: its ranks are the chips; `flops` (all chips, the whole run)
 * gives fig.tflops_per_w. Nothing fails. */
void run_energy_of(const arch_config *cfg, const run_result *r, double flops, run_energy *out);

#endif
