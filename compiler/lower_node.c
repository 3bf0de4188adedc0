/* lower_node.c — one framework node as a kernel of the kernel ABI: operands, attributes (the
 * kernel's from_node), the check against the kernel's reference, and the epilogue steps a
 * fusion chain gives a matmul or conv2d (see lower.h). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "lower_impl.h"

bool lower_node_is_view(const nn_tensor *node)
{
    return node->op != NN_OP_LEAF &&
           ((nn_op_flags(node->op) & NN_OPF_VIEW) || kc_no_kernel_reason(node->op) != NULL ||
            nn_plan_node_is_offset_view(node));
}

static size_t lw_shape(const nn_tensor *t, char *buf, size_t n)
{
    char sh[96];
    int k = snprintf(buf, n, "%s%s", nn_dtype_name(t->dtype), nn_shape_str(t, sh, sizeof sh));
    return k < 0 ? 0 : (size_t)k;
}

char *lower_node_desc(const nn_tensor *node, char *buf, size_t n)
{
    size_t k = (size_t)snprintf(buf, n, "%s ", nn_op_name(node->op));
    for (int i = 0; i < node->n_src && k < n; i++) {
        k += lw_shape(node->src[i], buf + k, n - k);
        if (i + 1 < node->n_src && k < n)
            k += (size_t)snprintf(buf + k, n - k, ", ");
    }
    if (k < n)
        k += (size_t)snprintf(buf + k, n - k, " -> ");
    if (k < n)
        lw_shape(node, buf + k, n - k);
    return buf;
}

/* The framework node the kernel's attributes describe (its reference on leaves shaped like
 * its inputs) must be `node`: same op, shape, dtype and parameters. */
static np_status lw_check_reference(const kc_kernel_def *def, const kc_kernel *k,
                                    const nn_tensor *node, np_err *err)
{
    char desc[256];
    nn_graph *g = nn_graph_new(1);
    if (!g)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory checking a kernel");
    nn_tensor *in[KC_MAX_IN] = {0}, *out[KC_MAX_OUT] = {0};
    for (int i = 0; i < k->n_in; i++)
        in[i] = nn_leaf(g, "in", NN_ROLE_INPUT, k->in[i].dtype, k->in[i].ndim, k->in[i].shape);
    np_err e = {0};
    np_status st = nn_graph_status(g, &e);
    if (st == NP_OK)
        st = def->reference(g, k, in, out, &e);
    const nn_tensor *r = out[0];
    bool same = st == NP_OK && r && r->op == node->op && r->dtype == node->dtype &&
                r->ndim == node->ndim;
    for (int d = 0; same && d < node->ndim; d++)
        same = r->ne[d] == node->ne[d];
    for (int i = 0; same && i < NN_MAX_IPARAMS; i++) /* dropout's tp flag: lower.c's seed */
        same = r->ip[i] == node->ip[i] || (node->op == NN_OP_DROPOUT && i == NN_DROPOUT_IP_TP);
    for (int i = 0; same && i < NN_MAX_FPARAMS; i++)
        same = r->fp[i] == node->fp[i] || (r->fp[i] != r->fp[i] && node->fp[i] != node->fp[i]);
    nn_graph_free(g);
    if (same)
        return NP_OK;
    lower_node_desc(node, desc, sizeof desc);
    if (st != NP_OK)
        return np_err_set(err, NP_ERR_INCONSISTENT, "%s (node '%s'): the %s kernel's reference "
                          "refuses the attributes made from the node: %s", desc, node->name,
                          nn_op_name(node->op), e.msg);
    return np_err_set(err, NP_ERR_INCONSISTENT, "%s (node '%s'): the %s kernel's attributes "
                      "made from the node do not describe it (its reference computes another "
                      "node; the kernel needs a from_node that maps the node's parameters)",
                      desc, node->name, nn_op_name(node->op));
}

/* ---- attributes from the node ---------------------------------------------------------------
 * For a kernel whose row has no from_node: the attributes the framework's parameters of its op
 * give (framework/ops_api.c, optim.c), each added only when the kernel declares it; the
 * reference check below then says whether that describes the node. */

static void lw_attr_set(const kc_kernel_def *d, kc_kernel *k, kc_attr a)
{
    for (unsigned i = 0; i < d->n_attrs; i++)
        if (strcmp(d->attrs[i].name, a.name) == 0 && k->n_attrs < KC_MAX_ATTRS) {
            k->attrs[k->n_attrs++] = a;
            return;
        }
}

static void lw_attr(const kc_kernel_def *d, kc_kernel *k, const char *name, double v)
{
    lw_attr_set(d, k, (kc_attr){name, (int64_t)v, v});
}

