/* trace_map.c — the hash tables of traces/ (see trace_map.h). */
#include "trace_map.h"

#include <stdlib.h>
#include <string.h>

uint64_t tmap_mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

uint64_t tmap_hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static bool u64map_grow(u64map *m)
{
    size_t cap = m->cap ? 2 * m->cap : 256;
    uint64_t *k = calloc(cap, sizeof *k), *v = calloc(cap, sizeof *v);
    if (!k || !v) {
        free(k);
        free(v);
        return false;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->keys[i])
            continue;
        size_t j = tmap_mix(m->keys[i]) & (cap - 1);
        while (k[j])
            j = (j + 1) & (cap - 1);
        k[j] = m->keys[i], v[j] = m->vals[i];
    }
    free(m->keys);
    free(m->vals);
    m->keys = k, m->vals = v, m->cap = cap;
    return true;
}

uint64_t *u64map_slot(u64map *m, uint64_t key, bool *fresh)
{
    *fresh = false;
    if (2 * (m->n + 1) > m->cap && !u64map_grow(m))
        return NULL;
    size_t j = tmap_mix(key) & (m->cap - 1);
    while (m->keys[j] && m->keys[j] != key)
        j = (j + 1) & (m->cap - 1);
    if (!m->keys[j]) {
        m->keys[j] = key;
        m->vals[j] = 0;
        m->n++;
        *fresh = true;
    }
    return &m->vals[j];
}

uint64_t *u64map_get(const u64map *m, uint64_t key)
{
    if (!m->cap)
        return NULL;
    size_t j = tmap_mix(key) & (m->cap - 1);
    while (m->keys[j] && m->keys[j] != key)
        j = (j + 1) & (m->cap - 1);
    return m->keys[j] ? &m->vals[j] : NULL;
}

void u64map_free(u64map *m)
{
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

uint32_t strtab_intern(strtab *t, const char *s)
{
    for (uint64_t h = tmap_hash_str(s) | 1;; h += 2) {
        bool fresh;
        uint64_t *slot = u64map_slot(&t->ids, h, &fresh);
        if (!slot)
            return UINT32_MAX;
        if (!fresh) {
            if (*slot && !strcmp(t->strs[*slot - 1], s))
                return (uint32_t)(*slot - 1);
            continue;
        }
        if (t->n == t->cap) {
            size_t cap = t->cap ? 2 * t->cap : 64;
            char **v = realloc(t->strs, cap * sizeof *v);
            if (!v)
                return UINT32_MAX; /* the slot keeps 0: never matched, h is skipped */
            t->strs = v, t->cap = cap;
        }
        if (!(t->strs[t->n] = strdup(s)))
            return UINT32_MAX;
        *slot = ++t->n;
        return (uint32_t)(t->n - 1);
    }
}

uint32_t strtab_find(const strtab *t, const char *s)
{
    for (uint64_t h = tmap_hash_str(s) | 1;; h += 2) {
        uint64_t *slot = u64map_get(&t->ids, h);
        if (!slot)
            return UINT32_MAX;
        if (*slot && !strcmp(t->strs[*slot - 1], s))
            return (uint32_t)(*slot - 1);
    }
}

void strtab_free(strtab *t)
{
    for (size_t i = 0; i < t->n; i++)
        free(t->strs[i]);
    free(t->strs);
    u64map_free(&t->ids);
    memset(t, 0, sizeof *t);
}
