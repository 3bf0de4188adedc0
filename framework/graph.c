/* graph.c — graphs, leaves, the generic node constructor, the editing API and the verifier.
 *
 * Invariants: g->nodes holds every live node once, in creation order; ids are unique and
 * only grow; a node's sources are live nodes of the same graph. Construction keeps the graph
 * acyclic (sources exist before their consumers); editing (nn_node_set_src) may not, which
 * nn_graph_verify reports.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn_impl.h"
#include "rng.h"

struct nn_graph {
    nn_tensor **nodes;
    int n, cap;
    int next_id;
    np_err err;
    bool eager;
    char scope[NN_NAME_MAX];
    int layer;
    int chunk;
    nn_region region;
    rng r;
};

nn_graph *nn_graph_new(uint64_t seed)
{
    nn_graph *g = nn_calloc(1, sizeof *g);
    if (!g)
        return NULL;
    g->layer = -1;
    g->chunk = -1;
    rng_seed(&g->r, seed);
    return g;
}

static void nn_tensor_free(nn_tensor *t)
{
    if (!t->data_is_view)
        free(t->data);
    free(t);
}

void nn_graph_free(nn_graph *g)
{
    if (!g)
        return;
    for (int i = 0; i < g->n; i++)
        nn_tensor_free(g->nodes[i]);
    free(g->nodes);
    free(g);
}

np_status nn_graph_status(const nn_graph *g, np_err *err)
{
    if (g->err.status != NP_OK && err)
        *err = g->err;
    return g->err.status;
}

void nn_graph_set_eager(nn_graph *g, bool eager) { g->eager = eager; }
bool nn_graph_is_eager(const nn_graph *g) { return g->eager; }
void nn_graph_set_layer(nn_graph *g, int layer) { g->layer = layer; }
int nn_graph_layer(const nn_graph *g) { return g->layer; }
void nn_graph_set_chunk(nn_graph *g, int chunk) { g->chunk = chunk; }
int nn_graph_chunk(const nn_graph *g) { return g->chunk; }
nn_region nn_graph_region(const nn_graph *g) { return g->region; }
void nn_graph_set_region(nn_graph *g, nn_region r) { g->region = r; }
const char *nn_graph_scope(const nn_graph *g) { return g->scope; }
int nn_graph_n_nodes(const nn_graph *g) { return g->n; }
nn_tensor *nn_graph_node(const nn_graph *g, int i) { return g->nodes[i]; }
int nn_graph_max_id(const nn_graph *g) { return g->next_id; }
void nn_graph_set_output(nn_graph *g, nn_tensor *t)
{
    (void)g;
    if (t)
        t->is_output = true;
}
uint64_t nn_graph_seed_next(nn_graph *g) { return rng_next(&g->r); }

void nn_graph_set_scope(nn_graph *g, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g->scope, sizeof g->scope, fmt, ap);
    va_end(ap);
}

nn_tensor *nn_graph_find(const nn_graph *g, const char *name)
{
    for (int i = 0; i < g->n; i++)
        if (strcmp(g->nodes[i]->name, name) == 0)
            return g->nodes[i];
    return NULL;
}

/* Appends a fresh zeroed node; NULL (and the graph's error) when out of memory. */
static nn_tensor *nn_graph_push(nn_graph *g)
{
    if (g->n == g->cap) {
        int cap = g->cap ? 2 * g->cap : 64;
        nn_tensor **bigger = nn_realloc(g->nodes, (size_t)cap * sizeof *bigger);
        if (!bigger) {
            np_err_set(&g->err, NP_ERR_NOMEM, "out of memory growing the graph");
            return NULL;
        }
        g->nodes = bigger;
        g->cap = cap;
    }
    nn_tensor *t = nn_calloc(1, sizeof *t);
    if (!t) {
        np_err_set(&g->err, NP_ERR_NOMEM, "out of memory creating a node");
        return NULL;
    }
    t->id = g->next_id++;
    t->sched_key = (double)t->id;
    t->layer = g->layer;
    t->chunk = g->chunk;
    t->region = g->region;
    t->fusion_group = -1;
    memcpy(t->scope, g->scope, sizeof t->scope);
    g->nodes[g->n++] = t;
    return t;
}

/* Drops the last node pushed (a constructor that failed). */
static void nn_graph_pop(nn_graph *g)
{
    nn_tensor_free(g->nodes[--g->n]);
}

