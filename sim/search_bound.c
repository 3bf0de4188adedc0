/* search_bound.c — the step of a run graph on an ideal network (see search_bound.h).
 *
 * Each class's tasks are visited in issue order (task ids); a receive waits for the k-th send
 * of its matching channel in the sending class, so a class whose next task is such a receive
 * pauses until that class has got so far. When every unfinished class waits so (the engine's
 * streams run independently of the issue order, ours do not), the receive waits for nothing:
 * dropping a constraint keeps the result a lower bound. */
#include "search_bound.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "run_impl.h"
#include "run_report.h"

typedef struct sb_chan {   /* a send channel of a class: its sends' times in order */
    uint64_t *ps;
    uint32_t n, cap;
} sb_chan;

typedef struct sb_class {
    const rg_class *c;
    uint64_t *start, *end; /* per task */
    uint32_t next;         /* the next task to visit */
    uint64_t compute_end;  /* the compute engine's last kernel's end */
    bool first_kernel_done;
    sb_chan *send;         /* per send channel */
    uint32_t *recv_cls, *recv_chan, *recv_seen; /* per recv channel: its sender, RUN_NONE */
} sb_class;

static void sb_free(sb_class *s, uint32_t n)
{
    for (uint32_t i = 0; s && i < n; i++) {
        free(s[i].start);
        free(s[i].end);
        for (uint32_t k = 0; s[i].send && k < s[i].c->n_send; k++)
            free(s[i].send[k].ps);
        free(s[i].send);
        free(s[i].recv_cls);
        free(s[i].recv_chan);
        free(s[i].recv_seen);
    }
    free(s);
}

/* The send channel of which class sends what receive channel j of class b receives (from the
 * class's first rank's point of view: every rank of a class runs the same tasks). */
static void sb_match(const run_graph *g, sb_class *s, const uint32_t *rep, uint32_t b)
{
    const rg_class *cb = s[b].c;
    for (uint32_t j = 0; j < cb->n_recv; j++) {
        s[b].recv_cls[j] = s[b].recv_chan[j] = RUN_NONE;
        if (rep[b] == RUN_NONE)
            continue;
        uint32_t src = rg_chan_peer(g, rep[b], &cb->recv[j]);
        if (src == RUN_NONE)
            continue;
        uint32_t a = g->class_of[src];
        const rg_class *ca = s[a].c;
        for (uint32_t i = 0; i < ca->n_send; i++)
            if (ca->send[i].tag == cb->recv[j].tag &&
                rg_chan_peer(g, src, &ca->send[i]) == rep[b]) {
                s[b].recv_cls[j] = a;
                s[b].recv_chan[j] = i;
                break;
            }
    }
}

static bool sb_push(sb_chan *ch, uint64_t t)
{
    if (ch->n == ch->cap) {
        uint32_t cap = ch->cap ? 2 * ch->cap : 16;
        uint64_t *p = realloc(ch->ps, cap * sizeof *p);
        if (!p)
            return false;
        ch->ps = p;
        ch->cap = cap;
    }
    ch->ps[ch->n++] = t;
    return true;
}

/* Visits class s[i]'s tasks from its next one until it finishes or meets a receive whose send
 * has not been visited (force: that receive waits for nothing). Returns the tasks visited, or
 * UINT32_MAX when out of memory. */
static uint32_t sb_advance(sb_class *s, uint32_t i, const uint64_t *kernel_ps,
                           const uint64_t launch_ps[2], bool force)
{
    sb_class *x = &s[i];
    const rg_class *c = x->c;
    uint32_t visited = 0;
    for (; x->next < c->n_tasks; x->next++, visited++, force = false) {
        uint32_t id = x->next;
        const rg_task *t = &c->tasks[id];
        uint64_t ready = 0;
        for (uint32_t d = 0; d < t->n_deps; d++) {
            uint32_t dep = c->deps[t->dep_off + d];
            uint32_t e = dep >> RG_DEP_ENGINE_SHIFT, pos = dep & RG_DEP_POS_MASK;
            uint32_t did = c->order[c->eng_off[e] + pos];
            uint64_t at = t->pipe_k && dep == t->pipe ? x->start[did] : x->end[did];
            if (at > ready)
                ready = at;
        }
        if (t->kind == RUN_TASK_RECV) {
            uint32_t a = x->recv_cls[t->ref];
            if (a != RUN_NONE) {
                const sb_chan *ch = &s[a].send[x->recv_chan[t->ref]];
                uint32_t k = x->recv_seen[t->ref];
                if (k < ch->n) {
                    if (ch->ps[k] > ready)
                        ready = ch->ps[k];
                } else if (!force) {
                    return visited;
                }
            }
            x->recv_seen[t->ref]++;
        }
        uint64_t start = ready, end = ready;
        if (t->kind == RUN_TASK_COMPUTE) {
            if (x->compute_end > start)
                start = x->compute_end;
            start += launch_ps[!x->first_kernel_done || (t->flags & RUN_TASK_LAUNCH)];
            end = start + kernel_ps[t->ref];
            x->compute_end = end;
            x->first_kernel_done = true;
        } else if (t->kind == RUN_TASK_SEND) {
            if (!sb_push(&x->send[t->ref], ready))
                return UINT32_MAX;
        }
        x->start[id] = start;
        x->end[id] = end;
    }
    return visited;
}

