/* test_sweep.c — `npusim sweep` (traces/sweep.h): the file's points and errors, a 24-point
 * sweep on a pool of 2 whose rows are what `npusim layer` says for each point, a sweep
 * killed (SIGKILL) halfway and resumed that gives exactly the bytes of an uninterrupted one,
 * and the same sweep under `mpirun -np 2` (when npusim is built with MPI); then the hostile
 * inputs of issue 26, each with the exact status and message the rules give: values that are
 * not finite decimals, keys twice, a second document, deep nesting, the points cap, 70
 * metrics and a 300-character path, resume through the CSV reader (quoted line breaks,
 * another sweep's or an edited grid's rows), Ctrl-C, results that are not regular files,
 * error text cut at a character's boundary, and exit 3 when a point failed. */
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "csv.h"
#include "harness.h"
#include "sweep.h"
#include "sweep_impl.h"

static char dir[64];

static const char *tmp(const char *name)
{
    static char buf[8][300];
    static int k;
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/npusim_sweep_XXXXXX");
        CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
    }
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs(text, f);
    fclose(f);
}

/* 3 x 2 x 2 x 2 = 24 points: array rows, array columns, link bandwidth, cores. */
static const char sweep24[] =
    "command: [layer, --gemm, \"512,256,128\"]\n"
    "arch: tiny\n"
    "grid:\n"
    "  core.array_rows: [4, 8, 16]\n"
    "  core.array_cols: [4, 8]\n"
    "  system.link_gb_per_s: [25, 50]\n"
    "  --cores: [1, 2]\n"
    "metrics:\n"
    "  cycles: layers/0/total_cycles\n"
    "  util_pct: layers/0/overall_util_pct\n"
    "pareto: {cycles: min, util_pct: max}\n";

TEST(a_grid_expands_with_its_last_axis_fastest_then_zip_then_points)
{
    const char *p = tmp("g.yaml");
    write_file(p, "command: [layer, --gemm, \"8,8,8\"]\n"
                  "grid:\n  core.array_rows: [4, 8]\n  --cores: [1, 2]\n"
                  "zip:\n  core.array_cols: [4, 8]\n  core.sram_bytes: [64 KiB, 128 KiB]\n"
                  "points:\n  - {core.array_rows: 16, --dataflow: os}\n"
                  "metrics: {c: layers/0/total_cycles}\n");
    sweep *s;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(sweep_load(p, SWEEP_MAX_POINTS_DEFAULT, &s, &e), NP_OK);
    CU_ASSERT_EQUAL(sweep_points(s), 2u * 2u * 2u + 1u);
    /* point 3: rows 4, cores 2, the second zip value */
    const char *want3[] = {"layer", "--gemm", "8,8,8", "--set", "core.array_rows=4", "--cores",
                           "2", "--set", "core.array_cols=8", "--set", "core.sram_bytes=128 KiB",
                           "--json", NULL};
    const char *const *a = sweep_point_args(s, 3);
    for (size_t i = 0; want3[i] || a[i]; i++) {
        CU_ASSERT_PTR_NOT_NULL_FATAL(a[i]);
        CU_ASSERT_PTR_NOT_NULL_FATAL(want3[i]);
        CU_ASSERT_STRING_EQUAL(a[i], want3[i]);
    }
    const char *want8[] = {"layer", "--gemm", "8,8,8", "--set", "core.array_rows=16",
                           "--dataflow", "os", "--json", NULL};
    a = sweep_point_args(s, 8);
    for (size_t i = 0; want8[i] || a[i]; i++) {
        CU_ASSERT_PTR_NOT_NULL_FATAL(a[i]);
        CU_ASSERT_PTR_NOT_NULL_FATAL(want8[i]);
        CU_ASSERT_STRING_EQUAL(a[i], want8[i]);
    }
    sweep_free(s);
}

/* sweep_load of text fails with status st at line:col, its message containing want. */
static void bad_file(const char *text, np_status st, int line, int col, const char *want)
{
    const char *p = tmp("bad.yaml");
    write_file(p, text);
    sweep *s = NULL;
    np_err e = {0};
    CU_ASSERT_EQUAL(sweep_load(p, SWEEP_MAX_POINTS_DEFAULT, &s, &e), st);
    CU_ASSERT_PTR_NULL(s);
    CU_ASSERT_STRING_EQUAL(e.file, p);
    CU_ASSERT_EQUAL(e.line, line);
    if (col)
        CU_ASSERT_EQUAL(e.col, col);
    if (!strstr(e.msg, want) || e.line != line || (col && e.col != col))
        fprintf(stderr, "expected '%s' in: %d:%d: %s\n", want, e.line, e.col, e.msg);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, want));
}

