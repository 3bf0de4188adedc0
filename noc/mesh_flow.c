/* mesh_flow.c — max-min fair fluid flows on unit-capacity links (see mesh_flow.h).
 *
 * State: the active flows in start order (a dense array, so ties and iteration are
 * deterministic), each with its links, remaining flits and rate; per link, how many active
 * flows use it. Re-rating is water filling over the links in use. */
#include "mesh_flow.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

typedef struct mf_flow {
    uint64_t user;
    double rem;  /* flits not yet sent */
    double rate; /* flits per cycle */
    uint32_t *links;
    uint32_t n_links;
    uint8_t fixed; /* water filling scratch */
} mf_flow;

struct mesh_flow {
    uint32_t n_links;
    double t; /* time every flow's rem refers to */
    mf_flow *flows;
    uint32_t n, cap;
    uint32_t *users; /* per link: active flows on it */
    double *room;    /* water filling scratch: capacity left per link */
    uint32_t *left;  /* water filling scratch: unfixed flows per link */
    uint32_t *used;  /* water filling scratch: links in use */
};

np_status mesh_flow_create(uint32_t n_links, mesh_flow **out, np_err *err)
{
    mesh_flow *f = calloc(1, sizeof *f);
    if (f) {
        f->n_links = n_links;
        f->users = calloc(n_links ? n_links : 1, sizeof *f->users);
        f->room = calloc(n_links ? n_links : 1, sizeof *f->room);
        f->left = calloc(n_links ? n_links : 1, sizeof *f->left);
        f->used = calloc(n_links ? n_links : 1, sizeof *f->used);
    }
    if (!f || !f->users || !f->room || !f->left || !f->used) {
        mesh_flow_free(f);
        return np_err_set(err, NP_ERR_NOMEM, "out of memory creating the mesh's flow model");
    }
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
    free(f->users);
    free(f->room);
    free(f->left);
    free(f->used);
    free(f);
}

/* Water filling over every active flow. */
static void mf_rerate(mesh_flow *f)
{
    uint32_t n_used = 0, unfixed = f->n;
    for (uint32_t i = 0; i < f->n; i++) {
        mf_flow *w = &f->flows[i];
        w->fixed = 0;
        for (uint32_t k = 0; k < w->n_links; k++) {
            uint32_t l = w->links[k];
            if (f->left[l] == 0) {
                f->used[n_used++] = l;
                f->room[l] = 1.0;
            }
            f->left[l]++;
        }
    }
    while (unfixed) {
        /* the bottleneck: the smallest share among links with unfixed flows (lowest index on
         * ties, for determinism) */
        uint32_t best = UINT32_MAX;
        double share = INFINITY;
        for (uint32_t k = 0; k < n_used; k++) {
            uint32_t l = f->used[k];
            if (!f->left[l])
                continue;
            double s = f->room[l] / f->left[l];
            if (s < share || (s == share && l < best)) {
                share = s;
                best = l;
            }
        }
        if (best == UINT32_MAX)
            break;
        if (share < 0)
            share = 0;
        for (uint32_t i = 0; i < f->n; i++) {
            mf_flow *w = &f->flows[i];
            if (w->fixed)
                continue;
            bool on = false;
            for (uint32_t k = 0; k < w->n_links && !on; k++)
                on = w->links[k] == best;
            if (!on)
                continue;
            w->fixed = 1;
            w->rate = share;
            unfixed--;
            for (uint32_t k = 0; k < w->n_links; k++) {
                f->room[w->links[k]] -= share;
                f->left[w->links[k]]--;
            }
        }
    }
    for (uint32_t k = 0; k < n_used; k++)
        f->left[f->used[k]] = 0;
}

/* Brings every flow's remaining flits to time t. */
static void mf_to(mesh_flow *f, double t)
{
    double dt = t - f->t;
    if (dt > 0)
        for (uint32_t i = 0; i < f->n; i++)
            f->flows[i].rem -= f->flows[i].rate * dt;
    if (t > f->t)
        f->t = t;
}

np_status mesh_flow_start(mesh_flow *f, double t, const uint32_t *links, uint32_t n,
                          double flits, uint64_t user, np_err *err)
{
    if (f->n == f->cap) {
        uint32_t cap = f->cap ? 2 * f->cap : 16;
        mf_flow *v = realloc(f->flows, (size_t)cap * sizeof *v);
        if (!v)
            return np_err_set(err, NP_ERR_NOMEM, "out of memory starting a flow");
        f->flows = v;
        f->cap = cap;
    }
    uint32_t *l = malloc((n ? n : 1) * sizeof *l);
    if (!l)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory starting a flow");
    memcpy(l, links, n * sizeof *l);
    mf_to(f, t);
    f->flows[f->n++] = (mf_flow){.user = user, .rem = flits, .rate = 0, .links = l,
                                 .n_links = n};
    for (uint32_t k = 0; k < n; k++)
        f->users[l[k]]++;
    mf_rerate(f);
    return NP_OK;
}

double mesh_flow_next_end(const mesh_flow *f)
{
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
        mf_rerate(f);
        for (uint32_t i = 0; i < n_ended; i++)
            fn(ctx, ended_users[i], te);
    }
}

uint32_t mesh_flow_active(const mesh_flow *f) { return f->n; }

double mesh_flow_rate(const mesh_flow *f, uint32_t i) { return i < f->n ? f->flows[i].rate : 0; }
