/* test_kernels_move.c — the data-movement kernels (compiler/kc_embed.c, kc_move.c) run
 * functionally on the core model (sim/krun.h) against the framework's reference executor:
 * embedding lookups and their scatter-add gradient (repeated indices), permute, concat,
 * slice and pad; values move without arithmetic, so they must be equal exactly (the
 * gradient's sums: equal for fp32 on one core, where the adds happen in the reference's
 * order; within an ulp of the output type otherwise). */
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

static float round_to(nn_dtype t, float v)
{
    return t == NN_BF16 ? nn_round_bf16(v) : t == NN_F16 ? nn_round_f16(v) : v;
}

static void fill(nn_tensor *t, uint64_t seed)
{
    CU_ASSERT_FATAL(nn_tensor_randn(t, seed, 1.0));
    for (int64_t i = 0; i < nn_numel(t); i++)
        t->data[i] = t->dtype == NN_I8 || t->dtype == NN_I32 ? (float)(int)(t->data[i] * 20)
                                                             : round_to(t->dtype, t->data[i]);
}

/* Indices in [0, V), a third of them V - 1 (repeats, the last row). */
static void fill_idx(nn_tensor *t, uint64_t V, uint64_t seed)
{
    CU_ASSERT_FATAL(nn_tensor_alloc(t));
    rng r;
    rng_seed(&r, seed);
    for (int64_t i = 0; i < nn_numel(t); i++)
        t->data[i] = (float)(i % 3 == 1 ? V - 1 : rng_below(&r, V));
}

/* Runs k with inputs in[] against want; returns the bad elements at rtol, atol. */
static int64_t run_check(const arch_config *cfg, kc_kernel *k, nn_tensor *const *in, int n_in,
                         nn_tensor *want, nn_graph *g, double rtol, double atol, kc_result *res)
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
    krun_diff d = krun_compare(got, want, rtol, atol);
    if (d.bad)
        fprintf(stderr, "%s %s: %lld of %lld bad, worst at %lld: got %g want %g\n",
                nn_op_name(k->op), nn_dtype_name(want->dtype), (long long)d.bad, (long long)d.n,
                (long long)d.worst, got->data[d.worst], want->data[d.worst]);
    return d.bad;
}

static const nn_dtype float_types[3] = {NN_F32, NN_BF16, NN_F16};

/* ---- embedding ----------------------------------------------------------------------------- */

TEST(embedding_gathers_the_rows_its_indices_name_exactly)
{
    arch_config cfg = arch("tiny", NULL);
    static const struct { int nd; int64_t shape[2]; int64_t V, D; uint32_t cores; } cases[] = {
        {1, {13}, 7, 5, 1}, {2, {3, 11}, 50, 19, 2}, {1, {1}, 3, 1, 2}, {2, {2, 70}, 9, 33, 2},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int t = 0; t < 3; t++)
            for (int it = 0; it < 2; it++) {
                nn_graph *g = nn_graph_new(1);
                nn_tensor *in[2];
                in[0] = nn_input(g, "table", float_types[t], 2,
                                 (int64_t[]){cases[c].V, cases[c].D});
                fill(in[0], 3 + c);
                in[1] = nn_input(g, "idx", it ? NN_I8 : NN_I32, cases[c].nd, cases[c].shape);
                fill_idx(in[1], (uint64_t)cases[c].V, 5 + c);
                nn_tensor *y = nn_embedding(g, in[0], in[1]);
                kc_kernel k = {.op = NN_OP_EMBEDDING, .place = {0, 0, cases[c].cores}};
                CU_ASSERT_EQUAL(run_check(&cfg, &k, in, 2, y, g, 0, 0, NULL), 0);
                nn_graph_free(g);
            }
}

