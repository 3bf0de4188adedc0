/* hmap.h — a small hash index: 64-bit hash -> 32-bit ids.
 *
 * Open addressing with linear probing over a power-of-two table kept at most half full. It
 * stores ids, not keys: several ids may share a hash (collisions of different keys), so a
 * lookup walks the ids stored under a hash with np_hmap_next and the caller compares its
 * own keys. Used wherever something is interned or memoised so that no hot path searches a
 * list: the run engine's kernels, collective specs, link signatures and cached timings, the
 * collective tuner's groups and answers (noc/coll_tune.c).
 *
 *   np_hmap m = {0};
 *   uint64_t h = np_hash_bytes(key, len, 0);
 *   for (uint32_t it = 0, id; (id = np_hmap_next(&m, h, &it)) != NP_HMAP_END;)
 *       if (same_key(id, key)) return id;
 *   np_hmap_put(&m, h, new_id);          // false when out of memory
 *   np_hmap_free(&m);
 */
#ifndef NPUSIM_BASE_HMAP_H
#define NPUSIM_BASE_HMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NP_HMAP_END UINT32_MAX

typedef struct np_hmap {
    uint64_t *hash;
    uint32_t *id; /* NP_HMAP_END: empty slot */
    uint32_t cap, n;
} np_hmap;

/* FNV-1a over n bytes, continued from seed (0: the FNV offset basis), then mixed. */
uint64_t np_hash_bytes(const void *p, size_t n, uint64_t seed);

/* Adds (h, id). false when out of memory (nothing changed). */
bool np_hmap_put(np_hmap *m, uint64_t h, uint32_t id);

/* The next id stored under h, starting with *it = 0; NP_HMAP_END when there is none. */
uint32_t np_hmap_next(const np_hmap *m, uint64_t h, uint32_t *it);

void np_hmap_free(np_hmap *m);

#endif
