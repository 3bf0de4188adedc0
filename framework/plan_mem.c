/* plan_mem.c — memory of one rank by role, from a class's blocks and schedule.
 *
 *   params, grads, optimizer state   the persistent leaves (parameters as computed with;
 *                                    gradient accumulators; fp32 masters and Adam moments)
 *   activations                      saved activations — forward buffers (view roots) that
 *                                    the backward block of the same chunk reads, plus one byte
 *                                    per element of every dropout mask the backward needs
 *                                    (a device keeps the mask; our reference executor
 *                                    regenerates it from the seed), plus the log-sum-exp
 *                                    of every fused attention whose q and k are saved (its
 *                                    forward kernel writes it for the backward) — summed over the
 *                                    micro-batches in flight, at their peak over the schedule;
 *                                    under ZB-H1 a micro-batch's B frees what no W reads and
 *                                    keeps, with those, the results of B its W reads (the
 *                                    linear layers' output gradients) until its W
 *   buffers                          outputs of collectives and receives that are not saved
 *                                    activations (gathered ZeRO-3 parameters, all-reduced or
 *                                    all-gathered TP/SP values, gradient shards), at the
 *                                    peak of their liveness within a block; all-reduces of
 *                                    gradient accumulators work in place
 *   workspace                        every other transient (intermediates, activation
 *                                    gradients), at the peak of a block
 * A buffer is counted at its root: views, in-place updates and the transposes the lowering
 * folds into their matmul readers are their source's storage.
 * Each role is at its own peak; total_bytes is their sum (a bound on the true peak). A
 * dropout mask is kept unless its dropout is recomputed: with selective recomputation the
 * attention core's, with full (and uniform) recomputation every layer's. Model inputs are not counted. */
#include <stdlib.h>
#include <string.h>

#include "plan_impl.h"

typedef struct nn_memctx {
    const nn_plan *p;
    const nn_plan_class *c;
    int max_id;
    int *blk, *ent;          /* by id: block and entry producing the node, -1 */
    bool *saved;             /* by id: a saved activation */
    int *reader_layer;       /* by id: the smallest layer >= 0 of its backward readers */
    bool *wread;             /* by id: a saved activation a W block (ZB-H1) reads */
    bool *folded;            /* by id: a transpose the lowering folds into its matmul readers */
} nn_memctx;

/* The buffer t's storage belongs to: views (a pipeline scatter's slice too) and in-place
 * updates alias their source, a transpose read by matmuls only is read in place from its
 * source (the lowering folds it into their operand strides: compiler/lower.c), and an
 * all-reduce of a gradient accumulator (DP, tied embeddings, sequence-parallel norms) works
 * in place as NCCL's does. */
static const nn_tensor *nn_root(const nn_memctx *m, const nn_tensor *t)
{
    for (;;) {
        if (t->op == NN_OP_LEAF)
            return t;
        if ((nn_op_flags(t->op) & (NN_OPF_VIEW | NN_OPF_UPDATE)) ||
            nn_plan_node_is_offset_view(t) || m->folded[t->id]) {
            t = t->src[0];
        } else if (t->op == NN_OP_ALL_REDUCE && t->region != NN_REGION_FORWARD &&
                   nn_root(m, t->src[0])->op == NN_OP_LEAF) {
            t = t->src[0];
        } else {
            return t;
        }
    }
}

static void nn_memctx_free(nn_memctx *m)
{
    free(m->blk);
    free(m->ent);
    free(m->saved);
    free(m->reader_layer);
    free(m->wread);
    free(m->folded);
}

/* The transposes the lowering folds (compiler/lower.c, LOWER_NODE_FOLDED): every reader in
 * the class's blocks a matmul, not an output, its source not folded itself. */
static np_status nn_memctx_fold(nn_memctx *m, np_err *err)
{
    const nn_plan_class *c = m->c;
    size_t n = (size_t)m->max_id + 1;
    int *uses = nn_calloc(n, sizeof *uses);
    bool *other = nn_calloc(n, sizeof *other); /* read by something other than a matmul */
    if (!uses || !other) {
        free(uses);
        free(other);
        return np_err_set(err, NP_ERR_NOMEM, "out of memory accounting memory");
    }
    for (int b = 0; b < c->n_blocks; b++)
        for (int e = 0; e < c->blocks[b].n_entries; e++)
            for (int k = 0; k < c->blocks[b].entries[e].n_nodes; k++) {
                const nn_tensor *t = c->blocks[b].entries[e].nodes[k];
                for (int s = 0; s < t->n_src; s++) {
                    bool again = false; /* a node reading one source twice is one reader */
                    for (int r = 0; r < s; r++)
                        again = again || t->src[r] == t->src[s];
                    if (again)
                        continue;
                    uses[t->src[s]->id]++;
                    other[t->src[s]->id] = other[t->src[s]->id] || t->op != NN_OP_MATMUL;
                }
            }
    for (int i = 0; i < nn_graph_n_nodes(c->g); i++) { /* creation order: sources first */
        const nn_tensor *t = nn_graph_node(c->g, i);
        m->folded[t->id] = m->blk[t->id] >= 0 && nn_is_transpose(t) && uses[t->id] > 0 &&
                           !other[t->id] && !t->is_output && !m->folded[t->src[0]->id];
    }
    free(uses);
    free(other);
    return NP_OK;
}