TEST(embedding_grad_accumulates_every_row_of_repeated_indices)
{
    arch_config cfg = arch("tiny", NULL);
    static const struct { int nd; int64_t shape[2]; int64_t V, D; uint32_t cores; } cases[] = {
        {1, {13}, 7, 5, 1}, {2, {3, 11}, 50, 19, 2}, {1, {1}, 3, 1, 2}, {2, {2, 70}, 9, 33, 1},
        {2, {5, 9}, 4, 129, 2},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int t = 0; t < 3; t++)
            for (int it = 0; it < 2; it++) {
                nn_graph *g = nn_graph_new(1);
                nn_tensor *in[2];
                in[0] = nn_input(g, "idx", it ? NN_I8 : NN_I32, cases[c].nd, cases[c].shape);
                fill_idx(in[0], (uint64_t)cases[c].V, 7 + c);
                int64_t dys[3] = {cases[c].shape[0], cases[c].shape[1], cases[c].D};
                dys[cases[c].nd] = cases[c].D;
                in[1] = nn_input(g, "dy", float_types[t], cases[c].nd + 1, dys);
                fill(in[1], 9 + c);
                nn_tensor *y = nn_node(g, NN_OP_EMBEDDING_GRAD, 2, in,
                                       (int64_t[NN_MAX_IPARAMS]){cases[c].V}, NULL);
                kc_kernel k = {.op = NN_OP_EMBEDDING_GRAD, .place = {0, 0, cases[c].cores}};
                /* fp32 on one core: the reference's adds in its order, exactly; else an ulp
                 * of the output (fp32: the order of a few adds) */
                bool exact = float_types[t] == NN_F32 && cases[c].cores == 1;
                double rtol = float_types[t] == NN_BF16 ? 0x1p-7
                              : float_types[t] == NN_F16 ? 0x1p-10 : 0x1p-20;
                CU_ASSERT_EQUAL(run_check(&cfg, &k, in, 2, y, g, exact ? 0 : rtol,
                                          exact ? 0 : rtol / 4, NULL), 0);
                nn_graph_free(g);
            }
}

TEST(embedding_grad_of_rows_too_wide_for_the_scratchpad_goes_in_column_pieces)
{
    /* tiny's 64 KiB and rows of 6000: the zeroing and the final conversion as narrower rows,
     * dy converted and scatter-added in column pieces; bf16 and fp16 (fp32 accumulation),
     * fp32 (straight from HBM), on one core and two */
    arch_config cfg = arch("tiny", NULL);
    for (int t = 0; t < 3; t++)
        for (uint32_t cores = 1; cores <= 2; cores++) {
            nn_graph *g = nn_graph_new(1);
            nn_tensor *in[2];
            in[0] = nn_input(g, "idx", NN_I32, 1, (int64_t[]){9});
            fill_idx(in[0], 7, 17 + cores);
            in[1] = nn_input(g, "dy", float_types[t], 2, (int64_t[]){9, 6000});
            fill(in[1], 19 + t);
            nn_tensor *y = nn_node(g, NN_OP_EMBEDDING_GRAD, 2, in, (int64_t[NN_MAX_IPARAMS]){7},
                                   NULL);
            kc_kernel k = {.op = NN_OP_EMBEDDING_GRAD, .place = {0, 0, cores}};
            double rtol = float_types[t] == NN_BF16 ? 0x1p-7
                          : float_types[t] == NN_F16 ? 0x1p-10 : 0x1p-20;
            CU_ASSERT_EQUAL(run_check(&cfg, &k, in, 2, y, g, rtol, rtol / 4, NULL), 0);
            nn_graph_free(g);
        }
}

/* Indices of a vocabulary of 3V rows (before the shard, in it, after it) and the shard's
 * offset, as the tensor-parallel plans make them (framework/plan_tp.c). */
static void fill_shard_idx(nn_tensor *t, nn_tensor *off, uint64_t V, int64_t o, uint64_t seed)
{
    CU_ASSERT_FATAL(nn_tensor_alloc(t));
    CU_ASSERT_FATAL(nn_tensor_alloc(off));
    off->data[0] = (float)o;
    rng r;
    rng_seed(&r, seed);
    for (int64_t i = 0; i < nn_numel(t); i++) /* the shard's first and last rows, and others */
        t->data[i] = (float)(i % 4 == 1 ? o : i % 4 == 2 ? o + (int64_t)V - 1
                                                      : (int64_t)rng_below(&r, 3 * V));
}

