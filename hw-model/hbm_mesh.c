/* hbm_mesh.c — HBM controllers on the mesh: placement, ownership, and a copy's HBM side as
 * mesh accesses (see hbm_mesh.h). */
#include "hbm_mesh.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct hbm_mesh {
    const arch_config *cfg;
    mesh *m;
    uint32_t n;             /* controllers */
    double *ctrl_fpc;       /* per controller: bandwidth in flits per NoC cycle */
    double *bytes;          /* scratch: a range's bytes per controller */
    uint32_t *chans;        /* scratch: its channels touched per controller */
    double flit_bytes;
    double ps_per_cycle;    /* of the NoC clock */
    uint32_t access_cycles; /* hbm_latency_ns in NoC cycles, rounded up */
    uint32_t l2_cycles;     /* l2_latency_ns likewise (chip.l2_bytes > 0) */
    uint32_t lat_cycles;    /* hbm_latency_ns in NoC cycles, rounded up */
    double *l2_fpc;         /* per L2 slice: bandwidth in flits per NoC cycle; NULL: no L2 */
    /* the figures at the last hbm_mesh_mark */
    mesh_mem_stats base;
    mesh_ctrl_stats *ctrl_base;
    double *link_base;      /* per router and output port (+ injection): bound flits */
    uint32_t n_links;
};

static const char *const link_names[MESH_PORT_COUNT + 1] = {"local", "xplus", "xminus",
                                                            "yplus", "yminus", "inject"};

uint32_t hbm_mesh_router(const arch_config *cfg, uint32_t j)
{
    const arch_chip *c = &cfg->chip;
    uint64_t kx = (uint64_t)c->mesh_x, ky = (uint64_t)c->mesh_y, n = kx * ky;
    if (c->hbm_placement == ARCH_HBM_PLACEMENT_STRIDE)
        return (uint32_t)(((uint64_t)c->hbm_controller_router + (uint64_t)j *
                           (uint64_t)c->hbm_controller_stride) % n);
    uint64_t total = (uint64_t)c->hbm_controllers, side = j % 2, k = j / 2;
    uint64_t w = side ? total / 2 : (total + 1) / 2; /* controllers on this side */
    uint64_t row = (2 * k + 1) * ky / (2 * w);
    return (uint32_t)(row * kx + (side ? kx - 1 : 0));
}

double hbm_mesh_ctrl_gb_per_s(const arch_config *cfg, uint32_t j)
{
    uint64_t ch = (uint64_t)cfg->chip.hbm_channels, nc = (uint64_t)cfg->chip.hbm_controllers;
    uint64_t owned = ch / nc + (j < ch % nc ? 1 : 0); /* channels c with c mod nc == j */
    return cfg->chip.hbm_gb_per_s * (double)owned / (double)ch;
}

void hbm_mesh_free(hbm_mesh *h)
{
    if (!h)
        return;
    free(h->ctrl_fpc);
    free(h->l2_fpc);
    free(h->bytes);
    free(h->chans);
    free(h->ctrl_base);
    free(h->link_base);
    free(h);
}

