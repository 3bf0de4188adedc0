/* test_infer.c — inference with a paged kv cache (docs/serving.md): the graphs of prefill and
 * decode against the reference executor's full-sequence forward (issue 30's done-when 1), the
 * timing of an iteration against rooflines computed here by hand, and `npusim infer`'s flags. */
#include <math.h>
#include <string.h>

#include "harness.h"
#include "kvcache.h"
#include "model.h"

#define PROMPT 8
#define STEPS 16
#define SEQS 2

/* d with its context raised to 32 (room for a prompt and 16 decode steps). */
static void infer_desc(const char *name, nn_model_desc *d)
{
    np_err err = {0};
    CU_ASSERT_EQUAL_FATAL(nn_model_load(name, d, &err), NP_OK);
    for (int i = 0; i < d->n; i++)
        if (strcmp(d->e[i].key, "context") == 0)
            d->e[i].v[0] = 32;
}

/* Copies every parameter of from into to's parameter of the same name. */
static void copy_params(nn_graph *from, nn_graph *to)
{
    np_err err = {0};
    for (int i = 0; i < nn_graph_n_nodes(to); i++) {
        nn_tensor *t = nn_graph_node(to, i);
        if (t->op != NN_OP_LEAF || t->role != NN_ROLE_PARAM)
            continue;
        nn_tensor *f = nn_graph_find(from, t->name);
        CU_ASSERT_PTR_NOT_NULL_FATAL(f);
        CU_ASSERT_EQUAL_FATAL(nn_tensor_write(t, nn_tensor_values(f), (size_t)nn_numel(f), &err),
                              NP_OK);
    }
}

/* Prefill of PROMPT tokens, then STEPS decode steps of SEQS sequences through a paged cache
 * of blocks of 4 tokens: each step's logits against the full forward's row of that position. */
static void decode_matches_full_forward(const char *name, nn_dtype dt, double tol)
{
    nn_model_desc d;
    infer_desc(name, &d);
    np_err err = {0};
    int64_t T = PROMPT + STEPS, V = nn_model_int(&d, "vocab", 1);
    nn_model full;
    CU_ASSERT_EQUAL_FATAL(nn_model_build(&d, &(nn_model_opts){.batch = SEQS, .seq = T,
                                         .inference = true, .compute = dt, .seed = 3}, &full, &err), NP_OK);
    CU_ASSERT_EQUAL_FATAL(nn_model_init(full.g, 11, &err), NP_OK);
    float tok[SEQS * (PROMPT + STEPS)], zero[SEQS * (PROMPT + STEPS)] = {0};
    for (int i = 0; i < SEQS * T; i++)
        tok[i] = (float)((i * 7 + 3) % V);
    CU_ASSERT_EQUAL_FATAL(nn_tensor_write(full.input, tok, (size_t)(SEQS * T), &err), NP_OK);
    CU_ASSERT_EQUAL_FATAL(nn_tensor_write(full.labels, zero, (size_t)(SEQS * T), &err), NP_OK);
    CU_ASSERT_EQUAL_FATAL(nn_graph_compute(full.g, &err), NP_OK);
    const float *ref = nn_tensor_values(full.logits); /* [SEQS x T, V] */

    int64_t L = nn_model_int(&d, "layers", 1), H = nn_model_int(&d, "heads", 1);
    int64_t KV = nn_model_int(&d, "kv_heads", H), Dh = nn_model_int(&d, "d_model", 1) / H;
    nn_kv_cache *c;
    CU_ASSERT_EQUAL_FATAL(nn_kv_new(L, KV * Dh, 4, 16, SEQS, &c, &err), NP_OK);
    int seqs[SEQS] = {1, 0}; /* batch row b is cache sequence seqs[b] */
    double worst = 0;
    for (int step = 0; step <= STEPS; step++) {
        int64_t past = step ? PROMPT + step - 1 : 0, S = step ? 1 : PROMPT;
        nn_model m;
        CU_ASSERT_EQUAL_FATAL(nn_model_build(&d, &(nn_model_opts){.batch = SEQS, .seq = S,
                              .compute = dt, .seed = 3, .kv = true, .past = past,
                              .kv_slots = nn_kv_slots(c)}, &m, &err), NP_OK);
        CU_ASSERT_EQUAL_FATAL(nn_model_init(m.g, 11, &err), NP_OK);
        copy_params(full.g, m.g);
        float in[SEQS * PROMPT];
        for (int b = 0; b < SEQS; b++)
            for (int64_t s = 0; s < S; s++)
                in[b * S + s] = tok[b * T + past + s];
        CU_ASSERT_EQUAL_FATAL(nn_tensor_write(m.input, in, (size_t)(SEQS * S), &err), NP_OK);
        if (nn_kv_load(c, &m, seqs, &err) != NP_OK)
            printf("%s\n", err.msg);
        CU_ASSERT_EQUAL_FATAL(err.status, NP_OK);
        CU_ASSERT_EQUAL_FATAL(nn_graph_compute(m.g, &err), NP_OK);
        CU_ASSERT_EQUAL_FATAL(nn_kv_store(c, &m, seqs, &err), NP_OK);
        const float *got = nn_tensor_values(m.logits); /* [SEQS, V]: position past + S - 1 */
        for (int b = 0; b < SEQS; b++)
            for (int64_t v = 0; v < V; v++) {
                double r = ref[(b * T + past + S - 1) * V + v], e = fabs(got[b * V + v] - r);
                worst = e / (1 + fabs(r)) > worst ? e / (1 + fabs(r)) : worst;
            }
        nn_graph_free(m.g);
    }
    CU_ASSERT(worst <= tol);
    if (worst > tol)
        printf("%s: worst relative error %g > %g\n", name, worst, tol);
    CU_ASSERT_EQUAL(nn_kv_len(c, 0), T);
    CU_ASSERT_EQUAL(nn_kv_blocks_used(c), SEQS * T / 4);
    nn_kv_free(c);
    nn_graph_free(full.g);
}

TEST(gpt_tiny_decode_logits_equal_the_full_forward_f32)
{
    decode_matches_full_forward("gpt-tiny", NN_F32, 1e-5);
}

TEST(llama_tiny_decode_logits_equal_the_full_forward_f32)
{
    decode_matches_full_forward("llama-tiny", NN_F32, 1e-5);
}

/* bf16: both graphs round every op's output to 8 significant bits, at different points (the
 * full forward's composite attention rounds its scores and probabilities, the cache's fused
 * op only its output): 16 bf16 ulps (2^-4) relative over every logit of the 17 steps. */
TEST(gpt_tiny_decode_logits_equal_the_full_forward_bf16)
{
    decode_matches_full_forward("gpt-tiny", NN_BF16, 0.0625);
}

TEST(llama_tiny_decode_logits_equal_the_full_forward_bf16)
{
    decode_matches_full_forward("llama-tiny", NN_BF16, 0.0625);
}
