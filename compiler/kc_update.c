/* kc_update.c — two in-place updates of persistent buffers that parallel strategies add to a
 * step (framework/op_comm.c), on the vector family's streaming engine (kc_vec.h); fill is
 * kc_fill.c's:
 *
 *   grad_acc (acc, g)     acc += g: both read, added in fp32, rounded once to acc's type
 *                         (the framework adds in fp32 and rounds the result); written over
 *                         acc's tile
 *   copy_to (dst, src)    dst = src converted to dst's type (master -> model copies): src read,
 *                         dst only written
 *
 * Operands are the framework node's: the buffer first (in[0]; out[0] is it for an update in
 * place, or another tensor shaped like it). g and src need the buffer's element count, not
 * its shape (the framework's rule): a dense one is read as if shaped like the buffer. */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "kc_vec.h"

/* ---- the tiles ------------------------------------------------------------------------------ */

typedef struct ku_plan {
    nn_op op;
    isa_dtype dt;        /* the output's */
    int t0, t1;          /* scratch tiles (fp32) */
} ku_plan;

static kv_buf f32(uint64_t addr) { return (kv_buf){addr, ISA_BCAST_FULL, ISA_DTYPE_FP32}; }

/* a as fp32 in scratch tile tmp (a itself when it is fp32), in a's layout. */
static kv_buf to_f32(kc_ctx *x, const kv_tile *t, kv_buf a, uint64_t tmp)
{
    if (a.dt == ISA_DTYPE_FP32)
        return a;
    kv_cast(x, t, tmp, a, ISA_DTYPE_FP32);
    return (kv_buf){tmp, a.bcast, ISA_DTYPE_FP32};
}

static void update_tile(kc_ctx *x, const kv_tile *t, void *v)
{
    const ku_plan *u = v;
    kv_buf out = t->out[0];
    if (u->op == NN_OP_COPY_TO) {
        kv_cast(x, t, out.addr, t->in[0], u->dt);
        return;
    }
    /* GRAD_ACC */
    kv_buf a = to_f32(x, t, t->in[0], t->tmp[u->t0]);
    kv_buf g = to_f32(x, t, t->in[1], t->tmp[u->t1]);
    uint64_t sum = u->dt == ISA_DTYPE_FP32 ? out.addr : t->tmp[u->t0];
    kv_binary(x, t, ISA_OP_VPU_ADD, sum, a, g);
    if (sum != out.addr)
        kv_cast(x, t, out.addr, f32(sum), u->dt);
}

/* ---- the kernels ---------------------------------------------------------------------------- */

static bool is_float(nn_dtype t) { return t == NN_F32 || t == NN_BF16 || t == NN_F16; }

static bool dense(const kc_tensor *t)
{
    int64_t s = (int64_t)nn_dtype_size(t->dtype);
    for (int d = t->ndim - 1; d >= 0; d--) {
        if (t->shape[d] != 1 && t->stride[d] != s)
            return false;
        s *= t->shape[d];
    }
    return true;
}

/* src (as many elements as like) read as if shaped like like: itself when the shapes agree,
 * else a dense view of its bytes. */
static np_status shaped_like(kc_ctx *x, const kc_tensor *src, const kc_tensor *like,
                             const char *what, kc_tensor *out)
{
    if (kc_tensor_numel(src) != kc_tensor_numel(like))
        return kc_fail(x, NP_ERR_INCONSISTENT, "%s has %" PRId64 " elements, the buffer %" PRId64,
                       what, kc_tensor_numel(src), kc_tensor_numel(like));
    if (src->ndim == like->ndim &&
        !memcmp(src->shape, like->shape, sizeof(int64_t) * (size_t)src->ndim)) {
        *out = *src;
        return NP_OK;
    }
    if (!dense(src))
        return kc_fail(x, NP_ERR_INCONSISTENT, "%s is shaped unlike the buffer and not dense",
                       what);
    kc_tensor_dense(out, src->addr, src->dtype, like->ndim, like->shape);
    return NP_OK;
}

