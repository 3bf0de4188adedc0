/* lower_impl.h — what the lowering's files share (internal to compiler/).
 *
 * A lowering works on items: one per instance of a node that the program computes or holds,
 * in execution order. A graph's items are its nodes in schedule order (one instance each);
 * a plan rank's are its class graph's leaves, then every (entry, micro-batch) of its step in
 * schedule order, a node of a micro-batch block once per micro-batch (data leaves too). The
 * front ends (lower.c for graphs, lower_plan.c for plans) fill the items; lw_lower decides
 * what each becomes, places the buffers and emits the kernels and the communication
 * (lower_coll.c). */
#ifndef NPUSIM_LOWER_IMPL_H
#define NPUSIM_LOWER_IMPL_H

#include "lower.h"
#include "plan.h"

#define LW_NONE (-1)

typedef struct lw_item {
    nn_tensor *t;
    int32_t inst;               /* micro-batch of its instance; -1: persistent or per step */
    int32_t src[NN_MAX_SRC];    /* the items of its sources */
    const nn_plan_entry *e;     /* plan: the entry it belongs to (NULL: a leaf, or a graph) */
    bool lead;                  /* comm: the first node of its entry (emits the entry) */
    int32_t block;              /* plan: the block of its entry (-1: a leaf, or a graph) */
    bool keep;                  /* its buffer lives to the end (an output, a plan's loss) */
    bool packed;                /* comm lead: its entry's nodes reduce buffers laid out one
                                   after the other (a bucket): one collective over them all */
    int32_t bucket;             /* leaf: the lead of the bucket it is packed into (LW_NONE) */
    bool sync;                  /* plan: the host synchronizes the device before its entry
                                   instance (nn_plan_iter's sync; set on the entry's first item) */
    int32_t call;               /* plan: a blocking p2p call's send or recv: the call (0: none) */
    /* readers */
    int32_t uses, reader;       /* distinct reading items; the reader when there is one */
    bool all_mm;                /* every reader is a matmul */
    /* what it became */
    lower_node_kind kind;
    int32_t root;               /* the item whose buffer holds its values */
    int32_t head;               /* fused: the head of its kernel */
    int32_t pair;               /* attention: the attention_lse item whose buffer its kernel's
                                   second output fills; attention_lse: the attention item that
                                   computes it (no kernel of its own); LW_NONE */
    int32_t buf;                /* index of its arena buffer (LW_NONE) */
    int32_t step;               /* kernel or comm entry: its program step */
    bool has_lay;
    kc_tensor lay;              /* where its values are */
    uint64_t addr;              /* dense values' address (UINT64_MAX: none of its own) */
} lw_item;

/* A collective, send or recv in flight: what it touches, and how a later kernel waits. */
typedef struct lw_flight {
    uint64_t lo, hi;            /* HBM range it reads or writes */
    uint32_t core;              /* whose COMM queue runs it */
    unsigned sem;               /* signalled (COMM) when it is done */
    int32_t item;               /* its lead item */
} lw_flight;

typedef struct lw_ctx {
    const arch_config *cfg;
    lower_opts o;
    lower_prog *lp;
    kc_prog *p;
    lw_item *it;
    int32_t n, cap;
    int32_t *slot;              /* by (node id, instance slot): its item (LW_NONE) */
    uint32_t n_slots;           /* instances per node: 1 (graph) or micro-batches + 1 */
    /* plan lowering */
    const nn_plan *plan;
    const nn_plan_class *cls;
    int rank;
    /* communication in flight (lower_coll.c) */
    lw_flight *fl;
    uint32_t n_fl, cap_fl;
    bool *checked;              /* by node id: its kernel was checked against its reference */
    kc_tiling *tiling;          /* by node id: the tiling its first instance got (n_attrs 0:
                                   none), which the others reuse */
    uint32_t stream_core[16];   /* each stream's core (lower_coll.c) */
    uint32_t stream_port_core[16]; /* a collective stream's core of its second port, a core no
                                      other stream uses (UINT32_MAX: none, one core) */
    bool streams_known;
    uint64_t cts_addr;          /* the clear-to-send's scratch bytes (UINT64_MAX: none yet) */
    bool launch_pending;        /* the next kernel follows a host synchronization */
} lw_ctx;

/* Item index of (t, instance), or LW_NONE. */
static inline int32_t lw_slot_get(const lw_ctx *w, const nn_tensor *t, int32_t inst)
{
    return w->slot[(size_t)t->id * w->n_slots + (size_t)(inst + 1)];
}

/* Appends an item for (t, inst) with its sources' items; NP_ERR_NOMEM. */
np_status lw_item_add(lw_ctx *w, nn_tensor *t, int32_t inst, const int32_t *src,
                      const nn_plan_entry *e, bool lead, int32_t *out, np_err *err);

/* Sets up w for node ids 0 .. max_id with n_slots instances each (w->lp allocated). */
np_status lw_ctx_init(lw_ctx *w, const arch_config *cfg, const lower_opts *o, int max_id,
                      uint32_t n_slots, uint32_t chip, np_err *err);
