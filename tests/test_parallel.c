/* test_parallel.c — the device mesh and its placement, the shape of plans (classes, compact
 * blocks, schedules), memory against the ZeRO paper's (2 + 2 + K)Psi and Korthikanti et
 * al.'s sbh(34 + 5as/h) accounting, communication against Megatron's counts and ZeRO's
 * volumes, the reference collectives and their backward rules, and every rule a strategy can
 * break with its exact message. Everything here is shapes only (GPT-3 175B included). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist.h"
#include "harness.h"
#include "plan.h"
#include "rng.h"

static const nn_optim adam = {.kind = NN_OPTIM_ADAM, .lr = 1e-4, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8};

static nn_strategy strat(int dp, int tp, int pp)
{
    nn_strategy s;
    nn_strategy_default(&s);
    s.dp = dp;
    s.tp = tp;
    s.pp = pp;
    return s;
}

/* Builds model `name` under s (batch, seq, dtype; dropout for the activation checks). */
static nn_plan *plan_of(const char *name, nn_strategy s, int64_t batch, int64_t seq,
                        nn_dtype dt, double dropout, const arch_config *arch, np_err *e)
{
    nn_model_desc d;
    nn_plan *p = NULL;
    nn_model_opts o = {.batch = batch, .seq = seq, .compute = dt, .seed = 1, .dropout = dropout};
    if (nn_model_load(name, &d, e) != NP_OK || nn_plan_build(&d, &o, &s, &adam, arch, &p, e) != NP_OK)
        return NULL;
    return p;
}

/* ---- the mesh ---- */

TEST(ranks_are_numbered_tp_fastest_then_pp_then_dp)
{
    nn_mesh m;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(nn_mesh_place(&m, 3, 2, 4, "", NULL, &e), NP_OK);
    CU_ASSERT_EQUAL(m.n_ranks, 24);
    for (int r = 0; r < m.n_ranks; r++) {
        int c[NN_MESH_AXES];
        nn_mesh_coords(&m, r, c);
        CU_ASSERT_EQUAL(r, c[NN_MESH_TP] + 2 * (c[NN_MESH_PP] + 4 * c[NN_MESH_DP]));
        CU_ASSERT_EQUAL(nn_mesh_rank(&m, c), r);
        CU_ASSERT_EQUAL(m.chip[r], r); /* no architecture: chip = rank */
    }
    nn_mesh_free(&m);
}

TEST(tp_groups_sit_inside_an_island_of_the_a100_cluster_and_pipeline_neighbours_next_door)
{
    arch_config a;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(arch_resolve("a100-cluster", NULL, 0, &a, &e), NP_OK);
    nn_mesh m;
    CU_ASSERT_EQUAL_FATAL(nn_mesh_place(&m, 8, 8, 16, "", &a, &e), NP_OK);
    for (int r = 0; r < m.n_ranks; r++) {
        int c[NN_MESH_AXES];
        nn_mesh_coords(&m, r, c);
        c[NN_MESH_TP] = 0;
        CU_ASSERT_EQUAL(m.chip[r] / 8, m.chip[nn_mesh_rank(&m, c)] / 8); /* one NVLink island */
        if (c[NN_MESH_PP] + 1 < 16) {
            int n[NN_MESH_AXES];
            nn_mesh_coords(&m, r, n);
            n[NN_MESH_PP]++;
            CU_ASSERT_EQUAL(m.chip[nn_mesh_rank(&m, n)] / 8, m.chip[r] / 8 + 1); /* next island */
        }
    }
    CU_ASSERT_STRING_EQUAL(m.why, "tp groups inside islands of 8 chips (island links), pp and dp "
                                  "across islands when they do not fit one");
    nn_mesh_free(&m);
}

TEST(on_a_torus_tp_runs_along_x_and_pipeline_neighbours_along_y)
{
    arch_config a;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tpu-pod", NULL, 0, &a, &e), NP_OK); /* 16 x 16 x 16 */
    nn_mesh m;
    CU_ASSERT_EQUAL_FATAL(nn_mesh_place(&m, 4, 8, 4, "", &a, &e), NP_OK);
    bool used[4096] = {false};
    for (int r = 0; r < m.n_ranks; r++) {
        int c[NN_MESH_AXES];
        nn_mesh_coords(&m, r, c);
        int chip = m.chip[r], x = chip % 16, y = chip / 16 % 16;
        CU_ASSERT_EQUAL(x % 8, c[NN_MESH_TP]);  /* a tp group is 8 neighbours along x */
        CU_ASSERT_EQUAL(y % 4, c[NN_MESH_PP]);  /* the next stage is one hop along y */
        CU_ASSERT_FALSE(used[chip]);
        used[chip] = true;
    }
    CU_ASSERT_PTR_NOT_NULL(strstr(m.why, "tp along torus x"));
    nn_mesh_free(&m);
}

TEST(an_explicit_placement_order_is_a_mixed_radix_map_and_a_bad_one_is_an_error)
{
    nn_mesh m;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(nn_mesh_place(&m, 2, 2, 3, "pp,tp,dp", NULL, &e), NP_OK);
    for (int r = 0; r < m.n_ranks; r++) {
        int c[NN_MESH_AXES];
        nn_mesh_coords(&m, r, c);
        CU_ASSERT_EQUAL(m.chip[r], c[NN_MESH_PP] + 3 * (c[NN_MESH_TP] + 2 * c[NN_MESH_DP]));
    }
    nn_mesh_free(&m);
    CU_ASSERT_EQUAL(nn_mesh_place(&m, 2, 2, 3, "tp,pp", NULL, &e), NP_ERR_USAGE);
    CU_ASSERT_STRING_EQUAL(e.msg, "--placement: expected the axes tp, pp and dp in some order, "
                                  "fastest first (e.g. tp,pp,dp), got 'tp,pp'");
}

/* ---- the shape of plans ---- */

TEST(gpt3_175b_on_1024_ranks_is_16_stage_classes_of_blocks_that_do_not_grow_with_micro_batches)
{
    np_err e = {0};
    nn_strategy s = strat(8, 8, 16);
    s.microbatch = 1;
    nn_plan *p192 = plan_of("gpt3-175b", s, 1536, 0, NN_BF16, 0, NULL, &e);
    nn_plan *p16 = plan_of("gpt3-175b", s, 128, 0, NN_BF16, 0, NULL, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p192);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p16);
    CU_ASSERT_EQUAL(p192->mesh.n_ranks, 1024);
    CU_ASSERT_EQUAL(p192->n_classes, 16);
    CU_ASSERT_EQUAL(p192->n_micro, 192);
    for (int c = 0; c < 16; c++) {
        const nn_plan_class *a = &p192->classes[c], *b = &p16->classes[c];
        CU_ASSERT_EQUAL(a->n_sched, 2 * 192 + 2);
        CU_ASSERT_EQUAL(a->n_blocks, 4);
        for (int k = 0; k < a->n_blocks; k++)
            CU_ASSERT_EQUAL(a->blocks[k].n_entries, b->blocks[k].n_entries);
        CU_ASSERT_EQUAL(a->layer_first, 6 * c); /* 96 layers, 6 per stage */
        CU_ASSERT_EQUAL(a->layer_last, 6 * c + 5);
        /* iterating a rank's step visits each micro-batch block 192 times */
        nn_plan_iter it;
        nn_plan_iter_begin(&it, p192, a);
        long n = 0, expect = 0;
        while (nn_plan_iter_next(&it, NULL, NULL))
            n++;
        for (int k = 0; k < a->n_blocks; k++)
            for (int q = 0; q < a->blocks[k].n_entries; q++) {
                const nn_plan_entry *en = &a->blocks[k].entries[q];
                bool micro = a->blocks[k].kind == NN_BLOCK_FORWARD || a->blocks[k].kind == NN_BLOCK_BACKWARD;
                expect += !micro || en->when == NN_PLAN_LAST_MB ? 1 : 192;
            }
        CU_ASSERT_EQUAL(n, expect);
    }
    /* every rank of a class runs it; groups are the mesh's */
    int ranks[16];
    CU_ASSERT_EQUAL(nn_plan_rank_class(p192, 8 * 5 + 3), 5);
    CU_ASSERT_EQUAL(nn_plan_axis_group(p192, 8 * 5 + 3, NN_MESH_TP, ranks, 16), 8);
    CU_ASSERT_EQUAL(ranks[0], 40);
    CU_ASSERT_EQUAL(ranks[7], 47);
    CU_ASSERT_EQUAL(nn_plan_axis_group(p192, 43, NN_MESH_DP, ranks, 16), 8);
    CU_ASSERT_EQUAL(ranks[1], 43 + 128);
    nn_plan_free(p192);
    nn_plan_free(p16);
}

/* (block kind, micro-batch) sequence of stage s without the step blocks, as "F0 B0 ...". */
static void sched_text(const nn_plan *p, int s, char *buf, size_t n)
{
    const nn_plan_class *c = &p->classes[s];
    size_t k = 0;
    buf[0] = '\0';
    for (int i = 1; i + 1 < c->n_sched && k < n; i++) {
        const nn_plan_block *b = &c->blocks[c->sched[i].block];
        k += (size_t)snprintf(buf + k, n - k, "%s%c%d", k ? " " : "",
                              b->kind == NN_BLOCK_FORWARD ? 'F' : 'B', c->sched[i].mb);
        if (p->s.schedule == NN_PP_INTERLEAVED && k < n)
            k += (size_t)snprintf(buf + k, n - k, "c%d", b->chunk / p->s.pp);
    }
}

