/* run_result.c — the run's figures from the finished timeline (see run_engine.h).
 *
 * Mirrored ranks get their representative's figures, and the links of their traffic the
 * figures of the representative's links through the route correspondence, before anything is
 * summed: every aggregate is then computed over all ranks and links in the same order as when
 * every rank is simulated, so both give the same numbers to the last bit.
 */
#include "run_sim.h"

#include "run_figures.h"

#include <stdlib.h>
#include <string.h>

static np_status rr_oom(np_err *err)
{
    return np_err_set(err, NP_ERR_NOMEM, "out of memory collecting the run's figures");
}

static void rr_ranks(run_sim *s, run_result *r)
{
    const run_graph *g = s->g;
    for (uint32_t i = 0; i < g->ranks; i++) {
        const rs_rank *x = &s->rank[i];
        r->rank[i] = s->rank[x->rep].st; /* (mirrors never carry own_bytes) */
    }
    for (uint32_t i = 0; i < g->ranks; i++) {
        run_rank_stats *st = &r->rank[i];
        for (int k = 0; k < RUN_COMM_COUNT; k++)
            st->comm_bytes[k] += s->rank[i].own_bytes[k];
        if (st->pipe_first_ps == UINT64_MAX)
            st->pipe_first_ps = st->pipe_last_ps = st->pipe_busy_ps = 0;
        if (st->end_ps > r->time_ps)
            r->time_ps = st->end_ps;
        for (int k = 0; k < RUN_COMM_COUNT; k++) {
            r->comm_ps[k] += st->comm_ps[k];
            r->exposed_ps[k] += st->exposed_ps[k];
            r->comm_bytes[k] += st->comm_bytes[k];
        }
    }
    r->step_ps = r->time_ps / s->steps;
}

/* The bubble by stage: a rank's stage is its position in its pp group (run_figures.h). */
static np_status rr_bubbles(run_sim *s, run_result *r, np_err *err)
{
    const run_graph *g = s->g;
    r->micro_batches = g->micro_batches;
    r->stages = g->pp_gs == RUN_NONE ? 1 : g->gs[g->pp_gs].size;
    uint32_t *stage_of = malloc(((size_t)g->ranks + 1) * sizeof *stage_of);
    if (!stage_of)
        return rr_oom(err);
    for (uint32_t i = 0; i < g->ranks; i++)
        stage_of[i] = RUN_NONE;
    if (g->pp_gs != RUN_NONE) {
        const rg_groupset *pp = &g->gs[g->pp_gs];
        for (uint32_t i = 0; i < pp->n_groups * pp->size; i++)
            stage_of[pp->members[i]] = i % pp->size;
    }
    np_status st = run_figures_bubbles(r, stage_of, err);
    free(stage_of);
    return st;
}

static np_status rr_links(run_sim *s, run_result *r, np_err *err)
{
    size_t L = s->n_links;
    r->n_links = (uint32_t)L;
    r->links = calloc(L + 1, sizeof *r->links);
    if (!r->links)
        return rr_oom(err);
    /* each link's busiest window: the network's count, or the replayed collectives' (a link
     * carries one or the other: reused groups' links carry nothing else) */
    for (size_t l = 0; l < L; l++) {
        net_link_info li;
        net_link_get(s->n, (uint32_t)l, &li);
        double replay = net_window_most(&s->replay_peak[l], li.bytes_per_s);
        r->links[l].peak_bytes_per_s = li.peak_window_bytes > replay ? li.peak_window_bytes
                                                                     : replay;
    }
    for (uint32_t k = 1; k < s->mirror_n; k++)
        for (size_t l0 = 0; l0 < L; l0++) {
            uint32_t lk = s->mirror_link[k * L + l0];
            if (lk == RUN_NONE)
                continue;
            s->link_bytes[lk] = s->link_bytes[l0];
            r->links[lk].peak_bytes_per_s = r->links[l0].peak_bytes_per_s;
            if (!rs_bin_row_of(s, (uint32_t)l0))
                continue;
            uint64_t *to = rs_bin_row(s, lk); /* may move the rows: after it, the source */
            if (!to)
                return rr_oom(err);
            memcpy(to, rs_bin_row_of(s, (uint32_t)l0), RS_LINK_BINS * sizeof *to);
        }
    r->link_window_ps = NET_LINK_PEAK_WINDOW_PS;
    double t_s = (double)r->time_ps * 1e-12, w_s = (double)s->bin_ps * 1e-12;
    for (size_t l = 0; l < L; l++) {
        run_link_stats *ls = &r->links[l];
        net_link_info li;
        net_link_get(s->n, (uint32_t)l, &li);
        net_link_name(s->n, (uint32_t)l, ls->name, sizeof ls->name);
        ls->capacity_bytes_per_s = li.bytes_per_s;
        ls->bytes = s->link_bytes[l];
        ls->avg_bytes_per_s = t_s > 0 ? (double)ls->bytes / t_s : 0;
        ls->peak_bytes_per_s /= (double)NET_LINK_PEAK_WINDOW_PS * 1e-12;
        if (!s->obs || !s->obs->link || !ls->bytes)
            continue;
        /* the trace's counter: the network counts a flow's bytes when its last byte leaves;
         * spread them back over the windows before, at no more than the link's bandwidth,
         * latest first */
        double cap = li.bytes_per_s * w_s, carry = 0, spread[RS_LINK_BINS];
        const uint64_t *b = rs_bin_row_of(s, (uint32_t)l);
        if (!b)
            continue;
        for (uint32_t k = RS_LINK_BINS; k-- > 0;) {
            double v = (double)b[k] + carry;
            double here = k == 0 || v < cap ? v : cap;
            carry = v - here;
            spread[k] = here;
        }
        uint32_t n = RS_LINK_BINS;
        while (n > 1 && spread[n - 1] == 0)
            n--;
        s->obs->link(s->obs->ctx, (uint32_t)l, ls->name, spread, n, s->bin_ps);
    }
    return run_figures_top_links(r, s->o.top_links, err);
}

np_status rs_result(run_sim *s, run_result **out, np_err *err)
{
    const run_graph *g = s->g;
    run_result *r = calloc(1, sizeof *r);
    if (!r)
        return rr_oom(err);
    r->ranks = g->ranks;
    r->steps = s->steps;
    r->rank = calloc(g->ranks, sizeof *r->rank);
    r->step_end_ps = malloc((size_t)s->steps * sizeof *r->step_end_ps);
    if (!r->rank || !r->step_end_ps) {
        run_result_free(r);
        return rr_oom(err);
    }
    memcpy(r->step_end_ps, s->step_end, (size_t)s->steps * sizeof *r->step_end_ps);
    rr_ranks(s, r);
    if (rr_bubbles(s, r, err) != NP_OK || rr_links(s, r, err) != NP_OK) {
        run_result_free(r);
        return err->status;
    }
    r->events = evq_dispatched(s->q);
    r->kernels_timed = s->kernels_timed;
    r->colls_simulated = s->colls_sim;
    r->colls_reused = s->colls_reused;
    r->colls_scratch = s->colls_scratch;
    r->transfers = s->transfers;
    r->ranks_simulated = s->ranks_sim;
    r->mirror_groupset = s->mirror_gs;
    r->mirror_ways = s->mirror_n;
    *out = r;
    return NP_OK;
}

void run_result_free(run_result *r)
{
    if (!r)
        return;
    free(r->step_end_ps);
    free(r->rank);
    free(r->stage_bubble_frac);
    free(r->stage_bubble_ratio);
    free(r->links);
    free(r->top);
    free(r);
}
