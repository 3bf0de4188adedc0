/* test_kernels_row.c — the row kernels (compiler/kc_softmax.c, kc_norm.c, kc_rope.c,
 * kc_loss.c) run functionally on the core model (sim/krun.h) against the framework's
 * reference executor, on seeded shapes that are not multiples of the lanes, the tiles or the
 * cores, for every float dtype; plus their schedules (loops, traffic) and errors.
 *
 * Tolerance (docs/compiler.md, "Row kernels"): an element is within rtol x |reference| + atol
 * with rtol one ulp of the output type (bf16 2^-7, fp16 2^-10; fp32 2^-20) and atol = rtol x
 * the largest |reference| / 8: the kernels compute in fp32 and round once to the output
 * type, the reference in double. */
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

/* The relative tolerance of an output type: one ulp for bf16 and fp16 (the kernels round once
 * from fp32); for fp32, the few fp32 roundings of the intermediates (up to 8 on the longest
 * chains, the norms' gradients), 2^-20. */
static double ulp_of(nn_dtype t)
{
    return t == NN_BF16 ? 0x1p-7 : t == NN_F16 ? 0x1p-10 : 0x1p-20;
}

static float round_to(nn_dtype t, float v)
{
    return t == NN_BF16 ? nn_round_bf16(v) : t == NN_F16 ? nn_round_f16(v) : v;
}

/* Seeded normal(mean, std) values rounded to t's dtype. */
static void fill(nn_tensor *t, uint64_t seed, double mean, double std)
{
    CU_ASSERT_FATAL(nn_tensor_randn(t, seed, std));
    for (int64_t i = 0; i < nn_numel(t); i++)
        t->data[i] = round_to(t->dtype, (float)(t->data[i] + mean));
}

/* Runs k functionally with inputs in[] (k's operands are filled from them and from want,
 * dense) and compares its output with want (the reference node, computed). Returns the
 * number of bad elements (printing the worst). */
static int64_t run_check(const arch_config *cfg, kc_kernel *k, nn_tensor *const *in, int n_in,
                         nn_tensor *want, nn_graph *g, kc_result *res)
{
    np_err err = {0};
    CU_ASSERT_EQUAL_FATAL(nn_graph_compute(g, &err), NP_OK);
    nn_tensor *got = nn_input(g, "got", want->dtype, want->ndim, want->ne);
    CU_ASSERT_PTR_NOT_NULL_FATAL(got);
    k->n_in = n_in, k->n_out = 1;
    krun_io io = {{0}, {0}, {got}};
    for (int i = 0; i < n_in; i++) {
        kc_tensor_of(&k->in[i], 0, in[i]);
        io.in[i] = in[i];
    }
    kc_tensor_of(&k->out[0], 0, want);
    krun_result r;
    np_status st = krun_kernel(cfg, k, &io, &(krun_opts){.functional = true}, &r, &err);
    if (st != NP_OK)
        fprintf(stderr, "%s\n", err.msg);
    CU_ASSERT_EQUAL_FATAL(st, NP_OK);
    if (res)
        *res = r.kernel;
    krun_result_free(&r);
    double big = 0;
    for (int64_t i = 0; i < nn_numel(want); i++)
        big = fmax(big, fabs(want->data[i]));
    double rtol = ulp_of(want->dtype);
    krun_diff d = krun_compare(got, want, rtol, rtol * big / 8);
    if (d.bad)
        fprintf(stderr, "%s %s: %lld of %lld bad, worst at %lld: got %g want %g\n",
                nn_op_name(k->op), nn_dtype_name(want->dtype), (long long)d.bad, (long long)d.n,
                (long long)d.worst, got->data[d.worst], want->data[d.worst]);
    if (getenv("KROW_ERR"))
        fprintf(stderr, "%s %s: max rel %.3g (%.2f ulp) abs %.3g\n", nn_op_name(k->op),
                nn_dtype_name(want->dtype), d.max_rel, d.max_rel / rtol, d.max_abs);
    return d.bad;
}

static const nn_dtype float_types[3] = {NN_F32, NN_BF16, NN_F16};

/* ---- softmax and log-softmax ----------------------------------------------------------------- */

static int64_t check_softmax(const arch_config *cfg, nn_op op, nn_dtype dt, int ndim,
                             const int64_t *shape, uint32_t cores, int64_t chunk, uint64_t seed,
                             kc_result *res)
{
    nn_graph *g = nn_graph_new(1);
    nn_tensor *x = nn_input(g, "x", dt, ndim, shape);
    fill(x, seed, 0.5, 3.0);
    nn_tensor *y = op == NN_OP_SOFTMAX ? nn_softmax(g, x) : nn_log_softmax(g, x);
    kc_kernel k = {.op = op, .place = {0, 0, cores}};
    if (chunk) { /* and tiles of 2 rows: several tiles a pass */
        k.attrs[k.n_attrs++] = KC_INT("chunk", chunk);
        k.attrs[k.n_attrs++] = KC_INT("tr", 2);
    }
    int64_t bad = run_check(cfg, &k, &x, 1, y, g, res);
    nn_graph_free(g);
    return bad;
}

