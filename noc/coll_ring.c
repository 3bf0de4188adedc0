/* coll_ring.c — ring schedules: ring all-reduce / all-gather / reduce-scatter, the
 * bidirectional ring all-reduce, and the multi-level (hierarchical, per torus dimension)
 * all-reduce built from rings.
 *
 * A phase is one ring pass over the ranks of one level's ring (q of them), in one direction,
 * on one port, over a range of the buffer cut into q segments, each sent in C chunks. At step
 * g the rank at (directional) ring position v sends one segment to v + 1, chunk by chunk:
 *   reduce-scatter steps (g < q - 1)   segment (v + o - g) mod q, which the receiver adds into
 *                                      its copy; the rank ends with segment (v + o + 1) mod q
 *   all-gather steps                   segment (v + o' - k) mod q at step k of the gather,
 *                                      copied; the rank starts with segment (v + o') mod q
 * with o = 0 and o' = 1 in an all-reduce (the gather starts from the segment the reduce-scatter
 * left), o = -1 for a reduce-scatter and o' = 0 for an all-gather (rank r ends with / starts
 * with its own segment r, as NCCL). Chunk j of step g + 1 leaves once chunk j of step g has
 * arrived (and been reduced): with several chunks per segment, steps overlap.
 *
 * Ring order: position k of the ring is rank order[k] (coll_sched_desc.order), so a ring can
 * follow the physical links; the segment of position k is rank order[k]'s.
 *
 * Lanes: rings side by side, each on its own port over its own part of the buffer. The
 * bidirectional ring has two, one each way, over the two halves of X. Channels (NCCL's: rings
 * whose hops between islands leave through different NICs, coll_sched_desc.channels) are C
 * lanes in the same direction, each in its own order, lane c over part c of every rank's
 * segment (so a reduce-scatter still leaves rank r segment r, an all-gather starts from it).
 *
 * Multi-level all-reduce over levels of q0, q1, ... ranks (position k0 + q0 (k1 + q1 k2...)):
 * reduce-scatter along level 0 (each rank keeps 1/q0 of the buffer, summed over its level-0
 * ring), then along level 1 on that part, ..., an all-reduce along the last level, then
 * all-gathers back down to level 0. A phase's first sends wait for the previous phase's last
 * step on that rank (which, arriving in order, means the whole phase there).
 *
 * Alpha-beta cost on an idle ring of p ranks, n bytes, no chunking:
 *   reduce-scatter / all-gather  (p - 1)(alpha + n/p beta) [+ (p - 1) n/p gamma]
 *   all-reduce                   2(p - 1)(alpha + n/p beta) + (p - 1) n/p gamma
 * and for the multi-level all-reduce the sum over its phases (docs/collectives.md).
 */
#include <inttypes.h>
#include <stdlib.h>

#include "coll_impl.h"

typedef enum ring_mode { RING_RS, RING_AG, RING_AR } ring_mode;

typedef struct ring_phase {
    const uint32_t *p2r, *r2p; /* the lane's ring: position -> rank, rank -> position (NULL:
                                  the identity) */
    ring_mode mode;
    int32_t o;                /* segment offset of the reduce-scatter part, or of a plain AG */
    int32_t dir;              /* +1 or -1 */
    uint32_t port, level, half; /* half: the lane */
    uint32_t steps;           /* (AR ? 2 : 1) (q - 1) */
    uint32_t chunks;          /* per segment */
    uint32_t send_base, recv_base, step_base;
    uint32_t prev_chunks;     /* deps of step 0's sends: the previous phase's chunks, or 0 */
    int32_t next;             /* the phase whose step 0 this one's last step unblocks, or -1 */
    /* one level only (the range is the same for every rank): the split, precomputed */
    uint64_t r_off, squ, rem; /* range offset; units per segment; remainder bytes */
    uint32_t sr;              /* segments with one more unit */
    uint64_t cq[2];           /* units per chunk of a segment of squ (+1) units */
    uint32_t cr[2];           /* chunks with one more unit */
} ring_phase;

