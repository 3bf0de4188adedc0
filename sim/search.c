/* search.c — enumeration, memory pruning, the two bounds and branch and bound over
 * simulations (see search.h, docs/search.md). */
#include "search.h"

#include <errno.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run_job.h"
#include "run_kernel.h"
#include "run_plan.h"
#include "run_report.h"
#include "search_bound.h"
#include "fdio.h"
#include "wallclock.h"

#include <sys/wait.h>
#include <unistd.h>

static const char *const search_objective_names[] = {"step-time", "tokens-per-s", "mfu",
                                                     "memory"};

int search_objective_parse(const char *name)
{
    for (int i = 0; i < 4; i++)
        if (strcmp(name, search_objective_names[i]) == 0)
            return i;
    return -1;
}

const char *search_objective_name(search_objective o)
{
    return (unsigned)o < 4 ? search_objective_names[o] : "?";
}

static const char *sr_recompute(nn_recompute r)
{
    return r == NN_RECOMPUTE_NONE ? "none" : r == NN_RECOMPUTE_SELECTIVE ? "selective"
           : r == NN_RECOMPUTE_FULL ? "full" : "uniform";
}

static const char *sr_schedule(const nn_strategy *s, char *buf, size_t n)
{
    if (s->schedule == NN_PP_INTERLEAVED)
        snprintf(buf, n, "interleaved:%d", s->virtual_stages);
    else
        snprintf(buf, n, "%s", s->schedule == NN_PP_GPIPE ? "gpipe" : "1f1b");
    return buf;
}

char *search_strategy_name(const nn_strategy *s, char *buf, size_t n)
{
    char sch[32];
    snprintf(buf, n, "dp %d tp %d pp %d mb %lld%s%s zero %d%s recompute %s", s->dp, s->tp,
             s->pp, (long long)s->microbatch, s->pp > 1 ? " " : "",
             s->pp > 1 ? sr_schedule(s, sch, sizeof sch) : "", s->zero, s->sp ? " sp" : "",
             sr_recompute(s->recompute));
    return buf;
}

char *search_strategy_flags(const nn_strategy *s, char *buf, size_t n)
{
    char sch[32];
    snprintf(buf, n, "--dp %d --tp %d --pp %d --microbatch %lld --schedule %s --zero %d%s "
             "--recompute %s", s->dp, s->tp, s->pp, (long long)s->microbatch,
             sr_schedule(s, sch, sizeof sch), s->zero, s->sp ? " --sp" : "",
             sr_recompute(s->recompute));
    return buf;
}

double search_score(const search_cand *c, search_objective o)
{
    return o == SEARCH_MEMORY ? (double)c->mem_bytes : c->fig.step_s;
}

/* ---- enumeration ------------------------------------------------------------------------- */

typedef struct sr_list {
    nn_strategy *v;
    uint32_t n, cap;
} sr_list;

