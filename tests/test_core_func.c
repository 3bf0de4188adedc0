/* test_core_func.c — functional mode: real values through DMA, the array and the vector unit.
 * References are written here independently: a triple-loop matmul (fp32 accumulation in k
 * order, the documented order), a bf16 round-to-nearest-even by bit arithmetic, and
 * hand-computed vector results. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <stdio.h>

#include "arch.h"
#include "core.h"
#include "core_func.h"
#include "harness.h"
#include "philox.h"
#include "isa_asm.h"
#include "kgen_matmul.h"
#include "rng.h"

static arch_config tiny_df(const char *df)
{
    arch_config cfg;
    np_err e = {0};
    const char *sets[1] = {df};
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tiny", sets, df ? 1 : 0, &cfg, &e), NP_OK);
    return cfg;
}

/* bf16 bits of a float by round-to-nearest-even on the bit pattern (finite inputs). */
static uint16_t ref_bf16(float f)
{
    uint32_t b;
    memcpy(&b, &f, 4);
    b += 0x7fffu + ((b >> 16) & 1u);
    return (uint16_t)(b >> 16);
}

static float bf16_val(uint16_t h)
{
    uint32_t b = (uint32_t)h << 16;
    float f;
    memcpy(&f, &b, 4);
    return f;
}

TEST(element_conversions_round_to_nearest_even_and_saturate)
{
    uint8_t p[4];
    /* bf16 keeps 8 significant bits: 1 + 2^-8 is a tie between 1 and 1 + 2^-7 -> 1 (even);
     * 1 + 3 x 2^-8 is a tie between 1 + 2^-7 and 1 + 2^-6 -> 1 + 2^-6 (even). */
    core_elem_put(p, ISA_DTYPE_BF16, 1.0 + 1.0 / 256);
    CU_ASSERT_EQUAL(core_elem_get(p, ISA_DTYPE_BF16), 1.0);
    core_elem_put(p, ISA_DTYPE_BF16, 1.0 + 3.0 / 256);
    CU_ASSERT_EQUAL(core_elem_get(p, ISA_DTYPE_BF16), 1.0 + 1.0 / 64);
    /* fp16 keeps 11: 1 + 2^-11 ties to 1; 2049 ties to 2048; 65520 overflows to inf. */
    core_elem_put(p, ISA_DTYPE_FP16, 1.0 + 1.0 / 2048);
    CU_ASSERT_EQUAL(core_elem_get(p, ISA_DTYPE_FP16), 1.0);
    core_elem_put(p, ISA_DTYPE_FP16, 2049);
    CU_ASSERT_EQUAL(core_elem_get(p, ISA_DTYPE_FP16), 2048);
    core_elem_put(p, ISA_DTYPE_FP16, -0.375);
    CU_ASSERT_EQUAL(core_elem_get(p, ISA_DTYPE_FP16), -0.375);
    core_elem_put(p, ISA_DTYPE_FP16, 65520);
    CU_ASSERT(isinf(core_elem_get(p, ISA_DTYPE_FP16)));
    core_elem_put(p, ISA_DTYPE_FP16, 1.0 / 16777216); /* 2^-24: the smallest subnormal */
    CU_ASSERT_EQUAL(core_elem_get(p, ISA_DTYPE_FP16), 1.0 / 16777216);
    /* integers: nearest even, saturating */
    core_elem_put(p, ISA_DTYPE_INT8, 2.5);
    CU_ASSERT_EQUAL(core_elem_get(p, ISA_DTYPE_INT8), 2);
    core_elem_put(p, ISA_DTYPE_INT8, -3.5);
    CU_ASSERT_EQUAL(core_elem_get(p, ISA_DTYPE_INT8), -4);
    core_elem_put(p, ISA_DTYPE_INT8, 200);
    CU_ASSERT_EQUAL(core_elem_get(p, ISA_DTYPE_INT8), 127);
    core_elem_put(p, ISA_DTYPE_INT32, -1e12);
    CU_ASSERT_EQUAL(core_elem_get(p, ISA_DTYPE_INT32), -2147483648.0);
}

/* Runs the generated matmul functionally on `cores` cores; A, B given as raw bytes; returns
 * C's bytes. */
static uint8_t *run_matmul_on(const arch_config *cfg, uint64_t M, uint64_t N, uint64_t K,
                              isa_dtype dt, const uint8_t *A, const uint8_t *B, uint64_t cores)
{
    kgen_matmul mm = {M, N, K, dt, 0, 0, 0, cores};
    np_err e = {0};
    char *text;
    isa_program *p;
    CU_ASSERT_EQUAL_FATAL(kgen_matmul_build(cfg, &mm, &text, &p, &e), NP_OK);
    free(text);
    const isa_symbol *sa = isa_program_symbol(p, "A"), *sb = isa_program_symbol(p, "B"),
                     *sc = isa_program_symbol(p, "C");
    CU_ASSERT_PTR_NOT_NULL_FATAL(sa);
    CU_ASSERT_PTR_NOT_NULL_FATAL(sc);
    uint64_t ce = isa_dtype_size[kgen_matmul_out_dtype(dt)];
    uint8_t *C = malloc(M * N * ce);
    core_hbm_io in[2] = {{sa->addr, (void *)A, M * K * isa_dtype_size[dt], 0},
                         {sb->addr, (void *)B, K * N * isa_dtype_size[dt], 0}};
    core_hbm_io out = {sc->addr, C, M * N * ce, 0};
    core_sim_opts o = {.functional = true, .inputs = in, .n_inputs = 2, .outputs = &out,
                       .n_outputs = 1};
    core_report *r;
    CU_ASSERT_EQUAL_FATAL(core_sim_run_opts(cfg, p, &o, NULL, &r, &e), NP_OK);
    core_report_free(r);
    isa_program_free(p);
    return C;
}

