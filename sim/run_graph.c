/* run_graph.c — building, checking and finalizing a run graph (see run_graph.h, run_impl.h). */
#include "run_impl.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const run_comm_names[RUN_COMM_COUNT] = {
#define RUN_COMM(NAME, name, desc) [RUN_COMM_##NAME] = name,
#include "run_kinds.def"
#undef RUN_COMM
};
static const char *const run_unit_names[RUN_UNIT_COUNT] = {
#define RUN_UNIT(NAME, name, from_kernel, desc) [RUN_UNIT_##NAME] = name,
#include "run_kinds.def"
#undef RUN_UNIT
};
static const bool run_unit_kernel[RUN_UNIT_COUNT] = {
#define RUN_UNIT(NAME, name, from_kernel, desc) [RUN_UNIT_##NAME] = from_kernel,
#include "run_kinds.def"
#undef RUN_UNIT
};
static const char *const run_task_kind_names[RUN_TASK_KIND_COUNT] = {
    [RUN_TASK_COMPUTE] = "compute", [RUN_TASK_COLL] = "coll", [RUN_TASK_SEND] = "send",
    [RUN_TASK_RECV] = "recv",
};

const char *run_comm_kind_name(run_comm_kind k)
{
    return (unsigned)k < RUN_COMM_COUNT ? run_comm_names[k] : NULL;
}
const char *run_unit_name(run_unit u)
{
    return (unsigned)u < RUN_UNIT_COUNT ? run_unit_names[u] : NULL;
}
bool run_unit_from_kernel(run_unit u) { return (unsigned)u < RUN_UNIT_COUNT && run_unit_kernel[u]; }
const char *run_task_kind_name(run_task_kind k)
{
    return (unsigned)k < RUN_TASK_KIND_COUNT ? run_task_kind_names[k] : NULL;
}

/* Grows *v (n used, *cap allocated, elements of size sz) to hold n + 1. */
static bool rg_reserve(void **v, uint32_t n, uint32_t *cap, size_t sz)
{
    if (n < *cap)
        return true;
    uint32_t c = *cap ? *cap * 2 : 8;
    void *p = realloc(*v, (size_t)c * sz);
    if (!p)
        return false;
    *v = p;
    *cap = c;
    return true;
}
#define RG_RESERVE(v, n, cap) rg_reserve((void **)&(v), (n), &(cap), sizeof *(v))

static void rg_name(char dst[RUN_NAME_MAX], const char *src)
{
    snprintf(dst, RUN_NAME_MAX, "%s", src ? src : "");
}

static np_status rg_oom(np_err *err)
{
    return np_err_set(err, NP_ERR_NOMEM, "out of memory building the run graph");
}

static np_status rg_frozen(np_err *err)
{
    return np_err_set(err, NP_ERR_INTERNAL, "the run graph is finalized and cannot change");
}

np_status run_graph_create(uint32_t ranks, run_graph **out, np_err *err)
{
    if (ranks < 1 || ranks > (1u << 24))
        return np_err_set(err, NP_ERR_RANGE, "a run graph has 1 .. 16777216 ranks, not %" PRIu32,
                          ranks);
    run_graph *g = calloc(1, sizeof *g);
    if (!g)
        return rg_oom(err);
    g->ranks = ranks;
    g->pp_gs = RUN_NONE;
    g->micro_batches = 1;
    g->chip_of = malloc((size_t)ranks * sizeof *g->chip_of);
    g->class_of = calloc(ranks, sizeof *g->class_of);
    if (!g->chip_of || !g->class_of) {
        run_graph_free(g);
        return rg_oom(err);
    }
    for (uint32_t r = 0; r < ranks; r++)
        g->chip_of[r] = r;
    for (uint32_t s = 0; s < RUN_STREAMS; s++)
        snprintf(g->stream_name[s], RUN_NAME_MAX, "s%" PRIu32, s);
    *out = g;
    return NP_OK;
}

void run_graph_free(run_graph *g)
{
    if (!g)
        return;
    for (uint32_t i = 0; i < g->n_gs; i++) {
        free(g->gs[i].members);
        free(g->gs[i].group_of);
        free(g->gs[i].pos_of);
    }
    for (uint32_t i = 0; i < g->n_cls; i++) {
        rg_class *c = &g->cls[i];
        free(c->tasks);
        free(c->deps);
        free(c->order);
        free(c->send);
        free(c->recv);
    }
    for (uint32_t i = 0; i < g->n_kern; i++)
        free((char *)g->kern[i].k.key);
    np_hmap_free(&g->kern_index);
    np_hmap_free(&g->spec_index);
    free(g->gs);
    free(g->cls);
    free(g->kern);
    free(g->spec);
    free(g->comm);
    free(g->chip_of);
    free(g->class_of);
    free(g->send_off);
    free(g->send_dst);
    free(g->send_dch);
    free(g->recv_off);
    free(g->recv_src);
    free(g);
}

