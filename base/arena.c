/* arena.c — best-fit placement in one arena (arena.h). */
#include <string.h>

#include "arena.h"

uint64_t np_arena_alloc(np_arena *a, uint64_t size)
{
    uint64_t best = UINT64_MAX, at = 0, prev_end = 0;
    uint32_t best_k = a->n;
    for (uint32_t k = 0; k < a->n; k++) {
        uint64_t gap = a->blocks[k].off - prev_end;
        if (gap >= size && gap < best) {
            best = gap;
            best_k = k;
            at = prev_end;
        }
        prev_end = a->blocks[k].off + a->blocks[k].size;
    }
    if (best == UINT64_MAX) {
        at = prev_end;
        best_k = a->n;
    }
    memmove(&a->blocks[best_k + 1], &a->blocks[best_k],
            (size_t)(a->n - best_k) * sizeof *a->blocks);
    a->blocks[best_k] = (np_arena_block){at, size};
    a->n++;
    a->live += size;
    if (at + size > a->high)
        a->high = at + size;
    return at;
}

void np_arena_free(np_arena *a, uint64_t off)
{
    for (uint32_t k = 0; k < a->n; k++)
        if (a->blocks[k].off == off) {
            a->live -= a->blocks[k].size;
            memmove(&a->blocks[k], &a->blocks[k + 1], (size_t)(a->n - k - 1) * sizeof *a->blocks);
            a->n--;
            return;
        }
}
