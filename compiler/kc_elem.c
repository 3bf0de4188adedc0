/* kc_elem.c — every elementwise op of ops.def (add, sub, mul, div, scale, relu, gelu, silu,
 * tanh, exp, log, cast, dropout, causal_mask and the activation gradients) and fused chains of
 * them: the op is the chain's first step, its epilogue (kc_epi, all steps: KC_DEF_EPILOGUE_ALL)
 * the others. The streaming engine (kc_vec.h) moves the tiles; this file emits one tile's
 * vector work, step after step on a running value kept in the scratchpad, so a chain of any
 * length makes one pass over HBM: its inputs read once, its output written once.
 *
 * Each step computes at the dtype the framework's node would have (the inputs' dtype; after a
 * cast, its target) and rounds once, as the framework does after every node, so a chain's
 * values are the framework's op-by-op values (on int8 and int32 only the steps whose results
 * are integers of the type: int_refusal). Broadcast operands are read as a row, a column
 * or a scalar of the tile; where the vector unit cannot broadcast the operand that needs it
 * (only b of a binary op broadcasts) the step is turned around (a commutative op; a - b as
 * -(b - a)) or the operand is first made a full tile (vpu.sel of a zero mask: exact).
 *
 *   dropout       vpu.rand of the element's row-major index (a position of the engine) under
 *                 the seed, vpu.cmpges with p: the framework's mask (base/philox.h); then
 *                 x * (1 / (1 - p)) * mask
 *   causal_mask   vpu.iota of column - row, vpu.cmples 0, vpu.sels with the fill
 *   relu_grad     vpu.cmpgts 0 (and, clamped, vpu.cmplts clamp + vpu.sels) as the mask, then
 *                 vpu.sels of dy
 *   gelu_grad, silu_grad, tanh_grad    vpu.dgelu, vpu.dsilu, vpu.dtanh
 */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "kc_vec.h"

/* One step of the chain. */
typedef struct ke_step {
    nn_op op;
    int arg;         /* the kv input of its operand, or -1 */
    bool swap;       /* the running value is the op's second operand */
    double f;
    uint64_t seed;
    isa_dtype dt;    /* the dtype it computes at */
    isa_dtype to;    /* its result's dtype (a cast's target, else dt) */
} ke_step;

typedef struct ke_chain {
    int n;
    ke_step s[1 + KC_MAX_EPI];
    int t_run, t_cast, t_mask, t_full; /* scratch tiles (kv tmp indices), -1 when not needed */
    int p_index, p_diag;               /* positions: row-major index, column - row */
} ke_chain;

static bool is_binary(nn_op op)
{
    return op == NN_OP_ADD || op == NN_OP_SUB || op == NN_OP_MUL || op == NN_OP_DIV;
}

static bool is_act_grad(nn_op op)
{
    return op == NN_OP_RELU_GRAD || op == NN_OP_GELU_GRAD || op == NN_OP_SILU_GRAD ||
           op == NN_OP_TANH_GRAD;
}

/* ---- one tile ------------------------------------------------------------------------------- */

typedef struct ke_tile {
    kc_ctx *x;
    const kv_tile *t;
    const ke_chain *c;
} ke_tile;

static kv_buf at(uint64_t addr, isa_dtype dt) { return (kv_buf){addr, ISA_BCAST_FULL, dt}; }

/* b as a full tile: itself, or copied out of its broadcast layout into scratch (vpu.sel with
 * an all-zero mask picks b everywhere, exactly). */
static kv_buf full(ke_tile *k, kv_buf b)
{
    if (b.bcast == ISA_BCAST_FULL)
        return b;
    uint64_t z = k->t->tmp[k->c->t_full];
    ISA_EMIT(k->x->e, VPU_FILL, isa_spad(0, z), isa_f32(0), isa_imm((int64_t)k->t->rows),
             isa_imm((int64_t)k->t->cols), isa_enum(b.dt));
    ISA_EMIT(k->x->e, VPU_SEL, isa_spad(0, z), isa_spad(0, z), isa_spad(0, z), isa_spad(0, b.addr),
             isa_imm((int64_t)k->t->rows), isa_imm((int64_t)k->t->cols), isa_enum(b.dt),
             isa_enum(b.bcast));
    return at(z, b.dt);
}