static bool sr_push(sr_list *l, const nn_strategy *s)
{
    if (l->n == l->cap) {
        uint32_t cap = l->cap ? 2 * l->cap : 64;
        nn_strategy *v = realloc(l->v, cap * sizeof *v);
        if (!v)
            return false;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = *s;
    return true;
}

static void sr_base(const search_opts *o, nn_strategy *s)
{
    if (o->base) {
        *s = *o->base;
    } else {
        nn_strategy_default(s);
        s->fuse_attention = true;
        s->fuse_softmax = true;
    }
}

np_status search_enumerate(const search_opts *o, nn_strategy **out, uint32_t *n, np_err *err)
{
    *out = NULL;
    *n = 0;
    if (o->chips < 1)
        return np_err_set(err, NP_ERR_USAGE, "--chips must be at least 1");
    if (o->batch < 1)
        return np_err_set(err, NP_ERR_USAGE, "--batch is required (the global batch)");
    int max_mb = o->max_microbatch > 0 ? o->max_microbatch : 8;
    int max_v = o->max_virtual > 0 ? o->max_virtual : 4;
    int64_t layers = nn_model_int(o->model, "layers", 0);
    int island = o->cfg->system.topology == ARCH_TOPOLOGY_HIERARCHICAL
                     ? o->cfg->system.island_chips : o->cfg->system.chips;
    nn_strategy base;
    sr_base(o, &base);
    /* recomputation: selective differs from none only where an attention stays composite */
    nn_recompute recs[3] = {NN_RECOMPUTE_NONE, NN_RECOMPUTE_FULL, NN_RECOMPUTE_SELECTIVE};
    int n_rec = base.fuse_attention ? 2 : 3;
    sr_list l = {0};
    bool ok = true;
    for (int tp = 1; tp <= o->chips && ok; tp++) {
        if (o->chips % tp || tp > island)
            continue;
        for (int pp = 1; pp <= o->chips / tp && ok; pp++) {
            if ((o->chips / tp) % pp || (layers > 0 && pp > layers))
                continue;
            int dp = o->chips / tp / pp;
            if (o->batch % dp)
                continue;
            int64_t share = o->batch / dp;
            /* schedules: 1F1B, GPipe, interleaved:V (index 2 .. max_v) */
            for (int sc = 0; sc <= (pp > 1 ? max_v : 0) && ok; sc++) {
                if (sc == 1 && pp == 1)
                    continue;
                for (int64_t mb = 1; mb <= share && mb <= max_mb && ok; mb++) {
                    if (share % mb)
                        continue;
                    int64_t m = share / mb;
                    if (sc >= 2 && (m % pp || (layers > 0 && (int64_t)pp * sc > layers)))
                        continue;
                    int zmax = dp == 1 ? 0 : pp > 1 ? 1 : 3;
                    for (int z = 0; z <= zmax && ok; z++)
                        for (int sp = 0; sp <= (tp > 1) && ok; sp++)
                            for (int r = 0; r < n_rec && ok; r++) {
                                nn_strategy s = base;
                                s.dp = dp;
                                s.tp = tp;
                                s.pp = pp;
                                s.microbatch = mb;
                                s.zero = z;
                                s.sp = sp;
                                s.recompute = recs[r];
                                s.schedule = sc == 0 ? NN_PP_1F1B : sc == 1 ? NN_PP_GPIPE
                                                                            : NN_PP_INTERLEAVED;
                                s.virtual_stages = sc >= 2 ? sc : 1;
                                ok = sr_push(&l, &s);
                            }
                }
            }
        }
    }
    if (!ok) {
        free(l.v);
        return np_err_set(err, NP_ERR_NOMEM, "search: out of memory");
    }
    *out = l.v;
    *n = l.n;
    return NP_OK;
}

/* ---- bounds ------------------------------------------------------------------------------ */

/* The cheap bound's kernel durations (search_bound_kernel_ps); all 0 with the caller's timer
 * (free_all: the chip's peak and bandwidth say nothing about its durations). */
static void sr_cheap_ps(const run_plan *rp, const arch_config *cfg, bool free_all,
                        uint64_t *ps)
{
    for (uint32_t k = 0; k < rp->n_kspecs; k++)
        ps[k] = free_all ? 0 : search_bound_kernel_ps(&rp->kspecs[k], cfg);
}

typedef struct sr_ctx {
    const search_opts *o;
    nn_model_opts mo;
    nn_optim optim;
    run_ktimer *kt;
    run_attn_memo memo; /* which attention kernels compile, across the candidates' plans */
} sr_ctx;

/* Candidate c could not be planned, bounded or run: out of memory stops the search (*err);
 * anything else marks c failed with the reason, and the search goes on. */
static np_status sr_failed(search_cand *c, search_result *r, const np_err *e, np_err *err)
{
    if (e->status == NP_ERR_NOMEM) {
        *err = *e;
        return e->status;
    }
    c->state = SEARCH_FAILED;
    snprintf(c->why, sizeof c->why, "%.255s", e->msg);
    r->n_failed++;
    return NP_OK;
}

/* Builds candidate c's plan: illegal, or its memory (OOM), else its cheap bound. */
static np_status sr_screen(sr_ctx *x, search_cand *c, search_result *r, np_err *err)
{
    nn_plan *p = NULL;
    np_err e = {0};
    char why[RUN_REPORT_WHY_MAX];
    if (run_build_plan_memo(x->o->model, &x->mo, &c->s, &x->optim, x->o->cfg, &x->memo, &p,
                            why, sizeof why, &e) != NP_OK) {
        if (e.status == NP_ERR_NOMEM) {
            *err = e;
            return e.status;
        }
        c->state = SEARCH_ILLEGAL;
        snprintf(c->why, sizeof c->why, "%.255s", e.msg);
        r->n_illegal++;
        return NP_OK;
    }
    nn_plan_summary sum;
    np_status st = nn_plan_summarize(p, &sum, err);
    if (st != NP_OK) {
        nn_plan_free(p);
        return st;
    }
    c->mem_bytes = sum.mem[sum.largest].total_bytes;
    r->hbm_bytes = p->hbm_bytes;
    nn_plan_summary_free(&sum);
    if (p->hbm_bytes && c->mem_bytes > p->hbm_bytes) {
        c->state = SEARCH_OOM;
        r->n_oom++;
        nn_plan_free(p);
        return NP_OK;
    }
    c->state = SEARCH_PRUNED; /* until it is simulated */
    if (x->o->objective == SEARCH_MEMORY) {
        nn_plan_free(p);
        return NP_OK;
    }
    /* the kernels the run times (its fused chains: as many tasks as the engine runs, each
     * paying the stream's gap once), not compiled: their FLOPs and outputs are enough */
    run_plan *rp = NULL;
    st = run_plan_build(p, x->o->cfg,
                        &(run_plan_opts){.nodes_only = x->o->time_kernel != NULL}, &rp, &e);
    if (st != NP_OK) {
        nn_plan_free(p);
        return sr_failed(c, r, &e, err);
    }
    uint64_t *ps = malloc((rp->n_kspecs + 1) * sizeof *ps), b = 0;
    if (!ps)
        st = np_err_set(err, NP_ERR_NOMEM, "search: out of memory");
    if (st == NP_OK) {
        sr_cheap_ps(rp, x->o->cfg, x->o->time_kernel != NULL, ps);
        st = search_bound_graph(rp->g, x->o->cfg, ps, &b, err);
    }
    c->bound_cheap_s = (double)b * 1e-12;
    free(ps);
    run_plan_free(rp);
    nn_plan_free(p);
    return st;
}

/* Candidate c's tight bound: every kernel at its timed duration (the shorter of alone and
 * chained). A timing error makes it FAILED. */
static np_status sr_tight(sr_ctx *x, search_cand *c, search_result *r, np_err *err)
{
    nn_plan *p = NULL;
    run_plan *rp = NULL;
    np_err e = {0};
    char why[RUN_REPORT_WHY_MAX];
    np_status st = run_build_plan_memo(x->o->model, &x->mo, &c->s, &x->optim, x->o->cfg,
                                       &x->memo, &p, why, sizeof why, &e);
    if (st == NP_OK) /* the kernels run_job_run times: with the caller's timer, nodes */
        st = run_plan_build(p, x->o->cfg, &(run_plan_opts){.nodes_only = x->o->time_kernel != NULL},
                            &rp, &e);
    uint64_t *ps = st == NP_OK ? malloc((rp->n_kspecs + 1) * sizeof *ps) : NULL;
    if (st == NP_OK && !ps)
        st = np_err_set(&e, NP_ERR_NOMEM, "search: out of memory");
    for (uint32_t k = 0; st == NP_OK && k < rp->n_kspecs; k++) {
        run_ktime t;
        const run_kernel *rk = run_graph_kernel(rp->g, k);
        st = x->o->time_kernel ? x->o->time_kernel(x->o->time_ctx, rk, &t, &e)
                               : run_ktimer_time(x->kt, rk, &t, &e);
        if (st == NP_OK)
            ps[k] = t.chained_ps && t.chained_ps < t.ps ? t.chained_ps : t.ps;
    }
    uint64_t b = 0;
    if (st == NP_OK)
        st = search_bound_graph(rp->g, x->o->cfg, ps, &b, &e);
    free(ps);
    run_plan_free(rp);
    nn_plan_free(p);
    if (st != NP_OK)
        return sr_failed(c, r, &e, err);
    c->bound_s = (double)b * 1e-12;
    return NP_OK;
}

static np_status sr_simulate(sr_ctx *x, search_cand *c, search_result *r, np_err *err)
{
    run_job j = {.cfg = x->o->cfg, .model = x->o->model, .s = c->s, .o = x->mo,
                 .optim = x->optim, .steps = 1, .ktimer = x->kt,
                 .time_kernel = x->o->time_kernel, .time_ctx = x->o->time_ctx};
    run_report rep;
    np_err e = {0};
    np_status st = run_job_run(&j, &rep, &e);
    if (st != NP_OK)
        return sr_failed(c, r, &e, err);
    search_fig *f = &c->fig;
    f->step_s = rep.step_time_s;
    f->tokens_per_s = rep.tokens_per_s;
    f->samples_per_s = rep.samples_per_s;
    f->mfu_pct = rep.mfu_pct;
    f->compute_s = rep.compute_s;
    f->exposed_comm_s = rep.exposed_comm_s;
    f->bubble_s = rep.bubble_s;
    f->idle_s = rep.idle_s;
    f->bubble_pct = rep.bubble_pct;
    for (uint32_t i = 0; i < rep.n_comm; i++)
        if ((unsigned)rep.comm[i].kind < RUN_COMM_COUNT)
            f->exposed_s[rep.comm[i].kind] = rep.comm[i].exposed_s;
    run_report_free(&rep);
    c->state = SEARCH_SIMULATED;
    r->n_simulated++;
    return NP_OK;
}

/* Ordering: by a key, then by index (deterministic). */
typedef struct sr_key {
    double v;
    uint32_t i;
} sr_key;

static int sr_key_cmp(const void *a, const void *b)
{
    const sr_key *x = a, *y = b;
    return x->v < y->v ? -1 : x->v > y->v ? 1 : x->i < y->i ? -1 : x->i > y->i;
}

/* The top-th best score among the simulated (INFINITY while fewer). */
static double sr_kth(const search_result *r, search_objective obj, int top, sr_key *tmp)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < r->n_cand; i++)
        if (r->cand[i].state == SEARCH_SIMULATED)
            tmp[n++] = (sr_key){search_score(&r->cand[i], obj), i};
    if (n < (uint32_t)top)
        return INFINITY;
    qsort(tmp, n, sizeof *tmp, sr_key_cmp);
    return tmp[top - 1].v;
}

