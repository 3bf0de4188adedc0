/* iheap.h — a binary min-heap of int items ordered by the caller's comparison: the ready queue
 * of the framework's list schedulers (the graph scheduler, framework/sched.c, and a plan
 * block's entries, framework/plan_entries.c).
 *
 *   np_iheap h = {.v = storage, .less = by_key, .ctx = keys};   // storage: room for every item
 *   np_iheap_push(&h, item);
 *   while (h.n) { int top = np_iheap_pop(&h); ... }
 *
 * The heap allocates nothing: v holds at least as many items as are ever in it at once. Ties
 * (neither less than the other) come out in an unspecified but deterministic order, so callers
 * that need a total order break ties in their comparison. */
#ifndef NPUSIM_BASE_IHEAP_H
#define NPUSIM_BASE_IHEAP_H

#include <stdbool.h>

typedef struct np_iheap {
    int *v;                                      /* the items; the caller's storage */
    int n;                                       /* items in the heap */
    bool (*less)(const void *ctx, int a, int b); /* whether a comes out before b */
    const void *ctx;
} np_iheap;

/* Adds item x (v must have room). */
void np_iheap_push(np_iheap *h, int x);

/* Removes and returns the least item (h->n > 0). */
int np_iheap_pop(np_iheap *h);

#endif
