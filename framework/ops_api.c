/* ops_api.c — the public op constructors (nn_add, nn_matmul, ...) and the composites built
 * from them (linear, split, global pooling, channel shuffle, attention). Constructors only
 * pack sources and parameters for nn_node, which infers the output. */
#include <math.h>
#include <string.h>

#include "nn_impl.h"

#define NN_ANY_NULL2(a, b) (!(a) || !(b))

static nn_tensor *nn_bin(nn_graph *g, nn_op op, nn_tensor *a, nn_tensor *b)
{
    if (NN_ANY_NULL2(a, b))
        return NULL;
    return nn_node(g, op, 2, (nn_tensor *[]){a, b}, NULL, NULL);
}

nn_tensor *nn_add(nn_graph *g, nn_tensor *a, nn_tensor *b) { return nn_bin(g, NN_OP_ADD, a, b); }
nn_tensor *nn_sub(nn_graph *g, nn_tensor *a, nn_tensor *b) { return nn_bin(g, NN_OP_SUB, a, b); }
nn_tensor *nn_mul(nn_graph *g, nn_tensor *a, nn_tensor *b) { return nn_bin(g, NN_OP_MUL, a, b); }
nn_tensor *nn_div(nn_graph *g, nn_tensor *a, nn_tensor *b) { return nn_bin(g, NN_OP_DIV, a, b); }
nn_tensor *nn_matmul(nn_graph *g, nn_tensor *a, nn_tensor *b) { return nn_bin(g, NN_OP_MATMUL, a, b); }

static nn_tensor *nn_un(nn_graph *g, nn_op op, nn_tensor *a, const int64_t *ip, const double *fp)
{
    return a ? nn_node1(g, op, a, ip, fp) : NULL;
}

nn_tensor *nn_scale(nn_graph *g, nn_tensor *a, double s)
{
    return nn_un(g, NN_OP_SCALE, a, NULL, (double[NN_MAX_FPARAMS]){s});
}
nn_tensor *nn_relu(nn_graph *g, nn_tensor *a) { return nn_un(g, NN_OP_RELU, a, NULL, NULL); }
nn_tensor *nn_relu6(nn_graph *g, nn_tensor *a)
{
    return nn_un(g, NN_OP_RELU, a, NULL, (double[NN_MAX_FPARAMS]){6.0});
}
nn_tensor *nn_gelu(nn_graph *g, nn_tensor *a) { return nn_un(g, NN_OP_GELU, a, NULL, NULL); }
nn_tensor *nn_silu(nn_graph *g, nn_tensor *a) { return nn_un(g, NN_OP_SILU, a, NULL, NULL); }
nn_tensor *nn_tanh(nn_graph *g, nn_tensor *a) { return nn_un(g, NN_OP_TANH, a, NULL, NULL); }
nn_tensor *nn_exp(nn_graph *g, nn_tensor *a) { return nn_un(g, NN_OP_EXP, a, NULL, NULL); }
nn_tensor *nn_log(nn_graph *g, nn_tensor *a) { return nn_un(g, NN_OP_LOG, a, NULL, NULL); }
nn_tensor *nn_cast(nn_graph *g, nn_tensor *a, nn_dtype dt)
{
    return nn_un(g, NN_OP_CAST, a, (int64_t[NN_MAX_IPARAMS]){dt}, NULL);
}
nn_tensor *nn_dropout(nn_graph *g, nn_tensor *a, double p, uint64_t seed)
{
    return nn_un(g, NN_OP_DROPOUT, a, (int64_t[NN_MAX_IPARAMS]){(int64_t)seed},
                 (double[NN_MAX_FPARAMS]){p});
}
uint64_t nn_dropout_seed(uint64_t seed, int mb, int tp_rank)
{
    if (mb == 0 && tp_rank == 0)
        return seed;
    /* splitmix64's finaliser of the pair, so that nearby pairs give unrelated seeds */
    uint64_t z = ((uint64_t)(uint32_t)mb << 32 | (uint32_t)tp_rank) + 0x9E3779B97F4A7C15u;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    return seed ^ (z ^ (z >> 31));
}
nn_tensor *nn_causal_mask(nn_graph *g, nn_tensor *a, double fill)
{
    return nn_un(g, NN_OP_CAUSAL_MASK, a, NULL, (double[NN_MAX_FPARAMS]){fill});
}

static nn_tensor *nn_shape_op(nn_graph *g, nn_op op, nn_tensor *a, int ndim, const int64_t *ne)
{
    if (!a)
        return NULL;
    int64_t ip[NN_MAX_IPARAMS] = {0};
    if (ndim < 0 || ndim > NN_MAX_DIMS) {
        nn_graph_fail(g, NP_ERR_RANGE, "%s: %d dims (at most %d)", nn_op_name(op), ndim,
                      NN_MAX_DIMS);
        return NULL;
    }
    for (int d = 0; d < ndim; d++)
        ip[d] = ne[d];
    ip[6] = ndim;
    return nn_node1(g, op, a, ip, NULL);
}

