/* test_kernels_conv.c — the convolution gradients (compiler/kc_convgrad.c): conv2d_grad_input
 * and conv2d_grad_weight against the framework's reference executor on odd shapes (channels,
 * images and filters not multiples of the array or the tiles) with stride, padding, dilation,
 * groups and depthwise, every float type, one and several cores; values are quarter integers,
 * so every sum is exact in fp32 and the kernels must equal the reference exactly. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "harness.h"
#include "kernel.h"
#include "krun.h"
#include "nn.h"
#include "rng.h"

#define DIMS(...) (int64_t[]){__VA_ARGS__}

static arch_config tiny(void)
{
    arch_config cfg;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tiny", NULL, 0, &cfg, &e), NP_OK);
    return cfg;
}

static void fill(nn_tensor *t, rng *g)
{
    CU_ASSERT_FATAL(nn_tensor_alloc(t));
    for (int64_t i = 0; i < nn_numel(t); i++)
        t->data[i] = (float)((int)rng_below(g, 9) - 4) / 4.0f;
}

/* The layouts the conv kernels take: images NHWC, weights [(kh, kw, c)][o]. */
static void nhwc(kc_tensor *t)
{
    int64_t e = (int64_t)nn_dtype_size(t->dtype), C = t->shape[1], H = t->shape[2],
            W = t->shape[3];
    t->stride[1] = e, t->stride[3] = C * e, t->stride[2] = W * C * e, t->stride[0] = H * W * C * e;
}

static void hwio(kc_tensor *t)
{
    int64_t e = (int64_t)nn_dtype_size(t->dtype), O = t->shape[0], C = t->shape[1],
            S = t->shape[3];
    t->stride[0] = e, t->stride[1] = O * e, t->stride[3] = C * O * e, t->stride[2] = S * C * O * e;
}

typedef struct conv_case {
    int64_t N, C, H, W, O, KH, KW, s, p, d, G;
    nn_dtype dt;
    uint32_t cores;
} conv_case;

