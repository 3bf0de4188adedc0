/* test_models.c — the model zoo against published parameter counts and FLOPs, the model
 * file format's errors (file:line:col), and the `npusim models` / `npusim summary` commands. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "model.h"

static int64_t params_of(const char *name)
{
    nn_model_desc d;
    nn_model m;
    np_err e = {0};
    nn_model_opts o = {.batch = 1, .seq = 1};
    if (nn_model_load(name, &d, &e) != NP_OK)
        return -1;
    o.seq += nn_model_int(&d, "mtp", 0); /* a token for each multi-token prediction depth */
    if (nn_model_build(&d, &o, &m, &e) != NP_OK) {
        fprintf(stderr, "%s: %s\n", name, e.msg);
        return -1;
    }
    int64_t n = nn_graph_param_count(m.g);
    nn_graph_free(m.g);
    return n;
}

TEST(zoo_parameter_counts_equal_the_published_ones)
{
    /* torchvision's model cards; Hugging Face gpt2 (tied embeddings); Meta's Llama 2. */
    CU_ASSERT_EQUAL(params_of("resnet18"), 11689512);
    CU_ASSERT_EQUAL(params_of("resnet50"), 25557032);
    CU_ASSERT_EQUAL(params_of("mobilenet_v2"), 3504872);
    CU_ASSERT_EQUAL(params_of("densenet121"), 7978856);
    CU_ASSERT_EQUAL(params_of("gpt2-small"), 124439808);
    CU_ASSERT_EQUAL(params_of("gpt2-medium"), 354823168);
    CU_ASSERT_EQUAL(params_of("gpt2-large"), 774030080);
    CU_ASSERT_EQUAL(params_of("gpt2-xl"), 1557611200);
    CU_ASSERT_EQUAL(params_of("llama2-7b"), 6738415616LL);
    CU_ASSERT_EQUAL(params_of("llama2-13b"), 13015864320LL);
    CU_ASSERT_EQUAL(params_of("llama2-70b"), 68976648192LL);
    /* GPT-3 175B: the paper's "175B" within 0.5% */
    CU_ASSERT(fabs((double)params_of("gpt3-175b") / 175e9 - 1.0) < 0.005);
}

/* Total and active parameters of a zoo model (active: nn_graph_active_param_count) and of its
 * input embedding. */
static void counts_of(const char *name, int64_t *total, int64_t *active, int64_t *embedding)
{
    nn_model_desc d;
    nn_model m;
    np_err e = {0};
    nn_model_opts o = {.batch = 1, .seq = 1};
    *total = *active = *embedding = -1;
    if (nn_model_load(name, &d, &e) != NP_OK || nn_model_build(&d, &o, &m, &e) != NP_OK) {
        fprintf(stderr, "%s: %s\n", name, e.msg);
        return;
    }
    *total = nn_graph_param_count(m.g);
    *active = nn_graph_active_param_count(m.g);
    const nn_tensor *emb = nn_graph_find(m.g, "embed_tokens.weight");
    *embedding = emb ? nn_numel(emb) : -1;
    nn_graph_free(m.g);
}

/* x rounds to `card` (in units of `unit`) as the model card rounds it */
static bool rounds_to(int64_t x, double card, double unit)
{
    return fabs((double)x / unit - card) <= 0.05 + 1e-9;
}