nn_tensor *nn_leaf(nn_graph *g, const char *name, nn_role role, nn_dtype dt, int ndim,
                   const int64_t *ne)
{
    if (g->err.status != NP_OK)
        return NULL;
    if (ndim < 0 || ndim > NN_MAX_DIMS) {
        np_err_set(&g->err, NP_ERR_RANGE, "%s: %d dims (at most %d)", name, ndim, NN_MAX_DIMS);
        return NULL;
    }
    for (int i = 0; i < ndim; i++)
        if (ne[i] <= 0) {
            np_err_set(&g->err, NP_ERR_RANGE, "%s: dim %d is %lld (must be positive)", name, i,
                       (long long)ne[i]);
            return NULL;
        }
    nn_tensor *t = nn_graph_push(g);
    if (!t)
        return NULL;
    t->op = NN_OP_LEAF;
    t->sched_key = -1.0; /* leaves hold values already: first, so they never hold anyone up */
    t->role = role;
    t->dtype = dt;
    t->trainable = role == NN_ROLE_PARAM;
    nn_set_shape(t, ndim, ne);
    if (g->scope[0])
        snprintf(t->name, sizeof t->name, "%.62s.%.32s", g->scope, name);
    else
        snprintf(t->name, sizeof t->name, "%s", name);
    if (g->eager && !nn_tensor_alloc(t)) {
        np_err_set(&g->err, NP_ERR_NOMEM, "out of memory for %s", t->name);
        return NULL;
    }
    return t;
}

nn_tensor *nn_input(nn_graph *g, const char *name, nn_dtype dt, int ndim, const int64_t *ne)
{
    return nn_leaf(g, name, NN_ROLE_INPUT, dt, ndim, ne);
}

nn_tensor *nn_param(nn_graph *g, const char *name, nn_dtype dt, int ndim, const int64_t *ne)
{
    return nn_leaf(g, name, NN_ROLE_PARAM, dt, ndim, ne);
}

nn_tensor *nn_const(nn_graph *g, const char *name, nn_dtype dt, int ndim, const int64_t *ne)
{
    return nn_leaf(g, name, NN_ROLE_CONST, dt, ndim, ne);
}

nn_tensor *nn_scalar(nn_graph *g, float v)
{
    nn_tensor *t = nn_leaf(g, "scalar", NN_ROLE_CONST, NN_F32, 0, NULL);
    if (t && !nn_tensor_fill(t, v)) {
        np_err_set(&g->err, NP_ERR_NOMEM, "out of memory for a scalar");
        return NULL;
    }
    return t;
}

/* Infers t's shape and dtype into t itself (t's op, sources and parameters are set). */
static np_status nn_infer(nn_tensor *t, np_err *err)
{
    const nn_op_impl *impl = &nn_op_impls[t->op];
    if (!impl->infer)
        return np_err_set(err, NP_ERR_INTERNAL, "%s: op has no shape inference",
                          nn_op_name(t->op));
    return impl->infer(t, err);
}

nn_tensor *nn_node(nn_graph *g, nn_op op, int n_src, nn_tensor *const *srcs,
                   const int64_t *ip, const double *fp)
{
    if (g->err.status != NP_OK)
        return NULL;
    if (op <= NN_OP_LEAF || op >= NN_OP_COUNT || n_src < (op == NN_OP_RECV ? 0 : 1) ||
        n_src > NN_MAX_SRC) {
        np_err_set(&g->err, NP_ERR_INTERNAL, "bad node: op %d with %d sources", (int)op, n_src);
        return NULL;
    }
    for (int i = 0; i < n_src; i++)
        if (!srcs[i]) {
            np_err_set(&g->err, NP_ERR_INTERNAL, "%s: source %d is NULL", nn_op_name(op), i);
            return NULL;
        }
    nn_tensor *t = nn_graph_push(g);
    if (!t)
        return NULL;
    t->op = op;
    t->n_src = n_src;
    for (int i = 0; i < n_src; i++)
        t->src[i] = srcs[i];
    if (ip)
        memcpy(t->ip, ip, sizeof t->ip);
    if (fp)
        memcpy(t->fp, fp, sizeof t->fp);
    t->role = g->region == NN_REGION_FORWARD || g->region == NN_REGION_RECOMPUTE
                  ? NN_ROLE_ACTIVATION
                  : g->region == NN_REGION_BACKWARD ? NN_ROLE_GRADIENT : NN_ROLE_OPTSTATE;
    if (g->scope[0])
        snprintf(t->name, sizeof t->name, "%.62s.%.32s", g->scope, nn_op_name(op));
    else
        snprintf(t->name, sizeof t->name, "%s%d", nn_op_name(op), t->id);
    if (nn_infer(t, &g->err) != NP_OK) {
        nn_graph_pop(g);
        return NULL;
    }
    if (g->eager && nn_node_compute(t, &g->err) != NP_OK) {
        nn_graph_pop(g);
        return NULL;
    }
    return t;
}

