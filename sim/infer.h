/* infer.h — one model served on one chip: the time of an inference iteration (a prefill of
 * prompts, or a decode step of a batch against its kv cache) with the fast engine's kernel
 * timings (as `npusim run` times a plan's kernels: run_kernel.h), and a request's figures —
 * time to first token, time per output token, end-to-end latency, tokens/s, kv-cache memory
 * — behind `npusim infer` (docs/serving.md).
 *
 * An iteration is the kv inference graph of framework/zoo.c (nn_model_opts.kv) at the compute
 * dtype bf16, its nodes' kernels run one after another on the chip: each kernel's time is the
 * core model's (compiled and simulated once per distinct key, optionally kept in a kernel
 * cache file). Decode attention — S new queries against a longer cached context, read from
 * the paged cache — has no kernel yet (the flash kernel takes q, k, v of one length): it is
 * timed as its roofline, max(FLOPs / the matrix peak, its q, out and K/V bytes / the HBM
 * bandwidth), with the gather of the cache's pages and their concatenation folded into it (a
 * paged-attention kernel reads the blocks in place). infer_iter says how much of an
 * iteration's time is such a roofline.
 */
#ifndef NPUSIM_SIM_INFER_H
#define NPUSIM_SIM_INFER_H

#include <stdbool.h>
#include <stdint.h>

#include "arch.h"
#include "err.h"
#include "model.h"

typedef struct infer_opts {
    const nn_model_desc *model;
    const arch_config *cfg;
    int tp;                  /* tensor parallel chips (1: the only one built) */
    int64_t batch;           /* sequences served together (>= 1) */
    int64_t prompt;          /* tokens of each prompt (>= 1) */
    int64_t output;          /* tokens generated for each (>= 1; the first by the prefill) */
    int64_t kv_block;        /* tokens of a kv-cache block (>= 1) */
    const char *kernel_cache; /* (optional) the kernel timing cache file */
} infer_opts;

/* One iteration: batch sequences, each with `tokens` new tokens after `past` cached. */
typedef struct infer_iter {
    int64_t batch, tokens, past;
    double time_s;           /* the kernels' times, one after another */
    double roofline_s;       /* of time_s, what decode attention's roofline gives */
    double attn_s;           /* of time_s, the attention nodes' (kernels or rooflines, with
                                their gaps) and a prefill's grouped-query broadcast of its kv
                                heads (which only the flash kernel needs) */
    double head_s;           /* of time_s, the output head's kernels (scope lm_head) */
    int kernels;             /* nodes timed as kernels (not views) */
    double flops;            /* FLOPs the hardware executes (nn_node_flops) */
    uint64_t param_bytes;    /* every parameter, stored */
    uint64_t weight_bytes;   /* parameters read: each once, but of an untied embedding table
                                only the tokens' rows */
    uint64_t kv_read_bytes;  /* keys and values read from the cache */
    uint64_t kv_write_bytes; /* ... written for the new tokens */
    double compute_s;        /* FLOPs / the matrix peak at bf16 */
    double hbm_s;            /* (weights + kv read and written) / the HBM bandwidth */
    bool hbm_bound;          /* hbm_s > compute_s */
} infer_iter;

typedef struct infer_result {
    infer_iter prefill;      /* the prompts: the first output token */
    infer_iter decode_first, decode_last; /* the first and last decode steps (output > 1) */
    int64_t decode_steps;    /* output - 1 */
    double ttft_s;           /* time to first token: the prefill */
    double tpot_mean_s;      /* time per output token: the mean decode step (0: none) */
    double tpot_last_s;      /* ... the last decode step */
    double e2e_s;            /* prefill and every decode step */
    double tokens_per_s;     /* batch x output / e2e */
    uint64_t kv_bytes;       /* the kv cache at the end, whole blocks, per chip */
    uint64_t weight_bytes;   /* the weights, per chip */
    uint64_t hbm_bytes;      /* the chip's HBM capacity */
    bool fits;               /* weights + kv cache <= HBM capacity */
    int64_t kv_blocks;       /* blocks the batch holds at the end */
    double peak_flops, hbm_bytes_per_s; /* the rooflines' peaks */
} infer_result;

typedef struct infer_ctx infer_ctx;

/* A context for o (o, its model and cfg outlive it). NP_ERR_USAGE naming the flag for a bad
 * option (--batch, --prompt, --output, --kv-block < 1; --tp other than 1; prompt + output
 * beyond the model's context), NP_ERR_RANGE for a family without kv inference. */
np_status infer_ctx_create(const infer_opts *o, infer_ctx **out, np_err *err);
void infer_ctx_free(infer_ctx *c);

/* Times one iteration of c's model: batch sequences of `tokens` new tokens after `past`
 * cached ones. Errors of the graph, the compiler and the core model. */
np_status infer_time_iter(infer_ctx *c, int64_t batch, int64_t tokens, int64_t past,
                          infer_iter *out, np_err *err);

/* A decode step of batch sequences, sequence b with past[b] cached tokens: the kernels of a
 * step at the longest context (all but attention's are the same at any context), its
 * attention's roofline over the batch's own contexts (out->past: the longest). NP_ERR_RANGE
 * on a negative length or an empty batch. */
np_status infer_time_decode(infer_ctx *c, int64_t batch, const int64_t *past, infer_iter *out,
                            np_err *err);

/* The parts the serving simulator (serve.h) composes an iteration of mixed sequences from:
 *
 * infer_time_tokens: an iteration of `tokens` sequences of one new token and no cache (the
 * graph at batch `tokens`, seq 1): *body_s the time of its kernels but attention and the
 * output head (every layer's projections, norms, MLP; linear in the tokens however they are
 * split into sequences), *head_s the output head's (its logits, one row a sequence);
 * *param_bytes (optional) every parameter, stored. NP_ERR_RANGE for tokens < 1.
 *
 * infer_time_prefill_attn: the attention of every layer for one sequence's `tokens` new
 * tokens after `past` cached ones (the flash kernel when past is 0, the inference form's
 * roofline otherwise), each with the stream's gap. NP_ERR_RANGE beyond the model's context.
 *
 * infer_time_decode_attn: decode attention of every layer for `seqs` sequences of one new
 * token, ctx_tokens the sum over them of (cached + 1): the roofline infer_time_decode gives
 * (its FLOPs and K/V bytes linear in each context, its q and out bytes in the sequences),
 * with no graph built after the first call. 0 for no sequence; NP_ERR_RANGE when ctx_tokens
 * < seqs. */
/* Every parameter of c's model, stored (bf16), from its graph (no kernel timed). */
np_status infer_param_bytes(infer_ctx *c, uint64_t *bytes, np_err *err);

/* Bytes of one kv-cache block of c's model (keys and values of every layer, bf16). */
uint64_t infer_kv_block_bytes(const infer_ctx *c);

np_status infer_time_tokens(infer_ctx *c, int64_t tokens, double *body_s, double *head_s,
                            uint64_t *param_bytes, np_err *err);
np_status infer_time_prefill_attn(infer_ctx *c, int64_t tokens, int64_t past, double *s,
                                  np_err *err);
np_status infer_time_decode_attn(infer_ctx *c, int64_t seqs, int64_t ctx_tokens, double *s,
                                 np_err *err);

/* The whole request: the prefill, then output - 1 decode steps (the context growing by one
 * each; the steps' non-attention kernels are the same, so each distinct kernel is simulated
 * once). */
np_status infer_run(infer_ctx *c, infer_result *out, np_err *err);

#endif
