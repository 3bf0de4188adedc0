/* plan_build.c — nn_plan_build: from a model and a strategy to the plan of one training step.
 *
 *   1. validate the strategy against the model and the system (errors name the flag)
 *   2. place the mesh (mesh.c); build the single-device forward graph of one micro-batch
 *      (its composite attentions fused into the attention op with s->fuse_attention, the
 *      scale, mask and softmax of those left composite into one softmax with
 *      s->fuse_softmax)
 *   3. cut it into model chunks (plan_sched.c) and rewrite it into one local graph per
 *      pipeline stage (plan_tp.c: tensor/sequence parallelism, ZeRO-3 gathers, send/recv)
 *   4. differentiate every stage from its loss (seeded with 1/(m dp)) and from the gradients
 *      it receives for the values it sent; send the gradients of the values it received
 *   5. recompute what the policy drops, and re-gather (ZeRO-3 parameters, sequence-parallel
 *      inputs of column-parallel matmuls) what is cheaper gathered again than kept
 *   6. gradients: accumulate over micro-batches; reduce across dp in buckets as soon as the
 *      last micro-batch's gradients are ready (DP all-reduce, ZeRO-1 reduce-scatter) or every
 *      micro-batch (ZeRO-2 reduce-scatter; ZeRO-3's comes from its all-gather's gradient);
 *      then per step: sum partial gradients over tp (sequence-parallel norms), tied
 *      embeddings over the first and last stage; the optimizer on the rank's shard; copy
 *      master weights into the bf16 parameters (all-gathered under ZeRO-1/2)
 *   7. blocks, entries, dependencies, schedules
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pass.h"
#include "plan_impl.h"
#include "verify.h"

/* ---- 1. validation ---- */

static bool nn_is_transformer(const nn_model_desc *d)
{
    return strcmp(d->family, "gpt") == 0 || strcmp(d->family, "llama") == 0;
}

/* The rules of a strategy that hold for any model; batch is the global batch. */
static np_status nn_plan_validate_common(const nn_strategy *s, int64_t B, int64_t *micro,
                                         np_err *err)
{
    if (s->dp < 1 || s->tp < 1 || s->pp < 1)
        return np_err_set(err, NP_ERR_RANGE, "--dp, --tp and --pp must be at least 1 (got %d, %d, %d)",
                          s->dp, s->tp, s->pp);
    if (s->zero < 0 || s->zero > 3)
        return np_err_set(err, NP_ERR_RANGE, "--zero must be 0, 1, 2 or 3, got %d", s->zero);
    if (s->bucket_mb < 0)
        return np_err_set(err, NP_ERR_RANGE, "--bucket-mb must be positive, got %g", s->bucket_mb);
    if (s->loss_scale < 0 || s->clip_grad < 0)
        return np_err_set(err, NP_ERR_RANGE, "--loss-scale and --clip-grad must be positive (0: "
                          "none), got %g and %g", s->loss_scale, s->clip_grad);
    if ((s->loss_scale > 0 || s->clip_grad > 0) && s->zero > 1 && s->dp > 1)
        return np_err_set(err, NP_ERR_INCONSISTENT,
                          "--loss-scale and --clip-grad are Megatron's optimizers, which shard "
                          "at most the optimizer state: they cannot be combined with --zero %d "
                          "(0 or 1)", s->zero);
    if (s->sp && s->tp < 2)
        return np_err_set(err, NP_ERR_INCONSISTENT, "--sp needs --tp 2 or more");
    if (s->overlap_param_gather && s->zero != 1 && s->zero != 2)
        return np_err_set(err, NP_ERR_INCONSISTENT, "--overlap-param-gather needs --zero 1 or 2 "
                          "(the distributed optimizer's parameter all-gathers, as Megatron-Core's "
                          "needs --use-distributed-optimizer)");
    if (s->tp_comm_overlap && !s->sp)
        return np_err_set(err, NP_ERR_INCONSISTENT, "--tp-comm-overlap needs --sp (it overlaps "
                          "sequence parallelism's all-gathers and reduce-scatters with their "
                          "GEMMs, as Megatron-Core's needs --sequence-parallel)");
    if (s->zero >= 2 && s->pp > 1 && s->dp > 1)
        return np_err_set(err, NP_ERR_INCONSISTENT,
                          "--zero %d cannot be combined with --pp %d: ZeRO-2 and -3 shard "
                          "gradients every micro-batch, which pipeline parallelism accumulates "
                          "(DeepSpeed's rule)", s->zero, s->pp);
    if (s->schedule == NN_PP_ZB_H1 && (s->p2p_blocking || s->host_sync))
        return np_err_set(err, NP_ERR_INCONSISTENT,
                          "--schedule zb-h1 cannot be combined with %s: those are Megatron-LM "
                          "2021's calls and synchronizations of its 1F1B and interleaved "
                          "schedules, which have no deferred weight-gradient passes",
                          s->p2p_blocking ? "--p2p blocking" : "--host-sync");
    if (s->schedule == NN_PP_INTERLEAVED && s->pp < 2)
        return np_err_set(err, NP_ERR_INCONSISTENT,
                          "--schedule interleaved:%d needs --pp 2 or more", s->virtual_stages);
    if (B % s->dp)
        return np_err_set(err, NP_ERR_INCONSISTENT, "--batch %lld is not divisible by --dp %d",
                          (long long)B, s->dp);
    int64_t per = B / s->dp, b = s->microbatch ? s->microbatch : per;
    if (b < 1 || per % b)
        return np_err_set(err, NP_ERR_INCONSISTENT,
                          "--microbatch %lld does not divide the %lld samples per data-parallel "
                          "rank (--batch %lld / --dp %d)", (long long)b, (long long)per,
                          (long long)B, s->dp);
    int64_t m = per / b;
    if (s->schedule == NN_PP_INTERLEAVED && m % s->pp)
        return np_err_set(err, NP_ERR_INCONSISTENT,
                          "--schedule interleaved:%d needs the number of micro-batches (%lld) to "
                          "be a multiple of --pp %d", s->virtual_stages, (long long)m, s->pp);
    if (m > (1 << 20))
        return np_err_set(err, NP_ERR_RANGE, "%lld micro-batches are more than npusim plans for",
                          (long long)m);
    *micro = b;
    return NP_OK;
}

