/* test_evq.c — the event kernel: order by (time, insertion), ties from callbacks,
 * cancellation and stale handles, run_until/run/step/stop semantics, refusals, lockstep
 * systems (hundreds of events at one time: their order, cancellations and events at now inside
 * them, run_until and stop splitting them), determinism, agreement with reference orderings
 * across density changes and rebuilds, the self-check, and allocation failure. Expected orders are written out by hand or come from an independent
 * check (see hold_model_order_is_the_sorted_order_across_density_and_count_changes). */
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "evq.h"
#include "harness.h"
#include "rng.h"

/* A log of dispatched events: each callback appends its arg and the time it ran at. */
typedef struct ev_log {
    uint64_t arg[256];
    uint64_t t[256];
    size_t n;
} ev_log;

static void log_fn(evq *q, void *ctx, uint64_t arg)
{
    ev_log *l = ctx;
    if (l->n < 256) {
        l->arg[l->n] = arg;
        l->t[l->n] = evq_now(q);
    }
    l->n++;
}

static void assert_verified(const evq *q)
{
    np_err e = {0};
    np_status st = evq_verify(q, &e);
    if (st != NP_OK)
        fprintf(stderr, "\n%s\n", e.msg);
    CU_ASSERT_EQUAL_FATAL(st, NP_OK);
}

static evq *new_queue(void)
{
    evq *q = NULL;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(evq_create(&q, &e), NP_OK);
    return q;
}

/* The example at the top of evq.h, verbatim, so that it cannot go stale. */
static void tick(evq *q, void *ctx, uint64_t n)
{
    if (n > 1)
        evq_schedule_in(q, 1000, tick, ctx, n - 1, NULL, NULL); // 1 ns later
}

TEST(the_header_example_runs_ten_events_ending_at_9000_ps)
{
    np_err err = {0};
    evq *q;
    CU_ASSERT_EQUAL_FATAL(evq_create(&q, &err), NP_OK);
    evq_schedule_at(q, 0, tick, NULL, 10, NULL, &err);
    evq_run(q, &err);            // 10 events; evq_now(q) == 9000
    CU_ASSERT_EQUAL(evq_dispatched(q), 10);
    CU_ASSERT_EQUAL(evq_now(q), 9000);
    evq_free(q);
}

TEST(events_run_in_time_order_whatever_order_they_were_scheduled_in)
{
    static const uint64_t times[] = {5000, 10, 999999999, 0, 2048, 2047, 77, 1000000, 3};
    /* by hand: the times sorted, each tagged with its index in times[] */
    static const uint64_t want_arg[] = {3, 8, 1, 6, 5, 4, 0, 7, 2};
    evq *q = new_queue();
    ev_log l = {0};
    for (size_t i = 0; i < 9; i++)
        CU_ASSERT_EQUAL(evq_schedule_at(q, times[i], log_fn, &l, i, NULL, NULL), NP_OK);
    CU_ASSERT_EQUAL(evq_pending(q), 9);
    assert_verified(q);
    CU_ASSERT_EQUAL(evq_run(q, NULL), NP_OK);
    CU_ASSERT_EQUAL(l.n, 9);
    for (size_t i = 0; i < 9; i++) {
        CU_ASSERT_EQUAL(l.arg[i], want_arg[i]);
        CU_ASSERT_EQUAL(l.t[i], times[want_arg[i]]);
    }
    CU_ASSERT_EQUAL(evq_now(q), 999999999);
    CU_ASSERT_EQUAL(evq_pending(q), 0);
    CU_ASSERT_EQUAL(evq_dispatched(q), 9);
    assert_verified(q);
    evq_free(q);
}

TEST(same_time_events_run_in_the_order_they_were_scheduled)
{
    evq *q = new_queue();
    ev_log l = {0};
    /* 200 events at one time, interleaved with others before and after it */
    for (uint64_t i = 0; i < 200; i++) {
        evq_schedule_at(q, 1000, log_fn, &l, i, NULL, NULL);
        if (i % 50 == 0) {
            evq_schedule_at(q, 999, log_fn, &l, 1000 + i, NULL, NULL);
            evq_schedule_at(q, 1001, log_fn, &l, 2000 + i, NULL, NULL);
        }
    }
    assert_verified(q);
    CU_ASSERT_EQUAL(evq_run(q, NULL), NP_OK);
    CU_ASSERT_EQUAL_FATAL(l.n, 208);
    /* by hand: 999 ps: 1000, 1050, 1100, 1150; 1000 ps: 0..199; 1001 ps: 2000, ..., 2150 */
    for (size_t i = 0; i < 4; i++) {
        CU_ASSERT_EQUAL(l.arg[i], 1000 + 50 * i);
        CU_ASSERT_EQUAL(l.arg[204 + i], 2000 + 50 * i);
    }
    for (size_t i = 0; i < 200; i++)
        CU_ASSERT_EQUAL(l.arg[4 + i], i);
    evq_free(q);
}

/* Event k at time 10 schedules, also at time 10, the events listed for it in nested[k]. */
static const uint64_t nested[6][2] = {{3, 4}, {5, 0}, {0, 0}, {0, 0}, {0, 0}, {0, 0}};

static void nest_fn(evq *q, void *ctx, uint64_t arg)
{
    log_fn(q, ctx, arg);
    for (int i = 0; i < 2; i++)
        if (nested[arg][i])
            evq_schedule_in(q, 0, nest_fn, ctx, nested[arg][i], NULL, NULL);
}

