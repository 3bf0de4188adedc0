/* zoo.c — builders that turn a model description (model.h) into a forward graph and loss:
 * MLP, ResNet (basic and bottleneck blocks), MobileNetV2, DenseNet; the transformers (GPT-2/3,
 * Llama and its variants, the mixtures of experts) are zoo_llm.c's. Family onnx is an imported
 * graph: model_onnx.c builds it, and nn_model_build adds the loss as for the others.
 *
 * Layouts follow the reference implementations whose parameter counts are published
 * (torchvision for the CNNs, Hugging Face GPT-2 with tied embeddings, Meta's Llama 2), so the
 * zoo's counts can be checked against them. Every layer gets a scope (its torchvision-style
 * name), and transformer blocks and residual blocks a layer index (for checkpointing).
 * Parameters carry their initialization in fp[0] (std) and fp[1] (0 normal, 1 ones, 2 zeros)
 * for nn_model_init; the graph has no storage until then.
 *
 * Inference graphs (nn_model_opts.kv; docs/serving.md): the same blocks over the new tokens
 * only, positions (learned or rope) from the cached count on, each layer's keys and values
 * read from a paged cache through a slot table and the attention op's inference form
 * (nn_attention_kv), the logits of each sequence's last token (zoo_llm.c).
 *
 * Not modelled: GPT-3's alternating sparse attention. Dropout only when nn_model_opts asks
 * for it (GPT family; Llama has none).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn_impl.h"
#include "zoo_impl.h"

nn_tensor *zb_dropout(nn_zb *b, nn_tensor *x)
{
    return b->dropout > 0 && !b->inference ? nn_dropout(b->g, x, b->dropout, nn_graph_seed_next(b->g)) : x;
}

nn_tensor *zb_param(nn_zb *b, const char *name, int ndim, const int64_t *ne, double std,
                    int init)
{
    nn_tensor *p = nn_param(b->g, name, b->kv ? b->dt : NN_F32, ndim, ne);
    if (!p)
        return NULL;
    p->fp[0] = std;
    p->fp[1] = init;
    return p->dtype == b->dt ? p : nn_cast(b->g, p, b->dt);
}

nn_tensor *zb_buffer(nn_zb *b, const char *name, int64_t n, int init)
{
    nn_tensor *t = nn_const(b->g, name, NN_F32, 1, DIMS(n));
    if (t)
        t->fp[1] = init;
    return t && b->dt != NN_F32 ? nn_cast(b->g, t, b->dt) : t;
}

nn_tensor *zb_linear(nn_zb *b, nn_tensor *x, int64_t in, int64_t out, bool bias,
                     const char *scope)
{
    nn_graph_set_scope(b->g, "%s", scope);
    nn_tensor *w = PARAM(b, "weight", 1.0 / sqrt((double)in), NN_INIT_NORMAL, in, out);
    nn_tensor *bs = bias ? PARAM(b, "bias", 0, NN_INIT_ZEROS, out) : NULL;
    return nn_linear(b->g, x, w, bs);
}

static nn_tensor *zb_bn(nn_zb *b, nn_tensor *x, int64_t c, const char *scope)
{
    nn_graph_set_scope(b->g, "%s", scope);
    nn_tensor *gamma = PARAM(b, "weight", 0, NN_INIT_ONES, c);
    nn_tensor *beta = PARAM(b, "bias", 0, NN_INIT_ZEROS, c);
    if (!b->inference)
        return nn_batchnorm(b->g, x, gamma, beta, 1e-5);
    return nn_batchnorm_infer(b->g, x, gamma, beta, zb_buffer(b, "running_mean", c, NN_INIT_ZEROS),
                              zb_buffer(b, "running_var", c, NN_INIT_ONES), 1e-5);
}

static nn_tensor *zb_conv(nn_zb *b, nn_tensor *x, int64_t in, int64_t out, int k, int stride,
                          int pad, int groups, const char *scope)
{
    nn_graph_set_scope(b->g, "%s", scope);
    nn_tensor *w = PARAM(b, "weight", sqrt(2.0 / (double)(in / groups * k * k)), NN_INIT_NORMAL,
                         out, in / groups, k, k);
    return nn_conv2d(b->g, x, w, stride, pad, 1, groups);
}

/* conv, batch norm, then relu (act 1), relu6 (act 2) or nothing (act 0). */
static nn_tensor *zb_conv_bn(nn_zb *b, nn_tensor *x, int64_t in, int64_t out, int k, int stride,
                             int groups, int act, const char *conv, const char *bn)
{
    nn_tensor *y = zb_bn(b, zb_conv(b, x, in, out, k, stride, (k - 1) / 2, groups, conv), out, bn);
    return act == 1 ? nn_relu(b->g, y) : act == 2 ? nn_relu6(b->g, y) : y;
}

