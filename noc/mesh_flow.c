/* mesh_flow.c — max-min fair fluid flows on links of given capacities (see mesh_flow.h).
 *
 * State: the active flows in start order (a dense array, so ties and iteration are
 * deterministic), each with its links, remaining flits, cap, rate and bottleneck; per link,
 * its capacity, how many active flows use it and the flits bound by it. Re-rating is water
 * filling over the links in use, done lazily: starts and ends mark the rates stale, and the
 * next query or advance past the current time recomputes them once. */
#include "mesh_flow.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

typedef struct mf_flow {
    uint64_t user;
    double rem;  /* flits not yet sent */
    double rate; /* flits per cycle */
    double cap;  /* its own limit (INFINITY: none) */
    uint32_t *links;
    uint32_t n_links;
    uint32_t bound; /* what fixed its rate: a link, or MESH_FLOW_CAP */
    uint8_t klass;  /* 1: its flits count in the bound accounts */
    uint8_t fixed;  /* water filling scratch */
} mf_flow;

struct mesh_flow {
    uint32_t n_links, cap_links;
    double t; /* time every flow's rem refers to */
    bool stale; /* the flows changed since the rates were computed */
    mf_flow *flows;
    uint32_t n, cap;
    double *capacity;   /* per link, flits per cycle */
    double *bound;      /* per link: flits moved by the flows it fixed */
    double bound_cap;   /* flits moved by flows held at their own caps */
    double moved[2];    /* flits moved, per class */
    uint32_t *users;    /* per link: active flows on it */
    double *room;       /* water filling scratch: capacity left per link */
    uint32_t *left;     /* water filling scratch: unfixed flows per link */
    uint32_t *used;     /* water filling scratch: links in use */
};

/* Grows the per-link arrays to hold n links. */
static bool mf_room_for(mesh_flow *f, uint32_t n)
{
    if (n <= f->cap_links)
        return true;
    uint32_t c = f->cap_links ? f->cap_links : 16;
    while (c < n)
        c *= 2;
    double *capa = realloc(f->capacity, c * sizeof *capa);
    if (capa)
        f->capacity = capa;
    double *bound = realloc(f->bound, c * sizeof *bound);
    if (bound)
        f->bound = bound;
    uint32_t *users = realloc(f->users, c * sizeof *users);
    if (users)
        f->users = users;
    double *room = realloc(f->room, c * sizeof *room);
    if (room)
        f->room = room;
    uint32_t *left = realloc(f->left, c * sizeof *left);
    if (left)
        f->left = left;
    uint32_t *used = realloc(f->used, c * sizeof *used);
    if (used)
        f->used = used;
    if (!capa || !bound || !users || !room || !left || !used)
        return false;
    for (uint32_t l = f->cap_links; l < c; l++) {
        f->capacity[l] = 1.0;
        f->bound[l] = 0;
        f->users[l] = 0;
        f->left[l] = 0;
    }
    f->cap_links = c;
    return true;
}

np_status mesh_flow_create(uint32_t n_links, mesh_flow **out, np_err *err)
{
    mesh_flow *f = calloc(1, sizeof *f);
    if (!f || !mf_room_for(f, n_links ? n_links : 1)) {
        mesh_flow_free(f);
        return np_err_set(err, NP_ERR_NOMEM, "out of memory creating the mesh's flow model");
    }
    f->n_links = n_links;
    *out = f;
    return NP_OK;
}

void mesh_flow_free(mesh_flow *f)
{
    if (!f)
        return;
    for (uint32_t i = 0; i < f->n; i++)
        free(f->flows[i].links);
    free(f->flows);
    free(f->capacity);
    free(f->bound);
    free(f->users);
    free(f->room);
    free(f->left);
    free(f->used);
    free(f);
}

np_status mesh_flow_add_link(mesh_flow *f, double capacity, uint32_t *id, np_err *err)
{
    if (!mf_room_for(f, f->n_links + 1))
        return np_err_set(err, NP_ERR_NOMEM, "out of memory adding a link to the flow model");
    *id = f->n_links++;
    f->capacity[*id] = capacity;
    return NP_OK;
}

/* Whether a is below b by more than rounding (ties resolve by the callers' rules). */
static bool mf_below(double a, double b) { return a < b - 1e-12 * fabs(b); }

/* Water filling over every active flow. The tightest constraint fixes its flows: the link of
 * least capacity per unfixed flow (on ties the highest id: links added after the mesh's own,
 * such as memory controllers, name the bottleneck before the mesh does), or a flow's cap when
 * it is below that. */