TEST(ties_scheduled_from_callbacks_run_after_the_ties_already_pending)
{
    evq *q = new_queue();
    ev_log l = {0};
    for (uint64_t a = 0; a < 3; a++)
        evq_schedule_at(q, 10, nest_fn, &l, a, NULL, NULL);
    evq_schedule_at(q, 11, log_fn, &l, 99, NULL, NULL);
    CU_ASSERT_EQUAL(evq_run(q, NULL), NP_OK);
    /* by hand: 0 1 2 are pending first; 0 adds 3 4, then 1 adds 5; 11 ps comes last */
    static const uint64_t want[] = {0, 1, 2, 3, 4, 5, 99};
    CU_ASSERT_EQUAL_FATAL(l.n, 7);
    for (size_t i = 0; i < 7; i++)
        CU_ASSERT_EQUAL(l.arg[i], want[i]);
    for (size_t i = 0; i < 6; i++)
        CU_ASSERT_EQUAL(l.t[i], 10);
    assert_verified(q);
    evq_free(q);
}

TEST(cancel_removes_a_pending_event_and_reports_fired_and_double_cancels)
{
    evq *q = new_queue();
    ev_log l = {0};
    evq_handle h[4];
    for (uint64_t i = 0; i < 4; i++)
        evq_schedule_at(q, 100 * (i + 1), log_fn, &l, i, &h[i], NULL);
    CU_ASSERT_TRUE(evq_cancel(q, h[2]));
    CU_ASSERT_EQUAL(evq_pending(q), 3);
    CU_ASSERT_EQUAL(evq_cancelled(q), 1);
    assert_verified(q);
    CU_ASSERT_FALSE(evq_cancel(q, h[2])); /* already cancelled */
    CU_ASSERT_EQUAL(evq_pending(q), 3);
    CU_ASSERT_FALSE(evq_cancel(q, EVQ_HANDLE_NONE));
    CU_ASSERT_EQUAL(evq_run_until(q, 250, NULL), NP_OK);
    CU_ASSERT_FALSE(evq_cancel(q, h[0])); /* already fired */
    CU_ASSERT_FALSE(evq_cancel(q, h[1]));
    CU_ASSERT_TRUE(evq_cancel(q, h[3]));
    CU_ASSERT_EQUAL(evq_pending(q), 0);
    assert_verified(q);
    CU_ASSERT_EQUAL(evq_run(q, NULL), NP_OK);
    CU_ASSERT_EQUAL(l.n, 2);
    CU_ASSERT_EQUAL(l.arg[0], 0);
    CU_ASSERT_EQUAL(l.arg[1], 1);
    CU_ASSERT_EQUAL(evq_cancelled(q), 2);
    CU_ASSERT_EQUAL(evq_dispatched(q), 2);
    assert_verified(q);
    evq_free(q);
}

TEST(a_stale_handle_cannot_cancel_the_event_that_reuses_its_storage)
{
    evq *q = new_queue();
    ev_log l = {0};
    evq_handle old, fresh;
    /* fired: its node goes back to the pool and the next schedule takes it */
    evq_schedule_at(q, 5, log_fn, &l, 1, &old, NULL);
    CU_ASSERT_EQUAL(evq_run(q, NULL), NP_OK);
    evq_schedule_at(q, 7, log_fn, &l, 2, &fresh, NULL);
    CU_ASSERT_PTR_EQUAL(fresh.node, old.node); /* the test does exercise reuse */
    CU_ASSERT_FALSE(evq_cancel(q, old));
    CU_ASSERT_EQUAL(evq_pending(q), 1);

    /* cancelled, then reaped by the run, then reused */
    CU_ASSERT_TRUE(evq_cancel(q, fresh));
    CU_ASSERT_EQUAL(evq_run(q, NULL), NP_OK);
    evq_handle third;
    evq_schedule_at(q, 9, log_fn, &l, 3, &third, NULL);
    CU_ASSERT_PTR_EQUAL(third.node, fresh.node);
    CU_ASSERT_FALSE(evq_cancel(q, fresh));
    CU_ASSERT_FALSE(evq_cancel(q, old));
    assert_verified(q);
    CU_ASSERT_EQUAL(evq_run(q, NULL), NP_OK);
    CU_ASSERT_EQUAL(l.n, 2);
    CU_ASSERT_EQUAL(l.arg[0], 1);
    CU_ASSERT_EQUAL(l.arg[1], 3);
    CU_ASSERT_FALSE(evq_cancel(q, third));
    assert_verified(q);
    evq_free(q);
}

TEST(run_until_runs_events_at_exactly_t_end_and_none_after_then_sets_now)
{
    evq *q = new_queue();
    ev_log l = {0};
    evq_schedule_at(q, 100, log_fn, &l, 0, NULL, NULL);
    evq_schedule_at(q, 200, log_fn, &l, 1, NULL, NULL);
    evq_schedule_at(q, 201, log_fn, &l, 2, NULL, NULL);
    CU_ASSERT_EQUAL(evq_run_until(q, 200, NULL), NP_OK);
    CU_ASSERT_EQUAL(l.n, 2);
    CU_ASSERT_EQUAL(evq_now(q), 200);
    CU_ASSERT_EQUAL(evq_pending(q), 1);
    assert_verified(q);
    /* an empty stretch still moves now */
    CU_ASSERT_EQUAL(evq_run_until(q, 200, NULL), NP_OK);
    CU_ASSERT_EQUAL(l.n, 2);
    /* an event scheduled at now after a run_until that looked past it */
    evq_schedule_at(q, 200, log_fn, &l, 3, NULL, NULL);
    assert_verified(q);
    CU_ASSERT_EQUAL(evq_run_until(q, 5000, NULL), NP_OK);
    CU_ASSERT_EQUAL(evq_now(q), 5000);
    CU_ASSERT_EQUAL_FATAL(l.n, 4);
    CU_ASSERT_EQUAL(l.arg[2], 3);
    CU_ASSERT_EQUAL(l.arg[3], 2);
    np_err e = {0};
    CU_ASSERT_EQUAL(evq_run_until(q, 4999, &e), NP_ERR_INTERNAL);
    CU_ASSERT_EQUAL(evq_now(q), 5000);
    assert_verified(q);
    evq_free(q);
}

