/* arch_value.c — the one parser of config values (integers, reals, sizes with units, enum
 * names), their text form, and `--set section.key=value` overrides (arch_set).
 *
 * The YAML loader and arch_set both call arch_value_parse, so a value means the same wherever
 * it is written. Messages name the key and the unit; the caller adds the position. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "parse.h"
#include "suggest.h"

#define ARCH_NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* Binary size units, largest first. Decimal ones (kB, MB, GB, ...) are refused as ambiguous:
 * memory sizes in "GB" usually mean GiB. */
static const struct {
    const char *name;
    uint64_t bytes;
} arch_size_units[] = {
    {"PiB", 1ull << 50}, {"TiB", 1ull << 40}, {"GiB", 1ull << 30},
    {"MiB", 1ull << 20}, {"KiB", 1ull << 10}, {"B", 1},
};

/* A number as people write it: integers without an exponent or a fraction, others with up
 * to 15 significant digits ("1.05", "0.001", "1000000"). */
static char *arch_num_text(double x, char *buf, size_t n)
{
    if (x == floor(x) && fabs(x) < 1e15)
        snprintf(buf, n, "%.0f", x);
    else
        snprintf(buf, n, "%.15g", x);
    return buf;
}

char *arch_size_text(uint64_t bytes, char *buf, size_t n)
{
    for (size_t i = 0; i + 1 < ARCH_NELEM(arch_size_units); i++) {
        uint64_t u = arch_size_units[i].bytes;
        if (bytes >= u && bytes % u == 0) {
            snprintf(buf, n, "%" PRIu64 " %s", bytes / u, arch_size_units[i].name);
            return buf;
        }
    }
    snprintf(buf, n, "%" PRIu64, bytes);
    return buf;
}

char *arch_value_text(const arch_config *cfg, const arch_key_info *k, char *buf, size_t n)
{
    const void *p = (const char *)cfg + k->offset;
    switch (k->type) {
    case ARCH_TYPE_INT: snprintf(buf, n, "%" PRId64, *(const int64_t *)p); break;
    case ARCH_TYPE_REAL: arch_num_text(*(const double *)p, buf, n); break;
    case ARCH_TYPE_SIZE: arch_size_text(*(const uint64_t *)p, buf, n); break;
    case ARCH_TYPE_ENUM: {
        int e = *(const int *)p;
        snprintf(buf, n, "%s", e >= 0 && (size_t)e < k->enum_info->n ? k->enum_info->values[e]
                                                                       : "(invalid)");
        break;
    }
    case ARCH_TYPE_COUNT: buf[0] = '\0'; break;
    }
    return buf;
}

/* "1 to 4096 PEs", "1 KiB to 4 GiB" */
static char *arch_range_text(const arch_key_info *k, char *buf, size_t n)
{
    char lo[48], hi[48];
    if (k->type == ARCH_TYPE_SIZE)
        snprintf(buf, n, "%s to %s", arch_size_text((uint64_t)k->min, lo, sizeof lo),
                 arch_size_text((uint64_t)k->max, hi, sizeof hi));
    else
        snprintf(buf, n, "%s to %s %s", arch_num_text(k->min, lo, sizeof lo),
                 arch_num_text(k->max, hi, sizeof hi), k->unit);
    return buf;
}

/* What a value of k looks like, for "expects ..." messages. */
char *arch_key_expects(const arch_key_info *k, char *buf, size_t n)
{
    switch (k->type) {
    case ARCH_TYPE_INT: snprintf(buf, n, "an integer number of %s", k->unit); break;
    case ARCH_TYPE_REAL: snprintf(buf, n, "a number in %s", k->unit); break;
    case ARCH_TYPE_SIZE:
        snprintf(buf, n, "a size in bytes such as 4096, 512KiB or 32 MiB");
        break;
    case ARCH_TYPE_ENUM: {
        size_t used = (size_t)snprintf(buf, n, "one of");
        for (size_t i = 0; i < k->enum_info->n && used < n; i++)
            used += (size_t)snprintf(buf + used, n - used, "%s %s", i ? "," : "",
                                     k->enum_info->values[i]);
        break;
    }
    case ARCH_TYPE_COUNT: buf[0] = '\0'; break;
    }
    return buf;
}