np_status run_graph_add_groupset(run_graph *g, const char *name, uint32_t n_groups,
                                 uint32_t group_size, const uint32_t *members, uint32_t *id,
                                 np_err *err)
{
    if (g->final)
        return rg_frozen(err);
    if (n_groups < 1 || group_size < 1 || (uint64_t)n_groups * group_size > g->ranks)
        return np_err_set(err, NP_ERR_RANGE, "groupset %s: %" PRIu32 " groups of %" PRIu32
                          " ranks do not fit %" PRIu32 " ranks", name, n_groups, group_size,
                          g->ranks);
    if (!RG_RESERVE(g->gs, g->n_gs, g->cap_gs))
        return rg_oom(err);
    rg_groupset s = {.n_groups = n_groups, .size = group_size};
    rg_name(s.name, name);
    size_t n = (size_t)n_groups * group_size;
    s.members = malloc(n * sizeof *s.members);
    s.group_of = malloc((size_t)g->ranks * sizeof *s.group_of);
    s.pos_of = malloc((size_t)g->ranks * sizeof *s.pos_of);
    if (!s.members || !s.group_of || !s.pos_of) {
        free(s.members);
        free(s.group_of);
        free(s.pos_of);
        return rg_oom(err);
    }
    memcpy(s.members, members, n * sizeof *s.members);
    for (uint32_t r = 0; r < g->ranks; r++)
        s.group_of[r] = s.pos_of[r] = RUN_NONE;
    for (size_t i = 0; i < n; i++) {
        uint32_t r = members[i];
        if (r >= g->ranks || s.group_of[r] != RUN_NONE) {
            np_err_set(err, NP_ERR_RANGE, r >= g->ranks
                           ? "groupset %s: group %zu names rank %" PRIu32 ", not one of the %"
                             PRIu32 " ranks"
                           : "groupset %s: group %zu names rank %" PRIu32 " again (a rank is "
                             "in at most one group of a groupset)",
                       s.name, i / group_size, r, g->ranks);
            free(s.members);
            free(s.group_of);
            free(s.pos_of);
            return err->status;
        }
        s.group_of[r] = (uint32_t)(i / group_size);
        s.pos_of[r] = (uint32_t)(i % group_size);
    }
    g->gs[g->n_gs] = s;
    if (id)
        *id = g->n_gs;
    g->n_gs++;
    return NP_OK;
}

np_status run_graph_add_class(run_graph *g, const char *name, uint32_t *id, np_err *err)
{
    if (g->final)
        return rg_frozen(err);
    if (!RG_RESERVE(g->cls, g->n_cls, g->cap_cls))
        return rg_oom(err);
    rg_class *c = &g->cls[g->n_cls];
    memset(c, 0, sizeof *c);
    rg_name(c->name, name);
    if (id)
        *id = g->n_cls;
    g->n_cls++;
    return NP_OK;
}

np_status run_graph_set_class(run_graph *g, uint32_t rank, uint32_t cls, np_err *err)
{
    if (g->final)
        return rg_frozen(err);
    if (rank >= g->ranks || cls >= g->n_cls)
        return np_err_set(err, NP_ERR_RANGE, "rank %" PRIu32 " / class %" PRIu32 ": the graph "
                          "has %" PRIu32 " ranks and %" PRIu32 " classes", rank, cls, g->ranks,
                          g->n_cls);
    g->class_of[rank] = cls;
    return NP_OK;
}

np_status run_graph_set_chip(run_graph *g, uint32_t rank, uint32_t chip, np_err *err)
{
    if (g->final)
        return rg_frozen(err);
    if (rank >= g->ranks)
        return np_err_set(err, NP_ERR_RANGE, "rank %" PRIu32 ": the graph has %" PRIu32
                          " ranks", rank, g->ranks);
    g->chip_of[rank] = chip;
    return NP_OK;
}

np_status run_graph_set_stream_name(run_graph *g, uint32_t stream, const char *name,
                                    np_err *err)
{
    if (g->final)
        return rg_frozen(err);
    if (stream >= RUN_STREAMS)
        return np_err_set(err, NP_ERR_RANGE, "stream %" PRIu32 ": streams are 0 .. %d", stream,
                          RUN_STREAMS - 1);
    rg_name(g->stream_name[stream], name);
    return NP_OK;
}

np_status run_graph_add_kernel(run_graph *g, const run_kernel *k, uint32_t *id, np_err *err)
{
    if (g->final)
        return rg_frozen(err);
    if (!k->key)
        return np_err_set(err, NP_ERR_MISSING, "a kernel needs a key");
    size_t len = strlen(k->key);
    uint64_t h = np_hash_bytes(k->key, len, 0);
    for (uint32_t it = 0, i; (i = np_hmap_next(&g->kern_index, h, &it)) != NP_HMAP_END;)
        if (strcmp(g->kern[i].k.key, k->key) == 0) {
            *id = i;
            return NP_OK;
        }
    if (!RG_RESERVE(g->kern, g->n_kern, g->cap_kern))
        return rg_oom(err);
    char *key = malloc(len + 1);
    if (!key)
        return rg_oom(err);
    memcpy(key, k->key, len + 1);
    if (!np_hmap_put(&g->kern_index, h, g->n_kern)) {
        free(key);
        return rg_oom(err);
    }
    rg_kernel *e = &g->kern[g->n_kern];
    e->k = *k;
    e->k.key = key;
    if (e->k.hw_flops == 0)
        e->k.hw_flops = e->k.flops;
    *id = g->n_kern++;
    return NP_OK;
}

