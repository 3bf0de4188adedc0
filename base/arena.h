/* arena.h — best-fit placement of buffers in one arena: the rule the framework's memory plan
 * (framework/memplan.c) and a lowered program's transient buffers (compiler/lower_mem.c) share.
 *
 * Live blocks are kept sorted by offset. A new buffer takes the smallest gap between live
 * blocks that holds it (the lowest such gap on a tie), else the end of the last live block;
 * freeing a block opens its gap. Sizes are the caller's (aligned as it needs). The arena
 * allocates nothing: blocks has room for as many blocks as are ever live at once.
 *
 *   np_arena a = {.blocks = storage};
 *   uint64_t off = np_arena_alloc(&a, size);
 *   np_arena_free(&a, off);
 *   a.high;                       // the arena's size: the end of the highest block ever placed
 */
#ifndef NPUSIM_BASE_ARENA_H
#define NPUSIM_BASE_ARENA_H

#include <stdint.h>

typedef struct np_arena_block {
    uint64_t off, size;
} np_arena_block;

typedef struct np_arena {
    np_arena_block *blocks; /* the live blocks by offset; the caller's storage */
    uint32_t n;             /* live blocks */
    uint64_t high;          /* the highest end of a block so far */
    uint64_t live;          /* bytes of the live blocks */
} np_arena;

/* Places a block of size bytes (best fit) and returns its offset. */
uint64_t np_arena_alloc(np_arena *a, uint64_t size);

/* Frees the live block at offset off (none there: nothing). */
void np_arena_free(np_arena *a, uint64_t off);

#endif
