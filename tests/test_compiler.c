/* test_compiler.c — the kernel ABI (compiler/kernel.h) and the GEMM kernels on it: values
 * against the framework's reference executor (sim/krun.h runs each kernel functionally on
 * the core model), program size against the count of distinct tile shapes, kernels one after
 * another in one program (barriers, fences, resources), and the errors of the ABI. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "arch.h"
#include "core.h"
#include "core_cost.h"
#include "kc_gemm.h"
#include "kc_tiles.h"
#include "harness.h"
#include "isa_asm.h"
#include "kernel.h"
#include "krun.h"
#include "nn.h"
#include "rng.h"

static arch_config tiny(const char *set)
{
    arch_config cfg;
    np_err e = {0};
    const char *sets[1] = {set};
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tiny", sets, set ? 1 : 0, &cfg, &e), NP_OK);
    return cfg;
}

/* Values: integers in [-4, 4] / 4 (exact in every float type; products and sums of a few
 * hundred of them exact in fp32), or integers in [-20, 20] for int8. */
static void fill(nn_tensor *t, rng *g)
{
    CU_ASSERT_FATAL(nn_tensor_alloc(t));
    for (int64_t i = 0; i < nn_numel(t); i++)
        t->data[i] = t->dtype == NN_I8 ? (float)((int)rng_below(g, 41) - 20)
                                       : (float)((int)rng_below(g, 9) - 4) / 4.0f;
}

/* A tensor like t (shape) of dtype dt, for a kernel's output. */
static nn_tensor *like(nn_graph *g, const nn_tensor *t, nn_dtype dt)
{
    nn_tensor *o = nn_input(g, "got", dt, t->ndim, t->ne);
    CU_ASSERT_PTR_NOT_NULL_FATAL(o);
    return o;
}

/* Strides of a column-major matrix in the last two dims (rows contiguous down a column). */
static void col_major(kc_tensor *t)
{
    int n = t->ndim;
    int64_t e = (int64_t)nn_dtype_size(t->dtype), M = t->shape[n - 2], K = t->shape[n - 1];
    t->stride[n - 2] = e;
    t->stride[n - 1] = M * e;
    int64_t s = M * K * e;
    for (int d = n - 3; d >= 0; d--) {
        t->stride[d] = s;
        s *= t->shape[d];
    }
}

TEST(the_kernel_h_example_appends_a_matmul_kernel_and_halts)
{
    arch_config cfg = tiny(NULL);
    np_err err = {0};
    kc_prog *p;
    CU_ASSERT_EQUAL_FATAL(kc_prog_new(&cfg, &(kc_prog_opts){.cores = 1}, &p, &err), NP_OK);
    uint64_t a, b, c;
    CU_ASSERT_EQUAL(kc_prog_bss(p, "A", 64 * 32 * 2, &a, &err), NP_OK);
    CU_ASSERT_EQUAL(kc_prog_bss(p, "B", 32 * 16 * 2, &b, &err), NP_OK);
    CU_ASSERT_EQUAL(kc_prog_bss(p, "C", 64 * 16 * 2, &c, &err), NP_OK);
    kc_kernel k = {.op = NN_OP_MATMUL, .n_in = 2, .n_out = 1};
    kc_tensor_dense(&k.in[0], a, NN_BF16, 2, (int64_t[]){64, 32});
    kc_tensor_dense(&k.in[1], b, NN_BF16, 2, (int64_t[]){32, 16});
    kc_tensor_dense(&k.out[0], c, NN_BF16, 2, (int64_t[]){64, 16});
    kc_result r;
    CU_ASSERT_EQUAL_FATAL(kc_compile(p, &k, &r, &err), NP_OK);
    CU_ASSERT_EQUAL_FATAL(kc_prog_finish(p, &err), NP_OK);
    isa_program *prog = kc_prog_take(p);
    kc_prog_free(p);
    CU_ASSERT_STRING_EQUAL(r.name, "matmul");
    CU_ASSERT_EQUAL(r.flops, 2u * 64 * 32 * 16);
    CU_ASSERT_EQUAL(r.hbm_bytes_min, (64u * 32 + 32 * 16 + 64 * 16) * 2);
    /* one tile column (TN = 16), so A is read once and B once per tile row */
    CU_ASSERT_EQUAL(r.hbm_write_bytes, 64u * 16 * 2);
    CU_ASSERT_EQUAL_FATAL(prog->n_cores, 1u);
    const isa_core_text *ct = &prog->cores[0];
    CU_ASSERT_EQUAL_FATAL(ct->n_kernels, 1u);
    CU_ASSERT_STRING_EQUAL(ct->kernels[0].name, "matmul");
    CU_ASSERT_EQUAL(ct->insns[ct->n_insns - 1].op, ISA_OP_HALT);
    CU_ASSERT_EQUAL(ct->kernels[0].start + ct->kernels[0].count, ct->n_insns - 1);
    CU_ASSERT_EQUAL(r.insns, (uint64_t)ct->n_insns - 1);
    /* it runs, and reads what the kernel said it would */
    core_report *rep;
    CU_ASSERT_EQUAL_FATAL(core_sim_run(&cfg, prog, NULL, &rep, &err), NP_OK);
    CU_ASSERT_EQUAL(rep->hbm_read_bytes, r.hbm_read_bytes);
    CU_ASSERT_EQUAL(rep->hbm_write_bytes, r.hbm_write_bytes);
    core_report_free(rep);
    isa_program_free(prog);
}

/* Runs y = a x b (framework) and the matmul kernel on the given layouts; exact equality
 * (the kernel accumulates in fp32 in k order like the reference, and rounds once). */
