/* plan_entries.c — step 7 of the plan's build (plan_build.c): a stage's scheduled graph into
 * its class's blocks and entries.
 *
 *   blocks     STEP_BEGIN, per model chunk of the stage its FORWARD, BACKWARD (and under ZB-H1
 *              BACKWARD_W), STEP_END (nn_pb_fwd_block ...)
 *   placement  every node of the graph's schedule into the block its region, chunk and hints
 *              say, into an entry of its own or its bucket's (a bucket's collectives share one
 *              entry; ZeRO-3's gathers and scatters bucket per chunk, layer, direction and op)
 *   order      per block, its entries topologically by their intra-block dependencies, the
 *              ready one with the smallest (phase, schedule position) first (np_iheap): the
 *              phase is the step's end's (host_sync, loss scaling, clipping), 0 elsewhere
 *   deps       every entry's dependencies in final indices, across blocks too, plus ZeRO-3's
 *              control dependency (a parameter gather waits for the compute entry before it)
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "iheap.h"
#include "plan_impl.h"

/* ZeRO-3 prefetch: each layer's parameter gathers move ahead to the start of the layer
 * before (forward) or after (backward: the layer computed just before), one layer ahead. */
static void nn_pb_prefetch_keys(nn_pb *pb, nn_graph *g)
{
    if (pb->zero != 3)
        return;
    int n = nn_graph_n_nodes(g), L = 0;
    for (int i = 0; i < n; i++)
        if (nn_graph_node(g, i)->layer + 1 > L)
            L = nn_graph_node(g, i)->layer + 1;
    if (L == 0)
        return;
    /* min key of the compute nodes of (chunk, layer, forward|backward) */
    int K = pb->n_chunks;
    double *mk = nn_malloc((size_t)K * L * 2 * sizeof *mk);
    if (!mk)
        return;
    for (int i = 0; i < K * L * 2; i++)
        mk[i] = INFINITY;
#define MK(c, l, b) mk[((c) * L + (l)) * 2 + (b)]
    for (int i = 0; i < n; i++) {
        nn_tensor *t = nn_graph_node(g, i);
        if (t->op == NN_OP_LEAF || t->layer < 0 || t->chunk < 0 || (nn_op_flags(t->op) & NN_OPF_COMM))
            continue;
        int b = t->region == NN_REGION_FORWARD ? 0 : 1;
        if (t->region == NN_REGION_OPTIM)
            continue;
        if (t->sched_key < MK(t->chunk, t->layer, b))
            MK(t->chunk, t->layer, b) = t->sched_key;
    }
    for (int i = 0; i < n; i++) {
        nn_tensor *t = nn_graph_node(g, i);
        if (t->op != NN_OP_ALL_GATHER || t->ip[NN_COMM_IP_TAG] != NN_COMM_ZERO || t->layer < 0 ||
            t->chunk < 0)
            continue;
        if (t->region == NN_REGION_FORWARD && t->layer > 0 && MK(t->chunk, t->layer - 1, 0) < INFINITY)
            t->sched_key = MK(t->chunk, t->layer - 1, 0) - 0.1;
        else if (t->region == NN_REGION_RECOMPUTE && t->layer + 1 < L &&
                 MK(t->chunk, t->layer + 1, 1) < INFINITY)
            t->sched_key = MK(t->chunk, t->layer + 1, 1) - 0.1;
    }
#undef MK
    free(mk);
}

typedef struct nn_tmp_entry {
    nn_tensor **nodes;
    int n_nodes, cap_nodes;
    int pos;         /* desired position (schedule order) */
    int phase;       /* the step's end under host_sync: its phase (NN_END_*), else 0 */
    int *deps;       /* intra-block deps (tmp indices), for the topological order */
    int n_deps, cap_deps;
    int final;
} nn_tmp_entry;

