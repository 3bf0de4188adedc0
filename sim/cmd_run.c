/* cmd_run.c — `npusim run`: the main job — a model's training step under a parallel strategy,
 * every rank's plan compiled to kernels and simulated on all chips together; the report says
 * where the time went (step time, throughput, MFU/HFU, bubbles, exposed communication per
 * kind, per-unit utilization, link bandwidth, memory). The work is run_job.h's; this file
 * parses options and prints (docs/run.md has every figure, its definition and its unit). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "chakra.h"
#include "cli.h"
#include "cli_strategy.h"
#include "cli_trace.h"
#include "csv.h"
#include "human.h"
#include "parse.h"
#include "run_job.h"

/* The default job (README command 1): a GPT-2-small-sized step on 8 chips, dp2 x tp2 x pp2. */
#define RUN_DEFAULT_ARCH "tpu-pod"
#define RUN_DEFAULT_MODEL "gpt2-small"
#define RUN_DEFAULT_PAR 2
#define RUN_DEFAULT_BATCH 16
#define RUN_MAX_SETS 64

enum {
    RUN_OPT_STEPS = 0x7601, RUN_OPT_FIDELITY, RUN_OPT_FUNCTIONAL, RUN_OPT_TRACE,
    RUN_OPT_CHAKRA, RUN_OPT_NO_CACHE,
    RUN_OPT_NO_DEDUP, RUN_OPT_ALLOW_OOM, RUN_OPT_KERNEL_CACHE, RUN_OPT_LINKS, RUN_OPT_CSV,
    RUN_OPT_SLOW_CHIP, RUN_OPT_SLOW_LINK, RUN_OPT_FAIL_LINK, RUN_OPT_MTBF, RUN_OPT_RESTART, RUN_OPT_CKPT_INTERVAL, RUN_OPT_CKPT_WRITE,
    RUN_OPT_ROUTING
};

const char cmd_run_usage[] =
    "usage: npusim run [--arch A] [--set SECTION.KEY=VALUE ...] [--model M] [--batch B]\n"
    "                  [--seq S] [--dp D] [--tp T] [--pp P] [--zero Z] [--sp] [--microbatch b]\n"
    "                  [--schedule S] [--recompute R] [--bucket-mb X] [--precision P]\n"
    "                  [--placement O] [--stage-layers L] [--attention fused|composite|unfused]\n"
    "                  [--dropout P] [--no-pp-scatter-gather] [--ddp torch|local]\n"
    "                  [--p2p eager|blocking] [--host-sync] [--loss-scale S] [--clip-grad C]\n"
    "                  [--tp-comm-overlap] [--overlap-param-gather]\n"
    "                  [--steps N] [--fidelity fast|full] [--slow-chip C:F ...]\n"
    "                  [--slow-link L:S ...] [--fail-link L ...]\n"
    "                  [--mtbf-hours H [--restart-s R] [--ckpt-interval-s I] [--ckpt-write-s W]]\n"
    "                  [--functional] [--trace T.json.gz [--trace-chips L] [--trace-level K]]\n"
    "                  [--chakra DIR]\n"
    "                  [--kernel-cache FILE] [--no-cache] [--no-dedup] [--allow-oom]\n"
    "                  [--routing uniform|skew:S|FILE] [--links N] [--json | --csv]\n"
    "\n"
    "Without --model: " RUN_DEFAULT_MODEL " on 8 chips of " RUN_DEFAULT_ARCH ", dp 2 x tp 2 x pp 2, 1F1B,\n"
    "global batch 16 in micro-batches of 2; strategy flags change that job (--tp 4: 16 chips).\n"
    "Without --microbatch (this job and --model's): micro-batches of 2 samples where 2 divides\n"
    "a data-parallel rank's share of the batch, else the share whole.\n"
    "\n"
    "  --arch A          architecture preset or YAML file (default: " RUN_DEFAULT_ARCH ")\n"
    "  --set K=V         override one config key (repeatable), e.g. --set system.chips=3072\n"
    "  --model M         a zoo model (see `npusim models`), a model file, a Hugging Face\n"
    "                    config.json or its folder, or an .onnx file (docs/interop.md)\n"
    CLI_STRATEGY_USAGE
    "  --steps N         training steps simulated one after the other (default 1)\n"
    "  --routing R       MoE models, timing runs: tokens per expert of every MoE layer:\n"
    "                    uniform (default), skew:S (a Zipf law of exponent S over the experts,\n"
    "                    which expert is busiest drawn from --seed and the layer) or FILE (a\n"
    "                    histogram per MoE layer; docs/run.md); --functional routes the real\n"
    "                    tokens\n"
    "  --fidelity F      fast (default): each distinct kernel simulated once on the core model,\n"
    "                    every rank's plan replayed on its chip's engines over the network;\n"
    "                    full: every rank's step lowered to one program per core and run on\n"
    "                    the core model (the reference; small systems, one step)\n"
    "  --functional      compute values (with --fidelity full): the step's loss beside the\n"
    "                    distributed executor's, from a seeded initialisation and batch\n"
    "  --slow-chip C:F   chip C's compute takes F times as long (a straggler; repeatable)\n"
    "  --slow-link L:S   link L (named as the busiest links are, e.g. chip3->chip4) keeps the\n"
    "                    share S of its bandwidth (0 < S <= 1; repeatable)\n"
    "  --fail-link L     link L carries nothing: routes go around it where the topology has\n"
    "                    another path, else the run fails naming it (repeatable)\n"
    "  --mtbf-hours H    estimate the goodput of a long run whose chips each fail once in H\n"
    "                    hours on average, checkpointing at the best interval:\n"
    "  --restart-s R     time to reschedule and start again after a failure, besides reading\n"
    "                    the checkpoint back (default 0)\n"
    "  --ckpt-interval-s I  the goodput at this checkpoint interval too\n"
    "  --ckpt-write-s W  a checkpoint's write time (default: each chip's share of parameters\n"
    "                    and optimizer state over system.storage_gb_per_s)\n"
    "  --trace T         write a Chrome/Perfetto trace (gzip when T ends in .gz)\n"
    CLI_TRACE_USAGE_20
    "  --chakra DIR      write one Chakra execution trace per rank (DIR/<model>.<rank>.et),\n"
    "                    the communicator groups and ASTRA-sim's system and network files\n"
    "                    (docs/interop.md; fast fidelity, one step)\n"
    "  --kernel-cache F  keep kernel timings in file F (keyed by architecture and program)\n"
    "  --no-cache        time every kernel execution (no timing cache, no file)\n"
    "  --no-dedup        simulate every rank (no mirrored ranks)\n"
    "  --allow-oom       simulate a plan that does not fit in HBM\n"
    "  --links N         busiest links reported (default 8)\n"
    "  --json            print one object (names in docs/run.md), exact values\n"
    "  --csv             print the same figures as CSV rows: section, item, figure, value\n";

