/* dist.c — the reference distributed executor (dist.h).
 *
 * Every rank has its own storage for the class graph it runs: persistent leaves and
 * step-block nodes once, forward/backward nodes once per micro-batch. A node is computed by
 * binding its and its sources' storage to the (shared) class graph's tensors and calling the
 * reference kernel (nn_node_compute); communication ops are computed here, over the group's
 * ranks. A rank's state machine: RUNNING -> (recv without message | collective incomplete)
 * WAITING -> RUNNING ... -> DONE; the step ends when every rank is DONE, and fails when a
 * full pass moves no rank. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn_impl.h"
#include "dist.h"

typedef struct nn_rank {
    int rank, cls;
    int c[NN_MESH_AXES];
    float **pers;    /* by id: persistent leaves and step-block nodes */
    float **micro;   /* [mb * (max_id + 1) + id] */
    int s, e;        /* cursor: schedule step, entry */
    double loss_sum;
} nn_rank;

typedef struct nn_msg {
    int dst, match, mb;
    int64_t n;
    float *data;
    struct nn_msg *next;
} nn_msg;

typedef struct nn_coll {
    int match, mb, size, arrived, passed;
    int *member;                  /* ranks in group order */
    const nn_plan_entry **entry;  /* each member's entry (same shape on every member) */
    bool done;
    struct nn_coll *next;
} nn_coll;

struct nn_dist {
    const nn_plan *p;
    int n_ranks;
    nn_rank *r;
    int *max_id;     /* by class */
    nn_msg *msgs;
    nn_coll *colls;
    int64_t steps;
};

static int nn_dist_maxid(const nn_dist *d, int cls) { return d->max_id[cls]; }

void nn_dist_free(nn_dist *d)
{
    if (!d)
        return;
    for (int i = 0; d->r && i < d->n_ranks; i++) {
        nn_rank *R = &d->r[i];
        int M = nn_dist_maxid(d, R->cls) + 1;
        for (int k = 0; R->pers && k < M; k++)
            free(R->pers[k]);
        for (int k = 0; R->micro && k < M * d->p->n_micro; k++)
            free(R->micro[k]);
        free(R->pers);
        free(R->micro);
    }
    while (d->msgs) {
        nn_msg *m = d->msgs;
        d->msgs = m->next;
        free(m->data);
        free(m);
    }
    while (d->colls) {
        nn_coll *c = d->colls;
        d->colls = c->next;
        free(c->member);
        free(c->entry);
        free(c);
    }
    free(d->r);
    free(d->max_id);
    free(d);
}

np_status nn_dist_new(const nn_plan *p, nn_dist **out, np_err *err)
{
    *out = NULL;
    nn_dist *d = nn_calloc(1, sizeof *d);
    if (!d)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory creating the distributed executor");
    d->p = p;
    d->n_ranks = p->mesh.n_ranks;
    d->r = nn_calloc((size_t)d->n_ranks, sizeof *d->r);
    d->max_id = nn_calloc((size_t)p->n_classes, sizeof *d->max_id);
    if (!d->r || !d->max_id)
        goto oom;
    for (int c = 0; c < p->n_classes; c++)
        d->max_id[c] = nn_graph_max_id(p->classes[c].g);
    for (int i = 0; i < d->n_ranks; i++) {
        nn_rank *R = &d->r[i];
        R->rank = i;
        R->cls = nn_plan_rank_class(p, i);
        nn_mesh_coords(&p->mesh, i, R->c);
        size_t M = (size_t)d->max_id[R->cls] + 1;
        R->pers = nn_calloc(M, sizeof *R->pers);
        R->micro = nn_calloc(M * (size_t)p->n_micro, sizeof *R->micro);
        if (!R->pers || !R->micro)
            goto oom;
    }
    *out = d;
    return NP_OK;
oom:
    nn_dist_free(d);
    return np_err_set(err, NP_ERR_NOMEM, "out of memory creating the distributed executor");
}