static bool nn_int_push(int **v, int *n, int *cap, int x)
{
    for (int i = 0; i < *n; i++)
        if ((*v)[i] == x)
            return true;
    if (*n == *cap) {
        int c = *cap ? 2 * *cap : 4;
        int *w = nn_realloc(*v, (size_t)c * sizeof *w);
        if (!w)
            return false;
        *v = w;
        *cap = c;
    }
    (*v)[(*n)++] = x;
    return true;
}

/* ZB-H1's split of the backward (Qi et al. 2024, section 2): B computes the gradients of
 * activations, W those of weights. A forward value is an activation when it depends on the
 * micro-batch's data (a data leaf, a receive from another stage); every backward node an
 * activation's gradient or a send (of a received value's gradient) needs is B. Of the rest,
 * which only weight gradients need, W is the weight-gradient GEMMs, what follows them (their
 * accumulation, data-parallel reduction) and what only they read (a transposed input); the
 * small rest — a bias's gradient (a sum of the output gradient), a norm gain's — stays in B,
 * as the authors' implementation defers only the linear layers' weight GEMMs (sail-sg/
 * zero-bubble-pipeline-parallelism, WeightGradStore): deferring a norm gain's gradient would
 * keep its normalized input and output gradient until W for a negligible time. So W keeps
 * each linear layer's input and output gradient, the paper's M_W (table 1). Fills in_b by
 * node id; order is a topological order of g. */
static void nn_pb_split_backward(const nn_pb *pb, int st, nn_tensor *const *order, int n,
                                 bool *in_b, bool *act)
{
    const nn_pstage *ps = &pb->stages[st];
    for (int l = 0; l < ps->n_leaves; l++)
        if (ps->leaves[l].kind == NN_LEAF_DATA)
            act[ps->leaves[l].t->id] = true;
    for (int i = 0; i < n; i++) {
        const nn_tensor *t = order[i];
        if (t->op == NN_OP_LEAF || t->region != NN_REGION_FORWARD)
            continue;
        act[t->id] = t->op == NN_OP_RECV;
        for (int k = 0; k < t->n_src && !act[t->id]; k++)
            act[t->id] = act[t->src[k]->id];
    }
    for (int i = 0; i < n; i++) {
        const nn_tensor *t = order[i];
        if (act[t->id] && t->grad && t->grad->region != NN_REGION_FORWARD)
            in_b[t->grad->id] = true;
        if (t->op == NN_OP_SEND && t->region != NN_REGION_FORWARD)
            in_b[t->id] = true;
    }
    for (int i = n - 1; i >= 0; i--) {
        const nn_tensor *t = order[i];
        if (!in_b[t->id] || t->region == NN_REGION_FORWARD)
            continue;
        for (int k = 0; k < t->n_src; k++)
            if (t->src[k]->op != NN_OP_LEAF && t->src[k]->region != NN_REGION_FORWARD)
                in_b[t->src[k]->id] = true;
    }
    /* act becomes "in W" for backward nodes: the GEMMs outside B and what follows them,
     * then what only they read */
    for (int i = 0; i < n; i++) {
        const nn_tensor *t = order[i];
        if (t->op == NN_OP_LEAF || t->region == NN_REGION_FORWARD || in_b[t->id])
            continue;
        act[t->id] = t->op == NN_OP_MATMUL;
        for (int k = 0; k < t->n_src && !act[t->id]; k++)
            act[t->id] = t->src[k]->region != NN_REGION_FORWARD && act[t->src[k]->id];
    }
    for (int i = n - 1; i >= 0; i--) {
        const nn_tensor *t = order[i];
        if (t->op == NN_OP_LEAF || t->region == NN_REGION_FORWARD || in_b[t->id])
            continue;
        if (act[t->id])
            for (int k = 0; k < t->n_src; k++) {
                const nn_tensor *u = t->src[k];
                if (u->op != NN_OP_LEAF && u->region != NN_REGION_FORWARD && !in_b[u->id])
                    act[u->id] = true;
            }
        else
            in_b[t->id] = true;
    }
}

