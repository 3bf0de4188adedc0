/* test_sweep.c — `npusim sweep` (traces/sweep.h): the file's points and errors, a 24-point
 * sweep on a pool of 2 whose rows are what `npusim layer` says for each point, a sweep
 * killed (SIGKILL) halfway and resumed that gives exactly the bytes of an uninterrupted one,
 * and the same sweep under `mpirun -np 2` (when npusim is built with MPI). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "harness.h"
#include "sweep.h"

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
    CU_ASSERT_EQUAL_FATAL(sweep_load(p, &s, &e), NP_OK);
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
    CU_ASSERT_EQUAL(sweep_load(p, &s, &e), st);
    CU_ASSERT_PTR_NULL(s);
    CU_ASSERT_STRING_EQUAL(e.file, p);
    CU_ASSERT_EQUAL(e.line, line);
    if (col)
        CU_ASSERT_EQUAL(e.col, col);
    if (!strstr(e.msg, want))
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
    char jl[320];
    sweep_jsonl_path(csv, jl, sizeof jl);
    CU_ASSERT_EQUAL(lines(jl), 24u);
}

TEST(a_sweep_killed_halfway_and_resumed_has_exactly_the_rows_of_an_uninterrupted_one)
{
    const char *ref = reference();
    const char *yaml = tmp("s24.yaml"), *csv = tmp("killed.csv");
    char jl[320], ref_jl[320];
    sweep_jsonl_path(csv, jl, sizeof jl);
    sweep_jsonl_path(ref, ref_jl, sizeof ref_jl);
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
}

TEST(a_point_that_fails_is_a_row_with_its_error)
{
    const char *yaml = tmp("fail.yaml"), *csv = tmp("fail.csv");
    write_file(yaml, "command: [layer, --gemm, \"64,64,64\"]\narch: tiny\n"
                     "grid: {core.array_rows: [4, 0]}\nmetrics: {c: layers/0/total_cycles}\n");
    harness_run r = sweep_cmd(yaml, csv, NULL);
    CU_ASSERT_EQUAL(r.exit_status, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "2 points: 2 ran, 0 resumed, 1 failed"));
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
