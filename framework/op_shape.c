/* op_shape.c — reshape, permute, concat, slice, pad (data movement), embedding and
 * cross-entropy with their gradient ops. */
#include <math.h>
#include <string.h>

#include "op_kernels.h"

/* ---- reshape: ip[0..5] shape, ip[6] ndim ---- */

np_status nn_infer_reshape(nn_tensor *t, np_err *err)
{
    int nd = (int)t->ip[6];
    int64_t n = 1;
    for (int d = 0; d < nd; d++)
        n *= t->ip[d];
    if (n != nn_numel(t->src[0]))
        return nn_infer_fail(t, err, NP_ERR_INCONSISTENT,
                             "cannot reshape %lld elements into %lld", (long long)nn_numel(t->src[0]),
                             (long long)n);
    nn_set_shape(t, nd, t->ip);
    t->dtype = t->src[0]->dtype;
    return NP_OK;
}

void nn_fwd_copy(nn_tensor *t)
{
    memcpy(t->data, t->src[0]->data, (size_t)nn_numel(t) * sizeof(float));
}

void nn_bwd_reshape(nn_graph *g, nn_tensor *t, nn_tensor *dy)
{
    nn_grad_acc(g, t->src[0], nn_reshape(g, dy, t->src[0]->ndim, t->src[0]->ne));
}

int64_t nn_flops_none(const nn_tensor *t)
{
    (void)t;
    return 0;
}

/* ---- permute: ip[d] = the input axis that becomes output axis d ---- */

np_status nn_infer_permute(nn_tensor *t, np_err *err)
{
    const nn_tensor *x = t->src[0];
    bool seen[NN_MAX_DIMS] = {false};
    int64_t ne[NN_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++) {
        int64_t a = t->ip[d];
        if (a < 0 || a >= x->ndim || seen[a])
            return nn_infer_fail(t, err, NP_ERR_RANGE, "axes are not a permutation of 0..%d",
                                 x->ndim - 1);
        seen[a] = true;
        ne[d] = x->ne[a];
    }
    nn_set_shape(t, x->ndim, ne);
    t->dtype = x->dtype;
    return NP_OK;
}

void nn_fwd_permute(nn_tensor *t)
{
    const nn_tensor *x = t->src[0];
    int nd = x->ndim;
    int64_t xs[NN_MAX_DIMS], st[NN_MAX_DIMS], idx[NN_MAX_DIMS] = {0}, off = 0;
    int64_t s = 1;
    for (int d = nd - 1; d >= 0; d--) {
        xs[d] = s;
        s *= x->ne[d];
    }
    for (int d = 0; d < nd; d++)
        st[d] = xs[t->ip[d]];
    int64_t n = nn_numel(t);
    for (int64_t i = 0; i < n; i++) {
        t->data[i] = x->data[off];
        for (int d = nd - 1; d >= 0; d--) {
            idx[d]++;
            off += st[d];
            if (idx[d] < t->ne[d])
                break;
            off -= st[d] * t->ne[d];
            idx[d] = 0;
        }
    }
}

void nn_bwd_permute(nn_graph *g, nn_tensor *t, nn_tensor *dy)
{
    int inv[NN_MAX_DIMS];
    for (int d = 0; d < t->ndim; d++)
        inv[t->ip[d]] = d;
    nn_grad_acc(g, t->src[0], nn_permute(g, dy, inv));
}

int64_t nn_flops_move(const nn_tensor *t)
{
    (void)t;
    return 0;
}

/* ---- concat (ip[0] axis), slice (ip[0] axis, ip[1] start, ip[2] end), pad (ip[0] axis,
 * ip[1] before, ip[2] after) ---- */

