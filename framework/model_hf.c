/* model_hf.c — models from Hugging Face `config.json` files: the decoder-only architectures
 * whose layout the zoo's transformer builder has (zoo.c), read into a model description
 * (model.h) of family llama or gpt, so that one builder makes them all.
 *
 *   LlamaForCausalLM    Llama 1/2/3: grouped-query attention, rope_theta, rms_norm_eps,
 *                       attention_bias (q, k, v and o), tie_word_embeddings
 *   MistralForCausalLM  Llama's layout; sliding_window caps the context (below: exact there)
 *   Qwen2ForCausalLM    Llama's layout with biases on q, k and v
 *   Qwen3ForCausalLM    Llama's layout with head_dim and an RMSNorm of each head's q and k
 *   MixtralForCausalLM  Mistral's layout, every FFN a mixture of num_local_experts SwiGLU
 *                       experts of intermediate_size, top num_experts_per_tok, renormalized
 *   Qwen3MoeForCausalLM Qwen3's layout, every FFN num_experts experts of
 *                       moe_intermediate_size, top num_experts_per_tok (norm_topk_prob)
 *   GPT2LMHeadModel     the zoo's gpt family (GPT-2: learned positions, tied head)
 *
 * A mixture of experts' auxiliary loss is in the step when output_router_logits is true (as
 * transformers adds it), with router_aux_loss_coef. Refused, with the reason: the other
 * mixtures of experts (Qwen2-MoE's shared expert gate, DeepSeek-V3's YaRN rope: the zoo's
 * deepseek-v3 builds its layers), the MoE fields in another architecture's config, other
 * architectures, and the fields that would change what the model computes in a way the
 * builder does not build (rope_scaling, an activation other than SiLU, MLP biases, Qwen's
 * sliding window). Fields that change neither shapes nor arithmetic (token ids, torch_dtype,
 * initializer_range, use_cache, dropout probabilities: npusim builds these models without
 * dropout, as the zoo's) are not read. The size fields are required: a config that leaves
 * them to the transformers class's defaults is refused by name rather than guessed.
 *
 * Every error names the file and the key, at the key's line and column in the file (JSON
 * syntax errors: where jansson stopped), and is a bad-input status.
 */
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "model.h"
#include "readfile.h"

typedef struct hf_arch {
    const char *name, *model_type;
    const char *family;   /* the zoo's family that builds it */
    const char *bias;     /* attn_bias: fixed ("qkv": Qwen2), or NULL: attention_bias decides */
    bool qk_norm;         /* Qwen3 */
    int64_t head_dim;     /* the config class's default head_dim; 0: hidden_size / heads */
    int moe;              /* 0: dense; 1: Mixtral's fields; 2: Qwen3-MoE's */
} hf_arch;

static const hf_arch hf_archs[] = {
    {"LlamaForCausalLM", "llama", "llama", NULL, false, 0, 0},
    {"MistralForCausalLM", "mistral", "llama", "none", false, 0, 0},
    {"Qwen2ForCausalLM", "qwen2", "llama", "qkv", false, 0, 0},
    {"Qwen3ForCausalLM", "qwen3", "llama", NULL, true, 128, 0},
    {"MixtralForCausalLM", "mixtral", "llama", "none", false, 0, 1},
    {"Qwen3MoeForCausalLM", "qwen3_moe", "llama", NULL, true, 128, 2},
    {"GPT2LMHeadModel", "gpt2", "gpt", NULL, false, 0, 0},
};

/* Known architectures npusim cannot build yet, and why. */
static const struct {
    const char *name, *model_type, *why;
} hf_refused[] = {
    {"Qwen2MoeForCausalLM", "qwen2_moe", "a mixture of experts with a gated shared expert"},
    {"DeepseekV3ForCausalLM", "deepseek_v3", "a mixture of experts with YaRN rope scaling "
                                             "(the zoo's deepseek-v3 builds its layers)"},
    {"GemmaForCausalLM", "gemma", "Gemma's GeGLU MLP, (1 + w) norms and scaled embeddings"},
    {"Gemma2ForCausalLM", "gemma2", "Gemma's GeGLU MLP, (1 + w) norms and scaled embeddings"},
};

