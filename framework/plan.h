/* plan.h — parallel strategies and the per-rank plans of one training step.
 *
 * A strategy (nn_strategy: dp x tp x pp, ZeRO stage, sequence parallelism, micro-batches,
 * pipeline schedule, recomputation) turns one model's training step into a plan: the ops
 * every rank runs in one step — compute ops, collectives, sends and receives — with their
 * buffers and dependencies, in the pipeline schedule's order. docs/parallel.md draws each
 * strategy's rewrite; this header is the interface the compiler (which lowers the compute
 * ops) and the run engine (which replays every rank's plan) build on.
 *
 * ---- Shape of a plan --------------------------------------------------------------------
 *
 *   nn_plan                         the mesh (dp x tp x pp ranks on chips) and P classes
 *    └ nn_plan_class [stage]        one per pipeline stage: every rank with that pp
 *       │                           coordinate runs the same class, parameterised by rank
 *       ├ g                         the stage's local graph (nn.h): shapes, dtypes and
 *       │                           attributes of every op are those one rank computes
 *       ├ blocks[]                  ordered entry lists:
 *       │    STEP_BEGIN             once per step, before the first micro-batch
 *       │    FORWARD  (chunk c)     one micro-batch's forward pass through model chunk c
 *       │    BACKWARD (chunk c)     its backward pass (with recomputation); under ZB-H1
 *       │                           only what input gradients need (B), and
 *       │    BACKWARD_W (chunk c)   (ZB-H1 only) the rest: weight gradients and their
 *       │                           accumulation (W)
 *       │    STEP_END               once per step: gradient reduction left over, optimizer
 *       └ sched[]                   (block, micro-batch) in this stage's execution order
 *
 * A micro-batch block is stored once and instantiated per micro-batch by the schedule, so a
 * plan's size does not grow with the number of micro-batches (GPT-3 175B at tp 8, pp 16,
 * 192 micro-batches: 16 classes, each a forward block of ~260 entries, a backward block of
 * ~540 and a schedule of 386 steps).
 *
 * A rank's op sequence for one step is
 *
 *   for (int s = 0; s < cls->n_sched; s++)                 // schedule order
 *       for (int e = 0; e < block->n_entries; e++)         // block = &cls->blocks[sched.block]
 *           if (nn_plan_entry_runs(entry, sched.mb, plan->n_micro))  // LAST_MB entries
 *               ... entry at micro-batch sched.mb ...
 *
 * (nn_plan_iter does exactly this.) Entries are independent of micro-batch and rank: the
 * micro-batch selects which instance of a block's buffers an entry touches, the rank selects
 * the concrete groups, peers and rank-dependent values (nn_plan_group, nn_plan_peer,
 * nn_plan_rank_value).
 *
 * ---- Entries ----------------------------------------------------------------------------
 *
 * An entry is one of
 *   COMPUTE     one graph node: op, sources, shapes, dtypes, ip/fp attributes — what the
 *               compiler lowers. Its FLOPs are nn_node_flops(node).
 *   COLLECTIVE  one or more graph nodes of the same collective op issued together (a DP
 *               gradient bucket is one entry of many all_reduce nodes, one per gradient);
 *               the nodes' op gives the kind (all_reduce, reduce_scatter, all_gather,
 *               broadcast, reduce, all_to_all), `tag` the axis (tp, sp, dp, zero, pp) and
 *               so the group, `bytes` the total size, each node its dtype and reduction.
 *   SEND, RECV  one send/recv node; the peer is `peer` ranks away along the pp axis
 *               (wrapping), and `match` pairs a send with its recv (same match, same
 *               micro-batch).
 * One instance of a collective is (`match`, micro-batch, group): every group of an entry
 * (the tp groups of different dp coordinates, say) shares its match, and the tied-embedding
 * all-reduce has the same match on the first and the last stage's classes.
 *
 * Dependencies: deps[] lists entries this one must wait for: data dependencies (the
 * producers of its sources) and control dependencies (a ZeRO-3 prefetch all-gather waits
 * for the compute entry before it, so it overlaps the layer after). A dep {block -1, e}
 * is entry e of the same block instance; {b, e} is entry e of block b: of a micro-batch
 * block at the same micro-batch (a backward entry reading a saved forward activation) or —
 * from a step block — at the last micro-batch; of a step block its one instance (a gradient
 * accumulation after the step's zeroing). Entries that share nothing may overlap: a
 * DP bucket all-reduce depends only on the gradient accumulations it reduces, so it may
 * run while the rest of the backward pass computes.
 *
 * Buffers: every node is a buffer (its tensor id in the class graph, nn_nbytes bytes).
 * nn_plan_buffer_kind() says whether a buffer is persistent (parameters, gradient
 * accumulators, optimizer state: one per rank), per step (step blocks) or per micro-batch
 * (one instance per micro-batch in flight); a view or in-place update aliases its source.
 *
 * ---- Ranks ------------------------------------------------------------------------------
 *
 * Ranks are numbered tp fastest, then pp, then dp:
 *     rank = tp_coord + tp * (pp_coord + pp * dp_coord)
 * and mapped onto chips by the placement (nn_mesh_place): by default the tp group on the
 * fastest links, pipeline neighbours next to each other, dp across.
 *
 * Errors are values (err.h); the plan owns its graphs and arrays (nn_plan_free). Nothing
 * here prints.
 */
