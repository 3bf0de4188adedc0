/* serve.c — the serving simulator (serve.h): request sources (trace files, Poisson arrivals),
 * vLLM v0's continuous-batching scheduler over a paged kv cache, iteration times composed
 * from infer.h's parts cached by shape bucket, and the figures of a run. */
#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "human.h"
#include "infer.h"
#include "readfile.h"
#include "rng.h"
#include "serve.h"

#define SERVE_TRACE_MAX_BYTES (1ull << 30)
#define SERVE_HBM_FRACTION 0.9   /* vLLM's default gpu_memory_utilization */
#define SERVE_WATERMARK 0.01     /* vLLM v0's block-manager watermark, of the blocks */
#define SERVE_MAX_SEQS 256       /* vLLM's default max_num_seqs */
#define SERVE_MIN_BATCH_TOKENS 2048 /* vLLM v0's max_num_batched_tokens: max(context, this) */
#define SERVE_BUCKET_BITS 2

/* ---- lengths and arrivals ---------------------------------------------------------------- */

np_status serve_dist_parse(const char *flag, const char *text, serve_dist *out, np_err *err)
{
    static const struct { const char *name; serve_dist_kind kind; } kinds[] = {
        {"uniform:", SERVE_DIST_UNIFORM}, {"normal:", SERVE_DIST_NORMAL},
        {"lognormal:", SERVE_DIST_LOGNORMAL}};
    *out = (serve_dist){.kind = SERVE_DIST_FIXED};
    const char *p = text;
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (strncmp(text, kinds[i].name, strlen(kinds[i].name)) == 0)
            out->kind = kinds[i].kind, p = text + strlen(kinds[i].name);
    char *end;
    errno = 0;
    out->a = strtod(p, &end);
    bool ok = end != p && errno == 0 && isfinite(out->a);
    if (ok && out->kind != SERVE_DIST_FIXED) {
        ok = *end == ':';
        p = end + 1;
        out->b = strtod(p, &end);
        ok = ok && end != p && errno == 0 && isfinite(out->b);
    }
    ok = ok && *end == '\0';
    if (ok && (out->kind == SERVE_DIST_FIXED || out->kind == SERVE_DIST_UNIFORM))
        ok = out->a >= 1 && out->a == floor(out->a) && out->a <= 1e9 &&
             (out->kind == SERVE_DIST_FIXED ||
              (out->b >= out->a && out->b == floor(out->b) && out->b <= 1e9));
    else if (ok)
        ok = out->a > 0 && out->a <= 1e9 && out->b >= 0 && out->b <= 1e9;
    if (!ok)
        return np_err_set(err, NP_ERR_USAGE, "%s '%s': expected a token count N >= 1, "
                          "uniform:A:B (1 <= A <= B), normal:MEAN:SD or lognormal:MEAN:SD "
                          "(MEAN > 0, SD >= 0)", flag, text);
    return NP_OK;
}

/* A standard normal value (Box-Muller, one of the pair). */
static double std_normal(rng *r)
{
    double u = 1.0 - rng_unit(r), v = rng_unit(r); /* u in (0, 1] */
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v) /* 2 pi */;
}

static int64_t dist_draw(const serve_dist *d, rng *r)
{
    double x;
    switch (d->kind) {
    case SERVE_DIST_FIXED:
        return (int64_t)d->a;
    case SERVE_DIST_UNIFORM:
        return (int64_t)d->a + (int64_t)rng_below(r, (uint64_t)(d->b - d->a) + 1);
    case SERVE_DIST_NORMAL:
        x = d->a + d->b * std_normal(r);
        break;
    default: { /* lognormal of mean a and sd b: sigma^2 = ln(1 + b^2/a^2), mu = ln a - s^2/2 */
        double s2 = log(1.0 + d->b * d->b / (d->a * d->a));
        x = exp(log(d->a) - s2 / 2 + sqrt(s2) * std_normal(r));
        break;
    }
    }
    x = nearbyint(x);
    return x < 1 ? 1 : x > 1e9 ? 1000000000 : (int64_t)x;
}