typedef struct ring_sched {
    uint32_t levels, q[COLL_MAX_LEVELS], stride[COLL_MAX_LEVELS];
    uint32_t halves;          /* lanes: 2 for the bidirectional ring (one half of X each way),
                                 the channels of a multi-channel ring, else 1 */
    bool seg_major;           /* channels: lane c moves part c of every segment (else lane h
                                 moves half h of X, cut into segments) */
    uint64_t bytes;           /* the buffer (seg_major) */
    const uint32_t *pos2rank; /* NULL: identity */
    uint32_t *rank2pos;
    uint32_t *lane_r2p;       /* channels in their own orders: lanes x p */
    ring_phase ph[COLL_MAX_CHANNELS > 2 * COLL_MAX_LEVELS ? COLL_MAX_CHANNELS
                                                          : 2 * COLL_MAX_LEVELS];
    uint32_t n_ph;
    uint32_t sends[COLL_MAX_CHANNELS], recvs, steps;
} ring_sched;

static void ring_free(void *v)
{
    ring_sched *st = v;
    free(st->rank2pos);
    free(st->lane_r2p);
    free(st);
}

static inline uint32_t ring_pos(const ring_phase *ph, uint32_t rank)
{
    return ph->r2p ? ph->r2p[rank] : rank;
}

static inline uint32_t ring_rank(const ring_phase *ph, uint32_t pos)
{
    return ph->p2r ? ph->p2r[pos] : pos;
}

/* Channels: the offset and bytes of chunk j of lane ph->half's part of the segment of rank
 * idx (segment idx of X, cut into st->halves parts, the part into ph->chunks chunks). */
static inline void ring_lane_chunk(const ring_sched *st, const ring_phase *ph, uint32_t el,
                                   uint32_t idx, uint32_t j, uint64_t *off, uint64_t *bytes)
{
    uint32_t q = st->q[0];
    uint64_t so = coll_part_off(st->bytes, el, q, idx), sn = coll_part_bytes(st->bytes, el, q, idx);
    uint64_t lo = coll_part_off(sn, el, st->halves, ph->half);
    uint64_t ln = coll_part_bytes(sn, el, st->halves, ph->half);
    *off = so + lo + coll_part_off(ln, el, ph->chunks, j);
    *bytes = coll_part_bytes(ln, el, ph->chunks, j);
}

/* The part of X a rank at position pos works on at `level`: its half, narrowed at each lower
 * level to the segment its reduce-scatter there left it ((k + 1) mod q, o = 0). */
static void ring_range(const ring_sched *st, const coll_sched_desc *d, uint32_t pos,
                       const ring_phase *ph, uint64_t *off, uint64_t *len)
{
    uint32_t el = d->elem_bytes;
    uint64_t o = coll_part_off(d->bytes, el, st->halves, ph->half);
    uint64_t n = coll_part_bytes(d->bytes, el, st->halves, ph->half);
    for (uint32_t e = 0; e < ph->level; e++) {
        uint32_t q = st->q[e], k = (pos / st->stride[e]) % q, lab = (k + 1) % q;
        o += coll_part_off(n, el, q, lab);
        n = coll_part_bytes(n, el, q, lab);
    }
    *off = o;
    *len = n;
}

/* Segment label (directional position) sent by the rank at directional position v at step g;
 * *reduce: the step is a reduce-scatter step. */
static inline uint32_t ring_label(const ring_phase *ph, uint32_t q, uint32_t v, uint32_t g,
                           bool *reduce)
{
    int64_t o = ph->o, k = g;
    bool rs = ph->mode == RING_RS || (ph->mode == RING_AR && g < q - 1);
    if (ph->mode == RING_AR && !rs) {
        k = g - (q - 1);
        o += 1;
    }
    *reduce = rs;
    int64_t l = (int64_t)v + o - k; /* in (-q - 1, q + 1) */
    while (l < 0)
        l += q;
    while (l >= q)
        l -= q;
    return (uint32_t)l;
}