static void check_matmul_reuse(const arch_config *cfg, int nda, const int64_t *sa, int ndb,
                               const int64_t *sb, nn_dtype dt, bool a_cols, bool b_cols,
                               bool c_cols, int ct, bool reuse, const int64_t *tiles,
                               uint32_t cores, rng *g)
{
    np_err err = {0};
    nn_graph *gr = nn_graph_new(1);
    nn_tensor *a = nn_input(gr, "a", dt, nda, sa), *b = nn_input(gr, "b", dt, ndb, sb);
    nn_tensor *y = NULL, *ab[2] = {a, b};
    kc_kernel ref = {.op = NN_OP_MATMUL, .n_in = 2, .n_out = 1}; /* the table's reference */
    CU_ASSERT_EQUAL_FATAL(kc_kernel_find(NN_OP_MATMUL)->reference(gr, &ref, ab, &y, &err), NP_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(y);
    fill(a, g);
    fill(b, g);
    CU_ASSERT_EQUAL_FATAL(nn_graph_compute(gr, &err), NP_OK);
    nn_dtype od = dt == NN_I8 ? NN_I32 : dt;
    nn_tensor *got = like(gr, y, od);
    kc_kernel k = {.op = NN_OP_MATMUL, .n_in = 2, .n_out = 1, .place = {0, 0, cores}};
    if (ct)
        k.attrs[k.n_attrs++] = KC_INT("ct", ct);
    if (reuse)
        k.attrs[k.n_attrs++] = KC_INT("reuse", 1);
    for (int i = 0; tiles && i < 3; i++)
        k.attrs[k.n_attrs++] = KC_INT(i == 0 ? "tm" : i == 1 ? "tn" : "tk", tiles[i]);
    kc_tensor_of(&k.in[0], 0, a);
    kc_tensor_of(&k.in[1], 0, b);
    kc_tensor_of(&k.out[0], 0, got);
    if (a_cols)
        col_major(&k.in[0]);
    if (b_cols)
        col_major(&k.in[1]);
    if (c_cols)
        col_major(&k.out[0]);
    krun_io io = {.in = {a, b}, .out = {got}};
    krun_result r;
    CU_ASSERT_EQUAL_FATAL(krun_kernel(cfg, &k, &io, &(krun_opts){.functional = true}, &r, &err),
                          NP_OK);
    krun_diff d = krun_compare(got, y, 0, 0);
    if (d.bad)
        fprintf(stderr, "matmul %s a%s b%s c%s ct=%d: %lld of %lld differ (worst %g at %lld)\n",
                nn_dtype_name(dt), a_cols ? "^T" : "", b_cols ? "^T" : "", c_cols ? "^T" : "",
                ct, (long long)d.bad, (long long)d.n, d.max_abs, (long long)d.worst);
    CU_ASSERT_EQUAL(d.bad, 0);
    if (ct == 2)
        CU_ASSERT_PTR_NOT_NULL(strstr(r.kernel.schedule, "C^T"));
    if (reuse)
        CU_ASSERT_PTR_NOT_NULL(strstr(r.kernel.schedule, "A's rows kept"));
    /* the kernel's expected traffic is what ran */
    CU_ASSERT_EQUAL(r.report->hbm_read_bytes, r.kernel.hbm_read_bytes);
    CU_ASSERT_EQUAL(r.report->hbm_write_bytes, r.kernel.hbm_write_bytes);
    krun_result_free(&r);
    nn_graph_free(gr);
}

static void check_matmul_ct(const arch_config *cfg, int nda, const int64_t *sa, int ndb,
                            const int64_t *sb, nn_dtype dt, bool a_cols, bool b_cols,
                            bool c_cols, int ct, uint32_t cores, rng *g)
{
    check_matmul_reuse(cfg, nda, sa, ndb, sb, dt, a_cols, b_cols, c_cols, ct, false, NULL, cores,
                       g);
}

static void check_matmul(const arch_config *cfg, int nda, const int64_t *sa, int ndb,
                         const int64_t *sb, nn_dtype dt, bool a_cols, bool b_cols,
                         uint32_t cores, rng *g)
{
    check_matmul_ct(cfg, nda, sa, ndb, sb, dt, a_cols, b_cols, false, 0, cores, g);
}

TEST(matmul_values_equal_the_reference_for_transposed_operands_batches_and_dtypes)
{
    rng g;
    rng_seed(&g, 20261201);
    static const char *dfs[] = {"core.dataflow=ws", "core.dataflow=os", "core.dataflow=is"};
    for (int s = 0; s < 6; s++) {
        int64_t M = 1 + (int64_t)rng_below(&g, 37), N = 1 + (int64_t)rng_below(&g, 37),
                K = 1 + (int64_t)rng_below(&g, 45);
        arch_config cfg = tiny(dfs[s % 3]);
        for (int layout = 0; layout < 4; layout++)
            check_matmul(&cfg, 2, (int64_t[]){M, K}, 2, (int64_t[]){K, N},
                         s % 2 ? NN_BF16 : NN_I8, layout & 1, layout & 2, 1 + (uint32_t)(s % 2),
                         &g);
    }
    /* many slices, tiles and rows: the loops run (pairs of K slices with mode=first, pairs
     * of tiles where a tile has an odd number of slices), edges after them */
    arch_config ws = tiny(NULL);
    check_matmul(&ws, 2, (int64_t[]){150, 130}, 2, (int64_t[]){130, 70}, NN_BF16, false, false,
                 1, &g);
    check_matmul(&ws, 2, (int64_t[]){150, 160}, 2, (int64_t[]){160, 70}, NN_BF16, true, true,
                 2, &g);
    /* batches: both batched, and A batched over two dims against one shared B */
    check_matmul(&ws, 3, (int64_t[]){3, 13, 21}, 3, (int64_t[]){3, 21, 9}, NN_BF16, false, true,
                 1, &g);
    check_matmul(&ws, 4, (int64_t[]){2, 3, 7, 30}, 2, (int64_t[]){30, 17}, NN_BF16, true, false,
                 2, &g);
    check_matmul(&ws, 3, (int64_t[]){5, 6, 20}, 2, (int64_t[]){20, 6}, NN_F32, false, false, 1,
                 &g);
}

TEST(the_transposed_schedule_c_t_equals_b_t_a_t_gives_the_reference_for_every_layout)
{
    /* ct=2: the array holds A's slices and streams B^T's (a row-major B transposed by the
     * VPU), the accumulators hold C^T (transposed back unless C is column-major); every
     * layout of A, B and C, odd shapes, each dataflow, one core and two (a split K too) */
    rng g;
    rng_seed(&g, 20261206);
    static const char *dfs[] = {"core.dataflow=ws", "core.dataflow=os", "core.dataflow=is"};
    for (int s = 0; s < 3; s++) {
        int64_t M = 1 + (int64_t)rng_below(&g, 37), N = 1 + (int64_t)rng_below(&g, 37),
                K = 1 + (int64_t)rng_below(&g, 45);
        arch_config cfg = tiny(dfs[s]);
        for (int layout = 0; layout < 8; layout++)
            check_matmul_ct(&cfg, 2, (int64_t[]){M, K}, 2, (int64_t[]){K, N},
                            layout % 3 ? NN_BF16 : NN_I8, layout & 1, layout & 2, layout & 4, 2,
                            1 + (uint32_t)(layout % 2), &g);
    }
    arch_config ws = tiny(NULL);
    /* loops over rows, tiles and slices; batches; a column-major C without ct */
    check_matmul_ct(&ws, 2, (int64_t[]){70, 130}, 2, (int64_t[]){130, 150}, NN_BF16, false,
                    false, false, 2, 1, &g);
    check_matmul_ct(&ws, 3, (int64_t[]){3, 13, 21}, 3, (int64_t[]){3, 21, 9}, NN_BF16, true,
                    false, true, 2, 2, &g);
    check_matmul_ct(&ws, 2, (int64_t[]){33, 20}, 2, (int64_t[]){20, 17}, NN_BF16, false, true,
                    true, 1, 1, &g);
}

TEST(a_tile_rows_a_rows_kept_in_the_scratchpad_give_the_reference)
{
    /* reuse: the A rows of a tile row loaded once and multiplied by every tile of the row
     * from there (in C = A B and in C^T = B^T A^T); small tiles force rows of several tiles
     * and slices, and loops over them */
    rng g;
    rng_seed(&g, 20261209);
    arch_config ws = tiny(NULL), os = tiny("core.dataflow=os");
    check_matmul_reuse(&ws, 2, (int64_t[]){37, 45}, 2, (int64_t[]){45, 29}, NN_BF16, false, false,
                       false, 1, true, (int64_t[]){8, 8, 12}, 1, &g);
    check_matmul_reuse(&ws, 2, (int64_t[]){37, 45}, 2, (int64_t[]){45, 29}, NN_I8, false, true,
                       true, 2, true, (int64_t[]){12, 8, 8}, 2, &g);
    check_matmul_reuse(&os, 3, (int64_t[]){3, 21, 33}, 3, (int64_t[]){3, 33, 17}, NN_BF16, false,
                       false, false, 0, true, (int64_t[]){8, 4, 8}, 2, &g);
    check_matmul_reuse(&ws, 2, (int64_t[]){70, 130}, 2, (int64_t[]){130, 50}, NN_BF16, false,
                       false, false, 0, true, NULL, 1, &g);
    /* a column-major A cannot be kept as rows */
    np_err err = {0};
    kc_kernel k = {.op = NN_OP_MATMUL, .n_in = 2, .n_out = 1, .n_attrs = 1,
                   .attrs = {KC_INT("reuse", 1)}};
    kc_tensor_dense(&k.in[0], 0, NN_BF16, 2, (int64_t[]){8, 8});
    kc_tensor_dense(&k.in[1], 0, NN_BF16, 2, (int64_t[]){8, 8});
    kc_tensor_dense(&k.out[0], 0, NN_BF16, 2, (int64_t[]){8, 8});
    col_major(&k.in[0]);
    krun_result r;
    CU_ASSERT_EQUAL(krun_kernel(&ws, &k, NULL, &(krun_opts){0}, &r, &err), NP_ERR_INCONSISTENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "row-major A"));
}

