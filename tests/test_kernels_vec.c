/* test_kernels_vec.c — the vector kernels (compiler/kc_elem.c, kc_optim.c, kc_reduce.c and
 * the engine kc_vec.c) run functionally on the core model (sim/krun.h) against the
 * framework's reference executor, on seeded shapes that are not multiples of the lanes or
 * the tiles, for every dtype each op takes; plus the schedule's properties (one HBM pass,
 * program size, overlap). The tolerances are docs/compiler.md's ("Values of the vector
 * kernels"). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "core.h"
#include "harness.h"
#include "kc_fuse.h"
#include "kernel.h"
#include "krun.h"
#include "nn.h"
#include "pass.h"
#include "rng.h"

static arch_config arch(const char *preset, const char *set)
{
    arch_config cfg;
    np_err e = {0};
    const char *sets[1] = {set};
    CU_ASSERT_EQUAL_FATAL(arch_resolve(preset, sets, set ? 1 : 0, &cfg, &e), NP_OK);
    return cfg;
}

/* How to make an input's values. */
typedef enum { V_NORMAL, V_POSITIVE, V_AWAY_FROM_0, V_INTEGER } vals;

/* Seeded values representable in t's dtype. */
static void fill(nn_tensor *t, uint64_t seed, vals how)
{
    CU_ASSERT_FATAL(nn_tensor_randn(t, seed, 1.0));
    for (int64_t i = 0; i < nn_numel(t); i++) {
        float v = t->data[i];
        switch (how) {
        case V_POSITIVE: v = fabsf(v) + 0.125f; break;
        case V_AWAY_FROM_0: v = v < 0 ? v - 0.5f : v + 0.5f; break;
        case V_INTEGER: v = fminf(fmaxf(nearbyintf(v * 20), -100), 100); break;
        default: break;
        }
        switch (t->dtype) {
        case NN_BF16: v = nn_round_bf16(v); break;
        case NN_F16: v = nn_round_f16(v); break;
        case NN_I8: v = fminf(fmaxf(nearbyintf(v), -127), 127); break;
        case NN_I32: v = nearbyintf(v); break;
        default: break;
        }
        t->data[i] = v;
    }
}

/* The epilogue of k as framework ops after y. */
static nn_tensor *epilogue(nn_graph *g, const kc_kernel *k, nn_tensor *y, nn_tensor **args)
{
    for (int i = 0; i < k->n_epi && y; i++) {
        const kc_epi *s = &k->epi[i];
        nn_tensor *a = args[i], *l = s->swap ? a : y, *r = s->swap ? y : a;
        double fp[NN_MAX_FPARAMS] = {s->f};
        switch (s->op) {
        case NN_OP_ADD: y = nn_add(g, l, r); break;
        case NN_OP_SUB: y = nn_sub(g, l, r); break;
        case NN_OP_MUL: y = nn_mul(g, l, r); break;
        case NN_OP_DIV: y = nn_div(g, l, r); break;
        case NN_OP_SCALE: y = nn_scale(g, y, s->f); break;
        case NN_OP_RELU: y = nn_node(g, NN_OP_RELU, 1, &y, NULL, fp); break;
        case NN_OP_GELU: y = nn_gelu(g, y); break;
        case NN_OP_SILU: y = nn_silu(g, y); break;
        case NN_OP_TANH: y = nn_tanh(g, y); break;
        case NN_OP_EXP: y = nn_exp(g, y); break;
        case NN_OP_LOG: y = nn_log(g, y); break;
        case NN_OP_CAST: y = nn_cast(g, y, s->to); break;
        case NN_OP_DROPOUT: y = nn_dropout(g, y, s->f, s->seed); break;
        case NN_OP_CAUSAL_MASK: y = nn_causal_mask(g, y, s->f); break;
        default: y = nn_node(g, s->op, 2, (nn_tensor *[]){l, r}, NULL, fp); break;
        }
    }
    return y;
}

/* The result of one check. */
typedef struct check {
    int64_t n, bad;
    double max_abs;
    kc_result res;
    uint64_t cycles, hbm_read, hbm_write;
} check;

/* Runs k (shapes, strides, dtypes, attributes, epilogue, placement; addresses are krun's)
 * functionally and compares every output with the framework's: |got - want| <= atol + rtol
 * |want|. how[i] makes input i's values (epilogue operands: how[n_in + i]). */
static check run_check(const arch_config *cfg, const kc_kernel *k, const vals *how, uint64_t seed,
                       double rtol, double atol)
{
    check c = {0};
    nn_graph *g = nn_graph_new(seed);
    krun_io io;
    memset(&io, 0, sizeof io);
    nn_tensor *args[KC_MAX_EPI] = {0}, *want[KC_MAX_OUT] = {0}, *copy[KC_MAX_IN] = {0};
    for (int i = 0; i < k->n_in; i++) {
        const kc_tensor *t = &k->in[i];
        io.in[i] = nn_input(g, "in", t->dtype, t->ndim, t->shape);
        fill(io.in[i], seed + (uint64_t)i, how ? how[i] : V_NORMAL);
        /* the reference reads copies: an in-place update must not change the kernel's inputs */
        copy[i] = nn_input(g, "copy", t->dtype, t->ndim, t->shape);
        CU_ASSERT_FATAL(nn_tensor_set(copy[i], io.in[i]->data));
    }
    for (int i = 0; i < k->n_epi; i++)
        if (k->epi[i].has_arg) {
            const kc_tensor *t = &k->epi[i].arg;
            io.epi[i] = args[i] = nn_input(g, "arg", t->dtype, t->ndim, t->shape);
            fill(args[i], seed + 100 + (uint64_t)i, how ? how[k->n_in + i] : V_NORMAL);
        }
    const kc_kernel_def *d = kc_kernel_find(k->op);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(d->reference(g, k, copy, want, &e), NP_OK);
    if (k->n_out == 1)
        want[0] = epilogue(g, k, want[0], args);
    CU_ASSERT_PTR_NOT_NULL_FATAL(want[0]);
    for (int i = 0; i < k->n_out; i++) {
        io.out[i] = nn_input(g, "got", k->out[i].dtype, k->out[i].ndim, k->out[i].shape);
        CU_ASSERT_FATAL(nn_tensor_alloc(io.out[i]));
    }
    krun_result r;
    np_status st = krun_kernel(cfg, k, &io, &(krun_opts){.functional = true}, &r, &e);
    if (st != NP_OK)
        fprintf(stderr, "%s: %s\n", nn_op_name(k->op), e.msg);
    CU_ASSERT_EQUAL_FATAL(st, NP_OK);
    CU_ASSERT_EQUAL_FATAL(nn_graph_compute(g, &e), NP_OK);
    for (int i = 0; i < k->n_out; i++) {
        krun_diff df = krun_compare(io.out[i], want[i], rtol, atol);
        c.n += df.n, c.bad += df.bad;
        if (df.max_abs > c.max_abs)
            c.max_abs = df.max_abs;
        if (df.bad)
            fprintf(stderr, "%s output %d: %lld of %lld bad, worst %lld: got %.9g want %.9g\n",
                    nn_op_name(k->op), i, (long long)df.bad, (long long)df.n,
                    (long long)df.worst, io.out[i]->data[df.worst], want[i]->data[df.worst]);
    }
    c.res = r.kernel;
    c.cycles = r.report->total_cycles;
    c.hbm_read = r.report->hbm_read_bytes;
    c.hbm_write = r.report->hbm_write_bytes;
    krun_result_free(&r);
    nn_graph_free(g);
    return c;
}

/* One ulp of dtype at 1 (the relative spacing): the rounding of one step. */
static double ulp(nn_dtype t)
{
    switch (t) {
    case NN_BF16: return 0x1p-7;
    case NN_F16: return 0x1p-10;
    case NN_F32: return 0x1p-23;
    default: return 0;
    }
}

static kc_tensor dense(nn_dtype t, int ndim, const int64_t *shape)
{
    kc_tensor x;
    kc_tensor_dense(&x, 0, t, ndim, shape);
    return x;
}

static const nn_dtype floats[3] = {NN_BF16, NN_F16, NN_F32};

/* ---- elementwise ops ---------------------------------------------------------------------------- */

TEST(binary_ops_with_broadcasting_equal_the_reference_exactly)
{
    arch_config cfg = arch("tiny", NULL);
    /* (a, b) shapes: equal, a row (bias), a column, a scalar, b broadcast on the left, both
     * broadcast (outer product), a broadcast middle dim */
    static const struct {
        int na, nb;
        int64_t a[4], b[4];
    } shapes[] = {
        {2, 2, {37, 45}, {37, 45}},   {2, 1, {23, 29}, {29}},       {2, 2, {19, 33}, {19, 1}},
        {3, 0, {3, 7, 11}, {0}},      {3, 2, {5, 13, 9}, {13, 9}},  {2, 2, {17, 1}, {1, 21}},
        {3, 3, {4, 1, 27}, {4, 9, 27}}, {1, 1, {1001}, {1001}},
    };
    static const nn_op ops[4] = {NN_OP_ADD, NN_OP_SUB, NN_OP_MUL, NN_OP_DIV};
    int cases = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int o = 0; o < 4; o++)
            for (int d = 0; d < 3; d++) {
                kc_kernel k = {.op = ops[o], .n_in = 2, .n_out = 1,
                               .place = {0, 0, (uint32_t)(1 + (s + o) % 2)}};
                k.in[0] = dense(floats[d], shapes[s].na, shapes[s].a);
                k.in[1] = dense(floats[d], shapes[s].nb, shapes[s].b);
                int nd = shapes[s].na > shapes[s].nb ? shapes[s].na : shapes[s].nb;
                int64_t out[4];
                for (int i = 0; i < nd; i++) {
                    int ia = i - (nd - shapes[s].na), ib = i - (nd - shapes[s].nb);
                    int64_t x = ia >= 0 ? shapes[s].a[ia] : 1, y = ib >= 0 ? shapes[s].b[ib] : 1;
                    out[i] = x == 1 ? y : x;
                }
                k.out[0] = dense(floats[d], nd, out);
                vals how[2] = {V_NORMAL, ops[o] == NN_OP_DIV ? V_AWAY_FROM_0 : V_NORMAL};
                check c = run_check(&cfg, &k, how, 10 + s * 16 + (uint64_t)o * 4 + (uint64_t)d, 0, 0);
                CU_ASSERT_EQUAL(c.bad, 0);
                /* again in small tiles: loops, shifted last tiles, pairs of tiles */
                k.attrs[k.n_attrs++] = KC_INT("tile", 97);
                c = run_check(&cfg, &k, how, 10 + s * 16 + (uint64_t)o * 4 + (uint64_t)d, 0, 0);
                CU_ASSERT_EQUAL(c.bad, 0);
                cases++;
            }
    CU_ASSERT_EQUAL(cases, 96);
}

