/* energy.h — energy and power from the action counts the simulation already keeps.
 *
 * No second model: the core model counts what each instruction does (core_report: mxu.mm
 * multiply-accumulates by dtype, vpu.* element operations, scratchpad, accumulator, L2 and
 * HBM bytes, flits through the mesh's routers), the network counts the bytes each
 * chip-to-chip link carries, and this file multiplies each count by its energy from the
 * architecture's energy section (arch_schema.def, docs/energy.md):
 *
 *   E_dynamic = sum over dtypes d of MACs_d x (energy.mac_<d>_pj + energy.operand_pj_per_mac)
 *             + vector element operations x energy.vector_op_pj
 *             + scratchpad bytes (read + written) x energy.sram_pj_per_byte
 *             + accumulator bytes (read + written) x energy.acc_pj_per_byte
 *             + L2 bytes moved x energy.l2_pj_per_byte
 *             + 8 x HBM bytes (read + written) x energy.hbm_pj_per_bit
 *             + mesh flit-hops x energy.noc_pj_per_flit_hop
 *             + 8 x link bytes (summed over every link each crossed) x energy.link_pj_per_bit
 *   E_static  = energy.static_w x time x chips
 *
 * Energy keys change no time; a config whose energy keys are all 0 models no energy
 * (energy_modelled false) and the commands print none. Units: joules and watts in doubles;
 * counts are exact integers.
 *
 *   energy_counts c;
 *   energy_counts_of_report(report, &c);                  // one kernel's run on the core model
 *   energy_figures f;
 *   energy_figures_of(&cfg, &c, 1, report->total_ps, flops, &f);
 *   printf("%.3f J, %.1f W\n", f.total_j, f.avg_w);
 */
#ifndef NPUSIM_ENERGY_H
#define NPUSIM_ENERGY_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "arch.h"
#include "core.h"
#include "err.h"
#include "isa.h"
#include "net.h"

/* Where energy goes, one part per kind of action (and the chips' static power). */
typedef enum energy_part {
    ENERGY_PART_MAC,    /* the systolic arrays' multiply-accumulates, operand delivery included */
    ENERGY_PART_VECTOR, /* the vector units' element operations */
    ENERGY_PART_SRAM,   /* the scratchpads */
    ENERGY_PART_ACC,    /* the accumulator SRAMs */
    ENERGY_PART_L2,     /* the L2 or global buffer */
    ENERGY_PART_HBM,    /* the off-chip memory */
    ENERGY_PART_NOC,    /* the on-chip mesh */
    ENERGY_PART_LINK,   /* the chip-to-chip links */
    ENERGY_PART_STATIC, /* static power over the time */
    ENERGY_PART_COUNT
} energy_part;

/* "mac", "vector", "sram", "acc", "l2", "hbm", "noc", "link", "static" (JSON keys). */
extern const char *const energy_part_names[ENERGY_PART_COUNT];

/* The actions of some work (one kernel, one chip's step, a whole run). */
typedef struct energy_counts {
    uint64_t macs[ISA_DTYPE_COUNT]; /* by the mxu.mm's input dtype */
    uint64_t vector_ops;            /* element operations */
    uint64_t sram_bytes, acc_bytes; /* read + written */
    uint64_t l2_bytes;              /* moved by the L2 (whole sectors or bursts) */
    uint64_t hbm_bytes;             /* read + written at the off-chip memory */
    uint64_t noc_flit_hops;         /* flits through routers (core_noc_flit_hops) */
    uint64_t link_bytes;            /* bytes x links crossed, chip to chip */
} energy_counts;

/* Energy and power of some work over a time. */
typedef struct energy_figures {
    bool modelled;                        /* some energy key of the config is not 0 */
    double part_j[ENERGY_PART_COUNT];     /* joules per part */
    double dynamic_j, static_j, total_j;  /* dynamic: every part but static */
    double time_s;
    double avg_w;                         /* total_j / time_s (0 without time) */
    double dynamic_w;                     /* dynamic_j / time_s */
    double tflops_per_w;                  /* flops / time_s / avg_w / 1e12 (0 without power) */
} energy_figures;

