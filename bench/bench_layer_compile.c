/* bench_layer_compile.c — compiling every kernel of one GPT-3 175B transformer layer (issue 10,
 * done-when 4, its last part; see bench/README.md).
 *
 *   build/bench/bench_layer_compile [--arch A] [--layer L] [--seq S] [--tp T] [--reps N]
 *
 * Builds the plan of GPT-3 175B (96 layers, d_model 12288, 96 heads) for one device (or tp T),
 * micro-batch 1, sequence 2048, bf16 with AdamW, and takes model layer L's compute nodes
 * (default 0): its forward, its backward and the optimizer's updates of its parameters. Each
 * node's kernel (lower_node_kernel: operands, attributes, checked against the kernel's
 * reference) is compiled alone into a program for every core of A's chip (default tpu-pod),
 * as `npusim run` does before it simulates them (lower_kernel_alone). Nothing is simulated.
 *
 * Prints the kernels (nodes, distinct ops), the instructions emitted, and the wall time of
 * mapping plus compiling them, best of N repetitions (default 3). Goal: under 1 s.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "arch.h"
#include "wallclock.h"
#include "lower.h"
#include "model.h"
#include "optim.h"
#include "plan.h"

int main(int argc, char **argv)
{
    const char *arch = "tpu-pod";
    int layer = 0, tp = 1, reps = 3;
    int64_t seq = 2048;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--arch") && i + 1 < argc)
            arch = argv[++i];
        else if (!strcmp(argv[i], "--layer") && i + 1 < argc)
            layer = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--seq") && i + 1 < argc)
            seq = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--tp") && i + 1 < argc)
            tp = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_layer_compile [--arch A] [--layer L] [--seq S] "
                            "[--tp T] [--reps N]\n");
            return 2;
        }
    }
    np_err e = {0};
    arch_config cfg;
    nn_model_desc d;
    if (arch_resolve(arch, NULL, 0, &cfg, &e) != NP_OK || nn_model_load("gpt3-175b", &d, &e)) {
        fprintf(stderr, "bench_layer_compile: %s\n", e.msg);
        return 2;
    }
    nn_strategy s;
    nn_strategy_default(&s);
    s.tp = tp, s.microbatch = 1;
    nn_model_opts o = {.batch = 1, .seq = seq, .compute = NN_BF16, .seed = 1};
    nn_optim opt = {.kind = NN_OPTIM_ADAMW, .lr = 1e-4, .beta1 = 0.9, .beta2 = 0.95,
                    .eps = 1e-8, .weight_decay = 0.1};
    nn_plan *p = NULL;
    double t0 = np_wall_s();
    if (nn_plan_build(&d, &o, &s, &opt, &cfg, &p, &e) != NP_OK) {
        fprintf(stderr, "bench_layer_compile: %s\n", e.msg);
        return 2;
    }
    double plan_s = np_wall_s() - t0;
    int n = lower_plan_layer_nodes(p, layer, NULL, 0);
    const nn_tensor **nodes = calloc((size_t)(n ? n : 1), sizeof *nodes);
    if (!nodes)
        return 1;
    lower_plan_layer_nodes(p, layer, nodes, n);
    bool ops[NN_OP_COUNT] = {false};
    int n_ops = 0, by_region[4] = {0};
    for (int i = 0; i < n; i++)
        by_region[nodes[i]->region & 3]++;
    uint64_t insns = 0, flops = 0;
    double best = 0;
    for (int r = 0; r < (reps > 0 ? reps : 1); r++) {
        insns = 0, flops = 0;
        double t1 = np_wall_s();
        for (int i = 0; i < n; i++) {
            kc_kernel k;
            kc_result res;
            if (lower_node_kernel(nodes[i], (uint32_t)cfg.chip.cores, &k, &e) != NP_OK ||
                lower_kernel_alone(&cfg, &k, &res, NULL, &e) != NP_OK) {
                fprintf(stderr, "bench_layer_compile: node '%s': %s\n", nodes[i]->name, e.msg);
                return 1;
            }
            insns += res.insns, flops += res.flops;
            if (!r && !ops[nodes[i]->op])
                ops[nodes[i]->op] = true, n_ops++;
        }
        double w = np_wall_s() - t1;
        best = r == 0 || w < best ? w : best;
    }
    printf("GPT-3 175B layer %d, micro-batch 1, sequence %" PRId64 ", tp %d, on %s (%d cores "
           "a chip)\n", layer, seq, tp, arch, (int)cfg.chip.cores);
    printf("  plan            %.3f s (all 96 layers)\n", plan_s);
    printf("  kernels         %d of %d ops: %d forward, %d backward, %d optimizer\n", n, n_ops,
           by_region[NN_REGION_FORWARD], by_region[NN_REGION_BACKWARD],
           by_region[NN_REGION_OPTIM]);
    printf("  instructions    %" PRIu64 " (all cores)\n", insns);
    printf("  FLOPs           %.3f TFLOP\n", (double)flops * 1e-12);
    printf("  compile         %.3f s wall (best of %d; goal < 1 s)\n", best, reps);
    free(nodes);
    nn_plan_free(p);
    return 0;
}
