/* trace_layout.c — the trace layout as a trace_sink over the streaming writer (see
 * trace_layout.h and docs/traces.md). */
#include "trace_layout.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace_map.h"

#define LAYOUT_TRACKS_MAX 8    /* distinct span track names */
#define LAYOUT_SPAN_LANES 8    /* lanes of one span track */
#define LAYOUT_BIN0_PS 1000    /* a counter's first bin width: 1 ns */
#define LAYOUT_TID_SPAN 192    /* core tids: 256 per core; units 0..191, span tracks 192.. */
#define LAYOUT_TID_CHIP 0xFFFF00u
#define LAYOUT_TID_CHIP_UNIT 0xFFFE00u /* a chip's own units: + 32 unit + lane */
#define LAYOUT_TID_LINK 0xFE0000u /* a chip's link threads: + the link's index (16 bits) */

/* ---- the layout ------------------------------------------------------------------------------- */

typedef struct channel { /* messages from (sc, score) to (dc, dcore) with one tag */
    uint32_t sc, score, dc, dcore;
    uint64_t tag;
    uint32_t id; /* 1, 2, ... in order of first sight (0: an empty slot) */
    uint32_t n_sent, n_recv;
} channel;

typedef struct counter { /* a bandwidth counter's bins: bin i covers [(first+i)w, (first+i+1)w) */
    uint32_t pid, name; /* name: index into names */
    bool active;
    uint64_t width_ps, first;
    uint32_t n; /* bins in use */
    double bytes[TRACE_COUNTER_BINS];
} counter;

typedef struct group { /* an open collective: its flow and the last traced step, held back */
    uint64_t group, flow;
    uint32_t seen, steps;
    uint32_t pid, tid;
    uint64_t t_ps;
    bool pending;
} group;

struct trace_layout {
    trace_writer *w;
    trace_level level;
    trace_chips chips;
    u64map named;      /* (pid << 32 | tid) + 1, tid UINT32_MAX for the process */
    u64map lanes_of;   /* span track (chip, core, k) -> index into lanes */
    uint64_t *lanes;   /* LAYOUT_SPAN_LANES end times per span track */
    size_t n_lanes, cap_lanes;
    const char *tracks[LAYOUT_TRACKS_MAX];
    char *track_names[LAYOUT_TRACKS_MAX];
    unsigned n_tracks;
    channel *chan;     /* open addressing on the five fields */
    size_t chan_cap, chan_n;
    uint64_t next_flow;
    group *groups;
    size_t n_groups, cap_groups;
    strtab names;      /* counter names */
    u64map counter_of; /* (pid << 32 | name) + 1 -> index into counters */
    counter **counters;
    size_t n_counters, cap_counters;
    uint64_t t_last_ps;
    bool oom;
};

np_status trace_chips_parse(const char *opt, const char *list, trace_chips *out, np_err *err)
{
    memset(out, 0, sizeof *out);
    uint32_t lo_max = 0;
    const char *p = list;
    for (int pass = 0; pass < 2; pass++) { /* 1: the largest chip, 2: the bits */
        p = list;
        if (pass == 1) {
            out->n_bits = lo_max + 1;
            if (!(out->bits = calloc((out->n_bits + 63) / 64, sizeof *out->bits)))
                return np_err_set(err, NP_ERR_NOMEM, "out of memory");
        }
        for (;;) {
            char *end;
            if (*p < '0' || *p > '9')
                goto bad;
            unsigned long a = strtoul(p, &end, 10), b = a;
            if (*end == '-') {
                p = end + 1;
                if (*p < '0' || *p > '9')
                    goto bad;
                b = strtoul(p, &end, 10);
            }
            if (a > b || b >= (1ul << 20))
                goto bad;
            if (pass == 0 && b > lo_max)
                lo_max = (uint32_t)b;
            for (unsigned long c = a; pass == 1 && c <= b; c++)
                out->bits[c / 64] |= 1ull << (c % 64);
            p = end;
            if (*p == '\0')
                break;
            if (*p++ != ',')
                goto bad;
        }
    }
    return NP_OK;
bad:
    trace_chips_free(out);
    return np_err_set(err, NP_ERR_USAGE, "%s: expected chips as N, A-B (A <= B < 1048576) "
                      "separated by commas, got '%s' (at '%s')", opt, list, p);
}

