/* model_file.c — model description files: the zoo's folder, parsing and validation.
 *
 * A model file holds one model's hyperparameters, one `key = value` per line:
 *
 *   # ResNet-50 (He et al. 2016) as in torchvision     <- '#' starts a comment
 *   family = resnet
 *   block  = bottleneck
 *   layers = 3 4 6 3                                    <- integer lists: spaces between
 *
 * Which keys exist, which are required and what they hold depends on the family (the table
 * below, also docs/models.md). Every mistake is an error with file:line:col: a line without
 * '=', a key given twice, an unknown key or family (with "did you mean"), a value of the wrong
 * type, count or range, a required key missing, or values that contradict each other.
 */
#include <ctype.h>
#include <math.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "datadir.h"
#include "model.h"
#include "parse.h"
#include "readfile.h"
#include "suggest.h"
#include "nn_impl.h"

#ifndef NPUSIM_MODEL_DIR
#error "NPUSIM_MODEL_DIR (the source tree's models/ folder) must be defined by the build"
#endif

typedef enum { NN_KEY_INT, NN_KEY_INTS, NN_KEY_WORD, NN_KEY_TEXT, NN_KEY_REAL } nn_key_kind;

typedef struct nn_key_spec {
    const char *family; /* NULL: every family */
    const char *key;
    nn_key_kind kind;
    bool required;
    int count;          /* NN_KEY_INTS: exact number of values, 0 for 1..NN_MODEL_MAX_VALUES */
    const char *words;  /* NN_KEY_WORD: allowed values, '|'-separated */
    int64_t max;        /* NN_KEY_INT(S): each value in 1..max; NN_KEY_REAL: in (0, max] */
} nn_key_spec;

/* Bounds of integer keys: generous (a hundred times today's largest models), so that only a
 * mistake hits them, and small enough that shapes computed from them fit 64 bits. */
#define NN_MAX_WIDTH (1 << 24)   /* features, classes, vocab, context, ffn */
#define NN_MAX_DMODEL (1 << 20)  /* d_model, widths of convolutions, image size */
#define NN_MAX_DEPTH 4096        /* layers of a stage or of a transformer, heads */

static const char *const nn_families[] = {"mlp", "resnet", "mobilenet_v2", "densenet", "gpt", "llama"};