TEST(a_bad_sweep_file_is_an_error_with_its_position)
{
    static const char m[] = "metrics: {c: layers/0/total_cycles}\n";
    char t[512];
    bad_file("command: [layer\ngrid: {", NP_ERR_SYNTAX, 2, 0, "");
    snprintf(t, sizeof t, "command: [layer]\ngird: {core.array_rows: [4]}\n%s", m);
    bad_file(t, NP_ERR_UNKNOWN_KEY, 2, 1, "unknown key 'gird'");
    snprintf(t, sizeof t, "command: [layer]\ngrid:\n  core.arry_rows: [4]\n%s", m);
    bad_file(t, NP_ERR_UNKNOWN_KEY, 3, 3, "did you mean core.array_rows");
    snprintf(t, sizeof t, "command: [layer]\nzip:\n  core.array_rows: [4, 8]\n"
                          "  core.array_cols: [4]\n%s", m);
    bad_file(t, NP_ERR_INCONSISTENT, 4, 20, "different number of values");
    bad_file("command: [layer]\ngrid: {core.array_rows: [4]}\n", NP_ERR_MISSING, 1, 1, "metrics");
    bad_file("grid: {core.array_rows: [4]}\nmetrics: {c: x}\n", NP_ERR_MISSING, 1, 1, "command");
    snprintf(t, sizeof t, "command: [layer]\ngrid: {core.array_rows: []}\n%s", m);
    bad_file(t, NP_ERR_TYPE, 2, 25, "one or more values");
    snprintf(t, sizeof t, "command: [layer]\ngrid: {core.array_rows: [4]}\n%spareto: {d: min}\n", m);
    bad_file(t, NP_ERR_UNKNOWN_KEY, 4, 10, "not one of the metrics");
    snprintf(t, sizeof t, "command: [layer]\ngrid: {core.array_rows: [4]}\n%spareto: {c: least}\n", m);
    bad_file(t, NP_ERR_TYPE, 4, 13, "min or max");
}

static harness_run sweep_cmd(const char *yaml, const char *csv, const char *extra)
{
    const char *args[] = {"sweep", yaml, "-j", "2", "-o", csv, extra, NULL};
    return harness_npusim_in(NULL, args);
}

static char *slurp(const char *path)
{
    char *s = harness_read_file(path, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    return s;
}

static size_t lines(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = 0;
    int c;
    while ((c = fgetc(f)) != EOF)
        n += c == '\n';
    fclose(f);
    return n;
}

/* The uninterrupted reference run (made once). */
static const char *reference(void)
{
    static char csv[300];
    if (csv[0])
        return csv;
    const char *yaml = tmp("s24.yaml");
    write_file(yaml, sweep24);
    snprintf(csv, sizeof csv, "%s", tmp("ref.csv"));
    harness_run r = sweep_cmd(yaml, csv, NULL);
    if (r.exit_status)
        fprintf(stderr, "sweep: %s\n", r.err);
    CU_ASSERT_EQUAL(r.exit_status, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "24 points: 24 ran, 0 resumed, 0 failed"));
    harness_run_free(&r);
    return csv;
}

TEST(a_24_point_sweep_on_two_workers_gives_each_points_own_figures_in_point_order)
{
    const char *csv = reference();
    CU_ASSERT_EQUAL(lines(csv), 25u);
    char *text = slurp(csv);
    CU_ASSERT_EQUAL(strncmp(text, "point,status,core.array_rows,core.array_cols,"
                                  "system.link_gb_per_s,--cores,cycles,util_pct,error\n", 80), 0);
    /* rows in point order, each ok; points 5 and 22 against npusim layer run by hand */
    char *line = strchr(text, '\n') + 1;
    for (int p = 0; p < 24; p++) {
        CU_ASSERT_EQUAL(atoi(line), p);
        CU_ASSERT_PTR_NOT_NULL(strstr(line, ",ok,"));
        if (p == 5 || p == 22) {
            /* 5 = rows 4, cols 8, link 25, cores 2; 22 = rows 16, cols 8, link 50, cores 1 */
            const char *rows = p == 5 ? "core.array_rows=4" : "core.array_rows=16";
            const char *cores = p == 5 ? "2" : "1";
            harness_run r = harness_npusim("layer", "--gemm", "512,256,128", "--arch", "tiny",
                                           "--set", rows, "--set", "core.array_cols=8",
                                           "--cores", cores, "--json", NULL);
            CU_ASSERT_EQUAL_FATAL(r.exit_status, 0);
            json_t *j = json_loads(r.out, 0, NULL);
            long long cyc = json_integer_value(
                json_object_get(json_array_get(json_object_get(j, "layers"), 0), "total_cycles"));
            char want[64];
            snprintf(want, sizeof want, ",%lld,", cyc);
            CU_ASSERT(strstr(line, want) && strstr(line, want) < strchr(line, '\n'));
            json_decref(j);
            harness_run_free(&r);
        }
        line = strchr(line, '\n') + 1;
    }
    free(text);
    char *jl = sweep_jsonl_path(csv);
    CU_ASSERT_EQUAL(lines(jl), 24u);
    free(jl);
}

