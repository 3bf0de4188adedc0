/* run_engine.c — the run engine's event handlers and run_simulate (see run_engine.h and the
 * state machine in run_sim.h).
 *
 * Events on the run's queue: a compute task's finish (arg: rank << 4 | engine), a reused
 * collective's timer and every collective's completion (arg: rendezvous slot), the network's
 * transfer events for sends (arg: rank << 4 | engine) and those of the collectives it runs,
 * and the link sampler. Completions of collectives are always handled in an event scheduled
 * at the completion time from the event that found the collective done (its own last event,
 * or its timer when reused), so both ways order the follow-up work alike.
 *
 * Nothing on these paths allocates or searches, except what the network and the collective
 * engine do inside noc/ for the collectives that are simulated.
 */
#include "run_sim.h"

#include "core.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RS_PROGRESS_EVERY 65536 /* task completions between progress calls */

static void rs_fail(run_sim *s, const np_err *e)
{
    if (!s->failed) {
        s->failed = true;
        s->err = *e;
    }
    evq_stop(s->q);
}

/* A link's row of bins could not be made (rs_bin_row): the run stops, out of memory. */
static void rs_fail_bins(run_sim *s)
{
    np_err e;
    np_err_set(&e, NP_ERR_NOMEM, "out of memory counting a link's bytes");
    rs_fail(s, &e);
}

/* ---- time accounting --------------------------------------------------------------------- */

/* Takes rank r's idle time at its pipeline's lo and hi when they moved since it last looked
 * (both are at or after r->t_acct, and r's state since then is the one it has now). */
static inline void rs_pipe_look(rs_rank *r)
{
    const rs_pipe *P = r->pipe;
    bool idle = !r->computing && !r->n_active;
    if (r->lo_ver != P->lo_ver) {
        r->idle_lo = r->st.idle_ps + (idle ? P->lo - r->t_acct : 0);
        r->lo_ver = P->lo_ver;
    }
    if (r->hi_ver != P->hi_ver) {
        r->idle_hi = r->st.idle_ps + (idle ? P->hi - r->t_acct : 0);
        r->hi_ver = P->hi_ver;
    }
}

/* Brings rank r's time up to now (call before its activity changes): computing, communication
 * per kind and exposed, idle (neither). */
static inline void rs_acct(rs_rank *r, uint64_t now)
{
    uint64_t dt = now - r->t_acct;
    if (r->pipe)
        rs_pipe_look(r);
    r->t_acct = now;
    if (!dt)
        return;
    if (r->computing)
        r->st.computing_ps += dt;
    if (!r->n_active) {
        if (!r->computing)
            r->st.idle_ps += dt;
        return;
    }
    r->st.busy_ps[RUN_UNIT_COMM] += dt;
    if (!r->computing)
        r->st.exposed_all_ps += dt;
    for (int k = 0; k < RUN_COMM_COUNT; k++)
        if (r->active[k]) {
            r->st.comm_ps[k] += dt;
            if (!r->computing)
                r->st.exposed_ps[k] += dt;
        }
}

/* A pipeline task of rank r starts (end: ends) now, in its engine's step: its pipeline's
 * window moves (a task of an earlier step than the window's moves nothing). A new step's
 * window closes the last one: each of the pipeline's ranks adds its bubble there to its
 * bubbles of every step. */
static inline void rs_pipe_mark(run_sim *s, rs_rank *r, uint32_t step, uint64_t now, bool end)
{
    rs_pipe *P = r->pipe;
    if (!P)
        return;
    if (!end && P->step != UINT32_MAX && step > P->step)
        for (uint32_t i = 0; i < P->size; i++) {
            rs_rank *x = &s->rank[P->members[i]];
            rs_pipe_look(x);
            x->st.bubble_all_ps += x->idle_hi - x->idle_lo;
        }
    if (!end && (P->step == UINT32_MAX || step > P->step)) {
        P->step = step;
        P->lo = P->hi = now;
        P->lo_ver++;
        P->hi_ver++;
    } else if (end && step == P->step && now >= P->hi) {
        P->hi = now;
        P->hi_ver++;
    }
}

/* Rank r's mirror at position k of its mirror group (r itself for k = 0 or no mirrors). */
static inline uint32_t rs_mirror(const run_sim *s, uint32_t r, uint32_t k)
{
    if (!k)
        return r;
    const rg_groupset *G = &s->g->gs[s->mirror_gs];
    return G->members[(size_t)G->group_of[r] * G->size + k];
}

static inline void rs_comm_begin(run_sim *s, rs_rank *r, unsigned kind, uint64_t now)
{
    (void)s;
    rs_acct(r, now);
    if (r->n_active++ == 0)
        r->comm_since = now;
    r->active[kind]++;
}

static inline void rs_comm_end(run_sim *s, rs_rank *r, unsigned kind, uint64_t now)
{
    rs_acct(r, now);
    r->active[kind]--;
    if (--r->n_active == 0 && s->obs && s->obs->comm_busy && now > r->comm_since)
        for (uint32_t k = 0; k < s->mirror_n; k++)
            s->obs->comm_busy(s->obs->ctx, rs_mirror(s, r->id, k), r->comm_since, now);
}

/* ---- engines ------------------------------------------------------------------------------ */

static inline uint32_t rs_head_id(const rs_rank *r, uint32_t e)
{
    const rg_class *c = r->cls;
    return c->order[c->eng_off[e] + r->eng[e].idx];
}

static inline const rg_task *rs_head(const rs_rank *r, uint32_t e)
{
    return &r->cls->tasks[rs_head_id(r, e)];
}

/* ---- overlapped in chunks ------------------------------------------------------------------ */

static void rs_ev_compute_done(evq *q, void *ctx, uint64_t arg);
static void rs_ev_pipe_done(evq *q, void *ctx, uint64_t arg);

