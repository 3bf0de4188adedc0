/* coll_p2p.c — point-to-point patterns:
 *   all-to-all (pairwise exchange)  step k = 1 .. p-1: rank r sends its share for rank
 *                                   (r + k) mod p, and moves to step k + 1 once the step-k
 *                                   message from (r - k) mod p has arrived:
 *                                   (p - 1)(alpha + n/p beta) on a non-blocking network
 *   sendrecv (nccl-tests)           every rank sends n bytes to the next rank and receives
 *                                   from the previous one, all at once: alpha + n beta
 */
#include <stdlib.h>

#include "coll_impl.h"

typedef struct a2a_state {
    uint32_t p;
    uint32_t *next;  /* next step to send, per rank */
    uint8_t *got;    /* got[r * p + k]: rank r has step k's message */
} a2a_state;

static void a2a_free(void *v)
{
    a2a_state *s = v;
    free(s->next);
    free(s->got);
    free(s);
}

static void a2a_progress(coll *c, a2a_state *s, uint32_t r)
{
    uint64_t n = coll_get_desc(c)->bytes;
    while (s->next[r] < s->p) {
        uint32_t k = s->next[r];
        if (k > 1 && !s->got[(size_t)r * s->p + k - 1])
            return;
        uint32_t to = (r + k) % s->p;
        coll_send(c, r, to, coll_share(n, s->p, to), k, 0);
        s->next[r]++;
    }
}

static np_status a2a_start(coll *c, np_err *err)
{
    a2a_state *s = calloc(1, sizeof *s);
    if (!s)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory");
    coll_set_state(c, s);
    s->p = coll_ranks(c);
    if ((double)s->p * s->p > (double)(1u << 28))
        return np_err_set(err, NP_ERR_RANGE, "all-to-all over %u ranks is too large",
                          (unsigned)s->p);
    s->next = malloc((size_t)s->p * sizeof *s->next);
    s->got = calloc((size_t)s->p * s->p, 1);
    if (!s->next || !s->got)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory");
    for (uint32_t r = 0; r < s->p; r++) {
        s->next[r] = 1;
        a2a_progress(c, s, r);
    }
    return NP_OK;
}

static void a2a_recv(coll *c, uint32_t rank, uint32_t from, uint64_t tag, uint64_t bytes)
{
    (void)from;
    (void)bytes;
    a2a_state *s = coll_state(c);
    s->got[(size_t)rank * s->p + tag] = 1;
    a2a_progress(c, s, rank);
}

const coll_algo_ops coll_pairwise_all_to_all = {COLL_OP_ALL_TO_ALL, COLL_ALGO_PAIRWISE,
                                                a2a_start, a2a_recv, NULL, a2a_free};

static np_status sendrecv_start(coll *c, np_err *err)
{
    (void)err;
    uint32_t p = coll_ranks(c);
    for (uint32_t r = 0; p > 1 && r < p; r++)
        coll_send(c, r, (r + 1) % p, coll_get_desc(c)->bytes, 0, 0);
    return NP_OK;
}

static void sendrecv_recv(coll *c, uint32_t rank, uint32_t from, uint64_t tag, uint64_t bytes)
{
    (void)c;
    (void)rank;
    (void)from;
    (void)tag;
    (void)bytes;
}

const coll_algo_ops coll_direct_sendrecv = {COLL_OP_SENDRECV, COLL_ALGO_DIRECT, sendrecv_start,
                                            sendrecv_recv, NULL, NULL};