static void lw_attrs_of_node(const kc_kernel_def *d, const nn_tensor *t, kc_kernel *k)
{
    const int64_t *ip = t->ip;
    const double *fp = t->fp;
    switch (t->op) {
    case NN_OP_SCALE: lw_attr(d, k, "s", fp[0]); break;
    case NN_OP_RELU: case NN_OP_RELU_GRAD: lw_attr(d, k, "clamp", fp[0]); break;
    case NN_OP_CAST: lw_attr(d, k, "to", (double)ip[0]); break;
    case NN_OP_DROPOUT:
        lw_attr(d, k, "p", fp[0]);
        lw_attr_set(d, k, KC_INT("seed", ip[0])); /* all 64 bits: a double keeps 53 */
        break;
    case NN_OP_CAUSAL_MASK: lw_attr(d, k, "fill", fp[0]); break;
    case NN_OP_REDUCE_SUM: case NN_OP_REDUCE_MEAN: case NN_OP_REDUCE_MAX:
    case NN_OP_REDUCE_MAX_GRAD:
        lw_attr(d, k, "axis", (double)ip[0]);
        lw_attr(d, k, "keepdim", (double)ip[1]);
        if (t->op == NN_OP_REDUCE_SUM && ip[2])
            lw_attr(d, k, "square", 1);
        break;
    case NN_OP_PERMUTE: {
        double a = 0;
        for (int i = 0; i < t->ndim; i++)
            a = a * 10 + (double)ip[i];
        lw_attr(d, k, "axes", a);
        break;
    }
    case NN_OP_CONCAT: lw_attr(d, k, "axis", (double)ip[0]); break;
    case NN_OP_SLICE:
        lw_attr(d, k, "axis", (double)ip[0]);
        lw_attr(d, k, "start", (double)ip[1]);
        break;
    case NN_OP_PAD:
        lw_attr(d, k, "axis", (double)ip[0]);
        lw_attr(d, k, "before", (double)ip[1]);
        break;
    case NN_OP_LAYERNORM: case NN_OP_LAYERNORM_GRAD: case NN_OP_RMSNORM:
    case NN_OP_RMSNORM_GRAD: case NN_OP_BATCHNORM: case NN_OP_BATCHNORM_GRAD:
    case NN_OP_BATCHNORM_INFER:
        lw_attr(d, k, "eps", fp[0]);
        break;
    case NN_OP_ROPE:
        lw_attr(d, k, "base", fp[0]);
        lw_attr(d, k, "dir", fp[1]);
        if (fp[2] != 0) /* the position of row 0 (inference: the tokens already cached) */
            lw_attr(d, k, "offset", fp[2]);
        break;
    case NN_OP_SGD_UPDATE:
        lw_attr(d, k, "lr", fp[0]);
        lw_attr(d, k, "momentum", fp[1]);
        lw_attr(d, k, "weight_decay", fp[2]);
        lw_attr(d, k, "step", (double)(ip[0] + 1)); /* the count after this update */
        break;
    case NN_OP_ADAM_UPDATE: case NN_OP_ADAMW_UPDATE:
        lw_attr(d, k, "lr", fp[0]);
        lw_attr(d, k, "beta1", fp[1]);
        lw_attr(d, k, "beta2", fp[2]);
        lw_attr(d, k, "eps", fp[3]);
        lw_attr(d, k, "weight_decay", fp[4]);
        lw_attr(d, k, "step", (double)(ip[0] + 1));
        break;
    default:
        break;
    }
}

/* The kernel an in-place update of a persistent buffer runs when its op has none of its own:
 * grad_acc (acc += g) is add into acc, copy_to (dst = src in dst's dtype) is cast into dst. */
static nn_op lw_substitute(nn_op op)
{
    switch (op) {
    case NN_OP_GRAD_ACC: return NN_OP_ADD;
    case NN_OP_COPY_TO: return NN_OP_CAST;
    default: return op;
    }
}

const kc_kernel_def *lw_kernel_def(const nn_tensor *node)
{
    const kc_kernel_def *d = kc_kernel_find(node->op);
    return d ? d : kc_kernel_find(lw_substitute(node->op));
}

/* The substitute kernel of update node (lw_substitute): its operands as the op it stands
 * for computes them, written over the updated buffer. */
