/* run_full_plan.c — every rank of a plan at full fidelity: lowered, run together on one
 * hw_system, and the run engine's figures measured from the timeline (see run_full.h). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist.h"
#include "evq.h"
#include "net.h"
#include "run_figures.h"
#include "run_full.h"
#include "run_plan.h"

#include "coll_tune.h"

#define RF_TICK_PS 1048576u /* the progress tick: 2^20 ps simulated */

/* What one kernel or communication entry of a rank did: its first instruction's start and
 * its last one's end, over every core. */
typedef struct rf_rec {
    uint64_t first, last;
    bool ran;
} rf_rec;

typedef struct rf_rank {
    const lower_prog *lp;
    uint32_t chip;
    rf_rec *rec;          /* lp->n_steps kernels, then lp->n_comm comm entries */
    int32_t **pcmap;      /* per core of the program: per pc, its record (-1: none) */
    uint32_t n_cores;
} rf_rank;

typedef struct rf_run {
    const arch_config *cfg;
    const nn_plan *p;
    evq *q;
    hw_system *sys;
    rf_rank *rk;
    int32_t *rank_of_chip; /* by chip: its rank, -1 */
    uint32_t n_chips, running;
    uint32_t samples;         /* progress ticks */
    const run_full_opts *o;   /* its progress */
} rf_run;

static void rf_trace(void *ctx, const core_trace_insn *t)
{
    rf_run *x = ctx;
    int32_t r = t->chip < x->n_chips ? x->rank_of_chip[t->chip] : -1;
    if (r < 0)
        return;
    rf_rank *k = &x->rk[r];
    if (t->core >= k->n_cores || !k->pcmap[t->core])
        return;
    int32_t i = k->pcmap[t->core][t->pc];
    if (i < 0)
        return;
    rf_rec *c = &k->rec[i];
    if (!c->ran || t->start_ps < c->first)
        c->first = t->start_ps;
    if (!c->ran || t->end_ps > c->last)
        c->last = t->end_ps;
    c->ran = true;
}

/* Kernel launches (docs/run.md, "Kernel launches"): a rank's first kernel is the host's
 * launch after the previous step, as is the first after a host synchronization
 * (lower_step.host_launch), every other kernel waits the stream's gap, communication entries
 * nothing (the fast engine's rule). */
static hw_launch rf_launch(void *ctx, uint32_t chip, uint32_t core, uint32_t pc, const char *kernel)
{
    (void)kernel;
    rf_run *x = ctx;
    int32_t r = chip < x->n_chips ? x->rank_of_chip[chip] : -1;
    if (r < 0)
        return HW_LAUNCH_NONE;
    const rf_rank *k = &x->rk[r];
    int32_t i = core < k->n_cores && k->pcmap[core] ? k->pcmap[core][pc] : -1;
    if (i < 0 || (uint32_t)i >= k->lp->n_steps)
        return HW_LAUNCH_NONE;
    return i == 0 || k->lp->steps[i].host_launch ? HW_LAUNCH_HOST : HW_LAUNCH_GAP;
}

static void rf_end(void *ctx, hw_system *sys, uint32_t chip, hw_chip_state st)
{
    (void)sys, (void)chip, (void)st;
    rf_run *x = ctx;
    if (x->running)
        x->running--;
}

static void rf_tick_ev(evq *q, void *ctx, uint64_t arg)
{
    (void)arg;
    rf_run *x = ctx;
    if (x->o->progress && ++x->samples % 1024 == 0) { /* every 2^30 ps or so simulated */
        char what[96];
        uint32_t r = (uint32_t)x->p->mesh.n_ranks;
        snprintf(what, sizeof what, "running every chip's program (%.3f ms simulated)",
                 (double)evq_now(q) * 1e-9);
        x->o->progress(x->o->progress_ctx, what, r ? (double)(r - x->running) / r : 1);
    }
    /* again while chips run and something else is pending (else the run is over or stuck) */
    if (x->running && evq_pending(q) > 0)
        evq_schedule_in(q, RF_TICK_PS, rf_tick_ev, x, 0, NULL, NULL);
}

/* ---- records ------------------------------------------------------------------------------ */

typedef struct rf_name {
    const char *name;
    int32_t rec;
} rf_name;

static int rf_name_cmp(const void *a, const void *b)
{
    return strcmp(((const rf_name *)a)->name, ((const rf_name *)b)->name);
}