#ifndef NPUSIM_PLAN_H
#define NPUSIM_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#include "arch.h"
#include "model.h"
#include "nn.h"
#include "optim.h"

/* ---- strategy ---------------------------------------------------------------------------- */

typedef enum nn_pp_schedule {
    NN_PP_GPIPE,       /* all forwards, then all backwards */
    NN_PP_1F1B,        /* PipeDream-flush / Megatron's non-interleaved 1F1B */
    NN_PP_INTERLEAVED, /* Megatron's interleaved 1F1B, `virtual_stages` chunks per rank */
    NN_PP_ZB_H1,       /* zero bubble ZB-H1 (Qi et al., ICLR 2024, 2.1): each backward split
                          into B (input gradients) and W (weight gradients) blocks, W deferred
                          into the bubble, at most p micro-batches in flight as 1F1B */
} nn_pp_schedule;

typedef enum nn_recompute {
    NN_RECOMPUTE_NONE,
    NN_RECOMPUTE_SELECTIVE, /* the attention core (scores, softmax, dropout) — Korthikanti */
    NN_RECOMPUTE_FULL,      /* every layer from its input: what its backward reads */
    NN_RECOMPUTE_UNIFORM,   /* every layer from its input, its whole forward run again before
                               its backward (Megatron-LM's --activations-checkpoint-method
                               uniform, one layer per checkpoint: torch.utils.checkpoint's rule,
                               so also what the backward does not read — the MLP's output
                               projection, its all-reduce, dropout and residual sum) */
} nn_recompute;

/* How data parallelism reduces the gradients (Megatron-LM's --DDP-impl). */
typedef enum nn_ddp {
    NN_DDP_TORCH, /* PyTorch's DistributedDataParallel: buckets of bucket_mb all-reduced as the
                     last micro-batch's backward produces them, overlapping the rest of it (the
                     earlier micro-batches under no_sync) */
    NN_DDP_LOCAL, /* Megatron-LM's own DistributedDataParallel (megatron/model/distributed.py,
                     allreduce_gradients): after the whole backward, one all-reduce of each
                     model chunk's gradients, not overlapped; the tied embedding's all-reduce
                     after it (megatron/training.py, train_step) */
} nn_ddp;

#define NN_STRATEGY_MAX_CHUNKS 1024

