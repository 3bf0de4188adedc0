/* test_parse.c — the one door for outside values (base/parse.h), human figures
 * (base/human.h), capped file reads (base/readfile.h) and whole-buffer descriptor I/O
 * (base/fdio.h), against hand-written expectations. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fdio.h"
#include "harness.h"
#include "human.h"
#include "parse.h"
#include "readfile.h"

#define OPT NP_SRC_OPT("--x")

/* u64 parse that must fail with status st and a message containing want. */
static void u64_fails(const char *text, uint64_t lo, uint64_t hi, np_status st, const char *want)
{
    np_err e = {0};
    uint64_t v = 77;
    CU_ASSERT_EQUAL(np_parse_u64(OPT, text, lo, hi, &v, &e), st);
    CU_ASSERT_EQUAL(v, 77);
    if (!strstr(e.msg, want))
        printf("\n  '%s': got '%s', want '%s'\n", text, e.msg, want);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, want));
}

TEST(integers_are_read_whole_and_in_range_or_refused)
{
    np_err e = {0};
    uint64_t v = 0;
    CU_ASSERT_EQUAL(np_parse_u64(OPT, "18446744073709551615", 0, UINT64_MAX, &v, &e), NP_OK);
    CU_ASSERT_EQUAL(v, UINT64_MAX);
    CU_ASSERT_EQUAL(np_parse_u64(OPT, "0", 0, 5, &v, &e), NP_OK);
    CU_ASSERT_EQUAL(v, 0);
    /* options: every failure is a usage error naming the option */
    u64_fails("99999999999999999999", 0, UINT64_MAX, NP_ERR_USAGE,
              "--x: '99999999999999999999' is larger than 2^64 - 1");
    u64_fails("18446744073709551616", 0, UINT64_MAX, NP_ERR_USAGE, "larger than 2^64 - 1");
    u64_fails("4294967296", 0, UINT32_MAX, NP_ERR_USAGE,
              "expected an integer in 0 .. 4294967295, got '4294967296'");
    u64_fails("12x", 0, 100, NP_ERR_USAGE, "got '12x'");
    u64_fails("", 0, 100, NP_ERR_USAGE, "got ''");
    u64_fails("-1", 0, UINT64_MAX, NP_ERR_USAGE, "expected a non-negative integer, got '-1'");
    u64_fails("+1", 0, 9, NP_ERR_USAGE, "got '+1'");
    u64_fails(" 1", 0, 9, NP_ERR_USAGE, "got ' 1'");
    u64_fails("0x10", 0, 99, NP_ERR_USAGE, "got '0x10'");
    u64_fails("0", 1, 64, NP_ERR_USAGE, "expected an integer in 1 .. 64, got '0'");

    int64_t s = 0;
    CU_ASSERT_EQUAL(np_parse_i64(OPT, "-9223372036854775808", INT64_MIN, INT64_MAX, &s, &e),
                    NP_OK);
    CU_ASSERT_EQUAL(s, INT64_MIN);
    CU_ASSERT_EQUAL(np_parse_i64(OPT, "9223372036854775808", INT64_MIN, INT64_MAX, &s, &e),
                    NP_ERR_USAGE);
    CU_ASSERT_EQUAL(np_parse_i64(OPT, "-", INT64_MIN, INT64_MAX, &s, &e), NP_ERR_USAGE);
    CU_ASSERT_EQUAL(np_parse_i64(OPT, "-5", -4, 4, &s, &e), NP_ERR_USAGE);
    CU_ASSERT_EQUAL(s, INT64_MIN);
}

TEST(a_value_from_a_file_names_file_line_and_column_of_the_bad_character)
{
    np_err e = {0};
    uint64_t v;
    /* the value starts at column 15 of line 3; the junk is 2 characters in */
    CU_ASSERT_EQUAL(np_parse_u64(NP_SRC_AT("a.cfg", 3, 15, "ArrayHeight"), "32z", 1, 1 << 16,
                                 &v, &e), NP_ERR_SYNTAX);
    CU_ASSERT_STRING_EQUAL(e.file, "a.cfg");
    CU_ASSERT_EQUAL(e.line, 3);
    CU_ASSERT_EQUAL(e.col, 17);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "ArrayHeight: expected an integer in 1 .. 65536"));
    CU_ASSERT_EQUAL(np_parse_u64(NP_SRC_AT("a.cfg", 3, 15, "ArrayHeight"), "70000", 1, 1 << 16,
                                 &v, &e), NP_ERR_RANGE);
    CU_ASSERT_EQUAL(e.col, 15);
}

