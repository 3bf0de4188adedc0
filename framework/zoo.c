/* zoo.c — builders that turn a model description (model.h) into a forward graph and loss:
 * MLP, ResNet (basic and bottleneck blocks), MobileNetV2, DenseNet, GPT-2/3 and Llama 2 (with
 * the variants of Llama 3, Mistral and Qwen2/3 that model_hf.c reads from Hugging Face configs:
 * head_dim, attention biases, q/k norms, rope base, norms' eps). Family onnx is an imported
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
 * (nn_attention_kv), the logits of each sequence's last token.
 *
 * Not modelled: GPT-3's alternating sparse attention. Dropout only when nn_model_opts asks
 * for it (GPT family; Llama has none).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "model.h"

#define NN_INIT_NORMAL 0
#define NN_INIT_ONES 1
#define NN_INIT_ZEROS 2

typedef struct nn_zb {
    nn_graph *g;
    bool inference;
    nn_dtype dt;
    double dropout;
    bool kv;          /* an inference graph with a kv cache (nn_model_opts.kv) */
    int64_t past, kv_slots;
} nn_zb;

/* Dropout of p = b->dropout (none when 0). */
static nn_tensor *zb_dropout(nn_zb *b, nn_tensor *x)
{
    return b->dropout > 0 && !b->inference ? nn_dropout(b->g, x, b->dropout, nn_graph_seed_next(b->g)) : x;
}

#define DIMS(...) (int64_t[]){__VA_ARGS__}
#define NDIMS(...) ((int)(sizeof DIMS(__VA_ARGS__) / sizeof(int64_t)))

/* A trainable f32 parameter (master weight); returns the value the model computes with.
 * Inference (kv) keeps weights in the compute dtype itself, as a server does: no cast. */
static nn_tensor *zb_param(nn_zb *b, const char *name, int ndim, const int64_t *ne, double std,
                           int init)
{
    nn_tensor *p = nn_param(b->g, name, b->kv ? b->dt : NN_F32, ndim, ne);
    if (!p)
        return NULL;
    p->fp[0] = std;
    p->fp[1] = init;
    return p->dtype == b->dt ? p : nn_cast(b->g, p, b->dt);
}
#define PARAM(b, name, std, init, ...) zb_param(b, name, NDIMS(__VA_ARGS__), DIMS(__VA_ARGS__), std, init)

static nn_tensor *zb_buffer(nn_zb *b, const char *name, int64_t n, int init)
{
    nn_tensor *t = nn_const(b->g, name, NN_F32, 1, DIMS(n));
    if (t)
        t->fp[1] = init;
    return t && b->dt != NN_F32 ? nn_cast(b->g, t, b->dt) : t;
}