static void sr_progress(const search_opts *o, const char *what, double done)
{
    if (o->progress)
        o->progress(o->progress_ctx, what, done);
}

/* What a screening worker sends back per candidate (one write, at most PIPE_BUF bytes, so
 * never torn); index UINT32_MAX: the worker failed, why holds the message. */
typedef struct sr_rec {
    uint32_t index;
    uint32_t state;
    uint64_t mem_bytes, hbm_bytes;
    double bound_cheap_s;
    char why[256];
} sr_rec;

_Static_assert(sizeof(sr_rec) <= 4096, "a worker's record must fit in a pipe (PIPE_BUF)");

/* The search's process pool: `jobs` forked workers (at most 64), worker w running
 * work(ctx, w, fd) — which writes its records to fd and never returns — while the parent
 * reads each worker's pipe as it becomes ready with readf(ctx, fd, st, err): true while the
 * pipe stays open, false once it is done (at its end, or on a record that fails, which sets
 * *st and err the first time). Every worker is waited for. */
typedef void (*sr_work_fn)(void *ctx, int w, int fd);
typedef bool (*sr_read_fn)(void *ctx, int fd, np_status *st, np_err *err);

static np_status sr_fork_pool(int jobs, sr_work_fn work, sr_read_fn readf, void *ctx,
                              np_err *err)
{
    int fds[64];
    pid_t pids[64];
    int n_w = 0;
    np_status st = NP_OK;
    for (int w = 0; w < jobs && w < 64 && st == NP_OK; w++) {
        int p[2];
        if (pipe(p) != 0) {
            st = np_err_set(err, NP_ERR_IO, "search: pipe: %s", strerror(errno));
            break;
        }
        fflush(NULL);
        pid_t pid = fork();
        if (pid < 0) {
            close(p[0]);
            close(p[1]);
            st = np_err_set(err, NP_ERR_IO, "search: fork: %s", strerror(errno));
            break;
        }
        if (pid == 0) { /* the worker */
            close(p[0]);
            for (int k = 0; k < n_w; k++)
                close(fds[k]);
            work(ctx, w, p[1]);
            _exit(0);
        }
        close(p[1]);
        fds[n_w] = p[0];
        pids[n_w++] = pid;
    }
    int open_fds = n_w;
    struct pollfd pf[64];
    while (open_fds > 0) {
        int m = 0;
        for (int k = 0; k < n_w; k++)
            if (fds[k] >= 0)
                pf[m++] = (struct pollfd){.fd = fds[k], .events = POLLIN};
        if (poll(pf, (nfds_t)m, -1) < 0) {
            if (errno == EINTR)
                continue;
            if (st == NP_OK)
                st = np_err_set(err, NP_ERR_IO, "search: poll: %s", strerror(errno));
            break;
        }
        for (int q = 0; q < m; q++) {
            if (!(pf[q].revents & (POLLIN | POLLHUP | POLLERR)) || readf(ctx, pf[q].fd, &st, err))
                continue;
            for (int k = 0; k < n_w; k++)
                if (fds[k] == pf[q].fd) {
                    close(fds[k]);
                    fds[k] = -1;
                }
            open_fds--;
        }
    }
    for (int k = 0; k < n_w; k++) {
        int status = 0;
        if (fds[k] >= 0)
            close(fds[k]);
        waitpid(pids[k], &status, 0);
    }
    return st;
}

