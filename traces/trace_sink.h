/* trace_sink.h — what a simulated system tells a trace: the sink interface.
 *
 * A model (or the code that drives it) describes what happened in its own terms — an
 * instruction on a unit of a core, a kernel or task span, a message sent or received, bytes
 * moved over a memory or a link, an occupancy level — and never thinks of processes, threads,
 * flow ids or file formats. A sink is a table of function pointers and a context (like
 * ggml's backend interface): trace_layout.h implements it onto the Chrome/Perfetto writer
 * (docs/traces.md), a test may implement it to record calls. Every entry is optional: a NULL
 * entry drops that kind of event.
 *
 * Times are picoseconds on the run's clock (the caller adds any offset). Strings and argument
 * arrays are only read during the call. */
#ifndef NPUSIM_TRACE_SINK_H
#define NPUSIM_TRACE_SINK_H

#include <stddef.h>
#include <stdint.h>

#include "trace.h"

#define TRACE_NO_CORE UINT32_MAX /* a span of the chip as a whole (layers, tasks) */
#define TRACE_UNITS_MAX 6        /* unit indices 0..5 of a core */
#define TRACE_LANES_MAX 32       /* lanes 0..31 of a unit (DMA copies in flight) */

/* A message an instruction sent or received (matched in order per (sender, receiver, tag):
 * the n-th receive of a channel takes its n-th send). */
typedef enum trace_msg_kind {
    TRACE_MSG_NONE,
    TRACE_MSG_SEND,
    TRACE_MSG_RECV,
} trace_msg_kind;

/* An instruction (or a unit's task) that ran on one unit of one core. core TRACE_NO_CORE: a
 * unit of the chip as a whole (the run engine's compute engine, the chip's matrix units
 * summed over its cores, ...): thread "chip.<unit_name>", kept at every trace level. */
typedef struct trace_unit_slice {
    uint32_t chip, core;
    unsigned unit;      /* 0 .. TRACE_UNITS_MAX-1: its thread's place */
    const char *unit_name; /* "dma", "mxu", ...: thread "core<N>.<unit_name>" and the category */
    unsigned lane;      /* 0 .. TRACE_LANES_MAX-1: which of the unit's parallel lanes */
    const char *name;   /* the slice's name (a mnemonic) */
    const char *cat;    /* (optional) defaults to unit_name */
    uint64_t start_ps, end_ps;
    const trace_arg *args;
    size_t n_args;
    trace_msg_kind msg; /* a message sent to / received from (peer_chip, peer_core) */
    uint32_t peer_chip, peer_core;
    uint64_t tag;
} trace_unit_slice;

/* A span on a named track of a chip: a kernel, a layer, a task of the run. Overlapping spans
 * of one track go to lanes of it ("core0 kernels", "core0 kernels[1]", ...). */
typedef struct trace_span {
    uint32_t chip, core; /* core TRACE_NO_CORE: the chip's own track */
    const char *track;   /* "kernels", "layers", "tasks", ... (at most 8 distinct names) */
    const char *name, *cat;
    uint64_t start_ps, end_ps;
    const trace_arg *args;
    size_t n_args;
    uint64_t group;      /* non-zero: one rank's part of a collective: the spans of a group
                            (on group_size chips) are joined by one flow in the order given */
    uint32_t group_size;
} trace_span;

/* Bytes moved from start_ps to end_ps, counted into a bandwidth counter of the chip
 * ("hbm.read", "hbm.write", "c2c.send", a link name...), in GB/s. */
typedef struct trace_transfer {
    uint32_t chip;       /* TRACE_SYSTEM_CHIP: the system process (network links) */
    const char *counter;
    uint64_t bytes, start_ps, end_ps;
} trace_transfer;

#define TRACE_SYSTEM_CHIP UINT32_MAX

/* Something that occupied a chip-to-chip link (or a switch port) of the network. */
typedef struct trace_link_slice {
    uint32_t chip;       /* the chip whose port the link leaves: a thread "link <name>" of
                            that chip; TRACE_SYSTEM_CHIP (switch ports, the network as a
                            whole): a thread of the "system" process */
    uint32_t link;       /* the link's index in the network (its thread's place) */
    const char *link_name, *name;
    uint64_t start_ps, end_ps, bytes;
} trace_link_slice;

typedef struct trace_sink_ops {
    void (*unit_slice)(void *ctx, const trace_unit_slice *s);
    void (*span)(void *ctx, const trace_span *s);
    void (*transfer)(void *ctx, const trace_transfer *t);
    /* counter of chip (or TRACE_SYSTEM_CHIP) takes value from t_ps on (occupancy in bytes,
     * queue depths...); calls for one counter come in time order */
    void (*level)(void *ctx, uint32_t chip, const char *counter, uint64_t t_ps, double value);
    void (*link_slice)(void *ctx, const trace_link_slice *s);
    /* the run got to end_ps: what is still accumulated (bandwidth counters) goes out */
    void (*run_end)(void *ctx, uint64_t end_ps);
} trace_sink_ops;

typedef struct trace_sink {
    const trace_sink_ops *ops; /* NULL: a sink that drops everything */
    void *ctx;
} trace_sink;

#endif
