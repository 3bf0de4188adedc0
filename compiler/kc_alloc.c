/* kc_alloc.c — scratchpad/accumulator block and semaphore allocators (see kc_alloc.h). */
#include "kc_alloc.h"

#include <stdlib.h>
#include <string.h>

void kc_blocks_init(kc_blocks *a, uint64_t size)
{
    memset(a, 0, sizeof *a);
    a->size = size;
}

void kc_blocks_fini(kc_blocks *a)
{
    free(a->b);
    memset(a, 0, sizeof *a);
}

static uint64_t align_up(uint64_t x, uint64_t align) { return (x + align - 1) & ~(align - 1); }

/* Calls fn on every free run [lo, hi) (quarantined blocks counted free when asked) until it
 * returns true. */
static bool each_gap(const kc_blocks *a, bool through_q,
                     bool (*fn)(void *, uint64_t, uint64_t, uint32_t), void *ctx)
{
    uint64_t lo = 0;
    for (uint32_t i = 0; i <= a->n; i++) {
        if (i < a->n && through_q && a->b[i].quarantined)
            continue; /* part of the run */
        uint64_t hi = i < a->n ? a->b[i].off : a->size;
        if (hi > lo && fn(ctx, lo, hi, i))
            return true;
        if (i < a->n)
            lo = a->b[i].off + a->b[i].size > lo ? a->b[i].off + a->b[i].size : lo;
    }
    return false;
}

typedef struct fit_ctx {
    uint64_t bytes, align, off, largest;
} fit_ctx;

static bool fit_first(void *v, uint64_t lo, uint64_t hi, uint32_t i)
{
    (void)i;
    fit_ctx *c = v;
    uint64_t at = align_up(lo, c->align);
    if (at >= lo && at < hi && hi - at >= c->bytes) {
        c->off = at;
        return true;
    }
    return false;
}

static bool fit_largest(void *v, uint64_t lo, uint64_t hi, uint32_t i)
{
    (void)i;
    fit_ctx *c = v;
    uint64_t at = align_up(lo, c->align);
    if (at < hi && hi - at > c->largest)
        c->largest = hi - at;
    return false;
}

bool kc_blocks_alloc(kc_blocks *a, uint64_t bytes, uint64_t align, uint32_t owner,
                     uint64_t *off, bool *oom)
{
    *oom = false;
    if (bytes == 0 || bytes > a->size)
        return false;
    fit_ctx c = {bytes, align ? align : 64, 0, 0};
    if (!each_gap(a, false, fit_first, &c))
        return false;
    if (a->n == a->cap) {
        uint32_t nc = a->cap ? 2 * a->cap : 16;
        kc_block *nb = realloc(a->b, nc * sizeof *nb);
        if (!nb) {
            *oom = true;
            return false;
        }
        a->b = nb, a->cap = nc;
    }
    uint32_t pos = 0;
    while (pos < a->n && a->b[pos].off < c.off)
        pos++;
    memmove(&a->b[pos + 1], &a->b[pos], (a->n - pos) * sizeof *a->b);
    a->b[pos] = (kc_block){c.off, bytes, owner, false};
    a->n++;
    *off = c.off;
    return true;
}

uint64_t kc_blocks_largest(const kc_blocks *a, uint64_t align, bool through_quarantine)
{
    fit_ctx c = {0, align ? align : 64, 0, 0};
    each_gap(a, through_quarantine, fit_largest, &c);
    return c.largest;
}

void kc_blocks_free(kc_blocks *a, uint64_t off)
{
    for (uint32_t i = 0; i < a->n; i++)
        if (a->b[i].off == off && !a->b[i].quarantined)
            a->b[i].quarantined = true;
}

uint64_t kc_blocks_owned(const kc_blocks *a, uint32_t owner)
{
    uint64_t n = 0;
    for (uint32_t i = 0; i < a->n; i++)
        if (a->b[i].owner == owner && !a->b[i].quarantined)
            n += a->b[i].size;
    return n;
}

void kc_blocks_release(kc_blocks *a, uint32_t owner)
{
    for (uint32_t i = 0; i < a->n; i++)
        if (a->b[i].owner == owner)
            a->b[i].quarantined = true;
}

void kc_blocks_quiesce(kc_blocks *a)
{
    uint32_t k = 0;
    for (uint32_t i = 0; i < a->n; i++)
        if (!a->b[i].quarantined)
            a->b[k++] = a->b[i];
    a->n = k;
}

bool kc_blocks_any_quarantined(const kc_blocks *a)
{
    for (uint32_t i = 0; i < a->n; i++)
        if (a->b[i].quarantined)
            return true;
    return false;
}

int kc_sems_alloc(kc_sems *s, uint32_t owner)
{
    for (int i = 0; i < ISA_N_SEMS; i++)
        if (s->state[i] == 0) {
            s->state[i] = owner + 1;
            return i;
        }
    return -1;
}

void kc_sems_release(kc_sems *s, uint32_t owner)
{
    for (int i = 0; i < ISA_N_SEMS; i++)
        if (s->state[i] == owner + 1)
            s->state[i] = KC_SEM_QUARANTINED;
}

bool kc_sems_any_quarantined(const kc_sems *s)
{
    for (int i = 0; i < ISA_N_SEMS; i++)
        if (s->state[i] == KC_SEM_QUARANTINED)
            return true;
    return false;
}

void kc_sems_quiesce(kc_sems *s)
{
    for (int i = 0; i < ISA_N_SEMS; i++)
        if (s->state[i] == KC_SEM_QUARANTINED)
            s->state[i] = 0;
}
