/* plan_tp.c — the forward rewrite of a strategy: the single-device forward graph G0 (one
 * micro-batch) becomes one local graph per pipeline stage, with tensor- and
 * sequence-parallel layouts, ZeRO-3 parameter gathers and pipeline sends/receives.
 *
 * Layout propagation (as GSPMD does it, specialised to one tp axis). Every value has a
 * layout over the tp group — replicated (R), split along one dim (S, possibly per block:
 * the fused q,k,v output is three blocks, each split), or partial sums (P) — and every
 * G0 node, in creation order, becomes local nodes whose shapes are one rank's:
 *
 *   matmul(R, param)     the param is split by columns (Megatron's column-parallel
 *                        linear; per block when slices of the output follow) and the input
 *                        gets Megatron's f (group_copy: its gradient is all-reduced); not when
 *                        the output would be gathered at once (a softmax, norm or topk over
 *                        its columns, unequal slices of them: a MoE router, MLA's
 *                        down-projections): that param stays replicated
 *   matmul(S on K, param) the param is split by rows (row-parallel): the output is P
 *   matmul(S, S) batched the heads stay split (attention)
 *   attention(S, S, S)   the fused op (op_attention.c) over split heads: each rank its own
 *   embedding(param, ids) the table is split by rows (vocabulary-parallel, padded to a
 *                        multiple of tp): P
 *   cross_entropy(S)     vocabulary-parallel loss: all-reduced max, sum of exp and target
 *                        logit (Megatron's three all-reduces)
 *   reshape, permute, slice, broadcast, elementwise ops keep or move the split
 *   P into anything that is not linear: all-reduce (Megatron's g) — or, with sequence
 *                        parallelism, reduce-scatter along the sequence, and the
 *                        sequence-split value is all-gathered before the next
 *                        column-parallel matmul (all-gather's gradient is reduce-scatter)
 *   a replicated parameter broadcast against split values (norm gains in the sequence
 *                        region) is marked: its gradient is a partial sum over tp, summed
 *                        once per step
 *   any other op         its inputs are made replicated and it runs replicated
 *
 * Pipeline: every G0 node belongs to a model chunk (plan_sched.c); a value read in another
 * chunk is sent there (send in the producer's graph, recv in the consumer's). Parameters
 * become leaves of the stages that use them (a tied embedding: of the first and the last).
 * ZeRO-3 keeps a 1/dp shard of each parameter and all-gathers it before use.
 *
 * Every local node is checked against its G0 node: the local shape must be the global
 * shape with the split dim divided by tp.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan_impl.h"

static const nn_lay NN_LAYOUT_R = {NN_LAY_R, -1, 1};
static const nn_lay NN_LAYOUT_P = {NN_LAY_P, -1, 1};

static nn_lay nn_lay_s(int dim, int64_t blocks)
{
    return (nn_lay){NN_LAY_S, dim, blocks};
}

static bool nn_lay_eq(nn_lay a, nn_lay b)
{
    return a.kind == b.kind && (a.kind != NN_LAY_S || (a.dim == b.dim && a.blocks == b.blocks));
}

static nn_graph *nn_pb_graph(nn_pb *pb, int chunk)
{
    return pb->stages[nn_pb_stage(pb, chunk)].g;
}

/* Nodes made for G0 node x in chunk c: x's scope and layer, chunk c, forward region. */
static nn_graph *nn_pb_ctx(nn_pb *pb, int c, const nn_tensor *x)
{
    nn_graph *g = nn_pb_graph(pb, c);
    nn_graph_set_scope(g, "%s", x->scope);
    nn_graph_set_layer(g, x->layer);
    nn_graph_set_chunk(g, c);
    nn_graph_set_region(g, NN_REGION_FORWARD);
    return g;
}

static np_status nn_pb_fail_graph(nn_pb *pb, int c)
{
    np_status st = nn_graph_status(nn_pb_graph(pb, c), pb->err);
    return st != NP_OK ? st : np_err_set(pb->err, NP_ERR_INTERNAL, "plan: a node failed");
}

nn_plan_leaf *nn_pb_leaf(nn_pb *pb, int stage, nn_plan_leaf_kind kind, nn_tensor *t)
{
    nn_pstage *st = &pb->stages[stage];
    if (!t)
        return NULL;
    if (st->n_leaves == st->cap_leaves) {
        int cap = st->cap_leaves ? 2 * st->cap_leaves : 64;
        nn_plan_leaf *v = nn_realloc(st->leaves, (size_t)cap * sizeof *v);
        if (!v)
            return NULL;
        st->leaves = v;
        st->cap_leaves = cap;
    }
    nn_plan_leaf *l = &st->leaves[st->n_leaves++];
    memset(l, 0, sizeof *l);
    l->kind = kind;
    l->t = t;
    l->shard.tp_dim = -1;
    l->shard.tp_blocks = 1;
    return l;
}

nn_tensor *nn_pb_rank_value(nn_pb *pb, int stage, int64_t scale)
{
    nn_pstage *st = &pb->stages[stage];
    for (int i = 0; i < st->n_rank_values; i++)
        if (st->rank_scale[i] == scale)
            return st->rank_value[i];
    if (st->n_rank_values == NN_PB_RANK_VALUES) {
        np_err_set(pb->err, NP_ERR_INTERNAL, "plan: too many rank-dependent offsets");
        return NULL;
    }
    char scope[NN_NAME_MAX], name[48];
    int layer = nn_graph_layer(st->g);
    snprintf(scope, sizeof scope, "%s", nn_graph_scope(st->g));
    nn_graph_set_scope(st->g, "%s", "");
    nn_graph_set_layer(st->g, -1);
    snprintf(name, sizeof name, "tp_rank_x%lld", (long long)scale);
    nn_tensor *t = nn_const(st->g, name, NN_I32, 0, NULL);
    nn_graph_set_scope(st->g, "%s", scope);
    nn_graph_set_layer(st->g, layer);
    nn_plan_leaf *l = nn_pb_leaf(pb, stage, NN_LEAF_RANKVALUE, t);
    if (!l) {
        np_err_set(pb->err, NP_ERR_NOMEM, "out of memory building the plan");
        return NULL;
    }
    l->axis = NN_MESH_TP;
    l->scale = scale;
    st->rank_value[st->n_rank_values] = t;
    st->rank_scale[st->n_rank_values++] = scale;
    return t;
}

/* ---- conversions between layouts ---- */

static int nn_pb_sp_tag(const nn_pb *pb)
{
    return pb->sp ? NN_COMM_SP : NN_COMM_TP;
}