/* Fields of a mixture of experts, in any architecture's config. */
static const char *const hf_moe_keys[] = {"num_local_experts", "num_experts", "n_routed_experts",
                                          "num_experts_per_tok"};

#define MOE_WHY "npusim imports the MoE layers of Mixtral and Qwen3-MoE only"

typedef struct hf_ctx {
    const char *path, *text; /* text: len bytes, not NUL-terminated */
    size_t len;
    json_t *root;
    nn_model_desc *d;
    const hf_arch *arch;
    np_err *err;
} hf_ctx;

/* Line and column (1-based) of the first `"key" :` in the text; 0, 0 when not found. */
static void hf_pos(const hf_ctx *c, const char *key, int *line, int *col)
{
    size_t kl = strlen(key);
    int ln = 1;
    const char *bol = c->text, *end = c->text + c->len;
    *line = *col = 0;
    for (const char *p = c->text; p < end; p++) {
        if (*p == '\n') {
            ln++;
            bol = p + 1;
            continue;
        }
        if (*p != '"' || (size_t)(end - p) < kl + 2 || memcmp(p + 1, key, kl) != 0 ||
            p[1 + kl] != '"')
            continue;
        const char *q = p + 2 + kl;
        while (q < end && (*q == ' ' || *q == '\t' || *q == '\r' || *q == '\n'))
            q++;
        if (q < end && *q == ':') {
            *line = ln;
            *col = (int)(p - bol) + 1;
            return;
        }
    }
}

/* An error about key (at its position): "KEY: message". */
static np_status hf_fail(hf_ctx *c, np_status st, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static np_status hf_fail(hf_ctx *c, np_status st, const char *key, const char *fmt, ...)
{
    char msg[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    int line, col;
    hf_pos(c, key, &line, &col);
    return np_err_at(c->err, st, c->path, line, col, "%s: %s", key, msg);
}

static const char *hf_type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a real number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    default: return "null";
    }
}

/* The value of key, NULL when absent or null (HF writes null for "the default"). */
static const json_t *hf_get(const hf_ctx *c, const char *key)
{
    const json_t *v = json_object_get(c->root, key);
    return v && !json_is_null(v) ? v : NULL;
}

/* Adds entry key = word to the description, at the position of hf_key. */
static np_status hf_put(hf_ctx *c, const char *key, const char *word, const char *hf_key)
{
    nn_model_desc *d = c->d;
    if (d->n == NN_MODEL_MAX_KEYS)
        return np_err_set(c->err, NP_ERR_INTERNAL, "%s: too many keys", c->path);
    nn_model_entry *e = &d->e[d->n++];
    memset(e, 0, sizeof *e);
    snprintf(e->key, sizeof e->key, "%s", key);
    snprintf(e->word, sizeof e->word, "%s", word);
    if (hf_key)
        hf_pos(c, hf_key, &e->line, &e->col);
    e->vcol = e->col;
    return NP_OK;
}

static np_status hf_put_int(hf_ctx *c, const char *key, int64_t v, const char *hf_key)
{
    char w[32];
    snprintf(w, sizeof w, "%lld", (long long)v);
    return hf_put(c, key, w, hf_key);
}

/* An integer field for description key dkey (its bound is dkey's, model_file.c): required,
 * or def when absent or null. */
static np_status hf_int(hf_ctx *c, const char *key, const char *dkey, bool required, int64_t def,
                        int64_t *out)
{
    const json_t *v = hf_get(c, key);
    *out = def;
    if (!v) {
        if (required)
            return np_err_at(c->err, NP_ERR_MISSING, c->path, 0, 0,
                             "missing key '%s' (required for %s)", key, c->arch->name);
        return NP_OK;
    }
    if (!json_is_integer(v))
        return hf_fail(c, NP_ERR_TYPE, key, "expected an integer, got %s", hf_type_name(v));
    int64_t max = nn_model_key_max(c->arch->family, dkey);
    json_int_t x = json_integer_value(v);
    if (x < 1 || x > max)
        return hf_fail(c, NP_ERR_RANGE, key, "%lld is outside 1 .. %lld", (long long)x,
                       (long long)max);
    *out = (int64_t)x;
    return NP_OK;
}

