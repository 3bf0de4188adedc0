/* bench_l2.c — the cost of the L2 model (bench/README.md, "bench_l2"):
 *   1. the tags alone (hw-model/l2.h): walks of 4 KiB copies over a 40 MiB, 16-way L2 of
 *      128-byte lines, streaming (every line new: misses and evictions) and re-reading a
 *      working set that fits (hits): CPU ns per line looked up;
 *   2. the GEMM of issue 24 (bf16 2048 x 9216 x 2304 on a100-cluster's 108 cores, compiled as
 *      `npusim kernel` compiles it) simulated without the L2 and with an A100-like one:
 *      simulated cycles, CPU time, lines looked up.
 * Usage: bench_l2 [--quick] [--json]   (--quick: part 1 only)
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "arch.h"
#include "core.h"
#include "kernel.h"
#include "krun.h"
#include "l2.h"

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int fail(const np_err *e)
{
    fprintf(stderr, "bench_l2: %s\n", e->msg);
    return 1;
}

static const char *const a100_l2[] = {"chip.l2_bytes=40MiB", "chip.l2_gb_per_s=7219",
                                      "chip.l2_latency_ns=142", "chip.l2_slices=80"};

static void no_done(void *ctx, uint64_t arg) { (void)ctx, (void)arg; }

/* Walks n copies of 4 KiB, the i-th at (i mod span_copies) x 4 KiB: CPU ns per line. */
static int tags_bench(uint64_t n, uint64_t span_copies, double *ns_per_line)
{
    arch_config cfg;
    np_err e = {0};
    if (arch_resolve("a100-cluster", a100_l2, 4, &cfg, &e) != NP_OK)
        return fail(&e);
    l2 *c;
    if (l2_create(&cfg, 0, &c, &e) != NP_OK)
        return fail(&e);
    uint64_t lines = 0;
    double t0 = cpu_s();
    for (uint64_t i = 0; i < n; i++) {
        core_range r = {.space = ISA_SPACE_HBM, .addr = (i % span_copies) * 4096, .bytes = 4096,
                        .extent = 4096, .planes = 1, .rows = 1, .row_stride = 4096,
                        .row_bytes = 4096};
        l2_walk w;
        if (l2_walk_copy(c, &r, 1, no_done, NULL, 0, &w, &e) != NP_OK) {
            l2_free(c);
            return fail(&e);
        }
        if (w.fill != L2_NO_FILL)
            l2_fill_done(c, w.fill);
        lines += 4096 / 128;
    }
    *ns_per_line = (cpu_s() - t0) / (double)lines * 1e9;
    l2_free(c);
    return 0;
}

typedef struct run_fig {
    uint64_t cycles, hbm_bytes, lines;
    double cpu;
} run_fig;

static int gemm(bool with_l2, run_fig *f)
{
    arch_config cfg;
    np_err e = {0};
    if (arch_resolve("a100-cluster", a100_l2, with_l2 ? 4 : 0, &cfg, &e) != NP_OK)
        return fail(&e);
    kc_spec sp;
    kc_prog *scratch;
    kc_kernel k;
    if (kc_spec_parse("matmul m=2048 n=9216 k=2304 dtype=bf16", &sp, &e) != NP_OK ||
        kc_prog_new(&cfg, &(kc_prog_opts){.cores = 1}, &scratch, &e) != NP_OK)
        return fail(&e);
    np_status st = kc_spec_kernel(scratch, &sp, &k, &e);
    kc_prog_free(scratch);
    if (st != NP_OK)
        return fail(&e);
    k.place.n_cores = 108;
    krun_result r;
    double t0 = cpu_s();
    if (krun_kernel(&cfg, &k, NULL, &(krun_opts){.prog_cores = 108}, &r, &e) != NP_OK)
        return fail(&e);
    f->cpu = cpu_s() - t0; /* compiling included: a few ms */
    f->cycles = r.report->total_cycles;
    f->hbm_bytes = r.report->hbm_read_bytes + r.report->hbm_write_bytes;
    f->lines = r.report->l2.moved_bytes / 32 / 4; /* sectors / 4 a line: about the lines */
    krun_result_free(&r);
    return 0;
}

int main(int argc, char **argv)
{
    bool quick = false, json = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick"))
            quick = true;
        else if (!strcmp(argv[i], "--json"))
            json = true;
        else {
            fprintf(stderr, "usage: bench_l2 [--quick] [--json]\n");
            return 2;
        }
    }
    json_t *rows = json_array();
    /* 40 MiB = 10,240 copies of 4 KiB: 40,960 copies over 4x that stream (all misses); over
     * 2,048 copies (8 MiB) they re-read what stays (hits after the first pass) */
    double stream, reread;
    if (tags_bench(40960, 40960, &stream) || tags_bench(40960, 2048, &reread))
        return 1;
    if (!json)
        printf("tags: %.1f ns per line streaming (misses, evictions), %.1f ns re-reading 8 MiB "
               "(hits)\n", stream, reread);
    json_array_append_new(rows, json_pack("{s:s, s:f, s:f}", "case", "tags",
                                          "ns_per_line_stream", stream, "ns_per_line_reread",
                                          reread));
    if (!quick) {
        run_fig off, on;
        if (gemm(false, &off) || gemm(true, &on))
            return 1;
        if (!json)
            printf("GEMM 2048x9216x2304 bf16, a100-cluster, 108 cores:\n"
                   "  without the L2  %9llu cycles  %.3f s CPU  HBM %llu bytes\n"
                   "  with the L2     %9llu cycles  %.3f s CPU  HBM %llu bytes, about %llu lines "
                   "looked up (%.0f ns CPU a line more)\n",
                   (unsigned long long)off.cycles, off.cpu, (unsigned long long)off.hbm_bytes,
                   (unsigned long long)on.cycles, on.cpu, (unsigned long long)on.hbm_bytes,
                   (unsigned long long)on.lines,
                   on.lines ? (on.cpu - off.cpu) / (double)on.lines * 1e9 : 0.0);
        json_array_append_new(rows, json_pack("{s:s, s:I, s:f, s:I, s:I, s:f, s:I, s:I}", "case",
                                              "gemm", "cycles_off", (json_int_t)off.cycles,
                                              "cpu_off_s", off.cpu, "hbm_off",
                                              (json_int_t)off.hbm_bytes, "cycles_on",
                                              (json_int_t)on.cycles, "cpu_on_s", on.cpu, "hbm_on",
                                              (json_int_t)on.hbm_bytes, "lines",
                                              (json_int_t)on.lines));
    }
    if (json) {
        char *s = json_dumps(rows, JSON_INDENT(1));
        puts(s);
        free(s);
    }
    json_decref(rows);
    return 0;
}
