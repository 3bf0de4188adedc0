/* stats.c — the statistics registry (see stats.h).
 *
 * Entries live in a growing array in registration order (the dump order); each entry's value
 * struct is allocated on its own so the pointers handed out never move. An open-addressing
 * index keyed by the FNV-1a hash of the full name finds duplicates and serves stats_find; its
 * capacity is a power of two kept at least twice the number of entries. */
#include "stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct stats_entry {
    char *full_name; /* "component.name" */
    size_t comp_len; /* length of the component prefix */
    char *unit, *desc;
    stats_kind kind;
    void *value; /* stats_counter / stats_accum / stats_hist */
} stats_entry;

struct stats {
    stats_entry *entries;
    size_t n, cap;
    uint32_t *index; /* entry number + 1; 0 = empty slot */
    size_t index_cap;
};

static const char *const stats_kind_names[STATS_KIND_COUNT] = {
    [STATS_KIND_COUNTER] = "counter",
    [STATS_KIND_ACCUM] = "accumulator",
    [STATS_KIND_HIST] = "histogram",
};

static uint64_t stats_hash(const char *str)
{
    uint64_t h = 1469598103934665603ull;
    for (; *str; str++)
        h = (h ^ (unsigned char)*str) * 1099511628211ull;
    return h;
}

stats *stats_create(void)
{
    return calloc(1, sizeof(stats));
}

static void stats_entry_free(stats_entry *e)
{
    if (e->kind == STATS_KIND_HIST)
        free(((stats_hist *)e->value)->buckets);
    free(e->value);
    free(e->full_name);
    free(e->unit);
    free(e->desc);
}

void stats_free(stats *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n; i++)
        stats_entry_free(&s->entries[i]);
    free(s->entries);
    free(s->index);
    free(s);
}

/* Slot of full_name in the index: where it is, or the empty slot where it would go. */
static size_t stats_slot(const stats *s, const char *full_name)
{
    size_t mask = s->index_cap - 1;
    size_t i = (size_t)stats_hash(full_name) & mask;
    while (s->index[i] && strcmp(s->entries[s->index[i] - 1].full_name, full_name) != 0)
        i = (i + 1) & mask;
    return i;
}

static int stats_index_grow(stats *s)
{
    size_t cap = s->index_cap ? s->index_cap * 2 : 64;
    uint32_t *idx = calloc(cap, sizeof *idx);
    if (!idx)
        return -1;
    free(s->index);
    s->index = idx;
    s->index_cap = cap;
    for (size_t e = 0; e < s->n; e++)
        s->index[stats_slot(s, s->entries[e].full_name)] = (uint32_t)(e + 1);
    return 0;
}

static char *stats_strdup(const char *str)
{
    size_t n = strlen(str) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, str, n);
    return d;
}

/* Registers an entry owning value (freed here on failure). */
static void *stats_register(stats *s, const char *component, const char *name,
                            const char *unit, const char *desc, stats_kind kind, void *value,
                            np_err *err)
{
    stats_entry e = {0};
    e.kind = kind;
    e.value = value;
    if (!value)
        goto nomem;
    if (!component || !component[0] || !name || !name[0]) {
        np_err_set(err, NP_ERR_RANGE, "statistic needs a component and a name");
        goto fail;
    }
    size_t cl = strlen(component), nl = strlen(name);
    e.full_name = malloc(cl + nl + 2);
    e.unit = stats_strdup(unit ? unit : "");
    e.desc = stats_strdup(desc ? desc : "");
    if (!e.full_name || !e.unit || !e.desc)
        goto nomem;
    memcpy(e.full_name, component, cl);
    e.full_name[cl] = '.';
    memcpy(e.full_name + cl + 1, name, nl + 1);
    e.comp_len = cl;
    if ((s->n + 1) * 2 > s->index_cap && stats_index_grow(s) != 0)
        goto nomem;
    size_t slot = stats_slot(s, e.full_name);
    if (s->index[slot]) {
        np_err_set(err, NP_ERR_DUPLICATE, "statistic '%s' is already registered", e.full_name);
        goto fail;
    }
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 32;
        stats_entry *grown = realloc(s->entries, cap * sizeof *grown);
        if (!grown)
            goto nomem;
        s->entries = grown;
        s->cap = cap;
    }
    s->entries[s->n++] = e;
    s->index[slot] = (uint32_t)s->n;
    return value;