/* A number field in (0, max]; def when absent or null. */
static np_status hf_real(hf_ctx *c, const char *key, double max, double def, double *out)
{
    const json_t *v = hf_get(c, key);
    *out = def;
    if (!v)
        return NP_OK;
    if (!json_is_number(v))
        return hf_fail(c, NP_ERR_TYPE, key, "expected a number, got %s", hf_type_name(v));
    double x = json_number_value(v);
    if (!(x > 0 && x <= max))
        return hf_fail(c, NP_ERR_RANGE, key, "%g is outside (0, %g]", x, max);
    *out = x;
    return NP_OK;
}

static np_status hf_bool(hf_ctx *c, const char *key, bool def, bool *out)
{
    const json_t *v = hf_get(c, key);
    *out = def;
    if (!v)
        return NP_OK;
    if (!json_is_boolean(v))
        return hf_fail(c, NP_ERR_TYPE, key, "expected true or false, got %s", hf_type_name(v));
    *out = json_is_true(v);
    return NP_OK;
}

static np_status hf_string(hf_ctx *c, const char *key, const char *def, const char **out)
{
    const json_t *v = hf_get(c, key);
    *out = def;
    if (!v)
        return NP_OK;
    if (!json_is_string(v))
        return hf_fail(c, NP_ERR_TYPE, key, "expected a string, got %s", hf_type_name(v));
    *out = json_string_value(v);
    return NP_OK;
}

/* Which architecture: architectures[0], else model_type. */
static np_status hf_find_arch(hf_ctx *c)
{
    const json_t *archs = hf_get(c, "architectures");
    const char *name = NULL, *mt = NULL;
    if (archs) {
        if (!json_is_array(archs) || json_array_size(archs) == 0)
            return hf_fail(c, NP_ERR_TYPE, "architectures", "expected an array of one class name, "
                           "got %s", json_is_array(archs) ? "an empty array" : hf_type_name(archs));
        size_t i;
        const json_t *a;
        json_array_foreach(archs, i, a) if (!json_is_string(a)) return hf_fail(
            c, NP_ERR_TYPE, "architectures", "entry %zu is %s, not a class name", i + 1,
            hf_type_name(a));
        name = json_string_value(json_array_get(archs, 0));
    }
    if (hf_string(c, "model_type", NULL, &mt) != NP_OK)
        return c->err->status;
    if (!name && !mt)
        return np_err_at(c->err, NP_ERR_MISSING, c->path, 0, 0,
                         "missing key 'architectures' (and 'model_type'): which model is this?");
    for (size_t i = 0; i < sizeof hf_refused / sizeof hf_refused[0]; i++)
        if (name ? strcmp(name, hf_refused[i].name) == 0 : strcmp(mt, hf_refused[i].model_type) == 0)
            return hf_fail(c, NP_ERR_RANGE, name ? "architectures" : "model_type",
                           "%s is %s: %s", name ? name : mt, hf_refused[i].why,
                           strstr(hf_refused[i].why, "experts") ? MOE_WHY
                                                                 : "npusim cannot build it yet");
    for (size_t i = 0; i < sizeof hf_archs / sizeof hf_archs[0]; i++)
        if (name ? strcmp(name, hf_archs[i].name) == 0 : strcmp(mt, hf_archs[i].model_type) == 0) {
            c->arch = &hf_archs[i];
            return NP_OK;
        }
    char list[256] = "";
    size_t used = 0;
    for (size_t i = 0; i < sizeof hf_archs / sizeof hf_archs[0] && used < sizeof list; i++)
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "",
                                 hf_archs[i].name);
    return hf_fail(c, NP_ERR_RANGE, name ? "architectures" : "model_type",
                   "'%s' is not an architecture npusim builds (%s)", name ? name : mt, list);
}

/* The MoE fields of Mixtral (moe 1: experts of intermediate_size ffn, renormalized) and
 * Qwen3-MoE (moe 2: experts of moe_intermediate_size, norm_topk_prob, every layer sparse). */
