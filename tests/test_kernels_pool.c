/* test_kernels_pool.c — the pooling kernels (compiler/kc_pool.c): maxpool2d, avgpool2d and
 * their gradients against the framework's reference executor on odd shapes (channels, image
 * sides and windows that are not multiples of the lanes), overlapping and padded windows,
 * ties (the first maximum in scan order gets the gradient), every float type, channel blocks
 * with an edge block, one and two cores; the traffic is every operand once; errors. */
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

/* Quarter integers in [-2, 2]: exact in every float type, sums of a few exact in fp32, and
 * many ties among a window's elements. */
static void fill(nn_tensor *t, rng *g)
{
    CU_ASSERT_FATAL(nn_tensor_alloc(t));
    for (int64_t i = 0; i < nn_numel(t); i++)
        t->data[i] = (float)((int)rng_below(g, 17) - 8) / 4.0f;
}

/* NHWC strides of an [N, C, H, W] kernel operand. */
static void nhwc(kc_tensor *t)
{
    int64_t e = (int64_t)nn_dtype_size(t->dtype), C = t->shape[1], H = t->shape[2],
            W = t->shape[3];
    t->stride[1] = e, t->stride[3] = C * e, t->stride[2] = W * C * e, t->stride[0] = H * W * C * e;
}

typedef struct pool_case {
    int64_t N, C, H, W, k, s, p;
    nn_dtype dt;
    uint32_t cores;
    int64_t cblock;
} pool_case;

/* Runs op's kernel on seeded values against its reference; exact for max (and the max
 * gradient: its sums are of quarters), within an ulp of the type for the averages. */
static void check_pool_in(const arch_config *cfg, nn_op op, const pool_case *c, rng *g,
                          bool nchw)
{
    np_err err = {0};
    nn_graph *gr = nn_graph_new(1);
    int64_t OH = (c->H + 2 * c->p - c->k) / c->s + 1, OW = (c->W + 2 * c->p - c->k) / c->s + 1;
    bool grad = op == NN_OP_MAXPOOL2D_GRAD || op == NN_OP_AVGPOOL2D_GRAD;
    nn_tensor *x = nn_input(gr, "x", c->dt, 4, DIMS(c->N, c->C, c->H, c->W));
    nn_tensor *dy = nn_input(gr, "dy", c->dt, 4, DIMS(c->N, c->C, OH, OW));
    fill(x, g);
    fill(dy, g);
    kc_kernel k = {.op = op, .n_out = 1, .place = {0, 0, c->cores}, .n_attrs = 4};
    k.attrs[0] = KC_INT("kernel", c->k);
    k.attrs[1] = KC_INT("stride", c->s);
    k.attrs[2] = KC_INT("pad", c->p);
    k.attrs[3] = KC_INT("cblock", c->cblock);
    nn_tensor *in[2];
    if (op == NN_OP_MAXPOOL2D_GRAD)
        k.n_in = 2, in[0] = x, in[1] = dy;
    else if (op == NN_OP_AVGPOOL2D_GRAD)
        k.n_in = 1, in[0] = dy;
    else
        k.n_in = 1, in[0] = x;
    for (int i = 0; i < k.n_in; i++) {
        kc_tensor_of(&k.in[i], 0, in[i]);
        if (!nchw)
            nhwc(&k.in[i]);
    }
    if (grad) /* the reference reads the output's H and W */
        kc_tensor_of(&k.out[0], 0, x);
    nn_tensor *want = NULL;
    CU_ASSERT_EQUAL_FATAL(kc_kernel_find(op)->reference(gr, &k, in, &want, &err), NP_OK);
    CU_ASSERT_EQUAL_FATAL(nn_graph_compute(gr, &err), NP_OK);
    nn_tensor *got = nn_input(gr, "got", c->dt, 4, want->ne);
    kc_tensor_of(&k.out[0], 0, got);
    if (!nchw)
        nhwc(&k.out[0]);
    krun_io io = {.in = {in[0], in[1]}, .out = {got}};
    krun_result r;
    np_status st = krun_kernel(cfg, &k, &io, &(krun_opts){.functional = true}, &r, &err);
    if (st != NP_OK)
        fprintf(stderr, "%s: %s\n", nn_op_name(op), err.msg);
    CU_ASSERT_EQUAL_FATAL(st, NP_OK);
    bool avg = op == NN_OP_AVGPOOL2D || op == NN_OP_AVGPOOL2D_GRAD;
    double u = c->dt == NN_BF16 ? 1.0 / 128 : c->dt == NN_F16 ? 1.0 / 1024 : 1.0 / 4194304;
    krun_diff d = krun_compare(got, want, avg ? u : 0, avg ? 1e-6 : 0);
    if (d.bad || getenv("KP_DEBUG"))
        fprintf(stderr, "%s %s %lldx%lldx%lldx%lld k%lld s%lld p%lld cb%lld on %u: %lld of %lld "
                "off (worst %g at %lld: %g, not %g)\n", nn_op_name(op), nn_dtype_name(c->dt),
                (long long)c->N, (long long)c->C, (long long)c->H, (long long)c->W,
                (long long)c->k, (long long)c->s, (long long)c->p, (long long)c->cblock,
                c->cores, (long long)d.bad, (long long)d.n, d.max_abs, (long long)d.worst,
                d.n ? got->data[d.worst] : 0, d.n ? want->data[d.worst] : 0);
    CU_ASSERT_EQUAL(d.bad, 0);
    /* every operand once */
    CU_ASSERT_EQUAL(r.report->hbm_read_bytes, r.kernel.hbm_read_bytes);
    CU_ASSERT_EQUAL(r.report->hbm_write_bytes, r.kernel.hbm_write_bytes);
    CU_ASSERT_EQUAL(r.kernel.hbm_read_bytes + r.kernel.hbm_write_bytes, r.kernel.hbm_bytes_min);
    krun_result_free(&r);
    nn_graph_free(gr);
}