/* Each core's pcs mapped onto the rank's records by kernel symbol. */
static np_status rf_map(rf_rank *k, np_err *err)
{
    const lower_prog *lp = k->lp;
    uint32_t n = lp->n_steps + lp->n_comm;
    rf_name *names = malloc(((size_t)n + 1) * sizeof *names);
    k->rec = calloc((size_t)n + 1, sizeof *k->rec);
    k->n_cores = 0;
    for (uint32_t c = 0; c < lp->prog->n_cores; c++)
        if (lp->prog->cores[c].core + 1 > k->n_cores)
            k->n_cores = lp->prog->cores[c].core + 1;
    k->pcmap = calloc((size_t)k->n_cores + 1, sizeof *k->pcmap);
    if (!names || !k->rec || !k->pcmap) {
        free(names);
        return np_err_set(err, NP_ERR_NOMEM, "out of memory");
    }
    for (uint32_t i = 0; i < lp->n_steps; i++)
        names[i] = (rf_name){lp->steps[i].res.name, (int32_t)i};
    for (uint32_t i = 0; i < lp->n_comm; i++)
        names[lp->n_steps + i] = (rf_name){lp->comm[i].name, (int32_t)(lp->n_steps + i)};
    qsort(names, n, sizeof *names, rf_name_cmp);
    np_status st = NP_OK;
    for (uint32_t c = 0; c < lp->prog->n_cores && st == NP_OK; c++) {
        const isa_core_text *t = &lp->prog->cores[c];
        int32_t *m = k->pcmap[t->core] = malloc(((size_t)t->n_insns + 1) * sizeof *m);
        if (!m) {
            st = np_err_set(err, NP_ERR_NOMEM, "out of memory");
            break;
        }
        for (uint32_t i = 0; i < t->n_insns; i++)
            m[i] = -1;
        for (uint32_t j = 0; j < t->n_kernels; j++) {
            rf_name key = {t->kernels[j].name, 0};
            const rf_name *f =
                key.name ? bsearch(&key, names, n, sizeof *names, rf_name_cmp) : NULL;
            for (uint32_t i = 0; f && i < t->kernels[j].count; i++)
                m[t->kernels[j].start + i] = f->rec;
        }
    }
    free(names);
    return st;
}

/* ---- values -------------------------------------------------------------------------------- */

/* Whether leaf t of rank r's class has its values in the program itself (a .data constant). */
static bool rf_is_const(const nn_plan_class *c, const nn_tensor *t)
{
    const nn_plan_leaf *l = nn_plan_leaf_of(c, t);
    return l ? l->kind == NN_LEAF_RANKVALUE || (l->kind == NN_LEAF_CONST && t->data)
             : t->role == NN_ROLE_CONST && t->data;
}

static bool rf_is_data(const nn_plan_class *c, const nn_tensor *t)
{
    const nn_plan_leaf *l = nn_plan_leaf_of(c, t);
    return l && l->kind == NN_LEAF_DATA;
}

static np_status rf_load(rf_run *x, const run_full_io *io, np_err *err)
{
    for (int r = 0; r < x->p->mesh.n_ranks; r++) {
        const rf_rank *k = &x->rk[r];
        const nn_plan_class *c = &x->p->classes[nn_plan_rank_class(x->p, r)];
        for (int i = 0; i < nn_graph_n_nodes(c->g); i++) {
            const nn_tensor *t = nn_graph_node(c->g, i);
            if (t->op != NN_OP_LEAF || rf_is_const(c, t))
                continue;
            bool data = rf_is_data(c, t);
            for (int mb = data ? 0 : -1; mb < (data ? x->p->n_micro : 0); mb++) {
                uint64_t a = data ? lower_addr_mb(k->lp, t, mb) : lower_addr(k->lp, t);
                const float *v = a != UINT64_MAX ? io->load(io->ctx, r, t, mb) : NULL;
                if (v && run_full_write(x->sys, k->chip, a, t->dtype, v, nn_numel(t), err) != NP_OK)
                    return err->status;
            }
        }
    }
    return NP_OK;
}