/* ---- progress ------------------------------------------------------------------------------ */

/* run_job's progress (what is being done, and how far) through the commands' one progress
 * line (cli.h). */
static void run_progress_fn(void *ctx, const char *what, double done)
{
    cli_progress_show(ctx, what, done);
}

/* ---- units for people (base/human.h) ------------------------------------------------------ */

static const char *fmt_time(double s, char *buf, size_t n)
{
    return np_human_ps((uint64_t)llround(s > 0 ? s * 1e12 : 0), buf, n);
}

static const char *fmt_bytes(double b, char *buf, size_t n)
{
    return np_human_bytes((uint64_t)llround(b > 0 ? b : 0), buf, n);
}

/* A percentage with the digits that matter: 42.5 %, 0.73 %, 0.0021 %. */
static const char *fmt_pct(double v, char *buf, size_t n)
{
    snprintf(buf, n, v == 0 || v >= 10 ? "%.1f %%" : v >= 0.1 ? "%.2f %%" : "%.2g %%", v);
    return buf;
}

/* s right-aligned in w display columns (a UTF-8 character is one column). */
static void put_right(const char *s, int w)
{
    printf("%*s", np_human_width(s, w), s);
}

/* ---- the text report ----------------------------------------------------------------------- */

static void run_print_bubble(const run_report *r)
{
    if (r->pp <= 1) {
        printf("pipeline bubble      none (one stage)\n");
        return;
    }
    /* the (p-1)/m form is the waiting time over the working time: f / (1 - f) of the other */
    double a = r->bubble_analytical, ratio_a = a < 1 ? a / (1 - a) : 0;
    printf("pipeline bubble      %.1f %% of the pipeline's window waiting for a stage's input "
           "((p-1)/(m+p-1) form; analytical %.1f %%; exposed communication not counted)\n",
           r->bubble_pct, 100.0 * a);
    printf("                     waiting %.2f x the time it works ((p-1)/m form; analytical "
           "%.2f x)\n",
           r->bubble_ratio, ratio_a);
    printf("  by stage          ");
    for (uint32_t s = 0; s < r->stages; s++)
        printf(" %.1f %%", r->stage_bubble_pct[s]);
    printf("\n");
}

