/* kc_compile.c — kc_compile: the kernel table, the checks every kernel gets (operands,
 * attributes, epilogue, placement), HBM ordering across cores, kernel symbols, and the
 * release of a kernel's resources (see kernel.h). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kc_impl.h"
#include "kc_tiles.h"
#include "suggest.h"

/* ---- the table ------------------------------------------------------------------------------ */

#define KC_KERNEL(OP, def) extern const kc_kernel_def def;
#include "kernels.def"

static const kc_kernel_def *const kc_defs[NN_OP_COUNT] = {
#define KC_KERNEL(OP, def) [NN_OP_##OP] = &def,
#include "kernels.def"
};

static const char *const kc_reasons[NN_OP_COUNT] = {
#define KC_NO_KERNEL(OP, reason) [NN_OP_##OP] = reason,
#include "kernels.def"
};

static const char *const kc_later[NN_OP_COUNT] = {
#define KC_NOT_YET(OP, reason) [NN_OP_##OP] = reason,
#include "kernels.def"
};

const char *kc_kernel_not_yet(nn_op op)
{
    return (unsigned)op < NN_OP_COUNT ? kc_later[op] : NULL;
}

const kc_kernel_def *kc_kernel_find(nn_op op)
{
    return (unsigned)op < NN_OP_COUNT ? kc_defs[op] : NULL;
}

const char *kc_no_kernel_reason(nn_op op)
{
    return (unsigned)op < NN_OP_COUNT ? kc_reasons[op] : NULL;
}

/* ---- attributes ----------------------------------------------------------------------------- */

bool kc_attr_is_tiling(const kc_kernel_def *d, const char *name)
{
    for (unsigned i = 0; d && i < d->n_attrs; i++)
        if (strcmp(d->attrs[i].name, name) == 0)
            return strncmp(d->attrs[i].doc, "tile:", 5) == 0;
    return false;
}

static const kc_attr_def *attr_def(const kc_kernel_def *d, const char *name)
{
    for (unsigned i = 0; i < d->n_attrs; i++)
        if (strcmp(d->attrs[i].name, name) == 0)
            return &d->attrs[i];
    return NULL;
}

const kc_attr *kc_kernel_attr(const kc_kernel *k, const char *name)
{
    for (int i = 0; i < k->n_attrs; i++)
        if (k->attrs[i].name && strcmp(k->attrs[i].name, name) == 0)
            return &k->attrs[i];
    return NULL;
}

static np_status check_attrs(const kc_kernel_def *d, const kc_kernel *k, const char *who,
                             np_err *err)
{
    if (k->n_attrs < 0 || k->n_attrs > KC_MAX_ATTRS)
        return np_err_set(err, NP_ERR_RANGE, "%s: %d attributes (0..%d)", who, k->n_attrs,
                          KC_MAX_ATTRS);
    for (int i = 0; i < k->n_attrs; i++) {
        const kc_attr *a = &k->attrs[i];
        const kc_attr_def *ad = a->name ? attr_def(d, a->name) : NULL;
        if (!ad) {
            const char *names[64];
            unsigned n = 0;
            for (unsigned j = 0; j < d->n_attrs && n < 64; j++)
                names[n++] = d->attrs[j].name;
            const char *s = a->name ? np_suggest(a->name, names, n, 2) : NULL;
            return np_err_set(err, NP_ERR_UNKNOWN_KEY, "%s: unknown attribute '%s'%s%s%s", who,
                              a->name ? a->name : "(null)", s ? "; did you mean '" : "",
                              s ? s : "", s ? "'?" : "");
        }
        for (int j = 0; j < i; j++)
            if (strcmp(k->attrs[j].name, a->name) == 0)
                return np_err_set(err, NP_ERR_DUPLICATE, "%s: attribute '%s' given twice", who,
                                  a->name);
        double v = ad->type == KC_ATTR_REAL ? a->f : (double)a->i;
        if (ad->type == KC_ATTR_DTYPE) {
            if (a->i < 0 || a->i >= NN_DTYPE_COUNT)
                return np_err_set(err, NP_ERR_RANGE, "%s: attribute '%s' = %" PRId64 " is not "
                                  "a dtype", who, a->name, a->i);
        } else if (!(v >= ad->min && v <= ad->max)) {
            return np_err_set(err, NP_ERR_RANGE, "%s: attribute '%s' = %g is out of range "
                              "%g..%g", who, a->name, v, ad->min, ad->max);
        }
    }
    return NP_OK;
}

