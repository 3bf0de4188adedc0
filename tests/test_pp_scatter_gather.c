/* test_pp_scatter_gather.c — Megatron-LM's pipeline scatter/gather (Narayanan et al., SC21,
 * 4.1; nn_strategy.pp_scatter_gather, `--no-pp-scatter-gather`): with tp > 1 each tp rank
 * sends 1/tp of a pipeline boundary and the receiving stage all-gathers it over its tp group,
 * forward and backward. Checked against hand-computed figures: the bytes of every send,
 * receive and gather in the plan (b s h x 2 / t), memory by role on a graph small enough to
 * count by hand, and on a hierarchical system (tp inside islands, pp across them) the bytes
 * the scale-out links and the island links carry at both fidelities, with the
 * optimization and without (today's figures); the distributed executor's values at full
 * fidelity; and the commands' flag and output. test_parallel_train.c checks that training
 * with it on equals one device's. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "harness.h"
#include "plan.h"
#include "run_job.h"

static const nn_optim adam = {.kind = NN_OPTIM_ADAM, .lr = 1e-4, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8};

static nn_strategy strat(int dp, int tp, int pp, int64_t micro, bool sg)
{
    nn_strategy s;
    nn_strategy_default(&s);
    s.dp = dp, s.tp = tp, s.pp = pp;
    s.microbatch = micro;
    s.pp_scatter_gather = sg;
    return s;
}

static nn_plan *plan_of(const char *model, nn_strategy s, int64_t batch, int64_t seq, np_err *e)
{
    nn_model_desc d;
    nn_plan *p = NULL;
    nn_model_opts o = {.batch = batch, .seq = seq, .compute = NN_BF16, .seed = 1};
    if (nn_model_load(model, &d, e) != NP_OK || nn_plan_build(&d, &o, &s, &adam, NULL, &p, e) != NP_OK)
        fprintf(stderr, "%s: %s\n", model, e->msg);
    return p;
}

/* The entries of kind k (and for collectives op, tag) in the blocks of kind bk of class c:
 * how many, and the bytes of each (all equal, else UINT64_MAX). */
static int entries(const nn_plan_class *c, nn_plan_block_kind bk, nn_plan_kind k, nn_op op,
                   nn_comm_tag tag, uint64_t *bytes)
{
    int n = 0;
    *bytes = 0;
    for (int b = 0; b < c->n_blocks; b++) {
        if (c->blocks[b].kind != bk)
            continue;
        for (int i = 0; i < c->blocks[b].n_entries; i++) {
            const nn_plan_entry *e = &c->blocks[b].entries[i];
            if (e->kind != k || (k == NN_PLAN_COLLECTIVE && (e->nodes[0]->op != op || e->tag != tag)))
                continue;
            *bytes = n && *bytes != e->bytes ? UINT64_MAX : e->bytes;
            n++;
        }
    }
    return n;
}

/* ---- the plan ---------------------------------------------------------------------------- */

