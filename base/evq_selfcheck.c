/* evq_selfcheck.c — evq_selfcheck (declared in evq.h): the event queue against a reference.
 *
 * One seeded workload runs twice: once on a real evq and once on a reference queue that is a
 * plain binary heap of (time, id) with a state byte per event id — nothing shared with evq.c's
 * wheel. The workload is the same code in both runs and draws from the same seeded generator,
 * so the two runs make the same calls for as long as they dispatch the same events; the real
 * run compares every dispatch (time, id, and what its cancellations returned) with the
 * reference's record as it goes, and stops at the first difference.
 *
 * The workload moves through six phases (by events dispatched), each with its own spacing of
 * new events and its own target population, so the queue sees ties, nested scheduling,
 * cancellations, growth and shrinkage, spacing changes of several orders of magnitude, and
 * the long same-time runs of lockstep systems:
 *
 *   phase  times of new events (ps after the parent's time t)   population target (<= n/8)
 *   0      multiples of 16 in [0, 112]: many ties               2,000
 *   1      10^6 + [0, 10^8)                                     50
 *   2      0, 1 or 2: nearly all ties                           20,000
 *   3      90% [0, 1000), 10% [0, 10^12)                        500
 *   4      lockstep, cycle 1,000 ps, 1 to 64 cycles ahead       20,000 (about 300 per time)
 *   5      lockstep, cycle 100,000 ps, 1 to 4 cycles ahead      2,000 (about 500 per time)
 *
 * Lockstep: like chips clocked together, every event dispatched in cycle k = t / cycle puts
 * its children at the start of one later cycle chosen by a hash of k, so all of a cycle's
 * events schedule, one after another, into the same time; one child in eight is at t itself
 * (scheduled at now from inside a same-time run) and one in sixteen at a random time of the
 * next four cycles (lone events among the runs). Cancellations pick among recent events, so
 * they fall inside pending runs.
 *
 * Between dispatch batches the driver schedules events from outside callbacks at the current
 * time and just after, and alternates evq_run_until over a phase-sized window (in lockstep
 * phases half the time ending exactly at a cycle start, where a run may be pending) with
 * evq_step; one dispatch in 256 calls evq_stop, so runs also end in the middle of a time.
 */
#include <stdio.h>
#include <stdlib.h>

#include "evq.h"
#include "rng.h"

#define SC_RING 1024 /* recent events that a cancellation may pick */
#define SC_PHASES 6

enum { SC_PENDING = 1, SC_FIRED = 2, SC_CANCELLED = 3 };

typedef struct sc_rec {
    uint64_t time;
    uint64_t id_flags; /* id in the low 56 bits; in the top 8: cancellation tried (1) and
                          done (2), stop requested (4) */
} sc_rec;

typedef struct sc_ref_ent {
    uint64_t time, id;
} sc_ref_ent;

typedef struct sc_work {
    /* the queue under test, or NULL for the reference run */
    evq *q;
    /* reference queue */
    sc_ref_ent *heap;
    size_t heap_n, heap_cap;
    uint8_t *state; /* by id */
    size_t state_cap;
    uint64_t ref_now;
    bool ref_stop;
    /* workload */
    rng r;
    uint64_t cycle_key; /* picks the lockstep phases' next cycles, from the seed */
    uint64_t n_target, n_disp, n_cancelled, next_id, live;
    struct {
        uint64_t id;
        evq_handle h;
    } ring[SC_RING];
    uint64_t ring_n;
    /* record (reference run) or comparison (real run) */
    sc_rec *rec;
    uint64_t hash;
    bool failed;       /* a divergence or an error stopped the run */
    np_status fail_st;
    char fail_msg[NP_ERR_MSG_MAX];
} sc_work;

static const uint64_t sc_target[SC_PHASES] = {2000, 50, 20000, 500, 20000, 2000};

/* Lockstep phases: cycle length (ps) and how many cycles ahead children may go; 0 elsewhere. */
static const uint64_t sc_cycle[SC_PHASES] = {0, 0, 0, 0, 1000, 100000};
static const uint64_t sc_ahead[SC_PHASES] = {0, 0, 0, 0, 64, 4};

static unsigned sc_phase(const sc_work *w)
{
    return (unsigned)(w->n_disp * SC_PHASES / w->n_target);
}

static uint64_t sc_now(const sc_work *w)
{
    return w->q ? evq_now(w->q) : w->ref_now;
}

