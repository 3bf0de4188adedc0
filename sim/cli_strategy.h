/* cli_strategy.h — the strategy flags `npusim plan` and `npusim run` share: the global batch
 * and sequence, the mesh sizes, ZeRO, sequence parallelism, micro-batches, the pipeline
 * schedule, recomputation, fused, composite or unfused attention, dropout, buckets, precision,
 * placement, stage layers, the pipeline's scatter/gather and how the software runs the step
 * (the gradient reduction, blocking p2p, the host's synchronizations; docs/parallel.md).
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
    CLI_STRATEGY_OPT_DDP,
    CLI_STRATEGY_OPT_P2P,
    CLI_STRATEGY_OPT_HOST_SYNC,
    CLI_STRATEGY_OPT_LOSS_SCALE,
    CLI_STRATEGY_OPT_CLIP_GRAD,
    CLI_STRATEGY_OPT_TP_OVERLAP,
    CLI_STRATEGY_OPT_PARAM_GATHER,
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
    {"no-pp-scatter-gather", no_argument, NULL, CLI_STRATEGY_OPT_NO_PP_SG},              \
    {"ddp", required_argument, NULL, CLI_STRATEGY_OPT_DDP},                              \
    {"p2p", required_argument, NULL, CLI_STRATEGY_OPT_P2P},                              \
    {"host-sync", no_argument, NULL, CLI_STRATEGY_OPT_HOST_SYNC},                        \
    {"loss-scale", required_argument, NULL, CLI_STRATEGY_OPT_LOSS_SCALE},                \
    {"clip-grad", required_argument, NULL, CLI_STRATEGY_OPT_CLIP_GRAD},                  \
    {"tp-comm-overlap", no_argument, NULL, CLI_STRATEGY_OPT_TP_OVERLAP},                 \
    {"overlap-param-gather", no_argument, NULL, CLI_STRATEGY_OPT_PARAM_GATHER}

#define CLI_STRATEGY_USAGE                                                                   \
    "  --batch B         global batch: samples per training step\n"                          \
    "  --seq S           sequence length of language models (default: the model's context)\n" \
    "  --dp, --tp, --pp  data-, tensor- and pipeline-parallel sizes (default 1 each)\n"       \
    "  --zero Z          ZeRO stage: 1 shards optimizer state, 2 gradients too, 3 parameters\n" \
    "                    too (default 0: plain data parallelism)\n"                          \
    "  --sp              Megatron sequence parallelism in the norm and dropout regions\n"     \
    "  --microbatch b    samples per micro-batch per data-parallel rank (default: batch / dp;\n" \
    "                    npusim run: 2 where 2 divides batch / dp)\n" \
    "  --schedule S      pipeline schedule: gpipe, 1f1b (default), interleaved:V (V virtual\n" \
    "                    stages per rank) or zb-h1 (zero bubble: weight gradients deferred)\n" \
    "  --recompute R     activation recomputation: none (default), selective (the attention\n" \
    "                    core), full (every layer from its input: what its backward reads) or\n" \
    "                    uniform (every layer's whole forward again before its backward, as\n" \
    "                    Megatron-LM's --activations-checkpoint-method uniform)\n"             \
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
    "                    its tp group\n"                                                      \
    "  --ddp D           gradient reduction: torch (default: PyTorch DDP's buckets of\n"      \
    "                    --bucket-mb, all-reduced as the last micro-batch's backward makes\n" \
    "                    them) or local (Megatron-LM's: one all-reduce of each model chunk's\n" \
    "                    gradients after the whole backward, not overlapped)\n"              \
    "  --p2p P           pipeline sends and receives: eager (default: asynchronous) or\n"     \
    "                    blocking (Megatron-LM 2021's: grouped into its schedules' calls, a\n" \
    "                    send waits for its receiver, the stage goes on once the whole call\n" \
    "                    is done and the host has synchronized)\n"                           \
    "  --host-sync       the host synchronizes the device where Megatron-LM 2021's timers do:\n" \
    "                    around each forward and backward step, p2p call, gradient and\n"     \
    "                    embedding all-reduce and optimizer phase (each phase's first kernel\n" \
    "                    pays the host's launch, chip.kernel_launch_ns)\n"                 \
    "  --loss-scale S    Megatron-LM's fp16 loss scaling: the loss times S; before the update\n" \
    "                    every gradient unscaled and checked for inf/nan, the flag all-reduced\n" \
    "                    over the model-parallel group and read by the host (default 0: none)\n" \
    "  --clip-grad C     Megatron-LM's clipping to the global L2 norm C: every gradient's sum\n" \
    "                    of squares, all-reduced over the model-parallel group and read by the\n" \
    "                    host, every gradient scaled before the update (default 0: none)\n" \
    "  --tp-comm-overlap Megatron-Core's (Transformer Engine's userbuffers; needs --sp): each\n" \
    "                    sequence-parallel all-gather pipelined with the GEMM reading it, each\n" \
    "                    reduce-scatter with the GEMM making its input (fast fidelity)\n" \
    "  --overlap-param-gather\n"                                                            \
    "                    Megatron-Core's (needs --zero 1 or 2): the parameter all-gathers of\n" \
    "                    the update run under the next forward, each layer's first waiting\n" \
    "                    for its parameters' (fast fidelity)\n"

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
