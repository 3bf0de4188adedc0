/* core.c — one core: front end, unit queues, semaphores, the operand scoreboard, DMA
 * descriptor processing, and its lines of a deadlock report (state machines drawn in core.h;
 * costs in core_cost.c; HBM and port sharing in hbm.c; COMM in core_comm.c; the system in
 * hw_system.c; shared state in core_sim.h).
 *
 * Outstanding DMA requests. A queue starts its entries in program order; the entries from
 * the head that have started (n_started) stay in the ring until they retire, in order, so
 * they keep holding queue slots. The MXU, VPU and COMM queues run one at a time; the DMA
 * queue keeps up to core.dma_outstanding copies (dma.copy, dma.gather, dma.scatter) in
 * flight (n_inflight; at most CORE_QUEUE_DEPTH since each holds its entry). Each streams through the shared port and HBM
 * pools as before, so they may complete out of order; a completed entry is marked done and
 * retires once every entry before it has. Anything else in the DMA queue (sem.wait,
 * sem.signal) starts only when nothing before it is left (n_started == 0): a signal after
 * copies therefore means "these copies have landed", and a fence (every queue empty) waits
 * for every copy in flight.
 *
 *   entry:  QUEUED --q_start--> IN FLIGHT --q_complete_ev--> DONE --q_retire (in order)-->
 *
 * Busy and stall of a queue are accounted over time, not per instruction (q_account): while
 * at least one entry is in flight, the unit is busy until the latest "alone" end
 * (t_ideal_ps) of the entries in flight and stalled after it (they wait on contention). With
 * one entry in flight at a time this is busy = alone time, stall = the rest, as before.
 *
 * Pipelined folds (core.mxu_pipelined_folds, c->pipe). An mxu.mm's folds overlap (mxu_sched);
 * the array also goes on from one mxu.mm to the next when only entries that take no time
 * (sem.*, mxu.load) come between and the first one's array time was what ended it: the
 * second's first fold then streams mxu_fold_gap after the first's last, or as soon as the
 * second could have started, whichever is later, and the second takes from its start (the
 * first's end) to the end of its own folds. "Could have started" is the latest readiness of
 * it and the MXU entries between (q_entry.t_ready_ps): its dispatch; for a sem.wait, the last
 * signal of its semaphore (or the end of its wait); for a scoreboard wait, when the older entry
 * it waited for completed (q_complete_ev marks the MXU entries an entry of another queue held
 * back). So the queue still runs one entry at a time, semaphores and the scoreboard keep their
 * meaning, and a run of folds never starts before its inputs were there. */
#include "core_sim.h"

#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static void fe_schedule(core_model *c, uint64_t t_ps);

void core_trace(core_model *c, isa_unit u, const q_entry *e)
{
    hw_system *y = c->chip->sys;
    if (!y->trace)
        return;
    char text[256];
    if (!y->trace_no_text)
        insn_text(c->chip, &e->in, text, sizeof text);
    int32_t k = c->pcs[e->pc].kernel;
    core_trace_insn t = {c->chip->chip, c->id, u, e->lane, e->pc, y->trace_no_text ? NULL : text,
                         k >= 0 ? c->text->kernels[k].name : NULL, e->t_start_ps, now_ps(c),
                         e->l2, e->l2_bytes, e->l2_hbm_rd, e->l2_hbm_wr};
    y->trace(y->trace_ctx, &t);
}

void core_name(const core_model *c, char *buf, size_t n)
{
    if (c->chip->sys->n_chips > 1)
        snprintf(buf, n, "chip %" PRIu32 " core %" PRIu32, c->chip->chip, c->id);
    else
        snprintf(buf, n, "core %" PRIu32, c->id);
}
static void q_start(core_model *c, isa_unit u);

/* ---- kernels ---------------------------------------------------------------------------------- */

uint64_t core_kernel_launch_ps(const arch_config *cfg, bool host_launch)
{
    double ns = cfg->chip.kernel_gap_ns + (host_launch ? cfg->chip.kernel_launch_ns : 0.0);
    return (uint64_t)llround(ns * 1000.0);
}

/* Instruction pc of core c is dispatched (or, for the front end's own, executed) at t_ps. */
static void kernel_dispatch(core_model *c, uint32_t pc, uint64_t t_ps)
{
    int32_t k = c->pcs[pc].kernel;
    if (k < 0)
        return;
    kernel_run *kr = &c->kernels[k];
    if (!kr->seen) {
        kr->seen = true;
        kr->first_ps = t_ps;
    }
    if (kr->last_ps < t_ps)
        kr->last_ps = t_ps;
}

static void kernel_retire(core_model *c, uint32_t pc)
{
    int32_t k = c->pcs[pc].kernel;
    if (k >= 0 && c->kernels[k].last_ps < now_ps(c))
        c->kernels[k].last_ps = now_ps(c);
}

/* ---- queues ----------------------------------------------------------------------------------- */

static bool queues_empty(const core_model *c)
{
    for (unsigned u = 0; u < ISA_N_QUEUES; u++)
        if (c->q[u].count)
            return false;
    return true;
}

/* What the front end's fence waits for: every queue, or every queue but COMM (nocomm). */
static bool fence_drained(const core_model *c)
{
    for (unsigned u = 0; u < ISA_N_QUEUES; u++)
        if (c->q[u].count && !(c->fence_nocomm && u == ISA_UNIT_COMM))
            return false;
    return true;
}

static void core_check_done(core_model *c)
{
    if (c->fe == FE_HALTED && queues_empty(c)) {
        c->fe = FE_DONE;
        c->t_done_ps = now_ps(c);
        chip_core_done(c);
    }
}

/* The front end waited on something a retirement may have released. */
static void fe_wake(core_model *c, isa_unit u)
{
    if ((c->fe == FE_WAIT_QUEUE && c->fe_wait_q == u) || (c->fe == FE_FENCE && fence_drained(c))) {
        /* a wait fe_next began ahead of time starts when that step would have run */
        uint64_t t = now_ps(c) > c->fe_stall_from ? now_ps(c) : c->fe_stall_from;
        bool full = c->fe == FE_WAIT_QUEUE;
        c->fe_stall_ps += t - c->fe_stall_from;
        c->fe = FE_RUN;
        if (full && c->completing && t == now_ps(c) && u != ISA_UNIT_DMA) {
            c->step_after_complete = true; /* q_complete_ev takes the step, when it is done */
            return;
        }
        fe_schedule(c, t);
    }
}

/* Entries queue u may have in flight at once. */
static unsigned q_limit(const core_model *c, isa_unit u)
{
    return u == ISA_UNIT_DMA ? (unsigned)c->cfg->core.dma_outstanding : 1;
}