TEST(unary_ops_and_activation_gradients_equal_the_reference)
{
    arch_config cfg = arch("tiny", NULL);
    static const struct {
        nn_op op;
        int n_in;
        vals how;
        const char *attr;
        double v;
    } ops[] = {
        {NN_OP_SCALE, 1, V_NORMAL, "s", -0.375},  {NN_OP_RELU, 1, V_NORMAL, NULL, 0},
        {NN_OP_RELU, 1, V_INTEGER, "clamp", 6},   {NN_OP_GELU, 1, V_NORMAL, NULL, 0},
        {NN_OP_SILU, 1, V_NORMAL, NULL, 0},       {NN_OP_TANH, 1, V_NORMAL, NULL, 0},
        {NN_OP_EXP, 1, V_NORMAL, NULL, 0},        {NN_OP_LOG, 1, V_POSITIVE, NULL, 0},
        {NN_OP_RELU_GRAD, 2, V_NORMAL, NULL, 0},  {NN_OP_RELU_GRAD, 2, V_INTEGER, "clamp", 6},
        {NN_OP_GELU_GRAD, 2, V_NORMAL, NULL, 0},  {NN_OP_SILU_GRAD, 2, V_NORMAL, NULL, 0},
        {NN_OP_TANH_GRAD, 2, V_NORMAL, NULL, 0},
    };
    static const int64_t shape[3] = {3, 17, 23};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        for (int d = 0; d < 3; d++) {
            kc_kernel k = {.op = ops[i].op, .n_in = ops[i].n_in, .n_out = 1,
                           .place = {0, 0, (uint32_t)(1 + (i + d) % 2)}};
            if (ops[i].attr)
                k.attrs[k.n_attrs++] = KC_REAL(ops[i].attr, ops[i].v);
            for (int j = 0; j < k.n_in; j++)
                k.in[j] = dense(floats[d], 3, shape);
            k.out[0] = dense(floats[d], 3, shape);
            vals how[2] = {ops[i].how, V_NORMAL};
            /* The vector unit computes what the framework computes, in double, and rounds
             * once: exact. Scale's factor is an fp32 immediate; silu and the gradients of
             * gelu and silu order their double arithmetic differently from the framework, so
             * a result near a rounding boundary may round the other way: one ulp of fp32
             * before the final rounding. */
            nn_op op = ops[i].op;
            double rtol = op == NN_OP_SILU || op == NN_OP_SILU_GRAD || op == NN_OP_GELU_GRAD ||
                                  op == NN_OP_SCALE
                              ? 0x1p-23
                              : 0;
            check c = run_check(&cfg, &k, how, 200 + i * 3 + (uint64_t)d, rtol, 0);
            CU_ASSERT_EQUAL(c.bad, 0);
            k.attrs[k.n_attrs++] = KC_INT("tile", 100);
            c = run_check(&cfg, &k, how, 200 + i * 3 + (uint64_t)d, rtol, 0);
            CU_ASSERT_EQUAL(c.bad, 0);
        }
}

TEST(cast_converts_between_every_pair_of_dtypes)
{
    arch_config cfg = arch("tiny", NULL);
    static const int64_t shape[2] = {13, 31};
    int pairs = 0;
    for (int a = 0; a < NN_DTYPE_COUNT; a++)
        for (int b = 0; b < NN_DTYPE_COUNT; b++) {
            kc_kernel k = {.op = NN_OP_CAST, .n_in = 1, .n_out = 1, .place = {0, 0, 2}};
            k.in[0] = dense((nn_dtype)a, 2, shape);
            k.out[0] = dense((nn_dtype)b, 2, shape);
            /* integers every type holds exactly (|v| <= 100), so conversions to integer
             * types, which the framework does not round, are exact too */
            vals how[1] = {V_INTEGER};
            check c = run_check(&cfg, &k, how, 300 + (uint64_t)(a * 5 + b), 0, 0);
            CU_ASSERT_EQUAL(c.bad, 0);
            pairs++;
        }
    CU_ASSERT_EQUAL(pairs, 25);
}

TEST(dropout_makes_the_frameworks_mask_for_the_same_seed)
{
    arch_config cfg = arch("tiny", NULL);
    static const int64_t s3[3] = {3, 29, 37}, s1[1] = {4099};
    for (int d = 0; d < 3; d++)
        for (int sh = 0; sh < 2; sh++) {
            kc_kernel k = {.op = NN_OP_DROPOUT, .n_in = 1, .n_out = 1,
                           .place = {0, 0, (uint32_t)(1 + sh)}, .n_attrs = 2};
            k.attrs[0] = KC_REAL("p", 0.3);
            k.attrs[1] = KC_INT("seed", 0x5eed0000 + d);
            k.in[0] = sh ? dense(floats[d], 1, s1) : dense(floats[d], 3, s3);
            k.out[0] = k.in[0];
            /* the mask is the framework's bit for bit; the kept values are x x 1/(1 - p) with
             * the factor as an fp32 immediate: within an ulp of the output */
            check c = run_check(&cfg, &k, NULL, 400 + (uint64_t)(d * 2 + sh), ulp(floats[d]), 0);
            CU_ASSERT_EQUAL(c.bad, 0);
            k.attrs[k.n_attrs++] = KC_INT("tile", 61);
            c = run_check(&cfg, &k, NULL, 400 + (uint64_t)(d * 2 + sh), ulp(floats[d]), 0);
            CU_ASSERT_EQUAL(c.bad, 0);
        }
}

TEST(causal_mask_fills_above_the_diagonal_of_the_last_two_dims)
{
    arch_config cfg = arch("tiny", NULL);
    static const int64_t shapes[3][4] = {{2, 3, 19, 19}, {1, 1, 7, 40}, {1, 1, 1, 300}};
    for (int s = 0; s < 3; s++)
        for (int d = 0; d < 3; d++) {
            kc_kernel k = {.op = NN_OP_CAUSAL_MASK, .n_in = 1, .n_out = 1,
                           .place = {0, 0, (uint32_t)(1 + (s + d) % 2)}, .n_attrs = 1};
            k.attrs[0] = KC_REAL("fill", d == 2 ? -INFINITY : -1e4);
            k.in[0] = dense(floats[d], s == 2 ? 1 : 4, s == 2 ? shapes[s] + 3 : shapes[s]);
            k.out[0] = k.in[0];
            check c = run_check(&cfg, &k, NULL, 500 + (uint64_t)(s * 3 + d), 0, 0);
            CU_ASSERT_EQUAL(c.bad, 0);
            k.attrs[k.n_attrs++] = KC_INT("tile", 50);
            c = run_check(&cfg, &k, NULL, 500 + (uint64_t)(s * 3 + d), 0, 0);
            CU_ASSERT_EQUAL(c.bad, 0);
        }
}

/* ---- optimizer updates -------------------------------------------------------------------------- */

TEST(optimizer_updates_in_place_equal_the_frameworks_with_fp32_master_weights)
{
    arch_config cfg = arch("tiny", NULL);
    static const struct {
        nn_op op;
        double wd, mu;
        int64_t step;
    } ups[] = {
        {NN_OP_SGD_UPDATE, 0, 0.9, 1},   {NN_OP_SGD_UPDATE, 1e-2, 0.9, 7},
        {NN_OP_ADAM_UPDATE, 0, 0, 1},    {NN_OP_ADAM_UPDATE, 1e-2, 0, 5},
        {NN_OP_ADAMW_UPDATE, 0, 0, 3},   {NN_OP_ADAMW_UPDATE, 0.1, 0, 12},
    };
    static const int64_t shape[2] = {37, 41};
    for (size_t u = 0; u < sizeof ups / sizeof ups[0]; u++)
        for (int d = 0; d < 3; d++) { /* the gradient's dtype */
            bool sgd = ups[u].op == NN_OP_SGD_UPDATE;
            kc_kernel k = {.op = ups[u].op, .n_in = sgd ? 3 : 4, .n_out = sgd ? 2 : 3,
                           .place = {0, 0, (uint32_t)(1 + (u + d) % 2)}};
            k.attrs[k.n_attrs++] = KC_REAL("lr", sgd ? 0.05 : 1e-2);
            k.attrs[k.n_attrs++] = KC_REAL("weight_decay", ups[u].wd);
            k.attrs[k.n_attrs++] = KC_INT("step", ups[u].step);
            if (sgd)
                k.attrs[k.n_attrs++] = KC_REAL("momentum", ups[u].mu);
            if (d == 1)
                k.attrs[k.n_attrs++] = KC_INT("tile", 200);
            for (int i = 0; i < k.n_in; i++)
                k.in[i] = dense(i == 1 ? floats[d] : NN_F32, 2, shape);
            k.out[0] = k.in[0];
            for (int i = 1; i < k.n_out; i++)
                k.out[i] = k.in[i + 1];
            /* m and v as a training run has them: m ~ gradients, v > 0 */
            vals how[4] = {V_NORMAL, V_NORMAL, V_NORMAL, V_POSITIVE};
            /* the intermediates are fp32 roundings where the framework keeps doubles: a few
             * fp32 ulps of the largest magnitude involved (the parameter, the state) */
            check c = run_check(&cfg, &k, how, 600 + u * 3 + (uint64_t)d, 8 * 0x1p-24, 8 * 0x1p-24);
            CU_ASSERT_EQUAL(c.bad, 0);
            /* one pass: every operand read and written once (but for a few elements where
             * the last tile of a core overlaps its neighbour), as the kernel expects */
            CU_ASSERT_EQUAL(c.res.hbm_read_bytes, c.hbm_read);
            CU_ASSERT_EQUAL(c.res.hbm_write_bytes, c.hbm_write);
            CU_ASSERT(c.hbm_read + c.hbm_write <= c.res.hbm_bytes_min * 101 / 100);
        }
}

