/* l2.h — the tags of the chip's L2 cache (chip.l2_bytes > 0, chip.l2_mode: cache): which lines
 * and sectors it holds, which are dirty, which are still being filled from the HBM, and who
 * waits for them. It moves no bytes and keeps no time: core_l2.c turns what a copy's walk found
 * into streams through the L2's and the HBM's bandwidth servers (docs/hw-model.md "The L2").
 * Internal to hw-model.
 *
 * Geometry (base/arch_schema.def): l2_bytes of lines of l2_line_bytes, each cut into sectors of
 * l2_sector_bytes (at most 32), in sets of l2_ways lines: line number n = addr / line_bytes goes
 * to set n mod sets. Sectors are the unit of state: a line holds a valid and a dirty mask. A
 * copy accesses each line of each of its rows once (rows without a gap between them are one):
 *
 *   read a sector     its line present and the sector valid: a hit (if a fill of another copy
 *                     is still bringing it, the copy also waits for that fill); else a miss:
 *                     the sector is read from the HBM by this copy's fill and becomes valid
 *                     (its line allocated first when absent)
 *   write a sector    the line allocated when absent (write-allocate, without reading the
 *                     HBM: the L2 keeps byte masks for partial writes, so a partly written
 *                     sector counts whole); the sector becomes valid and dirty (write-back)
 *   allocate a line   into an empty way of its set, else the least recently used one (every
 *                     access to a line makes it the most recent); a dirty victim's dirty
 *                     sectors are written back to the HBM
 *
 * A copy's fill (all the sectors it misses) is one record: created by its walk, completed by
 * l2_fill_done when its HBM part(s) end (l2_fill_parts of them), which calls the copy's
 * completion once and every waiter's once. A line remembers the latest fill that brought
 * sectors to it; a copy that finds valid sectors of a line whose fill has not completed waits
 * for that fill (once per fill however many lines): several cores walking the same tile in
 * step read the HBM once and all wait for it (as miss-status holding registers merge misses).
 * Nothing is allocated per access: records and waiters come from pools that only grow.
 *
 * Lookups cost one set's tags (l2_ways compares); a walk costs the lines its rows touch.
 */
#ifndef NPUSIM_L2_H
#define NPUSIM_L2_H

#include <stdbool.h>
#include <stdint.h>

#include "arch.h"
#include "core_cost.h"
#include "err.h"

typedef struct l2 l2;

/* A completion: done(ctx, arg) (the signature of hbm.h's hbm_done_fn). */
typedef void (*l2_done_fn)(void *ctx, uint64_t arg);

#define L2_NO_FILL UINT32_MAX

/* The empty cache of cfg (chip.l2_bytes > 0, checked by arch_validate). With partitions > 0,
 * walks also split their bytes by partition: the line at address a belongs to partition
 * ((a / hbm_interleave_bytes) mod hbm_channels) mod partitions (the HBM controller that owns
 * it). NP_ERR_NOMEM; *out NULL on failure. */
np_status l2_create(const arch_config *cfg, uint32_t partitions, l2 **out, np_err *err);
void l2_free(l2 *c);

/* What one copy's walk found. Bytes are whole sectors. */
typedef struct l2_walk {
    uint64_t bytes;         /* sectors the copy moves between the cores and the L2 */
    uint64_t hit_sectors;   /* read sectors found valid, write sectors whose line was present */
    uint64_t miss_sectors;  /* read sectors fetched, write sectors whose line was allocated */
    uint64_t fill_bytes;    /* read from the HBM by this copy's fill */
    uint64_t wb_bytes;      /* dirty sectors of lines it evicted: written back to the HBM */
    uint32_t slices;        /* slices its lines touch (of chip.l2_slices) */
    uint32_t waits;         /* fills of other copies it now waits for: its done is called once
                               more for each when that fill completes */
    uint32_t fill;          /* its own fill record (fill_bytes > 0), else L2_NO_FILL */
    /* with partitions: the bytes read and written, the fill bytes and the write-back bytes of
     * each partition (arrays of the l2's, valid until its next walk); NULL without */
    const double *part_read, *part_write, *part_fill, *part_wb;
} l2_walk;

/* Walks the ranges of r[0 .. nr) in HBM that are not indexed (idx_rows == 0): every sector
 * their rows touch, reads for a source range, writes for a destination range, updating tags,
 * LRU order and dirty state. done(ctx, arg) is the copy's completion of a part: called once
 * when its own fill completes (w->fill) and once per fill it waits for (w->waits). Fills *w.
 * NP_ERR_NOMEM (pools); the tags may have changed then. */
np_status l2_walk_copy(l2 *c, const core_range *r, unsigned nr, l2_done_fn done, void *ctx,
                       uint64_t arg, l2_walk *w, np_err *err);

/* Fill `fill` (a walk's, not yet completed) completes after `parts` calls of l2_fill_done
 * (default 1; parts >= 1). */
void l2_fill_parts(l2 *c, uint32_t fill, uint32_t parts);

/* One part of fill `fill` ended; the last one completes it: the sectors it brought are there,
 * the owner's done and every waiter's run (in that order, the waiters in the order they
 * came). Safe to start new walks from inside those calls. */
void l2_fill_done(l2 *c, uint32_t fill);

/* Everything since creation (sectors count l2_sector_bytes each). */
typedef struct l2_figures {
    uint64_t copies;                   /* walks */
    uint64_t read_bytes, write_bytes;  /* sectors the cores read from / wrote to the L2 */
    uint64_t read_hits, read_misses;   /* sectors */
    uint64_t write_hits, write_misses; /* sectors (hit: the line was present) */
    uint64_t pending_hits;             /* read hits on sectors still being filled (waited for) */
    uint64_t fill_bytes;               /* read from the HBM (misses) */
    uint64_t wb_bytes;                 /* written back to the HBM (dirty evictions) */
} l2_figures;
void l2_get_figures(const l2 *c, l2_figures *f);

/* Bytes of dirty sectors held now (not yet written back), and of valid ones. */
uint64_t l2_dirty_bytes(const l2 *c);
uint64_t l2_valid_bytes(const l2 *c);

/* Whether the line holding address addr is present, and its valid and dirty sector masks
 * (bit i: sector i) — for tests. */
bool l2_probe(const l2 *c, uint64_t addr, uint32_t *valid, uint32_t *dirty);

/* For tests: moves the LRU counter (and every stamp with it, keeping their order) to clock,
 * so that a test reaches the counter's wrap (at 2^32 accesses), where the stamps of each set
 * are renumbered by their order. */
void l2_set_clock(l2 *c, uint32_t clock);

/* Drops every line without writing anything back (a fresh cache; for tests and tools). */
void l2_clear(l2 *c);

#endif
