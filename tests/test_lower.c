/* test_lower.c — whole graphs lowered to one program per core (compiler/lower.h) and run on
 * the core model (sim/run_full.h), against the framework's reference executor: a layer
 * stack's values, the kernels it becomes (epilogues fused, transposes folded), the arena
 * against the framework's memory planner, errors that name the op, and the zoo's training
 * steps (loss and updated parameters within the documented tolerance, docs/compiler.md). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "lower.h"
#include "model.h"
#include "optim.h"
#include "pass.h"
#include "run_full.h"
#include "run_plan.h"

static arch_config tiny(void)
{
    arch_config cfg;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tiny", NULL, 0, &cfg, &e), NP_OK);
    return cfg;
}

/* The largest |a - b| over t's elements relative to the largest |b| (at least floor). */
static double rel_err(const float *a, const float *b, int64_t n, double floor)
{
    double mx = floor, md = 0;
    for (int64_t i = 0; i < n; i++) {
        mx = fmax(mx, fabs(b[i]));
        md = fmax(md, fabs((double)a[i] - b[i]));
    }
    return md / mx;
}

/* y = relu(x w1 + b1) w2^T + b2, w2 given as [13, 29]: two matmul kernels, the bias and relu
 * in the first one's epilogue, the transpose folded into the second one's operand. */
typedef struct stack {
    nn_graph *g;
    nn_tensor *x, *w1, *b1, *w2, *b2, *h, *hr, *wt, *y;
} stack;

static stack make_stack(nn_dtype dt)
{
    stack s;
    s.g = nn_graph_new(1);
    s.x = nn_input(s.g, "x", dt, 2, (int64_t[]){37, 45});
    s.w1 = nn_param(s.g, "w1", dt, 2, (int64_t[]){45, 29});
    s.b1 = nn_param(s.g, "b1", dt, 1, (int64_t[]){29});
    s.w2 = nn_param(s.g, "w2", dt, 2, (int64_t[]){13, 29});
    s.b2 = nn_param(s.g, "b2", dt, 1, (int64_t[]){13});
    s.h = nn_add(s.g, nn_matmul(s.g, s.x, s.w1), s.b1);
    s.hr = nn_relu(s.g, s.h);
    s.wt = nn_transpose(s.g, s.w2);
    s.y = nn_add(s.g, nn_matmul(s.g, s.hr, s.wt), s.b2);
    nn_graph_set_output(s.g, s.y);
    CU_ASSERT_EQUAL_FATAL(nn_graph_status(s.g, NULL), NP_OK);
    nn_tensor *leaves[] = {s.x, s.w1, s.b1, s.w2, s.b2};
    for (int i = 0; i < 5; i++)
        nn_tensor_randn(leaves[i], 10 + (uint64_t)i, i == 0 ? 1.0 : 0.3);
    return s;
}

TEST(a_layer_stack_runs_on_the_core_model_as_the_reference_computes_it)
{
    arch_config cfg = tiny();
    const nn_dtype dts[] = {NN_F32, NN_BF16};
    for (int d = 0; d < 2; d++) {
        stack ref = make_stack(dts[d]), sim = make_stack(dts[d]);
        np_err e = {0};
        CU_ASSERT_EQUAL_FATAL(nn_graph_compute(ref.g, &e), NP_OK);
        run_full_graph_result r;
        np_status st = run_full_graph(&cfg, sim.g, &(run_full_graph_opts){.functional = true},
                                      &r, &e);
        if (st != NP_OK)
            fprintf(stderr, "%s\n", e.msg);
        CU_ASSERT_EQUAL_FATAL(st, NP_OK);
        /* what the graph became: 2 kernels on both cores, the add and relu fused into the
         * first, the transpose folded into the second's operand and its bias fused */
        CU_ASSERT_EQUAL(r.lp->n_steps, 2);
        CU_ASSERT_EQUAL(r.lp->cores, 2);
        CU_ASSERT_EQUAL(r.lp->steps[0].k.n_epi, 2);
        CU_ASSERT_EQUAL(r.lp->steps[1].k.n_epi, 1);
        CU_ASSERT_EQUAL(r.lp->kind[sim.wt->id], LOWER_NODE_FOLDED);
        CU_ASSERT_EQUAL(r.lp->kind[sim.h->id], LOWER_NODE_FUSED);
        CU_ASSERT_EQUAL(r.lp->addr[sim.h->id], UINT64_MAX); /* never stored */
        CU_ASSERT(r.cycles > 0);
        /* fp32: the GEMM rounds as the reference does, the fused bias is added to the fp32
         * sum once (an ulp); bf16: the epilogue saves the rounding of x w1 (2^-7 of it) */
        double tol = dts[d] == NN_F32 ? 1e-6 : 2.0 / 128;
        double err = rel_err(sim.y->data, ref.y->data, nn_numel(ref.y), 1e-3);
        fprintf(stderr, "%s: %llu cycles, worst relative error %.2e\n", nn_dtype_name(dts[d]),
                (unsigned long long)r.cycles, err);
        CU_ASSERT(err < tol);
        CU_ASSERT(err > 0 || dts[d] == NN_F32);
        run_full_graph_result_free(&r);
        nn_graph_free(ref.g);
        nn_graph_free(sim.g);
    }
}