/* The state of building one class's entries. */
typedef struct nn_pe {
    nn_pb *pb;
    nn_plan *p;
    nn_pstate *ps;
    nn_plan_class *cls;
    nn_tensor **order; /* the graph's schedule */
    int n, nb, per;
    bool zb;
    bool *in_b, *act;            /* ZB-H1: by node id, B (else W) and scratch */
    int *pos_of;                 /* by node id: its position in order */
    int *node_block, *node_entry; /* by node id */
    nn_tmp_entry **tmp;          /* per block, its entries before their final order */
    int *ntmp, *cap;
    int *bk_block, *bk_entry;    /* per bucket id: the block and entry its last node went to */
} nn_pe;

static np_status nn_pe_oom(nn_pe *x)
{
    return np_err_set(x->pb->err, NP_ERR_NOMEM, "out of memory building the plan");
}

/* The blocks' kinds and chunks. */
static void nn_pe_blocks(nn_pe *x)
{
    static const nn_plan_block_kind kinds[3] = {NN_BLOCK_FORWARD, NN_BLOCK_BACKWARD,
                                                NN_BLOCK_BACKWARD_W};
    for (int b = 0; b < x->nb; b++) {
        nn_plan_block *blk = &x->cls->blocks[b];
        blk->kind = b == 0 ? NN_BLOCK_STEP_BEGIN
                    : b == x->nb - 1 ? NN_BLOCK_STEP_END : kinds[(b - 1) % x->per];
        blk->chunk = b == 0 || b == x->nb - 1 ? -1 : ((b - 1) / x->per) * x->pb->pp + x->ps->st;
    }
}

/* ZB-H1: the backward split into B and W; a gradient bucket with a weight GEMM's gradient goes
 * whole with the W (one collective, as without the split), its biases' and gains' gradients
 * too. */
static np_status nn_pe_zb_split(nn_pe *x)
{
    nn_pstate *ps = x->ps;
    nn_pb_split_backward(x->pb, ps->st, x->order, x->n, x->in_b, x->act);
    bool *wbucket = nn_calloc((size_t)ps->next_bucket + 1, sizeof *wbucket);
    if (!wbucket)
        return nn_pe_oom(x);
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < x->n; i++) {
            const nn_tensor *t = x->order[i];
            int bk = ps->mark[t->id].bucket;
            if (t->region == NN_REGION_FORWARD || bk <= 0 || bk > ps->next_bucket ||
                !nn_is_collective(t->op))
                continue;
            if (pass == 0 && !x->in_b[t->id])
                wbucket[bk] = true;
            else if (pass == 1 && wbucket[bk])
                x->in_b[t->id] = false;
        }
    free(wbucket);
    return NP_OK;
}

/* ZeRO-3's gathers and scatters not bucketed yet: one bucket per (chunk, layer, direction,
 * op), its id -(1 + the schedule position of its first node), a local id. Sorted by that key
 * and position, so each group's first is the earliest. */
typedef struct nn_pe_zkey {
    int op, layer, chunk, fwd, i;
} nn_pe_zkey;

static int nn_pe_zkey_cmp(const void *a, const void *b)
{
    const nn_pe_zkey *x = a, *y = b;
    int d[5] = {x->op - y->op, x->layer - y->layer, x->chunk - y->chunk, x->fwd - y->fwd,
                x->i - y->i};
    for (int k = 0; k < 5; k++)
        if (d[k])
            return d[k] < 0 ? -1 : 1;
    return 0;
}

