/* run_figures.h — the run's figures that both fidelities compute from their per-rank figures
 * by one definition (docs/run.md, "The report"): the fast engine (run_result.c) and the full
 * run (run_full_plan.c) each measure every rank's run_rank_stats from their own timeline, then
 * call these: the pipeline bubble and the busiest links so far (the rest of issue 25's one
 * figures module is to come).
 *
 * The pipeline bubble: a rank's bubble is its idle time inside its pipeline's window — its
 * compute engine runs no kernel and none of its communication is in flight, so it waits for a
 * stage's input (or for the pipeline to drain); exposed communication is its own figure
 * (run_rank_stats.exposed_ps), not bubble. For balanced stages that is (p-1)/(m+p-1) of the
 * window whatever the stages' own communication.
 */
#ifndef NPUSIM_SIM_RUN_FIGURES_H
#define NPUSIM_SIM_RUN_FIGURES_H

#include <stdint.h>

#include "err.h"
#include "run_engine.h"

/* Fills r's stage_bubble_frac and stage_bubble_ratio (r->stages entries each, allocated here;
 * NULL before) and bubble_frac, bubble_ratio from each rank's window_ps and bubble_ps: per rank
 * with pipeline work (pipe_busy_ps and window_ps > 0) bubble / window (the (p-1)/(m+p-1) form)
 * and bubble / (window - bubble) (the (p-1)/m form: over the time it computed or waited for
 * its communication), the mean over a stage's ranks (stage_of[rank] < r->stages), then over
 * the stages that have any. NP_ERR_NOMEM. */
np_status run_figures_bubbles(run_result *r, const uint32_t *stage_of, np_err *err);

/* r's busiest links: r->top gets the top (0: 8; at most r->n_links) links that carried the
 * most bytes (r->links[].bytes), most first, ties the lower id (allocated here; NULL before).
 * NP_ERR_NOMEM. */
np_status run_figures_top_links(run_result *r, uint32_t top, np_err *err);

#endif
