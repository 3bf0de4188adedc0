/* bench_noc.c — interconnect speed figures (bench/README.md, "bench_noc"):
 *   1. mesh simulation speed: simulated NoC cycles per CPU second for an 8x8 mesh, uniform
 *      traffic, 4-flit packets, 0.30 flits/node/cycle, with the router of the BookSim
 *      reference (tests/data/noc/booksim_mesh.csv: 2 VCs x 8 flits, 4-stage iq router);
 *      with --booksim PATH, BookSim 2 runs the same configuration (the reference's base
 *      configuration plus k, traffic, packet size and rate) and its speed is printed beside
 *      ours, both over CPU time;
 *   2. one 16 MiB comm.send between two cores on the core model, on 8x8 and 32x32 meshes
 *      (tiny's NoC: 16-byte flits, so 1,048,576 flits), to the neighbour and corner to corner,
 *      in flit mode and in flow mode (chip.noc_mode): wall time and simulated cycles;
 *   3. wall time of a 1 GiB ring all-reduce over 1024 chips on a 32 x 32 torus (tpu-pod link
 *      parameters), with its simulated time and bus bandwidth.
 * Usage: bench_noc [--quick] [--booksim PATH] [--json]   (--quick: shorter runs, smoke test)
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "coll.h"
#include "wallclock.h"
#include "core.h"
#include "isa_asm.h"
#include "traffic.h"

#ifndef NPUSIM_SOURCE_DIR
#define NPUSIM_SOURCE_DIR "."
#endif

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int fail(const np_err *e)
{
    fprintf(stderr, "bench_noc: %s\n", e->msg);
    return 1;
}

/* Runs BookSim on the reference's base configuration with the given mesh, traffic, packet
 * size and rate; its simulated cycles and CPU seconds. 0 on success. */
static int run_booksim(const char *booksim, const char *ref_path, unsigned k, unsigned flits,
                       double rate, double *cycles, double *cpu)
{
    char cfg_path[] = "/tmp/bench_noc_booksim_XXXXXX";
    int fd = mkstemp(cfg_path);
    if (fd < 0)
        return -1;
    FILE *cfg = fdopen(fd, "w"), *ref = fopen(ref_path, "r");
    if (!cfg || !ref) {
        if (cfg)
            fclose(cfg);
        unlink(cfg_path);
        return -1;
    }
    char line[512];
    while (fgets(line, sizeof line, ref)) /* "#   key = value;" lines: the base config */
        if (strncmp(line, "#   ", 4) == 0 && strchr(line, '='))
            fputs(line + 4, cfg);
    fclose(ref);
    fprintf(cfg, "k = %u;\ntraffic = uniform;\npacket_size = %u;\nsim_type = latency;\n"
            "injection_rate = %g;\n", k, flits, rate);
    fclose(cfg);
    char out_path[] = "/tmp/bench_noc_booksim_out_XXXXXX";
    int ofd = mkstemp(out_path);
    if (ofd < 0) {
        unlink(cfg_path);
        return -1;
    }
    pid_t pid = fork();
    if (pid == 0) {
        dup2(ofd, 1);
        dup2(ofd, 2);
        execl(booksim, booksim, cfg_path, (char *)NULL);
        _exit(127);
    }
    close(ofd);
    int status = 0;
    struct rusage before, after;
    getrusage(RUSAGE_CHILDREN, &before);
    if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status)) { /* BookSim exits 1 on
                                                                           success */
        unlink(cfg_path);
        unlink(out_path);
        return -1;
    }
    getrusage(RUSAGE_CHILDREN, &after);
    *cpu = (double)(after.ru_utime.tv_sec - before.ru_utime.tv_sec) +
           (double)(after.ru_utime.tv_usec - before.ru_utime.tv_usec) * 1e-6 +
           (double)(after.ru_stime.tv_sec - before.ru_stime.tv_sec) +
           (double)(after.ru_stime.tv_usec - before.ru_stime.tv_usec) * 1e-6;
    *cycles = 0;
    FILE *o = fopen(out_path, "r");
    while (o && fgets(line, sizeof line, o))
        sscanf(line, "Time taken is %lf cycles", cycles);
    if (o)
        fclose(o);
    unlink(cfg_path);
    unlink(out_path);
    return *cycles > 0 ? 0 : -1;
}

