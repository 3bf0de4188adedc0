/* bench_run.c — the run engine at the size of the main job's goal (see bench/README.md).
 *
 * A synthetic task graph of GPT-3 175B's training step on 1024 chips of a100-cluster: tp 8
 * (one NVLink island), pp 16, dp 8, rank = tp + 8 (dp + 8 pp) as Megatron-LM orders them;
 * 96 layers, 6 per stage; 1F1B over 192 micro-batches of one 2048-token sequence (global
 * batch 1536). Per layer and micro-batch: attention and MLP forward, each followed by a tp
 * all-reduce of the activations (s x h bf16), and the same backward; activations and their
 * gradients sent between stages; after the last micro-batch, each layer's bf16 gradients
 * all-reduced across dp as its backward finishes (one bucket per layer); then the optimizer.
 * Kernel durations are the layer's FLOPs at a fixed fraction of the chip's peak (no core
 * model here: the bench measures the engine, not the kernels).
 *
 * Prints the wall and CPU time and the peak memory (max RSS) of building and of simulating,
 * the events, what the shortcuts did, and the simulated figures. Goal (issue 12, done-when
 * 5): <= 60 s and <= 8 GB on this machine.
 *
 *   build/bench/bench_run [--micro-batches M] [--steps N] [--no-cache] [--no-reuse]
 *                         [--no-dedup] [--json]
 */
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "run_engine.h"

enum { S_TP, S_SEND_F, S_RECV_F, S_SEND_B, S_RECV_B, S_DP };

typedef struct shape {
    uint32_t tp, pp, dp, layers_per_stage, m;
    double h, seq, eff; /* hidden size, tokens per micro-batch, fraction of peak */
    double peak_flops;  /* per chip */
} shape;

static double bench_wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* CPU time of the process: on a shared machine, time spent descheduled is not the engine's. */
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

static np_status bench_time(void *ctx, const run_kernel *k, run_ktime *out, np_err *err)
{
    (void)err;
    const shape *sh = ctx;
    out->ps = (uint64_t)(k->flops / (sh->peak_flops * sh->eff) * 1e12);
    out->unit_ps[RUN_UNIT_MXU] = (uint64_t)((double)out->ps * sh->eff);
    return NP_OK;
}

#define CK(x)                                                                                 \
    do {                                                                                      \
        if ((x) != NP_OK)                                                                     \
            return err->status;                                                               \
    } while (0)

static np_status bench_task(run_graph *g, uint32_t cls, run_task t, uint32_t *id, np_err *err)
{
    return run_graph_add_task(g, cls, &t, id, err);
}

/* The 1F1B order of stage s: +i+1 forward of micro-batch i, -(i+1) its backward. */
static uint32_t bench_order(uint32_t p, uint32_t m, uint32_t s, int *ops)
{
    uint32_t n = 0, warm = p - s - 1 < m ? p - s - 1 : m;
    for (uint32_t i = 0; i < warm; i++)
        ops[n++] = (int)i + 1;
    for (uint32_t i = 0; i < m - warm; i++) {
        ops[n++] = (int)(warm + i) + 1;
        ops[n++] = -((int)i + 1);
    }
    for (uint32_t i = m - warm; i < m; i++)
        ops[n++] = -((int)i + 1);
    return n;
}

