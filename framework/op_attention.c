/* op_attention.c — fused scaled dot-product attention as one op, with the two ops its
 * backward rule builds:
 *
 *   attention       (q, k, v [B, H, S, Dh]) -> out [B, H, S, Dh]
 *                   out = softmax(scale x q k^T (+ causal mask)) v, per head
 *   attention_lse   (q, k) -> lse [B, H, S] f32: the log-sum-exp of each query's scaled
 *                   (masked) scores, log sum_j exp(s_ij), which the backward needs
 *   attention_grad  (q, k, v, out, dout, lse) -> [3, B, H, S, Dh]: dq, dk, dv stacked
 *
 * Inference form (attention only, forward only: nn_attention_kv): k and v [B, KV, Skv, Dh]
 * with KV dividing H (grouped-query: query head h reads kv head h / (H / KV)) and Skv >= S,
 * the query rows being the last S positions of the Skv keys (a decode step: S = 1 against
 * the cached context; causal: query i sees keys 0 .. Skv - S + i). With KV = H and Skv = S it
 * is the training form; attention_lse and attention_grad keep q, k, v of one shape.
 *
 * ip[0] causal (0/1: key j > query i is masked out), fp[0] the scale (nn_attention_fused:
 * 1 / sqrt(Dh)). The references never keep an S x S matrix: they work one query at a time
 * (scores and softmax in double, recomputed where needed; outputs summed in fp32 like the
 * matrix unit's accumulators), and the backward recomputes P from q, k and lse (P_ij =
 * exp(s_ij - lse_i)) with D_i = dout_i . out_i, as a fused kernel does tile by tile
 * (docs/compiler.md, "attention"). Values equal the composite nn_attention's
 * (matmul, scale, causal_mask, softmax, matmul) up to the roundings the composite makes
 * between its ops at bf16/fp16. */
#include <math.h>

#include "op_kernels.h"

/* Query-key pairs a head computes: every pair, or the lower triangle with its diagonal
 * (S queries, the last of Skv keys: each query sees Skv - S keys more than in training). */
static int64_t nn_attn_pairs(const nn_tensor *t, bool causal)
{
    int64_t S = t->src[0]->ne[2], Skv = t->src[1]->ne[2];
    return causal ? S * (S + 1) / 2 + S * (Skv - S) : S * Skv;
}

np_status nn_infer_attention(nn_tensor *t, np_err *err)
{
    int n = t->op == NN_OP_ATTENTION ? 3 : t->op == NN_OP_ATTENTION_LSE ? 2 : 5;
    if (nn_infer_same_dtype(t, n, err) != NP_OK)
        return err->status;
    const nn_tensor *q = t->src[0], *k = t->src[1];
    if (t->op == NN_OP_ATTENTION && q->ndim == 4 && k->ndim == 4 && nn_same_shape(k, t->src[2]) &&
        k->ne[0] == q->ne[0] && k->ne[3] == q->ne[3] && k->ne[1] > 0 && q->ne[1] % k->ne[1] == 0 &&
        k->ne[2] >= q->ne[2] && (k->ne[1] != q->ne[1] || k->ne[2] != q->ne[2])) {
        nn_set_shape(t, 4, q->ne); /* the inference form: grouped kv heads, a longer context */
        t->dtype = q->dtype;
        return NP_OK;
    }
    for (int i = 0; i < n; i++)
        if (t->src[i]->ndim != 4 || !nn_same_shape(t->src[i], q))
            return nn_infer_fail(t, err, NP_ERR_INCONSISTENT,
                                 "expects q, k, v%s of one shape [B, H, S, Dh]%s",
                                 n == 5 ? ", out and dout" : "",
                                 n == 3 ? " (or k, v [B, KV, Skv, Dh], KV dividing H, Skv >= S)"
                                        : "");
    if (t->ip[0] != 0 && t->ip[0] != 1)
        return nn_infer_fail(t, err, NP_ERR_RANGE, "causal is %lld (0 or 1)",
                             (long long)t->ip[0]);
    if (!(t->fp[0] > 0) || !isfinite(t->fp[0]))
        return nn_infer_fail(t, err, NP_ERR_RANGE, "scale %g is not a positive number",
                             t->fp[0]);
    if (t->op == NN_OP_ATTENTION) {
        nn_set_shape(t, 4, q->ne);
        t->dtype = q->dtype;
    } else if (t->op == NN_OP_ATTENTION_LSE) {
        nn_set_shape(t, 3, q->ne);
        t->dtype = NN_F32;
    } else {
        const nn_tensor *lse = t->src[5];
        if (lse->ndim != 3 || lse->ne[0] != q->ne[0] || lse->ne[1] != q->ne[1] ||
            lse->ne[2] != q->ne[2] || lse->dtype != NN_F32)
            return nn_infer_fail(t, err, NP_ERR_INCONSISTENT, "lse must be [B, H, S] f32");
        nn_set_shape(t, 5, (int64_t[]){3, q->ne[0], q->ne[1], q->ne[2], q->ne[3]});
        t->dtype = q->dtype;
    }
    return NP_OK;
}

