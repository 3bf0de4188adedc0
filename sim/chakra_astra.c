/* chakra_astra.c — ASTRA-sim's analytical network (its network YAML) for an npusim chip
 * network (chakra.h). One dimension per level of the topology, each with its npus_count, its
 * bandwidth per NPU in each direction (GB/s: a link's payload rate, link_gb_per_s x
 * link_efficiency, times the links a chip has into that dimension's switch) and its latency
 * (ns: a link hop, plus the switch where there is one). */
#include "chakra.h"

#include <stdio.h>

static bool ca_fail(char *why, size_t n, const char *msg)
{
    snprintf(why, n, "%s", msg);
    return false;
}

bool chakra_astra_network(const arch_config *cfg, uint32_t ranks, char *buf, size_t n,
                          char *why, size_t nwhy)
{
    const arch_system *s = &cfg->system;
    const char *topo[3];
    uint32_t count[3], dims = 0;
    double bw[3], lat[3];
    double link = s->link_gb_per_s * s->link_efficiency;
    buf[0] = why[0] = 0;
    if (ranks != (uint32_t)s->chips) {
        snprintf(why, nwhy, "the run uses %u of the network's %lld chips: ASTRA-sim's network "
                 "must hold exactly the traced ranks (run with system.chips = %u and its "
                 "topology's sizes)", ranks, (long long)s->chips, ranks);
        return false;
    }
    switch (s->topology) {
    case ARCH_TOPOLOGY_RING:
        topo[dims] = "Ring", count[dims] = ranks, bw[dims] = link, lat[dims++] = s->link_latency_ns;
        break;
    case ARCH_TOPOLOGY_TORUS2D:
    case ARCH_TOPOLOGY_TORUS3D: {
        int side[3] = {s->torus_x, s->torus_y,
                       s->topology == ARCH_TOPOLOGY_TORUS3D ? s->torus_z : 1};
        for (int d = 0; d < 3; d++)
            if (side[d] > 1)
                topo[dims] = "Ring", count[dims] = (uint32_t)side[d], bw[dims] = link,
                lat[dims++] = s->link_latency_ns;
        break;
    }
    case ARCH_TOPOLOGY_FULLY_CONNECTED:
        topo[dims] = "FullyConnected", count[dims] = ranks, bw[dims] = link,
        lat[dims++] = s->link_latency_ns;
        break;
    case ARCH_TOPOLOGY_SWITCH:
        topo[dims] = "Switch", count[dims] = ranks, bw[dims] = link * s->links_per_chip,
        lat[dims++] = 2 * s->link_latency_ns + s->switch_latency_ns;
        break;
    case ARCH_TOPOLOGY_HIERARCHICAL:
        if (ranks % (uint32_t)s->island_chips)
            return ca_fail(why, nwhy, "the chips are not whole islands");
        topo[dims] = "Switch", count[dims] = (uint32_t)s->island_chips,
        bw[dims] = link * s->links_per_chip,
        lat[dims++] = 2 * s->link_latency_ns + s->switch_latency_ns;
        if (ranks > (uint32_t)s->island_chips)
            topo[dims] = "Switch", count[dims] = ranks / (uint32_t)s->island_chips,
            bw[dims] = s->scaleout_gb_per_s, lat[dims++] = s->scaleout_latency_ns;
        break;
    default:
        return ca_fail(why, nwhy, "a two-level fat tree has no ASTRA-sim analytical form of "
                       "the same links (its Switch is one non-blocking switch)");
    }
    if (dims == 0) /* one chip */
        topo[dims] = "Ring", count[dims] = 1, bw[dims] = link, lat[dims++] = s->link_latency_ns;
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
            k += (size_t)snprintf(buf + k, n - k, " ]%s\n", f == 2 ? "  # GB/s" : f == 3 ? "  # ns" : "");
    }
    return true;
}
