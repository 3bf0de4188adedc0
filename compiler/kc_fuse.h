/* kc_fuse.h — fusion groups of the framework (nn_pass_fuse) as kernels: the ABI entry for a
 * fused chain.
 *
 * nn_pass_fuse records groups (nn_tensor.fusion_group): chains of nodes, each but the first
 * the only reader of the one before it, all with one element count — bias + activation,
 * residual adds, scales, casts, dropout. A chain becomes kernels of the ABI (kernel.h) with
 * no HBM round trip inside any of them: the first node is the kernel's op and the ones after
 * it its epilogue steps (kc_epi), each reading the running value and at most one other tensor
 * (its arg, with `swap` when the running value is the node's second source):
 *
 *   - a chain that starts with an elementwise op is ONE vector kernel (kc_elem.c takes every
 *     elementwise step, KC_DEF_EPILOGUE_ALL), up to KC_MAX_EPI steps a kernel;
 *   - a chain that starts with a matmul or conv2d takes the longest prefix the matrix unit's
 *     epilogue applies (add, sub, mul, div with the running value first, scale, relu, gelu,
 *     silu, tanh, exp; a cast as the very last step becomes the output's dtype) as its
 *     epilogue, and the rest of the chain as one vector kernel reading its result;
 *   - a view (reshape) ends a kernel; the next one starts at the view's output (same bytes).
 *
 * A chain that starts with another op (softmax, layernorm, ...) is compiled by the caller
 * with that op's kernel; pass the rest of the chain here. The intermediate tensors of a kernel
 * are never written to HBM: `where` is asked only for the kernels' inputs and outputs.
 *
 *   nn_pass_fuse(g);
 *   nn_tensor *chain[32];
 *   int n = kc_fuse_members(g, head->id, chain, 32);
 *   kc_kernel ks[4];
 *   int nk;
 *   kc_fuse_group(chain, n, my_where, my_ctx, &place, ks, 4, &nk, &err);
 *   for (int i = 0; i < nk; i++) kc_compile(prog, &ks[i], NULL, &err);
 */
#ifndef NPUSIM_KC_FUSE_H
#define NPUSIM_KC_FUSE_H

#include "kernel.h"

/* Where tensor t lives in HBM: fills *out (address, dtype, shape, strides; kc_tensor_of
 * fills a dense one). Errors are the caller's; returned as they are. */
typedef np_status (*kc_where_fn)(void *ctx, const nn_tensor *t, kc_tensor *out, np_err *err);

/* The members of fusion group `group` (nn_tensor.fusion_group, the id of its first node) in
 * chain order, into nodes[0 .. max); returns how many the group has (0: no such group). */
int kc_fuse_members(const nn_graph *g, int group, nn_tensor **nodes, int max);

/* The kernels computing chain nodes[0 .. n) (each node but the first reading the one before
 * it, as kc_fuse_members orders a group), placed on *place, into out[0 .. max); *n_out says
 * how many. NP_ERR_INCONSISTENT for nodes that are not such a chain or a first node that is
 * neither elementwise nor a matmul / conv2d; NP_ERR_RANGE when more than max kernels are
 * needed; where's errors. */
np_status kc_fuse_group(nn_tensor *const *nodes, int n, kc_where_fn where, void *ctx,
                        const kc_place *place, kc_kernel *out, int max, int *n_out, np_err *err);

#endif
