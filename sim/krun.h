/* krun.h — one kernel, compiled through the kernel ABI (compiler/kernel.h) and run on the
 * core model (hw-model/core.h), with its values checked against the framework's reference
 * executor. `npusim kernel` and the kernel tests use it; so can any kernel writer:
 *
 *   nn_graph *g = nn_graph_new(1);                          // the op in the framework ...
 *   nn_tensor *a = nn_input(g, "a", NN_BF16, 2, (int64_t[]){37, 45}), *b = ..., *y;
 *   y = nn_matmul(g, a, b);
 *   nn_tensor_randn(a, 1, 1.0); nn_tensor_randn(b, 2, 1.0);
 *   nn_graph_compute(g, &err);                              // ... and its reference values
 *   kc_kernel k = {.op = NN_OP_MATMUL, .n_in = 2, .n_out = 1};
 *   kc_tensor_of(&k.in[0], 0, a); kc_tensor_of(&k.in[1], 0, b); kc_tensor_of(&k.out[0], 0, y);
 *   krun_io io = {.in = {a, b}, .out = {got}};              // got: a tensor like y
 *   krun_result r;
 *   krun_kernel(&cfg, &k, &io, &(krun_opts){.functional = true}, &r, &err);
 *   krun_diff d = krun_compare(got, y, 1e-2, 1e-2);         // d.bad == 0: every element close
 *
 * krun places every operand in a fresh HBM buffer of its own (the addresses in k are
 * replaced; shapes, strides, dtypes, attributes, epilogue and placement are kept), so a
 * strided or transposed layout is laid out exactly as its strides say.
 */
#ifndef NPUSIM_KRUN_H
#define NPUSIM_KRUN_H

#include <stdbool.h>
#include <stdint.h>

#include "arch.h"
#include "core.h"
#include "arch_area.h"
#include "energy.h"
#include "err.h"
#include "kernel.h"
#include "nn.h"

/* Values for a functional run, as framework tensors (row-major fp32 data, logical shapes
 * equal to the operands'): inputs in[i] for k->in[i], epi[i] for k->epi[i].arg (NULL where a
 * step has none), and outputs out[i] that receive k->out[i] (their data is allocated). */
typedef struct krun_io {
    nn_tensor *in[KC_MAX_IN];
    nn_tensor *epi[KC_MAX_EPI];
    nn_tensor *out[KC_MAX_OUT];
} krun_io;

typedef struct krun_opts {
    bool functional;       /* move values (io required); else timing only (io may be NULL) */
    uint32_t prog_cores;   /* cores of the program (0: the placement's last core + 1) */
    core_trace_fn trace;   /* (optional) as core_sim_opts */
    void *trace_ctx;
    const struct kc_tile_cache *tiles; /* (optional) tuned tilings for kc_compile */
} krun_opts;

typedef struct krun_result {
    kc_result kernel;      /* what kc_compile expected */
    core_report *report;   /* the run (free with krun_result_free) */
    isa_program *prog;     /* the program that ran (freed by krun_result_free) */
} krun_result;

/* Compiles *k into a program of its own (operands in fresh .bss buffers, then halt) and runs
 * it on cfg's chip. Errors from kc_compile, core_sim_run_opts, NP_ERR_INCONSISTENT (io
 * tensors that do not match the operands), NP_ERR_NOMEM. On failure *r holds nothing. */
np_status krun_kernel(const arch_config *cfg, const kc_kernel *k, const krun_io *io,
                      const krun_opts *opts, krun_result *r, np_err *err);
void krun_result_free(krun_result *r);

/* How far got is from want, element by element: an element is bad when
 * |got - want| > atol + rtol x |want|, when one is NaN and the other not, or when either is
 * infinite and they differ (equal infinities are no difference). */
typedef struct krun_diff {
    int64_t n, bad;
    int64_t worst;        /* index of the largest |got - want| */
    double max_abs, max_rel;
} krun_diff;

krun_diff krun_compare(const nn_tensor *got, const nn_tensor *want, double rtol, double atol);

/* krun_kernel with values made here: every input (and epilogue operand) seeded normal(0, 1)
 * values (seed + its index) rounded to its dtype (int8: normal(0, 16) rounded, clamped to
 * +-127; int32: normal(0, 1000) rounded; an input of indices, whose row gives index_bound:
 * those integers folded into [0, bound)), the reference from the kernel's table row
 * (reference) plus its epilogue as framework ops (every kc_epi step: the fused-chain ones
 * too), then each output compared within the bound its row documents (kc_kernel_def's
 * tolerance; by default exact for integer outputs, else one ulp of the output type — bf16
 * 2^-7, fp16 2^-10, fp32 2^-20 — of each element plus 1/8 of that of the output's largest
 * finite |reference|). NP_ERR_UNKNOWN_KEY when the op's row has no reference. */
