/* core_sim.h — internals shared by the files of the core model (not an interface for other
 * modules; those are core.h and hw_system.h):
 *
 *   core.c         one core: front end, unit queues, semaphores, scoreboard, deadlock lines
 *   core_comm.c    the COMM engine: messages over the on-chip mesh and between chips
 *   hw_system.c    the system: chips, loading and starting programs, ends, the deadlock check
 *   core_run.c     core_sim_run_chips: one run to the end on a queue of its own
 *   core_report.c  the report built from the system, as JSON and text
 *   core_verify.c  the invariants of the cores' state machines, checked
 */
#ifndef NPUSIM_CORE_SIM_H
#define NPUSIM_CORE_SIM_H

#include <stdbool.h>
#include <stdint.h>

#include "clock.h"
#include "core.h"
#include "core_cost.h"
#include "core_func.h"
#include "evq.h"
#include "hbm.h"
#include "hbm_mesh.h"
#include "hw_system.h"
#include "l2.h"
#include "mesh.h"
#include "net.h"

typedef enum fe_state { FE_RUN, FE_WAIT_QUEUE, FE_FENCE, FE_BARRIER, FE_HALTED, FE_DONE } fe_state;
typedef enum q_state { Q_IDLE, Q_BUSY, Q_WAIT_SEM } q_state;

/* The hot members of the structs below come first: a run of a thousand chips touches a
 * few cache lines per event of cores that do not fit the caches together. */
typedef struct q_entry {
    uint64_t seq;          /* dispatch order on its core (the scoreboard's "older") */
    uint32_t pc;
    unsigned nr;
    unsigned parts;        /* in flight: parts still running (compute time, scratchpad-port
                              stream, HBM stream) */
    unsigned lane;         /* DMA: its lane among the copies in flight (traces) */
    bool first;            /* the innermost loop was on its first iteration (mode=first) */
    bool done;             /* started and completed; retires when the entries before it have */
    bool waited;           /* a sem.wait that had to wait */
    uint64_t t_ideal_ps;   /* in flight: when it would end with the ports and HBM to itself */
    uint64_t t_start_ps;   /* when it started (a sem.wait: when it began to wait) */
    uint64_t mxu_k, mxu_n; /* the tile of the last mxu.load dispatched before it */
    uint64_t t_ready_ps;   /* MXU entries with pipelined folds (mxu_pipe): when it could have
                              started as far as its own inputs go (its dispatch, the older
                              entries its operands waited for, its semaphore) */
    isa_insn in;           /* resolved */
    core_range r[CORE_MAX_RANGES]; /* its operands' footprints (core_ranges) */
    /* through the L2 (core_l2_copy; for traces): bytes moved through it, and the HBM's */
    bool l2;
    uint64_t l2_bytes, l2_hbm_rd, l2_hbm_wr;
} q_entry;

typedef struct core_queue {
    unsigned head, count;
    unsigned n_started;  /* entries from the head that have started (in flight or done) */
    unsigned n_inflight; /* of those, not yet completed */
    q_state state;       /* BUSY while n_inflight > 0 */
    bool sb_wait;        /* the next entry to start waits for an older one (scoreboard) */
    uint32_t lanes;      /* bit i: lane i has an entry in flight (traces) */
    uint64_t sb_from_ps; /* when that wait began */
    uint64_t t_wait_ps;  /* WAIT_SEM: when the wait began */
    uint64_t t_acct_ps;  /* busy/stall are accounted up to here (q_account) */
    uint64_t busy_ps, stall_ps, insns, bytes;
    q_entry ring[CORE_QUEUE_DEPTH];
} core_queue;

typedef struct loop_frame {
    uint32_t body;      /* pc of the first body instruction */
    uint64_t remaining; /* iterations still to run after the current one */
    uint64_t count;     /* iterations in all */
    uint8_t reg[3];
    int64_t step[3], saved[3];
} loop_frame;

typedef struct chip_sim chip_sim;

/* A peer core_comm_check found good, and when (the system's load epoch): it stays good until
 * a program is loaded somewhere. */
typedef struct peer_ok {
    uint32_t chip, core;
    uint32_t idx;    /* its index in its chip's program, or UINT32_MAX (no program yet) */
    uint64_t epoch;  /* 0: none */
} peer_ok;

