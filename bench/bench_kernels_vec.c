/* bench_kernels_vec.c — the vector kernels against the HBM roofline (issue 10, done-when 4):
 * a long fused elementwise chain and the Adam update, compiled through the kernel ABI and
 * simulated in timing mode on one chip (all its cores) of an architecture (tpu-pod by
 * default). See bench/README.md.
 *
 * Figures per kernel: simulated cycles and time, HBM bytes moved and their analytical
 * minimum (every input read once, every output written once: kc_result.hbm_bytes_min),
 * achieved bandwidth, and the share of the HBM's peak the kernel reaches counted on the
 * minimum bytes (the roofline figure of `npusim kernel`: minimum bytes / peak bandwidth over
 * the run's time). The goal is >= 85 % for both; the run exits 1 when one is below.
 *
 *   build/bench/bench_kernels_vec [--arch A] [--cores N] [--elems N] [--json]
 */
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "arch.h"
#include "wallclock.h"
#include "krun.h"

#define GOAL_PCT 85.0

typedef struct bench_fig {
    const char *name, *what;
    uint64_t cycles, hbm_bytes, hbm_bytes_min, elems;
    double time_us, gbps, pct, wall_s;
    char schedule[160];
} bench_fig;

/* v with thousands separators, in buf. */
static const char *grouped(uint64_t v, char *buf)
{
    char d[32];
    int n = snprintf(d, sizeof d, "%" PRIu64, v), k = 0;
    for (int i = 0; i < n; i++) {
        if (i && (n - i) % 3 == 0)
            buf[k++] = ',';
        buf[k++] = d[i];
    }
    buf[k] = '\0';
    return buf;
}

static int run(const arch_config *cfg, const kc_kernel *k, bench_fig *f)
{
    krun_result r;
    np_err e = {0};
    double t0 = np_wall_s();
    if (krun_kernel(cfg, k, NULL, &(krun_opts){.functional = false}, &r, &e) != NP_OK) {
        fprintf(stderr, "bench_kernels_vec: %s: %s\n", f->name, e.msg);
        return 2;
    }
    f->wall_s = np_wall_s() - t0;
    f->cycles = r.report->total_cycles;
    f->time_us = (double)r.report->total_ps * 1e-6;
    f->hbm_bytes = r.report->hbm_read_bytes + r.report->hbm_write_bytes;
    f->hbm_bytes_min = r.kernel.hbm_bytes_min;
    double s = (double)r.report->total_ps * 1e-12;
    f->gbps = (double)f->hbm_bytes / s / 1e9;
    f->pct = 100.0 * ((double)f->hbm_bytes_min / (cfg->chip.hbm_gb_per_s * 1e9)) / s;
    snprintf(f->schedule, sizeof f->schedule, "%s", r.kernel.schedule);
    krun_result_free(&r);
    return 0;
}

static void dense(kc_tensor *t, nn_dtype dt, int nd, const int64_t *shape)
{
    kc_tensor_dense(t, 0, dt, nd, shape);
}