/* ---- MLP ---- */

static nn_tensor *zb_mlp(nn_zb *b, const nn_model_desc *d, int64_t batch, nn_model *m)
{
    int64_t in = nn_model_int(d, "inputs", 1), hidden[NN_MODEL_MAX_VALUES];
    int nh = nn_model_ints(d, "hidden", hidden, NN_MODEL_MAX_VALUES);
    const char *act = nn_model_word(d, "activation", "relu");
    m->input = nn_input(b->g, "input", NN_F32, 2, DIMS(batch, in));
    nn_tensor *x = b->dt == NN_F32 ? m->input : nn_cast(b->g, m->input, b->dt);
    for (int i = 0; i < nh; i++) {
        char scope[32];
        snprintf(scope, sizeof scope, "fc%d", i + 1);
        nn_graph_set_layer(b->g, i);
        x = zb_linear(b, x, in, hidden[i], true, scope);
        x = strcmp(act, "gelu") == 0 ? nn_gelu(b->g, x)
            : strcmp(act, "tanh") == 0 ? nn_tanh(b->g, x) : nn_relu(b->g, x);
        in = hidden[i];
    }
    nn_graph_set_layer(b->g, -1);
    char scope[32];
    snprintf(scope, sizeof scope, "fc%d", nh + 1);
    return zb_linear(b, x, in, nn_model_int(d, "classes", 1), true, scope);
}

/* ---- ResNet (torchvision) ---- */

static nn_tensor *zb_resnet(nn_zb *b, const nn_model_desc *d, int64_t batch, nn_model *m)
{
    bool bottleneck = strcmp(nn_model_word(d, "block", "basic"), "bottleneck") == 0;
    int64_t layers[4], width = nn_model_int(d, "width", 64), img = nn_model_int(d, "image", 224);
    int64_t ch = nn_model_int(d, "channels", 3), exp_ = bottleneck ? 4 : 1;
    nn_model_ints(d, "layers", layers, 4);
    m->input = nn_input(b->g, "input", NN_F32, 4, DIMS(batch, ch, img, img));
    nn_tensor *x = b->dt == NN_F32 ? m->input : nn_cast(b->g, m->input, b->dt);
    x = zb_conv_bn(b, x, ch, width, 7, 2, 1, 1, "conv1", "bn1");
    nn_graph_set_scope(b->g, "maxpool");
    x = nn_maxpool2d(b->g, x, 3, 2, 1);
    int64_t in = width;
    int layer = 0;
    char s1[128], s2[128];
    for (int stage = 0; stage < 4; stage++) {
        int64_t planes = width << stage;
        for (int64_t blk = 0; blk < layers[stage]; blk++) {
            int stride = stage > 0 && blk == 0 ? 2 : 1;
            char pre[32];
            snprintf(pre, sizeof pre, "layer%d.%lld", stage + 1, (long long)blk);
            nn_graph_set_layer(b->g, layer++);
            nn_tensor *idn = x, *y;
#define S(a, b_) (snprintf(s1, sizeof s1, "%s.%s", pre, a), snprintf(s2, sizeof s2, "%s.%s", pre, b_))
            if (bottleneck) {
                S("conv1", "bn1");
                y = zb_conv_bn(b, x, in, planes, 1, 1, 1, 1, s1, s2);
                S("conv2", "bn2");
                y = zb_conv_bn(b, y, planes, planes, 3, stride, 1, 1, s1, s2);
                S("conv3", "bn3");
                y = zb_conv_bn(b, y, planes, planes * 4, 1, 1, 1, 0, s1, s2);
            } else {
                S("conv1", "bn1");
                y = zb_conv_bn(b, x, in, planes, 3, stride, 1, 1, s1, s2);
                S("conv2", "bn2");
                y = zb_conv_bn(b, y, planes, planes, 3, 1, 1, 0, s1, s2);
            }
            if (stride != 1 || in != planes * exp_) {
                S("downsample.0", "downsample.1");
                idn = zb_conv_bn(b, x, in, planes * exp_, 1, stride, 1, 0, s1, s2);
            }
#undef S
            nn_graph_set_scope(b->g, "%s.add", pre);
            x = nn_relu(b->g, nn_add(b->g, y, idn));
            in = planes * exp_;
        }
    }
    nn_graph_set_layer(b->g, -1);
    nn_graph_set_scope(b->g, "avgpool");
    x = nn_global_avgpool(b->g, x);
    return zb_linear(b, x, in, nn_model_int(d, "classes", 1000), true, "fc");
}

