/* lower.c — the lowering's core (see lower.h, lower_impl.h): what each item becomes, where
 * every buffer lives, the kernels and communication in order; and the front end of a graph. */
#include "lower.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "isa_asm.h"
#include "lower_impl.h"
#include "pass.h"
#include "verify.h"

/* ---- the program and its context ----------------------------------------------------------- */

void lower_prog_free(lower_prog *lp)
{
    if (!lp)
        return;
    isa_program_free(lp->prog);
    free(lp->steps);
    free(lp->comm);
    free(lp->kind);
    free(lp->addr);
    free(lp);
}

isa_program *lower_prog_take(lower_prog *lp)
{
    isa_program *p = lp->prog;
    lp->prog = NULL;
    return p;
}

uint64_t lower_addr_mb(const lower_prog *lp, const nn_tensor *t, int mb)
{
    if (!t || t->id < 0 || t->id > lp->max_id)
        return UINT64_MAX;
    const uint64_t *a = &lp->addr[(size_t)t->id * lp->n_slots];
    if (mb >= 0 && (uint32_t)mb + 1 < lp->n_slots && a[mb + 1] != UINT64_MAX)
        return a[mb + 1];
    return a[0];
}

uint64_t lower_addr(const lower_prog *lp, const nn_tensor *t) { return lower_addr_mb(lp, t, -1); }

/* ---- the memo ------------------------------------------------------------------------------ */

typedef struct lw_memo_graph {
    const nn_graph *g;
    int max_id;
    bool *checked;
    kc_tiling *tiling;
} lw_memo_graph;

struct lower_memo {
    lw_memo_graph *v;
    uint32_t n, cap;
};

lower_memo *lower_memo_new(void) { return calloc(1, sizeof(lower_memo)); }

void lower_memo_free(lower_memo *m)
{
    if (!m)
        return;
    for (uint32_t i = 0; i < m->n; i++) {
        free(m->v[i].checked);
        free(m->v[i].tiling);
    }
    free(m->v);
    free(m);
}

/* The memo's arrays for graph g (made on first use); NULL when out of memory. */
static lw_memo_graph *lw_memo_of(lower_memo *m, const nn_graph *g, int max_id)
{
    for (uint32_t i = 0; i < m->n; i++)
        if (m->v[i].g == g && m->v[i].max_id == max_id)
            return &m->v[i];
    if (m->n == m->cap) {
        uint32_t cap = m->cap ? 2 * m->cap : 8;
        lw_memo_graph *v = realloc(m->v, cap * sizeof *v);
        if (!v)
            return NULL;
        m->v = v, m->cap = cap;
    }
    lw_memo_graph *x = &m->v[m->n];
    x->g = g;
    x->max_id = max_id;
    x->checked = calloc((size_t)max_id + 1, sizeof *x->checked);
    x->tiling = calloc((size_t)max_id + 1, sizeof *x->tiling);
    if (!x->checked || !x->tiling) {
        free(x->checked);
        free(x->tiling);
        return NULL;
    }
    return &m->v[m->n++];
}

np_status lw_ctx_init(lw_ctx *w, const arch_config *cfg, const lower_opts *o, int max_id,
                      uint32_t n_slots, uint32_t chip, np_err *err)
{
    memset(w, 0, sizeof *w);
    w->cfg = cfg;
    w->o = o ? *o : (lower_opts){0};
    w->n_slots = n_slots;
    size_t n = ((size_t)max_id + 1) * n_slots;
    lower_prog *lp = w->lp = calloc(1, sizeof *lp);
    if (!lp || !(w->slot = malloc(n * sizeof *w->slot)) ||
        !(lp->kind = calloc((size_t)max_id + 1, sizeof *lp->kind)) ||
        !(lp->addr = malloc(n * sizeof *lp->addr)))
        return np_err_set(err, NP_ERR_NOMEM, "out of memory lowering a step");
    for (size_t i = 0; i < n; i++) {
        w->slot[i] = LW_NONE;
        lp->addr[i] = UINT64_MAX;
    }
    lp->max_id = max_id;
    lp->n_slots = n_slots;
    lp->chip = chip;
    lp->cores = w->o.cores ? w->o.cores : (uint32_t)cfg->chip.cores;
    w->cts_addr = UINT64_MAX;
    return NP_OK;
}

void lw_ctx_fini(lw_ctx *w)
{
    kc_prog_free(w->p);
    free(w->it);
    free(w->slot);
    free(w->fl);
    if (!w->o.memo) {
        free(w->checked);
        free(w->tiling);
    }
    lower_prog_free(w->lp);
    memset(w, 0, sizeof *w);
}