bool trace_chips_has(const trace_chips *c, uint32_t chip)
{
    if (!c->bits)
        return true;
    return chip < c->n_bits && (c->bits[chip / 64] >> (chip % 64) & 1);
}

np_status trace_chips_check(const trace_chips *c, uint64_t n, const char *opt, np_err *err)
{
    if (!c->bits || c->n_bits <= n) /* n_bits: the largest chip selected, plus 1 */
        return NP_OK;
    return np_err_set(err, NP_ERR_USAGE, "%s: chip %" PRIu32 " is not in the system, which has "
                      "%" PRIu64 " chip%s (0-%" PRIu64 ")", opt, c->n_bits - 1, n,
                      n == 1 ? "" : "s", n ? n - 1 : 0);
}

void trace_chips_free(trace_chips *c)
{
    free(c->bits);
    memset(c, 0, sizeof *c);
}

np_status trace_level_parse(const char *opt, const char *text, trace_level *out, np_err *err)
{
    if (!strcmp(text, "kernel"))
        *out = TRACE_LEVEL_KERNEL;
    else if (!strcmp(text, "insn"))
        *out = TRACE_LEVEL_INSN;
    else
        return np_err_set(err, NP_ERR_USAGE, "%s: unknown level '%s' (known: kernel, insn)",
                          opt, text);
    return NP_OK;
}

static bool traced(const trace_layout *l, uint32_t chip)
{
    return chip == TRACE_SYSTEM_CHIP || trace_chips_has(&l->chips, chip);
}

static uint32_t pid_of(uint32_t chip) { return chip == TRACE_SYSTEM_CHIP ? TRACE_PID_SYSTEM : chip; }

/* Whether (pid, tid) is seen for the first time (and notes it). */
static bool first_sight(trace_layout *l, uint32_t pid, uint32_t tid)
{
    bool fresh;
    if (!u64map_slot(&l->named, ((uint64_t)pid << 32 | tid) + 1, &fresh)) {
        l->oom = true;
        return false;
    }
    return fresh;
}

static void name_process(trace_layout *l, uint32_t pid)
{
    if (!first_sight(l, pid, UINT32_MAX))
        return;
    char buf[32];
    if (pid == TRACE_PID_SYSTEM)
        snprintf(buf, sizeof buf, "system");
    else
        snprintf(buf, sizeof buf, "chip %u", pid);
    trace_name_process(l->w, pid, buf);
    trace_sort_process(l->w, pid, pid);
}

/* Names thread tid of pid (and pid) the first time: "<prefix><base>" with "[lane]" for
 * lanes after the first. */
static void name_thread(trace_layout *l, uint32_t pid, uint32_t tid, const char *prefix,
                        const char *base, unsigned lane)
{
    name_process(l, pid);
    if (!first_sight(l, pid, tid))
        return;
    char buf[160];
    if (lane)
        snprintf(buf, sizeof buf, "%s%s[%u]", prefix, base, lane);
    else
        snprintf(buf, sizeof buf, "%s%s", prefix, base);
    trace_name_thread(l->w, pid, tid, buf);
}

static void seen_time(trace_layout *l, uint64_t t)
{
    if (t > l->t_last_ps)
        l->t_last_ps = t;
}

/* ---- messages --------------------------------------------------------------------------------- */

static channel *channel_get(trace_layout *l, uint32_t sc, uint32_t score, uint32_t dc,
                            uint32_t dcore, uint64_t tag)
{
    if (2 * (l->chan_n + 1) > l->chan_cap) {
        size_t cap = l->chan_cap ? 2 * l->chan_cap : 256;
        channel *v = calloc(cap, sizeof *v);
        if (!v)
            return NULL;
        for (size_t i = 0; i < l->chan_cap; i++) {
            channel *c = &l->chan[i];
            if (!c->id)
                continue;
            uint64_t h = tmap_mix(tmap_mix(((uint64_t)c->sc << 32 | c->score) ^
                                     tmap_mix((uint64_t)c->dc << 32 | c->dcore)) ^ c->tag);
            size_t j = h & (cap - 1);
            while (v[j].id)
                j = (j + 1) & (cap - 1);
            v[j] = *c;
        }
        free(l->chan);
        l->chan = v, l->chan_cap = cap;
    }
    uint64_t h = tmap_mix(tmap_mix(((uint64_t)sc << 32 | score) ^ tmap_mix((uint64_t)dc << 32 | dcore)) ^
                       tag);
    size_t j = h & (l->chan_cap - 1);
    for (;; j = (j + 1) & (l->chan_cap - 1)) {
        channel *c = &l->chan[j];
        if (!c->id) {
            *c = (channel){sc, score, dc, dcore, tag, (uint32_t)++l->chan_n, 0, 0};
            break;
        }
        if (c->sc == sc && c->score == score && c->dc == dc && c->dcore == dcore && c->tag == tag)
            break;
    }
    return &l->chan[j];
}

