/* test_kernels_moe.c — the mixture-of-experts kernels (compiler/kc_moe.c, kc_moe_gmm.c)
 * against the framework's reference executor (framework/op_moe.c) through the simulated ISA,
 * on seeded inputs (expert indices drawn in [0, E): repeats, empty and crowded experts) over
 * both of tiny's cores: topk and the routing layout exactly, dispatch and combine within the
 * dtype's ulp, dropless and with capacity (assignments past C dropped), with and without the
 * routing weights, with more assignments than one block of the layout's prefix sums. */
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "kernel.h"
#include "krun.h"
#include "moe_route.h"

static arch_config tiny(void)
{
    arch_config cfg;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tiny", NULL, 0, &cfg, &e), NP_OK);
    return cfg;
}

/* krun_kernel_check of an --op spec on `cores` of tiny's cores (seed 3): within the kernel's
 * documented tolerance; exact when `exact`. */
static void spec_check(const char *spec, uint32_t cores, bool exact)
{
    arch_config cfg = tiny();
    np_err err = {0};
    kc_spec s;
    CU_ASSERT_EQUAL_FATAL(kc_spec_parse(spec, &s, &err), NP_OK);
    kc_prog *p;
    CU_ASSERT_EQUAL_FATAL(kc_prog_new(&cfg, &(kc_prog_opts){.cores = 1}, &p, &err), NP_OK);
    kc_kernel k;
    np_status st = kc_spec_kernel(p, &s, &k, &err);
    kc_prog_free(p);
    CU_ASSERT_EQUAL_FATAL(st, NP_OK);
    k.place = (kc_place){0, 0, cores};
    krun_result r;
    krun_check c;
    st = krun_kernel_check(&cfg, &k, 3, NULL, &r, &c, &err);
    if (st != NP_OK || c.bad || (exact && c.max_abs != 0))
        fprintf(stderr, "%s: %s (%lld of %lld bad, largest difference %g)\n", spec,
                st ? err.msg : "", (long long)c.bad, (long long)c.n, c.max_abs);
    CU_ASSERT_EQUAL_FATAL(st, NP_OK);
    CU_ASSERT(c.n > 0);
    CU_ASSERT_EQUAL(c.bad, 0);
    if (exact)
        CU_ASSERT_EQUAL(c.max_abs, 0);
    krun_result_free(&r);
}

TEST(topk_picks_the_reference_experts_exactly)
{
    spec_check("topk shape=37x8 k=2 dtype=fp32", 2, true);
    spec_check("topk shape=3x5x64 k=6 dtype=bf16", 2, true);
    spec_check("topk shape=9x16 k=16 dtype=fp32", 1, true); /* every expert, in order */
    /* group-limited (DeepSeek-V3: groups scored by their top 2; V2: their maximum) */
    spec_check("topk shape=37x8 k=3 groups=4 keep=2 group_top=2 dtype=fp32", 2, true);
    spec_check("topk shape=50x64 k=6 groups=8 keep=3 group_top=1 dtype=bf16", 2, true);
}

TEST(dispatch_puts_each_token_in_its_experts_rows)
{
    spec_check("moe_dispatch tokens=37 k=2 d=24 experts=8", 2, true);
    spec_check("moe_dispatch tokens=37 k=3 d=24 experts=8 weighted=1", 2, false);
    /* capacity 3 of 37 x 2 / 8 ~ 9 per expert: most assignments dropped, empty rows zero */
    spec_check("moe_dispatch tokens=37 k=2 d=24 experts=8 capacity=3", 2, true);
    spec_check("moe_dispatch tokens=37 k=2 d=24 experts=8 capacity=12 weighted=1", 1, false);
}

TEST(combine_and_its_gradient_match_the_reference)
{
    spec_check("moe_combine tokens=37 k=2 d=24 experts=8", 2, false);
    spec_check("moe_combine tokens=37 k=2 d=24 experts=8 weighted=1 capacity=4", 2, false);
    spec_check("moe_combine_grad tokens=37 k=3 d=24 experts=8", 2, false);
    spec_check("moe_combine_grad tokens=37 k=2 d=24 experts=8 capacity=6 dtype=fp32", 2, false);
}

/* tiny's 64 KiB scratchpad holds a few hundred assignments per block of the layout's prefix
 * sums: 3,000 assignments take several blocks, each core's carrying the counts before it */
TEST(the_layout_carries_counts_across_blocks_and_cores)
{
    spec_check("moe_dispatch tokens=1500 k=2 d=16 experts=8 weighted=1", 2, false);
    spec_check("moe_combine tokens=1500 k=2 d=16 experts=8 capacity=300 weighted=1", 2, false);
}

