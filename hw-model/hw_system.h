/* hw_system.h — a steppable system of NPU chips on an event queue the caller owns: create,
 * load a program on a chip, start it, advance the queue (evq_run / evq_run_until, by the
 * caller), query, load the next program on a chip whose program is done, free. The run
 * engine, the SystemC wrapper and core_sim_run_chips (core.h, a thin wrapper over this) all
 * drive the same model this way.
 *
 * A system has chips 0 .. n_chips-1 of one architecture; each chip owns its HBM (kept from
 * one program to the next), its cores and its mesh, and the chips share the chip-to-chip
 * network (built when a loaded program first needs it). Every model event goes on the
 * caller's queue, so the caller's own events interleave with the model's in time order.
 *
 * One chip's state machine (hw_system_chip_state; the function of each transition named):
 *
 *              hw_system_load              hw_system_start
 *     EMPTY ------------------> LOADED ---------------------> RUNNING
 *                                ^  |  hw_system_load          |  |  |
 *                                |  +--(another program)--+    |  |  +--(a fault inside an
 *                                |  <---------------------+    |  |      event)--> FAULT
 *                                |                             |  |
 *                                |     (every core done, an    |  +--(hw_system_check: the
 *                                |      event at that time)    |      queue is empty)--> DEADLOCK
 *                                |                             v
 *                                +----- hw_system_load ----- DONE
 *                                       (also from DEADLOCK)
 *
 * FAULT is final: events of the broken program may still be pending, so the chip takes no
 * further program (free the system). A deadlocked chip has nothing pending and takes a new
 * program like a done one. Messages are addressed to (chip, core), not to a program: one
 * sent to a chip between two programs waits in that core's mailbox for the next program's
 * comm.recv.
 *
 * Deadlock: the model cannot see the caller's events, so a chip counts as deadlocked when the
 * queue holds no event at all while it runs — call hw_system_check after evq_run /
 * evq_run_until returns; it marks every running chip DEADLOCK (the error names every waiting
 * unit with its pc, instruction and what it waits on) and calls on_end for each. A caller
 * that keeps events of its own in the queue learns of a deadlock only once those are gone.
 *
 * Groups (SPMD programs, docs/isa.md "Groups"): comm.* may name a peer relative to the
 * running chip, peer(gG[rank+1], core) and the like. The system's group table says which
 * chips form group gG around each chip: hw_system_opts.groups lists group instances, each
 * an id (the G of gG) and its members in rank order (an arithmetic progression or a list);
 * a chip belongs to at most one instance of each id, and its rank is its position there.
 * Without any instance of g0, g0 is every chip of the system, in order.
 *
 *   evq *q;  hw_system *sys;  np_err err = {0};
 *   if (evq_create(&q, &err) != NP_OK ||
 *       hw_system_create(&cfg, q, &(hw_system_opts){.n_chips = 2}, &sys, &err) != NP_OK ||
 *       hw_system_load(sys, 0, prog0, &err) != NP_OK || hw_system_load(sys, 1, prog1, &err) != NP_OK ||
 *       hw_system_start(sys, 0, &err) != NP_OK || hw_system_start(sys, 1, &err) != NP_OK ||
 *       evq_run(q, &err) != NP_OK)
 *       ...;
 *   hw_system_check(sys);
 *   if (hw_system_chip_state(sys, 0) != HW_CHIP_DONE) hw_system_chip_error(sys, 0, &err);
 *   ...
 *   hw_system_free(sys);
 *   evq_free(q);
 *
 * (tests/test_hw_system.c compiles and runs this example, and every transition above.)
 */
#ifndef NPUSIM_HW_SYSTEM_H
#define NPUSIM_HW_SYSTEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "arch.h"
#include "core.h"
#include "err.h"
#include "evq.h"
#include "isa_prog.h"
#include "stats.h"

typedef struct hw_system hw_system;

typedef enum hw_chip_state {
    HW_CHIP_EMPTY,    /* no program yet */
    HW_CHIP_LOADED,   /* a program loaded, not started */
    HW_CHIP_RUNNING,
    HW_CHIP_DONE,     /* every core of its program finished */
    HW_CHIP_DEADLOCK, /* running, and nothing left to happen (hw_system_check) */
    HW_CHIP_FAULT,    /* the program faulted (final) */
    HW_CHIP_STATE_COUNT
} hw_chip_state;