static np_status hf_moe(hf_ctx *c, int64_t ffn)
{
    bool mixtral = c->arch->moe == 1, norm = mixtral, logits;
    int64_t E, k, F = ffn, step = 1;
    double coef;
    if (hf_int(c, mixtral ? "num_local_experts" : "num_experts", "experts", true, 0, &E) ||
        hf_int(c, "num_experts_per_tok", "experts_per_token", true, 0, &k) ||
        (!mixtral && hf_int(c, "moe_intermediate_size", "moe_ffn", true, 0, &F)) ||
        (!mixtral && hf_bool(c, "norm_topk_prob", false, &norm)) ||
        (!mixtral && hf_int(c, "decoder_sparse_step", "layers", false, 1, &step)) ||
        hf_bool(c, "output_router_logits", false, &logits) ||
        hf_real(c, "router_aux_loss_coef", (double)nn_model_key_max("llama", "aux_loss"), 0.001,
                &coef))
        return c->err->status;
    const json_t *dense = hf_get(c, "mlp_only_layers");
    if (step != 1)
        return hf_fail(c, NP_ERR_RANGE, "decoder_sparse_step", "%lld: only every layer sparse "
                       "(1) is built", (long long)step);
    if (dense && (!json_is_array(dense) || json_array_size(dense) > 0))
        return hf_fail(c, NP_ERR_RANGE, "mlp_only_layers", "dense layers among the sparse "
                       "ones are not built (an empty list only)");
    if (k > E)
        return hf_fail(c, NP_ERR_INCONSISTENT, "num_experts_per_tok", "%lld of %lld experts",
                       (long long)k, (long long)E);
    char w_coef[32];
    snprintf(w_coef, sizeof w_coef, "%.17g", coef);
    if (hf_put_int(c, "experts", E, mixtral ? "num_local_experts" : "num_experts") ||
        hf_put_int(c, "experts_per_token", k, "num_experts_per_tok") ||
        hf_put_int(c, "moe_ffn", F, mixtral ? "intermediate_size" : "moe_intermediate_size") ||
        hf_put(c, "topk_norm", norm ? "yes" : "no", mixtral ? NULL : "norm_topk_prob") ||
        (logits && hf_put(c, "aux_loss", w_coef, "router_aux_loss_coef")))
        return c->err->status;
    return NP_OK;
}

