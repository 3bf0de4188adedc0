/* run_kernel.h — the compute kernels of `npusim run`: a plan's compute node becomes a kernel of
 * the kernel ABI (compiler/kernel.h), spread over every core of its chip, named by a key that
 * holds everything its timing depends on (not an attribute its kernel_def names
 * values_only_attr: dropout's seed), and timed by compiling it twice in a row on a
 * stand-alone program and simulating that program on the core model in timing mode
 * (hw-model/core.h): the first copy is the kernel alone, the rest its chained duration.
 *
 *   kc_kernel k;
 *   run_kernel_of_node(node, &cfg, &k, &err);          // op, operands, attributes, placement
 *   char key[RUN_KEY_MAX];
 *   run_kernel_key(&k, key, sizeof key);               // "matmul in0=bf16[64,32] ... cores=0+8"
 *   run_ktimer *t;
 *   run_ktimer_create(&cfg, "kernels.cache", &t, &err); // (file optional) timings kept on disk
 *   run_ktime kt;
 *   run_ktimer_time(t, &(run_kernel){.key = key, .data = &k}, &kt, &err);  // a run_kernel_fn
 *   run_ktimer_free(t);
 *
 * What a node lowers to is the step lowering's own mapping (compiler/lower.h,
 * lower_node_kernel), so both fidelities time the same kernels for the same nodes:
 *   - views (NN_OPF_VIEW: reshape, stop_grad, group_copy, send), ops compiler/kernels.def
 *     marks as needing no kernel and a pipeline scatter's slice lower to nothing
 *     (run_node_is_view);
 *   - every other op to the kernel of kernels.def: inputs the node's sources (dense,
 *     row-major), outputs its result (an update: the parameter and its state), attributes
 *     from the node's parameters, checked against the kernel's reference, placed on cores
 *     0 .. chip.cores-1. An op without a kernel, or whose kernel does not take this form of
 *     it, is an error naming the op, the node and its shapes — never a guessed duration.
 *
 * The timing cache file (optional): one line per kernel, keyed by the kernel's key, the
 * architecture's fingerprint (a hash of its core and chip sections, energy too under a power
 * cap) and the build (a hash of
 * the running executable: the compiler and the core model that made the timing), so a timing
 * is reused only where compiling and simulating the kernel again would give the same; other
 * architectures' and builds' lines are kept. A reused kernel is neither compiled nor simulated.
 * Lines are appended as kernels are simulated.
 */
#ifndef NPUSIM_SIM_RUN_KERNEL_H
#define NPUSIM_SIM_RUN_KERNEL_H

#include <stdbool.h>
#include <stdint.h>

#include "arch.h"
#include "err.h"
#include "kernel.h"
#include "nn.h"
#include "run_engine.h"

#define RUN_KEY_MAX 512

/* What a run graph's kernel (run_kernel.data) points at. */
typedef struct run_kspec {
    kc_kernel k;             /* operand addresses 0 */
    const nn_tensor *node;   /* the first plan node with this key (names, messages): the
                                kernel's head */
    int64_t flops;           /* the head's and its fused chain's FLOPs (nn_node_flops) */
    int64_t model_flops;     /* ... as model FLOPs (nn_node_model_flops) */
    /* filled when it is timed */
    char name[64];           /* its kernel symbol ("matmul") */
    uint64_t hbm_bytes;      /* HBM bytes its schedule moves (kc_result; with an L2,
                                chip.l2_bytes > 0, what reached the HBM in its simulation) */
    uint64_t spad_bytes;     /* scratchpad at its peak on its fullest core (kc_result; 0:
                                unknown, a timing from the cache file) */
} run_kspec;

/* True when node lowers to nothing (a view, an op kernels.def says needs no kernel, a
 * pipeline scatter's slice): lower_node_is_view, the lowering's own rule. */
bool run_node_is_view(const nn_tensor *node);

/* Fills *k with the kernel of node on cfg's chip (operand addresses 0): lower_node_kernel.
 * NP_ERR_MISSING when the op has no kernel (or none for this form of it), NP_ERR_INCONSISTENT
 * when the kernel's operands, attributes or reference do not describe the node; each message
 * names the op, the node and its shapes. */
np_status run_kernel_of_node(const nn_tensor *node, const arch_config *cfg, kc_kernel *k,
                             np_err *err);