TEST(a_sweep_killed_halfway_and_resumed_has_exactly_the_rows_of_an_uninterrupted_one)
{
    const char *ref = reference();
    const char *yaml = tmp("s24.yaml"), *csv = tmp("killed.csv");
    char *jl = sweep_jsonl_path(csv), *ref_jl = sweep_jsonl_path(ref);
    pid_t pid = fork();
    CU_ASSERT_FATAL(pid >= 0);
    if (pid == 0) {
        freopen("/dev/null", "w", stdout);
        execl(NPUSIM_BIN, NPUSIM_BIN, "sweep", yaml, "-j", "2", "-o", csv, (char *)NULL);
        _exit(127);
    }
    /* kill it once a quarter of the rows are there (the header is line 1) */
    struct timespec d = {0, 2000000};
    for (int i = 0; i < 5000 && lines(csv) < 7; i++)
        nanosleep(&d, NULL);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    size_t kept = lines(csv);
    CU_ASSERT(kept >= 7 && kept < 25); /* really halfway */
    /* without --resume the results are not overwritten */
    harness_run r = sweep_cmd(yaml, csv, NULL);
    CU_ASSERT_EQUAL(r.exit_status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "--resume"));
    harness_run_free(&r);
    r = sweep_cmd(yaml, csv, "--resume");
    CU_ASSERT_EQUAL(r.exit_status, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "24 points:"));
    CU_ASSERT_PTR_NULL(strstr(r.out, " 0 resumed"));
    harness_run_free(&r);
    char *a = slurp(csv), *b = slurp(ref), *c = slurp(jl), *e = slurp(ref_jl);
    CU_ASSERT_STRING_EQUAL(a, b);
    CU_ASSERT_STRING_EQUAL(c, e);
    free(a), free(b), free(c), free(e);
    /* a torn last line (a write cut by the kill) is dropped, not kept */
    FILE *f = fopen(csv, "a");
    fputs("3,ok,4,", f); /* torn */
    fclose(f);
    r = sweep_cmd(yaml, csv, "--resume");
    CU_ASSERT_EQUAL(r.exit_status, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "0 ran, 24 resumed"));
    harness_run_free(&r);
    a = slurp(csv), b = slurp(ref);
    CU_ASSERT_STRING_EQUAL(a, b);
    free(a), free(b);
    /* results of another sweep are refused */
    const char *other = tmp("other.yaml");
    write_file(other, "command: [layer, --gemm, \"8,8,8\"]\ngrid: {--cores: [1]}\n"
                      "metrics: {c: layers/0/total_cycles}\n");
    r = sweep_cmd(other, csv, "--resume");
    CU_ASSERT_EQUAL(r.exit_status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "another sweep"));
    harness_run_free(&r);
    free(jl), free(ref_jl);
}

TEST(a_point_that_fails_is_a_row_with_its_error)
{
    const char *yaml = tmp("fail.yaml"), *csv = tmp("fail.csv");
    write_file(yaml, "command: [layer, --gemm, \"64,64,64\"]\narch: tiny\n"
                     "grid: {core.array_rows: [4, 0]}\nmetrics: {c: layers/0/total_cycles}\n");
    harness_run r = sweep_cmd(yaml, csv, NULL);
    /* the sweep ran (summary, rows) but a point failed: exit 3, saying so */
    CU_ASSERT_EQUAL(r.exit_status, 3);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "2 points: 2 ran, 0 resumed, 1 failed"));
    char want[600];
    snprintf(want, sizeof want, "npusim: %s: 1 of 2 points failed (status error; the row of each "
             "says why)\n", csv);
    EXPECT_STR(r.err, want);
    harness_run_free(&r);
    char *text = slurp(csv);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "\n0,ok,4,"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "\n1,error,0,,exit 2: "));
    free(text);
}

