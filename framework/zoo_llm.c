/* zoo_llm.c — the zoo's transformers (zoo_impl.h): GPT-2/3 (pre-LN, learned positions, GELU,
 * tied head by default) and Llama (RMSNorm, SwiGLU, rotary positions, grouped-query attention,
 * untied head) with the variants Hugging Face configs describe (model_hf.c): Llama 3, Mistral
 * and Qwen2/3 (head_dim, attention biases, q/k norms, rope base, norms' eps), and the
 * mixtures of experts: Mixtral and Qwen3-MoE (every FFN a routed MoE layer) and DeepSeek-V2/V3
 * (multi-head latent attention, shared and fine-grained experts, the first layers dense,
 * group-limited routing, multi-token prediction as an option: key mtp). Names follow the
 * Hugging Face checkpoints (layers.N.self_attn.q_proj, layers.N.mlp.experts, ...), so the zoo's parameter
 * counts can be checked against the published ones (tests/test_models.c).
 *
 * Not modelled: GPT-3's alternating sparse attention; YaRN's attention-scale correction of
 * DeepSeek's long-context rope; DeepSeek's interleaved rope layout (a fixed permutation of the
 * rope dims of q and k's weights: the same function).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nn_impl.h"
#include "zoo_impl.h"

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
 * (gathered through the model's kv_slots, a paged cache's block table) followed by the new
 * ones, [B, KV, past + S, Dh]. */
static np_status zb_kv_cache(nn_zb *b, const char *pre, int64_t l, int64_t B, int64_t KV,
                             int64_t Dh, nn_tensor **k, nn_tensor **v)
{
    nn_graph *g = b->g;
    zb_name(*k, pre, l, "k_new");
    zb_name(*v, pre, l, "v_new");
    if (b->past == 0)
        return NP_OK;
    int64_t P = b->past;
    if (!b->m->kv_slots)
        b->m->kv_slots = nn_input(g, "kv_slots", NN_I32, 2, DIMS(B, P));
    nn_tensor **kv[2] = {k, v};
    for (int i = 0; i < 2; i++) {
        nn_tensor *c = zb_name(nn_const(g, "cache", b->dt, 2, DIMS(b->kv_slots, KV * Dh)), pre,
                               l, i ? "v_cache" : "k_cache");
        nn_tensor *past = zb_heads(g, nn_embedding(g, c, b->m->kv_slots), B, P, KV, Dh);
        *kv[i] = nn_concat(g, 2, (nn_tensor *[]){past, *kv[i]}, 2);
    }
    return nn_graph_status(g, &(np_err){0});
}

/* SwiGLU MLP over x [..., D]: down(silu(gate x) * up x), scopes <prefix>.gate_proj, ... */
static nn_tensor *zb_swiglu(nn_zb *b, nn_tensor *x, int64_t D, int64_t F, const char *prefix)
{
    char s[128];
    snprintf(s, sizeof s, "%s.gate_proj", prefix);
    nn_tensor *gate = zb_linear(b, x, D, F, false, s);
    snprintf(s, sizeof s, "%s.up_proj", prefix);
    nn_tensor *up = zb_linear(b, x, D, F, false, s);
    nn_graph_set_scope(b->g, "%s.act", prefix);
    nn_tensor *f = nn_mul(b->g, nn_silu(b->g, gate), up);
    snprintf(s, sizeof s, "%s.down_proj", prefix);
    return zb_linear(b, f, F, D, false, s);
}

/* Multi-head attention (GPT-2), grouped-query attention (Llama) over hn [B, S, D] ->
 * [B, S, D], the output projection included. */
static nn_tensor *zb_attention(nn_zb *b, const nn_model_desc *d, nn_tensor *hn, int64_t B,
                               int64_t S, int64_t l)
{
    nn_graph *g = b->g;
    bool llama = strcmp(d->family, "llama") == 0;
    int64_t D = nn_model_int(d, "d_model", 1), H = nn_model_int(d, "heads", 1);
    int64_t KV = nn_model_int(d, "kv_heads", H), Dh = nn_model_int(d, "head_dim", D / H);
    /* Llama's variants (model_hf.c): biases of q, k, v (Qwen2) or of every projection
     * (attention_bias), RMSNorm of each head's q and k (Qwen3), rope base, norms' eps */
    const char *bias = nn_model_word(d, "attn_bias", "none");
    bool qkv_bias = strcmp(bias, "none") != 0, o_bias = strcmp(bias, "all") == 0;
    bool qk_norm = strcmp(nn_model_word(d, "qk_norm", "no"), "yes") == 0;
    double theta = nn_model_real(d, "rope_theta", 10000.0), eps = nn_model_real(d, "norm_eps", 1e-5);
    const char *pre = llama ? "layers" : "h";
    char s[128];
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
    if (b->kv && zb_kv_cache(b, pre, l, B, KV, Dh, &k, &v) != NP_OK)
        return NULL;
    /* grouped-query attention: each kv head serves H/KV query heads (the inference form of
     * attention reads them itself once a cache is read) */
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
    return a;
}

