/* test_moe_route.c — routing distributions of timing runs (framework/moe_route.c) against
 * hand-computed counts: uniform is even, skew's busiest expert gets the Zipf share worked out
 * here, the cap of one assignment per token, the same seed the same counts, histogram files
 * and their errors (file and line). */
#include <stdbool.h>
#include <string.h>

#include "harness.h"
#include "model.h"
#include "moe_route.h"
#include "nn.h"

static int64_t sum(const int64_t *c, int64_t n)
{
    int64_t s = 0;
    for (int64_t i = 0; i < n; i++)
        s += c[i];
    return s;
}

TEST(uniform_routing_is_even_and_sums_to_tokens_times_k)
{
    nn_moe_route_spec s = nn_moe_route_uniform();
    np_err e = {0};
    int64_t c[8];
    CU_ASSERT_EQUAL_FATAL(nn_moe_route_counts(&s, 0, 1000, 2, 8, c, &e), NP_OK);
    for (int i = 0; i < 8; i++)
        CU_ASSERT_EQUAL(c[i], 250);
    /* 10 tokens x 3 = 30 over 8: 4 each, the first 6 one more */
    CU_ASSERT_EQUAL_FATAL(nn_moe_route_counts(&s, 3, 10, 3, 8, c, &e), NP_OK);
    CU_ASSERT_EQUAL(sum(c, 8), 30);
    for (int i = 0; i < 8; i++)
        CU_ASSERT_EQUAL(c[i], i < 6 ? 4 : 3);
}

/* S = 1, 4 experts: weights 1, 1/2, 1/3, 1/4 (sum 25/12), so of 1000 x 2 = 2000 assignments
 * the busiest gets 2000 x 12/25 = 960, then 480, 320, 240 (in some expert order). */