np_status serve_poisson(double rate, int64_t n, const serve_dist *prompt,
                        const serve_dist *output, uint64_t seed, serve_request **out,
                        np_err *err)
{
    *out = NULL;
    if (n < 1)
        return np_err_set(err, NP_ERR_USAGE, "--requests %lld: expected at least 1",
                          (long long)n);
    if (!(rate > 0) || !isfinite(rate))
        return np_err_set(err, NP_ERR_USAGE, "--rate %g: expected requests/s > 0", rate);
    serve_request *q = malloc((size_t)n * sizeof *q);
    if (!q)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory (%lld requests)", (long long)n);
    /* three streams, so that changing one distribution leaves the others' draws alone */
    rng ra, rp, ro;
    rng_seed(&ra, seed);
    rng_seed(&rp, seed ^ 0x70726f6d7074ull);
    rng_seed(&ro, seed ^ 0x6f7574ull);
    double t = 0;
    for (int64_t i = 0; i < n; i++) {
        t += -log(1.0 - rng_unit(&ra)) / rate;
        q[i] = (serve_request){.arrival_s = t, .prompt = dist_draw(prompt, &rp),
                               .output = dist_draw(output, &ro)};
    }
    *out = q;
    return NP_OK;
}

/* ---- trace files ------------------------------------------------------------------------- */

static const char *const trace_fields[3] = {"arrival_s", "prompt_tokens", "output_tokens"};

static np_status trace_value(const char *path, int64_t line, int field, const char *text,
                             double *v, np_err *err)
{
    char *end;
    errno = 0;
    *v = strtod(text, &end);
    while (*end == ' ' || *end == '\t' || *end == '\r')
        end++;
    bool ok = end != text && *end == '\0' && errno == 0 && isfinite(*v);
    if (ok && field == 0)
        ok = *v >= 0;
    else if (ok)
        ok = *v >= 1 && *v <= 1e9 && *v == floor(*v);
    if (!ok)
        return np_err_at(err, NP_ERR_FORMAT, path, (int)line, 0, "%s '%s': expected %s",
                         trace_fields[field], text, field == 0 ? "a time in seconds >= 0" :
                         "a token count >= 1");
    return NP_OK;
}

/* One CSV line (NUL-terminated, modified) into *q; *header when it is the header line. */
static np_status trace_csv_line(const char *path, int64_t line, char *s, bool first,
                                serve_request *q, bool *header, np_err *err)
{
    char *f[4];
    int n = 0;
    for (char *p = s; n < 4; n++) {
        while (*p == ' ' || *p == '\t')
            p++;
        f[n] = p;
        char *c = strchr(p, ',');
        if (!c) {
            n++;
            break;
        }
        *c = '\0', p = c + 1;
    }
    *header = false;
    if (first && n == 3 && !isdigit((unsigned char)f[0][0]) && f[0][0] != '.' &&
        f[0][0] != '-' && f[0][0] != '+') {
        for (int i = 0; i < 3; i++) {
            size_t l = strlen(trace_fields[i]);
            const char *v = f[i];
            if (strncmp(v, trace_fields[i], l) != 0 || strspn(v + l, " \t\r") != strlen(v + l))
                return np_err_at(err, NP_ERR_FORMAT, path, (int)line, 0, "a header's column "
                                 "%d is '%s': expected arrival_s,prompt_tokens,output_tokens",
                                 i + 1, v);
        }
        *header = true;
        return NP_OK;
    }
    if (n != 3)
        return np_err_at(err, NP_ERR_FORMAT, path, (int)line, 0, "%s field%s: expected 3 "
                         "(arrival_s,prompt_tokens,output_tokens)", n > 3 ? "more than 3" :
                         n == 2 ? "2" : "1", n == 1 ? "" : "s");
    double v[3];
    for (int i = 0; i < 3; i++)
        if (trace_value(path, line, i, f[i], &v[i], err) != NP_OK)
            return err->status;
    *q = (serve_request){.arrival_s = v[0], .prompt = (int64_t)v[1], .output = (int64_t)v[2],
                         .line = line};
    return NP_OK;
}