np_status lw_ctx_graph(lw_ctx *w, const nn_graph *g, np_err *err)
{
    int max_id = w->lp->max_id;
    if (w->o.memo) {
        lw_memo_graph *m = lw_memo_of(w->o.memo, g, max_id);
        if (!m)
            return np_err_set(err, NP_ERR_NOMEM, "out of memory lowering a step");
        w->checked = m->checked;
        w->tiling = m->tiling;
        return NP_OK;
    }
    w->checked = calloc((size_t)max_id + 1, sizeof *w->checked);
    w->tiling = calloc((size_t)max_id + 1, sizeof *w->tiling);
    if (!w->checked || !w->tiling)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory lowering a step");
    return NP_OK;
}

np_status lw_item_add(lw_ctx *w, nn_tensor *t, int32_t inst, const int32_t *src,
                      const nn_plan_entry *e, bool lead, int32_t *out, np_err *err)
{
    if (w->n == w->cap) {
        int32_t cap = w->cap ? 2 * w->cap : 256;
        lw_item *v = realloc(w->it, (size_t)cap * sizeof *v);
        if (!v)
            return np_err_set(err, NP_ERR_NOMEM, "out of memory lowering a step");
        w->it = v, w->cap = cap;
    }
    lw_item *it = &w->it[w->n];
    memset(it, 0, sizeof *it);
    it->t = t;
    it->inst = inst;
    for (int s = 0; s < t->n_src; s++)
        it->src[s] = src[s];
    it->e = e;
    it->lead = lead;
    it->block = -1;
    it->reader = it->root = it->head = it->buf = it->step = it->bucket = it->pair = LW_NONE;
    it->all_mm = true;
    it->addr = UINT64_MAX;
    w->slot[(size_t)t->id * w->n_slots + (size_t)(inst + 1)] = w->n;
    if (out)
        *out = w->n;
    w->n++;
    return NP_OK;
}

/* ---- what each item becomes ------------------------------------------------------------------ */

/* A permute that swaps the last two dims and keeps the others (the framework's rule). */
static bool lw_is_transpose(const nn_tensor *t) { return nn_is_transpose(t); }

bool lower_is_transpose(const nn_tensor *t) { return lw_is_transpose(t); }

static void lw_readers(lw_ctx *w)
{
    for (int32_t i = 0; i < w->n; i++) {
        lw_item *it = &w->it[i];
        for (int s = 0; s < it->t->n_src; s++) {
            bool again = false; /* an item reading one source twice is one reader */
            for (int r = 0; r < s; r++)
                again = again || it->src[r] == it->src[s];
            if (again)
                continue;
            lw_item *src = &w->it[it->src[s]];
            src->uses++;
            src->reader = i;
            src->all_mm = src->all_mm && it->t->op == NN_OP_MATMUL;
        }
    }
}

/* The chain of epilogue steps after kernel head h (a fusion group of nn_pass_fuse): fills the
 * steps' items and returns the last, whose value the kernel stores. */
static int32_t lw_chain(lw_ctx *w, int32_t h, int32_t *steps, int *n_steps)
{
    *n_steps = 0;
    const nn_tensor *ht = w->it[h].t;
    const kc_kernel_def *d = kc_kernel_find(ht->op);
    if (!d || !(d->flags & KC_DEF_EPILOGUE) || ht->fusion_group != ht->id)
        return h;
    int32_t cur = h;
    while (*n_steps < KC_MAX_EPI && w->it[cur].uses == 1 && !w->it[cur].t->is_output &&
           !w->it[cur].keep) {
        int32_t m = w->it[cur].reader;
        const nn_tensor *arg;
        if (w->it[m].t->fusion_group != ht->id || w->it[m].block != w->it[h].block ||
            w->it[m].inst != w->it[h].inst || !lw_epi_step_ok(w->it[cur].t, w->it[m].t, &arg))
            break;
        if (arg) { /* the kernel runs at the head's place: its operand must be stored by then */
            int32_t a = w->it[m].src[w->it[m].t->src[0] == arg ? 0 : 1];
            if (a > h || (w->it[a].kind == LOWER_NODE_FUSED && w->it[a].root != a))
                break;
        }
        steps[(*n_steps)++] = m;
        cur = m;
    }
    return cur;
}

/* Each attention kernel computes the log-sum-exp an attention_lse of the same q, k, mask and
 * scale (its backward's) needs, as its second output: the lse item is paired with it and has
 * no kernel of its own (kc_attn.c). An attention_lse without one (recomputation) compiles
 * alone. */