/* All-gathers t (local, layout S(dim, blocks)) into its replicated value. */
static nn_tensor *nn_pb_gather(nn_pb *pb, nn_graph *g, nn_tensor *t, nn_lay lay, int tag)
{
    if (lay.blocks == 1)
        return nn_all_gather(g, t, tag, pb->tp, lay.dim);
    if (t->ndim + 1 > NN_MAX_DIMS) {
        nn_graph_fail(g, NP_ERR_INTERNAL, "plan: %s has too many dims to gather per block", t->name);
        return NULL;
    }
    int64_t ne[NN_MAX_DIMS], full[NN_MAX_DIMS];
    int nd = 0;
    for (int d = 0; d < t->ndim; d++) {
        full[d] = t->ne[d] * (d == lay.dim ? pb->tp : 1);
        if (d == lay.dim) {
            ne[nd++] = lay.blocks;
            ne[nd++] = t->ne[d] / lay.blocks;
        } else {
            ne[nd++] = t->ne[d];
        }
    }
    nn_tensor *r = nn_reshape(g, t, nd, ne);
    r = nn_all_gather(g, r, tag, pb->tp, lay.dim + 1);
    return nn_reshape(g, r, t->ndim, full);
}

static nn_pv *nn_pv_new(nn_pb *pb, int chunk, nn_tensor *t, nn_lay lay)
{
    nn_pv *v = nn_calloc(1, sizeof *v);
    if (!v) {
        np_err_set(pb->err, NP_ERR_NOMEM, "out of memory building the plan");
        return NULL;
    }
    v->chunk = chunk;
    v->t = t;
    v->lay = lay;
    return v;
}

/* Value v (of G0 node x) as replicated. */
static nn_tensor *nn_pv_r(nn_pb *pb, nn_pv *v, const nn_tensor *x)
{
    if (v->lay.kind == NN_LAY_R)
        return v->t;
    if (v->as_r)
        return v->as_r;
    nn_graph *g = nn_pb_ctx(pb, v->chunk, x);
    if (v->lay.kind == NN_LAY_P)
        v->as_r = nn_all_reduce(g, v->t, NN_COMM_TP, pb->tp, NN_REDUCE_SUM);
    else
        v->as_r = nn_pb_gather(pb, g, v->t, v->lay, nn_pb_sp_tag(pb));
    return v->as_r;
}

/* With sequence parallelism, the sequence dim of a [b, S, ...] value; else -1. */
static int nn_pb_seq_dim(const nn_pb *pb, const nn_tensor *x)
{
    if (!pb->sp || x->ndim < 3 || x->ne[0] != pb->plan->microbatch || x->ne[1] != pb->plan->seq)
        return -1;
    return x->ne[1] % pb->tp == 0 ? 1 : -1;
}

/* Value v as layout want (R or S), converting as needed. */
static nn_tensor *nn_pv_as(nn_pb *pb, nn_pv *v, const nn_tensor *x, nn_lay want)
{
    if (nn_lay_eq(v->lay, want))
        return v->t;
    if (want.kind == NN_LAY_R)
        return nn_pv_r(pb, v, x);
    if (want.kind != NN_LAY_S) {
        np_err_set(pb->err, NP_ERR_INTERNAL, "plan: cannot make %s partial", x->name);
        return NULL;
    }
    if (v->as_s && nn_lay_eq(v->as_s_lay, want))
        return v->as_s;
    nn_tensor *r;
    if (v->lay.kind == NN_LAY_P && want.blocks == 1) {
        nn_graph *g = nn_pb_ctx(pb, v->chunk, x);
        r = nn_reduce_scatter(g, v->t, nn_pb_sp_tag(pb), pb->tp, want.dim);
    } else {
        nn_tensor *full = nn_pv_r(pb, v, x);
        if (!full || want.blocks != 1) {
            np_err_set(pb->err, NP_ERR_INTERNAL, "plan: cannot split %s per block", x->name);
            return NULL;
        }
        nn_graph *g = nn_pb_ctx(pb, v->chunk, x);
        nn_tensor *off = nn_pb_rank_value(pb, nn_pb_stage(pb, v->chunk), x->ne[want.dim] / pb->tp);
        r = nn_shard_slice(g, full, off, nn_pb_sp_tag(pb), pb->tp, want.dim);
    }
    if (!v->as_s) {
        v->as_s = r;
        v->as_s_lay = want;
    }
    return r;
}

/* P resolved the way its consumer needs: the sequence split (sp) or replicated. */
static nn_lay nn_pb_p_target(const nn_pb *pb, const nn_tensor *x)
{
    int sd = nn_pb_seq_dim(pb, x);
    return sd >= 0 ? nn_lay_s(sd, 1) : NN_LAYOUT_R;
}

/* ---- parameters ---- */

static int64_t nn_ceil_div(int64_t a, int64_t b)
{
    return (a + b - 1) / b;
}

/* Whether param p can take layout lay (the split dim divides). */
static bool nn_pb_param_fits(const nn_pb *pb, const nn_pparam *p, nn_lay lay, bool pad_rows)
{
    if (lay.kind == NN_LAY_R)
        return true;
    if (lay.kind != NN_LAY_S || lay.dim < 0 || lay.dim >= p->g0->ndim || pb->tp < 2)
        return false;
    int64_t n = p->g0->ne[lay.dim];
    if (pad_rows && lay.dim == 0)
        return lay.blocks == 1;
    return n % (lay.blocks * pb->tp) == 0;
}

static void nn_pb_param_decide(nn_pb *pb, nn_pparam *p, nn_lay lay, bool pad_rows)
{
    p->decided = true;
    p->lay = lay;
    for (int d = 0; d < p->g0->ndim; d++)
        p->local_ne[d] = p->g0->ne[d];
    if (lay.kind == NN_LAY_S) {
        int64_t n = p->g0->ne[lay.dim];
        if (pad_rows && lay.dim == 0) {
            p->pad_rows = nn_ceil_div(n, pb->tp) * pb->tp;
            n = p->pad_rows;
        }
        p->local_ne[lay.dim] = n / pb->tp;
    }
}

static int64_t nn_pb_param_local_numel(const nn_pparam *p)
{
    int64_t n = 1;
    for (int d = 0; d < p->g0->ndim; d++)
        n *= p->local_ne[d];
    return n;
}

/* The stage leaf of p (created on first use in that stage). */
static nn_tensor *nn_pb_param_leaf(nn_pb *pb, nn_pparam *p, int chunk)
{
    int st = nn_pb_stage(pb, chunk);
    if (p->leaf[st])
        return p->leaf[st];
    nn_graph *g = pb->stages[st].g;
    char scope[NN_NAME_MAX];
    snprintf(scope, sizeof scope, "%s", nn_graph_scope(g));
    nn_graph_set_scope(g, "%s", "");
    nn_tensor *t;
    int64_t n = nn_pb_param_local_numel(p);
    if (pb->zero == 3)
        t = nn_param(g, p->g0->name, p->work, 1, (int64_t[]){nn_ceil_div(n, pb->dp)});
    else
        t = nn_param(g, p->g0->name, p->work, p->g0->ndim, p->local_ne);
    nn_graph_set_scope(g, "%s", scope);
    if (!t)
        return NULL;
    t->layer = p->g0->layer;
    nn_plan_leaf *l = nn_pb_leaf(pb, st, NN_LEAF_PARAM, t);
    if (!l) {
        np_err_set(pb->err, NP_ERR_NOMEM, "out of memory building the plan");
        return NULL;
    }
    snprintf(l->source, sizeof l->source, "%s", p->g0->name);
    l->src_ndim = p->g0->ndim;
    memcpy(l->src_ne, p->g0->ne, sizeof l->src_ne);
    l->shard.tp_dim = p->lay.kind == NN_LAY_S ? p->lay.dim : -1;
    l->shard.tp_blocks = p->lay.kind == NN_LAY_S ? p->lay.blocks : 1;
    l->shard.tp_pad_rows = p->pad_rows;
    l->shard.zero_shard = pb->zero == 3;
    p->leaf[st] = t;
    return t;
}

