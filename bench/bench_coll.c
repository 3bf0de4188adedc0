/* bench_coll.c — the flow engine of collectives at scale (issue 13):
 *   1. a 1 GiB ring all-reduce over the 4096 chips of tpu-pod (16 x 16 x 16 torus): every
 *      message alone on its link — 33.5 million of them;
 *   2. a 1 GiB all-to-all over 256 chips of one switch (tpu-pod's chips and links), pairwise
 *      and direct (every message at once: 65,280 flows sharing every link);
 *   3. four ring all-reduces at once over the same 1024 chips of a 32 x 32 torus (every link
 *      shared by four flows, re-rated whenever one ends);
 *   5. an all-reduce over a 1,048,576-chip ring (issue 28): refused past COLL_MAX_RANKS, the
 *      time to build the network and say so (the bound: 10 s).
 * For each: wall and CPU time, simulated time, bus bandwidth, messages, events of the event
 * queue, re-ratings (water fillings) and the process's peak RSS so far.
 * Usage: bench_coll [--quick] [--json] [--case N]   (--quick: 16x smaller cases, for smoke
 * tests; --case N: only case N, 1 .. 5, e.g. to profile it)
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "coll.h"
#include "wallclock.h"

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static long peak_rss_kib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

typedef struct bench_case {
    const char *name;
    const char *sets[8];
    coll_op op;
    coll_algo algo;
    uint64_t bytes;
    uint32_t concurrent; /* collectives at once over the same chips */
    bool refused;        /* expected to be refused (past COLL_MAX_RANKS): the time to say so */
} bench_case;

static int run_case(const bench_case *bc, json_t *out, bool json)
{
    np_err e = {0};
    arch_config cfg;
    size_t n_sets = 0;
    while (n_sets < 8 && bc->sets[n_sets])
        n_sets++;
    if (arch_resolve("tpu-pod", bc->sets, n_sets, &cfg, &e) != NP_OK) {
        fprintf(stderr, "bench_coll: %s\n", e.msg);
        return 1;
    }
    evq *q = NULL;
    coll_sys *s = NULL;
    double t0 = np_wall_s(), c0 = cpu_s();
    if (evq_create(&q, &e) != NP_OK || coll_sys_create(&cfg, NULL, q, NULL, &s, &e) != NP_OK) {
        fprintf(stderr, "bench_coll: %s\n", e.msg);
        return 1;
    }
    coll *c[4] = {0};
    coll_desc d = {.op = bc->op, .algo = bc->algo, .bytes = bc->bytes};
    for (uint32_t i = 0; i < bc->concurrent; i++)
        if (coll_start(s, &d, &c[i], &e) != NP_OK) {
            if (!bc->refused) {
                fprintf(stderr, "bench_coll: %s\n", e.msg);
                return 1;
            }
            double rt = np_wall_s() - t0;
            long rss = peak_rss_kib();
            if (json)
                json_array_append_new(out, json_pack("{s:s, s:b, s:f, s:s, s:I}", "case",
                                                     bc->name, "refused", 1, "wall_s", rt,
                                                     "message", e.msg, "peak_rss_kib",
                                                     (json_int_t)rss));
            else
                printf("%s: refused in %.3f s (peak RSS %.1f MiB): %s\n", bc->name, rt,
                       rss / 1024.0, e.msg);
            coll_sys_free(s);
            evq_free(q);
            return 0;
        }
    if (bc->refused) {
        fprintf(stderr, "bench_coll: %s was not refused\n", bc->name);
        return 1;
    }
    if (evq_run(q, &e) != NP_OK) {
        fprintf(stderr, "bench_coll: %s\n", e.msg);
        return 1;
    }
    double dt = np_wall_s() - t0, cpu = cpu_s() - c0;
    uint64_t t_end = 0, msgs = 0;
    for (uint32_t i = 0; i < bc->concurrent; i++) {
        const coll_result *r = coll_get_result(c[i]);
        if (!coll_is_done(c[i])) {
            fprintf(stderr, "bench_coll: %s did not complete\n", bc->name);
            return 1;
        }
        t_end = r->t_end_ps > t_end ? r->t_end_ps : t_end;
        msgs += r->transfers;
    }
    uint32_t ranks = coll_get_result(c[0])->ranks;
    double sim_s = (double)t_end / 1e12;
    double busbw = (double)bc->bytes / sim_s / 1e9 * coll_busbw_factor(bc->op, ranks);
    uint64_t events = evq_dispatched(q), rerates = net_rerates(coll_sys_net(s));
    long rss = peak_rss_kib();
    if (json)
        json_array_append_new(out, json_pack("{s:s, s:i, s:I, s:f, s:f, s:f, s:f, s:I, s:I, s:I, "
                                             "s:I}", "case", bc->name, "ranks", (int)ranks,
                                             "bytes", (json_int_t)bc->bytes, "wall_s", dt,
                                             "cpu_s", cpu, "simulated_s", sim_s, "busbw_gbps",
                                             busbw, "messages", (json_int_t)msgs, "events",
                                             (json_int_t)events, "rerates", (json_int_t)rerates,
                                             "peak_rss_kib", (json_int_t)rss));
    else
        printf("%s: wall %.3f s (CPU %.3f s), simulated %.3f ms, busbw %.2f GB/s, %llu "
               "messages, %llu events, %llu re-ratings, peak RSS %.1f MiB\n", bc->name, dt, cpu,
               sim_s * 1e3, busbw, (unsigned long long)msgs, (unsigned long long)events,
               (unsigned long long)rerates, rss / 1024.0);
    fflush(stdout);
    for (uint32_t i = 0; i < bc->concurrent; i++)
        coll_free(c[i]);
    coll_sys_free(s);
    evq_free(q);
    return 0;
}

