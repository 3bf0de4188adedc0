/* coll_ring.c — ring algorithms: ring all-reduce / all-gather / reduce-scatter, the
 * bidirectional ring all-reduce, and the hierarchical (2D) all-reduce built from rings.
 *
 * A ring instance runs over ranks base, base + stride, ... (n of them) in one direction.
 * Its bytes are split in n segments; at step g the rank at (directional) position v sends
 * one segment to position v + 1, chunk by chunk:
 *   reduce-scatter steps (g < n - 1)   segment (v - g) mod n; the receiver reduces each chunk
 *                                      into its own copy, then forwards it at step g + 1
 *   all-gather after reduce-scatter    segment (v + 1 - k) mod n at step k = g - (n - 1);
 *                                      the receiver forwards at once
 *   plain all-gather                   segment (v - g) mod n
 * A rank forwards chunk j of step g + 1 as soon as chunk j of step g has arrived (and been
 * reduced), so with several chunks per segment the steps overlap (pipelining).
 * Alpha-beta cost on an idle ring of p ranks, message n bytes, no chunking:
 *   reduce-scatter / all-gather  (p - 1)(alpha + n/p beta) [+ (p - 1) n/p gamma]
 *   all-reduce                   2(p - 1)(alpha + n/p beta) + (p - 1) n/p gamma
 */
#include <math.h>
#include <stdlib.h>

#include "coll_impl.h"

typedef enum ring_mode { RING_RS, RING_AG, RING_AR } ring_mode;

typedef struct ring_inst {
    uint32_t base, stride, n;
    uint64_t bytes;
    ring_mode mode;
    int dir;  /* +1 or -1 */
    int port;
    uint64_t outstanding;
} ring_inst;

typedef struct ring_state {
    ring_inst *inst;
    uint32_t n_inst, cap_inst;
    /* hierarchical all-reduce */
    uint32_t q;          /* ranks per inner group (island) */
    int phase;           /* 0 reduce-scatter in islands, 1 all-reduce across, 2 all-gather */
    uint32_t phase_first, phase_count, phase_done;
    bool hier;
} ring_state;

#define RING_TAG(inst, g, j) (((uint64_t)(inst) << 44) | ((uint64_t)(g) << 24) | (uint64_t)(j))
#define RING_TAG_INST(t) ((uint32_t)((t) >> 44))
#define RING_TAG_STEP(t) ((uint32_t)(((t) >> 24) & 0xfffff))
#define RING_TAG_CHUNK(t) ((uint32_t)((t)&0xffffff))

static uint32_t ring_steps(const ring_inst *r)
{
    return (r->mode == RING_AR ? 2 : 1) * (r->n - 1);
}

static bool ring_reduces(const ring_inst *r, uint32_t g)
{
    return r->mode == RING_RS || (r->mode == RING_AR && g < r->n - 1);
}

/* Directional position <-> index within the ring (an involution). */
static uint32_t ring_flip(const ring_inst *r, uint32_t i)
{
    return r->dir > 0 ? i : (r->n - i) % r->n;
}

static uint32_t ring_rank(const ring_inst *r, uint32_t v)
{
    return r->base + ring_flip(r, v % r->n) * r->stride;
}

static uint32_t ring_vpos(const ring_inst *r, uint32_t rank)
{
    return ring_flip(r, (rank - r->base) / r->stride);
}

static uint64_t ring_seg_bytes(const ring_inst *r, uint32_t v, uint32_t g)
{
    uint32_t n = r->n, s;
    if (r->mode == RING_AR && g >= n - 1)
        s = (uint32_t)(((uint64_t)v + 1 + n - (g - (n - 1)) % n) % n);
    else
        s = (uint32_t)(((uint64_t)v + n - g % n) % n);
    return coll_share(r->bytes, n, s);
}

static void ring_send_chunk(coll *c, ring_state *st, uint32_t id, uint32_t v, uint32_t g,
                            uint64_t j)
{
    ring_inst *r = &st->inst[id];
    uint64_t seg = ring_seg_bytes(r, v, g), chunk = coll_get_desc(c)->chunk_bytes;
    r->outstanding++;
    coll_send(c, ring_rank(r, v), ring_rank(r, v + 1), coll_chunk_bytes(seg, chunk, j),
              RING_TAG(id, g, j), r->port);
}

static void ring_send_step(coll *c, ring_state *st, uint32_t id, uint32_t v, uint32_t g)
{
    ring_inst *r = &st->inst[id];
    uint64_t chunks = coll_chunks(ring_seg_bytes(r, v, g), coll_get_desc(c)->chunk_bytes);
    for (uint64_t j = 0; j < chunks; j++)
        ring_send_chunk(c, st, id, v, g, j);
}

