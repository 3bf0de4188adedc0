/* trace_stats.c — where the time went, from a trace (see trace_stats.h). Interval sets are
 * sorted, merged arrays; every figure is a sum of their lengths. */
#include "trace_stats.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace_map.h"

typedef struct ivl {
    uint64_t a, b;
} ivl;

typedef struct ivls {
    ivl *v;
    size_t n, cap;
} ivls;

static bool ivls_add(ivls *s, uint64_t a, uint64_t b)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        ivl *v = realloc(s->v, cap * sizeof *v);
        if (!v)
            return false;
        s->v = v, s->cap = cap;
    }
    s->v[s->n++] = (ivl){a, b};
    return true;
}

static int ivl_order(const void *x, const void *y)
{
    const ivl *p = x, *q = y;
    return p->a < q->a ? -1 : p->a > q->a ? 1 : p->b < q->b ? -1 : p->b > q->b;
}

/* Sorts and merges s in place; returns the length of the union. */
static uint64_t ivls_merge(ivls *s)
{
    if (s->n)
        qsort(s->v, s->n, sizeof *s->v, ivl_order);
    size_t k = 0;
    uint64_t len = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (k && s->v[i].a <= s->v[k - 1].b) {
            if (s->v[i].b > s->v[k - 1].b)
                s->v[k - 1].b = s->v[i].b;
        } else {
            s->v[k++] = s->v[i];
        }
    }
    s->n = k;
    for (size_t i = 0; i < k; i++)
        len += s->v[i].b - s->v[i].a;
    return len;
}

/* The length of a minus b (both merged). */
static uint64_t ivls_minus(const ivls *a, const ivls *b)
{
    uint64_t len = 0;
    size_t j = 0;
    for (size_t i = 0; i < a->n; i++) {
        uint64_t x = a->v[i].a, y = a->v[i].b;
        while (j < b->n && b->v[j].b <= x)
            j++;
        for (size_t k = j; k < b->n && b->v[k].a < y; k++) {
            if (b->v[k].a > x)
                len += b->v[k].a - x;
            if (b->v[k].b > x)
                x = b->v[k].b;
            if (x >= y)
                break;
        }
        if (y > x)
            len += y - x;
    }
    return len;
}

static bool cat_is(const tdb *db, const tdb_slice *s, const char *const *cats)
{
    const char *c = tdb_str(db, s->cat);
    for (; c && *cats; cats++)
        if (!strcmp(c, *cats))
            return true;
    return false;
}

static const char *const cats_compute[] = {"mxu", "vpu", "compute", NULL};
static const char *const cats_comm[] = {"comm", "collective", NULL};
static const char *const cats_kernel[] = {"kernel", "collective", NULL};
static const char *const cats_span[] = {"kernel", "collective", "layer", "step", NULL};
static const char *const cats_wait[] = {"wait", NULL};

/* A thread's name without its lane suffix "[k]", into buf. */
static const char *base_name(const tdb *db, const tdb_thread *t, char *buf, size_t n)
{
    const char *s = tdb_str(db, t->name);
    if (!s) {
        snprintf(buf, n, "tid %u", t->tid);
        return buf;
    }
    size_t len = strlen(s);
    if (len && s[len - 1] == ']') {
        const char *lb = strrchr(s, '[');
        if (lb)
            len = (size_t)(lb - s);
    }
    snprintf(buf, n, "%.*s", (int)len, s);
    return buf;
}

/* ---- tracks and units ------------------------------------------------------------------------- */

