/* model_onnx.c — models from ONNX files: the graph of an .onnx file, decoded with the ONNX
 * schema of Debian's libonnx-dev compiled by protobuf-c (framework/CMakeLists.txt; no parser
 * of ours), rebuilt node by node with the framework's ops, so that summary, plan and run work
 * on it as on the zoo's models.
 *
 * What is read: the one graph input that is not an initializer (float images or features, or
 * integer tokens [B, S]; its first dim is the batch, replaced by the batch asked for); the
 * first graph output as the logits (a loss, mean cross-entropy, is added as for the zoo's
 * models); initializers as parameters (float, rank >= 1: trainable, their values loaded),
 * batch-norm statistics and rank-0 floats as constants, integer initializers as constants
 * (shapes, axes, indices). The operators of the zoo's CNNs and transformers:
 *
 *   Conv BatchNormalization Relu Clip(0, 6) MaxPool AveragePool GlobalAveragePool Flatten
 *   Gemm MatMul Add Sub Mul Div Pow(2, 3) Tanh Exp Log Softmax LayerNormalization Reshape
 *   Transpose Concat Gather Slice Split Squeeze Unsqueeze Constant Identity Dropout
 *
 * Everything else is refused by operator and node name, as are attributes the ops here do not
 * build (asymmetric padding, non-square kernels, ceil_mode, Gemm's alpha/beta, a softmax not
 * over the last axis, ...), external data, and shapes not fixed in the file (only the batch
 * may be symbolic). Without protobuf-c and the schema at build time (NPUSIM_ONNX undefined)
 * every ONNX file is refused with what to install.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "readfile.h"

#ifndef NPUSIM_ONNX

np_status nn_model_load_onnx(const char *path, nn_model_desc *d, np_err *err)
{
    (void)d;
    return np_err_at(err, NP_ERR_UNKNOWN_KEY, path, 0, 0,
                     "this npusim was built without ONNX import (it needs Debian's "
                     "protobuf-c-compiler, libprotobuf-c-dev and libonnx-dev at build time)");
}

np_status nn_onnx_build(nn_graph *g, const nn_model_desc *d, int64_t batch, bool inference,
                        nn_dtype dt, struct nn_model *m, nn_tensor **logits, np_err *err)
{
    (void)g, (void)batch, (void)inference, (void)dt, (void)m, (void)logits;
    return nn_model_load_onnx(d->path, NULL, err);
}

#else

#include "onnx.pb-c.h"

enum { OX_FLOAT = 1, OX_INT32 = 6, OX_INT64 = 7 };
#define OX_MAX_INTS 4096 /* an integer constant (a shape, axes) read at import */

typedef enum { OX_TENSOR, OX_INIT } ox_kind;

typedef struct ox_val {
    const char *name; /* NULL: an empty slot */
    ox_kind kind;
    nn_tensor *t;                   /* OX_TENSOR, or an OX_INIT once made */
    const Onnx__TensorProto *init;  /* OX_INIT: an initializer or a Constant node's value */
    bool constant;                  /* a Constant node's: never a parameter */
    int64_t *iv;                    /* an integer OX_INIT's n values, once read */
    int64_t n;
} ox_val;

typedef struct ox_ctx {
    const char *path;
    nn_graph *g;
    nn_dtype dt;
    bool inference;
    ox_val *vals; /* open addressing, cap a power of two */
    size_t cap;
    const Onnx__NodeProto *node; /* the node being built (for messages) */
    int node_i;
    np_err *err;
} ox_ctx;

static uint64_t ox_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static ox_val *ox_find(ox_ctx *c, const char *name)
{
    for (size_t i = ox_hash(name) & (c->cap - 1);; i = (i + 1) & (c->cap - 1)) {
        if (!c->vals[i].name)
            return NULL;
        if (strcmp(c->vals[i].name, name) == 0)
            return &c->vals[i];
    }
}

/* The slot for name (new or existing); the table is sized for every name up front. */
static ox_val *ox_slot(ox_ctx *c, const char *name)
{
    size_t i = ox_hash(name) & (c->cap - 1);
    while (c->vals[i].name && strcmp(c->vals[i].name, name) != 0)
        i = (i + 1) & (c->cap - 1);
    c->vals[i].name = name;
    return &c->vals[i];
}

