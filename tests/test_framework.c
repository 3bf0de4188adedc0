/* test_framework.c — the op registry, graph construction and its errors, the reference
 * executor against hand-computed values, eager vs graph mode, and a finite-difference
 * gradient check of every differentiable op listed in the registry. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "nn.h"
#include "optim.h"

#define DIMS(...) (int64_t[]){__VA_ARGS__}

/* ---- the registry itself ---- */

TEST(every_op_has_a_name_a_reference_and_a_backward_rule_or_a_reason)
{
    for (int op = 1; op < NN_OP_COUNT; op++) {
        const char *name = nn_op_name((nn_op)op);
        CU_ASSERT_PTR_NOT_NULL(name);
        bool has = nn_op_has_backward((nn_op)op);
        const char *why = nn_op_no_grad_reason((nn_op)op);
        if (has == (why != NULL))
            fprintf(stderr, "op %s: backward rule and no-gradient reason disagree\n", name);
        CU_ASSERT(has != (why != NULL));
        for (int other = 1; other < op; other++)
            CU_ASSERT(strcmp(name, nn_op_name((nn_op)other)) != 0);
    }
}

/* ---- construction errors ---- */

TEST(matmul_shape_mismatch_names_the_op_the_shapes_and_what_differs)
{
    nn_graph *g = nn_graph_new(1);
    nn_tensor *a = nn_input(g, "a", NN_F32, 2, DIMS(2, 3));
    nn_tensor *b = nn_param(g, "b", NN_F32, 2, DIMS(4, 5));
    CU_ASSERT_PTR_NULL(nn_matmul(g, a, b));
    CU_ASSERT_PTR_NULL(nn_relu(g, nn_matmul(g, a, b))); /* errors are sticky */
    np_err e = {0};
    CU_ASSERT_EQUAL(nn_graph_status(g, &e), NP_ERR_INCONSISTENT);
    CU_ASSERT_STRING_EQUAL(e.msg, "matmul: inner dimensions differ: a has K=3, b has K=4 "
                                  "(inputs: a [2,3] f32, b [4,5] f32)");
    nn_graph_free(g);
}

TEST(add_of_different_dtypes_is_a_type_error_naming_both)
{
    nn_graph *g = nn_graph_new(1);
    nn_tensor *a = nn_input(g, "a", NN_F32, 1, DIMS(4));
    nn_tensor *b = nn_input(g, "b", NN_BF16, 1, DIMS(4));
    CU_ASSERT_PTR_NULL(nn_add(g, a, b));
    np_err e = {0};
    CU_ASSERT_EQUAL(nn_graph_status(g, &e), NP_ERR_TYPE);
    CU_ASSERT_STRING_EQUAL(e.msg, "add: dtypes differ: input 0 is f32, input 1 is bf16 "
                                  "(inputs: a [4] f32, b [4] bf16)");
    nn_graph_free(g);
}

TEST(broadcast_mismatch_and_bad_conv_channels_are_reported)
{
    nn_graph *g = nn_graph_new(1);
    nn_tensor *a = nn_input(g, "a", NN_F32, 2, DIMS(3, 4));
    nn_tensor *b = nn_input(g, "b", NN_F32, 2, DIMS(2, 4));
    CU_ASSERT_PTR_NULL(nn_add(g, a, b));
    np_err e = {0};
    nn_graph_status(g, &e);
    CU_ASSERT_STRING_EQUAL(e.msg, "add: shapes do not broadcast (inputs: a [3,4] f32, b [2,4] f32)");
    nn_graph_free(g);

    g = nn_graph_new(1);
    nn_tensor *x = nn_input(g, "x", NN_F32, 4, DIMS(1, 6, 8, 8));
    nn_tensor *w = nn_param(g, "w", NN_F32, 4, DIMS(4, 4, 3, 3));
    CU_ASSERT_PTR_NULL(nn_conv2d(g, x, w, 1, 1, 1, 2));
    nn_graph_status(g, &e);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "conv2d: input channels 6 do not match weight channels 4 x 2 groups"));
    nn_graph_free(g);
}