/* b at dtype dt (converted into scratch, keeping its layout, when it has another). */
static kv_buf typed(ke_tile *k, kv_buf b, isa_dtype dt)
{
    if (b.dt == dt)
        return b;
    uint64_t c = k->t->tmp[k->c->t_cast];
    kv_cast(k->x, k->t, c, b, dt);
    return (kv_buf){c, b.bcast, dt};
}

static isa_op vpu_binary_of(nn_op op)
{
    switch (op) {
    case NN_OP_ADD: return ISA_OP_VPU_ADD;
    case NN_OP_SUB: return ISA_OP_VPU_SUB;
    case NN_OP_MUL: return ISA_OP_VPU_MUL;
    case NN_OP_GELU_GRAD: return ISA_OP_VPU_DGELU;
    case NN_OP_SILU_GRAD: return ISA_OP_VPU_DSILU;
    case NN_OP_TANH_GRAD: return ISA_OP_VPU_DTANH;
    default: return ISA_OP_VPU_DIV;
    }
}

static isa_op vpu_unary_of(nn_op op)
{
    switch (op) {
    case NN_OP_GELU: return ISA_OP_VPU_GELU;
    case NN_OP_SILU: return ISA_OP_VPU_SILU;
    case NN_OP_TANH: return ISA_OP_VPU_TANH;
    case NN_OP_EXP: return ISA_OP_VPU_EXP;
    default: return ISA_OP_VPU_LOG;
    }
}