static np_status rf_store(rf_run *x, const run_full_io *io, np_err *err)
{
    float *v = NULL;
    size_t cap = 0;
    np_status st = NP_OK;
    for (int r = 0; r < x->p->mesh.n_ranks && st == NP_OK; r++) {
        const rf_rank *k = &x->rk[r];
        const nn_plan_class *c = &x->p->classes[nn_plan_rank_class(x->p, r)];
        for (int i = 0; i < nn_graph_n_nodes(c->g) && st == NP_OK; i++) {
            const nn_tensor *t = nn_graph_node(c->g, i);
            bool loss = t == c->loss;
            if (!loss && (t->op != NN_OP_LEAF || rf_is_const(c, t) || rf_is_data(c, t)))
                continue;
            size_t n = (size_t)nn_numel(t);
            if (n > cap) {
                free(v);
                if (!(v = malloc(n * sizeof *v))) {
                    st = np_err_set(err, NP_ERR_NOMEM, "out of memory");
                    break;
                }
                cap = n;
            }
            for (int mb = loss ? 0 : -1; mb < (loss ? x->p->n_micro : 0) && st == NP_OK; mb++) {
                uint64_t a = loss ? lower_addr_mb(k->lp, t, mb) : lower_addr(k->lp, t);
                if (a == UINT64_MAX)
                    continue;
                if ((st = run_full_read(x->sys, k->chip, a, t->dtype, v, (int64_t)n, err)) == NP_OK)
                    st = io->store(io->ctx, r, t, mb, v, err);
            }
        }
    }
    free(v);
    return st;
}

/* ---- figures -------------------------------------------------------------------------------- */

typedef struct rf_iv {
    uint64_t lo, hi;
} rf_iv;

static int rf_iv_cmp(const void *a, const void *b)
{
    const rf_iv *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo ? 1 : (x->hi < y->hi ? -1 : x->hi > y->hi);
}

/* Sorts and merges v[0 .. n) in place; returns the count of disjoint intervals. */
static uint32_t rf_union(rf_iv *v, uint32_t n)
{
    qsort(v, n, sizeof *v, rf_iv_cmp);
    uint32_t m = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (v[i].hi <= v[i].lo)
            continue;
        if (m && v[i].lo <= v[m - 1].hi) {
            if (v[i].hi > v[m - 1].hi)
                v[m - 1].hi = v[i].hi;
        } else {
            v[m++] = v[i];
        }
    }
    return m;
}

static uint64_t rf_len(const rf_iv *v, uint32_t n)
{
    uint64_t s = 0;
    for (uint32_t i = 0; i < n; i++)
        s += v[i].hi - v[i].lo;
    return s;
}

/* Length of [lo, hi) covered by the disjoint sorted intervals v. */
static uint64_t rf_covered(const rf_iv *v, uint32_t n, uint64_t lo, uint64_t hi)
{
    uint64_t s = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t a = v[i].lo > lo ? v[i].lo : lo, b = v[i].hi < hi ? v[i].hi : hi;
        s += b > a ? b - a : 0;
    }
    return s;
}

/* The comm record of `rank` for entry instance (match, mb, kind) talking to peer (a send or
 * recv) or in the group of first member first; -1 when none. */
static int32_t rf_find(const rf_run *x, int rank, const nn_plan_entry *like, int mb)
{
    const rf_rank *k = &x->rk[rank];
    for (uint32_t i = 0; i < k->lp->n_comm; i++) {
        const lower_comm *c = &k->lp->comm[i];
        if (c->mb == mb && c->e->match == like->match &&
            (c->e->kind == NN_PLAN_COLLECTIVE) == (like->kind == NN_PLAN_COLLECTIVE) &&
            (like->kind == NN_PLAN_COLLECTIVE || c->e->kind != like->kind))
            return (int32_t)(k->lp->n_steps + i);
    }
    return -1;
}

/* What rf_figures builds, phase by phase: the result, each rank's busy intervals (its
 * kernels' union; after the communication phase, its work: computing or communicating) and
 * every communication instance's interval, kind and rank. */
typedef struct rf_fig {
    rf_run *x;
    run_result *r;
    uint32_t R;
    rf_iv **busy;
    uint32_t *n_busy;
    rf_iv *civ;
    uint8_t *ckind;
    uint32_t *crank, nc;
} rf_fig;

static np_status rf_oom(np_err *err) { return np_err_set(err, NP_ERR_NOMEM, "out of memory"); }

/* Rank k's units: the core model's busy cycles of its mxu, vpu and dma, mean over the chip's
 * cores, and the report's actions for energy (run_energy.h). */