static const nn_key_spec nn_keys[] = {
    {NULL, "family", NN_KEY_WORD, true, 0, "mlp|resnet|mobilenet_v2|densenet|gpt|llama", 0},
    {NULL, "description", NN_KEY_TEXT, false, 0, NULL, 0},
    {NULL, "batch", NN_KEY_INT, false, 0, NULL, 1 << 20},
    {"mlp", "inputs", NN_KEY_INT, true, 0, NULL, NN_MAX_WIDTH},
    {"mlp", "hidden", NN_KEY_INTS, true, 0, NULL, NN_MAX_WIDTH},
    {"mlp", "classes", NN_KEY_INT, true, 0, NULL, NN_MAX_WIDTH},
    {"mlp", "activation", NN_KEY_WORD, false, 0, "relu|gelu|tanh", 0},
    {"resnet", "block", NN_KEY_WORD, true, 0, "basic|bottleneck", 0},
    {"resnet", "layers", NN_KEY_INTS, true, 4, NULL, NN_MAX_DEPTH},
    {"resnet", "width", NN_KEY_INT, false, 0, NULL, NN_MAX_DMODEL},
    {"resnet", "classes", NN_KEY_INT, true, 0, NULL, NN_MAX_WIDTH},
    {"resnet", "image", NN_KEY_INT, true, 0, NULL, 65536},
    {"resnet", "channels", NN_KEY_INT, false, 0, NULL, NN_MAX_DMODEL},
    {"mobilenet_v2", "classes", NN_KEY_INT, true, 0, NULL, NN_MAX_WIDTH},
    {"mobilenet_v2", "image", NN_KEY_INT, true, 0, NULL, 65536},
    {"mobilenet_v2", "channels", NN_KEY_INT, false, 0, NULL, NN_MAX_DMODEL},
    {"densenet", "growth", NN_KEY_INT, true, 0, NULL, NN_MAX_DMODEL},
    {"densenet", "layers", NN_KEY_INTS, true, 0, NULL, NN_MAX_DEPTH},
    {"densenet", "init_features", NN_KEY_INT, true, 0, NULL, NN_MAX_DMODEL},
    {"densenet", "bn_size", NN_KEY_INT, false, 0, NULL, NN_MAX_DEPTH},
    {"densenet", "classes", NN_KEY_INT, true, 0, NULL, NN_MAX_WIDTH},
    {"densenet", "image", NN_KEY_INT, true, 0, NULL, 65536},
    {"densenet", "channels", NN_KEY_INT, false, 0, NULL, NN_MAX_DMODEL},
    {"gpt", "layers", NN_KEY_INT, true, 0, NULL, NN_MAX_DEPTH},
    {"gpt", "d_model", NN_KEY_INT, true, 0, NULL, NN_MAX_DMODEL},
    {"gpt", "heads", NN_KEY_INT, true, 0, NULL, NN_MAX_DEPTH * 16},
    {"gpt", "vocab", NN_KEY_INT, true, 0, NULL, NN_MAX_WIDTH},
    {"gpt", "context", NN_KEY_INT, true, 0, NULL, NN_MAX_WIDTH},
    {"gpt", "ffn", NN_KEY_INT, false, 0, NULL, NN_MAX_WIDTH},
    {"gpt", "tied", NN_KEY_WORD, false, 0, "yes|no", 0},
    {"llama", "layers", NN_KEY_INT, true, 0, NULL, NN_MAX_DEPTH},
    {"llama", "d_model", NN_KEY_INT, true, 0, NULL, NN_MAX_DMODEL},
    {"llama", "heads", NN_KEY_INT, true, 0, NULL, NN_MAX_DEPTH * 16},
    {"llama", "kv_heads", NN_KEY_INT, false, 0, NULL, NN_MAX_DEPTH * 16},
    {"llama", "vocab", NN_KEY_INT, true, 0, NULL, NN_MAX_WIDTH},
    {"llama", "context", NN_KEY_INT, true, 0, NULL, NN_MAX_WIDTH},
    {"llama", "ffn", NN_KEY_INT, true, 0, NULL, NN_MAX_WIDTH},
    {"llama", "tied", NN_KEY_WORD, false, 0, "yes|no", 0},
    /* what Hugging Face configs of Llama 3, Mistral and Qwen2/3 need (model_hf.c); the
     * defaults are Llama 2's, so the zoo's files are unchanged */
    {"llama", "head_dim", NN_KEY_INT, false, 0, NULL, NN_MAX_DMODEL},
    {"llama", "attn_bias", NN_KEY_WORD, false, 0, "none|qkv|all", 0},
    {"llama", "qk_norm", NN_KEY_WORD, false, 0, "yes|no", 0},
    {"llama", "rope_theta", NN_KEY_REAL, false, 0, NULL, (int64_t)1 << 40},
    {"llama", "norm_eps", NN_KEY_REAL, false, 0, NULL, 1},
    /* mixtures of experts (Mixtral, Qwen3-MoE, DeepSeek-V2/V3; zoo_llm.c): without `experts`
     * every FFN is dense */
    {"llama", "experts", NN_KEY_INT, false, 0, NULL, 1 << 16},
    {"llama", "experts_per_token", NN_KEY_INT, false, 0, NULL, 1 << 16},
    {"llama", "moe_ffn", NN_KEY_INT, false, 0, NULL, NN_MAX_WIDTH},
    {"llama", "shared_experts", NN_KEY_INT, false, 0, NULL, 1 << 16},
    {"llama", "dense_layers", NN_KEY_INT, false, 0, NULL, NN_MAX_DEPTH},
    {"llama", "router", NN_KEY_WORD, false, 0, "softmax|sigmoid", 0},
    {"llama", "topk_norm", NN_KEY_WORD, false, 0, "yes|no", 0},
    {"llama", "route_scale", NN_KEY_REAL, false, 0, NULL, 1 << 10},
    {"llama", "expert_groups", NN_KEY_INT, false, 0, NULL, 1 << 16},
    {"llama", "expert_groups_kept", NN_KEY_INT, false, 0, NULL, 1 << 16},
    {"llama", "router_bias", NN_KEY_WORD, false, 0, "yes|no", 0},
    {"llama", "capacity", NN_KEY_REAL, false, 0, NULL, 1 << 16},
    {"llama", "aux_loss", NN_KEY_REAL, false, 0, NULL, 1 << 10},
    /* multi-head latent attention (DeepSeek-V2/V3): kv_lora_rank turns it on */
    {"llama", "q_lora_rank", NN_KEY_INT, false, 0, NULL, NN_MAX_DMODEL},
    {"llama", "kv_lora_rank", NN_KEY_INT, false, 0, NULL, NN_MAX_DMODEL},
    {"llama", "qk_nope_dim", NN_KEY_INT, false, 0, NULL, NN_MAX_DMODEL},
    {"llama", "qk_rope_dim", NN_KEY_INT, false, 0, NULL, NN_MAX_DMODEL},
    {"llama", "v_head_dim", NN_KEY_INT, false, 0, NULL, NN_MAX_DMODEL},
    /* DeepSeek-V3's multi-token prediction: its depth (num_nextn_predict_layers) and weight */
    {"llama", "mtp", NN_KEY_INT, false, 0, NULL, 4},
    {"llama", "mtp_weight", NN_KEY_REAL, false, 0, NULL, 1 << 10},
};
#define NN_N_KEYS (sizeof nn_keys / sizeof nn_keys[0])

