/* bench_run.c — `npusim run` at the size of the main job's goal (see bench/README.md).
 *
 *   build/bench/bench_run                      GPT-3 175B, 1024 chips of a100-cluster, tp 8,
 *                                              pp 16, dp 8, 1F1B, micro-batch 1, global batch
 *                                              1536, fast fidelity (issue 12, done-when 5)
 *   build/bench/bench_run --default            the README's default run (npusim run)
 *   build/bench/bench_run --zoo                every zoo model under one strategy on a preset
 *                                              it fits (done-when 6)
 *   build/bench/bench_run --megatron FILE      every row of a weak-scaling table (below)
 *
 * Options: --attention composite|unfused (the composite attention instead of the fused one,
 * npusim run's default: its softmax with the scale and mask fused, or every op alone, as
 * npusim run's --attention), --kernel-cache FILE (kernel timings kept across runs), --no-cache, --no-dedup,
 * --analytical EFF (kernels timed as their FLOPs at EFF of the chip's peak, at least 1 ns,
 * instead of compiled and simulated: the engine on the real plan, whatever kernels exist),
 * --json.
 *
 * Prints, per run: wall and CPU time and peak memory (max RSS) of the whole run (plan,
 * kernels, simulation), the kernels compiled and simulated, the events, and the simulated
 * step, MFU, bubble and exposed communication. Goal (issue 12): GPT-3 175B in <= 60 s and
 * <= 8 GB on this machine.
 *
 * --megatron FILE reads Narayanan et al.'s weak-scaling table (bench/megatron_weak_scaling.csv:
 * parameters, heads, hidden, layers, tp, pp, gpus, batch, their TFLOP/s per GPU and % of peak)
 * and runs each row as a GPT (vocabulary 51,200, sequence 2048, micro-batch 1, full
 * recomputation, as their equation (3) counts; composite attention, as their 2021 runs had no
 * flash attention, with Megatron's fused scale-mask-softmax, its default) on a100-cluster with system.chips = gpus,
 * printing our TFLOP/s per chip, MFU and HFU beside theirs.
 */
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "arch.h"
#include "run_job.h"

static double bench_cpu(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double bench_rss_mib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0; /* KiB on Linux */
}

/* --analytical: a kernel takes its FLOPs at eff of the chip's peak (at least 1 ns). */
typedef struct analytical {
    double flops_per_s;
} analytical;

static np_status bench_time(void *ctx, const run_kernel *k, run_ktime *out, np_err *err)
{
    (void)err;
    const analytical *a = ctx;
    double ps = k->flops / a->flops_per_s * 1e12;
    memset(out, 0, sizeof *out);
    out->ps = ps < 1000 ? 1000 : (uint64_t)ps;
    out->unit_ps[RUN_UNIT_MXU] = (uint64_t)(k->flops / a->flops_per_s * 1e12);
    return NP_OK;
}

typedef struct bench_opts {
    const char *kernel_cache;
    bool no_cache, no_dedup, json;
    bool composite;    /* the composite attention (else fused, as npusim run) */
    bool unfused;      /* composite: scale, mask and softmax each a kernel (else one softmax) */
    double analytical; /* 0: real kernels */
    bool must_fit;     /* refuse a plan beyond HBM (else simulated anyway) */
} bench_opts;

