/* lower_mem.c — the arena of a lowered program: transient buffers placed by liveness (see
 * lower_impl.h), the rule of framework/memplan.c applied to the steps of the program. */
#include <stdlib.h>
#include <string.h>

#include "arena.h"
#include "lower_impl.h"

#define LW_ALIGN 64

static uint64_t lw_aligned(uint64_t b) { return (b + LW_ALIGN - 1) / LW_ALIGN * LW_ALIGN; }

/* Counting sort of buffer indices by a step key (first or last), stable. */
static np_status lw_bucket(const lw_buf *bufs, uint32_t n, int32_t n_steps, bool by_last,
                           uint32_t **start, uint32_t **idx, np_err *err)
{
    *start = calloc((size_t)n_steps + 2, sizeof **start);
    *idx = malloc(((size_t)n + 1) * sizeof **idx);
    if (!*start || !*idx)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory planning the arena");
    for (uint32_t i = 0; i < n; i++)
        (*start)[(by_last ? bufs[i].last : bufs[i].first) + 1]++;
    for (int32_t s = 1; s <= n_steps + 1; s++)
        (*start)[s] += (*start)[s - 1];
    uint32_t *fill = calloc((size_t)n_steps + 1, sizeof *fill);
    if (!fill)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory planning the arena");
    for (uint32_t i = 0; i < n; i++) {
        int32_t s = by_last ? bufs[i].last : bufs[i].first;
        (*idx)[(*start)[s] + fill[s]++] = i;
    }
    free(fill);
    return NP_OK;
}

np_status lw_arena_plan(lw_buf *bufs, uint32_t n, int32_t n_steps, uint64_t *arena, np_err *err)
{
    *arena = 0;
    uint32_t *a_start = NULL, *a_idx = NULL, *f_start = NULL, *f_idx = NULL;
    np_arena ar = {.blocks = malloc(((size_t)n + 1) * sizeof *ar.blocks)};
    np_status st = NP_OK;
    if (!ar.blocks) {
        st = np_err_set(err, NP_ERR_NOMEM, "out of memory planning the arena");
        goto done;
    }
    for (uint32_t i = 0; i < n; i++)
        if (bufs[i].first < 0 || bufs[i].first >= n_steps || bufs[i].last < bufs[i].first ||
            bufs[i].last >= n_steps) {
            st = np_err_set(err, NP_ERR_INTERNAL, "arena: buffer %u lives from step %d to %d "
                            "of %d", i, bufs[i].first, bufs[i].last, n_steps);
            goto done;
        }
    if ((st = lw_bucket(bufs, n, n_steps, false, &a_start, &a_idx, err)) != NP_OK ||
        (st = lw_bucket(bufs, n, n_steps, true, &f_start, &f_idx, err)) != NP_OK)
        goto done;
    for (int32_t s = 0; s < n_steps; s++) {
        for (uint32_t a = a_start[s]; a < a_start[s + 1]; a++) {
            lw_buf *b = &bufs[a_idx[a]];
            b->off = np_arena_alloc(&ar, lw_aligned(b->bytes ? b->bytes : 1));
        }
        for (uint32_t f = f_start[s]; f < f_start[s + 1]; f++)
            np_arena_free(&ar, bufs[f_idx[f]].off);
    }
    *arena = ar.high;
done:
    free(ar.blocks);
    free(a_start);
    free(a_idx);
    free(f_start);
    free(f_idx);
    return st;
}
