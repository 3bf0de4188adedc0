/* coll_nvls.c — all-reduce in a switch that reduces (NCCL's NVLS: NVLink SHARP on a third-
 * generation NVSwitch), as a schedule whose last rank is the switch.
 *
 * The p chips' ranks are 0 .. p-1; rank p is the switch (coll_sched_switches: 1). The buffer is
 * cut into K slices (pipelining: NCCL's NVLS chunk, 128 KiB of every rank's segment by
 * default, chunk_bytes when given; at most NVLS_MAX_SLICES), each slice into p segments, and
 * for each slice, in order:
 *
 *   1. every chip sends each segment j of the slice up to the switch (port 0, segments in
 *      order 0 .. p-1), which adds it into its copy (multimem.ld_reduce reads every chip);
 *   2. once all p have arrived, the switch sends the sum of segment j down to chip j (port j);
 *   3. chip j sends it back up (port 1: multimem.st to the multicast address);
 *   4. the switch sends it down to every chip: the multicast, one send on each of the ports
 *      p .. 2p - 1 (port p + r: the segments to chip r in order), all unblocked by the one
 *      receive of step 3 (coll_xfer.unblock_ports).
 *
 * So each chip's link to the switch carries n + n/p bytes each way for an all-reduce of n
 * bytes, where a ring moves 2(p-1)/p n; the switch's reductions take no time of a chip's. Tags:
 * step 4k + phase. Receives: a chip's, per slice, the sum of its segment then the p multicast
 * segments (by j); the switch's, per slice, the p x p contributions (segment j from chip r at
 * j p + r) then the p segments coming back (by j). Sends of the switch's port j < p: the sum of
 * segment j of each slice; of port p + r: segment j of slice k at k p + j.
 */
#include <inttypes.h>
#include <stdlib.h>

#include "coll_impl.h"

#define NVLS_CHUNK (128u << 10) /* NCCL's NCCL_NVLS_CHUNKSIZE default (src/transport/nvls.cc) */
#define NVLS_MAX_SLICES 64      /* the pipeline's depth at most: events stay bounded */

typedef struct nvls_sched {
    uint32_t p, K;
    uint64_t bytes;
    uint32_t el;
} nvls_sched;

/* Offset and bytes of segment j of slice k. */
static void nvls_seg(const nvls_sched *st, uint32_t k, uint32_t j, uint64_t *off, uint64_t *n)
{
    uint64_t so = coll_part_off(st->bytes, st->el, st->K, k);
    uint64_t sn = coll_part_bytes(st->bytes, st->el, st->K, k);
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
    uint64_t chunk = d->chunk_bytes ? d->chunk_bytes : NVLS_CHUNK;
    uint64_t per = (uint64_t)chunk * st->p; /* a slice: a chunk of every rank's segment */
    uint64_t k = (d->bytes + per - 1) / per;
    st->K = (uint32_t)(k < 1 ? 1 : k > NVLS_MAX_SLICES ? NVLS_MAX_SLICES : k);
    if (st->p < 2)
        st->K = 0; /* one rank: nothing to do */
    return NP_OK;
}

static uint32_t nvls_ports(const coll_sched *s)
{
    const nvls_sched *st = coll_sched_state(s);
    return st->p < 2 ? 1 : 2 * st->p;
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
    if (rank < st->p)
        return port == 0 ? st->K * st->p : port == 1 ? st->K : 0;
    return port < st->p ? st->K : port < 2 * st->p ? st->K * st->p : 0;
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
    uint32_t p = st->p, k, j, to, phase;
    uint64_t up = (uint64_t)p * p + p, down = p + 1; /* receives per slice: switch, chip */
    if (rank < p && port == 0) { /* 1: segment j of slice k up */
        k = i / p, j = i % p, to = p, phase = 0;
        *x = (coll_xfer){.peer = p, .match = (uint32_t)(k * up + (uint64_t)j * p + rank)};
    } else if (rank < p) { /* 3: its segment's sum back up */
        k = i, j = rank, to = p, phase = 2;
        *x = (coll_xfer){.peer = p, .match = (uint32_t)(k * up + (uint64_t)p * p + j),
                         .deps = 1};
    } else if (port < p) { /* 2: the sum of segment j down to chip j */
        k = i, j = port, to = j, phase = 1;
        *x = (coll_xfer){.peer = j, .match = (uint32_t)(k * down), .deps = p};
    } else { /* 4: segment j down to chip r = port - p */
        k = i / p, j = i % p, to = port - p, phase = 3;
        *x = (coll_xfer){.peer = to, .match = (uint32_t)(k * down + 1 + j), .deps = 1};
    }
    (void)to;
    x->port = port;
    x->step = 4 * k + phase;
    x->buf = COLL_BUF_X;
    nvls_seg(st, k, j, &x->offset, &x->bytes);
}

static void nvls_recv(const coll_sched *s, uint32_t rank, uint32_t i, coll_xfer *x)
{
    const nvls_sched *st = coll_sched_state(s);
    uint32_t p = st->p, k, j;
    if (rank < p) {
        k = i / (p + 1);
        uint32_t m = i % (p + 1);
        if (m == 0) { /* the sum of its segment: its send back up may leave */
            j = rank;
            *x = (coll_xfer){.peer = p, .match = k, .port = j, .step = 4 * k + 1,
                             .unblock_port = 1, .unblock_lo = k, .unblock_hi = k + 1,
                             .unblock_deps = 1};
        } else { /* segment j multicast, on the switch's port to this chip */
            j = m - 1;
            *x = (coll_xfer){.peer = p, .match = k * p + j, .port = p + rank,
                             .step = 4 * k + 3};
        }
    } else {
        uint32_t per = p * p + p;
        k = i / per;
        uint32_t m = i % per;
        if (m < p * p) { /* segment j from chip r, added in; the p of them free the sum */
            j = m / p;
            uint32_t r = m % p;
            *x = (coll_xfer){.peer = r, .match = k * p + j, .port = 0, .step = 4 * k,
                             .reduce = true, .unblock_port = j, .unblock_lo = k,
                             .unblock_hi = k + 1, .unblock_deps = p};
        } else { /* segment j back from chip j: the multicast may leave */
            j = m - p * p;
            *x = (coll_xfer){.peer = j, .match = k, .port = 1, .step = 4 * k + 2,
                             .unblock_port = p, .unblock_ports = p, .unblock_lo = k * p + j,
                             .unblock_hi = k * p + j + 1, .unblock_deps = 1};
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