TEST(the_same_sweep_under_mpirun_gives_the_same_csv)
{
#ifndef NPUSIM_HAVE_MPI
    fprintf(stderr, "sweep: npusim is built without MPI; nothing to compare\n");
    return;
#else
    const char *ref = reference();
    const char *yaml = tmp("s24.yaml"), *csv = tmp("mpi.csv");
    char cmd[1200];
    snprintf(cmd, sizeof cmd,
             "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
             "ASAN_OPTIONS=\"$ASAN_OPTIONS:detect_leaks=0\" " /* OpenMPI's own, under ASan */
             "timeout 120 mpirun -np 2 "
             "--oversubscribe '%s' sweep '%s' -o '%s' >'%s.out' 2>&1",
             NPUSIM_BIN, yaml, csv, csv);
    int st = system(cmd);
    if (st) {
        char *log = harness_read_file(tmp("mpi.csv.out"), NULL);
        fprintf(stderr, "mpirun: status %d: %s\n", st, log ? log : "");
        free(log);
    }
    CU_ASSERT_EQUAL_FATAL(st, 0);
    char *a = slurp(csv), *b = slurp(ref);
    CU_ASSERT_STRING_EQUAL(a, b);
    free(a), free(b);
#endif
}

/* ---- the hostile inputs of issue 26 ------------------------------------------------------------ */

/* A one-axis sweep file whose second value is v (line 4, column 24). */
static void bad_value(const char *v, np_status st, const char *want)
{
    char t[512];
    snprintf(t, sizeof t, "command: [layer, --gemm, \"64,64,64\"]\narch: tiny\ngrid:\n"
                          "  core.array_rows: [4, %s]\nmetrics: {c: layers/0/total_cycles}\n", v);
    bad_file(t, st, 4, 24, want);
}

TEST(a_swept_value_that_is_not_a_finite_decimal_number_is_refused_at_its_position)
{
    bad_value("nan", NP_ERR_RANGE, "core.array_rows: 'nan' is not a finite number");
    bad_value("-inf", NP_ERR_RANGE, "core.array_rows: '-inf' is not a finite number");
    bad_value("1e999", NP_ERR_RANGE, "core.array_rows: '1e999' is larger than a double holds");
    bad_value("1e-999", NP_ERR_RANGE, "'1e-999' is too small for a double");
    bad_value("0x2", NP_ERR_SYNTAX, "'0x2' is hexadecimal: write the value in decimal");
    bad_value("99999999999999999999", NP_ERR_RANGE,
              "expected an integer in -9223372036854775808 .. 9223372036854775807, got "
              "'99999999999999999999'");
    /* in points: too, and as a command it is exit 2 (bad input), not 1 */
    bad_file("command: [layer]\nmetrics: {c: x}\npoints:\n  - {--cores: 1}\n  - {--cores: NaN}\n",
             NP_ERR_RANGE, 5, 15, "--cores: 'NaN' is not a finite number");
    const char *args[] = {"sweep", tmp("bad.yaml"), "--dry-run", NULL};
    harness_run r = harness_npusim_in(NULL, args);
    CU_ASSERT_EQUAL(r.exit_status, 2);
    harness_run_free(&r);
}

/* What sweep_value records for text in the JSON lines, dumped as JSON ("" when refused). */
static void value_json(const char *text, const char *want)
{
    json_t *j = NULL;
    np_err e = {0};
    char *got = NULL;
    if (sweep_value(NULL, text, &j, &e) == NP_OK)
        got = json_dumps(j, JSON_ENCODE_ANY | JSON_REAL_PRECISION(12));
    EXPECT_STR(got ? got : "", want);
    free(got);
    json_decref(j);
}

TEST(a_swept_value_is_a_json_number_only_when_that_number_is_exactly_its_text)
{
    value_json("9223372036854775807", "9223372036854775807");
    value_json("-9223372036854775808", "-9223372036854775808");
    value_json("9223372036854775808", "");
    value_json("1.5", "1.5");
    value_json("2.5e3", "2500.0");
    value_json("0.1234567890123", "\"0.1234567890123\""); /* 13 digits: 12 would round it */
    value_json("64 KiB", "\"64 KiB\"");
    value_json("512,256,128", "\"512,256,128\"");
    value_json("0x10", "");
    value_json("inf", "");
}

