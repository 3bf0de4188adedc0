/* trace.h — the streaming Chrome/Perfetto trace writer: the JSON trace-event format that
 * ui.perfetto.dev and chrome://tracing open, gzip-compressed with zlib when the file name
 * ends in ".gz".
 *
 * A trace is {"displayTimeUnit":"ns","traceEvents":[...]}: metadata naming processes and
 * threads ("ph":"M"), complete slices ("X") with arguments, counters ("C"), flow steps
 * ("s", "t", "f") and instants ("i"). Events go out as they are given, through a fixed
 * buffer: the writer's memory does not grow with the trace, and nothing is ever held whole.
 * The viewer sorts events by time.
 *
 * Times are given in picoseconds and written in microseconds as exact decimals (the integer
 * part, then up to six decimals with trailing zeros dropped: 1234567 ps -> 1.234567, 3000 ps
 * -> 0.003): no floating point, so a time is exact at any size and a rerun is identical byte
 * for byte. Strings are escaped as JSON requires (a name may hold quotes or control bytes).
 *
 *   trace_writer *w;
 *   if (trace_open("run.json.gz", &w, &err) != NP_OK) return err.status;
 *   trace_name_process(w, 0, "chip 0");
 *   trace_name_thread(w, 0, 1, "core0.dma");
 *   trace_arg a[] = {TRACE_ARG_U("bytes", 4096)};
 *   trace_slice(w, 0, 1, "dma.copy", "dma", 0, 356000, a, 1);
 *   return trace_close(w, &err);   (also frees it; reports a failed write)
 *
 * docs/traces.md describes the layout npusim's traces use (traces/trace_layout.h). */
#ifndef NPUSIM_TRACE_H
#define NPUSIM_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

typedef struct trace_writer trace_writer;

/* One argument of a slice or one series of a counter. */
typedef enum trace_arg_type {
    TRACE_ARG_TYPE_U64,
    TRACE_ARG_TYPE_I64,
    TRACE_ARG_TYPE_F64, /* written with %.12g; NaN and infinities as null */
    TRACE_ARG_TYPE_STR, /* NULL: the argument is left out */
} trace_arg_type;

typedef struct trace_arg {
    const char *key;
    trace_arg_type type;
    union {
        uint64_t u;
        int64_t i;
        double f;
        const char *s;
    } v;
} trace_arg;

#define TRACE_ARG_U(k, x) ((trace_arg){(k), TRACE_ARG_TYPE_U64, {.u = (uint64_t)(x)}})
#define TRACE_ARG_I(k, x) ((trace_arg){(k), TRACE_ARG_TYPE_I64, {.i = (int64_t)(x)}})
#define TRACE_ARG_F(k, x) ((trace_arg){(k), TRACE_ARG_TYPE_F64, {.f = (double)(x)}})
#define TRACE_ARG_S(k, x) ((trace_arg){(k), TRACE_ARG_TYPE_STR, {.s = (x)}})

/* Creates path (gzip when it ends in ".gz"). NP_ERR_IO naming the file, NP_ERR_NOMEM. */
np_status trace_open(const char *path, trace_writer **out, np_err *err);

/* Metadata: the name of process pid, of thread tid in it, and the order the viewer lists
 * processes in (lower first). */
void trace_name_process(trace_writer *w, uint32_t pid, const char *name);
void trace_name_thread(trace_writer *w, uint32_t pid, uint32_t tid, const char *name);
void trace_sort_process(trace_writer *w, uint32_t pid, int64_t index);

/* A complete slice on thread (pid, tid) from start_ps for dur_ps, in category cat, with
 * n_args arguments (args may be NULL when n_args is 0). */
void trace_slice(trace_writer *w, uint32_t pid, uint32_t tid, const char *name, const char *cat,
                 uint64_t start_ps, uint64_t dur_ps, const trace_arg *args, size_t n_args);

/* A counter sample: counter `name` of process pid takes the numeric values of series (one
 * per series: TRACE_ARG_TYPE_U64, I64 or F64) from t_ps on. */
void trace_counter(trace_writer *w, uint32_t pid, const char *name, uint64_t t_ps,
                   const trace_arg *series, size_t n_series);

/* A step of flow `id` (an arrow in the viewer) bound to the slice enclosing t_ps on thread
 * (pid, tid): phase 's' starts it, 't' passes through, 'f' ends it. */
void trace_flow(trace_writer *w, char phase, uint64_t id, uint32_t pid, uint32_t tid,
                const char *name, const char *cat, uint64_t t_ps);

/* An instant event on thread (pid, tid) at t_ps. */
void trace_instant(trace_writer *w, uint32_t pid, uint32_t tid, const char *name,
                   const char *cat, uint64_t t_ps);

/* Events written so far (metadata included), and the bytes of JSON they took (before
 * compression). */
uint64_t trace_events(const trace_writer *w);
uint64_t trace_bytes(const trace_writer *w);

/* Ends the JSON, closes the file and frees w (NULL is fine). NP_ERR_IO naming the file when
 * a write failed (the first failure is kept). */
np_status trace_close(trace_writer *w, np_err *err);

/* A budget for the file: once it holds max_bytes on disk (compressed, for .gz; checked each
 * 64 KiB of JSON), every later event is left out and counted; trace_close then ends the
 * trace with a metadata event TRACE_TRUNCATED {max_bytes, events_left_out}, and readers
 * (traces/trace_db.h) do not count the flows and spans the cut left open as faults. 0: no
 * budget (the default). */
#define TRACE_TRUNCATED "npusim_trace_truncated"
void trace_set_max_bytes(trace_writer *w, uint64_t max_bytes);
uint64_t trace_dropped(const trace_writer *w);   /* events left out so far */
uint64_t trace_file_bytes(const trace_writer *w); /* bytes in the file so far */

/* Writes ps as microseconds, exactly (see above), into buf (at least 32 bytes) without a
 * terminating NUL; returns the length. */
size_t trace_format_us(uint64_t ps, char *buf);

#endif
