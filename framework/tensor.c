/* tensor.c — dtypes, roles, shapes and storage of tensors. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn.h"
#include "rng.h"
#include "nn_impl.h"

static const char *const nn_dtype_names[NN_DTYPE_COUNT] = {
    [NN_F32] = "f32", [NN_BF16] = "bf16", [NN_F16] = "f16", [NN_I8] = "i8", [NN_I32] = "i32",
};
static const size_t nn_dtype_sizes[NN_DTYPE_COUNT] = {
    [NN_F32] = 4, [NN_BF16] = 2, [NN_F16] = 2, [NN_I8] = 1, [NN_I32] = 4,
};
static const char *const nn_role_names[NN_ROLE_COUNT] = {
    [NN_ROLE_INPUT] = "input",         [NN_ROLE_PARAM] = "parameter",
    [NN_ROLE_CONST] = "constant",      [NN_ROLE_ACTIVATION] = "activation",
    [NN_ROLE_GRADIENT] = "gradient",   [NN_ROLE_OPTSTATE] = "optimizer_state",
};

const char *nn_dtype_name(nn_dtype t) { return t < NN_DTYPE_COUNT ? nn_dtype_names[t] : "?"; }
size_t nn_dtype_size(nn_dtype t) { return t < NN_DTYPE_COUNT ? nn_dtype_sizes[t] : 0; }
const char *nn_role_name(nn_role r) { return r < NN_ROLE_COUNT ? nn_role_names[r] : "?"; }

int64_t nn_numel(const nn_tensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++)
        n *= t->ne[i];
    return n;
}

uint64_t nn_nbytes(const nn_tensor *t)
{
    return (uint64_t)nn_numel(t) * nn_dtype_size(t->dtype);
}

char *nn_shape_str(const nn_tensor *t, char *buf, size_t n)
{
    size_t k = 0;
    k += (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < t->ndim && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? "," : "", (long long)t->ne[i]);
    if (k < n)
        snprintf(buf + k, n - k, "]");
    return buf;
}

bool nn_is_transpose(const nn_tensor *t)
{
    int nd = t->ndim;
    if (t->op != NN_OP_PERMUTE || nd < 2 || t->ip[nd - 2] != nd - 1 || t->ip[nd - 1] != nd - 2)
        return false;
    for (int d = 0; d < nd - 2; d++)
        if (t->ip[d] != d)
            return false;
    return true;
}

bool nn_same_shape(const nn_tensor *a, const nn_tensor *b)
{
    if (a->ndim != b->ndim)
        return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->ne[i] != b->ne[i])
            return false;
    return true;
}

bool nn_tensor_alloc(nn_tensor *t)
{
    if (t->data)
        return true;
    int64_t n = nn_numel(t);
    t->data = nn_calloc((size_t)(n > 0 ? n : 1), sizeof(float));
    t->data_is_view = false;
    return t->data != NULL;
}

bool nn_tensor_set(nn_tensor *t, const float *v)
{
    if (!nn_tensor_alloc(t))
        return false;
    memcpy(t->data, v, (size_t)nn_numel(t) * sizeof(float));
    return true;
}

bool nn_tensor_fill(nn_tensor *t, float v)
{
    if (!nn_tensor_alloc(t))
        return false;
    for (int64_t i = 0; i < nn_numel(t); i++)
        t->data[i] = v;
    return true;
}

bool nn_tensor_randn(nn_tensor *t, uint64_t seed, double std)
{
    if (!nn_tensor_alloc(t))
        return false;
    rng r;
    rng_seed(&r, seed);
    for (int64_t i = 0; i < nn_numel(t); i++) {
        /* Box-Muller; 1 - u keeps the log's argument in (0, 1]. */
        double u = 1.0 - rng_unit(&r), v = rng_unit(&r);
        t->data[i] = (float)(std * sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v));
    }
    return true;
}

void nn_tensor_set_name(nn_tensor *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->name, sizeof t->name, fmt, ap);
    va_end(ap);
}

float nn_round_bf16(float x)
{
    if (isnan(x))
        return x;
    uint32_t u;
    memcpy(&u, &x, 4);
    u += 0x7fffu + ((u >> 16) & 1u);
    u &= 0xffff0000u;
    memcpy(&x, &u, 4);
    return x;
}

float nn_round_f16(float x)
{
    if (isnan(x) || isinf(x))
        return x;
    float a = fabsf(x);
    if (a >= 65520.0f)
        return copysignf(INFINITY, x);
    int e;
    frexpf(a, &e); /* a = m * 2^e, m in [0.5, 1) */
    int exp2 = e - 1;
    if (exp2 < -14)
        exp2 = -14; /* subnormals: fixed quantum 2^-24 */
    float q = ldexpf(1.0f, exp2 - 10);
    return copysignf(rintf(a / q) * q, x);
}