TEST(reals_are_finite_plain_decimals_in_range)
{
    np_err e = {0};
    double d = 0;
    CU_ASSERT_EQUAL(np_parse_f64(OPT, "0.25", 0, 1, &d, &e), NP_OK);
    CU_ASSERT_DOUBLE_EQUAL(d, 0.25, 0);
    CU_ASSERT_EQUAL(np_parse_f64(OPT, "-1.5e3", -1e4, 0, &d, &e), NP_OK);
    CU_ASSERT_DOUBLE_EQUAL(d, -1500, 0);
    CU_ASSERT_EQUAL(np_parse_f64(OPT, ".5", 0, 1, &d, &e), NP_OK);
    static const char *bad[] = {"", ".", "1e", "1.5x", "nan", "inf", "0x1p3", "1e400", " 1", "2"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        d = 9;
        CU_ASSERT_EQUAL(np_parse_f64(OPT, bad[i], 0, 1, &d, &e), NP_ERR_USAGE);
        CU_ASSERT_DOUBLE_EQUAL(d, 9, 0);
    }
    /* the range in the fewest digits that read back: 1e-06, not 9.9999999999999995e-07 */
    CU_ASSERT_EQUAL(np_parse_f64(OPT, "-1", 1e-6, 1e6, &d, &e), NP_ERR_USAGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "expected a number in 1e-06 .. 1e+06, got '-1'"));
    CU_ASSERT_EQUAL(np_parse_f64(OPT, "x", 0.1, 1.0 / 3, &d, &e), NP_ERR_USAGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "in 0.1 .. 0.3333333333333333, got 'x'"));
}

TEST(sizes_take_binary_units_and_refuse_overflow_and_decimal_units)
{
    np_err e = {0};
    uint64_t v = 0;
    struct { const char *t; uint64_t want; } ok[] = {
        {"8", 8},         {"8B", 8},           {"64K", 65536},    {"64 KiB", 65536},
        {"1M", 1 << 20},  {"3 GiB", 3ull << 30}, {"16Ti", 16ull << 40},
        {"16777215 TiB", 16777215ull << 40}, {"18446744073709551615", UINT64_MAX}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        CU_ASSERT_EQUAL(np_parse_size(OPT, ok[i].t, 0, UINT64_MAX, &v, &e), NP_OK);
        CU_ASSERT_EQUAL(v, ok[i].want);
    }
    CU_ASSERT_EQUAL(np_parse_size(OPT, "16777216 TiB", 0, UINT64_MAX, &v, &e), NP_ERR_USAGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "outside 0 .. 2^64 - 1 bytes"));
    CU_ASSERT_EQUAL(np_parse_size(OPT, "64KB", 0, UINT64_MAX, &v, &e), NP_ERR_USAGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "ambiguous"));
    CU_ASSERT_EQUAL(np_parse_size(OPT, "0", 1, 100, &v, &e), NP_ERR_USAGE);
    CU_ASSERT_EQUAL(np_parse_size(OPT, "1 ", 0, 100, &v, &e), NP_ERR_USAGE);
    CU_ASSERT_EQUAL(np_parse_size(OPT, "1X", 0, 100, &v, &e), NP_ERR_USAGE);
    CU_ASSERT_EQUAL(np_parse_size(OPT, "K", 0, 100, &v, &e), NP_ERR_USAGE);
    CU_ASSERT_EQUAL(v, UINT64_MAX); /* unchanged by the failures */
}