/* ---- storage ---- */

static const nn_tensor *nn_alias_root(const nn_tensor *t)
{
    while (t->op != NN_OP_LEAF && (nn_op_flags(t->op) & NN_OPF_UPDATE))
        t = t->src[0];
    return t;
}

/* The storage slot of t for rank R at micro-batch mb (NULL for a shared constant). */
static float **nn_slot(nn_dist *d, nn_rank *R, const nn_tensor *t, int mb)
{
    t = nn_alias_root(t);
    int M = nn_dist_maxid(d, R->cls) + 1;
    if (mb < 0)
        mb = d->p->n_micro - 1;
    if (t->op == NN_OP_LEAF) {
        const nn_plan_leaf *l = nn_plan_leaf_of(&d->p->classes[R->cls], t);
        if (l && l->kind == NN_LEAF_CONST)
            return NULL;
        if (l && l->kind == NN_LEAF_DATA)
            return &R->micro[(size_t)mb * M + t->id];
        return &R->pers[t->id];
    }
    if (nn_plan_buffer_kind_of(t) == NN_BUFFER_STEP)
        return &R->pers[t->id];
    return &R->micro[(size_t)mb * M + t->id];
}

static float *nn_value(nn_dist *d, nn_rank *R, const nn_tensor *t, int mb)
{
    float **s = nn_slot(d, R, t, mb);
    return s ? *s : nn_alias_root(t)->data;
}

/* Allocates (or reuses) the storage of t for R at mb. */
static float *nn_alloc(nn_dist *d, nn_rank *R, const nn_tensor *t, int mb)
{
    float **s = nn_slot(d, R, t, mb);
    if (!s)
        return NULL;
    if (!*s)
        *s = nn_calloc((size_t)(nn_numel(nn_alias_root(t)) > 0 ? nn_numel(nn_alias_root(t)) : 1),
                       sizeof(float));
    return *s;
}

static void nn_round_to(float *v, int64_t n, nn_dtype dt)
{
    if (dt == NN_BF16)
        for (int64_t i = 0; i < n; i++)
            v[i] = nn_round_bf16(v[i]);
    else if (dt == NN_F16)
        for (int64_t i = 0; i < n; i++)
            v[i] = nn_round_f16(v[i]);
}

/* Chunk k of `parts` along dim of a tensor of shape (ndim, ne): copies between the whole
 * (whole, shape ne) and the chunk (part, shape ne with ne[dim] / parts). to_part: whole ->
 * part; else part -> whole. */
static void nn_chunk_copy(const int64_t *ne, int ndim, int dim, int parts, int k, float *whole,
                          float *part, bool to_part)
{
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < dim; i++)
        outer *= ne[i];
    for (int i = dim + 1; i < ndim; i++)
        inner *= ne[i];
    int64_t len = ne[dim] / parts * inner, row = ne[dim] * inner;
    for (int64_t o = 0; o < outer; o++) {
        float *w = whole + o * row + (int64_t)k * len, *pp = part + o * len;
        if (to_part)
            memcpy(pp, w, (size_t)len * sizeof(float));
        else
            memcpy(w, pp, (size_t)len * sizeof(float));
    }
}

/* ---- compute ---- */

