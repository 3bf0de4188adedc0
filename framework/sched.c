/* sched.c — the scheduler: a ready-queue topological order of a graph.
 *
 * Kahn's algorithm with a binary heap keyed by (sched_key, id): among the nodes whose sources
 * are all done, the one with the smallest key runs first. Keys default to creation order (and
 * -1 for leaves, which compute nothing), so an untouched graph runs in the order it was built; checkpointing gives recomputed nodes the
 * key of their first consumer so they run just in time. Besides data edges, an optimizer
 * update (NN_OPF_UPDATE) waits for every other reader of the tensor it overwrites.
 * Nodes left over when the queue empties lie on or behind a cycle; the error names one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "iheap.h"
#include "nn_impl.h"

/* The ready queue's order: (sched_key, id) of the nodes by id (ctx: the graph's by_id). */
static bool nn_sched_less(const void *ctx, int a, int b)
{
    nn_tensor *const *by_id = ctx;
    const nn_tensor *x = by_id[a], *y = by_id[b];
    return x->sched_key < y->sched_key || (x->sched_key == y->sched_key && x->id < y->id);
}

/* Writes "a -> b -> ... -> a" for a cycle among the unscheduled nodes (indeg > 0). */
static void nn_describe_cycle(nn_tensor **by_id, const int *indeg, int max_id, nn_tensor *start,
                              char *buf, size_t n)
{
    int *seen = nn_calloc((size_t)max_id + 1, sizeof *seen);
    nn_tensor *t = start;
    int step = 1;
    /* Walk backwards along unscheduled sources until a node repeats. */
    while (seen && !seen[t->id]) {
        seen[t->id] = step++;
        nn_tensor *next = NULL;
        for (int s = 0; s < t->n_src && !next; s++)
            if (by_id[t->src[s]->id] && indeg[t->src[s]->id] > 0)
                next = t->src[s];
        if (!next)
            break;
        t = next;
    }
    size_t k = 0;
    buf[0] = '\0';
    if (seen && seen[t->id]) {
        /* t is on the cycle: list it forwards by walking sources again, then reverse. */
        nn_tensor *path[64];
        int len = 0;
        nn_tensor *u = t;
        do {
            path[len++] = u;
            nn_tensor *next = NULL;
            for (int s = 0; s < u->n_src && !next; s++)
                if (by_id[u->src[s]->id] && indeg[u->src[s]->id] > 0 && seen[u->src[s]->id])
                    next = u->src[s];
            u = next;
        } while (u && u != t && len < 64);
        /* Data-flow order is path[len-1] -> ... -> path[0]; start at the oldest node. */
        int first = 0;
        for (int i = 1; i < len; i++)
            if (path[i]->id < path[first]->id)
                first = i;
        for (int j = 0; j < len && k < n; j++)
            k += (size_t)snprintf(buf + k, n - k, "%s -> ", path[(first - j + len) % len]->name);
        if (k < n)
            snprintf(buf + k, n - k, "%s", path[first]->name);
    }
    free(seen);
}