TEST(softmax_and_log_softmax_equal_the_reference_on_odd_shapes_dtypes_and_cores)
{
    arch_config cfg = arch("tiny", NULL);
    static const struct { int nd; int64_t shape[3]; uint32_t cores; } cases[] = {
        {2, {3, 37}, 1}, {3, {2, 5, 19}, 2}, {2, {41, 7}, 2}, {1, {13}, 1}, {2, {1, 130}, 2},
    };
    for (int op = 0; op < 2; op++)
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
            for (int t = 0; t < 3; t++)
                CU_ASSERT_EQUAL(check_softmax(&cfg, op ? NN_OP_LOG_SOFTMAX : NN_OP_SOFTMAX,
                                              float_types[t], cases[c].nd, cases[c].shape,
                                              cases[c].cores, 0, 11 + c, NULL), 0);
}

TEST(rows_too_wide_for_the_scratchpad_are_streamed_in_chunks_with_the_same_values)
{
    arch_config cfg = arch("tiny", NULL);
    kc_result r;
    /* chunks forced: 37 columns in chunks of 8 (the last of 5), 13 rows in tiles of 2 */
    for (int op = 0; op < 2; op++)
        for (int t = 0; t < 3; t++) {
            CU_ASSERT_EQUAL(check_softmax(&cfg, op ? NN_OP_LOG_SOFTMAX : NN_OP_SOFTMAX,
                                          float_types[t], 2, (int64_t[]){13, 37}, 2, 8, 3, &r), 0);
            CU_ASSERT_PTR_NOT_NULL(strstr(r.schedule, "5 chunks of 8 columns"));
        }
    /* 20000 fp32 columns (80 KB a row) do not fit tiny's 64 KiB: chunks chosen; x is read
     * twice, y written once */
    CU_ASSERT_EQUAL(check_softmax(&cfg, NN_OP_SOFTMAX, NN_F32, 2, (int64_t[]){3, 20000}, 1, 0, 5,
                                  &r), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.schedule, "streamed"));
    CU_ASSERT_EQUAL(r.hbm_read_bytes, 2u * 3 * 20000 * 4);
    CU_ASSERT_EQUAL(r.hbm_write_bytes, 3u * 20000 * 4);
    CU_ASSERT_EQUAL(r.hbm_bytes_min, 2u * 3 * 20000 * 4);
}

/* ---- layer norm, RMS norm and their gradients ------------------------------------------------ */

static int64_t norm_chunk; /* (check_norm_chunked) the chunk attribute, 0: none */

/* op over x [shape] (normal(mean 1.5, std 2)) with `aff` affine parameters (forward) or g
 * (gradients), in dtype dt on `cores` cores. */
static int64_t check_norm(const arch_config *cfg, nn_op op, nn_dtype dt, int ndim,
                          const int64_t *shape, int aff, uint32_t cores, int64_t tr,
                          uint64_t seed, kc_result *res)
{
    nn_graph *g = nn_graph_new(1);
    nn_tensor *in[3], *y;
    in[0] = nn_input(g, "x", dt, ndim, shape);
    fill(in[0], seed, 1.5, 2.0);
    int n = 1;
    const double eps = 1e-3;
    bool grad = op == NN_OP_LAYERNORM_GRAD || op == NN_OP_RMSNORM_GRAD;
    if (grad) {
        in[n] = nn_input(g, "g", dt, ndim, shape);
        fill(in[n++], seed + 1, 0, 1.0);
        y = nn_node(g, op, 2, in, NULL, (double[NN_MAX_FPARAMS]){eps});
    } else {
        for (int i = 0; i < aff; i++) {
            in[n] = nn_input(g, i ? "beta" : "gamma", dt, 1, &shape[ndim - 1]);
            fill(in[n++], seed + 2 + i, i ? 0 : 1, 0.5);
        }
        y = op == NN_OP_RMSNORM ? nn_rmsnorm(g, in[0], aff ? in[1] : NULL, eps)
                                : nn_layernorm(g, in[0], aff ? in[1] : NULL,
                                               aff > 1 ? in[2] : NULL, eps);
    }
    kc_kernel k = {.op = op, .place = {0, 0, cores}, .n_attrs = 1, .attrs = {KC_REAL("eps", eps)}};
    if (tr)
        k.attrs[k.n_attrs++] = KC_INT("tr", tr);
    if (norm_chunk)
        k.attrs[k.n_attrs++] = KC_INT("chunk", norm_chunk);
    int64_t bad = run_check(cfg, &k, in, n, y, g, res);
    nn_graph_free(g);
    return bad;
}

/* check_norm with the chunk attribute (columns per chunk of a streamed row) and tiles of 2. */
static int64_t check_norm_chunked(const arch_config *cfg, nn_op op, nn_dtype dt, int ndim,
                                  const int64_t *shape, int aff, uint32_t cores, int64_t chunk,
                                  uint64_t seed, kc_result *res)
{
    norm_chunk = chunk;
    int64_t bad = check_norm(cfg, op, dt, ndim, shape, aff, cores, 2, seed, res);
    norm_chunk = 0;
    return bad;
}