static void run_print_engine(const run_report *r)
{
    char a[NP_HUMAN_MAX], b[NP_HUMAN_MAX], c[NP_HUMAN_MAX], d[NP_HUMAN_MAX];
    if (!strcmp(r->fidelity, "full")) {
        printf("\nengine: every rank's step lowered to ISA programs and run on the core model: "
               "%s kernels and %s communication entries, %s events; %s wall\n",
               np_human_count(r->kernels, a, sizeof a),
               np_human_count(r->tasks - r->kernels, b, sizeof b),
               np_human_count(r->events, c, sizeof c), fmt_time(r->wall_s, d, sizeof d));
        return;
    }
    printf("\nengine: %s events, %s tasks; %" PRIu32 " of %" PRIu32 " ranks simulated",
           np_human_count(r->events, a, sizeof a), np_human_count(r->tasks, b, sizeof b),
           r->ranks_simulated, r->chips);
    if (r->mirror_ways > 1)
        printf(" (the others mirror them, %" PRIu32 " ways)", r->mirror_ways);
    printf("; %" PRIu32 " distinct kernels (%" PRIu32 " simulated on the core model, %" PRIu32
           " from the cache file%s); %s collectives simulated, %s reused; %s wall\n", r->kernels,
           r->kernels_simulated, r->kernels_from_file,
           r->kernels_rejected ? ", edited or torn lines of it not trusted" : "",
           np_human_count(r->colls_simulated, c, sizeof c),
           np_human_count(r->colls_reused, d, sizeof d), fmt_time(r->wall_s, a, sizeof a));
}

/* Which attention the step ran, and why when it is not the one asked for. */
static void run_print_attention(const run_report *r)
{
    int f = r->attention_fused, c = r->attention_composite;
    bool asked = strcmp(r->attention_requested, "fused") == 0;
    if (!f && !c)
        printf("attention none (the model has no attention)");
    else if (!c)
        printf("attention fused (%d flash attention%s)", f, f == 1 ? "" : "s");
    else if (!asked)
        printf("attention composite (%d, as --attention %s asks: %s)", c, r->attention_requested,
               strcmp(r->attention_requested, "unfused") ? "scale, mask and softmax one kernel"
                                                        : "every op its own kernel");
    else if (r->attention_why[0])
        printf("attention composite (%d: the fused kernel does not fit the chip, %s)", c,
               r->attention_why);
    else if (!f && r->dropout > 0)
        printf("attention composite (%d: dropout on the probabilities, which the fused op does "
               "not take)", c);
    else if (!f)
        printf("attention composite (the fusion pass fuses none of the %d: dropout on the "
               "probabilities, or a form the fused op does not take)", c);
    else
        printf("attention %d fused (flash), %d composite (the fusion pass leaves them: dropout "
               "on the probabilities, or a form the fused op does not take)", f, c);
}

static void run_print_goodput(const run_report *r)
{
    const run_report_faults *f = &r->faults;
    if (!f->goodput)
        return;
    char a[48], b[48], c[48], d[48];
    const goodput_out *o = &f->out;
    printf("\ngoodput over a long run (one chip fails every %s on average; %s chips: the job "
           "every %s)\n", np_human_s(f->in.mtbf_s, a, sizeof a),
           np_human_count((uint64_t)f->in.chips, b, sizeof b), np_human_s(o->job_mtbf_s, c, sizeof c));
    printf("  checkpoint         %s per chip, written in %s", fmt_bytes(f->ckpt_bytes, a, sizeof a),
           np_human_s(f->in.ckpt_write_s, b, sizeof b));
    if (f->ckpt_read_s > 0)
        printf(", read back in %s", np_human_s(f->ckpt_read_s, c, sizeof c));
    printf("; a restart takes %s\n", np_human_s(f->in.restart_s, d, sizeof d));
    printf("  best interval      %s (%s steps): %s of the time useful (Young: %s, Daly: %s)\n",
           np_human_s(o->best_interval_s, a, sizeof a),
           np_human_count((uint64_t)(o->best_interval_s / f->step_s + 0.5), b, sizeof b),
           fmt_pct(100 * o->best_goodput, c, sizeof c),
           np_human_s(o->young_interval_s, d, sizeof d),
           np_human_s(o->daly_interval_s, a, sizeof a));
    if (f->in.interval_s > 0)
        printf("  every %-12s %s of the time useful\n", np_human_s(f->in.interval_s, a, sizeof a),
               fmt_pct(100 * o->interval_goodput, b, sizeof b));
    double useful = r->seq > 1 ? r->tokens_per_s : r->samples_per_s;
    printf("  throughput         %s %s/s useful at the best interval (%s without failures)\n",
           np_human_count((uint64_t)(useful * o->best_goodput + 0.5), a, sizeof a),
           r->seq > 1 ? "tokens" : "samples", np_human_count((uint64_t)(useful + 0.5), b, sizeof b));
}

