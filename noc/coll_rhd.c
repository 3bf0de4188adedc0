/* coll_rhd.c — recursive halving and doubling (p a power of two, L = log2 p):
 *   all-gather (recursive doubling)   step s: exchange the 2^s shares gathered so far with
 *                                     rank ^ 2^s: L alpha + (p-1)/p n beta
 *   reduce-scatter (recursive halving) step s: send half of the current range (n / 2^(s+1)
 *                                     bytes) to rank ^ p/2^(s+1), reduce the half received:
 *                                     L alpha + (p-1)/p n (beta + gamma)
 *   all-reduce (Rabenseifner)         halving reduce-scatter, then doubling all-gather:
 *                                     2 L alpha + 2 (p-1)/p n beta + (p-1)/p n gamma
 * A rank sends step s once step s - 1 has arrived (and, in halving, been reduced);
 * reductions run in step order. */
#include <stdlib.h>

#include "coll_impl.h"

typedef enum rhd_mode { RHD_AG, RHD_RS, RHD_AR } rhd_mode;

typedef struct rhd_state {
    rhd_mode mode;
    uint32_t p, L;
    uint32_t *next_send, *next_reduce, *reduced;
    uint64_t *received; /* bit s: step s's message has arrived */
} rhd_state;

static void rhd_free(void *v)
{
    rhd_state *s = v;
    free(s->next_send);
    free(s->next_reduce);
    free(s->reduced);
    free(s->received);
    free(s);
}

static uint32_t rhd_steps(const rhd_state *s) { return s->mode == RHD_AR ? 2 * s->L : s->L; }
static uint32_t rhd_reduce_steps(const rhd_state *s) { return s->mode == RHD_AG ? 0 : s->L; }

static void rhd_step(const rhd_state *s, uint64_t n, uint32_t rank, uint32_t step,
                     uint32_t *partner, uint64_t *bytes)
{
    bool halving = s->mode == RHD_RS || (s->mode == RHD_AR && step < s->L);
    if (halving) {
        *partner = rank ^ (s->p >> (step + 1));
        *bytes = n >> (step + 1);
    } else {
        uint32_t t = s->mode == RHD_AR ? step - s->L : step;
        *partner = rank ^ (1u << t);
        *bytes = (uint64_t)((double)n * (double)(1u << t) / s->p);
    }
}

static void rhd_progress(coll *c, rhd_state *s, uint32_t r)
{
    uint64_t n = coll_get_desc(c)->bytes;
    uint32_t red = rhd_reduce_steps(s);
    for (;;) {
        uint32_t st = s->next_send[r];
        if (st >= rhd_steps(s))
            return;
        if (st > 0) {
            bool ready = st - 1 < red ? s->reduced[r] >= st : (s->received[r] >> (st - 1)) & 1;
            if (!ready)
                return;
        }
        uint32_t partner;
        uint64_t bytes;
        rhd_step(s, n, r, st, &partner, &bytes);
        coll_send(c, r, partner, bytes, st, 0);
        s->next_send[r]++;
    }
}

static np_status rhd_start(coll *c, rhd_mode mode, np_err *err)
{
    uint32_t p = coll_ranks(c);
    if (p & (p - 1))
        return np_err_set(err, NP_ERR_INCONSISTENT, "recursive halving/doubling needs a "
                          "power-of-two group, not %u ranks", (unsigned)p);
    rhd_state *s = calloc(1, sizeof *s);
    if (!s)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory");
    coll_set_state(c, s);
    s->mode = mode;
    s->p = p;
    while ((1u << s->L) < p)
        s->L++;
    s->next_send = calloc(p, sizeof *s->next_send);
    s->next_reduce = calloc(p, sizeof *s->next_reduce);
    s->reduced = calloc(p, sizeof *s->reduced);
    s->received = calloc(p, sizeof *s->received);
    if (!s->next_send || !s->next_reduce || !s->reduced || !s->received)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory");
    for (uint32_t r = 0; r < p; r++)
        rhd_progress(c, s, r);
    return NP_OK;
}

static void rhd_recv(coll *c, uint32_t rank, uint32_t from, uint64_t tag, uint64_t bytes)
{
    (void)from;
    (void)bytes;
    rhd_state *s = coll_state(c);
    s->received[rank] |= 1ULL << tag;
    uint32_t red = rhd_reduce_steps(s);
    while (s->next_reduce[rank] < red && ((s->received[rank] >> s->next_reduce[rank]) & 1)) {
        uint32_t partner;
        uint64_t b;
        rhd_step(s, coll_get_desc(c)->bytes, rank, s->next_reduce[rank], &partner, &b);
        coll_reduce(c, rank, b, s->next_reduce[rank]);
        s->next_reduce[rank]++;
    }
    rhd_progress(c, s, rank);
}

static void rhd_reduced(coll *c, uint32_t rank, uint64_t tag, uint64_t bytes)
{
    (void)bytes;
    rhd_state *s = coll_state(c);
    s->reduced[rank] = (uint32_t)tag + 1;
    rhd_progress(c, s, rank);
}

static np_status rhd_ag_start(coll *c, np_err *err)
{
    return rhd_start(c, RHD_AG, err);
}

static np_status rhd_rs_start(coll *c, np_err *err)
{
    return rhd_start(c, RHD_RS, err);
}

static np_status rhd_ar_start(coll *c, np_err *err)
{
    return rhd_start(c, RHD_AR, err);
}


const coll_algo_ops coll_rhd_all_gather = {COLL_OP_ALL_GATHER, COLL_ALGO_RHD, rhd_ag_start,
                                           rhd_recv, rhd_reduced, rhd_free};
const coll_algo_ops coll_rhd_reduce_scatter = {COLL_OP_REDUCE_SCATTER, COLL_ALGO_RHD,
                                               rhd_rs_start, rhd_recv, rhd_reduced, rhd_free};
const coll_algo_ops coll_rhd_all_reduce = {COLL_OP_ALL_REDUCE, COLL_ALGO_RHD, rhd_ar_start,
                                           rhd_recv, rhd_reduced, rhd_free};