/* The value p computes with in chunk c (the leaf; ZeRO-3: all-gathered from the shard),
 * in its decided layout. ctx is the consuming G0 node. */
static nn_tensor *nn_pb_param_value(nn_pb *pb, nn_pparam *p, int c, const nn_tensor *ctx)
{
    nn_tensor *leaf = nn_pb_param_leaf(pb, p, c);
    if (!leaf || pb->zero != 3)
        return leaf;
    if (p->gathered[c])
        return p->gathered[c];
    nn_graph *g = nn_pb_ctx(pb, c, ctx);
    int64_t n = nn_pb_param_local_numel(p);
    nn_tensor *full = nn_all_gather(g, leaf, NN_COMM_ZERO, pb->dp, 0);
    if (full && full->ne[0] != n)
        full = nn_slice(g, full, 0, 0, n);
    p->gathered[c] = nn_reshape(g, full, p->g0->ndim, p->local_ne);
    return p->gathered[c];
}

/* p's value in layout want (deciding p's layout if it is still open). */
static nn_tensor *nn_pb_param_as(nn_pb *pb, nn_pparam *p, int c, const nn_tensor *ctx, nn_lay want,
                                 bool pad_rows)
{
    if (!p->decided)
        nn_pb_param_decide(pb, p, nn_pb_param_fits(pb, p, want, pad_rows) ? want : NN_LAYOUT_R,
                           pad_rows);
    nn_tensor *v = nn_pb_param_value(pb, p, c, ctx);
    if (!v || nn_lay_eq(p->lay, want))
        return v;
    nn_graph *g = nn_pb_ctx(pb, c, ctx);
    if (want.kind == NN_LAY_R)
        return nn_pb_gather(pb, g, v, p->lay, NN_COMM_TP);
    if (p->lay.kind == NN_LAY_R && want.kind == NN_LAY_S && want.blocks == 1) {
        nn_tensor *off = nn_pb_rank_value(pb, nn_pb_stage(pb, c), p->g0->ne[want.dim] / pb->tp);
        return nn_shard_slice(g, v, off, NN_COMM_TP, pb->tp, want.dim);
    }
    np_err_set(pb->err, NP_ERR_INTERNAL, "plan: parameter %s cannot change layout", p->g0->name);
    return NULL;
}

/* ---- sources of a node ---- */

typedef struct nn_src {
    const nn_tensor *x0; /* the G0 source */
    nn_pparam *p;        /* a parameter (through its cast) */
    nn_pv *v;            /* a computed value */
    nn_tensor *leaf;     /* an input or constant */
} nn_src;

/* The local copy of a G0 input or constant leaf in stage st. */
static nn_tensor *nn_pb_input(nn_pb *pb, int st, const nn_tensor *x)
{
    nn_pstage *s = &pb->stages[st];
    if (s->inputs[x->id])
        return s->inputs[x->id];
    char scope[NN_NAME_MAX];
    snprintf(scope, sizeof scope, "%s", nn_graph_scope(s->g));
    nn_graph_set_scope(s->g, "%s", "");
    nn_tensor *t = nn_leaf(s->g, x->name, x->role, x->dtype, x->ndim, x->ne);
    nn_graph_set_scope(s->g, "%s", scope);
    if (!t)
        return NULL;
    nn_plan_leaf *l = nn_pb_leaf(pb, st, x->role == NN_ROLE_INPUT ? NN_LEAF_DATA : NN_LEAF_CONST, t);
    if (!l) {
        np_err_set(pb->err, NP_ERR_NOMEM, "out of memory building the plan");
        return NULL;
    }
    if (x->role == NN_ROLE_INPUT)
        snprintf(l->source, sizeof l->source, "%s", x == pb->m0.labels ? "labels" : "input");
    else if (x->data && !nn_tensor_set(t, x->data)) {
        np_err_set(pb->err, NP_ERR_NOMEM, "out of memory building the plan");
        return NULL;
    }
    s->inputs[x->id] = t;
    return t;
}

bool nn_pb_scatters(const nn_pb *pb, const nn_tensor *t, nn_lay lay)
{
    /* Megatron-LM (p2p_communication.py): scatter/gather unless sequence parallelism already
     * splits the boundary tensor, and not when its elements do not divide into tp parts */
    return pb->s->pp_scatter_gather && pb->tp > 1 && !pb->sp && lay.kind != NN_LAY_S &&
           nn_numel(t) % pb->tp == 0;
}

nn_tensor *nn_pb_scatter(nn_pb *pb, int stage, nn_graph *g, nn_tensor *t, nn_lay lay)
{
    int64_t n = nn_numel(t);
    nn_tensor *flat = t->ndim == 1 ? t : nn_reshape(g, t, 1, (int64_t[]){n});
    if (lay.kind == NN_LAY_P) /* partial sums: the reduce-scatter half of their all-reduce */
        return nn_reduce_scatter(g, flat, NN_COMM_PP_SG, pb->tp, 0);
    nn_tensor *off = nn_pb_rank_value(pb, stage, n / pb->tp);
    return off ? nn_shard_slice(g, flat, off, NN_COMM_PP_SG, pb->tp, 0) : NULL;
}