TEST(the_cost_model_streams_the_longer_of_m_and_n_through_a_weight_stationary_array)
{
    /* tpu-pod's 128 x 128 weight-stationary array: each fold streams the mxu.mm's rows, so
     * with M = 128 every fold of C = A B streams 128 rows for its 2R + C - 2 = 382 cycles of
     * fill and drain; C^T = B^T A^T streams N's rows instead. The model picks C^T for the
     * LM head's shape, and the simulator agrees that it is faster. */
    arch_config cfg;
    np_err err = {0};
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tpu-pod", NULL, 0, &cfg, &err), NP_OK);
    uint64_t cyc[3] = {0};
    for (int ct = 0; ct < 3; ct++) {
        kc_kernel k = {.op = NN_OP_MATMUL, .n_in = 2, .n_out = 1, .n_attrs = ct ? 1 : 0,
                       .attrs = {KC_INT("ct", ct)}};
        kc_tensor_dense(&k.in[0], 0, NN_BF16, 2, (int64_t[]){128, 768});
        kc_tensor_dense(&k.in[1], 0, NN_BF16, 2, (int64_t[]){768, 8192});
        kc_tensor_dense(&k.out[0], 0, NN_BF16, 2, (int64_t[]){128, 8192});
        krun_result r;
        CU_ASSERT_EQUAL_FATAL(krun_kernel(&cfg, &k, NULL, &(krun_opts){0}, &r, &err), NP_OK);
        cyc[ct] = r.report->total_cycles;
        if (ct == 0)
            CU_ASSERT_PTR_NOT_NULL(strstr(r.kernel.schedule, "C^T"));
        krun_result_free(&r);
    }
    CU_ASSERT_EQUAL(cyc[0], cyc[2]);
    CU_ASSERT(cyc[2] * 2 < cyc[1]);
    /* and keeps C = A B for a tall A */
    kc_kernel k = {.op = NN_OP_MATMUL, .n_in = 2, .n_out = 1};
    kc_tensor_dense(&k.in[0], 0, NN_BF16, 2, (int64_t[]){8192, 768});
    kc_tensor_dense(&k.in[1], 0, NN_BF16, 2, (int64_t[]){768, 128});
    kc_tensor_dense(&k.out[0], 0, NN_BF16, 2, (int64_t[]){8192, 128});
    krun_result r;
    CU_ASSERT_EQUAL_FATAL(krun_kernel(&cfg, &k, NULL, &(krun_opts){0}, &r, &err), NP_OK);
    CU_ASSERT_PTR_NULL(strstr(r.kernel.schedule, "C^T"));
    krun_result_free(&r);
}

/* Instructions of core c of the program. */
static uint32_t core_insns(const isa_program *p, uint32_t c)
{
    const isa_core_text *ct = isa_program_core(p, c);
    return ct ? ct->n_insns : 0;
}

static uint32_t count_op(const isa_program *p, uint32_t c, isa_op op)
{
    const isa_core_text *ct = isa_program_core(p, c);
    uint32_t n = 0;
    for (uint32_t i = 0; ct && i < ct->n_insns; i++)
        n += ct->insns[i].op == op;
    return n;
}

/* Compiles a bf16 matmul M x N x K alone (timing only) with tiles 64 x 16 x 16 and returns
 * its program. */
static isa_program *matmul_prog(const arch_config *cfg, int64_t M, int64_t N, int64_t K,
                                kc_result *res)
{
    np_err err = {0};
    kc_kernel k = {.op = NN_OP_MATMUL, .n_in = 2, .n_out = 1, .n_attrs = 3,
                   .attrs = {KC_INT("tm", 64), KC_INT("tn", 16), KC_INT("tk", 16)}};
    kc_tensor_dense(&k.in[0], 0, NN_BF16, 2, (int64_t[]){M, K});
    kc_tensor_dense(&k.in[1], 0, NN_BF16, 2, (int64_t[]){K, N});
    kc_tensor_dense(&k.out[0], 0, NN_BF16, 2, (int64_t[]){M, N});
    krun_result r;
    CU_ASSERT_EQUAL_FATAL(krun_kernel(cfg, &k, NULL, NULL, &r, &err), NP_OK);
    *res = r.kernel;
    isa_program *p = r.prog;
    r.prog = NULL;
    krun_result_free(&r);
    return p;
}