TEST(a_cycle_made_through_the_editing_api_is_found_by_verify_and_the_scheduler)
{
    nn_graph *g = nn_graph_new(1);
    nn_tensor *x = nn_input(g, "x", NN_F32, 1, DIMS(4));
    nn_graph_set_scope(g, "blk");
    nn_tensor *a = nn_relu(g, x);
    nn_tensor *b = nn_tanh(g, a);
    nn_tensor *c = nn_exp(g, b);
    np_err e = {0};
    CU_ASSERT_EQUAL(nn_graph_verify(g, &e), NP_OK);
    nn_node_set_src(a, 0, c); /* a = relu(c): a -> b -> c -> a */
    CU_ASSERT_EQUAL(nn_graph_verify(g, &e), NP_ERR_INCONSISTENT);
    CU_ASSERT_STRING_EQUAL(e.msg, "the graph has a cycle: blk.relu -> blk.tanh -> blk.exp -> blk.relu");
    nn_tensor **order;
    int n;
    CU_ASSERT_EQUAL(nn_schedule(g, &order, &n, &e), NP_ERR_INCONSISTENT);
    CU_ASSERT_EQUAL(nn_graph_compute(g, &e), NP_ERR_INCONSISTENT);
    nn_graph_free(g);
}

TEST(an_edit_that_breaks_shapes_or_dtypes_is_found_by_verify)
{
    nn_graph *g = nn_graph_new(1);
    nn_tensor *x = nn_input(g, "x", NN_F32, 2, DIMS(2, 3));
    nn_tensor *w = nn_param(g, "w", NN_F32, 2, DIMS(3, 5));
    nn_tensor *w2 = nn_param(g, "w2", NN_F32, 2, DIMS(4, 5));
    nn_tensor *h = nn_input(g, "h", NN_BF16, 2, DIMS(3, 5));
    nn_tensor *y = nn_matmul(g, x, w);
    np_err e = {0};
    nn_node_set_src(y, 1, w2);
    CU_ASSERT_EQUAL(nn_graph_verify(g, &e), NP_ERR_INCONSISTENT);
    CU_ASSERT_STRING_EQUAL(e.msg, "node matmul4: matmul: inner dimensions differ: a has K=3, b has "
                                  "K=4 (inputs: x [2,3] f32, w2 [4,5] f32)");
    nn_node_set_src(y, 1, h);
    CU_ASSERT_EQUAL(nn_graph_verify(g, &e), NP_ERR_TYPE);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "dtypes differ: input 0 is f32, input 1 is bf16"));
    nn_graph_free(g);
}

/* ---- reference values against hand computation ---- */

TEST(reference_matmul_conv_pool_and_softmax_match_hand_computed_values)
{
    nn_graph *g = nn_graph_new(1);
    nn_tensor *a = nn_input(g, "a", NN_F32, 2, DIMS(2, 2));
    nn_tensor *b = nn_input(g, "b", NN_F32, 2, DIMS(2, 2));
    nn_tensor_set(a, (float[]){1, 2, 3, 4});
    nn_tensor_set(b, (float[]){5, 6, 7, 8});
    nn_tensor *m = nn_matmul(g, a, b);
    /* 3x3 image 1..9, 2x2 kernel of ones, stride 1: window sums */
    nn_tensor *x = nn_input(g, "x", NN_F32, 4, DIMS(1, 1, 3, 3));
    nn_tensor_set(x, (float[]){1, 2, 3, 4, 5, 6, 7, 8, 9});
    nn_tensor *w = nn_const(g, "w", NN_F32, 4, DIMS(1, 1, 2, 2));
    nn_tensor_fill(w, 1.0f);
    nn_tensor *c = nn_conv2d(g, x, w, 1, 0, 1, 1);
    nn_tensor *mp = nn_maxpool2d(g, x, 2, 1, 0);
    nn_tensor *sm = nn_softmax(g, nn_reshape(g, a, 1, DIMS(4)));
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(nn_graph_compute(g, &e), NP_OK);
    float want_m[] = {19, 22, 43, 50}, want_c[] = {12, 16, 24, 28}, want_mp[] = {5, 6, 8, 9};
    for (int i = 0; i < 4; i++) {
        CU_ASSERT_DOUBLE_EQUAL(m->data[i], want_m[i], 1e-6);
        CU_ASSERT_DOUBLE_EQUAL(c->data[i], want_c[i], 1e-6);
        CU_ASSERT_DOUBLE_EQUAL(mp->data[i], want_mp[i], 1e-6);
    }
    double z = exp(1) + exp(2) + exp(3) + exp(4);
    CU_ASSERT_DOUBLE_EQUAL(sm->data[3], exp(4) / z, 1e-6);
    CU_ASSERT_EQUAL(nn_node_flops(m), 2 * 2 * 2 * 2);
    CU_ASSERT_EQUAL(nn_node_macs(c), 4 * 4);
    nn_graph_free(g);
}

