/* bench_evq.c — event-queue throughput in the hold model (see bench/README.md).
 *
 * Hold model: the queue holds N pending events; dispatching one runs a callback that schedules
 * one new event at now + a random increment, so N stays constant. Increments are whole ps,
 * exponential with mean 1,000,000 ps (the default) or uniform on [0, 2,000,000] ps
 * (--dist uniform), from a xoshiro256** stream: the exponential by inverting its CDF piecewise
 * linearly between 4096 quantiles (the last bin exactly), so a draw costs a few ns and no
 * table value repeats. Both queues see the same increments.
 *
 * Lockstep hold model: the same with the N events in N / K groups of K that share their time,
 * as K chips of a lockstep system schedule them: the group's first event dispatched at a time
 * draws the increment, and each of the K dispatches schedules its successor at now + that
 * increment, so every pending time holds K events (more when two groups meet). The queue is
 * filled in a shuffled order, so that a group's events are not neighbours in memory.
 *
 * Each workload is filled, warmed up (2 N dispatches, at least 10^6) and then timed, by the
 * CPU time of the thread, on evq and on a plain binary heap of (time, seq, callback) entries.
 * Both must end at the same simulated time after the same number of events, or the run fails.
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "evq.h"
#include "rng.h"

#define BENCH_MEAN_PS 1000000.0
#define BENCH_TABLE 4096

typedef struct bench_src {
    rng r;
    bool exponential;
    uint64_t quantile[BENCH_TABLE]; /* quantile[i]: the i/4096 quantile of the exponential */
    uint64_t left;                  /* dispatches until the timed or warm-up phase ends */
    /* lockstep: per group, the time its current events' successors go to and how many of its
     * events at the current time are still to dispatch */
    uint64_t per_time;
    uint64_t *next_t;
    uint64_t *group_left;
} bench_src;

static inline uint64_t bench_incr(bench_src *s)
{
    uint64_t x = rng_next(&s->r);
    if (!s->exponential)
        return (uint64_t)(((unsigned __int128)x * (uint64_t)(2 * BENCH_MEAN_PS + 1)) >> 64);
    unsigned i = (unsigned)(x >> 52);
    if (i == BENCH_TABLE - 1) { /* the tail past the last quantile is exponential again */
        double u = ((double)((x >> 12) & ((1ULL << 40) - 1)) + 0.5) * 0x1.0p-40;
        return s->quantile[i] + (uint64_t)(-log(u) * BENCH_MEAN_PS);
    }
    uint64_t width = s->quantile[i + 1] - s->quantile[i];
    return s->quantile[i] + ((width * (x & 0xffffffffu)) >> 32);
}

/* The successor's time of an event of group g dispatched at now (lockstep model). */
static inline uint64_t bench_lockstep_next(bench_src *s, uint64_t g, uint64_t now)
{
    if (s->group_left[g] == 0) {
        s->next_t[g] = now + bench_incr(s);
        s->group_left[g] = s->per_time;
    }
    s->group_left[g]--;
    return s->next_t[g];
}

static void bench_src_init(bench_src *s, bool exponential, uint64_t seed, uint64_t per_time)
{
    rng_seed(&s->r, seed);
    s->exponential = exponential;
    for (int i = 0; i < BENCH_TABLE; i++)
        s->quantile[i] = (uint64_t)(-log1p(-(double)i / BENCH_TABLE) * BENCH_MEAN_PS);
    s->left = 0;
    s->per_time = per_time;
}

/* The events to fill a queue with, in scheduling order: time[i] and group[i] (arg). In the
 * hold model each event is its own group; in the lockstep model the groups' first times are
 * drawn in group order and the N events of the groups are then shuffled. Also resets the
 * groups' state. */