static np_status nn_run_compute(nn_dist *d, nn_rank *R, nn_tensor *t, int mb, np_err *err)
{
    if (t->op == NN_OP_GROUP_COPY || t->op == NN_OP_SHARD_SLICE) {
        float *in = nn_value(d, R, t->src[0], mb), *out = nn_alloc(d, R, t, mb);
        if (!in || !out)
            return np_err_set(err, in ? NP_ERR_NOMEM : NP_ERR_MISSING, "rank %d: %s: %s", R->rank,
                              t->name, in ? "out of memory" : "no input values");
        if (t->op == NN_OP_GROUP_COPY) {
            memcpy(out, in, (size_t)nn_numel(t) * sizeof(float));
        } else {
            int dim = (int)t->ip[NN_COMM_IP_DIM];
            float *off = nn_value(d, R, t->src[1], mb);
            int64_t k = (int64_t)off[0] / t->ne[dim];
            nn_chunk_copy(t->src[0]->ne, t->ndim, dim, (int)t->ip[NN_COMM_IP_SIZE], (int)k, in, out, true);
        }
        return NP_OK;
    }
    float *saved[NN_MAX_SRC];
    bool ok = true;
    for (int s = 0; s < t->n_src; s++) {
        saved[s] = t->src[s]->data;
        t->src[s]->data = nn_value(d, R, t->src[s], mb);
        ok = ok && t->src[s]->data;
    }
    bool update = nn_op_flags(t->op) & NN_OPF_UPDATE;
    float *out = update ? nn_value(d, R, t, mb) : nn_alloc(d, R, t, mb);
    np_status st = NP_OK;
    if (!out) {
        st = np_err_set(err, NP_ERR_NOMEM, "rank %d (stage %d): out of memory for %s", R->rank,
                        R->cls, t->name);
    } else if (!ok) {
        st = np_err_set(err, NP_ERR_MISSING, "rank %d (stage %d): %s has no storage for its inputs",
                        R->rank, R->cls, t->name);
    } else {
        int64_t ip0 = t->ip[0];
        bool optim = t->op == NN_OP_SGD_UPDATE || t->op == NN_OP_ADAM_UPDATE || t->op == NN_OP_ADAMW_UPDATE;
        if (optim)
            t->ip[0] = d->steps;
        if (t->op == NN_OP_DROPOUT) /* this micro-batch's (and tp rank's) mask */
            t->ip[0] = (int64_t)nn_dropout_seed((uint64_t)ip0, mb < 0 ? 0 : mb,
                                                t->ip[NN_DROPOUT_IP_TP] ? R->c[NN_MESH_TP] : 0);
        t->data = out;
        t->data_is_view = true;
        st = nn_node_compute(t, err);
        if (st != NP_OK)
            np_err_prefix(err, "rank %d (stage %d)", R->rank, R->cls);
        if (st == NP_OK && t == d->p->classes[R->cls].loss && R->c[NN_MESH_TP] == 0)
            R->loss_sum += t->data[0];
        t->data = NULL;
        t->data_is_view = false;
        t->ip[0] = ip0;
    }
    for (int s = t->n_src - 1; s >= 0; s--)
        t->src[s]->data = saved[s];
    return st;
}

/* ---- communication ---- */

