/* test_framework_train.c — optimizers against hand-computed updates, and training on the
 * reference executor: an MLP on a synthetic classification set and a tiny GPT on a synthetic
 * copy task reach stated loss bounds, in fp32 and in mixed precision (bf16 compute, f32
 * master weights and optimizer state). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "model.h"
#include "optim.h"
#include "rng.h"

#define DIMS(...) (int64_t[]){__VA_ARGS__}

/* p [1] = 1, loss = 0.5 * p, so the gradient is 0.5 every step; returns p after `steps`. */
static double one_param_after(nn_optim opt, int steps)
{
    nn_graph *g = nn_graph_new(1);
    nn_tensor *p = nn_param(g, "p", NN_F32, 1, DIMS(1));
    nn_tensor *c = nn_const(g, "c", NN_F32, 1, DIMS(1));
    nn_tensor_fill(p, 1.0f);
    nn_tensor_fill(c, 0.5f);
    nn_tensor *loss = nn_mul(g, p, c);
    np_err e = {0};
    double v = NAN;
    if (nn_backward(g, loss, &e) == NP_OK && nn_optim_step(g, &opt, &e) == NP_OK) {
        for (int i = 0; i < steps; i++)
            nn_graph_compute(g, &e);
        v = p->data[0];
    }
    nn_graph_free(g);
    return v;
}

TEST(sgd_momentum_adam_and_adamw_updates_match_hand_computed_values)
{
    nn_optim sgd = {.kind = NN_OPTIM_SGD, .lr = 0.1, .momentum = 0.9};
    /* step 1: buf = 0.5, p = 0.95; step 2: buf = 0.9*0.5 + 0.5 = 0.95, p = 0.855 */
    CU_ASSERT_DOUBLE_EQUAL(one_param_after(sgd, 1), 0.95, 1e-6);
    CU_ASSERT_DOUBLE_EQUAL(one_param_after(sgd, 2), 0.855, 1e-6);
    /* Adam's first step moves by lr * g / |g| (bias-corrected); a constant gradient keeps it */
    nn_optim adam = {.kind = NN_OPTIM_ADAM, .lr = 0.1, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8};
    CU_ASSERT_DOUBLE_EQUAL(one_param_after(adam, 1), 0.9, 1e-6);
    CU_ASSERT_DOUBLE_EQUAL(one_param_after(adam, 3), 0.7, 1e-5);
    /* AdamW decays first: p = 1 - 0.1*0.1*1 - 0.1 = 0.89 */
    nn_optim adamw = adam;
    adamw.kind = NN_OPTIM_ADAMW;
    adamw.weight_decay = 0.1;
    CU_ASSERT_DOUBLE_EQUAL(one_param_after(adamw, 1), 0.89, 1e-6);
    /* Adam with L2: g = 0.5 + 0.1 * 1 is still positive, so the first step is still lr */
    adam.weight_decay = 0.1;
    CU_ASSERT_DOUBLE_EQUAL(one_param_after(adam, 1), 0.9, 1e-6);
}

typedef void (*batch_fn)(nn_model *m, rng *r);

/* XOR of the quadrants: label 1 when x * y > 0 (not linearly separable). */
static void mlp_batch(nn_model *m, rng *r)
{
    for (int64_t i = 0; i < m->batch; i++) {
        double x = 2 * rng_unit(r) - 1, y = 2 * rng_unit(r) - 1;
        m->input->data[2 * i] = (float)x;
        m->input->data[2 * i + 1] = (float)y;
        m->labels->data[i] = x * y > 0 ? 1.0f : 0.0f;
    }
}

/* Sequences of 4 random tokens repeated: from position 4 on, the next token is a copy of the
 * token 3 back, which only attention can find. Positions 0-2 have unpredictable targets, so
 * the best mean loss is (3/16) ln 16 = 0.52. */
static void copy_batch(nn_model *m, rng *r)
{
    int64_t S = m->seq, V = 16;
    for (int64_t b = 0; b < m->batch; b++) {
        float pat[4];
        for (int k = 0; k < 4; k++)
            pat[k] = (float)rng_below(r, (uint64_t)V);
        for (int64_t t = 0; t < S; t++) {
            m->input->data[b * S + t] = pat[t % 4];
            m->labels->data[b * S + t] = pat[(t + 1) % 4];
        }
    }
}

/* Trains zoo model `name` for `steps` steps; returns the mean loss of the last 10 steps and
 * the first step's loss in *first. */
static double train(const char *name, nn_optim opt, nn_dtype compute, int steps, batch_fn fill,
                    double *first)
{
    nn_model_desc d;
    nn_model m;
    np_err e = {0};
    nn_model_opts o = {.compute = compute, .seed = 7};
    double tail = INFINITY;
    if (nn_model_load(name, &d, &e) != NP_OK || nn_model_build(&d, &o, &m, &e) != NP_OK ||
        nn_model_init(m.g, 11, &e) != NP_OK || nn_backward(m.g, m.loss, &e) != NP_OK ||
        nn_optim_step(m.g, &opt, &e) != NP_OK) {
        fprintf(stderr, "%s: %s\n", name, e.msg);
        goto out;
    }
    nn_tensor_alloc(m.input);
    nn_tensor_alloc(m.labels);
    rng r;
    rng_seed(&r, 3);
    double sum = 0;
    for (int s = 0; s < steps; s++) {
        fill(&m, &r);
        if (nn_graph_compute(m.g, &e) != NP_OK) {
            fprintf(stderr, "%s: %s\n", name, e.msg);
            goto out;
        }
        if (s == 0)
            *first = m.loss->data[0];
        if (s >= steps - 10)
            sum += m.loss->data[0];
    }
    tail = sum / 10;
    if (compute == NN_BF16) /* the bf16 values really are bf16 */
        for (int i = 0; i < nn_graph_n_nodes(m.g); i++) {
            nn_tensor *t = nn_graph_node(m.g, i);
            if (t->dtype == NN_BF16 && t->data)
                for (int64_t k = 0; k < nn_numel(t); k++)
                    if (t->data[k] != nn_round_bf16(t->data[k]))
                        tail = INFINITY;
        }
    fprintf(stderr, "%s (%s): loss %.4f -> %.4f after %d steps\n", name, nn_dtype_name(compute),
            *first, tail, steps);
out:
    nn_graph_free(m.g);
    return tail;
}

