/* report.c — the HTML report (see report.h). Charts are SVG written here, with a <title> on
 * every mark for its exact figures; numbers for people use units scaled for reading. */
#include "report.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "human.h"
#include "report_impl.h"

#define TL_BINS 320      /* timeline bins */
#define TL_CHIPS 32      /* chips drawn on the timeline */
#define PI 3.14159265358979323846
#define COMM_CHAR_PX 7.0 /* the width a character of an 11 px label takes at most, px */

enum { CLS_COMPUTE, CLS_MEMORY, CLS_COMM, CLS_COUNT };
static const char *const cls_name[CLS_COUNT] = {"compute", "memory", "communication"};
static const char *const cls_color[CLS_COUNT] = {"#4e79a7", "#f28e2b", "#e15759"};

/* ---- small helpers ---------------------------------------------------------------------------- */

/* The two escapes of the page; every string that comes from an input (a trace's names, the
 * run's JSON keys and values, the architecture's name, paths, the title) goes through one of
 * them, whichever part of the page it reaches:
 *   esc       element text (HTML and inline SVG, <title> tooltips included) and attribute
 *             values in double quotes: & < > " ' as character references, so nothing in s
 *             can end the text or the attribute or start a tag (s NULL: nothing; esc_n:
 *             its first n bytes);
 *   esc_json  JSON text inside <script type="application/json">: < > & as \u003c \u003e
 *             \u0026 (JSON's own escapes, inside its strings where they occur), so nothing in
 *             it can end the script or open a comment; the data parses back unchanged. */
static void esc_n(FILE *f, const char *s, size_t n) /* the first n bytes of s */
{
    for (const char *end = s ? s + n : s; s && s < end && *s; s++) {
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&#39;", f); break;
        default: fputc(*s, f);
        }
    }
}

void rp_esc(FILE *f, const char *s)
{
    esc_n(f, s, s ? strlen(s) : 0);
}

static void esc_json(FILE *f, const char *s)
{
    for (; s && *s; s++) {
        switch (*s) {
        case '<': fputs("\\u003c", f); break;
        case '>': fputs("\\u003e", f); break;
        case '&': fputs("\\u0026", f); break;
        default: fputc(*s, f);
        }
    }
}

const char *rp_fmt_s(double s, char *buf, size_t n)
{
    if (!(s >= 0))
        snprintf(buf, n, "-");
    else if (s == 0)
        snprintf(buf, n, "0 s");
    else if (s >= 1)
        snprintf(buf, n, "%.3f s", s);
    else if (s >= 1e-3)
        snprintf(buf, n, "%.3f ms", s * 1e3);
    else if (s >= 1e-6)
        snprintf(buf, n, "%.3f us", s * 1e6);
    else
        snprintf(buf, n, "%.3f ns", s * 1e9);
    return buf;
}

