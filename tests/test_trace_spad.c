/* test_trace_spad.c — the scratchpad a kernel holds (kc_result.spad_bytes, from the program's
 * allocator) and npusim run's "spad.used" counter of it (sim/run_trace.h, docs/traces.md). */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "lower.h"
#include "nn.h"
#include "trace_db.h"

static uint64_t align64(uint64_t n) { return (n + 63) / 64 * 64; }

/* An elementwise kernel compiled alone: the vector engine streams its tiles through two
 * buffer sets per core (compiler/kc_vec.h), each with a tile of every input and output,
 * 64-byte aligned — 2 x 3 x the tile's bytes for an add, the tile as its schedule names it;
 * work tiles of its chain come on top (an fp32 one for an add of many tiles). The kernel
 * takes it as one block: exactly that for a dense fp32 add of one tile, at least that
 * otherwise, and never more than a core's scratchpad. */
TEST(an_elementwise_kernel_holds_two_buffer_sets_of_a_tile_per_operand)
{
    np_err e = {0};
    arch_config cfg;
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tiny", NULL, 0, &cfg, &e), NP_OK);
    static const struct { int64_t shape[2]; nn_dtype dt; bool exact; } cases[] = {
        {{8, 64}, NN_F32, true}, {{3, 5}, NN_F32, true}, {{37, 701}, NN_F32, false},
        {{37, 701}, NN_BF16, false}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        nn_graph *g = nn_graph_new(1);
        nn_tensor *a = nn_input(g, "a", cases[i].dt, 2, cases[i].shape);
        nn_tensor *b = nn_input(g, "b", cases[i].dt, 2, cases[i].shape);
        nn_tensor *y = nn_add(g, a, b);
        kc_kernel k;
        kc_result r;
        CU_ASSERT_EQUAL_FATAL(lower_node_kernel(y, 1, &k, &e), NP_OK);
        CU_ASSERT_EQUAL_FATAL(lower_kernel_alone(&cfg, &k, &r, NULL, &e), NP_OK);
        const char *t = strstr(r.schedule, "tiles ");
        uint64_t rows = 0, cols = 0;
        CU_ASSERT_PTR_NOT_NULL_FATAL(t);
        CU_ASSERT_EQUAL_FATAL(sscanf(t, "tiles %" SCNu64 " x %" SCNu64, &rows, &cols), 2);
        uint64_t want = 2 * 3 * align64(rows * cols * nn_dtype_size(cases[i].dt));
        bool ok = cases[i].exact ? r.spad_bytes == want : r.spad_bytes >= want;
        if (!ok)
            fprintf(stderr, "%s: %" PRIu64 " bytes, want %s%" PRIu64 "\n", r.schedule,
                    r.spad_bytes, cases[i].exact ? "" : "at least ", want);
        CU_ASSERT(ok);
        CU_ASSERT(r.spad_bytes <= cfg.core.sram_bytes);
        nn_graph_free(g);
    }
}

/* npusim run's trace: per chip a spad.used counter, each kernel's footprint from its start
 * and 0 at its end, never above a core's scratchpad. */
TEST(the_run_trace_has_each_chips_scratchpad_in_use_within_its_capacity)
{
    char dir[] = "/tmp/npusim_trace_spad_XXXXXX", path[64];
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/run.json.gz", dir);
    harness_run r = harness_npusim("run", "--model", "gpt-tiny", "--batch", "8", "--microbatch",
                                   "2", "--dp", "2", "--tp", "2", "--trace", path, NULL);
    CU_ASSERT_EQUAL_FATAL(r.exit_status, 0);
    harness_run_free(&r);
    np_err e = {0};
    arch_config cfg;
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tpu-pod", NULL, 0, &cfg, &e), NP_OK);
    tdb *db = NULL;
    CU_ASSERT_EQUAL_FATAL(tdb_load(path, &db, &e), NP_OK);
    CU_ASSERT_EQUAL(db->problems, 0u);
    uint32_t id = tdb_find_str(db, "spad.used");
    size_t chips = 0;
    for (size_t c = 0; c < db->n_counters; c++) {
        const tdb_counter *k = &db->counters[c];
        if (k->name != id)
            continue;
        chips++;
        CU_ASSERT(k->max > 0);
        CU_ASSERT(k->max <= (double)cfg.core.sram_bytes);
        CU_ASSERT_EQUAL(k->min, 0);
        CU_ASSERT(k->samples >= 2 && k->samples % 2 == 0); /* a start and an end per kernel */
    }
    CU_ASSERT_EQUAL(chips, 4u); /* dp 2 x tp 2 */
    tdb_free(db);
    unlink(path);
    rmdir(dir);
}