typedef struct nn_strategy {
    int dp, tp, pp;            /* mesh sizes, each >= 1 */
    int zero;                  /* ZeRO stage 0 (plain DP), 1, 2 or 3 */
    bool sp;                   /* Megatron sequence parallelism (needs tp > 1) */
    int64_t microbatch;        /* samples per micro-batch per dp rank; 0: batch / dp */
    nn_pp_schedule schedule;   /* default 1F1B */
    int virtual_stages;        /* chunks per rank for NN_PP_INTERLEAVED (>= 2); else 1 */
    nn_recompute recompute;
    bool fuse_attention;       /* nn_plan_build rewrites the model's composite attentions into
                                  the fused attention op (nn_pass_fuse_attention: flash
                                  attention, Megatron-LM's --use-flash-attn); default off */
    bool pp_scatter_gather;    /* Megatron-LM's pipeline scatter/gather (Narayanan et al.,
                                  SC21, 4.1; on unless --no-scatter-gather-tensors-in-pipeline):
                                  a boundary value replicated over tp (tp > 1, no sequence
                                  parallelism, its elements a multiple of tp) is sent as each
                                  tp rank's 1/tp of it, flattened (partial sums: their
                                  reduce-scatter), and all-gathered over the receiving stage's
                                  tp group (NN_COMM_PP_SG); its gradient the same way back.
                                  nn_strategy_default: on (`--no-pp-scatter-gather`: off) */
    bool fuse_softmax;         /* then, the scale, causal mask and softmax of the attentions
                                  left composite into one softmax (nn_pass_fuse_softmax:
                                  Megatron-LM's FusedScaleMaskSoftmax, its
                                  --masked-softmax-fusion); default off */
    double bucket_mb;          /* DP/ZeRO gradient bucket size in MiB; 0: 25 MiB */
    nn_ddp ddp;                /* the gradient reduction (`--ddp`); default NN_DDP_TORCH */
    bool p2p_blocking;         /* the pipeline's sends and receives as Megatron-LM 2021 runs
                                  them (megatron/p2p_communication.py, _communicate): grouped
                                  into the calls its schedules make (megatron/schedules.py),
                                  each send starting once its receiver has posted the receive
                                  (NCCL's rendezvous), and the host going on only when every
                                  send and receive of the call is done (req.wait(),
                                  torch.cuda.synchronize()): the next kernel pays the host's
                                  launch. Default off: sends are eager and asynchronous */
    double loss_scale;         /* Megatron-LM's --fp16 loss scaling (--loss-scale; its grad
                                  scaler, megatron/optimizer/optimizer.py): the loss is scaled
                                  by it; before the update every main gradient is unscaled
                                  (torch._amp_foreach_non_finite_check_and_unscale_: one read
                                  and write) and checked for inf and nan, the flag all-reduced
                                  (max) over the model-parallel group (tp then pp here) and read
                                  by the host (.item(): a synchronization). 0: none (default) */
    double clip_grad;          /* --clip-grad (clip_grads.py, clip_grad_norm_fp32): the global
                                  L2 norm of the main gradients (each one's sum of squares,
                                  summed, all-reduced over the model-parallel group, read by the
                                  host), every gradient then scaled by min(1, clip_grad /
                                  (norm + 1e-6)) before the update. 0: none (default) */
    bool host_sync;            /* the host synchronizations of Megatron-LM 2021's step: its
                                  timers call torch.cuda.synchronize() at their start and stop
                                  (megatron/global_vars.py, _Timer), around every forward and
                                  backward step and p2p call (schedules.py), the gradient and
                                  embedding all-reduces and the optimizer (training.py) and the
                                  optimizer's phases (megatron/optimizer/optimizer.py): each
                                  phase starts once the device has finished everything before
                                  it, its first kernel paying the host's launch. Default off */
    bool tp_comm_overlap;      /* Megatron-Core's --tp-comm-overlap (Transformer Engine's
                                  userbuffers, needs sp): each sequence-parallel all-gather is
                                  pipelined with the GEMM that reads it (TE's ring exchange, tp
                                  chunks) and each reduce-scatter with the GEMM that makes its
                                  input (TE's pipeline, NN_TP_OVERLAP_RS_SPLITS chunks): the two
                                  run together as a two-stage pipeline (docs/run.md,
                                  "Overlapped tensor-parallel communication"). Default off: each
                                  collective runs between its kernels */
    bool overlap_param_gather; /* Megatron-Core's --overlap-param-gather (with the distributed
                                  optimizer, zero 1 or 2): the parameter all-gathers of the
                                  step's end run at the step's start, each layer's first forward
                                  waiting for its parameters' (the steady state of gathering the
                                  update during the next step's forward; docs/run.md).
                                  Default off: they end the step */
    int n_stage_layers;        /* 0: balance stages by FLOPs; else one layer count per */
    int stage_layers[NN_STRATEGY_MAX_CHUNKS]; /* model chunk (pp * virtual_stages of them) */
    char placement[16];        /* mesh axis order on chips, fastest first ("tp,pp,dp");
                                  "" for the topology-aware default */
} nn_strategy;

/* Transformer Engine's chunks of a GEMM and the reduce-scatter of its output under
 * --tp-comm-overlap (its "pipeline" method's num_splits default, transformer_engine/pytorch/
 * module/base.py, initialize_ub's add_ub); its ring exchange of an all-gather has tp. */
#define NN_TP_OVERLAP_RS_SPLITS 4

/* The strategy of one chip: dp = tp = pp = 1, 1F1B, 25 MiB buckets, pipeline scatter/gather
 * on (it acts only with tp > 1 and pp > 1). */
void nn_strategy_default(nn_strategy *s);

/* Parses a --schedule value: "gpipe", "1f1b", "interleaved:V" (V >= 2) or "zb-h1". NP_ERR_USAGE
 * naming the flag otherwise; s unchanged on failure. */
np_status nn_strategy_parse_schedule(nn_strategy *s, const char *text, np_err *err);
/* The --schedule name of s's schedule ("gpipe", "1f1b", "interleaved:V", "zb-h1"; "?" out of
 * range) into buf; returns buf. The one place the names are written. */
