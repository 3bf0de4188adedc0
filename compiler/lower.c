/* lower.c — a training graph lowered to one program per core of a chip (see lower.h):
 * what each node becomes, where every buffer lives, and the kernels in schedule order. */
#include "lower.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "isa_asm.h"
#include "lower_impl.h"
#include "pass.h"

/* The lowering of one graph in progress. */
typedef struct lw_graph {
    const arch_config *cfg;
    nn_graph *g;
    nn_tensor **order;
    int n;
    int *pos;             /* by id: schedule position (-1: not scheduled) */
    int *uses;            /* by id: readers */
    nn_tensor **reader;   /* by id: the reader when uses is 1 */
    bool *all_mm;         /* by id: every reader is a matmul */
    const nn_tensor **root;   /* by id: the node whose buffer holds its values */
    const nn_tensor **head;   /* by id: the kernel head a fused node belongs to */
    int32_t *buf;         /* by id: index into bufs of its arena buffer, -1 */
    kc_tensor *lay;       /* by id: layout of its values (has_lay) */
    bool *has_lay;
    lower_prog *lp;
} lw_graph;

static void lw_graph_free(lw_graph *w)
{
    free(w->order);
    free(w->pos);
    free(w->uses);
    free(w->reader);
    free(w->all_mm);
    free(w->root);
    free(w->head);
    free(w->buf);
    free(w->lay);
    free(w->has_lay);
}