/* A two-stage pipeline of k chunks (docs/run.md, "Overlapped tensor-parallel communication"):
 * of two tasks started together, one ends no earlier than max(its own end + the other's time
 * / k, the other's end + its own time / k). */

static void rs_pipe_clear(rs_rank *r, uint32_t x)
{
    r->eng[x].pipe = 0;
    r->pipe_mask &= ~(1u << x);
}

/* Ends engine x's head at t (its compute done, or its collective's completion here). */
static void rs_pipe_finish_at(run_sim *s, rs_rank *r, uint32_t x, uint64_t t)
{
    np_err err;
    np_status st = x == 0 ? evq_schedule_at(s->q, t, rs_ev_compute_done, s,
                                            (uint64_t)r->id << 4 | x, NULL, &err)
                          : evq_schedule_at(s->q, t, rs_ev_pipe_done, s,
                                            (uint64_t)r->id << 4 | x, NULL, &err);
    if (st != NP_OK)
        rs_fail(s, &err);
}

/* Engine e of r completed a task: the heads overlapping it learn its end; one whose own part
 * has ended already ends one of its chunks later. */
static void rs_pipe_other_done(run_sim *s, rs_rank *r, uint32_t e)
{
    uint64_t now = evq_now(s->q);
    for (uint32_t m = r->pipe_mask; m; m &= m - 1) {
        uint32_t x = (uint32_t)__builtin_ctz(m);
        rs_eng *X = &r->eng[x];
        if (X->pipe_eng != e || X->other_done || r->eng[e].done <= X->pipe_need)
            continue;
        X->other_done = 1;
        X->other_end = now;
        X->other_ps = now - r->eng[e].t_start;
        if (X->pipe != 2)
            continue;
        uint32_t k = r->cls->tasks[rs_head_id(r, x)].pipe_k;
        rs_pipe_clear(r, x);
        if (x == 0) { /* the GEMM's last chunk, now that its input is all there */
            rs_acct(r, now);
            r->computing = 1;
        }
        rs_pipe_finish_at(s, r, x, now + X->own_ps / k);
    }
}

/* Engine x's head has done its own part now: false when it must still wait (for the other's
 * end, or until the pipeline's end, which is then scheduled). */
static bool rs_pipe_own_done(run_sim *s, rs_rank *r, uint32_t x, uint64_t own_ps)
{
    rs_eng *X = &r->eng[x];
    if (!X->pipe)
        return true;
    uint64_t now = evq_now(s->q);
    X->own_ps = own_ps;
    if (!X->other_done) {
        X->pipe = 2;
        if (x == 0) { /* the GEMM waits for its input: nothing computes */
            rs_acct(r, now);
            r->computing = 0;
        }
        return false;
    }
    uint32_t k = r->cls->tasks[rs_head_id(r, x)].pipe_k;
    uint64_t a = now + X->other_ps / k, b = X->other_end + own_ps / k, fin = a > b ? a : b;
    rs_pipe_clear(r, x);
    if (fin <= now)
        return true;
    rs_pipe_finish_at(s, r, x, fin);
    return false;
}

/* Engine e of r finished its head. */
static void rs_complete(run_sim *s, rs_rank *r, uint32_t e)
{
    rs_eng *E = &r->eng[e];
    E->busy = 0;
    E->done++;
    s->t_last = evq_now(s->q);
    s->tasks_done++;
    if (++E->idx == r->cls->eng_n[e]) {
        E->idx = 0;
        E->step++;
        /* The rank has finished step k when every one of its engines has. */
        uint32_t min = UINT32_MAX;
        for (uint32_t i = 0; i < r->cls->n_engines; i++) {
            uint32_t st = r->eng[r->cls->engines[i]].step;
            min = st < min ? st : min;
        }
        uint64_t now = evq_now(s->q);
        for (; r->steps_done < min; r->steps_done++)
            if (now > s->step_end[r->steps_done])
                s->step_end[r->steps_done] = now;
        if (r->steps_done == s->steps) {
            r->st.end_ps = now;
            s->ranks_left--;
        }
    }
    if (r->pipe_mask)
        rs_pipe_other_done(s, r, e);
    if (s->o.progress && s->tasks_done >= s->progress_next) {
        s->progress_next = s->tasks_done + RS_PROGRESS_EVERY;
        s->o.progress(s->o.progress_ctx, (double)s->tasks_done / (double)s->tasks_total);
    }
}

static void rs_ev_compute_launch(evq *q, void *ctx, uint64_t arg);
static void rs_coll_begin(run_sim *s, rs_rdv *v);
static void rs_p2p_event(void *ctx, uint64_t arg, net_event ev);

enum { RS_WAIT, RS_STARTED, RS_DONE };

