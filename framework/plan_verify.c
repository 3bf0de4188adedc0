/* plan_verify.c — nn_plan_verify: the invariants a built plan promises its two readers (the
 * step lowering and the fast run), checked on the finished plan rather than trusted.
 *
 * What it checks, first failure reported (NP_ERR_INTERNAL, naming the stage, block, entry
 * and micro-batch):
 *   - the mesh and the strategy agree (sizes, ranks, one chip per rank), micro-batches times
 *     their size times dp is the batch, pp x virtual stages model chunks, one class per stage;
 *   - blocks: a micro-batch block's chunk runs on its class's stage (chunk mod pp); entries:
 *     a valid kind and tag, their nodes present, compute/send/recv one node, a collective's
 *     bytes the sum of its nodes', sends and receives in groups of two; every dependency
 *     names an entry that exists, and every source a node of another entry reads is among
 *     the entry's dependencies (the data dependencies nothing may drop);
 *   - the schedule: each micro-batch block once per micro-batch, each step block once, the
 *     step's begin first and its end last, a chunk's forward of a micro-batch before its
 *     backward (and, under ZB-H1, its backward's B part before its W part); the issue pieces name schedule steps and parts that exist;
 *   - the issue order (nn_plan_iter, as both readers walk it): every instance of every
 *     entry that runs comes exactly once, after every instance it depends on (at the micro-
 *     batch the engines resolve a dependency to, where that entry runs);
 *   - matches: a send and a receive per pipeline match, with opposite peers between the two
 *     stages they name and the same bytes; the entries sharing a collective's match agree on
 *     op, tag, group and bytes, on as many stages as a pipeline-axis group spans.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"

typedef struct pv {
    const nn_plan *p;
    np_err *err;
} pv;

static np_status pv_fail(const pv *v, const char *what)
{
    return np_err_set(v->err, NP_ERR_INTERNAL, "plan %s: %s", v->p->model, what);
}

#define PV_FAIL(v, ...)                                                                     \
    do {                                                                                    \
        char msg_[NP_ERR_MSG_MAX - 80];                                                     \
        snprintf(msg_, sizeof msg_, __VA_ARGS__);                                           \
        return pv_fail(v, msg_);                                                            \
    } while (0)

static bool pv_micro(const nn_plan_block *b) { return nn_plan_block_is_micro(b->kind); }

static np_status pv_mesh(const pv *v)
{
    const nn_plan *p = v->p;
    const nn_strategy *s = &p->s;
    const nn_mesh *m = &p->mesh;
    if (m->size[NN_MESH_DP] != s->dp || m->size[NN_MESH_TP] != s->tp ||
        m->size[NN_MESH_PP] != s->pp)
        PV_FAIL(v, "the mesh is dp %d x tp %d x pp %d, the strategy dp %d x tp %d x pp %d",
                m->size[NN_MESH_DP], m->size[NN_MESH_TP], m->size[NN_MESH_PP], s->dp, s->tp,
                s->pp);
    if (m->n_ranks != s->dp * s->tp * s->pp)
        PV_FAIL(v, "%d ranks for dp x tp x pp = %d", m->n_ranks, s->dp * s->tp * s->pp);
    for (int r = 0; r < m->n_ranks; r++) {
        if (m->chip[r] < 0)
            PV_FAIL(v, "rank %d is on chip %d", r, m->chip[r]);
        for (int q = 0; q < r; q++)
            if (m->chip[q] == m->chip[r])
                PV_FAIL(v, "ranks %d and %d are both on chip %d", q, r, m->chip[r]);
    }
    if (p->n_micro < 1 || p->microbatch < 1 || p->microbatch * p->n_micro * s->dp != p->batch)
        PV_FAIL(v, "%d micro-batches of %lld samples on %d data-parallel ranks, for a batch of "
                "%lld", p->n_micro, (long long)p->microbatch, s->dp, (long long)p->batch);
    int vs = s->schedule == NN_PP_INTERLEAVED ? s->virtual_stages : 1;
    if (p->n_chunks != s->pp * vs)
        PV_FAIL(v, "%d model chunks for pp %d x %d virtual stages", p->n_chunks, s->pp, vs);
    if (p->n_classes != s->pp)
        PV_FAIL(v, "%d classes for pp %d", p->n_classes, s->pp);
    for (int c = 0; c < p->n_classes; c++)
        if (p->classes[c].stage != c || !p->classes[c].g)
            PV_FAIL(v, "class %d is stage %d%s", c, p->classes[c].stage,
                    p->classes[c].g ? "" : ", without a graph");
    return NP_OK;
}

/* The entry of each node of class c's entries (by node id; block -1: none). */
typedef struct pv_where {
    int block, entry;
} pv_where;