const char *nn_schedule_name(const nn_strategy *s, char *buf, size_t n);
/* Parses a --recompute value: "none", "selective", "full" or "uniform". */
np_status nn_strategy_parse_recompute(nn_strategy *s, const char *text, np_err *err);
/* The --recompute name of r ("none", ...; "?" out of range). */
const char *nn_recompute_name(nn_recompute r);
/* The --ddp name of d ("torch", "local"; "?" out of range). */
const char *nn_ddp_name(nn_ddp d);

/* ---- device mesh ------------------------------------------------------------------------- */

typedef enum nn_mesh_axis { NN_MESH_DP, NN_MESH_TP, NN_MESH_PP, NN_MESH_AXES } nn_mesh_axis;

/* What a collective's group is: its comm tag names the mesh axis it runs along. */
typedef enum nn_comm_tag {
    NN_COMM_TP,   /* tensor parallelism (Megatron's f/g all-reduces, vocab-parallel loss) */
    NN_COMM_SP,   /* sequence parallelism (reduce-scatter/all-gather; norm-gradient sums) */
    NN_COMM_DP,   /* data-parallel gradient all-reduce */
    NN_COMM_ZERO, /* ZeRO reduce-scatter of gradients, all-gather of parameters */
    NN_COMM_PP,   /* pipeline send/recv; tied-embedding gradient all-reduce */
    NN_COMM_PP_SG, /* pipeline scatter/gather (Megatron-LM's), over the tp group: the
                      all-gather that rebuilds a boundary value sent in 1/tp shards (and a
                      partial-sum boundary's reduce-scatter before it is sent) */
    NN_COMM_TAG_COUNT
} nn_comm_tag;

const char *nn_mesh_axis_name(nn_mesh_axis a); /* "dp", "tp", "pp" */
const char *nn_comm_tag_name(nn_comm_tag t);   /* "tp", "sp", "dp", "zero", "pp", "pp-sg" */
nn_mesh_axis nn_comm_tag_axis(nn_comm_tag t);  /* tp, sp, pp-sg -> TP; dp, zero -> DP;
                                                  pp -> PP */

typedef struct nn_mesh {
    int size[NN_MESH_AXES]; /* dp, tp, pp */
    int n_ranks;
    int *chip;              /* chip of each rank (n_ranks) */
    char order[16];         /* axis order on chips, fastest first, e.g. "tp,pp,dp" */
    char why[256];          /* the placement in one sentence (which links each group uses) */
} nn_mesh;

/* Places dp x tp x pp ranks on arch's chips (arch may be NULL: chip = rank). order is ""
 * for the default or a permutation of "tp,pp,dp" (fastest first). Default: tp fastest on
 * consecutive chips — inside an island (hierarchical), along a torus row (torus2d/3d: tp
 * along x, pp along y when the sizes divide), ring neighbours otherwise — then pp, then dp.
 * NP_ERR_RANGE when the mesh needs more chips than arch has; NP_ERR_USAGE for a bad order. */
np_status nn_mesh_place(nn_mesh *m, int dp, int tp, int pp, const char *order,
                        const arch_config *arch, np_err *err);
void nn_mesh_free(nn_mesh *m);
/* The coordinates of rank (c[NN_MESH_DP], c[NN_MESH_TP], c[NN_MESH_PP]). */
void nn_mesh_coords(const nn_mesh *m, int rank, int *c);
int nn_mesh_rank(const nn_mesh *m, const int *c);

/* ---- plans ------------------------------------------------------------------------------- */

typedef enum nn_plan_kind {
    NN_PLAN_COMPUTE,
    NN_PLAN_COLLECTIVE,
    NN_PLAN_SEND,
    NN_PLAN_RECV,
} nn_plan_kind;

typedef enum nn_plan_when {
    NN_PLAN_EVERY_MB, /* every instance of its block */
    NN_PLAN_LAST_MB,  /* only the last micro-batch's instance (DP buckets, ZeRO-1 scatter) */
} nn_plan_when;

/* Where an entry goes in a call-structured issue order (nn_plan_issue): a block's receives
 * come before its compute, the pipeline scatter/gather's all-gathers of what they received
 * right after them, its sends after it. */
typedef enum nn_plan_part {
    NN_PART_ALL,     /* (an issue piece: every entry of its block) */
    NN_PART_RECV,    /* a receive */
    NN_PART_GATHER,  /* a pp-sg collective reading a receive of its block */
    NN_PART_COMPUTE, /* everything else */
    NN_PART_SEND,    /* a send */
} nn_plan_part;

