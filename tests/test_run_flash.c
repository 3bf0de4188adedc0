/* test_run_flash.c — `npusim run` with fused (flash) attention, its default: the plan's
 * attentions become the attention op (nn_strategy.fuse_attention, nn_pass_fuse_attention), and
 * against the composite (--attention composite), by hand from the shapes:
 *
 *   - the saved activations drop by the probabilities' bytes, b (H/tp) S^2 per layer and
 *     micro-batch in flight, less the attention's output b S (D/tp) and its log-sum-exp
 *     b (H/tp) S (fp32), which the fused op's backward reads and the composite's does not
 *     (docs/framework.md, "Checkpointing");
 *     selective recomputation (the attention core) already drops the probabilities, so there
 *     the fused op keeps only its output more; full recomputation keeps only layer inputs;
 *   - every attention kernel of the step moves the flash minimum through HBM: q, k, v read and
 *     out and the log-sum-exp written once forward, q, k, v, out, dout and the lse read and
 *     dq, dk, dv written once backward, and no kernel of the step has an S x S operand;
 *   - the report says which attention ran and how many were fused, and says so when there is
 *     none to fuse (an MLP) or the pass leaves them (--dropout: dropout on the probabilities,
 *     whose masks and dropped probabilities the plan saves).
 * (Values at full fidelity: test_run.c; fast against full: test_run_fidelity.c.) */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "lower.h"
#include "model.h"
#include "optim.h"
#include "plan.h"
#include "run_job.h"
#include "run_plan.h"

static const nn_optim adamw = {.kind = NN_OPTIM_ADAMW, .lr = 1e-4, .beta1 = 0.9, .beta2 = 0.95,
                               .eps = 1e-8};

static arch_config tpu_pod(void)
{
    arch_config cfg;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tpu-pod", NULL, 0, &cfg, &e), NP_OK);
    return cfg;
}

/* The plan of model under s (bf16), its attention fused or not. */
static nn_plan *plan_of(const arch_config *cfg, const char *model, int64_t batch, nn_strategy s,
                        bool fused, double dropout)
{
    np_err e = {0};
    nn_model_desc d;
    CU_ASSERT_EQUAL_FATAL(nn_model_load(model, &d, &e), NP_OK);
    nn_model_opts mo = {.batch = batch, .compute = NN_BF16, .seed = 1, .dropout = dropout};
    s.fuse_attention = fused;
    nn_plan *p = NULL;
    if (nn_plan_build(&d, &mo, &s, &adamw, cfg, &p, &e) != NP_OK)
        printf("\n%s: %s\n", model, e.msg);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    return p;
}

static uint64_t activations(const nn_plan *p, int stage)
{
    nn_plan_mem m;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(nn_plan_class_memory(p, &p->classes[stage], &m, &e), NP_OK);
    return m.activations_bytes;
}

typedef struct lm {
    const char *name;
    int64_t layers, D, H, S; /* from its model file */
} lm;

/* The drop of each stage's activations, composite - fused, under recomputation policy rc:
 * per layer of the stage and micro-batch it holds at once (1F1B: min(pp - stage, m)), the
 * probabilities b (H/tp) S^2 (unless rc recomputes them) less the attention output b S D/tp,
 * bf16, and the log-sum-exp b (H/tp) S, fp32, which the forward kernel writes for the
 * backward (unless rc keeps only layer inputs). */
