/* test_moe.c — the mixture-of-experts ops and composites (framework/op_moe.c, moe.c) against
 * hand-computed cases: top-k (plain and group-limited), the dispatch layout with and without
 * capacity, a whole layer of 4 tokens, 4 experts, top-2 against a direct per-token sum, token
 * dropping, DeepSeek-V3's selection bias and the auxiliary loss. Their gradients are checked
 * against finite differences in test_framework.c. Multi-head latent attention (zoo_llm.c)
 * against DeepSeek-V2's equations computed here. */
#include <math.h>
#include <string.h>

#include "harness.h"
#include "model.h"

#define DIMS(...) (int64_t[]){__VA_ARGS__}

static nn_tensor *input(nn_graph *g, const char *name, nn_dtype dt, int ndim, const int64_t *ne,
                        const float *v)
{
    nn_tensor *t = nn_input(g, name, dt, ndim, ne);
    nn_tensor_set(t, v);
    return t;
}

static void assert_values(const nn_tensor *t, const float *want, int64_t n, double tol)
{
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    CU_ASSERT_EQUAL_FATAL(nn_numel(t), n);
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)t->data[i] - want[i]);
        if (d > tol * fmax(1.0, fabs(want[i])))
            fprintf(stderr, "%s[%lld] = %.7g, want %.7g\n", t->name, (long long)i,
                    (double)t->data[i], (double)want[i]);
        CU_ASSERT(d <= tol * fmax(1.0, fabs(want[i])));
    }
}

TEST(topk_takes_the_largest_and_group_limited_routing_keeps_the_best_groups)
{
    nn_graph *g = nn_graph_new(1);
    /* 8 experts in 4 groups of 2; sums of each group's top 2: 0.9, 1.0, 0.85, 0.6; maxima:
     * 0.9, 0.5, 0.8, 0.3 */
    nn_tensor *s = input(g, "s", NN_F32, 2, DIMS(1, 8),
                         (float[]){0.9f, 0.0f, 0.5f, 0.5f, 0.8f, 0.05f, 0.3f, 0.3f});
    nn_tensor *plain = nn_topk(g, s, 3, 0, 0, 0);
    nn_tensor *v3 = nn_topk(g, s, 3, 4, 2, 2); /* groups 1 and 0: experts 0..3 */
    nn_tensor *v2 = nn_topk(g, s, 3, 4, 2, 1); /* groups 0 and 2: experts 0, 1, 4, 5 */
    nn_tensor *tie = nn_topk(g, input(g, "t", NN_F32, 1, DIMS(3), (float[]){1, 1, 0}), 1, 0, 0, 0);
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(nn_graph_compute(g, &e), NP_OK);
    CU_ASSERT_EQUAL(plain->dtype, NN_I32);
    assert_values(plain, (float[]){0, 4, 2}, 3, 0);
    assert_values(v3, (float[]){0, 2, 3}, 3, 0);
    assert_values(v2, (float[]){0, 4, 5}, 3, 0);
    assert_values(tie, (float[]){0}, 1, 0); /* the lower index on ties */
    /* more experts than the kept groups hold is refused, naming the op */
    CU_ASSERT_PTR_NULL(nn_topk(g, s, 5, 4, 2, 2));
    CU_ASSERT_EQUAL(nn_graph_status(g, &e), NP_ERR_RANGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "topk: top-5 of 8 experts in 4 groups keeping 2"));
    nn_graph_free(g);
}

/* 4 tokens' experts, top-2 of 4 (the routing of the layer below): expert 0 gets tokens 0, 2;
 * expert 1 tokens 0, 1, 3; expert 2 tokens 2, 3; expert 3 token 1 */
static const float routed[8] = {0, 1, 1, 3, 2, 0, 1, 2};