/* The spec with t's collective parameters, interned. */
static np_status rg_spec_intern(run_graph *g, const run_task *t, uint32_t *id, np_err *err)
{
    rg_spec s;
    memset(&s, 0, sizeof s); /* padding too: specs are hashed and compared as bytes */
    s.op = t->op;
    s.algo = t->algo; /* AUTO: the network's tuner chooses when the collective starts */
    s.groupset = t->groupset;
    s.root = t->root;
    s.elem_bytes = t->elem_bytes ? t->elem_bytes : 4;
    s.stream = t->stream;
    s.comm = t->comm;
    s.bytes = t->bytes;
    s.chunk_bytes = t->chunk_bytes;
    s.comm_id = RUN_NONE;
    uint64_t h = np_hash_bytes(&s, sizeof s, 0);
    for (uint32_t it = 0, i; (i = np_hmap_next(&g->spec_index, h, &it)) != NP_HMAP_END;)
        if (memcmp(&g->spec[i], &s, sizeof s) == 0) {
            *id = i;
            return NP_OK;
        }
    if (!RG_RESERVE(g->spec, g->n_spec, g->cap_spec) ||
        !np_hmap_put(&g->spec_index, h, g->n_spec))
        return rg_oom(err);
    g->spec[g->n_spec] = s;
    *id = g->n_spec++;
    return NP_OK;
}

/* The channel slot of class c for (peer, tag) in the send or recv list, added if new. */
static np_status rg_chan_intern(rg_class *c, bool send, const run_task *t, uint32_t engine,
                                uint32_t task_id, uint32_t *slot, np_err *err)
{
    rg_chan **v = send ? &c->send : &c->recv;
    uint32_t *n = send ? &c->n_send : &c->n_recv, *cap = send ? &c->cap_send : &c->cap_recv;
    /* Classes have a handful of channels (a stage's previous and next); they are interned
     * once per task while the graph is built, never while it runs. */
    for (uint32_t i = 0; i < *n; i++) {
        rg_chan *ch = &(*v)[i];
        if (ch->peer_groupset == t->peer_groupset && ch->peer == t->peer && ch->tag == t->tag) {
            if (ch->engine != engine)
                return np_err_set(err, NP_ERR_INCONSISTENT, "class %s task %" PRIu32 ": %ss "
                                  "of one peer and tag must use one stream (this one uses "
                                  "stream %" PRIu32 ", an earlier one stream %" PRIu32 ")",
                                  c->name, task_id, send ? "send" : "recv", engine - 1,
                                  ch->engine - 1);
            *slot = i;
            return NP_OK;
        }
    }
    if (!rg_reserve((void **)v, *n, cap, sizeof **v))
        return np_err_set(err, NP_ERR_NOMEM, "out of memory building the run graph");
    (*v)[*n] = (rg_chan){t->peer_groupset, t->peer, t->tag, engine};
    *slot = (*n)++;
    return NP_OK;
}

