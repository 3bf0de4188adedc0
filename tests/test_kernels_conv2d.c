/* test_kernels_conv2d.c — the conv2d kernel (compiler/kc_conv.c) run functionally on the core
 * model (sim/krun.h) against a direct convolution written here and, where its parameters are
 * the framework's (one stride, pad and dilation for both dims), the framework's reference
 * executor: the framework's layout (x NCHW, w OIHW, out NCHW) and channels-last, zero
 * padding, strides, dilations, groups and depthwise, odd shapes that are no multiple of the
 * array or the tiles, int8 and bf16, one core and two, the transposed schedule and a split
 * K; and that the padding comes from the scratchpad, never from HBM. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "core.h"
#include "harness.h"
#include "kernel.h"
#include "krun.h"
#include "nn.h"
#include "rng.h"

static arch_config arch(const char *name, const char *set)
{
    arch_config cfg;
    np_err e = {0};
    const char *sets[1] = {set};
    CU_ASSERT_EQUAL_FATAL(arch_resolve(name, sets, set ? 1 : 0, &cfg, &e), NP_OK);
    return cfg;
}

/* A convolution and how the kernel sees it. */
typedef struct conv_case {
    int64_t n, c, h, w, o, r, s;
    int64_t sh, sw, ph, pw, dh, dw, g;
    nn_dtype dt;
    bool x_cl;      /* x channels-last (NHWC in memory), else NCHW */
    bool w_kn;      /* w as [window][o], else [o][window] (OIHW for an NCHW x) */
    bool y_cl;      /* out channels-last, else NCHW */
    uint32_t cores;
    int64_t ct, ksplit, tm, tn, tk; /* tiling attributes (0: the cost model's) */
} conv_case;

static int64_t out_dim(int64_t in, int64_t k, int64_t st, int64_t pad, int64_t dil)
{
    return (in + 2 * pad - dil * (k - 1) - 1) / st + 1;
}

/* Values: integers in [-4, 4] / 4 (sums of a few hundred products exact in fp32), or
 * integers in [-20, 20] for int8. */
static void fill(nn_tensor *t, rng *g)
{
    CU_ASSERT_FATAL(nn_tensor_alloc(t));
    for (int64_t i = 0; i < nn_numel(t); i++)
        t->data[i] = t->dtype == NN_I8 ? (float)((int)rng_below(g, 41) - 20)
                                       : (float)((int)rng_below(g, 9) - 4) / 4.0f;
}

/* The direct convolution of x [N, C, H, W] and w [O, C/g, R, S] (logical, row-major), in
 * double (exact for these values), rounded once to the output's type. */
static void direct(const conv_case *k, const nn_tensor *x, const nn_tensor *w, float *y)
{
    int64_t E = out_dim(k->h, k->r, k->sh, k->ph, k->dh);
    int64_t F = out_dim(k->w, k->s, k->sw, k->pw, k->dw);
    int64_t cg = k->c / k->g, og = k->o / k->g;
    for (int64_t n = 0; n < k->n; n++)
        for (int64_t o = 0; o < k->o; o++)
            for (int64_t oh = 0; oh < E; oh++)
                for (int64_t ow = 0; ow < F; ow++) {
                    double acc = 0;
                    for (int64_t c = 0; c < cg; c++)
                        for (int64_t r = 0; r < k->r; r++)
                            for (int64_t s = 0; s < k->s; s++) {
                                int64_t ih = oh * k->sh + r * k->dh - k->ph;
                                int64_t iw = ow * k->sw + s * k->dw - k->pw;
                                if (ih < 0 || ih >= k->h || iw < 0 || iw >= k->w)
                                    continue;
                                int64_t ci = o / og * cg + c;
                                acc += (double)x->data[((n * k->c + ci) * k->h + ih) * k->w + iw] *
                                       (double)w->data[((o * cg + c) * k->r + r) * k->s + s];
                            }
                    float v = (float)acc;
                    y[((n * k->o + o) * E + oh) * F + ow] = k->dt == NN_BF16 ? nn_round_bf16(v) : v;
                }
}