np_status hbm_mesh_create(const arch_config *cfg, mesh *m, hbm_mesh **out, np_err *err)
{
    *out = NULL;
    uint32_t n = (uint32_t)cfg->chip.hbm_controllers;
    hbm_mesh *h = calloc(1, sizeof *h);
    if (h) {
        h->ctrl_fpc = calloc(n, sizeof *h->ctrl_fpc);
        h->bytes = calloc(n, sizeof *h->bytes);
        h->chans = calloc(n, sizeof *h->chans);
        h->ctrl_base = calloc(n, sizeof *h->ctrl_base);
        h->n_links = mesh_nodes(m) * (MESH_PORT_COUNT + 1);
        h->link_base = calloc(h->n_links, sizeof *h->link_base);
    }
    if (!h || !h->ctrl_fpc || !h->bytes || !h->chans || !h->ctrl_base || !h->link_base) {
        hbm_mesh_free(h);
        return np_err_set(err, NP_ERR_NOMEM, "out of memory placing the HBM controllers");
    }
    h->cfg = cfg;
    h->m = m;
    h->n = n;
    h->flit_bytes = (double)cfg->chip.noc_flit_bytes;
    h->ps_per_cycle = 1000.0 / cfg->chip.noc_clock_ghz;
    /* hbm_latency_ns is what a core at the controller's router sees: the memory's own part is
     * that less the round trip through the router (the request's and the data's head
     * latencies, 2 (P + 2L), less the cycle the last flit shares with the stream) */
    const mesh_params *mp = mesh_get_params(m);
    int64_t lat = (int64_t)ceil(cfg->chip.hbm_latency_ns * cfg->chip.noc_clock_ghz - 1e-9);
    int64_t local = 2 * (int64_t)(mp->router_cycles + 2 * mp->link_cycles) - 1;
    h->access_cycles = (uint32_t)(lat > local ? lat - local : 0);
    h->lat_cycles = (uint32_t)lat;
    for (uint32_t j = 0; j < n; j++) {
        /* GB/s = bytes per ns; per NoC cycle: x ns per cycle; in flits: / flit bytes */
        h->ctrl_fpc[j] = hbm_mesh_ctrl_gb_per_s(cfg, j) / cfg->chip.noc_clock_ghz / h->flit_bytes;
        if (mesh_add_controller(m, hbm_mesh_router(cfg, j), h->ctrl_fpc[j], err) != NP_OK) {
            hbm_mesh_free(h);
            return err->status;
        }
    }
    if (cfg->chip.l2_bytes) {
        /* an L2 slice per controller, at its router, with its channels' share of the L2's
         * bandwidth: controllers n .. 2n - 1 of the mesh */
        int64_t l2lat = (int64_t)ceil(cfg->chip.l2_latency_ns * cfg->chip.noc_clock_ghz - 1e-9);
        h->l2_cycles = (uint32_t)(l2lat > local ? l2lat - local : 0);
        if (!(h->l2_fpc = calloc(n, sizeof *h->l2_fpc))) {
            hbm_mesh_free(h);
            return np_err_set(err, NP_ERR_NOMEM, "out of memory placing the L2 slices");
        }
        for (uint32_t j = 0; j < n; j++) {
            h->l2_fpc[j] = hbm_mesh_ctrl_gb_per_s(cfg, j) / cfg->chip.hbm_gb_per_s *
                           cfg->chip.l2_gb_per_s / cfg->chip.noc_clock_ghz / h->flit_bytes;
            if (mesh_add_controller(m, hbm_mesh_router(cfg, j), h->l2_fpc[j], err) != NP_OK) {
                hbm_mesh_free(h);
                return err->status;
            }
        }
    }
    *out = h;
    return NP_OK;
}

np_status hbm_mesh_access(hbm_mesh *h, hbm_mesh_to to, uint32_t j, uint32_t node, bool write,
                          double bytes, double cap_bytes_per_ps, uint64_t tag, uint64_t *alone_ps,
                          np_err *err)
{
    const mesh_params *mp = mesh_get_params(h->m);
    bool l2 = to == HBM_MESH_L2, local = to == HBM_MESH_LOCAL;
    double cap_fpc = cap_bytes_per_ps * h->ps_per_cycle / h->flit_bytes;
    /* a fill beside its slice keeps the core waiting as a read of the HBM over the mesh
     * would: hbm_latency_ns and the hops there and back (its data reaches the core in the
     * slice's access, which runs beside it) */
    uint32_t hops = local ? mesh_hops(mp, node, hbm_mesh_router(h->cfg, j)) : 0;
    uint32_t acc = l2      ? h->l2_cycles
                   : local ? h->lat_cycles + 2 * hops * (mp->router_cycles + mp->link_cycles)
                           : h->access_cycles;
    mesh_access a = {.ctrl = l2 ? h->n + j : j, .node = node, .write = write,
                     .flits = bytes / h->flit_bytes, .cap = cap_fpc, .access_cycles = acc,
                     .tag = tag, .local = local};
    if (mesh_access_start(h->m, &a, err) != NP_OK)
        return err->status;
    double bw = l2 ? h->l2_fpc[j] : h->ctrl_fpc[j];
    double rate = cap_fpc < bw ? cap_fpc : bw;
    if (rate > 1.0 && !local)
        rate = 1.0;
    uint64_t hop = local ? 0 : mesh_zero_load_cycles(mp, node, hbm_mesh_router(h->cfg, j), 1);
    double cyc = (double)(2 * hop + a.access_cycles) + ceil(a.flits / rate - 1e-9) -
                 (local ? 0 : 1);
    *alone_ps = (uint64_t)ceil(cyc * h->ps_per_cycle - 1e-6);
    return NP_OK;
}

