/* core_verify.c — the core model's state machines checked against their invariants
 * (core_sim_verify, hw_system_verify).
 *
 * What core.c's header promises of each core of a chip's program, checked at any moment:
 *   - the front end: its pc inside the text, its state one of fe_state, its loop depth
 *     within ISA_LOOP_DEPTH, its busy and stall time no more than the time since the start;
 *   - each unit queue: the ring's head, count, started and in-flight counts nested
 *     (in flight <= started <= count <= CORE_QUEUE_DEPTH); the in-flight count is the
 *     started entries not yet done, and no entry past the started ones is done; the lane
 *     mask holds exactly the lanes of the entries in flight; BUSY only with entries in
 *     flight, never IDLE with some; its accounting no later than now, its busy time no more
 *     than the time since the start; a queue with entries is marked used;
 *   - the chip: cores_left counts the cores not done.
 * And of a chip whose program ended (DONE): every front end done, every queue empty and idle
 * with no lane taken, each core's halt and end within the run, its scratchpad ports quiet.
 */
#include <inttypes.h>

#include "core_sim.h"
#include "hw_system.h"

static np_status cv_fail(const core_model *c, np_err *err, const char *what, uint64_t a,
                         uint64_t b)
{
    char name[64];
    core_name(c, name, sizeof name);
    return np_err_set(err, NP_ERR_INTERNAL, "core model: %s: %s (%" PRIu64 ", %" PRIu64 ")",
                      name, what, a, b);
}

static np_status cv_queue(const core_model *c, unsigned u, uint64_t now, uint64_t t0,
                          bool ended, np_err *err)
{
    const core_queue *q = &c->q[u];
    static const char *const names[] = {"queue head outside the ring", "queue overfull",
                                        "more entries started than queued",
                                        "more in flight than started"};
    uint64_t v[][2] = {{q->head, CORE_QUEUE_DEPTH}, {q->count, CORE_QUEUE_DEPTH},
                       {q->n_started, q->count}, {q->n_inflight, q->n_started}};
    for (unsigned k = 0; k < 4; k++)
        if (k == 0 ? v[k][0] >= v[k][1] : v[k][0] > v[k][1])
            return cv_fail(c, err, names[k], v[k][0], v[k][1]);
    unsigned inflight = 0;
    uint32_t lanes = 0;
    for (unsigned i = 0; i < q->count; i++) {
        const q_entry *e = &q->ring[(q->head + i) % CORE_QUEUE_DEPTH];
        if (i >= q->n_started && e->done)
            return cv_fail(c, err, "an entry done before it started (position, pc)", i, e->pc);
        if (i < q->n_started && !e->done) {
            inflight++;
            if (e->lane >= 32 || (lanes >> e->lane & 1))
                return cv_fail(c, err, "two entries in flight on one lane (lane, pc)", e->lane,
                               e->pc);
            lanes |= 1u << e->lane;
        }
    }
    if (inflight != q->n_inflight)
        return cv_fail(c, err, "in-flight count is not the started entries not done (count, "
                       "entries)", q->n_inflight, inflight);
    if (lanes != q->lanes)
        return cv_fail(c, err, "lane mask is not the lanes of the entries in flight (mask, "
                       "lanes)", q->lanes, lanes);
    if ((q->state == Q_BUSY) != (q->n_inflight > 0) && !(q->state == Q_WAIT_SEM && q->n_inflight))
        return cv_fail(c, err, "queue state disagrees with its entries in flight (state, in "
                       "flight)", (uint64_t)q->state, q->n_inflight);
    if (q->count && !(c->q_used >> u & 1))
        return cv_fail(c, err, "a queue holding entries is not marked used (unit, entries)", u,
                       q->count);
    if (q->t_acct_ps > now || q->busy_ps > now - t0)
        return cv_fail(c, err, "queue accounted past now or busy longer than the run (busy, "
                       "run)", q->busy_ps, now - t0);
    if (ended && (q->count || q->state != Q_IDLE || q->lanes || q->sb_wait))
        return cv_fail(c, err, "a queue of an ended program is not empty and idle (unit, "
                       "entries)", u, q->count);
    return NP_OK;
}

np_status core_sim_verify(const chip_sim *s, bool ended, np_err *err)
{
    uint64_t now = evq_now(s->q), t0 = s->t_start_ps, left = 0;
    for (uint32_t i = 0; i < s->n_cores; i++) {
        const core_model *c = &s->cores[i];
        if (c->index != i || c->chip != s)
            return cv_fail(c, err, "core record out of place (index, position)", c->index, i);
        if (c->pc > c->n_insns || c->fe > FE_DONE || c->depth > ISA_LOOP_DEPTH)
            return cv_fail(c, err, "front end outside its text or states (pc, state)", c->pc,
                           c->fe);
        if (c->fe_busy_ps + c->fe_stall_ps > now - t0)
            return cv_fail(c, err, "front end busy and stalled longer than the run (busy + "
                           "stall, run)", c->fe_busy_ps + c->fe_stall_ps, now - t0);
        left += c->fe != FE_DONE;
        for (unsigned u = 0; u < ISA_N_QUEUES; u++)
            if (cv_queue(c, u, now, t0, ended, err) != NP_OK)
                return err->status;
        if (ended && (c->fe != FE_DONE || c->t_halt_ps > c->t_done_ps || c->t_done_ps > now ||
                      c->t_done_ps < t0))
            return cv_fail(c, err, "an ended program's core not done within the run (halt, "
                           "end)", c->t_halt_ps, c->t_done_ps);
        if (ended && ((c->ports && hbm_active(c->ports)) || (c->acc_port && hbm_active(c->acc_port))))
            return cv_fail(c, err, "an ended program's scratchpad ports still move data "
                           "(transfers, accumulator's)", c->ports ? hbm_active(c->ports) : 0,
                           c->acc_port ? hbm_active(c->acc_port) : 0);
    }
    if (left != s->cores_left)
        return np_err_set(err, NP_ERR_INTERNAL, "core model: chip %" PRIu32 ": %" PRIu32 " cores "
                          "counted left, %" PRIu64 " not done", s->chip, s->cores_left, left);
    return NP_OK;
}

np_status hw_system_verify(const hw_system *y, np_err *err)
{
    for (uint32_t k = 0; k < y->n_chips; k++) {
        const chip_sim *s = &y->chips[k];
        if ((s->state == HW_CHIP_RUNNING || s->state == HW_CHIP_DONE ||
             s->state == HW_CHIP_DEADLOCK) && s->cores &&
            core_sim_verify(s, s->state == HW_CHIP_DONE, err) != NP_OK)
            return err->status;
    }
    return NP_OK;
}
