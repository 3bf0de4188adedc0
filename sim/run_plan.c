/* run_plan.c — a plan as the run engine's task graph (see run_plan.h).
 *
 * Three passes: (1) every compute entry of every block becomes a kernel (each distinct key
 * once; ops without kernels are collected for one message); (2) the groupsets every
 * collective and send needs; (3) the tasks, class by class in schedule order, with each
 * entry instance's task id remembered so that later entries can depend on it. An instance
 * that lowers to nothing remembers the tasks it would have waited for instead. */
#include "run_plan.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run_fuse.h"
#include "hmap.h"

#define RP_NOTASK UINT32_MAX      /* an instance that has not run (yet) */
#define RP_DROPPED 0x80000000u    /* an instance that lowered to nothing: pool offset */
#define RP_MISSING_SHOWN 6        /* ops without kernels named in the message */

enum { RP_KEY_AXIS_SHIFT = 1 }; /* groupset key: axis << 1 | a part of the axis */

typedef struct rp_deps {
    int n;
    nn_plan_dep *d;
} rp_deps;

typedef struct rp {
    const nn_plan *p;
    const arch_config *cfg;
    run_plan_opts o;
    int stage;                /* the class being lowered */
    run_plan *rp;
    np_err *err;
    /* pass 1 */
    run_kspec *ks;
    char **keys;
    uint32_t n_ks, cap_ks, cap_keys;
    np_hmap ks_index;
    uint32_t ***kid;          /* [class][block][entry]: kernel id, RUN_NONE when none */
    run_fuse **fuse;          /* per class: what the lowering fuses (NULL: nothing) */
    rp_deps ***xdeps;         /* [class][block][entry]: a fused kernel's head also waits
                                 for what its chain's steps wait for (outside the chain) */
    char missing[RP_MISSING_SHOWN][200];
    uint32_t n_missing;       /* distinct ops without kernels */
    nn_op missing_op[NN_OP_COUNT];
    np_status missing_status;
    /* pass 2: groupsets by key (rp_gs_key) */
    uint32_t gs[NN_MESH_AXES * 2];
    int *buf;                 /* a group's ranks */
    /* pass 3 */
    uint32_t **ref;           /* per block: instance (mb * n_entries + e) -> task or DROPPED */
    uint32_t *pool;           /* dropped instances' dependencies: count, then task ids */
    uint32_t n_pool, cap_pool;
    uint32_t *deps;
    uint32_t n_deps, cap_deps;
} rp;

static np_status rp_oom(rp *x)
{
    return np_err_set(x->err, NP_ERR_NOMEM, "out of memory building the run graph");
}

static bool rp_grow(void **v, uint32_t *cap, uint32_t need, size_t elem)
{
    if (need <= *cap)
        return true;
    uint32_t c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    void *n = realloc(*v, (size_t)c * elem);
    if (!n)
        return false;
    *v = n;
    *cap = c;
    return true;
}

/* ---- pass 1: kernels ----------------------------------------------------------------------- */

static np_status rp_missing(rp *x, const nn_tensor *node, const np_err *e)
{
    for (uint32_t i = 0; i < x->n_missing; i++)
        if (x->missing_op[i] == node->op)
            return NP_OK;
    if (x->n_missing < RP_MISSING_SHOWN) {
        char d[160];
        snprintf(x->missing[x->n_missing], sizeof x->missing[0], "%s%s",
                 run_node_desc(node, d, sizeof d),
                 e->status == NP_ERR_INCONSISTENT ? " (its kernel does not describe it)" : "");
    }
    x->missing_op[x->n_missing++] = node->op;
    if (x->missing_status == NP_OK)
        x->missing_status = e->status;
    return NP_OK;
}

/* The kernel of compute node `node` (its fused kernel when f is given). */
static np_status rp_kernel(rp *x, const run_fuse *f, const nn_tensor *node, uint32_t *id)
{
    *id = RUN_NONE;
    run_kspec s = {.node = node,
                   .flops = f ? run_fuse_flops(f, node, false) : nn_node_flops(node),
                   .model_flops = f ? run_fuse_flops(f, node, true) : nn_node_model_flops(node)};
    np_err e = {0};
    char key[RUN_KEY_MAX];
    if (x->o.nodes_only) {
        int n = snprintf(key, sizeof key, "stage %d node %d ", x->stage, node->id);
        run_node_desc(node, key + n, sizeof key - (size_t)n);
        s.k.op = node->op;
    } else if ((f ? run_fuse_kernel(f, node, (uint32_t)x->cfg->chip.cores, &s.k, &e)
                  : run_kernel_of_node(node, x->cfg, &s.k, &e)) != NP_OK) {
        if (e.status == NP_ERR_MISSING || e.status == NP_ERR_INCONSISTENT)
            return rp_missing(x, node, &e);
        *x->err = e;
        return e.status;
    } else {
        run_kernel_key(&s.k, key, sizeof key);
    }
    uint64_t h = np_hash_bytes(key, strlen(key), 0);
    for (uint32_t it = 0, i; (i = np_hmap_next(&x->ks_index, h, &it)) != NP_HMAP_END;)
        if (strcmp(x->keys[i], key) == 0) {
            *id = i;
            return NP_OK;
        }
    if (!rp_grow((void **)&x->ks, &x->cap_ks, x->n_ks + 1, sizeof *x->ks) ||
        !rp_grow((void **)&x->keys, &x->cap_keys, x->n_ks + 1, sizeof *x->keys))
        return rp_oom(x);
    if (!(x->keys[x->n_ks] = strdup(key)) || !np_hmap_put(&x->ks_index, h, x->n_ks))
        return rp_oom(x);
    x->ks[x->n_ks] = s;
    *id = x->n_ks++;
    return NP_OK;
}