static uint8_t *run_matmul(const arch_config *cfg, uint64_t M, uint64_t N, uint64_t K,
                           isa_dtype dt, const uint8_t *A, const uint8_t *B)
{
    return run_matmul_on(cfg, M, N, K, dt, A, B, 1);
}

TEST(generated_matmul_values_equal_a_reference_for_seeded_shapes_dtypes_and_dataflows)
{
    static const char *dfs[] = {"core.dataflow=os", "core.dataflow=ws", "core.dataflow=is"};
    static const isa_dtype dts[] = {ISA_DTYPE_INT8, ISA_DTYPE_BF16, ISA_DTYPE_FP16};
    rng g;
    rng_seed(&g, 20261129);
    unsigned runs = 0;
    for (int s = 0; s < 30; s++) {
        uint64_t M = 1 + rng_below(&g, 40), N = 1 + rng_below(&g, 40), K = 1 + rng_below(&g, 40);
        for (int d = 0; d < 3; d++)
            for (int t = 0; t < 3; t++) {
                arch_config cfg = tiny_df(dfs[d]);
                isa_dtype dt = dts[t];
                uint64_t e = isa_dtype_size[dt];
                uint8_t *A = malloc(M * K * e), *B = malloc(K * N * e);
                double *a = malloc(M * K * sizeof *a), *b = malloc(K * N * sizeof *b);
                for (uint64_t i = 0; i < M * K + K * N; i++) {
                    /* int8: -100..100; floats: multiples of 1/8 in [-4, 4) (exact in bf16) */
                    double v = dt == ISA_DTYPE_INT8 ? (double)rng_below(&g, 201) - 100
                                                    : ((double)rng_below(&g, 64) - 32) / 8;
                    uint8_t *dst = i < M * K ? A + i * e : B + (i - M * K) * e;
                    if (dt == ISA_DTYPE_INT8) {
                        dst[0] = (uint8_t)(int8_t)v;
                    } else if (dt == ISA_DTYPE_BF16) {
                        uint16_t h = ref_bf16((float)v);
                        dst[0] = (uint8_t)h, dst[1] = (uint8_t)(h >> 8);
                    } else {
                        uint16_t h = isa_f32_to_fp16((float)v); /* exact: 1/8 steps below 4 */
                        dst[0] = (uint8_t)h, dst[1] = (uint8_t)(h >> 8);
                    }
                    *(i < M * K ? &a[i] : &b[i - M * K]) = v;
                }
                uint8_t *C = run_matmul(&cfg, M, N, K, dt, A, B);
                for (uint64_t i = 0; i < M; i++)
                    for (uint64_t j = 0; j < N; j++) {
                        if (dt == ISA_DTYPE_INT8) {
                            int32_t want = 0, got;
                            for (uint64_t k = 0; k < K; k++)
                                want += (int32_t)a[i * K + k] * (int32_t)b[k * N + j];
                            memcpy(&got, C + (i * N + j) * 4, 4);
                            CU_ASSERT_EQUAL_FATAL(got, want);
                        } else {
                            float acc = 0;
                            for (uint64_t k = 0; k < K; k++)
                                acc += (float)a[i * K + k] * (float)b[k * N + j];
                            uint16_t h = (uint16_t)(C[(i * N + j) * 2] | (C[(i * N + j) * 2 + 1] << 8));
                            if (dt == ISA_DTYPE_BF16) {
                                CU_ASSERT_EQUAL_FATAL(h, ref_bf16(acc));
                            } else {
                                /* |acc| <= 40 x 16 = 640 in 1/64 steps: fp16 is within half
                                 * an ulp (2^-11 relative) of it */
                                double got = core_elem_get(C + (i * N + j) * 2, ISA_DTYPE_FP16);
                                CU_ASSERT_FATAL(fabs(got - acc) <= fabs(acc) / 2048 + 1e-12);
                            }
                        }
                    }
                free(A), free(B), free(a), free(b), free(C);
                runs++;
            }
    }
    CU_ASSERT_EQUAL(runs, 270u);
    (void)bf16_val;
}

/* Runs src functionally with `in` at HBM 0x100000 and returns n bytes from HBM 0x200000. */
static void run_vec(const char *src, const void *in, uint64_t in_n, void *out, uint64_t out_n)
{
    arch_config cfg = tiny_df(NULL);
    isa_target t;
    isa_target_from_arch(&cfg, &t);
    isa_asm_opts o = {.target = &t};
    isa_program *p;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(isa_asm(src, strlen(src), "v.s", &o, &p, &e), NP_OK);
    core_hbm_io i = {0x100000, (void *)in, in_n, 0}, w = {0x200000, out, out_n, 0};
    core_sim_opts so = {.functional = true, .inputs = &i, .n_inputs = 1, .outputs = &w,
                        .n_outputs = 1};
    core_report *r;
    CU_ASSERT_EQUAL_FATAL(core_sim_run_opts(&cfg, p, &so, NULL, &r, &e), NP_OK);
    core_report_free(r);
    isa_program_free(p);
}