const char *nn_model_dir(void)
{
    return np_data_dir("NPUSIM_MODEL_DIR", "models", NPUSIM_MODEL_DIR);
}

static const nn_key_spec *nn_key_find(const char *family, const char *key)
{
    for (size_t i = 0; i < NN_N_KEYS; i++)
        if ((!nn_keys[i].family || strcmp(nn_keys[i].family, family) == 0) &&
            strcmp(nn_keys[i].key, key) == 0)
            return &nn_keys[i];
    return NULL;
}

static const nn_model_entry *nn_entry(const nn_model_desc *d, const char *key)
{
    for (int i = 0; i < d->n; i++)
        if (strcmp(d->e[i].key, key) == 0)
            return &d->e[i];
    return NULL;
}

int64_t nn_model_int(const nn_model_desc *d, const char *key, int64_t def)
{
    const nn_model_entry *e = nn_entry(d, key);
    return e && e->n > 0 ? e->v[0] : def;
}

int nn_model_ints(const nn_model_desc *d, const char *key, int64_t *out, int max)
{
    const nn_model_entry *e = nn_entry(d, key);
    int n = e ? (e->n < max ? e->n : max) : 0;
    for (int i = 0; i < n; i++)
        out[i] = e->v[i];
    return n;
}

double nn_model_real(const nn_model_desc *d, const char *key, double def)
{
    const nn_model_entry *e = nn_entry(d, key);
    return e && e->x > 0 ? e->x : def;
}

int64_t nn_model_key_max(const char *family, const char *key)
{
    const nn_key_spec *k = nn_key_find(family, key);
    return k ? k->max : 0;
}

const char *nn_model_word(const nn_model_desc *d, const char *key, const char *def)
{
    const nn_model_entry *e = nn_entry(d, key);
    return e ? e->word : def;
}

static bool nn_word_allowed(const char *words, const char *w)
{
    size_t n = strlen(w);
    for (const char *p = words; *p;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && strncmp(p, w, n) == 0)
            return true;
        p += len + (bar ? 1 : 0);
    }
    return false;
}

/* Validates entry e's value against its spec, filling e->v. */
static np_status nn_entry_check(const nn_model_desc *d, nn_model_entry *e, const nn_key_spec *k,
                                np_err *err)
{
    int vcol = e->vcol;
    if (k->kind == NN_KEY_TEXT)
        return NP_OK;
    if (k->kind == NN_KEY_REAL) {
        char *end;
        errno = 0;
        double x = strtod(e->word, &end);
        if (end == e->word || *end || !isfinite(x) || errno == ERANGE)
            return np_err_at(err, NP_ERR_TYPE, d->path, e->line, vcol, "%s: '%s' is not a number",
                             e->key, e->word);
        if (!(x > 0 && x <= (double)k->max))
            return np_err_at(err, NP_ERR_RANGE, d->path, e->line, vcol,
                             "%s: %g is outside (0, %lld]", e->key, x, (long long)k->max);
        e->x = x;
        return NP_OK;
    }
    if (k->kind == NN_KEY_WORD) {
        if (!nn_word_allowed(k->words, e->word))
            return np_err_at(err, NP_ERR_RANGE, d->path, e->line, vcol,
                             "%s: '%s' is not one of %s", e->key, e->word, k->words);
        return NP_OK;
    }
    const char *p = e->word;
    e->n = 0;
    while (*p) {
        while (*p == ' ' || *p == '\t')
            p++;
        if (!*p)
            break;
        const char *tok = p;
        while (*p && *p != ' ' && *p != '\t')
            p++;
        int col = vcol + (int)(tok - e->word);
        char buf[64];
        snprintf(buf, sizeof buf, "%.*s", (int)(p - tok), tok);
        char *end;
        errno = 0;
        long long v = strtoll(buf, &end, 10);
        if (*end || !isdigit((unsigned char)buf[buf[0] == '-' ? 1 : 0]))
            return np_err_at(err, NP_ERR_TYPE, d->path, e->line, col, "%s: '%s' is not an integer",
                             e->key, buf);
        if (errno || (size_t)(p - tok) >= sizeof buf)
            return np_err_at(err, NP_ERR_RANGE, d->path, e->line, col,
                             "%s: '%s' is outside 1 .. %lld", e->key, buf, (long long)k->max);
        if (v < 1 || v > k->max)
            return np_err_at(err, NP_ERR_RANGE, d->path, e->line, col,
                             "%s: %lld is outside 1 .. %lld", e->key, v, (long long)k->max);
        if (e->n == NN_MODEL_MAX_VALUES)
            return np_err_at(err, NP_ERR_RANGE, d->path, e->line, col,
                             "%s: at most %d values", e->key, NN_MODEL_MAX_VALUES);
        e->v[e->n++] = v;
    }
    int want = k->kind == NN_KEY_INT ? 1 : k->count;
    if (want && e->n != want)
        return np_err_at(err, NP_ERR_RANGE, d->path, e->line, vcol, "%s: takes %d value%s, got %d",
                         e->key, want, want == 1 ? "" : "s", e->n);
    return NP_OK;
}

