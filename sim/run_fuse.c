/* run_fuse.c — the step lowering's fusion decisions on a plan's class (see run_fuse.h). */
#include "run_fuse.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "lower.h"
#include "pass.h"
#include "run_kernel.h"

typedef struct rf_node {
    int64_t pos;          /* its first instance's place in the lowering's item order */
    int block;            /* the block of its entry (-1: a leaf) */
    bool scheduled;       /* an entry's node */
    bool compute;         /* a compute entry's node */
    int mb;               /* its first instance's micro-batch (-1: a step block's) */
    int readers;          /* distinct scheduled nodes reading it */
    const nn_tensor *reader;
    bool all_mm;          /* every reader is a matmul */
    run_fuse_kind kind;
    bool folded;          /* INSIDE: a folded transpose */
    bool paired;          /* an attention kernel and the attention_lse it writes (INSIDE) */
    const nn_tensor *lse; /* KERNEL (an attention): the attention_lse it writes */
    const nn_tensor *last;/* INSIDE (a chain step): its chain's last node (an lse: itself) */
    int n_chain;          /* KERNEL: its chain */
    const nn_tensor *chain[KC_MAX_EPI];
} rf_node;

struct run_fuse {
    const nn_plan_class *c; /* NULL: a graph's (run_fuse_graph) */
    const nn_tensor *loss;
    int max_id;
    rf_node *n;           /* by node id */
};

static rf_node *rf_at(const run_fuse *f, const nn_tensor *t)
{
    return t->id >= 0 && t->id <= f->max_id ? &f->n[t->id] : NULL;
}

/* Where leaf t's item is: a persistent leaf before everything, a data leaf just before its
 * first reader (at position pos). */
static void rf_leaf(run_fuse *f, const nn_tensor *t, int64_t pos)
{
    rf_node *n = rf_at(f, t);
    if (!n || n->pos != INT64_MAX)
        return;
    const nn_plan_leaf *l = f->c ? nn_plan_leaf_of(f->c, t) : NULL;
    bool data = f->c ? l && l->kind == NN_LEAF_DATA : t->role == NN_ROLE_INPUT;
    n->pos = data ? pos - 1 : -1;
}

/* The chain after head h (lower.c's lw_chain, on nodes). */
static void rf_chain(run_fuse *f, const nn_tensor *h)
{
    rf_node *hn = rf_at(f, h);
    const kc_kernel_def *d = kc_kernel_find(h->op);
    if (!d || !(d->flags & KC_DEF_EPILOGUE) || h->fusion_group != h->id)
        return;
    const nn_tensor *cur = h;
    while (hn->n_chain < KC_MAX_EPI) {
        const rf_node *cn = rf_at(f, cur);
        if (cn->readers != 1 || cur->is_output || cur == f->loss)
            break;
        const nn_tensor *m = cn->reader, *arg;
        const rf_node *mn = rf_at(f, m);
        if (!mn || m->fusion_group != h->id || mn->block != hn->block ||
            !lower_epi_ok(cur, m, &arg))
            break;
        if (arg) { /* the kernel runs at the head's place: its operand must be there by then */
            const rf_node *an = rf_at(f, arg);
            if (!an || an->pos > hn->pos ||
                (an->kind == RUN_FUSE_INSIDE && !an->folded && an->last != arg))
                break;
        }
        hn->chain[hn->n_chain++] = m;
        cur = m;
    }
    for (int s = 0; s < hn->n_chain; s++) {
        rf_node *sn = rf_at(f, hn->chain[s]);
        sn->kind = RUN_FUSE_INSIDE;
        sn->last = cur;
    }
}

/* lower.c's lw_pair_attention, on nodes: each attention kernel, in order, writes the lse of
 * the first unpaired attention_lse kernel after it of the same micro-batch, q, k, mask and
 * scale as its second output, and that lse has no kernel of its own. */