static bool rp_collective_noop(const nn_plan_entry *e) { return e->group_size <= 1; }

/* The dependencies of the chain fused into entry i's kernel (block b of class c) that lead
 * outside the chain: its head waits for them (an epilogue operand's producer). */
static np_status rp_chain_deps(rp *x, int c, int b, int i)
{
    const nn_plan_block *bl = &x->p->classes[c].blocks[b];
    int n_chain;
    const nn_tensor *const *chain = run_fuse_chain(x->fuse[c], bl->entries[i].nodes[0], &n_chain);
    if (!n_chain)
        return NP_OK;
    int member[KC_MAX_EPI + 1], n_member = 0;
    member[n_member++] = i;
    for (int k = 0; k < bl->n_entries; k++)
        for (int s = 0; s < n_chain; s++)
            if (bl->entries[k].kind == NN_PLAN_COMPUTE && bl->entries[k].nodes[0] == chain[s])
                member[n_member++] = k;
    if (!x->xdeps[c][b] &&
        !(x->xdeps[c][b] = calloc((size_t)bl->n_entries + 1, sizeof **x->xdeps[c])))
        return rp_oom(x);
    rp_deps *out = &x->xdeps[c][b][i];
    for (int m = 1; m < n_member; m++) {
        const nn_plan_entry *e = &bl->entries[member[m]];
        for (int k = 0; k < e->n_deps; k++) {
            nn_plan_dep d = e->deps[k];
            bool inside = false;
            for (int j = 0; j < n_member && (d.block < 0 || d.block == b); j++)
                inside = inside || d.entry == member[j];
            if (inside)
                continue;
            nn_plan_dep *v = realloc(out->d, (size_t)(out->n + 1) * sizeof *v);
            if (!v)
                return rp_oom(x);
            out->d = v;
            out->d[out->n++] = d;
        }
    }
    return NP_OK;
}

/* The k-th dependency of entry i of block b of class c (its own, then its chain's). */
static const nn_plan_dep *rp_dep(const rp *x, int c, int b, int i, int k)
{
    const nn_plan_entry *e = &x->p->classes[c].blocks[b].entries[i];
    if (k < e->n_deps)
        return &e->deps[k];
    const rp_deps *xd = x->xdeps && x->xdeps[c][b] ? &x->xdeps[c][b][i] : NULL;
    return xd && k - e->n_deps < xd->n ? &xd->d[k - e->n_deps] : NULL;
}

static np_status rp_pass_kernels(rp *x)
{
    const nn_plan *p = x->p;
    if (!(x->kid = calloc((size_t)p->n_classes, sizeof *x->kid)))
        return rp_oom(x);
    if (!(x->fuse = calloc((size_t)p->n_classes + 1, sizeof *x->fuse)) ||
        !(x->xdeps = calloc((size_t)p->n_classes + 1, sizeof *x->xdeps)))
        return rp_oom(x);
    for (int c = 0; c < p->n_classes; c++) {
        const nn_plan_class *cl = &p->classes[c];
        x->stage = cl->stage;
        if (!(x->kid[c] = calloc((size_t)cl->n_blocks + 1, sizeof **x->kid)) ||
            !(x->xdeps[c] = calloc((size_t)cl->n_blocks + 1, sizeof **x->xdeps)))
            return rp_oom(x);
        if (!x->o.nodes_only && run_fuse_class(p, cl, x->o.no_fuse, &x->fuse[c], x->err) != NP_OK)
            return x->err->status;
        const run_fuse *f = x->fuse[c];
        for (int b = 0; b < cl->n_blocks; b++) {
            const nn_plan_block *bl = &cl->blocks[b];
            if (!(x->kid[c][b] = malloc(((size_t)bl->n_entries + 1) * sizeof ***x->kid)))
                return rp_oom(x);
            for (int i = 0; i < bl->n_entries; i++) {
                const nn_plan_entry *e = &bl->entries[i];
                x->kid[c][b][i] = RUN_NONE;
                if (e->kind != NN_PLAN_COMPUTE || run_node_is_view(e->nodes[0]) ||
                    (f && run_fuse_kind_of(f, e->nodes[0]) != RUN_FUSE_KERNEL))
                    continue;
                if (rp_kernel(x, f, e->nodes[0], &x->kid[c][b][i]) != NP_OK ||
                    (f && rp_chain_deps(x, c, b, i) != NP_OK))
                    return x->err->status;
            }
        }
    }
    if (x->n_missing) {
        char msg[NP_ERR_MSG_MAX];
        size_t n = (size_t)snprintf(msg, sizeof msg, "%s: %" PRIu32 " op%s of the plan %s no "
                                    "kernel yet: ", p->model, x->n_missing,
                                    x->n_missing == 1 ? "" : "s",
                                    x->n_missing == 1 ? "has" : "have");
        for (uint32_t i = 0; i < x->n_missing && i < RP_MISSING_SHOWN && n < sizeof msg; i++)
            n += (size_t)snprintf(msg + n, sizeof msg - n, "%s%s", i ? "; " : "", x->missing[i]);
        if (x->n_missing > RP_MISSING_SHOWN && n < sizeof msg)
            snprintf(msg + n, sizeof msg - n, "; and %" PRIu32 " more",
                     x->n_missing - RP_MISSING_SHOWN);
        return np_err_set(x->err, x->missing_status, "%s", msg);
    }
    return NP_OK;
}

/* ---- pass 2: groupsets --------------------------------------------------------------------- */

