/* pass.h — graph passes: dead-code and common-subexpression elimination, constant and
 * Conv+BatchNorm / conv->conv folding, elementwise fusion groups, activation checkpointing,
 * and memory planning. Every pass leaves a graph that nn_graph_verify accepts. */
#ifndef NPUSIM_PASS_H
#define NPUSIM_PASS_H

#include "nn.h"

/* Removes every node that no output (nn_graph_set_output) or optimizer update depends on;
 * inputs and parameters stay. Returns the number of nodes removed. */
int nn_pass_dce(nn_graph *g);

/* Merges nodes that compute the same op with the same parameters on the same sources (not
 * leaves or updates), then removes the duplicates. Returns the number merged. */
np_status nn_pass_cse(nn_graph *g, int *n_merged, np_err *err);

/* Computes every node whose sources are all constants with values and turns it into a
 * constant leaf. */
np_status nn_pass_fold_constants(nn_graph *g, int *n_folded, np_err *err);

/* Inference: batchnorm_infer(conv2d(x, w)) with a single-use conv and valued f32 weights and
 * statistics becomes conv2d(x, w') + b' with w' = w * s, b' = beta - mean * s,
 * s = gamma / sqrt(var + eps); and conv2d(conv2d(x, w1), w2) with a 1x1, stride-1, unpadded,
 * ungrouped w2 and a single-use inner conv (groups 1, no bias) becomes conv2d(x, w2 . w1).
 * The new weights are constants. */
np_status nn_pass_fold_conv_bn(nn_graph *g, int *n_folded, np_err *err);
np_status nn_pass_fold_conv_conv(nn_graph *g, int *n_folded, np_err *err);

/* Elementwise fusion: each elementwise op (and each view) whose producer has no other reader
 * and the same number of elements joins the producer's group. Sets t->fusion_group (the id of
 * the group's first node; -1 alone) and returns the number of groups of two or more nodes. */
int nn_pass_fuse(nn_graph *g);

/* Rewrites each composite attention nn_attention built — matmul(softmax([causal_mask]
 * (scale(matmul(q, transpose(k))))), v) with single-reader intermediates, no dropout — into
 * one attention op (nn_attention_fused), in place of the final matmul; the score nodes are
 * removed. Run it on the forward graph, before nn_backward (afterwards the backward reads
 * the scores and nothing matches). Off unless called: the zoo's builders keep the
 * composite. *n_fused counts the rewrites. NP_ERR_NOMEM. */
np_status nn_pass_fuse_attention(nn_graph *g, int *n_fused, np_err *err);

/* Megatron-LM's FusedScaleMaskSoftmax: each softmax whose input is causal_mask(x, -inf)
 * and/or scale(x, s) (single-reader intermediates of its shape and dtype) takes them as its
 * own parameters (nn_softmax_masked) and they are removed, so one op reads the scores once.
 * Run it on the forward graph, before nn_backward (the softmax's backward is then one
 * softmax_grad with the scale folded in), after nn_pass_fuse_attention (which needs the
 * composite as built). *n_fused counts the softmaxes rewritten. NP_ERR_NOMEM. */
np_status nn_pass_fuse_softmax(nn_graph *g, int *n_fused, np_err *err);

typedef enum nn_ckpt_policy {
    NN_CKPT_EVERY_K,   /* keep each k-th layer's input, recompute the layers in between */
    NN_CKPT_SELECTIVE, /* keep layer inputs and matmul/conv outputs, recompute the rest */
    NN_CKPT_ATTENTION, /* recompute the attention core only (scores, mask, softmax, their
                          dropout: nodes with attn_core), keep the rest (Korthikanti's
                          "selective") */
} nn_ckpt_policy;

/* Activation checkpointing (after nn_backward): backward nodes read recomputed copies
 * (region recompute, scheduled just before their first reader) instead of the forward
 * activations the policy does not keep. Nodes outside layers (layer -1) are kept. */
np_status nn_pass_checkpoint(nn_graph *g, nn_ckpt_policy policy, int k, int *n_recomputed,
                             np_err *err);

/* The core of checkpointing: backward nodes read recomputed copies of the forward nodes
 * that kept[id] does not keep (kept indexed by node id, at least nn_graph_max_id + 1). */
np_status nn_pass_recompute(nn_graph *g, const bool *kept, int *n_recomputed, np_err *err);
/* The same, then every forward node of every layer (t->layer >= 0) that has no recomputed copy
 * gets one too, reading its layer's copies and, as they are, what enters the layer (leaves,
 * receives, other layers' nodes): the layer's whole forward runs again, as torch.utils.checkpoint
 * runs a checkpointed function (Megatron-LM's activation checkpointing of each layer), even the
 * nodes no backward reads. Every copy of a (chunk, layer) is keyed just before the layer's first
 * backward node, in forward order, so the recomputation precedes the layer's backward whole. */
np_status nn_pass_recompute_layers(nn_graph *g, const bool *kept, int *n_recomputed,
                                   np_err *err);

/* Bytes of forward activations held from the forward pass for the backward pass: the
 * storage of every forward (non-leaf) node read by a backward or recompute node (a view
 * counts as the tensor it views). */
uint64_t nn_saved_activation_bytes(const nn_graph *g);

typedef struct nn_memplan {
    uint64_t persistent_by_role[NN_ROLE_COUNT]; /* leaves: whole step */
    uint64_t persistent_bytes;
    uint64_t no_reuse_bytes;  /* every transient buffer its own storage */
    uint64_t live_peak_bytes; /* the most transient bytes live at once (a lower bound) */
    uint64_t peak_by_role[NN_ROLE_COUNT]; /* transient bytes live at that moment, by role */
    uint64_t arena_bytes;     /* high-water mark of the offset allocator (buffer reuse) */
    uint64_t peak_bytes;      /* arena_bytes + persistent_bytes */
    int peak_step;            /* schedule position of the live peak */
    int n_buffers;
    uint64_t *offset;         /* arena offset of each node's buffer, by id (UINT64_MAX: none) */
    int *step;                /* schedule position of each node, by id (-1: not scheduled) */
    int *last_step;           /* last step that reads each buffer, by id */
    int max_id;
} nn_memplan;

/* Plans the transient buffers (non-leaf nodes) of one run of g in schedule order: a buffer
 * lives from its node to its last reader (outputs to the end); views and updates alias their
 * source; buffers are placed best-fit in an arena, 64-byte aligned, reusing freed space. */
np_status nn_memplan_build(const nn_graph *g, nn_memplan *plan, np_err *err);
void nn_memplan_free(nn_memplan *plan);
/* Checks the plan's invariants: every buffer placed, aligned, inside the arena, and no two
 * buffers live at the same step share bytes. NP_ERR_INTERNAL names the first violation. */
np_status nn_memplan_verify(const nn_graph *g, const nn_memplan *plan, np_err *err);

#endif