/* The bytes of chunk j of the segment with directional label lab of the rank at pos
 * (multi-level rings; ring_flat_op does one level). */
static inline void ring_chunk(const ring_sched *st, const coll_sched_desc *d, const ring_phase *ph,
                       uint32_t pos, uint32_t lab, uint32_t j, uint64_t *off, uint64_t *bytes)
{
    uint32_t q = st->q[ph->level], el = d->elem_bytes;
    uint32_t idx = ph->dir > 0 || lab == 0 ? lab : q - lab; /* multi-level: one direction */
    uint64_t ro, rn;
    ring_range(st, d, pos, ph, &ro, &rn);
    uint64_t so = coll_part_off(rn, el, q, idx), sn = coll_part_bytes(rn, el, q, idx);
    *off = ro + so + coll_part_off(sn, el, ph->chunks, j);
    *bytes = coll_part_bytes(sn, el, ph->chunks, j);
}

/* The rank `delta` (+1 / -1) positions along the phase's direction from pos. */
static inline uint32_t ring_coord(const ring_sched *st, const ring_phase *ph, uint32_t pos)
{
    return st->levels == 1 ? pos : (pos / st->stride[ph->level]) % st->q[ph->level];
}

static inline uint32_t ring_neighbour(const ring_sched *st, const ring_phase *ph, uint32_t pos,
                               int delta)
{
    uint32_t q = st->q[ph->level], s = st->stride[ph->level], k = ring_coord(st, ph, pos);
    uint32_t k2 = delta * ph->dir > 0 ? (k + 1 == q ? 0 : k + 1) : (k == 0 ? q - 1 : k - 1);
    return ring_rank(ph, pos - k * s + k2 * s);
}

static inline uint32_t ring_vpos(const ring_sched *st, const ring_phase *ph, uint32_t pos)
{
    uint32_t q = st->q[ph->level], k = ring_coord(st, ph, pos);
    return ph->dir > 0 || k == 0 ? k : q - k;
}

static inline const ring_phase *ring_send_phase(const ring_sched *st, uint32_t port, uint32_t i)
{
    if (st->levels == 1)
        return &st->ph[port]; /* one phase per lane, lane h on port h */
    for (uint32_t f = 0; f < st->n_ph; f++) {
        const ring_phase *ph = &st->ph[f];
        if (ph->port == port && i >= ph->send_base &&
            i - ph->send_base < (uint64_t)ph->steps * ph->chunks)
            return ph;
    }
    return NULL;
}

static inline const ring_phase *ring_recv_phase(const ring_sched *st, uint32_t i)
{
    if (st->n_ph == 1)
        return &st->ph[0];
    if (st->levels == 1) { /* lanes: receive ranges in lane order; the last that starts <= i */
        uint32_t lo = 0, hi = st->n_ph;
        while (hi - lo > 1) {
            uint32_t mid = (lo + hi) / 2;
            if (st->ph[mid].recv_base <= i)
                lo = mid;
            else
                hi = mid;
        }
        return &st->ph[lo];
    }
    for (uint32_t f = 0; f < st->n_ph; f++) {
        const ring_phase *ph = &st->ph[f];
        if (i >= ph->recv_base && i - ph->recv_base < (uint64_t)ph->steps * ph->chunks)
            return ph;
    }
    return NULL;
}

/* Op (g, j) of the rank at position k of a one-level ring: its send when `sending`, else its
 * receive; every quantity from the phase's precomputed split (the engines' hot path). */
