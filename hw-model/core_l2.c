/* core_l2.c — a DMA copy's HBM side through the chip's shared on-chip level (chip.l2_bytes > 0;
 * docs/hw-model.md "The L2").
 *
 * A copy's HBM ranges split in two: those that go through the L2 (core_l2_range: every HBM
 * range but an indexed table's with a cache; those in the global buffer's addresses with a
 * buffer) and the rest, which go to the HBM as without an L2. The parts of the copy, which run
 * together (it retires when the last ends):
 *
 *   L2 stream      every sector the copy moves through the L2, hit or miss (the cache's walk,
 *                  l2.h), or the buffer ranges' bursts: the L2's bandwidth, shared max-min
 *                  fairly among the chip's copies (an hbm.h server with l2_latency_ns), capped
 *                  at the slices its lines touch (k of l2_slices: k / l2_slices of it) and at
 *                  the scratchpad ports;
 *   HBM stream     the sectors it misses (its fill) and the direct ranges' bursts: the HBM as
 *                  without an L2 (hbm_latency_ns, the channels its rows touch, the ports);
 *                  with a fill, the stream's end completes the fill (l2_fill_done), which
 *                  completes this part and every copy that waits for those sectors;
 *   waits          one per fill of another copy still bringing sectors it reads.
 *
 * Dirty sectors it evicts are written back as a stream of their own on the HBM that nobody
 * waits for (a write-back buffer): they take HBM bandwidth from everyone, not time from the
 * copy. With HBM controllers on the mesh, L2 slice j sits at controller j's router (hbm_mesh.h:
 * HBM_MESH_L2) and holds the addresses its channels own: each slice's part of the L2 stream is
 * an access over the mesh from or to the core, and each slice's fill and write-backs an access
 * to its controller's HBM that does not cross the mesh (HBM_MESH_LOCAL).
 *
 * Counting: the bytes the copy asked of the L2 are l2_rd / l2_wr and those of its direct ranges
 * hbm_rd / hbm_wr (at its start, count_traffic); the HBM also counts the sectors that reach
 * it: fills read, write-backs written (here). */
#include "core_sim.h"

bool core_l2_range(const arch_config *cfg, const core_range *r)
{
    if (r->space != ISA_SPACE_HBM || !cfg->chip.l2_bytes)
        return false;
    if (cfg->chip.l2_mode == ARCH_L2_MODE_BUFFER)
        return r->addr >= cfg->chip.hbm_bytes;
    return !r->idx_rows;
}

np_status core_l2_ensure(chip_sim *s, np_err *err)
{
    const arch_chip *ch = &s->cfg->chip;
    if (!ch->l2_bytes)
        return NP_OK;
    if (ch->l2_mode == ARCH_L2_MODE_CACHE && !s->l2) {
        if (l2_create(s->cfg, (uint32_t)ch->hbm_controllers, &s->l2, err) != NP_OK)
            return err->status;
        l2_get_figures(s->l2, &s->l2_base);
    }
    /* GB/s = 10^-3 bytes/ps */
    if (!ch->hbm_controllers && !s->l2srv &&
        hbm_create(s->q, ch->l2_gb_per_s / 1000.0, (uint64_t)(ch->l2_latency_ns * 1000.0 + 0.5),
                   &s->l2srv, err) != NP_OK)
        return err->status;
    return NP_OK;
}

static void fill_done(void *ctx, uint64_t fill)
{
    chip_sim *s = ctx;
    l2_fill_done(s->l2, (uint32_t)fill);
}

static void writeback_done(void *ctx, uint64_t arg) { (void)ctx, (void)arg; }

/* The HBM side beside the mesh: the L2 stream, the HBM stream (fill and direct bytes), the
 * write-backs. */
static np_status copy_beside(core_model *c, q_entry *e, uint64_t arg, double port_cap,
                             uint64_t l2_bytes, uint32_t slices, uint64_t hbm_bytes,
                             uint32_t fill, uint64_t wb, double *alone, np_err *err)
{
    chip_sim *s = c->chip;
    const arch_chip *ch = &s->cfg->chip;
    double l2_bw = ch->l2_gb_per_s / 1000.0, hbm_bw = ch->hbm_gb_per_s / 1000.0;
    *alone = 0;
    if (l2_bytes) {
        double cap = l2_bw * (double)slices / (double)ch->l2_slices;
        if (port_cap < cap)
            cap = port_cap;
        e->parts++;
        if (hbm_transfer(s->l2srv, l2_bytes, cap, core_q_part_done, c, arg, err) != NP_OK)
            return err->status;
        *alone = ch->l2_latency_ns * 1000.0 + (double)l2_bytes / cap;
    }
    if (hbm_bytes) {
        double frac = (double)core_units_touched(e->r, e->nr, ISA_SPACE_HBM,
                                                 (uint64_t)ch->hbm_interleave_bytes,
                                                 (uint64_t)ch->hbm_channels) /
                      (double)ch->hbm_channels;
        double cap = hbm_bw * frac;
        if (port_cap < cap)
            cap = port_cap;
        e->parts++;
        np_status st = fill != L2_NO_FILL
                           ? hbm_transfer(s->mem, hbm_bytes, cap, fill_done, s, fill, err)
                           : hbm_transfer(s->mem, hbm_bytes, cap, core_q_part_done, c, arg, err);
        if (st != NP_OK)
            return st;
        double t = ch->hbm_latency_ns * 1000.0 + (double)hbm_bytes / cap;
        if (t > *alone)
            *alone = t;
    }
    if (wb && hbm_transfer(s->mem, wb, hbm_bw, writeback_done, s, 0, err) != NP_OK)
        return err->status;
    return NP_OK;
}

