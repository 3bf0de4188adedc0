/* mxu_scalecfg.c — SCALE-Sim .cfg reader (see mxu_scalecfg.h). */
#include "mxu_scalecfg.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "arch.h"
#include "parse.h"
#include "readfile.h"

#define SCALECFG_MAX_KEYS 256

/* One key seen so far: its section's index and name, for duplicates. */
typedef struct scalecfg_seen {
    int section, line;
    char key[64];
} scalecfg_seen;

/* The range of an npusim key, for a value that becomes it. */
static void scalecfg_range(const char *full_name, uint64_t *lo, uint64_t *hi)
{
    const arch_key_info *k = arch_key_find(full_name);
    *lo = k ? (uint64_t)k->min : 1;
    *hi = k ? (uint64_t)k->max : UINT32_MAX;
}

np_status mxu_scalecfg_parse(const char *text, size_t len, const char *path, double clock_ghz,
                             mxu_scalecfg *out, np_err *err)
{
    mxu_scalecfg c = {0};
    uint64_t rows = 0, cols = 0, sram_kib = 0, bw = 0;
    bool have_sram = false, user_bw = false;
    int df = -1, section = 0;
    scalecfg_seen *seen = calloc(SCALECFG_MAX_KEYS, sizeof *seen);
    size_t n_seen = 0;
    char *line = malloc(len + 1);
    np_status st = NP_OK;
    if (!seen || !line) {
        st = np_err_set(err, NP_ERR_NOMEM, "out of memory reading %s", path);
        goto done;
    }
    int ln = 0;
    for (size_t i = 0; i < len && st == NP_OK;) {
        size_t j = i;
        while (j < len && text[j] != '\n')
            j++;
        ln++;
        size_t n = j - i;
        memcpy(line, text + i, n);
        line[n] = '\0';
        i = j + 1;
        if (memchr(line, '\0', n)) {
            st = np_err_at(err, NP_ERR_SYNTAX, path, ln, (int)strlen(line) + 1,
                           "a NUL byte (a .cfg file is text)");
            break;
        }
        char *cut = strpbrk(line, "#;");
        if (cut)
            *cut = '\0';
        char *s = line;
        while (*s == ' ' || *s == '\t')
            s++;
        char *e = s + strlen(s);
        while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
            *--e = '\0';
        if (!*s)
            continue;
        if (*s == '[') {
            if (e[-1] != ']') {
                st = np_err_at(err, NP_ERR_SYNTAX, path, ln, (int)(s - line) + 1,
                               "expected a section '[name]'");
                break;
            }
            section++;
            continue;
        }
        char *sep = strpbrk(s, ":=");
        if (!sep || sep == s) {
            st = np_err_at(err, NP_ERR_SYNTAX, path, ln, (int)(s - line) + 1,
                           "expected 'Key : value'");
            break;
        }
        char *kend = sep;
        while (kend > s && (kend[-1] == ' ' || kend[-1] == '\t'))
            kend--;
        *kend = '\0';
        char *key = s, *val = sep + 1;
        while (*val == ' ' || *val == '\t')
            val++;
        int kcol = (int)(key - line) + 1, vcol = (int)(val - line) + 1;
        for (size_t k = 0; k < n_seen; k++)
            if (seen[k].section == section && !strcasecmp(seen[k].key, key)) {
                st = np_err_at(err, NP_ERR_DUPLICATE, path, ln, kcol,
                               "'%s' given twice in a section (first on line %d)", key,
                               seen[k].line);
                break;
            }
        if (st != NP_OK)
            break;
        if (n_seen == SCALECFG_MAX_KEYS) {
            st = np_err_at(err, NP_ERR_RANGE, path, ln, kcol, "more than %d keys",
                           SCALECFG_MAX_KEYS);
            break;
        }
        seen[n_seen].section = section;
        seen[n_seen].line = ln;
        snprintf(seen[n_seen].key, sizeof seen[n_seen].key, "%s", key);
        n_seen++;
        const np_src *src = NP_SRC_AT(path, ln, vcol, key);
        uint64_t lo, hi, v;
        if (!strcasecmp(key, "ArrayHeight") || !strcasecmp(key, "ArrayWidth")) {
            bool h = !strcasecmp(key, "ArrayHeight");
            scalecfg_range(h ? "core.array_rows" : "core.array_cols", &lo, &hi);
            st = np_parse_u64(src, val, lo, hi, h ? &rows : &cols, err);
        } else if (!strcasecmp(key, "IfmapSramSzkB") || !strcasecmp(key, "FilterSramSzkB") ||
                   !strcasecmp(key, "OfmapSramSzkB")) {
            scalecfg_range("core.sram_bytes", &lo, &hi);
            st = np_parse_u64(src, val, 1, hi / 1024, &v, err);
            if (st == NP_OK && sram_kib + v > hi / 1024)
                st = np_src_fail(src, NP_ERR_RANGE, 0, err,
                                 "the three SRAMs add up to %" PRIu64 " KiB, more than "
                                 "core.sram_bytes allows (%" PRIu64 " KiB)", sram_kib + v,
                                 hi / 1024);
            sram_kib += st == NP_OK ? v : 0;
            have_sram = true;
        } else if (!strcasecmp(key, "Bandwidth")) {
            /* "10" or, as SCALE-Sim writes for three interfaces, "10,10,10": the first */
            char first[64];
            snprintf(first, sizeof first, "%.*s", (int)strcspn(val, ","), val);
            const arch_key_info *k = arch_key_find("chip.hbm_gb_per_s");
            double max_words = k && clock_ghz > 0 ? k->max / clock_ghz : 1e9;
            st = np_parse_u64(src, first, 1, (uint64_t)max_words, &bw, err);
        } else if (!strcasecmp(key, "Dataflow")) {
            static const char *const dfs[] = {"os", "ws", "is"};
            size_t idx = 0;
            st = np_parse_enum(src, val, "dataflow", dfs, 3, &idx, err);
            df = (int)idx;
        } else if (!strcasecmp(key, "InterfaceBandwidth")) {
            static const char *const modes[] = {"USER", "CALC"};
            size_t idx = 0;
            st = np_parse_enum(src, val, "bandwidth mode", modes, 2, &idx, err);
            user_bw = idx == 0;
        } else if (!strcasecmp(key, "run_name")) {
            st = np_parse_name(src, val, MXU_SCALECFG_RUN_NAME_MAX, err);
            if (st == NP_OK && (strchr(val, '/') || !strcmp(val, ".") || !strcmp(val, "..")))
                st = np_src_fail(src, NP_ERR_RANGE, 0, err,
                                 "'%s' is a folder name: no '/', not '.' or '..'", val);
            if (st == NP_OK)
                snprintf(c.run_name, sizeof c.run_name, "%s", val);
        }
    }
    if (st == NP_OK && (!rows || !cols || df < 0))
        st = np_err_at(err, NP_ERR_MISSING, path, 0, 0,
                       "a SCALE-Sim config needs ArrayHeight, ArrayWidth and Dataflow");
    if (st != NP_OK)
        goto done;
    static const char *const dfn[] = {"os", "ws", "is"};
    snprintf(c.sets[c.n_sets++], sizeof c.sets[0], "core.array_rows=%" PRIu64, rows);
    snprintf(c.sets[c.n_sets++], sizeof c.sets[0], "core.array_cols=%" PRIu64, cols);
    snprintf(c.sets[c.n_sets++], sizeof c.sets[0], "core.dataflow=%s", dfn[df]);
    if (have_sram)
        snprintf(c.sets[c.n_sets++], sizeof c.sets[0], "core.sram_bytes=%" PRIu64 " KiB",
                 sram_kib);
    c.calc_bandwidth = !user_bw;
    if (user_bw && bw) {
        c.bandwidth_words = (double)bw;
        snprintf(c.sets[c.n_sets++], sizeof c.sets[0], "chip.hbm_gb_per_s=%.17g",
                 (double)bw * clock_ghz);
    }
    *out = c;
done:
    free(seen);
    free(line);
    return st;
}

np_status mxu_scalecfg_load(const char *path, double clock_ghz, mxu_scalecfg *out, np_err *err)
{
    char *text;
    size_t len;
    if (np_read_file(path, MXU_SCALECFG_MAX_FILE_BYTES, "a SCALE-Sim .cfg file", &text, &len,
                     err) != NP_OK)
        return err->status;
    np_status st = mxu_scalecfg_parse(text, len, path, clock_ghz, out, err);
    free(text);
    return st;
}