static void run_print(const run_report *r)
{
    char a[48], b[48], c[48], d[48];
    printf("# %s on %s: %s of %s chips, dp %d x tp %d x pp %d, %s, %d micro-batch%s of %" PRId64
           " (global batch %" PRId64, r->model, r->arch, np_human_count(r->chips, a, sizeof a),
           np_human_count(r->system_chips, b, sizeof b), r->dp, r->tp, r->pp, r->schedule,
           r->micro_batches, r->micro_batches == 1 ? "" : "es", r->microbatch, r->batch);
    if (r->seq > 1)
        printf(", sequence %" PRId64, r->seq);
    printf(")\n# %s, ZeRO %d%s%s, recompute %s, ",
           strcmp(r->precision, "fp32") == 0 ? "fp32" : "bf16 compute with fp32 masters", r->zero,
           r->sp ? ", sequence parallel" : "",
           r->pp_scattered ? ", pipeline scatter/gather" : "", r->recompute);
    if (r->dropout > 0)
        printf("dropout %g, ", r->dropout);
    if (strcmp(r->ddp, "torch") != 0 || r->p2p_blocking || r->host_sync)
        printf("DDP %s%s%s, ", r->ddp, r->p2p_blocking ? ", blocking p2p" : "",
               r->host_sync ? ", host synchronizations" : "");
    if (r->loss_scale > 0)
        printf("loss scale %g, ", r->loss_scale);
    if (r->clip_grad > 0)
        printf("gradients clipped to norm %g, ", r->clip_grad);
    if (r->tp_comm_overlap)
        printf("tp communication overlapped with GEMMs, ");
    if (r->overlap_param_gather)
        printf("parameter gathers under the forward, ");
    run_print_attention(r);
    printf("; %s fidelity, %" PRIu32 " step%s\n", r->fidelity, r->steps,
           r->steps == 1 ? "" : "s");
    for (uint32_t i = 0; i < r->faults.n_links; i++) {
        const net_link_fault *l = &r->faults.links[i];
        printf("%s %s ", i ? "," : "# links:", l->name);
        if (l->factor == 0)
            printf("failed");
        else
            printf("at %g %% of its bandwidth", 100 * l->factor);
        if (i + 1 == r->faults.n_links)
            printf("\n");
    }
    for (uint32_t i = 0; i < r->faults.n_slow; i++)
        printf("%s chip %" PRIu32 " x%g%s", i ? "," : "# slowed (compute takes longer):",
               r->faults.slow[i].chip, r->faults.slow[i].factor,
               i + 1 == r->faults.n_slow ? "\n" : "");
    printf("\n");
    printf("step time            %s\n", fmt_time(r->step_time_s, a, sizeof a));
    if (!isnan(r->loss))
        printf("loss                 %.6f (the distributed executor: %.6f)\n", r->loss,
               r->loss_reference);
    if (r->seq > 1)
        printf("throughput           %s tokens/s\n",
               np_human_count((uint64_t)(r->tokens_per_s + 0.5), a, sizeof a));
    else
        printf("throughput           %s samples/s\n",
               np_human_count((uint64_t)(r->samples_per_s + 0.5), a, sizeof a));
    printf("FLOPs per step       %s model, %s executed (all chips)\n",
           np_human_si(r->model_flops_per_step, "FLOP", a, sizeof a),
           np_human_si(r->hw_flops_per_step, "FLOP", b, sizeof b));
    printf("per chip             %s model, %s hardware, of %s peak\n",
           np_human_si(r->tflops_per_chip * 1e12, "FLOP/s", a, sizeof a),
           np_human_si(r->hw_tflops_per_chip * 1e12, "FLOP/s", b, sizeof b),
           np_human_si(r->peak_flops_per_chip, "FLOP/s", c, sizeof c));
    printf("MFU / HFU            %s / %s\n", fmt_pct(r->mfu_pct, a, sizeof a),
           fmt_pct(r->hfu_pct, b, sizeof b));
    if (r->energy.fig.modelled) /* run_energy.h */
        printf("energy per step      %s: %s per chip on average, %s at its peak; %.3g TFLOP/s "
               "per W; %s per %s\n", np_human_j(r->energy.per_step_j, a, sizeof a),
               np_human_si(r->energy.avg_w_per_chip, "W", b, sizeof b),
               np_human_si(r->energy.peak_w_per_chip, "W", c, sizeof c),
               r->energy.fig.tflops_per_w,
               np_human_j(r->seq > 1 ? r->energy_per_token_j : r->energy_per_sample_j, d,
                              sizeof d), r->seq > 1 ? "token" : "sample");
    if (r->power_cap_w > 0) /* the DVFS governor (hw-model/energy.h) */
        printf("power cap            %s a chip: %s a step per chip lost to throttling kernels "
               "over it (%.1f %% of the step)\n", np_human_si(r->power_cap_w, "W", a, sizeof a),
               fmt_time(r->throttle_s, b, sizeof b),
               r->step_time_s > 0 ? 100.0 * r->throttle_s / r->step_time_s : 0.0);
    run_print_bubble(r);
    printf("step per chip        compute %s + exposed communication %s + pipeline bubble %s + "
           "other idle %s (mean over chips)\n", fmt_time(r->compute_s, a, sizeof a),
           fmt_time(r->exposed_comm_s, b, sizeof b), fmt_time(r->bubble_s, c, sizeof c),
           fmt_time(r->idle_s, d, sizeof d));

    printf("\nutilization (busy / run time, over chips)   min      mean       max\n");
    for (int u = 0; u < RUN_UNIT_COUNT; u++)
        printf("  %-42s %5.1f %%  %5.1f %%  %6.1f %%\n", run_unit_name((run_unit)u),
               r->units[u].min_pct, r->units[u].mean_pct, r->units[u].max_pct);

    if (r->n_comm) {
        printf("\ncommunication per step (mean over the chips that take part)\n"
               "  %-6s %6s %12s %12s %12s %12s\n", "kind", "chips", "total", "exposed",
               "overlapped", "bytes/chip");
        for (uint32_t i = 0; i < r->n_comm; i++) {
            const run_report_comm *m = &r->comm[i];
            printf("  %-6s %6" PRIu32 " ", run_comm_kind_name(m->kind), m->chips);
            put_right(fmt_time(m->total_s, a, sizeof a), 12);
            put_right(fmt_time(m->exposed_s, b, sizeof b), 13);
            put_right(fmt_time(m->total_s - m->exposed_s, c, sizeof c), 13);
            put_right(fmt_bytes(m->bytes_per_chip, d, sizeof d), 13);
            printf("\n");
        }
    } else {
        printf("\ncommunication        none\n");
    }
    if (r->n_links) {
        printf("\nbusiest links (over the run; peak: the most in one window of %s)\n"
               "  %-20s %12s %12s %12s %12s\n", fmt_time(r->link_peak_window_s, a, sizeof a),
               "link", "avg", "peak", "capacity", "carried");
        for (uint32_t i = 0; i < r->n_links; i++) {
            const run_report_link *l = &r->links[i];
            printf("  %-20s %7.2f GB/s %7.2f GB/s %7.2f GB/s %12s\n", l->name, l->avg_gbps,
                   l->peak_gbps, l->capacity_gbps, fmt_bytes((double)l->bytes, a, sizeof a));
        }
    }
    const nn_plan_mem *m = &r->mem;
    printf("\nmemory of the largest chip (stage %d) against %s of HBM\n", r->mem_stage,
           fmt_bytes((double)r->hbm_bytes, a, sizeof a));
    const char *names[] = {"parameters", "gradients", "optimizer state", "activations",
                           "comm buffers", "workspace", "total"};
    uint64_t vals[] = {m->params_bytes, m->grads_bytes, m->optstate_bytes, m->activations_bytes,
                       m->buffers_bytes, m->workspace_bytes, m->total_bytes};
    for (int i = 0; i < 7; i++)
        printf("  %-16s %12s\n", names[i], fmt_bytes((double)vals[i], a, sizeof a));
    if (!r->fits)
        printf("  does not fit: %s more than the chip has (--allow-oom)\n",
               fmt_bytes((double)(m->total_bytes - r->hbm_bytes), a, sizeof a));
    run_print_goodput(r);
    run_print_engine(r);
}

