/* bench_noc.c — interconnect speed figures (issue 5):
 *   1. mesh simulation speed: simulated NoC cycles per wall second for an 8x8 mesh, uniform
 *      traffic, 4-flit packets, 0.30 flits/node/cycle (4 VCs x 8 flits, 2-cycle routers,
 *      1-cycle links) — BookSim 2 manages about 7,000 cycles/s on this configuration;
 *   2. wall time of a 1 GiB ring all-reduce over 1024 chips on a 32 x 32 torus (tpu-pod link
 *      parameters), with its simulated time and bus bandwidth.
 * Usage: bench_noc [--quick]   (--quick: a shorter mesh run, for smoke tests)
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "coll.h"
#include "traffic.h"

static double wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    bool quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    np_err e = {0};
    noc_study_params p = {.mesh = {.kx = 8, .ky = 8, .vcs = 4, .buf_flits = 8,
                                   .router_cycles = 2, .link_cycles = 1},
                          .traffic = NOC_TRAFFIC_UNIFORM,
                          .rate = 0.30, .packet_flits = 4, .warmup = quick ? 1000 : 10000,
                          .measure = quick ? 10000 : 200000, .drain_max = 100000, .seed = 1};
    noc_study_result r;
    double t0 = wall_s();
    clock_t c0 = clock();
    if (noc_study_run(&p, &r, &e) != NP_OK) {
        fprintf(stderr, "bench_noc: %s\n", e.msg);
        return 1;
    }
    double dt = wall_s() - t0, cpu = (double)(clock() - c0) / CLOCKS_PER_SEC;
    printf("mesh 8x8 uniform 4-flit 0.30 flits/node/cycle: %llu cycles, %.3f s wall = %.0f "
           "cycles/s, %.3f s CPU = %.0f cycles/CPU-s (accepted %.3f flits/node/cycle, avg "
           "packet latency %.2f cycles)\n",
           (unsigned long long)r.cycles, dt, (double)r.cycles / dt, cpu, (double)r.cycles / cpu,
           r.accepted_rate, r.avg_packet_latency);

    arch_config cfg;
    const char *sets[] = {"system.chips=1024", "system.torus_x=32", "system.torus_y=32",
                          "system.torus_z=1", "system.topology=torus2d",
                          "system.links_per_chip=4"};
    if (arch_resolve("tpu-pod", sets, 6, &cfg, &e) != NP_OK) {
        fprintf(stderr, "bench_noc: %s\n", e.msg);
        return 1;
    }
    evq *q = NULL;
    coll_sys *s = NULL;
    t0 = wall_s();
    c0 = clock();
    if (evq_create(&q, &e) != NP_OK || coll_sys_create(&cfg, NULL, q, NULL, &s, &e) != NP_OK) {
        fprintf(stderr, "bench_noc: %s\n", e.msg);
        return 1;
    }
    uint64_t bytes = 1ULL << 30;
    coll_desc d = {.op = COLL_OP_ALL_REDUCE, .algo = COLL_ALGO_RING, .bytes = bytes};
    coll_result cr;
    if (coll_run(s, &d, &cr, &e) != NP_OK) {
        fprintf(stderr, "bench_noc: %s\n", e.msg);
        return 1;
    }
    dt = wall_s() - t0;
    cpu = (double)(clock() - c0) / CLOCKS_PER_SEC;
    double t_s = (double)(cr.t_end_ps - cr.t_start_ps) / 1e12;
    printf("ring all-reduce 1 GiB over 1024 chips (32x32 torus, %.0f GB/s links): wall %.3f s "
           "(CPU %.3f s), simulated %.3f ms, busbw %.2f GB/s, %llu messages, %llu events\n",
           cfg.system.link_gb_per_s, dt, cpu, t_s * 1e3,
           (double)bytes / t_s / 1e9 * coll_busbw_factor(COLL_OP_ALL_REDUCE, 1024),
           (unsigned long long)cr.transfers, (unsigned long long)evq_dispatched(q));
    coll_sys_free(s);
    evq_free(q);
    return 0;
}
