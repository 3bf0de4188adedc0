/* run_report.h — the report of `npusim run`: the figures of a simulated training step, from
 * the plan (framework/plan.h), its run graph (run_plan.h) and the engine's result
 * (run_engine.h). docs/run.md defines every figure; run_report_json gives them the names
 * `npusim report` and scripts read (kept stable):
 *
 *   model, arch, chips, system_chips, batch, seq, microbatch, micro_batches, schedule,
 *   recompute, precision, zero, sp, mesh {dp, tp, pp, order}, dropout, attention, attention_requested,
 *   attention_fused, attention_composite, attention_why, steps, fidelity,
 *   step_time_s, tokens_per_s | samples_per_s, model_flops_per_step, hardware_flops_per_step,
 *   peak_flops_per_chip, tflops_per_chip, hardware_tflops_per_chip, mfu_pct, hfu_pct, bubble_pct, bubble_ratio,
 *   bubble_analytical, stages [{stage, bubble_pct, bubble_ratio}],
 *   time {compute_s, exposed_comm_s, bubble_s, idle_s},
 *   comm [{kind, chips, total_s, exposed_s, overlapped_s, bytes_per_chip}],
 *   units [{kind, min_util_pct, mean_util_pct, max_util_pct}],
 *   links [{name, bytes, avg_gbps, peak_gbps, capacity_gbps}], link_peak_window_s,
 *   memory {params_bytes, ..., total_bytes, peak_bytes, hbm_bytes, stage, fits},
 *   engine {events, tasks, kernels, kernels_simulated, kernels_from_file, kernels_rejected,
 *           colls_simulated,
 *           colls_reused, transfers, ranks_simulated, mirror_ways}, wall_s,
 *   slow_chips [{chip, factor}], link_faults [{name, share, failed}]; with --functional:
 *   loss, loss_reference; with --mtbf-hours: goodput {mtbf_s, job_mtbf_s, ..., best_interval_s, best_goodput, ...} (run_faults.h)
 */
#ifndef NPUSIM_SIM_RUN_REPORT_H
#define NPUSIM_SIM_RUN_REPORT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "arch.h"
#include "err.h"
#include "plan.h"
#include "run_energy.h"
#include "run_engine.h"
#include "run_faults.h"
#include "run_kernel.h"
#include "run_plan.h"

#define RUN_REPORT_LINKS_MAX 16
#define RUN_REPORT_WHY_MAX 320

typedef struct run_report_comm {
    run_comm_kind kind;
    uint32_t chips;        /* ranks that take part in communication of the kind */
    double total_s;        /* per step, mean over those ranks: time any of it is in flight */
    double exposed_s;      /* ... of which the rank's compute engine is idle */
    double bytes_per_chip; /* per step, mean over those ranks: bytes each puts on the network
                              (the kind's bytes of every rank / chips; a ring all-reduce of B
                              over N: 2 (N - 1) / N x B) */
} run_report_comm;

typedef struct run_report_unit {
    run_unit unit;
    double min_pct, mean_pct, max_pct; /* busy / run time per chip, over chips */
} run_report_unit;

typedef struct run_report_link {
    char name[32];
    uint64_t bytes;        /* over the run */
    double avg_gbps, peak_gbps, capacity_gbps; /* GB/s (10^9 bytes/s) */
} run_report_link;