TEST(over_a_vocabulary_shard_embedding_gives_zeros_and_its_gradient_nothing_outside_it)
{
    arch_config cfg = arch("tiny", NULL);
    static const struct { int nd; int64_t shape[2]; int64_t V, D, off; uint32_t cores; } cases[] = {
        {1, {13}, 7, 5, 7, 1}, {2, {3, 11}, 20, 19, 0, 2}, {2, {2, 70}, 9, 33, 11, 2},
        {1, {40}, 4, 129, 35, 2},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int t = 0; t < 3; t++)
            for (int it = 0; it < 2; it++) {
                nn_dtype idt = it ? NN_I8 : NN_I32;
                nn_graph *g = nn_graph_new(1);
                nn_tensor *in[3];
                in[0] = nn_input(g, "table", float_types[t], 2,
                                 (int64_t[]){cases[c].V, cases[c].D});
                fill(in[0], 3 + c);
                in[1] = nn_input(g, "idx", idt, cases[c].nd, cases[c].shape);
                in[2] = nn_input(g, "offset", idt, 0, NULL);
                fill_shard_idx(in[1], in[2], (uint64_t)cases[c].V, cases[c].off, 5 + c);
                nn_tensor *y = nn_embedding_shard(g, in[0], in[1], in[2]);
                kc_kernel k = {.op = NN_OP_EMBEDDING, .place = {0, 0, cases[c].cores}};
                CU_ASSERT_EQUAL(run_check(&cfg, &k, in, 3, y, g, 0, 0, NULL), 0);
                /* some rows are zeros, some are not */
                int64_t zero = 0;
                for (int64_t i = 0; i < nn_numel(y); i += cases[c].D)
                    zero += y->data[i] == 0;
                CU_ASSERT(zero > 0 && zero < nn_numel(y) / cases[c].D);
                nn_graph_free(g);
                /* the gradient: rows outside the shard add nothing */
                g = nn_graph_new(1);
                nn_tensor *gi[3];
                gi[0] = nn_input(g, "idx", idt, cases[c].nd, cases[c].shape);
                gi[2] = nn_input(g, "offset", idt, 0, NULL);
                fill_shard_idx(gi[0], gi[2], (uint64_t)cases[c].V, cases[c].off, 7 + c);
                int64_t dys[3] = {cases[c].shape[0], cases[c].shape[1], cases[c].D};
                dys[cases[c].nd] = cases[c].D;
                gi[1] = nn_input(g, "dy", float_types[t], cases[c].nd + 1, dys);
                fill(gi[1], 9 + c);
                y = nn_node(g, NN_OP_EMBEDDING_GRAD, 3, gi,
                            (int64_t[NN_MAX_IPARAMS]){cases[c].V}, NULL);
                k = (kc_kernel){.op = NN_OP_EMBEDDING_GRAD, .place = {0, 0, cases[c].cores}};
                bool exact = float_types[t] == NN_F32 && cases[c].cores == 1;
                double rtol = float_types[t] == NN_BF16 ? 0x1p-7
                              : float_types[t] == NN_F16 ? 0x1p-10 : 0x1p-20;
                CU_ASSERT_EQUAL(run_check(&cfg, &k, gi, 3, y, g, exact ? 0 : rtol,
                                          exact ? 0 : rtol / 4, NULL), 0);
                nn_graph_free(g);
            }
}

/* ---- permute, concat, slice, pad ------------------------------------------------------------- */

static const nn_dtype all_types[5] = {NN_F32, NN_BF16, NN_F16, NN_I8, NN_I32};

TEST(permute_moves_every_element_exactly_by_strided_copies_or_tile_transposes)
{
    arch_config cfg = arch("tiny", NULL);
    static const struct { int nd; int64_t shape[4]; int axes[4]; int64_t digits; uint32_t cores;
                          const char *how; } cases[] = {
        {2, {5, 7}, {1, 0}, 10, 1, "transposed"},
        {3, {2, 3, 4}, {0, 2, 1}, 21, 2, "transposed"},
        {3, {2, 3, 4}, {1, 0, 2}, 102, 2, "permuted"},
        {3, {3, 5, 2}, {2, 1, 0}, 210, 2, "transposed"},
        {4, {2, 3, 5, 6}, {0, 2, 1, 3}, 213, 2, "permuted"},
        {4, {2, 3, 5, 6}, {0, 1, 3, 2}, 132, 1, "transposed"},
        {2, {1, 9}, {1, 0}, 10, 1, "permuted"}, /* a dim of one: nothing moves */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int t = 0; t < 5; t++) {
            nn_graph *g = nn_graph_new(1);
            nn_tensor *x = nn_input(g, "x", all_types[t], cases[c].nd, cases[c].shape);
            fill(x, 101 + c);
            nn_tensor *y = nn_permute(g, x, cases[c].axes);
            kc_kernel k = {.op = NN_OP_PERMUTE, .place = {0, 0, cases[c].cores}, .n_attrs = 1,
                           .attrs = {KC_INT("axes", cases[c].digits)}};
            kc_result r;
            CU_ASSERT_EQUAL(run_check(&cfg, &k, &x, 1, y, g, 0, 0, &r), 0);
            CU_ASSERT_PTR_NOT_NULL(strstr(r.schedule, cases[c].how));
            CU_ASSERT_EQUAL(r.hbm_read_bytes, nn_nbytes(y));
            CU_ASSERT_EQUAL(r.hbm_write_bytes, nn_nbytes(y));
            nn_graph_free(g);
        }
}