static np_status pv_entries(const pv *v, const nn_plan_class *c, pv_where *where)
{
    const nn_plan *p = v->p;
    int max_id = nn_graph_max_id(c->g);
    for (int b = 0; b < c->n_blocks; b++) {
        const nn_plan_block *bl = &c->blocks[b];
        if (bl->kind < NN_BLOCK_STEP_BEGIN || bl->kind > NN_BLOCK_BACKWARD_W)
            PV_FAIL(v, "stage %d block %d has kind %d", c->stage, b, (int)bl->kind);
        if (pv_micro(bl) ? bl->chunk < 0 || bl->chunk >= p->n_chunks ||
                               bl->chunk % p->s.pp != c->stage
                         : bl->chunk != -1)
            PV_FAIL(v, "stage %d block %d holds model chunk %d (of %d, on stage chunk mod %d)",
                    c->stage, b, bl->chunk, p->n_chunks, p->s.pp);
        for (int i = 0; i < bl->n_entries; i++) {
            const nn_plan_entry *e = &bl->entries[i];
            if (e->kind < NN_PLAN_COMPUTE || e->kind > NN_PLAN_RECV || e->n_nodes < 1 ||
                !e->nodes || (e->kind != NN_PLAN_COLLECTIVE && e->n_nodes != 1))
                PV_FAIL(v, "stage %d block %d entry %d: kind %d with %d nodes", c->stage, b, i,
                        (int)e->kind, e->n_nodes);
            for (int k = 0; k < e->n_nodes; k++) {
                const nn_tensor *t = e->nodes[k];
                if (!t || t->id < 0 || t->id > max_id)
                    PV_FAIL(v, "stage %d block %d entry %d: node %d is not of the stage's graph",
                            c->stage, b, i, k);
                if (where[t->id].block >= 0)
                    PV_FAIL(v, "stage %d: node %s is in block %d entry %d and block %d entry %d",
                            c->stage, t->name, where[t->id].block, where[t->id].entry, b, i);
                where[t->id] = (pv_where){b, i};
            }
            if (e->kind == NN_PLAN_COMPUTE)
                continue;
            if ((int)e->tag < 0 || e->tag >= NN_COMM_TAG_COUNT)
                PV_FAIL(v, "stage %d block %d entry %d: comm tag %d", c->stage, b, i, (int)e->tag);
            uint64_t bytes = 0;
            for (int k = 0; k < e->n_nodes; k++)
                bytes += nn_plan_comm_node_bytes(e->nodes[k]);
            if (e->bytes != bytes)
                PV_FAIL(v, "stage %d block %d entry %d (%s): %llu bytes, its nodes hold %llu",
                        c->stage, b, i, e->nodes[0]->name, (unsigned long long)e->bytes,
                        (unsigned long long)bytes);
            int axis = p->mesh.size[nn_comm_tag_axis(e->tag)];
            if (e->kind == NN_PLAN_COLLECTIVE ? e->group_size < 1 || e->group_size > axis
                                              : e->group_size != 2)
                PV_FAIL(v, "stage %d block %d entry %d (%s): a group of %d on an axis of %d",
                        c->stage, b, i, e->nodes[0]->name, e->group_size, axis);
        }
    }
    return NP_OK;
}

