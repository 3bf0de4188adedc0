/* op_kernels.h — the shape inference, FLOPs, reference kernels and backward rules of the ops,
 * defined in op_*.c and optim.c and gathered into nn_op_impls[] by ops_table.c. */
#ifndef NPUSIM_OP_KERNELS_H
#define NPUSIM_OP_KERNELS_H

#include "nn_impl.h"

#define NN_KERNEL_DECLS(family)                                                            \
    np_status nn_infer_##family(nn_tensor *t, np_err *err);                                \
    void nn_fwd_##family(nn_tensor *t);

NN_KERNEL_DECLS(binary)
NN_KERNEL_DECLS(unary)
NN_KERNEL_DECLS(act_grad)
NN_KERNEL_DECLS(bcast)
NN_KERNEL_DECLS(reduce)
NN_KERNEL_DECLS(reduce_max_grad)
NN_KERNEL_DECLS(matmul)
NN_KERNEL_DECLS(conv2d)
NN_KERNEL_DECLS(conv2d_grad_input)
NN_KERNEL_DECLS(conv2d_grad_weight)
NN_KERNEL_DECLS(pool)
NN_KERNEL_DECLS(pool_grad)
NN_KERNEL_DECLS(norm)
NN_KERNEL_DECLS(norm_grad)
NN_KERNEL_DECLS(softmax)
NN_KERNEL_DECLS(softmax_grad)
NN_KERNEL_DECLS(rope)
NN_KERNEL_DECLS(attention)
NN_KERNEL_DECLS(reshape)
NN_KERNEL_DECLS(permute)
NN_KERNEL_DECLS(concat)
NN_KERNEL_DECLS(slice_pad)
NN_KERNEL_DECLS(embedding)
NN_KERNEL_DECLS(embedding_grad)
NN_KERNEL_DECLS(cross_entropy)
NN_KERNEL_DECLS(cross_entropy_grad)
NN_KERNEL_DECLS(update)
NN_KERNEL_DECLS(comm)
NN_KERNEL_DECLS(one_hot)
NN_KERNEL_DECLS(stop_grad)
NN_KERNEL_DECLS(buf_update)
NN_KERNEL_DECLS(topk)
NN_KERNEL_DECLS(moe_dispatch)
NN_KERNEL_DECLS(moe_combine)
NN_KERNEL_DECLS(moe_combine_grad)
NN_KERNEL_DECLS(moe_gmm)
NN_KERNEL_DECLS(moe_gmm_grad_w)
#undef NN_KERNEL_DECLS

void nn_fwd_copy(nn_tensor *t);
void nn_fwd_attention_grad(nn_tensor *t);

void nn_bwd_binary(nn_graph *g, nn_tensor *t, nn_tensor *dy);
void nn_bwd_unary(nn_graph *g, nn_tensor *t, nn_tensor *dy);
void nn_bwd_bcast(nn_graph *g, nn_tensor *t, nn_tensor *dy);
void nn_bwd_reduce(nn_graph *g, nn_tensor *t, nn_tensor *dy);
void nn_bwd_matmul(nn_graph *g, nn_tensor *t, nn_tensor *dy);
void nn_bwd_conv2d(nn_graph *g, nn_tensor *t, nn_tensor *dy);
void nn_bwd_pool(nn_graph *g, nn_tensor *t, nn_tensor *dy);
void nn_bwd_norm(nn_graph *g, nn_tensor *t, nn_tensor *dy);
void nn_bwd_softmax(nn_graph *g, nn_tensor *t, nn_tensor *dy);
void nn_bwd_rope(nn_graph *g, nn_tensor *t, nn_tensor *dy);
void nn_bwd_attention(nn_graph *g, nn_tensor *t, nn_tensor *dy);
void nn_bwd_reshape(nn_graph *g, nn_tensor *t, nn_tensor *dy);
void nn_bwd_permute(nn_graph *g, nn_tensor *t, nn_tensor *dy);
void nn_bwd_concat(nn_graph *g, nn_tensor *t, nn_tensor *dy);
void nn_bwd_slice_pad(nn_graph *g, nn_tensor *t, nn_tensor *dy);
void nn_bwd_embedding(nn_graph *g, nn_tensor *t, nn_tensor *dy);
void nn_bwd_cross_entropy(nn_graph *g, nn_tensor *t, nn_tensor *dy);
void nn_bwd_comm(nn_graph *g, nn_tensor *t, nn_tensor *dy);
void nn_bwd_moe_route(nn_graph *g, nn_tensor *t, nn_tensor *dy);
void nn_bwd_moe_gmm(nn_graph *g, nn_tensor *t, nn_tensor *dy);

int64_t nn_flops_sum_to(const nn_tensor *t);
int64_t nn_flops_reduce(const nn_tensor *t);
int64_t nn_flops_matmul(const nn_tensor *t);
int64_t nn_flops_conv2d(const nn_tensor *t);
int64_t nn_flops_conv2d_grad_input(const nn_tensor *t);
int64_t nn_flops_conv2d_grad_weight(const nn_tensor *t);
int64_t nn_flops_pool(const nn_tensor *t);
int64_t nn_flops_pool_grad(const nn_tensor *t);
int64_t nn_flops_norm(const nn_tensor *t);
int64_t nn_flops_softmax(const nn_tensor *t);
int64_t nn_flops_rope(const nn_tensor *t);
int64_t nn_flops_attention(const nn_tensor *t);
int64_t nn_model_flops_attention(const nn_tensor *t);
int64_t nn_attention_macs(const nn_tensor *t);
int64_t nn_flops_none(const nn_tensor *t);
int64_t nn_flops_move(const nn_tensor *t);
int64_t nn_flops_cross_entropy(const nn_tensor *t);
int64_t nn_flops_update(const nn_tensor *t);
int64_t nn_flops_buf_update(const nn_tensor *t);
int64_t nn_flops_topk(const nn_tensor *t);
int64_t nn_flops_moe_route(const nn_tensor *t);
int64_t nn_flops_moe_gmm(const nn_tensor *t);

#endif
