/* nn.h — the graph framework: tensors, the graph IR, ops, autodiff, the reference executor.
 *
 * A graph owns its tensors. Every tensor is either a leaf (input, parameter, constant,
 * optimizer state) or the output of one op over earlier tensors (ggml's "tensor = node"):
 * op constructors only record the op, its sources and parameters and infer the output's
 * shape and dtype; nothing is computed until nn_graph_compute (graph mode) unless the graph
 * is eager (nn_graph_set_eager), where each op runs on the reference executor as it is made.
 * Because a node can only name sources that already exist, construction cannot make a cycle;
 * the editing API that passes use (nn_node_set_src, nn_replace_uses) can, and
 * nn_graph_verify finds it.
 *
 * Errors are sticky: the first failed constructor fills the graph's error (naming the op,
 * the shapes and what mismatched) and returns NULL; every later constructor given a NULL
 * source returns NULL too, so a model can be built without checking each call and checked
 * once with nn_graph_status().
 *
 * Storage is fp32 for every dtype (bf16/fp16 values are rounded after each op; int dtypes
 * hold integers) and is allocated only when a tensor's values are needed, so the zoo's
 * largest models can be summarized from shapes alone.
 *
 * The complete example, compiled and run by the build, is docs/examples/mlp_train.c
 * (shown in docs/framework.md).
 */
#ifndef NPUSIM_NN_H
#define NPUSIM_NN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

#define NN_MAX_DIMS 6
#define NN_MAX_SRC 8
#define NN_MAX_IPARAMS 8
#define NN_MAX_FPARAMS 6
#define NN_NAME_MAX 96

/* Op flags (ops.def). */
#define NN_OPF_ELEM 1u   /* elementwise: output element i depends on input elements i */
#define NN_OPF_UPDATE 2u /* optimizer update: writes src[0] and its state in place */
#define NN_OPF_VIEW 4u   /* the output shares its input's storage (no bytes of its own) */
#define NN_OPF_COMM 8u   /* communicates over a group of ranks (itself or in its backward
                          * rule); runs with more than one rank only in the distributed
                          * executor (dist.h); gradients checked across ranks in
                          * tests/test_parallel.c */

/* Attributes (ip[]) of the communication ops (all_reduce, reduce_scatter, all_gather,
 * broadcast, reduce, all_to_all, send, recv, group_copy, shard_slice). A node names its
 * group symbolically — the axis of its tag and the group size — because ranks that run the
 * same plan share the node; plan.h's nn_plan_group gives the concrete ranks. */
#define NN_COMM_IP_TAG 0    /* nn_comm_tag (plan.h): tp, sp, dp, zero, pp, pp-sg */
#define NN_COMM_IP_SIZE 1   /* ranks in the group */
#define NN_COMM_IP_DIM 2    /* all_gather, reduce_scatter, shard_slice: the dim gathered or
                             * split; all_to_all: the dim split */
#define NN_COMM_IP_ARG 3    /* all_reduce, reduce_scatter, reduce: NN_REDUCE_*; broadcast,
                             * reduce: the root's position in the group; all_to_all: the dim
                             * concatenated */
#define NN_COMM_IP_MATCH 4  /* pairs a send with its recv, and one collective's instances on
                             * the ranks of a group (set by the plan) */
#define NN_COMM_IP_PEER 5   /* send, recv: peer offset along the pp axis; all_reduce:
                             * NN_GROUP_* (which ranks of the axis take part) */
#define NN_COMM_IP_DTYPE 6  /* recv: the dtype received (its dims are fp[0..ndim-1]) */
#define NN_COMM_IP_NDIM 7   /* recv: ndim */

#define NN_REDUCE_SUM 0
#define NN_REDUCE_MAX 1
#define NN_GROUP_ALL 0      /* every rank along the axis */
#define NN_GROUP_ENDS 1     /* the first and the last rank along the axis (tied embeddings) */

typedef enum nn_op {
#define NN_OP(name, text, flags, no_grad) NN_OP_##name,
#include "ops.def"
#undef NN_OP
    NN_OP_COUNT
} nn_op;

typedef enum nn_dtype { NN_F32, NN_BF16, NN_F16, NN_I8, NN_I32, NN_DTYPE_COUNT } nn_dtype;