/* A blocking send (nn_strategy.p2p_blocking) waits for its receiver's clear-to-send, a
 * message of NN_PLAN_CTS_BYTES the receive sends to it once it is posted: NCCL's sender moves
 * data only into buffers its receiver has posted, which the receiver announces by writing a
 * 64-bit step counter to the sender (NCCL src/include/device.h, struct ncclConnInfo:
 * "uint64_t* head; // Local for send, remote for recv"). The fast run and the step lowering
 * both send it. */
#define NN_PLAN_CTS_BYTES 8

typedef struct nn_plan_dep {
    int32_t block; /* -1: the same block instance; else a block of the same class */
    int32_t entry;
} nn_plan_dep;

typedef struct nn_plan_entry {
    nn_plan_kind kind;
    nn_comm_tag tag;     /* collective, send, recv: the axis tag */
    nn_plan_when when;
    nn_region region;    /* forward, backward, recompute or optimizer */
    int layer;           /* model layer, -1 outside layers */
    int chunk;           /* model chunk (pipeline), -1 for step blocks */
    int n_nodes;
    nn_tensor **nodes;   /* compute/send/recv: one node; collective: the bucket's nodes */
    int n_deps;
    nn_plan_dep *deps;
    uint64_t bytes;      /* collective/send/recv: bytes of the buffer(s) communicated
                            (all_gather: its output, reduce_scatter: its input); compute:
                            nn_node_bytes */
    int64_t flops;       /* compute: nn_node_flops (what the hardware does); 0 otherwise */
    int64_t model_flops; /* compute: nn_node_model_flops; 0 otherwise */
    int group_size;      /* collective: ranks in the group; send/recv: 2 */
    int peer;            /* send/recv: peer = this rank's stage + peer (mod pp) */
    int match;           /* pairs sends with recvs and a collective's instances */
    nn_plan_part part;   /* RECV, GATHER, COMPUTE or SEND (nn_plan_part) */
    bool sync;           /* host_sync, a step block's entry: the host synchronizes the device
                            before it (the first of each phase of the step's end) */
} nn_plan_entry;

typedef enum nn_plan_block_kind {
    NN_BLOCK_STEP_BEGIN,
    NN_BLOCK_FORWARD,
    NN_BLOCK_BACKWARD,   /* the backward; under ZB-H1 its B part (what any input gradient needs) */
    NN_BLOCK_STEP_END,
    NN_BLOCK_BACKWARD_W, /* ZB-H1: the backward's W part (weight gradients, what only they need) */
} nn_plan_block_kind;

typedef struct nn_plan_block {
    nn_plan_block_kind kind;
    int chunk;           /* model chunk of a forward/backward block; -1 for step blocks */
    int n_entries;
    nn_plan_entry *entries;
} nn_plan_block;

/* Whether blocks of this kind run once per micro-batch (forward, backward, W), not per step. */
bool nn_plan_block_is_micro(nn_plan_block_kind k);

typedef struct nn_plan_sched {
    int block;           /* index into the class's blocks */
    int mb;              /* micro-batch 0..n_micro-1; -1 for step blocks */
} nn_plan_sched;

/* One piece of a class's issue order when the host's synchronizations or blocking p2p shape
 * it (nn_plan_class.issue): the entries of part `part` of schedule step `sched`, in their
 * block's order. */
typedef struct nn_plan_issue {
    int sched;           /* index into the class's sched */
    nn_plan_part part;   /* NN_PART_ALL: the whole block */
    bool sync;           /* the host synchronizes the device before the piece's first entry */
    int call;            /* p2p_blocking: the p2p call its sends and receives belong to (1, 2,
                            ... in issue order); 0: none */
} nn_plan_issue;

/* What a persistent or rank-dependent leaf of a class graph holds (for initializing and
 * reading back a rank's state; the compiler and run engine need only the buffer sizes). */
typedef enum nn_plan_leaf_kind {
    NN_LEAF_PARAM,      /* a parameter as the model computes with it (bf16 in mixed precision) */
    NN_LEAF_MASTER,     /* fp32 master copy of a parameter (mixed precision) */
    NN_LEAF_OPTSTATE,   /* an optimizer state (Adam m, v; SGD momentum) */
    NN_LEAF_GRADBUF,    /* a gradient accumulator over the micro-batches of a step */
    NN_LEAF_DATA,       /* a model input (tokens, features, labels) for one micro-batch */
    NN_LEAF_RANKVALUE,  /* i32 scalar = the rank's coordinate along `axis` times `scale` */
    NN_LEAF_CONST,      /* a constant with its value (loss scale, scalars) */
} nn_plan_leaf_kind;