/* Multi-head latent attention (DeepSeek-V2 section 2.1, DeepSeek-V3): queries through a
 * low-rank compression (q_lora_rank; none: one projection), keys and values from one latent
 * c_KV of kv_lora_rank per token (RMS-normed, then up-projected to every head's qk_nope_dim
 * key part and v_head_dim value), and the decoupled rotary key: qk_rope_dim dims of one key
 * shared by every head, projected with c_KV, concatenated to each head's key as q's rope
 * part is to its query. Scale 1 / sqrt(qk_nope_dim + qk_rope_dim). */
static nn_tensor *zb_mla(nn_zb *b, const nn_model_desc *d, nn_tensor *hn, int64_t B, int64_t S,
                         int64_t l)
{
    nn_graph *g = b->g;
    int64_t D = nn_model_int(d, "d_model", 1), H = nn_model_int(d, "heads", 1);
    int64_t qr = nn_model_int(d, "q_lora_rank", 0), kvr = nn_model_int(d, "kv_lora_rank", 1);
    int64_t dn = nn_model_int(d, "qk_nope_dim", 1), dr = nn_model_int(d, "qk_rope_dim", 1);
    int64_t dv = nn_model_int(d, "v_head_dim", dn), dq = dn + dr;
    double theta = nn_model_real(d, "rope_theta", 10000.0), eps = nn_model_real(d, "norm_eps", 1e-5);
    char s[128];
    nn_tensor *q;
    if (qr) {
        snprintf(s, sizeof s, "layers.%lld.self_attn.q_a_proj", (long long)l);
        q = zb_linear(b, hn, D, qr, false, s);
        nn_graph_set_scope(g, "layers.%lld.self_attn.q_a_layernorm", (long long)l);
        q = nn_rmsnorm(g, q, PARAM(b, "weight", 0, NN_INIT_ONES, qr), eps);
        snprintf(s, sizeof s, "layers.%lld.self_attn.q_b_proj", (long long)l);
        q = zb_linear(b, q, qr, H * dq, false, s);
    } else {
        snprintf(s, sizeof s, "layers.%lld.self_attn.q_proj", (long long)l);
        q = zb_linear(b, hn, D, H * dq, false, s);
    }
    snprintf(s, sizeof s, "layers.%lld.self_attn.kv_a_proj_with_mqa", (long long)l);
    nn_tensor *ckv = zb_linear(b, hn, D, kvr + dr, false, s);
    nn_graph_set_scope(g, "layers.%lld.self_attn", (long long)l);
    nn_tensor *c = nn_slice(g, ckv, 2, 0, kvr);
    nn_graph_set_scope(g, "layers.%lld.self_attn.kv_a_layernorm", (long long)l);
    c = nn_rmsnorm(g, c, PARAM(b, "weight", 0, NN_INIT_ONES, kvr), eps);
    snprintf(s, sizeof s, "layers.%lld.self_attn.kv_b_proj", (long long)l);
    nn_tensor *kv = zb_linear(b, c, kvr, H * (dn + dv), false, s);
    nn_graph_set_scope(g, "layers.%lld.self_attn", (long long)l);
    kv = zb_heads(g, kv, B, S, H, dn + dv);
    q = zb_heads(g, q, B, S, H, dq);
    nn_tensor *q_pe = nn_rope(g, nn_slice(g, q, 3, dn, dq), theta);
    nn_tensor *k_pe = nn_reshape(g, nn_slice(g, ckv, 2, kvr, kvr + dr), 4, DIMS(B, 1, S, dr));
    k_pe = nn_rope(g, k_pe, theta);
    q = nn_concat(g, 2, (nn_tensor *[]){nn_slice(g, q, 3, 0, dn), q_pe}, 3);
    k_pe = nn_broadcast_to(g, k_pe, 4, DIMS(B, H, S, dr)); /* one rope key for every head */
    nn_tensor *k = nn_concat(g, 2, (nn_tensor *[]){nn_slice(g, kv, 3, 0, dn), k_pe}, 3);
    nn_tensor *a = nn_attention(g, q, k, nn_slice(g, kv, 3, dn, dn + dv), true);
    a = nn_reshape(g, nn_permute(g, a, (int[]){0, 2, 1, 3}), 3, DIMS(B, S, H * dv));
    snprintf(s, sizeof s, "layers.%lld.self_attn.o_proj", (long long)l);
    return zb_linear(b, a, H * dv, D, false, s);
}

