/* tensor_access.c — checked access to tensor values (see nn.h, "tensor values"). */
#include <math.h>
#include <string.h>

#include "nn_impl.h"

const float *nn_tensor_values(const nn_tensor *t)
{
    return t ? t->data : NULL;
}

np_status nn_tensor_read(const nn_tensor *t, float *out, size_t n, np_err *err)
{
    if (!t || !t->data)
        return np_err_set(err, NP_ERR_MISSING, "tensor %s has no values", t ? t->name : "(null)");
    int64_t numel = nn_numel(t);
    if ((int64_t)n != numel)
        return np_err_set(err, NP_ERR_RANGE, "tensor %s has %lld values, not %zu", t->name,
                          (long long)numel, n);
    memcpy(out, t->data, n * sizeof *out);
    return NP_OK;
}

/* v as a value of t's dtype: NP_ERR_TYPE for a fraction in an integer tensor. */
static np_status tensor_check_value(const nn_tensor *t, float v, np_err *err)
{
    if (t->dtype == NN_I32 && (v != floorf(v) || fabsf(v) > 2147483647.0f))
        return np_err_set(err, NP_ERR_TYPE, "tensor %s holds integers; %g is not one", t->name,
                          (double)v);
    return NP_OK;
}

np_status nn_tensor_write(nn_tensor *t, const float *v, size_t n, np_err *err)
{
    if (!t)
        return np_err_set(err, NP_ERR_MISSING, "no tensor");
    int64_t numel = nn_numel(t);
    if ((int64_t)n != numel)
        return np_err_set(err, NP_ERR_RANGE, "tensor %s has %lld values, not %zu", t->name,
                          (long long)numel, n);
    for (size_t i = 0; i < n; i++)
        if (tensor_check_value(t, v[i], err) != NP_OK)
            return err->status;
    if (!nn_tensor_set(t, v))
        return np_err_set(err, NP_ERR_NOMEM, "out of memory for tensor %s", t->name);
    return NP_OK;
}

/* The row-major offset of idx in t, or NP_ERR_RANGE. */
static np_status tensor_offset(const nn_tensor *t, const int64_t *idx, int64_t *off,
                               np_err *err)
{
    int64_t o = 0;
    for (int d = 0; d < t->ndim; d++) {
        if (idx[d] < 0 || idx[d] >= t->ne[d])
            return np_err_set(err, NP_ERR_RANGE, "index %lld of dimension %d is outside 0 .. "
                              "%lld of tensor %s", (long long)idx[d], d,
                              (long long)(t->ne[d] - 1), t->name);
        o = o * t->ne[d] + idx[d];
    }
    *off = o;
    return NP_OK;
}

np_status nn_tensor_get_at(const nn_tensor *t, const int64_t *idx, float *out, np_err *err)
{
    int64_t o;
    if (!t || !t->data)
        return np_err_set(err, NP_ERR_MISSING, "tensor %s has no values", t ? t->name : "(null)");
    if (tensor_offset(t, idx, &o, err) != NP_OK)
        return err->status;
    *out = t->data[o];
    return NP_OK;
}

np_status nn_tensor_set_at(nn_tensor *t, const int64_t *idx, float v, np_err *err)
{
    int64_t o;
    if (!t)
        return np_err_set(err, NP_ERR_MISSING, "no tensor");
    if (tensor_offset(t, idx, &o, err) != NP_OK || tensor_check_value(t, v, err) != NP_OK)
        return err->status;
    if (!t->data && !nn_tensor_alloc(t))
        return np_err_set(err, NP_ERR_NOMEM, "out of memory for tensor %s", t->name);
    t->data[o] = v;
    return NP_OK;
}
