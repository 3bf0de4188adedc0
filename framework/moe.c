/* moe.c — the constructors of the mixture-of-experts ops (op_moe.c) and the composites a MoE
 * layer is built from: the router (scores, top-k, the chosen weights), the routed SwiGLU
 * experts (dispatch, three grouped matmuls, combine) and the auxiliary load-balancing loss
 * (nn.h, "mixture of experts"; docs/framework.md). */
#include <math.h>

#include "nn_impl.h"

nn_tensor *nn_topk(nn_graph *g, nn_tensor *scores, int64_t k, int64_t groups, int64_t keep,
                   int64_t group_top)
{
    if (!scores)
        return NULL;
    int64_t ip[NN_MAX_IPARAMS] = {k, groups > 1 ? groups : 0, groups > 1 ? keep : 0,
                                  groups > 1 ? group_top : 0};
    return nn_node1(g, NN_OP_TOPK, scores, ip, NULL);
}

static nn_tensor *moe_route_node(nn_graph *g, nn_op op, nn_tensor *a, nn_tensor *idx,
                                 nn_tensor *w, int64_t experts, int64_t capacity)
{
    if (!a || !idx)
        return NULL;
    nn_tensor *srcs[3] = {a, idx, w};
    return nn_node(g, op, w ? 3 : 2, srcs, (int64_t[NN_MAX_IPARAMS]){experts, capacity}, NULL);
}

nn_tensor *nn_moe_dispatch(nn_graph *g, nn_tensor *x, nn_tensor *idx, nn_tensor *w,
                           int64_t experts, int64_t capacity)
{
    return moe_route_node(g, NN_OP_MOE_DISPATCH, x, idx, w, experts, capacity);
}

nn_tensor *nn_moe_combine(nn_graph *g, nn_tensor *rows, nn_tensor *idx, nn_tensor *w,
                          int64_t experts, int64_t capacity)
{
    return moe_route_node(g, NN_OP_MOE_COMBINE, rows, idx, w, experts, capacity);
}

nn_tensor *nn_moe_gmm(nn_graph *g, nn_tensor *rows, nn_tensor *w, nn_tensor *idx,
                      int64_t capacity)
{
    if (!rows || !w || !idx)
        return NULL;
    nn_tensor *srcs[3] = {rows, w, idx};
    return nn_node(g, NN_OP_MOE_GMM, 3, srcs,
                   (int64_t[NN_MAX_IPARAMS]){w->ndim == 3 ? w->ne[0] : 0, capacity}, NULL);
}

int64_t nn_moe_capacity(const nn_moe_router *r, int64_t tokens)
{
    if (r->capacity_factor <= 0 || r->experts < 1)
        return 0;
    return (int64_t)ceil(r->capacity_factor * (double)(tokens * r->top_k) / (double)r->experts);
}

/* sigmoid(x) = (1 + tanh(x / 2)) / 2, from the ops there are */
static nn_tensor *moe_sigmoid(nn_graph *g, nn_tensor *x)
{
    nn_tensor *half = nn_scalar(g, 0.5f);
    if (half && x && x->dtype != NN_F32)
        half = nn_cast(g, half, x->dtype);
    return nn_add(g, nn_scale(g, nn_tanh(g, nn_scale(g, x, 0.5)), 0.5), half);
}

bool nn_moe_route(nn_graph *g, nn_tensor *logits, nn_tensor *bias, const nn_moe_router *r,
                  nn_moe_routing *out)
{
    *out = (nn_moe_routing){.experts = r->experts};
    if (!logits)
        return false;
    if (logits->ndim != 2 || logits->ne[1] != r->experts) {
        nn_graph_fail(g, NP_ERR_INCONSISTENT, "moe router: logits must be [tokens, %lld]",
                      (long long)r->experts);
        return false;
    }
    int64_t T = logits->ne[0], E = r->experts, k = r->top_k;
    nn_tensor *p = r->score == NN_MOE_SIGMOID ? moe_sigmoid(g, logits) : nn_softmax(g, logits);
    nn_tensor *sel = bias ? nn_add(g, p, bias) : p;
    nn_tensor *idx = nn_topk(g, sel, k, r->groups, r->keep_groups, r->group_top);
    /* w[t, j] = p[t, idx[t, j]]: a one-hot row picks the score, and its gradient reaches p */
    nn_tensor *pick = nn_one_hot(g, idx, NULL, E, p ? p->dtype : NN_F32);
    nn_tensor *w = nn_reduce_sum(g, nn_mul(g, pick, nn_reshape(g, p, 3, (int64_t[]){T, 1, E})),
                                 -1, false);
    if (r->norm_topk)
        w = nn_div(g, w, nn_reduce_sum(g, w, -1, true));
    if (r->scale > 0 && r->scale != 1)
        w = nn_scale(g, w, r->scale);
    if (!w)
        return false;
    *out = (nn_moe_routing){idx, w, p, E, nn_moe_capacity(r, T)};
    return true;
}

nn_tensor *nn_moe_experts(nn_graph *g, nn_tensor *x, const nn_moe_routing *rt, nn_tensor *gate,
                          nn_tensor *up, nn_tensor *down)
{
    int64_t E = rt->experts, C = rt->capacity;
    nn_tensor *rows = nn_moe_dispatch(g, x, rt->idx, NULL, E, C);
    nn_tensor *h = nn_mul(g, nn_silu(g, nn_moe_gmm(g, rows, gate, rt->idx, C)),
                          nn_moe_gmm(g, rows, up, rt->idx, C));
    nn_tensor *w = rt->weights;
    if (w && x && w->dtype != x->dtype)
        w = nn_cast(g, w, x->dtype);
    return nn_moe_combine(g, nn_moe_gmm(g, h, down, rt->idx, C), rt->idx, w, E, C);
}

nn_tensor *nn_moe_aux_loss(nn_graph *g, const nn_moe_routing *rt)
{
    nn_tensor *p = rt->probs, *idx = rt->idx;
    if (!p || !idx)
        return NULL;
    int64_t T = idx->ne[0], k = idx->ne[1], E = rt->experts;
    /* f_e: assignments to e over T k (one_hot has no gradient: f is a constant) */
    nn_tensor *counts = nn_reduce_sum(
        g, nn_reshape(g, nn_one_hot(g, idx, NULL, E, p->dtype), 2, (int64_t[]){T * k, E}), 0,
        false);
    nn_tensor *pm = nn_reduce_mean(g, p, 0, false); /* P_e */
    return nn_scale(g, nn_reduce_sum(g, nn_mul(g, counts, pm), 0, false),
                    (double)E / (double)(T * k));
}
