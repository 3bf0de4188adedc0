/* trace.c — the streaming Chrome/Perfetto JSON trace writer (see trace.h).
 *
 * Events are formatted straight into a fixed buffer (TRACE_BUF_BYTES) that goes to zlib's
 * gzwrite (or stdio) when full: no allocation per event, memory independent of the trace. */
#include "trace.h"
#include "parse.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define TRACE_BUF_BYTES (64 * 1024)

struct trace_writer {
    char *path;
    gzFile gz; /* when the name ends in .gz */
    FILE *f;   /* otherwise */
    uint64_t events, bytes;
    uint64_t max_bytes; /* trace_set_max_bytes (0: none) */
    uint64_t dropped;   /* events left out once the file reached max_bytes */
    size_t used;
    bool failed, full;
    char buf[TRACE_BUF_BYTES];
};

uint64_t trace_file_bytes(const trace_writer *w)
{
    if (w->gz) {
        z_off_t o = gzoffset(w->gz);
        return o > 0 ? (uint64_t)o : 0;
    }
    return w->bytes - w->used;
}

/* Whether the next event is left out: the file has reached its budget. */
static bool dropped(trace_writer *w)
{
    if (w->full)
        w->dropped++;
    return w->full;
}

static void flush(trace_writer *w)
{
    if (!w->used)
        return;
    if (!w->failed &&
        (w->gz ? gzwrite(w->gz, w->buf, (unsigned)w->used) != (int)w->used
               : fwrite(w->buf, 1, w->used, w->f) != w->used))
        w->failed = true;
    w->used = 0;
    if (w->max_bytes && trace_file_bytes(w) >= w->max_bytes)
        w->full = true;
}

static void put(trace_writer *w, const char *s, size_t n)
{
    w->bytes += n;
    while (n) {
        if (w->used == TRACE_BUF_BYTES)
            flush(w);
        size_t k = TRACE_BUF_BYTES - w->used < n ? TRACE_BUF_BYTES - w->used : n;
        memcpy(w->buf + w->used, s, k);
        w->used += k, s += k, n -= k;
    }
}

static void puts_(trace_writer *w, const char *s) { put(w, s, strlen(s)); }

/* s as a JSON string, quoted (RFC 8259: '"', '\\' and control bytes escaped; UTF-8 passes;
 * a byte that is not part of well-formed UTF-8 becomes U+FFFD, so the trace stays JSON). */
static void put_str(trace_writer *w, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    put(w, "\"", 1);
    const char *run = s;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c >= 0x80) {
            size_t need = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 ? 2 : 0;
            if (need && strnlen(s, need) == need && np_utf8_invalid_at(s, need) == need) {
                s += need - 1; /* one well-formed character */
                continue;
            }
            put(w, run, (size_t)(s - run));
            put(w, "\\ufffd", 6);
            run = s + 1;
            continue;
        }
        if (c >= 0x20 && c != '"' && c != '\\')
            continue;
        put(w, run, (size_t)(s - run));
        char e[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
        if (c == '"' || c == '\\')
            e[1] = (char)c, put(w, e, 2);
        else if (c == '\n')
            put(w, "\\n", 2);
        else if (c == '\t')
            put(w, "\\t", 2);
        else
            put(w, e, 6);
        run = s + 1;
    }
    put(w, run, (size_t)(s - run));
    put(w, "\"", 1);
}

static void put_u64(trace_writer *w, uint64_t v)
{
    char b[24];
    put(w, b, (size_t)snprintf(b, sizeof b, "%llu", (unsigned long long)v));
}

size_t trace_format_us(uint64_t ps, char *buf)
{
    int n = snprintf(buf, 32, "%llu", (unsigned long long)(ps / 1000000));
    uint64_t frac = ps % 1000000;
    if (frac) {
        n += snprintf(buf + n, 32 - (size_t)n, ".%06llu", (unsigned long long)frac);
        while (buf[n - 1] == '0')
            n--;
    }
    return (size_t)n;
}

static void put_us(trace_writer *w, uint64_t ps)
{
    char b[32];
    put(w, b, trace_format_us(ps, b));
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
    puts_(w, "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n");
    *out = w;
    return NP_OK;
}

/* The common head of an event: {"name":..,"ph":..,"pid":..,"tid":.. (tid when has_tid). */
static void head(trace_writer *w, const char *name, char ph, uint32_t pid, bool has_tid,
                 uint32_t tid)
{
    if (w->events++)
        put(w, ",\n", 2);
    puts_(w, "{\"name\":");
    put_str(w, name);
    char b[16] = {',', '"', 'p', 'h', '"', ':', '"', ph, '"', ','};
    put(w, b, 10);
    puts_(w, "\"pid\":");
    put_u64(w, pid);
    if (has_tid) {
        puts_(w, ",\"tid\":");
        put_u64(w, tid);
    }
}