/* The value of G0 node x in chunk c: its own, or received from its chunk. */
static nn_pv *nn_pb_value_in(nn_pb *pb, const nn_tensor *x, int c)
{
    nn_pv *home = pb->val[x->id];
    if (!home) {
        np_err_set(pb->err, NP_ERR_INTERNAL, "plan: %s has no value yet", x->name);
        return NULL;
    }
    for (nn_pv *v = home; v; v = v->next)
        if (v->chunk == c)
            return v;
    if (home->chunk > c) {
        np_err_set(pb->err, NP_ERR_INTERNAL,
                   "plan: %s (chunk %d) is read by an earlier chunk %d: the model's layers are "
                   "not in order", x->name, home->chunk, c);
        return NULL;
    }
    int from = nn_pb_stage(pb, home->chunk), to = nn_pb_stage(pb, c);
    bool scattered = nn_pb_scatters(pb, home->t, home->lay);
    nn_graph *gf = nn_pb_ctx(pb, home->chunk, x);
    nn_tensor *part = scattered ? nn_pb_scatter(pb, from, gf, home->t, home->lay) : home->t;
    nn_tensor *send = nn_send(gf, part, NN_COMM_PP, (to - from + pb->pp) % pb->pp);
    nn_graph *gt = nn_pb_ctx(pb, c, x);
    nn_graph_set_layer(gt, -1); /* a chunk's input: always kept (recomputation starts from it) */
    nn_tensor *recv = send ? nn_recv(gt, part->ndim, part->ne, part->dtype, NN_COMM_PP,
                                     (from - to + pb->pp) % pb->pp) : NULL;
    nn_tensor *value = recv;
    if (scattered && recv) /* Megatron's gather_split_1d_tensor, then the view to the shape */
        value = nn_reshape(gt, nn_all_gather(gt, recv, NN_COMM_PP_SG, pb->tp, 0),
                           home->t->ndim, home->t->ne);
    if (!send || !value) {
        if (pb->err->status == NP_OK)
            nn_pb_fail_graph(pb, send ? c : home->chunk);
        return NULL;
    }
    send->is_output = true;
    send->ip[NN_COMM_IP_MATCH] = recv->ip[NN_COMM_IP_MATCH] = ++pb->next_match;
    if (pb->n_bounds == pb->cap_bounds) {
        int cap = pb->cap_bounds ? 2 * pb->cap_bounds : 16;
        nn_pbound *b = nn_realloc(pb->bounds, (size_t)cap * sizeof *b);
        if (!b) {
            np_err_set(pb->err, NP_ERR_NOMEM, "out of memory building the plan");
            return NULL;
        }
        pb->bounds = b;
        pb->cap_bounds = cap;
    }
    pb->bounds[pb->n_bounds++] = (nn_pbound){send, recv, value, home->chunk, c,
                                             pb->needs_grad[x->id], scattered, NULL};
    nn_pv *v = nn_pv_new(pb, c, value, scattered ? NN_LAYOUT_R : home->lay);
    if (!v)
        return NULL;
    v->next = home->next;
    home->next = v;
    return v;
}

static bool nn_pb_source(nn_pb *pb, const nn_tensor *x, int i, int c, nn_src *s)
{
    const nn_tensor *x0 = x->src[i];
    memset(s, 0, sizeof *s);
    s->x0 = x0;
    if (pb->param[x0->id]) {
        s->p = pb->param[x0->id];
        return true;
    }
    if (x0->op == NN_OP_LEAF) {
        s->leaf = nn_pb_input(pb, nn_pb_stage(pb, c), x0);
        return s->leaf != NULL;
    }
    s->v = nn_pb_value_in(pb, x0, c);
    return s->v != NULL;
}

/* Source s as layout want. */
static nn_tensor *nn_src_as(nn_pb *pb, nn_src *s, int c, const nn_tensor *x, nn_lay want)
{
    if (s->p)
        return nn_pb_param_as(pb, s->p, c, x, want, false);
    if (s->leaf) {
        if (want.kind == NN_LAY_R)
            return s->leaf;
        nn_graph *g = nn_pb_ctx(pb, c, x);
        nn_tensor *off = nn_pb_rank_value(pb, nn_pb_stage(pb, c), s->leaf->ne[want.dim] / pb->tp);
        return nn_shard_slice(g, s->leaf, off, NN_COMM_TP, pb->tp, want.dim);
    }
    return nn_pv_as(pb, s->v, s->x0, want);
}

/* The layout source s has now (R for an undecided parameter and for leaves). */
static nn_lay nn_src_lay(const nn_src *s)
{
    if (s->p)
        return s->p->decided ? s->p->lay : NN_LAYOUT_R;
    return s->v ? s->v->lay : NN_LAYOUT_R;
}

static bool nn_src_needs_grad(const nn_pb *pb, const nn_src *s)
{
    return pb->needs_grad[s->x0->id];
}

/* ---- emitting the local node ---- */

/* Records G0 node x's local value t with layout lay, after checking t's shape against x's. */
static np_status nn_pb_emit(nn_pb *pb, const nn_tensor *x, int c, nn_tensor *t, nn_lay lay)
{
    if (!t)
        return nn_pb_fail_graph(pb, c);
    bool ok = t->ndim == x->ndim && t->dtype == x->dtype;
    for (int d = 0; ok && d < x->ndim; d++) {
        if (lay.kind == NN_LAY_S && d == lay.dim)
            ok = t->ne[d] * pb->tp == x->ne[d] ||
                 (pb->vocab_shard && x->ne[d] == pb->vocab && t->ne[d] == pb->vocab_shard);
        else
            ok = t->ne[d] == x->ne[d];
    }
    if (!ok) {
        char a[96], b[96];
        return np_err_set(pb->err, NP_ERR_INTERNAL,
                          "plan: the local %s is %s %s for %s %s (layout %d on dim %d)", t->name,
                          nn_shape_str(t, a, sizeof a), nn_dtype_name(t->dtype),
                          nn_shape_str(x, b, sizeof b), nn_dtype_name(x->dtype), lay.kind, lay.dim);
    }
    nn_pv *v = nn_pv_new(pb, c, t, lay);
    if (!v)
        return pb->err->status;
    t->attn_core = x->attn_core;
    pb->val[x->id] = v;
    return NP_OK;
}

/* x with every source replicated (ops the rewrite does not split). */
static np_status nn_pb_replicated(nn_pb *pb, const nn_tensor *x, int c, nn_src *srcs)
{
    nn_tensor *loc[NN_MAX_SRC];
    for (int i = 0; i < x->n_src; i++)
        if (!(loc[i] = nn_src_as(pb, &srcs[i], c, x, NN_LAYOUT_R)))
            return nn_pb_fail_graph(pb, c);
    nn_graph *g = nn_pb_ctx(pb, c, x);
    return nn_pb_emit(pb, x, c, nn_node(g, x->op, x->n_src, loc, x->ip, x->fp), NN_LAYOUT_R);
}

/* A source that is P: resolved to the layout its consumer can read (once per value). */
static void nn_pb_resolve_p(nn_pb *pb, nn_src *s)
{
    if (!s->v || s->v->lay.kind != NN_LAY_P)
        return;
    if (!s->v->resolved) {
        nn_lay want = nn_pb_p_target(pb, s->x0);
        nn_tensor *t = nn_pv_as(pb, s->v, s->x0, want);
        if (!t)
            return;
        s->v->resolved = nn_pv_new(pb, s->v->chunk, t, want);
        if (!s->v->resolved)
            return;
    }
    s->v = s->v->resolved;
}

/* ---- elementwise ops (with numpy broadcasting) ---- */

static bool nn_op_linear_in_p(nn_op op)
{
    return op == NN_OP_SCALE || op == NN_OP_CAST;
}

