/* kc_alloc.h — the per-core allocators behind the kernel ABI (internal to compiler/):
 * byte ranges of one memory (scratchpad, accumulator SRAM) and the 256 semaphores.
 *
 * A block or semaphore is free, taken (by the caller, owner 0, or by the kernel being
 * compiled, owner > 0) or quarantined: given back while the queues may still be using it.
 * Quarantined ones become free at kc_blocks_quiesce / kc_sems_quiesce (the caller emitted a
 * fence or barrier on the core). States move
 *
 *     free --alloc--> taken --release/free--> quarantined --quiesce--> free
 */
#ifndef NPUSIM_KC_ALLOC_H
#define NPUSIM_KC_ALLOC_H

#include <stdbool.h>
#include <stdint.h>

#include "isa.h"

typedef struct kc_block {
    uint64_t off, size;
    uint32_t owner;  /* 0: the caller's */
    bool quarantined;
} kc_block;

/* The taken and quarantined blocks of [0, size), sorted by offset (gaps are free). */
typedef struct kc_blocks {
    uint64_t size;
    kc_block *b;
    uint32_t n, cap;
} kc_blocks;

void kc_blocks_init(kc_blocks *a, uint64_t size);
void kc_blocks_fini(kc_blocks *a);

/* First fit of bytes at an align-aligned offset (align a power of two; 0 means 64) in the
 * free gaps. Returns false when nothing fits (or out of memory: *oom set). */
bool kc_blocks_alloc(kc_blocks *a, uint64_t bytes, uint64_t align, uint32_t owner,
                     uint64_t *off, bool *oom);

/* The largest align-aligned free run (counting quarantined blocks as free when asked). */
uint64_t kc_blocks_largest(const kc_blocks *a, uint64_t align, bool through_quarantine);

/* The bytes of the blocks owner holds (taken, not quarantined). */
uint64_t kc_blocks_owned(const kc_blocks *a, uint32_t owner);

/* Quarantines the taken block at off (no-op when there is none); every block of owner. */
void kc_blocks_free(kc_blocks *a, uint64_t off);
void kc_blocks_release(kc_blocks *a, uint32_t owner);
void kc_blocks_quiesce(kc_blocks *a);
bool kc_blocks_any_quarantined(const kc_blocks *a);

/* Semaphores: per semaphore its owner + 1 when taken (0 free), or KC_SEM_QUARANTINED. */
#define KC_SEM_QUARANTINED UINT32_MAX
typedef struct kc_sems {
    uint32_t state[ISA_N_SEMS];
} kc_sems;

/* The lowest free semaphore, taken for owner; -1 when none. */
int kc_sems_alloc(kc_sems *s, uint32_t owner);
void kc_sems_release(kc_sems *s, uint32_t owner);
bool kc_sems_any_quarantined(const kc_sems *s);
void kc_sems_quiesce(kc_sems *s);

#endif
