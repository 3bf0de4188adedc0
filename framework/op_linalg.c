/* op_linalg.c — matmul (batched, broadcasting), conv2d (stride, padding, dilation, groups)
 * and 2-D pooling, with their gradient ops. Layouts are row-major; images are NCHW and
 * conv weights OIHW (I = input channels per group). */
#include <math.h>
#include <string.h>

#include "op_kernels.h"

/* ---- matmul ---- */

np_status nn_infer_matmul(nn_tensor *t, np_err *err)
{
    const nn_tensor *a = t->src[0], *b = t->src[1];
    if (nn_infer_same_dtype(t, 2, err) != NP_OK)
        return err->status;
    if (a->ndim < 2 || b->ndim < 2)
        return nn_infer_fail(t, err, NP_ERR_INCONSISTENT, "both inputs need at least 2 dims");
    int64_t k_a = a->ne[a->ndim - 1], k_b = b->ne[b->ndim - 2];
    if (k_a != k_b)
        return nn_infer_fail(t, err, NP_ERR_INCONSISTENT,
                             "inner dimensions differ: a has K=%lld, b has K=%lld",
                             (long long)k_a, (long long)k_b);
    nn_tensor ba = *a, bb = *b;
    ba.ndim -= 2;
    bb.ndim -= 2;
    int64_t ne[NN_MAX_DIMS];
    int nd;
    if (!nn_broadcast_shape(&ba, &bb, &nd, ne))
        return nn_infer_fail(t, err, NP_ERR_INCONSISTENT, "batch dimensions do not broadcast");
    if (nd + 2 > NN_MAX_DIMS)
        return nn_infer_fail(t, err, NP_ERR_RANGE, "too many dims");
    ne[nd] = a->ne[a->ndim - 2];
    ne[nd + 1] = b->ne[b->ndim - 1];
    nn_set_shape(t, nd + 2, ne);
    t->dtype = a->dtype;
    return NP_OK;
}

/* y [M,N] = a [M,K] b [K,N]; the output never aliases the inputs. */
static void nn_matmul_block(const float *restrict pa, const float *restrict pb,
                            float *restrict py, int64_t M, int64_t N, int64_t K)
{
    for (int64_t i = 0; i < M; i++) {
        float *restrict row = py + i * N;
        for (int64_t j = 0; j < N; j++)
            row[j] = 0.0f;
        for (int64_t k = 0; k < K; k++) {
            float av = pa[i * K + k];
            const float *restrict brow = pb + k * N;
            for (int64_t j = 0; j < N; j++)
                row[j] += av * brow[j];
        }
    }
}

void nn_fwd_matmul(nn_tensor *t)
{
    const nn_tensor *a = t->src[0], *b = t->src[1];
    int64_t M = t->ne[t->ndim - 2], N = t->ne[t->ndim - 1], K = a->ne[a->ndim - 1];
    nn_tensor ba = *a, bb = *b;
    ba.ndim -= 2;
    bb.ndim -= 2;
    int nb = t->ndim - 2;
    int64_t sa[NN_MAX_DIMS], sb[NN_MAX_DIMS], idx[NN_MAX_DIMS] = {0}, batches = 1;
    nn_broadcast_strides(&ba, nb, t->ne, sa);
    nn_broadcast_strides(&bb, nb, t->ne, sb);
    for (int d = 0; d < nb; d++)
        batches *= t->ne[d];
    for (int64_t bi = 0; bi < batches; bi++) {
        int64_t oa = 0, ob = 0;
        for (int d = 0; d < nb; d++) {
            oa += idx[d] * sa[d];
            ob += idx[d] * sb[d];
        }
        nn_matmul_block(a->data + oa * M * K, b->data + ob * K * N, t->data + bi * M * N, M, N, K);
        for (int d = nb - 1; d >= 0; d--) {
            if (++idx[d] < t->ne[d])
                break;
            idx[d] = 0;
        }
    }
}

static nn_tensor *nn_unbroadcast_mm(nn_graph *g, nn_tensor *grad, const nn_tensor *src)
{
    if (!grad || nn_same_shape(grad, src))
        return grad;
    return nn_sum_to(g, grad, src->ndim, src->ne);
}

/* x with its last two dims swapped: x's source when x is itself such a transpose (the
 * backward reads what the forward transposed, not a transpose of its transpose: an operand
 * transposed for a matmul, as the head's tied embedding, is then read by matmuls only, and
 * the lowering folds it into them instead of keeping a transposed copy for the backward, as
 * PyTorch's weight.t() is a view), else a new transpose. */