static np_status trace_json_line(const char *path, int64_t line, const char *s, serve_request *q,
                                 np_err *err)
{
    json_error_t je;
    json_t *j = json_loads(s, JSON_REJECT_DUPLICATES, &je);
    if (!j || !json_is_object(j)) {
        json_decref(j);
        return np_err_at(err, NP_ERR_FORMAT, path, (int)line, j ? 0 : je.column,
                         "%s", j ? "expected an object {\"arrival_s\": .., \"prompt_tokens\": "
                         ".., \"output_tokens\": ..}" : je.text);
    }
    double v[3];
    for (int i = 0; i < 3; i++) {
        json_t *m = json_object_get(j, trace_fields[i]);
        char buf[64];
        if (!m || !json_is_number(m)) {
            json_decref(j);
            return np_err_at(err, NP_ERR_FORMAT, path, (int)line, 0, "%s: %s", trace_fields[i],
                             m ? "expected a number" : "missing");
        }
        snprintf(buf, sizeof buf, "%.17g", json_number_value(m));
        if (trace_value(path, line, i, buf, &v[i], err) != NP_OK) {
            json_decref(j);
            return err->status;
        }
    }
    json_decref(j);
    *q = (serve_request){.arrival_s = v[0], .prompt = (int64_t)v[1], .output = (int64_t)v[2],
                         .line = line};
    return NP_OK;
}

static int by_arrival(const void *a, const void *b)
{
    const serve_request *x = a, *y = b;
    if (x->arrival_s != y->arrival_s)
        return x->arrival_s < y->arrival_s ? -1 : 1;
    return (x->line > y->line) - (x->line < y->line);
}

np_status serve_trace_read(const char *path, serve_request **out, int64_t *n, np_err *err)
{
    *out = NULL, *n = 0;
    char *text;
    size_t len;
    if (np_read_file(path, SERVE_TRACE_MAX_BYTES, "a request trace", &text, &len, err) != NP_OK)
        return err->status;
    const char *first = text + strspn(text, " \t\r\n");
    bool json = *first == '{';
    size_t cap = 1024;
    serve_request *q = malloc(cap * sizeof *q);
    np_status st = q ? NP_OK : np_err_set(err, NP_ERR_NOMEM, "out of memory");
    int64_t line = 0, count = 0;
    bool any = false;
    for (char *s = text; st == NP_OK && s < text + len;) {
        char *nl = memchr(s, '\n', (size_t)(text + len - s));
        char *e = nl ? nl : text + len;
        *e = '\0';
        line++;
        char *t = s + strspn(s, " \t\r");
        s = e + 1;
        if (*t == '\0' || *t == '#')
            continue;
        if (strlen(t) != (size_t)(e - t)) {
            st = np_err_at(err, NP_ERR_FORMAT, path, (int)line, 0, "a NUL byte in the line");
            break;
        }
        if ((size_t)count == cap) {
            serve_request *g = realloc(q, 2 * cap * sizeof *q);
            if (!g) {
                st = np_err_set(err, NP_ERR_NOMEM, "out of memory");
                break;
            }
            q = g, cap *= 2;
        }
        bool header = false;
        st = json ? trace_json_line(path, line, t, &q[count], err)
                  : trace_csv_line(path, line, t, !any, &q[count], &header, err);
        any = true;
        if (st == NP_OK && !header)
            count++;
    }
    free(text);
    if (st == NP_OK && count == 0)
        st = np_err_at(err, NP_ERR_FORMAT, path, (int)line, 0, "no request in the file "
                       "(expected lines of arrival_s,prompt_tokens,output_tokens)");
    if (st != NP_OK) {
        free(q);
        return st;
    }
    qsort(q, (size_t)count, sizeof *q, by_arrival);
    *out = q, *n = count;
    return NP_OK;
}

/* ---- iteration times by shape bucket ------------------------------------------------------ */

/* A memo of timed shapes: key (kind, a, b) -> two values. Open addressing, power-of-two size. */
typedef struct sv_entry {
    int64_t a, b;
    int kind; /* 0: empty; 1: tokens (body, head); 2: prefill attention (s) */
    double v[2];
} sv_entry;

typedef struct sv_times {
    infer_ctx *ic;
    int bits;
    int64_t context;
    sv_entry *e;
    size_t cap, n;
    int64_t timed;
} sv_times;

static uint64_t sv_hash(int kind, int64_t a, int64_t b)
{
    uint64_t x = (uint64_t)kind * 0x9e3779b97f4a7c15ull ^ (uint64_t)a * 0xbf58476d1ce4e5b9ull ^
                 (uint64_t)b * 0x94d049bb133111ebull;
    return x ^ (x >> 29);
}

static sv_entry *sv_find(sv_times *t, int kind, int64_t a, int64_t b)
{
    size_t m = t->cap - 1;
    for (size_t i = sv_hash(kind, a, b) & m;; i = (i + 1) & m)
        if (!t->e[i].kind || (t->e[i].kind == kind && t->e[i].a == a && t->e[i].b == b))
            return &t->e[i];
}