static np_status lw_pair_attention(lw_ctx *w, np_err *err)
{
    int32_t n_lse = 0; /* the attention_lse kernels, in order */
    for (int32_t i = 0; i < w->n; i++)
        n_lse += w->it[i].kind == LOWER_NODE_KERNEL && w->it[i].t->op == NN_OP_ATTENTION_LSE;
    if (!n_lse)
        return NP_OK;
    int32_t *lse = malloc((size_t)n_lse * sizeof *lse);
    if (!lse)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory pairing attentions");
    for (int32_t i = 0, q = 0; i < w->n; i++)
        if (w->it[i].kind == LOWER_NODE_KERNEL && w->it[i].t->op == NN_OP_ATTENTION_LSE)
            lse[q++] = i;
    for (int32_t i = 0; i < w->n; i++) {
        lw_item *a = &w->it[i];
        if (a->kind != LOWER_NODE_KERNEL || a->t->op != NN_OP_ATTENTION)
            continue;
        for (int32_t q = 0; q < n_lse; q++) {
            int32_t j = lse[q];
            lw_item *l = &w->it[j];
            if (j > i && l->pair == LW_NONE && l->inst == a->inst && l->src[0] == a->src[0] &&
                l->src[1] == a->src[1] && l->t->ip[0] == a->t->ip[0] &&
                l->t->fp[0] == a->t->fp[0]) {
                a->pair = j, l->pair = i;
                break;
            }
        }
    }
    free(lse);
    return NP_OK;
}

/* Decides every item's kind and the item whose buffer holds its values (root). */
static np_status lw_classify(lw_ctx *w, np_err *err)
{
    char desc[256];
    for (int32_t i = 0; i < w->n; i++) {
        lw_item *it = &w->it[i];
        const nn_tensor *t = it->t;
        if (it->kind != LOWER_NODE_NONE) /* fused into an earlier head */
            continue;
        if (t->op == NN_OP_LEAF) {
            it->kind = LOWER_NODE_LEAF;
            it->root = i;
        } else if (lw_is_comm(t)) {
            if (!w->plan)
                return np_err_set(err, NP_ERR_INCONSISTENT, "%s (node '%s'): a communication op "
                                  "in the graph of one chip (lower a plan's rank instead)",
                                  lower_node_desc(t, desc, sizeof desc), t->name);
            it->kind = LOWER_NODE_COMM;
            it->root = lw_comm_out_bytes(w, i) ? i : w->it[it->src[0]].root;
            if (t->op == NN_OP_RECV)
                it->root = i;
        } else if (lower_node_is_view(t) || t->op == NN_OP_GROUP_COPY) {
            it->kind = LOWER_NODE_VIEW;
            it->root = w->it[it->src[0]].root;
        } else if (!w->o.no_fuse && lw_is_transpose(t) && it->uses > 0 && it->all_mm &&
                   !t->is_output && w->it[it->src[0]].kind != LOWER_NODE_FOLDED) {
            it->kind = LOWER_NODE_FOLDED;
            it->root = w->it[it->src[0]].root;
        } else {
            it->kind = LOWER_NODE_KERNEL;
            if (nn_op_flags(t->op) & NN_OPF_UPDATE) {
                it->root = w->it[it->src[0]].root;
                continue;
            }
            int32_t steps[KC_MAX_EPI], last = i;
            int ns = 0;
            if (!w->o.no_fuse)
                last = lw_chain(w, i, steps, &ns);
            it->root = last;
            for (int s = 0; s < ns; s++) {
                w->it[steps[s]].kind = LOWER_NODE_FUSED;
                w->it[steps[s]].root = last;
                w->it[steps[s]].head = i;
            }
        }
    }
    if (lw_pair_attention(w, err) != NP_OK)
        return err->status;
    for (int32_t i = 0; i < w->n; i++) /* every instance of a node becomes the same */
        w->lp->kind[w->it[i].t->id] = w->it[i].kind;
    for (int32_t i = 0; i < w->n; i++) { /* the first op no kernel computes, before anything */
        const lw_item *it = &w->it[i];
        if (it->kind == LOWER_NODE_KERNEL && !lw_kernel_def(it->t))
            return np_err_set(err, NP_ERR_MISSING, "lower: no kernel for %s yet (node '%s')",
                              lower_node_desc(it->t, desc, sizeof desc), it->t->name);
    }
    return NP_OK;
}

/* ---- buffers ------------------------------------------------------------------------------ */