const char *rp_fmt_bytes(double b, char *buf, size_t n)
{
    static const char *const u[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    int k = 0;
    while (k < 5 && b >= 1024)
        b /= 1024, k++;
    snprintf(buf, n, k ? "%.2f %s" : "%.0f %s", b, u[k]);
    return buf;
}

const char *rp_fmt_si(double v, const char *unit, char *buf, size_t n)
{
    static const char *const p[] = {"", "k", "M", "G", "T", "P", "E"};
    int k = 0;
    while (k < 6 && fabs(v) >= 1000)
        v /= 1000, k++;
    snprintf(buf, n, "%.3g %s%s", v, p[k], unit);
    return buf;
}

double rp_num(const json_t *o, const char *k)
{
    const json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static const char *jstr(const json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

/* A kernel of the trace's statistics that is a computation (not a collective: those are
 * the communication section's). */
static bool is_kernel(const tdb *db, const tstats_kernel *k)
{
    const char *c = tdb_str(db, k->cat);
    return !c || strcmp(c, "collective");
}

/* The class of a unit or category name (-1: none). */
static int name_class(const char *c, size_t n)
{
    static const struct { const char *name; int cls; } k[] = {
        {"mxu", CLS_COMPUTE}, {"vpu", CLS_COMPUTE}, {"compute", CLS_COMPUTE},
        {"dma", CLS_MEMORY},  {"memory", CLS_MEMORY}, {"comm", CLS_COMM}};
    for (size_t i = 0; c && i < sizeof k / sizeof k[0]; i++)
        if (strlen(k[i].name) == n && !strncmp(c, k[i].name, n))
            return k[i].cls;
    return -1;
}

/* The class of a slice by its category (-1: none: spans, waits, other); a "busy" slice
 * (npusim run's chip.comm: communication in flight) by its thread's unit, the part of the
 * thread's name after its last '.' ("chip.comm", "core0.dma[1]"). */
static int slice_class(const tdb *db, const tdb_slice *s)
{
    const char *c = tdb_str(db, s->cat);
    if (!c)
        return -1;
    if (strcmp(c, "busy"))
        return name_class(c, strlen(c));
    const char *t = tdb_str(db, db->threads[s->thread].name), *dot = t ? strrchr(t, '.') : NULL;
    return dot ? name_class(dot + 1, strcspn(dot + 1, "[")) : -1;
}

void rp_svg_open(FILE *f, const char *id, int h, const char *label)
{
    fprintf(f, "<svg class=\"chart\" id=\"%s\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
               "role=\"img\" aria-label=\"", id, W, h, W, h);
    rp_esc(f, label);
    fputs("\">\n", f);
}

void rp_section(FILE *f, const char *id, const char *title)
{
    fprintf(f, "<section id=\"%s\"><h2>", id);
    rp_esc(f, title);
    fputs("</h2>\n", f);
}

static void missing(FILE *f, const char *what)
{
    fputs("<p class=\"na\">", f);
    rp_esc(f, what);
    fputs("</p>\n", f);
}

/* ---- summary ---------------------------------------------------------------------------------- */

void rp_card(FILE *f, const char *label, const char *value)
{
    fputs("<div class=\"card\"><div class=\"v\">", f);
    rp_esc(f, value);
    fputs("</div><div class=\"l\">", f);
    rp_esc(f, label);
    fputs("</div></div>\n", f);
}

/* A bar of parts (ps) stacked left to right, each labelled with its share when wide enough. */
static void stack_bar(FILE *f, const char *id, const char *label, const double *part,
                      const char *const *names, const char *const *colors, int n)
{
    char b[64];
    double total = 0;
    for (int c = 0; c < n; c++)
        total += part[c];
    rp_svg_open(f, id, 60, label);
    double x = 0;
    for (int c = 0; c < n && total > 0; c++) {
        double w = part[c] / total * W;
        if (w <= 0)
            continue;
        fprintf(f, "<rect x=\"%.2f\" y=\"4\" width=\"%.2f\" height=\"28\" fill=\"%s\"><title>",
                x, w, colors[c]);
        rp_esc(f, names[c]);
        fprintf(f, ": %s (%.1f %%)</title></rect>\n", rp_fmt_s(part[c] * 1e-12, b, sizeof b),
                100 * part[c] / total);
        if (w > 7.5 * (double)(strlen(names[c]) + 4)) { /* room for its label */
            fprintf(f, "<text x=\"%.2f\" y=\"50\">", x + 2);
            rp_esc(f, names[c]);
            fprintf(f, " %.0f%%</text>\n", 100 * part[c] / total);
        }
        x += w;
    }
    fputs("</svg>\n<p class=\"legend\">", f);
    for (int c = 0; c < n && total > 0; c++)
        if (part[c] > 0) {
            fprintf(f, "<span style=\"color:%s\">&#9632;</span> ", colors[c]);
            rp_esc(f, names[c]);
            fprintf(f, " %.1f %% (%s) &nbsp; ", 100 * part[c] / total,
                    rp_fmt_s(part[c] * 1e-12, b, sizeof b));
        }
    fputs("</p>\n", f);
}

static size_t *chips_with_slices(const tdb *db, size_t max, size_t *n);

typedef struct tl_edge {
    uint64_t t;
    int cls, d; /* class, +1 at a slice's start, -1 at its end */
} tl_edge;

static int by_time(const void *a, const void *b)
{
    uint64_t x = ((const tl_edge *)a)->t, y = ((const tl_edge *)b)->t;
    return x < y ? -1 : x > y;
}

/* Each chip's span, from the trace's first start to its last end, split by what the chip
 * did: computing; else moving memory; else communicating; else idle (part[CLS_COUNT]). The
 * mean over the chips that have slices, in ps; false when there is none (or no memory). */
static bool chip_time(const tdb *db, double part[CLS_COUNT + 1], size_t *n_chips)
{
    memset(part, 0, (CLS_COUNT + 1) * sizeof *part);
    size_t chips;
    size_t *shown = chips_with_slices(db, SIZE_MAX, &chips);
    tl_edge *e = db->n_slices ? malloc(2 * db->n_slices * sizeof *e) : NULL;
    if (!shown || !e || !chips) {
        free(shown);
        free(e);
        return false;
    }
    for (size_t i = 0; i < chips; i++) {
        size_t n = 0;
        for (size_t t = 0; t < db->n_threads; t++) {
            const tdb_thread *th = &db->threads[t];
            if (th->process != shown[i])
                continue;
            for (size_t k = th->first; k < th->first + th->n; k++) {
                const tdb_slice *s = &db->slices[k];
                int c = slice_class(db, s);
                if (c >= 0 && s->end_ps > s->start_ps) {
                    e[n++] = (tl_edge){s->start_ps, c, 1};
                    e[n++] = (tl_edge){s->end_ps, c, -1};
                }
            }
        }
        qsort(e, n, sizeof *e, by_time);
        int active[CLS_COUNT] = {0};
        uint64_t t = db->t_begin_ps;
        for (size_t k = 0; k <= n; k++) {
            uint64_t next = k < n ? e[k].t : db->t_end_ps;
            int c = 0;
            while (c < CLS_COUNT && !active[c])
                c++;
            part[c] += (double)(next - t);
            t = next;
            if (k < n)
                active[e[k].cls] += e[k].d;
        }
    }
    for (int c = 0; c <= CLS_COUNT; c++)
        part[c] /= (double)chips;
    *n_chips = chips;
    free(shown);
    free(e);
    return true;
}

static void summary(FILE *f, const report_input *in)
{
    rp_section(f, "summary", "Where did the time go");
    char b[64], d[64];
    const json_t *r = in->run;
    bool have_run = false;
    fputs("<div class=\"cards\">\n", f);
    if (r && json_object_get(r, "step_time_s")) {
        have_run = true;
        rp_card(f, "step time", rp_fmt_s(rp_num(r, "step_time_s"), b, sizeof b));
        if (!isnan(rp_num(r, "tokens_per_s")))
            rp_card(f, "tokens/s", rp_fmt_si(rp_num(r, "tokens_per_s"), "", b, sizeof b));
        else if (!isnan(rp_num(r, "samples_per_s")))
            rp_card(f, "samples/s", rp_fmt_si(rp_num(r, "samples_per_s"), "", b, sizeof b));
        if (!isnan(rp_num(r, "mfu_pct")))
            snprintf(b, sizeof b, "%.1f %%", rp_num(r, "mfu_pct")), rp_card(f, "MFU", b);
        if (!isnan(rp_num(r, "bubble_pct")))
            snprintf(b, sizeof b, "%.1f %%", rp_num(r, "bubble_pct")), rp_card(f, "pipeline bubble", b);
        double tot = 0, exp = 0;
        size_t i;
        const json_t *c;
        json_array_foreach(json_object_get(r, "comm"), i, c)
            tot += rp_num(c, "total_s"), exp += rp_num(c, "exposed_s");
        /* each instant once (a run's time breakdown), else the kinds' sum */
        const json_t *tm = json_object_get(r, "time");
        if (tm && !isnan(rp_num(tm, "exposed_comm_s")))
            exp = rp_num(tm, "exposed_comm_s");
        if (tot > 0)
            rp_card(f, "exposed communication", rp_fmt_s(exp, b, sizeof b));
    } else if (r && json_object_get(r, "total_ps")) {
        have_run = true;
        rp_card(f, "simulated time", rp_fmt_s(rp_num(r, "total_ps") * 1e-12, b, sizeof b));
        snprintf(b, sizeof b, "%.0f", rp_num(r, "total_cycles"));
        rp_card(f, "cycles", b);
    } else if (r && json_object_get(r, "rows")) {
        snprintf(b, sizeof b, "%s %s", jstr(r, "op") ? jstr(r, "op") : "?",
                 jstr(r, "algo") ? jstr(r, "algo") : "");
        rp_card(f, "collective", b);
        snprintf(b, sizeof b, "%.0f", rp_num(r, "chips"));
        rp_card(f, "chips", b);
    }
    if (in->st && !have_run) /* a run's own time says it better */
        rp_card(f, "trace span", rp_fmt_s((double)in->st->span_ps * 1e-12, b, sizeof b));
    if (in->sweep) {
        snprintf(b, sizeof b, "%zu", json_array_size(in->sweep));
        rp_card(f, "sweep points", b);
    }
    fputs("</div>\n", f);
    static const char *const names[] = {"compute", "memory", "communication", "other", "idle"};
    static const char *const colors[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#bbb"};
    double part[CLS_COUNT + 2];
    size_t chips = 0;
    if (in->db && chip_time(in->db, part, &chips)) {
        const char *cn[] = {"computing", "memory", "communication", "idle"};
        const char *cc[] = {colors[0], colors[1], colors[2], colors[4]};
        fprintf(f, "<p>Each chip's time by what it did, the mean over %zu chips (memory: moving "
                   "data with nothing computing; communication: with nothing computing; idle: "
                   "waiting, as in pipeline bubbles):</p>\n", chips);
        stack_bar(f, "chart-chip-time", "each chip's time by what it did", part, cn, cc, 4);
    }
    size_t i;
    const json_t *c;
    if (r && json_array_size(json_object_get(r, "comm"))) {
        fputs("<p>Exposed communication per kind (mean over the chips that take part):", f);
        json_array_foreach(json_object_get(r, "comm"), i, c) {
            fputs(i ? ", " : " ", f);
            rp_esc(f, jstr(c, "kind") ? jstr(c, "kind") : "?");
            fprintf(f, " %s of %s", rp_fmt_s(rp_num(c, "exposed_s"), b, sizeof b),
                    rp_fmt_s(rp_num(c, "total_s"), d, sizeof d));
        }
        fputs(".</p>\n", f);
    }
    uint64_t ktotal = 0;
    for (i = 0; in->st && i < in->st->n_kernels; i++)
        if (is_kernel(in->db, &in->st->kernels[i]))
            ktotal += in->st->kernels[i].total_ps;
    if (ktotal) {
        fputs("<p>Top kernels by time, over every chip:", f);
        for (size_t k = 0, shown = 0; k < in->st->n_kernels && shown < 5; k++) {
            if (!is_kernel(in->db, &in->st->kernels[k]))
                continue;
            fputs(shown++ ? ", " : " ", f);
            rp_esc(f, tdb_str(in->db, in->st->kernels[k].name));
            fprintf(f, " %.1f %%", 100.0 * (double)in->st->kernels[k].total_ps / (double)ktotal);
        }
        fputs(" (the table at the end).</p>\n", f);
    }
    if (in->st && in->st->n_path) {
        /* the critical path by class, and its idle time */
        const tdb *db = in->db;
        memset(part, 0, sizeof part); /* + other, idle */
        for (i = 0; i < in->st->n_path; i++) {
            const tdb_slice *s = &db->slices[in->st->path[i].slice];
            int k = slice_class(db, s);
            part[k < 0 ? CLS_COUNT : k] += (double)(s->end_ps - s->start_ps);
            part[CLS_COUNT + 1] += (double)in->st->path[i].idle_before_ps;
        }
        fprintf(f, "<p>The critical path (the chain of work that ends last, %s over %zu "
                   "steps) by kind of work:</p>\n",
                rp_fmt_s((double)in->st->path_ps * 1e-12, b, sizeof b), in->st->n_path);
        stack_bar(f, "chart-breakdown", "critical path by kind of work", part, names, colors,
                  CLS_COUNT + 2);
    }
    fputs("</section>\n", f);
}

static const tdb *pid_db; /* qsort's context (the report is single-threaded) */

static int by_pid(const void *a, const void *b)
{
    uint32_t x = pid_db->processes[*(const size_t *)a].pid,
             y = pid_db->processes[*(const size_t *)b].pid;
    return x < y ? -1 : x > y;
}

/* The processes of db that have slices (chips, not the system's counters alone), in pid
 * order, at most max: a malloc'd array of indices (NULL when none or out of memory). */
static size_t *chips_with_slices(const tdb *db, size_t max, size_t *n)
{
    size_t *v = db->n_processes ? malloc(db->n_processes * sizeof *v) : NULL;
    *n = 0;
    if (!v)
        return NULL;
    for (size_t p = 0; p < db->n_processes; p++)
        for (size_t t = 0; t < db->n_threads; t++)
            if (db->threads[t].process == p && db->threads[t].n) {
                v[(*n)++] = p;
                break;
            }
    pid_db = db;
    if (*n > 1)
        qsort(v, *n, sizeof *v, by_pid);
    if (*n > max)
        *n = max;
    return v;
}

/* ---- timeline --------------------------------------------------------------------------------- */

void rp_timeline(FILE *f, const report_input *in, const char *id, const char *title,
                 uint64_t span_ps)
{
    char chart[48];
    snprintf(chart, sizeof chart, "chart-%s", id);
    rp_section(f, id, title);
    const tdb *db = in->db;
    if (!db || !in->st->span_ps) {
        missing(f, "No trace given (npusim report RUN.json TRACE.json.gz).");
        fputs("</section>\n", f);
        return;
    }
    size_t chips, with_slices;
    size_t *shown = chips_with_slices(db, SIZE_MAX, &with_slices);
    chips = with_slices < TL_CHIPS ? with_slices : TL_CHIPS;
    int row = 12, h = 24 + (int)chips * (CLS_COUNT * row + 8);
    double *occ = calloc(CLS_COUNT * TL_BINS, sizeof *occ);
    if (!occ || !shown) {
        free(occ);
        free(shown);
        missing(f, "Out of memory drawing the timeline.");
        fputs("</section>\n", f);
        return;
    }
    if (span_ps < in->st->span_ps)
        span_ps = in->st->span_ps;
    double bin = (double)span_ps / TL_BINS, px = (double)(W - LABEL_W) / TL_BINS;
    char b[64];
    fprintf(f, "<p>Shade: the share of a chip's tracks of that kind that are busy; %zu of %zu "
               "chips shown.</p>\n", chips, with_slices);
    rp_svg_open(f, chart, h, "timeline per chip");
    for (size_t row_i = 0; row_i < chips; row_i++) {
        size_t p = shown[row_i];
        memset(occ, 0, CLS_COUNT * TL_BINS * sizeof *occ);
        unsigned n_threads[CLS_COUNT] = {0};
        for (size_t t = 0; t < db->n_threads; t++) {
            const tdb_thread *th = &db->threads[t];
            if (th->process != p)
                continue;
            bool has[CLS_COUNT] = {0};
            for (size_t i = th->first; i < th->first + th->n; i++) {
                const tdb_slice *s = &db->slices[i];
                int c = slice_class(db, s);
                if (c < 0)
                    continue;
                has[c] = true;
                double a = (double)(s->start_ps - db->t_begin_ps),
                       e = (double)(s->end_ps - db->t_begin_ps);
                for (size_t k = (size_t)(a / bin); k < TL_BINS && k * bin < e; k++) {
                    double lo = k * bin > a ? k * bin : a, hi = (k + 1) * bin < e ? (k + 1) * bin : e;
                    if (hi > lo)
                        occ[c * TL_BINS + k] += (hi - lo) / bin;
                }
            }
            for (int c = 0; c < CLS_COUNT; c++)
                n_threads[c] += has[c];
        }
        int y0 = 20 + (int)row_i * (CLS_COUNT * row + 8);
        const char *pn = tdb_str(db, db->processes[p].name);
        fprintf(f, "<text x=\"0\" y=\"%d\" class=\"lbl\">", y0 + row + 4);
        rp_esc(f, pn ? pn : "?");
        fputs("</text>\n", f);
        for (int c = 0; c < CLS_COUNT; c++) {
            int y = y0 + c * row;
            fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#f4f4f4\"/>\n",
                    LABEL_W, y, W - LABEL_W, row - 2);
            if (!n_threads[c])
                continue;
            /* runs of bins with the same shade (tenths) as one rect */
            for (size_t k = 0; k < TL_BINS;) {
                double v = occ[c * TL_BINS + k] / n_threads[c];
                int q = (int)lround((v > 1 ? 1 : v) * 10);
                size_t j = k + 1;
                while (j < TL_BINS &&
                       (int)lround(fmin(1, occ[c * TL_BINS + j] / n_threads[c]) * 10) == q)
                    j++;
                if (q) {
                    fprintf(f, "<rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" fill=\"%s\" "
                               "fill-opacity=\"%.1f\"><title>",
                            LABEL_W + k * px, y, (j - k) * px, row - 2, cls_color[c], q / 10.0);
                    rp_esc(f, pn);
                    fprintf(f, " %s from %s</title></rect>\n", cls_name[c],
                            rp_fmt_s(k * bin * 1e-12, b, sizeof b));
                }
                k = j;
            }
        }
    }
    fprintf(f, "<text x=\"%d\" y=\"12\" class=\"lbl\">0</text><text x=\"%d\" y=\"12\" "
               "class=\"lbl\" text-anchor=\"end\">%s</text>\n",
            LABEL_W, W, rp_fmt_s((double)span_ps * 1e-12, b, sizeof b));
    fputs("</svg>\n<p class=\"legend\">", f);
    for (int c = 0; c < CLS_COUNT; c++)
        fprintf(f, "<span style=\"color:%s\">&#9632;</span> %s &nbsp; ", cls_color[c], cls_name[c]);
    fputs("</p>\n</section>\n", f);
    free(occ);
    free(shown);
}

/* ---- utilization ------------------------------------------------------------------------------ */

typedef struct util_row {
    char name[64];
    double min, mean, max;
} util_row;

static void util_bars(FILE *f, const util_row *rows, size_t n)
{
    int bar = 18, h = 10 + (int)n * (bar + 6) + 20;
    rp_svg_open(f, "chart-util", h, "utilization per unit kind");
    double scale = (W - LABEL_W - 60) / 100.0;
    for (size_t i = 0; i < n; i++) {
        int y = 10 + (int)i * (bar + 6);
        fprintf(f, "<text x=\"0\" y=\"%d\" class=\"lbl\">", y + 13);
        rp_esc(f, rows[i].name);
        fprintf(f, "</text><rect x=\"%d\" y=\"%d\" width=\"%.2f\" height=\"%d\" fill=\"#c6d7ea\">"
                   "<title>min %.2f %% .. max %.2f %%</title></rect>",
                LABEL_W, y, fmax(rows[i].max * scale, 0.5), bar, rows[i].min, rows[i].max);
        fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%.2f\" height=\"%d\" fill=\"#4e79a7\">"
                   "<title>mean %.2f %%</title></rect>",
                LABEL_W, y + 4, fmax(rows[i].mean * scale, 0.5), bar - 8, rows[i].mean);
        fprintf(f, "<text x=\"%.2f\" y=\"%d\" class=\"lbl\">%.1f%%</text>\n",
                LABEL_W + rows[i].max * scale + 4, y + 13, rows[i].mean);
    }
    fputs("</svg>\n", f);
}

static void utilization(FILE *f, const report_input *in)
{
    rp_section(f, "utilization", "Utilization per unit and chip");
    util_row rows[64];
    size_t n = 0;
    const json_t *units = in->run ? json_object_get(in->run, "units") : NULL, *u;
    size_t i;
    double total_cycles = in->run ? rp_num(in->run, "total_cycles") : NAN;
    json_array_foreach(units, i, u) {
        if (n == 64)
            break;
        util_row *r = &rows[n];
        const char *name = jstr(u, "kind") ? jstr(u, "kind") : jstr(u, "unit") ? jstr(u, "unit")
                                                                                : jstr(u, "name");
        snprintf(r->name, sizeof r->name, "%s", name ? name : "?");
        if (!isnan(rp_num(u, "mean_util_pct"))) {
            r->min = rp_num(u, "min_util_pct"), r->mean = rp_num(u, "mean_util_pct");
            r->max = rp_num(u, "max_util_pct");
        } else if (!isnan(rp_num(u, "busy_cycles")) && total_cycles > 0) {
            if (rp_num(u, "insns") == 0)
                continue; /* a unit that ran nothing (the front end has no busy share) */
            r->min = r->mean = r->max = 100.0 * rp_num(u, "busy_cycles") / total_cycles;
        } else {
            continue;
        }
        n++;
    }
    if (!n && in->st)
        for (i = 0; i < in->st->n_units && n < 64; i++, n++) {
            snprintf(rows[n].name, sizeof rows[n].name, "%s", in->st->units[i].kind);
            rows[n].min = in->st->units[i].min_pct, rows[n].mean = in->st->units[i].mean_pct;
            rows[n].max = in->st->units[i].max_pct;
        }
    if (n) {
        fputs("<p>Bars: the mean over chips (dark) within the range from the least to the most "
              "busy chip (light).</p>\n", f);
        util_bars(f, rows, n);
    } else {
        missing(f, "No unit utilization in the inputs.");
    }
    if (in->st && in->st->n_units) {
        /* chips x unit kinds: the mean util of the chip's tracks of that kind */
        const tdb *db = in->db;
        const tstats *st = in->st;
        size_t chips, nk = st->n_units;
        size_t *shown = chips_with_slices(db, 64, &chips);
        int cw = (W - LABEL_W) / (int)(nk ? nk : 1), ch = 14, h = 24 + (int)chips * ch;
        fputs("<p>Per chip and unit kind (darker: busier).</p>\n", f);
        rp_svg_open(f, "chart-util-grid", h, "utilization per chip and unit kind");
        for (size_t k = 0; k < nk; k++) {
            fprintf(f, "<text x=\"%d\" y=\"14\" class=\"lbl\">", LABEL_W + (int)k * cw + 2);
            rp_esc(f, st->units[k].kind);
            fputs("</text>\n", f);
        }
        for (size_t row_i = 0; row_i < chips; row_i++) {
            size_t p = shown[row_i];
            const char *pn = tdb_str(db, db->processes[p].name);
            fprintf(f, "<text x=\"0\" y=\"%d\" class=\"lbl\">", 20 + (int)row_i * ch + 11);
            rp_esc(f, pn ? pn : "?");
            fputs("</text>\n", f);
            for (size_t k = 0; k < nk; k++) {
                double sum = 0;
                unsigned m = 0;
                for (size_t t = 0; t < st->n_tracks; t++) {
                    const char *dot = strrchr(st->tracks[t].name, '.');
                    if (st->tracks[t].process == p && dot && !strcmp(dot + 1, st->units[k].kind))
                        sum += st->tracks[t].util_pct, m++;
                }
                if (!m)
                    continue;
                double v = sum / m;
                fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#4e79a7\" "
                           "fill-opacity=\"%.3f\"><title>",
                        LABEL_W + (int)k * cw, 20 + (int)row_i * ch, cw - 2, ch - 2,
                        0.08 + 0.92 * fmin(v, 100) / 100);
                rp_esc(f, pn);
                fputs(" ", f);
                rp_esc(f, st->units[k].kind);
                fprintf(f, ": %.2f %%</title></rect>\n", v);
            }
        }
        fputs("</svg>\n", f);
        free(shown);
    }
    fputs("</section>\n", f);
}

/* ---- links on the topology -------------------------------------------------------------------- */

typedef struct node {
    bool sw;
    uint32_t id;
    double x, y;
} node;

/* "chip3" or "sw1" (the names noc/net.c gives link ends). */
static bool parse_end(const char *s, size_t n, node *out)
{
    char buf[32];
    if (n >= sizeof buf)
        return false;
    memcpy(buf, s, n);
    buf[n] = '\0';
    char *hash = strchr(buf, '#');
    if (hash)
        *hash = '\0';
    unsigned v;
    if (sscanf(buf, "chip%u", &v) == 1)
        out->sw = false, out->id = v;
    else if (sscanf(buf, "sw%u", &v) == 1)
        out->sw = true, out->id = v;
    else
        return false;
    return true;
}

/* One link's figures: from the run's `links`, else from the trace's counter of it. */
typedef struct lfig {
    char name[48];
    node a, b;
    double avg, peak; /* GB/s */
} lfig;

static bool parse_link(const char *name, node *a, node *b)
{
    const char *arrow = name ? strstr(name, "->") : NULL;
    return arrow && parse_end(name, (size_t)(arrow - name), a) &&
           parse_end(arrow + 2, strlen(arrow + 2), b);
}

static int by_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* The links with figures: the run's, then every link counter of the trace's system
 * process that the run did not list (its average over the trace's span). */
static lfig *link_figures(const report_input *in, size_t *n)
{
    const json_t *ls = in->run ? json_object_get(in->run, "links") : NULL, *l;
    size_t cap = json_array_size(ls) + (in->db ? in->db->n_counters : 0), i;
    lfig *v = cap ? calloc(cap, sizeof *v) : NULL;
    *n = 0;
    if (!v)
        return NULL;
    json_array_foreach(ls, i, l) {
        lfig *x = &v[*n];
        if (!jstr(l, "name") || !parse_link(jstr(l, "name"), &x->a, &x->b))
            continue;
        snprintf(x->name, sizeof x->name, "%s", jstr(l, "name"));
        x->avg = rp_num(l, "avg_gbps"), x->peak = rp_num(l, "peak_gbps");
        (*n)++;
    }
    size_t n_run = *n; /* (the run lists a few: at most 16) */
    const tdb *db = in->db;
    double span = db ? (double)(db->t_end_ps - db->t_begin_ps) : 0;
    for (size_t c = 0; db && span > 0 && c < db->n_counters; c++) {
        const tdb_counter *k = &db->counters[c];
        const char *pn = tdb_str(db, db->processes[k->process].name), *name = tdb_str(db, k->name);
        lfig *x = &v[*n];
        if (!pn || strcmp(pn, "system") || !parse_link(name, &x->a, &x->b))
            continue;
        bool listed = false;
        for (size_t j = 0; j < n_run && !listed; j++)
            listed = !strcmp(v[j].name, name);
        if (listed)
            continue;
        snprintf(x->name, sizeof x->name, "%s", name);
        x->avg = k->integral / span, x->peak = k->max;
        (*n)++;
    }
    return v;
}

static const lfig *link_find(const lfig *v, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(v[i].name, name))
            return &v[i];
    return NULL;
}

/* The chips the run used: those with slices in the trace and the ends of the links with
 * figures; sorted, distinct. */
static uint32_t *chips_used(const report_input *in, const lfig *lf, size_t n_lf, size_t *n)
{
    const tdb *db = in->db;
    size_t cap = 2 * n_lf + (db ? db->n_processes : 0);
    uint32_t *v = cap ? malloc(cap * sizeof *v) : NULL;
    *n = 0;
    if (!v)
        return NULL;
    for (size_t p = 0; db && p < db->n_processes; p++) {
        const char *pn = tdb_str(db, db->processes[p].name);
        unsigned id;
        if (!pn || sscanf(pn, "chip %u", &id) != 1)
            continue;
        for (size_t t = 0; t < db->n_threads; t++)
            if (db->threads[t].process == p && db->threads[t].n) {
                v[(*n)++] = id;
                break;
            }
    }
    for (size_t i = 0; i < n_lf; i++) {
        if (!lf[i].a.sw)
            v[(*n)++] = lf[i].a.id;
        if (!lf[i].b.sw)
            v[(*n)++] = lf[i].b.id;
    }
    qsort(v, *n, sizeof *v, by_u32);
    size_t k = 0;
    for (size_t i = 0; i < *n; i++)
        if (!k || v[k - 1] != v[i])
            v[k++] = v[i];
    *n = k;
    return v;
}

/* A link drawn between a and b (a's end to b's, offset to its side so both directions
 * show), coloured by its average bandwidth against vmax; fig NULL: no figure (idle when
 * the trace's counters say which links carried anything). */
static void link_line(FILE *f, const node *a, const node *b, const char *name, const lfig *fig,
                      double vmax, bool complete, double bend)
{
    double v = fig && vmax > 0 ? fmin(fig->avg / vmax, 1) : 0;
    double dx = b->x - a->x, dy = b->y - a->y, len = sqrt(dx * dx + dy * dy) + 1e-9;
    double ox = -dy / len * 3, oy = dx / len * 3; /* the two directions side by side */
    int red = (int)(60 + 195 * v), green = (int)(170 - 140 * v), blue = (int)(220 - 190 * v);
    const char *stroke = fig ? NULL : "#d8d8d8";
    char rgb[32];
    snprintf(rgb, sizeof rgb, "rgb(%d,%d,%d)", red, green, blue);
    if (bend != 0) /* a wrap-around link: an arc over the row or column */
        fprintf(f, "<path class=\"link\" d=\"M%.1f,%.1f Q%.1f,%.1f %.1f,%.1f\" fill=\"none\" ",
                a->x + ox, a->y + oy, (a->x + b->x) / 2 + ox - dy / len * bend,
                (a->y + b->y) / 2 + oy + dx / len * bend, b->x + ox, b->y + oy);
    else
        fprintf(f, "<line class=\"link\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" ",
                a->x + ox, a->y + oy, b->x + ox, b->y + oy);
    fprintf(f, "stroke=\"%s\" stroke-width=\"%.1f\"><title>", stroke ? stroke : rgb,
            fig ? 1.5 + 3 * v : 1.0);
    rp_esc(f, name);
    if (fig)
        fprintf(f, ": %.3f GB/s average, %.3f GB/s peak", fig->avg, fig->peak);
    else
        fputs(complete ? ": carried nothing" : ": not among the links given", f);
    fputs("</title>", f);
    fputs(bend != 0 ? "</path>\n" : "</line>\n", f);
}

/* The colour key of link_line at y: five steps from idle to vmax. */
static void link_key(FILE *f, int y, double vmax)
{
    fprintf(f, "<text x=\"%d\" y=\"%d\" class=\"lbl\" text-anchor=\"end\">0</text>\n", W - 250,
            y + 9);
    for (int k = 0; k <= 4; k++) {
        double v = k / 4.0;
        fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"36\" height=\"10\" "
                   "fill=\"rgb(%d,%d,%d)\"><title>%.3g GB/s</title></rect>\n",
                W - 245 + 38 * k, y, (int)(60 + 195 * v), (int)(170 - 140 * v),
                (int)(220 - 190 * v), v * vmax);
    }
    fprintf(f, "<text x=\"%d\" y=\"%d\" class=\"lbl\">%.3g GB/s</text>\n", W - 245 + 38 * 5,
            y + 9, vmax);
}

