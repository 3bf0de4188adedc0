/* ksuite.c — the tile-choice suite (see ksuite.h). */
#include "ksuite.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "krun.h"

np_status ksuite_load(const char *path, ksuite_row **rows, size_t *n, np_err *err)
{
    *rows = NULL;
    *n = 0;
    FILE *f = fopen(path, "r");
    if (!f)
        return np_err_at(err, NP_ERR_IO, path, 0, 0, "cannot read the kernel suite");
    char line[512];
    size_t cap = 0;
    int ln = 0;
    np_status st = NP_OK;
    while (st == NP_OK && fgets(line, sizeof line, f)) {
        ln++;
        char *h = strchr(line, '#');
        if (h)
            *h = '\0';
        char *p = line;
        while (isspace((unsigned char)*p))
            p++;
        if (!*p)
            continue;
        ksuite_row r = {0};
        int used = 0;
        unsigned cores;
        if (sscanf(p, "%63s %u %n", r.arch, &cores, &used) != 2 || !p[used] || cores == 0) {
            st = np_err_at(err, NP_ERR_SYNTAX, path, ln, 1, "expected ARCH CORES OP-SPEC");
            break;
        }
        r.cores = cores;
        snprintf(r.op, sizeof r.op, "%s", p + used);
        r.op[strcspn(r.op, "\r\n")] = '\0';
        if (*n == cap) {
            cap = cap ? 2 * cap : 32;
            ksuite_row *nr = realloc(*rows, cap * sizeof *nr);
            if (!nr) {
                st = np_err_set(err, NP_ERR_NOMEM, "out of memory");
                break;
            }
            *rows = nr;
        }
        (*rows)[(*n)++] = r;
    }
    fclose(f);
    if (st != NP_OK) {
        free(*rows);
        *rows = NULL;
        *n = 0;
    }
    return st;
}

np_status ksuite_run(ksuite_row *r, unsigned top, np_err *err)
{
    arch_config cfg;
    kc_spec spec;
    kc_kernel k;
    kc_prog *scratch = NULL;
    if (arch_resolve(r->arch, NULL, 0, &cfg, err) != NP_OK ||
        kc_spec_parse(r->op, &spec, err) != NP_OK ||
        kc_prog_new(&cfg, &(kc_prog_opts){.cores = 1}, &scratch, err) != NP_OK ||
        kc_spec_kernel(scratch, &spec, &k, err) != NP_OK) {
        kc_prog_free(scratch);
        np_err_prefix(err, "%s", r->op);
        return err->status;
    }
    kc_prog_free(scratch);
    k.place.n_cores = r->cores;
    krun_tuned t;
    if (krun_tune(&cfg, &k, top, &(krun_opts){.prog_cores = r->cores}, &t, err) != NP_OK) {
        np_err_prefix(err, "%s", r->op);
        return err->status;
    }
    r->tried = t.tried;
    r->est_cycles = t.est[0];
    r->model_cycles = t.cycles[0];
    r->tuned_cycles = t.cycles[t.best_index];
    r->tuned = t.best;
    r->err_pct = 100.0 * ((double)r->est_cycles - (double)r->model_cycles) / (double)r->model_cycles;
    r->gain_pct = 100.0 * (1.0 - (double)r->tuned_cycles / (double)r->model_cycles);
    return NP_OK;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

void ksuite_summarize(const ksuite_row *rows, size_t n, ksuite_summary *s)
{
    memset(s, 0, sizeof *s);
    s->n = n;
    if (!n)
        return;
    double *e = malloc(n * sizeof *e);
    if (!e)
        return;
    for (size_t i = 0; i < n; i++) {
        e[i] = rows[i].err_pct;
        double a = fabs(e[i]);
        s->abs_err_mean += a / (double)n;
        s->abs_err_max = a > s->abs_err_max ? a : s->abs_err_max;
        s->within_15 += a <= 15.0;
        s->tuned_slower += rows[i].tuned_cycles > rows[i].model_cycles;
        s->gain_10 += rows[i].gain_pct >= 10.0;
    }
    qsort(e, n, sizeof *e, cmp_double);
    s->err_min = e[0], s->err_max = e[n - 1];
    s->err_p25 = e[(n - 1) / 4], s->err_median = e[(n - 1) / 2], s->err_p75 = e[3 * (n - 1) / 4];
    free(e);
}
