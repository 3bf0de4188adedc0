/* pass_attention.c — rewrites the composite attention that nn_attention builds into the
 * fused attention op (op_attention.c), so no S x S score tensor is left in the graph:
 *
 *   matmul(softmax([causal_mask(] scale(matmul(q, permute(k)), s) [, -inf)]), v)
 *     ->  attention(q, k, v; causal, scale s)
 *
 * where permute swaps the last two dims of k, q, k and v are [B, H, S, Dh] of one shape and
 * dtype, and every intermediate node (the scores, their scale and mask, the softmax) has the
 * next one as its only reader and is not an output. The final matmul node becomes the
 * attention node in place — same id, layer, chunk and schedule key, so the graph's creation
 * order stays a topological order (the planner walks it) — and the intermediates (and the
 * permute of k, when nothing else reads it) are removed. A composite with dropout on the
 * probabilities (nn_attention_dropout with p > 0) is left alone: the fused op has none. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn_impl.h"
#include "pass.h"

/* t's only reader is its consumer in the chain (and t is no output). */
static bool nn_fa_single(const int *uses, const nn_tensor *t)
{
    return t && uses[t->id] == 1 && !t->is_output && t->op != NN_OP_LEAF;
}

/* Whether kt = permute(k) swaps the last two dims of a 4-D k. */
static bool nn_fa_is_transpose(const nn_tensor *kt)
{
    if (kt->op != NN_OP_PERMUTE || kt->ndim != 4)
        return false;
    return kt->ip[0] == 0 && kt->ip[1] == 1 && kt->ip[2] == 3 && kt->ip[3] == 2;
}

/* The chain ending in y, or false. */
typedef struct nn_fa_match {
    nn_tensor *y, *p, *mask, *sc, *mm, *kt, *q, *k, *v;
    double scale;
} nn_fa_match;

static bool nn_fa_find(const int *uses, nn_tensor *y, nn_fa_match *m)
{
    memset(m, 0, sizeof *m);
    if (y->op != NN_OP_MATMUL || y->src[0]->op != NN_OP_SOFTMAX)
        return false;
    m->y = y, m->p = y->src[0], m->v = y->src[1];
    nn_tensor *s = m->p->src[0];
    if (!nn_fa_single(uses, m->p) || !nn_fa_single(uses, s))
        return false;
    if (s->op == NN_OP_CAUSAL_MASK) {
        if (!(isinf(s->fp[0]) && s->fp[0] < 0))
            return false;
        m->mask = s;
        s = s->src[0];
        if (!nn_fa_single(uses, s))
            return false;
    }
    if (s->op != NN_OP_SCALE || !(s->fp[0] > 0) || !isfinite(s->fp[0]))
        return false;
    m->sc = s, m->scale = s->fp[0];
    m->mm = s->src[0];
    if (m->mm->op != NN_OP_MATMUL || !nn_fa_single(uses, m->mm))
        return false;
    m->q = m->mm->src[0], m->kt = m->mm->src[1];
    if (!nn_fa_is_transpose(m->kt))
        return false;
    m->k = m->kt->src[0];
    const nn_tensor *q = m->q;
    return q->ndim == 4 && nn_same_shape(q, m->k) && nn_same_shape(q, m->v) &&
           q->dtype == m->k->dtype && q->dtype == m->v->dtype;
}

np_status nn_pass_fuse_attention(nn_graph *g, int *n_fused, np_err *err)
{
    *n_fused = 0;
    if (nn_graph_status(g, err) != NP_OK)
        return err->status;
    int n = nn_graph_n_nodes(g), max_id = nn_graph_max_id(g);
    int *uses = nn_graph_use_counts(g);
    bool *keep = nn_malloc(((size_t)max_id + 1) * sizeof *keep);
    if (!uses || !keep) {
        free(uses);
        free(keep);
        return np_err_set(err, NP_ERR_NOMEM, "fuse attention: out of memory");
    }
    for (int i = 0; i <= max_id; i++)
        keep[i] = true;
    np_status st = NP_OK;
    for (int i = 0; i < n && st == NP_OK; i++) {
        nn_fa_match m;
        if (!nn_fa_find(uses, nn_graph_node(g, i), &m))
            continue;
        nn_tensor *y = m.y;
        nn_tensor saved = *y;
        y->op = NN_OP_ATTENTION;
        y->n_src = 3;
        y->src[0] = m.q, y->src[1] = m.k, y->src[2] = m.v;
        memset(y->ip, 0, sizeof y->ip);
        memset(y->fp, 0, sizeof y->fp);
        y->ip[0] = m.mask != NULL;
        y->fp[0] = m.scale;
        y->attn_core = false;
        if ((st = nn_node_check(y, err)) != NP_OK) { /* cannot happen: the match checked it */
            *y = saved;
            break;
        }
        /* its name follows its op: "<scope>.matmul" -> "<scope>.attention", "matmul<id>" ->
         * "attention<id>" (the last "matmul" in it) */
        char name[NN_NAME_MAX];
        const char *at = NULL;
        for (const char *f = strstr(saved.name, "matmul"); f; f = strstr(f + 1, "matmul"))
            at = f;
        if (at) {
            snprintf(name, sizeof name, "%.*sattention%s", (int)(at - saved.name), saved.name,
                     at + strlen("matmul"));
            snprintf(y->name, sizeof y->name, "%s", name);
        }
        nn_tensor *dead[] = {m.p, m.mask, m.sc, m.mm};
        for (size_t d = 0; d < sizeof dead / sizeof dead[0]; d++)
            if (dead[d])
                keep[dead[d]->id] = false;
        uses[m.kt->id]--;
        if (uses[m.kt->id] == 0 && !m.kt->is_output)
            keep[m.kt->id] = false;
        (*n_fused)++;
    }
    if (*n_fused) {
        for (int i = 0; i < nn_graph_n_nodes(g); i++) { /* no gradient link to a removed node */
            nn_tensor *t = nn_graph_node(g, i);
            if (t->grad && !keep[t->grad->id])
                t->grad = NULL;
        }
        nn_graph_remove(g, keep);
    }
    free(uses);
    free(keep);
    return st;
}