/* A collective's groupset: its tag's axis, and whether its group is the whole axis or a
 * part of it (the tied embedding's first and last stage): nn_plan_group says which ranks. */
static uint32_t rp_gs_key(const rp *x, const nn_plan_entry *e)
{
    nn_mesh_axis a = nn_comm_tag_axis(e->tag);
    return (uint32_t)a << RP_KEY_AXIS_SHIFT | (e->group_size != x->p->mesh.size[a] ? 1u : 0u);
}

/* The groupset of key (rep: an entry with that key, run by the ranks of classes cls[]). */
static np_status rp_make_groupset(rp *x, uint32_t key, const nn_plan_entry *rep,
                                  const bool *cls)
{
    const nn_plan *p = x->p;
    static const char *const names[NN_MESH_AXES] = {"dp", "tp", "pp"};
    char name[RUN_NAME_MAX];
    if (key & 1) /* a part of the axis: named by its size ("pp-2") */
        snprintf(name, sizeof name, "%s-%d", names[key >> RP_KEY_AXIS_SHIFT], rep->group_size);
    else
        snprintf(name, sizeof name, "%s", names[key >> RP_KEY_AXIS_SHIFT]);
    uint32_t *members = NULL, n = 0, size = 0, cand = 0;
    np_status st = NP_OK;
    for (int r = 0; r < p->mesh.n_ranks && st == NP_OK; r++) {
        if (!cls[nn_plan_rank_class(p, r)])
            continue;
        cand++;
        int k = nn_plan_group(p, r, rep, x->buf, p->mesh.n_ranks);
        bool in = false;
        for (int j = 0; j < k; j++)
            in |= x->buf[j] == r;
        if (!in || (size && (uint32_t)k != size)) {
            st = np_err_set(x->err, NP_ERR_INTERNAL, "the plan's %s group of rank %d does not "
                            "hold it or differs in size", name, r);
            break;
        }
        size = (uint32_t)k;
        if (x->buf[0] != r)
            continue;
        uint32_t *v = realloc(members, ((size_t)n + size) * sizeof *v);
        if (!v) {
            st = rp_oom(x);
            break;
        }
        members = v;
        for (uint32_t j = 0; j < size; j++)
            members[n + j] = (uint32_t)x->buf[j];
        n += size;
    }
    if (st == NP_OK && n != cand)
        st = np_err_set(x->err, NP_ERR_INTERNAL, "the plan's %s groups do not partition the "
                        "ranks that use them", name);
    if (st == NP_OK)
        st = run_graph_add_groupset(x->rp->g, name, n / size, size, members, &x->gs[key], x->err);
    free(members);
    return st;
}

static np_status rp_pass_groupsets(rp *x)
{
    const nn_plan *p = x->p;
    for (size_t i = 0; i < sizeof x->gs / sizeof x->gs[0]; i++)
        x->gs[i] = RUN_NONE;
    if (!(x->buf = malloc(((size_t)p->mesh.n_ranks + 1) * sizeof *x->buf)))
        return rp_oom(x);
    const nn_plan_entry *rep[NN_MESH_AXES * 2] = {0};
    bool *cls = calloc((size_t)NN_MESH_AXES * 2 * (size_t)p->n_classes, sizeof *cls);
    if (!cls)
        return rp_oom(x);
    for (int c = 0; c < p->n_classes; c++)
        for (int b = 0; b < p->classes[c].n_blocks; b++) {
            const nn_plan_block *bl = &p->classes[c].blocks[b];
            for (int i = 0; i < bl->n_entries; i++) {
                const nn_plan_entry *e = &bl->entries[i];
                if (e->kind != NN_PLAN_COLLECTIVE || rp_collective_noop(e))
                    continue;
                uint32_t k = rp_gs_key(x, e);
                if (!rep[k])
                    rep[k] = e;
                cls[k * (size_t)p->n_classes + (size_t)c] = true;
            }
        }
    /* the pipeline (sends, receives and the bubble) */
    if (p->mesh.size[NN_MESH_PP] > 1) {
        uint32_t k = (uint32_t)NN_MESH_PP << RP_KEY_AXIS_SHIFT;
        nn_plan_entry pp = {.tag = NN_COMM_PP};
        if (!rep[k])
            rep[k] = &pp;
        for (int c = 0; c < p->n_classes; c++)
            cls[k * (size_t)p->n_classes + (size_t)c] = true;
        np_status st = rp_make_groupset(x, k, rep[k], cls + k * (size_t)p->n_classes);
        rep[k] = NULL;
        if (st != NP_OK) {
            free(cls);
            return st;
        }
        x->rp->gs_pp = x->gs[k];
    }
    np_status st = NP_OK;
    for (uint32_t k = 0; k < NN_MESH_AXES * 2 && st == NP_OK; k++)
        if (rep[k])
            st = rp_make_groupset(x, k, rep[k], cls + k * (size_t)p->n_classes);
    free(cls);
    if (st == NP_OK && x->rp->gs_pp != RUN_NONE)
        st = run_graph_set_pipeline(x->rp->g, x->rp->gs_pp, (uint32_t)p->n_micro, x->err);
    return st;
}

/* ---- pass 3: tasks ------------------------------------------------------------------------- */

static np_status rp_dep_add(rp *x, uint32_t t)
{
    for (uint32_t i = 0; i < x->n_deps; i++)
        if (x->deps[i] == t)
            return NP_OK;
    if (!rp_grow((void **)&x->deps, &x->cap_deps, x->n_deps + 1, sizeof *x->deps))
        return rp_oom(x);
    x->deps[x->n_deps++] = t;
    return NP_OK;
}