/* How a rank's piece of a parameter maps onto the whole (single-device) parameter:
 * tensor parallelism splits dim `tp_dim` (-1: replicated) viewed as [tp_blocks, n/tp_blocks]
 * into tp parts of every block (fused q,k,v weights split per block), after padding dim 0 to
 * `tp_pad_rows` rows (vocabulary padding; 0: none); ZeRO then flattens the rank's piece,
 * pads it to a multiple of dp and keeps the dp coordinate's part (zero_shard). */
typedef struct nn_plan_shard {
    int tp_dim;
    int64_t tp_blocks;
    int64_t tp_pad_rows;
    bool zero_shard;
} nn_plan_shard;

typedef struct nn_plan_leaf {
    nn_plan_leaf_kind kind;
    nn_tensor *t;             /* the leaf in the class graph */
    char source[NN_NAME_MAX]; /* PARAM/MASTER/OPTSTATE/GRADBUF: the model parameter's name;
                                 DATA: "input" or "labels" */
    nn_plan_shard shard;      /* PARAM/MASTER/OPTSTATE/GRADBUF */
    int src_ndim;             /* ... and the whole parameter's shape */
    int64_t src_ne[NN_MAX_DIMS];
    nn_mesh_axis axis;        /* RANKVALUE */
    int64_t scale;            /* RANKVALUE */
} nn_plan_leaf;

typedef struct nn_plan_class {
    int stage;               /* the pp coordinate of its ranks */
    nn_graph *g;             /* the stage's local graph (owned) */
    int n_blocks;
    nn_plan_block *blocks;
    int n_sched;
    nn_plan_sched *sched;
    int n_issue;             /* 0: the issue order is the schedule's (every block whole) */
    nn_plan_issue *issue;    /* else its pieces (nn_plan_iter walks them) */
    int n_leaves;
    nn_plan_leaf *leaves;
    int layer_first, layer_last; /* model layers on this stage (over its chunks); -1 if none */
    nn_tensor *loss;         /* the loss node (last stage only), else NULL */
} nn_plan_class;

typedef struct nn_plan_mem {
    uint64_t params_bytes;      /* parameters as computed with (bf16 in mixed precision) */
    uint64_t grads_bytes;       /* gradient accumulators */
    uint64_t optstate_bytes;    /* fp32 master copies and optimizer states */
    uint64_t activations_bytes; /* saved activations of the micro-batches in flight, at
                                   their peak over the schedule */
    uint64_t buffers_bytes;     /* communication buffers: gradient buckets, gathered
                                   ZeRO-3 parameters, pipeline receive buffers (peak) */
    uint64_t workspace_bytes;   /* the largest transient working set of a block */
    uint64_t total_bytes;       /* the sum of the above (each role at its own peak) */
} nn_plan_mem;

typedef struct nn_plan {
    nn_strategy s;
    nn_mesh mesh;
    char model[64];
    int64_t batch;           /* global batch (samples per step) */
    int64_t seq;             /* sequence length (1 for non-sequence models) */
    int64_t microbatch;      /* samples per micro-batch per dp rank */
    int n_micro;             /* micro-batches per step per dp rank */
    int n_chunks;            /* model chunks: pp * virtual_stages */
    int *chunk_layer_first;  /* per chunk: first and last model layer (-1 for none) */
    int *chunk_layer_last;
    bool has_pre_layers;     /* chunk 0 holds nodes before the first layer (embedding, stem) */
    nn_dtype compute;        /* NN_F32 or NN_BF16 */
    nn_optim optim;
    int64_t vocab_padded;    /* language models under tp: the padded vocabulary (else 0) */
    int attention_fused;     /* attentions of the model (one micro-batch's graph) that are the
                                fused attention op */
    int attention_composite; /* ... and that are left composite (nn_attention's softmax core:
                                the pass does not fuse one with dropout on its probabilities) */
    double dropout;          /* the largest probability of the model's dropouts (0: none) */
    int pp_scattered;        /* pipeline boundaries (values sent from one model chunk to another
                                in one micro-batch's forward) sent in 1/tp shards and
                                all-gathered (s.pp_scatter_gather); 0: none */
    int n_classes;           /* = pp */
    nn_plan_class *classes;
    uint64_t hbm_bytes;      /* of the architecture's chip (0 without one) */
} nn_plan;

/* Builds the plan of one training step of model d (opts: global batch, seq, compute dtype,
 * seed) under strategy s with optimizer opt, placed on arch (may be NULL: no chip limit);
 * with s->fuse_attention the model's graph goes through nn_pass_fuse_attention first.
 * A strategy that cannot be built is NP_ERR_RANGE/NP_ERR_INCONSISTENT naming the flag and
 * the rule it breaks (tp must divide the heads, pp at most the layers, dp*tp*pp at most the
 * chips, the batch divisible into micro-batches, ...). Shapes only: no storage is allocated.
 * *out is NULL on failure. */