/* One step: v (the running value) and its operand -> dst, a full tile in st->to. */
static void emit_step(ke_tile *k, const ke_step *st, kv_buf v, uint64_t dst)
{
    kc_ctx *x = k->x;
    const kv_tile *t = k->t;
    kv_buf a = st->arg >= 0 ? typed(k, t->in[st->arg], st->dt) : v;
    kv_buf lhs = st->swap ? a : v, rhs = st->swap ? v : a; /* the op's first and second */
    uint64_t m = k->c->t_mask >= 0 ? t->tmp[k->c->t_mask] : 0;
    isa_dtype dt = st->dt;
    switch (st->op) {
    case NN_OP_ADD: case NN_OP_SUB: case NN_OP_MUL: case NN_OP_DIV: {
        isa_op op = vpu_binary_of(st->op);
        if (lhs.bcast == ISA_BCAST_FULL) {
            kv_binary(x, t, op, dst, lhs, rhs);
        } else if (rhs.bcast == ISA_BCAST_FULL && (st->op == NN_OP_ADD || st->op == NN_OP_MUL)) {
            kv_binary(x, t, op, dst, rhs, lhs);
        } else if (rhs.bcast == ISA_BCAST_FULL && st->op == NN_OP_SUB) {
            kv_binary(x, t, op, dst, rhs, lhs); /* b - a, negated: exactly a - b */
            kv_unary(x, t, ISA_OP_VPU_NEG, dst, at(dst, dt));
        } else {
            kv_binary(x, t, op, dst, full(k, lhs), rhs);
        }
        break;
    }
    case NN_OP_GELU_GRAD: case NN_OP_SILU_GRAD: case NN_OP_TANH_GRAD:
        kv_binary(x, t, vpu_binary_of(st->op), dst, full(k, lhs), rhs);
        break;
    case NN_OP_RELU_GRAD: { /* dx = dy where 0 < x (< clamp), else 0 */
        kv_buf xv = full(k, lhs);
        if (st->f > 0) {
            kv_scalar(x, t, ISA_OP_VPU_CMPLTS, m, xv, (float)st->f);
            ISA_EMIT(x->e, VPU_SELS, isa_spad(0, m), isa_spad(0, m), isa_spad(0, xv.addr),
                     isa_f32(0), isa_imm((int64_t)t->rows), isa_imm((int64_t)t->cols),
                     isa_enum(dt));
            kv_scalar(x, t, ISA_OP_VPU_CMPGTS, m, at(m, dt), 0);
        } else {
            kv_scalar(x, t, ISA_OP_VPU_CMPGTS, m, xv, 0);
        }
        kv_buf dy = full(k, rhs);
        ISA_EMIT(x->e, VPU_SELS, isa_spad(0, dst), isa_spad(0, m), isa_spad(0, dy.addr),
                 isa_f32(0), isa_imm((int64_t)t->rows), isa_imm((int64_t)t->cols), isa_enum(dt));
        break;
    }
    case NN_OP_SCALE:
        kv_scalar(x, t, ISA_OP_VPU_MULS, dst, full(k, v), (float)st->f);
        break;
    case NN_OP_RELU:
        kv_scalar(x, t, ISA_OP_VPU_MAXS, dst, full(k, v), 0);
        if (st->f > 0)
            kv_scalar(x, t, ISA_OP_VPU_MINS, dst, at(dst, dt), (float)st->f);
        break;
    case NN_OP_CAST:
        kv_cast(x, t, dst, full(k, v), st->to);
        break;
    case NN_OP_DROPOUT: {
        int q = k->c->p_index;
        ISA_EMIT(x->e, VPU_RAND, isa_spad(0, m), t->pos[q], isa_imm((int64_t)(uint32_t)st->seed),
                 isa_imm((int64_t)(st->seed >> 32)), isa_imm((int64_t)t->rows),
                 isa_imm((int64_t)t->cols), isa_enum(ISA_DTYPE_FP32), isa_imm(t->pos_row[q]));
        kv_scalar(x, t, ISA_OP_VPU_CMPGES, m, at(m, ISA_DTYPE_FP32), (float)st->f);
        if (dt != ISA_DTYPE_FP32)
            kv_cast(x, t, m, at(m, ISA_DTYPE_FP32), dt);
        kv_scalar(x, t, ISA_OP_VPU_MULS, dst, full(k, v), (float)(1.0 / (1.0 - st->f)));
        kv_binary(x, t, ISA_OP_VPU_MUL, dst, at(dst, dt), at(m, dt));
        break;
    }
    case NN_OP_CAUSAL_MASK: { /* keep where column - row <= 0 */
        int q = k->c->p_diag;
        ISA_EMIT(x->e, VPU_IOTA, isa_spad(0, m), t->pos[q], isa_imm(t->pos_row[q]),
                 isa_imm(t->pos_col[q]), isa_imm((int64_t)t->rows), isa_imm((int64_t)t->cols),
                 isa_enum(dt));
        kv_scalar(x, t, ISA_OP_VPU_CMPLES, m, at(m, dt), 0);
        kv_buf xv = full(k, v);
        ISA_EMIT(x->e, VPU_SELS, isa_spad(0, dst), isa_spad(0, m), isa_spad(0, xv.addr),
                 isa_f32((float)st->f), isa_imm((int64_t)t->rows), isa_imm((int64_t)t->cols),
                 isa_enum(dt));
        break;
    }
    default: /* GELU, SILU, TANH, EXP, LOG */
        kv_unary(x, t, vpu_unary_of(st->op), dst, full(k, v));
        break;
    }
}

static void chain_tile(kc_ctx *x, const kv_tile *t, void *ctx)
{
    const ke_chain *c = ctx;
    ke_tile k = {x, t, c};
    kv_buf v = t->in[0];
    for (int i = 0; i < c->n; i++) {
        uint64_t dst = i == c->n - 1 ? t->out[0].addr : t->tmp[c->t_run];
        emit_step(&k, &c->s[i], v, dst);
        v = at(dst, c->s[i].to);
    }
}

/* ---- planning ------------------------------------------------------------------------------- */

