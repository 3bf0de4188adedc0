/* op_elem.c — elementwise ops (with broadcasting), their gradient helpers, broadcast/sum_to
 * and the single-axis reductions: shape inference, reference kernels and backward rules. */
#include <math.h>
#include <string.h>

#include "op_kernels.h"
#include "philox.h"

/* ---- broadcasting loop ---- */

/* Walks the elements of out-shape (ndim, ne) in order; calls fn with the offsets into up to
 * three broadcast sources. */
typedef void (*nn_bcast_fn)(int64_t i, int64_t o0, int64_t o1, int64_t o2, void *ctx);

static void nn_bcast_walk(int ndim, const int64_t *ne, const int64_t (*st)[NN_MAX_DIMS], int n_st,
                          nn_bcast_fn fn, void *ctx)
{
    int64_t idx[NN_MAX_DIMS] = {0}, off[3] = {0, 0, 0}, total = 1;
    for (int d = 0; d < ndim; d++)
        total *= ne[d];
    for (int64_t i = 0; i < total; i++) {
        fn(i, off[0], off[1], off[2], ctx);
        for (int d = ndim - 1; d >= 0; d--) {
            idx[d]++;
            for (int s = 0; s < n_st; s++)
                off[s] += st[s][d];
            if (idx[d] < ne[d])
                break;
            for (int s = 0; s < n_st; s++)
                off[s] -= st[s][d] * ne[d];
            idx[d] = 0;
        }
    }
}

struct nn_bin_ctx {
    nn_op op;
    float *y;
    const float *a, *b;
};

static void nn_bin_one(int64_t i, int64_t oa, int64_t ob, int64_t o2, void *p)
{
    (void)o2;
    struct nn_bin_ctx *c = p;
    float a = c->a[oa], b = c->b[ob];
    switch (c->op) {
    case NN_OP_ADD: c->y[i] = a + b; break;
    case NN_OP_SUB: c->y[i] = a - b; break;
    case NN_OP_MUL: c->y[i] = a * b; break;
    default: c->y[i] = a / b; break;
    }
}

/* ---- binary ---- */

np_status nn_infer_binary(nn_tensor *t, np_err *err)
{
    if (nn_infer_same_dtype(t, 2, err) != NP_OK)
        return err->status;
    int64_t ne[NN_MAX_DIMS];
    int nd;
    if (!nn_broadcast_shape(t->src[0], t->src[1], &nd, ne))
        return nn_infer_fail(t, err, NP_ERR_INCONSISTENT, "shapes do not broadcast");
    nn_set_shape(t, nd, ne);
    t->dtype = t->src[0]->dtype;
    return NP_OK;
}

void nn_fwd_binary(nn_tensor *t)
{
    int64_t st[2][NN_MAX_DIMS];
    nn_broadcast_strides(t->src[0], t->ndim, t->ne, st[0]);
    nn_broadcast_strides(t->src[1], t->ndim, t->ne, st[1]);
    struct nn_bin_ctx c = {t->op, t->data, t->src[0]->data, t->src[1]->data};
    nn_bcast_walk(t->ndim, t->ne, (const int64_t(*)[NN_MAX_DIMS])st, 2, nn_bin_one, &c);
}

/* Gradient for a source of a broadcasting op: g summed down to src's shape. */
static nn_tensor *nn_unbroadcast(nn_graph *g, nn_tensor *grad, const nn_tensor *src)
{
    if (!grad || nn_same_shape(grad, src))
        return grad;
    return nn_sum_to(g, grad, src->ndim, src->ne);
}

void nn_bwd_binary(nn_graph *g, nn_tensor *t, nn_tensor *dy)
{
    nn_tensor *a = t->src[0], *b = t->src[1];
    switch (t->op) {
    case NN_OP_ADD:
        if (a->requires_grad) nn_grad_acc(g, a, nn_unbroadcast(g, dy, a));
        if (b->requires_grad) nn_grad_acc(g, b, nn_unbroadcast(g, dy, b));
        break;
    case NN_OP_SUB:
        if (a->requires_grad) nn_grad_acc(g, a, nn_unbroadcast(g, dy, a));
        if (b->requires_grad) nn_grad_acc(g, b, nn_unbroadcast(g, nn_scale(g, dy, -1.0), b));
        break;
    case NN_OP_MUL:
        if (a->requires_grad) nn_grad_acc(g, a, nn_unbroadcast(g, nn_mul(g, dy, b), a));
        if (b->requires_grad) nn_grad_acc(g, b, nn_unbroadcast(g, nn_mul(g, dy, a), b));
        break;
    default: /* y = a / b: da = dy / b, db = -dy * y / b */
        if (a->requires_grad) nn_grad_acc(g, a, nn_unbroadcast(g, nn_div(g, dy, b), a));
        if (b->requires_grad)
            nn_grad_acc(g, b, nn_unbroadcast(g, nn_scale(g, nn_mul(g, dy, nn_div(g, t, b)), -1.0), b));
        break;
    }
}