np_status nn_node_check(const nn_tensor *t, np_err *err)
{
    if (t->op == NN_OP_LEAF)
        return NP_OK;
    nn_tensor tmp = *t;
    tmp.data = NULL;
    np_status st = nn_infer(&tmp, err);
    if (st != NP_OK) {
        np_err_prefix(err, "node %s", t->name);
        return st;
    }
    if (tmp.dtype != t->dtype)
        return np_err_set(err, NP_ERR_TYPE, "node %s: is %s but its sources now give %s",
                          t->name, nn_dtype_name(t->dtype), nn_dtype_name(tmp.dtype));
    if (!nn_same_shape(&tmp, t)) {
        char a[96], b[96];
        return np_err_set(err, NP_ERR_INCONSISTENT,
                          "node %s: has shape %s but its sources now give %s", t->name,
                          nn_shape_str(t, a, sizeof a), nn_shape_str(&tmp, b, sizeof b));
    }
    return NP_OK;
}

void nn_node_set_src(nn_tensor *t, int i, nn_tensor *s)
{
    t->src[i] = s;
}

int nn_replace_uses(nn_graph *g, nn_tensor *old, nn_tensor *repl)
{
    int count = 0;
    for (int i = 0; i < g->n; i++) {
        nn_tensor *t = g->nodes[i];
        if (t->grad == old)
            t->grad = repl;
        if (t == repl)
            continue;
        for (int s = 0; s < t->n_src; s++)
            if (t->src[s] == old) {
                t->src[s] = repl;
                count++;
            }
    }
    if (old->is_output) {
        repl->is_output = true;
        old->is_output = false;
    }
    return count;
}

void nn_graph_remove(nn_graph *g, const bool *keep)
{
    int k = 0;
    for (int i = 0; i < g->n; i++) {
        if (keep[g->nodes[i]->id])
            g->nodes[k++] = g->nodes[i];
        else
            nn_tensor_free(g->nodes[i]);
    }
    g->n = k;
}

int *nn_graph_use_counts(const nn_graph *g)
{
    int *uses = nn_calloc((size_t)g->next_id + 1, sizeof *uses);
    if (!uses)
        return NULL;
    for (int i = 0; i < g->n; i++)
        for (int s = 0; s < g->nodes[i]->n_src; s++)
            uses[g->nodes[i]->src[s]->id]++;
    return uses;
}

np_status nn_graph_verify(const nn_graph *g, np_err *err)
{
    np_status st = NP_OK;
    nn_tensor **by_id = nn_calloc((size_t)g->next_id + 1, sizeof *by_id);
    if (!by_id)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory verifying the graph");
    for (int i = 0; i < g->n; i++)
        by_id[g->nodes[i]->id] = g->nodes[i];
    for (int i = 0; i < g->n && st == NP_OK; i++) {
        const nn_tensor *t = g->nodes[i];
        for (int s = 0; s < t->n_src && st == NP_OK; s++)
            if (!t->src[s] || t->src[s]->id < 0 || t->src[s]->id >= g->next_id ||
                by_id[t->src[s]->id] != t->src[s])
                st = np_err_set(err, NP_ERR_INCONSISTENT,
                                "node %s: source %d is not a node of this graph", t->name, s);
        if (st == NP_OK)
            st = nn_node_check(t, err);
    }
    free(by_id);
    if (st != NP_OK)
        return st;
    nn_tensor **order = NULL;
    int n = 0;
    st = nn_schedule(g, &order, &n, err);
    free(order);
    return st;
}

void nn_graph_fail(nn_graph *g, np_status s, const char *fmt, ...)
{
    if (g->err.status != NP_OK)
        return;
    char msg[NP_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    np_err_set(&g->err, s, "%s", msg);
}