/* One run; prints its figures (or appends them to arr as JSON). */
static int bench_one(const char *title, const char *arch, const char *const *sets, size_t n_sets,
                     const nn_model_desc *d, const nn_strategy *s, const nn_model_opts *o,
                     const bench_opts *bo, json_t *arr, run_report *keep, bool quiet)
{
    np_err err = {0};
    arch_config cfg;
    if (arch_resolve(arch, sets, n_sets, &cfg, &err) != NP_OK) {
        fprintf(stderr, "bench_run: %s\n", err.msg);
        return 1;
    }
    analytical an = {bo->analytical * run_peak_flops(&cfg, o->compute)};
    run_job j = {.cfg = &cfg, .model = d, .s = *s, .o = *o, .steps = 1,
                 .optim = {.kind = NN_OPTIM_ADAMW, .lr = 1e-4, .beta1 = 0.9, .beta2 = 0.95,
                           .eps = 1e-8, .weight_decay = 0.1},
                 .no_cache = bo->no_cache, .no_dedup = bo->no_dedup, .allow_oom = !bo->must_fit,
                 .kernel_cache = bo->kernel_cache,
                 .time_kernel = bo->analytical > 0 ? bench_time : NULL, .time_ctx = &an};
    j.s.fuse_attention = !bo->composite;
    j.s.fuse_softmax = !bo->unfused;
    double c0 = bench_cpu();
    run_report r;
    if (run_job_run(&j, &r, &err) != NP_OK) {
        fprintf(stderr, "bench_run: %s: %s\n", title, err.msg);
        return 1;
    }
    double cpu = bench_cpu() - c0, rss = bench_rss_mib();
    double exposed = 0, total = 0;
    for (uint32_t i = 0; i < r.n_comm; i++)
        exposed += r.comm[i].exposed_s, total += r.comm[i].total_s;
    if (arr) {
        json_t *x = run_report_json(&r);
        json_object_set_new(x, "title", json_string(title));
        json_object_set_new(x, "cpu_s", json_real(cpu));
        json_object_set_new(x, "max_rss_mib", json_real(rss));
        json_array_append_new(arr, x);
    } else if (!quiet) {
        printf("%s\n", title);
        printf("  run:     %.2f s wall, %.2f s CPU, max RSS %.0f MiB; %" PRIu64 " events, %" PRIu64
               " tasks, %" PRIu32 " of %" PRIu32 " ranks simulated\n", r.wall_s, cpu, rss,
               r.events, r.tasks, r.ranks_simulated, r.chips);
        printf("  kernels: %" PRIu32 " distinct, %" PRIu32 " simulated on the core model, %" PRIu32
               " from the cache file%s\n", r.kernels, r.kernels_simulated, r.kernels_from_file,
               bo->analytical > 0 ? " (analytical durations)" : "");
        printf("  attention: %s (%d fused, %d composite)%s%s\n", r.attention, r.attention_fused,
               r.attention_composite, r.attention_why[0] ? "; the fused kernel does not fit: " : "",
               r.attention_why);
        printf("  step:    %.3f s, %.1f TFLOP/s per chip, MFU %.1f %%, HFU %.1f %%, bubble %.2f %% "
               "(analytical %.2f %%), communication exposed %.3f s of %.3f s per chip\n",
               r.step_time_s, r.tflops_per_chip, r.mfu_pct, r.hfu_pct, r.bubble_pct,
               100 * r.bubble_analytical, exposed, total);
    }
    if (keep)
        *keep = r;
    else
        run_report_free(&r);
    return 0;
}

/* Narayanan et al.'s table, one row per GPT configuration. */
static int bench_megatron(const char *path, const bench_opts *bo, json_t *arr)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "bench_run: cannot read %s\n", path);
        return 1;
    }
    char line[512];
    int rc = 0, lineno = 0;
    bool header = true;
    if (!arr)
        printf("%-8s %5s %4s %4s %6s %6s | %12s %6s | %12s %6s %6s %9s\n", "params", "tp", "pp",
               "dp", "gpus", "batch", "theirs TF/s", "%peak", "ours TF/s", "HFU", "MFU", "wall");
    /* theirs: hardware FLOP/s (eq. (3) counts the recomputed forward); ours: HFU is the same
     * measure, MFU leaves recomputation out */
    while (fgets(line, sizeof line, f)) {
        lineno++;
        if (line[0] == '#' || strspn(line, " \t\r\n") == strlen(line))
            continue; /* comments */
        if (header) { /* the column names */
            header = false;
            continue;
        }
        double params, tflops, pct;
        int heads, hidden, layers, tp, pp, gpus, batch;
        if (sscanf(line, "%lf,%d,%d,%d,%d,%d,%d,%d,%lf,%lf", &params, &heads, &hidden, &layers, &tp,
                   &pp, &gpus, &batch, &tflops, &pct) != 10) {
            fprintf(stderr, "%s:%d: not a row of the table\n", path, lineno);
            rc = 1;
            break;
        }
        char text[512], chips[64], title[128];
        snprintf(text, sizeof text, "family = gpt\ndescription = Megatron-LM GPT %.1fB\n"
                 "layers = %d\nd_model = %d\nheads = %d\nvocab = 51200\ncontext = 2048\n"
                 "batch = 1\n", params, layers, hidden, heads);
        nn_model_desc d;
        np_err err = {0};
        if (nn_model_parse(path, text, &d, &err) != NP_OK) {
            fprintf(stderr, "bench_run: %s\n", err.msg);
            rc = 1;
            break;
        }
        nn_strategy s;
        nn_strategy_default(&s);
        s.tp = tp, s.pp = pp, s.dp = gpus / (tp * pp), s.microbatch = 1;
        s.recompute = NN_RECOMPUTE_FULL;
        nn_model_opts o = {.batch = batch, .seq = 2048, .compute = NN_BF16, .seed = 1};
        snprintf(chips, sizeof chips, "system.chips=%d", gpus < 1024 ? 1024 : gpus);
        const char *sets[] = {chips};
        snprintf(title, sizeof title, "megatron %.1fB", params);
        run_report r;
        bench_opts theirs = *bo;
        theirs.composite = true;
        if (bench_one(title, "a100-cluster", sets, 1, &d, &s, &o, &theirs, arr, arr ? NULL : &r,
                      true)) {
            rc = 1;
            continue;
        }
        if (!arr) {
            printf("%-8.1f %5d %4d %4d %6d %6d | %12.0f %5.0f%% | %12.1f %5.1f%% %5.1f%% %8.1fs\n",
                   params, tp, pp, s.dp, gpus, batch, tflops, pct, r.hw_tflops_per_chip, r.hfu_pct,
                   r.mfu_pct, r.wall_s);
            run_report_free(&r);
        } else {
            json_t *x = json_array_get(arr, json_array_size(arr) - 1);
            json_object_set_new(x, "published_tflops_per_gpu", json_real(tflops));
            json_object_set_new(x, "published_pct_of_peak", json_real(pct));
        }
        fflush(stdout);
    }
    fclose(f);
    return rc;
}