/* The memo's entry of (kind, a, b), timed through infer.h when new. */
static np_status sv_get(sv_times *t, int kind, int64_t a, int64_t b, const double **v,
                        np_err *err)
{
    if (2 * (t->n + 1) > t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 256;
        sv_entry *old = t->e, *e = calloc(cap, sizeof *e);
        if (!e)
            return np_err_set(err, NP_ERR_NOMEM, "out of memory");
        size_t oc = t->cap;
        t->e = e, t->cap = cap;
        for (size_t i = 0; i < oc; i++)
            if (old[i].kind)
                *sv_find(t, old[i].kind, old[i].a, old[i].b) = old[i];
        free(old);
    }
    sv_entry *x = sv_find(t, kind, a, b);
    if (!x->kind) {
        np_status st = kind == 1 ? infer_time_tokens(t->ic, a, &x->v[0], &x->v[1], NULL, err)
                                 : infer_time_prefill_attn(t->ic, a, b, &x->v[0], err);
        if (st != NP_OK)
            return st;
        x->kind = kind, x->a = a, x->b = b;
        t->n++, t->timed++;
    }
    *v = x->v;
    return NP_OK;
}

/* The bucket points around x >= 1: lo <= x <= hi, integers of at most bits + 1 significant
 * bits (every integer below 2^(bits+1); bits >= 30: x itself). */
static void bucket(int64_t x, int bits, int64_t *lo, int64_t *hi)
{
    if (bits >= 30 || x < (INT64_C(1) << (bits + 1))) {
        *lo = *hi = x;
        return;
    }
    int e = (64 - __builtin_clzll((unsigned long long)x)) - (bits + 1);
    int64_t l = (x >> e) << e;
    *lo = l, *hi = l == x ? x : l + (INT64_C(1) << e);
}

static double lerp(int64_t x, int64_t lo, int64_t hi, double vlo, double vhi)
{
    return hi == lo ? vlo : vlo + (double)(x - lo) / (double)(hi - lo) * (vhi - vlo);
}

/* value i (0 body, 1 head) of the tokens graph at x, interpolated between buckets */
static np_status sv_tokens(sv_times *t, int64_t x, int i, double *s, np_err *err)
{
    int64_t lo, hi;
    bucket(x, t->bits, &lo, &hi);
    const double *a, *b;
    if (sv_get(t, 1, lo, 0, &a, err) != NP_OK || sv_get(t, 1, hi, 0, &b, err) != NP_OK)
        return err->status;
    *s = lerp(x, lo, hi, a[i], b[i]);
    return NP_OK;
}

/* attention of a prefill chunk of n tokens after p cached: between buckets of n (p 0) or
 * bilinear in (n, p); the exact point where a bucket passes the context */
static np_status sv_prefill_attn(sv_times *t, int64_t n, int64_t p, double *s, np_err *err)
{
    int64_t nl, nh, pl = 0, ph = 0;
    bucket(n, t->bits, &nl, &nh);
    if (p > 0)
        bucket(p, t->bits, &pl, &ph);
    const double *v[4];
    if (nh + ph > t->context) {
        if (sv_get(t, 2, n, p, &v[0], err) != NP_OK)
            return err->status;
        *s = v[0][0];
        return NP_OK;
    }
    if (sv_get(t, 2, nl, pl, &v[0], err) != NP_OK || sv_get(t, 2, nh, pl, &v[1], err) != NP_OK ||
        sv_get(t, 2, nl, ph, &v[2], err) != NP_OK || sv_get(t, 2, nh, ph, &v[3], err) != NP_OK)
        return err->status;
    double at_pl = lerp(n, nl, nh, v[0][0], v[1][0]), at_ph = lerp(n, nl, nh, v[2][0], v[3][0]);
    *s = lerp(p, pl, ph, at_pl, at_ph);
    return NP_OK;
}

/* ---- the scheduler ------------------------------------------------------------------------ */

typedef struct sv_seq {
    int64_t prompt, output;
    int64_t gen;       /* tokens generated so far */
    int64_t cached;    /* tokens whose keys and values are in the cache */
    int64_t blocks;    /* blocks held */
    int64_t preempted;
    int64_t order;     /* admission number (the latest admission's) */
    double first_s;
    bool ignored;
} sv_seq;

typedef struct sv_sched {
    int64_t id, tokens, past; /* a sequence scheduled: tokens computed after past cached */
} sv_sched;

