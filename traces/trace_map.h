/* trace_map.h — the small hash tables of traces/ (and of sim/cli_trace.c): 64-bit keys to values,
 * and interned strings. Open addressing; neither shrinks. */
#ifndef NPUSIM_TRACE_MAP_H
#define NPUSIM_TRACE_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

uint64_t tmap_mix(uint64_t x);       /* a 64-bit finalizer (murmur3's) */
uint64_t tmap_hash_str(const char *s); /* FNV-1a */

/* Non-zero keys to values. */
typedef struct u64map {
    uint64_t *keys, *vals;
    size_t cap, n;
} u64map;

/* The value slot of key, inserted with value 0 (*fresh set) when absent; NULL: no memory
 * (nothing changed). */
uint64_t *u64map_slot(u64map *m, uint64_t key, bool *fresh);
/* The value of key, or NULL. */
uint64_t *u64map_get(const u64map *m, uint64_t key);
void u64map_free(u64map *m);

/* Strings to ids 0, 1, ... in order of first sight; each string copied once. */
typedef struct strtab {
    char **strs;
    size_t n, cap;
    u64map ids; /* hash (made odd, probed by +2 on a collision) -> id + 1 */
} strtab;

/* The id of s, added when new; UINT32_MAX when out of memory. */
uint32_t strtab_intern(strtab *t, const char *s);
/* The id of s, or UINT32_MAX. */
uint32_t strtab_find(const strtab *t, const char *s);
void strtab_free(strtab *t);

#endif