static void mf_rerate(mesh_flow *f)
{
    f->stale = false;
    uint32_t n_used = 0, unfixed = f->n;
    for (uint32_t i = 0; i < f->n; i++) {
        mf_flow *w = &f->flows[i];
        w->fixed = 0;
        for (uint32_t k = 0; k < w->n_links; k++) {
            uint32_t l = w->links[k];
            if (f->left[l] == 0) {
                f->used[n_used++] = l;
                f->room[l] = f->capacity[l];
            }
            f->left[l]++;
        }
    }
    while (unfixed) {
        uint32_t best = UINT32_MAX;
        double share = INFINITY;
        for (uint32_t k = 0; k < n_used; k++) {
            uint32_t l = f->used[k];
            if (!f->left[l])
                continue;
            double s = f->room[l] / f->left[l];
            if (mf_below(s, share) || (!mf_below(share, s) && (best == UINT32_MAX || l > best))) {
                share = s;
                best = l;
            }
        }
        double cap = INFINITY;
        for (uint32_t i = 0; i < f->n; i++)
            if (!f->flows[i].fixed && f->flows[i].cap < cap)
                cap = f->flows[i].cap;
        bool by_cap = mf_below(cap, share) || (best == UINT32_MAX && isfinite(cap));
        if (by_cap)
            share = cap;
        else if (best == UINT32_MAX)
            break;
        if (share < 0)
            share = 0;
        for (uint32_t i = 0; i < f->n; i++) {
            mf_flow *w = &f->flows[i];
            if (w->fixed)
                continue;
            bool on = false;
            if (by_cap)
                on = w->cap == cap;
            else
                for (uint32_t k = 0; k < w->n_links && !on; k++)
                    on = w->links[k] == best;
            if (!on)
                continue;
            w->fixed = 1;
            w->rate = share;
            w->bound = by_cap ? MESH_FLOW_CAP : best;
            unfixed--;
            for (uint32_t k = 0; k < w->n_links; k++) {
                f->room[w->links[k]] -= share;
                f->left[w->links[k]]--;
            }
        }
    }
    for (uint32_t i = 0; i < f->n; i++)
        if (!f->flows[i].fixed) { /* no link and no cap: nothing limits it */
            f->flows[i].rate = INFINITY;
            f->flows[i].bound = MESH_FLOW_CAP;
        }
    for (uint32_t k = 0; k < n_used; k++)
        f->left[f->used[k]] = 0;
}

static void mf_fresh(mesh_flow *f)
{
    if (f->stale)
        mf_rerate(f);
}

/* Brings every flow's remaining flits to time t. */
static void mf_to(mesh_flow *f, double t)
{
    double dt = t - f->t;
    if (dt > 0 && f->n) {
        mf_fresh(f);
        for (uint32_t i = 0; i < f->n; i++) {
            mf_flow *w = &f->flows[i];
            double moved = w->rate * dt;
            if (moved > w->rem)
                moved = w->rem > 0 ? w->rem : 0;
            w->rem -= w->rate * dt;
            f->moved[w->klass] += moved;
            if (!w->klass)
                continue;
            if (w->bound == MESH_FLOW_CAP)
                f->bound_cap += moved;
            else
                f->bound[w->bound] += moved;
        }
    }
    if (t > f->t)
        f->t = t;
}

np_status mesh_flow_start(mesh_flow *f, double t, const uint32_t *links, uint32_t n,
                          double flits, double cap, unsigned klass, uint64_t user, np_err *err)
{
    if (f->n == f->cap) {
        uint32_t c = f->cap ? 2 * f->cap : 16;
        mf_flow *v = realloc(f->flows, (size_t)c * sizeof *v);
        if (!v)
            return np_err_set(err, NP_ERR_NOMEM, "out of memory starting a flow");
        f->flows = v;
        f->cap = c;
    }
    uint32_t *l = malloc((n ? n : 1) * sizeof *l);
    if (!l)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory starting a flow");
    memcpy(l, links, n * sizeof *l);
    mf_to(f, t);
    f->flows[f->n++] = (mf_flow){.user = user, .rem = flits, .rate = 0, .cap = cap,
                                 .links = l, .n_links = n, .bound = MESH_FLOW_CAP,
                                 .klass = (uint8_t)(klass != 0)};
    for (uint32_t k = 0; k < n; k++)
        f->users[l[k]]++;
    f->stale = true;
    return NP_OK;
}

double mesh_flow_next_end(mesh_flow *f)
{
    mf_fresh(f);
    double best = INFINITY;
    for (uint32_t i = 0; i < f->n; i++) {
        const mf_flow *w = &f->flows[i];
        double te = w->rem <= 0 ? f->t : (w->rate > 0 ? f->t + w->rem / w->rate : INFINITY);
        if (te < best)
            best = te;
    }
    return best;
}

void mesh_flow_advance(mesh_flow *f, double t, mesh_flow_end_fn fn, void *ctx)
{
    for (;;) {
        double te = mesh_flow_next_end(f);
        if (!(te <= t)) {
            mf_to(f, t);
            return;
        }
        mf_to(f, te);
        /* end every flow due now (within rounding), keeping the others in start order */
        uint32_t kept = 0, n = f->n;
        uint64_t ended_users[64];
        uint32_t n_ended = 0;
        for (uint32_t i = 0; i < n; i++) {
            mf_flow w = f->flows[i];
            bool done = w.rem <= 1e-9 * (1.0 + fabs(te)) ||
                        (w.rate > 0 && f->t + w.rem / w.rate <= te);
            if (done && n_ended < 64) {
                for (uint32_t k = 0; k < w.n_links; k++)
                    f->users[w.links[k]]--;
                free(w.links);
                ended_users[n_ended++] = w.user;
            } else {
                f->flows[kept++] = w;
            }
        }
        f->n = kept;
        f->stale = true;
        for (uint32_t i = 0; i < n_ended; i++)
            fn(ctx, ended_users[i], te);
    }
}

uint32_t mesh_flow_active(const mesh_flow *f) { return f->n; }

double mesh_flow_rate(mesh_flow *f, uint32_t i)
{
    mf_fresh(f);
    return i < f->n ? f->flows[i].rate : 0;
}

uint32_t mesh_flow_bottleneck(mesh_flow *f, uint32_t i)
{
    mf_fresh(f);
    return i < f->n ? f->flows[i].bound : MESH_FLOW_CAP;
}

double mesh_flow_bound_flits(const mesh_flow *f, uint32_t link)
{
    return link == MESH_FLOW_CAP ? f->bound_cap : link < f->n_links ? f->bound[link] : 0;
}

double mesh_flow_moved_flits(const mesh_flow *f, unsigned klass)
{
    return f->moved[klass != 0];
}
