/* iheap.c — the binary min-heap of iheap.h. */
#include "iheap.h"

void np_iheap_push(np_iheap *h, int x)
{
    int i = h->n++;
    h->v[i] = x;
    while (i > 0 && h->less(h->ctx, h->v[i], h->v[(i - 1) / 2])) {
        int t = h->v[i];
        h->v[i] = h->v[(i - 1) / 2];
        h->v[(i - 1) / 2] = t;
        i = (i - 1) / 2;
    }
}

int np_iheap_pop(np_iheap *h)
{
    int top = h->v[0];
    h->v[0] = h->v[--h->n];
    for (int i = 0;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < h->n && h->less(h->ctx, h->v[l], h->v[m]))
            m = l;
        if (r < h->n && h->less(h->ctx, h->v[r], h->v[m]))
            m = r;
        if (m == i)
            break;
        int t = h->v[i];
        h->v[i] = h->v[m];
        h->v[m] = t;
        i = m;
    }
    return top;
}