/* Why step st cannot compute at an integer dtype, or NULL when it can: the vector unit rounds
 * a result to the integer type and saturates it, the framework keeps it as computed, so only
 * steps whose integer results are integers the type holds are compiled (add, sub, relu, cast,
 * relu_grad; causal_mask with an integer fill); the others are refused rather than differ. */
static const char *int_refusal(const ke_step *st)
{
    if (st->dt != ISA_DTYPE_INT8 && st->dt != ISA_DTYPE_INT32)
        return NULL;
    double lo = st->dt == ISA_DTYPE_INT8 ? -128 : -2147483648.0;
    double hi = st->dt == ISA_DTYPE_INT8 ? 127 : 2147483647.0;
    switch (st->op) {
    case NN_OP_MUL:
        return "a product past the type's range saturates on the vector unit, where PyTorch "
               "wraps it and the framework keeps it";
    case NN_OP_DIV:
        return "true division of integers is a fraction (PyTorch's is a float)";
    case NN_OP_SCALE:
        return "a scaled integer is a fraction or past the type's range in general";
    case NN_OP_GELU: case NN_OP_SILU: case NN_OP_TANH: case NN_OP_EXP: case NN_OP_LOG:
    case NN_OP_GELU_GRAD: case NN_OP_SILU_GRAD: case NN_OP_TANH_GRAD:
        return "its values are fractions (PyTorch's are floats)";
    case NN_OP_DROPOUT:
        return "its kept values are multiplied by 1 / (1 - p), a fraction";
    case NN_OP_RELU: case NN_OP_RELU_GRAD:
        return st->f != floor(st->f) ? "a clamp that is not an integer" : NULL;
    case NN_OP_CAUSAL_MASK:
        return st->f != floor(st->f) || st->f < lo || st->f > hi
                   ? "a fill that is not an integer of the type (the default is -inf)" : NULL;
    default:
        return NULL;
    }
}

