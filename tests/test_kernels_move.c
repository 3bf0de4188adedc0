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
                in[0] = nn_input(g, "table", float_types[t], 2, (int64_t[]){cases[c].V, cases[c].D});
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
                double rtol = float_types[t] == NN_BF16 ? 0x1p-7 : float_types[t] == NN_F16 ? 0x1p-10 : 0x1p-20;
                CU_ASSERT_EQUAL(run_check(&cfg, &k, in, 2, y, g, exact ? 0 : rtol,
                                          exact ? 0 : rtol / 4, NULL), 0);
                nn_graph_free(g);
            }
}