TEST(scheduling_before_now_is_refused_and_changes_nothing)
{
    evq *q = new_queue();
    ev_log l = {0};
    evq_schedule_at(q, 300, log_fn, &l, 0, NULL, NULL);
    CU_ASSERT_EQUAL(evq_run_until(q, 1000, NULL), NP_OK);
    np_err e = {0};
    evq_handle h = {(void *)&l, 12345};
    CU_ASSERT_EQUAL(evq_schedule_at(q, 999, log_fn, &l, 1, &h, &e), NP_ERR_INTERNAL);
    CU_ASSERT_EQUAL(e.status, NP_ERR_INTERNAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "before the current time"));
    CU_ASSERT_EQUAL(h.seq, 12345); /* untouched */
    CU_ASSERT_EQUAL(evq_pending(q), 0);
    CU_ASSERT_EQUAL(evq_schedule_at(q, 1000, log_fn, &l, 2, NULL, &e), NP_OK);
    CU_ASSERT_EQUAL(evq_schedule_at(q, 5, NULL, &l, 2, NULL, &e), NP_ERR_INTERNAL);
    CU_ASSERT_EQUAL(evq_schedule_in(q, UINT64_MAX, log_fn, &l, 3, NULL, &e), NP_ERR_RANGE);
    CU_ASSERT_EQUAL(evq_schedule_in(q, UINT64_MAX - 1000, log_fn, &l, 4, NULL, &e), NP_OK);
    CU_ASSERT_EQUAL(evq_pending(q), 2);
    assert_verified(q);
    CU_ASSERT_EQUAL(evq_run(q, NULL), NP_OK);
    CU_ASSERT_EQUAL(l.n, 3);
    CU_ASSERT_EQUAL(evq_now(q), UINT64_MAX);
    assert_verified(q);
    evq_free(q);
}

static void stop_at_2(evq *q, void *ctx, uint64_t arg)
{
    log_fn(q, ctx, arg);
    if (arg == 2)
        evq_stop(q);
}

static void nested_run(evq *q, void *ctx, uint64_t arg)
{
    np_status *st = ctx;
    (void)arg;
    *st = evq_run(q, NULL);
}

TEST(stop_step_and_nested_runs_behave_as_documented)
{
    evq *q = new_queue();
    ev_log l = {0};
    for (uint64_t i = 0; i < 5; i++)
        evq_schedule_at(q, 10 * i, stop_at_2, &l, i, NULL, NULL);
    CU_ASSERT_EQUAL(evq_run_until(q, 1000, NULL), NP_OK);
    CU_ASSERT_EQUAL(l.n, 3);
    CU_ASSERT_EQUAL(evq_now(q), 20); /* stopped: now stays at the stopping event */
    assert_verified(q);
    evq_stop(q); /* outside a run: nothing */
    bool did = false;
    CU_ASSERT_EQUAL(evq_step(q, &did, NULL), NP_OK);
    CU_ASSERT_TRUE(did);
    CU_ASSERT_EQUAL(l.n, 4);
    CU_ASSERT_EQUAL(evq_now(q), 30);
    CU_ASSERT_EQUAL(evq_run(q, NULL), NP_OK);
    CU_ASSERT_EQUAL(l.n, 5);
    CU_ASSERT_EQUAL(evq_step(q, &did, NULL), NP_OK);
    CU_ASSERT_FALSE(did);
    np_status inner = NP_OK;
    evq_schedule_in(q, 1, nested_run, &inner, 0, NULL, NULL);
    CU_ASSERT_EQUAL(evq_run(q, NULL), NP_OK);
    CU_ASSERT_EQUAL(inner, NP_ERR_INTERNAL);
    assert_verified(q);
    evq_free(q);
}

/* ---- lockstep: hundreds of events at one time ------------------------------------------- */

/* A lockstep system: chip i's event (arg i) at time t schedules chip i's next event at
 * t + 1000 ps while t < t_last, and does what the test's hook adds. Every dispatch is logged
 * as (arg, time). The expected orders below follow from the contract alone: by time, then by
 * the order the events were scheduled in. */
typedef struct lockstep lockstep;
typedef void (*lockstep_hook)(evq *q, lockstep *ls, uint64_t arg);
struct lockstep {
    uint64_t n_chips, t_last;
    lockstep_hook hook;
    evq_handle *h; /* by chip: its pending event */
    uint64_t *arg, *t;
    size_t n, cap;
    uint64_t stop_at_arg; /* evq_stop after this arg runs at t_last (UINT64_MAX: never) */
    uint64_t n_bad_cancel;
};

static void lockstep_fn(evq *q, void *ctx, uint64_t arg)
{
    lockstep *ls = ctx;
    CU_ASSERT_FATAL(ls->n < ls->cap);
    ls->arg[ls->n] = arg;
    ls->t[ls->n++] = evq_now(q);
    if (arg < ls->n_chips && evq_now(q) < ls->t_last)
        CU_ASSERT_EQUAL(evq_schedule_in(q, 1000, lockstep_fn, ls, arg, &ls->h[arg], NULL), NP_OK);
    if (ls->hook)
        ls->hook(q, ls, arg);
    if (arg == ls->stop_at_arg && evq_now(q) == ls->t_last)
        evq_stop(q);
}

