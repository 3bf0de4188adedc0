/* trace_db.h — a trace read into a compact index (not its JSON), checked against the
 * Chrome trace-event format as it is read: what `npusim trace check`, `npusim trace stats`
 * and `npusim report` work from.
 *
 * Reading streams the file (trace_read.h); what is kept is one record per slice (about 64
 * bytes: times, thread, interned name and category, the arguments the analyses use), the
 * threads, processes, flows and counters — never the JSON text or tree.
 *
 * The checks (each failure is a "problem": counted, the first few kept as messages naming
 * the event's index):
 *   - every event has "ph" (a phase this reader knows: X B E i I C M s t f), "name", an
 *     integer "pid"; "tid" for thread events (X B E i I s t f); "ts" (a number >= 0) for all
 *     but metadata; X a "dur" >= 0;
 *   - metadata: process_name / thread_name carry args.name (a string);
 *   - counters (C) carry a non-empty args object of numbers;
 *   - flows: every id has exactly one start (s) and one end (f), and every step binds to a
 *     slice of its thread that encloses its time;
 *   - every pid that appears is named by process_name, every (pid, tid) of a thread event by
 *     thread_name;
 *   - slices of one thread nest (a slice that starts inside another ends inside it); B and E
 *     pair up.
 *
 * Times are kept in picoseconds (ts, dur in microseconds x 10^6, rounded). */
#ifndef NPUSIM_TRACE_DB_H
#define NPUSIM_TRACE_DB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "trace_read.h"

#define TDB_NONE UINT32_MAX /* no string, no argument */
#define TDB_PROBLEMS_KEPT 8

typedef struct tdb_slice {
    uint64_t start_ps, end_ps;
    uint32_t thread;    /* index into tdb.threads */
    uint32_t name, cat; /* string ids (tdb_str) */
    uint32_t kind;      /* args.kind (a string id), or TDB_NONE */
    int32_t stage, mb;  /* args.stage, args.mb; -1 when absent */
    double flops, bytes; /* args.flops, args.bytes; 0 when absent */
} tdb_slice;

typedef struct tdb_thread {
    uint32_t pid, tid;
    uint32_t name;           /* thread_name, or TDB_NONE */
    uint32_t process;        /* index into tdb.processes */
    size_t first, n;         /* its slices: slices[first .. first + n), by start (then longest) */
} tdb_thread;

typedef struct tdb_process {
    uint32_t pid;
    uint32_t name;           /* process_name, or TDB_NONE */
} tdb_process;

typedef struct tdb_flow {    /* one arrow: from a slice to a slice (indices into slices) */
    size_t from, to;
} tdb_flow;

typedef struct tdb_counter { /* one series of one counter of a process */
    uint32_t process, name, series;
    uint64_t samples;
    double min, max;
    double integral;         /* value x time (value x ps) from each sample to the next */
    uint64_t t_first_ps, t_last_ps;
} tdb_counter;

typedef struct tdb {
    tdb_slice *slices;
    size_t n_slices;
    tdb_thread *threads;
    size_t n_threads;
    tdb_process *processes;
    size_t n_processes;
    tdb_flow *flows;
    size_t n_flows;
    tdb_counter *counters;
    size_t n_counters;
    uint64_t events;         /* every event of the file */
    uint64_t t_begin_ps, t_end_ps; /* earliest start, latest end of the slices (0, 0: none) */
    uint64_t problems;
    char problem[TDB_PROBLEMS_KEPT][256];
    bool truncated;          /* the writer cut the trace at its budget (trace.h's
                                TRACE_TRUNCATED): flows and B spans left open are not faults */
    uint64_t events_left_out; /* ... and how many events it left out */
    struct tdb_internal *in; /* string table and load-time state */
} tdb;

/* Reads and checks path. A trace with problems still loads (see tdb.problems). Errors as
 * trace_read (trace_read.h): NP_ERR_IO, NP_ERR_SYNTAX, NP_ERR_FORMAT, NP_ERR_NOMEM; *out
 * NULL then. */
np_status tdb_load(const char *path, tdb **out, np_err *err);
/* tdb_load with the reader's options (trace_read_with: progress and limits; o may be NULL). */
np_status tdb_load_with(const char *path, const trace_read_opts *o, tdb **out, np_err *err);

void tdb_free(tdb *db);

/* The string of id (NULL for TDB_NONE), and the id of s (TDB_NONE when the trace never
 * has it). */
const char *tdb_str(const tdb *db, uint32_t id);
uint32_t tdb_find_str(const tdb *db, const char *s);

/* A display name of a thread: "process / thread" (names, or pid/tid numbers). */
void tdb_thread_label(const tdb *db, const tdb_thread *t, char *buf, size_t n);

#endif