/* An error about the current node: "node N 'NAME' (OP): ...". */
static np_status ox_fail(ox_ctx *c, np_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static np_status ox_fail(ox_ctx *c, np_status st, const char *fmt, ...)
{
    char msg[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!c->node)
        return np_err_at(c->err, st, c->path, 0, 0, "%s", msg);
    return np_err_at(c->err, st, c->path, 0, 0, "node %d '%s' (%s): %s", c->node_i + 1,
                     c->node->name ? c->node->name : "", c->node->op_type, msg);
}

static int64_t ox_numel(const Onnx__TensorProto *t, bool *ok)
{
    int64_t n = 1;
    *ok = t->n_dims <= NN_MAX_DIMS;
    for (size_t i = 0; i < t->n_dims && *ok; i++) {
        if (t->dims[i] < 0 || (t->dims[i] > 0 && n > ((int64_t)1 << 50) / t->dims[i]))
            *ok = false;
        else
            n *= t->dims[i];
    }
    return n;
}

static np_status ox_check_tensor(ox_ctx *c, const Onnx__TensorProto *t, int64_t *n);

/* The n values of a tensor proto of n elements as floats (out) or integers (iout); an error
 * when it does not hold n. */
static np_status ox_values(ox_ctx *c, const Onnx__TensorProto *t, int64_t n, float *out,
                           int64_t *iout)
{
    int64_t have;
    if (ox_check_tensor(c, t, &have) != NP_OK)
        return c->err->status;
    if (have != n)
        return ox_fail(c, NP_ERR_RANGE, "tensor '%s': %lld values where %lld are read",
                       t->name ? t->name : "", (long long)have, (long long)n);
    int dt = t->data_type;
    size_t esz = dt == OX_FLOAT || dt == OX_INT32 ? 4 : 8;
    if (t->has_raw_data) {
        const uint8_t *p = t->raw_data.data;
        for (int64_t i = 0; i < n; i++, p += esz) { /* little-endian, as ONNX stores it */
            uint64_t u = 0;
            for (size_t b = 0; b < esz; b++)
                u |= (uint64_t)p[b] << (8 * b);
            if (dt == OX_FLOAT) {
                uint32_t w = (uint32_t)u;
                float f;
                memcpy(&f, &w, 4);
                if (out)
                    out[i] = f;
                if (iout)
                    iout[i] = (int64_t)f;
            } else {
                int64_t v = dt == OX_INT32 ? (int64_t)(int32_t)(uint32_t)u : (int64_t)u;
                if (out)
                    out[i] = (float)v;
                if (iout)
                    iout[i] = v;
            }
        }
        return NP_OK;
    }
    for (int64_t i = 0; i < n; i++) {
        double v = dt == OX_FLOAT ? t->float_data[i] : dt == OX_INT32 ? t->int32_data[i]
                                                                       : (double)t->int64_data[i];
        if (out)
            out[i] = (float)v;
        if (iout)
            iout[i] = dt == OX_INT64 ? t->int64_data[i] : (int64_t)v;
    }
    return NP_OK;
}

/* *n, t's elements, after checking its type, shape and that its data holds that many. */
static np_status ox_check_tensor(ox_ctx *c, const Onnx__TensorProto *t, int64_t *n)
{
    bool ok;
    const char *nm = t->name ? t->name : "";
    int dt = t->data_type;
    if (dt != OX_FLOAT && dt != OX_INT32 && dt != OX_INT64)
        return ox_fail(c, NP_ERR_TYPE, "tensor '%s': data type %d is not read (float, int32 "
                       "and int64 are)", nm, dt);
    *n = ox_numel(t, &ok);
    if (!ok)
        return ox_fail(c, NP_ERR_RANGE, "tensor '%s': more than %d dims, a negative dim or "
                       "more than 2^50 elements", nm, NN_MAX_DIMS);
    if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
        return ox_fail(c, NP_ERR_RANGE, "tensor '%s': external data is not read (save the "
                       "model with its weights inside the file)", nm);
    size_t esz = dt == OX_INT64 ? 8 : 4;
    if (t->has_raw_data && t->raw_data.len != (size_t)*n * esz)
        return ox_fail(c, NP_ERR_FORMAT, "tensor '%s': raw_data holds %zu bytes, its shape "
                       "needs %lld", nm, t->raw_data.len, (long long)*n * (long long)esz);
    size_t have = dt == OX_FLOAT ? t->n_float_data : dt == OX_INT32 ? t->n_int32_data
                                                                     : t->n_int64_data;
    if (!t->has_raw_data && have != (size_t)*n)
        return ox_fail(c, NP_ERR_FORMAT, "tensor '%s': %zu values, its shape needs %lld", nm,
                       have, (long long)*n);
    return NP_OK;
}

/* A float tensor proto as a leaf: a parameter (trainable, rank >= 1) or a constant. */
static nn_tensor *ox_leaf(ox_ctx *c, const Onnx__TensorProto *t, bool param)
{
    int64_t n, ne[NN_MAX_DIMS];
    if (ox_check_tensor(c, t, &n) != NP_OK)
        return NULL;
    for (size_t i = 0; i < t->n_dims; i++)
        ne[i] = t->dims[i];
    bool flt = t->data_type == OX_FLOAT;
    char scope[NN_NAME_MAX];
    snprintf(scope, sizeof scope, "%s", nn_graph_scope(c->g));
    const char *nm = t->name && t->name[0] ? t->name : "const";
    const char *dot = strrchr(nm, '.');
    if (dot && dot > nm) /* "layer1.0.conv1.weight": scope layer1.0.conv1, leaf weight */
        nn_graph_set_scope(c->g, "%.*s", (int)(dot - nm), nm);
    nn_tensor *x;
    if (t->n_dims == 0 && flt) {
        float v;
        x = ox_values(c, t, 1, &v, NULL) == NP_OK ? nn_scalar(c->g, v) : NULL;
    } else {
        x = param && flt ? nn_param(c->g, dot ? dot + 1 : nm, NN_F32, (int)t->n_dims, ne)
                         : nn_const(c->g, dot ? dot + 1 : nm, flt ? NN_F32 : NN_I32,
                                    (int)t->n_dims, ne);
        float *v = x ? malloc(((size_t)n + 1) * sizeof *v) : NULL;
        np_err e2 = {0};
        if (x && !v)
            np_err_set(c->err, NP_ERR_NOMEM, "out of memory reading %s", nm);
        if (!v || ox_values(c, t, n, v, NULL) != NP_OK ||
            nn_tensor_write(x, v, (size_t)n, &e2) != NP_OK) {
            if (e2.status)
                *c->err = e2;
            x = NULL;
        }
        free(v);
    }
    nn_graph_set_scope(c->g, "%s", scope);
    if (x && flt && c->dt != NN_F32)
        x = nn_cast(c->g, x, c->dt);
    if (!x && !c->err->status)
        nn_graph_status(c->g, c->err);
    return x;
}

/* Input i of the node as a tensor (a parameter when it is a float initializer, a constant
 * when buffer); NULL with the error set when missing. */
static nn_tensor *ox_in(ox_ctx *c, size_t i, bool buffer)
{
    const Onnx__NodeProto *nd = c->node;
    if (i >= nd->n_input || !nd->input[i][0]) {
        ox_fail(c, NP_ERR_MISSING, "input %zu is missing", i + 1);
        return NULL;
    }
    ox_val *v = ox_find(c, nd->input[i]);
    if (!v) {
        ox_fail(c, NP_ERR_MISSING, "input '%s' is produced by no node, input or initializer "
                "before it", nd->input[i]);
        return NULL;
    }
    if (!v->t && v->kind == OX_INIT)
        v->t = ox_leaf(c, v->init, !buffer && !v->constant);
    return v->t;
}

/* Input i as integer constants (shapes, axes); *n values. */
static const int64_t *ox_ints(ox_ctx *c, size_t i, int64_t *n)
{
    const Onnx__NodeProto *nd = c->node;
    ox_val *v = i < nd->n_input && nd->input[i][0] ? ox_find(c, nd->input[i]) : NULL;
    if (v && v->kind == OX_INIT && v->init->data_type != OX_FLOAT && !v->iv) {
        int64_t k;
        if (ox_check_tensor(c, v->init, &k) != NP_OK)
            return NULL;
        if (k > OX_MAX_INTS) {
            ox_fail(c, NP_ERR_RANGE, "'%s': more than %d integers", v->name, OX_MAX_INTS);
            return NULL;
        }
        v->iv = malloc(((size_t)k + 1) * sizeof *v->iv);
        if (!v->iv || ox_values(c, v->init, k, NULL, v->iv) != NP_OK)
            return NULL;
        v->n = k;
    }
    if (!v || !v->iv) {
        ox_fail(c, NP_ERR_RANGE, "input %zu ('%s') must be an integer constant (an initializer "
                "or a Constant node): shapes computed at run time are not imported", i + 1,
                i < nd->n_input ? nd->input[i] : "");
        return NULL;
    }
    *n = v->n;
    return v->iv;
}

static const Onnx__AttributeProto *ox_attr(const ox_ctx *c, const char *name)
{
    for (size_t i = 0; i < c->node->n_attribute; i++)
        if (c->node->attribute[i]->name && strcmp(c->node->attribute[i]->name, name) == 0)
            return c->node->attribute[i];
    return NULL;
}

static int64_t ox_attr_i(const ox_ctx *c, const char *name, int64_t def)
{
    const Onnx__AttributeProto *a = ox_attr(c, name);
    return a && a->has_i ? a->i : def;
}

static double ox_attr_f(const ox_ctx *c, const char *name, double def)
{
    const Onnx__AttributeProto *a = ox_attr(c, name);
    return a && a->has_f ? a->f : def;
}

/* An ints attribute whose values are all equal (square kernels, strides, pads): *v, or def
 * when absent; an error when they differ. */
static np_status ox_attr_same(ox_ctx *c, const char *name, int64_t def, int64_t *v)
{
    const Onnx__AttributeProto *a = ox_attr(c, name);
    *v = def;
    if (!a || a->n_ints == 0)
        return NP_OK;
    for (size_t i = 1; i < a->n_ints; i++)
        if (a->ints[i] != a->ints[0])
            return ox_fail(c, NP_ERR_RANGE, "%s: unequal values (asymmetric or non-square) are "
                           "not built", name);
    if (a->ints[0] < 0 || a->ints[0] > 65536)
        return ox_fail(c, NP_ERR_RANGE, "%s: %lld is outside 0 .. 65536", name,
                       (long long)a->ints[0]);
    *v = a->ints[0];
    return NP_OK;
}

static int ox_axis(const nn_tensor *x, int64_t axis)
{
    return (int)(axis < 0 ? axis + x->ndim : axis);
}

/* The node's output i is t (a tensor) in the table. */
static np_status ox_out(ox_ctx *c, size_t i, nn_tensor *t)
{
    if (!t)
        return c->err->status ? c->err->status : nn_graph_status(c->g, c->err);
    if (i < c->node->n_output && c->node->output[i][0]) {
        ox_val *v = ox_slot(c, c->node->output[i]);
        v->kind = OX_TENSOR;
        v->t = t;
    }
    return NP_OK;
}

static const char *const ox_ops[] = {
    "Conv", "BatchNormalization", "Relu", "Clip", "MaxPool", "AveragePool", "GlobalAveragePool",
    "Flatten", "Gemm", "MatMul", "Add", "Sub", "Mul", "Div", "Pow", "Tanh", "Exp", "Log",
    "Softmax", "LayerNormalization", "Reshape", "Transpose", "Concat", "Gather", "Slice",
    "Split", "Squeeze", "Unsqueeze", "Constant", "Identity", "Dropout"};
#define OX_N_OPS (sizeof ox_ops / sizeof ox_ops[0])

/* "operator X is not imported (npusim imports A, B, ...)" for node i of the graph. */
static np_status ox_unsupported(np_err *err, const char *path, size_t i, const char *name,
                                const char *op)
{
    char list[512];
    size_t used = 0;
    for (size_t k = 0; k < OX_N_OPS && used < sizeof list; k++)
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", k ? ", " : "", ox_ops[k]);
    return np_err_at(err, NP_ERR_UNKNOWN_KEY, path, 0, 0, "node %zu '%s' (%s): operator %s is "
                     "not imported (npusim imports %s)", i + 1, name ? name : "", op, op, list);
}

static bool ox_known(const char *op)
{
    for (size_t k = 0; k < OX_N_OPS; k++)
        if (strcmp(op, ox_ops[k]) == 0)
            return true;
    return false;
}

static np_status ox_node(ox_ctx *c)
{
    const Onnx__NodeProto *nd = c->node;
    const char *op = nd->op_type ? nd->op_type : "";
    nn_graph *g = c->g;
    if (nd->domain && nd->domain[0] && strcmp(nd->domain, "ai.onnx") != 0)
        return ox_fail(c, NP_ERR_RANGE, "domain '%s' is not read (only the standard operators)",
                       nd->domain);
#define IS(s) (strcmp(op, s) == 0)
    if (IS("Constant")) {
        const Onnx__AttributeProto *a = ox_attr(c, "value");
        if (!a || !a->t)
            return ox_fail(c, NP_ERR_RANGE, "only a 'value' tensor is read (not value_float, "
                           "value_ints, sparse values)");
        if (nd->n_output < 1 || !nd->output[0][0])
            return ox_fail(c, NP_ERR_MISSING, "no output");
        ox_val *v = ox_slot(c, nd->output[0]); /* made when first used, as initializers are */
        v->kind = OX_INIT;
        v->init = a->t;
        v->constant = true;
        v->t = NULL;
        return NP_OK;
    }
    nn_tensor *x = ox_in(c, 0, false);
    if (!x)
        return c->err->status;
    if (IS("Identity") || IS("Dropout"))
        return ox_out(c, 0, x);
    if (IS("Relu"))
        return ox_out(c, 0, nn_relu(g, x));
    if (IS("Tanh"))
        return ox_out(c, 0, nn_tanh(g, x));
    if (IS("Exp"))
        return ox_out(c, 0, nn_exp(g, x));
    if (IS("Log"))
        return ox_out(c, 0, nn_log(g, x));
    if (IS("Clip")) { /* ReLU6: min 0, max 6 as inputs (opset 11+) */
        const Onnx__NodeProto *n = nd;
        ox_val *lo = n->n_input > 1 ? ox_find(c, n->input[1]) : NULL;
        ox_val *hi = n->n_input > 2 ? ox_find(c, n->input[2]) : NULL;
        float l = NAN, h = NAN;
        if (lo && lo->kind == OX_INIT && lo->init->data_type == OX_FLOAT)
            ox_values(c, lo->init, 1, &l, NULL);
        if (hi && hi->kind == OX_INIT && hi->init->data_type == OX_FLOAT)
            ox_values(c, hi->init, 1, &h, NULL);
        if (!(l == 0 && h == 6))
            return ox_fail(c, NP_ERR_RANGE, "only Clip(0, 6) (ReLU6) is built");
        return ox_out(c, 0, nn_relu6(g, x));
    }
    if (IS("Add") || IS("Sub") || IS("Mul") || IS("Div") || IS("MatMul")) {
        nn_tensor *y = ox_in(c, 1, false);
        if (!y)
            return c->err->status;
        return ox_out(c, 0, IS("Add") ? nn_add(g, x, y) : IS("Sub") ? nn_sub(g, x, y)
                            : IS("Mul") ? nn_mul(g, x, y) : IS("Div") ? nn_div(g, x, y)
                                                          : nn_matmul(g, x, y));
    }
    if (IS("Pow")) {
        ox_val *e = nd->n_input > 1 ? ox_find(c, nd->input[1]) : NULL;
        float p = NAN;
        if (e && e->kind == OX_INIT)
            ox_values(c, e->init, 1, &p, NULL);
        if (p != 2 && p != 3)
            return ox_fail(c, NP_ERR_RANGE, "only a constant exponent of 2 or 3 is built");
        nn_tensor *y = nn_mul(g, x, x);
        return ox_out(c, 0, p == 3 ? nn_mul(g, y, x) : y);
    }
    if (IS("Softmax")) {
        if (ox_axis(x, ox_attr_i(c, "axis", -1)) != x->ndim - 1)
            return ox_fail(c, NP_ERR_RANGE, "a softmax over another axis than the last is not built");
        return ox_out(c, 0, nn_softmax(g, x));
    }
    if (IS("LayerNormalization")) {
        if (ox_axis(x, ox_attr_i(c, "axis", -1)) != x->ndim - 1)
            return ox_fail(c, NP_ERR_RANGE, "a layer norm over more than the last axis is not built");
        nn_tensor *w = ox_in(c, 1, false), *b = nd->n_input > 2 && nd->input[2][0] ? ox_in(c, 2, false) : NULL;
        if (!w || (nd->n_input > 2 && nd->input[2][0] && !b))
            return c->err->status;
        return ox_out(c, 0, nn_layernorm(g, x, w, b, ox_attr_f(c, "epsilon", 1e-5)));
    }
    if (IS("Conv")) {
        int64_t stride, pad, dil;
        const Onnx__AttributeProto *ap = ox_attr(c, "auto_pad");
        if (ap && ap->has_s && !(ap->s.len == 6 && memcmp(ap->s.data, "NOTSET", 6) == 0))
            return ox_fail(c, NP_ERR_RANGE, "auto_pad is not built (give pads)");
        if (ox_attr_same(c, "strides", 1, &stride) || ox_attr_same(c, "pads", 0, &pad) ||
            ox_attr_same(c, "dilations", 1, &dil) || ox_attr_same(c, "kernel_shape", 0, &(int64_t){0}))
            return c->err->status;
        nn_tensor *w = ox_in(c, 1, false);
        if (!w)
            return c->err->status;
        int64_t groups = ox_attr_i(c, "group", 1);
        if (groups < 1 || groups > 65536)
            return ox_fail(c, NP_ERR_RANGE, "group %lld is outside 1 .. 65536", (long long)groups);
        nn_tensor *y = nn_conv2d(g, x, w, (int)stride, (int)pad, (int)dil, (int)groups);
        if (y && nd->n_input > 2 && nd->input[2][0]) {
            nn_tensor *b = ox_in(c, 2, false);
            if (!b)
                return c->err->status;
            y = nn_add(g, y, nn_reshape(g, b, 4, (int64_t[]){1, b->ne[0], 1, 1}));
        }
        return ox_out(c, 0, y);
    }
    if (IS("BatchNormalization")) {
        nn_tensor *w = ox_in(c, 1, false), *b = w ? ox_in(c, 2, false) : NULL;
        if (!w || !b)
            return c->err->status;
        double eps = ox_attr_f(c, "epsilon", 1e-5);
        if (!c->inference)
            return ox_out(c, 0, nn_batchnorm(g, x, w, b, eps));
        nn_tensor *mean = ox_in(c, 3, true), *var = mean ? ox_in(c, 4, true) : NULL;
        if (!mean || !var)
            return c->err->status;
        return ox_out(c, 0, nn_batchnorm_infer(g, x, w, b, mean, var, eps));
    }
    if (IS("MaxPool") || IS("AveragePool")) {
        int64_t k, stride, pad;
        if (ox_attr_same(c, "kernel_shape", 1, &k) || ox_attr_same(c, "strides", 1, &stride) ||
            ox_attr_same(c, "pads", 0, &pad))
            return c->err->status;
        if (ox_attr_i(c, "ceil_mode", 0))
            return ox_fail(c, NP_ERR_RANGE, "ceil_mode 1 is not built");
        if (IS("AveragePool") && pad && !ox_attr_i(c, "count_include_pad", 0))
            return ox_fail(c, NP_ERR_RANGE, "padding left out of the average (count_include_pad "
                           "0) is not built");
        return ox_out(c, 0, IS("MaxPool") ? nn_maxpool2d(g, x, (int)k, (int)stride, (int)pad)
                                          : nn_avgpool2d(g, x, (int)k, (int)stride, (int)pad));
    }
    if (IS("GlobalAveragePool")) {
        if (x->ndim != 4)
            return ox_fail(c, NP_ERR_RANGE, "the input is not [N, C, H, W]");
        return ox_out(c, 0, nn_reshape(g, nn_global_avgpool(g, x), 4,
                                       (int64_t[]){x->ne[0], x->ne[1], 1, 1}));
    }
    if (IS("Flatten")) {
        int ax = ox_axis(x, ox_attr_i(c, "axis", 1));
        if (ax < 0 || ax > x->ndim)
            return ox_fail(c, NP_ERR_RANGE, "axis outside the input's %d dims", x->ndim);
        int64_t outer = 1;
        for (int i = 0; i < ax; i++)
            outer *= x->ne[i];
        return ox_out(c, 0, nn_reshape(g, x, 2, (int64_t[]){outer, -1}));
    }
    if (IS("Gemm")) {
        if (ox_attr_f(c, "alpha", 1) != 1 || ox_attr_f(c, "beta", 1) != 1 || ox_attr_i(c, "transA", 0))
            return ox_fail(c, NP_ERR_RANGE, "only alpha 1, beta 1 and transA 0 are built");
        nn_tensor *w = ox_in(c, 1, false);
        nn_tensor *b = w && nd->n_input > 2 && nd->input[2][0] ? ox_in(c, 2, false) : NULL;
        if (!w || (nd->n_input > 2 && nd->input[2][0] && !b))
            return c->err->status;
        return ox_out(c, 0, nn_linear(g, x, ox_attr_i(c, "transB", 0) ? nn_transpose(g, w) : w, b));
    }
    if (IS("Reshape")) {
        int64_t n, ne[NN_MAX_DIMS];
        const int64_t *s = ox_ints(c, 1, &n);
        if (!s)
            return c->err->status;
        if (n < 1 || n > NN_MAX_DIMS)
            return ox_fail(c, NP_ERR_RANGE, "a shape of %lld dims (1 .. %d)", (long long)n, NN_MAX_DIMS);
        int64_t numel = nn_numel(x), known = 1, inferred = 0;
        for (int64_t i = 0; i < n; i++) {
            ne[i] = s[i] == 0 && i < x->ndim && !ox_attr_i(c, "allowzero", 0) ? x->ne[i] : s[i];
            inferred += ne[i] == -1;
            if (ne[i] < -1 || ne[i] == 0 || inferred > 1 || (ne[i] > 0 && ne[i] > numel / known))
                return ox_fail(c, NP_ERR_RANGE, "shape entry %lld (%lld) does not reshape %lld "
                               "elements", (long long)i + 1, (long long)s[i], (long long)numel);
            known *= ne[i] > 0 ? ne[i] : 1;
        }
        return ox_out(c, 0, nn_reshape(g, x, (int)n, ne));
    }
    if (IS("Transpose")) {
        const Onnx__AttributeProto *a = ox_attr(c, "perm");
        int perm[NN_MAX_DIMS];
        bool seen[NN_MAX_DIMS] = {false};
        if (a && a->n_ints != (size_t)x->ndim)
            return ox_fail(c, NP_ERR_RANGE, "perm has %zu entries for %d dims", a->n_ints, x->ndim);
        for (int i = 0; i < x->ndim; i++) {
            int64_t p = a ? a->ints[i] : x->ndim - 1 - i;
            if (p < 0 || p >= x->ndim || seen[p])
                return ox_fail(c, NP_ERR_RANGE, "perm entry %lld is outside the %d dims or "
                               "repeated", (long long)p, x->ndim);
            seen[p] = true;
            perm[i] = (int)p;
        }
        return ox_out(c, 0, nn_permute(g, x, perm));
    }
    if (IS("Concat")) {
        nn_tensor *xs[64];
        if (nd->n_input > 64)
            return ox_fail(c, NP_ERR_RANGE, "more than 64 inputs");
        for (size_t i = 0; i < nd->n_input; i++)
            if (!(xs[i] = ox_in(c, i, false)))
                return c->err->status;
        return ox_out(c, 0, nn_concat(g, (int)nd->n_input, xs, ox_axis(x, ox_attr_i(c, "axis", 0))));
    }
    if (IS("Gather")) {
        if (ox_attr_i(c, "axis", 0) != 0)
            return ox_fail(c, NP_ERR_RANGE, "only axis 0 (an embedding lookup) is built");
        nn_tensor *idx = ox_in(c, 1, false);
        if (!idx)
            return c->err->status;
        return ox_out(c, 0, nn_embedding(g, x, idx));
    }
    if (IS("Slice")) {
        int64_t ns, ne_, na = 0, nst = 0;
        const int64_t *st = ox_ints(c, 1, &ns), *en = st ? ox_ints(c, 2, &ne_) : NULL;
        const int64_t *ax = NULL, *sp = NULL;
        if (!st || !en)
            return c->err->status;
        if (nd->n_input > 3 && nd->input[3][0] && !(ax = ox_ints(c, 3, &na)))
            return c->err->status;
        if (nd->n_input > 4 && nd->input[4][0] && !(sp = ox_ints(c, 4, &nst)))
            return c->err->status;
        if (ne_ != ns || (ax && na != ns) || (sp && nst != ns))
            return ox_fail(c, NP_ERR_INCONSISTENT, "starts, ends, axes and steps differ in length");
        nn_tensor *y = x;
        for (int64_t i = 0; i < ns && y; i++) {
            int a = ox_axis(y, ax ? ax[i] : i);
            if (a < 0 || a >= y->ndim || (sp && sp[i] != 1))
                return ox_fail(c, NP_ERR_RANGE, "axis outside the input or a step other than 1");
            int64_t d = y->ne[a], s0 = st[i] < 0 ? st[i] + d : st[i], e0 = en[i] < 0 ? en[i] + d : en[i];
            s0 = s0 < 0 ? 0 : s0 > d ? d : s0;
            e0 = e0 < s0 ? s0 : e0 > d ? d : e0;
            if (e0 == s0)
                return ox_fail(c, NP_ERR_RANGE, "an empty slice [%lld, %lld) of dim %d",
                               (long long)s0, (long long)e0, a);
            y = nn_slice(g, y, a, s0, e0);
        }
        return ox_out(c, 0, y);
    }
    if (IS("Split")) {
        int ax = ox_axis(x, ox_attr_i(c, "axis", 0));
        int64_t n = (int64_t)nd->n_output, sz[64], ns = 0;
        const int64_t *s = NULL;
        const Onnx__AttributeProto *a = ox_attr(c, "split");
        if (n < 1 || n > 64 || ax < 0 || ax >= x->ndim)
            return ox_fail(c, NP_ERR_RANGE, "1 .. 64 outputs along an axis of the input");
        if (nd->n_input > 1 && nd->input[1][0]) {
            if (!(s = ox_ints(c, 1, &ns)))
                return c->err->status;
        } else if (a && a->n_ints) {
            s = a->ints;
            ns = (int64_t)a->n_ints;
        }
        if (s && ns != n)
            return ox_fail(c, NP_ERR_INCONSISTENT, "%lld split sizes for %lld outputs",
                           (long long)ns, (long long)n);
        for (int64_t i = 0; i < n; i++)
            sz[i] = s ? s[i] : x->ne[ax] / n;
        int64_t at = 0;
        for (int64_t i = 0; i < n; i++) {
            if (sz[i] < 1 || at + sz[i] > x->ne[ax])
                return ox_fail(c, NP_ERR_RANGE, "the split sizes do not fit dim %d (%lld)", ax,
                               (long long)x->ne[ax]);
            np_status st2 = ox_out(c, (size_t)i, nn_slice(g, x, ax, at, at + sz[i]));
            if (st2 != NP_OK)
                return st2;
            at += sz[i];
        }
        return NP_OK;
    }
    if (IS("Squeeze") || IS("Unsqueeze")) {
        int64_t na = 0, ne[NN_MAX_DIMS];
        const int64_t *ax = NULL;
        const Onnx__AttributeProto *a = ox_attr(c, "axes");
        if (nd->n_input > 1 && nd->input[1][0]) {
            if (!(ax = ox_ints(c, 1, &na)))
                return c->err->status;
        } else if (a) {
            ax = a->ints;
            na = (int64_t)a->n_ints;
        }
        bool mark[2 * NN_MAX_DIMS] = {false};
        int nout = IS("Squeeze") ? x->ndim : x->ndim + (int)na, k = 0;
        if (nout < 1 || nout > NN_MAX_DIMS)
            return ox_fail(c, NP_ERR_RANGE, "the result would have %d dims", nout);
        for (int64_t i = 0; i < na; i++) {
            int64_t v = ax[i] < 0 ? ax[i] + nout : ax[i];
            if (v < 0 || v >= nout || mark[v])
                return ox_fail(c, NP_ERR_RANGE, "axis %lld is outside the %d dims or given twice",
                               (long long)ax[i], nout);
            mark[v] = true;
        }
        for (int i = 0, j = 0; i < nout; i++) {
            if (IS("Unsqueeze")) {
                ne[k++] = mark[i] ? 1 : x->ne[j++];
            } else if (!(mark[i] || (!ax && x->ne[i] == 1))) {
                ne[k++] = x->ne[i];
            } else if (x->ne[i] != 1) {
                return ox_fail(c, NP_ERR_RANGE, "dim %d is %lld, not 1", i, (long long)x->ne[i]);
            }
        }
        if (k == 0)
            ne[k++] = 1;
        return ox_out(c, 0, nn_reshape(g, x, k, ne));
    }
#undef IS
    return ox_unsupported(c->err, c->path, (size_t)c->node_i, nd->name, op);
}

/* The varint at *p (advancing it); false past end or longer than 10 bytes. */
static bool ox_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    *v = 0;
    for (int shift = 0; *p < end && shift < 70; shift += 7) {
        uint8_t b = *(*p)++;
        *v |= (uint64_t)(b & 0x7f) << (shift < 64 ? shift : 63);
        if (!(b & 0x80))
            return true;
    }
    return false;
}