TEST(program_size_grows_with_distinct_tile_shapes_not_with_tiles_times_slices)
{
    /* tiny ws, tiles TK = TN = 16 (4 x the 4 x 4 array), TM = 4096 / (4 x 16) = 64 (what
     * kc_gemm_tiles' heuristic takes; given here so the cost model does not choose). 256 x 256 x K
     * has 4 x 16 tiles of K / 16 slices each; unrolled, a slice is 9 instructions, so 256^3
     * would be over 9,000 of them. */
    arch_config cfg = tiny(NULL);
    kc_result r1, r2, r3;
    isa_program *p1 = matmul_prog(&cfg, 256, 256, 256, &r1);
    isa_program *p2 = matmul_prog(&cfg, 256, 256, 4096, &r2);
    CU_ASSERT_EQUAL(core_insns(p1, 0), core_insns(p2, 0)); /* K only changes loop counts */
    CU_ASSERT(core_insns(p1, 0) < 128);
    /* rows, the row's tiles, and the slices of a tile (inside the tile loop and after it) */
    CU_ASSERT_EQUAL(count_op(p1, 0, ISA_OP_LOOP), 4u);
    /* edges in every dimension (250 = 3 x 64 + 58 = 15 x 16 + 10): per row shape, the first
     * tile's head (its first two slices), the tile loop's body (the rest of a tile: pairs of
     * full slices in a loop, the odd one, the edge slice; the next tile's head), the last full
     * tile's rest, and the edge tile (head, rest): 2 + (4 + 2) + 4 + (2 + 4) = 18 mxu.mm, for
     * 2 row shapes, whatever the counts */
    isa_program *p3 = matmul_prog(&cfg, 250, 250, 250, &r3);
    CU_ASSERT_EQUAL(count_op(p3, 0, ISA_OP_MXU_MM), 2u * 18);
    CU_ASSERT(core_insns(p3, 0) < 2 * 18 * 12);
    /* the traffic it expects is the tiled schedule's: A once per tile column, B once per tile
     * row, C once */
    CU_ASSERT_EQUAL(r1.hbm_read_bytes, (16u * 256 * 256 + 4u * 256 * 256) * 2);
    CU_ASSERT_EQUAL(r1.hbm_write_bytes, 256u * 256 * 2);
    isa_program_free(p1);
    isa_program_free(p2);
    isa_program_free(p3);
}

/* y = act(a x b + bias) + res, scaled, through the kernel's epilogue and through the
 * framework op by op. */
TEST(fused_epilogue_values_are_the_framework_ops_applied_in_order)
{
    rng g;
    rng_seed(&g, 7);
    static const nn_dtype bias_dt[] = {NN_BF16, NN_F32};
    for (int v = 0; v < 4; v++) { /* v & 2: C^T = B^T A^T, the epilogue on the VPU after it */
        int64_t M = 19, N = 23, K = 29;
        np_err err = {0};
        nn_graph *gr = nn_graph_new(1);
        nn_tensor *a = nn_input(gr, "a", NN_BF16, 2, (int64_t[]){M, K});
        nn_tensor *b = nn_input(gr, "b", NN_BF16, 2, (int64_t[]){K, N});
        nn_tensor *bias = nn_input(gr, "bias", bias_dt[v & 1], 1, (int64_t[]){N});
        nn_tensor *res = nn_input(gr, "res", NN_BF16, 2, (int64_t[]){M, N});
        nn_tensor *col = nn_input(gr, "col", NN_BF16, 2, (int64_t[]){M, 1});
        fill(a, &g), fill(b, &g), fill(bias, &g), fill(res, &g), fill(col, &g);
        nn_tensor *mm = nn_matmul(gr, a, b);
        nn_tensor *bb = v & 1 ? nn_cast(gr, bias, NN_BF16) : bias; /* exact: quarter-integers */
        nn_tensor *t = nn_gelu(gr, nn_add(gr, mm, bb));
        nn_tensor *y = nn_mul(gr, nn_scale(gr, nn_add(gr, t, res), 0.5), col);
        CU_ASSERT_PTR_NOT_NULL_FATAL(y);
        CU_ASSERT_EQUAL_FATAL(nn_graph_compute(gr, &err), NP_OK);
        nn_tensor *got = like(gr, y, NN_BF16);
        arch_config cfg = tiny(NULL);
        kc_kernel k = {.op = NN_OP_MATMUL, .n_in = 2, .n_out = 1, .n_epi = 5,
                       .n_attrs = 1, .attrs = {KC_INT("ct", v & 2 ? 2 : 1)},
                       .place = {0, 0, 2}};
        kc_tensor_of(&k.in[0], 0, a);
        kc_tensor_of(&k.in[1], 0, b);
        kc_tensor_of(&k.out[0], 0, got);
        k.epi[0] = (kc_epi){.op = NN_OP_ADD, .has_arg = true};
        kc_tensor_of(&k.epi[0].arg, 0, bias);
        k.epi[1] = (kc_epi){.op = NN_OP_GELU};
        k.epi[2] = (kc_epi){.op = NN_OP_ADD, .has_arg = true};
        kc_tensor_of(&k.epi[2].arg, 0, res);
        k.epi[3] = (kc_epi){.op = NN_OP_SCALE, .f = 0.5};
        k.epi[4] = (kc_epi){.op = NN_OP_MUL, .has_arg = true};
        kc_tensor_of(&k.epi[4].arg, 0, col);
        krun_io io = {.in = {a, b}, .epi = {bias, NULL, res, NULL, col}, .out = {got}};
        krun_result r;
        CU_ASSERT_EQUAL_FATAL(krun_kernel(&cfg, &k, &io, &(krun_opts){.functional = true}, &r,
                                          &err), NP_OK);
        /* The drain fuses bias and gelu in fp32 (one rounding where the framework rounds
         * twice); then every step rounds to bf16 as the framework's does: a few bf16 ulps
         * (2^-8 relative each). */
        krun_diff d = krun_compare(got, y, 3.0 / 256, 1.0 / 64);
        CU_ASSERT_EQUAL(d.bad, 0);
        /* the drain carries the bias (an fp32 vector) and the activation; not under ct,
         * where its per-column bias would be per row of C */
        const isa_core_text *ct = &r.prog->cores[0];
        bool fused = false;
        for (uint32_t i = 0; i < ct->n_insns; i++)
            if (ct->insns[i].op == ISA_OP_MXU_DRAIN)
                fused = ct->insns[i].MXU_DRAIN.act.val == ISA_ACT_GELU &&
                        ct->insns[i].MXU_DRAIN.bias.space == ISA_SPACE_SPAD;
        CU_ASSERT_EQUAL(fused, !(v & 2));
        if (!(v & 2)) /* a bf16 bias converted to fp32 for the drain */
            CU_ASSERT_EQUAL(count_op(r.prog, 0, ISA_OP_VPU_CAST), v == 0 ? 1u : 0u);
        krun_result_free(&r);
        nn_graph_free(gr);
    }
}

