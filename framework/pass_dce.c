/* pass_dce.c — dead-code elimination and common-subexpression elimination. */
#include <stdlib.h>
#include <string.h>

#include "pass.h"
#include "nn_impl.h"

/* Clears gradient links to nodes about to be removed. */
static void nn_drop_dead_grads(nn_graph *g, const bool *keep)
{
    for (int i = 0; i < nn_graph_n_nodes(g); i++) {
        nn_tensor *t = nn_graph_node(g, i);
        if (t->grad && !keep[t->grad->id])
            t->grad = NULL;
    }
}

int nn_pass_dce(nn_graph *g)
{
    int n = nn_graph_n_nodes(g), max_id = nn_graph_max_id(g);
    bool *keep = nn_calloc((size_t)max_id + 1, sizeof *keep);
    nn_tensor **stack = nn_malloc(((size_t)n + 1) * sizeof *stack);
    int removed = 0;
    if (!keep || !stack)
        goto out;
    int sp = 0;
    for (int i = 0; i < n; i++) {
        nn_tensor *t = nn_graph_node(g, i);
        bool root = t->is_output || (nn_op_flags(t->op) & NN_OPF_UPDATE) ||
                    (t->op == NN_OP_LEAF && (t->role == NN_ROLE_INPUT || t->role == NN_ROLE_PARAM));
        if (root && !keep[t->id]) {
            keep[t->id] = true;
            stack[sp++] = t;
        }
    }
    while (sp > 0) {
        nn_tensor *t = stack[--sp];
        for (int s = 0; s < t->n_src; s++)
            if (!keep[t->src[s]->id]) {
                keep[t->src[s]->id] = true;
                stack[sp++] = t->src[s];
            }
    }
    for (int i = 0; i < n; i++)
        removed += !keep[nn_graph_node(g, i)->id];
    if (removed) {
        nn_drop_dead_grads(g, keep);
        nn_graph_remove(g, keep);
    }
out:
    free(keep);
    free(stack);
    return removed;
}

/* ---- CSE ---- */

static uint64_t nn_hash_mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    return h;
}

static uint64_t nn_node_hash(const nn_tensor *t)
{
    uint64_t h = nn_hash_mix((uint64_t)t->op, (uint64_t)t->n_src);
    for (int s = 0; s < t->n_src; s++)
        h = nn_hash_mix(h, (uint64_t)t->src[s]->id);
    for (int i = 0; i < NN_MAX_IPARAMS; i++)
        h = nn_hash_mix(h, (uint64_t)t->ip[i]);
    for (int i = 0; i < NN_MAX_FPARAMS; i++) {
        uint64_t bits;
        memcpy(&bits, &t->fp[i], sizeof bits);
        h = nn_hash_mix(h, bits);
    }
    return h;
}

static bool nn_node_same(const nn_tensor *a, const nn_tensor *b)
{
    if (a->op != b->op || a->n_src != b->n_src || a->dtype != b->dtype || !nn_same_shape(a, b) ||
        memcmp(a->ip, b->ip, sizeof a->ip) != 0 || memcmp(a->fp, b->fp, sizeof a->fp) != 0)
        return false;
    for (int s = 0; s < a->n_src; s++)
        if (a->src[s] != b->src[s])
            return false;
    return true;
}

np_status nn_pass_cse(nn_graph *g, int *n_merged, np_err *err)
{
    nn_tensor **order;
    int n;
    *n_merged = 0;
    if (nn_schedule(g, &order, &n, err) != NP_OK)
        return err->status;
    size_t cap = 1;
    while (cap < 2 * (size_t)n + 2)
        cap <<= 1;
    nn_tensor **table = nn_calloc(cap, sizeof *table);
    if (!table) {
        free(order);
        return np_err_set(err, NP_ERR_NOMEM, "out of memory in CSE");
    }
    for (int i = 0; i < n; i++) {
        nn_tensor *t = order[i];
        if (t->op == NN_OP_LEAF || (nn_op_flags(t->op) & NN_OPF_UPDATE))
            continue;
        size_t slot = nn_node_hash(t) & (cap - 1);
        while (table[slot] && !nn_node_same(table[slot], t))
            slot = (slot + 1) & (cap - 1);
        if (!table[slot]) {
            table[slot] = t;
        } else { /* sources were already canonicalized: t is a duplicate */
            nn_replace_uses(g, t, table[slot]);
            (*n_merged)++;
        }
    }
    free(table);
    free(order);
    if (*n_merged)
        nn_pass_dce(g);
    return NP_OK;
}
