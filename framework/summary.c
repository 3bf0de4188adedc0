/* summary.c — the per-layer table behind `npusim summary` (in the spirit of torchinfo).
 *
 * The model's training step is built from shapes alone (forward, nn_backward, AdamW); the
 * forward nodes are grouped into rows by their scope (one row per layer, in creation order,
 * consecutive nodes of one scope together). A row's op is the first compute op of the layer
 * (casts and reshapes aside), its output shape that of the layer's last node, its params the
 * elements of the parameters created in the layer, its FLOPs the forward FLOPs of its nodes.
 * A row's train_flops add the backward and optimizer nodes made under its scope.
 * FLOPs count a multiply-add as 2; forward_macs counts the matmul/conv multiply-adds alone. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "optim.h"
#include "pass.h"
#include "nn_impl.h"

void nn_summary_free(nn_summary *s)
{
    free(s->rows);
    s->rows = NULL;
    s->n_rows = 0;
}

static uint64_t nn_str_hash(const char *str)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (; *str; str++)
        h = (h ^ (unsigned char)*str) * 1099511628211ULL;
    return h;
}

static bool nn_is_plumbing(nn_op op)
{
    return op == NN_OP_CAST || op == NN_OP_RESHAPE || op == NN_OP_PERMUTE || op == NN_OP_LEAF;
}

np_status nn_summary_build(const nn_model_desc *d, int64_t batch, int64_t seq, nn_summary *s,
                           np_err *err)
{
    memset(s, 0, sizeof *s);
    nn_model m;
    nn_model_opts o = {.batch = batch, .seq = seq, .compute = NN_F32, .seed = 1};
    if (nn_model_build(d, &o, &m, err) != NP_OK) {
        nn_graph_free(m.g);
        return err->status;
    }
    nn_graph *g = m.g;
    np_status st = NP_OK;
    snprintf(s->model, sizeof s->model, "%s", d->name);
    s->batch = m.batch;
    s->seq = m.seq;
    int n_fwd = nn_graph_n_nodes(g);
    s->rows = nn_calloc((size_t)n_fwd + 1, sizeof *s->rows);
    if (!s->rows) {
        st = np_err_set(err, NP_ERR_NOMEM, "out of memory summarizing %s", d->name);
        goto done;
    }
    nn_summary_row *row = NULL;
    for (int i = 0; i < n_fwd; i++) {
        const nn_tensor *t = nn_graph_node(g, i);
        bool is_param = t->op == NN_OP_LEAF && t->trainable;
        if (t->op == NN_OP_LEAF && !is_param)
            continue;
        if (!row || strcmp(row->name, t->scope) != 0) {
            row = &s->rows[s->n_rows++];
            snprintf(row->name, sizeof row->name, "%s", t->scope[0] ? t->scope : "(top)");
        }
        if (is_param) {
            row->params += nn_numel(t);
            s->total_params += nn_numel(t);
            continue;
        }
        if (!row->op[0] && !nn_is_plumbing(t->op))
            snprintf(row->op, sizeof row->op, "%s", nn_op_name(t->op));
        row->ndim = t->ndim;
        memcpy(row->ne, t->ne, sizeof row->ne);
        row->flops += nn_node_flops(t);
        s->forward_flops += nn_node_flops(t);
        s->forward_macs += nn_node_macs(t);
    }
    for (int r = 0; r < s->n_rows; r++)
        if (!s->rows[r].op[0])
            snprintf(s->rows[r].op, sizeof s->rows[r].op, "%s", "reshape");
    s->trainable_params = s->total_params;
    nn_optim adamw = {.kind = NN_OPTIM_ADAMW, .lr = 1e-4, .beta1 = 0.9, .beta2 = 0.999,
                      .eps = 1e-8, .weight_decay = 0.01};
    if (nn_backward(g, m.loss, err) != NP_OK || nn_optim_step(g, &adamw, err) != NP_OK) {
        st = err->status;
        goto done;
    }
    /* Every node of the step counts for the row of its scope (backward rules and updates
     * run under the scope of the forward node or parameter they come from). */
    size_t cap = 1;
    while (cap < 2 * (size_t)s->n_rows + 2)
        cap <<= 1;
    int *slots = nn_malloc(cap * sizeof *slots);
    if (!slots) {
        st = np_err_set(err, NP_ERR_NOMEM, "out of memory summarizing %s", d->name);
        goto done;
    }
    for (size_t k = 0; k < cap; k++)
        slots[k] = -1;
    for (int r = 0; r < s->n_rows; r++) {
        size_t k = nn_str_hash(s->rows[r].name) & (cap - 1);
        while (slots[k] >= 0)
            k = (k + 1) & (cap - 1);
        slots[k] = r;
    }
    for (int i = 0; i < nn_graph_n_nodes(g); i++) {
        const nn_tensor *t = nn_graph_node(g, i);
        int64_t f = nn_node_flops(t);
        s->train_step_flops += f;
        const char *name = t->scope[0] ? t->scope : "(top)";
        size_t k = nn_str_hash(name) & (cap - 1);
        while (slots[k] >= 0 && strcmp(s->rows[slots[k]].name, name) != 0)
            k = (k + 1) & (cap - 1);
        if (slots[k] >= 0)
            s->rows[slots[k]].train_flops += f;
    }
    free(slots);
    nn_memplan plan;
    if ((st = nn_memplan_build(g, &plan, err)) != NP_OK)
        goto done;
    s->param_bytes = plan.persistent_by_role[NN_ROLE_PARAM];
    s->optimizer_bytes = plan.persistent_by_role[NN_ROLE_OPTSTATE];
    s->input_bytes = plan.persistent_by_role[NN_ROLE_INPUT];
    s->arena_bytes = plan.arena_bytes;
    s->no_reuse_bytes = plan.no_reuse_bytes;
    s->peak_activation_bytes = plan.peak_by_role[NN_ROLE_ACTIVATION];
    s->peak_gradient_bytes = plan.peak_by_role[NN_ROLE_GRADIENT];
    s->peak_bytes = plan.peak_bytes;
    nn_memplan_free(&plan);
done:
    if (st != NP_OK)
        nn_summary_free(s);
    nn_graph_free(g);
    return st;
}