static int rs_start_compute(run_sim *s, rs_rank *r, uint32_t e, const rg_task *t)
{
    uint64_t now = evq_now(s->q);
    run_ktime own;
    const run_ktime *kt;
    np_err err;
    if (s->ktime) {
        kt = &s->ktime[t->ref];
    } else {
        memset(&own, 0, sizeof own);
        s->kernels_timed++;
        if (s->o.time_kernel(s->o.time_ctx, &s->g->kern[t->ref].k, &own, &err) != NP_OK) {
            rs_fail(s, &err);
            return RS_WAIT;
        }
        kt = &own;
    }
    uint64_t ps = (t->flags & RUN_TASK_CHAINED) && kt->chained_ps ? kt->chained_ps : kt->ps;
    if (r->slow != 1.0) {
        ps = (uint64_t)llround((double)ps * r->slow);
        own = *kt;
        for (int u = 0; u < RUN_UNIT_COUNT; u++)
            own.unit_ps[u] = (uint64_t)llround((double)kt->unit_ps[u] * r->slow);
        kt = &own;
    }
    rs_acct(r, now);
    r->computing = 1;
    r->eng[e].t_start = now;
    r->eng[e].own_ps = ps;
    if (s->obs)
        r->kt = *kt;
    r->st.busy_ps[RUN_UNIT_COMPUTE] += ps;
    energy_counts_add(&r->st.acts, &kt->acts, 1);
    r->st.throttle_ps += kt->throttle_ps;
    if (ps) {
        double w = energy_dynamic_j(s->cfg, &kt->acts, NULL) / ((double)ps * 1e-12);
        r->st.peak_dynamic_w = w > r->st.peak_dynamic_w ? w : r->st.peak_dynamic_w;
    }
    for (int u = 0; u < RUN_UNIT_COUNT; u++)
        if (run_unit_from_kernel((run_unit)u))
            r->st.busy_ps[u] += kt->unit_ps[u];
    const run_kernel *k = &s->g->kern[t->ref].k;
    if (!(t->flags & RUN_TASK_RECOMPUTE))
        r->st.flops += k->flops;
    r->st.hw_flops += k->hw_flops;
    if (t->flags & RUN_TASK_PIPELINE) {
        rs_pipe_mark(s, r, r->eng[e].step, now, false);
        /* Bubbles are measured on the last step: each step's first pipeline task resets. */
        if (r->st.pipe_first_ps == UINT64_MAX || r->eng[e].step != r->pipe_step) {
            r->pipe_step = r->eng[e].step;
            r->st.pipe_first_ps = now;
            r->st.pipe_busy_ps = 0;
        }
        r->st.pipe_busy_ps += ps;
    }
    if (evq_schedule_in(s->q, ps, rs_ev_compute_done, s, (uint64_t)r->id << 4 | e, NULL,
                        &err) != NP_OK) {
        rs_fail(s, &err);
        return RS_WAIT;
    }
    return RS_STARTED;
}

static void rs_arrive(run_sim *s, rs_rank *r, const rg_task *t)
{
    const run_graph *g = s->g;
    const rg_spec *sp = &g->spec[t->ref];
    const rg_comm *cm = &g->comm[sp->comm_id];
    rs_rdv *v = &s->rdv[cm->base + g->gs[cm->groupset].group_of[r->id]];
    if (v->arrived == 0)
        v->spec = t->ref; /* finalize checked that every member runs this one */
    if (++v->arrived < v->expect)
        return;
    v->arrived = 0;
    rs_coll_begin(s, v);
}

static int rs_start_send(run_sim *s, rs_rank *r, uint32_t e, const rg_task *t)
{
    const run_graph *g = s->g;
    uint64_t now = evq_now(s->q);
    rs_rank *d = &s->rank[g->send_dst[g->send_off[r->id] + t->ref]];
    np_err err;
    if (net_transfer(s->n, r->chip, d->chip, t->bytes, rs_p2p_event, s,
                     (uint64_t)r->id << 4 | e, &err) != NP_OK) {
        rs_fail(s, &err);
        return RS_WAIT;
    }
    rs_comm_begin(s, r, t->comm, now);
    rs_comm_begin(s, d, t->comm, now);
    r->eng[e].t_start = now;
    r->st.comm_bytes[t->comm] += t->bytes;
    s->transfers++;
    return RS_STARTED;
}

/* Starts engine e's head if it is idle and its dependencies are done. */
static int rs_try_start(run_sim *s, rs_rank *r, uint32_t e)
{
    rs_eng *E = &r->eng[e];
    if (E->busy || E->step >= s->steps || s->failed)
        return RS_WAIT;
    const rg_class *c = r->cls;
    const rg_task *t = rs_head(r, e);
    const uint32_t *d = c->deps + t->dep_off;
    for (uint32_t i = 0; i < t->n_deps; i++) {
        uint32_t de = d[i] >> RG_DEP_ENGINE_SHIFT;
        uint64_t need = (uint64_t)E->step * c->eng_n[de] + (d[i] & RG_DEP_POS_MASK);
        if ((t->pipe_k && d[i] == t->pipe ? r->eng[de].started : r->eng[de].done) <= need)
            return RS_WAIT;
    }
    E->busy = 1;
    E->started++;
    s->t_last = evq_now(s->q);
    if (t->pipe_k) { /* overlapping the other in chunks, unless it has ended already */
        uint32_t pe = t->pipe >> RG_DEP_ENGINE_SHIFT;
        uint64_t need = (uint64_t)E->step * c->eng_n[pe] + (t->pipe & RG_DEP_POS_MASK);
        if (r->eng[pe].done <= need) {
            E->pipe = 1;
            E->pipe_eng = (uint8_t)pe;
            E->pipe_need = need;
            E->other_done = 0;
            r->pipe_mask |= 1u << e;
        }
    }
    switch ((run_task_kind)t->kind) {
    case RUN_TASK_COMPUTE: {
        /* the stream's gap (and for a step's first kernel, or one after the host synchronized,
         * the host's launch) first: the engine is held, nothing computes (docs/run.md, "Kernel
         * launches") */
        uint64_t wait = s->launch_ps[E->idx == 0 || (t->flags & RUN_TASK_LAUNCH)];
        if (!wait)
            return rs_start_compute(s, r, e, t);
        np_err err;
        if (evq_schedule_in(s->q, wait, rs_ev_compute_launch, s, (uint64_t)r->id << 4 | e, NULL,
                            &err) != NP_OK) {
            rs_fail(s, &err);
            return RS_WAIT;
        }
        return RS_STARTED;
    }
    case RUN_TASK_COLL:
        E->t_start = evq_now(s->q); /* its arrival: an overlapped GEMM's other part */
        rs_arrive(s, r, t);
        return RS_STARTED;
    case RUN_TASK_SEND:
        return rs_start_send(s, r, e, t);
    case RUN_TASK_RECV: {
        rs_rchan *ch = &s->rchan[s->g->recv_off[r->id] + t->ref];
        if (ch->arrived) {
            ch->arrived--;
            rs_complete(s, r, e);
            return RS_DONE;
        }
        ch->waiting = (uint8_t)(1 + e);
        return RS_STARTED;
    }
    default:
        return RS_WAIT;
    }
}