static void bench_fill_plan(bench_src *s, uint64_t n, uint64_t *time, uint64_t *group)
{
    if (s->per_time == 1) {
        for (uint64_t i = 0; i < n; i++) {
            time[i] = bench_incr(s);
            group[i] = i;
        }
        return;
    }
    uint64_t n_groups = (n + s->per_time - 1) / s->per_time; /* the last may be smaller */
    for (uint64_t g = 0; g < n_groups; g++) {
        s->next_t[g] = bench_incr(s);
        s->group_left[g] = 0;
    }
    for (uint64_t i = 0; i < n; i++)
        group[i] = i / s->per_time;
    for (uint64_t i = n; i-- > 1;) { /* Fisher-Yates */
        uint64_t j = rng_below(&s->r, i + 1), x = group[i];
        group[i] = group[j];
        group[j] = x;
    }
    for (uint64_t i = 0; i < n; i++)
        time[i] = s->next_t[group[i]];
}

/* CPU time of this thread: on a shared machine, time spent descheduled is not the queue's. */
static double bench_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- evq -------------------------------------------------------------------------------- */

static void evq_hold(evq *q, void *ctx, uint64_t arg)
{
    bench_src *s = ctx;
    evq_schedule_in(q, bench_incr(s), evq_hold, s, arg, NULL, NULL);
    if (--s->left == 0)
        evq_stop(q);
}

static void evq_lockstep(evq *q, void *ctx, uint64_t g)
{
    bench_src *s = ctx;
    evq_schedule_at(q, bench_lockstep_next(s, g, evq_now(q)), evq_lockstep, s, g, NULL, NULL);
    if (--s->left == 0)
        evq_stop(q);
}

static int bench_evq(bench_src *s, uint64_t n, const uint64_t *time, const uint64_t *group,
                     uint64_t warm, uint64_t timed, double *rate, uint64_t *end_ps)
{
    evq *q;
    np_err e = {0};
    if (evq_create(&q, &e) != NP_OK)
        return 1;
    evq_fn fn = s->per_time == 1 ? evq_hold : evq_lockstep;
    for (uint64_t i = 0; i < n; i++)
        if (evq_schedule_at(q, time[i], fn, s, group[i], NULL, &e) != NP_OK)
            return 1;
    s->left = warm;
    if (evq_run(q, &e) != NP_OK)
        return 1;
    s->left = timed;
    double t0 = bench_seconds();
    if (evq_run(q, &e) != NP_OK)
        return 1;
    double dt = bench_seconds() - t0;
    *rate = (double)timed / dt;
    *end_ps = evq_now(q);
    if (evq_pending(q) != n || evq_dispatched(q) != warm + timed)
        return 1;
    evq_free(q);
    return 0;
}

/* ---- baseline: a plain binary heap of events, ordered by (time, seq) --------------------- */

typedef struct bheap bheap;
typedef void (*bheap_fn)(bheap *h, void *ctx, uint64_t arg);
typedef struct bheap_ent {
    uint64_t time, seq;
    bheap_fn fn;
    void *ctx;
    uint64_t arg;
} bheap_ent;
struct bheap {
    bheap_ent *a;
    size_t n, cap;
    uint64_t now, seq;
    bool stop;
};

static inline bool bheap_lt(const bheap_ent *x, const bheap_ent *y)
{
    return x->time < y->time || (x->time == y->time && x->seq < y->seq);
}