TEST(layernorm_and_rmsnorm_equal_the_reference_with_and_without_affine_parameters)
{
    arch_config cfg = arch("tiny", NULL);
    static const struct { int nd; int64_t shape[3]; uint32_t cores; } cases[] = {
        {2, {3, 37}, 1}, {3, {2, 5, 19}, 2}, {2, {41, 7}, 2}, {1, {13}, 1},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int t = 0; t < 3; t++) {
            for (int aff = 0; aff <= 2; aff++)
                CU_ASSERT_EQUAL(check_norm(&cfg, NN_OP_LAYERNORM, float_types[t], cases[c].nd,
                                           cases[c].shape, aff, cases[c].cores, 0, 21 + c, NULL),
                                0);
            for (int aff = 0; aff <= 1; aff++)
                CU_ASSERT_EQUAL(check_norm(&cfg, NN_OP_RMSNORM, float_types[t], cases[c].nd,
                                           cases[c].shape, aff, cases[c].cores, 0, 31 + c, NULL),
                                0);
        }
}

TEST(layernorm_and_rmsnorm_gradients_equal_the_reference)
{
    arch_config cfg = arch("tiny", NULL);
    static const struct { int nd; int64_t shape[3]; uint32_t cores; } cases[] = {
        {2, {3, 37}, 1}, {3, {2, 5, 19}, 2}, {2, {41, 7}, 2},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int t = 0; t < 3; t++) {
            CU_ASSERT_EQUAL(check_norm(&cfg, NN_OP_LAYERNORM_GRAD, float_types[t], cases[c].nd,
                                       cases[c].shape, 0, cases[c].cores, 0, 41 + c, NULL), 0);
            CU_ASSERT_EQUAL(check_norm(&cfg, NN_OP_RMSNORM_GRAD, float_types[t], cases[c].nd,
                                       cases[c].shape, 0, cases[c].cores, 0, 51 + c, NULL), 0);
        }
}

TEST(norm_rows_too_wide_for_the_scratchpad_are_streamed_in_chunks_with_the_same_values)
{
    /* chunks forced (37 columns in chunks of 8, the last of 5; tiles of 2 rows): every norm
     * and gradient, every float type, with gamma and beta; then 20000 fp32 columns that do
     * not fit tiny's 64 KiB, chunks chosen: x read once per phase */
    arch_config cfg = arch("tiny", NULL);
    const nn_op ops[4] = {NN_OP_LAYERNORM, NN_OP_RMSNORM, NN_OP_LAYERNORM_GRAD,
                          NN_OP_RMSNORM_GRAD};
    kc_result r;
    for (int o = 0; o < 4; o++)
        for (int t = 0; t < 3; t++) {
            int aff = ops[o] == NN_OP_LAYERNORM ? 2 : ops[o] == NN_OP_RMSNORM ? 1 : 0;
            CU_ASSERT_EQUAL(check_norm_chunked(&cfg, ops[o], float_types[t], 2,
                                               (int64_t[]){13, 37}, aff, 2, 8, 71 + o, &r), 0);
            CU_ASSERT_PTR_NOT_NULL(strstr(r.schedule, "5 chunks of 8 columns"));
        }
    for (int o = 0; o < 4; o++) {
        CU_ASSERT_EQUAL(check_norm(&cfg, ops[o], NN_F32, 2, (int64_t[]){3, 20000}, 0, 2, 0,
                                   81 + o, &r), 0);
        CU_ASSERT_PTR_NOT_NULL(strstr(r.schedule, "rows streamed"));
        uint64_t x = 3 * 20000 * 4, phases = ops[o] == NN_OP_LAYERNORM_GRAD ? 3 : 2;
        uint64_t g = ops[o] == NN_OP_LAYERNORM_GRAD ? 2 * x : ops[o] == NN_OP_RMSNORM_GRAD ? 2 * x
                                                                                            : 0;
        CU_ASSERT_EQUAL(r.hbm_read_bytes, phases * x + g);
        CU_ASSERT_EQUAL(r.hbm_write_bytes, x);
    }
    /* gamma and beta of 20000 (160 KB in fp32, more than the whole scratchpad): a chunk's
     * columns of them loaded before each normalizing pass, on each core */
    CU_ASSERT_EQUAL(check_norm(&cfg, NN_OP_LAYERNORM, NN_BF16, 2, (int64_t[]){5, 20000}, 2, 2, 0,
                               85, &r), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.schedule, "rows streamed"));
    CU_ASSERT_EQUAL(check_norm(&cfg, NN_OP_RMSNORM, NN_F16, 2, (int64_t[]){5, 20000}, 1, 1, 0,
                               86, &r), 0);
}