static void lockstep_init(lockstep *ls, evq *q, uint64_t n_chips, uint64_t t_last, size_t cap)
{
    *ls = (lockstep){n_chips, t_last, NULL, NULL, NULL, NULL, 0, cap, UINT64_MAX, 0};
    ls->h = calloc(n_chips, sizeof *ls->h);
    ls->arg = malloc(cap * sizeof *ls->arg);
    ls->t = malloc(cap * sizeof *ls->t);
    CU_ASSERT_FATAL(ls->h && ls->arg && ls->t);
    for (uint64_t i = 0; i < n_chips; i++)
        CU_ASSERT_EQUAL_FATAL(evq_schedule_at(q, 1000, lockstep_fn, ls, i, &ls->h[i], NULL),
                              NP_OK);
}

static void lockstep_free(lockstep *ls)
{
    free(ls->h);
    free(ls->arg);
    free(ls->t);
}

/* Checks log entries [*at, *at + n) against want_arg(k) at time t; advances *at. */
static void lockstep_expect(const lockstep *ls, size_t *at, size_t n, uint64_t t,
                            const uint64_t *want)
{
    CU_ASSERT_FATAL(*at + n <= ls->n);
    size_t bad = 0;
    for (size_t k = 0; k < n; k++)
        if (ls->arg[*at + k] != want[k] || ls->t[*at + k] != t) {
            if (!bad)
                fprintf(stderr, "\nlog entry %zu: event %llu at %llu ps, want %llu at %llu ps\n",
                        *at + k, (unsigned long long)ls->arg[*at + k],
                        (unsigned long long)ls->t[*at + k], (unsigned long long)want[k],
                        (unsigned long long)t);
            bad++;
        }
    CU_ASSERT_EQUAL(bad, 0);
    *at += n;
}

static void odd_chips_add_one(evq *q, lockstep *ls, uint64_t arg)
{
    if (arg < ls->n_chips && arg % 2 == 1 && evq_now(q) < ls->t_last)
        CU_ASSERT_EQUAL(evq_schedule_in(q, 1000, lockstep_fn, ls, 100000 + arg, NULL, NULL),
                        NP_OK);
}

TEST(a_lockstep_time_of_many_events_runs_them_in_scheduling_order)
{
    /* 1,000 chips: events in cache; 20,000: new events staged while their buckets are
     * fetched. Odd chips also schedule a one-off event at their next time. */
    static const uint64_t sizes[] = {1000, 20000};
    for (size_t z = 0; z < 2; z++) {
        uint64_t n = sizes[z];
        evq *q = new_queue();
        lockstep ls;
        lockstep_init(&ls, q, n, 3000, 4 * n);
        ls.hook = odd_chips_add_one;
        CU_ASSERT_EQUAL(evq_run(q, NULL), NP_OK);
        assert_verified(q);
        uint64_t *want = malloc(2 * n * sizeof *want);
        size_t at = 0, m = 0;
        for (uint64_t i = 0; i < n; i++)
            want[i] = i;
        lockstep_expect(&ls, &at, n, 1000, want); /* by hand: chips in the order scheduled */
        for (uint64_t i = 0; i < n; i++) {        /* each chip's next, then its one-off */
            want[m++] = i;
            if (i % 2)
                want[m++] = 100000 + i;
        }
        lockstep_expect(&ls, &at, m, 2000, want);
        lockstep_expect(&ls, &at, m, 3000, want); /* the same again */
        CU_ASSERT_EQUAL(ls.n, at);
        CU_ASSERT_EQUAL(evq_pending(q), 0);
        free(want);
        lockstep_free(&ls);
        evq_free(q);
    }
}

/* At t_last, chip i (i % 10 == 0) cancels chip i + 5's event at the same time, still pending
 * behind it, and chip i - 1's, which has just run. */
static void cancel_in_run(evq *q, lockstep *ls, uint64_t arg)
{
    if (arg % 10 || evq_now(q) != ls->t_last)
        return;
    bool want = (arg + 5) % 7 != 3; /* the test cancelled i % 7 == 3 beforehand */
    if (arg + 5 < ls->n_chips && evq_cancel(q, ls->h[arg + 5]) != want)
        ls->n_bad_cancel++;
    if (arg > 0 && evq_cancel(q, ls->h[arg - 1]))
        ls->n_bad_cancel++;
}

TEST(cancelling_events_inside_a_lockstep_time_skips_exactly_those)
{
    evq *q = new_queue();
    lockstep ls;
    lockstep_init(&ls, q, 600, 2000, 2000);
    ls.hook = cancel_in_run;
    CU_ASSERT_EQUAL(evq_run_until(q, 1000, NULL), NP_OK);
    CU_ASSERT_EQUAL(evq_pending(q), 600);
    uint64_t n_cancel = 0;
    for (uint64_t i = 3; i < 600; i += 7, n_cancel++)
        CU_ASSERT_TRUE(evq_cancel(q, ls.h[i]));
    assert_verified(q);
    CU_ASSERT_EQUAL(evq_run(q, NULL), NP_OK);
    assert_verified(q);
    CU_ASSERT_EQUAL(ls.n_bad_cancel, 0);
    uint64_t want[600];
    size_t at = 600, m = 0; /* the 600 at 1000 ps are the first test's business */
    /* chip i runs unless cancelled before (i = 3 mod 7) or by chip i - 5 (i = 5 mod 10), which
     * does so when it runs itself */
    for (uint64_t i = 0; i < 600; i++)
        if (i % 7 != 3 && !(i % 10 == 5 && (i - 5) % 7 != 3))
            want[m++] = i;
    lockstep_expect(&ls, &at, m, 2000, want);
    CU_ASSERT_EQUAL(ls.n, at);
    /* by hand: 86 chips i = 3 mod 7 before; of the 60 chips i = 0 mod 10, 9 were cancelled
     * (i = 10 + 70 k, k = 0..8), and 8 of the others find theirs cancelled already
     * (i + 5 = 45 + 70 k, k = 0..7): 43 more */
    CU_ASSERT_EQUAL(n_cancel, 86);
    CU_ASSERT_EQUAL(evq_cancelled(q), 86 + 43);
    CU_ASSERT_EQUAL(m, 600 - 86 - 43);
    lockstep_free(&ls);
    evq_free(q);
}

