/* mxu_scalecfg.c — SCALE-Sim .cfg reader (see mxu_scalecfg.h). */
#include "mxu_scalecfg.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static char *trim(char *s)
{
    while (*s && isspace((unsigned char)*s))
        s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1]))
        *--e = '\0';
    return s;
}

static bool parse_uint(const char *v, unsigned long long *out)
{
    char *end;
    if (!isdigit((unsigned char)*v))
        return false;
    *out = strtoull(v, &end, 10);
    return *end == '\0' && *out > 0;
}

np_status mxu_scalecfg_parse(const char *text, size_t len, const char *path, double clock_ghz,
                             mxu_scalecfg *out, np_err *err)
{
    mxu_scalecfg c = {0};
    unsigned long long rows = 0, cols = 0, sram_kib = 0, bw = 0;
    char df[8] = "";
    bool user_bw = false;
    char line[512];
    int ln = 0;
    for (size_t i = 0; i < len;) {
        size_t j = i;
        while (j < len && text[j] != '\n')
            j++;
        ln++;
        size_t n = j - i < sizeof line - 1 ? j - i : sizeof line - 1;
        memcpy(line, text + i, n);
        line[n] = '\0';
        i = j + 1;
        char *hash = strpbrk(line, "#;");
        if (hash)
            *hash = '\0';
        char *s = trim(line);
        if (!*s || *s == '[')
            continue;
        char *sep = strpbrk(s, ":=");
        if (!sep)
            return np_err_at(err, NP_ERR_SYNTAX, path, ln, (int)(s - line) + 1,
                             "expected 'Key : value'");
        *sep = '\0';
        char *key = trim(s), *val = trim(sep + 1);
        int vcol = (int)(val - line) + 1;
        unsigned long long v = 0;
        unsigned long long *dst = !strcasecmp(key, "ArrayHeight") ? &rows
                                  : !strcasecmp(key, "ArrayWidth") ? &cols
                                  : !strcasecmp(key, "Bandwidth")  ? &bw
                                                                   : NULL;
        if (dst) {
            if (!parse_uint(val, &v))
                return np_err_at(err, NP_ERR_SYNTAX, path, ln, vcol,
                                 "%s: expected an integer >= 1, got '%s'", key, val);
            *dst = v;
        } else if (!strcasecmp(key, "IfmapSramSzkB") || !strcasecmp(key, "FilterSramSzkB") ||
                   !strcasecmp(key, "OfmapSramSzkB")) {
            if (!parse_uint(val, &v))
                return np_err_at(err, NP_ERR_SYNTAX, path, ln, vcol,
                                 "%s: expected an integer >= 1, got '%s'", key, val);
            sram_kib += v;
        } else if (!strcasecmp(key, "Dataflow")) {
            if (strcmp(val, "os") && strcmp(val, "ws") && strcmp(val, "is"))
                return np_err_at(err, NP_ERR_SYNTAX, path, ln, vcol,
                                 "Dataflow: expected os, ws or is, got '%s'", val);
            snprintf(df, sizeof df, "%s", val);
        } else if (!strcasecmp(key, "InterfaceBandwidth")) {
            user_bw = !strcasecmp(val, "USER");
        }
    }
    if (!rows || !cols || !df[0])
        return np_err_at(err, NP_ERR_MISSING, path, 0, 0,
                         "a SCALE-Sim config needs ArrayHeight, ArrayWidth and Dataflow");
    snprintf(c.sets[c.n_sets++], sizeof c.sets[0], "core.array_rows=%llu", rows);
    snprintf(c.sets[c.n_sets++], sizeof c.sets[0], "core.array_cols=%llu", cols);
    snprintf(c.sets[c.n_sets++], sizeof c.sets[0], "core.dataflow=%s", df);
    if (sram_kib)
        snprintf(c.sets[c.n_sets++], sizeof c.sets[0], "core.sram_bytes=%llu KiB", sram_kib);
    if (user_bw && bw) {
        c.bandwidth_words = (double)bw;
        snprintf(c.sets[c.n_sets++], sizeof c.sets[0], "chip.hbm_gb_per_s=%.17g",
                 (double)bw * clock_ghz);
    }
    *out = c;
    return NP_OK;
}

np_status mxu_scalecfg_load(const char *path, double clock_ghz, mxu_scalecfg *out, np_err *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return np_err_set(err, NP_ERR_IO, "%s: cannot open", path);
    char buf[1 << 16];
    size_t len = fread(buf, 1, sizeof buf, f);
    bool big = !feof(f) && len == sizeof buf;
    bool bad = ferror(f);
    fclose(f);
    if (bad)
        return np_err_set(err, NP_ERR_IO, "%s: read error", path);
    if (big)
        return np_err_set(err, NP_ERR_RANGE, "%s: larger than 64 KiB", path);
    return mxu_scalecfg_parse(buf, len, path, clock_ghz, out, err);
}
