/* test_compiler_cmd.c — `npusim kernel`: the --op parser (keys from the kernel table, did-you-
 * mean, defaults, errors), the JSON figures against the roofline formulas, --functional
 * against the reference executor, --emit-asm, and the errors and their exit codes. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "arch.h"
#include "harness.h"
#include "kernel.h"

TEST(the_op_parser_takes_the_keys_the_kernel_table_declares)
{
    kc_spec s;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(kc_spec_parse("matmul m=64 n=32 k=16 dtype=int8 tb=1 tk=8", &s, &e),
                          NP_OK);
    CU_ASSERT_EQUAL(s.op, NN_OP_MATMUL);
    CU_ASSERT_EQUAL(kc_spec_get(&s, "m")->i, 64);
    CU_ASSERT_EQUAL(kc_spec_get(&s, "dtype")->i, NN_I8);
    CU_ASSERT_EQUAL(kc_spec_get(&s, "tb")->i, 1);
    CU_ASSERT_EQUAL(kc_spec_get(&s, "ta")->i, 0);     /* defaulted */
    CU_ASSERT_EQUAL(kc_spec_get(&s, "batch")->i, 1);
    CU_ASSERT_EQUAL(kc_spec_get(&s, "tk")->i, 8);     /* an attribute of the kernel */
    CU_ASSERT_PTR_NULL(kc_spec_get(&s, "stride"));
    /* the kernel it makes: B column-major, out int32 */
    arch_config cfg;
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tiny", NULL, 0, &cfg, &e), NP_OK);
    kc_prog *p;
    CU_ASSERT_EQUAL_FATAL(kc_prog_new(&cfg, NULL, &p, &e), NP_OK);
    kc_kernel k;
    CU_ASSERT_EQUAL_FATAL(kc_spec_kernel(p, &s, &k, &e), NP_OK);
    CU_ASSERT_EQUAL(k.in[1].stride[0], 1);   /* int8: rows of B down a column */
    CU_ASSERT_EQUAL(k.in[1].stride[1], 16);
    CU_ASSERT_EQUAL(k.out[0].dtype, NN_I32);
    bool tk = false;
    for (int i = 0; i < k.n_attrs; i++)
        tk = tk || (!strcmp(k.attrs[i].name, "tk") && k.attrs[i].i == 8);
    CU_ASSERT(tk);
    kc_prog_free(p);
    /* errors */
    static const struct { const char *text; np_status st; const char *msg; } bad[] = {
        {"matmal m=1 n=1 k=1", NP_ERR_UNKNOWN_KEY, "unknown op 'matmal'; did you mean 'matmul'?"},
        {"matmul m=1 n=1 kk=1", NP_ERR_UNKNOWN_KEY, "matmul has no key 'kk'; did you mean 'k'?"},
        {"matmul m=1 n=1", NP_ERR_MISSING, "matmul needs k=..."},
        {"matmul m=1 n=1 k=1 m=2", NP_ERR_DUPLICATE, "matmul: key 'm' given twice"},
        /* values go through the one door (base/parse.h): errors of the --op option */
        {"matmul m=0 n=1 k=1", NP_ERR_USAGE, "matmul m: expected an integer in 1 .. 4294967295, got '0'"},
        {"matmul m=x n=1 k=1", NP_ERR_USAGE, "matmul m: expected an integer in 1 .. 4294967295, got 'x'"},
        {"matmul m=+5 n=1 k=1", NP_ERR_USAGE, "matmul m: expected an integer in 1 .. 4294967295, got '+5'"},
        {"matmul m=1 n=1 k=1 dtype=bf8", NP_ERR_USAGE, "matmul dtype: unknown dtype 'bf8'; did you mean 'bf16'? (one of bf16, fp16, f16, fp32, f32, int8, i8, int32, i32)"},
        {"gelu shape=4x4x", NP_ERR_USAGE, "gelu shape: expected AxBx..., got '4x4x'"},
        {"matmul m=1 n", NP_ERR_SYNTAX, "matmul: 'n' is not key=value"},
        {"reshape", NP_ERR_UNKNOWN_KEY, "op 'reshape' has no kernel: a view: the output shares its input's bytes, so it lowers to nothing"},
        {"", NP_ERR_MISSING, NULL},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        np_err be = {0};
        CU_ASSERT_EQUAL(kc_spec_parse(bad[i].text, &s, &be), bad[i].st);
        if (bad[i].msg && strcmp(be.msg, bad[i].msg))
            fprintf(stderr, "'%s': got '%s'\n", bad[i].text, be.msg);
        if (bad[i].msg)
            CU_ASSERT_STRING_EQUAL(be.msg, bad[i].msg);
    }
}

