/* test_compiler_suite.c — the tile choice on bench/kernel_suite.txt (30 kernels): the cost
 * model's estimate of its own choice within 15% of the simulated cycles on every kernel, and
 * tuning (the fastest of its candidate tilings, simulated) never slower than that choice and
 * at least 10% faster on 5 kernels or more (issue 10, done-when 5). The simulator is the
 * oracle; bench/bench_kernel_suite prints the same figures. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"
#include "ksuite.h"

TEST(the_cost_model_is_within_15_percent_and_tuning_never_loses_and_gains_on_five)
{
    ksuite_row *rows;
    size_t n;
    np_err err = {0};
    CU_ASSERT_EQUAL_FATAL(ksuite_load(harness_src_path("bench/kernel_suite.txt"), &rows, &n, &err),
                          NP_OK);
    CU_ASSERT_EQUAL(n, 30u);
    for (size_t i = 0; i < n; i++) {
        if (ksuite_run(&rows[i], KC_MAX_CANDS, &err) != NP_OK) {
            fprintf(stderr, "%s\n", err.msg);
            CU_FAIL("a suite kernel did not run");
            continue;
        }
        if (fabs(rows[i].err_pct) > 15.0 || rows[i].tuned_cycles > rows[i].model_cycles)
            fprintf(stderr, "%s on %u cores: model %+.1f%%, tuned %llu vs %llu\n", rows[i].op,
                    rows[i].cores, rows[i].err_pct, (unsigned long long)rows[i].tuned_cycles,
                    (unsigned long long)rows[i].model_cycles);
        CU_ASSERT(fabs(rows[i].err_pct) <= 15.0);
        CU_ASSERT(rows[i].tuned_cycles <= rows[i].model_cycles);
        CU_ASSERT(rows[i].tried >= 1 && rows[i].tried <= KC_MAX_CANDS);
    }
    ksuite_summary s;
    ksuite_summarize(rows, n, &s);
    CU_ASSERT_EQUAL(s.within_15, n);
    CU_ASSERT_EQUAL(s.tuned_slower, 0u);
    CU_ASSERT(s.gain_10 >= 5);
    free(rows);
    /* a malformed suite line is an error naming the file and line */
    char path[] = "/tmp/npusim_suite_XXXXXX";
    int fd = mkstemp(path);
    FILE *f = fdopen(fd, "w");
    fputs("# ok\ntpu-pod 1 matmul m=8 n=8 k=8\ntpu-pod x\n", f);
    fclose(f);
    CU_ASSERT_EQUAL(ksuite_load(path, &rows, &n, &err), NP_ERR_SYNTAX);
    CU_ASSERT_EQUAL(err.line, 3);
    remove(path);
}
