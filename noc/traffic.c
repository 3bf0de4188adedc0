/* traffic.c — synthetic traffic patterns and the BookSim-style study loop (see traffic.h).
 *
 * The study is driven by the event kernel: one event per NoC cycle creates that cycle's
 * packets (Bernoulli per node) and then advances the mesh by one cycle. */
#include "traffic.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "evq.h"
#include "parse.h"
#include "rng.h"
#include "stats.h"

static const char *const noc_traffic_names[NOC_TRAFFIC_COUNT] = {
    [NOC_TRAFFIC_UNIFORM] = "uniform",   [NOC_TRAFFIC_TRANSPOSE] = "transpose",
    [NOC_TRAFFIC_BITCOMP] = "bitcomp",   [NOC_TRAFFIC_HOTSPOT] = "hotspot",
    [NOC_TRAFFIC_NEIGHBOR] = "neighbor",
};
_Static_assert(sizeof noc_traffic_names / sizeof noc_traffic_names[0] == NOC_TRAFFIC_COUNT,
               "one name per traffic pattern");

const char *noc_traffic_name(noc_traffic t)
{
    return (unsigned)t < NOC_TRAFFIC_COUNT ? noc_traffic_names[t] : NULL;
}

np_status noc_traffic_parse(const char *name, noc_traffic *out, np_err *err)
{
    for (int i = 0; i < NOC_TRAFFIC_COUNT; i++)
        if (strcmp(name, noc_traffic_names[i]) == 0) {
            *out = (noc_traffic)i;
            return NP_OK;
        }
    const char *guess = np_suggest_name(name, noc_traffic_names, NOC_TRAFFIC_COUNT);
    return np_err_set(err, NP_ERR_UNKNOWN_KEY, "unknown traffic pattern '%s'%s%s%s (expected "
                      "uniform, transpose, bitcomp, hotspot or neighbor)", name,
                      guess ? "; did you mean '" : "", guess ? guess : "", guess ? "'?" : "");
}

uint32_t noc_traffic_dest(noc_traffic t, const mesh_params *p, uint32_t src,
                          const uint32_t *hotspots, uint32_t n_hotspots, struct rng *r)
{
    uint32_t n = p->kx * p->ky, x = src % p->kx, y = src / p->kx;
    switch (t) {
    case NOC_TRAFFIC_UNIFORM: return (uint32_t)rng_below(r, n);
    case NOC_TRAFFIC_TRANSPOSE: return x * p->kx + y;
    case NOC_TRAFFIC_BITCOMP: return ~src & (n - 1);
    case NOC_TRAFFIC_HOTSPOT: return hotspots[n_hotspots > 1 ? rng_below(r, n_hotspots) : 0];
    case NOC_TRAFFIC_NEIGHBOR: return ((y + 1) % p->ky) * p->kx + (x + 1) % p->kx;
    case NOC_TRAFFIC_COUNT: break;
    }
    return src;
}

typedef struct noc_study {
    const noc_study_params *p;
    mesh *m;
    rng r;
    uint32_t n;
    const uint32_t *hot;
    uint32_t n_hot;
    uint64_t t_start, t_end; /* measurement window [t_start, t_end) */
    uint64_t window_ej;      /* flits delivered to endpoints in the window */
    uint64_t window_maxlink; /* flits on the busiest router-to-router link in the window */
    uint64_t created_flits_window;
    int64_t backlog_start, backlog_end; /* flits waiting at the sources at the window's ends */
    uint64_t measured_created, measured_done;
    double hops_sum, zero_sum;
    stats_accum *lat, *net;
    stats_hist *lat_hist;
    np_status status;
    np_err *err;
} noc_study;

static void noc_study_deliver(void *ctx, const mesh_packet *pk)
{
    noc_study *s = ctx;
    if (!pk->tag)
        return;
    s->measured_done++;
    double lat = (double)(pk->t_done - pk->t_create);
    stats_sample(s->lat, lat);
    stats_hist_sample(s->lat_hist, lat);
    stats_sample(s->net, (double)(pk->t_done - pk->t_inject));
    s->hops_sum += mesh_hops(&s->p->mesh, pk->src, pk->dst);
    s->zero_sum += (double)mesh_zero_load_cycles(&s->p->mesh, pk->src, pk->dst, pk->flits);
}