np_status search_bound_graph(const run_graph *g, const arch_config *cfg,
                             const uint64_t *kernel_ps, uint64_t *bound_ps, np_err *err)
{
    uint32_t n = g->n_cls;
    sb_class *s = calloc(n ? n : 1, sizeof *s);
    uint32_t *rep = malloc((n ? n : 1) * sizeof *rep);
    if (!s || !rep) {
        free(s);
        free(rep);
        return np_err_set(err, NP_ERR_NOMEM, "search bound: out of memory");
    }
    for (uint32_t i = 0; i < n; i++)
        rep[i] = RUN_NONE;
    for (uint32_t r = g->ranks; r-- > 0;)
        rep[g->class_of[r]] = r;
    bool ok = true;
    for (uint32_t i = 0; i < n && ok; i++) {
        const rg_class *c = s[i].c = &g->cls[i];
        s[i].start = malloc((c->n_tasks + 1) * sizeof *s[i].start);
        s[i].end = malloc((c->n_tasks + 1) * sizeof *s[i].end);
        s[i].send = calloc(c->n_send + 1, sizeof *s[i].send);
        s[i].recv_cls = malloc((c->n_recv + 1) * sizeof *s[i].recv_cls);
        s[i].recv_chan = malloc((c->n_recv + 1) * sizeof *s[i].recv_chan);
        s[i].recv_seen = calloc(c->n_recv + 1, sizeof *s[i].recv_seen);
        ok = s[i].start && s[i].end && s[i].send && s[i].recv_cls && s[i].recv_chan &&
             s[i].recv_seen;
    }
    for (uint32_t i = 0; i < n && ok; i++)
        sb_match(g, s, rep, i);
    uint64_t launch_ps[2] = {0, 0};
    if (cfg) {
        launch_ps[0] = core_kernel_launch_ps(cfg, false);
        launch_ps[1] = core_kernel_launch_ps(cfg, true);
    }
    /* Round robin until every class is done; a round that moves nothing forces the first
     * waiting receive. */
    for (bool done = false; ok && !done;) {
        done = true;
        bool moved = false;
        for (uint32_t i = 0; i < n && ok; i++) {
            uint32_t v = sb_advance(s, i, kernel_ps, launch_ps, false);
            ok = v != UINT32_MAX;
            moved |= v > 0;
            done &= s[i].next == s[i].c->n_tasks;
        }
        if (ok && !done && !moved)
            for (uint32_t i = 0; i < n; i++)
                if (s[i].next < s[i].c->n_tasks) {
                    ok = sb_advance(s, i, kernel_ps, launch_ps, true) != UINT32_MAX;
                    break;
                }
    }
    uint64_t b = 0;
    for (uint32_t i = 0; i < n && ok; i++)
        for (uint32_t t = 0; t < s[i].c->n_tasks; t++)
            if (s[i].end[t] > b)
                b = s[i].end[t];
    sb_free(s, n);
    free(rep);
    if (!ok)
        return np_err_set(err, NP_ERR_NOMEM, "search bound: out of memory");
    *bound_ps = b;
    return NP_OK;
}

static bool sb_matrix_op(nn_op op)
{
    return op == NN_OP_MATMUL || op == NN_OP_CONV2D || op == NN_OP_CONV2D_GRAD_INPUT ||
           op == NN_OP_CONV2D_GRAD_WEIGHT || op == NN_OP_ATTENTION ||
           op == NN_OP_ATTENTION_GRAD;
}

uint64_t search_bound_kernel_ps(const run_kspec *ks, const arch_config *cfg)
{
    double compute_ps = 0, memory_ps = 0;
    const nn_tensor *t = ks->node;
    if (t && sb_matrix_op(t->op)) {
        double peak = fmax(run_peak_flops(cfg, NN_BF16),
                           fmax(run_peak_flops(cfg, NN_F16), run_peak_flops(cfg, NN_F32)));
        peak = fmax(peak, run_peak_flops(cfg, t->dtype));
        if (peak > 0)
            compute_ps = (double)nn_node_flops(t) / peak * 1e12;
    }
    double gb_per_s = cfg->chip.hbm_gb_per_s;
    if (cfg->chip.l2_bytes > 0 && cfg->chip.l2_gb_per_s > gb_per_s)
        gb_per_s = cfg->chip.l2_gb_per_s;
    uint64_t bytes = 0;
    for (int i = 0; i < ks->k.n_out; i++)
        bytes += kc_tensor_bytes(&ks->k.out[i]);
    if (gb_per_s > 0)
        memory_ps = (double)bytes / gb_per_s * 1e3; /* bytes / (GB/s) = ns */
    return (uint64_t)floor(fmax(compute_ps, memory_ps));
}