/* ---- CSV: the JSON report's figures as rows (section, item, figure, value) ------------------ */

/* The item an array element names: its kind, name or stage (NULL: none). */
static json_t *csv_item(const json_t *o)
{
    const char *keys[] = {"kind", "name", "stage"};
    for (int k = 0; k < 3; k++) {
        json_t *v = json_object_get(o, keys[k]);
        if (v)
            return v;
    }
    return NULL;
}

/* Appends a row per scalar figure of object o to rows (an element's naming key left out). */
static bool csv_rows_of(json_t *rows, const char *section, json_t *item, const json_t *o)
{
    const char *key;
    json_t *v;
    bool ok = true;
    json_object_foreach((json_t *)o, key, v) {
        if (json_is_object(v) || json_is_array(v) || (item && v == item))
            continue;
        json_t *row = json_object();
        ok = ok && row && json_object_set_new(row, "section", json_string(section)) == 0 &&
             json_object_set(row, "item", item ? item : json_null()) == 0 &&
             json_object_set_new(row, "figure", json_string(key)) == 0 &&
             json_object_set(row, "value", v) == 0 && json_array_append_new(rows, row) == 0;
    }
    return ok;
}

/* Every figure of the report as one row (traces/csv.h's csv_json_rows): top-level figures
 * with an empty section, an object's (mesh, memory, engine) with its name as section, an
 * array's (stages, comm, units, links) with its name as section and each element's kind,
 * name or stage as item. The names are the JSON report's (docs/run.md). */
