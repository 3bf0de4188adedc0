/* search_bound.h — a lower bound of the step time the fast engine (run_engine.h) gives a run
 * graph, from a lower bound of each kernel's duration, without simulating the network
 * (docs/search.md, "The bound").
 *
 * It is the step of the same graph on an ideal network: every collective, send and receive
 * takes no time and a collective waits for none of its group's other members, while every
 * rank's compute engine still runs its kernels one at a time in issue order, each after its
 * dependencies (a receive after the matching send of the peer's class), after the stream's gap
 * (chip.kernel_gap_ns) and, for a step's first kernel and one after a host synchronization,
 * the host's launch (chip.kernel_launch_ns) — what the engine does, less every wait on the
 * network. Each constraint kept is one the engine obeys and each duration is at most the
 * engine's, so every task ends no later here than in the engine: the result is <= the
 * simulated step whatever the network. It still holds every pipeline bubble a compute-bound
 * schedule has (fill, drain, waits between stages), which is what sets strategies apart
 * before their communication.
 *
 * Ranks of a class run the same tasks, so the bound is computed once per class (a send's
 * receiving class is that of its peer in the pipeline); one pass over the tasks. */
#ifndef NPUSIM_SIM_SEARCH_BOUND_H
#define NPUSIM_SIM_SEARCH_BOUND_H

#include <stdint.h>

#include "arch.h"
#include "err.h"
#include "run_graph.h"
#include "run_kernel.h"

/* The bound, in ps, of one step of finalized graph g on cfg's chips (cfg gives the kernel gap
 * and launch; NULL: none), kernel k taking kernel_ps[k] (k < run_graph_kernels(g); each at
 * most what the engine's timing function gives it, chained or not). NP_ERR_NOMEM. */
np_status search_bound_graph(const run_graph *g, const arch_config *cfg,
                             const uint64_t *kernel_ps, uint64_t *bound_ps, np_err *err);

/* A lower bound, in ps, of kernel ks's duration on cfg's chip, alone and right after itself
 * (run_ktime.ps and chained_ps), without compiling it: the larger of
 *   - compute: a matrix kernel's (matmul, convolution, attention and their gradients) head
 *     FLOPs at the chip's highest matrix peak (run_peak_flops of bf16, fp16, fp32 and its
 *     own dtype); the head's only, as its fused elementwise steps run on the vector units;
 *   - memory: the bytes of its outputs (ks->k.out, each written in full: a kernel's results
 *     leave the cores for the memory their addresses name) over the fastest path to memory,
 *     the HBM's bandwidth or, on a chip with an L2 (chip.l2_bytes > 0), the larger of it and
 *     the L2's (an L2 takes writes and serves reads, so inputs are not counted: they may
 *     hit). No fusion rule is repeated here: ks is what the lowering made it (run_plan_build),
 *     a fused chain's head with the chain's last result as its output.
 * A node-only kernel spec (run_plan_opts.nodes_only: no operands) gets the compute term alone.
 * tests/test_search.c checks it against the core model's timing of every kernel of several
 * models' plans. */
uint64_t search_bound_kernel_ps(const run_kspec *ks, const arch_config *cfg);

#endif