static void chip_node(FILE *f, const node *nd, bool used, bool label)
{
    fprintf(f, "<circle class=\"node\" cx=\"%.1f\" cy=\"%.1f\" r=\"%d\" fill=\"%s\" stroke=\"%s\">"
               "<title>%s%u%s</title></circle>\n",
            nd->x, nd->y, nd->sw ? 9 : 6, nd->sw ? "#555" : used ? "#fff" : "#f4f4f4",
            used || nd->sw ? "#333" : "#bbb", nd->sw ? "switch " : "chip ", nd->id,
            used || nd->sw ? "" : " (unused)");
    if (label)
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" class=\"lbl\" text-anchor=\"middle\">%s%u</text>\n",
                nd->x, nd->y - 10, nd->sw ? "sw" : "", nd->id);
}

/* A torus: the box of its grid from the least to the greatest coordinate of the chips used
 * in each dimension, z layers side by side, every link of the torus inside the box (the
 * wrap-around ones as arcs when the box spans a whole ring). false when the box holds more
 * than 256 chips. */
static bool links_torus(FILE *f, const report_input *in, const lfig *lf, size_t n_lf,
                        const uint32_t *used, size_t n_used, double vmax, bool complete)
{
    const report_arch *a = &in->arch;
    uint32_t dim[3] = {a->torus_x, a->torus_y, !strcmp(a->topology, "torus3d") ? a->torus_z : 1};
    uint32_t lo[3] = {UINT32_MAX, UINT32_MAX, UINT32_MAX}, hi[3] = {0}, ext[3];
    for (size_t i = 0; i < n_used; i++) {
        uint32_t c = used[i], co[3] = {c % dim[0], c / dim[0] % dim[1], c / dim[0] / dim[1]};
        for (int d = 0; d < 3; d++)
            lo[d] = co[d] < lo[d] ? co[d] : lo[d], hi[d] = co[d] > hi[d] ? co[d] : hi[d];
    }
    uint64_t box = 1;
    for (int d = 0; d < 3; d++)
        ext[d] = hi[d] - lo[d] + 1, box *= ext[d];
    if (box > 256)
        return false;
    double pw = (W - 40.0) / ext[2]; /* a z layer's panel */
    double dx = ext[0] > 1 ? fmin(160, (pw - 60) / (ext[0] - 1)) : 0;
    double dy = ext[1] > 1 ? fmin(110, 300.0 / (ext[1] - 1)) : 0;
    int h = (int)(70 + (ext[1] - 1) * dy + 50);
    fprintf(f, "<p>Each link's average bandwidth against %s (%.3g GB/s): red is saturated, grey "
               "%s. The %u x %u x %u box of the %u x %u x %u torus that holds the %zu chips the "
               "run used; %zu links with figures.</p>\n",
            a->link_gbps > 0 ? "the link's capacity" : "the busiest", vmax,
            complete ? "carried nothing" : "has no figure (not among the run's busiest)", ext[0],
            ext[1], ext[2], dim[0], dim[1], dim[2], n_used, n_lf);
    rp_svg_open(f, "chart-links", h, "link heat map");
#define PLACE(nd, co)                                                                        \
    ((nd).sw = false, (nd).x = 20 + pw * ((co)[2] - lo[2]) + 30 + dx * ((co)[0] - lo[0]),     \
     (nd).y = 50 + dy * ((co)[1] - lo[1]))
    for (uint32_t z = lo[2]; z <= hi[2]; z++)
        if (ext[2] > 1)
            fprintf(f, "<text x=\"%.1f\" y=\"14\" class=\"lbl\">z = %u</text>\n",
                    20 + pw * (z - lo[2]) + 30, z);
    char name[48];
    for (uint32_t z = lo[2]; z <= hi[2]; z++)
        for (uint32_t y = lo[1]; y <= hi[1]; y++)
            for (uint32_t x = lo[0]; x <= hi[0]; x++) {
                uint32_t co[3] = {x, y, z}, c = x + dim[0] * (y + dim[1] * z);
                node na;
                PLACE(na, co), na.id = c;
                for (int d = 0; d < 3; d++) {
                    if (dim[d] < 2 || (dim[d] == 2 && co[d] == 1))
                        continue; /* no ring, or the pair's links drawn from coordinate 0 */
                    uint32_t nco[3] = {x, y, z};
                    nco[d] = (co[d] + 1) % dim[d];
                    if (nco[d] < lo[d] || nco[d] > hi[d])
                        continue; /* leaves the box */
                    uint32_t nb = nco[0] + dim[0] * (nco[1] + dim[1] * nco[2]);
                    node nn;
                    PLACE(nn, nco), nn.id = nb;
                    double bend = nco[d] < co[d] ? (d == 1 ? 40 : -40) : 0; /* wrap-around */
                    snprintf(name, sizeof name, "chip%u->chip%u", c, nb);
                    link_line(f, &na, &nn, name, link_find(lf, n_lf, name), vmax, complete, bend);
                    snprintf(name, sizeof name, "chip%u->chip%u", nb, c);
                    link_line(f, &nn, &na, name, link_find(lf, n_lf, name), vmax, complete, -bend);
                }
            }
    size_t k = 0;
    for (uint32_t z = lo[2]; z <= hi[2]; z++)
        for (uint32_t y = lo[1]; y <= hi[1]; y++)
            for (uint32_t x = lo[0]; x <= hi[0]; x++) {
                uint32_t co[3] = {x, y, z}, c = x + dim[0] * (y + dim[1] * z);
                node nd;
                PLACE(nd, co), nd.id = c;
                while (k < n_used && used[k] < c)
                    k++;
                chip_node(f, &nd, k < n_used && used[k] == c, box <= 64);
            }
#undef PLACE
    link_key(f, h - 16, vmax);
    fputs("</svg>\n", f);
    return true;
}