TEST(conv2d_values_equal_the_reference_in_channels_last_layout)
{
    /* x [2, 3, 9, 11] NCHW logically, NHWC in memory; w [5, 3, 3, 2] as [(kh, kw, c)][o];
     * stride 2 x 3. */
    rng g;
    rng_seed(&g, 99);
    np_err err = {0};
    nn_graph *gr = nn_graph_new(1);
    int64_t N = 2, C = 3, H = 9, W = 11, O = 5, R = 3, S = 2;
    nn_tensor *x = nn_input(gr, "x", NN_BF16, 4, (int64_t[]){N, C, H, W});
    nn_tensor *w = nn_input(gr, "w", NN_BF16, 4, (int64_t[]){O, C, R, S});
    fill(x, &g), fill(w, &g);
    /* the framework's conv2d is square-strided: the kernel with stride 2 both ways */
    kc_kernel k = {.op = NN_OP_CONV2D, .n_in = 2, .n_out = 1, .n_attrs = 1,
                   .attrs = {KC_INT("stride", 2)}};
    nn_tensor *y = NULL, *xw[2] = {x, w};
    CU_ASSERT_EQUAL_FATAL(kc_kernel_find(NN_OP_CONV2D)->reference(gr, &k, xw, &y, &err), NP_OK);
    CU_ASSERT_EQUAL_FATAL(nn_graph_compute(gr, &err), NP_OK);
    CU_ASSERT_EQUAL(y->ip[0], 2);
    nn_tensor *got = like(gr, y, NN_BF16);
    int64_t E = y->ne[2], F = y->ne[3], e = 2;
    k.in[0] = (kc_tensor){0, NN_BF16, 4, {N, C, H, W}, {H * W * C * e, e, W * C * e, C * e}};
    k.in[1] = (kc_tensor){0, NN_BF16, 4, {O, C, R, S}, {e, O * e, S * C * O * e, C * O * e}};
    k.out[0] = (kc_tensor){0, NN_BF16, 4, {N, O, E, F}, {E * F * O * e, e, F * O * e, O * e}};
    arch_config cfg = tiny(NULL);
    krun_io io = {.in = {x, w}, .out = {got}};
    krun_result r;
    CU_ASSERT_EQUAL_FATAL(krun_kernel(&cfg, &k, &io, &(krun_opts){.functional = true}, &r, &err),
                          NP_OK);
    /* sums in (kh, kw, c) order where the reference sums in (c, kh, kw) order: exact here
     * (quarter-integers, short sums), so equal */
    CU_ASSERT_EQUAL(krun_compare(got, y, 0, 0).bad, 0);
    krun_result_free(&r);
    /* a layout the kernel does not take is an error naming the ones it does */
    kc_tensor_of(&k.in[0], 0, x);
    k.in[0].stride[3] = 3 * e; /* columns not packed */
    CU_ASSERT_EQUAL(krun_kernel(&cfg, &k, &io, &(krun_opts){.functional = true}, &r, &err),
                    NP_ERR_INCONSISTENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "x must be NCHW"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "channels-last"));
    /* and the framework's NCHW x with channels-last w is one: their windows' orders differ */
    kc_tensor_of(&k.in[0], 0, x);
    CU_ASSERT_EQUAL(krun_kernel(&cfg, &k, &io, &(krun_opts){.functional = true}, &r, &err),
                    NP_ERR_INCONSISTENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "(c, kh, kw)"));
    nn_graph_free(gr);
}

/* Fills the values of HBM buffer t (row-major logical v) into an input list. */
typedef struct io_list {
    core_hbm_io in[8];
    size_t n;
} io_list;

TEST(kernels_follow_one_another_in_one_program_with_barriers_only_across_cores)
{
    /* C = A x B, then E = C x D, in one program; on one core the scoreboard-free ordering of
     * the DMA queue suffices, on two cores the second kernel needs a barrier first. */
    rng g;
    rng_seed(&g, 3);
    int64_t M = 24, K = 20, N = 12, P = 9;
    np_err err = {0};
    nn_graph *gr = nn_graph_new(1);
    nn_tensor *A = nn_input(gr, "A", NN_F32, 2, (int64_t[]){M, K});
    nn_tensor *B = nn_input(gr, "B", NN_F32, 2, (int64_t[]){K, N});
    nn_tensor *D = nn_input(gr, "D", NN_F32, 2, (int64_t[]){N, P});
    fill(A, &g), fill(B, &g), fill(D, &g);
    nn_tensor *Cn = nn_matmul(gr, A, B), *En = nn_matmul(gr, Cn, D);
    CU_ASSERT_EQUAL_FATAL(nn_graph_compute(gr, &err), NP_OK);
    for (uint32_t cores = 1; cores <= 2; cores++) {
        arch_config cfg = tiny("core.scoreboard=0");
        kc_prog *p;
        CU_ASSERT_EQUAL_FATAL(kc_prog_new(&cfg, &(kc_prog_opts){.cores = cores}, &p, &err), NP_OK);
        uint64_t a, b, c, d, e;
        kc_prog_bss(p, "A", (uint64_t)(M * K * 4), &a, &err);
        kc_prog_bss(p, "B", (uint64_t)(K * N * 4), &b, &err);
        kc_prog_bss(p, "C", (uint64_t)(M * N * 4), &c, &err);
        kc_prog_bss(p, "D", (uint64_t)(N * P * 4), &d, &err);
        kc_prog_bss(p, "E", (uint64_t)(M * P * 4), &e, &err);
        kc_kernel k1 = {.op = NN_OP_MATMUL, .n_in = 2, .n_out = 1, .place = {0, 0, cores},
                        .n_attrs = 1, .attrs = {KC_INT("tm", 8)}};
        kc_tensor_of(&k1.in[0], a, A), kc_tensor_of(&k1.in[1], b, B), kc_tensor_of(&k1.out[0], c, Cn);
        kc_kernel k2 = k1;
        kc_tensor_of(&k2.in[0], c, Cn), kc_tensor_of(&k2.in[1], d, D), kc_tensor_of(&k2.out[0], e, En);
        kc_result r1, r2;
        CU_ASSERT_EQUAL_FATAL(kc_compile(p, &k1, &r1, &err), NP_OK);
        CU_ASSERT_EQUAL_FATAL(kc_compile(p, &k2, &r2, &err), NP_OK);
        CU_ASSERT_STRING_EQUAL(r2.name, "matmul.1"); /* unique per core */
        CU_ASSERT_EQUAL_FATAL(kc_prog_finish(p, &err), NP_OK);
        isa_program *prog = kc_prog_take(p);
        kc_prog_free(p);
        for (uint32_t cc = 0; cc < cores; cc++) {
            CU_ASSERT_EQUAL(count_op(prog, cc, ISA_OP_BARRIER), cores - 1);
            CU_ASSERT_EQUAL(count_op(prog, cc, ISA_OP_HALT), 1u); /* only the caller's, at the end */
        }
        uint8_t *bytes[3];
        const nn_tensor *ins[3] = {A, B, D};
        const uint64_t at[3] = {a, b, d};
        core_hbm_io in[3];
        for (int i = 0; i < 3; i++) {
            bytes[i] = malloc((size_t)nn_numel(ins[i]) * 4);
            memcpy(bytes[i], ins[i]->data, (size_t)nn_numel(ins[i]) * 4); /* fp32 as is */
            in[i] = (core_hbm_io){at[i], bytes[i], (uint64_t)nn_numel(ins[i]) * 4, 0};
        }
        float *out = malloc((size_t)(M * P) * 4);
        core_hbm_io o = {e, out, (uint64_t)(M * P) * 4, 0};
        core_sim_opts so = {.functional = true, .inputs = in, .n_inputs = 3, .outputs = &o,
                            .n_outputs = 1};
        core_report *rep;
        CU_ASSERT_EQUAL_FATAL(core_sim_run_opts(&cfg, prog, &so, NULL, &rep, &err), NP_OK);
        CU_ASSERT_EQUAL(rep->n_kernels, 2u * cores);
        int64_t bad = 0;
        for (int64_t i = 0; i < M * P; i++)
            bad += out[i] != En->data[i];
        CU_ASSERT_EQUAL(bad, 0);
        core_report_free(rep);
        isa_program_free(prog);
        free(out);
        for (int i = 0; i < 3; i++)
            free(bytes[i]);
    }
    nn_graph_free(gr);
}

