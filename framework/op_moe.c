/* op_moe.c — the ops of a mixture-of-experts layer: top-k expert selection, dispatch (tokens
 * permuted into per-expert rows), the grouped matmul over experts and combine (each token's
 * weighted sum of its experts' rows), with their gradient ops. The composites that build a
 * whole layer from them (router, SwiGLU experts, auxiliary loss) are in moe.c; the user
 * documentation is docs/framework.md ("Mixture of experts").
 *
 * The routing layout. idx [T, k] (i32) holds each token's k experts. Assignments (t, j) go to
 * their expert in token order (t, then j: Megatron-LM's "position" order, a stable sort by
 * expert). With capacity C > 0 (ip[1]) expert e owns rows [e C, e C + C) of the dispatched
 * tensor, [E C, D], and an assignment past its expert's C-th is dropped (the token gets
 * nothing from that expert); rows left empty are zero. With C = 0 (dropless) the rows are
 * [T k, D], expert e's the count_e rows after the counts of experts 0..e-1. moe_slots below is
 * the one place this layout is computed; every op derives its rows from it.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "op_kernels.h"

enum { MOE_IP_E = 0, MOE_IP_C = 1, MOE_IP_TRANS = 2 };

/* Rows of the dispatched tensor: dropless T k, else E C. */
static int64_t moe_rows(int64_t T, int64_t k, int64_t E, int64_t C)
{
    return C > 0 ? E * C : T * k;
}

/* slot[T k]: the row of assignment (t, j), or -1 when dropped; first[E + 1]: expert e's rows
 * are [first[e], first[e + 1]) (capacity: e C .. e C + C, occupied or not). Values of idx are
 * range-checked by the executor before a kernel runs. Returns false when out of memory. */
static bool moe_slots(const nn_tensor *idx, int64_t E, int64_t C, int64_t *slot, int64_t *first)
{
    int64_t n = nn_numel(idx);
    int64_t *fill = calloc((size_t)E, sizeof *fill);
    if (!fill)
        return false;
    for (int64_t i = 0; i < n; i++)
        fill[(int64_t)idx->data[i]]++;
    first[0] = 0;
    for (int64_t e = 0; e < E; e++)
        first[e + 1] = first[e] + (C > 0 ? C : fill[e]);
    memset(fill, 0, (size_t)E * sizeof *fill);
    for (int64_t i = 0; i < n; i++) {
        int64_t e = (int64_t)idx->data[i], pos = fill[e]++;
        slot[i] = C > 0 && pos >= C ? -1 : first[e] + pos;
    }
    free(fill);
    return true;
}

/* The routing layout of node t (idx = t->src[si]); NULL when out of memory (the kernel then
 * leaves zeros: allocation failure is injected by tests only). Free with free(). */
static int64_t *moe_layout(const nn_tensor *t, int si, int64_t **first)
{
    const nn_tensor *idx = t->src[si];
    int64_t E = t->ip[MOE_IP_E];
    int64_t *slot = malloc((size_t)(nn_numel(idx) + E + 1) * sizeof *slot);
    if (!slot)
        return NULL;
    *first = slot + nn_numel(idx);
    if (!moe_slots(idx, E, t->ip[MOE_IP_C], slot, *first)) {
        free(slot);
        return NULL;
    }
    return slot;
}

static bool moe_is_int(nn_dtype t) { return t == NN_I32 || t == NN_I8; }

/* Checks idx (src[si]) is [T, k] integers and E, C in range; fills T and k. */
static np_status moe_check_idx(const nn_tensor *t, int si, int64_t *T, int64_t *k, np_err *err)
{
    const nn_tensor *idx = t->src[si];
    if (idx->ndim != 2 || !moe_is_int(idx->dtype))
        return nn_infer_fail(t, err, NP_ERR_TYPE, "the expert indices must be [tokens, k] i32");
    if (t->ip[MOE_IP_E] < 1 || t->ip[MOE_IP_C] < 0)
        return nn_infer_fail(t, err, NP_ERR_RANGE, "%lld experts with capacity %lld",
                             (long long)t->ip[MOE_IP_E], (long long)t->ip[MOE_IP_C]);
    *T = idx->ne[0];
    *k = idx->ne[1];
    return NP_OK;
}