/* At t_last, chip i (i % 4 == 0) schedules an event at now (arg 20000 + i); those with
 * i % 8 == 0 schedule one more at now when they run (arg 30000 + i). Before that, every chip
 * also put an event 1 ps after t_last (arg 10000 + i). */
static void at_now_in_run(evq *q, lockstep *ls, uint64_t arg)
{
    uint64_t now = evq_now(q);
    if (arg < ls->n_chips && now + 1000 == ls->t_last)
        CU_ASSERT_EQUAL(evq_schedule_at(q, ls->t_last + 1, lockstep_fn, ls, 10000 + arg, NULL,
                                        NULL), NP_OK);
    if (now != ls->t_last)
        return;
    if (arg < ls->n_chips && arg % 4 == 0)
        CU_ASSERT_EQUAL(evq_schedule_in(q, 0, lockstep_fn, ls, 20000 + arg, NULL, NULL), NP_OK);
    if (arg >= 20000 && arg < 30000 && arg % 8 == 0)
        CU_ASSERT_EQUAL(evq_schedule_in(q, 0, lockstep_fn, ls, 10000 + arg, NULL, NULL), NP_OK);
}

TEST(events_scheduled_at_now_inside_a_lockstep_time_run_after_it_and_before_later_times)
{
    evq *q = new_queue();
    lockstep ls;
    lockstep_init(&ls, q, 500, 2000, 3000);
    ls.hook = at_now_in_run;
    CU_ASSERT_EQUAL(evq_run(q, NULL), NP_OK);
    assert_verified(q);
    uint64_t want[500];
    size_t at = 500, m = 0;
    for (uint64_t i = 0; i < 500; i++)
        want[m++] = i;
    lockstep_expect(&ls, &at, m, 2000, want); /* the chips, scheduled first */
    m = 0;
    for (uint64_t i = 0; i < 500; i += 4)
        want[m++] = 20000 + i;
    lockstep_expect(&ls, &at, m, 2000, want); /* then their events at now, in order */
    m = 0;
    for (uint64_t i = 0; i < 500; i += 8)
        want[m++] = 30000 + i;
    lockstep_expect(&ls, &at, m, 2000, want); /* then those scheduled by the events at now */
    m = 0;
    for (uint64_t i = 0; i < 500; i++)
        want[m++] = 10000 + i;
    lockstep_expect(&ls, &at, m, 2001, want); /* 1 ps later: everything scheduled for then */
    CU_ASSERT_EQUAL(ls.n, at);
    lockstep_free(&ls);
    evq_free(q);
}

static void log_outside(evq *q, void *ctx, uint64_t arg)
{
    lockstep_fn(q, ctx, arg);
}

TEST(run_until_and_stop_split_a_lockstep_time_without_changing_its_order)
{
    evq *q = new_queue();
    lockstep ls;
    lockstep_init(&ls, q, 400, 2000, 1000);
    ls.stop_at_arg = 150;
    CU_ASSERT_EQUAL(evq_run_until(q, 1999, NULL), NP_OK);
    CU_ASSERT_EQUAL(ls.n, 400);
    CU_ASSERT_EQUAL(evq_now(q), 1999);
    CU_ASSERT_EQUAL(evq_run_until(q, 2000, NULL), NP_OK); /* chip 150 stops it */
    CU_ASSERT_EQUAL(ls.n, 400 + 151);
    CU_ASSERT_EQUAL(evq_now(q), 2000);
    CU_ASSERT_EQUAL(evq_pending(q), 249);
    assert_verified(q);
    /* from outside, at now: after the chips still pending at now */
    CU_ASSERT_EQUAL(evq_schedule_at(q, 2000, log_outside, &ls, 7777, NULL, NULL), NP_OK);
    bool did = false;
    CU_ASSERT_EQUAL(evq_step(q, &did, NULL), NP_OK);
    CU_ASSERT_TRUE(did);
    CU_ASSERT_EQUAL(ls.arg[ls.n - 1], 151);
    CU_ASSERT_EQUAL(evq_run_until(q, 2000, NULL), NP_OK);
    CU_ASSERT_EQUAL(evq_pending(q), 0);
    CU_ASSERT_EQUAL(evq_now(q), 2000);
    uint64_t want[401];
    size_t at = 400;
    for (uint64_t i = 0; i < 400; i++)
        want[i] = i;
    want[400] = 7777;
    lockstep_expect(&ls, &at, 401, 2000, want);
    CU_ASSERT_EQUAL(ls.n, at);
    assert_verified(q);
    lockstep_free(&ls);
    evq_free(q);
}

/* ---- randomized checks against independent orderings ------------------------------------- */