static np_status tracks(const tdb *db, tstats *st, np_err *err)
{
    strtab names = {0};
    u64map of = {0};
    ivls busy = {0}, wait = {0};
    np_status rc = NP_OK;
    /* tracks in order of first thread; threads of one track gathered by (process, base) */
    size_t *track_of = malloc((db->n_threads + 1) * sizeof *track_of);
    st->tracks = calloc(db->n_threads + 1, sizeof *st->tracks);
    if (!track_of || !st->tracks)
        goto oom;
    for (size_t t = 0; t < db->n_threads; t++) {
        char buf[256];
        const tdb_thread *th = &db->threads[t];
        uint32_t id = strtab_intern(&names, base_name(db, th, buf, sizeof buf));
        bool fresh;
        uint64_t *slot = id == UINT32_MAX ? NULL
                                          : u64map_slot(&of, ((uint64_t)th->process << 32 | id) + 1,
                                                        &fresh);
        if (!slot)
            goto oom;
        if (fresh) {
            tstats_track *k = &st->tracks[st->n_tracks];
            k->process = th->process;
            if (!(k->name = strdup(buf)))
                goto oom;
            *slot = st->n_tracks++;
        }
        track_of[t] = *slot;
    }
    for (size_t k = 0; k < st->n_tracks; k++) {
        busy.n = wait.n = 0;
        tstats_track *tk = &st->tracks[k];
        for (size_t t = 0; t < db->n_threads; t++) {
            if (track_of[t] != k)
                continue;
            const tdb_thread *th = &db->threads[t];
            for (size_t i = th->first; i < th->first + th->n; i++) {
                const tdb_slice *s = &db->slices[i];
                if (!ivls_add(&busy, s->start_ps, s->end_ps) ||
                    (cat_is(db, s, cats_wait) && !ivls_add(&wait, s->start_ps, s->end_ps)))
                    goto oom;
                tk->slices++;
            }
        }
        tk->busy_ps = ivls_merge(&busy);
        tk->wait_ps = ivls_merge(&wait);
        tk->util_pct = st->span_ps ? 100.0 * (double)(tk->busy_ps - tk->wait_ps) /
                                         (double)st->span_ps
                                   : 0;
    }
    /* units: kind = after the last '.'; per process the mean, then min/mean/max */
    st->units = calloc(st->n_tracks + 1, sizeof *st->units);
    if (!st->units)
        goto oom;
    strtab kinds = {0};
    for (size_t k = 0; k < st->n_tracks; k++) {
        const char *dot = strrchr(st->tracks[k].name, '.');
        if (dot && dot[1] && strtab_intern(&kinds, dot + 1) == UINT32_MAX) {
            strtab_free(&kinds);
            goto oom;
        }
    }
    for (size_t u = 0; u < kinds.n; u++) {
        tstats_unit *un = &st->units[st->n_units++];
        if (!(un->kind = strdup(kinds.strs[u]))) {
            strtab_free(&kinds);
            goto oom;
        }
        double sum_chips = 0;
        un->min_pct = 1e300, un->max_pct = 0;
        for (size_t p = 0; p < db->n_processes; p++) {
            double sum = 0;
            unsigned n = 0;
            for (size_t k = 0; k < st->n_tracks; k++) {
                const char *dot = strrchr(st->tracks[k].name, '.');
                if (st->tracks[k].process == p && dot && !strcmp(dot + 1, un->kind))
                    sum += st->tracks[k].util_pct, n++;
            }
            if (!n)
                continue;
            double m = sum / n;
            un->chips++;
            sum_chips += m;
            if (m < un->min_pct)
                un->min_pct = m;
            if (m > un->max_pct)
                un->max_pct = m;
        }
        un->mean_pct = un->chips ? sum_chips / un->chips : 0;
        if (!un->chips)
            un->min_pct = 0;
    }
    strtab_free(&kinds);
    goto out;
oom:
    rc = np_err_set(err, NP_ERR_NOMEM, "out of memory computing trace statistics");
out:
    free(track_of);
    free(busy.v);
    free(wait.v);
    strtab_free(&names);
    u64map_free(&of);
    return rc;
}

/* ---- kernels ---------------------------------------------------------------------------------- */

static int kernel_order(const void *x, const void *y)
{
    const tstats_kernel *p = x, *q = y;
    if (p->total_ps != q->total_ps)
        return p->total_ps > q->total_ps ? -1 : 1;
    if (p->name != q->name)
        return p->name < q->name ? -1 : 1;
    return p->cat < q->cat ? -1 : p->cat > q->cat;
}

