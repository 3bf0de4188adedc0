/* core.h — NPU cores executing ISA programs, one program per chip, in timing mode and (with
 * core_sim_opts.functional, core_func.h) functional mode.
 *
 * Each core is a decoupled access/execute machine (docs/isa.md): a scalar front end fetches
 * in program order, one instruction per core cycle, runs registers and loops itself, resolves
 * register + offset addresses and dispatches everything else to one of four in-order queues
 * (DMA, MXU, VPU, COMM), each CORE_QUEUE_DEPTH entries deep. The MXU, VPU and COMM queues
 * execute their head instruction to completion, then the next; the DMA queue keeps up to
 * core.dma_outstanding copies in flight (started in order, retired in order; a semaphore
 * instruction in it waits for every earlier copy). Queues order against each other through
 * semaphores and, with core.scoreboard, an operand scoreboard: an instruction does not start
 * while an older one of its core that overlaps its operands (RAW, WAR, WAW) has not
 * completed. An instruction's parts run together and it retires when the last ends: its
 * compute time (core_cost.h), its scratchpad bytes through the core's port pool (shared by
 * the units; an hbm.h server, max-min fair) and a DMA's HBM bytes — through the chip's HBM,
 * one hbm.h server shared by every core, or with chip.hbm_controllers > 0 as accesses over
 * the mesh to the controllers that own them (hbm_mesh.h: max-min fair on the controllers'
 * bandwidth and ports and the mesh's links). See docs/hw-model.md.
 *
 * Chips: a run has n chips, program i on chip i (core_sim_run_chips; n <= system.chips), all
 * on one event queue; each chip has its own HBM, cores and mesh. The functions here run one
 * whole run on a queue of their own; hw_system.h is the same model steppable on a queue the
 * caller owns (program after program on a chip, queries while it runs).
 *
 * COMM: when a program has comm.* instructions (or a barrier among cores, or the chip has
 * HBM controllers on the mesh) its chip gets one noc/mesh.h mesh from the arch config (core
 * i at router i), clocked at chip.noc_clock_ghz, flit by flit or as flows (chip.noc_mode);
 * when a comm.* may name another chip the run gets the chip-to-chip network (noc/net.h,
 * system.* keys). A peer is peer(chip, core), or a rank in a group of the running chip
 * (peer(g0[rank+1], core): SPMD programs; core_sim_opts.groups, docs/isa.md "Groups"),
 * resolved at dispatch. comm.send to a core of the same chip is one mesh message of
 * ceil(bytes / noc_flit_bytes) flits (cut into packets of at most noc_max_packet_flits), to
 * another chip one transfer over the topology's route (links shared max-min fairly); it
 * retires when its last byte has left. comm.recv takes the oldest message from that (chip,
 * core) with that tag (waiting in the receiving core's mailbox if it came first, else
 * waiting for it) and, with a reduction, spends elements / (vector_lanes x ops_per_lane)
 * cycles more. Functional
 * mode moves (and reduces) the bytes.
 *
 * Front end, per core:                        Queue, per unit:
 *
 *   RUN --(queue full)--> WAIT_QUEUE            IDLE --(head is ready)--> BUSY --> IDLE
 *    |  <--(that queue retires)--               IDLE --(sem.wait, sem < n)--> WAIT_SEM
 *    |--(fence/barrier)--> FENCE --> (BARRIER)  WAIT_SEM --(signal makes sem >= n)--> IDLE
 *    |--(halt / end of text)--> HALTED --(every queue empty)--> DONE
 *                                               IDLE --(an older insn overlaps)--> WAIT_OPERAND
 *                                               WAIT_OPERAND --(it completes)--> IDLE
 *
 * A run ends when the event queue is empty. If a core is then not DONE, nothing can ever
 * happen again: NP_ERR_DEADLOCK, naming every waiting unit with its pc, its instruction and
 * what it waits on (the semaphore and its value, the older instruction the scoreboard waits
 * for, a full queue, a fence, a barrier, the message a comm.recv waits for). A
 * dispatch whose footprint leaves its address space (scratchpad, accumulator, HBM) is
 * NP_ERR_SIM_FAULT naming core, unit, pc, instruction and the address range.
 *
 *   core_report *r;
 *   if (core_sim_run(&cfg, prog, NULL, &r, &err) != NP_OK) return err.status;
 *   printf("%llu cycles\n", (unsigned long long)r->total_cycles);
 *   core_report_free(r);
 */
