/* net_pkt.c — the packet engine of the chip network (NET_ENGINE_PACKET), beside the flow engine
 * of net.c: the same transfers, routes and callbacks, moved as packets.
 *
 * A transfer of S bytes is ceil(S / mtu) packets (the last one shorter). Every link has an
 * output port at its near end: the flows with packets waiting there are served round robin,
 * one packet at a time (per-flow fair queuing, which is what max-min sharing idealizes), and a
 * packet takes bytes / bandwidth on the wire. It is stored and forwarded: it reaches the far
 * end one link latency after its last byte left (plus the switch's latency when the far end
 * is a switch it passes through), and only then joins the queue of its next link.
 *
 * Link-level flow control: the far end of each link buffers buf_packets packets; the near end
 * holds a credit per free slot, spends one per packet sent, and gets it back one link latency
 * after the packet leaves the buffer (goes on along its path, or is taken by its destination
 * chip). A port without credit waits. On a torus, a packet that enters a ring (leaves its
 * source, or turns into another dimension or direction) needs two credits, one that goes on
 * along a ring one: there is always a free slot in every ring, so dimension-order routing
 * cannot deadlock (bubble flow control).
 *
 * Events, batched with every callback at their time (net_timer_at): a packet's last byte
 * leaving a port (the port takes the next packet), a packet arriving at a node, a credit
 * arriving back. A transfer's SENT is its last packet's last byte leaving the source;
 * DELIVERED is its last packet reaching the destination.
 *
 * Where the engines differ (docs/noc.md): a message of few packets pays store-and-forward on
 * every hop, (hops - 1) x packet / bandwidth more than a flow; ports serve packets, not
 * rates, so flows sharing several links do not always get max-min's exact shares; a full
 * buffer back-pressures its upstream ports (incast, all-to-all).
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "net_impl.h"

#define NET_PKT_MTU_DEFAULT 4096
#define NET_PKT_BUF_DEFAULT 32

static void pkt_tx_end(void *ctx, uint64_t arg);
static void pkt_arrive(void *ctx, uint64_t arg);
static void pkt_credit(void *ctx, uint64_t arg);

static uint32_t pkt_mtu(const net *n)
{
    return n->p.mtu_bytes ? n->p.mtu_bytes : NET_PKT_MTU_DEFAULT;
}

static uint32_t pkt_buf(const net *n)
{
    return n->p.buf_packets ? n->p.buf_packets : NET_PKT_BUF_DEFAULT;
}

np_status net_pkt_init(net *n, np_err *err)
{
    if (n->p.buf_packets == 1)
        return np_err_set(err, NP_ERR_RANGE, "the packet engine needs buffers of at least 2 "
                          "packets (bubble flow control), not 1");
    n->pk = calloc(n->n_links + 1, sizeof *n->pk);
    if (!n->pk)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory creating the packet engine");
    bool torus = n->p.topology == ARCH_TOPOLOGY_RING || n->p.topology == ARCH_TOPOLOGY_TORUS2D ||
                 n->p.topology == ARCH_TOPOLOGY_TORUS3D;
    for (uint32_t i = 0; i < n->n_links; i++) {
        net_pkt_link *pl = &n->pk[i];
        pl->credits = pkt_buf(n);
        pl->ring = UINT32_MAX;
        if (!torus)
            continue;
        /* the dimension whose coordinate differs, and the direction (+1 or wrapping round) */
        uint32_t a = n->links[i].from, b = n->links[i].to, stride = 1;
        for (uint32_t d = 0; d < 3; d++) {
            uint32_t k = n->p.dims[d], ca = (a / stride) % k, cb = (b / stride) % k;
            if (ca != cb) {
                pl->ring = 2 * d + ((ca + 1) % k == cb ? 0 : 1);
                break;
            }
            stride *= k;
        }
        if (pl->ring == UINT32_MAX) /* a dimension of 2: the pair's second link */
            pl->ring = 6;
    }
    return NP_OK;
}

void net_pkt_free(net *n)
{
    if (!n->pk)
        return;
    for (uint32_t i = 0; i < n->n_links; i++)
        free(n->pk[i].rr);
    free(n->pk);
    n->pk = NULL;
}

void net_pkt_flow_free(net *n, uint32_t id)
{
    net_pkt_flow *pf = n->cold[id].pk;
    if (!pf)
        return;
    free(pf->arrived);
    free(pf);
    n->cold[id].pk = NULL;
}

static void pkt_fail(net *n)
{
    n->oom = true;
}

/* Bytes of packet k of a flow. */
static uint32_t pkt_bytes(const net *n, const net_pkt_flow *pf, uint32_t k)
{
    return k + 1 < pf->packets ? pkt_mtu(n) : pf->last_bytes;
}