TEST(row_kernels_spread_over_more_than_64_cores)
{
    /* tiny with 80 cores (a100-cluster has 108): the norms, their gradients and softmax over
     * 203 rows, every core a block of rows */
    arch_config cfg;
    np_err e = {0};
    const char *sets[3] = {"chip.cores=80", "chip.mesh_x=10", "chip.mesh_y=8"};
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tiny", sets, 3, &cfg, &e), NP_OK);
    const int64_t shape[2] = {203, 9};
    kc_result r;
    CU_ASSERT_EQUAL(check_norm(&cfg, NN_OP_LAYERNORM, NN_BF16, 2, shape, 2, 80, 0, 61, &r), 0);
    CU_ASSERT_EQUAL(r.cores, 80u);
    CU_ASSERT_EQUAL(check_norm(&cfg, NN_OP_RMSNORM_GRAD, NN_F32, 2, shape, 0, 80, 0, 62, &r), 0);
    CU_ASSERT_EQUAL(check_softmax(&cfg, NN_OP_SOFTMAX, NN_BF16, 2, shape, 80, 0, 63, &r), 0);
    CU_ASSERT_EQUAL(r.cores, 80u);
}

/* ---- cross-entropy and its gradient ---------------------------------------------------------- */

static int64_t ce_chunk; /* the chunk attribute of check_ce's kernels (0: none) */

static int64_t check_ce(const arch_config *cfg, bool grad, nn_dtype dt, nn_dtype lt, int ndim,
                        const int64_t *shape, uint32_t cores, int64_t tr, uint64_t seed,
                        kc_result *res)
{
    nn_graph *g = nn_graph_new(1);
    nn_tensor *in[3];
    in[0] = nn_input(g, "logits", dt, ndim, shape);
    fill(in[0], seed, 0.3, 2.0);
    in[1] = nn_input(g, "labels", lt, ndim - 1, shape);
    CU_ASSERT_FATAL(nn_tensor_alloc(in[1]));
    rng r;
    rng_seed(&r, seed);
    int64_t C = shape[ndim - 1];
    for (int64_t i = 0; i < nn_numel(in[1]); i++) /* the last class, and repeats, included */
        in[1]->data[i] = (float)(i % 3 == 0 ? C - 1 : (int64_t)rng_below(&r, (uint64_t)C));
    nn_tensor *y;
    if (grad) {
        in[2] = nn_input(g, "dy", dt, 0, NULL);
        CU_ASSERT_FATAL(nn_tensor_fill(in[2], round_to(dt, 1.75f)));
        y = nn_node(g, NN_OP_CROSS_ENTROPY_GRAD, 3, in, NULL, NULL);
    } else {
        y = nn_cross_entropy(g, in[0], in[1]);
    }
    kc_kernel k = {.op = grad ? NN_OP_CROSS_ENTROPY_GRAD : NN_OP_CROSS_ENTROPY,
                   .place = {0, 0, cores}};
    if (tr)
        k.attrs[k.n_attrs++] = KC_INT("tr", tr);
    if (ce_chunk)
        k.attrs[k.n_attrs++] = KC_INT("chunk", ce_chunk);
    int64_t bad = run_check(cfg, &k, in, grad ? 3 : 2, y, g, res);
    nn_graph_free(g);
    return bad;
}

TEST(cross_entropy_and_its_gradient_equal_the_reference_for_int32_and_int8_labels)
{
    arch_config cfg = arch("tiny", NULL);
    static const struct { int nd; int64_t shape[3]; uint32_t cores; int64_t tr; } cases[] = {
        {2, {3, 37}, 1, 0}, {3, {2, 5, 19}, 2, 0}, {2, {41, 7}, 2, 3}, {1, {13}, 1, 0},
        {2, {23, 11}, 2, 4},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int t = 0; t < 3; t++)
            for (int grad = 0; grad < 2; grad++) {
                CU_ASSERT_EQUAL(check_ce(&cfg, grad, float_types[t], NN_I32, cases[c].nd,
                                         cases[c].shape, cases[c].cores, cases[c].tr, 61 + c,
                                         NULL), 0);
                CU_ASSERT_EQUAL(check_ce(&cfg, grad, float_types[t], NN_I8, cases[c].nd,
                                         cases[c].shape, cases[c].cores, cases[c].tr, 71 + c,
                                         NULL), 0);
            }
}

/* ---- RoPE ------------------------------------------------------------------------------------ */

TEST(cross_entropy_of_rows_too_wide_for_the_scratchpad_streams_them_in_chunks)
{
    /* forced chunks of 8 (the last of 5) over 37 classes, tiles of 2 and 3 rows, 1 and 2
     * cores, every float type, int32 and int8 labels (a third of them the last class); then
     * 20000 fp32 classes on tiny's 64 KiB with chunks chosen */
    arch_config cfg = arch("tiny", NULL);
    kc_result r;
    ce_chunk = 8;
    for (int t = 0; t < 3; t++)
        for (int grad = 0; grad < 2; grad++)
            for (uint32_t cores = 1; cores <= 2; cores++) {
                CU_ASSERT_EQUAL(check_ce(&cfg, grad, float_types[t], t ? NN_I32 : NN_I8, 2,
                                         (int64_t[]){13, 37}, cores, 1 + cores, 91 + t, &r), 0);
                CU_ASSERT_PTR_NOT_NULL(strstr(r.schedule, "5 chunks of 8 columns"));
            }
    ce_chunk = 0;
    for (int grad = 0; grad < 2; grad++) {
        CU_ASSERT_EQUAL(check_ce(&cfg, grad, NN_F32, NN_I32, 2, (int64_t[]){5, 20000}, 2, 0, 97,
                                 &r), 0);
        CU_ASSERT_PTR_NOT_NULL(strstr(r.schedule, "rows streamed"));
    }
}