static void put_args(trace_writer *w, const trace_arg *a, size_t n)
{
    puts_(w, ",\"args\":{");
    bool first = true;
    for (size_t i = 0; i < n; i++) {
        if (a[i].type == TRACE_ARG_TYPE_STR && !a[i].v.s)
            continue;
        if (!first)
            put(w, ",", 1);
        first = false;
        put_str(w, a[i].key);
        put(w, ":", 1);
        char b[40];
        switch (a[i].type) {
        case TRACE_ARG_TYPE_U64: put_u64(w, a[i].v.u); break;
        case TRACE_ARG_TYPE_I64:
            put(w, b, (size_t)snprintf(b, sizeof b, "%lld", (long long)a[i].v.i));
            break;
        case TRACE_ARG_TYPE_F64:
            if (isfinite(a[i].v.f))
                put(w, b, (size_t)snprintf(b, sizeof b, "%.12g", a[i].v.f));
            else
                puts_(w, "null");
            break;
        case TRACE_ARG_TYPE_STR: put_str(w, a[i].v.s); break;
        }
    }
    put(w, "}", 1);
}

static void name_event(trace_writer *w, const char *what, uint32_t pid, uint32_t tid,
                       const char *name)
{
    head(w, what, 'M', pid, true, tid);
    puts_(w, ",\"args\":{\"name\":");
    put_str(w, name);
    puts_(w, "}}");
}

void trace_name_process(trace_writer *w, uint32_t pid, const char *name)
{
    name_event(w, "process_name", pid, 0, name);
}

void trace_name_thread(trace_writer *w, uint32_t pid, uint32_t tid, const char *name)
{
    name_event(w, "thread_name", pid, tid, name);
}

void trace_sort_process(trace_writer *w, uint32_t pid, int64_t index)
{
    if (dropped(w))
        return;
    head(w, "process_sort_index", 'M', pid, true, 0);
    char b[48];
    put(w, b, (size_t)snprintf(b, sizeof b, ",\"args\":{\"sort_index\":%lld}}", (long long)index));
}

void trace_slice(trace_writer *w, uint32_t pid, uint32_t tid, const char *name, const char *cat,
                 uint64_t start_ps, uint64_t dur_ps, const trace_arg *args, size_t n_args)
{
    if (dropped(w))
        return;
    head(w, name, 'X', pid, true, tid);
    puts_(w, ",\"cat\":");
    put_str(w, cat);
    puts_(w, ",\"ts\":");
    put_us(w, start_ps);
    puts_(w, ",\"dur\":");
    put_us(w, dur_ps);
    if (n_args)
        put_args(w, args, n_args);
    put(w, "}", 1);
}

void trace_counter(trace_writer *w, uint32_t pid, const char *name, uint64_t t_ps,
                   const trace_arg *series, size_t n_series)
{
    if (dropped(w))
        return;
    head(w, name, 'C', pid, false, 0);
    puts_(w, ",\"ts\":");
    put_us(w, t_ps);
    put_args(w, series, n_series);
    put(w, "}", 1);
}

void trace_flow(trace_writer *w, char phase, uint64_t id, uint32_t pid, uint32_t tid,
                const char *name, const char *cat, uint64_t t_ps)
{
    if (dropped(w))
        return;
    head(w, name, phase, pid, true, tid);
    puts_(w, ",\"cat\":");
    put_str(w, cat);
    puts_(w, ",\"id\":");
    put_u64(w, id);
    puts_(w, ",\"ts\":");
    put_us(w, t_ps);
    if (phase != 's')
        puts_(w, ",\"bp\":\"e\""); /* bound to the enclosing slice, not the next one */
    put(w, "}", 1);
}

void trace_instant(trace_writer *w, uint32_t pid, uint32_t tid, const char *name,
                   const char *cat, uint64_t t_ps)
{
    if (dropped(w))
        return;
    head(w, name, 'i', pid, true, tid);
    puts_(w, ",\"cat\":");
    put_str(w, cat);
    puts_(w, ",\"ts\":");
    put_us(w, t_ps);
    puts_(w, ",\"s\":\"t\"}");
}

uint64_t trace_events(const trace_writer *w) { return w->events; }
uint64_t trace_bytes(const trace_writer *w) { return w->bytes; }
void trace_set_max_bytes(trace_writer *w, uint64_t max_bytes) { w->max_bytes = max_bytes; }
uint64_t trace_dropped(const trace_writer *w) { return w->dropped; }

np_status trace_close(trace_writer *w, np_err *err)
{
    if (!w)
        return NP_OK;
    if (w->dropped) { /* says so in the trace: readers do not count what was cut as faults */
        head(w, TRACE_TRUNCATED, 'M', 0, false, 0);
        char b[96];
        put(w, b, (size_t)snprintf(b, sizeof b, ",\"args\":{\"max_bytes\":%llu,\"events_left_"
                                   "out\":%llu}}", (unsigned long long)w->max_bytes,
                                   (unsigned long long)w->dropped));
    }
    puts_(w, "\n]}\n");
    flush(w);
    bool bad = w->failed;
    if (w->gz)
        bad = gzclose(w->gz) != Z_OK || bad;
    else
        bad = fclose(w->f) != 0 || bad;
    np_status st = NP_OK;
    if (bad)
        st = np_err_at(err, NP_ERR_IO, w->path, 0, 0, "cannot write the trace file");
    free(w->path);
    free(w);
    return st;
}