/* Length of the number at the start of s: [+-] digits [. digits] [e [+-] digits], at least one
 * mantissa digit; 0 if s does not start with one. No hex, inf or nan. */
static size_t arch_number_len(const char *s, bool *has_frac_or_exp)
{
    size_t i = 0, digits = 0;
    *has_frac_or_exp = false;
    if (s[i] == '+' || s[i] == '-')
        i++;
    while (isdigit((unsigned char)s[i]))
        i++, digits++;
    if (s[i] == '.') {
        *has_frac_or_exp = true;
        i++;
        while (isdigit((unsigned char)s[i]))
            i++, digits++;
    }
    if (digits == 0)
        return 0;
    if (s[i] == 'e' || s[i] == 'E') {
        size_t j = i + 1;
        if (s[j] == '+' || s[j] == '-')
            j++;
        if (isdigit((unsigned char)s[j])) {
            while (isdigit((unsigned char)s[j]))
                j++;
            *has_frac_or_exp = true;
            i = j;
        }
    }
    return i;
}

static bool arch_is_null(const char *text)
{
    return !text[0] || strcmp(text, "~") == 0 || strcmp(text, "null") == 0 ||
           strcmp(text, "Null") == 0 || strcmp(text, "NULL") == 0;
}

static np_status arch_out_of_range(const arch_key_info *k, const char *shown, np_err *err)
{
    char range[128];
    return np_err_set(err, NP_ERR_RANGE, "%s = %s is out of range: allowed %s", k->full_name,
                      shown, arch_range_text(k, range, sizeof range));
}

static np_status arch_parse_int(const arch_key_info *k, const char *text, arch_value *out,
                                np_err *err)
{
    char what[128], shown[160];
    bool frac;
    size_t len = arch_number_len(text, &frac);
    if (len == 0 || text[len] != '\0')
        return np_err_set(err, NP_ERR_TYPE, "%s expects %s, got '%s'", k->full_name,
                          arch_key_expects(k, what, sizeof what), text);
    snprintf(shown, sizeof shown, "%s %s", text, k->unit);
    double d = strtod(text, NULL);
    if (frac && d != floor(d))
        return np_err_set(err, NP_ERR_TYPE, "%s expects a whole number of %s, got %s",
                          k->full_name, k->unit, text);
    if (!(d >= k->min && d <= k->max)) /* also catches values too large for int64 */
        return arch_out_of_range(k, shown, err);
    out->i = (int64_t)d;
    if (!frac) { /* exact for every integer, not only those a double holds */
        errno = 0;
        long long v = strtoll(text, NULL, 10);
        if (errno || (double)v < k->min || (double)v > k->max)
            return arch_out_of_range(k, shown, err);
        out->i = v;
    }
    return NP_OK;
}

static np_status arch_parse_real(const arch_key_info *k, const char *text, arch_value *out,
                                 np_err *err)
{
    char what[128], shown[160];
    bool frac;
    size_t len = arch_number_len(text, &frac);
    if (len == 0 || text[len] != '\0')
        return np_err_set(err, NP_ERR_TYPE, "%s expects %s, got '%s'", k->full_name,
                          arch_key_expects(k, what, sizeof what), text);
    double d = strtod(text, NULL);
    snprintf(shown, sizeof shown, "%s %s", text, k->unit);
    if (!(d >= k->min && d <= k->max)) /* also catches overflow to inf */
        return arch_out_of_range(k, shown, err);
    out->r = d;
    return NP_OK;
}