static bool pkt_rr_push(net_pkt_link *pl, uint64_t v)
{
    if (pl->rr_n == pl->rr_cap) {
        uint32_t cap = pl->rr_cap ? 2 * pl->rr_cap : 8;
        uint64_t *w = malloc((size_t)cap * sizeof *w);
        if (!w)
            return false;
        for (uint32_t i = 0; i < pl->rr_n; i++)
            w[i] = pl->rr[(pl->rr_head + i) % pl->rr_cap];
        free(pl->rr);
        pl->rr = w;
        pl->rr_head = 0;
        pl->rr_cap = cap;
    }
    pl->rr[(pl->rr_head + pl->rr_n++) % pl->rr_cap] = v;
    return true;
}

/* Credits a packet at hop h of flow f needs to go on link l: two when it enters a ring. */
static uint32_t pkt_need(const net *n, const net_flow *f, uint32_t h)
{
    const net_pkt_link *pl = &n->pk[f->links[h]];
    if (pl->ring == UINT32_MAX)
        return 1;
    return h == 0 || n->pk[f->links[h - 1]].ring != pl->ring ? 2 : 1;
}

/* Sends the next packet on link l if it is free and a waiting flow has the credits it needs:
 * the first in round-robin order (a flow entering a ring may wait while one going on along it
 * passes). */
static void pkt_try(net *n, uint32_t l)
{
    net_pkt_link *pl = &n->pk[l];
    if (pl->busy)
        return;
    uint64_t v = 0;
    uint32_t fid = 0, h = 0;
    bool found = false;
    for (uint32_t tries = pl->rr_n; tries > 0 && pl->credits > 0; tries--) {
        v = pl->rr[pl->rr_head];
        pl->rr_head = (pl->rr_head + 1) % pl->rr_cap;
        pl->rr_n--;
        fid = (uint32_t)v;
        h = (uint32_t)(v >> 32);
        if (pl->credits >= pkt_need(n, &n->flows[fid], h)) {
            found = true;
            break;
        }
        if (!pkt_rr_push(pl, v)) { /* to the back: the next one may fit */
            pkt_fail(n);
            return;
        }
    }
    if (!found)
        return; /* a credit's return or a new packet kicks it again */
    net_flow *f = &n->flows[fid];
    net_pkt_flow *pf = n->cold[fid].pk;
    uint32_t k = pf->sent[h]++;
    uint32_t bytes = pkt_bytes(n, pf, k);
    pl->credits--;
    pl->busy = true;
    pl->cur_flow = fid;
    pl->cur_hop = h;
    pl->cur_bytes = bytes;
    if (pf->sent[h] < pf->arrived[h]) {
        if (!pkt_rr_push(pl, v))
            pkt_fail(n);
    } else {
        pf->queued[h] = 0;
    }
    np_err e;
    uint64_t now = evq_now(n->q);
    if (h > 0 && /* it leaves the buffer at the far end of the previous link */
        net_timer_at(n, now + n->laux[f->links[h - 1]].lat_ps, pkt_credit, n, f->links[h - 1],
                     &e) != NP_OK)
        pkt_fail(n);
    if (net_timer_at(n, now + net_ceil_ps(bytes / n->links[l].bw), pkt_tx_end, n, l, &e) !=
        NP_OK)
        pkt_fail(n);
}

/* Flow fid has a packet waiting at hop h: into the link's round robin if not there. */
static void pkt_wait(net *n, uint32_t fid, uint32_t h)
{
    net_pkt_flow *pf = n->cold[fid].pk;
    uint32_t l = n->flows[fid].links[h];
    if (!pf->queued[h]) {
        pf->queued[h] = 1;
        if (!pkt_rr_push(&n->pk[l], (uint64_t)h << 32 | fid)) {
            pkt_fail(n);
            return;
        }
    }
    pkt_try(n, l);
}