/* The kernel's operands in the case's layouts (addresses are krun's). */
static void operands(const conv_case *k, int64_t E, int64_t F, kc_kernel *kk)
{
    int64_t e = (int64_t)nn_dtype_size(k->dt), cg = k->c / k->g;
    nn_dtype od = k->dt == NN_I8 ? NN_I32 : k->dt;
    int64_t ce = (int64_t)nn_dtype_size(od), N = k->n, C = k->c, H = k->h, W = k->w, O = k->o;
    int64_t R = k->r, S = k->s;
    if (k->x_cl)
        kk->in[0] = (kc_tensor){0, k->dt, 4, {N, C, H, W}, {H * W * C * e, e, W * C * e, C * e}};
    else
        kc_tensor_dense(&kk->in[0], 0, k->dt, 4, (int64_t[]){N, C, H, W});
    if (k->x_cl && k->w_kn) /* [(kh, kw, c)][o] */
        kk->in[1] = (kc_tensor){0, k->dt, 4, {O, cg, R, S}, {e, O * e, S * cg * O * e, cg * O * e}};
    else if (k->x_cl) /* [o][(kh, kw, c)] */
        kk->in[1] = (kc_tensor){0, k->dt, 4, {O, cg, R, S},
                                {R * S * cg * e, e, S * cg * e, cg * e}};
    else if (k->w_kn) /* [(c, kh, kw)][o] */
        kk->in[1] = (kc_tensor){0, k->dt, 4, {O, cg, R, S}, {e, R * S * O * e, S * O * e, O * e}};
    else /* OIHW */
        kc_tensor_dense(&kk->in[1], 0, k->dt, 4, (int64_t[]){O, cg, R, S});
    if (k->y_cl)
        kk->out[0] = (kc_tensor){0, od, 4, {N, O, E, F},
                                 {E * F * O * ce, ce, F * O * ce, O * ce}};
    else
        kc_tensor_dense(&kk->out[0], 0, od, 4, (int64_t[]){N, O, E, F});
}

/* Runs the case; every output element must equal the direct convolution's (and the
 * framework's, when it can express the case). */