static void check_drop(const lm *m, int dp, int tp, int pp, int64_t batch, int64_t micro,
                       nn_recompute rc)
{
    arch_config cfg = tpu_pod();
    nn_strategy s;
    nn_strategy_default(&s);
    s.dp = dp, s.tp = tp, s.pp = pp, s.microbatch = micro, s.recompute = rc;
    nn_plan *c = plan_of(&cfg, m->name, batch, s, false, 0);
    nn_plan *f = plan_of(&cfg, m->name, batch, s, true, 0);
    CU_ASSERT_EQUAL(c->attention_fused, 0);
    CU_ASSERT_EQUAL(c->attention_composite, m->layers);
    CU_ASSERT_EQUAL(f->attention_fused, m->layers);
    CU_ASSERT_EQUAL(f->attention_composite, 0);
    int64_t probs = rc == NN_RECOMPUTE_NONE ? micro * (m->H / tp) * m->S * m->S * 2 : 0;
    int64_t out = rc == NN_RECOMPUTE_FULL ? 0 : micro * m->S * (m->D / tp) * 2;
    int64_t lse = rc == NN_RECOMPUTE_FULL ? 0 : micro * (m->H / tp) * m->S * 4;
    int64_t mbs = batch / dp / micro;
    for (int st = 0; st < pp; st++) {
        const nn_plan_class *k = &f->classes[st];
        int64_t layers = k->layer_first < 0 ? 0 : k->layer_last - k->layer_first + 1;
        int64_t in_flight = pp - st < mbs ? pp - st : mbs;
        int64_t want = layers * in_flight * (probs - out - lse);
        int64_t got = (int64_t)activations(c, st) - (int64_t)activations(f, st);
        fprintf(stderr, "%s dp %d tp %d pp %d recompute %d, stage %d (%lld layers, %lld "
                        "micro-batches in flight): activations %.2f -> %.2f MiB, drop %lld "
                        "bytes (by hand %lld)\n", m->name, dp, tp, pp, (int)rc, st,
                (long long)layers, (long long)in_flight, activations(c, st) / 1048576.0,
                activations(f, st) / 1048576.0, (long long)got, (long long)want);
        CU_ASSERT_EQUAL(got, want);
    }
    nn_plan_free(c);
    nn_plan_free(f);
}

TEST(fused_attention_drops_the_probabilities_bytes_from_the_saved_activations)
{
    const lm tiny = {"gpt-tiny", 2, 32, 4, 16}, small = {"gpt2-small", 12, 768, 12, 1024};
    /* one stage: one micro-batch in flight */
    check_drop(&tiny, 2, 2, 1, 8, 2, NN_RECOMPUTE_NONE);
    check_drop(&tiny, 1, 1, 1, 4, 4, NN_RECOMPUTE_NONE);
    /* the default run's strategy: 1F1B holds pp - stage micro-batches on stage `stage` */
    check_drop(&small, 2, 2, 2, 16, 2, NN_RECOMPUTE_NONE);
    check_drop(&tiny, 2, 1, 2, 8, 1, NN_RECOMPUTE_NONE);
    /* the attention core recomputed, or every layer from its input */
    check_drop(&small, 2, 2, 2, 16, 2, NN_RECOMPUTE_SELECTIVE);
    check_drop(&tiny, 2, 2, 2, 8, 1, NN_RECOMPUTE_FULL);
}

/* The bytes of a dense [B, H, S, Dh] bf16 tensor and of its [B, H, S] fp32 lse. */
static uint64_t bhsd(const nn_tensor *q) { return (uint64_t)nn_numel(q) * 2; }
static uint64_t lse_of(const nn_tensor *q) { return (uint64_t)(q->ne[0] * q->ne[1] * q->ne[2]) * 4; }

/* Whether kernel k has a [b, H, S, S] operand (a logits' [b, S, V] is 3-D). */
static bool has_scores(const kc_kernel *k, int64_t S)
{
    const kc_tensor *t[KC_MAX_IN + KC_MAX_OUT];
    int n = 0;
    for (int i = 0; i < k->n_in; i++)
        t[n++] = &k->in[i];
    for (int i = 0; i < k->n_out; i++)
        t[n++] = &k->out[i];
    for (int i = 0; i < n; i++)
        if (t[i]->ndim == 4 && t[i]->shape[3] == S && t[i]->shape[2] == S)
            return true;
    return false;
}

