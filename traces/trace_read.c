/* trace_read.c — the streaming trace reader (see trace_read.h).
 *
 * The buffer holds data[beg, end) of the file; `line`, `col` are the position of data[beg].
 * A value is parsed with json_loadb from beg; when it fails before the end of the file the
 * buffer is refilled (or grown) and the value parsed again, so a value cut by a chunk's end
 * is never mistaken for an error. */
#include "trace_read.h"

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#define READ_CHUNK (1 << 20)
#define READ_LOOKAHEAD 4096 /* bytes wanted past beg before a scalar is parsed */

typedef struct reader {
    const char *path;
    gzFile f;
    trace_read_opts o;          /* limits filled in */
    double size;                /* the file's bytes on disk (compressed), 0: unknown */
    char *data;
    size_t cap, beg, end;
    bool eof;
    int line, col;
    np_err *err;
} reader;

/* Reads more: keeps data[beg, end), moved to the front, growing the buffer when it is full. */
static np_status fill(reader *r)
{
    if (r->eof)
        return NP_OK;
    if (r->beg) {
        memmove(r->data, r->data + r->beg, r->end - r->beg);
        r->end -= r->beg, r->beg = 0;
    }
    if (r->end == r->cap) {
        if (r->cap >= r->o.max_event_bytes)
            return np_err_at(r->err, NP_ERR_RANGE, r->path, r->line, r->col, "an event longer "
                             "than %llu MiB (the reader's limit per event; --max-event-size "
                             "raises it)", (unsigned long long)(r->o.max_event_bytes >> 20));
        char *d = realloc(r->data, 2 * r->cap);
        if (!d)
            return np_err_set(r->err, NP_ERR_NOMEM, "out of memory reading %s", r->path);
        r->data = d, r->cap *= 2;
    }
    int n = gzread(r->f, r->data + r->end, (unsigned)(r->cap - r->end));
    if (n < 0) {
        int zerr;
        const char *msg = gzerror(r->f, &zerr);
        return np_err_at(r->err, NP_ERR_IO, r->path, r->line, r->col, "cannot read the trace: %s",
                         msg);
    }
    if (n == 0)
        r->eof = true;
    r->end += (size_t)n;
    if (r->o.progress && r->size > 0) {
        double done = r->eof ? 1.0 : (double)gzoffset(r->f) / r->size;
        r->o.progress(r->o.progress_ctx, done < 1 ? done : 1);
    }
    return NP_OK;
}

static void advance(reader *r, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (r->data[r->beg + i] == '\n')
            r->line += r->line < INT_MAX, r->col = 1;
        else
            r->col += r->col < INT_MAX; /* positions past 2^31 - 1 stay there */
    }
    r->beg += n;
}

/* The next non-blank character (not consumed), or -1 at the end of the file. */
static np_status peek(reader *r, int *c)
{
    for (;;) {
        while (r->beg < r->end && r->data[r->beg] && strchr(" \t\r\n", r->data[r->beg]))
            advance(r, 1);
        if (r->beg < r->end) {
            *c = (unsigned char)r->data[r->beg];
            return NP_OK;
        }
        if (r->eof) {
            *c = -1;
            return NP_OK;
        }
        np_status st = fill(r);
        if (st != NP_OK)
            return st;
    }
}

/* Consumes the next non-blank character, which must be one of `want`. */
static np_status expect(reader *r, const char *want, int *got)
{
    np_status st = peek(r, got);
    if (st != NP_OK)
        return st;
    if (*got < 0 || !strchr(want, *got)) {
        if (*got < 0)
            return np_err_at(r->err, NP_ERR_FORMAT, r->path, r->line, r->col,
                             "the trace ends early (expected one of '%s')", want);
        return np_err_at(r->err, NP_ERR_SYNTAX, r->path, r->line, r->col,
                         "expected one of '%s', found '%c'", want, *got);
    }
    advance(r, 1);
    return NP_OK;
}

/* Parses one JSON value at beg. */
static np_status value(reader *r, json_t **out)
{
    *out = NULL;
    int c;
    np_status st0 = peek(r, &c);
    if (st0 != NP_OK)
        return st0;
    if (c < 0)
        return np_err_at(r->err, NP_ERR_FORMAT, r->path, r->line, r->col,
                         "the trace ends early (a value expected)");
    for (;;) {
        while (!r->eof && r->end - r->beg < READ_LOOKAHEAD) {
            np_status st = fill(r);
            if (st != NP_OK)
                return st;
        }
        json_error_t je;
        json_t *j = json_loadb(r->data + r->beg, r->end - r->beg,
                               JSON_DISABLE_EOF_CHECK | JSON_DECODE_ANY, &je);
        if (j) {
            advance(r, (size_t)je.position);
            *out = j;
            return NP_OK;
        }
        if (r->eof || (size_t)je.position < r->end - r->beg) { /* not cut by the chunk's end */
            int64_t line = (int64_t)r->line + je.line - 1;
            int64_t col = je.line > 1 ? je.column : (int64_t)r->col + je.column - 1;
            line = line > INT_MAX ? INT_MAX : line, col = col > INT_MAX ? INT_MAX : col;
            return np_err_at(r->err, NP_ERR_SYNTAX, r->path, (int)line, (int)col, "%s", je.text);
        }
        size_t had = r->end - r->beg;
        np_status st = fill(r);
        while (st == NP_OK && !r->eof && r->end - r->beg == had) /* the buffer was full */
            st = fill(r);
        if (st != NP_OK)
            return st;
    }
}

