/* op_norm.c — batch norm (training and inference), layer norm, RMS norm, softmax and
 * log-softmax. Norms take optional affine parameters; their gradient ops take (x, g) where g
 * is dy already multiplied by gamma, so the affine part differentiates through public ops. */
#include <math.h>
#include <string.h>

#include "op_kernels.h"

/* ---- shape inference ---- */

np_status nn_infer_norm(nn_tensor *t, np_err *err)
{
    const nn_tensor *x = t->src[0];
    bool bn = t->op == NN_OP_BATCHNORM || t->op == NN_OP_BATCHNORM_INFER;
    if (nn_infer_same_dtype(t, t->n_src, err) != NP_OK)
        return err->status;
    if (x->ndim < (bn ? 2 : 1))
        return nn_infer_fail(t, err, NP_ERR_INCONSISTENT, "input needs at least %d dims",
                             bn ? 2 : 1);
    int64_t c = bn ? x->ne[1] : x->ne[x->ndim - 1];
    for (int i = 1; i < t->n_src; i++)
        if (t->src[i]->ndim != 1 || t->src[i]->ne[0] != c)
            return nn_infer_fail(t, err, NP_ERR_INCONSISTENT, "input %d must have shape [%lld]",
                                 i, (long long)c);
    nn_set_shape(t, x->ndim, x->ne);
    t->dtype = x->dtype;
    return NP_OK;
}

np_status nn_infer_norm_grad(nn_tensor *t, np_err *err)
{
    if (nn_infer_same_dtype(t, 2, err) != NP_OK)
        return err->status;
    if (!nn_same_shape(t->src[0], t->src[1]))
        return nn_infer_fail(t, err, NP_ERR_INCONSISTENT, "shapes differ");
    nn_set_shape(t, t->src[0]->ndim, t->src[0]->ne);
    t->dtype = t->src[0]->dtype;
    return NP_OK;
}

int64_t nn_flops_norm(const nn_tensor *t)
{
    return 5 * nn_numel(t);
}

/* ---- layouts: groups of elements normalized together ----
 * batch norm: group c holds x[n, c, s] for all n, s (stride S inside a sample);
 * layer/RMS norm: group r holds row r of the last dim. elem(k) gives the k-th index. */
typedef struct nn_norm_layout {
    int64_t groups, len, C, S;
    bool bn;
} nn_norm_layout;

static nn_norm_layout nn_norm_layout_of(const nn_tensor *x, bool bn)
{
    nn_norm_layout l = {0};
    l.bn = bn;
    if (bn) {
        l.C = x->ne[1];
        l.S = nn_numel(x) / (x->ne[0] * x->ne[1]);
        l.groups = l.C;
        l.len = x->ne[0] * l.S;
    } else {
        l.len = x->ne[x->ndim - 1];
        l.groups = nn_numel(x) / l.len;
    }
    return l;
}

static inline int64_t nn_norm_idx(const nn_norm_layout *l, int64_t grp, int64_t k)
{
    if (!l->bn)
        return grp * l->len + k;
    int64_t n = k / l->S, s = k % l->S;
    return (n * l->C + grp) * l->S + s;
}

/* mean and 1/sigma of group grp (rms: mean forced to 0, sigma = sqrt(mean(x^2) + eps)). */
static void nn_norm_stats(const nn_norm_layout *l, const float *x, int64_t grp, double eps,
                          bool rms, double *mean, double *rstd)
{
    double m = 0.0, v = 0.0;
    if (!rms) {
        for (int64_t k = 0; k < l->len; k++)
            m += x[nn_norm_idx(l, grp, k)];
        m /= (double)l->len;
    }
    for (int64_t k = 0; k < l->len; k++) {
        double d = x[nn_norm_idx(l, grp, k)] - m;
        v += d * d;
    }
    v /= (double)l->len;
    *mean = m;
    *rstd = 1.0 / sqrt(v + eps);
}