TEST(rope_equals_the_reference_forward_and_inverse)
{
    arch_config cfg = arch("tiny", NULL);
    static const struct { int nd; int64_t shape[4]; uint32_t cores; int64_t tr; } cases[] = {
        {2, {7, 6}, 1, 0}, {4, {2, 3, 5, 10}, 2, 0}, {3, {3, 9, 14}, 2, 2},
        {4, {1, 2, 33, 4}, 2, 0},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int t = 0; t < 3; t++)
            for (int dir = -1; dir <= 1; dir += 2) {
                nn_graph *g = nn_graph_new(1);
                nn_tensor *x = nn_input(g, "x", float_types[t], cases[c].nd, cases[c].shape);
                fill(x, 81 + c, 0, 1.5);
                nn_tensor *y = nn_node(g, NN_OP_ROPE, 1, &x, NULL,
                                       (double[NN_MAX_FPARAMS]){500.0, (double)dir});
                kc_kernel k = {.op = NN_OP_ROPE, .place = {0, 0, cases[c].cores}, .n_attrs = 2,
                               .attrs = {KC_REAL("base", 500.0), KC_REAL("dir", dir)}};
                if (cases[c].tr)
                    k.attrs[k.n_attrs++] = KC_INT("tr", cases[c].tr);
                CU_ASSERT_EQUAL(run_check(&cfg, &k, &x, 1, y, g, NULL), 0);
                nn_graph_free(g);
            }
}

/* ---- kernels after one another --------------------------------------------------------------- */

TEST(row_kernels_follow_one_another_in_one_program_on_cores_with_unlike_scratchpads)
{
    /* A layernorm on core 1 alone, then a softmax of its output and a cross-entropy of that on
     * cores 0..1: core 1's scratchpad holds the layernorm's quarantined buffers when the next
     * kernels allocate theirs, so their offsets differ between the cores; the values must be
     * the framework's (fp32 throughout, one program). */
    arch_config cfg = arch("tiny", NULL);
    np_err err = {0};
    const int64_t R = 9, D = 23;
    nn_graph *g = nn_graph_new(1);
    nn_tensor *x = nn_input(g, "x", NN_F32, 2, (int64_t[]){R, D});
    fill(x, 91, 0.2, 1.0);
    nn_tensor *lab = nn_input(g, "labels", NN_I32, 1, (int64_t[]){R});
    CU_ASSERT_FATAL(nn_tensor_alloc(lab));
    for (int64_t i = 0; i < R; i++)
        lab->data[i] = (float)((i * 7) % D);
    nn_tensor *y1 = nn_layernorm(g, x, NULL, NULL, 1e-5);
    nn_tensor *y2 = nn_softmax(g, y1);
    nn_tensor *y3 = nn_cross_entropy(g, y2, lab);
    CU_ASSERT_EQUAL_FATAL(nn_graph_compute(g, &err), NP_OK);
    kc_prog *p;
    CU_ASSERT_EQUAL_FATAL(kc_prog_new(&cfg, &(kc_prog_opts){.cores = 2}, &p, &err), NP_OK);
    uint64_t ax, al, a1, a2, a3;
    CU_ASSERT_EQUAL(kc_prog_bss(p, "X", R * D * 4, &ax, &err), NP_OK);
    CU_ASSERT_EQUAL(kc_prog_bss(p, "L", R * 4, &al, &err), NP_OK);
    CU_ASSERT_EQUAL(kc_prog_bss(p, "Y1", R * D * 4, &a1, &err), NP_OK);
    CU_ASSERT_EQUAL(kc_prog_bss(p, "Y2", R * D * 4, &a2, &err), NP_OK);
    CU_ASSERT_EQUAL(kc_prog_bss(p, "Y3", 4, &a3, &err), NP_OK);
    kc_kernel k1 = {.op = NN_OP_LAYERNORM, .n_in = 1, .n_out = 1, .place = {0, 1, 1}};
    kc_tensor_of(&k1.in[0], ax, x);
    kc_tensor_of(&k1.out[0], a1, y1);
    kc_kernel k2 = {.op = NN_OP_SOFTMAX, .n_in = 1, .n_out = 1, .place = {0, 0, 2}};
    kc_tensor_of(&k2.in[0], a1, y1);
    kc_tensor_of(&k2.out[0], a2, y2);
    kc_kernel k3 = {.op = NN_OP_CROSS_ENTROPY, .n_in = 2, .n_out = 1, .place = {0, 0, 2},
                    .n_attrs = 1, .attrs = {KC_INT("tr", 2)}};
    kc_tensor_of(&k3.in[0], a2, y2);
    kc_tensor_of(&k3.in[1], al, lab);
    kc_tensor_of(&k3.out[0], a3, y3);
    CU_ASSERT_EQUAL_FATAL(kc_compile(p, &k1, NULL, &err), NP_OK);
    CU_ASSERT_EQUAL_FATAL(kc_compile(p, &k2, NULL, &err), NP_OK);
    CU_ASSERT_EQUAL_FATAL(kc_compile(p, &k3, NULL, &err), NP_OK);
    CU_ASSERT_EQUAL_FATAL(kc_prog_finish(p, &err), NP_OK);
    isa_program *prog = kc_prog_take(p);
    kc_prog_free(p);
    int32_t labels[9];
    for (int i = 0; i < R; i++)
        labels[i] = (int32_t)lab->data[i];
    float out2[9 * 23], out3;
    core_hbm_io ins[2] = {{ax, x->data, R * D * 4, 0}, {al, labels, sizeof labels, 0}};
    core_hbm_io outs[2] = {{a2, out2, sizeof out2, 0}, {a3, &out3, 4, 0}};
    core_sim_opts so = {.functional = true, .inputs = ins, .n_inputs = 2, .outputs = outs,
                        .n_outputs = 2};
    core_report *rep;
    CU_ASSERT_EQUAL_FATAL(core_sim_run_opts(&cfg, prog, &so, NULL, &rep, &err), NP_OK);
    core_report_free(rep);
    isa_program_free(prog);
    for (int64_t i = 0; i < R * D; i++)
        CU_ASSERT(fabs(out2[i] - y2->data[i]) <= 0x1p-20 * (fabs(y2->data[i]) + 0.125));
    CU_ASSERT(fabs(out3 - y3->data[0]) <= 0x1p-20 * fabs(y3->data[0]));
    nn_graph_free(g);
}