static bool nn_mask_kept(const nn_plan *p, const nn_tensor *t)
{
    if (t->op != NN_OP_DROPOUT || t->fp[0] <= 0 || !t->requires_grad)
        return false;
    if ((p->s.recompute == NN_RECOMPUTE_FULL || p->s.recompute == NN_RECOMPUTE_UNIFORM) &&
        t->layer >= 0)
        return false;
    if (p->s.recompute == NN_RECOMPUTE_SELECTIVE && t->attn_core)
        return false;
    return true;
}

static np_status nn_memctx_init(nn_memctx *m, const nn_plan *p, const nn_plan_class *c, np_err *err)
{
    memset(m, 0, sizeof *m);
    m->p = p;
    m->c = c;
    m->max_id = nn_graph_max_id(c->g);
    size_t n = (size_t)m->max_id + 1;
    m->blk = nn_malloc(n * sizeof *m->blk);
    m->ent = nn_malloc(n * sizeof *m->ent);
    m->saved = nn_calloc(n, sizeof *m->saved);
    m->reader_layer = nn_malloc(n * sizeof *m->reader_layer);
    m->folded = nn_calloc(n, sizeof *m->folded);
    m->wread = nn_calloc(n, sizeof *m->wread);
    if (!m->blk || !m->ent || !m->saved || !m->reader_layer || !m->folded || !m->wread) {
        nn_memctx_free(m);
        return np_err_set(err, NP_ERR_NOMEM, "out of memory accounting memory");
    }
    for (size_t i = 0; i < n; i++)
        m->blk[i] = m->ent[i] = m->reader_layer[i] = -1;
    for (int b = 0; b < c->n_blocks; b++)
        for (int e = 0; e < c->blocks[b].n_entries; e++)
            for (int k = 0; k < c->blocks[b].entries[e].n_nodes; k++) {
                const nn_tensor *t = c->blocks[b].entries[e].nodes[k];
                m->blk[t->id] = b;
                m->ent[t->id] = e;
            }
    if (nn_memctx_fold(m, err) != NP_OK) {
        nn_memctx_free(m);
        return err->status;
    }
    for (int b = 0; b < c->n_blocks; b++) {
        const nn_plan_block *blk = &c->blocks[b];
        if (blk->kind != NN_BLOCK_BACKWARD && blk->kind != NN_BLOCK_BACKWARD_W)
            continue;
        for (int e = 0; e < blk->n_entries; e++)
            for (int k = 0; k < blk->entries[e].n_nodes; k++) {
                const nn_tensor *t = blk->entries[e].nodes[k];
                for (int s = 0; s < t->n_src; s++) {
                    const nn_tensor *r = nn_root(m, t->src[s]);
                    if (r->op == NN_OP_LEAF || m->blk[r->id] < 0 ||
                        c->blocks[m->blk[r->id]].kind != NN_BLOCK_FORWARD ||
                        c->blocks[m->blk[r->id]].chunk != blk->chunk)
                        continue;
                    m->saved[r->id] = true;
                    m->wread[r->id] = m->wread[r->id] || blk->kind == NN_BLOCK_BACKWARD_W;
                    if (t->layer >= 0 && (m->reader_layer[r->id] < 0 || t->layer < m->reader_layer[r->id]))
                        m->reader_layer[r->id] = t->layer;
                }
                /* The log-sum-exp a fused attention's backward reads is computed in the
                 * backward (attention_lse), but the lowering has the forward attention kernel
                 * write it (lower.c's lw_pair_attention): it is kept from the forward with
                 * that kernel's q and k when those are saved (as reading them just marked
                 * them), a transient of the backward when they are recomputed there. */
                if (t->op == NN_OP_ATTENTION_LSE && m->saved[nn_root(m, t->src[0])->id] &&
                    m->saved[nn_root(m, t->src[1])->id]) {
                    m->saved[t->id] = true;
                    m->reader_layer[t->id] = t->layer;
                }
            }
    }
    return NP_OK;
}

/* Saved bytes of one micro-batch of chunk `chunk` (layer >= -1: of that layer only); wpart
 * -1: all of them, 0: those no W block reads (freed after B under ZB-H1), 1: those a W block
 * reads (kept until W). */
