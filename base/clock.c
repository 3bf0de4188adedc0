/* clock.c — clock domains (see clock.h). Exact integer arithmetic with 128-bit
 * intermediates; a fast path when the period is a whole number of ps. */
#include "clock.h"

#include <math.h>

typedef unsigned __int128 clk_u128;

np_status clk_init_hz(clk_domain *d, uint64_t freq_hz, np_err *err)
{
    if (freq_hz == 0 || freq_hz > CLK_FREQ_HZ_MAX)
        return np_err_set(err, NP_ERR_RANGE,
                          "clock frequency %llu Hz is outside 1 Hz .. 1000 GHz",
                          (unsigned long long)freq_hz);
    d->freq_hz = freq_hz;
    d->period_ps = CLK_PS_PER_S % freq_hz == 0 ? CLK_PS_PER_S / freq_hz : 0;
    return NP_OK;
}

np_status clk_init_ghz(clk_domain *d, double ghz, np_err *err)
{
    double hz = ghz * 1e9;
    if (!isfinite(ghz) || !(hz >= 0.5) || hz >= (double)CLK_FREQ_HZ_MAX + 0.5)
        return np_err_set(err, NP_ERR_RANGE, "clock frequency %g GHz is outside 1 Hz .. 1000 GHz",
                          ghz);
    return clk_init_hz(d, (uint64_t)llround(hz), err);
}

static uint64_t clk_sat(clk_u128 x)
{
    return x > UINT64_MAX ? UINT64_MAX : (uint64_t)x;
}

uint64_t clk_cycles_to_ps(const clk_domain *d, uint64_t cycles)
{
    if (d->period_ps)
        return clk_sat((clk_u128)cycles * d->period_ps);
    clk_u128 num = (clk_u128)cycles * CLK_PS_PER_S;
    return clk_sat((num + d->freq_hz - 1) / d->freq_hz);
}

uint64_t clk_ps_to_cycles(const clk_domain *d, uint64_t t_ps)
{
    if (d->period_ps)
        return t_ps / d->period_ps;
    return (uint64_t)((clk_u128)t_ps * d->freq_hz / CLK_PS_PER_S);
}

/* Edges are rounded up: edge(c) >= t  <=>  c * 10^12 / f > t - 1, so the first such cycle is
 * one past the last edge at or before t - 1. */
uint64_t clk_cycle_at_or_after(const clk_domain *d, uint64_t t_ps)
{
    return t_ps == 0 ? 0 : clk_ps_to_cycles(d, t_ps - 1) + 1;
}

uint64_t clk_edge_at_or_after(const clk_domain *d, uint64_t t_ps)
{
    return clk_cycles_to_ps(d, clk_cycle_at_or_after(d, t_ps));
}