static np_status kernels(const tdb *db, tstats *st, np_err *err)
{
    u64map of = {0};
    for (size_t i = 0; i < db->n_slices; i++) {
        const tdb_slice *s = &db->slices[i];
        if (!cat_is(db, s, cats_kernel))
            continue;
        bool fresh;
        uint64_t *slot = u64map_slot(&of, ((uint64_t)s->cat << 32 | s->name) + 1, &fresh);
        if (!slot || (fresh && !(st->kernels = realloc(st->kernels, (st->n_kernels + 1) *
                                                                       sizeof *st->kernels)))) {
            u64map_free(&of);
            return np_err_set(err, NP_ERR_NOMEM, "out of memory computing trace statistics");
        }
        if (fresh) {
            st->kernels[st->n_kernels] = (tstats_kernel){s->name, s->cat, 0, 0};
            *slot = st->n_kernels++;
        }
        st->kernels[*slot].count++;
        st->kernels[*slot].total_ps += s->end_ps - s->start_ps;
    }
    u64map_free(&of);
    if (st->n_kernels)
        qsort(st->kernels, st->n_kernels, sizeof *st->kernels, kernel_order);
    return NP_OK;
}

/* ---- communication and stages ----------------------------------------------------------------- */

/* The merged intervals of the slices of process p that pass keep(db, s, arg). */
static bool gather(const tdb *db, size_t p, bool (*keep)(const tdb *, const tdb_slice *, int64_t),
                   int64_t arg, ivls *out)
{
    out->n = 0;
    for (size_t t = 0; t < db->n_threads; t++) {
        const tdb_thread *th = &db->threads[t];
        if (th->process != p)
            continue;
        for (size_t i = th->first; i < th->first + th->n; i++)
            if (keep(db, &db->slices[i], arg) &&
                !ivls_add(out, db->slices[i].start_ps, db->slices[i].end_ps))
                return false;
    }
    return true;
}

static bool keep_compute(const tdb *db, const tdb_slice *s, int64_t arg)
{
    (void)arg;
    return cat_is(db, s, cats_compute);
}

static bool keep_comm_kind(const tdb *db, const tdb_slice *s, int64_t kind)
{
    return cat_is(db, s, cats_comm) && (int64_t)s->kind == kind;
}

/* Work: computing (a compute slice) or communicating (a comm slice) */
static bool keep_work(const tdb *db, const tdb_slice *s, int64_t arg)
{
    (void)arg;
    return cat_is(db, s, cats_compute) || cat_is(db, s, cats_comm);
}

/* The length of [lo, hi) that the merged intervals s cover. */
static uint64_t ivls_within(const ivls *s, uint64_t lo, uint64_t hi)
{
    uint64_t len = 0;
    for (size_t i = 0; i < s->n; i++) {
        uint64_t a = s->v[i].a > lo ? s->v[i].a : lo, b = s->v[i].b < hi ? s->v[i].b : hi;
        len += b > a ? b - a : 0;
    }
    return len;
}

static bool keep_stage(const tdb *db, const tdb_slice *s, int64_t stage)
{
    (void)db;
    return s->stage == stage;
}