static void sc_fail(sc_work *w, np_status st, const char *msg)
{
    if (!w->failed) {
        w->failed = true;
        w->fail_st = st;
        snprintf(w->fail_msg, sizeof w->fail_msg, "%s", msg);
    }
    if (w->q)
        evq_stop(w->q);
    else
        w->ref_stop = true;
}

/* ---- the reference queue: binary heap by (time, id); ids increase with scheduling order -- */

static bool sc_ref_lt(const sc_ref_ent *a, const sc_ref_ent *b)
{
    return a->time < b->time || (a->time == b->time && a->id < b->id);
}

static bool sc_ref_push(sc_work *w, uint64_t t, uint64_t id)
{
    if (w->heap_n == w->heap_cap) {
        size_t cap = w->heap_cap ? 2 * w->heap_cap : 1024;
        sc_ref_ent *h = realloc(w->heap, cap * sizeof *h);
        if (!h)
            return false;
        w->heap = h;
        w->heap_cap = cap;
    }
    if (id >= w->state_cap) {
        size_t cap = w->state_cap ? 2 * w->state_cap : 4096;
        while (cap <= id)
            cap *= 2;
        uint8_t *s = realloc(w->state, cap);
        if (!s)
            return false;
        for (size_t i = w->state_cap; i < cap; i++)
            s[i] = 0;
        w->state = s;
        w->state_cap = cap;
    }
    w->state[id] = SC_PENDING;
    sc_ref_ent x = {t, id};
    size_t i = w->heap_n++;
    while (i > 0 && sc_ref_lt(&x, &w->heap[(i - 1) / 2])) {
        w->heap[i] = w->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    w->heap[i] = x;
    return true;
}

/* Removes the earliest entry, cancelled ones included, into *out; false when empty. */
static bool sc_ref_pop(sc_work *w, sc_ref_ent *out)
{
    if (w->heap_n == 0)
        return false;
    *out = w->heap[0];
    sc_ref_ent x = w->heap[--w->heap_n];
    size_t n = w->heap_n, i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && sc_ref_lt(&w->heap[c + 1], &w->heap[c]))
            c++;
        if (!sc_ref_lt(&w->heap[c], &x))
            break;
        w->heap[i] = w->heap[c];
        i = c;
    }
    if (n)
        w->heap[i] = x;
    return true;
}

/* ---- the workload ------------------------------------------------------------------------- */

static void sc_fire(evq *q, void *ctx, uint64_t id);

static void sc_schedule(sc_work *w, uint64_t t)
{
    uint64_t id = w->next_id++;
    evq_handle h = EVQ_HANDLE_NONE;
    if (w->q) {
        np_err e = {0};
        if (evq_schedule_at(w->q, t, sc_fire, w, id, &h, &e) != NP_OK) {
            sc_fail(w, e.status, e.msg);
            return;
        }
    } else if (!sc_ref_push(w, t, id)) {
        sc_fail(w, NP_ERR_NOMEM, "evq self-check: out of memory in the reference queue");
        return;
    }
    w->ring[w->ring_n % SC_RING].id = id;
    w->ring[w->ring_n % SC_RING].h = h;
    w->ring_n++;
    w->live++;
}

static bool sc_cancel_random(sc_work *w)
{
    if (w->ring_n == 0)
        return false;
    uint64_t n = w->ring_n < SC_RING ? w->ring_n : SC_RING;
    uint64_t k = rng_below(&w->r, n);
    bool ok;
    if (w->q) {
        ok = evq_cancel(w->q, w->ring[k].h);
    } else {
        uint64_t id = w->ring[k].id;
        ok = w->state[id] == SC_PENDING;
        if (ok)
            w->state[id] = SC_CANCELLED;
    }
    if (ok) {
        w->live--;
        w->n_cancelled++;
    }
    return ok;
}

/* The time of a new event whose parent (or the driver) is at time t. */
static uint64_t sc_child_time(sc_work *w, unsigned phase, uint64_t t)
{
    switch (phase) {
    case 0:
        return t + 16 * rng_below(&w->r, 8);
    case 1:
        return t + 1000000 + rng_below(&w->r, 100000000);
    case 2:
        return t + rng_below(&w->r, 3);
    case 3:
        return t + (rng_below(&w->r, 10) ? rng_below(&w->r, 1000)
                                         : rng_below(&w->r, 1000000000000));
    default: {
        uint64_t cycle = sc_cycle[phase], k = t / cycle, u = rng_below(&w->r, 16);
        if (u < 2)
            return t;
        if (u == 2)
            return t + rng_below(&w->r, 4 * cycle);
        uint64_t x = k ^ w->cycle_key;
        return (k + 1 + rng_splitmix64(&x) % sc_ahead[phase]) * cycle;
    }
    }
}