/* ---- MobileNetV2 (torchvision, width multiplier 1.0) ---- */

static nn_tensor *zb_mobilenet_v2(nn_zb *b, const nn_model_desc *d, int64_t batch, nn_model *m)
{
    static const int cfg[][4] = {{1, 16, 1, 1}, {6, 24, 2, 2}, {6, 32, 3, 2}, {6, 64, 4, 2},
                                 {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1}};
    int64_t img = nn_model_int(d, "image", 224), ch = nn_model_int(d, "channels", 3);
    m->input = nn_input(b->g, "input", NN_F32, 4, DIMS(batch, ch, img, img));
    nn_tensor *x = b->dt == NN_F32 ? m->input : nn_cast(b->g, m->input, b->dt);
    x = zb_conv_bn(b, x, ch, 32, 3, 2, 1, 2, "features.0.0", "features.0.1");
    int64_t in = 32;
    int f = 1;
    char s1[128], s2[128];
    for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++)
        for (int i = 0; i < cfg[c][2]; i++, f++) {
            int t = cfg[c][0], stride = i == 0 ? cfg[c][3] : 1;
            int64_t out = cfg[c][1], hid = in * t;
            nn_graph_set_layer(b->g, f - 1);
            nn_tensor *y = x;
            int k = 0;
            if (t != 1) {
                snprintf(s1, sizeof s1, "features.%d.conv.0.0", f);
                snprintf(s2, sizeof s2, "features.%d.conv.0.1", f);
                y = zb_conv_bn(b, y, in, hid, 1, 1, 1, 2, s1, s2);
                k = 1;
            }
            snprintf(s1, sizeof s1, "features.%d.conv.%d.0", f, k);
            snprintf(s2, sizeof s2, "features.%d.conv.%d.1", f, k);
            y = zb_conv_bn(b, y, hid, hid, 3, stride, (int)hid, 2, s1, s2);
            snprintf(s1, sizeof s1, "features.%d.conv.%d", f, k + 1);
            snprintf(s2, sizeof s2, "features.%d.conv.%d", f, k + 2);
            y = zb_conv_bn(b, y, hid, out, 1, 1, 1, 0, s1, s2);
            if (stride == 1 && in == out) {
                nn_graph_set_scope(b->g, "features.%d.add", f);
                y = nn_add(b->g, x, y);
            }
            x = y;
            in = out;
        }
    nn_graph_set_layer(b->g, -1);
    snprintf(s1, sizeof s1, "features.%d.0", f);
    snprintf(s2, sizeof s2, "features.%d.1", f);
    x = zb_conv_bn(b, x, in, 1280, 1, 1, 1, 2, s1, s2);
    nn_graph_set_scope(b->g, "avgpool");
    x = nn_global_avgpool(b->g, x);
    return zb_linear(b, x, 1280, nn_model_int(d, "classes", 1000), true, "classifier.1");
}

