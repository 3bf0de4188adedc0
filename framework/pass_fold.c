/* pass_fold.c — constant folding, Conv+BatchNorm folding and conv->conv folding. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pass.h"

np_status nn_pass_fold_constants(nn_graph *g, int *n_folded, np_err *err)
{
    nn_tensor **order;
    int n;
    *n_folded = 0;
    if (nn_schedule(g, &order, &n, err) != NP_OK)
        return err->status;
    np_status st = NP_OK;
    for (int i = 0; i < n && st == NP_OK; i++) {
        nn_tensor *t = order[i];
        if (t->op == NN_OP_LEAF || (nn_op_flags(t->op) & NN_OPF_UPDATE) || t->op == NN_OP_DROPOUT)
            continue;
        bool all_const = true;
        for (int s = 0; s < t->n_src && all_const; s++)
            all_const = t->src[s]->op == NN_OP_LEAF && t->src[s]->role == NN_ROLE_CONST &&
                        t->src[s]->data;
        if (!all_const)
            continue;
        if ((st = nn_node_compute(t, err)) != NP_OK)
            break;
        t->op = NN_OP_LEAF;
        t->role = NN_ROLE_CONST;
        t->n_src = 0;
        memset(t->src, 0, sizeof t->src);
        (*n_folded)++;
    }
    free(order);
    if (st == NP_OK && *n_folded)
        nn_pass_dce(g);
    return st;
}

static bool nn_valued_f32_leaf(const nn_tensor *t)
{
    return t->op == NN_OP_LEAF && t->data && t->dtype == NN_F32;
}

/* Appends nodes after `anchor` in schedule priority. */
static void nn_place_like(nn_tensor *t, const nn_tensor *anchor)
{
    if (t)
        t->sched_key = anchor->sched_key;
}

np_status nn_pass_fold_conv_bn(nn_graph *g, int *n_folded, np_err *err)
{
    *n_folded = 0;
    int *uses = nn_graph_use_counts(g);
    if (!uses)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory folding");
    int n = nn_graph_n_nodes(g);
    char scope[NN_NAME_MAX];
    snprintf(scope, sizeof scope, "%s", nn_graph_scope(g));
    for (int i = 0; i < n; i++) {
        nn_tensor *bn = nn_graph_node(g, i);
        if (bn->op != NN_OP_BATCHNORM_INFER)
            continue;
        nn_tensor *conv = bn->src[0];
        if (conv->op != NN_OP_CONV2D || uses[conv->id] != 1 || !nn_valued_f32_leaf(conv->src[1]))
            continue;
        bool ok = true;
        for (int s = 1; s < 5; s++)
            ok = ok && nn_valued_f32_leaf(bn->src[s]);
        if (!ok)
            continue;
        const nn_tensor *w = conv->src[1];
        const float *gamma = bn->src[1]->data, *beta = bn->src[2]->data;
        const float *mean = bn->src[3]->data, *var = bn->src[4]->data;
        int64_t O = w->ne[0], per = nn_numel(w) / O;
        nn_graph_set_scope(g, "%s", bn->scope);
        nn_tensor *wf = nn_const(g, "folded_weight", NN_F32, w->ndim, w->ne);
        nn_tensor *bf = nn_const(g, "folded_bias", NN_F32, 3, (int64_t[]){O, 1, 1});
        if (!wf || !bf || !nn_tensor_alloc(wf) || !nn_tensor_alloc(bf))
            break;
        for (int64_t o = 0; o < O; o++) {
            double s = gamma[o] / sqrt((double)var[o] + bn->fp[0]);
            for (int64_t k = 0; k < per; k++)
                wf->data[o * per + k] = (float)(w->data[o * per + k] * s);
            bf->data[o] = (float)(beta[o] - mean[o] * s);
        }
        nn_tensor *c2 = nn_conv2d(g, conv->src[0], wf, (int)conv->ip[0], (int)conv->ip[1],
                                  (int)conv->ip[2], (int)conv->ip[3]);
        nn_tensor *y = nn_add(g, c2, bf);
        if (!y)
            break;
        nn_place_like(c2, bn);
        nn_place_like(y, bn);
        nn_replace_uses(g, bn, y);
        (*n_folded)++;
    }
    nn_graph_set_scope(g, "%s", scope);
    free(uses);
    if (nn_graph_status(g, err) != NP_OK)
        return err->status;
    if (*n_folded)
        nn_pass_dce(g);
    return NP_OK;
}

np_status nn_pass_fold_conv_conv(nn_graph *g, int *n_folded, np_err *err)
{
    *n_folded = 0;
    int *uses = nn_graph_use_counts(g);
    if (!uses)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory folding");
    int n = nn_graph_n_nodes(g);
    char scope[NN_NAME_MAX];
    snprintf(scope, sizeof scope, "%s", nn_graph_scope(g));
    for (int i = 0; i < n; i++) {
        nn_tensor *outer = nn_graph_node(g, i);
        if (outer->op != NN_OP_CONV2D)
            continue;
        nn_tensor *inner = outer->src[0], *w2 = outer->src[1];
        if (inner->op != NN_OP_CONV2D || uses[inner->id] != 1 || inner->ip[3] != 1 ||
            !nn_valued_f32_leaf(w2) || !nn_valued_f32_leaf(inner->src[1]) || w2->ne[2] != 1 ||
            w2->ne[3] != 1 || outer->ip[0] != 1 || outer->ip[1] != 0 || outer->ip[3] != 1)
            continue;
        const nn_tensor *w1 = inner->src[1];
        int64_t O2 = w2->ne[0], O1 = w1->ne[0], per = nn_numel(w1) / O1;
        nn_graph_set_scope(g, "%s", outer->scope);
        nn_tensor *wf = nn_const(g, "folded_weight", NN_F32, 4,
                                 (int64_t[]){O2, w1->ne[1], w1->ne[2], w1->ne[3]});
        if (!wf || !nn_tensor_alloc(wf))
            break;
        for (int64_t o2 = 0; o2 < O2; o2++)
            for (int64_t k = 0; k < per; k++) {
                double acc = 0;
                for (int64_t o1 = 0; o1 < O1; o1++)
                    acc += (double)w2->data[o2 * O1 + o1] * w1->data[o1 * per + k];
                wf->data[o2 * per + k] = (float)acc;
            }
        nn_tensor *c = nn_conv2d(g, inner->src[0], wf, (int)inner->ip[0], (int)inner->ip[1],
                                 (int)inner->ip[2], 1);
        if (!c)
            break;
        nn_place_like(c, outer);
        nn_replace_uses(g, outer, c);
        (*n_folded)++;
    }
    nn_graph_set_scope(g, "%s", scope);
    free(uses);
    if (nn_graph_status(g, err) != NP_OK)
        return err->status;
    if (*n_folded)
        nn_pass_dce(g);
    return NP_OK;
}
