/* op_comm.c — the communication ops (all_reduce, reduce_scatter, all_gather, broadcast,
 * reduce, all_to_all, send, recv, and Megatron's group_copy and shard_slice), the ops that
 * parallel strategies need besides (one_hot, stop_grad) and the in-place updates of
 * persistent buffers (grad_acc, fill, copy_to): constructors, shape inference, reference
 * kernels and backward rules.
 *
 * A communication node names its group symbolically (NN_COMM_IP_* in nn.h: the tag's mesh
 * axis and the group size), since every rank that runs a plan shares the node. The kernels
 * here are the single-rank case (a group of one: every collective is a copy); with more
 * ranks, nn_node_compute refuses them and the distributed executor (dist.c) runs them over
 * the group. The backward rules are the duals:
 *
 *   all_reduce (sum)   -> identity        (Megatron's g: the output is replicated)
 *   group_copy         -> all_reduce      (Megatron's f: identity forward)
 *   all_gather         <-> reduce_scatter (along the same dim)
 *   shard_slice        -> all_gather      (Megatron's scatter to the sequence region)
 *   broadcast          <-> reduce         (to/from the same root)
 *   all_to_all(s, c)   -> all_to_all(c, s)
 */
#include <string.h>

#include "op_kernels.h"
#include "plan.h"

/* ---- constructors ---- */

static nn_tensor *nn_comm_node(nn_graph *g, nn_op op, int n, nn_tensor *const *srcs, int tag,
                               int size, int64_t dim, int64_t arg)
{
    for (int i = 0; i < n; i++)
        if (!srcs[i])
            return NULL;
    int64_t ip[NN_MAX_IPARAMS] = {0};
    ip[NN_COMM_IP_TAG] = tag;
    ip[NN_COMM_IP_SIZE] = size;
    ip[NN_COMM_IP_DIM] = dim;
    ip[NN_COMM_IP_ARG] = arg;
    return nn_node(g, op, n, srcs, ip, NULL);
}

nn_tensor *nn_all_reduce(nn_graph *g, nn_tensor *a, int tag, int size, int reduction)
{
    return nn_comm_node(g, NN_OP_ALL_REDUCE, 1, &a, tag, size, 0, reduction);
}
nn_tensor *nn_reduce_scatter(nn_graph *g, nn_tensor *a, int tag, int size, int dim)
{
    int ax = a ? nn_axis(dim, a->ndim) : 0;
    return nn_comm_node(g, NN_OP_REDUCE_SCATTER, 1, &a, tag, size, ax < 0 ? dim : ax, NN_REDUCE_SUM);
}
nn_tensor *nn_all_gather(nn_graph *g, nn_tensor *a, int tag, int size, int dim)
{
    int ax = a ? nn_axis(dim, a->ndim) : 0;
    return nn_comm_node(g, NN_OP_ALL_GATHER, 1, &a, tag, size, ax < 0 ? dim : ax, 0);
}
nn_tensor *nn_broadcast(nn_graph *g, nn_tensor *a, int tag, int size, int root)
{
    return nn_comm_node(g, NN_OP_BROADCAST, 1, &a, tag, size, 0, root);
}
nn_tensor *nn_reduce(nn_graph *g, nn_tensor *a, int tag, int size, int root)
{
    return nn_comm_node(g, NN_OP_REDUCE, 1, &a, tag, size, 0, root);
}
nn_tensor *nn_all_to_all(nn_graph *g, nn_tensor *a, int tag, int size, int split_dim, int cat_dim)
{
    return nn_comm_node(g, NN_OP_ALL_TO_ALL, 1, &a, tag, size, split_dim, cat_dim);
}
nn_tensor *nn_group_copy(nn_graph *g, nn_tensor *a, int tag, int size)
{
    return nn_comm_node(g, NN_OP_GROUP_COPY, 1, &a, tag, size, 0, 0);
}
nn_tensor *nn_shard_slice(nn_graph *g, nn_tensor *a, nn_tensor *offset, int tag, int size, int dim)
{
    int ax = a ? nn_axis(dim, a->ndim) : 0;
    return nn_comm_node(g, NN_OP_SHARD_SLICE, 2, (nn_tensor *[]){a, offset}, tag, size,
                        ax < 0 ? dim : ax, 0);
}
nn_tensor *nn_send(nn_graph *g, nn_tensor *a, int tag, int peer)
{
    if (!a)
        return NULL;
    int64_t ip[NN_MAX_IPARAMS] = {0};
    ip[NN_COMM_IP_TAG] = tag;
    ip[NN_COMM_IP_SIZE] = 2;
    ip[NN_COMM_IP_PEER] = peer;
    return nn_node(g, NN_OP_SEND, 1, &a, ip, NULL);
}
nn_tensor *nn_recv(nn_graph *g, int ndim, const int64_t *ne, nn_dtype dt, int tag, int peer)
{
    int64_t ip[NN_MAX_IPARAMS] = {0};
    double fp[NN_MAX_FPARAMS] = {0};
    if (ndim < 0 || ndim > NN_MAX_DIMS) {
        nn_graph_fail(g, NP_ERR_RANGE, "recv: %d dims (at most %d)", ndim, NN_MAX_DIMS);
        return NULL;
    }
    ip[NN_COMM_IP_TAG] = tag;
    ip[NN_COMM_IP_SIZE] = 2;
    ip[NN_COMM_IP_PEER] = peer;
    ip[NN_COMM_IP_DTYPE] = dt;
    ip[NN_COMM_IP_NDIM] = ndim;
    for (int d = 0; d < ndim; d++)
        fp[d] = (double)ne[d];
    return nn_node(g, NN_OP_RECV, 0, NULL, ip, fp);
}

