/* trace_db.c — a trace read into a compact index and checked as it is read (see trace_db.h).
 *
 * Loading is one streaming pass (trace_read) that appends records, then a finishing pass:
 * slices sorted by (thread, start, longest first) so each thread's are contiguous; nesting
 * checked with a stack, which also gives each slice its parent; flow steps bound to the
 * deepest slice enclosing their time (the last slice starting at or before it, else that
 * one's ancestors); then the naming checks. */
#include "trace_db.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace.h"
#include "trace_map.h"
#include "trace_read.h"

typedef struct flow_pt {
    uint64_t id;     /* hash of the id (numbers and strings apart) */
    uint64_t ts, order;
    uint32_t thread;
    char ph;
    uint64_t event;  /* its index in the file, for messages */
} flow_pt;

typedef struct open_b { /* a B event waiting for its E */
    uint32_t thread, name, cat;
    uint64_t ts;
} open_b;

typedef struct tdb_internal {
    strtab strs;
    u64map thread_of;  /* (pid << 32 | tid) + 1 -> thread index */
    u64map process_of; /* pid + 1 -> process index */
    u64map counter_of; /* mix of (process, name, series), probed -> counter index + 1 */
    bool *thread_used, *process_used; /* by an event that needs the name */
    size_t cap_slices, cap_threads, cap_processes, cap_counters, cap_used_t, cap_used_p;
    size_t cap_flows;
    flow_pt *pts;
    size_t n_pts, cap_pts;
    open_b *opens;
    size_t n_opens, cap_opens;
    double *last_v;      /* per counter: the last sample's value */
    bool oom;
} tdb_internal;

static void problem(tdb *db, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void problem(tdb *db, const char *fmt, ...)
{
    if (db->problems < TDB_PROBLEMS_KEPT) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(db->problem[db->problems], sizeof db->problem[0], fmt, ap);
        va_end(ap);
    }
    db->problems++;
}

/* Makes room for one more element of an array (*v of *n, capacity *cap). */
static bool grow(void **v, size_t n, size_t *cap, size_t size)
{
    if (n < *cap)
        return true;
    size_t c = *cap ? 2 * *cap : 64;
    void *p = realloc(*v, c * size);
    if (!p)
        return false;
    *v = p, *cap = c;
    return true;
}

static uint32_t intern(tdb *db, const char *s)
{
    uint32_t id = strtab_intern(&db->in->strs, s);
    if (id == UINT32_MAX)
        db->in->oom = true;
    return id;
}

static uint32_t process_index(tdb *db, uint32_t pid)
{
    tdb_internal *in = db->in;
    bool fresh;
    uint64_t *slot = u64map_slot(&in->process_of, (uint64_t)pid + 1, &fresh);
    if (!slot) {
        in->oom = true;
        return UINT32_MAX;
    }
    if (fresh) {
        if (!grow((void **)&db->processes, db->n_processes, &in->cap_processes,
                  sizeof *db->processes) ||
            !grow((void **)&in->process_used, db->n_processes, &in->cap_used_p, sizeof(bool))) {
            in->oom = true;
            return UINT32_MAX; /* the slot keeps 0: a later event may land on process 0 */
        }
        db->processes[db->n_processes] = (tdb_process){pid, TDB_NONE};
        in->process_used[db->n_processes] = false;
        *slot = db->n_processes++;
    }
    return (uint32_t)*slot;
}

static uint32_t thread_index(tdb *db, uint32_t pid, uint32_t tid)
{
    tdb_internal *in = db->in;
    uint32_t p = process_index(db, pid);
    bool fresh;
    uint64_t *slot = u64map_slot(&in->thread_of, ((uint64_t)pid << 32 | tid) + 1, &fresh);
    if (p == UINT32_MAX || !slot) {
        in->oom = true;
        return UINT32_MAX;
    }
    if (fresh) {
        if (!grow((void **)&db->threads, db->n_threads, &in->cap_threads, sizeof *db->threads) ||
            !grow((void **)&in->thread_used, db->n_threads, &in->cap_used_t, sizeof(bool))) {
            in->oom = true;
            return UINT32_MAX;
        }
        db->threads[db->n_threads] = (tdb_thread){pid, tid, TDB_NONE, p, 0, 0};
        in->thread_used[db->n_threads] = false;
        *slot = db->n_threads++;
    }
    return (uint32_t)*slot;
}

