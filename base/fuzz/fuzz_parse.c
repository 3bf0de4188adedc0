/* fuzz_parse.c — libFuzzer harness for the one door (base/parse.h). The first byte picks a
 * parser and its bounds, the rest (to a NUL) is the value. Each parser must accept or fail
 * with a message naming the option, leaving its outputs unchanged; an accepted value is in
 * its bounds and its canonical text parses back to the same value. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "fuzz_harness.h"
#include "parse.h"

#define SRC NP_SRC_OPT("--fuzz")

static void fuzz_fail(np_status st, const np_err *e)
{
    fuzz_check_failure(st, e);
    if (e->status != NP_ERR_USAGE || strncmp(e->msg, "--fuzz: ", 8) != 0)
        abort(); /* an option's error is a usage error that names it */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    char in[256];
    size_t n = size - 1 < sizeof in - 1 ? size - 1 : sizeof in - 1;
    memcpy(in, data + 1, n);
    in[n] = '\0';
    unsigned pick = data[0];
    static const uint64_t his[] = {UINT64_MAX, UINT32_MAX, 65536, 1, 0};
    uint64_t lo = pick & 0x20 ? 1 : 0, hi = his[(pick >> 3) % 5];
    if (hi < lo)
        hi = lo;
    np_err e = {0};
    char back[64];
    switch (pick % 8) {
    case 0: {
        uint64_t v = 12345, w;
        np_status st = np_parse_u64(SRC, in, lo, hi, &v, &e);
        if (st != NP_OK) {
            fuzz_fail(st, &e);
            if (v != 12345)
                abort();
            break;
        }
        snprintf(back, sizeof back, "%" PRIu64, v);
        if (v < lo || v > hi || np_parse_u64(SRC, back, lo, hi, &w, &e) || w != v)
            abort();
        break;
    }
    case 1: {
        int64_t v = 7, w, l = -(int64_t)hi / 2, h = (int64_t)(hi / 2);
        np_status st = np_parse_i64(SRC, in, l, h, &v, &e);
        if (st != NP_OK) {
            fuzz_fail(st, &e);
            if (v != 7)
                abort();
            break;
        }
        snprintf(back, sizeof back, "%" PRId64, v);
        if (v < l || v > h || np_parse_i64(SRC, back, l, h, &w, &e) || w != v)
            abort();
        break;
    }
    case 2: {
        double v = 0.5, w;
        np_status st = np_parse_f64(SRC, in, -1e300, 1e300, &v, &e);
        if (st != NP_OK) {
            fuzz_fail(st, &e);
            if (v != 0.5)
                abort();
            break;
        }
        snprintf(back, sizeof back, "%.17g", v);
        if (!isfinite(v) || np_parse_f64(SRC, back, -1e300, 1e300, &w, &e) || w != v)
            abort();
        break;
    }
    case 3: {
        uint64_t v = 3, w;
        np_status st = np_parse_size(SRC, in, lo, hi, &v, &e);
        if (st != NP_OK) {
            fuzz_fail(st, &e);
            if (v != 3)
                abort();
            break;
        }
        snprintf(back, sizeof back, "%" PRIu64, v);
        if (v < lo || v > hi || np_parse_size(SRC, back, lo, hi, &w, &e) || w != v)
            abort();
        break;
    }
    case 4: {
        uint64_t d[8] = {0}, w[8];
        int nd = -1, nw;
        int mn = 1 + (pick >> 5) % 3;
        np_status st = np_parse_dims(SRC, in, mn, 3, lo, hi, 1u << 20, d, &nd, &e);
        if (st != NP_OK) {
            fuzz_fail(st, &e);
            if (nd != -1)
                abort();
            break;
        }
        size_t used = 0;
        uint64_t prod = 1;
        for (int i = 0; i < nd; i++) {
            if (d[i] < lo || d[i] > hi)
                abort();
            prod *= d[i];
            used += (size_t)snprintf(back + used, sizeof back - used, "%s%" PRIu64, i ? "x" : "",
                                     d[i]);
        }
        if (nd < mn || nd > 3 || prod > (1u << 20) ||
            np_parse_dims(SRC, back, mn, 3, lo, hi, 1u << 20, w, &nw, &e) || nw != nd ||
            memcmp(w, d, (size_t)nd * sizeof *d))
            abort();
        break;
    }
    case 5: {
        uint64_t v[64];
        size_t cnt = 99, c2;
        np_status st = np_parse_list(SRC, in, lo, hi, v, 64, &cnt, &e);
        if (st != NP_OK) {
            fuzz_fail(st, &e);
            if (cnt != 99)
                abort();
            break;
        }
        if (cnt < 1 || cnt > 64 || np_parse_list(SRC, in, lo, hi, NULL, 64, &c2, &e) || c2 != cnt)
            abort();
        for (size_t i = 0; i < cnt; i++)
            if (v[i] < lo || v[i] > hi)
                abort();
        break;
    }
    case 6: {
        static const char *const names[] = {"os", "ws", "is", "ring", "torus2d", "gpt-tiny"};
        size_t idx = 99;
        np_status st = np_parse_enum(SRC, in, "thing", names, 6, &idx, &e);
        if (st != NP_OK) {
            fuzz_fail(st, &e);
            if (idx != 99)
                abort();
        } else if (idx >= 6 || strcmp(names[idx], in) != 0) {
            abort();
        }
        np_suggest_name(in, names, 6);
        break;
    }
    default: {
        np_status st = np_parse_name(SRC, in, 32, &e);
        size_t len = strlen(in);
        if (st != NP_OK) {
            fuzz_fail(st, &e);
            break;
        }
        if (!len || len > 32 || np_utf8_invalid_at(in, len) != len)
            abort();
        for (size_t i = 0; i < len; i++)
            if ((unsigned char)in[i] < 0x20 || in[i] == 0x7f)
                abort();
        break;
    }
    }
    return 0;
}