TEST(dimensions_are_checked_one_by_one_and_in_product)
{
    np_err e = {0};
    uint64_t d[3] = {0};
    int n = 0;
    CU_ASSERT_EQUAL(np_parse_dims(OPT, "4x8", 2, 3, 1, 65536, UINT32_MAX, d, &n, &e), NP_OK);
    CU_ASSERT_EQUAL(n, 2);
    CU_ASSERT_EQUAL(d[0], 4);
    CU_ASSERT_EQUAL(d[1], 8);
    CU_ASSERT_EQUAL(np_parse_dims(OPT, "2X3x5", 1, 3, 1, 9, 100, d, &n, &e), NP_OK);
    CU_ASSERT_EQUAL(n, 3);
    CU_ASSERT_EQUAL(d[2], 5);
    /* the audit's examples: wrap, junk, too many, too big in product, zero, sign */
    CU_ASSERT_EQUAL(np_parse_dims(OPT, "4294967297x1", 2, 2, 1, 65536, UINT32_MAX, d, &n, &e),
                    NP_ERR_USAGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "each dimension must be in 1 .. 65536, got '4294967297'"));
    CU_ASSERT_EQUAL(np_parse_dims(OPT, "4x8junk", 2, 3, 1, 65536, UINT32_MAX, d, &n, &e),
                    NP_ERR_USAGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "junk after the dimensions"));
    CU_ASSERT_EQUAL(np_parse_dims(OPT, "65537x65537", 2, 3, 1, 1 << 20, 1 << 20, d, &n, &e),
                    NP_ERR_USAGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "more than 1048576 elements"));
    CU_ASSERT_EQUAL(np_parse_dims(OPT, "2x2x2x2", 2, 3, 1, 9, 99, d, &n, &e), NP_ERR_USAGE);
    CU_ASSERT_EQUAL(np_parse_dims(OPT, "-1x4", 2, 3, 1, 9, 99, d, &n, &e), NP_ERR_USAGE);
    CU_ASSERT_EQUAL(np_parse_dims(OPT, "0x4", 2, 3, 1, 9, 99, d, &n, &e), NP_ERR_USAGE);
    CU_ASSERT_EQUAL(np_parse_dims(OPT, "4", 2, 3, 1, 9, 99, d, &n, &e), NP_ERR_USAGE);
    CU_ASSERT_EQUAL(np_parse_dims(OPT, "4x", 2, 3, 1, 9, 99, d, &n, &e), NP_ERR_USAGE);
    CU_ASSERT_EQUAL(n, 3);
    CU_ASSERT_EQUAL(d[0], 2);
}

TEST(lists_take_every_item_and_range_and_are_counted_before_they_are_written)
{
    np_err e = {0};
    uint64_t v[16];
    size_t n = 0;
    CU_ASSERT_EQUAL(np_parse_list(OPT, "0-1,4,6-10:2", 0, 100, v, 16, &n, &e), NP_OK);
    uint64_t want[] = {0, 1, 4, 6, 8, 10};
    CU_ASSERT_EQUAL(n, 6);
    for (size_t i = 0; i < 6 && i < n; i++)
        CU_ASSERT_EQUAL(v[i], want[i]);
    CU_ASSERT_EQUAL(np_parse_list(OPT, "0-1,2-3", 0, 100, v, 16, &n, &e), NP_OK);
    CU_ASSERT_EQUAL(n, 4); /* a second range is not dropped */
    CU_ASSERT_EQUAL(v[3], 3);
    CU_ASSERT_EQUAL(np_parse_list(OPT, "0,4294967297", 0, UINT32_MAX, v, 16, &n, &e),
                    NP_ERR_USAGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "'4294967297' in '0,4294967297' is outside 0 .. "
                                         "4294967295"));
    CU_ASSERT_EQUAL(np_parse_list(OPT, "0-3x", 0, 100, v, 16, &n, &e), NP_ERR_USAGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "unexpected 'x'"));
    /* a billion values are refused by counting, with nothing allocated or written */
    CU_ASSERT_EQUAL(np_parse_list(OPT, "0-1000000000", 0, UINT32_MAX, NULL, 65536, &n, &e),
                    NP_ERR_USAGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "more than 65536 values"));
    CU_ASSERT_EQUAL(np_parse_list(OPT, "0-18446744073709551615", 0, UINT64_MAX, NULL,
                                  SIZE_MAX, &n, &e), NP_ERR_USAGE);
    static const char *bad[] = {"", ",", "1,", ",1", "3-1", "1-", "1-4:0", "1--2", "1-4:2:1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CU_ASSERT_EQUAL(np_parse_list(OPT, bad[i], 0, 100, v, 16, &n, &e), NP_ERR_USAGE);
    CU_ASSERT_EQUAL(n, 4);
    CU_ASSERT_EQUAL(np_parse_list(OPT, "7", 0, 100, NULL, 16, &n, &e), NP_OK);
    CU_ASSERT_EQUAL(n, 1);
}

