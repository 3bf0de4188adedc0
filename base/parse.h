/* parse.h — the one door for values that come from outside: checked parsers of integers,
 * reals, sizes with units, lists and ranges, dimensions `AxB[xC]`, enumerations (with "did
 * you mean") and names, for every command-line option, model file, SCALE-Sim file and
 * topology spec.
 *
 * A value is either read whole and in range, or an error that says where it came from. It is
 * never wrapped, truncated, saturated or partly read: "4294967297" for a 32-bit field is out
 * of range, "99999999999999999999" is too large, "0-3x" has trailing junk, "" is empty.
 *
 * Where the value came from is an np_src:
 *   - an option:  NP_SRC_OPT("--seed")  errors are NP_ERR_USAGE, "--seed: expected ...";
 *   - a file:     NP_SRC_AT(path, line, col, "ArrayHeight")  errors carry path:line:col (col
 *                 of the offending character: the value's col plus its offset) and are
 *                 NP_ERR_SYNTAX (malformed), NP_ERR_RANGE (out of range) or NP_ERR_UNKNOWN_KEY
 *                 (an enumeration's unknown word).
 * The value's text is NUL-terminated; callers copy a field out of a line first. On failure
 * every output is unchanged.
 *
 *   uint64_t seed;
 *   if (np_parse_u64(NP_SRC_OPT("--seed"), optarg, 0, UINT64_MAX, &seed, err) != NP_OK)
 *       return err->status;
 */
#ifndef NPUSIM_PARSE_H
#define NPUSIM_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

typedef struct np_src {
    const char *name; /* the option ("--seed") or key ("ArrayHeight"); NULL: none */
    const char *file; /* NULL: the command line */
    int line, col;    /* 1-based position of the value's first character in file */
} np_src;

#define NP_SRC_OPT(opt) (&(const np_src){.name = (opt)})
#define NP_SRC_AT(path, ln, cl, key) (&(const np_src){.name = (key), .file = (path), \
                                                      .line = (ln), .col = (cl)})

/* Fills err for a bad value of src: the class (NP_ERR_USAGE for an option, else file_status)
 * and position (src->col + offset), the message prefixed by "NAME: ". Returns the status. */
np_status np_src_fail(const np_src *src, np_status file_status, size_t offset, np_err *err,
                      const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* A decimal integer in lo..hi (no sign for u64, an optional '-' for i64; no spaces, no
 * prefix). The message names the range: "expected an integer in 1 .. 64, got '0'". */
np_status np_parse_u64(const np_src *src, const char *text, uint64_t lo, uint64_t hi,
                       uint64_t *out, np_err *err);
np_status np_parse_i64(const np_src *src, const char *text, int64_t lo, int64_t hi,
                       int64_t *out, np_err *err);

/* A finite decimal real (strtod syntax without hex, inf or nan) in lo..hi. */
np_status np_parse_f64(const np_src *src, const char *text, double lo, double hi, double *out,
                       np_err *err);

/* A size in bytes: an integer, optionally a space, then a binary unit B, K, KiB, M, MiB, G,
 * GiB, T or TiB (k, m, g, t also taken); decimal units (kB, MB, GB) are refused as ambiguous.
 * The product must fit 64 bits and lie in lo..hi. "64K" and "64 KiB" are 65536. */
np_status np_parse_size(const np_src *src, const char *text, uint64_t lo, uint64_t hi,
                        uint64_t *out, np_err *err);

/* Dimensions "A", "AxB" or "AxBxC" (n_min..n_max of them, n_max <= 8), each in lo..hi and
 * their product at most max_product; out[0..*n). */
np_status np_parse_dims(const np_src *src, const char *text, int n_min, int n_max,
                        uint64_t lo, uint64_t hi, uint64_t max_product, uint64_t *out, int *n,
                        np_err *err);

/* A list of integers, items separated by ',': each item N, A-B (A <= B) or A-B:STEP (STEP >=
 * 1, the values A, A+STEP, ... <= B), every value in lo..hi. Its length is computed before
 * anything is written and must be at most cap; out (capacity cap) may be NULL to only count.
 * "0-1,4,6-10:2" is 0 1 4 6 8 10. Duplicates are allowed (callers that need distinct values
 * check them). */
np_status np_parse_list(const np_src *src, const char *text, uint64_t lo, uint64_t hi,
                        uint64_t *out, size_t cap, size_t *n, np_err *err);

/* The index of text among names[0..n) (exact, case-sensitive). Otherwise "unknown WHAT
 * 'xs'; did you mean 'os'? (one of os, ws, is)" — what names the kind ("dataflow"). */
np_status np_parse_enum(const np_src *src, const char *text, const char *what,
                        const char *const *names, size_t n, size_t *idx, np_err *err);

/* yes/no, true/false, on/off, 1/0. */
np_status np_parse_bool(const np_src *src, const char *text, bool *out, np_err *err);

/* The offset of the first byte of text[0..len) that is not part of well-formed UTF-8
 * (overlong forms, surrogates and code points past U+10FFFF are not), or len when all is. */
size_t np_utf8_invalid_at(const char *text, size_t len);

/* A name that reaches JSON, CSV and traces: 1..max_len bytes of valid UTF-8 without control
 * characters. */
np_status np_parse_name(const np_src *src, const char *text, size_t max_len, np_err *err);

/* The closest of names[0..n) to word for "did you mean": edit distance at most 2 (3 for
 * words of 8 or more characters), else a name that starts with word or that word starts
 * with the stem of (the longest common prefix of at least 3 characters); NULL when none. */
const char *np_suggest_name(const char *word, const char *const *names, size_t n);

#endif
