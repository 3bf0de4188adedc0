/* kc_optim.c — the optimizer updates (sgd_update with momentum, adam_update, adamw_update) as
 * one streaming pass over the parameter, its gradient and its state (kc_vec.h), in place:
 * the outputs are the inputs themselves (or other buffers laid out like them).
 *
 * Operands, as the framework's nodes (framework/optim.c): in p, g, mom (sgd) or p, g, m, v
 * (adam, adamw); out p, mom or p, m, v. Mixed precision: p and the state are fp32 (the
 * master weights); g may be bf16, fp16 or fp32 and is converted to fp32 in the scratchpad.
 * Everything is computed in fp32 on the vector unit, each operation rounded once:
 *
 *   sgd     g' = g + wd p;  mom = g' (step 1) or mu mom + g';  p = p - lr mom
 *   adam    g' = g + wd p;  m = b1 m + (1 - b1) g';  v = b2 v + (1 - b2) g'^2;
 *           p = p - (lr / c1) m / (sqrt(v (1 / c2)) + eps),  c1 = 1 - b1^t, c2 = 1 - b2^t
 *   adamw   as adam with g' = g and p (1 - lr wd) before the step (decoupled decay)
 *
 * The step t (attribute `step`, the framework's count after this update) fixes the bias
 * corrections at compile time. The framework keeps its intermediates in double and rounds
 * only what it stores, so the values differ by the roundings of the intermediates
 * (docs/compiler.md gives the bound).
 */
#include <math.h>
#include <string.h>

#include "kc_vec.h"

typedef struct ko_plan {
    nn_op op;
    double lr, mu, wd, b1, b2, eps;
    int64_t step;
    bool cast_g;
} ko_plan;

static kv_buf f32(uint64_t addr) { return (kv_buf){addr, ISA_BCAST_FULL, ISA_DTYPE_FP32}; }

static void optim_tile(kc_ctx *x, const kv_tile *t, void *ctx)
{
    const ko_plan *o = ctx;
    kv_buf p = t->in[0], g = t->in[1];
    uint64_t t0 = t->tmp[0], t1 = t->tmp[1], t2 = t->tmp[2];
    if (o->cast_g) {
        kv_cast(x, t, t0, g, ISA_DTYPE_FP32);
        g = f32(t0);
    }
    bool decoupled = o->op == NN_OP_ADAMW_UPDATE;
    if (o->wd != 0 && !decoupled) { /* g' = g + wd p */
        kv_scalar(x, t, ISA_OP_VPU_MULS, t1, p, (float)o->wd);
        kv_binary(x, t, ISA_OP_VPU_ADD, t0, g, f32(t1));
        g = f32(t0);
    }
    if (o->op == NN_OP_SGD_UPDATE) {
        kv_buf mom = t->in[2], mo = t->out[1];
        if (o->step == 1) {
            kv_unary(x, t, ISA_OP_VPU_COPY, mo.addr, g);
        } else {
            kv_scalar(x, t, ISA_OP_VPU_MULS, mo.addr, mom, (float)o->mu);
            kv_binary(x, t, ISA_OP_VPU_ADD, mo.addr, f32(mo.addr), g);
        }
        kv_scalar(x, t, ISA_OP_VPU_MULS, t1, f32(mo.addr), (float)o->lr);
        kv_binary(x, t, ISA_OP_VPU_SUB, t->out[0].addr, p, f32(t1));
        return;
    }
    kv_buf m = t->in[2], v = t->in[3], mo = t->out[1], vo = t->out[2];
    double c1 = 1.0 - pow(o->b1, (double)o->step), c2 = 1.0 - pow(o->b2, (double)o->step);
    kv_scalar(x, t, ISA_OP_VPU_MULS, mo.addr, m, (float)o->b1);
    kv_scalar(x, t, ISA_OP_VPU_MULS, t1, g, (float)(1.0 - o->b1));
    kv_binary(x, t, ISA_OP_VPU_ADD, mo.addr, f32(mo.addr), f32(t1));
    kv_scalar(x, t, ISA_OP_VPU_MULS, vo.addr, v, (float)o->b2);
    kv_binary(x, t, ISA_OP_VPU_MUL, t1, g, g);
    kv_scalar(x, t, ISA_OP_VPU_MULS, t1, f32(t1), (float)(1.0 - o->b2));
    kv_binary(x, t, ISA_OP_VPU_ADD, vo.addr, f32(vo.addr), f32(t1));
    kv_scalar(x, t, ISA_OP_VPU_MULS, t1, f32(vo.addr), (float)(1.0 / c2));
    kv_unary(x, t, ISA_OP_VPU_SQRT, t1, f32(t1));
    kv_scalar(x, t, ISA_OP_VPU_ADDS, t1, f32(t1), (float)o->eps);
    kv_scalar(x, t, ISA_OP_VPU_MULS, t2, f32(mo.addr), (float)(o->lr / c1));
    kv_binary(x, t, ISA_OP_VPU_DIV, t1, f32(t2), f32(t1));
    if (decoupled && o->wd != 0) {
        kv_scalar(x, t, ISA_OP_VPU_MULS, t2, p, (float)(1.0 - o->lr * o->wd));
        p = f32(t2);
    }
    kv_binary(x, t, ISA_OP_VPU_SUB, t->out[0].addr, p, f32(t1));
}