TEST(each_tp_rank_sends_one_tp_share_of_a_boundary_and_the_next_stage_all_gathers_it)
{
    /* gpt2-small, tp 4 x pp 2, micro-batches of b = 2 sequences of s = 512, h = 768, bf16: a
     * boundary (the residual stream, replicated over tp) is b s h x 2 = 1,572,864 bytes */
    const uint64_t bsh = 2ull * 512 * 768 * 2;
    np_err e = {0};
    for (int t = 2; t <= 4; t += 2) {
        nn_plan *p = plan_of("gpt2-small", strat(1, t, 2, 2, true), 4, 512, &e);
        CU_ASSERT_PTR_NOT_NULL_FATAL(p);
        CU_ASSERT_EQUAL(p->pp_scattered, 1);
        const nn_plan_class *c0 = &p->classes[0], *c1 = &p->classes[1];
        uint64_t b;
        /* forward: stage 0 sends its 1/t, stage 1 receives it and all-gathers b s h over tp */
        CU_ASSERT_EQUAL(entries(c0, NN_BLOCK_FORWARD, NN_PLAN_SEND, 0, 0, &b), 1);
        CU_ASSERT_EQUAL(b, bsh / (uint64_t)t);
        CU_ASSERT_EQUAL(entries(c1, NN_BLOCK_FORWARD, NN_PLAN_RECV, 0, 0, &b), 1);
        CU_ASSERT_EQUAL(b, bsh / (uint64_t)t);
        CU_ASSERT_EQUAL(entries(c1, NN_BLOCK_FORWARD, NN_PLAN_COLLECTIVE, NN_OP_ALL_GATHER,
                                NN_COMM_PP_SG, &b), 1);
        CU_ASSERT_EQUAL(b, bsh);
        /* backward: the gradient the same way back */
        CU_ASSERT_EQUAL(entries(c1, NN_BLOCK_BACKWARD, NN_PLAN_SEND, 0, 0, &b), 1);
        CU_ASSERT_EQUAL(b, bsh / (uint64_t)t);
        CU_ASSERT_EQUAL(entries(c0, NN_BLOCK_BACKWARD, NN_PLAN_RECV, 0, 0, &b), 1);
        CU_ASSERT_EQUAL(b, bsh / (uint64_t)t);
        CU_ASSERT_EQUAL(entries(c0, NN_BLOCK_BACKWARD, NN_PLAN_COLLECTIVE, NN_OP_ALL_GATHER,
                                NN_COMM_PP_SG, &b), 1);
        CU_ASSERT_EQUAL(b, bsh);
        /* the gather is over the tp group: rank 4's (stage 1, tp 0) is ranks 4 .. 4 + t - 1 */
        const nn_plan_block *fwd = NULL;
        for (int k = 0; k < c1->n_blocks; k++)
            if (c1->blocks[k].kind == NN_BLOCK_FORWARD)
                fwd = &c1->blocks[k];
        CU_ASSERT_PTR_NOT_NULL_FATAL(fwd);
        for (int i = 0; i < fwd->n_entries; i++) {
            const nn_plan_entry *g = &fwd->entries[i];
            if (g->kind != NN_PLAN_COLLECTIVE || g->tag != NN_COMM_PP_SG)
                continue;
            int ranks[8];
            CU_ASSERT_EQUAL(nn_plan_group(p, t, g, ranks, 8), t);
            for (int k = 0; k < t; k++)
                CU_ASSERT_EQUAL(ranks[k], t + k);
            CU_ASSERT_EQUAL(g->group_size, t);
            CU_ASSERT_EQUAL(g->n_deps, 1); /* it waits for the receive */
            CU_ASSERT_EQUAL(fwd->entries[g->deps[0].entry].kind, NN_PLAN_RECV);
        }
        nn_plan_free(p);

        /* off: every tp rank sends the whole boundary, and nothing is gathered */
        p = plan_of("gpt2-small", strat(1, t, 2, 2, false), 4, 512, &e);
        CU_ASSERT_PTR_NOT_NULL_FATAL(p);
        CU_ASSERT_EQUAL(p->pp_scattered, 0);
        CU_ASSERT_EQUAL(entries(&p->classes[0], NN_BLOCK_FORWARD, NN_PLAN_SEND, 0, 0, &b), 1);
        CU_ASSERT_EQUAL(b, bsh);
        CU_ASSERT_EQUAL(entries(&p->classes[0], NN_BLOCK_BACKWARD, NN_PLAN_RECV, 0, 0, &b), 1);
        CU_ASSERT_EQUAL(b, bsh);
        for (int st = 0; st < 2; st++)
            for (int bk = NN_BLOCK_STEP_BEGIN; bk <= NN_BLOCK_STEP_END; bk++)
                CU_ASSERT_EQUAL(entries(&p->classes[st], bk, NN_PLAN_COLLECTIVE, NN_OP_ALL_GATHER,
                                        NN_COMM_PP_SG, &b), 0);
        nn_plan_free(p);
    }
}

