/* run_job_impl.h — what run_job.c and run_job_full.c share (not a public API). */
#ifndef NPUSIM_SIM_RUN_JOB_IMPL_H
#define NPUSIM_SIM_RUN_JOB_IMPL_H

#include "run_full.h"
#include "run_job.h"

/* One step of plan p at full fidelity (j->functional: from a seeded initialisation and batch,
 * *loss the simulated step's mean loss, *loss_ref the distributed executor's; else both NaN).
 * Errors of the lowering, the system, the executor, NP_ERR_NOMEM. */
np_status rj_full(const run_job *j, const nn_plan *p, run_full_result *fr, double *loss,
                  double *loss_ref, np_err *err);

#endif