np_status net_pkt_start(net *n, uint32_t id, np_err *err)
{
    net_flow *f = &n->flows[id];
    uint32_t mtu = pkt_mtu(n), H = f->n_links;
    uint64_t packets = (f->bytes + mtu - 1) / mtu;
    if (packets > UINT32_MAX)
        return np_err_set(err, NP_ERR_RANGE, "a transfer of %" PRIu64 " B is more than 2^32 "
                          "packets of %" PRIu32 " B", f->bytes, mtu);
    net_pkt_flow *pf = calloc(1, sizeof *pf);
    uint32_t *v = pf ? calloc((size_t)H * 2 * sizeof *v + H, 1) : NULL;
    if (!v) {
        free(pf);
        return np_err_set(err, NP_ERR_NOMEM, "out of memory starting a transfer");
    }
    pf->packets = (uint32_t)packets;
    pf->last_bytes = (uint32_t)(f->bytes - (packets - 1) * mtu);
    pf->arrived = v;
    pf->sent = v + H;
    pf->queued = (uint8_t *)(v + 2 * H);
    pf->arrived[0] = pf->packets;
    n->cold[id].pk = pf;
    f->state = NET_FLOW_PACKETS;
    f->t_sent = UINT64_MAX;
    pkt_wait(n, id, 0);
    return n->oom ? np_err_set(err, NP_ERR_NOMEM, "out of memory moving packets") : NP_OK;
}

/* A packet's last byte has left link l's near end. */
static void pkt_tx_end(void *ctx, uint64_t arg)
{
    net *n = ctx;
    uint32_t l = (uint32_t)arg;
    net_pkt_link *pl = &n->pk[l];
    uint32_t fid = pl->cur_flow, h = pl->cur_hop;
    net_flow *f = &n->flows[fid];
    net_pkt_flow *pf = n->cold[fid].pk;
    pl->busy = false;
    net_link_count(n, l, pl->cur_bytes);
    /* it reaches the far end a latency later (and passes a switch there) */
    uint64_t t = evq_now(n->q) + n->laux[l].lat_ps;
    if (h + 1 < f->n_links)
        t += n->node_lat[n->links[l].to];
    np_err e;
    if (net_timer_at(n, t, pkt_arrive, n, (uint64_t)h << 32 | fid, &e) != NP_OK)
        pkt_fail(n);
    if (h == 0 && pf->sent[0] == pf->packets) { /* the transfer's last byte has left */
        f->state = NET_FLOW_IN_FLIGHT;
        f->t_sent = evq_now(n->q);
        n->ev_bytes = f->bytes;
        if ((f->flags & NET_FLOW_NOTIFY) && f->fn)
            f->fn(f->ctx, f->arg, NET_EVENT_SENT);
    }
    pkt_try(n, l);
}

/* A packet of flow fid has reached the far end of its hop h. */
static void pkt_arrive(void *ctx, uint64_t arg)
{
    net *n = ctx;
    uint32_t fid = (uint32_t)arg, h = (uint32_t)(arg >> 32);
    net_flow *f = &n->flows[fid];
    net_pkt_flow *pf = n->cold[fid].pk;
    uint32_t l = f->links[h];
    np_err e;
    if (h + 1 < f->n_links) {
        pf->arrived[h + 1]++;
        pkt_wait(n, fid, h + 1);
        return;
    }
    /* the destination takes it: its slot frees at once */
    if (net_timer_at(n, evq_now(n->q) + n->laux[l].lat_ps, pkt_credit, n, l, &e) != NP_OK)
        pkt_fail(n);
    if (++pf->delivered < pf->packets)
        return;
    net_transfer_fn fn = f->fn;
    void *fctx = f->ctx;
    uint64_t farg = f->arg;
    n->ev_bytes = f->bytes;
    net_flow_release(n, fid);
    if (fn)
        fn(fctx, farg, NET_EVENT_DELIVERED);
}

static void pkt_credit(void *ctx, uint64_t arg)
{
    net *n = ctx;
    uint32_t l = (uint32_t)arg;
    n->pk[l].credits++;
    pkt_try(n, l);
}

np_status net_pkt_verify(const net *n, np_err *err)
{
    for (uint32_t i = 0; i < n->n_links; i++) {
        const net_pkt_link *pl = &n->pk[i];
        if (pl->credits > pkt_buf(n))
            return np_err_set(err, NP_ERR_INTERNAL, "link %" PRIu32 " has %" PRIu32 " credits "
                              "for a buffer of %" PRIu32, i, pl->credits, pkt_buf(n));
        for (uint32_t k = 0; k < pl->rr_n; k++) {
            uint64_t v = pl->rr[(pl->rr_head + k) % pl->rr_cap];
            uint32_t fid = (uint32_t)v, h = (uint32_t)(v >> 32);
            const net_flow *f = &n->flows[fid];
            const net_pkt_flow *pf = n->cold[fid].pk;
            if (f->state == NET_FLOW_FREE || !pf || h >= f->n_links || f->links[h] != i ||
                pf->sent[h] >= pf->arrived[h])
                return np_err_set(err, NP_ERR_INTERNAL, "link %" PRIu32 " waits for flow %"
                                  PRIu32 ", which has no packet for it", i, fid);
        }
    }
    return NP_OK;
}
