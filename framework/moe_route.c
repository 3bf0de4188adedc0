/* moe_route.c — per-expert token counts of a routing distribution (see moe_route.h). */
#include "moe_route.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn.h"
#include "parse.h"
#include "readfile.h"
#include "rng.h"

#define MR_MAX_FILE (64u << 20)
#define MR_MAX_EXPERTS 65536

nn_moe_route_spec nn_moe_route_uniform(void)
{
    return (nn_moe_route_spec){.kind = NN_ROUTE_UNIFORM};
}

void nn_moe_route_spec_free(nn_moe_route_spec *s)
{
    free(s->hist);
    free(s->line);
    s->hist = NULL;
    s->line = NULL;
    s->n_hist = 0;
}

/* One line of a histogram file: numbers into row (NULL: only counted); returns how many, or
 * -1 after filling err. */
static int64_t mr_line(const char *path, int ln, const char *s, const char *end, double *row,
                       np_err *err)
{
    const char *start = s;
    int64_t n = 0;
    char word[64];
    while (s < end) {
        while (s < end && (*s == ' ' || *s == '\t' || *s == ',' || *s == '\r'))
            s++;
        const char *w = s;
        while (s < end && *s != ' ' && *s != '\t' && *s != ',' && *s != '\r')
            s++;
        if (s == w)
            break;
        size_t len = (size_t)(s - w);
        if (len >= sizeof word) {
            np_err_at(err, NP_ERR_SYNTAX, path, ln, 0, "a number of %zu characters", len);
            return -1;
        }
        memcpy(word, w, len);
        word[len] = 0;
        double v = 0;
        if (np_parse_f64(NP_SRC_AT(path, ln, (int)(w - start) + 1, "a weight"), word, 0, 1e18,
                         &v, err) != NP_OK)
            return -1;
        if (row)
            row[n] = v;
        n++;
    }
    return n;
}

np_status nn_moe_route_parse_hist(const char *path, const char *text, nn_moe_route_spec *out,
                                  np_err *err)
{
    *out = (nn_moe_route_spec){.kind = NN_ROUTE_FILE};
    snprintf(out->path, sizeof out->path, "%s", path);
    /* two passes: count the histograms and check their widths, then fill them */
    for (int pass = 0; pass < 2; pass++) {
        int ln = 0, h = 0;
        for (const char *s = text; *s;) {
            const char *eol = strchr(s, '\n');
            const char *end = eol ? eol : s + strlen(s), *hash = memchr(s, '#', (size_t)(end - s));
            ln++;
            double *row = pass ? out->hist + (int64_t)h * out->experts : NULL;
            int64_t n = mr_line(path, ln, s, hash ? hash : end, row, err);
            if (n < 0)
                return err->status;
            if (n > 0) {
                if (pass == 0 && h == 0)
                    out->experts = n;
                if (n != out->experts || n > MR_MAX_EXPERTS)
                    return np_err_at(err, NP_ERR_INCONSISTENT, path, ln, 0, "%lld experts' "
                                     "weights, the first histogram has %lld", (long long)n,
                                     (long long)out->experts);
                if (pass) {
                    double sum = 0;
                    for (int64_t e = 0; e < n; e++)
                        sum += row[e];
                    if (!(sum > 0))
                        return np_err_at(err, NP_ERR_RANGE, path, ln, 0, "every weight is zero: "
                                         "no expert gets a token");
                    out->line[h] = ln;
                }
                h++;
            }
            s = eol ? eol + 1 : end;
        }
        if (pass == 0) {
            if (h == 0)
                return np_err_at(err, NP_ERR_SYNTAX, path, ln, 0, "no histogram (a line of one "
                                 "weight per expert)");
            out->n_hist = h;
            out->hist = malloc((size_t)h * (size_t)out->experts * sizeof *out->hist);
            out->line = malloc((size_t)h * sizeof *out->line);
            if (!out->hist || !out->line)
                return np_err_set(err, NP_ERR_NOMEM, "%s: out of memory", path);
        }
    }
    return NP_OK;
}

np_status nn_moe_route_parse(const char *text, uint64_t seed, nn_moe_route_spec *out,
                             np_err *err)
{
    *out = nn_moe_route_uniform();
    if (!strcmp(text, "uniform"))
        return NP_OK;
    if (!strncmp(text, "skew:", 5)) {
        out->kind = NN_ROUTE_SKEW;
        out->seed = seed;
        return np_parse_f64(NP_SRC_OPT("--routing skew:S"), text + 5, 0, 64, &out->skew, err);
    }
    char *body = NULL;
    size_t len = 0;
    if (np_read_file(text, MR_MAX_FILE, "a routing histogram file", &body, &len, err) != NP_OK)
        return err->status;
    np_status st = nn_moe_route_parse_hist(text, body, out, err);
    free(body);
    return st;
}

/* Hamilton's apportionment of total among the experts with free[e] (weights w), at most cap
 * each: experts whose share passes cap get cap and leave, the rest is shared again. */
