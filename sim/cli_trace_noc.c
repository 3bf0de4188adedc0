/* cli_trace_noc.c — the mesh of `npusim noc` into the trace layout (see cli_trace_noc.h). */
#include "cli_trace_noc.h"

#include <stdio.h>
#include <stdlib.h>

#define CTN_NAME 40
#define CTN_SERIES (1 + MESH_PORT_COUNT) /* per router: its flits, then each output port */

struct cli_trace_noc {
    trace_sink sink;
    uint64_t cycle_ps, offset_ps;  /* offset: where the current run starts */
    uint32_t n;                    /* routers */
    char (*name)[CTN_NAME];        /* n x CTN_SERIES counter names ("" : no such link) */
    double *last;                  /* n x CTN_SERIES: the value written last (-1: none) */
    uint64_t *prev;                /* n x MESH_PORT_COUNT: link counts at the last sample */
    uint64_t prev_cycle;           /* the last sample's cycle */
};

np_status cli_trace_noc_create(const mesh_params *p, trace_sink sink, uint64_t cycle_ps,
                               cli_trace_noc **out, np_err *err)
{
    static const trace_sink_ops none = {0};
    cli_trace_noc *t = calloc(1, sizeof *t);
    if (!t)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory");
    t->sink = sink.ops ? sink : (trace_sink){&none, NULL};
    t->cycle_ps = cycle_ps ? cycle_ps : 1;
    t->n = p->kx * p->ky;
    size_t k = (size_t)t->n * CTN_SERIES;
    t->name = calloc(k, sizeof *t->name);
    t->last = malloc(k * sizeof *t->last);
    t->prev = calloc((size_t)t->n * MESH_PORT_COUNT, sizeof *t->prev);
    if (!t->name || !t->last || !t->prev) {
        cli_trace_noc_free(t);
        return np_err_set(err, NP_ERR_NOMEM, "out of memory");
    }
    for (uint32_t r = 0; r < t->n; r++) {
        uint32_t x = r % p->kx, y = r / p->kx;
        bool has[MESH_PORT_COUNT] = {true, x + 1 < p->kx, x > 0, y + 1 < p->ky, y > 0};
        snprintf(t->name[(size_t)r * CTN_SERIES], CTN_NAME, "r%u flits", r);
        for (int pt = 0; pt < MESH_PORT_COUNT; pt++)
            if (has[pt])
                snprintf(t->name[(size_t)r * CTN_SERIES + 1 + pt], CTN_NAME, "r%u.%s flits/cycle",
                         r, mesh_port_name(pt));
    }
    for (size_t i = 0; i < k; i++)
        t->last[i] = -1;
    *out = t;
    return NP_OK;
}

static void ctn_level(cli_trace_noc *t, size_t series, uint64_t t_ps, double v)
{
    if (!t->name[series][0] || v == t->last[series])
        return;
    t->last[series] = v;
    if (t->sink.ops->level)
        t->sink.ops->level(t->sink.ctx, 0, t->name[series], t_ps, v);
}

void cli_trace_noc_sample(void *ctx, const mesh *m, bool reset)
{
    cli_trace_noc *t = ctx;
    uint64_t c = mesh_cycle(m), dt = c - t->prev_cycle;
    if (dt) { /* a sample at the cycle of the last one (the window opening) writes nothing */
        /* occupancy now; a link's flits/cycle over the period, from its start */
        uint64_t now = t->offset_ps + c * t->cycle_ps, from = now - dt * t->cycle_ps;
        for (uint32_t r = 0; r < t->n; r++) {
            ctn_level(t, (size_t)r * CTN_SERIES, now, mesh_router_flits(m, r));
            for (int pt = 0; pt < MESH_PORT_COUNT; pt++) {
                uint64_t f = mesh_link_flits(m, r, pt), *p = &t->prev[(size_t)r * MESH_PORT_COUNT + pt];
                ctn_level(t, (size_t)r * CTN_SERIES + 1 + pt, from,
                          (double)(f >= *p ? f - *p : f) / (double)dt);
                *p = f;
            }
        }
    }
    t->prev_cycle = c;
    if (reset) /* the counts restart from 0 */
        for (size_t i = 0; i < (size_t)t->n * MESH_PORT_COUNT; i++)
            t->prev[i] = 0;
}

static void ctn_span(cli_trace_noc *t, const char *track, const char *name, uint64_t a_cyc,
                     uint64_t b_cyc, const trace_arg *args, size_t n_args)
{
    if (b_cyc <= a_cyc || !t->sink.ops->span)
        return;
    trace_span s = {.chip = 0, .core = TRACE_NO_CORE, .track = track, .name = name, .cat = "noc",
                    .start_ps = t->offset_ps + a_cyc * t->cycle_ps,
                    .end_ps = t->offset_ps + b_cyc * t->cycle_ps, .args = args, .n_args = n_args};
    t->sink.ops->span(t->sink.ctx, &s);
}

void cli_trace_noc_run(cli_trace_noc *t, const noc_study_params *p, const noc_study_result *r)
{
    char name[48];
    snprintf(name, sizeof name, "rate %.4f", p->rate);
    trace_arg a[] = {TRACE_ARG_F("offered_rate", r->offered_rate),
                     TRACE_ARG_F("accepted_rate", r->accepted_rate),
                     TRACE_ARG_F("avg_packet_latency", r->avg_packet_latency),
                     TRACE_ARG_U("cycles", r->cycles),
                     TRACE_ARG_S("saturated", r->saturated ? "yes" : "no")};
    uint64_t w = p->warmup, e = p->warmup + p->measure;
    if (w > r->cycles)
        w = r->cycles;
    if (e > r->cycles)
        e = r->cycles;
    ctn_span(t, "runs", name, 0, r->cycles, a, sizeof a / sizeof a[0]);
    ctn_span(t, "phases", "warmup", 0, w, NULL, 0);
    ctn_span(t, "phases", "measure", w, e, NULL, 0);
    ctn_span(t, "phases", "drain", e, r->cycles, NULL, 0);
    t->offset_ps += r->cycles * t->cycle_ps;
    for (size_t i = 0; i < (size_t)t->n * CTN_SERIES; i++)
        if (t->last[i] > 0) /* the next run's mesh starts empty */
            ctn_level(t, i, t->offset_ps, 0);
    t->prev_cycle = 0;
    for (size_t i = 0; i < (size_t)t->n * MESH_PORT_COUNT; i++)
        t->prev[i] = 0;
    if (t->sink.ops->run_end)
        t->sink.ops->run_end(t->sink.ctx, t->offset_ps);
}

void cli_trace_noc_free(cli_trace_noc *t)
{
    if (!t)
        return;
    free(t->name);
    free(t->last);
    free(t->prev);
    free(t);
}