/* ---- batch norm ------------------------------------------------------------------------------ */

/* Strides of x [N, C, S...] channels-last (C packed innermost, then the spatial dims, N). */
static void channels_last(kc_tensor *t)
{
    int64_t e = (int64_t)nn_dtype_size(t->dtype), s = e * t->shape[1];
    t->stride[1] = e;
    for (int d = t->ndim - 1; d >= 2; d--) {
        t->stride[d] = s;
        s *= t->shape[d];
    }
    t->stride[0] = s;
}

static int64_t check_bn(const arch_config *cfg, nn_op op, nn_dtype dt, int ndim,
                        const int64_t *shape, bool affine, bool cl, uint32_t cores, int64_t tr,
                        uint64_t seed)
{
    nn_graph *g = nn_graph_new(1);
    nn_tensor *in[5];
    int n = 1;
    in[0] = nn_input(g, "x", dt, ndim, shape);
    fill(in[0], seed, 1.5, 2.0);
    const double eps = 1e-3;
    if (op == NN_OP_BATCHNORM_GRAD) {
        in[n] = nn_input(g, "g", dt, ndim, shape);
        fill(in[n++], seed + 1, 0, 1);
    } else if (affine || op == NN_OP_BATCHNORM_INFER) {
        for (int i = 0; i < (op == NN_OP_BATCHNORM_INFER ? 4 : 2); i++) {
            in[n] = nn_input(g, "p", dt, 1, &shape[1]);
            fill(in[n], seed + 2 + i, i == 0 ? 1 : i == 3 ? 2 : 0, 0.5);
            if (i == 3) /* a variance */
                for (int64_t j = 0; j < shape[1]; j++)
                    in[n]->data[j] = round_to(dt, fabsf(in[n]->data[j]) + 0.1f);
            n++;
        }
    }
    nn_tensor *y = nn_node(g, op, n, in, NULL, (double[NN_MAX_FPARAMS]){eps});
    np_err err = {0};
    CU_ASSERT_EQUAL_FATAL(nn_graph_compute(g, &err), NP_OK);
    nn_tensor *got = nn_input(g, "got", dt, ndim, shape);
    kc_kernel k = {.op = op, .n_in = n, .n_out = 1, .place = {0, 0, cores}, .n_attrs = 1,
                   .attrs = {KC_REAL("eps", eps)}};
    if (tr)
        k.attrs[k.n_attrs++] = KC_INT("tr", tr);
    krun_io io = {{0}, {0}, {got}};
    for (int i = 0; i < n; i++) {
        kc_tensor_of(&k.in[i], 0, in[i]);
        io.in[i] = in[i];
        if (cl && in[i]->ndim == ndim)
            channels_last(&k.in[i]);
    }
    kc_tensor_of(&k.out[0], 0, y);
    if (cl)
        channels_last(&k.out[0]);
    krun_result r;
    np_status st = krun_kernel(cfg, &k, &io, &(krun_opts){.functional = true}, &r, &err);
    if (st != NP_OK)
        fprintf(stderr, "%s\n", err.msg);
    CU_ASSERT_EQUAL_FATAL(st, NP_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.kernel.schedule, cl || ndim == 2 ? "channels-last" : "NCHW"));
    krun_result_free(&r);
    /* fp32: the sums of n values each, and the gradient's cancelling terms, 2^-18 */
    double big = 0, rtol = dt == NN_F32 ? 0x1p-18 : ulp_of(dt);
    for (int64_t i = 0; i < nn_numel(y); i++)
        big = fmax(big, fabs(y->data[i]));
    krun_diff d = krun_compare(got, y, rtol, rtol * big / 8);
    if (d.bad)
        fprintf(stderr, "%s %s%s: %lld of %lld bad, worst at %lld: got %g want %g\n",
                nn_op_name(op), nn_dtype_name(dt), cl ? " channels-last" : "", (long long)d.bad,
                (long long)d.n, (long long)d.worst, got->data[d.worst], y->data[d.worst]);
    nn_graph_free(g);
    return d.bad;
}

