/* lower.h — whole training steps lowered to one ISA program per core: a framework graph
 * (forward, loss, backward, optimizer) placed in one chip's HBM and compiled kernel after
 * kernel, in the scheduler's order, through the kernel ABI (kernel.h).
 *
 *   nn_graph *g = ...;                        // a training step (nn_backward, nn_optim_step)
 *   lower_prog *lp;
 *   lower_graph(&cfg, g, &(lower_opts){0}, &lp, &err);
 *   const isa_program *prog = lp->prog;       // one text per core of the chip; run it
 *   uint64_t w = lower_addr(lp, w1);          // where w1's values live (host writes them,
 *   ...                                       //   reads the trained ones back)
 *   lower_prog_free(lp);
 *
 * What each node becomes (lower_node_kind):
 *   - leaves (inputs, parameters, optimizer state, constants) are persistent buffers of their
 *     own, each a data symbol named after the tensor: constants that have values are .data
 *     (the program carries them), the others .bss, which the host fills before the run and
 *     reads after it (parameters and optimizer state are updated in place);
 *   - every other node's result is a transient buffer in one arena (a .bss symbol "arena")
 *     placed by the framework's liveness memory planner (pass.h, nn_memplan_build): buffers
 *     whose lifetimes do not overlap share bytes; views and in-place updates alias their
 *     source, so an optimizer update writes its parameter where the host put it;
 *   - views (reshape, stop_grad, ... : NN_OPF_VIEW and ops kernels.def says need no kernel)
 *     lower to nothing;
 *   - a fusion group of nn_pass_fuse whose head's kernel takes an epilogue (matmul, conv2d)
 *     is one kernel: the chain of elementwise steps after the head that the epilogue can
 *     apply (add/sub/mul/div of an operand that broadcasts to the result, scale, relu, gelu,
 *     silu, tanh, exp) runs before the store, and the intermediate results are never written;
 *   - a permute that swaps the last two dims of a dense tensor and is read only by matmuls
 *     is folded into their operands' strides (a column-major operand), with no kernel;
 *   - every other node is the kernel of its op (kernels.def): inputs its sources, outputs its
 *     result (an update: the parameter and its state, in place), attributes from its
 *     parameters (kc_kernel_def.from_node), checked against the kernel's reference (the
 *     framework node the attributes describe must be this node), spread over the cores.
 *   An op without a kernel is an error naming the op and the node, never a skip.
 *
 * Ordering between kernels is the kernel ABI's: one core orders its own HBM accesses, and
 * kc_compile puts a barrier on every core before a kernel that touches what another
 * placement wrote (or reuses arena bytes another placement read). Fences and barriers leave
 * the COMM queue out (nocomm), so communication in flight overlaps the kernels after it.
 *
 * A plan's rank (lower_plan_rank) lowers the same way: its class's entries in schedule order,
 * a micro-batch block's nodes once per micro-batch (lower_addr_mb), collectives, sends and
 * receives as comm.* on their streams' cores (lower_coll.c's header; docs/compiler.md,
 * "Lowering whole steps"). lower_prog.steps give each kernel's plan entry and micro-batch, so
 * an engine that times entries can time the very kernels this lowering emits.
 */
#ifndef NPUSIM_LOWER_H
#define NPUSIM_LOWER_H

#include <stdbool.h>
#include <stdint.h>

#include "arch.h"
#include "err.h"
#include "isa_prog.h"
#include "kernel.h"
#include "nn.h"
#include "plan.h"

/* What lowering one rank learns that other ranks of the same class (and other instances of
 * a node) reuse: each node's kernel checked against its reference once, its tiling chosen by
 * the cost model once. Optional (lower_opts.memo); the caller owns it and frees it after the
 * programs lowered with it. */
typedef struct lower_memo lower_memo;
lower_memo *lower_memo_new(void); /* NULL when out of memory */
void lower_memo_free(lower_memo *m);

typedef struct lower_opts {
    uint32_t cores;       /* the program's cores, every kernel spread over all of them (0:
                             chip.cores) */
    bool no_fuse;         /* every node its own kernel: no epilogues, no folded transposes */
    const struct kc_tile_cache *tiles; /* (optional) tuned tilings (kc_tiles.h) */
    uint64_t bss_base;    /* (optional) where .bss starts in HBM (0: isa_emit's default) */
    /* plans: how collectives run (as the flow engine runs them) */
    const struct net *net;       /* (optional) the chip network: rings fitted to the topology
                                    (noc/coll_topo.h); NULL: rings in rank order */
    struct coll_tuner *tuner;    /* (optional) the algorithm of each collective (noc/
                                    coll_tune.h); NULL: the ring */
    lower_memo *memo;            /* (optional) shared across the ranks lowered with it */
} lower_opts;