/* ---- unary ---- */

np_status nn_infer_unary(nn_tensor *t, np_err *err)
{
    (void)err;
    nn_set_shape(t, t->src[0]->ndim, t->src[0]->ne);
    t->dtype = t->op == NN_OP_CAST ? (nn_dtype)t->ip[0] : t->src[0]->dtype;
    return NP_OK;
}

#define NN_GELU_C 0.7978845608028654 /* sqrt(2 / pi) */

static double nn_gelu_f(double x)
{
    return 0.5 * x * (1.0 + tanh(NN_GELU_C * (x + 0.044715 * x * x * x)));
}

static double nn_gelu_df(double x)
{
    double u = NN_GELU_C * (x + 0.044715 * x * x * x), th = tanh(u);
    return 0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * NN_GELU_C * (1.0 + 3 * 0.044715 * x * x);
}

static double nn_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }

void nn_fwd_unary(nn_tensor *t)
{
    const float *x = t->src[0]->data;
    float *y = t->data;
    int64_t n = nn_numel(t);
    switch (t->op) {
    case NN_OP_SCALE:
        for (int64_t i = 0; i < n; i++) y[i] = (float)(t->fp[0] * x[i]);
        break;
    case NN_OP_RELU:
        for (int64_t i = 0; i < n; i++) {
            float v = x[i] > 0 ? x[i] : 0.0f;
            y[i] = t->fp[0] > 0 && v > t->fp[0] ? (float)t->fp[0] : v;
        }
        break;
    case NN_OP_GELU:
        for (int64_t i = 0; i < n; i++) y[i] = (float)nn_gelu_f(x[i]);
        break;
    case NN_OP_SILU:
        for (int64_t i = 0; i < n; i++) y[i] = (float)(x[i] * nn_sigmoid(x[i]));
        break;
    case NN_OP_TANH:
        for (int64_t i = 0; i < n; i++) y[i] = (float)tanh(x[i]);
        break;
    case NN_OP_EXP:
        for (int64_t i = 0; i < n; i++) y[i] = (float)exp(x[i]);
        break;
    case NN_OP_LOG:
        for (int64_t i = 0; i < n; i++) y[i] = (float)log(x[i]);
        break;
    case NN_OP_CAST:
        for (int64_t i = 0; i < n; i++) y[i] = x[i];
        break;
    case NN_OP_DROPOUT: {
        /* element i is dropped when the counter-based uniform of (seed, i) is below p (as
         * fp32): a pure function of the element's index, so a kernel drawing its tiles in any
         * order (vpu.rand) makes the same mask */
        uint64_t seed = (uint64_t)t->ip[0];
        float p = (float)t->fp[0];
        double keep = 1.0 / (1.0 - t->fp[0]);
        for (int64_t i = 0; i < n; i++)
            y[i] = np_philox_uniform24(seed, (uint64_t)i) < p ? 0.0f : (float)(x[i] * keep);
        break;
    }
    default: { /* CAUSAL_MASK over the last two dims */
        int64_t rows = t->ndim >= 2 ? t->ne[t->ndim - 2] : 1, cols = t->ne[t->ndim - 1];
        for (int64_t i = 0; i < n; i++) {
            int64_t c = i % cols, r = (i / cols) % rows;
            y[i] = c > r ? (float)t->fp[0] : x[i];
        }
        break;
    }
    }
}

void nn_bwd_unary(nn_graph *g, nn_tensor *t, nn_tensor *dy)
{
    nn_tensor *x = t->src[0], *dx = NULL;
    switch (t->op) {
    case NN_OP_SCALE: dx = nn_scale(g, dy, t->fp[0]); break;
    case NN_OP_RELU: dx = nn_node(g, NN_OP_RELU_GRAD, 2, (nn_tensor *[]){x, dy}, NULL, t->fp); break;
    case NN_OP_GELU: dx = nn_node(g, NN_OP_GELU_GRAD, 2, (nn_tensor *[]){x, dy}, NULL, NULL); break;
    case NN_OP_SILU: dx = nn_node(g, NN_OP_SILU_GRAD, 2, (nn_tensor *[]){x, dy}, NULL, NULL); break;
    case NN_OP_TANH: dx = nn_node(g, NN_OP_TANH_GRAD, 2, (nn_tensor *[]){t, dy}, NULL, NULL); break;
    case NN_OP_EXP: dx = nn_mul(g, dy, t); break;
    case NN_OP_LOG: dx = nn_div(g, dy, x); break;
    case NN_OP_CAST: dx = nn_cast(g, dy, x->dtype); break;
    case NN_OP_DROPOUT: dx = nn_node(g, NN_OP_DROPOUT, 1, (nn_tensor *[]){dy}, t->ip, t->fp); break;
    default: dx = nn_causal_mask(g, dy, 0.0); break;
    }
    nn_grad_acc(g, x, dx);
}