void lw_symbol_name(const nn_tensor *t, const char *suffix, char *buf, size_t n)
{
    size_t k = 0;
    for (const char *s = t->name; *s && k + 1 < n && k < 40; s++, k++) {
        char c = *s;
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '.' ||
                  c == '$' || (k && c >= '0' && c <= '9');
        buf[k] = ok ? c : '_';
    }
    if (!k && n > 1)
        buf[k++] = 't';
    snprintf(buf + k, n - k, "%s", suffix);
}

/* t's values (fp32, vals) as bytes of its dtype. */
static void lw_pack(const nn_tensor *t, const float *vals, uint8_t *out)
{
    int64_t n = nn_numel(t);
    for (int64_t i = 0; i < n; i++) {
        float v = vals[i];
        switch (t->dtype) {
        case NN_BF16: {
            uint16_t b = isa_f32_to_bf16(v);
            memcpy(out + 2 * i, &b, 2);
            break;
        }
        case NN_F16: {
            uint16_t b = isa_f32_to_fp16(v);
            memcpy(out + 2 * i, &b, 2);
            break;
        }
        case NN_I8:
            out[i] = (uint8_t)(int8_t)(v > 127 ? 127 : v < -128 ? -128 : v);
            break;
        case NN_I32: {
            int32_t x = (int32_t)v;
            memcpy(out + 4 * i, &x, 4);
            break;
        }
        default:
            memcpy(out + 4 * i, &v, 4);
            break;
        }
    }
}

/* The constant value a leaf item has in this program, or NULL: a constant with values, or a
 * plan's rank value (one i32 for this rank). */
static const float *lw_const_value(const lw_ctx *w, const lw_item *it, float *scratch)
{
    const nn_tensor *t = it->t;
    if (w->plan) {
        const nn_plan_leaf *l = nn_plan_leaf_of(w->cls, t);
        if (l && l->kind == NN_LEAF_RANKVALUE) {
            *scratch = (float)nn_plan_rank_value(w->plan, w->rank, l);
            return scratch;
        }
        if (l && l->kind == NN_LEAF_CONST && t->data)
            return t->data;
        if (l)
            return NULL;
    }
    return t->role == NN_ROLE_CONST && t->data ? t->data : NULL;
}

/* The leaves of bucket `lead` (lw_comm_buckets) in one block, in the entry's order. */
static np_status lw_bucket_alloc(lw_ctx *w, int32_t lead, np_err *err)
{
    uint64_t bytes = 0, addr;
    for (int32_t k = lead; k < w->n && w->it[k].e == w->it[lead].e &&
                           w->it[k].inst == w->it[lead].inst; k++)
        bytes += nn_nbytes(w->it[w->it[w->it[k].src[0]].root].t);
    char name[64];
    lw_symbol_name(w->it[lead].t, "$bucket", name, sizeof name);
    if (isa_program_symbol(kc_prog_program(w->p), name))
        snprintf(name + strlen(name), sizeof name - strlen(name), "%d", lead);
    if (kc_prog_bss(w->p, name, bytes, &addr, err) != NP_OK)
        return err->status;
    for (int32_t k = lead; k < w->n && w->it[k].e == w->it[lead].e &&
                           w->it[k].inst == w->it[lead].inst; k++) {
        lw_item *leaf = &w->it[w->it[w->it[k].src[0]].root];
        leaf->addr = addr;
        addr += nn_nbytes(leaf->t);
    }
    w->lp->persistent_bytes += bytes;
    return NP_OK;
}

static np_status lw_leaves(lw_ctx *w, np_err *err)
{
    lower_prog *lp = w->lp;
    isa_emit *e = kc_prog_emit(w->p);
    for (int32_t i = 0; i < w->n; i++) {
        lw_item *it = &w->it[i];
        if (it->kind != LOWER_NODE_LEAF || it->addr != UINT64_MAX)
            continue;
        if (it->bucket != LW_NONE) {
            if (lw_bucket_alloc(w, it->bucket, err) != NP_OK)
                return err->status;
            continue;
        }
        char name[64], suffix[24];
        if (it->inst >= 0)
            snprintf(suffix, sizeof suffix, "$mb%d", it->inst);
        else
            suffix[0] = '\0';
        lw_symbol_name(it->t, suffix, name, sizeof name);
        if (!isa_name_ok(name, strlen(name)) || isa_program_symbol(kc_prog_program(w->p), name)) {
            snprintf(suffix + strlen(suffix), sizeof suffix - strlen(suffix), "$%d", it->t->id);
            lw_symbol_name(it->t, suffix, name, sizeof name);
        }
        uint64_t bytes = nn_nbytes(it->t), addr;
        if (!bytes)
            bytes = 1;
        float one;
        const float *cv = lw_const_value(w, it, &one);
        if (cv) {
            uint8_t *v = calloc(1, bytes);
            if (!v)
                return np_err_set(err, NP_ERR_NOMEM, "out of memory lowering constants");
            lw_pack(it->t, cv, v);
            np_status st = isa_emit_data(e, name, v, bytes, 64, &addr);
            free(v);
            if (st != NP_OK)
                return isa_emit_status(e, err);
        } else if (kc_prog_bss(w->p, name, bytes, &addr, err) != NP_OK) {
            return err->status;
        }
        it->addr = addr;
        lp->persistent_bytes += bytes;
    }
    return NP_OK;
}

