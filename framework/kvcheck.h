/* kvcheck.h — the functional check of inference with a paged kv cache (docs/serving.md,
 * issue 30's done-when 1): a prefill and decode steps through nn_kv_cache give, at every
 * step, the logits of the reference executor's full-sequence forward of the same tokens
 * (its attention fused, nn_pass_fuse_attention: the op the kv graphs use, in its training
 * form, so that both round alike at bf16). */
#ifndef NPUSIM_FRAMEWORK_KVCHECK_H
#define NPUSIM_FRAMEWORK_KVCHECK_H

#include "model.h"

typedef struct nn_kv_check_opts {
    int64_t batch;      /* sequences (>= 1) */
    int64_t prompt;     /* tokens of each prompt (>= 1) */
    int64_t steps;      /* decode steps after the prefill (>= 0) */
    int64_t block;      /* tokens of a cache block (>= 1) */
    nn_dtype compute;   /* NN_F32 or NN_BF16 */
    uint64_t seed;      /* of the weights and the tokens */
} nn_kv_check_opts;

typedef struct nn_kv_check_result {
    double worst;       /* the largest |kv - full| / (1 + |full|) over every logit of every step */
    int64_t logits;     /* logits compared */
    int64_t blocks;     /* cache blocks in use at the end */
} nn_kv_check_result;

/* Builds d's full forward of prompt + steps tokens for o->batch sequences (seeded weights and
 * tokens) and compares its logits at each position the kv path computes. Errors of the
 * builders and the executor; NP_ERR_RANGE when prompt + steps exceed d's context, or the
 * model has more than NN_KV_CHECK_MAX_PARAMS parameters (the reference executor holds the
 * values of two graphs in fp32: meant for small models). */
#define NN_KV_CHECK_MAX_PARAMS ((int64_t)1 << 26)
np_status nn_kv_check(const nn_model_desc *d, const nn_kv_check_opts *o, nn_kv_check_result *r,
                      np_err *err);

#endif