static const kc_attr_def *ctx_attr_def(const kc_ctx *x, const char *name)
{
    const kc_attr_def *ad = attr_def(((const kc_ctx_impl *)(const void *)x)->def, name);
    return ad;
}

int64_t kc_attr_int(const kc_ctx *x, const char *name)
{
    const kc_attr *a = kc_kernel_attr(x->k, name);
    if (a)
        return a->i;
    const kc_attr_def *ad = ctx_attr_def(x, name);
    return ad ? (int64_t)ad->dflt : 0;
}

double kc_attr_real(const kc_ctx *x, const char *name)
{
    const kc_attr *a = kc_kernel_attr(x->k, name);
    if (a)
        return a->f;
    const kc_attr_def *ad = ctx_attr_def(x, name);
    return ad ? ad->dflt : 0;
}

bool kc_attr_given(const kc_ctx *x, const char *name) { return kc_kernel_attr(x->k, name) != NULL; }

/* ---- operands and the epilogue -------------------------------------------------------------- */

static np_status check_tensor(const kc_prog *p, const kc_tensor *t, const char *who,
                              const char *what, int i, bool output, np_err *err)
{
    if ((unsigned)t->dtype >= NN_DTYPE_COUNT)
        return np_err_set(err, NP_ERR_RANGE, "%s: %s %d has no dtype (%d)", who, what, i,
                          (int)t->dtype);
    if (t->ndim < 0 || t->ndim > KC_MAX_DIMS)
        return np_err_set(err, NP_ERR_RANGE, "%s: %s %d has %d dims (0..%d)", who, what, i,
                          t->ndim, KC_MAX_DIMS);
    for (int d = 0; d < t->ndim; d++) {
        if (t->shape[d] < 1)
            return np_err_set(err, NP_ERR_RANGE, "%s: %s %d: dim %d is %" PRId64 " (>= 1)", who,
                              what, i, d, t->shape[d]);
        if (t->stride[d] < 0 || (output && t->stride[d] == 0 && t->shape[d] > 1))
            return np_err_set(err, NP_ERR_RANGE, "%s: %s %d: stride %d is %" PRId64 " (%s)",
                              who, what, i, d, t->stride[d],
                              output ? "an output needs positive strides" : "negative");
    }
    uint64_t hbm = p->cfg->chip.hbm_bytes, ext = kc_tensor_extent(t);
    if (t->addr > hbm || ext > hbm - t->addr)
        return np_err_set(err, NP_ERR_RANGE, "%s: %s %d [0x%" PRIx64 ", +%" PRIu64 ") lies "
                          "outside the HBM (%" PRIu64 " bytes)", who, what, i, t->addr, ext, hbm);
    return NP_OK;
}

/* Whether a's shape broadcasts to b's (numpy rules). */
static bool broadcasts_to(const kc_tensor *a, const kc_tensor *b)
{
    if (a->ndim > b->ndim)
        return false;
    for (int d = 1; d <= a->ndim; d++) {
        int64_t x = a->shape[a->ndim - d], y = b->shape[b->ndim - d];
        if (x != 1 && x != y)
            return false;
    }
    return true;
}

/* Whether op is an epilogue step (all: a step of a fused chain, KC_DEF_EPILOGUE_ALL) and
 * whether it takes an operand. */
static bool epi_op_ok(nn_op op, bool all, bool *needs_arg)
{
    switch (op) {
    case NN_OP_ADD: case NN_OP_SUB: case NN_OP_MUL: case NN_OP_DIV:
        *needs_arg = true;
        return true;
    case NN_OP_SCALE: case NN_OP_RELU: case NN_OP_GELU: case NN_OP_SILU: case NN_OP_TANH:
    case NN_OP_EXP:
        *needs_arg = false;
        return true;
    case NN_OP_LOG: case NN_OP_CAST: case NN_OP_DROPOUT: case NN_OP_CAUSAL_MASK:
        *needs_arg = false;
        return all;
    case NN_OP_RELU_GRAD: case NN_OP_GELU_GRAD: case NN_OP_SILU_GRAD: case NN_OP_TANH_GRAD:
        *needs_arg = true;
        return all;
    default:
        return false;
    }
}