TEST(dispatch_orders_rows_by_expert_then_token_and_capacity_drops_the_late_ones)
{
    nn_graph *g = nn_graph_new(1);
    nn_tensor *idx = input(g, "idx", NN_I32, 2, DIMS(4, 2), routed);
    nn_tensor *x = input(g, "x", NN_F32, 2, DIMS(4, 1), (float[]){10, 11, 12, 13});
    nn_tensor *w = input(g, "w", NN_F32, 2, DIMS(4, 2), (float[]){1, 2, 3, 4, 5, 6, 7, 8});
    nn_tensor *dropless = nn_moe_dispatch(g, x, idx, NULL, 4, 0);
    nn_tensor *cap = nn_moe_dispatch(g, x, idx, NULL, 4, 2);
    nn_tensor *weighted = nn_moe_dispatch(g, x, idx, w, 4, 0);
    /* combine back: row r of expert output r + 100 */
    nn_tensor *rows = input(g, "rows", NN_F32, 2, DIMS(8, 1),
                            (float[]){100, 101, 102, 103, 104, 105, 106, 107});
    nn_tensor *back = nn_moe_combine(g, rows, idx, w, 4, 0);
    nn_tensor *back_cap = nn_moe_combine(g, rows, idx, w, 4, 2);
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(nn_graph_compute(g, &e), NP_OK);
    /* e0: t0 t2 | e1: t0 t1 t3 | e2: t2 t3 | e3: t1 */
    assert_values(dropless, (float[]){10, 12, 10, 11, 13, 12, 13, 11}, 8, 0);
    /* two rows each: t3's choice of e1 (its third) is dropped, e3's second row is empty */
    assert_values(cap, (float[]){10, 12, 10, 11, 12, 13, 11, 0}, 8, 0);
    assert_values(weighted, (float[]){10 * 1, 12 * 6, 10 * 2, 11 * 3, 13 * 7, 12 * 5, 13 * 8,
                                      11 * 4}, 8, 0);
    /* dropless rows of (t, j): t0 (0, 2), t1 (3, 7), t2 (5, 1), t3 (4, 6) */
    assert_values(back, (float[]){1 * 100 + 2 * 102, 3 * 103 + 4 * 107, 5 * 105 + 6 * 101,
                                  7 * 104 + 8 * 106}, 4, 0);
    /* capacity rows: t0 (0, 2), t1 (3, 6), t2 (4, 1), t3 (dropped, 5) */
    assert_values(back_cap, (float[]){1 * 100 + 2 * 102, 3 * 103 + 4 * 106, 5 * 104 + 6 * 101,
                                      8 * 105}, 4, 0);
    nn_graph_free(g);

    g = nn_graph_new(1); /* an expert index out of range is an error naming the node */
    idx = input(g, "idx", NN_I32, 2, DIMS(4, 2), routed);
    x = input(g, "x", NN_F32, 2, DIMS(4, 1), (float[]){1, 2, 3, 4});
    nn_moe_dispatch(g, x, idx, NULL, 3, 0);
    CU_ASSERT_EQUAL(nn_graph_compute(g, &e), NP_ERR_RANGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "index 3 at position 3 of idx is outside [0, 3)"));
    nn_graph_free(g);
}

TEST(grouped_matmul_multiplies_each_experts_rows_by_its_own_weight)
{
    nn_graph *g = nn_graph_new(1);
    nn_tensor *idx = input(g, "idx", NN_I32, 2, DIMS(4, 2), routed);
    /* expert e's weight [1, 2] is [e + 1, -(e + 1)] */
    nn_tensor *w = input(g, "w", NN_F32, 3, DIMS(4, 1, 2), (float[]){1, -1, 2, -2, 3, -3, 4, -4});
    nn_tensor *rows = input(g, "rows", NN_F32, 2, DIMS(8, 1), (float[]){1, 2, 3, 4, 5, 6, 7, 8});
    nn_tensor *y = nn_moe_gmm(g, rows, w, idx, 0);
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(nn_graph_compute(g, &e), NP_OK);
    /* rows 0-1 expert 0, 2-4 expert 1, 5-6 expert 2, 7 expert 3 */
    assert_values(y, (float[]){1, -1, 2, -2, 6, -6, 8, -8, 10, -10, 18, -18, 21, -21, 32, -32},
                  16, 0);
    CU_ASSERT_EQUAL(nn_node_flops(y), 2 * 8 * 1 * 2);
    nn_graph_free(g);
}

static double silu(double a) { return a / (1 + exp(-a)); }