TEST(batched_transposes_loop_over_their_batch_so_the_program_does_not_grow_with_it)
{
    /* [P, Q, R, S] -> [Q, P, S, R]: two batch dims that do not merge (P and Q swap), each a
     * loop; then [B, 5, 7] -> [B, 7, 5] for B = 2 and 40: the same instructions */
    arch_config cfg = arch("tiny", NULL);
    for (int t = 0; t < 5; t++) {
        nn_graph *g = nn_graph_new(1);
        nn_tensor *x = nn_input(g, "x", all_types[t], 4, (int64_t[]){3, 4, 5, 6});
        fill(x, 141 + t);
        nn_tensor *y = nn_permute(g, x, (int[]){1, 0, 3, 2});
        kc_kernel k = {.op = NN_OP_PERMUTE, .place = {0, 0, 2}, .n_attrs = 1,
                       .attrs = {KC_INT("axes", 1032)}};
        kc_result r;
        CU_ASSERT_EQUAL(run_check(&cfg, &k, &x, 1, y, g, 0, 0, &r), 0);
        CU_ASSERT_PTR_NOT_NULL(strstr(r.schedule, "12 passes"));
        CU_ASSERT_EQUAL(r.hbm_read_bytes, nn_nbytes(y));
        nn_graph_free(g);
    }
    uint64_t insns[2];
    for (int i = 0; i < 2; i++) {
        int64_t B = i ? 40 : 2;
        nn_graph *g = nn_graph_new(1);
        nn_tensor *x = nn_input(g, "x", NN_BF16, 3, (int64_t[]){B, 5, 7});
        fill(x, 151 + i);
        nn_tensor *y = nn_permute(g, x, (int[]){0, 2, 1});
        kc_kernel k = {.op = NN_OP_PERMUTE, .place = {0, 0, 1}, .n_attrs = 1,
                       .attrs = {KC_INT("axes", 21)}};
        kc_result r;
        CU_ASSERT_EQUAL(run_check(&cfg, &k, &x, 1, y, g, 0, 0, &r), 0);
        insns[i] = r.insns;
        nn_graph_free(g);
    }
    CU_ASSERT_EQUAL(insns[0], insns[1]);
}

TEST(transposes_of_rows_too_wide_for_the_scratchpad_go_in_chunks_of_columns)
{
    /* tiny's 64 KiB: [37, 701] and [3, 37, 701] fp32 rows of 701 do not fit 16 a tile, so
     * the rows go in chunks (176, 176, 176 and the last 173), a loop of their own */
    arch_config cfg = arch("tiny", NULL);
    static const struct { int nd; int64_t shape[3]; int axes[3]; int64_t digits; } cases[] = {
        {2, {37, 701}, {1, 0}, 10}, {3, {3, 37, 701}, {0, 2, 1}, 21}};
    for (size_t c = 0; c < 2; c++)
        for (int t = 0; t < 5; t += 4) { /* fp32, int32 */
            nn_graph *g = nn_graph_new(1);
            nn_tensor *x = nn_input(g, "x", all_types[t], cases[c].nd, cases[c].shape);
            fill(x, 161 + c);
            nn_tensor *y = nn_permute(g, x, cases[c].axes);
            kc_kernel k = {.op = NN_OP_PERMUTE, .place = {0, 0, 2}, .n_attrs = 1,
                           .attrs = {KC_INT("axes", cases[c].digits)}};
            kc_result r;
            CU_ASSERT_EQUAL(run_check(&cfg, &k, &x, 1, y, g, 0, 0, &r), 0);
            CU_ASSERT_PTR_NOT_NULL(strstr(r.schedule, "rows in 4 chunks"));
            CU_ASSERT_EQUAL(r.hbm_read_bytes, nn_nbytes(y));
            CU_ASSERT_EQUAL(r.hbm_write_bytes, nn_nbytes(y));
            nn_graph_free(g);
        }
}

