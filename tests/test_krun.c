/* test_krun.c — the kernel checker of sim/krun.h: krun_compare on hand-made values
 * (infinities and NaN, the bound's edge), and krun_kernel_check's tolerances — per output
 * of a multi-output kernel, each kernel's documented bound, finite when the reference holds
 * -inf — and its reference of every epilogue step, the fused chains' too. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "kernel.h"
#include "krun.h"

static arch_config tiny(void)
{
    arch_config cfg;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tiny", NULL, 0, &cfg, &e), NP_OK);
    return cfg;
}

/* Tensors got, want of n fp32 values. */
static void pair(nn_graph *g, int n, const float *gv, const float *wv, nn_tensor **got,
                 nn_tensor **want)
{
    *got = nn_input(g, "got", NN_F32, 1, (int64_t[]){n});
    *want = nn_input(g, "want", NN_F32, 1, (int64_t[]){n});
    CU_ASSERT_FATAL(nn_tensor_alloc(*got) && nn_tensor_alloc(*want));
    memcpy((*got)->data, gv, (size_t)n * sizeof *gv);
    memcpy((*want)->data, wv, (size_t)n * sizeof *wv);
}

TEST(compare_counts_differing_infinities_and_nan_and_the_bounds_edge_by_hand)
{
    nn_graph *g = nn_graph_new(1);
    nn_tensor *got, *want;
    /* equal infinities and NaNs agree; 1.5 vs 1 is exactly atol 0.25 + rtol 0.25 x 1 */
    const float ok_g[5] = {-INFINITY, INFINITY, NAN, 1.5f, 0};
    const float ok_w[5] = {-INFINITY, INFINITY, NAN, 1.0f, 0};
    pair(g, 5, ok_g, ok_w, &got, &want);
    krun_diff d = krun_compare(got, want, 0.25, 0.25);
    CU_ASSERT_EQUAL(d.n, 5);
    CU_ASSERT_EQUAL(d.bad, 0);
    CU_ASSERT_EQUAL(d.max_abs, 0.5);
    CU_ASSERT_EQUAL(d.worst, 3);
    /* a finite value where the reference is -inf, -inf where it is finite, +inf against
     * -inf, NaN against a number, a number against NaN, and 1.5001 just past the bound: six
     * bad, even with an infinite tolerance for the infinities */
    const float bad_g[6] = {-3, -INFINITY, INFINITY, NAN, 2, 1.5001f};
    const float bad_w[6] = {-INFINITY, 7, -INFINITY, 1, NAN, 1};
    pair(g, 6, bad_g, bad_w, &got, &want);
    d = krun_compare(got, want, 0.25, 0.25);
    CU_ASSERT_EQUAL(d.bad, 6);
    CU_ASSERT(isinf(d.max_abs));
    CU_ASSERT_EQUAL(d.worst, 0);
    d = krun_compare(got, want, INFINITY, INFINITY);
    CU_ASSERT_EQUAL(d.bad, 5); /* only the finite difference fits an infinite bound */
    nn_graph_free(g);
}

/* krun_kernel_check of an --op spec on tiny's two cores. */
static krun_check check_spec(const char *spec, kc_kernel *k_out)
{
    arch_config cfg = tiny();
    np_err err = {0};
    kc_spec s;
    CU_ASSERT_EQUAL_FATAL(kc_spec_parse(spec, &s, &err), NP_OK);
    kc_prog *p;
    CU_ASSERT_EQUAL_FATAL(kc_prog_new(&cfg, &(kc_prog_opts){.cores = 1}, &p, &err), NP_OK);
    kc_kernel k;
    memset(&k, 0, sizeof k);
    CU_ASSERT_EQUAL_FATAL(kc_spec_kernel(p, &s, &k, &err), NP_OK);
    kc_prog_free(p);
    k.place = (kc_place){0, 0, 2};
    krun_result r;
    krun_check c;
    np_status st = krun_kernel_check(&cfg, &k, 3, NULL, &r, &c, &err);
    if (st != NP_OK)
        fprintf(stderr, "%s: %s\n", spec, err.msg);
    CU_ASSERT_EQUAL_FATAL(st, NP_OK);
    krun_result_free(&r);
    if (k_out)
        *k_out = k;
    return c;
}