/* The error of key `key` of d (present) at its position. */
static np_status nn_key_fail(const nn_model_desc *d, const char *key, np_err *err,
                             const char *why, int64_t a, int64_t b)
{
    const nn_model_entry *e = nn_entry(d, key);
    char msg[200];
    snprintf(msg, sizeof msg, why, (long long)a, (long long)b);
    return np_err_at(err, NP_ERR_INCONSISTENT, d->path, e ? e->line : 0, e ? e->col : 0, "%s: %s",
                     key, msg);
}

/* The MoE and MLA keys of family llama together: what needs what, and the router's counts. */
static np_status nn_model_moe_consistency(const nn_model_desc *d, np_err *err)
{
    static const char *const moe_keys[] = {"experts_per_token", "moe_ffn", "shared_experts",
        "dense_layers", "router", "topk_norm", "route_scale", "expert_groups",
        "expert_groups_kept", "router_bias", "capacity", "aux_loss"};
    static const char *const mla_keys[] = {"q_lora_rank", "qk_nope_dim", "qk_rope_dim",
                                           "v_head_dim"};
    int64_t E = nn_model_int(d, "experts", 0), k = nn_model_int(d, "experts_per_token", 0);
    for (size_t i = 0; !E && i < sizeof moe_keys / sizeof moe_keys[0]; i++)
        if (nn_entry(d, moe_keys[i]))
            return nn_key_fail(d, moe_keys[i], err, "needs experts (a mixture of experts)", 0, 0);
    if (E && (!k || !nn_entry(d, "moe_ffn")))
        return nn_key_fail(d, "experts", err, "a mixture of experts needs experts_per_token "
                           "and moe_ffn", 0, 0);
    if (k > E)
        return nn_key_fail(d, "experts_per_token", err, "%lld is more than the %lld experts", k, E);
    int64_t G = nn_model_int(d, "expert_groups", 0), keep = nn_model_int(d, "expert_groups_kept", G);
    if (G && E % G)
        return nn_key_fail(d, "expert_groups", err, "%lld experts do not split into %lld groups", E, G);
    if (keep > G || (G && k > keep * (E / G)))
        return nn_key_fail(d, "expert_groups_kept", err, "%lld groups kept of %lld cannot hold "
                           "the chosen experts", keep, G);
    if (nn_model_int(d, "dense_layers", 0) > nn_model_int(d, "layers", 1))
        return nn_key_fail(d, "dense_layers", err, "%lld dense layers of %lld",
                           nn_model_int(d, "dense_layers", 0), nn_model_int(d, "layers", 1));
    if (nn_entry(d, "mtp_weight") && !nn_entry(d, "mtp"))
        return nn_key_fail(d, "mtp_weight", err, "needs mtp (multi-token prediction)", 0, 0);
    if (nn_entry(d, "mtp") && nn_entry(d, "tied") && strcmp(nn_model_word(d, "tied", "no"), "yes") == 0)
        return nn_key_fail(d, "mtp", err, "multi-token prediction shares an untied output head", 0, 0);
    bool mla = nn_entry(d, "kv_lora_rank") != NULL;
    for (size_t i = 0; !mla && i < sizeof mla_keys / sizeof mla_keys[0]; i++)
        if (nn_entry(d, mla_keys[i]))
            return nn_key_fail(d, mla_keys[i], err, "needs kv_lora_rank (multi-head latent "
                               "attention)", 0, 0);
    if (mla && (!nn_entry(d, "qk_nope_dim") || !nn_entry(d, "qk_rope_dim")))
        return nn_key_fail(d, "kv_lora_rank", err, "multi-head latent attention needs "
                           "qk_nope_dim and qk_rope_dim", 0, 0);
    if (mla && nn_model_int(d, "qk_rope_dim", 2) % 2)
        return nn_key_fail(d, "qk_rope_dim", err, "%lld is odd (rope rotates pairs)",
                           nn_model_int(d, "qk_rope_dim", 2), 0);
    return NP_OK;
}