/* The tile of a compiled vector kernel, from its schedule ("..., tiles R x C ..."). */
static uint64_t tile_elems(const kc_result *r)
{
    const char *t = strstr(r->schedule, "tiles ");
    unsigned long long rows = 0, cols = 0;
    CU_ASSERT_FATAL(t && sscanf(t, "tiles %llu x %llu", &rows, &cols) == 2);
    return rows * cols;
}

static uint64_t align64_(uint64_t v) { return (v + 63) / 64 * 64; }

TEST(updates_whose_core_share_fits_only_streamed_pick_tiles_that_fit_the_scratchpad)
{
    /* An optimizer update over fp32 operands, every output written over its input: per tile
     * element, double-buffered, n_in x 4 B x 2 of inputs and 3 fp32 scratch tiles x 2 (the
     * outputs share the inputs' buffers). A core's whole share as one tile would load every
     * input once (one buffer each), and then the outputs need buffers of their own: more.
     * Shares where the first fits and the second does not used to fail ("tiles of 1 x N
     * elements need ... more than the ... free"). Each buffer is rounded up to 64 bytes.
     *   tiny (64 KiB, 2 cores), adamw/adam over 2200: 1100 a core, 4416 B a buffer:
     *     streamed 8 + 6 buffers = 61,824 B fit; hoisted 4 + 6 + 6 = 70,656 B do not;
     *   tiny, sgd (3 inputs, 2 outputs) over 2600: 1300 a core, 5248 B a buffer:
     *     streamed 6 + 6 = 62,976 B; hoisted 3 + 4 + 6 = 68,224 B;
     *   h100-sxm (256 KiB, 132 cores), adamw over 589,824 (a kernel of the 16B row of
     *     validation/megatron-core-h100): 4469 a core, 17,920 B: streamed 14 x 17,920 = 250,880 B; hoisted 16 x
     *     17,920 = 286,720 B. */
    static const struct {
        const char *preset;
        nn_op op;
        int64_t n;
        uint32_t cores;
        uint64_t sram;
        bool run; /* functionally, against the framework (the small ones) */
    } cases[] = {
        {"tiny", NN_OP_ADAMW_UPDATE, 2200, 2, 64 << 10, true},
        {"tiny", NN_OP_ADAM_UPDATE, 2200, 2, 64 << 10, true},
        {"tiny", NN_OP_SGD_UPDATE, 2600, 2, 64 << 10, true},
        {"h100-sxm", NN_OP_ADAMW_UPDATE, 589824, 132, 256 << 10, false},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        arch_config cfg = arch(cases[c].preset, NULL);
        CU_ASSERT_EQUAL_FATAL(cfg.core.sram_bytes, cases[c].sram);
        bool sgd = cases[c].op == NN_OP_SGD_UPDATE;
        kc_kernel k = {.op = cases[c].op, .n_in = sgd ? 3 : 4, .n_out = sgd ? 2 : 3,
                       .place = {0, 0, cases[c].cores}};
        k.attrs[k.n_attrs++] = KC_REAL("lr", 1e-2);
        k.attrs[k.n_attrs++] = KC_REAL("weight_decay", 0.1);
        k.attrs[k.n_attrs++] = KC_INT("step", 3);
        if (sgd)
            k.attrs[k.n_attrs++] = KC_REAL("momentum", 0.9);
        for (int i = 0; i < k.n_in; i++)
            k.in[i] = dense(NN_F32, 1, &cases[c].n);
        k.out[0] = k.in[0];
        for (int i = 1; i < k.n_out; i++)
            k.out[i] = k.in[i + 1];
        kc_result res;
        if (cases[c].run) {
            vals how[4] = {V_NORMAL, V_NORMAL, V_NORMAL, V_POSITIVE};
            check ch = run_check(&cfg, &k, how, 700 + c, 8 * 0x1p-24, 8 * 0x1p-24);
            CU_ASSERT_EQUAL(ch.bad, 0);
            res = ch.res;
        } else {
            kc_prog *p;
            np_err e = {0};
            CU_ASSERT_EQUAL_FATAL(kc_prog_new(&cfg, &(kc_prog_opts){.cores = cases[c].cores}, &p,
                                              &e), NP_OK);
            for (int i = 0; i < k.n_in; i++)
                CU_ASSERT_EQUAL_FATAL(kc_prog_bss(p, NULL, kc_tensor_bytes(&k.in[i]),
                                                  &k.in[i].addr, &e), NP_OK);
            k.out[0] = k.in[0];
            for (int i = 1; i < k.n_out; i++)
                k.out[i] = k.in[i + 1];
            np_status st = kc_compile(p, &k, &res, &e);
            if (st != NP_OK)
                fprintf(stderr, "%s: %s\n", nn_op_name(k.op), e.msg);
            CU_ASSERT_EQUAL_FATAL(st, NP_OK);
            kc_prog_free(p);
        }
        /* the tile chosen fits, streamed, in the scratchpad */
        uint64_t n = tile_elems(&res);
        CU_ASSERT(n > 0 && n < (uint64_t)cases[c].n / cases[c].cores + 1);
        uint64_t block = (uint64_t)(2 * k.n_in + 2 * 3) * align64_(n * 4);
        CU_ASSERT(block <= cases[c].sram);
    }
}

/* ---- layouts, chains, the schedule ------------------------------------------------------------- */

/* Strides of a dense tensor whose rows (last dim) are pad elements longer than its shape. */
static kc_tensor padded(nn_dtype t, int ndim, const int64_t *shape, int64_t pad)
{
    kc_tensor x = dense(t, ndim, shape);
    int64_t e = (int64_t)nn_dtype_size(t), s = (shape[ndim - 1] + pad) * e;
    for (int d = ndim - 2; d >= 0; d--) {
        x.stride[d] = s;
        s *= shape[d];
    }
    return x;
}

TEST(strided_transposed_and_padded_operands_equal_the_reference)
{
    arch_config cfg = arch("tiny", NULL);
    static const int64_t shape[2] = {21, 34};
    for (int d = 0; d < 3; d++)
        for (int cores = 1; cores <= 2; cores++) {
            /* a: column-major (a transposed view); b: rows padded; out: rows padded */
            kc_kernel k = {.op = NN_OP_SUB, .n_in = 2, .n_out = 1, .place = {0, 0, (uint32_t)cores}};
            k.in[0] = dense(floats[d], 2, shape);
            int64_t e = (int64_t)nn_dtype_size(floats[d]);
            k.in[0].stride[0] = e, k.in[0].stride[1] = shape[0] * e;
            k.in[1] = padded(floats[d], 2, shape, 3);
            k.out[0] = padded(floats[d], 2, shape, 5);
            check c = run_check(&cfg, &k, NULL, 700 + (uint64_t)(d * 2 + cores), 0, 0);
            CU_ASSERT_EQUAL(c.bad, 0);
            /* the epilogue operand strided too: a column of a wider matrix */
            k.n_epi = 1;
            k.epi[0] = (kc_epi){.op = NN_OP_MUL, .has_arg = true};
            k.epi[0].arg = padded(floats[d], 2, (int64_t[]){21, 1}, 6);
            c = run_check(&cfg, &k, NULL, 710 + (uint64_t)(d * 2 + cores), 0, 0);
            CU_ASSERT_EQUAL(c.bad, 0);
        }
}