#ifndef NPUSIM_CORE_H
#define NPUSIM_CORE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "arch.h"
#include "err.h"
#include "isa_prog.h"
#include "stats.h"

#define CORE_QUEUE_DEPTH 16 /* entries of each unit's instruction queue */

/* One unit of one core ("core0.dma", ..., "core0.ctrl" for the front end; with several chips
 * "chip1.core0.dma"). */
typedef struct core_unit_report {
    char name[32];         /* for people: "core3.mxu", "chip1.core3.mxu" (find units by kind,
                              chip and core, never by name or position) */
    isa_unit kind;         /* ISA_UNIT_DMA, _MXU, _VPU, _COMM (its queue) or _CTRL (the front
                              end) */
    uint32_t chip, core;
    uint64_t busy_cycles;  /* executing an instruction as long as it would take alone
                              (front end: issuing one) */
    uint64_t stall_cycles; /* head instruction blocked on a semaphore, or running longer than
                              alone because other units or cores took scratchpad-port or HBM
                              bandwidth or its rows hit few banks (front end: a full queue, a
                              fence or a barrier) */
    uint64_t idle_cycles;  /* total_cycles - busy - stall */
    uint64_t insns;        /* instructions retired */
    uint64_t bytes;        /* bytes the unit moved (read + written) */
} core_unit_report;

/* One kernel symbol: from its first instruction's dispatch to its last one's retirement. */
typedef struct core_kernel_report {
    char *name;
    uint32_t chip, core;
    uint64_t cycles;
    uint64_t start_ps, end_ps; /* that dispatch and that retirement (0, 0: never ran) */
    uint64_t busy_cycles[ISA_N_QUEUES]; /* of its core's DMA, MXU, VPU and COMM units' busy
                              cycles, those its instructions made: a unit's busy time while
                              several instructions are in flight goes to the one whose alone
                              end is the latest (the kernel's own busy cycles when no other
                              kernel's instruction runs beside it on the core; a report taken
                              while the chip runs leaves out the time not yet accounted) */
} core_kernel_report;

/* One HBM controller on the mesh (chip.hbm_controllers > 0), over the report's programs. */
typedef struct core_hbm_ctrl_report {
    char name[32];          /* "hbm.ctrl0", or "chip1.hbm.ctrl0" with several chips */
    uint32_t chip, ctrl, router;
    uint64_t read_bytes, write_bytes; /* HBM bytes it served (whole bursts) */
    uint64_t limited_bytes; /* of the bytes it served, those moved while its bandwidth or its
                               port fixed the rate (the DMA waited for the controller) */
    double util_pct;        /* (read + write) / (its bandwidth x total_ps) */
} core_hbm_ctrl_report;

/* The chip's shared on-chip level (chip.l2_bytes > 0; docs/hw-model.md "The L2"), over the
 * report's programs, summed over chips. A cache counts sectors (chip.l2_sector_bytes each); a
 * global buffer (l2_mode buffer) only the bytes. */
typedef struct core_l2_report {
    bool present, buffer;
    uint64_t read_bytes, write_bytes;   /* the DMA's bytes to and from it, as asked */
    uint64_t moved_bytes;               /* whole sectors (bursts for a buffer) it moved */
    uint64_t read_hits, read_misses;    /* sectors read: found valid, fetched from the HBM */
    uint64_t write_hits, write_misses;  /* sectors written: line present, line allocated */
    uint64_t pending_hits;              /* read hits that waited for another copy's fill */
    uint64_t fill_bytes;                /* read from the HBM by misses */
    uint64_t writeback_bytes;           /* written back to the HBM (dirty lines evicted) */
    uint64_t dirty_bytes;               /* dirty at the end, not yet written back */
    double hit_pct;                     /* read hits / sectors read (0 with none) */
    double util_pct;                    /* moved / (chip.l2_gb_per_s x total_ps x chips) */
} core_l2_report;