static np_status events(reader *r, trace_event_fn fn, void *ctx)
{
    int c;
    np_status st = expect(r, "[", &c);
    if (st != NP_OK || (st = peek(r, &c)) != NP_OK)
        return st;
    if (c == ']') {
        advance(r, 1);
        return NP_OK;
    }
    for (uint64_t i = 0;; i++) {
        if ((st = peek(r, &c)) != NP_OK) /* the event's own position, past the whitespace */
            return st;
        int line = r->line, col = r->col;
        json_t *ev;
        if (i == r->o.max_events)
            return np_err_at(r->err, NP_ERR_RANGE, r->path, line, col, "more than %llu events "
                             "(the reader's limit; --max-events raises it)",
                             (unsigned long long)r->o.max_events);
        if ((st = value(r, &ev)) != NP_OK)
            return st;
        if (!json_is_object(ev)) {
            json_decref(ev);
            return np_err_at(r->err, NP_ERR_FORMAT, r->path, line, col,
                             "event %llu is not an object", (unsigned long long)i);
        }
        st = fn(ctx, ev, i, r->err);
        json_decref(ev);
        if (st != NP_OK || (st = expect(r, ",]", &c)) != NP_OK)
            return st;
        if (c == ']')
            return NP_OK;
    }
}

static np_status top(reader *r, trace_event_fn fn, void *ctx)
{
    int c;
    np_status st = peek(r, &c);
    if (st != NP_OK)
        return st;
    if (c == '[')
        return events(r, fn, ctx);
    if ((st = expect(r, "{", &c)) != NP_OK)
        return st;
    bool seen = false;
    if ((st = peek(r, &c)) != NP_OK)
        return st;
    while (c != '}') {
        int line = r->line, col = r->col;
        json_t *key;
        if ((st = value(r, &key)) != NP_OK)
            return st;
        bool is_events = json_is_string(key) && !strcmp(json_string_value(key), "traceEvents");
        bool bad = !json_is_string(key);
        json_decref(key);
        if (bad)
            return np_err_at(r->err, NP_ERR_SYNTAX, r->path, line, col, "expected a key");
        if ((st = expect(r, ":", &c)) != NP_OK)
            return st;
        if (is_events) {
            if ((st = events(r, fn, ctx)) != NP_OK)
                return st;
            seen = true;
        } else {
            json_t *v;
            if ((st = value(r, &v)) != NP_OK)
                return st;
            json_decref(v);
        }
        if ((st = expect(r, ",}", &c)) != NP_OK)
            return st;
    }
    if (!seen)
        return np_err_at(r->err, NP_ERR_FORMAT, r->path, 0, 0, "no traceEvents array");
    return NP_OK;
}

np_status trace_read(const char *path, trace_event_fn fn, void *ctx, np_err *err)
{
    return trace_read_with(path, fn, ctx, NULL, err);
}

np_status trace_read_with(const char *path, trace_event_fn fn, void *ctx,
                          const trace_read_opts *o, np_err *err)
{
    reader r = {.path = path, .line = 1, .col = 1, .err = err, .cap = READ_CHUNK};
    if (o)
        r.o = *o;
    if (!r.o.max_event_bytes)
        r.o.max_event_bytes = TRACE_READ_MAX_EVENT_BYTES;
    if (!r.o.max_events)
        r.o.max_events = TRACE_READ_MAX_EVENTS;
    struct stat st_file;
    if (r.o.progress && stat(path, &st_file) == 0 && S_ISREG(st_file.st_mode))
        r.size = (double)st_file.st_size;
    if (!(r.f = gzopen(path, "rb")))
        return np_err_at(err, NP_ERR_IO, path, 0, 0, "cannot open the trace");
    if (!(r.data = malloc(r.cap))) {
        gzclose(r.f);
        return np_err_set(err, NP_ERR_NOMEM, "out of memory reading %s", path);
    }
    np_status st = top(&r, fn, ctx);
    int c;
    if (st == NP_OK && (st = peek(&r, &c)) == NP_OK && c >= 0)
        st = np_err_at(err, NP_ERR_SYNTAX, path, r.line, r.col, "text after the trace");
    free(r.data);
    gzclose(r.f);
    return st;
}