TEST(vector_ops_and_the_drain_epilogue_compute_hand_checked_values)
{
    float in[9] = {1, -2, 3, 4, 5, -6, 10, 20, 30}, out[23] = {0};
    run_vec(".core 0\n"
            "dma.copy spad[0], hbm[0x100000], fp32, 9\n"
            "sem.signal dma, s0\n"
            "sem.wait vpu, s0\n"
            "vpu.add spad[0x100], spad[0], spad[0x18], 2, 3, fp32, bcast=row\n"
            "vpu.relu spad[0x200], spad[0], 2, 3, fp32\n"
            "vpu.rsum spad[0x300], spad[0], 2, 3, fp32\n"
            "vpu.cmax spad[0x310], spad[0], 2, 3, fp32\n"
            "vpu.transpose spad[0x400], spad[0], 2, 3, fp32\n"
            "sem.signal vpu, s1\n"
            "sem.wait dma, s1\n"
            "dma.copy hbm[0x200000], spad[0x100], fp32, 6\n"
            "dma.copy hbm[0x200018], spad[0x200], fp32, 6\n"
            "dma.copy hbm[0x200030], spad[0x300], fp32, 2\n"
            "dma.copy hbm[0x200038], spad[0x310], fp32, 3\n"
            "dma.copy hbm[0x200044], spad[0x400], fp32, 6\n",
            in, sizeof in, out, sizeof out);
    static const float want[23] = {11, 18, 33, 14, 25, 24, /* x + row */
                                   1, 0, 3, 4, 5, 0,       /* relu */
                                   2, 3,                   /* row sums */
                                   4, 5, 3,                /* column maxima */
                                   1, 4, -2, 5, 3, -6};    /* transpose */
    for (int i = 0; i < 23; i++)
        CU_ASSERT_EQUAL(out[i], want[i]);

    /* The array and its epilogue: [1 2; 3 4] x [1 0; 0 1] = itself, then relu(acc x -2 + bias)
     * with bias [1, 9]: [relu(-1), relu(5); relu(-5), relu(1)] = [0, 5; 0, 1]; int8 cast of
     * [1.5, 2.5, -200, 300] -> [2, 2, -128, 127]. */
    float m_in[10] = {1, 2, 3, 4, 1, 0, 0, 1, 1, 9}, m_out[4];
    run_vec(".core 0\n"
            "dma.copy spad[0], hbm[0x100000], fp32, 10\n"
            "sem.signal dma, s0\nsem.wait mxu, s0\n"
            "mxu.load spad[0x10], 2, 2, fp32\n"
            "mxu.mm acc[0], spad[0], 2, fp32\n"
            "mxu.drain spad[0x100], acc[0], 2, 2, fp32, act=relu, scale=-2.0, bias=spad[0x20]\n"
            "sem.signal mxu, s1\nsem.wait dma, s1\n"
            "dma.copy hbm[0x200000], spad[0x100], fp32, 4\n",
            m_in, sizeof m_in, m_out, sizeof m_out);
    CU_ASSERT_EQUAL(m_out[0], 0);
    CU_ASSERT_EQUAL(m_out[1], 5);
    CU_ASSERT_EQUAL(m_out[2], 0);
    CU_ASSERT_EQUAL(m_out[3], 1);
    float c_in[4] = {1.5f, 2.5f, -200, 300};
    int8_t c_out[4];
    run_vec(".core 0\n"
            "dma.copy spad[0], hbm[0x100000], fp32, 4\n"
            "sem.signal dma, s0\nsem.wait vpu, s0\n"
            "vpu.cast spad[0x100], spad[0], 1, 4, int8, fp32\n"
            "sem.signal vpu, s1\nsem.wait dma, s1\n"
            "dma.copy hbm[0x200000], spad[0x100], int8, 4\n",
            c_in, sizeof c_in, c_out, sizeof c_out);
    CU_ASSERT(c_out[0] == 2 && c_out[1] == 2 && c_out[2] == -128 && c_out[3] == 127);
}