/* Every dependency exists, and every source produced by another entry is a dependency. */
static np_status pv_deps(const pv *v, const nn_plan_class *c, const pv_where *where)
{
    for (int b = 0; b < c->n_blocks; b++) {
        const nn_plan_block *bl = &c->blocks[b];
        for (int i = 0; i < bl->n_entries; i++) {
            const nn_plan_entry *e = &bl->entries[i];
            for (int k = 0; k < e->n_deps; k++) {
                nn_plan_dep d = e->deps[k];
                int tb = d.block < 0 ? b : d.block;
                if (tb >= c->n_blocks || d.entry < 0 || d.entry >= c->blocks[tb].n_entries ||
                    (tb == b && d.entry == i))
                    PV_FAIL(v, "stage %d block %d entry %d depends on entry %d of block %d",
                            c->stage, b, i, d.entry, tb);
            }
            for (int q = 0; q < e->n_nodes; q++) {
                const nn_tensor *t = e->nodes[q];
                for (int s = 0; s < t->n_src; s++) {
                    const nn_tensor *src = t->src[s];
                    pv_where w = where[src->id];
                    if (w.block < 0 || src->op == NN_OP_LEAF || (w.block == b && w.entry == i))
                        continue;
                    bool found = false;
                    for (int k = 0; k < e->n_deps && !found; k++) {
                        nn_plan_dep d = e->deps[k];
                        found = (d.block < 0 ? b : d.block) == w.block && d.entry == w.entry;
                    }
                    if (!found)
                        PV_FAIL(v, "stage %d block %d entry %d (%s) reads %s (block %d entry "
                                "%d) without depending on it", c->stage, b, i, t->name,
                                src->name, w.block, w.entry);
                }
            }
        }
    }
    return NP_OK;
}