static bool get_u32(json_t *o, const char *key, uint32_t *out)
{
    json_t *v = json_object_get(o, key);
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > UINT32_MAX)
        return false;
    *out = (uint32_t)json_integer_value(v);
    return true;
}

/* A time field in microseconds as picoseconds; false when absent, not a number or < 0. */
static bool get_ps(json_t *o, const char *key, uint64_t *out)
{
    json_t *v = json_object_get(o, key);
    if (!json_is_number(v))
        return false;
    double us = json_number_value(v);
    if (!(us >= 0) || us > 1.8e13)
        return false;
    *out = (uint64_t)llround(us * 1e6);
    return true;
}

static void add_slice(tdb *db, uint32_t thread, uint32_t name, uint32_t cat, uint64_t start,
                      uint64_t end, json_t *args)
{
    tdb_internal *in = db->in;
    if (!grow((void **)&db->slices, db->n_slices, &in->cap_slices, sizeof *db->slices)) {
        in->oom = true;
        return;
    }
    tdb_slice s = {start, end, thread, name, cat, TDB_NONE, -1, -1, 0, 0};
    json_t *v;
    if (json_is_integer(v = json_object_get(args, "stage")))
        s.stage = (int32_t)json_integer_value(v);
    if (json_is_integer(v = json_object_get(args, "mb")))
        s.mb = (int32_t)json_integer_value(v);
    if (json_is_string(v = json_object_get(args, "kind")))
        s.kind = intern(db, json_string_value(v));
    if (json_is_number(v = json_object_get(args, "flops")))
        s.flops = json_number_value(v);
    if (json_is_number(v = json_object_get(args, "bytes")))
        s.bytes = json_number_value(v);
    db->slices[db->n_slices++] = s;
    if (db->n_slices == 1 || start < db->t_begin_ps)
        db->t_begin_ps = start;
    if (end > db->t_end_ps)
        db->t_end_ps = end;
}

static void add_counter(tdb *db, uint32_t process, const char *name, json_t *args, uint64_t ts,
                        uint64_t i)
{
    tdb_internal *in = db->in;
    if (!json_is_object(args) || !json_object_size(args)) {
        problem(db, "event %llu: counter '%s' has no args of values", (unsigned long long)i, name);
        return;
    }
    uint32_t nid = intern(db, name);
    const char *key;
    json_t *v;
    json_object_foreach(args, key, v) {
        if (!json_is_number(v)) {
            problem(db, "event %llu: counter '%s' series '%s' is not a number",
                    (unsigned long long)i, name, key);
            continue;
        }
        uint32_t sid = intern(db, key);
        if (nid == UINT32_MAX || sid == UINT32_MAX)
            return;
        double x = json_number_value(v);
        uint64_t h = tmap_mix(((uint64_t)process << 42) ^ ((uint64_t)nid << 21) ^ sid) | 1;
        tdb_counter *c = NULL;
        for (;; h += 2) {
            bool fresh;
            uint64_t *slot = u64map_slot(&in->counter_of, h, &fresh);
            if (!slot) {
                in->oom = true;
                return;
            }
            if (fresh) {
                double *lv = NULL;
                if (!grow((void **)&db->counters, db->n_counters, &in->cap_counters,
                          sizeof *db->counters) ||
                    !(lv = realloc(in->last_v, in->cap_counters * sizeof *lv))) {
                    in->oom = true;
                    return;
                }
                in->last_v = lv;
                c = &db->counters[db->n_counters];
                *c = (tdb_counter){process, nid, sid, 0, x, x, 0, ts, ts};
                *slot = ++db->n_counters;
                break;
            }
            tdb_counter *o = *slot ? &db->counters[*slot - 1] : NULL;
            if (o && o->process == process && o->name == nid && o->series == sid) {
                c = o;
                break;
            }
        }
        size_t k = (size_t)(c - db->counters);
        if (c->samples && ts >= c->t_last_ps)
            c->integral += in->last_v[k] * (double)(ts - c->t_last_ps);
        if (x < c->min)
            c->min = x;
        if (x > c->max)
            c->max = x;
        if (ts >= c->t_last_ps)
            c->t_last_ps = ts, in->last_v[k] = x;
        if (ts < c->t_first_ps)
            c->t_first_ps = ts;
        c->samples++;
    }
}

