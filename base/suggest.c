/* suggest.c — edit distance and nearest-name lookup for "did you mean" messages. */
#include "suggest.h"

#include <stdlib.h>
#include <string.h>

size_t np_edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    size_t small[2][65], *prev = small[0], *cur = small[1];
    size_t *heap = NULL;
    if (lb > 64) {
        heap = malloc(2 * (lb + 1) * sizeof *heap);
        if (!heap)
            return la > lb ? la : lb;
        prev = heap;
        cur = heap + lb + 1;
    }
    for (size_t j = 0; j <= lb; j++)
        prev[j] = j;
    for (size_t i = 1; i <= la; i++) {
        cur[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t sub = prev[j - 1] + (a[i - 1] != b[j - 1]);
            size_t del = prev[j] + 1, ins = cur[j - 1] + 1;
            size_t m = sub < del ? sub : del;
            cur[j] = m < ins ? m : ins;
        }
        size_t *t = prev;
        prev = cur;
        cur = t;
    }
    size_t d = prev[lb];
    free(heap);
    return d;
}

const char *np_suggest(const char *word, const char *const *candidates, size_t n,
                       size_t max_dist)
{
    const char *best = NULL;
    size_t best_d = max_dist + 1;
    for (size_t i = 0; i < n; i++) {
        size_t d = np_edit_distance(word, candidates[i]);
        if (d < best_d) {
            best_d = d;
            best = candidates[i];
        }
    }
    return best;
}
