/* summary.c — the per-layer table behind `npusim summary`, shaped like torchinfo's.
 *
 * The model's training step is built from shapes alone (forward, nn_backward, AdamW); the
 * forward nodes are grouped into rows by their scope (one row per layer, in creation order,
 * consecutive nodes of one scope together). A row's op is the first compute op of the layer
 * (casts and reshapes aside), its output shape that of the layer's output (its last node,
 * less trailing slices of it: a fused q/k/v projection's output is [B,S,3D]; a language
 * model's token-flattened [B*S,N] is shown as [B,S,N]), its params the elements of the
 * parameters created in the layer, its FLOPs the forward FLOPs of its nodes. A row's
 * train_flops add the backward and optimizer nodes made under its scope. FLOPs count a
 * multiply-add as 2; forward_macs counts the matmul/conv multiply-adds alone.
 *
 * torchinfo's view on top: the scopes' dotted prefixes are the containers ("layer1" a
 * Sequential, "layer1.0" a Bottleneck), each row has its module type and depth-idx, its
 * Mult-Adds by torchinfo's rule (a convolution's params x batch x output pixels, a linear
 * layer's params x batch x tokens, any other layer's params x batch), an adaptive average
 * pool's output as torchvision's [B,C,1,1] (the flatten after it is functional), and the
 * size estimates are torchinfo's (input; outputs of the layers with parameters, twice;
 * parameters; f32). */
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
    free(s->modules);
    free(s->module_before);
    s->rows = s->modules = NULL;
    s->module_before = NULL;
    s->n_rows = s->n_modules = 0;
}

/* The PyTorch module class torchinfo would name for a layer whose first op is op. */
static const char *summary_leaf_type(const nn_summary_row *r)
{
    static const struct { const char *op, *type; } map[] = {
        {"conv2d", "Conv2d"},       {"batchnorm", "BatchNorm2d"}, {"maxpool2d", "MaxPool2d"},
        {"avgpool2d", "AvgPool2d"}, {"reduce_mean", "AdaptiveAvgPool2d"},
        {"layernorm", "LayerNorm"}, {"rmsnorm", "RMSNorm"},       {"embedding", "Embedding"},
        {"relu", "ReLU"},           {"gelu", "GELU"},             {"silu", "SiLU"},
        {"tanh", "Tanh"},           {"dropout", "Dropout"},
        {"cross_entropy", "CrossEntropyLoss"}, {"moe_dispatch", "Experts"}};
    if (strcmp(r->op, "matmul") == 0 && r->params)
        return "Linear";
    if (strcmp(r->op, "slice") == 0 && r->params)
        return "Embedding"; /* rows of a table taken by position (GPT-2's wpe) */
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (strcmp(r->op, map[i].op) == 0)
            return map[i].type;
    return r->op; /* a functional step (add, concat, the attention core): its op */
}

/* The module class of container path (a dotted scope prefix) in family fam. */
static const char *summary_container_type(const nn_model_desc *d, const char *path)
{
    const char *last = strrchr(path, '.');
    last = last ? last + 1 : path;
    bool numbered = *last >= '0' && *last <= '9';
    int depth = 1;
    for (const char *c = path; *c; c++)
        depth += *c == '.';
    const char *f = d->family;
    if (strcmp(f, "resnet") == 0) {
        if (numbered && depth == 2)
            return strcmp(nn_model_word(d, "block", "basic"), "bottleneck") == 0 ? "Bottleneck"
                                                                                : "BasicBlock";
        return "Sequential";
    }
    if (strcmp(f, "mobilenet_v2") == 0) {
        if (numbered && depth == 2 && strcmp(last, "0") != 0)
            return "InvertedResidual";
        return numbered ? "Conv2dNormActivation" : "Sequential";
    }
    if (strcmp(f, "densenet") == 0)
        return strncmp(last, "denseblock", 10) == 0   ? "_DenseBlock"
               : strncmp(last, "denselayer", 10) == 0 ? "_DenseLayer"
               : strncmp(last, "transition", 10) == 0 ? "_Transition"
                                                      : "Sequential";
    if (strcmp(f, "gpt") == 0)
        return numbered ? "Block" : strcmp(last, "attn") == 0 ? "CausalSelfAttention"
                                  : strcmp(last, "mlp") == 0  ? "MLP"
                                                              : "ModuleList";
    if (strcmp(f, "llama") == 0)
        return numbered ? "LlamaDecoderLayer" : strcmp(last, "self_attn") == 0 ? "LlamaAttention"
                                              : strcmp(last, "mlp") == 0 ? "LlamaMLP"
                                              : strcmp(last, "shared_experts") == 0 ? "LlamaMLP"
                                                                               : "ModuleList";
    return numbered ? "Sequential" : "Module";
}