/* A MoE layer over hn [B, S, D] (T = B S tokens) -> [B, S, D]: the router (mlp.gate, f32
 * scores), the routed SwiGLU experts (mlp.experts: gate_proj, up_proj [E, D, F], down_proj
 * [E, F, D]) and the shared experts (mlp.shared_experts, one SwiGLU of shared x moe_ffn);
 * adds the layer's auxiliary loss to b->aux when the model has aux_loss. */
static nn_tensor *zb_moe(nn_zb *b, const nn_model_desc *d, nn_tensor *hn, int64_t T, int64_t l)
{
    nn_graph *g = b->g;
    int64_t D = nn_model_int(d, "d_model", 1), E = nn_model_int(d, "experts", 1);
    int64_t F = nn_model_int(d, "moe_ffn", 1), shared = nn_model_int(d, "shared_experts", 0);
    int64_t G = nn_model_int(d, "expert_groups", 0);
    nn_moe_router r = {
        .experts = E,
        .top_k = nn_model_int(d, "experts_per_token", 1),
        .score = strcmp(nn_model_word(d, "router", "softmax"), "sigmoid") == 0 ? NN_MOE_SIGMOID
                                                                               : NN_MOE_SOFTMAX,
        .norm_topk = strcmp(nn_model_word(d, "topk_norm", "yes"), "yes") == 0,
        .scale = nn_model_real(d, "route_scale", 1.0),
        .groups = G,
        .keep_groups = nn_model_int(d, "expert_groups_kept", G),
        .capacity_factor = nn_model_real(d, "capacity", 0),
    };
    r.group_top = r.score == NN_MOE_SIGMOID ? 2 : 1; /* V3: the sum of its top 2; V2: its max */
    nn_tensor *x = nn_reshape(g, hn, 2, DIMS(T, D));
    nn_graph_set_scope(g, "layers.%lld.mlp.gate", (long long)l);
    nn_tensor *wr = PARAM(b, "weight", 1.0 / sqrt((double)D), NN_INIT_NORMAL, D, E);
    nn_tensor *logits = nn_matmul(g, x, wr);
    if (logits && logits->dtype != NN_F32)
        logits = nn_cast(g, logits, NN_F32);
    nn_tensor *bias = NULL;
    if (strcmp(nn_model_word(d, "router_bias", "no"), "yes") == 0) {
        /* a buffer the training loop updates outside the gradient (zero at the start; its
         * values, E floats, are set here so that plans copy them like nn_scalar's) */
        bias = nn_const(g, "e_score_correction_bias", NN_F32, 1, DIMS(E));
        if (bias && !nn_tensor_fill(bias, 0.0f)) {
            nn_graph_fail(g, NP_ERR_NOMEM, "out of memory for %s", bias->name);
            return NULL;
        }
    }
    nn_moe_routing rt;
    if (!nn_moe_route(g, logits, bias, &r, &rt))
        return NULL;
    nn_graph_set_scope(g, "layers.%lld.mlp.experts", (long long)l);
    double sd = 1.0 / sqrt((double)D), sf = 1.0 / sqrt((double)F);
    nn_tensor *wg = PARAM(b, "gate_proj", sd, NN_INIT_NORMAL, E, D, F);
    nn_tensor *wu = PARAM(b, "up_proj", sd, NN_INIT_NORMAL, E, D, F);
    nn_tensor *wd = PARAM(b, "down_proj", sf, NN_INIT_NORMAL, E, F, D);
    nn_tensor *y = nn_moe_experts(g, x, &rt, wg, wu, wd);
    if (nn_model_real(d, "aux_loss", 0) > 0) {
        nn_graph_set_scope(g, "layers.%lld.mlp.aux_loss", (long long)l);
        nn_tensor *aux = nn_moe_aux_loss(g, &rt);
        b->aux = b->aux ? nn_add(g, b->aux, aux) : aux;
        b->n_aux++;
    }
    if (shared) {
        char s[96];
        snprintf(s, sizeof s, "layers.%lld.mlp.shared_experts", (long long)l);
        y = nn_add(g, y, zb_swiglu(b, x, D, shared * F, s));
    }
    nn_graph_set_scope(g, "layers.%lld.mlp", (long long)l);
    return nn_reshape(g, y, 3, DIMS(hn->ne[0], hn->ne[1], D));
}