static void mr_apportion(const double *w, int64_t E, int64_t total, int64_t cap, int64_t *c,
                         bool *capped)
{
    memset(capped, 0, (size_t)E * sizeof *capped);
    for (;;) {
        double sum = 0;
        int64_t left = total;
        for (int64_t e = 0; e < E; e++) {
            if (capped[e])
                left -= cap;
            else
                sum += w[e];
        }
        bool again = false;
        for (int64_t e = 0; e < E; e++)
            if (!capped[e] && sum > 0 && (double)left * w[e] / sum > (double)cap) {
                capped[e] = true;
                again = true;
            }
        if (again)
            continue;
        int64_t given = 0;
        for (int64_t e = 0; e < E; e++) {
            if (capped[e]) {
                c[e] = cap;
                continue;
            }
            double q = sum > 0 ? (double)left * w[e] / sum : 0;
            c[e] = (int64_t)floor(q);
            given += c[e];
        }
        /* the units left, to the largest remainders (ties: the lower expert), one each */
        for (int64_t u = given; u < left; u++) {
            int64_t best = -1;
            double bf = -1;
            for (int64_t e = 0; e < E; e++) {
                if (capped[e] || c[e] >= cap)
                    continue;
                double q = sum > 0 ? (double)left * w[e] / sum : (double)left / (double)E;
                double f = q - (double)c[e];
                if (f > bf) {
                    bf = f;
                    best = e;
                }
            }
            if (best < 0)
                break;
            c[best]++;
        }
        return;
    }
}

np_status nn_moe_route_counts(const nn_moe_route_spec *s, int64_t layer, int64_t tokens,
                              int64_t top_k, int64_t experts, int64_t *counts, np_err *err)
{
    int64_t E = experts, M = tokens * top_k;
    if (E < 1 || top_k < 1 || top_k > E || tokens < 0 || layer < 0)
        return np_err_set(err, NP_ERR_RANGE, "routing: top-%lld of %lld experts for %lld tokens "
                          "(layer %lld)", (long long)top_k, (long long)E, (long long)tokens,
                          (long long)layer);
    if (s->kind == NN_ROUTE_UNIFORM) {
        for (int64_t e = 0; e < E; e++)
            counts[e] = M / E + (e < M % E ? 1 : 0);
        return NP_OK;
    }
    const double *w = NULL;
    if (s->kind == NN_ROUTE_FILE) {
        if (s->n_hist > 1 && layer >= s->n_hist)
            return np_err_at(err, NP_ERR_INCONSISTENT, s->path, s->line[s->n_hist - 1], 0,
                             "%d histograms (one per MoE layer), none for MoE layer %lld",
                             s->n_hist, (long long)layer);
        int h = s->n_hist > 1 ? (int)layer : 0;
        if (s->experts != E)
            return np_err_at(err, NP_ERR_INCONSISTENT, s->path, s->line[h], 0, "a histogram of "
                             "%lld experts for a layer of %lld", (long long)s->experts,
                             (long long)E);
        w = s->hist + (int64_t)h * E;
    }
    double *ws = malloc((size_t)E * sizeof *ws);
    bool *capped = malloc((size_t)E * sizeof *capped);
    if (!ws || !capped) {
        free(ws);
        free(capped);
        return np_err_set(err, NP_ERR_NOMEM, "routing: out of memory");
    }
    if (s->kind == NN_ROUTE_SKEW) {
        /* rank r's weight (r + 1)^-S, given to expert perm[r]: a Fisher-Yates shuffle of the
         * experts drawn from the seed and the layer */
        int64_t *perm = malloc((size_t)E * sizeof *perm);
        if (!perm) {
            free(ws);
            free(capped);
            return np_err_set(err, NP_ERR_NOMEM, "routing: out of memory");
        }
        for (int64_t e = 0; e < E; e++)
            perm[e] = e;
        rng r;
        rng_seed(&r, s->seed ^ (0x9e3779b97f4a7c15ULL * (uint64_t)(layer + 1)));
        for (int64_t i = E - 1; i > 0; i--) {
            int64_t j = (int64_t)rng_below(&r, (uint64_t)i + 1), t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
        }
        for (int64_t rk = 0; rk < E; rk++)
            ws[perm[rk]] = pow((double)(rk + 1), -s->skew);
        free(perm);
    } else {
        memcpy(ws, w, (size_t)E * sizeof *ws);
    }
    mr_apportion(ws, E, M, tokens, counts, capped);
    free(ws);
    free(capped);
    return NP_OK;
}

const char *nn_moe_route_name(const nn_moe_route_spec *s, char *buf, int n)
{
    if (s->kind == NN_ROUTE_SKEW)
        snprintf(buf, (size_t)n, "skew:%g", s->skew);
    else if (s->kind == NN_ROUTE_FILE)
        snprintf(buf, (size_t)n, "%s", s->path);
    else
        snprintf(buf, (size_t)n, "uniform");
    return buf;
}

/* The model layer N of a node named "...layers.N..." (0 when none). */
static int64_t mr_layer_of(const char *name)
{
    const char *p = strstr(name, "layers.");
    return p ? strtoll(p + 7, NULL, 10) : 0;
}

np_status nn_moe_route_mark(nn_graph *g, const nn_moe_route_spec *s, np_err *err)
{
    if (s->kind == NN_ROUTE_FILE)
        return np_err_set(err, NP_ERR_INCONSISTENT, "--routing %s: histogram files are read "
                          "(framework/moe_route.h) but the grouped matmul's kernels take "
                          "uniform and skew:S only so far", s->path);
    for (int i = 0; i < nn_graph_n_nodes(g); i++) {
        nn_tensor *t = nn_graph_node(g, i);
        if (t->op != NN_OP_MOE_GMM && t->op != NN_OP_MOE_GMM_GRAD_W)
            continue;
        t->ip[3] = (int64_t)s->kind + 1;
        t->ip[4] = s->kind == NN_ROUTE_SKEW ? (int64_t)(s->seed & ((1ull << 53) - 1)) : 0;
        t->ip[5] = mr_layer_of(t->src[2]->name);
        t->fp[0] = s->kind == NN_ROUTE_SKEW ? s->skew : 0;
    }
    return NP_OK;
}
