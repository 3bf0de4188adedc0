/* bench_systemc.c — the wall time of one matmul kernel (timing only) inside SystemC, on the
 * example virtual platform (npusim-vp), against `npusim sim` on the same ELF.
 *
 *   build/bench/bench_systemc [--arch A] [--gemm M,N,K] [--runs N] [--quantum NS] [--json]
 *
 * It builds the matmul kernel with the compiler's generator (kgen_matmul_build, bf16, as
 * `npusim layer --gemm` does; --tile T forces T x T x T tiles, for a longer run), writes it as
 * an ELF file, then runs both commands on it N times (default 5), alternating, and reports each
 * one's best and median wall time and their ratio, and the simulated time each reported; it
 * fails (exit status 1) unless the two simulated times are equal to the ps. Each command's
 * fixed cost — starting the process, its libraries, SystemC's elaboration — is its median wall
 * (and CPU) time on an empty program (`halt`), and the "kernel" figures are the times less it.
 * CPU times (user + system of the child) are there because wall times on a shared machine
 * also count the time the process waited for a core.
 * Default: 4096 x 4096 x 4096 on edge.
 */
#define _DEFAULT_SOURCE /* wait4 */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "arch.h"
#include "wallclock.h"
#include "isa_asm.h"
#include "isa_elf.h"
#include "kgen_matmul.h"

extern char **environ;

#define MAX_RUNS 50

/* Runs argv, its stdout into out (NUL-terminated, malloc'd); the wall time in *secs, its CPU
 * time (user + system) in *cpu. */
static int run(char *const argv[], char **out, double *secs, double *cpu)
{
    int fd[2];
    if (pipe(fd))
        return -1;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fd[1], 1);
    posix_spawn_file_actions_addclose(&fa, fd[0]);
    pid_t pid;
    double t0 = np_wall_s();
    int rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fd[1]);
    if (rc) {
        close(fd[0]);
        return -1;
    }
    size_t len = 0, cap = 1 << 16;
    char *buf = malloc(cap);
    ssize_t k;
    while (buf && (k = read(fd[0], buf + len, cap - len - 1)) > 0)
        if ((len += (size_t)k) + 1 == cap)
            buf = realloc(buf, cap *= 2);
    close(fd[0]);
    int st;
    struct rusage ru;
    wait4(pid, &st, 0, &ru);
    *secs = np_wall_s() - t0;
    *cpu = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
    if (buf)
        buf[len] = 0;
    *out = buf;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The simulated ps a command reported: npusim sim's "total_ps", npusim-vp's "model_ps". */
static long long sim_ps(const char *json, const char *key)
{
    json_error_t je;
    json_t *j = json_loads(json ? json : "", 0, &je);
    long long v = j ? (long long)json_integer_value(json_object_get(j, key)) : -1;
    json_decref(j);
    return v;
}

/* Median wall time of n runs of the command, its last stdout's simulated time in *ps. */
typedef struct timing {
    double best, median, cpu; /* wall s, wall s, median CPU s */
    long long ps;
} timing;

static bool measure(char *const argv[], const char *key, int n, timing *t)
{
    double w[MAX_RUNS], c[MAX_RUNS];
    for (int r = 0; r < n; r++) {
        char *out = NULL;
        if (run(argv, &out, &w[r], &c[r]) != 0 || (t->ps = sim_ps(out, key)) < 0) {
            fprintf(stderr, "bench_systemc: %s failed:\n%s\n", argv[0], out ? out : "");
            free(out);
            return false;
        }
        free(out);
    }
    qsort(w, (size_t)n, sizeof *w, cmp_double);
    qsort(c, (size_t)n, sizeof *c, cmp_double);
    t->best = w[0];
    t->median = w[n / 2];
    t->cpu = c[n / 2];
    return true;
}

/* Writes p as an ELF at a new temporary path (path: a buffer of at least 32 bytes). */
static bool write_tmp(const isa_program *p, char *path, np_err *err)
{
    strcpy(path, "/tmp/bench_systemc_XXXXXX");
    int fd = mkstemp(path);
    if (fd < 0)
        return np_err_set(err, NP_ERR_IO, "mkstemp: %s", strerror(errno)), false;
    close(fd);
    return isa_elf_write(p, path, err) == NP_OK;
}