/* Channels-last operands (the kernels' own layout). */
static void check_pool(const arch_config *cfg, nn_op op, const pool_case *c, rng *g)
{
    check_pool_in(cfg, op, c, g, false);
}

static const pool_case pool_cases[] = {
    {2, 5, 11, 9, 3, 2, 1, NN_F32, 1, 0},   /* padded, overlapping */
    {2, 5, 11, 9, 2, 2, 0, NN_BF16, 1, 0},  /* tiling windows */
    {1, 3, 7, 10, 3, 1, 1, NN_F16, 2, 0},   /* stride 1 */
    {3, 7, 13, 8, 5, 3, 2, NN_BF16, 2, 3},  /* channel blocks of 3, 3 and 1; three images */
    {1, 6, 6, 6, 4, 2, 2, NN_F32, 1, 4},    /* pad half the kernel */
};

TEST(pooling_forward_kernels_equal_the_reference)
{
    arch_config cfg = tiny();
    rng g;
    rng_seed(&g, 11);
    for (size_t i = 0; i < sizeof pool_cases / sizeof pool_cases[0]; i++) {
        check_pool(&cfg, NN_OP_MAXPOOL2D, &pool_cases[i], &g);
        check_pool(&cfg, NN_OP_AVGPOOL2D, &pool_cases[i], &g);
    }
}

TEST(pooling_gradient_kernels_equal_the_reference_ties_to_the_first_maximum)
{
    arch_config cfg = tiny();
    rng g;
    rng_seed(&g, 12);
    for (size_t i = 0; i < sizeof pool_cases / sizeof pool_cases[0]; i++) {
        check_pool(&cfg, NN_OP_MAXPOOL2D_GRAD, &pool_cases[i], &g);
        check_pool(&cfg, NN_OP_AVGPOOL2D_GRAD, &pool_cases[i], &g);
    }
}

TEST(pooling_kernels_take_the_frameworks_nchw_layout_as_images_of_one_channel)
{
    /* every case and op with the operands dense [N, C, H, W] as the framework holds them */
    arch_config cfg = tiny();
    rng g;
    rng_seed(&g, 13);
    const nn_op ops[4] = {NN_OP_MAXPOOL2D, NN_OP_AVGPOOL2D, NN_OP_MAXPOOL2D_GRAD,
                          NN_OP_AVGPOOL2D_GRAD};
    for (size_t i = 0; i < sizeof pool_cases / sizeof pool_cases[0]; i++) {
        pool_case c = pool_cases[i];
        c.cblock = 0;
        for (int o = 0; o < 4; o++)
            check_pool_in(&cfg, ops[o], &c, &g, true);
    }
}

/* Instructions of op's kernel on n images of c channels (cblock cb), timing only. */
static uint64_t pool_insns(const arch_config *cfg, nn_op op, int64_t n, int64_t c, int64_t hw,
                           int64_t cb)
{
    np_err err = {0};
    kc_prog *p;
    CU_ASSERT_EQUAL_FATAL(kc_prog_new(cfg, &(kc_prog_opts){.cores = 1}, &p, &err), NP_OK);
    kc_spec s;
    char text[160];
    snprintf(text, sizeof text, "%s shape=%lldx%lldx%lldx%lld kernel=3 stride=2 pad=1 cblock=%lld",
             nn_op_name(op), (long long)n, (long long)c, (long long)hw, (long long)hw,
             (long long)cb);
    CU_ASSERT_EQUAL_FATAL(kc_spec_parse(text, &s, &err), NP_OK);
    kc_kernel k;
    CU_ASSERT_EQUAL_FATAL(kc_spec_kernel(p, &s, &k, &err), NP_OK);
    kc_result r;
    np_status st = kc_compile(p, &k, &r, &err);
    if (st != NP_OK)
        fprintf(stderr, "%s: %s\n", text, err.msg);
    CU_ASSERT_EQUAL(st, NP_OK);
    kc_prog_free(p);
    return r.insns;
}