np_status nn_dist_collective(const nn_tensor *t, float *const *in, float *const *out, np_err *err)
{
    const nn_tensor *x = t->src[0];
    int g = (int)t->ip[NN_COMM_IP_SIZE];
    int64_t nin = nn_numel(x), nout = nn_numel(t);
    int dim = (int)t->ip[NN_COMM_IP_DIM], arg = (int)t->ip[NN_COMM_IP_ARG];
    switch (t->op) {
    case NN_OP_ALL_REDUCE:
    case NN_OP_REDUCE_SCATTER:
    case NN_OP_REDUCE: {
        bool max = t->op != NN_OP_REDUCE && arg == NN_REDUCE_MAX;
        double *acc = nn_malloc((size_t)(nin > 0 ? nin : 1) * sizeof *acc);
        float *sum = nn_malloc((size_t)(nin > 0 ? nin : 1) * sizeof *sum);
        if (!acc || !sum) {
            free(acc);
            free(sum);
            return np_err_set(err, NP_ERR_NOMEM, "out of memory in a collective");
        }
        for (int64_t i = 0; i < nin; i++)
            acc[i] = in[0][i];
        for (int j = 1; j < g; j++) /* in group order, whatever the arrival order */
            for (int64_t i = 0; i < nin; i++)
                acc[i] = max ? (in[j][i] > acc[i] ? in[j][i] : acc[i]) : acc[i] + in[j][i];
        for (int64_t i = 0; i < nin; i++)
            sum[i] = (float)acc[i];
        for (int j = 0; j < g; j++) {
            if (t->op == NN_OP_ALL_REDUCE)
                memcpy(out[j], sum, (size_t)nout * sizeof(float));
            else if (t->op == NN_OP_REDUCE && j == arg)
                memcpy(out[j], sum, (size_t)nout * sizeof(float));
            else if (t->op == NN_OP_REDUCE)
                memset(out[j], 0, (size_t)nout * sizeof(float));
            else
                nn_chunk_copy(x->ne, x->ndim, dim, g, j, sum, out[j], true);
        }
        free(acc);
        free(sum);
        break;
    }
    case NN_OP_ALL_GATHER:
        for (int j = 0; j < g; j++)
            for (int k = 0; k < g; k++)
                nn_chunk_copy(t->ne, t->ndim, dim, g, k, out[j], in[k], false);
        break;
    case NN_OP_BROADCAST:
        for (int j = 0; j < g; j++)
            memcpy(out[j], in[arg], (size_t)nout * sizeof(float));
        break;
    case NN_OP_ALL_TO_ALL: { /* part j of rank k's split dim -> rank j, at k along cat */
        int64_t pn = nin / g;
        float *part = nn_malloc((size_t)(pn > 0 ? pn : 1) * sizeof *part);
        if (!part)
            return np_err_set(err, NP_ERR_NOMEM, "out of memory in a collective");
        for (int j = 0; j < g; j++)
            for (int k = 0; k < g; k++) {
                nn_chunk_copy(x->ne, x->ndim, dim, g, j, in[k], part, true);
                nn_chunk_copy(t->ne, t->ndim, arg, g, k, out[j], part, false);
            }
        free(part);
        break;
    }
    case NN_OP_GROUP_COPY:
        for (int j = 0; j < g; j++)
            memcpy(out[j], in[j], (size_t)nout * sizeof(float));
        break;
    case NN_OP_SHARD_SLICE: /* member j's part j (its offset is j parts) */
        for (int j = 0; j < g; j++)
            nn_chunk_copy(x->ne, x->ndim, dim, g, j, in[j], out[j], true);
        break;
    default:
        return np_err_set(err, NP_ERR_INTERNAL, "%s is not a collective", nn_op_name(t->op));
    }
    for (int j = 0; j < g; j++)
        nn_round_to(out[j], nout, t->dtype);
    return NP_OK;
}

/* Performs collective c (every member arrived): each node of the entry over the group. */
static np_status nn_coll_run(nn_dist *d, nn_coll *c, np_err *err)
{
    const nn_plan_entry *e0 = c->entry[0];
    int g = c->size;
    float **in = nn_malloc((size_t)g * sizeof *in), **out = nn_malloc((size_t)g * sizeof *out);
    np_status st = NP_OK;
    if (!in || !out)
        st = np_err_set(err, NP_ERR_NOMEM, "out of memory in a collective");
    for (int q = 0; q < e0->n_nodes && st == NP_OK; q++) {
        const nn_tensor *t = e0->nodes[q];
        bool ok = true;
        for (int j = 0; j < g; j++) {
            nn_rank *R = &d->r[c->member[j]];
            const nn_tensor *tj = c->entry[j]->nodes[q];
            in[j] = nn_value(d, R, tj->src[0], c->mb);
            out[j] = nn_alloc(d, R, tj, c->mb);
            ok = ok && in[j] && out[j];
        }
        bool oom = false;
        for (int j = 0; j < g; j++)
            oom = oom || !out[j];
        if (!ok)
            st = np_err_set(err, oom ? NP_ERR_NOMEM : NP_ERR_MISSING,
                            "collective %s (match %d): %s", t->name, c->match,
                            oom ? "out of memory" : "a member has no input");
        else if (t->ip[NN_COMM_IP_SIZE] != g)
            st = np_err_set(err, NP_ERR_INTERNAL, "collective %s: a group of %d for size %lld",
                            t->name, g, (long long)t->ip[NN_COMM_IP_SIZE]);
        else
            st = nn_dist_collective(t, in, out, err);
    }
    free(in);
    free(out);
    c->done = st == NP_OK;
    return st;
}