/* Screens every candidate in `jobs` forked workers, worker w taking candidates w, w + jobs, ...
 * and sending each one's record as it is done. */
typedef struct sr_screen_job {
    sr_ctx *x;
    search_result *r;
    int jobs;
    uint32_t got;
} sr_screen_job;

static void sr_screen_work(void *ctx, int w, int fd)
{
    sr_screen_job *j = ctx;
    search_result *r = j->r;
    for (uint32_t i = (uint32_t)w; i < r->n_cand; i += (uint32_t)j->jobs) {
        search_result scratch = {0};
        np_err e = {0};
        sr_rec rec = {.index = i};
        if (sr_screen(j->x, &r->cand[i], &scratch, &e) != NP_OK) {
            rec.index = UINT32_MAX;
            snprintf(rec.why, sizeof rec.why, "%.255s", e.msg);
            np_write_all(fd, &rec, sizeof rec);
            _exit(3);
        }
        rec.state = r->cand[i].state;
        rec.mem_bytes = r->cand[i].mem_bytes;
        rec.hbm_bytes = scratch.hbm_bytes;
        rec.bound_cheap_s = r->cand[i].bound_cheap_s;
        snprintf(rec.why, sizeof rec.why, "%s", r->cand[i].why);
        if (!np_write_all(fd, &rec, sizeof rec))
            _exit(3);
    }
}