static np_status nn_pe_zero3_buckets(nn_pe *x)
{
    nn_pe_zkey *keys = nn_malloc(((size_t)x->n + 1) * sizeof *keys);
    if (!keys)
        return nn_pe_oom(x);
    int nk = 0;
    for (int i = 0; i < x->n; i++) {
        nn_tensor *t = x->order[i];
        if (x->ps->mark[t->id].bucket || !nn_is_collective(t->op) ||
            t->ip[NN_COMM_IP_TAG] != NN_COMM_ZERO || t->layer < 0)
            continue;
        keys[nk++] = (nn_pe_zkey){(int)t->op, t->layer, t->chunk,
                                  t->region == NN_REGION_FORWARD, i};
    }
    qsort(keys, (size_t)nk, sizeof *keys, nn_pe_zkey_cmp);
    for (int k = 0, first = 0; k < nk; k++) {
        if (k == 0 || nn_pe_zkey_cmp(&(nn_pe_zkey){keys[k].op, keys[k].layer, keys[k].chunk,
                                                    keys[k].fwd, 0},
                                      &(nn_pe_zkey){keys[k - 1].op, keys[k - 1].layer,
                                                    keys[k - 1].chunk, keys[k - 1].fwd, 0}))
            first = keys[k].i;
        x->ps->mark[x->order[keys[k].i]->id].bucket = -(first + 1);
    }
    free(keys);
    return NP_OK;
}

/* The block node t (at schedule position i) goes to. */
static int nn_pe_block_of(const nn_pe *x, const nn_tensor *t)
{
    const nn_pmark *m = &x->ps->mark[t->id];
    const nn_strategy *s = &x->p->s;
    if (m->hint == NN_HINT_BEGIN)
        return 0;
    if (m->hint == NN_HINT_END || t->region == NN_REGION_OPTIM || t->chunk < 0)
        return x->nb - 1;
    if (t->region == NN_REGION_FORWARD)
        return nn_pb_fwd_block(s, t->chunk / x->pb->pp);
    if (x->zb && !x->in_b[t->id])
        return nn_pb_w_block(s, t->chunk / x->pb->pp);
    return nn_pb_bwd_block(s, t->chunk / x->pb->pp);
}

/* The entry of block b node t (position i) joins: its bucket's (the one its last node went to,
 * else looked for along the block), else a new one. -1 when out of memory. */
static int nn_pe_entry_of(nn_pe *x, const nn_tensor *t, int i, int b)
{
    const nn_pmark *m = &x->ps->mark[t->id];
    int e = -1;
    bool bucketed = m->bucket != 0 && nn_is_collective(t->op);
    size_t bx = m->bucket > 0 ? (size_t)m->bucket
                              : (size_t)x->ps->next_bucket + 1 + (size_t)-m->bucket;
    if (bucketed && x->bk_block[bx] == b && x->tmp[b][x->bk_entry[bx]].nodes[0]->op == t->op)
        e = x->bk_entry[bx];
    else if (bucketed)
        for (int k = 0; k < x->ntmp[b] && e < 0; k++)
            if (x->tmp[b][k].n_nodes && x->ps->mark[x->tmp[b][k].nodes[0]->id].bucket == m->bucket &&
                x->tmp[b][k].nodes[0]->op == t->op)
                e = k;
    if (e < 0) {
        if (x->ntmp[b] == x->cap[b]) {
            int c2 = x->cap[b] ? 2 * x->cap[b] : 64;
            nn_tmp_entry *w = nn_realloc(x->tmp[b], (size_t)c2 * sizeof *w);
            if (!w)
                return -1;
            x->tmp[b] = w;
            x->cap[b] = c2;
        }
        e = x->ntmp[b]++;
        memset(&x->tmp[b][e], 0, sizeof x->tmp[b][e]);
        x->tmp[b][e].pos = i;
    }
    if (bucketed)
        x->bk_block[bx] = b, x->bk_entry[bx] = e;
    return e;
}