/* What a node lowered to. */
typedef enum lower_node_kind {
    LOWER_NODE_NONE,    /* not scheduled */
    LOWER_NODE_LEAF,    /* a persistent buffer of its own */
    LOWER_NODE_VIEW,    /* no code: aliases its source's bytes (reshape, an update's result) */
    LOWER_NODE_FOLDED,  /* no code: a transpose folded into its readers' operand strides */
    LOWER_NODE_FUSED,   /* computed inside another node's kernel, never stored */
    LOWER_NODE_KERNEL,  /* the head of a kernel */
    LOWER_NODE_COMM,    /* a collective, send or recv: comm.* on a core's COMM queue */
} lower_node_kind;

/* One kernel of the program, in program order. */
typedef struct lower_step {
    const nn_tensor *node;   /* its head: the kernel's op */
    const nn_tensor *last;   /* the node whose value it stores (the head, or its epilogue's
                                last step) */
    int n_fused;             /* nodes fused into it (epilogue steps, folded transposes) */
    int mb;                  /* the micro-batch of its instance (-1: a graph's, a step's) */
    const nn_plan_entry *e;  /* a plan's: the entry of its head (NULL for a graph) */
    bool host_launch;        /* the first kernel after the host synchronized the device
                                (nn_plan_iter's sync): launched by the host, as a step's first */
    kc_kernel k;             /* as compiled: operands at their HBM addresses */
    kc_result res;
} lower_step;

/* One communication entry of a plan's rank, in program order. */
typedef struct lower_comm {
    const nn_plan_entry *e;  /* the entry (its kind, tag, match and bytes) */
    int mb;                  /* its micro-batch (-1: a step block's) */
    uint32_t core;           /* the core whose COMM queue runs it (its stream's) */
    char name[64];           /* its kernel symbol there: traces and statistics name it */
    uint64_t bytes_sent;     /* bytes its comm.send instructions put on the network */
} lower_comm;

typedef struct lower_prog {
    isa_program *prog;       /* owned: every core's text, .data and .bss */
    uint32_t chip, cores;
    uint32_t n_steps;        /* kernels, in program order */
    lower_step *steps;
    uint32_t n_comm;         /* collectives, sends and receives emitted, in order */
    lower_comm *comm;
    int max_id;              /* node ids 0 .. max_id index the arrays below */
    lower_node_kind *kind;   /* by node id */
    uint32_t n_slots;        /* instances per node: 1 (a graph), or micro-batches + 1 */
    uint64_t *addr;          /* by (node id, slot): HBM address of its dense values
                                (UINT64_MAX: none of its own); slot 0 the persistent or
                                per-step instance, slot 1 + m micro-batch m's (lower_addr_mb) */
    uint64_t arena_addr, arena_bytes;     /* the transient buffers */
    uint64_t persistent_bytes;            /* every leaf's buffer */
    uint64_t flops, hbm_bytes;            /* sums over the kernels' kc_results */
} lower_prog;

/* Lowers one run of training graph g (all its nodes in nn_schedule's order) to a program for
 * one chip of cfg (cfg and g must outlive *out: steps point at g's nodes). Runs nn_pass_fuse
 * on g (it only records fusion groups; no value changes) unless opts->no_fuse. Errors:
 * NP_ERR_MISSING naming the first op without a kernel (op, node, shapes), NP_ERR_INCONSISTENT
 * for a communication op (a graph of one chip has none: lower a plan's rank instead) or a
 * node a kernel cannot be built from, the compiler's (a kernel that cannot be tiled names the
 * limit), NP_ERR_RANGE when the buffers do not fit the HBM, NP_ERR_NOMEM. *out is NULL on
 * failure. */
np_status lower_graph(const arch_config *cfg, nn_graph *g, const lower_opts *opts,
                      lower_prog **out, np_err *err);
void lower_prog_free(lower_prog *lp);

/* Lowers one step of rank `rank` of plan p (its class's entries in schedule order, a
 * micro-batch block's buffers once per micro-batch in flight) to a program for its chip
 * (p->mesh.chip[rank]) of cfg; collectives, sends and receives as comm.* on the cores of
 * their streams (lower_coll.c's header). p and cfg must outlive *out. Runs nn_pass_fuse on the
 * class graph unless no_fuse. Errors as lower_graph's, NP_ERR_RANGE for a rank outside the
 * mesh, NP_ERR_MISSING for communication not lowered yet (naming the op). */
np_status lower_plan_rank(const arch_config *cfg, const nn_plan *p, int rank,
                          const lower_opts *opts, lower_prog **out, np_err *err);

/* Checks a lowered program against what it was lowered from (lower_verify.c's header):
 * every kernel operand inside the program's data sections and each stored value where
 * lower_addr_mb says it lives, the FLOP and byte totals, and for a plan's rank (p not NULL)
 * its kernels and communication records as the instances of its class's entries in issue
 * order. NP_OK or NP_ERR_INTERNAL naming the kernel or entry. lower_graph and
 * lower_plan_rank run it on what they lower when np_verify_on() (base/verify.h). */