/* Bytes of the buffer item i owns (its result; a reduce-scatter's working copy). */
static uint64_t lw_own_bytes(const lw_ctx *w, int32_t i)
{
    const lw_item *it = &w->it[i];
    if (it->kind == LOWER_NODE_COMM && it->t->op != NN_OP_RECV)
        return lw_comm_out_bytes(w, i);
    return nn_nbytes(it->t);
}

/* Program steps (kernels and comm entries, in order) and the arena's buffers: each stored
 * item lives from its step to its last reader's (outputs to the end). */
static np_status lw_arena(lw_ctx *w, np_err *err)
{
    lower_prog *lp = w->lp;
    int32_t n_steps = 0;
    lw_buf *bufs = calloc((size_t)w->n + 1, sizeof *bufs);
    uint32_t nb = 0;
    if (!bufs)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory planning the arena");
    for (int32_t i = 0; i < w->n; i++) {
        lw_item *it = &w->it[i];
        bool comm = it->kind == LOWER_NODE_COMM;
        if (it->kind != LOWER_NODE_KERNEL && !comm)
            continue;
        bool paired = it->t->op == NN_OP_ATTENTION_LSE && it->pair != LW_NONE;
        if ((!comm || it->lead) && !paired)
            n_steps++;
        it->step = paired ? w->it[it->pair].step : n_steps - 1; /* written by its attention */
        if (it->root != i && !(it->kind == LOWER_NODE_KERNEL && it->root != LW_NONE &&
                               w->it[it->root].kind == LOWER_NODE_FUSED))
            continue; /* in place (an update, an all-reduce of an accumulator) */
        int32_t r = it->root;
        if (w->it[r].buf != LW_NONE)
            continue;
        w->it[r].buf = (int32_t)nb;
        bufs[nb++] = (lw_buf){.bytes = r == i ? lw_own_bytes(w, i) : nn_nbytes(w->it[r].t),
                              .first = it->step, .last = it->step};
    }
    for (int32_t i = 0; i < w->n; i++) { /* fused items compute at their head's step */
        lw_item *it = &w->it[i];
        if (it->kind == LOWER_NODE_FUSED)
            it->step = w->it[it->head].step;
    }
    for (int32_t i = 0; i < w->n; i++) { /* every step reads its sources, writes its root */
        const lw_item *it = &w->it[i];
        if (it->step == LW_NONE)
            continue;
        for (int s = 0; s <= it->t->n_src; s++) {
            int32_t r = s < it->t->n_src ? w->it[it->src[s]].root : it->root;
            if (r != LW_NONE && w->it[r].buf != LW_NONE && bufs[w->it[r].buf].last < it->step)
                bufs[w->it[r].buf].last = it->step;
        }
    }
    for (int32_t i = 0; i < w->n; i++) {
        int32_t r = w->it[i].root;
        if ((w->it[i].t->is_output || w->it[i].keep) && r != LW_NONE && w->it[r].buf != LW_NONE)
            bufs[w->it[r].buf].last = n_steps - 1;
    }
    np_status st = NP_OK;
    if (nb && ((st = lw_arena_plan(bufs, nb, n_steps, &lp->arena_bytes, err)) != NP_OK ||
               (st = kc_prog_bss(w->p, "arena", lp->arena_bytes, &lp->arena_addr, err)) != NP_OK)) {
        free(bufs);
        return st;
    }
    for (int32_t i = 0; i < w->n; i++)
        if (w->it[i].buf != LW_NONE)
            w->it[i].addr = lp->arena_addr + bufs[w->it[i].buf].off;
    for (int32_t i = 0; i < w->n; i++) {
        const lw_item *it = &w->it[i];
        if (it->addr != UINT64_MAX)
            lp->addr[(size_t)it->t->id * w->n_slots + (size_t)(it->inst + 1)] = it->addr;
    }
    free(bufs);
    return NP_OK;
}