/* Every model of the zoo under one strategy on a preset it fits (issue 12, done-when 6). */
typedef struct zoo_row {
    const char *model, *arch;
    int dp, tp, pp;
    int64_t batch, microbatch, seq;
} zoo_row;

static const zoo_row zoo[] = {
    {"mlp-tiny", "tpu-pod", 2, 1, 1, 64, 0, 0},
    {"mlp", "tpu-pod", 8, 1, 1, 256, 0, 0},
    {"resnet-tiny", "tpu-pod", 4, 1, 1, 32, 0, 0},
    {"resnet18", "tpu-pod", 8, 1, 1, 256, 0, 0},
    {"resnet50", "tpu-pod", 8, 1, 1, 256, 0, 0},
    {"mobilenet_v2", "tpu-pod", 8, 1, 1, 256, 0, 0},
    {"densenet121", "tpu-pod", 8, 1, 1, 256, 0, 0},
    {"gpt-tiny", "tpu-pod", 2, 2, 2, 8, 1, 0},
    {"llama-tiny", "tpu-pod", 2, 2, 2, 8, 1, 0},
    {"gpt2-small", "tpu-pod", 2, 2, 2, 16, 2, 0},
    {"gpt2-medium", "tpu-pod", 2, 2, 2, 16, 2, 0},
    {"gpt2-large", "tpu-pod", 2, 4, 2, 16, 2, 0},
    {"gpt2-xl", "tpu-pod", 2, 5, 2, 16, 1, 0},
    {"gpt3-125m", "a100-cluster", 8, 1, 1, 256, 4, 0},
    {"gpt3-1.3b", "a100-cluster", 8, 2, 1, 256, 4, 0},
    {"gpt3-6.7b", "a100-cluster", 8, 8, 1, 256, 2, 0},
    {"gpt3-13b", "a100-cluster", 8, 8, 2, 256, 1, 0},
    {"gpt3-175b", "a100-cluster", 8, 8, 16, 1536, 1, 0},
    {"llama2-7b", "a100-cluster", 8, 8, 1, 256, 1, 0},
    {"llama2-13b", "a100-cluster", 8, 8, 2, 256, 1, 0},
    {"llama2-70b", "a100-cluster", 8, 8, 8, 512, 1, 0},
};

