/* test_models_hf.c — models from Hugging Face config.json files (framework/model_hf.c): the
 * shipped examples (models/hf/) against their model cards' parameter counts, every bad-input
 * error by file, key and position, and `npusim plan|run --model` on them (a tiny Qwen3 and
 * Qwen2 in functional mode against the reference executor). */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "model.h"

static int64_t params_of(const char *path)
{
    nn_model_desc d;
    nn_model m;
    np_err e = {0};
    nn_model_opts o = {.batch = 1, .seq = 1};
    if (nn_model_load(harness_src_path(path), &d, &e) != NP_OK ||
        nn_model_build(&d, &o, &m, &e) != NP_OK) {
        fprintf(stderr, "%s: %s\n", path, e.msg);
        return -1;
    }
    int64_t n = nn_graph_param_count(m.g);
    nn_graph_free(m.g);
    return n;
}

static int64_t zoo_params(const char *name)
{
    nn_model_desc d;
    nn_model m;
    np_err e = {0};
    nn_model_opts o = {.batch = 1, .seq = 1};
    if (nn_model_load(name, &d, &e) != NP_OK || nn_model_build(&d, &o, &m, &e) != NP_OK)
        return -2;
    int64_t n = nn_graph_param_count(m.g);
    nn_graph_free(m.g);
    return n;
}

/* The parameters of a Llama-layout decoder by hand: embeddings (twice when untied), per layer
 * q and o (D x H*Dh), k and v (D x KV*Dh), the gated MLP (3 D F), two norms (2 D) and Qwen3's
 * q/k norms (2 Dh), and the final norm. */
static double llama_params(double L, double D, double H, double KV, double Dh, double F,
                           double V, int tied, int qk_norm)
{
    double layer = 2 * D * H * Dh + 2 * D * KV * Dh + 3 * D * F + 2 * D + (qk_norm ? 2 * Dh : 0);
    return V * D * (tied ? 1 : 2) + L * layer + D;
}

TEST(hf_configs_give_the_model_cards_parameter_counts)
{
    /* Meta's model card for Meta-Llama-3-8B: 8,030,261,248 (the safetensors total) */
    CU_ASSERT_EQUAL(params_of("models/hf/llama-3-8b/config.json"), 8030261248LL);
    /* Mistral AI's Mistral-7B-v0.1: 7,241,732,096 */
    CU_ASSERT_EQUAL(params_of("models/hf/mistral-7b-v0.1/config.json"), 7241732096LL);
    /* a folder holding a config.json is the same model */
    CU_ASSERT_EQUAL(params_of("models/hf/mistral-7b-v0.1"), 7241732096LL);
    /* Hugging Face's gpt2: 124,439,808 (tied head), as the zoo's gpt2-small */
    CU_ASSERT_EQUAL(params_of("models/hf/gpt2/config.json"), 124439808);
    /* Qwen3's cards: 0.6B (0.44B without embeddings) and 8.2B (6.95B); exactly, by hand
     * from the cards' layer counts, heads (GQA 16/8, 32/8), head_dim 128, tied 0.6B */
    double q06 = llama_params(28, 1024, 16, 8, 128, 3072, 151936, 1, 1);
    double q8 = llama_params(36, 4096, 32, 8, 128, 12288, 151936, 0, 1);
    CU_ASSERT_EQUAL(q06, 596049920.0);
    CU_ASSERT_EQUAL(q8, 8190735360.0);
    CU_ASSERT_EQUAL(params_of("models/hf/qwen3-0.6b/config.json"), (int64_t)q06);
    CU_ASSERT_EQUAL(params_of("models/hf/qwen3-8b/config.json"), (int64_t)q8);
    CU_ASSERT(fabs(q06 / 1e9 - 0.6) < 0.05 && fabs((q06 - 151936.0 * 1024) / 1e9 - 0.44) < 0.005);
    CU_ASSERT(fabs(q8 / 1e9 - 8.2) < 0.05 &&
              fabs((q8 - 2 * 151936.0 * 4096) / 1e9 - 6.95) < 0.005);
    /* Mixtral-8x7B-v0.1 and Qwen3-30B-A3B: the zoo's mixtral-8x7b and qwen3-30b-a3b, whose
     * counts test_models.c checks against the cards (46.7B; 30.5B) */
    CU_ASSERT_EQUAL(params_of("models/hf/mixtral-8x7b-v0.1"), 46702792704LL);
    CU_ASSERT_EQUAL(params_of("models/hf/mixtral-8x7b-v0.1"), zoo_params("mixtral-8x7b"));
    CU_ASSERT_EQUAL(params_of("models/hf/qwen3-30b-a3b"), zoo_params("qwen3-30b-a3b"));
    CU_ASSERT(fabs((double)params_of("models/hf/qwen3-30b-a3b") / 1e9 - 30.5) < 0.05);
    /* and the same formula gives the cards' Llama and Mistral figures */
    CU_ASSERT_EQUAL(llama_params(32, 4096, 32, 8, 128, 14336, 128256, 0, 0), 8030261248.0);
    CU_ASSERT_EQUAL(llama_params(32, 4096, 32, 8, 128, 14336, 32000, 0, 0), 7241732096.0);
}