/* ---- gradient helpers of the activations: (x or y, dy) -> dx ---- */

np_status nn_infer_act_grad(nn_tensor *t, np_err *err)
{
    if (nn_infer_same_dtype(t, 2, err) != NP_OK)
        return err->status;
    if (!nn_same_shape(t->src[0], t->src[1]))
        return nn_infer_fail(t, err, NP_ERR_INCONSISTENT, "shapes differ");
    nn_set_shape(t, t->src[1]->ndim, t->src[1]->ne);
    t->dtype = t->src[1]->dtype;
    return NP_OK;
}

void nn_fwd_act_grad(nn_tensor *t)
{
    const float *x = t->src[0]->data, *dy = t->src[1]->data;
    float *dx = t->data;
    int64_t n = nn_numel(t);
    for (int64_t i = 0; i < n; i++) {
        double v = x[i], d;
        switch (t->op) {
        case NN_OP_RELU_GRAD: d = v > 0 && (t->fp[0] <= 0 || v < t->fp[0]) ? 1.0 : 0.0; break;
        case NN_OP_GELU_GRAD: d = nn_gelu_df(v); break;
        case NN_OP_SILU_GRAD: {
            double s = nn_sigmoid(v);
            d = s * (1.0 + v * (1.0 - s));
            break;
        }
        default: d = 1.0 - v * v; break; /* TANH_GRAD gets y */
        }
        dx[i] = (float)(d * dy[i]);
    }
}

/* ---- broadcast_to / sum_to: ip[0..5] target shape, ip[6] its ndim ---- */

np_status nn_infer_bcast(nn_tensor *t, np_err *err)
{
    nn_tensor target = {0};
    target.ndim = (int)t->ip[6];
    for (int i = 0; i < target.ndim; i++)
        target.ne[i] = t->ip[i];
    const nn_tensor *big = t->op == NN_OP_BROADCAST_TO ? &target : t->src[0];
    const nn_tensor *small = t->op == NN_OP_BROADCAST_TO ? t->src[0] : &target;
    int64_t ne[NN_MAX_DIMS];
    int nd;
    char sh[96];
    if (!nn_broadcast_shape(big, small, &nd, ne) || nd != big->ndim ||
        memcmp(ne, big->ne, sizeof(int64_t) * (size_t)nd) != 0)
        return nn_infer_fail(t, err, NP_ERR_INCONSISTENT, "%s does not broadcast to %s",
                             nn_shape_str(small, sh, sizeof sh),
                             nn_shape_str(big, (char[96]){0}, 96));
    nn_set_shape(t, target.ndim, target.ne);
    t->dtype = t->src[0]->dtype;
    return NP_OK;
}

struct nn_copy_ctx {
    float *y;
    const float *x;
    bool acc;
};

static void nn_bcast_one(int64_t i, int64_t ox, int64_t o1, int64_t o2, void *p)
{
    (void)o1, (void)o2;
    struct nn_copy_ctx *c = p;
    if (c->acc)
        c->y[ox] += c->x[i]; /* sum_to: i walks the big input, ox the small output */
    else
        c->y[i] = c->x[ox];
}

void nn_fwd_bcast(nn_tensor *t)
{
    int64_t st[1][NN_MAX_DIMS];
    const nn_tensor *x = t->src[0];
    if (t->op == NN_OP_BROADCAST_TO) {
        nn_broadcast_strides(x, t->ndim, t->ne, st[0]);
        struct nn_copy_ctx c = {t->data, x->data, false};
        nn_bcast_walk(t->ndim, t->ne, (const int64_t(*)[NN_MAX_DIMS])st, 1, nn_bcast_one, &c);
    } else {
        memset(t->data, 0, (size_t)nn_numel(t) * sizeof(float));
        nn_broadcast_strides(t, x->ndim, x->ne, st[0]);
        struct nn_copy_ctx c = {t->data, x->data, true};
        nn_bcast_walk(x->ndim, x->ne, (const int64_t(*)[NN_MAX_DIMS])st, 1, nn_bcast_one, &c);
    }
}

void nn_bwd_bcast(nn_graph *g, nn_tensor *t, nn_tensor *dy)
{
    const nn_tensor *x = t->src[0];
    nn_grad_acc(g, t->src[0], t->op == NN_OP_BROADCAST_TO ? nn_sum_to(g, dy, x->ndim, x->ne)
                                                           : nn_broadcast_to(g, dy, x->ndim, x->ne));
}