/* Queue q's busy and stall time from its last accounting to `now` while entries are in
 * flight: busy until the latest of their alone ends, stalled (on port or HBM contention)
 * after it; *pc (when not NULL) the pc of the entry whose alone end is that latest. */
static void q_inflight_split(const core_queue *q, uint64_t now, uint64_t *busy, uint64_t *stall,
                             uint32_t *pc)
{
    uint64_t ideal = 0;
    const q_entry *last = NULL;
    for (unsigned i = 0; i < q->n_started; i++) {
        const q_entry *e = &q->ring[(q->head + i) % CORE_QUEUE_DEPTH];
        if (!e->done && (!last || e->t_ideal_ps > ideal)) {
            ideal = e->t_ideal_ps;
            last = e;
        }
    }
    uint64_t b = ideal < now ? ideal : now;
    if (b < q->t_acct_ps)
        b = q->t_acct_ps;
    *busy = b - q->t_acct_ps;
    *stall = now - b;
    if (pc)
        *pc = last ? last->pc : UINT32_MAX;
}

/* Accounts queue q's busy and stall time up to now, its busy time also to the kernel of the
 * entry that made it (kernel_run.busy_ps); call before its in-flight set changes. */
void core_q_account(core_model *c, core_queue *q)
{
    uint64_t now = now_ps(c);
    if (q->n_inflight) {
        uint64_t b, st;
        uint32_t pc;
        q_inflight_split(q, now, &b, &st, &pc);
        q->busy_ps += b;
        q->stall_ps += st;
        int32_t k = b && pc < c->n_insns ? c->pcs[pc].kernel : -1;
        if (k >= 0)
            c->kernels[k].busy_ps[q - c->q] += b;
    }
    q->t_acct_ps = now;
}

void core_q_so_far(const core_queue *q, uint64_t now, uint64_t *busy, uint64_t *stall)
{
    *busy = q->busy_ps;
    *stall = q->stall_ps;
    if (!now || now < q->t_acct_ps)
        return;
    uint64_t b = 0, st = 0;
    if (q->n_inflight)
        q_inflight_split(q, now, &b, &st, NULL);
    else if (q->state == Q_WAIT_SEM)
        st = now - q->t_wait_ps;
    else if (q->sb_wait)
        st = now - (q->sb_from_ps > q->t_acct_ps ? q->sb_from_ps : q->t_acct_ps);
    *busy += b;
    *stall += st;
}

void core_fe_so_far(const core_model *c, uint64_t now, uint64_t *busy, uint64_t *stall)
{
    *busy = c->fe_busy_ps;
    *stall = c->fe_stall_ps;
    if (now && (c->fe == FE_WAIT_QUEUE || c->fe == FE_FENCE || c->fe == FE_BARRIER) &&
        now > c->fe_stall_from)
        *stall += now - c->fe_stall_from;
}

/* ---- the scoreboard ----------------------------------------------------------------------------
 * An entry may start only when no older entry of its core (any queue), not yet completed,
 * has an operand overlapping one of its own with at least one of the two writing: read after
 * write, write after read, write after write (core.scoreboard; core_ranges_overlap). Entries
 * of one queue are in seq order, so each queue is scanned from its head up to the first entry
 * not older than e. Completed entries still waiting to retire (DMA) no longer block. */
static bool sb_conflict(const q_entry *e, const q_entry *o, unsigned *ei, unsigned *oi)
{
    for (unsigned i = 0; i < e->nr; i++)
        for (unsigned j = 0; j < o->nr; j++)
            if ((e->r[i].write || o->r[j].write) && core_ranges_overlap(&e->r[i], &o->r[j])) {
                *ei = i, *oi = j;
                return true;
            }
    return false;
}

/* The older entry e must wait for (its unit in *bu, the overlapping operands' indices in *ei
 * and *oi), or NULL. */
static const q_entry *sb_blocker(const core_model *c, const q_entry *e, isa_unit *bu,
                                 unsigned *ei, unsigned *oi)
{
    if (!c->cfg->core.scoreboard || !e->nr)
        return NULL;
    for (unsigned u = 0; u < ISA_N_QUEUES; u++) {
        if (!(c->q_used & (1u << u)))
            continue;
        const core_queue *q = &c->q[u];
        for (unsigned i = 0; i < q->count; i++) {
            const q_entry *o = &q->ring[(q->head + i) % CORE_QUEUE_DEPTH];
            if (o->seq >= e->seq)
                break;
            if (i < q->n_started && o->done)
                continue;
            if (sb_conflict(e, o, ei, oi)) {
                *bu = (isa_unit)u;
                return o;
            }
        }
    }
    return NULL;
}

/* An entry completed: queues waiting on the scoreboard look again. */
static void sb_wake(core_model *c)
{
    for (unsigned u = 0; u < ISA_N_QUEUES; u++)
        if ((c->q_used >> u & 1) && c->q[u].sb_wait) /* only a queue with entries waits */
            q_start(c, (isa_unit)u);
}

/* ---- pipelined folds (see the top of this file) ---------------------------------------------- */

/* mxu.mm e starts now on a pipelined array: the cycles from now to the end of its folds, its
 * first fold going on from the previous mxu.mm's run when that is live. Records its run. */
static uint64_t mxu_pipe_launch(core_model *c, const q_entry *e)
{
    mxu_pipe *p = c->pipe;
    mxu_sched sc;
    if (!core_mxu_insn_sched(c->cfg, &e->in, e->mxu_k, e->mxu_n, &sc)) {
        p->live = false;
        return 0;
    }
    const clk_domain *d = &c->clk;
    uint64_t now = clk_cycle_at_or_after(d, now_ps(c)), s0 = now + sc.lead;
    if (p->live) {
        mxu_array a;
        mxu_array_from_arch(c->cfg, &a);
        uint64_t ready = e->t_ready_ps > p->ready_ps ? e->t_ready_ps : p->ready_ps;
        uint64_t r = clk_cycle_at_or_after(d, ready) + sc.lead;
        uint64_t g = p->s_last + mxu_fold_gap(&a, p->t_last, sc.stream);
        uint64_t v = r > g ? r : g;
        s0 = v < s0 ? v : s0;
    }
    p->s_last = s0 + (sc.folds - 1) * sc.period;
    p->t_last = sc.stream;
    uint64_t end = p->s_last + sc.tail;
    p->end_ps = clk_cycles_to_ps(d, end);
    p->live = true;
    p->ready_ps = 0;
    return end - now;
}

/* MXU entry e (not an mxu.mm) retires: the next mxu.mm could not start before it was ready. */
static void mxu_pipe_retire(core_model *c, const q_entry *e)
{
    if (e->t_ready_ps > c->pipe->ready_ps)
        c->pipe->ready_ps = e->t_ready_ps;
}