static bool sr_screen_read(void *ctx, int fd, np_status *st, np_err *err)
{
    sr_screen_job *j = ctx;
    search_result *r = j->r;
    sr_rec rec;
    size_t n = np_read_full(fd, &rec, sizeof rec);
    if (n == sizeof rec && rec.index < r->n_cand) {
        search_cand *c = &r->cand[rec.index];
        c->state = (search_state)rec.state;
        c->mem_bytes = rec.mem_bytes;
        c->bound_cheap_s = rec.bound_cheap_s;
        snprintf(c->why, sizeof c->why, "%s", rec.why);
        if (rec.hbm_bytes)
            r->hbm_bytes = rec.hbm_bytes;
        j->got++;
        char what[64];
        snprintf(what, sizeof what, "plans: %u of %u", j->got, r->n_cand);
        sr_progress(j->x->o, what, (double)j->got / r->n_cand);
        return true;
    }
    if (n == sizeof rec && *st == NP_OK) /* a worker's error */
        *st = np_err_set(err, NP_ERR_INTERNAL, "search: %s", rec.why);
    return false;
}

static np_status sr_screen_pool(sr_ctx *x, search_result *r, int jobs, np_err *err)
{
    sr_screen_job j = {.x = x, .r = r, .jobs = jobs};
    np_status st = sr_fork_pool(jobs, sr_screen_work, sr_screen_read, &j, err);
    if (st == NP_OK && j.got != r->n_cand)
        st = np_err_set(err, NP_ERR_INTERNAL, "search: the screening workers returned %u of "
                        "%u candidates", j.got, r->n_cand);
    return st;
}

/* ---- tight bounds and simulations in workers ---------------------------------------------- */

/* One piece of branch and bound's work: candidate i's tight bound, or its simulation. */
typedef struct sr_item {
    uint32_t i;
    bool sim;
} sr_item;

/* What a worker sends back per item, followed by n_kernels run_ktimer_entry: the kernels it
 * timed since its last record (the search's timer gets them, so later workers start with
 * them). index UINT32_MAX: the worker failed, why holds the message. */
typedef struct sr_out {
    uint32_t index;
    uint32_t state;
    double bound_s;
    search_fig fig;
    char why[256];
    uint32_t n_kernels;
} sr_out;

/* Does item it in this process: candidate c gets its bound or figures and state. */
static np_status sr_do(sr_ctx *x, search_cand *c, const sr_item *it, np_err *err)
{
    search_result scratch = {0};
    return it->sim ? sr_simulate(x, c, &scratch, err) : sr_tight(x, c, &scratch, err);
}