TEST(executor_rounds_bf16_outputs_and_checks_indices)
{
    nn_graph *g = nn_graph_new(1);
    nn_tensor *a = nn_input(g, "a", NN_F32, 1, DIMS(2));
    nn_tensor_set(a, (float[]){1.0f + 1.0f / 1024, 3.14159265f});
    nn_tensor *h = nn_cast(g, a, NN_BF16);
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(nn_graph_compute(g, &e), NP_OK);
    CU_ASSERT_EQUAL(h->data[0], 1.0f);      /* 8 mantissa bits: 1 + 2^-10 rounds to 1 */
    CU_ASSERT_EQUAL(h->data[1], 3.140625f);
    nn_graph_free(g);

    g = nn_graph_new(1);
    nn_tensor *tab = nn_param(g, "tab", NN_F32, 2, DIMS(4, 2));
    nn_tensor *idx = nn_input(g, "idx", NN_I32, 1, DIMS(3));
    nn_tensor_fill(tab, 1.0f);
    nn_tensor_set(idx, (float[]){0, 3, 4});
    nn_embedding(g, tab, idx);
    CU_ASSERT_EQUAL(nn_graph_compute(g, &e), NP_ERR_RANGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "index 4 at position 2 of idx is outside [0, 4)"));
    nn_graph_free(g);
}

TEST(a_leaf_without_values_is_a_missing_error_naming_it)
{
    nn_graph *g = nn_graph_new(1);
    nn_tensor *x = nn_input(g, "pixels", NN_F32, 1, DIMS(3));
    nn_relu(g, x);
    np_err e = {0};
    CU_ASSERT_EQUAL(nn_graph_compute(g, &e), NP_ERR_MISSING);
    CU_ASSERT_STRING_EQUAL(e.msg, "input pixels has no values");
    nn_graph_free(g);
}

/* ---- finite-difference gradient checks, one case per differentiable op ---- */

typedef struct gc_ctx {
    nn_graph *g;
    nn_tensor *params[8];
    int n_params;
    uint64_t seed;
} gc_ctx;

/* A trainable parameter with normal values; positive: |v| + 0.5. */
static nn_tensor *gc_param(gc_ctx *c, int ndim, const int64_t *ne, bool positive)
{
    char name[16];
    snprintf(name, sizeof name, "p%d", c->n_params);
    nn_tensor *p = nn_param(c->g, name, NN_F32, ndim, ne);
    nn_tensor_randn(p, ++c->seed, 1.0);
    for (int64_t i = 0; i < nn_numel(p); i++) {
        if (positive)
            p->data[i] = fabsf(p->data[i]) + 0.5f;
        else if (fabsf(p->data[i]) < 0.05f) /* keep away from kinks (relu, max) */
            p->data[i] = p->data[i] < 0 ? -0.05f - p->data[i] : 0.05f + p->data[i];
    }
    c->params[c->n_params++] = p;
    return p;
}
#define P(c, ...) gc_param(c, (int)(sizeof DIMS(__VA_ARGS__) / sizeof(int64_t)), DIMS(__VA_ARGS__), false)
#define PPOS(c, ...) gc_param(c, (int)(sizeof DIMS(__VA_ARGS__) / sizeof(int64_t)), DIMS(__VA_ARGS__), true)

static nn_tensor *gc_ints(gc_ctx *c, int n, int limit)
{
    nn_tensor *t = nn_input(c->g, "ints", NN_I32, 1, DIMS(n));
    nn_tensor_alloc(t);
    for (int i = 0; i < n; i++)
        t->data[i] = (float)((i * 7 + 3) % limit);
    return t;
}

typedef nn_tensor *(*gc_case)(gc_ctx *c);