/* How deeply messages nest in the wire bytes [p, end) of a message of descriptor md, guided
 * by the schema's own descriptors (protobuf-c's unpacker recurses without a limit, so a
 * crafted file of nested subgraphs could exhaust the stack): depth + the nesting below, or
 * a value above limit as soon as it passes it; -1 for bytes that are not the wire format
 * (left to the unpacker to refuse). The walk itself recurses at most limit + 1 deep. */
static int ox_depth(const ProtobufCMessageDescriptor *md, const uint8_t *p, const uint8_t *end,
                    int depth, int limit)
{
    int deepest = depth;
    if (depth > limit)
        return depth;
    while (p < end) {
        uint64_t key, len;
        if (!ox_varint(&p, end, &key))
            return -1;
        switch (key & 7) {
        case 0:
            if (!ox_varint(&p, end, &len))
                return -1;
            break;
        case 1:
        case 5:
            if ((uint64_t)(end - p) < ((key & 7) == 1 ? 8u : 4u))
                return -1;
            p += (key & 7) == 1 ? 8 : 4;
            break;
        case 2: {
            if (!ox_varint(&p, end, &len) || len > (uint64_t)(end - p))
                return -1;
            const ProtobufCFieldDescriptor *f =
                key >> 3 <= UINT32_MAX ? protobuf_c_message_descriptor_get_field(md, (unsigned)(key >> 3))
                                       : NULL;
            if (f && f->type == PROTOBUF_C_TYPE_MESSAGE) {
                int d = ox_depth(f->descriptor, p, p + len, depth + 1, limit);
                if (d < 0 || d > limit)
                    return d;
                deepest = d > deepest ? d : deepest;
            }
            p += len;
            break;
        }
        default:
            return -1;
        }
    }
    return deepest;
}