/* Starts whatever of r can start now. */
static void rs_kick(run_sim *s, rs_rank *r)
{
    const rg_class *c = r->cls;
    for (bool again = true; again;) {
        again = false;
        for (uint32_t i = 0; i < c->n_engines; i++) {
            int st;
            while ((st = rs_try_start(s, r, c->engines[i])) == RS_DONE)
                again = true;
            /* a start can let a task that overlaps it start (rg_task.pipe_k) */
            again |= st == RS_STARTED && c->has_pipe;
        }
    }
}

/* ---- event handlers ----------------------------------------------------------------------- */

static void rs_ev_compute_launch(evq *q, void *ctx, uint64_t arg)
{
    (void)q;
    run_sim *s = ctx;
    rs_rank *r = &s->rank[arg >> 4];
    uint32_t e = (uint32_t)(arg & 15);
    rs_start_compute(s, r, e, rs_head(r, e));
}

static void rs_ev_compute_done(evq *q, void *ctx, uint64_t arg)
{
    run_sim *s = ctx;
    rs_rank *r = &s->rank[arg >> 4];
    uint32_t e = (uint32_t)(arg & 15);
    uint64_t now = evq_now(q);
    if (r->eng[e].pipe && !rs_pipe_own_done(s, r, e, r->eng[e].own_ps))
        return;
    rs_acct(r, now);
    r->computing = 0;
    if (rs_head(r, e)->flags & RUN_TASK_PIPELINE) {
        r->st.pipe_last_ps = now;
        rs_pipe_mark(s, r, r->eng[e].step, now, true);
    }
    if (s->obs && s->obs->compute)
        for (uint32_t k = 0; k < s->mirror_n; k++)
            s->obs->compute(s->obs->ctx, rs_mirror(s, r->id, k), rs_head_id(r, e), r->eng[e].step,
                            r->eng[e].t_start, now, &r->kt);
    rs_complete(s, r, e);
    rs_kick(s, r);
}

/* Every member's part of the collective of slot v that completes now (a collective on the
 * mirror groupset is its whole group: the simulated member and its mirrors; any other is
 * repeated for each mirror position with its members' mirrors). */
static void rs_observe_coll(run_sim *s, const rs_rdv *v, const rg_spec *sp, uint32_t e,
                            uint64_t now)
{
    uint64_t slot = (uint64_t)(v - s->rdv);
    bool whole = sp->groupset == s->mirror_gs;
    uint32_t ways = whole ? 1 : s->mirror_n;
    for (uint32_t k = 0; k < ways; k++) {
        uint64_t group = ((slot * 256 + k) << 32 | (v->count & 0xffffffffu)) + 1;
        for (uint32_t i = 0; i < v->n_members; i++) {
            const rs_rank *r = &s->rank[v->members[i]];
            uint32_t task = rs_head_id(r, e), step = r->eng[e].step;
            if (whole)
                for (uint32_t j = 0; j < s->mirror_n; j++)
                    s->obs->coll(s->obs->ctx, rs_mirror(s, r->id, j), task, step, v->t_start, now,
                                 group, s->mirror_n, sp->bytes);
            else
                s->obs->coll(s->obs->ctx, rs_mirror(s, r->id, k), task, step, v->t_start, now,
                             group, v->n_members, sp->bytes);
        }
    }
}

static void rs_ev_coll_done(evq *q, void *ctx, uint64_t arg)
{
    run_sim *s = ctx;
    rs_rdv *v = &s->rdv[arg];
    const rg_spec *sp = &s->g->spec[v->spec];
    uint64_t now = evq_now(q), bytes, reduced;
    if (v->c) {
        np_err e;
        if (coll_status(v->c, &e) != NP_OK) {
            rs_fail(s, &e);
            return;
        }
        bytes = coll_get_result(v->c)->bytes_sent;
        reduced = coll_get_result(v->c)->reduced_bytes;
        coll_free(v->c);
        v->c = NULL;
    } else {
        bytes = s->reuse[v->reuse].bytes_sent;
        reduced = s->reuse[v->reuse].reduced_bytes;
    }
    /* its reductions' element operations on the members' vector units (energy.h), shared
     * evenly over the group (every algorithm's schedule spreads them so, to within a chunk):
     * each simulated member its share, which its mirrors copy */
    uint64_t elems = reduced / (sp->elem_bytes ? sp->elem_bytes : 4);
    uint32_t size = s->g->gs[sp->groupset].size;
    for (uint32_t i = 0; i < v->n_members && elems && size; i++)
        s->rank[v->members[i]].st.acts.vector_ops += elems / size;
    rs_rank *first = &s->rank[v->members[0]];
    if (sp->groupset == s->mirror_gs)
        first->own_bytes[sp->comm] += bytes;
    else
        first->st.comm_bytes[sp->comm] += bytes;
    uint32_t e = 1 + sp->stream;
    if (s->obs && s->obs->coll)
        rs_observe_coll(s, v, sp, e, now);
    v->count++;
    for (uint32_t i = 0; i < v->n_members; i++) {
        rs_rank *r = &s->rank[v->members[i]];
        if (r->eng[e].pipe && !rs_pipe_own_done(s, r, e, now - v->t_start))
            continue; /* ends with the GEMM it overlaps (rs_ev_pipe_done) */
        rs_comm_end(s, r, sp->comm, now);
        rs_complete(s, r, e);
    }
    for (uint32_t i = 0; i < v->n_members; i++)
        rs_kick(s, &s->rank[v->members[i]]);
}

