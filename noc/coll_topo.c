/* coll_topo.c — ring orders and levels fitted to the topology (see coll_topo.h). */
#include "coll_topo.h"

#include <stdlib.h>
#include <string.h>

static bool topo_is_torus(const net_params *np)
{
    return np->topology == ARCH_TOPOLOGY_RING || np->topology == ARCH_TOPOLOGY_TORUS2D ||
           np->topology == ARCH_TOPOLOGY_TORUS3D;
}

static void topo_coords(const net_params *np, uint32_t c, uint32_t xyz[3])
{
    xyz[0] = c % np->dims[0];
    xyz[1] = (c / np->dims[0]) % np->dims[1];
    xyz[2] = c / (np->dims[0] * np->dims[1]);
}

static uint32_t topo_chip(const net_params *np, const uint32_t xyz[3])
{
    return xyz[0] + np->dims[0] * (xyz[1] + np->dims[1] * xyz[2]);
}

/* A box of the torus: per dimension the first coordinate and the length (the coordinates
 * lo, lo + 1, ... mod the dimension). */
typedef struct topo_box {
    uint32_t lo[3], len[3];
} topo_box;

/* Whether the chips form a box, and which. */
static bool topo_find_box(const net_params *np, const uint32_t *chips, uint32_t p, topo_box *b,
                          np_err *err, bool *oom)
{
    *oom = false;
    uint64_t prod = 1;
    for (int d = 0; d < 3; d++) {
        uint32_t k = np->dims[d];
        uint8_t *has = calloc(k, 1);
        if (!has) {
            *oom = true;
            np_err_set(err, NP_ERR_NOMEM, "out of memory fitting a ring to the torus");
            return false;
        }
        for (uint32_t i = 0; i < p; i++) {
            uint32_t xyz[3];
            topo_coords(np, chips[i], xyz);
            has[xyz[d]] = 1;
        }
        uint32_t count = 0, start = UINT32_MAX;
        for (uint32_t x = 0; x < k; x++) {
            count += has[x];
            if (has[x] && !has[(x + k - 1) % k])
                start = start == UINT32_MAX ? x : UINT32_MAX - 1; /* a second run: no box */
        }
        free(has);
        if (start == UINT32_MAX - 1)
            return false;
        b->lo[d] = start == UINT32_MAX ? 0 : start; /* UINT32_MAX: every coordinate */
        b->len[d] = count;
        prod *= count;
    }
    return prod == p; /* p distinct chips in the product of the intervals: all of it */
}

/* Appends to cyc the cycle (or path) over the box: element i is the box coordinates of the
 * i-th chip. Returns whether it closes (the last element is one link from the first). */
static bool topo_box_cycle(const net_params *np, const topo_box *b, uint32_t (*cyc)[3],
                           uint32_t *len_out)
{
    int dims[3], nd = 0;
    bool ring[3];
    for (int d = 0; d < 3; d++) {
        ring[d] = b->len[d] == np->dims[d] && b->len[d] >= 2; /* a whole ring of the torus */
        if (b->len[d] > 1)
            dims[nd++] = d;
    }
    /* order: a whole ring first (its wrap closes the first cycle), else an even length second */
    for (int i = 0; i < nd; i++)
        if (ring[dims[i]]) {
            int t = dims[0];
            dims[0] = dims[i];
            dims[i] = t;
            break;
        }
    if (nd >= 2 && !ring[dims[0]])
        for (int i = 0; i < nd; i++)
            if (b->len[dims[i]] % 2 == 0) {
                int t = dims[1];
                dims[1] = dims[i];
                dims[i] = t;
                break;
            }
    uint32_t n = 1;
    cyc[0][0] = cyc[0][1] = cyc[0][2] = 0;
    bool closed = true;
    for (int i = 0; i < nd; i++) {
        int d = dims[i];
        uint32_t rows = b->len[d];
        if (i == 0) { /* the first dimension: its coordinates in order */
            for (uint32_t r = 0; r < rows; r++) {
                cyc[r][0] = cyc[r][1] = cyc[r][2] = 0;
                cyc[r][d] = r;
            }
            n = rows;
            closed = ring[d] || rows <= 2;
            continue;
        }
        /* C x path: rows snake over c1 .. c(n-1), then the column of c0 back to row 0 */
        uint32_t m = n, out = m * rows;
        uint32_t (*tmp)[3] = cyc + m; /* build after the current cycle, then move down */
        uint32_t k = 0;
        for (uint32_t r = 0; r < rows; r++)
            for (uint32_t j = 1; j < m; j++) {
                uint32_t src = r % 2 == 0 ? j : m - j;
                memcpy(tmp[k], cyc[src], sizeof tmp[k]);
                tmp[k++][d] = r;
            }
        for (uint32_t r = rows; r-- > 0;) {
            memcpy(tmp[k], cyc[0], sizeof tmp[k]);
            tmp[k++][d] = r;
        }
        /* the column ends at row 0 next to tmp[0] = (c1, 0); rotate so c0 comes first */
        memmove(cyc, tmp + (k - 1), sizeof *cyc);
        memmove(cyc + 1, tmp, (size_t)(k - 1) * sizeof *cyc);
        /* closes when the last row ends next to c0: at c(m-1) (odd rows; c0 -- c(m-1) is the
         * cycle's closing link) or at c1 (even rows) */
        closed = rows % 2 == 0 || closed;
        n = out;
    }
    *len_out = n;
    return closed;
}