#define G (c->g)
static nn_tensor *gc_add(gc_ctx *c) { return nn_add(G, P(c, 3, 4), P(c, 4)); }
static nn_tensor *gc_sub(gc_ctx *c) { return nn_sub(G, P(c, 2, 1, 3), P(c, 4, 1)); }
static nn_tensor *gc_mul(gc_ctx *c) { return nn_mul(G, P(c, 3, 4), P(c, 3, 1)); }
static nn_tensor *gc_div(gc_ctx *c) { return nn_div(G, P(c, 3, 4), PPOS(c, 4)); }
static nn_tensor *gc_scale(gc_ctx *c) { return nn_scale(G, P(c, 5), -1.5); }
static nn_tensor *gc_relu(gc_ctx *c) { return nn_relu6(G, nn_scale(G, P(c, 12), 4.0)); }
static nn_tensor *gc_gelu(gc_ctx *c) { return nn_gelu(G, P(c, 12)); }
static nn_tensor *gc_silu(gc_ctx *c) { return nn_silu(G, P(c, 12)); }
static nn_tensor *gc_tanh(gc_ctx *c) { return nn_tanh(G, P(c, 12)); }
static nn_tensor *gc_exp(gc_ctx *c) { return nn_exp(G, P(c, 6)); }
static nn_tensor *gc_log(gc_ctx *c) { return nn_log(G, PPOS(c, 6)); }
static nn_tensor *gc_cast(gc_ctx *c) { return nn_cast(G, P(c, 6), NN_F32); }
static nn_tensor *gc_dropout(gc_ctx *c) { return nn_dropout(G, P(c, 20), 0.3, 99); }
static nn_tensor *gc_causal(gc_ctx *c) { return nn_causal_mask(G, P(c, 2, 3, 3), 0.0); }
static nn_tensor *gc_bcast(gc_ctx *c) { return nn_broadcast_to(G, P(c, 1, 4), 3, DIMS(2, 3, 4)); }
static nn_tensor *gc_sum_to(gc_ctx *c) { return nn_sum_to(G, P(c, 2, 3, 4), 2, DIMS(3, 1)); }
static nn_tensor *gc_rsum(gc_ctx *c) { return nn_reduce_sum(G, P(c, 2, 3, 4), 1, false); }
static nn_tensor *gc_rmean(gc_ctx *c) { return nn_reduce_mean(G, P(c, 2, 3, 4), -1, true); }
static nn_tensor *gc_rmax(gc_ctx *c) { return nn_reduce_max(G, P(c, 2, 3, 4), 0, false); }
static nn_tensor *gc_matmul(gc_ctx *c) { return nn_matmul(G, P(c, 2, 3, 4), P(c, 4, 5)); }
static nn_tensor *gc_conv(gc_ctx *c)
{
    return nn_conv2d(G, P(c, 2, 4, 5, 5), P(c, 6, 2, 3, 3), 2, 1, 1, 2);
}
static nn_tensor *gc_maxpool(gc_ctx *c) { return nn_maxpool2d(G, P(c, 1, 2, 5, 5), 3, 2, 1); }
static nn_tensor *gc_avgpool(gc_ctx *c) { return nn_avgpool2d(G, P(c, 1, 2, 4, 4), 2, 2, 0); }
static nn_tensor *gc_bn(gc_ctx *c) { return nn_batchnorm(G, P(c, 3, 2, 2, 2), P(c, 2), P(c, 2), 1e-5); }
static nn_tensor *gc_ln(gc_ctx *c) { return nn_layernorm(G, P(c, 3, 5), P(c, 5), P(c, 5), 1e-5); }
static nn_tensor *gc_rms(gc_ctx *c) { return nn_rmsnorm(G, P(c, 3, 5), P(c, 5), 1e-5); }
static nn_tensor *gc_rope(gc_ctx *c) { return nn_rope(G, P(c, 2, 3, 4), 10.0); }
/* plain, and with Megatron's fused scale and causal mask (its backward: one softmax_grad) */
static nn_tensor *gc_softmax(gc_ctx *c)
{
    return nn_add(G, nn_softmax(G, P(c, 2, 4, 5)), nn_softmax_masked(G, P(c, 2, 4, 5), 0.7, true));
}
static nn_tensor *gc_logsoftmax(gc_ctx *c) { return nn_log_softmax(G, P(c, 3, 5)); }
static nn_tensor *gc_reshape(gc_ctx *c) { return nn_reshape(G, P(c, 2, 6), 3, DIMS(3, -1, 2)); }
static nn_tensor *gc_permute(gc_ctx *c) { return nn_permute(G, P(c, 2, 3, 4), (int[]){2, 0, 1}); }
static nn_tensor *gc_concat(gc_ctx *c)
{
    return nn_concat(G, 3, (nn_tensor *[]){P(c, 2, 1, 3), P(c, 2, 2, 3), P(c, 2, 1, 3)}, 1);
}
static nn_tensor *gc_slice(gc_ctx *c) { return nn_slice(G, P(c, 3, 6), 1, 2, 5); }
static nn_tensor *gc_pad(gc_ctx *c) { return nn_pad(G, P(c, 3, 2), 0, 1, 2); }
static nn_tensor *gc_embedding(gc_ctx *c) { return nn_embedding(G, P(c, 5, 3), gc_ints(c, 6, 5)); }
static nn_tensor *gc_xent(gc_ctx *c) { return nn_cross_entropy(G, P(c, 4, 5), gc_ints(c, 4, 5)); }
static nn_tensor *gc_attn(gc_ctx *c)
{
    return nn_attention_fused(G, P(c, 2, 2, 5, 3), P(c, 2, 2, 5, 3), P(c, 2, 2, 5, 3), true);
}
/* expert indices of 5 tokens over 3 experts, top-2 (expert 1 gets 4 of the 10) */
static nn_tensor *gc_experts(gc_ctx *c)
{
    nn_tensor *t = nn_input(c->g, "experts", NN_I32, 2, DIMS(5, 2));
    nn_tensor_set(t, (float[]){1, 0, 2, 1, 1, 0, 0, 2, 1, 2});
    return t;
}
/* dispatch and combine weighted, one dropless and one with capacity 3 (one assignment of
 * expert 1 dropped) */