typedef struct run_report {
    char model[64], arch[64];
    uint32_t chips, system_chips, steps;
    int64_t batch, seq, microbatch;
    int micro_batches;
    char schedule[32];
    const char *recompute, *precision, *fidelity;
    /* the attention the step ran: "fused" (the attention op, flash attention), "composite"
     * (matmul, softmax, matmul — the softmax with its scale and mask fused unless "unfused"
     * was asked), "mixed" or "none" (the model has none); what was asked (run_attention_
     * requested: "fused", "composite" or "unfused"); the model's attentions (one
     * micro-batch) of each form */
    double dropout; /* the model's dropout probability (nn_plan.dropout; 0: none) */
    const char *attention, *attention_requested;
    int attention_fused, attention_composite;
    char attention_why[RUN_REPORT_WHY_MAX]; /* fused asked, composite run: why ("" else) */
    int zero, dp, tp, pp;
    bool sp;
    bool pp_scatter_gather; /* nn_strategy.pp_scatter_gather (--no-pp-scatter-gather: off) */
    int pp_scattered;       /* pipeline boundaries sent in 1/tp shards (nn_plan.pp_scattered) */
    const char *ddp;        /* the gradient reduction: "torch" or "local" (nn_strategy.ddp) */
    bool p2p_blocking;      /* nn_strategy.p2p_blocking (JSON "p2p": "blocking" or "eager") */
    bool host_sync;         /* nn_strategy.host_sync */
    bool tp_comm_overlap;   /* nn_strategy.tp_comm_overlap */
    bool overlap_param_gather; /* nn_strategy.overlap_param_gather */
    double loss_scale, clip_grad; /* nn_strategy's (0: none) */
    char order[16];
    double step_time_s;
    double tokens_per_s;   /* language models (seq > 1); else 0 */
    double samples_per_s;  /* other models; else 0 */
    double model_flops_per_step, hw_flops_per_step; /* all chips, measured over the run */
    double peak_flops_per_chip; /* the array's peak at the compute dtype, all cores */
    double tflops_per_chip;     /* model FLOPs per second per chip / 1e12 */
    double hw_tflops_per_chip;
    double mfu_pct, hfu_pct;
    double bubble_pct, bubble_ratio, bubble_analytical; /* pct: 0 .. 100 */
    uint32_t stages;
    double *stage_bubble_pct, *stage_bubble_ratio;
    /* where a chip's step goes, mean over chips, per step; they add up to step_time_s:
     * computing, exposed communication (any kind, each instant once), the pipeline bubble
     * (idle inside its pipeline's window: waiting for a stage's input; every step's) and
     * the rest of its idle time (before and after the window: waiting for the step's other
     * chips) */
    double compute_s, exposed_comm_s, bubble_s, idle_s;
    uint32_t n_comm;
    run_report_comm comm[RUN_COMM_COUNT];
    run_report_unit units[RUN_UNIT_COUNT];
    uint32_t n_links;
    run_report_link links[RUN_REPORT_LINKS_MAX];
    double link_peak_window_s; /* the window of links[].peak_gbps (run_result.link_window_ps) */
    nn_plan_mem mem;       /* the largest rank's */
    int mem_stage;
    uint64_t hbm_bytes;
    bool fits;
    /* what the engine did */
    uint64_t events, tasks, colls_simulated, colls_reused, transfers;
    uint32_t kernels, kernels_simulated, kernels_from_file, ranks_simulated, mirror_ways;
    uint32_t kernels_rejected; /* cache lines not trusted (run_ktimer_stats.rejected) */
    /* energy and power (run_energy.h; energy.fig.modelled false with every energy key 0:
     * nothing printed), and per token (language models) or per sample */
    run_energy energy;
    double energy_per_token_j, energy_per_sample_j;
    /* the power cap (chip.power_cap_w > 0): per step, mean over the chips, the compute time
     * its throttling added (run_rank_stats.throttle_ps) */
    double power_cap_w, throttle_s;
    double loss, loss_reference; /* functional runs: the simulated step's mean loss and the
                                    distributed executor's (NaN otherwise) */
    run_report_faults faults; /* slowed chips and the goodput estimate (run_faults.h) */
    uint64_t trace_left_out;  /* --trace: events cut past the file's budget (0: none) */
    double wall_s;
} run_report;

/* The figures of result r (of rp's graph, of plan p on cfg; rp NULL: a full-fidelity run,
 * the caller fills the engine's counts); kt (may be NULL) for the kernel counts.
 * NP_ERR_NOMEM. Free with run_report_free. */
np_status run_report_make(const nn_plan *p, const run_plan *rp, const arch_config *cfg,
                          const run_result *r, const run_ktimer_stats *kt, run_report *out,
                          np_err *err);
void run_report_free(run_report *rep);

/* The communication rows of result r: per kind that any rank took part in (in run_comm_kind
 * order), the chips that took part and, per step and mean over them, the time in flight, the
 * exposed part and the bytes each put on the network. Returns the rows written. */
uint32_t run_report_comm_rows(const run_result *r, run_report_comm rows[RUN_COMM_COUNT]);

/* What a strategy asks of the attention, as --attention names it: "fused" (s->fuse_attention:
 * flash), "composite" (s->fuse_softmax: Megatron's fused scale-mask-softmax between the two
 * matmuls), "unfused" (every op its own kernel). */
const char *run_attention_requested(const nn_strategy *s);

/* What the job asked for (run_attention_requested) and, when the plan fell back to the
 * composite attention, why (run_build_plan's; may be ""). */
void run_report_set_attention(run_report *rep, const nn_strategy *s, const char *why);

/* The report as one JSON object (names above); NULL when out of memory. */
json_t *run_report_json(const run_report *rep);

/* The peak FLOP/s of cfg's chip at dtype (2 x rows x cols x MACs per PE x clock x cores). */
double run_peak_flops(const arch_config *cfg, nn_dtype dtype);

/* The largest rank's memory against the chip's HBM: NP_ERR_RANGE when it does not fit, with
 * the breakdown by role in the message (a plan that cannot run). */
np_status run_memory_check(const nn_plan *p, np_err *err);

#endif