/* What the front end looks up per pc without reading the instruction. */
typedef struct pc_info {
    int32_t kernel; /* kernel index, or -1 */
    uint8_t queue;  /* isa_insn_queue of the instruction (ISA_UNIT_CTRL: its own) */
    uint8_t launch; /* a kernel's first instruction whose launch the front end still waits
                       for (hw_launch; cleared once waited) */
} pc_info;

/* The array's run of folds with core.mxu_pipelined_folds (core.c, "pipelined folds"): an
 * mxu.mm continues the run of the one before it when nothing that takes the array's time came
 * between, its first fold's stream starting as early as the array and its own inputs allow. */
typedef struct mxu_pipe {
    bool live;         /* the last MXU entry that took time was an mxu.mm that its array time
                          ended (not held longer by a port): its run of folds can go on */
    uint64_t s_last;   /* the core cycle at which its last fold's stream began */
    uint64_t t_last;   /* that fold's stream cycles */
    uint64_t end_ps;   /* when its array time ends */
    uint64_t ready_ps; /* the latest t_ready_ps of the MXU entries retired since it */
    uint64_t sem_ps[ISA_N_SEMS]; /* when each semaphore last received a signal */
} mxu_pipe;

/* One kernel of a core's text as it runs. */
typedef struct kernel_run {
    uint64_t first_ps, last_ps; /* first dispatch, last retire */
    uint64_t busy_ps[ISA_N_QUEUES]; /* each queue's busy time (core_q_account) while one of
                                       its instructions was the one in flight that would end
                                       the latest alone */
    bool seen;
} kernel_run;

typedef struct core_model {
    /* first cache line */
    chip_sim *chip;
    evq *eq;                /* the chip's (the system's) */
    const isa_core_text *text;
    const arch_config *cfg; /* the chip's */
    uint32_t pc;
    uint32_t n_insns;       /* text->n_insns */
    uint32_t id;
    uint32_t index;         /* position in the program's cores */
    uint8_t fe;             /* fe_state */
    uint8_t fe_wait_q;      /* FE_WAIT_QUEUE: the full queue (isa_unit) */
    uint8_t q_used;         /* bit u: queue u holds entries (the scoreboard skips the others) */
    bool completing;        /* inside q_complete_ev */
    bool step_after_complete; /* the front end woke inside it: step at its end */
    /* second */
    clk_domain clk;         /* the chip's core clock */
    uint32_t comm_msg;      /* COMM head in flight: the message a send sent, or the one a
                               recv waits for (UINT32_MAX: no matching send yet) */
    unsigned depth;
    uint32_t fe_wait_pc;    /* the instruction the front end stalls on */
    uint64_t fe_stall_from; /* when the current front-end stall began */
    uint64_t seq_next;      /* the next dispatch's q_entry.seq */
    pc_info *pcs;           /* per pc of the text */
    kernel_run *kernels;    /* per kernel of the text */
    peer_ok peer_ok[2];     /* the last peers of a comm.send [0] and a comm.recv [1] */
    uint64_t fe_busy_ps, fe_stall_ps, fe_insns;
    uint64_t mxu_k, mxu_n;  /* the last mxu.load's tile; 0 before any */
    uint64_t dma_decode_free_ps; /* the DMA descriptor processor is free from then */
    hbm *ports;             /* the scratchpad's ports: a bandwidth pool the units share */
    hbm *acc_port;          /* the accumulator SRAM's port (mxu.mm, mxu.drain); NULL when
                               core.acc_port_bytes_per_cycle is 0 (the array paces itself) */
    mxu_pipe *pipe;         /* core.mxu_pipelined_folds: the array's run of folds; else NULL */
    uint64_t t_halt_ps;     /* when the front end halted */
    uint64_t t_done_ps;
    uint64_t barrier_id;
    bool fence_nocomm;      /* the fence (or barrier) waited on leaves COMM out */
    int64_t regs[ISA_N_REGS];
    loop_frame loops[ISA_LOOP_DEPTH];
    uint64_t sem[ISA_N_SEMS];
    core_queue q[ISA_N_QUEUES];
} core_model;

/* A comm.send's message: one mesh packet from the sender's router to the receiver's on one
 * chip, or, between two chips, pieces over three legs (core_comm.c). Its record lives from the
 * send until it is both sent and taken by a recv, then goes back to the free list. */