#define OX_MAX_NESTING 32 /* model, graph, node, attribute, tensor, ...: a few subgraphs deep */

/* The decoded model of the file at d->path (free with onnx__model_proto__free_unpacked). */
static np_status ox_decode(const char *path, Onnx__ModelProto **mp, np_err *err)
{
    char *buf;
    size_t len;
    *mp = NULL;
    if (np_read_file(path, NN_ONNX_MAX_FILE_BYTES, "an ONNX file", &buf, &len, err) != NP_OK)
        return err->status;
    const uint8_t *bytes = (const uint8_t *)buf;
    if (ox_depth(&onnx__model_proto__descriptor, bytes, bytes + len, 0, OX_MAX_NESTING) >
        OX_MAX_NESTING) {
        free(buf);
        return np_err_at(err, NP_ERR_RANGE, path, 0, 0, "messages nested more than %d deep "
                         "(subgraphs within subgraphs): not imported", OX_MAX_NESTING);
    }
    *mp = onnx__model_proto__unpack(NULL, len, bytes);
    free(buf);
    if (!*mp)
        return np_err_at(err, NP_ERR_FORMAT, path, 0, 0, "not an ONNX model (its protobuf "
                         "does not decode as onnx.ModelProto: truncated or another format)");
    if (!(*mp)->graph) {
        onnx__model_proto__free_unpacked(*mp, NULL);
        *mp = NULL;
        return np_err_at(err, NP_ERR_FORMAT, path, 0, 0, "not an ONNX model (it holds no graph)");
    }
    return NP_OK;
}