static np_status run_print_csv(json_t *j, np_err *err)
{
    json_t *rows = json_array();
    bool ok = j && rows && csv_rows_of(rows, "", NULL, j);
    const char *key;
    json_t *v;
    if (ok)
        json_object_foreach(j, key, v) {
            if (json_is_object(v)) {
                ok = ok && csv_rows_of(rows, key, NULL, v);
            } else if (json_is_array(v)) {
                size_t i;
                json_t *e;
                json_array_foreach(v, i, e)
                    ok = ok && csv_rows_of(rows, key, csv_item(e), e);
            }
        }
    static const char *const head[] = {"section", "item", "figure", "value"};
    ok = ok && csv_json_rows(stdout, rows, head, 4);
    json_decref(rows);
    json_decref(j);
    return ok ? NP_OK : np_err_set(err, NP_ERR_NOMEM, "out of memory");
}

/* ---- the command --------------------------------------------------------------------------- */

/* The default job under the strategy flags given: RUN_DEFAULT_MODEL, and for each of the
 * global batch and dp, tp, pp not given the default job's value (its micro-batches are every
 * run's: run_default_microbatch). */
static void run_default_job(cli_strategy *cs)
{
    if (!cli_strategy_given(cs, CLI_STRATEGY_OPT_BATCH))
        cs->o.batch = RUN_DEFAULT_BATCH;
    if (!cli_strategy_given(cs, CLI_STRATEGY_OPT_DP))
        cs->s.dp = RUN_DEFAULT_PAR;
    if (!cli_strategy_given(cs, CLI_STRATEGY_OPT_TP))
        cs->s.tp = RUN_DEFAULT_PAR;
    if (!cli_strategy_given(cs, CLI_STRATEGY_OPT_PP))
        cs->s.pp = RUN_DEFAULT_PAR;
}

/* The command line, parsed. */
typedef struct run_cli {
    const char *arch_name, *model, *fidelity, *routing_text;
    const char *sets[RUN_MAX_SETS];
    size_t n_sets;
    bool json, csv, functional, goodput_flag, help;
    uint64_t steps;
    run_job j;         /* the job's options as the flags give them */
    cli_strategy cs;   /* the strategy flags */
} run_cli;

/* Reads the options into *c (defaults first). With --help: the usage printed, c->help set.
 * The caller frees c->j.trace_opts.chips whatever the result. */