int main(int argc, char **argv)
{
    const char *arch_name = "tpu-pod";
    bool json = false;
    long cores = 0;
    int64_t elems = 32 << 20;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--arch") && i + 1 < argc)
            arch_name = argv[++i];
        else if (!strcmp(argv[i], "--cores") && i + 1 < argc)
            cores = strtol(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--elems") && i + 1 < argc)
            elems = strtoll(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--json"))
            json = true;
        else {
            fprintf(stderr, "usage: bench_kernels_vec [--arch A] [--cores N] [--elems N] "
                            "[--json]\n");
            return 2;
        }
    }
    arch_config cfg;
    np_err e = {0};
    if (arch_resolve(arch_name, NULL, 0, &cfg, &e) != NP_OK) {
        fprintf(stderr, "bench_kernels_vec: %s\n", e.msg);
        return 2;
    }
    if (cores <= 0 || cores > cfg.chip.cores)
        cores = cfg.chip.cores;
    int64_t H = 4096, M = elems / H;
    bench_fig f[2] = {{.name = "chain", .elems = (uint64_t)(M * H)},
                      {.name = "adam", .elems = (uint64_t)elems}};
    kc_place pl = {0, 0, (uint32_t)cores};

    /* the chain: y = fp32(0.5 x (gelu(x + b) x gate + residual)), x, gate, residual bf16
     * [M, 4096], b bf16 [4096]: one kernel (add with a 5-step epilogue) */
    kc_kernel k = {.op = NN_OP_ADD, .n_in = 2, .n_out = 1, .n_epi = 5, .place = pl};
    dense(&k.in[0], NN_BF16, 2, (int64_t[]){M, H});
    dense(&k.in[1], NN_BF16, 1, (int64_t[]){H});
    dense(&k.out[0], NN_F32, 2, (int64_t[]){M, H});
    k.epi[0] = (kc_epi){.op = NN_OP_GELU};
    k.epi[1] = (kc_epi){.op = NN_OP_MUL, .has_arg = true};
    dense(&k.epi[1].arg, NN_BF16, 2, (int64_t[]){M, H});
    k.epi[2] = (kc_epi){.op = NN_OP_ADD, .has_arg = true};
    dense(&k.epi[2].arg, NN_BF16, 2, (int64_t[]){M, H});
    k.epi[3] = (kc_epi){.op = NN_OP_SCALE, .f = 0.5};
    k.epi[4] = (kc_epi){.op = NN_OP_CAST, .to = NN_F32};
    f[0].what = "bias + gelu + gate + residual + scale + cast to fp32, bf16 [M, 4096]";
    int rc = run(&cfg, &k, &f[0]);

    /* Adam on fp32 master weights with a bf16 gradient, in place */
    kc_kernel a = {.op = NN_OP_ADAM_UPDATE, .n_in = 4, .n_out = 3, .place = pl, .n_attrs = 2};
    a.attrs[0] = KC_REAL("lr", 1e-3);
    a.attrs[1] = KC_INT("step", 10);
    dense(&a.in[0], NN_F32, 1, &elems);
    dense(&a.in[1], NN_BF16, 1, &elems);
    dense(&a.in[2], NN_F32, 1, &elems);
    dense(&a.in[3], NN_F32, 1, &elems);
    a.out[0] = a.in[0], a.out[1] = a.in[2], a.out[2] = a.in[3];
    f[1].what = "adam_update: fp32 p, m, v in place, bf16 gradient";
    if (!rc && kc_kernel_find(NN_OP_ADAM_UPDATE))
        rc = run(&cfg, &a, &f[1]);
    if (rc)
        return rc;

    int n = kc_kernel_find(NN_OP_ADAM_UPDATE) ? 2 : 1;
    bool ok = true;
    if (json) {
        json_t *o = json_object(), *ks = json_array();
        json_object_set_new(o, "arch", json_string(arch_name));
        json_object_set_new(o, "cores", json_integer(cores));
        json_object_set_new(o, "hbm_gb_per_s", json_real(cfg.chip.hbm_gb_per_s));
        json_object_set_new(o, "goal_pct", json_real(GOAL_PCT));
        for (int i = 0; i < n; i++) {
            json_t *j = json_object();
            json_object_set_new(j, "name", json_string(f[i].name));
            json_object_set_new(j, "what", json_string(f[i].what));
            json_object_set_new(j, "elements", json_integer((json_int_t)f[i].elems));
            json_object_set_new(j, "cycles", json_integer((json_int_t)f[i].cycles));
            json_object_set_new(j, "time_us", json_real(f[i].time_us));
            json_object_set_new(j, "hbm_bytes", json_integer((json_int_t)f[i].hbm_bytes));
            json_object_set_new(j, "hbm_bytes_min", json_integer((json_int_t)f[i].hbm_bytes_min));
            json_object_set_new(j, "gbps", json_real(f[i].gbps));
            json_object_set_new(j, "hbm_roofline_pct", json_real(f[i].pct));
            json_object_set_new(j, "schedule", json_string(f[i].schedule));
            json_object_set_new(j, "wall_s", json_real(f[i].wall_s));
            json_array_append_new(ks, j);
            ok = ok && f[i].pct >= GOAL_PCT;
        }
        json_object_set_new(o, "kernels", ks);
        json_object_set_new(o, "ok", json_boolean(ok));
        char *s = json_dumps(o, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
        puts(s);
        free(s);
        json_decref(o);
    } else {
        printf("%s, %ld core%s, HBM %.0f GB/s; goal: >= %.0f %% of the HBM peak on the minimum "
               "bytes\n", arch_name, cores, cores == 1 ? "" : "s", cfg.chip.hbm_gb_per_s,
               GOAL_PCT);
        for (int i = 0; i < n; i++) {
            printf("%-6s %s, %.1f M elements\n", f[i].name, f[i].what,
                   (double)f[i].elems / 1048576.0);
            char cyc[40];
            printf("       %s cycles = %.1f us; HBM %.1f MiB moved (minimum %.1f MiB) = %.0f "
                   "GB/s; %.1f %% of peak %s; simulated in %.2f s\n",
                   grouped(f[i].cycles, cyc), f[i].time_us, (double)f[i].hbm_bytes / 1048576.0,
                   (double)f[i].hbm_bytes_min / 1048576.0, f[i].gbps, f[i].pct,
                   f[i].pct >= GOAL_PCT ? "(ok)" : "(BELOW THE GOAL)", f[i].wall_s);
            printf("       %s\n", f[i].schedule);
            ok = ok && f[i].pct >= GOAL_PCT;
        }
    }
    return ok ? 0 : 1;
}