typedef struct core_report {
    uint64_t total_cycles;     /* core cycles until the last core (of any chip) finished */
    uint64_t total_ps;
    uint32_t n_chips;
    core_unit_report *units;   /* per core its queues' units and its front end, chip by chip
                                  (each with its kind, chip and core) */
    uint32_t n_units;
    core_kernel_report *kernels;
    uint32_t n_kernels;
    uint64_t hbm_read_bytes, hbm_write_bytes;
    uint64_t sram_read_bytes, sram_write_bytes; /* scratchpad */
    uint64_t acc_read_bytes, acc_write_bytes;   /* accumulator SRAM */
    uint64_t c2c_bytes;        /* sent from one chip to another (all chips: sums) */
    /* the compute and mesh actions, for energy (energy.h): mxu.mm multiply-accumulates by
     * input dtype (m x n x k of each), vpu.* element operations (rows x cols of each) and
     * comm.recv reductions' elements, and flits through the routers of the chips' meshes
     * (a flit over H links counts H + 1: core_noc_flit_hops) */
    uint64_t macs[ISA_DTYPE_COUNT];
    uint64_t vector_ops;
    uint64_t noc_flit_hops;
    /* HBM controllers on the mesh (chip.hbm_controllers > 0; else n_hbm_ctrls = 0): the
     * DMA's HBM bytes (whole bursts) that crossed the mesh, split by what set their rate —
     * a controller's bandwidth, a controller's port, a mesh link (router output, ejection or
     * injection channel), or the copy's own limit (the channels it touches, the scratchpad
     * ports) — and the mesh link that limited the most. Sums over chips. */
    core_hbm_ctrl_report *hbm_ctrls;
    uint32_t n_hbm_ctrls;
    uint64_t hbm_mesh_bytes, hbm_limited_by_ctrl, hbm_limited_by_ctrl_port,
        hbm_limited_by_mesh, hbm_limited_by_copy;
    char hbm_busiest_link[48]; /* "r1.xplus" ("chip1.r1.xplus"), "" when no link limited */
    uint64_t hbm_busiest_link_bytes;
    /* With an L2 the HBM traffic above is what reached the HBM (misses' fills, write-backs,
     * copies that do not go through the L2); what the DMA asked of the L2 is here. */
    core_l2_report l2;
} core_report;

/* Runs program p (already checked against cfg by the loader) on the chip of cfg in timing
 * mode until every core has finished. With reg non-NULL, each unit's busy/stall/idle cycles,
 * instructions and bytes are registered in it under "core<N>.<unit>". On success *out holds
 * the report (free with core_report_free). Errors: NP_ERR_DEADLOCK, NP_ERR_SIM_FAULT (an
 * address outside its space, mxu.mm without mxu.load, a comm.* to a chip without a program,
 * to a core that runs none or to a core without a router, a peer by rank outside its group or
 * in a group the chip is not in), NP_ERR_RANGE (bad clock),
 * NP_ERR_NOMEM; *out is NULL then. */
np_status core_sim_run(const arch_config *cfg, const isa_program *p, stats *reg,
                       core_report **out, np_err *err);

/* A host buffer copied into HBM before a functional run or out of it after one. */
typedef struct core_hbm_io {
    uint64_t addr; /* HBM byte address */
    void *buf;     /* n bytes (inputs: read; outputs: written) */
    uint64_t n;
    uint32_t chip; /* whose HBM (0 unless the run has several chips) */
} core_hbm_io;

/* One instruction as it ran, for a trace (core_sim_opts.trace). */
typedef struct core_trace_insn {
    uint32_t chip, core;
    isa_unit unit;        /* DMA, MXU, VPU or COMM */
    unsigned lane;        /* DMA: which of the copies in flight it was (0 .. dma_outstanding-1,
                             the lowest free when it started); else 0 */
    uint32_t pc;
    const char *text;     /* the instruction, addresses resolved (valid during the call) */
    const char *kernel;   /* its kernel symbol, or NULL */
    uint64_t start_ps, end_ps; /* started .. completed; for a sem.wait that had to wait: the
                                  wait */
    /* a DMA copy through the chip's L2 (chip.l2_bytes > 0; else l2 false): the bytes it moved
     * through the L2 (whole sectors or bursts), and what reached the HBM for it (its fill and
     * the ranges that bypass the L2; the dirty lines it evicted) */
    bool l2;
    uint64_t l2_bytes, hbm_read_bytes, hbm_write_bytes;
} core_trace_insn;