/* "empty", "loaded", "running", "done", "deadlock", "fault". */
extern const char *const hw_chip_state_names[HW_CHIP_STATE_COUNT];

/* Called when chip's program ends, with its new state: DONE (from an event at the time the
 * last core finished), FAULT (from inside the event that faulted) or DEADLOCK (from
 * hw_system_check). It may call evq_stop, query anything, and load and start programs on
 * chips that are DONE, DEADLOCK, LOADED or EMPTY (this one too, when DONE); it must not
 * free the system. */
typedef void (*hw_chip_end_fn)(void *ctx, hw_system *sys, uint32_t chip, hw_chip_state state);

/* How kernel symbol `kernel` of chip's program, which begins at instruction pc of core `core`
 * (its number), is launched (hw_system_opts.launch): the core waits core_kernel_launch_ps
 * before that instruction (the gap; with HW_LAUNCH_HOST, the launch latency too), as a GPU
 * stream waits between its kernels; HW_LAUNCH_NONE: not at all. */
typedef enum hw_launch { HW_LAUNCH_NONE, HW_LAUNCH_GAP, HW_LAUNCH_HOST } hw_launch;
typedef hw_launch (*hw_launch_fn)(void *ctx, uint32_t chip, uint32_t core, uint32_t pc,
                                  const char *kernel);

typedef struct hw_system_opts {
    uint32_t n_chips;          /* chips 0 .. n_chips-1 (<= system.chips); 0: system.chips */
    bool functional;           /* move real bytes and compute values; else timing only */
    const core_group *groups;  /* (optional) the group table (copied); see above */
    size_t n_groups;
    core_trace_fn trace;       /* (optional) called as each instruction completes */
    void *trace_ctx;
    bool trace_no_text;        /* the trace's core_trace_insn.text is NULL: no instruction is
                                  formatted (a caller that attributes instructions by pc) */
    hw_chip_end_fn on_end;     /* (optional) */
    void *on_end_ctx;
    stats *reg;                /* (optional) mesh and link counters register here as the
                                  meshes and the network are built */
    hw_launch_fn launch;       /* (optional) kernel launches: asked once per kernel symbol of
                                  each program loaded; without it (or with both keys 0) no
                                  kernel waits */
    void *launch_ctx;
} hw_system_opts;

/* A new system of opts->n_chips chips of cfg (which must outlive it) on queue q (the
 * caller's; the system never runs it), every chip EMPTY. opts may be NULL (timing mode,
 * every chip of the system). Errors: NP_ERR_RANGE (n_chips above system.chips, a bad
 * clock, a group id >= ISA_N_GROUPS, an empty group, a member outside the system),
 * NP_ERR_DUPLICATE (a chip twice in one group, or in two groups of one id), NP_ERR_NOMEM;
 * *out is NULL then. */
np_status hw_system_create(const arch_config *cfg, evq *q, const hw_system_opts *opts,
                           hw_system **out, np_err *err);

/* Frees the system; the queue may still hold its events, so free (or stop using) the queue
 * too unless every chip is EMPTY, LOADED, DONE or DEADLOCK. NULL is a no-op. */
void hw_system_free(hw_system *sys);

uint32_t hw_system_n_chips(const hw_system *sys);

/* The chip-to-chip network (noc/net.h: its links' bytes and bandwidths), or NULL until a
 * loaded program may talk to another chip. Owned by the system. */
struct net;
const struct net *hw_system_net(const hw_system *sys);

/* The latency of the chip-to-chip network's route from chip a to chip b (noc/net.h's
 * net_route), the time a message's last byte takes from a's links to b's; 0 without a network
 * or a route. */
uint64_t hw_system_route_latency_ps(hw_system *sys, uint32_t a, uint32_t b);