/* The hold-model checker: every event carries its own insertion number; an order is right iff
 * (time, insertion) never decreases from one dispatch to the next and every event that was
 * not cancelled is dispatched exactly once, at its time. (If an earlier event e' were pending
 * when e ran, e' would run later with a smaller key.) */
typedef struct hold {
    rng r;
    uint64_t next_id, last_t, last_id, n_disp, n_bad, mean_ps;
    uint64_t *due;       /* by id: the time it was scheduled for; UINT64_MAX once done */
    evq_handle *handles; /* by id */
    uint64_t cap;
    unsigned fanout_mode; /* 0 hold, 1 grow, 2 shrink, 3 drain */
} hold;

static void hold_fn(evq *q, void *ctx, uint64_t id);

static void hold_schedule(evq *q, hold *h, uint64_t t)
{
    CU_ASSERT_FATAL(h->next_id < h->cap);
    uint64_t id = h->next_id++;
    h->due[id] = t;
    CU_ASSERT_EQUAL_FATAL(evq_schedule_at(q, t, hold_fn, h, id, &h->handles[id], NULL), NP_OK);
}

static void hold_fn(evq *q, void *ctx, uint64_t id)
{
    hold *h = ctx;
    uint64_t t = evq_now(q);
    if (h->due[id] != t)
        h->n_bad++;
    if (h->n_disp && (t < h->last_t || (t == h->last_t && id < h->last_id)))
        h->n_bad++;
    h->due[id] = UINT64_MAX;
    h->last_t = t;
    h->last_id = id;
    h->n_disp++;
    static const unsigned fanout[4][2] = {{1, 1}, {2, 2}, {0, 1}, {0, 0}};
    unsigned n = fanout[h->fanout_mode][h->n_disp & 1];
    for (unsigned i = 0; i < n; i++) {
        /* uniform in [0, 2 mean]; one in eight is a tie at now */
        uint64_t d = rng_below(&h->r, 8) ? rng_below(&h->r, 2 * h->mean_ps + 1) : 0;
        hold_schedule(q, h, t + d);
    }
    if (rng_below(&h->r, 16) == 0 && h->next_id > 1) {
        uint64_t victim = rng_below(&h->r, h->next_id);
        bool pending = h->due[victim] != UINT64_MAX;
        CU_ASSERT_EQUAL(evq_cancel(q, h->handles[victim]), pending);
        h->due[victim] = UINT64_MAX;
    }
}

static void hold_phase(evq *q, hold *h, uint64_t mean_ps, unsigned mode, uint64_t n_events)
{
    h->mean_ps = mean_ps;
    h->fanout_mode = mode;
    uint64_t stop_at = evq_dispatched(q) + n_events;
    while (evq_dispatched(q) < stop_at && evq_pending(q)) {
        bool did;
        CU_ASSERT_EQUAL_FATAL(evq_step(q, &did, NULL), NP_OK);
    }
    assert_verified(q);
}

TEST(hold_model_order_is_the_sorted_order_across_density_and_count_changes)
{
    evq *q = new_queue();
    hold h = {0};
    rng_seed(&h.r, 2024);
    h.cap = 400000;
    h.due = malloc(h.cap * sizeof *h.due);
    h.handles = malloc(h.cap * sizeof *h.handles);
    for (int i = 0; i < 100; i++)
        hold_schedule(q, &h, rng_below(&h.r, 1000));
    uint64_t r0 = evq_rebuilds(q);
    hold_phase(q, &h, 100, 1, 30000);        /* grow 100 -> ~30,000 pending, dense */
    CU_ASSERT(evq_pending(q) > 20000);
    /* 256 buckets after the first 100 events; each growth makes 4x as many, and 20,000
     * events want 65,536: 4 growths at least */
    CU_ASSERT(evq_rebuilds(q) >= r0 + 4);
    uint64_t r1 = evq_rebuilds(q);
    hold_phase(q, &h, 10000000, 0, 100000);  /* same count, spacing x10^5 */
    CU_ASSERT(evq_rebuilds(q) > r1);         /* the width followed */
    uint64_t r2 = evq_rebuilds(q);
    hold_phase(q, &h, 3, 0, 100000);         /* spacing / 3x10^6: ties galore */
    CU_ASSERT(evq_rebuilds(q) > r2);
    uint64_t r3 = evq_rebuilds(q);
    hold_phase(q, &h, 1000, 2, 50000);       /* shrink to about a thousand */
    CU_ASSERT(evq_pending(q) > 100 && evq_pending(q) < 5000);
    CU_ASSERT(evq_rebuilds(q) > r3);
    hold_phase(q, &h, 100000, 0, 50000);
    h.fanout_mode = 3;
    CU_ASSERT_EQUAL(evq_run(q, NULL), NP_OK);
    assert_verified(q);
    CU_ASSERT_EQUAL(h.n_bad, 0);
    uint64_t not_run = 0;
    for (uint64_t id = 0; id < h.next_id; id++)
        not_run += h.due[id] != UINT64_MAX;
    CU_ASSERT_EQUAL(not_run, 0);
    CU_ASSERT_EQUAL(evq_dispatched(q) + evq_cancelled(q), h.next_id);
    free(h.due);
    free(h.handles);
    evq_free(q);
}

/* Random operations on a queue of at most a few hundred events whose delays span 2^0..2^40 ps,
 * so that events land in the bottom heap, the buckets and the overflow, and migrate at every
 * kind of boundary; evq_verify runs after every operation. */