/* Adds the bytes [a0, a1) to the channels they interleave over (cb[channel]). */
static void split_run(double *cb, uint64_t a0, uint64_t a1, uint64_t il, uint64_t nch)
{
    uint64_t u0 = a0 / il, u1 = (a1 - 1) / il;
    if (u0 == u1) {
        cb[u0 % nch] += (double)(a1 - a0);
        return;
    }
    cb[u0 % nch] += (double)((u0 + 1) * il - a0);
    cb[u1 % nch] += (double)(a1 - u1 * il);
    uint64_t whole = u1 - u0 - 1; /* units u0 + 1 .. u1 - 1, il bytes each */
    if (whole >= nch) {           /* every channel has whole / nch of them, and some one more */
        double each = (double)(whole / nch) * (double)il;
        for (uint64_t c = 0; c < nch; c++)
            cb[c] += each;
        whole %= nch;
    }
    for (uint64_t k = 0; k < whole; k++)
        cb[(u0 + 1 + k) % nch] += (double)il;
}

void hbm_mesh_split(const arch_config *cfg, const core_range *range, double *bytes,
                    uint32_t *chans)
{
    const arch_chip *ch = &cfg->chip;
    uint64_t nch = (uint64_t)ch->hbm_channels, nc = (uint64_t)ch->hbm_controllers;
    uint64_t burst = (uint64_t)ch->hbm_burst_bytes, il = (uint64_t)ch->hbm_interleave_bytes;
    double cb[4096]; /* hbm_channels <= 4096 (schema) */
    memset(cb, 0, nch * sizeof *cb);
    /* rows (and planes) that follow each other without a gap are one run, as for the bursts */
    core_range m = *range, *r = &m;
    if (r->rows == 1 || r->row_stride == r->row_bytes) {
        r->row_bytes *= r->rows;
        r->rows = 1;
        r->row_stride = r->row_bytes;
        if (r->planes == 1 || r->plane_stride == r->row_bytes) {
            r->row_bytes *= r->planes;
            r->planes = 1;
        } else {
            r->rows = r->planes;
            r->row_stride = r->plane_stride;
            r->planes = 1;
        }
    }
    uint64_t scanned = 0;
    for (uint64_t p = 0; p < r->planes && scanned < CORE_BANK_SCAN_ROWS; p++)
        for (uint64_t i = 0; i < r->rows && scanned < CORE_BANK_SCAN_ROWS; i++, scanned++) {
            uint64_t a = r->addr + p * r->plane_stride + i * r->row_stride;
            uint64_t a0 = a / burst * burst, a1 = (a + r->row_bytes + burst - 1) / burst * burst;
            split_run(cb, a0, a1, il, nch);
        }
    double total = 0;
    for (uint64_t j = 0; j < nc; j++) {
        bytes[j] = 0;
        chans[j] = 0;
    }
    for (uint64_t c = 0; c < nch; c++) {
        bytes[c % nc] += cb[c];
        chans[c % nc] += cb[c] > 0;
        total += cb[c];
    }
    /* scale to the copy's bursts (rows beyond the scan spread as the scanned ones) */
    double want = (double)core_burst_bytes(range, burst);
    if (total > 0 && want != total)
        for (uint64_t j = 0; j < nc; j++)
            bytes[j] *= want / total;
}