/* Checks between keys of one family (after each key is valid on its own). */
static np_status nn_model_consistency(const nn_model_desc *d, np_err *err)
{
    if (strcmp(d->family, "gpt") == 0 || strcmp(d->family, "llama") == 0) {
        const nn_model_entry *h = nn_entry(d, "heads"), *kv = nn_entry(d, "kv_heads");
        int64_t dm = nn_model_int(d, "d_model", 1), heads = h->v[0];
        if (dm % heads && !nn_entry(d, "head_dim"))
            return np_err_at(err, NP_ERR_INCONSISTENT, d->path, h->line, h->col,
                             "heads: d_model %lld is not a multiple of %lld heads", (long long)dm,
                             (long long)heads);
        if (kv && heads % kv->v[0])
            return np_err_at(err, NP_ERR_INCONSISTENT, d->path, kv->line, kv->col,
                             "kv_heads: %lld heads are not a multiple of %lld kv_heads",
                             (long long)heads, (long long)kv->v[0]);
        return nn_model_moe_consistency(d, err);
    }
    return NP_OK;
}

np_status nn_model_parse(const char *path, const char *text, nn_model_desc *d, np_err *err)
{
    memset(d, 0, sizeof *d);
    snprintf(d->path, sizeof d->path, "%s", path);
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t blen = strlen(base);
    if (blen > 6 && strcmp(base + blen - 6, ".model") == 0)
        blen -= 6;
    snprintf(d->name, sizeof d->name, "%.*s", (int)blen, base);
    int line = 0;
    for (const char *p = text; *p;) {
        line++;
        size_t len = strcspn(p, "\n");
        char buf[512];
        if (len >= sizeof buf)
            return np_err_at(err, NP_ERR_SYNTAX, path, line, 1, "line longer than %zu characters",
                             sizeof buf - 1);
        memcpy(buf, p, len);
        buf[len] = '\0';
        p += len + (p[len] == '\n');
        char *hash = strchr(buf, '#');
        if (hash)
            *hash = '\0';
        size_t end = strlen(buf);
        while (end && isspace((unsigned char)buf[end - 1]))
            buf[--end] = '\0';
        char *s = buf;
        while (*s == ' ' || *s == '\t')
            s++;
        if (!*s)
            continue;
        int kcol = (int)(s - buf) + 1;
        char *eq = strchr(s, '=');
        if (!eq)
            return np_err_at(err, NP_ERR_SYNTAX, path, line, kcol, "expected 'key = value'");
        char *kend = eq;
        while (kend > s && (kend[-1] == ' ' || kend[-1] == '\t'))
            kend--;
        if (kend == s)
            return np_err_at(err, NP_ERR_SYNTAX, path, line, kcol, "missing key before '='");
        for (char *c = s; c < kend; c++)
            if (!islower((unsigned char)*c) && !isdigit((unsigned char)*c) && *c != '_')
                return np_err_at(err, NP_ERR_SYNTAX, path, line, kcol + (int)(c - s),
                                 "a key holds only a-z, 0-9 and '_'");
        char *v = eq + 1;
        while (*v == ' ' || *v == '\t')
            v++;
        if (!*v)
            return np_err_at(err, NP_ERR_SYNTAX, path, line, (int)(eq - buf) + 2,
                             "'%.*s' has no value", (int)(kend - s), s);
        if (d->n == NN_MODEL_MAX_KEYS)
            return np_err_at(err, NP_ERR_RANGE, path, line, kcol, "more than %d keys",
                             NN_MODEL_MAX_KEYS);
        nn_model_entry *e = &d->e[d->n];
        if ((size_t)(kend - s) >= sizeof e->key)
            return np_err_at(err, NP_ERR_RANGE, path, line, kcol, "a key has at most %zu "
                             "characters", sizeof e->key - 1);
        if (strlen(v) >= sizeof e->word)
            return np_err_at(err, NP_ERR_RANGE, path, line, (int)(v - buf) + 1,
                             "'%.*s': a value has at most %zu characters", (int)(kend - s), s,
                             sizeof e->word - 1);
        snprintf(e->key, sizeof e->key, "%.*s", (int)(kend - s), s);
        snprintf(e->word, sizeof e->word, "%s", v);
        e->line = line;
        e->col = kcol;
        for (int i = 0; i < d->n; i++)
            if (strcmp(d->e[i].key, e->key) == 0)
                return np_err_at(err, NP_ERR_DUPLICATE, path, line, kcol,
                                 "'%s' given twice (first on line %d)", e->key, d->e[i].line);
        e->vcol = (int)(v - buf) + 1;
        d->n++;
    }
    return nn_model_validate(d, err);
}

