/* core_sim.h — internals shared by the files of the core model (not an interface for other
 * modules; that is core.h):
 *
 *   core.c         one core: front end, unit queues, semaphores, scoreboard, deadlock lines
 *   core_comm.c    the COMM engine: messages over the on-chip mesh and between chips
 *   core_run.c     a run: the system of chips, the event loop, the deadlock check
 *   core_report.c  the report built from the finished run, as JSON and text
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
#include "mesh.h"
#include "net.h"

typedef enum fe_state { FE_RUN, FE_WAIT_QUEUE, FE_FENCE, FE_BARRIER, FE_HALTED, FE_DONE } fe_state;
typedef enum q_state { Q_IDLE, Q_BUSY, Q_WAIT_SEM } q_state;

typedef struct sys_sim sys_sim;

typedef struct q_entry {
    isa_insn in;           /* resolved */
    uint32_t pc;
    uint64_t mxu_k, mxu_n; /* the tile of the last mxu.load dispatched before it */
    bool first;            /* the innermost loop was on its first iteration (mode=first) */
    bool done;             /* started and completed; retires when the entries before it have */
    uint64_t seq;          /* dispatch order on its core (the scoreboard's "older") */
    core_range r[CORE_MAX_RANGES]; /* its operands' footprints (core_ranges) */
    unsigned nr;
    unsigned parts;        /* in flight: parts still running (compute time, scratchpad-port
                              stream, HBM stream) */
    uint64_t t_ideal_ps;   /* in flight: when it would end with the ports and HBM to itself */
    uint64_t t_start_ps;   /* when it started (a sem.wait: when it began to wait) */
    bool waited;           /* a sem.wait that had to wait */
    unsigned lane;         /* DMA: its lane among the copies in flight (traces) */
} q_entry;

typedef struct core_queue {
    q_entry ring[CORE_QUEUE_DEPTH];
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
} core_queue;

typedef struct loop_frame {
    uint32_t body;      /* pc of the first body instruction */
    uint64_t remaining; /* iterations still to run after the current one */
    uint64_t count;     /* iterations in all */
    uint8_t reg[3];
    int64_t step[3], saved[3];
} loop_frame;

typedef struct chip_sim chip_sim;

typedef struct core_model {
    chip_sim *chip;
    uint32_t id;
    uint32_t index; /* position in the program's cores */
    const isa_core_text *text;
    int64_t regs[ISA_N_REGS];
    loop_frame loops[ISA_LOOP_DEPTH];
    unsigned depth;
    uint32_t pc;
    fe_state fe;
    isa_unit fe_wait_q;     /* FE_WAIT_QUEUE: the full queue */
    uint32_t fe_wait_pc;    /* the instruction the front end stalls on */
    uint64_t fe_stall_from; /* when the current front-end stall began */
    uint64_t fe_busy_ps, fe_stall_ps, fe_insns;
    uint64_t barrier_id;
    core_queue q[ISA_N_QUEUES];
    uint64_t sem[ISA_N_SEMS];
    uint64_t mxu_k, mxu_n; /* the last mxu.load's tile; 0 before any */
    uint64_t seq_next;     /* the next dispatch's q_entry.seq */
    uint64_t dma_decode_free_ps; /* the DMA descriptor processor is free from then */
    hbm *ports;            /* the scratchpad's ports: a bandwidth pool the units share */
    hbm *acc_port;         /* the accumulator SRAM's port (mxu.mm, mxu.drain); NULL when
                              core.acc_port_bytes_per_cycle is 0 (the array paces itself) */
    uint64_t t_done_ps;
    uint64_t *k_first, *k_last; /* per kernel: first dispatch, last retire (ps) */
    bool *k_seen;
    int32_t *kernel_of;        /* per pc: kernel index or -1 */
    uint32_t comm_msg;         /* COMM head in flight: the message a send sent, or the one a
                                  recv waits for (UINT32_MAX: no matching send yet) */
    uint32_t mbox_head, mbox_tail; /* messages sent to this core not yet taken, in send order,
                                      linked by comm_msg.next (UINT32_MAX: none) */
} core_model;

/* A comm.send's message: one mesh packet from the sender's router to the receiver's on one
 * chip, or one chip-to-chip network transfer between two chips. */