TEST(without_fusion_every_node_is_its_own_kernel_and_a_missing_kernel_is_named)
{
    arch_config cfg = tiny();
    stack s = make_stack(NN_F32);
    np_err e = {0};
    lower_prog *lp = NULL;
    np_status st = lower_graph(&cfg, s.g, &(lower_opts){.no_fuse = true}, &lp, &e);
    /* in schedule order: matmul, add, relu, permute, matmul, add */
    const nn_op need[] = {NN_OP_ADD, NN_OP_RELU, NN_OP_PERMUTE};
    const char *want[] = {"no kernel for add f32[37,29], f32[29] -> f32[37,29] yet (node '",
                          "no kernel for relu f32[37,29] -> f32[37,29] yet (node '",
                          "no kernel for permute f32[13,29] -> f32[29,13] yet (node '"};
    int miss = 0;
    while (miss < 3 && kc_kernel_find(need[miss]))
        miss++;
    if (miss == 3) { /* every kernel is there */
        CU_ASSERT_EQUAL(st, NP_OK);
        CU_ASSERT(lp && lp->n_steps == 6);
    } else {
        CU_ASSERT_EQUAL(st, NP_ERR_MISSING);
        CU_ASSERT_PTR_NULL(lp);
        CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, want[miss]));
    }
    lower_prog_free(lp);
    nn_graph_free(s.g);
}

/* A chain of matmuls whose intermediates die one after the other. */
TEST(the_arena_places_buffers_as_the_frameworks_memory_planner_does)
{
    arch_config cfg = tiny();
    nn_graph *g = nn_graph_new(1);
    nn_tensor *y = nn_input(g, "x", NN_F32, 2, (int64_t[]){16, 24}), *first = NULL;
    for (int i = 0; i < 5; i++) {
        int64_t n = i % 2 ? 24 : 40, k = y->ne[1];
        y = nn_matmul(g, y, nn_param(g, "w", NN_F32, 2, (int64_t[]){k, n}));
        if (!i)
            first = y;
    }
    y = nn_matmul(g, y, nn_transpose(g, first)); /* keeps the first product alive */
    nn_graph_set_output(g, y);
    CU_ASSERT_EQUAL_FATAL(nn_graph_status(g, NULL), NP_OK);
    np_err e = {0};
    nn_memplan mp;
    CU_ASSERT_EQUAL_FATAL(nn_memplan_build(g, &mp, &e), NP_OK);
    lower_prog *lp = NULL;
    CU_ASSERT_EQUAL_FATAL(lower_graph(&cfg, g, &(lower_opts){0}, &lp, &e), NP_OK);
    /* the transpose has no buffer of its own here (folded), the planner gives it one */
    uint64_t t_bytes = (nn_nbytes(first) + 63) / 64 * 64;
    CU_ASSERT(lp->arena_bytes <= mp.arena_bytes);
    CU_ASSERT(lp->arena_bytes + t_bytes >= mp.arena_bytes);
    CU_ASSERT(lp->arena_bytes < mp.no_reuse_bytes); /* buffers are reused */
    /* every stored node at the planner's offset when nothing is folded before it */
    CU_ASSERT_EQUAL(lp->addr[first->id] - lp->arena_addr, mp.offset[first->id]);
    fprintf(stderr, "arena %llu bytes, planner %llu, no reuse %llu\n",
            (unsigned long long)lp->arena_bytes, (unsigned long long)mp.arena_bytes,
            (unsigned long long)mp.no_reuse_bytes);
    nn_memplan_free(&mp);
    lower_prog_free(lp);
    nn_graph_free(g);
}

