/* kc_phase.h — a kernel made of phases (internal to compiler/): another kernel's schedule run
 * inside the kernel being compiled, on the same placement — the conv2d gradients convert the
 * framework's NCHW operands to their channels-last layout with permute's schedule, run, and
 * convert the result back (kc_convgrad.c).
 *
 *   kc_phase_run(x, &sub);   // sub's compile function, its allocations the kernel's
 *   kc_phase_end(x);         // everything the kernel took given back (into quarantine) and a
 *                            // barrier on every core: the next phase sees the HBM results
 *                            // of this one, whichever core wrote them
 *
 * Both record failures as the emitter's sticky error (kc_status) and return it. The kernel
 * must hold nothing it still needs when it ends a phase. */
#ifndef NPUSIM_KC_PHASE_H
#define NPUSIM_KC_PHASE_H

#include "kernel.h"

/* Emits sub (its op's kernel; placed where x's kernel is) inside the kernel x compiles. */
np_status kc_phase_run(kc_ctx *x, const kc_kernel *sub);

/* Ends a phase: the kernel's resources on its cores released, a barrier on every core; the
 * current core is the placement's first again. */
np_status kc_phase_end(kc_ctx *x);

/* Ends a phase whose HBM results the next phase does not read: the resources released as
 * kc_phase_end does, with a fence on each core of the placement instead of the barrier, so
 * each core goes on to the next phase as soon as its own part is done. */
np_status kc_phase_end_local(kc_ctx *x);

#endif