/* Flits created but not yet injected: what waits in the source queues. */
static int64_t noc_study_backlog(const mesh *m)
{
    mesh_totals t;
    mesh_get_totals(m, &t);
    return (int64_t)(t.flits_created - t.flits_injected);
}

static void noc_study_tick(evq *q, void *ctx, uint64_t arg)
{
    (void)arg;
    noc_study *s = ctx;
    uint64_t c = mesh_cycle(s->m);
    if (c == s->t_start) {
        if (s->p->sample)
            s->p->sample(s->p->sample_ctx, s->m, true);
        mesh_reset_link_counts(s->m);
        s->backlog_start = noc_study_backlog(s->m);
    }
    double prob = s->p->rate / s->p->packet_flits;
    bool measured = c >= s->t_start && c < s->t_end;
    for (uint32_t i = 0; i < s->n; i++) {
        if (rng_unit(&s->r) >= prob)
            continue;
        uint32_t d = noc_traffic_dest(s->p->traffic, &s->p->mesh, i, s->hot, s->n_hot, &s->r);
        if (mesh_send(s->m, i, d, s->p->packet_flits, measured, s->err) != NP_OK) {
            s->status = s->err->status;
            evq_stop(q);
            return;
        }
        if (measured) {
            s->measured_created++;
            s->created_flits_window += s->p->packet_flits;
        }
    }
    mesh_step(s->m);
    if (c + 1 == s->t_end) { /* the window closes: read the link counters */
        uint64_t ej = 0, maxl = 0;
        for (uint32_t r = 0; r < s->n; r++)
            for (int pt = 0; pt < MESH_PORT_COUNT; pt++) {
                uint64_t f = mesh_link_flits(s->m, r, pt);
                if (pt == MESH_PORT_LOCAL)
                    ej += f;
                else if (f > maxl)
                    maxl = f;
            }
        s->window_ej = ej;
        s->backlog_end = noc_study_backlog(s->m);
        s->window_maxlink = maxl;
    }
    /* stop once all measured packets arrived, or when the drain runs out */
    bool last = (s->measured_done == s->measured_created && c + 1 >= s->t_end) ||
                c + 1 >= s->t_end + s->p->drain_max;
    if (s->p->sample && ((c + 1) % s->p->sample_every == 0 || last))
        s->p->sample(s->p->sample_ctx, s->m, false);
    if (last)
        return;
    np_err e;
    if (evq_schedule_in(q, 1000, noc_study_tick, s, 0, NULL, &e) != NP_OK) {
        *s->err = e;
        s->status = e.status;
    }
}

