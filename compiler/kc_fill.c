/* kc_fill.c — fill (a persistent buffer set to one value in place: the step's zeroing of the
 * gradient accumulators) and one_hot (integer labels, minus an optional offset, as rows of
 * 0/1: the vocabulary-parallel loss's mask), on the streaming tile engine (kc_vec.h).
 *
 *   fill      out = v: per tile one vpu.fill of the output tile, stored (no load); out is the
 *             buffer (in place, as a plan writes it) or any tensor shaped like it
 *   one_hot   labels [..., N] -> out [..., N, C]: per tile the labels as a column (converted to
 *             fp32), vpu.iota of the class index along the row (+ the offset, broadcast),
 *             vpu.cmpeq, converted to the output's dtype
 *
 * Values: fill is exact (v rounded once to the buffer's dtype, as the framework stores it);
 * one_hot is exact (0 and 1), for labels and offsets below 2^24 (compared in fp32). */
#include <math.h>
#include <string.h>

#include "kc_vec.h"

typedef struct kf_ctx {
    double v;
    int off_in; /* one_hot: the offset's kv input, or -1 */
} kf_ctx;

static void fill_tile(kc_ctx *x, const kv_tile *t, void *ctx)
{
    const kf_ctx *c = ctx;
    ISA_EMIT(x->e, VPU_FILL, isa_spad(0, t->out[0].addr), isa_f32((float)c->v),
             isa_imm((int64_t)t->rows), isa_imm((int64_t)t->cols), isa_enum(t->out[0].dt));
}

static np_status fill_compile(kc_ctx *x)
{
    const kc_kernel *k = x->k;
    if (k->out[0].ndim != k->in[0].ndim ||
        memcmp(k->out[0].shape, k->in[0].shape, sizeof(int64_t) * (size_t)k->in[0].ndim))
        return kc_fail(x, NP_ERR_INCONSISTENT, "the output must be shaped like the buffer (it "
                       "is the buffer, filled in place, or a copy of its shape)");
    kv_plan p;
    memset(&p, 0, sizeof p);
    kf_ctx c = {.v = kc_attr_real(x, "v")};
    p.ndim = k->out[0].ndim;
    memcpy(p.shape, k->out[0].shape, sizeof p.shape);
    p.n_out = 1;
    p.out[0] = k->out[0];
    p.tile = fill_tile;
    p.ctx = &c;
    p.what = "fill";
    if (kv_emit(x, &p) != NP_OK)
        return kc_status(x);
    x->res->hbm_bytes_min = kc_tensor_bytes(&k->out[0]); /* written once, never read */
    return kc_status(x);
}

static void onehot_tile(kc_ctx *x, const kv_tile *t, void *ctx)
{
    const kf_ctx *c = ctx;
    const isa_dtype f = ISA_DTYPE_FP32;
    uint64_t lab = t->tmp[0], col = t->tmp[1], m = t->tmp[3];
    kv_cast(x, t, lab, t->in[0], f); /* the labels, a column */
    ISA_EMIT(x->e, VPU_IOTA, isa_spad(0, col), t->pos[0], isa_imm(t->pos_row[0]),
             isa_imm(t->pos_col[0]), isa_imm((int64_t)t->rows), isa_imm((int64_t)t->cols),
             isa_enum(f));
    if (c->off_in >= 0) { /* class + offset == label */
        kv_cast(x, t, t->tmp[2], t->in[c->off_in], f);
        kv_binary(x, t, ISA_OP_VPU_ADD, col, (kv_buf){col, ISA_BCAST_FULL, f},
                  (kv_buf){t->tmp[2], t->in[c->off_in].bcast, f});
    }
    kv_binary(x, t, ISA_OP_VPU_CMPEQ, m, (kv_buf){col, ISA_BCAST_FULL, f},
              (kv_buf){lab, t->in[0].bcast, f});
    kv_cast(x, t, t->out[0].addr, (kv_buf){m, ISA_BCAST_FULL, f}, t->out[0].dt);
}

