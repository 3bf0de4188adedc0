/* bench_kernels_row.c — the row kernels (compiler/kc_softmax.c, kc_norm.c, kc_loss.c) on one
 * chip of tpu-pod against its HBM bandwidth (issue 10, done-when 4: layernorm and softmax over
 * 4096-wide rows at >= 85 % of it). See bench/README.md.
 *
 * Each kernel is compiled through the kernel ABI over all the chip's cores and simulated on the
 * core model in timing mode (sim/krun.h). Figures: simulated cycles and time, the HBM bytes
 * the schedule moves and their analytical minimum (every input read once, every output
 * written once), achieved bandwidth = minimum bytes / time, and that as % of chip.hbm_gb_per_s.
 * Exit status 1 when layernorm or softmax misses 85 %.
 *
 *   build/bench/bench_kernels_row [--arch A] [--rows N] [--cols D] [--dtype bf16|fp32|fp16]
 *                                 [--cores N] [--json]
 */
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "arch.h"
#include "wallclock.h"
#include "kernel.h"
#include "krun.h"

/* n with thousands separators into buf. */
static const char *thousands(uint64_t n, char *buf, size_t len)
{
    char tmp[32];
    int l = snprintf(tmp, sizeof tmp, "%" PRIu64, n), o = 0;
    for (int i = 0; i < l && (size_t)o + 2 < len; i++) {
        if (i && (l - i) % 3 == 0)
            buf[o++] = ',';
        buf[o++] = tmp[i];
    }
    buf[o] = 0;
    return buf;
}

typedef struct bench_case {
    const char *name;
    nn_op op;
    int aff;      /* forward norms: gamma (1), beta (2) */
    bool grad_in; /* a second [rows, cols] input (g) */
    bool target;  /* done-when 4 */
} bench_case;

static const bench_case cases[] = {
    {"softmax", NN_OP_SOFTMAX, 0, false, true},
    {"layernorm", NN_OP_LAYERNORM, 2, false, true},
    {"log_softmax", NN_OP_LOG_SOFTMAX, 0, false, false},
    {"rmsnorm", NN_OP_RMSNORM, 1, false, false},
    {"layernorm_grad", NN_OP_LAYERNORM_GRAD, 0, true, false},
    {"rmsnorm_grad", NN_OP_RMSNORM_GRAD, 0, true, false},
    {"cross_entropy_grad", NN_OP_CROSS_ENTROPY_GRAD, 0, false, false},
};