TEST(skew_gives_the_busiest_expert_its_zipf_share)
{
    nn_moe_route_spec s;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(nn_moe_route_parse("skew:1", 42, &s, &e), NP_OK);
    CU_ASSERT_EQUAL(s.kind, NN_ROUTE_SKEW);
    int64_t c[4], sorted[4] = {0};
    CU_ASSERT_EQUAL_FATAL(nn_moe_route_counts(&s, 0, 1000, 2, 4, c, &e), NP_OK);
    CU_ASSERT_EQUAL(sum(c, 4), 2000);
    for (int i = 0; i < 4; i++) { /* the counts as a set */
        int r = 0;
        for (int j = 0; j < 4; j++)
            r += c[j] > c[i];
        sorted[r] = c[i];
    }
    CU_ASSERT_EQUAL(sorted[0], 960);
    CU_ASSERT_EQUAL(sorted[1], 480);
    CU_ASSERT_EQUAL(sorted[2], 320);
    CU_ASSERT_EQUAL(sorted[3], 240);
    /* S = 0 is uniform */
    CU_ASSERT_EQUAL_FATAL(nn_moe_route_parse("skew:0", 42, &s, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(nn_moe_route_counts(&s, 0, 1000, 2, 4, c, &e), NP_OK);
    for (int i = 0; i < 4; i++)
        CU_ASSERT_EQUAL(c[i], 500);
}

/* S = 3, 4 experts, 100 tokens top-2: the Zipf share of rank 0 is 200 x 1 / (1 + 1/8 + 1/27 +
 * 1/64) = 169.8, past the 100 a token can give: it gets 100, and the other 100 go to ranks
 * 1..3 by 1/8 : 1/27 : 1/64 = 216 : 64 : 27 of 307 -> 70.36, 20.85, 8.79 -> 70, 21, 9. */
TEST(skew_caps_an_expert_at_one_assignment_per_token)
{
    nn_moe_route_spec s;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(nn_moe_route_parse("skew:3", 1, &s, &e), NP_OK);
    int64_t c[4];
    CU_ASSERT_EQUAL_FATAL(nn_moe_route_counts(&s, 0, 100, 2, 4, c, &e), NP_OK);
    int64_t want[4] = {100, 70, 21, 9};
    for (int w = 0; w < 4; w++) {
        int hits = 0;
        for (int i = 0; i < 4; i++)
            hits += c[i] == want[w];
        CU_ASSERT_EQUAL(hits, 1);
    }
}

TEST(the_same_seed_gives_the_same_counts_and_layers_their_own_busiest_expert)
{
    nn_moe_route_spec a, b, d;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(nn_moe_route_parse("skew:1.2", 7, &a, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(nn_moe_route_parse("skew:1.2", 7, &b, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(nn_moe_route_parse("skew:1.2", 8, &d, &e), NP_OK);
    int64_t ca[64], cb[64], cd[64];
    bool seed_differs = false, layer_differs = false;
    for (int l = 0; l < 8; l++) {
        CU_ASSERT_EQUAL_FATAL(nn_moe_route_counts(&a, l, 4096, 8, 64, ca, &e), NP_OK);
        CU_ASSERT_EQUAL_FATAL(nn_moe_route_counts(&b, l, 4096, 8, 64, cb, &e), NP_OK);
        CU_ASSERT_EQUAL_FATAL(nn_moe_route_counts(&d, l, 4096, 8, 64, cd, &e), NP_OK);
        CU_ASSERT_EQUAL(memcmp(ca, cb, sizeof ca), 0);
        CU_ASSERT_EQUAL(sum(ca, 64), 4096 * 8);
        seed_differs |= memcmp(ca, cd, sizeof ca) != 0;
        int64_t c0[64];
        CU_ASSERT_EQUAL_FATAL(nn_moe_route_counts(&a, 0, 4096, 8, 64, c0, &e), NP_OK);
        layer_differs |= l > 0 && memcmp(ca, c0, sizeof ca) != 0;
    }
    CU_ASSERT(seed_differs);
    CU_ASSERT(layer_differs);
}

TEST(a_histogram_file_gives_each_moe_layer_its_shares)
{
    nn_moe_route_spec s;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(nn_moe_route_parse_hist("h.txt", "# measured\n1 1 2 4\n\n3 0 0 1  # l1\n",
                                                  &s, &e), NP_OK);
    CU_ASSERT_EQUAL(s.n_hist, 2);
    int64_t c[4];
    CU_ASSERT_EQUAL_FATAL(nn_moe_route_counts(&s, 0, 80, 1, 4, c, &e), NP_OK);
    CU_ASSERT(c[0] == 10 && c[1] == 10 && c[2] == 20 && c[3] == 40);
    /* 3 : 1 of 80 x 2 = 160 gives 120, past 80: capped, the other 80 to expert 3 */
    CU_ASSERT_EQUAL_FATAL(nn_moe_route_counts(&s, 1, 80, 2, 4, c, &e), NP_OK);
    CU_ASSERT(c[0] == 80 && c[1] == 0 && c[2] == 0 && c[3] == 80);
    /* no histogram for layer 2; another expert count: errors naming the file and line */
    CU_ASSERT_EQUAL(nn_moe_route_counts(&s, 2, 80, 1, 4, c, &e), NP_ERR_INCONSISTENT);
    CU_ASSERT_STRING_EQUAL(e.file, "h.txt");
    CU_ASSERT_EQUAL(e.line, 4);
    CU_ASSERT_EQUAL(nn_moe_route_counts(&s, 0, 80, 1, 8, c, &e), NP_ERR_INCONSISTENT);
    CU_ASSERT_EQUAL(e.line, 2);
    nn_moe_route_spec_free(&s);
    /* one line: every layer */
    CU_ASSERT_EQUAL_FATAL(nn_moe_route_parse_hist("one", "1 3\n", &s, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(nn_moe_route_counts(&s, 5, 8, 1, 2, c, &e), NP_OK);
    CU_ASSERT(c[0] == 2 && c[1] == 6);
    nn_moe_route_spec_free(&s);
}

TEST(bad_routing_values_and_files_are_errors_naming_where)
{
    nn_moe_route_spec s;
    np_err e = {0};
    CU_ASSERT_NOT_EQUAL(nn_moe_route_parse("skew:x", 0, &s, &e), NP_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "skew"));
    CU_ASSERT_EQUAL(nn_moe_route_parse_hist("f", "1 2\n1 2 3\n", &s, &e), NP_ERR_INCONSISTENT);
    CU_ASSERT_EQUAL(e.line, 2);
    nn_moe_route_spec_free(&s);
    CU_ASSERT_EQUAL(nn_moe_route_parse_hist("f", "1 2\n1 -2\n", &s, &e), NP_ERR_RANGE);
    CU_ASSERT_EQUAL(e.line, 2);
    nn_moe_route_spec_free(&s);
    CU_ASSERT_EQUAL(nn_moe_route_parse_hist("f", "0 0\n", &s, &e), NP_ERR_RANGE);
    nn_moe_route_spec_free(&s);
    CU_ASSERT_EQUAL(nn_moe_route_parse_hist("f", "# nothing\n", &s, &e), NP_ERR_SYNTAX);
    nn_moe_route_spec_free(&s);
    CU_ASSERT_EQUAL(nn_moe_route_parse("/nonexistent/h.txt", 0, &s, &e), NP_ERR_IO);
    nn_moe_route_spec_free(&s);
    int64_t c[4];
    CU_ASSERT_EQUAL(nn_moe_route_counts(&s, 0, 10, 5, 4, c, &e), NP_ERR_RANGE);
}

/* moe-tiny (2 MoE layers, 3 grouped matmuls each): marking gives every grouped matmul the
 * routing, and the layer of its indices' name ("layers.N..."), each layer its own */
TEST(marking_a_graph_gives_every_grouped_matmul_the_routing_and_its_layer)
{
    nn_model_desc d;
    nn_model m;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(nn_model_load("moe-tiny", &d, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(nn_model_build(&d, &(nn_model_opts){.batch = 2, .seq = 4}, &m, &e),
                          NP_OK);
    nn_moe_route_spec s = {.kind = NN_ROUTE_SKEW, .skew = 1.5, .seed = 77};
    CU_ASSERT_EQUAL_FATAL(nn_moe_route_mark(m.g, &s, &e), NP_OK);
    int gmm = 0, per_layer[2] = {0};
    for (int i = 0; i < nn_graph_n_nodes(m.g); i++) {
        nn_tensor *t = nn_graph_node(m.g, i);
        if (t->op != NN_OP_MOE_GMM)
            continue;
        gmm++;
        CU_ASSERT_EQUAL(t->ip[3], 2); /* skew */
        CU_ASSERT_EQUAL(t->ip[4], 77);
        CU_ASSERT_EQUAL(t->fp[0], 1.5);
        CU_ASSERT(t->ip[5] == 0 || t->ip[5] == 1);
        if (t->ip[5] == 0 || t->ip[5] == 1)
            per_layer[t->ip[5]]++;
    }
    CU_ASSERT_EQUAL(gmm, 6);
    CU_ASSERT_EQUAL(per_layer[0], 3);
    CU_ASSERT_EQUAL(per_layer[1], 3);
    /* a histogram file: refused, naming it */
    nn_moe_route_spec f;
    CU_ASSERT_EQUAL_FATAL(nn_moe_route_parse_hist("h.txt", "1 1\n", &f, &e), NP_OK);
    CU_ASSERT_EQUAL(nn_moe_route_mark(m.g, &f, &e), NP_ERR_INCONSISTENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "h.txt"));
    nn_moe_route_spec_free(&f);
    nn_graph_free(m.g);
}