/* ---- topk: scores [..., E] -> the indices [..., k] (i32) of the k largest ---- */

np_status nn_infer_topk(nn_tensor *t, np_err *err)
{
    const nn_tensor *s = t->src[0];
    int64_t E = s->ne[s->ndim - 1], k = t->ip[0], groups = t->ip[1] ? t->ip[1] : 1;
    int64_t keep = t->ip[1] ? t->ip[2] : 1, per = t->ip[3] ? t->ip[3] : 1;
    if (s->ndim < 1 || moe_is_int(s->dtype))
        return nn_infer_fail(t, err, NP_ERR_TYPE, "the scores must be a float tensor");
    if (k < 1 || k > E || groups < 1 || E % groups || keep < 1 || keep > groups ||
        k > keep * (E / groups) || per < 1 || per > E / groups)
        return nn_infer_fail(t, err, NP_ERR_RANGE,
                             "top-%lld of %lld experts in %lld groups keeping %lld (group score: "
                             "the sum of its top %lld)", (long long)k, (long long)E,
                             (long long)groups, (long long)keep, (long long)per);
    int64_t ne[NN_MAX_DIMS];
    memcpy(ne, s->ne, sizeof ne);
    ne[s->ndim - 1] = k;
    nn_set_shape(t, s->ndim, ne);
    t->dtype = NN_I32;
    return NP_OK;
}

/* Index of the largest of v[0..n) whose taken[] is false (the lowest index on ties). */
static int64_t moe_argmax(const float *v, const bool *taken, int64_t n)
{
    int64_t best = -1;
    for (int64_t i = 0; i < n; i++)
        if (!taken[i] && (best < 0 || v[i] > v[best]))
            best = i;
    return best;
}

void nn_fwd_topk(nn_tensor *t)
{
    const nn_tensor *s = t->src[0];
    int64_t E = s->ne[s->ndim - 1], k = t->ip[0], rows = nn_numel(s) / E;
    int64_t G = t->ip[1] ? t->ip[1] : 1, keep = t->ip[1] ? t->ip[2] : G;
    int64_t per = t->ip[3] ? t->ip[3] : 1, gs = E / G;
    bool *taken = malloc((size_t)(E + G) * sizeof *taken);
    float *gscore = malloc((size_t)G * sizeof *gscore);
    if (!taken || !gscore) {
        free(taken);
        free(gscore);
        return;
    }
    bool *gtaken = taken + E;
    for (int64_t r = 0; r < rows; r++) {
        const float *v = s->data + r * E;
        memset(taken, 0, (size_t)(E + G) * sizeof *taken);
        if (keep < G) { /* group-limited routing: a group's score is the sum of its top `per` */
            for (int64_t g = 0; g < G; g++) {
                double sum = 0;
                for (int64_t p = 0; p < per; p++) {
                    int64_t i = moe_argmax(v + g * gs, taken + g * gs, gs);
                    taken[g * gs + i] = true;
                    sum += v[g * gs + i];
                }
                gscore[g] = (float)sum;
            }
            memset(taken, 0, (size_t)E * sizeof *taken);
            for (int64_t n = 0; n < keep; n++)
                gtaken[moe_argmax(gscore, gtaken, G)] = true;
            for (int64_t g = 0; g < G; g++) /* experts of groups not kept cannot be chosen */
                for (int64_t i = 0; i < gs; i++)
                    taken[g * gs + i] = !gtaken[g];
        }
        for (int64_t j = 0; j < k; j++) {
            int64_t i = moe_argmax(v, taken, E);
            taken[i] = true;
            t->data[r * k + j] = (float)i;
        }
    }
    free(taken);
    free(gscore);
}

int64_t nn_flops_topk(const nn_tensor *t)
{
    return nn_numel(t->src[0]) * t->ip[0]; /* a comparison per score and choice */
}

/* ---- moe_dispatch: x [T, D], idx [T, k] (, w [T, k]) -> rows [N, D] ---- */