np_status run_graph_add_task(run_graph *g, uint32_t cls, const run_task *t, uint32_t *id,
                             np_err *err)
{
    if (g->final)
        return rg_frozen(err);
    if (cls >= g->n_cls)
        return np_err_set(err, NP_ERR_RANGE, "class %" PRIu32 ": the graph has %" PRIu32
                          " classes", cls, g->n_cls);
    rg_class *c = &g->cls[cls];
    uint32_t tid = c->n_tasks;
    if ((unsigned)t->kind >= RUN_TASK_KIND_COUNT)
        return np_err_set(err, NP_ERR_RANGE, "class %s task %" PRIu32 ": unknown kind %d",
                          c->name, tid, (int)t->kind);
    rg_task rt = {.kind = (uint8_t)t->kind, .flags = (uint8_t)t->flags, .bytes = t->bytes};
    if (t->kind == RUN_TASK_COMPUTE) {
        if (t->kernel >= g->n_kern)
            return np_err_set(err, NP_ERR_RANGE, "class %s task %" PRIu32 ": unknown kernel %"
                              PRIu32, c->name, tid, t->kernel);
        rt.engine = 0;
        rt.ref = t->kernel;
    } else {
        if (t->stream >= RUN_STREAMS)
            return np_err_set(err, NP_ERR_RANGE, "class %s task %" PRIu32 ": stream %" PRIu32
                              " (streams are 0 .. %d)", c->name, tid, t->stream,
                              RUN_STREAMS - 1);
        if ((unsigned)t->comm >= RUN_COMM_COUNT)
            return np_err_set(err, NP_ERR_RANGE, "class %s task %" PRIu32 ": unknown "
                              "communication kind %d", c->name, tid, (int)t->comm);
        rt.engine = (uint8_t)(1 + t->stream);
        rt.comm = (uint8_t)t->comm;
    }
    if (t->kind == RUN_TASK_COLL) {
        if (t->groupset >= g->n_gs)
            return np_err_set(err, NP_ERR_RANGE, "class %s task %" PRIu32 ": unknown groupset %"
                              PRIu32, c->name, tid, t->groupset);
        if (!coll_algo_supported(t->op, t->algo))
            return np_err_set(err, NP_ERR_INCONSISTENT, "class %s task %" PRIu32 ": %s has no "
                              "%s algorithm", c->name, tid,
                              coll_op_name(t->op) ? coll_op_name(t->op) : "?",
                              coll_algo_name(t->algo) ? coll_algo_name(t->algo) : "?");
        if ((t->op == COLL_OP_BROADCAST || t->op == COLL_OP_REDUCE || t->op == COLL_OP_SCATTER ||
             t->op == COLL_OP_GATHER) && t->root >= g->gs[t->groupset].size)
            return np_err_set(err, NP_ERR_RANGE, "class %s task %" PRIu32 ": root %" PRIu32
                              " is not a position of the %" PRIu32 "-rank groups of %s",
                              c->name, tid, t->root, g->gs[t->groupset].size,
                              g->gs[t->groupset].name);
    }
    if ((t->kind == RUN_TASK_SEND || t->kind == RUN_TASK_RECV) &&
        t->peer_groupset != RUN_NONE && t->peer_groupset >= g->n_gs)
        return np_err_set(err, NP_ERR_RANGE, "class %s task %" PRIu32 ": unknown peer groupset "
                          "%" PRIu32, c->name, tid, t->peer_groupset);
    bool pipe_found = t->pipe_chunks < 2;
    for (uint32_t i = 0; i < t->n_deps; i++) {
        if (t->deps[i] >= tid)
            return np_err_set(err, NP_ERR_RANGE, "class %s task %" PRIu32 ": dependency %"
                              PRIu32 " is not an earlier task", c->name, tid, t->deps[i]);
        pipe_found |= t->deps[i] == t->pipe_dep;
    }
    if (!pipe_found || (t->pipe_chunks >= 2 && c->tasks[t->pipe_dep].engine == rt.engine))
        return np_err_set(err, NP_ERR_INCONSISTENT, "class %s task %" PRIu32 ": the task it "
                          "overlaps in chunks (%" PRIu32 ") is not one of its dependencies on "
                          "another engine", c->name, tid, t->pipe_dep);
    if (c->eng_n[rt.engine] > RG_DEP_POS_MASK)
        return np_err_set(err, NP_ERR_RANGE, "class %s: more than %u tasks on one engine",
                          c->name, RG_DEP_POS_MASK);
    if (c->n_deps + t->n_deps < c->n_deps)
        return rg_oom(err);
    /* Everything that can fail is done before the class changes. */
    if (!RG_RESERVE(c->tasks, c->n_tasks, c->cap_tasks))
        return rg_oom(err);
    while (c->n_deps + t->n_deps > c->cap_deps) {
        uint32_t cap = c->cap_deps ? c->cap_deps * 2 : 16;
        uint32_t *v = realloc(c->deps, (size_t)cap * sizeof *v);
        if (!v)
            return rg_oom(err);
        c->deps = v;
        c->cap_deps = cap;
    }
    if (t->kind == RUN_TASK_COLL) {
        if (rg_spec_intern(g, t, &rt.ref, err) != NP_OK)
            return err->status;
    } else if (t->kind == RUN_TASK_SEND || t->kind == RUN_TASK_RECV) {
        if (rg_chan_intern(c, t->kind == RUN_TASK_SEND, t, rt.engine, tid, &rt.ref, err) !=
            NP_OK)
            return err->status;
    }
    rt.pos = c->eng_n[rt.engine]++;
    if (t->pipe_chunks >= 2) {
        const rg_task *d = &c->tasks[t->pipe_dep];
        rt.pipe = (uint32_t)d->engine << RG_DEP_ENGINE_SHIFT | d->pos;
        rt.pipe_k = t->pipe_chunks;
        c->has_pipe = true;
    }
    rt.dep_off = c->n_deps;
    rt.n_deps = t->n_deps;
    for (uint32_t i = 0; i < t->n_deps; i++) {
        const rg_task *d = &c->tasks[t->deps[i]];
        c->deps[c->n_deps++] = (uint32_t)d->engine << RG_DEP_ENGINE_SHIFT | d->pos;
    }
    c->tasks[c->n_tasks++] = rt;
    if (id)
        *id = tid;
    return NP_OK;
}

np_status run_graph_set_pipeline(run_graph *g, uint32_t pp_groupset, uint32_t micro_batches,
                                 np_err *err)
{
    if (g->final)
        return rg_frozen(err);
    if (pp_groupset >= g->n_gs || micro_batches < 1)
        return np_err_set(err, NP_ERR_RANGE, "pipeline: groupset %" PRIu32 " (of %" PRIu32
                          "), %" PRIu32 " micro-batches (at least 1)", pp_groupset, g->n_gs,
                          micro_batches);
    g->pp_gs = pp_groupset;
    g->micro_batches = micro_batches;
    return NP_OK;
}

uint32_t rg_chan_peer(const run_graph *g, uint32_t r, const rg_chan *ch)
{
    if (ch->peer_groupset == RUN_NONE)
        return ch->peer >= 0 && (uint32_t)ch->peer < g->ranks ? (uint32_t)ch->peer : RUN_NONE;
    const rg_groupset *s = &g->gs[ch->peer_groupset];
    uint32_t grp = s->group_of[r];
    if (grp == RUN_NONE)
        return RUN_NONE;
    int64_t pos = (int64_t)s->pos_of[r] + ch->peer;
    if (pos < 0 || pos >= (int64_t)s->size)
        return RUN_NONE;
    return s->members[(size_t)grp * s->size + (size_t)pos];
}