TEST(the_grouped_matmul_and_its_weight_gradient_match_the_reference)
{
    /* rows from the indices (dropless: every expert padded, any indices), or with capacity */
    spec_check("moe_gmm tokens=13 k=2 experts=4 kdim=7 fdim=9", 2, false);
    spec_check("moe_gmm tokens=13 k=2 experts=4 kdim=7 fdim=9 trans=1", 2, false);
    spec_check("moe_gmm tokens=13 k=2 experts=4 kdim=7 fdim=9 capacity=5 trans=1", 2, false);
    spec_check("moe_gmm_grad_w tokens=13 k=2 experts=4 kdim=7 fdim=9", 2, false);
    spec_check("moe_gmm_grad_w tokens=13 k=3 experts=4 kdim=7 fdim=9 capacity=6", 2, false);
}

/* A timing run's counts (route 1: uniform, 2 of 8 tokens x 2 choices for each of 8 experts;
 * route 2: skew:2, 5 tokens over 8 experts: some get none) are the routing the kernel is
 * compiled for: indices that route so (assignment i, in token order, to the expert whose run of counts holds
 * it) give the reference's values, an expert without rows a zero gradient. */
static void counts_check(nn_op op, int route, int64_t T, int64_t k, int64_t E)
{
    arch_config cfg = tiny();
    np_err e = {0};
    int64_t K = 6, F = 5, N = T * k, counts[16];
    nn_moe_route_spec s = nn_moe_route_uniform();
    if (route == 2)
        s = (nn_moe_route_spec){.kind = NN_ROUTE_SKEW, .skew = 2, .seed = 9};
    CU_ASSERT_EQUAL_FATAL(nn_moe_route_counts(&s, 1, T, k, E, counts, &e), NP_OK);
    nn_graph *g = nn_graph_new(1);
    nn_tensor *a = nn_input(g, "a", NN_F32, 2, (int64_t[]){N, K});
    nn_tensor *b = op == NN_OP_MOE_GMM ? nn_input(g, "w", NN_F32, 3, (int64_t[]){E, K, F})
                                       : nn_input(g, "b", NN_F32, 2, (int64_t[]){N, F});
    nn_tensor *idx = nn_input(g, "idx", NN_I32, 2, (int64_t[]){T, k});
    nn_tensor *y = nn_node(g, op, 3, (nn_tensor *[]){a, b, idx},
                           (int64_t[NN_MAX_IPARAMS]){E, 0, 0, route, 9, 1},
                           (double[NN_MAX_FPARAMS]){route == 2 ? 2 : 0});
    CU_ASSERT_EQUAL_FATAL(nn_graph_status(g, &e), NP_OK);
    nn_tensor_alloc(a), nn_tensor_alloc(b), nn_tensor_alloc(idx);
    for (int64_t i = 0; i < nn_numel(a); i++)
        a->data[i] = (float)((i * 7) % 11) - 5;
    for (int64_t i = 0; i < nn_numel(b); i++)
        b->data[i] = (float)((i * 5) % 7) - 3;
    for (int64_t ex = 0, i = 0; ex < E; ex++)
        for (int64_t c = 0; c < counts[ex]; c++)
            idx->data[i++] = (float)ex;
    CU_ASSERT_EQUAL_FATAL(nn_graph_compute(g, &e), NP_OK);
    nn_tensor *got = nn_input(g, "got", NN_F32, y->ndim, y->ne);
    kc_kernel kk = {.op = op, .n_in = 3, .n_out = 1, .place = {0, 0, 2}};
    kc_tensor_of(&kk.in[0], 0, a);
    kc_tensor_of(&kk.in[1], 0, b);
    kc_tensor_of(&kk.in[2], 0, idx);
    kc_tensor_of(&kk.out[0], 0, y);
    const kc_kernel_def *d = kc_kernel_find(op);
    CU_ASSERT_EQUAL_FATAL(d->from_node(y, &kk, &e), NP_OK);
    krun_io io = {.in = {a, b, idx}, .out = {got}};
    krun_result r;
    CU_ASSERT_EQUAL_FATAL(krun_kernel(&cfg, &kk, &io, &(krun_opts){.functional = true}, &r, &e),
                          NP_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.kernel.schedule, "a GEMM per expert"));
    krun_diff df = krun_compare(got, y, 1e-6, 1e-6); /* small integers: exact in fp32 */
    if (df.bad)
        fprintf(stderr, "%s route %d: %lld of %lld bad\n", nn_op_name(op), route,
                (long long)df.bad, (long long)df.n);
    CU_ASSERT_EQUAL(df.bad, 0);
    krun_result_free(&r);
    nn_graph_free(g);
}

TEST(with_a_timing_runs_counts_the_grouped_matmul_is_one_gemm_per_expert)
{
    counts_check(NN_OP_MOE_GMM, 1, 8, 2, 8);
    counts_check(NN_OP_MOE_GMM, 2, 9, 2, 5);
    counts_check(NN_OP_MOE_GMM, 2, 5, 1, 8);
    counts_check(NN_OP_MOE_GMM_GRAD_W, 1, 8, 2, 8);
    counts_check(NN_OP_MOE_GMM_GRAD_W, 2, 5, 1, 8); /* 5 assignments of 8 experts */
}