TEST(concat_slice_and_pad_move_windows_exactly_along_every_axis)
{
    arch_config cfg = arch("tiny", NULL);
    const int64_t shape[3] = {3, 5, 7};
    for (int ax = 0; ax < 3; ax++)
        for (int t = 0; t < 5; t++)
            for (uint32_t cores = 1; cores <= 2; cores++) {
                nn_graph *g = nn_graph_new(1);
                int64_t s2[3] = {3, 5, 7};
                s2[ax] = 2;
                nn_tensor *a = nn_input(g, "a", all_types[t], 3, shape);
                nn_tensor *b = nn_input(g, "b", all_types[t], 3, s2);
                fill(a, 111 + ax), fill(b, 121 + ax);
                nn_tensor *in[2] = {a, b};
                nn_tensor *cat = nn_concat(g, 2, in, ax);
                kc_kernel k = {.op = NN_OP_CONCAT, .place = {0, 0, cores}, .n_attrs = 1,
                               .attrs = {KC_INT("axis", ax)}};
                CU_ASSERT_EQUAL(run_check(&cfg, &k, in, 2, cat, g, 0, 0, NULL), 0);
                nn_tensor *sl = nn_slice(g, a, ax, 1, shape[ax] - 1);
                kc_kernel ks = {.op = NN_OP_SLICE, .place = {0, 0, cores}, .n_attrs = 2,
                                .attrs = {KC_INT("axis", ax), KC_INT("start", 1)}};
                CU_ASSERT_EQUAL(run_check(&cfg, &ks, &a, 1, sl, g, 0, 0, NULL), 0);
                nn_tensor *pd = nn_pad(g, b, ax, 2, 3);
                kc_kernel kp = {.op = NN_OP_PAD, .place = {0, 0, cores}, .n_attrs = 2,
                                .attrs = {KC_INT("axis", ax), KC_INT("before", 2)}};
                kc_result r;
                CU_ASSERT_EQUAL(run_check(&cfg, &kp, &b, 1, pd, g, 0, 0, &r), 0);
                CU_ASSERT_EQUAL(r.hbm_write_bytes, nn_nbytes(pd)); /* every byte once */
                nn_graph_free(g);
            }
}

TEST(pad_writes_its_zeros_over_whatever_the_output_held)
{
    /* fp32 [4, 3] padded by 2 before and 1 after along dim 1 into [4, 6], the output first
     * loaded with 99s: the pads must come out 0 */
    arch_config cfg = arch("tiny", NULL);
    np_err err = {0};
    kc_prog *p;
    CU_ASSERT_EQUAL_FATAL(kc_prog_new(&cfg, &(kc_prog_opts){.cores = 2}, &p, &err), NP_OK);
    uint64_t ax, ay;
    CU_ASSERT_EQUAL(kc_prog_bss(p, "X", 4 * 3 * 4, &ax, &err), NP_OK);
    CU_ASSERT_EQUAL(kc_prog_bss(p, "Y", 4 * 6 * 4, &ay, &err), NP_OK);
    kc_kernel k = {.op = NN_OP_PAD, .n_in = 1, .n_out = 1, .place = {0, 0, 2}, .n_attrs = 2,
                   .attrs = {KC_INT("axis", 1), KC_INT("before", 2)}};
    kc_tensor_dense(&k.in[0], ax, NN_F32, 2, (int64_t[]){4, 3});
    kc_tensor_dense(&k.out[0], ay, NN_F32, 2, (int64_t[]){4, 6});
    CU_ASSERT_EQUAL_FATAL(kc_compile(p, &k, NULL, &err), NP_OK);
    CU_ASSERT_EQUAL_FATAL(kc_prog_finish(p, &err), NP_OK);
    isa_program *prog = kc_prog_take(p);
    kc_prog_free(p);
    float xin[12], yin[24], yout[24];
    for (int i = 0; i < 12; i++)
        xin[i] = (float)(i + 1);
    for (int i = 0; i < 24; i++)
        yin[i] = 99;
    core_hbm_io ins[2] = {{ax, xin, sizeof xin, 0}, {ay, yin, sizeof yin, 0}};
    core_hbm_io outs[1] = {{ay, yout, sizeof yout, 0}};
    core_sim_opts so = {.functional = true, .inputs = ins, .n_inputs = 2, .outputs = outs,
                        .n_outputs = 1};
    core_report *rep;
    CU_ASSERT_EQUAL_FATAL(core_sim_run_opts(&cfg, prog, &so, NULL, &rep, &err), NP_OK);
    core_report_free(rep);
    isa_program_free(prog);
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 6; c++)
            CU_ASSERT_EQUAL(yout[r * 6 + c], c < 2 || c == 5 ? 0.0f : xin[r * 3 + c - 2]);
}