TEST(the_steps_attention_kernels_move_the_flash_minimum_through_hbm_and_no_scores)
{
    arch_config cfg = tpu_pod();
    nn_strategy s;
    nn_strategy_default(&s);
    s.dp = s.tp = s.pp = 2;
    s.microbatch = 2;
    const int64_t S = 16;
    for (int fused = 0; fused < 2; fused++) {
        nn_plan *p = plan_of(&cfg, "gpt-tiny", 8, s, fused, 0);
        run_plan *rp = NULL;
        np_err e = {0};
        CU_ASSERT_EQUAL_FATAL(run_plan_build(p, &cfg, NULL, &rp, &e), NP_OK);
        int n_fwd = 0, n_bwd = 0, n_lse = 0, n_scores = 0;
        for (uint32_t i = 0; i < rp->n_kspecs; i++) {
            const run_kspec *ks = &rp->kspecs[i];
            n_scores += has_scores(&ks->k, S);
            n_lse += ks->k.op == NN_OP_ATTENTION_LSE;
            if (ks->k.op != NN_OP_ATTENTION && ks->k.op != NN_OP_ATTENTION_GRAD)
                continue;
            const nn_tensor *q = ks->node->src[0];
            /* by hand: [b, H/tp, S, Dh] = [2, 2, 16, 8] */
            CU_ASSERT_EQUAL(q->ne[0] * q->ne[1] * q->ne[2] * q->ne[3], 2 * 2 * 16 * 8);
            bool fwd = ks->k.op == NN_OP_ATTENTION;
            uint64_t want = fwd ? 3 * bhsd(q) + bhsd(q) + lse_of(q)          /* q k v; out lse */
                                : 5 * bhsd(q) + lse_of(q) + 3 * bhsd(q);     /* q k v out dout
                                                                                lse; dq dk dv */
            kc_result res;
            CU_ASSERT_EQUAL_FATAL(lower_kernel_alone(&cfg, &ks->k, &res, NULL, &e), NP_OK);
            fprintf(stderr, "%s %s: HBM %llu bytes read, %llu written, minimum %llu (by hand "
                            "%llu)\n", fwd ? "forward" : "backward", ks->node->name,
                    (unsigned long long)res.hbm_read_bytes, (unsigned long long)res.hbm_write_bytes,
                    (unsigned long long)res.hbm_bytes_min, (unsigned long long)want);
            CU_ASSERT_EQUAL(res.hbm_bytes_min, want);
            CU_ASSERT_EQUAL(res.hbm_read_bytes + res.hbm_write_bytes, want);
            if (fwd) {
                CU_ASSERT_EQUAL(ks->k.n_out, 2); /* out and the lse its backward reads */
                CU_ASSERT_EQUAL(res.hbm_write_bytes, bhsd(q) + lse_of(q));
            }
            n_fwd += fwd, n_bwd += !fwd;
        }
        if (fused) { /* every lse is written by its attention kernel */
            CU_ASSERT(n_fwd > 0 && n_bwd > 0);
            CU_ASSERT_EQUAL(n_lse, 0);
            CU_ASSERT_EQUAL(n_scores, 0);
        } else {
            CU_ASSERT_EQUAL(n_fwd + n_bwd, 0);
            CU_ASSERT(n_scores > 0);
        }
        run_plan_free(rp);
        nn_plan_free(p);
    }
}

/* --attention composite: Megatron-LM's FusedScaleMaskSoftmax. Per layer and micro-batch the
 * scores [b, H/tp, S, S] pass through one softmax kernel (scale 1/sqrt(Dh), causal) that reads
 * them once and writes the probabilities once, and the backward's one softmax_grad reads the
 * probabilities and their gradient once and writes the scores' gradient once; no scale or
 * causal_mask kernel has an S x S operand. Unfused (--attention unfused) keeps the mask's and
 * the scale's own kernels, and the softmax's backward is still one op. By hand for gpt-tiny
 * (S 16, Dh 8) under dp 2 x tp 2 x pp 2, micro-batches of 2: [2, 2, 16, 16] bf16 = 2 KiB. */
