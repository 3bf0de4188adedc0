/* autodiff.c — reverse-mode automatic differentiation.
 *
 * nn_backward walks the nodes that lead to the loss in reverse topological order. Each node
 * that received a gradient asks its op's backward rule (nn_op_impls[op].backward) to add the
 * gradients of its sources, built from public ops, through nn_grad_acc, which sums the
 * contributions of a tensor that fans out. Everything it creates is in the backward region
 * with role gradient. Because all consumers of a node come after it in topological order,
 * its gradient is complete when the walk reaches it. */
#include <stdio.h>
#include <stdlib.h>

#include "nn_impl.h"

void nn_grad_acc(nn_graph *g, nn_tensor *src, nn_tensor *grad)
{
    if (!src->requires_grad || !grad)
        return;
    src->grad = src->grad ? nn_add(g, src->grad, grad) : grad;
}

np_status nn_backward(nn_graph *g, nn_tensor *loss, np_err *err)
{
    if (nn_graph_status(g, err) != NP_OK)
        return err->status;
    if (!loss)
        return np_err_set(err, NP_ERR_MISSING, "backward: no loss tensor");
    if (nn_numel(loss) != 1)
        return np_err_set(err, NP_ERR_INCONSISTENT, "backward: loss %s must be a scalar",
                          loss->name);
    return nn_backward_roots(g, 1, &loss, NULL, 0, NULL, err);
}

np_status nn_backward_roots(nn_graph *g, int n_roots, nn_tensor *const *roots,
                            nn_tensor *const *seeds, int n_wrt, nn_tensor *const *wrt,
                            np_err *err)
{
    if (nn_graph_status(g, err) != NP_OK)
        return err->status;
    for (int r = 0; r < n_roots; r++)
        if (!roots[r] || (seeds && (!seeds[r] || nn_numel(seeds[r]) != nn_numel(roots[r]))))
            return np_err_set(err, NP_ERR_MISSING, "backward: root %d or its seed is missing "
                              "or of another size", r);
    nn_tensor **order;
    int n;
    if (nn_schedule(g, &order, &n, err) != NP_OK)
        return err->status;
    int max_id = nn_graph_max_id(g);
    bool *on_path = nn_calloc((size_t)max_id + 1, sizeof *on_path);
    bool *is_wrt = nn_calloc((size_t)max_id + 1, sizeof *is_wrt);
    if (!on_path || !is_wrt) {
        free(order);
        free(on_path);
        free(is_wrt);
        return np_err_set(err, NP_ERR_NOMEM, "out of memory in backward");
    }
    for (int w = 0; w < n_wrt; w++)
        is_wrt[wrt[w]->id] = true;
    /* requires_grad: depends on a trainable parameter (or a wrt node) through ops that let
     * gradients through (an integer tensor, such as topk's expert indices, has none);
     * on_path: a root depends on it. */
    for (int i = 0; i < n; i++) {
        nn_tensor *t = order[i];
        t->requires_grad = t->trainable || is_wrt[t->id];
        for (int s = 0; s < t->n_src && !t->requires_grad; s++)
            t->requires_grad = t->src[s]->requires_grad;
        if (t->op == NN_OP_STOP_GRAD || t->dtype == NN_I32 || t->dtype == NN_I8)
            t->requires_grad = false;
    }
    for (int r = 0; r < n_roots; r++)
        on_path[roots[r]->id] = true;
    for (int i = n - 1; i >= 0; i--)
        if (on_path[order[i]->id])
            for (int s = 0; s < order[i]->n_src; s++)
                on_path[order[i]->src[s]->id] = true;
    for (int i = 0; i < n; i++)
        if (!on_path[order[i]->id])
            order[i]->requires_grad = false;
    np_status st = NP_OK;
    char scope[NN_NAME_MAX];
    snprintf(scope, sizeof scope, "%s", nn_graph_scope(g));
    int layer = nn_graph_layer(g), chunk = nn_graph_chunk(g);
    for (int r = 0; r < n_roots; r++)
        if (!roots[r]->requires_grad) {
            st = np_err_set(err, NP_ERR_INCONSISTENT,
                            "backward: loss %s does not depend on any trainable parameter",
                            roots[r]->name);
            goto done;
        }
    nn_graph_set_region(g, NN_REGION_BACKWARD);
    for (int r = 0; r < n_roots; r++) {
        nn_tensor *root = roots[r], *seed = seeds ? seeds[r] : NULL;
        if (!seed) {
            nn_graph_set_layer(g, root->layer);
            nn_graph_set_chunk(g, root->chunk);
            seed = nn_leaf(g, "loss.grad_seed", NN_ROLE_CONST, root->dtype, root->ndim, root->ne);
            if (seed && !nn_tensor_fill(seed, 1.0f)) {
                st = np_err_set(err, NP_ERR_NOMEM, "out of memory in backward");
                goto done;
            }
        }
        root->grad = root->grad ? nn_add(g, root->grad, seed) : seed;
    }
    for (int i = n - 1; i >= 0 && nn_graph_status(g, NULL) == NP_OK; i--) {
        nn_tensor *t = order[i];
        if (!t->grad || t->op == NN_OP_LEAF)
            continue;
        bool any = false;
        for (int s = 0; s < t->n_src; s++)
            any = any || t->src[s]->requires_grad;
        if (!any)
            continue;
        const nn_op_impl *impl = &nn_op_impls[t->op];
        if (!impl->backward) {
            st = np_err_set(err, NP_ERR_INCONSISTENT, "backward: op %s (node %s) has no gradient: %s",
                            nn_op_name(t->op), t->name, nn_op_no_grad_reason(t->op));
            goto done;
        }
        /* gradients belong to their op's layer and pipeline chunk */
        nn_graph_set_scope(g, "%s", t->scope);
        nn_graph_set_layer(g, t->layer);
        nn_graph_set_chunk(g, t->chunk);
        impl->backward(g, t, t->grad);
    }
    st = nn_graph_status(g, err);
done:
    nn_graph_set_region(g, NN_REGION_FORWARD);
    nn_graph_set_scope(g, "%s", scope);
    nn_graph_set_layer(g, layer);
    nn_graph_set_chunk(g, chunk);
    free(on_path);
    free(is_wrt);
    free(order);
    return st;
}