/* Collects into x->deps the tasks entry e (of block b at micro-batch mb) waits for. */
static np_status rp_collect_deps(rp *x, int c, int b, int mb, int entry)
{
    const nn_plan_class *cl = &x->p->classes[c];
    x->n_deps = 0;
    const nn_plan_dep *d;
    for (int i = 0; (d = rp_dep(x, c, b, entry, i)); i++) {
        int tb = d->block < 0 ? b : d->block;
        const nn_plan_block *bl = &cl->blocks[tb];
        bool micro = nn_plan_block_is_micro(bl->kind);
        int tmb = !micro ? 0 : mb >= 0 ? mb : x->p->n_micro - 1;
        if (d->entry < 0 || d->entry >= bl->n_entries)
            return np_err_set(x->err, NP_ERR_INTERNAL, "stage %d: a dependency on entry %d of "
                              "block %d, which has %d", cl->stage, d->entry, tb, bl->n_entries);
        uint32_t ref = x->ref[tb][(size_t)tmb * (size_t)bl->n_entries + (size_t)d->entry];
        if (ref == RP_NOTASK)
            return np_err_set(x->err, NP_ERR_INTERNAL, "stage %d: entry of block %d depends on "
                              "entry %d of block %d (micro-batch %d), which has not run before "
                              "it", cl->stage, b, d->entry, tb, tmb);
        if (ref & RP_DROPPED) {
            const uint32_t *pl = x->pool + (ref & ~RP_DROPPED);
            for (uint32_t k = 0; k < pl[0]; k++)
                if (rp_dep_add(x, pl[1 + k]) != NP_OK)
                    return x->err->status;
        } else if (rp_dep_add(x, ref) != NP_OK) {
            return x->err->status;
        }
    }
    return NP_OK;
}

/* Remembers that this instance lowered to nothing: its dependents wait for x->deps. */
static np_status rp_drop(rp *x, uint32_t *slot)
{
    if (!rp_grow((void **)&x->pool, &x->cap_pool, x->n_pool + 1 + x->n_deps, sizeof *x->pool))
        return rp_oom(x);
    *slot = RP_DROPPED | x->n_pool;
    x->pool[x->n_pool++] = x->n_deps;
    memcpy(x->pool + x->n_pool, x->deps, (size_t)x->n_deps * sizeof *x->deps);
    x->n_pool += x->n_deps;
    x->rp->views++;
    return NP_OK;
}

static coll_op rp_coll_op(nn_op op, bool *ok)
{
    *ok = true;
    switch (op) {
    case NN_OP_ALL_REDUCE: return COLL_OP_ALL_REDUCE;
    case NN_OP_REDUCE_SCATTER: return COLL_OP_REDUCE_SCATTER;
    case NN_OP_ALL_GATHER: return COLL_OP_ALL_GATHER;
    case NN_OP_BROADCAST: return COLL_OP_BROADCAST;
    case NN_OP_REDUCE: return COLL_OP_REDUCE;
    case NN_OP_ALL_TO_ALL: return COLL_OP_ALL_TO_ALL;
    default: *ok = false; return COLL_OP_ALL_REDUCE;
    }
}

run_comm_kind run_plan_comm_kind(nn_comm_tag t)
{
    switch (t) {
    case NN_COMM_TP: return RUN_COMM_TP;
    case NN_COMM_SP: return RUN_COMM_SP;
    case NN_COMM_DP: return RUN_COMM_DP;
    case NN_COMM_ZERO: return RUN_COMM_ZERO;
    case NN_COMM_PP: return RUN_COMM_PP;
    case NN_COMM_PP_SG: return RUN_COMM_PP_SG;
    default: return RUN_COMM_OTHER;
    }
}

static uint32_t rp_coll_stream(const nn_plan_entry *e, coll_op op)
{
    switch (e->tag) {
    case NN_COMM_TP:
    case NN_COMM_PP_SG: return RUN_PLAN_S_TP; /* the tp group's stream, as Megatron's
                                                     gather runs on the tp communicator */
    case NN_COMM_SP: return RUN_PLAN_S_SP;
    case NN_COMM_DP: return RUN_PLAN_S_DP;
    case NN_COMM_ZERO:
        return op == COLL_OP_REDUCE_SCATTER ? RUN_PLAN_S_ZERO_SCATTER : RUN_PLAN_S_ZERO_GATHER;
    default: return RUN_PLAN_S_PP;
    }
}

/* Bytes of collective node t in the plan's convention (nccl-tests sizes: an all-gather's
 * output, a reduce-scatter's input, else its buffer). */
static uint64_t rp_node_bytes(const nn_tensor *t)
{
    return t->op == NN_OP_REDUCE_SCATTER ? nn_nbytes(t->src[0]) : nn_nbytes(t);
}

/* The task of entry e (block b of class c at micro-batch mb) into *t; false when it lowers to
 * nothing. */