/* Every node of the schedule into its block and entry. */
static np_status nn_pe_place(nn_pe *x)
{
    size_t n_bk = (size_t)x->ps->next_bucket + (size_t)x->n + 2;
    x->bk_block = nn_malloc(n_bk * sizeof *x->bk_block);
    x->bk_entry = nn_malloc(n_bk * sizeof *x->bk_entry);
    if (!x->bk_block || !x->bk_entry)
        return nn_pe_oom(x);
    for (size_t k = 0; k < n_bk; k++)
        x->bk_block[k] = -1;
    for (int i = 0; i < x->n; i++) {
        nn_tensor *t = x->order[i];
        x->node_block[t->id] = -1;
        if (t->op == NN_OP_LEAF)
            continue;
        int b = nn_pe_block_of(x, t);
        x->node_block[t->id] = b;
        int e = nn_pe_entry_of(x, t, i, b);
        if (e < 0)
            return nn_pe_oom(x);
        nn_tmp_entry *te = &x->tmp[b][e];
        if (te->n_nodes == te->cap_nodes) {
            int c2 = te->cap_nodes ? 2 * te->cap_nodes : 1;
            nn_tensor **w = nn_realloc(te->nodes, (size_t)c2 * sizeof *w);
            if (!w)
                return nn_pe_oom(x);
            te->nodes = w;
            te->cap_nodes = c2;
        }
        te->nodes[te->n_nodes++] = t;
        x->node_entry[t->id] = e;
    }
    /* a bucket runs when its last gradient is ready; one of gathers of leaves, at once */
    for (int b = 0; b < x->nb; b++)
        for (int e = 0; e < x->ntmp[b]; e++) {
            nn_tmp_entry *te = &x->tmp[b][e];
            if (te->n_nodes < 2)
                continue;
            bool leaves = true;
            int last = te->pos;
            for (int k = 0; k < te->n_nodes; k++) {
                const nn_tensor *t = te->nodes[k];
                for (int s = 0; s < t->n_src; s++)
                    leaves = leaves && t->src[s]->op == NN_OP_LEAF;
                last = x->pos_of[t->id] > last ? x->pos_of[t->id] : last;
            }
            if (!leaves)
                te->pos = last;
        }
    return NP_OK;
}

/* Block b's intra-block dependencies and, at the step's end in phases (host_sync, or the
 * optimizer's global steps over all the gradients), each entry's phase: the latest of its own
 * and its dependencies' (so that phase order is a topological order). *phased: whether so. */
static np_status nn_pe_block_deps(nn_pe *x, int b, bool *phased)
{
    nn_tmp_entry *tb = x->tmp[b];
    int ne = x->ntmp[b];
    for (int e = 0; e < ne; e++)
        for (int k = 0; k < tb[e].n_nodes; k++) {
            const nn_tensor *t = tb[e].nodes[k];
            for (int s = 0; s < t->n_src; s++) {
                const nn_tensor *src = t->src[s];
                if (x->node_block[src->id] != b || x->node_entry[src->id] == e)
                    continue;
                if (!nn_int_push(&tb[e].deps, &tb[e].n_deps, &tb[e].cap_deps,
                                 x->node_entry[src->id]))
                    return nn_pe_oom(x);
            }
        }
    const nn_strategy *s = &x->p->s;
    *phased = b == x->nb - 1 && (s->host_sync || s->loss_scale > 0 || s->clip_grad > 0);
    for (int e = 0; *phased && e < ne; e++) {
        tb[e].phase = 0;
        for (int k = 0; k < tb[e].n_nodes; k++) {
            int ph = nn_end_phase(x->ps, tb[e].nodes[k]);
            tb[e].phase = ph > tb[e].phase ? ph : tb[e].phase;
        }
    }
    for (bool changed = *phased; changed;) {
        changed = false;
        for (int e = 0; e < ne; e++)
            for (int k = 0; k < tb[e].n_deps; k++)
                if (tb[tb[e].deps[k]].phase > tb[e].phase) {
                    tb[e].phase = tb[tb[e].deps[k]].phase;
                    changed = true;
                }
    }
    return NP_OK;
}

/* The ready queue's order of a block's entries: (phase, schedule position). */
static bool nn_pe_less(const void *ctx, int a, int b)
{
    const nn_tmp_entry *tb = ctx;
    return tb[a].phase < tb[b].phase || (tb[a].phase == tb[b].phase && tb[a].pos < tb[b].pos);
}