nomem:
    np_err_set(err, NP_ERR_NOMEM, "out of memory registering statistic '%s.%s'",
               component ? component : "", name ? name : "");
fail:
    stats_entry_free(&e);
    return NULL;
}

stats_counter *stats_new_counter(stats *s, const char *component, const char *name,
                                 const char *unit, const char *desc, np_err *err)
{
    return stats_register(s, component, name, unit, desc, STATS_KIND_COUNTER,
                          calloc(1, sizeof(stats_counter)), err);
}

static void stats_accum_clear(stats_accum *a)
{
    memset(a, 0, sizeof *a);
}

stats_accum *stats_new_accum(stats *s, const char *component, const char *name,
                             const char *unit, const char *desc, np_err *err)
{
    return stats_register(s, component, name, unit, desc, STATS_KIND_ACCUM,
                          calloc(1, sizeof(stats_accum)), err);
}

static stats_hist *stats_new_hist(stats *s, const char *component, const char *name,
                                  const char *unit, const char *desc, stats_hist_scale scale,
                                  double lo, double width, uint32_t n_buckets, np_err *err)
{
    if (n_buckets == 0 || n_buckets > (1u << 20) ||
        (scale == STATS_HIST_LINEAR && !(width > 0 && isfinite(width) && isfinite(lo))) ||
        (scale == STATS_HIST_LOG2 && n_buckets > 64)) {
        np_err_set(err, NP_ERR_RANGE, "histogram '%s.%s': impossible shape (%u buckets)",
                   component ? component : "", name ? name : "", n_buckets);
        return NULL;
    }
    stats_hist *h = calloc(1, sizeof *h);
    uint64_t *b = calloc(n_buckets, sizeof *b);
    if (!h || !b) {
        free(h);
        free(b);
        np_err_set(err, NP_ERR_NOMEM, "out of memory registering histogram");
        return NULL;
    }
    h->scale = scale;
    h->lo = lo;
    h->width = width;
    h->n_buckets = n_buckets;
    h->buckets = b;
    return stats_register(s, component, name, unit, desc, STATS_KIND_HIST, h, err);
}

stats_hist *stats_new_hist_linear(stats *s, const char *component, const char *name,
                                  const char *unit, const char *desc, double lo, double width,
                                  uint32_t n_buckets, np_err *err)
{
    return stats_new_hist(s, component, name, unit, desc, STATS_HIST_LINEAR, lo, width,
                          n_buckets, err);
}

stats_hist *stats_new_hist_log2(stats *s, const char *component, const char *name,
                                const char *unit, const char *desc, uint32_t n_buckets,
                                np_err *err)
{
    return stats_new_hist(s, component, name, unit, desc, STATS_HIST_LOG2, 0, 0, n_buckets,
                          err);
}

void stats_sample(stats_accum *a, double v)
{
    if (a->count == 0 || v < a->min)
        a->min = v;
    if (a->count == 0 || v > a->max)
        a->max = v;
    a->count++;
    a->sum += v;
    a->sum_sq += v * v;
}

/* Lower edge of bucket i. */
static double stats_hist_edge(const stats_hist *h, uint32_t i)
{
    if (h->scale == STATS_HIST_LINEAR)
        return h->lo + h->width * i;
    return i == 0 ? 0.0 : ldexp(1.0, (int)i - 1);
}

