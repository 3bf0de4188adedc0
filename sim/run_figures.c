/* run_figures.c — the figures both fidelities compute alike (see run_figures.h). */
#include "run_figures.h"

#include <stdbool.h>
#include <stdlib.h>

np_status run_figures_bubbles(run_result *r, const uint32_t *stage_of, np_err *err)
{
    uint32_t S = r->stages ? r->stages : 1;
    r->stage_bubble_frac = calloc(S, sizeof *r->stage_bubble_frac);
    r->stage_bubble_ratio = calloc(S, sizeof *r->stage_bubble_ratio);
    uint32_t *cnt = calloc(S, sizeof *cnt);
    if (!r->stage_bubble_frac || !r->stage_bubble_ratio || !cnt) {
        free(cnt);
        return np_err_set(err, NP_ERR_NOMEM, "out of memory collecting the run's figures");
    }
    for (uint32_t i = 0; i < r->ranks; i++) {
        const run_rank_stats *st = &r->rank[i];
        uint32_t s = stage_of[i];
        if (s >= S || !st->pipe_busy_ps || !st->window_ps)
            continue;
        double w = (double)st->window_ps, b = (double)st->bubble_ps;
        r->stage_bubble_frac[s] += b / w;
        r->stage_bubble_ratio[s] += w > b ? b / (w - b) : 0;
        cnt[s]++;
    }
    uint32_t used = 0;
    r->bubble_frac = r->bubble_ratio = 0;
    for (uint32_t s = 0; s < S; s++) {
        if (!cnt[s])
            continue;
        r->stage_bubble_frac[s] /= cnt[s];
        r->stage_bubble_ratio[s] /= cnt[s];
        r->bubble_frac += r->stage_bubble_frac[s];
        r->bubble_ratio += r->stage_bubble_ratio[s];
        used++;
    }
    if (used) {
        r->bubble_frac /= used;
        r->bubble_ratio /= used;
    }
    free(cnt);
    return NP_OK;
}

np_status run_figures_top_links(run_result *r, uint32_t top, np_err *err)
{
    r->n_top = top ? top : 8;
    if (r->n_top > r->n_links)
        r->n_top = r->n_links;
    r->top = malloc(((size_t)r->n_top + 1) * sizeof *r->top);
    if (!r->top)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory collecting the run's figures");
    /* by selection: n_top is small */
    for (uint32_t i = 0; i < r->n_top; i++) {
        uint32_t best = UINT32_MAX;
        for (uint32_t l = 0; l < r->n_links; l++) {
            bool taken = false;
            for (uint32_t j = 0; j < i && !taken; j++)
                taken = r->top[j] == l;
            if (!taken && (best == UINT32_MAX || r->links[l].bytes > r->links[best].bytes))
                best = l;
        }
        r->top[i] = best;
    }
    return NP_OK;
}