static uint64_t sc_fnv1a(uint64_t h, uint64_t v)
{
    for (int i = 0; i < 8; i++) {
        h ^= (v >> (8 * i)) & 0xff;
        h *= 0x100000001b3ULL;
    }
    return h;
}

/* What every dispatched event does, in both runs. */
static void sc_on_event(sc_work *w, uint64_t t, uint64_t id)
{
    unsigned phase = sc_phase(w);
    w->live--;
    uint64_t target = sc_target[phase] < w->n_target / 8 ? sc_target[phase] : w->n_target / 8;
    unsigned children = w->live < target ? 2 : w->live > 2 * target ? 0 : 1;
    if (rng_below(&w->r, 16) == 0)
        children++;
    for (unsigned i = 0; i < children && !w->failed; i++)
        sc_schedule(w, sc_child_time(w, phase, t));
    uint64_t flags = 0;
    if (rng_below(&w->r, 8) == 0)
        flags = sc_cancel_random(w) ? 3 : 1;
    if (rng_below(&w->r, 256) == 0) {
        flags |= 4;
        if (w->q)
            evq_stop(w->q);
        else
            w->ref_stop = true;
    }

    uint64_t i = w->n_disp++;
    sc_rec got = {t, id | flags << 56};
    w->hash = sc_fnv1a(sc_fnv1a(w->hash, t), id);
    if (!w->q) {
        w->rec[i] = got;
    } else if (got.time != w->rec[i].time || got.id_flags != w->rec[i].id_flags) {
        char msg[NP_ERR_MSG_MAX];
        snprintf(msg, sizeof msg,
                 "evq self-check: dispatch %llu differs: queue ran event %llu at %llu ps "
                 "(flags %llu), reference ran event %llu at %llu ps (flags %llu)",
                 (unsigned long long)i, (unsigned long long)id, (unsigned long long)t,
                 (unsigned long long)flags,
                 (unsigned long long)(w->rec[i].id_flags & ((1ULL << 56) - 1)),
                 (unsigned long long)w->rec[i].time,
                 (unsigned long long)(w->rec[i].id_flags >> 56));
        sc_fail(w, NP_ERR_INTERNAL, msg);
    }
    if (w->n_disp == w->n_target) {
        if (w->q)
            evq_stop(w->q);
        else
            w->ref_stop = true;
    }
}

static void sc_fire(evq *q, void *ctx, uint64_t id)
{
    sc_on_event(ctx, evq_now(q), id);
}

/* ---- the driver --------------------------------------------------------------------------- */

/* Reference evq_run_until (max_events UINT64_MAX) or evq_step (max_events 1). */
static void sc_ref_run(sc_work *w, uint64_t t_end, uint64_t max_events)
{
    w->ref_stop = false;
    uint64_t done = 0;
    sc_ref_ent e;
    while (done < max_events && !w->ref_stop && w->heap_n) {
        if (w->state[w->heap[0].id] == SC_CANCELLED) {
            sc_ref_pop(w, &e);
            continue;
        }
        if (w->heap[0].time > t_end)
            break;
        sc_ref_pop(w, &e);
        w->state[e.id] = SC_FIRED;
        w->ref_now = e.time;
        done++;
        sc_on_event(w, e.time, e.id);
    }
    if (max_events == UINT64_MAX && !w->ref_stop)
        w->ref_now = t_end;
}

static const uint64_t sc_window[SC_PHASES] = {500, 50000000, 3, 10000, 3000, 300000};

