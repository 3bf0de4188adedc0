/* wallclock.c — the host's monotonic wall clock (see wallclock.h). */
#include "wallclock.h"

#include <time.h>

double np_wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