static void ring_flat_op(const ring_sched *st, const ring_phase *ph, uint32_t el, uint32_t k,
                         uint32_t g, uint32_t j, bool sending, coll_xfer *x)
{
    uint32_t q = st->q[0];
    bool fwd = ph->dir > 0;
    uint32_t v = fwd || k == 0 ? k : q - k;        /* directional position */
    uint32_t vs = sending ? v : v ? v - 1 : q - 1; /* ... of the sender */
    bool rs = ph->mode == RING_RS || (ph->mode == RING_AR && g < q - 1);
    int64_t l = (int64_t)vs + ph->o - g;
    if (ph->mode == RING_AR && !rs)
        l += 1 + (int64_t)(q - 1);
    while (l < 0)
        l += q;
    while (l >= q)
        l -= q;
    uint32_t ks = fwd || l == 0 ? (uint32_t)l : q - (uint32_t)l; /* the segment's position */
    uint32_t idx = ph->p2r ? ph->p2r[ks] : ks;                  /* ... whose rank owns it */
    if (st->seg_major) {
        ring_lane_chunk(st, ph, el, idx, j, &x->offset, &x->bytes);
    } else {
        uint32_t c = idx < ph->sr, cr = ph->cr[c];
        uint64_t so = ((uint64_t)idx * ph->squ + (c ? idx : ph->sr)) * el;
        x->offset = ph->r_off + so + ((uint64_t)j * ph->cq[c] + (j < cr ? j : cr)) * el;
        x->bytes = (ph->cq[c] + (j < cr)) * el +
                   (idx == q - 1 && j == ph->chunks - 1 ? ph->rem : 0);
    }
    uint32_t kp = (sending == fwd) ? (k + 1 == q ? 0 : k + 1) : (k == 0 ? q - 1 : k - 1);
    x->peer = ph->p2r ? ph->p2r[kp] : kp;
    x->port = ph->port;
    x->step = ph->step_base + g;
    x->buf = COLL_BUF_X;
    x->reduce = !sending && rs;
    x->post = sending;
    uint32_t idx_in_phase = g * ph->chunks + j;
    x->match = (sending ? ph->recv_base : ph->send_base) + idx_in_phase;
    x->deps = sending ? (g == 0 ? ph->prev_chunks : 1) : 0;
    x->unblock_port = ph->port;
    x->unblock_lo = x->unblock_hi = x->unblock_deps = x->unblock_ports = 0;
}

static void ring_send(const coll_sched *s, uint32_t rank, uint32_t port, uint32_t i,
                      coll_xfer *x)
{
    const ring_sched *st = coll_sched_state(s);
    const coll_sched_desc *d = coll_sched_d(s);
    const ring_phase *ph = ring_send_phase(st, port, i);
    uint32_t pos = ring_pos(ph, rank), q = st->q[ph->level], g = i - ph->send_base, j = 0;
    if (ph->chunks > 1) {
        j = g % ph->chunks;
        g /= ph->chunks;
    }
    if (st->levels == 1) {
        ring_flat_op(st, ph, d->elem_bytes, pos, g, j, true, x);
        return;
    }
    bool red;
    uint32_t lab = ring_label(ph, q, ring_vpos(st, ph, pos), g, &red);
    *x = (coll_xfer){.peer = ring_neighbour(st, ph, pos, +1),
                     .match = ph->recv_base + g * ph->chunks + j, .port = port,
                     .step = ph->step_base + g, .deps = g == 0 ? ph->prev_chunks : 1,
                     .buf = COLL_BUF_X, .post = true};
    ring_chunk(st, d, ph, pos, lab, j, &x->offset, &x->bytes);
}

