/* trace_layout.h — npusim's trace layout: a trace_sink (trace_sink.h) that writes a
 * Chrome/Perfetto trace through the streaming writer (trace.h). docs/traces.md is the
 * reference of what it writes; in short:
 *
 *   process "chip N" (pid N, sorted by N)          process "system" (pid TRACE_PID_SYSTEM)
 *     thread coreC.<unit>[lane]   tid 256C + 32u + lane      thread <link name>  tid = link
 *     thread chip.<unit>[lane]    tid 0xFFFE00 + 32u + lane   (a chip's own units)
 *     thread coreC <track>[lane]  tid 256C + 192 + 8k + lane  (k: the track's index)
 *     thread <track>[lane]        tid 0xFFFF00 + 16k + lane   (a chip's own spans)
 *     thread link <name>          tid 0xFE0000 + link         (the chip's outgoing links)
 *     counters <name> (GB/s or the level's unit)
 *
 * Instructions are slices named by their mnemonic; a message's send and its receive are
 * joined by a flow ("msg"); the spans of one collective on every rank by another ("coll").
 * Bandwidth counters are accumulated in bins (at most TRACE_COUNTER_BINS per counter,
 * coarsened by two when a run outgrows them) and written at run_end; each bin's value is
 * the bytes moved in it over its width, in GB/s.
 *
 * Memory: what is named so far (processes, threads), one counter per message channel, the
 * open collectives and the counters' bins — nothing grows with the number of events. */
#ifndef NPUSIM_TRACE_LAYOUT_H
#define NPUSIM_TRACE_LAYOUT_H

#include <stdbool.h>
#include <stdint.h>

#include "err.h"
#include "trace.h"
#include "trace_sink.h"

#define TRACE_PID_SYSTEM 2000000000u
#define TRACE_COUNTER_BINS 512

/* --trace-level: kernel keeps spans (kernels, layers, tasks), counters and collective
 * flows; insn adds every instruction's slice and every message's flow. */
typedef enum trace_level {
    TRACE_LEVEL_KERNEL,
    TRACE_LEVEL_INSN,
} trace_level;

/* --trace-chips: the chips a trace keeps (a bit per chip). */
typedef struct trace_chips {
    uint64_t *bits; /* NULL: every chip */
    uint32_t n_bits;
} trace_chips;

/* The default budget of a trace file (trace.h's trace_set_max_bytes): a long run's trace
 * grows by megabytes a second; past this the trace is cut and the command warns. */
#define TRACE_LAYOUT_MAX_BYTES (1ull << 30)

typedef struct trace_layout_opts {
    trace_level level;
    trace_chips chips; /* borrowed; the layout copies it */
    uint64_t max_bytes; /* the file's budget on disk: 0: TRACE_LAYOUT_MAX_BYTES; UINT64_MAX:
                           none */
    const char *flag;  /* the first command-line option that set these (sim/cli_trace.h's
                          cli_trace_flag), NULL: none; the layout ignores it */
} trace_layout_opts;

typedef struct trace_layout trace_layout;


/* Parses a LIST of chips: comma-separated numbers and ranges A-B ("0-3,8,12-15"), each
 * < 2^20. NP_ERR_USAGE naming the flag `opt` and the bad part; NP_ERR_NOMEM. */
np_status trace_chips_parse(const char *opt, const char *list, trace_chips *out, np_err *err);
bool trace_chips_has(const trace_chips *c, uint32_t chip);
/* NP_OK when every chip c selects is one of a system of n chips (0 .. n-1; no selection: all);
 * NP_ERR_USAGE naming flag opt, the chip and the system's size otherwise (a trace of a chip
 * that does not exist would be empty). */
np_status trace_chips_check(const trace_chips *c, uint64_t n, const char *opt, np_err *err);
void trace_chips_free(trace_chips *c);

/* Parses "kernel" or "insn" (NP_ERR_USAGE naming opt and the known levels). */
np_status trace_level_parse(const char *opt, const char *text, trace_level *out, np_err *err);

/* Opens path (gzip when it ends in .gz) with options (NULL: insn level, every chip).
 * NP_ERR_IO naming the file, NP_ERR_NOMEM. */
np_status trace_layout_open(const char *path, const trace_layout_opts *opts, trace_layout **out,
                            np_err *err);

/* The sink that writes into lay (valid until trace_layout_close). */
trace_sink trace_layout_sink(trace_layout *lay);

/* The writer underneath (for its event and byte counts). */
const trace_writer *trace_layout_writer(const trace_layout *lay);

/* trace_layout_close, telling *left_out (may be NULL) how many events the file's budget left
 * out in all (trace_dropped: those the close itself writes, such as counter bins, too). */
np_status trace_layout_close_counted(trace_layout *l, uint64_t *left_out, np_err *err);
/* Writes what is left (run_end at the latest time seen), closes the file and frees lay
 * (NULL is fine). NP_ERR_IO when a write failed, NP_ERR_NOMEM when a table could not grow
 * (events were dropped then). */
np_status trace_layout_close(trace_layout *lay, np_err *err);

#endif
