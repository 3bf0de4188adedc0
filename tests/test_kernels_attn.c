/* test_kernels_attn.c — the fused attention kernels (compiler/kc_attn.c, kc_attn_bwd.c; K/V
 * streamed: kc_attn_st.c, kc_attn_stb.c): forward (out and lse), the lse pass alone and the
 * backward against the framework's reference executor (op_attention.c) on seeded shapes that
 * are not multiples of the array, the lanes or the blocks, causal and not, for every float
 * type, on one and several cores and in the zoo's [B, S, H, Dh] layout; HBM traffic equal to
 * the analytical minimum with heads resident (no score matrix) and to FlashAttention's
 * formula with K/V streamed; program size that does not grow with heads or key blocks; what
 * fits an A100-like core; errors. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "harness.h"
#include "kernel.h"
#include "krun.h"
#include "nn.h"

#define DIMS(...) (int64_t[]){__VA_ARGS__}

static arch_config tiny(void)
{
    arch_config cfg;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tiny", NULL, 0, &cfg, &e), NP_OK);
    return cfg;
}

/* tiny with room for blocks wider than the mask's 32-row sub-tiles */
static arch_config roomy(void)
{
    arch_config cfg;
    np_err e = {0};
    const char *sets[] = {"core.acc_bytes=64KiB", "core.sram_bytes=512KiB"};
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tiny", sets, 2, &cfg, &e), NP_OK);
    return cfg;
}

/* Seeded normal values representable in t's dtype. */
static void randn_as(nn_tensor *t, uint64_t seed, double std)
{
    CU_ASSERT_FATAL(nn_tensor_randn(t, seed, std));
    for (int64_t i = 0; i < nn_numel(t); i++)
        t->data[i] = t->dtype == NN_BF16 ? nn_round_bf16(t->data[i])
                     : t->dtype == NN_F16 ? nn_round_f16(t->data[i]) : t->data[i];
}

static double max_abs(const nn_tensor *t)
{
    double m = 0;
    for (int64_t i = 0; i < nn_numel(t); i++)
        m = fmax(m, fabs(t->data[i]));
    return m;
}

/* The documented bound (docs/compiler.md, "Attention"): the probabilities enter the array in
 * the input type, so every output element is within 2 ulps of the input type of the largest
 * magnitude of its own output tensor, plus its own ulp; fp32 within 2^-18 of it. */
static double ulp_of(nn_dtype dt)
{
    return dt == NN_BF16 ? 1.0 / 128 : dt == NN_F16 ? 1.0 / 1024 : 1.0 / 262144;
}

/* The [B, S, H, Dh] layout of a [B, H, S, Dh] operand (the zoo's q, k, v before the head
 * permute). */
static void bshd(kc_tensor *t)
{
    int64_t e = (int64_t)nn_dtype_size(t->dtype), H = t->shape[1], S = t->shape[2],
            Dh = t->shape[3];
    t->stride[3] = e, t->stride[1] = Dh * e, t->stride[2] = H * Dh * e;
    t->stride[0] = S * H * Dh * e;
}

typedef struct attn_case {
    int64_t B, H, S, Dh;
    nn_dtype dt;
    bool causal, zoo_layout; /* zoo_layout: q, k, v, out, dout and the gradient's parts */
    uint32_t cores;
    int64_t block;
    int stream; /* the kernels' `stream` attribute: 0 the cost model's, 1 resident, 2 K/V
                   streamed (block must be given) */
} attn_case;

static kc_kernel attn_kernel(nn_op op, const attn_case *c)
{
    kc_kernel k = {.op = op, .n_attrs = 1, .place = {0, 0, c->cores}};
    k.attrs[0] = KC_INT("causal", c->causal);
    if (c->block)
        k.attrs[k.n_attrs++] = KC_INT("block", c->block);
    if (c->stream)
        k.attrs[k.n_attrs++] = KC_INT("stream", c->stream);
    return k;
}

/* FlashAttention's HBM traffic with K/V streamed in blocks of T rows (docs/compiler.md,
 * "Streamed"), per head, computed here from the blocks: the unit's own rows once, and for
 * each unit the other side's blocks it sees (causal: query block i sees key blocks 0 .. i;
 * key block j, query blocks j ..). Element bytes e; rows t_i of block i (T, the last S -
 * (nq - 1) T). */
static int64_t rows_of(const attn_case *c, int64_t T, int64_t i)
{
    int64_t nq = (c->S + T - 1) / T;
    return i + 1 == nq ? c->S - (nq - 1) * T : T;
}

/* Forward (nkv 2: k and v) or attention_lse (nkv 1): q once, each query block's keys. */
static uint64_t flash_fwd_read(const attn_case *c, int64_t T, int nkv)
{
    int64_t e = (int64_t)nn_dtype_size(c->dt), nq = (c->S + T - 1) / T, keys = 0;
    for (int64_t i = 0; i < nq; i++)
        for (int64_t j = 0; j < nq; j++)
            keys += c->causal && j > i ? 0 : rows_of(c, T, j);
    return (uint64_t)(c->B * c->H * (c->S * c->Dh * e + nkv * keys * c->Dh * e));
}