static np_status update_compile(kc_ctx *x)
{
    const kc_kernel *k = x->k;
    const kc_tensor *buf = &k->in[0], *o = &k->out[0];
    kv_plan p;
    ku_plan u = {.op = k->op, .dt = kc_isa_dtype(o->dtype), .t0 = -1, .t1 = -1};
    memset(&p, 0, sizeof p);
    if (o->ndim != buf->ndim || memcmp(o->shape, buf->shape, sizeof(int64_t) * (size_t)o->ndim) ||
        o->dtype != buf->dtype)
        return kc_fail(x, NP_ERR_INCONSISTENT, "out must be shaped and typed like the buffer it "
                       "updates (input 0)");
    p.ndim = o->ndim;
    memcpy(p.shape, o->shape, sizeof p.shape);
    p.n_out = 1;
    p.out[0] = *o;
    if (k->op == NN_OP_GRAD_ACC) {
        if (!is_float(buf->dtype) || !is_float(k->in[1].dtype))
            return kc_fail(x, NP_ERR_INCONSISTENT, "accumulates float values (%s += %s)",
                           nn_dtype_name(buf->dtype), nn_dtype_name(k->in[1].dtype));
        p.n_in = 2;
        p.in[0] = *buf;
        if (shaped_like(x, &k->in[1], buf, "g", &p.in[1]) != NP_OK)
            return kc_status(x);
        p.out_over[0] = 1; /* written over acc's tile */
        u.t0 = p.n_tmp, p.tmp_bytes[p.n_tmp++] = 4;
        u.t1 = p.n_tmp, p.tmp_bytes[p.n_tmp++] = 4;
        x->res->flops = (uint64_t)kc_tensor_numel(buf);
    } else { /* COPY_TO: src only is read */
        if (is_float(buf->dtype) != is_float(k->in[1].dtype))
            return kc_fail(x, NP_ERR_INCONSISTENT, "copies %s into %s: one float and one "
                           "integer type", nn_dtype_name(k->in[1].dtype),
                           nn_dtype_name(buf->dtype));
        p.n_in = 1;
        if (shaped_like(x, &k->in[1], buf, "src", &p.in[0]) != NP_OK)
            return kc_status(x);
    }
    p.max_tile = (uint64_t)kc_attr_int(x, "tile");
    p.tile = update_tile;
    p.ctx = &u;
    p.what = nn_op_name(k->op);
    if (kv_emit(x, &p) != NP_OK)
        return kc_status(x);
    /* the minimum: what the op must read (copy_to: src only) and write */
    uint64_t rd = k->op == NN_OP_COPY_TO ? kc_tensor_bytes(&k->in[1])
                                         : kc_tensor_bytes(buf) + kc_tensor_bytes(&k->in[1]);
    x->res->hbm_bytes_min = kc_tensor_bytes(o) + rd;
    return kc_status(x);
}

/* ---- the framework's computation (checks) --------------------------------------------------- */

/* The update on a copy of the buffer (its node writes its source in place). */
static np_status update_reference(nn_graph *g, const kc_kernel *k, nn_tensor *const *in,
                                  nn_tensor **out, np_err *err)
{
    nn_tensor *buf = nn_leaf(g, "buf", NN_ROLE_GRADIENT, in[0]->dtype, in[0]->ndim, in[0]->ne);
    if (buf && in[0]->data && !nn_tensor_set(buf, in[0]->data))
        return np_err_set(err, NP_ERR_NOMEM, "out of memory");
    nn_tensor *y = k->op == NN_OP_GRAD_ACC ? nn_grad_accumulate(g, buf, in[1])
                                           : nn_copy_to(g, buf, in[1]);
    out[0] = y;
    return y ? NP_OK : nn_graph_status(g, err);
}

/* ---- `npusim kernel --op` ------------------------------------------------------------------- */

static np_status update_build(kc_prog *p, const kc_spec *s, kc_kernel *k, np_err *err)
{
    const kc_spec_val *sh = kc_spec_get(s, "shape"), *dt = kc_spec_get(s, "dtype");
    const kc_spec_val *sd = kc_spec_get(s, "sdtype");
    if (!sh || !sh->ndim)
        return np_err_set(err, NP_ERR_MISSING, "%s: give the buffer's shape (shape=AxBx...)",
                          nn_op_name(s->op));
    memset(k, 0, sizeof *k);
    k->op = s->op, k->n_in = 2, k->n_out = 1;
    nn_dtype t = (nn_dtype)dt->i, st = sd && sd->i >= 0 ? (nn_dtype)sd->i : t;
    if (kc_tensor_fresh(p, &k->in[0], t, sh->ndim, sh->shape, err) != NP_OK ||
        kc_tensor_fresh(p, &k->in[1], st, sh->ndim, sh->shape, err) != NP_OK)
        return err->status;
    k->out[0] = k->in[0]; /* in place */
    return NP_OK;
}

/* ---- the table rows ------------------------------------------------------------------------- */

#define KU_N(a) (unsigned)(sizeof a / sizeof a[0])
#define KU_TILE {"tile", KC_ATTR_INT, 0, 0, 1 << 30, "tile: elements of a tile at most (0: chosen)"}

static const kc_attr_def update_keys[] = {
    {"shape", KC_ATTR_SHAPE, KC_REQUIRED, 0, 0, "the buffer's shape, AxBx..."},
    {"dtype", KC_ATTR_DTYPE, NN_F32, 0, 0, "the buffer's element type"},
    {"sdtype", KC_ATTR_DTYPE, -1, 0, 0,
     "grad_acc's g, copy_to's src: its element type (default: dtype)"},
};
static const kc_attr_def plain_attrs[] = {KU_TILE};
#define KU_DOC "the streaming engine (kc_vec.h): the buffer's tiles through two buffer sets per " \
               "core, written over in place"

const kc_kernel_def kc_grad_acc_def = {
    .op = NN_OP_GRAD_ACC, .n_in = 2, .n_out = 1, .attrs = plain_attrs,
    .n_attrs = KU_N(plain_attrs), .compile = update_compile, .keys = update_keys,
    .n_keys = KU_N(update_keys), .build = update_build, .reference = update_reference,
    .doc = KU_DOC "; acc + g in fp32, rounded once",
};

const kc_kernel_def kc_copy_to_def = {
    .op = NN_OP_COPY_TO, .n_in = 2, .n_out = 1, .attrs = plain_attrs,
    .n_attrs = KU_N(plain_attrs), .compile = update_compile, .keys = update_keys,
    .n_keys = KU_N(update_keys), .build = update_build, .reference = update_reference,
    .doc = KU_DOC "; src converted to the buffer's type, the buffer only written",
};