static np_status rf_fig_units(rf_fig *f, uint32_t k, run_rank_stats *s, np_err *err)
{
    core_report *cr;
    if (hw_system_report(f->x->sys, f->x->rk[k].chip, NULL, &cr, err) != NP_OK)
        return err->status;
    energy_counts_of_report(cr, &s->acts);
    double ps_per_cycle = 1000.0 / f->x->cfg->core.clock_ghz, sum[3] = {0};
    uint32_t cores = 0;
    for (uint32_t u = 0; u < cr->n_units; u++) {
        isa_unit kind = cr->units[u].kind;
        int j = kind == ISA_UNIT_MXU ? 0 : kind == ISA_UNIT_VPU ? 1 : kind == ISA_UNIT_DMA ? 2 : -1;
        if (j >= 0)
            sum[j] += (double)cr->units[u].busy_cycles * ps_per_cycle;
        cores += j == 0;
    }
    core_report_free(cr);
    if (cores) {
        s->busy_ps[RUN_UNIT_MXU] = (uint64_t)(sum[0] / cores);
        s->busy_ps[RUN_UNIT_VPU] = (uint64_t)(sum[1] / cores);
        s->busy_ps[RUN_UNIT_DMA] = (uint64_t)(sum[2] / cores);
    }
    return NP_OK;
}

/* Every rank's time, compute busy (the union of its kernels), pipeline tasks and units. */
static np_status rf_fig_compute(rf_fig *f, np_err *err)
{
    const nn_plan *p = f->x->p;
    run_result *r = f->r;
    for (uint32_t k = 0; k < f->R; k++) {
        const rf_rank *rk = &f->x->rk[k];
        run_rank_stats *s = &r->rank[k];
        hw_chip_info ci;
        hw_system_chip_info(f->x->sys, rk->chip, &ci);
        s->end_ps = ci.t_end_ps;
        if (ci.t_end_ps > r->time_ps)
            r->time_ps = ci.t_end_ps;
        if (!(f->busy[k] = malloc(((size_t)rk->lp->n_steps + 1) * sizeof **f->busy)))
            return rf_oom(err);
        bool pipe = false;
        for (uint32_t i = 0; i < rk->lp->n_steps; i++) {
            const rf_rec *c = &rk->rec[i];
            if (!c->ran)
                continue;
            f->busy[k][f->n_busy[k]++] = (rf_iv){c->first, c->last};
            const nn_plan_entry *e = rk->lp->steps[i].e;
            if (e && run_plan_is_pipeline(e)) {
                if (!pipe || c->first < s->pipe_first_ps)
                    s->pipe_first_ps = c->first;
                if (!pipe || c->last > s->pipe_last_ps)
                    s->pipe_last_ps = c->last;
                s->pipe_busy_ps += c->last - c->first;
                pipe = true;
            }
        }
        f->n_busy[k] = rf_union(f->busy[k], f->n_busy[k]);
        s->busy_ps[RUN_UNIT_COMPUTE] = rf_len(f->busy[k], f->n_busy[k]);
        nn_plan_class_flops(p, &p->classes[nn_plan_rank_class(p, (int)k)], &s->flops,
                            &s->hw_flops);
        if (rf_fig_units(f, k, s, err) != NP_OK)
            return err->status;
    }
    r->step_ps = r->time_ps;
    r->step_end_ps[0] = r->time_ps;
    return NP_OK;
}

/* The interval of rank k's comm entry c (its record me): a collective from its last member's
 * start to its last member's end; a transfer from its send's start to its delivery. */
static rf_iv rf_fig_comm_span(const rf_fig *f, uint32_t k, const lower_comm *c,
                              const rf_rec *me)
{
    const rf_run *x = f->x;
    const nn_plan *p = x->p;
    uint64_t lo = me->first, hi = me->last;
    if (c->e->kind == NN_PLAN_COLLECTIVE) {
        int ranks[256];
        int n = nn_plan_group(p, (int)k, c->e, ranks, 256);
        for (int j = 0; j < n && j < 256; j++) {
            int32_t q = rf_find(x, ranks[j], c->e, c->mb);
            const rf_rec *o2 = q >= 0 ? &x->rk[ranks[j]].rec[q] : NULL;
            if (o2 && o2->ran) {
                lo = o2->first > lo ? o2->first : lo;
                hi = o2->last > hi ? o2->last : hi;
            }
        }
        return (rf_iv){lo, hi};
    }
    int peer = nn_plan_peer(p, (int)k, c->e);
    int32_t q = rf_find(x, peer, c->e, c->mb);
    const rf_rec *o2 = q >= 0 ? &x->rk[peer].rec[q] : NULL;
    const rf_rec *snd = c->e->kind == NN_PLAN_SEND ? me : o2;
    const rf_rec *rcv = c->e->kind == NN_PLAN_SEND ? o2 : me;
    if (snd && rcv && snd->ran && rcv->ran) {
        lo = snd->first;
        /* delivered: when the recv got it, where it waited for it (posted before the last byte
         * left); else a route's latency after the last byte left, the message waiting in the
         * mailbox until the recv took it (as the fast engine's delivery, whenever the receive
         * is posted) */
        uint64_t d = rcv->last;
        if (rcv->first > snd->last) {
            uint32_t sc = x->rk[c->e->kind == NN_PLAN_SEND ? k : (uint32_t)peer].chip,
                     rc = x->rk[c->e->kind == NN_PLAN_SEND ? (uint32_t)peer : k].chip;
            uint64_t arrive = snd->last + hw_system_route_latency_ps(x->sys, sc, rc);
            d = arrive < d ? arrive : d;
        }
        hi = d > lo ? d : lo;
    }
    return (rf_iv){lo, hi};
}