TEST(batchnorm_its_gradient_and_inference_equal_the_reference_nchw_and_channels_last)
{
    arch_config cfg = arch("tiny", NULL);
    static const struct { int nd; int64_t shape[4]; uint32_t cores; int64_t tr; } cases[] = {
        {4, {3, 5, 2, 3}, 1, 0}, {4, {4, 3, 3, 5}, 2, 2}, {2, {9, 7}, 2, 0}, {3, {5, 6, 11}, 2, 0},
    };
    static const nn_op ops[3] = {NN_OP_BATCHNORM, NN_OP_BATCHNORM_GRAD, NN_OP_BATCHNORM_INFER};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int t = 0; t < 3; t++)
            for (int o = 0; o < 3; o++)
                for (int cl = 0; cl < 2; cl++) {
                    if (cl && cases[c].nd == 2)
                        continue; /* [N, C] is channels-last already */
                    CU_ASSERT_EQUAL(check_bn(&cfg, ops[o], float_types[t], cases[c].nd,
                                             cases[c].shape, true, cl, cases[c].cores,
                                             cases[c].tr, 131 + c), 0);
                    if (ops[o] == NN_OP_BATCHNORM)
                        CU_ASSERT_EQUAL(check_bn(&cfg, ops[o], float_types[t], cases[c].nd,
                                                 cases[c].shape, false, cl, cases[c].cores,
                                                 cases[c].tr, 141 + c), 0);
                }
}

/* ---- the schedule ---------------------------------------------------------------------------- */

TEST(forced_tiles_loop_over_pairs_with_odd_counts_and_short_last_tiles_and_keep_the_values)
{
    /* 41 rows on 2 cores (20 and 21) in tiles of 2, 3 and 7 rows: pair loops, an odd tile
     * after them, short last tiles */
    arch_config cfg = arch("tiny", NULL);
    const int64_t shape[2] = {41, 13};
    for (int64_t tr = 2; tr <= 7; tr += tr == 3 ? 4 : 1)
        for (int t = 0; t < 3; t++) {
            CU_ASSERT_EQUAL(check_norm(&cfg, NN_OP_LAYERNORM, float_types[t], 2, shape, 2, 2, tr,
                                       151, NULL), 0);
            CU_ASSERT_EQUAL(check_norm(&cfg, NN_OP_RMSNORM_GRAD, float_types[t], 2, shape, 0, 2,
                                       tr, 152, NULL), 0);
            CU_ASSERT_EQUAL(check_norm(&cfg, NN_OP_LAYERNORM_GRAD, float_types[t], 2, shape, 0, 1,
                                       tr, 153, NULL), 0);
            CU_ASSERT_EQUAL(check_ce(&cfg, true, float_types[t], NN_I32, 2, shape, 2, tr, 154,
                                     NULL), 0);
            CU_ASSERT_EQUAL(check_ce(&cfg, false, float_types[t], NN_I8, 2, shape, 2, tr, 155,
                                     NULL), 0);
        }
}

/* Instructions of a kernel on tiny's 2 cores with tiles of 4 rows. */
static uint64_t insns_of(const arch_config *cfg, nn_op op, int64_t rows, int64_t cols)
{
    kc_kernel k = {.op = op, .n_in = 1, .n_out = 1, .place = {0, 0, 2}, .n_attrs = 1,
                   .attrs = {KC_INT("tr", 4)}};
    kc_tensor_dense(&k.in[0], 0, NN_BF16, 2, (int64_t[]){rows, cols});
    kc_tensor_dense(&k.out[0], 0, NN_BF16, 2, (int64_t[]){rows, cols});
    krun_result r;
    np_err err = {0};
    CU_ASSERT_EQUAL_FATAL(krun_kernel(cfg, &k, NULL, &(krun_opts){0}, &r, &err), NP_OK);
    uint64_t n = r.kernel.insns;
    CU_ASSERT_EQUAL(r.kernel.hbm_read_bytes, (uint64_t)(rows * cols * 2));
    CU_ASSERT_EQUAL(r.kernel.hbm_write_bytes, (uint64_t)(rows * cols * 2));
    krun_result_free(&r);
    return n;
}

TEST(a_row_kernels_program_does_not_grow_with_its_rows)
{
    /* 8 tiles a core or 800: the same loop over pairs, the same tail */
    arch_config cfg = arch("tiny", NULL);
    for (int op = 0; op < 3; op++) {
        nn_op o = op == 0 ? NN_OP_SOFTMAX : op == 1 ? NN_OP_LAYERNORM : NN_OP_RMSNORM;
        CU_ASSERT_EQUAL(insns_of(&cfg, o, 64, 40), insns_of(&cfg, o, 6400, 40));
    }
}

/* ---- errors ---------------------------------------------------------------------------------- */