np_status nn_model_validate(nn_model_desc *d, np_err *err)
{
    const char *path = d->path;
    const nn_model_entry *fam = nn_entry(d, "family");
    if (!fam)
        return np_err_at(err, NP_ERR_MISSING, path, 0, 0, "missing key 'family' (one of %s)",
                         nn_keys[0].words);
    if (!nn_word_allowed(nn_keys[0].words, fam->word)) {
        const char *guess = np_suggest(fam->word, nn_families,
                                       sizeof nn_families / sizeof nn_families[0], 3);
        if (guess)
            return np_err_at(err, NP_ERR_UNKNOWN_KEY, path, fam->line, fam->vcol,
                             "unknown family '%s'; did you mean '%s'?", fam->word, guess);
        return np_err_at(err, NP_ERR_UNKNOWN_KEY, path, fam->line, fam->vcol,
                         "unknown family '%s' (one of %s)", fam->word, nn_keys[0].words);
    }
    snprintf(d->family, sizeof d->family, "%.31s", fam->word);
    for (int i = 0; i < d->n; i++) {
        nn_model_entry *e = &d->e[i];
        const nn_key_spec *k = nn_key_find(d->family, e->key);
        if (!k) {
            const char *cands[NN_N_KEYS];
            size_t nc = 0;
            for (size_t j = 0; j < NN_N_KEYS; j++)
                if (!nn_keys[j].family || strcmp(nn_keys[j].family, d->family) == 0)
                    cands[nc++] = nn_keys[j].key;
            const char *guess = np_suggest(e->key, cands, nc, 2);
            if (guess)
                return np_err_at(err, NP_ERR_UNKNOWN_KEY, path, e->line, e->col,
                                 "unknown key '%s' for family %s; did you mean '%s'?", e->key,
                                 d->family, guess);
            return np_err_at(err, NP_ERR_UNKNOWN_KEY, path, e->line, e->col,
                             "unknown key '%s' for family %s", e->key, d->family);
        }
        if (nn_entry_check(d, e, k, err) != NP_OK)
            return err->status;
    }
    for (size_t j = 0; j < NN_N_KEYS; j++)
        if (nn_keys[j].required && nn_keys[j].family &&
            strcmp(nn_keys[j].family, d->family) == 0 && !nn_entry(d, nn_keys[j].key))
            return np_err_at(err, NP_ERR_MISSING, path, 0, 0,
                             "missing key '%s' (required by family %s)", nn_keys[j].key, d->family);
    return nn_model_consistency(d, err);
}

static int nn_cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void nn_model_names_free(char **names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

np_status nn_model_names(char ***names_out, size_t *n_out, np_err *err)
{
    const char *dir = nn_model_dir();
    DIR *dp = opendir(dir);
    *names_out = NULL;
    *n_out = 0;
    if (!dp)
        return np_err_at(err, NP_ERR_IO, dir, 0, 0, "cannot read the model folder: %s",
                         strerror(errno));
    char **names = NULL;
    size_t n = 0, cap = 0;
    np_status st = NP_OK;
    struct dirent *de;
    while ((de = readdir(dp)) != NULL) {
        size_t len = strlen(de->d_name);
        if (de->d_name[0] == '.' || len <= 6 || strcmp(de->d_name + len - 6, ".model") != 0)
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 32;
            char **bigger = nn_realloc(names, cap * sizeof *bigger);
            if (!bigger) {
                st = np_err_set(err, NP_ERR_NOMEM, "out of memory listing models");
                break;
            }
            names = bigger;
        }
        if (!(names[n] = strndup(de->d_name, len - 6))) {
            st = np_err_set(err, NP_ERR_NOMEM, "out of memory listing models");
            break;
        }
        n++;
    }
    closedir(dp);
    if (st != NP_OK) {
        nn_model_names_free(names, n);
        return st;
    }
    if (n)
        qsort(names, n, sizeof *names, nn_cmp_names);
    *names_out = names;
    *n_out = n;
    return NP_OK;
}