TEST(gpipe_1f1b_and_interleaved_schedules_follow_megatron)
{
    np_err e = {0};
    char buf[512];
    nn_strategy s = strat(1, 1, 2);
    s.microbatch = 1;
    s.schedule = NN_PP_GPIPE;
    nn_plan *p = plan_of("gpt-tiny", s, 4, 0, NN_F32, 0, NULL, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    sched_text(p, 0, buf, sizeof buf);
    CU_ASSERT_STRING_EQUAL(buf, "F0 F1 F2 F3 B0 B1 B2 B3");
    nn_plan_free(p);
    /* 1F1B (PipeDream-flush): stage s warms up with p - s - 1 forwards */
    s.schedule = NN_PP_1F1B;
    p = plan_of("gpt-tiny", s, 4, 0, NN_F32, 0, NULL, &e);
    sched_text(p, 0, buf, sizeof buf);
    CU_ASSERT_STRING_EQUAL(buf, "F0 F1 B0 F2 B1 F3 B2 B3");
    sched_text(p, 1, buf, sizeof buf);
    CU_ASSERT_STRING_EQUAL(buf, "F0 B0 F1 B1 F2 B2 F3 B3");
    nn_plan_free(p);
    /* interleaved, p = 2, v = 2, m = 4, hand-derived from Megatron's
     * forward_backward_pipelining_with_interleaving: chunk of forward unit k is (k / p) mod v,
     * of backward unit k v - 1 - (k / p) mod v, micro-batch (k / pv) p + k mod p; stage s
     * warms up with (p - s - 1) 2 + (v - 1) p units */
    s.schedule = NN_PP_INTERLEAVED;
    s.virtual_stages = 2;
    p = plan_of("gpt-tiny", s, 4, 0, NN_F32, 0, NULL, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    sched_text(p, 0, buf, sizeof buf);
    CU_ASSERT_STRING_EQUAL(buf, "F0c0 F1c0 F0c1 F1c1 F2c0 B0c1 F3c0 B1c1 F2c1 B0c0 F3c1 B1c0 "
                                "B2c1 B3c1 B2c0 B3c0");
    sched_text(p, 1, buf, sizeof buf);
    CU_ASSERT_STRING_EQUAL(buf, "F0c0 F1c0 F0c1 B0c1 F1c1 B1c1 F2c0 B0c0 F3c0 B1c0 F2c1 B2c1 "
                                "F3c1 B3c1 B2c0 B3c0");
    /* the bubble: (p - 1) / (v m + p - 1) */
    CU_ASSERT_DOUBLE_EQUAL(nn_plan_bubble(p), 1.0 / 9.0, 1e-12);
    nn_plan_free(p);
}

/* Stage s's issue order as tokens: a block instance's compute ("F0", "B1c0": kind, micro-batch,
 * chunk when interleaved), a blocking p2p call's sends and receives in braces ("{sF0 rB0}": the
 * block instance each belongs to), "g" for a pipeline gather, "E" for the step's end, and "|"
 * where the host synchronizes. */
static void issue_text(const nn_plan *p, int s, char *buf, size_t n)
{
    const nn_plan_class *c = &p->classes[s];
    size_t k = 0;
    int call = 0, last_b = -1, last_mb = -2;
    buf[0] = '\0';
    nn_plan_iter it;
    nn_plan_iter_begin(&it, p, c);
    const nn_plan_entry *e;
    const nn_plan_block *b;
    int mb;
    while ((e = nn_plan_iter_next(&it, &b, &mb)) && k < n) {
        bool p2p = e->kind == NN_PLAN_SEND || e->kind == NN_PLAN_RECV;
        if (call && (!p2p || it.call != call)) {
            k += (size_t)snprintf(buf + k, n - k, "}");
            call = 0;
        }
        if (it.sync && k < n)
            k += (size_t)snprintf(buf + k, n - k, " |");
        if (b->kind == NN_BLOCK_STEP_BEGIN)
            continue;
        char what[16] = "E";
        if (b->kind != NN_BLOCK_STEP_END)
            snprintf(what, sizeof what, "%c%d", b->kind == NN_BLOCK_FORWARD ? 'F' : 'B', mb);
        if (p->s.schedule == NN_PP_INTERLEAVED && b->kind != NN_BLOCK_STEP_END)
            snprintf(what + strlen(what), sizeof what - strlen(what), "c%d", b->chunk / p->s.pp);
        if (p2p && k < n) {
            k += (size_t)snprintf(buf + k, n - k, "%s%c%s", call ? " " : " {",
                                  e->kind == NN_PLAN_SEND ? 's' : 'r', what);
            call = it.call;
            last_b = -1;
        } else if (e->part == NN_PART_GATHER && k < n) {
            k += (size_t)snprintf(buf + k, n - k, " g");
        } else if ((it.block != last_b || mb != last_mb) && k < n) {
            k += (size_t)snprintf(buf + k, n - k, " %s", what);
            last_b = it.block;
            last_mb = mb;
        }
    }
    if (call && k < n)
        snprintf(buf + k, n - k, "}");
}

TEST(blocking_p2p_makes_megatrons_calls_and_the_host_synchronizes_after_each)
{
    /* hand-derived from Megatron-LM 2021's schedules.py and p2p_communication.py (the call
     * each step of forward_backward_pipelining_without_interleaving and _with_interleaving
     * makes, none on the first stage's recv_forward and send_backward and the last stage's
     * send_forward and recv_backward; every interleaved iteration calls _communicate, even
     * with nothing to move) */
    np_err e = {0};
    char buf[1024];
    nn_strategy s = strat(1, 1, 2);
    s.microbatch = 1;
    s.p2p_blocking = true;
    nn_plan *p = plan_of("gpt-tiny", s, 2, 0, NN_F32, 0, NULL, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    /* 1F1B, p = 2, m = 2: stage 0 send_forward | send_forward_recv_backward | recv_backward */
    issue_text(p, 0, buf, sizeof buf);
    CU_ASSERT_STRING_EQUAL(buf, " F0 {sF0} | F1 {sF1 rB0} | B0 {rB1} | B1 E");
    /* stage 1: recv_forward | send_backward_recv_forward | send_backward */
    issue_text(p, 1, buf, sizeof buf);
    CU_ASSERT_STRING_EQUAL(buf, " {rF0} | F0 B0 {sB0 rF1} | F1 B1 {sB1} | E");
    nn_plan_free(p);
    /* with the timers' synchronizations too: before each phase and each call, and in the
     * step's end before the tied embedding's all-reduce and before the optimizer */
    s.host_sync = true;
    p = plan_of("gpt-tiny", s, 2, 0, NN_F32, 0, NULL, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    issue_text(p, 0, buf, sizeof buf);
    CU_ASSERT_STRING_EQUAL(buf, " | F0 | {sF0} | F1 | {sF1 rB0} | B0 | {rB1} | B1 | E |");
    nn_plan_free(p);
    /* interleaved, p = 2, v = 2, m = 4 */
    s.host_sync = false;
    s.schedule = NN_PP_INTERLEAVED;
    s.virtual_stages = 2;
    p = plan_of("gpt-tiny", s, 4, 0, NN_F32, 0, NULL, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    issue_text(p, 0, buf, sizeof buf);
    CU_ASSERT_STRING_EQUAL(buf, " F0c0 {sF0c0} | F1c0 {sF1c0 rF0c1} | F0c1 {sF0c1 rF1c1} | F1c1 "
                                "{sF1c1 rB0c1} | F2c0 B0c1 {sF2c0 sB0c1 rB1c1} | F3c0 B1c1 "
                                "{sF3c0 sB1c1 rF2c1 rB0c0} | F2c1 B0c0 {sF2c1 rF3c1 rB1c0} | F3c1 "
                                "B1c0 {sF3c1 rB2c1} | B2c1 {sB2c1 rB3c1} | B3c1 {sB3c1 rB2c0} | B2c0 "
                                "{rB3c0} | B3c0 | E");
    issue_text(p, 1, buf, sizeof buf);
    CU_ASSERT_STRING_EQUAL(buf, " {rF0c0} | F0c0 {sF0c0 rF1c0} | F1c0 {sF1c0 rF0c1} | F0c1 B0c1 "
                                "{sB0c1 rF1c1} | F1c1 B1c1 {sB1c1 rF2c0 rB0c0} | F2c0 B0c0 {sF2c0 "
                                "sB0c0 rF3c0 rB1c0} | F3c0 B1c0 {sF3c0 sB1c0 rF2c1} | F2c1 B2c1 "
                                "{sB2c1 rF3c1} | F3c1 B3c1 {sB3c1 rB2c0} | B2c0 {sB2c0 rB3c0} | B3c0 "
                                "{sB3c0} | E");
    nn_plan_free(p);
    /* m = p: every unit of stage 0 is a warm-up one; its last send and its first receive of a
     * gradient are calls of their own (all_warmup_microbatches) */
    p = plan_of("gpt-tiny", s, 2, 0, NN_F32, 0, NULL, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    issue_text(p, 0, buf, sizeof buf);
    CU_ASSERT_STRING_EQUAL(buf, " F0c0 {sF0c0} | F1c0 {sF1c0 rF0c1} | F0c1 {sF0c1 rF1c1} | F1c1 "
                                "{sF1c1} | {rB0c1} | B0c1 {sB0c1 rB1c1} | B1c1 {sB1c1 rB0c0} | "
                                "B0c0 {rB1c0} | B1c0 | E");
    nn_plan_free(p);
    /* tp 2: each receive's scatter/gather all-gather follows its call, after the sync */
    s = strat(1, 2, 2);
    s.microbatch = 1;
    s.p2p_blocking = true;
    p = plan_of("gpt-tiny", s, 2, 0, NN_F32, 0, NULL, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    issue_text(p, 1, buf, sizeof buf);
    CU_ASSERT_STRING_EQUAL(buf, " {rF0} | g F0 B0 {sB0 rF1} | g F1 B1 {sB1} | E");
    nn_plan_free(p);
}

TEST(stages_are_balanced_by_flops_or_given_per_chunk)
{
    np_err e = {0};
    nn_strategy s = strat(1, 1, 2);
    /* GPT-2 small: the head (2 V D per token) is about 4.5 layers of FLOPs, so the balanced
     * cut gives the first stage more layers than the second */
    nn_plan *p = plan_of("gpt2-small", s, 1, 128, NN_BF16, 0, NULL, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT(p->chunk_layer_last[0] - p->chunk_layer_first[0] + 1 > 6);
    CU_ASSERT_EQUAL(p->chunk_layer_last[1], 11);
    nn_plan_free(p);
    s.n_stage_layers = 2;
    s.stage_layers[0] = 6;
    s.stage_layers[1] = 6;
    p = plan_of("gpt2-small", s, 1, 128, NN_BF16, 0, NULL, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(p->chunk_layer_first[0], 0);
    CU_ASSERT_EQUAL(p->chunk_layer_last[0], 5);
    CU_ASSERT_EQUAL(p->chunk_layer_first[1], 6);
    nn_plan_free(p);
}

/* ---- memory ---- */

/* The ZeRO paper (Rajbhandari et al. 2020, section 3.1 and figure 1): mixed-precision Adam
 * holds 2 Psi bytes of fp16 parameters, 2 Psi of fp16 gradients and K Psi = 12 Psi of fp32
 * masters, momentum and variance; stage 1 divides the K Psi by Nd, stage 2 the gradients too,
 * stage 3 the parameters too. Psi: the published counts (test_models.c checks the zoo). */
static void check_zero(const char *model, double psi, int nd)
{
    for (int z = 0; z <= 3; z++) {
        np_err e = {0};
        nn_strategy s = strat(nd, 1, 1);
        s.zero = z;
        nn_plan *p = plan_of(model, s, nd, 64, NN_BF16, 0, NULL, &e);
        CU_ASSERT_PTR_NOT_NULL_FATAL(p);
        nn_plan_mem m;
        CU_ASSERT_EQUAL(nn_plan_class_memory(p, &p->classes[0], &m, &e), NP_OK);
        double div_p = z >= 3 ? nd : 1, div_g = z >= 2 ? nd : 1, div_o = z >= 1 ? nd : 1;
        CU_ASSERT_EQUAL((double)m.params_bytes, 2 * psi / div_p);
        CU_ASSERT_EQUAL((double)m.grads_bytes, 2 * psi / div_g);
        CU_ASSERT_EQUAL((double)m.optstate_bytes, 12 * psi / div_o);
        fprintf(stderr, "%s ZeRO-%d over %d: %.0f + %.0f + %.0f bytes\n", model, z, nd,
                (double)m.params_bytes, (double)m.grads_bytes, (double)m.optstate_bytes);
        nn_plan_free(p);
    }
}

TEST(parameters_gradients_and_optimizer_state_follow_zeros_2_2_k_psi_for_gpt2_and_gpt3)
{
    check_zero("gpt2-small", 124439808.0, 64);
    check_zero("gpt3-175b", 174604259328.0, 64);
}

/* Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large Transformer
 * Models"), table 2, activation bytes per layer with 16-bit values and 1-byte dropout masks:
 *   no parallelism                 sbh (34 + 5 a s / h)
 *   tensor parallel t              sbh (10 + 24/t + 5 a s / (h t))
 *   tensor + sequence parallel     sbh (34/t + 5 a s / (h t))
 *   + selective recomputation      sbh (34/t)         (tensor parallel alone: sbh (10 + 24/t))
 * Counted terms (docs/parallel.md): the inputs of both layer norms (2 sbh each) and their
 * outputs (2 sbh each; with sp kept split and all-gathered again for the backward), q, k, v
 * (6 sbh), the attention output (2 sbh), the GELU's input and output (16 sbh), the two
 * residual dropout masks (sbh each), the softmax output (2 as^2 b), the attention dropout
 * mask (as^2 b) and its output (2 as^2 b). */
static void check_korthikanti(const char *model, int t, bool sp, nn_recompute rc)
{
    np_err e = {0};
    nn_strategy s = strat(1, t, 1);
    s.sp = sp;
    s.recompute = rc;
    nn_plan *p = plan_of(model, s, 1, 0, NN_BF16, 0.1, NULL, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    nn_model_desc d;
    nn_model_load(model, &d, &e);
    double S = (double)p->seq, h = (double)nn_model_int(&d, "d_model", 1);
    double a = (double)nn_model_int(&d, "heads", 1), sbh = S * h, tt = t;
    double want = rc == NN_RECOMPUTE_SELECTIVE ? sbh * (sp ? 34 / tt : 10 + 24 / tt)
                  : sp                         ? sbh * (34 / tt + 5 * a * S / (h * tt))
                  : t > 1                      ? sbh * (10 + 24 / tt + 5 * a * S / (h * tt))
                                               : sbh * (34 + 5 * a * S / h);
    for (int layer = 1; layer < 3; layer++) {
        double got = (double)nn_plan_layer_saved_bytes(p, &p->classes[0], layer);
        CU_ASSERT_DOUBLE_EQUAL(got, want, 0.5);
    }
    nn_plan_free(p);
}

TEST(activations_per_layer_equal_korthikantis_formulas_with_tp_sp_and_selective_recomputation)
{
    const char *models[] = {"gpt2-small", "gpt3-175b"};
    for (int i = 0; i < 2; i++) {
        int t = i == 0 ? 4 : 8;
        check_korthikanti(models[i], 1, false, NN_RECOMPUTE_NONE);
        check_korthikanti(models[i], t, false, NN_RECOMPUTE_NONE);
        check_korthikanti(models[i], t, true, NN_RECOMPUTE_NONE);
        check_korthikanti(models[i], t, true, NN_RECOMPUTE_SELECTIVE);
        check_korthikanti(models[i], t, false, NN_RECOMPUTE_SELECTIVE);
    }
}

TEST(full_recomputation_keeps_only_each_layers_input_and_1f1b_holds_p_minus_s_micro_batches)
{
    np_err e = {0};
    nn_strategy s = strat(1, 1, 1);
    s.recompute = NN_RECOMPUTE_FULL;
    nn_plan *p = plan_of("gpt2-small", s, 1, 256, NN_BF16, 0, NULL, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(nn_plan_layer_saved_bytes(p, &p->classes[0], 3), 2ull * 256 * 768);
    nn_plan_free(p);
    /* 1F1B: stage s holds min(p - s, m) micro-batches in flight; GPipe holds all m */
    s = strat(1, 1, 4);
    s.microbatch = 1;
    nn_plan *f = plan_of("gpt2-small", s, 8, 128, NN_BF16, 0, NULL, &e);
    s.schedule = NN_PP_GPIPE;
    nn_plan *g = plan_of("gpt2-small", s, 8, 128, NN_BF16, 0, NULL, &e);
    s.n_stage_layers = 0;
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    for (int st = 1; st < 3; st++) { /* middle stages: layers only */
        nn_plan_mem mf, mg;
        nn_plan_class_memory(f, &f->classes[st], &mf, &e);
        nn_plan_class_memory(g, &g->classes[st], &mg, &e);
        uint64_t one = 0;
        for (int l = f->classes[st].layer_first; l <= f->classes[st].layer_last; l++)
            one += nn_plan_layer_saved_bytes(f, &f->classes[st], l);
        CU_ASSERT_EQUAL(mf.activations_bytes, (uint64_t)(4 - st) * one);
        CU_ASSERT_EQUAL(mg.activations_bytes, 8 * one);
    }
    nn_plan_free(f);
    nn_plan_free(g);
}

/* ---- communication ---- */

/* Entries of class c in block kind bk of layer `layer` that run op (region r, or any when
 * r < 0): count and bytes. */
static int count(const nn_plan_class *c, nn_plan_block_kind bk, int layer, nn_op op, int r,
                 nn_comm_tag tag, uint64_t *bytes)
{
    int n = 0;
    if (bytes)
        *bytes = 0;
    for (int b = 0; b < c->n_blocks; b++) {
        if (c->blocks[b].kind != bk)
            continue;
        for (int k = 0; k < c->blocks[b].n_entries; k++) {
            const nn_plan_entry *e = &c->blocks[b].entries[k];
            if (e->kind != NN_PLAN_COLLECTIVE || e->nodes[0]->op != op || e->tag != tag ||
                (layer >= -1 && e->layer != layer) || (r >= 0 && (int)e->region != r))
                continue;
            n++;
            if (bytes)
                *bytes += e->bytes;
        }
    }
    return n;
}

TEST(tensor_parallelism_all_reduces_b_s_h_twice_forward_and_twice_backward_per_layer)
{
    np_err e = {0};
    nn_strategy s = strat(1, 4, 1);
    s.microbatch = 2;
    nn_plan *p = plan_of("gpt2-small", s, 4, 512, NN_BF16, 0, NULL, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    uint64_t bsh = 2ull * 512 * 768 * 2; /* b s h elements of bf16 */
    const nn_plan_class *c = &p->classes[0];
    for (int l = 0; l < 12; l++) {
        uint64_t b;
        CU_ASSERT_EQUAL(count(c, NN_BLOCK_FORWARD, l, NN_OP_ALL_REDUCE, -1, NN_COMM_TP, &b), 2);
        CU_ASSERT_EQUAL(b, 2 * bsh);
        CU_ASSERT_EQUAL(count(c, NN_BLOCK_BACKWARD, l, NN_OP_ALL_REDUCE, -1, NN_COMM_TP, &b), 2);
        CU_ASSERT_EQUAL(b, 2 * bsh);
        CU_ASSERT_EQUAL(count(c, NN_BLOCK_FORWARD, l, NN_OP_ALL_GATHER, -1, NN_COMM_SP, NULL), 0);
    }
    /* outside the layers: the embedding's all-reduce, the head's input gradient, and the
     * vocabulary-parallel loss's max, sum and target logit */
    CU_ASSERT_EQUAL(count(c, NN_BLOCK_FORWARD, -1, NN_OP_ALL_REDUCE, -1, NN_COMM_TP, NULL), 4);
    nn_plan_free(p);
    /* uniform recomputation runs each layer's forward again in the backward block, its two
     * row-parallel all-reduces too (Megatron-LM's checkpointed layer runs its forward again,
     * mpu/random.py CheckpointFunction.backward) */
    s.recompute = NN_RECOMPUTE_UNIFORM;
    CU_ASSERT_PTR_NOT_NULL_FATAL(p = plan_of("gpt2-small", s, 4, 512, NN_BF16, 0, NULL, &e));
    c = &p->classes[0];
    for (int l = 0; l < 12; l++) {
        uint64_t b;
        CU_ASSERT_EQUAL(count(c, NN_BLOCK_BACKWARD, l, NN_OP_ALL_REDUCE, NN_REGION_RECOMPUTE,
                              NN_COMM_TP, &b), 2);
        CU_ASSERT_EQUAL(b, 2 * bsh);
        CU_ASSERT_EQUAL(count(c, NN_BLOCK_BACKWARD, l, NN_OP_ALL_REDUCE, NN_REGION_BACKWARD,
                              NN_COMM_TP, NULL), 2);
    }
    nn_plan_free(p);
}

TEST(sequence_parallelism_turns_each_all_reduce_into_a_reduce_scatter_and_all_gather_of_equal_volume)
{
    np_err e = {0};
    nn_strategy s = strat(1, 4, 1);
    s.microbatch = 2;
    nn_plan *tp = plan_of("gpt2-small", s, 4, 512, NN_BF16, 0, NULL, &e);
    s.sp = true;
    nn_plan *sp = plan_of("gpt2-small", s, 4, 512, NN_BF16, 0, NULL, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(tp);
    CU_ASSERT_PTR_NOT_NULL_FATAL(sp);
    uint64_t bsh = 2ull * 512 * 768 * 2;
    double t = 4, ring = (t - 1) / t; /* bytes a rank sends: all-reduce 2 n (t-1)/t, the others n (t-1)/t */
    for (int l = 0; l < 12; l++)
        for (int bk = NN_BLOCK_FORWARD; bk <= NN_BLOCK_BACKWARD; bk++) {
            const nn_plan_class *c = &sp->classes[0];
            int r = bk == NN_BLOCK_FORWARD ? NN_REGION_FORWARD : NN_REGION_BACKWARD;
            uint64_t brs, bag, bar;
            CU_ASSERT_EQUAL(count(c, bk, l, NN_OP_ALL_REDUCE, -1, NN_COMM_TP, NULL), 0);
            CU_ASSERT_EQUAL(count(c, bk, l, NN_OP_REDUCE_SCATTER, r, NN_COMM_SP, &brs), 2);
            CU_ASSERT_EQUAL(count(c, bk, l, NN_OP_ALL_GATHER, r, NN_COMM_SP, &bag), 2);
            CU_ASSERT_EQUAL(brs, 2 * bsh);
            CU_ASSERT_EQUAL(bag, 2 * bsh);
            count(&tp->classes[0], bk, l, NN_OP_ALL_REDUCE, -1, NN_COMM_TP, &bar);
            CU_ASSERT_DOUBLE_EQUAL((brs + bag) * ring, 2 * bar * ring, 0.5);
            if (bk == NN_BLOCK_BACKWARD) /* Megatron gathers the split norm outputs again */
                CU_ASSERT_EQUAL(count(c, bk, l, NN_OP_ALL_GATHER, NN_REGION_RECOMPUTE, NN_COMM_SP, NULL), 2);
        }
    nn_plan_free(tp);
    nn_plan_free(sp);
}

/* Bytes one rank sends per step in its collectives of tag `tag` (ring algorithms). */
static double wire(const nn_plan *p, const nn_plan_class *c, nn_comm_tag tag)
{
    double v = 0;
    nn_plan_iter it;
    nn_plan_iter_begin(&it, p, c);
    const nn_plan_entry *e;
    while ((e = nn_plan_iter_next(&it, NULL, NULL))) {
        if (e->kind != NN_PLAN_COLLECTIVE || e->tag != tag)
            continue;
        double g = e->group_size, f = (g - 1) / g;
        v += (e->nodes[0]->op == NN_OP_ALL_REDUCE ? 2 : 1) * f * (double)e->bytes;
    }
    return v;
}

TEST(data_parallelism_all_reduces_every_gradient_once_per_step_and_zero3_moves_1_5x_its_volume)
{
    np_err e = {0};
    nn_strategy s = strat(4, 1, 1);
    s.microbatch = 1;
    nn_plan *dp = plan_of("gpt2-small", s, 16, 128, NN_BF16, 0, NULL, &e); /* 4 micro-batches */
    CU_ASSERT_PTR_NOT_NULL_FATAL(dp);
    const nn_plan_class *c = &dp->classes[0];
    bool *seen = calloc((size_t)nn_graph_max_id(c->g) + 1, sizeof *seen);
    uint64_t reduced = 0;
    int instances = 0;
    nn_plan_iter it;
    nn_plan_iter_begin(&it, dp, c);
    const nn_plan_entry *en;
    int mb;
    while ((en = nn_plan_iter_next(&it, NULL, &mb))) {
        if (en->kind != NN_PLAN_COLLECTIVE || en->tag != NN_COMM_DP)
            continue;
        CU_ASSERT_EQUAL(en->when, NN_PLAN_LAST_MB); /* during the last micro-batch's backward */
        CU_ASSERT_EQUAL(mb, dp->n_micro - 1);
        instances++;
        for (int q = 0; q < en->n_nodes; q++) {
            const nn_tensor *acc = en->nodes[q]->src[0]; /* grad_acc(fill(buffer), g) */
            const nn_tensor *buf = acc->src[0]->src[0];
            CU_ASSERT_EQUAL(acc->op, NN_OP_GRAD_ACC);
            CU_ASSERT_FALSE(seen[buf->id]);
            seen[buf->id] = true;
            reduced += en->nodes[q]->ip[NN_COMM_IP_SIZE] == 4 ? nn_nbytes(buf) : 0;
        }
    }
    nn_plan_mem m;
    nn_plan_class_memory(dp, c, &m, &e);
    CU_ASSERT_EQUAL(reduced, m.grads_bytes); /* every gradient, once */
    CU_ASSERT_EQUAL(reduced, 2ull * 124439808);
    /* 25 MiB buckets: each but the last holds at least 25 MiB */
    CU_ASSERT(instances > 1 && instances <= (int)(2.0 * 124439808 / (25 << 20)) + 1);
    const nn_plan_block *bwd = &c->blocks[2];
    int buckets = 0;
    for (int k = 0; k < bwd->n_entries; k++)
        if (bwd->entries[k].kind == NN_PLAN_COLLECTIVE && bwd->entries[k].tag == NN_COMM_DP &&
            ++buckets < instances)
            CU_ASSERT(bwd->entries[k].bytes >= 25u << 20);
    free(seen);
    nn_plan_free(dp);
    /* ZeRO-3: all-gather in the forward, again in the backward, reduce-scatter: 3 Psi
     * against all-reduce's 2 Psi (Rajbhandari et al., section 7) — less the parameters that
     * no backward op reads, which the plan does not gather again: the biases and norm betas
     * (11 D per layer, D for ln_f) and the position table (1024 D) of GPT-2 small */
    s.microbatch = 0;
    nn_plan *p0 = plan_of("gpt2-small", s, 4, 128, NN_BF16, 0, NULL, &e);
    s.zero = 3;
    nn_plan *p3 = plan_of("gpt2-small", s, 4, 128, NN_BF16, 0, NULL, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p3);
    double v0 = wire(p0, &p0->classes[0], NN_COMM_DP), v3 = wire(p3, &p3->classes[0], NN_COMM_ZERO);
    double psi = 124439808, unread = 12 * 11 * 768 + 768 + 1024 * 768;
    fprintf(stderr, "ZeRO-3 / DP volume %.6f\n", v3 / v0);
    CU_ASSERT_DOUBLE_EQUAL(v3 / v0, (3 * psi - unread) / (2 * psi), 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(v3 / v0, 1.5, 0.005);
    CU_ASSERT_EQUAL(wire(p3, &p3->classes[0], NN_COMM_DP), 0);
    nn_plan_free(p0);
    nn_plan_free(p3);
}

TEST(zero3_prefetch_gathers_the_next_layer_while_the_current_one_computes)
{
    np_err e = {0};
    nn_strategy s = strat(4, 1, 1);
    s.zero = 3;
    nn_plan *p = plan_of("gpt2-small", s, 4, 128, NN_BF16, 0, NULL, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    const nn_plan_block *fwd = &p->classes[0].blocks[1];
    int seen_layers = 0;
    for (int k = 0; k < fwd->n_entries; k++) {
        const nn_plan_entry *en = &fwd->entries[k];
        if (en->kind != NN_PLAN_COLLECTIVE || en->tag != NN_COMM_ZERO || en->layer < 2)
            continue;
        seen_layers++;
        /* one entry gathers all of a layer's parameters, before the previous layer's first op,
         * and waits only for the compute entry before it */
        CU_ASSERT_EQUAL(en->n_nodes, 12);
        int next = k + 1;
        while (fwd->entries[next].kind != NN_PLAN_COMPUTE || fwd->entries[next].flops == 0)
            next++;
        CU_ASSERT_EQUAL(fwd->entries[next].layer, en->layer - 1);
        CU_ASSERT_EQUAL(en->n_deps, 1);
        CU_ASSERT_EQUAL(en->deps[0].block, -1);
        CU_ASSERT(fwd->entries[en->deps[0].entry].layer <= en->layer - 2);
    }
    CU_ASSERT_EQUAL(seen_layers, 10);
    nn_plan_free(p);
}

TEST(tied_embeddings_on_two_stages_sum_their_gradients_over_the_first_and_last_stage)
{
    np_err e = {0};
    nn_strategy s = strat(2, 2, 4);
    nn_plan *p = plan_of("gpt2-small", s, 4, 64, NN_BF16, 0, NULL, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    int m0 = -1, m3 = -1;
    for (int st = 0; st < 4; st++) {
        const nn_plan_class *c = &p->classes[st];
        int n = count(c, NN_BLOCK_STEP_END, -2, NN_OP_ALL_REDUCE, -1, NN_COMM_PP, NULL);
        CU_ASSERT_EQUAL(n, st == 0 || st == 3 ? 1 : 0);
        const nn_plan_block *end = &c->blocks[c->n_blocks - 1];
        for (int k = 0; k < end->n_entries; k++)
            if (end->entries[k].tag == NN_COMM_PP && end->entries[k].kind == NN_PLAN_COLLECTIVE) {
                int ranks[4], chips[4];
                CU_ASSERT_EQUAL(nn_plan_group(p, 0, &end->entries[k], ranks, 4), 2);
                CU_ASSERT_EQUAL(ranks[0], 0);
                CU_ASSERT_EQUAL(ranks[1], 2 * 3); /* same tp and dp coordinate, stage 3 */
                CU_ASSERT_EQUAL(nn_plan_group_chips(p, 0, &end->entries[k], chips, 4), 2);
                CU_ASSERT_EQUAL(chips[1], p->mesh.chip[6]);
                *(st == 0 ? &m0 : &m3) = end->entries[k].match;
            }
    }
    CU_ASSERT_EQUAL(m0, m3); /* one collective across the two classes */
    nn_plan_free(p);
}

/* ---- the reference collectives and their backward rules ---- */

/* Runs communication node t over 2 ranks on in[2] (n floats each) into out[2]. */
static void run2(const nn_tensor *t, float *i0, float *i1, float *o0, float *o1)
{
    np_err e = {0};
    float *in[2] = {i0, i1}, *out[2] = {o0, o1};
    CU_ASSERT_EQUAL(nn_dist_collective(t, in, out, &e), NP_OK);
}

TEST(collectives_compute_what_they_are_named_over_two_ranks)
{
    nn_graph *g = nn_graph_new(1);
    nn_tensor *x = nn_input(g, "x", NN_F32, 2, (int64_t[]){2, 2});
    float a[4] = {1, 2, 3, 4}, b[4] = {10, 20, 30, 40}, o0[8], o1[8];
    run2(nn_all_reduce(g, x, NN_COMM_DP, 2, NN_REDUCE_SUM), a, b, o0, o1);
    CU_ASSERT(o0[0] == 11 && o0[3] == 44 && o1[2] == 33);
    run2(nn_all_reduce(g, x, NN_COMM_DP, 2, NN_REDUCE_MAX), a, b, o0, o1);
    CU_ASSERT(o0[0] == 10 && o1[3] == 40);
    run2(nn_reduce_scatter(g, x, NN_COMM_DP, 2, 1), a, b, o0, o1); /* columns */
    CU_ASSERT(o0[0] == 11 && o0[1] == 33 && o1[0] == 22 && o1[1] == 44);
    run2(nn_all_gather(g, x, NN_COMM_DP, 2, 0), a, b, o0, o1);
    CU_ASSERT(o0[0] == 1 && o0[4] == 10 && o1[7] == 40 && o1[3] == 4);
    run2(nn_broadcast(g, x, NN_COMM_DP, 2, 1), a, b, o0, o1);
    CU_ASSERT(o0[0] == 10 && o1[0] == 10);
    run2(nn_reduce(g, x, NN_COMM_DP, 2, 0), a, b, o0, o1);
    CU_ASSERT(o0[1] == 22 && o1[1] == 0);
    /* rows split, parts stacked along columns: rank j gets row j of every rank */
    run2(nn_all_to_all(g, x, NN_COMM_DP, 2, 0, 1), a, b, o0, o1);
    CU_ASSERT(o0[0] == 1 && o0[1] == 2 && o0[2] == 10 && o0[3] == 20);
    CU_ASSERT(o1[0] == 3 && o1[1] == 4 && o1[2] == 30 && o1[3] == 40);
    CU_ASSERT_EQUAL(nn_graph_status(g, NULL), NP_OK);
    nn_graph_free(g);
}

/* <u, v> summed over both ranks. */
static double dot2(const float *u0, const float *v0, const float *u1, const float *v1, int64_t n0,
                   int64_t n1)
{
    double s = 0;
    for (int64_t i = 0; i < n0; i++)
        s += (double)u0[i] * v0[i];
    for (int64_t i = 0; i < n1; i++)
        s += (double)u1[i] * v1[i];
    return s;
}

/* The backward rule of t (x -> t) is built by nn_backward_roots on a seed dy; returns the
 * node computing dx (or dy itself for an identity). */
static nn_tensor *grad_of(nn_graph *g, nn_tensor *x, nn_tensor *t, nn_tensor *dy)
{
    np_err e = {0};
    CU_ASSERT_EQUAL(nn_backward_roots(g, 1, &t, &dy, 0, NULL, &e), NP_OK);
    return x->grad;
}

TEST(backward_rules_of_the_collectives_are_their_adjoints_or_megatrons_f_and_g)
{
    /* Linear collectives whose gradient is the adjoint of the forward map over the group
     * (sum over ranks of <A x, dy> = sum of <x, A* dy>): reduce-scatter <-> all-gather,
     * broadcast <-> reduce, all-to-all <-> its transpose. Checked on random values. */
    rng r;
    rng_seed(&r, 9);
    nn_op ops[] = {NN_OP_REDUCE_SCATTER, NN_OP_ALL_GATHER, NN_OP_BROADCAST, NN_OP_REDUCE, NN_OP_ALL_TO_ALL};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        nn_graph *g = nn_graph_new(1);
        nn_tensor *x = nn_param(g, "x", NN_F32, 2, (int64_t[]){4, 6});
        nn_tensor *t = ops[i] == NN_OP_REDUCE_SCATTER ? nn_reduce_scatter(g, x, NN_COMM_TP, 2, 0)
                       : ops[i] == NN_OP_ALL_GATHER   ? nn_all_gather(g, x, NN_COMM_TP, 2, 1)
                       : ops[i] == NN_OP_BROADCAST    ? nn_broadcast(g, x, NN_COMM_TP, 2, 1)
                       : ops[i] == NN_OP_REDUCE       ? nn_reduce(g, x, NN_COMM_TP, 2, 0)
                                                      : nn_all_to_all(g, x, NN_COMM_TP, 2, 0, 1);
        nn_tensor *dy = nn_input(g, "dy", NN_F32, t->ndim, t->ne);
        nn_tensor *dx = grad_of(g, x, t, dy);
        CU_ASSERT_PTR_NOT_NULL_FATAL(dx);
        CU_ASSERT(nn_op_flags(dx->op) & NN_OPF_COMM);
        int64_t nx = nn_numel(x), ny = nn_numel(t);
        float x0[24], x1[24], y0[48], y1[48], d0[48], d1[48], g0[24], g1[24];
        for (int64_t k = 0; k < nx; k++)
            x0[k] = (float)(2 * rng_unit(&r) - 1), x1[k] = (float)(2 * rng_unit(&r) - 1);
        for (int64_t k = 0; k < ny; k++)
            d0[k] = (float)(2 * rng_unit(&r) - 1), d1[k] = (float)(2 * rng_unit(&r) - 1);
        run2(t, x0, x1, y0, y1);
        run2(dx, d0, d1, g0, g1);
        double lhs = dot2(y0, d0, y1, d1, ny, ny), rhs = dot2(x0, g0, x1, g1, nx, nx);
        CU_ASSERT_DOUBLE_EQUAL(lhs, rhs, 1e-5 * (fabs(lhs) + 1));
        fprintf(stderr, "%s: <Ax,dy> %.6f = <x,A*dy> %.6f (backward %s)\n", nn_op_name(ops[i]), lhs,
                rhs, nn_op_name(dx->op));
        nn_graph_free(g);
    }
    /* Megatron's pair, whose inputs are replicated or partial by construction: g =
     * all_reduce over partial sums passes the (replicated) output gradient to every part; f =
     * group_copy of a replicated value sums the parts' gradients; shard_slice of a replicated
     * value gathers its parts' gradients */
    nn_graph *g = nn_graph_new(1);
    nn_tensor *x = nn_param(g, "x", NN_F32, 1, (int64_t[]){4});
    nn_tensor *ar = nn_all_reduce(g, x, NN_COMM_TP, 2, NN_REDUCE_SUM);
    nn_tensor *dy = nn_input(g, "dy", NN_F32, 1, (int64_t[]){4});
    CU_ASSERT_PTR_EQUAL(grad_of(g, x, ar, dy), dy); /* identity */
    nn_graph_free(g);
    g = nn_graph_new(1);
    x = nn_param(g, "x", NN_F32, 1, (int64_t[]){4});
    nn_tensor *f = nn_group_copy(g, x, NN_COMM_TP, 2);
    dy = nn_input(g, "dy", NN_F32, 1, (int64_t[]){4});
    nn_tensor *df = grad_of(g, x, f, dy);
    CU_ASSERT_EQUAL(df->op, NN_OP_ALL_REDUCE);
    float p0[4] = {1, 2, 3, 4}, p1[4] = {5, 6, 7, 8}, s0[4], s1[4];
    run2(df, p0, p1, s0, s1);
    CU_ASSERT(s0[0] == 6 && s1[3] == 12); /* d(x) = d(part 0) + d(part 1) on both */
    nn_graph_free(g);
    g = nn_graph_new(1);
    x = nn_param(g, "x", NN_F32, 1, (int64_t[]){4});
    nn_tensor *off = nn_const(g, "off", NN_I32, 0, NULL);
    nn_tensor *sl = nn_shard_slice(g, x, off, NN_COMM_SP, 2, 0);
    dy = nn_input(g, "dy", NN_F32, 1, (int64_t[]){2});
    nn_tensor *ds = grad_of(g, x, sl, dy);
    CU_ASSERT_EQUAL(ds->op, NN_OP_ALL_GATHER);
    float q0[2] = {1, 2}, q1[2] = {3, 4}, r0[4], r1[4], xs[4] = {9, 8, 7, 6}, o0[2], o1[2];
    run2(ds, q0, q1, r0, r1);
    CU_ASSERT(r0[0] == 1 && r0[2] == 3 && r1[3] == 4);
    run2(sl, xs, xs, o0, o1); /* rank j's part j */
    CU_ASSERT(o0[0] == 9 && o0[1] == 8 && o1[0] == 7 && o1[1] == 6);
    nn_graph_free(g);
}

TEST(a_graph_built_with_the_c_api_runs_its_own_collectives_over_their_axis)
{
    /* y = all_gather over dp of x * w: each rank's loss sees both ranks' rows; trained with
     * SGD (lr 1, no momentum) the step moves w by the gradient, which must match central
     * finite differences of the distributed loss */
    nn_model m = {0};
    m.g = nn_graph_new(1);
    m.batch = 2;
    m.input = nn_input(m.g, "input", NN_F32, 2, (int64_t[]){2, 3});
    nn_tensor *w = nn_param(m.g, "w", NN_F32, 1, (int64_t[]){3});
    nn_tensor *y = nn_all_gather(m.g, nn_mul(m.g, m.input, w), NN_COMM_DP, 2, 0);
    nn_tensor *z = nn_tanh(m.g, y);
    m.loss = nn_reduce_sum(m.g, nn_reshape(m.g, nn_mul(m.g, z, z), 1, (int64_t[]){12}), 0, false);
    nn_graph *ref = nn_graph_new(1);
    nn_tensor *wref = nn_param(ref, "w", NN_F32, 1, (int64_t[]){3});
    float w0[3] = {0.3f, -0.7f, 1.1f}, in[12];
    for (int k = 0; k < 12; k++)
        in[k] = (float)(k % 5) * 0.25f - 0.4f;
    nn_strategy s = strat(2, 1, 1);
    nn_optim sgd1 = {.kind = NN_OPTIM_SGD, .lr = 1.0};
    nn_plan *p = NULL;
    np_err e = {0};
    if (nn_plan_build_graph(&m, "allgather-net", 4, &s, &sgd1, NULL, &p, &e) != NP_OK)
        fprintf(stderr, "%s\n", e.msg);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    double num[3], loss = 0;
    for (int k = 0; k < 3; k++) {
        double l2[2];
        for (int sgn = 0; sgn < 2; sgn++) {
            float wp[3] = {w0[0], w0[1], w0[2]};
            wp[k] += sgn ? -1e-3f : 1e-3f;
            nn_tensor_set(wref, wp);
            nn_dist *d = NULL;
            nn_dist_new(p, &d, &e);
            nn_dist_load_params(d, ref, &e);
            CU_ASSERT_EQUAL(nn_dist_step(d, in, NULL, &l2[sgn], &e), NP_OK);
            nn_dist_free(d);
        }
        num[k] = (l2[0] - l2[1]) / 2e-3;
    }
    nn_tensor_set(wref, w0);
    nn_dist *d = NULL;
    nn_dist_new(p, &d, &e);
    nn_dist_load_params(d, ref, &e);
    CU_ASSERT_EQUAL(nn_dist_step(d, in, NULL, &loss, &e), NP_OK);
    float after[3];
    CU_ASSERT_EQUAL(nn_dist_param(d, "w", after, 3, &e), NP_OK);
    for (int k = 0; k < 3; k++)
        CU_ASSERT_DOUBLE_EQUAL(w0[k] - after[k], num[k], 2e-3 * (fabs(num[k]) + 1e-2));
    nn_dist_free(d);
    nn_plan_free(p);
    nn_graph_free(ref);
    nn_graph_free(m.g);
}

TEST(a_transpose_read_by_matmuls_only_is_no_buffer_of_its_own)
{
    /* z = x^T w, loss = sum(z): x [8, 64] the input, w [8, 1], fp32. The lowering folds the
     * transpose into the matmul (it reads x with swapped strides: compiler/lower.c), so the
     * memory of the step holds no x^T (2048 bytes): the forward's transients are z (256 B)
     * and the loss (4 B), the backward's the loss's gradient, dz (256 B) and dw = x dz (32
     * B), the step's none (SGD updates w in place): every block under 300 bytes. */
    nn_model m = {0};
    m.g = nn_graph_new(1);
    m.batch = 8;
    m.input = nn_input(m.g, "input", NN_F32, 2, (int64_t[]){8, 64});
    nn_tensor *w = nn_param(m.g, "w", NN_F32, 2, (int64_t[]){8, 1});
    nn_tensor *z = nn_matmul(m.g, nn_transpose(m.g, m.input), w);
    m.loss = nn_reduce_sum(m.g, nn_reshape(m.g, z, 1, (int64_t[]){64}), 0, false);
    nn_strategy s = strat(1, 1, 1);
    nn_optim sgd1 = {.kind = NN_OPTIM_SGD, .lr = 1.0};
    nn_plan *p = NULL;
    np_err e = {0};
    if (nn_plan_build_graph(&m, "transpose-net", 8, &s, &sgd1, NULL, &p, &e) != NP_OK)
        fprintf(stderr, "%s\n", e.msg);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    nn_plan_mem mem;
    CU_ASSERT_EQUAL_FATAL(nn_plan_class_memory(p, &p->classes[0], &mem, &e), NP_OK);
    CU_ASSERT(mem.workspace_bytes < 300);
    CU_ASSERT_EQUAL(mem.activations_bytes, 0); /* the backward reads the input and w only */
    nn_plan_free(p);
    nn_graph_free(m.g);
}

/* ---- strategies that cannot be built ---- */

static void bad(const char *model, nn_strategy s, int64_t batch, int64_t seq, const arch_config *arch,
                np_status want, const char *msg)
{
    np_err e = {0};
    nn_plan *p = plan_of(model, s, batch, seq, NN_F32, 0, arch, &e);
    CU_ASSERT_PTR_NULL(p);
    CU_ASSERT_EQUAL(e.status, want);
    if (strcmp(e.msg, msg) != 0)
        fprintf(stderr, "got:  %s\nwant: %s\n", e.msg, msg);
    CU_ASSERT_STRING_EQUAL(e.msg, msg);
    nn_plan_free(p);
}

TEST(a_strategy_that_cannot_be_built_names_the_flag_and_the_rule_it_breaks)
{
    arch_config tiny;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tiny", NULL, 0, &tiny, &e), NP_OK);
    nn_strategy s = strat(1, 3, 1);
    bad("gpt-tiny", s, 4, 0, NULL, NP_ERR_INCONSISTENT,
        "--tp 3 does not divide the 4 attention heads of gpt-tiny");
    s = strat(1, 4, 1);
    bad("llama-tiny", s, 4, 0, NULL, NP_ERR_INCONSISTENT,
        "--tp 4 does not divide the 2 key/value heads of llama-tiny");
    bad("mlp", strat(1, 3, 1), 64, 0, NULL, NP_ERR_INCONSISTENT,
        "--tp 3 does not divide the width 512 of hidden layer 1 of mlp");
    bad("resnet-tiny", strat(1, 2, 1), 4, 0, NULL, NP_ERR_INCONSISTENT,
        "--tp 2: resnet models have no tensor-parallel split (transformers and MLPs do)");
    bad("gpt-tiny", strat(1, 1, 3), 4, 0, NULL, NP_ERR_RANGE, "--pp 3 is more than the 2 layers of gpt-tiny");
    bad("gpt-tiny", strat(2, 2, 2), 4, 0, &tiny, NP_ERR_RANGE,
        "--dp 2 --tp 2 --pp 2 need dp*tp*pp = 8 chips, but tiny has 2");
    bad("gpt-tiny", strat(4, 1, 1), 6, 0, NULL, NP_ERR_INCONSISTENT, "--batch 6 is not divisible by --dp 4");
    s = strat(2, 1, 1);
    s.microbatch = 3;
    bad("gpt-tiny", s, 8, 0, NULL, NP_ERR_INCONSISTENT,
        "--microbatch 3 does not divide the 4 samples per data-parallel rank (--batch 8 / --dp 2)");
    s = strat(1, 1, 2);
    s.schedule = NN_PP_INTERLEAVED;
    s.virtual_stages = 2;
    s.microbatch = 1;
    bad("gpt-tiny", s, 3, 0, NULL, NP_ERR_INCONSISTENT,
        "--schedule interleaved:2 needs the number of micro-batches (3) to be a multiple of --pp 2");
    s.microbatch = 8;
    bad("mlp-tiny", s, 64, 0, NULL, NP_ERR_RANGE,
        "--schedule interleaved:2 with --pp 2 needs 4 model chunks, but mlp-tiny has 3 pipeline "
        "units (2 layers and the head)");
    s.pp = 1;
    bad("gpt-tiny", s, 4, 0, NULL, NP_ERR_INCONSISTENT, "--schedule interleaved:2 needs --pp 2 or more");
    s = strat(1, 1, 1);
    s.sp = true;
    bad("gpt-tiny", s, 4, 0, NULL, NP_ERR_INCONSISTENT, "--sp needs --tp 2 or more");
    s.tp = 2;
    bad("mlp-tiny", s, 64, 0, NULL, NP_ERR_INCONSISTENT,
        "--sp needs a transformer (gpt or llama); mlp-tiny has no sequence");
    s.tp = 4;
    bad("gpt-tiny", s, 4, 10, NULL, NP_ERR_INCONSISTENT,
        "--sp: --tp 4 does not divide the sequence length 10");
    s = strat(2, 1, 2);
    s.zero = 2;
    bad("gpt-tiny", s, 4, 0, NULL, NP_ERR_INCONSISTENT,
        "--zero 2 cannot be combined with --pp 2: ZeRO-2 and -3 shard gradients every "
        "micro-batch, which pipeline parallelism accumulates (DeepSpeed's rule)");
    s.zero = 5;
    bad("gpt-tiny", s, 4, 0, NULL, NP_ERR_RANGE, "--zero must be 0, 1, 2 or 3, got 5");
    s = strat(1, 1, 2);
    s.n_stage_layers = 2;
    s.stage_layers[0] = 2;
    s.stage_layers[1] = 1;
    bad("gpt-tiny", s, 4, 0, NULL, NP_ERR_RANGE,
        "--stage-layers: the counts sum to 3, but gpt-tiny has 2 layers");
    s.n_stage_layers = 3;
    bad("gpt-tiny", s, 4, 0, NULL, NP_ERR_RANGE,
        "--stage-layers: 3 counts for 2 model chunks (pp x virtual stages)");
    s = strat(1, 1, 1);
    bad("gpt-tiny", s, 4, 32, NULL, NP_ERR_RANGE,
        "gpt-tiny: sequence length 32 exceeds the context of 16");
    /* the text options */
    CU_ASSERT_EQUAL(nn_strategy_parse_schedule(&s, "interleaved:1", &e), NP_ERR_USAGE);
    CU_ASSERT_STRING_EQUAL(e.msg, "--schedule: expected gpipe, 1f1b, interleaved:V with V in 2 "
                                  ".. 64 or zb-h1, got 'interleaved:1'");
    s = strat(1, 1, 2);
    CU_ASSERT_EQUAL(nn_strategy_parse_schedule(&s, "zb-h1", &e), NP_OK);
    s.p2p_blocking = true;
    bad("gpt-tiny", s, 4, 0, NULL, NP_ERR_INCONSISTENT,
        "--schedule zb-h1 cannot be combined with --p2p blocking: those are Megatron-LM 2021's "
        "calls and synchronizations of its 1F1B and interleaved schedules, which have no "
        "deferred weight-gradient passes");
    s.p2p_blocking = false;
    s.host_sync = true;
    bad("gpt-tiny", s, 4, 0, NULL, NP_ERR_INCONSISTENT,
        "--schedule zb-h1 cannot be combined with --host-sync: those are Megatron-LM 2021's "
        "calls and synchronizations of its 1F1B and interleaved schedules, which have no "
        "deferred weight-gradient passes");
    CU_ASSERT_EQUAL(nn_strategy_parse_recompute(&s, "some", &e), NP_ERR_USAGE);
    CU_ASSERT_STRING_EQUAL(e.msg, "--recompute: expected none, selective, full or uniform, got "
                                  "'some'");
}

/* ---- FLOPs ---- */

TEST(a_steps_flops_past_2_to_the_63_are_not_wrapped)
{
    /* Llama 3 405B (its published shape) on 8,192 chips, dp 64 x tp 8 x pp 16, a batch of
     * 2,048 sequences of 8,192 tokens (16.8 M tokens): the step's model FLOPs are at least
     * 6 N T (forward 2, backward 4 per parameter and token) = 4.1e19, past int64's 9.2e18,
     * and at most 6 N T plus the causal attention's 12 l s h T (Megatron's count, 8 % more) */
    static const char text[] = "family = llama\ndescription = Llama 3 405B\nlayers = 126\n"
                               "d_model = 16384\nheads = 128\nkv_heads = 8\nffn = 53248\n"
                               "vocab = 128256\ncontext = 8192\n";
    np_err e = {0};
    nn_model_desc d;
    CU_ASSERT_EQUAL_FATAL(nn_model_parse("l405.model", text, &d, &e), NP_OK);
    nn_summary sum;
    CU_ASSERT_EQUAL_FATAL(nn_summary_build(&d, 1, 8192, &sum, &e), NP_OK);
    double N = (double)sum.total_params, T = 2048.0 * 8192, l = 126, S = 8192, h = 16384;
    nn_summary_free(&sum);
    CU_ASSERT(N > 4.0e11 && N < 4.1e11); /* 405 B */
    nn_strategy s = strat(64, 8, 16);
    s.microbatch = 1;
    nn_model_opts o = {.batch = 2048, .seq = 8192, .compute = NN_BF16, .seed = 1};
    nn_plan *p = NULL;
    CU_ASSERT_EQUAL_FATAL(nn_plan_build(&d, &o, &s, &adam, NULL, &p, &e), NP_OK);
    nn_plan_summary ps;
    CU_ASSERT_EQUAL_FATAL(nn_plan_summarize(p, &ps, &e), NP_OK);
    CU_ASSERT(ps.flops_per_step >= 6 * N * T);
    CU_ASSERT(ps.flops_per_step <= 6 * N * T + 12 * l * S * h * T);
    CU_ASSERT(ps.hw_flops_per_step >= 0.9 * ps.flops_per_step);
    fprintf(stderr, "405B on 8,192 chips: %.4g model FLOPs per step (6 N T = %.4g)\n",
            ps.flops_per_step, 6 * N * T);
    nn_plan_summary_free(&ps);
    nn_plan_free(p);
}

TEST(a_plans_flops_are_single_device_training_plus_accumulation_and_the_replicated_optimizer)
{
    /* dp ranks each run the forward and backward of their samples in m micro-batches; each
     * micro-batch's backward makes the embedding table's gradient and sums the tied head's
     * into it (V D FLOPs each), each micro-batch accumulates every gradient (1 FLOP per
     * parameter) and every rank runs AdamW over the whole model (12 FLOPs per parameter):
     *   plan = single device + (dp m - 1) 2 V D + dp m Psi + (dp - 1) 12 Psi */
    np_err e = {0};
    nn_model_desc d;
    CU_ASSERT_EQUAL_FATAL(nn_model_load("gpt2-small", &d, &e), NP_OK);
    nn_summary sum;
    CU_ASSERT_EQUAL_FATAL(nn_summary_build(&d, 4, 128, &sum, &e), NP_OK);
    nn_strategy s = strat(2, 1, 1);
    s.microbatch = 1; /* 2 micro-batches per rank */
    nn_model_opts o = {.batch = 4, .seq = 128, .compute = NN_F32, .seed = 1};
    nn_optim adamw = {.kind = NN_OPTIM_ADAMW, .lr = 1e-4, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8};
    nn_plan *p = NULL;
    CU_ASSERT_EQUAL_FATAL(nn_plan_build(&d, &o, &s, &adamw, NULL, &p, &e), NP_OK);
    nn_plan_summary ps;
    CU_ASSERT_EQUAL_FATAL(nn_plan_summarize(p, &ps, &e), NP_OK);
    int64_t psi = 124439808, VD = 50257 * 768, dp = 2, m = 2;
    CU_ASSERT_EQUAL(ps.flops_per_step,
                    (double)(sum.train_step_flops + (dp * m - 1) * 2 * VD + dp * m * psi +
                             (dp - 1) * 12 * psi));
    CU_ASSERT_EQUAL(ps.hw_flops_per_step, ps.flops_per_step); /* nothing recomputed */
    nn_plan_summary_free(&ps);
    nn_plan_free(p);
    /* full recomputation recomputes each layer's forward from its input, except what no
     * backward op needs: the output projections of attention and MLP (2 T 5 h^2 per layer),
     * whose outputs only feed the residual sums */
    s.recompute = NN_RECOMPUTE_FULL;
    CU_ASSERT_EQUAL_FATAL(nn_plan_build(&d, &o, &s, &adamw, NULL, &p, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(nn_plan_summarize(p, &ps, &e), NP_OK);
    double layers_fwd = 0, T = 4 * 128, h = 768, proj = 12 * 2 * T * 5 * h * h;
    for (int i = 0; i < sum.n_rows; i++)
        if (strncmp(sum.rows[i].name, "h.", 2) == 0)
            layers_fwd += (double)sum.rows[i].flops;
    double extra = ps.hw_flops_per_step - ps.flops_per_step;
    CU_ASSERT(extra <= layers_fwd);
    CU_ASSERT(extra >= 0.99 * (layers_fwd - proj));
    fprintf(stderr, "full recomputation: %.4g FLOPs again, layers' forward %.4g, without the "
            "projections %.4g\n", extra, layers_fwd, layers_fwd - proj);
    nn_plan_summary_free(&ps);
    nn_plan_free(p);
    /* uniform recomputation (Megatron-LM's checkpointing of each layer) runs every layer's
     * whole forward again: exactly the single device's forward FLOPs of the layers */
    s.recompute = NN_RECOMPUTE_UNIFORM;
    CU_ASSERT_EQUAL_FATAL(nn_plan_build(&d, &o, &s, &adamw, NULL, &p, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(nn_plan_summarize(p, &ps, &e), NP_OK);
    CU_ASSERT_EQUAL(ps.hw_flops_per_step - ps.flops_per_step, layers_fwd);
    CU_ASSERT_EQUAL(ps.flops_per_step, /* model FLOPs as without recomputation */
                    (double)(sum.train_step_flops + (dp * m - 1) * 2 * VD + dp * m * psi +
                             (dp - 1) * 12 * psi));
    nn_plan_summary_free(&ps);
    nn_plan_free(p);
    nn_summary_free(&sum);
}

/* ---- npusim plan ---- */

TEST(npusim_plan_json_has_the_documented_names_and_figures)
{
    harness_run r = harness_npusim("plan", "--arch", "a100-cluster", "--model", "gpt2-small",
                                   "--batch", "16", "--seq", "256", "--dp", "2", "--tp", "2",
                                   "--pp", "2", "--microbatch", "2", "--json", NULL);
    CU_ASSERT_EQUAL_FATAL(r.exit_status, 0);
    json_error_t je;
    json_t *j = json_loads(r.out, 0, &je);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(j, "chips")), 8);
    json_t *mesh = json_object_get(j, "mesh");
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(mesh, "dp")), 2);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(mesh, "tp")), 2);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(mesh, "pp")), 2);
    CU_ASSERT_EQUAL(json_array_size(json_object_get(mesh, "chip_of_rank")), 8);
    json_t *stages = json_object_get(j, "stages");
    CU_ASSERT_EQUAL(json_array_size(stages), 2);
    size_t layers = 0;
    double flops = 0;
    for (size_t i = 0; i < json_array_size(stages); i++) {
        layers += json_array_size(json_object_get(json_array_get(stages, i), "layers"));
        flops += json_number_value(json_object_get(json_array_get(stages, i), "flops"));
    }
    CU_ASSERT_EQUAL(layers, 12);
    CU_ASSERT(flops > 0);
    CU_ASSERT_EQUAL(json_number_value(json_object_get(j, "flops_per_step")), flops * 4); /* dp x tp */
    json_t *colls = json_object_get(j, "collectives");
    CU_ASSERT(json_array_size(colls) > 4);
    const char *keys[] = {"kind", "axis", "group_size", "bytes", "count_per_step"};
    bool tp = false, dp = false, pp = false;
    for (size_t i = 0; i < json_array_size(colls); i++) {
        json_t *c = json_array_get(colls, i);
        for (size_t k = 0; k < 5; k++)
            CU_ASSERT_PTR_NOT_NULL(json_object_get(c, keys[k]));
        const char *axis = json_string_value(json_object_get(c, "axis"));
        tp = tp || strcmp(axis, "tp") == 0;
        dp = dp || strcmp(axis, "dp") == 0;
        pp = pp || strcmp(axis, "pp") == 0;
    }
    CU_ASSERT(tp && dp && pp);
    json_t *mem = json_object_get(j, "memory");
    const char *mk[] = {"params_bytes", "grads_bytes", "optstate_bytes", "activations_bytes",
                        "buffers_bytes", "workspace_bytes"};
    int64_t total = 0;
    for (size_t k = 0; k < 6; k++)
        total += json_integer_value(json_object_get(mem, mk[k]));
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(mem, "total_bytes")), total);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(mem, "hbm_bytes")), 80ll << 30);
    /* 4 micro-batches on 2 stages: (p - 1) / (m + p - 1) = 1/5 */
    CU_ASSERT_DOUBLE_EQUAL(json_real_value(json_object_get(j, "bubble_analytical")), 0.2, 1e-12);
    json_decref(j);
    harness_run_free(&r);
}

TEST(npusim_plan_prints_the_placement_stages_and_memory_and_rejects_bad_strategies_with_status_2)
{
    harness_run r = harness_npusim("plan", "--arch", "a100-cluster", "--model", "gpt-tiny", "--batch",
                                   "8", "--tp", "2", "--pp", "2", "--microbatch", "1", NULL);
    CU_ASSERT_EQUAL(r.exit_status, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "placement: tp groups inside islands of 8 chips"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "pre+0-0"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "1-1+head"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "memory of the largest chip"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "pipeline bubble (analytical, (p-1)/(m+p-1)): 11.11 %"));
    harness_run_free(&r);
    r = harness_npusim("plan", "--arch", "tiny", "--model", "gpt-tiny", "--batch", "4", "--tp", "3", NULL);
    CU_ASSERT_EQUAL(r.exit_status, 2);
    CU_ASSERT_STRING_EQUAL(r.err, "npusim: --tp 3 does not divide the 4 attention heads of gpt-tiny\n");
    harness_run_free(&r);
    r = harness_npusim("plan", "--arch", "tiny", "--model", "gpt-tiny", "--batch", "4", "--schedule",
                       "zigzag", NULL);
    CU_ASSERT_EQUAL(r.exit_status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "--schedule: expected gpipe, 1f1b, interleaved:V"));
    harness_run_free(&r);
    r = harness_npusim("plan", "--arch", "tiny", "--model", "gpt-tiny", "--batch", "4", "--pp", "2",
                       "--schedule", "zb-h1", NULL);
    CU_ASSERT_EQUAL(r.exit_status, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, ", zb-h1, 1 micro-batch"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "pipeline bubble (analytical, (p-1)(F+B-W)/((p-1)(F+B-W)+m(F+B+W)), by FLOPs)"));
    harness_run_free(&r);
    r = harness_npusim("plan", "--arch", "tiny", "--model", "gpt-tiny", "--batch", "4", "--pp", "2",
                       "--schedule", "zb-h1", "--p2p", "blocking", NULL);
    CU_ASSERT_EQUAL(r.exit_status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "--schedule zb-h1 cannot be combined with --p2p blocking"));
    harness_run_free(&r);
    r = harness_npusim("plan", "--arch", "tiny", "--model", "gpt-tiny", NULL);
    CU_ASSERT_EQUAL(r.exit_status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "--batch is required"));
    harness_run_free(&r);
    /* how the software runs the step: each flag's value checked, shown in the header and JSON */
    r = harness_npusim("plan", "--arch", "tiny", "--model", "gpt-tiny", "--batch", "4", "--ddp",
                       "lokal", NULL);
    CU_ASSERT_EQUAL(r.exit_status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "--ddp: unknown DDP implementation 'lokal'; did you mean "
                                         "'local'? (one of torch, local)"));
    harness_run_free(&r);
    r = harness_npusim("plan", "--arch", "tiny", "--model", "gpt-tiny", "--batch", "4", "--p2p",
                       "sync", NULL);
    CU_ASSERT_EQUAL(r.exit_status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "--p2p"));
    harness_run_free(&r);
    r = harness_npusim("plan", "--arch", "tiny", "--model", "gpt-tiny", "--batch", "4", "--dp", "2",
                       "--zero", "2", "--clip-grad", "1", NULL);
    CU_ASSERT_EQUAL(r.exit_status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "cannot be combined with --zero 2"));
    harness_run_free(&r);
    r = harness_npusim("plan", "--arch", "tiny", "--model", "gpt-tiny", "--batch", "4", "--pp", "2",
                       "--ddp", "local", "--p2p", "blocking", "--host-sync", "--loss-scale", "8192",
                       "--clip-grad", "1", "--recompute", "uniform", NULL);
    CU_ASSERT_EQUAL(r.exit_status, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "recompute uniform, DDP local, blocking p2p, host "
                                         "synchronizations, loss scale 8192, gradients clipped to "
                                         "norm 1, "));
    harness_run_free(&r);
    r = harness_npusim("plan", "--arch", "tiny", "--model", "gpt-tiny", "--batch", "4", "--pp", "2",
                       "--ddp", "local", "--p2p", "blocking", "--loss-scale", "8192", "--json", NULL);
    CU_ASSERT_EQUAL_FATAL(r.exit_status, 0);
    json_t *j = json_loads(r.out, 0, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(j, "ddp")), "local");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(j, "p2p")), "blocking");
    CU_ASSERT(json_is_false(json_object_get(j, "host_sync")));
    CU_ASSERT_DOUBLE_EQUAL(json_real_value(json_object_get(j, "loss_scale")), 8192, 0);
    CU_ASSERT_DOUBLE_EQUAL(json_real_value(json_object_get(j, "clip_grad")), 0, 0);
    CU_ASSERT(json_is_false(json_object_get(j, "tp_comm_overlap")));
    CU_ASSERT(json_is_false(json_object_get(j, "overlap_param_gather")));
    json_decref(j);
    harness_run_free(&r);
}