TEST(hf_config_fields_reach_the_builder)
{
    nn_model_desc d;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(nn_model_load(harness_src_path("models/hf/llama-3-8b/config.json"), &d, &e),
                          NP_OK);
    CU_ASSERT_STRING_EQUAL(d.name, "llama-3-8b");
    CU_ASSERT_STRING_EQUAL(d.family, "llama");
    CU_ASSERT_EQUAL(nn_model_int(&d, "kv_heads", 0), 8);
    CU_ASSERT_EQUAL(nn_model_int(&d, "context", 0), 8192);
    CU_ASSERT_EQUAL(nn_model_real(&d, "rope_theta", 0), 500000.0);
    CU_ASSERT_EQUAL(nn_model_real(&d, "norm_eps", 0), 1e-5);
    CU_ASSERT_STRING_EQUAL(nn_model_word(&d, "tied", ""), "no");
    /* Mistral's sliding window of 4096 caps the context (causal attention up to there) */
    CU_ASSERT_EQUAL_FATAL(nn_model_load(harness_src_path("models/hf/mistral-7b-v0.1"), &d, &e),
                          NP_OK);
    CU_ASSERT_EQUAL(nn_model_int(&d, "context", 0), 4096);
    CU_ASSERT_EQUAL_FATAL(nn_model_load(harness_src_path("models/hf/qwen3-0.6b/"), &d, &e), NP_OK);
    CU_ASSERT_STRING_EQUAL(d.name, "qwen3-0.6b");
    CU_ASSERT_EQUAL(nn_model_int(&d, "head_dim", 0), 128);
    CU_ASSERT_STRING_EQUAL(nn_model_word(&d, "qk_norm", ""), "yes");
    CU_ASSERT_STRING_EQUAL(nn_model_word(&d, "tied", ""), "yes");
    CU_ASSERT_EQUAL(nn_model_real(&d, "norm_eps", 0), 1e-6);
    /* Qwen2: biases on q, k and v (not o): 3 (D + 2 KV Dh)... by hand for the tiny one:
     * D 32, H 4, KV 2, Dh 8, F 64, V 16, tied, 2 layers */
    double plain = llama_params(2, 32, 4, 2, 8, 64, 16, 1, 0);
    CU_ASSERT_EQUAL(params_of("tests/data/hf/qwen2-tiny/config.json"),
                    (int64_t)(plain + 2 * (32 + 2 * 16)));
}