/* The rules that depend on the zoo model (tp against its widths, sp against its sequence). */
static np_status nn_plan_validate(const nn_model_desc *d, const nn_model_opts *o,
                                  const nn_strategy *s, int64_t *batch, int64_t *micro,
                                  np_err *err)
{
    const char *name = d->name;
    if (s->dp < 1 || s->tp < 1 || s->pp < 1)
        return np_err_set(err, NP_ERR_RANGE, "--dp, --tp and --pp must be at least 1 (got %d, %d, %d)",
                          s->dp, s->tp, s->pp);
    int tp = s->tp;
    if (tp > 1 && nn_model_int(d, "kv_lora_rank", 0) > 0) /* issue 27: MLA over tp is later work */
        return np_err_set(err, NP_ERR_INCONSISTENT,
                          "--tp %d: the multi-head latent attention of %s is not split over "
                          "tensor parallelism yet (use --tp 1)", tp, name);
    if (tp > 1 && nn_is_transformer(d)) {
        int64_t H = nn_model_int(d, "heads", 1), D = nn_model_int(d, "d_model", 1);
        int64_t KV = nn_model_int(d, "kv_heads", H), F = nn_model_int(d, "ffn", 4 * D);
        if (H % tp)
            return np_err_set(err, NP_ERR_INCONSISTENT,
                              "--tp %d does not divide the %lld attention heads of %s", tp,
                              (long long)H, name);
        if (KV % tp)
            return np_err_set(err, NP_ERR_INCONSISTENT,
                              "--tp %d does not divide the %lld key/value heads of %s", tp,
                              (long long)KV, name);
        if (D % tp)
            return np_err_set(err, NP_ERR_INCONSISTENT,
                              "--tp %d does not divide the hidden size %lld of %s", tp,
                              (long long)D, name);
        if (F % tp)
            return np_err_set(err, NP_ERR_INCONSISTENT,
                              "--tp %d does not divide the MLP width %lld of %s", tp, (long long)F,
                              name);
    } else if (tp > 1 && strcmp(d->family, "mlp") == 0) {
        int64_t hidden[NN_MODEL_MAX_VALUES];
        int nh = nn_model_ints(d, "hidden", hidden, NN_MODEL_MAX_VALUES);
        for (int i = 0; i < nh; i++)
            if (hidden[i] % tp)
                return np_err_set(err, NP_ERR_INCONSISTENT,
                                  "--tp %d does not divide the width %lld of hidden layer %d of %s",
                                  tp, (long long)hidden[i], i + 1, name);
    } else if (tp > 1) {
        return np_err_set(err, NP_ERR_INCONSISTENT,
                          "--tp %d: %s models have no tensor-parallel split (transformers and MLPs do)",
                          tp, d->family);
    }
    if (s->sp && tp > 1) {
        if (!nn_is_transformer(d))
            return np_err_set(err, NP_ERR_INCONSISTENT,
                              "--sp needs a transformer (gpt or llama); %s has no sequence", name);
        int64_t seq = o->seq ? o->seq : nn_model_int(d, "context", 1);
        if (seq % tp)
            return np_err_set(err, NP_ERR_INCONSISTENT,
                              "--sp: --tp %d does not divide the sequence length %lld", tp,
                              (long long)seq);
    }
    *batch = o->batch ? o->batch : nn_model_int(d, "batch", 1);
    return nn_plan_validate_common(s, *batch, micro, err);
}

/* ---- the builder's bookkeeping of the nodes it makes ---- */

nn_pmark *nn_ps_mark(nn_pstate *ps, nn_tensor *t)
{
    if (!t)
        return NULL;
    if (t->id >= ps->cap_mark) {
        int cap = ps->cap_mark ? ps->cap_mark : 256;
        while (cap <= t->id)
            cap *= 2;
        nn_pmark *m = nn_realloc(ps->mark, (size_t)cap * sizeof *m);
        if (!m)
            return NULL;
        memset(m + ps->cap_mark, 0, (size_t)(cap - ps->cap_mark) * sizeof *m);
        ps->mark = m;
        ps->cap_mark = cap;
    }
    return &ps->mark[t->id];
}

/* Marks every node made since `from` (node count) with hint/last. */
static bool nn_ps_mark_since(nn_pstate *ps, int from, int hint, bool last)
{
    for (int i = from; i < nn_graph_n_nodes(ps->g); i++) {
        nn_pmark *m = nn_ps_mark(ps, nn_graph_node(ps->g, i));
        if (!m)
            return false;
        m->hint = hint;
        m->last = last;
    }
    return true;
}

static void nn_ps_ctx(nn_pstate *ps, nn_region r, int chunk, int layer, const char *scope)
{
    nn_graph_set_region(ps->g, r);
    nn_graph_set_chunk(ps->g, chunk);
    nn_graph_set_layer(ps->g, layer);
    nn_graph_set_scope(ps->g, "%s", scope);
}

/* ---- 4. backward ---- */

typedef struct nn_tlist {
    nn_tensor **v;
    int n, cap;
} nn_tlist;

static bool nn_tlist_push(nn_tlist *l, nn_tensor *t)
{
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 8;
        nn_tensor **v = nn_realloc(l->v, (size_t)cap * sizeof *v);
        if (!v)
            return false;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = t;
    return true;
}

static np_status nn_pb_backward(nn_pb *pb, nn_plan *p)
{
    np_err *err = pb->err;
    int pp = pb->pp;
    nn_tlist *roots = nn_calloc((size_t)pp, sizeof *roots), *seeds = nn_calloc((size_t)pp, sizeof *seeds);
    nn_tlist *wrt = nn_calloc((size_t)pp, sizeof *wrt);
    np_status st = NP_OK;
    if (!roots || !seeds || !wrt) {
        st = np_err_set(err, NP_ERR_NOMEM, "out of memory building the plan");
        goto done;
    }
    /* the loss, seeded with 1/(m dp): gradients summed over micro-batches and dp ranks are
     * the gradient of the mean loss over the global batch (times the loss scale, which the
     * optimizer takes out again) */
    {
        nn_pv *lv = pb->val[pb->m0.loss->id];
        int ls = nn_pb_stage(pb, lv->chunk);
        nn_graph *g = pb->stages[ls].g;
        nn_graph_set_region(g, NN_REGION_BACKWARD);
        nn_graph_set_chunk(g, lv->chunk);
        nn_graph_set_layer(g, -1);
        nn_graph_set_scope(g, "%s", "");
        nn_tensor *seed = nn_const(g, "loss.scale", lv->t->dtype, lv->t->ndim, lv->t->ne);
        double scale = pb->s->loss_scale > 0 ? pb->s->loss_scale : 1.0;
        if (!seed || !nn_tensor_fill(seed, (float)(scale / ((double)p->n_micro * pb->dp))) ||
            !nn_pb_leaf(pb, ls, NN_LEAF_CONST, seed) || !nn_tlist_push(&roots[ls], lv->t) ||
            !nn_tlist_push(&seeds[ls], seed)) {
            st = nn_graph_status(g, err) != NP_OK ? err->status
                                                  : np_err_set(err, NP_ERR_NOMEM, "out of memory building the plan");
            goto done;
        }
        p->classes[ls].loss = lv->t;
    }
    for (int i = 0; i < pb->n_bounds; i++) {
        nn_pbound *b = &pb->bounds[i];
        if (!b->grad)
            continue;
        int fs = nn_pb_stage(pb, b->from), ts = nn_pb_stage(pb, b->to);
        nn_graph *g = pb->stages[fs].g;
        nn_tensor *sent = b->send->src[0];
        nn_graph_set_region(g, NN_REGION_BACKWARD);
        nn_graph_set_chunk(g, b->from);
        nn_graph_set_layer(g, -1);
        nn_graph_set_scope(g, "%s", b->send->scope);
        b->grad_recv = nn_recv(g, sent->ndim, sent->ne, sent->dtype, NN_COMM_PP, (ts - fs + pp) % pp);
        if (!b->grad_recv)
            goto graph_fail;
        b->grad_recv->ip[NN_COMM_IP_MATCH] = ++pb->next_match;
        /* scattered: the seed is the gradient of the sent shard, whose shard_slice's gradient
         * is the all-gather over tp that rebuilds the whole gradient */
        if (!nn_tlist_push(&roots[fs], sent) || !nn_tlist_push(&seeds[fs], b->grad_recv) ||
            !nn_tlist_push(&wrt[ts], b->value)) {
            st = np_err_set(err, NP_ERR_NOMEM, "out of memory building the plan");
            goto done;
        }
    }
    for (int s = 0; s < pp; s++) {
        if (!roots[s].n)
            continue;
        if ((st = nn_backward_roots(pb->stages[s].g, roots[s].n, roots[s].v, seeds[s].v, wrt[s].n,
                                    wrt[s].v, err)) != NP_OK) {
            np_err_prefix(err, "plan: stage %d", s);
            goto done;
        }
    }
    for (int i = 0; i < pb->n_bounds; i++) {
        nn_pbound *b = &pb->bounds[i];
        if (!b->grad)
            continue;
        int fs = nn_pb_stage(pb, b->from), ts = nn_pb_stage(pb, b->to);
        nn_graph *g = pb->stages[ts].g;
        if (!b->value->grad) {
            st = np_err_set(err, NP_ERR_INTERNAL, "plan: no gradient reaches %s", b->value->name);
            goto done;
        }
        nn_graph_set_region(g, NN_REGION_BACKWARD);
        nn_graph_set_chunk(g, b->to);
        nn_graph_set_layer(g, -1);
        nn_graph_set_scope(g, "%s", b->recv->scope);
        /* scattered: the gradient of the value is whole on every tp rank (the value is
         * replicated), so each sends its 1/tp of it: the gather's gradient is this slice, not
         * the reduce-scatter autodiff would make */
        nn_lay whole = {NN_LAY_R, -1, 1};
        nn_tensor *grad = b->scattered ? nn_pb_scatter(pb, ts, g, b->value->grad, whole)
                                       : b->value->grad;
        if (!grad && err->status != NP_OK) {
            st = err->status;
            goto done;
        }
        nn_tensor *send = nn_send(g, grad, NN_COMM_PP, (fs - ts + pp) % pp);
        if (!send)
            goto graph_fail;
        send->is_output = true;
        send->ip[NN_COMM_IP_MATCH] = b->grad_recv->ip[NN_COMM_IP_MATCH];
    }
    goto done;
graph_fail:
    st = np_err_set(err, NP_ERR_INTERNAL, "plan: building the backward pass failed");
    for (int s = 0; s < pp; s++)
        if (nn_graph_status(pb->stages[s].g, err) != NP_OK) {
            st = err->status;
            break;
        }
done:
    for (int s = 0; roots && s < pp; s++)
        free(roots[s].v);
    for (int s = 0; seeds && s < pp; s++)
        free(seeds[s].v);
    for (int s = 0; wrt && s < pp; s++)
        free(wrt[s].v);
    free(roots);
    free(seeds);
    free(wrt);
    return st;
}

