/* ops_table.c — the op registry: names and flags from ops.def, and nn_op_impls[], one row
 * per op (designated initializers indexed by the enum) naming its shape inference, FLOPs,
 * reference kernel and backward rule. */
#include <assert.h>

#include "op_kernels.h"

static const struct {
    const char *name;
    unsigned flags;
    const char *no_grad;
} nn_op_info[NN_OP_COUNT] = {
#define NN_OP(name, text, flags, no_grad) [NN_OP_##name] = {text, flags, no_grad},
#include "ops.def"
#undef NN_OP
};

const char *nn_op_name(nn_op op) { return op < NN_OP_COUNT ? nn_op_info[op].name : "?"; }
unsigned nn_op_flags(nn_op op) { return op < NN_OP_COUNT ? nn_op_info[op].flags : 0; }
const char *nn_op_no_grad_reason(nn_op op) { return op < NN_OP_COUNT ? nn_op_info[op].no_grad : NULL; }
bool nn_op_has_backward(nn_op op) { return op < NN_OP_COUNT && nn_op_impls[op].backward != NULL; }

#define ELEM(fam) {.infer = nn_infer_##fam, .forward = nn_fwd_##fam}
#define ROW(fam, fl, bw) {.infer = nn_infer_##fam, .flops = fl, .forward = nn_fwd_##fam, .backward = bw}