static np_status bench_graph(const shape *sh, run_graph **out, np_err *err)
{
    uint32_t tp = sh->tp, pp = sh->pp, dp = sh->dp, R = tp * pp * dp;
    run_graph *g;
    CK(run_graph_create(R, &g, err));
    *out = g;
    uint32_t *mem = malloc(R * sizeof *mem), n, gs_tp, gs_pp, gs_dp;
    if (!mem)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory");
#define RANK(t, d, s) ((t) + tp * ((d) + dp * (s)))
    n = 0;
    for (uint32_t i = 0; i < R; i++)
        mem[n++] = i;
    np_status st = run_graph_add_groupset(g, "tp", R / tp, tp, mem, &gs_tp, err);
    n = 0;
    for (uint32_t s = 0; s < pp; s++)
        for (uint32_t t = 0; t < tp; t++)
            for (uint32_t d = 0; d < dp; d++)
                mem[n++] = RANK(t, d, s);
    if (st == NP_OK)
        st = run_graph_add_groupset(g, "dp", R / dp, dp, mem, &gs_dp, err);
    n = 0;
    for (uint32_t t = 0; t < tp; t++)
        for (uint32_t d = 0; d < dp; d++)
            for (uint32_t s = 0; s < pp; s++)
                mem[n++] = RANK(t, d, s);
    if (st == NP_OK)
        st = run_graph_add_groupset(g, "pp", R / pp, pp, mem, &gs_pp, err);
    free(mem);
    CK(st);
    CK(run_graph_set_pipeline(g, gs_pp, sh->m, err));
    static const char *const names[] = {"tp", "pp-send-f", "pp-recv-f", "pp-send-b", "pp-recv-b",
                                        "dp"};
    for (uint32_t i = 0; i < 6; i++)
        CK(run_graph_set_stream_name(g, i, names[i], err));
    double h = sh->h, s = sh->seq;
    double attn = (8 * s * h * h + 4 * s * s * h) / tp, mlp = 16 * s * h * h / tp;
    uint32_t k_af, k_mf, k_ab, k_mb, k_opt;
    CK(run_graph_add_kernel(g, &(run_kernel){.key = "attention fwd", .flops = attn}, &k_af, err));
    CK(run_graph_add_kernel(g, &(run_kernel){.key = "mlp fwd", .flops = mlp}, &k_mf, err));
    CK(run_graph_add_kernel(g, &(run_kernel){.key = "attention bwd", .flops = 2 * attn}, &k_ab,
                            err));
    CK(run_graph_add_kernel(g, &(run_kernel){.key = "mlp bwd", .flops = 2 * mlp}, &k_mb, err));
    double params = 12 * h * h / tp * sh->layers_per_stage; /* per rank */
    CK(run_graph_add_kernel(g, &(run_kernel){.key = "adam", .flops = 16 * params}, &k_opt, err));
    uint64_t act = (uint64_t)(s * h * 2), grad_layer = (uint64_t)(12 * h * h / tp * 2);
    int *ops = malloc(2 * sh->m * sizeof *ops);
    if (!ops)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory");
    for (uint32_t st_i = 0; st_i < pp && st == NP_OK; st_i++) {
        char name[16];
        snprintf(name, sizeof name, "stage%" PRIu32, st_i);
        uint32_t cls;
        if ((st = run_graph_add_class(g, name, &cls, err)) != NP_OK)
            break;
        for (uint32_t t = 0; t < tp && st == NP_OK; t++)
            for (uint32_t d = 0; d < dp && st == NP_OK; d++)
                st = run_graph_set_class(g, RANK(t, d, st_i), cls, err);
        uint32_t nops = bench_order(pp, sh->m, st_i, ops), buckets[64], nb = 0;
        for (uint32_t o = 0; o < nops && st == NP_OK; o++) {
            bool f = ops[o] > 0;
            uint32_t i = (uint32_t)(f ? ops[o] : -ops[o]) - 1, prev = RUN_NONE, id;
            if (f ? st_i > 0 : st_i + 1 < pp)
                st = bench_task(g, cls, (run_task){.kind = RUN_TASK_RECV, .comm = RUN_COMM_PP,
                                                   .stream = f ? S_RECV_F : S_RECV_B,
                                                   .bytes = act, .peer_groupset = gs_pp,
                                                   .peer = f ? -1 : 1, .tag = f ? 0 : 1},
                                &prev, err);
            for (uint32_t l = 0; l < sh->layers_per_stage && st == NP_OK; l++)
                for (uint32_t half = 0; half < 2 && st == NP_OK; half++) {
                    uint32_t k = f ? (half ? k_mf : k_af) : (half ? k_ab : k_mb);
                    st = bench_task(g, cls, (run_task){.kind = RUN_TASK_COMPUTE, .kernel = k,
                                                       .flags = RUN_TASK_PIPELINE,
                                                       .deps = &prev,
                                                       .n_deps = prev != RUN_NONE},
                                    &id, err);
                    if (st == NP_OK)
                        st = bench_task(g, cls, (run_task){.kind = RUN_TASK_COLL,
                                                           .comm = RUN_COMM_TP, .stream = S_TP,
                                                           .op = COLL_OP_ALL_REDUCE,
                                                           .groupset = gs_tp, .bytes = act,
                                                           .deps = &id, .n_deps = 1},
                                        &prev, err);
                    if (st == NP_OK && !f && half && i + 1 == sh->m && nb < 64)
                        st = bench_task(g, cls, (run_task){.kind = RUN_TASK_COLL,
                                                           .comm = RUN_COMM_DP, .stream = S_DP,
                                                           .op = COLL_OP_ALL_REDUCE,
                                                           .groupset = gs_dp,
                                                           .bytes = grad_layer, .deps = &prev,
                                                           .n_deps = 1},
                                        &buckets[nb++], err);
                }
            if (st == NP_OK && (f ? st_i + 1 < pp : st_i > 0))
                st = bench_task(g, cls, (run_task){.kind = RUN_TASK_SEND, .comm = RUN_COMM_PP,
                                                   .stream = f ? S_SEND_F : S_SEND_B,
                                                   .bytes = act, .peer_groupset = gs_pp,
                                                   .peer = f ? 1 : -1, .tag = f ? 0 : 1,
                                                   .deps = &prev, .n_deps = 1},
                                NULL, err);
        }
        if (st == NP_OK)
            st = bench_task(g, cls, (run_task){.kind = RUN_TASK_COMPUTE, .kernel = k_opt,
                                               .deps = buckets, .n_deps = nb},
                            NULL, err);
    }
    free(ops);
    CK(st);
    return run_graph_finalize(g, err);
#undef RANK
}