static void check(const arch_config *cfg, const conv_case *k, rng *g)
{
    np_err err = {0};
    int64_t E = out_dim(k->h, k->r, k->sh, k->ph, k->dh);
    int64_t F = out_dim(k->w, k->s, k->sw, k->pw, k->dw);
    nn_dtype od = k->dt == NN_I8 ? NN_I32 : k->dt;
    nn_graph *gr = nn_graph_new(1);
    nn_tensor *x = nn_input(gr, "x", k->dt, 4, (int64_t[]){k->n, k->c, k->h, k->w});
    nn_tensor *w = nn_input(gr, "w", k->dt, 4, (int64_t[]){k->o, k->c / k->g, k->r, k->s});
    nn_tensor *got = nn_input(gr, "got", od, 4, (int64_t[]){k->n, k->o, E, F});
    nn_tensor *want = nn_input(gr, "want", od, 4, (int64_t[]){k->n, k->o, E, F});
    CU_ASSERT_PTR_NOT_NULL_FATAL(want);
    fill(x, g), fill(w, g);
    CU_ASSERT_FATAL(nn_tensor_alloc(want) && nn_tensor_alloc(got));
    direct(k, x, w, want->data);
    kc_kernel kk = {.op = NN_OP_CONV2D, .n_in = 2, .n_out = 1, .place = {0, 0, k->cores}};
    const struct { const char *name; int64_t v, dflt; } at[] = {
        {"stride", k->sh, 1}, {"stride_w", k->sw, k->sh}, {"pad", k->ph, 0},
        {"pad_w", k->pw, k->ph}, {"dilation", k->dh, 1}, {"dilation_w", k->dw, k->dh},
        {"groups", k->g, 1}, {"ct", k->ct, 0}, {"ksplit", k->ksplit, 0}, {"tm", k->tm, 0},
        {"tn", k->tn, 0}, {"tk", k->tk, 0}};
    for (size_t i = 0; i < sizeof at / sizeof at[0]; i++)
        if (at[i].v != at[i].dflt)
            kk.attrs[kk.n_attrs++] = KC_INT(at[i].name, at[i].v);
    operands(k, E, F, &kk);
    /* the framework's reference, where it applies */
    nn_tensor *ref = NULL, *xw[2] = {x, w};
    bool framework = k->sh == k->sw && k->ph == k->pw && k->dh == k->dw;
    if (framework) {
        CU_ASSERT_EQUAL_FATAL(kc_kernel_find(NN_OP_CONV2D)->reference(gr, &kk, xw, &ref, &err),
                              NP_OK);
        np_status cs = nn_graph_compute(gr, &err);
        if (cs != NP_OK)
            fprintf(stderr, "reference: %s\n", err.msg);
        CU_ASSERT_EQUAL_FATAL(cs, NP_OK);
    }
    krun_io io = {.in = {x, w}, .out = {got}};
    krun_result r;
    np_status st = krun_kernel(cfg, &kk, &io, &(krun_opts){.functional = true}, &r, &err);
    if (st != NP_OK)
        fprintf(stderr, "conv2d: %s\n", err.msg);
    CU_ASSERT_EQUAL_FATAL(st, NP_OK);
    krun_diff d = krun_compare(got, want, 0, 0);
    if (d.bad)
        fprintf(stderr, "conv2d %s n%lld c%lld %lldx%lld o%lld %lldx%lld s%lld,%lld p%lld,%lld "
                "d%lld,%lld g%lld x%s w%s y%s cores %u (%s): %lld of %lld differ (worst %g at "
                "%lld)\n", nn_dtype_name(k->dt), (long long)k->n, (long long)k->c,
                (long long)k->h, (long long)k->w, (long long)k->o, (long long)k->r,
                (long long)k->s, (long long)k->sh, (long long)k->sw, (long long)k->ph,
                (long long)k->pw, (long long)k->dh, (long long)k->dw, (long long)k->g,
                k->x_cl ? "nhwc" : "nchw", k->w_kn ? "kn" : "nk", k->y_cl ? "nhwc" : "nchw",
                k->cores, r.kernel.schedule, (long long)d.bad, (long long)d.n, d.max_abs,
                (long long)d.worst);
    CU_ASSERT_EQUAL(d.bad, 0);
    if (framework)
        CU_ASSERT_EQUAL(krun_compare(got, ref, 0, 0).bad, 0);
    /* the kernel's expected traffic is what ran */
    CU_ASSERT_EQUAL(r.report->hbm_read_bytes, r.kernel.hbm_read_bytes);
    CU_ASSERT_EQUAL(r.report->hbm_write_bytes, r.kernel.hbm_write_bytes);
    if (k->ct == 2)
        CU_ASSERT_PTR_NOT_NULL(strstr(r.kernel.schedule, "C^T"));
    krun_result_free(&r);
    nn_graph_free(gr);
}

TEST(conv2d_in_the_frameworks_layout_equals_the_reference_with_padding_strides_and_dilation)
{
    rng g;
    rng_seed(&g, 20261207);
    arch_config cfg = arch("tiny", NULL);
    /* n, c, h, w, o, r, s, stride, pad, dilation (both dims), groups 1 */
    static const int64_t cs[][10] = {
        {1, 3, 7, 9, 5, 3, 3, 1, 1, 1}, {2, 2, 9, 8, 3, 3, 2, 2, 1, 1},
        {1, 5, 11, 10, 7, 3, 3, 1, 2, 2}, {1, 1, 6, 7, 2, 5, 5, 1, 2, 1},
        {2, 4, 5, 5, 6, 1, 1, 2, 0, 1}, {1, 3, 13, 6, 4, 4, 2, 3, 3, 1},
        {1, 2, 4, 4, 3, 3, 3, 1, 3, 2}, {1, 6, 8, 7, 9, 2, 3, 2, 0, 3}};
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++)
        for (int dt = 0; dt < 2; dt++) {
            const int64_t *c = cs[i];
            conv_case k = {c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[7], c[8], c[8],
                           c[9], c[9], 1, dt ? NN_BF16 : NN_I8, false, false, false,
                           1 + (uint32_t)(i % 2), 0, 0, 0, 0, 0};
            check(&cfg, &k, &g);
        }
}

TEST(conv2d_of_one_pixel_images_in_the_frameworks_layout_takes_oihw_filters)
{
    /* a 1 x 1 NCHW image is channels-last too: the filter's order decides (resnet-tiny's
     * last stage: 3x3 filters, pad 1, on 1x1 maps) */
    rng g;
    rng_seed(&g, 20261208);
    arch_config cfg = arch("tiny", NULL);
    for (int dt = 0; dt < 2; dt++) {
        conv_case k = {2, 6, 1, 1, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, dt ? NN_BF16 : NN_I8, false,
                       false, false, 1 + (uint32_t)dt, 0, 0, 0, 0, 0};
        check(&cfg, &k, &g);
    }
}