/* One comm.send of `bytes` from core 0 to core `dst` on a k x k mesh of tiny's NoC. */
static int run_send(unsigned k, unsigned dst, const char *mode, uint64_t bytes, double *wall,
                    double *cpu, uint64_t *cycles)
{
    char sets[5][64];
    snprintf(sets[0], sizeof sets[0], "chip.mesh_x=%u", k);
    snprintf(sets[1], sizeof sets[1], "chip.mesh_y=%u", k);
    snprintf(sets[2], sizeof sets[2], "chip.cores=%u", dst + 1);
    snprintf(sets[3], sizeof sets[3], "chip.noc_mode=%s", mode);
    snprintf(sets[4], sizeof sets[4], "system.chips=1");
    const char *sp[5] = {sets[0], sets[1], sets[2], sets[3], sets[4]};
    arch_config cfg;
    np_err e = {0};
    if (arch_resolve("tiny", sp, 5, &cfg, &e) != NP_OK)
        return fail(&e);
    char src[256];
    snprintf(src, sizeof src, ".core 0\ncomm.send peer(0, %u), hbm[0], %llu, 7\n.core %u\n"
             "comm.recv peer(0, 0), hbm[0], %llu, 7\n", dst, (unsigned long long)bytes, dst,
             (unsigned long long)bytes);
    isa_target t;
    isa_target_from_arch(&cfg, &t);
    isa_asm_opts o = {.target = &t};
    isa_program *p = NULL;
    if (isa_asm(src, strlen(src), "bench.s", &o, &p, &e) != NP_OK)
        return fail(&e);
    core_report *r = NULL;
    double t0 = np_wall_s(), c0 = cpu_s();
    np_status st = core_sim_run(&cfg, p, NULL, &r, &e);
    *wall = np_wall_s() - t0;
    *cpu = cpu_s() - c0;
    isa_program_free(p);
    if (st != NP_OK)
        return fail(&e);
    *cycles = r->total_cycles;
    core_report_free(r);
    return 0;
}