/* The layer of 4 tokens, 4 experts, top-2, softmax renormalized (Mixtral's router), D = 2,
 * F = 3, against the sum over each token's two experts computed here term by term. */
static void check_layer(double capacity_factor, bool t3_drops_e1)
{
    nn_graph *g = nn_graph_new(1);
    /* logits chosen so that the top-2 are routed[]: t0 (0, 1), t1 (1, 3), t2 (2, 0), t3 (1, 2),
     * each pair 1 or 2 apart: weights 1 / (1 + e^-1) or 1 / (1 + e^-2) and the rest */
    const float logits[16] = {2, 1, 0, -1, 0, 3, 0, 1, 1, 0, 2, 0, 0, 3, 1, 0};
    nn_tensor *l = input(g, "logits", NN_F32, 2, DIMS(4, 4), logits);
    float xv[8], gv[24], uv[24], dv[24];
    for (int i = 0; i < 8; i++)
        xv[i] = (float)(0.25 * (i % 5) - 0.4);
    for (int i = 0; i < 24; i++) {
        gv[i] = (float)(0.1 * ((i * 7) % 11) - 0.5);
        uv[i] = (float)(0.1 * ((i * 5) % 13) - 0.6);
        dv[i] = (float)(0.1 * ((i * 3) % 7) - 0.3);
    }
    nn_tensor *x = input(g, "x", NN_F32, 2, DIMS(4, 2), xv);
    nn_tensor *gate = input(g, "gate", NN_F32, 3, DIMS(4, 2, 3), gv);
    nn_tensor *up = input(g, "up", NN_F32, 3, DIMS(4, 2, 3), uv);
    nn_tensor *down = input(g, "down", NN_F32, 3, DIMS(4, 3, 2), dv);
    nn_moe_router r = {.experts = 4, .top_k = 2, .norm_topk = true,
                       .capacity_factor = capacity_factor};
    nn_moe_routing rt;
    CU_ASSERT_FATAL(nn_moe_route(g, l, NULL, &r, &rt));
    CU_ASSERT_EQUAL(rt.capacity, capacity_factor > 0 ? 2 : 0); /* ceil(1 x 4 x 2 / 4) */
    nn_tensor *y = nn_moe_experts(g, x, &rt, gate, up, down);
    nn_tensor *aux = nn_moe_aux_loss(g, &rt);
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(nn_graph_compute(g, &e), NP_OK);
    assert_values(rt.idx, routed, 8, 0);
    const double a = 1 / (1 + exp(-1.0)), b = 1 / (1 + exp(-2.0));
    const double w[8] = {a, 1 - a, b, 1 - b, a, 1 - a, b, 1 - b};
    assert_values(rt.weights, (float[]){(float)w[0], (float)w[1], (float)w[2], (float)w[3],
                                        (float)w[4], (float)w[5], (float)w[6], (float)w[7]},
                  8, 1e-6);
    float want[8] = {0};
    for (int t = 0; t < 4; t++)
        for (int j = 0; j < 2; j++) {
            int ex = (int)routed[t * 2 + j];
            if (t3_drops_e1 && t == 3 && ex == 1)
                continue;
            for (int o = 0; o < 2; o++) {
                double acc = 0;
                for (int f = 0; f < 3; f++) {
                    double hg = 0, hu = 0;
                    for (int d = 0; d < 2; d++) {
                        hg += xv[t * 2 + d] * gv[(ex * 2 + d) * 3 + f];
                        hu += xv[t * 2 + d] * uv[(ex * 2 + d) * 3 + f];
                    }
                    acc += silu(hg) * hu * dv[(ex * 3 + f) * 2 + o];
                }
                want[t * 2 + o] += (float)(w[t * 2 + j] * acc);
            }
        }
    assert_values(y, want, 8, 1e-5);
    /* aux: E / (T k) sum_e count_e P_e; counts 2, 3, 2, 1; P_e the mean softmax over tokens */
    double p[4] = {0};
    for (int t = 0; t < 4; t++) {
        double z = 0;
        for (int c = 0; c < 4; c++)
            z += exp(logits[t * 4 + c]);
        for (int c = 0; c < 4; c++)
            p[c] += exp(logits[t * 4 + c]) / z / 4;
    }
    double aux_want = 4.0 / 8 * (2 * p[0] + 3 * p[1] + 2 * p[2] + 1 * p[3]);
    assert_values(aux, (float[]){(float)aux_want}, 1, 1e-6);
    nn_graph_free(g);
}