static int bheap_schedule_at(bheap *h, uint64_t t, bheap_fn fn, void *ctx, uint64_t arg)
{
    if (h->n == h->cap) {
        size_t cap = h->cap ? 2 * h->cap : 1024;
        bheap_ent *a = realloc(h->a, cap * sizeof *a);
        if (!a)
            return 1;
        h->a = a;
        h->cap = cap;
    }
    bheap_ent x = {t, h->seq++, fn, ctx, arg};
    size_t i = h->n++;
    while (i > 0 && bheap_lt(&x, &h->a[(i - 1) / 2])) {
        h->a[i] = h->a[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->a[i] = x;
    return 0;
}

static void bheap_run(bheap *h)
{
    h->stop = false;
    while (h->n && !h->stop) {
        bheap_ent top = h->a[0];
        bheap_ent x = h->a[--h->n];
        size_t i = 0, n = h->n;
        for (;;) {
            size_t c = 2 * i + 1;
            if (c >= n)
                break;
            if (c + 1 < n && bheap_lt(&h->a[c + 1], &h->a[c]))
                c++;
            if (!bheap_lt(&h->a[c], &x))
                break;
            h->a[i] = h->a[c];
            i = c;
        }
        if (n)
            h->a[i] = x;
        h->now = top.time;
        top.fn(h, top.ctx, top.arg);
    }
}

static void bheap_hold(bheap *h, void *ctx, uint64_t arg)
{
    bench_src *s = ctx;
    bheap_schedule_at(h, h->now + bench_incr(s), bheap_hold, s, arg);
    if (--s->left == 0)
        h->stop = true;
}

static void bheap_lockstep(bheap *h, void *ctx, uint64_t g)
{
    bench_src *s = ctx;
    bheap_schedule_at(h, bench_lockstep_next(s, g, h->now), bheap_lockstep, s, g);
    if (--s->left == 0)
        h->stop = true;
}

static int bench_heap(bench_src *s, uint64_t n, const uint64_t *time, const uint64_t *group,
                      uint64_t warm, uint64_t timed, double *rate, uint64_t *end_ps)
{
    bheap h = {0};
    bheap_fn fn = s->per_time == 1 ? bheap_hold : bheap_lockstep;
    for (uint64_t i = 0; i < n; i++)
        if (bheap_schedule_at(&h, time[i], fn, s, group[i]))
            return 1;
    s->left = warm;
    bheap_run(&h);
    s->left = timed;
    double t0 = bench_seconds();
    bheap_run(&h);
    double dt = bench_seconds() - t0;
    *rate = (double)timed / dt;
    *end_ps = h.now;
    free(h.a);
    return 0;
}

/* ---- main ------------------------------------------------------------------------------- */

typedef struct bench_workload {
    uint64_t pending;  /* events pending */
    uint64_t per_time; /* events per time: 1 is the plain hold model, more is lockstep */
    uint64_t timed;    /* events dispatched in the timed phase */
} bench_workload;

static const bench_workload bench_workloads[] = {
    {10000, 1, 20000000},
    {1000000, 1, 5000000},
    {10000, 100, 20000000},
    {1000000, 100, 5000000},
    {1000000, 1000, 5000000},
};

int main(int argc, char **argv)
{
    bench_workload workloads[sizeof bench_workloads / sizeof bench_workloads[0]];
    size_t n_workloads = sizeof bench_workloads / sizeof bench_workloads[0];
    memcpy(workloads, bench_workloads, sizeof bench_workloads);
    bool json = false, exponential = true;
    uint64_t only_pending = 0, only_per_time = 1;
    for (int i = 1; i < argc; i++) {
        char *end;
        if (!strcmp(argv[i], "--json")) {
            json = true;
        } else if (!strcmp(argv[i], "--pending") && i + 1 < argc &&
                   (only_pending = strtoull(argv[i + 1], &end, 10)) > 0 && !*end &&
                   only_pending <= 100000000) {
            i++;
        } else if (!strcmp(argv[i], "--per-time") && i + 1 < argc &&
                   (only_per_time = strtoull(argv[i + 1], &end, 10)) > 0 && !*end &&
                   only_per_time <= 100000000) {
            i++;
        } else if (!strcmp(argv[i], "--dist") && i + 1 < argc &&
                   (!strcmp(argv[i + 1], "exp") || !strcmp(argv[i + 1], "uniform"))) {
            exponential = !strcmp(argv[++i], "exp");
        } else {
            fprintf(stderr, "usage: bench_evq [--json] [--dist exp|uniform] [--pending N "
                            "[--per-time K]]\n");
            return 2;
        }
    }
    if (only_per_time != 1 && !only_pending) {
        fprintf(stderr, "bench_evq: --per-time needs --pending\n");
        return 2;
    }
    if (only_pending) { /* one workload of the caller's choosing instead of the table */
        n_workloads = 1;
        workloads[0].pending = only_pending;
        workloads[0].per_time = only_per_time;
        workloads[0].timed = only_pending <= 100000 ? 20000000 : 5000000;
    }
    if (workloads[0].per_time > workloads[0].pending) {
        fprintf(stderr, "bench_evq: --per-time must not exceed --pending\n");
        return 2;
    }
    const char *dist = exponential ? "exponential" : "uniform";
    json_t *results = json_array();
    if (!json)
        printf("hold model, %s increments, mean %.0f ps; events/s over the CPU time of the "
               "timed phase, one core\n",
               dist, BENCH_MEAN_PS);
    uint64_t max_n = 0;
    for (size_t k = 0; k < n_workloads; k++)
        max_n = workloads[k].pending > max_n ? workloads[k].pending : max_n;
    bench_src *s = malloc(sizeof *s);
    uint64_t *time = malloc(max_n * sizeof *time), *group = malloc(max_n * sizeof *group);
    uint64_t *next_t = malloc(max_n * sizeof *next_t), *left = malloc(max_n * sizeof *left);
    if (!s || !time || !group || !next_t || !left) {
        fprintf(stderr, "bench_evq: out of memory\n");
        return 1;
    }
    s->next_t = next_t;
    s->group_left = left;
    for (size_t k = 0; k < n_workloads; k++) {
        uint64_t n = workloads[k].pending, timed = workloads[k].timed;
        uint64_t per_time = workloads[k].per_time;
        uint64_t warm = 2 * n > 1000000 ? 2 * n : 1000000;
        double r_evq, r_heap;
        uint64_t end_evq, end_heap;
        /* both queues get the same events and increments, so both must end at the same time */
        bench_src_init(s, exponential, 1, per_time);
        bench_fill_plan(s, n, time, group);
        if (bench_evq(s, n, time, group, warm, timed, &r_evq, &end_evq)) {
            fprintf(stderr, "bench_evq: the event queue failed\n");
            return 1;
        }
        bench_src_init(s, exponential, 1, per_time);
        bench_fill_plan(s, n, time, group);
        if (bench_heap(s, n, time, group, warm, timed, &r_heap, &end_heap)) {
            fprintf(stderr, "bench_evq: the binary heap failed\n");
            return 1;
        }
        if (end_evq != end_heap) {
            fprintf(stderr, "bench_evq: evq and the binary heap disagree: end at %llu vs %llu ps\n",
                    (unsigned long long)end_evq, (unsigned long long)end_heap);
            return 1;
        }
        const char *model = per_time == 1 ? "hold" : "lockstep";
        if (json) {
            json_array_append_new(
                results,
                json_pack("{s:s, s:I, s:I, s:I, s:I, s:f, s:f, s:f}", "model", model,
                          "pending_events", (json_int_t)n, "events_per_time",
                          (json_int_t)per_time, "timed_events", (json_int_t)timed,
                          "end_time_ps", (json_int_t)end_evq, "evq_events_per_s", r_evq,
                          "heap_events_per_s", r_heap, "speedup_x", r_evq / r_heap));
        } else {
            char label[64];
            if (per_time == 1)
                snprintf(label, sizeof label, "%s", model);
            else
                snprintf(label, sizeof label, "%s, %llu per time", model,
                         (unsigned long long)per_time);
            printf("%-23s pending %8llu events: evq %6.2f M events/s, binary heap %6.2f M "
                   "events/s, evq/heap %.2f x\n",
                   label, (unsigned long long)n, r_evq / 1e6, r_heap / 1e6, r_evq / r_heap);
            fflush(stdout);
        }
    }
    free(s);
    free(time);
    free(group);
    free(next_t);
    free(left);
    if (json) {
        json_t *doc = json_pack("{s:s, s:f, s:o}", "distribution", dist, "mean_increment_ps",
                                BENCH_MEAN_PS, "results", results);
        char *text = json_dumps(doc, JSON_INDENT(2));
        puts(text);
        free(text);
        json_decref(doc);
    } else {
        json_decref(results);
    }
    return 0;
}