/* ---- the zoo's training steps ------------------------------------------------------------- */

/* Builds model m's training step (SGD with momentum, batch b) with parameters from seed 11. */
static bool train_graph(const char *model, int64_t batch, nn_dtype dt, nn_model *m)
{
    np_err e = {0};
    nn_model_desc d;
    nn_optim sgd = {.kind = NN_OPTIM_SGD, .lr = 0.05, .momentum = 0.9};
    nn_model_opts o = {.batch = batch, .compute = dt, .seed = 5};
    if (nn_model_load(model, &d, &e) != NP_OK || nn_model_build(&d, &o, m, &e) != NP_OK ||
        nn_model_init(m->g, 11, &e) != NP_OK || nn_backward(m->g, m->loss, &e) != NP_OK ||
        nn_optim_step(m->g, &sgd, &e) != NP_OK) {
        fprintf(stderr, "%s: %s\n", model, e.msg);
        return false;
    }
    nn_tensor_alloc(m->input);
    nn_tensor_alloc(m->labels);
    for (int64_t i = 0; i < nn_numel(m->input); i++)
        m->input->data[i] = m->input->dtype == NN_I32 ? (float)(i * 7 % 16)
                                                      : (float)sin((double)i * 0.37);
    for (int64_t i = 0; i < nn_numel(m->labels); i++)
        m->labels->data[i] = (float)(i * 5 % (m->labels->ndim > 1 ? 16 : 2));
    return true;
}

/* The first op of g's schedule that would need a kernel the table does not have. */
static const nn_tensor *first_missing(nn_graph *g)
{
    nn_tensor **order;
    int n;
    if (nn_schedule(g, &order, &n, NULL) != NP_OK)
        return NULL;
    const nn_tensor *miss = NULL;
    for (int i = 0; i < n && !miss; i++) {
        const nn_tensor *t = order[i];
        if (t->op != NN_OP_LEAF && !(nn_op_flags(t->op) & NN_OPF_VIEW) &&
            !kc_no_kernel_reason(t->op) && !kc_kernel_find(t->op) &&
            !(t->op == NN_OP_PERMUTE && kc_kernel_find(NN_OP_MATMUL)) &&
            !(nn_op_flags(t->op) & NN_OPF_ELEM && t->fusion_group >= 0 &&
              t->fusion_group != t->id))
            miss = t;
    }
    free(order);
    return miss;
}

/* One training step of model: the reference executor's loss and parameters against the
 * core model's, worst relative error per tensor (against its largest magnitude, at least
 * 1e-3) below tol. Without every kernel the step needs, the lowering's error must name the
 * first op that lacks one. */