TEST(a_kernel_that_needs_the_scratchpad_another_just_released_gets_a_fence_first)
{
    arch_config cfg = tiny(NULL);
    np_err err = {0};
    kc_prog *p;
    CU_ASSERT_EQUAL_FATAL(kc_prog_new(&cfg, &(kc_prog_opts){.cores = 1}, &p, &err), NP_OK);
    uint64_t a;
    kc_prog_bss(p, "A", 1 << 20, &a, &err);
    /* small tiles: back-to-back kernels share the scratchpad without waiting for each other */
    kc_kernel small = {.op = NN_OP_MATMUL, .n_in = 2, .n_out = 1, .n_attrs = 3,
                       .attrs = {KC_INT("tm", 4), KC_INT("tn", 4), KC_INT("tk", 4)}};
    kc_tensor_dense(&small.in[0], a, NN_BF16, 2, (int64_t[]){8, 8});
    kc_tensor_dense(&small.in[1], a + 4096, NN_BF16, 2, (int64_t[]){8, 8});
    kc_tensor_dense(&small.out[0], a + 8192, NN_BF16, 2, (int64_t[]){8, 8});
    CU_ASSERT_EQUAL(kc_compile(p, &small, NULL, &err), NP_OK);
    small.out[0].addr += 4096; /* a different output: no dependency */
    CU_ASSERT_EQUAL(kc_compile(p, &small, NULL, &err), NP_OK);
    CU_ASSERT_EQUAL(count_op(kc_prog_program(p), 0, ISA_OP_FENCE), 0u);
    /* a kernel that takes nearly the whole scratchpad (2 x 64 x 192 + 2 x 192 x 16 bf16 + a
     * 64 x 16 tile: 63,488 of 65,536 bytes) must wait for both */
    kc_kernel big = small;
    big.attrs[0] = KC_INT("tm", 64), big.attrs[1] = KC_INT("tn", 16), big.attrs[2] = KC_INT("tk", 192);
    kc_tensor_dense(&big.in[0], a, NN_BF16, 2, (int64_t[]){64, 256});
    kc_tensor_dense(&big.in[1], a + 65536, NN_BF16, 2, (int64_t[]){256, 16});
    kc_tensor_dense(&big.out[0], a + 131072, NN_BF16, 2, (int64_t[]){64, 16});
    CU_ASSERT_EQUAL(kc_compile(p, &big, NULL, &err), NP_OK);
    CU_ASSERT_EQUAL(count_op(kc_prog_program(p), 0, ISA_OP_FENCE), 1u);
    /* and the next small one after it again */
    CU_ASSERT_EQUAL(kc_compile(p, &small, NULL, &err), NP_OK);
    CU_ASSERT_EQUAL(count_op(kc_prog_program(p), 0, ISA_OP_FENCE), 2u);
    CU_ASSERT_EQUAL(kc_prog_finish(p, &err), NP_OK);
    isa_program *prog = kc_prog_take(p);
    kc_prog_free(p);
    core_report *rep;
    CU_ASSERT_EQUAL(core_sim_run(&cfg, prog, NULL, &rep, &err), NP_OK);
    CU_ASSERT_EQUAL(rep->n_kernels, 4u);
    core_report_free(rep);
    isa_program_free(prog);
}

TEST(bad_kernels_are_errors_that_name_the_kernel_and_what_is_wrong)
{
    arch_config cfg = tiny(NULL);
    np_err err = {0};
    kc_kernel k = {.op = NN_OP_MATMUL, .n_in = 2, .n_out = 1, .n_attrs = 1,
                   .attrs = {KC_INT("tx", 8)}};
    kc_tensor_dense(&k.in[0], 0, NN_BF16, 2, (int64_t[]){8, 8});
    kc_tensor_dense(&k.in[1], 0, NN_BF16, 2, (int64_t[]){8, 8});
    kc_tensor_dense(&k.out[0], 0, NN_BF16, 2, (int64_t[]){8, 8});
    krun_result r;
    CU_ASSERT_EQUAL(krun_kernel(&cfg, &k, NULL, NULL, &r, &err), NP_ERR_UNKNOWN_KEY);
    CU_ASSERT_STRING_EQUAL(err.msg, "matmul: unknown attribute 'tx'; did you mean 'tm'?");
    /* out of range, twice, tiles that cannot fit */
    k.attrs[0] = KC_INT("tm", 70000);
    CU_ASSERT_EQUAL(krun_kernel(&cfg, &k, NULL, NULL, &r, &err), NP_ERR_RANGE);
    k.n_attrs = 2;
    k.attrs[0] = KC_INT("tk", 8), k.attrs[1] = KC_INT("tk", 8);
    CU_ASSERT_EQUAL(krun_kernel(&cfg, &k, NULL, NULL, &r, &err), NP_ERR_DUPLICATE);
    k.attrs[0] = KC_INT("tm", 8), k.attrs[1] = KC_INT("tn", 4096);
    CU_ASSERT_EQUAL(krun_kernel(&cfg, &k, NULL, NULL, &r, &err), NP_ERR_RANGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "accumulator"));
    k.attrs[1] = KC_INT("tk", 4096);
    kc_tensor_dense(&k.in[0], 0, NN_BF16, 2, (int64_t[]){8, 8192});
    kc_tensor_dense(&k.in[1], 0, NN_BF16, 2, (int64_t[]){8192, 8});
    CU_ASSERT_EQUAL(krun_kernel(&cfg, &k, NULL, NULL, &r, &err), NP_ERR_RANGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "scratchpad"));
    k.n_attrs = 0;
    /* shapes that do not make a matmul; a layout it does not take */
    kc_tensor_dense(&k.in[0], 0, NN_BF16, 2, (int64_t[]){8, 8});
    kc_tensor_dense(&k.in[1], 0, NN_BF16, 2, (int64_t[]){7, 8});
    CU_ASSERT_EQUAL(krun_kernel(&cfg, &k, NULL, NULL, &r, &err), NP_ERR_INCONSISTENT);
    kc_tensor_dense(&k.in[1], 0, NN_BF16, 2, (int64_t[]){8, 8});
    k.in[0].stride[1] = 4;
    CU_ASSERT_EQUAL(krun_kernel(&cfg, &k, NULL, NULL, &r, &err), NP_ERR_INCONSISTENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "neither row- nor column-major"));
    k.in[0].stride[1] = 2;
    /* an epilogue step that is not elementwise; placement off the chip */
    k.n_epi = 1;
    k.epi[0] = (kc_epi){.op = NN_OP_SOFTMAX};
    CU_ASSERT_EQUAL(krun_kernel(&cfg, &k, NULL, NULL, &r, &err), NP_ERR_INCONSISTENT);
    k.n_epi = 0;
    k.place = (kc_place){0, 1, 2};
    CU_ASSERT_EQUAL(krun_kernel(&cfg, &k, NULL, NULL, &r, &err), NP_ERR_RANGE);
    /* ops without a kernel, with and without a reason */
    k.place = (kc_place){0};
    k.op = NN_OP_RESHAPE;
    CU_ASSERT_EQUAL(krun_kernel(&cfg, &k, NULL, NULL, &r, &err), NP_ERR_UNKNOWN_KEY);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "a view"));
}