int main(int argc, char **argv)
{
    const char *arch_name = "tpu-pod";
    int64_t rows = 8192, cols = 4096;
    long cores = 0;
    nn_dtype dt = NN_BF16;
    bool json = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--arch") && i + 1 < argc)
            arch_name = argv[++i];
        else if (!strcmp(argv[i], "--rows") && i + 1 < argc)
            rows = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--cols") && i + 1 < argc)
            cols = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--cores") && i + 1 < argc)
            cores = atol(argv[++i]);
        else if (!strcmp(argv[i], "--dtype") && i + 1 < argc) {
            const char *d = argv[++i];
            dt = !strcmp(d, "fp32") ? NN_F32 : !strcmp(d, "fp16") ? NN_F16 : NN_BF16;
        } else if (!strcmp(argv[i], "--json")) {
            json = true;
        } else {
            fprintf(stderr, "usage: bench_kernels_row [--arch A] [--rows N] [--cols D] "
                            "[--dtype bf16|fp32|fp16] [--cores N] [--json]\n");
            return 2;
        }
    }
    if (rows < 1 || cols < 1) {
        fprintf(stderr, "bench_kernels_row: --rows and --cols must be at least 1\n");
        return 2;
    }
    arch_config cfg;
    np_err err = {0};
    if (arch_resolve(arch_name, NULL, 0, &cfg, &err) != NP_OK) {
        fprintf(stderr, "bench_kernels_row: %s\n", err.msg);
        return 2;
    }
    if (cores <= 0 || cores > cfg.chip.cores)
        cores = cfg.chip.cores;
    json_t *out = json_pack("{s:s, s:I, s:I, s:s, s:i, s:f, s:[]}", "arch", cfg.name, "rows",
                            (json_int_t)rows, "cols", (json_int_t)cols, "dtype",
                            nn_dtype_name(dt), "cores", (int)cores, "hbm_gb_per_s",
                            cfg.chip.hbm_gb_per_s, "kernels");
    if (!json)
        printf("%s, %lld x %lld %s rows on %ld cores (HBM %.0f GB/s); target: softmax and "
               "layernorm >= 85 %%\n\n%-20s %12s %10s %12s %12s %10s %7s  %s\n", cfg.name,
               (long long)rows, (long long)cols, nn_dtype_name(dt), cores, cfg.chip.hbm_gb_per_s,
               "kernel", "cycles", "time", "HBM bytes", "minimum", "GB/s", "% HBM", "schedule");
    int status = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const bench_case *bc = &cases[c];
        kc_kernel k = {.op = bc->op, .n_out = 1, .place = {0, 0, (uint32_t)cores}};
        int64_t shape[2] = {rows, cols};
        k.n_in = 1;
        kc_tensor_dense(&k.in[0], 0, dt, 2, shape);
        kc_tensor_dense(&k.out[0], 0, dt, 2, shape);
        if (bc->grad_in)
            kc_tensor_dense(&k.in[k.n_in++], 0, dt, 2, shape);
        for (int i = 0; i < bc->aff; i++)
            kc_tensor_dense(&k.in[k.n_in++], 0, dt, 1, &cols);
        if (bc->op == NN_OP_CROSS_ENTROPY_GRAD) {
            kc_tensor_dense(&k.in[k.n_in++], 0, NN_I32, 1, &rows);
            kc_tensor_dense(&k.in[k.n_in++], 0, dt, 0, NULL);
        }
        double t0 = np_wall_s();
        krun_result r;
        if (krun_kernel(&cfg, &k, NULL, &(krun_opts){0}, &r, &err) != NP_OK) {
            fprintf(stderr, "bench_kernels_row: %s: %s\n", bc->name, err.msg);
            json_decref(out);
            return 1;
        }
        double t1 = np_wall_s();
        double us = (double)r.report->total_ps / 1e6;
        uint64_t moved = r.kernel.hbm_read_bytes + r.kernel.hbm_write_bytes;
        double gbps = (double)r.kernel.hbm_bytes_min / (us * 1e3);
        double pct = 100.0 * gbps / cfg.chip.hbm_gb_per_s;
        bool met = !bc->target || pct >= 85.0;
        status = met ? status : 1;
        if (json) {
            json_array_append_new(json_object_get(out, "kernels"), json_pack(
                "{s:s, s:I, s:f, s:I, s:I, s:f, s:f, s:b, s:s, s:f}", "kernel", bc->name,
                "cycles", (json_int_t)r.report->total_cycles, "time_us", us, "hbm_bytes",
                (json_int_t)moved, "hbm_bytes_min", (json_int_t)r.kernel.hbm_bytes_min, "gbps",
                gbps, "hbm_pct", pct, "target", bc->target, "schedule", r.kernel.schedule,
                "wall_s", t1 - t0));
        } else {
            char b1[32], b2[32], b3[32];
            printf("%-20s %12s %7.1f us %12s %12s %10.1f %6.1f%%  %s%s\n", bc->name,
                   thousands(r.report->total_cycles, b1, sizeof b1), us,
                   thousands(moved, b2, sizeof b2), thousands(r.kernel.hbm_bytes_min, b3, sizeof b3),
                   gbps, pct, r.kernel.schedule, bc->target ? (met ? "  [met]" : "  [MISSED]") : "");
        }
        krun_result_free(&r);
    }
    if (json) {
        json_object_set_new(out, "targets_met", json_boolean(status == 0));
        char *s = json_dumps(out, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        puts(s);
        free(s);
    }
    json_decref(out);
    return status;
}
