/* validate_md.c — the figures of `npusim validate` for people: numbers with their units, and
 * the Markdown of docs/validation.md's generated part (see validate_md.h). */
#include "validate_md.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "human.h"

const char *val_num(double v, char *buf, size_t n)
{
    double a = fabs(v);
    if (!isfinite(v))
        snprintf(buf, n, "%g", v);
    else if (a >= 9999.5)
        np_human_int((int64_t)llround(v), buf, n);
    else if (a >= 99.995)
        snprintf(buf, n, "%.1f", v);
    else if (a >= 9.9995)
        snprintf(buf, n, "%.2f", v);
    else if (a >= 0.99995)
        snprintf(buf, n, "%.3f", v);
    else
        snprintf(buf, n, "%.3g", v);
    return buf;
}

/* The unit printed after a figure's numbers. */
static const char *fig_unit(const char *figure)
{
    if (strcmp(figure, "TFLOP/s per GPU") == 0)
        return "TFLOP/s";
    if (strcmp(figure, "GB/s busbw") == 0)
        return "GB/s";
    return figure;
}

const char *val_value(const char *figure, double v, char *buf, size_t n)
{
    char num[48];
    snprintf(buf, n, "%s %s", val_num(v, num, sizeof num), fig_unit(figure));
    return buf;
}

const char *val_err_text(double pct, char *buf, size_t n)
{
    snprintf(buf, n, "%+.1f %%", pct);
    return buf;
}

/* s with '|' escaped and line breaks as spaces, for a table cell. */
static void md_cell(FILE *out, const char *s)
{
    for (; *s; s++) {
        if (*s == '|')
            fputs("\\|", out);
        else if (*s == '\n' || *s == '\r')
            fputc(' ', out);
        else
            fputc(*s, out);
    }
}

void val_md_row(FILE *out, const val_file *f, const val_row *r, const val_result *res)
{
    char id[96], cfg[256], pub[64], ours[64], e[32];
    const char *fig = val_row_figure(f, r);
    fprintf(out, "| %s | ", val_row_id(f, r, id, sizeof id));
    md_cell(out, val_row_config(f, r, cfg, sizeof cfg));
    fprintf(out, " | %s | ", val_value(fig, val_row_published(f, r), pub, sizeof pub));
    if (!res) {
        fputs("| |\n", out);
        return;
    }
    if (!res->ran) {
        fputs("cannot run: ", out);
        md_cell(out, res->why);
        fputs(" | |\n", out);
        return;
    }
    fprintf(out, "%s | %s |\n", val_value(fig, res->ours, ours, sizeof ours),
            val_err_text(res->err_pct, e, sizeof e));
}

const char *val_stats_text(const val_stats *s, const char *worst_id, char *buf, size_t n)
{
    size_t used = (size_t)snprintf(buf, n, "%zu of %zu row%s ran", s->ran, s->rows,
                                   s->rows == 1 ? "" : "s");
    if (s->ran && used < n)
        snprintf(buf + used, n - used, "; mean |error| %.1f %%, median %.1f %%, worst %+.1f %% "
                 "(%s); %.0f %% of rows within 10 %%, %.0f %% within 20 %%", s->mean_abs_pct,
                 s->median_abs_pct, s->worst_pct, worst_id, s->within10_pct, s->within20_pct);
    return buf;
}

/* One provenance key as a list item (its lines joined); nothing when absent. */
static void md_key(FILE *out, const char *name, const char *value)
{
    if (!value)
        return;
    fprintf(out, "  - %s: ", name);
    for (const char *p = value; *p; p++) {
        if (*p == '\n')
            fputs("; ", out);
        else
            fputc(*p, out);
    }
    fputc('\n', out);
}

void val_md_sources(FILE *out, const val_file *f)
{
    fprintf(out, "- **%s** (`validation/%s/%s.csv`, %zu row%s, on `%s`): %s\n", f->id,
            f->suite->name, f->id, f->n_rows, f->n_rows == 1 ? "" : "s", f->arch, f->title);
    md_key(out, "source", f->source);
    md_key(out, "commit", f->commit);
    md_key(out, "where", f->where);
    md_key(out, "machine", f->machine);
    md_key(out, "config", f->config);
    md_key(out, "command", f->command);
    md_key(out, "algo", f->algo);
    md_key(out, "notes", f->notes);
    for (int i = 0; i < f->n_assumed; i++)
        md_key(out, "assumed", f->assumed[i]);
}

void val_md_suite_head(FILE *out, const val_suite *s)
{
    fprintf(out, "### %s\n\n%s.\n\n| row | configuration | published | ours | error |\n"
            "| --- | --- | --- | --- | --- |\n", s->name, s->what);
}