void lw_ctx_fini(lw_ctx *w);
/* Binds w to the graph it lowers (the memo's arrays for it, or w's own). NP_ERR_NOMEM. */
np_status lw_ctx_graph(lw_ctx *w, const nn_graph *g, np_err *err);

/* Decides, places and emits every item (the front end filled them). On success w->lp holds
 * the finished program. */
np_status lw_lower(lw_ctx *w, np_err *err);

/* ---- nodes (lower_node.c) ---- */

/* The kernel of node with the given operand layouts: in[i] for node->src[i] (an update's
 * outputs are its in-place sources: out[0] = in[0], out[j] = in[j + 1]), out[0] for its
 * result (out[1 ..] for the outputs beyond it of a kernel with more: attention's lse);
 * attributes from the node (kc_kernel_def.from_node), checked against the kernel's reference
 * when check (once per node is enough: its instances differ only in addresses); placed on
 * cores 0 .. cores-1 of chip. Errors as lower_node_kernel. */
np_status lw_node_kernel(const nn_tensor *node, const kc_tensor *in, const kc_tensor *out,
                         uint32_t chip, uint32_t cores, bool check, kc_kernel *k, np_err *err);

/* The kernel table row node compiles with: its op's, or for an in-place update whose op has
 * none, the op it amounts to (grad_acc: add into the accumulator, copy_to: cast into the
 * destination); NULL when there is none. */
const kc_kernel_def *lw_kernel_def(const nn_tensor *node);

/* True when a kernel whose result is `cur` can apply node m (which reads cur) as its next
 * epilogue step (kernel.h's kc_epi, KC_DEF_EPILOGUE): *arg is m's other operand (NULL for a
 * step without one). */
bool lw_epi_step_ok(const nn_tensor *cur, const nn_tensor *m, const nn_tensor **arg);

/* Fills *e with the epilogue step of node m (lw_epi_step_ok), its operand at layout arg. */
void lw_epi_step(const nn_tensor *m, const kc_tensor *arg, kc_epi *e);

/* A kernel or data symbol for t: its name with the characters an assembler identifier cannot
 * hold as '_' (at most 40 of them), then suffix ("$<id>" and the like). */
void lw_symbol_name(const nn_tensor *t, const char *suffix, char *buf, size_t n);

/* ---- communication (lower_coll.c) ---- */

/* True when node t is communication that the lowering emits as comm.* (collectives, send,
 * recv); group_copy (identity forward) and shard_slice are not. */
bool lw_is_comm(const nn_tensor *t);

/* Bytes the output buffer of comm item i needs (a reduce-scatter works on a copy of its whole
 * input; 0: the output aliases its input, in place). */
uint64_t lw_comm_out_bytes(const lw_ctx *w, int32_t i);

/* Where in comm item i's own buffer its result starts (a reduce-scatter's part). */
uint64_t lw_comm_part_offset(const lw_ctx *w, int32_t i);

/* Marks the buckets: an entry that is one (nn_plan_entry_is_bucket: in-place all-reduces of
 * gradient accumulators) gets its leaves packed one after the other (lw_leaves), so that the
 * entry is one collective over all of them, as the plan sizes it and the fast run times it. */
void lw_comm_buckets(lw_ctx *w);

/* Emits comm item i's entry (its lead) on its stream's core, after a barrier that makes the
 * kernels before it visible; records it in flight. */
np_status lw_comm_emit(lw_ctx *w, int32_t i, np_err *err);

/* Before a kernel touching [lo, hi): makes every core wait for the communication in flight
 * that touches that range (all of it with lo = 0, hi = UINT64_MAX). */
np_status lw_comm_wait(lw_ctx *w, uint64_t lo, uint64_t hi, np_err *err);

/* The clear-to-sends of the blocking p2p call whose first item is i (items i, i+1, ... of its
 * call), after a barrier: every receive of the call sends its sender NN_PLAN_CTS_BYTES, then
 * every send of the call waits for its receiver's, each on its stream's core; the call's data
 * then follow (lw_comm_emit). Clear-to-sends first and data after, so that streams sharing a
 * core's COMM queue cannot wait on each other in a cycle. */
np_status lw_comm_cts(lw_ctx *w, int32_t i, np_err *err);

/* ---- the arena (lower_mem.c) ------------------------------------------------------------------
 * Transient buffers placed by liveness, with nn_memplan_build's rule (pass.h): in step order,
 * a step's new buffers are placed first (best fit into the gaps, else at the end, 64-byte
 * aligned), then the buffers it was the last reader of are freed — so a step's outputs never
 * overlap its inputs, and buffers whose lifetimes do not overlap share bytes. */
typedef struct lw_buf {
    uint64_t bytes;
    int32_t first, last;   /* the step that writes it first, the last step that reads it */
    uint64_t off;          /* set by lw_arena_plan */
} lw_buf;

/* Places bufs[0 .. n) (steps 0 .. n_steps-1; buffers of one step in index order). Sets each
 * off; *arena the bytes needed. NP_ERR_NOMEM. */
np_status lw_arena_plan(lw_buf *bufs, uint32_t n, int32_t n_steps, uint64_t *arena, np_err *err);

#endif