static void check_grad_in(const arch_config *cfg, nn_op op, const conv_case *c, rng *g,
                          bool nchw)
{
    np_err err = {0};
    nn_graph *gr = nn_graph_new(1);
    int64_t OH = (c->H + 2 * c->p - c->d * (c->KH - 1) - 1) / c->s + 1;
    int64_t OW = (c->W + 2 * c->p - c->d * (c->KW - 1) - 1) / c->s + 1;
    nn_tensor *x = nn_input(gr, "x", c->dt, 4, DIMS(c->N, c->C, c->H, c->W));
    nn_tensor *w = nn_input(gr, "w", c->dt, 4, DIMS(c->O, c->C / c->G, c->KH, c->KW));
    nn_tensor *dy = nn_input(gr, "dy", c->dt, 4, DIMS(c->N, c->O, OH, OW));
    fill(x, g), fill(w, g), fill(dy, g);
    bool wg = op == NN_OP_CONV2D_GRAD_WEIGHT;
    kc_kernel k = {.op = op, .n_in = 2, .n_out = 1, .place = {0, 0, c->cores}, .n_attrs = 4};
    k.attrs[0] = KC_INT("stride", c->s);
    k.attrs[1] = KC_INT("pad", c->p);
    k.attrs[2] = KC_INT("dilation", c->d);
    k.attrs[3] = KC_INT("groups", c->G);
    nn_tensor *in[2] = {wg ? x : dy, wg ? dy : w}, *like = wg ? w : x;
    kc_tensor_of(&k.in[0], 0, in[0]);
    kc_tensor_of(&k.in[1], 0, in[1]);
    kc_tensor_of(&k.out[0], 0, like);
    nn_tensor *want = NULL;
    CU_ASSERT_EQUAL_FATAL(kc_kernel_find(op)->reference(gr, &k, in, &want, &err), NP_OK);
    CU_ASSERT_EQUAL_FATAL(nn_graph_compute(gr, &err), NP_OK);
    nn_tensor *got = nn_input(gr, "got", c->dt, 4, want->ne);
    kc_tensor_of(&k.out[0], 0, got);
    if (nchw) {
        /* the framework's layouts as they are: NCHW images, OIHW filters */
    } else if (wg) {
        nhwc(&k.in[0]), nhwc(&k.in[1]), hwio(&k.out[0]);
    } else {
        nhwc(&k.in[0]), hwio(&k.in[1]), nhwc(&k.out[0]);
    }
    krun_io io = {.in = {in[0], in[1]}, .out = {got}};
    krun_result r;
    np_status st = krun_kernel(cfg, &k, &io, &(krun_opts){.functional = true}, &r, &err);
    if (st != NP_OK)
        fprintf(stderr, "%s: %s\n", nn_op_name(op), err.msg);
    CU_ASSERT_EQUAL_FATAL(st, NP_OK);
    krun_diff d = krun_compare(got, want, 0, 0);
    if (d.bad || getenv("KG_DEBUG"))
        fprintf(stderr, "%s %s N%lld C%lld %lldx%lld O%lld k%lldx%lld s%lld p%lld d%lld g%lld "
                "on %u "
                "(%s): %lld of %lld off (worst %g at %lld: %g, not %g)\n", nn_op_name(op),
                nn_dtype_name(c->dt), (long long)c->N, (long long)c->C, (long long)c->H,
                (long long)c->W, (long long)c->O, (long long)c->KH, (long long)c->KW,
                (long long)c->s, (long long)c->p, (long long)c->d, (long long)c->G, c->cores,
                r.kernel.schedule, (long long)d.bad, (long long)d.n, d.max_abs, (long long)d.worst,
                d.n ? got->data[d.worst] : 0, d.n ? want->data[d.worst] : 0);
    CU_ASSERT_EQUAL(d.bad, 0);
    if (nchw && c->C > 1 && c->O > 1)
        CU_ASSERT_PTR_NOT_NULL(strstr(r.kernel.schedule, "framework layouts permuted"));
    CU_ASSERT_EQUAL(r.report->hbm_read_bytes, r.kernel.hbm_read_bytes);
    CU_ASSERT_EQUAL(r.report->hbm_write_bytes, r.kernel.hbm_write_bytes);
    krun_result_free(&r);
    nn_graph_free(gr);
}

/* The kernels' own layouts: images channels-last, filters [(kh, kw, c)][o]. */
static void check_grad(const arch_config *cfg, nn_op op, const conv_case *c, rng *g)
{
    check_grad_in(cfg, op, c, g, false);
}

static const conv_case conv_cases[] = {
    {2, 5, 7, 6, 6, 3, 3, 1, 1, 1, 1, NN_F32, 1},  /* same padding */
    {1, 3, 9, 8, 5, 3, 2, 2, 1, 1, 1, NN_BF16, 1}, /* stride 2: four phases */
    {2, 4, 8, 9, 6, 3, 3, 1, 2, 2, 2, NN_F16, 2},  /* dilation 2, two groups, two cores */
    {1, 6, 7, 7, 6, 3, 3, 2, 1, 1, 6, NN_BF16, 1}, /* depthwise, stride 2 */
    {1, 3, 6, 5, 2, 1, 1, 3, 0, 1, 1, NN_F32, 1},  /* 1x1 stride 3: phases without taps */
    {2, 9, 10, 11, 10, 5, 5, 2, 2, 1, 1, NN_BF16, 2}, /* 5x5, wide channels */
    {3, 18, 21, 19, 20, 3, 3, 1, 1, 1, 1, NN_BF16, 1}, /* loops: rows, channel and output chunks */
};