/* Entry o of another queue completes now: the MXU entries not yet started that its operands
 * held back (the scoreboard's rule) could not have started before now. */
static void mxu_pipe_mark(core_model *c, const q_entry *o)
{
    const core_queue *q = &c->q[ISA_UNIT_MXU];
    unsigned ei, oi;
    for (unsigned i = q->n_started; i < q->count; i++) {
        q_entry *m = &c->q[ISA_UNIT_MXU].ring[(q->head + i) % CORE_QUEUE_DEPTH];
        if (m->seq > o->seq && m->t_ready_ps < now_ps(c) && sb_conflict(m, o, &ei, &oi))
            m->t_ready_ps = now_ps(c);
    }
}

/* Head of queue u retires now (it has started and, unless it took no time, completed). */
static void q_retire(core_model *c, isa_unit u)
{
    core_queue *q = &c->q[u];
    q_entry *e = &q->ring[q->head];
    kernel_retire(c, e->pc);
    if (c->pipe && u == ISA_UNIT_MXU && e->in.op != ISA_OP_MXU_MM)
        mxu_pipe_retire(c, e);
    q->insns++;
    q->head = (q->head + 1) % CORE_QUEUE_DEPTH;
    if (--q->count == 0)
        c->q_used &= ~(1u << u);
    if (q->n_started)
        q->n_started--;
    core_check_done(c);
    fe_wake(c, u);
    q_start(c, u);
}

/* An entry of queue u completes. When its retirement frees a slot the front end waits for, the
 * front end takes its step right after, in this event rather than in one of its own: the
 * instruction it dispatches goes behind the other entries of that queue (one runs at a time;
 * not DMA), so nothing else at this time can see the difference. */
static void q_complete_ev(evq *eq, void *ctx, uint64_t arg)
{
    core_model *c = ctx;
    isa_unit u = (isa_unit)(arg & 0xff);
    core_queue *q = &c->q[u];
    q_entry *e = &q->ring[arg >> 8];
    c->completing = true;
    core_q_account(c, q);
    e->done = true;
    if (c->pipe) {
        if (u != ISA_UNIT_MXU && c->cfg->core.scoreboard)
            mxu_pipe_mark(c, e);
        else if (u == ISA_UNIT_MXU && e->in.op == ISA_OP_MXU_MM && now_ps(c) != c->pipe->end_ps)
            c->pipe->live = false; /* a port held it beyond its folds: the array drained */
    }
    q->lanes &= ~(1u << e->lane);
    core_trace(c, u, e);
    kernel_retire(c, e->pc);
    if (--q->n_inflight == 0)
        q->state = Q_IDLE;
    /* Retire the completed entries at the head, in order; q_retire starts what may start. */
    bool retired = false;
    while (q->n_started && q->ring[q->head].done) {
        q->ring[q->head].done = false;
        retired = true;
        q_retire(c, u);
    }
    if (!retired)
        q_start(c, u); /* an outstanding slot is free */
    sb_wake(c);
    c->completing = false;
    if (c->step_after_complete) {
        c->step_after_complete = false;
        if (c->q[c->fe_wait_q].n_inflight)
            core_fe_step_ev(eq, c, 0);
        else
            fe_schedule(c, now_ps(c)); /* its head waits: the new entry could start now */
    }
}

/* One part of the entry in flight named by arg finished; the last one completes it at the
 * next core clock edge. */
void core_q_part_done(void *ctx, uint64_t arg)
{
    core_model *c = ctx;
    if (--c->q[arg & 0xff].ring[arg >> 8].parts)
        return;
    uint64_t t = clk_edge_at_or_after(&c->clk, now_ps(c));
    if (evq_schedule_at(c->eq, t, q_complete_ev, c, arg, NULL, &c->chip->err) != NP_OK)
        chip_fail(c->chip);
}

void core_q_finish_at(core_model *c, isa_unit u, unsigned slot, uint64_t t_ps)
{
    if (--c->q[u].ring[slot].parts)
        return;
    uint64_t t = clk_edge_at_or_after(&c->clk, t_ps);
    hw_system *y = c->chip->sys;
    if (y->in_net_callback && t == now_ps(c)) {
        /* nothing of a core or the mesh is on the stack: complete right here */
        y->in_net_callback = false;
        q_complete_ev(c->eq, c, q_arg(u, slot));
        y->in_net_callback = true;
        return;
    }
    if (evq_schedule_at(c->eq, t, q_complete_ev, c, q_arg(u, slot), NULL, &c->chip->err) != NP_OK)
        chip_fail(c->chip);
}

/* A compute timer of the entry in flight named by arg ended. */
static void q_timer_ev(evq *eq, void *ctx, uint64_t arg)
{
    (void)eq;
    core_q_part_done(ctx, arg);
}

static void sem_arrive_ev(evq *eq, void *ctx, uint64_t arg)
{
    (void)eq;
    core_model *c = ctx;
    c->sem[arg & 0xff] += arg >> 8;
    if (c->pipe)
        c->pipe->sem_ps[arg & 0xff] = now_ps(c);
    for (unsigned u = 0; u < ISA_N_QUEUES; u++)
        if (c->q[u].state == Q_WAIT_SEM) {
            c->q[u].stall_ps += now_ps(c) - c->q[u].t_wait_ps;
            c->q[u].state = Q_IDLE;
            q_start(c, (isa_unit)u);
        }
}

static void count_traffic(core_model *c, core_queue *q, const core_range *r, unsigned n)
{
    chip_sim *s = c->chip;
    for (unsigned i = 0; i < n; i++) {
        q->bytes += r[i].bytes;
        if (core_l2_range(s->cfg, &r[i])) { /* the HBM counts what reaches it (core_l2.c) */
            *(r[i].write ? &s->l2_wr : &s->l2_rd) += r[i].bytes;
            continue;
        }
        uint64_t *ctr = r[i].space == ISA_SPACE_HBM    ? (r[i].write ? &s->hbm_wr : &s->hbm_rd)
                        : r[i].space == ISA_SPACE_ACC ? (r[i].write ? &s->acc_wr : &s->acc_rd)
                                                      : (r[i].write ? &s->spad_wr : &s->spad_rd);
        *ctr += r[i].bytes;
    }
}

/* The compute actions of an instruction, for energy (hw-model/energy.h): an mxu.mm's
 * multiply-accumulates (m x the loaded tile's n x k) by dtype, a vpu.*'s element operations
 * (rows x cols). */