static np_status lw_substitute_kernel(const kc_kernel_def *def, const nn_tensor *node,
                                      const kc_tensor *in, uint32_t chip, uint32_t cores,
                                      kc_kernel *k, np_err *err)
{
    char desc[256];
    k->op = def->op;
    k->n_out = 1;
    k->out[0] = in[0]; /* acc or dst, in place */
    if (node->op == NN_OP_GRAD_ACC) {
        k->n_in = 2;
        k->in[0] = in[0];
        k->in[1] = in[1];
    } else {
        k->n_in = 1;
        k->in[0] = in[1];
        lw_attr(def, k, "to", (double)node->src[0]->dtype);
    }
    if (!nn_same_shape(node->src[0], node->src[1]))
        return np_err_set(err, NP_ERR_INCONSISTENT, "%s (node '%s'): its operands differ in "
                          "shape", lower_node_desc(node, desc, sizeof desc), node->name);
    k->place = (kc_place){.chip = chip, .core0 = 0, .n_cores = cores};
    return NP_OK;
}

np_status lw_node_kernel(const nn_tensor *node, const kc_tensor *in, const kc_tensor *out,
                         uint32_t chip, uint32_t cores, bool check, kc_kernel *k, np_err *err)
{
    char desc[256];
    memset(k, 0, sizeof *k);
    const kc_kernel_def *def = kc_kernel_find(node->op);
    if (!def && (def = kc_kernel_find(lw_substitute(node->op))))
        return lw_substitute_kernel(def, node, in, chip, cores, k, err);
    if (!def)
        return np_err_set(err, NP_ERR_MISSING, "no kernel for %s yet (node '%s')",
                          lower_node_desc(node, desc, sizeof desc), node->name);
    bool update = nn_op_flags(node->op) & NN_OPF_UPDATE;
    int n_out = def->n_out;
    if (def->n_in >= 0 && def->n_in != node->n_src && !update)
        return np_err_set(err, NP_ERR_MISSING, "no kernel for %s yet (node '%s'): the %s kernel "
                          "takes %d inputs, this form of the op has %d",
                          lower_node_desc(node, desc, sizeof desc), node->name,
                          nn_op_name(node->op), def->n_in, node->n_src);
    if ((def->n_in >= 0 && def->n_in != node->n_src) || node->n_src > KC_MAX_IN ||
        (update ? def->n_out < 1 || (def->n_out > 1 && def->n_out + 1 > node->n_src)
                : def->n_out < 1 || def->n_out > KC_MAX_OUT))
        return np_err_set(err, NP_ERR_INCONSISTENT, "%s (node '%s'): the %s kernel takes %d "
                          "inputs and %d outputs, the node has %d sources%s",
                          lower_node_desc(node, desc, sizeof desc), node->name,
                          nn_op_name(node->op), def->n_in, def->n_out, node->n_src,
                          update ? " (updated in place)" : " and one result");
    k->op = node->op;
    k->n_in = node->n_src;
    k->n_out = n_out;
    for (int i = 0; i < node->n_src; i++)
        k->in[i] = in[i];
    if (update) { /* in place: the parameter, then its state (the sources after the gradient) */
        k->out[0] = in[0];
        for (int j = 1; j < n_out; j++)
            k->out[j] = in[j + 1];
    } else { /* the node's result, then the kernel's further outputs (attention's lse) */
        for (int j = 0; j < n_out; j++)
            k->out[j] = out[j];
    }
    k->place = (kc_place){.chip = chip, .core0 = 0, .n_cores = cores};
    if (def->from_node) {
        if (def->from_node(node, k, err) != NP_OK)
            return err->status;
    } else {
        lw_attrs_of_node(def, node, k);
    }
    if (def->reference && check)
        return lw_check_reference(def, k, node, err);
    return NP_OK;
}

np_status lower_node_kernel(const nn_tensor *node, uint32_t cores, kc_kernel *k, np_err *err)
{
    kc_tensor in[KC_MAX_IN], out[KC_MAX_OUT];
    for (int i = 0; i < node->n_src && i < KC_MAX_IN; i++)
        kc_tensor_of(&in[i], 0, node->src[i]);
    kc_tensor_of(&out[0], 0, node);
    if (node->op == NN_OP_ATTENTION) /* its lse, [B, H, S] fp32 */
        kc_tensor_dense(&out[1], 0, NN_F32, 3, node->ne);
    return lw_node_kernel(node, in, out, 0, cores ? cores : 1, true, k, err);
}

np_status lower_kernel_alone(const arch_config *cfg, const kc_kernel *k0, kc_result *res,
                             isa_program **prog, np_err *err)
{
    return lower_kernel_repeated(cfg, k0, 1, res, prog, err);
}

