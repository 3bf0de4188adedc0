/* test_kernels_attnrows.c — the forward attention's query-block rows, rotated (compiler/
 * kc_attn.c, fwd_head): each row computes the next row's first S before its own last P V,
 * the first and last full rows emitted alone, the rows between them a loop. Every count of
 * full rows (one to five, with and without an edge row) against the framework's reference
 * executor, every float type, one and two cores, and with semaphores alone (no operand
 * scoreboard, four copies in flight). (tests/test_kernels_attn.c checks that the program
 * does not grow with the rows.) */
#include <stdio.h>
#include <string.h>

#include "arch.h"
#include "harness.h"
#include "kernel.h"
#include "krun.h"

static kc_kernel spec_kernel(const arch_config *cfg, const char *text, uint32_t cores)
{
    np_err err = {0};
    kc_prog *p = NULL;
    kc_spec s;
    kc_kernel k;
    memset(&k, 0, sizeof k);
    CU_ASSERT_EQUAL_FATAL(kc_spec_parse(text, &s, &err), NP_OK);
    CU_ASSERT_EQUAL_FATAL(kc_prog_new(cfg, &(kc_prog_opts){.cores = 1}, &p, &err), NP_OK);
    np_status st = kc_spec_kernel(p, &s, &k, &err);
    if (st != NP_OK)
        fprintf(stderr, "%s: %s\n", text, err.msg);
    CU_ASSERT_EQUAL_FATAL(st, NP_OK);
    kc_prog_free(p);
    k.place = (kc_place){0, 0, cores};
    return k;
}

static void check_rows(const arch_config *cfg, const char *tag)
{
    /* 16-row blocks: S = 17 (one full row and an edge of 1), 20, 32 (two, no edge), 33, 48
     * (three: a loop of one row), 49, 64, 81 (five and an edge) */
    static const int64_t seqs[] = {17, 20, 32, 33, 48, 49, 64, 81};
    static const char *const dts[] = {"fp32", "bf16", "fp16"};
    for (size_t i = 0; i < sizeof seqs / sizeof seqs[0]; i++)
        for (int d = 0; d < 3; d++)
            for (uint32_t cores = 1; cores <= 2; cores++) {
                char text[128];
                snprintf(text, sizeof text, "attention shape=2x3x%lldx6 dtype=%s block=16",
                         (long long)seqs[i], dts[d]);
                kc_kernel k = spec_kernel(cfg, text, cores);
                krun_result r;
                krun_check c;
                np_err err = {0};
                np_status st = krun_kernel_check(cfg, &k, 3 + i, NULL, &r, &c, &err);
                if (st != NP_OK || c.bad)
                    fprintf(stderr, "%s, %s, %u cores: %s (%lld of %lld bad)\n", text, tag,
                            cores, st ? err.msg : "", (long long)c.bad, (long long)c.n);
                CU_ASSERT_EQUAL(st, NP_OK);
                if (st != NP_OK)
                    continue;
                CU_ASSERT_EQUAL(c.n_out, 2); /* out and lse */
                CU_ASSERT_EQUAL(c.bad, 0);
                krun_result_free(&r);
            }
}

TEST(rotated_forward_rows_equal_the_reference_for_every_count_of_rows)
{
    arch_config cfg;
    np_err err = {0};
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tiny", NULL, 0, &cfg, &err), NP_OK);
    check_rows(&cfg, "tiny");
}

TEST(rotated_forward_rows_hold_with_semaphores_alone_and_copies_in_flight)
{
    arch_config cfg;
    np_err err = {0};
    const char *sets[] = {"core.scoreboard=0", "core.dma_outstanding=4"};
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tiny", sets, 2, &cfg, &err), NP_OK);
    check_rows(&cfg, "no scoreboard");
}