/* The HBM side with the controllers (and the L2 slices) on the mesh. */
static np_status copy_mesh(core_model *c, q_entry *e, uint64_t arg, double port_cap,
                           const l2_walk *w, const core_range *buf, unsigned nb,
                           const core_range *direct, unsigned nd, double *alone, np_err *err)
{
    chip_sim *s = c->chip;
    double hbm_bw = s->cfg->chip.hbm_gb_per_s / 1000.0;
    uint64_t tag = ((uint64_t)c->index << 16) | arg, t;
    uint32_t n_ctrl = hbm_mesh_count(s->hmesh);
    unsigned n;
    *alone = 0;
    if (w) {
        uint32_t fills = 0;
        for (uint32_t j = 0; j < n_ctrl; j++) {
            const double *v[2] = {w->part_read, w->part_write};
            for (int wr = 0; wr < 2; wr++) {
                if (!(v[wr][j] > 0))
                    continue;
                e->parts++;
                if (hbm_mesh_access(s->hmesh, HBM_MESH_L2, j, c->id, wr, v[wr][j], port_cap, tag,
                                    &t, err) != NP_OK)
                    return err->status;
                *alone = (double)t > *alone ? (double)t : *alone;
            }
            if (w->part_fill[j] > 0) {
                fills++;
                if (hbm_mesh_access(s->hmesh, HBM_MESH_LOCAL, j, c->id, false, w->part_fill[j],
                                    hbm_bw, CORE_TAG_L2_FILL | w->fill, &t, err) != NP_OK)
                    return err->status;
                *alone = (double)t > *alone ? (double)t : *alone;
            }
            if (w->part_wb[j] > 0 &&
                hbm_mesh_access(s->hmesh, HBM_MESH_LOCAL, j, c->id, true, w->part_wb[j], hbm_bw,
                                CORE_TAG_L2_WB, &t, err) != NP_OK)
                return err->status;
        }
        if (w->fill != L2_NO_FILL) {
            l2_fill_parts(s->l2, w->fill, fills);
            e->parts++;
        }
    }
    if (nb) {
        if (hbm_mesh_copy_l2(s->hmesh, buf, nb, c->id, port_cap, tag, &n, &t, err) != NP_OK)
            return err->status;
        e->parts += n;
        *alone = (double)t > *alone ? (double)t : *alone;
    }
    if (nd) {
        if (hbm_mesh_copy(s->hmesh, direct, nd, c->id, port_cap, tag, &n, &t, err) != NP_OK)
            return err->status;
        e->parts += n;
        *alone = (double)t > *alone ? (double)t : *alone;
    }
    return NP_OK;
}

np_status core_l2_copy(core_model *c, q_entry *e, uint64_t arg, double port_cap,
                       double *alone_ps, np_err *err)
{
    chip_sim *s = c->chip;
    const arch_config *cfg = s->cfg;
    uint64_t burst = (uint64_t)cfg->chip.hbm_burst_bytes;
    core_range direct[CORE_MAX_RANGES], buf[CORE_MAX_RANGES];
    unsigned nd = 0, nb = 0;
    uint64_t direct_bytes = 0, buf_bytes = 0;
    for (unsigned i = 0; i < e->nr; i++) {
        const core_range *r = &e->r[i];
        if (r->space != ISA_SPACE_HBM)
            continue;
        if (!core_l2_range(cfg, r)) {
            direct[nd++] = *r;
            direct_bytes += core_burst_bytes(r, burst);
        } else if (!s->l2) {
            buf[nb++] = *r;
            buf_bytes += core_burst_bytes(r, burst);
        }
    }
    l2_walk w = {.fill = L2_NO_FILL};
    uint32_t slices = 1;
    if (s->l2) {
        if (l2_walk_copy(s->l2, e->r, e->nr, core_q_part_done, c, arg, &w, err) != NP_OK)
            return err->status;
        e->parts += w.waits;
        slices = w.slices;
    } else if (nb) {
        slices = (uint32_t)core_units_touched(buf, nb, ISA_SPACE_HBM,
                                              (uint64_t)cfg->chip.l2_line_bytes,
                                              (uint64_t)cfg->chip.l2_slices);
    }
    s->hbm_rd += w.fill_bytes;
    s->hbm_wr += w.wb_bytes;
    e->l2 = true;
    e->l2_bytes = s->l2 ? w.bytes : buf_bytes;
    e->l2_hbm_rd = w.fill_bytes;
    e->l2_hbm_wr = w.wb_bytes;
    for (unsigned i = 0; i < nd; i++)
        *(direct[i].write ? &e->l2_hbm_wr : &e->l2_hbm_rd) += direct[i].bytes;
    if (s->hmesh)
        return copy_mesh(c, e, arg, port_cap, s->l2 ? &w : NULL, buf, nb, direct, nd, alone_ps,
                         err);
    return copy_beside(c, e, arg, port_cap, s->l2 ? w.bytes : buf_bytes, slices,
                       w.fill_bytes + direct_bytes, w.fill, w.wb_bytes, alone_ps, err);
}