TEST(compare_select_iota_rand_and_activation_derivatives_compute_hand_checked_values)
{
    /* x = [1 -2 3; 4 5 -6] at 0, y = [1 8 3; 10 5 12] at 0x18, then 0.5, 0, 1.3, -0.7 (the
     * derivatives' a) at 0x30 and 2, 3, 1, 1 (their b) at 0x40 */
    float in[20] = {1, -2, 3, 4, 5, -6, 1, 8, 3, 10, 5, 12, 0.5f, 0, 1.3f, -0.7f, 2, 3, 1, 1};
    float out[54] = {0};
    run_vec(".core 0\n"
            "dma.copy spad[0], hbm[0x100000], fp32, 20\n"
            "sem.signal dma, s0\n"
            "sem.wait vpu, s0\n"
            "li r3, 12\n"
            "vpu.cmpeq spad[0x100], spad[0], spad[0x18], 2, 3, fp32\n"
            "vpu.cmplts spad[0x118], spad[0], 3.0, 2, 3, fp32\n"
            "vpu.cmpge spad[0x130], spad[0], spad[0x18], 2, 3, fp32, bcast=row\n"
            "vpu.sels spad[0x148], spad[0x118], spad[0], -1.0, 2, 3, fp32\n"
            "vpu.sel spad[0x160], spad[0x118], spad[0x18], spad[4], 2, 3, fp32, bcast=scalar\n"
            "vpu.iota spad[0x178], r3-7, -1, 2, 2, 3, fp32\n"
            "vpu.rand spad[0x190], r3+4, 0x9abc, 0x1234, 2, 3, fp32, ctr_s=10\n"
            "vpu.dtanh spad[0x1a8], spad[0x30], spad[0x40], 1, 4, fp32\n"
            "vpu.dgelu spad[0x1b8], spad[0x30], spad[0x40], 1, 4, fp32\n"
            "vpu.dsilu spad[0x1c8], spad[0x30], spad[0x40], 1, 4, fp32\n"
            "sem.signal vpu, s1\n"
            "sem.wait dma, s1\n"
            "dma.copy hbm[0x200000], spad[0x100], fp32, 54\n",
            in, sizeof in, out, sizeof out);
    static const float want[36] = {
        1, 0, 1, 0, 1, 0,      /* x == y */
        1, 1, 0, 0, 0, 1,      /* x < 3 */
        1, 0, 1, 1, 0, 0,      /* x >= y's first row [1 8 3] */
        1, -2, -1, -1, -1, -6, /* x where x < 3, else -1 */
        1, 8, -2, -2, -2, 12,  /* y where x < 3, else the scalar x[1] = -2 */
        5, 7, 9, 4, 6, 8,      /* 12 - 7 + 2j - i */
    };
    for (int i = 0; i < 36; i++)
        CU_ASSERT_EQUAL(out[i], want[i]);
    /* counters 16 + 10 i + j, key 0x00001234'00009abc */
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            CU_ASSERT_EQUAL(out[36 + 3 * i + j],
                            np_philox_uniform24(0x123400009abcULL, (uint64_t)(16 + 10 * i + j)));
    /* (1 - a^2) b: 0.75 x 2, 1 x 3, (1 - 1.69) x 1, (1 - 0.49) x 1 */
    CU_ASSERT_EQUAL(out[42], 1.5f);
    CU_ASSERT_EQUAL(out[43], 3.0f);
    CU_ASSERT(fabsf(out[44] - (1.0f - 1.3f * 1.3f)) < 1e-6f);
    CU_ASSERT(fabsf(out[45] - 0.51f) < 1e-6f);
    /* gelu's and silu's derivatives by central differences of the functions themselves (h =
     * 1e-4: an error near h^2 / 6 times the third derivative, below 1e-8) times b */
    const double a[4] = {0.5f, 0, 1.3f, -0.7f}, b[4] = {2, 3, 1, 1};
    for (int k = 0; k < 4; k++) {
        double x = a[k], h = 1e-4;
#define GELU_(v) (0.5 * (v) * (1 + tanh(0.7978845608028654 * ((v) + 0.044715 * (v) * (v) * (v)))))
#define SILU_(v) ((v) / (1 + exp(-(v))))
        double dg = (GELU_(x + h) - GELU_(x - h)) / (2 * h);
        double ds = (SILU_(x + h) - SILU_(x - h)) / (2 * h);
#undef GELU_
#undef SILU_
        CU_ASSERT(fabs(out[46 + k] - dg * b[k]) < 1e-6);
        CU_ASSERT(fabs(out[50 + k] - ds * b[k]) < 1e-6);
    }
    CU_ASSERT_EQUAL(out[47], 1.5f); /* gelu'(0) = 1/2, times 3 */
    CU_ASSERT_EQUAL(out[51], 1.5f); /* silu'(0) = 1/2, times 3 */
}

/* Runs src functionally like run_vec, returning the status (and the error in *e). */
static np_status run_vec_status(const char *src, const void *in, uint64_t in_n, void *out,
                                uint64_t out_n, np_err *e)
{
    arch_config cfg = tiny_df(NULL);
    isa_target t;
    isa_target_from_arch(&cfg, &t);
    isa_asm_opts o = {.target = &t};
    isa_program *p;
    CU_ASSERT_EQUAL_FATAL(isa_asm(src, strlen(src), "v.s", &o, &p, e), NP_OK);
    core_hbm_io i = {0x100000, (void *)in, in_n, 0}, w = {0x200000, out, out_n, 0};
    core_sim_opts so = {.functional = true, .inputs = &i, .n_inputs = 1, .outputs = &w,
                        .n_outputs = 1};
    core_report *r = NULL;
    np_status st = core_sim_run_opts(&cfg, p, &so, NULL, &r, e);
    core_report_free(r);
    isa_program_free(p);
    return st;
}