static void count_actions(chip_sim *s, const q_entry *e)
{
    const isa_insn *in = &e->in;
    if (in->op == ISA_OP_MXU_MM) {
        isa_dtype d = (isa_dtype)in->MXU_MM.dtype.val;
        if (d < ISA_DTYPE_COUNT)
            s->macs[d] += (uint64_t)in->MXU_MM.m.val * e->mxu_n * e->mxu_k;
    } else if (isa_ops[in->op].unit == ISA_UNIT_VPU) {
        static int16_t rows_f[ISA_OP_COUNT], cols_f[ISA_OP_COUNT]; /* field + 1; 0: not looked up */
        if (!rows_f[in->op]) {
            rows_f[in->op] = (int16_t)(isa_field_find(in->op, "rows") + 1);
            cols_f[in->op] = (int16_t)(isa_field_find(in->op, "cols") + 1);
        }
        int ri = rows_f[in->op] - 1, ci = cols_f[in->op] - 1;
        if (ri >= 0 && ci >= 0)
            s->vec_ops += (uint64_t)in->opnd[ri].val * (uint64_t)in->opnd[ci].val;
    }
}

/* Starts the parts of entry `slot` of queue u, which q_start has started (e->parts holds
 * 1 until they are all under way). */
static void q_launch(core_model *c, isa_unit u, unsigned slot)
{
    chip_sim *s = c->chip;
    core_queue *q = &c->q[u];
    q_entry *e = &q->ring[slot];
    const isa_insn *in = &e->in;
    const core_range *r = e->r;
    unsigned nr = e->nr;
    uint64_t arg = q_arg(u, slot);
    /* The parts run concurrently; the instruction retires when the last ends:
     *   compute time   MXU/VPU cycles (core_cost.h), a timer
     *   port stream    its scratchpad bytes through the core's shared port pool, capped
     *                  at bytes / compute time (so alone it takes exactly the compute
     *                  time unless the ports are the bound), for a DMA at the HBM peak
     *   HBM stream     a DMA's bytes through the chip's shared HBM (hbm.h) */
    uint64_t spad_bytes = 0, acc_bytes = 0;
    bool any_hbm = false, both_hbm = nr >= 2; /* a copy between two HBM places */
    for (unsigned i = 0; i < nr; i++) {
        if (r[i].space == ISA_SPACE_SPAD)
            spad_bytes += r[i].bytes;
        if (r[i].space == ISA_SPACE_ACC && c->acc_port)
            acc_bytes += r[i].bytes; /* the drain's reads, mxu.mm's writes */
        any_hbm = any_hbm || r[i].space == ISA_SPACE_HBM;
        both_hbm = both_hbm && r[i].space == ISA_SPACE_HBM;
    }
    if (in->op == ISA_OP_MXU_LOAD)
        spad_bytes = 0; /* its reads are part of each mxu.mm fold */
    if (in->op == ISA_OP_MXU_MM && (in->MXU_MM.mode.val == ISA_ACCM_ACCUM ||
                                    (in->MXU_MM.mode.val == ISA_ACCM_FIRST && !e->first))) {
        uint64_t old = (uint64_t)in->MXU_MM.m.val * e->mxu_n * 4; /* read, then added to */
        s->acc_rd += old;
        q->bytes += old;
        if (c->acc_port)
            acc_bytes += old;
    }
    double ghz = s->cfg->core.clock_ghz;
    double port_bw = (double)core_spad_bytes_per_cycle(s->cfg) * ghz / 1000.0; /* B/ps */
    double hbm_bw = s->cfg->chip.hbm_gb_per_s / 1000.0, far_bw = hbm_bw;
    if (s->cfg->chip.l2_bytes && s->cfg->chip.l2_gb_per_s / 1000.0 > far_bw)
        far_bw = s->cfg->chip.l2_gb_per_s / 1000.0; /* the L2 is the far side (core_l2.c) */
    bool dma = isa_ops[in->op].unit == ISA_UNIT_DMA;
    uint64_t cyc = dma ? 0 : core_exec_cycles(s->cfg, in, e->mxu_k, e->mxu_n);
    if (c->pipe && in->op == ISA_OP_MXU_MM)
        cyc = mxu_pipe_launch(c, e);
    else if (c->pipe && cyc && u == ISA_UNIT_MXU)
        c->pipe->live = false; /* a drain: the run of folds is over */
    double cap = port_bw;
    if (dma && any_hbm)
        cap = far_bw < port_bw ? far_bw : port_bw;
    else if (cyc)
        cap = (double)spad_bytes / ((double)cyc * 1000.0 / ghz);
    /* alone, each part would take (without bank conflicts): */
    double alone = 0, hbm_cap = both_hbm ? 1e300 : port_bw;
    if (spad_bytes)
        alone = (double)spad_bytes / (cap < port_bw ? cap : port_bw);
    /* Bank conflicts: the stream cannot go faster than the banks its rows touch. */
    double bank_bw = (double)core_spad_banks_touched(s->cfg, r, nr) *
                     (double)s->cfg->core.sram_port_bytes_per_cycle * ghz / 1000.0;
    if (bank_bw < cap)
        cap = bank_bw;
    /* The HBM side moves whole bursts, and only the channels its rows touch serve it; with
     * controllers on the mesh, each controller's part crosses the mesh (hbm_mesh.h). */
    uint64_t hb = 0;
    if (any_hbm && s->cfg->chip.l2_bytes) { /* through the shared level (core_l2.c) */
        double t_l2;
        if (core_l2_copy(c, e, arg, hbm_cap, &t_l2, &s->err) != NP_OK)
            goto fail;
        if (t_l2 > alone)
            alone = t_l2;
        any_hbm = false; /* started */
    } else if (any_hbm && s->hmesh) {
        unsigned n_parts;
        uint64_t t_mesh;
        if (hbm_mesh_copy(s->hmesh, r, nr, c->id, hbm_cap, ((uint64_t)c->index << 16) | arg,
                          &n_parts, &t_mesh, &s->err) != NP_OK)
            goto fail;
        e->parts += n_parts; /* they complete in mesh ticks, never inside the call */
        if ((double)t_mesh > alone)
            alone = (double)t_mesh;
        any_hbm = false; /* started */
    } else if (any_hbm) {
        const arch_chip *ch = &s->cfg->chip;
        for (unsigned i = 0; i < nr; i++)
            if (r[i].space == ISA_SPACE_HBM)
                hb += core_burst_bytes(&r[i], (uint64_t)ch->hbm_burst_bytes);
        double frac = (double)core_units_touched(r, nr, ISA_SPACE_HBM,
                                                 (uint64_t)ch->hbm_interleave_bytes,
                                                 (uint64_t)ch->hbm_channels) /
                      (double)ch->hbm_channels;
        if (hbm_bw * frac < hbm_cap)
            hbm_cap = hbm_bw * frac;
        double t = s->cfg->chip.hbm_latency_ns * 1000.0 + (double)hb / (hbm_cap < hbm_bw ? hbm_cap : hbm_bw);
        alone = t > alone ? t : alone;
    }
    /* The accumulator port: the drain's reads and mxu.mm's writes (and, accumulating, its
     * reads of the old partial sums); only the MXU queue uses it, one at a time. */
    double acc_bw = (double)s->cfg->core.acc_port_bytes_per_cycle * ghz / 1000.0;
    if (acc_bytes && (double)acc_bytes / acc_bw > alone)
        alone = (double)acc_bytes / acc_bw;
    uint64_t t_timer = cyc ? after_cycles(c, cyc) : now_ps(c);
    uint64_t t_alone = now_ps(c) + (uint64_t)ceil(alone - 1e-6);
    e->t_ideal_ps = clk_edge_at_or_after(&s->clk, t_alone > t_timer ? t_alone : t_timer);
    if (cyc) {
        e->parts++;
        if (evq_schedule_at(s->q, after_cycles(c, cyc), q_timer_ev, c, arg, NULL, &s->err) != NP_OK)
            goto fail;
    }
    if (spad_bytes) {
        e->parts++;
        if (hbm_transfer(c->ports, spad_bytes, cap, core_q_part_done, c, arg, &s->err) != NP_OK)
            goto fail;
    }
    if (acc_bytes) {
        e->parts++;
        if (hbm_transfer(c->acc_port, acc_bytes, acc_bw, core_q_part_done, c, arg, &s->err) != NP_OK)
            goto fail;
    }
    if (any_hbm) {
        e->parts++;
        if (hbm_transfer(s->mem, hb, hbm_cap, core_q_part_done, c, arg, &s->err) != NP_OK)
            goto fail;
    }
    core_q_part_done(c, arg);
    return;
fail:
    chip_fail(s);
}

