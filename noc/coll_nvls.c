/* coll_nvls.c — all-reduce in a switch that reduces (NCCL's NVLS: NVLink SHARP on a third-
 * generation NVSwitch), as a schedule whose last rank is the switch.
 *
 * The p chips' ranks are 0 .. p-1; rank p is the switch (coll_sched_switches: 1). The buffer is
 * cut into C channels (coll_sched_desc.channels; NCCL's NVLS channels), each a contiguous part
 * run as its own pipeline on its own ports, and each channel's part into L slices (NCCL's NVLS
 * loops: a chunk of every rank's segment, chunk_bytes per rank; 128 KiB when not given; K = C L
 * slices in all, at most NVLS_MAX_SLICES), each slice into p segments. For each slice k, in
 * order within its channel c:
 *
 *   1. every chip sends each segment j of the slice up to the switch (port 2c, segments in
 *      order 0 .. p-1), which adds it into its copy (multimem.ld_reduce reads every chip);
 *   2. once all p have arrived, the switch sends the sum of segment j down to chip j (port
 *      c p + j);
 *   3. chip j sends it back up (port 2c + 1: multimem.st to the multicast address);
 *   4. the switch sends it down to every chip: the multicast, one send on each of the ports
 *      C p + c p + r (to chip r: the segments in order), all unblocked by the one receive of
 *      step 3 (coll_xfer.unblock_ports).
 *
 * With heads_serial, each chip takes a channel's slices one at a time, as NCCL's heads do
 * (every chip is the head of one segment of every slice; NCCL's reduce warps load-reduce a
 * chunk, store it, fence and post, then poll for the next, all chips in step): a chip posts
 * its last contribution to each slice (coll_xfer.post), so that with a serial protocol its
 * port waits the protocol's step, less the path, before its contributions to the next.
 *
 * So each chip's link to the switch carries n + n/p bytes each way for an all-reduce of n
 * bytes, where a ring moves 2(p-1)/p n; the switch's reductions take no time of a chip's. Tags:
 * step 4k + phase. Receives: a chip's, per slice, the sum of its segment then the p multicast
 * segments (by j); the switch's, per slice, the p x p contributions (segment j from chip r at
 * j p + r) then the p stores coming back (by j). Sends of the switch's port c p + j: the sum
 * of segment j of the channel's slices; of port C p + c p + r: segment j of the channel's
 * slice l at l p + j; of a chip's port 2c: segment j of slice l at l p + j; of its port
 * 2c + 1: the store of slice l at l.
 */
#include <inttypes.h>
#include <stdlib.h>

#include "coll_impl.h"

#define NVLS_CHUNK (128u << 10) /* NCCL's NCCL_NVLS_CHUNKSIZE default (src/transport/nvls.cc) */
#define NVLS_MAX_SLICES 64      /* the pipeline's depth at most: events stay bounded */
#define NVLS_MAX_SLICES_SERIAL 8192 /* ... with heads_serial (NCCL's loops: channels x loops) */

typedef struct nvls_sched {
    uint32_t p, C, L, K; /* chips; channels; slices per channel; slices */
    bool serial;         /* heads_serial */
    uint64_t bytes;
    uint32_t el;
} nvls_sched;

/* Offset and bytes of segment j of slice k. */
static void nvls_seg(const nvls_sched *st, uint32_t k, uint32_t j, uint64_t *off, uint64_t *n)
{
    uint32_t c = k / st->L, l = k % st->L;
    uint64_t co = coll_part_off(st->bytes, st->el, st->C, c);
    uint64_t cn = coll_part_bytes(st->bytes, st->el, st->C, c);
    uint64_t so = co + coll_part_off(cn, st->el, st->L, l);
    uint64_t sn = coll_part_bytes(cn, st->el, st->L, l);
    *off = so + coll_part_off(sn, st->el, st->p, j);
    *n = coll_part_bytes(sn, st->el, st->p, j);
}

static np_status nvls_init(coll_sched *s, np_err *err)
{
    const coll_sched_desc *d = coll_sched_d(s);
    nvls_sched *st = calloc(1, sizeof *st);
    if (!st)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory making a schedule");
    coll_sched_set_state(s, st);
    st->p = d->ranks;
    st->bytes = d->bytes;
    st->el = d->elem_bytes;
    st->serial = d->heads_serial;
    st->C = d->channels > 1 ? d->channels : 1;
    if (st->C > COLL_MAX_CHANNELS)
        st->C = COLL_MAX_CHANNELS;
    uint64_t chunk = d->chunk_bytes ? d->chunk_bytes : NVLS_CHUNK;
    uint64_t per = (uint64_t)chunk * st->p; /* a slice: a chunk of every rank's segment */
    uint64_t part = (d->bytes + st->C - 1) / st->C, l = (part + per - 1) / per;
    uint64_t most = (st->serial ? NVLS_MAX_SLICES_SERIAL : NVLS_MAX_SLICES) / st->C;
    most = most ? most : 1;
    st->L = (uint32_t)(l < 1 ? 1 : l > most ? most : l);
    st->K = st->C * st->L;
    if (st->p < 2)
        st->K = 0; /* one rank: nothing to do */
    return NP_OK;
}

static uint32_t nvls_ports(const coll_sched *s)
{
    const nvls_sched *st = coll_sched_state(s);
    return st->p < 2 ? 1 : 2 * st->C * st->p;
}