np_status nn_infer_concat(nn_tensor *t, np_err *err)
{
    const nn_tensor *x = t->src[0];
    int axis = (int)t->ip[0];
    if (nn_infer_same_dtype(t, t->n_src, err) != NP_OK)
        return err->status;
    if (axis < 0 || axis >= x->ndim)
        return nn_infer_fail(t, err, NP_ERR_RANGE, "axis %d out of range", axis);
    int64_t ne[NN_MAX_DIMS];
    memcpy(ne, x->ne, sizeof ne);
    for (int i = 1; i < t->n_src; i++) {
        const nn_tensor *s = t->src[i];
        bool ok = s->ndim == x->ndim;
        for (int d = 0; ok && d < x->ndim; d++)
            ok = d == axis || s->ne[d] == x->ne[d];
        if (!ok)
            return nn_infer_fail(t, err, NP_ERR_INCONSISTENT,
                                 "input %d differs from input 0 outside axis %d", i, axis);
        ne[axis] += s->ne[axis];
    }
    nn_set_shape(t, x->ndim, ne);
    t->dtype = x->dtype;
    return NP_OK;
}

static int64_t nn_outer(const nn_tensor *t, int axis)
{
    int64_t o = 1;
    for (int d = 0; d < axis; d++)
        o *= t->ne[d];
    return o;
}

static int64_t nn_inner(const nn_tensor *t, int axis)
{
    int64_t o = 1;
    for (int d = axis + 1; d < t->ndim; d++)
        o *= t->ne[d];
    return o;
}

void nn_fwd_concat(nn_tensor *t)
{
    int axis = (int)t->ip[0];
    int64_t outer = nn_outer(t, axis), inner = nn_inner(t, axis), row = t->ne[axis] * inner;
    int64_t at = 0;
    for (int i = 0; i < t->n_src; i++) {
        const nn_tensor *s = t->src[i];
        int64_t chunk = s->ne[axis] * inner;
        for (int64_t o = 0; o < outer; o++)
            memcpy(t->data + o * row + at, s->data + o * chunk, (size_t)chunk * sizeof(float));
        at += chunk;
    }
}

void nn_bwd_concat(nn_graph *g, nn_tensor *t, nn_tensor *dy)
{
    int axis = (int)t->ip[0];
    int64_t at = 0;
    for (int i = 0; i < t->n_src; i++) {
        int64_t len = t->src[i]->ne[axis];
        if (t->src[i]->requires_grad)
            nn_grad_acc(g, t->src[i], nn_slice(g, dy, axis, at, at + len));
        at += len;
    }
}

np_status nn_infer_slice_pad(nn_tensor *t, np_err *err)
{
    const nn_tensor *x = t->src[0];
    int axis = (int)t->ip[0];
    if (axis < 0 || axis >= x->ndim)
        return nn_infer_fail(t, err, NP_ERR_RANGE, "axis %d out of range", axis);
    int64_t ne[NN_MAX_DIMS];
    memcpy(ne, x->ne, sizeof ne);
    if (t->op == NN_OP_SLICE) {
        if (t->ip[1] < 0 || t->ip[2] > x->ne[axis] || t->ip[1] >= t->ip[2])
            return nn_infer_fail(t, err, NP_ERR_RANGE, "slice [%lld, %lld) of a dim of %lld",
                                 (long long)t->ip[1], (long long)t->ip[2], (long long)x->ne[axis]);
        ne[axis] = t->ip[2] - t->ip[1];
    } else {
        if (t->ip[1] < 0 || t->ip[2] < 0)
            return nn_infer_fail(t, err, NP_ERR_RANGE, "negative padding");
        ne[axis] += t->ip[1] + t->ip[2];
    }
    nn_set_shape(t, x->ndim, ne);
    t->dtype = x->dtype;
    return NP_OK;
}

