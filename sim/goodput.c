/* goodput.c — checkpoint/restart goodput and the best checkpoint interval (see goodput.h). */
#include "goodput.h"

#include <math.h>

double goodput_at(const goodput_in *in, double tau)
{
    if (!(tau > 0))
        return 0;
    double M = in->mtbf_s / in->chips;
    /* M e^(R/M) (e^((tau+delta)/M) - 1), with expm1 for the small exponents of rare failures */
    double seg = M * exp(in->restart_s / M) * expm1((tau + in->ckpt_write_s) / M);
    return seg > 0 && isfinite(seg) ? tau / seg : 0;
}

np_status goodput_estimate(const goodput_in *in, goodput_out *out, np_err *err)
{
    if (!isfinite(in->mtbf_s) || in->mtbf_s <= 0)
        return np_err_set(err, NP_ERR_RANGE, "the MTBF must be a number of seconds > 0");
    if (!isfinite(in->chips) || in->chips < 1)
        return np_err_set(err, NP_ERR_RANGE, "the job needs at least one chip");
    if (!isfinite(in->ckpt_write_s) || in->ckpt_write_s < 0)
        return np_err_set(err, NP_ERR_RANGE, "the checkpoint's write time must be >= 0 s");
    if (!isfinite(in->restart_s) || in->restart_s < 0)
        return np_err_set(err, NP_ERR_RANGE, "the restart time must be >= 0 s");
    if (!isfinite(in->interval_s) || in->interval_s < 0)
        return np_err_set(err, NP_ERR_RANGE, "the checkpoint interval must be >= 0 s");
    double M = in->mtbf_s / in->chips, d = in->ckpt_write_s;
    out->job_mtbf_s = M;
    out->failures_per_day = 86400.0 / M;
    out->young_interval_s = sqrt(2 * d * M);
    out->daly_interval_s = d < 2 * M ? sqrt(2 * d * M) * (1 + sqrt(d / (2 * M)) / 3 +
                                                          d / (2 * M) / 9) - d
                                     : M;
    /* Golden-section search on log tau over [M 1e-9, M 1e3]: tau / E(tau) rises, then falls.
     * With delta = 0 it rises as tau falls: the best interval is the smallest tried. */
    double lo = log(M * 1e-9), hi = log(M * 1e3), g = (sqrt(5.0) - 1) / 2;
    double a = hi - g * (hi - lo), b = lo + g * (hi - lo);
    double fa = goodput_at(in, exp(a)), fb = goodput_at(in, exp(b));
    for (int i = 0; i < 200 && hi - lo > 1e-12; i++) {
        if (fa >= fb) {
            hi = b;
            b = a;
            fb = fa;
            a = hi - g * (hi - lo);
            fa = goodput_at(in, exp(a));
        } else {
            lo = a;
            a = b;
            fa = fb;
            b = lo + g * (hi - lo);
            fb = goodput_at(in, exp(b));
        }
    }
    out->best_interval_s = exp((lo + hi) / 2);
    out->best_goodput = goodput_at(in, out->best_interval_s);
    out->interval_goodput = in->interval_s > 0 ? goodput_at(in, in->interval_s) : 0;
    return NP_OK;
}