/* ---- finalize ------------------------------------------------------------------------------ */

/* Per class, the tasks' refs grouped by a key (collectives by comm id, sends or recvs by
 * channel slot), in issue order: seq[off[k] .. off[k+1]) are the task ids of key k. */
typedef struct rg_seq {
    uint32_t *off, *ids;
} rg_seq;

static void rg_seq_free(rg_seq *s, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        free(s[i].off);
        free(s[i].ids);
    }
    free(s);
}

/* Builds per-class sequences of the tasks of `kind`, keyed by key_of (n_keys keys). */
static rg_seq *rg_seq_build(const run_graph *g, run_task_kind kind, bool by_comm)
{
    rg_seq *s = calloc(g->n_cls ? g->n_cls : 1, sizeof *s);
    if (!s)
        return NULL;
    for (uint32_t ci = 0; ci < g->n_cls; ci++) {
        const rg_class *c = &g->cls[ci];
        uint32_t nk = by_comm ? g->n_comm : kind == RUN_TASK_SEND ? c->n_send : c->n_recv;
        s[ci].off = calloc((size_t)nk + 2, sizeof *s[ci].off);
        s[ci].ids = malloc(((size_t)c->n_tasks + 1) * sizeof *s[ci].ids);
        if (!s[ci].off || !s[ci].ids) {
            rg_seq_free(s, g->n_cls);
            return NULL;
        }
        for (uint32_t t = 0; t < c->n_tasks; t++)
            if (c->tasks[t].kind == kind)
                s[ci].off[(by_comm ? g->spec[c->tasks[t].ref].comm_id : c->tasks[t].ref) + 2]++;
        for (uint32_t k = 0; k < nk; k++)
            s[ci].off[k + 2] += s[ci].off[k + 1];
        for (uint32_t t = 0; t < c->n_tasks; t++)
            if (c->tasks[t].kind == kind)
                s[ci].ids[s[ci].off[(by_comm ? g->spec[c->tasks[t].ref].comm_id
                                             : c->tasks[t].ref) + 1]++] = t;
    }
    return s; /* off[k] .. off[k+1] now bounds key k */
}

/* A set of compared (class, key, class, key) quadruples, so each pair is compared once. */
typedef struct rg_pairset {
    np_hmap index;
    uint32_t (*v)[4];
    uint32_t n, cap;
} rg_pairset;

/* true when q was already in the set; otherwise adds it (*oom on failure). */
static bool rg_pairset_seen(rg_pairset *s, const uint32_t q[4], bool *oom)
{
    uint64_t h = np_hash_bytes(q, 4 * sizeof *q, 0);
    for (uint32_t it = 0, i; (i = np_hmap_next(&s->index, h, &it)) != NP_HMAP_END;)
        if (memcmp(s->v[i], q, 4 * sizeof *q) == 0)
            return true;
    if (!rg_reserve((void **)&s->v, s->n, &s->cap, sizeof *s->v) ||
        !np_hmap_put(&s->index, h, s->n)) {
        *oom = true;
        return false;
    }
    memcpy(s->v[s->n++], q, 4 * sizeof *q);
    return false;
}

static void rg_pairset_free(rg_pairset *s)
{
    np_hmap_free(&s->index);
    free(s->v);
}

static np_status rg_finalize_classes(run_graph *g, np_err *err)
{
    for (uint32_t r = 0; r < g->ranks; r++)
        if (g->class_of[r] >= g->n_cls)
            return np_err_set(err, NP_ERR_MISSING, "rank %" PRIu32 " is in no class (the graph "
                              "has %" PRIu32 " classes)", r, g->n_cls);
    for (uint32_t ci = 0; ci < g->n_cls; ci++) {
        rg_class *c = &g->cls[ci];
        c->order = malloc(((size_t)c->n_tasks + 1) * sizeof *c->order);
        if (!c->order)
            return rg_oom(err);
        c->eng_off[0] = 0;
        for (uint32_t e = 0; e < RUN_ENGINES; e++) {
            c->eng_off[e + 1] = c->eng_off[e] + c->eng_n[e];
            if (c->eng_n[e])
                c->engines[c->n_engines++] = (uint8_t)e;
        }
        uint32_t fill[RUN_ENGINES];
        memcpy(fill, c->eng_off, sizeof fill);
        for (uint32_t t = 0; t < c->n_tasks; t++)
            c->order[fill[c->tasks[t].engine]++] = t;
    }
    return NP_OK;
}

static np_status rg_finalize_chips(run_graph *g, np_err *err)
{
    uint32_t max = 0;
    for (uint32_t r = 0; r < g->ranks; r++)
        max = g->chip_of[r] > max ? g->chip_of[r] : max;
    if (max >= (1u << 26))
        return np_err_set(err, NP_ERR_RANGE, "chip %" PRIu32 " is out of range", max);
    uint32_t *owner = malloc(((size_t)max + 1) * sizeof *owner);
    if (!owner)
        return rg_oom(err);
    for (uint32_t c = 0; c <= max; c++)
        owner[c] = RUN_NONE;
    for (uint32_t r = 0; r < g->ranks; r++) {
        uint32_t c = g->chip_of[r];
        if (owner[c] != RUN_NONE) {
            np_err_set(err, NP_ERR_INCONSISTENT, "ranks %" PRIu32 " and %" PRIu32 " are both "
                       "placed on chip %" PRIu32, owner[c], r, c);
            free(owner);
            return err->status;
        }
        owner[c] = r;
    }
    free(owner);
    return NP_OK;
}

