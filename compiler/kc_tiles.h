/* kc_tiles.h — the tiling cache: tilings a tuner chose (by simulating candidates), kept in a
 * file and used by kc_compile for the same kernel on the same architecture.
 *
 * A key names the op, every operand's shape, byte strides and dtype, the epilogue's steps,
 * the placement's core count and the architecture's fingerprint (kc_arch_fingerprint), so a
 * tiling is only reused where it was measured. The file is JSON: {"version": 1, "tilings":
 * [{"key": ..., "attrs": {"tm": 4096, ...}, "cycles": N}, ...]}, entries in key order (the
 * same cache writes the same bytes).
 *
 *   kc_tile_cache *c;
 *   kc_tile_cache_load("tiles.json", &c, &err);          // a missing file is an empty cache
 *   kc_prog_new(&cfg, &(kc_prog_opts){.tiles = c}, &p, &err);  // kc_compile consults it
 */
#ifndef NPUSIM_KC_TILES_H
#define NPUSIM_KC_TILES_H

#include <stddef.h>
#include <stdint.h>

#include "arch.h"
#include "err.h"
#include "kernel.h"

typedef struct kc_tile_cache kc_tile_cache;

/* An empty cache; NULL when out of memory. */
kc_tile_cache *kc_tile_cache_new(void);
void kc_tile_cache_free(kc_tile_cache *c);

/* Loads path (a missing file gives an empty cache). NP_ERR_IO, NP_ERR_FORMAT (naming the file
 * and what is wrong), NP_ERR_NOMEM; *out is NULL on failure. */
np_status kc_tile_cache_load(const char *path, kc_tile_cache **out, np_err *err);
/* Writes the cache to path. NP_ERR_IO. */
np_status kc_tile_cache_save(const kc_tile_cache *c, const char *path, np_err *err);

/* The tiling stored under key (true), or false. */
bool kc_tile_cache_get(const kc_tile_cache *c, const char *key, kc_tiling *out, uint64_t *cycles);
/* Stores (or replaces) key's tiling and its simulated cycles. NP_ERR_NOMEM. */
np_status kc_tile_cache_put(kc_tile_cache *c, const char *key, const kc_tiling *t,
                            uint64_t cycles, np_err *err);
size_t kc_tile_cache_size(const kc_tile_cache *c);

/* 16 hex digits: FNV-1a of the architecture's resolved config as canonical JSON. */
void kc_arch_fingerprint(const arch_config *cfg, char out[17]);

/* The cache key of kernel k on cfg (see above) in buf; returns buf ("" when it does not fit). */
char *kc_tile_key(const arch_config *cfg, const kc_kernel *k, char *buf, size_t n);

#endif
