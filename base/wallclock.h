/* wallclock.h — the host's monotonic wall clock, for progress lines and the host-time figures
 * of reports and benchmarks (never for simulated time, which is the event queue's). */
#ifndef NPUSIM_BASE_WALLCLOCK_H
#define NPUSIM_BASE_WALLCLOCK_H

/* Seconds since an arbitrary fixed point (CLOCK_MONOTONIC): differences are elapsed time. */
double np_wall_s(void);

#endif