typedef struct sv_state {
    sv_seq *seq;
    int64_t *wait;            /* ring of waiting request ids */
    int64_t w_head, w_n, w_cap;
    int64_t *run, n_run;      /* running ids in admission order */
    int64_t *pre, n_pre;      /* preempted this iteration, in order */
    sv_sched *sch;
    int64_t n_sch;
    int64_t free_blocks, total_blocks, watermark, block;
    int64_t admitted;
    double *ttft, *tpot, *e2e;
} sv_state;

static int64_t blocks_for(int64_t tokens, int64_t block)
{
    return (tokens + block - 1) / block;
}

static void wait_push_back(sv_state *s, int64_t id)
{
    s->wait[(s->w_head + s->w_n++) % s->w_cap] = id;
}

static void wait_push_front(sv_state *s, int64_t id)
{
    s->w_head = (s->w_head + s->w_cap - 1) % s->w_cap;
    s->wait[s->w_head] = id;
    s->w_n++;
}

static int64_t wait_front(const sv_state *s)
{
    return s->wait[s->w_head];
}

static void wait_pop(sv_state *s)
{
    s->w_head = (s->w_head + 1) % s->w_cap;
    s->w_n--;
}

static void preempt(sv_state *s, int64_t id)
{
    sv_seq *q = &s->seq[id];
    s->free_blocks += q->blocks;
    q->blocks = 0, q->cached = 0, q->preempted++;
    s->pre[s->n_pre++] = id;
}

static void schedule(sv_state *s, int64_t id, int64_t tokens)
{
    s->sch[s->n_sch++] = (sv_sched){.id = id, .tokens = tokens, .past = s->seq[id].cached};
}

/* Admits the waiting head with `tokens` of its P + gen computed this iteration: its blocks
 * for every known token (vLLM v0 allocates the whole prompt at admission). */
static void admit(sv_state *s, int64_t tokens)
{
    int64_t id = wait_front(s);
    sv_seq *q = &s->seq[id];
    wait_pop(s);
    q->blocks = blocks_for(q->prompt + q->gen, s->block);
    s->free_blocks -= q->blocks;
    q->order = s->admitted++;
    s->run[s->n_run++] = id;
    schedule(s, id, tokens);
}

/* The running sequence run[i] computes one token: a block first when its last is full,
 * preempting the latest admitted running sequences after it (recompute) while none is free,
 * or itself when none is left. Returns false when it was preempted (*end shrinks to i). */
static bool decode_slot(sv_state *s, int64_t i, int64_t *end)
{
    int64_t id = s->run[i];
    sv_seq *q = &s->seq[id];
    if (blocks_for(q->cached + 1, s->block) > q->blocks) {
        while (s->free_blocks == 0) {
            if (*end - 1 > i) {
                preempt(s, s->run[--*end]);
            } else {
                preempt(s, id);
                *end = i;
                return false;
            }
        }
        s->free_blocks--, q->blocks++;
    }
    return true;
}

/* One iteration's batch into s->sch (vLLM v0: _schedule_default without chunked prefill,
 * _schedule_chunked_prefill with). Preempted sequences go back to the front of the queue, the
 * last preempted first (deque.extendleft). */
static void form_batch(sv_state *s, const serve_opts *o, int64_t max_tokens, int64_t max_seqs,
                       int64_t *ignored)
{
    s->n_sch = 0, s->n_pre = 0;
    int64_t budget = max_tokens, end = s->n_run;
    if (!o->chunk) {
        while (s->w_n) { /* prefills first, FCFS */
            sv_seq *q = &s->seq[wait_front(s)];
            int64_t tokens = q->prompt + q->gen;
            if (tokens > max_tokens) { /* never schedulable: ignored, as vLLM does */
                q->ignored = true, (*ignored)++;
                wait_pop(s);
                continue;
            }
            if (s->free_blocks - blocks_for(tokens, s->block) < s->watermark ||
                tokens > budget || s->n_run >= max_seqs)
                break;
            admit(s, tokens);
            budget -= tokens;
        }
        if (s->n_sch == 0) { /* no prefill: every running sequence decodes */
            for (int64_t i = 0; i < end; i++)
                if (decode_slot(s, i, &end))
                    schedule(s, s->run[i], 1);
            s->n_run = end;
        }
    } else {
        for (int64_t i = 0; i < end && budget > 0; i++) { /* running: decodes and chunks */
            sv_seq *q = &s->seq[s->run[i]];
            int64_t left = q->prompt + q->gen - q->cached;
            if (left == 1 && q->cached > 0) {
                if (!decode_slot(s, i, &end))
                    break;
                schedule(s, s->run[i], 1);
                budget--;
            } else {
                int64_t tokens = left < o->chunk ? left : o->chunk;
                tokens = tokens < budget ? tokens : budget;
                schedule(s, s->run[i], tokens);
                budget -= tokens;
            }
        }
        s->n_run = end;
        while (s->w_n && budget > 0 && s->n_run < max_seqs && s->n_pre == 0) {
            sv_seq *q = &s->seq[wait_front(s)];
            int64_t left = q->prompt + q->gen;
            if (s->free_blocks - blocks_for(left, s->block) < s->watermark)
                break;
            int64_t tokens = left < o->chunk ? left : o->chunk;
            admit(s, tokens < budget ? tokens : budget);
            budget -= tokens < budget ? tokens : budget;
        }
    }
    for (int64_t k = 0; k < s->n_pre; k++)
        wait_push_front(s, s->pre[k]);
}