typedef void (*core_trace_fn)(void *ctx, const core_trace_insn *t);

/* One instance of group g<id> of an SPMD run (docs/isa.md "Groups"): its member chips in
 * rank order — chips[0 .. n) when chips is not NULL, else the arithmetic progression first,
 * first + stride, ..., first + (n - 1) x stride. The chip of rank r of a running chip's g<id>
 * is what peer(g<id>[...], core) names. */
typedef struct core_group {
    unsigned id;           /* 0 .. ISA_N_GROUPS-1 */
    uint32_t n;            /* members, at least 1 */
    uint32_t first, stride;
    const uint32_t *chips; /* (optional) the members, listed */
} core_group;

typedef struct core_sim_opts {
    bool functional; /* move real bytes and compute values (core_func.h); else timing only */
    const core_hbm_io *inputs;
    size_t n_inputs;
    core_hbm_io *outputs; /* filled after a successful functional run */
    size_t n_outputs;
    core_trace_fn trace;  /* (optional) called as each instruction completes */
    void *trace_ctx;
    uint64_t max_cycles;  /* stop a run still going after this many core cycles
                             (NP_ERR_SIM_FAULT); 0: no limit */
    const core_group *groups; /* (optional) the group table of relative comm.* peers (each
                                 chip in at most one group of each id); without a g0, g0 is
                                 every chip of the run in order */
    size_t n_groups;
} core_sim_opts;

/* core_sim_run with options (NULL: timing mode). In functional mode the program's .data is
 * loaded into HBM, then the inputs; after the run the outputs are read back. Timing is the
 * same in both modes. Adds NP_ERR_RANGE for an input or output outside the HBM. */
np_status core_sim_run_opts(const arch_config *cfg, const isa_program *p,
                            const core_sim_opts *opts, stats *reg, core_report **out,
                            np_err *err);

/* Runs progs[i] on chip i, i < n_chips (1 <= n_chips <= system.chips), on one event queue
 * until every core of every chip has finished; otherwise as core_sim_run_opts (inputs and
 * outputs name their chip). A comm.* may name any core of any chip of the run. Unit names
 * in the report carry the chip when n_chips > 1. Adds NP_ERR_RANGE for more programs than
 * the system has chips or an I/O buffer on a chip outside the run, and the group table's
 * errors (hw_system_create). The first fault stops the run. */
np_status core_sim_run_chips(const arch_config *cfg, const isa_program *const *progs,
                             uint32_t n_chips, const core_sim_opts *opts, stats *reg,
                             core_report **out, np_err *err);

void core_report_free(core_report *r);

/* The unit of kind on (chip, core) in r, or NULL when r has none (the way to find a unit: by
 * kind, chip and core, not by its name or its position). */
const core_unit_report *core_report_unit(const core_report *r, uint32_t chip, uint32_t core,
                                         isa_unit kind);

/* Kernel launches (chip.kernel_gap_ns, chip.kernel_launch_ns; docs/run.md, "Kernel
 * launches"): how long a kernel waits on its chip's stream before it starts, after the later
 * of the previous kernel's end and what it waits for — the gap, plus the launch latency for a
 * kernel the host launches on an idle stream (host_launch: the first of a step) — in ps,
 * rounded to the nearest. 0 with both keys 0 (the default). */
uint64_t core_kernel_launch_ps(const arch_config *cfg, bool host_launch);

/* {"total_cycles", "total_ps", "units": [{"name", "busy_cycles", "stall_cycles",
 *  "idle_cycles", "insns", "bytes"}], "kernels": [{"name", "chip", "core", "cycles",
 *  "busy_cycles": {"dma", "mxu", "vpu", "comm"}}],
 *  "traffic": {"hbm_read_bytes", ...}, with controllers on the mesh "hbm_mesh": {...}, and
 *  with an L2 "l2": {"mode", "read_bytes", ..., "hit_pct", "util_pct"}} —
 * names documented in docs/hw-model.md. NULL when out of memory. */
json_t *core_report_json(const core_report *r);

/* The same as a human-readable table. */
void core_report_print(const core_report *r, FILE *out);

#endif