np_status nn_model_load_onnx(const char *path, nn_model_desc *d, np_err *err)
{
    Onnx__ModelProto *mp;
    if (ox_decode(path, &mp, err) != NP_OK)
        return err->status;
    memset(d, 0, sizeof *d);
    snprintf(d->path, sizeof d->path, "%s", path);
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t blen = strlen(base);
    if (blen > 5 && strcmp(base + blen - 5, ".onnx") == 0)
        blen -= 5;
    snprintf(d->name, sizeof d->name, "%.*s", (int)(blen < 63 ? blen : 63), base);
    snprintf(d->family, sizeof d->family, "onnx");
    nn_model_entry *e = &d->e[d->n++];
    snprintf(e->key, sizeof e->key, "description");
    snprintf(e->word, sizeof e->word, "ONNX graph %.40s (%zu nodes, %s %.20s)",
             mp->graph->name ? mp->graph->name : "", mp->graph->n_node,
             mp->producer_name && mp->producer_name[0] ? mp->producer_name : "producer unknown",
             mp->producer_version ? mp->producer_version : "");
    /* every operator is one npusim imports: refused now, by name, rather than at build */
    np_status st = NP_OK;
    for (size_t i = 0; i < mp->graph->n_node && st == NP_OK; i++) {
        const Onnx__NodeProto *nd = mp->graph->node[i];
        if (!ox_known(nd->op_type ? nd->op_type : ""))
            st = ox_unsupported(err, path, i, nd->name, nd->op_type ? nd->op_type : "");
    }
    onnx__model_proto__free_unpacked(mp, NULL);
    return st;
}

