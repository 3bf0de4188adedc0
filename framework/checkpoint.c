/* checkpoint.c — activation checkpointing (recomputation) after nn_backward.
 *
 * A forward node is kept when it is a leaf, lies outside the model's layers (layer -1), or
 * the policy keeps it: every-k keeps the tensors that enter layer 0, k, 2k, ... (read by a
 * node of another layer whose index is a multiple of k, or by the head); selective keeps
 * every layer's input and the outputs of matmul and conv2d; attention recomputes only the
 * attention core (nodes nn_attention marks attn_core). Backward nodes that read a forward
 * node that is not kept read a recomputed copy instead: the copy (region recompute) is built
 * from kept tensors through copies of the nodes between, once per forward node, and gets the
 * scheduling key of its first backward reader so that the scheduler computes it just in time.
 * The forward node then dies at the end of the forward pass.
 *
 * nn_pass_recompute_layers does what torch.utils.checkpoint does with each layer as a
 * checkpoint (Megatron-LM's activation checkpointing): the layer's whole forward runs again
 * before its backward, every node of it, those no backward node reads included (a GPT layer's
 * MLP output projection, its all-reduce, dropout and residual sum), reading the layer's
 * recomputed values and what enters it from outside (other layers, leaves), all keyed just
 * before the layer's first backward node in forward order. */
#include <stdlib.h>
#include <string.h>

#include "pass.h"
#include "nn_impl.h"

typedef struct nn_ckpt {
    nn_graph *g;
    const bool *kept;
    nn_tensor **copy; /* by forward id */
    int n_copies;
} nn_ckpt;

static nn_tensor *nn_recompute(nn_ckpt *c, nn_tensor *t, double key)
{
    if (c->kept[t->id])
        return t;
    if (c->copy[t->id])
        return c->copy[t->id];
    nn_tensor *srcs[NN_MAX_SRC];
    for (int s = 0; s < t->n_src; s++)
        if (!(srcs[s] = nn_recompute(c, t->src[s], key)))
            return NULL;
    nn_graph_set_scope(c->g, "%s", t->scope);
    nn_tensor *r = nn_node(c->g, t->op, t->n_src, srcs, t->ip, t->fp);
    if (!r)
        return NULL;
    nn_tensor_set_name(r, "%.80s.recompute", t->name);
    r->layer = t->layer;
    r->chunk = t->chunk;
    r->sched_key = key;
    c->copy[t->id] = r;
    c->n_copies++;
    return r;
}

/* Copies, in forward order, every node of every layer that the backward-driven pass did not
 * copy, and keys each layer's copies just before its first backward node (whole-layer
 * recomputation). */
static nn_tensor *nn_recompute_in_layer(nn_ckpt *c, nn_tensor *t, int chunk, int layer);

static bool nn_recompute_whole_layers(nn_ckpt *c, nn_tensor **order, int n_order)
{
    int L = 0, K = 0;
    for (int i = 0; i < n_order; i++) {
        L = order[i]->layer + 1 > L ? order[i]->layer + 1 : L;
        K = order[i]->chunk + 1 > K ? order[i]->chunk + 1 : K;
    }
    if (!L)
        return true;
    K = K ? K : 1;
    double *first = nn_malloc((size_t)L * (size_t)K * sizeof *first);
    int *count = nn_calloc((size_t)L * (size_t)K, sizeof *count);
    bool ok = first && count;
    for (int i = 0; ok && i < L * K; i++)
        first[i] = 1e300;
    /* the first backward node of each (chunk, layer); how many forward nodes it has */
    for (int i = 0; ok && i < n_order; i++) {
        nn_tensor *t = order[i];
        if (t->layer < 0)
            continue;
        int k = (t->chunk > 0 ? t->chunk : 0) * L + t->layer;
        if (t->region == NN_REGION_BACKWARD && t->sched_key < first[k])
            first[k] = t->sched_key;
        if (t->region == NN_REGION_FORWARD && t->op != NN_OP_LEAF)
            count[k]++;
    }
    int *seen = ok ? nn_calloc((size_t)L * (size_t)K, sizeof *seen) : NULL;
    ok = ok && seen;
    for (int i = 0; ok && i < n_order; i++) {
        nn_tensor *t = order[i];
        if (t->layer < 0 || t->region != NN_REGION_FORWARD || t->op == NN_OP_LEAF)
            continue;
        int k = (t->chunk > 0 ? t->chunk : 0) * L + t->layer;
        nn_tensor *r = nn_recompute_in_layer(c, t, t->chunk, t->layer);
        if (!r) {
            ok = false;
            break;
        }
        if (r != t && first[k] < 1e300) /* forward order, in [first - 0.5, first - 0.1) */
            r->sched_key = first[k] - 0.5 + 0.4 * seen[k]++ / (count[k] + 1);
    }
    free(first);
    free(count);
    free(seen);
    return ok;
}