static int bench_zoo(const bench_opts *bo, json_t *arr)
{
    int rc = 0;
    if (!arr)
        printf("%-14s %-13s %-16s %6s %12s %8s %8s %9s\n", "model", "arch", "strategy", "chips",
               "step", "MFU", "bubble", "wall");
    for (size_t i = 0; i < sizeof zoo / sizeof zoo[0]; i++) {
        const zoo_row *z = &zoo[i];
        nn_model_desc d;
        np_err err = {0};
        if (nn_model_load(z->model, &d, &err) != NP_OK) {
            fprintf(stderr, "bench_run: %s\n", err.msg);
            rc = 1;
            continue;
        }
        nn_strategy s;
        nn_strategy_default(&s);
        s.dp = z->dp, s.tp = z->tp, s.pp = z->pp, s.microbatch = z->microbatch;
        nn_model_opts o = {.batch = z->batch, .seq = z->seq, .compute = NN_BF16, .seed = 1};
        char strat[32];
        snprintf(strat, sizeof strat, "dp%d tp%d pp%d", z->dp, z->tp, z->pp);
        run_report r;
        bench_opts fit = *bo;
        fit.must_fit = true;
        if (bench_one(z->model, z->arch, NULL, 0, &d, &s, &o, &fit, arr, arr ? NULL : &r, true)) {
            rc = 1;
            continue;
        }
        if (!arr) {
            char st[32];
            snprintf(st, sizeof st, r.step_time_s < 1 ? "%.2f ms" : "%.3f s",
                     r.step_time_s < 1 ? r.step_time_s * 1e3 : r.step_time_s);
            printf("%-14s %-13s %-16s %6u %12s %7.1f%% %7.1f%% %8.1fs\n", z->model, z->arch, strat,
                   r.chips, st, r.mfu_pct, r.bubble_pct, r.wall_s);
            run_report_free(&r);
        }
        fflush(stdout);
    }
    return rc;
}

int main(int argc, char **argv)
{
    bench_opts bo = {0};
    bool dflt = false, zoo_all = false;
    const char *megatron = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--default"))
            dflt = true;
        else if (!strcmp(argv[i], "--zoo"))
            zoo_all = true;
        else if (!strcmp(argv[i], "--megatron") && i + 1 < argc)
            megatron = argv[++i];
        else if (!strcmp(argv[i], "--kernel-cache") && i + 1 < argc)
            bo.kernel_cache = argv[++i];
        else if (!strcmp(argv[i], "--analytical") && i + 1 < argc)
            bo.analytical = atof(argv[++i]);
        else if (!strcmp(argv[i], "--attention") && i + 1 < argc &&
                 (!strcmp(argv[i + 1], "composite") || !strcmp(argv[i + 1], "fused") ||
                  !strcmp(argv[i + 1], "unfused"))) {
            bo.unfused = !strcmp(argv[++i], "unfused");
            bo.composite = strcmp(argv[i], "fused") != 0;
        }
        else if (!strcmp(argv[i], "--no-cache"))
            bo.no_cache = true;
        else if (!strcmp(argv[i], "--no-dedup"))
            bo.no_dedup = true;
        else if (!strcmp(argv[i], "--json"))
            bo.json = true;
        else {
            fprintf(stderr, "usage: bench_run [--default | --zoo | --megatron FILE] [--attention "
                            "fused|composite|unfused] [--kernel-cache FILE] [--no-cache] [--no-dedup] "
                            "[--analytical EFF] [--json]\n");
            return 2;
        }
    }
    if (bo.analytical < 0 || bo.analytical > 1) {
        fprintf(stderr, "bench_run: --analytical takes a fraction of peak in (0, 1]\n");
        return 2;
    }
    json_t *arr = bo.json ? json_array() : NULL;
    int rc;
    if (zoo_all) {
        rc = bench_zoo(&bo, arr);
    } else if (megatron) {
        rc = bench_megatron(megatron, &bo, arr);
    } else {
        nn_model_desc d;
        np_err err = {0};
        nn_strategy s;
        nn_strategy_default(&s);
        nn_model_opts o = {.compute = NN_BF16, .seed = 1};
        const char *arch, *title;
        if (dflt) { /* as sim/cmd_run.c's default job */
            title = "npusim run (README default: gpt2-small, 8 chips of tpu-pod, dp2 x tp2 x pp2)";
            arch = "tpu-pod";
            s.dp = s.tp = s.pp = 2;
            s.microbatch = 2;
            o.batch = 16;
            rc = nn_model_load("gpt2-small", &d, &err) != NP_OK;
        } else {
            title = "GPT-3 175B, 1024 chips of a100-cluster, tp8 pp16 dp8, 1F1B, micro-batch 1, "
                    "global batch 1536";
            arch = "a100-cluster";
            s.tp = 8, s.pp = 16, s.dp = 8, s.microbatch = 1;
            o.batch = 1536;
            rc = nn_model_load("gpt3-175b", &d, &err) != NP_OK;
        }
        if (rc)
            fprintf(stderr, "bench_run: %s\n", err.msg);
        else
            rc = bench_one(title, arch, NULL, 0, &d, &s, &o, &bo, arr, NULL, false);
    }
    if (arr) {
        char *txt = json_dumps(arr, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
        if (txt)
            printf("%s\n", txt);
        free(txt);
        json_decref(arr);
    }
    return rc;
}