void nn_fwd_norm(nn_tensor *t)
{
    const nn_tensor *x = t->src[0];
    bool bn = t->op == NN_OP_BATCHNORM || t->op == NN_OP_BATCHNORM_INFER;
    bool rms = t->op == NN_OP_RMSNORM;
    nn_norm_layout l = nn_norm_layout_of(x, bn);
    const float *gamma = t->n_src > 1 ? t->src[1]->data : NULL;
    const float *beta = t->n_src > 2 ? t->src[2]->data : NULL;
    for (int64_t grp = 0; grp < l.groups; grp++) {
        double mean, rstd;
        if (t->op == NN_OP_BATCHNORM_INFER) {
            mean = t->src[3]->data[grp];
            rstd = 1.0 / sqrt(t->src[4]->data[grp] + t->fp[0]);
        } else {
            nn_norm_stats(&l, x->data, grp, t->fp[0], rms, &mean, &rstd);
        }
        for (int64_t k = 0; k < l.len; k++) {
            int64_t i = nn_norm_idx(&l, grp, k);
            int64_t c = bn ? grp : k;
            double v = (x->data[i] - mean) * rstd;
            if (gamma)
                v *= gamma[c];
            if (beta)
                v += beta[c];
            t->data[i] = (float)v;
        }
    }
}

/* dx = rstd * (g - mean(g) - xhat * mean(g * xhat)); rms drops the mean(g) term. */
void nn_fwd_norm_grad(nn_tensor *t)
{
    const nn_tensor *x = t->src[0], *gt = t->src[1];
    bool bn = t->op == NN_OP_BATCHNORM_GRAD, rms = t->op == NN_OP_RMSNORM_GRAD;
    nn_norm_layout l = nn_norm_layout_of(x, bn);
    for (int64_t grp = 0; grp < l.groups; grp++) {
        double mean, rstd, mg = 0.0, mgx = 0.0;
        nn_norm_stats(&l, x->data, grp, t->fp[0], rms, &mean, &rstd);
        for (int64_t k = 0; k < l.len; k++) {
            int64_t i = nn_norm_idx(&l, grp, k);
            double xh = (x->data[i] - mean) * rstd;
            mg += gt->data[i];
            mgx += gt->data[i] * xh;
        }
        mg = rms ? 0.0 : mg / (double)l.len;
        mgx /= (double)l.len;
        for (int64_t k = 0; k < l.len; k++) {
            int64_t i = nn_norm_idx(&l, grp, k);
            double xh = (x->data[i] - mean) * rstd;
            t->data[i] = (float)(rstd * (gt->data[i] - mg - xh * mgx));
        }
    }
}

/* gamma [C] as [C, 1, ..., 1] so that it broadcasts against [N, C, ...]. */
static nn_tensor *nn_bn_channel_view(nn_graph *g, nn_tensor *v, int ndim)
{
    int64_t ne[NN_MAX_DIMS];
    ne[0] = v->ne[0];
    for (int d = 1; d < ndim - 1; d++)
        ne[d] = 1;
    return nn_reshape(g, v, ndim - 1, ne);
}

void nn_bwd_norm(nn_graph *g, nn_tensor *t, nn_tensor *dy)
{
    nn_tensor *x = t->src[0], *gamma = t->n_src > 1 ? t->src[1] : NULL;
    nn_tensor *beta = t->n_src > 2 ? t->src[2] : NULL;
    bool bn = t->op == NN_OP_BATCHNORM;
    nn_op grad_op = bn ? NN_OP_BATCHNORM_GRAD
                       : t->op == NN_OP_LAYERNORM ? NN_OP_LAYERNORM_GRAD : NN_OP_RMSNORM_GRAD;
    if (x->requires_grad) {
        nn_tensor *gx = dy;
        if (gamma)
            gx = nn_mul(g, dy, bn ? nn_bn_channel_view(g, gamma, x->ndim) : gamma);
        nn_grad_acc(g, x, nn_node(g, grad_op, 2, (nn_tensor *[]){x, gx}, NULL, t->fp));
    }
    if (gamma && gamma->requires_grad) {
        nn_tensor *xhat = nn_node1(g, t->op, x, NULL, t->fp);
        nn_tensor *p = nn_mul(g, dy, xhat);
        nn_grad_acc(g, gamma, bn ? nn_channel_sum(g, p) : nn_sum_to(g, p, 1, gamma->ne));
    }
    if (beta && beta->requires_grad)
        nn_grad_acc(g, beta, bn ? nn_channel_sum(g, dy) : nn_sum_to(g, dy, 1, beta->ne));
}