/* Node i's scope (its layer in summaries): that of its first parameter ("layer1.0.conv1" of
 * "layer1.0.conv1.weight"), else its name without the operator's part ("/layer1/relu/Relu",
 * "relu/Relu_3": "layer1.relu", "relu"), else "OP_i". */
static void ox_scope(ox_ctx *c, size_t i)
{
    const Onnx__NodeProto *nd = c->node;
    for (size_t k = 0; k < nd->n_input; k++) {
        ox_val *v = nd->input[k][0] ? ox_find(c, nd->input[k]) : NULL;
        const char *dot = v && v->kind == OX_INIT && !v->constant ? strrchr(v->name, '.') : NULL;
        if (dot && dot > v->name && v->init->data_type == OX_FLOAT) {
            nn_graph_set_scope(c->g, "%.*s", (int)(dot - v->name), v->name);
            return;
        }
    }
    const char *nm = nd->name ? nd->name : "";
    while (*nm == '/')
        nm++;
    const char *slash = strrchr(nm, '/');
    size_t n = slash ? (size_t)(slash - nm) : 0;
    if (!n) {
        nn_graph_set_scope(c->g, "%s_%zu", nd->op_type, i);
        return;
    }
    char s[NN_NAME_MAX];
    snprintf(s, sizeof s, "%.*s", (int)(n < sizeof s - 1 ? n : sizeof s - 1), nm);
    for (char *p = s; *p; p++)
        *p = *p == '/' ? '.' : *p;
    nn_graph_set_scope(c->g, "%s", s);
}