static np_status nn_recompute_pass(nn_graph *g, const bool *kept, bool layers, int *n_recomputed,
                                   np_err *err)
{
    *n_recomputed = 0;
    int max_id = nn_graph_max_id(g);
    nn_tensor **copy = nn_calloc((size_t)max_id + 1, sizeof *copy);
    nn_tensor **order = NULL;
    np_status st = NP_OK;
    if (!copy) {
        st = np_err_set(err, NP_ERR_NOMEM, "out of memory in checkpointing");
        goto done;
    }
    int n_order;
    if ((st = nn_schedule(g, &order, &n_order, err)) != NP_OK)
        goto done;
    nn_ckpt c = {g, kept, copy, 0};
    char scope[NN_NAME_MAX];
    strcpy(scope, nn_graph_scope(g));
    nn_region region = nn_graph_region(g);
    int layer = nn_graph_layer(g), chunk = nn_graph_chunk(g);
    nn_graph_set_region(g, NN_REGION_RECOMPUTE);
    for (int i = 0; i < n_order && st == NP_OK; i++) {
        nn_tensor *b = order[i];
        if (b->region != NN_REGION_BACKWARD)
            continue;
        for (int s = 0; s < b->n_src; s++) {
            nn_tensor *src = b->src[s];
            if (src->region != NN_REGION_FORWARD || kept[src->id])
                continue;
            nn_tensor *r = nn_recompute(&c, src, b->sched_key - 0.5);
            if (!r) {
                st = nn_graph_status(g, err);
                break;
            }
            b->src[s] = r;
        }
    }
    if (st == NP_OK && layers && !nn_recompute_whole_layers(&c, order, n_order))
        st = nn_graph_status(g, err) != NP_OK ? err->status
                                              : np_err_set(err, NP_ERR_NOMEM, "out of memory in checkpointing");
    nn_graph_set_region(g, region);
    nn_graph_set_scope(g, "%s", scope);
    nn_graph_set_layer(g, layer);
    nn_graph_set_chunk(g, chunk);
    *n_recomputed = c.n_copies;
done:
    free(copy);
    free(order);
    return st;
}

/* The node of the same (chunk, layer) as the one being recomputed that a whole-layer copy
 * reads: its copy, made here first when it has none (a leaf, a send or receive, or a node of
 * another layer or chunk is read as it is). */
static nn_tensor *nn_recompute_in_layer(nn_ckpt *c, nn_tensor *t, int chunk, int layer)
{
    if (t->op == NN_OP_LEAF || t->op == NN_OP_SEND || t->op == NN_OP_RECV ||
        t->region != NN_REGION_FORWARD || t->layer != layer || t->chunk != chunk)
        return t;
    if (c->copy[t->id])
        return c->copy[t->id];
    nn_tensor *srcs[NN_MAX_SRC];
    for (int s = 0; s < t->n_src; s++)
        if (!(srcs[s] = nn_recompute_in_layer(c, t->src[s], chunk, layer)))
            return NULL;
    nn_graph_set_scope(c->g, "%s", t->scope);
    nn_tensor *r = nn_node(c->g, t->op, t->n_src, srcs, t->ip, t->fp);
    if (!r)
        return NULL;
    nn_tensor_set_name(r, "%.80s.recompute", t->name);
    r->layer = t->layer;
    r->chunk = t->chunk;
    c->copy[t->id] = r;
    c->n_copies++;
    return r;
}

np_status nn_pass_recompute(nn_graph *g, const bool *kept, int *n_recomputed, np_err *err)
{
    return nn_recompute_pass(g, kept, false, n_recomputed, err);
}

np_status nn_pass_recompute_layers(nn_graph *g, const bool *kept, int *n_recomputed, np_err *err)
{
    return nn_recompute_pass(g, kept, true, n_recomputed, err);
}

np_status nn_pass_checkpoint(nn_graph *g, nn_ckpt_policy policy, int k, int *n_recomputed,
                             np_err *err)
{
    *n_recomputed = 0;
    if (k < 1)
        return np_err_set(err, NP_ERR_RANGE, "checkpoint: k must be at least 1, got %d", k);
    int n = nn_graph_n_nodes(g), max_id = nn_graph_max_id(g);
    bool *kept = nn_calloc((size_t)max_id + 1, sizeof *kept);
    if (!kept)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory in checkpointing");
    int every = policy == NN_CKPT_SELECTIVE ? 1 : k;
    for (int i = 0; i < n; i++) {
        nn_tensor *t = nn_graph_node(g, i);
        if (t->op == NN_OP_LEAF || t->region != NN_REGION_FORWARD || t->layer < 0)
            kept[t->id] = true;
        if (policy == NN_CKPT_ATTENTION) {
            kept[t->id] = kept[t->id] || !t->attn_core;
            continue;
        }
        if (policy == NN_CKPT_SELECTIVE && (t->op == NN_OP_MATMUL || t->op == NN_OP_CONV2D))
            kept[t->id] = true;
        if (t->region != NN_REGION_FORWARD)
            continue;
        for (int s = 0; s < t->n_src; s++) {
            nn_tensor *src = t->src[s];
            if (src->layer != t->layer && (t->layer < 0 || t->layer % every == 0))
                kept[src->id] = true;
        }
    }
    np_status st = nn_pass_recompute(g, kept, n_recomputed, err);
    free(kept);
    return st;
}