void core_dma_access_done(void *ctx, uint64_t tag)
{
    chip_sim *s = ctx;
    if (tag & CORE_TAG_L2_FILL)
        l2_fill_done(s->l2, (uint32_t)tag);
    else if (!(tag & CORE_TAG_L2_WB))
        core_q_part_done(&s->cores[tag >> 16], tag & 0xffff);
}

static void q_launch_ev(evq *eq, void *ctx, uint64_t arg)
{
    (void)eq;
    q_launch(ctx, (isa_unit)(arg & 0xff), (unsigned)(arg >> 8));
}

/* Starts the next entries of queue u that may start: the queue's IDLE -> BUSY / WAIT_SEM
 * transition, and for the DMA queue further copies while fewer than q_limit are in flight.
 * Only a dma.copy starts with entries before it still in the ring; a sem.* (or any other
 * instruction) waits until it is the head with nothing in flight. */
static void q_start(core_model *c, isa_unit u)
{
    chip_sim *s = c->chip;
    core_queue *q = &c->q[u];
    while (q->state != Q_WAIT_SEM && q->count > q->n_started && q->n_inflight < q_limit(c, u)) {
        unsigned slot = (q->head + q->n_started) % CORE_QUEUE_DEPTH;
        q_entry *e = &q->ring[slot];
        const isa_insn *in = &e->in;
        if (q->n_started && isa_ops[in->op].unit != ISA_UNIT_DMA)
            return; /* q_retire starts it once the entries before it have retired */
        isa_unit bu;
        unsigned ei, oi;
        if (sb_blocker(c, e, &bu, &ei, &oi)) {
            if (!q->sb_wait) {
                q->sb_wait = true;
                q->sb_from_ps = now_ps(c);
            }
            return; /* sb_wake retries when an entry completes */
        }
        if (q->sb_wait) { /* with copies in flight q_account has counted the time */
            q->sb_wait = false;
            if (e->t_ready_ps < now_ps(c))
                e->t_ready_ps = now_ps(c);
            uint64_t from = q->sb_from_ps > q->t_acct_ps ? q->sb_from_ps : q->t_acct_ps;
            if (!q->n_inflight)
                q->stall_ps += now_ps(c) - from;
        }
        if (in->op == ISA_OP_SEM_WAIT) {
            uint64_t need = (uint64_t)in->SEM_WAIT.n.val;
            uint8_t sem = (uint8_t)in->SEM_WAIT.sem.val;
            if (c->sem[sem] < need) {
                q->state = Q_WAIT_SEM;
                q->t_wait_ps = now_ps(c);
                if (!e->waited) {
                    e->waited = true;
                    e->t_start_ps = now_ps(c);
                }
                return;
            }
            c->sem[sem] -= need;
            if (c->pipe) { /* ready when its semaphore got its last signal, or now */
                uint64_t t = e->waited ? now_ps(c) : c->pipe->sem_ps[sem];
                if (t > e->t_ready_ps)
                    e->t_ready_ps = t;
            }
            if (e->waited) {
                core_trace(c, u, e);
                e->waited = false;
            }
            q_retire(c, u);
            return; /* q_retire restarted the queue */
        }
        if (in->op == ISA_OP_SEM_SIGNAL) {
            uint64_t arg = (uint64_t)in->SEM_SIGNAL.sem.val | ((uint64_t)in->SEM_SIGNAL.n.val << 8);
            if (evq_schedule_at(s->q, after_cycles(c, 1), sem_arrive_ev, c, arg, NULL, &s->err) != NP_OK) {
                chip_fail(s);
                return;
            }
            q_retire(c, u);
            return;
        }
        if (in->op == ISA_OP_COMM_SEND || in->op == ISA_OP_COMM_RECV) {
            core_comm_start(c, q, slot);
            return;
        }
        if (s->func && core_func_exec(s->func, c->index, in, e->first, &s->err) != NP_OK) {
            chip_fail(s);
            return;
        }
        const core_range *r = e->r;
        unsigned nr = e->nr;
        count_traffic(c, q, r, nr);
        count_actions(s, e);
        core_q_account(c, q); /* the in-flight set changes */
        q->state = Q_BUSY;
        q->n_started++;
        q->n_inflight++;
        e->done = false;
        e->l2 = false;
        e->t_start_ps = now_ps(c);
        e->lane = 0;
        while (q->lanes & (1u << e->lane))
            e->lane++;
        q->lanes |= 1u << e->lane;
        e->parts = 1; /* held until the parts have started, so none completes it early */
        uint64_t setup = isa_ops[in->op].unit == ISA_UNIT_DMA ? (uint64_t)s->cfg->core.dma_setup_cycles : 0;
        if (!setup) {
            q_launch(c, u, slot);
            continue; /* the DMA queue may start another copy */
        }
        /* The descriptor processor decodes one copy at a time; the transfer starts after. */
        uint64_t base = c->dma_decode_free_ps > now_ps(c) ? c->dma_decode_free_ps : now_ps(c);
        uint64_t t = clk_cycles_to_ps(&s->clk, clk_ps_to_cycles(&s->clk, base) + setup);
        c->dma_decode_free_ps = t;
        e->t_ideal_ps = t;
        if (evq_schedule_at(s->q, t, q_launch_ev, c, q_arg(u, slot), NULL, &s->err) != NP_OK) {
            chip_fail(s);
            return;
        }
    }
}