/* The kernel's op and epilogue as chain steps, their dtypes, and the plan's inputs. */
static np_status plan_chain(kc_ctx *x, ke_chain *c, kv_plan *p)
{
    const kc_kernel *k = x->k;
    memset(c, 0, sizeof *c);
    c->t_run = c->t_cast = c->t_mask = c->t_full = c->p_index = c->p_diag = -1;
    p->n_in = k->n_in;
    for (int i = 0; i < k->n_in; i++)
        p->in[i] = k->in[i];
    isa_dtype dt = kc_isa_dtype(k->in[0].dtype);
    ke_step *s = &c->s[c->n++];
    s->op = k->op, s->arg = k->n_in > 1 ? 1 : -1, s->dt = dt;
    switch (k->op) {
    case NN_OP_SCALE: s->f = kc_attr_real(x, "s"); break;
    case NN_OP_RELU: case NN_OP_RELU_GRAD: s->f = kc_attr_real(x, "clamp"); break;
    case NN_OP_DROPOUT:
        s->f = kc_attr_real(x, "p"), s->seed = (uint64_t)kc_attr_int(x, "seed");
        break;
    case NN_OP_CAUSAL_MASK: s->f = kc_attr_real(x, "fill"); break;
    default: break;
    }
    if (k->op == NN_OP_CAST) {
        int64_t to = kc_attr_int(x, "to");
        bool later_cast = false;
        for (int i = 0; i < k->n_epi; i++)
            later_cast = later_cast || k->epi[i].op == NN_OP_CAST;
        if (to < 0 && later_cast)
            return kc_fail(x, NP_ERR_INCONSISTENT, "a cast followed by another cast step needs "
                           "its own target (attribute 'to')");
        s->to = kc_isa_dtype(to < 0 ? k->out[0].dtype : (nn_dtype)to);
    } else {
        s->to = dt;
    }
    for (int i = 0; i < k->n_epi; i++) {
        const kc_epi *e = &k->epi[i];
        ke_step *n = &c->s[c->n++];
        n->op = e->op, n->swap = e->swap, n->f = e->f, n->seed = e->seed;
        n->dt = c->s[c->n - 2].to;
        n->to = e->op == NN_OP_CAST ? kc_isa_dtype(e->to) : n->dt;
        n->arg = -1;
        if (e->has_arg) {
            if (p->n_in == KV_MAX_IN)
                return kc_fail(x, NP_ERR_RANGE, "more than %d operands", KV_MAX_IN);
            n->arg = p->n_in;
            p->in[p->n_in++] = e->arg;
        }
    }
    for (int i = 0; i < c->n; i++) {
        const char *why = int_refusal(&c->s[i]);
        if (why)
            return kc_fail(x, NP_ERR_TYPE, "%s%s%s%s is not supported: %s; cast to a float "
                           "type first", i ? "its fused step " : "",
                           i ? nn_op_name(c->s[i].op) : "", i ? " on " : "",
                           isa_dtype_names[c->s[i].dt], why);
    }
    if (c->s[c->n - 1].to != kc_isa_dtype(k->out[0].dtype))
        return kc_fail(x, NP_ERR_INCONSISTENT, "the chain's result is %s, the output %s",
                       isa_dtype_names[c->s[c->n - 1].to], nn_dtype_name(k->out[0].dtype));
    /* scratch: the running value between steps, converted operands, masks, full copies */
    bool need_cast = false, need_mask = false, need_full = false;
    for (int i = 0; i < c->n; i++) {
        const ke_step *st = &c->s[i];
        if (st->arg >= 0 && kc_isa_dtype(p->in[st->arg].dtype) != st->dt)
            need_cast = true;
        if (st->op == NN_OP_DROPOUT || st->op == NN_OP_CAUSAL_MASK || st->op == NN_OP_RELU_GRAD)
            need_mask = true;
        need_full = true; /* a broadcast operand may need a full copy; cheap to have */
    }
    p->n_tmp = 0;
    if (c->n > 1)
        c->t_run = p->n_tmp, p->tmp_bytes[p->n_tmp++] = 4;
    if (need_cast)
        c->t_cast = p->n_tmp, p->tmp_bytes[p->n_tmp++] = 4;
    if (need_mask)
        c->t_mask = p->n_tmp, p->tmp_bytes[p->n_tmp++] = 4;
    if (need_full)
        c->t_full = p->n_tmp, p->tmp_bytes[p->n_tmp++] = 4;
    /* positions of the output's elements */
    const kc_tensor *o = &k->out[0];
    for (int i = 0; i < c->n; i++) {
        if (c->s[i].op == NN_OP_DROPOUT && c->p_index < 0) {
            c->p_index = p->n_pos++;
            kv_dense_pos(o->ndim, o->shape, p->pos_stride[c->p_index]);
        }
        if (c->s[i].op == NN_OP_CAUSAL_MASK && c->p_diag < 0) {
            c->p_diag = p->n_pos++;
            memset(p->pos_stride[c->p_diag], 0, sizeof p->pos_stride[0]);
            if (o->ndim >= 1)
                p->pos_stride[c->p_diag][o->ndim - 1] = 1;
            if (o->ndim >= 2)
                p->pos_stride[c->p_diag][o->ndim - 2] = -1;
        }
    }
    return NP_OK;
}

static uint64_t numel(const kc_tensor *t)
{
    return (uint64_t)kc_tensor_numel(t);
}