TEST(megatron_scatters_nothing_with_sequence_parallelism_or_without_tensor_parallelism)
{
    const uint64_t bsh = 2ull * 512 * 768 * 2;
    np_err e = {0};
    uint64_t b;
    /* --sp: the boundary is already split along the sequence (Megatron's p2p_communication.py
     * scatters only `not args.sequence_parallel`): 1/t of it, and no gather */
    nn_strategy s = strat(1, 4, 2, 2, true);
    s.sp = true;
    nn_plan *p = plan_of("gpt2-small", s, 4, 512, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(p->pp_scattered, 0);
    CU_ASSERT_EQUAL(entries(&p->classes[0], NN_BLOCK_FORWARD, NN_PLAN_SEND, 0, 0, &b), 1);
    CU_ASSERT_EQUAL(b, bsh / 4);
    CU_ASSERT_EQUAL(entries(&p->classes[1], NN_BLOCK_FORWARD, NN_PLAN_COLLECTIVE, NN_OP_ALL_GATHER,
                            NN_COMM_PP_SG, &b), 0);
    nn_plan_free(p);
    /* tp 1: there is nothing to split */
    p = plan_of("gpt2-small", strat(1, 1, 2, 2, true), 4, 512, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(p->pp_scattered, 0);
    CU_ASSERT_EQUAL(entries(&p->classes[0], NN_BLOCK_FORWARD, NN_PLAN_SEND, 0, 0, &b), 1);
    CU_ASSERT_EQUAL(b, bsh);
    nn_plan_free(p);
    /* interleaved 1F1B with 2 chunks on 2 stages: 3 boundaries, each scattered */
    s = strat(1, 2, 2, 1, true);
    s.schedule = NN_PP_INTERLEAVED;
    s.virtual_stages = 2;
    p = plan_of("gpt-tiny", s, 4, 0, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(p->pp_scattered, 3);
    CU_ASSERT_EQUAL(entries(&p->classes[0], NN_BLOCK_FORWARD, NN_PLAN_SEND, 0, 0, &b), 2);
    CU_ASSERT_EQUAL(b, 1ull * 16 * 32 * 2 / 2); /* b 1, s 16, h 32, bf16, over tp 2 */
    nn_plan_free(p);
}

TEST(a_boundary_of_partial_sums_is_reduce_scattered_sent_and_gathered_in_place_of_its_all_reduce)
{
    /* llama-tiny (no position embedding): the plan keeps its residual stream as tp partial
     * sums until a norm all-reduces it, so its boundary is partial: each tp rank sends its 1/t
     * of the sum (a reduce-scatter over tp, the first half of that all-reduce) and the next
     * stage gathers it (the second half); its first norm then all-reduces nothing */
    const uint64_t bsh = 4ull * 16 * 32 * 2; /* b 4, s 16, h 32, bf16 */
    np_err e = {0};
    uint64_t b, b_off;
    nn_plan *on = plan_of("llama-tiny", strat(1, 2, 2, 0, true), 4, 0, &e);
    nn_plan *off = plan_of("llama-tiny", strat(1, 2, 2, 0, false), 4, 0, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(on);
    CU_ASSERT_PTR_NOT_NULL_FATAL(off);
    CU_ASSERT_EQUAL(on->pp_scattered, 1);
    CU_ASSERT_EQUAL(entries(&on->classes[0], NN_BLOCK_FORWARD, NN_PLAN_COLLECTIVE,
                            NN_OP_REDUCE_SCATTER, NN_COMM_PP_SG, &b), 1);
    CU_ASSERT_EQUAL(b, bsh); /* a reduce-scatter's size is its input's */
    CU_ASSERT_EQUAL(entries(&on->classes[0], NN_BLOCK_FORWARD, NN_PLAN_SEND, 0, 0, &b), 1);
    CU_ASSERT_EQUAL(b, bsh / 2);
    CU_ASSERT_EQUAL(entries(&off->classes[0], NN_BLOCK_FORWARD, NN_PLAN_SEND, 0, 0, &b), 1);
    CU_ASSERT_EQUAL(b, bsh);
    CU_ASSERT_EQUAL(entries(&on->classes[1], NN_BLOCK_FORWARD, NN_PLAN_COLLECTIVE,
                            NN_OP_ALL_GATHER, NN_COMM_PP_SG, &b), 1);
    CU_ASSERT_EQUAL(b, bsh);
    int n_on = entries(&on->classes[1], NN_BLOCK_FORWARD, NN_PLAN_COLLECTIVE, NN_OP_ALL_REDUCE,
                       NN_COMM_TP, &b);
    int n_off = entries(&off->classes[1], NN_BLOCK_FORWARD, NN_PLAN_COLLECTIVE, NN_OP_ALL_REDUCE,
                        NN_COMM_TP, &b_off);
    CU_ASSERT_EQUAL(n_off - n_on, 1);
    nn_plan_free(on);
    nn_plan_free(off);
}

/* ---- memory ------------------------------------------------------------------------------ */

/* x [4, 8] f32 -> layer 0: y = x w0 -> layer 1: z = y w1 -> loss sum(z z); w0, w1 [8]: every
 * value is replicated over tp and y is the one boundary */
static nn_plan *tiny_plan(bool sg, nn_graph **g)
{
    nn_model m = {0};
    m.g = *g = nn_graph_new(1);
    m.batch = 4;
    m.input = nn_input(m.g, "input", NN_F32, 2, (int64_t[]){4, 8});
    nn_graph_set_layer(m.g, 0);
    nn_tensor *y = nn_mul(m.g, m.input, nn_param(m.g, "w0", NN_F32, 1, (int64_t[]){8}));
    nn_graph_set_layer(m.g, 1);
    nn_tensor *z = nn_mul(m.g, y, nn_param(m.g, "w1", NN_F32, 1, (int64_t[]){8}));
    nn_graph_set_layer(m.g, -1);
    m.loss = nn_reduce_sum(m.g, nn_reshape(m.g, nn_mul(m.g, z, z), 1, (int64_t[]){32}), 0, false);
    nn_strategy s = strat(1, 2, 2, 0, sg);
    s.n_stage_layers = 2; /* one layer a stage (by FLOPs the loss would take a stage) */
    s.stage_layers[0] = s.stage_layers[1] = 1;
    nn_optim sgd = {.kind = NN_OPTIM_SGD, .lr = 0.1};
    nn_plan *p = NULL;
    np_err e = {0};
    if (nn_plan_build_graph(&m, "two-muls", 4, &s, &sgd, NULL, &p, &e) != NP_OK)
        fprintf(stderr, "%s\n", e.msg);
    return p;
}

TEST(the_received_shard_is_a_communication_buffer_and_the_gathered_value_a_saved_activation)
{
    nn_graph *g_on, *g_off;
    nn_plan *on = tiny_plan(true, &g_on), *off = tiny_plan(false, &g_off);
    CU_ASSERT_PTR_NOT_NULL_FATAL(on);
    CU_ASSERT_PTR_NOT_NULL_FATAL(off);
    CU_ASSERT_EQUAL(on->pp_scattered, 1);
    nn_plan_mem m[2][2];
    np_err e = {0};
    for (int st = 0; st < 2; st++) {
        CU_ASSERT_EQUAL(nn_plan_class_memory(on, &on->classes[st], &m[1][st], &e), NP_OK);
        CU_ASSERT_EQUAL(nn_plan_class_memory(off, &off->classes[st], &m[0][st], &e), NP_OK);
    }
    /* stage 1 keeps y (received, or gathered: 4 x 8 x 4 = 128 bytes) and z (128) for its
     * backward; with the optimization the received 1/2 of y (64 bytes) is a communication
     * buffer until it is gathered, without it nothing is */
    CU_ASSERT_EQUAL(m[1][1].activations_bytes, 256);
    CU_ASSERT_EQUAL(m[0][1].activations_bytes, 256);
    CU_ASSERT_EQUAL(m[1][1].buffers_bytes, 64);
    CU_ASSERT_EQUAL(m[0][1].buffers_bytes, 0);
    /* stage 0 keeps nothing (y's gradient reads x, an input); its backward holds the received
     * 1/2 of y's gradient (64) and the gathered gradient (128) together at the gather, without
     * the optimization the whole received gradient (128) */
    CU_ASSERT_EQUAL(m[1][0].activations_bytes, 0);
    CU_ASSERT_EQUAL(m[1][0].buffers_bytes, 64 + 128);
    CU_ASSERT_EQUAL(m[0][0].buffers_bytes, 128);
    /* the sent 1/2 is a view of its source (Megatron's split is a view): no workspace more */
    for (int st = 0; st < 2; st++)
        CU_ASSERT_EQUAL(m[1][st].workspace_bytes, m[0][st].workspace_bytes);
    nn_plan_free(on);
    nn_plan_free(off);
    nn_graph_free(g_on);
    nn_graph_free(g_off);
}

/* ---- the run: a hierarchical system, tp inside islands, pp across them ------------------ */

/* tiny's chips in islands of `island` joined by a switch (2 links of 8 GB/s: 16 GB/s a chip),
 * the islands by a 2 GB/s scale-out port per chip */
static void islands(arch_config *cfg, const char *chips, const char *island)
{
    const char *sets[] = {chips, "system.topology=hierarchical", island,
                          "system.scaleout_gb_per_s=2", "system.scaleout_latency_ns=1000"};
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tiny", sets, 5, cfg, &e), NP_OK);
}

/* Kernels take their FLOPs at 1 TFLOP/s (at least 100 ns): bytes on links do not depend on it. */
static np_status time_analytical(void *ctx, const run_kernel *k, run_ktime *out, np_err *err)
{
    (void)ctx, (void)err;
    const run_kspec *ks = k->data;
    memset(out, 0, sizeof *out);
    out->ps = (uint64_t)fmax(1e5, (double)ks->flops);
    out->chained_ps = out->ps;
    return NP_OK;
}

typedef struct figures {
    uint64_t scaleout, island; /* bytes on the chips' links up to the scale-out and island switches */
    uint64_t pp, pp_sg;        /* bytes of the report's kinds, all chips (per chip x chips) */
    double loss, loss_reference;
} figures;

static figures run_of(const arch_config *cfg, const char *model, int tp, bool sg, bool full,
                      nn_dtype dt, int64_t seq)
{
    figures f = {0};
    nn_model_desc d;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(nn_model_load(model, &d, &e), NP_OK);
    run_job j = {.cfg = cfg, .model = &d, .steps = 1, .full = full, .functional = full,
                 .top_links = RUN_REPORT_LINKS_MAX};
    j.s = strat(1, tp, 2, 2, sg);
    j.o = (nn_model_opts){.batch = 4, .seq = seq, .compute = dt, .seed = 1};
    j.optim = (nn_optim){.kind = NN_OPTIM_SGD, .lr = 0.01};
    if (!full)
        j.time_kernel = time_analytical;
    run_report r;
    if (run_job_run(&j, &r, &e) != NP_OK) {
        fprintf(stderr, "%s: %s\n", model, e.msg);
        CU_FAIL_FATAL("run");
    }
    CU_ASSERT_EQUAL(r.pp_scatter_gather, sg);
    CU_ASSERT_EQUAL(r.pp_scattered, sg ? 1 : 0);
    for (uint32_t i = 0; i < r.n_links; i++) {
        if (strncmp(r.links[i].name, "chip", 4) != 0) /* down links carry the same again */
            continue;
        bool scaleout = fabs(r.links[i].capacity_gbps - 2.0) < 1e-9;
        *(scaleout ? &f.scaleout : &f.island) += r.links[i].bytes;
    }
    for (uint32_t i = 0; i < r.n_comm; i++) {
        if (r.comm[i].kind == RUN_COMM_PP)
            f.pp = (uint64_t)llround(r.comm[i].bytes_per_chip * r.comm[i].chips);
        if (r.comm[i].kind == RUN_COMM_PP_SG)
            f.pp_sg = (uint64_t)llround(r.comm[i].bytes_per_chip * r.comm[i].chips);
    }
    f.loss = r.loss;
    f.loss_reference = r.loss_reference;
    run_report_free(&r);
    return f;
}

TEST(the_scale_out_links_carry_1_over_tp_of_the_pipelines_bytes_and_the_island_links_the_gathers)
{
    /* 4 chips in islands of 2: tp 2 inside an island, stage 1 on the other island; batch 4
     * in m = 2 micro-batches of b = 2, s = 16, h = 32, bf16: a boundary is N = 2048 bytes.
     * Every micro-batch sends it forward and its gradient back, from each of the t = 2 tp
     * ranks: 2 m t N = 16,384 bytes over the scale-out links without the optimization, 2 m t
     * (N / t) = 8,192 with it. llama-tiny has nothing else crossing islands (untied head). */
    arch_config cfg;
    islands(&cfg, "system.chips=4", "system.island_chips=2");
    const uint64_t N = 2 * 16 * 32 * 2, m = 2, t = 2;
    figures on = run_of(&cfg, "llama-tiny", 2, true, false, NN_BF16, 0);
    figures off = run_of(&cfg, "llama-tiny", 2, false, false, NN_BF16, 0);
    CU_ASSERT_EQUAL(off.scaleout, 2 * m * t * N);
    CU_ASSERT_EQUAL(on.scaleout, 2 * m * t * (N / t));
    CU_ASSERT_EQUAL(off.pp, 2 * m * t * N);
    CU_ASSERT_EQUAL(on.pp, 2 * m * N);
    /* gpt-tiny ties its embedding: the first and the last stage all-reduce its gradient over
     * the scale-out links too, t pairs of 2 ranks each moving its 16 / t x 32 x 2 = 512 bytes
     * both ways (2 x 512 a pair). Its boundary is replicated, so its tensor parallelism is
     * the same either way and the island links carry exactly the gathers more: m forward on
     * stage 1 and m backward on stage 0, (t - 1) N each */
    on = run_of(&cfg, "gpt-tiny", 2, true, false, NN_BF16, 0);
    off = run_of(&cfg, "gpt-tiny", 2, false, false, NN_BF16, 0);
    const uint64_t tied = t * 2 * 512;
    CU_ASSERT_EQUAL(off.scaleout, 2 * m * t * N + tied);
    CU_ASSERT_EQUAL(on.scaleout, 2 * m * N + tied);
    CU_ASSERT_EQUAL(on.island - off.island, 2 * m * (t - 1) * N);
    CU_ASSERT_EQUAL(on.pp_sg, 2 * m * (t - 1) * N);
    CU_ASSERT_EQUAL(off.pp_sg, 0);
    CU_ASSERT_EQUAL(on.pp, 2 * m * N + tied);
    CU_ASSERT_EQUAL(off.pp, 2 * m * t * N + tied);
}

TEST(tp_4_sends_a_quarter_and_gathers_three_quarters_over_the_island)
{
    /* 8 chips in islands of 4, gpt-tiny tp 4 x pp 2: the report's kinds (its links are more
     * than it lists): sends 2 m N (one N per boundary over the 4 ranks) against 2 m 4 N, the
     * gathers 2 m (4 - 1) N; the tied embedding's all-reduce 4 pairs x 2 x (16 / 4 x 32 x 2) */
    arch_config cfg;
    islands(&cfg, "system.chips=8", "system.island_chips=4");
    const uint64_t N = 2 * 16 * 32 * 2, m = 2, tied = 4 * 2 * 256;
    figures on = run_of(&cfg, "gpt-tiny", 4, true, false, NN_BF16, 0);
    figures off = run_of(&cfg, "gpt-tiny", 4, false, false, NN_BF16, 0);
    CU_ASSERT_EQUAL(on.pp, 2 * m * N + tied);
    CU_ASSERT_EQUAL(off.pp, 2 * m * 4 * N + tied);
    CU_ASSERT_EQUAL(on.pp_sg, 2 * m * 3 * N);
}

TEST(at_full_fidelity_the_lowered_step_moves_the_same_bytes_and_computes_the_executors_values)
{
    /* the same 4 chips, every rank's step lowered to ISA and run on the core model, with
     * values: fp32, sequences of 8 (the run's batch, token i = 7 i mod 16, repeats every 16
     * tokens: with 8 the two sequences of a micro-batch differ, and so do the two halves of a
     * boundary), N = 2 x 8 x 32 x 4 = 2,048 bytes a boundary */
    arch_config cfg;
    islands(&cfg, "system.chips=4", "system.island_chips=2");
    const uint64_t N = 2 * 8 * 32 * 4, m = 2, t = 2, tied = t * 2 * 1024;
    figures on = run_of(&cfg, "gpt-tiny", 2, true, true, NN_F32, 8);
    figures off = run_of(&cfg, "gpt-tiny", 2, false, true, NN_F32, 8);
    CU_ASSERT_EQUAL(off.scaleout, 2 * m * t * N + tied);
    CU_ASSERT_EQUAL(on.scaleout, 2 * m * N + tied);
    CU_ASSERT_EQUAL(on.pp_sg, 2 * m * (t - 1) * N);
    CU_ASSERT_DOUBLE_EQUAL(on.loss, on.loss_reference, 1e-6 * fabs(on.loss_reference));
    CU_ASSERT_DOUBLE_EQUAL(on.loss, off.loss, 1e-6 * fabs(off.loss));
}

/* ---- the commands ------------------------------------------------------------------------ */

TEST(npusim_plan_and_run_take_no_pp_scatter_gather_and_plan_shows_the_gathers)
{
    for (int k = 0; k < 2; k++) {
        harness_run r = harness_npusim(k ? "run" : "plan", "--help", NULL);
        CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "--no-pp-scatter-gather"));
        harness_run_free(&r);
    }
    /* gpt-tiny tp 2 x pp 2, one micro-batch of 8 x 16 tokens of width 32, bf16: 8 KiB a
     * boundary, 4 KiB a send */
    harness_run r = harness_npusim("plan", "--arch", "tpu-pod", "--model", "gpt-tiny", "--batch",
                                   "8", "--tp", "2", "--pp", "2", NULL);
    CU_ASSERT_EQUAL(r.exit_status, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "# pipeline scatter/gather: 1 boundary sent in 1/2 "
                                         "shards, all-gathered over tp"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "all_gather      pp-sg      2         1     8.00 KiB"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "send            pp         2         1     4.00 KiB"));
    harness_run_free(&r);
    for (int k = 0; k < 2; k++) {
        r = harness_npusim("plan", "--arch", "tpu-pod", "--model", "gpt-tiny", "--batch", "8",
                           "--tp", "2", "--pp", "2", "--json", k ? "--no-pp-scatter-gather" : NULL,
                           NULL);
        CU_ASSERT_EQUAL(r.exit_status, 0);
        json_t *j = json_loads(r.out, 0, NULL);
        CU_ASSERT_PTR_NOT_NULL_FATAL(j);
        CU_ASSERT_EQUAL(json_is_true(json_object_get(j, "pp_scatter_gather")), k == 0);
        CU_ASSERT_EQUAL(json_integer_value(json_object_get(j, "pp_scattered")), k ? 0 : 1);
        int gathers = 0;
        json_t *c;
        size_t i;
        json_array_foreach(json_object_get(j, "collectives"), i, c) {
            const char *kind = json_string_value(json_object_get(c, "kind"));
            const char *axis = json_string_value(json_object_get(c, "axis"));
            json_int_t bytes = json_integer_value(json_object_get(c, "bytes"));
            if (strcmp(axis, "pp-sg") == 0) {
                gathers++;
                CU_ASSERT_STRING_EQUAL(kind, "all_gather");
                CU_ASSERT_EQUAL(bytes, 8192);
                CU_ASSERT_EQUAL(json_integer_value(json_object_get(c, "group_size")), 2);
            }
            if (strcmp(kind, "send") == 0 || strcmp(kind, "recv") == 0)
                CU_ASSERT_EQUAL(bytes, k ? 8192 : 4096);
        }
        CU_ASSERT_EQUAL(gathers, k ? 0 : 2); /* stage 1 forward, stage 0 backward */
        json_decref(j);
        harness_run_free(&r);
    }
}

TEST(npusim_run_reports_the_gathers_as_their_own_kind_and_says_so_in_its_header)
{
    for (int k = 0; k < 2; k++) {
        harness_run r = harness_npusim("run", "--arch", "tpu-pod", "--model", "gpt-tiny", "--batch",
                                       "8", "--microbatch", "8", "--tp", "2", "--pp", "2",
                                       "--json", k ? "--no-pp-scatter-gather" : NULL, NULL);
        CU_ASSERT_EQUAL(r.exit_status, 0);
        json_t *j = json_loads(r.out, 0, NULL);
        CU_ASSERT_PTR_NOT_NULL_FATAL(j);
        CU_ASSERT_EQUAL(json_is_true(json_object_get(j, "pp_scatter_gather")), k == 0);
        CU_ASSERT_EQUAL(json_integer_value(json_object_get(j, "pp_scattered")), k ? 0 : 1);
        bool sg = false;
        json_t *c;
        size_t i;
        json_array_foreach(json_object_get(j, "comm"), i, c) {
            if (strcmp(json_string_value(json_object_get(c, "kind")), "pp-sg") != 0)
                continue;
            sg = true;
            /* one micro-batch of 8 x 16 tokens of width 32, bf16: N = 8 KiB a boundary; one
             * gather forward (stage 1's tp pair) and one backward (stage 0's), (2 - 1) N each:
             * 2 N over the 4 chips that take part, N / 2 each */
            CU_ASSERT_EQUAL(json_integer_value(json_object_get(c, "chips")), 4);
            CU_ASSERT_DOUBLE_EQUAL(json_number_value(json_object_get(c, "bytes_per_chip")),
                                   8192 / 2, 1e-9);
        }
        CU_ASSERT_EQUAL(sg, k == 0);
        json_decref(j);
        harness_run_free(&r);
    }
    harness_run r = harness_npusim("run", "--arch", "tpu-pod", "--model", "gpt-tiny", "--batch", "8",
                                   "--tp", "2", "--pp", "2", NULL);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "ZeRO 0, pipeline scatter/gather, recompute none"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "\n  pp-sg       4 "));
    harness_run_free(&r);
}