TEST(conv2d_grad_input_equals_the_reference_for_strides_pads_dilations_and_groups)
{
    arch_config cfg = tiny();
    rng g;
    rng_seed(&g, 21);
    for (size_t i = 0; i < sizeof conv_cases / sizeof conv_cases[0]; i++)
        check_grad(&cfg, NN_OP_CONV2D_GRAD_INPUT, &conv_cases[i], &g);
}

TEST(conv2d_grad_weight_equals_the_reference_for_strides_pads_dilations_and_groups)
{
    arch_config cfg = tiny();
    rng g;
    rng_seed(&g, 22);
    for (size_t i = 0; i < sizeof conv_cases / sizeof conv_cases[0]; i++)
        check_grad(&cfg, NN_OP_CONV2D_GRAD_WEIGHT, &conv_cases[i], &g);
}

/* Depthwise (groups = channels = outputs) goes to the vector engine of kc_pool.c: channels
 * wider than a tile, several images, pads, dilation and strides, every float type, and the
 * channel blocks (weight gradient) or rows (input gradient) split over cores. */
static const conv_case dw_cases[] = {
    {2, 5, 9, 8, 5, 3, 3, 1, 1, 1, 5, NN_F32, 1},   /* same padding, two images */
    {3, 7, 11, 10, 7, 3, 3, 1, 2, 2, 7, NN_F16, 2}, /* dilation 2, two cores */
    {2, 41, 16, 15, 41, 3, 3, 2, 1, 1, 41, NN_BF16, 2}, /* channel blocks, an edge */
    {1, 4, 12, 13, 4, 5, 5, 3, 2, 1, 4, NN_BF16, 1},  /* 5x5 stride 3 */
    {2, 3, 6, 7, 3, 1, 1, 2, 0, 1, 3, NN_F32, 2},     /* 1x1 stride 2: pixels no tap reaches */
    {5, 33, 8, 8, 33, 3, 3, 1, 0, 1, 33, NN_BF16, 2}, /* no pad, odd images, two cores */
};

TEST(depthwise_gradients_on_the_vector_unit_equal_the_reference)
{
    arch_config cfg = tiny();
    rng g;
    rng_seed(&g, 23);
    for (size_t i = 0; i < sizeof dw_cases / sizeof dw_cases[0]; i++) {
        check_grad(&cfg, NN_OP_CONV2D_GRAD_INPUT, &dw_cases[i], &g);
        check_grad(&cfg, NN_OP_CONV2D_GRAD_WEIGHT, &dw_cases[i], &g);
    }
}

TEST(convolution_gradients_take_the_frameworks_nchw_and_oihw_layouts_through_permute_phases)
{
    /* every case above with dense NCHW images and OIHW filters: converted into scratch
     * buffers, the gradient on them, the result converted back — still exact */
    arch_config cfg = tiny();
    rng g;
    rng_seed(&g, 24);
    for (size_t i = 0; i < sizeof conv_cases / sizeof conv_cases[0]; i++) {
        check_grad_in(&cfg, NN_OP_CONV2D_GRAD_INPUT, &conv_cases[i], &g, true);
        check_grad_in(&cfg, NN_OP_CONV2D_GRAD_WEIGHT, &conv_cases[i], &g, true);
    }
    for (size_t i = 0; i < sizeof dw_cases / sizeof dw_cases[0]; i++) {
        check_grad_in(&cfg, NN_OP_CONV2D_GRAD_INPUT, &dw_cases[i], &g, true);
        check_grad_in(&cfg, NN_OP_CONV2D_GRAD_WEIGHT, &dw_cases[i], &g, true);
    }
}