static nn_tensor *gc_moe_dispatch(gc_ctx *c)
{
    nn_tensor *idx = gc_experts(c), *x = P(c, 5, 2), *w = P(c, 5, 2);
    nn_tensor *a = nn_moe_dispatch(G, x, idx, w, 3, 0), *b = nn_moe_dispatch(G, x, idx, w, 3, 3);
    return nn_concat(G, 2, (nn_tensor *[]){a, b}, 0);
}
static nn_tensor *gc_moe_combine(gc_ctx *c)
{
    nn_tensor *idx = gc_experts(c), *w = P(c, 5, 2);
    return nn_add(G, nn_moe_combine(G, P(c, 10, 3), idx, w, 3, 0),
                  nn_moe_combine(G, P(c, 9, 3), idx, w, 3, 3));
}
static nn_tensor *gc_moe_gmm(gc_ctx *c)
{
    nn_tensor *idx = gc_experts(c), *w = P(c, 3, 2, 4);
    return nn_concat(G, 2, (nn_tensor *[]){nn_moe_gmm(G, P(c, 10, 2), w, idx, 0),
                                           nn_moe_gmm(G, P(c, 9, 2), w, idx, 3)}, 0);
}
#undef G

static const gc_case gc_cases[NN_OP_COUNT] = {
    [NN_OP_ADD] = gc_add, [NN_OP_SUB] = gc_sub, [NN_OP_MUL] = gc_mul, [NN_OP_DIV] = gc_div,
    [NN_OP_SCALE] = gc_scale, [NN_OP_RELU] = gc_relu, [NN_OP_GELU] = gc_gelu,
    [NN_OP_SILU] = gc_silu, [NN_OP_TANH] = gc_tanh, [NN_OP_EXP] = gc_exp, [NN_OP_LOG] = gc_log,
    [NN_OP_CAST] = gc_cast, [NN_OP_DROPOUT] = gc_dropout, [NN_OP_CAUSAL_MASK] = gc_causal,
    [NN_OP_BROADCAST_TO] = gc_bcast, [NN_OP_SUM_TO] = gc_sum_to, [NN_OP_REDUCE_SUM] = gc_rsum,
    [NN_OP_REDUCE_MEAN] = gc_rmean, [NN_OP_REDUCE_MAX] = gc_rmax, [NN_OP_MATMUL] = gc_matmul,
    [NN_OP_CONV2D] = gc_conv, [NN_OP_MAXPOOL2D] = gc_maxpool, [NN_OP_AVGPOOL2D] = gc_avgpool,
    [NN_OP_BATCHNORM] = gc_bn, [NN_OP_LAYERNORM] = gc_ln, [NN_OP_RMSNORM] = gc_rms,
    [NN_OP_ROPE] = gc_rope, [NN_OP_SOFTMAX] = gc_softmax, [NN_OP_LOG_SOFTMAX] = gc_logsoftmax,
    [NN_OP_RESHAPE] = gc_reshape, [NN_OP_PERMUTE] = gc_permute, [NN_OP_CONCAT] = gc_concat,
    [NN_OP_SLICE] = gc_slice, [NN_OP_PAD] = gc_pad, [NN_OP_EMBEDDING] = gc_embedding,
    [NN_OP_CROSS_ENTROPY] = gc_xent, [NN_OP_ATTENTION] = gc_attn,
    [NN_OP_MOE_DISPATCH] = gc_moe_dispatch, [NN_OP_MOE_COMBINE] = gc_moe_combine,
    [NN_OP_MOE_GMM] = gc_moe_gmm,
};

