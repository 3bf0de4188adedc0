/* report_compare.c — two runs side by side (`npusim report A.json [TA] B.json [TB]`): their
 * configurations, their headline figures with the differences, each step's time by what it went
 * to on one scale, and both timelines on one time axis (report_impl.h rp_compare). */
#include <math.h>
#include <string.h>

#include "human.h"
#include "report_impl.h"

/* How a figure reads. */
typedef enum cmp_unit { CMP_S, CMP_RATE, CMP_PCT, CMP_TFLOPS, CMP_BYTES, CMP_J, CMP_W } cmp_unit;

static const struct {
    const char *path;  /* in the run's JSON: "key" or "object/key" */
    const char *label;
    cmp_unit unit;
} cmp_figures[] = {
    {"step_time_s", "step time", CMP_S},
    {"tokens_per_s", "tokens/s", CMP_RATE},
    {"samples_per_s", "samples/s", CMP_RATE},
    {"mfu_pct", "MFU", CMP_PCT},
    {"tflops_per_chip", "TFLOP/s per chip (model)", CMP_TFLOPS},
    {"bubble_pct", "pipeline bubble", CMP_PCT},
    {"time/compute_s", "compute", CMP_S},
    {"time/exposed_comm_s", "exposed communication", CMP_S},
    {"time/bubble_s", "bubble", CMP_S},
    {"time/idle_s", "other idle", CMP_S},
    {"memory/peak_bytes", "peak memory of the largest chip", CMP_BYTES},
    {"energy/per_step_j", "energy per step", CMP_J},
    {"energy/avg_w_per_chip", "average power per chip", CMP_W},
};

/* The configuration rows: a JSON key each, shown as its text. */
static const char *const cmp_config[] = {"model",     "arch",     "chips",     "batch",
                                         "seq",       "microbatch", "schedule", "zero",
                                         "sp",        "recompute", "precision", "fidelity"};

/* The time parts of a step (the run's `time`), in the order they are stacked. */
static const struct {
    const char *key, *label, *color;
} cmp_parts[] = {
    {"compute_s", "compute", "#4e79a7"},
    {"exposed_comm_s", "exposed communication", "#e15759"},
    {"bubble_s", "bubble", "#edc948"},
    {"idle_s", "other idle", "#bab0ac"},
};

static double cmp_value(const json_t *run, const char *path)
{
    const char *slash = strchr(path, '/');
    if (!slash)
        return rp_num(run, path);
    char obj[32];
    snprintf(obj, sizeof obj, "%.*s", (int)(slash - path), path);
    return rp_num(json_object_get(run, obj), slash + 1);
}

static const char *cmp_fmt(double v, cmp_unit u, char *buf, size_t n)
{
    switch (u) {
    case CMP_S: return rp_fmt_s(v, buf, n);
    case CMP_RATE: return rp_fmt_si(v, "", buf, n);
    case CMP_PCT: snprintf(buf, n, "%.2f %%", v); return buf;
    case CMP_TFLOPS: snprintf(buf, n, "%.2f", v); return buf;
    case CMP_BYTES: return rp_fmt_bytes(v, buf, n);
    case CMP_J: return np_human_j(v, buf, n);
    case CMP_W: return np_human_si(v, "W", buf, n);
    }
    return buf;
}

/* A configuration value as text ("" when absent). */
static void cmp_text(const json_t *v, char *buf, size_t n)
{
    if (json_is_string(v))
        snprintf(buf, n, "%s", json_string_value(v));
    else if (json_is_integer(v))
        snprintf(buf, n, "%lld", (long long)json_integer_value(v));
    else if (json_is_real(v))
        snprintf(buf, n, "%g", json_real_value(v));
    else if (json_is_boolean(v))
        snprintf(buf, n, "%s", json_is_true(v) ? "yes" : "no");
    else
        buf[0] = '\0';
}