np_status coll_topo_ring_order(const net *n, const uint32_t *chips, uint32_t p,
                               uint32_t *order, np_err *err)
{
    const net_params *np = net_get_params(n);
    uint32_t nc = net_chips(n);
    for (uint32_t k = 0; k < p; k++)
        order[k] = k;
    if (p < 3)
        return NP_OK;
    if (!topo_is_torus(np)) {
        if (np->topology == ARCH_TOPOLOGY_FULLY_CONNECTED)
            return NP_OK;
        /* switches, leaves, islands: by chip, so a domain's chips are consecutive */
        uint32_t *rank_of = malloc((size_t)nc * sizeof *rank_of);
        if (!rank_of)
            return np_err_set(err, NP_ERR_NOMEM, "out of memory ordering a ring");
        for (uint32_t c = 0; c < nc; c++)
            rank_of[c] = UINT32_MAX;
        for (uint32_t i = 0; i < p; i++)
            rank_of[chips[i]] = i;
        uint32_t k = 0;
        for (uint32_t c = 0; c < nc; c++)
            if (rank_of[c] != UINT32_MAX)
                order[k++] = rank_of[c];
        free(rank_of);
        return NP_OK;
    }
    topo_box box;
    bool oom;
    bool is_box = topo_find_box(np, chips, p, &box, err, &oom);
    if (oom)
        return err->status;
    if (!is_box) { /* along the whole torus's cycle */
        box = (topo_box){{0, 0, 0}, {np->dims[0], np->dims[1], np->dims[2]}};
    }
    uint32_t total = box.len[0] * box.len[1] * box.len[2];
    uint32_t (*cyc)[3] = malloc((size_t)total * 2 * sizeof *cyc);
    uint32_t *rank_of = malloc((size_t)nc * sizeof *rank_of);
    if (!cyc || !rank_of) {
        free(cyc);
        free(rank_of);
        return np_err_set(err, NP_ERR_NOMEM, "out of memory ordering a ring");
    }
    for (uint32_t c = 0; c < nc; c++)
        rank_of[c] = UINT32_MAX;
    for (uint32_t i = 0; i < p; i++)
        rank_of[chips[i]] = i;
    uint32_t len;
    topo_box_cycle(np, &box, cyc, &len);
    uint32_t k = 0;
    for (uint32_t i = 0; i < len && k < p; i++) {
        uint32_t xyz[3];
        for (int d = 0; d < 3; d++)
            xyz[d] = (box.lo[d] + cyc[i][d]) % np->dims[d];
        uint32_t r = rank_of[topo_chip(np, xyz)];
        if (r != UINT32_MAX)
            order[k++] = r;
    }
    free(cyc);
    free(rank_of);
    return NP_OK;
}