/* Where a chip (slot of n) or a switch (slot of sws) goes: ring and fully connected on a
 * circle, switches above a line of chips. */
static void place(uint32_t n, uint32_t sws, uint32_t slot, node *nd)
{
    double cx = W / 2.0, cy = 200, r = 160;
    if (nd->sw) {
        nd->x = sws > 1 ? 80 + (W - 160) * (double)slot / (sws - 1) : cx;
        nd->y = 40;
    } else if (sws > 0) {
        nd->x = n > 1 ? 40 + (W - 80) * (double)slot / (n - 1) : cx;
        nd->y = 330;
    } else {
        double ang = 2 * PI * slot / (n ? n : 1) - PI / 2;
        nd->x = cx + r * cos(ang), nd->y = cy + r * sin(ang);
    }
}

/* The slot of a link's end: a switch's index among sw; a chip's id, or its index among
 * the chips used when not all are drawn. */
static uint32_t slot_of(const node *e, bool all, const uint32_t *used, size_t n_used,
                        const uint32_t *sw, uint32_t sws)
{
    const uint32_t *v = e->sw ? sw : all ? NULL : used;
    const uint32_t *hit = v ? bsearch(&e->id, v, e->sw ? sws : n_used, sizeof *v, by_u32) : NULL;
    return hit ? (uint32_t)(hit - v) : e->id;
}