TEST(invariants_hold_after_every_operation_of_a_random_workload)
{
    evq *q = new_queue();
    rng r;
    rng_seed(&r, 99);
    ev_log l = {0};
    evq_handle recent[64] = {{0}};
    uint64_t n_sched = 0, n_cancel = 0, max_pending = 0;
    for (int op = 0; op < 20000; op++) {
        uint64_t k = rng_below(&r, 16);
        if (k < 7 && evq_pending(q) < 400) {
            uint64_t delay = rng_below(&r, 4) == 0 ? 0 : rng_below(&r, 1ULL << rng_below(&r, 41));
            CU_ASSERT_EQUAL_FATAL(evq_schedule_in(q, delay, log_fn, &l, 0,
                                                  &recent[n_sched % 64], NULL), NP_OK);
            n_sched++;
        } else if (k < 9) {
            n_cancel += evq_cancel(q, recent[rng_below(&r, 64)]);
        } else if (k < 14) {
            CU_ASSERT_EQUAL_FATAL(evq_step(q, NULL, NULL), NP_OK);
        } else {
            uint64_t span = rng_below(&r, 1ULL << rng_below(&r, 40));
            CU_ASSERT_EQUAL_FATAL(evq_run_until(q, evq_now(q) + span, NULL), NP_OK);
        }
        assert_verified(q);
    }
    CU_ASSERT(evq_rebuilds(q) > 0);
    /* the same with 20,000+ pending, where new events are staged and buckets prefetched;
     * verify every 331 operations to keep the test fast */
    for (int op = 0; op < 40000; op++) {
        uint64_t k = rng_below(&r, 16);
        if (k < 9 || evq_pending(q) < 20000) {
            uint64_t delay = rng_below(&r, 8) == 0 ? 0 : rng_below(&r, 1ULL << rng_below(&r, 41));
            CU_ASSERT_EQUAL_FATAL(evq_schedule_in(q, delay, log_fn, &l, 0,
                                                  &recent[n_sched % 64], NULL), NP_OK);
            n_sched++;
        } else if (k < 10) {
            n_cancel += evq_cancel(q, recent[rng_below(&r, 64)]);
        } else if (k < 15) {
            CU_ASSERT_EQUAL_FATAL(evq_step(q, NULL, NULL), NP_OK);
        } else {
            uint64_t span = rng_below(&r, 1ULL << rng_below(&r, 30));
            CU_ASSERT_EQUAL_FATAL(evq_run_until(q, evq_now(q) + span, NULL), NP_OK);
        }
        if (op % 331 == 0)
            assert_verified(q);
        max_pending = evq_pending(q) > max_pending ? evq_pending(q) : max_pending;
    }
    CU_ASSERT(max_pending >= 20000);
    assert_verified(q);
    CU_ASSERT_EQUAL(evq_run(q, NULL), NP_OK);
    CU_ASSERT_EQUAL(l.n, n_sched - n_cancel);
    CU_ASSERT_EQUAL(evq_dispatched(q), l.n);
    assert_verified(q);
    evq_free(q);
}

/* Lockstep-shaped random operations: bursts of events at a few cycle starts, one time or two
 * alternating (so that they go into blocks), cancellations among recent events, events at now
 * from callbacks, steps, and run_until to cycle starts, with evq_verify after every operation
 * (every 97th above 16,384 pending). The order is checked as in the hold model: each event's
 * insertion number is its arg, and (time, insertion) never decreases. */
typedef struct lockstep_rand {
    rng r;
    uint64_t next_id, last_t, last_id, n_disp, n_bad, n_cancel;
    evq_handle recent[256];
} lockstep_rand;

static void lockstep_rand_fn(evq *q, void *ctx, uint64_t id);

static void lockstep_rand_schedule(evq *q, lockstep_rand *w, uint64_t t)
{
    CU_ASSERT_EQUAL_FATAL(evq_schedule_at(q, t, lockstep_rand_fn, w, w->next_id,
                                          &w->recent[w->next_id % 256], NULL), NP_OK);
    w->next_id++;
}

static void lockstep_rand_fn(evq *q, void *ctx, uint64_t id)
{
    lockstep_rand *w = ctx;
    uint64_t t = evq_now(q);
    if (w->n_disp && (t < w->last_t || (t == w->last_t && id < w->last_id)))
        w->n_bad++;
    w->last_t = t;
    w->last_id = id;
    w->n_disp++;
    if (rng_below(&w->r, 8) == 0)
        lockstep_rand_schedule(q, w, t);
    if (rng_below(&w->r, 16) == 0)
        w->n_cancel += evq_cancel(q, w->recent[rng_below(&w->r, 256)]);
}

static void lockstep_rand_ops(evq *q, lockstep_rand *w, int n_ops, uint64_t max_pending,
                              uint64_t max_burst, int verify_every)
{
    for (int op = 0; op < n_ops; op++) {
        uint64_t k = rng_below(&w->r, 16), now = evq_now(q);
        if (k < 9 && evq_pending(q) < max_pending) {
            uint64_t a = (now / 1000 + 1 + rng_below(&w->r, 6)) * 1000;
            uint64_t b = rng_below(&w->r, 4) ? a : a + 1000;
            uint64_t n = 1 + rng_below(&w->r, max_burst);
            for (uint64_t i = 0; i < n; i++)
                lockstep_rand_schedule(q, w, i % 2 ? b : a);
        } else if (k < 10) {
            w->n_cancel += evq_cancel(q, w->recent[rng_below(&w->r, 256)]);
        } else if (k < 13) {
            CU_ASSERT_EQUAL_FATAL(evq_step(q, NULL, NULL), NP_OK);
        } else {
            uint64_t t_end = (now / 1000 + rng_below(&w->r, 3)) * 1000;
            CU_ASSERT_EQUAL_FATAL(evq_run_until(q, t_end < now ? now : t_end, NULL), NP_OK);
        }
        if (op % verify_every == 0)
            assert_verified(q);
    }
}