np_status lower_prog_verify(const lower_prog *lp, const nn_plan *p, int rank, np_err *err);

/* Hands the program over (the caller frees it with isa_program_free); lp keeps the rest. */
isa_program *lower_prog_take(lower_prog *lp);

/* The HBM address of t's values (dense, row-major, t's dtype), or UINT64_MAX when t has no
 * buffer of its own (fused into a kernel, a folded transpose, not in the graph lowered):
 * its persistent or per-step instance; lower_addr_mb micro-batch mb's (a plan's nodes of
 * micro-batch blocks and data leaves; others: as lower_addr). */
uint64_t lower_addr(const lower_prog *lp, const nn_tensor *t);
uint64_t lower_addr_mb(const lower_prog *lp, const nn_tensor *t, int mb);

/* The kernel of framework node `node` with its operands dense at address 0 (inputs its
 * sources, outputs its result; an update's outputs its parameter and state), its attributes
 * from the node's parameters, placed on cores 0 .. cores-1 of chip 0: what the node costs
 * when it is its own kernel (the run engine's fast fidelity times these). Errors as
 * lower_graph's for one node: NP_ERR_MISSING (no kernel for the op), NP_ERR_INCONSISTENT (the
 * kernel's operands, attributes or reference do not describe the node). */
np_status lower_node_kernel(const nn_tensor *node, uint32_t cores, kc_kernel *k, np_err *err);

/* The same with its operands at the given layouts (in[i] for node->src[i], out for its
 * result; addresses as given): a strided operand where the lowering folds a transpose. */
np_status lower_node_kernel_at(const nn_tensor *node, const kc_tensor *in, const kc_tensor *out,
                               uint32_t cores, kc_kernel *k, np_err *err);

/* Whether node lowers to no code of its own: a view (NN_OPF_VIEW), an op kernels.def says
 * needs no kernel, or a pipeline scatter's slice (nn_plan_node_is_offset_view: its source's
 * bytes at this rank's offset). The fast run asks it too (sim/run_kernel.c). */
bool lower_node_is_view(const nn_tensor *node);

/* The lowering's fusion rules, for an engine that times a plan's kernels as lower_plan_rank
 * compiles them without lowering the plan (sim/run_fuse.c):
 *   lower_epi_ok: whether a kernel whose result is cur can apply node m (a reader of cur) as
 *     its next epilogue step; *arg is m's other operand (NULL: none);
 *   lower_epi_of: that step, its operand at layout arg (NULL: none);
 *   lower_is_transpose: whether t is a permute swapping its last two dims (folded into its
 *     readers' operand strides when every reader is a matmul). */
bool lower_epi_ok(const nn_tensor *cur, const nn_tensor *m, const nn_tensor **arg);
void lower_epi_of(const nn_tensor *m, const kc_tensor *arg, kc_epi *e);
bool lower_is_transpose(const nn_tensor *t);

/* Kernel k (operand addresses ignored) compiled alone into a fresh program for cfg's chip:
 * every operand (and epilogue argument) in a .bss buffer of its own (from a quarter of the
 * HBM, at most 1 GiB, up: the kernel's constants below), then halt on every core
 * up to its placement's last; *res what it costs, *prog the program (the caller frees it;
 * NULL when not wanted). What `npusim run` times, and what compiling a plan's kernels means.
 * Errors: the compiler's (naming the kernel), NP_ERR_NOMEM. */
np_status lower_kernel_alone(const arch_config *cfg, const kc_kernel *k, kc_result *res,
                             isa_program **prog, np_err *err);
/* The same with the kernel compiled reps times one after the other on the same buffers (a
 * barrier between them where one writes what the next reads; *res the first's, the first
 * exactly the program lower_kernel_alone compiles up to its halts; the later copies named with
 * the tiling the first chose, so the cost model runs once): what a kernel costs right after
 * itself, as a step runs a kernel that waits for the one before. */
np_status lower_kernel_repeated(const arch_config *cfg, const kc_kernel *k, int reps,
                                kc_result *res, isa_program **prog, np_err *err);

/* The compute nodes of model layer `layer` in plan p (every class's compute entries whose
 * layer it is: forward, backward, recomputation and the optimizer's updates of its
 * parameters), each once, in block order, those that lower to a kernel (not views):
 * up to max of them into nodes (may be NULL with max 0); returns how many there are. */
int lower_plan_layer_nodes(const nn_plan *p, int layer, const nn_tensor **nodes, int max);

/* "relu bf16[8,32] -> bf16[8,32]": the node's op and shapes, for messages. */
char *lower_node_desc(const nn_tensor *node, char *buf, size_t n);

#endif
