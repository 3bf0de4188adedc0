/* cli_trace.h — the commands' traces of core-model runs (`npusim sim --trace`, `npusim layer
 * --trace`, `npusim collective --isa --trace`): hw-model's core_trace_insn events and kernel
 * reports passed to the trace layout (traces/trace_layout.h, docs/traces.md), which owns
 * processes, threads, flows and counters.
 *
 * Per instruction a unit runs (DMA, MXU, VPU, COMM; the front end's control instructions and
 * sem.signal have no unit time, hence no slice) and per semaphore wait that waited: a slice
 * on its unit's thread with args {pc, insn, kernel} (DMA and COMM:
 * bytes too); a comm.send and the comm.recv that takes its message are joined by a flow; a
 * DMA's HBM bytes go to the chip's "hbm.read" / "hbm.write" counters, a comm.send's to
 * "c2c.send" (another chip) or "noc.send" (a core of its own chip), in GB/s; a DMA into the
 * scratchpad to the core's "coreN.spad" level (bytes): the extent of the scratchpad the
 * running kernel's DMA has filled, from its lowest to its highest byte written, back to 0
 * when the core's kernel changes and at the run's end (npusim sim adds each chip's "hbm.used": its program's data
 * sections, what HBM holds — the programs allocate nothing while they run). Per kernel: a
 * span on "coreN kernels" with args {cycles, flops, bytes} (the MXU's multiply-accumulates
 * x 2, from mxu.mm's rows and the last mxu.load's tile; the DMA's HBM bytes); a kernel that sent or received messages is a
 * collective: its spans on every chip are joined by a flow. Every time is shifted by
 * offset_ps, so several runs can follow each other in one trace (npusim layer: one run per
 * layer).
 *
 * Options of the commands that write traces: CLI_TRACE_LONGOPTS in their getopt table,
 * cli_trace_flag() for those options, CLI_TRACE_USAGE in their usage text, cli_trace_need_path()
 * right after the options, then cli_trace_open_opts(). */
#ifndef NPUSIM_CLI_TRACE_H
#define NPUSIM_CLI_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "arch.h"
#include "core.h"
#include "err.h"
#include "net.h"
#include "trace_layout.h"
#include "trace_map.h"
#include "trace_read.h"

typedef struct cli_trace {
    trace_layout *w;    /* NULL: no trace */
    trace_layout_opts opts; /* as opened (the budget, for the warning) */
    uint64_t offset_ps; /* added to every time */
    trace_sink sink;
    char **comm_kernels; /* names of the kernels that ran comm.* instructions */
    size_t n_comm_kernels, cap_comm_kernels;
    const char *last_comm_kernel; /* the last name found there (a fast path) */
    uint64_t runs;       /* cli_trace_kernels calls: each run's collectives are its own */
    struct cli_trace_work *work; /* per (chip, core, kernel) of this run: FLOPs, HBM bytes */
    size_t n_work, cap_work;
    u64map work_of;      /* (chip, core, kernel name) -> index into work, probed */
    u64map mxu_tile;     /* (chip << 32 | core) + 1 -> the last mxu.load's k << 32 | n */
    u64map spad_of;      /* (chip << 32 | core) + 1 -> index + 1 into spad */
    struct cli_trace_spad *spad; /* per core: the scratchpad its kernel's DMA filled */
    size_t n_spad, cap_spad;
    evq *route_q;        /* cli_trace_set_arch: the chip network, for routes only */
    net *route_net;
    char (*link_name)[48];
    uint32_t n_links;
    bool oom;
} cli_trace;

/* getopt values and table entries of --trace-chips LIST and --trace-level kernel|insn. */
#define CLI_TRACE_OPT_CHIPS 0x7401
#define CLI_TRACE_OPT_LEVEL 0x7402
#define CLI_TRACE_OPT_MAX_BYTES 0x7403
#define CLI_TRACE_LONGOPTS                                                      \
    {"trace-chips", required_argument, NULL, CLI_TRACE_OPT_CHIPS},             \
    {"trace-level", required_argument, NULL, CLI_TRACE_OPT_LEVEL},             \
    {"trace-max-bytes", required_argument, NULL, CLI_TRACE_OPT_MAX_BYTES}