/* The flow of a message: the n-th send and the n-th receive of a channel share the id
 * (channel id << 32 | n); below 2^53, exact in every JSON reader, for 2^21 channels. */
static void message_flow(trace_layout *l, const trace_unit_slice *s, uint32_t pid, uint32_t tid)
{
    if (!traced(l, s->peer_chip))
        return;
    bool send = s->msg == TRACE_MSG_SEND;
    channel *c = send ? channel_get(l, s->chip, s->core, s->peer_chip, s->peer_core, s->tag)
                      : channel_get(l, s->peer_chip, s->peer_core, s->chip, s->core, s->tag);
    if (!c) {
        l->oom = true;
        return;
    }
    uint32_t n = send ? c->n_sent++ : c->n_recv++;
    uint64_t id = (uint64_t)(c->id & 0x1fffff) << 32 | n;
    trace_flow(l->w, send ? 's' : 'f', id, pid, tid, "msg", "msg", s->start_ps / 2 + s->end_ps / 2 +
               (s->start_ps % 2 + s->end_ps % 2) / 2);
}

/* ---- the sink entries ------------------------------------------------------------------------- */

static void lay_unit_slice(void *ctx, const trace_unit_slice *s)
{
    trace_layout *l = ctx;
    seen_time(l, s->end_ps);
    bool chip_unit = s->core == TRACE_NO_CORE; /* a summary of the chip: every level keeps it */
    if ((!chip_unit && l->level < TRACE_LEVEL_INSN) || !traced(l, s->chip))
        return;
    unsigned unit = s->unit < TRACE_UNITS_MAX ? s->unit : TRACE_UNITS_MAX - 1;
    unsigned lane = s->lane < TRACE_LANES_MAX ? s->lane : TRACE_LANES_MAX - 1;
    uint32_t pid = pid_of(s->chip);
    uint32_t tid = chip_unit ? LAYOUT_TID_CHIP_UNIT + unit * TRACE_LANES_MAX + lane
                             : s->core * 256 + unit * TRACE_LANES_MAX + lane;
    char prefix[24] = "chip.";
    if (!chip_unit)
        snprintf(prefix, sizeof prefix, "core%u.", s->core);
    name_thread(l, pid, tid, prefix, s->unit_name, lane);
    uint64_t dur = s->end_ps > s->start_ps ? s->end_ps - s->start_ps : 0;
    trace_slice(l->w, pid, tid, s->name, s->cat ? s->cat : s->unit_name, s->start_ps, dur,
                s->args, s->n_args);
    if (s->msg != TRACE_MSG_NONE)
        message_flow(l, s, pid, tid);
}

static unsigned track_index(trace_layout *l, const char *track)
{
    for (unsigned k = 0; k < l->n_tracks; k++)
        if (l->tracks[k] == track || !strcmp(l->tracks[k], track))
            return k;
    if (l->n_tracks == LAYOUT_TRACKS_MAX)
        return LAYOUT_TRACKS_MAX - 1;
    char *copy = strdup(track);
    if (!copy) {
        l->oom = true;
        return 0;
    }
    l->track_names[l->n_tracks] = copy;
    l->tracks[l->n_tracks] = copy;
    return l->n_tracks++;
}

/* The lane of span track (chip, core, k) free at start_ps (the first whose last span has
 * ended; the earliest-ending one if none), now busy until end_ps. */