static void ring_phase_start(coll *c, ring_state *st);

/* An instance finished all its work. */
static void ring_inst_done(coll *c, ring_state *st)
{
    if (!st->hier)
        return;
    if (++st->phase_done == st->phase_count && st->phase < 2) {
        st->phase++;
        ring_phase_start(c, st);
    }
}

static void ring_forward(coll *c, ring_state *st, uint32_t id, uint32_t rank, uint32_t g,
                         uint32_t j)
{
    ring_inst *r = &st->inst[id];
    if (g + 1 < ring_steps(r))
        ring_send_chunk(c, st, id, ring_vpos(r, rank), g + 1, j);
    if (--st->inst[id].outstanding == 0)
        ring_inst_done(c, st);
}

static void ring_recv(coll *c, uint32_t rank, uint32_t from, uint64_t tag, uint64_t bytes)
{
    (void)from;
    ring_state *st = coll_state(c);
    uint32_t id = RING_TAG_INST(tag), g = RING_TAG_STEP(tag);
    ring_inst *r = &st->inst[id];
    if (ring_reduces(r, g)) {
        r->outstanding++;
        coll_reduce(c, rank, bytes, tag);
        r->outstanding--; /* the message is handled; the reduction is outstanding */
        return;
    }
    ring_forward(c, st, id, rank, g, RING_TAG_CHUNK(tag));
}

static void ring_reduced(coll *c, uint32_t rank, uint64_t tag, uint64_t bytes)
{
    (void)bytes;
    ring_state *st = coll_state(c);
    ring_forward(c, st, RING_TAG_INST(tag), rank, RING_TAG_STEP(tag), RING_TAG_CHUNK(tag));
}

/* Adds an instance (its id is its index); UINT32_MAX when out of memory. */
static uint32_t ring_add(ring_state *st, ring_inst r)
{
    if (st->n_inst == st->cap_inst) {
        uint32_t cap = st->cap_inst ? st->cap_inst * 2 : 8;
        ring_inst *v = realloc(st->inst, (size_t)cap * sizeof *v);
        if (!v)
            return UINT32_MAX;
        st->inst = v;
        st->cap_inst = cap;
    }
    st->inst[st->n_inst] = r;
    return st->n_inst++;
}

static void ring_state_free(void *p)
{
    ring_state *st = p;
    free(st->inst);
    free(st);
}

/* Starts every rank's first step of instance id; an instance with nothing to do is done. */
static void ring_inst_start(coll *c, ring_state *st, uint32_t id)
{
    ring_inst *r = &st->inst[id];
    if (r->n < 2) {
        ring_inst_done(c, st);
        return;
    }
    for (uint32_t v = 0; v < r->n; v++)
        ring_send_step(c, st, id, v, 0);
}

static np_status ring_start_mode(coll *c, ring_mode mode, bool bidir, np_err *err)
{
    ring_state *st = calloc(1, sizeof *st);
    if (!st)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory");
    coll_set_state(c, st);
    uint32_t p = coll_ranks(c);
    uint64_t n = coll_get_desc(c)->bytes;
    if (!bidir) {
        if (ring_add(st, (ring_inst){0, 1, p, n, mode, +1, 0, 0}) == UINT32_MAX)
            return np_err_set(err, NP_ERR_NOMEM, "out of memory");
    } else {
        if (ring_add(st, (ring_inst){0, 1, p, n - n / 2, mode, +1, 0, 0}) == UINT32_MAX ||
            ring_add(st, (ring_inst){0, 1, p, n / 2, mode, -1, 1, 0}) == UINT32_MAX)
            return np_err_set(err, NP_ERR_NOMEM, "out of memory");
    }
    for (uint32_t i = 0; i < st->n_inst; i++)
        ring_inst_start(c, st, i);
    return NP_OK;
}

static np_status ring_ar_start(coll *c, np_err *err)
{
    return ring_start_mode(c, RING_AR, false, err);
}

static np_status ring_ag_start(coll *c, np_err *err)
{
    return ring_start_mode(c, RING_AG, false, err);
}

static np_status ring_rs_start(coll *c, np_err *err)
{
    return ring_start_mode(c, RING_RS, false, err);
}

static np_status biring_start(coll *c, np_err *err)
{
    return ring_start_mode(c, RING_AR, true, err);
}