static void links(FILE *f, const report_input *in)
{
    rp_section(f, "links", "Link bandwidth on the topology");
    size_t n = 0, n_used = 0;
    lfig *lf = link_figures(in, &n);
    uint32_t *used = lf ? chips_used(in, lf, n, &n_used) : NULL;
    if (!n || !used) {
        missing(f, "No per-link figures in the inputs (npusim run --json lists the busiest "
                   "links, its trace has every link).");
        free(lf);
        free(used);
        fputs("</section>\n", f);
        return;
    }
    /* complete: the trace's link counters say which links carried anything */
    bool complete = false;
    for (size_t c = 0; in->db && c < in->db->n_counters && !complete; c++) {
        const char *pn = tdb_str(in->db, in->db->processes[in->db->counters[c].process].name);
        complete = pn && !strcmp(pn, "system");
    }
    uint32_t chips = 0, sws = 0, *sw = malloc((2 * n + 1) * sizeof *sw);
    double vmax = in->arch.link_gbps;
    for (size_t i = 0; i < n; i++) {
        for (int k = 0; k < 2; k++) {
            const node *e = k ? &lf[i].b : &lf[i].a;
            if (e->sw && sw)
                sw[sws++] = e->id;
            if (!e->sw && e->id + 1 > chips)
                chips = e->id + 1;
        }
        if (!(in->arch.link_gbps > 0) && lf[i].avg > vmax)
            vmax = lf[i].avg;
    }
    if (sw) { /* the switches the links reach, distinct, in order */
        qsort(sw, sws, sizeof *sw, by_u32);
        uint32_t k = 0;
        for (uint32_t i = 0; i < sws; i++)
            if (!k || sw[k - 1] != sw[i])
                sw[k++] = sw[i];
        sws = k;
    }
    if (in->arch.chips > chips)
        chips = in->arch.chips;
    const char *topo = in->arch.topology ? in->arch.topology : "";
    bool torus = (!strcmp(topo, "torus2d") || !strcmp(topo, "torus3d")) && in->arch.torus_x &&
                 in->arch.torus_y && (uint64_t)in->arch.torus_x * in->arch.torus_y *
                 (strcmp(topo, "torus3d") ? 1 : in->arch.torus_z) == chips;
    if (torus && links_torus(f, in, lf, n, used, n_used, vmax, complete)) {
        free(lf);
        free(used);
        free(sw);
        fputs("</section>\n", f);
        return;
    }
    /* every chip of the system, or of a larger one only the chips used */
    bool all = chips <= 256;
    uint32_t n_nodes = all ? chips : (uint32_t)n_used;
    if (n_nodes > 256) {
        missing(f, "More than 256 chips used: the busiest links are listed in the run's text "
                   "report.");
        free(lf);
        free(used);
        free(sw);
        fputs("</section>\n", f);
        return;
    }
    fprintf(f, "<p>Each link's average bandwidth against %s (%.3g GB/s): red is saturated. "
               "%zu links with figures%s.</p>\n",
            in->arch.link_gbps > 0 ? "the link's capacity" : "the busiest", vmax, n,
            all ? "" : "; the chips the run used, of a larger system");
    rp_svg_open(f, "chart-links", 380, "link heat map");
    for (size_t i = 0; i < n; i++) {
        node a = lf[i].a, b = lf[i].b;
        place(n_nodes, sws, slot_of(&a, all, used, n_used, sw, sws), &a);
        place(n_nodes, sws, slot_of(&b, all, used, n_used, sw, sws), &b);
        link_line(f, &a, &b, lf[i].name, &lf[i], vmax, complete, 0);
    }
    for (uint32_t k = 0; k < n_nodes + sws; k++) {
        node nd = {k >= n_nodes, k >= n_nodes ? sw[k - n_nodes] : all ? k : used[k], 0, 0};
        place(n_nodes, sws, k >= n_nodes ? k - n_nodes : k, &nd);
        chip_node(f, &nd, nd.sw || bsearch(&nd.id, used, n_used, sizeof *used, by_u32),
                  n_nodes + sws <= 64);
    }
    link_key(f, 364, vmax);
    fputs("</svg>\n</section>\n", f);
    free(lf);
    free(used);
    free(sw);
}

/* ---- roofline --------------------------------------------------------------------------------- */

typedef struct kpoint {
    uint32_t name;
    double peak;        /* the FLOP/s of the cores it ran on */
    double flops, bytes, ps;
} kpoint;

/* The cores a kernel span ran on: one on a core's track ("core3 kernels", `npusim sim`'s);
 * on the chip's own track ("kernels", `npusim run`'s, whose every kernel is placed on all of
 * its chip's cores), the chip's. */
static bool span_on_one_core(const tdb *db, const tdb_slice *s)
{
    const char *t = tdb_str(db, db->threads[s->thread].name);
    return t && !strncmp(t, "core", 4) && t[4] >= '0' && t[4] <= '9';
}