typedef struct comm_msg {
    uint32_t src_chip, src_idx; /* sender: chip, and core index in its program */
    uint32_t src_core;          /* the sender's core number (what the recv's peer names) */
    uint32_t dst_chip, dst_core; /* receiver: chip and core number */
    uint32_t dst_idx;           /* the receiver's index in its chip's program as of epoch */
    uint64_t epoch;             /* the system's load epoch at the send */
    uint64_t tag, bytes;
    unsigned slot;              /* the send's slot in the sender's COMM ring */
    bool sent;                  /* its last byte has left the sender: the send retired */
    bool arrived;               /* the data reached the receiver */
    bool taken;                 /* a recv took it (out of the mailbox) */
    uint32_t next;              /* the next message in the receiver's mailbox, or in the free
                                   list */
    /* Between chips the message crosses its legs (0 the sender's mesh to the link port, 1
     * the links, 2 the receiver's mesh from its port) in `pieces` pieces of
     * chip.c2c_piece_bytes (the last one shorter), each taking its next leg when it has
     * crossed the last; counts of pieces so far: */
    uint32_t pieces;
    uint32_t left0;             /* whose tail has left the sender for its mesh (leg 0) */
    uint32_t at_port;           /* at the sender chip's link port (all at once from a port core) */
    uint32_t on_link;           /* started on the links, one transfer at a time */
    uint32_t off_link;          /* delivered by the links to the receiver chip's port */
    uint32_t at_dst;            /* at the receiver */
    bool link_busy;             /* a transfer of this message's has not left the sender yet */
    uint8_t *data;              /* functional mode: the bytes, read when the send started */
} comm_msg;

/* What a chip keeps per core number, program or not. */
typedef struct chip_core {
    uint32_t idx;        /* its index in the chip's program, or UINT32_MAX */
    uint32_t mbox_head, mbox_tail; /* the messages sent to it that no recv has taken, in send
                                      order, linked by comm_msg.next (UINT32_MAX: none) */
} chip_core;

/* One chip of the system: its program's cores, its HBM, its mesh, the mailboxes of its
 * cores. The HBM (and its bytes), the mesh and the mailboxes outlive a program; the cores,
 * the counters and the kernel figures belong to the program loaded. */
struct chip_sim {
    hw_system *sys;  /* (the first cache line: what every event of a core reads) */
    const arch_config *cfg;
    evq *q;          /* the system's (the caller's) */
    clk_domain clk;
    core_func *func; /* functional mode: the memories; NULL in timing mode */
    uint32_t chip;   /* its number in the system (the peer(chip, core) that names it) */
    hw_chip_state state; /* hw_system.h's state machine */
    const isa_program *prog; /* NULL while EMPTY */
    uint64_t programs;   /* loaded so far */
    hbm *mem;        /* NULL until the first load */
    core_model *cores;
    uint32_t n_cores;
    uint32_t cores_left; /* cores of the program not yet DONE */
    chip_core *slots;    /* per core number (chip.cores of them) */
    uint32_t barrier_arrived;
    mesh *noc;         /* the on-chip mesh for comm.* and, with chip.hbm_controllers, the
                          DMA's HBM traffic; NULL until a program needs it */
    hbm_mesh *hmesh;   /* the HBM controllers on it (chip.hbm_controllers > 0), else NULL */
    /* the shared level (chip.l2_bytes > 0; core_l2.c): the cache's tags (l2_mode cache; NULL
     * for the buffer), and beside the mesh the server of its bandwidth (NULL on the mesh:
     * the slices are controllers of hmesh) */
    l2 *l2;
    hbm *l2srv;
    l2_figures l2_base; /* the cache's figures when the program was loaded */
    clk_domain noc_clk;
    uint32_t grp_inst[ISA_N_GROUPS]; /* the instance of g<i> it belongs to, or UINT32_MAX */
    uint32_t grp_rank[ISA_N_GROUPS]; /* its rank there */
    uint64_t t_start_ps, t_end_ps;
    bool end_pending;  /* hw_system_check: DEADLOCK, on_end not yet called */
    np_err err;   /* scratch for errors met inside events */
    np_err fault; /* FAULT or DEADLOCK: why */
    uint64_t hbm_rd, hbm_wr, spad_rd, spad_wr, acc_rd, acc_wr;
    uint64_t l2_rd, l2_wr;   /* bytes the DMA asked of the L2 (or the global buffer) */
    uint64_t c2c_bytes; /* bytes of its program's messages to other chips */
    uint64_t macs[ISA_DTYPE_COUNT]; /* mxu.mm multiply-accumulates by dtype (energy.h) */
    uint64_t vec_ops;   /* vpu.* element operations and comm.recv reductions (energy.h) */
    uint64_t noc_base;  /* the mesh's flit-hops when the program was loaded */
    uint32_t route_dst; /* the peer chip of the last route looked up (UINT32_MAX: none) */
    double route_bytes_per_s; /* its bottleneck bandwidth */
};