TEST(mlp_learns_xor_quadrants_below_0_1_loss_with_adam)
{
    nn_optim adam = {.kind = NN_OPTIM_ADAM, .lr = 0.01, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8};
    double first = 0, last = train("mlp-tiny", adam, NN_F32, 300, mlp_batch, &first);
    CU_ASSERT(first > 0.6); /* ~ln 2 at the start */
    CU_ASSERT(last < 0.1);
}

TEST(mlp_learns_with_sgd_momentum_and_in_mixed_precision)
{
    nn_optim sgd = {.kind = NN_OPTIM_SGD, .lr = 0.1, .momentum = 0.9};
    double first = 0;
    CU_ASSERT(train("mlp-tiny", sgd, NN_F32, 300, mlp_batch, &first) < 0.15);
    nn_optim adamw = {.kind = NN_OPTIM_ADAMW, .lr = 0.01, .beta1 = 0.9, .beta2 = 0.999,
                      .eps = 1e-8, .weight_decay = 0.01};
    CU_ASSERT(train("mlp-tiny", adamw, NN_BF16, 300, mlp_batch, &first) < 0.15);
}

TEST(tiny_gpt_learns_the_copy_task_below_0_7_loss)
{
    nn_optim adam = {.kind = NN_OPTIM_ADAM, .lr = 0.01, .beta1 = 0.9, .beta2 = 0.99, .eps = 1e-8};
    double first = 0, last = train("gpt-tiny", adam, NN_F32, 200, copy_batch, &first);
    CU_ASSERT(first > 2.5); /* ~ln 16 = 2.77 at the start */
    CU_ASSERT(last < 0.7);  /* the floor is 0.52 */
}

/* Counting mod 16 from a random start: the next token follows from the current one. */
static void count_batch(nn_model *m, rng *r)
{
    for (int64_t b = 0; b < m->batch; b++) {
        int64_t start = (int64_t)rng_below(r, 16);
        for (int64_t t = 0; t < m->seq; t++) {
            m->input->data[b * m->seq + t] = (float)((start + t) % 16);
            m->labels->data[b * m->seq + t] = (float)((start + t + 1) % 16);
        }
    }
}

/* One fixed batch of random images with labels 0..9: a model that can learn memorizes it. */
static void fixed_images(nn_model *m, rng *r)
{
    (void)r;
    rng fixed;
    rng_seed(&fixed, 99);
    for (int64_t i = 0; i < nn_numel(m->input); i++)
        m->input->data[i] = (float)(2 * rng_unit(&fixed) - 1);
    for (int64_t i = 0; i < m->batch; i++)
        m->labels->data[i] = (float)(i % 10);
}

TEST(tiny_llama_and_tiny_resnet_train_through_gqa_rmsnorm_conv_and_batchnorm)
{
    nn_optim adam = {.kind = NN_OPTIM_ADAM, .lr = 0.01, .beta1 = 0.9, .beta2 = 0.99, .eps = 1e-8};
    double first = 0;
    CU_ASSERT(train("llama-tiny", adam, NN_F32, 100, count_batch, &first) < 0.1);
    CU_ASSERT(first > 2.5);
    CU_ASSERT(train("resnet-tiny", adam, NN_F32, 40, fixed_images, &first) < 0.2);
    CU_ASSERT(first > 1.5);
}

TEST(tiny_mixtures_of_experts_train_through_routing_mla_and_shared_experts)
{
    /* moe-tiny: Mixtral's layout (8 experts, top-2, the auxiliary loss); deepseek-tiny:
     * multi-head latent attention, a dense layer, grouped sigmoid routing with the bias and a
     * shared expert. Gradients reach the router through the chosen weights only. */
    nn_optim adam = {.kind = NN_OPTIM_ADAM, .lr = 0.01, .beta1 = 0.9, .beta2 = 0.99, .eps = 1e-8};
    double first = 0;
    CU_ASSERT(train("moe-tiny", adam, NN_F32, 100, count_batch, &first) < 0.15);
    CU_ASSERT(first > 2.5);
    CU_ASSERT(train("moe-tiny", adam, NN_BF16, 100, count_batch, &first) < 0.2);
    /* with a capacity factor (tokens past an expert's capacity dropped): still learns */
    CU_ASSERT(train(harness_src_path("tests/data/models/moe-capacity.model"), adam, NN_F32, 100,
                    count_batch, &first) < 0.2);
    CU_ASSERT(train("deepseek-tiny", adam, NN_F32, 100, count_batch, &first) < 0.15);
    CU_ASSERT(first > 2.5);
}