const nn_op_impl nn_op_impls[NN_OP_COUNT] = {
    [NN_OP_LEAF] = {0},
    [NN_OP_ADD] = ROW(binary, NULL, nn_bwd_binary),
    [NN_OP_SUB] = ROW(binary, NULL, nn_bwd_binary),
    [NN_OP_MUL] = ROW(binary, NULL, nn_bwd_binary),
    [NN_OP_DIV] = ROW(binary, NULL, nn_bwd_binary),
    [NN_OP_SCALE] = ROW(unary, NULL, nn_bwd_unary),
    [NN_OP_RELU] = ROW(unary, NULL, nn_bwd_unary),
    [NN_OP_GELU] = ROW(unary, NULL, nn_bwd_unary),
    [NN_OP_SILU] = ROW(unary, NULL, nn_bwd_unary),
    [NN_OP_TANH] = ROW(unary, NULL, nn_bwd_unary),
    [NN_OP_EXP] = ROW(unary, NULL, nn_bwd_unary),
    [NN_OP_LOG] = ROW(unary, NULL, nn_bwd_unary),
    [NN_OP_CAST] = ROW(unary, nn_flops_none, nn_bwd_unary),
    [NN_OP_DROPOUT] = ROW(unary, NULL, nn_bwd_unary),
    [NN_OP_CAUSAL_MASK] = ROW(unary, NULL, nn_bwd_unary),
    [NN_OP_RELU_GRAD] = ELEM(act_grad),
    [NN_OP_GELU_GRAD] = ELEM(act_grad),
    [NN_OP_SILU_GRAD] = ELEM(act_grad),
    [NN_OP_TANH_GRAD] = ELEM(act_grad),
    [NN_OP_BROADCAST_TO] = ROW(bcast, nn_flops_move, nn_bwd_bcast),
    [NN_OP_SUM_TO] = ROW(bcast, nn_flops_sum_to, nn_bwd_bcast),
    [NN_OP_REDUCE_SUM] = ROW(reduce, nn_flops_reduce, nn_bwd_reduce),
    [NN_OP_REDUCE_MEAN] = ROW(reduce, nn_flops_reduce, nn_bwd_reduce),
    [NN_OP_REDUCE_MAX] = ROW(reduce, nn_flops_reduce, nn_bwd_reduce),
    [NN_OP_REDUCE_MAX_GRAD] = ROW(reduce_max_grad, nn_flops_move, NULL),
    [NN_OP_MATMUL] = ROW(matmul, nn_flops_matmul, nn_bwd_matmul),
    [NN_OP_CONV2D] = ROW(conv2d, nn_flops_conv2d, nn_bwd_conv2d),
    [NN_OP_CONV2D_GRAD_INPUT] = ROW(conv2d_grad_input, nn_flops_conv2d_grad_input, NULL),
    [NN_OP_CONV2D_GRAD_WEIGHT] = ROW(conv2d_grad_weight, nn_flops_conv2d_grad_weight, NULL),
    [NN_OP_MAXPOOL2D] = {.infer = nn_infer_pool, .flops = nn_flops_pool, .forward = nn_fwd_pool, .backward = nn_bwd_pool},
    [NN_OP_MAXPOOL2D_GRAD] = ROW(pool_grad, nn_flops_pool_grad, NULL),
    [NN_OP_AVGPOOL2D] = {.infer = nn_infer_pool, .flops = nn_flops_pool, .forward = nn_fwd_pool, .backward = nn_bwd_pool},
    [NN_OP_AVGPOOL2D_GRAD] = ROW(pool_grad, nn_flops_pool_grad, NULL),
    [NN_OP_BATCHNORM] = ROW(norm, nn_flops_norm, nn_bwd_norm),
    [NN_OP_BATCHNORM_GRAD] = ROW(norm_grad, nn_flops_norm, NULL),
    [NN_OP_BATCHNORM_INFER] = ROW(norm, nn_flops_norm, NULL),
    [NN_OP_LAYERNORM] = ROW(norm, nn_flops_norm, nn_bwd_norm),
    [NN_OP_LAYERNORM_GRAD] = ROW(norm_grad, nn_flops_norm, NULL),
    [NN_OP_RMSNORM] = ROW(norm, nn_flops_norm, nn_bwd_norm),
    [NN_OP_RMSNORM_GRAD] = ROW(norm_grad, nn_flops_norm, NULL),
    [NN_OP_ROPE] = ROW(rope, nn_flops_rope, nn_bwd_rope),
    [NN_OP_SOFTMAX] = ROW(softmax, nn_flops_softmax, nn_bwd_softmax),
    [NN_OP_LOG_SOFTMAX] = ROW(softmax, nn_flops_softmax, nn_bwd_softmax),
    [NN_OP_SOFTMAX_GRAD] = ROW(softmax_grad, nn_flops_softmax, NULL),
    [NN_OP_ATTENTION] = ROW(attention, nn_flops_attention, nn_bwd_attention),
    [NN_OP_ATTENTION_LSE] = ROW(attention, nn_flops_attention, NULL),
    [NN_OP_ATTENTION_GRAD] = {.infer = nn_infer_attention, .flops = nn_flops_attention, .forward = nn_fwd_attention_grad},
    [NN_OP_TOPK] = ROW(topk, nn_flops_topk, NULL),
    [NN_OP_MOE_DISPATCH] = ROW(moe_dispatch, nn_flops_moe_route, nn_bwd_moe_route),
    [NN_OP_MOE_COMBINE] = ROW(moe_combine, nn_flops_moe_route, nn_bwd_moe_route),
    [NN_OP_MOE_COMBINE_GRAD] = ROW(moe_combine_grad, nn_flops_moe_route, NULL),
    [NN_OP_MOE_GMM] = ROW(moe_gmm, nn_flops_moe_gmm, nn_bwd_moe_gmm),
    [NN_OP_MOE_GMM_GRAD_W] = ROW(moe_gmm_grad_w, nn_flops_moe_gmm, NULL),
    [NN_OP_RESHAPE] = {.infer = nn_infer_reshape, .flops = nn_flops_none, .forward = nn_fwd_copy, .backward = nn_bwd_reshape},
    [NN_OP_PERMUTE] = ROW(permute, nn_flops_move, nn_bwd_permute),
    [NN_OP_CONCAT] = ROW(concat, nn_flops_move, nn_bwd_concat),
    [NN_OP_SLICE] = ROW(slice_pad, nn_flops_move, nn_bwd_slice_pad),
    [NN_OP_PAD] = ROW(slice_pad, nn_flops_move, nn_bwd_slice_pad),
    [NN_OP_EMBEDDING] = ROW(embedding, nn_flops_move, nn_bwd_embedding),
    [NN_OP_EMBEDDING_GRAD] = ROW(embedding_grad, NULL, NULL),
    [NN_OP_ONE_HOT] = ROW(one_hot, nn_flops_move, NULL),
    [NN_OP_STOP_GRAD] = ROW(stop_grad, nn_flops_none, NULL),
    [NN_OP_CROSS_ENTROPY] = ROW(cross_entropy, nn_flops_cross_entropy, nn_bwd_cross_entropy),
    [NN_OP_CROSS_ENTROPY_GRAD] = {.infer = nn_infer_cross_entropy, .flops = nn_flops_cross_entropy, .forward = nn_fwd_cross_entropy_grad},
    [NN_OP_SGD_UPDATE] = ROW(update, nn_flops_update, NULL),
    [NN_OP_ADAM_UPDATE] = ROW(update, nn_flops_update, NULL),
    [NN_OP_ADAMW_UPDATE] = ROW(update, nn_flops_update, NULL),
    [NN_OP_GRAD_ACC] = ROW(buf_update, nn_flops_buf_update, NULL),
    [NN_OP_FILL] = ROW(buf_update, nn_flops_buf_update, NULL),
    [NN_OP_COPY_TO] = ROW(buf_update, nn_flops_buf_update, NULL),
    [NN_OP_ALL_REDUCE] = ROW(comm, nn_flops_none, nn_bwd_comm),
    [NN_OP_REDUCE_SCATTER] = ROW(comm, nn_flops_none, nn_bwd_comm),
    [NN_OP_ALL_GATHER] = ROW(comm, nn_flops_none, nn_bwd_comm),
    [NN_OP_BROADCAST] = ROW(comm, nn_flops_none, nn_bwd_comm),
    [NN_OP_REDUCE] = ROW(comm, nn_flops_none, nn_bwd_comm),
    [NN_OP_ALL_TO_ALL] = ROW(comm, nn_flops_none, nn_bwd_comm),
    [NN_OP_GROUP_COPY] = ROW(comm, nn_flops_none, nn_bwd_comm),
    [NN_OP_SHARD_SLICE] = ROW(comm, nn_flops_none, nn_bwd_comm),
    [NN_OP_SEND] = ROW(comm, nn_flops_none, NULL),
    [NN_OP_RECV] = ROW(comm, nn_flops_none, NULL),
};
static_assert(sizeof nn_op_impls / sizeof nn_op_impls[0] == NN_OP_COUNT,
              "nn_op_impls needs one row per op of ops.def");
