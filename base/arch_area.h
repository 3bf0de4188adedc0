/* arch_area.h — the silicon area of a configuration, from the area section's per-unit
 * figures (arch_schema.def, docs/energy.md "Area"):
 *
 *   chip = cores x (array_rows x array_cols x area.pe_um2 / 1e6
 *                   + vector_lanes x area.vector_lane_um2 / 1e6
 *                   + sram MiB x area.sram_mm2_per_mib + accumulator MiB x area.acc_mm2_per_mib)
 *        + l2 MiB x area.l2_mm2_per_mib + mesh_x x mesh_y x area.router_mm2
 *        + hbm_channels x area.mem_channel_mm2 + links_per_chip x area.link_mm2 + area.other_mm2
 *   system = chips x chip
 *
 * A pure function of the config: what `config show` prints beside the peak throughput and
 * what the kernel and layer commands report (`area_mm2`), so a sweep can take it as a
 * metric. A config whose area keys are all 0 models no area (modelled false). mm², doubles.
 */
#ifndef NPUSIM_ARCH_AREA_H
#define NPUSIM_ARCH_AREA_H

#include <stdbool.h>

#include "arch.h"

typedef enum arch_area_part {
    ARCH_AREA_PE,     /* the systolic arrays */
    ARCH_AREA_VECTOR, /* the vector units */
    ARCH_AREA_SRAM,   /* the scratchpads */
    ARCH_AREA_ACC,    /* the accumulator SRAMs */
    ARCH_AREA_L2,     /* the L2 or global buffer */
    ARCH_AREA_NOC,    /* the mesh's routers */
    ARCH_AREA_MEM,    /* the off-chip memory channels' controllers and PHYs */
    ARCH_AREA_LINK,   /* the chip-to-chip link ports */
    ARCH_AREA_OTHER,  /* the rest of the chip (area.other_mm2) */
    ARCH_AREA_PART_COUNT
} arch_area_part;

/* "pe", "vector", "sram", "acc", "l2", "noc", "mem", "link", "other" (JSON keys). */
extern const char *const arch_area_part_names[ARCH_AREA_PART_COUNT];

typedef struct arch_area_figures {
    bool modelled;                            /* some area key is not 0 */
    double part_mm2[ARCH_AREA_PART_COUNT];    /* one chip's, per part */
    double chip_mm2;                          /* their sum */
    double system_mm2;                        /* system.chips x chip_mm2 */
} arch_area_figures;

/* The area of cfg's chip and system (never fails). */
void arch_area_of(const arch_config *cfg, arch_area_figures *out);

#endif
