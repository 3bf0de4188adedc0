/* stats.h — the statistics registry: named counters, accumulators and histograms that
 * components register once and update on their hot paths, dumped as text and JSON.
 *
 * A statistic is named "<component>.<name>" (component like "chip0.core3.mxu"), carries a
 * unit ("cycles", "bytes", "ps", ...) and a one-line description. Registration returns a
 * pointer that stays valid until stats_free; updating is a plain field update through the
 * inline functions below, with no lookup. Dumps list statistics in registration order, so
 * they are deterministic.
 *
 *   stats *reg = stats_create();
 *   stats_counter *busy = stats_new_counter(reg, "core0.mxu", "busy_cycles", "cycles",
 *                                           "cycles the array computed", &err);
 *   stats_add(busy, 128);
 *   stats_dump_text(reg, stdout);
 */
#ifndef NPUSIM_STATS_H
#define NPUSIM_STATS_H

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>

#include "err.h"

typedef struct stats stats;

typedef enum stats_kind {
    STATS_KIND_COUNTER,
    STATS_KIND_ACCUM,
    STATS_KIND_HIST,
    STATS_KIND_COUNT
} stats_kind;

/* An event count or a total (cycles, bytes). */
typedef struct stats_counter {
    uint64_t value;
} stats_counter;

/* A stream of samples summarised by count, sum, min, max and sum of squares. */
typedef struct stats_accum {
    uint64_t count;
    double sum, sum_sq, min, max;
} stats_accum;

/* Bucketed samples. Linear: bucket i holds [lo + i*width, lo + (i+1)*width). Log2: bucket 0
 * holds [0, 1) and bucket i >= 1 holds [2^(i-1), 2^i). Samples below the first bucket count in
 * `under`, at or beyond the last in `over`. `acc` summarises every sample exactly. */
typedef enum stats_hist_scale { STATS_HIST_LINEAR, STATS_HIST_LOG2 } stats_hist_scale;
typedef struct stats_hist {
    stats_hist_scale scale;
    double lo, width;   /* linear only */
    uint32_t n_buckets;
    uint64_t *buckets;  /* n_buckets counts, owned by the registry */
    uint64_t under, over;
    stats_accum acc;
} stats_hist;

/* Creates an empty registry; NULL when out of memory. */
stats *stats_create(void);
/* Frees the registry and every statistic it handed out (NULL is fine). */
void stats_free(stats *s);

/* Register a statistic. Each returns a pointer valid until stats_free, or NULL after filling
 * err: NP_ERR_DUPLICATE when "<component>.<name>" is already registered, NP_ERR_RANGE for an
 * empty name or an impossible histogram shape, NP_ERR_NOMEM. The registry keeps copies of the
 * strings. */
stats_counter *stats_new_counter(stats *s, const char *component, const char *name,
                                 const char *unit, const char *desc, np_err *err);
stats_accum *stats_new_accum(stats *s, const char *component, const char *name,
                             const char *unit, const char *desc, np_err *err);
stats_hist *stats_new_hist_linear(stats *s, const char *component, const char *name,
                                  const char *unit, const char *desc, double lo, double width,
                                  uint32_t n_buckets, np_err *err);
stats_hist *stats_new_hist_log2(stats *s, const char *component, const char *name,
                                const char *unit, const char *desc, uint32_t n_buckets,
                                np_err *err);

static inline void stats_add(stats_counter *c, uint64_t n) { c->value += n; }
static inline void stats_inc(stats_counter *c) { c->value++; }
void stats_sample(stats_accum *a, double v);
void stats_hist_sample(stats_hist *h, double v);

/* Mean and population standard deviation of an accumulator (0 when it has no samples). */
double stats_accum_mean(const stats_accum *a);
double stats_accum_stddev(const stats_accum *a);

/* The q-quantile (0 <= q <= 1) of a histogram, interpolated linearly inside the bucket that
 * holds it; samples in `under`/`over` count at the accumulator's min/max. 0 when empty. */
double stats_hist_quantile(const stats_hist *h, double q);

/* Number of registered statistics, and lookup of one by its full name ("comp.name"):
 * returns its kind and a pointer to its value struct, or NULL when there is no such stat. */
size_t stats_count(const stats *s);
void *stats_find(const stats *s, const char *full_name, stats_kind *kind);

/* Zeroes every value (e.g. after a warm-up period); registrations stay. */
void stats_reset(stats *s);

/* Text dump: one line per statistic, "full.name  value unit  # description"; accumulators
 * print count/mean/min/max, histograms their summary and non-empty buckets. */
void stats_dump_text(const stats *s, FILE *out);

/* JSON dump: {"<component>": {"<name>": {"kind": ..., "unit": ..., ...}}} in registration
 * order (see docs/stats.md for the fields of each kind). NULL when out of memory. */
json_t *stats_to_json(const stats *s);

#endif