typedef enum { NN_STEP_DONE, NN_STEP_WAIT, NN_STEP_FAIL } nn_step_result;

static nn_step_result nn_run_entry(nn_dist *d, nn_rank *R, const nn_plan_entry *e, int mb, np_err *err)
{
    const nn_plan *p = d->p;
    switch (e->kind) {
    case NN_PLAN_COMPUTE:
        return nn_run_compute(d, R, e->nodes[0], mb, err) == NP_OK ? NN_STEP_DONE : NN_STEP_FAIL;
    case NN_PLAN_SEND: {
        const nn_tensor *t = e->nodes[0];
        float *v = nn_value(d, R, t->src[0], mb);
        nn_msg *m = nn_calloc(1, sizeof *m);
        int64_t n = nn_numel(t);
        if (!v || !m || !(m->data = nn_malloc((size_t)(n > 0 ? n : 1) * sizeof(float)))) {
            free(m);
            np_err_set(err, v ? NP_ERR_NOMEM : NP_ERR_MISSING, "rank %d: send %s failed", R->rank, t->name);
            return NN_STEP_FAIL;
        }
        memcpy(m->data, v, (size_t)n * sizeof(float));
        m->dst = nn_plan_peer(p, R->rank, e);
        m->match = e->match;
        m->mb = mb;
        m->n = n;
        nn_msg **tail = &d->msgs;
        while (*tail)
            tail = &(*tail)->next;
        *tail = m;
        return NN_STEP_DONE;
    }
    case NN_PLAN_RECV: {
        for (nn_msg **pm = &d->msgs; *pm; pm = &(*pm)->next) {
            nn_msg *m = *pm;
            if (m->dst != R->rank || m->match != e->match || m->mb != mb)
                continue;
            const nn_tensor *t = e->nodes[0];
            float *out = nn_alloc(d, R, t, mb);
            if (!out) {
                np_err_set(err, NP_ERR_NOMEM, "rank %d: out of memory receiving %s", R->rank, t->name);
                return NN_STEP_FAIL;
            }
            if (m->n != nn_numel(t)) {
                np_err_set(err, NP_ERR_INTERNAL, "rank %d: recv %s: %lld values for %lld", R->rank,
                           t->name, (long long)m->n, (long long)nn_numel(t));
                return NN_STEP_FAIL;
            }
            memcpy(out, m->data, (size_t)m->n * sizeof(float));
            *pm = m->next;
            free(m->data);
            free(m);
            return NN_STEP_DONE;
        }
        return NN_STEP_WAIT;
    }
    case NN_PLAN_COLLECTIVE: {
        /* an instance is (match, micro-batch, group): the groups of one entry on the ranks of
         * other coordinates share its match */
        int leader = nn_plan_group(p, R->rank, e, &leader, 1) > 0 ? leader : R->rank;
        nn_coll **pc = &d->colls, *c = NULL;
        for (; *pc; pc = &(*pc)->next)
            if ((*pc)->match == e->match && (*pc)->mb == mb && (*pc)->member[0] == leader) {
                c = *pc;
                break;
            }
        if (!c) {
            c = nn_calloc(1, sizeof *c);
            int *members = nn_malloc(((size_t)p->mesh.n_ranks + 1) * sizeof *members);
            if (!c || !members) {
                free(c);
                free(members);
                np_err_set(err, NP_ERR_NOMEM, "out of memory in a collective");
                return NN_STEP_FAIL;
            }
            c->size = nn_plan_group(p, R->rank, e, members, p->mesh.n_ranks);
            c->member = members;
            c->entry = nn_calloc((size_t)c->size, sizeof *c->entry);
            if (!c->entry) {
                free(members);
                free(c);
                np_err_set(err, NP_ERR_NOMEM, "out of memory in a collective");
                return NN_STEP_FAIL;
            }
            c->match = e->match;
            c->mb = mb;
            c->next = d->colls;
            d->colls = c;
        }
        int pos = -1;
        for (int j = 0; j < c->size; j++)
            if (c->member[j] == R->rank)
                pos = j;
        if (pos < 0) {
            np_err_set(err, NP_ERR_INTERNAL, "rank %d is not in the group of %s", R->rank,
                       e->nodes[0]->name);
            return NN_STEP_FAIL;
        }
        if (!c->entry[pos]) {
            c->entry[pos] = e;
            c->arrived++;
            if (c->arrived == c->size && nn_coll_run(d, c, err) != NP_OK)
                return NN_STEP_FAIL;
        }
        if (!c->done)
            return NN_STEP_WAIT;
        if (++c->passed == c->size) { /* every member is past it: forget it */
            for (nn_coll **q = &d->colls; *q; q = &(*q)->next)
                if (*q == c) {
                    *q = c->next;
                    break;
                }
            free(c->member);
            free(c->entry);
            free(c);
        }
        return NN_STEP_DONE;
    }
    }
    return NN_STEP_FAIL;
}