TEST(fused_chains_equal_the_frameworks_op_by_op_values_in_one_hbm_pass)
{
    arch_config cfg = arch("tiny", NULL);
    static const int64_t x2[2] = {29, 37}, row[1] = {37}, col[2] = {29, 1}, s4[4] = {2, 3, 11, 11};
    for (int d = 0; d < 3; d++) {
        nn_dtype t = floats[d];
        /* bias + gelu + residual + scale + cast to fp32 + relu6 + cast back */
        kc_kernel k = {.op = NN_OP_ADD, .n_in = 2, .n_out = 1, .n_epi = 6, .place = {0, 0, 2}};
        k.in[0] = dense(t, 2, x2), k.in[1] = dense(t, 1, row);
        k.epi[0] = (kc_epi){.op = NN_OP_GELU};
        k.epi[1] = (kc_epi){.op = NN_OP_ADD, .has_arg = true, .arg = dense(t, 2, x2)};
        k.epi[2] = (kc_epi){.op = NN_OP_SCALE, .f = 0.75};
        k.epi[3] = (kc_epi){.op = NN_OP_CAST, .to = NN_F32};
        k.epi[4] = (kc_epi){.op = NN_OP_RELU, .f = 6};
        k.epi[5] = (kc_epi){.op = NN_OP_CAST, .to = t};
        k.out[0] = dense(t, 2, x2);
        check c = run_check(&cfg, &k, NULL, 800 + (uint64_t)d, 2 * 0x1p-24, 0);
        CU_ASSERT_EQUAL(c.bad, 0);
        /* no HBM round trip: the inputs read once (the bias once per core), the output
         * written once */
        CU_ASSERT_EQUAL(c.hbm_read + c.hbm_write,
                        c.res.hbm_bytes_min + 37 * nn_dtype_size(t)); /* + core 1's bias copy */
        CU_ASSERT_EQUAL(c.res.flops, 5u * 29 * 37); /* 7 steps, the casts counting none */
        k.attrs[k.n_attrs++] = KC_INT("tile", 100);
        c = run_check(&cfg, &k, NULL, 800 + (uint64_t)d, 2 * 0x1p-24, 0);
        CU_ASSERT_EQUAL(c.bad, 0);

        /* operands on the other side and broadcast: col / x, row - x, then exp, log, and the
         * gradients with the running value as dy (swap) */
        kc_kernel g = {.op = NN_OP_MUL, .n_in = 2, .n_out = 1, .n_epi = 5, .place = {0, 0, 1}};
        g.in[0] = dense(t, 2, x2), g.in[1] = dense(t, 2, x2);
        g.epi[0] = (kc_epi){.op = NN_OP_DIV, .has_arg = true, .swap = true, .arg = dense(t, 2, col)};
        g.epi[1] = (kc_epi){.op = NN_OP_SUB, .has_arg = true, .swap = true, .arg = dense(t, 1, row)};
        g.epi[2] = (kc_epi){.op = NN_OP_TANH};
        g.epi[3] = (kc_epi){.op = NN_OP_GELU_GRAD, .has_arg = true, .swap = true,
                            .arg = dense(t, 2, x2)};
        g.epi[4] = (kc_epi){.op = NN_OP_RELU_GRAD, .has_arg = true, .arg = dense(t, 2, x2)};
        g.out[0] = dense(t, 2, x2);
        vals how[7] = {V_AWAY_FROM_0, V_AWAY_FROM_0, V_NORMAL, V_NORMAL, V_NORMAL, V_NORMAL,
                       V_NORMAL};
        c = run_check(&cfg, &g, how, 810 + (uint64_t)d, 2 * 0x1p-24, 0);
        CU_ASSERT_EQUAL(c.bad, 0);
        g.attrs[g.n_attrs++] = KC_INT("tile", 80);
        c = run_check(&cfg, &g, how, 810 + (uint64_t)d, 2 * 0x1p-24, 0);
        CU_ASSERT_EQUAL(c.bad, 0);

        /* attention's pre-softmax chain: scale, causal mask, then dropout */
        kc_kernel a = {.op = NN_OP_SCALE, .n_in = 1, .n_out = 1, .n_epi = 2, .place = {0, 0, 2},
                       .n_attrs = 1, .attrs = {KC_REAL("s", 0.125)}};
        a.in[0] = dense(t, 4, s4), a.out[0] = dense(t, 4, s4);
        a.epi[0] = (kc_epi){.op = NN_OP_CAUSAL_MASK, .f = -1e4};
        a.epi[1] = (kc_epi){.op = NN_OP_DROPOUT, .f = 0.25, .seed = 77 + (uint64_t)d};
        c = run_check(&cfg, &a, NULL, 820 + (uint64_t)d, ulp(t), 0);
        CU_ASSERT_EQUAL(c.bad, 0);
        a.attrs[a.n_attrs++] = KC_INT("tile", 30);
        c = run_check(&cfg, &a, NULL, 820 + (uint64_t)d, ulp(t), 0);
        CU_ASSERT_EQUAL(c.bad, 0);
    }
}

/* Runs prog functionally with n inputs (fp32 bytes at addrs) and reads one output. */
static void run_prog(const arch_config *cfg, isa_program *prog, int n, const uint64_t *at,
                     float *const *vals_in, const uint64_t *bytes, uint64_t out_at, float *out,
                     uint64_t out_bytes, uint64_t *cycles)
{
    core_hbm_io in[8], o = {out_at, out, out_bytes, 0};
    for (int i = 0; i < n; i++)
        in[i] = (core_hbm_io){at[i], vals_in[i], bytes[i], 0};
    core_sim_opts so = {.functional = true, .inputs = in, .n_inputs = (size_t)n, .outputs = &o,
                        .n_outputs = 1};
    core_report *rep;
    np_err err = {0};
    CU_ASSERT_EQUAL_FATAL(core_sim_run_opts(cfg, prog, &so, NULL, &rep, &err), NP_OK);
    if (cycles)
        *cycles = rep->total_cycles;
    core_report_free(rep);
}

TEST(an_update_in_place_gives_what_the_update_into_other_buffers_gives)
{
    /* Adam with p, m, v updated where they are, over a range whose last tile overlaps the one
     * before it (1517 elements on 2 cores, tiny's scratchpad: several tiles a core) */
    arch_config cfg = arch("tiny", NULL);
    int64_t n = 1517;
    uint64_t bytes = (uint64_t)n * 4;
    np_err err = {0};
    kc_kernel k = {.op = NN_OP_ADAM_UPDATE, .n_in = 4, .n_out = 3, .place = {0, 0, 2},
                   .n_attrs = 2, .attrs = {KC_REAL("lr", 0.01), KC_INT("step", 3)}};
    kc_prog *p;
    CU_ASSERT_EQUAL_FATAL(kc_prog_new(&cfg, &(kc_prog_opts){.cores = 2}, &p, &err), NP_OK);
    uint64_t at[4];
    float *v[4];
    for (int i = 0; i < 4; i++) {
        CU_ASSERT_EQUAL_FATAL(kc_prog_bss(p, NULL, bytes, &at[i], &err), NP_OK);
        kc_tensor_dense(&k.in[i], at[i], NN_F32, 1, &n);
        v[i] = malloc(bytes);
        for (int64_t j = 0; j < n; j++)
            v[i][j] = (float)((j * 7 + i * 13) % 17) / 8.0f - (i == 3 ? 0 : 1);
    }
    k.out[0] = k.in[0], k.out[1] = k.in[2], k.out[2] = k.in[3];
    kc_result r;
    CU_ASSERT_EQUAL_FATAL(kc_compile(p, &k, &r, &err), NP_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.schedule, "2 cores"));
    CU_ASSERT_EQUAL_FATAL(kc_prog_finish(p, &err), NP_OK);
    isa_program *prog = kc_prog_take(p);
    kc_prog_free(p);
    float *in_place[3];
    for (int o = 0; o < 3; o++) {
        in_place[o] = malloc(bytes);
        run_prog(&cfg, prog, 4, at, v, (uint64_t[]){bytes, bytes, bytes, bytes},
                 at[o ? o + 1 : 0], in_place[o], bytes, NULL);
    }
    isa_program_free(prog);
    /* the same update into fresh buffers (krun) */
    nn_graph *g = nn_graph_new(1);
    krun_io io;
    memset(&io, 0, sizeof io);
    for (int i = 0; i < 4; i++) {
        io.in[i] = nn_input(g, "in", NN_F32, 1, &n);
        CU_ASSERT_FATAL(nn_tensor_set(io.in[i], v[i]));
    }
    for (int o = 0; o < 3; o++) {
        io.out[o] = nn_input(g, "out", NN_F32, 1, &n);
        CU_ASSERT_FATAL(nn_tensor_alloc(io.out[o]));
    }
    krun_result kr;
    CU_ASSERT_EQUAL_FATAL(krun_kernel(&cfg, &k, &io, &(krun_opts){.functional = true}, &kr, &err),
                          NP_OK);
    krun_result_free(&kr);
    for (int o = 0; o < 3; o++) {
        CU_ASSERT_EQUAL(memcmp(in_place[o], io.out[o]->data, bytes), 0);
        free(in_place[o]);
    }
    nn_graph_free(g);
    for (int i = 0; i < 4; i++)
        free(v[i]);
}

TEST(program_size_does_not_grow_with_the_tile_count)
{
    arch_config cfg = arch("tiny", NULL);
    uint64_t insns[2];
    for (int i = 0; i < 2; i++) {
        int64_t shape[2] = {i ? 4001 : 401, 97}; /* 10 x the tiles */
        kc_kernel k = {.op = NN_OP_ADD, .n_in = 2, .n_out = 1, .n_epi = 1, .place = {0, 0, 2}};
        k.in[0] = dense(NN_BF16, 2, shape), k.in[1] = dense(NN_BF16, 1, shape + 1);
        k.out[0] = dense(NN_BF16, 2, shape);
        k.epi[0] = (kc_epi){.op = NN_OP_GELU};
        krun_result r;
        np_err err = {0};
        CU_ASSERT_EQUAL_FATAL(krun_kernel(&cfg, &k, NULL, NULL, &r, &err), NP_OK);
        insns[i] = r.kernel.insns;
        krun_result_free(&r);
    }
    CU_ASSERT(insns[1] <= insns[0] + 8); /* the loop counts differ, not the bodies */
    CU_ASSERT(insns[0] < 200);
}