static np_status run_parse(int argc, char **argv, run_cli *c, np_err *err)
{
    static const struct option longopts[] = {
        {"arch", required_argument, NULL, 'a'},
        {"set", required_argument, NULL, 's'},
        {"model", required_argument, NULL, 'm'},
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {"steps", required_argument, NULL, RUN_OPT_STEPS},
        {"fidelity", required_argument, NULL, RUN_OPT_FIDELITY},
        {"functional", no_argument, NULL, RUN_OPT_FUNCTIONAL},
        {"trace", required_argument, NULL, RUN_OPT_TRACE},
        {"chakra", required_argument, NULL, RUN_OPT_CHAKRA},
        {"kernel-cache", required_argument, NULL, RUN_OPT_KERNEL_CACHE},
        {"no-cache", no_argument, NULL, RUN_OPT_NO_CACHE},
        {"no-dedup", no_argument, NULL, RUN_OPT_NO_DEDUP},
        {"allow-oom", no_argument, NULL, RUN_OPT_ALLOW_OOM},
        {"links", required_argument, NULL, RUN_OPT_LINKS},
        {"routing", required_argument, NULL, RUN_OPT_ROUTING},
        {"csv", no_argument, NULL, RUN_OPT_CSV},
        {"slow-chip", required_argument, NULL, RUN_OPT_SLOW_CHIP},
        {"slow-link", required_argument, NULL, RUN_OPT_SLOW_LINK},
        {"fail-link", required_argument, NULL, RUN_OPT_FAIL_LINK},
        {"mtbf-hours", required_argument, NULL, RUN_OPT_MTBF},
        {"restart-s", required_argument, NULL, RUN_OPT_RESTART},
        {"ckpt-interval-s", required_argument, NULL, RUN_OPT_CKPT_INTERVAL},
        {"ckpt-write-s", required_argument, NULL, RUN_OPT_CKPT_WRITE},
        CLI_STRATEGY_LONGOPTS,
        CLI_TRACE_LONGOPTS,
        {0}};
    memset(c, 0, sizeof *c);
    c->arch_name = RUN_DEFAULT_ARCH;
    c->fidelity = "fast";
    c->steps = 1;
    c->j = (run_job){.steps = 1, .optim = cli_strategy_optim(), .faults.ckpt_write_s = -1};
    cli_strategy_init(&c->cs);
    int o;
    np_status st = NP_OK;
    cli_getopt_reset();
    while (st == NP_OK && (o = cli_getopt(argc, argv, "h", longopts, err)) != -1) {
        if (cli_strategy_is_flag(o)) {
            st = cli_strategy_flag(&c->cs, o, optarg, err);
            continue;
        }
        switch (o) {
        case 'a': c->arch_name = optarg; break;
        case 's': st = cli_add_set(c->sets, &c->n_sets, RUN_MAX_SETS, optarg, err); break;
        case 'm': c->model = optarg; break;
        case 'j': c->json = true; break;
        case 'h':
            cli_print_usage(cli_find("run"));
            c->help = true;
            return NP_OK;
        case RUN_OPT_STEPS: st = cli_parse_u64("--steps", optarg, 1, 1000000, &c->steps, err); break;
        case RUN_OPT_FIDELITY:
            if (strcmp(optarg, "fast") && strcmp(optarg, "full"))
                st = np_err_set(err, NP_ERR_USAGE, "--fidelity: expected fast or full, got '%s'",
                                optarg);
            c->fidelity = optarg;
            break;
        case RUN_OPT_FUNCTIONAL: c->functional = true; break;
        case RUN_OPT_TRACE: c->j.trace_path = optarg; break;
        case RUN_OPT_CHAKRA: c->j.chakra_dir = optarg; break;
        case RUN_OPT_KERNEL_CACHE: c->j.kernel_cache = optarg; break;
        case RUN_OPT_NO_CACHE: c->j.no_cache = true; break;
        case RUN_OPT_NO_DEDUP: c->j.no_dedup = true; break;
        case RUN_OPT_ALLOW_OOM: c->j.allow_oom = true; break;
        case RUN_OPT_CSV: c->csv = true; break;
        case RUN_OPT_ROUTING: c->routing_text = optarg; break;
        case RUN_OPT_SLOW_CHIP:
            st = run_faults_slow_flag(&c->j.faults, optarg, 1u << 24, err);
            break;
        case RUN_OPT_SLOW_LINK:
        case RUN_OPT_FAIL_LINK:
            st = run_faults_link_flag(&c->j.faults, optarg, o == RUN_OPT_FAIL_LINK, err);
            break;
        case RUN_OPT_MTBF:
            st = np_parse_f64(NP_SRC_OPT("--mtbf-hours"), optarg, 1e-6, 1e12,
                              &c->j.faults.mtbf_hours, err);
            break;
        case RUN_OPT_RESTART:
            c->goodput_flag = true;
            st = np_parse_f64(NP_SRC_OPT("--restart-s"), optarg, 0, 1e9, &c->j.faults.restart_s, err);
            break;
        case RUN_OPT_CKPT_INTERVAL:
            c->goodput_flag = true;
            st = np_parse_f64(NP_SRC_OPT("--ckpt-interval-s"), optarg, 1e-3, 1e12,
                              &c->j.faults.interval_s, err);
            break;
        case RUN_OPT_CKPT_WRITE:
            c->goodput_flag = true;
            st = np_parse_f64(NP_SRC_OPT("--ckpt-write-s"), optarg, 0, 1e9,
                              &c->j.faults.ckpt_write_s, err);
            break;
        case RUN_OPT_LINKS: {
            uint64_t v = 0;
            st = cli_parse_u64("--links", optarg, 1, RUN_REPORT_LINKS_MAX, &v, err);
            c->j.top_links = (uint32_t)v;
            break;
        }
        case CLI_TRACE_OPT_CHIPS:
        case CLI_TRACE_OPT_MAX_BYTES:
        case CLI_TRACE_OPT_LEVEL: st = cli_trace_flag(&c->j.trace_opts, o, optarg, err); break;
        default: st = err->status; break;
        }
    }
    if (st == NP_OK && optind < argc)
        st = np_err_set(err, NP_ERR_USAGE, "unexpected argument '%s'", argv[optind]);
    return st;
}

/* The flags that must go together, the default job (without --model: as the strategy flags
 * given change it) and the micro-batch rule. */