TEST(enums_suggest_the_nearest_name_or_one_it_begins)
{
    static const char *const df[] = {"os", "ws", "is"};
    np_err e = {0};
    size_t i = 9;
    CU_ASSERT_EQUAL(np_parse_enum(NP_SRC_OPT("--dataflow"), "ws", "dataflow", df, 3, &i, &e),
                    NP_OK);
    CU_ASSERT_EQUAL(i, 1);
    CU_ASSERT_EQUAL(np_parse_enum(NP_SRC_OPT("--dataflow"), "xs", "dataflow", df, 3, &i, &e),
                    NP_ERR_USAGE);
    CU_ASSERT_STRING_EQUAL(e.msg, "--dataflow: unknown dataflow 'xs'; did you mean 'os'? "
                                  "(one of os, ws, is)");
    static const char *const models[] = {"mlp", "gpt-tiny", "gpt2-small", "resnet50"};
    CU_ASSERT_STRING_EQUAL(np_suggest_name("gpt", models, 4), "gpt-tiny");
    CU_ASSERT_STRING_EQUAL(np_suggest_name("resnet", models, 4), "resnet50");
    CU_ASSERT_STRING_EQUAL(np_suggest_name("resnt50", models, 4), "resnet50");
    CU_ASSERT_PTR_NULL(np_suggest_name("zzzzz", models, 4));
    static const char *const opts[] = {"arch", "topology", "json"};
    CU_ASSERT_STRING_EQUAL(np_suggest_name("arhc", opts, 3), "arch");
    CU_ASSERT_STRING_EQUAL(np_suggest_name("toplogy", opts, 3), "topology");
    CU_ASSERT_STRING_EQUAL(np_suggest_name("jsno", opts, 3), "json");
    bool b = false;
    CU_ASSERT_EQUAL(np_parse_bool(OPT, "yes", &b, &e), NP_OK);
    CU_ASSERT_TRUE(b);
    CU_ASSERT_EQUAL(np_parse_bool(OPT, "off", &b, &e), NP_OK);
    CU_ASSERT_FALSE(b);
    CU_ASSERT_EQUAL(np_parse_bool(OPT, "maybe", &b, &e), NP_ERR_USAGE);
}

TEST(names_must_be_utf8_without_control_characters)
{
    CU_ASSERT_EQUAL(np_utf8_invalid_at("abc", 3), 3);
    CU_ASSERT_EQUAL(np_utf8_invalid_at("\xc2\xb5s", 3), 3);              /* µs */
    CU_ASSERT_EQUAL(np_utf8_invalid_at("\xf0\x9f\x98\x80", 4), 4);       /* U+1F600 */
    CU_ASSERT_EQUAL(np_utf8_invalid_at("a\xff", 2), 1);
    CU_ASSERT_EQUAL(np_utf8_invalid_at("\xc0\x80", 2), 0);               /* overlong NUL */
    CU_ASSERT_EQUAL(np_utf8_invalid_at("\xe0\x80\xaf", 3), 0);           /* overlong '/' */
    CU_ASSERT_EQUAL(np_utf8_invalid_at("\xed\xa0\x80", 3), 0);           /* a surrogate */
    CU_ASSERT_EQUAL(np_utf8_invalid_at("\xf4\x90\x80\x80", 4), 0);       /* past U+10FFFF */
    CU_ASSERT_EQUAL(np_utf8_invalid_at("ab\xe2\x82", 4), 2);             /* cut short */
    np_err e = {0};
    CU_ASSERT_EQUAL(np_parse_name(NP_SRC_AT("t.csv", 2, 1, NULL), "conv\xff", 64, &e),
                    NP_ERR_SYNTAX);
    CU_ASSERT_EQUAL(e.col, 5);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "byte 5 (0xff) is not valid UTF-8"));
    CU_ASSERT_EQUAL(np_parse_name(OPT, "a\tb", 64, &e), NP_ERR_USAGE);
    CU_ASSERT_EQUAL(np_parse_name(OPT, "", 64, &e), NP_ERR_USAGE);
    CU_ASSERT_EQUAL(np_parse_name(OPT, "abcdef", 5, &e), NP_ERR_USAGE);
    CU_ASSERT_EQUAL(np_parse_name(OPT, "r\xc3\xa9seau", 64, &e), NP_OK);
}