TEST(a_sweep_file_with_a_key_twice_a_second_document_or_deep_nesting_is_refused)
{
    static const char m[] = "metrics: {c: layers/0/total_cycles}\n";
    char t[1024];
    snprintf(t, sizeof t, "command: [layer]\n%sgrid: {core.array_rows: [4]}\ncommand: [run]\n", m);
    bad_file(t, NP_ERR_DUPLICATE, 4, 1, "duplicate key 'command' (first at line 1)");
    snprintf(t, sizeof t, "command: [layer]\n%sgrid:\n  core.array_rows: [4, 8]\n"
                          "  core.array_rows: [16]\n", m);
    bad_file(t, NP_ERR_DUPLICATE, 5, 3, "duplicate key 'core.array_rows' (first at line 4)");
    snprintf(t, sizeof t, "command: [layer]\n%sgrid: {core.array_rows: [4]}\n"
                          "zip: {core.array_rows: [8]}\n", m);
    bad_file(t, NP_ERR_DUPLICATE, 4, 7, "'core.array_rows' is an axis of grid: and of zip:");
    snprintf(t, sizeof t, "command: [layer]\n%sgrid: {core.array_rows: [4]}\n---\n"
                          "command: [run]\n", m);
    bad_file(t, NP_ERR_SYNTAX, 4, 1, "a second YAML document");
    /* 100,000 levels: the top mapping is level 1, so the 16th '[' (column 7 + 15) is the
     * 17th level, refused */
    size_t deep = 100000, n = strlen(m) + 32 + 2 * deep;
    char *d = malloc(n);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    int k = snprintf(d, n, "command: [layer]\n%sgrid: ", m);
    memset(d + k, '[', deep);
    memset(d + k + deep, ']', deep);
    d[k + 2 * deep] = '\0';
    bad_file(d, NP_ERR_RANGE, 3, 7 + 15, "nested deeper than 16 levels");
    free(d);
}

TEST(a_sweep_of_more_points_than_the_cap_is_refused_before_any_point_is_made)
{
    /* 8 axes of 100 values: 100^8 = 10^16 points */
    char *t = malloc(8 * 600 + 256), *o = t;
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    o += sprintf(o, "command: [layer]\nmetrics: {c: x}\ngrid:\n");
    for (int a = 0; a < 8; a++) {
        o += sprintf(o, "  --f%d: [0", a);
        for (int v = 1; v < 100; v++)
            o += sprintf(o, ",%d", v);
        o += sprintf(o, "]\n");
    }
    bad_file(t, NP_ERR_RANGE, 4, 3, "the sweep has 10000000000000000 points, more than the cap "
                                    "of 100000 (--max-points N raises it)");
    free(t);
    /* 2 x 2 + 1 given = 5 points: a cap of 5 takes them, 4 does not */
    const char *p = tmp("cap.yaml");
    write_file(p, "command: [layer]\nmetrics: {c: x}\ngrid: {--a: [1, 2], --b: [1, 2]}\n"
                  "points: [{--a: 3}]\n");
    sweep *s = NULL;
    np_err e = {0};
    CU_ASSERT_EQUAL(sweep_load(p, 5, &s, &e), NP_OK);
    CU_ASSERT_EQUAL(s ? sweep_points(s) : 0, 5u);
    sweep_free(s);
    CU_ASSERT_EQUAL(sweep_load(p, 4, &s, &e), NP_ERR_RANGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "has 5 points, more than the cap of 4"));
    /* and the command says so with --dry-run too */
    const char *args[] = {"sweep", p, "--dry-run", "--max-points", "4", NULL};
    harness_run r = harness_npusim_in(NULL, args);
    CU_ASSERT_EQUAL(r.exit_status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "cap.yaml:3:7: the sweep has 5 points"));
    harness_run_free(&r);
}

TEST(seventy_metrics_and_a_metric_path_of_300_characters_are_all_kept)
{
    /* 70 metrics, each the cycles of the layer; one more with a 300-character path whose
     * empty parts ("//") are skipped: the same value */
    const char *yaml = tmp("m70.yaml"), *csv = tmp("m70.csv");
    size_t cap = 70 * 64 + 1024;
    char *t = malloc(cap), *o = t;
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    o += sprintf(o, "command: [layer, --gemm, \"16,16,16\"]\narch: tiny\n"
                    "points: [{--cores: 1}]\nmetrics:\n");
    for (int m = 0; m < 70; m++)
        o += sprintf(o, "  m%02d: layers/0/total_cycles\n", m);
    o += sprintf(o, "  long: layers");
    for (int i = 0; i < 280; i++)
        *o++ = '/';
    o += sprintf(o, "0/total_cycles\n");
    write_file(yaml, t);
    free(t);
    harness_run r = sweep_cmd(yaml, csv, NULL);
    CU_ASSERT_EQUAL(r.exit_status, 0);
    harness_run_free(&r);
    harness_run l = harness_npusim("layer", "--gemm", "16,16,16", "--arch", "tiny", "--cores",
                                   "1", "--json", NULL);
    json_t *j = json_loads(l.out, 0, NULL);
    long long cyc = json_integer_value(
        json_object_get(json_array_get(json_object_get(j, "layers"), 0), "total_cycles"));
    json_decref(j);
    harness_run_free(&l);
    CU_ASSERT(cyc > 0);
    char *text = slurp(csv), *row = strchr(text, '\n') + 1;
    char want[72 * 24 + 64];
    o = want + sprintf(want, "0,ok,1");
    for (int m = 0; m < 71; m++)
        o += sprintf(o, ",%lld", cyc);
    sprintf(o, ",\n");
    EXPECT_STR(row, want);
    free(text);
}

