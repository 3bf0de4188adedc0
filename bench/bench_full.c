/* bench_full.c — one training step at full fidelity (sim/run_full.h): every rank's step lowered
 * to ISA programs and run on one system of chips. Prints the lowering's and the run's wall
 * time, peak RSS, the simulated step time, instructions, kernels and events.
 *
 *   build/bench/bench_full                      # the README's default: gpt2-small on 8 chips
 *                                               # of tpu-pod, dp2 x tp2 x pp2, 1F1B, batch 16
 *                                               # in micro-batches of 2, bf16
 *   build/bench/bench_full --arch tiny --set system.chips=8 --model gpt-tiny --batch 8 \
 *                          --dp 2 --tp 2 --pp 2 --microbatch 1 [--fp32] [--json]
 *   [--attention composite|unfused]             # the composite attention (default: fused, as
 *                                               # npusim run; composite: its softmax with the
 *                                               # scale and mask fused, unfused: every op alone)
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "model.h"
#include "wallclock.h"
#include "optim.h"
#include "plan.h"
#include "run_full.h"

static long peak_rss_kib(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_maxrss;
}

int main(int argc, char **argv)
{
    const char *arch = "tpu-pod", *model = "gpt2-small", *sets[16];
    size_t n_sets = 0;
    int dp = 2, tp = 2, pp = 2;
    int64_t batch = 16, micro = 2;
    bool json = false, fp32 = false, composite = false, unfused = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--json")) {
            json = true;
        } else if (!strcmp(a, "--fp32")) {
            fp32 = true;
        } else if (v && !strcmp(a, "--attention") &&
                   (!strcmp(v, "composite") || !strcmp(v, "fused") || !strcmp(v, "unfused"))) {
            composite = strcmp(v, "fused") != 0, unfused = !strcmp(v, "unfused"), i++;
        } else if (v && !strcmp(a, "--arch")) {
            arch = v, i++;
        } else if (v && !strcmp(a, "--set") && n_sets < 16) {
            sets[n_sets++] = v, i++;
        } else if (v && !strcmp(a, "--model")) {
            model = v, i++;
        } else if (v && !strcmp(a, "--dp")) {
            dp = atoi(v), i++;
        } else if (v && !strcmp(a, "--tp")) {
            tp = atoi(v), i++;
        } else if (v && !strcmp(a, "--pp")) {
            pp = atoi(v), i++;
        } else if (v && !strcmp(a, "--batch")) {
            batch = atoll(v), i++;
        } else if (v && !strcmp(a, "--microbatch")) {
            micro = atoll(v), i++;
        } else {
            fprintf(stderr, "bench_full: unknown argument '%s'\n", a);
            return 2;
        }
    }
    np_err e = {0};
    arch_config cfg;
    nn_model_desc d;
    nn_strategy s;
    nn_strategy_default(&s);
    s.dp = dp, s.tp = tp, s.pp = pp, s.microbatch = micro;
    s.fuse_attention = !composite;
    s.fuse_softmax = !unfused;
    nn_model_opts mo = {.batch = batch, .compute = fp32 ? NN_F32 : NN_BF16, .seed = 1};
    nn_optim adamw = {.kind = NN_OPTIM_ADAMW, .lr = 1e-4, .beta1 = 0.9, .beta2 = 0.95,
                      .eps = 1e-8};
    nn_plan *p = NULL;
    if (arch_resolve(arch, sets, n_sets, &cfg, &e) != NP_OK ||
        nn_model_load(model, &d, &e) != NP_OK ||
        nn_plan_build(&d, &mo, &s, &adamw, &cfg, &p, &e) != NP_OK) {
        fprintf(stderr, "bench_full: %s\n", e.msg);
        return 2;
    }
    double t0 = np_wall_s();
    run_full_result r;
    np_status st = run_full_plan(&cfg, p, NULL, &r, &e);
    double t1 = np_wall_s();
    if (st != NP_OK) {
        fprintf(stderr, "bench_full: %s\n", e.msg);
        nn_plan_free(p);
        return 1;
    }
    long rss = peak_rss_kib();
    if (json) {
        printf("{\"model\": \"%s\", \"arch\": \"%s\", \"chips\": %d, \"wall_s\": %.3f, "
               "\"peak_rss_kib\": %ld, \"step_time_s\": %.9g, \"insns\": %" PRIu64 ", "
               "\"kernels\": %" PRIu64 ", \"comm_entries\": %" PRIu64 ", \"events\": %" PRIu64
               "}\n", model, arch, dp * tp * pp, t1 - t0, rss, r.r->step_ps * 1e-12, r.insns,
               r.kernels, r.comm, r.events);
    } else {
        printf("%s on %d chips of %s, dp %d x tp %d x pp %d, %d micro-batches, %s, full "
               "fidelity\n", model, dp * tp * pp, arch, dp, tp, pp, p->n_micro,
               fp32 ? "fp32" : "bf16");
        printf("  simulated step      %.3f ms\n", r.r->step_ps * 1e-9);
        printf("  wall time           %.2f s (lowering and run)\n", t1 - t0);
        printf("  peak RSS            %.1f MiB\n", rss / 1024.0);
        printf("  programs            %" PRIu64 " instructions, %" PRIu64 " kernels, %" PRIu64
               " communication entries\n", r.insns, r.kernels, r.comm);
        printf("  events              %" PRIu64 " (%.2f M/s)\n", r.events,
               r.events / (t1 - t0) * 1e-6);
    }
    run_full_result_free(&r);
    nn_plan_free(p);
    return 0;
}