np_status nn_plan_build(const nn_model_desc *d, const nn_model_opts *opts,
                        const nn_strategy *s, const nn_optim *opt, const arch_config *arch,
                        nn_plan **out, np_err *err);
/* The same for a training graph built with the C API: m->g is the forward graph of one
 * micro-batch of m->batch samples per dp rank, ending in the scalar m->loss; m->input and
 * m->labels (either may be NULL) are the leaves fed per micro-batch, `batch` the global
 * batch. Layers (nn_graph_set_layer) are the pipeline's units; communication ops in the graph
 * (nn_all_to_all, ...) run over their tag's axis. The graph is only read, so
 * s->fuse_attention is NP_ERR_USAGE here: run nn_pass_fuse_attention on m->g first. */
np_status nn_plan_build_graph(const nn_model *m, const char *name, int64_t batch,
                              const nn_strategy *s, const nn_optim *opt, const arch_config *arch,
                              nn_plan **out, np_err *err);
void nn_plan_free(nn_plan *p);

/* Checks the invariants the plan's readers rely on (framework/plan_verify.c's header lists
 * them: mesh and strategy, entries and their dependencies, the schedule, the issue order,
 * pipeline and collective matches). NP_OK, or NP_ERR_INTERNAL naming the first broken one;
 * NP_ERR_NOMEM. nn_plan_build runs it on every plan it builds when np_verify_on()
 * (base/verify.h). */
np_status nn_plan_verify(const nn_plan *p, np_err *err);

/* ---- ranks, groups, peers ---- */

/* The class (= pipeline stage) rank runs. */
int nn_plan_rank_class(const nn_plan *p, int rank);
/* Ranks of rank's group along axis, in coordinate order (the order of all_gather's parts);
 * writes at most max, returns the group size. */
int nn_plan_axis_group(const nn_plan *p, int rank, nn_mesh_axis axis, int *ranks, int max);
/* Ranks of the group entry e runs over for rank (its tag's axis; a tied-embedding
 * all-reduce: the first and last stage only). Returns the group size. */
int nn_plan_group(const nn_plan *p, int rank, const nn_plan_entry *e, int *ranks, int max);
/* The chips of that group, in the same order (mesh.chip of each rank). */
int nn_plan_group_chips(const nn_plan *p, int rank, const nn_plan_entry *e, int *chips, int max);
/* The peer rank of a send or recv entry. */
int nn_plan_peer(const nn_plan *p, int rank, const nn_plan_entry *e);
/* The value of a RANKVALUE leaf for rank. */
int64_t nn_plan_rank_value(const nn_plan *p, int rank, const nn_plan_leaf *l);
/* The leaf record of class graph tensor t, or NULL. */
const nn_plan_leaf *nn_plan_leaf_of(const nn_plan_class *c, const nn_tensor *t);

/* Whether collective entry e is a bucket: one collective over all its nodes' buffers packed
 * together, as data parallelism reduces gradients (PyTorch DDP's buckets) — at least two
 * nodes, every one an in-place all-reduce outside the forward pass of a distinct leaf (an
 * accumulator, through its updates and views), of one dtype and one group size above 1. Any
 * other entry of several nodes is one collective per node, one after the other on its stream.
 * The step lowering (compiler/lower_coll.c) and the fast run (sim/run_plan.c) both ask it. */
bool nn_plan_entry_is_bucket(const nn_plan_entry *e);

/* Whether node t is a pipeline scatter's slice (shard_slice with tag pp-sg, along a dim with
 * only dims of 1 before it): this rank's part of a value is then a contiguous range of its
 * bytes, a view as Megatron's split_tensor_into_1d_equal_chunks is — no kernel, no buffer of its
 * own. Memory (nn_plan_class_memory), the step lowering and the fast run all ask this. */
bool nn_plan_node_is_offset_view(const nn_tensor *t);
/* Where that view starts in its source for rank (of class c), in bytes: the rank's offset
 * (its RANKVALUE leaf) times the bytes of the dims after the split one. */
uint64_t nn_plan_offset_view_bytes(const nn_plan *p, const nn_plan_class *c, int rank,
                                   const nn_tensor *t);

/* Bytes communication node t moves (a collective's, send's or receive's; what an entry's
 * `bytes` sums): an all-gather's or receive's output, the others' input. */
uint64_t nn_plan_comm_node_bytes(const nn_tensor *t);

/* ---- iteration ---- */

/* Whether entry e runs at micro-batch mb (LAST_MB entries only at n_micro - 1). */
bool nn_plan_entry_runs(const nn_plan_entry *e, int mb, int n_micro);