TEST(resume_reads_quoted_line_breaks_and_refuses_another_sweeps_or_an_edited_grids_rows)
{
    /* a value with a line break: its CSV field is quoted over two lines */
    const char *yaml = tmp("nl.yaml"), *csv = tmp("nl.csv");
    write_file(yaml, "command: [layer, --gemm, \"16,16,16\"]\narch: tiny\n"
                     "points: [{--dataflow: ws}, {--dataflow: \"o\\ns\"}, {--dataflow: os}]\n"
                     "metrics: {c: layers/0/total_cycles}\n");
    harness_run r = sweep_cmd(yaml, csv, NULL);
    CU_ASSERT_EQUAL(r.exit_status, 3); /* point 1 fails: no dataflow "o\ns" */
    harness_run_free(&r);
    char *before = slurp(csv);
    CU_ASSERT_PTR_NOT_NULL(strstr(before, "\n1,error,\"o\ns\",,"));
    r = sweep_cmd(yaml, csv, "--resume");
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "3 points: 0 ran, 3 resumed, 1 failed"));
    harness_run_free(&r);
    char *after = slurp(csv);
    CU_ASSERT_STRING_EQUAL(after, before);
    free(before), free(after);

    /* the same columns, another command: refused, naming the row */
    const char *other = tmp("nl_other.yaml");
    write_file(other, "command: [layer, --gemm, \"32,32,32\"]\narch: tiny\n"
                      "points: [{--dataflow: ws}, {--dataflow: \"o\\ns\"}, {--dataflow: os}]\n"
                      "metrics: {c: layers/0/total_cycles}\n");
    r = sweep_cmd(other, csv, "--resume");
    CU_ASSERT_EQUAL(r.exit_status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "nl.jsonl:1: point 0 ran with other arguments than "
                                         "this sweep's point"));
    harness_run_free(&r);
    /* the grid edited: point 2's value differs (CSV line 4: the header, point 0, point 1 on
     * two lines) */
    write_file(other, "command: [layer, --gemm, \"16,16,16\"]\narch: tiny\n"
                      "points: [{--dataflow: ws}, {--dataflow: \"o\\ns\"}, {--dataflow: is}]\n"
                      "metrics: {c: layers/0/total_cycles}\n");
    r = sweep_cmd(other, csv, "--resume");
    CU_ASSERT_EQUAL(r.exit_status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "nl.csv:5: point 2 has --dataflow = 'os' in the "
                                         "results but 'is' in this sweep"));
    harness_run_free(&r);
}

TEST(points_cut_short_by_ctrl_c_are_not_recorded_and_run_again_on_resume)
{
    const char *ref = reference();
    const char *yaml = tmp("s24.yaml"), *csv = tmp("sigint.csv");
    pid_t pid = fork();
    CU_ASSERT_FATAL(pid >= 0);
    if (pid == 0) {
        setpgid(0, 0); /* its own group, as a shell runs a job: Ctrl-C reaches every point */
        freopen("/dev/null", "w", stdout);
        freopen("/dev/null", "w", stderr);
        execl(NPUSIM_BIN, NPUSIM_BIN, "sweep", yaml, "-j", "2", "-o", csv, (char *)NULL);
        _exit(127);
    }
    setpgid(pid, pid);
    struct timespec d = {0, 2000000};
    for (int i = 0; i < 5000 && lines(csv) < 5; i++)
        nanosleep(&d, NULL);
    kill(-pid, SIGINT);
    int ws;
    waitpid(pid, &ws, 0);
    CU_ASSERT(WIFEXITED(ws) && WEXITSTATUS(ws) == 2); /* interrupted: a clean exit 2 */
    char *text = slurp(csv);
    CU_ASSERT_PTR_NULL(strstr(text, "exit 130"));
    CU_ASSERT_PTR_NULL(strstr(text, ",error,"));
    free(text);
    harness_run r = sweep_cmd(yaml, csv, "--resume");
    CU_ASSERT_EQUAL(r.exit_status, 0);
    harness_run_free(&r);
    char *a = slurp(csv), *b = slurp(ref);
    CU_ASSERT_STRING_EQUAL(a, b);
    free(a), free(b);

    /* results of an older sweep that recorded the cut point as "exit 130": run again */
    char *jl = sweep_jsonl_path(csv);
    char *c = slurp(csv), *j = slurp(jl);
    char *row3 = strstr(c, "\n3,ok,") + 1, *end3 = strchr(row3, '\n');
    char *line3 = strstr(j, "{\"point\":3,"), *endl3 = strchr(line3, '\n');
    json_t *o = json_loadb(line3, (size_t)(endl3 - line3), 0, NULL);
    json_object_set_new(o, "status", json_string("error"));
    json_object_set_new(o, "metrics", json_object());
    json_object_set_new(o, "error", json_string("exit 130: "));
    char *o_text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    FILE *f = fopen(csv, "w");
    fprintf(f, "%.*s3,error,4,4,50,2,,,exit 130: %s", (int)(row3 - c), c, end3); /* point 3 */
    fclose(f);
    f = fopen(jl, "w");
    fprintf(f, "%.*s%s%s", (int)(line3 - j), j, o_text, endl3);
    fclose(f);
    free(o_text), free(c), free(j);
    r = sweep_cmd(yaml, csv, "--resume");
    CU_ASSERT_EQUAL(r.exit_status, 0);
    if (!strstr(r.out, "24 points: 1 ran, 23 resumed, 0 failed"))
        fprintf(stderr, "\n%s%s", r.out, r.err);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "24 points: 1 ran, 23 resumed, 0 failed"));
    harness_run_free(&r);
    a = slurp(csv), b = slurp(ref);
    CU_ASSERT_STRING_EQUAL(a, b);
    free(a), free(b), free(jl);
}