static np_status rp_task_of(rp *x, int c, int b, const nn_plan_entry *e, int entry, run_task *t,
                            bool *is_task)
{
    const nn_plan *p = x->p;
    const nn_plan_class *cl = &p->classes[c];
    *is_task = true;
    memset(t, 0, sizeof *t);
    t->deps = x->deps;
    t->n_deps = x->n_deps;
    t->peer_groupset = RUN_NONE;
    switch (e->kind) {
    case NN_PLAN_COMPUTE: {
        uint32_t k = x->kid[c][b][entry];
        if (k == RUN_NONE) {
            *is_task = false;
            return NP_OK;
        }
        t->kind = RUN_TASK_COMPUTE;
        t->kernel = k;
        if (run_plan_is_pipeline(e))
            t->flags |= RUN_TASK_PIPELINE;
        if (e->region == NN_REGION_RECOMPUTE)
            t->flags |= RUN_TASK_RECOMPUTE;
        return NP_OK;
    }
    case NN_PLAN_COLLECTIVE: {
        if (rp_collective_noop(e)) {
            *is_task = false;
            return NP_OK;
        }
        bool ok;
        t->kind = RUN_TASK_COLL;
        t->op = rp_coll_op(e->nodes[0]->op, &ok);
        if (!ok)
            return np_err_set(x->err, NP_ERR_INTERNAL, "stage %d: a collective entry of op %s",
                              cl->stage, nn_op_name(e->nodes[0]->op));
        t->comm = run_plan_comm_kind(e->tag);
        t->stream = rp_coll_stream(e, t->op);
        t->groupset = x->gs[rp_gs_key(x, e)];
        t->bytes = e->bytes;
        t->elem_bytes = (uint32_t)nn_dtype_size(e->nodes[0]->dtype);
        if (t->op == COLL_OP_BROADCAST || t->op == COLL_OP_REDUCE)
            t->root = (uint32_t)e->nodes[0]->ip[NN_COMM_IP_ARG];
        return NP_OK;
    }
    case NN_PLAN_SEND:
    case NN_PLAN_RECV: {
        bool send = e->kind == NN_PLAN_SEND;
        int pp = p->mesh.size[NN_MESH_PP];
        int target = ((cl->stage + e->peer) % pp + pp) % pp;
        t->kind = send ? RUN_TASK_SEND : RUN_TASK_RECV;
        t->comm = run_plan_comm_kind(e->tag);
        t->stream = send ? (e->peer > 0 ? RUN_PLAN_S_SEND_NEXT : RUN_PLAN_S_SEND_PREV)
                         : (e->peer < 0 ? RUN_PLAN_S_RECV_PREV : RUN_PLAN_S_RECV_NEXT);
        t->bytes = e->bytes;
        t->peer_groupset = x->rp->gs_pp;
        t->peer = target - cl->stage;
        t->tag = (uint32_t)e->match;
        if (x->rp->gs_pp == RUN_NONE || target == cl->stage)
            return np_err_set(x->err, NP_ERR_INTERNAL, "stage %d: a %s to itself", cl->stage,
                              send ? "send" : "recv");
        return NP_OK;
    }
    }
    return np_err_set(x->err, NP_ERR_INTERNAL, "an entry of unknown kind");
}

/* Whether a compute task with dependencies x->deps waits, as the step's program does with a
 * barrier, for work issued since the last such task (last): a kernel issued after it, or any
 * communication (a kernel reading what communication wrote waits for it, then a barrier). */
static bool rp_chained(const rp *x, const run_plan_task *tasks, uint32_t last)
{
    for (uint32_t i = 0; i < x->n_deps; i++)
        if (x->deps[i] >= last || tasks[x->deps[i]].kernel == RUN_NONE)
            return true;
    return false;
}

/* --tp-comm-overlap (nn_strategy.tp_comm_overlap): Transformer Engine's userbuffers overlap
 * (transformer_engine/pytorch/module/base.py, initialize_ub) as run_task.pipe_*: a GEMM that
 * waits for a sequence-parallel all-gather runs with it in tp chunks (its "ring_exchange":
 * qkv and fc1 forward, proj and fc2 dgrad), a sequence-parallel reduce-scatter that waits for
 * a GEMM runs with it in NN_TP_OVERLAP_RS_SPLITS (its "pipeline": proj and fc2 forward; after
 * a backward's last GEMM, its "bulk" reduce-scatter of qkv and fc1 dgrad beside their wgrad).
 * Of several, the latest task t waits for. */
static void rp_overlap(const rp *x, const run_plan_task *tasks, const nn_plan_entry *e,
                       run_task *t)
{
    bool gemm = t->kind == RUN_TASK_COMPUTE && e->nodes[0]->op == NN_OP_MATMUL;
    bool rs = t->kind == RUN_TASK_COLL && e->tag == NN_COMM_SP &&
              t->op == COLL_OP_REDUCE_SCATTER;
    if (!gemm && !rs)
        return;
    for (uint32_t i = 0; i < x->n_deps; i++) {
        const nn_plan_entry *d = tasks[x->deps[i]].e;
        bool pair = gemm ? d->kind == NN_PLAN_COLLECTIVE && d->tag == NN_COMM_SP &&
                               d->nodes[0]->op == NN_OP_ALL_GATHER
                         : d->kind == NN_PLAN_COMPUTE && d->nodes[0]->op == NN_OP_MATMUL;
        if (pair && (!t->pipe_chunks || x->deps[i] > t->pipe_dep)) {
            t->pipe_dep = x->deps[i];
            t->pipe_chunks = gemm ? (uint32_t)x->p->mesh.size[NN_MESH_TP]
                                  : NN_TP_OVERLAP_RS_SPLITS;
        }
    }
}

/* Adds task t of class c (from entry e at micro-batch mb) and records it; *id its number. */
static np_status rp_add(rp *x, int c, const run_task *t, const nn_plan_entry *e, int mb,
                        uint32_t *cap_tasks, uint32_t *id)
{
    run_plan *out = x->rp;
    if (run_graph_add_task(out->g, (uint32_t)c, t, id, x->err) != NP_OK)
        return x->err->status;
    if (!rp_grow((void **)&out->tasks[c], cap_tasks, *id + 1, sizeof *out->tasks[c]))
        return rp_oom(x);
    out->tasks[c][*id] = (run_plan_task){
        .e = e, .mb = mb, .kernel = t->kind == RUN_TASK_COMPUTE ? t->kernel : RUN_NONE};
    out->n_tasks[c] = *id + 1;
    return NP_OK;
}