/* A collective overlapped with a GEMM in chunks ends here, one chunk after the GEMM. */
static void rs_ev_pipe_done(evq *q, void *ctx, uint64_t arg)
{
    run_sim *s = ctx;
    rs_rank *r = &s->rank[arg >> 4];
    uint32_t e = (uint32_t)(arg & 15);
    rs_comm_end(s, r, rs_head(r, e)->comm, evq_now(q));
    rs_complete(s, r, e);
    rs_kick(s, r);
}

static void rs_coll_done_cb(void *ctx, const coll_result *res)
{
    (void)res;
    rs_rdv *v = ctx;
    run_sim *s = v->s;
    np_err e;
    if (evq_schedule_in(s->q, 0, rs_ev_coll_done, s, (uint64_t)(v - s->rdv), NULL, &e) != NP_OK)
        rs_fail(s, &e);
}

/* A reused collective's time is up: its link bytes, at their times, then its completion. */
static void rs_ev_coll_timer(evq *q, void *ctx, uint64_t arg)
{
    run_sim *s = ctx;
    rs_rdv *v = &s->rdv[arg];
    const rs_reuse *ru = &s->reuse[v->reuse];
    const uint32_t *loc = s->loc_links + v->loc_off;
    for (uint32_t i = 0; i < ru->prof_n; i++) {
        const rs_prof *p = &s->prof[ru->prof_off + i];
        uint32_t l = loc[p->local_link];
        uint64_t *bin = rs_bin(s, l, v->t_start + p->rel_ps);
        if (!bin) {
            rs_fail_bins(s);
            return;
        }
        *bin += p->bytes;
        net_window_count(&s->replay_peak[l], v->t_start + p->rel_ps, p->bytes);
        s->link_bytes[l] += p->bytes;
    }
    np_err e;
    if (evq_schedule_in(q, 0, rs_ev_coll_done, s, arg, NULL, &e) != NP_OK)
        rs_fail(s, &e);
}

static void rs_coll_begin(run_sim *s, rs_rdv *v)
{
    const rg_spec *sp = &s->g->spec[v->spec];
    uint64_t now = evq_now(s->q);
    np_err e;
    v->t_start = now;
    for (uint32_t i = 0; i < v->n_members; i++)
        rs_comm_begin(s, &s->rank[v->members[i]], sp->comm, now);
    if (v->sig != RUN_NONE) {
        if (rs_reuse_get(s, v, &v->reuse, &e) != NP_OK ||
            evq_schedule_in(s->q, s->reuse[v->reuse].dur_ps, rs_ev_coll_timer, s,
                            (uint64_t)(v - s->rdv), NULL, &e) != NP_OK) {
            rs_fail(s, &e);
            return;
        }
        s->colls_reused++;
        return;
    }
    const rg_groupset *gs = &s->g->gs[sp->groupset];
    coll_desc d = {.op = sp->op, .algo = sp->algo,
                   .chips = s->gs_chips[sp->groupset] + (size_t)v->group * gs->size,
                   .n_chips = gs->size, .bytes = sp->bytes, .root = sp->root,
                   .chunk_bytes = sp->chunk_bytes, .elem_bytes = sp->elem_bytes,
                   .done = rs_coll_done_cb, .ctx = v};
    if (coll_start(s->cs, &d, &v->c, &e) != NP_OK) {
        v->c = NULL;
        rs_fail(s, &e);
        return;
    }
    s->colls_sim++;
}

static void rs_p2p_event(void *ctx, uint64_t arg, net_event ev)
{
    if (ev != NET_EVENT_DELIVERED)
        return;
    run_sim *s = ctx;
    const run_graph *g = s->g;
    rs_rank *r = &s->rank[arg >> 4];
    uint32_t e = (uint32_t)(arg & 15);
    const rg_task *t = rs_head(r, e);
    uint32_t k = g->send_off[r->id] + t->ref;
    rs_rank *d = &s->rank[g->send_dst[k]];
    uint64_t now = evq_now(s->q);
    if (s->obs && s->obs->transfer)
        for (uint32_t j = 0; j < s->mirror_n; j++)
            s->obs->transfer(s->obs->ctx, rs_mirror(s, r->id, j), rs_mirror(s, d->id, j),
                             rs_head_id(r, e), r->eng[e].step, r->eng[e].t_start, now, t->bytes);
    rs_comm_end(s, r, t->comm, now);
    rs_comm_end(s, d, t->comm, now);
    rs_complete(s, r, e);
    rs_rchan *ch = &s->rchan[g->recv_off[d->id] + g->send_dch[k]];
    if (ch->waiting) {
        uint32_t de = ch->waiting - 1u;
        ch->waiting = 0;
        rs_complete(s, d, de);
        rs_kick(s, d);
    } else {
        ch->arrived++;
    }
    rs_kick(s, r);
}

uint64_t *rs_bin_row(run_sim *s, uint32_t link)
{
    if (s->bin_row[link] != RUN_NONE)
        return &s->bins[(size_t)s->bin_row[link] * RS_LINK_BINS];
    if (s->n_bin_rows == s->cap_bin_rows) {
        uint32_t cap = s->cap_bin_rows ? 2 * s->cap_bin_rows : 64;
        uint64_t *v = realloc(s->bins, (size_t)cap * RS_LINK_BINS * sizeof *v);
        if (!v)
            return NULL;
        s->bins = v;
        s->cap_bin_rows = cap;
    }
    uint64_t *row = &s->bins[(size_t)s->n_bin_rows * RS_LINK_BINS];
    memset(row, 0, RS_LINK_BINS * sizeof *row);
    s->bin_row[link] = s->n_bin_rows++;
    return row;
}