np_status noc_study_run(const noc_study_params *p, noc_study_result *res, np_err *err)
{
    if (mesh_params_check(&p->mesh, err) != NP_OK)
        return err->status;
    const mesh_params *mp = &p->mesh;
    uint32_t n = mp->kx * mp->ky;
    if (!(p->rate >= 0 && p->rate <= 1))
        return np_err_set(err, NP_ERR_RANGE, "injection rate %g: must be 0 .. 1 flits/node/"
                          "cycle", p->rate);
    if (p->packet_flits < 1 || p->packet_flits > 1024)
        return np_err_set(err, NP_ERR_RANGE, "packet size %" PRIu32 " flits: must be 1 .. "
                          "1024", p->packet_flits);
    if (p->measure < 1)
        return np_err_set(err, NP_ERR_RANGE, "the measurement window needs at least 1 cycle");
    if (p->sample && p->sample_every < 1)
        return np_err_set(err, NP_ERR_RANGE, "samples of the mesh need a period of at least 1 "
                          "cycle");
    if (p->traffic == NOC_TRAFFIC_TRANSPOSE && mp->kx != mp->ky)
        return np_err_set(err, NP_ERR_INCONSISTENT, "transpose traffic needs a square mesh, "
                          "not %" PRIu32 "x%" PRIu32, mp->kx, mp->ky);
    if (p->traffic == NOC_TRAFFIC_BITCOMP && (n & (n - 1)) != 0)
        return np_err_set(err, NP_ERR_INCONSISTENT, "bitcomp traffic needs a power-of-two node"
                          " count, not %" PRIu32, n);
    for (uint32_t i = 0; i < p->n_hotspots; i++)
        if (p->hotspots[i] >= n)
            return np_err_set(err, NP_ERR_RANGE, "hotspot node %" PRIu32 " is not in the "
                              "%" PRIu32 "-node mesh", p->hotspots[i], n);
    uint32_t centre = (mp->ky / 2) * mp->kx + mp->kx / 2;

    noc_study s = {.p = p, .n = n, .err = err, .status = NP_OK};
    s.hot = p->n_hotspots ? p->hotspots : &centre;
    s.n_hot = p->n_hotspots ? p->n_hotspots : 1;
    s.t_start = p->warmup;
    s.t_end = p->warmup + p->measure;
    rng_seed(&s.r, p->seed);
    stats *reg = stats_create();
    evq *q = NULL;
    np_status st = NP_OK;
    if (!reg) {
        st = np_err_set(err, NP_ERR_NOMEM, "out of memory");
        goto out;
    }
    if (!(s.lat = stats_new_accum(reg, "study", "packet_latency", "cycles", "", err)) ||
        !(s.net = stats_new_accum(reg, "study", "network_latency", "cycles", "", err)) ||
        !(s.lat_hist = stats_new_hist_linear(reg, "study", "packet_latency_hist", "cycles", "",
                                             0, 1, 16384, err))) {
        st = err->status;
        goto out;
    }
    if ((st = mesh_create(mp, NULL, NULL, &s.m, err)) != NP_OK)
        goto out;
    mesh_set_deliver(s.m, noc_study_deliver, &s);
    if ((st = evq_create(&q, err)) != NP_OK)
        goto out;
    if ((st = evq_schedule_at(q, 0, noc_study_tick, &s, 0, NULL, err)) != NP_OK)
        goto out;
    if ((st = evq_run(q, err)) != NP_OK)
        goto out;
    if ((st = s.status) != NP_OK)
        goto out;

    memset(res, 0, sizeof *res);
    double cells = (double)n * (double)p->measure;
    res->offered_rate = (double)s.created_flits_window / cells;
    res->accepted_rate = (double)s.window_ej / cells;
    res->avg_packet_latency = stats_accum_mean(s.lat);
    res->avg_network_latency = stats_accum_mean(s.net);
    res->p50_packet_latency = stats_hist_quantile(s.lat_hist, 0.5);
    res->p99_packet_latency = stats_hist_quantile(s.lat_hist, 0.99);
    res->packets_measured = s.measured_done;
    res->packets_unfinished = s.measured_created - s.measured_done;
    res->avg_hops = s.measured_done ? s.hops_sum / (double)s.measured_done : 0;
    res->zero_load_latency = s.measured_done ? s.zero_sum / (double)s.measured_done : 0;
    res->max_link_util = (double)s.window_maxlink / (double)p->measure;
    res->cycles = mesh_cycle(s.m);
    double thres = p->latency_thres > 0 ? p->latency_thres : 500;
    /* the sources' backlog grew during the window by more than 2% of what they offered (and
     * by more than a flit per node): accepted throughput falls short of the offered load */
    double growth = (double)(s.backlog_end - s.backlog_start);
    res->saturated = res->packets_unfinished > 0 || res->avg_packet_latency > thres ||
                     (growth > 0.02 * (double)s.created_flits_window && growth > n);
    np_err verr;
    res->conserved = mesh_verify(s.m, &verr) == NP_OK;
    if (!res->conserved)
        st = np_err_set(err, NP_ERR_INTERNAL, "%s", verr.msg);
out:
    evq_free(q);
    mesh_free(s.m);
    stats_free(reg);
    return st;
}
