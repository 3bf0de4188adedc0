/* test_stats.c — the statistics registry: registration, updates, summaries against
 * hand-computed values, histogram bucketing and quantiles, text and JSON dumps. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "stats.h"

TEST(counters_accumulate_and_are_found_by_full_name)
{
    np_err err = {0};
    stats *s = stats_create();
    stats_counter *c = stats_new_counter(s, "chip0.core1.mxu", "busy_cycles", "cycles",
                                         "cycles computing", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    stats_add(c, 100);
    stats_inc(c);
    stats_add(c, 27);
    CU_ASSERT_EQUAL(c->value, 128);
    stats_kind kind = STATS_KIND_COUNT;
    CU_ASSERT_PTR_EQUAL(stats_find(s, "chip0.core1.mxu.busy_cycles", &kind), c);
    CU_ASSERT_EQUAL(kind, STATS_KIND_COUNTER);
    CU_ASSERT_PTR_NULL(stats_find(s, "chip0.core1.mxu.busy", NULL));
    CU_ASSERT_EQUAL(stats_count(s), 1);
    stats_free(s);
}

TEST(duplicate_names_are_refused_and_change_nothing)
{
    np_err err = {0};
    stats *s = stats_create();
    CU_ASSERT_PTR_NOT_NULL(stats_new_counter(s, "dma", "bytes", "bytes", "", &err));
    CU_ASSERT_PTR_NULL(stats_new_accum(s, "dma", "bytes", "bytes", "", &err));
    CU_ASSERT_EQUAL(err.status, NP_ERR_DUPLICATE);
    CU_ASSERT_STRING_EQUAL(err.msg, "statistic 'dma.bytes' is already registered");
    CU_ASSERT_EQUAL(stats_count(s), 1);
    CU_ASSERT_PTR_NULL(stats_new_counter(s, "", "x", "", "", &err));
    CU_ASSERT_EQUAL(err.status, NP_ERR_RANGE);
    stats_free(s);
}

TEST(many_statistics_keep_stable_pointers_through_growth)
{
    np_err err = {0};
    stats *s = stats_create();
    enum { N = 5000 };
    stats_counter **ptrs = malloc(N * sizeof *ptrs);
    char comp[32];
    for (int i = 0; i < N; i++) {
        snprintf(comp, sizeof comp, "core%d", i);
        ptrs[i] = stats_new_counter(s, comp, "retired", "instructions", "", &err);
        CU_ASSERT_PTR_NOT_NULL_FATAL(ptrs[i]);
        stats_add(ptrs[i], (uint64_t)i);
    }
    CU_ASSERT_EQUAL(stats_count(s), N);
    for (int i = 0; i < N; i += 97) {
        char full[64];
        snprintf(full, sizeof full, "core%d.retired", i);
        stats_counter *c = stats_find(s, full, NULL);
        CU_ASSERT_PTR_EQUAL(c, ptrs[i]);
        CU_ASSERT_EQUAL(c->value, (uint64_t)i);
    }
    free(ptrs);
    stats_free(s);
}

TEST(accumulator_summary_matches_hand_computation)
{
    np_err err = {0};
    stats *s = stats_create();
    stats_accum *a = stats_new_accum(s, "noc", "packet_latency", "cycles", "", &err);
    /* samples 2, 4, 4, 4, 5, 5, 7, 9: mean 5, population stddev 2 */
    const double v[] = {2, 4, 4, 4, 5, 5, 7, 9};
    for (size_t i = 0; i < 8; i++)
        stats_sample(a, v[i]);
    CU_ASSERT_EQUAL(a->count, 8);
    CU_ASSERT_DOUBLE_EQUAL(a->sum, 40.0, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(stats_accum_mean(a), 5.0, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(stats_accum_stddev(a), 2.0, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(a->min, 2.0, 0);
    CU_ASSERT_DOUBLE_EQUAL(a->max, 9.0, 0);
    stats_free(s);
}

TEST(linear_histogram_puts_samples_in_the_right_buckets)
{
    np_err err = {0};
    stats *s = stats_create();
    /* buckets [10,20) [20,30) [30,40) */
    stats_hist *h = stats_new_hist_linear(s, "noc", "lat", "cycles", "", 10, 10, 3, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    const double v[] = {5, 10, 19.99, 20, 35, 40, 100};
    for (size_t i = 0; i < 7; i++)
        stats_hist_sample(h, v[i]);
    CU_ASSERT_EQUAL(h->under, 1);
    CU_ASSERT_EQUAL(h->buckets[0], 2);
    CU_ASSERT_EQUAL(h->buckets[1], 1);
    CU_ASSERT_EQUAL(h->buckets[2], 1);
    CU_ASSERT_EQUAL(h->over, 2);
    CU_ASSERT_EQUAL(h->acc.count, 7);
    stats_free(s);
}

TEST(log2_histogram_buckets_are_powers_of_two)
{
    np_err err = {0};
    stats *s = stats_create();
    stats_hist *h = stats_new_hist_log2(s, "dma", "size", "bytes", "", 5, &err);
    /* buckets [0,1) [1,2) [2,4) [4,8) [8,16) */
    const double v[] = {0, 0.5, 1, 3, 4, 7.9, 8, 15, 16};
    for (size_t i = 0; i < 9; i++)
        stats_hist_sample(h, v[i]);
    CU_ASSERT_EQUAL(h->buckets[0], 2);
    CU_ASSERT_EQUAL(h->buckets[1], 1);
    CU_ASSERT_EQUAL(h->buckets[2], 1);
    CU_ASSERT_EQUAL(h->buckets[3], 2);
    CU_ASSERT_EQUAL(h->buckets[4], 2);
    CU_ASSERT_EQUAL(h->over, 1);
    CU_ASSERT_PTR_NULL(stats_new_hist_log2(s, "dma", "bad", "bytes", "", 0, &err));
    CU_ASSERT_EQUAL(err.status, NP_ERR_RANGE);
    stats_free(s);
}

TEST(histogram_quantiles_interpolate_within_buckets)
{
    np_err err = {0};
    stats *s = stats_create();
    /* 100 samples 0.5, 1.5, ..., 99.5 into unit buckets [0,100): the q-quantile of the
     * interpolated distribution is 100*q (clamped to the sample range). */
    stats_hist *h = stats_new_hist_linear(s, "x", "v", "", "", 0, 1, 100, &err);
    for (int i = 0; i < 100; i++)
        stats_hist_sample(h, i + 0.5);
    CU_ASSERT_DOUBLE_EQUAL(stats_hist_quantile(h, 0.5), 50.0, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(stats_hist_quantile(h, 0.99), 99.0, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(stats_hist_quantile(h, 0.25), 25.0, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(stats_hist_quantile(h, 1.0), 99.5, 1e-9);
    stats_free(s);
}

TEST(reset_zeroes_values_and_keeps_registrations)
{
    np_err err = {0};
    stats *s = stats_create();
    stats_counter *c = stats_new_counter(s, "a", "c", "", "", &err);
    stats_hist *h = stats_new_hist_linear(s, "a", "h", "", "", 0, 1, 4, &err);
    stats_add(c, 5);
    stats_hist_sample(h, 2);
    stats_hist_sample(h, 9);
    stats_reset(s);
    CU_ASSERT_EQUAL(c->value, 0);
    CU_ASSERT_EQUAL(h->buckets[2], 0);
    CU_ASSERT_EQUAL(h->over, 0);
    CU_ASSERT_EQUAL(h->acc.count, 0);
    CU_ASSERT_EQUAL(stats_count(s), 2);
    stats_free(s);
}

TEST(text_dump_lists_each_statistic_with_value_and_unit)
{
    np_err err = {0};
    stats *s = stats_create();
    stats_add(stats_new_counter(s, "core0.dma", "bytes_read", "bytes", "HBM to SRAM", &err),
              4096);
    stats_accum *a = stats_new_accum(s, "core0.mxu", "tile_cycles", "cycles", "", &err);
    stats_sample(a, 10);
    stats_sample(a, 30);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    stats_dump_text(s, f);
    fclose(f);
    CU_ASSERT_STRING_EQUAL(buf,
        "core0.dma.bytes_read                             4096 bytes  # HBM to SRAM\n"
        "core0.mxu.tile_cycles                            count=2 mean=20 min=10 max=30 cycles\n");
    free(buf);
    stats_free(s);
}

TEST(json_dump_groups_by_component_in_registration_order)
{
    np_err err = {0};
    stats *s = stats_create();
    stats_add(stats_new_counter(s, "chip0.hbm", "bytes_read", "bytes", "", &err), 7);
    stats_add(stats_new_counter(s, "chip0.core0", "cycles", "cycles", "", &err), 3);
    stats_sample(stats_new_accum(s, "chip0.hbm", "latency", "ns", "", &err), 12.5);
    stats_hist *h = stats_new_hist_linear(s, "chip0.noc", "lat", "cycles", "", 0, 10, 2, &err);
    stats_hist_sample(h, 15);
    json_t *j = stats_to_json(s);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    const char *first_key = json_object_iter_key(json_object_iter(j));
    CU_ASSERT_STRING_EQUAL(first_key, "chip0.hbm");
    json_t *hbm = json_object_get(j, "chip0.hbm");
    CU_ASSERT_EQUAL(json_object_size(hbm), 2);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(json_object_get(hbm, "bytes_read"),
                                                       "value")), 7);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_object_get(hbm, "latency"),
                                                             "unit")), "ns");
    CU_ASSERT_DOUBLE_EQUAL(json_real_value(json_object_get(json_object_get(hbm, "latency"),
                                                           "mean")), 12.5, 0);
    json_t *lat = json_object_get(json_object_get(j, "chip0.noc"), "lat");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(lat, "kind")), "histogram");
    CU_ASSERT_EQUAL(json_integer_value(json_array_get(json_object_get(lat, "bucket_counts"), 1)),
                    1);
    json_decref(j);
    stats_free(s);
}
