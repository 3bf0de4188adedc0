/* test_kernels_tune.c — the tuner (krun_tune, `npusim kernel --tune`) on a few small GEMM,
 * conv2d and attention kernels: the tiling it keeps, compiled and simulated again on its own, is never
 * slower than the kernel compiled without tuning (the cost model's choice), and its values
 * still equal the framework's reference executor. The simulator is the oracle; the full
 * 30-kernel suite is bench/bench_kernel_suite (and tests/test_compiler_suite.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "harness.h"
#include "kernel.h"
#include "krun.h"

/* The kernel of `npusim kernel --op` text on cores 0 .. cores - 1. */
static kc_kernel spec_kernel(const arch_config *cfg, const char *op, uint32_t cores)
{
    np_err err = {0};
    kc_prog *p = NULL;
    kc_spec s;
    kc_kernel k;
    memset(&k, 0, sizeof k);
    CU_ASSERT_EQUAL_FATAL(kc_prog_new(cfg, &(kc_prog_opts){.cores = 1}, &p, &err), NP_OK);
    CU_ASSERT_EQUAL_FATAL(kc_spec_parse(op, &s, &err), NP_OK);
    np_status st = kc_spec_kernel(p, &s, &k, &err);
    if (st != NP_OK)
        fprintf(stderr, "%s: %s\n", op, err.msg);
    CU_ASSERT_EQUAL_FATAL(st, NP_OK);
    kc_prog_free(p);
    k.place.n_cores = cores;
    return k;
}

/* Simulated cycles of k (timing only). */
static uint64_t cycles_of(const arch_config *cfg, const kc_kernel *k, uint32_t cores)
{
    np_err err = {0};
    krun_result r;
    np_status st = krun_kernel(cfg, k, NULL, &(krun_opts){.prog_cores = cores}, &r, &err);
    if (st != NP_OK)
        fprintf(stderr, "%s\n", err.msg);
    CU_ASSERT_EQUAL_FATAL(st, NP_OK);
    uint64_t c = r.report->total_cycles;
    krun_result_free(&r);
    return c;
}

static arch_config preset(const char *name)
{
    arch_config cfg;
    np_err err = {0};
    CU_ASSERT_EQUAL_FATAL(arch_resolve(name, NULL, 0, &cfg, &err), NP_OK);
    return cfg;
}

static const struct {
    const char *arch;
    uint32_t cores;
    const char *op;
    double min_gain_pct; /* what tuning is known to find (reuse), checked as a lower bound */
} tune_cases[] = {
    {"tiny", 1, "matmul m=37 n=45 k=29 dtype=bf16", 0},
    {"tiny", 2, "matmul m=70 n=33 k=130 dtype=fp32 tb=1", 0},
    {"tiny", 1, "matmul m=50 n=19 k=77 dtype=int8 ta=1", 0},
    {"tiny", 2, "conv2d n=2 h=9 w=11 c=5 k=6 r=3 s=3 dtype=bf16", 0},
    /* attention's candidates are its block sizes */
    {"tiny", 2, "attention shape=1x3x37x12 dtype=bf16 causal=1", 0},
    {"tiny", 1, "attention_grad shape=1x2x21x6 dtype=fp16 causal=1", 0},
    {"tiny", 1, "attention_lse shape=2x1x45x8 dtype=fp16", 0},
    /* memory-bound: A's rows kept per tile row (reuse) read A once instead of per tile */
    {"edge", 1, "matmul m=256 n=1024 k=256 dtype=int8", 10.0},
};

TEST(the_tuned_tiling_simulated_again_is_never_slower_than_the_cost_models_choice)
{
    for (size_t i = 0; i < sizeof tune_cases / sizeof tune_cases[0]; i++) {
        arch_config cfg = preset(tune_cases[i].arch);
        uint32_t cores = tune_cases[i].cores;
        kc_kernel k = spec_kernel(&cfg, tune_cases[i].op, cores);
        uint64_t model = cycles_of(&cfg, &k, cores);
        krun_tuned t;
        np_err err = {0};
        CU_ASSERT_EQUAL_FATAL(krun_tune(&cfg, &k, KC_MAX_CANDS, &(krun_opts){.prog_cores = cores},
                                        &t, &err), NP_OK);
        CU_ASSERT(t.tried >= 2); /* a choice to make */
        CU_ASSERT_EQUAL(t.cycles[0], model); /* the first candidate is the model's choice */
        kc_kernel tuned = k;
        krun_with_tiling(&tuned, &t.best);
        uint64_t again = cycles_of(&cfg, &tuned, cores);
        if (getenv("KT_DEBUG"))
            fprintf(stderr, "%s %s: model %llu, tuned %llu (%u tried)\n", tune_cases[i].arch,
                    tune_cases[i].op, (unsigned long long)model, (unsigned long long)again,
                    t.tried);
        CU_ASSERT_EQUAL(again, t.cycles[t.best_index]); /* deterministic */
        CU_ASSERT(again <= model);
        CU_ASSERT(100.0 * (1.0 - (double)again / (double)model) >= tune_cases[i].min_gain_pct);
    }
}

TEST(the_tuned_tiling_still_equals_the_reference_executor)
{
    for (size_t i = 0; i < sizeof tune_cases / sizeof tune_cases[0]; i++) {
        if (strcmp(tune_cases[i].arch, "tiny")) /* values on the small shapes */
            continue;
        arch_config cfg = preset("tiny");
        uint32_t cores = tune_cases[i].cores;
        kc_kernel k = spec_kernel(&cfg, tune_cases[i].op, cores);
        krun_tuned t;
        np_err err = {0};
        CU_ASSERT_EQUAL_FATAL(krun_tune(&cfg, &k, KC_MAX_CANDS, &(krun_opts){.prog_cores = cores},
                                        &t, &err), NP_OK);
        /* every candidate the tuner may keep computes the same values */
        kc_kernel tuned = k;
        krun_with_tiling(&tuned, &t.best);
        krun_result r;
        krun_check c;
        np_status st = krun_kernel_check(&cfg, &tuned, 7 + i, &(krun_opts){.prog_cores = cores},
                                         &r, &c, &err);
        if (st != NP_OK)
            fprintf(stderr, "%s: %s\n", tune_cases[i].op, err.msg);
        CU_ASSERT_EQUAL_FATAL(st, NP_OK);
        CU_ASSERT(c.n > 0);
        CU_ASSERT_EQUAL(c.bad, 0);
        krun_result_free(&r);
    }
}
