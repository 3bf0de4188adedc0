/* trace.c — the Chrome/Perfetto JSON trace writer (see trace.h). */
#include "trace.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

struct trace_writer {
    char *path;
    gzFile gz;  /* when the name ends in .gz */
    FILE *f;    /* otherwise */
    uint64_t events;
    bool failed, oom;
};

static void put(trace_writer *w, const char *s, size_t n)
{
    if (w->failed)
        return;
    if (w->gz ? gzwrite(w->gz, s, (unsigned)n) != (int)n : fwrite(s, 1, n, w->f) != n)
        w->failed = true;
}

np_status trace_open(const char *path, trace_writer **out, np_err *err)
{
    *out = NULL;
    trace_writer *w = calloc(1, sizeof *w);
    if (!w || !(w->path = strdup(path))) {
        free(w);
        return np_err_set(err, NP_ERR_NOMEM, "out of memory opening a trace");
    }
    size_t n = strlen(path);
    if (n > 3 && strcmp(path + n - 3, ".gz") == 0)
        w->gz = gzopen(path, "wb");
    else
        w->f = fopen(path, "wb");
    if (!w->gz && !w->f) {
        free(w->path);
        free(w);
        return np_err_at(err, NP_ERR_IO, path, 0, 0, "cannot create the trace file");
    }
    static const char head[] = "{\"displayTimeUnit\": \"ns\", \"traceEvents\": [\n";
    put(w, head, sizeof head - 1);
    *out = w;
    return NP_OK;
}

/* Writes event e (its reference is taken), comma-separated from the previous one. */
static void emit(trace_writer *w, json_t *e)
{
    /* 16 significant digits: microseconds with their 6 decimals (whole ps) stay exact below
     * 10^10 us (about 3 hours) */
    size_t flags = JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(16);
    char *s = e ? json_dumps(e, flags) : NULL;
    json_decref(e);
    if (!s) {
        w->oom = true;
        return;
    }
    if (w->events++)
        put(w, ",\n", 2);
    put(w, s, strlen(s));
    free(s);
}

static json_t *name_event(const char *what, uint32_t pid, uint32_t tid, const char *name)
{
    return json_pack("{s:s, s:s, s:I, s:I, s:{s:s}}", "name", what, "ph", "M", "pid",
                     (json_int_t)pid, "tid", (json_int_t)tid, "args", "name", name);
}

void trace_name_process(trace_writer *w, uint32_t pid, const char *name)
{
    emit(w, name_event("process_name", pid, 0, name));
}

void trace_name_thread(trace_writer *w, uint32_t pid, uint32_t tid, const char *name)
{
    emit(w, name_event("thread_name", pid, tid, name));
}

/* ps as microseconds (written with 16 significant digits by emit: exact whole ps) */
static json_t *us(uint64_t ps) { return json_real((double)ps / 1e6); }

void trace_slice(trace_writer *w, uint32_t pid, uint32_t tid, const char *name, const char *cat,
                 uint64_t start_ps, uint64_t dur_ps, json_t *args)
{
    json_t *e = json_pack("{s:s, s:s, s:s, s:o, s:o, s:I, s:I}", "name", name, "cat", cat, "ph",
                          "X", "ts", us(start_ps), "dur", us(dur_ps), "pid", (json_int_t)pid,
                          "tid", (json_int_t)tid);
    if (e && args)
        json_object_set_new(e, "args", args);
    else
        json_decref(args);
    emit(w, e);
}

uint64_t trace_events(const trace_writer *w) { return w->events; }

np_status trace_close(trace_writer *w, np_err *err)
{
    if (!w)
        return NP_OK;
    static const char tail[] = "\n]}\n";
    put(w, tail, sizeof tail - 1);
    bool bad = w->failed;
    if (w->gz)
        bad = gzclose(w->gz) != Z_OK || bad;
    else
        bad = fclose(w->f) != 0 || bad;
    np_status st = NP_OK;
    if (bad)
        st = np_err_at(err, NP_ERR_IO, w->path, 0, 0, "cannot write the trace file");
    else if (w->oom)
        st = np_err_set(err, NP_ERR_NOMEM, "out of memory writing the trace %s", w->path);
    free(w->path);
    free(w);
    return st;
}