/* Numbers the (stream, groupset) pairs of the collectives and gives each group instance of
 * each pair its rendezvous slot. */
static np_status rg_finalize_comms(run_graph *g, np_err *err)
{
    uint32_t *id = malloc(((size_t)RUN_STREAMS * g->n_gs + 1) * sizeof *id);
    if (!id)
        return rg_oom(err);
    for (size_t i = 0; i < (size_t)RUN_STREAMS * g->n_gs; i++)
        id[i] = RUN_NONE;
    for (uint32_t i = 0; i < g->n_spec; i++) {
        rg_spec *s = &g->spec[i];
        uint32_t *k = &id[(size_t)s->stream * g->n_gs + s->groupset];
        if (*k == RUN_NONE)
            *k = g->n_comm++;
        s->comm_id = *k;
    }
    g->comm = malloc(((size_t)g->n_comm + 1) * sizeof *g->comm);
    if (!g->comm) {
        free(id);
        return rg_oom(err);
    }
    for (uint32_t st = 0; st < RUN_STREAMS; st++)
        for (uint32_t gs = 0; gs < g->n_gs; gs++) {
            uint32_t k = id[(size_t)st * g->n_gs + gs];
            if (k != RUN_NONE)
                g->comm[k] = (rg_comm){st, gs, 0};
        }
    free(id);
    for (uint32_t k = 0; k < g->n_comm; k++) {
        g->comm[k].base = g->n_slots;
        g->n_slots += g->gs[g->comm[k].groupset].n_groups;
    }
    return NP_OK;
}

/* Every member of every group runs the same collectives on each (stream, groupset). */
static np_status rg_check_colls(run_graph *g, np_err *err)
{
    rg_seq *seq = rg_seq_build(g, RUN_TASK_COLL, true);
    if (!seq)
        return rg_oom(err);
    rg_pairset seen = {0};
    bool oom = false;
    np_status st = NP_OK;
    for (uint32_t r = 0; r < g->ranks && st == NP_OK; r++) {
        uint32_t ca = g->class_of[r];
        const rg_class *a = &g->cls[ca];
        for (uint32_t k = 0; k < g->n_comm && st == NP_OK; k++) {
            uint32_t na = seq[ca].off[k + 1] - seq[ca].off[k];
            if (na == 0)
                continue;
            const rg_groupset *gs = &g->gs[g->comm[k].groupset];
            uint32_t grp = gs->group_of[r];
            const rg_task *t0 = &a->tasks[seq[ca].ids[seq[ca].off[k]]];
            if (grp == RUN_NONE) {
                st = np_err_set(err, NP_ERR_INCONSISTENT, "rank %" PRIu32 " (class %s) runs "
                                "%s on groupset %s (task %" PRIu32 ") but is in none of its "
                                "groups", r, a->name, coll_op_name(g->spec[t0->ref].op),
                                gs->name, seq[ca].ids[seq[ca].off[k]]);
                break;
            }
            /* Compare with the group's first member (each pair of classes once). */
            uint32_t r0 = gs->members[(size_t)grp * gs->size];
            uint32_t cb = g->class_of[r0];
            if (cb == ca)
                continue;
            uint32_t q[4] = {ca, k, cb, k};
            if (rg_pairset_seen(&seen, q, &oom) || oom)
                continue;
            uint32_t nb = seq[cb].off[k + 1] - seq[cb].off[k];
            for (uint32_t i = 0; i < (na < nb ? na : nb); i++) {
                uint32_t ta = seq[ca].ids[seq[ca].off[k] + i], tb = seq[cb].ids[seq[cb].off[k] + i];
                uint32_t sa = a->tasks[ta].ref, sb = g->cls[cb].tasks[tb].ref;
                if (sa != sb) {
                    const rg_spec *x = &g->spec[sa], *y = &g->spec[sb];
                    st = np_err_set(err, NP_ERR_INCONSISTENT, "collective %" PRIu32 " on %s/%s "
                                    "differs between ranks %" PRIu32 " (class %s task %" PRIu32
                                    ": %s %s %" PRIu64 " bytes) and %" PRIu32 " (class %s task %"
                                    PRIu32 ": %s %s %" PRIu64 " bytes) of one group", i,
                                    g->stream_name[g->comm[k].stream], gs->name, r, a->name, ta,
                                    coll_op_name(x->op), coll_algo_name(x->algo), x->bytes, r0,
                                    g->cls[cb].name, tb, coll_op_name(y->op),
                                    coll_algo_name(y->algo), y->bytes);
                    break;
                }
            }
            if (st == NP_OK && na != nb)
                st = np_err_set(err, NP_ERR_INCONSISTENT, "ranks %" PRIu32 " (class %s) and %"
                                PRIu32 " (class %s) of one %s group run %" PRIu32 " and %" PRIu32
                                " collectives on stream %s", r, a->name, r0, g->cls[cb].name,
                                gs->name, na, nb, g->stream_name[g->comm[k].stream]);
        }
        /* A member whose class has no collectives on k while its group's first member has
         * some is found when that member's own turn above compares nothing: check it here. */
        for (uint32_t k = 0; k < g->n_comm && st == NP_OK; k++) {
            const rg_groupset *gs = &g->gs[g->comm[k].groupset];
            uint32_t grp = gs->group_of[r];
            if (grp == RUN_NONE || seq[ca].off[k + 1] != seq[ca].off[k])
                continue;
            uint32_t r0 = gs->members[(size_t)grp * gs->size];
            uint32_t cb = g->class_of[r0];
            if (seq[cb].off[k + 1] != seq[cb].off[k])
                st = np_err_set(err, NP_ERR_INCONSISTENT, "ranks %" PRIu32 " (class %s) and %"
                                PRIu32 " (class %s) of one %s group run 0 and %" PRIu32
                                " collectives on stream %s", r, a->name, r0, g->cls[cb].name,
                                gs->name, seq[cb].off[k + 1] - seq[cb].off[k],
                                g->stream_name[g->comm[k].stream]);
        }
    }
    if (st == NP_OK && oom)
        st = rg_oom(err);
    rg_pairset_free(&seen);
    rg_seq_free(seq, g->n_cls);
    return st;
}