TEST(loads_stores_and_vector_work_of_successive_tiles_overlap)
{
    /* tiny: 16 bytes/cycle of HBM, 4 lanes. gelu on 64 K bf16 elements (transcendental: 1
     * element a cycle) is vector-bound, 65536 vector cycles against 256 KiB / 16 = 16384 HBM
     * cycles; a pass without overlap would take their sum. */
    arch_config cfg = arch("tiny", NULL);
    int64_t shape[1] = {65536};
    kc_kernel k = {.op = NN_OP_GELU, .n_in = 1, .n_out = 1, .place = {0, 0, 1}};
    k.in[0] = dense(NN_BF16, 1, shape), k.out[0] = k.in[0];
    krun_result r;
    np_err err = {0};
    CU_ASSERT_EQUAL_FATAL(krun_kernel(&cfg, &k, NULL, NULL, &r, &err), NP_OK);
    uint64_t vpu = 0, dma = 0;
    for (uint32_t i = 0; i < r.report->n_units; i++) {
        if (!strcmp(r.report->units[i].name, "core0.vpu"))
            vpu = r.report->units[i].busy_cycles;
        if (!strcmp(r.report->units[i].name, "core0.dma"))
            dma = r.report->units[i].busy_cycles;
    }
    CU_ASSERT(vpu >= 65536);
    CU_ASSERT(dma >= 16384);
    /* vector-bound: the run is the vector work plus one tile's load and store at most */
    CU_ASSERT(r.report->total_cycles < vpu + dma / 4);
    krun_result_free(&r);
}

TEST(bad_vector_kernels_are_errors_naming_the_problem)
{
    arch_config cfg = arch("tiny", NULL);
    np_err err = {0};
    int64_t sh[2] = {8, 8}, other[2] = {8, 3};
    kc_kernel k = {.op = NN_OP_ADD, .n_in = 2, .n_out = 1, .place = {0, 0, 1}};
    k.in[0] = dense(NN_BF16, 2, sh), k.in[1] = dense(NN_BF16, 2, other), k.out[0] = dense(NN_BF16, 2, sh);
    krun_result r;
    CU_ASSERT_EQUAL(krun_kernel(&cfg, &k, NULL, NULL, &r, &err), NP_ERR_INCONSISTENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "input 1 does not broadcast to the output's shape"));
    /* a chain whose result is not the output's dtype */
    k.in[1] = dense(NN_BF16, 2, sh);
    k.n_epi = 1, k.epi[0] = (kc_epi){.op = NN_OP_CAST, .to = NN_F32};
    CU_ASSERT_EQUAL(krun_kernel(&cfg, &k, NULL, NULL, &r, &err), NP_ERR_INCONSISTENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "the chain's result is fp32, the output bf16"));
    /* the matrix unit's epilogue takes no extended steps */
    kc_kernel m = {.op = NN_OP_MATMUL, .n_in = 2, .n_out = 1, .n_epi = 1, .place = {0, 0, 1}};
    m.in[0] = dense(NN_BF16, 2, sh), m.in[1] = dense(NN_BF16, 2, sh), m.out[0] = dense(NN_BF16, 2, sh);
    m.epi[0] = (kc_epi){.op = NN_OP_CAST, .to = NN_F32};
    CU_ASSERT_EQUAL(krun_kernel(&cfg, &m, NULL, NULL, &r, &err), NP_ERR_INCONSISTENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "cast is not an elementwise op matmul's epilogue applies"));
    /* an output that half overlaps an input */
    kc_prog *p;
    CU_ASSERT_EQUAL_FATAL(kc_prog_new(&cfg, &(kc_prog_opts){.cores = 1}, &p, &err), NP_OK);
    uint64_t a;
    kc_prog_bss(p, NULL, 4096, &a, &err);
    kc_kernel h = {.op = NN_OP_RELU, .n_in = 1, .n_out = 1, .place = {0, 0, 1}};
    kc_tensor_dense(&h.in[0], a, NN_F32, 2, sh);
    kc_tensor_dense(&h.out[0], a + 16, NN_F32, 2, sh);
    CU_ASSERT_EQUAL(kc_compile(p, &h, NULL, &err), NP_ERR_INCONSISTENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "relu: output 0 overlaps input 0"));
    kc_prog_free(p);
}

/* Compiles the kernel of `npusim kernel --op` text on tiny (2 cores): its status, and its
 * message in err. */
static np_status compile_spec(const char *text, np_err *err)
{
    arch_config cfg = arch("tiny", NULL);
    kc_spec s;
    kc_prog *p = NULL;
    kc_kernel k;
    np_status st = kc_spec_parse(text, &s, err);
    if (st == NP_OK)
        st = kc_prog_new(&cfg, &(kc_prog_opts){.cores = 2}, &p, err);
    if (st == NP_OK)
        st = kc_spec_kernel(p, &s, &k, err);
    if (st == NP_OK) {
        k.place = (kc_place){0, 0, 2};
        st = kc_compile(p, &k, NULL, err);
    }
    kc_prog_free(p);
    return st;
}

TEST(integer_ops_whose_results_are_fractions_or_saturate_are_refused_naming_op_and_dtype)
{
    /* the vector unit rounds an integer result to its type and saturates it, the framework
     * keeps it as computed (docs/compiler.md, "Integer types"): each of these would differ */
#define FIRST_ "; cast to a float type first"
    static const struct {
        const char *op, *why;
    } refused[] = {
        {"mul shape=5x13", "a product past the type's range saturates on the vector unit, where "
                           "PyTorch wraps it and the framework keeps it"},
        {"div shape=5x13", "true division of integers is a fraction (PyTorch's is a float)"},
        {"scale shape=5x13 s=2", "a scaled integer is a fraction or past the type's range in "
                                 "general"},
        {"gelu shape=5x13", "its values are fractions (PyTorch's are floats)"},
        {"silu shape=5x13", "its values are fractions (PyTorch's are floats)"},
        {"tanh shape=5x13", "its values are fractions (PyTorch's are floats)"},
        {"exp shape=5x13", "its values are fractions (PyTorch's are floats)"},
        {"log shape=5x13", "its values are fractions (PyTorch's are floats)"},
        {"gelu_grad shape=5x13", "its values are fractions (PyTorch's are floats)"},
        {"silu_grad shape=5x13", "its values are fractions (PyTorch's are floats)"},
        {"tanh_grad shape=5x13", "its values are fractions (PyTorch's are floats)"},
        {"dropout shape=5x13 p=0.5", "its kept values are multiplied by 1 / (1 - p), a fraction"},
        {"relu shape=5x13 clamp=6.5", "a clamp that is not an integer"},
        {"relu_grad shape=5x13 clamp=0.5", "a clamp that is not an integer"},
        {"causal_mask shape=5x13", "a fill that is not an integer of the type (the default is "
                                   "-inf)"},
        {"reduce_mean shape=5x13 axis=1", "the mean of integers is a fraction"},
    };
    static const char *dtypes[2][2] = {{"int8", "int8"}, {"i32", "int32"}};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
        for (int d = 0; d < 2; d++) {
            char text[128], want[512];
            snprintf(text, sizeof text, "%s dtype=%s", refused[i].op, dtypes[d][0]);
            size_t name = strcspn(refused[i].op, " ");
            snprintf(want, sizeof want, "%.*s: %s is not supported: %s" FIRST_, (int)name,
                     refused[i].op, dtypes[d][1], refused[i].why);
            np_err e = {0};
            np_status st = compile_spec(text, &e);
            if (st != NP_ERR_TYPE || strcmp(e.msg, want))
                fprintf(stderr, "%s: %s\n", text, e.msg);
            CU_ASSERT_EQUAL(st, NP_ERR_TYPE);
            CU_ASSERT_STRING_EQUAL(e.msg, want);
        }
    CU_ASSERT_EQUAL(np_status_exit_code(NP_ERR_TYPE), 2); /* `npusim kernel --op` exits 2 */
    /* a fused step is refused too, named as the kernel's step */
    int64_t sh[2] = {5, 13};
    kc_kernel k = {.op = NN_OP_ADD, .n_in = 2, .n_out = 1, .n_epi = 1, .place = {0, 0, 1}};
    k.in[0] = dense(NN_I8, 2, sh), k.in[1] = dense(NN_I8, 2, sh), k.out[0] = dense(NN_I8, 2, sh);
    k.epi[0] = (kc_epi){.op = NN_OP_MUL, .has_arg = true, .arg = dense(NN_I8, 2, sh)};
    arch_config cfg = arch("tiny", NULL);
    krun_result r;
    np_err e = {0};
    CU_ASSERT_EQUAL(krun_kernel(&cfg, &k, NULL, NULL, &r, &e), NP_ERR_TYPE);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "add: its fused step mul on int8 is not supported: a "
                                         "product past the type's range saturates"));
    /* a cast to a float type first: the same product compiles (and equals the reference) */
    k.in[0] = dense(NN_I8, 2, sh), k.out[0] = dense(NN_F32, 2, sh);
    k.op = NN_OP_CAST, k.n_in = 1;
    k.epi[0] = (kc_epi){.op = NN_OP_MUL, .has_arg = true, .arg = dense(NN_F32, 2, sh)};
    CU_ASSERT_EQUAL(run_check(&cfg, &k, NULL, 1401, 0, 0).bad, 0);
    /* integer fills and clamps are integers of the type: compiled */
    np_err ok = {0};
    CU_ASSERT_EQUAL(compile_spec("causal_mask shape=5x13 dtype=int8 fill=-100", &ok), NP_OK);
    CU_ASSERT_EQUAL(compile_spec("relu shape=5x13 dtype=i32 clamp=6", &ok), NP_OK);
#undef FIRST_
}

/* ---- reductions and broadcasting ---------------------------------------------------------------- */