static np_status nn_pb_elementwise(nn_pb *pb, const nn_tensor *x, int c, nn_src *srcs)
{
    int nd = x->ndim, n = x->n_src;
    bool all_p = true;
    for (int i = 0; i < n; i++)
        all_p = all_p && srcs[i].v && srcs[i].v->lay.kind == NN_LAY_P;
    nn_graph *g;
    if (all_p && (x->op == NN_OP_ADD || x->op == NN_OP_SUB || nn_op_linear_in_p(x->op))) {
        nn_tensor *loc[NN_MAX_SRC];
        for (int i = 0; i < n; i++)
            loc[i] = srcs[i].v->t;
        g = nn_pb_ctx(pb, c, x);
        return nn_pb_emit(pb, x, c, nn_node(g, x->op, n, loc, x->ip, x->fp), NN_LAYOUT_P);
    }
    for (int i = 0; i < n; i++)
        nn_pb_resolve_p(pb, &srcs[i]);
    if (pb->err->status != NP_OK)
        return pb->err->status;
    /* the split of the output: every split input must agree */
    int od = -1;
    int64_t blocks = 1;
    bool conflict = false;
    for (int i = 0; i < n; i++) {
        nn_lay l = nn_src_lay(&srcs[i]);
        if (l.kind != NN_LAY_S)
            continue;
        int d = l.dim + (nd - srcs[i].x0->ndim);
        if (od < 0) {
            od = d;
            blocks = l.blocks;
        } else if (od != d || blocks != l.blocks) {
            conflict = true;
        }
    }
    if (od >= 0 && x->op == NN_OP_CAUSAL_MASK && od >= nd - 2)
        conflict = true;
    /* the other inputs: split the same way (aligned) or broadcast along the split dim */
    nn_lay want[NN_MAX_SRC];
    for (int i = 0; i < n && od >= 0 && !conflict; i++) {
        const nn_tensor *s0 = srcs[i].x0;
        nn_lay l = nn_src_lay(&srcs[i]);
        int j = od - (nd - s0->ndim);
        bool aligned = j >= 0 && s0->ne[j] == x->ne[od] && x->ne[od] > 1;
        if (l.kind == NN_LAY_S) {
            want[i] = l;
        } else if (aligned) {
            want[i] = nn_lay_s(j, blocks);
            if (srcs[i].p && !srcs[i].p->decided && !nn_pb_param_fits(pb, srcs[i].p, want[i], false))
                conflict = true;
            if ((srcs[i].p && srcs[i].p->decided) || !srcs[i].p)
                conflict = conflict || blocks != 1 || s0->ne[j] % pb->tp;
        } else {
            want[i] = NN_LAYOUT_R;
        }
    }
    if (od < 0 || conflict)
        return nn_pb_replicated(pb, x, c, srcs);
    nn_tensor *loc[NN_MAX_SRC];
    for (int i = 0; i < n; i++) {
        if (!(loc[i] = nn_src_as(pb, &srcs[i], c, x, want[i])))
            return nn_pb_fail_graph(pb, c);
        if (want[i].kind != NN_LAY_R || !nn_src_needs_grad(pb, &srcs[i]))
            continue;
        /* replicated and broadcast against split values: its gradient is a partial sum */
        if (srcs[i].p) {
            srcs[i].p->partial_tp = true;
        } else if (srcs[i].v) {
            if (!srcs[i].v->copied) {
                g = nn_pb_ctx(pb, srcs[i].v->chunk, srcs[i].x0);
                srcs[i].v->copied = nn_group_copy(g, loc[i], NN_COMM_TP, pb->tp);
            }
            loc[i] = srcs[i].v->copied;
        }
    }
    int64_t ip[NN_MAX_IPARAMS];
    memcpy(ip, x->ip, sizeof ip);
    if (x->op == NN_OP_DROPOUT) /* a split tensor: each tp rank draws its own mask (nn.h) */
        ip[NN_DROPOUT_IP_TP] = 1;
    g = nn_pb_ctx(pb, c, x);
    return nn_pb_emit(pb, x, c, nn_node(g, x->op, n, loc, ip, x->fp), nn_lay_s(od, blocks));
}

/* ---- matmul ---- */

/* Whether the consumers of G0 node y are k slices along its last dim that cut it into k
 * equal parts (the fused q,k,v projection), following single-consumer reshapes, casts and
 * bias additions. Returns k, or 1. */
static int64_t nn_pb_column_blocks(const nn_pb *pb, const nn_tensor *y)
{
    for (;;) {
        int nu = pb->use_start[y->id + 1] - pb->use_start[y->id];
        if (nu != 1)
            break;
        const nn_tensor *u = nn_graph_node(pb->g0, pb->uses[pb->use_start[y->id]]);
        bool bias = u->op == NN_OP_ADD && u->n_src == 2 && pb->param[u->src[1]->id] &&
                    u->src[1]->ndim == 1;
        if (u->op != NN_OP_RESHAPE && u->op != NN_OP_CAST && !bias)
            break;
        if (u->op == NN_OP_RESHAPE && u->ne[u->ndim - 1] != y->ne[y->ndim - 1])
            break;
        y = u;
    }
    int a = pb->use_start[y->id], b = pb->use_start[y->id + 1];
    int64_t last = y->ne[y->ndim - 1], k = b - a, covered = 0;
    if (k < 2)
        return 1;
    for (int i = a; i < b; i++) {
        const nn_tensor *u = nn_graph_node(pb->g0, pb->uses[i]);
        if (u->op != NN_OP_SLICE || u->ip[0] != y->ndim - 1 || (u->ip[2] - u->ip[1]) * k != last ||
            u->ip[1] % (last / k))
            return 1;
        covered += u->ip[2] - u->ip[1];
    }
    return covered == last ? k : 1;
}

/* Whether the output of G0 matmul y would be gathered at once if its weight were split by
 * columns: its consumer (through single-use casts) is an op over the whole last dim (softmax,
 * a norm, topk: a MoE router's logits, MLA's q_a_proj) or slices of it in unequal parts
 * (MLA's kv_a_proj_with_mqa: the latent and the rope key). Such a weight stays replicated: a
 * gathered value's gradient would be reduce-scattered, summing the replicated consumers' tp
 * identical gradients. */
static bool nn_pb_column_gathered(const nn_pb *pb, const nn_tensor *y)
{
    for (;;) {
        int a = pb->use_start[y->id], b = pb->use_start[y->id + 1];
        if (b - a < 1)
            return false;
        const nn_tensor *u = nn_graph_node(pb->g0, pb->uses[a]);
        if (b - a == 1 && u->op == NN_OP_CAST) {
            y = u;
            continue;
        }
        for (int i = a; i < b; i++) {
            u = nn_graph_node(pb->g0, pb->uses[i]);
            if (u->op == NN_OP_SOFTMAX || u->op == NN_OP_LOG_SOFTMAX || u->op == NN_OP_RMSNORM ||
                u->op == NN_OP_LAYERNORM || u->op == NN_OP_TOPK)
                return true;
        }
        return nn_pb_column_blocks(pb, y) == 1 && b - a > 1 &&
               nn_graph_node(pb->g0, pb->uses[a])->op == NN_OP_SLICE;
    }
}