TEST(composite_attention_runs_one_softmax_kernel_over_the_scores_each_way)
{
    arch_config cfg = tpu_pod();
    const int64_t S = 16;
    const uint64_t scores = 2 * 2 * 16 * 16 * 2;
    for (int fuse = 0; fuse < 2; fuse++) {
        nn_strategy s;
        nn_strategy_default(&s);
        s.dp = s.tp = s.pp = 2;
        s.microbatch = 2;
        s.fuse_softmax = fuse;
        nn_plan *p = plan_of(&cfg, "gpt-tiny", 8, s, false, 0);
        run_plan *rp = NULL;
        np_err e = {0};
        CU_ASSERT_EQUAL_FATAL(run_plan_build(p, &cfg, NULL, &rp, &e), NP_OK);
        int n_sm = 0, n_grad = 0, n_mask = 0;
        for (uint32_t i = 0; i < rp->n_kspecs; i++) {
            const run_kspec *ks = &rp->kspecs[i];
            if (!has_scores(&ks->k, S))
                continue;
            n_mask += ks->k.op == NN_OP_CAUSAL_MASK || ks->k.op == NN_OP_SCALE;
            if (ks->k.op != NN_OP_SOFTMAX && ks->k.op != NN_OP_SOFTMAX_GRAD)
                continue;
            bool grad = ks->k.op == NN_OP_SOFTMAX_GRAD;
            kc_result res;
            CU_ASSERT_EQUAL_FATAL(lower_kernel_alone(&cfg, &ks->k, &res, NULL, &e), NP_OK);
            CU_ASSERT_EQUAL(res.hbm_read_bytes, (grad ? 2 : 1) * scores);
            CU_ASSERT_EQUAL(res.hbm_write_bytes, scores);
            CU_ASSERT_EQUAL(ks->node->ip[0], fuse);                           /* causal */
            CU_ASSERT_DOUBLE_EQUAL(ks->node->fp[0], fuse ? 1 / sqrt(8.0) : 0, 1e-12);
            n_sm += !grad, n_grad += grad;
        }
        CU_ASSERT(n_sm > 0 && n_grad > 0);
        CU_ASSERT_EQUAL(n_mask > 0, !fuse);
        run_plan_free(rp);
        nn_plan_free(p);
    }
    /* the run says which composite it ran */
    harness_run r = harness_npusim("run", "--arch", "tpu-pod", "--model", "gpt-tiny", "--batch",
                                   "8", "--dp", "2", "--attention", "composite", NULL);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "attention composite (2, as --attention composite "
                                         "asks: scale, mask and softmax one kernel)"));
    harness_run_free(&r);
    r = harness_npusim("run", "--arch", "tpu-pod", "--model", "gpt-tiny", "--batch", "8", "--dp",
                       "2", "--attention", "unfused", "--json", NULL);
    json_t *j = json_loads(r.out, 0, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(j, "attention")), "composite");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(j, "attention_requested")),
                           "unfused");
    json_decref(j);
    harness_run_free(&r);
}

/* `npusim run` (fast fidelity, tpu-pod) of model at batch 8 over dp 2, with extra flags. */
static json_t *run_json(const char *model, const char *extra0, const char *extra1)
{
    const char *args[16] = {"run", "--arch", "tpu-pod", "--model", model, "--batch", "8",
                            "--dp", "2", "--microbatch", "4", "--json"}; /* one a rank */
    int n = 12;
    if (extra0)
        args[n++] = extra0;
    if (extra1)
        args[n++] = extra1;
    args[n] = NULL;
    harness_run r = harness_npusim_in(NULL, args);
    CU_ASSERT_EQUAL(r.exit_status, 0);
    if (r.exit_status)
        printf("\n%s\n", r.err);
    json_t *j = json_loads(r.out, 0, NULL);
    harness_run_free(&r);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    return j;
}