int main(int argc, char **argv)
{
    shape sh = {.tp = 8, .pp = 16, .dp = 8, .layers_per_stage = 6, .m = 192, .h = 12288,
                .seq = 2048, .eff = 0.5};
    run_opts o = {0};
    bool json = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--micro-batches") && i + 1 < argc)
            sh.m = (uint32_t)strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc)
            o.steps = (uint32_t)strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--no-cache"))
            o.no_kernel_cache = true;
        else if (!strcmp(argv[i], "--no-reuse"))
            o.no_coll_reuse = true;
        else if (!strcmp(argv[i], "--no-dedup"))
            o.no_rank_dedup = true;
        else if (!strcmp(argv[i], "--json"))
            json = true;
        else {
            fprintf(stderr, "usage: bench_run [--micro-batches M] [--steps N] [--no-cache] "
                            "[--no-reuse] [--no-dedup] [--json]\n");
            return 2;
        }
    }
    if (sh.m < 1) {
        fprintf(stderr, "bench_run: --micro-batches must be at least 1\n");
        return 2;
    }
    np_err err = {0};
    arch_config cfg;
    if (arch_resolve("a100-cluster", NULL, 0, &cfg, &err) != NP_OK) {
        fprintf(stderr, "bench_run: %s\n", err.msg);
        return 1;
    }
    sh.peak_flops = 2.0 * (double)cfg.core.array_rows * (double)cfg.core.array_cols *
                    cfg.core.macs_per_pe_bf16 * cfg.core.clock_ghz * 1e9 * (double)cfg.chip.cores;
    double t0 = bench_wall(), c0 = bench_cpu();
    run_graph *g = NULL;
    if (bench_graph(&sh, &g, &err) != NP_OK) {
        fprintf(stderr, "bench_run: building the graph: %s\n", err.msg);
        run_graph_free(g);
        return 1;
    }
    double t1 = bench_wall(), c1 = bench_cpu(), rss_build = bench_rss_mib();
    o.time_kernel = bench_time;
    o.time_ctx = &sh;
    run_result *r = NULL;
    if (run_simulate(g, &cfg, NULL, &o, &r, &err) != NP_OK) {
        fprintf(stderr, "bench_run: %s\n", err.msg);
        run_graph_free(g);
        return 1;
    }
    double t2 = bench_wall(), c2 = bench_cpu(), rss = bench_rss_mib();
    uint64_t tasks = 0;
    for (uint32_t c = 0; c < run_graph_classes(g); c++)
        tasks += (uint64_t)run_graph_tasks(g, c) * (sh.tp * sh.dp);
    double R = r->ranks, step_s = (double)r->step_ps * 1e-12;
    double tp_tot = (double)r->comm_ps[RUN_COMM_TP] / R * 1e-12 / r->steps,
           tp_exp = (double)r->exposed_ps[RUN_COMM_TP] / R * 1e-12 / r->steps;
    double pp_tot = (double)r->comm_ps[RUN_COMM_PP] / R * 1e-12 / r->steps,
           pp_exp = (double)r->exposed_ps[RUN_COMM_PP] / R * 1e-12 / r->steps;
    double dp_tot = (double)r->comm_ps[RUN_COMM_DP] / R * 1e-12 / r->steps,
           dp_exp = (double)r->exposed_ps[RUN_COMM_DP] / R * 1e-12 / r->steps;
    const run_link_stats *top = r->n_top ? &r->links[r->top[0]] : NULL;
    if (json) {
        json_t *j = json_pack(
            "{s:s, s:i, s:i, s:i, s:i, s:I, s:f, s:f, s:f, s:f, s:f, s:I, s:I, s:I, s:I, s:I, "
            "s:i, s:i, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:s, s:f}",
            "workload", "gpt3-175b tp8 pp16 dp8 1f1b", "chips", (int)r->ranks, "micro_batches",
            (int)sh.m, "steps", (int)r->steps, "classes", (int)run_graph_classes(g), "tasks",
            (json_int_t)tasks, "build_wall_s", t1 - t0, "build_cpu_s", c1 - c0, "sim_wall_s",
            t2 - t1, "sim_cpu_s", c2 - c1, "max_rss_mib",
            rss, "events", (json_int_t)r->events, "kernels_timed",
            (json_int_t)r->kernels_timed, "colls_simulated", (json_int_t)r->colls_simulated,
            "colls_reused", (json_int_t)r->colls_reused, "transfers",
            (json_int_t)r->transfers, "ranks_simulated", (int)r->ranks_simulated,
            "mirror_ways", (int)r->mirror_ways, "step_time_s", step_s, "bubble_pct",
            100 * r->bubble_frac, "bubble_ratio", r->bubble_ratio, "tp_total_s", tp_tot,
            "tp_exposed_s", tp_exp, "pp_exposed_s", pp_exp, "dp_total_s", dp_tot,
            "dp_exposed_s", dp_exp, "busiest_link", top ? top->name : "",
            "busiest_link_avg_gbps", top ? top->avg_bytes_per_s * 1e-9 : 0.0);
        char *s = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        puts(s);
        free(s);
        json_decref(j);
    } else {
        printf("workload: GPT-3 175B shape, 1024 chips of a100-cluster, tp8 pp16 dp8, 1F1B, "
               "%" PRIu32 " micro-batches, %" PRIu32 " step(s)\n", sh.m, r->steps);
        printf("graph:    %" PRIu32 " classes, %" PRIu64 " tasks per step over all ranks, built "
               "in %.2f s wall, %.2f s CPU (max RSS %.0f MiB)\n", run_graph_classes(g), tasks,
               t1 - t0, c1 - c0, rss_build);
        printf("run:      %.2f s wall, %.2f s CPU, max RSS %.0f MiB, %" PRIu64 " events (%.2f M "
               "events per CPU second)\n", t2 - t1, c2 - c1, rss, r->events,
               (double)r->events / (c2 - c1) * 1e-6);
        printf("shortcuts: %" PRIu32 " of %" PRIu32 " ranks simulated (mirror x%" PRIu32 "), "
               "%" PRIu64 " kernels timed, %" PRIu64 " collectives on the network, %" PRIu64
               " reused (%" PRIu64 " scratch runs), %" PRIu64 " transfers\n",
               r->ranks_simulated, r->ranks, r->mirror_ways, r->kernels_timed,
               r->colls_simulated, r->colls_reused, r->colls_scratch, r->transfers);
        printf("step:     %.3f s; bubble %.2f %% ((p-1)/(m+p-1) = %.2f %%), ratio %.4f "
               "((p-1)/m = %.4f)\n", step_s, 100 * r->bubble_frac,
               100.0 * (sh.pp - 1) / (sh.m + sh.pp - 1), r->bubble_ratio,
               (double)(sh.pp - 1) / sh.m);
        printf("comm per chip: tp %.3f s (exposed %.3f s), pp %.3f s (exposed %.3f s), dp "
               "%.3f s (exposed %.3f s)\n", tp_tot, tp_exp, pp_tot, pp_exp, dp_tot, dp_exp);
        if (top)
            printf("busiest link: %s, avg %.2f GB/s, peak %.2f GB/s (of %.0f GB/s)\n", top->name,
                   top->avg_bytes_per_s * 1e-9, top->peak_bytes_per_s * 1e-9,
                   top->capacity_bytes_per_s * 1e-9);
    }
    run_result_free(r);
    run_graph_free(g);
    return 0;
}