static np_status check_epilogue(const kc_prog *p, const kc_kernel_def *d, const kc_kernel *k,
                                const char *who, np_err *err)
{
    if (k->n_epi < 0 || k->n_epi > KC_MAX_EPI)
        return np_err_set(err, NP_ERR_RANGE, "%s: an epilogue of %d steps (0..%d)", who,
                          k->n_epi, KC_MAX_EPI);
    if (k->n_epi && !(d->flags & (KC_DEF_EPILOGUE | KC_DEF_EPILOGUE_ALL)))
        return np_err_set(err, NP_ERR_INCONSISTENT, "%s: %s takes no fused epilogue", who,
                          nn_op_name(k->op));
    bool all = d->flags & KC_DEF_EPILOGUE_ALL;
    for (int i = 0; i < k->n_epi; i++) {
        const kc_epi *s = &k->epi[i];
        bool needs_arg;
        if (!epi_op_ok(s->op, all, &needs_arg))
            return np_err_set(err, NP_ERR_INCONSISTENT, "%s: epilogue step %d: %s is not an "
                              "elementwise op %s's epilogue applies (add, sub, mul, div, scale, "
                              "relu, gelu, silu, tanh, exp%s)", who, i, nn_op_name(s->op),
                              nn_op_name(k->op), all ? ", log, cast, dropout, causal_mask and "
                              "the activation gradients" : "");
        if (needs_arg != s->has_arg)
            return np_err_set(err, NP_ERR_INCONSISTENT, "%s: epilogue step %d (%s) %s", who, i,
                              nn_op_name(s->op), needs_arg ? "needs an operand" : "takes no operand");
        if (!all && (s->swap || (s->op == NN_OP_RELU && s->f != 0)))
            return np_err_set(err, NP_ERR_INCONSISTENT, "%s: epilogue step %d (%s): %s takes "
                              "no %s", who, i, nn_op_name(s->op), nn_op_name(k->op),
                              s->swap ? "swapped operands" : "clamped relu");
        if (s->swap && !s->has_arg)
            return np_err_set(err, NP_ERR_INCONSISTENT, "%s: epilogue step %d (%s) swaps "
                              "its operands but has only the running value", who, i, nn_op_name(s->op));
        if (s->op == NN_OP_CAST && (unsigned)s->to >= NN_DTYPE_COUNT)
            return np_err_set(err, NP_ERR_RANGE, "%s: epilogue step %d (cast) has no dtype "
                              "(%d)", who, i, (int)s->to);
        if ((s->op == NN_OP_DROPOUT && !(s->f >= 0 && s->f < 1)) ||
            (s->op == NN_OP_RELU && !(s->f >= 0)))
            return np_err_set(err, NP_ERR_RANGE, "%s: epilogue step %d (%s): f = %g is out of "
                              "range (%s)", who, i, nn_op_name(s->op), s->f,
                              s->op == NN_OP_DROPOUT ? "0 <= p < 1" : "a clamp >= 0");
        if (s->has_arg) {
            np_status st = check_tensor(p, &s->arg, who, "epilogue operand", i, false, err);
            if (st != NP_OK)
                return st;
            if (!broadcasts_to(&s->arg, &k->out[0]))
                return np_err_set(err, NP_ERR_INCONSISTENT, "%s: epilogue step %d's operand "
                                  "does not broadcast to the output's shape", who, i);
        }
    }
    return NP_OK;
}

/* Bytes of t's distinct elements (a broadcast dim, stride 0, counts once). */
static uint64_t distinct_bytes(const kc_tensor *t)
{
    uint64_t n = nn_dtype_size(t->dtype);
    for (int d = 0; d < t->ndim; d++)
        if (t->stride[d])
            n *= (uint64_t)t->shape[d];
    return n;
}

/* ---- HBM ordering across cores -------------------------------------------------------------- */

static np_status note_access(kc_prog *p, const kc_tensor *t, const kc_place *pl, bool write,
                             np_err *err)
{
    if (p->n_acc == p->cap_acc) {
        uint32_t nc = p->cap_acc ? 2 * p->cap_acc : 64;
        kc_access *na = realloc(p->acc, nc * sizeof *na);
        if (!na)
            return np_err_set(err, NP_ERR_NOMEM, "out of memory");
        p->acc = na, p->cap_acc = nc;
    }
    p->acc[p->n_acc++] = (kc_access){t->addr, t->addr + kc_tensor_extent(t), pl->core0,
                                     pl->n_cores ? pl->n_cores : 1, write};
    return NP_OK;
}