static void roofline(FILE *f, const report_input *in)
{
    rp_section(f, "roofline", "Roofline: every kernel");
    const tdb *db = in->db;
    kpoint *pts = NULL;
    size_t n = 0;
    for (size_t i = 0; db && i < db->n_slices; i++) {
        const tdb_slice *s = &db->slices[i];
        const char *c = tdb_str(db, s->cat);
        if (!c || strcmp(c, "kernel") || s->flops <= 0 || s->bytes <= 0 || s->end_ps <= s->start_ps)
            continue;
        double peak = span_on_one_core(db, s) ? in->arch.core_flops_per_s
                                               : in->arch.chip_flops_per_s;
        size_t k = 0;
        while (k < n && (pts[k].name != s->name || pts[k].peak != peak))
            k++;
        if (k == n) {
            kpoint *v = realloc(pts, (n + 1) * sizeof *v);
            if (!v)
                break;
            pts = v, pts[n++] = (kpoint){s->name, peak, 0, 0, 0};
        }
        pts[k].flops += s->flops, pts[k].bytes += s->bytes;
        pts[k].ps += (double)(s->end_ps - s->start_ps);
    }
    double core = in->arch.core_flops_per_s, chip = in->arch.chip_flops_per_s;
    double bw = in->arch.hbm_bytes_per_s, peak = 0;
    bool on_core = false, on_chip = false;
    for (size_t k = 0; k < n; k++) {
        peak = fmax(peak, pts[k].peak);
        on_core |= pts[k].peak == core, on_chip |= pts[k].peak == chip && chip != core;
    }
    if (!n || !(core > 0) || !(chip > 0) || !(bw > 0)) {
        missing(f, !n ? "No kernel with FLOPs and bytes in the trace (kernel spans carry them "
                        "as args)."
                      : "No architecture to draw ceilings (give --arch).");
        free(pts);
        fputs("</section>\n", f);
        return;
    }
    int h = 340, x0 = 70, y0 = 300, pw = W - 100, ph = 280;
    double ilo = 1e-2, ihi = 1e4, plo = peak / 1e5, phi = peak * 3;
    for (size_t k = 0; k < n; k++) {
        double inten = pts[k].flops / pts[k].bytes, perf = pts[k].flops / (pts[k].ps * 1e-12);
        if (inten < ilo)
            ilo = inten / 2;
        if (inten > ihi)
            ihi = inten * 2;
        if (perf < plo)
            plo = perf / 2;
    }
#define LX(v) (x0 + pw * (log10(v) - log10(ilo)) / (log10(ihi) - log10(ilo)))
#define LY(v) (y0 - ph * (log10(v) - log10(plo)) / (log10(phi) - log10(plo)))
    char b[64], c[64];
    double cores = chip / core;
    fputs("<p>Ceilings of ", f);
    rp_esc(f, in->arch.name);
    fputs(", each kernel under those of the cores it ran on (a span on a core's track: one "
          "core; on the chip's track: the chip's cores):", f);
    if (on_core)
        fprintf(f, " one core %s FLOP/s (bf16)%s", rp_fmt_si(core, "", b, sizeof b),
                on_chip ? ";" : "");
    if (on_chip)
        fprintf(f, " the chip's %.0f cores %s FLOP/s (bf16)", cores, rp_fmt_si(chip, "", b, sizeof b));
    fprintf(f, "; %s of HBM bandwidth, the chip's.</p>\n", rp_fmt_si(bw, "B/s", c, sizeof c));
    rp_svg_open(f, "chart-roofline", h, "roofline");
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#999\"/>\n",
            x0, y0 - ph, pw, ph);
    for (double d = pow(10, ceil(log10(ilo))); d <= ihi; d *= 10)
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" class=\"lbl\" text-anchor=\"middle\">%g</text>\n",
                LX(d), y0 + 14, d);
    for (double d = pow(10, ceil(log10(plo))); d <= phi; d *= 10)
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" class=\"lbl\" text-anchor=\"end\">%s</text>\n", x0 - 4,
                LY(d) + 4, rp_fmt_si(d, "", b, sizeof b));
    fprintf(f, "<text x=\"%d\" y=\"%d\" class=\"lbl\">FLOP/byte (HBM)</text><text x=\"2\" y=\"%d\" "
               "class=\"lbl\">FLOP/s</text>\n", x0 + pw / 2, y0 + 30, y0 - ph - 6);
    for (int r = 0; r < 2; r++) { /* a roof per kind of placement: one core, the chip */
        double top = r ? chip : core;
        if (!(r ? on_chip : on_core))
            continue;
        double ridge = top / bw, i1 = ilo, i2 = ridge < ihi ? ridge : ihi;
        fprintf(f, "<polyline class=\"roof\" fill=\"none\" stroke=\"#333\" stroke-width=\"2\" "
                   "points=\"%.1f,%.1f %.1f,%.1f %.1f,%.1f\"><title>%s: %s FLOP/s, ridge at %.3g "
                   "FLOP/byte</title></polyline>\n",
                LX(i1), LY(fmax(bw * i1, plo)), LX(i2), LY(fmin(bw * i2, top)), LX(ihi), LY(top),
                r ? "the chip's cores" : "one core", rp_fmt_si(top, "", b, sizeof b), ridge);
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" class=\"lbl\" text-anchor=\"end\">%s</text>\n",
                x0 + pw - 4, LY(top) - 4, r ? "chip" : "one core");
    }
    for (size_t k = 0; k < n; k++) {
        double inten = pts[k].flops / pts[k].bytes, perf = pts[k].flops / (pts[k].ps * 1e-12);
        fprintf(f, "<circle class=\"kernel\" cx=\"%.1f\" cy=\"%.1f\" r=\"5\" fill=\"#e15759\">"
                   "<title>", LX(inten), LY(fmax(perf, plo)));
        rp_esc(f, tdb_str(db, pts[k].name));
        fprintf(f, ": %.3g FLOP/byte, %s FLOP/s (%.1f %% of the %s peak)</title></circle>\n",
                inten, rp_fmt_si(perf, "", b, sizeof b), 100 * perf / pts[k].peak,
                pts[k].peak == core ? "core's" : "chip's");
        if (n <= 24) {
            fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" class=\"lbl\">", LX(inten) + 7,
                    LY(fmax(perf, plo)) + 4);
            rp_esc(f, tdb_str(db, pts[k].name));
            fputs("</text>\n", f);
        }
    }
#undef LX
#undef LY
    fputs("</svg>\n</section>\n", f);
    free(pts);
}

/* ---- memory and communication ----------------------------------------------------------------- */

/* A part of memory: a key "ROLE_bytes" of the run's `memory` other than the sums and the
 * capacity (total_bytes and peak_bytes are the parts' sum, hbm_bytes the capacity). */
static bool memory_part(const char *key, const json_t *v)
{
    size_t len = strlen(key);
    return json_is_number(v) && len > 6 && !strcmp(key + len - 6, "_bytes") &&
           strcmp(key, "total_bytes") && strcmp(key, "peak_bytes") && strcmp(key, "hbm_bytes");
}

/* The largest chip's memory: its parts stacked left to right on one scale with the HBM
 * capacity (px per byte: (W - 40) / the largest of capacity, peak and the parts' sum), the
 * total a figure beside them, never a segment of its own. */
static void memory(FILE *f, const report_input *in)
{
    rp_section(f, "memory", "Memory of the largest chip");
    const json_t *m = in->run ? json_object_get(in->run, "memory") : NULL;
    double cap = rp_num(m, "hbm_bytes"), peak = rp_num(m, "peak_bytes");
    if (isnan(peak))
        peak = rp_num(m, "total_bytes");
    if (isnan(cap))
        cap = in->arch.hbm_capacity_bytes;
    if (!m || isnan(peak) || !(cap > 0)) {
        missing(f, "No memory figures in the inputs (npusim run --json has them).");
        fputs("</section>\n", f);
        return;
    }
    static const char *const colors[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#b07aa1",
                                         "#76b7b2", "#edc948", "#ff9da7"};
    const char *key;
    const json_t *v;
    double parts = 0;
    json_object_foreach((json_t *)m, key, v)
        if (memory_part(key, v))
            parts += json_number_value(v);
    double total = rp_num(m, "total_bytes");
    if (isnan(total))
        total = parts > 0 ? parts : peak;
    double top = fmax(cap, fmax(peak, fmax(total, parts))), scale = (W - 40) / top, x = 20;
    char b[64], c[64];
    fprintf(f, "<p>Peak %s of %s HBM (%.1f %%); the parts stacked, each at its own peak.</p>\n",
            rp_fmt_bytes(peak, b, sizeof b), rp_fmt_bytes(cap, c, sizeof c), 100 * peak / cap);
    rp_svg_open(f, "chart-memory", 90, "memory by role against capacity");
    int k = 0;
    json_object_foreach((json_t *)m, key, v) {
        if (!memory_part(key, v))
            continue;
        double w = json_number_value(v) * scale;
        fprintf(f, "<rect x=\"%.2f\" y=\"10\" width=\"%.2f\" height=\"30\" fill=\"%s\"><title>",
                x, w, colors[k++ % 8]);
        esc_n(f, key, strlen(key) - 6); /* the role: the key without "_bytes" */
        fprintf(f, ": %s</title></rect>\n", rp_fmt_bytes(json_number_value(v), b, sizeof b));
        x += w;
    }
    if (k == 0)
        fprintf(f, "<rect x=\"20\" y=\"10\" width=\"%.2f\" height=\"30\" fill=\"#4e79a7\"><title>"
                   "peak: %s</title></rect>\n", peak * scale, rp_fmt_bytes(peak, b, sizeof b));
    fprintf(f, "<line x1=\"%.2f\" y1=\"4\" x2=\"%.2f\" y2=\"48\" stroke=\"#000\" stroke-width=\"2\">"
               "<title>HBM capacity %s</title></line><text x=\"%.2f\" y=\"62\" class=\"lbl\" "
               "text-anchor=\"end\">capacity %s</text>\n",
            20 + cap * scale, 20 + cap * scale, rp_fmt_bytes(cap, b, sizeof b), 20 + cap * scale,
            rp_fmt_bytes(cap, c, sizeof c));
    fprintf(f, "<text x=\"20\" y=\"80\" class=\"lbl\">total %s (%.1f %% of capacity)</text>\n",
            rp_fmt_bytes(total, b, sizeof b), 100 * total / cap);
    fputs("</svg>\n<p class=\"legend\">", f);
    k = 0;
    json_object_foreach((json_t *)m, key, v) {
        if (!memory_part(key, v))
            continue;
        fprintf(f, "<span style=\"color:%s\">&#9632;</span> ", colors[k++ % 8]);
        esc_n(f, key, strlen(key) - 6);
        fprintf(f, " %s &nbsp; ", rp_fmt_bytes(json_number_value(v), b, sizeof b));
    }
    fputs("</p>\n</section>\n", f);
}

/* ---- energy ------------------------------------------------------------------------------------ */

/* The run's energy (npusim run --json's `energy`, hw-model/energy.h): the headline figures, and
 * one step's joules by part as a bar (chart-energy); omitted when the run models none. */