np_status nn_infer_moe_dispatch(nn_tensor *t, np_err *err)
{
    int64_t T = 0, k = 0;
    const nn_tensor *x = t->src[0];
    if (moe_check_idx(t, 1, &T, &k, err) != NP_OK)
        return err->status;
    if (x->ndim != 2 || x->ne[0] != T)
        return nn_infer_fail(t, err, NP_ERR_INCONSISTENT, "x must be [tokens, D] with the "
                             "%lld tokens of the indices", (long long)T);
    if (t->n_src > 2 && (t->src[2]->ndim != 2 || t->src[2]->ne[0] != T || t->src[2]->ne[1] != k))
        return nn_infer_fail(t, err, NP_ERR_INCONSISTENT, "the weights must be [tokens, k]");
    if (t->n_src > 2 && t->src[2]->dtype != x->dtype)
        return nn_infer_fail(t, err, NP_ERR_TYPE, "the weights' dtype differs from x's");
    nn_set_shape(t, 2, (int64_t[]){moe_rows(T, k, t->ip[MOE_IP_E], t->ip[MOE_IP_C]), x->ne[1]});
    t->dtype = x->dtype;
    return NP_OK;
}

void nn_fwd_moe_dispatch(nn_tensor *t)
{
    const nn_tensor *x = t->src[0], *w = t->n_src > 2 ? t->src[2] : NULL;
    int64_t D = x->ne[1], n = nn_numel(t->src[1]), k = t->src[1]->ne[1], *first;
    memset(t->data, 0, (size_t)nn_numel(t) * sizeof(float));
    int64_t *slot = moe_layout(t, 1, &first);
    for (int64_t i = 0; slot && i < n; i++) {
        if (slot[i] < 0)
            continue;
        float s = w ? w->data[i] : 1.0f;
        const float *src = x->data + (i / k) * D;
        float *dst = t->data + slot[i] * D;
        for (int64_t d = 0; d < D; d++)
            dst[d] = s * src[d];
    }
    free(slot);
}

/* ---- moe_combine: rows [N, D], idx [T, k] (, w [T, k]) -> [T, D] ---- */

np_status nn_infer_moe_combine(nn_tensor *t, np_err *err)
{
    int64_t T = 0, k = 0;
    const nn_tensor *y = t->src[0];
    if (moe_check_idx(t, 1, &T, &k, err) != NP_OK)
        return err->status;
    if (y->ndim != 2 || y->ne[0] != moe_rows(T, k, t->ip[MOE_IP_E], t->ip[MOE_IP_C]))
        return nn_infer_fail(t, err, NP_ERR_INCONSISTENT, "the rows must be [%lld, D]",
                             (long long)moe_rows(T, k, t->ip[MOE_IP_E], t->ip[MOE_IP_C]));
    if (t->n_src > 2 && (t->src[2]->ndim != 2 || t->src[2]->ne[0] != T || t->src[2]->ne[1] != k))
        return nn_infer_fail(t, err, NP_ERR_INCONSISTENT, "the weights must be [tokens, k]");
    if (t->n_src > 2 && t->src[2]->dtype != y->dtype)
        return nn_infer_fail(t, err, NP_ERR_TYPE, "the weights' dtype differs from the rows'");
    nn_set_shape(t, 2, (int64_t[]){T, y->ne[1]});
    t->dtype = y->dtype;
    return NP_OK;
}

void nn_fwd_moe_combine(nn_tensor *t)
{
    const nn_tensor *y = t->src[0], *w = t->n_src > 2 ? t->src[2] : NULL;
    int64_t D = y->ne[1], T = t->ne[0], k = t->src[1]->ne[1], *first;
    int64_t *slot = moe_layout(t, 1, &first);
    for (int64_t tk = 0; tk < T; tk++)
        for (int64_t d = 0; d < D; d++) {
            double acc = 0;
            for (int64_t j = 0; slot && j < k; j++) {
                int64_t r = slot[tk * k + j];
                if (r >= 0)
                    acc += (double)(w ? w->data[tk * k + j] : 1.0f) * y->data[r * D + d];
            }
            t->data[tk * D + d] = (float)acc;
        }
    free(slot);
}

/* ---- moe_combine_grad: rows [N, D], idx [T, k], dout [T, D] -> [T, k]: dout_t . row(t, j) ---- */