/* The graph's input: the first graph input that is not an initializer. */
static np_status ox_input(ox_ctx *c, const Onnx__GraphProto *gp, int64_t batch, nn_model *m,
                          nn_tensor **x)
{
    const Onnx__ValueInfoProto *in = NULL;
    for (size_t i = 0; i < gp->n_input && !in; i++) {
        if (!gp->input[i]->name)
            continue;
        ox_val *v = ox_find(c, gp->input[i]->name);
        if (!v || v->kind != OX_INIT)
            in = gp->input[i];
    }
    if (!in)
        return ox_fail(c, NP_ERR_MISSING, "the graph has no input besides its initializers");
    const Onnx__TypeProto *tp = in->type;
    if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type->shape)
        return ox_fail(c, NP_ERR_MISSING, "input '%s' has no tensor type with a shape", in->name);
    const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
    int et = tt->elem_type;
    if (et != OX_FLOAT && et != OX_INT64 && et != OX_INT32)
        return ox_fail(c, NP_ERR_TYPE, "input '%s': element type %d (float images or features, "
                       "or integer tokens, are read)", in->name, et);
    size_t nd = tt->shape->n_dim;
    int64_t ne[NN_MAX_DIMS];
    if (nd < 1 || nd > NN_MAX_DIMS)
        return ox_fail(c, NP_ERR_RANGE, "input '%s' has %zu dims (1 .. %d)", in->name, nd, NN_MAX_DIMS);
    for (size_t i = 0; i < nd; i++) {
        const Onnx__TensorShapeProto__Dimension *dm = tt->shape->dim[i];
        bool fixed = dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
        if (i == 0)
            ne[0] = batch ? batch : fixed && dm->dim_value > 0 ? dm->dim_value : 1;
        else if (!fixed || dm->dim_value < 1 || dm->dim_value > (1 << 24))
            return ox_fail(c, NP_ERR_RANGE, "input '%s': dim %zu is not a fixed size in 1 .. 2^24 "
                           "(only the batch may be symbolic)", in->name, i + 1);
        else
            ne[i] = dm->dim_value;
    }
    m->input = nn_input(c->g, in->name, et == OX_FLOAT ? NN_F32 : NN_I32, (int)nd, ne);
    m->seq = et != OX_FLOAT && nd >= 2 ? ne[1] : 1;
    m->batch = ne[0];
    *x = m->input && et == OX_FLOAT && c->dt != NN_F32 ? nn_cast(c->g, m->input, c->dt) : m->input;
    ox_val *v = ox_slot(c, in->name);
    v->kind = OX_TENSOR;
    v->t = *x;
    return *x ? NP_OK : nn_graph_status(c->g, c->err);
}