static np_status nn_pb_matmul(nn_pb *pb, const nn_tensor *x, int c, nn_src *srcs)
{
    nn_src *A = &srcs[0], *B = &srcs[1];
    const nn_tensor *a0 = A->x0, *b0 = B->x0;
    int ka = a0->ndim - 1, kb = b0->ndim - 2, nb = b0->ndim - 1, ma = a0->ndim - 2;
    nn_pb_resolve_p(pb, A);
    nn_pb_resolve_p(pb, B);
    if (pb->err->status != NP_OK)
        return pb->err->status;
    nn_lay la = nn_src_lay(A);
    if (B->p && !B->p->decided && b0->ndim == 2 && pb->tp > 1) {
        nn_lay want = NN_LAYOUT_R;
        if (la.kind == NN_LAY_S && la.dim == ka)
            want = nn_lay_s(0, la.blocks); /* row-parallel */
        else if (!nn_pb_column_gathered(pb, x))
            want = nn_lay_s(1, nn_pb_column_blocks(pb, x)); /* column-parallel */
        if (!nn_pb_param_fits(pb, B->p, want, false))
            want = NN_LAYOUT_R;
        nn_pb_param_decide(pb, B->p, want, false);
    }
    nn_lay lb = nn_src_lay(B);
    nn_tensor *ta = NULL, *tb = NULL;
    nn_lay out;
    nn_graph *g;
    int nd = x->ndim;
    if (la.kind == NN_LAY_S && la.dim == ka && lb.kind == NN_LAY_S && lb.dim == kb &&
        la.blocks == lb.blocks) { /* row-parallel: partial sums */
        ta = nn_src_as(pb, A, c, x, la);
        tb = nn_src_as(pb, B, c, x, lb);
        out = NN_LAYOUT_P;
    } else if (lb.kind == NN_LAY_S && lb.dim == nb && la.kind != NN_LAY_S) {
        /* column-parallel: a replicated input, Megatron's f on it */
        tb = nn_src_as(pb, B, c, x, lb);
        ta = nn_src_as(pb, A, c, x, NN_LAYOUT_R);
        if (ta && nn_src_needs_grad(pb, A) && A->v) {
            if (!A->v->copied) {
                g = nn_pb_ctx(pb, A->v->chunk, a0);
                A->v->copied = nn_group_copy(g, ta, NN_COMM_TP, pb->tp);
            }
            ta = A->v->copied;
        }
        out = nn_lay_s(nd - 1, lb.blocks);
    } else if (lb.kind == NN_LAY_S && lb.dim == nb && la.kind == NN_LAY_S) {
        /* column-parallel with a split input (sequence parallelism): gather it first; the
         * gather's gradient (reduce-scatter) sums the partial input gradients */
        ta = nn_src_as(pb, A, c, x, NN_LAYOUT_R);
        tb = nn_src_as(pb, B, c, x, lb);
        out = nn_lay_s(nd - 1, lb.blocks);
    } else if (la.kind == NN_LAY_S && lb.kind == NN_LAY_S && la.dim < ma && lb.dim < kb &&
               la.dim + (nd - a0->ndim) == lb.dim + (nd - b0->ndim) && la.blocks == lb.blocks &&
               a0->ne[la.dim] == b0->ne[lb.dim]) { /* batched, split along a batch dim */
        ta = nn_src_as(pb, A, c, x, la);
        tb = nn_src_as(pb, B, c, x, lb);
        out = nn_lay_s(la.dim + (nd - a0->ndim), la.blocks);
    } else if (la.kind == NN_LAY_S && la.dim != ka && lb.kind == NN_LAY_R &&
               (la.dim == ma || b0->ndim == 2)) { /* rows split, replicated weight */
        ta = nn_src_as(pb, A, c, x, la);
        tb = nn_src_as(pb, B, c, x, NN_LAYOUT_R);
        if (tb && nn_src_needs_grad(pb, B)) {
            if (B->p)
                B->p->partial_tp = true;
            else if (B->v) {
                if (!B->v->copied) {
                    g = nn_pb_ctx(pb, B->v->chunk, b0);
                    B->v->copied = nn_group_copy(g, tb, NN_COMM_TP, pb->tp);
                }
                tb = B->v->copied;
            }
        }
        out = nn_lay_s(la.dim + (nd - a0->ndim), la.blocks);
    } else {
        return nn_pb_replicated(pb, x, c, srcs);
    }
    if (!ta || !tb)
        return nn_pb_fail_graph(pb, c);
    g = nn_pb_ctx(pb, c, x);
    return nn_pb_emit(pb, x, c, nn_matmul(g, ta, tb), out);
}

/* ---- shape ops ---- */

/* Where a split of dim d (per `blocks`) of shape in lands in shape out: fills *res and
 * returns true when the owned elements form a split of one output dim. */
static bool nn_pb_reshape_split(const nn_pb *pb, const int64_t *in, int nin, const int64_t *out,
                                int nout, nn_lay l, nn_lay *res)
{
    int i = 0, j = 0;
    while (i < nin || j < nout) {
        int i0 = i, j0 = j;
        int64_t pi = i < nin ? in[i++] : 1, pj = j < nout ? out[j++] : 1;
        while (pi != pj) {
            if (pi < pj && i < nin)
                pi *= in[i++];
            else if (pj < pi && j < nout)
                pj *= out[j++];
            else
                return false;
        }
        /* absorb trailing size-1 dims into this group */
        if (l.dim < i0 || l.dim >= i)
            continue;
        int64_t inner = 1;
        for (int k = l.dim + 1; k < i; k++)
            inner *= in[k];
        int64_t L = in[l.dim] / l.blocks * inner;
        for (int e = j0; e < j; e++) {
            int64_t ie = 1;
            for (int k = e + 1; k < j; k++)
                ie *= out[k];
            if (L % ie)
                continue;
            int64_t q = L / ie;
            if (q && out[e] % q == 0 && q % pb->tp == 0) {
                *res = nn_lay_s(e, out[e] / q);
                return true;
            }
        }
        return false;
    }
    return false;
}

/* A shape attribute (ip[0..5], ndim in ip[6]) with dim d divided by tp. */
static void nn_pb_local_shape_ip(const nn_pb *pb, const nn_tensor *x, int d, int64_t *ip)
{
    memcpy(ip, x->ip, sizeof x->ip);
    if (d >= 0)
        ip[d] /= pb->tp;
}

static np_status nn_pb_reshape(nn_pb *pb, const nn_tensor *x, int c, nn_src *srcs)
{
    nn_lay l = nn_src_lay(&srcs[0]);
    nn_lay out = l;
    if (l.kind == NN_LAY_S &&
        !nn_pb_reshape_split(pb, srcs[0].x0->ne, srcs[0].x0->ndim, x->ne, x->ndim, l, &out))
        return nn_pb_replicated(pb, x, c, srcs);
    nn_tensor *t = nn_src_as(pb, &srcs[0], c, x, l);
    if (!t)
        return nn_pb_fail_graph(pb, c);
    int64_t ne[NN_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++)
        ne[d] = x->ne[d] / (out.kind == NN_LAY_S && d == out.dim ? pb->tp : 1);
    if (out.kind == NN_LAY_S && pb->vocab_shard && x->ne[out.dim] == pb->vocab)
        ne[out.dim] = pb->vocab_shard;
    return nn_pb_emit(pb, x, c, nn_reshape(nn_pb_ctx(pb, c, x), t, x->ndim, ne), out);
}