TEST(convolution_gradients_build_from_their_op_keys_and_compile_any_geometry)
{
    arch_config cfg = tiny();
    const char *specs[] = {
        "conv2d_grad_input n=2 h=9 w=7 c=6 k=4 r=3 s=2 stride=2 stride_w=1 pad=1 pad_w=0 "
        "dilation_w=2 groups=2",
        "conv2d_grad_weight n=2 h=9 w=7 c=6 k=4 r=3 s=2 stride=2 stride_w=1 pad=1 pad_w=0 "
        "dilation_w=2 groups=2 dtype=fp32",
    };
    for (int i = 0; i < 2; i++) {
        np_err err = {0};
        kc_prog *p;
        CU_ASSERT_EQUAL_FATAL(kc_prog_new(&cfg, &(kc_prog_opts){.cores = 2}, &p, &err), NP_OK);
        kc_spec s;
        CU_ASSERT_EQUAL_FATAL(kc_spec_parse(specs[i], &s, &err), NP_OK);
        kc_kernel k;
        CU_ASSERT_EQUAL_FATAL(kc_spec_kernel(p, &s, &k, &err), NP_OK);
        k.place.n_cores = 2;
        kc_result r;
        np_status st = kc_compile(p, &k, &r, &err);
        if (st != NP_OK)
            fprintf(stderr, "%s: %s\n", specs[i], err.msg);
        CU_ASSERT_EQUAL(st, NP_OK);
        CU_ASSERT_EQUAL(r.cores, 2u);
        CU_ASSERT_EQUAL(kc_prog_finish(p, &err), NP_OK);
        kc_prog_free(p);
    }
    /* a per-dimension geometry has no framework reference to check against */
    np_err err = {0};
    krun_result r;
    krun_check chk;
    kc_prog *p;
    CU_ASSERT_EQUAL_FATAL(kc_prog_new(&cfg, &(kc_prog_opts){.cores = 1}, &p, &err), NP_OK);
    kc_spec s;
    CU_ASSERT_EQUAL_FATAL(kc_spec_parse(specs[0], &s, &err), NP_OK);
    kc_kernel k;
    CU_ASSERT_EQUAL_FATAL(kc_spec_kernel(p, &s, &k, &err), NP_OK);
    kc_prog_free(p);
    CU_ASSERT_EQUAL(krun_kernel_check(&cfg, &k, 1, NULL, &r, &chk, &err), NP_ERR_INCONSISTENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "one stride, pad and dilation for both dims"));
}