/* Backward, its three phases: D reads out, dout and lse once and writes each row's (-lse, D)
 * pair (8 bytes); DKV reads k and v once and per key block the query blocks it sees (q, dout
 * and their pairs); DQ reads q, dout and the pairs once and per query block the key blocks it
 * sees (k and v). Writes: the pairs, dk, dv, dq. */
static void flash_bwd_bytes(const attn_case *c, int64_t T, uint64_t *rd, uint64_t *wr)
{
    int64_t e = (int64_t)nn_dtype_size(c->dt), nq = (c->S + T - 1) / T, S = c->S, Dh = c->Dh;
    int64_t dkv = 0, dq = 0;
    for (int64_t j = 0; j < nq; j++)     /* key block j (DKV) / query block j (DQ) */
        for (int64_t i = 0; i < nq; i++) {
            if (!(c->causal && i < j))   /* DKV: query block i >= j */
                dkv += rows_of(c, T, i) * (2 * Dh * e + 8);
            if (!(c->causal && i > j))   /* DQ: key block i <= j */
                dq += rows_of(c, T, i) * 2 * Dh * e;
        }
    int64_t heads = c->B * c->H;
    *rd = (uint64_t)(heads * ((2 * S * Dh * e + 4 * S) + (2 * S * Dh * e + dkv) +
                              (2 * S * Dh * e + 8 * S + dq)));
    *wr = (uint64_t)(heads * (8 * S + 3 * S * Dh * e));
}

/* Forward: out and lse against attention / attention_lse; returns the report's HBM bytes
 * (read + written) and fills *kr. */
static void check_forward(const arch_config *cfg, const attn_case *c, uint64_t seed,
                          kc_result *kr)
{
    np_err err = {0};
    nn_graph *g = nn_graph_new(1);
    int64_t *sh = DIMS(c->B, c->H, c->S, c->Dh);
    nn_tensor *q = nn_input(g, "q", c->dt, 4, sh), *k = nn_input(g, "k", c->dt, 4, sh),
              *v = nn_input(g, "v", c->dt, 4, sh);
    randn_as(q, seed, 1.0);
    randn_as(k, seed + 1, 1.0);
    randn_as(v, seed + 2, 1.0);
    kc_kernel kk = attn_kernel(NN_OP_ATTENTION, c);
    kk.n_in = 3, kk.n_out = 2;
    nn_tensor *in[3] = {q, k, v}, *want[2] = {0};
    const kc_kernel_def *def = kc_kernel_find(NN_OP_ATTENTION);
    CU_ASSERT_EQUAL_FATAL(def->reference(g, &kk, in, want, &err), NP_OK);
    CU_ASSERT_EQUAL_FATAL(nn_graph_compute(g, &err), NP_OK);
    nn_tensor *got = nn_input(g, "got", c->dt, 4, sh), *lse = nn_input(g, "lse", NN_F32, 3, sh);
    kc_tensor_of(&kk.in[0], 0, q);
    kc_tensor_of(&kk.in[1], 0, k);
    kc_tensor_of(&kk.in[2], 0, v);
    kc_tensor_of(&kk.out[0], 0, got);
    kc_tensor_of(&kk.out[1], 0, lse);
    if (c->zoo_layout)
        for (int i = 0; i < 3; i++)
            bshd(&kk.in[i]);
    krun_io io = {.in = {q, k, v}, .out = {got, lse}};
    krun_result r;
    np_status st = krun_kernel(cfg, &kk, &io, &(krun_opts){.functional = true}, &r, &err);
    if (st != NP_OK)
        fprintf(stderr, "attention: %s\n", err.msg);
    CU_ASSERT_EQUAL_FATAL(st, NP_OK);
    double u = ulp_of(c->dt), big = max_abs(want[0]);
    krun_diff d = krun_compare(got, want[0], u, 2 * u * big);
    krun_diff dl = krun_compare(lse, want[1], 1e-5, 1e-5);
    bool streamed = strstr(r.kernel.schedule, "streamed") != NULL;
    CU_ASSERT_EQUAL(streamed, c->stream == 2);
    if (getenv("KA_DEBUG") || d.bad || dl.bad)
        fprintf(stderr, "attention %s%s S=%lld Dh=%lld: out %lld of %lld off (worst %g, max "
                "|out| %g), lse %lld off (worst %g)\n", nn_dtype_name(c->dt),
                c->causal ? " causal" : "", (long long)c->S, (long long)c->Dh, (long long)d.bad,
                (long long)d.n, d.max_abs, big, (long long)dl.bad, dl.max_abs);
    CU_ASSERT_EQUAL(d.bad, 0);
    CU_ASSERT_EQUAL(dl.bad, 0);
    /* the traffic the kernel expects is what ran, and it is the minimum (heads resident) or
     * FlashAttention's (K/V streamed: q once, every query block's key and value blocks) */
    CU_ASSERT_EQUAL(r.report->hbm_read_bytes, r.kernel.hbm_read_bytes);
    CU_ASSERT_EQUAL(r.report->hbm_write_bytes, r.kernel.hbm_write_bytes);
    if (streamed) {
        uint64_t e = nn_dtype_size(c->dt), heads = (uint64_t)(c->B * c->H);
        CU_ASSERT_EQUAL(r.kernel.hbm_read_bytes, flash_fwd_read(c, c->block, 2));
        CU_ASSERT_EQUAL(r.kernel.hbm_write_bytes,
                        heads * (uint64_t)c->S * ((uint64_t)c->Dh * e + 4));
    } else {
        CU_ASSERT_EQUAL(r.kernel.hbm_read_bytes + r.kernel.hbm_write_bytes,
                        r.kernel.hbm_bytes_min);
    }
    *kr = r.kernel;
    krun_result_free(&r);
    nn_graph_free(g);
}