TEST(mixed_precision_vector_ops_compute_hand_checked_values)
{
    /* in: a [1 -2 3; 4 5 -6] fp32 at 0, b col [2 -1] at 0x18, c row [0.5 1 1.5] at 0x20,
     * 1 + 2^-10 at 0x2c, [0 2] at 0x30, [256 1 0] at 0x38 */
    float in[17] = {1, -2, 3, 4, 5, -6, 2, -1, 0.5f, 1, 1.5f, 1.0f + 0x1p-10f, 0, 2, 256, 1, 0};
    float out[20] = {0};
    run_vec(".core 0\n"
            "dma.copy spad[0], hbm[0x100000], fp32, 17\n"
            "sem.signal dma, s0\n"
            "sem.wait vpu, s0\n"
            "vpu.fill spad[0x80], 1.0, 1, 1, fp32\n"  /* scalar 1 */
            "vpu.fill spad[0x84], 0.0, 1, 1, fp32\n"  /* scalar 0 */
            "vpu.fill spad[0x88], 0.5, 1, 1, fp32\n"  /* scalar 0.5 */
            "vpu.fma spad[0x100], spad[0], spad[0x18], spad[0x20], 2, 3, fp32, fp32, bb=col, cb=row, sum=spad[0x180]\n"
            "vpu.fma spad[0x200], spad[0x2c], spad[0x80], spad[0x84], 1, 1, fp32, bf16, bb=scalar, cb=scalar\n"
            "vpu.fexp spad[0x210], spad[0x30], spad[0x88], spad[0x84], 1, 2, fp32, fp32, bb=scalar, cb=scalar, sum=spad[0x220]\n"
            "vpu.rdot spad[0x300], spad[0], spad[0], 2, 3, fp32, fp32\n"
            "vpu.rdot spad[0x308], spad[0], spad[0x20], 2, 3, fp32, fp32, bcast=row\n"
            "vpu.cast spad[0x400], spad[0x38], 1, 3, bf16, fp32\n"
            "vpu.fill spad[0x410], 1.0, 1, 1, bf16\n"
            "vpu.rdot spad[0x420], spad[0x400], spad[0x410], 1, 3, bf16, fp32, bcast=scalar\n"
            "vpu.rdot spad[0x430], spad[0x400], spad[0x410], 1, 3, bf16, bf16, bcast=scalar\n"
            "vpu.cast spad[0x440], spad[0x430], 1, 1, fp32, bf16\n"
            "sem.signal vpu, s1\n"
            "sem.wait dma, s1\n"
            "dma.copy hbm[0x200000], spad[0x100], fp32, 6\n"
            "dma.copy hbm[0x200018], spad[0x180], fp32, 2\n"
            "dma.copy hbm[0x200020], spad[0x200], bf16, 1\n"
            "dma.copy hbm[0x200024], spad[0x210], fp32, 2\n"
            "dma.copy hbm[0x20002c], spad[0x220], fp32, 1\n"
            "dma.copy hbm[0x200030], spad[0x300], fp32, 4\n"
            "dma.copy hbm[0x200040], spad[0x420], fp32, 1\n"
            "dma.copy hbm[0x200044], spad[0x440], fp32, 1\n",
            in, sizeof in, out, sizeof out);
    /* a x b[i] + c[j]: [2.5 -3 7.5; -3.5 -4 7.5], row sums 7 and 0 */
    static const float fma[8] = {2.5f, -3, 7.5f, -3.5f, -4, 7.5f, 7, 0};
    for (int i = 0; i < 8; i++)
        CU_ASSERT_EQUAL(out[i], fma[i]);
    /* 1 + 2^-10 rounded once to bf16 (8 significant bits) is 1 */
    uint16_t h;
    memcpy(&h, &out[8], 2);
    CU_ASSERT_EQUAL(h, 0x3f80);
    /* exp(0.5 x [0 2]) = [1, e], sum 1 + e (both rounded to fp32 once) */
    CU_ASSERT_EQUAL(out[9], 1.0f);
    CU_ASSERT_EQUAL(out[10], (float)exp(1.0));
    CU_ASSERT_EQUAL(out[11], (float)(1.0 + exp(1.0)));
    /* sums of squares 14, 77; a x [0.5 1 1.5]: 0.5 - 2 + 4.5 = 3, 2 + 5 - 9 = -2 */
    CU_ASSERT_EQUAL(out[12], 14);
    CU_ASSERT_EQUAL(out[13], 77);
    CU_ASSERT_EQUAL(out[14], 3);
    CU_ASSERT_EQUAL(out[15], -2);
    /* bf16 [256 1 0] summed: 257 in fp32, but 256 when the result is bf16 (257 is a tie
     * between 256 and 258; nearest even is 256) */
    CU_ASSERT_EQUAL(out[16], 257);
    CU_ASSERT_EQUAL(out[17], 256);
}

TEST(gathers_and_scatters_move_table_rows_named_by_indices_and_accumulate_repeats)
{
    /* in: a 4 x 2 fp32 table at 0 (rows [1 2] [3 4] [5 6] [7 8]), int32 indices [2 0 2] at
     * 0x20, three rows [10 20] [30 40] [50 60] at 0x30 */
    uint8_t in[0x48];
    float tab[8] = {1, 2, 3, 4, 5, 6, 7, 8}, rows[6] = {10, 20, 30, 40, 50, 60};
    int32_t idx[3] = {2, 0, 2};
    memcpy(in, tab, sizeof tab);
    memcpy(in + 0x20, idx, sizeof idx);
    memcpy(in + 0x30, rows, sizeof rows);
    float out[6 + 8 + 8] = {0};
    run_vec(".core 0\n"
            /* HBM -> HBM gather, indices from HBM */
            "dma.gather hbm[0x200000], hbm[0x100000], hbm[0x100020], fp32, 2, 3, 4\n"
            /* scatter-add into a copy of the table: rows 2, 0, 2 get 10 20, 30 40, 50 60 */
            "dma.copy hbm[0x200018], hbm[0x100000], fp32, 8\n"
            "sem.signal dma, s0\nsem.wait dma, s0\n"
            "dma.scatter hbm[0x200018], hbm[0x100030], hbm[0x100020], fp32, 2, 3, 4, red=add\n"
            /* the same in the scratchpad with max, 3 rows of a wider (stride 16) table */
            "dma.copy spad[0], hbm[0x100000], fp32, 2, 4, dst_s1=16\n"
            "dma.copy spad[0x100], hbm[0x100020], int32, 3\n"
            "sem.signal dma, s1\nsem.wait dma, s1\n"
            "dma.scatter spad[0], hbm[0x100030], spad[0x100], fp32, 2, 3, 4, dst_s1=16, red=max\n"
            "sem.signal dma, s2\nsem.wait dma, s2\n"
            "dma.copy hbm[0x200038], spad[0], fp32, 2, 4, src_s1=16\n",
            in, sizeof in, out, sizeof out);
    static const float want[22] = {5, 6, 1, 2, 5, 6,                        /* gathered */
                                   1 + 30, 2 + 40, 3, 4, 5 + 10 + 50, 6 + 20 + 60, 7, 8,
                                   30, 40, 3, 4, 50, 60, 7, 8};             /* max */
    for (int i = 0; i < 22; i++)
        CU_ASSERT_EQUAL(out[i], want[i]);
    /* an index outside the table faults, naming the index and the table's rows */
    np_err e = {0};
    idx[1] = 4;
    memcpy(in + 0x20, idx, sizeof idx);
    CU_ASSERT_EQUAL(run_vec_status(".core 0\n"
                                   "dma.gather hbm[0x200000], hbm[0x100000], hbm[0x100020], fp32, 2, 3, 4\n",
                                   in, sizeof in, out, sizeof out, &e), NP_ERR_SIM_FAULT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "dma.gather: index 4 (number 1) is outside the table's rows 0..3"));
}