/* ---- figures ------------------------------------------------------------------------------ */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* numpy's default percentile: linear between the ranks around (n - 1) p / 100 */
static double percentile(const double *v, int64_t n, double p)
{
    double h = (double)(n - 1) * p / 100.0;
    int64_t i = (int64_t)floor(h);
    return i + 1 < n ? v[i] + (h - (double)i) * (v[i + 1] - v[i]) : v[n - 1];
}

static void stat_of(double *v, int64_t n, serve_stat *out)
{
    *out = (serve_stat){.n = n};
    if (!n)
        return;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    double sum = 0;
    for (int64_t i = 0; i < n; i++)
        sum += v[i];
    out->mean = sum / (double)n;
    out->p50 = percentile(v, n, 50), out->p90 = percentile(v, n, 90);
    out->p99 = percentile(v, n, 99), out->max = v[n - 1];
}

/* ---- the run ------------------------------------------------------------------------------ */

/* The time of the batch in s->sch: the kernels of its tokens but attention (body), the head
 * of its sequences, each prefill chunk's attention and the decodes' attention together. */
static np_status iter_time(sv_times *t, const sv_state *s, double *time, int64_t *prefills,
                           np_err *err)
{
    int64_t tokens = 0, decodes = 0, ctx = 0;
    double attn = 0, x;
    *prefills = 0;
    for (int64_t k = 0; k < s->n_sch; k++) {
        const sv_sched *c = &s->sch[k];
        tokens += c->tokens;
        if (c->tokens == 1 && c->past > 0) {
            decodes++, ctx += c->past + 1;
        } else {
            (*prefills)++;
            if (sv_prefill_attn(t, c->tokens, c->past, &x, err) != NP_OK)
                return err->status;
            attn += x;
        }
    }
    double body, head;
    if (sv_tokens(t, tokens, 0, &body, err) != NP_OK ||
        sv_tokens(t, s->n_sch, 1, &head, err) != NP_OK ||
        infer_time_decode_attn(t->ic, decodes, ctx, &x, err) != NP_OK)
        return err->status;
    *time = body + head + attn + x;
    return NP_OK;
}

typedef struct sv_run {
    sv_state s;
    sv_times t;
} sv_run;

static void run_free(sv_run *r)
{
    free(r->s.seq), free(r->s.wait), free(r->s.run), free(r->s.pre), free(r->s.sch);
    free(r->s.ttft), free(r->s.tpot), free(r->s.e2e);
    free(r->t.e);
    infer_ctx_free(r->t.ic);
}