/* ---- the front end ---------------------------------------------------------------------------- */

static np_status fault(core_model *c, isa_unit u, uint32_t pc, const isa_insn *in, np_err *err,
                       const char *fmt, const char *what, uint64_t a, uint64_t b, uint64_t lim)
{
    char text[256], msg[256], who[48];
    insn_text(c->chip, in, text, sizeof text);
    core_name(c, who, sizeof who);
    snprintf(msg, sizeof msg, fmt, what, (unsigned long long)a, (unsigned long long)b,
             (unsigned long long)lim);
    return np_err_set(err, NP_ERR_SIM_FAULT, "%s %s pc %" PRIu32 " `%s`: %s", who,
                      isa_unit_names[u], pc, text, msg);
}

/* Resolves base registers (of addresses and VAL operands) and checks every footprint; the
 * resolved copy goes to *out. */
static np_status resolve(core_model *c, isa_unit u, const isa_insn *src, q_entry *e, np_err *err)
{
    isa_insn *out = &e->in;
    unsigned nf = isa_ops[src->op].n_fields;
    out->op = src->op; /* only its operands: the rest of the entry's copy is never read */
    memcpy(out->opnd, src->opnd, nf * sizeof *src->opnd);
    for (unsigned i = 0; i < nf; i++) {
        isa_opnd *o = &out->opnd[i];
        isa_kind k = isa_ops[src->op].fields[i].kind;
        if (k == ISA_KIND_VAL) { /* a value: its register's, plus the offset */
            o->val = (int64_t)((uint64_t)(o->reg ? c->regs[o->reg] : 0) + (uint64_t)o->val);
            o->reg = 0;
            continue;
        }
        if (k != ISA_KIND_SPAD && k != ISA_KIND_ACC && k != ISA_KIND_SPADOPT && k != ISA_KIND_MEM)
            continue;
        if (o->space == ISA_SPACE_NONE)
            continue;
        int64_t base = o->reg ? c->regs[o->reg] : 0;
        int64_t addr = (int64_t)((uint64_t)base + (uint64_t)o->val);
        if (addr < 0)
            return fault(c, u, c->pc, src, err, "%s address is negative (0x%llx)",
                         isa_ops[src->op].fields[i].name, (uint64_t)addr, 0, 0);
        o->val = addr;
        o->reg = 0;
    }
    core_range *r = e->r;
    unsigned nr = e->nr = core_ranges(out, c->mxu_k, c->mxu_n, r);
    for (unsigned i = 0; i < nr; i++) {
        uint64_t lim = core_space_bytes(c->cfg, r[i].space);
        if (r[i].addr > lim || r[i].extent > lim - r[i].addr)
            return fault(c, u, c->pc, src, err,
                         "%s range 0x%llx + %llu bytes is outside its space (%llu bytes)",
                         r[i].what, r[i].addr, r[i].extent, lim);
    }
    return NP_OK;
}

static void fe_schedule(core_model *c, uint64_t t_ps)
{
    if (evq_schedule_at(c->eq, t_ps, core_fe_step_ev, c, 0, NULL, &c->chip->err) != NP_OK)
        chip_fail(c->chip);
}

static void fe_halt(core_model *c)
{
    c->fe = FE_HALTED;
    c->t_halt_ps = now_ps(c);
    core_check_done(c);
}

/* ---- barriers over the mesh ---------------------------------------------------------------
 * The program's first core is the barrier's master. A core that reaches a barrier sends a
 * one-flit packet to the master's router (the master counts itself); when every core has
 * arrived with the same id, the master goes on and sends each other core a one-flit release,
 * which lets it go on when it arrives. Each goes on one cycle after its release. Without a
 * mesh (one core) the barrier is immediate. */

static void barrier_release(core_model *o)
{
    o->fe_stall_ps += now_ps(o) - o->fe_stall_from;
    o->fe = FE_RUN;
    o->pc++;
    fe_schedule(o, after_cycles(o, 1));
}

/* One arrival reached the master. */
static void barrier_count(chip_sim *s)
{
    if (++s->barrier_arrived < s->n_cores)
        return;
    bool same = true;
    for (uint32_t i = 0; i < s->n_cores; i++)
        same = same && s->cores[i].barrier_id == s->cores[0].barrier_id &&
               s->cores[i].fe == FE_BARRIER;
    if (!same)
        return; /* mismatched ids: nobody goes on (reported as a deadlock) */
    s->barrier_arrived = 0;
    barrier_release(&s->cores[0]);
    for (uint32_t i = 1; i < s->n_cores; i++) {
        if (!s->noc) {
            barrier_release(&s->cores[i]);
        } else if (mesh_send(s->noc, s->cores[0].id, s->cores[i].id, 1,
                             CORE_TAG_BARRIER | CORE_TAG_RELEASE | i, &s->err) != NP_OK) {
            chip_fail(s);
            return;
        }
    }
}

static void barrier_flit_ev(evq *eq, void *ctx, uint64_t tag)
{
    (void)eq;
    chip_sim *s = ctx;
    if (tag & CORE_TAG_RELEASE)
        barrier_release(&s->cores[(uint32_t)tag]);
    else
        barrier_count(s);
}

void core_barrier_deliver(chip_sim *s, uint64_t tag)
{
    /* an event, so that the releases are not sent from inside the mesh's own callback */
    if (evq_schedule_at(s->q, evq_now(s->q), barrier_flit_ev, s, tag, NULL, &s->err) != NP_OK)
        chip_fail(s);
}

static void barrier_arrive(core_model *c)
{
    chip_sim *s = c->chip;
    c->fe = FE_BARRIER;
    c->fe_stall_from = now_ps(c);
    if (c->index == 0 || !s->noc)
        barrier_count(s);
    else if (mesh_send(s->noc, c->id, s->cores[0].id, 1, CORE_TAG_BARRIER | c->index,
                       &s->err) != NP_OK)
        chip_fail(s);
}

/* What fe_ctrl did with a front-end instruction. */
typedef enum fe_ctrl_result {
    FE_CTRL_CYCLE, /* executed it: it took this cycle */
    FE_CTRL_FREE,  /* executed it in no time (trace markers) */
    FE_CTRL_OTHER  /* not one of those it executes (halt, fence, barrier) */
} fe_ctrl_result;

/* Executes front-end instruction `in` (at pc) at t_ps if it only changes the front end's own
 * registers, loops and pc: li, addi, loop, endloop, nop, trace markers. */