static uint32_t nvls_steps(const coll_sched *s)
{
    const nvls_sched *st = coll_sched_state(s);
    return 4 * st->K;
}

static uint32_t nvls_switches(const coll_sched *s)
{
    const nvls_sched *st = coll_sched_state(s);
    return st->p < 2 ? 0 : 1;
}

static uint32_t nvls_sends(const coll_sched *s, uint32_t rank, uint32_t port)
{
    const nvls_sched *st = coll_sched_state(s);
    if (st->K == 0)
        return 0;
    uint32_t cp = st->C * st->p;
    if (rank < st->p)
        return port >= 2 * st->C ? 0 : port % 2 == 0 ? st->L * st->p : st->L;
    return port < cp ? st->L : port < 2 * cp ? st->L * st->p : 0;
}

static uint32_t nvls_recvs(const coll_sched *s, uint32_t rank)
{
    const nvls_sched *st = coll_sched_state(s);
    return rank < st->p ? st->K * (st->p + 1) : st->K * (st->p * st->p + st->p);
}

static void nvls_send(const coll_sched *s, uint32_t rank, uint32_t port, uint32_t i,
                      coll_xfer *x)
{
    const nvls_sched *st = coll_sched_state(s);
    uint32_t p = st->p, L = st->L, cp = st->C * p, c, l, j, phase;
    uint64_t up = (uint64_t)p * p + p, down = p + 1; /* receives per slice: switch, chip */
    bool store = false;
    if (rank < p) {
        c = port / 2;
        store = port % 2;
        l = store ? i : i / p;
        j = store ? rank : i % p;
        uint32_t k = c * L + l;
        if (!store) { /* 1: segment j of slice l up (heads_serial: the last posted) */
            phase = 0;
            *x = (coll_xfer){.peer = p, .match = (uint32_t)(k * up + (uint64_t)j * p + rank),
                             .post = st->serial && j + 1 == p};
        } else { /* 3: its segment's sum back up */
            phase = 2;
            *x = (coll_xfer){.peer = p, .match = (uint32_t)(k * up + (uint64_t)p * p + j),
                             .deps = 1};
        }
    } else if (port < cp) { /* 2: the sum of segment j down to chip j */
        c = port / p, j = port % p, l = i, phase = 1;
        uint32_t k = c * L + l;
        *x = (coll_xfer){.peer = j, .match = (uint32_t)(k * down), .deps = p};
    } else { /* 4: segment j down to chip r */
        uint32_t r = (port - cp) % p;
        c = (port - cp) / p, l = i / p, j = i % p, phase = 3;
        uint32_t k = c * L + l;
        *x = (coll_xfer){.peer = r, .match = (uint32_t)(k * down + 1 + j), .deps = 1};
    }
    uint32_t k = c * L + l;
    x->port = port;
    x->step = 4 * k + phase;
    x->buf = COLL_BUF_X;
    nvls_seg(st, k, j, &x->offset, &x->bytes);
}

static void nvls_recv(const coll_sched *s, uint32_t rank, uint32_t i, coll_xfer *x)
{
    const nvls_sched *st = coll_sched_state(s);
    uint32_t p = st->p, L = st->L, cp = st->C * p, k, j;
    if (rank < p) {
        k = i / (p + 1);
        uint32_t m = i % (p + 1), c = k / L, l = k % L;
        if (m == 0) { /* the sum of its segment: its store back up may leave */
            j = rank;
            *x = (coll_xfer){.peer = p, .match = l, .port = c * p + j, .step = 4 * k + 1,
                             .unblock_port = 2 * c + 1, .unblock_lo = l,
                             .unblock_hi = l + 1, .unblock_deps = 1};
        } else { /* segment j multicast, on the switch's port to this chip */
            j = m - 1;
            *x = (coll_xfer){.peer = p, .match = l * p + j, .port = cp + c * p + rank,
                             .step = 4 * k + 3};
        }
    } else {
        uint32_t per = p * p + p;
        k = i / per;
        uint32_t m = i % per, c = k / L, l = k % L;
        if (m < p * p) { /* segment j from chip r, added in; the p of them free the sum */
            j = m / p;
            uint32_t r = m % p;
            *x = (coll_xfer){.peer = r,
                             .match = l * p + j, .port = 2 * c, .step = 4 * k, .reduce = true,
                             .unblock_port = c * p + j, .unblock_lo = l, .unblock_hi = l + 1,
                             .unblock_deps = p};
        } else { /* segment j back from chip j: the multicast may leave */
            j = m - p * p;
            *x = (coll_xfer){.peer = j, .match = l, .port = 2 * c + 1, .step = 4 * k + 2,
                             .unblock_port = cp + c * p, .unblock_ports = p,
                             .unblock_lo = l * p + j, .unblock_hi = l * p + j + 1,
                             .unblock_deps = 1};
        }
    }
    x->buf = COLL_BUF_X;
    nvls_seg(st, k, j, &x->offset, &x->bytes);
}

const coll_sched_ops coll_nvls_all_reduce = {
    .op = COLL_OP_ALL_REDUCE, .algo = COLL_ALGO_NVLS, .init = nvls_init, .ports = nvls_ports,
    .steps = nvls_steps, .sends = nvls_sends, .recvs = nvls_recvs, .send = nvls_send,
    .recv = nvls_recv, .switches = nvls_switches,
};
