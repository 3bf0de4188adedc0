/* run_job.h — `npusim run` as a library call: a model's training step under a strategy on an
 * architecture, from the plan to the report (docs/run.md, "From model to report"):
 *
 *   1. framework/ builds the plan (nn_plan_build): every rank's step, one class per stage;
 *   2. the largest rank's memory is checked against the chip's HBM (NP_ERR_RANGE with the
 *      breakdown, unless allow_oom);
 *   3. the plan becomes the engine's task graph (run_plan.h): each distinct compute op one
 *      kernel of compiler/'s ABI;
 *   4. fast fidelity: the engine (run_engine.h) times each kernel once on the core model
 *      (run_kernel.h) and replays every rank's tasks on one event queue, collectives and
 *      sends over the network; full fidelity: every rank's step lowered to one program per
 *      core and run on the core model (run_full.h), with values when functional;
 *   5. the figures (run_report.h) and, with trace_path, the trace (run_trace.h).
 *
 *   run_job j = {.cfg = &cfg, .model = &desc, .steps = 1};
 *   nn_strategy_default(&j.s); j.s.dp = j.s.tp = j.s.pp = 2;
 *   j.o = (nn_model_opts){.batch = 16, .compute = NN_BF16, .seed = 1};
 *   j.optim = (nn_optim){.kind = NN_OPTIM_ADAMW, .lr = 1e-4, .beta1 = 0.9, .beta2 = 0.95};
 *   run_report rep;
 *   run_job_run(&j, &rep, &err);      // rep.step_time_s, rep.mfu_pct, ...
 *   run_report_free(&rep);
 */
#ifndef NPUSIM_SIM_RUN_JOB_H
#define NPUSIM_SIM_RUN_JOB_H

#include <stdbool.h>
#include <stdint.h>

#include "arch.h"
#include "err.h"
#include "model.h"
#include "moe_route.h"
#include "optim.h"
#include "plan.h"
#include "run_engine.h"
#include "run_report.h"
#include "trace_layout.h"

typedef struct run_job {
    const arch_config *cfg;
    const nn_model_desc *model;
    nn_strategy s;
    nn_model_opts o;          /* batch (required), seq, compute dtype, seed */
    nn_optim optim;
    uint32_t steps;           /* 0: 1 */
    bool no_cache;            /* time every executed kernel (no timing cache, no file) */
    bool no_dedup;            /* simulate every rank (no mirrored ranks) */
    bool allow_oom;           /* simulate a plan that does not fit in HBM */
    bool full;                /* full fidelity: every rank's step lowered to one program per
                                 core and run on the core model (sim/run_full.h), one step */
    bool functional;          /* (full) values: a seeded initialisation (o.seed) and batch;
                                 the report gives the simulated loss and the distributed
                                 executor's */
    const nn_moe_route_spec *routing; /* (optional) a timing run's tokens per expert of every
                                 MoE layer (framework/moe_route.h; NULL: uniform); a
                                 functional run routes the real tokens instead */
    uint32_t top_links;       /* busiest links in the report (0: 8; at most RUN_REPORT_LINKS_MAX) */
    run_faults_job faults;    /* slowed chips, the goodput estimate (run_faults.h; fast
                                 fidelity) */
    const char *kernel_cache; /* (optional) timing cache file (run_kernel.h) */
    run_ktimer *ktimer;       /* (optional) a kernel timer shared with other jobs of cfg
                                 (npusim search): used instead of one made for this job, so
                                 each distinct kernel is timed once over them all; not freed
                                 here (kernel_cache and no_cache are then the timer's) */
    /* (optional) times kernels instead of the core model (tests: analytical durations) */
    run_kernel_fn time_kernel;
    void *time_ctx;
    /* (optional) the trace */
    const char *trace_path;
    trace_layout_opts trace_opts;
    /* (optional) the Chakra execution traces (chakra.h): one per rank into chakra_dir, named
     * chakra_name (default "npusim"), with ASTRA-sim's configuration; fast fidelity only.
     * chakra_info (optional) receives what was written. */
    const char *chakra_dir;
    const char *chakra_name;
    struct chakra_export_info *chakra_info;
    /* (optional) progress: what is being done and the fraction done (0 .. 1) */
    void (*progress)(void *ctx, const char *what, double done);
    void *progress_ctx;
} run_job;

/* The plan of model d (nn_plan_build) with the attention s asks for, when the chip can run it:
 * with s->fuse_attention, every distinct attention kernel of the fused plan is compiled for
 * cfg's chip, and when one does not fit (compiler/kc_attn.c keeps a head's operands resident
 * in each core's scratchpad: NP_ERR_RANGE, e.g. any GPT head of sequence 2048 on
 * a100-cluster's 192 KiB) the composite plan is built instead and why[n] says which kernel
 * and what it needs (else why[0] is 0). Errors of nn_plan_build. */
np_status run_build_plan(const nn_model_desc *d, const nn_model_opts *o, const nn_strategy *s,
                         const nn_optim *opt, const arch_config *cfg, nn_plan **out, char *why,
                         size_t n, np_err *err);

/* run_build_plan remembering, across calls, whether each attention kernel compiles (npusim
 * search builds thousands of plans whose attention kernels are a few): memo starts zeroed,
 * keeps each kernel key's answer, and is freed with run_attn_memo_free; the plans are
 * run_build_plan's. */
typedef struct run_attn_memo {
    struct run_attn_fit *v;
    uint32_t n, cap;
} run_attn_memo;
np_status run_build_plan_memo(const nn_model_desc *d, const nn_model_opts *o,
                              const nn_strategy *s, const nn_optim *opt,
                              const arch_config *cfg, run_attn_memo *memo, nn_plan **out,
                              char *why, size_t n, np_err *err);
void run_attn_memo_free(run_attn_memo *m);

/* The samples per micro-batch `npusim run` takes when --microbatch is not given, for the
 * default job and for --model alike: RUN_DEFAULT_MICROBATCH where it divides a data-parallel
 * rank's share of the batch (batch / dp), else that share whole; 0 (the plan's own default,
 * which refuses the batch) when dp does not divide the batch. */
#define RUN_DEFAULT_MICROBATCH 2
int64_t run_default_microbatch(int64_t batch, int dp);

/* The optimizer npusim plans and runs training steps with (`npusim plan`, `npusim run`,
 * `npusim validate`): AdamW, lr 1e-4, betas 0.9 / 0.95, eps 1e-8, weight decay 0.1, as GPT-3
 * and Megatron-LM train. */
nn_optim run_job_optim(void);

/* Runs j and fills *out (free with run_report_free). Errors of every stage as they come:
 * the plan's (NP_ERR_RANGE / NP_ERR_INCONSISTENT naming the flag), memory (NP_ERR_RANGE),
 * missing kernels (NP_ERR_MISSING), the compiler's and the core model's, the engine's
 * (NP_ERR_DEADLOCK), the trace's (NP_ERR_IO). Nothing is printed. */
np_status run_job_run(const run_job *j, run_report *out, np_err *err);

#endif