nn_tensor *nn_one_hot(nn_graph *g, nn_tensor *labels, nn_tensor *offset, int64_t classes, nn_dtype dt)
{
    if (!labels)
        return NULL;
    nn_tensor *srcs[2] = {labels, offset};
    return nn_node(g, NN_OP_ONE_HOT, offset ? 2 : 1, srcs, (int64_t[NN_MAX_IPARAMS]){classes, dt}, NULL);
}
nn_tensor *nn_stop_grad(nn_graph *g, nn_tensor *a)
{
    return a ? nn_node1(g, NN_OP_STOP_GRAD, a, NULL, NULL) : NULL;
}
nn_tensor *nn_grad_accumulate(nn_graph *g, nn_tensor *acc, nn_tensor *grad)
{
    if (!acc || !grad)
        return NULL;
    return nn_node(g, NN_OP_GRAD_ACC, 2, (nn_tensor *[]){acc, grad}, NULL, NULL);
}
nn_tensor *nn_fill(nn_graph *g, nn_tensor *buf, double v)
{
    return buf ? nn_node1(g, NN_OP_FILL, buf, NULL, (double[NN_MAX_FPARAMS]){v}) : NULL;
}
nn_tensor *nn_copy_to(nn_graph *g, nn_tensor *dst, nn_tensor *src)
{
    if (!dst || !src)
        return NULL;
    return nn_node(g, NN_OP_COPY_TO, 2, (nn_tensor *[]){dst, src}, NULL, NULL);
}

/* ---- shape inference ---- */

static bool nn_is_int_dtype(nn_dtype t)
{
    return t == NN_I32 || t == NN_I8;
}

