/* net_topo.c — the chip-network topologies: how each builds its links and routes a pair.
 *
 * Bandwidth: a chip's links_per_chip links are spread evenly over the neighbours its topology
 * gives it, and the links to one neighbour (or to one switch) are bundled into one link of
 * their summed bandwidth; on a switch or fat tree each of a chip's links goes to its own
 * plane, and the planes are bundled the same way (identical planes with traffic spread over
 * them behave as one plane of the summed bandwidth).
 *
 *   ring, torus2d, torus3d  links to the +1 and -1 neighbour in every dimension longer than
 *                 1 (a dimension of 2 has two distinct links each way between the pair),
 *                 each of links_per_chip / (2 x dimensions) links. Dimension-order routing
 *                 (x, then y, then z), the shorter way round each ring; a tie goes +.
 *   fully_connected  a link from every chip to every other, of links_per_chip / (chips - 1)
 *                 links; one hop.
 *   switch        one switch (latency switch_latency), a link each way between it and every
 *                 chip of links_per_chip links; chip -> switch -> chip.
 *   fat_tree      leaf switches of radix/2 chips, radix/2 spine switches, one link from each
 *                 leaf to each spine, every port links_per_chip links wide (non-blocking).
 *                 Routing up to the spine numbered (destination chip mod radix/2) and down
 *                 ("D-mod-k", deterministic: the same pair always takes the same spine).
 *   hierarchical  islands of island_chips chips, each with an island switch (links_per_chip
 *                 links per chip, like NVSwitch); every chip also has a scale-out port of
 *                 scaleout_gb_per_s to one non-blocking scale-out switch (latency 0, half of
 *                 scaleout_latency on each side). Within an island via the island switch,
 *                 else via the scale-out switch.
 *
 * A switch topology's switch and a hierarchical island's switch are also endpoints of routes
 * of one link (switch_of, net_route): what a switch that reduces (NVLink SHARP) receives and
 * sends.
 */
#include <inttypes.h>
#include <stdlib.h>

#include "net.h"

/* ---- ring and tori: dimension-order routing ------------------------------------------------ */

typedef struct torus_data {
    uint32_t dims[3];
    uint32_t stride[3];
    uint32_t link0; /* first link id; chip c's link (dim d, dir s) = link[c][d][s] */
    uint32_t *link; /* chips * 6 entries, UINT32_MAX where absent */
} torus_data;

static np_status torus_build(net *n, const net_params *p, np_err *err)
{
    uint32_t nd = 0;
    for (int d = 0; d < 3; d++)
        nd += p->dims[d] > 1;
    if ((uint64_t)p->dims[0] * p->dims[1] * p->dims[2] != p->chips)
        return np_err_set(err, NP_ERR_INCONSISTENT, "torus %" PRIu32 "x%" PRIu32 "x%" PRIu32
                          " does not hold %" PRIu32 " chips", p->dims[0], p->dims[1],
                          p->dims[2], p->chips);
    torus_data *t = calloc(1, sizeof *t);
    if (!t)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory building a torus");
    net_set_topo_data(n, t); /* freed by net_free, also on failure */
    t->link = malloc((size_t)p->chips * 6 * sizeof *t->link);
    if (!t->link)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory building a torus");
    for (int d = 0; d < 3; d++)
        t->dims[d] = p->dims[d];
    t->stride[0] = 1;
    t->stride[1] = p->dims[0];
    t->stride[2] = p->dims[0] * p->dims[1];
    uint32_t per = p->links_per_chip / (2 * (nd ? nd : 1));
    double bw = p->link_bytes_per_s * (per ? per : 1);
    for (uint32_t c = 0; c < p->chips; c++)
        for (int d = 0; d < 3; d++) {
            uint32_t k = p->dims[d], co = (c / t->stride[d]) % k;
            for (int s = 0; s < 2; s++) {
                uint32_t *slot = &t->link[(size_t)c * 6 + (size_t)d * 2 + (size_t)s];
                *slot = UINT32_MAX;
                if (k < 2)
                    continue;
                uint32_t nco = s == 0 ? (co + 1) % k : (co + k - 1) % k;
                uint32_t nb = c - co * t->stride[d] + nco * t->stride[d];
                *slot = net_add_link(n, c, nb, bw, p->link_latency_ps);
                if (*slot == UINT32_MAX)
                    return np_err_set(err, NP_ERR_NOMEM, "out of memory building a torus");
            }
        }
    return NP_OK;
}