const coll_algo_ops coll_ring_all_reduce = {COLL_OP_ALL_REDUCE, COLL_ALGO_RING, ring_ar_start,
                                            ring_recv, ring_reduced, ring_state_free};
const coll_algo_ops coll_ring_all_gather = {COLL_OP_ALL_GATHER, COLL_ALGO_RING, ring_ag_start,
                                            ring_recv, ring_reduced, ring_state_free};
const coll_algo_ops coll_ring_reduce_scatter = {COLL_OP_REDUCE_SCATTER, COLL_ALGO_RING,
                                                ring_rs_start, ring_recv, ring_reduced,
                                                ring_state_free};
const coll_algo_ops coll_biring_all_reduce = {COLL_OP_ALL_REDUCE, COLL_ALGO_BIRING,
                                              biring_start, ring_recv, ring_reduced,
                                              ring_state_free};

/* ---- Hierarchical (2D) all-reduce -----------------------------------------------------------
 * Ranks form p/q inner groups of q consecutive ranks (an island, a torus row). Phase 0: a
 * ring reduce-scatter inside every group (each rank ends with 1/q of the sum of its group);
 * phase 1: a ring all-reduce of that 1/q across the groups, among ranks with the same
 * position; phase 2: a ring all-gather inside every group. Each phase starts when the
 * previous one has finished everywhere. Cost, with (alpha1, beta1) inside a group and
 * (alpha2, beta2) across:
 *   (q-1)(a1 + n/q b1 + n/q g) + 2(p/q-1)(a2 + n/p b2) + (p/q-1) n/p g + (q-1)(a1 + n/q b1)
 */

static void ring_phase_start(coll *c, ring_state *st)
{
    uint32_t p = coll_ranks(c), q = st->q, groups = p / q;
    uint64_t n = coll_get_desc(c)->bytes;
    uint32_t count = st->phase == 1 ? q : groups;
    st->phase_first = st->n_inst;
    st->phase_count = count;
    st->phase_done = 0;
    for (uint32_t i = 0; i < count; i++) {
        ring_inst r;
        if (st->phase == 1) /* across: ranks i, i + q, ...; the segment position i holds */
            r = (ring_inst){i, q, groups, coll_share(n, q, (i + 1) % q), RING_AR, +1, 0, 0};
        else
            r = (ring_inst){i * q, 1, q, n, st->phase == 0 ? RING_RS : RING_AG, +1, 0, 0};
        if (ring_add(st, r) == UINT32_MAX) {
            coll_fail(c, NP_ERR_NOMEM, "out of memory");
            return;
        }
    }
    int phase = st->phase;
    for (uint32_t i = 0; i < count && st->phase == phase; i++)
        ring_inst_start(c, st, st->phase_first + i);
}

/* The inner group size: asked for, else the island, the torus's x ring, or the divisor of p
 * nearest sqrt(p). */
static uint32_t hier_group(const coll *c)
{
    uint32_t p = coll_ranks(c);
    const coll_desc *d = coll_get_desc(c);
    const net_params *np = coll_net_params(c);
    if (d->group_ranks)
        return d->group_ranks;
    if (np->topology == ARCH_TOPOLOGY_HIERARCHICAL && np->island_chips > 1 &&
        np->island_chips < p && p % np->island_chips == 0)
        return np->island_chips;
    if ((np->topology == ARCH_TOPOLOGY_TORUS2D || np->topology == ARCH_TOPOLOGY_TORUS3D) &&
        p == np->chips && np->dims[0] > 1 && np->dims[0] < p)
        return np->dims[0];
    uint32_t best = 1;
    for (uint32_t k = 1; (uint64_t)k * k <= p; k++)
        if (p % k == 0)
            best = k;
    return best;
}

static np_status hier_start(coll *c, np_err *err)
{
    uint32_t p = coll_ranks(c), q = hier_group(c);
    if (q == 0 || p % q)
        return np_err_set(err, NP_ERR_INCONSISTENT, "hierarchical all-reduce: %u ranks are "
                          "not whole groups of %u", (unsigned)p, (unsigned)q);
    ring_state *st = calloc(1, sizeof *st);
    if (!st)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory");
    coll_set_state(c, st);
    st->hier = true;
    st->q = q;
    st->phase = 0;
    ring_phase_start(c, st);
    return NP_OK;
}

const coll_algo_ops coll_hier_all_reduce = {COLL_OP_ALL_REDUCE, COLL_ALGO_HIER, hier_start,
                                            ring_recv, ring_reduced, ring_state_free};