/* ---- layouts and kernels ------------------------------------------------------------------- */

static bool lw_dense(const kc_tensor *t)
{
    int64_t s = (int64_t)nn_dtype_size(t->dtype);
    for (int d = t->ndim - 1; d >= 0; d--) {
        if (t->shape[d] > 1 && t->stride[d] != s)
            return false;
        s *= t->shape[d];
    }
    return true;
}

/* The layout of item i's values, from its buffer or its sources' layouts. */
static np_status lw_layout(lw_ctx *w, int32_t i, np_err *err)
{
    lw_item *it = &w->it[i];
    const nn_tensor *t = it->t;
    kc_tensor *l = &it->lay;
    const lw_item *s0 = t->n_src ? &w->it[it->src[0]] : NULL;
    switch (it->kind) {
    case LOWER_NODE_LEAF:
        kc_tensor_of(l, it->addr, t);
        break;
    case LOWER_NODE_VIEW:
        if (!s0->has_lay || !lw_dense(&s0->lay))
            return np_err_set(err, NP_ERR_INTERNAL, "lower: view '%s' of a value without a "
                              "dense layout", t->name);
        /* a pipeline scatter's slice: this rank's part of its source, in place */
        kc_tensor_of(l, s0->lay.addr + (w->plan && nn_plan_node_is_offset_view(t)
                                            ? nn_plan_offset_view_bytes(w->plan, w->cls, w->rank, t)
                                            : 0), t);
        break;
    case LOWER_NODE_FOLDED: {
        *l = s0->lay;
        int a = l->ndim - 2, b = l->ndim - 1;
        int64_t sh = l->shape[a], st = l->stride[a];
        l->shape[a] = l->shape[b], l->stride[a] = l->stride[b];
        l->shape[b] = sh, l->stride[b] = st;
        break;
    }
    case LOWER_NODE_COMM:
        if (it->root != i) { /* in place, or a send (a view of what it sends) */
            kc_tensor_of(l, s0->lay.addr, t);
        } else {
            kc_tensor_of(l, it->addr, t);
            if (t->op == NN_OP_REDUCE_SCATTER) /* its part of the working copy */
                l->addr += lw_comm_part_offset(w, i);
        }
        break;
    default:
        if (nn_op_flags(t->op) & NN_OPF_UPDATE) {
            kc_tensor_of(l, s0->lay.addr, t);
        } else if (it->addr != UINT64_MAX) {
            kc_tensor_of(l, it->addr, t);
        } else {
            it->has_lay = false; /* fused, never stored */
            return NP_OK;
        }
        break;
    }
    it->has_lay = true;
    return NP_OK;
}

/* Where attention item i's kernel writes its lse: its paired attention_lse's buffer, else a
 * scratch buffer of the node's own (written, never read). */
static np_status lw_attention_lse(lw_ctx *w, int32_t i, kc_tensor *lse, np_err *err)
{
    const lw_item *it = &w->it[i];
    const nn_tensor *q = it->t->src[0];
    int64_t sh[3] = {q->ne[0], q->ne[1], q->ne[2]};
    if (it->pair != LW_NONE) {
        kc_tensor_of(lse, w->it[it->pair].addr, w->it[it->pair].t);
        return NP_OK;
    }
    char name[64];
    lw_symbol_name(it->t, "$lse", name, sizeof name);
    const isa_symbol *sym = isa_program_symbol(kc_prog_program(w->p), name);
    uint64_t addr;
    if (sym) {
        addr = sym->addr;
    } else {
        uint64_t bytes = (uint64_t)(sh[0] * sh[1] * sh[2]) * 4;
        if (kc_prog_bss(w->p, name, bytes, &addr, err) != NP_OK)
            return err->status;
        w->lp->persistent_bytes += bytes;
    }
    kc_tensor_dense(lse, addr, NN_F32, 3, sh);
    return NP_OK;
}

/* The seed dropout node t of an item at micro-batch instance inst (-1: none) draws with on
 * this rank: its own seed mixed with the micro-batch and, when t is split over tp, the rank's
 * tp coordinate (nn_dropout_seed), as the distributed executor draws it. */
static uint64_t lw_dropout_seed(const lw_ctx *w, const nn_tensor *t, int32_t inst)
{
    int c[NN_MESH_AXES] = {0};
    if (w->plan)
        nn_mesh_coords(&w->plan->mesh, w->rank, c);
    return nn_dropout_seed((uint64_t)t->ip[NN_DROPOUT_IP_SEED], inst < 0 ? 0 : inst,
                           t->ip[NN_DROPOUT_IP_TP] ? c[NN_MESH_TP] : 0);
}