TEST(docs_parallel_shows_the_built_plan_walk_example_verbatim)
{
    char *doc = harness_read_file(harness_src_path("docs/parallel.md"), NULL);
    char *ex = harness_read_file(harness_src_path("docs/examples/plan_walk.c"), NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(doc);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ex);
    CU_ASSERT_PTR_NOT_NULL(strstr(doc, ex));
    free(doc);
    free(ex);
}

TEST(an_allocation_failure_while_planning_or_executing_is_a_nomem_error_not_a_crash_or_leak)
{
    /* the n-th framework allocation fails, for n on a spread of points over a whole build of
     * a dp2 x tp2 x pp2 plan, its executor and one step (ASan finds a leak or a bad access) */
    nn_model_desc d;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(nn_model_load("gpt-tiny", &d, &e), NP_OK);
    nn_model_opts o = {.batch = 4, .compute = NN_F32, .seed = 1};
    nn_strategy s = strat(2, 2, 2);
    s.microbatch = 1;
    nn_model init;
    CU_ASSERT_EQUAL_FATAL(nn_model_build(&d, &o, &init, &e), NP_OK);
    nn_model_init(init.g, 11, &e);
    float in[64] = {0}, lab[64] = {0};
    int failures = 0;
    bool done = false;
    for (long n = 0; !done && n < 10000000; n += 1 + n / 12) {
        nn_plan *p = NULL;
        nn_dist *dist = NULL;
        double loss;
        np_err fe = {0};
        nn_fault_inject_alloc(n);
        np_status st = nn_plan_build(&d, &o, &s, &adam, NULL, &p, &fe);
        if (st == NP_OK)
            st = nn_dist_new(p, &dist, &fe);
        if (st == NP_OK)
            st = nn_dist_load_params(dist, init.g, &fe);
        if (st == NP_OK)
            st = nn_dist_step(dist, in, lab, &loss, &fe);
        nn_fault_inject_alloc(-1);
        if (st == NP_OK)
            done = true;
        else {
            if (st != NP_ERR_NOMEM)
                fprintf(stderr, "allocation %ld: %s (%s)\n", n, fe.msg, np_status_name(st));
            CU_ASSERT_EQUAL(st, NP_ERR_NOMEM);
            failures++;
        }
        nn_dist_free(dist);
        nn_plan_free(p);
    }
    CU_ASSERT(done);
    CU_ASSERT(failures > 20);
    nn_graph_free(init.g);
}
