/* cli_trace_coll.c — the flow engine's collectives into the trace layout (see
 * cli_trace_coll.h). */
#include "cli_trace_coll.h"

#include <stdlib.h>
#include <string.h>

#include "trace_map.h"

#define CTC_LINK_NAME 48
enum { CTC_U_SEND = 4, CTC_U_RECV = 5 }; /* chip unit places, after run_trace's compute..dma */

typedef struct ctc_msg { /* a message in flight: open addressing, 0 = an empty slot */
    uint64_t key;        /* its id + 1 */
    uint64_t start_ps, lat_ps;
} ctc_msg;

struct cli_trace_coll {
    net *n;
    trace_sink sink;
    trace_level level;
    coll_observer obs;
    char (*link_name)[CTC_LINK_NAME]; /* per network link, made once */
    uint32_t n_links, n_chips;
    uint64_t *last_ps;   /* per chip: its last send leaving or receive completing */
    ctc_msg *msgs;
    size_t cap, n_msgs;  /* cap: a power of two */
    uint64_t runs;
    bool oom;
};

static size_t ctc_home(const cli_trace_coll *t, uint64_t key)
{
    return tmap_mix(key) & (t->cap - 1);
}

static bool ctc_grow(cli_trace_coll *t)
{
    size_t cap = t->cap ? 2 * t->cap : 256;
    ctc_msg *v = calloc(cap, sizeof *v), *old = t->msgs;
    if (!v)
        return false;
    size_t old_cap = t->cap;
    t->msgs = v, t->cap = cap;
    for (size_t i = 0; i < old_cap; i++)
        if (old[i].key) {
            size_t j = ctc_home(t, old[i].key);
            while (v[j].key)
                j = (j + 1) & (cap - 1);
            v[j] = old[i];
        }
    free(old);
    return true;
}

/* Takes the message with key out of the table (backward-shift deletion): false if absent. */
static bool ctc_take(cli_trace_coll *t, uint64_t key, ctc_msg *out)
{
    if (!t->cap)
        return false;
    size_t i = ctc_home(t, key);
    while (t->msgs[i].key != key) {
        if (!t->msgs[i].key)
            return false;
        i = (i + 1) & (t->cap - 1);
    }
    *out = t->msgs[i];
    for (size_t j = i;;) { /* close the gap: move up what probed past it */
        j = (j + 1) & (t->cap - 1);
        if (!t->msgs[j].key)
            break;
        size_t h = ctc_home(t, t->msgs[j].key);
        if (((j - h) & (t->cap - 1)) >= ((j - i) & (t->cap - 1))) {
            t->msgs[i] = t->msgs[j];
            i = j;
        }
    }
    t->msgs[i].key = 0;
    t->n_msgs--;
    return true;
}

static void ctc_note(cli_trace_coll *t, uint32_t chip, uint64_t t_ps)
{
    if (chip < t->n_chips && t_ps > t->last_ps[chip])
        t->last_ps[chip] = t_ps;
}

static void ctc_send(void *ctx, const coll_obs_msg *m)
{
    cli_trace_coll *t = ctx;
    if (2 * (t->n_msgs + 1) > t->cap && !ctc_grow(t)) {
        t->oom = true;
        return;
    }
    uint64_t key = m->id + 1;
    size_t j = ctc_home(t, key);
    while (t->msgs[j].key && t->msgs[j].key != key)
        j = (j + 1) & (t->cap - 1);
    if (!t->msgs[j].key)
        t->n_msgs++;
    t->msgs[j] = (ctc_msg){key, m->t_ps, m->route ? m->route->latency_ps : 0};
    /* the links' counters need the time the last byte left: they go out at the receive */
}