int main(int argc, char **argv)
{
    const char *arch = "edge", *quantum = "1000";
    unsigned long long m = 4096, n = 4096, k = 4096, tile = 0;
    int runs = 5;
    bool json = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--arch") && i + 1 < argc)
            arch = argv[++i];
        else if (!strcmp(argv[i], "--gemm") && i + 1 < argc &&
                 sscanf(argv[i + 1], "%llu,%llu,%llu", &m, &n, &k) == 3)
            i++;
        else if (!strcmp(argv[i], "--tile") && i + 1 < argc &&
                 sscanf(argv[i + 1], "%llu", &tile) == 1)
            i++;
        else if (!strcmp(argv[i], "--runs") && i + 1 < argc && (runs = atoi(argv[i + 1])) > 0 &&
                 runs <= MAX_RUNS)
            i++;
        else if (!strcmp(argv[i], "--quantum") && i + 1 < argc)
            quantum = argv[++i];
        else if (!strcmp(argv[i], "--json"))
            json = true;
        else {
            fprintf(stderr, "usage: bench_systemc [--arch A] [--gemm M,N,K] [--tile T] "
                            "[--runs 1..%d] [--quantum NS] [--json]\n", MAX_RUNS);
            return 2;
        }
    }
    arch_config cfg;
    np_err err = {0};
    kgen_matmul mm = {.m = m, .n = n, .k = k, .dtype = ISA_DTYPE_BF16, .tm = tile, .tn = tile,
                      .tk = tile};
    char *text = NULL;
    isa_program *p = NULL, *empty = NULL;
    char elf[32] = "", nop[32] = "";
    isa_target t;
    isa_asm_opts ao = {.target = &t};
    const char *halt = ".core 0\nhalt\n";
    bool ok = arch_resolve(arch, NULL, 0, &cfg, &err) == NP_OK &&
              kgen_matmul_build(&cfg, &mm, &text, &p, &err) == NP_OK && write_tmp(p, elf, &err);
    if (ok) {
        isa_target_from_arch(&cfg, &t);
        ok = isa_asm(halt, strlen(halt), "empty.s", &ao, &empty, &err) == NP_OK &&
             write_tmp(empty, nop, &err);
    }
    uint64_t insns = 0;
    for (uint32_t c = 0; p && c < p->n_cores; c++)
        insns += p->cores[c].n_insns;
    free(text);
    isa_program_free(p);
    isa_program_free(empty);
    if (!ok) {
        fprintf(stderr, "bench_systemc: %s\n", err.msg);
        if (*elf)
            unlink(elf);
        if (*nop)
            unlink(nop);
        return 1;
    }
    char *sim_argv[] = {NPUSIM_BIN, "sim", "--arch", (char *)arch, "--json", elf, NULL};
    char *vp_argv[] = {NPUSIM_VP_BIN, "--arch", (char *)arch, "--quantum", (char *)quantum,
                       "--json", elf, NULL};
    char *sim0_argv[] = {NPUSIM_BIN, "sim", "--arch", (char *)arch, "--json", nop, NULL};
    char *vp0_argv[] = {NPUSIM_VP_BIN, "--arch", (char *)arch, "--json", nop, NULL};
    if (!json && isatty(2))
        fprintf(stderr, "bench_systemc: %d runs of each command...\n", runs);
    timing sim = {0}, vp = {0}, sim0 = {0}, vp0 = {0}, s1, v1;
    double ws[MAX_RUNS], wv[MAX_RUNS], cs[MAX_RUNS], cv[MAX_RUNS];
    ok = measure(sim0_argv, "total_ps", runs, &sim0) && measure(vp0_argv, "model_ps", runs, &vp0);
    for (int r = 0; ok && r < runs; r++) { /* alternate, so that load on the machine hits both */
        ok = measure(sim_argv, "total_ps", 1, &s1) && measure(vp_argv, "model_ps", 1, &v1);
        ws[r] = s1.best, wv[r] = v1.best, cs[r] = s1.cpu, cv[r] = v1.cpu;
        sim.ps = s1.ps, vp.ps = v1.ps;
    }
    unlink(elf);
    unlink(nop);
    if (!ok)
        return 1;
    qsort(ws, (size_t)runs, sizeof *ws, cmp_double);
    qsort(wv, (size_t)runs, sizeof *wv, cmp_double);
    qsort(cs, (size_t)runs, sizeof *cs, cmp_double);
    qsort(cv, (size_t)runs, sizeof *cv, cmp_double);
    sim.best = ws[0], sim.median = ws[runs / 2], vp.best = wv[0], vp.median = wv[runs / 2];
    sim.cpu = cs[runs / 2], vp.cpu = cv[runs / 2];
    double net_sim = sim.median - sim0.median, net_vp = vp.median - vp0.median;
    double cnet_sim = sim.cpu - sim0.cpu, cnet_vp = vp.cpu - vp0.cpu;
    if (json) {
        printf("{\"arch\": \"%s\", \"gemm\": [%llu, %llu, %llu], \"tile\": %llu, \"insns\": %"
               PRIu64 ", \"runs\": %d, \"quantum_ns\": %s, \"simulated_ps\": {\"npusim_sim\": "
               "%lld, \"npusim_vp\": %lld},\n \"wall_s\": {\"npusim_sim\": {\"best\": %.4f, "
               "\"median\": %.4f, \"empty_program\": %.4f, \"kernel\": %.4f}, \"npusim_vp\": "
               "{\"best\": %.4f, \"median\": %.4f, \"empty_program\": %.4f, \"kernel\": %.4f}},\n"
               " \"cpu_s\": {\"npusim_sim\": {\"median\": %.4f, \"kernel\": %.4f}, "
               "\"npusim_vp\": {\"median\": %.4f, \"kernel\": %.4f}},\n"
               " \"vp_over_sim\": {\"median\": %.4f, \"kernel\": %.4f, \"cpu_kernel\": %.4f}}\n",
               arch, m, n, k, tile, insns, runs, quantum, sim.ps, vp.ps, sim.best, sim.median,
               sim0.median, net_sim, vp.best, vp.median, vp0.median, net_vp, sim.cpu, cnet_sim,
               vp.cpu, cnet_vp, vp.median / sim.median, net_vp / net_sim, cnet_vp / cnet_sim);
    } else {
        printf("%llu x %llu x %llu bf16 matmul on %s (%" PRIu64 " instructions%s), timing only, "
               "%d runs each; simulated %lld ps (npusim sim) and %lld ps (npusim-vp)\n", m, n, k,
               arch, insns, tile ? ", forced tiles" : "", runs, sim.ps, vp.ps);
        printf("%-20s %9s %9s %15s %11s %9s %12s\n", "", "wall best", "median", "empty program",
               "kernel", "CPU", "CPU kernel");
        printf("%-20s %7.3f s %7.3f s %13.3f s %9.3f s %7.3f s %10.3f s\n", "npusim sim",
               sim.best, sim.median, sim0.median, net_sim, sim.cpu, cnet_sim);
        printf("%-20s %7.3f s %7.3f s %13.3f s %9.3f s %7.3f s %10.3f s\n",
               "npusim-vp (SystemC)", vp.best, vp.median, vp0.median, net_vp, vp.cpu, cnet_vp);
        printf("SystemC / npusim sim: %.3f x (wall median), %.3f x (wall kernel), %.3f x (CPU "
               "kernel); quantum %s ns\n", vp.median / sim.median, net_vp / net_sim,
               cnet_vp / cnet_sim, quantum);
    }
    if (sim.ps != vp.ps) {
        fprintf(stderr, "bench_systemc: the simulated times differ (%lld vs %lld ps)\n", sim.ps,
                vp.ps);
        return 1;
    }
    return 0;
}