TEST(human_figures_are_grouped_and_scaled)
{
    char b[NP_HUMAN_MAX];
    CU_ASSERT_STRING_EQUAL(np_human_count(50553, b, sizeof b), "50,553");
    CU_ASSERT_STRING_EQUAL(np_human_count(0, b, sizeof b), "0");
    CU_ASSERT_STRING_EQUAL(np_human_count(999, b, sizeof b), "999");
    CU_ASSERT_STRING_EQUAL(np_human_count(1000, b, sizeof b), "1,000");
    CU_ASSERT_STRING_EQUAL(np_human_count(UINT64_MAX, b, sizeof b), "18,446,744,073,709,551,615");
    CU_ASSERT_STRING_EQUAL(np_human_int(-25557032, b, sizeof b), "-25,557,032");
    CU_ASSERT_STRING_EQUAL(np_human_int(INT64_MIN, b, sizeof b), "-9,223,372,036,854,775,808");
    CU_ASSERT_STRING_EQUAL(np_human_bytes(8, b, sizeof b), "8 B");
    CU_ASSERT_STRING_EQUAL(np_human_bytes(1023, b, sizeof b), "1023 B");
    CU_ASSERT_STRING_EQUAL(np_human_bytes(8192, b, sizeof b), "8.00 KiB");
    CU_ASSERT_STRING_EQUAL(np_human_bytes(1536ull << 20, b, sizeof b), "1.50 GiB");
    /* 666062.4 MiB from the audit: 650 GiB */
    CU_ASSERT_STRING_EQUAL(np_human_bytes((uint64_t)(666062.4 * 1048576), b, sizeof b),
                           "650 GiB");
    CU_ASSERT_STRING_EQUAL(np_human_bytes((1ull << 20) - 1, b, sizeof b), "1.00 MiB");
    CU_ASSERT_STRING_EQUAL(np_human_bytes(UINT64_MAX, b, sizeof b), "16.0 EiB");
    CU_ASSERT_STRING_EQUAL(np_human_ps(750, b, sizeof b), "750 ps");
    CU_ASSERT_STRING_EQUAL(np_human_ps(50553000, b, sizeof b), "50.6 \xc2\xb5s");
    CU_ASSERT_STRING_EQUAL(np_human_ps(1250000000000ull, b, sizeof b), "1.25 s");
    CU_ASSERT_STRING_EQUAL(np_human_ps(999999, b, sizeof b), "1.00 \xc2\xb5s");
    CU_ASSERT_STRING_EQUAL(np_human_ps(12345000000000000ull, b, sizeof b), "12,345 s");
    /* long durations: 1000 s = 16.7 min, 5.79 h = 20,844 s, 50,000 h = 2,083 days */
    CU_ASSERT_STRING_EQUAL(np_human_s(1.25, b, sizeof b), "1.25 s");
    CU_ASSERT_STRING_EQUAL(np_human_s(1000, b, sizeof b), "16.7 min");
    CU_ASSERT_STRING_EQUAL(np_human_s(20844, b, sizeof b), "5.79 h");
    CU_ASSERT_STRING_EQUAL(np_human_s(3 * 86400, b, sizeof b), "3.00 days");
    CU_ASSERT_STRING_EQUAL(np_human_s(50000 * 3600.0, b, sizeof b), "2,083 days");
    CU_ASSERT_STRING_EQUAL(np_human_s(-1, b, sizeof b), "0 s");
    CU_ASSERT_STRING_EQUAL(np_human_si(735135.908e9, "FLOP", b, sizeof b), "735 TFLOP");
    CU_ASSERT_STRING_EQUAL(np_human_si(4.089e9, "MAC", b, sizeof b), "4.09 GMAC");
    CU_ASSERT_STRING_EQUAL(np_human_si(12, "FLOP", b, sizeof b), "12 FLOP");
    CU_ASSERT_STRING_EQUAL(np_human_si(-1500, "B/s", b, sizeof b), "-1.50 kB/s");
    /* a field of 12 columns: "50.6 µs" is 8 bytes in 7 columns, so printf needs width 13 */
    CU_ASSERT_EQUAL(np_human_width("50.6 \xc2\xb5s", 12), 13);
    CU_ASSERT_EQUAL(np_human_width("750 ps", 12), 12);
    char row[64];
    np_human_ps(50553000, b, sizeof b);
    snprintf(row, sizeof row, "[%*s]", np_human_width(b, 10), b);
    CU_ASSERT_STRING_EQUAL(row, "[   50.6 \xc2\xb5s]"); /* 3 spaces + 7 columns */
}