TEST(with_skip_an_index_outside_the_table_gathers_zeros_and_scatters_nothing)
{
    /* in: a 4 x 2 fp32 table at 0 (rows [1 2] [3 4] [5 6] [7 8]), int32 indices
     * [2 -1 4 0] at 0x20, four rows [10 20] [30 40] [50 60] [70 80] at 0x30 */
    uint8_t in[0x50];
    float tab[8] = {1, 2, 3, 4, 5, 6, 7, 8}, rows[8] = {10, 20, 30, 40, 50, 60, 70, 80};
    int32_t idx[4] = {2, -1, 4, 0};
    memcpy(in, tab, sizeof tab);
    memcpy(in + 0x20, idx, sizeof idx);
    memcpy(in + 0x30, rows, sizeof rows);
    float out[8 + 8 + 8] = {0};
    run_vec(".core 0\n"
            /* rows 2, (none), (none), 0: the skipped ones zero */
            "dma.copy hbm[0x200000], hbm[0x100030], fp32, 8\n"
            "sem.signal dma, s0\nsem.wait dma, s0\n"
            "dma.gather hbm[0x200000], hbm[0x100000], hbm[0x100020], fp32, 2, 4, 4, skip=1\n"
            /* with red=add over the rows: the skipped rows are left as they are */
            "dma.copy hbm[0x200020], hbm[0x100030], fp32, 8\n"
            "sem.signal dma, s1\nsem.wait dma, s1\n"
            "dma.gather hbm[0x200020], hbm[0x100000], hbm[0x100020], fp32, 2, 4, 4, red=add, "
            "skip=1\n"
            /* scatter-add into a copy of the table: rows 2 and 0 get 10 20 and 70 80 */
            "dma.copy hbm[0x200040], hbm[0x100000], fp32, 8\n"
            "sem.signal dma, s2\nsem.wait dma, s2\n"
            "dma.scatter hbm[0x200040], hbm[0x100030], hbm[0x100020], fp32, 2, 4, 4, red=add, "
            "skip=1\n",
            in, sizeof in, out, sizeof out);
    static const float want[24] = {5, 6, 0, 0, 0, 0, 1, 2,
                                   10 + 5, 20 + 6, 30, 40, 50, 60, 70 + 1, 80 + 2,
                                   1 + 70, 2 + 80, 3, 4, 5 + 10, 6 + 20, 7, 8};
    for (int i = 0; i < 24; i++)
        CU_ASSERT_EQUAL(out[i], want[i]);
}

