/* test_framework_pass.c — graph passes keep values (CSE, DCE, constant folding, Conv+BN and
 * conv->conv folding against the unfolded graph), fusion groups, the scheduler, memory
 * planning against hand-computed lifetimes and against no reuse on ResNet-18 and GPT-2 small,
 * checkpointing against the analytical saved-activation size of GPT-2 small, and eager mode
 * against graph mode. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "model.h"
#include "optim.h"
#include "pass.h"

#define DIMS(...) (int64_t[]){__VA_ARGS__}

static double max_rel_diff(const float *a, const float *b, int64_t n)
{
    double m = 0, d = 0;
    for (int64_t i = 0; i < n; i++) {
        m = fmax(m, fabs(a[i]));
        d = fmax(d, fabs((double)a[i] - b[i]));
    }
    return d / fmax(m, 1e-30);
}

TEST(cse_merges_repeated_subexpressions_and_dce_removes_dead_code_keeping_values)
{
    nn_graph *g = nn_graph_new(1);
    nn_tensor *x = nn_input(g, "x", NN_F32, 2, DIMS(3, 4));
    nn_tensor *w = nn_param(g, "w", NN_F32, 2, DIMS(4, 5));
    nn_tensor_randn(x, 1, 1.0);
    nn_tensor_randn(w, 2, 1.0);
    nn_tensor *y1 = nn_relu(g, nn_matmul(g, x, w));
    nn_tensor *y2 = nn_relu(g, nn_matmul(g, x, w));
    nn_tensor *out = nn_add(g, y1, y2);
    nn_tanh(g, y1); /* dead */
    nn_graph_set_output(g, out);
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(nn_graph_compute(g, &e), NP_OK);
    float before[15];
    memcpy(before, out->data, sizeof before);
    int before_n = nn_graph_n_nodes(g), merged = 0;
    CU_ASSERT_EQUAL(nn_pass_dce(g), 1); /* the tanh */
    CU_ASSERT_EQUAL(nn_pass_cse(g, &merged, &e), NP_OK);
    CU_ASSERT_EQUAL(merged, 2); /* the second matmul and relu */
    CU_ASSERT_EQUAL(nn_graph_n_nodes(g), before_n - 3);
    CU_ASSERT_EQUAL(out->src[0], out->src[1]);
    CU_ASSERT_EQUAL(nn_graph_verify(g, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(nn_graph_compute(g, &e), NP_OK);
    CU_ASSERT_EQUAL(max_rel_diff(before, out->data, 15), 0.0);
    nn_graph_free(g);
}

TEST(constant_folding_turns_constant_subgraphs_into_constants)
{
    nn_graph *g = nn_graph_new(1);
    nn_tensor *a = nn_const(g, "a", NN_F32, 1, DIMS(3));
    nn_tensor *b = nn_const(g, "b", NN_F32, 1, DIMS(3));
    nn_tensor *x = nn_input(g, "x", NN_F32, 1, DIMS(3));
    nn_tensor_set(a, (float[]){1, 2, 3});
    nn_tensor_set(b, (float[]){4, 5, 6});
    nn_tensor_set(x, (float[]){1, 1, 2});
    nn_tensor *c = nn_exp(g, nn_scale(g, nn_add(g, a, b), 0.1));
    nn_tensor *y = nn_mul(g, c, x);
    nn_graph_set_output(g, y);
    np_err e = {0};
    int folded = 0;
    CU_ASSERT_EQUAL(nn_pass_fold_constants(g, &folded, &e), NP_OK);
    CU_ASSERT_EQUAL(folded, 3);
    CU_ASSERT_EQUAL(y->src[0]->op, NN_OP_LEAF);
    CU_ASSERT_EQUAL(y->src[0]->role, NN_ROLE_CONST);
    CU_ASSERT_EQUAL(nn_graph_n_nodes(g), 3); /* x, the folded constant, mul */
    CU_ASSERT_EQUAL_FATAL(nn_graph_compute(g, &e), NP_OK);
    CU_ASSERT_DOUBLE_EQUAL(y->data[2], 2 * exp(0.9), 1e-5);
    nn_graph_free(g);
}

/* resnet-tiny in inference mode with random batch-norm statistics. */
static nn_model inference_resnet(np_err *e)
{
    nn_model_desc d;
    nn_model m = {0};
    nn_model_opts o = {.inference = true, .seed = 1};
    if (nn_model_load("resnet-tiny", &d, e) != NP_OK || nn_model_build(&d, &o, &m, e) != NP_OK ||
        nn_model_init(m.g, 5, e) != NP_OK)
        return m;
    for (int i = 0; i < nn_graph_n_nodes(m.g); i++) {
        nn_tensor *t = nn_graph_node(m.g, i);
        if (t->op != NN_OP_LEAF || t->ndim != 1 || t->role == NN_ROLE_INPUT)
            continue;
        nn_tensor_randn(t, 100 + (uint64_t)t->id, 0.5);
        if (strstr(t->name, "running_var") || (strstr(t->name, "bn") && strstr(t->name, "weight")))
            for (int64_t k = 0; k < nn_numel(t); k++)
                t->data[k] = 0.5f + fabsf(t->data[k]);
    }
    nn_tensor_randn(m.input, 9, 1.0);
    nn_tensor_alloc(m.labels);
    return m;
}

TEST(conv_bn_folding_gives_the_same_inference_outputs_within_1e_5)
{
    np_err e = {0};
    nn_model m = inference_resnet(&e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m.g);
    nn_graph_set_output(m.g, m.logits);
    CU_ASSERT_EQUAL_FATAL(nn_graph_compute(m.g, &e), NP_OK);
    int64_t n = nn_numel(m.logits);
    float *before = malloc((size_t)n * sizeof *before);
    memcpy(before, m.logits->data, (size_t)n * sizeof *before);
    int folded = 0, bns = 0;
    CU_ASSERT_EQUAL(nn_pass_fold_conv_bn(m.g, &folded, &e), NP_OK);
    for (int i = 0; i < nn_graph_n_nodes(m.g); i++)
        bns += nn_graph_node(m.g, i)->op == NN_OP_BATCHNORM_INFER;
    CU_ASSERT_EQUAL(folded, 1 + 4 * 2 + 3); /* stem, two per block, three downsamples */
    CU_ASSERT_EQUAL(bns, 0);
    CU_ASSERT_EQUAL(nn_graph_verify(m.g, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(nn_graph_compute(m.g, &e), NP_OK);
    double rel = max_rel_diff(before, m.logits->data, n);
    fprintf(stderr, "conv+bn folding: %d folds, max relative difference %.3g\n", folded, rel);
    CU_ASSERT(rel < 1e-5);
    free(before);
    nn_graph_free(m.g);
}

TEST(conv_conv_folding_of_a_pointwise_conv_keeps_values)
{
    nn_graph *g = nn_graph_new(1);
    nn_tensor *x = nn_input(g, "x", NN_F32, 4, DIMS(2, 3, 6, 6));
    nn_tensor *w1 = nn_const(g, "w1", NN_F32, 4, DIMS(5, 3, 3, 3));
    nn_tensor *w2 = nn_const(g, "w2", NN_F32, 4, DIMS(4, 5, 1, 1));
    nn_tensor_randn(x, 1, 1.0);
    nn_tensor_randn(w1, 2, 1.0);
    nn_tensor_randn(w2, 3, 1.0);
    nn_tensor *y = nn_conv2d(g, nn_conv2d(g, x, w1, 2, 1, 1, 1), w2, 1, 0, 1, 1);
    nn_tensor *out = nn_relu(g, y);
    nn_graph_set_output(g, out);
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(nn_graph_compute(g, &e), NP_OK);
    float before[2 * 4 * 3 * 3];
    memcpy(before, out->data, sizeof before);
    int folded = 0;
    CU_ASSERT_EQUAL(nn_pass_fold_conv_conv(g, &folded, &e), NP_OK);
    CU_ASSERT_EQUAL(folded, 1);
    CU_ASSERT_EQUAL(out->src[0]->src[0], x);
    CU_ASSERT_EQUAL_FATAL(nn_graph_compute(g, &e), NP_OK);
    CU_ASSERT(max_rel_diff(before, out->data, 72) < 1e-5);
    nn_graph_free(g);
}

TEST(fusion_groups_a_matmul_with_its_elementwise_epilogue_but_not_across_fan_out)
{
    nn_graph *g = nn_graph_new(1);
    nn_tensor *x = nn_input(g, "x", NN_F32, 2, DIMS(4, 8));
    nn_tensor *w = nn_param(g, "w", NN_F32, 2, DIMS(8, 8));
    nn_tensor *b = nn_param(g, "b", NN_F32, 1, DIMS(8));
    nn_tensor *mm = nn_matmul(g, x, w);
    nn_tensor *h = nn_gelu(g, nn_add(g, mm, b));      /* matmul + bias + gelu: one group */
    nn_tensor *m2 = nn_matmul(g, h, w);
    nn_tensor *t1 = nn_tanh(g, m2), *t2 = nn_exp(g, m2); /* m2 fans out: no fusion */
    nn_graph_set_output(g, nn_add(g, t1, t2));
    CU_ASSERT_EQUAL(nn_pass_fuse(g), 2); /* {mm, add, gelu} and {tanh, add} */
    CU_ASSERT(mm->fusion_group == mm->id);
    CU_ASSERT_EQUAL(h->fusion_group, mm->id);
    CU_ASSERT_EQUAL(h->src[0]->fusion_group, mm->id);
    CU_ASSERT_EQUAL(m2->fusion_group, -1);
    CU_ASSERT_EQUAL(t1->fusion_group, t1->id); /* t1 + t2: the add joins the tanh */
    CU_ASSERT_EQUAL(t2->fusion_group, -1);
    nn_graph_free(g);
}

TEST(the_scheduler_keeps_creation_order_and_runs_updates_right_after_every_reader)
{
    nn_graph *g = nn_graph_new(1);
    nn_tensor *w = nn_param(g, "w", NN_F32, 2, DIMS(3, 3));
    nn_tensor *x = nn_input(g, "x", NN_F32, 2, DIMS(2, 3));
    nn_tensor *h = nn_matmul(g, x, w);
    nn_tensor *loss = nn_reduce_sum(g, nn_reshape(g, nn_matmul(g, h, w), 1, DIMS(6)), 0, false);
    np_err e = {0};
    nn_optim sgd = {.kind = NN_OPTIM_SGD, .lr = 0.1};
    CU_ASSERT_EQUAL_FATAL(nn_backward(g, loss, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(nn_optim_step(g, &sgd, &e), NP_OK);
    nn_tensor **order;
    int n;
    CU_ASSERT_EQUAL_FATAL(nn_schedule(g, &order, &n, &e), NP_OK);
    CU_ASSERT_EQUAL(n, nn_graph_n_nodes(g));
    int upd = -1, last_reader = -1, prev_id = -1;
    bool leaves_first = true, creation_order = true;
    for (int i = 0; i < n; i++) {
        if (i > 0 && order[i]->op == NN_OP_LEAF && order[i - 1]->op != NN_OP_LEAF)
            leaves_first = false;
        if (order[i]->op == NN_OP_SGD_UPDATE)
            upd = i;
        else
            for (int s = 0; s < order[i]->n_src; s++)
                if (order[i]->src[s] == w)
                    last_reader = i;
        if (order[i]->op != NN_OP_LEAF && order[i]->op != NN_OP_SGD_UPDATE) {
            creation_order = creation_order && order[i]->id > prev_id;
            prev_id = order[i]->id;
        }
    }
    CU_ASSERT(leaves_first);
    CU_ASSERT(creation_order);
    CU_ASSERT(upd > last_reader);
    /* the update runs as soon as its gradient is complete, not at the end */
    CU_ASSERT(order[upd - 1] == w->grad || order[upd - 1]->src[0] == w);
    free(order);
    nn_graph_free(g);
}

TEST(memory_plan_of_a_chain_matches_hand_computed_lifetimes)
{
    /* x -> r1 -> r2 -> r3 (output), 256 floats = 1 KiB each: at most two buffers live. */
    nn_graph *g = nn_graph_new(1);
    nn_tensor *x = nn_input(g, "x", NN_F32, 1, DIMS(256));
    nn_tensor *r3 = nn_tanh(g, nn_exp(g, nn_relu(g, x)));
    nn_graph_set_output(g, r3);
    nn_memplan p;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(nn_memplan_build(g, &p, &e), NP_OK);
    CU_ASSERT_EQUAL(p.no_reuse_bytes, 3 * 1024);
    CU_ASSERT_EQUAL(p.live_peak_bytes, 2 * 1024);
    CU_ASSERT_EQUAL(p.arena_bytes, 2 * 1024);
    CU_ASSERT_EQUAL(p.persistent_by_role[NN_ROLE_INPUT], 1024);
    CU_ASSERT_EQUAL(p.peak_bytes, 3 * 1024);
    CU_ASSERT_EQUAL(p.offset[r3->id], 0); /* r3 reuses r1's place */
    CU_ASSERT_EQUAL(nn_memplan_verify(g, &p, &e), NP_OK);
    p.offset[r3->id] = p.offset[r3->src[0]->id]; /* break it on purpose: r2 and r3 collide */
    CU_ASSERT_EQUAL(nn_memplan_verify(g, &p, &e), NP_ERR_INTERNAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "are live together but overlap"));
    nn_memplan_free(&p);
    nn_graph_free(g);
}

/* The training step (forward, backward, AdamW) of a zoo model, from shapes. */
static nn_model train_graph(const char *name, int64_t batch, int64_t seq)
{
    nn_model_desc d;
    nn_model m = {0};
    np_err e = {0};
    nn_model_opts o = {.batch = batch, .seq = seq};
    nn_optim adamw = {.kind = NN_OPTIM_ADAMW, .lr = 1e-4, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8};
    if (nn_model_load(name, &d, &e) != NP_OK || nn_model_build(&d, &o, &m, &e) != NP_OK ||
        nn_backward(m.g, m.loss, &e) != NP_OK || nn_optim_step(m.g, &adamw, &e) != NP_OK)
        fprintf(stderr, "%s: %s\n", name, e.msg);
    return m;
}

static void report_plan(const char *what, const nn_memplan *p)
{
    fprintf(stderr,
            "%s: no reuse %.1f MiB, arena %.1f MiB (live peak %.1f MiB: activations %.1f, "
            "gradients %.1f), persistent %.1f MiB (params %.1f, optimizer %.1f)\n",
            what, p->no_reuse_bytes / 1048576.0, p->arena_bytes / 1048576.0,
            p->live_peak_bytes / 1048576.0, p->peak_by_role[NN_ROLE_ACTIVATION] / 1048576.0,
            p->peak_by_role[NN_ROLE_GRADIENT] / 1048576.0, p->persistent_bytes / 1048576.0,
            p->persistent_by_role[NN_ROLE_PARAM] / 1048576.0,
            p->persistent_by_role[NN_ROLE_OPTSTATE] / 1048576.0);
}

TEST(memory_planning_reuses_buffers_on_resnet18_and_gpt2_small)
{
    const char *names[] = {"resnet18", "gpt2-small"};
    for (int i = 0; i < 2; i++) {
        nn_model m = train_graph(names[i], i == 0 ? 8 : 1, 0);
        CU_ASSERT_PTR_NOT_NULL_FATAL(m.g);
        nn_memplan p;
        np_err e = {0};
        CU_ASSERT_EQUAL_FATAL(nn_memplan_build(m.g, &p, &e), NP_OK);
        report_plan(names[i], &p);
        CU_ASSERT_EQUAL(nn_memplan_verify(m.g, &p, &e), NP_OK);
        CU_ASSERT(p.arena_bytes < p.no_reuse_bytes / 2);
        CU_ASSERT(p.arena_bytes >= p.live_peak_bytes);
        CU_ASSERT(p.arena_bytes < p.live_peak_bytes * 3 / 2); /* little fragmentation */
        /* parameters f32 and AdamW's two moments */
        CU_ASSERT_EQUAL(p.persistent_by_role[NN_ROLE_PARAM], 4 * (uint64_t)nn_graph_param_count(m.g));
        CU_ASSERT_EQUAL(p.persistent_by_role[NN_ROLE_OPTSTATE], 8 * (uint64_t)nn_graph_param_count(m.g));
        nn_memplan_free(&p);
        nn_graph_free(m.g);
    }
}

TEST(checkpointing_gpt2_small_saves_activations_by_the_analytical_factor)
{
    /* Per layer, the backward pass of our GPT-2 block reads these forward tensors (fp32,
     * batch B, sequence S, width D, H heads; see docs/framework.md): the layer input, ln_1's
     * output, q, k, v, the attention output, the residual sum, ln_2's output (1 x SD each),
     * the MLP's pre- and post-GELU values (4 x SD each) and the softmax probabilities (H S^2):
     * 16 SD + H S^2 floats. Checkpointing every layer keeps the layer input alone (1 SD);
     * selective keeps the layer input and the matmul outputs it needs (qkv 3 SD, attention
     * 1 SD, c_proj 1 SD, c_fc 4 SD, scores H S^2). The head (ln_f input and output and the
     * logits S V) is kept in every case; not the tied head's transposed table (D V): the
     * backward reads the table itself, a parameter, as PyTorch's weight.t() is a view. */
    const double B = 1, S = 1024, D = 768, H = 12, L = 12, V = 50257;
    double head = 4 * (2 * B * S * D + B * S * V);
    double full = 4 * L * B * (16 * S * D + H * S * S) + head;
    double every1 = 4 * L * B * S * D + head;
    double selective = 4 * L * B * (10 * S * D + H * S * S) + head;
    struct { const char *what; int policy, k; double want; } cases[] = {
        {"no checkpointing", -1, 0, full},
        {"every layer", NN_CKPT_EVERY_K, 1, every1},
        {"every 2 layers", NN_CKPT_EVERY_K, 2, 4 * (L / 2) * B * S * D + head},
        {"selective", NN_CKPT_SELECTIVE, 1, selective},
    };
    uint64_t arena[4];
    for (int i = 0; i < 4; i++) {
        nn_model m = train_graph("gpt2-small", 1, 1024);
        CU_ASSERT_PTR_NOT_NULL_FATAL(m.g);
        np_err e = {0};
        int n_re = 0;
        if (cases[i].policy >= 0)
            CU_ASSERT_EQUAL(nn_pass_checkpoint(m.g, (nn_ckpt_policy)cases[i].policy, cases[i].k,
                                               &n_re, &e), NP_OK);
        CU_ASSERT_EQUAL(nn_graph_verify(m.g, &e), NP_OK);
        double saved = (double)nn_saved_activation_bytes(m.g);
        nn_memplan p;
        CU_ASSERT_EQUAL_FATAL(nn_memplan_build(m.g, &p, &e), NP_OK);
        arena[i] = p.arena_bytes;
        CU_ASSERT_EQUAL(nn_memplan_verify(m.g, &p, &e), NP_OK);
        fprintf(stderr, "gpt2-small, %s: %d recomputed nodes, saved activations %.2f MiB "
                        "(analytical %.2f MiB), arena %.1f MiB\n",
                cases[i].what, n_re, saved / 1048576, cases[i].want / 1048576,
                p.arena_bytes / 1048576.0);
        CU_ASSERT_DOUBLE_EQUAL(saved, cases[i].want, 1.0);
        nn_memplan_free(&p);
        nn_graph_free(m.g);
    }
    /* the factor on the layers' part: (16 SD + H S^2) / SD = 32 at S = 1024, D = 768 */
    CU_ASSERT_DOUBLE_EQUAL((full - head) / (every1 - head), 32.0, 1e-9);
    CU_ASSERT(arena[1] < arena[0] / 2);
    CU_ASSERT(arena[3] < arena[0]);
}

/* One SGD training step of a small MLP; returns the loss and fills w1's gradient. */
static double mlp_step(bool eager, float *grad_out)
{
    nn_graph *g = nn_graph_new(1);
    nn_graph_set_eager(g, eager);
    nn_tensor *x = nn_input(g, "x", NN_F32, 2, DIMS(4, 3));
    nn_tensor *w1 = nn_param(g, "w1", NN_F32, 2, DIMS(3, 5));
    nn_tensor *w2 = nn_param(g, "w2", NN_F32, 2, DIMS(5, 2));
    nn_tensor *lab = nn_input(g, "labels", NN_I32, 1, DIMS(4));
    nn_tensor_randn(x, 1, 1.0);
    nn_tensor_randn(w1, 2, 1.0);
    nn_tensor_randn(w2, 3, 1.0);
    nn_tensor_set(lab, (float[]){0, 1, 1, 0});
    nn_tensor *loss = nn_cross_entropy(g, nn_matmul(g, nn_gelu(g, nn_matmul(g, x, w1)), w2), lab);
    np_err e = {0};
    double v = NAN;
    if (nn_backward(g, loss, &e) == NP_OK && (eager || nn_graph_compute(g, &e) == NP_OK)) {
        v = loss->data[0];
        memcpy(grad_out, w1->grad->data, 15 * sizeof(float));
    }
    nn_graph_free(g);
    return v;
}

TEST(eager_mode_and_graph_mode_give_the_same_values)
{
    float ge[15], gg[15];
    double le = mlp_step(true, ge), lg = mlp_step(false, gg);
    CU_ASSERT(isfinite(le));
    CU_ASSERT_EQUAL(le, lg);
    CU_ASSERT_EQUAL(memcmp(ge, gg, sizeof ge), 0);
}

/* Builds, differentiates, optimizes, plans and runs an MLP step; any failure must be NOMEM. */
static np_status faulty_step(bool *ok_status)
{
    np_err e = {0};
    np_status st;
    nn_graph *g = nn_graph_new(1);
    if (!g) {
        *ok_status = true;
        return NP_ERR_NOMEM;
    }
    nn_tensor *x = nn_input(g, "x", NN_F32, 2, DIMS(4, 3));
    nn_tensor *w = nn_param(g, "w", NN_F32, 2, DIMS(3, 2));
    nn_tensor *lab = nn_input(g, "labels", NN_I32, 1, DIMS(4));
    nn_tensor *loss = nn_cross_entropy(g, nn_relu(g, nn_matmul(g, x, w)), lab);
    nn_optim adam = {.kind = NN_OPTIM_ADAM, .lr = 0.1, .beta1 = 0.9, .beta2 = 0.99, .eps = 1e-8};
    int n_re = 0;
    nn_memplan p = {0};
    if ((st = nn_graph_status(g, &e)) != NP_OK || (st = nn_backward(g, loss, &e)) != NP_OK ||
        (st = nn_optim_step(g, &adam, &e)) != NP_OK ||
        (st = nn_pass_checkpoint(g, NN_CKPT_SELECTIVE, 1, &n_re, &e)) != NP_OK ||
        (st = nn_memplan_build(g, &p, &e)) != NP_OK)
        goto out;
    nn_memplan_free(&p);
    if (!nn_tensor_randn(x, 1, 1.0) || !nn_tensor_randn(w, 2, 1.0) || !nn_tensor_fill(lab, 1.0f)) {
        st = NP_ERR_NOMEM;
        goto out;
    }
    st = nn_graph_compute(g, &e);
out:
    *ok_status = st == NP_OK || st == NP_ERR_NOMEM;
    if (!*ok_status)
        fprintf(stderr, "unexpected error under fault injection: %s\n", e.msg);
    nn_graph_free(g);
    return st;
}

TEST(an_allocation_failure_anywhere_is_a_nomem_error_not_a_crash_or_leak)
{
    int runs = 0;
    for (long k = 0; k < 10000; k++) {
        bool ok = false;
        nn_fault_inject_alloc(k);
        np_status st = faulty_step(&ok);
        nn_fault_inject_alloc(-1);
        CU_ASSERT(ok);
        runs++;
        if (st == NP_OK)
            break;
    }
    CU_ASSERT(runs > 50); /* every allocation point up to the first clean run was hit */
    bool ok = false;
    CU_ASSERT_EQUAL(faulty_step(&ok), NP_OK);
}

/* Loss and the gradient of every parameter of a tiny GPT step (one fixed batch). */
static int run_step(nn_model *m, float *out, int cap)
{
    np_err e = {0};
    for (int64_t i = 0; i < nn_numel(m->input); i++) {
        m->input->data[i] = (float)((i * 5 + 1) % 16);
        m->labels->data[i] = (float)((i * 3 + 2) % 16);
    }
    if (nn_graph_compute(m->g, &e) != NP_OK) {
        fprintf(stderr, "%s\n", e.msg);
        return 0;
    }
    int k = 0;
    out[k++] = m->loss->data[0];
    for (int i = 0; i < nn_graph_n_nodes(m->g); i++) {
        nn_tensor *p = nn_graph_node(m->g, i);
        if (p->trainable && p->grad)
            for (int64_t j = 0; j < nn_numel(p->grad) && k < cap; j++)
                out[k++] = p->grad->data[j];
    }
    return k;
}

TEST(the_pass_pipeline_on_a_training_graph_keeps_every_value_bit_for_bit)
{
    nn_model_desc d;
    nn_model m;
    np_err e = {0};
    nn_model_opts o = {.seed = 1};
    CU_ASSERT_EQUAL_FATAL(nn_model_load("gpt-tiny", &d, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(nn_model_build(&d, &o, &m, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(nn_model_init(m.g, 3, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(nn_backward(m.g, m.loss, &e), NP_OK);
    for (int i = 0; i < nn_graph_n_nodes(m.g); i++) /* keep the gradients alive through DCE */
        if (nn_graph_node(m.g, i)->trainable)
            nn_graph_set_output(m.g, nn_graph_node(m.g, i)->grad);
    nn_tensor_alloc(m.input);
    nn_tensor_alloc(m.labels);
    enum { CAP = 40000 };
    float *before = malloc(CAP * sizeof *before), *after = malloc(CAP * sizeof *after);
    int nb = run_step(&m, before, CAP);
    CU_ASSERT(nb > 1000);
    int merged = 0, recomputed = 0, nodes = nn_graph_n_nodes(m.g);
    CU_ASSERT_EQUAL(nn_pass_cse(m.g, &merged, &e), NP_OK);
    nn_pass_dce(m.g);
    CU_ASSERT_EQUAL(nn_pass_checkpoint(m.g, NN_CKPT_EVERY_K, 1, &recomputed, &e), NP_OK);
    CU_ASSERT(nn_pass_fuse(m.g) > 10);
    CU_ASSERT_EQUAL(nn_graph_verify(m.g, &e), NP_OK);
    fprintf(stderr, "pipeline: %d nodes, %d merged by CSE, %d recomputed\n", nodes, merged, recomputed);
    CU_ASSERT(recomputed > 0);
    int na = run_step(&m, after, CAP);
    CU_ASSERT_EQUAL(na, nb);
    CU_ASSERT_EQUAL(memcmp(before, after, (size_t)nb * sizeof *before), 0);
    free(before);
    free(after);
    nn_graph_free(m.g);
}

/* ---- fusing attention ---- */

/* A zoo language model's forward graph with initialized parameters and seeded tokens. */
static nn_model lm_forward(const char *name, double dropout)
{
    nn_model_desc d;
    nn_model m = {0};
    np_err e = {0};
    nn_model_opts o = {.seed = 7, .dropout = dropout};
    if (nn_model_load(name, &d, &e) != NP_OK || nn_model_build(&d, &o, &m, &e) != NP_OK ||
        nn_model_init(m.g, 11, &e) != NP_OK || !nn_tensor_alloc(m.input) ||
        !nn_tensor_alloc(m.labels)) {
        fprintf(stderr, "%s: %s\n", name, e.msg);
        return m;
    }
    for (int64_t i = 0; i < nn_numel(m.input); i++) {
        m.input->data[i] = (float)((i * 7 + 3) % 16);
        m.labels->data[i] = (float)((i * 5 + 1) % 16);
    }
    return m;
}

/* Nodes of shape [B, H, S, S] (score or probability matrices; logits are 3-D). */
static int score_nodes(const nn_graph *g, int64_t S)
{
    int n = 0;
    for (int i = 0; i < nn_graph_n_nodes(g); i++) {
        const nn_tensor *t = nn_graph_node(g, i);
        n += t->ndim == 4 && t->ne[3] == S && t->ne[2] == S; /* [B, H, S, S] */
    }
    return n;
}

TEST(fusing_attention_removes_every_score_matrix_and_keeps_loss_and_gradients)
{
    const char *names[] = {"gpt-tiny", "llama-tiny"};
    for (int k = 0; k < 2; k++) {
        nn_model a = lm_forward(names[k], 0), b = lm_forward(names[k], 0);
        CU_ASSERT_PTR_NOT_NULL_FATAL(a.g);
        CU_ASSERT_PTR_NOT_NULL_FATAL(b.g);
        np_err e = {0};
        int fused = -1, before = nn_graph_n_nodes(b.g);
        CU_ASSERT(score_nodes(b.g, b.seq) > 0);
        CU_ASSERT_EQUAL_FATAL(nn_pass_fuse_attention(b.g, &fused, &e), NP_OK);
        CU_ASSERT_EQUAL(fused, 2); /* one per layer */
        /* per layer: scores, scale, mask, softmax and k's transpose go, the matmul stays */
        CU_ASSERT_EQUAL(nn_graph_n_nodes(b.g), before - 2 * 5);
        CU_ASSERT_EQUAL(score_nodes(b.g, b.seq), 0);
        CU_ASSERT_EQUAL(nn_graph_verify(b.g, &e), NP_OK);
        for (int i = 0; i < nn_graph_n_nodes(b.g); i++) { /* creation order is topological */
            const nn_tensor *t = nn_graph_node(b.g, i);
            for (int s = 0; s < t->n_src; s++)
                CU_ASSERT(t->src[s]->id < t->id);
            if (t->op == NN_OP_ATTENTION)
                CU_ASSERT_PTR_NOT_NULL(strstr(t->name, "attn.attention"));
        }
        CU_ASSERT_EQUAL_FATAL(nn_backward(a.g, a.loss, &e), NP_OK);
        CU_ASSERT_EQUAL_FATAL(nn_backward(b.g, b.loss, &e), NP_OK);
        CU_ASSERT_EQUAL(score_nodes(b.g, b.seq), 0); /* the backward keeps none either */
        CU_ASSERT_EQUAL_FATAL(nn_graph_compute(a.g, &e), NP_OK);
        CU_ASSERT_EQUAL_FATAL(nn_graph_compute(b.g, &e), NP_OK);
        CU_ASSERT(fabs(a.loss->data[0] - b.loss->data[0]) < 1e-5 * fabs(a.loss->data[0]));
        int params = 0;
        for (int i = 0; i < nn_graph_n_nodes(a.g); i++) {
            nn_tensor *p = nn_graph_node(a.g, i);
            if (!p->trainable)
                continue;
            nn_tensor *q = nn_graph_find(b.g, p->name);
            CU_ASSERT_PTR_NOT_NULL_FATAL(q);
            CU_ASSERT_PTR_NOT_NULL_FATAL(p->grad);
            CU_ASSERT_PTR_NOT_NULL_FATAL(q->grad);
            double d = max_rel_diff(p->grad->data, q->grad->data, nn_numel(p));
            if (d > 1e-4)
                fprintf(stderr, "%s: %s's gradient differs by %g\n", names[k], p->name, d);
            CU_ASSERT(d <= 1e-4);
            params++;
        }
        CU_ASSERT(params > 10);
        nn_graph_free(a.g);
        nn_graph_free(b.g);
    }
}

TEST(attention_with_dropout_or_a_shared_score_matrix_is_not_fused)
{
    nn_model m = lm_forward("gpt-tiny", 0.1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m.g);
    np_err e = {0};
    int fused = -1, before = nn_graph_n_nodes(m.g);
    CU_ASSERT_EQUAL(nn_pass_fuse_attention(m.g, &fused, &e), NP_OK);
    CU_ASSERT_EQUAL(fused, 0);
    CU_ASSERT_EQUAL(nn_graph_n_nodes(m.g), before);
    nn_graph_free(m.g);

    /* the scores are also an output: the chain must stay */
    nn_graph *g = nn_graph_new(1);
    nn_tensor *q = nn_input(g, "q", NN_F32, 4, DIMS(1, 2, 5, 4));
    nn_tensor *s = nn_scale(g, nn_matmul(g, q, nn_transpose(g, q)), 0.5);
    nn_tensor *y = nn_matmul(g, nn_softmax(g, s), q);
    nn_graph_set_output(g, y);
    nn_graph_set_output(g, s);
    CU_ASSERT_EQUAL(nn_pass_fuse_attention(g, &fused, &e), NP_OK);
    CU_ASSERT_EQUAL(fused, 0);
    /* not an output any more: fused, with its scale and no mask */
    s->is_output = false;
    CU_ASSERT_EQUAL(nn_pass_fuse_attention(g, &fused, &e), NP_OK);
    CU_ASSERT_EQUAL(fused, 1);
    CU_ASSERT_EQUAL(y->op, NN_OP_ATTENTION);
    CU_ASSERT_EQUAL(y->ip[0], 0);
    CU_ASSERT_DOUBLE_EQUAL(y->fp[0], 0.5, 0);
    CU_ASSERT_EQUAL(nn_graph_n_nodes(g), 2); /* q and attention: the transpose went too */
    nn_graph_free(g);
}

/* Megatron-LM's FusedScaleMaskSoftmax as a rewrite (nn_pass_fuse_softmax): per layer of the
 * composite attention, scale and causal_mask fold into the softmax, which reads the scores
 * once; the backward is one softmax_grad per layer (no mul, reduce_sum, sub, mul, mask and
 * scale over S x S); loss and gradients equal the unfused graph's (f32; the scale is no
 * longer rounded between ops, so within 1e-5 / 1e-4 relative). Also with dropout, which the
 * attention fusion leaves alone. */
TEST(fusing_the_softmax_folds_scale_and_mask_and_keeps_loss_and_gradients)
{
    for (int drop = 0; drop < 2; drop++) {
        double p = drop ? 0.1 : 0.0;
        nn_model a = lm_forward("gpt-tiny", p), b = lm_forward("gpt-tiny", p);
        CU_ASSERT_PTR_NOT_NULL_FATAL(a.g);
        CU_ASSERT_PTR_NOT_NULL_FATAL(b.g);
        np_err e = {0};
        int fused = -1, before = nn_graph_n_nodes(b.g), scores = score_nodes(b.g, b.seq);
        CU_ASSERT_EQUAL_FATAL(nn_pass_fuse_softmax(b.g, &fused, &e), NP_OK);
        CU_ASSERT_EQUAL(fused, 2); /* one per layer */
        CU_ASSERT_EQUAL(nn_graph_n_nodes(b.g), before - 2 * 2); /* scale and mask */
        CU_ASSERT_EQUAL(score_nodes(b.g, b.seq), scores - 2 * 2);
        CU_ASSERT_EQUAL(nn_graph_verify(b.g, &e), NP_OK);
        int sm = 0;
        for (int i = 0; i < nn_graph_n_nodes(b.g); i++) {
            const nn_tensor *t = nn_graph_node(b.g, i);
            for (int s = 0; s < t->n_src; s++)
                CU_ASSERT(t->src[s]->id < t->id);
            if (t->op != NN_OP_SOFTMAX)
                continue;
            sm++;
            CU_ASSERT_EQUAL(t->ip[0], 1);                                  /* causal */
            CU_ASSERT_EQUAL_FATAL(t->src[0]->op, NN_OP_MATMUL); /* q k^T */
            double dh = (double)t->src[0]->src[0]->ne[3];
            CU_ASSERT_DOUBLE_EQUAL(t->fp[0], 1.0 / sqrt(dh), 1e-12);
            CU_ASSERT(t->attn_core);
        }
        CU_ASSERT_EQUAL(sm, 2);
        CU_ASSERT_EQUAL_FATAL(nn_backward(a.g, a.loss, &e), NP_OK);
        CU_ASSERT_EQUAL_FATAL(nn_backward(b.g, b.loss, &e), NP_OK);
        int grads = 0;
        for (int i = 0; i < nn_graph_n_nodes(b.g); i++) {
            const nn_tensor *t = nn_graph_node(b.g, i);
            grads += t->op == NN_OP_SOFTMAX_GRAD;
            CU_ASSERT(t->op != NN_OP_CAUSAL_MASK);
        }
        CU_ASSERT_EQUAL(grads, 2);
        CU_ASSERT_EQUAL_FATAL(nn_graph_compute(a.g, &e), NP_OK);
        CU_ASSERT_EQUAL_FATAL(nn_graph_compute(b.g, &e), NP_OK);
        CU_ASSERT(fabs(a.loss->data[0] - b.loss->data[0]) < 1e-5 * fabs(a.loss->data[0]));
        int params = 0;
        for (int i = 0; i < nn_graph_n_nodes(a.g); i++) {
            nn_tensor *pa = nn_graph_node(a.g, i);
            if (!pa->trainable)
                continue;
            nn_tensor *q = nn_graph_find(b.g, pa->name);
            CU_ASSERT_PTR_NOT_NULL_FATAL(q);
            double d = max_rel_diff(pa->grad->data, q->grad->data, nn_numel(pa));
            if (d > 1e-4)
                fprintf(stderr, "gpt-tiny: %s's gradient differs by %g\n", pa->name, d);
            CU_ASSERT(d <= 1e-4);
            params++;
        }
        CU_ASSERT(params > 10);
        nn_graph_free(a.g);
        nn_graph_free(b.g);
    }
    /* a scale another node also reads stays; the mask alone still folds */
    nn_graph *g = nn_graph_new(1);
    np_err e = {0};
    int fused = -1;
    nn_tensor *x = nn_input(g, "x", NN_F32, 3, DIMS(2, 5, 5));
    nn_tensor *s = nn_scale(g, x, 0.5);
    nn_tensor *y = nn_softmax(g, nn_causal_mask(g, s, -INFINITY));
    nn_graph_set_output(g, nn_add(g, y, s));
    CU_ASSERT_EQUAL(nn_pass_fuse_softmax(g, &fused, &e), NP_OK);
    CU_ASSERT_EQUAL(fused, 1);
    CU_ASSERT_PTR_EQUAL(y->src[0], s);
    CU_ASSERT_EQUAL(y->ip[0], 1);
    CU_ASSERT_DOUBLE_EQUAL(y->fp[0], 0.0, 0);
    nn_graph_free(g);
}

TEST(checkpointing_gpt2_small_with_fused_attention_keeps_no_score_matrix_under_any_policy)
{
    /* nn_pass_fuse_attention before the backward: the attention op's backward reads q, k, v
     * and its own output (and recomputes the probabilities from the log-sum-exp), so per
     * layer the backward reads the composite's 16 SD floats less nothing but the H S^2
     * probabilities, plus the attention's output: 17 SD. Every-layer checkpointing keeps the
     * layer input alone, as before. NN_CKPT_SELECTIVE keeps the layer input and the matmul
     * outputs (qkv 3 SD, c_proj 1 SD, c_fc 4 SD): the attention op is no matmul, so its output
     * is recomputed (its forward runs again in the backward), 9 SD. NN_CKPT_ATTENTION finds no
     * attention core to recompute: 17 SD. The head is kept in every case (fp32). */
    const double B = 1, S = 1024, D = 768, L = 12, V = 50257;
    double head = 4 * (2 * B * S * D + B * S * V); /* as above: no transposed table */
    struct { const char *what; int policy; double per_layer_sd; } cases[] = {
        {"no checkpointing", -1, 17},
        {"every layer", NN_CKPT_EVERY_K, 1},
        {"selective", NN_CKPT_SELECTIVE, 9},
        {"attention core", NN_CKPT_ATTENTION, 17},
    };
    for (int i = 0; i < 4; i++) {
        nn_model_desc d;
        nn_model m = {0};
        np_err e = {0};
        nn_model_opts o = {.batch = 1, .seq = 1024};
        nn_optim adamw = {.kind = NN_OPTIM_ADAMW, .lr = 1e-4, .beta1 = 0.9, .beta2 = 0.999,
                          .eps = 1e-8};
        int fused = 0, n_re = 0;
        CU_ASSERT_EQUAL_FATAL(nn_model_load("gpt2-small", &d, &e), NP_OK);
        CU_ASSERT_EQUAL_FATAL(nn_model_build(&d, &o, &m, &e), NP_OK);
        CU_ASSERT_EQUAL_FATAL(nn_pass_fuse_attention(m.g, &fused, &e), NP_OK);
        CU_ASSERT_EQUAL(fused, 12);
        CU_ASSERT_EQUAL_FATAL(nn_backward(m.g, m.loss, &e), NP_OK);
        CU_ASSERT_EQUAL_FATAL(nn_optim_step(m.g, &adamw, &e), NP_OK);
        if (cases[i].policy >= 0)
            CU_ASSERT_EQUAL(nn_pass_checkpoint(m.g, (nn_ckpt_policy)cases[i].policy, 1, &n_re,
                                               &e), NP_OK);
        CU_ASSERT_EQUAL(nn_graph_verify(m.g, &e), NP_OK);
        CU_ASSERT_EQUAL(score_nodes(m.g, 1024), 0);
        double saved = (double)nn_saved_activation_bytes(m.g);
        double want = 4 * L * B * cases[i].per_layer_sd * S * D + head;
        fprintf(stderr, "gpt2-small, fused attention, %s: %d recomputed nodes, saved "
                        "activations %.2f MiB (analytical %.2f MiB)\n", cases[i].what, n_re,
                saved / 1048576, want / 1048576);
        CU_ASSERT_DOUBLE_EQUAL(saved, want, 1.0);
        nn_graph_free(m.g);
    }
}