TEST(moe_zoo_total_and_active_parameters_equal_the_published_ones)
{
    int64_t total, active, emb;
    /* Mixtral 8x7B (Mistral AI's announcement and arXiv 2401.04088): 46.7B, 12.9B active;
     * exactly 46,702,792,704 in the Hugging Face checkpoint (hand sum: 32 layers of attention
     * 41,943,040, norms 8,192, router 32,768, experts 8 x 176,160,768; embedding and head
     * 131,072,000 each; final norm 4,096) */
    counts_of("mixtral-8x7b", &total, &active, &emb);
    CU_ASSERT_EQUAL(total, 46702792704LL);
    CU_ASSERT(rounds_to(total, 46.7, 1e9));
    CU_ASSERT(rounds_to(active, 12.9, 1e9));
    CU_ASSERT_EQUAL(active, 46702792704LL - 32LL * 6 * 176160768); /* 6 of 8 experts idle */
    /* Qwen3 model cards: 30.5B total, 29.9B non-embedding, 3.3B activated; 235B, 234B
     * non-embedding, 22B activated */
    counts_of("qwen3-30b-a3b", &total, &active, &emb);
    CU_ASSERT(rounds_to(total, 30.5, 1e9));
    CU_ASSERT(rounds_to(total - 2 * emb, 29.9, 1e9));
    CU_ASSERT(active >= 3.3e9 && active < 3.4e9); /* 3.35B, which the card truncates */
    counts_of("qwen3-235b-a22b", &total, &active, &emb);
    CU_ASSERT(fabs((double)total / 1e9 - 235) < 0.5);
    CU_ASSERT(fabs((double)(total - 2 * emb) / 1e9 - 234) < 0.5);
    CU_ASSERT(fabs((double)active / 1e9 - 22) < 0.5);
    /* DeepSeek-V2-Lite (its card): 15.7B total, 2.4B activated, the input embedding not
     * counted (DeepSeek's convention: 2.45B, which the card truncates) */
    counts_of("deepseek-v2-lite", &total, &active, &emb);
    CU_ASSERT(rounds_to(total, 15.7, 1e9));
    CU_ASSERT(active - emb >= 2.4e9 && active - emb < 2.5e9);
    /* DeepSeek-V3 (technical report: 671B total, 37B activated; its README_WEIGHTS: 36.6B
     * activated, 0.9B of them the output head, the embedding not counted) */
    counts_of("deepseek-v3", &total, &active, &emb);
    CU_ASSERT(rounds_to(total, 671.0, 1e9));
    CU_ASSERT(rounds_to(active - emb, 36.6, 1e9));
    CU_ASSERT(fabs((double)emb / 1e9 - 0.9) < 0.05);
    /* a dense model's active parameters are all of them */
    counts_of("llama2-7b", &total, &active, &emb);
    CU_ASSERT_EQUAL(active, total);
}