static bool same_shape(const kc_tensor *a, const kc_tensor *b)
{
    return a->ndim == b->ndim && !memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->ndim);
}

static np_status optim_compile(kc_ctx *x)
{
    const kc_kernel *k = x->k;
    ko_plan o = {.op = k->op, .lr = kc_attr_real(x, "lr"), .wd = kc_attr_real(x, "weight_decay"),
                 .step = kc_attr_int(x, "step")};
    if (k->op == NN_OP_SGD_UPDATE) {
        o.mu = kc_attr_real(x, "momentum");
    } else {
        o.b1 = kc_attr_real(x, "beta1"), o.b2 = kc_attr_real(x, "beta2");
        o.eps = kc_attr_real(x, "eps");
    }
    for (int i = 0; i < k->n_in; i++)
        if (!same_shape(&k->in[i], &k->in[0]))
            return kc_fail(x, NP_ERR_INCONSISTENT, "input %d differs from the parameter's shape",
                           i);
    for (int i = 0; i < k->n_out; i++)
        if (!same_shape(&k->out[i], &k->in[0]) ||
            k->out[i].dtype != k->in[i ? i + 1 : 0].dtype)
            return kc_fail(x, NP_ERR_INCONSISTENT, "output %d must be shaped and typed like "
                           "input %d (the tensor it updates)", i, i ? i + 1 : 0);
    for (int i = 0; i < k->n_in; i++)
        if (i != 1 && k->in[i].dtype != NN_F32)
            return kc_fail(x, NP_ERR_INCONSISTENT, "the parameter and its state are fp32 master "
                           "copies (input %d is %s)", i, nn_dtype_name(k->in[i].dtype));
    nn_dtype gd = k->in[1].dtype;
    if (gd != NN_F32 && gd != NN_BF16 && gd != NN_F16)
        return kc_fail(x, NP_ERR_INCONSISTENT, "the gradient is %s; it must be a float type",
                       nn_dtype_name(gd));
    o.cast_g = gd != NN_F32;
    kv_plan p;
    memset(&p, 0, sizeof p);
    p.ndim = k->in[0].ndim;
    memcpy(p.shape, k->in[0].shape, sizeof p.shape);
    p.n_in = k->n_in, p.n_out = k->n_out;
    for (int i = 0; i < k->n_in; i++)
        p.in[i] = k->in[i];
    for (int i = 0; i < k->n_out; i++)
        p.out[i] = k->out[i];
    /* the updated parameter and state are written over their inputs' tiles */
    for (int i = 0; i < k->n_out; i++)
        p.out_over[i] = 1 + (i ? i + 1 : 0);
    p.n_tmp = 3;
    p.tmp_bytes[0] = p.tmp_bytes[1] = p.tmp_bytes[2] = 4;
    p.max_tile = (uint64_t)kc_attr_int(x, "tile");
    p.tile = optim_tile;
    p.ctx = &o;
    p.what = nn_op_name(k->op);
    if (kv_emit(x, &p) != NP_OK)
        return kc_status(x);
    x->res->flops = (uint64_t)((k->op == NN_OP_SGD_UPDATE ? 4 : 12) * kc_tensor_numel(&k->in[0]));
    return kc_status(x);
}

/* The framework's update on copies of the inputs (its nodes write their sources in place);
 * outputs: the updated parameter and state. */
static double attr(const kc_kernel *k, const kc_kernel_def *d, const char *name)
{
    const kc_attr *a = kc_kernel_attr(k, name);
    if (a)
        return a->f;
    for (unsigned i = 0; i < d->n_attrs; i++)
        if (!strcmp(d->attrs[i].name, name))
            return d->attrs[i].dflt;
    return 0;
}

static np_status optim_reference(nn_graph *g, const kc_kernel *k, nn_tensor *const *in,
                                 nn_tensor **out, np_err *err)
{
    const kc_kernel_def *d = kc_kernel_find(k->op);
    nn_tensor *c[4];
    for (int i = 0; i < k->n_in; i++) {
        c[i] = nn_leaf(g, "state", i == 1 ? NN_ROLE_GRADIENT : NN_ROLE_OPTSTATE, in[i]->dtype,
                       in[i]->ndim, in[i]->ne);
        if (c[i] && in[i]->data && !nn_tensor_set(c[i], in[i]->data))
            return np_err_set(err, NP_ERR_NOMEM, "out of memory");
    }
    double fp[NN_MAX_FPARAMS] = {attr(k, d, "lr")};
    if (k->op == NN_OP_SGD_UPDATE) {
        fp[1] = attr(k, d, "momentum"), fp[2] = attr(k, d, "weight_decay");
    } else {
        fp[1] = attr(k, d, "beta1"), fp[2] = attr(k, d, "beta2"), fp[3] = attr(k, d, "eps");
        fp[4] = attr(k, d, "weight_decay");
    }
    int64_t ip[NN_MAX_IPARAMS] = {(int64_t)attr(k, d, "step") - 1}; /* counted up by the node */
    nn_tensor *u = nn_node(g, k->op, k->n_in, c, ip, fp);
    if (!u)
        return nn_graph_status(g, err);
    out[0] = u;
    for (int i = 1; i < k->n_out; i++)
        out[i] = c[i + 1];
    return NP_OK;
}