np_status nn_model_load(const char *name, nn_model_desc *d, np_err *err)
{
    char path[512];
    size_t nl = strlen(name);
    struct stat sb;
    snprintf(path, sizeof path, "%s/config.json", name);
    if ((nl > 5 && strcmp(name + nl - 5, ".json") == 0) ||
        (strchr(name, '/') && stat(name, &sb) == 0 && S_ISDIR(sb.st_mode) &&
         stat(path, &sb) == 0)) /* a Hugging Face model's folder */
        return nn_model_load_hf(name, d, err);
    if (nl > 5 && strcmp(name + nl - 5, ".onnx") == 0)
        return nn_model_load_onnx(name, d, err);
    bool is_path = strchr(name, '/') || strstr(name, ".model");
    if (is_path)
        snprintf(path, sizeof path, "%s", name);
    else
        snprintf(path, sizeof path, "%s/%s.model", nn_model_dir(), name);
    FILE *f = is_path ? NULL : fopen(path, "r");
    if (f)
        fclose(f);
    if (!f && !is_path) { /* did you mean: the zoo's names that begin so, else the nearest */
        char **names;
        size_t n;
        if (nn_model_names(&names, &n, err) != NP_OK)
            return err->status;
        char list[256] = "";
        size_t used = 0, n_pre = 0, wl = strlen(name);
        for (size_t i = 0; i < n && used < sizeof list; i++)
            if (wl >= 2 && strncmp(names[i], name, wl) == 0 && n_pre++ < 6)
                used += (size_t)snprintf(list + used, sizeof list - used, "%s'%s'",
                                         used ? ", " : "", names[i]);
        const char *guess = np_suggest_name(name, (const char *const *)names, n);
        if (n_pre > 1)
            np_err_set(err, NP_ERR_UNKNOWN_KEY, "unknown model '%s'; did you mean one of %s%s?",
                       name, list, n_pre > 6 ? ", ..." : "");
        else if (guess)
            np_err_set(err, NP_ERR_UNKNOWN_KEY, "unknown model '%s'; did you mean '%s'?", name,
                       guess);
        else
            np_err_set(err, NP_ERR_UNKNOWN_KEY,
                       "unknown model '%s' (run 'npusim models' for the list)", name);
        nn_model_names_free(names, n);
        return err->status;
    }
    char *text;
    size_t len;
    if (np_read_file(path, NN_MODEL_MAX_FILE_BYTES, "a model file", &text, &len, err) != NP_OK)
        return err->status;
    if (memchr(text, '\0', len)) {
        size_t at = (size_t)((char *)memchr(text, '\0', len) - text);
        int line = 1;
        for (size_t i = 0; i < at; i++)
            line += text[i] == '\n';
        free(text);
        return np_err_at(err, NP_ERR_SYNTAX, path, line, 0, "a NUL byte (a model file is text)");
    }
    np_status st = nn_model_parse(path, text, d, err);
    free(text);
    return st;
}

/* Upper bounds, in doubles, of what a model of d at batch B and sequence S computes: its
 * parameters, its largest tensor (elements) and its forward FLOPs. Close for transformers and
 * MLPs; for convolutional networks each stage's weights are counted at its image size (the
 * first block of a stage at the size before its stride), a few times the truth. */