TEST(every_kernel_in_the_table_is_well_formed)
{
    unsigned kernels = 0;
    for (int op = 0; op < NN_OP_COUNT; op++) {
        const kc_kernel_def *d = kc_kernel_find((nn_op)op);
        if (!d)
            continue;
        kernels++;
        CU_ASSERT_EQUAL(d->op, (nn_op)op);
        CU_ASSERT_PTR_NULL(kc_no_kernel_reason((nn_op)op)); /* not both */
        CU_ASSERT_PTR_NOT_NULL(d->compile);
        CU_ASSERT(d->doc && strlen(d->doc) > 10);
        CU_ASSERT(d->n_out >= 1 && d->n_out <= KC_MAX_OUT && d->n_in <= KC_MAX_IN);
        CU_ASSERT(d->n_attrs + d->n_keys <= KC_MAX_SPEC);
        for (unsigned i = 0; i < d->n_attrs; i++) {
            const kc_attr_def *a = &d->attrs[i];
            CU_ASSERT(a->doc && a->doc[0]);
            if (a->type != KC_ATTR_DTYPE)
                CU_ASSERT(a->dflt >= a->min && a->dflt <= a->max);
            for (unsigned j = 0; j < i; j++)
                CU_ASSERT(strcmp(d->attrs[j].name, a->name) != 0);
        }
    }
    CU_ASSERT(kernels >= 2);
    CU_ASSERT_PTR_NOT_NULL(kc_no_kernel_reason(NN_OP_LEAF));
    /* the dtype table maps both ways */
    for (int t = 0; t < NN_DTYPE_COUNT; t++) {
        CU_ASSERT_EQUAL(kc_nn_dtype(kc_isa_dtype((nn_dtype)t)), (nn_dtype)t);
        CU_ASSERT_EQUAL(isa_dtype_size[kc_isa_dtype((nn_dtype)t)], nn_dtype_size((nn_dtype)t));
    }
}

TEST(every_op_of_ops_def_has_a_kernel_or_a_stated_reason_for_none)
{
    /* issue 10's first check: an op added to framework/ops.def without a KC_KERNEL or a
     * KC_NO_KERNEL row in compiler/kernels.def fails here, naming it; views lower to nothing */
    char missing[2048] = "";
    size_t n_missing = 0;
    for (int op = 0; op < NN_OP_COUNT; op++) {
        const kc_kernel_def *d = kc_kernel_find((nn_op)op);
        const char *why = kc_no_kernel_reason((nn_op)op), *later = kc_kernel_not_yet((nn_op)op);
        CU_ASSERT(!later || (!d && !why)); /* one of the three */
        if (!d && !(why && strlen(why) > 10) && !(later && strlen(later) > 10)) {
            n_missing++;
            snprintf(missing + strlen(missing), sizeof missing - strlen(missing), " %s",
                     nn_op_name((nn_op)op));
        }
        if (nn_op_flags((nn_op)op) & NN_OPF_VIEW)
            CU_ASSERT(!d && why); /* a view shares its input's bytes: no kernel */
    }
    if (n_missing)
        fprintf(stderr, "ops without a kernel or a reason in compiler/kernels.def:%s\n", missing);
    CU_ASSERT_EQUAL(n_missing, 0u);
    CU_ASSERT_PTR_NOT_NULL(kc_no_kernel_reason(NN_OP_LEAF));
}

TEST(the_cost_models_array_formula_is_the_hardware_models)
{
    /* compiler/kc_gemm_cost.c mirrors hw-model's array timing (mxu_timing.h and the per-dtype
     * rate of core_cost.c): the two agree on every dataflow, double-buffering and dtype. */
    static const char *sets[][3] = {
        {"core.dataflow=ws", NULL, NULL}, {"core.dataflow=os", NULL, NULL},
        {"core.dataflow=is", NULL, NULL},
        {"core.dataflow=ws", "core.mxu_weight_double_buffer=1", NULL},
        {"core.dataflow=is", "core.mxu_weight_double_buffer=1", NULL},
        {"core.dataflow=ws", "core.mxu_pipelined_folds=1", NULL},
        {"core.dataflow=os", "core.mxu_pipelined_folds=1", NULL},
        {"core.dataflow=is", "core.mxu_pipelined_folds=1", NULL},
        {"core.dataflow=ws", "core.mxu_weight_double_buffer=1", "core.mxu_pipelined_folds=1"},
        {"core.dataflow=is", "core.mxu_weight_double_buffer=1", "core.mxu_pipelined_folds=1"}};
    static const isa_dtype dts[] = {ISA_DTYPE_BF16, ISA_DTYPE_FP32, ISA_DTYPE_INT8};
    rng g;
    rng_seed(&g, 11);
    for (size_t s = 0; s < sizeof sets / sizeof sets[0]; s++) {
        arch_config cfg;
        np_err e = {0};
        unsigned n_set = sets[s][2] ? 3 : sets[s][1] ? 2 : 1;
        CU_ASSERT_EQUAL_FATAL(arch_resolve("tiny", sets[s], n_set, &cfg, &e), NP_OK);
        mxu_array arr;
        mxu_array_from_arch(&cfg, &arr);
        for (int i = 0; i < 40; i++) {
            uint64_t m = 1 + rng_below(&g, 70), n = 1 + rng_below(&g, 70), k = 1 + rng_below(&g, 70);
            isa_dtype dt = dts[i % 3];
            /* the core model's cost of one mxu.mm after an mxu.load of k x n */
            isa_insn mm;
            isa_insn_init(&mm, ISA_OP_MXU_MM);
            mm.MXU_MM.m = isa_imm((int64_t)m);
            mm.MXU_MM.dtype = isa_imm(dt);
            CU_ASSERT_EQUAL(kmm_array_cycles(&cfg, dt, m, n, k), core_exec_cycles(&cfg, &mm, k, n));
            /* and the gap between two folds of a run (pipelined folds, mxu_timing.h) */
            CU_ASSERT_EQUAL(kmm_fold_gap(&cfg, m, k), mxu_fold_gap(&arr, m, k));
        }
    }
}