/* Free-function link lookup on the private table. */
static uint32_t torus_link(const torus_data *t, uint32_t c, int d, int s)
{
    return t->link[(size_t)c * 6 + (size_t)d * 2 + (size_t)s];
}

static void torus_route(const net *n, uint32_t src, uint32_t dst)
{
    const torus_data *t = net_topo_data(n);
    uint32_t cur = src;
    for (int d = 0; d < 3; d++) {
        uint32_t k = t->dims[d];
        if (k < 2)
            continue;
        uint32_t a = (cur / t->stride[d]) % k, b = (dst / t->stride[d]) % k;
        uint32_t fwd = (b + k - a) % k, back = (a + k - b) % k;
        int s = fwd <= back ? 0 : 1;
        uint32_t steps = s == 0 ? fwd : back;
        for (uint32_t i = 0; i < steps; i++) {
            uint32_t co = (cur / t->stride[d]) % k;
            uint32_t nco = s == 0 ? (co + 1) % k : (co + k - 1) % k;
            net_path_push(n, torus_link(t, cur, d, s));
            cur = cur - co * t->stride[d] + nco * t->stride[d];
        }
    }
}

/* ---- fully connected ---------------------------------------------------------------------- */

static np_status fc_build(net *n, const net_params *p, np_err *err)
{
    if (p->chips > 2048)
        return np_err_set(err, NP_ERR_RANGE, "a fully connected network of %" PRIu32
                          " chips is too large to build (at most 2048)", p->chips);
    uint32_t per = p->links_per_chip / (p->chips - 1);
    double bw = p->link_bytes_per_s * (per ? per : 1);
    for (uint32_t a = 0; a < p->chips; a++)
        for (uint32_t b = 0; b < p->chips; b++)
            if (a != b && net_add_link(n, a, b, bw, p->link_latency_ps) == UINT32_MAX)
                return np_err_set(err, NP_ERR_NOMEM, "out of memory building links");
    return NP_OK;
}

static void fc_route(const net *n, uint32_t src, uint32_t dst)
{
    uint32_t c = net_chips(n);
    net_path_push(n, src * (c - 1) + (dst < src ? dst : dst - 1));
}

/* ---- switches ----------------------------------------------------------------------------- */

/* Links chip c <-> switch s are at up[c] (c -> s) and up[c] + 1 (s -> c). */
typedef struct sw_data {
    uint32_t half;      /* fat tree: chips per leaf and spines */
    uint32_t n_leaves;
    uint32_t *up;       /* chips: chip -> its first switch (island / leaf) link id */
    uint32_t *so;       /* hierarchical: chip -> scale-out switch link id */
    uint32_t *leaf_up;  /* fat tree: leaf l -> spine s link at leaf_up[l * half + s], +1 back */
} sw_data;

static sw_data *sw_data_new(net *n, const net_params *p, bool so)
{
    sw_data *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    net_set_topo_data(n, d);
    d->up = malloc((size_t)p->chips * sizeof *d->up);
    if (so)
        d->so = malloc((size_t)p->chips * sizeof *d->so);
    if (!d->up || (so && !d->so))
        return NULL;
    return d;
}

static void sw_data_free(void *p)
{
    sw_data *d = p;
    free(d->up);
    free(d->so);
    free(d->leaf_up);
    free(d);
}

static void torus_data_free(void *p)
{
    torus_data *t = p;
    free(t->link);
    free(t);
}

