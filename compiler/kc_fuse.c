/* kc_fuse.c — fusion groups as kernels (see kc_fuse.h). */
#include "kc_fuse.h"

#include <string.h>

int kc_fuse_members(const nn_graph *g, int group, nn_tensor **nodes, int max)
{
    int n = 0, total = nn_graph_n_nodes(g);
    nn_tensor *cur = NULL;
    for (int i = 0; i < total && !cur; i++)
        if (nn_graph_node(g, i)->id == group && nn_graph_node(g, i)->fusion_group == group)
            cur = nn_graph_node(g, i);
    while (cur) {
        if (n < max)
            nodes[n] = cur;
        n++;
        nn_tensor *next = NULL;
        for (int i = 0; i < total && !next; i++) {
            nn_tensor *t = nn_graph_node(g, i);
            if (t == cur || t->fusion_group != group)
                continue;
            for (int s = 0; s < t->n_src && !next; s++)
                if (t->src[s] == cur)
                    next = t;
        }
        cur = next;
    }
    return n;
}

/* The steps the matrix unit's epilogue applies (kc_matmul.c: KC_DEF_EPILOGUE only). */
static bool mxu_step(const kc_epi *e)
{
    switch (e->op) {
    case NN_OP_ADD: case NN_OP_SUB: case NN_OP_MUL: case NN_OP_DIV: return !e->swap;
    case NN_OP_RELU: return e->f == 0;
    case NN_OP_SCALE: case NN_OP_GELU: case NN_OP_SILU: case NN_OP_TANH: case NN_OP_EXP:
        return true;
    default: return false;
    }
}

/* The kernel attributes of a first node from its parameters. */
static void attrs_of(const nn_tensor *t, kc_kernel *k)
{
    switch (t->op) {
    case NN_OP_SCALE: k->attrs[k->n_attrs++] = KC_REAL("s", t->fp[0]); break;
    case NN_OP_RELU:
    case NN_OP_RELU_GRAD:
        if (t->fp[0] > 0)
            k->attrs[k->n_attrs++] = KC_REAL("clamp", t->fp[0]);
        break;
    case NN_OP_DROPOUT:
        k->attrs[k->n_attrs++] = KC_REAL("p", t->fp[0]);
        k->attrs[k->n_attrs++] = KC_INT("seed", t->ip[0]);
        break;
    case NN_OP_CAUSAL_MASK: k->attrs[k->n_attrs++] = KC_REAL("fill", t->fp[0]); break;
    case NN_OP_CAST: k->attrs[k->n_attrs++] = KC_INT("to", t->ip[0]); break;
    case NN_OP_CONV2D:
        k->attrs[k->n_attrs++] = KC_INT("stride", t->ip[0]);
        k->attrs[k->n_attrs++] = KC_INT("pad", t->ip[1]);
        k->attrs[k->n_attrs++] = KC_INT("dilation", t->ip[2]);
        k->attrs[k->n_attrs++] = KC_INT("groups", t->ip[3]);
        break;
    default: break;
    }
}

/* The epilogue step of node t reading the running value `run`; false when t cannot be one
 * (not elementwise, or it reads the running value twice). */
static bool step_of(const nn_tensor *t, const nn_tensor *run, kc_epi *e, int *arg_src)
{
    memset(e, 0, sizeof *e);
    *arg_src = -1;
    if (!(nn_op_flags(t->op) & NN_OPF_ELEM) || t->n_src < 1 || t->n_src > 2)
        return false;
    int at = -1;
    for (int s = 0; s < t->n_src; s++)
        if (t->src[s] == run) {
            if (at >= 0)
                return false;
            at = s;
        }
    if (at < 0)
        return false;
    e->op = t->op;
    switch (t->op) {
    case NN_OP_SCALE: case NN_OP_CAUSAL_MASK: e->f = t->fp[0]; break;
    case NN_OP_RELU: case NN_OP_RELU_GRAD: e->f = t->fp[0] > 0 ? t->fp[0] : 0; break;
    case NN_OP_DROPOUT: e->f = t->fp[0], e->seed = (uint64_t)t->ip[0]; break;
    case NN_OP_CAST: e->to = (nn_dtype)t->ip[0]; break;
    default: break;
    }
    if (t->n_src == 2) {
        e->has_arg = true;
        e->swap = at == 1;
        *arg_src = 1 - at;
    }
    return true;
}

np_status kc_fuse_group(nn_tensor *const *nodes, int n, kc_where_fn where, void *ctx,
                        const kc_place *place, kc_kernel *out, int max, int *n_out, np_err *err)
{
    *n_out = 0;
    for (int i = 1; i < n; i++) {
        bool reads = false;
        for (int s = 0; s < nodes[i]->n_src; s++)
            reads = reads || nodes[i]->src[s] == nodes[i - 1];
        if (!reads)
            return np_err_set(err, NP_ERR_INCONSISTENT, "fusion: %s does not read %s: not a chain",
                              nodes[i]->name, nodes[i - 1]->name);
    }
    int i = 0;
    while (i < n) {
        const nn_tensor *root = nodes[i];
        if (root->op == NN_OP_RESHAPE) { /* a view: no kernel; the next reads its bytes */
            i++;
            continue;
        }
        bool mm = root->op == NN_OP_MATMUL || root->op == NN_OP_CONV2D;
        if (!mm && !(nn_op_flags(root->op) & NN_OPF_ELEM))
            return np_err_set(err, NP_ERR_INCONSISTENT, "fusion: %s (%s) is neither elementwise "
                              "nor a matmul or conv2d: compile it with its own kernel and fuse the "
                              "rest of the chain", root->name, nn_op_name(root->op));
        if (*n_out == max)
            return np_err_set(err, NP_ERR_RANGE, "fusion: the chain from %s needs more than %d "
                              "kernels", nodes[0]->name, max);
        kc_kernel *k = &out[(*n_out)++];
        memset(k, 0, sizeof *k);
        k->op = root->op, k->place = *place, k->n_in = root->n_src, k->n_out = 1;
        for (int s = 0; s < root->n_src; s++)
            if (where(ctx, root->src[s], &k->in[s], err) != NP_OK)
                return err->status;
        attrs_of(root, k);
        const nn_tensor *last = root;
        int j = i + 1;
        for (; j < n && k->n_epi < KC_MAX_EPI; j++) {
            const nn_tensor *t = nodes[j];
            kc_epi e;
            int a;
            if (t->op == NN_OP_RESHAPE || !step_of(t, last, &e, &a))
                break;
            if (mm && !mxu_step(&e)) {
                /* a cast as the chain's very last step: the matmul's output dtype */
                bool final = j + 1 == n || nodes[j + 1]->op == NN_OP_RESHAPE;
                if (e.op == NN_OP_CAST && final) {
                    last = t, j++;
                }
                break;
            }
            if (e.has_arg && where(ctx, t->src[a], &e.arg, err) != NP_OK)
                return err->status;
            k->epi[k->n_epi++] = e;
            last = t;
        }
        if (where(ctx, last, &k->out[0], err) != NP_OK)
            return err->status;
        i = j;
    }
    return NP_OK;
}
