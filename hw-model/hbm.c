/* hbm.c — processor-sharing bandwidth server (see hbm.h). */
#include "hbm.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>

typedef struct hbm_xfer {
    double remaining; /* bytes still to move */
    double cap;       /* bytes/ps limit of this transfer */
    hbm_done_fn done;
    void *ctx;
    uint64_t arg;
    double rate;      /* bytes/ps while streaming, set by hbm_rates */
    bool streaming;   /* false while in its latency */
    bool live;
} hbm_xfer;

struct hbm {
    evq *q;
    double bw;      /* bytes/ps */
    uint64_t lat_ps;
    hbm_xfer *x;    /* slots; dead slots are reused */
    size_t n, cap;
    size_t n_streaming, n_live;
    uint64_t t_update;    /* remaining bytes are exact as of this time */
    evq_handle next;      /* the pending completion event */
    np_err err;
};

static void hbm_finish(evq *q, void *ctx, uint64_t arg);

np_status hbm_create(evq *q, double bw_bytes_per_ps, uint64_t lat_ps, hbm **out, np_err *err)
{
    *out = NULL;
    if (!(bw_bytes_per_ps > 0))
        return np_err_set(err, NP_ERR_RANGE, "HBM bandwidth must be > 0");
    hbm *h = calloc(1, sizeof *h);
    if (!h)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory creating the HBM model");
    h->q = q;
    h->bw = bw_bytes_per_ps;
    h->lat_ps = lat_ps;
    h->next = EVQ_HANDLE_NONE;
    *out = h;
    return NP_OK;
}

void hbm_free(hbm *h)
{
    if (!h)
        return;
    free(h->x);
    free(h);
}

uint64_t hbm_active(const hbm *h) { return h->n_live; }

np_status hbm_error(const hbm *h, np_err *err)
{
    if (h->err.status != NP_OK)
        *err = h->err;
    return h->err.status;
}

/* Max-min fair shares: transfers capped below an equal share get their cap, and what they
 * leave is shared equally by the others. Called whenever the streaming set changes. */
static void hbm_rates(hbm *h)
{
    double left = h->bw;
    size_t n = h->n_streaming;
    for (size_t i = 0; i < h->n; i++)
        if (h->x[i].live && h->x[i].streaming)
            h->x[i].rate = -1; /* not fixed yet */
    while (n) {
        double share = left / (double)n;
        bool fixed = false;
        for (size_t i = 0; i < h->n; i++) {
            hbm_xfer *x = &h->x[i];
            if (x->live && x->streaming && x->rate < 0 && x->cap <= share) {
                x->rate = x->cap;
                left -= x->cap;
                n--;
                fixed = true;
            }
        }
        if (!fixed) {
            for (size_t i = 0; i < h->n; i++)
                if (h->x[i].live && h->x[i].streaming && h->x[i].rate < 0)
                    h->x[i].rate = share;
            break;
        }
    }
}

/* Brings every streaming transfer's remaining bytes up to now. Completions run at whole ps,
 * rounded up, so a finishing transfer may be credited with bytes it did not have; those are
 * bandwidth the others would have used, and are shared among them equally so that the
 * server stays work-conserving (a busy HBM moves exactly bw bytes per ps). */
static void hbm_advance(hbm *h)
{
    uint64_t now = evq_now(h->q);
    double dt = (double)(now - h->t_update);
    double excess = 0;
    size_t others = 0;
    if (dt > 0)
        for (size_t i = 0; i < h->n; i++)
            if (h->x[i].live && h->x[i].streaming) {
                h->x[i].remaining -= dt * h->x[i].rate;
                if (h->x[i].remaining < 0) {
                    excess -= h->x[i].remaining;
                    h->x[i].remaining = 0;
                } else if (h->x[i].remaining >= 1e-3) {
                    others++;
                }
            }
    if (excess > 0 && others)
        for (size_t i = 0; i < h->n; i++)
            if (h->x[i].live && h->x[i].streaming && h->x[i].remaining >= 1e-3) {
                h->x[i].remaining -= excess / (double)others;
                if (h->x[i].remaining < 0)
                    h->x[i].remaining = 0;
            }
    h->t_update = now;
}

/* Schedules the completion of the streaming transfer that ends first. */
static void hbm_reschedule(hbm *h)
{
    if (h->next.seq)
        evq_cancel(h->q, h->next);
    h->next = EVQ_HANDLE_NONE;
    hbm_rates(h);
    double best = INFINITY;
    for (size_t i = 0; i < h->n; i++)
        if (h->x[i].live && h->x[i].streaming) {
            double t = h->x[i].remaining / h->x[i].rate;
            if (t < best)
                best = t;
        }
    if (best == INFINITY)
        return;
    /* Round up to whole ps so the finishing transfer has really moved its bytes. */
    uint64_t d = (uint64_t)ceil(best - 1e-6);
    if (evq_schedule_in(h->q, d, hbm_finish, h, 0, &h->next, &h->err) != NP_OK)
        evq_stop(h->q);
}

static void hbm_finish(evq *q, void *ctx, uint64_t arg)
{
    (void)q, (void)arg;
    hbm *h = ctx;
    h->next = EVQ_HANDLE_NONE;
    hbm_advance(h);
    /* Every transfer with (almost) nothing left completes now, in slot order. */
    for (size_t i = 0; i < h->n; i++) {
        hbm_xfer *x = &h->x[i];
        if (x->live && x->streaming && x->remaining < 1e-3) {
            x->live = false;
            h->n_streaming--;
            h->n_live--;
            x->done(x->ctx, x->arg);
        }
    }
    hbm_reschedule(h);
}

static void hbm_join(evq *q, void *ctx, uint64_t slot)
{
    (void)q;
    hbm *h = ctx;
    hbm_advance(h);
    h->x[slot].streaming = true;
    h->n_streaming++;
    hbm_reschedule(h);
}

np_status hbm_transfer(hbm *h, uint64_t bytes, double cap_bytes_per_ps, hbm_done_fn done,
                       void *ctx, uint64_t arg, np_err *err)
{
    size_t slot = h->n;
    for (size_t i = 0; i < h->n; i++)
        if (!h->x[i].live) {
            slot = i;
            break;
        }
    if (slot == h->n) {
        if (h->n == h->cap) {
            size_t nc = h->cap ? 2 * h->cap : 8;
            hbm_xfer *nx = realloc(h->x, nc * sizeof *nx);
            if (!nx)
                return np_err_set(err, NP_ERR_NOMEM, "out of memory in the HBM model");
            h->x = nx;
            h->cap = nc;
        }
        h->n++;
    }
    h->x[slot] = (hbm_xfer){(double)bytes, cap_bytes_per_ps, done, ctx, arg, 0, false, true};
    h->n_live++;
    return evq_schedule_in(h->q, h->lat_ps, hbm_join, h, slot, NULL, err);
}
