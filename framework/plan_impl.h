/* plan_impl.h — what the plan builder's files share (not public: plan.h is the interface).
 *
 *   plan_build.c   validation, orchestration, backward, gradients and optimizer, entries
 *   plan_tp.c      the forward rewrite: tensor/sequence-parallel layouts, ZeRO-3 gathers,
 *                  pipeline sends and receives (one graph per stage)
 *   plan_sched.c   stage partition and pipeline schedules
 *   plan_mem.c     memory per rank by role
 *   plan_query.c   groups, peers, iteration, FLOPs
 */
#ifndef NPUSIM_PLAN_IMPL_H
#define NPUSIM_PLAN_IMPL_H

#include "nn_impl.h"
#include "plan.h"

/* A tensor's layout across the tp group: replicated, split along `dim` (viewed as
 * [blocks, n / blocks], every block split in tp parts), or partial sums. */
enum { NN_LAY_R, NN_LAY_S, NN_LAY_P };
typedef struct nn_lay {
    int kind;
    int dim;
    int64_t blocks;
} nn_lay;

/* The value of a single-device (G0) node in one chunk: its local tensor and layout, and
 * the conversions made from it (memoized so that every consumer shares them). */
typedef struct nn_pv {
    int chunk;
    nn_tensor *t;
    nn_lay lay;
    nn_tensor *as_r;    /* converted to replicated */
    nn_tensor *as_s;    /* converted to the sequence split (sp) */
    nn_lay as_s_lay;
    nn_tensor *copied;  /* Megatron's f (group_copy) of t */
    struct nn_pv *resolved; /* a P value resolved for non-linear consumers (owned) */
    struct nn_pv *next; /* the value in other chunks (received) */
} nn_pv;

/* A model parameter (a G0 param leaf, seen through its cast in mixed precision). */
typedef struct nn_pparam {
    nn_tensor *g0;          /* the f32 parameter of the single-device graph */
    nn_dtype work;          /* dtype the model computes with */
    bool decided;
    nn_lay lay;             /* tp layout */
    int64_t pad_rows;       /* vocabulary padding of dim 0 (0: none) */
    int64_t local_ne[NN_MAX_DIMS]; /* rank's (tp-local) shape, ndim of g0 */
    bool partial_tp;        /* its gradient is a partial sum over tp (sp regions) */
    nn_tensor **leaf;       /* per stage: the local leaf (NULL: unused there) */
    nn_tensor **gathered;   /* ZeRO-3: per chunk, the gathered value of this forward */
} nn_pparam;

enum { NN_PB_RANK_VALUES = 16 }; /* distinct rank-dependent offsets of a stage */

typedef struct nn_pstage {
    nn_graph *g;
    nn_tensor *rank_value[NN_PB_RANK_VALUES]; /* RANKVALUE leaves (tp coordinate * scale), */
    int64_t rank_scale[NN_PB_RANK_VALUES];    /* by scale */
    int n_rank_values;
    nn_tensor **inputs;      /* local copies of G0 leaves (inputs, consts), by G0 id */
    nn_plan_leaf *leaves;
    int n_leaves, cap_leaves;
} nn_pstage;

/* A pipeline boundary: a value sent from chunk `from` to chunk `to`. Scattered (Megatron's
 * scatter/gather, nn_strategy.pp_scatter_gather): `from` sends its tp rank's 1/tp of the value,
 * flattened — a replicated value's slice (shard_slice), a partial sum's reduce-scatter — and
 * `to` all-gathers the parts over its tp group into `value`, replicated; the gradient goes back
 * the same way (the shard_slice's or reduce-scatter's gradient is that all-gather). */
typedef struct nn_pbound {
    nn_tensor *send, *recv;       /* forward: in from's and to's graphs */
    nn_tensor *value;             /* the value `to` computes with: recv, or its parts gathered */
    int from, to;
    bool grad;                    /* a gradient travels back */
    bool scattered;               /* sent in 1/tp shards */
    nn_tensor *grad_recv;         /* backward: the received gradient (from's graph) */
} nn_pbound;

typedef struct nn_pb {
    const nn_plan *plan;
    const nn_strategy *s;
    int tp, dp, pp, zero, n_chunks;
    bool sp;
    nn_graph *g0;            /* the single-device forward graph (micro-batch) */
    nn_model m0;
    int max_id0;
    int *unit;               /* by G0 id: pipeline unit (0 pre, 1..L layers, L+1 post), -1 */
    int *chunk;              /* by G0 id: chunk */
    bool *needs_grad;        /* by G0 id: depends on a trainable parameter */
    int *use_start, *uses;   /* consumers of each G0 node (CSR) */
    nn_pv **val;             /* by G0 id */
    nn_pparam **param;       /* by G0 id of the param leaf and of its casts */
    nn_pparam *params;
    int n_params;
    nn_pstage *stages;
    nn_pbound *bounds;
    int n_bounds, cap_bounds;
    int next_match;
    int64_t vocab, vocab_shard; /* a vocabulary-parallel embedding: its rows and rank's rows */
    np_err *err;
} nn_pb;

/* plan_build.c: the builder's bookkeeping of the nodes it makes. */
enum { NN_HINT_NONE, NN_HINT_BEGIN, NN_HINT_END };