/* Resolves every rank's send channels to (receiving rank, its recv channel) and checks that
 * sends and recvs pair up with equal message sizes in order. */
static np_status rg_finalize_p2p(run_graph *g, np_err *err)
{
    g->send_off = malloc(((size_t)g->ranks + 1) * sizeof *g->send_off);
    g->recv_off = malloc(((size_t)g->ranks + 1) * sizeof *g->recv_off);
    if (!g->send_off || !g->recv_off)
        return rg_oom(err);
    uint32_t ns = 0, nr = 0;
    for (uint32_t r = 0; r < g->ranks; r++) {
        g->send_off[r] = ns;
        g->recv_off[r] = nr;
        ns += g->cls[g->class_of[r]].n_send;
        nr += g->cls[g->class_of[r]].n_recv;
    }
    g->send_off[g->ranks] = ns;
    g->recv_off[g->ranks] = nr;
    g->n_recv_total = nr;
    g->send_dst = malloc(((size_t)ns + 1) * sizeof *g->send_dst);
    g->send_dch = malloc(((size_t)ns + 1) * sizeof *g->send_dch);
    g->recv_src = malloc(((size_t)nr + 1) * sizeof *g->recv_src);
    if (!g->send_dst || !g->send_dch || !g->recv_src)
        return rg_oom(err);
    for (uint32_t i = 0; i < nr; i++)
        g->recv_src[i] = RUN_NONE;
    for (uint32_t r = 0; r < g->ranks; r++) {
        const rg_class *a = &g->cls[g->class_of[r]];
        for (uint32_t s = 0; s < a->n_send; s++) {
            const rg_chan *ch = &a->send[s];
            uint32_t dst = rg_chan_peer(g, r, ch);
            if (dst == RUN_NONE || dst == r)
                return np_err_set(err, NP_ERR_RANGE, "rank %" PRIu32 " (class %s) sends with "
                                  "tag %" PRIu32 " to peer %+" PRId32 "%s%s, %s", r, a->name,
                                  ch->tag, ch->peer, ch->peer_groupset == RUN_NONE ? "" : " of ",
                                  ch->peer_groupset == RUN_NONE
                                      ? ""
                                      : g->gs[ch->peer_groupset].name,
                                  dst == r ? "itself" : "which is outside its group");
            const rg_class *b = &g->cls[g->class_of[dst]];
            uint32_t found = RUN_NONE;
            for (uint32_t j = 0; j < b->n_recv && found == RUN_NONE; j++)
                if (b->recv[j].tag == ch->tag && rg_chan_peer(g, dst, &b->recv[j]) == r)
                    found = j;
            if (found == RUN_NONE)
                return np_err_set(err, NP_ERR_INCONSISTENT, "rank %" PRIu32 " (class %s) sends "
                                  "to rank %" PRIu32 " with tag %" PRIu32 ", but rank %" PRIu32
                                  " (class %s) never receives from rank %" PRIu32 " with that "
                                  "tag", r, a->name, dst, ch->tag, dst, b->name, r);
            uint32_t *src = &g->recv_src[g->recv_off[dst] + found];
            if (*src != RUN_NONE)
                return np_err_set(err, NP_ERR_INCONSISTENT, "rank %" PRIu32 " reaches rank %"
                                  PRIu32 " with tag %" PRIu32 " through two different peer "
                                  "names", r, dst, ch->tag);
            *src = r;
            g->send_dst[g->send_off[r] + s] = dst;
            g->send_dch[g->send_off[r] + s] = found;
        }
    }
    for (uint32_t r = 0; r < g->ranks; r++) {
        const rg_class *b = &g->cls[g->class_of[r]];
        for (uint32_t j = 0; j < b->n_recv; j++)
            if (g->recv_src[g->recv_off[r] + j] == RUN_NONE) {
                uint32_t src = rg_chan_peer(g, r, &b->recv[j]);
                if (src == RUN_NONE)
                    return np_err_set(err, NP_ERR_RANGE, "rank %" PRIu32 " (class %s) receives "
                                      "with tag %" PRIu32 " from peer %+" PRId32 ", which is "
                                      "outside its group", r, b->name, b->recv[j].tag,
                                      b->recv[j].peer);
                return np_err_set(err, NP_ERR_INCONSISTENT, "rank %" PRIu32 " (class %s) "
                                  "receives from rank %" PRIu32 " with tag %" PRIu32 ", but "
                                  "rank %" PRIu32 " never sends it", r, b->name, src,
                                  b->recv[j].tag, src);
            }
    }
    /* Message sizes in order, once per pair of (class, channel). */
    rg_seq *sseq = rg_seq_build(g, RUN_TASK_SEND, false);
    rg_seq *rseq = rg_seq_build(g, RUN_TASK_RECV, false);
    rg_pairset seen = {0};
    bool oom = !sseq || !rseq;
    np_status st = NP_OK;
    for (uint32_t r = 0; r < g->ranks && st == NP_OK && !oom; r++) {
        uint32_t ca = g->class_of[r];
        const rg_class *a = &g->cls[ca];
        for (uint32_t s = 0; s < a->n_send && st == NP_OK; s++) {
            uint32_t dst = g->send_dst[g->send_off[r] + s], j = g->send_dch[g->send_off[r] + s];
            uint32_t cb = g->class_of[dst];
            uint32_t q[4] = {ca, s, cb, j};
            if (rg_pairset_seen(&seen, q, &oom) || oom)
                continue;
            const rg_class *b = &g->cls[cb];
            uint32_t na = sseq[ca].off[s + 1] - sseq[ca].off[s];
            uint32_t nb = rseq[cb].off[j + 1] - rseq[cb].off[j];
            if (na != nb) {
                st = np_err_set(err, NP_ERR_INCONSISTENT, "rank %" PRIu32 " (class %s) sends %"
                                PRIu32 " messages with tag %" PRIu32 " to rank %" PRIu32
                                " (class %s), which receives %" PRIu32, r, a->name, na,
                                a->send[s].tag, dst, b->name, nb);
                break;
            }
            for (uint32_t i = 0; i < na; i++) {
                uint32_t ta = sseq[ca].ids[sseq[ca].off[s] + i];
                uint32_t tb = rseq[cb].ids[rseq[cb].off[j] + i];
                if (a->tasks[ta].bytes != b->tasks[tb].bytes) {
                    st = np_err_set(err, NP_ERR_INCONSISTENT, "message %" PRIu32 " from rank %"
                                    PRIu32 " to rank %" PRIu32 " (tag %" PRIu32 "): class %s "
                                    "task %" PRIu32 " sends %" PRIu64 " bytes, class %s task %"
                                    PRIu32 " receives %" PRIu64, i, r, dst, a->send[s].tag,
                                    a->name, ta, a->tasks[ta].bytes, b->name, tb,
                                    b->tasks[tb].bytes);
                    break;
                }
            }
        }
    }
    if (st == NP_OK && oom)
        st = rg_oom(err);
    rg_pairset_free(&seen);
    if (sseq)
        rg_seq_free(sseq, g->n_cls);
    if (rseq)
        rg_seq_free(rseq, g->n_cls);
    return st;
}

