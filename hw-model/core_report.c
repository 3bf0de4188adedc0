/* core_report.c — the run report (core.h): built from the system (hw_system_report, the end
 * of core_sim_run_chips), and printed as JSON and as text (field names are documented in
 * docs/hw-model.md and kept stable). */
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core_sim.h"
#include "human.h"

/* The "hbm_mesh" member: controllers on the mesh and what limited the DMA's HBM traffic. */
static json_t *core_report_hbm_json(const core_report *r)
{
    json_t *ctrls = json_array();
    for (uint32_t i = 0; ctrls && i < r->n_hbm_ctrls; i++) {
        const core_hbm_ctrl_report *c = &r->hbm_ctrls[i];
        if (json_array_append_new(ctrls, json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:f}",
                                                   "name", c->name, "chip", (json_int_t)c->chip,
                                                   "ctrl", (json_int_t)c->ctrl, "router",
                                                   (json_int_t)c->router, "read_bytes",
                                                   (json_int_t)c->read_bytes, "write_bytes",
                                                   (json_int_t)c->write_bytes, "limited_bytes",
                                                   (json_int_t)c->limited_bytes, "util_pct",
                                                   c->util_pct))) {
            json_decref(ctrls);
            return NULL;
        }
    }
    if (!ctrls)
        return NULL;
    return json_pack("{s:I, s:{s:I, s:I, s:I, s:I}, s:{s:s, s:I}, s:o}", "bytes",
                     (json_int_t)r->hbm_mesh_bytes, "limited_bytes", "controllers",
                     (json_int_t)r->hbm_limited_by_ctrl, "controller_ports",
                     (json_int_t)r->hbm_limited_by_ctrl_port, "mesh_links",
                     (json_int_t)r->hbm_limited_by_mesh, "copies",
                     (json_int_t)r->hbm_limited_by_copy, "busiest_link", "name",
                     r->hbm_busiest_link, "limited_bytes",
                     (json_int_t)r->hbm_busiest_link_bytes, "controllers", ctrls);
}

/* The text lines of the HBM controllers on the mesh. */
static void core_report_hbm_print(const core_report *r, FILE *out)
{
    double all = r->hbm_mesh_bytes ? (double)r->hbm_mesh_bytes : 1;
    fprintf(out, "\nHBM over the mesh: %" PRIu64 " B; rate set by the controllers %.1f %%, their "
            "ports %.1f %%, mesh links %.1f %%, the copies' own channels and ports %.1f %%\n",
            r->hbm_mesh_bytes, 100.0 * (double)r->hbm_limited_by_ctrl / all,
            100.0 * (double)r->hbm_limited_by_ctrl_port / all,
            100.0 * (double)r->hbm_limited_by_mesh / all,
            100.0 * (double)r->hbm_limited_by_copy / all);
    if (r->hbm_busiest_link[0])
        fprintf(out, "the mesh link that limited the most: %s (%" PRIu64 " B)\n",
                r->hbm_busiest_link, r->hbm_busiest_link_bytes);
    fprintf(out, "%-20s %6s %14s %14s %14s %8s\n", "controller", "router", "read bytes",
            "write bytes", "limited bytes", "util");
    for (uint32_t i = 0; i < r->n_hbm_ctrls; i++) {
        const core_hbm_ctrl_report *c = &r->hbm_ctrls[i];
        fprintf(out, "%-20s %6" PRIu32 " %14" PRIu64 " %14" PRIu64 " %14" PRIu64 " %6.1f %%\n",
                c->name, c->router, c->read_bytes, c->write_bytes, c->limited_bytes, c->util_pct);
    }
}

