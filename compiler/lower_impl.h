/* lower_impl.h — what the lowering's files share (internal to compiler/): a node's kernel,
 * fusion chains, and the arena planner. */
#ifndef NPUSIM_LOWER_IMPL_H
#define NPUSIM_LOWER_IMPL_H

#include "lower.h"

/* The kernel of node with the given operand layouts: in[i] for node->src[i] (an update's
 * outputs are its in-place sources: out[0] = in[0], out[j] = in[j + 1]), out for its result;
 * attributes from the node (kc_kernel_def.from_node), checked against the kernel's reference;
 * placed on cores 0 .. cores-1 of chip. Errors as lower_node_kernel. */
np_status lw_node_kernel(const nn_tensor *node, const kc_tensor *in, const kc_tensor *out,
                         uint32_t chip, uint32_t cores, kc_kernel *k, np_err *err);

/* True when node lowers to no code of its own: a view (NN_OPF_VIEW) or an op kernels.def
 * says needs no kernel. */
bool lw_is_view(const nn_tensor *node);

/* True when a kernel whose result is `cur` can apply node m (which reads cur) as its next
 * epilogue step (kernel.h's kc_epi, KC_DEF_EPILOGUE): *arg is m's other operand (NULL for a
 * step without one). */
bool lw_epi_step_ok(const nn_tensor *cur, const nn_tensor *m, const nn_tensor **arg);

/* Fills *e with the epilogue step of node m (lw_epi_step_ok), its operand at layout arg. */
void lw_epi_step(const nn_tensor *m, const kc_tensor *arg, kc_epi *e);

/* ---- the arena ------------------------------------------------------------------------------
 * Transient buffers placed by liveness, with nn_memplan_build's rule (pass.h): in step order,
 * a step's new buffers are placed first (best fit into the gaps, else at the end, 64-byte
 * aligned), then the buffers it was the last reader of are freed — so a step's outputs never
 * overlap its inputs, and buffers whose lifetimes do not overlap share bytes. */
typedef struct lw_buf {
    uint64_t bytes;
    int32_t first, last;   /* the step that writes it first, the last step that reads it */
    uint64_t off;          /* set by lw_arena_plan */
} lw_buf;

/* Places bufs[0 .. n) (steps 0 .. n_steps-1; buffers of one step in index order). Sets each
 * off; *arena the bytes needed. NP_ERR_NOMEM. */
np_status lw_arena_plan(lw_buf *bufs, uint32_t n, int32_t n_steps, uint64_t *arena, np_err *err);

#endif