static np_status onehot_compile(kc_ctx *x)
{
    const kc_kernel *k = x->k;
    const kc_tensor *o = &k->out[0], *lab = &k->in[0];
    bool shape_ok = o->ndim == lab->ndim + 1;
    for (int d = 0; shape_ok && d < lab->ndim; d++)
        shape_ok = o->shape[d] == lab->shape[d];
    if (!shape_ok)
        return kc_fail(x, NP_ERR_INCONSISTENT, "the output must be the labels' shape plus the "
                       "classes");
    if ((lab->dtype != NN_I32 && lab->dtype != NN_I8) ||
        (k->n_in > 1 && k->in[1].dtype != NN_I32 && k->in[1].dtype != NN_I8))
        return kc_fail(x, NP_ERR_INCONSISTENT, "labels and offset must be i32 or i8");
    if (k->n_in > 1 && kc_tensor_numel(&k->in[1]) != 1)
        return kc_fail(x, NP_ERR_INCONSISTENT, "the offset must be one element");
    kv_plan p;
    memset(&p, 0, sizeof p);
    kf_ctx c = {.off_in = k->n_in > 1 ? 1 : -1};
    p.ndim = o->ndim;
    memcpy(p.shape, o->shape, sizeof p.shape);
    p.n_in = k->n_in;
    p.in[0] = *lab; /* broadcast along the classes */
    p.in[0].ndim = o->ndim;
    p.in[0].shape[o->ndim - 1] = o->shape[o->ndim - 1];
    p.in[0].stride[o->ndim - 1] = 0;
    if (k->n_in > 1) { /* the offset, everywhere */
        p.in[1] = k->in[1];
        p.in[1].ndim = o->ndim;
        for (int d = 0; d < o->ndim; d++)
            p.in[1].shape[d] = o->shape[d], p.in[1].stride[d] = 0;
    }
    p.n_out = 1;
    p.out[0] = *o;
    p.n_pos = 1; /* the class index */
    p.pos_stride[0][o->ndim - 1] = 1;
    p.n_tmp = 4;
    for (int i = 0; i < 4; i++)
        p.tmp_bytes[i] = 4;
    p.tile = onehot_tile;
    p.ctx = &c;
    p.what = "one_hot";
    return kv_emit(x, &p);
}

/* ---- the framework's nodes ------------------------------------------------------------------- */

static np_status fill_reference(nn_graph *g, const kc_kernel *k, nn_tensor *const *in,
                                nn_tensor **out, np_err *err)
{
    double v = 0;
    for (int i = 0; i < k->n_attrs; i++)
        if (!strcmp(k->attrs[i].name, "v"))
            v = k->attrs[i].f;
    out[0] = nn_fill(g, in[0], v);
    return out[0] ? NP_OK : nn_graph_status(g, err);
}

static np_status fill_from_node(const nn_tensor *t, kc_kernel *k, np_err *err)
{
    if (k->n_attrs >= KC_MAX_ATTRS)
        return np_err_set(err, NP_ERR_RANGE, "fill: no room for its attribute");
    k->attrs[k->n_attrs++] = KC_REAL("v", t->fp[0]);
    return NP_OK;
}

static np_status onehot_reference(nn_graph *g, const kc_kernel *k, nn_tensor *const *in,
                                  nn_tensor **out, np_err *err)
{
    const kc_tensor *o = &k->out[0];
    out[0] = nn_one_hot(g, in[0], k->n_in > 1 ? in[1] : NULL, o->shape[o->ndim - 1], o->dtype);
    return out[0] ? NP_OK : nn_graph_status(g, err);
}

/* ---- `npusim kernel --op` -------------------------------------------------------------------- */