/* The shape of x reduced over axis. */
static int reduced(int n, const int64_t *x, int axis, bool keep, int64_t *out)
{
    int k = 0;
    for (int i = 0; i < n; i++)
        if (i != axis)
            out[k++] = x[i];
        else if (keep)
            out[k++] = 1;
    return k;
}

TEST(reductions_over_every_axis_equal_the_reference)
{
    arch_config cfg = arch("tiny", NULL);
    static const int64_t x3[3] = {7, 13, 19};
    static const nn_op ops[3] = {NN_OP_REDUCE_SUM, NN_OP_REDUCE_MEAN, NN_OP_REDUCE_MAX};
    int cases = 0;
    for (int o = 0; o < 3; o++)
        for (int axis = 0; axis < 3; axis++)
            for (int d = 0; d < 3; d++) {
                bool keep = (axis + d) % 2;
                kc_kernel k = {.op = ops[o], .n_in = 1, .n_out = 1, .n_attrs = 2,
                               .place = {0, 0, (uint32_t)(1 + (o + axis + d) % 2)},
                               .attrs = {KC_INT("axis", axis - (d == 1 ? 3 : 0)),
                                         KC_INT("keepdim", keep)}};
                k.in[0] = dense(floats[d], 3, x3);
                int64_t y[3];
                int yn = reduced(3, x3, axis, keep, y);
                k.out[0] = dense(floats[d], yn, y);
                /* sums in fp32 against the framework's double: one ulp of the result plus
                 * the fp32 roundings of x3[axis] partial sums of values below 4 */
                bool exact = ops[o] == NN_OP_REDUCE_MAX;
                double atol = exact ? 0 : (double)x3[axis] * 4 * 0x1p-23;
                check c = run_check(&cfg, &k, NULL, 900 + (uint64_t)cases, exact ? 0 : ulp(floats[d]), atol);
                CU_ASSERT_EQUAL(c.bad, 0);
                /* small tiles: several output tiles (a shifted last one), chunks with a short
                 * last one */
                k.attrs[k.n_attrs++] = KC_INT("tk", 5);
                k.attrs[k.n_attrs++] = KC_INT("tr", 4);
                c = run_check(&cfg, &k, NULL, 900 + (uint64_t)cases, exact ? 0 : ulp(floats[d]), atol);
                CU_ASSERT_EQUAL(c.bad, 0);
                cases++;
            }
    CU_ASSERT_EQUAL(cases, 27);
}

TEST(sums_of_squares_over_every_axis_equal_the_reference_and_read_each_element_once)
{
    /* reduce_sum square=1 (nn_sum_squares: a gradient norm's partial sums): every axis and
     * dtype against the framework's double sum of squares, one ulp plus the fp32 roundings of
     * x3[axis] partial sums of squares below 16; HBM reads as the plain sum's */
    arch_config cfg = arch("tiny", NULL);
    static const int64_t x3[3] = {7, 13, 19};
    for (int axis = 0; axis < 3; axis++)
        for (int d = 0; d < 3; d++) {
            bool keep = (axis + d) % 2;
            kc_kernel k = {.op = NN_OP_REDUCE_SUM, .n_in = 1, .n_out = 1, .n_attrs = 3,
                           .place = {0, 0, (uint32_t)(1 + (axis + d) % 2)},
                           .attrs = {KC_INT("axis", axis), KC_INT("keepdim", keep),
                                     KC_INT("square", 1)}};
            k.in[0] = dense(floats[d], 3, x3);
            int64_t y[3];
            int yn = reduced(3, x3, axis, keep, y);
            k.out[0] = dense(floats[d], yn, y);
            double atol = (double)x3[axis] * 16 * 0x1p-23;
            check c = run_check(&cfg, &k, NULL, 950 + (uint64_t)(axis * 3 + d), ulp(floats[d]), atol);
            CU_ASSERT_EQUAL(c.bad, 0);
            kc_kernel plain = k;
            plain.n_attrs = 2;
            kc_result rs, rp;
            kc_prog *p = NULL;
            np_err e = {0};
            CU_ASSERT_EQUAL_FATAL(kc_prog_new(&cfg, &(kc_prog_opts){.cores = 2}, &p, &e), NP_OK);
            CU_ASSERT_EQUAL(kc_compile(p, &k, &rs, &e), NP_OK);
            CU_ASSERT_EQUAL(kc_compile(p, &plain, &rp, &e), NP_OK);
            CU_ASSERT_EQUAL(rs.hbm_read_bytes, rp.hbm_read_bytes);
            CU_ASSERT_EQUAL(rs.flops, 2 * rp.flops);
            kc_prog_free(p);
        }
}

TEST(sum_to_and_broadcast_to_equal_the_reference_for_every_broadcast_pattern)
{
    arch_config cfg = arch("tiny", NULL);
    static const struct {
        int nb, ns;
        int64_t big[4], small[4];
    } pats[] = {
        {3, 1, {5, 13, 9}, {9}},         /* a bias gradient: the leading dims */
        {3, 2, {5, 13, 9}, {13, 1}},     /* the last dim and the first */
        {3, 3, {5, 13, 9}, {5, 1, 9}},   /* a middle dim */
        {3, 2, {4, 6, 8}, {6, 1}},       /* two groups: the first and the last */
        {2, 0, {6, 7}, {0}},             /* everything: a scalar */
        {4, 4, {2, 3, 5, 7}, {1, 3, 1, 7}},
    };
    for (size_t i = 0; i < sizeof pats / sizeof pats[0]; i++)
        for (int d = 0; d < 3; d++) {
            kc_kernel s = {.op = NN_OP_SUM_TO, .n_in = 1, .n_out = 1,
                           .place = {0, 0, (uint32_t)(1 + (i + d) % 2)}};
            s.in[0] = dense(floats[d], pats[i].nb, pats[i].big);
            s.out[0] = dense(floats[d], pats[i].ns, pats[i].small);
            int64_t n = kc_tensor_numel(&s.in[0]) / kc_tensor_numel(&s.out[0]);
            check c = run_check(&cfg, &s, NULL, 1000 + i * 3 + (uint64_t)d, ulp(floats[d]),
                                (double)n * 4 * 0x1p-23);
            CU_ASSERT_EQUAL(c.bad, 0);
            kc_kernel t = s;
            t.n_attrs = 2, t.attrs[0] = KC_INT("tk", 3), t.attrs[1] = KC_INT("tr", 5);
            c = run_check(&cfg, &t, NULL, 1000 + i * 3 + (uint64_t)d, ulp(floats[d]),
                          (double)n * 4 * 0x1p-23);
            CU_ASSERT_EQUAL(c.bad, 0);
            kc_kernel b = s;
            b.op = NN_OP_BROADCAST_TO;
            b.in[0] = s.out[0], b.out[0] = s.in[0];
            c = run_check(&cfg, &b, NULL, 1100 + i * 3 + (uint64_t)d, 0, 0);
            CU_ASSERT_EQUAL(c.bad, 0);
            /* the small input is read once per core: a broadcast writes its output once */
            CU_ASSERT_EQUAL(c.hbm_write, kc_tensor_bytes(&b.out[0]));
            b.n_attrs = 1, b.attrs[0] = KC_INT("tile", 17);
            c = run_check(&cfg, &b, NULL, 1100 + i * 3 + (uint64_t)d, 0, 0);
            CU_ASSERT_EQUAL(c.bad, 0);
        }
}

TEST(reduce_max_grad_sends_dy_to_the_first_maximum_along_any_axis)
{
    arch_config cfg = arch("tiny", NULL);
    static const int64_t x3[3] = {6, 11, 9};
    for (int axis = 0; axis < 3; axis++)
        for (int d = 0; d < 3; d++) {
            bool keep = d == 1;
            /* integers in [-3, 3]: many ties, so "first" matters */
            nn_graph *g = nn_graph_new(1);
            nn_tensor *xv = nn_input(g, "x", floats[d], 3, x3);
            CU_ASSERT_FATAL(nn_tensor_randn(xv, 1200 + (uint64_t)(axis * 3 + d), 1.0));
            for (int64_t i = 0; i < nn_numel(xv); i++)
                xv->data[i] = fminf(fmaxf(nearbyintf(xv->data[i] * 1.5f), -3), 3);
            nn_tensor *yv = nn_reduce_max(g, xv, axis, keep);
            np_err e = {0};
            CU_ASSERT_EQUAL_FATAL(nn_graph_compute(g, &e), NP_OK);
            nn_tensor *dy = nn_input(g, "dy", floats[d], yv->ndim, yv->ne);
            fill(dy, 77, V_NORMAL);
            nn_tensor *want = nn_node(g, NN_OP_REDUCE_MAX_GRAD, 3, (nn_tensor *[]){xv, yv, dy},
                                      (int64_t[NN_MAX_IPARAMS]){axis, keep}, NULL);
            CU_ASSERT_EQUAL_FATAL(nn_node_compute(want, &e), NP_OK);
            kc_kernel k = {.op = NN_OP_REDUCE_MAX_GRAD, .n_in = 3, .n_out = 1, .n_attrs = 3,
                           .place = {0, 0, (uint32_t)(1 + axis % 2)},
                           .attrs = {KC_INT("axis", axis), KC_INT("keepdim", keep),
                                     KC_INT("tile", d == 2 ? 0 : 40)}};
            kc_tensor_of(&k.in[0], 0, xv), kc_tensor_of(&k.in[1], 0, yv);
            kc_tensor_of(&k.in[2], 0, dy), kc_tensor_of(&k.out[0], 0, want);
            nn_tensor *got = nn_input(g, "got", floats[d], 3, x3);
            krun_io io = {.in = {xv, yv, dy}, .out = {got}};
            krun_result r;
            CU_ASSERT_EQUAL_FATAL(krun_kernel(&cfg, &k, &io, &(krun_opts){.functional = true}, &r, &e),
                                  NP_OK);
            krun_result_free(&r);
            krun_diff df = krun_compare(got, want, 0, 0);
            CU_ASSERT_EQUAL(df.bad, 0);
            nn_graph_free(g);
        }
}

