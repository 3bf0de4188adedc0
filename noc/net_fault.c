/* net_fault.c — slowed and failed links of the chip network (net_params.faults; see net.h).
 *
 * A slowed link keeps its place in every route at a share of its bandwidth. A failed link
 * carries nothing: a route the topology's rule sends through it is replaced by a breadth-first
 * shortest path over the links that work (fewest links; among equals the one reached through
 * lower link ids, so the choice is deterministic), relaying through chips only in the
 * topologies whose chips are the routers (ring, torus2d, torus3d); switches always relay.
 * With no such path the route fails, naming the failed links. Routes are cached by net.c as
 * before, so each pair is searched once. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net_impl.h"

np_status net_fault_apply(net *n, np_err *err)
{
    n->fault_copy = malloc((size_t)n->p.n_faults * sizeof *n->fault_copy);
    if (!n->fault_copy) {
        n->p.faults = NULL;
        n->p.n_faults = 0;
        return np_err_set(err, NP_ERR_NOMEM, "out of memory");
    }
    memcpy(n->fault_copy, n->p.faults, (size_t)n->p.n_faults * sizeof *n->fault_copy);
    n->p.faults = n->fault_copy;
    for (uint32_t i = 0; i < n->p.n_faults; i++) {
        const net_link_fault *f = &n->p.faults[i];
        if (!(f->factor >= 0 && f->factor <= 1))
            return np_err_set(err, NP_ERR_RANGE, "link %s: the share of its bandwidth left "
                              "must be in 0 .. 1 (0: failed), got %g", f->name, f->factor);
        uint32_t id = UINT32_MAX;
        char name[64];
        for (uint32_t l = 0; l < n->n_links && id == UINT32_MAX; l++)
            if (strcmp(net_link_name(n, l, name, sizeof name), f->name) == 0)
                id = l;
        if (id == UINT32_MAX)
            return np_err_set(err, NP_ERR_UNKNOWN_KEY, "no link '%s' in this %s of %" PRIu32
                              " chips (links are named as the run's busiest links are, e.g. "
                              "'%s')", f->name, n->topo->name, n->p.chips,
                              n->n_links ? net_link_name(n, 0, name, sizeof name) : "none");
        if (f->factor == 0) {
            n->laux[id].failed = true;
            n->has_failed = true;
        } else {
            n->links[id].bw *= f->factor;
        }
    }
    return NP_OK;
}

bool net_fault_on_path(const net *n)
{
    for (uint32_t i = 0; i < n->path->n; i++)
        if (n->laux[n->path->v[i]].failed)
            return true;
    return false;
}

void net_fault_free(net *n)
{
    free(n->fault_copy);
    free(n->adj_start);
    free(n->adj_link);
}

/* The out-links of every node, in link id order (CSR). */
static bool net_fault_adjacency(net *n)
{
    if (n->adj_start)
        return true;
    n->adj_start = calloc((size_t)n->n_nodes + 1, sizeof *n->adj_start);
    n->adj_link = malloc(((size_t)n->n_links + 1) * sizeof *n->adj_link);
    if (!n->adj_start || !n->adj_link)
        return false;
    for (uint32_t l = 0; l < n->n_links; l++)
        n->adj_start[n->links[l].from + 1]++;
    for (uint32_t v = 0; v < n->n_nodes; v++)
        n->adj_start[v + 1] += n->adj_start[v];
    uint32_t *fill = malloc(((size_t)n->n_nodes + 1) * sizeof *fill);
    if (!fill)
        return false;
    memcpy(fill, n->adj_start, ((size_t)n->n_nodes + 1) * sizeof *fill);
    for (uint32_t l = 0; l < n->n_links; l++)
        n->adj_link[fill[n->links[l].from]++] = l;
    free(fill);
    return true;
}

/* The failed links, named, into buf. */
static void net_fault_names(const net *n, char *buf, size_t len)
{
    size_t k = 0;
    buf[0] = 0;
    for (uint32_t l = 0; l < n->n_links && k + 40 < len; l++)
        if (n->laux[l].failed) {
            char name[64];
            int w = snprintf(buf + k, len - k, "%s%s", k ? ", " : "",
                             net_link_name(n, l, name, sizeof name));
            k += w > 0 ? (size_t)w : 0;
        }
}

np_status net_fault_reroute(net *n, uint32_t src, uint32_t dst, np_err *err)
{
    if (!net_fault_adjacency(n))
        return np_err_set(err, NP_ERR_NOMEM, "out of memory rerouting around a failed link");
    arch_topology t = n->p.topology;
    bool chips_route = t == ARCH_TOPOLOGY_RING || t == ARCH_TOPOLOGY_TORUS2D ||
                       t == ARCH_TOPOLOGY_TORUS3D;
    uint32_t *via = malloc((size_t)n->n_nodes * sizeof *via); /* the link that reached a node */
    uint32_t *queue = malloc((size_t)n->n_nodes * sizeof *queue);
    if (!via || !queue) {
        free(via);
        free(queue);
        return np_err_set(err, NP_ERR_NOMEM, "out of memory rerouting around a failed link");
    }
    for (uint32_t v = 0; v < n->n_nodes; v++)
        via[v] = UINT32_MAX;
    uint32_t head = 0, tail = 0;
    queue[tail++] = src;
    via[src] = UINT32_MAX - 1; /* the source: reached, by no link */
    while (head < tail && via[dst] == UINT32_MAX) {
        uint32_t v = queue[head++];
        if (v != src && v < n->p.chips && !chips_route)
            continue; /* a chip that does not relay */
        for (uint32_t a = n->adj_start[v]; a < n->adj_start[v + 1]; a++) {
            uint32_t l = n->adj_link[a], w = n->links[l].to;
            if (n->laux[l].failed || via[w] != UINT32_MAX)
                continue;
            via[w] = l;
            queue[tail++] = w;
        }
    }
    np_status st = NP_OK;
    if (via[dst] == UINT32_MAX) {
        char names[256];
        net_fault_names(n, names, sizeof names);
        st = np_err_set(err, NP_ERR_INCONSISTENT, "no route from chip %" PRIu32 " to %s%" PRIu32
                        ": failed link%s %s, and the %s has no other path", src,
                        dst < n->p.chips ? "chip " : "switch ", dst < n->p.chips ? dst
                        : dst - n->p.chips, strchr(names, ',') ? "s" : "", names, n->topo->name);
    } else {
        /* the path backwards into queue, then forwards into n->path */
        uint32_t k = 0;
        for (uint32_t v = dst; v != src; v = n->links[via[v]].from)
            queue[k++] = via[v];
        n->path->n = 0;
        while (k)
            net_path_push(n, queue[--k]);
        if (n->path->oom)
            st = np_err_set(err, NP_ERR_NOMEM, "out of memory routing");
    }
    free(via);
    free(queue);
    return st;
}