static np_status comm_and_stages(const tdb *db, tstats *st, np_err *err)
{
    ivls comp = {0}, cm = {0};
    np_status rc = NP_OK;
    /* the kinds and the stages */
    uint32_t *kinds = NULL;
    int32_t *stages = NULL;
    size_t nk = 0, ns = 0;
    uint64_t win_lo = UINT64_MAX, win_hi = 0; /* the pipeline's window: slices with a stage */
    for (size_t i = 0; i < db->n_slices; i++) {
        const tdb_slice *s = &db->slices[i];
        if (s->stage >= 0) {
            win_lo = s->start_ps < win_lo ? s->start_ps : win_lo;
            win_hi = s->end_ps > win_hi ? s->end_ps : win_hi;
        }
        if (cat_is(db, s, cats_comm)) {
            size_t k = 0;
            while (k < nk && kinds[k] != s->kind)
                k++;
            if (k == nk) {
                uint32_t *v = realloc(kinds, (nk + 1) * sizeof *v);
                if (!v)
                    goto oom;
                kinds = v, kinds[nk++] = s->kind;
            }
        }
        if (s->stage >= 0) {
            size_t k = 0;
            while (k < ns && stages[k] != s->stage)
                k++;
            if (k == ns) {
                int32_t *v = realloc(stages, (ns + 1) * sizeof *v);
                if (!v)
                    goto oom;
                stages = v, stages[ns++] = s->stage;
            }
        }
    }
    if (!(st->comm = calloc(nk + 1, sizeof *st->comm)) ||
        !(st->stages = calloc(ns + 1, sizeof *st->stages)))
        goto oom;
    for (size_t k = 0; k < nk; k++) {
        tstats_comm *c = &st->comm[st->n_comm++];
        c->kind = kinds[k];
        for (size_t p = 0; p < db->n_processes; p++) {
            if (!gather(db, p, keep_comm_kind, kinds[k], &cm))
                goto oom;
            if (!cm.n)
                continue;
            uint64_t total = ivls_merge(&cm);
            if (!gather(db, p, keep_compute, 0, &comp))
                goto oom;
            ivls_merge(&comp);
            c->chips++;
            c->total_ps += total;
            c->exposed_ps += ivls_minus(&cm, &comp);
        }
    }
    /* stages in increasing order */
    for (size_t i = 1; i < ns; i++)
        for (size_t j = i; j && stages[j - 1] > stages[j]; j--) {
            int32_t x = stages[j];
            stages[j] = stages[j - 1], stages[j - 1] = x;
        }
    double sum_pct = 0, sum_ratio = 0;
    uint64_t win = win_hi > win_lo ? win_hi - win_lo : 0;
    for (size_t k = 0; k < ns; k++) {
        tstats_stage *g = &st->stages[st->n_stages++];
        g->stage = stages[k];
        double pct = 0, ratio = 0;
        int32_t mb_max = -1;
        for (size_t p = 0; p < db->n_processes; p++) {
            if (!gather(db, p, keep_stage, stages[k], &cm))
                goto oom;
            if (!cm.n)
                continue;
            for (size_t t = 0; t < db->n_threads; t++) /* micro-batches: distinct mb values */
                if (db->threads[t].process == p)
                    for (size_t i = db->threads[t].first; i < db->threads[t].first + db->threads[t].n; i++)
                        if (db->slices[i].stage == stages[k] && db->slices[i].mb > mb_max)
                            mb_max = db->slices[i].mb;
            /* the chip's work inside the window: its compute and its communication; the
             * rest waits for a stage's input (exposed communication is not bubble) */
            if (!gather(db, p, keep_work, 0, &cm))
                goto oom;
            ivls_merge(&cm);
            uint64_t busy = ivls_within(&cm, win_lo, win_hi), idle = win > busy ? win - busy : 0;
            g->chips++;
            g->busy_ps += busy, g->idle_ps += idle;
            pct += win ? 100.0 * (double)idle / (double)win : 0;
            ratio += busy ? (double)idle / (double)busy : 0;
        }
        g->microbatches = (uint32_t)(mb_max + 1);
        g->bubble_pct = g->chips ? pct / g->chips : 0;
        g->bubble_ratio = g->chips ? ratio / g->chips : 0;
        sum_pct += g->bubble_pct, sum_ratio += g->bubble_ratio;
    }
    st->bubble_pct = ns ? sum_pct / (double)ns : -1;
    st->bubble_ratio = ns ? sum_ratio / (double)ns : -1;
    goto out;
oom:
    rc = np_err_set(err, NP_ERR_NOMEM, "out of memory computing trace statistics");
out:
    free(kinds);
    free(stages);
    free(comp.v);
    free(cm.v);
    return rc;
}

/* ---- the critical path ------------------------------------------------------------------------ */