static np_status on_event(void *ctx, json_t *ev, uint64_t i, np_err *err)
{
    (void)err;
    tdb *db = ctx;
    tdb_internal *in = db->in;
    db->events++;
    unsigned long long ei = (unsigned long long)i;
    json_t *jph = json_object_get(ev, "ph"), *jname = json_object_get(ev, "name");
    const char *ph = json_string_value(jph), *name = json_string_value(jname);
    if (!ph || strlen(ph) != 1 || !strchr("XBEiICMstf", ph[0])) {
        problem(db, "event %llu: \"ph\" is %s", ei,
                ph ? "not a phase this reader knows (X B E i I C M s t f)" : "missing");
        return NP_OK;
    }
    char p = ph[0];
    if (!name && p != 'E') {
        problem(db, "event %llu (ph %c): \"name\" missing or not a string", ei, p);
        return NP_OK;
    }
    uint32_t pid, tid = 0;
    if (!get_u32(ev, "pid", &pid)) {
        problem(db, "event %llu ('%s'): \"pid\" missing or not an integer >= 0", ei, name);
        return NP_OK;
    }
    bool thread_ev = strchr("XBEiIstf", p) != NULL;
    if ((thread_ev || p == 'M') && !get_u32(ev, "tid", &tid)) {
        if (thread_ev || !strcmp(name, "thread_name")) {
            problem(db, "event %llu ('%s'): \"tid\" missing or not an integer >= 0", ei, name);
            return NP_OK;
        }
    }
    uint32_t proc = process_index(db, pid);
    if (proc == UINT32_MAX)
        return NP_OK;
    json_t *args = json_object_get(ev, "args");
    if (p == 'M') {
        if (!strcmp(name, TRACE_TRUNCATED)) {
            db->truncated = true;
            json_t *left = json_object_get(args, "events_left_out");
            db->events_left_out = json_is_integer(left) && json_integer_value(left) > 0
                                      ? (uint64_t)json_integer_value(left) : 0;
            return NP_OK;
        }
        const char *nm = json_string_value(json_object_get(args, "name"));
        bool pn = !strcmp(name, "process_name"), tn = !strcmp(name, "thread_name");
        if ((pn || tn) && !nm) {
            problem(db, "event %llu: %s without args.name", ei, name);
            return NP_OK;
        }
        if (pn)
            db->processes[proc].name = intern(db, nm);
        if (tn) {
            uint32_t t = thread_index(db, pid, tid);
            if (t != UINT32_MAX)
                db->threads[t].name = intern(db, nm);
        }
        return NP_OK;
    }
    in->process_used[proc] = true;
    uint64_t ts;
    if (!get_ps(ev, "ts", &ts)) {
        problem(db, "event %llu ('%s'): \"ts\" missing, not a number or negative", ei, name);
        return NP_OK;
    }
    if (p == 'C') {
        add_counter(db, proc, name, args, ts, i);
        return NP_OK;
    }
    uint32_t t = thread_index(db, pid, tid);
    if (t == UINT32_MAX)
        return NP_OK;
    in->thread_used[t] = true;
    const char *cat = json_string_value(json_object_get(ev, "cat"));
    uint32_t cid = intern(db, cat ? cat : ""), nid = name ? intern(db, name) : TDB_NONE;
    switch (p) {
    case 'X': {
        uint64_t dur;
        if (!get_ps(ev, "dur", &dur)) {
            problem(db, "event %llu ('%s'): \"dur\" missing, not a number or negative", ei, name);
            return NP_OK;
        }
        add_slice(db, t, nid, cid, ts, ts + dur, args);
        break;
    }
    case 'B':
        if (!grow((void **)&in->opens, in->n_opens, &in->cap_opens, sizeof *in->opens)) {
            in->oom = true;
            break;
        }
        in->opens[in->n_opens++] = (open_b){t, nid, cid, ts};
        break;
    case 'E': {
        size_t k = in->n_opens;
        while (k && in->opens[k - 1].thread != t)
            k--;
        if (!k) {
            problem(db, "event %llu: an E with no B open on its thread", ei);
            break;
        }
        open_b b = in->opens[k - 1];
        memmove(&in->opens[k - 1], &in->opens[k], (in->n_opens - k) * sizeof *in->opens);
        in->n_opens--;
        if (ts < b.ts)
            problem(db, "event %llu: E before its B", ei);
        else
            add_slice(db, t, b.name, b.cat, b.ts, ts, args);
        break;
    }
    case 's':
    case 't':
    case 'f': {
        json_t *id = json_object_get(ev, "id");
        uint64_t h;
        if (json_is_integer(id))
            h = tmap_mix((uint64_t)json_integer_value(id)) << 1;
        else if (json_is_string(id))
            h = tmap_hash_str(json_string_value(id)) << 1 | 1;
        else {
            problem(db, "event %llu ('%s'): a flow without an \"id\"", ei, name);
            break;
        }
        if (!grow((void **)&in->pts, in->n_pts, &in->cap_pts, sizeof *in->pts)) {
            in->oom = true;
            break;
        }
        in->pts[in->n_pts] = (flow_pt){h, ts, in->n_pts, t, p, i};
        in->n_pts++;
        break;
    }
    default: /* instants */
        break;
    }
    return NP_OK;
}

