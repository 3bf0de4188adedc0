/* chakra_astra.c — ASTRA-sim's analytical network (its network YAML) for an npusim chip
 * network (chakra.h). One dimension per level of the topology, each with its npus_count, its
 * bandwidth per NPU in each direction and its latency per ASTRA-sim hop (ns). ASTRA-sim's
 * analytical network reads its "GB/s" as 2^30 bytes per second (bw_GBps_to_Bpns in
 * astra-network-analytical's NetworkFunction.cpp), so npusim's bytes per second are written
 * divided by 2^30: 50 GB/s (50e9 B/s) is 46.566 there.
 *
 * The figures are read off npusim's own network (noc/net.h), built from the architecture: the
 * route between two chips one step apart in the dimension gives its bottleneck bandwidth (the
 * links to one neighbour bundled: a ring's links_per_chip / 2, a torus's links_per_chip / (2 x
 * its dimensions), a switch's links_per_chip; net_topo.c) and its latency. ASTRA-sim counts a
 * Switch route as two hops of the given latency (chip -> switch -> chip), so a switch level's
 * latency is half the route's (a link hop plus half the switch's); a Ring or FullyConnected
 * neighbour is one hop. */
#include "chakra.h"

#include <stdio.h>

#include "evq.h"
#include "net.h"

static bool ca_fail(char *why, size_t n, const char *msg)
{
    snprintf(why, n, "%s", msg);
    return false;
}

/* The route a -> b of cfg's network: bandwidth (ASTRA-sim's GB/s: 2^30 B/s) and latency (ns)
 * divided by hops. */
static bool ca_route(net *nw, uint32_t a, uint32_t b, uint32_t hops, double *gb, double *ns,
                     char *why, size_t nwhy)
{
    net_path_info pi;
    np_err e;
    if (net_route(nw, a, b, &pi, &e) != NP_OK) {
        snprintf(why, nwhy, "%s", e.msg);
        return false;
    }
    *gb = pi.bytes_per_s / (double)(1u << 30);
    *ns = (double)pi.latency_ps * 1e-3 / hops;
    return true;
}

bool chakra_astra_network(const arch_config *cfg, uint32_t ranks, char *buf, size_t n,
                          char *why, size_t nwhy)
{
    const arch_system *s = &cfg->system;
    const char *topo[3];
    uint32_t count[3], dims = 0;
    uint32_t pair[3][2], hops[3]; /* a pair of chips one step apart in each dimension */
    double bw[3], lat[3];
    buf[0] = why[0] = 0;
    if (ranks != (uint32_t)s->chips) {
        snprintf(why, nwhy, "the run uses %u of the network's %lld chips: ASTRA-sim's network "
                 "must hold exactly the traced ranks (run with system.chips = %u and its "
                 "topology's sizes)", ranks, (long long)s->chips, ranks);
        return false;
    }
#define CA_DIM(name, cnt, a, b, h) \
    (topo[dims] = (name), count[dims] = (cnt), pair[dims][0] = (a), pair[dims][1] = (b), \
     hops[dims++] = (h))
    switch (s->topology) {
    case ARCH_TOPOLOGY_RING:
        if (ranks > 1)
            CA_DIM("Ring", ranks, 0, 1, 1);
        break;
    case ARCH_TOPOLOGY_TORUS2D:
    case ARCH_TOPOLOGY_TORUS3D: {
        uint32_t side[3] = {(uint32_t)s->torus_x, (uint32_t)s->torus_y,
                            s->topology == ARCH_TOPOLOGY_TORUS3D ? (uint32_t)s->torus_z : 1};
        for (uint32_t d = 0, stride = 1; d < 3; stride *= side[d], d++)
            if (side[d] > 1)
                CA_DIM("Ring", side[d], 0, stride, 1);
        break;
    }
    case ARCH_TOPOLOGY_FULLY_CONNECTED:
        if (ranks > 1)
            CA_DIM("FullyConnected", ranks, 0, 1, 1);
        break;
    case ARCH_TOPOLOGY_SWITCH:
        if (ranks > 1)
            CA_DIM("Switch", ranks, 0, 1, 2);
        break;
    case ARCH_TOPOLOGY_HIERARCHICAL: {
        uint32_t isl = (uint32_t)s->island_chips;
        if (ranks % isl)
            return ca_fail(why, nwhy, "the chips are not whole islands");
        if (isl > 1)
            CA_DIM("Switch", isl, 0, 1, 2);
        if (ranks > isl)
            CA_DIM("Switch", ranks / isl, 0, isl, 2);
        break;
    }
    default:
        return ca_fail(why, nwhy, "a two-level fat tree has no ASTRA-sim analytical form of "
                       "the same links (its Switch is one non-blocking switch)");
    }
#undef CA_DIM
    if (dims == 0) { /* one chip: a ring of one, never crossed */
        topo[0] = "Ring", count[0] = 1, dims = 1;
        bw[0] = s->link_gb_per_s * 1e9 * s->link_efficiency / (double)(1u << 30);
        lat[0] = s->link_latency_ns;
    } else {
        net_params p = {0};
        net_params_from_arch(cfg, &p);
        evq *q = NULL;
        net *nw = NULL;
        np_err e;
        bool ok = evq_create(&q, &e) == NP_OK && net_create(&p, q, NULL, &nw, &e) == NP_OK;
        if (!ok)
            snprintf(why, nwhy, "%s", e.msg);
        for (uint32_t d = 0; ok && d < dims; d++)
            ok = ca_route(nw, pair[d][0], pair[d][1], hops[d], &bw[d], &lat[d], why, nwhy);
        net_free(nw);
        evq_free(q);
        if (!ok)
            return false;
    }
    size_t k = 0;
    const char *key[4] = {"topology", "npus_count", "bandwidth", "latency"};
    for (int f = 0; f < 4 && k < n; f++) {
        k += (size_t)snprintf(buf + k, n - k, "%s: [ ", key[f]);
        for (uint32_t d = 0; d < dims && k < n; d++) {
            const char *sep = d + 1 < dims ? ", " : "";
            if (f == 0)
                k += (size_t)snprintf(buf + k, n - k, "%s%s", topo[d], sep);
            else if (f == 1)
                k += (size_t)snprintf(buf + k, n - k, "%u%s", count[d], sep);
            else
                k += (size_t)snprintf(buf + k, n - k, "%.17g%s", f == 2 ? bw[d] : lat[d], sep);
        }
        if (k < n)
            k += (size_t)snprintf(buf + k, n - k, " ]%s\n", f == 2 ? "  # GiB/s (ASTRA-sim's GB/s)" : f == 3 ? "  # ns" : "");
    }
    return true;
}
