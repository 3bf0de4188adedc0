/* memplan.c — liveness-based memory planning with buffer reuse, and the bytes of activations
 * saved for the backward pass.
 *
 * Leaves (inputs, parameters, constants, optimizer state) are persistent: they live for the
 * whole step and are reported by role. Every other node owns a transient buffer, except views
 * and optimizer updates, which alias their source (the "root" of an alias chain). A buffer
 * lives from the step that computes it to the last step that reads it or any alias of it (an
 * output lives to the end). Buffers are placed in one arena in schedule order: the output of
 * a step is placed before the buffers its step was the last reader of are freed (an op never
 * writes over its own inputs); a new buffer takes the smallest free gap that fits (best fit),
 * else the end of the arena (base/arena.h, the rule the lowering's arena uses too). */
#include <stdlib.h>
#include <string.h>

#include "arena.h"
#include "pass.h"
#include "nn_impl.h"

#define NN_ALIGN 64

static bool nn_is_alias(const nn_tensor *t)
{
    return t->op != NN_OP_LEAF && (nn_op_flags(t->op) & (NN_OPF_VIEW | NN_OPF_UPDATE));
}

static const nn_tensor *nn_root(const nn_tensor *t)
{
    while (nn_is_alias(t))
        t = t->src[0];
    return t;
}

static uint64_t nn_aligned(uint64_t b)
{
    return (b + NN_ALIGN - 1) / NN_ALIGN * NN_ALIGN;
}

void nn_memplan_free(nn_memplan *plan)
{
    free(plan->offset);
    free(plan->step);
    free(plan->last_step);
    plan->offset = NULL;
    plan->step = plan->last_step = NULL;
}

np_status nn_memplan_build(const nn_graph *g, nn_memplan *plan, np_err *err)
{
    memset(plan, 0, sizeof *plan);
    nn_tensor **order;
    int n;
    if (nn_schedule(g, &order, &n, err) != NP_OK)
        return err->status;
    int max_id = nn_graph_max_id(g);
    int *pos = nn_malloc(((size_t)max_id + 1) * sizeof *pos);
    int *last = nn_malloc(((size_t)max_id + 1) * sizeof *last);
    np_arena ar = {.blocks = nn_malloc(((size_t)n + 1) * sizeof *ar.blocks)};
    nn_tensor **freeing = nn_malloc(((size_t)n + 1) * sizeof *freeing);
    int *free_start = nn_calloc((size_t)n + 2, sizeof *free_start);
    plan->offset = nn_malloc(((size_t)max_id + 1) * sizeof *plan->offset);
    plan->step = pos;
    plan->last_step = last;
    plan->max_id = max_id;
    np_status st = NP_OK;
    if (!pos || !last || !ar.blocks || !freeing || !free_start || !plan->offset) {
        st = np_err_set(err, NP_ERR_NOMEM, "out of memory planning memory");
        goto done;
    }
    for (int id = 0; id <= max_id; id++) {
        last[id] = pos[id] = -1;
        plan->offset[id] = UINT64_MAX;
    }
    for (int i = 0; i < n; i++) {
        const nn_tensor *t = order[i];
        pos[t->id] = i;
        last[nn_root(t)->id] = last[nn_root(t)->id] > i ? last[nn_root(t)->id] : i;
        for (int s = 0; s < t->n_src; s++) {
            int r = nn_root(t->src[s])->id;
            if (last[r] < i)
                last[r] = i;
        }
        if (t->is_output)
            last[nn_root(t)->id] = n - 1;
    }
    /* Bucket the buffers by the step after which they die. */
    for (int i = 0; i < n; i++) {
        const nn_tensor *t = order[i];
        if (t->op == NN_OP_LEAF) {
            plan->persistent_by_role[t->role] += nn_nbytes(t);
            plan->persistent_bytes += nn_nbytes(t);
        } else if (!nn_is_alias(t)) {
            free_start[last[t->id] + 1]++;
            plan->no_reuse_bytes += nn_aligned(nn_nbytes(t));
            plan->n_buffers++;
        }
    }
    for (int i = 1; i <= n; i++)
        free_start[i] += free_start[i - 1];
    {
        int *fill = nn_calloc((size_t)n + 1, sizeof *fill);
        if (!fill) {
            st = np_err_set(err, NP_ERR_NOMEM, "out of memory planning memory");
            goto done;
        }
        for (int i = 0; i < n; i++) {
            nn_tensor *t = order[i];
            if (t->op != NN_OP_LEAF && !nn_is_alias(t)) {
                int d = last[t->id];
                freeing[free_start[d] + fill[d]++] = t;
            }
        }
        free(fill);
    }
    for (int i = 0; i < n; i++) {
        nn_tensor *t = order[i];
        if (t->op != NN_OP_LEAF && !nn_is_alias(t)) {
            plan->offset[t->id] = np_arena_alloc(&ar, nn_aligned(nn_nbytes(t)));
            if (ar.live > plan->live_peak_bytes) {
                plan->live_peak_bytes = ar.live;
                plan->peak_step = i;
            }
        }
        for (int f = free_start[i]; f < free_start[i + 1]; f++)
            np_arena_free(&ar, plan->offset[freeing[f]->id]);
    }
    plan->arena_bytes = ar.high;
    for (int i = 0; i <= plan->peak_step && i < n; i++) {
        const nn_tensor *t = order[i];
        if (t->op != NN_OP_LEAF && !nn_is_alias(t) && last[t->id] >= plan->peak_step)
            plan->peak_by_role[t->role] += nn_aligned(nn_nbytes(t));
    }
    plan->peak_bytes = plan->arena_bytes + plan->persistent_bytes;
done:
    free(order);
    free(ar.blocks);
    free(freeing);
    free(free_start);
    if (st != NP_OK)
        nn_memplan_free(plan);
    return st;
}