/* The path's nodes: per thread its top-level work slices (not spans, not nested), in time
 * order, and the flows into each slice. */
typedef struct path_index {
    size_t *nodes;      /* slice indices, thread by thread */
    size_t *first, *n;  /* per thread */
    size_t *in_first, *in_n, *in_src; /* flows into each slice: sources (CSR by target) */
} path_index;


static np_status critical_path(const tdb *db, tstats *st, np_err *err)
{
    path_index x = {0};
    np_status rc = NP_OK;
    size_t nt = db->n_threads, ns = db->n_slices;
    x.nodes = malloc((ns + 1) * sizeof *x.nodes);
    x.first = calloc(nt + 1, sizeof *x.first);
    x.n = calloc(nt + 1, sizeof *x.n);
    x.in_first = calloc(ns + 2, sizeof *x.in_first);
    x.in_n = calloc(ns + 1, sizeof *x.in_n);
    x.in_src = malloc((db->n_flows + 1) * sizeof *x.in_src);
    size_t *pos = malloc((ns + 1) * sizeof *pos); /* a node's place in x.nodes */
    bool *seen = calloc(ns + 1, sizeof *seen);
    if (!seen || !x.nodes || !x.first || !x.n || !x.in_first || !x.in_n || !x.in_src || !pos) {
        rc = np_err_set(err, NP_ERR_NOMEM, "out of memory computing the critical path");
        goto out;
    }
    size_t m = 0, last = SIZE_MAX;
    for (size_t t = 0; t < nt; t++) {
        const tdb_thread *th = &db->threads[t];
        x.first[t] = m;
        uint64_t top_end = 0;
        for (size_t i = th->first; i < th->first + th->n; i++) {
            pos[i] = SIZE_MAX;
            if (cat_is(db, &db->slices[i], cats_span) || cat_is(db, &db->slices[i], cats_wait))
                continue;
            const tdb_slice *s = &db->slices[i];
            if (x.n[t] && s->start_ps < top_end)
                continue; /* nested in the previous node */
            top_end = s->end_ps;
            pos[i] = m;
            x.nodes[m++] = i;
            x.n[t]++;
            if (last == SIZE_MAX || s->end_ps > db->slices[last].end_ps ||
                (s->end_ps == db->slices[last].end_ps && s->start_ps < db->slices[last].start_ps))
                last = i;
        }
    }
    for (size_t f = 0; f < db->n_flows; f++)
        x.in_n[db->flows[f].to]++;
    for (size_t i = 0; i < ns; i++)
        x.in_first[i + 1] = x.in_first[i] + x.in_n[i];
    memset(x.in_n, 0, ns * sizeof *x.in_n);
    for (size_t f = 0; f < db->n_flows; f++) {
        size_t to = db->flows[f].to;
        x.in_src[x.in_first[to] + x.in_n[to]++] = db->flows[f].from;
    }
    /* walk back from the node that ends last; each node once */
    size_t cap = 0;
    for (size_t v = last; v != SIZE_MAX;) {
        if (st->n_path == cap) {
            cap = cap ? 2 * cap : 64;
            tstats_step *p = realloc(st->path, cap * sizeof *p);
            if (!p) {
                rc = np_err_set(err, NP_ERR_NOMEM, "out of memory computing the critical path");
                goto out;
            }
            st->path = p;
        }
        st->path[st->n_path++] = (tstats_step){v, 0};
        seen[v] = true;
        const tdb_slice *s = &db->slices[v];
        size_t best = SIZE_MAX;
        uint64_t best_t = 0;
        /* the source of a flow into it: it could not end before that source (a receive
         * posted early waits for its send) */
        for (size_t k = x.in_first[v]; k < x.in_first[v] + x.in_n[v]; k++) {
            size_t u = x.in_src[k];
            if (pos[u] == SIZE_MAX || seen[u] || db->slices[u].start_ps >= s->end_ps)
                continue;
            if (best == SIZE_MAX || db->slices[u].end_ps > best_t)
                best = u, best_t = db->slices[u].end_ps;
        }
        /* the node before it on its thread */
        size_t p = pos[v], t = s->thread;
        if (p != SIZE_MAX && p > x.first[t] && !seen[x.nodes[p - 1]]) {
            size_t u = x.nodes[p - 1];
            if (best == SIZE_MAX || db->slices[u].end_ps > best_t)
                best = u, best_t = db->slices[u].end_ps;
        }
        /* after a gap: what ended last on its chip before it started */
        if (best == SIZE_MAX || best_t < s->start_ps) {
            for (size_t t2 = 0; t2 < nt; t2++) {
                if (db->threads[t2].process != db->threads[t].process || !x.n[t2])
                    continue;
                size_t lo = x.first[t2], hi = x.first[t2] + x.n[t2]; /* last end <= start */
                while (lo < hi) {
                    size_t mid = lo + (hi - lo) / 2;
                    if (db->slices[x.nodes[mid]].end_ps <= s->start_ps)
                        lo = mid + 1;
                    else
                        hi = mid;
                }
                if (lo == x.first[t2])
                    continue;
                size_t u = x.nodes[lo - 1];
                if (!seen[u] && (best == SIZE_MAX || db->slices[u].end_ps > best_t))
                    best = u, best_t = db->slices[u].end_ps;
            }
        }
        v = best;
    }
    /* first step first; idle = the gap before each step */
    for (size_t i = 0, j = st->n_path ? st->n_path - 1 : 0; i < j; i++, j--) {
        tstats_step tmp = st->path[i];
        st->path[i] = st->path[j], st->path[j] = tmp;
    }
    for (size_t i = 1; i < st->n_path; i++) {
        uint64_t prev_end = db->slices[st->path[i - 1].slice].end_ps,
                 start = db->slices[st->path[i].slice].start_ps;
        st->path[i].idle_before_ps = start > prev_end ? start - prev_end : 0;
        st->path_idle_ps += st->path[i].idle_before_ps;
    }
    if (st->n_path)
        st->path_ps = db->slices[st->path[st->n_path - 1].slice].end_ps -
                      db->slices[st->path[0].slice].start_ps;
out:
    free(x.nodes);
    free(x.first);
    free(x.n);
    free(x.in_first);
    free(x.in_n);
    free(x.in_src);
    free(pos);
    free(seen);
    return rc;
}