static np_status nn_pb_permute(nn_pb *pb, const nn_tensor *x, int c, nn_src *srcs)
{
    nn_lay l = nn_src_lay(&srcs[0]), out = l;
    if (l.kind == NN_LAY_S)
        for (int e = 0; e < x->ndim; e++)
            if (x->ip[e] == l.dim)
                out.dim = e;
    nn_tensor *t = nn_src_as(pb, &srcs[0], c, x, l);
    if (!t)
        return nn_pb_fail_graph(pb, c);
    nn_graph *g = nn_pb_ctx(pb, c, x);
    return nn_pb_emit(pb, x, c, nn_node1(g, NN_OP_PERMUTE, t, x->ip, NULL), out);
}

static np_status nn_pb_slice_pad(nn_pb *pb, const nn_tensor *x, int c, nn_src *srcs)
{
    nn_lay l = nn_src_lay(&srcs[0]), out = l;
    int64_t ip[NN_MAX_IPARAMS];
    memcpy(ip, x->ip, sizeof ip);
    if (l.kind == NN_LAY_P)
        return nn_pb_replicated(pb, x, c, srcs);
    if (l.kind == NN_LAY_S && l.dim == x->ip[0]) {
        int64_t n = srcs[0].x0->ne[l.dim], bs = n / l.blocks;
        if (x->op != NN_OP_SLICE || x->ip[1] % bs || x->ip[2] % bs)
            return nn_pb_replicated(pb, x, c, srcs);
        out.blocks = (x->ip[2] - x->ip[1]) / bs;
        ip[1] = x->ip[1] / pb->tp;
        ip[2] = x->ip[2] / pb->tp;
    }
    nn_tensor *t = nn_src_as(pb, &srcs[0], c, x, l);
    if (!t)
        return nn_pb_fail_graph(pb, c);
    nn_graph *g = nn_pb_ctx(pb, c, x);
    return nn_pb_emit(pb, x, c, nn_node1(g, x->op, t, ip, NULL), out);
}

static np_status nn_pb_concat(nn_pb *pb, const nn_tensor *x, int c, nn_src *srcs)
{
    nn_lay l = nn_src_lay(&srcs[0]);
    bool same = l.kind == NN_LAY_S && l.dim != x->ip[0];
    for (int i = 1; i < x->n_src && same; i++)
        same = nn_lay_eq(nn_src_lay(&srcs[i]), l);
    if (!same)
        return nn_pb_replicated(pb, x, c, srcs);
    nn_tensor *loc[NN_MAX_SRC];
    for (int i = 0; i < x->n_src; i++)
        if (!(loc[i] = nn_src_as(pb, &srcs[i], c, x, l)))
            return nn_pb_fail_graph(pb, c);
    nn_graph *g = nn_pb_ctx(pb, c, x);
    return nn_pb_emit(pb, x, c, nn_node(g, NN_OP_CONCAT, x->n_src, loc, x->ip, NULL), l);
}

static np_status nn_pb_bcast(nn_pb *pb, const nn_tensor *x, int c, nn_src *srcs)
{
    nn_lay l = nn_src_lay(&srcs[0]), out = l;
    const nn_tensor *s0 = srcs[0].x0;
    int64_t ip[NN_MAX_IPARAMS];
    memcpy(ip, x->ip, sizeof ip);
    if (l.kind == NN_LAY_S) {
        int d = l.dim + (x->ndim - s0->ndim);
        if (d < 0 || d >= x->ndim || x->ne[d] != s0->ne[l.dim]) {
            if (x->op != NN_OP_SUM_TO)
                return nn_pb_replicated(pb, x, c, srcs);
            out = NN_LAYOUT_P; /* the split dim is summed away */
        } else {
            out.dim = d;
            nn_pb_local_shape_ip(pb, x, d, ip);
        }
    }
    nn_tensor *t = nn_src_as(pb, &srcs[0], c, x, l);
    if (!t)
        return nn_pb_fail_graph(pb, c);
    nn_graph *g = nn_pb_ctx(pb, c, x);
    return nn_pb_emit(pb, x, c, nn_node1(g, x->op, t, ip, NULL), out);
}

static np_status nn_pb_reduce(nn_pb *pb, const nn_tensor *x, int c, nn_src *srcs)
{
    nn_lay l = nn_src_lay(&srcs[0]), out = l;
    int axis = (int)x->ip[0];
    bool linear = x->op != NN_OP_REDUCE_MAX;
    if (l.kind == NN_LAY_P && !(linear && x->op == NN_OP_REDUCE_SUM))
        nn_pb_resolve_p(pb, &srcs[0]), l = out = nn_src_lay(&srcs[0]);
    if (l.kind == NN_LAY_S) {
        if (l.dim == axis) {
            if (x->op != NN_OP_REDUCE_SUM)
                return nn_pb_replicated(pb, x, c, srcs);
            out = NN_LAYOUT_P;
        } else if (!x->ip[1] && axis < l.dim) {
            out.dim = l.dim - 1;
        }
    }
    nn_tensor *t = nn_src_as(pb, &srcs[0], c, x, l);
    if (!t)
        return nn_pb_fail_graph(pb, c);
    nn_graph *g = nn_pb_ctx(pb, c, x);
    return nn_pb_emit(pb, x, c, nn_node1(g, x->op, t, x->ip, NULL), out);
}

/* softmax, log_softmax, layer/RMS norm, rope: the last dim (rope: the last two) whole. */
static np_status nn_pb_rowwise(nn_pb *pb, const nn_tensor *x, int c, nn_src *srcs)
{
    nn_pb_resolve_p(pb, &srcs[0]);
    if (pb->err->status != NP_OK)
        return pb->err->status;
    nn_lay l = nn_src_lay(&srcs[0]);
    int whole = x->op == NN_OP_ROPE ? 2 : 1;
    if (l.kind == NN_LAY_S && l.dim >= x->ndim - whole)
        return nn_pb_replicated(pb, x, c, srcs);
    nn_tensor *loc[NN_MAX_SRC];
    if (!(loc[0] = nn_src_as(pb, &srcs[0], c, x, l)))
        return nn_pb_fail_graph(pb, c);
    for (int i = 1; i < x->n_src; i++) { /* gamma, beta: replicated */
        if (!(loc[i] = nn_src_as(pb, &srcs[i], c, x, NN_LAYOUT_R)))
            return nn_pb_fail_graph(pb, c);
        if (l.kind == NN_LAY_S && srcs[i].p)
            srcs[i].p->partial_tp = true;
    }
    nn_graph *g = nn_pb_ctx(pb, c, x);
    return nn_pb_emit(pb, x, c, nn_node(g, x->op, x->n_src, loc, x->ip, x->fp), l);
}

/* ---- fused attention ---- */

/* attention(q, k, v [B, H, S, Dh]) (op_attention.c): with q, k and v split alike along B or
 * H (the heads of a column-parallel projection, as the composite's batched matmuls keep
 * them) each rank attends over its own heads and the output keeps the split; otherwise it
 * runs replicated. S and Dh are never split: a query sees every key of its head. */