/* "relu bf16[8,32] -> bf16[8,32]": the node's op and shapes, for messages. */
char *run_node_desc(const nn_tensor *node, char *buf, size_t n);

/* The key of k: op, every operand's dtype, shape and strides, attributes, epilogue and
 * placement, as text (deterministic; equal kernels give equal keys). */
void run_kernel_key(const kc_kernel *k, char *buf, size_t n);

/* A hash of the architecture's core and chip sections (what a kernel's timing depends on), and
 * of its energy section under a power cap (chip.power_cap_w > 0: the clock depends on power). */
uint64_t run_arch_fingerprint(const arch_config *cfg);

typedef struct run_ktimer run_ktimer;

typedef struct run_ktimer_stats {
    uint32_t compiled;   /* kernels compiled */
    uint32_t simulated;  /* ... simulated on the core model (twice in a row: run_ktimer_time) */
    uint32_t simulated_alone; /* of those, simulated alone too (their copies ran beside
                                 each other: one core) */
    uint32_t from_file;  /* kernels whose timing came from the cache file (not compiled) */
    uint32_t reused;     /* kernels timed earlier by this timer (not compiled again) */
    uint32_t rejected;   /* cache lines of this architecture and build whose check or figures
                            were wrong (edited, torn): their kernels simulated again */
    double sim_wall_s;   /* wall time spent compiling and simulating */
} run_ktimer_stats;

/* A kernel timer for cfg (which must outlive it), with an optional cache file (path NULL:
 * none; a missing file is created when the first timing is written; without a readable
 * /proc/self/exe the build is unknown and no file is used). NP_ERR_IO when the file exists
 * but cannot be read, NP_ERR_FORMAT naming the line that is not an entry. A line of this
 * architecture and build whose check (a hash of its figures and key) or figures are wrong is
 * not trusted: counted in run_ktimer_stats.rejected, its kernel simulated again. Every kernel
 * the timer times is kept in memory, file or not: one timer shared by several runs (a search's
 * candidates) compiles and simulates each distinct kernel once (run_ktimer_stats.reused). */
np_status run_ktimer_create(const arch_config *cfg, const char *path, run_ktimer **out,
                            np_err *err);
void run_ktimer_free(run_ktimer *t);

/* (optional) called before each kernel is compiled and simulated: done of total so far. */
void run_ktimer_set_progress(run_ktimer *t, void (*fn)(void *ctx, const char *what),
                             void *ctx);

/* The run_kernel_fn: times k (k->data is its run_kspec, whose name and hbm_bytes it fills):
 * duration, and the busy time of the matrix units, vector units and DMA engines (mean over
 * the chip's cores), alone on a fresh chip, and the duration right after itself (chained_ps).
 * One program holds the kernel twice (lower_kernel_repeated, compiled once with the cost
 * model); its one run gives both, the first copy's figures being the kernel alone's — unless
 * the report shows the copies running beside each other (one core: no barrier between them),
 * when the kernel is compiled and simulated alone too (run_ktimer_stats.simulated_alone).
 * Errors of the compiler and the core model (naming the kernel), NP_ERR_IO when the cache
 * file cannot be appended to. */
np_status run_ktimer_time(void *ctx, const run_kernel *k, run_ktime *out, np_err *err);

run_ktimer_stats run_ktimer_get_stats(const run_ktimer *t);

/* One timing the timer holds, as it travels between processes (a search's workers send the
 * kernels they timed back to the search, whose later workers start with them). */
typedef struct run_ktimer_entry {
    char key[RUN_KEY_MAX];
    char name[64];
    run_ktime t;
    uint64_t hbm_bytes, spad_bytes;
} run_ktimer_entry;

/* How many timings t holds (from its file and timed since): entries 0 .. count-1, in the order
 * they were added. */
uint32_t run_ktimer_count(const run_ktimer *t);
/* Entry i (< run_ktimer_count) into *out. */
void run_ktimer_entry_get(const run_ktimer *t, uint32_t i, run_ktimer_entry *out);
/* Adds e, timed elsewhere for the same architecture and build, to t's memory (not its file:
 * the process that timed it appended it there); a key t holds already is kept as it is.
 * false when out of memory. */
bool run_ktimer_entry_put(run_ktimer *t, const run_ktimer_entry *e);

#endif