/* Reads the sampled links' byte counters into the bin that ends now; merges bins in pairs
 * (doubling the window) when they run out; stops when nothing else is pending. */
static void rs_ev_sample(evq *q, void *ctx, uint64_t arg)
{
    (void)arg;
    run_sim *s = ctx;
    for (uint32_t i = 0; i < s->n_sampled; i++) {
        uint32_t l = s->sampled[i];
        net_link_info li;
        net_link_get(s->n, l, &li);
        uint64_t delta = li.bytes - s->link_last[i];
        if (delta) {
            uint64_t *row = rs_bin_row(s, l);
            if (!row) {
                rs_fail_bins(s);
                return;
            }
            row[s->bin_k] += delta;
            s->link_bytes[l] += delta;
            s->link_last[i] = li.bytes;
        }
    }
    if (++s->bin_k == RS_LINK_BINS) {
        for (uint32_t row = 0; row < s->n_bin_rows; row++) {
            uint64_t *b = &s->bins[(size_t)row * RS_LINK_BINS];
            for (uint32_t k = 0; k < RS_LINK_BINS / 2; k++)
                b[k] = b[2 * k] + b[2 * k + 1];
            memset(b + RS_LINK_BINS / 2, 0, RS_LINK_BINS / 2 * sizeof *b);
        }
        s->bin_ps *= 2;
        s->bin_k = RS_LINK_BINS / 2;
    }
    if (evq_pending(q) == 0)
        return;
    np_err e;
    if (evq_schedule_at(q, (uint64_t)(s->bin_k + 1) * s->bin_ps, rs_ev_sample, s, 0, NULL, &e) !=
        NP_OK)
        rs_fail(s, &e);
}

/* The run is over: every simulated rank's time accounted up to the run's end (the last task's
 * end of any rank; after its own last task a rank is idle), and its pipeline's bubble: its idle
 * time inside the window of its pipeline's last step. */
static void rs_acct_end(run_sim *s)
{
    uint64_t end = 0;
    for (uint32_t i = 0; i < s->g->ranks; i++)
        end = s->rank[i].st.end_ps > end ? s->rank[i].st.end_ps : end;
    for (uint32_t i = 0; i < s->g->ranks; i++) {
        rs_rank *r = &s->rank[i];
        if (!r->sim)
            continue;
        rs_acct(r, end > r->t_acct ? end : r->t_acct);
        if (r->pipe && r->pipe->step != UINT32_MAX) {
            r->st.window_ps = r->pipe->hi - r->pipe->lo;
            r->st.bubble_ps = r->idle_hi - r->idle_lo;
            r->st.bubble_all_ps += r->st.bubble_ps;
        }
    }
}

/* ---- deadlock report ---------------------------------------------------------------------- */

/* What engine e of r waits for, into buf. */
static void rs_describe_wait(const run_sim *s, const rs_rank *r, uint32_t e, char *buf,
                             size_t len)
{
    const run_graph *g = s->g;
    const rg_class *c = r->cls;
    const rs_eng *E = &r->eng[e];
    uint32_t tid = c->order[c->eng_off[e] + E->idx];
    const rg_task *t = &c->tasks[tid];
    const char *eng = e == 0 ? "compute" : g->stream_name[e - 1];
    if (!E->busy) {
        const uint32_t *d = c->deps + t->dep_off;
        for (uint32_t i = 0; i < t->n_deps; i++) {
            uint32_t de = d[i] >> RG_DEP_ENGINE_SHIFT, dp = d[i] & RG_DEP_POS_MASK;
            if (r->eng[de].done <= (uint64_t)E->step * c->eng_n[de] + dp) {
                snprintf(buf, len, "%s task %" PRIu32 " (%s) waits for task %" PRIu32, eng, tid,
                         run_task_kind_name((run_task_kind)t->kind),
                         c->order[c->eng_off[de] + dp]);
                return;
            }
        }
        snprintf(buf, len, "%s task %" PRIu32 " is ready", eng, tid);
        return;
    }
    if (t->kind == RUN_TASK_COLL) {
        const rg_spec *sp = &g->spec[t->ref];
        const rg_comm *cm = &g->comm[sp->comm_id];
        const rs_rdv *v = &s->rdv[cm->base + g->gs[cm->groupset].group_of[r->id]];
        snprintf(buf, len, "%s task %" PRIu32 ": %s on %s group %" PRIu32 ", %" PRIu32 " of %"
                 PRIu32 " ranks arrived", eng, tid, coll_op_name(sp->op), g->gs[sp->groupset].name,
                 v->group, v->arrived, v->expect);
    } else if (t->kind == RUN_TASK_RECV) {
        snprintf(buf, len, "%s task %" PRIu32 ": recv from rank %" PRIu32 " (tag %" PRIu32
                 "), nothing delivered", eng, tid, g->recv_src[g->recv_off[r->id] + t->ref],
                 c->recv[t->ref].tag);
    } else {
        snprintf(buf, len, "%s task %" PRIu32 " (%s) is running", eng, tid,
                 run_task_kind_name((run_task_kind)t->kind));
    }
}