/* ---- parameters ---- */

/* Global flat index of element i of rank (tp coordinate tc, dp coordinate dc)'s piece of a
 * parameter of global shape (ndim, ne) sharded by sh, or -1 for padding. local_n is the
 * piece's element count. */
static int64_t nn_shard_global(const nn_plan_shard *sh, int ndim, const int64_t *ne, int tp,
                               int tc, int dp, int dc, int64_t local_n_tp, int64_t i)
{
    if (sh->zero_shard) {
        int64_t per = (local_n_tp + dp - 1) / dp;
        i += (int64_t)dc * per;
        if (i >= local_n_tp)
            return -1;
    }
    if (sh->tp_dim < 0)
        return i;
    int d = sh->tp_dim;
    int64_t full = d == 0 && sh->tp_pad_rows ? sh->tp_pad_rows : ne[d];
    int64_t loc[NN_MAX_DIMS] = {0}, idx[NN_MAX_DIMS] = {0};
    for (int k = 0; k < ndim; k++)
        loc[k] = k == d ? full / tp : ne[k];
    for (int k = ndim - 1; k >= 0; k--) {
        idx[k] = i % loc[k];
        i /= loc[k];
    }
    int64_t bl = loc[d] / sh->tp_blocks, b = idx[d] / bl, w = idx[d] % bl;
    idx[d] = b * (full / sh->tp_blocks) + (int64_t)tc * bl + w;
    if (idx[d] >= ne[d])
        return -1;
    int64_t g = 0;
    for (int k = 0; k < ndim; k++)
        g = g * ne[k] + idx[k];
    return g;
}

static int64_t nn_tp_local_numel(const nn_plan_shard *sh, const nn_tensor *src, int tp)
{
    int64_t n = 1;
    for (int k = 0; k < src->ndim; k++) {
        int64_t v = src->ne[k];
        if (k == sh->tp_dim)
            v = (k == 0 && sh->tp_pad_rows ? sh->tp_pad_rows : v) / tp;
        n *= v;
    }
    return n;
}

