/* goodput.h — the useful fraction of a long training run that fails now and then and
 * restarts from its last checkpoint, and the checkpoint interval that makes it largest.
 *
 * The model (Daly, "A higher order estimate of the optimum checkpoint interval for restart
 * dumps", Future Generation Computer Systems 22, 2006, eq. 13): failures of the whole job
 * arrive as a Poisson process of mean time between failures M (one chip's MTBF over the
 * job's chips: any chip's failure stops every chip); the job computes for tau, writes a
 * checkpoint for delta, and so on; a failure loses the work since the last checkpoint and
 * costs a restart of R (during which failures can happen too). The expected wall time of
 * one segment of tau useful seconds is
 *
 *     E(tau) = M e^(R/M) (e^((tau + delta)/M) - 1)
 *
 * exactly, for exponential failures, and the goodput is tau / E(tau). goodput_estimate finds
 * the tau that maximises it numerically (the function has one maximum); Young's first-order
 * optimum sqrt(2 delta M) (Communications of the ACM 17, 1974) and Daly's higher-order one
 * are given beside it for comparison. */
#ifndef NPUSIM_SIM_GOODPUT_H
#define NPUSIM_SIM_GOODPUT_H

#include "err.h"

typedef struct goodput_in {
    double mtbf_s;        /* one chip's mean time between failures, s (> 0) */
    double chips;         /* chips of the job (>= 1) */
    double ckpt_write_s;  /* delta: the time to write one checkpoint, s (>= 0) */
    double restart_s;     /* R: from a failure to computing again, s (>= 0) */
    double interval_s;    /* (optional) a checkpoint interval to evaluate too (0: none) */
} goodput_in;

typedef struct goodput_out {
    double job_mtbf_s;     /* M = mtbf_s / chips */
    double best_interval_s; /* tau maximising the goodput */
    double best_goodput;    /* its goodput, 0 .. 1 */
    double young_interval_s; /* sqrt(2 delta M) */
    double daly_interval_s;  /* Daly's eq. 20 (delta < 2M), else M */
    double interval_goodput; /* the goodput at in.interval_s (0 when not given) */
    double failures_per_day; /* 86400 / M */
} goodput_out;

/* The goodput of one segment of tau useful seconds under in (0 .. 1; 0 for tau <= 0). */
double goodput_at(const goodput_in *in, double tau_s);

/* Fills *out for in. NP_ERR_RANGE naming the input that is not finite or out of range. */
np_status goodput_estimate(const goodput_in *in, goodput_out *out, np_err *err);

#endif