/* An instance of a group (hw_system.h, core.h core_group), its members copied. */
typedef struct sys_group {
    uint32_t id, n, first, stride;
    uint32_t *chips; /* NULL: the arithmetic progression */
} sys_group;

/* The system: chips 0 .. n_chips-1 on the caller's event queue, joined by the chip-to-chip
 * network when a message may cross chips. */
struct hw_system {
    const arch_config *cfg;
    evq *q;
    stats *reg;        /* (may be NULL) meshes and the network register here */
    chip_sim *chips;
    uint32_t n_chips;
    bool functional;
    net *net;          /* noc/net.h over system.chips; NULL until a program may talk to another
                          chip */
    comm_msg *msgs;    /* message records by id (the mesh packet's tag, the transfer's arg) */
    uint32_t n_msgs, cap_msgs; /* records ever used (live or free), allocated */
    uint32_t free_msg; /* the first free record (linked by next), or UINT32_MAX */
    bool in_net_callback; /* inside a net.h transfer callback (comm_net_event): a COMM entry
                             that ends now may complete right away (core_q_finish_at) */
    uint64_t epoch;    /* counts loads (from 1): what was found about a chip's program holds
                          while it is unchanged */
    core_trace_fn trace; /* or NULL */
    void *trace_ctx;
    hw_launch_fn launch; /* or NULL */
    void *launch_ctx;
    bool trace_no_text;  /* core_trace_insn.text NULL (hw_system_opts) */
    hw_chip_end_fn on_end; /* or NULL */
    void *on_end_ctx;
    sys_group *groups;
    uint32_t n_groups;
};

static inline uint64_t now_ps(const core_model *c) { return evq_now(c->eq); }

/* The time `cycles` core cycles after the current one began. */
static inline uint64_t after_cycles(const core_model *c, uint64_t cycles)
{
    const clk_domain *d = &c->clk;
    return clk_cycles_to_ps(d, clk_ps_to_cycles(d, now_ps(c)) + cycles);
}


static inline void insn_text(const chip_sim *s, const isa_insn *in, char *buf, size_t n)
{
    isa_format(in, s->prog->names, s->prog->names_len, buf, n);
}

/* An event argument naming ring slot `slot` of queue u. */
static inline uint64_t q_arg(isa_unit u, unsigned slot)
{
    return (uint64_t)u | ((uint64_t)slot << 8);
}

/* core.c */
void core_fe_step_ev(evq *eq, void *ctx, uint64_t arg); /* the front end's next step */
void core_q_account(core_model *c, core_queue *q);      /* before q's in-flight set changes */
/* Queue q's busy and stall ps, and the front end's, as accounted plus (now != 0: the core
 * runs) what has passed since, for a report while it runs. Nothing changes. */
void core_q_so_far(const core_queue *q, uint64_t now, uint64_t *busy, uint64_t *stall);
void core_fe_so_far(const core_model *c, uint64_t now, uint64_t *busy, uint64_t *stall);
/* The last part of entry `slot` of queue u ends at t_ps (>= now): it completes at the first
 * core clock edge at or after t_ps, as a compute timer's end would make it, with one event
 * less —
 * and with none when that is now and the caller is a chip-network callback
 * (hw_system.in_net_callback). */
void core_q_finish_at(core_model *c, isa_unit u, unsigned slot, uint64_t t_ps);
/* "core 3", or "chip 1 core 3" when the run has several chips (in faults and reports). */
void core_name(const core_model *c, char *buf, size_t n);
/* Reports entry e of unit u of core c to the trace, from e->t_start_ps to now. */
void core_trace(core_model *c, isa_unit u, const q_entry *e);
/* Mesh packet tags: a message id, or a barrier flit (CORE_TAG_BARRIER, with
 * CORE_TAG_RELEASE for the master's release, and the core's index in the low 32 bits). */