np_status nn_dist_load_params(nn_dist *d, const nn_graph *src, np_err *err)
{
    const nn_plan *p = d->p;
    int tp = p->mesh.size[NN_MESH_TP], dp = p->mesh.size[NN_MESH_DP];
    for (int i = 0; i < d->n_ranks; i++) {
        nn_rank *R = &d->r[i];
        const nn_plan_class *c = &p->classes[R->cls];
        for (int k = 0; k < c->n_leaves; k++) {
            const nn_plan_leaf *l = &c->leaves[k];
            float *v = nn_alloc(d, R, l->t, -1);
            if (l->kind == NN_LEAF_CONST || l->kind == NN_LEAF_DATA)
                continue;
            if (!v)
                return np_err_set(err, NP_ERR_NOMEM, "out of memory loading parameters");
            int64_t n = nn_numel(l->t);
            if (l->kind == NN_LEAF_RANKVALUE) {
                v[0] = (float)nn_plan_rank_value(p, R->rank, l);
                continue;
            }
            if (l->kind == NN_LEAF_OPTSTATE || l->kind == NN_LEAF_GRADBUF) {
                memset(v, 0, (size_t)n * sizeof(float));
                continue;
            }
            const nn_tensor *g = nn_graph_find(src, l->source);
            if (!g || g->op != NN_OP_LEAF || !g->data)
                return np_err_set(err, NP_ERR_MISSING, "parameter %s: %s", l->source,
                                  g ? "has no values" : "not in the source graph");
            int64_t ntp = nn_tp_local_numel(&l->shard, g, tp);
            for (int64_t e = 0; e < n; e++) {
                int64_t gi = nn_shard_global(&l->shard, g->ndim, g->ne, tp, R->c[NN_MESH_TP], dp,
                                             R->c[NN_MESH_DP], ntp, e);
                v[e] = gi < 0 ? 0.0f : g->data[gi];
            }
            nn_round_to(v, n, l->t->dtype);
        }
    }
    return NP_OK;
}

float *nn_dist_values(nn_dist *d, int rank, const nn_tensor *t, int mb)
{
    if (rank < 0 || rank >= d->n_ranks)
        return NULL;
    float **s = nn_slot(d, &d->r[rank], t, mb);
    return s ? *s : NULL;
}

np_status nn_dist_param(const nn_dist *d, const char *name, float *out, int64_t n, np_err *err)
{
    const nn_plan *p = d->p;
    int tp = p->mesh.size[NN_MESH_TP], dp = p->mesh.size[NN_MESH_DP];
    nn_plan_leaf_kind want = p->compute == NN_F32 ? NN_LEAF_PARAM : NN_LEAF_MASTER;
    bool found = false;
    for (int i = 0; i < d->n_ranks; i++) {
        nn_rank *R = &d->r[i];
        const nn_plan_class *c = &p->classes[R->cls];
        for (int k = 0; k < c->n_leaves; k++) {
            const nn_plan_leaf *l = &c->leaves[k];
            if (l->kind != want || strcmp(l->source, name) != 0 || !R->pers[l->t->id])
                continue;
            int64_t total = 1;
            for (int q = 0; q < l->src_ndim; q++)
                total *= l->src_ne[q];
            if (total != n)
                return np_err_set(err, NP_ERR_INCONSISTENT, "parameter %s has %lld elements, not %lld",
                                  name, (long long)total, (long long)n);
            nn_tensor shape = {.ndim = l->src_ndim};
            memcpy(shape.ne, l->src_ne, sizeof shape.ne);
            int64_t ntp = nn_tp_local_numel(&l->shard, &shape, tp);
            const float *v = R->pers[l->t->id];
            for (int64_t e = 0; e < nn_numel(l->t); e++) {
                int64_t gi = nn_shard_global(&l->shard, l->src_ndim, l->src_ne, tp,
                                             R->c[NN_MESH_TP], dp, R->c[NN_MESH_DP], ntp, e);
                if (gi >= 0)
                    out[gi] = v[e];
            }
            found = true;
        }
    }
    return found ? NP_OK : np_err_set(err, NP_ERR_MISSING, "no rank holds parameter %s", name);
}

/* ---- a step ---- */