/* True when some key of cfg's energy section is not 0. */
bool energy_modelled(const arch_config *cfg);

/* The counts of a core-model run (every chip of the report): its MACs, vector operations,
 * scratchpad and accumulator bytes, L2 bytes moved, HBM bytes and mesh flit-hops; link_bytes
 * 0 (the core model counts the bytes sent between chips, not the links they crossed). */
void energy_counts_of_report(const core_report *r, energy_counts *out);

/* The bytes every link of n has carried so far, summed over links (a message over h links
 * counts h times), as link_bytes; every other count 0. */
void energy_counts_of_net(const net *n, energy_counts *out);

/* a += times x b, count by count. */
void energy_counts_add(energy_counts *a, const energy_counts *b, uint64_t times);

/* The dynamic energy of c in joules; when part_j is not NULL, each part's joules into
 * part_j[0 .. ENERGY_PART_COUNT) (static 0). */
double energy_dynamic_j(const arch_config *cfg, const energy_counts *c, double *part_j);

/* The figures of counts c done by `chips` chips in time_ps (static power over that time on
 * each chip) at `flops` floating-point operations. */
void energy_figures_of(const arch_config *cfg, const energy_counts *c, uint32_t chips,
                       uint64_t time_ps, double flops, energy_figures *out);

/* ---- The power cap (chip.power_cap_w) and its DVFS governor ---------------------------------
 *
 * A kernel at the nominal core clock f0 draws P0 = E_dyn / t0 + static power. Above the cap the
 * governor lowers the core clock until the kernel's power is at or under it, as a GPU's power
 * management does. How power falls with the clock is a physical choice, and this one is
 * stated: the energy of each action stays what it is (P_dyn = C V^2 f at a fixed voltage V, so
 * at clock f the kernel's dynamic power is E_dyn / t(f)); the clock's effect on the time t(f)
 * is simulated, never assumed, so a memory-bound kernel, whose time barely grows, loses little.
 * (Scaling the voltage with the clock would make power fall faster, as f^3; no public V/f curve
 * of the presets' chips is at hand, so the model stays at the conservative f^1.)
 *
 * The search: the first guess scales f0 by (cap - static) / (P0 - static), exact for a kernel
 * whose time is all core cycles; then bisection between the fastest clock known to be under
 * the cap and the slowest known over it, to within 0.5 % of f0 or 1 % of the cap. */

typedef struct energy_throttle {
    bool capped;             /* the kernel's power at the nominal clock exceeded the cap */
    double nominal_ghz, ghz; /* core.clock_ghz, and the clock it runs at */
    uint64_t nominal_ps, ps; /* its time at each */
    double nominal_w, w;     /* its average power at each (dynamic + static, all chips) */
    unsigned sims;           /* simulations at other clocks */
} energy_throttle;

/* Simulates the work at core clock ghz: its time in ps and its actions. The governor's last
 * call is always at the clock it chooses, so the caller may keep what that call produced. */
typedef np_status (*energy_sim_fn)(void *ctx, double ghz, uint64_t *ps, energy_counts *acts,
                                   np_err *err);

/* The clock a kernel of time ps and actions acts at cfg's core.clock_ghz runs at under
 * chip.power_cap_w on `chips` chips, simulating it at other clocks with sim. No cap, or power
 * under it: out->capped false, no simulation. NP_ERR_INCONSISTENT when the static power alone
 * reaches the cap (no clock can keep under it); sim's errors as they come. */
np_status energy_govern(const arch_config *cfg, uint32_t chips, uint64_t ps,
                        const energy_counts *acts, energy_sim_fn sim, void *ctx,
                        energy_throttle *out, np_err *err);

/* For people, each line after indent: the total energy, average power (dynamic and static)
 * and TFLOP/s per W, then the parts that are not 0 with their share. */
void energy_print(const energy_figures *f, const char *indent, FILE *out);

/* {"total_j", "dynamic_j", "static_j", "avg_w", "dynamic_w", "tflops_per_w", "parts_j":
 * {"mac", ...}}; NULL when out of memory. */
json_t *energy_figures_json(const energy_figures *f);

#endif