/* Every communication instance's interval, kind and rank (f->civ, ckind, crank), and the bytes
 * each rank put on the network: a collective's on its group's first rank (summed over its
 * members' sends), a send's on its sender (a blocking receive's clear-to-send on it). */
static np_status rf_fig_comm_collect(rf_fig *f, np_err *err)
{
    uint32_t n_all = 0;
    for (uint32_t k = 0; k < f->R; k++)
        n_all += f->x->rk[k].lp->n_comm;
    f->civ = malloc(((size_t)n_all + 1) * sizeof *f->civ);
    f->ckind = malloc((size_t)n_all + 1);
    f->crank = malloc(((size_t)n_all + 1) * sizeof *f->crank);
    if (!f->civ || !f->ckind || !f->crank)
        return rf_oom(err);
    for (uint32_t k = 0; k < f->R; k++) {
        const rf_rank *rk = &f->x->rk[k];
        for (uint32_t i = 0; i < rk->lp->n_comm; i++) {
            const lower_comm *c = &rk->lp->comm[i];
            const rf_rec *me = &rk->rec[rk->lp->n_steps + i];
            if (!me->ran)
                continue;
            run_comm_kind kind = run_plan_comm_kind(c->e->tag);
            f->civ[f->nc] = rf_fig_comm_span(f, k, c, me);
            f->ckind[f->nc] = (uint8_t)kind;
            f->crank[f->nc++] = k;
            if (c->e->kind == NN_PLAN_COLLECTIVE) {
                int ranks[256];
                int n = nn_plan_group(f->x->p, (int)k, c->e, ranks, 256);
                if (n > 0)
                    f->r->rank[ranks[0]].comm_bytes[kind] += c->bytes_sent;
            } else {
                f->r->rank[k].comm_bytes[kind] += c->bytes_sent;
            }
        }
    }
    return NP_OK;
}

/* Rank k's communication per kind and in all (RUN_COMM_COUNT: the comm unit), exposed where
 * no kernel ran; then its busy intervals become its work (computing or communicating). tmp
 * holds f->nc intervals. */
static np_status rf_fig_comm_rank(rf_fig *f, uint32_t k, rf_iv *tmp, np_err *err)
{
    run_rank_stats *s = &f->r->rank[k];
    for (int kind = 0; kind <= RUN_COMM_COUNT; kind++) {
        uint32_t m = 0;
        for (uint32_t i = 0; i < f->nc; i++)
            if (f->crank[i] == k && (kind == RUN_COMM_COUNT || f->ckind[i] == kind))
                tmp[m++] = f->civ[i];
        m = rf_union(tmp, m);
        uint64_t len = rf_len(tmp, m), over = 0;
        for (uint32_t i = 0; i < m; i++)
            over += rf_covered(f->busy[k], f->n_busy[k], tmp[i].lo, tmp[i].hi);
        if (kind < RUN_COMM_COUNT) {
            s->comm_ps[kind] = len;
            s->exposed_ps[kind] = len - over;
            continue;
        }
        s->busy_ps[RUN_UNIT_COMM] = len;
        s->computing_ps = s->busy_ps[RUN_UNIT_COMPUTE];
        s->exposed_all_ps = len - over;
        s->idle_ps = f->r->time_ps - s->computing_ps - s->exposed_all_ps;
        rf_iv *w = realloc(f->busy[k], ((size_t)f->n_busy[k] + m + 1) * sizeof *w);
        if (!w)
            return rf_oom(err);
        memcpy(w + f->n_busy[k], tmp, (size_t)m * sizeof *w);
        f->busy[k] = w;
        f->n_busy[k] = rf_union(w, f->n_busy[k] + m);
    }
    for (int kind = 0; kind < RUN_COMM_COUNT; kind++) {
        f->r->comm_ps[kind] += s->comm_ps[kind];
        f->r->exposed_ps[kind] += s->exposed_ps[kind];
        f->r->comm_bytes[kind] += s->comm_bytes[kind];
    }
    return NP_OK;
}