/* The phase a node of the step's end has by itself (nn_pb_entries gives an entry the latest
 * of its nodes' and its dependencies'). */
int nn_end_phase(const nn_pstate *ps, const nn_tensor *t)
{
    if (t->id < ps->cap_mark && ps->mark[t->id].phase)
        return ps->mark[t->id].phase - 1;
    if (nn_is_collective(t->op)) {
        int tag = (int)t->ip[NN_COMM_IP_TAG];
        if (tag == NN_COMM_ZERO && t->op == NN_OP_ALL_GATHER)
            return NN_END_COPY_BACK;
        return tag == NN_COMM_SP ? NN_END_SP_SUM : tag == NN_COMM_PP ? NN_END_TIED
                                                                     : NN_END_GRAD_REDUCE;
    }
    switch (t->op) {
    case NN_OP_CAST: return t->dtype == NN_F32 ? NN_END_MAIN_GRAD : NN_END_COPY_BACK;
    case NN_OP_SGD_UPDATE: case NN_OP_ADAM_UPDATE: case NN_OP_ADAMW_UPDATE: return NN_END_UPDATE;
    case NN_OP_COPY_TO: return NN_END_COPY_BACK;
    default: return NN_END_GRAD_REDUCE;
    }
}

/* ---- 5. recomputation and re-gathering ---- */

/* Whether forward node t is (a view, slice or transpose of) a ZeRO or sequence-parallel all-gather:
 * such values are gathered again for the backward pass instead of being kept. */
static bool nn_is_regather(const nn_tensor *t)
{
    while (t->op == NN_OP_RESHAPE || t->op == NN_OP_SLICE || t->op == NN_OP_PERMUTE)
        t = t->src[0];
    return t->op == NN_OP_ALL_GATHER && t->region == NN_REGION_FORWARD &&
           (t->ip[NN_COMM_IP_TAG] == NN_COMM_ZERO || t->ip[NN_COMM_IP_TAG] == NN_COMM_SP);
}

static np_status nn_pb_recompute(nn_pb *pb, nn_graph *g)
{
    int n = nn_graph_n_nodes(g), max_id = nn_graph_max_id(g);
    bool *kept = nn_calloc((size_t)max_id + 1, sizeof *kept);
    if (!kept)
        return np_err_set(pb->err, NP_ERR_NOMEM, "out of memory building the plan");
    nn_recompute pol = pb->s->recompute;
    for (int i = 0; i < n; i++) {
        nn_tensor *t = nn_graph_node(g, i);
        bool fwd = t->op != NN_OP_LEAF && t->region == NN_REGION_FORWARD;
        kept[t->id] = !fwd || t->op == NN_OP_RECV || t->layer < 0 || pol == NN_RECOMPUTE_NONE ||
                      (pol == NN_RECOMPUTE_SELECTIVE && !t->attn_core);
    }
    bool layers = pol == NN_RECOMPUTE_FULL || pol == NN_RECOMPUTE_UNIFORM;
    if (layers) /* keep what enters each layer */
        for (int i = 0; i < n; i++) {
            nn_tensor *t = nn_graph_node(g, i);
            if (t->op == NN_OP_LEAF || t->region != NN_REGION_FORWARD)
                continue;
            for (int s = 0; s < t->n_src; s++)
                if (t->src[s]->layer != t->layer)
                    kept[t->src[s]->id] = true;
        }
    for (int i = 0; i < n; i++) {
        nn_tensor *t = nn_graph_node(g, i);
        if (t->op != NN_OP_LEAF && t->region == NN_REGION_FORWARD && nn_is_regather(t))
            kept[t->id] = false;
    }
    int nr;
    np_status st = pol == NN_RECOMPUTE_UNIFORM ? nn_pass_recompute_layers(g, kept, &nr, pb->err)
                                               : nn_pass_recompute(g, kept, &nr, pb->err);
    free(kept);
    return st;
}

/* ---- 6. gradients and the optimizer ---- */

static nn_tensor *nn_flat_pad(nn_graph *g, nn_tensor *t, int parts)
{
    if (!t)
        return NULL;
    int64_t n = nn_numel(t), padded = (n + parts - 1) / parts * parts;
    nn_tensor *f = t->ndim == 1 ? t : nn_reshape(g, t, 1, (int64_t[]){n});
    return padded == n ? f : nn_pad(g, f, 0, 0, padded - n);
}

/* Undoes nn_flat_pad: the first numel elements in shape (ndim, ne). */
static nn_tensor *nn_unflat(nn_graph *g, nn_tensor *f, int ndim, const int64_t *ne)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; d++)
        n *= ne[d];
    if (f && f->ne[0] != n)
        f = nn_slice(g, f, 0, 0, n);
    return ndim == 1 && f && f->ndim == 1 ? f : nn_reshape(g, f, ndim, ne);
}

static nn_tensor *nn_pb_state(nn_pstate *ps, const nn_pparam *p, nn_plan_leaf_kind kind,
                              const char *suffix, nn_role role, nn_dtype dt, int ndim,
                              const int64_t *ne, bool shard)
{
    char name[NN_NAME_MAX];
    snprintf(name, sizeof name, "%.80s.%s", p->g0->name, suffix);
    nn_graph_set_scope(ps->g, "%s", "");
    nn_tensor *t = nn_leaf(ps->g, name, role, dt, ndim, ne);
    if (!t)
        return NULL;
    t->layer = p->g0->layer;
    nn_plan_leaf *l = nn_pb_leaf(ps->pb, ps->st, kind, t);
    if (!l)
        return NULL;
    snprintf(l->source, sizeof l->source, "%s", p->g0->name);
    l->src_ndim = p->g0->ndim;
    memcpy(l->src_ne, p->g0->ne, sizeof l->src_ne);
    l->shard.tp_dim = p->lay.kind == NN_LAY_S ? p->lay.dim : -1;
    l->shard.tp_blocks = p->lay.kind == NN_LAY_S ? p->lay.blocks : 1;
    l->shard.tp_pad_rows = p->pad_rows;
    l->shard.zero_shard = shard;
    return t;
}