static fe_ctrl_result fe_ctrl(core_model *c, const isa_insn *in, uint64_t t_ps)
{
    switch (in->op) {
    case ISA_OP_HALT:
    case ISA_OP_FENCE:
    case ISA_OP_BARRIER:
        return FE_CTRL_OTHER;
    default:
        break;
    }
    kernel_dispatch(c, c->pc, t_ps);
    c->fe_insns++;
    switch (in->op) {
    case ISA_OP_TRACE_BEGIN:
    case ISA_OP_TRACE_END:
        c->pc++;
        return FE_CTRL_FREE;
    case ISA_OP_LI:
        if (in->LI.rd.reg)
            c->regs[in->LI.rd.reg] = in->LI.imm.val;
        c->pc++;
        break;
    case ISA_OP_ADDI:
        if (in->ADDI.rd.reg)
            c->regs[in->ADDI.rd.reg] =
                (int64_t)((uint64_t)c->regs[in->ADDI.rs.reg] + (uint64_t)in->ADDI.imm.val);
        c->pc++;
        break;
    case ISA_OP_LOOP: {
        loop_frame *f = &c->loops[c->depth++]; /* the loader bounds the depth */
        const isa_opnd *st[3] = {&in->LOOP.step0, &in->LOOP.step1, &in->LOOP.step2};
        f->body = c->pc + 1;
        f->count = (uint64_t)in->LOOP.count.val;
        f->remaining = f->count - 1;
        for (int i = 0; i < 3; i++) {
            f->reg[i] = st[i]->reg;
            f->step[i] = st[i]->val;
            f->saved[i] = c->regs[st[i]->reg];
        }
        c->pc++;
        break;
    }
    case ISA_OP_ENDLOOP: {
        loop_frame *f = &c->loops[c->depth - 1];
        for (int i = 0; i < 3; i++)
            if (f->reg[i])
                c->regs[f->reg[i]] = (int64_t)((uint64_t)c->regs[f->reg[i]] + (uint64_t)f->step[i]);
        if (f->remaining) {
            f->remaining--;
            c->pc = f->body;
        } else {
            for (int i = 2; i >= 0; i--)
                if (f->reg[i])
                    c->regs[f->reg[i]] = f->saved[i];
            c->depth--;
            c->pc++;
        }
        break;
    }
    default: /* NOP */
        c->pc++;
        break;
    }
    return FE_CTRL_CYCLE;
}

#define FE_AHEAD 8 /* front-end instructions fe_next may look past */

/* The pc the front end reaches by executing, from pc on, the instructions fe_ctrl executes
 * (at most FE_AHEAD of them; their number in *n). Control flow depends only on loop counts,
 * never on registers, so only pc and the loops' iteration counts are followed. */
static uint32_t fe_ahead_pc(const core_model *c, unsigned *n_insns)
{
    uint64_t rem[FE_AHEAD];  /* `remaining` of the innermost loops, as they change */
    uint32_t body[FE_AHEAD];
    unsigned n = 0, taken = 0; /* loops on that stack; loops of c->loops copied onto it */
    uint32_t pc = c->pc;
    unsigned k = 0;
    for (; k < FE_AHEAD && pc < c->n_insns; k++) {
        if (c->pcs[pc].queue != ISA_UNIT_CTRL)
            break;
        const isa_insn *in = &c->text->insns[pc];
        if (in->op == ISA_OP_HALT || in->op == ISA_OP_FENCE || in->op == ISA_OP_BARRIER ||
            c->pcs[pc].launch)
            break;
        if (in->op == ISA_OP_LOOP) {
            rem[n] = (uint64_t)in->LOOP.count.val - 1;
            body[n++] = pc + 1;
            pc++;
        } else if (in->op == ISA_OP_ENDLOOP) {
            if (!n) { /* the innermost loop entered before: copy its count */
                const loop_frame *f = &c->loops[c->depth - 1 - taken++];
                rem[0] = f->remaining;
                body[0] = f->body;
                n = 1;
            }
            if (rem[n - 1]) {
                rem[n - 1]--;
                pc = body[n - 1];
            } else {
                n--;
                pc++;
            }
        } else {
            pc++;
        }
    }
    *n_insns = k;
    return pc;
}

/* The front end's instruction took this cycle; the next step is one cycle later. When the
 * next instructions that matter (past any the front end runs itself) go to a queue that is
 * full now, those steps could only run them and then find the queue full (nothing but the
 * front end adds entries): they run now, each at its own cycle, and the wait begins at the
 * cycle the queue would have been looked at, with no event; fe_wake starts the front end
 * at the earliest at that time. */
static void fe_next(core_model *c)
{
    uint64_t t = after_cycles(c, 1);
    c->fe_busy_ps += t - now_ps(c);
    unsigned n;
    uint32_t pc = fe_ahead_pc(c, &n);
    if (pc < c->n_insns) {
        isa_unit u = (isa_unit)c->pcs[pc].queue;
        if (u != ISA_UNIT_CTRL && c->q[u].count == CORE_QUEUE_DEPTH) {
            const clk_domain *d = &c->clk;
            for (unsigned k = 0; k < n; k++) { /* the front end's own, each at its cycle */
                if (fe_ctrl(c, &c->text->insns[c->pc], t) == FE_CTRL_CYCLE) {
                    uint64_t t2 = clk_cycles_to_ps(d, clk_ps_to_cycles(d, t) + 1);
                    c->fe_busy_ps += t2 - t;
                    t = t2;
                }
            }
            c->fe_wait_pc = c->pc;
            c->fe = FE_WAIT_QUEUE;
            c->fe_wait_q = u;
            c->fe_stall_from = t;
            return;
        }
    }
    fe_schedule(c, t);
}