TEST(pad_zeroes_windows_of_more_elements_than_a_vector_instructions_cols_field_holds)
{
    /* [3, 50, 7] padded by 500 before and 301 after along dim 2: 75,000 and 45,150 zeros,
     * beyond vpu.fill's 65,535 columns, from a scratchpad block that holds them all (tiny
     * with 2 MiB of scratchpad); on one core and on two, for a float and an integer type */
    arch_config cfg = arch("tiny", "core.sram_bytes=2097152");
    const nn_dtype types[2] = {NN_BF16, NN_I8};
    for (int t = 0; t < 2; t++)
        for (uint32_t cores = 1; cores <= 2; cores++) {
            nn_graph *g = nn_graph_new(1);
            nn_tensor *x = nn_input(g, "x", types[t], 3, (int64_t[]){3, 50, 7});
            fill(x, 131 + t);
            nn_tensor *pd = nn_pad(g, x, 2, 500, 301);
            kc_kernel k = {.op = NN_OP_PAD, .place = {0, 0, cores}, .n_attrs = 2,
                           .attrs = {KC_INT("axis", 2), KC_INT("before", 500)}};
            kc_result r;
            CU_ASSERT_EQUAL(run_check(&cfg, &k, &x, 1, pd, g, 0, 0, &r), 0);
            CU_ASSERT_EQUAL(r.hbm_write_bytes, nn_nbytes(pd));
            nn_graph_free(g);
        }
}

TEST(bad_indices_axes_and_windows_get_errors_naming_the_kernel)
{
    arch_config cfg = arch("tiny", NULL);
    np_err err = {0};
    krun_result r;
    /* float indices */
    kc_kernel k = {.op = NN_OP_EMBEDDING, .n_in = 2, .n_out = 1};
    kc_tensor_dense(&k.in[0], 0, NN_F32, 2, (int64_t[]){7, 5});
    kc_tensor_dense(&k.in[1], 0, NN_F32, 1, (int64_t[]){3});
    kc_tensor_dense(&k.out[0], 0, NN_F32, 2, (int64_t[]){3, 5});
    CU_ASSERT_EQUAL(krun_kernel(&cfg, &k, NULL, NULL, &r, &err), NP_ERR_INCONSISTENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "embedding: indices are f32: i32 or i8"));
    /* an index past the table, at run time: the gather faults naming it */
    nn_graph *g = nn_graph_new(1);
    nn_tensor *tab = nn_input(g, "t", NN_F32, 2, (int64_t[]){7, 5});
    nn_tensor *idx = nn_input(g, "i", NN_I32, 1, (int64_t[]){3});
    nn_tensor *got = nn_input(g, "y", NN_F32, 2, (int64_t[]){3, 5});
    fill(tab, 1);
    CU_ASSERT_FATAL(nn_tensor_fill(idx, 9));
    kc_tensor_dense(&k.in[1], 0, NN_I32, 1, (int64_t[]){3});
    krun_io io = {{tab, idx}, {0}, {got}};
    CU_ASSERT_EQUAL(krun_kernel(&cfg, &k, &io, &(krun_opts){.functional = true}, &r, &err),
                    NP_ERR_SIM_FAULT);
    CU_ASSERT_PTR_NOT_NULL(
        strstr(err.msg, "dma.gather: index 9 (number 0) is outside the table's rows 0..6"));
    nn_graph_free(g);
    /* a permutation that is not one; a slice past the end; a concat that does not add up */
    kc_kernel p = {.op = NN_OP_PERMUTE, .n_in = 1, .n_out = 1, .n_attrs = 1,
                   .attrs = {KC_INT("axes", 11)}};
    kc_tensor_dense(&p.in[0], 0, NN_F32, 2, (int64_t[]){3, 4});
    kc_tensor_dense(&p.out[0], 0, NN_F32, 2, (int64_t[]){4, 3});
    CU_ASSERT_EQUAL(krun_kernel(&cfg, &p, NULL, NULL, &r, &err), NP_ERR_RANGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "permute: axes=11 is not a permutation of 0..1"));
    kc_kernel s = {.op = NN_OP_SLICE, .n_in = 1, .n_out = 1, .n_attrs = 2,
                   .attrs = {KC_INT("axis", 1), KC_INT("start", 2)}};
    kc_tensor_dense(&s.in[0], 0, NN_F32, 2, (int64_t[]){3, 4});
    kc_tensor_dense(&s.out[0], 0, NN_F32, 2, (int64_t[]){3, 3});
    CU_ASSERT_EQUAL(krun_kernel(&cfg, &s, NULL, NULL, &r, &err), NP_ERR_INCONSISTENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "slice: out must be x's window [2, 5) along axis 1"));
    kc_kernel c = {.op = NN_OP_CONCAT, .n_in = 2, .n_out = 1};
    kc_tensor_dense(&c.in[0], 0, NN_F32, 2, (int64_t[]){3, 4});
    kc_tensor_dense(&c.in[1], 0, NN_F32, 2, (int64_t[]){2, 4});
    kc_tensor_dense(&c.out[0], 0, NN_F32, 2, (int64_t[]){6, 4});
    CU_ASSERT_EQUAL(krun_kernel(&cfg, &c, NULL, NULL, &r, &err), NP_ERR_INCONSISTENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "concat: the inputs' dim 0 adds up to 5, out has 6"));
}

