/* parse.c — checked parsers of outside values (see parse.h). */
#include "parse.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "suggest.h"

np_status np_src_fail(const np_src *src, np_status file_status, size_t offset, np_err *err,
                      const char *fmt, ...)
{
    char msg[NP_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const char *name = src && src->name ? src->name : NULL;
    if (!src || !src->file)
        return name ? np_err_set(err, NP_ERR_USAGE, "%s: %s", name, msg)
                    : np_err_set(err, NP_ERR_USAGE, "%s", msg);
    int col = src->col > 0 ? src->col + (int)(offset < 100000 ? offset : 100000) : 0;
    return name ? np_err_at(err, file_status, src->file, src->line, col, "%s: %s", name, msg)
                : np_err_at(err, file_status, src->file, src->line, col, "%s", msg);
}

/* The text as shown in a message: at most 40 bytes, with "..." when cut. */
static const char *parse_shown(const char *text, char *buf, size_t n)
{
    size_t len = strlen(text);
    if (len + 1 <= n && len <= 40)
        return text;
    snprintf(buf, n, "%.40s...", text);
    return buf;
}

/* Reads decimal digits at *p into *v: 0 when there are none, -1 on overflow (p past them
 * all), else the count. */
static int parse_digits(const char **p, uint64_t *v)
{
    uint64_t x = 0;
    int n = 0;
    bool over = false;
    while (**p >= '0' && **p <= '9') {
        unsigned d = (unsigned)(**p - '0');
        if (x > (UINT64_MAX - d) / 10)
            over = true;
        else
            x = 10 * x + d;
        (*p)++;
        n++;
    }
    *v = x;
    return over ? -1 : n;
}

np_status np_parse_u64(const np_src *src, const char *text, uint64_t lo, uint64_t hi,
                       uint64_t *out, np_err *err)
{
    char sh[64];
    const char *p = text;
    uint64_t v;
    int nd = parse_digits(&p, &v);
    bool full = lo == 0 && hi == UINT64_MAX;
    if (nd == 0 || *p) {
        size_t at = nd == 0 ? 0 : (size_t)(p - text);
        if (full)
            return np_src_fail(src, NP_ERR_SYNTAX, at, err,
                               "expected a non-negative integer, got '%s'",
                               parse_shown(text, sh, sizeof sh));
        return np_src_fail(src, NP_ERR_SYNTAX, at, err,
                           "expected an integer in %" PRIu64 " .. %" PRIu64 ", got '%s'", lo, hi,
                           parse_shown(text, sh, sizeof sh));
    }
    if (nd < 0 || v < lo || v > hi) {
        if (full)
            return np_src_fail(src, NP_ERR_RANGE, 0, err,
                               "'%s' is larger than 2^64 - 1", parse_shown(text, sh, sizeof sh));
        return np_src_fail(src, NP_ERR_RANGE, 0, err,
                           "expected an integer in %" PRIu64 " .. %" PRIu64 ", got '%s'", lo, hi,
                           parse_shown(text, sh, sizeof sh));
    }
    *out = v;
    return NP_OK;
}

np_status np_parse_i64(const np_src *src, const char *text, int64_t lo, int64_t hi,
                       int64_t *out, np_err *err)
{
    char sh[64];
    const char *p = text;
    bool neg = *p == '-';
    if (neg)
        p++;
    uint64_t m;
    int nd = parse_digits(&p, &m);
    if (nd == 0 || *p)
        return np_src_fail(src, NP_ERR_SYNTAX, nd == 0 ? 0 : (size_t)(p - text), err,
                           "expected an integer in %" PRId64 " .. %" PRId64 ", got '%s'", lo, hi,
                           parse_shown(text, sh, sizeof sh));
    bool fits = nd > 0 && (neg ? m <= (uint64_t)INT64_MAX + 1 : m <= (uint64_t)INT64_MAX);
    int64_t v = !fits ? 0 : neg ? (m == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)m)
                                : (int64_t)m;
    if (!fits || v < lo || v > hi)
        return np_src_fail(src, NP_ERR_RANGE, 0, err,
                           "expected an integer in %" PRId64 " .. %" PRId64 ", got '%s'", lo, hi,
                           parse_shown(text, sh, sizeof sh));
    *out = v;
    return NP_OK;
}