static void sc_drive(sc_work *w, uint64_t seed)
{
    rng_seed(&w->r, seed);
    w->cycle_key = rng_next(&w->r);
    unsigned checked_phase = 0;
    while (w->n_disp < w->n_target && !w->failed) {
        unsigned phase = sc_phase(w);
        uint64_t now = sc_now(w);
        if (w->live == 0)
            sc_schedule(w, now + 1);
        for (uint64_t k = rng_below(&w->r, 3); k > 0 && !w->failed; k--) {
            uint64_t at_now = rng_below(&w->r, 2) == 0; /* separate draws: a fixed order */
            uint64_t t = sc_child_time(w, phase, now);
            sc_schedule(w, at_now ? now : t);
        }
        if (w->failed)
            break;
        np_err e = {0};
        np_status st = NP_OK;
        if (rng_below(&w->r, 4) == 0) {
            if (w->q)
                st = evq_step(w->q, NULL, &e);
            else
                sc_ref_run(w, UINT64_MAX, 1);
        } else {
            uint64_t t_end = now + rng_below(&w->r, 2 * sc_window[phase] + 1);
            uint64_t cycle = sc_cycle[phase];
            if (cycle && rng_below(&w->r, 2) == 0) /* a cycle start: now's, or up to 2 later */
                t_end = (now / cycle + rng_below(&w->r, 3)) * cycle;
            if (t_end < now)
                t_end = now;
            if (w->q)
                st = evq_run_until(w->q, t_end, &e);
            else
                sc_ref_run(w, t_end, UINT64_MAX);
        }
        if (st != NP_OK)
            sc_fail(w, st, e.msg);
        if (w->q && sc_phase(w) != checked_phase && !w->failed) {
            checked_phase = sc_phase(w);
            if (evq_verify(w->q, &e) != NP_OK)
                sc_fail(w, NP_ERR_INTERNAL, e.msg);
        }
    }
}

np_status evq_selfcheck(uint64_t n_events, uint64_t seed, evq_selfcheck_result *res,
                        np_err *err)
{
    *res = (evq_selfcheck_result){0};
    if (n_events == 0)
        return np_err_set(err, NP_ERR_RANGE, "evq self-check: needs at least one event");
    if (n_events > (1ULL << 40))
        return np_err_set(err, NP_ERR_RANGE, "evq self-check: %llu events is too many",
                          (unsigned long long)n_events);
    const uint64_t fnv_basis = 0xcbf29ce484222325ULL;
    np_status st = NP_OK;
    sc_work *ref = calloc(1, sizeof *ref), *real = calloc(1, sizeof *real);
    sc_rec *rec = malloc(n_events * sizeof *rec);
    if (!ref || !real || !rec) {
        st = np_err_set(err, NP_ERR_NOMEM, "evq self-check: out of memory");
        goto done;
    }

    ref->n_target = n_events;
    ref->rec = rec;
    ref->hash = fnv_basis;
    sc_drive(ref, seed);
    if (ref->failed) {
        st = np_err_set(err, ref->fail_st, "%s", ref->fail_msg);
        goto done;
    }

    real->n_target = n_events;
    real->rec = rec;
    real->hash = fnv_basis;
    if ((st = evq_create(&real->q, err)) != NP_OK)
        goto done;
    sc_drive(real, seed);
    np_err e = {0};
    if (!real->failed && evq_verify(real->q, &e) != NP_OK)
        sc_fail(real, NP_ERR_INTERNAL, e.msg);
    if (!real->failed && (evq_now(real->q) != ref->ref_now || real->hash != ref->hash ||
                          real->n_cancelled != ref->n_cancelled ||
                          evq_cancelled(real->q) != real->n_cancelled ||
                          evq_dispatched(real->q) != real->n_disp ||
                          evq_pending(real->q) != real->live)) {
        char msg[NP_ERR_MSG_MAX];
        snprintf(msg, sizeof msg,
                 "evq self-check: same events but the totals differ: end time %llu vs %llu ps, "
                 "cancelled %llu vs %llu, pending %llu vs %llu",
                 (unsigned long long)evq_now(real->q), (unsigned long long)ref->ref_now,
                 (unsigned long long)evq_cancelled(real->q),
                 (unsigned long long)ref->n_cancelled, (unsigned long long)evq_pending(real->q),
                 (unsigned long long)ref->live);
        sc_fail(real, NP_ERR_INTERNAL, msg);
    }
    res->dispatched = real->n_disp;
    res->cancelled = real->n_cancelled;
    res->final_time_ps = evq_now(real->q);
    res->hash = real->hash;
    res->rebuilds = evq_rebuilds(real->q);
    res->matched = !real->failed;
    if (real->failed)
        st = np_err_set(err, real->fail_st, "%s", real->fail_msg);

done:
    if (real)
        evq_free(real->q);
    if (ref) {
        free(ref->heap);
        free(ref->state);
    }
    free(ref);
    free(real);
    free(rec);
    return st;
}