static json_t *kernel_json(const char *arch, const char *op, const char *extra)
{
    harness_run r = extra ? harness_npusim("kernel", "--arch", arch, "--op", op, extra, "--json",
                                           NULL)
                          : harness_npusim("kernel", "--arch", arch, "--op", op, "--json", NULL);
    if (r.exit_status)
        fprintf(stderr, "%s\n", r.err);
    CU_ASSERT_EQUAL(r.exit_status, 0);
    json_error_t je;
    json_t *j = json_loads(r.out, 0, &je);
    harness_run_free(&r);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    return j;
}

static double num(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    CU_ASSERT_PTR_NOT_NULL(v);
    return json_number_value(v);
}

/* The roofline figures of a run, checked against their definitions (docs/compiler.md). */
static void check_figures(json_t *j, double peak_flops, double hbm_bps)
{
    double flops = num(j, "flops"), t = num(j, "time_us") * 1e-6, bytes_min = num(j, "hbm_bytes_min");
    CU_ASSERT_DOUBLE_EQUAL(num(j, "tflops"), flops / t / 1e12, 1e-9);
    CU_ASSERT(num(j, "hbm_bytes") >= bytes_min);
    CU_ASSERT_DOUBLE_EQUAL(num(j, "gbps"), num(j, "hbm_bytes") / t / 1e9, 1e-6);
    CU_ASSERT_DOUBLE_EQUAL(num(j, "peak_tflops"), peak_flops / 1e12, 1e-9);
    double t_c = flops / peak_flops, t_m = bytes_min / hbm_bps;
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(j, "bound")),
                           t_c >= t_m ? "compute" : "memory");
    CU_ASSERT_DOUBLE_EQUAL(num(j, "roofline_pct"), 100 * (t_c >= t_m ? t_c : t_m) / t, 1e-6);
    CU_ASSERT(num(j, "roofline_pct") > 0 && num(j, "roofline_pct") <= 100);
    CU_ASSERT_DOUBLE_EQUAL(num(j, "mxu_util_pct"), 100 * flops / t / peak_flops, 1e-6);
}

TEST(npusim_kernel_json_figures_follow_the_roofline_definitions)
{
    /* tiny: 4 x 4 array at 1 GHz, bf16 1 MAC/PE/cycle: 32 GFLOP/s a core; 16 GB/s HBM. */
    json_t *j = kernel_json("tiny", "matmul m=64 n=48 k=80 dtype=bf16", "--cores=2");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(j, "op")), "matmul");
    CU_ASSERT_EQUAL(num(j, "flops"), 2.0 * 64 * 48 * 80);
    CU_ASSERT_DOUBLE_EQUAL(num(j, "time_us") * 1e-6, num(j, "cycles") * 1e-9, 1e-9);
    CU_ASSERT_EQUAL(num(j, "hbm_bytes_min"), (64.0 * 80 + 80 * 48 + 64 * 48) * 2);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(j, "bound")), "compute");
    check_figures(j, 2 * 32e9, 16e9);
    CU_ASSERT_EQUAL(num(j, "cores"), 2);
    json_t *units = json_object_get(j, "units");
    CU_ASSERT_EQUAL(json_array_size(units), 10u); /* 5 units x 2 cores */
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_array_get(units, 1), "name")),
                           "core0.mxu");
    json_decref(j);
    /* a skinny one is memory-bound: 2 x 256 x 4 x 4 FLOPs, (256 x 4 x 2 + ...) bytes */
    j = kernel_json("tiny", "matmul m=256 n=4 k=4 dtype=bf16", NULL);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(j, "bound")), "memory");
    check_figures(j, 32e9, 16e9);
    json_decref(j);
    /* a large matmul on tpu-pod is compute-bound: 128 x 128 at 1.05 GHz, 1200 GB/s */
    j = kernel_json("tpu-pod", "matmul m=1024 n=1024 k=1024 dtype=bf16", NULL);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(j, "bound")), "compute");
    check_figures(j, 2 * 128 * 128 * 1.05e9, 1200e9);
    json_decref(j);
}

TEST(npusim_kernel_functional_checks_values_and_emits_the_program)
{
    json_t *j = kernel_json("tiny", "matmul m=37 n=21 k=45 dtype=bf16 ta=1", "--functional");
    json_t *f = json_object_get(j, "functional");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT_EQUAL(num(f, "elements"), 37 * 21);
    CU_ASSERT_EQUAL(num(f, "bad"), 0);
    json_decref(j);
    j = kernel_json("tiny", "conv2d n=2 h=9 w=8 c=3 k=5 r=3 s=3 stride=2 dtype=int8",
                    "--functional");
    CU_ASSERT_EQUAL(num(json_object_get(j, "functional"), "bad"), 0);
    CU_ASSERT_EQUAL(num(json_object_get(j, "functional"), "max_abs_err"), 0); /* int: exact */
    json_decref(j);
    /* --emit-asm: the disassembly, which the assembler reads back */
    harness_run r = harness_npusim("kernel", "--arch", "tiny", "--op", "matmul m=8 n=8 k=8",
                                   "--emit-asm", NULL);
    CU_ASSERT_EQUAL(r.exit_status, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, ".kernel matmul"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "mxu.mm acc["));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "roofline"));
    harness_run_free(&r);
    r = harness_npusim("kernel", "--list", NULL);
    CU_ASSERT_EQUAL(r.exit_status, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "conv2d"));
    harness_run_free(&r);
}