static const char *summary_model_type(const char *family)
{
    static const struct { const char *f, *type; } map[] = {
        {"mlp", "MLP"},           {"resnet", "ResNet"},          {"mobilenet_v2", "MobileNetV2"},
        {"densenet", "DenseNet"}, {"gpt", "GPT2LMHeadModel"}, {"llama", "LlamaForCausalLM"}};
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (strcmp(family, map[i].f) == 0)
            return map[i].type;
    return "Model";
}

/* Depth of a scope: its dot-separated parts. */
static int summary_depth(const char *name)
{
    int depth = 1;
    for (const char *c = name; *c; c++)
        depth += *c == '.';
    return depth;
}

/* torchinfo's view: types, containers, depth-idx, Mult-Adds and size estimates. */
static np_status summary_torchinfo(const nn_model_desc *d, const nn_model *m, nn_summary *s,
                                   np_err *err)
{
    snprintf(s->model_type, sizeof s->model_type, "%s", summary_model_type(d->family));
    s->ndim = m->logits->ndim;
    memcpy(s->ne, m->logits->ne, sizeof s->ne);
    if (m->seq > 1 && s->ndim == 2 && s->ne[0] == m->batch * m->seq) { /* [B,S,V] */
        s->ndim = 3;
        s->ne[2] = s->ne[1], s->ne[0] = m->batch, s->ne[1] = m->seq;
    }
    /* at most one container per row and level */
    int cap = 0;
    for (int r = 0; r < s->n_rows; r++)
        cap += summary_depth(s->rows[r].name);
    s->modules = nn_calloc((size_t)cap + 1, sizeof *s->modules);
    s->module_before = nn_calloc((size_t)cap + 1, sizeof *s->module_before);
    if (!s->modules || !s->module_before)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory summarizing %s", d->name);
    int counter[NN_NAME_MAX] = {0}; /* rows of each depth so far */
    int open[NN_NAME_MAX];          /* the module open at each depth (index), or -1 */
    int n_open = 0;
    for (int r = 0; r < s->n_rows; r++) {
        nn_summary_row *row = &s->rows[r];
        int depth = summary_depth(row->name);
        /* close the modules that are not prefixes of this row, open the missing ones; a row
         * named as an open module (the attention core of "h.0.attn") is that module's own
         * step, shown inside it */
        int keep = 0;
        while (keep < n_open && keep < depth) {
            const char *path = s->modules[open[keep]].name;
            size_t len = strlen(path);
            if (strncmp(row->name, path, len) != 0 ||
                (row->name[len] != '.' && row->name[len] != '\0'))
                break;
            keep++;
        }
        n_open = keep;
        if (n_open == depth) /* the module's own step */
            depth++;
        for (int lv = n_open; lv < depth - 1; lv++) {
            nn_summary_row *mod = &s->modules[s->n_modules];
            const char *end = row->name;
            for (int k = 0; k <= lv; k++)
                end = strchr(end, '.') + (k < lv);
            snprintf(mod->name, sizeof mod->name, "%.*s", (int)(end - row->name), row->name);
            snprintf(mod->type, sizeof mod->type, "%s", summary_container_type(d, mod->name));
            mod->container = true;
            mod->depth = lv + 1;
            mod->index = ++counter[lv + 1];
            s->module_before[s->n_modules] = r;
            open[n_open++] = s->n_modules++;
        }
        snprintf(row->type, sizeof row->type, "%s", summary_leaf_type(row));
        row->depth = depth;
        row->index = ++counter[depth < NN_NAME_MAX ? depth : NN_NAME_MAX - 1];
        /* torchinfo (LayerInfo.calculate_macs): a convolution's params x batch x output
         * pixels, a linear layer's params x every output dimension but the last (batch and
         * tokens), any other layer's params x batch */
        if (!strcmp(row->type, "AdaptiveAvgPool2d") && row->ndim == 2) { /* [B,C,1,1] */
            row->ndim = 4;
            row->ne[2] = row->ne[3] = 1;
        }
        int64_t per = row->ne[0];
        if (strcmp(row->op, "conv2d") == 0 && row->ndim == 4)
            per *= row->ne[2] * row->ne[3];
        else if (!strcmp(row->type, "Linear"))
            for (int k = 1; k + 1 < row->ndim; k++)
                per *= row->ne[k];
        row->mult_adds = row->params * (row->ndim ? per : 1);
        s->total_mult_adds += row->mult_adds;
        if (row->params) {
            uint64_t out = 1;
            for (int k = 0; k < row->ndim; k++)
                out *= (uint64_t)row->ne[k];
            s->est_fwd_bwd_bytes += 2 * 4 * out;
        }
        for (int k = 0; k < n_open; k++) { /* the row's figures count for its modules */
            nn_summary_row *mod = &s->modules[open[k]];
            mod->params += row->params;
            mod->flops += row->flops;
            mod->train_flops += row->train_flops;
            mod->ndim = row->ndim; /* a module's output: its last layer's */
            memcpy(mod->ne, row->ne, sizeof mod->ne);
            snprintf(mod->op, sizeof mod->op, "%s", "module");
        }
    }
    s->est_input_bytes = nn_nbytes(m->input);
    s->est_params_bytes = 4 * (uint64_t)s->total_params;
    s->est_total_bytes = s->est_input_bytes + s->est_fwd_bwd_bytes + s->est_params_bytes;
    return NP_OK;
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
        if (t->op != NN_OP_SLICE || strcmp(t->src[0]->scope, t->scope) != 0) {
            /* (slices of the layer's output are not its output) */
            row->ndim = t->ndim;
            memcpy(row->ne, t->ne, sizeof row->ne);
            bool lm = m.seq > 1 && t->ndim == 2 && t->ne[0] == m.batch * m.seq;
            if (lm) { /* tokens flattened for the loss: the layer's output is [B,S,N] */
                row->ndim = 3;
                row->ne[0] = m.batch, row->ne[1] = m.seq, row->ne[2] = t->ne[1];
            }
        }
        row->flops += nn_node_flops(t);
        s->forward_flops += nn_node_flops(t);
        s->forward_macs += nn_node_macs(t);
    }
    for (int r = 0; r < s->n_rows; r++)
        if (!s->rows[r].op[0])
            snprintf(s->rows[r].op, sizeof s->rows[r].op, "%s", "reshape");
    for (int i = 0; i < n_fwd; i++) {
        const nn_tensor *t = nn_graph_node(g, i);
        if (t->op == NN_OP_LEAF && t->role == NN_ROLE_PARAM && !t->trainable)
            s->non_trainable_params += nn_numel(t);
    }
    s->trainable_params = s->total_params;
    s->total_params += s->non_trainable_params;
    s->active_params = nn_graph_active_param_count(g);
    if ((st = summary_torchinfo(d, &m, s, err)) != NP_OK)
        goto done;
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