TEST(attention_forward_equals_the_reference_causal_and_not_for_every_float_type)
{
    arch_config cfg = tiny();
    const nn_dtype dts[] = {NN_F32, NN_BF16, NN_F16};
    kc_result r;
    for (int d = 0; d < 3; d++)
        for (int causal = 0; causal < 2; causal++) {
            /* 37 queries: blocks of 16, 16 and 5; Dh 12 is not a multiple of the 4x4 array */
            attn_case c = {2, 3, 37, 12, dts[d], causal, false, 1, 0, 0};
            check_forward(&cfg, &c, 10 + (uint64_t)d, &r);
            CU_ASSERT_EQUAL(r.cores, 1u);
            /* one block (S smaller than any block), an odd head width */
            attn_case one = {1, 2, 5, 3, dts[d], causal, false, 1, 0, 0};
            check_forward(&cfg, &one, 20 + (uint64_t)d, &r);
        }
}

TEST(attention_forward_in_the_zoo_layout_on_two_cores_with_given_blocks)
{
    arch_config cfg = tiny(), big = roomy();
    kc_result r;
    for (int causal = 0; causal < 2; causal++) {
        attn_case c = {3, 2, 29, 8, NN_BF16, causal, true, 2, 8, 0};
        check_forward(&cfg, &c, 30, &r);
        CU_ASSERT_EQUAL(r.cores, 2u);
        CU_ASSERT_PTR_NOT_NULL(strstr(r.schedule, "8-row blocks"));
        /* 48-row blocks: a diagonal block is two of the mask's sub-rows (32 + 16) */
        attn_case w = {1, 3, 101, 5, NN_F32, causal, false, 2, 48, 0};
        check_forward(&big, &w, 40, &r);
        CU_ASSERT_PTR_NOT_NULL(strstr(r.schedule, "48-row blocks"));
    }
}

/* Elements of part p (dq, dk, dv) of got off want by more than rtol |want| + atol x the
 * part's largest |want|; the worst difference relative to that largest in *worst. */
static int64_t part_bad(const nn_tensor *got, const nn_tensor *want, int p, double rtol,
                        double atol, double *worst)
{
    int64_t n = nn_numel(want) / 3, bad = 0;
    const float *g = got->data + p * n, *w = want->data + p * n;
    double big = 0, d = 0;
    for (int64_t i = 0; i < n; i++)
        big = fmax(big, fabs(w[i]));
    for (int64_t i = 0; i < n; i++) {
        double x = fabs((double)g[i] - w[i]);
        d = fmax(d, x);
        bad += !(x <= rtol * fabs(w[i]) + atol * big);
    }
    *worst = d / fmax(big, 1e-30);
    return bad;
}