TEST(pooling_program_size_does_not_grow_with_images_rows_or_channel_blocks)
{
    arch_config cfg = tiny();
    nn_op ops[4] = {NN_OP_MAXPOOL2D, NN_OP_AVGPOOL2D, NN_OP_MAXPOOL2D_GRAD, NN_OP_AVGPOOL2D_GRAD};
    for (int o = 0; o < 4; o++) {
        /* 3 x 3 tiles (channel blocks x images) and 5 x 7 tiles; 9 and 13 rows */
        uint64_t a = pool_insns(&cfg, ops[o], 3, 9, 9, 3);
        CU_ASSERT_EQUAL(pool_insns(&cfg, ops[o], 7, 15, 9, 3), a);
        CU_ASSERT_EQUAL(pool_insns(&cfg, ops[o], 3, 9, 13, 3), a);
    }
}

TEST(bad_pooling_kernels_are_errors_naming_what_is_wrong)
{
    arch_config cfg = tiny();
    np_err err = {0};
    krun_result r;
    kc_kernel k = {.op = NN_OP_MAXPOOL2D, .n_in = 1, .n_out = 1, .n_attrs = 1,
                   .attrs = {KC_INT("kernel", 3)}};
    kc_tensor_dense(&k.in[0], 0, NN_BF16, 4, DIMS(1, 4, 9, 9));
    kc_tensor_dense(&k.out[0], 0, NN_BF16, 4, DIMS(1, 4, 3, 3));
    nhwc(&k.in[0]);
    nhwc(&k.out[0]);
    CU_ASSERT_EQUAL(krun_kernel(&cfg, &k, NULL, NULL, &r, &err), NP_OK);
    krun_result_free(&r);
    kc_kernel bad = k; /* NCHW */
    kc_tensor_dense(&bad.in[0], 0, NN_BF16, 4, DIMS(1, 4, 9, 9));
    CU_ASSERT_EQUAL(krun_kernel(&cfg, &bad, NULL, NULL, &r, &err), NP_ERR_INCONSISTENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "maxpool2d: x must be channels-last"));
    bad = k; /* an output of the wrong size */
    kc_tensor_dense(&bad.out[0], 0, NN_BF16, 4, DIMS(1, 4, 4, 4));
    nhwc(&bad.out[0]);
    CU_ASSERT_EQUAL(krun_kernel(&cfg, &bad, NULL, NULL, &r, &err), NP_ERR_INCONSISTENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "out must be [1, 4, 3, 3]"));
    bad = k; /* padding more than half the window */
    bad.n_attrs = 2, bad.attrs[1] = KC_INT("pad", 2);
    CU_ASSERT_EQUAL(krun_kernel(&cfg, &bad, NULL, NULL, &r, &err), NP_ERR_RANGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "pad at most half the kernel"));
    bad = k; /* an image that does not fit even one channel at a time */
    kc_tensor_dense(&bad.in[0], 0, NN_F32, 4, DIMS(1, 2, 120, 120));
    kc_tensor_dense(&bad.out[0], 0, NN_F32, 4, DIMS(1, 2, 40, 40));
    nhwc(&bad.in[0]);
    nhwc(&bad.out[0]);
    CU_ASSERT_EQUAL(krun_kernel(&cfg, &bad, NULL, NULL, &r, &err), NP_ERR_RANGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "scratchpad bytes, more than the"));
}

/* Semaphores alone order every buffer's reuse: no operand scoreboard, four copies in flight. */
TEST(pooling_values_hold_with_semaphores_alone_and_copies_in_flight)
{
    arch_config cfg;
    np_err e = {0};
    const char *sets[] = {"core.scoreboard=0", "core.dma_outstanding=4"};
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tiny", sets, 2, &cfg, &e), NP_OK);
    rng g;
    rng_seed(&g, 13);
    nn_op ops[4] = {NN_OP_MAXPOOL2D, NN_OP_AVGPOOL2D, NN_OP_MAXPOOL2D_GRAD, NN_OP_AVGPOOL2D_GRAD};
    for (int o = 0; o < 4; o++)
        check_pool(&cfg, ops[o], &pool_cases[3], &g);
}