static const char *jstr(const json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

static json_int_t jint(const json_t *o, const char *k) { return json_integer_value(json_object_get(o, k)); }

TEST(run_fuses_attention_by_default_and_says_which_attention_it_ran)
{
    json_t *f = run_json("gpt-tiny", NULL, NULL), *c = run_json("gpt-tiny", "--attention",
                                                                "composite");
    CU_ASSERT_STRING_EQUAL(jstr(f, "attention"), "fused");
    CU_ASSERT_STRING_EQUAL(jstr(f, "attention_requested"), "fused");
    CU_ASSERT_EQUAL(jint(f, "attention_fused"), 2); /* one per layer */
    CU_ASSERT_EQUAL(jint(f, "attention_composite"), 0);
    CU_ASSERT_STRING_EQUAL(jstr(c, "attention"), "composite");
    CU_ASSERT_STRING_EQUAL(jstr(c, "attention_requested"), "composite");
    CU_ASSERT_EQUAL(jint(c, "attention_fused"), 0);
    CU_ASSERT_EQUAL(jint(c, "attention_composite"), 2);
    /* dp 2 of batch 8, one micro-batch of 4 in flight: 2 layers x ((4 x 4 heads x 16^2 - 4 x
     * 16 x 32) x 2 bytes - 4 x 4 heads x 16 x 4 bytes of lse) */
    json_int_t drop = jint(json_object_get(c, "memory"), "activations_bytes") -
                      jint(json_object_get(f, "memory"), "activations_bytes");
    CU_ASSERT_EQUAL(drop, 2 * ((4 * 4 * 16 * 16 - 4 * 16 * 32) * 2 - 4 * 4 * 16 * 4));
    json_decref(f);
    json_decref(c);
    /* the text header */
    harness_run r = harness_npusim("run", "--arch", "tpu-pod", "--model", "gpt-tiny", "--batch",
                                   "8", "--dp", "2", NULL);
    CU_ASSERT_EQUAL(r.exit_status, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "recompute none, attention fused (2 flash attentions);"));
    harness_run_free(&r);
    /* a model without attention says so, fused or not */
    json_t *m = run_json("mlp-tiny", NULL, NULL);
    CU_ASSERT_STRING_EQUAL(jstr(m, "attention"), "none");
    CU_ASSERT_EQUAL(jint(m, "attention_fused") + jint(m, "attention_composite"), 0);
    json_decref(m);
    r = harness_npusim("run", "--arch", "tpu-pod", "--model", "mlp-tiny", "--batch", "8", NULL);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "attention none (the model has no attention)"));
    harness_run_free(&r);
    /* a bad value names the flag, status 2; the default job takes the flag */
    r = harness_npusim("run", "--attention", "flash", NULL);
    CU_ASSERT_EQUAL(r.exit_status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "--attention"));
    harness_run_free(&r);
}

/* Model FLOPs do not depend on the form of the attention (MFU compares across --attention):
 * the fused op counts every query-key pair and nothing for the scores its backward
 * recomputes, which only the executed (hardware) FLOPs count. gpt-tiny, dp 2 of batch 8: 2
 * ranks x 2 layers x one micro-batch of 4 samples x 4 heads = 16 heads of S = 16, Dh = 8
 * per attention, 256 pairs (136 causal). Per attention, model: forward 16 x 256 x (4 Dh + 5)
 * = 151,552, lse 0, grad 16 x (256 x (8 Dh + 4) + 2 S Dh) = 282,624; executed: 16 x 136 x
 * 37 = 80,512, 16 x 136 x (2 Dh + 4) = 43,520, 16 x (136 x (10 Dh + 4) + 256) = 186,880:
 * 123,264 more model FLOPs than executed, times 4 attentions. */
TEST(fused_attention_counts_model_flops_as_the_composite_and_executed_flops_as_it_runs)
{
    json_t *f = run_json("gpt-tiny", NULL, NULL), *c = run_json("gpt-tiny", "--attention",
                                                                "composite");
    double fm = json_real_value(json_object_get(f, "model_flops_per_step"));
    double fh = json_real_value(json_object_get(f, "hardware_flops_per_step"));
    double cm = json_real_value(json_object_get(c, "model_flops_per_step"));
    double ch = json_real_value(json_object_get(c, "hardware_flops_per_step"));
    CU_ASSERT_DOUBLE_EQUAL(fm - fh, 4 * 123264.0, 0.5);
    CU_ASSERT_DOUBLE_EQUAL(cm, ch, 0.5); /* no recomputation: the composite runs what it states */
    /* the two forms' model FLOPs differ only by the composite's elementwise ops around the
     * scores (scale, mask, softmax and their gradients) against the fused op's 5 + 4 a pair */
    if (fabs(fm - cm) > 0.01 * cm)
        printf("\nmodel FLOPs fused %.0f composite %.0f\n", fm, cm);
    CU_ASSERT(fabs(fm - cm) <= 0.01 * cm);
    json_decref(f);
    json_decref(c);
}