static int slice_order(const void *a, const void *b)
{
    const tdb_slice *x = a, *y = b;
    if (x->thread != y->thread)
        return x->thread < y->thread ? -1 : 1;
    if (x->start_ps != y->start_ps)
        return x->start_ps < y->start_ps ? -1 : 1;
    if (x->end_ps != y->end_ps)
        return x->end_ps > y->end_ps ? -1 : 1; /* the enclosing one first */
    return 0;
}

static int pt_order(const void *a, const void *b)
{
    const flow_pt *x = a, *y = b;
    static const char rank[128] = {['s'] = 0, ['t'] = 1, ['f'] = 2};
    if (x->id != y->id)
        return x->id < y->id ? -1 : 1;
    if (rank[(int)x->ph] != rank[(int)y->ph])
        return rank[(int)x->ph] < rank[(int)y->ph] ? -1 : 1;
    if (x->ts != y->ts)
        return x->ts < y->ts ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* The deepest slice of thread t enclosing ts, or SIZE_MAX. */
static size_t enclosing(const tdb *db, const size_t *parent, uint32_t t, uint64_t ts)
{
    const tdb_thread *th = &db->threads[t];
    size_t lo = th->first, hi = th->first + th->n; /* last slice with start <= ts */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (db->slices[mid].start_ps <= ts)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == th->first)
        return SIZE_MAX;
    size_t k = lo - 1;
    while (k != SIZE_MAX && db->slices[k].end_ps < ts)
        k = parent[k];
    return k;
}

static np_status finish(tdb *db, np_err *err)
{
    tdb_internal *in = db->in;
    if (db->n_slices)
        qsort(db->slices, db->n_slices, sizeof *db->slices, slice_order);
    size_t *parent = malloc((db->n_slices + 1) * sizeof *parent);
    size_t *stack = malloc((db->n_slices + 1) * sizeof *stack);
    if (!parent || !stack) {
        free(parent);
        free(stack);
        return np_err_set(err, NP_ERR_NOMEM, "out of memory indexing the trace");
    }
    for (size_t i = 0, depth = 0; i < db->n_slices; i++) {
        tdb_slice *s = &db->slices[i];
        tdb_thread *th = &db->threads[s->thread];
        if (!i || s->thread != db->slices[i - 1].thread)
            th->first = i, th->n = 0, depth = 0;
        th->n++;
        while (depth && db->slices[stack[depth - 1]].end_ps <= s->start_ps)
            depth--;
        if (depth && s->end_ps > db->slices[stack[depth - 1]].end_ps) {
            char lb[128];
            tdb_thread_label(db, th, lb, sizeof lb);
            problem(db, "%s: slice '%s' [%llu, %llu] ps overlaps '%s' [%llu, %llu] ps without "
                    "nesting in it", lb, tdb_str(db, s->name), (unsigned long long)s->start_ps,
                    (unsigned long long)s->end_ps, tdb_str(db, db->slices[stack[depth - 1]].name),
                    (unsigned long long)db->slices[stack[depth - 1]].start_ps,
                    (unsigned long long)db->slices[stack[depth - 1]].end_ps);
            depth--; /* go on as if the earlier one had ended */
        }
        parent[i] = depth ? stack[depth - 1] : SIZE_MAX;
        stack[depth++] = i;
    }
    free(stack);
    for (size_t k = 0; k < in->n_opens && !db->truncated; k++)
        problem(db, "a B event of '%s' never ends",
                tdb_str(db, in->opens[k].name) ? tdb_str(db, in->opens[k].name) : "?");
    /* flows: per id one s, one f; steps bound; arrows between consecutive steps */
    if (in->n_pts)
        qsort(in->pts, in->n_pts, sizeof *in->pts, pt_order);
    for (size_t i = 0; i < in->n_pts;) {
        size_t j = i, ns = 0, nf = 0;
        for (; j < in->n_pts && in->pts[j].id == in->pts[i].id; j++)
            ns += in->pts[j].ph == 's', nf += in->pts[j].ph == 'f';
        if ((ns != 1 || nf != 1) && !(db->truncated && ns <= 1 && nf <= 1))
            problem(db, "flow of event %llu: %zu start(s) and %zu end(s) with its id (one each "
                    "expected)", (unsigned long long)in->pts[i].event, ns, nf);
        size_t prev = SIZE_MAX;
        for (size_t k = i; k < j; k++) {
            size_t s = enclosing(db, parent, in->pts[k].thread, in->pts[k].ts);
            if (s == SIZE_MAX) {
                if (!db->truncated) /* its slice may be what the cut left out */
                    problem(db, "flow step of event %llu (ph %c) at %llu ps is inside no slice "
                            "of its thread", (unsigned long long)in->pts[k].event,
                            in->pts[k].ph, (unsigned long long)in->pts[k].ts);
                continue;
            }
            if (prev != SIZE_MAX && ns == 1 && nf == 1) {
                if (!grow((void **)&db->flows, db->n_flows, &in->cap_flows, sizeof *db->flows)) {
                    in->oom = true;
                    break;
                }
                db->flows[db->n_flows++] = (tdb_flow){prev, s};
            }
            prev = s;
        }
        i = j;
    }
    free(parent);
    for (size_t p = 0; p < db->n_processes; p++)
        if (in->process_used[p] && db->processes[p].name == TDB_NONE)
            problem(db, "process %u has no process_name", db->processes[p].pid);
    for (size_t t = 0; t < db->n_threads; t++)
        if (in->thread_used[t] && db->threads[t].name == TDB_NONE)
            problem(db, "thread %u of process %u has no thread_name", db->threads[t].tid,
                    db->threads[t].pid);
    if (in->oom)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory reading the trace");
    return NP_OK;
}