static np_status rs_deadlock(const run_sim *s, np_err *err)
{
    char msg[NP_ERR_MSG_MAX];
    size_t n = (size_t)snprintf(msg, sizeof msg, "deadlock at %" PRIu64 " ps: %" PRIu32 " of %"
                                PRIu32 " simulated ranks cannot finish;", s->t_last,
                                s->ranks_left, s->ranks_sim);
    uint32_t shown = 0;
    for (uint32_t i = 0; i < s->g->ranks && n < sizeof msg - 80; i++) {
        const rs_rank *r = &s->rank[i];
        if (!r->sim || r->steps_done == s->steps)
            continue;
        n += (size_t)snprintf(msg + n, sizeof msg - n, " rank %" PRIu32 " step %" PRIu32 ":", i,
                              r->steps_done);
        for (uint32_t j = 0; j < r->cls->n_engines && n < sizeof msg - 80; j++) {
            uint32_t e = r->cls->engines[j];
            if (r->eng[e].step >= s->steps)
                continue;
            char w[160];
            rs_describe_wait(s, r, e, w, sizeof w);
            n += (size_t)snprintf(msg + n, sizeof msg - n, " [%s]", w);
        }
        n += (size_t)snprintf(msg + n, sizeof msg - n, ";");
        shown++;
    }
    if (shown < s->ranks_left && n < sizeof msg)
        snprintf(msg + n, sizeof msg - n, " ... and %" PRIu32 " more ranks",
                 s->ranks_left - shown);
    return np_err_set(err, NP_ERR_DEADLOCK, "%s", msg);
}

/* ---- setup and teardown ------------------------------------------------------------------- */

static np_status rs_oom(np_err *err)
{
    return np_err_set(err, NP_ERR_NOMEM, "out of memory setting up the run");
}

static void rs_free(run_sim *s)
{
    if (s->rdv)
        for (uint32_t i = 0; i < s->g->n_slots; i++)
            coll_free(s->rdv[i].c);
    rs_reuse_free(s);
    coll_sys_free(s->cs);
    evq_free(s->q);
    if (s->gs_chips)
        for (uint32_t i = 0; i < s->g->n_gs; i++)
            free(s->gs_chips[i]);
    free(s->gs_chips);
    free(s->rank);
    free(s->rchan);
    free(s->rdv);
    free(s->ktime);
    run_kcache_free(s->kc_own);
    free(s->mirror_link);
    free(s->one_member);
    free(s->sampled);
    free(s->link_last);
    free(s->bins);
    free(s->bin_row);
    free(s->replay_peak);
    free(s->pipes);
    free(s->link_bytes);
    free(s->step_end);
}

/* Times every kernel once through the cache. */
static np_status rs_time_kernels(run_sim *s, np_err *err)
{
    const run_graph *g = s->g;
    s->ktime = calloc(g->n_kern ? g->n_kern : 1, sizeof *s->ktime);
    if (!s->ktime)
        return rs_oom(err);
    run_kcache *kc = s->o.kcache;
    if (!kc && !(kc = s->kc_own = run_kcache_create()))
        return rs_oom(err);
    for (uint32_t i = 0; i < g->n_kern; i++) {
        const run_ktime *t = run_kcache_get(kc, g->kern[i].k.key);
        if (t) {
            s->ktime[i] = *t;
            continue;
        }
        s->kernels_timed++;
        if (s->o.time_kernel(s->o.time_ctx, &g->kern[i].k, &s->ktime[i], err) != NP_OK)
            return err->status;
        if (!run_kcache_put(kc, g->kern[i].k.key, &s->ktime[i]))
            return rs_oom(err);
    }
    return NP_OK;
}