np_status run_graph_finalize(run_graph *g, np_err *err)
{
    if (g->final)
        return NP_OK;
    if (g->n_cls == 0)
        return np_err_set(err, NP_ERR_MISSING, "the run graph has no class of tasks");
    np_status st;
    if ((st = rg_finalize_chips(g, err)) != NP_OK || (st = rg_finalize_classes(g, err)) != NP_OK ||
        (st = rg_finalize_comms(g, err)) != NP_OK || (st = rg_check_colls(g, err)) != NP_OK ||
        (st = rg_finalize_p2p(g, err)) != NP_OK)
        return st;
    g->final = true;
    return NP_OK;
}

uint32_t run_graph_ranks(const run_graph *g) { return g->ranks; }
uint32_t run_graph_classes(const run_graph *g) { return g->n_cls; }
uint32_t run_graph_kernels(const run_graph *g) { return g->n_kern; }
uint32_t run_graph_tasks(const run_graph *g, uint32_t cls)
{
    return cls < g->n_cls ? g->cls[cls].n_tasks : 0;
}
uint32_t run_graph_class_of(const run_graph *g, uint32_t rank)
{
    return rank < g->ranks ? g->class_of[rank] : RUN_NONE;
}
uint32_t run_graph_chip_of(const run_graph *g, uint32_t rank)
{
    return rank < g->ranks ? g->chip_of[rank] : RUN_NONE;
}
const run_kernel *run_graph_kernel(const run_graph *g, uint32_t id)
{
    return id < g->n_kern ? &g->kern[id].k : NULL;
}
const char *run_graph_groupset_name(const run_graph *g, uint32_t id)
{
    return id < g->n_gs ? g->gs[id].name : NULL;
}
const char *run_graph_stream_name(const run_graph *g, uint32_t stream)
{
    return stream < RUN_STREAMS ? g->stream_name[stream] : NULL;
}
