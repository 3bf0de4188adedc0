/* mesh_mem.c — memory controllers on the mesh and the accesses between them and endpoints
 * (mesh.h "memory controllers and accesses"), as flows of the mesh's flow model (mesh_flow.h)
 * in either mode.
 *
 * Controller c adds three links to the flow model: its bandwidth (capacity flits_per_cycle,
 * shared by its reads and writes), its port out to its router and its port in from it (one
 * flit per cycle each). An access in flight is in one of three states:
 *
 *   read:   REQUEST --(h + access_cycles: acc_start)--> FLOWING --(flow ends)--> DATA
 *           --(h: acc_done)--> completed
 *   write:  FLOWING --(flow ends)--> DATA --(h + access_cycles + h: acc_done)--> completed
 *
 * REQUEST and DATA are entries of the heaps acc_start and acc_done (by cycle, then start
 * order); FLOWING is a class-1 flow whose user is MESH_USER_ACC | id. */
#include "mesh_impl.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>

void mesh_mem_free(mesh *m)
{
    free(m->ctrl);
    free(m->accs);
    free(m->acc_start.v);
    free(m->acc_done.v);
}

void mesh_set_access_done(mesh *m, mesh_access_fn fn, void *ctx)
{
    m->access_done = fn;
    m->access_done_ctx = ctx;
}

uint32_t mesh_controllers(const mesh *m) { return m->n_ctrl; }

uint32_t mesh_controller_router(const mesh *m, uint32_t ctrl)
{
    return ctrl < m->n_ctrl ? m->ctrl[ctrl].router : NONE;
}

np_status mesh_add_controller(mesh *m, uint32_t router, double flits_per_cycle, np_err *err)
{
    if (router >= m->n)
        return np_err_set(err, NP_ERR_RANGE, "memory controller at router %" PRIu32
                          ": the mesh has routers 0 .. %" PRIu32, router, m->n - 1);
    if (!(flits_per_cycle > 0) || !isfinite(flits_per_cycle))
        return np_err_set(err, NP_ERR_RANGE, "memory controller bandwidth %g flits/cycle: "
                          "must be > 0", flits_per_cycle);
    if (mesh_ensure_flow(m, err) != NP_OK)
        return err->status;
    if (m->n_ctrl == m->cap_ctrl) {
        uint32_t cap = m->cap_ctrl ? 2 * m->cap_ctrl : 4;
        mesh_ctrl *v = realloc(m->ctrl, cap * sizeof *v);
        if (!v)
            return np_err_set(err, NP_ERR_NOMEM, "out of memory adding a memory controller");
        m->ctrl = v;
        m->cap_ctrl = cap;
    }
    mesh_ctrl c = {.router = router, .flits_per_cycle = flits_per_cycle};
    /* the bandwidth last: on ties the flow model names the highest link the bottleneck */
    if (mesh_flow_add_link(m->flow, 1.0, &c.l_out, err) != NP_OK ||
        mesh_flow_add_link(m->flow, 1.0, &c.l_in, err) != NP_OK ||
        mesh_flow_add_link(m->flow, flits_per_cycle, &c.l_bw, err) != NP_OK)
        return err->status; /* links without users change nothing */
    m->ctrl[m->n_ctrl++] = c;
    return NP_OK;
}

