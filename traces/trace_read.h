/* trace_read.h — a streaming reader of Chrome/Perfetto JSON traces (plain or gzip: read
 * through zlib's gzread, which passes plain files through).
 *
 * Accepts both forms of the format: {"traceEvents": [...], other keys...} and a bare array
 * [...]. The file is read in chunks; each event is parsed alone by jansson (json_loadb with
 * JSON_DISABLE_EOF_CHECK) and handed to fn, so memory holds one chunk and one event, never
 * the whole trace (a chunk grows only to hold an event larger than it).
 *
 *   static np_status count(void *ctx, json_t *ev, uint64_t i, np_err *err) { ... }
 *   if (trace_read("run.json.gz", count, &n, &err) != NP_OK) ...
 */
#ifndef NPUSIM_TRACE_READ_H
#define NPUSIM_TRACE_READ_H

#include <jansson.h>
#include <stdint.h>

#include "err.h"

/* Called for event number i (from 0) of the traceEvents array; ev is borrowed (freed after
 * the call). A status other than NP_OK stops the reading and is returned as it is. */
typedef np_status (*trace_event_fn)(void *ctx, json_t *ev, uint64_t i, np_err *err);

/* Reads path, calling fn for every event in order. NP_ERR_IO (cannot open or read, naming
 * the file), NP_ERR_SYNTAX (not JSON; file, line and column), NP_ERR_FORMAT (JSON, but not a
 * trace: no traceEvents array, an event that is not an object, the array not closed),
 * NP_ERR_NOMEM, or fn's status. */
np_status trace_read(const char *path, trace_event_fn fn, void *ctx, np_err *err);

/* Told, after each chunk, the share of the file read so far (0 .. 1, never decreasing; 1 at
 * the end): the position in the file on disk (compressed for .gz) over its size. */
typedef void (*trace_progress_fn)(void *ctx, double done);

/* The reader's limits: a trace is input from outside, and a small gzip can hold a huge
 * string or millions of events. */
#define TRACE_READ_MAX_EVENT_BYTES (64ull << 20) /* default: 64 MiB of JSON per event */
#define TRACE_READ_MAX_EVENTS (64ull << 20)      /* default: 67,108,864 events */

typedef struct trace_read_opts {
    trace_progress_fn progress; /* (optional) no calls when the file's size is not known */
    void *progress_ctx;
    uint64_t max_event_bytes;   /* 0: TRACE_READ_MAX_EVENT_BYTES */
    uint64_t max_events;        /* 0: TRACE_READ_MAX_EVENTS */
} trace_read_opts;

/* trace_read with options (o may be NULL: the defaults). An event longer than max_event_bytes
 * or more than max_events events: NP_ERR_RANGE naming the file, the position and the limit,
 * before more than the limit (plus a chunk) is held. */
np_status trace_read_with(const char *path, trace_event_fn fn, void *ctx,
                          const trace_read_opts *o, np_err *err);

#endif
