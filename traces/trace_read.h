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

/* trace_read, telling progress (may be NULL) how far it is. No calls when the file's size is
 * not known (not a regular file). */
np_status trace_read_progress(const char *path, trace_event_fn fn, void *ctx,
                              trace_progress_fn progress, void *progress_ctx, np_err *err);

#endif