static np_status elem_compile(kc_ctx *x)
{
    const kc_kernel *k = x->k;
    kv_plan p;
    ke_chain c;
    memset(&p, 0, sizeof p);
    if (is_act_grad(k->op) && (k->in[0].ndim != k->in[1].ndim ||
                               memcmp(k->in[0].shape, k->in[1].shape,
                                      sizeof(int64_t) * (size_t)k->in[0].ndim)))
        return kc_fail(x, NP_ERR_INCONSISTENT, "its two inputs must have one shape");
    if ((is_binary(k->op) || is_act_grad(k->op)) && k->in[0].dtype != k->in[1].dtype)
        return kc_fail(x, NP_ERR_INCONSISTENT, "inputs of %s and %s: the framework's op takes one "
                       "dtype", nn_dtype_name(k->in[0].dtype), nn_dtype_name(k->in[1].dtype));
    if (plan_chain(x, &c, &p) != NP_OK)
        return kc_status(x);
    p.ndim = k->out[0].ndim;
    memcpy(p.shape, k->out[0].shape, sizeof p.shape);
    p.n_out = 1;
    p.out[0] = k->out[0];
    p.max_tile = (uint64_t)kc_attr_int(x, "tile");
    p.tile = chain_tile;
    p.ctx = &c;
    p.what = k->n_epi ? "fused chain" : nn_op_name(k->op);
    if (kv_emit(x, &p) != NP_OK)
        return kc_status(x);
    uint64_t steps = 0;
    for (int i = 0; i < c.n; i++)
        steps += c.s[i].op != NN_OP_CAST;
    x->res->flops = steps * numel(&k->out[0]);
    return kc_status(x);
}

/* ---- the framework's computation (checks) ----------------------------------------------------- */

static double attr_real(const kc_kernel *k, const char *name, double dflt)
{
    const kc_attr *a = kc_kernel_attr(k, name);
    return a ? a->f : dflt;
}

static np_status elem_reference(nn_graph *g, const kc_kernel *k, nn_tensor *const *in,
                                nn_tensor **out, np_err *err)
{
    nn_tensor *y;
    double fp[NN_MAX_FPARAMS] = {0};
    switch (k->op) {
    case NN_OP_ADD: y = nn_add(g, in[0], in[1]); break;
    case NN_OP_SUB: y = nn_sub(g, in[0], in[1]); break;
    case NN_OP_MUL: y = nn_mul(g, in[0], in[1]); break;
    case NN_OP_DIV: y = nn_div(g, in[0], in[1]); break;
    case NN_OP_SCALE: y = nn_scale(g, in[0], attr_real(k, "s", 1)); break;
    case NN_OP_GELU: y = nn_gelu(g, in[0]); break;
    case NN_OP_SILU: y = nn_silu(g, in[0]); break;
    case NN_OP_TANH: y = nn_tanh(g, in[0]); break;
    case NN_OP_EXP: y = nn_exp(g, in[0]); break;
    case NN_OP_LOG: y = nn_log(g, in[0]); break;
    case NN_OP_CAST: {
        const kc_attr *to = kc_kernel_attr(k, "to");
        y = nn_cast(g, in[0], to && to->i >= 0 ? (nn_dtype)to->i : k->out[0].dtype);
        break;
    }
    case NN_OP_DROPOUT: {
        const kc_attr *seed = kc_kernel_attr(k, "seed");
        y = nn_dropout(g, in[0], attr_real(k, "p", 0.1), seed ? (uint64_t)seed->i : 0);
        break;
    }
    case NN_OP_CAUSAL_MASK: y = nn_causal_mask(g, in[0], attr_real(k, "fill", -INFINITY)); break;
    case NN_OP_RELU:
        fp[0] = attr_real(k, "clamp", 0);
        y = nn_node(g, NN_OP_RELU, 1, in, NULL, fp);
        break;
    default: /* the activation gradients */
        fp[0] = attr_real(k, "clamp", 0);
        y = nn_node(g, k->op, 2, in, NULL, fp);
        break;
    }
    out[0] = y;
    return y ? NP_OK : nn_graph_status(g, err);
}

/* ---- `npusim kernel --op` --------------------------------------------------------------------- */