/* ---- DenseNet (torchvision) ---- */

static nn_tensor *zb_densenet(nn_zb *b, const nn_model_desc *d, int64_t batch, nn_model *m)
{
    int64_t blocks[NN_MODEL_MAX_VALUES], growth = nn_model_int(d, "growth", 32);
    int nb = nn_model_ints(d, "layers", blocks, NN_MODEL_MAX_VALUES);
    int64_t bn_size = nn_model_int(d, "bn_size", 4), feat = nn_model_int(d, "init_features", 64);
    int64_t img = nn_model_int(d, "image", 224), ch = nn_model_int(d, "channels", 3);
    m->input = nn_input(b->g, "input", NN_F32, 4, DIMS(batch, ch, img, img));
    nn_tensor *x = b->dt == NN_F32 ? m->input : nn_cast(b->g, m->input, b->dt);
    x = nn_relu(b->g, zb_bn(b, zb_conv(b, x, ch, feat, 7, 2, 3, 1, "features.conv0"), feat,
                            "features.norm0"));
    nn_graph_set_scope(b->g, "features.pool0");
    x = nn_maxpool2d(b->g, x, 3, 2, 1);
    char s[128];
    int layer = 0;
    for (int i = 0; i < nb; i++) {
        for (int64_t l = 0; l < blocks[i]; l++) {
            nn_graph_set_layer(b->g, layer++);
            snprintf(s, sizeof s, "features.denseblock%d.denselayer%lld.norm1", i + 1, (long long)l + 1);
            nn_tensor *y = nn_relu(b->g, zb_bn(b, x, feat, s));
            snprintf(s, sizeof s, "features.denseblock%d.denselayer%lld.conv1", i + 1, (long long)l + 1);
            y = zb_conv(b, y, feat, bn_size * growth, 1, 1, 0, 1, s);
            snprintf(s, sizeof s, "features.denseblock%d.denselayer%lld.norm2", i + 1, (long long)l + 1);
            y = nn_relu(b->g, zb_bn(b, y, bn_size * growth, s));
            snprintf(s, sizeof s, "features.denseblock%d.denselayer%lld.conv2", i + 1, (long long)l + 1);
            y = zb_conv(b, y, bn_size * growth, growth, 3, 1, 1, 1, s);
            nn_graph_set_scope(b->g, "features.denseblock%d.denselayer%lld.cat", i + 1, (long long)l + 1);
            x = nn_concat(b->g, 2, (nn_tensor *[]){x, y}, 1);
            feat += growth;
        }
        if (i + 1 < nb) {
            snprintf(s, sizeof s, "features.transition%d.norm", i + 1);
            x = nn_relu(b->g, zb_bn(b, x, feat, s));
            snprintf(s, sizeof s, "features.transition%d.conv", i + 1);
            x = zb_conv(b, x, feat, feat / 2, 1, 1, 0, 1, s);
            nn_graph_set_scope(b->g, "features.transition%d.pool", i + 1);
            x = nn_avgpool2d(b->g, x, 2, 2, 0);
            feat /= 2;
        }
    }
    nn_graph_set_layer(b->g, -1);
    x = nn_relu(b->g, zb_bn(b, x, feat, "features.norm5"));
    nn_graph_set_scope(b->g, "avgpool");
    x = nn_global_avgpool(b->g, x);
    return zb_linear(b, x, feat, nn_model_int(d, "classes", 1000), true, "classifier");
}

