/* search.h — `npusim search` as a library call: the best parallel strategies of a model's
 * training step on N chips of an architecture, by simulation (docs/search.md).
 *
 *   1. enumerate (search_enumerate): every dp x tp x pp = N with tp within an island of
 *      hierarchical systems and pp at most the model's layers, dp dividing the batch; the
 *      micro-batch sizes dividing a replica's share (up to max_microbatch); ZeRO stages; the
 *      recomputations; sequence parallelism (tp > 1); 1F1B, GPipe and interleaved:V
 *      (pp >= 2, V up to max_virtual, the micro-batches a multiple of pp, pp V <= layers);
 *   2. build each one's plan with the run's own rules (run_build_plan, nn_plan_build): what
 *      the plan refuses is illegal, with its message; what its memory (nn_plan_summarize, the
 *      largest rank against HBM) does not fit is discarded;
 *   3. bound each survivor's step from below (search_bound.h) with every matrix kernel at
 *      the chip's peak (its FLOPs over run_peak_flops) and others free: the cheap bound;
 *   4. in the order of that bound, while it can still beat the top-th best step found: the
 *      tight bound (the same, each kernel at its simulated duration, from one kernel timer
 *      shared by every candidate), and, while that can still beat it, the simulation
 *      (run_job_run, fast fidelity). Both bounds are <= the simulated step, so what is never
 *      simulated cannot be among the top best (branch and bound).
 *
 *   search_opts o = {.cfg = &cfg, .model = &desc, .chips = 8, .batch = 16, .top = 3};
 *   search_result r;
 *   search_run(&o, &r, &err);    // r.cand[r.order[0]] is the best
 *   search_result_free(&r);
 *
 * Nothing is printed; errors are values. */
#ifndef NPUSIM_SIM_SEARCH_H
#define NPUSIM_SIM_SEARCH_H

#include <stdbool.h>
#include <stdint.h>

#include "arch.h"
#include "err.h"
#include "model.h"
#include "plan.h"
#include "run_engine.h"
#include "run_graph.h"

typedef enum search_objective {
    SEARCH_STEP_TIME,   /* the shortest step */
    SEARCH_TOKENS_PER_S, /* the most tokens per second: for a fixed batch, the shortest step */
    SEARCH_MFU,         /* the highest MFU: for a fixed model and batch, the shortest step */
    SEARCH_MEMORY,      /* the least memory on the largest chip */
} search_objective;

/* "step-time", "tokens-per-s", "mfu", "memory"; -1 for another name. */
int search_objective_parse(const char *name);
const char *search_objective_name(search_objective o);

struct search_result;

typedef struct search_opts {
    const arch_config *cfg;
    const nn_model_desc *model;
    int chips;                 /* N: dp x tp x pp of every candidate */
    int64_t batch;             /* global batch (required) */
    int64_t seq;               /* 0: the model's context */
    const nn_strategy *base;   /* (optional) what every candidate keeps besides the axes
                                  searched (attention, precision, buckets, ...); NULL: the
                                  commands' defaults (nn_strategy_default, fused attention
                                  and softmax) */
    bool fp32;                 /* fp32 compute (default: bf16, fp32 master weights) */
    double dropout;            /* the model's dropout (nn_model_opts.dropout; 0: none) */
    search_objective objective;
    int top;                   /* the K best are found exactly (0: 10) */
    int max_microbatch;        /* largest micro-batch tried (0: 8) */
    int max_virtual;           /* largest interleaved V tried (0: 4) */
    bool exhaustive;           /* simulate every candidate that fits (no bound prunes) */
    int jobs;                  /* worker processes (0 or 1: this process alone) that screen
                                  the candidates (plans, memory, cheap bounds), then compute
                                  tight bounds and simulate, several of the best at a time,
                                  each starting with every kernel timing known so far */
    const char *kernel_cache;  /* (optional) the shared timer's cache file (run_kernel.h) */
    /* (optional) times kernels instead of the core model (tests); with it the cheap bound
     * takes every kernel as free (its FLOPs say nothing about the caller's durations) */
    run_kernel_fn time_kernel;
    void *time_ctx;
    /* (optional) progress: what is being done and the fraction done (0 .. 1) */
    void (*progress)(void *ctx, const char *what, double done);
    void *progress_ctx;
    /* (optional) called when a candidate has been simulated (its index in search_result.cand) */
    void (*simulated)(void *ctx, const struct search_result *r, uint32_t cand);
    void *simulated_ctx;
} search_opts;