np_status nn_infer_comm(nn_tensor *t, np_err *err)
{
    int64_t size = t->ip[NN_COMM_IP_SIZE];
    if (t->ip[NN_COMM_IP_TAG] < 0 || t->ip[NN_COMM_IP_TAG] >= NN_COMM_TAG_COUNT)
        return nn_infer_fail(t, err, NP_ERR_RANGE, "tag %lld is not tp, sp, dp, zero, pp or pp-sg",
                             (long long)t->ip[NN_COMM_IP_TAG]);
    if (size < 1)
        return nn_infer_fail(t, err, NP_ERR_RANGE, "a group of %lld ranks", (long long)size);
    if (t->op == NN_OP_RECV) {
        int nd = (int)t->ip[NN_COMM_IP_NDIM];
        int64_t ne[NN_MAX_DIMS];
        if (nd < 0 || nd > NN_MAX_DIMS || t->ip[NN_COMM_IP_DTYPE] < 0 ||
            t->ip[NN_COMM_IP_DTYPE] >= NN_DTYPE_COUNT)
            return nn_infer_fail(t, err, NP_ERR_RANGE, "bad shape or dtype");
        for (int d = 0; d < nd; d++) {
            ne[d] = (int64_t)t->fp[d];
            if (ne[d] < 1)
                return nn_infer_fail(t, err, NP_ERR_RANGE, "dim %d is %lld", d, (long long)ne[d]);
        }
        nn_set_shape(t, nd, ne);
        t->dtype = (nn_dtype)t->ip[NN_COMM_IP_DTYPE];
        return NP_OK;
    }
    const nn_tensor *x = t->src[0];
    int64_t ne[NN_MAX_DIMS];
    memcpy(ne, x->ne, sizeof ne);
    int dim = (int)t->ip[NN_COMM_IP_DIM];
    bool uses_dim = t->op == NN_OP_ALL_GATHER || t->op == NN_OP_REDUCE_SCATTER ||
                    t->op == NN_OP_SHARD_SLICE || t->op == NN_OP_ALL_TO_ALL;
    if (uses_dim && (dim < 0 || dim >= x->ndim))
        return nn_infer_fail(t, err, NP_ERR_RANGE, "dim %d out of range", dim);
    switch (t->op) {
    case NN_OP_ALL_REDUCE:
    case NN_OP_REDUCE_SCATTER:
    case NN_OP_REDUCE:
        if (t->op != NN_OP_REDUCE && t->ip[NN_COMM_IP_ARG] != NN_REDUCE_SUM &&
            t->ip[NN_COMM_IP_ARG] != NN_REDUCE_MAX)
            return nn_infer_fail(t, err, NP_ERR_RANGE, "reduction %lld is not sum or max",
                                 (long long)t->ip[NN_COMM_IP_ARG]);
        if (nn_is_int_dtype(x->dtype))
            return nn_infer_fail(t, err, NP_ERR_TYPE, "reduces %s values", nn_dtype_name(x->dtype));
        if (t->op == NN_OP_REDUCE_SCATTER) {
            if (ne[dim] % size)
                return nn_infer_fail(t, err, NP_ERR_INCONSISTENT,
                                     "dim %d of %lld does not split over %lld ranks", dim,
                                     (long long)ne[dim], (long long)size);
            ne[dim] /= size;
        }
        break;
    case NN_OP_ALL_GATHER: ne[dim] *= size; break;
    case NN_OP_SHARD_SLICE:
        if (ne[dim] % size)
            return nn_infer_fail(t, err, NP_ERR_INCONSISTENT,
                                 "dim %d of %lld does not split over %lld ranks", dim,
                                 (long long)ne[dim], (long long)size);
        if (!nn_is_int_dtype(t->src[1]->dtype) || nn_numel(t->src[1]) != 1)
            return nn_infer_fail(t, err, NP_ERR_TYPE, "the offset must be an integer scalar");
        ne[dim] /= size;
        break;
    case NN_OP_ALL_TO_ALL: {
        int cat = (int)t->ip[NN_COMM_IP_ARG];
        if (cat < 0 || cat >= x->ndim)
            return nn_infer_fail(t, err, NP_ERR_RANGE, "dim %d out of range", cat);
        if (ne[dim] % size)
            return nn_infer_fail(t, err, NP_ERR_INCONSISTENT,
                                 "dim %d of %lld does not split over %lld ranks", dim,
                                 (long long)ne[dim], (long long)size);
        ne[dim] /= size;
        ne[cat] *= size;
        break;
    }
    default: break; /* broadcast, group_copy, send: same shape */
    }
    if ((t->op == NN_OP_BROADCAST || t->op == NN_OP_REDUCE) &&
        (t->ip[NN_COMM_IP_ARG] < 0 || t->ip[NN_COMM_IP_ARG] >= size))
        return nn_infer_fail(t, err, NP_ERR_RANGE, "root %lld outside the group of %lld",
                             (long long)t->ip[NN_COMM_IP_ARG], (long long)size);
    nn_set_shape(t, x->ndim, ne);
    t->dtype = x->dtype;
    return NP_OK;
}

/* Group of one: every collective is a copy of its input (shard_slice: the whole input). */
void nn_fwd_comm(nn_tensor *t)
{
    memcpy(t->data, t->src[0]->data, (size_t)nn_numel(t) * sizeof(float));
}

void nn_bwd_comm(nn_graph *g, nn_tensor *t, nn_tensor *dy)
{
    nn_tensor *x = t->src[0];
    int tag = (int)t->ip[NN_COMM_IP_TAG], size = (int)t->ip[NN_COMM_IP_SIZE];
    int dim = (int)t->ip[NN_COMM_IP_DIM], arg = (int)t->ip[NN_COMM_IP_ARG];
    nn_tensor *dx = NULL;
    switch (t->op) {
    case NN_OP_ALL_REDUCE:
        if (arg != NN_REDUCE_SUM) {
            nn_graph_fail(g, NP_ERR_INCONSISTENT,
                          "backward: all_reduce (max) %s has no gradient: detach its input "
                          "(stop_grad)", t->name);
            return;
        }
        dx = dy;
        break;
    case NN_OP_GROUP_COPY: dx = nn_all_reduce(g, dy, tag, size, NN_REDUCE_SUM); break;
    case NN_OP_ALL_GATHER: dx = nn_reduce_scatter(g, dy, tag, size, dim); break;
    case NN_OP_REDUCE_SCATTER:
        if (arg != NN_REDUCE_SUM) {
            nn_graph_fail(g, NP_ERR_INCONSISTENT,
                          "backward: reduce_scatter (max) %s has no gradient", t->name);
            return;
        }
        dx = nn_all_gather(g, dy, tag, size, dim);
        break;
    case NN_OP_SHARD_SLICE: dx = nn_all_gather(g, dy, tag, size, dim); break;
    case NN_OP_BROADCAST: dx = nn_reduce(g, dy, tag, size, arg); break;
    case NN_OP_REDUCE: dx = nn_broadcast(g, dy, tag, size, arg); break;
    default: dx = nn_all_to_all(g, dy, tag, size, arg, dim); break; /* ALL_TO_ALL */
    }
    nn_grad_acc(g, x, dx);
}

