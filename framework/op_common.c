/* op_common.c — helpers shared by shape inference and the reference kernels: error text,
 * axes, broadcasting. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "nn_impl.h"

np_status nn_infer_fail(const nn_tensor *t, np_err *err, np_status s, const char *fmt, ...)
{
    char what[256], srcs[256] = "";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    size_t k = 0;
    for (int i = 0; i < t->n_src && k < sizeof srcs; i++) {
        char sh[96];
        k += (size_t)snprintf(srcs + k, sizeof srcs - k, "%s%s %s %s", i ? ", " : "",
                              t->src[i]->name, nn_shape_str(t->src[i], sh, sizeof sh),
                              nn_dtype_name(t->src[i]->dtype));
    }
    return np_err_set(err, s, "%s: %s (inputs: %s)", nn_op_name(t->op), what, srcs);
}

np_status nn_infer_same_dtype(const nn_tensor *t, int n, np_err *err)
{
    for (int i = 1; i < n && i < t->n_src; i++)
        if (t->src[i]->dtype != t->src[0]->dtype)
            return nn_infer_fail(t, err, NP_ERR_TYPE, "dtypes differ: input 0 is %s, input %d is %s",
                                 nn_dtype_name(t->src[0]->dtype), i,
                                 nn_dtype_name(t->src[i]->dtype));
    return NP_OK;
}

int nn_axis(int axis, int ndim)
{
    if (axis < 0)
        axis += ndim;
    return axis >= 0 && axis < ndim ? axis : -1;
}

void nn_set_shape(nn_tensor *t, int ndim, const int64_t *ne)
{
    t->ndim = ndim;
    for (int i = 0; i < NN_MAX_DIMS; i++)
        t->ne[i] = i < ndim ? ne[i] : 1;
}

bool nn_broadcast_shape(const nn_tensor *a, const nn_tensor *b, int *ndim, int64_t *ne)
{
    int n = a->ndim > b->ndim ? a->ndim : b->ndim;
    for (int d = 0; d < n; d++) {
        int ia = d - (n - a->ndim), ib = d - (n - b->ndim);
        int64_t da = ia >= 0 ? a->ne[ia] : 1, db = ib >= 0 ? b->ne[ib] : 1;
        if (da != db && da != 1 && db != 1)
            return false;
        ne[d] = da == 1 ? db : da;
    }
    *ndim = n;
    return true;
}

void nn_broadcast_strides(const nn_tensor *src, int ndim, const int64_t *ne, int64_t *st)
{
    int64_t stride = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        int j = d - (ndim - src->ndim);
        if (j < 0 || (src->ne[j] == 1 && ne[d] != 1) || src->ne[j] == 1)
            st[d] = 0;
        else
            st[d] = stride;
        if (j >= 0)
            stride *= src->ne[j];
    }
}