/* The llama-3-8b example with `from` replaced by `to`, parsed as x/config.json into d. */
static np_status parse_variant_desc(const char *from, const char *to, nn_model_desc *d, np_err *e)
{
    size_t len;
    char *text = harness_read_file(harness_src_path("models/hf/llama-3-8b/config.json"), &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    char *at = strstr(text, from);
    CU_ASSERT_PTR_NOT_NULL_FATAL(at);
    size_t fl = strlen(from), tl = strlen(to);
    char *out = malloc(len - fl + tl + 1);
    memcpy(out, text, (size_t)(at - text));
    memcpy(out + (at - text), to, tl);
    strcpy(out + (at - text) + tl, at + fl);
    np_status st = nn_model_parse_hf("x/config.json", out, strlen(out), d, e);
    free(out);
    free(text);
    return st;
}

static np_status parse_variant(const char *from, const char *to, np_err *e)
{
    nn_model_desc d;
    return parse_variant_desc(from, to, &d, e);
}

TEST(llama_attention_bias_adds_the_biases_of_q_k_v_and_o)
{
    /* transformers' LlamaAttention: q_proj, k_proj, v_proj and o_proj get bias=attention_bias:
     * 4096 + 2 x 1024 + 4096 per layer */
    nn_model_desc d;
    nn_model m;
    np_err e = {0};
    nn_model_opts o = {.batch = 1, .seq = 1};
    CU_ASSERT_EQUAL_FATAL(parse_variant_desc("\"attention_bias\": false", "\"attention_bias\": true",
                                             &d, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(nn_model_build(&d, &o, &m, &e), NP_OK);
    CU_ASSERT_EQUAL(nn_graph_param_count(m.g), 8030261248LL + 32 * (4096 + 2 * 1024 + 4096));
    nn_graph_free(m.g);
}

static void expect_variant(const char *from, const char *to, np_status st, const char *want)
{
    np_err e = {0};
    char buf[1024];
    CU_ASSERT_EQUAL(parse_variant(from, to, &e), st);
    np_err_format(&e, buf, sizeof buf);
    if (!strstr(buf, want))
        fprintf(stderr, "'%s' -> '%s': got '%s', want '%s'\n", from, to, buf, want);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, want));
}

TEST(malformed_hf_configs_get_file_key_line_col_errors)
{
    /* positions by hand from models/hf/llama-3-8b/config.json: hidden_size is on line 10,
     * num_attention_heads 15, num_hidden_layers 16, num_key_value_heads 17, rope_scaling 20,
     * each key's quote at column 3 */
    expect_variant("\"hidden_size\": 4096", "\"hidden_size\": \"4096\"", NP_ERR_TYPE,
                   "x/config.json:10:3: hidden_size: expected an integer, got a string");
    expect_variant("\"hidden_size\": 4096", "\"hidden_size\": 4096.0", NP_ERR_TYPE,
                   "x/config.json:10:3: hidden_size: expected an integer, got a real number");
    expect_variant("\"num_hidden_layers\": 32", "\"num_hidden_layers\": -2", NP_ERR_RANGE,
                   "x/config.json:16:3: num_hidden_layers: -2 is outside 1 .. 4096");
    expect_variant("\"hidden_size\": 4096", "\"hidden_size\": 0", NP_ERR_RANGE,
                   "x/config.json:10:3: hidden_size: 0 is outside 1 .. 1048576");
    expect_variant("\"hidden_size\": 4096", "\"hidden_size\": 1099511627776", NP_ERR_RANGE,
                   "x/config.json:10:3: hidden_size: 1099511627776 is outside 1 .. 1048576");
    expect_variant("\"hidden_size\": 4096", "\"hidden_size\": 4100", NP_ERR_INCONSISTENT,
                   "x/config.json:15:3: num_attention_heads: 32 heads do not divide hidden_size 4100");
    expect_variant("\"num_key_value_heads\": 8", "\"num_key_value_heads\": 5", NP_ERR_INCONSISTENT,
                   "x/config.json:17:3: num_key_value_heads: 5 key/value heads do not divide "
                   "num_attention_heads 32");
    expect_variant("  \"intermediate_size\": 14336,\n", "", NP_ERR_MISSING,
                   "x/config.json: missing key 'intermediate_size' (required for LlamaForCausalLM)");
    expect_variant("\"rope_scaling\": null",
                   "\"rope_scaling\": {\"factor\": 8.0, \"rope_type\": \"llama3\"}", NP_ERR_RANGE,
                   "x/config.json:20:3: rope_scaling: scaled rope ('llama3') is not built");
    expect_variant("\"hidden_act\": \"silu\"", "\"hidden_act\": \"gelu\"", NP_ERR_RANGE,
                   "x/config.json:9:3: hidden_act: 'gelu'");
    expect_variant("\"tie_word_embeddings\": false", "\"tie_word_embeddings\": 0", NP_ERR_TYPE,
                   "x/config.json:22:3: tie_word_embeddings: expected true or false, got an integer");
    expect_variant("\"LlamaForCausalLM\"", "\"BertForMaskedLM\"", NP_ERR_RANGE,
                   "x/config.json:2:3: architectures: 'BertForMaskedLM' is not an architecture "
                   "npusim builds (LlamaForCausalLM, ");
    expect_variant("\"rms_norm_eps\": 1e-05", "\"rms_norm_eps\": -1e-05", NP_ERR_RANGE,
                   "x/config.json:19:3: rms_norm_eps: -1e-05 is outside (0, 1]");
    /* JSON errors where jansson stops: a key given twice (line 26 col 16 is after its
     * string), not an object, a NUL byte */
    expect_variant("\"vocab_size\": 128256", "\"vocab_size\": 128256, \"vocab_size\": 1",
                   NP_ERR_SYNTAX, "x/config.json:26:");
    expect_variant("{", "[{", NP_ERR_SYNTAX, "x/config.json:");
    expect_variant("\"vocab_size\": 128256\n}", "\"vocab_size\": 128256\n}\n[]", NP_ERR_SYNTAX,
                   "x/config.json:28:");
    /* a mixture of experts in another architecture's config is refused by its field */
    expect_variant("\"num_key_value_heads\": 8", "\"num_key_value_heads\": 8, \"num_local_experts\": 8",
                   NP_ERR_RANGE, "x/config.json:17:29: num_local_experts: a mixture of experts: "
                   "npusim imports the MoE layers of Mixtral and Qwen3-MoE only");
    np_err e = {0};
    nn_model_desc d;
    CU_ASSERT_EQUAL(nn_model_parse_hf("x.json", "[1, 2]", 6, &d, &e), NP_ERR_TYPE);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "one object, not an array"));
    CU_ASSERT_EQUAL(nn_model_parse_hf("x.json", "{\"a\": 1}\0", 9, &d, &e), NP_ERR_SYNTAX);
    CU_ASSERT_EQUAL(nn_model_parse_hf("x.json", "{\"a\": 1}", 8, &d, &e), NP_ERR_MISSING);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "missing key 'architectures'"));
}