/* --overlap-param-gather (nn_strategy.overlap_param_gather): the distributed optimizer's
 * parameter all-gathers of the step's end run at its start instead, the steady state of
 * Megatron-Core's (each bucket's gather of the previous step's update issued before the next
 * step and waited for before the first forward of its parameters: distributed/
 * param_and_grad_buffer.py, distributed_data_parallel.py's forward pre-hooks). Marks them in
 * pg[entry] of the step's end block *pg_block (NULL when there is nothing to move). */
static np_status rp_pgather_find(rp *x, const nn_plan_class *cl, int *pg_block, bool **pg)
{
    *pg = NULL;
    *pg_block = -1;
    if (!x->p->s.overlap_param_gather)
        return NP_OK;
    for (int b = 0; b < cl->n_blocks; b++) {
        const nn_plan_block *bl = &cl->blocks[b];
        if (bl->kind != NN_BLOCK_STEP_END)
            continue;
        for (int i = 0; i < bl->n_entries; i++) {
            const nn_plan_entry *e = &bl->entries[i];
            if (e->kind != NN_PLAN_COLLECTIVE || e->tag != NN_COMM_ZERO ||
                e->nodes[0]->op != NN_OP_ALL_GATHER)
                continue;
            if (!*pg && !(*pg = calloc((size_t)bl->n_entries, sizeof **pg)))
                return rp_oom(x);
            (*pg)[i] = true;
            *pg_block = b;
        }
        break;
    }
    return NP_OK;
}

/* Whether the parameter gather e holds a parameter of model layer `layer` (-1: outside the
 * layers: embeddings, final norm, head). */
static bool rp_pgather_has(const nn_plan_entry *e, int layer)
{
    for (int k = 0; k < e->n_nodes; k++)
        if (e->nodes[k]->layer == layer)
            return true;
    return false;
}

/* The issue state of one class's tasks. The host's synchronizations (nn_plan_iter's sync):
 * the last task of each engine (0 the compute engine, 1 + s stream s), what the first task on
 * each engine after a synchronization waits for, and whether a kernel is the first after
 * one. */
typedef struct rp_issue {
    uint32_t cap_tasks, last_chained, last_compute;
    uint32_t last[RUN_ENGINES], front[RUN_ENGINES], n_front;
    bool need_front[RUN_ENGINES], launch;
    int pg_block;
    bool *pg; /* parameter gathers issued at the step's start (rp_pgather_find) */
} rp_issue;

/* x->ref: per block of class cl, per instance and entry, its task (RUN_NONE until issued). */
static np_status rp_refs_alloc(rp *x, const nn_plan_class *cl)
{
    if (!(x->ref = calloc((size_t)cl->n_blocks + 1, sizeof *x->ref)))
        return rp_oom(x);
    for (int b = 0; b < cl->n_blocks; b++) {
        const nn_plan_block *bl = &cl->blocks[b];
        size_t inst = nn_plan_block_is_micro(bl->kind) ? (size_t)x->p->n_micro : 1;
        size_t n = inst * (size_t)bl->n_entries + 1;
        if (!(x->ref[b] = malloc(n * sizeof **x->ref)))
            return rp_oom(x);
        memset(x->ref[b], 0xff, n * sizeof **x->ref);
    }
    return NP_OK;
}

/* The parameter gathers issued first, waiting for nothing of this step (the gathered values
 * are the previous step's update). */
static np_status rp_issue_pgathers(rp *x, int c, const nn_plan_class *cl, rp_issue *s)
{
    for (int i = 0; s->pg && i < cl->blocks[s->pg_block].n_entries; i++) {
        if (!s->pg[i])
            continue;
        const nn_plan_entry *e = &cl->blocks[s->pg_block].entries[i];
        run_task t;
        bool is_task;
        uint32_t id;
        x->n_deps = 0;
        np_status st = rp_task_of(x, c, s->pg_block, e, i, &t, &is_task);
        if (st == NP_OK && is_task)
            st = rp_add(x, c, &t, e, -1, &s->cap_tasks, &id);
        if (st != NP_OK)
            return st;
        if (!is_task) {
            s->pg[i] = false; /* nothing to move: the step's end drops it as before */
            continue;
        }
        x->ref[s->pg_block][i] = id;
        s->last[1 + t.stream] = id;
    }
    return NP_OK;
}

/* The first micro-batch's forward of a layer waits for its parameters' gathers. */
static np_status rp_pgather_deps(rp *x, const nn_plan_class *cl, const nn_plan_block *bl,
                                 const nn_plan_entry *e, int mb, const rp_issue *s)
{
    np_status st = NP_OK;
    for (int k = 0; s->pg && mb == 0 && bl->kind == NN_BLOCK_FORWARD &&
                    e->kind == NN_PLAN_COMPUTE && k < cl->blocks[s->pg_block].n_entries &&
                    st == NP_OK; k++)
        if (s->pg[k] && rp_pgather_has(&cl->blocks[s->pg_block].entries[k], e->layer))
            st = rp_dep_add(x, x->ref[s->pg_block][k]);
    return st;
}

/* The dependencies task t (of entry e of block bl, micro-batch mb) gets from the issue
 * order: the first micro-batch's forward of a layer waits for its parameters' gathers; the
 * first task on an engine after a host synchronization for what was issued before it; a
 * communication for the last kernel (the step's program puts a barrier before it). And its
 * flags: a kernel launched by the host after a synchronization, a kernel chained behind the
 * previous one. */