nn_tensor *nn_broadcast_to(nn_graph *g, nn_tensor *a, int ndim, const int64_t *ne)
{
    return nn_shape_op(g, NN_OP_BROADCAST_TO, a, ndim, ne);
}
nn_tensor *nn_sum_to(nn_graph *g, nn_tensor *a, int ndim, const int64_t *ne)
{
    return nn_shape_op(g, NN_OP_SUM_TO, a, ndim, ne);
}

nn_tensor *nn_reshape(nn_graph *g, nn_tensor *a, int ndim, const int64_t *ne)
{
    if (!a)
        return NULL;
    int64_t sh[NN_MAX_DIMS], known = 1;
    int infer = -1;
    for (int d = 0; d < ndim && d < NN_MAX_DIMS; d++) {
        sh[d] = ne[d];
        if (ne[d] == -1)
            infer = d;
        else
            known *= ne[d];
    }
    if (infer >= 0 && known > 0)
        sh[infer] = nn_numel(a) / known;
    return nn_shape_op(g, NN_OP_RESHAPE, a, ndim, sh);
}

static nn_tensor *nn_reduce_axis(nn_graph *g, nn_op op, nn_tensor *a, int axis, bool keepdim)
{
    if (!a)
        return NULL;
    int ax = nn_axis(axis, a->ndim);
    return nn_node1(g, op, a, (int64_t[NN_MAX_IPARAMS]){ax < 0 ? axis : ax, keepdim}, NULL);
}
nn_tensor *nn_reduce_sum(nn_graph *g, nn_tensor *a, int axis, bool keepdim)
{
    return nn_reduce_axis(g, NN_OP_REDUCE_SUM, a, axis, keepdim);
}
nn_tensor *nn_sum_squares(nn_graph *g, nn_tensor *a, int axis, bool keepdim)
{
    if (!a)
        return NULL;
    int ax = nn_axis(axis, a->ndim);
    return nn_node1(g, NN_OP_REDUCE_SUM, a, (int64_t[NN_MAX_IPARAMS]){ax < 0 ? axis : ax, keepdim, 1},
                    NULL);
}
nn_tensor *nn_reduce_mean(nn_graph *g, nn_tensor *a, int axis, bool keepdim)
{
    return nn_reduce_axis(g, NN_OP_REDUCE_MEAN, a, axis, keepdim);
}
nn_tensor *nn_reduce_max(nn_graph *g, nn_tensor *a, int axis, bool keepdim)
{
    return nn_reduce_axis(g, NN_OP_REDUCE_MAX, a, axis, keepdim);
}

nn_tensor *nn_conv2d(nn_graph *g, nn_tensor *x, nn_tensor *w, int stride, int pad,
                     int dilation, int groups)
{
    if (NN_ANY_NULL2(x, w))
        return NULL;
    return nn_node(g, NN_OP_CONV2D, 2, (nn_tensor *[]){x, w},
                   (int64_t[NN_MAX_IPARAMS]){stride, pad, dilation, groups}, NULL);
}

nn_tensor *nn_maxpool2d(nn_graph *g, nn_tensor *x, int k, int stride, int pad)
{
    return nn_un(g, NN_OP_MAXPOOL2D, x, (int64_t[NN_MAX_IPARAMS]){k, stride, pad}, NULL);
}
nn_tensor *nn_avgpool2d(nn_graph *g, nn_tensor *x, int k, int stride, int pad)
{
    return nn_un(g, NN_OP_AVGPOOL2D, x, (int64_t[NN_MAX_IPARAMS]){k, stride, pad}, NULL);
}

/* A norm over x with optional sources (NULLs are dropped from the end only). */
static nn_tensor *nn_norm_node(nn_graph *g, nn_op op, nn_tensor *x, int n_opt,
                               nn_tensor *const *opt, double eps)
{
    if (!x)
        return NULL;
    nn_tensor *srcs[NN_MAX_SRC] = {x};
    int n = 1;
    for (int i = 0; i < n_opt && opt[i]; i++)
        srcs[n++] = opt[i];
    return nn_node(g, op, n, srcs, NULL, (double[NN_MAX_FPARAMS]){eps});
}