TEST(invariants_hold_after_every_operation_of_a_lockstep_workload)
{
    evq *q = new_queue();
    lockstep_rand w = {0};
    rng_seed(&w.r, 7);
    lockstep_rand_ops(q, &w, 6000, 3000, 80, 1);
    uint64_t max_pending = 0;
    for (int i = 0; i < 100 && max_pending < 20000; i++) {
        lockstep_rand_ops(q, &w, 100, 40000, 4000, 97);
        max_pending = evq_pending(q) > max_pending ? evq_pending(q) : max_pending;
    }
    lockstep_rand_ops(q, &w, 3000, 40000, 1000, 97);
    CU_ASSERT(max_pending >= 20000);
    assert_verified(q);
    CU_ASSERT_EQUAL(evq_run(q, NULL), NP_OK);
    assert_verified(q);
    CU_ASSERT_EQUAL(w.n_bad, 0);
    CU_ASSERT_EQUAL(w.n_disp, w.next_id - w.n_cancel);
    CU_ASSERT_EQUAL(evq_dispatched(q), w.n_disp);
    CU_ASSERT_EQUAL(evq_cancelled(q), w.n_cancel);
    CU_ASSERT(w.n_cancel > 1000);
    evq_free(q);
}

TEST(self_check_matches_the_reference_queue)
{
    evq_selfcheck_result res;
    np_err e = {0};
    np_status st = evq_selfcheck(200000, 1, &res, &e);
    if (st != NP_OK)
        fprintf(stderr, "\n%s\n", e.msg);
    CU_ASSERT_EQUAL(st, NP_OK);
    CU_ASSERT_TRUE(res.matched);
    CU_ASSERT_EQUAL(res.dispatched, 200000);
    CU_ASSERT(res.cancelled > 1000);
    CU_ASSERT(res.rebuilds > 5);
    CU_ASSERT(res.final_time_ps > 1000000000);
}

TEST(randomized_workload_is_deterministic_and_depends_on_the_seed)
{
    evq_selfcheck_result a, b, c;
    CU_ASSERT_EQUAL(evq_selfcheck(30000, 42, &a, NULL), NP_OK);
    CU_ASSERT_EQUAL(evq_selfcheck(30000, 42, &b, NULL), NP_OK);
    CU_ASSERT_EQUAL(evq_selfcheck(30000, 43, &c, NULL), NP_OK);
    CU_ASSERT_EQUAL(memcmp(&a, &b, sizeof a), 0);
    CU_ASSERT_EQUAL(a.hash, b.hash);
    CU_ASSERT_NOT_EQUAL(a.hash, c.hash);
    CU_ASSERT_NOT_EQUAL(a.final_time_ps, c.final_time_ps);
    np_err e = {0};
    CU_ASSERT_EQUAL(evq_selfcheck(0, 42, &a, &e), NP_ERR_RANGE);
}

/* ---- allocation failure ------------------------------------------------------------------ */

#if !defined(__SANITIZE_ADDRESS__)
static void count_fn(evq *q, void *ctx, uint64_t arg)
{
    (void)q;
    (void)arg;
    ++*(uint64_t *)ctx;
}

/* In a child process with a capped address space: schedule until the queue runs out of host
 * memory, then check that the refused event changed nothing and every accepted one runs. */
static int nomem_child(void)
{
    evq *q;
    if (evq_create(&q, NULL) != NP_OK)
        return 10;
    struct rlimit lim;
    long pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f || fscanf(f, "%ld", &pages) != 1)
        return 11;
    fclose(f);
    lim.rlim_cur = lim.rlim_max = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + (16u << 20);
    if (setrlimit(RLIMIT_AS, &lim) != 0)
        return 12;
    rng r;
    rng_seed(&r, 5);
    uint64_t ok = 0, fired = 0;
    np_err e = {0};
    for (;;) {
        uint64_t t = rng_below(&r, 8) ? rng_below(&r, 1000000) : rng_below(&r, 1ULL << 50);
        uint64_t before = evq_pending(q);
        np_status st = evq_schedule_at(q, t, count_fn, &fired, 0, NULL, &e);
        if (st == NP_ERR_NOMEM) {
            if (evq_pending(q) != before)
                return 13;
            break;
        }
        if (st != NP_OK)
            return 14;
        if (++ok > 50000000)
            return 15;
    }
    if (evq_verify(q, &e) != NP_OK)
        return 16;
    if (evq_run(q, &e) != NP_OK)
        return 17;
    if (fired != ok || evq_pending(q) != 0 || evq_verify(q, &e) != NP_OK)
        return 18;
    evq_free(q);
    return ok > 50000 ? 0 : 19;
}
#endif

TEST(running_out_of_host_memory_is_nomem_and_leaves_the_queue_whole)
{
#if defined(__SANITIZE_ADDRESS__)
    /* ASan reserves its shadow memory up front and aborts on failed allocations. */
    CU_PASS("skipped under AddressSanitizer");
#else
    fflush(NULL);
    pid_t pid = fork();
    CU_ASSERT_FATAL(pid >= 0);
    if (pid == 0)
        _exit(nomem_child());
    int st = 0;
    waitpid(pid, &st, 0);
    CU_ASSERT_TRUE(WIFEXITED(st));
    if (WIFEXITED(st) && WEXITSTATUS(st) != 0)
        fprintf(stderr, "\nnomem child failed with code %d\n", WEXITSTATUS(st));
    CU_ASSERT_EQUAL(WEXITSTATUS(st), 0);
#endif
}