static void cmp_tables(FILE *f, const json_t *a, const json_t *b)
{
    char x[96], y[96];
    fputs("<table class=\"cmp\" id=\"compare-config\"><tr><th></th><th>A</th><th>B</th></tr>\n", f);
    for (size_t i = 0; i < sizeof cmp_config / sizeof cmp_config[0]; i++) {
        cmp_text(json_object_get(a, cmp_config[i]), x, sizeof x);
        cmp_text(json_object_get(b, cmp_config[i]), y, sizeof y);
        if (!x[0] && !y[0])
            continue;
        fprintf(f, "<tr%s><td>%s</td><td>", strcmp(x, y) ? " class=\"diff\"" : "", cmp_config[i]);
        rp_esc(f, x);
        fputs("</td><td>", f);
        rp_esc(f, y);
        fputs("</td></tr>\n", f);
    }
    const json_t *ma = json_object_get(a, "mesh"), *mb = json_object_get(b, "mesh");
    if (ma && mb) {
        snprintf(x, sizeof x, "dp %g x tp %g x pp %g", rp_num(ma, "dp"), rp_num(ma, "tp"),
                 rp_num(ma, "pp"));
        snprintf(y, sizeof y, "dp %g x tp %g x pp %g", rp_num(mb, "dp"), rp_num(mb, "tp"),
                 rp_num(mb, "pp"));
        fprintf(f, "<tr%s><td>mesh</td><td>%s</td><td>%s</td></tr>\n",
                strcmp(x, y) ? " class=\"diff\"" : "", x, y);
    }
    fputs("</table>\n<table class=\"cmp\" id=\"compare-figures\"><tr><th></th><th>A</th><th>B</th>"
          "<th>B &minus; A</th><th>B / A &minus; 1</th></tr>\n", f);
    for (size_t i = 0; i < sizeof cmp_figures / sizeof cmp_figures[0]; i++) {
        double va = cmp_value(a, cmp_figures[i].path), vb = cmp_value(b, cmp_figures[i].path);
        if (isnan(va) || isnan(vb))
            continue;
        char d[96], r[32];
        cmp_fmt(fabs(vb - va), cmp_figures[i].unit, d, sizeof d);
        if (va != 0)
            snprintf(r, sizeof r, "%+.1f %%", 100 * (vb / va - 1));
        else
            snprintf(r, sizeof r, "%s", vb == 0 ? "0 %" : "&mdash;");
        fprintf(f, "<tr data-figure=\"%s\" data-a=\"%.17g\" data-b=\"%.17g\"><td>%s</td><td>%s</td>"
                   "<td>", cmp_figures[i].path, va, vb, cmp_figures[i].label,
                cmp_fmt(va, cmp_figures[i].unit, x, sizeof x));
        fprintf(f, "%s</td><td>%s%s</td><td>%s</td></tr>\n",
                cmp_fmt(vb, cmp_figures[i].unit, y, sizeof y),
                vb > va ? "+" : vb < va ? "&minus;" : "", d, r);
    }
    fputs("</table>\n", f);
}

/* Each run's step as its time parts stacked, both on the scale of the longer step. */
static void cmp_chart(FILE *f, const json_t *a, const json_t *b)
{
    const json_t *runs[2] = {a, b};
    double step[2], top = 0;
    for (int r = 0; r < 2; r++) {
        step[r] = rp_num(runs[r], "step_time_s");
        top = step[r] > top ? step[r] : top;
    }
    if (!(top > 0) || !json_object_get(a, "time") || !json_object_get(b, "time"))
        return;
    double scale = (W - LABEL_W - 10) / top;
    char t[64];
    fputs("<p>Each step's time by what it went to (the run's <code>time</code>: the parts add up "
          "to the step), both on the scale of the longer step.</p>\n", f);
    rp_svg_open(f, "chart-compare", 84, "the two runs' step time by part");
    for (int r = 0; r < 2; r++) {
        int y = 6 + 36 * r;
        fprintf(f, "<text x=\"0\" y=\"%d\" class=\"lbl\">%s: %s</text>\n", y + 18, r ? "B" : "A",
                rp_fmt_s(step[r], t, sizeof t));
        double x = LABEL_W;
        const json_t *tm = json_object_get(runs[r], "time");
        for (size_t k = 0; k < sizeof cmp_parts / sizeof cmp_parts[0]; k++) {
            double v = rp_num(tm, cmp_parts[k].key);
            if (!(v > 0))
                continue;
            fprintf(f, "<rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"28\" fill=\"%s\" "
                       "class=\"part\"><title>%s %s: %s (%.1f %% of its step)</title></rect>\n",
                    x, y, v * scale, cmp_parts[k].color, r ? "B" : "A", cmp_parts[k].label,
                    rp_fmt_s(v, t, sizeof t), 100 * v / step[r]);
            x += v * scale;
        }
    }
    fputs("</svg>\n<p class=\"legend\">", f);
    for (size_t k = 0; k < sizeof cmp_parts / sizeof cmp_parts[0]; k++)
        fprintf(f, "<span style=\"color:%s\">&#9632;</span> %s &nbsp; ", cmp_parts[k].color,
                cmp_parts[k].label);
    fputs("</p>\n", f);
}

void rp_compare(FILE *f, const report_input *in)
{
    const report_input *b = in->cmp;
    if (!b || !in->run || !b->run)
        return;
    rp_section(f, "compare", "Two runs: A against B");
    fputs("<p>A: ", f);
    rp_esc(f, in->run_path ? in->run_path : "?");
    fputs(" &nbsp; B: ", f);
    rp_esc(f, b->run_path ? b->run_path : "?");
    fputs("</p>\n", f);
    cmp_tables(f, in->run, b->run);
    cmp_chart(f, in->run, b->run);
    fputs("</section>\n", f);
    if (in->db && in->st && b->db && b->st) {
        uint64_t span = in->st->span_ps > b->st->span_ps ? in->st->span_ps : b->st->span_ps;
        rp_timeline(f, in, "timeline-a", "Timeline per chip: A", span);
        rp_timeline(f, b, "timeline-b", "Timeline per chip: B", span);
    }
}