/* Block b's entries in a topological order of their dependencies, the ready one with the
 * smallest (phase, position) first (Kahn's algorithm): by_pos[k] the k-th, tmp[].final set. */
static np_status nn_pe_block_order(nn_pe *x, int b, int *by_pos)
{
    nn_tmp_entry *tb = x->tmp[b];
    int ne = x->ntmp[b], total = 0;
    int *indeg = nn_calloc((size_t)ne + 1, sizeof *indeg);
    int *users_start = nn_calloc((size_t)ne + 2, sizeof *users_start);
    for (int e = 0; indeg && users_start && e < ne; e++) {
        indeg[e] = tb[e].n_deps;
        for (int k = 0; k < tb[e].n_deps; k++)
            users_start[tb[e].deps[k] + 1]++;
        total += tb[e].n_deps;
    }
    int *users = nn_malloc(((size_t)total + 1) * sizeof *users);
    int *fillp = nn_calloc((size_t)ne + 1, sizeof *fillp);
    np_iheap h = {.v = nn_malloc(((size_t)ne + 1) * sizeof *h.v), .less = nn_pe_less, .ctx = tb};
    np_status st = NP_OK;
    if (!indeg || !users_start || !users || !fillp || !h.v) {
        st = nn_pe_oom(x);
        goto done;
    }
    for (int e = 0; e < ne; e++)
        users_start[e + 1] += users_start[e];
    for (int e = 0; e < ne; e++)
        for (int k = 0; k < tb[e].n_deps; k++) {
            int d = tb[e].deps[k];
            users[users_start[d] + fillp[d]++] = e;
        }
    for (int e = 0; e < ne; e++)
        if (!indeg[e])
            np_iheap_push(&h, e);
    int k = 0;
    while (h.n > 0) {
        int top = np_iheap_pop(&h);
        tb[top].final = k;
        by_pos[k++] = top;
        for (int u = users_start[top]; u < users_start[top + 1]; u++)
            if (--indeg[users[u]] == 0)
                np_iheap_push(&h, users[u]);
    }
    if (k != ne)
        st = np_err_set(x->pb->err, NP_ERR_INTERNAL, "plan: the entries of a block depend on "
                        "each other in a cycle");
done:
    free(indeg), free(users_start), free(users), free(fillp), free(h.v);
    return st;
}

/* Entry en (the f-th of block b, from te) from its nodes: kind, region, layer, chunk, when,
 * the host's synchronization before it (phased: the step's end in phases; before: the phase
 * of the entry before it, -1 for the first), FLOPs and bytes, or a communication's tag, group,
 * peer, bytes and match. */
static void nn_pe_entry_fill(nn_pe *x, nn_plan_block *blk, nn_plan_entry *en, nn_tmp_entry *te,
                             bool phased, int before)
{
    const nn_strategy *s = &x->p->s;
    nn_tensor *t0 = te->nodes[0];
    en->n_nodes = te->n_nodes;
    en->nodes = te->nodes;
    te->nodes = NULL;
    en->region = t0->region;
    en->layer = t0->layer;
    en->chunk = blk->chunk;
    en->when = x->ps->mark[t0->id].last ? NN_PLAN_LAST_MB : NN_PLAN_EVERY_MB;
    /* the host synchronizes before each phase (host_sync: its timers) and after reading
     * found_inf and the norm (.item()) */
    en->sync = phased && before != te->phase &&
               (s->host_sync || before == NN_END_UNSCALE || before == NN_END_NORM);
    if (nn_is_collective(t0->op))
        en->kind = NN_PLAN_COLLECTIVE;
    else if (t0->op == NN_OP_SEND)
        en->kind = NN_PLAN_SEND;
    else if (t0->op == NN_OP_RECV)
        en->kind = NN_PLAN_RECV;
    else
        en->kind = NN_PLAN_COMPUTE;
    if (en->kind == NN_PLAN_COMPUTE) {
        en->flops = nn_node_flops(t0);
        en->model_flops = nn_node_model_flops(t0);
        en->bytes = nn_node_bytes(t0);
        return;
    }
    en->tag = (nn_comm_tag)t0->ip[NN_COMM_IP_TAG];
    en->group_size = (int)t0->ip[NN_COMM_IP_SIZE];
    en->peer = (int)t0->ip[NN_COMM_IP_PEER];
    for (int q = 0; q < en->n_nodes; q++)
        en->bytes += nn_plan_comm_node_bytes(en->nodes[q]);
    int match = (int)t0->ip[NN_COMM_IP_MATCH];
    if (!match)
        match = ++x->pb->next_match;
    for (int q = 0; q < en->n_nodes; q++)
        en->nodes[q]->ip[NN_COMM_IP_MATCH] = match;
    en->match = match;
}