/* Backward: dq, dk, dv against attention_grad, from out and lse the references computed. */
static void check_backward(const arch_config *cfg, const attn_case *c, uint64_t seed,
                           kc_result *kr)
{
    np_err err = {0};
    nn_graph *g = nn_graph_new(1);
    int64_t *sh = DIMS(c->B, c->H, c->S, c->Dh);
    nn_tensor *q = nn_input(g, "q", c->dt, 4, sh), *k = nn_input(g, "k", c->dt, 4, sh),
              *v = nn_input(g, "v", c->dt, 4, sh), *dout = nn_input(g, "dout", c->dt, 4, sh);
    randn_as(q, seed, 1.0);
    randn_as(k, seed + 1, 1.0);
    randn_as(v, seed + 2, 1.0);
    randn_as(dout, seed + 3, 1.0);
    kc_kernel kf = attn_kernel(NN_OP_ATTENTION, c);
    nn_tensor *fin[3] = {q, k, v}, *fwd[2] = {0};
    const kc_kernel_def *fdef = kc_kernel_find(NN_OP_ATTENTION);
    CU_ASSERT_EQUAL_FATAL(fdef->reference(g, &kf, fin, fwd, &err), NP_OK);
    kc_kernel kk = attn_kernel(NN_OP_ATTENTION_GRAD, c);
    kk.n_in = 6, kk.n_out = 1;
    nn_tensor *in[6] = {q, k, v, fwd[0], dout, fwd[1]}, *want = NULL;
    CU_ASSERT_EQUAL_FATAL(kc_kernel_find(NN_OP_ATTENTION_GRAD)->reference(g, &kk, in, &want, &err),
                          NP_OK);
    CU_ASSERT_EQUAL_FATAL(nn_graph_compute(g, &err), NP_OK);
    nn_tensor *got = nn_input(g, "got", c->dt, 5, DIMS(3, c->B, c->H, c->S, c->Dh));
    for (int i = 0; i < 6; i++)
        kc_tensor_of(&kk.in[i], 0, in[i]);
    kc_tensor_of(&kk.out[0], 0, got);
    if (c->zoo_layout) {
        for (int i = 0; i < 5; i++)
            bshd(&kk.in[i]);
        /* each part [B, S, H, Dh]: a head's rows are not contiguous */
        kc_tensor *o = &kk.out[0];
        int64_t e = (int64_t)nn_dtype_size(c->dt);
        o->stride[4] = e, o->stride[2] = c->Dh * e, o->stride[3] = c->H * c->Dh * e;
        o->stride[1] = c->S * c->H * c->Dh * e, o->stride[0] = c->B * o->stride[1];
    }
    krun_io io = {.in = {q, k, v, fwd[0], dout, fwd[1]}, .out = {got}};
    krun_result r;
    np_status st = krun_kernel(cfg, &kk, &io, &(krun_opts){.functional = true}, &r, &err);
    if (st != NP_OK)
        fprintf(stderr, "attention_grad: %s\n", err.msg);
    CU_ASSERT_EQUAL_FATAL(st, NP_OK);
    double u = ulp_of(c->dt), worst[3];
    int64_t bad = 0;
    for (int p = 0; p < 3; p++)
        bad += part_bad(got, want, p, u, 4 * u, &worst[p]);
    if (getenv("KA_DEBUG") || bad)
        fprintf(stderr, "attention_grad %s%s S=%lld Dh=%lld: %lld off; worst |err| / max "
                "|part|: dq %g, dk %g, dv %g\n", nn_dtype_name(c->dt), c->causal ? " causal" : "",
                (long long)c->S, (long long)c->Dh, (long long)bad, worst[0], worst[1], worst[2]);
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_EQUAL(r.report->hbm_read_bytes, r.kernel.hbm_read_bytes);
    CU_ASSERT_EQUAL(r.report->hbm_write_bytes, r.kernel.hbm_write_bytes);
    bool streamed = strstr(r.kernel.schedule, "streamed") != NULL;
    CU_ASSERT_EQUAL(streamed, c->stream == 2);
    if (streamed) {
        uint64_t rd, wr;
        flash_bwd_bytes(c, c->block, &rd, &wr);
        CU_ASSERT_EQUAL(r.kernel.hbm_read_bytes, rd);
        CU_ASSERT_EQUAL(r.kernel.hbm_write_bytes, wr);
    } else {
        CU_ASSERT_EQUAL(r.kernel.hbm_read_bytes + r.kernel.hbm_write_bytes,
                        r.kernel.hbm_bytes_min);
    }
    *kr = r.kernel;
    krun_result_free(&r);
    nn_graph_free(g);
}

TEST(attention_backward_equals_the_reference_causal_and_not_for_every_float_type)
{
    arch_config cfg = tiny();
    const nn_dtype dts[] = {NN_F32, NN_BF16, NN_F16};
    kc_result r;
    for (int d = 0; d < 3; d++)
        for (int causal = 0; causal < 2; causal++) {
            attn_case c = {2, 2, 37, 12, dts[d], causal, false, 1, 0, 0};
            check_backward(&cfg, &c, 50 + (uint64_t)d, &r);
            attn_case one = {1, 2, 5, 3, dts[d], causal, false, 1, 0, 0};
            check_backward(&cfg, &one, 60 + (uint64_t)d, &r);
        }
}

TEST(attention_backward_in_the_zoo_layout_on_two_cores_with_given_blocks)
{
    arch_config cfg = tiny(), big = roomy();
    kc_result r;
    for (int causal = 0; causal < 2; causal++) {
        attn_case c = {3, 2, 29, 8, NN_BF16, causal, true, 2, 8, 0};
        check_backward(&cfg, &c, 70, &r);
        CU_ASSERT_EQUAL(r.cores, 2u);
        attn_case w = {1, 3, 101, 5, NN_F32, causal, false, 2, 48, 0};
        check_backward(&big, &w, 80, &r);
        CU_ASSERT_PTR_NOT_NULL(strstr(r.schedule, "48-row blocks"));
    }
}

/* ---- K/V streamed (kc_attn_st.c, kc_attn_stb.c) ------------------------------------------- */