typedef struct nn_bucket_item {
    nn_tensor *comm; /* the collective node */
    double key;
    int chunk;
    uint64_t bytes;
} nn_bucket_item;

static int nn_bucket_cmp(const void *a, const void *b)
{
    const nn_bucket_item *x = a, *y = b;
    if (x->chunk != y->chunk)
        return x->chunk - y->chunk;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return x->comm->id - y->comm->id; /* a total order: qsort is not stable */
}

/* Groups items (by chunk, in key order) into buckets of at least `bytes` each. */
static bool nn_pb_buckets(nn_pstate *ps, nn_bucket_item *it, int n, uint64_t bytes)
{
    qsort(it, (size_t)n, sizeof *it, nn_bucket_cmp);
    uint64_t acc = 0;
    int chunk = -2;
    for (int i = 0; i < n; i++) {
        if (it[i].chunk != chunk || acc >= bytes) {
            ps->next_bucket++;
            acc = 0;
            chunk = it[i].chunk;
        }
        acc += it[i].bytes;
        nn_pmark *m = nn_ps_mark(ps, it[i].comm);
        if (!m)
            return false;
        m->bucket = ps->next_bucket;
    }
    return true;
}

/* A parameter's update, once its main gradient is ready (nn_pb_optimizer). */
typedef struct nn_pupd {
    nn_pparam *pr;
    int i;                 /* its index in pb->params */
    nn_tensor *leaf, *master;
    nn_tensor *r;          /* the main gradient the update reads */
    int mnd;
    int64_t mne[NN_MAX_DIMS];
    bool mixed, shard12;
} nn_pupd;

/* The optimizer's update of one parameter from its main gradient and, in mixed precision,
 * the copy of its master into the parameter (ZeRO-1/2: all-gathered into every rank's, each
 * gather an item of ags). Nodes in the optimizer region of the step's end; false: the graph's
 * error. */
static bool nn_pb_update(nn_pstate *ps, const nn_pupd *up, nn_bucket_item *ags, int *n_ags)
{
    nn_pb *pb = ps->pb;
    nn_graph *g = ps->g;
    const nn_optim *o = &pb->plan->optim;
    int dp = pb->dp, zero = pb->zero, mnd = up->mnd;
    nn_pparam *pr = up->pr;
    nn_tensor *leaf = up->leaf, *master = up->master, *r = up->r;
    const int64_t *mne = up->mne;
    bool mixed = up->mixed, shard12 = up->shard12;
    int from = nn_graph_n_nodes(g), i = up->i;
    nn_tensor *srcs[4] = {master, r, NULL, NULL};
    double fp[NN_MAX_FPARAMS] = {o->lr};
    nn_op op;
    int ns;
    if (o->kind == NN_OPTIM_SGD) {
        op = NN_OP_SGD_UPDATE;
        ns = 3;
        srcs[2] = nn_pb_state(ps, pr, NN_LEAF_OPTSTATE, "momentum", NN_ROLE_OPTSTATE, NN_F32, mnd,
                              mne, zero != 0);
        fp[1] = o->momentum;
        fp[2] = o->weight_decay;
    } else {
        op = o->kind == NN_OPTIM_ADAM ? NN_OP_ADAM_UPDATE : NN_OP_ADAMW_UPDATE;
        ns = 4;
        srcs[2] = nn_pb_state(ps, pr, NN_LEAF_OPTSTATE, "adam_m", NN_ROLE_OPTSTATE, NN_F32, mnd,
                              mne, zero != 0);
        srcs[3] = nn_pb_state(ps, pr, NN_LEAF_OPTSTATE, "adam_v", NN_ROLE_OPTSTATE, NN_F32, mnd,
                              mne, zero != 0);
        fp[1] = o->beta1;
        fp[2] = o->beta2;
        fp[3] = o->eps;
        fp[4] = o->weight_decay;
    }
    nn_ps_ctx(ps, NN_REGION_OPTIM, -1, pr->g0->layer, "");
    if (!srcs[2] || (ns == 4 && !srcs[3]))
        return false;
    nn_tensor *u = nn_node(g, op, ns, srcs, NULL, fp);
    if (!u)
        return false;
    nn_tensor_set_name(u, "%.80s.update", pr->g0->name);
    u->is_output = true;
    if (shard12) { /* the updated shards back into every rank's parameter */
        nn_tensor *w = mixed ? nn_cast(g, u, pr->work) : u;
        nn_tensor *ag = dp > 1 ? nn_all_gather(g, w, NN_COMM_ZERO, dp, 0) : w;
        if (ag && ag != w)
            ags[(*n_ags)++] = (nn_bucket_item){ag, (double)i, 0, nn_nbytes(ag)};
        nn_tensor *cp = nn_copy_to(g, leaf, nn_unflat(g, ag, leaf->ndim, leaf->ne));
        if (!cp)
            return false;
        cp->is_output = true;
    } else if (mixed) {
        nn_tensor *cp = nn_copy_to(g, leaf, u);
        if (!cp)
            return false;
        cp->is_output = true;
    }
    return nn_ps_mark_since(ps, from, NN_HINT_END, false);
}

/* Gives every node made since `from` (node count) the step end's phase ph. */
static bool nn_ps_mark_phase(nn_pstate *ps, int from, int ph)
{
    for (int k = from; k < nn_graph_n_nodes(ps->g); k++) {
        nn_pmark *m = nn_ps_mark(ps, nn_graph_node(ps->g, k));
        if (!m)
            return false;
        m->phase = ph + 1;
    }
    return true;
}

/* A scalar all-reduce of v over the model-parallel group (Megatron-LM's
 * mpu.get_model_parallel_group(): every tp and pp rank of a replica), as one over tp and one
 * over pp, each pp one matched across the stages by *match; with ZeRO-1 first one over dp,
 * whose ranks each hold a shard of every gradient (Megatron-Core's distributed optimizer
 * reduces its statistics over the data- and model-parallel ranks together). */
static nn_tensor *nn_pb_mp_all_reduce(nn_pb *pb, nn_graph *g, nn_tensor *v, int op, int *match)
{
    if (v && pb->zero == 1 && pb->dp > 1) /* the distributed optimizer's shards first */
        v = nn_all_reduce(g, v, NN_COMM_DP, pb->dp, op);
    if (v && pb->tp > 1)
        v = nn_all_reduce(g, v, NN_COMM_TP, pb->tp, op);
    if (v && pb->pp > 1) {
        v = nn_all_reduce(g, v, NN_COMM_PP, pb->pp, op);
        if (v) {
            if (!*match)
                *match = ++pb->next_match;
            v->ip[NN_COMM_IP_MATCH] = *match;
        }
    }
    return v;
}

/* The chunks a gradient of n elements is summed in (partial sums, then their sum, as apex's
 * multi_tensor_l2norm does): the most, up to 4096, that divide n into chunks of at least 2048
 * elements. */
static int64_t nn_norm_rows(int64_t n)
{
    for (int64_t r = n / 2048 < 4096 ? n / 2048 : 4096; r > 1; r--)
        if (n % r == 0)
            return r;
    return 1;
}

/* A scalar constant leaf of the stage's graph. */
static nn_tensor *nn_pb_scalar(nn_pstate *ps, const char *name, double v)
{
    nn_tensor *t = nn_const(ps->g, name, NN_F32, 1, (int64_t[]){1});
    if (!t || !nn_tensor_fill(t, (float)v) || !nn_pb_leaf(ps->pb, ps->st, NN_LEAF_CONST, t))
        return NULL;
    return t;
}