/* Transformer block l over x [B, S, D] (pre-norm attention and FFN, residuals) -> [B, S, D]. */
static nn_tensor *zb_block(nn_zb *b, const nn_model_desc *d, nn_tensor *x, int64_t B, int64_t S,
                           int64_t l)
{
    nn_graph *g = b->g;
    bool llama = strcmp(d->family, "llama") == 0;
    int64_t D = nn_model_int(d, "d_model", 1), F = nn_model_int(d, "ffn", 4 * D);
    int64_t experts = nn_model_int(d, "experts", 0), dense = nn_model_int(d, "dense_layers", 0);
    bool mla = nn_model_int(d, "kv_lora_rank", 0) > 0;
    double eps = nn_model_real(d, "norm_eps", 1e-5);
    char s[128];
    nn_graph_set_layer(g, (int)l);
    const char *pre = llama ? "layers" : "h";
    snprintf(s, sizeof s, "%s.%lld.%s", pre, (long long)l, llama ? "input_layernorm" : "ln_1");
    nn_graph_set_scope(g, "%s", s);
    nn_tensor *hn = llama ? nn_rmsnorm(g, x, PARAM(b, "weight", 0, NN_INIT_ONES, D), eps)
                          : nn_layernorm(g, x, PARAM(b, "weight", 0, NN_INIT_ONES, D),
                                         PARAM(b, "bias", 0, NN_INIT_ZEROS, D), 1e-5);
    nn_tensor *a = mla ? zb_mla(b, d, hn, B, S, l) : zb_attention(b, d, hn, B, S, l);
    nn_graph_set_scope(g, "%s.%lld.residual1", pre, (long long)l);
    x = nn_add(g, x, a);
    snprintf(s, sizeof s, "%s.%lld.%s", pre, (long long)l, llama ? "post_attention_layernorm" : "ln_2");
    nn_graph_set_scope(g, "%s", s);
    hn = llama ? nn_rmsnorm(g, x, PARAM(b, "weight", 0, NN_INIT_ONES, D), eps)
               : nn_layernorm(g, x, PARAM(b, "weight", 0, NN_INIT_ONES, D),
                              PARAM(b, "bias", 0, NN_INIT_ZEROS, D), 1e-5);
    nn_tensor *f;
    if (llama && experts && l >= dense)
        f = zb_moe(b, d, hn, B * S, l);
    else if (llama) {
        snprintf(s, sizeof s, "layers.%lld.mlp", (long long)l);
        f = zb_swiglu(b, hn, D, F, s);
    } else {
        snprintf(s, sizeof s, "h.%lld.mlp.c_fc", (long long)l);
        f = nn_gelu(g, zb_linear(b, hn, D, F, true, s));
        snprintf(s, sizeof s, "h.%lld.mlp.c_proj", (long long)l);
        f = zb_linear(b, f, F, D, true, s);
        f = zb_dropout(b, f);
    }
    nn_graph_set_scope(g, "%s.%lld.residual2", pre, (long long)l);
    x = nn_add(g, x, f);
    return x;
}

/* DeepSeek-V3's multi-token prediction (technical report section 2.2): module k (1..mtp)
 * predicts token i + k + 1 at position i from the previous depth's hidden state h [B, S-k+1, D]
 * and the embedding of token i + k: h' = eh_proj([enorm(Emb(t_{i+k})); hnorm(h_i)]) (the
 * checkpoint's order), one transformer block (layers.L+k-1), then the shared output head
 * after the module's own norm (shared_head.norm). Its logits [B (S-k), V] go to b->mtp[k-1]. */