static np_status nn_load_data(nn_dist *d, nn_rank *R, const float *input, const float *labels,
                              np_err *err)
{
    const nn_plan *p = d->p;
    const nn_plan_class *c = &p->classes[R->cls];
    int64_t per_rank = p->batch / p->mesh.size[NN_MESH_DP];
    for (int k = 0; k < c->n_leaves; k++) {
        const nn_plan_leaf *l = &c->leaves[k];
        if (l->kind != NN_LEAF_DATA)
            continue;
        const float *src = strcmp(l->source, "labels") == 0 ? labels : input;
        if (!src)
            return np_err_set(err, NP_ERR_MISSING, "no %s given for the step", l->source);
        int64_t n = nn_numel(l->t), row = n / p->microbatch;
        for (int mb = 0; mb < p->n_micro; mb++) {
            float *v = nn_alloc(d, R, l->t, mb);
            if (!v)
                return np_err_set(err, NP_ERR_NOMEM, "out of memory loading the batch");
            int64_t first = R->c[NN_MESH_DP] * per_rank + (int64_t)mb * p->microbatch;
            memcpy(v, src + first * row, (size_t)n * sizeof(float));
        }
    }
    return NP_OK;
}

static np_status nn_deadlock(nn_dist *d, np_err *err)
{
    char msg[NP_ERR_MSG_MAX];
    size_t k = (size_t)snprintf(msg, sizeof msg, "the ranks wait on each other:");
    for (int i = 0; i < d->n_ranks && k < sizeof msg; i++) {
        nn_rank *R = &d->r[i];
        const nn_plan_class *c = &d->p->classes[R->cls];
        if (R->s >= c->n_sched)
            continue;
        const nn_plan_block *b = &c->blocks[c->sched[R->s].block];
        const nn_plan_entry *e = &b->entries[R->e];
        k += (size_t)snprintf(msg + k, sizeof msg - k, " rank %d (stage %d) at %s %s (match %d, micro-batch %d);",
                              R->rank, R->cls, nn_op_name(e->nodes[0]->op), e->nodes[0]->name,
                              e->match, c->sched[R->s].mb);
    }
    return np_err_set(err, NP_ERR_DEADLOCK, "%s", msg);
}

np_status nn_dist_step(nn_dist *d, const float *input, const float *labels, double *loss,
                       np_err *err)
{
    const nn_plan *p = d->p;
    /* micro-batch buffers live for one step: the last step's stay readable (nn_dist_values) */
    for (int i = 0; i < d->n_ranks; i++) {
        nn_rank *R = &d->r[i];
        int M = nn_dist_maxid(d, R->cls) + 1;
        for (int k = 0; k < M * p->n_micro; k++) {
            free(R->micro[k]);
            R->micro[k] = NULL;
        }
    }
    for (int i = 0; i < d->n_ranks; i++) {
        nn_rank *R = &d->r[i];
        R->s = R->e = 0;
        R->loss_sum = 0;
        if (nn_load_data(d, R, input, labels, err) != NP_OK)
            return err->status;
    }
    for (;;) {
        bool moved = false, all_done = true;
        for (int i = 0; i < d->n_ranks; i++) {
            nn_rank *R = &d->r[i];
            const nn_plan_class *c = &p->classes[R->cls];
            while (R->s < c->n_sched) {
                const nn_plan_sched *s = &c->sched[R->s];
                const nn_plan_block *b = &c->blocks[s->block];
                if (R->e >= b->n_entries) {
                    R->s++;
                    R->e = 0;
                    continue;
                }
                const nn_plan_entry *e = &b->entries[R->e];
                if (!nn_plan_entry_runs(e, s->mb, p->n_micro)) {
                    R->e++;
                    continue;
                }
                nn_step_result r = nn_run_entry(d, R, e, s->mb, err);
                if (r == NN_STEP_FAIL)
                    return err->status;
                if (r == NN_STEP_WAIT)
                    break;
                R->e++;
                moved = true;
            }
            all_done = all_done && R->s >= c->n_sched;
        }
        if (all_done)
            break;
        if (!moved)
            return nn_deadlock(d, err);
    }
    double sum = 0;
    for (int i = 0; i < d->n_ranks; i++)
        sum += d->r[i].loss_sum;
    *loss = sum / ((double)p->mesh.size[NN_MESH_DP] * p->n_micro);
    d->steps++;
    return NP_OK;
}