uint32_t coll_topo_ring_channels(const net *n, const uint32_t *chips, uint32_t p,
                                 const uint32_t *order, uint32_t want, uint32_t *orders)
{
    if (want <= 1 || p < 2 || net_get_params(n)->topology != ARCH_TOPOLOGY_HIERARCHICAL)
        return 1;
    uint32_t per, runs = 0, least = UINT32_MAX, len = 0;
    for (uint32_t k = 0; k < p; k++) { /* runs of one island along the order */
        uint32_t dm = net_chip_domain(n, chips[order[k]], &per);
        bool last = k + 1 == p || net_chip_domain(n, chips[order[k + 1]], &per) != dm;
        len++;
        if (last) {
            runs++;
            least = len < least ? len : least;
            len = 0;
        }
    }
    uint32_t C = want < least ? want : least;
    if (runs < 2 || C < 2)
        return 1;
    for (uint32_t start = 0; start < p;) {
        uint32_t dm = net_chip_domain(n, chips[order[start]], &per), m = 1;
        while (start + m < p && net_chip_domain(n, chips[order[start + m]], &per) == dm)
            m++;
        for (uint32_t c = 0; c < C; c++)
            for (uint32_t i = 0; i < m; i++)
                orders[(size_t)c * p + start + i] = order[start + (i + c) % m];
        start += m;
    }
    return C;
}

np_status coll_topo_levels(const net *n, const uint32_t *chips, uint32_t p, uint32_t *n_levels,
                           uint32_t level_ranks[COLL_MAX_LEVELS], uint32_t *order, np_err *err)
{
    const net_params *np = net_get_params(n);
    *n_levels = 0;
    if (topo_is_torus(np)) {
        topo_box box;
        bool oom;
        if (!topo_find_box(np, chips, p, &box, err, &oom)) {
            if (oom)
                return err->status;
            return coll_topo_ring_order(n, chips, p, order, err);
        }
        uint32_t nc = net_chips(n), nl = 0;
        uint32_t *rank_of = malloc((size_t)nc * sizeof *rank_of);
        if (!rank_of)
            return np_err_set(err, NP_ERR_NOMEM, "out of memory fitting levels to the torus");
        for (uint32_t i = 0; i < p; i++)
            rank_of[chips[i]] = i;
        for (int d = 0; d < 3; d++)
            if (box.len[d] > 1)
                level_ranks[nl++] = box.len[d];
        uint32_t pos = 0, xyz[3];
        for (uint32_t z = 0; z < box.len[2]; z++)
            for (uint32_t y = 0; y < box.len[1]; y++)
                for (uint32_t x = 0; x < box.len[0]; x++) {
                    xyz[0] = (box.lo[0] + x) % np->dims[0];
                    xyz[1] = (box.lo[1] + y) % np->dims[1];
                    xyz[2] = (box.lo[2] + z) % np->dims[2];
                    order[pos++] = rank_of[topo_chip(np, xyz)];
                }
        free(rank_of);
        *n_levels = nl > 1 ? nl : 0;
        return *n_levels ? NP_OK : coll_topo_ring_order(n, chips, p, order, err);
    }
    /* islands, leaves: the same number of the group's chips in each of its domains */
    uint32_t per, dom0 = net_chip_domain(n, chips[0], &per);
    (void)dom0;
    if (per > 0) {
        uint32_t n_dom = 0, *cnt = calloc((size_t)net_chips(n) / per + 1, sizeof *cnt);
        if (!cnt)
            return np_err_set(err, NP_ERR_NOMEM, "out of memory fitting levels to domains");
        for (uint32_t i = 0; i < p; i++) {
            uint32_t dc, dm = net_chip_domain(n, chips[i], &dc);
            n_dom += cnt[dm]++ == 0;
        }
        uint32_t q = p / (n_dom ? n_dom : 1);
        bool even = q > 1 && n_dom > 1 && q * n_dom == p;
        for (uint32_t dm = 0; even && dm <= net_chips(n) / per; dm++)
            even = cnt[dm] == 0 || cnt[dm] == q;
        free(cnt);
        if (even) {
            /* by chip: a domain's chips consecutive, domains in order */
            np_status st = coll_topo_ring_order(n, chips, p, order, err);
            if (st == NP_OK) {
                level_ranks[0] = q;
                level_ranks[1] = n_dom;
                *n_levels = 2;
            }
            return st;
        }
    }
    return coll_topo_ring_order(n, chips, p, order, err);
}