TEST(conv2d_groups_and_depthwise_equal_the_reference_in_both_layouts)
{
    rng g;
    rng_seed(&g, 11);
    arch_config cfg = arch("tiny", NULL);
    /* n, c, h, w, o, r, s, stride, pad, groups */
    static const int64_t cs[][10] = {
        {1, 6, 7, 7, 4, 3, 3, 1, 1, 2}, {2, 6, 8, 9, 6, 3, 3, 2, 1, 3},
        {1, 5, 9, 7, 5, 3, 3, 1, 1, 5},  /* depthwise */
        {1, 4, 6, 10, 8, 3, 3, 2, 2, 4}, /* depthwise, 2 filters a channel */
        {1, 8, 5, 5, 4, 1, 1, 1, 0, 4}};
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++)
        for (int layout = 0; layout < 2; layout++) {
            const int64_t *c = cs[i];
            conv_case k = {c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[7], c[8], c[8],
                           1, 1, c[9], i % 2 ? NN_BF16 : NN_I8, layout, layout, layout,
                           1 + (uint32_t)layout, 0, 0, 0, 0, 0};
            check(&cfg, &k, &g);
        }
}

TEST(conv2d_takes_a_stride_pad_and_dilation_per_dimension_and_mixed_layouts)
{
    /* beyond the framework's conv2d: the direct convolution is the oracle */
    rng g;
    rng_seed(&g, 5);
    arch_config cfg = arch("tiny", NULL);
    static const conv_case cs[] = {
        {1, 3, 9, 11, 5, 3, 2, 2, 3, 1, 0, 1, 2, 1, NN_BF16, true, true, true, 1, 0, 0, 0, 0, 0},
        {2, 4, 10, 7, 4, 2, 3, 1, 2, 2, 1, 3, 1, 2, NN_I8, false, true, true, 2, 0, 0, 0, 0, 0},
        {1, 2, 8, 8, 4, 3, 3, 3, 1, 0, 2, 2, 1, 1, NN_BF16, true, false, false, 1, 0, 0, 0, 0, 0},
        {1, 6, 7, 12, 6, 3, 1, 1, 2, 1, 0, 2, 1, 3, NN_I8, false, false, true, 1, 0, 0, 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++)
        check(&cfg, &cs[i], &g);
}

TEST(conv2d_tiles_rows_of_blocks_with_and_without_padding_the_transposed_schedule_and_a_split_k)
{
    /* Forced tiles: several tile rows (the top and bottom ones with padding rows in their
     * blocks, the ones between in a loop), tiles that start and end inside output rows,
     * slices that split runs; C^T = B^T A^T; K split over two cores. */
    rng g;
    rng_seed(&g, 77);
    arch_config cfg = arch("tiny", NULL);
    static const conv_case cs[] = {
        /* n, c, h, w, o, r, s, sh, sw, ph, pw, dh, dw, g, dt, x_cl, w_kn, y_cl, cores, ct,
         * ksplit, tm, tn, tk */
        {1, 3, 12, 10, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, NN_BF16, false, false, false, 1, 0, 0, 20, 3,
         5},
        {2, 3, 12, 10, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, NN_I8, true, true, true, 1, 0, 0, 20, 4, 9},
        {1, 2, 11, 9, 4, 3, 3, 1, 1, 2, 2, 2, 2, 1, NN_BF16, false, false, false, 1, 0, 0, 7, 4, 4},
        {1, 2, 11, 9, 4, 3, 3, 2, 1, 1, 1, 1, 1, 1, NN_BF16, true, true, true, 1, 0, 0, 13, 2, 6},
        {1, 3, 9, 9, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1, NN_BF16, false, false, false, 2, 2, 0, 0, 0, 0},
        {1, 3, 9, 9, 6, 3, 3, 1, 1, 1, 1, 1, 1, 3, NN_I8, true, true, false, 1, 2, 0, 0, 0, 0},
        {1, 4, 7, 7, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, NN_BF16, false, false, false, 2, 0, 2, 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++)
        check(&cfg, &cs[i], &g);
}