void stats_hist_sample(stats_hist *h, double v)
{
    stats_sample(&h->acc, v);
    if (h->scale == STATS_HIST_LINEAR) {
        double pos = (v - h->lo) / h->width;
        if (pos < 0)
            h->under++;
        else if (pos >= h->n_buckets)
            h->over++;
        else
            h->buckets[(uint32_t)pos]++;
        return;
    }
    if (v < 0) {
        h->under++;
        return;
    }
    uint32_t i = 0;
    if (v >= 1.0) {
        int ex;
        frexp(v, &ex); /* v in [2^(ex-1), 2^ex) */
        i = (uint32_t)ex;
    }
    if (i >= h->n_buckets)
        h->over++;
    else
        h->buckets[i]++;
}

double stats_accum_mean(const stats_accum *a)
{
    return a->count ? a->sum / (double)a->count : 0.0;
}

double stats_accum_stddev(const stats_accum *a)
{
    if (a->count == 0)
        return 0.0;
    double m = stats_accum_mean(a);
    double var = a->sum_sq / (double)a->count - m * m;
    return var > 0 ? sqrt(var) : 0.0;
}

double stats_hist_quantile(const stats_hist *h, double q)
{
    uint64_t total = h->acc.count;
    if (total == 0)
        return 0.0;
    if (q < 0)
        q = 0;
    if (q > 1)
        q = 1;
    double target = q * (double)total; /* rank, counted from 0 */
    double seen = (double)h->under;
    if (target <= seen && h->under)
        return h->acc.min;
    for (uint32_t i = 0; i < h->n_buckets; i++) {
        double c = (double)h->buckets[i];
        if (c > 0 && target <= seen + c) {
            double lo = stats_hist_edge(h, i), hi = stats_hist_edge(h, i + 1);
            if (lo < h->acc.min)
                lo = h->acc.min;
            if (hi > h->acc.max)
                hi = h->acc.max;
            return lo + (hi - lo) * ((target - seen) / c);
        }
        seen += c;
    }
    return h->acc.max;
}

size_t stats_count(const stats *s)
{
    return s->n;
}

void *stats_find(const stats *s, const char *full_name, stats_kind *kind)
{
    if (!s->index_cap)
        return NULL;
    size_t slot = stats_slot(s, full_name);
    if (!s->index[slot])
        return NULL;
    const stats_entry *e = &s->entries[s->index[slot] - 1];
    if (kind)
        *kind = e->kind;
    return e->value;
}

void stats_reset(stats *s)
{
    for (size_t i = 0; i < s->n; i++) {
        stats_entry *e = &s->entries[i];
        if (e->kind == STATS_KIND_COUNTER) {
            ((stats_counter *)e->value)->value = 0;
        } else if (e->kind == STATS_KIND_ACCUM) {
            stats_accum_clear(e->value);
        } else {
            stats_hist *h = e->value;
            memset(h->buckets, 0, h->n_buckets * sizeof *h->buckets);
            h->under = h->over = 0;
            stats_accum_clear(&h->acc);
        }
    }
}

static void stats_dump_accum_text(const stats_accum *a, const char *unit, FILE *out)
{
    fprintf(out, "count=%llu mean=%.6g min=%.6g max=%.6g %s", (unsigned long long)a->count,
            stats_accum_mean(a), a->count ? a->min : 0.0, a->count ? a->max : 0.0, unit);
}