static uint64_t nn_saved(const nn_memctx *m, int chunk, int layer, bool by_layer, int wpart)
{
    uint64_t bytes = 0;
    const nn_plan_class *c = m->c;
    for (int b = 0; b < c->n_blocks; b++) {
        const nn_plan_block *blk = &c->blocks[b];
        if ((blk->kind != NN_BLOCK_FORWARD && blk->kind != NN_BLOCK_BACKWARD) ||
            (chunk >= 0 && blk->chunk != chunk))
            continue;
        for (int e = 0; e < blk->n_entries; e++)
            for (int k = 0; k < blk->entries[e].n_nodes; k++) {
                const nn_tensor *t = blk->entries[e].nodes[k];
                if (blk->kind == NN_BLOCK_BACKWARD && t->op != NN_OP_ATTENTION_LSE)
                    continue; /* of the backward only the lse its forward kept */
                if (m->saved[t->id] && (!by_layer || m->reader_layer[t->id] == layer) &&
                    (wpart < 0 || wpart == m->wread[t->id]))
                    bytes += nn_nbytes(t);
                if (wpart < 1 && nn_mask_kept(m->p, t) && (!by_layer || t->layer == layer))
                    bytes += (uint64_t)nn_numel(t);
            }
    }
    return bytes;
}

uint64_t nn_plan_layer_saved_bytes(const nn_plan *p, const nn_plan_class *c, int layer)
{
    nn_memctx m;
    np_err e = {0};
    if (nn_memctx_init(&m, p, c, &e) != NP_OK)
        return 0;
    uint64_t b = nn_saved(&m, -1, layer, true, -1);
    nn_memctx_free(&m);
    return b;
}

typedef struct nn_live_ev {
    int at;          /* entry index; frees happen after the entry */
    int64_t delta;
    bool comm;
} nn_live_ev;

static int nn_ev_cmp(const void *a, const void *b)
{
    const nn_live_ev *x = a, *y = b;
    if (x->at != y->at)
        return x->at - y->at;
    return (x->delta < 0) - (y->delta < 0); /* allocations before frees at one entry */
}

/* Peak live workspace and communication buffers within block b. */
static np_status nn_block_peaks(const nn_memctx *m, int b, uint64_t *work, uint64_t *comm,
                                np_err *err)
{
    const nn_plan_block *blk = &m->c->blocks[b];
    int n = blk->n_entries, nb = 0;
    for (int e = 0; e < n; e++)
        nb += blk->entries[e].n_nodes;
    int *end = nn_malloc(((size_t)m->max_id + 1) * sizeof *end);
    nn_live_ev *ev = nn_malloc(((size_t)nb * 2 + 1) * sizeof *ev);
    if (!end || !ev) {
        free(end);
        free(ev);
        return np_err_set(err, NP_ERR_NOMEM, "out of memory accounting memory");
    }
    for (int e = 0; e < n; e++)
        for (int k = 0; k < blk->entries[e].n_nodes; k++)
            end[blk->entries[e].nodes[k]->id] = e;
    /* last readers in this block; read elsewhere or an output: to the end of the block */
    for (int bb = 0; bb < m->c->n_blocks; bb++) {
        const nn_plan_block *o = &m->c->blocks[bb];
        for (int e = 0; e < o->n_entries; e++)
            for (int k = 0; k < o->entries[e].n_nodes; k++) {
                const nn_tensor *t = o->entries[e].nodes[k];
                for (int s = 0; s < t->n_src; s++) {
                    const nn_tensor *r = nn_root(m, t->src[s]);
                    if (r->op == NN_OP_LEAF || m->blk[r->id] != b)
                        continue;
                    int at = bb == b ? e : n - 1;
                    if (at > end[r->id])
                        end[r->id] = at;
                }
            }
    }
    int k = 0;
    for (int e = 0; e < n; e++)
        for (int q = 0; q < blk->entries[e].n_nodes; q++) {
            const nn_tensor *t = blk->entries[e].nodes[q];
            if (nn_root(m, t) != t || m->saved[t->id])
                continue;
            if (t->is_output)
                end[t->id] = n - 1;
            bool c = (nn_op_flags(t->op) & NN_OPF_COMM) && t->op != NN_OP_GROUP_COPY &&
                     t->op != NN_OP_SHARD_SLICE;
            int64_t bytes = (int64_t)nn_nbytes(t);
            ev[k++] = (nn_live_ev){e, bytes, c};
            ev[k++] = (nn_live_ev){end[t->id] + 1, -bytes, c};
        }
    qsort(ev, (size_t)k, sizeof *ev, nn_ev_cmp);
    int64_t lw = 0, lc = 0, pw = 0, pc = 0;
    for (int i = 0; i < k; i++) {
        if (ev[i].comm)
            lc += ev[i].delta;
        else
            lw += ev[i].delta;
        pw = lw > pw ? lw : pw;
        pc = lc > pc ? lc : pc;
    }
    *work = (uint64_t)pw;
    *comm = (uint64_t)pc;
    free(end);
    free(ev);
    return NP_OK;
}