/* send_deps of a one-level ring: the segment's size, the peer and the match, no offset. */
static void ring_send_deps(const coll_sched *s, uint32_t rank, uint32_t port, uint32_t i,
                           coll_xfer *x)
{
    const ring_sched *st = coll_sched_state(s);
    if (st->levels != 1) {
        ring_send(s, rank, port, i, x);
        return;
    }
    const ring_phase *ph = ring_send_phase(st, port, i);
    uint32_t k = ring_pos(ph, rank), q = st->q[0], g = i - ph->send_base, j = 0;
    if (ph->chunks > 1) {
        j = g % ph->chunks;
        g /= ph->chunks;
    }
    bool fwd = ph->dir > 0;
    uint32_t v = fwd || k == 0 ? k : q - k;
    int64_t l = (int64_t)v + ph->o - g; /* (the gather's shift of ring_flat_op is q: none) */
    while (l < 0)
        l += q;
    while (l >= q)
        l -= q;
    uint32_t ks = fwd || l == 0 ? (uint32_t)l : q - (uint32_t)l;
    uint32_t idx = ph->p2r ? ph->p2r[ks] : ks;
    if (st->seg_major) {
        uint64_t off;
        ring_lane_chunk(st, ph, coll_sched_d(s)->elem_bytes, idx, j, &off, &x->bytes);
    } else {
        uint32_t c = idx < ph->sr;
        x->bytes = (ph->cq[c] + (j < ph->cr[c])) * coll_sched_d(s)->elem_bytes +
                   (idx == q - 1 && j == ph->chunks - 1 ? ph->rem : 0);
    }
    uint32_t kp = fwd ? (k + 1 == q ? 0 : k + 1) : (k == 0 ? q - 1 : k - 1);
    x->peer = ph->p2r ? ph->p2r[kp] : kp;
    x->match = ph->recv_base + g * ph->chunks + j;
    x->deps = g == 0 ? ph->prev_chunks : 1;
    x->post = true;
}

static void ring_recv(const coll_sched *s, uint32_t rank, uint32_t i, coll_xfer *x)
{
    const ring_sched *st = coll_sched_state(s);
    const coll_sched_desc *d = coll_sched_d(s);
    const ring_phase *ph = ring_recv_phase(st, i);
    uint32_t pos = ring_pos(ph, rank), q = st->q[ph->level], g = i - ph->recv_base, j = 0;
    if (ph->chunks > 1) {
        j = g % ph->chunks;
        g /= ph->chunks;
    }
    if (st->levels == 1) {
        ring_flat_op(st, ph, d->elem_bytes, pos, g, j, false, x);
    } else {
        uint32_t v = ring_vpos(st, ph, pos);
        bool red;
        uint32_t lab = ring_label(ph, q, v ? v - 1 : q - 1, g, &red);
        *x = (coll_xfer){.peer = ring_neighbour(st, ph, pos, -1),
                         .match = ph->send_base + g * ph->chunks + j, .port = ph->port,
                         .step = ph->step_base + g, .buf = COLL_BUF_X, .reduce = red};
        ring_chunk(st, d, ph, pos, lab, j, &x->offset, &x->bytes);
    }
    if (g + 1 < ph->steps) {
        x->unblock_port = ph->port;
        x->unblock_lo = ph->send_base + (g + 1) * ph->chunks + j;
        x->unblock_hi = x->unblock_lo + 1;
        x->unblock_deps = 1;
    } else if (ph->next >= 0) {
        const ring_phase *nx = &st->ph[ph->next];
        x->unblock_port = nx->port;
        x->unblock_lo = nx->send_base;
        x->unblock_hi = nx->send_base + nx->chunks;
        x->unblock_deps = nx->prev_chunks;
    }
}