static np_status run_check(run_cli *c, np_err *err)
{
    if (c->json && c->csv)
        return np_err_set(err, NP_ERR_USAGE, "--json and --csv: one output format at a time");
    if (cli_trace_need_path(c->j.trace_path, &c->j.trace_opts, err) != NP_OK)
        return err->status;
    if (c->goodput_flag && !(c->j.faults.mtbf_hours > 0))
        return np_err_set(err, NP_ERR_USAGE, "--restart-s, --ckpt-interval-s and --ckpt-write-s "
                          "describe the goodput estimate: give --mtbf-hours too");
    c->j.full = strcmp(c->fidelity, "full") == 0;
    c->j.functional = c->functional;
    if (!c->model) {
        c->model = RUN_DEFAULT_MODEL;
        run_default_job(&c->cs);
    }
    if (!c->cs.o.batch)
        return np_err_set(err, NP_ERR_USAGE, "--batch is required with --model");
    if (!cli_strategy_given(&c->cs, CLI_STRATEGY_OPT_MICROBATCH))
        c->cs.s.microbatch = run_default_microbatch(c->cs.o.batch, c->cs.s.dp);
    return NP_OK;
}

/* The architecture (and the chips the trace and faults name in it), the model and the
 * routing. */
static np_status run_inputs(run_cli *c, arch_config *cfg, nn_model_desc *d,
                            nn_moe_route_spec *routing, np_err *err)
{
    if (arch_resolve(c->arch_name, c->sets, c->n_sets, cfg, err) != NP_OK ||
        trace_chips_check(&c->j.trace_opts.chips, cfg->system.chips, "--trace-chips", err) !=
            NP_OK)
        return err->status;
    for (uint32_t i = 0; i < c->j.faults.n_slow; i++)
        if ((int64_t)c->j.faults.slow[i].chip >= cfg->system.chips)
            return np_err_set(err, NP_ERR_USAGE, "--slow-chip: chip %" PRIu32 " is not in the "
                              "system (%" PRId64 " chips: 0 .. %" PRId64 ")",
                              c->j.faults.slow[i].chip, (int64_t)cfg->system.chips,
                              (int64_t)cfg->system.chips - 1);
    if (nn_model_load(c->model, d, err) != NP_OK)
        return err->status;
    if (c->routing_text) {
        if (nn_moe_route_parse(c->routing_text, c->cs.o.seed, routing, err) != NP_OK)
            return err->status;
        c->j.routing = routing;
    }
    return NP_OK;
}

np_status cmd_run(int argc, char **argv, np_err *err)
{
    run_cli c;
    np_status st = run_parse(argc, argv, &c, err);
    if (st == NP_OK && c.help) {
        trace_chips_free(&c.j.trace_opts.chips);
        return NP_OK;
    }
    if (st == NP_OK)
        st = run_check(&c, err);
    arch_config cfg;
    nn_model_desc d;
    nn_moe_route_spec routing = nn_moe_route_uniform();
    if (st == NP_OK)
        st = run_inputs(&c, &cfg, &d, &routing, err);
    run_job *j = &c.j;
    run_report rep = {0};
    chakra_export_info chakra = {0};
    cli_progress prog;
    cli_progress_init(&prog, "run");
    if (st == NP_OK) {
        j->cfg = &cfg;
        j->model = &d;
        j->s = c.cs.s;
        j->o = c.cs.o;
        j->steps = (uint32_t)c.steps;
        j->progress = run_progress_fn;
        j->chakra_name = d.name;
        j->chakra_info = &chakra;
        j->progress_ctx = &prog;
        st = run_job_run(j, &rep, err);
        cli_progress_end(&prog);
    }
    char warn[320];
    if (st == NP_OK && cli_trace_cut_warning(rep.trace_left_out, &j->trace_opts, warn,
                                             sizeof warn)[0])
        fprintf(stderr, "npusim: %s\n", warn);
    if (st == NP_OK && j->chakra_dir) {
        fprintf(stderr, "npusim: Chakra traces of %" PRIu32 " ranks (%" PRIu64 " nodes) in %s/%s.*.et\n",
                chakra.ranks, chakra.nodes, j->chakra_dir, d.name);
        if (!chakra.astra)
            fprintf(stderr, "npusim: no ASTRA-sim network file: %s\n", chakra.astra_why);
    }
    trace_chips_free(&j->trace_opts.chips);
    nn_moe_route_spec_free(&routing);
    if (st != NP_OK) { /* a job can fail after its report was made (the goodput estimate) */
        run_report_free(&rep);
        return st;
    }
    if (c.json)
        st = cli_print_json(run_report_json(&rep), err);
    else if (c.csv)
        st = run_print_csv(run_report_json(&rep), err);
    else
        run_print(&rep);
    run_report_free(&rep);
    return st;
}