/* Llama, Mistral, Qwen2, Qwen3 (and Mixtral, Qwen3-MoE) into family llama. */
static np_status hf_llama(hf_ctx *c)
{
    const hf_arch *a = c->arch;
    int64_t L, D, H, KV, F, V, ctx, hd, win = 0;
    if (hf_int(c, "num_hidden_layers", "layers", true, 0, &L) ||
        hf_int(c, "hidden_size", "d_model", true, 0, &D) ||
        hf_int(c, "num_attention_heads", "heads", true, 0, &H) ||
        hf_int(c, "num_key_value_heads", "kv_heads", false, H, &KV) ||
        hf_int(c, "intermediate_size", "ffn", true, 0, &F) ||
        hf_int(c, "vocab_size", "vocab", true, 0, &V) ||
        hf_int(c, "max_position_embeddings", "context", true, 0, &ctx) ||
        hf_int(c, "head_dim", "head_dim", false, a->head_dim, &hd))
        return c->err->status;
    bool has_hd = hd > 0 || hf_get(c, "head_dim");
    if (!has_hd && D % H)
        return hf_fail(c, NP_ERR_INCONSISTENT, "num_attention_heads",
                       "%lld heads do not divide hidden_size %lld (and there is no head_dim)",
                       (long long)H, (long long)D);
    if (H % KV)
        return hf_fail(c, NP_ERR_INCONSISTENT, "num_key_value_heads",
                       "%lld key/value heads do not divide num_attention_heads %lld",
                       (long long)KV, (long long)H);
    double theta, eps;
    bool tied, bias = false, mlp_bias, qwin;
    const char *act;
    if (hf_real(c, "rope_theta", (double)nn_model_key_max("llama", "rope_theta"), 10000.0, &theta) ||
        hf_real(c, "rms_norm_eps", 1.0, 1e-6, &eps) ||
        hf_bool(c, "tie_word_embeddings", false, &tied) ||
        (!a->bias && hf_bool(c, "attention_bias", false, &bias)) ||
        hf_bool(c, "mlp_bias", false, &mlp_bias) || hf_bool(c, "use_sliding_window", false, &qwin) ||
        hf_string(c, "hidden_act", "silu", &act))
        return c->err->status;
    if (strcmp(act, "silu") != 0)
        return hf_fail(c, NP_ERR_RANGE, "hidden_act", "'%s': the builder's gated MLP is SwiGLU "
                       "(silu) only", act);
    if (mlp_bias)
        return hf_fail(c, NP_ERR_RANGE, "mlp_bias", "biases of the MLP are not built");
    if (qwin)
        return hf_fail(c, NP_ERR_RANGE, "use_sliding_window", "sliding-window attention is not "
                       "built (npusim's attention is causal over the whole sequence)");
    const json_t *rs = hf_get(c, "rope_scaling");
    if (rs) {
        const char *t = json_string_value(json_object_get(rs, "rope_type"));
        if (!t)
            t = json_string_value(json_object_get(rs, "type"));
        return hf_fail(c, NP_ERR_RANGE, "rope_scaling", "scaled rope%s%s%s is not built "
                       "(npusim's rope is the unscaled one, base rope_theta)", t ? " ('" : "",
                       t ? t : "", t ? "')" : "");
    }
    /* Mistral: attention over the last sliding_window tokens, which is causal attention
     * exactly up to that length: the context is capped there. */
    const json_t *sw = strcmp(a->model_type, "mistral") == 0 || strcmp(a->model_type, "mixtral") == 0
                           ? hf_get(c, "sliding_window") : NULL;
    if (sw && hf_int(c, "sliding_window", "context", false, 0, &win) != NP_OK)
        return c->err->status;
    char desc[NN_NAME_MAX];
    snprintf(desc, sizeof desc, "%s (Hugging Face config)%s", a->name,
             win && win < ctx ? "; context capped at its sliding window" : "");
    const char *attn_bias = a->bias ? a->bias : bias ? "all" : "none";
    char w_theta[32], w_eps[32];
    snprintf(w_theta, sizeof w_theta, "%.17g", theta);
    snprintf(w_eps, sizeof w_eps, "%.17g", eps);
    if (hf_put(c, "family", "llama", NULL) || hf_put(c, "description", desc, NULL) ||
        hf_put_int(c, "layers", L, "num_hidden_layers") ||
        hf_put_int(c, "d_model", D, "hidden_size") ||
        hf_put_int(c, "heads", H, "num_attention_heads") ||
        hf_put_int(c, "kv_heads", KV, "num_key_value_heads") ||
        hf_put_int(c, "ffn", F, "intermediate_size") || hf_put_int(c, "vocab", V, "vocab_size") ||
        hf_put_int(c, "context", win && win < ctx ? win : ctx,
                   win && win < ctx ? "sliding_window" : "max_position_embeddings") ||
        (has_hd && hf_put_int(c, "head_dim", hd ? hd : D / H, "head_dim")) ||
        hf_put(c, "tied", tied ? "yes" : "no", "tie_word_embeddings") ||
        hf_put(c, "attn_bias", attn_bias, a->bias ? NULL : "attention_bias") ||
        hf_put(c, "qk_norm", a->qk_norm ? "yes" : "no", NULL) ||
        hf_put(c, "rope_theta", w_theta, "rope_theta") ||
        hf_put(c, "norm_eps", w_eps, "rms_norm_eps"))
        return c->err->status;
    return a->moe ? hf_moe(c, F) : NP_OK;
}