static np_status pv_sched(const pv *v, const nn_plan_class *c)
{
    const nn_plan *p = v->p;
    int n = c->n_blocks * (p->n_micro + 1);
    int *pos = malloc((size_t)n * sizeof *pos); /* schedule step of (block, mb + 1) */
    if (!pos)
        return np_err_set(v->err, NP_ERR_NOMEM, "out of memory verifying a plan");
    for (int k = 0; k < n; k++)
        pos[k] = -1;
    np_status st = NP_OK;
#define SLOT(b, mb) ((b) * (p->n_micro + 1) + (mb) + 1)
    for (int s = 0; s < c->n_sched && st == NP_OK; s++) {
        nn_plan_sched sc = c->sched[s];
        if (sc.block < 0 || sc.block >= c->n_blocks) {
            st = np_err_set(v->err, NP_ERR_INTERNAL, "plan %s: stage %d schedule step %d runs "
                            "block %d of %d", p->model, c->stage, s, sc.block, c->n_blocks);
            break;
        }
        const nn_plan_block *bl = &c->blocks[sc.block];
        bool ok = pv_micro(bl) ? sc.mb >= 0 && sc.mb < p->n_micro : sc.mb == -1;
        if (ok && bl->kind == NN_BLOCK_STEP_BEGIN)
            ok = s == 0;
        if (ok && bl->kind == NN_BLOCK_STEP_END)
            ok = s == c->n_sched - 1;
        if (!ok || pos[SLOT(sc.block, sc.mb)] >= 0)
            st = np_err_set(v->err, NP_ERR_INTERNAL, "plan %s: stage %d schedule step %d runs "
                            "block %d (kind %d) at micro-batch %d: %s", p->model, c->stage, s,
                            sc.block, (int)bl->kind, sc.mb,
                            ok ? "a second time" : "out of place");
        else
            pos[SLOT(sc.block, sc.mb)] = s;
    }
    for (int b = 0; b < c->n_blocks && st == NP_OK; b++) {
        const nn_plan_block *bl = &c->blocks[b];
        for (int mb = pv_micro(bl) ? 0 : -1; mb < (pv_micro(bl) ? p->n_micro : 0); mb++) {
            if (pos[SLOT(b, mb)] < 0) {
                st = np_err_set(v->err, NP_ERR_INTERNAL, "plan %s: stage %d never runs block %d "
                                "at micro-batch %d", p->model, c->stage, b, mb);
                break;
            }
            /* a backward after its chunk's forward; a W part (ZB-H1) after its B part */
            nn_plan_block_kind before = bl->kind == NN_BLOCK_BACKWARD     ? NN_BLOCK_FORWARD
                                        : bl->kind == NN_BLOCK_BACKWARD_W ? NN_BLOCK_BACKWARD
                                                                          : bl->kind;
            if (before == bl->kind)
                continue;
            for (int f = 0; f < c->n_blocks; f++)
                if (c->blocks[f].kind == before && c->blocks[f].chunk == bl->chunk &&
                    pos[SLOT(f, mb)] > pos[SLOT(b, mb)]) {
                    st = np_err_set(v->err, NP_ERR_INTERNAL, "plan %s: stage %d runs chunk %d's "
                                    "%s of micro-batch %d (step %d) before its %s (step %d)",
                                    p->model, c->stage, bl->chunk,
                                    before == NN_BLOCK_FORWARD ? "backward" : "W pass", mb,
                                    pos[SLOT(b, mb)],
                                    before == NN_BLOCK_FORWARD ? "forward" : "B pass",
                                    pos[SLOT(f, mb)]);
                    break;
                }
            if (st != NP_OK)
                break;
        }
    }
#undef SLOT
    free(pos);
    for (int k = 0; k < c->n_issue && st == NP_OK; k++)
        if (c->issue[k].sched < 0 || c->issue[k].sched >= c->n_sched ||
            c->issue[k].part < NN_PART_ALL || c->issue[k].part > NN_PART_SEND)
            st = np_err_set(v->err, NP_ERR_INTERNAL, "plan %s: stage %d issue piece %d names "
                            "schedule step %d part %d", p->model, c->stage, k, c->issue[k].sched,
                            (int)c->issue[k].part);
    return st;
}