static unsigned span_lane(trace_layout *l, uint32_t chip, uint32_t core, unsigned k,
                          uint64_t start_ps, uint64_t end_ps)
{
    bool fresh;
    uint64_t key = ((uint64_t)chip << 32 | (uint64_t)(core & 0xffffff) << 8 | k) + 1;
    uint64_t *slot = u64map_slot(&l->lanes_of, key, &fresh);
    if (!slot) {
        l->oom = true;
        return 0;
    }
    if (fresh) {
        if (l->n_lanes == l->cap_lanes) {
            size_t cap = l->cap_lanes ? 2 * l->cap_lanes : 64;
            uint64_t *v = realloc(l->lanes, cap * LAYOUT_SPAN_LANES * sizeof *v);
            if (!v) {
                l->oom = true;
                return 0;
            }
            l->lanes = v, l->cap_lanes = cap;
        }
        memset(&l->lanes[l->n_lanes * LAYOUT_SPAN_LANES], 0, LAYOUT_SPAN_LANES * sizeof *l->lanes);
        *slot = l->n_lanes++;
    }
    uint64_t *ends = &l->lanes[*slot * LAYOUT_SPAN_LANES];
    unsigned best = 0;
    for (unsigned i = 0; i < LAYOUT_SPAN_LANES; i++) {
        if (ends[i] <= start_ps) {
            best = i;
            break;
        }
        if (ends[i] < ends[best])
            best = i;
    }
    if (end_ps > ends[best])
        ends[best] = end_ps;
    return best;
}

static void group_emit(trace_layout *l, group *g, char phase)
{
    trace_flow(l->w, phase, g->flow, g->pid, g->tid, "coll", "coll", g->t_ps);
    g->steps++;
    g->pending = false;
}

/* One rank's span of collective s->group: the previous traced step goes out ('s' or 't') and
 * this one waits; the last rank's step ends the flow. */
static void group_step(trace_layout *l, const trace_span *s, uint32_t pid, uint32_t tid)
{
    group *g = NULL;
    for (size_t i = 0; i < l->n_groups; i++)
        if (l->groups[i].group == s->group)
            g = &l->groups[i];
    if (!g) {
        if (l->n_groups == l->cap_groups) {
            size_t cap = l->cap_groups ? 2 * l->cap_groups : 16;
            group *v = realloc(l->groups, cap * sizeof *v);
            if (!v) {
                l->oom = true;
                return;
            }
            l->groups = v, l->cap_groups = cap;
        }
        g = &l->groups[l->n_groups++];
        *g = (group){.group = s->group, .flow = (1ull << 53) - 1 - l->next_flow++};
    }
    g->seen++;
    if (traced(l, s->chip)) {
        if (g->pending)
            group_emit(l, g, g->steps ? 't' : 's');
        g->pid = pid, g->tid = tid, g->t_ps = s->start_ps, g->pending = true;
    }
    if (g->seen >= s->group_size) {
        if (g->pending && g->steps)
            group_emit(l, g, 'f');
        *g = l->groups[--l->n_groups];
    }
}

static void lay_span(void *ctx, const trace_span *s)
{
    trace_layout *l = ctx;
    seen_time(l, s->end_ps);
    unsigned k = track_index(l, s->track);
    uint32_t pid = pid_of(s->chip), tid = 0;
    if (traced(l, s->chip)) {
        unsigned lane = span_lane(l, s->chip, s->core, k, s->start_ps, s->end_ps);
        char prefix[24] = "";
        if (s->core == TRACE_NO_CORE) {
            tid = LAYOUT_TID_CHIP + 16 * k + lane;
        } else {
            tid = s->core * 256 + LAYOUT_TID_SPAN + LAYOUT_SPAN_LANES * k + lane;
            snprintf(prefix, sizeof prefix, "core%u ", s->core);
        }
        name_thread(l, pid, tid, prefix, s->track, lane);
        trace_slice(l->w, pid, tid, s->name, s->cat, s->start_ps,
                    s->end_ps > s->start_ps ? s->end_ps - s->start_ps : 0, s->args, s->n_args);
    }
    if (s->group && s->group_size > 1)
        group_step(l, s, pid, tid);
}