np_status nn_model_build(const nn_model_desc *d, const nn_model_opts *o, nn_model *m, np_err *err)
{
    memset(m, 0, sizeof *m);
    if (o->batch < 0 || o->seq < 0)
        return np_err_set(err, NP_ERR_RANGE, "%s: a negative batch or sequence length", d->name);
    if (!(o->dropout >= 0 && o->dropout < 1))
        return np_err_set(err, NP_ERR_RANGE, "%s: dropout %g is not a probability in [0, 1)",
                          d->name, o->dropout);
    if (o->dropout > 0 && strcmp(d->family, "gpt") != 0)
        return np_err_set(err, NP_ERR_RANGE, "%s: dropout is built for the gpt family only "
                          "(GPT-2's embd/attn/resid_pdrop), not for %s", d->name, d->family);
    bool lm = strcmp(d->family, "gpt") == 0 || strcmp(d->family, "llama") == 0;
    bool onnx = strcmp(d->family, "onnx") == 0;
    int64_t B = o->batch ? o->batch : onnx ? 0 : nn_model_int(d, "batch", 1);
    int64_t S = lm ? (o->seq ? o->seq : nn_model_int(d, "context", 1)) : 1;
    if (o->kv && !lm)
        return np_err_set(err, NP_ERR_RANGE, "%s: inference with a kv cache is built for the "
                          "gpt and llama families, not for %s", d->name, d->family);
    if (o->kv && nn_model_int(d, "kv_lora_rank", 0) > 0)
        return np_err_set(err, NP_ERR_RANGE, "%s: inference with a kv cache is not built for "
                          "multi-head latent attention yet (its cache is the latent c_KV)",
                          d->name);
    if (o->kv && (o->past < 0 || (o->past > 0 && o->kv_slots < 1)))
        return np_err_set(err, NP_ERR_RANGE, "%s: %lld cached tokens in a cache of %lld rows",
                          d->name, (long long)o->past, (long long)o->kv_slots);
    if (o->kv && o->past + S > nn_model_int(d, "context", 1))
        return np_err_set(err, NP_ERR_RANGE, "%s: %lld cached and %lld new tokens exceed the "
                          "context of %lld", d->name, (long long)o->past, (long long)S,
                          (long long)nn_model_int(d, "context", 1));
    if (lm && S > nn_model_int(d, "context", 1))
        return np_err_set(err, NP_ERR_RANGE, "%s: sequence length %lld exceeds the context of %lld",
                          d->name, (long long)S, (long long)nn_model_int(d, "context", 1));
    if (nn_model_check_scale(d, B, S, err) != NP_OK)
        return err->status;
    m->g = nn_graph_new(o->seed);
    if (!m->g)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory building %s", d->name);
    nn_zb b = {.g = m->g, .inference = o->inference || o->kv, .dt = o->compute,
               .dropout = o->dropout, .kv = o->kv, .past = o->past, .kv_slots = o->kv_slots,
               .m = m};
    m->batch = B;
    m->seq = S;
    nn_tensor *logits;
    if (onnx) {
        np_status st = nn_onnx_build(m->g, d, B, o->inference, o->compute, m, &logits, err);
        if (st != NP_OK) {
            nn_graph_free(m->g);
            memset(m, 0, sizeof *m);
            return st;
        }
    } else if (lm)
        logits = zb_transformer(&b, d, B, S, m);
    else if (strcmp(d->family, "mlp") == 0)
        logits = zb_mlp(&b, d, B, m);
    else if (strcmp(d->family, "resnet") == 0)
        logits = zb_resnet(&b, d, B, m);
    else if (strcmp(d->family, "mobilenet_v2") == 0)
        logits = zb_mobilenet_v2(&b, d, B, m);
    else
        logits = zb_densenet(&b, d, B, m);
    nn_graph_set_layer(m->g, -1);
    nn_graph_set_scope(m->g, o->kv ? "logits" : "loss");
    if (logits && logits->dtype != NN_F32)
        logits = nn_cast(m->g, logits, NN_F32);
    m->logits = logits;
    if (o->kv) { /* inference: no loss */
        nn_graph_set_scope(m->g, "%s", "");
        if (logits)
            nn_graph_set_output(m->g, logits);
        if (nn_graph_status(m->g, err) != NP_OK) {
            np_err_prefix(err, "model %s", d->name);
            return err->status;
        }
        return NP_OK;
    }
    int64_t rows = onnx && logits ? logits->ne[0] : lm ? B * S : B; /* a label per row */
    m->labels = nn_input(m->g, "labels", NN_I32, 1, DIMS(rows));
    m->loss = nn_cross_entropy(m->g, logits, m->labels);
    /* DeepSeek-V3's multi-token prediction: depth k's target at position i is the label of
     * position i + k; lambda / depth times the sum of their cross-entropies (report, eq. 25) */
    double lambda = nn_model_real(d, "mtp_weight", 0.3);
    for (int k = 1; k <= b.n_mtp && m->loss; k++) {
        nn_tensor *lab = nn_slice(m->g, nn_reshape(m->g, m->labels, 2, DIMS(B, S)), 1, k, S);
        nn_tensor *lk = nn_reshape(m->g, lab, 1, DIMS(B * (S - k)));
        nn_tensor *lg = b.mtp[k - 1] && b.mtp[k - 1]->dtype != NN_F32
                            ? nn_cast(m->g, b.mtp[k - 1], NN_F32) : b.mtp[k - 1];
        m->loss = nn_add(m->g, m->loss,
                         nn_scale(m->g, nn_cross_entropy(m->g, lg, lk), lambda / b.n_mtp));
    }
    if (b.aux) /* MoE: the mean of the layers' auxiliary losses, times the coefficient */
        m->loss = nn_add(m->g, m->loss, nn_scale(m->g, b.aux, nn_model_real(d, "aux_loss", 0) /
                                                                  b.n_aux));
    nn_graph_set_scope(m->g, "%s", "");
    nn_graph_set_output(m->g, m->loss);
    if (nn_graph_status(m->g, err) != NP_OK) {
        np_err_prefix(err, "model %s", d->name);
        if (onnx && !err->file[0]) /* an imported graph's output the loss cannot take */
            snprintf(err->file, sizeof err->file, "%.*s", (int)sizeof err->file - 1, d->path);
        return err->status;
    }
    return NP_OK;
}