/* ---- one_hot (labels [, offset]) -> [..., C]; ip[0] C, ip[1] dtype ---- */

np_status nn_infer_one_hot(nn_tensor *t, np_err *err)
{
    const nn_tensor *lab = t->src[0];
    if (!nn_is_int_dtype(lab->dtype))
        return nn_infer_fail(t, err, NP_ERR_TYPE, "labels must be i32 or i8, not %s",
                             nn_dtype_name(lab->dtype));
    if (t->n_src > 1 && (!nn_is_int_dtype(t->src[1]->dtype) || nn_numel(t->src[1]) != 1))
        return nn_infer_fail(t, err, NP_ERR_TYPE, "the offset must be an integer scalar");
    if (t->ip[0] < 1 || lab->ndim + 1 > NN_MAX_DIMS || t->ip[1] < 0 || t->ip[1] >= NN_DTYPE_COUNT)
        return nn_infer_fail(t, err, NP_ERR_RANGE, "%lld classes", (long long)t->ip[0]);
    int64_t ne[NN_MAX_DIMS];
    memcpy(ne, lab->ne, sizeof ne);
    ne[lab->ndim] = t->ip[0];
    nn_set_shape(t, lab->ndim + 1, ne);
    t->dtype = (nn_dtype)t->ip[1];
    return NP_OK;
}

void nn_fwd_one_hot(nn_tensor *t)
{
    int64_t C = t->ip[0], n = nn_numel(t->src[0]);
    int64_t off = t->n_src > 1 ? (int64_t)t->src[1]->data[0] : 0;
    memset(t->data, 0, (size_t)nn_numel(t) * sizeof(float));
    for (int64_t i = 0; i < n; i++) {
        int64_t c = (int64_t)t->src[0]->data[i] - off;
        if (c >= 0 && c < C)
            t->data[i * C + c] = 1.0f;
    }
}

/* ---- stop_grad: a copy (a view for memory planning) ---- */

np_status nn_infer_stop_grad(nn_tensor *t, np_err *err)
{
    (void)err;
    nn_set_shape(t, t->src[0]->ndim, t->src[0]->ne);
    t->dtype = t->src[0]->dtype;
    return NP_OK;
}

void nn_fwd_stop_grad(nn_tensor *t)
{
    nn_fwd_copy(t);
}

/* ---- grad_acc (acc, g), fill (buf), copy_to (dst, src): write src[0] in place ---- */

np_status nn_infer_buf_update(nn_tensor *t, np_err *err)
{
    const nn_tensor *dst = t->src[0];
    if (dst->op != NN_OP_LEAF && !(nn_op_flags(dst->op) & NN_OPF_UPDATE))
        return nn_infer_fail(t, err, NP_ERR_INCONSISTENT,
                             "writes %s, which is not a persistent buffer", dst->name);
    if (t->n_src > 1 && nn_numel(t->src[1]) != nn_numel(dst))
        return nn_infer_fail(t, err, NP_ERR_INCONSISTENT,
                             "input 1 has %lld elements, the buffer %lld",
                             (long long)nn_numel(t->src[1]), (long long)nn_numel(dst));
    nn_set_shape(t, dst->ndim, dst->ne);
    t->dtype = dst->dtype;
    return NP_OK;
}

void nn_fwd_buf_update(nn_tensor *t)
{
    float *dst = t->src[0]->data;
    int64_t n = nn_numel(t);
    if (t->op == NN_OP_FILL) {
        for (int64_t i = 0; i < n; i++)
            dst[i] = (float)t->fp[0];
    } else if (t->op == NN_OP_GRAD_ACC) {
        const float *g = t->src[1]->data;
        for (int64_t i = 0; i < n; i++)
            dst[i] += g[i];
    } else {
        memcpy(dst, t->src[1]->data, (size_t)n * sizeof(float));
    }
}

int64_t nn_flops_buf_update(const nn_tensor *t)
{
    return t->op == NN_OP_GRAD_ACC ? nn_numel(t) : 0;
}