/* The "l2" member. */
static json_t *core_report_l2_json(const core_l2_report *l)
{
    return json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:f, s:f}",
                     "mode", l->buffer ? "buffer" : "cache", "read_bytes",
                     (json_int_t)l->read_bytes, "write_bytes", (json_int_t)l->write_bytes,
                     "moved_bytes", (json_int_t)l->moved_bytes, "read_hits",
                     (json_int_t)l->read_hits, "read_misses", (json_int_t)l->read_misses,
                     "write_hits", (json_int_t)l->write_hits, "write_misses",
                     (json_int_t)l->write_misses, "pending_hits", (json_int_t)l->pending_hits,
                     "fill_bytes", (json_int_t)l->fill_bytes, "writeback_bytes",
                     (json_int_t)l->writeback_bytes, "dirty_bytes", (json_int_t)l->dirty_bytes,
                     "hit_pct", l->hit_pct, "util_pct", l->util_pct);
}

/* The text line(s) of the L2. */
static void core_report_l2_print(const core_l2_report *l, FILE *out)
{
    char a[NP_HUMAN_MAX], b[NP_HUMAN_MAX], c[NP_HUMAN_MAX], d[NP_HUMAN_MAX], e[NP_HUMAN_MAX];
    if (l->buffer) {
        fprintf(out, "global buffer: read %s, written %s, %.1f%% of its bandwidth\n",
                np_human_bytes(l->read_bytes, a, sizeof a),
                np_human_bytes(l->write_bytes, b, sizeof b), l->util_pct);
        return;
    }
    uint64_t rd = l->read_hits + l->read_misses;
    fprintf(out, "L2: read %s, written %s, %.1f%% of its bandwidth; %.1f%% of %s sectors read "
            "hit (%s waited for a fill)\n",
            np_human_bytes(l->read_bytes, a, sizeof a), np_human_bytes(l->write_bytes, b, sizeof b),
            l->util_pct, l->hit_pct, np_human_count(rd, c, sizeof c),
            np_human_count(l->pending_hits, d, sizeof d));
    fprintf(out, "    HBM behind it: fills %s, write-backs %s, %s dirty at the end\n",
            np_human_bytes(l->fill_bytes, a, sizeof a),
            np_human_bytes(l->writeback_bytes, b, sizeof b),
            np_human_bytes(l->dirty_bytes, e, sizeof e));
}

json_t *core_report_json(const core_report *r)
{
    json_t *units = json_array(), *kernels = json_array();
    if (!units || !kernels)
        goto fail;
    for (uint32_t i = 0; i < r->n_units; i++) {
        const core_unit_report *u = &r->units[i];
        if (json_array_append_new(units, json_pack("{s:s, s:I, s:I, s:I, s:I, s:I}", "name",
                                                   u->name, "busy_cycles", (json_int_t)u->busy_cycles,
                                                   "stall_cycles", (json_int_t)u->stall_cycles,
                                                   "idle_cycles", (json_int_t)u->idle_cycles,
                                                   "insns", (json_int_t)u->insns, "bytes",
                                                   (json_int_t)u->bytes)))
            goto fail;
    }
    for (uint32_t i = 0; i < r->n_kernels; i++) {
        const core_kernel_report *k = &r->kernels[i];
        json_t *busy = json_object();
        for (unsigned u = 0; busy && u < ISA_N_QUEUES; u++)
            if (json_object_set_new(busy, isa_unit_names[u],
                                    json_integer((json_int_t)k->busy_cycles[u])))
                json_decref(busy), busy = NULL;
        if (!busy || json_array_append_new(kernels, json_pack("{s:s, s:I, s:I, s:I, s:o}", "name",
                                                              k->name, "chip", (json_int_t)k->chip,
                                                              "core", (json_int_t)k->core,
                                                              "cycles", (json_int_t)k->cycles,
                                                              "busy_cycles", busy)))
            goto fail;
    }
    json_t *traffic = json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "hbm_read_bytes",
                                (json_int_t)r->hbm_read_bytes, "hbm_write_bytes",
                                (json_int_t)r->hbm_write_bytes, "sram_read_bytes",
                                (json_int_t)r->sram_read_bytes, "sram_write_bytes",
                                (json_int_t)r->sram_write_bytes, "acc_read_bytes",
                                (json_int_t)r->acc_read_bytes, "acc_write_bytes",
                                (json_int_t)r->acc_write_bytes, "c2c_bytes",
                                (json_int_t)r->c2c_bytes);
    if (!traffic)
        goto fail;
    json_t *macs = json_object();
    for (unsigned d = 0; macs && d < ISA_DTYPE_COUNT; d++)
        if (r->macs[d] && json_object_set_new(macs, isa_dtype_names[d],
                                              json_integer((json_int_t)r->macs[d])))
            json_decref(macs), macs = NULL;
    if (!macs || json_object_set_new(traffic, "macs", macs) ||
        json_object_set_new(traffic, "vector_ops", json_integer((json_int_t)r->vector_ops)) ||
        json_object_set_new(traffic, "noc_flit_hops", json_integer((json_int_t)r->noc_flit_hops))) {
        json_decref(traffic);
        goto fail;
    }
    json_t *o = json_pack("{s:I, s:I, s:I, s:o, s:o, s:o}", "total_cycles",
                          (json_int_t)r->total_cycles, "total_ps", (json_int_t)r->total_ps,
                          "chips", (json_int_t)r->n_chips, "units", units, "kernels", kernels,
                          "traffic", traffic);
    if (o && r->l2.present) {
        json_t *lj = core_report_l2_json(&r->l2);
        if (!lj || json_object_set_new(o, "l2", lj)) {
            json_decref(o);
            return NULL;
        }
    }
    if (o && r->n_hbm_ctrls) {
        json_t *hm = core_report_hbm_json(r);
        if (!hm || json_object_set_new(o, "hbm_mesh", hm)) {
            json_decref(o);
            return NULL;
        }
    }
    return o;