/* ---- softmax / log-softmax over the last dim ----
 * softmax takes Megatron-LM's fused scale and causal mask (nn_softmax_masked,
 * nn_pass_fuse_softmax): fp[0] the scale of x (0: none, 1), ip[0] 1 to mask the elements above
 * the diagonal of the last two dims (-inf) before the row's max and sum. softmax_grad (y, dy)
 * is its backward with the same parameters: fp[0] x y (dy - sum(dy y)), 0 where masked. */

static double nn_sm_scale(const nn_tensor *t) { return t->fp[0] > 0 ? t->fp[0] : 1.0; }

/* Whether element k of row r of t's rows (its last dim) is masked: key k after query r mod
 * (the second-to-last dim). */
static bool nn_sm_masked(const nn_tensor *t, int64_t r, int64_t k)
{
    int64_t q = t->ndim >= 2 ? t->ne[t->ndim - 2] : 1;
    return t->ip[0] && k > r % q;
}

np_status nn_infer_softmax(nn_tensor *t, np_err *err)
{
    if (t->src[0]->ndim < 1)
        return nn_infer_fail(t, err, NP_ERR_INCONSISTENT, "needs at least one dim");
    if (t->op == NN_OP_LOG_SOFTMAX && (t->fp[0] != 0 || t->ip[0]))
        return nn_infer_fail(t, err, NP_ERR_INCONSISTENT, "log_softmax takes no scale or mask");
    if (t->fp[0] < 0 || t->fp[0] != t->fp[0] || (t->ip[0] && t->src[0]->ndim < 2))
        return nn_infer_fail(t, err, NP_ERR_INCONSISTENT, "needs a scale >= 0 (0: none) and, "
                             "masked, at least two dims");
    nn_set_shape(t, t->src[0]->ndim, t->src[0]->ne);
    t->dtype = t->src[0]->dtype;
    return NP_OK;
}

void nn_fwd_softmax(nn_tensor *t)
{
    const float *x = t->src[0]->data;
    int64_t len = t->ne[t->ndim - 1], rows = nn_numel(t) / len;
    double sc = t->op == NN_OP_SOFTMAX ? nn_sm_scale(t) : 1.0;
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * len;
        float *yr = t->data + r * len;
        double m = -INFINITY, s = 0.0;
        for (int64_t k = 0; k < len; k++)
            if (!nn_sm_masked(t, r, k))
                m = sc * xr[k] > m ? sc * xr[k] : m;
        for (int64_t k = 0; k < len; k++)
            s += nn_sm_masked(t, r, k) ? 0.0 : exp(sc * xr[k] - m);
        for (int64_t k = 0; k < len; k++)
            yr[k] = t->op == NN_OP_SOFTMAX
                        ? (float)(nn_sm_masked(t, r, k) ? 0.0 : exp(sc * xr[k] - m) / s)
                        : (float)(xr[k] - m - log(s));
    }
}

void nn_bwd_softmax(nn_graph *g, nn_tensor *t, nn_tensor *dy)
{
    nn_tensor *dx;
    if (t->op == NN_OP_SOFTMAX) /* fp[0] y (dy - sum(dy y)), 0 where masked: one op */
        dx = nn_node(g, NN_OP_SOFTMAX_GRAD, 2, (nn_tensor *[]){t, dy}, t->ip, t->fp);
    else /* dy - exp(y) * sum(dy) */
        dx = nn_sub(g, dy, nn_mul(g, nn_exp(g, t), nn_reduce_sum(g, dy, -1, true)));
    nn_grad_acc(g, t->src[0], dx);
}

