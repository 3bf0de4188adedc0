/* layer_model.c — a zoo model's conv and linear layers as a topology (see layer_model.h). */
#include "layer_model.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

static np_status lm_add(mxu_topology *t, size_t *cap, const char *name, const mxu_layer *l,
                        np_err *err)
{
    if (t->n == MXU_TOPO_MAX_LAYERS)
        return np_err_set(err, NP_ERR_RANGE, "more than %d layers", MXU_TOPO_MAX_LAYERS);
    if (t->n == *cap) {
        size_t nc = *cap ? 2 * *cap : 64;
        mxu_layer *nl = realloc(t->layers, nc * sizeof *nl);
        if (!nl)
            return np_err_set(err, NP_ERR_NOMEM, "out of memory");
        t->layers = nl, *cap = nc;
    }
    t->layers[t->n] = *l;
    snprintf(t->layers[t->n].name, sizeof t->layers[t->n].name, "%s", name);
    t->n++;
    return NP_OK;
}

/* A convolution node: its groups as layers. */
static np_status lm_conv(mxu_topology *t, size_t *cap, const nn_tensor *y, int64_t batch,
                         np_err *err)
{
    const nn_tensor *x = y->src[0], *w = y->src[1];
    int64_t stride = y->ip[0], dil = y->ip[2], groups = y->ip[3];
    if (dil != 1)
        return np_err_set(err, NP_ERR_RANGE, "layer %s: a dilated convolution (dilation %lld) "
                          "has no SCALE-Sim form", y->scope, (long long)dil);
    uint64_t e = (uint64_t)y->ne[2], f = (uint64_t)y->ne[3], r = (uint64_t)w->ne[2];
    uint64_t s = (uint64_t)w->ne[3], cg = (uint64_t)x->ne[1] / (uint64_t)groups;
    uint64_t kg = (uint64_t)w->ne[0] / (uint64_t)groups;
    mxu_layer l = {.m = (uint64_t)batch * e * f, .n = kg, .k = r * s * cg};
    if (batch == 1) {
        l.is_conv = true;
        l.conv = (mxu_conv){(e - 1) * (uint64_t)stride + r, (f - 1) * (uint64_t)stride + s, r, s,
                            cg, kg, (uint64_t)stride, (uint64_t)stride};
    }
    for (int64_t g = 0; g < groups; g++) {
        char name[MXU_TOPO_NAME_MAX + 32];
        if (groups > 1)
            snprintf(name, sizeof name, "%.60s.group_%lld", y->scope, (long long)g);
        else
            snprintf(name, sizeof name, "%s", y->scope);
        if (lm_add(t, cap, name, &l, err) != NP_OK)
            return err->status;
    }
    return NP_OK;
}

/* A linear layer's weight: a trainable parameter, or one transposed (a tied lm_head). */
static bool lm_weight(const nn_tensor *w)
{
    if (w->op == NN_OP_PERMUTE && w->n_src == 1)
        w = w->src[0];
    return w->op == NN_OP_LEAF && w->trainable;
}

np_status layer_model_topology(const char *name_or_path, int64_t batch, mxu_topology *out,
                               np_err *err)
{
    *out = (mxu_topology){0};
    nn_model_desc d;
    if (nn_model_load(name_or_path, &d, err) != NP_OK)
        return err->status;
    nn_model m;
    nn_model_opts o = {.batch = batch, .compute = NN_F32, .seed = 1, .inference = true};
    if (nn_model_build(&d, &o, &m, err) != NP_OK) {
        nn_graph_free(m.g);
        return err->status;
    }
    mxu_topology t = {0};
    size_t cap = 0;
    np_status st = NP_OK;
    for (int i = 0; i < nn_graph_n_nodes(m.g) && st == NP_OK; i++) {
        const nn_tensor *y = nn_graph_node(m.g, i);
        if (y->op == NN_OP_CONV2D) {
            st = lm_conv(&t, &cap, y, m.batch, err);
        } else if (y->op == NN_OP_MATMUL && y->src[1]->ndim == 2 &&
                   lm_weight(y->src[1])) {
            const nn_tensor *a = y->src[0], *b = y->src[1];
            uint64_t rows = 1;
            for (int k = 0; k < a->ndim - 1; k++)
                rows *= (uint64_t)a->ne[k];
            mxu_layer l = {.m = rows, .n = (uint64_t)b->ne[1], .k = (uint64_t)b->ne[0]};
            st = lm_add(&t, &cap, y->scope, &l, err);
        }
    }
    nn_graph_free(m.g);
    if (st == NP_OK && !t.n)
        st = np_err_set(err, NP_ERR_MISSING, "model %s has no convolution or linear layer",
                        d.name);
    if (st != NP_OK) {
        mxu_topology_free(&t);
        return st;
    }
    *out = t;
    return NP_OK;
}