/* Scalar loss sum(y * R) with fixed random R, so every output element matters. */
static nn_tensor *gc_project(gc_ctx *c, nn_tensor *y)
{
    int64_t n = nn_numel(y);
    nn_tensor *r = nn_const(c->g, "R", NN_F32, 1, DIMS(n));
    nn_tensor_randn(r, 12345, 1.0);
    return nn_reduce_sum(c->g, nn_mul(c->g, nn_reshape(c->g, y, 1, DIMS(n)), r), 0, false);
}

/* Builds the case, checks every parameter element's gradient against central differences;
 * returns the worst error relative to max(1, |grad|) (or INFINITY on failure). */
static double gc_run(const char *what, nn_tensor *(*build)(gc_ctx *), uint64_t seed)
{
    gc_ctx c = {.g = nn_graph_new(seed), .seed = seed * 100};
    np_err e = {0};
    nn_tensor *y = build(&c);
    nn_tensor *loss = gc_project(&c, y);
    double worst = INFINITY;
    if (!loss || nn_graph_status(c.g, &e) != NP_OK) {
        fprintf(stderr, "%s: %s\n", what, e.msg);
        goto out;
    }
    const double eps = 1e-2;
    int64_t total = 0;
    double *num[8];
    for (int p = 0; p < c.n_params; p++) {
        nn_tensor *t = c.params[p];
        num[p] = calloc((size_t)nn_numel(t), sizeof(double));
        for (int64_t i = 0; i < nn_numel(t); i++, total++) {
            float v = t->data[i];
            t->data[i] = (float)(v + eps);
            nn_graph_compute(c.g, &e);
            double lp = loss->data[0];
            t->data[i] = (float)(v - eps);
            nn_graph_compute(c.g, &e);
            double lm = loss->data[0];
            t->data[i] = v;
            num[p][i] = (lp - lm) / (2 * eps);
        }
    }
    if (nn_backward(c.g, loss, &e) != NP_OK || nn_graph_compute(c.g, &e) != NP_OK) {
        fprintf(stderr, "%s: %s\n", what, e.msg);
    } else {
        worst = 0.0;
        for (int p = 0; p < c.n_params; p++) {
            nn_tensor *gr = c.params[p]->grad;
            for (int64_t i = 0; gr && i < nn_numel(gr); i++) {
                double a = gr->data[i], n = num[p][i];
                double err = fabs(a - n) / fmax(1.0, fabs(n));
                if (err > worst)
                    worst = err;
            }
            if (!gr) {
                fprintf(stderr, "%s: parameter %d got no gradient\n", what, p);
                worst = INFINITY;
            }
        }
    }
    for (int p = 0; p < c.n_params; p++)
        free(num[p]);
    if (worst > 1e-2)
        fprintf(stderr, "gradient check of %s: worst relative error %g\n", what, worst);
out:
    nn_graph_free(c.g);
    return worst;
}

TEST(every_differentiable_op_in_the_registry_passes_a_finite_difference_check)
{
    int checked = 0;
    for (int op = 1; op < NN_OP_COUNT; op++) {
        /* communication ops: checked across ranks against the distributed executor
         * (tests/test_parallel.c) */
        if (!nn_op_has_backward((nn_op)op) || (nn_op_flags((nn_op)op) & NN_OPF_COMM))
            continue;
        if (!gc_cases[op]) {
            fprintf(stderr, "op %s has a backward rule but no gradient check case\n",
                    nn_op_name((nn_op)op));
            CU_FAIL("differentiable op without a gradient check");
            continue;
        }
        CU_ASSERT(gc_run(nn_op_name((nn_op)op), gc_cases[op], (uint64_t)op) < 1e-2);
        checked++;
    }
    CU_ASSERT(checked >= 30);
}