/* Executes front-end instructions from pc until one takes a cycle, stalls or halts. */
void core_fe_step_ev(evq *eq, void *ctx, uint64_t arg)
{
    (void)eq, (void)arg;
    core_model *c = ctx;
    chip_sim *s = c->chip;
    while (c->fe == FE_RUN) {
        if (c->pc >= c->n_insns) {
            fe_halt(c);
            return;
        }
        const isa_insn *in = &c->text->insns[c->pc];
        isa_unit u = (isa_unit)c->pcs[c->pc].queue;
        if (c->pcs[c->pc].launch) { /* a kernel's launch: the stream's gap first */
            uint64_t t = clk_edge_at_or_after(&c->clk, now_ps(c) +
                         core_kernel_launch_ps(c->cfg, c->pcs[c->pc].launch == HW_LAUNCH_HOST));
            c->pcs[c->pc].launch = HW_LAUNCH_NONE;
            c->fe_stall_ps += t - now_ps(c);
            fe_schedule(c, t);
            return;
        }
        if (u == ISA_UNIT_CTRL) {
            fe_ctrl_result r = fe_ctrl(c, in, now_ps(c));
            if (r == FE_CTRL_FREE)
                continue;
            if (r == FE_CTRL_CYCLE) {
                fe_next(c);
                return;
            }
            kernel_dispatch(c, c->pc, now_ps(c));
            c->fe_insns++;
            switch (in->op) {
            case ISA_OP_HALT:
                fe_halt(c);
                return;
            case ISA_OP_FENCE:
                c->fe_wait_pc = c->pc++;
                c->fence_nocomm = in->FENCE.nocomm.val != 0;
                if (!fence_drained(c)) {
                    c->fe = FE_FENCE;
                    c->fe_stall_from = now_ps(c);
                    return;
                }
                continue;
            default: /* ISA_OP_BARRIER */
                c->fe_wait_pc = c->pc;
                c->fence_nocomm = in->BARRIER.nocomm.val != 0;
                if (!fence_drained(c)) { /* fence first; re-run this barrier afterwards */
                    c->fe = FE_FENCE;
                    c->fe_stall_from = now_ps(c);
                    c->fe_insns--;
                    return;
                }
                c->barrier_id = (uint64_t)in->BARRIER.id.val;
                barrier_arrive(c);
                return;
            }
        }
        core_queue *q = &c->q[u];
        if (q->count == CORE_QUEUE_DEPTH) {
            c->fe_wait_pc = c->pc;
            c->fe = FE_WAIT_QUEUE;
            c->fe_wait_q = u;
            c->fe_stall_from = now_ps(c);
            return;
        }
        if (in->op == ISA_OP_MXU_MM && c->mxu_k == 0) {
            char text[256], who[48];
            insn_text(s, in, text, sizeof text);
            core_name(c, who, sizeof who);
            np_err_set(&s->err, NP_ERR_SIM_FAULT, "%s mxu pc %" PRIu32 " `%s`: mxu.mm before any "
                       "mxu.load", who, c->pc, text);
            chip_fail(s);
            return;
        }
        q_entry *e = &q->ring[(q->head + q->count) % CORE_QUEUE_DEPTH];
        if (resolve(c, u, in, e, &s->err) != NP_OK ||
            ((in->op == ISA_OP_COMM_SEND || in->op == ISA_OP_COMM_RECV) && core_comm_check(c, &e->in, &s->err) != NP_OK)) {
            chip_fail(s);
            return;
        }
        if (in->op == ISA_OP_MXU_LOAD) { /* later dispatches see this tile's k x n */
            c->mxu_k = (uint64_t)in->MXU_LOAD.k.val;
            c->mxu_n = (uint64_t)in->MXU_LOAD.n.val;
        }
        e->pc = c->pc;
        e->seq = c->seq_next++;
        e->waited = false;
        e->first = c->depth == 0 ||
                   c->loops[c->depth - 1].remaining + 1 == c->loops[c->depth - 1].count;
        e->mxu_k = c->mxu_k;
        e->mxu_n = c->mxu_n;
        e->t_ready_ps = now_ps(c);
        q->count++;
        c->q_used |= 1u << u;
        kernel_dispatch(c, c->pc, now_ps(c));
        c->fe_insns++;
        c->pc++;
        q_start(c, u);
        fe_next(c);
        return;
    }
}

/* ---- deadlock report -------------------------------------------------------------------------- */

void core_deadlock_lines(const core_model *c, char *buf, size_t n)
{
    const chip_sim *s = c->chip;
    char text[200], line[720], who[48];
    core_name(c, who, sizeof who);
    for (unsigned u = 0; u < ISA_N_QUEUES; u++) {
        const core_queue *q = &c->q[u];
        if (!q->count)
            continue;
        const q_entry *e = &q->ring[q->head];
        if (q->sb_wait) /* the entry that waits is the next to start */
            e = &q->ring[(q->head + q->n_started) % CORE_QUEUE_DEPTH];
        insn_text(s, &e->in, text, sizeof text);
        isa_unit bu;
        unsigned ei, oi;
        const q_entry *b = q->sb_wait ? sb_blocker(c, e, &bu, &ei, &oi) : NULL;
        if (b) {
            char btext[200];
            insn_text(s, &b->in, btext, sizeof btext);
            snprintf(line, sizeof line,
                     "\n  %s %s: pc %u `%s` waits for older pc %u `%s` (%s), whose %s "
                     "overlaps its %s",
                     who, isa_unit_names[u], e->pc, text, b->pc, btext, isa_unit_names[bu],
                     b->r[oi].what, e->r[ei].what);
        } else if (q->state == Q_WAIT_SEM) {
            unsigned sem = (unsigned)e->in.SEM_WAIT.sem.val;
            snprintf(line, sizeof line,
                     "\n  %s %s: pc %u `%s` waits on semaphore s%u (value %llu, needs %llu)",
                     who, isa_unit_names[u], e->pc, text, sem, (unsigned long long)c->sem[sem],
                     (unsigned long long)e->in.SEM_WAIT.n.val);
        } else if (u == ISA_UNIT_COMM && q->n_inflight && e->in.op == ISA_OP_COMM_RECV &&
                   c->comm_msg == UINT32_MAX) {
            char from[48];
            if (s->sys->n_chips > 1)
                snprintf(from, sizeof from, "chip %u core %u",
                         (unsigned)e->in.COMM_RECV.peer.val, e->in.COMM_RECV.peer.core);
            else
                snprintf(from, sizeof from, "core %u", e->in.COMM_RECV.peer.core);
            snprintf(line, sizeof line, "\n  %s comm: pc %u `%s` waits for a message from %s tag %llu",
                     who, e->pc, text, from, (unsigned long long)e->in.COMM_RECV.tag.val);
        } else {
            snprintf(line, sizeof line, "\n  %s %s: pc %u `%s` is queued (%u entries)",
                     who, isa_unit_names[u], e->pc, text, q->count);
        }
        strncat(buf, line, n - strlen(buf) - 1);
    }
    if (c->fe == FE_WAIT_QUEUE || c->fe == FE_FENCE || c->fe == FE_BARRIER) {
        insn_text(s, &c->text->insns[c->fe_wait_pc], text, sizeof text);
        const char *why = c->fe == FE_WAIT_QUEUE ? "waits for room in the full queue"
                          : c->fe == FE_FENCE    ? (c->fence_nocomm
                                                        ? "waits for every queue but comm to drain (fence)"
                                                        : "waits for every queue to drain (fence)")
                                                 : "waits at a barrier for the other cores";
        snprintf(line, sizeof line, "\n  %s ctrl: pc %u `%s` %s%s%s", who,
                 c->fe_wait_pc, text, why,
                 c->fe == FE_WAIT_QUEUE ? " " : "",
                 c->fe == FE_WAIT_QUEUE ? isa_unit_names[c->fe_wait_q] : "");
        strncat(buf, line, n - strlen(buf) - 1);
    }
}