TEST(a_layer_of_four_tokens_four_experts_top2_equals_the_sum_by_hand)
{
    check_layer(0, false);
}

TEST(with_capacity_factor_1_the_token_past_an_experts_capacity_gets_nothing_from_it)
{
    check_layer(1.0, true); /* expert 1's third assignment (token 3) is dropped */
}

TEST(deepseek_v3s_bias_steers_the_choice_but_not_the_weights)
{
    nn_graph *g = nn_graph_new(1);
    nn_tensor *l = input(g, "logits", NN_F32, 2, DIMS(1, 4), (float[]){2, 1, 0, -1});
    nn_tensor *bias = input(g, "bias", NN_F32, 1, DIMS(4), (float[]){0, 0, 0, 5});
    nn_moe_router r = {.experts = 4, .top_k = 2, .score = NN_MOE_SIGMOID, .norm_topk = true,
                       .scale = 2.5};
    nn_moe_routing rt;
    CU_ASSERT_FATAL(nn_moe_route(g, l, bias, &r, &rt));
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(nn_graph_compute(g, &e), NP_OK);
    assert_values(rt.idx, (float[]){3, 0}, 2, 0); /* sigmoid(-1) + 5 beats everything */
    double s3 = 1 / (1 + exp(1.0)), s0 = 1 / (1 + exp(-2.0));
    float want[2] = {(float)(2.5 * s3 / (s3 + s0)), (float)(2.5 * s0 / (s3 + s0))};
    assert_values(rt.weights, want, 2, 1e-6);
    nn_graph_free(g);
}

/* ---- multi-head latent attention (zoo_llm.c) against DeepSeek-V2's equations ---- */

static const float *param(nn_graph *g, const char *name)
{
    nn_tensor *t = nn_graph_find(g, name);
    if (!t)
        fprintf(stderr, "no %s\n", name);
    return t ? t->data : NULL;
}

/* y[n] = rmsnorm(x[n]) (gain 1, eps 1e-5) */
static void rms(const double *x, int n, double *y)
{
    double ss = 0;
    for (int i = 0; i < n; i++)
        ss += x[i] * x[i];
    for (int i = 0; i < n; i++)
        y[i] = x[i] / sqrt(ss / n + 1e-5);
}

/* y[m] = x[k] W[k, m] */
static void mv(const double *x, const float *w, int k, int m, double *y)
{
    for (int j = 0; j < m; j++) {
        y[j] = 0;
        for (int i = 0; i < k; i++)
            y[j] += x[i] * w[i * m + j];
    }
}

/* rope of x[n] at position pos: the pairs (i, i + n/2), base 10000 */
static void rope(double *x, int n, int pos)
{
    for (int i = 0; i < n / 2; i++) {
        double a = pos * pow(10000.0, -2.0 * i / n), c = cos(a), s = sin(a);
        double u = x[i], v = x[i + n / 2];
        x[i] = u * c - v * s;
        x[i + n / 2] = v * c + u * s;
    }
}