/* reduce_max_grad of x (integers in [-3, 3]: ties) of shape sh along axis, phased or not,
 * against the reference: the bad elements; *schedule the kernel's. */
static int64_t check_maxgrad(const arch_config *cfg, int nd, const int64_t *sh, int axis,
                             nn_dtype dt, bool keep, bool phased, uint32_t cores, uint64_t seed,
                             char *schedule, size_t n)
{
    nn_graph *g = nn_graph_new(1);
    nn_tensor *xv = nn_input(g, "x", dt, nd, sh);
    CU_ASSERT_FATAL(nn_tensor_randn(xv, seed, 1.0));
    for (int64_t i = 0; i < nn_numel(xv); i++)
        xv->data[i] = fminf(fmaxf(nearbyintf(xv->data[i] * 1.5f), -3), 3);
    nn_tensor *yv = nn_reduce_max(g, xv, axis, keep);
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(nn_graph_compute(g, &e), NP_OK);
    nn_tensor *dy = nn_input(g, "dy", dt, yv->ndim, yv->ne);
    fill(dy, seed + 1, V_NORMAL);
    nn_tensor *want = nn_node(g, NN_OP_REDUCE_MAX_GRAD, 3, (nn_tensor *[]){xv, yv, dy},
                              (int64_t[NN_MAX_IPARAMS]){axis, keep}, NULL);
    CU_ASSERT_EQUAL_FATAL(nn_node_compute(want, &e), NP_OK);
    kc_kernel k = {.op = NN_OP_REDUCE_MAX_GRAD, .n_in = 3, .n_out = 1, .n_attrs = 3,
                   .place = {0, 0, cores},
                   .attrs = {KC_INT("axis", axis), KC_INT("keepdim", keep),
                             KC_INT("phased", phased)}};
    kc_tensor_of(&k.in[0], 0, xv), kc_tensor_of(&k.in[1], 0, yv);
    kc_tensor_of(&k.in[2], 0, dy), kc_tensor_of(&k.out[0], 0, want);
    nn_tensor *got = nn_input(g, "got", dt, nd, sh);
    krun_io io = {.in = {xv, yv, dy}, .out = {got}};
    krun_result r;
    np_status st = krun_kernel(cfg, &k, &io, &(krun_opts){.functional = true}, &r, &e);
    if (st != NP_OK)
        fprintf(stderr, "%s\n", e.msg);
    CU_ASSERT_EQUAL_FATAL(st, NP_OK);
    snprintf(schedule, n, "%s", r.kernel.schedule);
    krun_result_free(&r);
    krun_diff df = krun_compare(got, want, 0, 0);
    nn_graph_free(g);
    return df.bad;
}

TEST(reduce_max_grad_over_an_axis_too_long_for_a_tile_goes_in_phases)
{
    /* phased forced on [6, 11, 9] along every axis, every float type, keepdim or not, 1 and
     * 2 cores; then 70,001 elements along the last axis of [3, 70001] and along the first of
     * [70001, 2] (beyond a tile's 65,535) on tiny: exact, the first maximum of the ties */
    arch_config cfg = arch("tiny", NULL);
    char how[160];
    static const int64_t x3[3] = {6, 11, 9};
    for (int axis = 0; axis < 3; axis++)
        for (int d = 0; d < 3; d++) {
            CU_ASSERT_EQUAL(check_maxgrad(&cfg, 3, x3, axis, floats[d], d == 1, true,
                                          (uint32_t)(1 + (axis + d) % 2), 1300 + axis * 3 + d,
                                          how, sizeof how), 0);
            CU_ASSERT_PTR_NOT_NULL(strstr(how, "four phases"));
        }
    CU_ASSERT_EQUAL(check_maxgrad(&cfg, 2, (int64_t[]){3, 70001}, 1, NN_BF16, false, false, 2,
                                  1320, how, sizeof how), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(how, "four phases"));
    CU_ASSERT_EQUAL(check_maxgrad(&cfg, 2, (int64_t[]){70001, 2}, 0, NN_F32, true, false, 1,
                                  1321, how, sizeof how), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(how, "four phases"));
}

/* ---- fusion groups ------------------------------------------------------------------------------ */

/* where() for the tests: every tensor dense, its address a tag that says which it is. */
typedef struct fuse_map {
    const nn_tensor *t[64];
    int n;
} fuse_map;

static np_status fuse_where(void *ctx, const nn_tensor *t, kc_tensor *out, np_err *err)
{
    (void)err;
    fuse_map *m = ctx;
    int i = 0;
    while (i < m->n && m->t[i] != t)
        i++;
    if (i == m->n)
        m->t[m->n++] = t;
    kc_tensor_of(out, (uint64_t)(i + 1) * 0x100000, t);
    return NP_OK;
}

static nn_tensor *tagged(const fuse_map *m, const kc_tensor *k)
{
    return (nn_tensor *)m->t[k->addr / 0x100000 - 1];
}

/* Runs fused kernel k (operands tagged by fuse_where) with the framework's values of its
 * operands and compares its output with the framework's. */
static void run_fused(const arch_config *cfg, const fuse_map *m, const kc_kernel *k, nn_graph *g,
                      double rtol, double atol_rel, check *out)
{
    krun_io io;
    memset(&io, 0, sizeof io);
    for (int i = 0; i < k->n_in; i++)
        io.in[i] = tagged(m, &k->in[i]);
    for (int i = 0; i < k->n_epi; i++)
        if (k->epi[i].has_arg)
            io.epi[i] = tagged(m, &k->epi[i].arg);
    const nn_tensor *want = tagged(m, &k->out[0]);
    nn_tensor *got = nn_input(g, "got", want->dtype, want->ndim, want->ne);
    io.out[0] = got;
    krun_result r;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(krun_kernel(cfg, k, &io, &(krun_opts){.functional = true}, &r, &e), NP_OK);
    double big = 0;
    for (int64_t i = 0; i < nn_numel(want); i++)
        big = fmax(big, fabs(want->data[i]));
    krun_diff d = krun_compare(got, want, rtol, atol_rel * big);
    CU_ASSERT_EQUAL(d.bad, 0);
    out->res = r.kernel;
    out->hbm_read = r.report->hbm_read_bytes, out->hbm_write = r.report->hbm_write_bytes;
    krun_result_free(&r);
}

TEST(fusion_groups_become_one_vector_kernel_or_a_matmul_epilogue)
{
    arch_config cfg = arch("tiny", NULL);
    np_err e = {0};
    kc_place pl = {0, 0, 2};
    /* a vector chain: gelu(x + b), times y (y first), to fp32, c - that (c a column), dropout,
     * relu6 */
    {
        nn_graph *g = nn_graph_new(1);
        nn_tensor *x = nn_input(g, "x", NN_BF16, 2, (int64_t[]){19, 40});
        nn_tensor *b = nn_input(g, "b", NN_BF16, 1, (int64_t[]){40});
        nn_tensor *y = nn_input(g, "y", NN_BF16, 2, (int64_t[]){19, 40});
        nn_tensor *c = nn_input(g, "c", NN_F32, 2, (int64_t[]){19, 1});
        fill(x, 1, V_NORMAL), fill(b, 2, V_NORMAL), fill(y, 3, V_NORMAL), fill(c, 4, V_NORMAL);
        nn_tensor *h = nn_add(g, x, b), *head = h;
        h = nn_mul(g, y, nn_gelu(g, h));
        h = nn_sub(g, c, nn_cast(g, h, NN_F32));
        h = nn_relu6(g, nn_dropout(g, h, 0.2, 9));
        nn_graph_set_output(g, h);
        CU_ASSERT_EQUAL(nn_pass_fuse(g), 1);
        CU_ASSERT_EQUAL_FATAL(nn_graph_compute(g, &e), NP_OK);
        nn_tensor *chain[16];
        int n = kc_fuse_members(g, head->fusion_group, chain, 16);
        CU_ASSERT_EQUAL_FATAL(n, 7);
        CU_ASSERT_PTR_EQUAL(chain[6], h);
        fuse_map m = {0};
        kc_kernel ks[4];
        int nk;
        CU_ASSERT_EQUAL_FATAL(kc_fuse_group(chain, n, fuse_where, &m, &pl, ks, 4, &nk, &e), NP_OK);
        CU_ASSERT_EQUAL_FATAL(nk, 1);
        CU_ASSERT_EQUAL(ks[0].op, NN_OP_ADD);
        CU_ASSERT_EQUAL(ks[0].n_epi, 6);
        CU_ASSERT(ks[0].epi[1].swap && ks[0].epi[3].swap); /* y * ., c - . */
        check r;
        run_fused(&cfg, &m, &ks[0], g, 0x1p-23, 0, &r);
        /* one pass: x, y, c and the output once, the bias once per core (2 x 40 bf16) */
        CU_ASSERT_EQUAL(r.hbm_read + r.hbm_write, r.res.hbm_bytes_min + 40 * 2);
        nn_graph_free(g);
    }
    /* a matmul chain: x w + b, gelu, + r, x 0.5, to fp32: the matrix unit's epilogue whole (the
     * last cast its output dtype); then with a cast inside, the rest as a vector kernel */
    for (int inner = 0; inner < 2; inner++) {
        nn_graph *g = nn_graph_new(1);
        nn_tensor *x = nn_input(g, "x", NN_BF16, 2, (int64_t[]){37, 24});
        nn_tensor *w = nn_input(g, "w", NN_BF16, 2, (int64_t[]){24, 29});
        nn_tensor *b = nn_input(g, "b", NN_BF16, 1, (int64_t[]){29});
        nn_tensor *rr = nn_input(g, "r", inner ? NN_F32 : NN_BF16, 2, (int64_t[]){37, 29});
        fill(x, 5, V_NORMAL), fill(w, 6, V_NORMAL), fill(b, 7, V_NORMAL), fill(rr, 8, V_NORMAL);
        nn_tensor *mm = nn_matmul(g, x, w), *h = nn_gelu(g, nn_add(g, mm, b));
        if (inner)
            h = nn_scale(g, nn_add(g, nn_cast(g, h, NN_F32), rr), 0.5);
        else
            h = nn_cast(g, nn_scale(g, nn_add(g, h, rr), 0.5), NN_F32);
        nn_graph_set_output(g, h);
        CU_ASSERT_EQUAL(nn_pass_fuse(g), 1);
        CU_ASSERT_EQUAL_FATAL(nn_graph_compute(g, &e), NP_OK);
        nn_tensor *chain[16];
        int n = kc_fuse_members(g, mm->fusion_group, chain, 16);
        CU_ASSERT_EQUAL_FATAL(n, 6);
        fuse_map m = {0};
        kc_kernel ks[4];
        int nk;
        CU_ASSERT_EQUAL_FATAL(kc_fuse_group(chain, n, fuse_where, &m, &pl, ks, 4, &nk, &e), NP_OK);
        CU_ASSERT_EQUAL_FATAL(nk, inner ? 2 : 1);
        CU_ASSERT_EQUAL(ks[0].op, NN_OP_MATMUL);
        CU_ASSERT_EQUAL(ks[0].n_epi, inner ? 2 : 4);
        CU_ASSERT_EQUAL(ks[0].out[0].dtype, inner ? NN_BF16 : NN_F32);
        /* the epilogue computes at the output's type and rounds less than the framework's
         * op-by-op bf16: within a few bf16 ulps of the largest intermediate */
        check r;
        run_fused(&cfg, &m, &ks[0], g, 4 * 0x1p-8, 4 * 0x1p-8, &r);
        if (inner) {
            CU_ASSERT_EQUAL(ks[1].op, NN_OP_CAST);
            CU_ASSERT_EQUAL(ks[1].n_epi, 2);
            run_fused(&cfg, &m, &ks[1], g, 0x1p-23, 0, &r); /* the framework's own steps */
        }
        nn_graph_free(g);
    }
}