int main(int argc, char **argv)
{
    bool quick = false, json = false;
    int only = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick"))
            quick = true;
        else if (!strcmp(argv[i], "--json"))
            json = true;
        else if (!strcmp(argv[i], "--case") && i + 1 < argc && atoi(argv[i + 1]) >= 1 &&
                 atoi(argv[i + 1]) <= 5)
            only = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_coll [--quick] [--json] [--case 1..5]\n");
            return 2;
        }
    }
    const bench_case cases[] = {
        {quick ? "ring all-reduce 1 GiB, 256 chips of tpu-pod (8x8x4 torus)"
               : "ring all-reduce 1 GiB, 4096 chips of tpu-pod (16x16x16 torus)",
         {quick ? "system.chips=256" : "system.chips=4096", quick ? "system.torus_x=8" : NULL,
          "system.torus_y=8", "system.torus_z=4"},
         COLL_OP_ALL_REDUCE, COLL_ALGO_RING, 1ULL << 30, 1, false},
        {quick ? "all-to-all 1 GiB, 64 chips on a switch, pairwise"
               : "all-to-all 1 GiB, 256 chips on a switch, pairwise",
         {quick ? "system.chips=64" : "system.chips=256", "system.topology=switch",
          "system.switch_radix=256"},
         COLL_OP_ALL_TO_ALL, COLL_ALGO_PAIRWISE, 1ULL << 30, 1, false},
        {quick ? "all-to-all 1 GiB, 64 chips on a switch, direct"
               : "all-to-all 1 GiB, 256 chips on a switch, direct",
         {quick ? "system.chips=64" : "system.chips=256", "system.topology=switch",
          "system.switch_radix=256"},
         COLL_OP_ALL_TO_ALL, COLL_ALGO_DIRECT, 1ULL << 30, 1, false},
        {quick ? "4 ring all-reduces at once, 64 MiB, 64 chips (8x8 torus)"
               : "4 ring all-reduces at once, 64 MiB, 1024 chips (32x32 torus)",
         {quick ? "system.chips=64" : "system.chips=1024", quick ? "system.torus_x=8"
                                                                  : "system.torus_x=32",
          quick ? "system.torus_y=8" : "system.torus_y=32", "system.torus_z=1",
          "system.topology=torus2d", "system.links_per_chip=4"},
         COLL_OP_ALL_REDUCE, COLL_ALGO_RING, 64ULL << 20, 4, false},
        {quick ? "all-reduce 1 MiB over a 65,536-chip ring (refused)"
               : "all-reduce 1 MiB over a 1,048,576-chip ring (refused)",
         {quick ? "system.chips=65536" : "system.chips=1048576", "system.topology=ring"},
         COLL_OP_ALL_REDUCE, COLL_ALGO_AUTO, 1ULL << 20, 1, true},
    };
    json_t *out = json ? json_array() : NULL;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if ((!only || (size_t)only == i + 1) && run_case(&cases[i], out, json))
            return 1;
    if (json) {
        char *text = json_dumps(out, JSON_INDENT(2));
        puts(text);
        free(text);
        json_decref(out);
    }
    return 0;
}