/* What only loading needs (the string table stays). */
static void free_load_state(tdb_internal *in)
{
    free(in->pts);
    free(in->opens);
    free(in->thread_used);
    free(in->process_used);
    free(in->last_v);
    u64map_free(&in->thread_of);
    u64map_free(&in->process_of);
    u64map_free(&in->counter_of);
    in->pts = NULL, in->opens = NULL, in->thread_used = NULL, in->process_used = NULL;
    in->last_v = NULL;
}

np_status tdb_load(const char *path, tdb **out, np_err *err)
{
    return tdb_load_with(path, NULL, out, err);
}

np_status tdb_load_with(const char *path, const trace_read_opts *o, tdb **out, np_err *err)
{
    *out = NULL;
    tdb *db = calloc(1, sizeof *db);
    if (!db || !(db->in = calloc(1, sizeof *db->in))) {
        free(db);
        return np_err_set(err, NP_ERR_NOMEM, "out of memory reading %s", path);
    }
    np_status st = trace_read_with(path, on_event, db, o, err);
    if (st == NP_OK && db->in->oom)
        st = np_err_set(err, NP_ERR_NOMEM, "out of memory reading %s", path);
    if (st == NP_OK)
        st = finish(db, err);
    free_load_state(db->in);
    if (st != NP_OK) {
        tdb_free(db);
        return st;
    }
    *out = db;
    return NP_OK;
}

void tdb_free(tdb *db)
{
    if (!db)
        return;
    if (db->in) {
        strtab_free(&db->in->strs);
        free_load_state(db->in);
        free(db->in);
    }
    free(db->slices);
    free(db->threads);
    free(db->processes);
    free(db->flows);
    free(db->counters);
    free(db);
}

const char *tdb_str(const tdb *db, uint32_t id)
{
    return id < db->in->strs.n ? db->in->strs.strs[id] : NULL;
}

uint32_t tdb_find_str(const tdb *db, const char *s) { return strtab_find(&db->in->strs, s); }

void tdb_thread_label(const tdb *db, const tdb_thread *t, char *buf, size_t n)
{
    const char *pn = tdb_str(db, db->processes[t->process].name), *tn = tdb_str(db, t->name);
    char pb[24], tb[24];
    if (!pn)
        snprintf(pb, sizeof pb, "pid %u", t->pid), pn = pb;
    if (!tn)
        snprintf(tb, sizeof tb, "tid %u", t->tid), tn = tb;
    snprintf(buf, n, "%s / %s", pn, tn);
}