/* Compiles kernel item i (its head) with its epilogue chain. */
static np_status lw_kernel(lw_ctx *w, int32_t i, np_err *err)
{
    lower_prog *lp = w->lp;
    lw_item *it = &w->it[i];
    const nn_tensor *t = it->t;
    kc_tensor in[KC_MAX_IN];
    for (int s = 0; s < t->n_src && s < KC_MAX_IN; s++) {
        const lw_item *src = &w->it[it->src[s]];
        if (!src->has_lay)
            return np_err_set(err, NP_ERR_INTERNAL, "lower: '%s' reads '%s', which has no "
                              "layout", t->name, src->t->name);
        in[s] = src->lay;
    }
    lower_step *st = &lp->steps[lp->n_steps++];
    bool update = nn_op_flags(t->op) & NN_OPF_UPDATE;
    int32_t last = update ? i : it->root;
    st->node = t;
    st->last = w->it[last].t;
    st->mb = it->inst;
    st->e = it->e;
    st->host_launch = w->launch_pending;
    w->launch_pending = false;
    kc_tensor out[KC_MAX_OUT];
    memset(out, 0, sizeof out);
    kc_tensor_of(&out[0], update ? 0 : w->it[last].addr, t);
    if (t->op == NN_OP_ATTENTION && lw_attention_lse(w, i, &out[1], err) != NP_OK)
        return err->status;
    if (lw_node_kernel(t, in, out, lp->chip, lp->cores, !w->checked[t->id], &st->k, err) !=
        NP_OK)
        return err->status;
    for (int a = 0; t->op == NN_OP_DROPOUT && a < st->k.n_attrs; a++)
        if (strcmp(st->k.attrs[a].name, "seed") == 0)
            st->k.attrs[a] = KC_INT("seed", lw_dropout_seed(w, t, it->inst));
    for (int32_t cur = i; cur != last;) { /* the epilogue: the chain to the stored item */
        int32_t m = w->it[cur].reader;
        const nn_tensor *arg;
        lw_epi_step_ok(w->it[cur].t, w->it[m].t, &arg);
        const lw_item *a = arg ? &w->it[w->it[m].src[w->it[m].t->src[0] == arg ? 0 : 1]] : NULL;
        if (a && !a->has_lay)
            return np_err_set(err, NP_ERR_INTERNAL, "lower: epilogue operand '%s' has no "
                              "layout", arg->name);
        kc_epi *ep = &st->k.epi[st->k.n_epi++];
        lw_epi_step(w->it[m].t, a ? &a->lay : NULL, ep);
        if (ep->op == NN_OP_DROPOUT)
            ep->seed = lw_dropout_seed(w, w->it[m].t, w->it[m].inst);
        st->n_fused++;
        cur = m;
    }
    if (last != i)
        kc_tensor_of(&st->k.out[0], w->it[last].addr, w->it[last].t);
    for (int s = 0; s < t->n_src; s++)
        st->n_fused += w->it[it->src[s]].kind == LOWER_NODE_FOLDED;
    /* communication in flight that this kernel's operands touch: wait for it first */
    int n_io = st->k.n_in + st->k.n_out;
    for (int s = 0; s < n_io + st->k.n_epi; s++) {
        const kc_tensor *x = s < st->k.n_in ? &st->k.in[s]
                             : s < n_io    ? &st->k.out[s - st->k.n_in]
                                           : &st->k.epi[s - n_io].arg;
        if (s >= n_io && !st->k.epi[s - n_io].has_arg)
            continue;
        if (lw_comm_wait(w, x->addr, x->addr + kc_tensor_extent(x), err) != NP_OK)
            return err->status;
    }
    char name[64], suffix[24];
    if (it->inst >= 0)
        snprintf(suffix, sizeof suffix, "$%d.mb%d", t->id, it->inst);
    else
        snprintf(suffix, sizeof suffix, "$%d", t->id);
    lw_symbol_name(t, suffix, name, sizeof name);
    st->k.name = name;
    /* a node's instances differ only in their addresses: they take its first one's tiling */
    kc_tiling *tl = &w->tiling[t->id];
    bool reuse = w->checked[t->id] && tl->n_attrs &&
                 st->k.n_attrs + (int)tl->n_attrs <= KC_MAX_ATTRS;
    for (unsigned a = 0; reuse && a < tl->n_attrs; a++)
        st->k.attrs[st->k.n_attrs++] = tl->attrs[a];
    if (kc_compile(w->p, &st->k, &st->res, err) != NP_OK)
        return err->status;
    if (!reuse && st->res.n_cands)
        *tl = st->res.cands[0];
    st->k.name = NULL; /* the symbol is in res.name */
    w->checked[t->id] = true;
    lp->flops += st->res.flops;
    lp->hbm_bytes += st->res.hbm_read_bytes + st->res.hbm_write_bytes;
    return NP_OK;
}

