/* test_run_full.c — full fidelity (sim/run_full.h): every rank of a plan lowered to ISA
 * programs and run on one system of chips. Values: gpt-tiny on 8 chips under dp2 x tp2 x pp2
 * (its pipeline boundary sent in 1/tp shards and gathered: Megatron's scatter/gather) trains
 * one step as the reference distributed executor (framework/dist.h) computes it, rank by rank,
 * and as one device does. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist.h"
#include "harness.h"
#include "lower.h"
#include "model.h"
#include "optim.h"
#include "pass.h"
#include "run_full.h"
#include "run_job.h"

static arch_config tiny(unsigned chips)
{
    arch_config cfg;
    np_err e = {0};
    char set[64];
    snprintf(set, sizeof set, "system.chips=%u", chips);
    const char *sets[] = {set};
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tiny", sets, 1, &cfg, &e), NP_OK);
    return cfg;
}

static const nn_optim sgd = {.kind = NN_OPTIM_SGD, .lr = 0.05, .momentum = 0.9};

static void make_batch(const nn_model *m, float *in, float *lab)
{
    for (int64_t i = 0; i < nn_numel(m->input); i++)
        in[i] = m->input->dtype == NN_I32 ? (float)(i * 7 % 16) : (float)sin((double)i * 0.37);
    for (int64_t i = 0; i < nn_numel(m->labels); i++)
        lab[i] = (float)(i * 5 % (m->labels->ndim > 1 ? 16 : 2));
}

/* The simulation's values: initial ones from `init` (parameters loaded, never stepped) and the
 * data of each micro-batch from `ref` (stepped); the step's results into `init`'s parameters
 * (for nn_dist_param) and into the losses. */
typedef struct io_ctx {
    nn_dist *init, *ref;
    const nn_plan *p;
    const float *input, *labels; /* the global batch */
    float *scratch;
    int n_bad;            /* leaves whose values differ from the reference executor's */
    double worst;         /* the largest relative difference of any leaf */
    double loss_sum;
    int n_loss;
} io_ctx;

/* A data leaf's micro-batch: rows of the global batch, dp rank c taking rows
 * [c B/dp, (c + 1) B/dp), micro-batch mb the mb-th run of `microbatch` of them (as dist.h). */
static const float *io_load(void *ctx, int rank, const nn_tensor *t, int mb)
{
    io_ctx *x = ctx;
    const nn_plan_leaf *l = nn_plan_leaf_of(&x->p->classes[nn_plan_rank_class(x->p, rank)], t);
    if (!l || l->kind != NN_LEAF_DATA)
        return nn_dist_values(x->init, rank, t, mb);
    int co[NN_MESH_AXES];
    nn_mesh_coords(&x->p->mesh, rank, co);
    int64_t n = nn_numel(t), row = n / x->p->microbatch;
    int64_t first = co[NN_MESH_DP] * (x->p->batch / x->p->mesh.size[NN_MESH_DP]) +
                    (int64_t)mb * x->p->microbatch;
    const float *src = strcmp(l->source, "labels") == 0 ? x->labels : x->input;
    memcpy(x->scratch, src + first * row, (size_t)n * sizeof(float));
    return x->scratch;
}

static np_status io_store(void *ctx, int rank, const nn_tensor *t, int mb, const float *v,
                          np_err *err)
{
    io_ctx *x = ctx;
    const nn_plan_class *c = &x->p->classes[nn_plan_rank_class(x->p, rank)];
    if (t == c->loss) {
        int co[NN_MESH_AXES];
        nn_mesh_coords(&x->p->mesh, rank, co);
        if (co[NN_MESH_TP] == 0) { /* the tp ranks hold the same loss */
            x->loss_sum += v[0];
            x->n_loss++;
        }
        return NP_OK;
    }
    /* against the reference executor's values of the same rank; a gradient accumulator is
     * all-reduced in place here (the executor reduces into a buffer of its own and leaves the
     * accumulator local), and zeroed before it is read again: not compared */
    const nn_plan_leaf *l = nn_plan_leaf_of(c, t);
    if (l && l->kind == NN_LEAF_GRADBUF)
        return NP_OK;
    const float *want = nn_dist_values(x->ref, rank, t, mb);
    double mx = 1e-3, md = 0;
    for (int64_t i = 0; i < nn_numel(t); i++) {
        double w = want ? want[i] : 0;
        mx = fmax(mx, fabs(w));
        md = fmax(md, fabs(v[i] - w));
    }
    x->worst = fmax(x->worst, md / mx);
    x->n_bad += md / mx > 1e-4;
    float *mine = nn_dist_values(x->init, rank, t, mb);
    if (mine)
        memcpy(mine, v, (size_t)nn_numel(t) * sizeof *v);
    (void)err;
    return NP_OK;
}