/* The worker of items w, w + jobs, ... of the list assigned to it (assign[k] == w). */
static void sr_worker(sr_ctx *x, search_result *r, const sr_item *items, const int *assign,
                      uint32_t n_items, int w, int fd)
{
    uint32_t sent = x->kt ? run_ktimer_count(x->kt) : 0;
    for (uint32_t k = 0; k < n_items; k++) {
        if (assign[k] != w)
            continue;
        search_cand *c = &r->cand[items[k].i];
        np_err e = {0};
        sr_out o = {.index = items[k].i};
        if (sr_do(x, c, &items[k], &e) != NP_OK) {
            o.index = UINT32_MAX;
            snprintf(o.why, sizeof o.why, "%.255s", e.msg);
            np_write_all(fd, &o, sizeof o);
            _exit(3);
        }
        o.state = c->state;
        o.bound_s = c->bound_s;
        o.fig = c->fig;
        snprintf(o.why, sizeof o.why, "%s", c->why);
        uint32_t now = x->kt ? run_ktimer_count(x->kt) : 0;
        o.n_kernels = now - sent;
        if (!np_write_all(fd, &o, sizeof o))
            _exit(3);
        for (; sent < now; sent++) {
            run_ktimer_entry ke;
            run_ktimer_entry_get(x->kt, sent, &ke);
            if (!np_write_all(fd, &ke, sizeof ke))
                _exit(3);
        }
    }
    _exit(0);
}

/* Which worker takes each item: candidates whose matrix kernels have the same shapes (the
 * same tp and micro-batch: sequence parallelism, ZeRO, recomputation and pp change only the
 * others') go to one worker, so that a kernel is timed once in the round, unless the round
 * has fewer such groups than workers (then in turn). */
static void sr_assign(const search_result *r, const sr_item *items, uint32_t n, int jobs,
                      int *assign)
{
    uint64_t sig[64];
    uint32_t n_sig = 0;
    int64_t of[64];
    for (uint32_t k = 0; k < n; k++) {
        const nn_strategy *s = &r->cand[items[k].i].s;
        uint64_t g = (uint64_t)s->tp << 32 | (uint64_t)s->microbatch;
        uint32_t j = 0;
        while (j < n_sig && sig[j] != g)
            j++;
        if (j == n_sig && n_sig < 64)
            sig[n_sig++] = g;
        of[k] = j;
    }
    for (uint32_t k = 0; k < n; k++)
        assign[k] = n_sig >= (uint32_t)jobs ? (int)(of[k] % jobs) : (int)(k % (uint32_t)jobs);
}

/* A round of items in the workers (sr_pool). */
typedef struct sr_round {
    sr_ctx *x;
    search_result *r;
    const sr_item *items;
    const int *assign;
    uint32_t n, got;
} sr_round;

static void sr_round_work(void *ctx, int w, int fd)
{
    const sr_round *d = ctx;
    sr_worker(d->x, d->r, d->items, d->assign, d->n, w, fd);
}

/* A record and the kernels that follow it at once (read them in a row). */
static bool sr_round_read(void *ctx, int fd, np_status *st, np_err *err)
{
    sr_round *d = ctx;
    search_result *r = d->r;
    sr_out o;
    if (np_read_full(fd, &o, sizeof o) != sizeof o)
        return false;
    if (o.index >= r->n_cand) {
        if (*st == NP_OK)
            *st = np_err_set(err, NP_ERR_INTERNAL, "search: %s", o.why);
        return false;
    }
    search_cand *c = &r->cand[o.index];
    c->state = (search_state)o.state;
    c->bound_s = o.bound_s;
    c->fig = o.fig;
    snprintf(c->why, sizeof c->why, "%s", o.why);
    d->got++;
    for (uint32_t k = 0; k < o.n_kernels; k++) {
        run_ktimer_entry ke;
        if (np_read_full(fd, &ke, sizeof ke) != sizeof ke) {
            if (*st == NP_OK)
                *st = np_err_set(err, NP_ERR_INTERNAL, "search: a worker's kernel timings "
                                 "were cut short");
            return false;
        }
        if (*st == NP_OK && d->x->kt && !run_ktimer_entry_put(d->x->kt, &ke))
            *st = np_err_set(err, NP_ERR_NOMEM, "search: out of memory");
    }
    return true;
}

/* Does the n (at most 64) items in `jobs` forked workers, each starting with the search's
 * kernel timings; every candidate's outcome lands in r->cand and every kernel a worker timed
 * in the search's timer. The outcomes do not depend on which worker did what. */