static np_status nn_pb_attention(nn_pb *pb, const nn_tensor *x, int c, nn_src *srcs)
{
    for (int i = 0; i < x->n_src; i++)
        nn_pb_resolve_p(pb, &srcs[i]);
    if (pb->err->status != NP_OK)
        return pb->err->status;
    nn_lay l = nn_src_lay(&srcs[0]);
    bool split = l.kind == NN_LAY_S && l.dim < x->ndim - 2 && x->n_src == 3;
    for (int i = 1; split && i < x->n_src; i++)
        split = nn_lay_eq(nn_src_lay(&srcs[i]), l);
    if (!split)
        return nn_pb_replicated(pb, x, c, srcs);
    nn_tensor *loc[3];
    for (int i = 0; i < 3; i++)
        if (!(loc[i] = nn_src_as(pb, &srcs[i], c, x, l)))
            return nn_pb_fail_graph(pb, c);
    nn_graph *g = nn_pb_ctx(pb, c, x);
    return nn_pb_emit(pb, x, c, nn_node(g, x->op, 3, loc, x->ip, x->fp), l);
}

/* ---- embedding and loss ---- */

static np_status nn_pb_embedding(nn_pb *pb, const nn_tensor *x, int c, nn_src *srcs)
{
    nn_src *T = &srcs[0];
    if (x->n_src != 2 || !T->p || pb->tp < 2 || (T->p->decided && !nn_lay_eq(T->p->lay, nn_lay_s(0, 1))))
        return nn_pb_replicated(pb, x, c, srcs);
    nn_tensor *tab = nn_pb_param_as(pb, T->p, c, x, nn_lay_s(0, 1), true);
    nn_tensor *idx = nn_src_as(pb, &srcs[1], c, x, NN_LAYOUT_R);
    if (!tab || !idx)
        return nn_pb_fail_graph(pb, c);
    pb->vocab = T->p->g0->ne[0];
    pb->vocab_shard = T->p->local_ne[0];
    nn_tensor *off = nn_pb_rank_value(pb, nn_pb_stage(pb, c), pb->vocab_shard);
    nn_graph *g = nn_pb_ctx(pb, c, x);
    return nn_pb_emit(pb, x, c, nn_embedding_shard(g, tab, idx, off), NN_LAYOUT_P);
}

/* Megatron's vocabulary-parallel cross-entropy over logits split by columns. */
static np_status nn_pb_cross_entropy(nn_pb *pb, const nn_tensor *x, int c, nn_src *srcs)
{
    nn_lay l = nn_src_lay(&srcs[0]);
    const nn_tensor *lg0 = srcs[0].x0;
    if (l.kind != NN_LAY_S || l.dim != lg0->ndim - 1 || l.blocks != 1 || lg0->ndim != 2)
        return nn_pb_replicated(pb, x, c, srcs);
    nn_tensor *z0 = nn_src_as(pb, &srcs[0], c, x, l);
    nn_tensor *lab = nn_src_as(pb, &srcs[1], c, x, NN_LAYOUT_R);
    if (!z0 || !lab)
        return nn_pb_fail_graph(pb, c);
    int64_t vs = z0->ne[1];
    nn_tensor *off = nn_pb_rank_value(pb, nn_pb_stage(pb, c), vs);
    nn_graph *g = nn_pb_ctx(pb, c, x);
    int tp = pb->tp;
    nn_tensor *mx = nn_all_reduce(g, nn_stop_grad(g, nn_reduce_max(g, z0, -1, true)), NN_COMM_TP,
                                  tp, NN_REDUCE_MAX);
    nn_tensor *z = nn_sub(g, z0, mx);
    nn_tensor *se = nn_all_reduce(g, nn_reduce_sum(g, nn_exp(g, z), -1, true), NN_COMM_TP, tp,
                                  NN_REDUCE_SUM);
    nn_tensor *oh = off ? nn_one_hot(g, lab, off, vs, z0->dtype) : NULL;
    nn_tensor *tl = nn_all_reduce(g, nn_reduce_sum(g, nn_mul(g, z, oh), -1, true), NN_COMM_TP,
                                  tp, NN_REDUCE_SUM);
    nn_tensor *rows = nn_sub(g, nn_log(g, se), tl);
    nn_tensor *loss = nn_reduce_mean(g, nn_reshape(g, rows, 1, (int64_t[]){z0->ne[0]}), 0, false);
    return nn_pb_emit(pb, x, c, loss, NN_LAYOUT_R);
}

/* ---- the rewrite ---- */

static np_status nn_pb_node(nn_pb *pb, const nn_tensor *x)
{
    int c = pb->chunk[x->id];
    nn_src srcs[NN_MAX_SRC];
    for (int i = 0; i < x->n_src; i++)
        if (!nn_pb_source(pb, x, i, c, &srcs[i]))
            return pb->err->status != NP_OK ? pb->err->status : nn_pb_fail_graph(pb, c);
    if (pb->tp == 1)
        return nn_pb_replicated(pb, x, c, srcs);
    switch (x->op) {
    case NN_OP_ADD:
    case NN_OP_SUB:
    case NN_OP_MUL:
    case NN_OP_DIV:
    case NN_OP_SCALE:
    case NN_OP_RELU:
    case NN_OP_GELU:
    case NN_OP_SILU:
    case NN_OP_TANH:
    case NN_OP_EXP:
    case NN_OP_LOG:
    case NN_OP_CAST:
    case NN_OP_DROPOUT:
    case NN_OP_CAUSAL_MASK: return nn_pb_elementwise(pb, x, c, srcs);
    case NN_OP_MATMUL: return nn_pb_matmul(pb, x, c, srcs);
    case NN_OP_RESHAPE: return nn_pb_reshape(pb, x, c, srcs);
    case NN_OP_PERMUTE: return nn_pb_permute(pb, x, c, srcs);
    case NN_OP_SLICE:
    case NN_OP_PAD: return nn_pb_slice_pad(pb, x, c, srcs);
    case NN_OP_CONCAT: return nn_pb_concat(pb, x, c, srcs);
    case NN_OP_BROADCAST_TO:
    case NN_OP_SUM_TO: return nn_pb_bcast(pb, x, c, srcs);
    case NN_OP_REDUCE_SUM:
    case NN_OP_REDUCE_MEAN:
    case NN_OP_REDUCE_MAX: return nn_pb_reduce(pb, x, c, srcs);
    case NN_OP_SOFTMAX:
    case NN_OP_LOG_SOFTMAX:
    case NN_OP_LAYERNORM:
    case NN_OP_RMSNORM:
    case NN_OP_ROPE: return nn_pb_rowwise(pb, x, c, srcs);
    case NN_OP_ATTENTION: return nn_pb_attention(pb, x, c, srcs);
    case NN_OP_EMBEDDING: return nn_pb_embedding(pb, x, c, srcs);
    case NN_OP_CROSS_ENTROPY: return nn_pb_cross_entropy(pb, x, c, srcs);
    default: return nn_pb_replicated(pb, x, c, srcs);
    }
}

np_status nn_pb_forward(nn_pb *pb)
{
    int n = nn_graph_n_nodes(pb->g0);
    for (int i = 0; i < n; i++) {
        nn_tensor *x = nn_graph_node(pb->g0, i);
        if (x->op == NN_OP_LEAF || pb->param[x->id])
            continue;
        np_status st = nn_pb_node(pb, x);
        if (st != NP_OK)
            return st;
    }
    return NP_OK;
}