int64_t nn_flops_sum_to(const nn_tensor *t)
{
    return nn_numel(t->src[0]);
}

/* ---- reductions: ip[0] axis (normalized), ip[1] keepdim; reduce_sum ip[2]: of the squares ---- */

np_status nn_infer_reduce(nn_tensor *t, np_err *err)
{
    const nn_tensor *x = t->src[0];
    int axis = (int)t->ip[0];
    if (axis < 0 || axis >= x->ndim)
        return nn_infer_fail(t, err, NP_ERR_RANGE, "axis %d out of range", axis);
    int64_t ne[NN_MAX_DIMS];
    int nd = 0;
    for (int d = 0; d < x->ndim; d++) {
        if (d != axis)
            ne[nd++] = x->ne[d];
        else if (t->ip[1])
            ne[nd++] = 1;
    }
    nn_set_shape(t, nd, ne);
    t->dtype = x->dtype;
    return NP_OK;
}

/* outer x len x inner decomposition of x around axis. */
static void nn_reduce_dims(const nn_tensor *x, int axis, int64_t *outer, int64_t *len,
                           int64_t *inner)
{
    *outer = *inner = 1;
    for (int d = 0; d < axis; d++)
        *outer *= x->ne[d];
    *len = x->ne[axis];
    for (int d = axis + 1; d < x->ndim; d++)
        *inner *= x->ne[d];
}

void nn_fwd_reduce(nn_tensor *t)
{
    const nn_tensor *x = t->src[0];
    int64_t outer, len, inner;
    nn_reduce_dims(x, (int)t->ip[0], &outer, &len, &inner);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t in = 0; in < inner; in++) {
            const float *p = x->data + o * len * inner + in;
            double acc = t->op == NN_OP_REDUCE_MAX ? -INFINITY : 0.0;
            bool sq = t->op == NN_OP_REDUCE_SUM && t->ip[2];
            for (int64_t k = 0; k < len; k++) {
                double v = p[k * inner];
                if (sq)
                    v *= v;
                if (t->op == NN_OP_REDUCE_MAX)
                    acc = v > acc ? v : acc;
                else
                    acc += v;
            }
            if (t->op == NN_OP_REDUCE_MEAN)
                acc /= (double)len;
            t->data[o * inner + in] = (float)acc;
        }
}

void nn_bwd_reduce(nn_graph *g, nn_tensor *t, nn_tensor *dy)
{
    nn_tensor *x = t->src[0];
    if (t->op == NN_OP_REDUCE_MAX) {
        nn_grad_acc(g, x, nn_node(g, NN_OP_REDUCE_MAX_GRAD, 3, (nn_tensor *[]){x, t, dy}, t->ip,
                                  NULL));
        return;
    }
    int64_t ne[NN_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++)
        ne[d] = d == t->ip[0] ? 1 : x->ne[d];
    nn_tensor *r = nn_reshape(g, dy, x->ndim, ne);
    if (t->op == NN_OP_REDUCE_MEAN)
        r = nn_scale(g, r, 1.0 / (double)x->ne[t->ip[0]]);
    nn_tensor *dx = nn_broadcast_to(g, r, x->ndim, x->ne);
    if (t->op == NN_OP_REDUCE_SUM && t->ip[2]) /* d(x^2) = 2 x dx */
        dx = nn_scale(g, nn_mul(g, x, dx), 2.0);
    nn_grad_acc(g, x, dx);
}

int64_t nn_flops_reduce(const nn_tensor *t)
{
    int64_t n = nn_numel(t->src[0]);
    return t->op == NN_OP_REDUCE_SUM && t->ip[2] ? 2 * n : n;
}

/* REDUCE_MAX_GRAD (x, y, dy) -> dx: dy flows to the first maximal element. */
np_status nn_infer_reduce_max_grad(nn_tensor *t, np_err *err)
{
    (void)err;
    nn_set_shape(t, t->src[0]->ndim, t->src[0]->ne);
    t->dtype = t->src[2]->dtype;
    return NP_OK;
}

void nn_fwd_reduce_max_grad(nn_tensor *t)
{
    const nn_tensor *x = t->src[0];
    int64_t outer, len, inner;
    nn_reduce_dims(x, (int)t->ip[0], &outer, &len, &inner);
    memset(t->data, 0, (size_t)nn_numel(t) * sizeof(float));
    for (int64_t o = 0; o < outer; o++)
        for (int64_t in = 0; in < inner; in++) {
            const float *p = x->data + o * len * inner + in;
            int64_t best = 0;
            for (int64_t k = 1; k < len; k++)
                if (p[k * inner] > p[best * inner])
                    best = k;
            t->data[o * len * inner + best * inner + in] = t->src[2]->data[o * inner + in];
        }
}