static np_status run_setup(const serve_opts *o, int64_t n, sv_run *r, serve_result *out,
                           np_err *err)
{
    sv_state *s = &r->s;
    if (o->kv_block < 1)
        return np_err_set(err, NP_ERR_USAGE, "--kv-block: %lld is not a positive count",
                          (long long)o->kv_block);
    if (infer_ctx_create(&(infer_opts){.model = o->model, .cfg = o->cfg, .tp = o->tp,
                         .batch = 1, .prompt = 1, .output = 1, .kv_block = o->kv_block,
                         .kernel_cache = o->kernel_cache}, &r->t.ic, err) != NP_OK)
        return err->status;
    r->t.bits = o->bucket_bits < 0 ? SERVE_BUCKET_BITS : o->bucket_bits;
    r->t.context = nn_model_int(o->model, "context", 1);
    if (infer_param_bytes(r->t.ic, &out->weight_bytes, err) != NP_OK)
        return err->status;
    out->kv_block_bytes = infer_kv_block_bytes(r->t.ic);
    out->hbm_bytes = o->cfg->chip.hbm_bytes;
    double frac = o->hbm_fraction > 0 ? o->hbm_fraction : SERVE_HBM_FRACTION;
    int64_t blocks = o->kv_blocks;
    if (!blocks) {
        double left = (double)out->hbm_bytes * frac - (double)out->weight_bytes;
        blocks = left > 0 ? (int64_t)(left / (double)out->kv_block_bytes) : 0;
        if (blocks < 1) {
            char a[32];
            return np_err_set(err, NP_ERR_USAGE, "--model %s: its weights (%s) leave no room "
                              "for a kv cache in %.0f %% of %s's HBM on one chip; give "
                              "--kv-blocks to serve it anyway", o->model->name,
                              np_human_bytes(out->weight_bytes, a, sizeof a), 100 * frac,
                              o->cfg->name);
        }
    }
    s->total_blocks = s->free_blocks = blocks;
    s->watermark = (int64_t)(SERVE_WATERMARK * (double)blocks);
    s->block = o->kv_block;
    s->w_cap = n;
    size_t z = (size_t)n;
    s->seq = calloc(z, sizeof *s->seq), s->wait = calloc(z, sizeof *s->wait);
    s->run = calloc(z, sizeof *s->run), s->pre = calloc(z, sizeof *s->pre);
    s->sch = calloc(z, sizeof *s->sch);
    s->ttft = calloc(z, sizeof(double)), s->tpot = calloc(z, sizeof(double));
    s->e2e = calloc(z, sizeof(double));
    if (!s->seq || !s->wait || !s->run || !s->pre || !s->sch || !s->ttft || !s->tpot || !s->e2e)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory (%lld requests)", (long long)n);
    return NP_OK;
}