static void energy(FILE *f, const report_input *in)
{
    const json_t *e = in->run ? json_object_get(in->run, "energy") : NULL;
    const json_t *parts = e ? json_object_get(e, "parts_j") : NULL;
    double step = rp_num(e, "per_step_j");
    if (isnan(step))
        step = rp_num(e, "total_j");
    if (!json_is_object(parts) || !(step > 0))
        return;
    rp_section(f, "energy", "Energy and power");
    char b[NP_HUMAN_MAX];
    fputs("<div class=\"cards\">\n", f);
    rp_card(f, "energy per step", np_human_j(step, b, sizeof b));
    static const struct {
        const char *key, *label, *unit;
    } w[] = {{"avg_w_per_chip", "average power per chip", "W"},
             {"peak_w_per_chip", "peak power per chip (a kernel's)", "W"}};
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++)
        if (rp_num(e, w[i].key) >= 0)
            rp_card(f, w[i].label, np_human_si(rp_num(e, w[i].key), w[i].unit, b, sizeof b));
    if (rp_num(e, "tflops_per_w") > 0) {
        snprintf(b, sizeof b, "%.3g", rp_num(e, "tflops_per_w"));
        rp_card(f, "TFLOP/s per W", b);
    }
    const char *per = rp_num(e, "j_per_token") > 0 ? "j_per_token" : "j_per_sample";
    if (rp_num(e, per) > 0)
        rp_card(f, per[6] == 't' ? "energy per token" : "energy per sample",
             np_human_j(rp_num(e, per), b, sizeof b));
    fputs("</div>\n", f);
    static const char *const colors[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#b07aa1",
                                         "#76b7b2", "#edc948", "#ff9da7", "#9c755f"};
    double total = 0;
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)parts, key, v)
        if (json_is_number(v) && json_number_value(v) > 0)
            total += json_number_value(v);
    if (!(total > 0)) {
        fputs("</section>\n", f);
        return;
    }
    double run_j = rp_num(e, "total_j"), scale = run_j > 0 ? step / run_j : 1;
    fprintf(f, "<p>One step's %s by where it goes (the counts of the run's actions times the "
               "architecture's energies per action).</p>\n", np_human_j(step, b, sizeof b));
    rp_svg_open(f, "chart-energy", 60, "energy per step by part");
    double x = 0;
    int k = 0;
    json_object_foreach((json_t *)parts, key, v) {
        double j = json_is_number(v) ? json_number_value(v) : 0;
        if (!(j > 0))
            continue;
        double wd = j / total * W;
        fprintf(f, "<rect x=\"%.2f\" y=\"4\" width=\"%.2f\" height=\"28\" fill=\"%s\" "
                   "class=\"part\" data-j=\"%.17g\"><title>", x, wd, colors[k++ % 9], j * scale);
        rp_esc(f, key);
        fprintf(f, ": %s (%.1f %%)</title></rect>\n", np_human_j(j * scale, b, sizeof b),
                100 * j / total);
        if (wd > 7.5 * (double)(strlen(key) + 4)) {
            fprintf(f, "<text x=\"%.2f\" y=\"50\">", x + 2);
            rp_esc(f, key);
            fprintf(f, " %.0f%%</text>\n", 100 * j / total);
        }
        x += wd;
    }
    fputs("</svg>\n<p class=\"legend\">", f);
    k = 0;
    json_object_foreach((json_t *)parts, key, v) {
        double j = json_is_number(v) ? json_number_value(v) : 0;
        if (!(j > 0))
            continue;
        fprintf(f, "<span style=\"color:%s\">&#9632;</span> ", colors[k++ % 9]);
        rp_esc(f, key);
        fprintf(f, " %s (%.1f %%) &nbsp; ", np_human_j(j * scale, b, sizeof b), 100 * j / total);
    }
    fputs("</p>\n</section>\n", f);
}

static void comm(FILE *f, const report_input *in)
{
    rp_section(f, "communication", "Communication: exposed and overlapped");
    typedef struct { char kind[32]; double total, exposed, bytes; } row; /* bytes: a chip's */
    row rows[32];
    size_t n = 0, i;
    const json_t *c;
    json_array_foreach(in->run ? json_object_get(in->run, "comm") : NULL, i, c) {
        if (n == 32)
            break;
        snprintf(rows[n].kind, sizeof rows[n].kind, "%s", jstr(c, "kind") ? jstr(c, "kind") : "?");
        rows[n].total = rp_num(c, "total_s"), rows[n].exposed = rp_num(c, "exposed_s");
        rows[n].bytes = rp_num(c, "bytes_per_chip");
        if (!isnan(rows[n].total) && !isnan(rows[n].exposed))
            n++;
    }
    if (!n && in->st)
        for (i = 0; i < in->st->n_comm && n < 32; i++, n++) {
            const tstats_comm *m = &in->st->comm[i];
            double k = m->chips ? m->chips : 1;
            snprintf(rows[n].kind, sizeof rows[n].kind, "%s",
                     m->kind == TDB_NONE ? "comm" : tdb_str(in->db, m->kind));
            rows[n].total = (double)m->total_ps / k * 1e-12;
            rows[n].exposed = (double)m->exposed_ps / k * 1e-12;
            rows[n].bytes = NAN;
        }
    if (!n) {
        missing(f, "No communication in the inputs.");
        fputs("</section>\n", f);
        return;
    }
    /* each row's label, right of its bar: the chart's scale leaves room for the longest
     * (COMM_CHAR_PX per character bounds an 11 px label's width) */
    char label[32][128], b[64], d[64], t[64], u[64];
    double top = 0, room = 0;
    for (i = 0; i < n; i++) {
        top = fmax(top, rows[i].total);
        snprintf(label[i], sizeof label[i], "exposed %s, overlapped %s%s%s%s",
                 rp_fmt_s(rows[i].exposed, b, sizeof b),
                 rp_fmt_s(fmax(rows[i].total - rows[i].exposed, 0), d, sizeof d),
                 isnan(rows[i].bytes) ? "" : ", ",
                 isnan(rows[i].bytes) ? "" : rp_fmt_bytes(rows[i].bytes, u, sizeof u),
                 isnan(rows[i].bytes) ? "" : " sent a chip");
        room = fmax(room, COMM_CHAR_PX * (double)strlen(label[i]) + 8);
    }
    double scale = top > 0 ? (W - LABEL_W - room) / top : 0;
    fputs("<p>Per kind, the mean over the chips that take part of the time its communication is "
          "in flight: exposed (nothing computes meanwhile, dark) and overlapped with compute "
          "(light); and of the bytes each of them puts on the network.</p>\n", f);
    rp_svg_open(f, "chart-comm", 10 + (int)n * 26 + 10, "exposed and overlapped communication");
    for (i = 0; i < n; i++) {
        int y = 10 + (int)i * 26;
        double over = fmax(rows[i].total - rows[i].exposed, 0);
        fprintf(f, "<text x=\"0\" y=\"%d\" class=\"lbl\">", y + 14);
        rp_esc(f, rows[i].kind);
        fprintf(f, "</text><rect x=\"%d\" y=\"%d\" width=\"%.2f\" height=\"20\" fill=\"#e15759\">"
                   "<title>exposed %s of %s in flight</title></rect><rect x=\"%.2f\" y=\"%d\" "
                   "width=\"%.2f\" height=\"20\" fill=\"#f5b5b6\"><title>overlapped %s of %s in "
                   "flight</title></rect><text x=\"%.2f\" y=\"%d\" class=\"lbl\">%s</text>\n",
                LABEL_W, y, fmax(rows[i].exposed * scale, 0.5), rp_fmt_s(rows[i].exposed, b, sizeof b),
                rp_fmt_s(rows[i].total, t, sizeof t), LABEL_W + rows[i].exposed * scale, y,
                over * scale, rp_fmt_s(over, d, sizeof d), rp_fmt_s(rows[i].total, t, sizeof t),
                LABEL_W + fmax(rows[i].total, rows[i].exposed) * scale + 4, y + 14, label[i]);
    }
    fputs("</svg>\n</section>\n", f);
}

/* ---- collective sizes, kernels, sweep --------------------------------------------------------- */

static void collective(FILE *f, const report_input *in)
{
    const json_t *rows = in->run ? json_object_get(in->run, "rows") : NULL, *r;
    size_t n = json_array_size(rows), i;
    if (!n)
        return;
    rp_section(f, "collective", "Collective: bus bandwidth against size");
    double bmin = 1e300, bmax = 0, ymax = 0;
    json_array_foreach(rows, i, r) {
        bmin = fmin(bmin, rp_num(r, "bytes")), bmax = fmax(bmax, rp_num(r, "bytes"));
        ymax = fmax(ymax, rp_num(r, "busbw_gbps"));
    }
    if (!(bmax > bmin) || !(ymax > 0))
        bmax = bmin * 2, ymax = ymax > 0 ? ymax : 1;
    int x0 = 70, y0 = 260, pw = W - 100, ph = 230;
    rp_svg_open(f, "chart-collective", 300, "bus bandwidth against message size");
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#999\"/>"
               "<text x=\"%d\" y=\"%d\" class=\"lbl\">message size (bytes, log)</text><text x=\"2\" "
               "y=\"%d\" class=\"lbl\">bus GB/s (max %.3g)</text>\n<polyline fill=\"none\" "
               "stroke=\"#4e79a7\" stroke-width=\"2\" points=\"",
            x0, y0 - ph, pw, ph, x0 + pw / 2, y0 + 28, y0 - ph - 6, ymax);
    json_array_foreach(rows, i, r) {
        fprintf(f, "%.1f,%.1f ", x0 + pw * log(rp_num(r, "bytes") / bmin) / log(bmax / bmin),
                y0 - ph * rp_num(r, "busbw_gbps") / ymax);
    }
    fputs("\"/>\n", f);
    json_array_foreach(rows, i, r) {
        fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"#4e79a7\"><title>%.0f B: %.4g "
                   "GB/s bus, %.4g us</title></circle>\n",
                x0 + pw * log(rp_num(r, "bytes") / bmin) / log(bmax / bmin),
                y0 - ph * rp_num(r, "busbw_gbps") / ymax, rp_num(r, "bytes"), rp_num(r, "busbw_gbps"),
                rp_num(r, "time_us"));
    }
    fputs("</svg>\n</section>\n", f);
}

