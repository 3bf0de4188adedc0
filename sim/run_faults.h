/* run_faults.h — a run's stragglers and its goodput over a long job that fails and restarts
 * (npusim run --slow-chip, --mtbf-hours; docs/run.md, "Stragglers and failures").
 *
 * Stragglers are simulated: the engine runs a slowed chip's compute tasks longer
 * (run_opts.slow), so what waits for it — its pipeline neighbours, its collectives' groups —
 * waits in the simulation, and the step time says what it cost. The goodput is estimated
 * from the simulated step (sim/goodput.h): the checkpoint each chip writes is its share of
 * the model's parameters and optimizer state, written and read back at the architecture's
 * storage bandwidth per chip (system.storage_gb_per_s). */
#ifndef NPUSIM_SIM_RUN_FAULTS_H
#define NPUSIM_SIM_RUN_FAULTS_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "arch.h"
#include "goodput.h"
#include "plan.h"
#include "run_engine.h"

#define RUN_SLOW_MAX 64 /* --slow-chip given at most this many times */

/* What the job asks (run_job.faults). */
typedef struct run_faults_job {
    uint32_t n_slow;
    run_slow_chip slow[RUN_SLOW_MAX];
    uint32_t n_links;
    net_link_fault links[RUN_SLOW_MAX]; /* slowed (factor < 1) and failed (0) links */
    double mtbf_hours;   /* one chip's MTBF (0: no goodput estimate) */
    double restart_s;    /* added to reading the checkpoint back (rescheduling, start-up) */
    double interval_s;   /* a checkpoint interval to evaluate too (0: none) */
    double ckpt_write_s; /* the write time when given (< 0: from system.storage_gb_per_s) */
} run_faults_job;

/* What the report says (run_report.faults). */
typedef struct run_report_faults {
    uint32_t n_slow;
    run_slow_chip slow[RUN_SLOW_MAX];
    uint32_t n_links;
    net_link_fault links[RUN_SLOW_MAX];
    bool goodput;          /* estimated */
    double ckpt_bytes;     /* the largest chip's share of the checkpoint */
    double ckpt_read_s;    /* reading it back at the storage bandwidth (0: not known) */
    goodput_in in;         /* chips, MTBF, write and restart time (s), interval */
    goodput_out out;
    double step_s;         /* the simulated step the goodput multiplies */
} run_report_faults;

/* Parses a --slow-chip value "CHIP:FACTOR" (chip < chips, factor a number > 0, e.g. "3:1.5")
 * into j (a chip given again replaces its factor). NP_ERR_USAGE naming the flag and what is
 * wrong; NP_ERR_RANGE past RUN_SLOW_MAX chips. */
np_status run_faults_slow_flag(run_faults_job *j, const char *arg, uint32_t chips, np_err *err);

/* Parses a --slow-link value "LINK:SHARE" (the share of its bandwidth left, 0 < SHARE <= 1,
 * e.g. "chip3->chip4:0.5") or, with failed, a --fail-link value "LINK", into j (a link given
 * again replaces its entry). Whether the network has the link is checked when it is built.
 * NP_ERR_USAGE naming the flag; NP_ERR_RANGE past RUN_SLOW_MAX links. */
np_status run_faults_link_flag(run_faults_job *j, const char *arg, bool failed, np_err *err);

/* The largest chip's share of the checkpoint of plan p: its parameters and optimizer state,
 * each divided over the data-parallel replicas unless ZeRO already shards it (every replica
 * writes a distinct part, as Megatron-Core's distributed checkpoints do). Bytes. */
double run_faults_ckpt_bytes(const nn_plan *p, np_err *err);

/* Fills out from the job's request and the simulated step (step_s, chips): the checkpoint's
 * size, its write and read times and the goodput estimate. NP_ERR_USAGE when the write time
 * is neither given nor derivable (system.storage_gb_per_s 0), goodput_estimate's errors. */
np_status run_faults_goodput(const run_faults_job *j, const nn_plan *p, const arch_config *cfg,
                             double step_s, uint32_t chips, run_report_faults *out, np_err *err);

/* Adds "slow_chips", "link_faults" and (when estimated) "goodput" to the report object j. false when out of
 * memory. */
bool run_faults_json(const run_report_faults *f, json_t *j);

#endif
