/* trace.h — a Chrome/Perfetto trace writer: the JSON trace-event format that ui.perfetto.dev
 * and chrome://tracing open, gzip-compressed with zlib when the file name ends in ".gz".
 *
 * A trace is {"displayTimeUnit": "ns", "traceEvents": [...]}: complete slices ("ph": "X")
 * with a start and a duration, and metadata naming processes and threads. Times are given in
 * picoseconds and written in microseconds with six decimals, exact below 10^10 us. Every
 * string goes through jansson (escaped as JSON requires). Events are written as they come;
 * the viewer sorts them.
 *
 *   trace_writer *w;
 *   if (trace_open("run.json.gz", &w, &err) != NP_OK) return err.status;
 *   trace_name_process(w, 0, "chip 0");
 *   trace_name_thread(w, 0, 1, "core0.dma");
 *   trace_slice(w, 0, 1, "dma.copy", "dma", 0, 356000, NULL);
 *   return trace_close(w, &err);   (also frees it; reports a failed write)
 */
#ifndef NPUSIM_TRACE_H
#define NPUSIM_TRACE_H

#include <jansson.h>
#include <stdint.h>

#include "err.h"

typedef struct trace_writer trace_writer;

/* Creates path (gzip when it ends in ".gz"). NP_ERR_IO naming the file, NP_ERR_NOMEM. */
np_status trace_open(const char *path, trace_writer **out, np_err *err);

/* Metadata: the name of process pid, and of thread tid in it (shown in the viewer). */
void trace_name_process(trace_writer *w, uint32_t pid, const char *name);
void trace_name_thread(trace_writer *w, uint32_t pid, uint32_t tid, const char *name);

/* A complete slice on thread (pid, tid) from start_ps for dur_ps; cat is its category and
 * args (may be NULL; its reference is taken) its "args" object. */
void trace_slice(trace_writer *w, uint32_t pid, uint32_t tid, const char *name, const char *cat,
                 uint64_t start_ps, uint64_t dur_ps, json_t *args);

/* Events written so far (metadata included). */
uint64_t trace_events(const trace_writer *w);

/* Ends the JSON, closes the file and frees w (NULL is fine). NP_ERR_IO when a write failed
 * (the first failure is kept), NP_ERR_NOMEM. */
np_status trace_close(trace_writer *w, np_err *err);

#endif