fail:
    json_decref(units);
    json_decref(kernels);
    return NULL;
}

void core_report_print(const core_report *r, FILE *out)
{
    char a[NP_HUMAN_MAX], b[NP_HUMAN_MAX], c[NP_HUMAN_MAX], d[NP_HUMAN_MAX], e[NP_HUMAN_MAX];
    char f[NP_HUMAN_MAX];
    fprintf(out, "total: %s cycles (%s)\n\n", np_human_count(r->total_cycles, a, sizeof a),
            np_human_ps(r->total_ps, b, sizeof b));
    fprintf(out, "%-20s %13s %7s %13s %13s %10s %12s\n", "unit", "busy cycles", "busy %",
            "stall cycles", "idle cycles", "insns", "bytes");
    for (uint32_t i = 0; i < r->n_units; i++) {
        const core_unit_report *u = &r->units[i];
        double pct = r->total_cycles ? 100.0 * (double)u->busy_cycles / (double)r->total_cycles
                                     : 0;
        fprintf(out, "%-20s %13s %7.1f %13s %13s %10s %12s\n", u->name,
                np_human_count(u->busy_cycles, a, sizeof a), pct,
                np_human_count(u->stall_cycles, b, sizeof b),
                np_human_count(u->idle_cycles, c, sizeof c), np_human_count(u->insns, d, sizeof d),
                np_human_bytes(u->bytes, e, sizeof e));
    }
    fprintf(out, "\ntraffic: HBM read %s, HBM write %s, scratchpad read %s, scratchpad write %s,\n"
            "         accumulator read %s, write %s\n",
            np_human_bytes(r->hbm_read_bytes, a, sizeof a),
            np_human_bytes(r->hbm_write_bytes, b, sizeof b),
            np_human_bytes(r->sram_read_bytes, c, sizeof c),
            np_human_bytes(r->sram_write_bytes, d, sizeof d),
            np_human_bytes(r->acc_read_bytes, e, sizeof e),
            np_human_bytes(r->acc_write_bytes, f, sizeof f));
    if (r->l2.present)
        core_report_l2_print(&r->l2, out);
    if (r->n_chips > 1)
        fprintf(out, "chip-to-chip: %s sent between %" PRIu32 " chips\n",
                np_human_bytes(r->c2c_bytes, a, sizeof a), r->n_chips);
    if (r->n_hbm_ctrls)
        core_report_hbm_print(r, out);
    if (r->n_kernels) {
        fprintf(out, "\n%-24s %6s %6s %13s\n", "kernel", "chip", "core", "cycles");
        for (uint32_t i = 0; i < r->n_kernels; i++)
            fprintf(out, "%-24s %6" PRIu32 " %6" PRIu32 " %13s\n", r->kernels[i].name,
                    r->kernels[i].chip, r->kernels[i].core,
                    np_human_count(r->kernels[i].cycles, a, sizeof a));
    }
}