np_status nn_infer_moe_combine_grad(nn_tensor *t, np_err *err)
{
    int64_t T = 0, k = 0;
    if (moe_check_idx(t, 1, &T, &k, err) != NP_OK)
        return err->status;
    const nn_tensor *y = t->src[0], *dout = t->src[2];
    if (y->ndim != 2 || dout->ndim != 2 || dout->ne[0] != T || dout->ne[1] != y->ne[1])
        return nn_infer_fail(t, err, NP_ERR_INCONSISTENT, "rows [N, D] and [tokens, D] expected");
    nn_set_shape(t, 2, (int64_t[]){T, k});
    t->dtype = dout->dtype;
    return NP_OK;
}

void nn_fwd_moe_combine_grad(nn_tensor *t)
{
    const nn_tensor *y = t->src[0], *dout = t->src[2];
    int64_t D = y->ne[1], n = nn_numel(t), k = t->ne[1], *first;
    int64_t *slot = moe_layout(t, 1, &first);
    for (int64_t i = 0; i < n; i++) {
        double acc = 0;
        for (int64_t d = 0; slot && slot[i] >= 0 && d < D; d++)
            acc += (double)dout->data[(i / k) * D + d] * y->data[slot[i] * D + d];
        t->data[i] = (float)acc;
    }
    free(slot);
}

int64_t nn_flops_moe_route(const nn_tensor *t)
{
    /* dispatch and combine move rows (a weighted one: a multiply each, and combine's sum an
     * add); combine_grad is a dot product per assignment */
    const nn_tensor *idx = t->src[1];
    int64_t D = t->src[0]->ne[1], n = nn_numel(idx);
    if (t->op == NN_OP_MOE_DISPATCH)
        return t->n_src > 2 ? n * D : 0;
    return 2 * n * D;
}

/* dispatch: dx = combine(drows, idx, w); dw_tj = x_t . drows(t, j). combine: drows =
 * dispatch(dout, idx, w); dw_tj = dout_t . row(t, j). */
void nn_bwd_moe_route(nn_graph *g, nn_tensor *t, nn_tensor *dy)
{
    bool dispatch = t->op == NN_OP_MOE_DISPATCH;
    nn_tensor *idx = t->src[1], *w = t->n_src > 2 ? t->src[2] : NULL;
    nn_tensor *srcs[3] = {dy, idx, w};
    nn_grad_acc(g, t->src[0], nn_node(g, dispatch ? NN_OP_MOE_COMBINE : NN_OP_MOE_DISPATCH,
                                      t->n_src, srcs, t->ip, NULL));
    if (w) {
        nn_tensor *gs[3] = {dispatch ? dy : t->src[0], idx, dispatch ? t->src[0] : dy};
        nn_grad_acc(g, w, nn_node(g, NN_OP_MOE_COMBINE_GRAD, 3, gs, t->ip, NULL));
    }
}

/* ---- moe_gmm: rows [N, K] x w [E, K, F] (ip[2]: w [E, F, K] transposed), idx -> [N, F] ---- */

np_status nn_infer_moe_gmm(nn_tensor *t, np_err *err)
{
    int64_t T = 0, k = 0;
    if (moe_check_idx(t, 2, &T, &k, err) != NP_OK)
        return err->status;
    if (nn_infer_same_dtype(t, 2, err) != NP_OK)
        return err->status;
    const nn_tensor *x = t->src[0], *w = t->src[1];
    int64_t E = t->ip[MOE_IP_E], N = moe_rows(T, k, E, t->ip[MOE_IP_C]);
    bool tr = t->ip[MOE_IP_TRANS] != 0;
    if (w->ndim != 3 || w->ne[0] != E || x->ndim != 2 || x->ne[0] != N ||
        x->ne[1] != w->ne[tr ? 2 : 1])
        return nn_infer_fail(t, err, NP_ERR_INCONSISTENT, "rows must be [%lld, K] and the "
                             "weights [%lld, K, F]%s", (long long)N, (long long)E,
                             tr ? " (transposed: [E, F, K])" : "");
    nn_set_shape(t, 2, (int64_t[]){N, w->ne[tr ? 1 : 2]});
    t->dtype = x->dtype;
    return NP_OK;
}