TEST(npusim_sim_functional_loads_inputs_and_dumps_outputs_by_symbol)
{
    char dir[] = "/tmp/npusim_func_XXXXXX";
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
    char s_path[256], elf[256], in_path[256], out_path[256], in_arg[300], out_arg[300];
    snprintf(s_path, sizeof s_path, "%s/p.s", dir);
    snprintf(elf, sizeof elf, "%s/p.elf", dir);
    snprintf(in_path, sizeof in_path, "%s/x.bin", dir);
    snprintf(out_path, sizeof out_path, "%s/y.bin", dir);
    snprintf(in_arg, sizeof in_arg, "x=%s", in_path);
    snprintf(out_arg, sizeof out_arg, "y=%s", out_path);
    FILE *f = fopen(s_path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs(".bss 0x100000\nx: .space 16\ny: .space 16\n.core 0\n"
          "dma.copy spad[0], hbm[x], fp32, 4\nsem.signal dma, s0\nsem.wait vpu, s0\n"
          "vpu.muls spad[0x100], spad[0], 2.5, 1, 4, fp32\nsem.signal vpu, s1\n"
          "sem.wait dma, s1\ndma.copy hbm[y], spad[0x100], fp32, 4\n", f);
    fclose(f);
    float x[4] = {1, 2, -3, 4}, y[4] = {0};
    f = fopen(in_path, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fwrite(x, sizeof x, 1, f);
    fclose(f);
    harness_run r = harness_npusim("asm", s_path, "-o", elf, NULL);
    CU_ASSERT_EQUAL_FATAL(r.exit_status, 0);
    harness_run_free(&r);
    r = harness_npusim("sim", "--functional", "--input", in_arg, "--dump", out_arg, elf, NULL);
    CU_ASSERT_EQUAL(r.exit_status, 0);
    harness_run_free(&r);
    f = fopen(out_path, "rb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT_EQUAL(fread(y, sizeof y, 1, f), 1u);
    fclose(f);
    CU_ASSERT(y[0] == 2.5f && y[1] == 5.0f && y[2] == -7.5f && y[3] == 10.0f);
    r = harness_npusim("sim", "--input", in_arg, elf, NULL); /* needs --functional */
    CU_ASSERT_EQUAL(r.exit_status, 2);
    harness_run_free(&r);
    r = harness_npusim("sim", "--functional", "--dump", "zz=/dev/null", elf, NULL);
    CU_ASSERT_EQUAL(r.exit_status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "zz"));
    harness_run_free(&r);
    remove(s_path), remove(elf), remove(in_path), remove(out_path);
    rmdir(dir);
}

/* Runs the conv kernel for *cv (dtype int8 or bf16) on cfg functionally with seeded values
 * and checks every output against a direct convolution written here: int8 exact, bf16 equal
 * to an fp32 sum in (r, s, c) order rounded once to nearest even. */
static void check_conv(const arch_config *cfg, const kgen_conv *cv, rng *g)
{
    uint64_t sw = cv->stride_w ? cv->stride_w : cv->stride;
    uint64_t E = (cv->h - cv->r) / cv->stride + 1, F = (cv->w - cv->s) / sw + 1;
    uint64_t nx = cv->h * cv->w * cv->c, nw = cv->r * cv->s * cv->c * cv->filters;
    uint64_t e = isa_dtype_size[cv->dtype];
    double *x = malloc(nx * sizeof *x), *w = malloc(nw * sizeof *w);
    uint8_t *X = malloc(nx * e), *W = malloc(nw * e);
    for (uint64_t i = 0; i < nx + nw; i++) {
        double v = cv->dtype == ISA_DTYPE_INT8 ? (double)rng_below(g, 41) - 20
                                               : ((double)rng_below(g, 64) - 32) / 8;
        uint8_t *p = i < nx ? X + i * e : W + (i - nx) * e;
        if (cv->dtype == ISA_DTYPE_INT8) {
            p[0] = (uint8_t)(int8_t)v;
        } else {
            uint16_t h = ref_bf16((float)v);
            p[0] = (uint8_t)h, p[1] = (uint8_t)(h >> 8);
        }
        *(i < nx ? &x[i] : &w[i - nx]) = v;
    }
    char *text;
    isa_program *p;
    np_err err = {0};
    CU_ASSERT_EQUAL_FATAL(kgen_conv_build(cfg, cv, &text, &p, &err), NP_OK);
    free(text);
    uint64_t ce = cv->dtype == ISA_DTYPE_INT8 ? 4 : 2, ny = E * F * cv->filters;
    uint8_t *Y = malloc(ny * ce);
    core_hbm_io in[2] = {{isa_program_symbol(p, "X")->addr, X, nx * e, 0},
                         {isa_program_symbol(p, "B")->addr, W, nw * e, 0}};
    core_hbm_io out = {isa_program_symbol(p, "C")->addr, Y, ny * ce, 0};
    core_sim_opts o = {.functional = true, .inputs = in, .n_inputs = 2, .outputs = &out,
                       .n_outputs = 1};
    core_report *r;
    CU_ASSERT_EQUAL_FATAL(core_sim_run_opts(cfg, p, &o, NULL, &r, &err), NP_OK);
    core_report_free(r);
    isa_program_free(p);
    for (uint64_t oh = 0; oh < E; oh++)
        for (uint64_t ow = 0; ow < F; ow++)
            for (uint64_t f = 0; f < cv->filters; f++) {
                int32_t si = 0;
                float sf = 0;
                for (uint64_t rr = 0; rr < cv->r; rr++)
                    for (uint64_t ss = 0; ss < cv->s; ss++)
                        for (uint64_t c = 0; c < cv->c; c++) {
                            double xv = x[((oh * cv->stride + rr) * cv->w + ow * sw + ss) * cv->c + c];
                            double wv = w[((rr * cv->s + ss) * cv->c + c) * cv->filters + f];
                            si += (int32_t)xv * (int32_t)wv;
                            sf += (float)xv * (float)wv;
                        }
                uint64_t at = (oh * F + ow) * cv->filters + f;
                if (cv->dtype == ISA_DTYPE_INT8) {
                    int32_t got;
                    memcpy(&got, Y + at * 4, 4);
                    CU_ASSERT_EQUAL_FATAL(got, si);
                } else {
                    uint16_t got = (uint16_t)(Y[at * 2] | (Y[at * 2 + 1] << 8));
                    CU_ASSERT_EQUAL_FATAL(got, ref_bf16(sf));
                }
            }
    free(x), free(w), free(X), free(W), free(Y);
}

TEST(generated_conv_values_equal_a_direct_convolution)
{
    static const char *dfs[] = {"core.dataflow=os", "core.dataflow=ws", "core.dataflow=is"};
    static const isa_dtype dts[] = {ISA_DTYPE_INT8, ISA_DTYPE_BF16};
    rng g;
    rng_seed(&g, 4242);
    unsigned runs = 0;
    for (int s = 0; s < 10; s++) {
        kgen_conv cv = {0};
        cv.cores = 1 + (uint64_t)(s % 2); /* odd shapes on 2 cores: the tiles split */
        cv.r = 1 + rng_below(&g, 3), cv.s = 1 + rng_below(&g, 3);
        cv.h = cv.r + rng_below(&g, 7), cv.w = cv.s + rng_below(&g, 7);
        cv.c = 1 + rng_below(&g, 5), cv.filters = 1 + rng_below(&g, 9);
        cv.stride = 1 + rng_below(&g, 2);
        for (int d = 0; d < 3; d++)
            for (int t = 0; t < 2; t++) {
                arch_config cfg = tiny_df(dfs[d]);
                cv.dtype = dts[t];
                check_conv(&cfg, &cv, &g);
                runs++;
            }
    }
    CU_ASSERT_EQUAL(runs, 60u);
}

TEST(conv_gathers_that_split_filter_rows_and_cross_output_rows_give_the_direct_convolution)
{
    /* Tiles forced so that the gathers take every shape: K slices shorter than a filter row's
     * S x C run (and slices straddling two filter rows), M tiles shorter than an output row,
     * and M tiles that start and end inside output rows with whole rows between; stride_w
     * differs from stride in some. Plus a few with the generator's own tiles on inputs wide
     * enough (S x C > 4 x the array side) that its K slices split filter rows. */
    static const char *dfs[] = {"core.dataflow=os", "core.dataflow=ws", "core.dataflow=is"};
    static const isa_dtype dts[] = {ISA_DTYPE_INT8, ISA_DTYPE_BF16};
    static const struct { uint64_t h, w, c, r, s, f, st, sw, tm, tn, tk, cores; } sh[] = {
        {9, 9, 3, 3, 3, 5, 2, 0, 6, 3, 8, 1},    /* S x C = 9 > TK = 8; TM = 6 > F = 4 */
        {7, 11, 5, 2, 3, 4, 1, 2, 3, 4, 7, 2},   /* F = 5 > TM = 3: tiles inside one row */
        {10, 8, 2, 3, 2, 3, 3, 1, 11, 2, 3, 1},  /* F = 7, TM = 11: partial/whole/partial */
        {6, 6, 7, 3, 3, 2, 1, 1, 9, 2, 5, 2},    /* S x C = 21: slices of 5 cross rows */
        {5, 13, 1, 1, 4, 6, 1, 3, 2, 6, 1, 1},   /* TK = 1: one element per gather */
        {9, 9, 3, 3, 3, 5, 2, 0, 6, 5, 27, 1},   /* whole K: one copy per output row spans
                                                    all filter rows */
        {12, 9, 1, 7, 3, 3, 1, 2, 5, 3, 10, 2},  /* S x C = 3, TK = 10: a slice is a partial
                                                    row, whole rows and a partial row */
        {6, 6, 40, 2, 2, 3, 1, 0, 0, 0, 0, 1},   /* own tiles: S x C = 80 > 16 (ws, is) */
        {5, 7, 24, 3, 2, 4, 2, 1, 0, 0, 0, 2},   /* own tiles: S x C = 48 */
    };
    rng g;
    rng_seed(&g, 5150);
    unsigned runs = 0;
    for (size_t i = 0; i < sizeof sh / sizeof sh[0]; i++)
        for (int d = 0; d < 3; d++)
            for (int t = 0; t < 2; t++) {
                arch_config cfg = tiny_df(dfs[d]);
                kgen_conv cv = {.h = sh[i].h, .w = sh[i].w, .c = sh[i].c, .r = sh[i].r,
                                .s = sh[i].s, .filters = sh[i].f, .stride = sh[i].st,
                                .stride_w = sh[i].sw, .tm = sh[i].tm, .tn = sh[i].tn,
                                .tk = sh[i].tk, .cores = sh[i].cores, .dtype = dts[t]};
                check_conv(&cfg, &cv, &g);
                runs++;
            }
    CU_ASSERT_EQUAL(runs, 54u);
}

TEST(functional_mode_does_not_change_the_timing)
{
    /* The same generated matmul in both modes: every unit's cycles and bytes agree. */
    static const char *dfs[] = {"core.dataflow=os", "core.dataflow=ws", "core.dataflow=is"};
    for (int d = 0; d < 3; d++) {
        arch_config cfg = tiny_df(dfs[d]);
        kgen_matmul mm = {37, 21, 45, ISA_DTYPE_BF16, 0, 0, 0, 1};
        np_err e = {0};
        char *text;
        isa_program *p;
        CU_ASSERT_EQUAL_FATAL(kgen_matmul_build(&cfg, &mm, &text, &p, &e), NP_OK);
        free(text);
        core_report *timing, *func;
        core_sim_opts o = {.functional = true};
        CU_ASSERT_EQUAL_FATAL(core_sim_run(&cfg, p, NULL, &timing, &e), NP_OK);
        CU_ASSERT_EQUAL_FATAL(core_sim_run_opts(&cfg, p, &o, NULL, &func, &e), NP_OK);
        CU_ASSERT_EQUAL(timing->total_ps, func->total_ps);
        CU_ASSERT_EQUAL_FATAL(timing->n_units, func->n_units);
        for (uint32_t i = 0; i < timing->n_units; i++) {
            CU_ASSERT_EQUAL(timing->units[i].busy_cycles, func->units[i].busy_cycles);
            CU_ASSERT_EQUAL(timing->units[i].stall_cycles, func->units[i].stall_cycles);
            CU_ASSERT_EQUAL(timing->units[i].bytes, func->units[i].bytes);
        }
        core_report_free(timing);
        core_report_free(func);
        isa_program_free(p);
    }
}

TEST(splitting_a_matmul_across_two_cores_does_not_change_its_values)
{
    /* tiny has 2 cores sharing the HBM; output tiles alternate between them. */
    rng g;
    rng_seed(&g, 77);
    for (int s = 0; s < 8; s++) {
        uint64_t M = 1 + rng_below(&g, 70), N = 1 + rng_below(&g, 40), K = 1 + rng_below(&g, 40);
        arch_config cfg = tiny_df(s % 2 ? "core.dataflow=os" : "core.dataflow=ws");
        uint8_t *A = malloc(M * K * 2), *B = malloc(K * N * 2);
        for (uint64_t i = 0; i < M * K; i++) {
            uint16_t h = ref_bf16(((float)rng_below(&g, 64) - 32) / 8);
            A[2 * i] = (uint8_t)h, A[2 * i + 1] = (uint8_t)(h >> 8);
        }
        for (uint64_t i = 0; i < K * N; i++) {
            uint16_t h = ref_bf16(((float)rng_below(&g, 64) - 32) / 8);
            B[2 * i] = (uint8_t)h, B[2 * i + 1] = (uint8_t)(h >> 8);
        }
        uint8_t *one = run_matmul_on(&cfg, M, N, K, ISA_DTYPE_BF16, A, B, 1);
        uint8_t *two = run_matmul_on(&cfg, M, N, K, ISA_DTYPE_BF16, A, B, 2);
        CU_ASSERT(memcmp(one, two, M * N * 2) == 0);
        free(A), free(B), free(one), free(two);
    }
}