np_status serve_run(const serve_opts *o, const serve_request *reqs, int64_t n, serve_result *out,
                    np_err *err)
{
    memset(out, 0, sizeof *out);
    if (n < 1)
        return np_err_set(err, NP_ERR_USAGE, "no request to serve");
    sv_run r = {0};
    sv_state *s = &r.s;
    np_status st = run_setup(o, n, &r, out, err);
    int64_t ctx = r.t.context;
    int64_t max_tokens = o->max_batch_tokens ? o->max_batch_tokens
                         : ctx > SERVE_MIN_BATCH_TOKENS ? ctx : SERVE_MIN_BATCH_TOKENS;
    int64_t max_seqs = o->max_seqs ? o->max_seqs : SERVE_MAX_SEQS;
    out->requests = n, out->kv_blocks = s->total_blocks, out->kv_block_tokens = o->kv_block;
    out->max_batch_tokens = max_tokens, out->max_seqs = max_seqs, out->chunk = o->chunk;
    out->bucket_bits = r.t.bits;
    out->slo = o->slo_ttft_s > 0 || o->slo_tpot_s > 0;
    for (int64_t i = 0; st == NP_OK && i < n; i++) { /* the context's clamp */
        sv_seq *q = &s->seq[i];
        q->prompt = reqs[i].prompt < ctx ? reqs[i].prompt : ctx;
        q->output = reqs[i].output < ctx - q->prompt + 1 ? reqs[i].output : ctx - q->prompt + 1;
        out->clamped += q->prompt != reqs[i].prompt || q->output != reqs[i].output;
        if (blocks_for(q->prompt + q->output - 1, o->kv_block) > s->total_blocks - s->watermark)
            q->ignored = true, out->ignored++; /* it could never hold its cache */
    }
    double now = 0, kv_area = 0;
    int64_t next = 0, done = 0, n_tpot = 0, tick = n / 100 > 0 ? n / 100 : 1;
    out->first_arrival_s = reqs[0].arrival_s;
    while (st == NP_OK && done + out->ignored < n) {
        for (; next < n && reqs[next].arrival_s <= now; next++)
            if (!s->seq[next].ignored)
                wait_push_back(s, next);
        if (!s->n_run && !s->w_n) {
            if (next >= n)
                break;
            now = reqs[next].arrival_s; /* idle until the next arrival */
            continue;
        }
        form_batch(s, o, max_tokens, max_seqs, &out->ignored);
        if (!s->n_sch && s->n_run) {
            st = np_err_set(err, NP_ERR_INTERNAL, "the scheduler formed an empty batch with "
                            "%lld sequences running", (long long)s->n_run);
            break;
        }
        if (!s->n_sch)
            continue; /* every waiting one ignored, or all preempted: schedule again */
        double dt = 0;
        int64_t prefills;
        if ((st = iter_time(&r.t, s, &dt, &prefills, err)) != NP_OK)
            break;
        int64_t used = s->total_blocks - s->free_blocks;
        kv_area += (double)used * dt;
        if (used > out->kv_peak_blocks)
            out->kv_peak_blocks = used;
        if (o->on_iter) {
            int64_t tokens = 0;
            for (int64_t k = 0; k < s->n_sch; k++)
                tokens += s->sch[k].tokens;
            o->on_iter(o->iter_ctx, &(serve_iter){.start_s = now, .time_s = dt,
                       .seqs = s->n_sch, .prefills = prefills, .tokens = tokens,
                       .kv_used = used, .preempted = s->n_pre});
        }
        now += dt, out->busy_s += dt, out->iterations++;
        out->prefill_iterations += prefills == s->n_sch;
        out->decode_iterations += prefills == 0;
        out->mixed_iterations += prefills > 0 && prefills < s->n_sch;
        for (int64_t k = 0; k < s->n_sch; k++) {
            int64_t id = s->sch[k].id;
            sv_seq *q = &s->seq[id];
            q->cached += s->sch[k].tokens;
            if (q->cached < q->prompt + q->gen)
                continue; /* a chunk of the prompt: no token yet */
            if (++q->gen == 1)
                q->first_s = now;
            if (q->gen < q->output)
                continue;
            s->free_blocks += q->blocks; /* finished */
            q->blocks = 0;
            serve_req_result rr = {.id = id, .arrival_s = reqs[id].arrival_s,
                                   .first_token_s = q->first_s, .finish_s = now,
                                   .prompt = q->prompt, .output = q->output,
                                   .preemptions = q->preempted};
            rr.ttft_s = rr.first_token_s - rr.arrival_s, rr.e2e_s = now - rr.arrival_s;
            rr.tpot_s = q->output > 1 ? (now - q->first_s) / (double)(q->output - 1) : 0;
            s->ttft[done] = rr.ttft_s, s->e2e[done] = rr.e2e_s;
            if (q->output > 1)
                s->tpot[n_tpot++] = rr.tpot_s;
            bool ok = (!(o->slo_ttft_s > 0) || rr.ttft_s <= o->slo_ttft_s) &&
                      (!(o->slo_tpot_s > 0) || rr.tpot_s <= o->slo_tpot_s);
            out->slo_met += ok;
            out->output_tokens += q->output, out->prompt_tokens += q->prompt;
            out->last_finish_s = now;
            done++;
            if (o->on_finish && (st = o->on_finish(o->finish_ctx, &rr, err)) != NP_OK)
                break;
            if (o->progress && done % tick == 0)
                o->progress(o->progress_ctx, (double)done / (double)n);
        }
        int64_t m = 0; /* the running ones left, in admission order */
        for (int64_t i = 0; i < s->n_run; i++) {
            const sv_seq *q = &s->seq[s->run[i]];
            if (q->gen < q->output)
                s->run[m++] = s->run[i];
        }
        s->n_run = m;
    }
    if (st == NP_OK) {
        out->finished = done;
        out->preemptions = 0;
        for (int64_t i = 0; i < n; i++)
            out->preemptions += s->seq[i].preempted;
        out->duration_s = done ? out->last_finish_s - out->first_arrival_s : 0;
        double d = out->duration_s;
        out->output_tokens_per_s = d > 0 ? (double)out->output_tokens / d : 0;
        out->requests_per_s = d > 0 ? (double)done / d : 0;
        out->goodput_rps = d > 0 ? (double)out->slo_met / d : 0;
        out->kv_mean = d > 0 ? kv_area / d / (double)s->total_blocks : 0;
        out->kv_peak = (double)out->kv_peak_blocks / (double)s->total_blocks;
        stat_of(s->ttft, done, &out->ttft);
        stat_of(s->tpot, n_tpot, &out->tpot);
        stat_of(s->e2e, done, &out->e2e);
        out->shapes_timed = r.t.timed;
    }
    run_free(&r);
    return st;
}