static np_status sr_pool(sr_ctx *x, search_result *r, const sr_item *items, uint32_t n,
                         int jobs, np_err *err)
{
    int assign[64];
    if (jobs > (int)n)
        jobs = (int)n;
    sr_assign(r, items, n, jobs, assign);
    sr_round d = {.x = x, .r = r, .items = items, .assign = assign, .n = n};
    np_status st = sr_fork_pool(jobs, sr_round_work, sr_round_read, &d, err);
    if (st == NP_OK && d.got != n)
        st = np_err_set(err, NP_ERR_INTERNAL, "search: the workers returned %u of %u "
                        "candidates", d.got, n);
    return st;
}

/* 2, 3 of the search: every candidate's plan, memory and cheap bound (in jobs workers when
 * more than one), then the counts of the illegal, too large and failed ones. */
static np_status sr_screen_all(sr_ctx *x, search_result *out, int jobs, np_err *err)
{
    const search_opts *o = x->o;
    uint32_t n = out->n_cand;
    np_status st = NP_OK;
    if (jobs > 1 && n > 1)
        st = sr_screen_pool(x, out, jobs, err);
    else
        for (uint32_t i = 0; i < n && st == NP_OK; i++) {
            char what[160], name[120];
            snprintf(what, sizeof what, "plan %u of %u (%s)", i + 1, n,
                     search_strategy_name(&out->cand[i].s, name, sizeof name));
            sr_progress(o, what, (double)i / n);
            st = sr_screen(x, &out->cand[i], out, err);
        }
    out->n_illegal = out->n_oom = out->n_failed = 0;
    for (uint32_t i = 0; i < n; i++) {
        out->n_illegal += out->cand[i].state == SEARCH_ILLEGAL;
        out->n_oom += out->cand[i].state == SEARCH_OOM;
        out->n_failed += out->cand[i].state == SEARCH_FAILED;
    }
    return st;
}

/* A round's outcomes, in key order (the counts and the stream do not depend on the
 * workers): a failed or simulated candidate leaves the keys (*left of them), a bounded one
 * stays with its tight bound as its key. */
static void sr_outcomes(const search_opts *o, search_result *out, const sr_item *items,
                        uint32_t n_items, sr_key *keys, uint32_t *left, bool *tight)
{
    for (uint32_t q = 0; q < n_items; q++) {
        search_cand *d = &out->cand[items[q].i];
        uint32_t k = 0;
        while (keys[k].i != items[q].i)
            k++;
        bool done = true;
        if (d->state == SEARCH_FAILED) {
            out->n_failed++;
        } else if (!items[q].sim) {
            tight[items[q].i] = true;
            keys[k].v = d->bound_s;
            done = false;
        } else {
            out->n_simulated++;
            if (o->simulated)
                o->simulated(o->simulated_ctx, out, items[q].i);
        }
        if (done)
            keys[k] = keys[--*left];
    }
}