static nn_tensor *zb_linear(nn_zb *b, nn_tensor *x, int64_t in, int64_t out, bool bias,
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

/* ---- transformers: GPT-2/3 (pre-LN, learned positions, GELU, tied head by default) and
 * Llama 2 (RMSNorm, SwiGLU, grouped-query attention, untied head) ---- */

/* [B, S, H*Dh] -> [B, H, S, Dh] */
static nn_tensor *zb_heads(nn_graph *g, nn_tensor *x, int64_t B, int64_t S, int64_t H, int64_t Dh)
{
    return nn_permute(g, nn_reshape(g, x, 4, DIMS(B, S, H, Dh)), (int[]){0, 2, 1, 3});
}

/* Names t (a node of the kv graph the cache's owner finds by name). */
static nn_tensor *zb_name(nn_tensor *t, const char *pre, int64_t l, const char *what)
{
    if (t)
        snprintf(t->name, sizeof t->name, "%s.%lld.%s", pre, (long long)l, what);
    return t;
}

/* The kv cache of layer l: names the new tokens' k and v [B, KV, S, Dh] ("k_new", "v_new"),
 * and with cached tokens (past > 0) makes *k and *v the cache's rows of each sequence
 * (gathered through m->kv_slots, a paged cache's block table) followed by the new ones,
 * [B, KV, past + S, Dh]. */
static np_status zb_kv_cache(nn_zb *b, nn_model *m, const char *pre, int64_t l, int64_t KV,
                             int64_t Dh, nn_tensor **k, nn_tensor **v)
{
    nn_graph *g = b->g;
    zb_name(*k, pre, l, "k_new");
    zb_name(*v, pre, l, "v_new");
    if (b->past == 0)
        return NP_OK;
    int64_t B = m->input->ne[0], P = b->past;
    if (!m->kv_slots)
        m->kv_slots = nn_input(g, "kv_slots", NN_I32, 2, DIMS(B, P));
    nn_tensor **kv[2] = {k, v};
    for (int i = 0; i < 2; i++) {
        nn_tensor *c = zb_name(nn_const(g, "cache", b->dt, 2, DIMS(b->kv_slots, KV * Dh)), pre,
                               l, i ? "v_cache" : "k_cache");
        nn_tensor *past = zb_heads(g, nn_embedding(g, c, m->kv_slots), B, P, KV, Dh);
        *kv[i] = nn_concat(g, 2, (nn_tensor *[]){past, *kv[i]}, 2);
    }
    return nn_graph_status(g, &(np_err){0});
}

static nn_tensor *zb_transformer(nn_zb *b, const nn_model_desc *d, int64_t B, int64_t S,
                                 nn_model *m)
{
    nn_graph *g = b->g;
    bool llama = strcmp(d->family, "llama") == 0;
    int64_t L = nn_model_int(d, "layers", 1), D = nn_model_int(d, "d_model", 1);
    int64_t H = nn_model_int(d, "heads", 1), KV = nn_model_int(d, "kv_heads", H);
    int64_t V = nn_model_int(d, "vocab", 1), ctx = nn_model_int(d, "context", 1);
    int64_t F = nn_model_int(d, "ffn", 4 * D), Dh = nn_model_int(d, "head_dim", D / H);
    bool tied = strcmp(nn_model_word(d, "tied", llama ? "no" : "yes"), "yes") == 0;
    /* Llama's variants (model_hf.c): biases of q, k, v (Qwen2) or of every projection
     * (attention_bias), RMSNorm of each head's q and k (Qwen3), rope base, norms' eps */
    const char *bias = nn_model_word(d, "attn_bias", "none");
    bool qkv_bias = strcmp(bias, "none") != 0, o_bias = strcmp(bias, "all") == 0;
    bool qk_norm = strcmp(nn_model_word(d, "qk_norm", "no"), "yes") == 0;
    double theta = nn_model_real(d, "rope_theta", 10000.0), eps = nn_model_real(d, "norm_eps", 1e-5);
    double std = 0.02;
    m->input = nn_input(g, "tokens", NN_I32, 2, DIMS(B, S));
    nn_graph_set_scope(g, llama ? "embed_tokens" : "wte");
    nn_tensor *wte = PARAM(b, "weight", std, NN_INIT_NORMAL, V, D);
    nn_tensor *x = nn_embedding(g, wte, m->input);
    if (!llama) {
        nn_graph_set_scope(g, "wpe");
        nn_tensor *wpe = PARAM(b, "weight", 0.01, NN_INIT_NORMAL, ctx, D);
        int64_t p0 = b->kv ? b->past : 0;
        x = nn_add(g, x, S == ctx ? wpe : nn_slice(g, wpe, 0, p0, p0 + S));
        x = zb_dropout(b, x);
    }
    char s[128];
    for (int64_t l = 0; l < L; l++) {
        nn_graph_set_layer(g, (int)l);
        const char *pre = llama ? "layers" : "h";
        snprintf(s, sizeof s, "%s.%lld.%s", pre, (long long)l, llama ? "input_layernorm" : "ln_1");
        nn_graph_set_scope(g, "%s", s);
        nn_tensor *hn = llama ? nn_rmsnorm(g, x, PARAM(b, "weight", 0, NN_INIT_ONES, D), eps)
                              : nn_layernorm(g, x, PARAM(b, "weight", 0, NN_INIT_ONES, D),
                                             PARAM(b, "bias", 0, NN_INIT_ZEROS, D), 1e-5);
        nn_tensor *q, *k, *v;
        if (llama) {
            snprintf(s, sizeof s, "layers.%lld.self_attn.q_proj", (long long)l);
            q = zb_linear(b, hn, D, H * Dh, qkv_bias, s);
            snprintf(s, sizeof s, "layers.%lld.self_attn.k_proj", (long long)l);
            k = zb_linear(b, hn, D, KV * Dh, qkv_bias, s);
            snprintf(s, sizeof s, "layers.%lld.self_attn.v_proj", (long long)l);
            v = zb_linear(b, hn, D, KV * Dh, qkv_bias, s);
        } else {
            snprintf(s, sizeof s, "h.%lld.attn.c_attn", (long long)l);
            nn_tensor *qkv = zb_linear(b, hn, D, 3 * D, true, s), *parts[3];
            nn_split(g, qkv, -1, 3, parts);
            q = parts[0], k = parts[1], v = parts[2];
        }
        snprintf(s, sizeof s, "%s.%lld.%s", pre, (long long)l, llama ? "self_attn" : "attn");
        nn_graph_set_scope(g, "%s", s);
        q = zb_heads(g, q, B, S, H, Dh);
        k = zb_heads(g, k, B, S, KV, Dh);
        v = zb_heads(g, v, B, S, KV, Dh);
        if (qk_norm) { /* Qwen3: over each head's Dh, before rope */
            nn_graph_set_scope(g, "layers.%lld.self_attn.q_norm", (long long)l);
            q = nn_rmsnorm(g, q, PARAM(b, "weight", 0, NN_INIT_ONES, Dh), eps);
            nn_graph_set_scope(g, "layers.%lld.self_attn.k_norm", (long long)l);
            k = nn_rmsnorm(g, k, PARAM(b, "weight", 0, NN_INIT_ONES, Dh), eps);
            nn_graph_set_scope(g, "layers.%lld.self_attn", (long long)l);
        }
        if (llama) {
            q = nn_rope_at(g, q, theta, b->kv ? b->past : 0);
            k = nn_rope_at(g, k, theta, b->kv ? b->past : 0);
        }
        if (b->kv && zb_kv_cache(b, m, pre, l, KV, Dh, &k, &v) != NP_OK)
            return NULL;
        /* grouped-query attention: each kv head serves H/KV query heads (the inference form
         * of attention reads them itself once a cache is read) */
        if (KV != H && !(b->kv && b->past > 0)) {
            k = nn_reshape(g, nn_broadcast_to(g, nn_reshape(g, k, 5, DIMS(B, KV, 1, S, Dh)), 5,
                                              DIMS(B, KV, H / KV, S, Dh)), 4, DIMS(B, H, S, Dh));
            v = nn_reshape(g, nn_broadcast_to(g, nn_reshape(g, v, 5, DIMS(B, KV, 1, S, Dh)), 5,
                                              DIMS(B, KV, H / KV, S, Dh)), 4, DIMS(B, H, S, Dh));
        }
        double pa = b->dropout > 0 && !b->inference && !llama ? b->dropout : 0;
        uint64_t seed = pa > 0 ? nn_graph_seed_next(g) : 0;
        nn_tensor *a = b->kv ? nn_attention_kv(g, q, k, v, true)
                             : nn_attention_dropout(g, q, k, v, true, pa, seed);
        a = nn_reshape(g, nn_permute(g, a, (int[]){0, 2, 1, 3}), 3, DIMS(B, S, H * Dh));
        snprintf(s, sizeof s, "%s.%lld.%s", pre, (long long)l, llama ? "self_attn.o_proj" : "attn.c_proj");
        a = zb_linear(b, a, H * Dh, D, !llama || o_bias, s);
        if (!llama)
            a = zb_dropout(b, a);
        nn_graph_set_scope(g, "%s.%lld.residual1", pre, (long long)l);
        x = nn_add(g, x, a);
        snprintf(s, sizeof s, "%s.%lld.%s", pre, (long long)l, llama ? "post_attention_layernorm" : "ln_2");
        nn_graph_set_scope(g, "%s", s);
        hn = llama ? nn_rmsnorm(g, x, PARAM(b, "weight", 0, NN_INIT_ONES, D), eps)
                   : nn_layernorm(g, x, PARAM(b, "weight", 0, NN_INIT_ONES, D),
                                  PARAM(b, "bias", 0, NN_INIT_ZEROS, D), 1e-5);
        nn_tensor *f;
        if (llama) {
            snprintf(s, sizeof s, "layers.%lld.mlp.gate_proj", (long long)l);
            nn_tensor *gate = zb_linear(b, hn, D, F, false, s);
            snprintf(s, sizeof s, "layers.%lld.mlp.up_proj", (long long)l);
            nn_tensor *up = zb_linear(b, hn, D, F, false, s);
            nn_graph_set_scope(g, "layers.%lld.mlp.act", (long long)l);
            f = nn_mul(g, nn_silu(g, gate), up);
            snprintf(s, sizeof s, "layers.%lld.mlp.down_proj", (long long)l);
            f = zb_linear(b, f, F, D, false, s);
        } else {
            snprintf(s, sizeof s, "h.%lld.mlp.c_fc", (long long)l);
            f = nn_gelu(g, zb_linear(b, hn, D, F, true, s));
            snprintf(s, sizeof s, "h.%lld.mlp.c_proj", (long long)l);
            f = zb_linear(b, f, F, D, true, s);
            f = zb_dropout(b, f);
        }
        nn_graph_set_scope(g, "%s.%lld.residual2", pre, (long long)l);
        x = nn_add(g, x, f);
    }
    nn_graph_set_layer(g, -1);
    nn_graph_set_scope(g, llama ? "norm" : "ln_f");
    x = llama ? nn_rmsnorm(g, x, PARAM(b, "weight", 0, NN_INIT_ONES, D), eps)
              : nn_layernorm(g, x, PARAM(b, "weight", 0, NN_INIT_ONES, D),
                             PARAM(b, "bias", 0, NN_INIT_ZEROS, D), 1e-5);
    if (b->kv) { /* inference: the next token's logits only, from each sequence's last row */
        x = nn_reshape(g, S > 1 ? nn_slice(g, x, 1, S - 1, S) : x, 3, DIMS(B, 1, D));
        S = 1;
    }
    if (tied) {
        nn_graph_set_scope(g, "lm_head");
        return nn_matmul(g, nn_reshape(g, x, 2, DIMS(B * S, D)), nn_transpose(g, wte));
    }
    return nn_reshape(g, zb_linear(b, x, D, V, false, "lm_head"), 2, DIMS(B * S, V));
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
    nn_zb b = {m->g, o->inference || o->kv, o->compute, o->dropout, o->kv, o->past, o->kv_slots};
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