static nn_tensor *nn_transposed(nn_graph *g, nn_tensor *x)
{
    return nn_is_transpose(x) ? x->src[0] : nn_transpose(g, x);
}

void nn_bwd_matmul(nn_graph *g, nn_tensor *t, nn_tensor *dy)
{
    nn_tensor *a = t->src[0], *b = t->src[1];
    if (a->requires_grad)
        nn_grad_acc(g, a, nn_unbroadcast_mm(g, nn_matmul(g, dy, nn_transposed(g, b)), a));
    if (b->requires_grad)
        nn_grad_acc(g, b, nn_unbroadcast_mm(g, nn_matmul(g, nn_transposed(g, a), dy), b));
}

int64_t nn_flops_matmul(const nn_tensor *t)
{
    const nn_tensor *a = t->src[0];
    return 2 * nn_numel(t) * a->ne[a->ndim - 1];
}

/* ---- conv2d: ip[0] stride, ip[1] pad, ip[2] dilation, ip[3] groups ---- */

static int64_t nn_conv_out(int64_t in, int64_t k, const int64_t *ip)
{
    return (in + 2 * ip[1] - ip[2] * (k - 1) - 1) / ip[0] + 1;
}

np_status nn_infer_conv2d(nn_tensor *t, np_err *err)
{
    const nn_tensor *x = t->src[0], *w = t->src[1];
    if (nn_infer_same_dtype(t, 2, err) != NP_OK)
        return err->status;
    if (x->ndim != 4 || w->ndim != 4)
        return nn_infer_fail(t, err, NP_ERR_INCONSISTENT,
                             "expects x [N,C,H,W] and w [O,C/groups,KH,KW]");
    int64_t G = t->ip[3];
    if (t->ip[0] < 1 || t->ip[1] < 0 || t->ip[2] < 1 || G < 1)
        return nn_infer_fail(t, err, NP_ERR_RANGE,
                             "stride %lld, pad %lld, dilation %lld, groups %lld out of range",
                             (long long)t->ip[0], (long long)t->ip[1], (long long)t->ip[2],
                             (long long)G);
    if (x->ne[1] % G || w->ne[0] % G || w->ne[1] * G != x->ne[1])
        return nn_infer_fail(t, err, NP_ERR_INCONSISTENT,
                             "input channels %lld do not match weight channels %lld x %lld groups",
                             (long long)x->ne[1], (long long)w->ne[1], (long long)G);
    int64_t oh = nn_conv_out(x->ne[2], w->ne[2], t->ip), ow = nn_conv_out(x->ne[3], w->ne[3], t->ip);
    if (oh < 1 || ow < 1)
        return nn_infer_fail(t, err, NP_ERR_INCONSISTENT, "kernel larger than the padded input");
    nn_set_shape(t, 4, (int64_t[]){x->ne[0], w->ne[0], oh, ow});
    t->dtype = x->dtype;
    return NP_OK;
}

/* The one loop nest of conv2d and its two gradients: mode 0 y += x*w, 1 dx += dy*w,
 * 2 dw += dy*x. x/w/y are the forward tensors' storage (one of them is the output). */
static void nn_conv_loop(int mode, float *x, float *w, float *y, const int64_t *xs,
                         const int64_t *ws, const int64_t *ys, const int64_t *ip)
{
    int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3], O = ys[1], OH = ys[2], OW = ys[3];
    int64_t KH = ws[2], KW = ws[3], G = ip[3], cg = C / G, og = O / G;
    int64_t s = ip[0], p = ip[1], d = ip[2];
    for (int64_t n = 0; n < N; n++)
        for (int64_t o = 0; o < O; o++) {
            int64_t grp = o / og;
            for (int64_t oh = 0; oh < OH; oh++)
                for (int64_t ow = 0; ow < OW; ow++) {
                    int64_t yi = ((n * O + o) * OH + oh) * OW + ow;
                    double acc = 0.0;
                    for (int64_t c = 0; c < cg; c++)
                        for (int64_t kh = 0; kh < KH; kh++) {
                            int64_t ih = oh * s - p + kh * d;
                            if (ih < 0 || ih >= H)
                                continue;
                            for (int64_t kw = 0; kw < KW; kw++) {
                                int64_t iw = ow * s - p + kw * d;
                                if (iw < 0 || iw >= W)
                                    continue;
                                int64_t xi = ((n * C + grp * cg + c) * H + ih) * W + iw;
                                int64_t wi = ((o * cg + c) * KH + kh) * KW + kw;
                                if (mode == 0)
                                    acc += (double)x[xi] * w[wi];
                                else if (mode == 1)
                                    x[xi] += y[yi] * w[wi];
                                else
                                    w[wi] += y[yi] * x[xi];
                            }
                        }
                    if (mode == 0)
                        y[yi] = (float)acc;
                }
        }
}