typedef enum nn_role {
    NN_ROLE_INPUT,      /* data fed each step */
    NN_ROLE_PARAM,      /* trained weights */
    NN_ROLE_CONST,      /* fixed values: buffers (BN running stats), folded constants */
    NN_ROLE_ACTIVATION, /* forward values */
    NN_ROLE_GRADIENT,   /* values of the backward pass (gradients and their intermediates) */
    NN_ROLE_OPTSTATE,   /* optimizer state (momentum, Adam moments) and update outputs */
    NN_ROLE_COUNT
} nn_role;

/* Where a node was made: forward, backward (nn_backward), optimizer, recomputation. */
typedef enum nn_region { NN_REGION_FORWARD, NN_REGION_BACKWARD, NN_REGION_OPTIM,
                         NN_REGION_RECOMPUTE } nn_region;

typedef struct nn_graph nn_graph;
typedef struct nn_tensor nn_tensor;

struct nn_tensor {
    int id;               /* unique in its graph, never reused */
    nn_op op;
    nn_dtype dtype;
    nn_role role;
    nn_region region;
    int device;           /* chip the tensor lives on (unused by plans: a stage's graph is
                             shared by its ranks, plan.h) */
    int ndim;             /* 0 for a scalar */
    int64_t ne[NN_MAX_DIMS];
    int n_src;
    nn_tensor *src[NN_MAX_SRC];
    int64_t ip[NN_MAX_IPARAMS]; /* integer parameters of the op (see each constructor) */
    double fp[NN_MAX_FPARAMS];  /* real parameters of the op */
    char name[NN_NAME_MAX];
    char scope[NN_NAME_MAX]; /* the graph's scope when the node was made (a model layer) */
    int layer;            /* model layer index (nn_graph_set_layer), -1 outside layers */
    int chunk;            /* pipeline model chunk (nn_graph_set_chunk), -1 when not split */
    bool attn_core;       /* made inside nn_attention's core: scores, mask, softmax (the
                             region selective recomputation recomputes) */
    float *data;          /* values (numel floats) or NULL; owned unless data_is_view */
    bool data_is_view;
    bool trainable;       /* parameters: receives a gradient in nn_backward */
    bool requires_grad;   /* set by nn_backward: depends on a trainable parameter */
    bool is_output;       /* a root for dead-code elimination */
    nn_tensor *grad;      /* set by nn_backward */
    double sched_key;     /* scheduling priority (smaller first); creation order by default */
    int fusion_group;     /* set by nn_pass_fuse; -1 when not fused */
};

/* ---- dtypes, roles, ops ---- */
const char *nn_dtype_name(nn_dtype t);
size_t nn_dtype_size(nn_dtype t);
const char *nn_role_name(nn_role r);
const char *nn_op_name(nn_op op);
unsigned nn_op_flags(nn_op op);
/* Why op has no backward rule, or NULL when it has one. */
const char *nn_op_no_grad_reason(nn_op op);
bool nn_op_has_backward(nn_op op);

/* ---- tensors ---- */
int64_t nn_numel(const nn_tensor *t);
uint64_t nn_nbytes(const nn_tensor *t);
/* Writes "[2,3,4]" into buf; returns buf. */
char *nn_shape_str(const nn_tensor *t, char *buf, size_t n);
bool nn_same_shape(const nn_tensor *a, const nn_tensor *b);
/* Whether t is a permute that swaps its last two dims and keeps the others (nn_transpose's):
 * what a matmul reads transposed in place (the lowering folds such a permute into matmul
 * readers; the plan's memory accounting counts it as its source's storage then). */
bool nn_is_transpose(const nn_tensor *t);
/* Allocates zeroed storage if t has none; false when out of memory. */
bool nn_tensor_alloc(nn_tensor *t);
/* Copies numel floats into t's storage (allocating it); false when out of memory. */
bool nn_tensor_set(nn_tensor *t, const float *v);
/* Fills with normal(0, std) values from seed (allocating). */
bool nn_tensor_randn(nn_tensor *t, uint64_t seed, double std);
bool nn_tensor_fill(nn_tensor *t, float v);

/* ---- tensor values, for embedders and tests (instead of reaching into t->data) ----
 * Values are floats whatever the dtype (bf16/fp16 values are rounded, i32 ones whole), in
 * row-major order of t->ne. Each call checks its arguments and returns an error (never
 * reads or writes outside the tensor); on failure nothing changed. */

