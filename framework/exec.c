/* exec.c — the CPU reference executor: the oracle for every later functional check.
 *
 * Math is fp32 (accumulations in double inside the kernels); a node of dtype bf16 or f16 has
 * its outputs rounded to that format after its kernel runs, emulating the storage format.
 * Indices (embedding, labels, experts) are checked against their table before a kernel reads
 * them. */
#include <stdlib.h>

#include "nn_impl.h"

/* Index sources must hold integers within [0, limit). */
static np_status nn_check_indices(const nn_tensor *t, const nn_tensor *idx, int64_t limit,
                                  np_err *err)
{
    for (int64_t i = 0; i < nn_numel(idx); i++) {
        float v = idx->data[i];
        if (!(v >= 0) || v >= (float)limit || v != (float)(int64_t)v)
            return np_err_set(err, NP_ERR_RANGE,
                              "%s: index %g at position %lld of %s is outside [0, %lld)",
                              t->name, (double)v, (long long)i, idx->name, (long long)limit);
    }
    return NP_OK;
}

np_status nn_node_compute(nn_tensor *t, np_err *err)
{
    if (t->op == NN_OP_LEAF && !t->data && t->role == NN_ROLE_OPTSTATE && !nn_tensor_alloc(t))
        return np_err_set(err, NP_ERR_NOMEM, "out of memory for %s", t->name);
    if (t->op == NN_OP_LEAF) /* optimizer state starts at zero; other leaves need values */
        return t->data ? NP_OK
                       : np_err_set(err, NP_ERR_MISSING, "%s %s has no values", nn_role_name(t->role),
                                    t->name);
    for (int s = 0; s < t->n_src; s++)
        if (!t->src[s]->data)
            return np_err_set(err, NP_ERR_MISSING, "%s: input %s has no values", t->name,
                              t->src[s]->name);
    if ((nn_op_flags(t->op) & NN_OPF_COMM) &&
        (t->op == NN_OP_RECV || t->ip[NN_COMM_IP_SIZE] > 1))
        return np_err_set(err, NP_ERR_INCONSISTENT,
                          "%s: %s communicates over %lld ranks: run it with the distributed "
                          "executor (dist.h)", t->name, nn_op_name(t->op),
                          (long long)t->ip[NN_COMM_IP_SIZE]);
    switch (t->op) {
    case NN_OP_EMBEDDING: /* a vocabulary shard (3 sources) masks the rows it does not hold */
        if (t->n_src < 3 && nn_check_indices(t, t->src[1], t->src[0]->ne[0], err) != NP_OK)
            return err->status;
        break;
    case NN_OP_EMBEDDING_GRAD:
        if (t->n_src < 3 && nn_check_indices(t, t->src[0], t->ip[0], err) != NP_OK)
            return err->status;
        break;
    case NN_OP_CROSS_ENTROPY:
    case NN_OP_CROSS_ENTROPY_GRAD:
        if (nn_check_indices(t, t->src[1], t->src[0]->ne[t->src[0]->ndim - 1], err) != NP_OK)
            return err->status;
        break;
    case NN_OP_MOE_DISPATCH: /* expert indices, ip[0] experts (op_moe.c) */
    case NN_OP_MOE_COMBINE:
    case NN_OP_MOE_COMBINE_GRAD:
        if (nn_check_indices(t, t->src[1], t->ip[0], err) != NP_OK)
            return err->status;
        break;
    case NN_OP_MOE_GMM:
    case NN_OP_MOE_GMM_GRAD_W:
        if (nn_check_indices(t, t->src[2], t->ip[0], err) != NP_OK)
            return err->status;
        break;
    default: break;
    }
    if (nn_op_flags(t->op) & NN_OPF_UPDATE) {
        if (!t->data_is_view && t->data != t->src[0]->data) {
            free(t->data);
            t->data = t->src[0]->data;
            t->data_is_view = true;
        }
    } else if (!nn_tensor_alloc(t)) {
        return np_err_set(err, NP_ERR_NOMEM, "out of memory for %s", t->name);
    }
    nn_op_impls[t->op].forward(t);
    int64_t n = nn_numel(t);
    if (t->dtype == NN_BF16)
        for (int64_t i = 0; i < n; i++)
            t->data[i] = nn_round_bf16(t->data[i]);
    else if (t->dtype == NN_F16)
        for (int64_t i = 0; i < n; i++)
            t->data[i] = nn_round_f16(t->data[i]);
    return NP_OK;
}

np_status nn_graph_compute(nn_graph *g, np_err *err)
{
    if (nn_graph_status(g, err) != NP_OK)
        return err->status;
    nn_tensor **order;
    int n;
    if (nn_schedule(g, &order, &n, err) != NP_OK)
        return err->status;
    np_status st = NP_OK;
    for (int i = 0; i < n && st == NP_OK; i++)
        st = nn_node_compute(order[i], err);
    free(order);
    return st;
}