static bool link_pair(net *n, uint32_t a, uint32_t b, double bw, uint64_t lat, uint32_t *first)
{
    *first = net_add_link(n, a, b, bw, lat);
    return *first != UINT32_MAX && net_add_link(n, b, a, bw, lat) != UINT32_MAX;
}

static np_status switch_build(net *n, const net_params *p, np_err *err)
{
    sw_data *d = sw_data_new(n, p, false);
    if (!d)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory building a switch");
    uint32_t s = net_add_switch(n, p->switch_latency_ps);
    double bw = p->link_bytes_per_s * (p->links_per_chip ? p->links_per_chip : 1);
    for (uint32_t c = 0; c < p->chips; c++)
        if (s == UINT32_MAX || !link_pair(n, c, s, bw, p->link_latency_ps, &d->up[c]))
            return np_err_set(err, NP_ERR_NOMEM, "out of memory building a switch");
    return NP_OK;
}

static void switch_route(const net *n, uint32_t src, uint32_t dst)
{
    const sw_data *d = net_topo_data(n);
    net_path_push(n, d->up[src]);
    net_path_push(n, d->up[dst] + 1);
}

static np_status fat_build(net *n, const net_params *p, np_err *err)
{
    sw_data *d = sw_data_new(n, p, false);
    if (!d)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory building a fat tree");
    d->half = p->switch_radix / 2 ? p->switch_radix / 2 : 1;
    d->n_leaves = (p->chips + d->half - 1) / d->half;
    if (d->n_leaves > p->switch_radix)
        return np_err_set(err, NP_ERR_INCONSISTENT, "a two-level fat tree of %" PRIu32
                          "-port switches cannot hold %" PRIu32 " chips", p->switch_radix,
                          p->chips);
    double bw = p->link_bytes_per_s * (p->links_per_chip ? p->links_per_chip : 1);
    uint32_t leaf0 = net_nodes(n);
    for (uint32_t l = 0; l < d->n_leaves; l++)
        if (net_add_switch(n, p->switch_latency_ps) == UINT32_MAX)
            return np_err_set(err, NP_ERR_NOMEM, "out of memory building a fat tree");
    uint32_t spine0 = net_nodes(n);
    if (d->n_leaves > 1) {
        for (uint32_t s = 0; s < d->half; s++)
            if (net_add_switch(n, p->switch_latency_ps) == UINT32_MAX)
                return np_err_set(err, NP_ERR_NOMEM, "out of memory building a fat tree");
        d->leaf_up = malloc((size_t)d->n_leaves * d->half * sizeof *d->leaf_up);
        if (!d->leaf_up)
            return np_err_set(err, NP_ERR_NOMEM, "out of memory building a fat tree");
        for (uint32_t l = 0; l < d->n_leaves; l++)
            for (uint32_t s = 0; s < d->half; s++)
                if (!link_pair(n, leaf0 + l, spine0 + s, bw, p->link_latency_ps,
                               &d->leaf_up[(size_t)l * d->half + s]))
                    return np_err_set(err, NP_ERR_NOMEM, "out of memory building a fat tree");
    }
    for (uint32_t c = 0; c < p->chips; c++)
        if (!link_pair(n, c, leaf0 + c / d->half, bw, p->link_latency_ps, &d->up[c]))
            return np_err_set(err, NP_ERR_NOMEM, "out of memory building a fat tree");
    return NP_OK;
}

static void fat_route(const net *n, uint32_t src, uint32_t dst)
{
    const sw_data *d = net_topo_data(n);
    uint32_t ls = src / d->half, ld = dst / d->half;
    net_path_push(n, d->up[src]);
    if (ls != ld) {
        uint32_t s = dst % d->half;
        net_path_push(n, d->leaf_up[(size_t)ls * d->half + s]);
        net_path_push(n, d->leaf_up[(size_t)ld * d->half + s] + 1);
    }
    net_path_push(n, d->up[dst] + 1);
}