void stats_dump_text(const stats *s, FILE *out)
{
    for (size_t i = 0; i < s->n; i++) {
        const stats_entry *e = &s->entries[i];
        fprintf(out, "%-48s ", e->full_name);
        if (e->kind == STATS_KIND_COUNTER) {
            fprintf(out, "%llu %s",
                    (unsigned long long)((const stats_counter *)e->value)->value, e->unit);
        } else if (e->kind == STATS_KIND_ACCUM) {
            stats_dump_accum_text(e->value, e->unit, out);
        } else {
            const stats_hist *h = e->value;
            stats_dump_accum_text(&h->acc, e->unit, out);
            fprintf(out, " p50=%.6g p99=%.6g %s", stats_hist_quantile(h, 0.5),
                    stats_hist_quantile(h, 0.99), e->unit);
        }
        if (e->desc[0])
            fprintf(out, "  # %s", e->desc);
        fputc('\n', out);
        if (e->kind == STATS_KIND_HIST) {
            const stats_hist *h = e->value;
            if (h->under)
                fprintf(out, "    < %-12g %llu\n", stats_hist_edge(h, 0),
                        (unsigned long long)h->under);
            for (uint32_t b = 0; b < h->n_buckets; b++)
                if (h->buckets[b])
                    fprintf(out, "    [%g, %g) %llu\n", stats_hist_edge(h, b),
                            stats_hist_edge(h, b + 1), (unsigned long long)h->buckets[b]);
            if (h->over)
                fprintf(out, "    >= %-11g %llu\n", stats_hist_edge(h, h->n_buckets),
                        (unsigned long long)h->over);
        }
    }
}

static int stats_accum_to_json(json_t *o, const stats_accum *a)
{
    return json_object_set_new(o, "count", json_integer((json_int_t)a->count)) |
           json_object_set_new(o, "sum", json_real(a->sum)) |
           json_object_set_new(o, "mean", json_real(stats_accum_mean(a))) |
           json_object_set_new(o, "min", json_real(a->count ? a->min : 0.0)) |
           json_object_set_new(o, "max", json_real(a->count ? a->max : 0.0)) |
           json_object_set_new(o, "stddev", json_real(stats_accum_stddev(a)));
}

static json_t *stats_entry_to_json(const stats_entry *e)
{
    json_t *o = json_pack("{s:s, s:s}", "kind", stats_kind_names[e->kind], "unit", e->unit);
    if (!o)
        return NULL;
    int rc = 0;
    if (e->kind == STATS_KIND_COUNTER) {
        rc = json_object_set_new(
            o, "value", json_integer((json_int_t)((const stats_counter *)e->value)->value));
    } else if (e->kind == STATS_KIND_ACCUM) {
        rc = stats_accum_to_json(o, e->value);
    } else {
        const stats_hist *h = e->value;
        rc = stats_accum_to_json(o, &h->acc);
        rc |= json_object_set_new(o, "p50", json_real(stats_hist_quantile(h, 0.5)));
        rc |= json_object_set_new(o, "p99", json_real(stats_hist_quantile(h, 0.99)));
        rc |= json_object_set_new(o, "scale", json_string(h->scale == STATS_HIST_LINEAR
                                                              ? "linear" : "log2"));
        json_t *edges = json_array(), *counts = json_array();
        rc |= json_object_set_new(o, "bucket_lo", edges);
        rc |= json_object_set_new(o, "bucket_counts", counts);
        if (!edges || !counts)
            rc = -1;
        for (uint32_t b = 0; rc == 0 && b < h->n_buckets; b++) {
            rc |= json_array_append_new(edges, json_real(stats_hist_edge(h, b)));
            rc |= json_array_append_new(counts, json_integer((json_int_t)h->buckets[b]));
        }
        rc |= json_object_set_new(o, "under", json_integer((json_int_t)h->under));
        rc |= json_object_set_new(o, "over", json_integer((json_int_t)h->over));
    }
    rc |= json_object_set_new(o, "description", json_string(e->desc));
    if (rc) {
        json_decref(o);
        return NULL;
    }
    return o;
}

json_t *stats_to_json(const stats *s)
{
    json_t *root = json_object();
    for (size_t i = 0; root && i < s->n; i++) {
        const stats_entry *e = &s->entries[i];
        char comp[512];
        snprintf(comp, sizeof comp, "%.*s", (int)e->comp_len, e->full_name);
        json_t *group = json_object_get(root, comp);
        if (!group && json_object_set_new(root, comp, group = json_object()) != 0)
            goto fail;
        json_t *v = stats_entry_to_json(e);
        if (!v || json_object_set_new(group, e->full_name + e->comp_len + 1, v) != 0)
            goto fail;
    }
    return root;
fail:
    json_decref(root);
    return NULL;
}