static void check_step(const char *model, int64_t batch, nn_dtype dt, double tol)
{
    arch_config cfg = tiny();
    nn_model ref, sim;
    CU_ASSERT_FATAL(train_graph(model, batch, dt, &ref) && train_graph(model, batch, dt, &sim));
    nn_pass_fuse(sim.g);
    const nn_tensor *miss = first_missing(sim.g);
    np_err e = {0};
    run_full_graph_result r;
    np_status st = run_full_graph(&cfg, sim.g, &(run_full_graph_opts){.functional = true}, &r,
                                  &e);
    if (miss) {
        char want[128];
        snprintf(want, sizeof want, "no kernel for %s ", nn_op_name(miss->op));
        fprintf(stderr, "%s: %s\n", model, e.msg);
        CU_ASSERT_EQUAL(st, NP_ERR_MISSING);
        CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, want));
        CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, miss->name));
    } else {
        if (st != NP_OK)
            fprintf(stderr, "%s: %s\n", model, e.msg);
        CU_ASSERT_EQUAL_FATAL(st, NP_OK);
        CU_ASSERT_EQUAL_FATAL(nn_graph_compute(ref.g, &e), NP_OK);
        double worst = rel_err(sim.loss->data, ref.loss->data, 1, 1e-3);
        fprintf(stderr, "%s %s: loss %.6f (reference %.6f), %u kernels, %llu cycles\n", model,
                nn_dtype_name(dt), sim.loss->data[0], ref.loss->data[0], r.lp->n_steps,
                (unsigned long long)r.cycles);
        for (int i = 0; i < nn_graph_n_nodes(ref.g); i++) {
            nn_tensor *t = nn_graph_node(ref.g, i), *u = nn_graph_node(sim.g, i);
            if (t->op == NN_OP_LEAF && t->trainable)
                worst = fmax(worst, rel_err(u->data, t->data, nn_numel(t), 1e-3));
        }
        fprintf(stderr, "%s %s: worst relative error %.2e (tolerance %.1e)\n", model,
                nn_dtype_name(dt), worst, tol);
        CU_ASSERT(worst < tol);
        run_full_graph_result_free(&r);
    }
    nn_graph_free(ref.g);
    nn_graph_free(sim.g);
}

TEST(mlp_tiny_trains_one_step_on_the_core_model_as_the_reference_executor)
{
    check_step("mlp-tiny", 64, NN_F32, 1e-4);
}

TEST(gpt_tiny_trains_one_step_on_the_core_model_as_the_reference_executor)
{
    check_step("gpt-tiny", 4, NN_F32, 1e-4);
}

/* Mixed precision: bf16 activations and gradients, fp32 masters. The kernels round where the
 * reference rounds, but sum in other orders and fuse steps: a gradient differs by a few bf16
 * ulps (2^-8 relative each), so a parameter's update does too; parameters whose update is
 * all there is (biases from zero) show it relative to their own magnitude. */
TEST(mixed_precision_steps_match_the_reference_within_bf16_tolerance)
{
    check_step("mlp-tiny", 64, NN_BF16, 2e-2);
    check_step("gpt-tiny", 4, NN_BF16, 5e-2);
}

/* ---- the zoo: every kernel of every model's plan builds ------------------------------------ */

/* Compiles every distinct kernel of model name's plan under s on arch (each alone, as `npusim
 * run` times them; nothing simulated); the kernels that do not build, each printed. */