/* Bubbles: a rank's idle time (neither computing nor communicating) inside its pipeline's
 * window (its pp group's first pipeline start to last end), by run_figures' definition. */
static np_status rf_fig_bubbles(rf_fig *f, np_err *err)
{
    const nn_plan *p = f->x->p;
    run_result *r = f->r;
    uint32_t *stage_of = calloc((size_t)f->R + 1, sizeof *stage_of);
    if (!stage_of)
        return rf_oom(err);
    for (uint32_t k = 0; k < f->R; k++) {
        stage_of[k] = r->stages > 1 ? (uint32_t)p->classes[nn_plan_rank_class(p, (int)k)].stage
                                    : UINT32_MAX;
        int grp[256], n = r->stages > 1 ? nn_plan_axis_group(p, (int)k, NN_MESH_PP, grp, 256) : 0;
        uint64_t lo = UINT64_MAX, hi = 0;
        for (int j = 0; j < n; j++) {
            const run_rank_stats *g = &r->rank[grp[j]];
            if (g->pipe_last_ps > g->pipe_first_ps) {
                lo = g->pipe_first_ps < lo ? g->pipe_first_ps : lo;
                hi = g->pipe_last_ps > hi ? g->pipe_last_ps : hi;
            }
        }
        if (hi <= lo)
            continue;
        r->rank[k].window_ps = hi - lo;
        r->rank[k].bubble_ps = (hi - lo) - rf_covered(f->busy[k], f->n_busy[k], lo, hi);
        r->rank[k].bubble_all_ps = r->rank[k].bubble_ps; /* (one step) */
    }
    np_status st = run_figures_bubbles(r, stage_of, err);
    free(stage_of);
    return st;
}

/* Links: bytes over the run and the busiest window (the network's count), then the busiest. */
static np_status rf_fig_links(rf_fig *f, const run_full_opts *o, np_err *err)
{
    run_result *r = f->r;
    const net *nt = hw_system_net(f->x->sys);
    r->n_links = nt ? net_links(nt) : 0;
    r->links = calloc((size_t)r->n_links + 1, sizeof *r->links);
    if (!r->links)
        return rf_oom(err);
    r->link_window_ps = NET_LINK_PEAK_WINDOW_PS;
    double t_s = (double)r->time_ps * 1e-12;
    for (uint32_t l = 0; l < r->n_links; l++) {
        run_link_stats *ls = &r->links[l];
        net_link_info li;
        net_link_get(nt, l, &li);
        net_link_name(nt, l, ls->name, sizeof ls->name);
        ls->capacity_bytes_per_s = li.bytes_per_s;
        ls->bytes = li.bytes;
        ls->avg_bytes_per_s = t_s > 0 ? (double)li.bytes / t_s : 0;
        ls->peak_bytes_per_s = li.peak_window_bytes / ((double)NET_LINK_PEAK_WINDOW_PS * 1e-12);
    }
    return run_figures_top_links(r, o->top_links, err);
}

/* The run's figures (run_result) from the simulated ranks' records, phase by phase. */
static np_status rf_figures(rf_run *x, const run_full_opts *o, run_result **out, np_err *err)
{
    const nn_plan *p = x->p;
    rf_fig f = {.x = x, .R = (uint32_t)p->mesh.n_ranks, .r = calloc(1, sizeof *f.r)};
    if (!f.r)
        return rf_oom(err);
    run_result *r = f.r;
    r->ranks = f.R;
    r->steps = 1;
    r->rank = calloc(f.R, sizeof *r->rank);
    r->step_end_ps = calloc(1, sizeof *r->step_end_ps);
    r->stages = (uint32_t)p->mesh.size[NN_MESH_PP];
    r->micro_batches = (uint32_t)p->n_micro;
    f.busy = calloc(f.R, sizeof *f.busy);
    f.n_busy = calloc(f.R, sizeof *f.n_busy);
    rf_iv *tmp = NULL;
    np_status st = !r->rank || !r->step_end_ps || !f.busy || !f.n_busy ? rf_oom(err) : NP_OK;
    if (st == NP_OK)
        st = rf_fig_compute(&f, err);
    if (st == NP_OK)
        st = rf_fig_comm_collect(&f, err);
    if (st == NP_OK && !(tmp = malloc(((size_t)f.nc + 1) * sizeof *tmp)))
        st = rf_oom(err);
    for (uint32_t k = 0; k < f.R && st == NP_OK; k++)
        st = rf_fig_comm_rank(&f, k, tmp, err);
    if (st == NP_OK)
        st = rf_fig_bubbles(&f, err);
    if (st == NP_OK)
        st = rf_fig_links(&f, o, err);
    r->events = evq_dispatched(x->q);
    r->ranks_simulated = f.R;
    r->mirror_groupset = UINT32_MAX;
    r->mirror_ways = 1;
    for (uint32_t k = 0; f.busy && k < f.R; k++)
        free(f.busy[k]);
    free(f.busy);
    free(f.n_busy);
    free(f.civ);
    free(f.ckind);
    free(f.crank);
    free(tmp);
    if (st != NP_OK)
        run_result_free(r);
    else
        *out = r;
    return st;
}