TEST(streamed_attention_equals_the_reference_causal_and_not_for_every_float_type)
{
    arch_config cfg = tiny();
    const nn_dtype dts[] = {NN_F32, NN_BF16, NN_F16};
    kc_result r;
    for (int d = 0; d < 3; d++)
        for (int causal = 0; causal < 2; causal++) {
            /* 37 rows in 8-row blocks: 4 whole and an edge of 5; Dh 12 is no multiple of
             * tiny's 4 x 4 array */
            attn_case c = {2, 3, 37, 12, dts[d], causal, false, 1, 8, 2};
            check_forward(&cfg, &c, 200 + (uint64_t)d, &r);
            CU_ASSERT_PTR_NOT_NULL(strstr(r.schedule, "K/V streamed in 8-row blocks"));
            check_backward(&cfg, &c, 210 + (uint64_t)d, &r);
            /* one block, smaller than the block size */
            attn_case one = {1, 2, 5, 4, dts[d], causal, false, 1, 8, 2};
            check_forward(&cfg, &one, 220 + (uint64_t)d, &r);
            check_backward(&cfg, &one, 230 + (uint64_t)d, &r);
            /* a multiple of the block (no edge), two and three blocks */
            for (int64_t S = 32; S <= 48; S += 16) {
                attn_case m = {1, 2, S, 8, dts[d], causal, false, 1, 16, 2};
                check_forward(&cfg, &m, 240 + (uint64_t)d, &r);
                check_backward(&cfg, &m, 250 + (uint64_t)d, &r);
            }
        }
}

TEST(streamed_attention_takes_head_dims_up_to_256_and_sequences_off_the_block)
{
    arch_config cfg = roomy();
    kc_result r;
    const int64_t dhs[] = {64, 96, 128, 256};
    for (int i = 0; i < 4; i++)
        for (int causal = 0; causal < 2; causal++) {
            /* 100 rows in 32-row blocks: three whole, an edge of 4; six of 16 (edge 4) */
            attn_case c = {1, 2, 100, dhs[i], NN_BF16, causal, false, 2, dhs[i] > 128 ? 16 : 32,
                           2};
            check_forward(&cfg, &c, 300 + (uint64_t)i, &r);
            check_backward(&cfg, &c, 310 + (uint64_t)i, &r);
        }
}

TEST(streamed_attention_splits_heads_and_row_blocks_over_many_cores_in_the_zoo_layout)
{
    /* tiny with 8 cores: 3 heads of 7 row blocks (101 rows, blocks of 16) leave cores for the
     * rows, so each head's blocks are cut into parts (dealt in snake order when causal) */
    arch_config cfg;
    np_err e = {0};
    const char *sets[] = {"chip.cores=8", "chip.mesh_x=4", "chip.mesh_y=2",
                          "core.acc_bytes=64KiB", "core.sram_bytes=512KiB"};
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tiny", sets, 5, &cfg, &e), NP_OK);
    kc_result r;
    for (int causal = 0; causal < 2; causal++)
        for (int zoo = 0; zoo < 2; zoo++) {
            attn_case c = {1, 3, 101, 8, NN_BF16, causal, zoo, 8, 16, 2};
            check_forward(&cfg, &c, 400 + (uint64_t)zoo, &r);
            CU_ASSERT(r.cores > 3);
            check_backward(&cfg, &c, 410 + (uint64_t)zoo, &r);
            CU_ASSERT(r.cores > 3);
        }
}

/* A100-like cores (192 KiB of scratchpad, 256 KiB of accumulators) hold no head of GPT-3's
 * 2048 x 128 resident (q, k and v alone are 1.5 MiB): the kernels stream K/V, for sequences
 * up to 32k and heads up to 256 wide, in blocks that leave room for two stream sets. */
