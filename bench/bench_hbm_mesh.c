/* bench_hbm_mesh.c — HBM controllers on the mesh (bench/README.md, "bench_hbm_mesh"):
 *   1. bf16 matmul kernels (1024^3, 2048^3, 4096^3) on tpu-pod's 8 cores (kgen_matmul_build),
 *      simulated on the core model with the memory beside the mesh (chip.hbm_controllers = 0), with 4 controllers on
 *      its mesh as configured (64-byte flits), and with 4 on a mesh wide enough not to be the
 *      bottleneck (4 KiB flits): simulated cycles, CPU time, memory accesses over the mesh;
 *   2. what the same memory traffic would cost flit by flit: the run's HBM bytes, as 64-byte
 *      flits from the 4 controllers to the 8 cores in equal shares, through tpu-pod's
 *      flit-level mesh (routers as BookSim's; 64-flit packets): CPU time per flit and for the
 *      whole kernel's traffic, against the flow model's whole run.
 * Usage: bench_hbm_mesh [--quick] [--json]   (--quick: the small kernel only)
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "arch.h"
#include "core.h"
#include "hbm_mesh.h"
#include "kgen_matmul.h"
#include "mesh.h"

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int fail(const np_err *e)
{
    fprintf(stderr, "bench_hbm_mesh: %s\n", e->msg);
    return 1;
}

typedef struct run_fig {
    uint64_t cycles, mesh_bytes;
    double cpu;
} run_fig;

static int run_kernel(const char *const *sets, size_t n_sets, uint64_t size, run_fig *f)
{
    arch_config cfg;
    np_err e = {0};
    if (arch_resolve("tpu-pod", sets, n_sets, &cfg, &e) != NP_OK)
        return fail(&e);
    kgen_matmul mm = {size, size, size, ISA_DTYPE_BF16, 0, 0, 0, 8};
    char *text = NULL;
    isa_program *p = NULL;
    if (kgen_matmul_build(&cfg, &mm, &text, &p, &e) != NP_OK)
        return fail(&e);
    free(text);
    core_report *r = NULL;
    double t0 = cpu_s();
    np_status st = core_sim_run(&cfg, p, NULL, &r, &e);
    f->cpu = cpu_s() - t0;
    isa_program_free(p);
    if (st != NP_OK)
        return fail(&e);
    f->cycles = r->total_cycles;
    f->mesh_bytes = r->hbm_mesh_bytes;
    core_report_free(r);
    return 0;
}

/* The flit-level mesh carrying `bytes` from tpu-pod's 4 controllers (edges placement) to its
 * 8 cores in equal shares: CPU seconds and flits. */
static int flit_traffic(uint64_t bytes, double *cpu, uint64_t *flits)
{
    arch_config cfg;
    np_err e = {0};
    const char *sets[] = {"chip.hbm_controllers=4"};
    if (arch_resolve("tpu-pod", sets, 1, &cfg, &e) != NP_OK)
        return fail(&e);
    mesh_params mp;
    mesh_params_from_arch(&cfg, &mp);
    mp.mode = MESH_MODE_FLIT;
    mesh *m;
    if (mesh_create(&mp, NULL, NULL, &m, &e) != NP_OK)
        return fail(&e);
    uint64_t per = bytes / (uint64_t)cfg.chip.noc_flit_bytes / 32;
    *flits = 0;
    double t0 = cpu_s();
    for (uint32_t c = 0; c < 8; c++)
        for (uint32_t j = 0; j < 4; j++) {
            uint32_t src = hbm_mesh_router(&cfg, j);
            if (mesh_send(m, src, c, (uint32_t)per, 0, &e) != NP_OK) {
                mesh_free(m);
                return fail(&e);
            }
            *flits += per;
        }
    while (!mesh_idle(m))
        mesh_step(m);
    *cpu = cpu_s() - t0;
    mesh_free(m);
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
            fprintf(stderr, "usage: bench_hbm_mesh [--quick] [--json]\n");
            return 2;
        }
    }
    static const uint64_t sizes[] = {1024, 2048, 4096};
    const char *off[] = {"chip.hbm_controllers=0"};
    const char *on[] = {"chip.hbm_controllers=4"};
    const char *wide[] = {"chip.hbm_controllers=4", "chip.noc_flit_bytes=4096"};
    json_t *rows = json_array();
    if (!json)
        printf("%-10s %-28s %12s %9s %14s\n", "kernel", "memory", "cycles", "CPU s",
               "HBM bytes/mesh");
    for (size_t k = 0; k < (quick ? 1u : 3u); k++) {
        run_fig f[3];
        if (run_kernel(off, 1, sizes[k], &f[0]) || run_kernel(on, 1, sizes[k], &f[1]) ||
            run_kernel(wide, 2, sizes[k], &f[2]))
            return 1;
        double fcpu;
        uint64_t flits;
        if (flit_traffic(f[1].mesh_bytes, &fcpu, &flits))
            return 1;
        static const char *names[] = {"beside the mesh", "4 controllers, 64 B flits",
                                      "4 controllers, 4 KiB flits"};
        char kn[32];
        snprintf(kn, sizeof kn, "%llu^3", (unsigned long long)sizes[k]);
        for (int i = 0; i < 3; i++) {
            if (!json)
                printf("%-10s %-28s %12llu %9.3f %14llu\n", kn, names[i],
                       (unsigned long long)f[i].cycles, f[i].cpu,
                       (unsigned long long)f[i].mesh_bytes);
            json_array_append_new(rows, json_pack("{s:s, s:s, s:I, s:f, s:I}", "kernel", kn,
                                                  "memory", names[i], "cycles",
                                                  (json_int_t)f[i].cycles, "cpu_s", f[i].cpu,
                                                  "hbm_mesh_bytes",
                                                  (json_int_t)f[i].mesh_bytes));
        }
        double per_flit = flits ? fcpu / (double)flits : 0;
        if (!json)
            printf("%-10s flit-level mesh for the same %llu flits: %.3f s CPU (%.0f ns per flit)"
                   " against %.3f s for the whole run with flows\n", kn,
                   (unsigned long long)flits, fcpu, per_flit * 1e9, f[1].cpu);
        json_array_append_new(rows, json_pack("{s:s, s:s, s:I, s:f, s:f}", "kernel", kn,
                                              "memory", "flit-level traffic", "flits",
                                              (json_int_t)flits, "cpu_s", fcpu,
                                              "ns_per_flit", per_flit * 1e9));
    }
    if (json) {
        char *s = json_dumps(rows, JSON_INDENT(1));
        puts(s);
        free(s);
    }
    json_decref(rows);
    return 0;
}