/* --dropout 0.1 (GPT-2's embd/attn/resid_pdrop): every kernel of the step runs on the core model
 * (the dropout kernels too), the attention stays composite (the fused op has no dropout) and
 * says why, and the saved activations grow over the composite without dropout by, with one
 * micro-batch of b = 4 in flight (dp 2 of batch 8), S = 16, h = 32, a = 4 heads, 2 layers:
 * the 1-byte masks of the embedding dropout (sbh) and of each layer's two residual dropouts
 * (sbh each) and attention dropout (a S^2 b), and each layer's dropped probabilities, which
 * the second attention matmul's backward reads (2 a S^2 b, bf16):
 *   sbh + 2 (2 sbh + a S^2 b + 2 a S^2 b) = 2,048 + 2 (4,096 + 4,096 + 8,192) = 34,816 B
 * (Korthikanti et al. 2022's per-layer terms; test_parallel.c checks the whole formula). */
TEST(a_run_with_dropout_runs_its_kernels_keeps_attention_composite_and_saves_the_masks)
{
    json_t *d = run_json("gpt-tiny", "--dropout", "0.1"), *c = run_json("gpt-tiny", "--attention",
                                                                        "composite");
    CU_ASSERT_DOUBLE_EQUAL(json_real_value(json_object_get(d, "dropout")), 0.1, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(json_number_value(json_object_get(c, "dropout")), 0, 0);
    CU_ASSERT_STRING_EQUAL(jstr(d, "attention"), "composite");
    CU_ASSERT_STRING_EQUAL(jstr(d, "attention_requested"), "fused");
    CU_ASSERT_EQUAL(jint(d, "attention_fused"), 0);
    CU_ASSERT_EQUAL(jint(d, "attention_composite"), 2);
    json_int_t more = jint(json_object_get(d, "memory"), "activations_bytes") -
                      jint(json_object_get(c, "memory"), "activations_bytes");
    CU_ASSERT_EQUAL(more, 2048 + 2 * (2 * 2048 + 4096 + 2 * 4096));
    CU_ASSERT(json_real_value(json_object_get(d, "step_time_s")) >
              json_real_value(json_object_get(c, "step_time_s")));
    json_decref(d);
    json_decref(c);
    harness_run r = harness_npusim("run", "--arch", "tpu-pod", "--model", "gpt-tiny", "--batch",
                                   "8", "--dp", "2", "--dropout", "0.1", NULL);
    CU_ASSERT_EQUAL(r.exit_status, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "recompute none, dropout 0.1, attention composite (2: "
                                         "dropout on the probabilities, which the fused op does "
                                         "not take)"));
    harness_run_free(&r);
}

/* Every kernel takes 1 us. */
static np_status one_us(void *ctx, const run_kernel *k, run_ktime *out, np_err *err)
{
    (void)ctx, (void)k, (void)err;
    memset(out, 0, sizeof *out);
    out->ps = 1000000;
    return NP_OK;
}