/* The issue order: each instance once, after what it depends on. */
static np_status pv_issue(const pv *v, const nn_plan_class *c)
{
    const nn_plan *p = v->p;
    size_t *base = malloc(((size_t)c->n_blocks + 1) * sizeof *base);
    if (!base)
        return np_err_set(v->err, NP_ERR_NOMEM, "out of memory verifying a plan");
    size_t n = 0;
    for (int b = 0; b < c->n_blocks; b++) {
        base[b] = n;
        n += (size_t)c->blocks[b].n_entries * (size_t)(pv_micro(&c->blocks[b]) ? p->n_micro : 1);
    }
    uint8_t *seen = calloc(n + 1, 1);
    if (!seen) {
        free(base);
        return np_err_set(v->err, NP_ERR_NOMEM, "out of memory verifying a plan");
    }
#define INST(b, mb, i)                                                                      \
    (base[b] + (size_t)(pv_micro(&c->blocks[b]) ? (mb) : 0) * (size_t)c->blocks[b].n_entries + \
     (size_t)(i))
    np_status st = NP_OK;
    nn_plan_iter it;
    nn_plan_iter_begin(&it, p, c);
    const nn_plan_entry *e;
    const nn_plan_block *bl;
    int mb;
    while (st == NP_OK && (e = nn_plan_iter_next(&it, &bl, &mb))) {
        int b = it.block;
        size_t self = INST(b, mb, it.entry);
        if (seen[self]) {
            st = np_err_set(v->err, NP_ERR_INTERNAL, "plan %s: stage %d issues block %d entry "
                            "%d of micro-batch %d twice", p->model, c->stage, b, it.entry, mb);
            break;
        }
        for (int k = 0; k < e->n_deps; k++) {
            int tb = e->deps[k].block < 0 ? b : e->deps[k].block;
            const nn_plan_block *tbl = &c->blocks[tb];
            int tmb = !pv_micro(tbl) ? -1 : mb >= 0 ? mb : p->n_micro - 1;
            const nn_plan_entry *d = &tbl->entries[e->deps[k].entry];
            if (!nn_plan_entry_runs(d, tmb, p->n_micro) ||
                !seen[INST(tb, tmb < 0 ? 0 : tmb, e->deps[k].entry)]) {
                st = np_err_set(v->err, NP_ERR_INTERNAL, "plan %s: stage %d issues block %d "
                                "entry %d (%s) of micro-batch %d before its dependency, block %d "
                                "entry %d (%s) of micro-batch %d%s", p->model, c->stage, b,
                                it.entry, e->nodes[0]->name, mb, tb, e->deps[k].entry,
                                d->nodes[0]->name, tmb,
                                nn_plan_entry_runs(d, tmb, p->n_micro) ? "" : ", which never runs");
                break;
            }
        }
        seen[self] = 1;
    }
    for (int b = 0; b < c->n_blocks && st == NP_OK; b++) {
        const nn_plan_block *tbl = &c->blocks[b];
        for (int m = pv_micro(tbl) ? 0 : -1; m < (pv_micro(tbl) ? p->n_micro : 0) && st == NP_OK;
             m++)
            for (int i = 0; i < tbl->n_entries; i++)
                if (nn_plan_entry_runs(&tbl->entries[i], m, p->n_micro) &&
                    !seen[INST(b, m < 0 ? 0 : m, i)]) {
                    st = np_err_set(v->err, NP_ERR_INTERNAL, "plan %s: stage %d never issues "
                                    "block %d entry %d (%s) of micro-batch %d", p->model,
                                    c->stage, b, i, tbl->entries[i].nodes[0]->name, m);
                    break;
                }
    }
#undef INST
    free(seen);
    free(base);
    return st;
}

/* One communication entry of the plan, for matching. */
typedef struct pv_comm {
    int match, stage, block, entry;
    const nn_plan_entry *e;
} pv_comm;

static int pv_comm_cmp(const void *a, const void *b)
{
    const pv_comm *x = a, *y = b;
    if (x->match != y->match)
        return x->match < y->match ? -1 : 1;
    if (x->stage != y->stage)
        return x->stage < y->stage ? -1 : 1;
    return x->block != y->block ? (x->block < y->block ? -1 : 1)
                                : (x->entry > y->entry) - (x->entry < y->entry);
}

