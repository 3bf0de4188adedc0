/* nn_impl.h — what the framework's own files share: the op implementation table and helpers
 * for shape inference and backward rules. Not part of the public API (nn.h). */
#ifndef NPUSIM_NN_IMPL_H
#define NPUSIM_NN_IMPL_H

#include "nn.h"

typedef struct nn_op_impl {
    /* Fills t's ndim, ne and dtype from its sources and parameters; on a mismatch fills err
     * (through nn_infer_fail) and returns its status. */
    np_status (*infer)(nn_tensor *t, np_err *err);
    /* (optional) defaults to one FLOP per output element. */
    int64_t (*flops)(const nn_tensor *t);
    /* Computes t->data from the sources' data (all allocated). */
    void (*forward)(nn_tensor *t);
    /* (optional) NULL when ops.def gives a reason. Adds the gradient of each source that
     * requires one through nn_grad_acc, building it from public ops. */
    void (*backward)(nn_graph *g, nn_tensor *t, nn_tensor *dy);
} nn_op_impl;

extern const nn_op_impl nn_op_impls[NN_OP_COUNT];

/* Fills err with "<op>: <message> (<src shapes and dtypes>)" as NP_ERR_INCONSISTENT (shape)
 * or NP_ERR_TYPE (dtype) and returns it. */
np_status nn_infer_fail(const nn_tensor *t, np_err *err, np_status s, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Checks that every source has the same dtype as src[0] (from first to n-1). */
np_status nn_infer_same_dtype(const nn_tensor *t, int n, np_err *err);
/* Normalizes a possibly negative axis against ndim; -1 when out of range. */
int nn_axis(int axis, int ndim);
/* Sets t's shape. */
void nn_set_shape(nn_tensor *t, int ndim, const int64_t *ne);
/* Broadcast shape of a and b into out (numpy rules); false when incompatible. */
bool nn_broadcast_shape(const nn_tensor *a, const nn_tensor *b, int *ndim, int64_t *ne);
/* For dst of out-shape (ndim, ne): strides to read src with broadcasting (0 on stretched dims). */
void nn_broadcast_strides(const nn_tensor *src, int ndim, const int64_t *ne, int64_t *st);

/* Every allocation of the framework goes through these, so that tests can make the n-th one
 * fail (nn_fault_inject_alloc in nn.h). */
void *nn_malloc(size_t size);
void *nn_calloc(size_t n, size_t size);
void *nn_realloc(void *p, size_t size);

/* Sets the graph's sticky error (if none yet). */
void nn_graph_fail(nn_graph *g, np_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Adds grad to src's gradient (accumulating on fan-out); no-op when src needs none. */
void nn_grad_acc(nn_graph *g, nn_tensor *src, nn_tensor *grad);

/* The op's own constructor used by the backward rules (same as nn_node). */
static inline nn_tensor *nn_node1(nn_graph *g, nn_op op, nn_tensor *a, const int64_t *ip,
                                  const double *fp)
{
    return nn_node(g, op, 1, &a, ip, fp);
}

/* Per-op forward entry points live in op_*.c; the table in ops_table.c names them. */
#endif