static np_status rp_issue_deps(rp *x, int c, const nn_plan_class *cl, const nn_plan_block *bl,
                               const nn_plan_entry *e, int mb, run_task *t, rp_issue *s)
{
    np_status st = rp_pgather_deps(x, cl, bl, e, mb, s);
    uint32_t eng = t->kind == RUN_TASK_COMPUTE ? 0 : 1 + t->stream;
    for (uint32_t k = 0; s->need_front[eng] && k < s->n_front && st == NP_OK; k++)
        st = rp_dep_add(x, s->front[k]);
    s->need_front[eng] = false;
    if (t->kind == RUN_TASK_COMPUTE && s->launch) {
        t->flags |= RUN_TASK_LAUNCH;
        s->launch = false;
    }
    /* with a kernel launch overhead the lowering orders every kernel after the previous one
     * with a barrier, as a GPU stream does (kc_prog_opts.stream_order) */
    bool stream = (x->cfg->chip.kernel_gap_ns > 0 || x->cfg->chip.kernel_launch_ns > 0) &&
                  s->last_compute != RUN_NONE;
    if (t->kind == RUN_TASK_COMPUTE &&
        (stream || rp_chained(x, x->rp->tasks[c], s->last_chained)))
        t->flags |= RUN_TASK_CHAINED;
    if (st == NP_OK && t->kind != RUN_TASK_COMPUTE && s->last_compute != RUN_NONE)
        st = rp_dep_add(x, s->last_compute);
    return st;
}

/* Entry e's task(s) added: a blocking send's clear-to-send first, then one collective per
 * node of an entry that is no bucket (nn_plan_entry_is_bucket), in order on the stream, else
 * the one task. *id: the last. */
static np_status rp_issue_add(rp *x, int c, const nn_plan_entry *e, int mb, bool call,
                              run_task *t, rp_issue *s, uint32_t *id)
{
    np_status st = NP_OK;
    /* a blocking send waits for its receiver's clear-to-send, which the receive sends as it
     * is posted (NN_PLAN_CTS_BYTES) */
    if (call && x->p->s.p2p_blocking) {
        run_task cts = *t;
        cts.kind = t->kind == RUN_TASK_SEND ? RUN_TASK_RECV : RUN_TASK_SEND;
        cts.bytes = NN_PLAN_CTS_BYTES;
        cts.tag = t->tag | RUN_PLAN_CTS_TAG;
        if ((st = rp_add(x, c, &cts, e, mb, &s->cap_tasks, id)) != NP_OK)
            return st;
    }
    uint32_t eng = t->kind == RUN_TASK_COMPUTE ? 0 : 1 + t->stream;
    int parts = t->kind == RUN_TASK_COLL && !nn_plan_entry_is_bucket(e) ? e->n_nodes : 1;
    for (int part = 0; part < parts && st == NP_OK; part++) {
        if (parts > 1) {
            t->bytes = rp_node_bytes(e->nodes[part]);
            t->elem_bytes = (uint32_t)nn_dtype_size(e->nodes[part]->dtype);
        }
        if ((st = rp_add(x, c, t, e, mb, &s->cap_tasks, id)) != NP_OK)
            break;
        if (t->flags & RUN_TASK_CHAINED)
            s->last_chained = *id;
        if (t->kind == RUN_TASK_COMPUTE)
            s->last_compute = *id;
        s->last[eng] = *id;
    }
    return st;
}

static np_status rp_pass_tasks_class(rp *x, int c)
{
    const nn_plan *p = x->p;
    const nn_plan_class *cl = &p->classes[c];
    rp_issue s = {.last_compute = RUN_NONE, .pg_block = -1};
    for (int k = 0; k < RUN_ENGINES; k++)
        s.last[k] = RUN_NONE;
    x->n_pool = 0;
    np_status st = rp_refs_alloc(x, cl);
    if (st == NP_OK)
        st = rp_pgather_find(x, cl, &s.pg_block, &s.pg);
    if (st == NP_OK)
        st = rp_issue_pgathers(x, c, cl, &s);
    nn_plan_iter it;
    nn_plan_iter_begin(&it, p, cl);
    const nn_plan_entry *e;
    int mb;
    while (st == NP_OK && (e = nn_plan_iter_next(&it, NULL, &mb))) {
        int b = it.block, i = it.entry; /* the plan's order: the step lowering's program order */
        const nn_plan_block *bl = &cl->blocks[b];
        uint32_t *slot = &x->ref[b][(size_t)(mb < 0 ? 0 : mb) * (size_t)bl->n_entries + (size_t)i];
        if (it.sync) { /* everything issued so far is done before anything after */
            s.n_front = 0;
            for (int k = 0; k < RUN_ENGINES; k++) {
                if (s.last[k] != RUN_NONE)
                    s.front[s.n_front++] = s.last[k];
                s.need_front[k] = true;
            }
            s.launch = true;
        }
        if (b == s.pg_block && s.pg[i])
            continue; /* issued at the step's start */
        run_task t;
        bool is_task;
        if ((st = rp_collect_deps(x, c, b, mb, i)) != NP_OK ||
            (st = rp_task_of(x, c, b, e, i, &t, &is_task)) != NP_OK)
            break;
        if (!is_task) {
            /* what waits on it waits on its dependencies (the gathers' too) */
            st = rp_pgather_deps(x, cl, bl, e, mb, &s);
            if (st == NP_OK)
                st = rp_drop(x, slot);
            continue;
        }
        if ((st = rp_issue_deps(x, c, cl, bl, e, mb, &t, &s)) != NP_OK)
            break;
        t.deps = x->deps;
        t.n_deps = x->n_deps;
        if (p->s.tp_comm_overlap)
            rp_overlap(x, x->rp->tasks[c], e, &t);
        uint32_t id = 0;
        if ((st = rp_issue_add(x, c, e, mb, it.call, &t, &s, &id)) != NP_OK)
            break;
        *slot = id;
    }
    free(s.pg);
    for (int b = 0; x->ref && b < cl->n_blocks; b++)
        free(x->ref[b]);
    free(x->ref);
    x->ref = NULL;
    return st;
}