static int zoo_plan_failures(const char *name, const char *arch, const nn_strategy *s,
                             int64_t batch, int64_t seq, uint32_t *kernels)
{
    np_err e = {0};
    arch_config cfg;
    nn_model_desc d;
    CU_ASSERT_EQUAL_FATAL(arch_resolve(arch, NULL, 0, &cfg, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(nn_model_load(name, &d, &e), NP_OK);
    nn_model_opts o = {.batch = batch, .seq = seq, .compute = NN_BF16, .seed = 1};
    nn_optim opt = {.kind = NN_OPTIM_ADAMW, .lr = 1e-4, .beta1 = 0.9, .beta2 = 0.95,
                    .eps = 1e-8, .weight_decay = 0.1};
    nn_plan *p = NULL;
    run_plan *rp = NULL;
    if (nn_plan_build(&d, &o, s, &opt, &cfg, &p, &e) != NP_OK ||
        run_plan_build(p, &cfg, NULL, &rp, &e) != NP_OK) {
        fprintf(stderr, "%s: %s\n", name, e.msg);
        nn_plan_free(p);
        return 1;
    }
    int bad = 0;
    for (uint32_t i = 0; i < rp->n_kspecs; i++) {
        kc_result r;
        np_err ke = {0};
        if (lower_kernel_alone(&cfg, &rp->kspecs[i].k, &r, NULL, &ke) != NP_OK) {
            char key[RUN_KEY_MAX];
            run_kernel_key(&rp->kspecs[i].k, key, sizeof key);
            fprintf(stderr, "%s: %s: %s\n", name, key, ke.msg);
            bad++;
        }
    }
    *kernels = rp->n_kspecs;
    run_plan_free(rp);
    nn_plan_free(p);
    return bad;
}

TEST(every_zoo_model_builds_every_kernel_of_its_plan_on_tpu_pod)
{
    /* batch 2 in micro-batches of 1, language models at 16 tokens (their widths, heads and
     * vocabularies as the zoo has them: GPT-3 175B's 12288-wide layers, Llama 2 70B's
     * grouped-query attention), bf16 with AdamW; tp 2 where the model splits (transformers
     * and MLPs; gpt2-xl's 25 heads do not: pp 2), dp 2 for the convolutional ones; the
     * mixtures of experts have no kernels yet */
    char **names;
    size_t n;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(nn_model_names(&names, &n, &e), NP_OK);
    CU_ASSERT_FATAL(n >= 20);
    for (size_t i = 0; i < n; i++) {
        nn_strategy s;
        nn_strategy_default(&s);
        nn_model_desc d;
        CU_ASSERT_EQUAL_FATAL(nn_model_load(names[i], &d, &e), NP_OK);
        if (nn_model_int(&d, "experts", 0)) /* MoE kernels are later work (kernels.def's */
            continue;                       /* KC_NOT_YET; test_models.c checks the message) */
        const char *fam = nn_model_word(&d, "family", "");
        bool split = !strcmp(fam, "gpt") || !strcmp(fam, "llama") || !strcmp(fam, "mlp");
        bool heads_odd = nn_model_int(&d, "heads", 2) % 2 != 0;
        s.microbatch = 1;
        if (!split)
            s.dp = 2;
        else if (heads_odd)
            s.pp = 2;
        else
            s.tp = 2;
        uint32_t kernels = 0;
        int bad = zoo_plan_failures(names[i], "tpu-pod", &s, 2, 16, &kernels);
        fprintf(stderr, "%s: %u kernels, %d do not build\n", names[i], kernels, bad);
        CU_ASSERT_EQUAL(bad, 0);
        CU_ASSERT(kernels > 0);
    }
    nn_model_names_free(names, n);
}

TEST(every_kernel_of_a_gpt3_175b_layer_builds_and_counts_megatrons_flops)
{
    /* layer 0 of GPT-3 175B at micro-batch 1, sequence 2048 on one tpu-pod chip: forward,
     * backward and AdamW; compiled, not simulated (bench/bench_layer_compile times it). The
     * kernels' FLOPs against Narayanan et al.'s 72 B s h^2 (1 + s / 6h) per layer: within 1 %
     * (the rest: norms, softmax, the update) */
    np_err e = {0};
    arch_config cfg;
    nn_model_desc d;
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tpu-pod", NULL, 0, &cfg, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(nn_model_load("gpt3-175b", &d, &e), NP_OK);
    nn_strategy s;
    nn_strategy_default(&s);
    s.microbatch = 1;
    nn_model_opts o = {.batch = 1, .seq = 2048, .compute = NN_BF16, .seed = 1};
    nn_optim opt = {.kind = NN_OPTIM_ADAMW, .lr = 1e-4, .beta1 = 0.9, .beta2 = 0.95,
                    .eps = 1e-8, .weight_decay = 0.1};
    nn_plan *p = NULL;
    CU_ASSERT_EQUAL_FATAL(nn_plan_build(&d, &o, &s, &opt, &cfg, &p, &e), NP_OK);
    int n = lower_plan_layer_nodes(p, 0, NULL, 0);
    CU_ASSERT_FATAL(n > 0);
    const nn_tensor **nodes = calloc((size_t)n, sizeof *nodes);
    CU_ASSERT_PTR_NOT_NULL_FATAL(nodes);
    CU_ASSERT_EQUAL(lower_plan_layer_nodes(p, 0, nodes, n), n);
    int by_region[4] = {0}, bad = 0;
    double flops = 0;
    for (int i = 0; i < n; i++) {
        kc_kernel k;
        kc_result r;
        by_region[nodes[i]->region & 3]++;
        if (lower_node_kernel(nodes[i], (uint32_t)cfg.chip.cores, &k, &e) != NP_OK ||
            lower_kernel_alone(&cfg, &k, &r, NULL, &e) != NP_OK) {
            fprintf(stderr, "%s: %s\n", nodes[i]->name, e.msg);
            bad++;
            continue;
        }
        flops += (double)r.flops;
    }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT(by_region[NN_REGION_FORWARD] > 0 && by_region[NN_REGION_BACKWARD] > 0);
    CU_ASSERT(by_region[NN_REGION_OPTIM] >= 12); /* 4 linear layers' w and b, 2 norms' */
    double h = 12288, sq = 2048, want = 72 * sq * h * h * (1 + sq / (6 * h));
    fprintf(stderr, "gpt3-175b layer 0: %d kernels, %.4g FLOPs (Megatron's %.4g)\n", n, flops,
            want);
    CU_ASSERT(fabs(flops / want - 1) < 0.01);
    free(nodes);
    nn_plan_free(p);
}

TEST(a_kernel_compiled_alone_has_room_for_megabytes_of_constants)
{
    /* RoPE over 2048 positions of 128-wide heads: its cos/sin table is 1.5 MiB of .data,
     * more than the emitter's default 960 KiB below .bss */
    np_err e = {0};
    arch_config cfg;
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tpu-pod", NULL, 0, &cfg, &e), NP_OK);
    nn_graph *g = nn_graph_new(1);
    nn_tensor *x = nn_input(g, "x", NN_BF16, 4, (int64_t[]){1, 2, 2048, 128});
    nn_tensor *y = nn_rope(g, x, 10000);
    kc_kernel k;
    kc_result r;
    isa_program *prog = NULL;
    CU_ASSERT_EQUAL_FATAL(lower_node_kernel(y, 8, &k, &e), NP_OK);
    np_status st = lower_kernel_alone(&cfg, &k, &r, &prog, &e);
    if (st != NP_OK)
        fprintf(stderr, "%s\n", e.msg);
    CU_ASSERT_EQUAL(st, NP_OK);
    CU_ASSERT_PTR_NOT_NULL(prog);
    isa_program_free(prog);
    nn_graph_free(g);
}

/* ---- lower_prog_verify ---- */

static void expect_lowered_broken(const lower_prog *lp, const nn_plan *p, const char *phrase)
{
    np_err e = {0};
    CU_ASSERT_EQUAL(lower_prog_verify(lp, p, 0, &e), NP_ERR_INTERNAL);
    if (!strstr(e.msg, phrase))
        fprintf(stderr, "expected \"%s\" in: %s\n", phrase, e.msg);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, phrase));
}