nn_tensor *nn_batchnorm(nn_graph *g, nn_tensor *x, nn_tensor *gamma, nn_tensor *beta, double eps)
{
    return nn_norm_node(g, NN_OP_BATCHNORM, x, 2, (nn_tensor *[]){gamma, beta}, eps);
}
nn_tensor *nn_batchnorm_infer(nn_graph *g, nn_tensor *x, nn_tensor *gamma, nn_tensor *beta,
                              nn_tensor *mean, nn_tensor *var, double eps)
{
    if (!x || !gamma || !beta || !mean || !var)
        return NULL;
    return nn_norm_node(g, NN_OP_BATCHNORM_INFER, x, 4, (nn_tensor *[]){gamma, beta, mean, var}, eps);
}
nn_tensor *nn_layernorm(nn_graph *g, nn_tensor *x, nn_tensor *gamma, nn_tensor *beta, double eps)
{
    return nn_norm_node(g, NN_OP_LAYERNORM, x, 2, (nn_tensor *[]){gamma, beta}, eps);
}
nn_tensor *nn_rmsnorm(nn_graph *g, nn_tensor *x, nn_tensor *gamma, double eps)
{
    return nn_norm_node(g, NN_OP_RMSNORM, x, 1, (nn_tensor *[]){gamma}, eps);
}
nn_tensor *nn_rope(nn_graph *g, nn_tensor *a, double base)
{
    return nn_un(g, NN_OP_ROPE, a, NULL, (double[NN_MAX_FPARAMS]){base, 1.0});
}
nn_tensor *nn_rope_at(nn_graph *g, nn_tensor *a, double base, int64_t offset)
{
    return nn_un(g, NN_OP_ROPE, a, NULL, (double[NN_MAX_FPARAMS]){base, 1.0, (double)offset});
}
nn_tensor *nn_softmax(nn_graph *g, nn_tensor *a) { return nn_un(g, NN_OP_SOFTMAX, a, NULL, NULL); }
nn_tensor *nn_softmax_masked(nn_graph *g, nn_tensor *a, double scale, bool causal)
{
    return nn_un(g, NN_OP_SOFTMAX, a, (int64_t[NN_MAX_IPARAMS]){causal},
                 (double[NN_MAX_FPARAMS]){scale});
}
nn_tensor *nn_softmax_grad(nn_graph *g, nn_tensor *y, nn_tensor *dy, double scale, bool causal)
{
    return nn_node(g, NN_OP_SOFTMAX_GRAD, 2, (nn_tensor *[]){y, dy},
                   (int64_t[NN_MAX_IPARAMS]){causal}, (double[NN_MAX_FPARAMS]){scale});
}
nn_tensor *nn_log_softmax(nn_graph *g, nn_tensor *a) { return nn_un(g, NN_OP_LOG_SOFTMAX, a, NULL, NULL); }

nn_tensor *nn_permute(nn_graph *g, nn_tensor *a, const int *axes)
{
    if (!a)
        return NULL;
    int64_t ip[NN_MAX_IPARAMS] = {0};
    for (int d = 0; d < a->ndim; d++)
        ip[d] = axes[d];
    return nn_node1(g, NN_OP_PERMUTE, a, ip, NULL);
}

nn_tensor *nn_transpose(nn_graph *g, nn_tensor *a)
{
    if (!a)
        return NULL;
    int axes[NN_MAX_DIMS];
    for (int d = 0; d < a->ndim; d++)
        axes[d] = d;
    if (a->ndim >= 2) {
        axes[a->ndim - 2] = a->ndim - 1;
        axes[a->ndim - 1] = a->ndim - 2;
    }
    return nn_permute(g, a, axes);
}

nn_tensor *nn_concat(nn_graph *g, int n, nn_tensor *const *xs, int axis)
{
    for (int i = 0; i < n; i++)
        if (!xs[i])
            return NULL;
    if (n < 1 || n > NN_MAX_SRC) {
        nn_graph_fail(g, NP_ERR_RANGE, "concat: %d inputs (1 to %d)", n, NN_MAX_SRC);
        return NULL;
    }
    int ax = nn_axis(axis, xs[0]->ndim);
    return nn_node(g, NN_OP_CONCAT, n, xs, (int64_t[NN_MAX_IPARAMS]){ax < 0 ? axis : ax}, NULL);
}

nn_tensor *nn_slice(nn_graph *g, nn_tensor *a, int axis, int64_t start, int64_t end)
{
    if (!a)
        return NULL;
    int ax = nn_axis(axis, a->ndim);
    return nn_node1(g, NN_OP_SLICE, a, (int64_t[NN_MAX_IPARAMS]){ax < 0 ? axis : ax, start, end}, NULL);
}

nn_tensor *nn_pad(nn_graph *g, nn_tensor *a, int axis, int64_t before, int64_t after)
{
    if (!a)
        return NULL;
    int ax = nn_axis(axis, a->ndim);
    return nn_node1(g, NN_OP_PAD, a, (int64_t[NN_MAX_IPARAMS]){ax < 0 ? axis : ax, before, after}, NULL);
}

