/* hbm_mesh.h — HBM controllers on the chip's mesh (chip.hbm_controllers > 0): which controller
 * owns an address, where each sits, and a DMA copy's HBM side as memory accesses over the mesh
 * (noc/mesh.h "memory controllers and accesses"). Internal to hw-model.
 *
 * Addresses interleave over chip.hbm_channels channels every chip.hbm_interleave_bytes
 * (channel = addr / interleave mod channels); channel ch belongs to controller ch mod C
 * (C = chip.hbm_controllers), which serves its channels' share of chip.hbm_gb_per_s. A copy's
 * HBM range moves whole bursts (chip.hbm_burst_bytes, as without the mesh); its bursts split
 * over the controllers that own them, and each controller's part is one access between the
 * core's router and the controller's: a read for a source range, a write for a destination
 * range, capped at the share of the channels it touches there (k channels: k x hbm_gb_per_s /
 * channels) and at the scratchpad ports. All parts run at once and the copy's HBM side ends
 * with the last. chip.hbm_latency_ns is the latency a core at the controller's router sees;
 * the memory's own part (the accesses' access_cycles) is that, in NoC cycles rounded up, less
 * the round trip through that router, 2 (P + 2L) - 1 (at least 0). Alone, a part of B bytes at
 * b bytes per NoC cycle (the least of its cap, its controller's bandwidth and a link's flit
 * per cycle) H hops from its controller therefore takes
 *     ceil(hbm_latency x noc clock) + 2H (P + L) + ceil(B / b)   NoC cycles
 * (the request there, the memory, the data back; a write: the data, the memory, the
 * completion), which at H = 0 is the time without the mesh.
 */
#ifndef NPUSIM_HBM_MESH_H
#define NPUSIM_HBM_MESH_H

#include <stdint.h>

#include "arch.h"
#include "core_cost.h"
#include "err.h"
#include "mesh.h"

typedef struct hbm_mesh hbm_mesh;

/* The router of controller j (< chip.hbm_controllers) by chip.hbm_placement:
 *   edges   controller j on the west column (x = 0) when j is even, else the east one
 *           (x = mesh_x - 1); the k-th (k = j / 2) of a side's w controllers at row
 *           floor((2k + 1) x mesh_y / (2w));
 *   stride  (hbm_controller_router + j x hbm_controller_stride) mod (mesh_x x mesh_y). */
uint32_t hbm_mesh_router(const arch_config *cfg, uint32_t j);

/* Controller j's bandwidth in GB/s: the channels it owns x hbm_gb_per_s / hbm_channels. */
double hbm_mesh_ctrl_gb_per_s(const arch_config *cfg, uint32_t j);

/* Adds cfg's controllers to mesh m (whose flits are chip.noc_flit_bytes, clocked at
 * chip.noc_clock_ghz) and keeps what splitting copies needs. NP_ERR_NOMEM, the mesh's errors;
 * *out NULL on failure (controllers already added stay: free the mesh). */
np_status hbm_mesh_create(const arch_config *cfg, mesh *m, hbm_mesh **out, np_err *err);
void hbm_mesh_free(hbm_mesh *h);

/* Starts the accesses of a copy whose ranges are r[0 .. nr) (the HBM ones count) from the
 * core at router `node`, each capped at port_bytes_per_ps too, with `tag` given back by the
 * mesh when each completes. *n_parts: accesses started (>= 1 when a range is in HBM); *alone_ps:
 * how long the slowest takes alone. NP_ERR_NOMEM, the mesh's errors. */
np_status hbm_mesh_copy(hbm_mesh *h, const core_range *r, unsigned nr, uint32_t node,
                        double port_bytes_per_ps, uint64_t tag, unsigned *n_parts,
                        uint64_t *alone_ps, np_err *err);

/* Where hbm_mesh_access goes: controller j's HBM over the mesh; controller j's HBM from the L2
 * slice beside it, not crossing the mesh (a fill or a write-back: its latency is what a read
 * of the HBM from the core at `node` pays, hbm_latency_ns and 2 (P + L) a hop, while its data
 * crosses the mesh in the slice's access beside it); or the L2 slice at
 * controller j's router (chip.l2_bytes > 0: hbm_mesh_create adds one per controller, with the
 * share of chip.l2_gb_per_s that the controller has of the HBM's, as mesh controllers
 * hbm_controllers .. 2 hbm_controllers - 1; its latency l2_latency_ns as hbm_latency_ns's). */
typedef enum hbm_mesh_to { HBM_MESH_HBM, HBM_MESH_LOCAL, HBM_MESH_L2 } hbm_mesh_to;

/* Starts one access of `bytes` (> 0) to or from `to` of controller j for the core at router
 * `node` (a write: from the core, or into the HBM), capped at cap_bytes_per_ps, giving back
 * `tag` when it completes; *alone_ps: how long it takes alone. NP_ERR_NOMEM, the mesh's. */
np_status hbm_mesh_access(hbm_mesh *h, hbm_mesh_to to, uint32_t j, uint32_t node, bool write,
                          double bytes, double cap_bytes_per_ps, uint64_t tag, uint64_t *alone_ps,
                          np_err *err);

/* hbm_mesh_copy for ranges r[0 .. nr) of the global buffer (chip.l2_mode: buffer): each
 * controller's part of a range (split as the HBM's bursts) an access to its L2 slice, capped
 * at port_bytes_per_ps only. */
np_status hbm_mesh_copy_l2(hbm_mesh *h, const core_range *r, unsigned nr, uint32_t node,
                           double port_bytes_per_ps, uint64_t tag, unsigned *n_parts,
                           uint64_t *alone_ps, np_err *err);

/* What the controllers served and what limited the accesses since the last hbm_mesh_mark (a
 * program's load), in bytes (flits x chip.noc_flit_bytes). */
typedef struct hbm_mesh_figures {
    double bytes;                 /* moved over the mesh to and from the controllers */
    double by_ctrl, by_ctrl_port; /* ... while a controller's bandwidth, or its port, set
                                     the rate */
    double by_mesh, by_copy;      /* ... a mesh link; the copy's own channels or ports */
    char busiest_link[32];        /* the mesh link that limited the most bytes ("r1.xplus",
                                     "r2.local" (ejection), "r0.inject"); "" if none did */
    double busiest_link_bytes;
} hbm_mesh_figures;
void hbm_mesh_mark(hbm_mesh *h);
void hbm_mesh_get_figures(const hbm_mesh *h, hbm_mesh_figures *f);
/* Controller j since the mark: bytes read and written (completed accesses), and the bytes its
 * bandwidth or port limited. */
void hbm_mesh_ctrl_figures(const hbm_mesh *h, uint32_t j, double *rd, double *wr,
                           double *limited);
uint32_t hbm_mesh_count(const hbm_mesh *h);

/* The bursts of HBM range r on each controller: bytes[j] (summing to core_burst_bytes(r)) and
 * chans[j], the channels of controller j it touches, for j < chip.hbm_controllers (the arrays
 * hold that many). Rows beyond CORE_BANK_SCAN_ROWS are taken to spread as the scanned ones do.
 * (For tests and hbm_mesh_copy.) */
void hbm_mesh_split(const arch_config *cfg, const core_range *r, double *bytes, uint32_t *chans);

#endif