TEST(results_go_to_regular_files_only_and_a_failure_says_why)
{
    const char *yaml = tmp("reg.yaml");
    write_file(yaml, "command: [layer, --gemm, \"8,8,8\"]\narch: tiny\npoints: [{--cores: 1}]\n"
                     "metrics: {c: layers/0/total_cycles}\n");
    const char *link = tmp("link.csv"), *target = tmp("target.csv");
    write_file(target, "precious\n");
    CU_ASSERT_EQUAL(symlink(target, link), 0);
    struct {
        const char *out, *want;
    } cases[] = {
        {"/dev/full", "npusim: /dev/full: is a device: the results go to regular files only"},
        {"/dev/null", "npusim: /dev/null: is a device: the results go to regular files only"},
        {dir, "is a directory: the results go to regular files only"},
        {link, "link.csv: is a symbolic link: the results go to regular files only"},
        {"/nonexistent_npusim_dir/r.csv", "/nonexistent_npusim_dir/r.csv.tmp: cannot create: "
                                          "No such file or directory"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        harness_run r = sweep_cmd(yaml, cases[i].out, "--resume");
        CU_ASSERT_EQUAL(r.exit_status, 2);
        if (!strstr(r.err, cases[i].want))
            fprintf(stderr, "\n  -o %s: %s", cases[i].out, r.err);
        CU_ASSERT_PTR_NOT_NULL(strstr(r.err, cases[i].want));
        harness_run_free(&r);
    }
    struct stat sb;
    CU_ASSERT(lstat(link, &sb) == 0 && S_ISLNK(sb.st_mode)); /* still the link */
    CU_ASSERT(stat("/dev/null", &sb) == 0 && S_ISCHR(sb.st_mode));
    char *t = slurp(target);
    CU_ASSERT_STRING_EQUAL(t, "precious\n");
    free(t);
}

TEST(a_failed_points_message_is_cut_at_a_characters_boundary)
{
    /* npusim's stderr: "npusim: unknown command '" (25 bytes) then the name, 150 'é' (2
     * bytes each); at most 200 bytes are kept: 25 + 87 * 2 = 199, the 88th 'é' would pass */
    const char *yaml = tmp("utf8.yaml"), *csv = tmp("utf8.csv");
    char t[1024], name[301] = "", want[600];
    for (int i = 0; i < 150; i++)
        strcat(name, "\xc3\xa9");
    snprintf(t, sizeof t, "command: [\"%s\"]\npoints: [{--x: 1}]\nmetrics: {c: x}\n", name);
    write_file(yaml, t);
    harness_run r = sweep_cmd(yaml, csv, NULL);
    CU_ASSERT_EQUAL(r.exit_status, 3);
    harness_run_free(&r);
    snprintf(want, sizeof want, "exit 2: npusim: unknown command '%.174s...", name);
    char *text = slurp(csv);
    char row[800];
    snprintf(row, sizeof row, "0,error,1,,%s\n", want);
    EXPECT_STR(strchr(text, '\n') + 1, row);
    free(text);
    char *jl = sweep_jsonl_path(csv), *j = slurp(jl);
    json_t *o = json_loads(j, 0, NULL);
    EXPECT_STR(json_string_value(json_object_get(o, "error")), want);
    json_decref(o);
    free(j), free(jl);
}

TEST(the_csv_reader_takes_quoted_commas_quotes_and_line_breaks_and_says_where_it_is_bad)
{
    static const char text[] = "a,\"b,c\",\"d\"\"e\"\r\n\"f\ng\",\n\"torn";
    csv_reader r;
    csv_reader_init(&r, text, strlen(text));
    char **f;
    size_t n;
    bool torn;
    int line;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(csv_next(&r, "t.csv", &f, &n, &torn, &line, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(n, 3u);
    EXPECT_STR(f[0], "a");
    EXPECT_STR(f[1], "b,c");
    EXPECT_STR(f[2], "d\"e");
    CU_ASSERT(!torn && line == 1);
    csv_fields_free(f, n);
    CU_ASSERT_EQUAL_FATAL(csv_next(&r, "t.csv", &f, &n, &torn, &line, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(n, 2u);
    EXPECT_STR(f[0], "f\ng");
    EXPECT_STR(f[1], "");
    CU_ASSERT(!torn && line == 2);
    csv_fields_free(f, n);
    CU_ASSERT_EQUAL_FATAL(csv_next(&r, "t.csv", &f, &n, &torn, &line, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(n, 1u);
    CU_ASSERT(torn && line == 4);
    csv_fields_free(f, n);
    CU_ASSERT_EQUAL(csv_next(&r, "t.csv", &f, &n, &torn, &line, &e), NP_OK);
    CU_ASSERT_PTR_NULL(f);
    static const char bad[] = "a,b\nc,d\"e\n";
    csv_reader_init(&r, bad, strlen(bad));
    CU_ASSERT_EQUAL(csv_next(&r, "t.csv", &f, &n, &torn, &line, &e), NP_OK);
    csv_fields_free(f, n);
    CU_ASSERT_EQUAL(csv_next(&r, "t.csv", &f, &n, &torn, &line, &e), NP_ERR_SYNTAX);
    CU_ASSERT(e.line == 2 && e.col == 4);
    CU_ASSERT_PTR_NULL(f);
}

/* ---- docs/energy.md's design-space sweep: latency, energy and area on edge ---- */

TEST(the_edge_design_sweep_gives_each_points_area_by_hand_and_the_pareto_front_of_its_rows)
{
    const char *csv = tmp("edge.csv");
    harness_run r = sweep_cmd(harness_src_path("docs/examples/sweep_edge_pareto.yaml"), csv, "--json");
    CU_ASSERT_EQUAL_FATAL(r.exit_status, 0);
    json_t *out = json_loads(r.out, 0, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(out);
    json_t *front = json_object_get(out, "pareto");
    CU_ASSERT_FATAL(json_is_array(front));
    /* the rows: sram (3 values) x array (4 sizes, zipped) */
    char *text = slurp(csv);
    double lat[12], en[12], area[12];
    char *line = strchr(text, '\n') + 1;
    for (int p = 0; p < 12; p++) {
        int point, rows, cols;
        char sram[16];
        CU_ASSERT_EQUAL_FATAL(sscanf(line, "%d,ok,%15[^,],%d,%d,%lf,%lf,%lf", &point, sram, &rows,
                                     &cols, &lat[p], &en[p], &area[p]), 7);
        CU_ASSERT_EQUAL(point, p);
        /* area by hand from configs/edge.yaml's TPUv1 figures: rows x cols PEs of 1,212 um2,
         * the scratchpad at 4.0 mm2 per MiB, the 128 KiB of accumulators at 4.965 */
        double mib = strcmp(sram, "256 KiB") == 0 ? 0.25 : strcmp(sram, "1 MiB") == 0 ? 1 : 4;
        double want = rows * cols * 1212e-6 + mib * 4.0 + 0.125 * 4.965;
        CU_ASSERT_DOUBLE_EQUAL(area[p], want, 1e-6);
        line = strchr(line, '\n') + 1;
    }
    /* the front by hand: the points no other point beats or equals on all three with one
     * better (every objective is min) */
    bool on[12];
    int n_on = 0;
    for (int p = 0; p < 12; p++) {
        on[p] = true;
        for (int q = 0; q < 12 && on[p]; q++)
            if (q != p && lat[q] <= lat[p] && en[q] <= en[p] && area[q] <= area[p] &&
                (lat[q] < lat[p] || en[q] < en[p] || area[q] < area[p]))
                on[p] = false;
        n_on += on[p];
    }
    CU_ASSERT_EQUAL(json_array_size(front), (size_t)n_on);
    size_t i;
    json_t *v;
    json_array_foreach(front, i, v) {
        int p = (int)json_integer_value(v);
        CU_ASSERT(p >= 0 && p < 12 && on[p]);
    }
    /* a larger array is faster on this GEMM: the 64 x 64 point beats 8 x 8 at every size */
    for (int s = 0; s < 3; s++)
        CU_ASSERT(lat[4 * s + 3] < lat[4 * s]);
    free(text);
    json_decref(out);
    harness_run_free(&r);
}