static np_status rs_setup(run_sim *s, const net_params *np, np_err *err)
{
    const run_graph *g = s->g;
    if (evq_create(&s->q, err) != NP_OK ||
        coll_sys_create(s->cfg, np, s->q, NULL, &s->cs, err) != NP_OK)
        return err->status;
    s->n = coll_sys_net(s->cs);
    s->n_links = net_links(s->n);
    for (uint32_t r = 0; r < g->ranks; r++)
        if (g->chip_of[r] >= net_chips(s->n))
            return np_err_set(err, NP_ERR_RANGE, "rank %" PRIu32 " is placed on chip %" PRIu32
                              ", but the network has %" PRIu32 " chips", r, g->chip_of[r],
                              net_chips(s->n));
    s->rank = calloc(g->ranks, sizeof *s->rank);
    s->rchan = calloc(g->n_recv_total ? g->n_recv_total : 1, sizeof *s->rchan);
    s->rdv = calloc(g->n_slots ? g->n_slots : 1, sizeof *s->rdv);
    s->gs_chips = calloc(g->n_gs ? g->n_gs : 1, sizeof *s->gs_chips);
    s->one_member = malloc((size_t)g->ranks * sizeof *s->one_member);
    s->step_end = calloc(s->steps, sizeof *s->step_end);
    s->bin_row = malloc(((size_t)s->n_links + 1) * sizeof *s->bin_row);
    for (uint32_t l = 0; s->bin_row && l < s->n_links; l++)
        s->bin_row[l] = RUN_NONE;
    s->link_bytes = calloc((size_t)s->n_links + 1, sizeof *s->link_bytes);
    s->replay_peak = calloc((size_t)s->n_links + 1, sizeof *s->replay_peak);
    uint32_t n_pipes = g->pp_gs == RUN_NONE ? 0 : g->gs[g->pp_gs].n_groups;
    s->pipes = calloc((size_t)n_pipes + 1, sizeof *s->pipes);
    if (!s->rank || !s->rchan || !s->rdv || !s->gs_chips || !s->one_member || !s->step_end ||
        !s->bin_row || !s->link_bytes || !s->replay_peak || !s->pipes)
        return rs_oom(err);
    for (uint32_t i = 0; i < g->n_gs; i++) {
        size_t n = (size_t)g->gs[i].n_groups * g->gs[i].size;
        if (!(s->gs_chips[i] = malloc(n * sizeof **s->gs_chips)))
            return rs_oom(err);
        for (size_t j = 0; j < n; j++)
            s->gs_chips[i][j] = g->chip_of[g->gs[i].members[j]];
    }
    for (uint32_t r = 0; r < g->ranks; r++) {
        rs_rank *x = &s->rank[r];
        x->cls = &g->cls[g->class_of[r]];
        x->id = r;
        x->chip = g->chip_of[r];
        x->sim = 1;
        x->rep = r;
        x->slow = 1.0;
        x->st.pipe_first_ps = UINT64_MAX;
        x->pipe = g->pp_gs == RUN_NONE ? NULL : &s->pipes[g->gs[g->pp_gs].group_of[r]];
        s->one_member[r] = r;
    }
    for (uint32_t k = 0; k < g->n_comm; k++) {
        const rg_groupset *gs = &g->gs[g->comm[k].groupset];
        for (uint32_t i = 0; i < gs->n_groups; i++) {
            rs_rdv *v = &s->rdv[g->comm[k].base + i];
            v->s = s;
            v->group = i;
            v->sig = RUN_NONE;
            v->members = gs->members + (size_t)i * gs->size;
            v->n_members = v->expect = gs->size;
        }
    }
    for (uint32_t i = 0; i < s->o.n_slow; i++) {
        const run_slow_chip *sc = &s->o.slow[i];
        if (sc->chip >= net_chips(s->n))
            return np_err_set(err, NP_ERR_RANGE, "slowed chip %" PRIu32 " is not in the "
                              "network (%" PRIu32 " chips)", sc->chip, net_chips(s->n));
        if (!isfinite(sc->factor) || sc->factor <= 0)
            return np_err_set(err, NP_ERR_RANGE, "chip %" PRIu32 "'s slowdown %g is not a "
                              "number > 0", sc->chip, sc->factor);
        uint32_t on = 0;
        for (uint32_t r = 0; r < g->ranks; r++)
            if (s->rank[r].chip == sc->chip) {
                s->rank[r].slow = sc->factor;
                on++;
            }
        if (!on)
            return np_err_set(err, NP_ERR_RANGE, "slowed chip %" PRIu32 " runs none of the "
                              "job's ranks (rank 0 is on chip %" PRIu32 ", rank %" PRIu32
                              " on chip %" PRIu32 ")", sc->chip, g->chip_of[0], g->ranks - 1,
                              g->chip_of[g->ranks - 1]);
    }
    for (uint32_t i = 0; i < n_pipes; i++) {
        const rg_groupset *pp = &g->gs[g->pp_gs];
        s->pipes[i] = (rs_pipe){.step = UINT32_MAX, .members = pp->members + (size_t)i * pp->size,
                                .size = pp->size};
    }
    s->mirror_gs = RUN_NONE;
    s->mirror_n = 1;
    s->bin_ps = RS_LINK_BIN0_PS;
    if (rs_analyze(s, err) != NP_OK)
        return err->status;
    if (!s->o.no_kernel_cache && rs_time_kernels(s, err) != NP_OK)
        return err->status;
    for (uint32_t r = 0; r < g->ranks; r++) {
        rs_rank *x = &s->rank[r];
        if (!x->sim)
            continue;
        s->ranks_sim++;
        s->tasks_total += (uint64_t)x->cls->n_tasks * s->steps;
        if (x->cls->n_tasks == 0)
            x->steps_done = s->steps;
        else
            s->ranks_left++;
    }
    return NP_OK;
}

np_status run_simulate(const run_graph *g, const arch_config *cfg, const net_params *np,
                       const run_opts *opts, run_result **out, np_err *err)
{
    if (!g->final)
        return np_err_set(err, NP_ERR_INTERNAL, "run_simulate needs a finalized run graph");
    run_sim s;
    memset(&s, 0, sizeof s);
    s.g = g;
    s.cfg = cfg;
    if (cfg) {
        s.launch_ps[0] = core_kernel_launch_ps(cfg, false);
        s.launch_ps[1] = core_kernel_launch_ps(cfg, true);
    }
    s.o = *opts;
    s.steps = opts->steps ? opts->steps : 1;
    net_params with_faults;
    if (opts->n_link_faults) {
        if (np)
            with_faults = *np;
        else
            net_params_from_arch(cfg, &with_faults);
        with_faults.faults = opts->link_faults;
        with_faults.n_faults = opts->n_link_faults;
        np = &with_faults;
    }
    s.obs = opts->observer;
    if (s.o.no_coll_reuse)
        s.o.no_rank_dedup = true; /* mirrored ranks need their groups' collectives reused */
    if (s.o.n_slow)
        s.o.no_rank_dedup = true; /* a slowed rank is not the image of its neighbours */
    bool has_compute = false;
    for (uint32_t c = 0; c < g->n_cls; c++)
        has_compute |= g->cls[c].eng_n[0] > 0;
    if (has_compute && !s.o.time_kernel)
        return np_err_set(err, NP_ERR_MISSING, "the run has compute tasks but no kernel timing "
                          "function");
    np_status st = rs_setup(&s, np, err);
    if (st == NP_OK) {
        s.progress_next = RS_PROGRESS_EVERY;
        for (uint32_t r = 0; r < g->ranks && !s.failed; r++)
            if (s.rank[r].sim)
                rs_kick(&s, &s.rank[r]);
        if (!s.failed && evq_schedule_at(s.q, s.bin_ps, rs_ev_sample, &s, 0, NULL, err) != NP_OK)
            st = err->status;
    }
    if (st == NP_OK && !s.failed)
        st = evq_run(s.q, err);
    if (st == NP_OK && s.failed) {
        *err = s.err;
        st = err->status;
    }
    if (st == NP_OK && s.ranks_left)
        st = rs_deadlock(&s, err);
    if (st == NP_OK) {
        rs_acct_end(&s);
        st = rs_result(&s, out, err);
    }
    rs_free(&s);
    return st;
}
