/* hmap.c — the hash index of hmap.h. */
#include "hmap.h"

#include <stdlib.h>

uint64_t np_hash_bytes(const void *p, size_t n, uint64_t seed)
{
    const unsigned char *b = p;
    uint64_t h = seed ? seed : 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3ULL;
    }
    h ^= h >> 33; /* FNV's low bits are weak: mix before masking */
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return h;
}

static bool np_hmap_grow(np_hmap *m)
{
    uint32_t cap = m->cap ? m->cap * 2 : 64;
    uint64_t *hash = malloc((size_t)cap * sizeof *hash);
    uint32_t *id = malloc((size_t)cap * sizeof *id);
    if (!hash || !id) {
        free(hash);
        free(id);
        return false;
    }
    for (uint32_t i = 0; i < cap; i++)
        id[i] = NP_HMAP_END;
    for (uint32_t i = 0; i < m->cap; i++) {
        if (m->id[i] == NP_HMAP_END)
            continue;
        uint32_t s = (uint32_t)m->hash[i] & (cap - 1);
        while (id[s] != NP_HMAP_END)
            s = (s + 1) & (cap - 1);
        hash[s] = m->hash[i];
        id[s] = m->id[i];
    }
    free(m->hash);
    free(m->id);
    m->hash = hash;
    m->id = id;
    m->cap = cap;
    return true;
}

bool np_hmap_put(np_hmap *m, uint64_t h, uint32_t id)
{
    if ((m->n + 1) * 2 > m->cap && !np_hmap_grow(m))
        return false;
    uint32_t s = (uint32_t)h & (m->cap - 1);
    while (m->id[s] != NP_HMAP_END)
        s = (s + 1) & (m->cap - 1);
    m->hash[s] = h;
    m->id[s] = id;
    m->n++;
    return true;
}

uint32_t np_hmap_next(const np_hmap *m, uint64_t h, uint32_t *it)
{
    if (!m->cap)
        return NP_HMAP_END;
    /* *it counts the slots already probed from h's home slot. */
    for (uint32_t s = ((uint32_t)h + *it) & (m->cap - 1); m->id[s] != NP_HMAP_END;
         s = (s + 1) & (m->cap - 1)) {
        ++*it;
        if (m->hash[s] == h)
            return m->id[s];
    }
    return NP_HMAP_END;
}

void np_hmap_free(np_hmap *m)
{
    free(m->hash);
    free(m->id);
    *m = (np_hmap){0};
}