typedef struct nn_pmark {
    int hint;      /* block for step nodes */
    bool last;     /* runs at the last micro-batch only */
    int bucket;    /* collective bucket (0: none) */
    int phase;     /* the step's end: 1 + its phase (NN_END_*) when its op does not say (0) */
} nn_pmark;

typedef struct nn_pstate {
    nn_pb *pb;
    int st;
    nn_graph *g;
    nn_pmark *mark; /* by node id, grown as nodes are made */
    int cap_mark;
    int next_bucket;
} nn_pstate;

/* The mark of node t, grown as nodes are made (NULL: t NULL or out of memory). */
nn_pmark *nn_ps_mark(nn_pstate *ps, nn_tensor *t);

/* Whether op is a collective (not a send or receive). */
static inline bool nn_is_collective(nn_op op)
{
    return op == NN_OP_ALL_REDUCE || op == NN_OP_REDUCE_SCATTER || op == NN_OP_ALL_GATHER ||
           op == NN_OP_BROADCAST || op == NN_OP_REDUCE || op == NN_OP_ALL_TO_ALL;
}

/* The phases of a step's end, in the order Megatron-LM 2021's train_step and its mixed-
 * precision optimizer run them, each under a timer of its own (megatron/training.py,
 * megatron/optimizer/optimizer.py): with host_sync the step's end runs them one after the
 * other, the host synchronizing the device before each. */
enum {
    NN_END_GRAD_REDUCE, /* data-parallel gradient reductions (allreduce_gradients) */
    NN_END_SP_SUM,      /* partial gradients summed over tp (sequence-parallel norms) */
    NN_END_TIED,        /* the tied embedding's all-reduce (backward-embedding-all-reduce) */
    NN_END_MAIN_GRAD,   /* gradients to fp32 main gradients (optimizer-copy-to-main-grad) */
    NN_END_UNSCALE,     /* unscaled and checked for inf, the flag all-reduced and read by the
                           host (optimizer-unscale-and-check-inf) */
    NN_END_NORM,        /* the global norm, all-reduced and read by the host */
    NN_END_CLIP,        /* the gradients scaled by the clipping coefficient (with the norm:
                           optimizer-clip-main-grad) */
    NN_END_UPDATE,      /* the optimizer's update (optimizer.step) */
    NN_END_COPY_BACK,   /* main parameters back into the model's (copy-main-to-model-params) */
};

/* The phase a node of the step's end has by itself (nn_pb_entries gives an entry the latest
 * of its nodes' and its dependencies'). */
int nn_end_phase(const nn_pstate *ps, const nn_tensor *t);

/* plan_entries.c: the blocks and entries of stage ps->st's class (its graph scheduled). */
np_status nn_pb_entries(nn_pb *pb, nn_plan *p, nn_pstate *ps);

/* plan_tp.c: rewrites the forward graph into the stages' graphs. */
np_status nn_pb_forward(nn_pb *pb);
/* Whether a boundary value t of layout lay is sent in 1/tp shards: Megatron's rule (tp > 1,
 * no sequence parallelism, elements a multiple of tp) for a value replicated over tp or, as our
 * rewrite may leave a residual stream, partial sums of it; never a split value. */
bool nn_pb_scatters(const nn_pb *pb, const nn_tensor *t, nn_lay lay);
/* The i32 RANKVALUE leaf "tp coordinate x scale" of a stage (NULL and pb->err on failure). */
nn_tensor *nn_pb_rank_value(nn_pb *pb, int stage, int64_t scale);
/* This tp rank's 1/tp of t (layout lay: R or P), flattened, in stage's graph g: R, its slice
 * (Megatron's split_tensor_into_1d_equal_chunks); P, the reduce-scatter of the partial sums
 * over tp. NULL: the graph's error or pb->err. */
nn_tensor *nn_pb_scatter(nn_pb *pb, int stage, nn_graph *g, nn_tensor *t, nn_lay lay);
/* Stage of a chunk. */
static inline int nn_pb_stage(const nn_pb *pb, int chunk) { return chunk % pb->pp; }
/* Adds a leaf record to a stage (NULL on OOM). */
nn_plan_leaf *nn_pb_leaf(nn_pb *pb, int stage, nn_plan_leaf_kind kind, nn_tensor *t);

/* plan_sched.c */
/* The blocks of a class: 0 STEP_BEGIN; per model chunk vi of the class (0 .. v-1) its
 * FORWARD, its BACKWARD and, under ZB-H1, its BACKWARD_W, k = 2 or 3 of them from 1 + k vi;
 * STEP_END last, at 1 + k v. */
static inline int nn_pb_per_chunk(const nn_strategy *s) { return s->schedule == NN_PP_ZB_H1 ? 3 : 2; }
static inline int nn_pb_fwd_block(const nn_strategy *s, int vi) { return 1 + nn_pb_per_chunk(s) * vi; }
static inline int nn_pb_bwd_block(const nn_strategy *s, int vi) { return 2 + nn_pb_per_chunk(s) * vi; }
static inline int nn_pb_w_block(const nn_strategy *s, int vi) { return 3 + nn_pb_per_chunk(s) * vi; }
/* Assigns G0 nodes to chunks (pb->unit, pb->chunk) and fills the plan's chunk layers. */
np_status nn_pb_partition(nn_pb *pb, nn_plan *p);
/* Fills every class's schedule (after its blocks exist). */
np_status nn_pb_schedules(nn_plan *p, np_err *err);

#endif