/* The end of chip s's program so far: its end, or now while it runs. */
static uint64_t chip_end_ps(const chip_sim *s)
{
    return s->state == HW_CHIP_RUNNING ? evq_now(s->q) : s->t_end_ps;
}

/* Adds chip s's HBM controllers and figures to r (r->total_ps is set). NP_ERR_NOMEM. */
static np_status report_hbm(const hw_system *y, const chip_sim *s, core_report *r)
{
    uint32_t n = hbm_mesh_count(s->hmesh);
    core_hbm_ctrl_report *v = realloc(r->hbm_ctrls, (r->n_hbm_ctrls + n) * sizeof *v);
    if (!v)
        return NP_ERR_NOMEM;
    r->hbm_ctrls = v;
    for (uint32_t j = 0; j < n; j++) {
        core_hbm_ctrl_report *c = &v[r->n_hbm_ctrls++];
        double rd, wr, lim;
        hbm_mesh_ctrl_figures(s->hmesh, j, &rd, &wr, &lim);
        *c = (core_hbm_ctrl_report){.chip = s->chip, .ctrl = j,
                                    .router = hbm_mesh_router(s->cfg, j),
                                    .read_bytes = (uint64_t)llround(rd),
                                    .write_bytes = (uint64_t)llround(wr),
                                    .limited_bytes = (uint64_t)llround(lim)};
        double cap = hbm_mesh_ctrl_gb_per_s(s->cfg, j) * 1e-3 * (double)r->total_ps; /* bytes */
        c->util_pct = cap > 0 ? 100.0 * (rd + wr) / cap : 0;
        if (y->n_chips > 1)
            snprintf(c->name, sizeof c->name, "chip%" PRIu32 ".hbm.ctrl%" PRIu32, s->chip, j);
        else
            snprintf(c->name, sizeof c->name, "hbm.ctrl%" PRIu32, j);
    }
    hbm_mesh_figures f;
    hbm_mesh_get_figures(s->hmesh, &f);
    r->hbm_mesh_bytes += (uint64_t)llround(f.bytes);
    r->hbm_limited_by_ctrl += (uint64_t)llround(f.by_ctrl);
    r->hbm_limited_by_ctrl_port += (uint64_t)llround(f.by_ctrl_port);
    r->hbm_limited_by_mesh += (uint64_t)llround(f.by_mesh);
    r->hbm_limited_by_copy += (uint64_t)llround(f.by_copy);
    if (f.busiest_link[0] && (uint64_t)llround(f.busiest_link_bytes) > r->hbm_busiest_link_bytes) {
        r->hbm_busiest_link_bytes = (uint64_t)llround(f.busiest_link_bytes);
        if (y->n_chips > 1)
            snprintf(r->hbm_busiest_link, sizeof r->hbm_busiest_link, "chip%" PRIu32 ".%s",
                     s->chip, f.busiest_link);
        else
            snprintf(r->hbm_busiest_link, sizeof r->hbm_busiest_link, "%s", f.busiest_link);
    }
    return NP_OK;
}