TEST(multi_head_latent_attention_computes_deepseek_v2s_equations)
{
    /* DeepSeek-V2 (arXiv 2405.04434) section 2.1, eqs. 9-19 with query compression (V3):
     * c_Q = RMSNorm(W_DQ h), [q_C; q_R] per head from W_UQ c_Q (q_R rotated), c_KV =
     * RMSNorm(W_DKV h), k_C and v per head from W_UK, W_UV c_KV, one k_R = RoPE(W_KR h) shared
     * by the heads, scores (q_C.k_C + q_R.k_R) / sqrt(d_h + d_R), causal, o = W_O [o_1; ..] */
    enum { D = 4, H = 2, QR = 3, KVR = 2, DN = 2, DR = 2, DV = 3, S = 3, DQ = DN + DR };
    static const char text[] = "family = llama\nlayers = 1\nd_model = 4\nheads = 2\nffn = 4\n"
                               "vocab = 5\ncontext = 3\nq_lora_rank = 3\nkv_lora_rank = 2\n"
                               "qk_nope_dim = 2\nqk_rope_dim = 2\nv_head_dim = 3\n";
    nn_model_desc d;
    nn_model m;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(nn_model_parse("mla.model", text, &d, &e), NP_OK);
    nn_model_opts o = {.batch = 1, .seed = 3};
    CU_ASSERT_EQUAL_FATAL(nn_model_build(&d, &o, &m, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(nn_model_init(m.g, 5, &e), NP_OK);
    nn_tensor_set(m.input, (float[]){3, 1, 4});
    nn_tensor_set(m.labels, (float[]){1, 4, 2});
    CU_ASSERT_EQUAL_FATAL(nn_graph_compute(m.g, &e), NP_OK);
    const float *x = param(m.g, "embed_tokens.embedding");
    const float *wqa = param(m.g, "layers.0.self_attn.q_a_proj.weight");
    const float *wqb = param(m.g, "layers.0.self_attn.q_b_proj.weight");
    const float *wkva = param(m.g, "layers.0.self_attn.kv_a_proj_with_mqa.weight");
    const float *wkvb = param(m.g, "layers.0.self_attn.kv_b_proj.weight");
    const float *wo = param(m.g, "layers.0.self_attn.o_proj.weight");
    nn_tensor *res = nn_graph_find(m.g, "layers.0.residual1.add");
    CU_ASSERT_FATAL(x && wqa && wqb && wkva && wkvb && wo && res);
    double q[S][H * DQ], kr[S][DR], kv[S][H * (DN + DV)];
    for (int s = 0; s < S; s++) {
        double xs[D], h[D], cq[QR], ckv[KVR + DR], c[KVR];
        for (int i = 0; i < D; i++)
            xs[i] = x[s * D + i];
        rms(xs, D, h);
        mv(h, wqa, D, QR, cq);
        rms(cq, QR, cq);
        mv(cq, wqb, QR, H * DQ, q[s]);
        for (int hh = 0; hh < H; hh++)
            rope(q[s] + hh * DQ + DN, DR, s);
        mv(h, wkva, D, KVR + DR, ckv);
        rms(ckv, KVR, c);
        mv(c, wkvb, KVR, H * (DN + DV), kv[s]);
        for (int i = 0; i < DR; i++)
            kr[s][i] = ckv[KVR + i];
        rope(kr[s], DR, s);
    }
    for (int i = 0; i < S; i++) {
        double heads[H * DV] = {0};
        for (int hh = 0; hh < H; hh++) {
            double sc[S], mx = -INFINITY, z = 0;
            for (int j = 0; j <= i; j++) {
                const double *qi = q[i] + hh * DQ, *kj = kv[j] + hh * (DN + DV);
                sc[j] = 0;
                for (int t = 0; t < DN; t++)
                    sc[j] += qi[t] * kj[t];
                for (int t = 0; t < DR; t++)
                    sc[j] += qi[DN + t] * kr[j][t];
                sc[j] /= sqrt((double)DQ);
                mx = fmax(mx, sc[j]);
            }
            for (int j = 0; j <= i; j++)
                z += exp(sc[j] - mx);
            for (int j = 0; j <= i; j++)
                for (int t = 0; t < DV; t++)
                    heads[hh * DV + t] += exp(sc[j] - mx) / z * kv[j][hh * (DN + DV) + DN + t];
        }
        double out[D];
        mv(heads, wo, H * DV, D, out);
        for (int c = 0; c < D; c++) {
            double want = x[i * D + c] + out[c], got = res->data[i * D + c];
            if (fabs(got - want) > 1e-5 * fmax(1, fabs(want)))
                fprintf(stderr, "residual[%d][%d] = %.7g, want %.7g\n", i, c, got, want);
            CU_ASSERT(fabs(got - want) <= 1e-5 * fmax(1, fabs(want)));
        }
    }
    nn_graph_free(m.g);
}
