/* kvcheck.c — the functional check of kvcheck.h: the reference executor runs the full
 * forward once, then the prefill and each decode step as their own kv graphs (weights copied
 * from the full forward by name), the cache between them in nn_kv_cache. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "human.h"
#include "kvcache.h"
#include "kvcheck.h"
#include "pass.h"

/* Copies every parameter of from (f32 master weights) into to's parameter of the same name,
 * rounded to its dtype as from's cast to the compute dtype rounds it. */
static np_status kc_copy_params(nn_graph *from, nn_graph *to, np_err *err)
{
    for (int i = 0; i < nn_graph_n_nodes(to); i++) {
        nn_tensor *t = nn_graph_node(to, i);
        if (t->op != NN_OP_LEAF || t->role != NN_ROLE_PARAM)
            continue;
        nn_tensor *f = nn_graph_find(from, t->name);
        if (!f || nn_numel(f) != nn_numel(t))
            return np_err_set(err, NP_ERR_INTERNAL, "kv check: parameter %s is not in the full "
                              "forward", t->name);
        size_t n = (size_t)nn_numel(f);
        float *v = malloc(n * sizeof *v);
        if (!v)
            return np_err_set(err, NP_ERR_NOMEM, "out of memory");
        const float *x = nn_tensor_values(f);
        for (size_t k = 0; k < n; k++)
            v[k] = t->dtype == NN_BF16 ? nn_round_bf16(x[k]) : x[k];
        np_status st = nn_tensor_write(t, v, n, err);
        free(v);
        if (st != NP_OK)
            return st;
    }
    return NP_OK;
}

/* One iteration (S tokens after past) of batch row b = sequence b, against ref's rows. */
static np_status kc_step(const nn_model_desc *d, const nn_kv_check_opts *o, nn_model *full,
                         nn_kv_cache *c, const int *seqs, const float *tok, int64_t T,
                         int64_t past, int64_t S, nn_kv_check_result *r, np_err *err)
{
    int64_t B = o->batch, V = full->logits->ne[1];
    nn_model m;
    np_status st = nn_model_build(d, &(nn_model_opts){.batch = B, .seq = S, .compute = o->compute,
                                  .seed = o->seed, .kv = true, .past = past,
                                  .kv_slots = nn_kv_slots(c)}, &m, err);
    if (st != NP_OK)
        return st;
    float *in = malloc((size_t)(B * S) * sizeof *in);
    if (!in)
        st = np_err_set(err, NP_ERR_NOMEM, "out of memory");
    for (int64_t b = 0; in && b < B; b++)
        for (int64_t s = 0; s < S; s++)
            in[b * S + s] = tok[b * T + past + s];
    if (st == NP_OK)
        st = kc_copy_params(full->g, m.g, err);
    if (st == NP_OK)
        st = nn_tensor_write(m.input, in, (size_t)(B * S), err);
    if (st == NP_OK)
        st = nn_kv_load(c, &m, seqs, err);
    if (st == NP_OK)
        st = nn_graph_compute(m.g, err);
    if (st == NP_OK)
        st = nn_kv_store(c, &m, seqs, err);
    if (st == NP_OK) { /* row b: position past + S - 1 of sequence b */
        const float *got = nn_tensor_values(m.logits), *ref = nn_tensor_values(full->logits);
        for (int64_t b = 0; b < B; b++)
            for (int64_t v = 0; v < V; v++) {
                double x = ref[(b * T + past + S - 1) * V + v];
                double e = fabs(got[b * V + v] - x) / (1 + fabs(x));
                r->worst = e > r->worst ? e : r->worst;
            }
        r->logits += B * V;
    }
    free(in);
    nn_graph_free(m.g);
    return st;
}

np_status nn_kv_check(const nn_model_desc *d, const nn_kv_check_opts *o, nn_kv_check_result *r,
                      np_err *err)
{
    memset(r, 0, sizeof *r);
    int64_t B = o->batch, T = o->prompt + o->steps, V = nn_model_int(d, "vocab", 1);
    if (B < 1 || o->prompt < 1 || o->steps < 0 || B > (1 << 16))
        return np_err_set(err, NP_ERR_RANGE, "kv check: %lld sequences, prompt %lld, %lld steps",
                          (long long)B, (long long)o->prompt, (long long)o->steps);
    nn_model full;
    np_status st = nn_model_build(d, &(nn_model_opts){.batch = B, .seq = T, .inference = true,
                                  .compute = o->compute, .seed = o->seed}, &full, err);
    if (st != NP_OK)
        return st;
    float *tok = malloc((size_t)(B * T) * sizeof *tok);
    float *zero = calloc((size_t)(B * T), sizeof *zero);
    int *seqs = malloc((size_t)B * sizeof *seqs);
    int64_t H = nn_model_int(d, "heads", 1), D = nn_model_int(d, "d_model", 1);
    int64_t width = nn_model_int(d, "kv_heads", H) * nn_model_int(d, "head_dim", D / H);
    int64_t per_seq = (T + o->block - 1) / o->block;
    nn_kv_cache *c = NULL;
    if (!tok || !zero || !seqs)
        st = np_err_set(err, NP_ERR_NOMEM, "out of memory");
    if (st == NP_OK)
        st = nn_kv_new(nn_model_int(d, "layers", 1), width, o->block, B * per_seq, (int)B, &c,
                       err);
    for (int64_t i = 0; st == NP_OK && i < B * T; i++)
        tok[i] = (float)((i * 7 + 3 + (int64_t)(o->seed % 1009)) % V);
    for (int64_t b = 0; st == NP_OK && b < B; b++) /* batch row b is cache sequence B-1-b */
        seqs[b] = (int)(B - 1 - b);
    int64_t params = nn_graph_param_count(full.g);
    char a[32], b[32];
    if (st == NP_OK && params > NN_KV_CHECK_MAX_PARAMS)
        st = np_err_set(err, NP_ERR_RANGE, "%s: %s parameters: the functional check runs the "
                        "reference executor on models of at most %s", d->name,
                        np_human_int(params, a, sizeof a),
                        np_human_int(NN_KV_CHECK_MAX_PARAMS, b, sizeof b));
    int fused; /* the same attention op as the kv graphs', so that bf16 rounds alike */
    if (st == NP_OK)
        st = nn_pass_fuse_attention(full.g, &fused, err);
    if (st == NP_OK)
        st = nn_model_init(full.g, o->seed, err);
    if (st == NP_OK)
        st = nn_tensor_write(full.input, tok, (size_t)(B * T), err);
    if (st == NP_OK)
        st = nn_tensor_write(full.labels, zero, (size_t)(B * T), err);
    if (st == NP_OK)
        st = nn_graph_compute(full.g, err);
    for (int64_t k = 0; st == NP_OK && k <= o->steps; k++)
        st = kc_step(d, o, &full, c, seqs, tok, T, k ? o->prompt + k - 1 : 0, k ? 1 : o->prompt,
                     r, err);
    if (st == NP_OK)
        r->blocks = nn_kv_blocks_used(c);
    nn_kv_free(c);
    free(tok);
    free(zero);
    free(seqs);
    nn_graph_free(full.g);
    return st;
}