static np_status hier_build(net *n, const net_params *p, np_err *err)
{
    uint32_t q = p->island_chips ? p->island_chips : 1;
    if (p->chips % q)
        return np_err_set(err, NP_ERR_INCONSISTENT, "%" PRIu32 " chips are not whole islands "
                          "of %" PRIu32, p->chips, q);
    sw_data *d = sw_data_new(n, p, true);
    if (!d)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory building islands");
    d->half = q;
    double bw = p->link_bytes_per_s * (p->links_per_chip ? p->links_per_chip : 1);
    uint32_t isl0 = net_nodes(n);
    for (uint32_t i = 0; i < p->chips / q; i++)
        if (net_add_switch(n, p->switch_latency_ps) == UINT32_MAX)
            return np_err_set(err, NP_ERR_NOMEM, "out of memory building islands");
    uint32_t so = net_add_switch(n, 0);
    if (so == UINT32_MAX)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory building islands");
    uint64_t half_lat = p->scaleout_latency_ps / 2;
    for (uint32_t c = 0; c < p->chips; c++) {
        uint32_t first;
        if (!link_pair(n, c, isl0 + c / q, bw, p->link_latency_ps, &d->up[c]) ||
            !link_pair(n, c, so, p->scaleout_bytes_per_s, half_lat, &first))
            return np_err_set(err, NP_ERR_NOMEM, "out of memory building islands");
        d->so[c] = first;
    }
    return NP_OK;
}

static void hier_route(const net *n, uint32_t src, uint32_t dst)
{
    const sw_data *d = net_topo_data(n);
    if (src / d->half == dst / d->half) {
        net_path_push(n, d->up[src]);
        net_path_push(n, d->up[dst] + 1);
    } else {
        net_path_push(n, d->so[src]);
        net_path_push(n, d->so[dst] + 1);
    }
}

/* Leaf switch (fat tree) or island (hierarchical) of a chip: chips / half. */
static uint32_t sw_domain(const net *n, uint32_t chip, uint32_t *domain_chips)
{
    const sw_data *d = net_topo_data(n);
    *domain_chips = d->half;
    return chip / d->half;
}

/* The switch a chip's first switch link goes to (the switch, its island's switch). */
static uint32_t sw_switch_of(const net *n, uint32_t chip)
{
    const sw_data *d = net_topo_data(n);
    net_link_info li;
    net_link_get(n, d->up[chip], &li);
    return li.to;
}

static const net_topo_ops net_topos[ARCH_TOPOLOGY_COUNT] = {
    [ARCH_TOPOLOGY_RING] = {"ring", torus_build, torus_route, torus_data_free, NULL},
    [ARCH_TOPOLOGY_TORUS2D] = {"torus2d", torus_build, torus_route, torus_data_free, NULL},
    [ARCH_TOPOLOGY_TORUS3D] = {"torus3d", torus_build, torus_route, torus_data_free, NULL},
    [ARCH_TOPOLOGY_FULLY_CONNECTED] = {"fully_connected", fc_build, fc_route, NULL, NULL},
    [ARCH_TOPOLOGY_SWITCH] = {"switch", switch_build, switch_route, sw_data_free, NULL,
                              sw_switch_of},
    [ARCH_TOPOLOGY_FAT_TREE] = {"fat_tree", fat_build, fat_route, sw_data_free, sw_domain},
    [ARCH_TOPOLOGY_HIERARCHICAL] = {"hierarchical", hier_build, hier_route, sw_data_free,
                                    sw_domain, sw_switch_of},
};
_Static_assert(sizeof net_topos / sizeof net_topos[0] == ARCH_TOPOLOGY_COUNT,
               "every topology kind has ops");

const net_topo_ops *net_topo_get(arch_topology t)
{
    return (unsigned)t < ARCH_TOPOLOGY_COUNT && net_topos[t].build ? &net_topos[t] : NULL;
}