/* Writes n bytes of 'a' to a new file in dir; returns its path (static). */
static const char *write_file_of(const char *dir, size_t n)
{
    static char path[256];
    snprintf(path, sizeof path, "%s/f%zu", dir, n);
    FILE *f = fopen(path, "wb");
    for (size_t i = 0; i < n; i++)
        fputc('a', f);
    fclose(f);
    return path;
}

TEST(file_reads_take_exactly_the_cap_and_refuse_more_directories_and_devices)
{
    char dir[] = "/tmp/npusim_parse_XXXXXX";
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
    np_err e = {0};
    char *t = NULL;
    size_t len = 0;
    CU_ASSERT_EQUAL(np_read_file(write_file_of(dir, 65536), 65536, "a test file", &t, &len, &e),
                    NP_OK);
    CU_ASSERT_EQUAL(len, 65536);
    CU_ASSERT_EQUAL(t ? t[65536] : 1, '\0');
    free(t);
    CU_ASSERT_EQUAL(np_read_file(write_file_of(dir, 65537), 65536, "a test file", &t, &len, &e),
                    NP_ERR_RANGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "larger than 64.0 KiB (the limit for a test file)"));
    CU_ASSERT_PTR_NULL(t);
    CU_ASSERT_EQUAL(np_read_file(write_file_of(dir, 0), 10, "x", &t, &len, &e), NP_OK);
    CU_ASSERT_EQUAL(len, 0);
    free(t);
    CU_ASSERT_EQUAL(np_read_file(dir, 10, "a model file", &t, &len, &e), NP_ERR_IO);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "is a directory, not a model file"));
    CU_ASSERT_EQUAL(np_read_file("/dev/zero", 10, "a model file", &t, &len, &e), NP_ERR_IO);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "is a device"));
    CU_ASSERT_EQUAL(np_read_file("/nonexistent/x", 10, "x", &t, &len, &e), NP_ERR_IO);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CU_ASSERT_EQUAL(system(cmd), 0);
}

/* A buffer larger than a pipe holds (64 KiB on Linux) goes through whole: a child writes
 * 200,000 bytes of a known pattern, the parent reads them all back, then the end of input
 * stops a read that asks for more. */
TEST(whole_buffers_cross_a_pipe)
{
    enum { N = 200000 };
    static unsigned char out[N], in[N + 10];
    for (size_t i = 0; i < N; i++)
        out[i] = (unsigned char)(i * 7 + i / 251);
    int fd[2];
    CU_ASSERT_FATAL(pipe(fd) == 0);
    pid_t pid = fork();
    CU_ASSERT_FATAL(pid >= 0);
    if (pid == 0) {
        close(fd[0]);
        _exit(np_write_all(fd[1], out, N) ? 0 : 1);
    }
    close(fd[1]);
    CU_ASSERT_EQUAL(np_read_full(fd[0], in, N + 10), (size_t)N);
    CU_ASSERT_EQUAL(memcmp(in, out, N), 0);
    close(fd[0]);
    int ws;
    CU_ASSERT(waitpid(pid, &ws, 0) == pid && WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
    /* a write to a pipe nobody reads fails (EPIPE, SIGPIPE ignored) */
    CU_ASSERT_FATAL(pipe(fd) == 0);
    close(fd[0]);
    void (*old)(int) = signal(SIGPIPE, SIG_IGN);
    CU_ASSERT(!np_write_all(fd[1], out, 16));
    signal(SIGPIPE, old);
    close(fd[1]);
}