static np_status elem_build(kc_prog *p, const kc_spec *s, kc_kernel *k, np_err *err)
{
    const kc_kernel_def *d = kc_kernel_find(s->op);
    const kc_spec_val *sh = kc_spec_get(s, "shape"), *dt = kc_spec_get(s, "dtype");
    const kc_spec_val *bs = kc_spec_get(s, "bshape");
    const kc_spec_val *to = kc_spec_get(s, "to");
    bool has_b = false; /* a key of its own (the binary ops): else both inputs are shape */
    for (unsigned i = 0; d && i < d->n_keys; i++)
        has_b = has_b || !strcmp(d->keys[i].name, "bshape");
    if (!has_b)
        bs = NULL;
    if (!d || !sh || !sh->ndim)
        return np_err_set(err, NP_ERR_MISSING, "%s: give its shape (shape=AxBx...)",
                          nn_op_name(s->op));
    memset(k, 0, sizeof *k);
    k->op = s->op, k->n_in = d->n_in, k->n_out = 1;
    nn_dtype t = dt ? (nn_dtype)dt->i : NN_BF16;
    np_status st = kc_tensor_fresh(p, &k->in[0], t, sh->ndim, sh->shape, err);
    const int64_t *b_shape = bs && bs->ndim ? bs->shape : sh->shape;
    int b_nd = bs && bs->ndim ? bs->ndim : sh->ndim;
    if (st == NP_OK && d->n_in == 2)
        st = kc_tensor_fresh(p, &k->in[1], t, b_nd, b_shape, err);
    /* the output: the inputs' broadcast shape */
    int nd = d->n_in == 2 && b_nd > sh->ndim ? b_nd : sh->ndim;
    int64_t o[KC_MAX_DIMS];
    for (int i = 0; i < nd; i++) {
        int ia = i - (nd - sh->ndim), ib = i - (nd - b_nd);
        int64_t x = ia >= 0 ? sh->shape[ia] : 1, y = d->n_in == 2 && ib >= 0 ? b_shape[ib] : 1;
        if (x != y && x != 1 && y != 1)
            return np_err_set(err, NP_ERR_INCONSISTENT, "%s: shape and bshape do not broadcast",
                              nn_op_name(s->op));
        o[i] = x == 1 ? y : x;
    }
    nn_dtype ot = s->op == NN_OP_CAST && to && to->i >= 0 ? (nn_dtype)to->i : t;
    return st == NP_OK ? kc_tensor_fresh(p, &k->out[0], ot, nd, o, err) : st;
}

/* ---- the table rows --------------------------------------------------------------------------- */

static const kc_attr_def unary_keys[] = {
    {"shape", KC_ATTR_SHAPE, KC_REQUIRED, 0, 0, "the tensor's shape, AxBx..."},
    {"dtype", KC_ATTR_DTYPE, NN_BF16, 0, 0, "its element type"},
};
static const kc_attr_def binary_keys[] = {
    {"shape", KC_ATTR_SHAPE, KC_REQUIRED, 0, 0, "the first input's shape, AxBx..."},
    {"bshape", KC_ATTR_SHAPE, 0, 0, 0, "the second input's shape, broadcast (default: shape)"},
    {"dtype", KC_ATTR_DTYPE, NN_BF16, 0, 0, "the element type"},
};
#define KE_N(a) (unsigned)(sizeof a / sizeof a[0])

#define KE_TILE {"tile", KC_ATTR_INT, 0, 0, 1 << 30, "tile: elements of a tile at most (0: chosen)"}
static const kc_attr_def plain_attrs[] = {KE_TILE};
static const kc_attr_def scale_attrs[] = {
    {"s", KC_ATTR_REAL, 1, -HUGE_VAL, HUGE_VAL, "the factor"}, KE_TILE,
};
static const kc_attr_def relu_attrs[] = {
    {"clamp", KC_ATTR_REAL, 0, 0, HUGE_VAL, "the upper clamp (0: none; 6: relu6)"}, KE_TILE,
};
static const kc_attr_def cast_attrs[] = {
    {"to", KC_ATTR_DTYPE, -1, 0, 0, "the target dtype (default: the output's)"}, KE_TILE,
};
static const kc_attr_def dropout_attrs[] = {
    {"p", KC_ATTR_REAL, 0.1, 0, 0.999999, "the probability an element is dropped"},
    {"seed", KC_ATTR_INT, 0, -0x1p63, 0x1p63, "the mask's seed (the framework's)"}, KE_TILE,
};
static const kc_attr_def causal_attrs[] = {
    {"fill", KC_ATTR_REAL, -HUGE_VAL, -HUGE_VAL, HUGE_VAL, "the value above the diagonal"}, KE_TILE,
};