TEST(truncated_and_moe_configs_are_refused_by_npusim_with_a_bad_input_status)
{
    /* tests/data/hf/bad/truncated.json: the first 300 bytes of the llama-3-8b example, which
     * end after line 13: jansson stops at the end of the text */
    harness_run r = harness_npusim("summary", "--model",
                                   harness_src_path("tests/data/hf/bad/truncated.json"), NULL);
    CU_ASSERT_EQUAL(r.exit_status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "truncated.json:1"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "not JSON"));
    harness_run_free(&r);
    /* DeepSeek-V3's architecture: refused with its reason (the zoo builds it) */
    r = harness_npusim("summary", "--model",
                       harness_src_path("tests/data/hf/bad/deepseek-v3.json"), NULL);
    CU_ASSERT_EQUAL(r.exit_status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "deepseek-v3.json:2:3: architectures: "
                                         "DeepseekV3ForCausalLM is a mixture of experts with "
                                         "YaRN rope scaling"));
    harness_run_free(&r);
    r = harness_npusim("summary", "--model", harness_src_path("tests/data/hf/none.json"), NULL);
    CU_ASSERT_EQUAL(r.exit_status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "none.json"));
    harness_run_free(&r);
}

TEST(plan_of_an_hf_config_splits_its_heads_over_tp)
{
    /* Llama-3-8B at tp 8, bf16: each chip holds 1/8 of every layer's projections (q, o 4096 x
     * 4096; k, v 4096 x 1024; gate, up, down 4096 x 14336), 1/8 of the vocabulary-parallel
     * embeddings and head (128,256 rows: a multiple of 8, no padding) and every norm whole */
    double layer = (2 * 4096.0 * 4096 + 2 * 4096.0 * 1024 + 3 * 4096.0 * 14336) / 8;
    double per_chip = 32 * layer + 32 * 2 * 4096.0 + 4096 + 2 * 128256.0 / 8 * 4096;
    harness_run r = harness_npusim("plan", "--arch", "h100-sxm", "--model",
                                   harness_src_path("models/hf/llama-3-8b"), "--batch", "8",
                                   "--seq", "2048", "--tp", "8", "--json", NULL);
    CU_ASSERT_EQUAL_FATAL(r.exit_status, 0);
    json_t *j = json_loads(r.out, 0, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    json_t *mem = json_object_get(j, "memory");
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(mem, "params_bytes")), (json_int_t)(2 * per_chip));
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(j, "model")), "llama-3-8b");
    json_decref(j);
    harness_run_free(&r);
}

/* The simulated loss and the reference executor's of `npusim run --functional` on 8 chips of
 * tpu-pod (dp 2 x tp 2 x pp 2, bf16) and on one. */
static void functional(const char *model, const char *dp, const char *tp, const char *pp,
                       double *loss, double *ref)
{
    harness_run r = harness_npusim("run", "--arch", "tpu-pod", "--model", harness_src_path(model),
                                   "--batch", "8", "--dp", dp, "--tp", tp, "--pp", pp,
                                   "--fidelity", "full", "--functional", "--json", NULL);
    CU_ASSERT_EQUAL_FATAL(r.exit_status, 0);
    json_t *j = json_loads(r.out, 0, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    *loss = json_number_value(json_object_get(j, "loss"));
    *ref = json_number_value(json_object_get(j, "loss_reference"));
    json_decref(j);
    harness_run_free(&r);
}

TEST(run_functional_of_tiny_qwen_configs_gives_the_reference_executors_loss)
{
    const char *models[] = {"tests/data/hf/qwen3-tiny", "tests/data/hf/qwen2-tiny"};
    for (int i = 0; i < 2; i++) {
        double one_sim, one, loss, dist;
        functional(models[i], "1", "1", "1", &one_sim, &one);
        functional(models[i], "2", "2", "2", &loss, &dist);
        fprintf(stderr, "%s: loss dp2 x tp2 x pp2 %.6f (distributed executor %.6f, one device "
                        "%.6f)\n", models[i], loss, dist, one);
        /* at initialisation a vocabulary of 16 gives about ln 16 */
        CU_ASSERT(fabs(one - log(16.0)) < 0.3);
        /* bf16: within 2^-8 of the value (as test_run.c's gpt-tiny) */
        double tol = ldexp(1.0, -8) * one;
        CU_ASSERT(fabs(one_sim - one) <= tol);
        CU_ASSERT(fabs(loss - one) <= tol);
        CU_ASSERT(fabs(loss - dist) <= tol);
    }
}