/* ---- the run -------------------------------------------------------------------------------- */

void run_full_result_free(run_full_result *r)
{
    if (!r)
        return;
    run_result_free(r->r);
    for (uint32_t k = 0; r->progs && k < r->n_ranks; k++)
        lower_prog_free(r->progs[k]);
    free(r->progs);
    memset(r, 0, sizeof *r);
}

np_status run_full_plan(const arch_config *cfg, const nn_plan *p, const run_full_opts *opts,
                        run_full_result *out, np_err *err)
{
    memset(out, 0, sizeof *out);
    run_full_opts o = opts ? *opts : (run_full_opts){0};
    uint32_t R = (uint32_t)p->mesh.n_ranks;
    rf_run x = {.cfg = cfg, .p = p, .o = &o};
    evq *pq = NULL;
    net *pnet = NULL;
    coll_tuner *tuner = NULL;
    lower_memo *memo = NULL;
    np_status st = NP_OK;
    if (o.functional && (!o.io.load || !o.io.store))
        return np_err_set(err, NP_ERR_INCONSISTENT, "a functional full-fidelity run needs values "
                          "(run_full_opts.io)");
    for (uint32_t k = 0; k < R; k++)
        if ((uint32_t)p->mesh.chip[k] + 1 > x.n_chips)
            x.n_chips = (uint32_t)p->mesh.chip[k] + 1;
    if (x.n_chips > (uint32_t)cfg->system.chips)
        return np_err_set(err, NP_ERR_RANGE, "the plan's ranks reach chip %" PRIu32 ", the system "
                          "has %lld", x.n_chips - 1, (long long)cfg->system.chips);
    out->n_ranks = R;
    out->progs = calloc(R, sizeof *out->progs);
    x.rk = calloc(R, sizeof *x.rk);
    x.rank_of_chip = malloc(((size_t)x.n_chips + 1) * sizeof *x.rank_of_chip);
    if (!out->progs || !x.rk || !x.rank_of_chip) {
        st = np_err_set(err, NP_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (uint32_t c = 0; c < x.n_chips; c++)
        x.rank_of_chip[c] = -1;
    /* the flow engine's rings and algorithms: a network of the system for their questions */
    lower_opts lo = o.lower;
    memo = lo.memo ? NULL : lower_memo_new(); /* shared by the ranks of a class */
    if (!lo.memo && !memo) {
        st = np_err_set(err, NP_ERR_NOMEM, "out of memory");
        goto done;
    }
    if (!lo.memo)
        lo.memo = memo;
    if (!o.rank_order && cfg->system.chips > 1) {
        net_params np;
        net_params_from_arch(cfg, &np);
        if ((st = evq_create(&pq, err)) != NP_OK ||
            (st = net_create(&np, pq, NULL, &pnet, err)) != NP_OK)
            goto done;
        lo.net = pnet;
        if ((st = coll_tuner_create(pnet, cfg, &tuner, err)) != NP_OK)
            goto done;
        lo.tuner = tuner;
    }
    for (uint32_t k = 0; k < R; k++) {
        if (o.progress) {
            char what[64];
            snprintf(what, sizeof what, "lowering rank %" PRIu32 " of %" PRIu32, k + 1, R);
            o.progress(o.progress_ctx, what, (double)k / R);
        }
        if ((st = lower_plan_rank(cfg, p, (int)k, &lo, &out->progs[k], err)) != NP_OK)
            goto done;
        rf_rank *rk = &x.rk[k];
        rk->lp = out->progs[k];
        rk->chip = (uint32_t)p->mesh.chip[k];
        if (x.rank_of_chip[rk->chip] >= 0) {
            st = np_err_set(err, NP_ERR_INCONSISTENT, "ranks %d and %u are both on chip %u",
                            x.rank_of_chip[rk->chip], k, rk->chip);
            goto done;
        }
        x.rank_of_chip[rk->chip] = (int32_t)k;
        if ((st = rf_map(rk, err)) != NP_OK)
            goto done;
        out->kernels += rk->lp->n_steps;
        out->comm += rk->lp->n_comm;
        for (uint32_t c = 0; c < rk->lp->prog->n_cores; c++)
            out->insns += rk->lp->prog->cores[c].n_insns;
    }
    hw_system_opts so = {.n_chips = x.n_chips, .functional = o.functional, .trace = rf_trace,
                         .trace_ctx = &x, .trace_no_text = true, .on_end = rf_end,
                         .on_end_ctx = &x, .launch = rf_launch, .launch_ctx = &x};
    if ((st = evq_create(&x.q, err)) != NP_OK ||
        (st = hw_system_create(cfg, x.q, &so, &x.sys, err)) != NP_OK)
        goto done;
    for (uint32_t k = 0; k < R && st == NP_OK; k++)
        st = hw_system_load(x.sys, x.rk[k].chip, x.rk[k].lp->prog, err);
    if (st == NP_OK && o.functional)
        st = rf_load(&x, &o.io, err);
    for (uint32_t k = 0; k < R && st == NP_OK; k++)
        st = hw_system_start(x.sys, x.rk[k].chip, err);
    if (st != NP_OK)
        goto done;
    x.running = R;
    if (hw_system_net(x.sys) && /* (as when it sampled the links: the same events) */
        (st = evq_schedule_in(x.q, RF_TICK_PS, rf_tick_ev, &x, 0, NULL, err)) != NP_OK)
        goto done;
    if ((st = evq_run(x.q, err)) != NP_OK)
        goto done;
    hw_system_check(x.sys);
    for (uint32_t k = 0; k < R && st == NP_OK; k++) {
        hw_chip_state s = hw_system_chip_state(x.sys, x.rk[k].chip);
        if (s != HW_CHIP_DONE) {
            np_err e = {0};
            hw_system_chip_error(x.sys, x.rk[k].chip, &e);
            st = np_err_set(err, s == HW_CHIP_DEADLOCK ? NP_ERR_DEADLOCK : NP_ERR_SIM_FAULT,
                            "rank %u (chip %u): its step program ended %s: %s", k, x.rk[k].chip,
                            hw_chip_state_names[s], e.msg);
        }
    }
    out->events = evq_dispatched(x.q);
    if (st == NP_OK)
        st = rf_figures(&x, &o, &out->r, err);
    if (st == NP_OK && o.functional)
        st = rf_store(&x, &o.io, err);
done:
    hw_system_free(x.sys);
    evq_free(x.q);
    for (uint32_t k = 0; x.rk && k < R; k++) {
        for (uint32_t c = 0; x.rk[k].pcmap && c < x.rk[k].n_cores; c++)
            free(x.rk[k].pcmap[c]);
        free(x.rk[k].pcmap);
        free(x.rk[k].rec);
    }
    free(x.rk);
    free(x.rank_of_chip);
    coll_tuner_free(tuner);
    net_free(pnet);
    evq_free(pq);
    lower_memo_free(memo);
    if (st != NP_OK)
        run_full_result_free(out);
    return st;
}

/* ---- the distributed executor as io ------------------------------------------------------- */

static const float *rf_dist_load(void *ctx, int rank, const nn_tensor *t, int mb)
{
    return nn_dist_values(ctx, rank, t, mb);
}

static np_status rf_dist_store(void *ctx, int rank, const nn_tensor *t, int mb, const float *v,
                               np_err *err)
{
    float *d = nn_dist_values(ctx, rank, t, mb);
    if (!d)
        return np_err_set(err, NP_ERR_MISSING, "rank %d: the executor holds no values of '%s'",
                          rank, t->name);
    memcpy(d, v, (size_t)nn_numel(t) * sizeof *d);
    return NP_OK;
}

run_full_io run_full_io_dist(struct nn_dist *d)
{
    return (run_full_io){.load = rf_dist_load, .store = rf_dist_store, .ctx = d};
}