/* GPT-2 into family gpt. */
static np_status hf_gpt2(hf_ctx *c)
{
    int64_t L, D, H, V, ctx, F;
    if (hf_int(c, "n_layer", "layers", true, 0, &L) || hf_int(c, "n_embd", "d_model", true, 0, &D) ||
        hf_int(c, "n_head", "heads", true, 0, &H) || hf_int(c, "vocab_size", "vocab", true, 0, &V) ||
        hf_int(c, "n_positions", "context", true, 0, &ctx) ||
        hf_int(c, "n_inner", "ffn", false, 4 * D, &F))
        return c->err->status;
    if (D % H)
        return hf_fail(c, NP_ERR_INCONSISTENT, "n_head", "%lld heads do not divide n_embd %lld",
                       (long long)H, (long long)D);
    bool tied, cross;
    const char *act;
    double eps;
    if (hf_bool(c, "tie_word_embeddings", true, &tied) ||
        hf_bool(c, "add_cross_attention", false, &cross) ||
        hf_string(c, "activation_function", "gelu_new", &act) ||
        hf_real(c, "layer_norm_epsilon", 1.0, 1e-5, &eps))
        return c->err->status;
    if (strcmp(act, "gelu_new") != 0 && strcmp(act, "gelu_pytorch_tanh") != 0)
        return hf_fail(c, NP_ERR_RANGE, "activation_function", "'%s': the builder's GELU is the "
                       "tanh approximation (gelu_new) only", act);
    if (cross)
        return hf_fail(c, NP_ERR_RANGE, "add_cross_attention", "cross-attention is not built");
    if (eps != 1e-5)
        return hf_fail(c, NP_ERR_RANGE, "layer_norm_epsilon", "%g: the gpt builder's layer "
                       "norms use 1e-5 only", eps);
    if (hf_put(c, "family", "gpt", NULL) ||
        hf_put(c, "description", "GPT2LMHeadModel (Hugging Face config)", NULL) ||
        hf_put_int(c, "layers", L, "n_layer") || hf_put_int(c, "d_model", D, "n_embd") ||
        hf_put_int(c, "heads", H, "n_head") || hf_put_int(c, "vocab", V, "vocab_size") ||
        hf_put_int(c, "context", ctx, "n_positions") || hf_put_int(c, "ffn", F, "n_inner") ||
        hf_put(c, "tied", tied ? "yes" : "no", "tie_word_embeddings"))
        return c->err->status;
    return NP_OK;
}

np_status nn_model_parse_hf(const char *path, const char *text, size_t len, nn_model_desc *d,
                            np_err *err)
{
    memset(d, 0, sizeof *d);
    snprintf(d->path, sizeof d->path, "%s", path);
    /* the name: the folder of a config.json (models/hf/llama-3-8b), else the file's name */
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t blen = strlen(base);
    if (strcmp(base, "config.json") == 0 && base - path >= 2) {
        const char *end = base - 1, *beg = end;
        while (beg > path && beg[-1] != '/')
            beg--;
        base = beg;
        blen = (size_t)(end - beg);
    } else if (blen > 5 && strcmp(base + blen - 5, ".json") == 0) {
        blen -= 5;
    }
    snprintf(d->name, sizeof d->name, "%.*s", (int)(blen < 63 ? blen : 63), base);
    if (memchr(text, '\0', len))
        return np_err_at(err, NP_ERR_SYNTAX, path, 0, 0, "a NUL byte (a config.json is text)");
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return np_err_at(err, NP_ERR_SYNTAX, path, je.line > 0 ? je.line : 0,
                         je.column > 0 ? je.column : 0, "not JSON: %s", je.text);
    hf_ctx c = {path, text, len, root, d, NULL, err};
    np_status st = NP_OK;
    if (!json_is_object(root)) {
        st = np_err_at(err, NP_ERR_TYPE, path, 1, 1, "a config.json holds one object, not %s",
                       hf_type_name(root));
        goto out;
    }
    if ((st = hf_find_arch(&c)) != NP_OK)
        goto out;
    for (size_t i = 0; !c.arch->moe && i < sizeof hf_moe_keys / sizeof hf_moe_keys[0]; i++)
        if (hf_get(&c, hf_moe_keys[i])) {
            st = hf_fail(&c, NP_ERR_RANGE, hf_moe_keys[i], "a mixture of experts: " MOE_WHY);
            goto out;
        }
    st = strcmp(c.arch->family, "gpt") == 0 ? hf_gpt2(&c) : hf_llama(&c);
    if (st == NP_OK)
        st = nn_model_validate(d, err);
out:
    json_decref(root);
    return st;
}

np_status nn_model_load_hf(const char *path, nn_model_desc *d, np_err *err)
{
    char file[512];
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        size_t n = strlen(path);
        while (n > 1 && path[n - 1] == '/')
            n--;
        snprintf(file, sizeof file, "%.*s/config.json", (int)n, path);
    } else {
        snprintf(file, sizeof file, "%s", path);
    }
    char *text;
    size_t len;
    if (np_read_file(file, NN_HF_MAX_FILE_BYTES, "a Hugging Face config.json", &text, &len, err) !=
        NP_OK)
        return err->status;
    np_status st = nn_model_parse_hf(file, text, len, d, err);
    free(text);
    return st;
}