typedef struct krun_check_out {
    int64_t n, bad;
    double max_abs;       /* the largest |got - want| (INFINITY: a NaN or infinity differs) */
    double rtol, atol;    /* the bound it was checked against: rtol x |reference| + atol */
} krun_check_out;

typedef struct krun_check {
    int64_t n, bad;       /* over every output */
    double max_abs;
    int n_out;
    krun_check_out out[KC_MAX_OUT];
} krun_check;

np_status krun_kernel_check(const arch_config *cfg, const kc_kernel *k, uint64_t seed,
                            const krun_opts *opts, krun_result *r, krun_check *c, np_err *err);

/* The figures of a kernel's run for people and programs (`npusim kernel`; docs/compiler.md
 * defines each). The roofline: compute time = flops / the peak of the placed cores (the
 * matrix unit's for the input dtype when the kernel uses it, else the vector units', two
 * FLOPs per lane-op: a multiply-add, as kc_result counts FLOPs), memory time = hbm_bytes_min / the HBM bandwidth; the bound is
 * the larger, roofline_pct = 100 x that time / the run's time. */
typedef struct krun_figures {
    uint64_t cycles;
    double time_us;
    uint64_t flops;
    double tflops;
    uint64_t hbm_bytes, hbm_bytes_min; /* moved (read + written), and the minimum */
    double gbps;                       /* hbm_bytes / time */
    double peak_tflops, peak_gbps;
    bool compute_bound;
    double roofline_pct;
    double mxu_util_pct;               /* mxu_flops / time over the matrix units' peak */
    uint32_t cores;                    /* placed */
    /* with an L2 (chip.l2_bytes > 0; hbm_bytes is then what reached the HBM): the bytes the
     * cores moved through it (what the HBM would move without it), their bandwidth and the
     * L2's peak, the sectors read that hit, and the dirty bytes it still holds at the end */
    bool l2;
    uint64_t l2_bytes, l2_dirty_bytes;
    double l2_gbps, l2_peak_gbps, l2_hit_pct;
    /* energy and power (hw-model/energy.h) of the run's action counts, the chip's static
     * power over its time; energy.modelled false when cfg's energy keys are all 0 */
    energy_counts actions;
    energy_figures energy;
    /* the area of one chip (base/arch_area.h; area.modelled false when cfg's area keys are all
     * 0) and the kernel's achieved TFLOP/s over it */
    arch_area_figures area;
    double tflops_per_mm2;
} krun_figures;

void krun_figures_of(const arch_config *cfg, const kc_kernel *k, const krun_result *r,
                     krun_figures *f);

/* The power cap (chip.power_cap_w; hw-model/energy.h energy_govern): r holds k's run at cfg's
 * core clock (krun_kernel); when its power there is over the cap, k is simulated again in timing
 * mode (opts' tilings kept, no trace) at the clocks the governor tries and *r is replaced by the
 * run at the clock it chooses. *th says what happened (th->capped false: r untouched). Errors of
 * krun_kernel and energy_govern; *r is then the nominal run still, or freed when it failed
 * mid-way (r->report NULL). */
np_status krun_power_cap(const arch_config *cfg, const kc_kernel *k, const krun_opts *opts,
                         krun_result *r, energy_throttle *th, np_err *err);

/* The tuner: compiles k (which must not give its tiling attributes) to get the cost model's
 * best tilings (kc_result.cands), simulates up to `top` of them in timing mode, and returns
 * the fastest (ties: the cost model's order). The cost model's own choice is the first, so
 * the result is never slower than it. */
typedef struct krun_tuned {
    kc_tiling best;                 /* the fastest tiling */
    unsigned tried;                 /* candidates simulated */
    uint64_t cycles[KC_MAX_CANDS];  /* simulated cycles of each, cost model order */
    uint64_t est[KC_MAX_CANDS];     /* the cost model's estimate of each */
    unsigned best_index;            /* which of them is best */
} krun_tuned;

np_status krun_tune(const arch_config *cfg, const kc_kernel *k, unsigned top,
                    const krun_opts *opts, krun_tuned *out, np_err *err);

/* k with the tiling's attributes added (replacing any of the same name). */
void krun_with_tiling(kc_kernel *k, const kc_tiling *t);

#endif
