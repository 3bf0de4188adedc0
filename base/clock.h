/* clock.h — clock domains: converting between a component's cycles and global picoseconds.
 *
 * A domain stores its frequency exactly, as an integer number of Hz. Cycle c's rising edge is
 * ideally at c * 10^12 / f ps; since global time is whole picoseconds, the edge is placed at
 * that value rounded up (the first whole ps at or after the ideal edge). Every conversion is
 * computed from the cycle count or the time directly (128-bit intermediates), never by adding
 * up periods, so nothing drifts however long the run: at 0.9 GHz, cycle 900,000,000 is at
 * exactly 10^12 ps. The conversions agree with each other:
 *
 *   clk_ps_to_cycles(d, clk_cycles_to_ps(d, c)) == c
 *   clk_cycles_to_ps(d, clk_ps_to_cycles(d, t)) <= t < clk_cycles_to_ps(d, that + 1)
 *   clk_edge_at_or_after(d, t) == clk_cycles_to_ps(d, smallest c with edge >= t)
 *
 *   clk_domain core;
 *   if (clk_init_ghz(&core, 1.6, &err) != NP_OK) return err.status;
 *   uint64_t t = clk_cycles_to_ps(&core, 4);                  // 2500 ps
 *   uint64_t next = clk_edge_at_or_after(&core, t + 1);       // 3125 ps
 */
#ifndef NPUSIM_CLOCK_H
#define NPUSIM_CLOCK_H

#include <stdint.h>

#include "err.h"

#define CLK_PS_PER_S 1000000000000ULL
#define CLK_FREQ_HZ_MAX CLK_PS_PER_S /* a period of at least 1 ps */

typedef struct clk_domain {
    uint64_t freq_hz;   /* exact frequency */
    uint64_t period_ps; /* 10^12 / freq_hz when that divides exactly, else 0 */
} clk_domain;

/* Sets up *d at freq_hz. NP_ERR_RANGE (d untouched) unless 1 <= freq_hz <= 10^12. */
np_status clk_init_hz(clk_domain *d, uint64_t freq_hz, np_err *err);

/* Sets up *d at ghz GHz, rounded to the nearest whole Hz (so 1.41 becomes exactly
 * 1,410,000,000 Hz, and any value a config writes with up to 9 decimals is exact).
 * NP_ERR_RANGE (d untouched) when ghz is not finite or does not round to 1 Hz .. 1000 GHz. */
np_status clk_init_ghz(clk_domain *d, double ghz, np_err *err);

/* Time of cycle `cycles`'s edge: ceil(cycles * 10^12 / f) ps; UINT64_MAX when that is past
 * 2^64 - 1 ps (about 213 days). */
uint64_t clk_cycles_to_ps(const clk_domain *d, uint64_t cycles);

/* Cycles completed at time t_ps: the number of the last edge at or before t_ps, that is
 * floor(t_ps * f / 10^12). */
uint64_t clk_ps_to_cycles(const clk_domain *d, uint64_t t_ps);

/* The first edge at or after t_ps, in ps (t_ps itself when it is an edge); UINT64_MAX when
 * that edge is past 2^64 - 1 ps. */
uint64_t clk_edge_at_or_after(const clk_domain *d, uint64_t t_ps);

/* The number of the first cycle whose edge is at or after t_ps: the smallest c with
 * clk_cycles_to_ps(d, c) >= t_ps (one past the last edge at or before t_ps - 1). */
uint64_t clk_cycle_at_or_after(const clk_domain *d, uint64_t t_ps);

#endif