static nn_tensor *zb_mtp(nn_zb *b, const nn_model_desc *d, nn_tensor *h, nn_tensor *tokens,
                         nn_tensor *wte, nn_tensor *head, int64_t B, int64_t S, int64_t k)
{
    nn_graph *g = b->g;
    int64_t D = nn_model_int(d, "d_model", 1), L = nn_model_int(d, "layers", 1) + k - 1;
    double eps = nn_model_real(d, "norm_eps", 1e-5);
    int64_t Sk = S - k;
    char s[128];
    if (Sk < 1) {
        nn_graph_fail(g, NP_ERR_RANGE, "%s: multi-token prediction depth %lld needs a sequence "
                      "longer than %lld tokens", d->name, (long long)k, (long long)k);
        return NULL;
    }
    nn_graph_set_layer(g, (int)L);
    nn_graph_set_scope(g, "layers.%lld.enorm", (long long)L);
    nn_tensor *e = nn_embedding(g, wte, nn_slice(g, tokens, 1, k, S));
    e = nn_rmsnorm(g, e, PARAM(b, "weight", 0, NN_INIT_ONES, D), eps);
    nn_graph_set_scope(g, "layers.%lld.hnorm", (long long)L);
    h = nn_rmsnorm(g, nn_slice(g, h, 1, 0, Sk), PARAM(b, "weight", 0, NN_INIT_ONES, D), eps);
    nn_graph_set_scope(g, "layers.%lld", (long long)L);
    nn_tensor *eh = nn_concat(g, 2, (nn_tensor *[]){e, h}, 2);
    snprintf(s, sizeof s, "layers.%lld.eh_proj", (long long)L);
    h = zb_block(b, d, zb_linear(b, eh, 2 * D, D, false, s), B, Sk, L);
    nn_graph_set_scope(g, "layers.%lld.shared_head.norm", (long long)L);
    nn_tensor *y = nn_rmsnorm(g, h, PARAM(b, "weight", 0, NN_INIT_ONES, D), eps);
    nn_graph_set_scope(g, "layers.%lld.shared_head", (long long)L);
    b->mtp[k - 1] = nn_reshape(g, nn_linear(g, y, head, NULL), 2, DIMS(B * Sk, head->ne[1]));
    return h;
}

nn_tensor *zb_transformer(nn_zb *b, const nn_model_desc *d, int64_t B, int64_t S, nn_model *m)
{
    nn_graph *g = b->g;
    bool llama = strcmp(d->family, "llama") == 0;
    int64_t L = nn_model_int(d, "layers", 1), D = nn_model_int(d, "d_model", 1);
    int64_t V = nn_model_int(d, "vocab", 1), ctx = nn_model_int(d, "context", 1);
    bool tied = strcmp(nn_model_word(d, "tied", llama ? "no" : "yes"), "yes") == 0;
    double eps = nn_model_real(d, "norm_eps", 1e-5);
    double std = 0.02;
    b->n_mtp = (int)nn_model_int(d, "mtp", 0);
    m->input = nn_input(g, "tokens", NN_I32, 2, DIMS(B, S));
    nn_graph_set_scope(g, llama ? "embed_tokens" : "wte");
    nn_tensor *wte = PARAM(b, "weight", std, NN_INIT_NORMAL, V, D);
    nn_tensor *x = nn_embedding(g, wte, m->input);
    if (!llama) {
        nn_graph_set_scope(g, "wpe");
        nn_tensor *wpe = PARAM(b, "weight", 0.01, NN_INIT_NORMAL, ctx, D);
        int64_t p0 = b->kv ? b->past : 0; /* inference: the new tokens' positions */
        x = nn_add(g, x, S == ctx ? wpe : nn_slice(g, wpe, 0, p0, p0 + S));
        x = zb_dropout(b, x);
    }
    for (int64_t l = 0; l < L; l++)
        x = zb_block(b, d, x, B, S, l);
    nn_graph_set_layer(g, -1);
    nn_graph_set_scope(g, llama ? "norm" : "ln_f");
    nn_tensor *hn = llama ? nn_rmsnorm(g, x, PARAM(b, "weight", 0, NN_INIT_ONES, D), eps)
                          : nn_layernorm(g, x, PARAM(b, "weight", 0, NN_INIT_ONES, D),
                                         PARAM(b, "bias", 0, NN_INIT_ZEROS, D), 1e-5);
    if (b->kv) { /* inference: the next token's logits only, from each sequence's last row */
        hn = nn_reshape(g, S > 1 ? nn_slice(g, hn, 1, S - 1, S) : hn, 3, DIMS(B, 1, D));
        S = 1;
        b->n_mtp = 0;
    }
    nn_graph_set_scope(g, "lm_head");
    if (tied)
        return nn_matmul(g, nn_reshape(g, hn, 2, DIMS(B * S, D)), nn_transpose(g, wte));
    nn_tensor *head = PARAM(b, "weight", 1.0 / sqrt((double)D), NN_INIT_NORMAL, D, V);
    nn_tensor *logits = nn_reshape(g, nn_linear(g, hn, head, NULL), 2, DIMS(B * S, V));
    for (int64_t k = 1; k <= b->n_mtp; k++)
        x = zb_mtp(b, d, x, m->input, wte, head, B, S, k);
    nn_graph_set_layer(g, -1);
    return logits;
}
