/* kc_tensor.c — the dtype table between the framework and the ISA, and kernel operands
 * (see kernel.h). */
#include <string.h>

#include "kernel.h"

/* The one mapping between framework and ISA element types. */
static const isa_dtype kc_dtypes[NN_DTYPE_COUNT] = {
    [NN_F32] = ISA_DTYPE_FP32, [NN_BF16] = ISA_DTYPE_BF16, [NN_F16] = ISA_DTYPE_FP16,
    [NN_I8] = ISA_DTYPE_INT8,  [NN_I32] = ISA_DTYPE_INT32,
};
_Static_assert(NN_DTYPE_COUNT == 5 && ISA_DTYPE_COUNT == 5,
               "every framework dtype maps to an ISA dtype and back (kc_dtypes)");

isa_dtype kc_isa_dtype(nn_dtype t)
{
    return (unsigned)t < NN_DTYPE_COUNT ? kc_dtypes[t] : ISA_DTYPE_COUNT;
}

nn_dtype kc_nn_dtype(isa_dtype t)
{
    for (int d = 0; d < NN_DTYPE_COUNT; d++)
        if (kc_dtypes[d] == t)
            return (nn_dtype)d;
    return NN_DTYPE_COUNT;
}

kc_tol kc_tol_ulp(nn_dtype t)
{
    double u = t == NN_BF16 ? 0x1p-7 : t == NN_F16 ? 0x1p-10 : t == NN_F32 ? 0x1p-20 : 0;
    return (kc_tol){u, 0, u / 8};
}

kc_tensor *kc_tensor_dense(kc_tensor *t, uint64_t addr, nn_dtype dtype, int ndim,
                           const int64_t *shape)
{
    memset(t, 0, sizeof *t);
    t->addr = addr;
    t->dtype = dtype;
    t->ndim = ndim < 0 ? 0 : ndim > KC_MAX_DIMS ? KC_MAX_DIMS : ndim;
    int64_t s = (int64_t)nn_dtype_size(dtype);
    for (int d = t->ndim - 1; d >= 0; d--) {
        t->shape[d] = shape[d];
        t->stride[d] = s;
        s *= shape[d];
    }
    return t;
}

kc_tensor *kc_tensor_of(kc_tensor *t, uint64_t addr, const nn_tensor *like)
{
    return kc_tensor_dense(t, addr, like->dtype, like->ndim, like->ne);
}

int64_t kc_tensor_numel(const kc_tensor *t)
{
    int64_t n = 1;
    for (int d = 0; d < t->ndim; d++)
        n *= t->shape[d];
    return n;
}

uint64_t kc_tensor_bytes(const kc_tensor *t)
{
    return (uint64_t)kc_tensor_numel(t) * nn_dtype_size(t->dtype);
}

uint64_t kc_tensor_extent(const kc_tensor *t)
{
    uint64_t last = 0;
    for (int d = 0; d < t->ndim; d++)
        if (t->shape[d] > 1 && t->stride[d] > 0)
            last += (uint64_t)(t->shape[d] - 1) * (uint64_t)t->stride[d];
    return last + nn_dtype_size(t->dtype);
}