/* recv_deps: who sends it, whether it reduces, what it unblocks — no bytes or offset. */
static void ring_recv_deps(const coll_sched *s, uint32_t rank, uint32_t i, coll_xfer *x)
{
    const ring_sched *st = coll_sched_state(s);
    if (st->levels != 1) {
        ring_recv(s, rank, i, x);
        return;
    }
    const ring_phase *ph = ring_recv_phase(st, i);
    uint32_t k = ring_pos(ph, rank), q = st->q[0], g = i - ph->recv_base, j = 0;
    if (ph->chunks > 1) {
        j = g % ph->chunks;
        g /= ph->chunks;
    }
    uint32_t kp = ph->dir > 0 ? (k == 0 ? q - 1 : k - 1) : (k + 1 == q ? 0 : k + 1);
    x->peer = ph->p2r ? ph->p2r[kp] : kp;
    x->port = ph->port;
    x->reduce = ph->mode == RING_RS || (ph->mode == RING_AR && g < q - 1);
    x->unblock_port = ph->port;
    x->unblock_ports = 0;
    if (g + 1 < ph->steps) {
        x->unblock_lo = ph->send_base + (g + 1) * ph->chunks + j;
        x->unblock_hi = x->unblock_lo + 1;
        x->unblock_deps = 1;
    } else if (ph->next >= 0) {
        const ring_phase *nx = &st->ph[ph->next];
        x->unblock_port = nx->port;
        x->unblock_lo = nx->send_base;
        x->unblock_hi = nx->send_base + nx->chunks;
        x->unblock_deps = nx->prev_chunks;
    } else {
        x->unblock_lo = x->unblock_hi = x->unblock_deps = 0;
    }
}

static uint32_t ring_ports(const coll_sched *s)
{
    const ring_sched *st = coll_sched_state(s);
    return st->halves;
}

static uint32_t ring_steps(const coll_sched *s)
{
    const ring_sched *st = coll_sched_state(s);
    return st->steps;
}

static uint32_t ring_sends(const coll_sched *s, uint32_t rank, uint32_t port)
{
    (void)rank;
    const ring_sched *st = coll_sched_state(s);
    return port < st->halves ? st->sends[port] : 0;
}

static uint32_t ring_recvs(const coll_sched *s, uint32_t rank)
{
    (void)rank;
    const ring_sched *st = coll_sched_state(s);
    return st->recvs;
}

/* Appends a phase and lays out its ops after those before it; false when the counts would
 * pass 32 bits. */
static bool ring_add_phase(ring_sched *st, const coll_sched_desc *d, ring_phase ph,
                           uint64_t seg_max, bool chained)
{
    uint32_t q = st->q[ph.level];
    ph.steps = (ph.mode == RING_AR ? 2 : 1) * (q - 1);
    uint64_t c = coll_chunks(seg_max, d->chunk_bytes);
    uint64_t ops = (uint64_t)ph.steps * c;
    if (c > UINT32_MAX || st->sends[ph.port] + ops > UINT32_MAX || st->recvs + ops > UINT32_MAX ||
        (uint64_t)st->steps + ph.steps > UINT32_MAX)
        return false;
    ph.chunks = (uint32_t)c;
    if (st->levels == 1 && !st->seg_major) {
        uint32_t el = d->elem_bytes;
        uint64_t len = coll_part_bytes(d->bytes, el, st->halves, ph.half), units = len / el;
        ph.r_off = coll_part_off(d->bytes, el, st->halves, ph.half);
        ph.squ = units / q;
        ph.sr = (uint32_t)(units % q);
        ph.rem = len % el;
        for (int k = 0; k < 2; k++) {
            ph.cq[k] = (ph.squ + (uint64_t)k) / c;
            ph.cr[k] = (uint32_t)((ph.squ + (uint64_t)k) % c);
        }
    }
    if (!ph.p2r && !ph.r2p) { /* the schedule's order (a lane in its own sets both) */
        ph.p2r = st->pos2rank;
        ph.r2p = st->rank2pos;
    }
    ph.send_base = st->sends[ph.port];
    ph.recv_base = st->recvs;
    ph.step_base = st->steps;
    ph.next = -1;
    ph.prev_chunks = 0;
    if (chained && st->n_ph > 0) {
        ph.prev_chunks = st->ph[st->n_ph - 1].chunks;
        st->ph[st->n_ph - 1].next = (int32_t)st->n_ph;
    }
    st->sends[ph.port] += (uint32_t)ops;
    st->recvs += (uint32_t)ops;
    st->steps += ph.steps;
    st->ph[st->n_ph++] = ph;
    return true;
}