np_status nn_plan_class_memory(const nn_plan *p, const nn_plan_class *c, nn_plan_mem *mem,
                               np_err *err)
{
    memset(mem, 0, sizeof *mem);
    for (int i = 0; i < c->n_leaves; i++) {
        const nn_plan_leaf *l = &c->leaves[i];
        uint64_t b = nn_nbytes(l->t);
        if (l->kind == NN_LEAF_PARAM)
            mem->params_bytes += b;
        else if (l->kind == NN_LEAF_GRADBUF)
            mem->grads_bytes += b;
        else if (l->kind == NN_LEAF_MASTER || l->kind == NN_LEAF_OPTSTATE)
            mem->optstate_bytes += b;
    }
    nn_memctx m;
    if (nn_memctx_init(&m, p, c, err) != NP_OK)
        return err->status;
    uint64_t *saved = nn_calloc((size_t)c->n_blocks, sizeof *saved);
    if (!saved) {
        nn_memctx_free(&m);
        return np_err_set(err, NP_ERR_NOMEM, "out of memory accounting memory");
    }
    /* per forward block: its saved bytes (all; those a W reads); per backward block under
     * ZB-H1: the bytes of its results its W reads (the output gradients of the layers whose
     * weight gradients W computes), kept from B to W */
    uint64_t *saved_w = nn_calloc((size_t)c->n_blocks, sizeof *saved_w);
    uint64_t *held = nn_calloc((size_t)c->n_blocks, sizeof *held);
    bool *counted = nn_calloc((size_t)m.max_id + 1, sizeof *counted);
    if (!saved_w || !held || !counted) {
        free(saved), free(saved_w), free(held), free(counted);
        nn_memctx_free(&m);
        return np_err_set(err, NP_ERR_NOMEM, "out of memory accounting memory");
    }
    for (int b = 0; b < c->n_blocks; b++) {
        const nn_plan_block *blk = &c->blocks[b];
        if (blk->kind == NN_BLOCK_FORWARD) {
            saved[b] = nn_saved(&m, blk->chunk, -1, false, -1);
            saved_w[b] = nn_saved(&m, blk->chunk, -1, false, 1);
        }
        if (blk->kind != NN_BLOCK_BACKWARD_W)
            continue;
        for (int e = 0; e < blk->n_entries; e++)
            for (int k = 0; k < blk->entries[e].n_nodes; k++) {
                const nn_tensor *t = blk->entries[e].nodes[k];
                for (int q = 0; q < t->n_src; q++) {
                    const nn_tensor *r = nn_root(&m, t->src[q]);
                    if (r->op == NN_OP_LEAF || m.blk[r->id] != b - 1 || m.saved[r->id] ||
                        counted[r->id])
                        continue;
                    counted[r->id] = true;
                    held[b - 1] += nn_nbytes(r);
                }
            }
    }
    /* the blocks of a chunk are forward, backward (and W) in a row (plan_impl.h) */
    uint64_t inflight = 0, peak = 0;
    for (int s = 0; s < c->n_sched; s++) {
        int b = c->sched[s].block;
        const nn_plan_block *blk = &c->blocks[b];
        if (blk->kind == NN_BLOCK_FORWARD) {
            inflight += saved[b];
        } else if (blk->kind == NN_BLOCK_BACKWARD) {
            inflight -= saved[b - 1] - saved_w[b - 1];
            inflight += held[b];
        } else if (blk->kind == NN_BLOCK_BACKWARD_W) {
            inflight -= saved_w[b - 2] + held[b - 1];
        }
        peak = inflight > peak ? inflight : peak;
    }
    free(saved_w);
    free(held);
    free(counted);
    mem->activations_bytes = peak;
    np_status st = NP_OK;
    for (int b = 0; b < c->n_blocks && st == NP_OK; b++) {
        uint64_t w = 0, cb = 0;
        st = nn_block_peaks(&m, b, &w, &cb, err);
        mem->workspace_bytes = w > mem->workspace_bytes ? w : mem->workspace_bytes;
        mem->buffers_bytes = cb > mem->buffers_bytes ? cb : mem->buffers_bytes;
    }
    mem->total_bytes = mem->params_bytes + mem->grads_bytes + mem->optstate_bytes +
                       mem->activations_bytes + mem->buffers_bytes + mem->workspace_bytes;
    free(saved);
    nn_memctx_free(&m);
    return st;
}