/* Block b: its dependencies, its order, its entries. */
static np_status nn_pe_block(nn_pe *x, int b)
{
    bool phased = false;
    int ne = x->ntmp[b];
    int *by_pos = nn_malloc(((size_t)ne + 1) * sizeof *by_pos);
    nn_plan_block *blk = &x->cls->blocks[b];
    blk->entries = nn_calloc((size_t)ne + 1, sizeof *blk->entries);
    if (!by_pos || !blk->entries) {
        free(by_pos);
        return nn_pe_oom(x);
    }
    blk->n_entries = ne;
    np_status st = nn_pe_block_deps(x, b, &phased);
    if (st == NP_OK)
        st = nn_pe_block_order(x, b, by_pos);
    for (int f = 0; st == NP_OK && f < ne; f++)
        nn_pe_entry_fill(x, blk, &blk->entries[f], &x->tmp[b][by_pos[f]], phased,
                         f ? x->tmp[b][by_pos[f - 1]].phase : -1);
    free(by_pos);
    return st;
}

/* Entry f of block b's dependencies with final indices (cross-block ones too), ZeRO-3's
 * control dependency (a parameter gather waits for the compute entry before it) and its part
 * (a scatter/gather collective after a receive gathers). */
static np_status nn_pe_entry_deps(nn_pe *x, int b, int f)
{
    nn_plan_block *blk = &x->cls->blocks[b];
    nn_plan_entry *en = &blk->entries[f];
    int nd = 0, capd = 0;
    nn_plan_dep *deps = NULL;
    for (int q = 0; q < en->n_nodes; q++) {
        const nn_tensor *t = en->nodes[q];
        for (int s = 0; s < t->n_src; s++) {
            const nn_tensor *src = t->src[s];
            int sb = x->node_block[src->id];
            if (sb < 0 || src->op == NN_OP_LEAF)
                continue;
            int se = x->tmp[sb][x->node_entry[src->id]].final;
            if (sb == b && se == f)
                continue;
            nn_plan_dep d = {sb == b ? -1 : sb, se};
            bool dup = false;
            for (int k = 0; k < nd && !dup; k++)
                dup = deps[k].block == d.block && deps[k].entry == d.entry;
            if (dup)
                continue;
            if (nd == capd) {
                capd = capd ? 2 * capd : 4;
                nn_plan_dep *w = nn_realloc(deps, (size_t)capd * sizeof *w);
                if (!w) {
                    free(deps);
                    return nn_pe_oom(x);
                }
                deps = w;
            }
            deps[nd++] = d;
        }
    }
    if (en->kind == NN_PLAN_COLLECTIVE && en->tag == NN_COMM_ZERO &&
        en->nodes[0]->op == NN_OP_ALL_GATHER && blk->kind != NN_BLOCK_STEP_END) {
        for (int k = f - 1; k >= 0; k--)
            if (blk->entries[k].kind == NN_PLAN_COMPUTE && blk->entries[k].flops > 0) {
                nn_plan_dep *w = nn_realloc(deps, ((size_t)nd + 1) * sizeof *w);
                if (!w) {
                    free(deps);
                    return nn_pe_oom(x);
                }
                deps = w;
                deps[nd++] = (nn_plan_dep){-1, k};
                break;
            }
    }
    en->deps = deps;
    en->n_deps = nd;
    en->part = en->kind == NN_PLAN_SEND ? NN_PART_SEND
               : en->kind == NN_PLAN_RECV ? NN_PART_RECV : NN_PART_COMPUTE;
    for (int k = 0; k < nd && en->kind == NN_PLAN_COLLECTIVE && en->tag == NN_COMM_PP_SG; k++)
        if (deps[k].block < 0 && blk->entries[deps[k].entry].kind == NN_PLAN_RECV)
            en->part = NN_PART_GATHER;
    return NP_OK;
}