static void kernels(FILE *f, const report_input *in)
{
    rp_section(f, "kernels", "Top kernels by time");
    char b[64];
    char c[NP_HUMAN_MAX];
    uint64_t total = 0;
    for (size_t i = 0; in->st && i < in->st->n_kernels; i++)
        if (is_kernel(in->db, &in->st->kernels[i]))
            total += in->st->kernels[i].total_ps;
    if (total) { /* the trace's kernels (its collectives: the communication section) */
        fputs("<table><tr><th>kernel</th><th>count</th><th>total</th><th>share</th></tr>\n", f);
        for (size_t i = 0, rows = 0; i < in->st->n_kernels && rows < 20; i++) {
            const tstats_kernel *k = &in->st->kernels[i];
            if (!is_kernel(in->db, k))
                continue;
            rows++;
            fputs("<tr><td>", f);
            rp_esc(f, tdb_str(in->db, k->name));
            fprintf(f, "</td><td>%s</td><td>%s</td><td>%.1f %%</td></tr>\n",
                    np_human_count(k->count, c, sizeof c),
                    rp_fmt_s((double)k->total_ps * 1e-12, b, sizeof b),
                    100.0 * (double)k->total_ps / (double)total);
        }
        fputs("</table>\n", f);
    } else if (in->run && json_array_size(json_object_get(in->run, "kernels"))) {
        fputs("<table><tr><th>kernel</th><th>chip</th><th>core</th><th>cycles</th></tr>\n", f);
        size_t i;
        const json_t *k;
        json_array_foreach(json_object_get(in->run, "kernels"), i, k) {
            if (i == 20)
                break;
            fputs("<tr><td>", f);
            rp_esc(f, jstr(k, "name"));
            double cycles = rp_num(k, "cycles");
            fprintf(f, "</td><td>%.0f</td><td>%.0f</td><td>%s</td></tr>\n", rp_num(k, "chip"),
                    rp_num(k, "core"), cycles >= 0 && cycles < 1.8e19
                                        ? np_human_count((uint64_t)cycles, c, sizeof c) : "-");
        }
        fputs("</table>\n", f);
    } else {
        missing(f, "No kernels in the inputs.");
    }
    fputs("</section>\n", f);
}

/* The sweep's rows as JSON inside the page, and the script that plots them. */
static void sweep(FILE *f, const report_input *in)
{
    if (!in->sweep)
        return;
    rp_section(f, "sweep", "Sweep: a metric against a swept key or another metric");
    char *data = json_dumps(in->sweep, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(12));
    if (!data) {
        missing(f, "Out of memory embedding the sweep.");
        fputs("</section>\n", f);
        return;
    }
    fputs("<p>x (a swept key or a metric) <select id=\"sweep-x\"></select> y <select id=\"sweep-y\"></select> "
          "<select id=\"sweep-dir\"><option value=\"min\">lower is better</option>"
          "<option value=\"max\">higher is better</option></select> &mdash; the Pareto front "
          "(no point has a smaller x and a better y) in red.</p>\n", f);
    rp_svg_open(f, "chart-sweep", 366, "sweep plot");
    fputs("</svg>\n<script type=\"application/json\" id=\"sweep-data\">", f);
    esc_json(f, data);
    free(data);
    fputs("</script>\n<script>\n"
          "(function () {\n"
          "  var rows = JSON.parse(document.getElementById('sweep-data').textContent);\n"
          "  var sx = document.getElementById('sweep-x'), sy = document.getElementById('sweep-y');\n"
          "  var sd = document.getElementById('sweep-dir');\n"
          "  var svg = document.getElementById('chart-sweep'), NS = 'http://www.w3.org/2000/svg';\n"
          "  function keys(part) { var k = {}; rows.forEach(function (r) {\n"
          "    Object.keys(r[part] || {}).forEach(function (n) {\n"
          "      if (typeof r[part][n] === 'number') k[n] = 1; }); }); return Object.keys(k); }\n"
          "  function fill(sel, ks) { ks.forEach(function (k) { var o = document.createElement('option');\n"
          "    o.value = o.textContent = k; sel.appendChild(o); }); }\n"
          "  var px = keys('params'), mx = keys('metrics');\n"
          "  fill(sx, px); fill(sx, mx.filter(function (k) { return px.indexOf(k) < 0; })); fill(sy, mx);\n"
          "  function val(r, k) { return r.params && typeof r.params[k] === 'number' ? r.params[k] :\n"
          "    r.metrics && typeof r.metrics[k] === 'number' ? r.metrics[k] : undefined; }\n"
          "  function el(name, at, text) { var e = document.createElementNS(NS, name);\n"
          "    for (var a in at) e.setAttribute(a, at[a]); if (text) e.textContent = text;\n"
          "    svg.appendChild(e); return e; }\n"
          "  function draw() {\n"
          "    while (svg.firstChild) svg.removeChild(svg.firstChild);\n"
          "    var x = sx.value, y = sy.value, lower = sd.value === 'min';\n"
          "    var p = rows.filter(function (r) { return r.metrics && val(r, x) !== undefined &&\n"
          "      typeof r.metrics[y] === 'number'; });\n"
          "    if (!p.length) { el('text', {x: 10, y: 20}, 'no point has both'); return; }\n"
          "    var xs = p.map(function (r) { return val(r, x); }), ys = p.map(function (r) { return r.metrics[y]; });\n"
          "    var x0 = Math.min.apply(null, xs), x1 = Math.max.apply(null, xs);\n"
          "    var y0 = Math.min.apply(null, ys), y1 = Math.max.apply(null, ys);\n"
          "    if (x1 === x0) x1 = x0 + 1; if (y1 === y0) y1 = y0 + 1;\n"
          "    function X(v) { return 70 + 860 * (v - x0) / (x1 - x0); }\n"
          "    function Y(v) { return 320 - 290 * (v - y0) / (y1 - y0); }\n"
          "    el('rect', {x: 60, y: 20, width: 880, height: 310, fill: 'none', stroke: '#999'});\n"
          "    for (var i = 0; i <= 4; i++) { var tx = x0 + (x1 - x0) * i / 4, ty = y0 + (y1 - y0) * i / 4;\n"
          "      el('line', {x1: X(tx), y1: 330, x2: X(tx), y2: 336, stroke: '#999', 'class': 'tick-x'});\n"
          "      el('text', {x: X(tx) - 12, y: 346, 'class': 'lbl tick-x'}, +tx.toPrecision(3) + '');\n"
          "      el('line', {x1: 54, y1: Y(ty), x2: 60, y2: Y(ty), stroke: '#999', 'class': 'tick-y'});\n"
          "      el('text', {x: 4, y: Y(ty) + 4, 'class': 'lbl tick-y'}, +ty.toPrecision(3) + ''); }\n"
          "    el('text', {x: 470, y: 359, 'class': 'lbl'}, x);\n"
          "    el('text', {x: 62, y: 14, 'class': 'lbl'}, y);\n"
          "    var order = p.slice().sort(function (a, b) { return val(a, x) - val(b, x) ||\n"
          "      (lower ? a.metrics[y] - b.metrics[y] : b.metrics[y] - a.metrics[y]); });\n"
          "    var best = null, front = [];\n"
          "    order.forEach(function (r) { var v = r.metrics[y];\n"
          "      if (best === null || (lower ? v < best : v > best)) { best = v; front.push(r); } });\n"
          "    el('polyline', {fill: 'none', stroke: '#e15759', 'stroke-width': 2, points:\n"
          "      front.map(function (r) { return X(val(r, x)) + ',' + Y(r.metrics[y]); }).join(' ')});\n"
          "    p.forEach(function (r) { var on = front.indexOf(r) >= 0;\n"
          "      var c = el('circle', {cx: X(val(r, x)), cy: Y(r.metrics[y]), r: on ? 5 : 3.5,\n"
          "        fill: on ? '#e15759' : '#4e79a7', 'class': on ? 'pareto' : 'point'});\n"
          "      var t = document.createElementNS(NS, 'title');\n"
          "      t.textContent = 'point ' + r.point + ': ' + JSON.stringify(r.params) + ' ' + y + ' = ' + r.metrics[y];\n"
          "      c.appendChild(t); });\n"
          "  }\n"
          "  function guess() { sd.value = /time|_s$|latency|bytes|energy|cost/.test(sy.value) ? 'min' : 'max'; }\n"
          "  sx.onchange = draw; sd.onchange = draw; sy.onchange = function () { guess(); draw(); };\n"
          "  guess(); draw();\n"
          "})();\n</script>\n</section>\n",
          f);
}

np_status report_write(const report_input *in, FILE *f, np_err *err)
{
    (void)err;
    fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>", f);
    rp_esc(f, in->title ? in->title : "npusim report");
    fputs("</title>\n<style>\n"
          "body{font:14px/1.4 system-ui,sans-serif;margin:24px auto;max-width:1000px;color:#222}\n"
          "h1{font-size:22px}h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ddd}\n"
          ".cards{display:flex;flex-wrap:wrap;gap:10px}.card{border:1px solid #ddd;border-radius:6px;"
          "padding:8px 14px;min-width:120px}.card .v{font-size:20px;font-weight:600}"
          ".card .l{color:#666;font-size:12px}\n"
          "svg.chart{display:block;margin:8px 0}.lbl{font-size:11px;fill:#333}\n"
          ".na{color:#888;font-style:italic}table{border-collapse:collapse}tr.diff td{background:#fff4d6}"
          "td,th{border:1px solid #ddd;padding:2px 8px;text-align:right}td:first-child{text-align:left}\n"
          "</style></head><body>\n<h1>", f);
    rp_esc(f, in->title ? in->title : "npusim report");
    fputs("</h1>\n<p class=\"src\">", f);
    if (in->run_path)
        fputs(in->cmp ? "run A: " : "run: ", f), rp_esc(f, in->run_path), fputs(" ", f);
    if (in->cmp && in->cmp->run_path)
        fputs("run B: ", f), rp_esc(f, in->cmp->run_path), fputs(" ", f);
    if (in->trace_path)
        fputs("trace: ", f), rp_esc(f, in->trace_path), fputs(" ", f);
    if (in->sweep_path)
        fputs("sweep: ", f), rp_esc(f, in->sweep_path), fputs(" ", f);
    if (in->arch.name)
        fputs("arch: ", f), rp_esc(f, in->arch.name);
    fputs("</p>\n", f);
    rp_compare(f, in);
    summary(f, in);
    if (in->sweep)
        sweep(f, in);
    rp_timeline(f, in, "timeline", "Timeline per chip", 0);
    utilization(f, in);
    collective(f, in);
    links(f, in);
    roofline(f, in);
    memory(f, in);
    energy(f, in);
    comm(f, in);
    kernels(f, in);
    fputs("<footer><p class=\"na\">Written by npusim report. Every mark has its exact figures "
          "as a tooltip.</p></footer>\n</body></html>\n", f);
    return NP_OK;
}