np_status nn_memplan_verify(const nn_graph *g, const nn_memplan *plan, np_err *err)
{
    int n = nn_graph_n_nodes(g);
    const nn_tensor **bufs = nn_malloc(((size_t)n + 1) * sizeof *bufs);
    if (!bufs)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory verifying the memory plan");
    int nb = 0;
    np_status st = NP_OK;
    for (int i = 0; i < n && st == NP_OK; i++) {
        const nn_tensor *t = nn_graph_node(g, i);
        if (t->op == NN_OP_LEAF || nn_is_alias(t))
            continue;
        if (t->id > plan->max_id || plan->offset[t->id] == UINT64_MAX)
            st = np_err_set(err, NP_ERR_INTERNAL, "memory plan: %s has no buffer", t->name);
        else if (plan->offset[t->id] + nn_nbytes(t) > plan->arena_bytes)
            st = np_err_set(err, NP_ERR_INTERNAL, "memory plan: %s ends past the arena", t->name);
        else if (plan->offset[t->id] % NN_ALIGN)
            st = np_err_set(err, NP_ERR_INTERNAL, "memory plan: %s is not aligned", t->name);
        bufs[nb++] = t;
    }
    for (int a = 0; a < nb && st == NP_OK; a++)
        for (int b = a + 1; b < nb && st == NP_OK; b++) {
            const nn_tensor *x = bufs[a], *y = bufs[b];
            bool live_together = plan->step[x->id] <= plan->last_step[y->id] &&
                                 plan->step[y->id] <= plan->last_step[x->id];
            uint64_t xo = plan->offset[x->id], yo = plan->offset[y->id];
            bool overlap = xo < yo + nn_nbytes(y) && yo < xo + nn_nbytes(x);
            if (live_together && overlap && nn_nbytes(x) && nn_nbytes(y))
                st = np_err_set(err, NP_ERR_INTERNAL,
                                "memory plan: %s and %s are live together but overlap", x->name,
                                y->name);
        }
    free(bufs);
    return st;
}

uint64_t nn_saved_activation_bytes(const nn_graph *g)
{
    int max_id = nn_graph_max_id(g);
    bool *saved = nn_calloc((size_t)max_id + 1, sizeof *saved);
    uint64_t bytes = 0;
    if (!saved)
        return 0;
    for (int i = 0; i < nn_graph_n_nodes(g); i++) {
        const nn_tensor *c = nn_graph_node(g, i);
        if (c->region != NN_REGION_BACKWARD && c->region != NN_REGION_RECOMPUTE)
            continue;
        for (int s = 0; s < c->n_src; s++) {
            const nn_tensor *r = nn_root(c->src[s]);
            if (r->op != NN_OP_LEAF && r->region == NN_REGION_FORWARD && !saved[r->id]) {
                saved[r->id] = true;
                bytes += nn_nbytes(r);
            }
        }
    }
    free(saved);
    return bytes;
}