/* Whether touching t from placement pl conflicts with an access since the last barrier: the
 * ranges overlap, one of them writes, and they are not both the same single core (one core
 * orders its own HBM accesses: see kernel.h). */
static bool conflicts(const kc_prog *p, const kc_tensor *t, const kc_place *pl, bool write)
{
    uint64_t lo = t->addr, hi = t->addr + kc_tensor_extent(t);
    uint32_t n = pl->n_cores ? pl->n_cores : 1;
    for (uint32_t i = 0; i < p->n_acc; i++) {
        const kc_access *a = &p->acc[i];
        if (a->hi <= lo || hi <= a->lo || (!write && !a->write))
            continue;
        if (n == 1 && a->n_cores == 1 && a->core0 == pl->core0)
            continue;
        return true;
    }
    return false;
}

/* ---- compiling ------------------------------------------------------------------------------ */

static np_status compile_kernel(kc_prog *p, const kc_kernel *k, kc_result *res, np_err *err);

/* With a tiling cache: the tiling stored for k fills the tiling attributes k does not give. */
np_status kc_compile(kc_prog *p, const kc_kernel *k, kc_result *res, np_err *err)
{
    kc_tiling t;
    char key[2048];
    const kc_kernel_def *d = kc_kernel_find(k->op);
    bool tiled = false; /* the kernel chooses its own tiling */
    for (int j = 0; j < k->n_attrs && j < KC_MAX_ATTRS; j++)
        tiled = tiled || (k->attrs[j].name && kc_attr_is_tiling(d, k->attrs[j].name));
    if (!p->tiles || tiled || !kc_tile_key(p->cfg, k, key, sizeof key)[0] ||
        !kc_tile_cache_get(p->tiles, key, &t, NULL))
        return compile_kernel(p, k, res, err);
    kc_kernel kk = *k;
    for (unsigned i = 0; i < t.n_attrs && kk.n_attrs < KC_MAX_ATTRS; i++)
        kk.attrs[kk.n_attrs++] = t.attrs[i];
    return compile_kernel(p, &kk, res, err);
}