void nn_fwd_conv2d(nn_tensor *t)
{
    nn_conv_loop(0, t->src[0]->data, t->src[1]->data, t->data, t->src[0]->ne, t->src[1]->ne,
                 t->ne, t->ip);
}

void nn_bwd_conv2d(nn_graph *g, nn_tensor *t, nn_tensor *dy)
{
    nn_tensor *x = t->src[0], *w = t->src[1];
    int64_t ip[NN_MAX_IPARAMS];
    memcpy(ip, t->ip, sizeof ip);
    if (x->requires_grad) {
        ip[4] = x->ne[2];
        ip[5] = x->ne[3];
        nn_grad_acc(g, x, nn_node(g, NN_OP_CONV2D_GRAD_INPUT, 2, (nn_tensor *[]){dy, w}, ip, NULL));
    }
    if (w->requires_grad) {
        ip[4] = w->ne[2];
        ip[5] = w->ne[3];
        nn_grad_acc(g, w, nn_node(g, NN_OP_CONV2D_GRAD_WEIGHT, 2, (nn_tensor *[]){x, dy}, ip, NULL));
    }
}

int64_t nn_flops_conv2d(const nn_tensor *t)
{
    const nn_tensor *w = t->src[1];
    return 2 * nn_numel(t) * w->ne[1] * w->ne[2] * w->ne[3];
}

/* CONV2D_GRAD_INPUT (dy, w), ip[4..5] = H, W of x. */
np_status nn_infer_conv2d_grad_input(nn_tensor *t, np_err *err)
{
    const nn_tensor *dy = t->src[0], *w = t->src[1];
    (void)err;
    nn_set_shape(t, 4, (int64_t[]){dy->ne[0], w->ne[1] * t->ip[3], t->ip[4], t->ip[5]});
    t->dtype = dy->dtype;
    return NP_OK;
}

void nn_fwd_conv2d_grad_input(nn_tensor *t)
{
    memset(t->data, 0, (size_t)nn_numel(t) * sizeof(float));
    nn_conv_loop(1, t->data, t->src[1]->data, t->src[0]->data, t->ne, t->src[1]->ne,
                 t->src[0]->ne, t->ip);
}

int64_t nn_flops_conv2d_grad_input(const nn_tensor *t)
{
    const nn_tensor *w = t->src[1];
    return 2 * nn_numel(t->src[0]) * w->ne[1] * w->ne[2] * w->ne[3];
}

/* CONV2D_GRAD_WEIGHT (x, dy), ip[4..5] = KH, KW. */
np_status nn_infer_conv2d_grad_weight(nn_tensor *t, np_err *err)
{
    const nn_tensor *x = t->src[0], *dy = t->src[1];
    (void)err;
    nn_set_shape(t, 4, (int64_t[]){dy->ne[1], x->ne[1] / t->ip[3], t->ip[4], t->ip[5]});
    t->dtype = dy->dtype;
    return NP_OK;
}

void nn_fwd_conv2d_grad_weight(nn_tensor *t)
{
    memset(t->data, 0, (size_t)nn_numel(t) * sizeof(float));
    nn_conv_loop(2, t->src[0]->data, t->data, t->src[1]->data, t->src[0]->ne, t->ne,
                 t->src[1]->ne, t->ip);
}

int64_t nn_flops_conv2d_grad_weight(const nn_tensor *t)
{
    return 2 * nn_numel(t->src[1]) * nn_numel(t) / t->ne[0];
}

/* ---- pooling: ip[0] kernel, ip[1] stride, ip[2] pad; grads carry ip[4..5] = H, W ---- */