/* One step of model under dp x tp x pp (micro-batches of `micro` samples) on 8 chips of tiny:
 * every rank's leaves against the distributed executor's, the loss and the reassembled
 * parameters against one device's, within 1e-5 relative (fp32). */
static void check_plan_of(const char *model, int64_t batch, int dp, int tp, int pp,
                          int64_t micro, bool fused)
{
    arch_config cfg = tiny(8);
    np_err e = {0};
    nn_model_desc d;
    CU_ASSERT_EQUAL_FATAL(nn_model_load(model, &d, &e), NP_OK);
    nn_model_opts mo = {.batch = batch, .compute = NN_F32, .seed = 5};
    /* one device: the reference step */
    nn_model one, init;
    CU_ASSERT_EQUAL_FATAL(nn_model_build(&d, &mo, &one, &e), NP_OK);
    int n_fused = 0;
    if (fused) { /* the attention op (kc_attn.c's kernels) instead of the composite */
        CU_ASSERT_EQUAL_FATAL(nn_pass_fuse_attention(one.g, &n_fused, &e), NP_OK);
        CU_ASSERT_FATAL(n_fused > 0);
    }
    CU_ASSERT_EQUAL_FATAL(nn_model_init(one.g, 11, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(nn_model_build(&d, &mo, &init, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(nn_model_init(init.g, 11, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(nn_backward(one.g, one.loss, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(nn_optim_step(one.g, &sgd, &e), NP_OK);
    nn_tensor_alloc(one.input);
    nn_tensor_alloc(one.labels);
    make_batch(&one, one.input->data, one.labels->data);
    float *in = malloc((size_t)nn_numel(one.input) * sizeof *in);
    float *lab = malloc((size_t)nn_numel(one.labels) * sizeof *lab);
    memcpy(in, one.input->data, (size_t)nn_numel(one.input) * sizeof *in);
    memcpy(lab, one.labels->data, (size_t)nn_numel(one.labels) * sizeof *lab);
    CU_ASSERT_EQUAL_FATAL(nn_graph_compute(one.g, &e), NP_OK);
    /* dp2 x tp2 x pp2, 1F1B, 2 micro-batches: the reference distributed step */
    nn_strategy s;
    nn_strategy_default(&s);
    s.dp = dp;
    s.tp = tp;
    s.pp = pp;
    s.microbatch = micro;
    nn_plan *p = NULL;
    nn_dist *ref = NULL, *start = NULL;
    double ref_loss;
    if (fused) { /* the plan of the fused graph of one micro-batch */
        nn_model m0;
        nn_model_opts mo0 = mo;
        mo0.batch = micro;
        CU_ASSERT_EQUAL_FATAL(nn_model_build(&d, &mo0, &m0, &e), NP_OK);
        CU_ASSERT_EQUAL_FATAL(nn_pass_fuse_attention(m0.g, &n_fused, &e), NP_OK);
        CU_ASSERT_EQUAL_FATAL(nn_plan_build_graph(&m0, model, batch, &s, &sgd, &cfg, &p, &e),
                              NP_OK);
        nn_graph_free(m0.g);
    } else {
        CU_ASSERT_EQUAL_FATAL(nn_plan_build(&d, &mo, &s, &sgd, &cfg, &p, &e), NP_OK);
    }
    if (fused) { /* every attention_lse is its attention kernel's second output */
        lower_prog *lp = NULL;
        CU_ASSERT_EQUAL_FATAL(lower_plan_rank(&cfg, p, 0, &(lower_opts){0}, &lp, &e), NP_OK);
        int n_attn = 0, n_lse = 0;
        for (uint32_t i = 0; i < lp->n_steps; i++) {
            n_attn += lp->steps[i].node->op == NN_OP_ATTENTION;
            n_lse += lp->steps[i].node->op == NN_OP_ATTENTION_LSE;
        }
        CU_ASSERT(n_attn > 0);
        CU_ASSERT_EQUAL(n_lse, 0);
        lower_prog_free(lp);
    }
    /* gpt-tiny's pipeline boundary (replicated over tp) is sent in 1/tp shards and gathered
     * (nn_strategy.pp_scatter_gather, on by default): each rank's share at its offset */
    if (strcmp(model, "gpt-tiny") == 0 && tp > 1 && pp > 1)
        CU_ASSERT_EQUAL(p->pp_scattered, 1);
    CU_ASSERT_EQUAL_FATAL(nn_dist_new(p, &ref, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(nn_dist_new(p, &start, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(nn_dist_load_params(ref, init.g, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(nn_dist_load_params(start, init.g, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(nn_dist_step(ref, in, lab, &ref_loss, &e), NP_OK);
    /* the same step on 8 simulated chips */
    float scratch[4096];
    io_ctx x = {.init = start, .ref = ref, .p = p, .input = in, .labels = lab, .scratch = scratch};
    run_full_opts o = {.functional = true,
                       .io = {.load = io_load, .store = io_store, .ctx = &x}};
    run_full_result r;
    np_status st = run_full_plan(&cfg, p, &o, &r, &e);
    if (st != NP_OK)
        fprintf(stderr, "%s\n", e.msg);
    CU_ASSERT_EQUAL_FATAL(st, NP_OK);
    double loss = x.loss_sum / x.n_loss;
    fprintf(stderr, "%s%s dp%d tp%d pp%d: loss %.6f (distributed executor %.6f, one device "
                    "%.6f), %llu kernels and %llu comm entries on %d chips, %.3f us, every leaf "
                    "within %.2e of the executor's\n", model, fused ? " (fused attention)" : "",
            dp, tp, pp, loss, ref_loss, one.loss->data[0],
            (unsigned long long)r.kernels, (unsigned long long)r.comm, dp * tp * pp,
            r.r->time_ps * 1e-6, x.worst);
    CU_ASSERT_EQUAL(x.n_loss, dp * p->n_micro); /* every dp rank's micro-batches */
    CU_ASSERT(fabs(loss - ref_loss) < 1e-5 * fabs(ref_loss));
    CU_ASSERT(fabs(loss - one.loss->data[0]) < 1e-5 * fabs(one.loss->data[0]));
    CU_ASSERT_EQUAL(x.n_bad, 0);
    /* the simulated parameters, reassembled from the ranks, against one device's */
    double worst = 0;
    for (int i = 0; i < nn_graph_n_nodes(one.g); i++) {
        const nn_tensor *t = nn_graph_node(one.g, i);
        if (t->op != NN_OP_LEAF || !t->trainable)
            continue;
        int64_t n = nn_numel(t);
        float *v = malloc((size_t)n * sizeof *v);
        CU_ASSERT_EQUAL(nn_dist_param(start, t->name, v, n, &e), NP_OK);
        double mx = 1e-3, md = 0;
        for (int64_t k = 0; k < n; k++) {
            mx = fmax(mx, fabs(t->data[k]));
            md = fmax(md, fabs(v[k] - t->data[k]));
        }
        worst = fmax(worst, md / mx);
        free(v);
    }
    fprintf(stderr, "parameters within %.2e of one device's\n", worst);
    CU_ASSERT(worst < 1e-5);
    run_full_result_free(&r);
    nn_dist_free(ref);
    nn_dist_free(start);
    nn_plan_free(p);
    nn_graph_free(one.g);
    nn_graph_free(init.g);
    free(in);
    free(lab);
}

static void check_plan(const char *model, int64_t batch, int dp, int tp, int pp, int64_t micro)
{
    check_plan_of(model, batch, dp, tp, pp, micro, false);
}

TEST(gpt_tiny_on_8_chips_trains_one_step_as_the_distributed_executor_and_one_device)
{
    check_plan("gpt-tiny", 4, 2, 2, 2, 1);
}

TEST(gpt_tiny_with_fused_attention_under_tp2_trains_one_step_as_one_device)
{
    check_plan_of("gpt-tiny", 4, 2, 2, 2, 1, true); /* each rank's heads on its chip */
}

TEST(mlp_tiny_on_8_chips_trains_one_step_as_the_distributed_executor_and_one_device)
{
    check_plan("mlp-tiny", 64, 2, 2, 2, 8);
}

TEST(gpt_tiny_on_8_chips_dp4_pp2_trains_one_step_as_the_distributed_executor_and_one_device)
{
    check_plan("gpt-tiny", 8, 4, 1, 2, 1);
}

TEST(mlp_tiny_under_tp8_and_dp8_trains_one_step_as_the_distributed_executor_and_one_device)
{
    check_plan("mlp-tiny", 64, 1, 8, 1, 64); /* every layer's 32 units split 4 a chip */
    check_plan("mlp-tiny", 64, 8, 1, 1, 8);
}

TEST(gpt_tiny_under_dp8_and_dp2_tp4_trains_one_step_as_the_distributed_executor_and_one_device)
{
    check_plan("gpt-tiny", 8, 8, 1, 1, 1);
    check_plan("gpt-tiny", 4, 2, 4, 1, 2); /* one head a chip */
}

TEST(the_functional_run_of_gpt_tiny_dp2_tp2_pp2_in_bf16_gives_the_executors_loss)
{
    /* what `npusim run --fidelity full --functional --model gpt-tiny --batch 8 --dp 2 --tp 2
     * --pp 2` runs (run_job: bf16 compute, fp32 masters, AdamW, 1F1B): the simulated step's
     * mean loss against the distributed executor's, within bf16's 2^-7 */
    arch_config cfg = tiny(8);
    np_err e = {0};
    nn_model_desc d;
    CU_ASSERT_EQUAL_FATAL(nn_model_load("gpt-tiny", &d, &e), NP_OK);
    run_job j = {.cfg = &cfg, .model = &d, .steps = 1, .full = true, .functional = true};
    nn_strategy_default(&j.s);
    j.s.dp = j.s.tp = j.s.pp = 2;
    j.o = (nn_model_opts){.batch = 8, .compute = NN_BF16, .seed = 1};
    j.optim = (nn_optim){.kind = NN_OPTIM_ADAMW, .lr = 1e-4, .beta1 = 0.9, .beta2 = 0.95,
                         .eps = 1e-8, .weight_decay = 0.1};
    run_report rep;
    np_status st = run_job_run(&j, &rep, &e);
    if (st != NP_OK)
        fprintf(stderr, "%s\n", e.msg);
    CU_ASSERT_EQUAL_FATAL(st, NP_OK);
    fprintf(stderr, "gpt-tiny bf16 dp2 tp2 pp2: loss %.6f, the distributed executor %.6f\n",
            rep.loss, rep.loss_reference);
    CU_ASSERT(rep.loss_reference > 1);
    CU_ASSERT(fabs(rep.loss - rep.loss_reference) <= 0x1p-7 * fabs(rep.loss_reference));
    run_report_free(&rep);
}

TEST(moe_tiny_under_dp2_and_dp2_tp2_pp2_trains_one_step_as_the_distributed_executor_and_one_device)
{
    /* 8 experts, top-2, dropless: the router's top-k, dispatch, the grouped matmuls (rows from
     * the indices on the VPU) and combine through the ISA give one device's loss and
     * parameters */
    check_plan("moe-tiny", 4, 2, 1, 1, 2);
    check_plan("moe-tiny", 4, 2, 2, 2, 1);
}