void nn_fwd_moe_gmm(nn_tensor *t)
{
    const nn_tensor *x = t->src[0], *w = t->src[1];
    int64_t E = t->ip[MOE_IP_E], K = x->ne[1], F = t->ne[1], *first;
    bool tr = t->ip[MOE_IP_TRANS] != 0;
    memset(t->data, 0, (size_t)nn_numel(t) * sizeof(float));
    int64_t *slot = moe_layout(t, 2, &first);
    for (int64_t e = 0; slot && e < E; e++) {
        const float *we = w->data + e * K * F;
        for (int64_t r = first[e]; r < first[e + 1]; r++)
            for (int64_t f = 0; f < F; f++) {
                double acc = 0;
                for (int64_t kk = 0; kk < K; kk++)
                    acc += (double)x->data[r * K + kk] * (tr ? we[f * K + kk] : we[kk * F + f]);
                t->data[r * F + f] = (float)acc;
            }
    }
    free(slot);
}

/* ---- moe_gmm_grad_w: rows a [N, P], rows b [N, Q], idx -> [E, P, Q]: a_e^T b_e per expert ---- */

np_status nn_infer_moe_gmm_grad_w(nn_tensor *t, np_err *err)
{
    int64_t T = 0, k = 0;
    if (moe_check_idx(t, 2, &T, &k, err) != NP_OK)
        return err->status;
    const nn_tensor *a = t->src[0], *b = t->src[1];
    int64_t N = moe_rows(T, k, t->ip[MOE_IP_E], t->ip[MOE_IP_C]);
    if (a->ndim != 2 || b->ndim != 2 || a->ne[0] != N || b->ne[0] != N)
        return nn_infer_fail(t, err, NP_ERR_INCONSISTENT, "both must be [%lld, .] rows",
                             (long long)N);
    nn_set_shape(t, 3, (int64_t[]){t->ip[MOE_IP_E], a->ne[1], b->ne[1]});
    t->dtype = b->dtype;
    return NP_OK;
}

void nn_fwd_moe_gmm_grad_w(nn_tensor *t)
{
    const nn_tensor *a = t->src[0], *b = t->src[1];
    int64_t E = t->ip[MOE_IP_E], P = a->ne[1], Q = b->ne[1], *first;
    int64_t *slot = moe_layout(t, 2, &first);
    for (int64_t e = 0; e < E; e++)
        for (int64_t p = 0; p < P; p++)
            for (int64_t q = 0; q < Q; q++) {
                double acc = 0;
                for (int64_t r = slot ? first[e] : 0; slot && r < first[e + 1]; r++)
                    acc += (double)a->data[r * P + p] * b->data[r * Q + q];
                t->data[(e * P + p) * Q + q] = (float)acc;
            }
    free(slot);
}

int64_t nn_flops_moe_gmm(const nn_tensor *t)
{
    /* 2 per multiply-add over every row of the layout (capacity: the padded rows too) */
    const nn_tensor *a = t->src[0];
    return t->op == NN_OP_MOE_GMM ? 2 * a->ne[0] * a->ne[1] * t->ne[1]
                                  : 2 * a->ne[0] * a->ne[1] * t->src[1]->ne[1];
}

/* y = x W_e: dx = dy W_e^T (moe_gmm transposed), dW_e = x_e^T dy_e; transposed (y = x W_e^T,
 * W [E, F, K]): dx = dy W_e, dW_e = dy_e^T x_e. */
void nn_bwd_moe_gmm(nn_graph *g, nn_tensor *t, nn_tensor *dy)
{
    nn_tensor *x = t->src[0], *w = t->src[1], *idx = t->src[2];
    int64_t ip[NN_MAX_IPARAMS];
    memcpy(ip, t->ip, sizeof ip);
    bool tr = ip[MOE_IP_TRANS] != 0;
    ip[MOE_IP_TRANS] = !tr;
    nn_grad_acc(g, x, nn_node(g, NN_OP_MOE_GMM, 3, (nn_tensor *[]){dy, w, idx}, ip, NULL));
    ip[MOE_IP_TRANS] = 0;
    nn_tensor *gw[3] = {tr ? dy : x, tr ? x : dy, idx};
    nn_grad_acc(g, w, nn_node(g, NN_OP_MOE_GMM_GRAD_W, 3, gw, ip, NULL));
}