/* Compiles k alone (operands in fresh buffers) and returns the status, the message in *err. */
static np_status compile_alone(const arch_config *cfg, kc_kernel *k, np_err *err)
{
    krun_result r;
    np_status st = krun_kernel(cfg, k, NULL, &(krun_opts){0}, &r, err);
    if (st == NP_OK)
        krun_result_free(&r);
    return st;
}

TEST(operands_that_do_not_fit_a_row_kernel_get_errors_naming_the_kernel_and_the_problem)
{
    arch_config cfg = arch("tiny", NULL);
    np_err err = {0};
    kc_kernel k = {.op = NN_OP_LAYERNORM, .n_in = 2, .n_out = 1};
    kc_tensor_dense(&k.in[0], 0, NN_BF16, 2, (int64_t[]){4, 8});
    kc_tensor_dense(&k.in[1], 0, NN_BF16, 1, (int64_t[]){7}); /* gamma of the wrong size */
    kc_tensor_dense(&k.out[0], 0, NN_BF16, 2, (int64_t[]){4, 8});
    CU_ASSERT_EQUAL(compile_alone(&cfg, &k, &err), NP_ERR_INCONSISTENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "layernorm: gamma must be a packed float [8]"));
    /* integer x */
    k.n_in = 1;
    kc_tensor_dense(&k.in[0], 0, NN_I32, 2, (int64_t[]){4, 8});
    CU_ASSERT_EQUAL(compile_alone(&cfg, &k, &err), NP_ERR_INCONSISTENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "float types only"));
    k.n_in = 1;
    /* a last dim that is not packed */
    kc_tensor_dense(&k.in[0], 0, NN_F32, 2, (int64_t[]){4, 8});
    kc_tensor_dense(&k.out[0], 0, NN_F32, 2, (int64_t[]){4, 8});
    k.in[0].stride[1] = 8, k.in[0].stride[0] = 64;
    CU_ASSERT_EQUAL(compile_alone(&cfg, &k, &err), NP_ERR_INCONSISTENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "the last dim must be packed"));
    /* softmax: forced chunks too wide */
    kc_kernel s = {.op = NN_OP_SOFTMAX, .n_in = 1, .n_out = 1, .n_attrs = 1,
                   .attrs = {KC_INT("chunk", 60000)}};
    kc_tensor_dense(&s.in[0], 0, NN_F32, 2, (int64_t[]){2, 70000});
    kc_tensor_dense(&s.out[0], 0, NN_F32, 2, (int64_t[]){2, 70000});
    CU_ASSERT_EQUAL(compile_alone(&cfg, &s, &err), NP_ERR_RANGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "chunks of 60000 columns do not fit"));
    /* rows that need chunks, so many on one core that their per-row statistics alone exceed a
     * 32 KiB scratchpad (softmax: M and S in fp32 per row, 2 x 4096 x 4 = 32 KiB, plus its
     * 4 KiB of slack; layernorm: four fp32 figures per row): no chunk width is left */
    arch_config small = arch("tpu-pod", "core.sram_bytes=32768");
    for (int op = 0; op < 2; op++) {
        kc_kernel w = {.op = op ? NN_OP_LAYERNORM : NN_OP_SOFTMAX, .n_in = 1, .n_out = 1};
        kc_tensor_dense(&w.in[0], 0, NN_F32, 2, (int64_t[]){4096, 20000});
        kc_tensor_dense(&w.out[0], 0, NN_F32, 2, (int64_t[]){4096, 20000});
        CU_ASSERT_EQUAL(compile_alone(&small, &w, &err), NP_ERR_RANGE);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "rows of 20000 elements: not even a chunk of them "
                                               "fits the scratchpad (32768 bytes free)"));
    }
    /* cross-entropy: float labels; labels of the wrong shape */
    kc_kernel c = {.op = NN_OP_CROSS_ENTROPY, .n_in = 2, .n_out = 1};
    kc_tensor_dense(&c.in[0], 0, NN_F32, 2, (int64_t[]){4, 8});
    kc_tensor_dense(&c.in[1], 0, NN_F32, 1, (int64_t[]){4});
    kc_tensor_dense(&c.out[0], 0, NN_F32, 0, NULL);
    CU_ASSERT_EQUAL(compile_alone(&cfg, &c, &err), NP_ERR_INCONSISTENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "cross_entropy: labels are f32: i32 or i8"));
    kc_tensor_dense(&c.in[1], 0, NN_I32, 1, (int64_t[]){5});
    CU_ASSERT_EQUAL(compile_alone(&cfg, &c, &err), NP_ERR_INCONSISTENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "the logits' shape without the last dim"));
    /* rope: odd Dh */
    kc_kernel r = {.op = NN_OP_ROPE, .n_in = 1, .n_out = 1};
    kc_tensor_dense(&r.in[0], 0, NN_F32, 2, (int64_t[]){4, 7});
    kc_tensor_dense(&r.out[0], 0, NN_F32, 2, (int64_t[]){4, 7});
    CU_ASSERT_EQUAL(compile_alone(&cfg, &r, &err), NP_ERR_INCONSISTENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "rope: x must be [..., S, Dh] with Dh even"));
}