static np_status arch_parse_size(const arch_key_info *k, const char *text, arch_value *out,
                                 np_err *err)
{
    char what[128], shown[160];
    bool frac;
    size_t len = arch_number_len(text, &frac);
    if (len == 0)
        return np_err_set(err, NP_ERR_TYPE, "%s expects %s, got '%s'", k->full_name,
                          arch_key_expects(k, what, sizeof what), text);
    const char *unit = text + len;
    while (*unit == ' ')
        unit++;
    uint64_t mult = 1;
    if (*unit) {
        size_t i = 0;
        while (i < ARCH_NELEM(arch_size_units) && strcmp(unit, arch_size_units[i].name) != 0)
            i++;
        if (i == ARCH_NELEM(arch_size_units)) {
            /* Suggest the binary unit with the same first letter: "MB", "mib", "M" -> MiB. */
            const char *guess = NULL;
            for (size_t j = 0; j < ARCH_NELEM(arch_size_units); j++)
                if (toupper((unsigned char)unit[0]) == arch_size_units[j].name[0])
                    guess = arch_size_units[j].name;
            bool decimal = strlen(unit) == 2 && strchr("kKMGTP", unit[0]) && unit[1] == 'B';
            if (decimal)
                return np_err_set(err, NP_ERR_TYPE,
                                  "%s: size unit '%s' is ambiguous (10^n or 2^n bytes?); "
                                  "write '%s' for powers of 1024, or the number of bytes",
                                  k->full_name, unit, guess);
            if (guess)
                return np_err_set(err, NP_ERR_TYPE,
                                  "%s: unknown size unit '%s'; did you mean '%s'? "
                                  "(units: B, KiB, MiB, GiB, TiB, PiB)",
                                  k->full_name, unit, guess);
            return np_err_set(err, NP_ERR_TYPE,
                              "%s: unknown size unit '%s' (units: B, KiB, MiB, GiB, TiB, PiB)",
                              k->full_name, unit);
        }
        mult = arch_size_units[i].bytes;
    }
    snprintf(shown, sizeof shown, "%s%s", text, *unit ? "" : " bytes");
    double d = strtod(text, NULL) * (double)mult;
    if (!(d >= k->min && d <= k->max))
        return arch_out_of_range(k, shown, err);
    if (d != floor(d))
        return np_err_set(err, NP_ERR_TYPE, "%s = %s is not a whole number of bytes",
                          k->full_name, text);
    out->u = (uint64_t)d;
    if (!frac) { /* exact even where a double is not */
        errno = 0;
        unsigned long long v = strtoull(text[0] == '+' ? text + 1 : text, NULL, 10);
        if (errno || v > UINT64_MAX / mult)
            return arch_out_of_range(k, shown, err);
        out->u = v * mult;
        if ((double)out->u < k->min || (double)out->u > k->max)
            return arch_out_of_range(k, shown, err);
    }
    return NP_OK;
}

static np_status arch_parse_enum(const arch_key_info *k, const char *text, arch_value *out,
                                 np_err *err)
{
    const arch_enum_info *ei = k->enum_info;
    for (size_t i = 0; i < ei->n; i++)
        if (strcmp(text, ei->values[i]) == 0) {
            out->e = (int)i;
            return NP_OK;
        }
    char what[256];
    const char *guess = np_suggest(text, ei->values, ei->n, strlen(text) > 6 ? 3 : 2);
    if (guess)
        return np_err_set(err, NP_ERR_UNKNOWN_KEY, "unknown %s '%s'; did you mean '%s'? (%s)",
                          k->full_name, text, guess, arch_key_expects(k, what, sizeof what));
    return np_err_set(err, NP_ERR_UNKNOWN_KEY, "unknown %s '%s' (%s)", k->full_name, text,
                      arch_key_expects(k, what, sizeof what));
}