TEST(the_lowered_program_verifier_names_a_misplaced_operand_a_lost_kernel_and_a_bad_total)
{
    arch_config cfg;
    np_err e = {0};
    const char *sets[] = {"system.chips=8"};
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tiny", sets, 1, &cfg, &e), NP_OK);
    nn_model_desc d;
    CU_ASSERT_EQUAL_FATAL(nn_model_load("gpt-tiny", &d, &e), NP_OK);
    nn_strategy s;
    nn_strategy_default(&s);
    s.dp = s.tp = s.pp = 2;
    s.microbatch = 1;
    nn_plan *p = NULL;
    nn_optim sgd = {.kind = NN_OPTIM_SGD, .lr = 0.1};
    nn_model_opts mo = {.batch = 4, .compute = NN_F32, .seed = 1};
    CU_ASSERT_EQUAL_FATAL(nn_plan_build(&d, &mo, &s, &sgd, &cfg, &p, &e), NP_OK);
    lower_prog *lp = NULL;
    CU_ASSERT_EQUAL_FATAL(lower_plan_rank(&cfg, p, 0, &(lower_opts){0}, &lp, &e), NP_OK);
    CU_ASSERT_EQUAL(lower_prog_verify(lp, p, 0, &e), NP_OK);
    CU_ASSERT_FATAL(lp->n_steps > 2 && lp->n_comm > 1);
    /* an operand outside every data section, an output not where its value lives */
    kc_tensor keep = lp->steps[1].k.in[0];
    lp->steps[1].k.in[0].addr = 1ull << 40;
    expect_lowered_broken(lp, p, "in no data section");
    lp->steps[1].k.in[0] = keep;
    uint32_t k = 0; /* a kernel storing a value of its own (not an update in place) */
    while (k < lp->n_steps && lower_addr_mb(lp, lp->steps[k].last, lp->steps[k].mb) == UINT64_MAX)
        k++;
    CU_ASSERT_FATAL(k < lp->n_steps);
    keep = lp->steps[k].k.out[0];
    lp->steps[k].k.out[0].addr += 64;
    expect_lowered_broken(lp, p, "where the program keeps it");
    lp->steps[k].k.out[0] = keep;
    /* totals */
    lp->flops++;
    expect_lowered_broken(lp, p, "kernels' sums");
    lp->flops--;
    /* two kernels swapped, a communication record of another entry */
    lower_step st = lp->steps[0];
    lp->steps[0] = lp->steps[1];
    lp->steps[1] = st;
    expect_lowered_broken(lp, p, "where the plan issues it");
    lp->steps[1] = lp->steps[0];
    lp->steps[0] = st;
    const nn_plan_entry *ce = lp->comm[0].e;
    lp->comm[0].e = lp->comm[1].e;
    np_status vs = lower_prog_verify(lp, p, 0, &e);
    CU_ASSERT_EQUAL(vs, NP_ERR_INTERNAL);
    lp->comm[0].e = ce;
    CU_ASSERT_EQUAL(lower_prog_verify(lp, p, 0, &e), NP_OK); /* restored */
    lower_prog_free(lp);
    nn_plan_free(p);
}