/* Adds chip s's L2 figures (since its program was loaded) to r->l2. */
static void report_l2(const chip_sim *s, core_report *r)
{
    core_l2_report *l = &r->l2;
    const arch_chip *ch = &s->cfg->chip;
    l->present = true;
    l->buffer = ch->l2_mode == ARCH_L2_MODE_BUFFER;
    l->read_bytes += s->l2_rd;
    l->write_bytes += s->l2_wr;
    if (s->l2) {
        l2_figures f;
        l2_get_figures(s->l2, &f);
        const l2_figures *b = &s->l2_base;
        l->moved_bytes += f.read_bytes - b->read_bytes + f.write_bytes - b->write_bytes;
        l->read_hits += f.read_hits - b->read_hits;
        l->read_misses += f.read_misses - b->read_misses;
        l->write_hits += f.write_hits - b->write_hits;
        l->write_misses += f.write_misses - b->write_misses;
        l->pending_hits += f.pending_hits - b->pending_hits;
        l->fill_bytes += f.fill_bytes - b->fill_bytes;
        l->writeback_bytes += f.wb_bytes - b->wb_bytes;
        l->dirty_bytes += l2_dirty_bytes(s->l2);
    } else {
        l->moved_bytes += s->l2_rd + s->l2_wr; /* the buffer: as asked */
    }
}

/* The L2's ratios, once its sums are in. */
static void report_l2_ratios(const arch_config *cfg, core_report *r)
{
    core_l2_report *l = &r->l2;
    uint64_t rd = l->read_hits + l->read_misses;
    l->hit_pct = rd ? 100.0 * (double)l->read_hits / (double)rd : 0;
    double cap = cfg->chip.l2_gb_per_s * 1e-3 * (double)r->total_ps * (double)r->n_chips;
    l->util_pct = cap > 0 ? 100.0 * (double)l->moved_bytes / cap : 0;
}

/* Registers the L2's figures in reg under "l2" ("l2.read_bytes", ...). */
static np_status report_l2_stats(const core_report *r, stats *reg, np_err *err)
{
    const core_l2_report *l = &r->l2;
    const struct { const char *name, *unit, *desc; uint64_t v; } f[] = {
        {"read_bytes", "bytes", "bytes DMA copies read from the L2 (as asked)", l->read_bytes},
        {"write_bytes", "bytes", "bytes DMA copies wrote to the L2 (as asked)", l->write_bytes},
        {"moved_bytes", "bytes", "whole sectors the L2 moved to and from the cores",
         l->moved_bytes},
        {"read_hits", "sectors", "sectors read that the L2 held", l->read_hits},
        {"read_misses", "sectors", "sectors read that the L2 fetched from the HBM", l->read_misses},
        {"write_hits", "sectors", "sectors written to lines the L2 held", l->write_hits},
        {"write_misses", "sectors", "sectors written to lines the L2 allocated", l->write_misses},
        {"pending_hits", "sectors", "read hits that waited for another copy's fill",
         l->pending_hits},
        {"fill_bytes", "bytes", "bytes the L2 read from the HBM for misses", l->fill_bytes},
        {"writeback_bytes", "bytes", "dirty bytes the L2 wrote back to the HBM",
         l->writeback_bytes},
        {"dirty_bytes", "bytes", "dirty bytes in the L2 at the end, not yet written back",
         l->dirty_bytes},
    };
    for (size_t j = 0; j < sizeof f / sizeof f[0]; j++) {
        if (l->buffer && j > 2)
            break; /* a buffer has no hits, fills or dirty lines */
        stats_counter *ctr = stats_new_counter(reg, "l2", f[j].name, f[j].unit, f[j].desc, err);
        if (!ctr)
            return err->status;
        stats_add(ctr, f[j].v);
    }
    return NP_OK;
}

/* Registers each controller's figures in reg ("hbm.ctrl0.read_bytes", ...). */
static np_status report_hbm_stats(const core_report *r, stats *reg, np_err *err)
{
    for (uint32_t i = 0; i < r->n_hbm_ctrls; i++) {
        const core_hbm_ctrl_report *c = &r->hbm_ctrls[i];
        const struct { const char *name, *desc; uint64_t v; } f[] = {
            {"read_bytes", "HBM bytes the controller read for DMA copies", c->read_bytes},
            {"write_bytes", "HBM bytes the controller wrote for DMA copies", c->write_bytes},
            {"limited_bytes", "bytes moved while the controller's bandwidth or port set the rate",
             c->limited_bytes},
        };
        for (size_t j = 0; j < sizeof f / sizeof f[0]; j++) {
            stats_counter *ctr = stats_new_counter(reg, c->name, f[j].name, "bytes", f[j].desc,
                                                   err);
            if (!ctr)
                return err->status;
            stats_add(ctr, f[j].v);
        }
    }
    return NP_OK;
}