static nn_tensor *gc_linear(gc_ctx *c) { return nn_linear(c->g, P(c, 2, 3, 4), P(c, 4, 5), P(c, 5)); }
static nn_tensor *gc_attention(gc_ctx *c)
{
    return nn_attention(c->g, P(c, 1, 2, 4, 3), P(c, 1, 2, 4, 3), P(c, 1, 2, 4, 3), true);
}
static nn_tensor *gc_attention_fused(gc_ctx *c)
{
    nn_tensor *q = P(c, 1, 3, 6, 4);
    return nn_attention_fused(c->g, q, P(c, 1, 3, 6, 4), q, false); /* q read as q and v */
}
static nn_tensor *gc_shuffle(gc_ctx *c) { return nn_channel_shuffle(c->g, P(c, 1, 6, 2, 2), 3); }
static nn_tensor *gc_gap(gc_ctx *c) { return nn_global_avgpool(c->g, P(c, 2, 3, 2, 2)); }
static nn_tensor *gc_split(gc_ctx *c)
{
    nn_tensor *parts[3];
    nn_split(c->g, P(c, 2, 6), 1, 3, parts);
    return nn_mul(c->g, parts[0], nn_tanh(c->g, parts[2]));
}
static nn_tensor *gc_sum_squares(gc_ctx *c)
{
    return nn_sum_squares(c->g, P(c, 2, 3, 4), 1, true); /* reduce_sum of the squares */
}

static nn_tensor *gc_fanout(gc_ctx *c)
{
    nn_tensor *x = P(c, 3, 3);
    return nn_mul(c->g, nn_matmul(c->g, x, x), nn_exp(c->g, x)); /* x used three times */
}

/* A whole MoE layer: router, top-2 of 4 experts, SwiGLU experts, combine, the auxiliary
 * loss; softmax renormalized with capacity (factor 1: some tokens dropped), and sigmoid
 * group-limited (2 groups, keep 1) and scaled, dropless */
static nn_tensor *gc_moe_layer(gc_ctx *c, nn_moe_router r)
{
    nn_tensor *x = P(c, 6, 4);
    nn_moe_routing rt;
    if (!nn_moe_route(c->g, nn_matmul(c->g, x, P(c, 4, 4)), NULL, &r, &rt))
        return NULL;
    nn_tensor *y = nn_moe_experts(c->g, x, &rt, P(c, 4, 4, 3), P(c, 4, 4, 3), P(c, 4, 3, 4));
    nn_tensor *aux = nn_moe_aux_loss(c->g, &rt);
    return nn_add(c->g, y, nn_scale(c->g, aux, 0.5));
}
static nn_tensor *gc_moe_softmax(gc_ctx *c)
{
    return gc_moe_layer(c, (nn_moe_router){.experts = 4, .top_k = 2, .norm_topk = true,
                                           .capacity_factor = 1.0});
}
static nn_tensor *gc_moe_sigmoid(gc_ctx *c)
{
    return gc_moe_layer(c, (nn_moe_router){.experts = 4, .top_k = 2, .score = NN_MOE_SIGMOID,
                                           .norm_topk = true, .scale = 2.5, .groups = 2,
                                           .keep_groups = 1, .group_top = 2});
}

TEST(composites_and_fan_out_accumulation_pass_finite_difference_checks)
{
    CU_ASSERT(gc_run("moe layer (softmax, capacity)", gc_moe_softmax, 9) < 1e-2);
    CU_ASSERT(gc_run("moe layer (sigmoid, groups, dropless)", gc_moe_sigmoid, 10) < 1e-2);
    CU_ASSERT(gc_run("linear", gc_linear, 1) < 1e-2);
    CU_ASSERT(gc_run("attention (causal)", gc_attention, 2) < 1e-2);
    CU_ASSERT(gc_run("attention fused (not causal, q as v)", gc_attention_fused, 7) < 1e-2);
    CU_ASSERT(gc_run("channel_shuffle", gc_shuffle, 3) < 1e-2);
    CU_ASSERT(gc_run("global_avgpool", gc_gap, 4) < 1e-2);
    CU_ASSERT(gc_run("split", gc_split, 5) < 1e-2);
    CU_ASSERT(gc_run("fan-out", gc_fanout, 6) < 1e-2);
    CU_ASSERT(gc_run("sum of squares", gc_sum_squares, 8) < 1e-2);
}

TEST(backward_names_an_op_without_a_gradient_on_the_path)
{
    nn_graph *g = nn_graph_new(1);
    nn_tensor *x = nn_param(g, "x", NN_F32, 4, DIMS(1, 2, 3, 3));
    nn_tensor *one = nn_const(g, "one", NN_F32, 1, DIMS(2));
    nn_tensor *y = nn_batchnorm_infer(g, x, one, one, one, one, 1e-5);
    nn_tensor *loss = nn_reduce_sum(g, nn_reshape(g, y, 1, DIMS(18)), 0, false);
    np_err e = {0};
    CU_ASSERT_EQUAL(nn_backward(g, loss, &e), NP_ERR_INCONSISTENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "op batchnorm_infer (node batchnorm_infer2) has no gradient: "
                                         "inference only"));
    nn_graph_free(g);
}