TEST(each_output_of_a_kernel_is_checked_against_its_own_documented_bound)
{
    /* attention: out (bf16: 1 ulp x |out| + 2 ulp x max |out|) and lse (1e-5) */
    krun_check c = check_spec("attention shape=1x2x19x6 causal=1 dtype=bf16", NULL);
    CU_ASSERT_EQUAL(c.n_out, 2);
    CU_ASSERT_EQUAL(c.out[0].n, 2 * 19 * 6);
    CU_ASSERT_EQUAL(c.out[1].n, 2 * 19);
    CU_ASSERT_EQUAL(c.n, c.out[0].n + c.out[1].n);
    CU_ASSERT_EQUAL(c.out[0].rtol, 0x1p-7);
    CU_ASSERT(c.out[0].atol > 2 * 0x1p-7 * 0.1 && c.out[0].atol < 2 * 0x1p-7 * 10);
    CU_ASSERT_EQUAL(c.out[1].rtol, 0);
    CU_ASSERT_EQUAL(c.out[1].atol, 1e-5);
    CU_ASSERT_EQUAL(c.bad, 0);
    /* adam: p, m and v, each checked */
    c = check_spec("adam_update shape=37x45 step=1 gdtype=fp32", NULL);
    CU_ASSERT_EQUAL(c.n_out, 3);
    for (int i = 0; i < 3; i++) {
        CU_ASSERT_EQUAL(c.out[i].n, 37 * 45);
        CU_ASSERT_EQUAL(c.out[i].rtol, 0x1p-20);
        CU_ASSERT_EQUAL(c.out[i].bad, 0);
    }
}

TEST(fp32_outputs_get_the_documented_two_to_the_minus_20_and_sums_their_count)
{
    krun_check c = check_spec("softmax shape=5x37 dtype=fp32", NULL);
    CU_ASSERT_EQUAL(c.out[0].rtol, 0x1p-20);
    CU_ASSERT_EQUAL(c.bad, 0);
    /* a sum over 37 values: n x 4 x 2^-23 beyond 1/8 ulp of the largest */
    c = check_spec("reduce_sum shape=37x45 axis=0 dtype=fp32", NULL);
    CU_ASSERT(c.out[0].atol > 37 * 4 * 0x1p-23);
    CU_ASSERT_EQUAL(c.bad, 0);
    /* batch norm: 2^-18 */
    c = check_spec("batchnorm shape=4x3x5x5 dtype=fp32", NULL);
    CU_ASSERT_EQUAL(c.out[0].rtol, 0x1p-18);
    CU_ASSERT_EQUAL(c.bad, 0);
}

TEST(a_reference_holding_minus_infinity_keeps_the_bound_finite)
{
    /* the masked scores are -inf; the tolerance comes from the finite ones */
    krun_check c = check_spec("causal_mask shape=3x21x21 dtype=bf16", NULL);
    CU_ASSERT(isfinite(c.out[0].atol));
    CU_ASSERT(c.out[0].atol > 0 && c.out[0].atol < 0x1p-7 * 10);
    CU_ASSERT_EQUAL(c.bad, 0);
}

TEST(the_reference_applies_every_epilogue_step_of_a_fused_chain)
{
    /* x + y, then cast to fp32, relu6, 0.5 - v (swap), dropout, x scaled, tanh_grad with
     * the running value as dy (swap), causal mask, then cast back: each step's reference is
     * the framework op the kernel computes, so a step the checker got wrong (ignored swap, a
     * missing op) would not match */
    arch_config cfg = tiny();
    np_err err = {0};
    kc_kernel k = {.op = NN_OP_ADD, .n_in = 2, .n_out = 1, .n_epi = 8, .place = {0, 0, 2}};
    int64_t sh[3] = {2, 13, 13};
    kc_tensor_dense(&k.in[0], 0, NN_BF16, 3, sh);
    kc_tensor_dense(&k.in[1], 0, NN_BF16, 3, sh);
    kc_tensor_dense(&k.out[0], 0, NN_BF16, 3, sh);
    k.epi[0] = (kc_epi){.op = NN_OP_CAST, .to = NN_F32};
    k.epi[1] = (kc_epi){.op = NN_OP_RELU, .f = 6};
    k.epi[2] = (kc_epi){.op = NN_OP_SUB, .has_arg = true, .swap = true};
    kc_tensor_dense(&k.epi[2].arg, 0, NN_F32, 1, (int64_t[]){13});
    k.epi[3] = (kc_epi){.op = NN_OP_DROPOUT, .f = 0.25, .seed = 9};
    k.epi[4] = (kc_epi){.op = NN_OP_TANH_GRAD, .has_arg = true, .swap = true};
    kc_tensor_dense(&k.epi[4].arg, 0, NN_F32, 3, sh);
    k.epi[5] = (kc_epi){.op = NN_OP_SCALE, .f = 3};
    k.epi[6] = (kc_epi){.op = NN_OP_CAUSAL_MASK, .f = -INFINITY};
    k.epi[7] = (kc_epi){.op = NN_OP_CAST, .to = NN_BF16};
    krun_result r;
    krun_check c;
    np_status st = krun_kernel_check(&cfg, &k, 5, NULL, &r, &c, &err);
    if (st != NP_OK)
        fprintf(stderr, "%s\n", err.msg);
    CU_ASSERT_EQUAL_FATAL(st, NP_OK);
    krun_result_free(&r);
    CU_ASSERT_EQUAL(c.n, 2 * 13 * 13);
    CU_ASSERT_EQUAL(c.bad, 0);
    CU_ASSERT(isfinite(c.out[0].atol));
}