np_status nn_pb_entries(nn_pb *pb, nn_plan *p, nn_pstate *ps)
{
    nn_pe x = {.pb = pb, .p = p, .ps = ps, .cls = &p->classes[ps->st],
               .zb = p->s.schedule == NN_PP_ZB_H1, .per = nn_pb_per_chunk(&p->s)};
    int v = p->s.schedule == NN_PP_INTERLEAVED ? p->s.virtual_stages : 1;
    x.nb = 2 + x.per * v;
    nn_pb_prefetch_keys(pb, ps->g);
    np_status st = nn_schedule(ps->g, &x.order, &x.n, pb->err);
    if (st != NP_OK)
        return st;
    int max_id = nn_graph_max_id(ps->g);
    nn_tensor probe = {.id = max_id};
    size_t ids = (size_t)max_id + 1;
    x.in_b = nn_calloc(ids, sizeof *x.in_b);
    x.act = nn_calloc(ids, sizeof *x.act);
    x.pos_of = nn_malloc(ids * sizeof *x.pos_of);
    x.node_block = nn_malloc(ids * sizeof *x.node_block);
    x.node_entry = nn_malloc(ids * sizeof *x.node_entry);
    x.tmp = nn_calloc((size_t)x.nb, sizeof *x.tmp);
    x.ntmp = nn_calloc((size_t)x.nb, sizeof *x.ntmp);
    x.cap = nn_calloc((size_t)x.nb, sizeof *x.cap);
    x.cls->blocks = nn_calloc((size_t)x.nb, sizeof *x.cls->blocks);
    x.cls->n_blocks = x.nb;
    if (!nn_ps_mark(ps, &probe) || !x.in_b || !x.act || !x.pos_of || !x.node_block ||
        !x.node_entry || !x.tmp || !x.ntmp || !x.cap || !x.cls->blocks)
        st = nn_pe_oom(&x);
    for (int i = 0; st == NP_OK && i < x.n; i++)
        x.pos_of[x.order[i]->id] = i;
    if (st == NP_OK) {
        nn_pe_blocks(&x);
        if (x.zb)
            st = nn_pe_zb_split(&x);
    }
    if (st == NP_OK)
        st = nn_pe_zero3_buckets(&x);
    if (st == NP_OK)
        st = nn_pe_place(&x);
    for (int b = 0; st == NP_OK && b < x.nb; b++)
        st = nn_pe_block(&x, b);
    for (int b = 0; st == NP_OK && b < x.nb; b++)
        for (int f = 0; st == NP_OK && f < x.cls->blocks[b].n_entries; f++)
            st = nn_pe_entry_deps(&x, b, f);
    for (int b = 0; x.tmp && b < x.nb; b++) {
        for (int e = 0; e < x.ntmp[b]; e++) {
            free(x.tmp[b][e].nodes);
            free(x.tmp[b][e].deps);
        }
        free(x.tmp[b]);
    }
    free(x.tmp), free(x.ntmp), free(x.cap), free(x.in_b), free(x.act), free(x.pos_of);
    free(x.bk_block), free(x.bk_entry), free(x.node_block), free(x.node_entry), free(x.order);
    return st;
}