#define CLI_TRACE_USAGE_AT(pad, indent)                                               \
    "  --trace-chips L" pad "keep only these chips in the trace (0-3,8,12-15)\n"     \
    "  --trace-level K" pad "kernel: kernel spans, counters and collective flows;\n" \
    indent "insn (default): every instruction and message too\n"                     \
    "  --trace-max-bytes S" pad "cut the trace when its file reaches S (e.g. 200M;\n"   \
    indent "default 1G, 0: no limit), with a warning\n"
/* ... for a usage text whose descriptions start at column 18 (CLI_TRACE_USAGE) or 20 */
#define CLI_TRACE_USAGE CLI_TRACE_USAGE_AT(" ", "                  ")
#define CLI_TRACE_USAGE_20 CLI_TRACE_USAGE_AT("   ", "                    ")

/* Takes getopt's value c and its argument for the two options above into o (o zeroed
 * first: insn level, every chip), and the first flag given into o->flag. NP_ERR_USAGE naming
 * the flag; NP_ERR_NOMEM. Free o's chip list with trace_chips_free. */
np_status cli_trace_flag(trace_layout_opts *o, int c, const char *arg, np_err *err);

/* The warning for a trace cut at its budget ("" when nothing was left out), into buf. */
const char *cli_trace_cut_warning(uint64_t left_out, const trace_layout_opts *o, char *buf,
                                  size_t n);

/* After the options: NP_ERR_USAGE naming the flag ("--trace-level needs --trace FILE") when
 * o->flag was given without a trace path, whatever its value; NP_OK otherwise. */
np_status cli_trace_need_path(const char *trace_path, const trace_layout_opts *o, np_err *err);

/* Opens path (gzip when it ends in .gz) at insn level for every chip; *t zeroed first. */
np_status cli_trace_open(cli_trace *t, const char *path, np_err *err);

/* The same with options (NULL: the defaults); o's chip list is copied. */
np_status cli_trace_open_opts(cli_trace *t, const char *path, const trace_layout_opts *o,
                              np_err *err);

/* The chip network of cfg (system.*, as the core model builds it), so that each comm.send
 * to another chip also counts its bytes into a bandwidth counter per link of its route on the
 * system process (named as noc/ names links). NP_ERR_NOMEM and the network's errors. */
np_status cli_trace_set_arch(cli_trace *t, const arch_config *cfg, np_err *err);

/* core_sim_opts.trace: one instruction (ctx: the cli_trace). */
void cli_trace_insn(void *ctx, const core_trace_insn *in);

/* The kernels of a finished run (r may be NULL), then the end of the run (the counters of
 * the run go out). */
void cli_trace_kernels(cli_trace *t, const core_report *r);

/* A level (occupancy) sample of chip's counter at t_ps (+ offset); samples of one counter in
 * time order. */
void cli_trace_level(cli_trace *t, uint32_t chip, const char *counter, uint64_t t_ps,
                     double value);

/* A span of chip pid on its own track named `thread` (tid is not used: the layout places
 * tracks; kept for the callers). */
void cli_trace_span(cli_trace *t, uint32_t pid, uint32_t tid, const char *thread,
                    const char *name, const char *cat, uint64_t start_ps, uint64_t dur_ps);

/* Closes the trace (see trace_layout_close) and frees the rest. */
np_status cli_trace_close(cli_trace *t, np_err *err);

/* The trace reader's limits as options of the commands that read traces (trace check|stats,
 * report): CLI_TRACE_READ_LONGOPTS in their getopt table, cli_trace_read_flag() for them,
 * CLI_TRACE_READ_USAGE in their usage text. */
enum { CLI_OPT_MAX_EVENTS = 0x7e01, CLI_OPT_MAX_EVENT_SIZE };
#define CLI_TRACE_READ_LONGOPTS                                                                \
    {"max-events", required_argument, NULL, CLI_OPT_MAX_EVENTS},                               \
    {"max-event-size", required_argument, NULL, CLI_OPT_MAX_EVENT_SIZE}
#define CLI_TRACE_READ_USAGE                                                                   \
    "  --max-events N    read at most N events of a trace (default 67,108,864)\n"              \
    "  --max-event-size S  the longest event of a trace, e.g. 256M (default 64M)\n"
bool cli_trace_read_is_flag(int c);
np_status cli_trace_read_flag(trace_read_opts *o, int c, const char *arg, np_err *err);

#endif