static np_status fill_build(kc_prog *p, const kc_spec *s, kc_kernel *k, np_err *err)
{
    const kc_spec_val *sh = kc_spec_get(s, "shape"), *dt = kc_spec_get(s, "dtype");
    memset(k, 0, sizeof *k);
    k->op = NN_OP_FILL, k->n_in = 1, k->n_out = 1;
    np_status st = kc_tensor_fresh(p, &k->in[0], (nn_dtype)dt->i, sh->ndim, sh->shape, err);
    k->out[0] = k->in[0];
    return st;
}

static np_status onehot_build(kc_prog *p, const kc_spec *s, kc_kernel *k, np_err *err)
{
    const kc_spec_val *sh = kc_spec_get(s, "shape"), *dt = kc_spec_get(s, "dtype");
    const kc_spec_val *cl = kc_spec_get(s, "classes"), *off = kc_spec_get(s, "offset");
    if (sh->ndim + 1 > KC_MAX_DIMS)
        return np_err_set(err, NP_ERR_RANGE, "one_hot: the labels have too many dims");
    memset(k, 0, sizeof *k);
    k->op = NN_OP_ONE_HOT, k->n_in = off->i ? 2 : 1, k->n_out = 1;
    int64_t o[KC_MAX_DIMS];
    memcpy(o, sh->shape, sizeof(int64_t) * (size_t)sh->ndim);
    o[sh->ndim] = cl->i;
    np_status st = kc_tensor_fresh(p, &k->in[0], NN_I32, sh->ndim, sh->shape, err);
    if (st == NP_OK && off->i)
        st = kc_tensor_fresh(p, &k->in[1], NN_I32, 0, NULL, err);
    return st == NP_OK ? kc_tensor_fresh(p, &k->out[0], (nn_dtype)dt->i, sh->ndim + 1, o, err) : st;
}

/* The labels lie below classes + offset (seeded checks draw them from there; the offset input
 * itself is drawn below 1: zero). */
static int64_t onehot_index_bound(const kc_kernel *k, int in)
{
    return in == 0 ? k->out[0].shape[k->out[0].ndim - 1] : 1;
}

static const kc_attr_def fill_attrs[] = {
    {"v", KC_ATTR_REAL, 0, -HUGE_VAL, HUGE_VAL, "the value every element gets"},
};
static const kc_attr_def fill_keys[] = {
    {"shape", KC_ATTR_SHAPE, KC_REQUIRED, 0, 0, "the buffer's shape, AxBx..."},
    {"dtype", KC_ATTR_DTYPE, NN_F32, 0, 0, "its element type"},
};
static const kc_attr_def onehot_keys[] = {
    {"shape", KC_ATTR_SHAPE, KC_REQUIRED, 0, 0, "the labels' shape, AxBx..."},
    {"classes", KC_ATTR_INT, KC_REQUIRED, 1, 16777216, "classes C: the output's last dim"},
    {"offset", KC_ATTR_BOOL, 0, 0, 1, "an i32 offset input subtracted from the labels"},
    {"dtype", KC_ATTR_DTYPE, NN_F32, 0, 0, "the output's element type"},
};

const kc_kernel_def kc_fill_def = {
    .op = NN_OP_FILL, .n_in = 1, .n_out = 1, .attrs = fill_attrs, .n_attrs = 1,
    .compile = fill_compile, .keys = fill_keys, .n_keys = 2, .build = fill_build,
    .doc = "the streaming tile engine: vpu.fill per tile, stored in place (no load)",
    .reference = fill_reference, .from_node = fill_from_node,
};
const kc_kernel_def kc_one_hot_def = {
    .op = NN_OP_ONE_HOT, .n_in = -1, .n_out = 1, .compile = onehot_compile, .keys = onehot_keys,
    .n_keys = 4, .build = onehot_build,
    .doc = "the streaming tile engine: labels as a column, vpu.iota of the class (+ offset), "
           "vpu.cmpeq",
    .reference = onehot_reference, .index_bound = onehot_index_bound,
};