TEST(a_tiling_cache_round_trips_and_kc_compile_uses_its_tiling)
{
    arch_config cfg = tiny(NULL);
    np_err err = {0};
    kc_kernel k = {.op = NN_OP_MATMUL, .n_in = 2, .n_out = 1};
    kc_tensor_dense(&k.in[0], 0, NN_BF16, 2, (int64_t[]){64, 64});
    kc_tensor_dense(&k.in[1], 0, NN_BF16, 2, (int64_t[]){64, 32});
    kc_tensor_dense(&k.out[0], 0, NN_BF16, 2, (int64_t[]){64, 32});
    char key[2048];
    kc_tile_key(&cfg, &k, key, sizeof key);
    CU_ASSERT_PTR_NOT_NULL(strstr(key, "matmul arch="));
    CU_ASSERT_PTR_NOT_NULL(strstr(key, "in=64x64/128,2/bf16"));
    /* another architecture is another key */
    arch_config os = tiny("core.dataflow=os");
    char key2[2048];
    kc_tile_key(&os, &k, key2, sizeof key2);
    CU_ASSERT(strcmp(key, key2) != 0);
    /* tiling attributes are not part of it; others are */
    kc_kernel kt = k;
    kt.n_attrs = 1, kt.attrs[0] = KC_INT("tm", 8);
    kc_tile_key(&cfg, &kt, key2, sizeof key2);
    CU_ASSERT_STRING_EQUAL(key, key2);
    kc_tile_cache *c = kc_tile_cache_new();
    kc_tiling t = {3, {KC_INT("tm", 8), KC_INT("tn", 4), KC_INT("tk", 12)}, 0};
    CU_ASSERT_EQUAL(kc_tile_cache_put(c, key, &t, 1234, &err), NP_OK);
    char path[] = "/tmp/npusim_tiles_XXXXXX";
    close(mkstemp(path));
    CU_ASSERT_EQUAL(kc_tile_cache_save(c, path, &err), NP_OK);
    kc_tile_cache_free(c);
    CU_ASSERT_EQUAL_FATAL(kc_tile_cache_load(path, &c, &err), NP_OK);
    kc_tiling got;
    uint64_t cyc;
    CU_ASSERT_FATAL(kc_tile_cache_get(c, key, &got, &cyc));
    CU_ASSERT_EQUAL(cyc, 1234u);
    CU_ASSERT_EQUAL(got.n_attrs, 3u);
    /* the compile of the same kernel takes the cached tiles */
    krun_result r;
    CU_ASSERT_EQUAL_FATAL(krun_kernel(&cfg, &k, NULL, &(krun_opts){.tiles = c}, &r, &err), NP_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.kernel.schedule, "tiles 8x4x12"));
    krun_result_free(&r);
    /* without the cache, the cost model's */
    CU_ASSERT_EQUAL_FATAL(krun_kernel(&cfg, &k, NULL, NULL, &r, &err), NP_OK);
    CU_ASSERT_PTR_NULL(strstr(r.kernel.schedule, "tiles 8x4x12"));
    CU_ASSERT(r.kernel.n_cands >= 1 && r.kernel.est_cycles > 0);
    krun_result_free(&r);
    kc_tile_cache_free(c);
    /* a file that is not a cache is an error; a missing one an empty cache */
    FILE *f = fopen(path, "w");
    fputs("{\"version\": 2}", f);
    fclose(f);
    CU_ASSERT_EQUAL(kc_tile_cache_load(path, &c, &err), NP_ERR_FORMAT);
    remove(path);
    CU_ASSERT_EQUAL_FATAL(kc_tile_cache_load(path, &c, &err), NP_OK);
    CU_ASSERT_EQUAL(kc_tile_cache_size(c), 0u);
    kc_tile_cache_free(c);
}

TEST(a_k_split_over_cores_adds_the_partial_sums_over_the_mesh_to_the_reference_values)
{
    /* ksplit = 2 on tiny's two cores, 4 on tpu-pod: each core multiplies its part of K, the
     * others send their fp32 (int32 for int8) partial sums to the block's first core, which
     * adds them as they arrive, then converts and runs the epilogue on the VPU. */
    rng g;
    rng_seed(&g, 5);
    arch_config tpu;
    np_err err = {0};
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tpu-pod", NULL, 0, &tpu, &err), NP_OK);
    arch_config t = tiny(NULL);
    static const struct { const arch_config *cfg; uint32_t cores, ks; nn_dtype dt; int64_t M, N, K; } c[] = {
        {NULL, 2, 2, NN_I8, 30, 20, 100}, {NULL, 2, 2, NN_F32, 9, 7, 61},
        {NULL, 4, 4, NN_BF16, 70, 130, 1000},
    };
    for (int i = 0; i < 3; i++) {
        const arch_config *cfg = i < 2 ? &t : &tpu;
        nn_graph *gr = nn_graph_new(1);
        nn_tensor *a = nn_input(gr, "a", c[i].dt, 2, (int64_t[]){c[i].M, c[i].K});
        nn_tensor *b = nn_input(gr, "b", c[i].dt, 2, (int64_t[]){c[i].K, c[i].N});
        nn_tensor *bias = nn_input(gr, "bias", c[i].dt == NN_I8 ? NN_I32 : c[i].dt, 1,
                                   (int64_t[]){c[i].N});
        fill(a, &g), fill(b, &g), fill(bias, &g);
        nn_tensor *mm = nn_matmul(gr, a, b), *y = mm;
        if (c[i].dt != NN_I8) /* the epilogue runs after the sum: bias, then relu */
            y = nn_relu(gr, nn_add(gr, mm, bias));
        CU_ASSERT_EQUAL_FATAL(nn_graph_compute(gr, &err), NP_OK);
        nn_tensor *got = like(gr, y, c[i].dt == NN_I8 ? NN_I32 : c[i].dt);
        kc_kernel k = {.op = NN_OP_MATMUL, .n_in = 2, .n_out = 1, .place = {0, 0, c[i].cores},
                       .n_attrs = 2, .attrs = {KC_INT("ksplit", c[i].ks), KC_INT("tk", 16)}};
        kc_tensor_of(&k.in[0], 0, a), kc_tensor_of(&k.in[1], 0, b), kc_tensor_of(&k.out[0], 0, got);
        krun_io io = {.in = {a, b}, .out = {got}};
        if (c[i].dt != NN_I8) {
            k.n_epi = 2;
            k.epi[0] = (kc_epi){.op = NN_OP_ADD, .has_arg = true};
            kc_tensor_of(&k.epi[0].arg, 0, bias);
            k.epi[1] = (kc_epi){.op = NN_OP_RELU};
            io.epi[0] = bias;
        }
        krun_result r;
        CU_ASSERT_EQUAL_FATAL(krun_kernel(cfg, &k, &io, &(krun_opts){.functional = true}, &r,
                                          &err), NP_OK);
        CU_ASSERT_PTR_NOT_NULL(strstr(r.kernel.schedule, "K split"));
        CU_ASSERT(count_op(r.prog, 0, ISA_OP_COMM_RECV) >= c[i].ks - 1);
        CU_ASSERT(count_op(r.prog, 1, ISA_OP_COMM_SEND) >= 1);
        /* partial sums added in another order than the reference's: exact for the integers
         * and the exactly representable floats used here */
        krun_diff d = krun_compare(got, y, 0, 0);
        if (d.bad)
            fprintf(stderr, "ksplit %u %s: %lld bad, worst %g\n", c[i].ks, nn_dtype_name(c[i].dt),
                    (long long)d.bad, d.max_abs);
        CU_ASSERT_EQUAL(d.bad, 0);
        krun_result_free(&r);
        nn_graph_free(gr);
    }
    (void)c[0].cfg;
}