TEST(streamed_attention_fits_an_a100_like_core_for_gpt3_heads_and_32k_sequences)
{
    arch_config cfg;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(arch_resolve("a100-cluster", NULL, 0, &cfg, &e), NP_OK);
    const int64_t shapes[][2] = {{2048, 128}, {32768, 128}, {32768, 256}, {4096, 64}};
    for (int s = 0; s < 4; s++)
        for (int op = 0; op < 2; op++) {
            int64_t S = shapes[s][0], Dh = shapes[s][1];
            kc_prog *p;
            CU_ASSERT_EQUAL_FATAL(kc_prog_new(&cfg, &(kc_prog_opts){0}, &p, &e), NP_OK);
            attn_case c = {1, 2, S, Dh, NN_BF16, true, false, 108, 0, 0};
            kc_kernel k = attn_kernel(op ? NN_OP_ATTENTION_GRAD : NN_OP_ATTENTION, &c);
            int n_in = op ? 6 : 3;
            k.n_in = n_in, k.n_out = op ? 1 : 2;
            uint64_t addr;
            for (int i = 0; i < n_in; i++) {
                bool lse = i == 5;
                CU_ASSERT_EQUAL_FATAL(kc_prog_bss(p, NULL, (uint64_t)(2 * S * (lse ? 4 : Dh * 2)),
                                                  &addr, &e), NP_OK);
                kc_tensor_dense(&k.in[i], addr, lse ? NN_F32 : NN_BF16, lse ? 3 : 4,
                                DIMS(1, 2, S, Dh));
            }
            CU_ASSERT_EQUAL_FATAL(kc_prog_bss(p, NULL, (uint64_t)(3 * 2 * S * Dh * 2 + 8 * S),
                                              &addr, &e), NP_OK);
            if (op) {
                kc_tensor_dense(&k.out[0], addr, NN_BF16, 5, DIMS(3, 1, 2, S, Dh));
            } else {
                kc_tensor_dense(&k.out[0], addr, NN_BF16, 4, DIMS(1, 2, S, Dh));
                kc_tensor_dense(&k.out[1], addr + (uint64_t)(2 * S * Dh * 2), NN_F32, 3,
                                DIMS(1, 2, S));
            }
            kc_result r;
            np_status st = kc_compile(p, &k, &r, &e);
            if (st != NP_OK)
                fprintf(stderr, "%s %lldx%lld: %s\n", nn_op_name(k.op), (long long)S,
                        (long long)Dh, e.msg);
            CU_ASSERT_EQUAL(st, NP_OK);
            if (st == NP_OK && getenv("KA_DEBUG"))
                fprintf(stderr, "%s %lldx%lld: %s, %llu scratchpad bytes\n", nn_op_name(k.op),
                        (long long)S, (long long)Dh, r.schedule,
                        (unsigned long long)r.spad_bytes);
            if (st == NP_OK) {
                CU_ASSERT_PTR_NOT_NULL(strstr(r.schedule, "K/V streamed"));
                CU_ASSERT(r.spad_bytes <= 192 * 1024);
                if (Dh == 128) /* two stream sets of 64-row blocks at least */
                    CU_ASSERT(strstr(r.schedule, "in 64-row") || strstr(r.schedule, "in 128-row"));
                /* row blocks spread over the chip, not 2 heads on 2 cores: at least 17 parts of
                 * a head's 32 or more row blocks (each part about one long and one short) */
                CU_ASSERT(r.cores >= 34);
            }
            kc_prog_free(p);
        }
}

TEST(attention_lse_alone_equals_the_reference_and_reads_only_q_and_k)
{
    arch_config cfg = tiny();
    for (int causal = 0; causal < 2; causal++) {
        np_err err = {0};
        attn_case c = {2, 2, 43, 7, NN_BF16, causal, false, 2, 0, 0};
        int64_t *sh = DIMS(c.B, c.H, c.S, c.Dh);
        nn_graph *g = nn_graph_new(1);
        nn_tensor *q = nn_input(g, "q", c.dt, 4, sh), *k = nn_input(g, "k", c.dt, 4, sh);
        randn_as(q, 90, 2.0);
        randn_as(k, 91, 2.0);
        kc_kernel kk = attn_kernel(NN_OP_ATTENTION_LSE, &c);
        kk.n_in = 2, kk.n_out = 1;
        nn_tensor *in[2] = {q, k}, *want = NULL;
        const kc_kernel_def *def = kc_kernel_find(NN_OP_ATTENTION_LSE);
        CU_ASSERT_EQUAL_FATAL(def->reference(g, &kk, in, &want, &err), NP_OK);
        CU_ASSERT_EQUAL_FATAL(nn_graph_compute(g, &err), NP_OK);
        nn_tensor *got = nn_input(g, "got", NN_F32, 3, sh);
        kc_tensor_of(&kk.in[0], 0, q);
        kc_tensor_of(&kk.in[1], 0, k);
        kc_tensor_of(&kk.out[0], 0, got);
        krun_io io = {.in = {q, k}, .out = {got}};
        krun_result r;
        CU_ASSERT_EQUAL_FATAL(krun_kernel(&cfg, &kk, &io, &(krun_opts){.functional = true}, &r,
                                          &err), NP_OK);
        krun_diff d = krun_compare(got, want, 1e-5, 1e-5);
        CU_ASSERT_EQUAL(d.bad, 0);
        CU_ASSERT_EQUAL(r.report->hbm_read_bytes, 2u * 2 * 2 * 43 * 7 * 2); /* q and k once */
        CU_ASSERT_EQUAL(r.report->hbm_write_bytes, 2u * 2 * 43 * 4);
        CU_ASSERT_EQUAL(r.kernel.mxu_flops, 2u * 2 * 2 * 7 * (causal ? 43 * 44 / 2 : 43 * 43));
        krun_result_free(&r);
        nn_graph_free(g);
    }
}

