/* run_fuse.h — which compute nodes of a plan's class the step lowering fuses, so that fast
 * fidelity times the kernels full fidelity runs (compiler/lower.h: lower_plan_rank compiles a
 * fusion group's head with the elementwise chain after it as one kernel, and folds a
 * transpose read only by matmuls into their operands' strides).
 *
 *   run_fuse *f;
 *   run_fuse_class(plan, &plan->classes[c], false, &f, &err);
 *   switch (run_fuse_kind(f, node)) {
 *   case RUN_FUSE_KERNEL: run_fuse_kernel(f, node, cores, &k, &err); break; // head + chain
 *   case RUN_FUSE_INSIDE: break;            // computed inside another node's kernel: no task
 *   default: ...                            // views, communication, leaves
 *   }
 *   run_fuse_free(f);
 *
 * The decisions are the lowering's (lower.c's classification), taken on each node's first
 * instance in the class's schedule: a kernel head whose kernel takes an epilogue
 * (KC_DEF_EPILOGUE) and that heads its nn_pass_fuse group absorbs each next node of its
 * group in the same block that alone reads the previous one, while lower_epi_ok accepts it
 * and its other operand is computed (or held) before the head; a transpose (lower_is_transpose)
 * that only matmuls read is folded; an attention_lse that an earlier attention kernel of the
 * same micro-batch, q, k, mask and scale writes as its second output (flash attention's
 * forward keeps its log-sum-exp for the backward) is inside that kernel. The rules themselves (which steps an epilogue takes, what
 * a transpose is, the kernels) are the compiler's functions; the walk over the plan is this
 * file's. tests/test_run_fidelity.c checks that the kernels equal lower_plan_rank's.
 */
#ifndef NPUSIM_SIM_RUN_FUSE_H
#define NPUSIM_SIM_RUN_FUSE_H

#include <stdint.h>

#include "err.h"
#include "kernel.h"
#include "plan.h"

typedef enum run_fuse_kind {
    RUN_FUSE_OTHER,   /* not a compute node with a kernel (a leaf, a view, communication) */
    RUN_FUSE_KERNEL,  /* the head of a kernel (with its chain, if any) */
    RUN_FUSE_INSIDE,  /* an epilogue step of another node's kernel, a folded transpose, or
                         an attention_lse its attention kernel writes */
} run_fuse_kind;

typedef struct run_fuse run_fuse;

/* The fusion of class c of plan p (both must outlive it): runs nn_pass_fuse on c's graph (it
 * only records fusion groups, as lower_plan_rank does). With no_fuse (lower_opts.no_fuse)
 * no epilogue and no folded transpose, but attentions still write their lse. NP_ERR_NOMEM. */
np_status run_fuse_class(const nn_plan *p, const nn_plan_class *c, bool no_fuse,
                         run_fuse **out, np_err *err);
/* The same for a graph outside any plan (an inference graph, sim/infer.c): its nodes in
 * creation order as one block of one micro-batch, inputs as data leaves and every other leaf
 * persistent. Runs nn_pass_fuse on g. NP_ERR_NOMEM. */
np_status run_fuse_graph(nn_graph *g, run_fuse **out, np_err *err);
void run_fuse_free(run_fuse *f);

run_fuse_kind run_fuse_kind_of(const run_fuse *f, const nn_tensor *t);

/* The nodes a head's kernel computes after it (its epilogue chain, in order); *n of them. */
const nn_tensor *const *run_fuse_chain(const run_fuse *f, const nn_tensor *head, int *n);

/* The kernel of head (RUN_FUSE_KERNEL) on `cores` cores, operands at address 0: dense, but a
 * folded transpose's reader takes its source with the last two dims' strides swapped; the
 * chain as its epilogue, its output the chain's last node. Errors of lower_node_kernel_at. */
np_status run_fuse_kernel(const run_fuse *f, const nn_tensor *head, uint32_t cores,
                          kc_kernel *k, np_err *err);

/* FLOPs of head's kernel: the head's, its chain's and its lse's (nn_node_flops, or
 * nn_node_model_flops when model is set), so that the tasks' FLOPs add up to the plan's. */
int64_t run_fuse_flops(const run_fuse *f, const nn_tensor *head, bool model);

#endif