np_status arch_value_parse(const arch_key_info *k, const char *text, bool quoted,
                           arch_value *out, np_err *err)
{
    char what[256];
    if (!quoted && arch_is_null(text))
        return np_err_set(err, NP_ERR_MISSING, "%s has no value (it expects %s)", k->full_name,
                          arch_key_expects(k, what, sizeof what));
    if (quoted && (k->type == ARCH_TYPE_INT || k->type == ARCH_TYPE_REAL))
        return np_err_set(err, NP_ERR_TYPE, "%s expects %s, got the string \"%s\"",
                          k->full_name, arch_key_expects(k, what, sizeof what), text);
    for (const char *c = text; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7F)
            return np_err_set(err, NP_ERR_TYPE, "%s: the value holds a control character",
                              k->full_name);
    arch_value v;
    np_status st = NP_ERR_INTERNAL;
    switch (k->type) {
    case ARCH_TYPE_INT: st = arch_parse_int(k, text, &v, err); break;
    case ARCH_TYPE_REAL: st = arch_parse_real(k, text, &v, err); break;
    case ARCH_TYPE_SIZE: st = arch_parse_size(k, text, &v, err); break;
    case ARCH_TYPE_ENUM: st = arch_parse_enum(k, text, &v, err); break;
    case ARCH_TYPE_COUNT: st = np_err_set(err, NP_ERR_INTERNAL, "bad arch_type"); break;
    }
    if (st == NP_OK)
        *out = v;
    return st;
}

/* Copies s[0..n) without surrounding blanks into buf (n < size); returns buf. */
static char *arch_trim(const char *s, size_t n, char *buf, size_t size)
{
    while (n && isspace((unsigned char)*s))
        s++, n--;
    while (n && isspace((unsigned char)s[n - 1]))
        n--;
    if (n >= size)
        n = size - 1;
    memcpy(buf, s, n);
    buf[n] = '\0';
    return buf;
}

np_status arch_set(arch_config *cfg, const char *assignment, np_err *err)
{
    const char *eq = strchr(assignment, '=');
    if (!eq)
        return np_err_set(err, NP_ERR_USAGE, "expected SECTION.KEY=VALUE, got '%s'", assignment);
    char name[128], value[256];
    arch_trim(assignment, (size_t)(eq - assignment), name, sizeof name);
    arch_trim(eq + 1, strlen(eq + 1), value, sizeof value);

    if (strcmp(name, "name") == 0) {
        if (!value[0])
            return np_err_set(err, NP_ERR_MISSING, "name has no value");
        for (const char *c = value; *c; c++)
            if ((unsigned char)*c < 0x20 || *c == 0x7F)
                return np_err_set(err, NP_ERR_TYPE, "name holds a control character");
        size_t bad = np_utf8_invalid_at(value, strlen(value));
        if (bad < strlen(value))
            return np_err_set(err, NP_ERR_TYPE, "name: byte %zu (0x%02x) is not valid UTF-8",
                              bad + 1, (unsigned char)value[bad]);
        if (strlen(value) >= sizeof cfg->name)
            return np_err_set(err, NP_ERR_RANGE, "name is longer than %zu characters",
                              sizeof cfg->name - 1);
        snprintf(cfg->name, sizeof cfg->name, "%s", value);
        cfg->src.name = (arch_pos){ARCH_ORIGIN_SET, 0, 0};
        return NP_OK;
    }
    const arch_key_info *k = arch_key_find(name);
    if (!k) {
        char section[128];
        const char *dot = strchr(name, '.');
        arch_trim(name, dot ? (size_t)(dot - name) : 0, section, sizeof section);
        const arch_key_info *guess = arch_key_suggest(name, dot ? section : NULL);
        if (guess)
            return np_err_set(err, NP_ERR_UNKNOWN_KEY, "unknown key '%s'; did you mean '%s'?",
                              name, guess->full_name);
        return np_err_set(err, NP_ERR_UNKNOWN_KEY, "unknown key '%s' (keys are SECTION.KEY, "
                          "e.g. core.array_rows)", name);
    }
    arch_value v;
    np_status st = arch_value_parse(k, value, false, &v, err);
    if (st != NP_OK)
        return st;
    arch_value_store(cfg, k, v);
    cfg->src.key[k - arch_keys] = (arch_pos){ARCH_ORIGIN_SET, 0, 0};
    return NP_OK;
}