nn_tensor *nn_embedding(nn_graph *g, nn_tensor *table, nn_tensor *idx)
{
    return nn_bin(g, NN_OP_EMBEDDING, table, idx);
}
nn_tensor *nn_embedding_shard(nn_graph *g, nn_tensor *table, nn_tensor *idx, nn_tensor *offset)
{
    if (!table || !idx || !offset)
        return NULL;
    return nn_node(g, NN_OP_EMBEDDING, 3, (nn_tensor *[]){table, idx, offset}, NULL, NULL);
}
nn_tensor *nn_cross_entropy(nn_graph *g, nn_tensor *logits, nn_tensor *labels)
{
    return nn_bin(g, NN_OP_CROSS_ENTROPY, logits, labels);
}

/* ---- composites ---- */

nn_tensor *nn_linear(nn_graph *g, nn_tensor *x, nn_tensor *w, nn_tensor *b)
{
    if (!x || !w)
        return NULL;
    nn_tensor *y;
    if (x->ndim > 2) { /* [..., in] -> [rows, in] so the weight gradient is one matmul */
        int64_t ne[NN_MAX_DIMS];
        memcpy(ne, x->ne, sizeof ne);
        nn_tensor *x2 = nn_reshape(g, x, 2, (int64_t[]){-1, x->ne[x->ndim - 1]});
        ne[x->ndim - 1] = w->ne[w->ndim - 1];
        y = nn_reshape(g, nn_matmul(g, x2, w), x->ndim, ne);
    } else {
        y = nn_matmul(g, x, w);
    }
    return b ? nn_add(g, y, b) : y;
}

bool nn_split(nn_graph *g, nn_tensor *a, int axis, int n, nn_tensor **out)
{
    if (!a || n < 1)
        return false;
    int ax = nn_axis(axis, a->ndim);
    int64_t len = ax >= 0 ? a->ne[ax] / n : 1;
    for (int i = 0; i < n; i++)
        out[i] = nn_slice(g, a, axis, i * len, (i + 1) * len);
    return out[n - 1] != NULL;
}

nn_tensor *nn_global_avgpool(nn_graph *g, nn_tensor *x)
{
    if (!x)
        return NULL;
    return nn_reduce_mean(g, nn_reshape(g, x, 3, (int64_t[]){x->ne[0], x->ne[1], -1}), 2, false);
}

nn_tensor *nn_channel_shuffle(nn_graph *g, nn_tensor *x, int groups)
{
    if (!x)
        return NULL;
    int64_t N = x->ne[0], C = x->ne[1], H = x->ne[2], W = x->ne[3];
    nn_tensor *r = nn_reshape(g, x, 5, (int64_t[]){N, groups, C / groups, H, W});
    r = nn_permute(g, r, (int[]){0, 2, 1, 3, 4});
    return nn_reshape(g, r, 4, (int64_t[]){N, C, H, W});
}

nn_tensor *nn_attention(nn_graph *g, nn_tensor *q, nn_tensor *k, nn_tensor *v, bool causal)
{
    return nn_attention_dropout(g, q, k, v, causal, 0.0, 0);
}

nn_tensor *nn_attention_dropout(nn_graph *g, nn_tensor *q, nn_tensor *k, nn_tensor *v,
                                bool causal, double p_drop, uint64_t seed)
{
    if (!q || !k || !v)
        return NULL;
    double scale = 1.0 / sqrt((double)q->ne[q->ndim - 1]);
    nn_tensor *kt = nn_transpose(g, k);
    int first = nn_graph_n_nodes(g);
    nn_tensor *s = nn_scale(g, nn_matmul(g, q, kt), scale);
    if (causal)
        s = nn_causal_mask(g, s, -INFINITY);
    nn_tensor *p = nn_softmax(g, s);
    if (p_drop > 0)
        p = nn_dropout(g, p, p_drop, seed);
    /* The core that selective recomputation recomputes (Korthikanti et al.): the scores,
     * their mask, the softmax and its dropout; q, k^T, v and the output are kept. */
    for (int i = first; p && i < nn_graph_n_nodes(g); i++)
        nn_graph_node(g, i)->attn_core = true;
    return nn_matmul(g, p, v);
}

nn_tensor *nn_channel_sum(nn_graph *g, nn_tensor *x)
{
    if (!x)
        return NULL;
    int axes[NN_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++)
        axes[d] = d;
    axes[0] = 1;
    axes[1] = 0;
    nn_tensor *p = nn_permute(g, x, axes);
    return nn_reduce_sum(g, nn_reshape(g, p, 2, (int64_t[]){x->ne[1], -1}), 1, false);
}