/* ---- `npusim kernel --op` -------------------------------------------------------------------- */

TEST(every_row_and_movement_kernels_op_spec_builds_a_kernel_that_passes_the_seeded_check)
{
    /* the --op builders and index bounds of the table rows, checked as npusim kernel
     * --functional checks them (krun_kernel_check), bf16 on tiny's two cores */
    static const char *const specs[] = {
        "softmax shape=5x37", "log_softmax shape=2x3x19", "layernorm shape=7x33",
        "layernorm shape=7x33 affine=0", "rmsnorm shape=7x33 affine=1", "layernorm_grad shape=9x21",
        "rmsnorm_grad shape=9x21", "rope shape=2x3x5x10", "cross_entropy shape=9x13",
        "cross_entropy_grad shape=9x13 labels=i8", "embedding shape=3x5 vocab=11 dim=6",
        "embedding_grad shape=13 vocab=7 dim=5 index=i8", "embedding shape=4x9 vocab=7 dim=6 "
        "shard=1", "embedding_grad shape=29 vocab=9 dim=5 shard=1", "permute shape=3x4x5 axes=210",
        "permute shape=2x3x4x5 axes=0213", "concat shape=3x4 n=3 axis=1",
        "slice shape=5x6 axis=1 start=2 end=5", "pad shape=5x6 axis=0 before=1 after=2",
        "batchnorm shape=4x3x5x5", "batchnorm_grad shape=4x3x5x5", "batchnorm_infer shape=4x3x2x7",
    };
    arch_config cfg = arch("tiny", NULL);
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        np_err err = {0};
        kc_spec s;
        CU_ASSERT_EQUAL_FATAL(kc_spec_parse(specs[i], &s, &err), NP_OK);
        kc_prog *p;
        CU_ASSERT_EQUAL_FATAL(kc_prog_new(&cfg, &(kc_prog_opts){.cores = 1}, &p, &err), NP_OK);
        kc_kernel k;
        memset(&k, 0, sizeof k);
        np_status st = kc_spec_kernel(p, &s, &k, &err);
        kc_prog_free(p);
        if (st != NP_OK)
            fprintf(stderr, "%s: %s\n", specs[i], err.msg);
        CU_ASSERT_EQUAL_FATAL(st, NP_OK);
        k.place = (kc_place){0, 0, 2};
        krun_result r;
        krun_check c;
        st = krun_kernel_check(&cfg, &k, 7 + i, NULL, &r, &c, &err);
        if (st != NP_OK || c.bad)
            fprintf(stderr, "%s: %s (%lld of %lld bad)\n", specs[i], st ? err.msg : "",
                    (long long)c.bad, (long long)c.n);
        CU_ASSERT_EQUAL(st, NP_OK);
        CU_ASSERT(c.n > 0);
        CU_ASSERT_EQUAL(c.bad, 0);
        if (st == NP_OK)
            krun_result_free(&r);
    }
}