np_status core_report_build(hw_system *y, uint32_t chip, stats *reg, core_report **out,
                            np_err *err)
{
    core_report *r = calloc(1, sizeof *r);
    if (!r)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory building the report");
    const clk_domain *clk = &y->chips[0].clk; /* every chip has the same core clock */
    uint32_t lo = chip == HW_ALL_CHIPS ? 0 : chip, hi = chip == HW_ALL_CHIPS ? y->n_chips : chip + 1;
    uint64_t start_ps = UINT64_MAX, end_ps = 0, nk = 0, nc = 0;
    for (uint32_t ch = lo; ch < hi; ch++) {
        const chip_sim *s = &y->chips[ch];
        if (!s->prog)
            continue;
        r->n_chips++;
        if (s->state >= HW_CHIP_RUNNING) {
            start_ps = s->t_start_ps < start_ps ? s->t_start_ps : start_ps;
            end_ps = chip_end_ps(s) > end_ps ? chip_end_ps(s) : end_ps;
        }
        for (uint32_t i = 0; i < s->n_cores; i++) {
            nk += s->cores[i].text->n_kernels;
            nc++;
        }
    }
    if (start_ps > end_ps)
        start_ps = end_ps; /* nothing has started */
    r->total_ps = end_ps - start_ps;
    r->total_cycles = clk_ps_to_cycles(clk, end_ps) - clk_ps_to_cycles(clk, start_ps);
    r->n_units = (uint32_t)(nc * (ISA_N_QUEUES + 1));
    r->units = calloc(r->n_units ? r->n_units : 1, sizeof *r->units);
    r->kernels = calloc(nk ? nk : 1, sizeof *r->kernels);
    if (!r->units || !r->kernels)
        goto nomem;
    uint32_t ui = 0;
    for (uint32_t ch = lo; ch < hi; ch++) {
        const chip_sim *s = &y->chips[ch];
        if (!s->prog)
            continue;
        bool running = s->state == HW_CHIP_RUNNING;
        uint64_t now = evq_now(y->q);
        for (uint32_t i = 0; i < s->n_cores; i++) {
            const core_model *c = &s->cores[i];
            for (unsigned u = 0; u <= ISA_N_QUEUES; u++) {
                core_unit_report *ur = &r->units[ui++];
                bool fe = u == ISA_N_QUEUES;
                ur->kind = fe ? ISA_UNIT_CTRL : (isa_unit)u;
                ur->chip = ch;
                ur->core = c->id;
                const char *un = isa_unit_names[ur->kind];
                if (y->n_chips > 1)
                    snprintf(ur->name, sizeof ur->name, "chip%" PRIu32 ".core%" PRIu32 ".%s", ch,
                             c->id, un);
                else
                    snprintf(ur->name, sizeof ur->name, "core%" PRIu32 ".%s", c->id, un);
                uint64_t busy, stall;
                if (fe)
                    core_fe_so_far(c, running ? now : 0, &busy, &stall);
                else
                    core_q_so_far(&c->q[u], running ? now : 0, &busy, &stall);
                ur->busy_cycles = clk_ps_to_cycles(clk, busy);
                ur->stall_cycles = clk_ps_to_cycles(clk, stall);
                uint64_t used = ur->busy_cycles + ur->stall_cycles;
                ur->idle_cycles = r->total_cycles > used ? r->total_cycles - used : 0;
                ur->insns = fe ? c->fe_insns : c->q[u].insns;
                ur->bytes = fe ? 0 : c->q[u].bytes;
            }
            for (uint32_t k = 0; k < c->text->n_kernels; k++) {
                core_kernel_report *kr = &r->kernels[r->n_kernels];
                if (!(kr->name = strdup(c->text->kernels[k].name)))
                    goto nomem;
                r->n_kernels++;
                kr->chip = ch;
                kr->core = c->id;
                const kernel_run *run = &c->kernels[k];
                kr->cycles = run->seen ? clk_ps_to_cycles(clk, run->last_ps) -
                                             clk_ps_to_cycles(clk, run->first_ps)
                                       : 0;
                kr->start_ps = run->seen ? run->first_ps : 0;
                kr->end_ps = run->seen ? run->last_ps : 0;
                for (unsigned u = 0; u < ISA_N_QUEUES; u++)
                    kr->busy_cycles[u] = clk_ps_to_cycles(clk, run->busy_ps[u]);
            }
        }
        r->hbm_read_bytes += s->hbm_rd, r->hbm_write_bytes += s->hbm_wr;
        r->sram_read_bytes += s->spad_rd, r->sram_write_bytes += s->spad_wr;
        r->acc_read_bytes += s->acc_rd, r->acc_write_bytes += s->acc_wr;
        r->c2c_bytes += s->c2c_bytes;
        for (unsigned d = 0; d < ISA_DTYPE_COUNT; d++)
            r->macs[d] += s->macs[d];
        r->vector_ops += s->vec_ops;
        if (s->noc)
            r->noc_flit_hops += core_noc_flit_hops(s->noc) - s->noc_base;
        if (s->hmesh && report_hbm(y, s, r) != NP_OK)
            goto nomem;
        if (s->cfg->chip.l2_bytes)
            report_l2(s, r);
    }
    if (r->l2.present)
        report_l2_ratios(y->cfg, r);
    if (reg && r->l2.present && report_l2_stats(r, reg, err) != NP_OK) {
        core_report_free(r);
        return err->status;
    }
    if (reg && report_hbm_stats(r, reg, err) != NP_OK) {
        core_report_free(r);
        return err->status;
    }
    if (reg) {
        static const struct { const char *name, *unit, *desc; size_t off; } f[] = {
            {"busy_cycles", "cycles", "cycles executing an instruction", offsetof(core_unit_report, busy_cycles)},
            {"stall_cycles", "cycles", "cycles blocked on a semaphore, an operand, a full queue, fence or barrier, or contention", offsetof(core_unit_report, stall_cycles)},
            {"idle_cycles", "cycles", "cycles with nothing to do", offsetof(core_unit_report, idle_cycles)},
            {"insns", "instructions", "instructions retired", offsetof(core_unit_report, insns)},
            {"bytes", "bytes", "bytes read and written", offsetof(core_unit_report, bytes)},
        };
        for (uint32_t i = 0; i < r->n_units; i++)
            for (size_t j = 0; j < sizeof f / sizeof f[0]; j++) {
                stats_counter *ctr = stats_new_counter(reg, r->units[i].name, f[j].name,
                                                       f[j].unit, f[j].desc, err);
                if (!ctr) {
                    core_report_free(r);
                    return err->status;
                }
                stats_add(ctr, *(const uint64_t *)((const char *)&r->units[i] + f[j].off));
            }
    }
    *out = r;
    return NP_OK;
nomem:
    core_report_free(r);
    return np_err_set(err, NP_ERR_NOMEM, "out of memory building the report");
}

const core_unit_report *core_report_unit(const core_report *r, uint32_t chip, uint32_t core,
                                         isa_unit kind)
{
    for (uint32_t i = 0; i < r->n_units; i++) {
        const core_unit_report *u = &r->units[i];
        if (u->kind == kind && u->chip == chip && u->core == core)
            return u;
    }
    return NULL;
}

uint64_t core_noc_flit_hops(const mesh *m)
{
    uint64_t n = 0;
    for (uint32_t r = 0; r < mesh_nodes(m); r++)
        for (int p = 0; p < MESH_PORT_COUNT; p++)
            n += mesh_link_flits(m, r, p);
    return n;
}

void core_report_free(core_report *r)
{
    if (!r)
        return;
    for (uint32_t i = 0; i < r->n_kernels; i++)
        free(r->kernels[i].name);
    free(r->kernels);
    free(r->units);
    free(r->hbm_ctrls);
    free(r);
}