/* Scaled score of query i against key j of one head. */
static double nn_attn_score(const float *q, const float *k, int64_t Dh, int64_t i, int64_t j,
                            double scale)
{
    double d = 0.0;
    for (int64_t c = 0; c < Dh; c++)
        d += (double)q[i * Dh + c] * k[j * Dh + c];
    return d * scale;
}

/* The log-sum-exp of query i's scores over the keys it sees (0 .. n-1), and their max. */
static double nn_attn_lse(const float *q, const float *k, int64_t Dh, int64_t i, int64_t n,
                          double scale, double *max)
{
    double m = -INFINITY, l = 0.0;
    for (int64_t j = 0; j < n; j++) {
        double s = nn_attn_score(q, k, Dh, i, j, scale);
        m = s > m ? s : m;
    }
    for (int64_t j = 0; j < n; j++)
        l += exp(nn_attn_score(q, k, Dh, i, j, scale) - m);
    *max = m;
    return m + log(l);
}

/* Per head and query: the max and the log-sum-exp over the keys it sees, then out_i =
 * sum_j exp(s_ij - lse_i) v_j (scores recomputed, never stored). */
void nn_fwd_attention(nn_tensor *t)
{
    const nn_tensor *q = t->src[0], *kt = t->src[1];
    int64_t BH = q->ne[0] * q->ne[1], S = q->ne[2], Dh = q->ne[3], hs = S * Dh;
    int64_t Skv = kt->ne[2], ks = Skv * Dh, group = q->ne[1] / kt->ne[1];
    bool causal = t->ip[0] != 0, lse_only = t->op == NN_OP_ATTENTION_LSE;
    double scale = t->fp[0];
    for (int64_t h = 0; h < BH; h++) {
        int64_t kvh = h / q->ne[1] * kt->ne[1] + h % q->ne[1] / group; /* its kv head */
        const float *qh = q->data + h * hs, *kh = kt->data + kvh * ks;
        for (int64_t i = 0; i < S; i++) {
            int64_t n = causal ? Skv - S + i + 1 : Skv;
            double m, lse = nn_attn_lse(qh, kh, Dh, i, n, scale, &m);
            if (lse_only) {
                t->data[h * S + i] = (float)lse;
                continue;
            }
            const float *vh = t->src[2]->data + kvh * ks;
            float *o = t->data + h * hs + i * Dh;
            for (int64_t c = 0; c < Dh; c++)
                o[c] = 0.0f;
            for (int64_t j = 0; j < n; j++) {
                double p = exp(nn_attn_score(qh, kh, Dh, i, j, scale) - lse);
                for (int64_t c = 0; c < Dh; c++)
                    o[c] += (float)(p * vh[j * Dh + c]);
            }
        }
    }
}

/* dq, dk, dv of every head: P_ij = exp(s_ij - lse_i), D_i = dout_i . out_i,
 * dv_j = sum_i P_ij dout_i, dS_ij = P_ij (dout_i . v_j - D_i), dq_i = scale sum_j dS_ij k_j,
 * dk_j = scale sum_i dS_ij q_i (products in double, sums in fp32 like the matrix unit's). */
void nn_fwd_attention_grad(nn_tensor *t)
{
    const nn_tensor *q = t->src[0];
    int64_t BH = q->ne[0] * q->ne[1], S = q->ne[2], Dh = q->ne[3], hs = S * Dh, all = BH * hs;
    bool causal = t->ip[0] != 0;
    double scale = t->fp[0];
    for (int64_t i = 0; i < 3 * all; i++)
        t->data[i] = 0.0f;
    for (int64_t h = 0; h < BH; h++) {
        const float *qh = q->data + h * hs, *kh = t->src[1]->data + h * hs;
        const float *vh = t->src[2]->data + h * hs, *oh = t->src[3]->data + h * hs;
        const float *doh = t->src[4]->data + h * hs, *lse = t->src[5]->data + h * S;
        float *dq = t->data + h * hs, *dk = dq + all, *dv = dk + all;
        for (int64_t i = 0; i < S; i++) {
            double D = 0.0;
            for (int64_t c = 0; c < Dh; c++)
                D += (double)doh[i * Dh + c] * oh[i * Dh + c];
            for (int64_t j = 0, n = causal ? i + 1 : S; j < n; j++) {
                double p = exp(nn_attn_score(qh, kh, Dh, i, j, scale) - lse[i]), dp = 0.0;
                for (int64_t c = 0; c < Dh; c++) {
                    dv[j * Dh + c] += (float)(p * doh[i * Dh + c]);
                    dp += (double)doh[i * Dh + c] * vh[j * Dh + c];
                }
                double ds = p * (dp - D) * scale;
                for (int64_t c = 0; c < Dh; c++) {
                    dq[i * Dh + c] += (float)(ds * kh[j * Dh + c]);
                    dk[j * Dh + c] += (float)(ds * qh[i * Dh + c]);
                }
            }
        }
    }
}