/* ---- the docs follow the code ---- */

TEST(framework_doc_shows_the_built_example_verbatim_and_names_every_op)
{
    char *doc = harness_read_file(harness_src_path("docs/framework.md"), NULL);
    char *ex = harness_read_file(harness_src_path("docs/examples/mlp_train.c"), NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(doc);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ex);
    CU_ASSERT_PTR_NOT_NULL(strstr(doc, ex));
    for (int op = 1; op < NN_OP_COUNT; op++) {
        char word[64];
        snprintf(word, sizeof word, " %s", nn_op_name((nn_op)op));
        if (!strstr(doc, word))
            fprintf(stderr, "docs/framework.md does not name op %s\n", nn_op_name((nn_op)op));
        CU_ASSERT_PTR_NOT_NULL(strstr(doc, word));
    }
    free(doc);
    free(ex);
}

TEST(tensor_values_are_written_read_and_indexed_through_checked_accessors)
{
    nn_graph *g = nn_graph_new(1);
    nn_tensor *a = nn_input(g, "a", NN_F32, 2, DIMS(2, 3));
    nn_tensor *b = nn_param(g, "b", NN_F32, 2, DIMS(3, 2));
    nn_tensor *y = nn_matmul(g, a, b);
    nn_tensor *tok = nn_input(g, "tok", NN_I32, 1, DIMS(2));
    np_err e = {0};
    float out[4];
    CU_ASSERT_PTR_NULL(nn_tensor_values(y)); /* nothing computed yet */
    CU_ASSERT_EQUAL(nn_tensor_read(y, out, 4, &e), NP_ERR_MISSING);
    const float av[6] = {1, 2, 3, 4, 5, 6}, bv[6] = {1, 0, 0, 1, 1, 1};
    CU_ASSERT_EQUAL(nn_tensor_write(a, av, 5, &e), NP_ERR_RANGE); /* 6 values, not 5 */
    CU_ASSERT_PTR_NULL(nn_tensor_values(a));                      /* nothing changed */
    CU_ASSERT_EQUAL(nn_tensor_write(a, av, 6, &e), NP_OK);
    CU_ASSERT_EQUAL(nn_tensor_write(b, bv, 6, &e), NP_OK);
    CU_ASSERT_EQUAL(nn_tensor_write(tok, (const float[]){3, 1.5f}, 2, &e), NP_ERR_TYPE);
    CU_ASSERT_EQUAL(nn_tensor_write(tok, (const float[]){3, 1}, 2, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(nn_graph_compute(g, &e), NP_OK);
    /* [[1,2,3],[4,5,6]] x [[1,0],[0,1],[1,1]] = [[4,5],[10,11]] by hand */
    CU_ASSERT_EQUAL(nn_tensor_read(y, out, 3, &e), NP_ERR_RANGE);
    CU_ASSERT_EQUAL_FATAL(nn_tensor_read(y, out, 4, &e), NP_OK);
    CU_ASSERT_EQUAL(out[0], 4);
    CU_ASSERT_EQUAL(out[1], 5);
    CU_ASSERT_EQUAL(out[2], 10);
    CU_ASSERT_EQUAL(out[3], 11);
    float v = 0;
    CU_ASSERT_EQUAL(nn_tensor_get_at(y, DIMS(1, 0), &v, &e), NP_OK);
    CU_ASSERT_EQUAL(v, 10);
    CU_ASSERT_EQUAL(nn_tensor_get_at(y, DIMS(2, 0), &v, &e), NP_ERR_RANGE);
    CU_ASSERT_EQUAL(nn_tensor_get_at(y, DIMS(0, -1), &v, &e), NP_ERR_RANGE);
    CU_ASSERT_EQUAL(nn_tensor_set_at(a, DIMS(0, 2), -1, &e), NP_OK);
    CU_ASSERT_EQUAL(nn_tensor_get_at(a, DIMS(0, 2), &v, &e), NP_OK);
    CU_ASSERT_EQUAL(v, -1);
    CU_ASSERT_EQUAL(nn_tensor_set_at(a, DIMS(0, 3), 1, &e), NP_ERR_RANGE);
    CU_ASSERT_EQUAL(nn_tensor_values(a)[2], -1);
    nn_graph_free(g);
}