/* ---- npusim kernel --op ------------------------------------------------------------------------- */

TEST(every_vector_kernel_builds_from_its_op_keys_and_compiles)
{
    static const nn_op ops[] = {
        NN_OP_ADD, NN_OP_SUB, NN_OP_MUL, NN_OP_DIV, NN_OP_SCALE, NN_OP_RELU, NN_OP_GELU,
        NN_OP_SILU, NN_OP_TANH, NN_OP_EXP, NN_OP_LOG, NN_OP_CAST, NN_OP_DROPOUT,
        NN_OP_CAUSAL_MASK, NN_OP_RELU_GRAD, NN_OP_GELU_GRAD, NN_OP_SILU_GRAD, NN_OP_TANH_GRAD,
        NN_OP_BROADCAST_TO, NN_OP_SUM_TO, NN_OP_REDUCE_SUM, NN_OP_REDUCE_MEAN, NN_OP_REDUCE_MAX,
        NN_OP_REDUCE_MAX_GRAD, NN_OP_SGD_UPDATE, NN_OP_ADAM_UPDATE, NN_OP_ADAMW_UPDATE,
    };
    arch_config cfg = arch("tiny", NULL);
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        const kc_kernel_def *d = kc_kernel_find(ops[i]);
        CU_ASSERT_PTR_NOT_NULL_FATAL(d);
        CU_ASSERT(d->build && d->reference && d->n_keys >= 2);
        /* shape=13x30 (to=30 for the broadcasts), dtype=bf16 (fp32 gradients for updates),
         * bshape=30 for the binary ops: the builder's operands compile */
        kc_spec s = {.op = ops[i], .n = 4};
        s.v[0] = (kc_spec_val){.name = "shape", .type = KC_ATTR_SHAPE, .ndim = 2, .shape = {13, 30}};
        s.v[1] = (kc_spec_val){.name = "dtype", .type = KC_ATTR_DTYPE, .i = NN_BF16};
        s.v[2] = (kc_spec_val){.name = "bshape", .type = KC_ATTR_SHAPE, .ndim = 1, .shape = {30}};
        s.v[3] = (kc_spec_val){.name = "to", .type = KC_ATTR_SHAPE, .ndim = 1, .shape = {30}};
        if (ops[i] == NN_OP_BROADCAST_TO) { /* from [30] to [13, 30] */
            s.v[0].ndim = 1, s.v[0].shape[0] = 30;
            s.v[3].ndim = 2, s.v[3].shape[0] = 13, s.v[3].shape[1] = 30;
        }
        if (ops[i] == NN_OP_CAST)
            s.v[3] = (kc_spec_val){.name = "to", .type = KC_ATTR_DTYPE, .i = NN_F32};
        kc_prog *p;
        np_err e = {0};
        CU_ASSERT_EQUAL_FATAL(kc_prog_new(&cfg, &(kc_prog_opts){.cores = 2}, &p, &e), NP_OK);
        kc_kernel k;
        CU_ASSERT_EQUAL_FATAL(d->build(p, &s, &k, &e), NP_OK);
        k.place = (kc_place){0, 0, 2};
        kc_result r;
        np_status st = kc_compile(p, &k, &r, &e);
        if (st != NP_OK)
            fprintf(stderr, "%s: %s\n", nn_op_name(ops[i]), e.msg);
        CU_ASSERT_EQUAL(st, NP_OK);
        CU_ASSERT(r.hbm_bytes_min > 0 && r.hbm_read_bytes > 0 && r.hbm_write_bytes > 0);
        CU_ASSERT_EQUAL(kc_prog_finish(p, &e), NP_OK);
        kc_prog_free(p);
        /* a missing shape is an error naming the op */
        kc_spec none = {.op = ops[i], .n = 0};
        CU_ASSERT_EQUAL(d->build(NULL, &none, &k, &e), NP_ERR_MISSING);
        CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, nn_op_name(ops[i])));
    }
}

TEST(semaphores_alone_order_the_schedules_with_copies_in_flight)
{
    /* no operand scoreboard, four DMA copies in flight: the kernels' semaphores must order
     * every buffer's reuse themselves */
    static const char *sets[2] = {"core.scoreboard=0", "core.dma_outstanding=4"};
    arch_config cfg;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tiny", sets, 2, &cfg, &e), NP_OK);
    static const int64_t x2[2] = {29, 37}, row[1] = {37};
    kc_kernel k = {.op = NN_OP_ADD, .n_in = 2, .n_out = 1, .n_epi = 2, .place = {0, 0, 2},
                   .n_attrs = 1, .attrs = {KC_INT("tile", 100)}};
    k.in[0] = dense(NN_BF16, 2, x2), k.in[1] = dense(NN_BF16, 1, row);
    k.epi[0] = (kc_epi){.op = NN_OP_GELU};
    k.epi[1] = (kc_epi){.op = NN_OP_MUL, .has_arg = true, .arg = dense(NN_BF16, 2, x2)};
    k.out[0] = dense(NN_BF16, 2, x2);
    CU_ASSERT_EQUAL(run_check(&cfg, &k, NULL, 1300, 0, 0).bad, 0);
    int64_t n = 1517;
    kc_kernel a = {.op = NN_OP_ADAM_UPDATE, .n_in = 4, .n_out = 3, .place = {0, 0, 2},
                   .n_attrs = 2, .attrs = {KC_INT("step", 2), KC_INT("tile", 150)}};
    for (int i = 0; i < 4; i++)
        a.in[i] = dense(i == 1 ? NN_BF16 : NN_F32, 1, &n);
    a.out[0] = a.in[0], a.out[1] = a.in[2], a.out[2] = a.in[3];
    vals how[4] = {V_NORMAL, V_NORMAL, V_NORMAL, V_POSITIVE};
    CU_ASSERT_EQUAL(run_check(&cfg, &a, how, 1301, 8 * 0x1p-24, 8 * 0x1p-24).bad, 0);
    static const int64_t x3[3] = {7, 13, 19};
    kc_kernel r = {.op = NN_OP_REDUCE_SUM, .n_in = 1, .n_out = 1, .place = {0, 0, 2}, .n_attrs = 3,
                   .attrs = {KC_INT("axis", 1), KC_INT("tk", 5), KC_INT("tr", 4)}};
    r.in[0] = dense(NN_F32, 3, x3), r.out[0] = dense(NN_F32, 2, (int64_t[]){7, 19});
    CU_ASSERT_EQUAL(run_check(&cfg, &r, NULL, 1302, 0x1p-23, 13 * 4 * 0x1p-23).bad, 0);
    kc_kernel g = {.op = NN_OP_REDUCE_MAX_GRAD, .n_in = 3, .n_out = 1, .place = {0, 0, 2},
                   .n_attrs = 2, .attrs = {KC_INT("axis", 2), KC_INT("tile", 40)}};
    g.in[0] = dense(NN_F32, 3, x3), g.in[1] = dense(NN_F32, 2, (int64_t[]){7, 13});
    g.in[2] = g.in[1], g.out[0] = g.in[0];
    CU_ASSERT_EQUAL(run_check(&cfg, &g, NULL, 1303, 0, 0).bad, 0);
}