np_status nn_onnx_build(nn_graph *g, const nn_model_desc *d, int64_t batch, bool inference,
                        nn_dtype dt, struct nn_model *m, nn_tensor **logits, np_err *err)
{
    Onnx__ModelProto *mp;
    *logits = NULL;
    if (ox_decode(d->path, &mp, err) != NP_OK)
        return err->status;
    const Onnx__GraphProto *gp = mp->graph;
    ox_ctx c = {.path = d->path, .g = g, .dt = dt, .inference = inference, .err = err};
    size_t names = gp->n_initializer + gp->n_input + 1;
    for (size_t i = 0; i < gp->n_node; i++)
        names += gp->node[i]->n_output;
    for (c.cap = 64; c.cap < 2 * names; c.cap *= 2)
        ;
    c.vals = calloc(c.cap, sizeof *c.vals);
    np_status st = c.vals ? NP_OK : np_err_set(err, NP_ERR_NOMEM, "out of memory reading %s", d->path);
    for (size_t i = 0; i < gp->n_initializer && st == NP_OK; i++) {
        const Onnx__TensorProto *t = gp->initializer[i];
        if (!t->name || !t->name[0]) {
            st = np_err_at(err, NP_ERR_MISSING, d->path, 0, 0, "initializer %zu has no name", i + 1);
            break;
        }
        ox_val *v = ox_slot(&c, t->name);
        v->kind = OX_INIT;
        v->init = t;
    }
    nn_tensor *x = NULL;
    if (st == NP_OK)
        st = ox_input(&c, gp, batch, m, &x);
    for (size_t i = 0; i < gp->n_node && st == NP_OK; i++) {
        c.node = gp->node[i];
        c.node_i = (int)i;
        if (!c.node->op_type) {
            st = ox_fail(&c, NP_ERR_MISSING, "no operator");
            break;
        }
        ox_scope(&c, i);
        st = ox_node(&c);
        if (st == NP_OK)
            st = nn_graph_status(g, err);
        if (st != NP_OK && !err->file[0]) { /* an op's own error: said at the node */
            char msg[NP_ERR_MSG_MAX];
            snprintf(msg, sizeof msg, "%s", err->msg);
            st = ox_fail(&c, st, "%s", msg);
        }
    }
    c.node = NULL;
    if (st == NP_OK && (gp->n_output < 1 || !gp->output[0]->name))
        st = ox_fail(&c, NP_ERR_MISSING, "the graph has no (named) output");
    ox_val *out = st == NP_OK ? ox_find(&c, gp->output[0]->name) : NULL;
    if (st == NP_OK && (!out || !out->t || out->kind != OX_TENSOR))
        st = ox_fail(&c, NP_ERR_MISSING, "output '%s' is produced by no node", gp->output[0]->name);
    if (st == NP_OK) {
        nn_tensor *y = out->t;
        int64_t last = y->ne[y->ndim - 1];
        nn_graph_set_scope(g, "logits");
        *logits = y->ndim == 2 ? y : nn_reshape(g, y, 2, (int64_t[]){-1, last});
    }
    if (st != NP_OK && !err->file[0])
        snprintf(err->file, sizeof err->file, "%.*s", (int)sizeof err->file - 1, d->path);
    for (size_t i = 0; c.vals && i < c.cap; i++)
        free(c.vals[i].iv);
    free(c.vals);
    onnx__model_proto__free_unpacked(mp, NULL);
    return st;
}

#endif