/* Sets up levels (after dropping levels of one rank) and the position maps. */
static np_status ring_setup(coll_sched *s, ring_sched **out, const uint32_t *levels,
                            uint32_t n_levels, uint32_t halves, np_err *err)
{
    const coll_sched_desc *d = coll_sched_d(s);
    ring_sched *st = calloc(1, sizeof *st);
    if (!st)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory making a schedule");
    coll_sched_set_state(s, st);
    st->halves = halves;
    uint32_t stride = 1;
    for (uint32_t e = 0; e < n_levels; e++) {
        if (levels[e] < 2)
            continue;
        st->q[st->levels] = levels[e];
        st->stride[st->levels++] = stride;
        stride *= levels[e];
    }
    st->pos2rank = d->order;
    if (d->order) {
        st->rank2pos = malloc((size_t)d->ranks * sizeof *st->rank2pos);
        if (!st->rank2pos)
            return np_err_set(err, NP_ERR_NOMEM, "out of memory making a schedule");
        for (uint32_t k = 0; k < d->ranks; k++)
            st->rank2pos[d->order[k]] = k;
    }
    *out = st;
    return NP_OK;
}

static np_status ring_too_many(const coll_sched_desc *d, np_err *err)
{
    return np_err_set(err, NP_ERR_RANGE, "%s over %" PRIu32 " ranks in chunks of %" PRIu64
                      " B has more than 2^32 messages per rank; use a larger chunk",
                      coll_op_name(d->op), d->ranks, d->chunk_bytes);
}

/* The largest part `lane` of `lanes` of a segment of a p-way split of `bytes`: of the first
 * segment (which takes the extra elements) or the last (which takes the remainder bytes). */
static uint64_t ring_lane_max(uint64_t bytes, uint32_t el, uint32_t p, uint32_t lanes,
                              uint32_t lane)
{
    uint64_t a = coll_part_bytes(coll_part_bytes(bytes, el, p, 0), el, lanes, lane);
    uint64_t b = coll_part_bytes(coll_part_bytes(bytes, el, p, p - 1), el, lanes, lane);
    return a > b ? a : b;
}

static np_status ring_init_mode(coll_sched *s, ring_mode mode, uint32_t halves, np_err *err)
{
    const coll_sched_desc *d = coll_sched_d(s);
    uint32_t p = d->ranks;
    bool channels = halves == 1 && d->channels > 1;
    if (channels)
        halves = d->channels;
    ring_sched *st;
    if (ring_setup(s, &st, &p, 1, halves, err) != NP_OK)
        return err->status;
    if (st->levels == 0)
        return NP_OK;
    st->seg_major = channels;
    st->bytes = d->bytes;
    if (channels && d->channel_orders) {
        if (!(st->lane_r2p = malloc((size_t)halves * p * sizeof *st->lane_r2p)))
            return np_err_set(err, NP_ERR_NOMEM, "out of memory making a schedule");
        for (uint32_t h = 0; h < halves; h++)
            for (uint32_t k = 0; k < p; k++)
                st->lane_r2p[(size_t)h * p + d->channel_orders[(size_t)h * p + k]] = k;
    }
    for (uint32_t h = 0; h < halves; h++) {
        uint64_t seg = channels ? ring_lane_max(d->bytes, d->elem_bytes, p, halves, h)
                                : coll_part_max(coll_part_bytes(d->bytes, d->elem_bytes, halves, h),
                                                d->elem_bytes, p);
        ring_phase ph = {.mode = mode, .o = mode == RING_RS ? -1 : 0,
                         .dir = h && !channels ? -1 : +1, .port = h, .level = 0, .half = h};
        if (st->lane_r2p) {
            ph.p2r = d->channel_orders + (size_t)h * p;
            ph.r2p = st->lane_r2p + (size_t)h * p;
        }
        if (!ring_add_phase(st, d, ph, seg, false))
            return ring_too_many(d, err);
    }
    return NP_OK;
}

static np_status ring_ar_init(coll_sched *s, np_err *err)
{
    return ring_init_mode(s, RING_AR, 1, err);
}