void nn_bwd_attention(nn_graph *g, nn_tensor *t, nn_tensor *dy)
{
    nn_tensor *q = t->src[0], *k = t->src[1], *v = t->src[2];
    if (!nn_same_shape(q, k)) { /* the inference form has no backward */
        nn_graph_fail(g, NP_ERR_INCONSISTENT, "%s: attention over a kv cache (k and v of "
                      "another shape than q) has no backward: it is an inference op", t->name);
        return;
    }
    nn_tensor *lse = nn_node(g, NN_OP_ATTENTION_LSE, 2, (nn_tensor *[]){q, k}, t->ip, t->fp);
    nn_tensor *d = nn_node(g, NN_OP_ATTENTION_GRAD, 6, (nn_tensor *[]){q, k, v, t, dy, lse},
                           t->ip, t->fp);
    nn_tensor *src[3] = {q, k, v};
    for (int i = 0; i < 3; i++)
        if (src[i]->requires_grad)
            nn_grad_acc(g, src[i], nn_reshape(g, nn_slice(g, d, 0, i, i + 1), 4, src[i]->ne));
}

/* softmax(QK^T) V: two GEMMs of 2 Dh FLOPs a pair and the softmax's 5 a pair. */
int64_t nn_flops_attention(const nn_tensor *t)
{
    const nn_tensor *q = t->src[0];
    int64_t heads = q->ne[0] * q->ne[1], P = nn_attn_pairs(t, t->ip[0] != 0), Dh = q->ne[3];
    switch (t->op) {
    case NN_OP_ATTENTION: return heads * P * (4 * Dh + 5);
    case NN_OP_ATTENTION_LSE: return heads * P * (2 * Dh + 4);
    /* QK^T again, dV, dP, dQ, dK (five GEMMs), exp and dS = P (dP - D) */
    default: return heads * (P * (10 * Dh + 4) + q->ne[2] * 2 * Dh);
    }
}

/* The same, as model FLOPs (nn_node_model_flops): every pair, no recomputation. */
int64_t nn_model_flops_attention(const nn_tensor *t)
{
    const nn_tensor *q = t->src[0];
    int64_t heads = q->ne[0] * q->ne[1], P = nn_attn_pairs(t, false), Dh = q->ne[3];
    switch (t->op) {
    case NN_OP_ATTENTION: return heads * P * (4 * Dh + 5);
    case NN_OP_ATTENTION_LSE: return 0;
    /* dV, dP, dQ, dK and dS = P (dP - D) */
    default: return heads * (P * (8 * Dh + 4) + q->ne[2] * 2 * Dh);
    }
}

int64_t nn_attention_macs(const nn_tensor *t)
{
    const nn_tensor *q = t->src[0];
    int64_t gemms = t->op == NN_OP_ATTENTION ? 2 : t->op == NN_OP_ATTENTION_LSE ? 1 : 5;
    return q->ne[0] * q->ne[1] * nn_attn_pairs(t, t->ip[0] != 0) * q->ne[3] * gemms;
}

nn_tensor *nn_attention_fused(nn_graph *g, nn_tensor *q, nn_tensor *k, nn_tensor *v, bool causal)
{
    if (!q || !k || !v)
        return NULL;
    double fp[NN_MAX_FPARAMS] = {1.0 / sqrt((double)q->ne[q->ndim - 1])};
    int64_t ip[NN_MAX_IPARAMS] = {causal ? 1 : 0};
    return nn_node(g, NN_OP_ATTENTION, 3, (nn_tensor *[]){q, k, v}, ip, fp);
}

nn_tensor *nn_attention_kv(nn_graph *g, nn_tensor *q, nn_tensor *k, nn_tensor *v, bool causal)
{
    return nn_attention_fused(g, q, k, v, causal);
}