np_status nn_infer_pool(nn_tensor *t, np_err *err)
{
    const nn_tensor *x = t->src[0];
    if (x->ndim != 4)
        return nn_infer_fail(t, err, NP_ERR_INCONSISTENT, "expects x [N,C,H,W]");
    int64_t k = t->ip[0], s = t->ip[1], p = t->ip[2];
    if (k < 1 || s < 1 || p < 0 || 2 * p > k)
        return nn_infer_fail(t, err, NP_ERR_RANGE, "kernel %lld, stride %lld, pad %lld out of range",
                             (long long)k, (long long)s, (long long)p);
    int64_t oh = (x->ne[2] + 2 * p - k) / s + 1, ow = (x->ne[3] + 2 * p - k) / s + 1;
    if (oh < 1 || ow < 1)
        return nn_infer_fail(t, err, NP_ERR_INCONSISTENT, "kernel larger than the padded input");
    nn_set_shape(t, 4, (int64_t[]){x->ne[0], x->ne[1], oh, ow});
    t->dtype = x->dtype;
    return NP_OK;
}

/* mode 0 maxpool, 1 avgpool, 2 maxpool grad (x, dy -> dx), 3 avgpool grad (dy -> dx). */
static void nn_pool_loop(int mode, const float *x, float *dx, const float *dy, float *y,
                         const int64_t *xs, const int64_t *ys, const int64_t *ip)
{
    int64_t NC = xs[0] * xs[1], H = xs[2], W = xs[3], OH = ys[2], OW = ys[3];
    int64_t k = ip[0], s = ip[1], p = ip[2];
    for (int64_t nc = 0; nc < NC; nc++)
        for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++) {
                int64_t yi = (nc * OH + oh) * OW + ow, best = -1;
                double acc = mode == 0 || mode == 2 ? -INFINITY : 0.0;
                for (int64_t kh = 0; kh < k; kh++) {
                    int64_t ih = oh * s - p + kh;
                    if (ih < 0 || ih >= H)
                        continue;
                    for (int64_t kw = 0; kw < k; kw++) {
                        int64_t iw = ow * s - p + kw;
                        if (iw < 0 || iw >= W)
                            continue;
                        int64_t xi = (nc * H + ih) * W + iw;
                        if (mode == 0 || mode == 2) {
                            if (x[xi] > acc) {
                                acc = x[xi];
                                best = xi;
                            }
                        } else if (mode == 1) {
                            acc += x[xi];
                        } else {
                            dx[xi] += dy[yi] / (float)(k * k);
                        }
                    }
                }
                if (mode == 0)
                    y[yi] = (float)acc;
                else if (mode == 1)
                    y[yi] = (float)(acc / (double)(k * k));
                else if (mode == 2 && best >= 0)
                    dx[best] += dy[yi];
            }
}

void nn_fwd_pool(nn_tensor *t)
{
    nn_pool_loop(t->op == NN_OP_MAXPOOL2D ? 0 : 1, t->src[0]->data, NULL, NULL, t->data,
                 t->src[0]->ne, t->ne, t->ip);
}

void nn_bwd_pool(nn_graph *g, nn_tensor *t, nn_tensor *dy)
{
    nn_tensor *x = t->src[0];
    int64_t ip[NN_MAX_IPARAMS];
    memcpy(ip, t->ip, sizeof ip);
    ip[4] = x->ne[2];
    ip[5] = x->ne[3];
    if (t->op == NN_OP_MAXPOOL2D)
        nn_grad_acc(g, x, nn_node(g, NN_OP_MAXPOOL2D_GRAD, 2, (nn_tensor *[]){x, dy}, ip, NULL));
    else
        nn_grad_acc(g, x, nn_node1(g, NN_OP_AVGPOOL2D_GRAD, dy, ip, NULL));
}

int64_t nn_flops_pool(const nn_tensor *t)
{
    return nn_numel(t) * t->ip[0] * t->ip[0];
}

np_status nn_infer_pool_grad(nn_tensor *t, np_err *err)
{
    (void)err;
    const nn_tensor *dy = t->src[t->n_src - 1];
    nn_set_shape(t, 4, (int64_t[]){dy->ne[0], dy->ne[1], t->ip[4], t->ip[5]});
    t->dtype = dy->dtype;
    return NP_OK;
}

void nn_fwd_pool_grad(nn_tensor *t)
{
    const nn_tensor *dy = t->src[t->n_src - 1];
    memset(t->data, 0, (size_t)nn_numel(t) * sizeof(float));
    nn_pool_loop(t->op == NN_OP_MAXPOOL2D_GRAD ? 2 : 3,
                 t->op == NN_OP_MAXPOOL2D_GRAD ? t->src[0]->data : NULL, t->data, dy->data,
                 NULL, t->ne, dy->ne, t->ip);
}

int64_t nn_flops_pool_grad(const nn_tensor *t)
{
    return nn_numel(t->src[t->n_src - 1]) * t->ip[0] * t->ip[0];
}