static counter *counter_get(trace_layout *l, uint32_t pid, const char *name)
{
    uint32_t id = strtab_intern(&l->names, name);
    if (id == UINT32_MAX) {
        l->oom = true;
        return NULL;
    }
    bool fresh;
    uint64_t *slot = u64map_slot(&l->counter_of, ((uint64_t)pid << 32 | id) + 1, &fresh);
    if (!slot) {
        l->oom = true;
        return NULL;
    }
    if (fresh) {
        counter *c = calloc(1, sizeof *c);
        if (l->n_counters == l->cap_counters) {
            size_t cap = l->cap_counters ? 2 * l->cap_counters : 16;
            counter **v = realloc(l->counters, cap * sizeof *v);
            if (v)
                l->counters = v, l->cap_counters = cap;
        }
        if (!c || l->n_counters == l->cap_counters) {
            free(c);
            l->oom = true;
            return NULL; /* the slot stays 0: the next call tries again */
        }
        c->pid = pid, c->name = id;
        l->counters[l->n_counters] = c;
        *slot = l->n_counters++ + 1;
    }
    return *slot ? l->counters[*slot - 1] : NULL;
}

/* Halves the counter's resolution: bins twice as wide, pairs merged. */
static void counter_coarsen(counter *c)
{
    uint64_t first = c->first / 2;
    double merged[TRACE_COUNTER_BINS] = {0};
    uint32_t n = 0;
    for (uint32_t i = 0; i < c->n; i++) {
        uint64_t j = (c->first + i) / 2 - first;
        merged[j] += c->bytes[i];
        n = (uint32_t)j + 1;
    }
    memcpy(c->bytes, merged, sizeof merged);
    c->first = first, c->n = n, c->width_ps *= 2;
}

static void lay_transfer(void *ctx, const trace_transfer *t)
{
    trace_layout *l = ctx;
    seen_time(l, t->end_ps);
    if (!traced(l, t->chip))
        return;
    counter *c = counter_get(l, pid_of(t->chip), t->counter);
    if (!c)
        return;
    uint64_t end = t->end_ps > t->start_ps ? t->end_ps : t->start_ps + 1;
    if (!c->active) {
        c->active = true;
        c->width_ps = LAYOUT_BIN0_PS;
        c->first = t->start_ps / c->width_ps;
        c->n = 0;
        memset(c->bytes, 0, sizeof c->bytes);
    }
    for (;;) { /* widen until [start, end) fits with what is there */
        uint64_t lo = t->start_ps / c->width_ps, hi = (end - 1) / c->width_ps;
        if (c->n && c->first < lo)
            lo = c->first;
        if (c->n && c->first + c->n - 1 > hi)
            hi = c->first + c->n - 1;
        if (hi - lo < TRACE_COUNTER_BINS) {
            if (lo < c->first) {
                uint64_t by = c->first - lo;
                memmove(c->bytes + by, c->bytes, c->n * sizeof *c->bytes);
                memset(c->bytes, 0, by * sizeof *c->bytes);
                c->n += (uint32_t)by, c->first = lo;
            }
            if (hi - c->first + 1 > c->n)
                c->n = (uint32_t)(hi - c->first + 1);
            break;
        }
        counter_coarsen(c);
    }
    double span = (double)(end - t->start_ps);
    for (uint64_t b = t->start_ps / c->width_ps; b <= (end - 1) / c->width_ps; b++) {
        uint64_t a0 = b * c->width_ps, a1 = a0 + c->width_ps;
        uint64_t s = t->start_ps > a0 ? t->start_ps : a0, e = end < a1 ? end : a1;
        c->bytes[b - c->first] += (double)t->bytes * (double)(e - s) / span;
    }
}

static void lay_level(void *ctx, uint32_t chip, const char *name, uint64_t t_ps, double value)
{
    trace_layout *l = ctx;
    seen_time(l, t_ps);
    if (!traced(l, chip))
        return;
    name_process(l, pid_of(chip));
    trace_arg a = TRACE_ARG_F("value", value);
    trace_counter(l->w, pid_of(chip), name, t_ps, &a, 1);
}

static void lay_link_slice(void *ctx, const trace_link_slice *s)
{
    trace_layout *l = ctx;
    seen_time(l, s->end_ps);
    if (l->level < TRACE_LEVEL_INSN || !traced(l, s->chip))
        return;
    bool sys = s->chip == TRACE_SYSTEM_CHIP;
    uint32_t pid = pid_of(s->chip), tid = sys ? s->link : LAYOUT_TID_LINK + (s->link & 0xffff);
    name_thread(l, pid, tid, sys ? "" : "link ", s->link_name, 0);
    trace_arg a = TRACE_ARG_U("bytes", s->bytes);
    trace_slice(l->w, pid, tid, s->name, "link", s->start_ps,
                s->end_ps > s->start_ps ? s->end_ps - s->start_ps : 0, &a, 1);
}