typedef struct nn_plan_iter {
    const nn_plan_class *c;
    int n_micro;
    int s, e;       /* position: schedule step or issue piece, entry (internal) */
    bool pending;   /* a piece's synchronization not yet given to an entry (internal) */
    /* the entry nn_plan_iter_next returned: */
    int block;      /* its block (index into c->blocks) */
    int entry;      /* its index in the block */
    bool sync;      /* the host synchronizes the device before it (host_sync, p2p_blocking):
                       it starts once everything issued before it is done, and a kernel pays
                       the host's launch */
    int call;       /* a send or receive of a blocking p2p call: the call (1, 2, ...); 0 */
} nn_plan_iter;

/* Starts iterating class c's entries in issue order: the schedule's blocks one after the
 * other, each in its entries' order — or, when the strategy's host synchronizations or
 * blocking p2p shape the step, c->issue's pieces (nn_pb_issue in plan_sched.c: Megatron-LM
 * 2021's calls). Every instance of every entry that runs comes exactly once either way. */
void nn_plan_iter_begin(nn_plan_iter *it, const nn_plan *p, const nn_plan_class *c);
/* The next entry that runs (with its block and micro-batch, -1 for step blocks), or NULL at
 * the end of the step; it->block, entry, sync and call describe it. */
const nn_plan_entry *nn_plan_iter_next(nn_plan_iter *it, const nn_plan_block **block, int *mb);

/* ---- buffers ---- */

typedef enum nn_plan_buffer_kind {
    NN_BUFFER_PERSISTENT, /* leaves: one per rank for the whole run */
    NN_BUFFER_STEP,       /* nodes of step blocks: once per step */
    NN_BUFFER_MICRO,      /* nodes of forward/backward blocks: one per micro-batch */
} nn_plan_buffer_kind;

nn_plan_buffer_kind nn_plan_buffer_kind_of(const nn_tensor *t);

/* ---- figures ---- */

/* FLOPs one rank of class c computes in one step: model FLOPs (without recomputation) and
 * hardware FLOPs (with it), counted over every scheduled entry instance. Doubles: exact
 * below 2^53, and a step of any size the limits allow cannot wrap (an int64 total did, past
 * 9.2e18, for a 405B model's 16M-token batch on 8,192 chips). */
void nn_plan_class_flops(const nn_plan *p, const nn_plan_class *c, double *model_flops,
                         double *hw_flops);
/* Memory of one rank of class c by role (nn_plan_mem). */
np_status nn_plan_class_memory(const nn_plan *p, const nn_plan_class *c, nn_plan_mem *m,
                               np_err *err);
/* Saved-activation bytes of one micro-batch of model layer `layer` (the forward tensors its
 * backward reads, plus 1 byte per element of each dropout mask), on class c. 0 if the layer
 * is not on c. */
uint64_t nn_plan_layer_saved_bytes(const nn_plan *p, const nn_plan_class *c, int layer);
/* The analytical pipeline bubble (p-1)/(m+p-1); interleaved: (p-1)/(v*m+p-1); ZB-H1: the
 * paper's (p-1)(F+B-W) over that plus m(F+B+W) (Qi et al. 2024, table 2), F, B and W one
 * micro-batch's hardware FLOPs in those blocks, summed over the stages (each pass's time in
 * proportion to its FLOPs). */
double nn_plan_bubble(const nn_plan *p);

/* ---- the summary behind `npusim plan` ---- */

typedef struct nn_plan_comm_row {
    int stage;           /* the class whose ranks issue it */
    nn_op op;            /* all_reduce, ..., send, recv */
    nn_comm_tag tag;
    int group_size;
    uint64_t bytes;      /* per issue */
    int64_t count;       /* issues per step by one rank of the stage */
} nn_plan_comm_row;

typedef struct nn_plan_summary {
    int n_rows;
    nn_plan_comm_row *rows;  /* by stage, then in order of first issue */
    nn_plan_mem *mem;        /* per class: one rank's memory */
    double *model_flops;     /* per class: one rank's FLOPs per step (no recomputation) */
    double *hw_flops;        /* ... with recomputation */
    int largest;             /* the class whose rank needs the most memory */
    double flops_per_step;   /* model FLOPs of the step on every rank together (doubles: */
    double hw_flops_per_step; /* nn_plan_class_flops) */
} nn_plan_summary;

/* Tallies p per class (collectives issued in one step, memory, FLOPs). NP_ERR_NOMEM. */
np_status nn_plan_summarize(const nn_plan *p, nn_plan_summary *s, np_err *err);
void nn_plan_summary_free(nn_plan_summary *s);

#endif
