/* cli_strategy.h — the strategy flags `npusim plan` and `npusim run` share: the global batch
 * and sequence, the mesh sizes, ZeRO, sequence parallelism, micro-batches, the pipeline
 * schedule, recomputation, fused, composite or unfused attention, dropout, buckets, precision,
 * placement, stage layers and the pipeline's scatter/gather (docs/parallel.md).
 *
 * A command puts CLI_STRATEGY_LONGOPTS in its getopt table, passes those options to
 * cli_strategy_flag, prints CLI_STRATEGY_USAGE in its usage text and builds the plan from
 * the result with nn_plan_build. */
#ifndef NPUSIM_CLI_STRATEGY_H
#define NPUSIM_CLI_STRATEGY_H

#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>

#include "err.h"
#include "model.h"
#include "plan.h"

typedef struct cli_strategy {
    nn_strategy s;
    nn_model_opts o; /* batch, seq, compute dtype (bf16 unless --precision fp32), seed 1 */
    uint32_t given;  /* bit c - CLI_STRATEGY_OPT_BASE: flag c was taken (cli_strategy_given) */
} cli_strategy;

#define CLI_STRATEGY_OPT_BASE 0x7500
enum {
    CLI_STRATEGY_OPT_BATCH = CLI_STRATEGY_OPT_BASE,
    CLI_STRATEGY_OPT_SEQ,
    CLI_STRATEGY_OPT_DP,
    CLI_STRATEGY_OPT_TP,
    CLI_STRATEGY_OPT_PP,
    CLI_STRATEGY_OPT_ZERO,
    CLI_STRATEGY_OPT_SP,
    CLI_STRATEGY_OPT_MICROBATCH,
    CLI_STRATEGY_OPT_SCHEDULE,
    CLI_STRATEGY_OPT_RECOMPUTE,
    CLI_STRATEGY_OPT_ATTENTION,
    CLI_STRATEGY_OPT_BUCKET,
    CLI_STRATEGY_OPT_PRECISION,
    CLI_STRATEGY_OPT_PLACEMENT,
    CLI_STRATEGY_OPT_STAGE_LAYERS,
    CLI_STRATEGY_OPT_DROPOUT,
    CLI_STRATEGY_OPT_NO_PP_SG,
    CLI_STRATEGY_OPT_END
};

#define CLI_STRATEGY_LONGOPTS                                                             \
    {"batch", required_argument, NULL, CLI_STRATEGY_OPT_BATCH},                          \
    {"seq", required_argument, NULL, CLI_STRATEGY_OPT_SEQ},                              \
    {"dp", required_argument, NULL, CLI_STRATEGY_OPT_DP},                                \
    {"tp", required_argument, NULL, CLI_STRATEGY_OPT_TP},                                \
    {"pp", required_argument, NULL, CLI_STRATEGY_OPT_PP},                                \
    {"zero", required_argument, NULL, CLI_STRATEGY_OPT_ZERO},                            \
    {"sp", no_argument, NULL, CLI_STRATEGY_OPT_SP},                                      \
    {"microbatch", required_argument, NULL, CLI_STRATEGY_OPT_MICROBATCH},                \
    {"schedule", required_argument, NULL, CLI_STRATEGY_OPT_SCHEDULE},                    \
    {"recompute", required_argument, NULL, CLI_STRATEGY_OPT_RECOMPUTE},                  \
    {"attention", required_argument, NULL, CLI_STRATEGY_OPT_ATTENTION},                  \
    {"bucket-mb", required_argument, NULL, CLI_STRATEGY_OPT_BUCKET},                     \
    {"precision", required_argument, NULL, CLI_STRATEGY_OPT_PRECISION},                  \
    {"placement", required_argument, NULL, CLI_STRATEGY_OPT_PLACEMENT},                  \
    {"stage-layers", required_argument, NULL, CLI_STRATEGY_OPT_STAGE_LAYERS},            \
    {"dropout", required_argument, NULL, CLI_STRATEGY_OPT_DROPOUT},                      \
    {"no-pp-scatter-gather", no_argument, NULL, CLI_STRATEGY_OPT_NO_PP_SG}

#define CLI_STRATEGY_USAGE                                                                   \
    "  --batch B         global batch: samples per training step\n"                          \
    "  --seq S           sequence length of language models (default: the model's context)\n" \
    "  --dp, --tp, --pp  data-, tensor- and pipeline-parallel sizes (default 1 each)\n"       \
    "  --zero Z          ZeRO stage: 1 shards optimizer state, 2 gradients too, 3 parameters\n" \
    "                    too (default 0: plain data parallelism)\n"                          \
    "  --sp              Megatron sequence parallelism in the norm and dropout regions\n"     \
    "  --microbatch b    samples per micro-batch per data-parallel rank (default: batch / dp)\n" \
    "  --schedule S      pipeline schedule: gpipe, 1f1b (default) or interleaved:V (V virtual\n" \
    "                    stages per rank)\n"                                                  \
    "  --recompute R     activation recomputation: none (default), selective (the attention\n" \
    "                    core) or full (every layer from its input)\n"                       \
    "  --attention A     fused (default): each composite attention becomes the attention op,\n" \
    "                    flash attention's kernels (no S x S scores in HBM; Megatron-LM's\n"   \
    "                    --use-flash-attn); composite: matmul, softmax with its scale and\n"  \
    "                    causal mask fused (Megatron-LM's FusedScaleMaskSoftmax), matmul;\n" \
    "                    unfused: matmul, scale, mask, softmax, matmul, each its own kernel\n" \
    "  --dropout P       GPT dropout probability on the embeddings, the attention\n"         \
    "                    probabilities and the residual branches (GPT-2's 0.1; Megatron-LM's\n" \
    "                    --attention-dropout and --hidden-dropout); default 0: none. The\n"   \
    "                    fused attention has none, so attention stays composite\n"           \
    "  --bucket-mb X     gradient bucket size in MiB (default 25)\n"                          \
    "  --precision P     bf16 (default: bf16 compute, fp32 master weights and Adam state) or\n" \
    "                    fp32\n"                                                              \
    "  --placement O     mesh axes on chips, fastest first (default: topology-aware, tp on the\n" \
    "                    fastest links), e.g. tp,pp,dp\n"                                     \
    "  --stage-layers L  layers of each model chunk (default: balanced by FLOPs)\n"          \
    "  --no-pp-scatter-gather\n"                                                             \
    "                    send pipeline activations and gradients whole from every tp rank;\n" \
    "                    default (Megatron-LM's scatter/gather, with tp > 1 and no --sp): each\n" \
    "                    tp rank sends 1/tp of it and the receiving stage all-gathers it over\n" \
    "                    its tp group\n"

/* The defaults: one chip, 1F1B, fused attention, pipeline scatter/gather, bf16, batch 0
 * (unset), seed 1. */
void cli_strategy_init(cli_strategy *cs);

/* True when getopt's value c is one of CLI_STRATEGY_LONGOPTS. */
bool cli_strategy_is_flag(int c);

/* Takes option c with argument arg into cs. NP_ERR_USAGE naming the flag and the value. */
np_status cli_strategy_flag(cli_strategy *cs, int c, const char *arg, np_err *err);

/* Whether strategy flag c was taken into cs (so that a default need not override it). */
bool cli_strategy_given(const cli_strategy *cs, int c);

/* The optimizer both commands plan with: run_job_optim's (AdamW, as GPT-3 and Megatron-LM
 * train). */
nn_optim cli_strategy_optim(void);

#endif