/* Instructions of an attention kernel compiled alone (timing only). */
static uint64_t attn_insns(const arch_config *cfg, nn_op op, int64_t B, int64_t H, int64_t S,
                           bool causal, int stream)
{
    attn_case c = {B, H, S, 8, NN_BF16, causal, false, 1, 16, stream};
    kc_kernel k = attn_kernel(op, &c);
    int n_in = op == NN_OP_ATTENTION ? 3 : 6;
    k.n_in = n_in, k.n_out = op == NN_OP_ATTENTION ? 2 : 1;
    for (int i = 0; i < n_in; i++)
        kc_tensor_dense(&k.in[i], 0, i == 5 ? NN_F32 : NN_BF16, i == 5 ? 3 : 4, DIMS(B, H, S, 8));
    if (op == NN_OP_ATTENTION) {
        kc_tensor_dense(&k.out[0], 0, NN_BF16, 4, DIMS(B, H, S, 8));
        kc_tensor_dense(&k.out[1], 0, NN_F32, 3, DIMS(B, H, S));
    } else {
        kc_tensor_dense(&k.out[0], 0, NN_BF16, 5, DIMS(3, B, H, S, 8));
    }
    krun_result r;
    np_err err = {0};
    np_status st = krun_kernel(cfg, &k, NULL, NULL, &r, &err);
    if (st != NP_OK)
        fprintf(stderr, "%s: %s\n", nn_op_name(op), err.msg);
    CU_ASSERT_EQUAL_FATAL(st, NP_OK);
    uint64_t n = r.kernel.insns;
    if (getenv("KA_DEBUG"))
        fprintf(stderr, "%s %lldx%lldx%lld%s: %llu insns\n", nn_op_name(op), (long long)B,
                (long long)H, (long long)S, causal ? " causal" : "", (unsigned long long)n);
    krun_result_free(&r);
    return n;
}

TEST(attention_program_size_grows_with_distinct_blocks_not_with_heads_or_key_blocks)
{
    arch_config cfg = roomy();
    nn_op ops[2] = {NN_OP_ATTENTION, NN_OP_ATTENTION_GRAD};
    for (int o = 0; o < 2; o++)
        for (int stream = 1; stream <= 2; stream++) { /* resident, K/V streamed */
            /* heads are loops (resident: a head's body emitted for the loops over b and h and
             * their last iterations, which prefetch differently; streamed: the first unit,
             * which has no store pending, and the loops over the rest): 2 x 3 heads and 3 x 5
             * are one program */
            uint64_t a = attn_insns(&cfg, ops[o], 3, 3, 70, false, stream);
            CU_ASSERT_EQUAL(attn_insns(&cfg, ops[o], 3, 5, 70, false, stream), a);
            /* not causal: the middle query and key blocks are loops (70 = 4 x 16 + 6, 150 =
             * 9 x 16 + 6 rows: the same distinct blocks) */
            CU_ASSERT_EQUAL(attn_insns(&cfg, ops[o], 3, 3, 150, false, stream), a);
            /* causal: a body per block row (row i sees i + 1 key blocks, the middle ones a
             * loop), so 10 rows are about twice 5 */
            uint64_t c5 = attn_insns(&cfg, ops[o], 3, 3, 70, true, stream);
            uint64_t c10 = attn_insns(&cfg, ops[o], 3, 3, 150, true, stream);
            CU_ASSERT(c10 > c5 * 3 / 2 && c10 < c5 * 5 / 2);
        }
}

TEST(bad_attention_kernels_are_errors_naming_what_is_wrong)
{
    arch_config cfg = tiny();
    np_err err = {0};
    krun_result r;
    kc_kernel k = {.op = NN_OP_ATTENTION, .n_in = 3, .n_out = 2};
    for (int i = 0; i < 3; i++)
        kc_tensor_dense(&k.in[i], 0, NN_BF16, 4, DIMS(1, 2, 16, 8));
    kc_tensor_dense(&k.out[0], 0, NN_BF16, 4, DIMS(1, 2, 16, 8));
    kc_tensor_dense(&k.out[1], 0, NN_F32, 3, DIMS(1, 2, 16));
    CU_ASSERT_EQUAL(krun_kernel(&cfg, &k, NULL, NULL, &r, &err), NP_OK);
    krun_result_free(&r);
    kc_kernel bad = k; /* v of another length */
    kc_tensor_dense(&bad.in[2], 0, NN_BF16, 4, DIMS(1, 2, 15, 8));
    CU_ASSERT_EQUAL(krun_kernel(&cfg, &bad, NULL, NULL, &r, &err), NP_ERR_INCONSISTENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "attention: v must be [1, 2, 16, 8] like q"));
    bad = k; /* integers */
    for (int i = 0; i < 3; i++)
        bad.in[i].dtype = NN_I8;
    CU_ASSERT_EQUAL(krun_kernel(&cfg, &bad, NULL, NULL, &r, &err), NP_ERR_INCONSISTENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "attention takes floats"));
    bad = k; /* a column-major head */
    bad.in[1].stride[3] = 16 * 2, bad.in[1].stride[2] = 2;
    CU_ASSERT_EQUAL(krun_kernel(&cfg, &bad, NULL, NULL, &r, &err), NP_ERR_INCONSISTENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "k: its last dim must be contiguous"));
    bad = k; /* lse not fp32 */
    bad.out[1].dtype = NN_BF16;
    CU_ASSERT_EQUAL(krun_kernel(&cfg, &bad, NULL, NULL, &r, &err), NP_ERR_INCONSISTENT);
    /* a head that cannot be resident (q, k, v: 96 KiB) streams its K/V */
    bad = k;
    for (int i = 0; i < 3; i++)
        kc_tensor_dense(&bad.in[i], 0, NN_BF16, 4, DIMS(1, 2, 256, 64));
    kc_tensor_dense(&bad.out[0], 0, NN_BF16, 4, DIMS(1, 2, 256, 64));
    kc_tensor_dense(&bad.out[1], 0, NN_F32, 3, DIMS(1, 2, 256));
    CU_ASSERT_EQUAL(krun_kernel(&cfg, &bad, NULL, NULL, &r, &err), NP_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.kernel.schedule, "K/V streamed"));
    krun_result_free(&r);
    /* a head too wide for even one 8-row block of k and v names both schedules' needs: one
     * block of q, k, v is 8 x 4096 x 2 bytes each, 64 KiB (tiny has 64 KiB) */
    for (int i = 0; i < 3; i++)
        kc_tensor_dense(&bad.in[i], 0, NN_BF16, 4, DIMS(1, 2, 16, 4096));
    kc_tensor_dense(&bad.out[0], 0, NN_BF16, 4, DIMS(1, 2, 16, 4096));
    kc_tensor_dense(&bad.out[1], 0, NN_F32, 3, DIMS(1, 2, 16));
    CU_ASSERT_EQUAL(krun_kernel(&cfg, &bad, NULL, NULL, &r, &err), NP_ERR_RANGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "a head of 16 x 4096 bf16 does not fit: with K/V "
                                           "streamed in 8-row blocks it needs "));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "scratchpad bytes (65536 free)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "; resident with 8-row blocks it needs"));
    /* an unknown attribute gets a did-you-mean */
    bad = k;
    bad.n_attrs = 1, bad.attrs[0] = KC_INT("casual", 1);
    CU_ASSERT_EQUAL(krun_kernel(&cfg, &bad, NULL, NULL, &r, &err), NP_ERR_UNKNOWN_KEY);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "did you mean 'causal'?"));
}