static np_status ring_ag_init(coll_sched *s, np_err *err)
{
    return ring_init_mode(s, RING_AG, 1, err);
}

static np_status ring_rs_init(coll_sched *s, np_err *err)
{
    return ring_init_mode(s, RING_RS, 1, err);
}

static np_status biring_init(coll_sched *s, np_err *err)
{
    return ring_init_mode(s, RING_AR, 2, err);
}

/* The divisor of p nearest sqrt(p) (at most sqrt(p)). */
static uint32_t ring_sqrt_divisor(uint32_t p)
{
    uint32_t best = 1;
    for (uint32_t k = 1; (uint64_t)k * k <= p; k++)
        if (p % k == 0)
            best = k;
    return best;
}

static np_status hier_init(coll_sched *s, np_err *err)
{
    const coll_sched_desc *d = coll_sched_d(s);
    uint32_t p = d->ranks, lv[COLL_MAX_LEVELS], n = d->n_levels;
    if (n == 0) {
        lv[0] = ring_sqrt_divisor(p);
        lv[1] = p / lv[0];
        n = 2;
    } else {
        uint64_t prod = 1;
        for (uint32_t e = 0; e < n && e < COLL_MAX_LEVELS; e++) {
            lv[e] = d->level_ranks[e];
            prod *= lv[e] ? lv[e] : 0;
        }
        if (n > COLL_MAX_LEVELS || prod != p)
            return np_err_set(err, NP_ERR_INCONSISTENT, "hierarchical all-reduce: %" PRIu32
                              " ranks are not levels of %" PRIu32 "%s%s", p, lv[0],
                              n > 1 ? " x ..." : "", n > COLL_MAX_LEVELS ? " (at most 4)" : "");
    }
    ring_sched *st = NULL;
    if (ring_setup(s, &st, lv, n, 1, err) != NP_OK)
        return err->status;
    uint32_t L = st->levels, el = d->elem_bytes;
    uint64_t nmax[COLL_MAX_LEVELS + 1];
    nmax[0] = d->bytes;
    for (uint32_t e = 0; e < L; e++)
        nmax[e + 1] = coll_part_max(nmax[e], el, st->q[e]);
    /* reduce-scatter up the levels, all-reduce at the top, all-gather back down */
    for (uint32_t k = 0; k + 1 < 2 * L; k++) {
        uint32_t e = k < L ? k : 2 * L - 2 - k;
        ring_mode m = k + 1 < L ? RING_RS : k + 1 == L ? RING_AR : RING_AG;
        ring_phase ph = {.mode = m, .o = m == RING_AG ? 1 : 0, .dir = +1, .port = 0,
                         .level = e};
        if (!ring_add_phase(st, d, ph, nmax[e + 1], true))
            return ring_too_many(d, err);
    }
    return NP_OK;
}

#define RING_OPS(op, algo, init)                                                           \
    {op, algo, init, ring_ports, ring_steps, ring_sends, ring_recvs, ring_send, ring_recv, \
     ring_recv_deps, ring_free, ring_send_deps, NULL}
const coll_sched_ops coll_ring_all_reduce = RING_OPS(COLL_OP_ALL_REDUCE, COLL_ALGO_RING,
                                                     ring_ar_init);
const coll_sched_ops coll_ring_all_gather = RING_OPS(COLL_OP_ALL_GATHER, COLL_ALGO_RING,
                                                     ring_ag_init);
const coll_sched_ops coll_ring_reduce_scatter = RING_OPS(COLL_OP_REDUCE_SCATTER, COLL_ALGO_RING,
                                                         ring_rs_init);
const coll_sched_ops coll_biring_all_reduce = RING_OPS(COLL_OP_ALL_REDUCE, COLL_ALGO_BIRING,
                                                       biring_init);
const coll_sched_ops coll_hier_all_reduce = RING_OPS(COLL_OP_ALL_REDUCE, COLL_ALGO_HIER,
                                                     hier_init);