/* Starts the flow of access id at the current cycle. */
static np_status acc_flow(mesh *m, uint32_t id, np_err *err)
{
    const mesh_access *a = &m->accs[id].a;
    const mesh_ctrl *c = &m->ctrl[a->ctrl];
    uint32_t n = 0, r;
    if (a->local) {
        m->route[n++] = c->l_bw; /* beside the controller: its bandwidth only */
    } else if (a->write) {
        m->route[n++] = m->n * NP + a->node; /* the node's injection channel */
        for (r = a->node;;) {
            int op = mesh_route(m, r, c->router);
            if (op == MESH_PORT_LOCAL)
                break; /* into the controller's port, not the router's endpoint */
            m->route[n++] = r * NP + (uint32_t)op;
            r = (uint32_t)m->nb[(size_t)r * NP + (size_t)op];
        }
        m->route[n++] = c->l_in;
        m->route[n++] = c->l_bw;
    } else {
        m->route[n++] = c->l_bw;
        m->route[n++] = c->l_out;
        for (r = c->router;;) {
            int op = mesh_route(m, r, a->node);
            m->route[n++] = r * NP + (uint32_t)op; /* the last: the node's ejection */
            if (op == MESH_PORT_LOCAL)
                break;
            r = (uint32_t)m->nb[(size_t)r * NP + (size_t)op];
        }
    }
    if (mesh_flow_start(m->flow, (double)m->cycle, m->route, n, a->flits, a->cap, 1,
                        MESH_USER_ACC | id, err) != NP_OK)
        return err->status;
    m->accs_flowing++;
    return NP_OK;
}

np_status mesh_access_start(mesh *m, const mesh_access *a, np_err *err)
{
    if (a->ctrl >= m->n_ctrl)
        return np_err_set(err, NP_ERR_RANGE, "memory access to controller %" PRIu32
                          ": the mesh has %" PRIu32, a->ctrl, m->n_ctrl);
    if (!a->local && a->node >= m->n)
        return np_err_set(err, NP_ERR_RANGE, "memory access from node %" PRIu32
                          ": the mesh has endpoints 0 .. %" PRIu32, a->node, m->n - 1);
    if (!(a->flits > 0) || !isfinite(a->flits) || !(a->cap > 0))
        return np_err_set(err, NP_ERR_RANGE, "memory access of %g flits at most %g "
                          "flits/cycle: both must be > 0", a->flits, a->cap);
    uint32_t id = m->free_acc;
    if (id == NONE) {
        if (m->n_accs == m->cap_accs) {
            uint32_t cap = m->cap_accs ? 2 * m->cap_accs : 64;
            mesh_acc *v = realloc(m->accs, cap * sizeof *v);
            if (!v)
                return np_err_set(err, NP_ERR_NOMEM, "out of memory starting a memory access");
            m->accs = v;
            m->cap_accs = cap;
        }
        id = m->n_accs;
    }
    uint32_t next_free = id < m->n_accs ? m->accs[id].next_free : NONE;
    mesh_sync(m);
    /* Outside a tick the mesh may have stepped the current cycle already (m->cycle is the
     * next one): a read's request still leaves in this cycle; a write's flow can only start
     * in the next, and its completion comes that cycle sooner, so alone it takes what it
     * would have. */
    uint64_t c = m->cycle;
    if (m->q && !m->in_tick) {
        uint64_t now = clk_cycle_at_or_after(m->clk, evq_now(m->q));
        if (now < c)
            c = now;
    }
    mesh_acc *x = &m->accs[id];
    *x = (mesh_acc){.a = *a,
                    .head = a->local ? 0
                                     : (uint32_t)mesh_zero_load_cycles(&m->p, a->node,
                                                                       m->ctrl[a->ctrl].router, 1),
                    .lag = (uint32_t)(m->cycle - c),
                    .next_free = NONE};
    np_status st = a->write ? acc_flow(m, id, err)
                   : mesh_heap_push(&m->acc_start, c + x->head + a->access_cycles, id)
                       ? NP_OK
                       : np_err_set(err, NP_ERR_NOMEM, "out of memory starting a memory access");
    if (st != NP_OK) {
        if (id < m->n_accs)
            m->accs[id].next_free = next_free;
        return st;
    }
    if (id == m->n_accs)
        m->n_accs++;
    else
        m->free_acc = next_free;
    m->accs_live++;
    m->accs_started++;
    mesh_kick(m);
    return NP_OK;
}