void nn_fwd_slice_pad(nn_tensor *t)
{
    const nn_tensor *x = t->src[0];
    int axis = (int)t->ip[0];
    int64_t outer = nn_outer(x, axis), inner = nn_inner(x, axis);
    int64_t xrow = x->ne[axis] * inner, yrow = t->ne[axis] * inner;
    if (t->op == NN_OP_PAD)
        memset(t->data, 0, (size_t)nn_numel(t) * sizeof(float));
    for (int64_t o = 0; o < outer; o++) {
        if (t->op == NN_OP_SLICE)
            memcpy(t->data + o * yrow, x->data + o * xrow + t->ip[1] * inner,
                   (size_t)yrow * sizeof(float));
        else
            memcpy(t->data + o * yrow + t->ip[1] * inner, x->data + o * xrow,
                   (size_t)xrow * sizeof(float));
    }
}

void nn_bwd_slice_pad(nn_graph *g, nn_tensor *t, nn_tensor *dy)
{
    const nn_tensor *x = t->src[0];
    int axis = (int)t->ip[0];
    if (t->op == NN_OP_SLICE)
        nn_grad_acc(g, t->src[0], nn_pad(g, dy, axis, t->ip[1], x->ne[axis] - t->ip[2]));
    else
        nn_grad_acc(g, t->src[0], nn_slice(g, dy, axis, t->ip[1], t->ip[1] + x->ne[axis]));
}

/* ---- embedding (table [V, D], idx) and its gradient (idx, dy) with ip[0] = V ---- */

static bool nn_is_int(nn_dtype t)
{
    return t == NN_I32 || t == NN_I8;
}

np_status nn_infer_embedding(nn_tensor *t, np_err *err)
{
    const nn_tensor *tab = t->src[0], *idx = t->src[1];
    if (tab->ndim != 2)
        return nn_infer_fail(t, err, NP_ERR_INCONSISTENT, "table must be [V, D]");
    if (!nn_is_int(idx->dtype))
        return nn_infer_fail(t, err, NP_ERR_TYPE, "indices must be i32 or i8, not %s",
                             nn_dtype_name(idx->dtype));
    if (t->n_src > 2 && (!nn_is_int(t->src[2]->dtype) || nn_numel(t->src[2]) != 1))
        return nn_infer_fail(t, err, NP_ERR_TYPE, "the row offset must be an integer scalar");
    if (idx->ndim + 1 > NN_MAX_DIMS)
        return nn_infer_fail(t, err, NP_ERR_RANGE, "too many dims");
    int64_t ne[NN_MAX_DIMS];
    memcpy(ne, idx->ne, sizeof ne);
    ne[idx->ndim] = tab->ne[1];
    nn_set_shape(t, idx->ndim + 1, ne);
    t->dtype = tab->dtype;
    return NP_OK;
}

/* Row offset of a vocabulary shard (src[2], nn_embedding_shard), else 0. */
static int64_t nn_row_offset(const nn_tensor *t, int src)
{
    return t->n_src > src ? (int64_t)t->src[src]->data[0] : 0;
}

void nn_fwd_embedding(nn_tensor *t)
{
    const nn_tensor *tab = t->src[0], *idx = t->src[1];
    int64_t D = tab->ne[1], V = tab->ne[0], n = nn_numel(idx), off = nn_row_offset(t, 2);
    for (int64_t i = 0; i < n; i++) {
        int64_t r = (int64_t)idx->data[i] - off;
        if (r >= 0 && r < V)
            memcpy(t->data + i * D, tab->data + r * D, (size_t)D * sizeof(float));
        else
            memset(t->data + i * D, 0, (size_t)D * sizeof(float));
    }
}

void nn_bwd_embedding(nn_graph *g, nn_tensor *t, nn_tensor *dy)
{
    int64_t ip[NN_MAX_IPARAMS] = {t->src[0]->ne[0]};
    nn_tensor *srcs[3] = {t->src[1], dy, t->n_src > 2 ? t->src[2] : NULL};
    nn_grad_acc(g, t->src[0], nn_node(g, NN_OP_EMBEDDING_GRAD, t->n_src, srcs, ip, NULL));
}

np_status nn_infer_embedding_grad(nn_tensor *t, np_err *err)
{
    (void)err;
    const nn_tensor *dy = t->src[1];
    nn_set_shape(t, 2, (int64_t[]){t->ip[0], dy->ne[dy->ndim - 1]});
    t->dtype = dy->dtype;
    return NP_OK;
}