/* ---- `npusim kernel --op` --------------------------------------------------------------------- */

static np_status optim_build(kc_prog *p, const kc_spec *s, kc_kernel *k, np_err *err)
{
    const kc_spec_val *sh = kc_spec_get(s, "shape"), *gd = kc_spec_get(s, "gdtype");
    if (!sh || !sh->ndim)
        return np_err_set(err, NP_ERR_MISSING, "%s: give the parameter's shape (shape=AxB...)",
                          nn_op_name(s->op));
    memset(k, 0, sizeof *k);
    k->op = s->op;
    k->n_in = s->op == NN_OP_SGD_UPDATE ? 3 : 4;
    k->n_out = k->n_in - 1;
    for (int i = 0; i < k->n_in; i++) {
        kc_tensor *t = &k->in[i];
        kc_tensor_dense(t, 0, i == 1 && gd ? (nn_dtype)gd->i : NN_F32, sh->ndim, sh->shape);
        if (kc_prog_bss(p, NULL, kc_tensor_bytes(t), &t->addr, err) != NP_OK)
            return err->status;
    }
    k->out[0] = k->in[0];
    for (int i = 1; i < k->n_out; i++)
        k->out[i] = k->in[i + 1];
    return NP_OK;
}

static const kc_attr_def optim_keys[] = {
    {"shape", KC_ATTR_SHAPE, KC_REQUIRED, 0, 0, "the parameter's shape, AxBx..."},
    {"gdtype", KC_ATTR_DTYPE, NN_BF16, 0, 0, "the gradient's type (the state is fp32)"},
};

static const kc_attr_def sgd_attrs[] = {
    {"lr", KC_ATTR_REAL, 1e-2, 0, HUGE_VAL, "the learning rate"},
    {"momentum", KC_ATTR_REAL, 0, 0, 1, "the momentum (PyTorch's SGD)"},
    {"weight_decay", KC_ATTR_REAL, 0, 0, HUGE_VAL, "L2 weight decay, added to the gradient"},
    {"step", KC_ATTR_INT, 1, 1, 4e18, "the step this update takes (1: the first)"},
    {"tile", KC_ATTR_INT, 0, 0, 1 << 30, "tile: elements of a tile at most (0: chosen)"},
};

static const kc_attr_def adam_attrs[] = {
    {"lr", KC_ATTR_REAL, 1e-3, 0, HUGE_VAL, "the learning rate"},
    {"beta1", KC_ATTR_REAL, 0.9, 0, 0.999999, "the first moment's decay"},
    {"beta2", KC_ATTR_REAL, 0.999, 0, 0.999999, "the second moment's decay"},
    {"eps", KC_ATTR_REAL, 1e-8, 0, 1, "added to the denominator"},
    {"weight_decay", KC_ATTR_REAL, 0, 0, HUGE_VAL, "weight decay (adam: L2 in the gradient; "
                                                   "adamw: decoupled)"},
    {"step", KC_ATTR_INT, 1, 1, 4e18,
     "the step this update takes (bias corrections 1 - beta^step)"},
    {"tile", KC_ATTR_INT, 0, 0, 1 << 30, "tile: elements of a tile at most (0: chosen)"},
};

#define KO_N(a) (unsigned)(sizeof a / sizeof a[0])
#define KO_DOC "one streaming pass in place (kc_vec.h): parameter, gradient and state tiles " \
               "double-buffered, the update in fp32 on the vector unit"

const kc_kernel_def kc_sgd_update_def = {
    .op = NN_OP_SGD_UPDATE, .n_in = 3, .n_out = 2, .attrs = sgd_attrs, .n_attrs = KO_N(sgd_attrs),
    .compile = optim_compile, .keys = optim_keys, .n_keys = KO_N(optim_keys),
    .build = optim_build, .doc = KO_DOC, .reference = optim_reference,
};
const kc_kernel_def kc_adam_update_def = {
    .op = NN_OP_ADAM_UPDATE, .n_in = 4, .n_out = 3, .attrs = adam_attrs,
    .n_attrs = KO_N(adam_attrs), .compile = optim_compile, .keys = optim_keys,
    .n_keys = KO_N(optim_keys), .build = optim_build, .doc = KO_DOC, .reference = optim_reference,
};
const kc_kernel_def kc_adamw_update_def = {
    .op = NN_OP_ADAMW_UPDATE, .n_in = 4, .n_out = 3, .attrs = adam_attrs,
    .n_attrs = KO_N(adam_attrs), .compile = optim_compile, .keys = optim_keys,
    .n_keys = KO_N(optim_keys), .build = optim_build, .doc = KO_DOC, .reference = optim_reference,
};