/* The path's steps grouped by name, longest first. */
static int by_name(const void *a, const void *b)
{
    const tstats_kernel *x = a, *y = b;
    return x->name < y->name ? -1 : x->name > y->name;
}

static int by_total(const void *a, const void *b)
{
    const tstats_kernel *x = a, *y = b;
    if (x->total_ps != y->total_ps)
        return x->total_ps > y->total_ps ? -1 : 1;
    return x->name < y->name ? -1 : x->name > y->name; /* deterministic */
}

static np_status path_names(const tdb *db, tstats *st, np_err *err)
{
    if (!st->n_path)
        return NP_OK;
    tstats_kernel *v = calloc(st->n_path, sizeof *v);
    if (!v)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < st->n_path; i++) {
        const tdb_slice *sl = &db->slices[st->path[i].slice];
        v[i] = (tstats_kernel){sl->name, sl->cat, 1, sl->end_ps - sl->start_ps};
    }
    qsort(v, st->n_path, sizeof *v, by_name);
    size_t n = 0;
    for (size_t i = 0; i < st->n_path; i++) {
        if (n && v[n - 1].name == v[i].name) {
            v[n - 1].count++;
            v[n - 1].total_ps += v[i].total_ps;
        } else {
            v[n++] = v[i];
        }
    }
    qsort(v, n, sizeof *v, by_total);
    st->path_names = v;
    st->n_path_names = n;
    return NP_OK;
}

/* ---- all together ----------------------------------------------------------------------------- */