static void rf_pair_attention(run_fuse *f, const nn_tensor **order, int n_order)
{
    for (int i = 0; i < n_order; i++) {
        const nn_tensor *a = order[i];
        rf_node *an = rf_at(f, a);
        if (a->op != NN_OP_ATTENTION || an->kind != RUN_FUSE_KERNEL)
            continue;
        for (int j = i + 1; j < n_order; j++) {
            const nn_tensor *l = order[j];
            rf_node *ln = rf_at(f, l);
            if (l->op == NN_OP_ATTENTION_LSE && ln->kind == RUN_FUSE_KERNEL && !ln->paired &&
                ln->mb == an->mb && l->src[0] == a->src[0] && l->src[1] == a->src[1] &&
                l->ip[0] == a->ip[0] && l->fp[0] == a->fp[0]) {
                an->paired = ln->paired = true;
                an->lse = l;
                ln->kind = RUN_FUSE_INSIDE;
                ln->last = l;
                break;
            }
        }
    }
}

/* A fusion of graph g with room for its nodes, and *order for them; NULL when out of memory. */
static run_fuse *rf_new(nn_graph *g, const nn_plan_class *c, bool no_fuse,
                        const nn_tensor ***order)
{
    run_fuse *f = calloc(1, sizeof *f);
    int max_id = nn_graph_max_id(g);
    *order = malloc(((size_t)max_id + 2) * sizeof **order);
    if (!f || !*order || !(f->n = calloc((size_t)max_id + 2, sizeof *f->n))) {
        free(*order);
        run_fuse_free(f);
        return NULL;
    }
    f->c = c;
    f->loss = c ? c->loss : NULL;
    f->max_id = max_id;
    for (int i = 0; i <= max_id; i++)
        f->n[i] = (rf_node){.pos = INT64_MAX, .block = -1, .all_mm = true};
    if (!no_fuse)
        nn_pass_fuse(g);
    return f;
}

static void rf_finish(run_fuse *f, const nn_tensor **order, int n_order, bool no_fuse);

np_status run_fuse_graph(nn_graph *g, run_fuse **out, np_err *err)
{
    const nn_tensor **order;
    run_fuse *f = *out = rf_new(g, NULL, false, &order);
    if (!f)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory");
    int n_order = 0;
    int64_t pos = 0;
    for (int i = 0; i < nn_graph_n_nodes(g); i++) {
        nn_tensor *t = nn_graph_node(g, i);
        rf_node *n = rf_at(f, t);
        if (!n || t->op == NN_OP_LEAF)
            continue;
        pos += 2;
        for (int s = 0; s < t->n_src; s++)
            if (t->src[s]->op == NN_OP_LEAF)
                rf_leaf(f, t->src[s], pos);
        *n = (rf_node){.pos = pos, .block = 0, .scheduled = true, .compute = true,
                       .all_mm = n->all_mm};
        order[n_order++] = t;
    }
    rf_finish(f, order, n_order, false);
    return NP_OK;
}

np_status run_fuse_class(const nn_plan *p, const nn_plan_class *c, bool no_fuse,
                         run_fuse **out, np_err *err)
{
    const nn_tensor **order;
    run_fuse *f = *out = rf_new(c->g, c, no_fuse, &order);
    if (!f)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory");
    /* the first instance of every node, in the lowering's order */
    nn_plan_iter it;
    nn_plan_iter_begin(&it, p, c);
    const nn_plan_entry *e;
    const nn_plan_block *b;
    int mb, n_order = 0;
    int64_t pos = 0;
    while ((e = nn_plan_iter_next(&it, &b, &mb))) {
        for (int k = 0; k < e->n_nodes; k++) {
            nn_tensor *t = e->nodes[k];
            rf_node *n = rf_at(f, t);
            if (!n || n->scheduled)
                continue;
            pos += 2;
            for (int s = 0; s < t->n_src; s++)
                if (t->src[s]->op == NN_OP_LEAF)
                    rf_leaf(f, t->src[s], pos);
            n->scheduled = true;
            n->pos = pos;
            n->block = (int)(b - c->blocks);
            n->mb = mb;
            n->compute = e->kind == NN_PLAN_COMPUTE;
            order[n_order++] = t;
        }
    }
    rf_finish(f, order, n_order, no_fuse);
    return NP_OK;
}

/* Readers, the lowering's classification and the attention pairs over the nodes in order;
 * frees order. */
