/* pass_softmax.c — Megatron-LM's FusedScaleMaskSoftmax as a graph rewrite: the scale and the
 * causal mask before a softmax become the softmax's own parameters (nn_softmax_masked), so
 * the composite attention's scores are read once by one op instead of three:
 *
 *   softmax([causal_mask(] [scale(] x [, s)] [, -inf)])  ->  softmax(x; scale s, causal)
 *
 * Each node folded (the scale, the mask) has the next one as its only reader, is not an
 * output, and has the softmax's shape and dtype; the mask's fill is -inf (what a softmax
 * masks with). The softmax node is rewritten in place (same id, name, layer and schedule
 * key: the graph's creation order stays topological) and the folded nodes are removed. Its
 * backward rule then makes one softmax_grad of the same parameters (the scale folded into
 * the gradient, as Megatron's backward kernel does). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn_impl.h"
#include "pass.h"

/* t is folded into its reader: a single reader, not an output, the softmax's shape. */
static bool nn_sf_foldable(const int *uses, const nn_tensor *t, const nn_tensor *p)
{
    return uses[t->id] == 1 && !t->is_output && t->op != NN_OP_LEAF &&
           t->dtype == p->dtype && nn_same_shape(t, p);
}

np_status nn_pass_fuse_softmax(nn_graph *g, int *n_fused, np_err *err)
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
        return np_err_set(err, NP_ERR_NOMEM, "fuse softmax: out of memory");
    }
    for (int i = 0; i <= max_id; i++)
        keep[i] = true;
    for (int i = 0; i < n; i++) {
        nn_tensor *p = nn_graph_node(g, i);
        if (p->op != NN_OP_SOFTMAX || p->fp[0] != 0 || p->ip[0])
            continue;
        nn_tensor *x = p->src[0], *mask = NULL, *sc = NULL;
        if (x->op == NN_OP_CAUSAL_MASK && isinf(x->fp[0]) && x->fp[0] < 0 && x->ndim >= 2 &&
            nn_sf_foldable(uses, x, p))
            mask = x, x = x->src[0];
        if (x->op == NN_OP_SCALE && x->fp[0] > 0 && isfinite(x->fp[0]) &&
            nn_sf_foldable(uses, x, p))
            sc = x, x = x->src[0];
        if (!mask && !sc)
            continue;
        p->src[0] = x;
        p->ip[0] = mask != NULL;
        p->fp[0] = sc ? sc->fp[0] : 0;
        if (mask)
            keep[mask->id] = false;
        if (sc)
            keep[sc->id] = false;
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
    return NP_OK;
}