np_status nn_model_init(nn_graph *g, uint64_t seed, np_err *err)
{
    for (int i = 0; i < nn_graph_n_nodes(g); i++) {
        nn_tensor *t = nn_graph_node(g, i);
        if (t->op != NN_OP_LEAF || (t->role != NN_ROLE_PARAM && t->role != NN_ROLE_CONST) ||
            t->data)
            continue;
        bool ok = t->fp[1] == NN_INIT_ONES    ? nn_tensor_fill(t, 1.0f)
                  : t->fp[1] == NN_INIT_ZEROS ? nn_tensor_fill(t, 0.0f)
                                              : nn_tensor_randn(t, seed + (uint64_t)t->id, t->fp[0]);
        if (!ok)
            return np_err_set(err, NP_ERR_NOMEM, "out of memory initializing %s", t->name);
    }
    return NP_OK;
}

int64_t nn_graph_param_count(const nn_graph *g)
{
    int64_t n = 0;
    for (int i = 0; i < nn_graph_n_nodes(g); i++) {
        const nn_tensor *t = nn_graph_node(g, i);
        if (t->op == NN_OP_LEAF && t->trainable)
            n += nn_numel(t);
    }
    return n;
}

int64_t nn_graph_active_param_count(const nn_graph *g)
{
    int64_t n = nn_graph_param_count(g);
    bool *seen = nn_calloc((size_t)nn_graph_max_id(g) + 1, sizeof *seen);
    if (!seen)
        return n;
    for (int i = 0; i < nn_graph_n_nodes(g); i++) {
        const nn_tensor *t = nn_graph_node(g, i);
        if (t->op != NN_OP_MOE_GMM || t->ip[2])
            continue;
        const nn_tensor *w = t->src[1];
        while (w->op == NN_OP_CAST) /* the master weight behind a bf16 copy */
            w = w->src[0];
        if (w->op != NN_OP_LEAF || !w->trainable || seen[w->id])
            continue;
        seen[w->id] = true;
        int64_t E = t->ip[0], k = t->src[2]->ne[1];
        n -= nn_numel(w) / E * (E - k);
    }
    free(seen);
    return n;
}