void nn_fwd_embedding_grad(nn_tensor *t)
{
    const nn_tensor *idx = t->src[0], *dy = t->src[1];
    int64_t D = t->ne[1], V = t->ne[0], n = nn_numel(idx), off = nn_row_offset(t, 2);
    memset(t->data, 0, (size_t)nn_numel(t) * sizeof(float));
    for (int64_t i = 0; i < n; i++) {
        int64_t r = (int64_t)idx->data[i] - off;
        if (r >= 0 && r < V)
            for (int64_t k = 0; k < D; k++)
                t->data[r * D + k] += dy->data[i * D + k];
    }
}

/* ---- cross-entropy (logits [..., C], labels [...]) -> scalar mean over rows ---- */

np_status nn_infer_cross_entropy(nn_tensor *t, np_err *err)
{
    const nn_tensor *x = t->src[0], *lab = t->src[1];
    if (!nn_is_int(lab->dtype))
        return nn_infer_fail(t, err, NP_ERR_TYPE, "labels must be i32 or i8, not %s",
                             nn_dtype_name(lab->dtype));
    bool ok = x->ndim >= 1 && lab->ndim == x->ndim - 1;
    for (int d = 0; ok && d < lab->ndim; d++)
        ok = lab->ne[d] == x->ne[d];
    if (!ok)
        return nn_infer_fail(t, err, NP_ERR_INCONSISTENT,
                             "labels must have the logits' shape without the last dim");
    if (t->op == NN_OP_CROSS_ENTROPY) {
        nn_set_shape(t, 0, NULL);
    } else {
        if (nn_numel(t->src[2]) != 1)
            return nn_infer_fail(t, err, NP_ERR_INCONSISTENT, "dy must be a scalar");
        nn_set_shape(t, x->ndim, x->ne);
    }
    t->dtype = x->dtype;
    return NP_OK;
}

/* Shared by the loss and its gradient: row r's max and log-sum-exp. */
static double nn_row_lse(const float *x, int64_t C)
{
    double m = -INFINITY, s = 0.0;
    for (int64_t k = 0; k < C; k++)
        m = x[k] > m ? x[k] : m;
    for (int64_t k = 0; k < C; k++)
        s += exp(x[k] - m);
    return m + log(s);
}

void nn_fwd_cross_entropy(nn_tensor *t)
{
    const nn_tensor *x = t->src[0], *lab = t->src[1];
    int64_t C = x->ne[x->ndim - 1], rows = nn_numel(lab);
    double loss = 0.0;
    for (int64_t r = 0; r < rows; r++)
        loss += nn_row_lse(x->data + r * C, C) - x->data[r * C + (int64_t)lab->data[r]];
    t->data[0] = (float)(loss / (double)rows);
}

void nn_bwd_cross_entropy(nn_graph *g, nn_tensor *t, nn_tensor *dy)
{
    nn_grad_acc(g, t->src[0], nn_node(g, NN_OP_CROSS_ENTROPY_GRAD, 3,
                                      (nn_tensor *[]){t->src[0], t->src[1], dy}, NULL, NULL));
}

void nn_fwd_cross_entropy_grad(nn_tensor *t)
{
    const nn_tensor *x = t->src[0], *lab = t->src[1];
    int64_t C = x->ne[x->ndim - 1], rows = nn_numel(lab);
    double scale = t->src[2]->data[0] / (double)rows;
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x->data + r * C;
        double lse = nn_row_lse(xr, C);
        for (int64_t k = 0; k < C; k++)
            t->data[r * C + k] =
                (float)((exp(xr[k] - lse) - (k == (int64_t)lab->data[r] ? 1.0 : 0.0)) * scale);
    }
}

int64_t nn_flops_cross_entropy(const nn_tensor *t)
{
    return 5 * nn_numel(t->src[0]);
}
