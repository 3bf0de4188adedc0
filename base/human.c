/* human.c — figures for people (see human.h). */
#include "human.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

char *np_human_count(uint64_t v, char *buf, size_t n)
{
    char digits[24];
    int nd = snprintf(digits, sizeof digits, "%" PRIu64, v);
    char out[32];
    size_t w = 0;
    for (int i = 0; i < nd; i++) {
        if (i && (nd - i) % 3 == 0)
            out[w++] = ',';
        out[w++] = digits[i];
    }
    out[w] = '\0';
    snprintf(buf, n, "%s", out);
    return buf;
}

char *np_human_int(int64_t v, char *buf, size_t n)
{
    char c[32];
    uint64_t m = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    np_human_count(m, c, sizeof c);
    snprintf(buf, n, "%s%s", v < 0 ? "-" : "", c);
    return buf;
}

/* x (>= 1, < 1000 after scaling) with three significant digits. */
static void human_sig3(double x, char *buf, size_t n, const char *unit)
{
    if (x >= 99.95)
        snprintf(buf, n, "%.0f %s", x, unit);
    else if (x >= 9.995)
        snprintf(buf, n, "%.1f %s", x, unit);
    else
        snprintf(buf, n, "%.2f %s", x, unit);
}

char *np_human_bytes(uint64_t bytes, char *buf, size_t n)
{
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (bytes < 1024) {
        snprintf(buf, n, "%" PRIu64 " B", bytes);
        return buf;
    }
    double x = (double)bytes / 1024.0;
    int u = 0;
    while (x >= 1023.995 && u < 5) /* 1023.996 KiB would print as "1024 KiB" */
        x /= 1024.0, u++;
    human_sig3(x, buf, n, units[u]);
    return buf;
}

char *np_human_ps(uint64_t ps, char *buf, size_t n)
{
    static const char *const units[] = {"ns", "\xc2\xb5s", "ms", "s"};
    if (ps < 1000) {
        snprintf(buf, n, "%" PRIu64 " ps", ps);
        return buf;
    }
    double x = (double)ps / 1000.0;
    int u = 0;
    while (x >= 999.5 && u < 3)
        x /= 1000.0, u++;
    if (u == 3 && x >= 999.5) {
        char c[32];
        snprintf(buf, n, "%s s", np_human_count((uint64_t)llround(x), c, sizeof c));
        return buf;
    }
    human_sig3(x, buf, n, units[u]);
    return buf;
}

char *np_human_s(double s, char *buf, size_t n)
{
    if (!(s > 0)) {
        snprintf(buf, n, "0 s");
        return buf;
    }
    if (s < 999.5)
        return np_human_ps((uint64_t)llround(s * 1e12), buf, n);
    if (s < 120 * 60.0)
        human_sig3(s / 60, buf, n, "min");
    else if (s < 48 * 3600.0)
        human_sig3(s / 3600, buf, n, "h");
    else if (s / 86400 < 999.5)
        human_sig3(s / 86400, buf, n, "days");
    else {
        char c[32];
        snprintf(buf, n, "%s days", np_human_count(s / 86400 < 1e18 ? (uint64_t)llround(s / 86400)
                                                                    : UINT64_MAX, c, sizeof c));
    }
    return buf;
}

char *np_human_si(double v, const char *unit, char *buf, size_t n)
{
    static const char *const prefix[] = {"", "k", "M", "G", "T", "P", "E", "Z"};
    double m = fabs(v);
    int p = 0;
    while (m >= 999.5 && p < 7)
        m /= 1000.0, p++;
    char u[24];
    snprintf(u, sizeof u, "%s%s", prefix[p], unit);
    if (p == 0 && m == floor(m))
        snprintf(buf, n, "%s%.0f %s", v < 0 ? "-" : "", m, unit);
    else {
        char t[32];
        human_sig3(m, t, sizeof t, u);
        snprintf(buf, n, "%s%s", v < 0 ? "-" : "", t);
    }
    return buf;
}

int np_human_width(const char *s, int width)
{
    int extra = 0;
    for (; *s; s++)
        extra += ((unsigned char)*s & 0xC0) == 0x80; /* a UTF-8 continuation byte */
    return width + extra;
}

char *np_human_j(double j, char *buf, size_t n)
{
    static const char *const unit[] = {"J", "mJ", "µJ", "nJ", "pJ"};
    int u = 0;
    double v = fabs(j);
    while (v > 0 && v < 0.9995 && u < 4)
        v *= 1000.0, u++;
    return np_human_si(j < 0 ? -v : v, unit[u], buf, n);
}