typedef struct comm_msg {
    uint32_t src_chip, src_idx; /* sender: chip, and core index in its program */
    uint32_t dst_chip, dst_idx; /* receiver */
    uint64_t tag, bytes;
    unsigned slot;              /* the send's slot in the sender's COMM ring */
    bool sent;                  /* its last byte has left the sender: the send retired */
    bool arrived;               /* the data reached the receiver */
    uint32_t next;              /* the next message in the receiver's mailbox */
    uint8_t leg;                /* between chips: 0 sender's mesh to the link port, 1 the
                                   links, 2 receiver's mesh from its link port */
    uint8_t *data;              /* functional mode: the bytes, read when the send started */
} comm_msg;

/* One chip of the run: its program's cores, its HBM, its mesh. */
struct chip_sim {
    sys_sim *sys;
    uint32_t chip;   /* its number in the system (the peer(chip, core) that names it) */
    const arch_config *cfg;
    const isa_program *prog;
    evq *q;          /* the system's */
    hbm *mem;
    core_func *func; /* functional mode: the memories; NULL in timing mode */
    clk_domain clk;
    core_model *cores;
    uint32_t n_cores;
    uint32_t barrier_arrived;
    mesh *noc;         /* the on-chip mesh for comm.*; NULL when the program has none */
    clk_domain noc_clk;
    np_err err; /* first fault, from inside an event */
    uint64_t hbm_rd, hbm_wr, spad_rd, spad_wr, acc_rd, acc_wr;
};


/* The run: chips 0 .. n_chips-1 (program i on chip i) on one event queue, joined by the
 * chip-to-chip network when a message crosses chips. */
struct sys_sim {
    const arch_config *cfg;
    evq *q;
    chip_sim *chips;
    uint32_t n_chips;
    bool meshes;       /* some program has a comm.* or a barrier: every chip gets its mesh */
    net *net;          /* noc/net.h over system.chips; NULL when no comm.* names another chip */
    comm_msg *msgs;    /* every message sent, by id (the mesh packet's tag, the transfer's arg) */
    uint32_t n_msgs, cap_msgs;
    uint64_t c2c_bytes; /* bytes of messages between chips */
    core_trace_fn trace; /* core_sim_opts.trace, or NULL */
    void *trace_ctx;
    uint32_t cores_left;  /* cores of all chips not yet DONE */
    evq_handle watchdog;  /* the core_sim_opts.max_cycles event, while armed */
    bool over_limit;      /* it fired with work still pending */
};

static inline uint64_t now_ps(const core_model *c) { return evq_now(c->chip->q); }

/* The time `cycles` core cycles after the current one began. */
static inline uint64_t after_cycles(const core_model *c, uint64_t cycles)
{
    const clk_domain *d = &c->chip->clk;
    return clk_cycles_to_ps(d, clk_ps_to_cycles(d, now_ps(c)) + cycles);
}

/* Stops the run after a fault stored in s->err. */
static inline void chip_fail(chip_sim *s) { evq_stop(s->q); }

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
void core_q_timer_ev(evq *eq, void *ctx, uint64_t arg); /* one part of entry arg ended */
/* "core 3", or "chip 1 core 3" when the run has several chips (in faults and reports). */
void core_name(const core_model *c, char *buf, size_t n);
/* Reports entry e of unit u of core c to the trace, from e->t_start_ps to now. */
void core_trace(core_model *c, isa_unit u, const q_entry *e);
/* Mesh packet tags: a message id, or a barrier flit (CORE_TAG_BARRIER, with
 * CORE_TAG_RELEASE for the master's release, and the core's index in the low 32 bits). */
#define CORE_TAG_BARRIER (1ull << 63)
#define CORE_TAG_RELEASE (1ull << 62)
/* A barrier flit reached its router (from the mesh's delivery callback). */
void core_barrier_deliver(chip_sim *s, uint64_t tag);
/* Appends one line per waiting unit of core c to buf (the deadlock report). */
void core_deadlock_lines(const core_model *c, char *buf, size_t n);

/* core_comm.c */
void core_comm_start(core_model *c, core_queue *q, unsigned slot); /* COMM entry slot starts */
np_status core_comm_check(core_model *c, const isa_insn *in, np_err *err); /* at dispatch */
void core_comm_mesh_deliver(void *ctx, const mesh_packet *p);  /* mesh_set_deliver callback */
void core_comm_mesh_sent(void *ctx, const mesh_packet *p);     /* mesh_set_sent callback */
/* Index of the core with id `id` in chip s's program, or UINT32_MAX. */
uint32_t core_index_of(const chip_sim *s, uint64_t id);

/* core_report.c */
np_status core_report_build(sys_sim *y, stats *reg, core_report **out, np_err *err);

#endif