np_status lw_lower(lw_ctx *w, np_err *err)
{
    lower_prog *lp = w->lp;
    lw_readers(w);
    np_status st;
    if ((st = lw_classify(w, err)) != NP_OK)
        return st;
    kc_prog_opts po = {.chip = lp->chip, .cores = lp->cores, .tiles = w->o.tiles,
                       .fences_nocomm = true,
                       .stream_order = w->cfg->chip.kernel_gap_ns > 0 ||
                                       w->cfg->chip.kernel_launch_ns > 0,
                       .emit = {.bss_base = w->o.bss_base, .hbm_bytes = w->cfg->chip.hbm_bytes}};
    if (!(lp->steps = calloc((size_t)w->n + 1, sizeof *lp->steps)) ||
        !(lp->comm = calloc((size_t)w->n + 1, sizeof *lp->comm)))
        return np_err_set(err, NP_ERR_NOMEM, "out of memory lowering a step");
    if (w->plan)
        lw_comm_buckets(w);
    if ((st = kc_prog_new(w->cfg, &po, &w->p, err)) != NP_OK ||
        (st = lw_leaves(w, err)) != NP_OK || (st = lw_arena(w, err)) != NP_OK)
        return st;
    for (int32_t i = 0, call = 0; i < w->n; i++) {
        if ((st = lw_layout(w, i, err)) != NP_OK)
            return st;
        /* the host synchronizes: everything in flight done, every core at a barrier; the next
         * kernel is launched by the host (rf_launch) */
        if (w->it[i].sync) {
            if ((st = lw_comm_wait(w, 0, UINT64_MAX, err)) != NP_OK ||
                (st = kc_barrier(w->p, err)) != NP_OK)
                return st;
            w->launch_pending = true;
        }
        if (w->it[i].call && w->it[i].call != call) { /* a blocking p2p call begins */
            call = w->it[i].call;
            if ((st = lw_comm_cts(w, i, err)) != NP_OK)
                return st;
        }
        if (w->it[i].kind == LOWER_NODE_KERNEL &&
            !(w->it[i].t->op == NN_OP_ATTENTION_LSE && w->it[i].pair != LW_NONE))
            st = lw_kernel(w, i, err);
        else if (w->it[i].kind == LOWER_NODE_COMM && w->it[i].lead)
            st = lw_comm_emit(w, i, err);
        if (st != NP_OK)
            return st;
    }
    if ((st = lw_comm_wait(w, 0, UINT64_MAX, err)) != NP_OK || /* nothing left in flight */
        (st = kc_prog_finish(w->p, err)) != NP_OK)
        return st;
    lp->prog = kc_prog_take(w->p);
    kc_prog_free(w->p);
    w->p = NULL;
    return NP_OK;
}

/* ---- the front end of a graph --------------------------------------------------------------- */

np_status lower_graph(const arch_config *cfg, nn_graph *g, const lower_opts *opts,
                      lower_prog **out, np_err *err)
{
    *out = NULL;
    lw_ctx w;
    nn_tensor **order = NULL;
    int n = 0;
    np_status st = lw_ctx_init(&w, cfg, opts, nn_graph_max_id(g), 1, 0, err);
    if (st == NP_OK)
        st = lw_ctx_graph(&w, g, err);
    if (st == NP_OK)
        st = nn_schedule(g, &order, &n, err);
    if (st == NP_OK && !w.o.no_fuse)
        nn_pass_fuse(g);
    for (int i = 0; i < n && st == NP_OK; i++) {
        nn_tensor *t = order[i];
        int32_t src[NN_MAX_SRC];
        for (int s = 0; s < t->n_src; s++)
            src[s] = lw_slot_get(&w, t->src[s], -1);
        st = lw_item_add(&w, t, -1, src, NULL, false, NULL, err);
    }
    free(order);
    if (st == NP_OK)
        st = lw_lower(&w, err);
    if (st == NP_OK && np_verify_on())
        st = lower_prog_verify(w.lp, NULL, 0, err);
    if (st == NP_OK) {
        *out = w.lp;
        w.lp = NULL;
    }
    lw_ctx_fini(&w);
    return st;
}