TEST(resnet50_forward_is_about_4_1_gmacs_at_224)
{
    nn_model_desc d;
    nn_summary s;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(nn_model_load("resnet50", &d, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(nn_summary_build(&d, 1, 0, &s, &e), NP_OK);
    /* 4.09 GMACs (torchvision lists "4.09 GFLOPS" counting multiply-adds) */
    CU_ASSERT(fabs((double)s.forward_macs / 4.09e9 - 1.0) < 0.01);
    CU_ASSERT(s.forward_flops > 2 * s.forward_macs);
    /* a training step is about 3x the forward pass (backward = 2x) */
    double ratio = (double)s.train_step_flops / (double)s.forward_flops;
    CU_ASSERT(ratio > 2.8 && ratio < 3.3);
    nn_summary_free(&s);
}

TEST(gpt2_forward_flops_match_the_2_n_per_token_rule_plus_attention)
{
    /* Kaplan et al.: forward ~ 2 * N_nonembedding * tokens + 2 * L * S * d (attention)
     * per token; our count adds norms, softmax and the tied head (2 * d * V per token). */
    nn_model_desc d;
    nn_summary s;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(nn_model_load("gpt2-small", &d, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(nn_summary_build(&d, 1, 1024, &s, &e), NP_OK);
    double L = 12, D = 768, S = 1024, V = 50257;
    double n_layer = 12 * L * D * D;            /* weights of the blocks (biases aside) */
    double macs = S * (n_layer + D * V) + L * 2 * S * S * D;
    CU_ASSERT(fabs((double)s.forward_macs / macs - 1.0) < 0.001);
    nn_summary_free(&s);
}

static void expect_model_error(const char *file, np_status st, const char *text)
{
    char path[512], buf[1024];
    snprintf(path, sizeof path, "%s", harness_src_path(file));
    nn_model_desc d;
    np_err e = {0};
    CU_ASSERT_EQUAL(nn_model_load(path, &d, &e), st);
    np_err_format(&e, buf, sizeof buf);
    if (!strstr(buf, text))
        fprintf(stderr, "%s: got '%s', want '%s'\n", file, buf, text);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, text));
}

TEST(malformed_model_files_get_file_line_col_errors)
{
    expect_model_error("tests/data/models/no_equals.model", NP_ERR_SYNTAX,
                       "no_equals.model:3:1: expected 'key = value'");
    expect_model_error("tests/data/models/unknown_key.model", NP_ERR_UNKNOWN_KEY,
                       "unknown_key.model:4:1: unknown key 'layer' for family resnet; did you mean 'layers'?");
    expect_model_error("tests/data/models/not_an_integer.model", NP_ERR_TYPE,
                       "not_an_integer.model:3:14: layers: 'x2' is not an integer");
    expect_model_error("tests/data/models/wrong_count.model", NP_ERR_RANGE,
                       "wrong_count.model:3:10: layers: takes 4 values, got 3");
    expect_model_error("tests/data/models/missing_key.model", NP_ERR_MISSING,
                       "missing_key.model: missing key 'heads' (required by family gpt)");
    expect_model_error("tests/data/models/duplicate_key.model", NP_ERR_DUPLICATE,
                       "duplicate_key.model:7:1: 'layers' given twice (first on line 2)");
    expect_model_error("tests/data/models/inconsistent.model", NP_ERR_INCONSISTENT,
                       "inconsistent.model:4:1: heads: d_model 30 is not a multiple of 4 heads");
    expect_model_error("tests/data/models/unknown_family.model", NP_ERR_UNKNOWN_KEY,
                       "unknown_family.model:2:10: unknown family 'resnt'; did you mean 'resnet'?");
    expect_model_error("tests/data/models/bad_word.model", NP_ERR_RANGE,
                       "bad_word.model:2:9: block: 'basik' is not one of basic|bottleneck");
    expect_model_error("tests/data/models/no_family.model", NP_ERR_MISSING,
                       "no_family.model: missing key 'family'");
}

TEST(every_zoo_model_parses_and_builds)
{
    char **names;
    size_t n;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(nn_model_names(&names, &n, &e), NP_OK);
    CU_ASSERT(n >= 20);
    for (size_t i = 0; i < n; i++)
        CU_ASSERT(params_of(names[i]) > 0);
    nn_model_names_free(names, n);
}

TEST(models_command_lists_the_zoo_and_unknown_names_get_a_suggestion)
{
    harness_run r = harness_npusim("models", "--json", NULL);
    CU_ASSERT_EQUAL_FATAL(r.exit_status, 0);
    json_t *j = json_loads(r.out, 0, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    bool found = false;
    for (size_t i = 0; i < json_array_size(j); i++) {
        json_t *m = json_array_get(j, i);
        if (strcmp(json_string_value(json_object_get(m, "name")), "resnet18") == 0) {
            found = true;
            CU_ASSERT_EQUAL(json_integer_value(json_object_get(m, "params")), 11689512);
        }
    }
    CU_ASSERT(found);
    json_decref(j);
    harness_run_free(&r);

    r = harness_npusim("summary", "--model", "resnet5", NULL);
    CU_ASSERT_EQUAL(r.exit_status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "unknown model 'resnet5'; did you mean 'resnet50'?"));
    harness_run_free(&r);
}

TEST(summary_json_has_the_documented_keys_and_consistent_totals)
{
    harness_run r = harness_npusim("summary", "--model", "resnet18", "--json", NULL);
    CU_ASSERT_EQUAL_FATAL(r.exit_status, 0);
    json_t *j = json_loads(r.out, 0, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(j, "model")), "resnet18");
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(j, "total_params")), 11689512);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(j, "trainable_params")), 11689512);
    json_int_t fwd = json_integer_value(json_object_get(j, "forward_flops"));
    CU_ASSERT(json_integer_value(json_object_get(j, "train_step_flops")) > 2 * fwd);
    json_t *layers = json_object_get(j, "layers");
    json_int_t p = 0, f = 0, tf = 0;
    for (size_t i = 0; i < json_array_size(layers); i++) {
        json_t *l = json_array_get(layers, i);
        CU_ASSERT_PTR_NOT_NULL(json_string_value(json_object_get(l, "name")));
        CU_ASSERT_PTR_NOT_NULL(json_string_value(json_object_get(l, "op")));
        CU_ASSERT(json_is_array(json_object_get(l, "output_shape")));
        p += json_integer_value(json_object_get(l, "params"));
        f += json_integer_value(json_object_get(l, "flops"));
        tf += json_integer_value(json_object_get(l, "train_flops"));
        CU_ASSERT(json_integer_value(json_object_get(l, "train_flops")) >=
                  json_integer_value(json_object_get(l, "flops")));
    }
    CU_ASSERT_EQUAL(tf, json_integer_value(json_object_get(j, "train_step_flops")));
    CU_ASSERT_EQUAL(p, 11689512);
    CU_ASSERT_EQUAL(f, fwd);
    json_t *mem = json_object_get(j, "memory");
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(mem, "parameters_bytes")), 4 * 11689512);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(mem, "optimizer_state_bytes")), 8 * 11689512);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(mem, "inputs_bytes")), 4 * 3 * 224 * 224 + 4);
    CU_ASSERT(json_integer_value(json_object_get(mem, "activation_arena_bytes")) <
              json_integer_value(json_object_get(mem, "no_reuse_bytes")));
    /* conv1: 64 x 3 x 7 x 7 weights, output [1,64,112,112] */
    json_t *conv1 = json_array_get(layers, 0);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(conv1, "name")), "conv1");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(conv1, "op")), "conv2d");
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(conv1, "params")), 64 * 3 * 7 * 7);
    CU_ASSERT_EQUAL(json_integer_value(json_array_get(json_object_get(conv1, "output_shape"), 2)), 112);
    json_decref(j);
    harness_run_free(&r);
}