/* The builders of `npusim kernel --op` make kernels that compile, and the forward's array and
 * vector unit overlap (one block ahead): the run is shorter than their busy times added. */
TEST(attention_kernels_build_from_their_op_keys_and_the_array_overlaps_the_vector_unit)
{
    arch_config cfg = roomy();
    const char *specs[] = {"attention shape=2x3x150x16 dtype=bf16",
                           "attention_lse shape=2x3x150x16",
                           "attention_grad shape=2x3x150x16 causal=1 dtype=fp32"};
    for (int i = 0; i < 3; i++) {
        np_err err = {0};
        kc_prog *p;
        CU_ASSERT_EQUAL_FATAL(kc_prog_new(&cfg, &(kc_prog_opts){.cores = 1}, &p, &err), NP_OK);
        kc_spec s;
        CU_ASSERT_EQUAL_FATAL(kc_spec_parse(specs[i], &s, &err), NP_OK);
        kc_kernel k;
        CU_ASSERT_EQUAL_FATAL(kc_spec_kernel(p, &s, &k, &err), NP_OK);
        kc_prog_free(p);
        krun_result r;
        np_status st = krun_kernel(&cfg, &k, NULL, NULL, &r, &err);
        if (st != NP_OK)
            fprintf(stderr, "%s: %s\n", specs[i], err.msg);
        CU_ASSERT_EQUAL_FATAL(st, NP_OK);
        if (i == 0) {
            const core_unit_report *u = r.report->units; /* core 0: dma, mxu, vpu, ... */
            uint64_t mxu = u[1].busy_cycles, vpu = u[2].busy_cycles;
            if (getenv("KA_DEBUG"))
                fprintf(stderr, "%s: %llu cycles, mxu %llu busy, vpu %llu busy\n", specs[i],
                        (unsigned long long)r.report->total_cycles, (unsigned long long)mxu,
                        (unsigned long long)vpu);
            CU_ASSERT(r.report->total_cycles < (mxu + vpu) * 9 / 10);
        }
        krun_result_free(&r);
    }
}

/* Semaphores alone order every buffer's reuse: no operand scoreboard, four copies in flight. */
TEST(attention_values_hold_with_semaphores_alone_and_copies_in_flight)
{
    arch_config cfg;
    np_err e = {0};
    const char *sets[] = {"core.scoreboard=0", "core.dma_outstanding=4", "core.acc_bytes=64KiB",
                          "core.sram_bytes=512KiB"};
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tiny", sets, 4, &cfg, &e), NP_OK);
    kc_result r;
    for (int causal = 0; causal < 2; causal++) {
        attn_case c = {2, 3, 101, 12, NN_BF16, causal, false, 2, 48, 0};
        check_forward(&cfg, &c, 100, &r);
        check_backward(&cfg, &c, 110, &r);
        attn_case st = {2, 3, 101, 12, NN_BF16, causal, true, 2, 16, 2}; /* K/V streamed */
        check_forward(&cfg, &st, 120, &r);
        check_backward(&cfg, &st, 130, &r);
    }
}