np_status hbm_mesh_copy(hbm_mesh *h, const core_range *r, unsigned nr, uint32_t node,
                        double port_bytes_per_ps, uint64_t tag, unsigned *n_parts,
                        uint64_t *alone_ps, np_err *err)
{
    const arch_chip *ch = &h->cfg->chip;
    double chan_bytes_per_ps = ch->hbm_gb_per_s / 1000.0 / (double)ch->hbm_channels;
    *n_parts = 0;
    *alone_ps = 0;
    for (unsigned i = 0; i < nr; i++) {
        if (r[i].space != ISA_SPACE_HBM)
            continue;
        hbm_mesh_split(h->cfg, &r[i], h->bytes, h->chans);
        for (uint32_t j = 0; j < h->n; j++) {
            if (!(h->bytes[j] > 0))
                continue;
            double cap = (double)h->chans[j] * chan_bytes_per_ps;
            if (port_bytes_per_ps < cap)
                cap = port_bytes_per_ps;
            uint64_t t;
            if (hbm_mesh_access(h, HBM_MESH_HBM, j, node, r[i].write, h->bytes[j], cap, tag, &t,
                                err) != NP_OK)
                return err->status;
            (*n_parts)++;
            if (t > *alone_ps)
                *alone_ps = t;
        }
    }
    return NP_OK;
}

np_status hbm_mesh_copy_l2(hbm_mesh *h, const core_range *r, unsigned nr, uint32_t node,
                           double port_bytes_per_ps, uint64_t tag, unsigned *n_parts,
                           uint64_t *alone_ps, np_err *err)
{
    *n_parts = 0;
    *alone_ps = 0;
    for (unsigned i = 0; i < nr; i++) {
        hbm_mesh_split(h->cfg, &r[i], h->bytes, h->chans);
        for (uint32_t j = 0; j < h->n; j++) {
            uint64_t t;
            if (!(h->bytes[j] > 0))
                continue;
            if (hbm_mesh_access(h, HBM_MESH_L2, j, node, r[i].write, h->bytes[j],
                                port_bytes_per_ps, tag, &t, err) != NP_OK)
                return err->status;
            (*n_parts)++;
            if (t > *alone_ps)
                *alone_ps = t;
        }
    }
    return NP_OK;
}

uint32_t hbm_mesh_count(const hbm_mesh *h) { return h->n; }

void hbm_mesh_mark(hbm_mesh *h)
{
    mesh_mem_get_stats(h->m, &h->base);
    for (uint32_t j = 0; j < h->n; j++)
        mesh_controller_stats(h->m, j, &h->ctrl_base[j]);
    for (uint32_t l = 0; l < h->n_links; l++)
        h->link_base[l] = mesh_link_bound_flits(h->m, l / (MESH_PORT_COUNT + 1),
                                                (int)(l % (MESH_PORT_COUNT + 1)));
}

void hbm_mesh_get_figures(const hbm_mesh *h, hbm_mesh_figures *f)
{
    mesh_mem_stats s;
    mesh_mem_get_stats(h->m, &s);
    double fb = h->flit_bytes;
    *f = (hbm_mesh_figures){.bytes = (s.flits - h->base.flits) * fb,
                            .by_ctrl = (s.ctrl_bound_flits - h->base.ctrl_bound_flits) * fb,
                            .by_ctrl_port = (s.port_bound_flits - h->base.port_bound_flits) * fb,
                            .by_mesh = (s.mesh_bound_flits - h->base.mesh_bound_flits) * fb,
                            .by_copy = (s.cap_bound_flits - h->base.cap_bound_flits) * fb};
    for (uint32_t l = 0; l < h->n_links; l++) {
        uint32_t r = l / (MESH_PORT_COUNT + 1);
        int port = (int)(l % (MESH_PORT_COUNT + 1));
        double b = (mesh_link_bound_flits(h->m, r, port) - h->link_base[l]) * fb;
        if (b > 0.5 && b > f->busiest_link_bytes) {
            f->busiest_link_bytes = b;
            snprintf(f->busiest_link, sizeof f->busiest_link, "r%u.%s", (unsigned)r,
                     link_names[port]);
        }
    }
}

void hbm_mesh_ctrl_figures(const hbm_mesh *h, uint32_t j, double *rd, double *wr,
                           double *limited)
{
    mesh_ctrl_stats c;
    mesh_controller_stats(h->m, j, &c);
    const mesh_ctrl_stats *b = &h->ctrl_base[j];
    *rd = (c.read_flits - b->read_flits) * h->flit_bytes;
    *wr = (c.write_flits - b->write_flits) * h->flit_bytes;
    *limited = (c.bound_flits - b->bound_flits) * h->flit_bytes;
}
