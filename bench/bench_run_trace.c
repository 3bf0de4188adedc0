/* bench_run_trace.c — the trace of a real 1024-chip `npusim run` at --trace-level kernel
 * (issue 14, done-when 2): its size against the bound of docs/traces.md, and the writer's
 * memory as the trace grows.
 *
 *   build/bench/bench_run_trace [--steps A,B] [--out DIR] [--json]
 *
 * The job: gpt-tiny on tpu-pod at system.chips = 1024 (a 16 x 16 x 4 torus), dp 256 x tp 2 x
 * pp 2, global batch 1024, fast fidelity, real kernels (compiled and simulated once each). It
 * runs at A and at B steps (default 1 and 4: a trace four times as long), each once without
 * and once with a kernel-level trace, every run in its own process so each peak RSS
 * (getrusage of that child) is its own. Prints per run the trace's bytes (gzip as written,
 * and the JSON inside), its events (one per line), bytes per event, and the peak RSS with and
 * without the trace: the difference is the trace's memory, which must not grow with the
 * steps. Exit status 1 when a run fails, the bound is exceeded or the trace's memory grows by
 * more than a quarter. */
#define _DEFAULT_SOURCE /* wait4 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "arch.h"
#include "run_job.h"

#define BOUND_JSON_PER_EVENT 200.0 /* docs/traces.md, "Keeping big traces small" */
#define BOUND_GZ_PER_EVENT 16.0

/* Runs the job for `steps` steps (tracing to path when not NULL) in a child process: its
 * peak RSS in KiB, or -1 when it failed. */
static long run_child(uint32_t steps, const char *path)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        const char *sets[] = {"system.chips=1024", "system.torus_z=4"};
        np_err err = {0};
        arch_config cfg;
        nn_model_desc d;
        if (arch_resolve("tpu-pod", sets, 2, &cfg, &err) != NP_OK ||
            nn_model_load("gpt-tiny", &d, &err) != NP_OK) {
            fprintf(stderr, "bench_run_trace: %s\n", err.msg);
            _exit(1);
        }
        run_job j = {.cfg = &cfg, .model = &d, .steps = steps,
                     .optim = {.kind = NN_OPTIM_ADAMW, .lr = 1e-4, .beta1 = 0.9, .beta2 = 0.95,
                               .eps = 1e-8, .weight_decay = 0.1},
                     .trace_path = path, .trace_opts = {.level = TRACE_LEVEL_KERNEL}};
        nn_strategy_default(&j.s);
        j.s.dp = 256, j.s.tp = 2, j.s.pp = 2;
        j.o = (nn_model_opts){.batch = 1024, .compute = NN_BF16, .seed = 1};
        run_report r;
        if (run_job_run(&j, &r, &err) != NP_OK) {
            fprintf(stderr, "bench_run_trace: %s\n", err.msg);
            _exit(1);
        }
        run_report_free(&r);
        _exit(0);
    }
    int status;
    struct rusage ru;
    if (wait4(pid, &status, 0, &ru) != pid || !WIFEXITED(status) || WEXITSTATUS(status))
        return -1;
    return ru.ru_maxrss;
}

/* The JSON bytes and lines (one event a line, less the first and last) of a gzip file. */
static int trace_size(const char *path, uint64_t *json, uint64_t *events)
{
    gzFile f = gzopen(path, "rb");
    if (!f)
        return -1;
    static char buf[1 << 16];
    int n;
    uint64_t lines = 0;
    *json = 0;
    while ((n = gzread(f, buf, sizeof buf)) > 0) {
        *json += (uint64_t)n;
        for (int i = 0; i < n; i++)
            lines += buf[i] == '\n';
    }
    gzclose(f);
    *events = lines > 2 ? lines - 2 : 0;
    return n < 0 ? -1 : 0;
}

int main(int argc, char **argv)
{
    unsigned steps[2] = {1, 4};
    const char *dir = "/tmp";
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--steps") && i + 1 < argc &&
            sscanf(argv[i + 1], "%u,%u", &steps[0], &steps[1]) == 2 && steps[0] && steps[1])
            i++;
        else if (!strcmp(argv[i], "--out") && i + 1 < argc)
            dir = argv[++i];
        else if (!strcmp(argv[i], "--json"))
            json = 1;
        else {
            fprintf(stderr, "usage: bench_run_trace [--steps A,B] [--out DIR] [--json]\n");
            return 2;
        }
    }
    int rc = 0;
    long extra[2] = {0, 0};
    if (json)
        printf("{\"chips\": 1024, \"runs\": [");
    else
        printf("gpt-tiny, tpu-pod, 1024 chips, dp 256 x tp 2 x pp 2, --trace-level kernel\n"
               "%5s %12s %14s %10s %9s %8s %11s %12s %10s\n", "steps", "gzip", "JSON", "events",
               "B/event", "gz/event", "RSS no trace", "RSS traced", "trace mem");
    for (int k = 0; k < 2; k++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/npusim_bench_run_trace_%u.json.gz", dir, steps[k]);
        long plain = run_child(steps[k], NULL), traced = run_child(steps[k], path);
        struct stat st;
        uint64_t js = 0, ev = 0;
        if (plain < 0 || traced < 0 || stat(path, &st) || trace_size(path, &js, &ev) || !ev) {
            fprintf(stderr, "bench_run_trace: the %u-step run failed\n", steps[k]);
            return 1;
        }
        extra[k] = traced - plain;
        double bj = (double)js / (double)ev, bz = (double)st.st_size / (double)ev;
        if (bj > BOUND_JSON_PER_EVENT || bz > BOUND_GZ_PER_EVENT)
            rc = 1;
        if (json)
            printf("%s{\"steps\": %u, \"gzip_bytes\": %lld, \"json_bytes\": %" PRIu64
                   ", \"events\": %" PRIu64 ", \"max_rss_kib\": %ld, \"max_rss_kib_traced\": "
                   "%ld}", k ? ", " : "", steps[k], (long long)st.st_size, js, ev, plain,
                   traced);
        else
            printf("%5u %9.1f MiB %10.1f MiB %10" PRIu64 " %9.1f %8.2f %7.1f MiB %8.1f MiB %6.1f "
                   "MiB\n", steps[k], st.st_size / 1048576.0, js / 1048576.0, ev, bj, bz,
                   plain / 1024.0, traced / 1024.0, extra[k] / 1024.0);
    }
    bool flat = extra[1] <= extra[0] + extra[0] / 4 + 1024; /* a MiB of slack for the allocator */
    if (json)
        printf("], \"bound_json_per_event\": %g, \"bound_gz_per_event\": %g, \"within_bound\": "
               "%s, \"memory_flat\": %s}\n", BOUND_JSON_PER_EVENT, BOUND_GZ_PER_EVENT,
               rc ? "false" : "true", flat ? "true" : "false");
    else
        printf("bound: %.0f B of JSON and %.0f B of gzip per event: %s; the trace's memory %s\n",
               BOUND_JSON_PER_EVENT, BOUND_GZ_PER_EVENT, rc ? "EXCEEDED" : "kept",
               flat ? "stays flat" : "GROWS");
    return rc || !flat;
}
