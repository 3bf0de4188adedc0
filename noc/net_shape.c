/* net_shape.c — a network's parameters resized to a kind and a chip count, as `npusim
 * collective --topology KIND[:DIMS] --chips N` asks (net.h: net_params_shape). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "net.h"
#include "parse.h"

#define NS_MAX_CHIPS (1u << 20) /* a dimension and the product of a spec's dimensions */

/* The most balanced factorisation of n into `dims` factors (x <= y <= z). */
static void ns_balanced(uint32_t n, int dims, uint32_t out[3])
{
    out[0] = n;
    out[1] = out[2] = 1;
    if (dims == 2) {
        for (uint32_t x = 1; (uint64_t)x * x <= n; x++)
            if (n % x == 0) {
                out[0] = x;
                out[1] = n / x;
            }
    } else if (dims == 3) {
        uint32_t best = UINT32_MAX;
        for (uint32_t x = 1; (uint64_t)x * x * x <= n; x++) {
            if (n % x)
                continue;
            for (uint32_t y = x; (uint64_t)y * y <= n / x; y++) {
                if ((n / x) % y)
                    continue;
                uint32_t z = n / x / y;
                if (z - x < best) {
                    best = z - x;
                    out[0] = x;
                    out[1] = y;
                    out[2] = z;
                }
            }
        }
    }
}

/* The kind of spec ("torus2d:4x8") and its dimensions, into p; *chips set from them when 0. */
static np_status ns_parse(net_params *p, const char *spec, uint32_t *chips, const char *what,
                          np_err *err)
{
    char kind[64];
    const char *colon = strchr(spec, ':');
    size_t len = colon ? (size_t)(colon - spec) : strlen(spec);
    snprintf(kind, sizeof kind, "%.*s", (int)(len < 63 ? len : 63), spec);
    const arch_key_info *k = arch_key_find("system.topology");
    size_t found;
    if (np_parse_enum(NP_SRC_OPT(what), kind, "topology", k->enum_info->values, k->enum_info->n,
                      &found, err) != NP_OK)
        return err->status;
    p->topology = (arch_topology)found;
    bool torus = p->topology == ARCH_TOPOLOGY_TORUS2D || p->topology == ARCH_TOPOLOGY_TORUS3D;
    if (!colon) {
        if (!*chips && torus)
            *chips = p->chips;
        return NP_OK;
    }
    /* a torus names each of its dimensions; the others one count */
    int want = p->topology == ARCH_TOPOLOGY_TORUS2D ? 2 : p->topology == ARCH_TOPOLOGY_TORUS3D ? 3 : 1;
    uint64_t d[3] = {1, 1, 1};
    int nd;
    if (np_parse_dims(NP_SRC_OPT(what), colon + 1, want, want, 1, NS_MAX_CHIPS, NS_MAX_CHIPS, d,
                      &nd, err) != NP_OK)
        return err->status;
    if (p->topology == ARCH_TOPOLOGY_HIERARCHICAL) {
        p->island_chips = (uint32_t)d[0];
        return NP_OK;
    }
    for (int i = 0; i < 3; i++)
        p->dims[i] = (uint32_t)d[i];
    if (!*chips)
        *chips = (uint32_t)(d[0] * d[1] * d[2]);
    return NP_OK;
}

np_status net_params_shape(net_params *p, const char *spec, uint32_t chips, const char *what,
                           np_err *err)
{
    if (spec && ns_parse(p, spec, &chips, what, err) != NP_OK)
        return err->status;
    if (chips)
        p->chips = chips;
    uint32_t n = p->chips;
    switch (p->topology) {
    case ARCH_TOPOLOGY_RING:
        p->dims[0] = n;
        p->dims[1] = p->dims[2] = 1;
        break;
    case ARCH_TOPOLOGY_TORUS2D:
    case ARCH_TOPOLOGY_TORUS3D:
        if ((uint64_t)p->dims[0] * p->dims[1] * p->dims[2] != n)
            ns_balanced(n, p->topology == ARCH_TOPOLOGY_TORUS2D ? 2 : 3, p->dims);
        break;
    case ARCH_TOPOLOGY_FULLY_CONNECTED:
        if (p->links_per_chip < n - 1)
            p->links_per_chip = n - 1;
        break;
    case ARCH_TOPOLOGY_SWITCH:
        if (p->switch_radix < n)
            p->switch_radix = n;
        break;
    case ARCH_TOPOLOGY_FAT_TREE:
        while ((uint64_t)p->switch_radix * p->switch_radix / 2 < n)
            p->switch_radix *= 2;
        break;
    case ARCH_TOPOLOGY_HIERARCHICAL:
        if (p->island_chips > n)
            p->island_chips = n;
        if (n % p->island_chips)
            return np_err_set(err, NP_ERR_USAGE, "%" PRIu32 " chips are not whole islands of "
                              "%" PRIu32, n, p->island_chips);
        break;
    case ARCH_TOPOLOGY_COUNT: break;
    }
    if (p->topology <= ARCH_TOPOLOGY_TORUS3D) {
        uint32_t need = 0;
        for (int d = 0; d < 3; d++)
            need += p->dims[d] > 1 ? 2 : 0;
        if (p->links_per_chip < need)
            p->links_per_chip = need;
    }
    return NP_OK;
}