/* A scalar accumulator of each rank (zero at the start; the step fills it before it adds). */
static nn_tensor *nn_pb_scalar_acc(nn_pstate *ps, const char *name)
{
    nn_tensor *t = nn_leaf(ps->g, name, NN_ROLE_OPTSTATE, NN_F32, 1, (int64_t[]){1});
    if (!t || !nn_pb_leaf(ps->pb, ps->st, NN_LEAF_GRADBUF, t))
        return NULL;
    return t;
}

/* Megatron-LM 2021's steps over all the main gradients before the update
 * (megatron/optimizer/optimizer.py, Float16OptimizerWithFloat16Params.step):
 *   loss scaling  found_inf zeroed, the gradients unscaled and checked (their scale nodes,
 *                 made with the main gradients), the flag all-reduced (max) over the
 *                 model-parallel group, read by the host;
 *   clipping      (clip_grads.py, clip_grad_norm_fp32) each gradient's sum of squares into one
 *                 sum — once per parameter over tp (a replicated one counts 1/tp on each rank,
 *                 as Megatron counts it on tp rank 0 only) and pp (a tied one on its first
 *                 stage only) — all-reduced (sum) over the model-parallel group and read by the
 *                 host; the coefficient min(1, clip / (sqrt(sum) + 1e-6)) (the host's
 *                 arithmetic in Megatron: here a few scalar kernels) scales every gradient
 *                 (multi_tensor_scale: Megatron skips it when the coefficient is 1, the value
 *                 is the same).
 * With ZeRO-1 (Megatron-Core's distributed optimizer) each dp rank holds a shard of every main
 * gradient: its flag and sum cover the shard and are all-reduced over dp as well.
 * up[].r becomes what the update reads; match[pb->n_params] and [+ 1] are the pp all-reduces'
 * matches (shared by the stages). False: the graph's error. */
static bool nn_pb_grad_step(nn_pstate *ps, nn_pupd *up, int n, int *match)
{
    nn_pb *pb = ps->pb;
    nn_graph *g = ps->g;
    nn_ps_ctx(ps, NN_REGION_OPTIM, -1, -1, "");
    int start = nn_graph_n_nodes(g), from = start;
    if (pb->s->loss_scale > 0) {
        nn_tensor *flag = nn_pb_scalar_acc(ps, "found_inf");
        nn_tensor *f = flag ? nn_fill(g, flag, 0.0) : NULL;
        if (!f)
            return false;
        f->sched_key = -0.5; /* zeroed before the unscaling, read after it */
        if (!nn_pb_mp_all_reduce(pb, g, f, NN_REDUCE_MAX, &match[pb->n_params]) ||
            !nn_ps_mark_phase(ps, from, NN_END_UNSCALE))
            return false;
    }
    if (pb->s->clip_grad > 0) {
        from = nn_graph_n_nodes(g);
        nn_tensor *buf = nn_pb_scalar_acc(ps, "grad_norm_sq");
        nn_tensor *acc = buf ? nn_fill(g, buf, 0.0) : NULL;
        for (int k = 0; k < n && acc; k++) {
            const nn_pparam *pr = up[k].pr;
            if (pr->leaf[0] && ps->st != 0) /* a tied copy: counted on its first stage */
                continue;
            /* multi_tensor_l2norm: partial sums of chunks, then their sum */
            nn_tensor *r = up[k].r;
            int64_t ne = nn_numel(r), rows = nn_norm_rows(ne);
            nn_tensor *sq = nn_sum_squares(g, nn_reshape(g, r, 2, (int64_t[]){rows, ne / rows}), 1,
                                           true);
            sq = nn_reshape(g, sq, 1, (int64_t[]){rows});
            if (rows > 1)
                sq = nn_reduce_sum(g, sq, 0, true);
            if (sq && pb->tp > 1 && pr->lay.kind != NN_LAY_S)
                sq = nn_scale(g, sq, 1.0 / pb->tp);
            acc = sq ? nn_grad_accumulate(g, acc, sq) : NULL;
        }
        nn_tensor *tot = nn_pb_mp_all_reduce(pb, g, acc, NN_REDUCE_SUM, &match[pb->n_params + 1]);
        if (!tot || !nn_ps_mark_phase(ps, from, NN_END_NORM))
            return false;
        from = nn_graph_n_nodes(g);
        nn_tensor *one = nn_pb_scalar(ps, "one", 1.0), *eps = nn_pb_scalar(ps, "clip_eps", 1e-6);
        nn_tensor *max = nn_pb_scalar(ps, "clip_grad", pb->s->clip_grad);
        if (!one || !eps || !max)
            return false;
        nn_tensor *norm = nn_exp(g, nn_scale(g, nn_log(g, tot), 0.5));
        nn_tensor *q = nn_div(g, max, nn_add(g, norm, eps));
        nn_tensor *coef = nn_sub(g, one, nn_relu(g, nn_sub(g, one, q)));
        for (int k = 0; k < n && coef; k++)
            up[k].r = nn_mul(g, up[k].r, coef);
        if (!coef || !nn_ps_mark_phase(ps, from, NN_END_CLIP))
            return false;
    }
    for (int k = 0; k < n; k++)
        if (!up[k].r)
            return false;
    return nn_ps_mark_since(ps, start, NN_HINT_END, false);
}

/* A graph failure of the plan's build: the graph's own error, else out of memory. */
static np_status nn_pb_graph_fail(nn_graph *g, np_err *err)
{
    return nn_graph_status(g, err) != NP_OK
               ? err->status
               : np_err_set(err, NP_ERR_NOMEM, "out of memory building the plan");
}

/* The optimizer's collectives, bucketed once every parameter is done, and its updates (held
 * back until the global steps over every gradient when loss scaling or clipping asks). */
typedef struct nn_pb_opt {
    nn_bucket_item *red, *ags, *sps, *loc;
    nn_pupd *upd;
    int n_red, n_ags, n_sps, n_loc, n_upd;
    bool step; /* each update follows its gradient (no global step) */
} nn_pb_opt;

/* Parameter pr's gradient accumulator, zeroed at the start of the step, and its accumulation
 * every micro-batch (ZeRO-2: reduce-scatter first); the accumulated gradient in *acc. */
static np_status nn_pb_accumulate(nn_pb *pb, nn_pstate *ps, nn_pparam *pr, nn_pb_opt *o,
                                  nn_tensor **acc)
{
    nn_graph *g = ps->g;
    int dp = pb->dp, zero = pb->zero;
    nn_tensor *leaf = pr->leaf[ps->st], *gr = leaf->grad;
    int64_t shard_n = (nn_numel(leaf) + dp - 1) / dp; /* zero 3: the leaf is the shard */
    int from = nn_graph_n_nodes(g);
    nn_ps_ctx(ps, NN_REGION_OPTIM, -1, -1, "");
    nn_tensor *buf = zero == 2 ? nn_pb_state(ps, pr, NN_LEAF_GRADBUF, "grad", NN_ROLE_GRADIENT,
                                             pr->work, 1, (int64_t[]){shard_n}, true)
                               : nn_pb_state(ps, pr, NN_LEAF_GRADBUF, "grad", NN_ROLE_GRADIENT,
                                             pr->work, leaf->ndim, leaf->ne, zero == 3);
    nn_tensor *fill = nn_fill(g, buf, 0.0);
    if (!fill || !nn_ps_mark_since(ps, from, NN_HINT_BEGIN, false))
        return nn_pb_graph_fail(g, pb->err);
    fill->sched_key = -1.0; /* zeroed before anything: the accumulations follow their gradients */
    from = nn_graph_n_nodes(g);
    nn_ps_ctx(ps, NN_REGION_BACKWARD, gr->chunk, gr->layer, gr->scope);
    nn_tensor *in = gr, *rs = NULL;
    if (zero == 2) {
        rs = nn_reduce_scatter(g, nn_flat_pad(g, gr, dp), NN_COMM_ZERO, dp, 0);
        in = rs;
    }
    if (!(*acc = nn_grad_accumulate(g, fill, in)))
        return nn_pb_graph_fail(g, pb->err);
    for (int k = from; k < nn_graph_n_nodes(g); k++)
        nn_graph_node(g, k)->sched_key = gr->sched_key + 0.25;
    if (rs)
        o->red[o->n_red++] = (nn_bucket_item){rs, gr->sched_key, gr->chunk, nn_nbytes(rs->src[0])};
    return NP_OK;
}