#define KE_DOC "the elementwise engine (kc_vec.h): tiles streamed through two buffer sets per " \
               "core, the op and its fused chain on the vector unit"
/* vo: the attribute that changes only the values (kc_kernel_def.values_only_attr), or NULL */
#define KE_DEF_VO(name, OP, nin, ad, nad, kd, vo)                                                \
    const kc_kernel_def name = {                                                                 \
        .op = OP, .flags = KC_DEF_EPILOGUE | KC_DEF_EPILOGUE_ALL, .n_in = nin, .n_out = 1,       \
        .attrs = ad, .n_attrs = nad, .compile = elem_compile, .keys = kd, .n_keys = KE_N(kd),    \
        .build = elem_build, .doc = KE_DOC, .reference = elem_reference,                         \
        .values_only_attr = vo,                                                                  \
    };
#define KE_DEF(name, OP, nin, ad, nad, kd) KE_DEF_VO(name, OP, nin, ad, nad, kd, NULL)

KE_DEF(kc_add_def, NN_OP_ADD, 2, plain_attrs, KE_N(plain_attrs), binary_keys)
KE_DEF(kc_sub_def, NN_OP_SUB, 2, plain_attrs, KE_N(plain_attrs), binary_keys)
KE_DEF(kc_mul_def, NN_OP_MUL, 2, plain_attrs, KE_N(plain_attrs), binary_keys)
KE_DEF(kc_div_def, NN_OP_DIV, 2, plain_attrs, KE_N(plain_attrs), binary_keys)
KE_DEF(kc_scale_def, NN_OP_SCALE, 1, scale_attrs, KE_N(scale_attrs), unary_keys)
KE_DEF(kc_relu_def, NN_OP_RELU, 1, relu_attrs, KE_N(relu_attrs), unary_keys)
KE_DEF(kc_gelu_def, NN_OP_GELU, 1, plain_attrs, KE_N(plain_attrs), unary_keys)
KE_DEF(kc_silu_def, NN_OP_SILU, 1, plain_attrs, KE_N(plain_attrs), unary_keys)
KE_DEF(kc_tanh_def, NN_OP_TANH, 1, plain_attrs, KE_N(plain_attrs), unary_keys)
KE_DEF(kc_exp_def, NN_OP_EXP, 1, plain_attrs, KE_N(plain_attrs), unary_keys)
KE_DEF(kc_log_def, NN_OP_LOG, 1, plain_attrs, KE_N(plain_attrs), unary_keys)
KE_DEF(kc_cast_def, NN_OP_CAST, 1, cast_attrs, KE_N(cast_attrs), unary_keys)
KE_DEF_VO(kc_dropout_def, NN_OP_DROPOUT, 1, dropout_attrs, KE_N(dropout_attrs), unary_keys,
          "seed")
KE_DEF(kc_causal_mask_def, NN_OP_CAUSAL_MASK, 1, causal_attrs, KE_N(causal_attrs), unary_keys)
KE_DEF(kc_relu_grad_def, NN_OP_RELU_GRAD, 2, relu_attrs, KE_N(relu_attrs), unary_keys)
KE_DEF(kc_gelu_grad_def, NN_OP_GELU_GRAD, 2, plain_attrs, KE_N(plain_attrs), unary_keys)
KE_DEF(kc_silu_grad_def, NN_OP_SILU_GRAD, 2, plain_attrs, KE_N(plain_attrs), unary_keys)
KE_DEF(kc_tanh_grad_def, NN_OP_TANH_GRAD, 2, plain_attrs, KE_N(plain_attrs), unary_keys)