TEST(bad_convolution_gradients_are_errors_naming_what_is_wrong)
{
    arch_config cfg = tiny();
    np_err err = {0};
    krun_result r;
    kc_kernel k = {.op = NN_OP_CONV2D_GRAD_WEIGHT, .n_in = 2, .n_out = 1, .n_attrs = 1,
                   .attrs = {KC_INT("pad", 1)}};
    kc_tensor_dense(&k.in[0], 0, NN_BF16, 4, DIMS(1, 4, 6, 6));
    kc_tensor_dense(&k.in[1], 0, NN_BF16, 4, DIMS(1, 5, 6, 6));
    kc_tensor_dense(&k.out[0], 0, NN_BF16, 4, DIMS(5, 4, 3, 3));
    nhwc(&k.in[0]), nhwc(&k.in[1]), hwio(&k.out[0]);
    CU_ASSERT_EQUAL(krun_kernel(&cfg, &k, NULL, NULL, &r, &err), NP_OK);
    krun_result_free(&r);
    kc_kernel bad = k; /* dy of the wrong size */
    kc_tensor_dense(&bad.in[1], 0, NN_BF16, 4, DIMS(1, 5, 5, 5));
    nhwc(&bad.in[1]);
    CU_ASSERT_EQUAL(krun_kernel(&cfg, &bad, NULL, NULL, &r, &err), NP_ERR_INCONSISTENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "conv2d_grad_weight: dy must be [1, 5, 6, 6]"));
    bad = k; /* groups that do not divide the channels */
    bad.n_attrs = 2, bad.attrs[1] = KC_INT("groups", 3);
    CU_ASSERT_EQUAL(krun_kernel(&cfg, &bad, NULL, NULL, &r, &err), NP_ERR_INCONSISTENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "do not make 3 groups"));
    bad = k; /* NCHW x: not an error, permuted into a channels-last scratch first */
    kc_tensor_dense(&bad.in[0], 0, NN_BF16, 4, DIMS(1, 4, 6, 6));
    CU_ASSERT_EQUAL(krun_kernel(&cfg, &bad, NULL, NULL, &r, &err), NP_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.kernel.schedule, "framework layouts permuted"));
    krun_result_free(&r);
    bad = k; /* mixed types */
    bad.in[1].dtype = NN_F16;
    CU_ASSERT_EQUAL(krun_kernel(&cfg, &bad, NULL, NULL, &r, &err), NP_ERR_INCONSISTENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "the array multiplies one type"));
    kc_kernel dw = k; /* depthwise: 4 channels, 4 outputs, 4 groups */
    dw.n_attrs = 2, dw.attrs[1] = KC_INT("groups", 4);
    kc_tensor_dense(&dw.in[1], 0, NN_BF16, 4, DIMS(1, 4, 6, 6));
    kc_tensor_dense(&dw.out[0], 0, NN_BF16, 4, DIMS(4, 1, 3, 3));
    nhwc(&dw.in[1]), hwio(&dw.out[0]);
    CU_ASSERT_EQUAL(krun_kernel(&cfg, &dw, NULL, NULL, &r, &err), NP_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.kernel.schedule, "depthwise on the vector unit"));
    krun_result_free(&r);
    bad = dw; /* mixed types */
    bad.in[1].dtype = NN_F16;
    CU_ASSERT_EQUAL(krun_kernel(&cfg, &bad, NULL, NULL, &r, &err), NP_ERR_INCONSISTENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "the vector unit multiplies one type"));
    bad = dw; /* dw as OIHW: computed as [(kh, kw)][c], then permuted into it */
    kc_tensor_dense(&bad.out[0], 0, NN_BF16, 4, DIMS(4, 1, 3, 3));
    CU_ASSERT_EQUAL(krun_kernel(&cfg, &bad, NULL, NULL, &r, &err), NP_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.kernel.schedule, "framework layouts permuted"));
    krun_result_free(&r);
    bad = dw; /* a filter larger than the padded image */
    bad.attrs[0] = KC_INT("pad", 0);
    kc_tensor_dense(&bad.in[0], 0, NN_BF16, 4, DIMS(1, 4, 2, 2));
    kc_tensor_dense(&bad.in[1], 0, NN_BF16, 4, DIMS(1, 4, 1, 1));
    nhwc(&bad.in[0]), nhwc(&bad.in[1]);
    CU_ASSERT_EQUAL(krun_kernel(&cfg, &bad, NULL, NULL, &r, &err), NP_ERR_INCONSISTENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "the filter is larger than the padded image"));
}

/* Semaphores alone order every buffer's reuse: no operand scoreboard, four copies in flight. */
TEST(convolution_gradient_values_hold_with_semaphores_alone_and_copies_in_flight)
{
    arch_config cfg;
    np_err e = {0};
    const char *sets[] = {"core.scoreboard=0", "core.dma_outstanding=4"};
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tiny", sets, 2, &cfg, &e), NP_OK);
    rng g;
    rng_seed(&g, 23);
    for (size_t i = 0; i < sizeof conv_cases / sizeof conv_cases[0]; i += 2) {
        check_grad(&cfg, NN_OP_CONV2D_GRAD_INPUT, &conv_cases[i], &g);
        check_grad(&cfg, NN_OP_CONV2D_GRAD_WEIGHT, &conv_cases[i], &g);
    }
    for (size_t i = 1; i < sizeof dw_cases / sizeof dw_cases[0]; i += 2) {
        check_grad(&cfg, NN_OP_CONV2D_GRAD_INPUT, &dw_cases[i], &g);
        check_grad(&cfg, NN_OP_CONV2D_GRAD_WEIGHT, &dw_cases[i], &g);
    }
}