/* The last micro-batch's reduction of acc across dp (DP all-reduce, ZeRO-1 reduce-scatter;
 * with Megatron-LM's local DDP all of a chunk's at once after the whole backward): *out. */
static np_status nn_pb_reduce_dp(nn_pb *pb, nn_pstate *ps, nn_tensor *acc, int chunk,
                                 nn_pb_opt *o, nn_tensor **out)
{
    nn_graph *g = ps->g;
    int dp = pb->dp, zero = pb->zero;
    int from = nn_graph_n_nodes(g);
    bool local = pb->s->ddp == NN_DDP_LOCAL && zero == 0;
    nn_tensor *r = acc;
    if (dp > 1 && zero == 0)
        r = nn_all_reduce(g, acc, NN_COMM_DP, dp, NN_REDUCE_SUM);
    else if (dp > 1 && zero == 1)
        r = nn_reduce_scatter(g, nn_flat_pad(g, acc, dp), NN_COMM_ZERO, dp, 0);
    if (!r)
        return nn_pb_graph_fail(g, pb->err);
    if (r != acc) {
        for (int k = from; k < nn_graph_n_nodes(g); k++)
            nn_graph_node(g, k)->sched_key = acc->sched_key + 0.05;
        if (!nn_ps_mark_since(ps, from, local ? NN_HINT_END : NN_HINT_NONE, !local))
            return nn_pb_graph_fail(g, pb->err);
        nn_bucket_item it = {r, acc->sched_key, chunk, nn_nbytes(r->src[0])};
        if (local)
            o->loc[o->n_loc++] = it;
        else
            o->red[o->n_red++] = it;
    }
    *out = r;
    return NP_OK;
}

/* The step's end of parameter i (pr) from its reduced gradient r: the partial sums over tp,
 * the tied copies' all-reduce between the first and last stage, fp32 and unscaled, then the
 * master weights and the update (or the update held for the global step). */
static np_status nn_pb_param_end(nn_pb *pb, nn_pstate *ps, nn_pparam *pr, int i, nn_tensor *r,
                                 int *tied_match, nn_pb_opt *o)
{
    nn_graph *g = ps->g;
    np_err *err = pb->err;
    int zero = pb->zero;
    nn_tensor *leaf = pr->leaf[ps->st];
    bool mixed = pr->work != NN_F32, shard12 = zero == 1 || zero == 2;
    int from = nn_graph_n_nodes(g);
    nn_ps_ctx(ps, NN_REGION_OPTIM, -1, pr->g0->layer, "");
    if (pr->partial_tp && pb->tp > 1) {
        r = nn_all_reduce(g, r, NN_COMM_SP, pb->tp, NN_REDUCE_SUM);
        if (r)
            o->sps[o->n_sps++] = (nn_bucket_item){r, (double)i, 0, nn_nbytes(r)};
    }
    int n_stages = 0;
    for (int s = 0; s < pb->pp; s++)
        n_stages += pr->leaf[s] != NULL;
    if (n_stages > 1) {
        if (n_stages != 2 || !pr->leaf[0] || !pr->leaf[pb->pp - 1])
            return np_err_set(err, NP_ERR_INTERNAL, "plan: parameter %s is shared by stages "
                              "other than the first and the last", pr->g0->name);
        r = nn_all_reduce(g, r, NN_COMM_PP, 2, NN_REDUCE_SUM);
        if (r) {
            r->ip[NN_COMM_IP_PEER] = NN_GROUP_ENDS;
            if (!tied_match[i])
                tied_match[i] = ++pb->next_match;
            r->ip[NN_COMM_IP_MATCH] = tied_match[i];
        }
    }
    if (mixed)
        r = nn_cast(g, r, NN_F32);
    if (pb->s->loss_scale > 0 && r) { /* unscaled (and checked, nn_pb_grad_step) */
        int k0 = nn_graph_n_nodes(g);
        r = nn_scale(g, r, 1.0 / pb->s->loss_scale);
        if (!nn_ps_mark_phase(ps, k0, NN_END_UNSCALE))
            return nn_pb_graph_fail(g, err);
    }
    int64_t mne[NN_MAX_DIMS];
    int mnd = leaf->ndim;
    memcpy(mne, leaf->ne, sizeof mne);
    nn_tensor *master = leaf;
    if (shard12) {
        mnd = 1;
        mne[0] = (nn_numel(leaf) + pb->dp - 1) / pb->dp;
        master = nn_pb_state(ps, pr, NN_LEAF_MASTER, "master", NN_ROLE_OPTSTATE, NN_F32, 1, mne,
                             true);
    } else if (mixed) {
        master = nn_pb_state(ps, pr, NN_LEAF_MASTER, "master", NN_ROLE_OPTSTATE, NN_F32, mnd,
                             mne, zero == 3);
    }
    if (!master || !r)
        return nn_pb_graph_fail(g, err);
    nn_pupd up = {pr, i, leaf, master, r, mnd, {0}, mixed, shard12};
    memcpy(up.mne, mne, sizeof mne);
    if (!o->step)
        o->upd[o->n_upd++] = up; /* after every gradient's clipping (nn_pb_grad_step) */
    else if (!nn_pb_update(ps, &up, o->ags, &o->n_ags))
        return nn_pb_graph_fail(g, err);
    if (!nn_ps_mark_since(ps, from, NN_HINT_END, false))
        return nn_pb_graph_fail(g, err);
    return NP_OK;
}