typedef enum search_state {
    SEARCH_ILLEGAL,    /* the plan refused it (why) */
    SEARCH_OOM,        /* its largest rank does not fit in HBM */
    SEARCH_PRUNED,     /* fits; a bound says it cannot be among the top best */
    SEARCH_SIMULATED,  /* fig is its run's */
    SEARCH_FAILED,     /* fits, but the run failed (why) */
} search_state;

/* What the report of a simulated candidate says (run_report.h), for the ranking and the
 * explanation of the winner against the runner-up. */
typedef struct search_fig {
    double step_s, tokens_per_s, samples_per_s, mfu_pct;
    double compute_s, exposed_comm_s, bubble_s, idle_s; /* mean over chips, add up to step */
    double exposed_s[RUN_COMM_COUNT];                   /* exposed communication per kind */
    double bubble_pct;
} search_fig;

typedef struct search_cand {
    nn_strategy s;         /* dp, tp, pp, microbatch, zero, sp, schedule, virtual_stages,
                              recompute; the rest nn_strategy_default's with fused attention */
    search_state state;
    char why[256];         /* ILLEGAL, FAILED: the message (cut at 255 bytes) */
    uint64_t mem_bytes;    /* the largest rank's (0: not built) */
    double bound_cheap_s;  /* 0: not computed */
    double bound_s;        /* the tight bound; 0: not computed */
    search_fig fig;        /* SIMULATED */
} search_cand;

typedef struct search_result {
    search_cand *cand;     /* in enumeration order */
    uint32_t n_cand;
    uint32_t n_illegal, n_oom, n_pruned_cheap, n_pruned_tight, n_simulated, n_failed;
    uint32_t *order;       /* simulated candidates, best first (objective, then index) */
    uint32_t n_order;
    uint64_t hbm_bytes;    /* the chip's */
    uint32_t kernels;      /* distinct kernels the search's timer knows at the end (timed by
                              it or its workers, or from the cache file) */
    uint32_t kernels_simulated; /* of those, compiled and simulated in the search's own
                              process (each distinct kernel at most once) */
    double wall_s;
} search_result;

/* The candidates of o (step 1 above), in a fixed order (tp, pp, dp, schedule, V,
 * micro-batch, ZeRO, sp, recompute): *out (free) and *n. NP_ERR_USAGE for chips < 1 or no
 * batch; NP_ERR_NOMEM. */
np_status search_enumerate(const search_opts *o, nn_strategy **out, uint32_t *n, np_err *err);

/* Runs the search (steps 1 to 4). Errors: the options' (NP_ERR_USAGE), the kernel timer's;
 * a candidate's own failure is its state, not an error. Free *out with search_result_free. */
np_status search_run(const search_opts *o, search_result *out, np_err *err);
void search_result_free(search_result *r);

/* The candidate's score under the objective (smaller is better): the step in s, or memory in
 * bytes. */
double search_score(const search_cand *c, search_objective o);

/* "dp 8 tp 8 pp 16 mb 1 1f1b zero 1 sp recompute full" */
char *search_strategy_name(const nn_strategy *s, char *buf, size_t n);
/* The strategy as `npusim run` flags: "--dp 8 --tp 8 --pp 16 --microbatch 1 ..." */
char *search_strategy_flags(const nn_strategy *s, char *buf, size_t n);

#endif