/* v in the fewest digits (up to 17) that read back as v: "1e-06", not "9.99...95e-07". */
static const char *parse_real_shown(double v, char *buf, size_t n)
{
    for (int digits = 6; digits <= 17; digits++) {
        snprintf(buf, n, "%.*g", digits, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    return buf;
}

np_status np_parse_f64(const np_src *src, const char *text, double lo, double hi, double *out,
                       np_err *err)
{
    char sh[64], lo_s[32], hi_s[32];
    parse_real_shown(lo, lo_s, sizeof lo_s);
    parse_real_shown(hi, hi_s, sizeof hi_s);
    const char *p = text;
    /* strtod's syntax, less what it takes beyond plain decimals (hex, inf, nan, spaces) */
    if (*p == '+' || *p == '-')
        p++;
    bool digits = false;
    while (*p >= '0' && *p <= '9')
        p++, digits = true;
    if (*p == '.')
        for (p++; *p >= '0' && *p <= '9'; p++)
            digits = true;
    if (digits && (*p == 'e' || *p == 'E')) {
        const char *q = p + 1;
        if (*q == '+' || *q == '-')
            q++;
        if (*q >= '0' && *q <= '9') {
            while (*q >= '0' && *q <= '9')
                q++;
            p = q;
        }
    }
    if (!digits || *p)
        return np_src_fail(src, NP_ERR_SYNTAX, digits ? (size_t)(p - text) : 0, err,
                           "expected a number in %s .. %s, got '%s'", lo_s, hi_s,
                           parse_shown(text, sh, sizeof sh));
    errno = 0;
    double v = strtod(text, NULL);
    if (!isfinite(v) || v < lo || v > hi)
        return np_src_fail(src, NP_ERR_RANGE, 0, err,
                           "expected a number in %s .. %s, got '%s'", lo_s, hi_s,
                           parse_shown(text, sh, sizeof sh));
    *out = v;
    return NP_OK;
}

static const struct {
    const char *name;
    unsigned shift;
} parse_units[] = {
    {"B", 0},    {"K", 10},   {"k", 10},  {"KiB", 10}, {"Ki", 10},  {"M", 20},  {"m", 20},
    {"MiB", 20}, {"Mi", 20},  {"G", 30},  {"g", 30},   {"GiB", 30}, {"Gi", 30}, {"T", 40},
    {"t", 40},   {"TiB", 40}, {"Ti", 40},
};

np_status np_parse_size(const np_src *src, const char *text, uint64_t lo, uint64_t hi,
                        uint64_t *out, np_err *err)
{
    char sh[64];
    const char *p = text;
    uint64_t v;
    int nd = parse_digits(&p, &v);
    if (nd == 0)
        return np_src_fail(src, NP_ERR_SYNTAX, 0, err,
                           "expected a size such as 4096, 64K or 32 MiB, got '%s'",
                           parse_shown(text, sh, sizeof sh));
    const char *u = p;
    if (*u == ' ')
        u++;
    unsigned shift = 0;
    if (*u) {
        size_t i, nu = sizeof parse_units / sizeof parse_units[0];
        for (i = 0; i < nu && strcmp(u, parse_units[i].name) != 0; i++)
            ;
        if (i == nu) {
            bool decimal = (u[0] == 'k' || u[0] == 'K' || u[0] == 'M' || u[0] == 'G' ||
                            u[0] == 'T') && u[1] == 'B' && !u[2];
            if (decimal)
                return np_src_fail(src, NP_ERR_SYNTAX, (size_t)(u - text), err,
                                   "'%s' is ambiguous: write %c or %ciB (binary units)", u,
                                   u[0] == 'k' ? 'K' : u[0], u[0] == 'k' ? 'K' : u[0]);
            return np_src_fail(src, NP_ERR_SYNTAX, (size_t)(u - text), err,
                               "expected a size such as 4096, 64K or 32 MiB, got '%s' (units: "
                               "B, K, KiB, M, MiB, G, GiB, T, TiB)",
                               parse_shown(text, sh, sizeof sh));
        }
        shift = parse_units[i].shift;
    } else if (u != p) {
        return np_src_fail(src, NP_ERR_SYNTAX, (size_t)(p - text), err,
                           "trailing space in '%s'", parse_shown(text, sh, sizeof sh));
    }
    bool over = nd < 0 || (shift && v > (UINT64_MAX >> shift));
    uint64_t bytes = over ? 0 : v << shift;
    if (over || bytes < lo || bytes > hi) {
        char a[32], b[32];
        snprintf(a, sizeof a, "%" PRIu64, lo);
        snprintf(b, sizeof b, "%" PRIu64, hi);
        return np_src_fail(src, NP_ERR_RANGE, 0, err,
                           "%s is outside %s .. %s bytes", parse_shown(text, sh, sizeof sh), a,
                           hi == UINT64_MAX ? "2^64 - 1" : b);
    }
    *out = bytes;
    return NP_OK;
}

np_status np_parse_dims(const np_src *src, const char *text, int n_min, int n_max,
                        uint64_t lo, uint64_t hi, uint64_t max_product, uint64_t *out, int *n,
                        np_err *err)
{
    char sh[64];
    uint64_t d[8];
    int k = 0;
    const char *p = text;
    if (n_max > 8)
        n_max = 8;
    static const char *const forms[4][4] = {{"N", "N", "A[xB]", "A[xB[xC]]"},
                                            {"N", "N", "A[xB]", "A[xB[xC]]"},
                                            {"AxB", "AxB", "AxB", "AxB[xC]"},
                                            {"AxBxC", "AxBxC", "AxBxC", "AxBxC"}};
    bool known = n_max <= 3 && n_min >= 0 && n_min <= 3;
    const char *form = known ? forms[n_min][n_max] : "AxBx...";
    for (;;) {
        const char *start = p;
        uint64_t v;
        int nd = parse_digits(&p, &v);
        if (nd == 0)
            return np_src_fail(src, NP_ERR_SYNTAX, (size_t)(p - text), err,
                               "expected %s, got '%s'", form, parse_shown(text, sh, sizeof sh));
        if (nd < 0 || v < lo || v > hi)
            return np_src_fail(src, NP_ERR_RANGE, (size_t)(start - text), err,
                               "each dimension must be in %" PRIu64 " .. %" PRIu64
                               ", got '%.*s' in '%s'", lo, hi, (int)(p - start), start,
                               parse_shown(text, sh, sizeof sh));
        if (k == n_max)
            return np_src_fail(src, NP_ERR_SYNTAX, (size_t)(start - text), err,
                               "expected %s (at most %d dimensions), got '%s'", form, n_max,
                               parse_shown(text, sh, sizeof sh));
        d[k++] = v;
        if (*p == 'x' || *p == 'X') {
            p++;
            continue;
        }
        if (*p)
            return np_src_fail(src, NP_ERR_SYNTAX, (size_t)(p - text), err,
                               "expected %s, got '%s' (junk after the dimensions)", form,
                               parse_shown(text, sh, sizeof sh));
        break;
    }
    if (k < n_min)
        return np_src_fail(src, NP_ERR_SYNTAX, 0, err, "expected %s, got '%s'", form,
                           parse_shown(text, sh, sizeof sh));
    uint64_t prod = 1;
    for (int i = 0; i < k; i++) {
        if (d[i] && prod > max_product / d[i])
            return np_src_fail(src, NP_ERR_RANGE, 0, err,
                               "'%s' has more than %" PRIu64 " elements in all",
                               parse_shown(text, sh, sizeof sh), max_product);
        prod *= d[i];
    }
    for (int i = 0; i < k; i++)
        out[i] = d[i];
    *n = k;
    return NP_OK;
}

/* One item of a list at *p: N, A-B or A-B:STEP. */
static np_status parse_item(const np_src *src, const char *text, const char **p, uint64_t lo,
                            uint64_t hi, uint64_t *a, uint64_t *b, uint64_t *step, np_err *err)
{
    char sh[64];
    const char *start = *p;
    uint64_t v[3] = {0, 0, 1};
    int k = 0;
    for (;;) {
        const char *at = *p;
        int nd = parse_digits(p, &v[k]);
        if (nd == 0)
            return np_src_fail(src, NP_ERR_SYNTAX, (size_t)(at - text), err,
                               "expected a list such as 0,2,5 or 0-7 or 0-14:2, got '%s'",
                               parse_shown(text, sh, sizeof sh));
        if (k == 2 && (nd < 0 || v[2] == 0))
            return np_src_fail(src, NP_ERR_RANGE, (size_t)(at - text), err,
                               "a step must be in 1 .. 2^64 - 1, got '%.*s' in '%s'",
                               (int)(*p - at), at, parse_shown(text, sh, sizeof sh));
        if (k < 2 && (nd < 0 || v[k] < lo || v[k] > hi))
            return np_src_fail(src, NP_ERR_RANGE, (size_t)(at - text), err,
                               "'%.*s' in '%s' is outside %" PRIu64 " .. %" PRIu64,
                               (int)(*p - at), at, parse_shown(text, sh, sizeof sh), lo, hi);
        k++;
        char want = k == 1 ? '-' : k == 2 ? ':' : 0;
        if (want && **p == want) {
            (*p)++;
            continue;
        }
        break;
    }
    if (**p && **p != ',')
        return np_src_fail(src, NP_ERR_SYNTAX, (size_t)(*p - text), err,
                           "unexpected '%c' in '%s' (a list is N, A-B or A-B:STEP items "
                           "separated by commas)", **p, parse_shown(text, sh, sizeof sh));
    *a = v[0];
    *b = k >= 2 ? v[1] : v[0];
    *step = k == 3 ? v[2] : 1;
    if (*b < *a)
        return np_src_fail(src, NP_ERR_RANGE, (size_t)(start - text), err,
                           "a range A-B needs A <= B, got '%.*s'", (int)(*p - start), start);
    return NP_OK;
}

np_status np_parse_list(const np_src *src, const char *text, uint64_t lo, uint64_t hi,
                        uint64_t *out, size_t cap, size_t *n, np_err *err)
{
    char sh[64];
    if (!*text)
        return np_src_fail(src, NP_ERR_SYNTAX, 0, err, "empty list");
    size_t count = 0;
    for (int pass = 0; pass < 2; pass++) { /* count and check, then write */
        if (pass == 1 && !out)
            break;
        const char *p = text;
        size_t w = 0;
        for (;;) {
            uint64_t a = 0, b = 0, step = 1;
            if (parse_item(src, text, &p, lo, hi, &a, &b, &step, err) != NP_OK)
                return err->status;
            uint64_t span = (b - a) / step; /* the values are span + 1 */
            uint64_t items = span + 1;
            if (pass == 0) {
                if (span >= cap || items > cap - count)
                    return np_src_fail(src, NP_ERR_RANGE, 0, err,
                                       "'%s' has more than %zu values",
                                       parse_shown(text, sh, sizeof sh), cap);
                count += items;
            } else {
                for (uint64_t i = 0; i < items; i++)
                    out[w++] = a + i * step;
            }
            if (!*p)
                break;
            p++; /* ',' */
        }
    }
    *n = count;
    return NP_OK;
}

np_status np_parse_enum(const np_src *src, const char *text, const char *what,
                        const char *const *names, size_t n, size_t *idx, np_err *err)
{
    char sh[64];
    for (size_t i = 0; i < n; i++)
        if (strcmp(text, names[i]) == 0) {
            *idx = i;
            return NP_OK;
        }
    char list[256];
    size_t used = 0;
    list[0] = '\0';
    for (size_t i = 0; i < n && used < sizeof list; i++)
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "",
                                 names[i]);
    const char *guess = np_suggest_name(text, names, n);
    if (guess)
        return np_src_fail(src, NP_ERR_UNKNOWN_KEY, 0, err,
                           "unknown %s '%s'; did you mean '%s'? (one of %s)", what,
                           parse_shown(text, sh, sizeof sh), guess, list);
    return np_src_fail(src, NP_ERR_UNKNOWN_KEY, 0, err, "unknown %s '%s' (one of %s)", what,
                       parse_shown(text, sh, sizeof sh), list);
}

np_status np_parse_bool(const np_src *src, const char *text, bool *out, np_err *err)
{
    static const char *const names[] = {"yes", "no", "true", "false", "on", "off", "1", "0"};
    size_t i = 0;
    if (np_parse_enum(src, text, "boolean", names, 8, &i, err) != NP_OK)
        return err->status;
    *out = i % 2 == 0;
    return NP_OK;
}

size_t np_utf8_invalid_at(const char *text, size_t len)
{
    const unsigned char *s = (const unsigned char *)text;
    size_t i = 0;
    while (i < len) {
        unsigned c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t need;
        uint32_t cp, min;
        if (c >= 0xc2 && c <= 0xdf)
            need = 1, cp = c & 0x1f, min = 0x80;
        else if (c >= 0xe0 && c <= 0xef)
            need = 2, cp = c & 0x0f, min = 0x800;
        else if (c >= 0xf0 && c <= 0xf4)
            need = 3, cp = c & 0x07, min = 0x10000;
        else
            return i;
        if (len - i <= need)
            return i;
        for (size_t k = 1; k <= need; k++) {
            if ((s[i + k] & 0xc0) != 0x80)
                return i;
            cp = (cp << 6) | (s[i + k] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return i;
        i += need + 1;
    }
    return len;
}

np_status np_parse_name(const np_src *src, const char *text, size_t max_len, np_err *err)
{
    size_t len = strlen(text);
    if (len == 0)
        return np_src_fail(src, NP_ERR_SYNTAX, 0, err, "empty name");
    if (len > max_len)
        return np_src_fail(src, NP_ERR_RANGE, 0, err, "a name has at most %zu bytes, got %zu",
                           max_len, len);
    size_t bad = np_utf8_invalid_at(text, len);
    if (bad < len)
        return np_src_fail(src, NP_ERR_SYNTAX, bad, err,
                           "byte %zu (0x%02x) is not valid UTF-8", bad + 1,
                           (unsigned char)text[bad]);
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)text[i] < 0x20 || text[i] == 0x7f)
            return np_src_fail(src, NP_ERR_SYNTAX, i, err,
                               "byte %zu is a control character (0x%02x)", i + 1,
                               (unsigned char)text[i]);
    return NP_OK;
}

const char *np_suggest_name(const char *word, const char *const *names, size_t n)
{
    size_t wl = strlen(word);
    const char *best = NULL;
    size_t best_len = SIZE_MAX;
    for (size_t i = 0; i < n; i++) { /* a name the word starts: the shortest */
        size_t nl = strlen(names[i]);
        if (wl >= 2 && nl > wl && strncmp(names[i], word, wl) == 0 && nl < best_len)
            best = names[i], best_len = nl;
    }
    if (best)
        return best;
    best = np_suggest(word, names, n, wl >= 8 ? 3 : 2);
    if (best)
        return best;
    size_t best_common = 2;
    for (size_t i = 0; i < n; i++) { /* the longest common stem of 3 or more */
        size_t c = 0;
        while (word[c] && word[c] == names[i][c])
            c++;
        if (c > best_common)
            best = names[i], best_common = c;
    }
    return best;
}