#define CORE_TAG_BARRIER (1ull << 63)
#define CORE_TAG_RELEASE (1ull << 62)
/* A DMA's access to an HBM controller over the mesh completed (mesh_set_access_done; the tag
 * is the core's index << 16 | q_arg of its entry). */
void core_dma_access_done(void *ctx, uint64_t tag);
/* Tags of accesses that are not a core's part: an L2 fill's (the low 32 bits: the fill
 * record) and an L2 write-back's (nobody waits). */
#define CORE_TAG_L2_FILL (1ull << 63)
#define CORE_TAG_L2_WB (1ull << 62)
/* One part of the entry in flight named by arg (q_arg) of core ctx ended (an hbm.h done
 * callback). */
void core_q_part_done(void *ctx, uint64_t arg);

/* core_l2.c */
/* Starts the HBM side of entry e (arg: its q_arg) of core c through the chip's L2 (s->l2 or
 * the global buffer), each stream capped at port_cap bytes/ps: adds the parts it starts to
 * e->parts and sets *alone_ps to how long the slowest takes alone. NP_ERR_NOMEM, the
 * mesh's. */
np_status core_l2_copy(core_model *c, q_entry *e, uint64_t arg, double port_cap,
                       double *alone_ps, np_err *err);
/* Whether range r goes through the shared level: an HBM range, not indexed (cache), or one
 * that starts in the global buffer's addresses (buffer). */
bool core_l2_range(const arch_config *cfg, const core_range *r);
/* Builds chip s's L2 (tags, server) if it has none and the chip has one. */
np_status core_l2_ensure(chip_sim *s, np_err *err);
/* A barrier flit reached its router (from the mesh's delivery callback). */
void core_barrier_deliver(chip_sim *s, uint64_t tag);
/* Appends one line per waiting unit of core c to buf (the deadlock report). */
void core_deadlock_lines(const core_model *c, char *buf, size_t n);

/* hw_system.c */
/* The program of chip s faulted with the error in s->err (from inside an event): the first
 * fault makes it FAULT and calls on_end; later ones change nothing. */
void chip_fail(chip_sim *s);
/* Core c's front end and queues are done (core.c): the last one ends the chip's program. */
void chip_core_done(core_model *c);
/* Builds what chip s needs before its first program or message, if not yet built: its
 * mailboxes and core index, its HBM, its functional memories (in functional mode). */
np_status chip_ensure(chip_sim *s, np_err *err);
/* Builds chip s's mesh if it has none (reg: the system's). */
np_status chip_ensure_mesh(chip_sim *s, np_err *err);
/* Builds the system's chip-to-chip network if it has none. */
np_status sys_ensure_net(hw_system *y, np_err *err);
/* The pc and instruction of chip s's deadlock lines, for all its cores not done, appended. */
void chip_deadlock_lines(const chip_sim *s, char *buf, size_t n);
/* The latest time any unit of chip s did something or began to wait. */
uint64_t chip_last_activity_ps(const chip_sim *s);

/* core_comm.c */
void core_comm_start(core_model *c, core_queue *q, unsigned slot); /* COMM entry slot starts */
np_status core_comm_check(core_model *c, isa_insn *in, np_err *err); /* at dispatch */
void core_comm_mesh_deliver(void *ctx, const mesh_packet *p);  /* mesh_set_deliver callback */
void core_comm_mesh_sent(void *ctx, const mesh_packet *p);     /* mesh_set_sent callback */
/* Index of core number `id` in chip s's program, or UINT32_MAX (none, or no program). */
static inline uint32_t core_index_of(const chip_sim *s, uint64_t id)
{
    return s->slots && id < (uint64_t)s->cfg->chip.cores ? s->slots[id].idx : UINT32_MAX;
}

/* core_verify.c */
/* Checks the invariants of chip s's cores (core_verify.c's header lists them), with `ended`
 * those of a program that ended; NP_ERR_INTERNAL naming the core and the invariant. */
np_status core_sim_verify(const chip_sim *s, bool ended, np_err *err);

/* core_report.c */
/* The report of chip `chip`'s program, or with HW_ALL_CHIPS of every chip with a program. */
/* Flits that have left a router of m through any output port (a link to the next router, or
 * ejection) since m was created: a flit crossing H links counts H + 1, once per router. */
uint64_t core_noc_flit_hops(const mesh *m);

np_status core_report_build(hw_system *y, uint32_t chip, stats *reg, core_report **out,
                            np_err *err);

#endif
