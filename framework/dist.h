/* dist.h — the reference distributed executor: runs every rank's plan (plan.h) on the CPU,
 * with in-memory collectives and point-to-point messages, so that sharded training can be
 * checked against single-device training on the reference executor (nn.h).
 *
 * Ranks run cooperatively in one thread: each advances through its entries in schedule
 * order until it waits — at a recv whose message has not been sent, or at a collective some
 * member of whose group has not reached — then the next rank runs. Sends never wait. A
 * collective computes when its last member arrives, in group order (sums accumulate in
 * double over the members in coordinate order), so results do not depend on arrival order
 * and a run is deterministic. When no rank can move and some are not finished, the step fails
 * with NP_ERR_DEADLOCK naming what every waiting rank waits for.
 *
 *   nn_dist *d;
 *   nn_dist_new(plan, &d, &err);
 *   nn_dist_load_params(d, single_device_graph, &err);   // same initial values, sharded
 *   nn_dist_step(d, inputs, labels, &loss, &err);         // the global batch
 *   nn_dist_param(d, "h.0.attn.c_attn.weight", values, n, &err);
 */
#ifndef NPUSIM_DIST_H
#define NPUSIM_DIST_H

#include "plan.h"

typedef struct nn_dist nn_dist;

/* An executor for plan p (which must outlive it). NP_ERR_NOMEM on failure. */
np_status nn_dist_new(const nn_plan *p, nn_dist **out, np_err *err);
void nn_dist_free(nn_dist *d);

/* Gives every rank its piece of each parameter (fp32 masters and bf16 copies alike) from
 * the valued parameters of a single-device graph of the same model, found by name;
 * optimizer states and gradient accumulators start at zero. NP_ERR_MISSING names a
 * parameter src lacks or that has no values. */
np_status nn_dist_load_params(nn_dist *d, const nn_graph *src, np_err *err);

/* One training step on the global batch: `input` holds the model's input for the whole
 * batch (tokens or features, batch rows first) and `labels` its labels; each dp rank takes
 * its rows, split into micro-batches. *loss is the mean of the micro-batches' losses (the
 * single-device loss of the batch). Errors: NP_ERR_DEADLOCK (the plan's ranks wait on each
 * other), the reference kernels' errors (named by rank). */
np_status nn_dist_step(nn_dist *d, const float *input, const float *labels, double *loss,
                       np_err *err);

/* The whole parameter `name` as training has made it (the fp32 master in mixed precision),
 * reassembled from the ranks' pieces into out[0..n) (n = its element count). */
np_status nn_dist_param(const nn_dist *d, const char *name, float *out, int64_t n, np_err *err);

/* Rank `rank`'s values of tensor t of its class graph: its instance of micro-batch mb for a
 * data leaf or a node of a micro-batch block (mb -1: the last micro-batch's; the last step's,
 * kept until the next step starts), its one instance otherwise; numel(t) floats the caller
 * may read and write (to give a rank its state, or to put back a state computed elsewhere
 * before nn_dist_param reassembles it), or NULL when the executor holds none (not computed or
 * loaded yet; a constant's values are t->data). */
float *nn_dist_values(nn_dist *d, int rank, const nn_tensor *t, int mb);

/* The reference implementation of communication node t (all_reduce, reduce_scatter,
 * all_gather, broadcast, reduce, all_to_all, group_copy, shard_slice) over its group:
 * in[j] and out[j] are group member j's values of t->src[0] and of t (the group's size is
 * t's NN_COMM_IP_SIZE; member j of a shard_slice takes part j). */
np_status nn_dist_collective(const nn_tensor *t, float *const *in, float *const *out, np_err *err);

#endif