static np_status rp_pass_tasks(rp *x)
{
    const nn_plan *p = x->p;
    run_plan *out = x->rp;
    static const char *const stream_names[RUN_PLAN_S_COUNT] = {
        "tp", "sp", "dp", "zero-gather", "zero-scatter", "pp", "send-next", "recv-prev",
        "send-prev", "recv-next"};
    for (uint32_t s = 0; s < RUN_PLAN_S_COUNT; s++)
        if (run_graph_set_stream_name(out->g, s, stream_names[s], x->err) != NP_OK)
            return x->err->status;
    for (int c = 0; c < p->n_classes; c++) {
        char name[RUN_NAME_MAX];
        uint32_t id;
        snprintf(name, sizeof name, "stage %d", c);
        if (run_graph_add_class(out->g, name, &id, x->err) != NP_OK)
            return x->err->status;
    }
    for (int r = 0; r < p->mesh.n_ranks; r++)
        if (run_graph_set_class(out->g, (uint32_t)r, (uint32_t)nn_plan_rank_class(p, r),
                                x->err) != NP_OK ||
            run_graph_set_chip(out->g, (uint32_t)r, (uint32_t)p->mesh.chip[r], x->err) != NP_OK)
            return x->err->status;
    /* the kernels, now that their specs no longer move */
    out->n_kspecs = x->n_ks;
    out->kspecs = x->ks;
    x->ks = NULL;
    for (uint32_t i = 0; i < out->n_kspecs; i++) {
        double flops = (double)out->kspecs[i].model_flops, hw = (double)out->kspecs[i].flops;
        uint32_t id;
        if (run_graph_add_kernel(out->g, &(run_kernel){.key = x->keys[i], .data = &out->kspecs[i],
                                                       .flops = flops, .hw_flops = hw},
                                 &id, x->err) != NP_OK)
            return x->err->status;
        if (id != i)
            return np_err_set(x->err, NP_ERR_INTERNAL, "kernel %" PRIu32 " got id %" PRIu32, i, id);
    }
    for (int c = 0; c < p->n_classes; c++)
        if (rp_pass_tasks_class(x, c) != NP_OK)
            return x->err->status;
    return NP_OK;
}

/* ---- the whole ----------------------------------------------------------------------------- */

np_status run_plan_build(const nn_plan *p, const arch_config *cfg, const run_plan_opts *opts,
                         run_plan **out, np_err *err)
{
    *out = NULL;
    rp x = {.p = p, .cfg = cfg, .err = err, .o = opts ? *opts : (run_plan_opts){0}};
    run_plan *r = calloc(1, sizeof *r);
    if (!r)
        return rp_oom(&x);
    x.rp = r;
    r->p = p;
    r->gs_pp = RUN_NONE;
    r->n_classes = (uint32_t)p->n_classes;
    np_status st = NP_OK;
    if (!(r->tasks = calloc(r->n_classes + 1, sizeof *r->tasks)) ||
        !(r->n_tasks = calloc(r->n_classes + 1, sizeof *r->n_tasks)))
        st = rp_oom(&x);
    if (st == NP_OK)
        st = run_graph_create((uint32_t)p->mesh.n_ranks, &r->g, err);
    if (st == NP_OK)
        st = rp_pass_kernels(&x);
    if (st == NP_OK)
        st = rp_pass_groupsets(&x);
    if (st == NP_OK)
        st = rp_pass_tasks(&x);
    if (st == NP_OK)
        st = run_graph_finalize(r->g, err);
    /* pass 1's tables */
    if (x.kid)
        for (int c = 0; c < p->n_classes; c++) {
            for (int b = 0; x.kid[c] && b < p->classes[c].n_blocks; b++)
                free(x.kid[c][b]);
            free(x.kid[c]);
        }
    free(x.kid);
    for (int c = 0; x.fuse && c < p->n_classes; c++)
        run_fuse_free(x.fuse[c]);
    free(x.fuse);
    for (int c = 0; x.xdeps && c < p->n_classes; c++) {
        for (int b = 0; x.xdeps[c] && b < p->classes[c].n_blocks; b++) {
            for (int i = 0; x.xdeps[c][b] && i < p->classes[c].blocks[b].n_entries; i++)
                free(x.xdeps[c][b][i].d);
            free(x.xdeps[c][b]);
        }
        free(x.xdeps[c]);
    }
    free(x.xdeps);
    for (uint32_t i = 0; i < x.n_ks; i++)
        free(x.keys[i]);
    free(x.keys);
    free(x.ks);
    np_hmap_free(&x.ks_index);
    free(x.buf);
    free(x.pool);
    free(x.deps);
    if (st != NP_OK) {
        run_plan_free(r);
        return st;
    }
    *out = r;
    return NP_OK;
}

void run_plan_free(run_plan *plan)
{
    if (!plan)
        return;
    run_graph_free(plan->g);
    free(plan->kspecs);
    if (plan->tasks)
        for (uint32_t c = 0; c < plan->n_classes; c++)
            free(plan->tasks[c]);
    free(plan->tasks);
    free(plan->n_tasks);
    free(plan);
}

bool run_plan_is_pipeline(const nn_plan_entry *e) { return e->chunk >= 0; }