static np_status compile_kernel(kc_prog *p, const kc_kernel *k, kc_result *res, np_err *err)
{
    kc_result local;
    if (!res)
        res = &local;
    memset(res, 0, sizeof *res);
    const char *who = k->name ? k->name : nn_op_name(k->op);
    if (!p->p || p->finished)
        return np_err_set(err, NP_ERR_INCONSISTENT, "%s: the program is finished", who);
    if (isa_emit_status(p->e, err) != NP_OK)
        return err->status;
    const kc_kernel_def *d = kc_kernel_find(k->op);
    if (!d) {
        const char *why = kc_no_kernel_reason(k->op);
        return np_err_set(err, NP_ERR_UNKNOWN_KEY, "%s: op '%s' has no kernel%s%s", who,
                          nn_op_name(k->op), why ? ": " : "", why ? why : "");
    }
    if (k->n_in < 0 || k->n_in > KC_MAX_IN || k->n_out < 1 || k->n_out > KC_MAX_OUT ||
        (d->n_in >= 0 && k->n_in != d->n_in) || k->n_out != d->n_out)
        return np_err_set(err, NP_ERR_INCONSISTENT, "%s: %d inputs and %d outputs given; %s "
                          "takes %d and %d", who, k->n_in, k->n_out, nn_op_name(k->op), d->n_in,
                          d->n_out);
    np_status st;
    for (int i = 0; i < k->n_in; i++)
        if ((st = check_tensor(p, &k->in[i], who, "input", i, false, err)) != NP_OK)
            return st;
    for (int i = 0; i < k->n_out; i++)
        if ((st = check_tensor(p, &k->out[i], who, "output", i, true, err)) != NP_OK)
            return st;
    if ((st = check_attrs(d, k, who, err)) != NP_OK ||
        (st = check_epilogue(p, d, k, who, err)) != NP_OK)
        return st;
    const kc_place *pl = &k->place;
    uint32_t n_cores = pl->n_cores ? pl->n_cores : 1;
    if (pl->chip != p->chip)
        return np_err_set(err, NP_ERR_RANGE, "%s: placed on chip %" PRIu32 ", the program is "
                          "chip %" PRIu32 "'s", who, pl->chip, p->chip);
    if (pl->core0 >= p->n_cores || n_cores > p->n_cores - pl->core0)
        return np_err_set(err, NP_ERR_RANGE, "%s: placed on cores %" PRIu32 "..%" PRIu32 ", the "
                          "program has %" PRIu32 " (0..%" PRIu32 ")", who, pl->core0,
                          pl->core0 + n_cores - 1, p->n_cores, p->n_cores - 1);
    /* HBM dependencies on other cores (or a stream's order): a barrier first */
    bool need = p->stream_order && p->kernels > 0;
    if (!p->no_auto_barrier || need) {
        for (int i = 0; i < k->n_in && !need; i++)
            need = conflicts(p, &k->in[i], pl, false);
        for (int i = 0; i < k->n_epi && !need; i++)
            need = k->epi[i].has_arg && conflicts(p, &k->epi[i].arg, pl, false);
        for (int i = 0; i < k->n_out && !need; i++)
            need = conflicts(p, &k->out[i], pl, true);
        if (need && kc_barrier(p, err) != NP_OK)
            return err->status;
    }
    /* the symbol: the given name or the op's, made unique on the placed cores */
    const char *base = k->name ? k->name : nn_op_name(k->op);
    snprintf(res->name, sizeof res->name, "%s", base);
    for (unsigned suffix = 1;; suffix++) {
        bool taken = false;
        for (uint32_t c = pl->core0; c < pl->core0 + n_cores && !taken; c++)
            taken = isa_emit_has_kernel(p->e, c, res->name);
        if (!taken)
            break;
        if (k->name)
            return np_err_set(err, NP_ERR_DUPLICATE, "%s: a kernel of that name is already "
                              "on a placed core", who);
        snprintf(res->name, sizeof res->name, "%s.%u", base, suffix);
    }
    for (int i = 0; i < k->n_in; i++)
        res->hbm_bytes_min += distinct_bytes(&k->in[i]);
    for (int i = 0; i < k->n_epi; i++)
        res->hbm_bytes_min += k->epi[i].has_arg ? distinct_bytes(&k->epi[i].arg) : 0;
    for (int i = 0; i < k->n_out; i++)
        res->hbm_bytes_min += distinct_bytes(&k->out[i]);
    uint64_t insns0 = 0;
    for (uint32_t c = 0; c < p->p->n_cores; c++)
        insns0 += p->p->cores[c].n_insns;
    for (uint32_t c = pl->core0; c < pl->core0 + n_cores; c++)
        if (isa_emit_core(p->e, c) != NP_OK || isa_emit_kernel_begin(p->e, res->name) != NP_OK)
            return isa_emit_status(p->e, err);
    kc_ctx_impl xi = {{p, p->cfg, p->e, k, res}, d, ++p->kernels, pl->core0};
    isa_emit_core(p->e, pl->core0);
    d->compile(&xi.pub);
    for (uint32_t c = pl->core0; c < pl->core0 + n_cores; c++) {
        isa_emit_core(p->e, c);
        isa_emit_kernel_end(p->e);
        kc_core_res *r = &p->cores[c];
        kc_blocks_release(&r->spad, xi.owner);
        kc_blocks_release(&r->acc, xi.owner);
        kc_sems_release(&r->sems, xi.owner);
        for (unsigned i = 1; i < ISA_N_REGS; i++)
            if ((r->regs & (1u << i)) && r->regs_owner[i] == xi.owner)
                r->regs &= (uint16_t)~(1u << i);
    }
    if (isa_emit_status(p->e, err) != NP_OK)
        return err->status;
    uint64_t insns1 = 0;
    for (uint32_t c = 0; c < p->p->n_cores; c++)
        insns1 += p->p->cores[c].n_insns;
    res->insns = insns1 - insns0;
    for (int i = 0; i < k->n_in; i++)
        if (note_access(p, &k->in[i], pl, false, err) != NP_OK)
            return err->status;
    for (int i = 0; i < k->n_epi; i++)
        if (k->epi[i].has_arg && note_access(p, &k->epi[i].arg, pl, false, err) != NP_OK)
            return err->status;
    for (int i = 0; i < k->n_out; i++)
        if (note_access(p, &k->out[i], pl, true, err) != NP_OK)
            return err->status;
    return NP_OK;
}