/* ---- collectives in place ---- */

/* A tensor-parallel all-reduce of a row-parallel matmul's output, read through its reshape
 * and by nothing else, reduces in place: it has no buffer of its own (lower_addr), its values
 * are the matmul's buffer's (a
 * framework all-reduces that output in place; a copy first would cost the step a 3 MiB DMA
 * per all-reduce of GPT-2 small that no real run pays and the fast engine does not charge). */
TEST(an_all_reduce_of_a_matmul_only_it_reads_through_a_reshape_reduces_in_place)
{
    arch_config cfg;
    np_err e = {0};
    const char *sets[] = {"system.chips=8"};
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tiny", sets, 1, &cfg, &e), NP_OK);
    nn_model_desc d;
    CU_ASSERT_EQUAL_FATAL(nn_model_load("gpt-tiny", &d, &e), NP_OK);
    nn_strategy s;
    nn_strategy_default(&s);
    s.dp = s.tp = s.pp = 2;
    s.microbatch = 1;
    nn_plan *p = NULL;
    nn_optim sgd = {.kind = NN_OPTIM_SGD, .lr = 0.1};
    nn_model_opts mo = {.batch = 4, .compute = NN_F32, .seed = 1};
    CU_ASSERT_EQUAL_FATAL(nn_plan_build(&d, &mo, &s, &sgd, &cfg, &p, &e), NP_OK);
    lower_prog *lp = NULL;
    CU_ASSERT_EQUAL_FATAL(lower_plan_rank(&cfg, p, 0, &(lower_opts){0}, &lp, &e), NP_OK);
    const nn_graph *g = p->classes[nn_plan_rank_class(p, 0)].g;
    int n_in_place = 0;
    for (int i = 0; i < nn_graph_n_nodes(g); i++) {
        const nn_tensor *t = nn_graph_node(g, i);
        if (t->op != NN_OP_ALL_REDUCE || t->src[0]->op != NN_OP_RESHAPE ||
            t->src[0]->src[0]->op != NN_OP_MATMUL)
            continue;
        const nn_tensor *mm = t->src[0]->src[0];
        int readers = 0; /* of the matmul and of its reshape, in the graph */
        for (int j = 0; j < nn_graph_n_nodes(g); j++) {
            const nn_tensor *u = nn_graph_node(g, j);
            for (int k = 0; k < u->n_src; k++)
                readers += u->src[k] == mm || u->src[k] == t->src[0];
        }
        if (readers != 2 || mm->is_output)
            continue;
        uint64_t a = lower_addr_mb(lp, t, 0), b = lower_addr_mb(lp, mm, 0);
        CU_ASSERT_NOT_EQUAL(b, UINT64_MAX);
        CU_ASSERT_EQUAL(a, UINT64_MAX); /* no buffer of its own: it reduces in the matmul's */
        n_in_place++;
    }
    CU_ASSERT(n_in_place >= 2); /* the attention's and the MLP's c_proj of each layer */
    lower_prog_free(lp);
    nn_plan_free(p);
}
