/* evq.h — the discrete-event kernel: one queue of timed callbacks, in simulated picoseconds.
 *
 * Every component of a simulated system schedules callbacks on one evq. Events are dispatched
 * in order of (time, insertion sequence number): events at the same time run strictly in the
 * order they were scheduled, including those scheduled from inside callbacks at the current
 * time, so a run is deterministic. Time never goes backwards: scheduling before now() is
 * refused. A callback receives the queue, so it can schedule and cancel further events.
 *
 *   static void tick(evq *q, void *ctx, uint64_t n)
 *   {
 *       if (n > 1)
 *           evq_schedule_in(q, 1000, tick, ctx, n - 1, NULL, NULL); // 1 ns later
 *   }
 *   ...
 *   evq *q;
 *   if (evq_create(&q, &err) != NP_OK) return err.status;
 *   evq_schedule_at(q, 0, tick, NULL, 10, NULL, &err);
 *   evq_run(q, &err);            // 10 events; evq_now(q) == 9000
 *   evq_free(q);
 *
 * Inside, a timing wheel (a calendar queue with power-of-two bucket width and count, adapted
 * to the number of pending events and their spacing) with an overflow heap for far events;
 * events that many components schedule for one time, as the chips of a lockstep system do,
 * are kept as arrays rather than lists, so such a time costs about what as many lone events
 * do. See evq.c for the structure and its invariants, which evq_verify() checks.
 */
#ifndef NPUSIM_EVQ_H
#define NPUSIM_EVQ_H

#include <stdbool.h>
#include <stdint.h>

#include "err.h"

typedef struct evq evq;

/* An event's action: called once at the event's time with the ctx and arg it was scheduled
 * with; evq_now(q) is the event's time. It may schedule, cancel and stop, but not run. */
typedef void (*evq_fn)(evq *q, void *ctx, uint64_t arg);

/* Names one scheduled event, for evq_cancel. A plain value: copy it freely. It stays safe to
 * use after the event fired or was cancelled (cancel then reports false) for as long as the
 * queue that issued it lives; reusing the event's storage never makes it name a newer event.
 * EVQ_HANDLE_NONE (all zero) names no event. */
typedef struct evq_handle {
    struct evq_node *node;
    uint64_t seq; /* the event's insertion sequence number; 0 only in EVQ_HANDLE_NONE */
} evq_handle;

#define EVQ_HANDLE_NONE ((evq_handle){NULL, 0})

/* A new empty queue at time 0 in *out; free it with evq_free.
 * NP_ERR_NOMEM when host memory runs out (*out untouched). */
np_status evq_create(evq **out, np_err *err);

/* Frees q and every pending event (their ctx pointers are not touched). NULL is a no-op. */
void evq_free(evq *q);

/* Schedules fn(q, ctx, arg) at absolute time t_ps; fills *h (when h is not NULL) with its
 * handle. Refused with NP_ERR_INTERNAL when t_ps < evq_now(q) or fn is NULL, NP_ERR_NOMEM
 * when host memory runs out; on failure nothing is scheduled and *h is untouched. */
np_status evq_schedule_at(evq *q, uint64_t t_ps, evq_fn fn, void *ctx, uint64_t arg,
                          evq_handle *h, np_err *err);

/* Like evq_schedule_at at evq_now(q) + delay_ps; NP_ERR_RANGE when that passes 2^64-1 ps. */
np_status evq_schedule_in(evq *q, uint64_t delay_ps, evq_fn fn, void *ctx, uint64_t arg,
                          evq_handle *h, np_err *err);

/* Cancels the pending event h names, in O(1): true when it did; false, with nothing changed,
 * when h names no pending event (it already fired, was already cancelled, or is
 * EVQ_HANDLE_NONE). The event's ctx is not touched. */
bool evq_cancel(evq *q, evq_handle h);

/* Dispatches every event with time <= t_end_ps in order (including events that callbacks
 * schedule within that range), then sets now to t_end_ps. If a callback calls evq_stop, returns
 * after that callback with now at its event's time. NP_ERR_INTERNAL when t_end_ps < now or when
 * called from a callback; NP_ERR_NOMEM when host memory runs out (the queue stays valid, with
 * the events not yet dispatched still pending). */
np_status evq_run_until(evq *q, uint64_t t_end_ps, np_err *err);

/* Dispatches events in order until none is pending or a callback calls evq_stop; now is left
 * at the last dispatched event's time. Errors as evq_run_until. */
np_status evq_run(evq *q, np_err *err);

/* Dispatches the earliest pending event, if any; *dispatched (when not NULL) tells whether one
 * was. Errors as evq_run_until. */
np_status evq_step(evq *q, bool *dispatched, np_err *err);

/* From inside a callback: makes the running evq_run / evq_run_until return after this
 * callback. Outside a run it does nothing (each run starts unstopped). */
void evq_stop(evq *q);

/* Current simulated time in ps: the time of the event being or last dispatched, or the t_end
 * of the last evq_run_until, whichever is later. */
uint64_t evq_now(const evq *q);

/* Events scheduled and neither dispatched nor cancelled. */
uint64_t evq_pending(const evq *q);

/* Events dispatched since creation. */
uint64_t evq_dispatched(const evq *q);

/* Events cancelled (evq_cancel returned true) since creation. */
uint64_t evq_cancelled(const evq *q);

/* Times the queue rebuilt itself for a new event count or spacing (for tests and tuning). */
uint64_t evq_rebuilds(const evq *q);

/* Checks every invariant of q's data structure (O(pending + buckets + pool size)): NP_OK, or
 * NP_ERR_INTERNAL with a message naming the first broken one. For tests and debugging. */
np_status evq_verify(const evq *q, np_err *err);

/* What evq_selfcheck reports. Every field depends only on (n_events, seed). */
typedef struct evq_selfcheck_result {
    uint64_t dispatched;    /* events dispatched */
    uint64_t cancelled;     /* events cancelled */
    uint64_t final_time_ps; /* simulated time at the end */
    uint64_t hash;          /* FNV-1a (64-bit) over (time_ps, id) of each dispatched event */
    uint64_t rebuilds;      /* times the queue rebuilt itself during the workload */
    bool matched;           /* the queue's dispatch sequence equals the reference's */
} evq_selfcheck_result;

/* Runs a seeded randomized workload of n_events dispatches (same-time ties, events scheduled
 * from callbacks, cancellations, run_until steps, event spacing changing by orders of
 * magnitude, lockstep phases with hundreds of events per time, cancellations and events at
 * now among them) on a real evq and on a simple independent reference queue, compares the two
 * dispatch sequences event by event, and fills *res. NP_ERR_INTERNAL with a message naming the
 * first divergence when they differ (res->matched false), NP_ERR_NOMEM when host memory runs
 * out. Takes about 0.3 us per event on one core and about 20 bytes of memory per event. */
np_status evq_selfcheck(uint64_t n_events, uint64_t seed, evq_selfcheck_result *res,
                        np_err *err);

#endif
