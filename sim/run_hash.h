/* run_hash.h — a small hash index for the run engine: 64-bit hash -> 32-bit ids.
 *
 * Open addressing with linear probing over a power-of-two table kept at most half full. It
 * stores ids, not keys: several ids may share a hash (collisions of different keys), so a
 * lookup walks the ids stored under a hash with run_hmap_next and the caller compares its
 * own keys. Used where the engine interns things (kernels, collective specs, link
 * signatures, cached timings) so that no hot path searches a list.
 *
 *   run_hmap m = {0};
 *   uint64_t h = run_hash_bytes(key, len, 0);
 *   for (uint32_t it = 0, id; (id = run_hmap_next(&m, h, &it)) != RUN_HMAP_END;)
 *       if (same_key(id, key)) return id;
 *   run_hmap_put(&m, h, new_id);          // false when out of memory
 *   run_hmap_free(&m);
 */
#ifndef NPUSIM_SIM_RUN_HASH_H
#define NPUSIM_SIM_RUN_HASH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RUN_HMAP_END UINT32_MAX

typedef struct run_hmap {
    uint64_t *hash;
    uint32_t *id; /* RUN_HMAP_END: empty slot */
    uint32_t cap, n;
} run_hmap;

/* FNV-1a over n bytes, continued from seed (0: the FNV offset basis), then mixed. */
uint64_t run_hash_bytes(const void *p, size_t n, uint64_t seed);

/* Adds (h, id). false when out of memory (nothing changed). */
bool run_hmap_put(run_hmap *m, uint64_t h, uint32_t id);

/* The next id stored under h, starting with *it = 0; RUN_HMAP_END when there is none. */
uint32_t run_hmap_next(const run_hmap *m, uint64_t h, uint32_t *it);

void run_hmap_free(run_hmap *m);

#endif