static void ctc_recv(void *ctx, const coll_obs_msg *m)
{
    cli_trace_coll *t = ctx;
    const trace_sink_ops *ops = t->sink.ops;
    ctc_msg s;
    if (!ctc_take(t, m->id + 1, &s))
        return; /* its send was dropped (out of memory) */
    uint64_t sent = m->t_ps > s.start_ps + s.lat_ps ? m->t_ps - s.lat_ps : s.start_ps;
    ctc_note(t, m->src, sent);
    ctc_note(t, m->dst, m->t_done_ps);
    if (ops->transfer && m->src != m->dst) {
        trace_transfer x = {m->src, "c2c.send", m->bytes, s.start_ps, sent};
        ops->transfer(t->sink.ctx, &x);
        net_path_info route;
        np_err e;
        if (net_route(t->n, m->src, m->dst, &route, &e) == NP_OK) /* cached by the net */
            for (uint32_t i = 0; i < route.n_links; i++)
                if (route.links[i] < t->n_links) {
                    trace_transfer l = {TRACE_SYSTEM_CHIP, t->link_name[route.links[i]],
                                        m->bytes, s.start_ps, sent};
                    ops->transfer(t->sink.ctx, &l);
                }
    }
    if (t->level < TRACE_LEVEL_INSN || !ops->unit_slice || m->port >= TRACE_LANES_MAX)
        return;
    trace_arg a = TRACE_ARG_U("bytes", m->bytes);
    trace_unit_slice snd = {.chip = m->src, .core = TRACE_NO_CORE, .unit = CTC_U_SEND,
                            .unit_name = "send", .lane = m->port, .name = "send", .cat = "comm",
                            .start_ps = s.start_ps, .end_ps = sent, .args = &a, .n_args = 1,
                            .msg = TRACE_MSG_SEND, .peer_chip = m->dst,
                            .peer_core = TRACE_NO_CORE, .tag = m->port};
    ops->unit_slice(t->sink.ctx, &snd);
    bool reduce = m->t_done_ps > m->t_reduce_ps;
    trace_unit_slice rcv = {.chip = m->dst, .core = TRACE_NO_CORE, .unit = CTC_U_RECV,
                            .unit_name = "recv", .name = reduce ? "reduce" : "recv",
                            .cat = "comm", .start_ps = reduce ? m->t_reduce_ps : m->t_ps,
                            .end_ps = reduce ? m->t_done_ps : m->t_ps, .args = &a, .n_args = 1,
                            .msg = TRACE_MSG_RECV, .peer_chip = m->src,
                            .peer_core = TRACE_NO_CORE, .tag = m->port};
    ops->unit_slice(t->sink.ctx, &rcv);
}

np_status cli_trace_coll_create(net *n, trace_sink sink, trace_level level,
                                cli_trace_coll **out, np_err *err)
{
    static const trace_sink_ops none = {0};
    cli_trace_coll *t = calloc(1, sizeof *t);
    if (!t)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory");
    t->n = n, t->sink = sink, t->level = level;
    if (!t->sink.ops)
        t->sink.ops = &none;
    t->n_links = net_links(n);
    t->n_chips = net_chips(n);
    t->link_name = calloc(t->n_links + 1, sizeof *t->link_name);
    t->last_ps = calloc(t->n_chips + 1, sizeof *t->last_ps);
    if (!t->link_name || !t->last_ps) {
        cli_trace_coll_free(t);
        return np_err_set(err, NP_ERR_NOMEM, "out of memory");
    }
    for (uint32_t l = 0; l < t->n_links; l++)
        net_link_name(n, l, t->link_name[l], CTC_LINK_NAME);
    t->obs = (coll_observer){ctc_send, ctc_recv, t};
    *out = t;
    return NP_OK;
}

const coll_observer *cli_trace_coll_observer(cli_trace_coll *t) { return &t->obs; }

void cli_trace_coll_done(cli_trace_coll *t, const coll_result *r, const uint32_t *chips)
{
    const trace_sink_ops *ops = t->sink.ops;
    t->runs++;
    trace_arg a[] = {TRACE_ARG_U("bytes", r->bytes), TRACE_ARG_S("algo", coll_algo_name(r->algo))};
    for (uint32_t k = 0; k < r->ranks; k++) {
        uint32_t chip = chips ? chips[k] : k;
        uint64_t end = chip < t->n_chips && t->last_ps[chip] > r->t_start_ps ? t->last_ps[chip]
                                                                              : r->t_start_ps;
        trace_span s = {.chip = chip, .core = TRACE_NO_CORE, .track = "collectives",
                        .name = coll_op_name(r->op), .cat = "collective",
                        .start_ps = r->t_start_ps, .end_ps = end, .args = a, .n_args = 2,
                        .group = t->runs, .group_size = r->ranks};
        if (ops->span)
            ops->span(t->sink.ctx, &s);
        if (chip < t->n_chips)
            t->last_ps[chip] = 0;
    }
    if (ops->run_end)
        ops->run_end(t->sink.ctx, r->t_end_ps);
}

np_status cli_trace_coll_status(const cli_trace_coll *t, np_err *err)
{
    if (t->oom)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory tracing a collective");
    return NP_OK;
}

void cli_trace_coll_free(cli_trace_coll *t)
{
    if (!t)
        return;
    free(t->link_name);
    free(t->last_ps);
    free(t->msgs);
    free(t);
}