void lower_prog_free(lower_prog *lp)
{
    if (!lp)
        return;
    isa_program_free(lp->prog);
    free(lp->steps);
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

uint64_t lower_addr(const lower_prog *lp, const nn_tensor *t)
{
    return t && t->id >= 0 && t->id <= lp->max_id ? lp->addr[t->id] : UINT64_MAX;
}

/* ---- what each node becomes -------------------------------------------------------------- */

/* A permute that swaps the last two dims and keeps the others. */
static bool lw_is_transpose(const nn_tensor *t)
{
    if (t->op != NN_OP_PERMUTE || t->ndim < 2)
        return false;
    for (int d = 0; d < t->ndim - 2; d++)
        if (t->ip[d] != d)
            return false;
    return t->ip[t->ndim - 2] == t->ndim - 1 && t->ip[t->ndim - 1] == t->ndim - 2;
}

static np_status lw_readers(lw_graph *w, np_err *err)
{
    int ids = w->lp->max_id + 1;
    w->uses = calloc((size_t)ids, sizeof *w->uses);
    w->reader = calloc((size_t)ids, sizeof *w->reader);
    w->all_mm = malloc((size_t)ids * sizeof *w->all_mm);
    if (!w->uses || !w->reader || !w->all_mm)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory lowering the graph");
    for (int i = 0; i < ids; i++)
        w->all_mm[i] = true;
    for (int i = 0; i < w->n; i++) {
        nn_tensor *t = w->order[i];
        for (int s = 0; s < t->n_src; s++) {
            const nn_tensor *src = t->src[s];
            bool again = false; /* a node reading src twice is one reader */
            for (int r = 0; r < s; r++)
                again = again || t->src[r] == src;
            if (again)
                continue;
            w->uses[src->id]++;
            w->reader[src->id] = t;
            w->all_mm[src->id] = w->all_mm[src->id] && t->op == NN_OP_MATMUL;
        }
    }
    return NP_OK;
}

/* The fusion chain headed by kernel node h: fills the epilogue's nodes (and their operands)
 * and returns the last node, whose value the kernel stores. */
static const nn_tensor *lw_chain(lw_graph *w, const nn_tensor *h, const nn_tensor **steps,
                                 const nn_tensor **args, int *n_steps)
{
    *n_steps = 0;
    const kc_kernel_def *d = kc_kernel_find(h->op);
    if (!d || !(d->flags & KC_DEF_EPILOGUE) || h->fusion_group != h->id)
        return h;
    const nn_tensor *cur = h;
    while (*n_steps < KC_MAX_EPI && w->uses[cur->id] == 1 && !cur->is_output) {
        const nn_tensor *m = w->reader[cur->id], *arg;
        if (m->fusion_group != h->id || !lw_epi_step_ok(cur, m, &arg))
            break;
        /* the kernel runs at the head's place: its operand must be stored by then */
        if (arg && (w->pos[arg->id] < 0 || w->pos[arg->id] > w->pos[h->id] ||
                    (w->lp->kind[arg->id] == LOWER_NODE_FUSED && w->root[arg->id] != arg)))
            break;
        steps[*n_steps] = m;
        args[(*n_steps)++] = arg;
        cur = m;
    }
    return cur;
}

/* Decides every node's kind (lp->kind) and the root whose buffer holds its values. */
static np_status lw_classify(lw_graph *w, const lower_opts *o, np_err *err)
{
    lower_prog *lp = w->lp;
    char desc[256];
    for (int i = 0; i < w->n; i++) {
        const nn_tensor *t = w->order[i];
        if (lp->kind[t->id] != LOWER_NODE_NONE) /* fused into an earlier head */
            continue;
        if (t->op == NN_OP_LEAF) {
            lp->kind[t->id] = LOWER_NODE_LEAF;
            w->root[t->id] = t;
        } else if ((nn_op_flags(t->op) & NN_OPF_COMM) && !(nn_op_flags(t->op) & NN_OPF_VIEW)) {
            return np_err_set(err, NP_ERR_INCONSISTENT, "%s (node '%s'): a communication op in "
                              "the graph of one chip (lower a plan's rank instead)",
                              lower_node_desc(t, desc, sizeof desc), t->name);
        } else if (lw_is_view(t)) {
            lp->kind[t->id] = LOWER_NODE_VIEW;
            w->root[t->id] = w->root[t->src[0]->id];
        } else if (!o->no_fuse && lw_is_transpose(t) && w->uses[t->id] > 0 &&
                   w->all_mm[t->id] && !t->is_output &&
                   lp->kind[t->src[0]->id] != LOWER_NODE_FOLDED) {
            lp->kind[t->id] = LOWER_NODE_FOLDED;
            w->root[t->id] = w->root[t->src[0]->id];
        } else {
            lp->kind[t->id] = LOWER_NODE_KERNEL;
            if (nn_op_flags(t->op) & NN_OPF_UPDATE) {
                w->root[t->id] = w->root[t->src[0]->id];
                continue;
            }
            const nn_tensor *steps[KC_MAX_EPI], *args[KC_MAX_EPI], *last = t;
            int ns = 0;
            if (!o->no_fuse)
                last = lw_chain(w, t, steps, args, &ns);
            for (int s = 0; s < ns; s++)
                lp->kind[steps[s]->id] = LOWER_NODE_FUSED;
            w->root[t->id] = last;
            for (int s = 0; s < ns; s++) {
                w->root[steps[s]->id] = last;
                w->head[steps[s]->id] = t;
            }
        }
    }
    return NP_OK;
}

/* ---- buffers ------------------------------------------------------------------------------ */

/* A data symbol name for tensor t: its name with every character an assembler identifier
 * cannot hold as '_', unique among the names given so far (else "<name>$<id>"). */
static void lw_symbol(const nn_tensor *t, char *buf, size_t n, const isa_program *p)
{
    size_t k = 0;
    for (const char *s = t->name; *s && k + 1 < n && k < 48; s++, k++) {
        char c = *s;
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '.' ||
                  c == '$' || (k && c >= '0' && c <= '9');
        buf[k] = ok ? c : '_';
    }
    buf[k] = '\0';
    if (!k || !isa_name_ok(buf, k) || isa_program_symbol(p, buf))
        snprintf(buf + k, n - k, "$%d", t->id);
}

/* t's values (fp32, t->data) as bytes of its dtype. */
static void lw_pack(const nn_tensor *t, uint8_t *out)
{
    int64_t n = nn_numel(t);
    for (int64_t i = 0; i < n; i++) {
        float v = t->data[i];
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

static np_status lw_leaves(lw_graph *w, kc_prog *p, np_err *err)
{
    lower_prog *lp = w->lp;
    isa_emit *e = kc_prog_emit(p);
    for (int i = 0; i < w->n; i++) {
        const nn_tensor *t = w->order[i];
        if (t->op != NN_OP_LEAF)
            continue;
        char name[64];
        lw_symbol(t, name, sizeof name, kc_prog_program(p));
        uint64_t bytes = nn_nbytes(t), addr;
        if (!bytes)
            bytes = 1;
        if (t->role == NN_ROLE_CONST && t->data) {
            uint8_t *v = calloc(1, bytes);
            if (!v)
                return np_err_set(err, NP_ERR_NOMEM, "out of memory lowering constants");
            lw_pack(t, v);
            np_status st = isa_emit_data(e, name, v, bytes, 64, &addr);
            free(v);
            if (st != NP_OK)
                return isa_emit_status(e, err);
        } else if (kc_prog_bss(p, name, bytes, &addr, err) != NP_OK) {
            return err->status;
        }
        lp->addr[t->id] = addr;
        lp->persistent_bytes += bytes;
    }
    return NP_OK;
}

/* The kernels' steps (heads in schedule order) and the arena's buffers: each stored node's
 * lifetime from its kernel to its last reader (outputs to the end). */
static np_status lw_arena(lw_graph *w, kc_prog *p, np_err *err)
{
    lower_prog *lp = w->lp;
    int32_t n_steps = 0;
    int32_t *step_of = malloc(((size_t)lp->max_id + 1) * sizeof *step_of); /* by head id */
    lw_buf *bufs = calloc((size_t)w->n + 1, sizeof *bufs);
    uint32_t nb = 0;
    np_status st = NP_OK;
    if (!step_of || !bufs) {
        st = np_err_set(err, NP_ERR_NOMEM, "out of memory planning the arena");
        goto done;
    }
    for (int i = 0; i < w->n; i++) {
        const nn_tensor *t = w->order[i];
        step_of[t->id] = -1;
        if (lp->kind[t->id] != LOWER_NODE_KERNEL)
            continue;
        step_of[t->id] = n_steps++;
        const nn_tensor *last = w->root[t->id];
        if (!(nn_op_flags(t->op) & NN_OPF_UPDATE)) {
            w->buf[last->id] = (int32_t)nb;
            bufs[nb++] = (lw_buf){.bytes = nn_nbytes(last), .first = step_of[t->id],
                                  .last = step_of[t->id]};
        }
    }
    /* readers: every kernel reads its head's sources and its epilogue's operands; a fused
     * step's sources are those of the chain */
    for (int i = 0; i < w->n; i++) {
        const nn_tensor *t = w->order[i];
        lower_node_kind k = lp->kind[t->id];
        if (k != LOWER_NODE_KERNEL && k != LOWER_NODE_FUSED)
            continue;
        /* a fused node is computed at its head's step */
        int32_t s = step_of[(k == LOWER_NODE_KERNEL ? t : w->head[t->id])->id];
        for (int j = 0; j < t->n_src; j++) {
            const nn_tensor *r = w->root[t->src[j]->id];
            if (r && r != w->root[t->id] && w->buf[r->id] >= 0 &&
                bufs[w->buf[r->id]].last < s)
                bufs[w->buf[r->id]].last = s;
        }
    }
    for (int i = 0; i < w->n; i++) {
        const nn_tensor *t = w->order[i], *r = w->root[t->id];
        if (t->is_output && r && w->buf[r->id] >= 0)
            bufs[w->buf[r->id]].last = n_steps - 1;
    }
    if (nb) {
        if ((st = lw_arena_plan(bufs, nb, n_steps, &lp->arena_bytes, err)) != NP_OK ||
            (st = kc_prog_bss(p, "arena", lp->arena_bytes, &lp->arena_addr, err)) != NP_OK)
            goto done;
        for (int i = 0; i < w->n; i++) {
            const nn_tensor *t = w->order[i];
            if (w->buf[t->id] >= 0)
                lp->addr[t->id] = lp->arena_addr + bufs[w->buf[t->id]].off;
        }
    }
    lp->n_steps = (uint32_t)n_steps;
done:
    free(step_of);
    free(bufs);
    return st;
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

/* The layout of t's values, from its root's buffer and its sources' layouts. */
static np_status lw_layout(lw_graph *w, const nn_tensor *t, np_err *err)
{
    lower_prog *lp = w->lp;
    kc_tensor *l = &w->lay[t->id];
    switch (lp->kind[t->id]) {
    case LOWER_NODE_LEAF:
        kc_tensor_of(l, lp->addr[t->id], t);
        break;
    case LOWER_NODE_VIEW: {
        const kc_tensor *s = &w->lay[t->src[0]->id];
        if (!w->has_lay[t->src[0]->id] || !lw_dense(s))
            return np_err_set(err, NP_ERR_INTERNAL, "lower: view '%s' of a value without a "
                              "dense layout", t->name);
        kc_tensor_of(l, s->addr, t);
        break;
    }
    case LOWER_NODE_FOLDED: {
        *l = w->lay[t->src[0]->id];
        int a = l->ndim - 2, b = l->ndim - 1;
        int64_t sh = l->shape[a], st = l->stride[a];
        l->shape[a] = l->shape[b], l->stride[a] = l->stride[b];
        l->shape[b] = sh, l->stride[b] = st;
        break;
    }
    default:
        if (nn_op_flags(t->op) & NN_OPF_UPDATE) {
            kc_tensor_of(l, w->lay[t->src[0]->id].addr, t);
        } else if (w->buf[t->id] >= 0) {
            kc_tensor_of(l, lp->addr[t->id], t);
        } else {
            w->has_lay[t->id] = false; /* fused, never stored */
            return NP_OK;
        }
        break;
    }
    w->has_lay[t->id] = true;
    return NP_OK;
}

/* A kernel symbol for head h: "<name>$<id>", the name cut to fit. */
static void lw_kernel_name(const nn_tensor *h, char *buf, size_t n)
{
    char id[16];
    int k = snprintf(id, sizeof id, "$%d", h->id);
    size_t room = n - 1 - (size_t)k, j = 0;
    for (const char *s = h->name; *s && j < room; s++, j++) {
        char c = *s;
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '.' ||
                  c == '$' || (j && c >= '0' && c <= '9');
        buf[j] = ok ? c : '_';
    }
    if (!j)
        buf[j++] = 'k';
    memcpy(buf + j, id, (size_t)k + 1);
}

static np_status lw_emit(lw_graph *w, kc_prog *p, np_err *err)
{
    lower_prog *lp = w->lp;
    uint32_t si = 0;
    for (int i = 0; i < w->n; i++) {
        const nn_tensor *t = w->order[i];
        if (lw_layout(w, t, err) != NP_OK)
            return err->status;
        if (lp->kind[t->id] != LOWER_NODE_KERNEL)
            continue;
        kc_tensor in[KC_MAX_IN];
        for (int s = 0; s < t->n_src && s < KC_MAX_IN; s++) {
            if (!w->has_lay[t->src[s]->id])
                return np_err_set(err, NP_ERR_INTERNAL, "lower: '%s' reads '%s', which has no "
                                  "layout", t->name, t->src[s]->name);
            in[s] = w->lay[t->src[s]->id];
        }
        lower_step *st = &lp->steps[si++];
        bool update = nn_op_flags(t->op) & NN_OPF_UPDATE;
        st->node = t;
        st->last = update ? t : w->root[t->id];
        kc_tensor out;
        kc_tensor_of(&out, update ? 0 : lp->addr[st->last->id], t);
        if (lw_node_kernel(t, in, &out, 0, lp->cores, &st->k, err) != NP_OK)
            return err->status;
        /* the epilogue: the chain from the head to its stored node */
        for (const nn_tensor *cur = t; cur != st->last;) {
            const nn_tensor *m = w->reader[cur->id], *arg;
            lw_epi_step_ok(cur, m, &arg);
            if (arg && !w->has_lay[arg->id])
                return np_err_set(err, NP_ERR_INTERNAL, "lower: epilogue operand '%s' has no "
                                  "layout", arg->name);
            lw_epi_step(m, arg ? &w->lay[arg->id] : NULL, &st->k.epi[st->k.n_epi++]);
            st->n_fused++;
            cur = m;
        }
        if (st->last != t)
            kc_tensor_of(&st->k.out[0], lp->addr[st->last->id], st->last);
        for (int s = 0; s < t->n_src; s++)
            st->n_fused += lp->kind[t->src[s]->id] == LOWER_NODE_FOLDED;
        char name[64];
        lw_kernel_name(t, name, sizeof name);
        st->k.name = name;
        if (kc_compile(p, &st->k, &st->res, err) != NP_OK)
            return err->status;
        st->k.name = NULL; /* the symbol is in res.name */
        lp->flops += st->res.flops;
        lp->hbm_bytes += st->res.hbm_read_bytes + st->res.hbm_write_bytes;
    }
    return NP_OK;
}

/* The first node no kernel can compute, for an error that names it before anything is
 * compiled. */
static np_status lw_check_kernels(lw_graph *w, np_err *err)
{
    char desc[256];
    for (int i = 0; i < w->n; i++) {
        const nn_tensor *t = w->order[i];
        if (w->lp->kind[t->id] == LOWER_NODE_KERNEL && !kc_kernel_find(t->op))
            return np_err_set(err, NP_ERR_MISSING, "lower: no kernel for %s yet (node '%s')",
                              lower_node_desc(t, desc, sizeof desc), t->name);
    }
    return NP_OK;
}

np_status lower_graph(const arch_config *cfg, nn_graph *g, const lower_opts *opts,
                      lower_prog **out, np_err *err)
{
    *out = NULL;
    lower_opts o = opts ? *opts : (lower_opts){0};
    lw_graph w = {.cfg = cfg, .g = g};
    kc_prog *p = NULL;
    lower_prog *lp = calloc(1, sizeof *lp);
    np_status st = NP_OK;
    if (!lp) {
        st = np_err_set(err, NP_ERR_NOMEM, "out of memory lowering the graph");
        goto fail;
    }
    w.lp = lp;
    lp->cores = o.cores ? o.cores : (uint32_t)cfg->chip.cores;
    lp->max_id = nn_graph_max_id(g);
    int ids = lp->max_id + 1;
    if ((st = nn_schedule(g, &w.order, &w.n, err)) != NP_OK)
        goto fail;
    if (!o.no_fuse)
        nn_pass_fuse(g);
    lp->kind = calloc((size_t)ids, sizeof *lp->kind);
    lp->addr = malloc((size_t)ids * sizeof *lp->addr);
    w.pos = malloc((size_t)ids * sizeof *w.pos);
    w.root = calloc((size_t)ids, sizeof *w.root);
    w.head = calloc((size_t)ids, sizeof *w.head);
    w.buf = malloc((size_t)ids * sizeof *w.buf);
    w.lay = calloc((size_t)ids, sizeof *w.lay);
    w.has_lay = calloc((size_t)ids, sizeof *w.has_lay);
    lp->steps = calloc((size_t)w.n + 1, sizeof *lp->steps);
    if (!lp->kind || !lp->addr || !w.pos || !w.root || !w.head || !w.buf || !w.lay || !w.has_lay ||
        !lp->steps) {
        st = np_err_set(err, NP_ERR_NOMEM, "out of memory lowering the graph");
        goto fail;
    }
    for (int i = 0; i < ids; i++) {
        lp->addr[i] = UINT64_MAX;
        w.pos[i] = -1;
        w.buf[i] = -1;
    }
    for (int i = 0; i < w.n; i++)
        w.pos[w.order[i]->id] = i;
    kc_prog_opts po = {.cores = lp->cores, .tiles = o.tiles,
                       .emit = {.bss_base = o.bss_base, .hbm_bytes = cfg->chip.hbm_bytes}};
    if ((st = lw_readers(&w, err)) != NP_OK || (st = lw_classify(&w, &o, err)) != NP_OK ||
        (st = lw_check_kernels(&w, err)) != NP_OK ||
        (st = kc_prog_new(cfg, &po, &p, err)) != NP_OK || (st = lw_leaves(&w, p, err)) != NP_OK ||
        (st = lw_arena(&w, p, err)) != NP_OK || (st = lw_emit(&w, p, err)) != NP_OK ||
        (st = kc_prog_finish(p, err)) != NP_OK)
        goto fail;
    lp->prog = kc_prog_take(p);
    kc_prog_free(p);
    lw_graph_free(&w);
    *out = lp;
    return NP_OK;
fail:
    kc_prog_free(p);
    lw_graph_free(&w);
    lower_prog_free(lp);
    return st;
}