np_status lower_kernel_repeated(const arch_config *cfg, const kc_kernel *k0, int reps,
                                kc_result *res, isa_program **prog, np_err *err)
{
    kc_kernel k = *k0;
    uint32_t cores = k.place.core0 + (k.place.n_cores ? k.place.n_cores : 1);
    /* room for a kernel's constants (.data: RoPE's tables) below the operands: a quarter of
     * the HBM, at most 1 GiB */
    uint64_t room = cfg->chip.hbm_bytes / 4 < (UINT64_C(1) << 30) ? cfg->chip.hbm_bytes / 4
                                                                   : UINT64_C(1) << 30;
    kc_prog_opts po = {.chip = k.place.chip, .cores = cores,
                       .emit = {.bss_base = room > ISA_EMIT_BSS_BASE ? room : 0}};
    kc_prog *p;
    if (kc_prog_new(cfg, &po, &p, err) != NP_OK)
        return err->status;
    np_status st = NP_OK;
    for (int i = 0; i < k.n_in && st == NP_OK; i++)
        st = kc_prog_bss(p, NULL, kc_tensor_extent(&k.in[i]), &k.in[i].addr, err);
    for (int i = 0; i < k.n_epi && st == NP_OK; i++)
        if (k.epi[i].has_arg)
            st = kc_prog_bss(p, NULL, kc_tensor_extent(&k.epi[i].arg), &k.epi[i].arg.addr, err);
    for (int i = 0; i < k.n_out && st == NP_OK; i++)
        st = kc_prog_bss(p, NULL, kc_tensor_extent(&k.out[i]), &k.out[i].addr, err);
    if (st == NP_OK)
        st = kc_compile(p, &k, res, err);
    /* the later copies with the tiling the first chose, so the cost model runs once */
    const kc_tiling *tl = st == NP_OK && res->n_cands ? &res->cands[0] : NULL;
    if (tl && k.n_attrs + (int)tl->n_attrs <= KC_MAX_ATTRS)
        for (unsigned a = 0; a < tl->n_attrs; a++)
            k.attrs[k.n_attrs++] = tl->attrs[a];
    for (int r = 1; r < reps && st == NP_OK; r++) {
        kc_result again;
        st = kc_compile(p, &k, &again, err);
    }
    if (st == NP_OK)
        st = kc_prog_finish(p, err);
    if (st == NP_OK && prog)
        *prog = kc_prog_take(p);
    kc_prog_free(p);
    return st;
}

np_status lower_node_kernel_at(const nn_tensor *node, const kc_tensor *in, const kc_tensor *out,
                               uint32_t cores, kc_kernel *k, np_err *err)
{
    return lw_node_kernel(node, in, out, 0, cores ? cores : 1, true, k, err);
}

bool lower_epi_ok(const nn_tensor *cur, const nn_tensor *m, const nn_tensor **arg)
{
    return lw_epi_step_ok(cur, m, arg);
}

void lower_epi_of(const nn_tensor *m, const kc_tensor *arg, kc_epi *e) { lw_epi_step(m, arg, e); }

/* ---- epilogue steps -------------------------------------------------------------------------- */

/* Whether a's shape broadcasts to b's (numpy rules). */
static bool lw_broadcasts(const nn_tensor *a, const nn_tensor *b)
{
    if (a->ndim > b->ndim)
        return false;
    for (int d = 1; d <= a->ndim; d++) {
        int64_t x = a->ne[a->ndim - d], y = b->ne[b->ndim - d];
        if (x != 1 && x != y)
            return false;
    }
    return true;
}

bool lw_epi_step_ok(const nn_tensor *cur, const nn_tensor *m, const nn_tensor **arg)
{
    *arg = NULL;
    if (m->dtype != cur->dtype || !nn_same_shape(m, cur))
        return false;
    switch (m->op) {
    case NN_OP_ADD: case NN_OP_MUL: /* commutative: cur may be either operand */
    case NN_OP_SUB: case NN_OP_DIV: {
        if (m->n_src != 2 || m->src[0] == m->src[1])
            return false;
        int other = m->src[0] == cur ? 1 : 0;
        if (m->src[1 - other] != cur)
            return false;
        if (other == 0 && (m->op == NN_OP_SUB || m->op == NN_OP_DIV))
            return false; /* arg - result: the epilogue computes result op arg */
        *arg = m->src[other];
        return lw_broadcasts(*arg, m);
    }
    case NN_OP_RELU:
        return m->fp[0] == 0; /* relu6's clamp is not an epilogue step */
    case NN_OP_SCALE: case NN_OP_GELU: case NN_OP_SILU: case NN_OP_TANH: case NN_OP_EXP:
        return true;
    default:
        return false;
    }
}

void lw_epi_step(const nn_tensor *m, const kc_tensor *arg, kc_epi *e)
{
    memset(e, 0, sizeof *e);
    e->op = m->op;
    e->has_arg = arg != NULL;
    if (arg)
        e->arg = *arg;
    if (m->op == NN_OP_SCALE)
        e->f = m->fp[0];
}