static_assert(sizeof nn_op_info / sizeof nn_op_info[0] == NN_OP_COUNT,
              "nn_op_info needs one row per op of ops.def");

int64_t nn_node_flops(const nn_tensor *t)
{
    if (t->op == NN_OP_LEAF)
        return 0;
    const nn_op_impl *impl = &nn_op_impls[t->op];
    return impl->flops ? impl->flops(t) : nn_numel(t);
}

int64_t nn_node_model_flops(const nn_tensor *t)
{
    switch (t->op) {
    case NN_OP_ATTENTION:
    case NN_OP_ATTENTION_LSE:
    case NN_OP_ATTENTION_GRAD: return nn_model_flops_attention(t);
    default: return nn_node_flops(t);
    }
}

int64_t nn_node_macs(const nn_tensor *t)
{
    switch (t->op) {
    case NN_OP_MATMUL:
    case NN_OP_CONV2D:
    case NN_OP_CONV2D_GRAD_INPUT:
    case NN_OP_CONV2D_GRAD_WEIGHT:
    case NN_OP_MOE_GMM:
    case NN_OP_MOE_GMM_GRAD_W: return nn_node_flops(t) / 2;
    case NN_OP_ATTENTION:
    case NN_OP_ATTENTION_LSE:
    case NN_OP_ATTENTION_GRAD: return nn_attention_macs(t);
    default: return 0;
    }
}

uint64_t nn_node_bytes(const nn_tensor *t)
{
    if (t->op == NN_OP_LEAF || (nn_op_flags(t->op) & NN_OPF_VIEW))
        return 0;
    uint64_t b = 0;
    for (int i = 0; i < t->n_src; i++)
        b += nn_nbytes(t->src[i]);
    if (nn_op_flags(t->op) & NN_OPF_UPDATE) /* param and state written back */
        return b + nn_nbytes(t->src[0]) + (t->n_src > 2 ? nn_nbytes(t->src[2]) : 0) +
               (t->n_src > 3 ? nn_nbytes(t->src[3]) : 0);
    return b + nn_nbytes(t);
}