/* Every active counter's bins as samples (a sample where the value changes, 0 at the end). */
static void lay_run_end(void *ctx, uint64_t end_ps)
{
    trace_layout *l = ctx;
    seen_time(l, end_ps);
    for (size_t i = 0; i < l->n_counters; i++) {
        counter *c = l->counters[i];
        if (!c->active)
            continue;
        name_process(l, c->pid);
        double last = -1;
        for (uint32_t b = 0; b < c->n; b++) {
            double gbs = c->bytes[b] / (double)c->width_ps * 1000.0; /* bytes/ps -> GB/s */
            if (gbs == last)
                continue;
            trace_arg a = TRACE_ARG_F("GB/s", gbs);
            trace_counter(l->w, c->pid, l->names.strs[c->name], (c->first + b) * c->width_ps, &a, 1);
            last = gbs;
        }
        trace_arg z = TRACE_ARG_F("GB/s", 0.0);
        trace_counter(l->w, c->pid, l->names.strs[c->name], (c->first + c->n) * c->width_ps, &z, 1);
        c->active = false;
    }
}

trace_sink trace_layout_sink(trace_layout *lay)
{
    static const trace_sink_ops ops = {lay_unit_slice, lay_span, lay_transfer, lay_level,
                                       lay_link_slice, lay_run_end};
    return (trace_sink){&ops, lay};
}

const trace_writer *trace_layout_writer(const trace_layout *lay) { return lay->w; }

np_status trace_layout_open(const char *path, const trace_layout_opts *opts, trace_layout **out,
                            np_err *err)
{
    *out = NULL;
    trace_layout *l = calloc(1, sizeof *l);
    if (!l)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory opening a trace");
    l->level = opts ? opts->level : TRACE_LEVEL_INSN;
    if (opts && opts->chips.bits) {
        size_t words = (opts->chips.n_bits + 63) / 64;
        if (!(l->chips.bits = malloc(words * sizeof *l->chips.bits))) {
            free(l);
            return np_err_set(err, NP_ERR_NOMEM, "out of memory opening a trace");
        }
        memcpy(l->chips.bits, opts->chips.bits, words * sizeof *l->chips.bits);
        l->chips.n_bits = opts->chips.n_bits;
    }
    np_status st = trace_open(path, &l->w, err);
    if (st != NP_OK) {
        trace_chips_free(&l->chips);
        free(l);
        return st;
    }
    uint64_t max = opts && opts->max_bytes ? opts->max_bytes : TRACE_LAYOUT_MAX_BYTES;
    trace_set_max_bytes(l->w, max == UINT64_MAX ? 0 : max);
    *out = l;
    return NP_OK;
}

np_status trace_layout_close(trace_layout *l, np_err *err)
{
    return trace_layout_close_counted(l, NULL, err);
}

np_status trace_layout_close_counted(trace_layout *l, uint64_t *left_out, np_err *err)
{
    if (left_out)
        *left_out = 0;
    if (!l)
        return NP_OK;
    lay_run_end(l, l->t_last_ps);
    for (size_t i = 0; i < l->n_groups; i++) /* collectives some ranks never reached */
        if (l->groups[i].pending && l->groups[i].steps)
            group_emit(l, &l->groups[i], 'f');
    if (left_out)
        *left_out = trace_dropped(l->w);
    np_status st = trace_close(l->w, err);
    if (st == NP_OK && l->oom)
        st = np_err_set(err, NP_ERR_NOMEM, "out of memory writing the trace (events dropped)");
    u64map_free(&l->named);
    u64map_free(&l->lanes_of);
    u64map_free(&l->counter_of);
    free(l->lanes);
    for (unsigned k = 0; k < l->n_tracks; k++)
        free(l->track_names[k]);
    free(l->chan);
    free(l->groups);
    strtab_free(&l->names);
    for (size_t i = 0; i < l->n_counters; i++)
        free(l->counters[i]);
    free(l->counters);
    trace_chips_free(&l->chips);
    free(l);
    return st;
}
