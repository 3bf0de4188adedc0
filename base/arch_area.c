/* arch_area.c — a configuration's silicon area from its per-unit figures (arch_area.h). */
#include "arch_area.h"

#include <string.h>

const char *const arch_area_part_names[ARCH_AREA_PART_COUNT] = {
    [ARCH_AREA_PE] = "pe",   [ARCH_AREA_VECTOR] = "vector", [ARCH_AREA_SRAM] = "sram",
    [ARCH_AREA_ACC] = "acc", [ARCH_AREA_L2] = "l2",         [ARCH_AREA_NOC] = "noc",
    [ARCH_AREA_MEM] = "mem", [ARCH_AREA_LINK] = "link",     [ARCH_AREA_OTHER] = "other",
};

void arch_area_of(const arch_config *cfg, arch_area_figures *out)
{
    memset(out, 0, sizeof *out);
    const arch_area *a = &cfg->area;
    const double mib = 1024.0 * 1024.0, cores = (double)cfg->chip.cores;
    out->modelled = a->pe_um2 > 0 || a->vector_lane_um2 > 0 || a->sram_mm2_per_mib > 0 ||
                    a->acc_mm2_per_mib > 0 || a->l2_mm2_per_mib > 0 || a->router_mm2 > 0 ||
                    a->mem_channel_mm2 > 0 || a->link_mm2 > 0 || a->other_mm2 > 0;
    double *p = out->part_mm2;
    p[ARCH_AREA_PE] = cores * (double)cfg->core.array_rows * (double)cfg->core.array_cols *
                      a->pe_um2 / 1e6;
    p[ARCH_AREA_VECTOR] = cores * (double)cfg->core.vector_lanes * a->vector_lane_um2 / 1e6;
    p[ARCH_AREA_SRAM] = cores * (double)cfg->core.sram_bytes / mib * a->sram_mm2_per_mib;
    p[ARCH_AREA_ACC] = cores * (double)cfg->core.acc_bytes / mib * a->acc_mm2_per_mib;
    p[ARCH_AREA_L2] = (double)cfg->chip.l2_bytes / mib * a->l2_mm2_per_mib;
    p[ARCH_AREA_NOC] = (double)cfg->chip.mesh_x * (double)cfg->chip.mesh_y * a->router_mm2;
    p[ARCH_AREA_MEM] = (double)cfg->chip.hbm_channels * a->mem_channel_mm2;
    p[ARCH_AREA_LINK] = (double)cfg->system.links_per_chip * a->link_mm2;
    p[ARCH_AREA_OTHER] = a->other_mm2;
    for (int i = 0; i < ARCH_AREA_PART_COUNT; i++)
        out->chip_mm2 += p[i];
    out->system_mm2 = (double)cfg->system.chips * out->chip_mm2;
}