np_status nn_schedule(const nn_graph *g, nn_tensor ***order_out, int *n_out, np_err *err)
{
    int n = nn_graph_n_nodes(g), max_id = nn_graph_max_id(g);
    nn_tensor **by_id = nn_calloc((size_t)max_id + 1, sizeof *by_id);
    int *indeg = nn_calloc((size_t)max_id + 1, sizeof *indeg);
    int *n_out_edges = nn_calloc((size_t)max_id + 2, sizeof *n_out_edges);
    nn_tensor **updater = nn_calloc((size_t)max_id + 1, sizeof *updater); /* by target id */
    nn_tensor **order = nn_malloc(((size_t)n + 1) * sizeof *order);
    np_iheap h = {.v = nn_malloc(((size_t)n + 1) * sizeof(int)), .less = nn_sched_less,
                  .ctx = by_id};
    int *edge_start = NULL;
    nn_tensor **edges = NULL;
    np_status st = NP_OK;
    *order_out = NULL;
    *n_out = 0;
    if (!by_id || !indeg || !n_out_edges || !updater || !order || !h.v) {
        st = np_err_set(err, NP_ERR_NOMEM, "out of memory scheduling the graph");
        goto done;
    }
    for (int i = 0; i < n; i++) {
        nn_tensor *t = nn_graph_node(g, i);
        by_id[t->id] = t;
        if ((nn_op_flags(t->op) & NN_OPF_UPDATE) && t->n_src > 0 && t->src[0] &&
            t->src[0]->id >= 0 && t->src[0]->id < max_id)
            updater[t->src[0]->id] = t;
    }
    /* Edges src -> t, plus reader -> update for the tensor an update overwrites. */
    int total = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < n; i++) {
            nn_tensor *t = nn_graph_node(g, i);
            for (int s = 0; s < t->n_src; s++) {
                nn_tensor *src = t->src[s];
                if (!src || src->id < 0 || src->id >= max_id || by_id[src->id] != src) {
                    st = np_err_set(err, NP_ERR_INCONSISTENT,
                                    "node %s: source %d is not a node of this graph", t->name, s);
                    goto done;
                }
                if (pass == 0) {
                    n_out_edges[src->id]++;
                    indeg[t->id]++;
                } else {
                    edges[edge_start[src->id] + n_out_edges[src->id]++] = t;
                }
            }
            /* t reads a tensor that an update overwrites: t runs before that update */
            if (nn_op_flags(t->op) & NN_OPF_UPDATE)
                continue;
            for (int s = 0; s < t->n_src; s++) {
                nn_tensor *u = updater[t->src[s]->id];
                if (!u)
                    continue;
                if (pass == 0) {
                    n_out_edges[t->id]++;
                    indeg[u->id]++;
                } else {
                    edges[edge_start[t->id] + n_out_edges[t->id]++] = u;
                }
            }
        }
        if (pass == 0) {
            edge_start = nn_malloc(((size_t)max_id + 1) * sizeof *edge_start);
            for (int id = 0; id <= max_id && edge_start; id++) {
                edge_start[id] = total;
                total += n_out_edges[id];
                n_out_edges[id] = 0;
            }
            edges = nn_malloc(((size_t)total + 1) * sizeof *edges);
            if (!edge_start || !edges) {
                st = np_err_set(err, NP_ERR_NOMEM, "out of memory scheduling the graph");
                goto done;
            }
        }
    }
    for (int i = 0; i < n; i++)
        if (indeg[nn_graph_node(g, i)->id] == 0)
            np_iheap_push(&h, nn_graph_node(g, i)->id);
    int k = 0;
    while (h.n > 0) {
        nn_tensor *t = by_id[np_iheap_pop(&h)];
        order[k++] = t;
        for (int e = 0; e < n_out_edges[t->id]; e++) {
            nn_tensor *c = edges[edge_start[t->id] + e];
            if (--indeg[c->id] == 0)
                np_iheap_push(&h, c->id);
        }
    }
    if (k < n) {
        char cyc[NP_ERR_MSG_MAX - 64];
        nn_tensor *start = NULL;
        for (int i = 0; i < n && !start; i++)
            if (indeg[nn_graph_node(g, i)->id] > 0)
                start = nn_graph_node(g, i);
        nn_describe_cycle(by_id, indeg, max_id, start, cyc, sizeof cyc);
        st = np_err_set(err, NP_ERR_INCONSISTENT, "the graph has a cycle: %s",
                        cyc[0] ? cyc : start->name);
        goto done;
    }
    *order_out = order;
    *n_out = n;
    order = NULL;
done:
    free(by_id);
    free(indeg);
    free(n_out_edges);
    free(updater);
    free(edge_start);
    free(edges);
    free(order);
    free(h.v);
    return st;
}