TEST(summary_text_shows_layers_and_totals_and_honours_batch_and_seq)
{
    harness_run r = harness_npusim("summary", "--model", "gpt2-small", "--batch", "2", "--seq",
                                   "128", NULL);
    CU_ASSERT_EQUAL_FATAL(r.exit_status, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "h.11.mlp.c_fc"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "[2, 128, 3072]"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "Total params: 124,439,808"));
    harness_run_free(&r);

    r = harness_npusim("summary", "--model", "gpt2-small", "--seq", "4096", NULL);
    CU_ASSERT_EQUAL(r.exit_status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "sequence length 4096 exceeds the context of 1024"));
    harness_run_free(&r);

    r = harness_npusim("summary", "--model", harness_src_path("tests/data/models/unknown_key.model"), NULL);
    CU_ASSERT_EQUAL(r.exit_status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "unknown_key.model:4:1: unknown key 'layer'"));
    harness_run_free(&r);
}

TEST(model_loops_are_unrolled_with_fresh_node_identities_per_layer)
{
    nn_model_desc d;
    nn_model m;
    np_err e = {0};
    nn_model_opts o = {0};
    CU_ASSERT_EQUAL_FATAL(nn_model_load("gpt-tiny", &d, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(nn_model_build(&d, &o, &m, &e), NP_OK);
    int n = nn_graph_n_nodes(m.g), per_layer[2] = {0, 0};
    for (int i = 0; i < n; i++) {
        const nn_tensor *t = nn_graph_node(m.g, i);
        CU_ASSERT(i == 0 || t->id > nn_graph_node(m.g, i - 1)->id); /* unique, increasing */
        if (t->layer >= 0 && t->layer < 2)
            per_layer[t->layer]++;
    }
    CU_ASSERT(per_layer[0] > 20);
    CU_ASSERT_EQUAL(per_layer[0], per_layer[1]); /* the loop body, once per layer */
    CU_ASSERT_PTR_NOT_NULL(nn_graph_find(m.g, "h.0.attn.c_attn.weight"));
    CU_ASSERT_PTR_NOT_NULL(nn_graph_find(m.g, "h.1.attn.c_attn.weight"));
    CU_ASSERT_NOT_EQUAL(nn_graph_find(m.g, "h.0.mlp.c_fc.weight"), nn_graph_find(m.g, "h.1.mlp.c_fc.weight"));
    nn_graph_free(m.g);
}

/* One conv or linear layer of torchvision's resnet50 by hand: params, torchinfo's Mult-Adds
 * (params x batch x output pixels for a conv, params x batch for a linear) and output
 * elements. */
typedef struct ti_layer {
    int64_t params, mult_adds, out;
} ti_layer;

static int ti_resnet50(ti_layer *l)
{
    int n = 0;
    l[n++] = (ti_layer){3 * 64 * 49, 3 * 64 * 49 * 112 * 112, 64 * 112 * 112}; /* conv1 */
    static const int blocks[4] = {3, 4, 6, 3};
    int64_t cin = 64;
    for (int s = 0; s < 4; s++) {
        int64_t w = 64 << s, hw = 56 >> s, hw_in = s ? 2 * hw : hw;
        for (int b = 0; b < blocks[s]; b++) {
            int64_t in = b ? 4 * w : cin, hw1 = b ? hw : hw_in; /* v1.5: stride on conv2 */
            l[n++] = (ti_layer){in * w, in * w * hw1 * hw1, w * hw1 * hw1};         /* conv1 */
            l[n++] = (ti_layer){9 * w * w, 9 * w * w * hw * hw, w * hw * hw};       /* conv2 */
            l[n++] = (ti_layer){w * 4 * w, 4 * w * w * hw * hw, 4 * w * hw * hw};   /* conv3 */
            if (!b)
                l[n++] = (ti_layer){in * 4 * w, in * 4 * w * hw * hw, 4 * w * hw * hw}; /* down */
        }
        cin = 4 * w;
    }
    l[n++] = (ti_layer){2048 * 1000 + 1000, 2048 * 1000 + 1000, 1000}; /* fc */
    return n;
}

TEST(resnet50_summary_reads_like_torchinfos_table_for_torchvisions_resnet50)
{
    ti_layer want[64];
    int n = ti_resnet50(want);
    CU_ASSERT_EQUAL_FATAL(n, 54); /* 53 convolutions and the fc layer */
    nn_model_desc d;
    nn_summary s;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(nn_model_load("resnet50", &d, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(nn_summary_build(&d, 1, 0, &s, &e), NP_OK);
    int k = 0;
    int64_t conv_bn_fc_out = 0, bn_params = 0;
    for (int i = 0; i < s.n_rows; i++) {
        const nn_summary_row *r = &s.rows[i];
        bool conv = strcmp(r->type, "Conv2d") == 0, fc = strcmp(r->type, "Linear") == 0;
        if (strcmp(r->type, "BatchNorm2d") == 0) {
            /* torchinfo: weight and bias, 2C params and 2C x batch Mult-Adds */
            CU_ASSERT_EQUAL(r->mult_adds, r->params);
            CU_ASSERT_EQUAL(r->params, 2 * r->ne[1]);
            bn_params += r->params;
            conv_bn_fc_out += r->ne[1] * r->ne[2] * r->ne[3];
        }
        if (!conv && !fc)
            continue;
        CU_ASSERT_FATAL(k < n);
        if (r->params != want[k].params || r->mult_adds != want[k].mult_adds)
            fprintf(stderr, "%s: %lld params, %lld mult-adds; want %lld, %lld\n", r->name,
                    (long long)r->params, (long long)r->mult_adds, (long long)want[k].params,
                    (long long)want[k].mult_adds);
        CU_ASSERT_EQUAL(r->params, want[k].params);
        CU_ASSERT_EQUAL(r->mult_adds, want[k].mult_adds);
        conv_bn_fc_out += want[k].out;
        k++;
    }
    CU_ASSERT_EQUAL(k, n);
    /* torchvision's published totals: 25,557,032 parameters, 4.09 G Mult-Adds at 224 x 224 */
    CU_ASSERT_EQUAL(s.total_params, 25557032);
    CU_ASSERT_EQUAL(s.trainable_params, 25557032);
    CU_ASSERT_EQUAL(s.non_trainable_params, 0);
    int64_t ma = 0;
    for (int i = 0; i < n; i++)
        ma += want[i].mult_adds;
    CU_ASSERT_EQUAL(s.total_mult_adds, ma + bn_params);
    CU_ASSERT_EQUAL((int64_t)(s.total_mult_adds / 1e7 + 0.5), 409); /* "4.09" G */
    /* torchinfo's estimates: input, outputs of the layers with parameters twice, params */
    CU_ASSERT_EQUAL(s.est_input_bytes, 3 * 224 * 224 * 4);
    CU_ASSERT_EQUAL(s.est_fwd_bwd_bytes, (uint64_t)conv_bn_fc_out * 4 * 2);
    CU_ASSERT_EQUAL(s.est_params_bytes, 25557032ull * 4);
    CU_ASSERT_EQUAL((int64_t)(s.est_fwd_bwd_bytes / 1e4 + 0.5), 17783); /* 177.83 MB */
    CU_ASSERT_EQUAL((int64_t)(s.est_total_bytes / 1e4 + 0.5), 28066);   /* 280.66 MB */
    /* the tree: layer1 is a Sequential at depth 1, layer1.0 a Bottleneck at 2-1 */
    bool seq = false, bott = false;
    for (int i = 0; i < s.n_modules; i++) {
        const nn_summary_row *m = &s.modules[i];
        seq |= !strcmp(m->name, "layer1") && !strcmp(m->type, "Sequential") && m->depth == 1;
        bott |= !strcmp(m->name, "layer1.0") && !strcmp(m->type, "Bottleneck") &&
                m->depth == 2 && m->index == 1 && m->params == 75008;
    }
    CU_ASSERT_TRUE(seq);
    CU_ASSERT_TRUE(bott);
    nn_summary_free(&s);
    harness_run r = harness_npusim("summary", "--model", "resnet50", NULL);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "Total params: 25,557,032\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "Total mult-adds (G): 4.09\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "Estimated Total Size (MB): 280.66\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "\xe2\x94\x82    \xe2\x94\x94\xe2\x94\x80"
                                         "Bottleneck: 2-1"));
    harness_run_free(&r);
}

TEST(gpt_summary_rows_show_each_layers_output_not_its_slices_or_flattened_tokens)
{
    nn_model_desc d;
    nn_summary s;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(nn_model_load("gpt2-small", &d, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(nn_summary_build(&d, 2, 16, &s, &e), NP_OK);
    for (int i = 0; i < s.n_rows; i++) {
        const nn_summary_row *r = &s.rows[i];
        if (!strcmp(r->name, "h.3.attn.c_attn")) { /* [B,S,3D], not the v slice [B,S,D] */
            CU_ASSERT_EQUAL(r->ndim, 3);
            CU_ASSERT_EQUAL(r->ne[2], 3 * 768);
            CU_ASSERT_STRING_EQUAL(r->type, "Linear");
        }
        if (!strcmp(r->name, "lm_head")) { /* [B,S,V], not [B*S,V] */
            CU_ASSERT_EQUAL(r->ndim, 3);
            CU_ASSERT_EQUAL(r->ne[0], 2);
            CU_ASSERT_EQUAL(r->ne[1], 16);
            CU_ASSERT_EQUAL(r->ne[2], 50257);
        }
    }
    CU_ASSERT_EQUAL(s.ndim, 3);
    CU_ASSERT_STRING_EQUAL(s.model_type, "GPT2LMHeadModel");
    nn_summary_free(&s);
}

TEST(a_moe_model_plans_and_runs_on_one_chip)
{
    harness_run r = harness_npusim("plan", "--model", "moe-tiny", "--arch", "h100-sxm", "--batch",
                                   "4", "--json", NULL);
    CU_ASSERT_EQUAL(r.exit_status, 0);
    harness_run_free(&r);
    /* every op has its kernel (compiler/kc_moe.c, kc_moe_gmm.c) */
    r = harness_npusim("run", "--model", "moe-tiny", "--arch", "h100-sxm", "--batch", "4", NULL);
    CU_ASSERT_EQUAL(r.exit_status, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "step time"));
    harness_run_free(&r);
}

/* d with `line` appended to its model file's text */
static np_status load_with(const char *name, const char *line, nn_model_desc *d, np_err *e)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s.model", nn_model_dir(), name);
    char *text = harness_read_file(path, NULL);
    if (!text)
        return np_err_set(e, NP_ERR_IO, "cannot read %s", path);
    char buf[8192];
    snprintf(buf, sizeof buf, "%s%s\n", text, line);
    free(text);
    return nn_model_parse(path, buf, d, e);
}

TEST(deepseek_v3s_multi_token_prediction_module_is_an_option_of_the_published_size)
{
    /* num_nextn_predict_layers 1: enorm, hnorm (2 x 7168), eh_proj (14336 x 7168), one MoE
     * layer (that of layers 3..60: 11,507,286,016 by the sums of docs/models.md) and
     * shared_head.norm (7168), the embedding and head shared: 11,610,067,968 more. */
    int64_t base, active, emb;
    counts_of("deepseek-v3", &base, &active, &emb);
    nn_model_desc d;
    nn_model m;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(load_with("deepseek-v3", "mtp = 1", &d, &e), NP_OK);
    nn_model_opts o = {.batch = 1, .seq = 2};
    CU_ASSERT_EQUAL_FATAL(nn_model_build(&d, &o, &m, &e), NP_OK);
    int64_t with = nn_graph_param_count(m.g);
    nn_graph_free(m.g);
    CU_ASSERT_EQUAL(with - base, 2 * 7168 + 14336LL * 7168 + 11507286016LL + 7168);
    /* README_WEIGHTS: "11.5B unique parameters" (the exact sum is 11.61B: the README rounds
     * loosely, as its 685B total of the weights file, 684.5B by these sums, does) */
    CU_ASSERT(fabs((double)(with - base) / 1e9 - 11.5) < 0.15);
    /* a sequence of one token has nothing to predict two ahead */
    o.seq = 1;
    CU_ASSERT_EQUAL(nn_model_build(&d, &o, &m, &e), NP_ERR_RANGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "multi-token prediction depth 1 needs a sequence"));
    nn_graph_free(m.g);
}