void mesh_mem_due(mesh *m, uint64_t now)
{
    while (m->acc_done.n && m->acc_done.v[0].t <= now) {
        uint32_t id = mesh_heap_pop(&m->acc_done).id;
        mesh_acc *x = &m->accs[id];
        mesh_ctrl *c = &m->ctrl[x->a.ctrl];
        if (x->a.write)
            c->write_flits += x->a.flits;
        else
            c->read_flits += x->a.flits;
        uint64_t tag = x->a.tag;
        x->next_free = m->free_acc;
        m->free_acc = id;
        m->accs_live--;
        if (m->access_done)
            m->access_done(m->access_done_ctx, tag);
    }
    while (m->acc_start.n && m->acc_start.v[0].t <= now) {
        np_err e;
        if (acc_flow(m, mesh_heap_pop(&m->acc_start).id, &e) != NP_OK)
            m->order_errors++; /* out of memory: mesh_verify reports it */
    }
}

void mesh_mem_flow_ended(mesh *m, uint32_t id, uint64_t now)
{
    const mesh_acc *x = &m->accs[id];
    const mesh_ctrl *c = &m->ctrl[x->a.ctrl];
    m->accs_flowing--;
    /* its flits on every router output it crossed */
    uint64_t flits = x->a.local ? 0 : (uint64_t)llround(x->a.flits);
    uint32_t from = x->a.write ? x->a.node : c->router, to = x->a.write ? c->router : x->a.node;
    for (uint32_t r = from; flits;) {
        int op = mesh_route(m, r, to);
        if (op == MESH_PORT_LOCAL && x->a.write)
            break;
        m->links[(size_t)r * NP + (size_t)op]->value += flits;
        if (op == MESH_PORT_LOCAL)
            break;
        r = (uint32_t)m->nb[(size_t)r * NP + (size_t)op];
    }
    uint64_t t = now + x->head + (x->a.write ? x->a.access_cycles + x->head - x->lag : 0);
    if (!mesh_heap_push(&m->acc_done, t, id))
        m->order_errors++;
}

uint64_t mesh_mem_next_cycle(const mesh *m)
{
    uint64_t c = m->acc_done.n ? m->acc_done.v[0].t : UINT64_MAX;
    if (m->acc_start.n && m->acc_start.v[0].t < c)
        c = m->acc_start.v[0].t;
    return c;
}

void mesh_mem_get_stats(const mesh *m, mesh_mem_stats *s)
{
    *s = (mesh_mem_stats){.accesses = m->accs_started,
                          .completed = m->accs_started - m->accs_live};
    if (!m->flow)
        return;
    s->flits = mesh_flow_moved_flits(m->flow, 1);
    s->cap_bound_flits = mesh_flow_bound_flits(m->flow, MESH_FLOW_CAP);
    for (uint32_t i = 0; i < m->n_ctrl; i++) {
        s->ctrl_bound_flits += mesh_flow_bound_flits(m->flow, m->ctrl[i].l_bw);
        s->port_bound_flits += mesh_flow_bound_flits(m->flow, m->ctrl[i].l_out) +
                               mesh_flow_bound_flits(m->flow, m->ctrl[i].l_in);
    }
    for (uint32_t l = 0; l < m->n_flow_links; l++)
        s->mesh_bound_flits += mesh_flow_bound_flits(m->flow, l);
}

void mesh_controller_stats(const mesh *m, uint32_t ctrl, mesh_ctrl_stats *s)
{
    *s = (mesh_ctrl_stats){0};
    if (ctrl >= m->n_ctrl)
        return;
    const mesh_ctrl *c = &m->ctrl[ctrl];
    *s = (mesh_ctrl_stats){.router = c->router, .flits_per_cycle = c->flits_per_cycle,
                           .read_flits = c->read_flits, .write_flits = c->write_flits,
                           .bound_flits = mesh_flow_bound_flits(m->flow, c->l_bw) +
                                          mesh_flow_bound_flits(m->flow, c->l_out) +
                                          mesh_flow_bound_flits(m->flow, c->l_in)};
}

double mesh_link_bound_flits(const mesh *m, uint32_t r, int port)
{
    if (!m->flow || r >= m->n || port < 0 || port > NP)
        return 0;
    return mesh_flow_bound_flits(m->flow, port == NP ? m->n * NP + r : r * NP + (uint32_t)port);
}
