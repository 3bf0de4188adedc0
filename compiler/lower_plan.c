/* lower_plan.c — the front end of a plan's rank (see lower.h): its class's leaves, then every
 * entry of its step in schedule order, a micro-batch block's nodes (and the data leaves they
 * read) once per micro-batch, as the items the lowering's core places and emits. */
#include <stdlib.h>
#include <string.h>

#include "lower_impl.h"
#include "pass.h"
#include "verify.h"

/* The instance of source t that an item at micro-batch mb (-1: a step block) reads: a data
 * leaf or a node of a micro-batch block (an in-place update of a persistent buffer too: one
 * item per micro-batch, on the buffer of its leaf) is per micro-batch (a step block reads the
 * last one's), everything else has one instance. */
static int32_t lw_src_inst(const lw_ctx *w, const nn_tensor *t, int mb)
{
    int last = w->plan->n_micro - 1;
    if (t->op == NN_OP_LEAF) {
        const nn_plan_leaf *l = nn_plan_leaf_of(w->cls, t);
        return l && l->kind == NN_LEAF_DATA ? (mb >= 0 ? mb : last) : -1;
    }
    bool step = t->region == NN_REGION_OPTIM || t->chunk < 0; /* plan_query.c's rule */
    return step ? -1 : (mb >= 0 ? mb : last);
}

static np_status lw_plan_entry(lw_ctx *w, const nn_plan_entry *e, int block, int mb,
                               const nn_plan_iter *iter, np_err *err)
{
    for (int k = 0; k < e->n_nodes; k++) {
        nn_tensor *t = e->nodes[k];
        int32_t src[NN_MAX_SRC];
        for (int s = 0; s < t->n_src; s++) {
            nn_tensor *x = t->src[s];
            int32_t inst = lw_src_inst(w, x, mb);
            src[s] = lw_slot_get(w, x, inst);
            if (src[s] == LW_NONE && x->op == NN_OP_LEAF &&
                lw_item_add(w, x, inst, NULL, NULL, false, &src[s], err) != NP_OK)
                return err->status;
            if (src[s] == LW_NONE)
                return np_err_set(err, NP_ERR_INTERNAL, "lower: rank %d: '%s' (micro-batch %d) "
                                  "reads '%s' before it is computed", w->rank, t->name, mb,
                                  x->name);
        }
        int32_t inst = lw_src_inst(w, t, mb);
        if (lw_slot_get(w, t, inst) != LW_NONE)
            return np_err_set(err, NP_ERR_INTERNAL, "lower: rank %d: '%s' (micro-batch %d) is "
                              "computed twice", w->rank, t->name, mb);
        int32_t id;
        if (lw_item_add(w, t, inst, src, e, k == 0, &id, err) != NP_OK)
            return err->status;
        w->it[id].block = block;
        w->it[id].keep = t == w->cls->loss; /* the host reads every micro-batch's loss */
        w->it[id].sync = k == 0 && iter->sync;
        w->it[id].call = iter->call;
    }
    return NP_OK;
}

np_status lower_plan_rank(const arch_config *cfg, const nn_plan *p, int rank,
                          const lower_opts *opts, lower_prog **out, np_err *err)
{
    *out = NULL;
    if (rank < 0 || rank >= p->mesh.n_ranks)
        return np_err_set(err, NP_ERR_RANGE, "lower: rank %d of a plan of %d ranks", rank,
                          p->mesh.n_ranks);
    const nn_plan_class *c = &p->classes[nn_plan_rank_class(p, rank)];
    lw_ctx w;
    np_status st = lw_ctx_init(&w, cfg, opts, nn_graph_max_id(c->g), (uint32_t)p->n_micro + 1,
                               (uint32_t)p->mesh.chip[rank], err);
    w.plan = p;
    w.cls = c;
    w.rank = rank;
    if (st == NP_OK)
        st = lw_ctx_graph(&w, c->g, err);
    if (st == NP_OK && !w.o.no_fuse)
        nn_pass_fuse(c->g);
    for (int i = 0; i < nn_graph_n_nodes(c->g) && st == NP_OK; i++) { /* persistent leaves */
        nn_tensor *t = nn_graph_node(c->g, i);
        if (t->op == NN_OP_LEAF && lw_src_inst(&w, t, 0) < 0)
            st = lw_item_add(&w, t, -1, NULL, NULL, false, NULL, err);
    }
    nn_plan_iter iter;
    nn_plan_iter_begin(&iter, p, c);
    const nn_plan_entry *e;
    const nn_plan_block *b;
    int mb;
    while (st == NP_OK && (e = nn_plan_iter_next(&iter, &b, &mb)))
        st = lw_plan_entry(&w, e, (int)(b - c->blocks), mb, &iter, err);
    if (st == NP_OK)
        st = lw_lower(&w, err);
    if (st == NP_OK && np_verify_on())
        st = lower_prog_verify(w.lp, p, rank, err);
    if (st == NP_OK) {
        *out = w.lp;
        w.lp = NULL;
    }
    lw_ctx_fini(&w);
    return st;
}

int lower_plan_layer_nodes(const nn_plan *p, int layer, const nn_tensor **nodes, int max)
{
    int n = 0;
    for (int c = 0; c < p->n_classes; c++) {
        const nn_plan_class *pc = &p->classes[c];
        for (int b = 0; b < pc->n_blocks; b++)
            for (int i = 0; i < pc->blocks[b].n_entries; i++) {
                const nn_plan_entry *e = &pc->blocks[b].entries[i];
                if (e->kind != NN_PLAN_COMPUTE || e->layer != layer || e->n_nodes < 1 ||
                    lower_node_is_view(e->nodes[0]))
                    continue;
                if (n < max)
                    nodes[n] = e->nodes[0];
                n++;
            }
    }
    return n;
}