static np_status nn_pb_optimizer(nn_pb *pb, nn_pstate *ps, int *tied_match)
{
    nn_graph *g = ps->g;
    np_err *err = pb->err;
    uint64_t bucket_bytes = (uint64_t)(pb->s->bucket_mb * 1024.0 * 1024.0);
    size_t n = (size_t)pb->n_params + 1;
    /* with loss scaling or clipping every update waits for the global steps over all the
     * gradients (nn_pb_grad_step); else each follows its gradient */
    nn_pb_opt o = {.red = nn_malloc(n * sizeof *o.red), .ags = nn_malloc(n * sizeof *o.ags),
                   .sps = nn_malloc(n * sizeof *o.sps), .loc = nn_malloc(n * sizeof *o.loc),
                   .step = pb->s->loss_scale <= 0 && pb->s->clip_grad <= 0};
    o.upd = o.step ? NULL : nn_malloc(n * sizeof *o.upd);
    np_status st = NP_OK;
    if (!o.red || !o.ags || !o.sps || !o.loc || (!o.step && !o.upd))
        st = np_err_set(err, NP_ERR_NOMEM, "out of memory building the plan");
    for (int i = 0; i < pb->n_params && st == NP_OK; i++) {
        nn_pparam *pr = &pb->params[i];
        nn_tensor *leaf = pr->leaf[ps->st], *acc = NULL, *r = NULL;
        if (!leaf || !leaf->grad)
            continue;
        st = nn_pb_accumulate(pb, ps, pr, &o, &acc);
        if (st == NP_OK)
            st = nn_pb_reduce_dp(pb, ps, acc, leaf->grad->chunk, &o, &r);
        if (st == NP_OK)
            st = nn_pb_param_end(pb, ps, pr, i, r, tied_match, &o);
    }
    if (st == NP_OK && !o.step && !nn_pb_grad_step(ps, o.upd, o.n_upd, tied_match))
        st = nn_pb_graph_fail(g, err);
    for (int k = 0; k < o.n_upd && st == NP_OK; k++)
        if (!nn_pb_update(ps, &o.upd[k], o.ags, &o.n_ags))
            st = nn_pb_graph_fail(g, err);
    if (st == NP_OK &&
        (!nn_pb_buckets(ps, o.red, o.n_red, bucket_bytes) ||
         !nn_pb_buckets(ps, o.ags, o.n_ags, bucket_bytes) ||
         !nn_pb_buckets(ps, o.sps, o.n_sps, bucket_bytes) ||
         !nn_pb_buckets(ps, o.loc, o.n_loc, UINT64_MAX)))
        st = np_err_set(err, NP_ERR_NOMEM, "out of memory building the plan");
    free(o.red);
    free(o.ags);
    free(o.sps);
    free(o.loc);
    free(o.upd);
    return st;
}

/* ---- the whole ---- */

static void nn_pb_free(nn_pb *pb)
{
    if (pb->val) {
        for (int i = 0; i <= pb->max_id0; i++) {
            nn_pv *v = pb->val[i];
            while (v) {
                nn_pv *next = v->next;
                for (nn_pv *r = v->resolved; r;) {
                    nn_pv *rr = r->resolved;
                    free(r);
                    r = rr;
                }
                free(v);
                v = next;
            }
        }
    }
    for (int i = 0; pb->params && i < pb->n_params; i++) {
        free(pb->params[i].leaf);
        free(pb->params[i].gathered);
    }
    for (int s = 0; pb->stages && s < pb->pp; s++) {
        free(pb->stages[s].inputs);
        free(pb->stages[s].leaves);
        nn_graph_free(pb->stages[s].g);
    }
    free(pb->stages);
    free(pb->params);
    free(pb->param);
    free(pb->val);
    free(pb->unit);
    free(pb->chunk);
    free(pb->needs_grad);
    free(pb->use_start);
    free(pb->uses);
    free(pb->bounds);
    nn_graph_free(pb->g0);
}

static np_status nn_pb_setup(nn_pb *pb)
{
    np_err *err = pb->err;
    nn_graph *g0 = pb->g0;
    int n = nn_graph_n_nodes(g0), M = pb->max_id0 + 1;
    pb->unit = nn_malloc((size_t)M * sizeof *pb->unit);
    pb->chunk = nn_malloc((size_t)M * sizeof *pb->chunk);
    pb->needs_grad = nn_calloc((size_t)M, sizeof *pb->needs_grad);
    pb->val = nn_calloc((size_t)M, sizeof *pb->val);
    pb->param = nn_calloc((size_t)M, sizeof *pb->param);
    pb->use_start = nn_calloc((size_t)M + 1, sizeof *pb->use_start);
    pb->params = nn_calloc((size_t)n + 1, sizeof *pb->params);
    pb->stages = nn_calloc((size_t)pb->pp, sizeof *pb->stages);
    if (!pb->unit || !pb->chunk || !pb->needs_grad || !pb->val || !pb->param || !pb->use_start ||
        !pb->params || !pb->stages)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory building the plan");
    int total = 0;
    for (int i = 0; i < n; i++) {
        nn_tensor *x = nn_graph_node(g0, i);
        for (int s = 0; s < x->n_src; s++)
            pb->use_start[x->src[s]->id + 1]++;
        total += x->n_src;
    }
    for (int i = 0; i < M; i++)
        pb->use_start[i + 1] += pb->use_start[i];
    pb->uses = nn_malloc(((size_t)total + 1) * sizeof *pb->uses);
    int *fill = nn_calloc((size_t)M, sizeof *fill);
    if (!pb->uses || !fill) {
        free(fill);
        return np_err_set(err, NP_ERR_NOMEM, "out of memory building the plan");
    }
    for (int i = 0; i < n; i++) {
        nn_tensor *x = nn_graph_node(g0, i);
        for (int s = 0; s < x->n_src; s++)
            pb->uses[pb->use_start[x->src[s]->id] + fill[x->src[s]->id]++] = i;
    }
    free(fill);
    /* parameters, seen through their casts (mixed precision) */
    for (int i = 0; i < n; i++) {
        nn_tensor *x = nn_graph_node(g0, i);
        pb->needs_grad[x->id] = x->trainable;
        for (int s = 0; s < x->n_src; s++)
            pb->needs_grad[x->id] = pb->needs_grad[x->id] || pb->needs_grad[x->src[s]->id];
        if (x->op == NN_OP_LEAF && x->trainable) {
            nn_pparam *p = &pb->params[pb->n_params++];
            p->g0 = x;
            p->work = x->dtype;
            p->leaf = nn_calloc((size_t)pb->pp, sizeof *p->leaf);
            p->gathered = nn_calloc((size_t)pb->n_chunks, sizeof *p->gathered);
            if (!p->leaf || !p->gathered)
                return np_err_set(err, NP_ERR_NOMEM, "out of memory building the plan");
            pb->param[x->id] = p;
            bool cast = false, plain = false;
            for (int u = pb->use_start[x->id]; u < pb->use_start[x->id + 1]; u++) {
                nn_tensor *c = nn_graph_node(g0, pb->uses[u]);
                if (c->op == NN_OP_CAST)
                    cast = true, p->work = c->dtype;
                else
                    plain = true;
            }
            if (cast && plain)
                return np_err_set(err, NP_ERR_INCONSISTENT,
                                  "plan: parameter %s is used both in f32 and through a cast",
                                  x->name);
        } else if (x->op == NN_OP_CAST && x->src[0]->op == NN_OP_LEAF && x->src[0]->trainable) {
            pb->param[x->id] = pb->param[x->src[0]->id];
        }
    }
    for (int s = 0; s < pb->pp; s++) {
        pb->stages[s].g = nn_graph_new((uint64_t)(1000 + s));
        pb->stages[s].inputs = nn_calloc((size_t)M, sizeof *pb->stages[s].inputs);
        if (!pb->stages[s].g || !pb->stages[s].inputs)
            return np_err_set(err, NP_ERR_NOMEM, "out of memory building the plan");
    }
    return NP_OK;
}

void nn_plan_free(nn_plan *p)
{
    if (!p)
        return;
    for (int c = 0; p->classes && c < p->n_classes; c++) {
        nn_plan_class *cls = &p->classes[c];
        for (int b = 0; cls->blocks && b < cls->n_blocks; b++) {
            for (int e = 0; e < cls->blocks[b].n_entries; e++) {
                free(cls->blocks[b].entries[e].nodes);
                free(cls->blocks[b].entries[e].deps);
            }
            free(cls->blocks[b].entries);
        }
        free(cls->blocks);
        free(cls->sched);
        free(cls->issue);
        free(cls->leaves);
        nn_graph_free(cls->g);
    }
    free(p->classes);
    free(p->chunk_layer_first);
    free(p->chunk_layer_last);
    nn_mesh_free(&p->mesh);
    free(p);
}

/* The builder proper: m0 is the forward graph of one micro-batch (borrowed: the builder
 * reads it only), name the model's name in messages. */