np_status search_run(const search_opts *o, search_result *out, np_err *err)
{
    double t0 = np_wall_s();
    memset(out, 0, sizeof *out);
    if (!o->cfg || !o->model)
        return np_err_set(err, NP_ERR_USAGE, "search: an architecture and a model are needed");
    if (o->top < 0)
        return np_err_set(err, NP_ERR_USAGE, "--top must be at least 1");
    if ((int64_t)o->chips > o->cfg->system.chips)
        return np_err_set(err, NP_ERR_USAGE, "--chips %d is more than the %d chips of %s",
                          o->chips, (int)o->cfg->system.chips, o->cfg->name);
    nn_strategy *ss = NULL;
    uint32_t n = 0;
    np_status st = search_enumerate(o, &ss, &n, err);
    if (st != NP_OK)
        return st;
    out->cand = calloc(n ? n : 1, sizeof *out->cand);
    out->order = calloc(n ? n : 1, sizeof *out->order);
    sr_key *keys = calloc(n ? n : 1, sizeof *keys), *tmp = calloc(n ? n : 1, sizeof *tmp);
    if (!out->cand || !out->order || !keys || !tmp) {
        free(ss);
        free(keys);
        free(tmp);
        search_result_free(out);
        return np_err_set(err, NP_ERR_NOMEM, "search: out of memory");
    }
    out->n_cand = n;
    for (uint32_t i = 0; i < n; i++)
        out->cand[i].s = ss[i];
    free(ss);
    int top = o->top ? o->top : 10;
    sr_ctx x = {.o = o, .optim = run_job_optim()};
    x.mo = (nn_model_opts){.batch = o->batch, .seq = o->seq,
                           .compute = o->fp32 ? NN_F32 : NN_BF16, .seed = 1,
                           .dropout = o->dropout};
    if (!o->time_kernel)
        st = run_ktimer_create(o->cfg, o->kernel_cache, &x.kt, err);
    /* 2, 3: plans, memory, the cheap bound */
    int jobs = o->jobs < 1 ? 1 : o->jobs > 64 ? 64 : o->jobs;
    if (st == NP_OK)
        st = sr_screen_all(&x, out, jobs, err);
    /* 4: branch and bound, best first: the candidate of the smallest bound known (the tight
     * one once computed, else the cheap one; memory: its memory) is taken next — its tight
     * bound computed and it goes back, or, already tight, it is simulated — until that
     * smallest bound cannot beat the top-th best step found. */
    uint32_t n_fit = 0;
    for (uint32_t i = 0; i < n && st == NP_OK; i++)
        if (out->cand[i].state == SEARCH_PRUNED)
            keys[n_fit++] = (sr_key){o->objective == SEARCH_MEMORY
                                         ? (double)out->cand[i].mem_bytes
                                         : out->cand[i].bound_cheap_s, i};
    bool *tight = calloc(n ? n : 1, sizeof *tight);
    if (!tight && st == NP_OK)
        st = np_err_set(err, NP_ERR_NOMEM, "search: out of memory");
    /* With workers, each round does several of the smallest keys at once (up to 4 per worker
     * of them tight bounds, up to one per worker simulations): more work than the one-at-a-time
     * order may need, never less, so the K best are the same. */
    sr_item items[64];
    uint32_t max_items = jobs > 1 ? (uint32_t)(4 * jobs > 64 ? 64 : 4 * jobs) : 1;
    for (uint32_t left = n_fit; left > 0 && st == NP_OK;) {
        qsort(keys, left, sizeof *keys, sr_key_cmp);
        double kth = o->exhaustive ? INFINITY : sr_kth(out, o->objective, top, tmp);
        if (keys[0].v > kth) { /* every bound left is at least this one */
            for (uint32_t k = 0; k < left; k++)
                if (tight[keys[k].i])
                    out->n_pruned_tight++;
                else
                    out->n_pruned_cheap++;
            break;
        }
        uint32_t n_items = 0, n_sim = 0;
        for (uint32_t k = 0; k < left && n_items < max_items && keys[k].v <= kth; k++) {
            bool sim = tight[keys[k].i] || o->objective == SEARCH_MEMORY;
            if (sim && n_sim >= (jobs > 1 ? (uint32_t)jobs : 1))
                continue;
            n_sim += sim;
            items[n_items++] = (sr_item){keys[k].i, sim};
        }
        search_cand *c = &out->cand[items[0].i];
        char what[160], name[120];
        snprintf(what, sizeof what, "%s %u (%s)%s", items[0].sim ? "simulating candidate"
                 : "bounding candidate", items[0].i + 1,
                 search_strategy_name(&c->s, name, sizeof name),
                 n_items > 1 ? " and others" : "");
        sr_progress(o, what, (double)(n_fit - left) / n_fit);
        if (n_items > 1) {
            st = sr_pool(&x, out, items, n_items, jobs, err);
        } else {
            np_err e = {0};
            st = sr_do(&x, c, &items[0], &e);
            if (st != NP_OK)
                *err = e;
        }
        if (st == NP_OK)
            sr_outcomes(o, out, items, n_items, keys, &left, tight);
    }
    free(tight);
    sr_progress(o, "done", 1);
    /* the ranking */
    uint32_t m = 0;
    for (uint32_t i = 0; i < n; i++)
        if (out->cand[i].state == SEARCH_SIMULATED)
            tmp[m++] = (sr_key){search_score(&out->cand[i], o->objective), i};
    qsort(tmp, m, sizeof *tmp, sr_key_cmp);
    for (uint32_t i = 0; i < m; i++)
        out->order[i] = tmp[i].i;
    out->n_order = m;
    free(keys);
    free(tmp);
    if (x.kt) {
        out->kernels = run_ktimer_count(x.kt);
        out->kernels_simulated = run_ktimer_get_stats(x.kt).simulated;
    }
    run_ktimer_free(x.kt);
    run_attn_memo_free(&x.memo);
    out->wall_s = np_wall_s() - t0;
    if (st != NP_OK)
        search_result_free(out);
    return st;
}

void search_result_free(search_result *r)
{
    free(r->cand);
    free(r->order);
    r->cand = NULL;
    r->order = NULL;
    r->n_cand = r->n_order = 0;
}