static void rf_finish(run_fuse *f, const nn_tensor **order, int n_order, bool no_fuse)
{
    for (int i = 0; i < n_order; i++) { /* readers */
        const nn_tensor *t = order[i];
        for (int s = 0; s < t->n_src; s++) {
            bool again = false;
            for (int r = 0; r < s; r++)
                again = again || t->src[r] == t->src[s];
            rf_node *sn = rf_at(f, t->src[s]);
            if (again || !sn)
                continue;
            sn->readers++;
            sn->reader = t;
            sn->all_mm = sn->all_mm && t->op == NN_OP_MATMUL;
        }
    }
    for (int i = 0; i < n_order; i++) { /* lower.c's lw_classify, on nodes */
        const nn_tensor *t = order[i];
        rf_node *n = rf_at(f, t);
        if (!n->compute || n->kind == RUN_FUSE_INSIDE || run_node_is_view(t))
            continue;
        const rf_node *s0 = t->n_src ? rf_at(f, t->src[0]) : NULL;
        if (!no_fuse && lower_is_transpose(t) && n->readers > 0 && n->all_mm &&
            !t->is_output && !(s0 && s0->folded)) {
            n->kind = RUN_FUSE_INSIDE;
            n->folded = true;
            continue;
        }
        n->kind = RUN_FUSE_KERNEL;
        if (!no_fuse && !(nn_op_flags(t->op) & NN_OPF_UPDATE))
            rf_chain(f, t);
    }
    rf_pair_attention(f, order, n_order);
    free(order);
}

void run_fuse_free(run_fuse *f)
{
    if (!f)
        return;
    free(f->n);
    free(f);
}

run_fuse_kind run_fuse_kind_of(const run_fuse *f, const nn_tensor *t)
{
    const rf_node *n = rf_at(f, t);
    return n ? n->kind : RUN_FUSE_OTHER;
}

const nn_tensor *const *run_fuse_chain(const run_fuse *f, const nn_tensor *head, int *n)
{
    const rf_node *h = rf_at(f, head);
    *n = h ? h->n_chain : 0;
    return h ? h->chain : NULL;
}

/* Where the lowering puts t's values, at address 0: dense, or a folded transpose's source
 * with its last two dims swapped (lower.c's lw_layout). */
static void rf_layout(const run_fuse *f, const nn_tensor *t, kc_tensor *l)
{
    const rf_node *n = rf_at(f, t);
    if (!n || !n->folded) {
        kc_tensor_of(l, 0, t);
        return;
    }
    kc_tensor_of(l, 0, t->src[0]);
    int a = l->ndim - 2, b = l->ndim - 1;
    int64_t sh = l->shape[a], st = l->stride[a];
    l->shape[a] = l->shape[b], l->stride[a] = l->stride[b];
    l->shape[b] = sh, l->stride[b] = st;
}

np_status run_fuse_kernel(const run_fuse *f, const nn_tensor *head, uint32_t cores,
                          kc_kernel *k, np_err *err)
{
    kc_tensor in[KC_MAX_IN], out[KC_MAX_OUT];
    for (int s = 0; s < head->n_src && s < KC_MAX_IN; s++)
        rf_layout(f, head->src[s], &in[s]);
    kc_tensor_of(&out[0], 0, head);
    if (head->op == NN_OP_ATTENTION) /* its lse (its pair's, or scratch), [B, H, S] fp32 */
        kc_tensor_dense(&out[1], 0, NN_F32, 3, head->src[0]->ne);
    if (lower_node_kernel_at(head, in, out, cores, k, err) != NP_OK)
        return err->status;
    int n;
    const nn_tensor *const *chain = run_fuse_chain(f, head, &n);
    const nn_tensor *cur = head;
    for (int s = 0; s < n; s++) {
        const nn_tensor *arg;
        lower_epi_ok(cur, chain[s], &arg);
        kc_tensor al;
        if (arg)
            rf_layout(f, arg, &al);
        lower_epi_of(chain[s], arg ? &al : NULL, &k->epi[k->n_epi++]);
        cur = chain[s];
    }
    if (n)
        kc_tensor_of(&k->out[0], 0, cur);
    return NP_OK;
}

int64_t run_fuse_flops(const run_fuse *f, const nn_tensor *head, bool model)
{
    int64_t (*of)(const nn_tensor *) = model ? nn_node_model_flops : nn_node_flops;
    int n;
    const nn_tensor *const *chain = run_fuse_chain(f, head, &n);
    int64_t flops = of(head);
    for (int s = 0; s < n; s++)
        flops += of(chain[s]);
    const rf_node *h = rf_at(f, head);
    if (h && h->lse) /* the plan counts the lse's FLOPs on its own node */
        flops += of(h->lse);
    return flops;
}