static void nn_model_bounds(const nn_model_desc *d, double B, double S, double *params,
                            double *tensor, double *flops)
{
    const char *f = d->family;
    int64_t v[NN_MODEL_MAX_VALUES];
    if (strcmp(f, "gpt") == 0 || strcmp(f, "llama") == 0) {
        double L = (double)(nn_model_int(d, "layers", 1) + nn_model_int(d, "mtp", 0));
        double D = (double)nn_model_int(d, "d_model", 1);
        double V = (double)nn_model_int(d, "vocab", 1), H = (double)nn_model_int(d, "heads", 1);
        double F = (double)nn_model_int(d, "ffn", 4 * nn_model_int(d, "d_model", 1));
        double C = (double)nn_model_int(d, "context", 1);
        double HD = H * (double)nn_model_int(d, "head_dim", nn_model_int(d, "d_model", 1) /
                                                            nn_model_int(d, "heads", 1));
        HD = HD > D ? HD : D; /* the width of q, k, v and o's input (head_dim x heads) */
        /* MLA's widths: every head's q/k (nope + rope) and v (its latents, narrower than
         * d_model, are within 4 D HD) */
        double mla = (double)(nn_model_int(d, "qk_nope_dim", 0) + nn_model_int(d, "qk_rope_dim", 0) +
                              nn_model_int(d, "v_head_dim", 0));
        HD = HD > H * mla ? HD : H * mla;
        /* MoE: every expert's weights (E + shared) and each token's k + shared experts */
        double E = (double)nn_model_int(d, "experts", 0), Fm = (double)nn_model_int(d, "moe_ffn", 0);
        double cf = nn_model_real(d, "capacity", 1.0), k = (double)nn_model_int(d, "experts_per_token", 0);
        k *= cf > 1 ? cf : 1; /* the rows of a capacity factor above 1 */
        double sh = (double)nn_model_int(d, "shared_experts", 0), experts = 3 * D * Fm * (E + sh);
        *params = L * (4 * D * HD + 3 * D * F + 4 * HD + 4 * D + experts + D * E) + V * D + C * D;
        double wide = V > F ? (V > D ? V : D) : (F > D ? F : D);
        wide = wide > k * (Fm > D ? Fm : D) ? wide : k * (Fm > D ? Fm : D);
        double act = B * S * wide, scores = B * H * S * S;
        *tensor = act > scores ? act : scores;
        *tensor = *tensor > V * D ? *tensor : V * D;
        *tensor = *tensor > E * D * Fm ? *tensor : E * D * Fm;
        *flops = 2 * B * S * (*params - L * experts + L * 3 * D * Fm * (k + sh)) +
                 L * 4 * B * S * S * (D > H * mla ? D : H * mla);
        return;
    }
    if (strcmp(f, "mlp") == 0) {
        double in = (double)nn_model_int(d, "inputs", 1), wide = in, p = 0;
        int n = nn_model_ints(d, "hidden", v, NN_MODEL_MAX_VALUES);
        for (int i = 0; i <= n; i++) {
            double out = i < n ? (double)v[i] : (double)nn_model_int(d, "classes", 1);
            p += in * out + out;
            wide = out > wide ? out : wide;
            in = out;
        }
        *params = p;
        *tensor = B * wide > p ? B * wide : p;
        *flops = 2 * B * p;
        return;
    }
    double img = (double)nn_model_int(d, "image", 224), ch = (double)nn_model_int(d, "channels", 3);
    double classes = (double)nn_model_int(d, "classes", 1), wide, p, fw;
    /* the stem: a 7 x 7 (or 3 x 3) stride-2 convolution to (img / 2)^2, then stages that each
     * halve the image from (img / 4)^2: a stage's weights are applied at its size, + 1 per
     * side for rounding */
    double stem = (img / 2 + 1) * (img / 2 + 1);
    if (strcmp(f, "resnet") == 0) {
        int n = nn_model_ints(d, "layers", v, 4);
        bool bottleneck = strcmp(nn_model_word(d, "block", "basic"), "bottleneck") == 0;
        double w = (double)nn_model_int(d, "width", 64), e = bottleneck ? 4 : 1;
        p = 49 * ch * w + classes * 8 * w * e;
        fw = stem * 49 * ch * w + classes * 8 * w * e;
        wide = 8 * w * e;
        for (int i = 0; i < n; i++) {
            double ws = w * (double)(1 << i), hw = img / (double)(4 << i) + 1;
            double block = 9 * ws * ws + 2 * ws * e * ws * e + ws * e * ws * e; /* >= either */
            p += (double)v[i] * block;
            fw += (double)v[i] * block * (i ? 4 * hw * hw : hw * hw); /* the first block: 2x */
        }
    } else if (strcmp(f, "densenet") == 0) {
        int n = nn_model_ints(d, "layers", v, NN_MODEL_MAX_VALUES);
        double layers = 0, g = (double)nn_model_int(d, "growth", 1);
        double bn = (double)nn_model_int(d, "bn_size", 4);
        for (int i = 0; i < n; i++)
            layers += (double)v[i];
        wide = (double)nn_model_int(d, "init_features", 64) + layers * g;
        p = 49 * ch * wide + classes * wide;
        fw = stem * 49 * ch * wide + classes * wide;
        for (int i = 0; i < n; i++) { /* block i at (img / 4 / 2^i)^2 */
            double hw = img / (4.0 * (double)(1u << (i < 30 ? i : 30))) + 1;
            double block = (double)v[i] * (wide * bn * g + 9 * bn * g * g) + wide * wide;
            p += block;
            fw += block * hw * hw;
        }
    } else { /* mobilenet_v2: a fixed stack of at most 1280 channels, 3.5 M parameters */
        wide = 1280 > ch ? 1280 : ch;
        p = 4e6 + 1280 * classes + 27 * ch;
        fw = stem * p;
    }
    *params = p;
    *tensor = B * stem * 4 * wide; /* no activation is larger than the stem's at full width */
    *flops = 2 * B * fw;
}

np_status nn_model_check_scale(const nn_model_desc *d, int64_t batch, int64_t seq, np_err *err)
{
    if (strcmp(d->family, "onnx") == 0) /* model_onnx.c bounds each tensor as it reads it */
        return NP_OK;
    double params, tensor, flops;
    nn_model_bounds(d, (double)batch, (double)seq, &params, &tensor, &flops);
    /* a training step is about 3 forward passes and an optimizer update (~ 20 x params);
     * counts of elements and FLOPs are int64 (docs/models.md) */
    const double lim = 0x1p62, elim = 0x1p50;
    double train = 3 * flops + 20 * params;
    const char *what = params > elim ? "parameters" : tensor > elim ? "elements in one tensor"
                                                    : train > lim ? "FLOPs per training step"
                                                                  : NULL;
    if (!what)
        return NP_OK;
    double x = params > elim ? params : tensor > elim ? tensor : train;
    return np_err_at(err, NP_ERR_RANGE, d->path, 0, 0,
                     "model %s at batch %lld, sequence %lld: about %.3g %s, more than npusim "
                     "counts (at most %.3g; 64-bit counts)", d->name, (long long)batch,
                     (long long)seq, x, what, params > elim || tensor > elim ? elim : lim);
}