int main(int argc, char **argv)
{
    bool quick = false, json = false;
    const char *booksim = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0)
            quick = true;
        else if (strcmp(argv[i], "--json") == 0)
            json = true;
        else if (strcmp(argv[i], "--booksim") == 0 && i + 1 < argc)
            booksim = argv[++i];
        else {
            fprintf(stderr, "usage: bench_noc [--quick] [--booksim PATH] [--json]\n");
            return 2;
        }
    }
    json_t *doc = json_object();
    np_err e = {0};

    /* 1. mesh speed against BookSim */
    const char *ref_path = NPUSIM_SOURCE_DIR "/tests/data/noc/booksim_mesh.csv";
    noc_ref ref;
    if (noc_ref_load(ref_path, &ref, &e) != NP_OK)
        return fail(&e);
    noc_study_params p = {.mesh = ref.mesh, .traffic = NOC_TRAFFIC_UNIFORM, .rate = 0.30,
                          .packet_flits = 4, .warmup = quick ? 1000 : 10000,
                          .measure = quick ? 10000 : 100000, .drain_max = 100000, .seed = 1};
    p.mesh.kx = p.mesh.ky = 8;
    noc_ref_free(&ref);
    noc_study_result r;
    double c0 = cpu_s();
    if (noc_study_run(&p, &r, &e) != NP_OK)
        return fail(&e);
    double cpu = cpu_s() - c0, ours = (double)r.cycles / cpu;
    if (!json)
        printf("mesh 8x8 uniform 4-flit 0.30 flits/node/cycle, 2 VCs x 8 flits, 4-stage router: "
               "npusim %llu cycles in %.3f s CPU = %.0f cycles/s (accepted %.3f flits/node/cycle, "
               "avg packet latency %.2f cycles)\n",
               (unsigned long long)r.cycles, cpu, ours, r.accepted_rate, r.avg_packet_latency);
    json_object_set_new(doc, "mesh_cycles_per_s", json_real(ours));
    if (booksim) {
        double bc, bcpu;
        if (run_booksim(booksim, ref_path, 8, 4, 0.30, &bc, &bcpu) != 0) {
            fprintf(stderr, "bench_noc: running %s failed\n", booksim);
            return 1;
        }
        if (!json)
            printf("  BookSim 2 on the same: %.0f cycles in %.3f s CPU = %.0f cycles/s; npusim is "
                   "%.1fx faster\n", bc, bcpu, bc / bcpu, ours / (bc / bcpu));
        json_object_set_new(doc, "booksim_cycles_per_s", json_real(bc / bcpu));
    }

    /* 2. one 16 MiB message on the core model */
    uint64_t bytes = quick ? 1u << 20 : 16u << 20;
    json_t *sends = json_array();
    static const char *const modes[] = {"flit", "flow"};
    for (int mi = 0; mi < 2; mi++)
        for (unsigned k = 8; k <= 32; k *= 4)
            for (int corner = 0; corner < 2; corner++) {
                unsigned dst = corner ? k * k - 1 : 1;
                double wall, cpu1;
                uint64_t cycles;
                if (run_send(k, dst, modes[mi], bytes, &wall, &cpu1, &cycles) != 0)
                    return 1;
                if (!json)
                    printf("comm.send %llu MiB core 0 -> %u on %ux%u, %s mode: %.3f ms CPU "
                           "(%.3f ms wall), %llu cycles\n", (unsigned long long)(bytes >> 20),
                           dst, k, k, modes[mi], cpu1 * 1e3, wall * 1e3,
                           (unsigned long long)cycles);
                json_array_append_new(sends, json_pack("{s:s, s:i, s:i, s:f, s:f, s:I}", "mode",
                                                       modes[mi], "mesh", (int)k, "dst",
                                                       (int)dst, "cpu_s", cpu1, "wall_s", wall,
                                                       "cycles", (json_int_t)cycles));
            }
    json_object_set_new(doc, "send_16mib", sends);

    /* 3. chip-to-chip: a ring all-reduce over 1024 chips */
    arch_config cfg;
    const char *sets[] = {"system.chips=1024", "system.torus_x=32", "system.torus_y=32",
                          "system.torus_z=1", "system.topology=torus2d",
                          "system.links_per_chip=4"};
    if (arch_resolve("tpu-pod", sets, 6, &cfg, &e) != NP_OK)
        return fail(&e);
    evq *q = NULL;
    coll_sys *s = NULL;
    double t0 = np_wall_s();
    c0 = cpu_s();
    if (evq_create(&q, &e) != NP_OK || coll_sys_create(&cfg, NULL, q, NULL, &s, &e) != NP_OK)
        return fail(&e);
    uint64_t ar_bytes = 1ULL << 30;
    coll_desc d = {.op = COLL_OP_ALL_REDUCE, .algo = COLL_ALGO_RING, .bytes = ar_bytes};
    coll_result cr;
    if (coll_run(s, &d, &cr, &e) != NP_OK)
        return fail(&e);
    double dt = np_wall_s() - t0;
    cpu = cpu_s() - c0;
    double t_s = (double)(cr.t_end_ps - cr.t_start_ps) / 1e12;
    if (!json)
        printf("ring all-reduce 1 GiB over 1024 chips (32x32 torus, %.0f GB/s links): wall %.3f "
               "s (CPU %.3f s), simulated %.3f ms, busbw %.2f GB/s, %llu messages, %llu events\n",
               cfg.system.link_gb_per_s, dt, cpu, t_s * 1e3,
               (double)ar_bytes / t_s / 1e9 * coll_busbw_factor(COLL_OP_ALL_REDUCE, 1024),
               (unsigned long long)cr.transfers, (unsigned long long)evq_dispatched(q));
    json_object_set_new(doc, "allreduce_1024_wall_s", json_real(dt));
    coll_sys_free(s);
    evq_free(q);
    if (json) {
        char *text = json_dumps(doc, JSON_INDENT(2));
        puts(text);
        free(text);
    }
    json_decref(doc);
    return 0;
}