/* Loads program p (borrowed: it must stay valid until the chip gets another program or the
 * system is freed) on chip, which must be EMPTY, LOADED, DONE or DEADLOCK: the chip becomes
 * LOADED with fresh cores (scratchpads and accumulators zero), its HBM kept; in functional
 * mode p's data sections are then written into the HBM. Builds the chip's mesh (and, when p
 * may talk to another chip, the network) if not yet built. Errors: NP_ERR_RANGE (chip outside
 * the system, a core the chip does not have) and NP_ERR_INCONSISTENT (the chip is RUNNING or
 * FAULT), with nothing changed; NP_ERR_NOMEM or the network's own errors (net_create) while
 * building, after which the chip is EMPTY. */
np_status hw_system_load(hw_system *sys, uint32_t chip, const isa_program *p, np_err *err);

/* Starts chip's LOADED program now (evq_now): every core's front end begins fetching at the
 * next events the caller's queue dispatches. NP_ERR_RANGE, NP_ERR_INCONSISTENT (not LOADED),
 * NP_ERR_NOMEM (nothing started). */
np_status hw_system_start(hw_system *sys, uint32_t chip, np_err *err);

/* Call after evq_run / evq_run_until returns: when the queue holds no event, every RUNNING
 * chip becomes DEADLOCK (and on_end is called for it, in chip order). Also turns a chip whose
 * HBM model met an error inside an event into FAULT. */
void hw_system_check(hw_system *sys);

hw_chip_state hw_system_chip_state(const hw_system *sys, uint32_t chip); /* EMPTY if outside */
/* Checks the invariants of every running, done or deadlocked chip's cores (front ends, unit
 * queues, lanes, accounting; of an ended program: all drained): NP_OK or NP_ERR_INTERNAL
 * naming the core and the invariant (hw-model/core_verify.c). A chip's program that ends
 * is checked this way before its end is reported when np_verify_on() (base/verify.h): a
 * broken invariant makes it a fault. */
np_status hw_system_verify(const hw_system *sys, np_err *err);

/* Why chip is FAULT or DEADLOCK: copies the error into *err and returns its status; NP_OK
 * for any other state. */
np_status hw_system_chip_error(const hw_system *sys, uint32_t chip, np_err *err);

/* What a chip or one of its cores is doing now. */
typedef struct hw_chip_info {
    hw_chip_state state;
    uint64_t t_start_ps;  /* when its program started (0 before) */
    uint64_t t_end_ps;    /* when it ended (DONE: the last core finished; FAULT, DEADLOCK: the
                             fault, the last activity); 0 while running */
    uint64_t cycles;      /* core cycles from start to end, or to now while running */
    uint32_t n_cores;     /* cores of its program */
    uint32_t cores_done;
    uint64_t programs;    /* programs loaded on it so far */
} hw_chip_info;
void hw_system_chip_info(const hw_system *sys, uint32_t chip, hw_chip_info *out);

/* Core `core` (its number on the chip) of chip: EMPTY when it runs no part of the chip's
 * program; else the chip's state, except DONE for a core that has finished while others run. */
hw_chip_state hw_system_core_state(const hw_system *sys, uint32_t chip, uint32_t core);

#define HW_ALL_CHIPS UINT32_MAX

/* The report so far (core.h) of chip's program, or with HW_ALL_CHIPS of every chip that has
 * one (unit names carry the chip when the system has several): cycles from the program's
 * start (the earliest start) to its end, or to now while it runs; units' busy and stall
 * counted up to now. With reg non-NULL, each unit's figures are registered in it (once per
 * registry: names must not repeat). NP_ERR_RANGE (a chip outside the system or without a
 * program), NP_ERR_NOMEM; *out is NULL then. Free with core_report_free. */
np_status hw_system_report(hw_system *sys, uint32_t chip, stats *reg, core_report **out,
                           np_err *err);

/* Host access to chip's HBM [addr, addr + n) in functional mode, at any time (the bytes the
 * program sees are those at the time its instructions run). NP_ERR_RANGE (outside the HBM or
 * the system), NP_ERR_INCONSISTENT (timing mode: there are no bytes), NP_ERR_NOMEM. */
np_status hw_system_hbm_write(hw_system *sys, uint32_t chip, uint64_t addr, const void *buf,
                              uint64_t n, np_err *err);
np_status hw_system_hbm_read(hw_system *sys, uint32_t chip, uint64_t addr, void *buf,
                             uint64_t n, np_err *err);

#endif