np_status tstats_compute(const tdb *db, tstats *out, np_err *err)
{
    tstats st = {0};
    st.span_ps = db->t_end_ps - db->t_begin_ps;
    np_status rc = tracks(db, &st, err);
    if (rc == NP_OK)
        rc = kernels(db, &st, err);
    if (rc == NP_OK)
        rc = comm_and_stages(db, &st, err);
    if (rc == NP_OK)
        rc = critical_path(db, &st, err);
    if (rc == NP_OK)
        rc = path_names(db, &st, err);
    if (rc != NP_OK) {
        tstats_free(&st);
        return rc;
    }
    *out = st;
    return NP_OK;
}

void tstats_free(tstats *s)
{
    for (size_t i = 0; i < s->n_tracks; i++)
        free(s->tracks[i].name);
    for (size_t i = 0; i < s->n_units; i++)
        free(s->units[i].kind);
    free(s->tracks);
    free(s->units);
    free(s->kernels);
    free(s->comm);
    free(s->stages);
    free(s->path);
    free(s->path_names);
    memset(s, 0, sizeof *s);
}

static double pct(uint64_t part, uint64_t whole)
{
    return whole ? 100.0 * (double)part / (double)whole : 0;
}

json_t *tstats_json(const tdb *db, const tstats *s, size_t top, size_t max_path)
{
    json_t *j = json_object(), *tracks = json_array(), *units = json_array(),
           *kern = json_array(), *comm = json_array(), *stages = json_array(),
           *path = json_array(), *cats = json_object();
    if (!j || !tracks || !units || !kern || !comm || !stages || !path || !cats)
        goto oom;
    bool ok = true;
    for (size_t i = 0; i < s->n_tracks; i++) {
        const tstats_track *t = &s->tracks[i];
        const char *pn = tdb_str(db, db->processes[t->process].name);
        ok &= !json_array_append_new(
            tracks, json_pack("{s:s?, s:I, s:s, s:I, s:I, s:I, s:f}", "process", pn, "pid",
                              (json_int_t)db->processes[t->process].pid, "track", t->name,
                              "slices", (json_int_t)t->slices, "busy_ps", (json_int_t)t->busy_ps,
                              "wait_ps", (json_int_t)t->wait_ps, "util_pct", t->util_pct));
    }
    for (size_t i = 0; i < s->n_units; i++) {
        const tstats_unit *u = &s->units[i];
        ok &= !json_array_append_new(
            units, json_pack("{s:s, s:I, s:f, s:f, s:f}", "kind", u->kind, "chips",
                             (json_int_t)u->chips, "min_util_pct", u->min_pct, "mean_util_pct",
                             u->mean_pct, "max_util_pct", u->max_pct));
    }
    uint64_t ktotal = 0;
    for (size_t i = 0; i < s->n_kernels; i++)
        ktotal += s->kernels[i].total_ps;
    for (size_t i = 0; i < s->n_kernels && i < top; i++) {
        const tstats_kernel *k = &s->kernels[i];
        ok &= !json_array_append_new(
            kern, json_pack("{s:s, s:I, s:I, s:I, s:f}", "name", tdb_str(db, k->name), "count",
                            (json_int_t)k->count, "total_ps", (json_int_t)k->total_ps, "mean_ps",
                            (json_int_t)(k->total_ps / k->count), "pct", pct(k->total_ps, ktotal)));
    }
    for (size_t i = 0; i < s->n_comm; i++) {
        const tstats_comm *c = &s->comm[i];
        const char *kind = c->kind == TDB_NONE ? "comm" : tdb_str(db, c->kind);
        double n = c->chips ? (double)c->chips : 1;
        ok &= !json_array_append_new(
            comm, json_pack("{s:s, s:I, s:f, s:f, s:f, s:f}", "kind", kind, "chips",
                            (json_int_t)c->chips, "total_s", (double)c->total_ps / n * 1e-12,
                            "exposed_s", (double)c->exposed_ps / n * 1e-12, "overlapped_s",
                            (double)(c->total_ps - c->exposed_ps) / n * 1e-12, "exposed_pct",
                            pct(c->exposed_ps, c->total_ps)));
    }
    for (size_t i = 0; i < s->n_stages; i++) {
        const tstats_stage *g = &s->stages[i];
        ok &= !json_array_append_new(
            stages, json_pack("{s:i, s:I, s:I, s:I, s:I, s:f, s:f}", "stage", (int)g->stage,
                              "chips", (json_int_t)g->chips, "microbatches",
                              (json_int_t)g->microbatches, "busy_ps", (json_int_t)g->busy_ps,
                              "idle_ps", (json_int_t)g->idle_ps, "bubble_pct", g->bubble_pct,
                              "bubble_ratio", g->bubble_ratio));
    }
    for (size_t i = 0; i < s->n_path; i++) {
        const tdb_slice *sl = &db->slices[s->path[i].slice];
        const char *c = tdb_str(db, sl->cat);
        json_t *v = json_object_get(cats, c ? c : "");
        uint64_t prev = v ? (uint64_t)json_integer_value(v) : 0;
        ok &= !json_object_set_new(cats, c ? c : "", json_integer((json_int_t)(prev + sl->end_ps -
                                                                              sl->start_ps)));
        if (i >= max_path)
            continue;
        char label[256];
        tdb_thread_label(db, &db->threads[sl->thread], label, sizeof label);
        ok &= !json_array_append_new(
            path, json_pack("{s:s, s:s?, s:s, s:I, s:I, s:I}", "track", label, "name",
                            tdb_str(db, sl->name), "cat", c ? c : "", "start_ps",
                            (json_int_t)sl->start_ps, "end_ps", (json_int_t)sl->end_ps,
                            "idle_before_ps", (json_int_t)s->path[i].idle_before_ps));
    }
    json_t *names = json_array();
    for (size_t i = 0; names && i < s->n_path_names && i < top; i++) {
        const tstats_kernel *k = &s->path_names[i];
        ok &= !json_array_append_new(
            names, json_pack("{s:s?, s:I, s:I, s:f}", "name", tdb_str(db, k->name), "steps",
                             (json_int_t)k->count, "total_ps", (json_int_t)k->total_ps, "pct",
                             pct(k->total_ps, s->path_ps)));
    }
    json_t *cp = names ? json_pack("{s:I, s:I, s:I, s:o, s:o, s:o}", "length_ps",
                                   (json_int_t)s->path_ps, "idle_ps",
                                   (json_int_t)s->path_idle_ps, "steps", (json_int_t)s->n_path,
                                   "by_cat_ps", cats, "by_name", names, "path", path)
                       : NULL;
    cats = path = NULL;
    ok &= cp && !json_object_set_new(j, "span_ps", json_integer((json_int_t)s->span_ps));
    ok &= !json_object_set_new(j, "begin_ps", json_integer((json_int_t)db->t_begin_ps));
    ok &= !json_object_set_new(j, "events", json_integer((json_int_t)db->events));
    ok &= !json_object_set_new(j, "slices", json_integer((json_int_t)db->n_slices));
    ok &= !json_object_set_new(j, "problems", json_integer((json_int_t)db->problems));
    ok &= !json_object_set_new(j, "tracks", tracks);
    ok &= !json_object_set_new(j, "units", units);
    ok &= !json_object_set_new(j, "kernels", kern);
    ok &= !json_object_set_new(j, "comm", comm);
    ok &= !json_object_set_new(j, "critical_path", cp);
    ok &= !json_object_set_new(j, "stages", stages);
    ok &= !json_object_set_new(j, "bubble_pct", s->n_stages ? json_real(s->bubble_pct) : json_null());
    ok &= !json_object_set_new(j, "bubble_ratio",
                               s->n_stages ? json_real(s->bubble_ratio) : json_null());
    if (!ok) {
        json_decref(j);
        return NULL;
    }
    return j;
oom:
    json_decref(j);
    json_decref(tracks);
    json_decref(units);
    json_decref(kern);
    json_decref(comm);
    json_decref(stages);
    json_decref(path);
    json_decref(cats);
    return NULL;
}
