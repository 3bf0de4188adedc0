/* suggest.h — "did you mean" for names typed by users (commands, config keys, mnemonics). */
#ifndef NPUSIM_SUGGEST_H
#define NPUSIM_SUGGEST_H

#include <stddef.h>

/* Levenshtein distance between a and b (insert, delete, substitute each cost 1). */
size_t np_edit_distance(const char *a, const char *b);

/* The candidate closest to word, if its distance is at most max_dist (ties: the earliest
 * candidate); NULL when none is that close. */
const char *np_suggest(const char *word, const char *const *candidates, size_t n,
                       size_t max_dist);

#endif