TEST(where_the_attention_kernel_does_not_fit_the_chip_the_run_is_composite_and_says_why)
{
    /* one head of 64 x 256 bf16 on tiny cut to 8 KiB of scratchpad: q, k and v are 96 KiB,
     * and even K/V streamed in 8-row blocks need two sets of an 8 x 256 block of k and of v
     * (16 KiB) besides the query block (compiler/kc_attn.c, kc_attn_st.c) */
    arch_config cfg;
    np_err e = {0};
    const char *sets[] = {"system.chips=2", "core.sram_bytes=8KiB"};
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tiny", sets, 2, &cfg, &e), NP_OK);
    nn_model_desc d;
    CU_ASSERT_EQUAL_FATAL(nn_model_parse("wide.model", "family = gpt\ndescription = wide\n"
                                         "layers = 1\nd_model = 256\nheads = 1\nvocab = 16\n"
                                         "context = 64\nbatch = 1\n", &d, &e), NP_OK);
    run_job j = {.cfg = &cfg, .model = &d, .steps = 1, .optim = adamw, .time_kernel = one_us};
    nn_strategy_default(&j.s);
    j.s.dp = 2;
    j.s.fuse_attention = true;
    j.o = (nn_model_opts){.batch = 2, .compute = NN_BF16, .seed = 1};
    run_report rep;
    CU_ASSERT_EQUAL_FATAL(run_job_run(&j, &rep, &e), NP_OK);
    CU_ASSERT_STRING_EQUAL(rep.attention, "composite");
    CU_ASSERT_STRING_EQUAL(rep.attention_requested, "fused");
    CU_ASSERT_EQUAL(rep.attention_composite, 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(rep.attention_why, "a head of 64 x 256 bf16 does not fit"));
    CU_ASSERT_PTR_NOT_NULL(strstr(rep.attention_why, "scratchpad bytes (8192 free)"));
    run_report_free(&rep);
    /* the same model on tpu-pod's 8 MiB: fused */
    arch_config pod = tpu_pod();
    j.cfg = &pod;
    CU_ASSERT_EQUAL_FATAL(run_job_run(&j, &rep, &e), NP_OK);
    CU_ASSERT_STRING_EQUAL(rep.attention, "fused");
    CU_ASSERT_STRING_EQUAL(rep.attention_why, "");
    run_report_free(&rep);
    /* npusim plan: GPT-3 175B's heads of 2048 x 128 on a100-cluster's 192 KiB cores are no
     * longer composite: their K/V stream through the scratchpad */
    harness_run r = harness_npusim("plan", "--arch", "a100-cluster", "--model", "gpt3-175b",
                                   "--batch", "1536", "--tp", "8", "--pp", "16", "--dp", "8",
                                   "--microbatch", "1", "--json", NULL);
    CU_ASSERT_EQUAL_FATAL(r.exit_status, 0);
    json_t *p = json_loads(r.out, 0, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(jint(p, "attention_fused"), 96);
    CU_ASSERT_EQUAL(jint(p, "attention_composite"), 0);
    CU_ASSERT_STRING_EQUAL(jstr(p, "attention_why"), "");
    json_decref(p);
    harness_run_free(&r);
}

/* The distinct kernels of a GPT's step (d_model 32, 4 heads, 16 tokens, batch 4) of `layers`
 * layers with dropout on tpu-pod, each compiled and simulated. */
static uint32_t dropout_kernels(int layers, double dropout)
{
    char text[256];
    snprintf(text, sizeof text, "family = gpt\ndescription = deep\nlayers = %d\nd_model = 32\n"
             "heads = 4\nvocab = 16\ncontext = 16\nbatch = 4\n", layers);
    nn_model_desc d;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(nn_model_parse("deep.model", text, &d, &e), NP_OK);
    arch_config cfg = tpu_pod();
    run_job j = {.cfg = &cfg, .model = &d, .steps = 1, .optim = adamw};
    nn_strategy_default(&j.s);
    j.o = (nn_model_opts){.batch = 4, .compute = NN_BF16, .seed = 1, .dropout = dropout};
    run_report rep;
    CU_ASSERT_EQUAL_FATAL(run_job_run(&j, &rep, &e), NP_OK);
    uint32_t n = rep.kernels;
    run_report_free(&rep);
    return n;
}

/* Each dropout node has its own seed, which changes only the immediates of its vpu.rand (the
 * mask's values, never the kernel's timing: compiler/kernel.h, kc_attr_def.values_only), so
 * one kernel is timed for every dropout of a shape: more layers of the same shapes add no
 * distinct kernel, with dropout as without, and dropout adds two: one of [b, S, D] (the
 * embeddings' and the residual branches') and one of [b, H, S, S] (the probabilities'), each
 * also the backward's (the gradient's dropout is the same op, shape and p). Keyed by seed,
 * GPT-3's 96 layers timed 289 dropout kernels and its 1024-chip run took 66 s of CPU, not 26. */
TEST(dropouts_of_one_shape_share_one_timed_kernel_whatever_their_seeds)
{
    uint32_t none = dropout_kernels(2, 0), two = dropout_kernels(2, 0.1);
    CU_ASSERT_EQUAL(dropout_kernels(4, 0), none);
    CU_ASSERT_EQUAL(dropout_kernels(4, 0.1), two);
    CU_ASSERT_EQUAL(two, none + 2);
}