static np_status pv_group(const pv *v, const pv_comm *g, int n)
{
    const nn_plan *p = v->p;
    const nn_plan_entry *e0 = g[0].e;
    if (e0->kind != NN_PLAN_COLLECTIVE) {
        int sends = 0, recvs = 0;
        for (int k = 0; k < n; k++)
            sends += g[k].e->kind == NN_PLAN_SEND, recvs += g[k].e->kind == NN_PLAN_RECV;
        if (n != 2 || sends != 1 || recvs != 1)
            PV_FAIL(v, "match %d pairs %d sends with %d receives and %d other entries", g[0].match,
                    sends, recvs, n - sends - recvs);
        const pv_comm *s = g[0].e->kind == NN_PLAN_SEND ? &g[0] : &g[1];
        const pv_comm *r = s == &g[0] ? &g[1] : &g[0];
        int pp = p->s.pp;
        if (((s->stage + s->e->peer) % pp + pp) % pp != r->stage ||
            ((r->stage + r->e->peer) % pp + pp) % pp != s->stage || s->e->bytes != r->e->bytes ||
            s->e->tag != r->e->tag || s->e->when != r->e->when)
            PV_FAIL(v, "match %d: stage %d sends %llu bytes %+d stages away, stage %d receives "
                    "%llu bytes from %+d", g[0].match, s->stage, (unsigned long long)s->e->bytes,
                    s->e->peer, r->stage, (unsigned long long)r->e->bytes, r->e->peer);
        return NP_OK;
    }
    int stages = 0;
    for (int k = 0; k < n; k++) {
        const nn_plan_entry *e = g[k].e;
        if (e->kind != NN_PLAN_COLLECTIVE || e->nodes[0]->op != e0->nodes[0]->op ||
            e->tag != e0->tag || e->group_size != e0->group_size || e->bytes != e0->bytes)
            PV_FAIL(v, "match %d: stage %d's %s (%s, %d ranks, %llu bytes) and stage %d's %s "
                    "(%s, %d ranks, %llu bytes) disagree", g[0].match, g[0].stage,
                    e0->nodes[0]->name, nn_comm_tag_name(e0->tag), e0->group_size,
                    (unsigned long long)e0->bytes, g[k].stage, e->nodes[0]->name,
                    nn_comm_tag_name(e->tag), e->group_size, (unsigned long long)e->bytes);
        stages += k == 0 || g[k].stage != g[k - 1].stage;
    }
    int want = nn_comm_tag_axis(e0->tag) == NN_MESH_PP ? e0->group_size : 1;
    if (stages != want)
        PV_FAIL(v, "match %d (%s, a %s group of %d) is on %d stages, not %d", g[0].match,
                e0->nodes[0]->name, nn_comm_tag_name(e0->tag), e0->group_size, stages, want);
    return NP_OK;
}

static np_status pv_matches(const pv *v)
{
    const nn_plan *p = v->p;
    size_t n = 0;
    for (int c = 0; c < p->n_classes; c++)
        for (int b = 0; b < p->classes[c].n_blocks; b++)
            for (int i = 0; i < p->classes[c].blocks[b].n_entries; i++)
                n += p->classes[c].blocks[b].entries[i].kind != NN_PLAN_COMPUTE;
    pv_comm *all = malloc((n + 1) * sizeof *all);
    if (!all)
        return np_err_set(v->err, NP_ERR_NOMEM, "out of memory verifying a plan");
    n = 0;
    for (int c = 0; c < p->n_classes; c++)
        for (int b = 0; b < p->classes[c].n_blocks; b++)
            for (int i = 0; i < p->classes[c].blocks[b].n_entries; i++) {
                const nn_plan_entry *e = &p->classes[c].blocks[b].entries[i];
                if (e->kind != NN_PLAN_COMPUTE)
                    all[n++] = (pv_comm){e->match, c, b, i, e};
            }
    qsort(all, n, sizeof *all, pv_comm_cmp);
    np_status st = NP_OK;
    for (size_t k = 0; k < n && st == NP_OK;) {
        size_t j = k + 1;
        while (j < n && all[j].match == all[k].match)
            j++;
        st = pv_group(v, all + k, (int)(j - k));
        k = j;
    }
    free(all);
    return st;
}

np_status nn_plan_verify(const nn_plan *p, np_err *err)
{
    pv v = {p, err};
    np_status st = pv_mesh(&v);
    for (int c = 0; c < p->n_classes && st == NP_OK; c++) {
        const nn_plan_class *cl = &p->classes[c];
        int max_id = nn_graph_max_id(cl->g);
        pv_where *where = malloc(((size_t)max_id + 2) * sizeof *where);
        if (!where)
            return np_err_set(err, NP_ERR_NOMEM, "out of memory verifying a plan");
        for (int k = 0; k <= max_id + 1; k++)
            where[k] = (pv_where){-1, -1};
        if ((st = pv_entries(&v, cl, where)) == NP_OK && (st = pv_deps(&v, cl, where)) == NP_OK &&
            (st = pv_sched(&v, cl)) == NP_OK)
            st = pv_issue(&v, cl);
        free(where);
    }
    return st == NP_OK ? pv_matches(&v) : st;
}