TEST(npusim_kernel_errors_name_the_flag_and_exit_with_2)
{
    static const struct { const char *op, *msg; } bad[] = {
        {"matmal m=1 n=1 k=1", "did you mean 'matmul'?"},
        {"matmul m=1 n=1 k=1 tkk=3", "did you mean 'tk'?"},
        /* a 4096-wide N tile needs 4096 x 4 x TM accumulator bytes: tiny has 4 KiB */
        {"matmul m=64 n=4096 k=64 tn=4096", "accumulator"},
        {"conv2d h=9 w=9 c=3 k=5 r=3 s=3 groups=2", "2 groups do not divide c = 3"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        harness_run r = harness_npusim("kernel", "--arch", "tiny", "--op", bad[i].op, NULL);
        CU_ASSERT_EQUAL(r.exit_status, 2);
        CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "--op"));
        if (!strstr(r.err, bad[i].msg))
            fprintf(stderr, "%s: %s\n", bad[i].op, r.err);
        CU_ASSERT_PTR_NOT_NULL(strstr(r.err, bad[i].msg));
        harness_run_free(&r);
    }
    harness_run r = harness_npusim("kernel", "--arch", "tiny", NULL);
    CU_ASSERT_EQUAL(r.exit_status, 2);
    harness_run_free(&r);
    r = harness_npusim("kernel", "--arch", "tiny", "--op", "matmul m=1 n=1 k=1", "--cores", "3",
                       NULL);
    CU_ASSERT_EQUAL(r.exit_status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "--cores 3"));
    harness_run_free(&r);
}

TEST(a_real_key_past_the_range_of_int64_is_read_without_overflow)
{
    /* found by fuzz_kspec: lr's integer part was a cast past int64 (UBSan) */
    kc_spec s;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(kc_spec_parse("adamw_update shape=1024 lr=3.4e54", &s, &e), NP_OK);
    const kc_spec_val *lr = kc_spec_get(&s, "lr");
    CU_ASSERT_PTR_NOT_NULL_FATAL(lr);
    CU_ASSERT_DOUBLE_EQUAL(lr->f, 3.4e54, 1e40);
    CU_ASSERT_EQUAL(lr->i, INT64_MAX);
}

TEST(npusim_kernel_prints_figures_for_people_and_exact_values_in_json)
{
    /* 1024^3 on tiny (4 x 4 array at 1 GHz: 32 GFLOP/s peak, 16 GB/s HBM): 2 x 1024^3 =
     * 2.15 GFLOP, at least 3 x 1024^2 x 2 B = 6.00 MiB moved; a cycle is 1000 ps */
    const char *op = "matmul m=1024 n=1024 k=1024";
    json_t *j = kernel_json("tiny", op, NULL);
    uint64_t cycles = (uint64_t)num(j, "cycles");
    CU_ASSERT_EQUAL(num(j, "time_ps"), (double)cycles * 1000);
    CU_ASSERT_EQUAL(num(j, "flops"), 2.0 * 1024 * 1024 * 1024);
    CU_ASSERT_EQUAL(num(j, "hbm_bytes_min"), 3.0 * 1024 * 1024 * 2);
    json_decref(j);
    harness_run r = harness_npusim("kernel", "--arch", "tiny", "--op", op, NULL);
    CU_ASSERT_EQUAL_FATAL(r.exit_status, 0);
    char want[96]; /* the cycles with a comma every three digits, the time in ms */
    snprintf(want, sizeof want, "%llu,%03llu,%03llu cycles, %.1f ms at 1.00 GHz",
             (unsigned long long)(cycles / 1000000), (unsigned long long)(cycles / 1000 % 1000),
             (unsigned long long)(cycles % 1000), (double)cycles / 1e6);
    CU_ASSERT_TRUE(cycles >= 10000000 && cycles < 100000000); /* the format above fits */
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, want));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "compute       2.15 GFLOP at "));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "of the peak 32.0 GFLOP/s"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "(minimum 6.00 MiB)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "of 16.0 GB/s\n"));
    CU_ASSERT_PTR_NULL(strstr(r.out, " ps)")); /* no unscaled picoseconds */
    CU_ASSERT_PTR_NULL(strstr(r.out, " us")); /* µs, not us */
    harness_run_free(&r);
}