/* t's values, read-only, or NULL when it has none yet (a graph that has not run). */
const float *nn_tensor_values(const nn_tensor *t);

/* Copies t's numel values into out[0..n). NP_ERR_MISSING when t has no values,
 * NP_ERR_RANGE when n is not numel. */
np_status nn_tensor_read(const nn_tensor *t, float *out, size_t n, np_err *err);

/* Sets t's values from v[0..n) (allocating storage). NP_ERR_RANGE when n is not numel,
 * NP_ERR_TYPE for an i32 tensor given a value that is not a whole number, NP_ERR_NOMEM. */
np_status nn_tensor_write(nn_tensor *t, const float *v, size_t n, np_err *err);

/* The value at idx[0..t->ndim) (*out), or sets it (allocating zeroed storage first).
 * NP_ERR_RANGE for an index outside the shape; nn_tensor_get_at: NP_ERR_MISSING without
 * values. */
np_status nn_tensor_get_at(const nn_tensor *t, const int64_t *idx, float *out, np_err *err);
np_status nn_tensor_set_at(nn_tensor *t, const int64_t *idx, float v, np_err *err);
void nn_tensor_set_name(nn_tensor *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- graphs ---- */
/* A new empty graph; seed drives dropout masks and parameter initialization. NULL on OOM. */
nn_graph *nn_graph_new(uint64_t seed);
void nn_graph_free(nn_graph *g);
/* NP_OK, or the first construction error (copied into err). */
np_status nn_graph_status(const nn_graph *g, np_err *err);
/* Eager mode: each op is computed by the reference executor as it is created. */
void nn_graph_set_eager(nn_graph *g, bool eager);
bool nn_graph_is_eager(const nn_graph *g);
/* Names given to new nodes are "<scope>.<op>" (scope "" for none). */
void nn_graph_set_scope(nn_graph *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
const char *nn_graph_scope(const nn_graph *g);
void nn_graph_set_layer(nn_graph *g, int layer);
int nn_graph_layer(const nn_graph *g);
/* New nodes get this pipeline chunk (-1 by default). */
void nn_graph_set_chunk(nn_graph *g, int chunk);
int nn_graph_chunk(const nn_graph *g);
nn_region nn_graph_region(const nn_graph *g);
void nn_graph_set_region(nn_graph *g, nn_region r);
int nn_graph_n_nodes(const nn_graph *g);
nn_tensor *nn_graph_node(const nn_graph *g, int i); /* in creation order */
nn_tensor *nn_graph_find(const nn_graph *g, const char *name);
void nn_graph_set_output(nn_graph *g, nn_tensor *t);
uint64_t nn_graph_seed_next(nn_graph *g); /* a fresh seed from the graph's generator */

/* ---- leaves ---- */
nn_tensor *nn_leaf(nn_graph *g, const char *name, nn_role role, nn_dtype dt, int ndim,
                   const int64_t *ne);
nn_tensor *nn_input(nn_graph *g, const char *name, nn_dtype dt, int ndim, const int64_t *ne);
/* A trainable parameter. */
nn_tensor *nn_param(nn_graph *g, const char *name, nn_dtype dt, int ndim, const int64_t *ne);
nn_tensor *nn_const(nn_graph *g, const char *name, nn_dtype dt, int ndim, const int64_t *ne);
nn_tensor *nn_scalar(nn_graph *g, float v); /* a constant scalar with its value */

/* ---- ops (see ops.def); each returns NULL and sets the graph's error on failure ---- */
nn_tensor *nn_add(nn_graph *g, nn_tensor *a, nn_tensor *b);
nn_tensor *nn_sub(nn_graph *g, nn_tensor *a, nn_tensor *b);
nn_tensor *nn_mul(nn_graph *g, nn_tensor *a, nn_tensor *b);
nn_tensor *nn_div(nn_graph *g, nn_tensor *a, nn_tensor *b);
nn_tensor *nn_scale(nn_graph *g, nn_tensor *a, double s);
nn_tensor *nn_relu(nn_graph *g, nn_tensor *a);
nn_tensor *nn_relu6(nn_graph *g, nn_tensor *a);
nn_tensor *nn_gelu(nn_graph *g, nn_tensor *a); /* tanh approximation */
nn_tensor *nn_silu(nn_graph *g, nn_tensor *a);
nn_tensor *nn_tanh(nn_graph *g, nn_tensor *a);
nn_tensor *nn_exp(nn_graph *g, nn_tensor *a);
nn_tensor *nn_log(nn_graph *g, nn_tensor *a);
nn_tensor *nn_cast(nn_graph *g, nn_tensor *a, nn_dtype dt);
/* Zeroes each element with probability p and scales the rest by 1/(1-p); the mask depends
 * only on seed, so the backward pass and re-runs see the same mask: element i (row-major) is
 * dropped when np_philox_uniform24(seed, i) < (float)p (base/philox.h, counter-based, so a
 * kernel computes the same mask tile by tile). */
nn_tensor *nn_dropout(nn_graph *g, nn_tensor *a, double p, uint64_t seed);
/* A dropout node's ip[NN_DROPOUT_IP_TP] is 1 when its tensor is split over tensor parallelism
 * (plan_tp.c sets it; its backward keeps it): then each tp rank draws its own masks, as
 * Megatron-LM's model-parallel RNG does; a replicated or partial-sum tensor has the same mask
 * on every tp rank, so that its replicas stay equal. */
enum { NN_DROPOUT_IP_SEED = 0, NN_DROPOUT_IP_TP = 1 };
/* The seed a dropout node of seed `seed` draws its mask with at micro-batch mb (0-based) on
 * tp coordinate tp_rank (0 unless the node is split over tp): `seed` itself for (0, 0) — one
 * device and one micro-batch draw the node's own mask — and a different seed for every other
 * pair, so that micro-batches draw fresh masks as successive forward passes do in PyTorch. The
 * distributed executor (dist.h) and the lowered step (compiler/lower.h) both draw with it. */
uint64_t nn_dropout_seed(uint64_t seed, int mb, int tp_rank);
/* Sets element [.., i, j] with j > i of the last two dims to fill (-inf for attention). */
nn_tensor *nn_causal_mask(nn_graph *g, nn_tensor *a, double fill);
nn_tensor *nn_broadcast_to(nn_graph *g, nn_tensor *a, int ndim, const int64_t *ne);
/* Sums a over the dims that broadcasting would have added or stretched to reach ne. */
nn_tensor *nn_sum_to(nn_graph *g, nn_tensor *a, int ndim, const int64_t *ne);
/* Reductions over one axis (negative counts from the end). */
nn_tensor *nn_reduce_sum(nn_graph *g, nn_tensor *a, int axis, bool keepdim);
/* The sum of the squares of a's elements along axis (reduce_sum with ip[2] = 1: the squares
 * are not stored, as a norm kernel reads each element once). */
nn_tensor *nn_sum_squares(nn_graph *g, nn_tensor *a, int axis, bool keepdim);
nn_tensor *nn_reduce_mean(nn_graph *g, nn_tensor *a, int axis, bool keepdim);
nn_tensor *nn_reduce_max(nn_graph *g, nn_tensor *a, int axis, bool keepdim);
/* a [..., M, K] x b [..., K, N] -> [..., M, N]; batch dims broadcast. */
nn_tensor *nn_matmul(nn_graph *g, nn_tensor *a, nn_tensor *b);
/* x [N, C, H, W] * w [O, C/groups, KH, KW] -> [N, O, OH, OW]; square stride/pad/dilation. */
nn_tensor *nn_conv2d(nn_graph *g, nn_tensor *x, nn_tensor *w, int stride, int pad,
                     int dilation, int groups);
nn_tensor *nn_maxpool2d(nn_graph *g, nn_tensor *x, int k, int stride, int pad);
/* Average pooling counting the padding (PyTorch's count_include_pad=True). */
nn_tensor *nn_avgpool2d(nn_graph *g, nn_tensor *x, int k, int stride, int pad);
/* Training-mode batch norm over N (and H, W) per channel; gamma, beta [C] or both NULL. */
nn_tensor *nn_batchnorm(nn_graph *g, nn_tensor *x, nn_tensor *gamma, nn_tensor *beta,
                        double eps);
/* Inference batch norm with running statistics mean, var [C]. */
nn_tensor *nn_batchnorm_infer(nn_graph *g, nn_tensor *x, nn_tensor *gamma, nn_tensor *beta,
                              nn_tensor *mean, nn_tensor *var, double eps);
/* Over the last dim; gamma/beta [D] may be NULL (both or beta only for rmsnorm). */
nn_tensor *nn_layernorm(nn_graph *g, nn_tensor *x, nn_tensor *gamma, nn_tensor *beta,
                        double eps);
nn_tensor *nn_rmsnorm(nn_graph *g, nn_tensor *x, nn_tensor *gamma, double eps);
/* Rotary position embedding of x [..., S, Dh] (position = index along S; base 10000 in
 * Llama), rotating the pairs (i, i + Dh/2). */
nn_tensor *nn_rope(nn_graph *g, nn_tensor *x, double base);
/* The same with row 0 at position offset (>= 0: a decode step's tokens follow the cache's). */
nn_tensor *nn_rope_at(nn_graph *g, nn_tensor *x, double base, int64_t offset);
nn_tensor *nn_softmax(nn_graph *g, nn_tensor *a);     /* over the last dim */
/* Megatron-LM's FusedScaleMaskSoftmax: softmax over the last dim of a x scale (scale 0: 1),
 * with causal the elements above the diagonal of the last two dims masked (-inf) first — one
 * op for scale, causal_mask and softmax (nn_pass_fuse_softmax makes it from them). */
nn_tensor *nn_softmax_masked(nn_graph *g, nn_tensor *a, double scale, bool causal);
/* The backward of softmax y (of scale and causal as y's): scale x y (dy - sum over the last
 * dim of dy y), 0 where masked. The softmax backward rule builds it. */
nn_tensor *nn_softmax_grad(nn_graph *g, nn_tensor *y, nn_tensor *dy, double scale, bool causal);
nn_tensor *nn_log_softmax(nn_graph *g, nn_tensor *a); /* over the last dim */
/* One dim may be -1 (inferred). */
nn_tensor *nn_reshape(nn_graph *g, nn_tensor *a, int ndim, const int64_t *ne);
nn_tensor *nn_permute(nn_graph *g, nn_tensor *a, const int *axes);
nn_tensor *nn_transpose(nn_graph *g, nn_tensor *a); /* swaps the last two dims */
nn_tensor *nn_concat(nn_graph *g, int n, nn_tensor *const *xs, int axis);
nn_tensor *nn_slice(nn_graph *g, nn_tensor *a, int axis, int64_t start, int64_t end);
nn_tensor *nn_pad(nn_graph *g, nn_tensor *a, int axis, int64_t before, int64_t after);
/* table [V, D], idx (integer values) [...] -> [..., D]. */
nn_tensor *nn_embedding(nn_graph *g, nn_tensor *table, nn_tensor *idx);
/* Mean over rows of -log softmax(logits)[label]; logits [N, C], labels [N] -> scalar. */
nn_tensor *nn_cross_entropy(nn_graph *g, nn_tensor *logits, nn_tensor *labels);
/* Rows [offset, offset + V) of a vocabulary split across ranks: table [V, D], idx [...],
 * offset an i32 scalar; an index outside the rows gives a zero vector. */
nn_tensor *nn_embedding_shard(nn_graph *g, nn_tensor *table, nn_tensor *idx, nn_tensor *offset);
/* labels [...] (integers), offset an i32 scalar or NULL -> [..., C] of dtype dt with 1 where
 * label - offset == class. No gradient (integer input). */
nn_tensor *nn_one_hot(nn_graph *g, nn_tensor *labels, nn_tensor *offset, int64_t classes,
                      nn_dtype dt);
/* Identity whose gradient is zero: nothing flows back through it (PyTorch's detach). */
nn_tensor *nn_stop_grad(nn_graph *g, nn_tensor *a);

/* ---- communication (see NN_COMM_IP_*; `tag` is an nn_comm_tag of plan.h) ---- */
nn_tensor *nn_all_reduce(nn_graph *g, nn_tensor *a, int tag, int size, int reduction);
nn_tensor *nn_reduce_scatter(nn_graph *g, nn_tensor *a, int tag, int size, int dim);
nn_tensor *nn_all_gather(nn_graph *g, nn_tensor *a, int tag, int size, int dim);
nn_tensor *nn_broadcast(nn_graph *g, nn_tensor *a, int tag, int size, int root);
/* The root gets the sum, the other ranks zeros. */
nn_tensor *nn_reduce(nn_graph *g, nn_tensor *a, int tag, int size, int root);
/* Splits dim split_dim into size parts, part i to rank i; concatenates the parts received
 * along cat_dim. */
nn_tensor *nn_all_to_all(nn_graph *g, nn_tensor *a, int tag, int size, int split_dim,
                         int cat_dim);
/* Megatron's f: identity forward, all-reduce (sum) of the gradient over the group. */
nn_tensor *nn_group_copy(nn_graph *g, nn_tensor *a, int tag, int size);
/* Megatron's scatter: this rank's part (of size) along dim of a replicated a, starting at
 * the i32 scalar offset; backward all-gathers the gradient. */
nn_tensor *nn_shard_slice(nn_graph *g, nn_tensor *a, nn_tensor *offset, int tag, int size,
                          int dim);
/* Sends a to the rank `peer` positions along the pp axis; the output is a view of a. */
nn_tensor *nn_send(nn_graph *g, nn_tensor *a, int tag, int peer);
/* A tensor of shape (ndim, ne) and dtype dt received from `peer` positions along pp. */
nn_tensor *nn_recv(nn_graph *g, int ndim, const int64_t *ne, nn_dtype dt, int tag, int peer);

/* ---- in-place updates of persistent buffers (NN_OPF_UPDATE; their output aliases src[0]) ---- */
/* acc += g (the gradient accumulator over micro-batches). */
nn_tensor *nn_grad_accumulate(nn_graph *g, nn_tensor *acc, nn_tensor *grad);
/* buf = v. */
nn_tensor *nn_fill(nn_graph *g, nn_tensor *buf, double v);
/* dst = src rounded to dst's dtype (same shape). */
nn_tensor *nn_copy_to(nn_graph *g, nn_tensor *dst, nn_tensor *src);

/* ---- composites (built from the ops above) ---- */
/* x [..., in] @ w [in, out] (+ b [out]). */
nn_tensor *nn_linear(nn_graph *g, nn_tensor *x, nn_tensor *w, nn_tensor *b);
/* Splits a into n equal parts along axis (out[i] receives part i). */
bool nn_split(nn_graph *g, nn_tensor *a, int axis, int n, nn_tensor **out);
nn_tensor *nn_global_avgpool(nn_graph *g, nn_tensor *x); /* [N, C, H, W] -> [N, C] */
nn_tensor *nn_channel_shuffle(nn_graph *g, nn_tensor *x, int groups);
/* q, k, v [B, H, S, Dh] -> [B, H, S, Dh]; softmax(q k^T / sqrt(Dh) (+ causal mask)) v. */
nn_tensor *nn_attention(nn_graph *g, nn_tensor *q, nn_tensor *k, nn_tensor *v, bool causal);
/* The same with dropout p_drop (seeded) on the attention probabilities. */
nn_tensor *nn_attention_dropout(nn_graph *g, nn_tensor *q, nn_tensor *k, nn_tensor *v,
                                bool causal, double p_drop, uint64_t seed);
/* The same as one fused op (attention, scale 1 / sqrt(Dh)): q, k, v of one shape
 * [B, H, S, Dh]; no S x S tensor in the graph, forward or backward (nn_pass_fuse_attention
 * rewrites nn_attention's composite into it). */
nn_tensor *nn_attention_fused(nn_graph *g, nn_tensor *q, nn_tensor *k, nn_tensor *v,
                              bool causal);
/* Attention of S new queries against a context of Skv >= S keys (a kv cache and the new
 * tokens' own): q [B, H, S, Dh], k and v [B, KV, Skv, Dh] with KV dividing H (grouped-query
 * heads read their group's kv head). The queries are the last S positions (causal: query i
 * sees keys 0 .. Skv - S + i). The attention op in its inference form: forward only. */
nn_tensor *nn_attention_kv(nn_graph *g, nn_tensor *q, nn_tensor *k, nn_tensor *v, bool causal);
/* Sum over channel (dim 1) of [N, C, ...] -> [C]. */
nn_tensor *nn_channel_sum(nn_graph *g, nn_tensor *x);

/* ---- mixture of experts (op_moe.c, moe.c; docs/framework.md, "Mixture of experts") ---- */
/* The indices [..., k] (i32) of the k largest scores of each row of scores [..., E], largest
 * first (the lower index on ties). groups > 1: group-limited routing (DeepSeek-V2/V3): the E
 * experts form `groups` groups of E / groups, a group scores the sum of its `group_top`
 * largest scores (V2: 1, V3: 2), and only the experts of the `keep` best groups can be chosen.
 * groups 0 or 1: plain top-k. No gradient (integers). */
nn_tensor *nn_topk(nn_graph *g, nn_tensor *scores, int64_t k, int64_t groups, int64_t keep,
                   int64_t group_top);
/* Routing layout (op_moe.c's header): expert e's rows of the dispatched tensor are the tokens
 * routed to it in token order; capacity C > 0 gives every expert C rows ([E C, D]; an
 * assignment past its expert's C-th is dropped, empty rows are zero), C = 0 is dropless
 * ([T k, D]). idx [T, k] i32 holds each token's experts (values in [0, E)).
 * dispatch: x [T, D] -> rows; row of (t, j) = w[t, j] x[t] (w [T, k] or NULL: 1). */
nn_tensor *nn_moe_dispatch(nn_graph *g, nn_tensor *x, nn_tensor *idx, nn_tensor *w,
                           int64_t experts, int64_t capacity);
/* combine: rows [N, D] -> [T, D]; out[t] = sum over j of w[t, j] row(t, j) (dropped: 0). */
nn_tensor *nn_moe_combine(nn_graph *g, nn_tensor *rows, nn_tensor *idx, nn_tensor *w,
                          int64_t experts, int64_t capacity);
/* The grouped matmul: rows [N, K] x w [E, K, F] -> [N, F], each expert's rows by its own
 * weight. */
nn_tensor *nn_moe_gmm(nn_graph *g, nn_tensor *rows, nn_tensor *w, nn_tensor *idx,
                      int64_t capacity);

typedef enum { NN_MOE_SOFTMAX, NN_MOE_SIGMOID } nn_moe_score;
/* How a router chooses: Mixtral softmax, top-2, renormalized; Qwen3-MoE softmax, top-8,
 * renormalized; DeepSeek-V2-Lite softmax, top-6, not renormalized; DeepSeek-V3 sigmoid, top-8
 * of 4 of 8 groups (group_top 2), renormalized, scaled by 2.5, selection biased. */
typedef struct nn_moe_router {
    int64_t experts, top_k;
    nn_moe_score score;
    bool norm_topk;           /* the k chosen weights divided by their sum */
    double scale;             /* the weights' factor (routed_scaling_factor; 0 means 1) */
    int64_t groups, keep_groups, group_top; /* group-limited routing (nn_topk); 0: none */
    double capacity_factor;   /* 0: dropless; else C = ceil(factor T k / E) */
} nn_moe_router;
/* A router's result for T tokens. */
typedef struct nn_moe_routing {
    nn_tensor *idx;     /* [T, k] i32: the chosen experts */
    nn_tensor *weights; /* [T, k]: their weights (renormalized and scaled as asked) */
    nn_tensor *probs;   /* [T, E]: the scores (softmax or sigmoid of the logits) */
    int64_t experts, capacity; /* capacity 0: dropless */
} nn_moe_routing;
/* Expert capacity for T tokens: ceil(factor T k / E) (Switch Transformer's, GShard's with
 * k = 2); 0 when dropless. */
int64_t nn_moe_capacity(const nn_moe_router *r, int64_t tokens);
/* Routes logits [T, E] (x W_router): scores, top-k of the scores plus `bias` ([E] or NULL:
 * DeepSeek-V3's auxiliary-loss-free balancing bias, which steers the choice but not the
 * weights), the chosen scores gathered as weights (through one_hot, so they carry gradients
 * to the router), renormalized and scaled. False (and the graph's error) on failure. */
bool nn_moe_route(nn_graph *g, nn_tensor *logits, nn_tensor *bias, const nn_moe_router *r,
                  nn_moe_routing *out);
/* The routed SwiGLU experts over x [T, D]: per expert e, down_e(silu(x gate_e) * (x up_e))
 * with gate, up [E, D, F] and down [E, F, D], combined with the routing weights -> [T, D]. */
nn_tensor *nn_moe_experts(nn_graph *g, nn_tensor *x, const nn_moe_routing *rt, nn_tensor *gate,
                          nn_tensor *up, nn_tensor *down);
/* The Switch Transformer's auxiliary load-balancing loss: E sum_e f_e P_e, with f_e the
 * fraction of the T k assignments that chose e (no gradient) and P_e the mean score of e over
 * the tokens; 1 when perfectly balanced. A scalar of probs' dtype (multiply by the
 * coefficient and add to the loss). */
nn_tensor *nn_moe_aux_loss(nn_graph *g, const nn_moe_routing *rt);

/* ---- the generic constructor the ops above use (for passes and tests) ---- */
/* A node of op over srcs with ip/fp (either may be NULL: zeros); infers shape and dtype. */
nn_tensor *nn_node(nn_graph *g, nn_op op, int n_src, nn_tensor *const *srcs,
                   const int64_t *ip, const double *fp);
/* Re-runs shape/dtype inference of t against its current sources, into a scratch copy:
 * fills err and returns its status when they no longer fit or differ from t's. */
np_status nn_node_check(const nn_tensor *t, np_err *err);

/* ---- graph editing (passes) ---- */
/* Sets t's source i to s (no checks: nn_graph_verify finds what this breaks). */
void nn_node_set_src(nn_tensor *t, int i, nn_tensor *s);
/* Makes every node that reads old read repl instead (except repl itself), and moves old's
 * output mark and the gradient links to old over to repl; returns the number of edges moved. */
int nn_replace_uses(nn_graph *g, nn_tensor *old, nn_tensor *repl);
/* Removes the nodes for which keep[id] is false (no live node may use them). */
void nn_graph_remove(nn_graph *g, const bool *keep);
/* Number of consumers of each node, indexed by id (caller frees). */
int *nn_graph_use_counts(const nn_graph *g);
int nn_graph_max_id(const nn_graph *g);

/* Checks every node: sources exist in the graph, shapes and dtypes re-infer, no cycle.
 * The error names the offending node(s). */
np_status nn_graph_verify(const nn_graph *g, np_err *err);

/* ---- scheduling and execution ---- */
/* Ready-queue topological order (smallest sched_key first among ready nodes); an optimizer
 * update runs after every other reader of the tensor it writes. *order is malloc'd (n nodes).
 * A cycle is an NP_ERR_INCONSISTENT error naming its nodes. */
np_status nn_schedule(const nn_graph *g, nn_tensor ***order, int *n, np_err *err);
/* Runs the whole graph on the CPU reference executor (allocating storage as needed). Leaves
 * must have values. */
np_status nn_graph_compute(nn_graph *g, np_err *err);
/* Computes one node from its sources' values (the reference implementation). */
np_status nn_node_compute(nn_tensor *t, np_err *err);

/* ---- autodiff ---- */
/* Appends the backward graph of scalar loss: every trainable parameter that loss depends on
 * gets t->grad (gradients of fan-out tensors are accumulated). The error names an op on the
 * path that has no backward rule. */
np_status nn_backward(nn_graph *g, nn_tensor *loss, np_err *err);
/* The general form: backward from n roots, root i seeded with seeds[i] (a tensor of its
 * shape: a received gradient, or a scaled constant), computing gradients for every
 * trainable parameter and for the n_wrt nodes wrt[] (e.g. received activations whose
 * gradient goes back to the previous pipeline stage). Nodes made while differentiating a
 * node take its layer, chunk and scope. */
np_status nn_backward_roots(nn_graph *g, int n, nn_tensor *const *roots,
                            nn_tensor *const *seeds, int n_wrt, nn_tensor *const *wrt,
                            np_err *err);

/* ---- costs ---- */
/* FLOPs of one node (a multiply-add counts 2), and bytes it reads and writes. */
int64_t nn_node_flops(const nn_tensor *t);
/* Model FLOPs of one node: the FLOPs of the math the model states, whatever form computes
 * it — the FLOPs MFU divides. nn_node_flops for every op but the fused attention's, which
 * count as the composite's GEMMs and softmax do: every query-key pair (a causal mask removes
 * none, as in Megatron-LM's and PaLM's MFU formulas), and nothing for what the fused
 * backward recomputes (attention_lse: 0; attention_grad without its second QK^T). */
int64_t nn_node_model_flops(const nn_tensor *t);
int64_t nn_node_macs(const nn_tensor *t); /* matmul/conv multiply-adds; 0 for other ops */
uint64_t nn_node_bytes(const nn_tensor *t);

/* Fault injection for tests: the n-th framework allocation from now on (0: the next) and
 * every later one fail until the next call; n < 0 turns it off. */
void nn_fault_inject_alloc(long n);

/* bf16/fp16 rounding used by the executor (round to nearest even). */
float nn_round_bf16(float x);
float nn_round_f16(float x);

#endif