static np_status nn_plan_core(const char *name, const nn_model *m0, int64_t batch, int64_t micro,
                              const nn_strategy *s_in, const nn_optim *opt,
                              const arch_config *arch, nn_plan **out,
                              np_err *err)
{
    np_status st;
    nn_plan *p = nn_calloc(1, sizeof *p);
    if (!p)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory building the plan");
    p->s = *s_in;
    if (p->s.schedule != NN_PP_INTERLEAVED)
        p->s.virtual_stages = 1;
    if (p->s.bucket_mb == 0)
        p->s.bucket_mb = 25.0;
    snprintf(p->model, sizeof p->model, "%s", name);
    p->batch = batch;
    p->microbatch = micro;
    p->n_micro = (int)(batch / p->s.dp / micro);
    p->optim = *opt;
    p->compute = NN_F32;
    p->n_chunks = p->s.pp * p->s.virtual_stages;
    p->n_classes = p->s.pp;
    p->hbm_bytes = arch ? arch->chip.hbm_bytes : 0;
    p->chunk_layer_first = nn_calloc((size_t)p->n_chunks, sizeof *p->chunk_layer_first);
    p->chunk_layer_last = nn_calloc((size_t)p->n_chunks, sizeof *p->chunk_layer_last);
    p->classes = nn_calloc((size_t)p->n_classes, sizeof *p->classes);
    nn_pb pb = {0};
    pb.err = err;
    if (!p->chunk_layer_first || !p->chunk_layer_last || !p->classes) {
        st = np_err_set(err, NP_ERR_NOMEM, "out of memory building the plan");
        goto fail;
    }
    if ((st = nn_mesh_place(&p->mesh, p->s.dp, p->s.tp, p->s.pp, p->s.placement, arch, err)) != NP_OK)
        goto fail;
    pb.m0 = *m0;
    pb.g0 = m0->g;
    pb.plan = p;
    pb.s = &p->s;
    pb.tp = p->s.tp;
    pb.dp = p->s.dp;
    pb.pp = p->s.pp;
    pb.zero = p->s.dp > 1 ? p->s.zero : 0;
    pb.sp = p->s.sp;
    pb.n_chunks = p->n_chunks;
    pb.max_id0 = nn_graph_max_id(pb.g0);
    p->seq = m0->seq > 0 ? m0->seq : 1;
    for (int i = 0; i < nn_graph_n_nodes(pb.g0); i++) { /* its attentions, fused or not */
        const nn_tensor *t = nn_graph_node(pb.g0, i);
        p->attention_fused += t->op == NN_OP_ATTENTION && t->region == NN_REGION_FORWARD;
        p->attention_composite += t->op == NN_OP_SOFTMAX && t->attn_core;
        if (t->op == NN_OP_DROPOUT && t->region == NN_REGION_FORWARD && t->fp[0] > p->dropout)
            p->dropout = t->fp[0];
    }
    if ((st = nn_pb_setup(&pb)) != NP_OK || (st = nn_pb_partition(&pb, p)) != NP_OK ||
        (st = nn_pb_forward(&pb)) != NP_OK || (st = nn_pb_backward(&pb, p)) != NP_OK)
        goto fail;
    for (int i = 0; i < pb.n_params; i++)
        if (pb.params[i].work != NN_F32)
            p->compute = pb.params[i].work;
    p->vocab_padded = pb.vocab_shard * pb.tp == pb.vocab ? 0 : pb.vocab_shard * pb.tp;
    for (int i = 0; i < pb.n_bounds; i++)
        p->pp_scattered += pb.bounds[i].scattered;
    /* the tied parameters' all-reduces, then the found_inf and norm all-reduces over pp */
    int *tied_match = nn_calloc((size_t)pb.n_params + 3, sizeof *tied_match);
    if (!tied_match) {
        st = np_err_set(err, NP_ERR_NOMEM, "out of memory building the plan");
        goto fail;
    }
    for (int s = 0; s < pb.pp && st == NP_OK; s++) {
        nn_pstate ps = {&pb, s, pb.stages[s].g, NULL, 0, 0};
        if ((st = nn_pb_recompute(&pb, ps.g)) == NP_OK && (st = nn_pb_optimizer(&pb, &ps, tied_match)) == NP_OK)
            st = nn_pb_entries(&pb, p, &ps);
        free(ps.mark);
        if (st == NP_OK && (st = nn_graph_status(ps.g, err)) == NP_OK) {
            nn_plan_class *c = &p->classes[s];
            c->stage = s;
            c->g = ps.g;
            pb.stages[s].g = NULL;
            c->leaves = pb.stages[s].leaves;
            c->n_leaves = pb.stages[s].n_leaves;
            pb.stages[s].leaves = NULL;
            c->layer_first = c->layer_last = -1;
            for (int k = s; k < p->n_chunks; k += pb.pp) {
                if (p->chunk_layer_first[k] >= 0 && c->layer_first < 0)
                    c->layer_first = p->chunk_layer_first[k];
                if (p->chunk_layer_last[k] >= 0)
                    c->layer_last = p->chunk_layer_last[k];
            }
        }
    }
    free(tied_match);
    if (st != NP_OK || (st = nn_pb_schedules(p, err)) != NP_OK ||
        (np_verify_on() && (st = nn_plan_verify(p, err)) != NP_OK))
        goto fail;
    pb.g0 = NULL; /* borrowed */
    nn_pb_free(&pb);
    *out = p;
    return NP_OK;
fail:
    pb.g0 = NULL;
    nn_pb_free(&pb);
    nn_plan_free(p);
    return st;
}

np_status nn_plan_build(const nn_model_desc *d, const nn_model_opts *opts,
                        const nn_strategy *s, const nn_optim *opt, const arch_config *arch,
                        nn_plan **out, np_err *err)
{
    *out = NULL;
    int64_t batch = 0, micro = 0;
    np_status st = nn_plan_validate(d, opts, s, &batch, &micro, err);
    if (st != NP_OK)
        return st;
    nn_model m0;
    nn_model_opts o0 = *opts;
    o0.batch = micro;
    int n_fused;
    if ((st = nn_model_build(d, &o0, &m0, err)) == NP_OK && s->fuse_attention)
        st = nn_pass_fuse_attention(m0.g, &n_fused, err);
    if (st == NP_OK && s->fuse_softmax)
        st = nn_pass_fuse_softmax(m0.g, &n_fused, err);
    if (st == NP_OK)
        st = nn_plan_core(d->name, &m0, batch, micro, s, opt, arch, out, err);
    nn_graph_free(m0.g);
    return st;
}

np_status nn_plan_build_graph(const nn_model *m, const char *name, int64_t batch,
                              const nn_strategy *s, const nn_optim *opt, const arch_config *arch,
                              nn_plan **out, np_err *err)
{
    *out = NULL;
    int64_t micro = 0;
    if (!m->g || !m->loss || m->batch < 1)
        return np_err_set(err, NP_ERR_MISSING, "plan: %s needs a graph, a loss and its micro-batch size",
                          name);
    if (s->fuse_attention || s->fuse_softmax)
        return np_err_set(err, NP_ERR_USAGE, "plan: %s: %s needs nn_plan_build (this graph is "
                          "only read: run nn_pass_fuse_%s on it first)", name,
                          s->fuse_attention ? "fuse_attention" : "fuse_softmax",
                          s->fuse_attention ? "attention" : "softmax");
    nn_strategy s2 = *s;
    s2.microbatch = m->batch;
    np_status st = nn_plan_validate_common(&s2, batch, &micro, err);
    if (st != NP_OK)
        return st;
    if (nn_graph_status(m->g, err) != NP_OK)
        return err->status;
    return nn_plan_core(name, m, batch, micro, &s2, opt, arch, out, err);
}