np_status nn_infer_softmax_grad(nn_tensor *t, np_err *err)
{
    const nn_tensor *y = t->src[0], *dy = t->src[1];
    if (!nn_same_shape(y, dy) || y->ndim < 1)
        return nn_infer_fail(t, err, NP_ERR_INCONSISTENT, "y and dy must have one shape");
    if (t->fp[0] < 0 || t->fp[0] != t->fp[0] || (t->ip[0] && y->ndim < 2))
        return nn_infer_fail(t, err, NP_ERR_INCONSISTENT, "needs a scale >= 0 (0: none) and, "
                             "masked, at least two dims");
    nn_set_shape(t, y->ndim, y->ne);
    t->dtype = dy->dtype;
    return NP_OK;
}

void nn_fwd_softmax_grad(nn_tensor *t)
{
    const float *y = t->src[0]->data, *dy = t->src[1]->data;
    int64_t len = t->ne[t->ndim - 1], rows = nn_numel(t) / len;
    double sc = nn_sm_scale(t);
    for (int64_t r = 0; r < rows; r++) {
        const float *yr = y + r * len, *dr = dy + r * len;
        double s = 0.0;
        for (int64_t k = 0; k < len; k++)
            s += (double)dr[k] * yr[k];
        for (int64_t k = 0; k < len; k++)
            t->data[r * len + k] =
                nn_sm_masked(t, r, k) ? 0.0f : (float)(sc * yr[k] * (dr[k] - s));
    }
}

/* softmax: 5 an element (max, exp, sum, scale), and one for each of the fused scale and
 * mask, as their own nodes would count; softmax_grad: 4 (the product, its sum, the
 * difference, the product), and the same two. */
int64_t nn_flops_softmax(const nn_tensor *t)
{
    int64_t per = (t->op == NN_OP_SOFTMAX_GRAD ? 4 : 5) + (t->fp[0] > 0) + (t->ip[0] != 0);
    return per * nn_numel(t);
}

/* ---- rotary position embedding over [..., S, Dh]: fp[0] base, fp[1] direction (+1, or -1
 * for the inverse rotation its backward uses), fp[2] the position of row 0 (0; inference:
 * the tokens already in the kv cache). Pairs (i, i + Dh/2) rotate by pos * base^(-2i/Dh)
 * (the "rotate half" layout of Llama's reference code). ---- */

np_status nn_infer_rope(nn_tensor *t, np_err *err)
{
    const nn_tensor *x = t->src[0];
    if (x->ndim < 2 || x->ne[x->ndim - 1] % 2)
        return nn_infer_fail(t, err, NP_ERR_INCONSISTENT, "expects [..., S, Dh] with Dh even");
    nn_set_shape(t, x->ndim, x->ne);
    t->dtype = x->dtype;
    return NP_OK;
}

void nn_fwd_rope(nn_tensor *t)
{
    const float *x = t->src[0]->data;
    int64_t Dh = t->ne[t->ndim - 1], S = t->ne[t->ndim - 2], half = Dh / 2;
    int64_t rows = nn_numel(t) / Dh;
    for (int64_t r = 0; r < rows; r++) {
        double pos = (double)(r % S) + t->fp[2];
        const float *xr = x + r * Dh;
        float *yr = t->data + r * Dh;
        for (int64_t i = 0; i < half; i++) {
            double ang = t->fp[1] * pos * pow(t->fp[0], -2.0 * (double)i / (double)Dh);
            double c = cos(ang), s = sin(ang);
            yr[i] = (float)(xr[i] * c - xr[i + half] * s);
            yr[i + half] = (float)(xr[i + half] * c + xr[i] * s);
        }
    }
}

void nn_bwd_rope(nn_graph *g, nn_tensor *t, nn_tensor *dy)
{
    double fp[NN_MAX_FPARAMS] = {t->fp[0], -t->fp[1], t->fp[2]};
    nn_grad_acc(g, t->src[0], nn_node1(g, NN_OP_ROPE, dy, NULL, fp));
}

int64_t nn_flops_rope(const nn_tensor *t)
{
    return 3 * nn_numel(t);
}
