/* run_kcache.c — the kernel timing cache (run_engine.h): kernel key -> run_ktime.
 *
 * Keys are the kernels' own keys (everything their timing depends on: op, shapes, dtypes,
 * attributes, placement, and the architecture when one cache serves several). Entries are
 * never removed; a run looks each distinct kernel up once, before it starts. */
#include <stdlib.h>
#include <string.h>

#include "run_engine.h"
#include "hmap.h"

typedef struct kc_entry {
    char *key;
    run_ktime t;
} kc_entry;

struct run_kcache {
    kc_entry *v;
    uint32_t n, cap;
    np_hmap index;
};

run_kcache *run_kcache_create(void) { return calloc(1, sizeof(run_kcache)); }

void run_kcache_free(run_kcache *c)
{
    if (!c)
        return;
    for (uint32_t i = 0; i < c->n; i++)
        free(c->v[i].key);
    free(c->v);
    np_hmap_free(&c->index);
    free(c);
}

static uint32_t kc_find(const run_kcache *c, const char *key, uint64_t h)
{
    for (uint32_t it = 0, i; (i = np_hmap_next(&c->index, h, &it)) != NP_HMAP_END;)
        if (strcmp(c->v[i].key, key) == 0)
            return i;
    return NP_HMAP_END;
}

const run_ktime *run_kcache_get(const run_kcache *c, const char *key)
{
    uint32_t i = kc_find(c, key, np_hash_bytes(key, strlen(key), 0));
    return i == NP_HMAP_END ? NULL : &c->v[i].t;
}

bool run_kcache_put(run_kcache *c, const char *key, const run_ktime *t)
{
    size_t len = strlen(key);
    uint64_t h = np_hash_bytes(key, len, 0);
    uint32_t i = kc_find(c, key, h);
    if (i != NP_HMAP_END) {
        c->v[i].t = *t;
        return true;
    }
    if (c->n == c->cap) {
        uint32_t cap = c->cap ? c->cap * 2 : 16;
        kc_entry *v = realloc(c->v, (size_t)cap * sizeof *v);
        if (!v)
            return false;
        c->v = v;
        c->cap = cap;
    }
    char *k = malloc(len + 1);
    if (!k || !np_hmap_put(&c->index, h, c->n)) {
        free(k);
        return false;
    }
    memcpy(k, key, len + 1);
    c->v[c->n++] = (kc_entry){k, *t};
    return true;
}

uint32_t run_kcache_size(const run_kcache *c) { return c->n; }
