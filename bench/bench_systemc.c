/* bench_systemc.c — the wall time of one matmul kernel (timing only) inside SystemC, on the
 * example virtual platform (npusim-vp), against `npusim sim` on the same ELF.
 *
 *   build/bench/bench_systemc [--arch A] [--gemm M,N,K] [--runs N] [--quantum NS] [--json]
 *
 * It builds the matmul kernel with the compiler's generator (kgen_matmul_build, bf16, as
 * `npusim layer --gemm` does), writes it as an ELF file, then runs both commands on it N times
 * (default 5) in turn and reports each one's best and median wall time, their ratio, and the
 * simulated time each reported; it fails (exit status 1) unless the two simulated times are
 * equal to the ps. Default: 4096 x 4096 x 4096 on edge.
 */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "arch.h"
#include "isa_elf.h"
#include "kgen_matmul.h"

extern char **environ;

#define MAX_RUNS 50

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Runs argv, its stdout into out (NUL-terminated, malloc'd); the wall time in *secs. */
static int run(char *const argv[], char **out, double *secs)
{
    int fd[2];
    if (pipe(fd))
        return -1;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fd[1], 1);
    posix_spawn_file_actions_addclose(&fa, fd[0]);
    pid_t pid;
    double t0 = now_s();
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
    waitpid(pid, &st, 0);
    *secs = now_s() - t0;
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

int main(int argc, char **argv)
{
    const char *arch = "edge", *quantum = "1000";
    unsigned long long m = 4096, n = 4096, k = 4096;
    int runs = 5;
    bool json = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--arch") && i + 1 < argc)
            arch = argv[++i];
        else if (!strcmp(argv[i], "--gemm") && i + 1 < argc &&
                 sscanf(argv[i + 1], "%llu,%llu,%llu", &m, &n, &k) == 3)
            i++;
        else if (!strcmp(argv[i], "--runs") && i + 1 < argc && (runs = atoi(argv[i + 1])) > 0 &&
                 runs <= MAX_RUNS)
            i++;
        else if (!strcmp(argv[i], "--quantum") && i + 1 < argc)
            quantum = argv[++i];
        else if (!strcmp(argv[i], "--json"))
            json = true;
        else {
            fprintf(stderr, "usage: bench_systemc [--arch A] [--gemm M,N,K] [--runs 1..%d] "
                            "[--quantum NS] [--json]\n", MAX_RUNS);
            return 2;
        }
    }
    arch_config cfg;
    np_err err = {0};
    kgen_matmul mm = {.m = m, .n = n, .k = k, .dtype = ISA_DTYPE_BF16};
    char *text = NULL;
    isa_program *p = NULL;
    char elf[] = "/tmp/bench_systemc_XXXXXX";
    int fd = mkstemp(elf);
    if (fd < 0) {
        perror("bench_systemc: mkstemp");
        return 1;
    }
    close(fd);
    if (arch_resolve(arch, NULL, 0, &cfg, &err) != NP_OK ||
        kgen_matmul_build(&cfg, &mm, &text, &p, &err) != NP_OK ||
        isa_elf_write(p, elf, &err) != NP_OK) {
        fprintf(stderr, "bench_systemc: %s\n", err.msg);
        unlink(elf);
        return 1;
    }
    uint64_t insns = 0;
    for (uint32_t c = 0; c < p->n_cores; c++)
        insns += p->cores[c].n_insns;
    free(text);
    isa_program_free(p);

    char *sim_argv[] = {NPUSIM_BIN, "sim", "--arch", (char *)arch, "--json", elf, NULL};
    char *vp_argv[] = {NPUSIM_VP_BIN, "--arch", (char *)arch, "--quantum", (char *)quantum,
                       "--json", elf, NULL};
    double t_sim[MAX_RUNS], t_vp[MAX_RUNS];
    long long ps_sim = -1, ps_vp = -1;
    if (!json && isatty(2))
        fprintf(stderr, "bench_systemc: %d runs of each command...\n", runs);
    for (int r = 0; r < runs; r++) { /* alternate, so that load on the machine hits both */
        char *out;
        if (run(sim_argv, &out, &t_sim[r]) != 0 || (ps_sim = sim_ps(out, "total_ps")) < 0) {
            fprintf(stderr, "bench_systemc: npusim sim failed:\n%s\n", out ? out : "");
            unlink(elf);
            return 1;
        }
        free(out);
        if (run(vp_argv, &out, &t_vp[r]) != 0 || (ps_vp = sim_ps(out, "model_ps")) < 0) {
            fprintf(stderr, "bench_systemc: npusim-vp failed:\n%s\n", out ? out : "");
            unlink(elf);
            return 1;
        }
        free(out);
    }
    unlink(elf);
    qsort(t_sim, (size_t)runs, sizeof *t_sim, cmp_double);
    qsort(t_vp, (size_t)runs, sizeof *t_vp, cmp_double);
    double med_sim = t_sim[runs / 2], med_vp = t_vp[runs / 2];
    if (json) {
        printf("{\"arch\": \"%s\", \"gemm\": [%llu, %llu, %llu], \"insns\": %" PRIu64
               ", \"runs\": %d, \"quantum_ns\": %s, \"sim_ps\": %lld, \"vp_ps\": %lld, "
               "\"npusim_sim_s\": {\"best\": %.4f, \"median\": %.4f}, "
               "\"npusim_vp_s\": {\"best\": %.4f, \"median\": %.4f}, "
               "\"vp_over_sim_median\": %.4f}\n",
               arch, m, n, k, insns, runs, quantum, ps_sim, ps_vp, t_sim[0], med_sim, t_vp[0],
               med_vp, med_vp / med_sim);
    } else {
        printf("%llu x %llu x %llu bf16 matmul on %s (%" PRIu64 " instructions), timing only, "
               "%d runs each\n", m, n, k, arch, insns, runs);
        printf("npusim sim:            best %8.3f s, median %8.3f s; simulated %lld ps\n",
               t_sim[0], med_sim, ps_sim);
        printf("npusim-vp (SystemC):   best %8.3f s, median %8.3f s; simulated %lld ps "
               "(quantum %s ns)\n", t_vp[0], med_vp, ps_vp, quantum);
        printf("SystemC / npusim sim:  %.3f x (median)\n", med_vp / med_sim);
    }
    if (ps_sim != ps_vp) {
        fprintf(stderr, "bench_systemc: the simulated times differ (%lld vs %lld ps)\n", ps_sim,
                ps_vp);
        return 1;
    }
    return 0;
}
