/* bench_trace.c — the trace writer at the size of a 1024-chip step at --trace-level kernel:
 * bytes per event (JSON and gzip), write speed, and the process's resident memory as the
 * trace grows (it must stay flat: the layout writes events as they come).
 *
 *   build/bench/bench_trace [--chips N] [--kernels K] [--out FILE.json.gz] [--json]
 *
 * Each chip runs K kernels back to back on 1 core, every 8th of them a collective over all
 * chips (one flow through the ranks), plus an HBM-read bandwidth counter fed per kernel. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "trace_layout.h"
#include "wallclock.h"

static long rss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6))
            kib = strtol(line + 6, NULL, 10);
    if (f)
        fclose(f);
    return kib;
}

int main(int argc, char **argv)
{
    unsigned chips = 1024, kernels = 400;
    const char *out = "/tmp/npusim_bench_trace.json.gz";
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--chips") && i + 1 < argc)
            chips = (unsigned)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--kernels") && i + 1 < argc)
            kernels = (unsigned)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--out") && i + 1 < argc)
            out = argv[++i];
        else if (!strcmp(argv[i], "--json"))
            json = 1;
        else {
            fprintf(stderr, "usage: bench_trace [--chips N] [--kernels K] [--out F] [--json]\n");
            return 2;
        }
    }
    trace_layout_opts o = {.level = TRACE_LEVEL_KERNEL};
    trace_layout *lay;
    np_err e = {0};
    if (trace_layout_open(out, &o, &lay, &e) != NP_OK) {
        fprintf(stderr, "bench_trace: %s\n", e.msg);
        return 1;
    }
    trace_sink k = trace_layout_sink(lay);
    static const char *const names[] = {"matmul", "softmax", "layernorm", "gelu", "matmul_bwd",
                                        "adam", "attention", "all_reduce"};
    long rss[5] = {rss_kib(), 0, 0, 0, 0};
    double t0 = np_wall_s();
    for (unsigned s = 0; s < kernels; s++) { /* kernel s on every chip, then the next */
        for (unsigned c = 0; c < chips; c++) {
            uint64_t start = (uint64_t)s * 10000000 + (uint64_t)c * 1000, dur = 9000000;
            trace_arg a[] = {TRACE_ARG_U("cycles", dur / 1000), TRACE_ARG_U("flops", 1u << 30),
                             TRACE_ARG_U("bytes", 1u << 24)};
            trace_span sp = {.chip = c, .core = 0, .track = "kernels", .name = names[s % 8],
                             .cat = s % 8 == 7 ? "collective" : "kernel", .start_ps = start,
                             .end_ps = start + dur, .args = a, .n_args = 3};
            if (s % 8 == 7)
                sp.group = s + 1, sp.group_size = chips;
            k.ops->span(k.ctx, &sp);
            trace_transfer t = {c, "hbm.read", 1u << 24, start, start + dur};
            k.ops->transfer(k.ctx, &t);
        }
        if ((s + 1) % (kernels / 4 ? kernels / 4 : 1) == 0 && (s + 1) / (kernels / 4 ? kernels / 4 : 1) <= 4)
            rss[(s + 1) / (kernels / 4 ? kernels / 4 : 1)] = rss_kib();
    }
    uint64_t events = trace_events(trace_layout_writer(lay)),
             bytes = trace_bytes(trace_layout_writer(lay));
    if (trace_layout_close(lay, &e) != NP_OK) {
        fprintf(stderr, "bench_trace: %s\n", e.msg);
        return 1;
    }
    double secs = np_wall_s() - t0;
    struct stat st;
    long long gz = stat(out, &st) == 0 ? (long long)st.st_size : -1;
    uint64_t spans = (uint64_t)chips * kernels;
    if (json) {
        printf("{\"chips\": %u, \"kernels_per_chip\": %u, \"spans\": %llu, \"events\": %llu, "
               "\"json_bytes\": %llu, \"gzip_bytes\": %lld, \"json_bytes_per_span\": %.1f, "
               "\"gzip_bytes_per_span\": %.2f, \"seconds\": %.3f, \"rss_kib\": [%ld, %ld, %ld, "
               "%ld, %ld]}\n",
               chips, kernels, (unsigned long long)spans, (unsigned long long)events,
               (unsigned long long)bytes, gz, (double)bytes / (double)spans,
               (double)gz / (double)spans, secs, rss[0], rss[1], rss[2], rss[3], rss[4]);
        return 0;
    }
    printf("trace of %u chips x %u kernels at --trace-level kernel (%s)\n", chips, kernels, out);
    printf("  spans            %llu (events with metadata, counters and flows: %llu)\n",
           (unsigned long long)spans, (unsigned long long)events);
    printf("  JSON             %.1f MiB, %.1f bytes per span\n", (double)bytes / 1048576.0,
           (double)bytes / (double)spans);
    printf("  gzip             %.1f MiB, %.2f bytes per span\n", (double)gz / 1048576.0,
           (double)gz / (double)spans);
    printf("  written in       %.2f s (%.2f M spans/s)\n", secs, (double)spans / secs / 1e6);
    printf("  resident memory  %ld KiB at the start, %ld / %ld / %ld / %ld KiB after 1/4, 1/2, "
           "3/4 and all of the spans\n", rss[0], rss[1], rss[2], rss[3], rss[4]);
    return 0;
}
