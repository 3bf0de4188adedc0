/* test_report.c — `npusim report` (traces/report.h) renders in a real browser: headless
 * Chromium (Debian's chromium, installed by scripts/setup.sh; NPUSIM_CHROMIUM names another)
 * loads the report with a checking script added to a copy of it, which writes into the DOM
 * every error the page raised and the geometry of every chart; --dump-dom brings that back.
 * A screenshot of the report is saved (build dir, report.png). The report itself must be
 * self-contained: no external script, style, image or link. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "harness.h"

static char dir[64];

static const char *tmp(const char *name)
{
    static char buf[8][300];
    static int k;
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/npusim_report_XXXXXX");
        CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
    }
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

static const char *chromium(void)
{
    const char *env = getenv("NPUSIM_CHROMIUM");
    if (env && *env)
        return env;
    static const char *const names[] = {"/usr/bin/chromium", "/usr/bin/chromium-headless-shell",
                                        "/usr/lib/chromium/chromium-headless-shell"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (access(names[i], X_OK) == 0)
            return names[i];
    return NULL;
}

static void run_ok(const char *const *args)
{
    harness_run r = harness_npusim_in(NULL, args);
    if (r.exit_status)
        fprintf(stderr, "npusim %s exited %d: %s\n", args[0], r.exit_status, r.err);
    CU_ASSERT_EQUAL_FATAL(r.exit_status, 0);
    harness_run_free(&r);
}

/* The report, with a script that records errors before the page's own script and a checking
 * script after everything. */
static const char err_hook[] =
    "<script>window.__errs=[];window.addEventListener('error',function(e){"
    "window.__errs.push('error: '+e.message)});(function(){var c=console.error;"
    "console.error=function(){window.__errs.push('console: '+[].join.call(arguments,' '));"
    "c.apply(console,arguments)}})();</script>";
static const char checker[] =
    "<script>(function(){var out=[];"
    "document.querySelectorAll('svg.chart').forEach(function(s){var r=s.getBoundingClientRect();"
    "var b=s.getBBox();var m=s.querySelectorAll('rect,circle,line,polyline,text').length;"
    "out.push('CHART '+s.id+' '+Math.round(r.width)+' '+Math.round(r.height)+' '+"
    "Math.round(b.width)+' '+Math.round(b.height)+' '+m);var o=0;"
    "s.querySelectorAll('text').forEach(function(t){var e=t.getBBox();"
    "if(e.x<-2||e.x+e.width>s.viewBox.baseVal.width+0.5)o++});"
    "out.push('OVERFLOW '+s.id+' '+o)});"
    "out.push('ERRORS '+window.__errs.length);window.__errs.forEach(function(e){out.push(e)});"
    "var p=document.createElement('pre');p.id='selfcheck';p.textContent=out.join('\\n');"
    "document.body.appendChild(p)})();</script>";

static char *checked_copy(const char *html)
{
    const char *head = strstr(html, "<head>"), *end = strstr(html, "</body>");
    CU_ASSERT_PTR_NOT_NULL_FATAL(head);
    CU_ASSERT_PTR_NOT_NULL_FATAL(end);
    size_t n = strlen(html) + sizeof err_hook + sizeof checker + 1;
    char *out = malloc(n);
    head += 6;
    snprintf(out, n, "%.*s%s%.*s%s%s", (int)(head - html), html, err_hook, (int)(end - head), head,
             checker, end);
    return out;
}

/* One chart line of the self-check: "CHART id w h bbox_w bbox_h marks". */
static bool chart_ok(const char *dom, const char *id)
{
    char key[64];
    snprintf(key, sizeof key, "CHART %s ", id);
    const char *p = strstr(dom, key);
    if (!p) {
        fprintf(stderr, "report: chart %s is not in the page\n", id);
        return false;
    }
    int w, h, bw, bh, marks;
    if (sscanf(p + strlen(key), "%d %d %d %d %d", &w, &h, &bw, &bh, &marks) != 5)
        return false;
    if (w <= 0 || h <= 0 || bw <= 0 || bh <= 0 || marks <= 0) {
        fprintf(stderr, "report: chart %s is empty (%d x %d, content %d x %d, %d marks)\n", id, w,
                h, bw, bh, marks);
        return false;
    }
    return true;
}

/* Runs chromium on url with extra arguments; its stdout into out_path. Returns the status. */
static int browse(const char *extra, const char *url, const char *out_path)
{
    const char *bin = chromium();
    char profile[320], cmd[2048];
    snprintf(profile, sizeof profile, "%s/profile-XXXXXX", dir);
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(profile));
    snprintf(cmd, sizeof cmd,
             "timeout 60 '%s' --headless --no-sandbox --disable-gpu --disable-quic --no-first-run "
             "--disable-background-networking --disable-component-update --disable-sync "
             "--user-data-dir='%s' %s '%s' >'%s' 2>'%s.err'",
             bin, profile, extra, url, out_path, out_path);
    int st = system(cmd);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", profile);
    if (system(cmd) != 0)
        fprintf(stderr, "report: could not remove %s\n", profile);
    return st;
}

TEST(the_report_renders_in_headless_chromium_with_every_chart_and_no_error)
{
    const char *bin = chromium();
    if (!bin) {
        CU_FAIL("no Chromium: scripts/setup.sh installs Debian's chromium (or set NPUSIM_CHROMIUM)");
        return;
    }
    /* a trace with kernels (FLOPs and bytes: the roofline) on two chips, and messages */
    const char *mm = tmp("mm.elf"), *trace = tmp("t.json.gz"), *html = tmp("report.html");
    run_ok((const char *const[]){"asm", harness_src_path("isa/examples/matmul_db.s"), "-o", mm,
                                 "--arch", "tiny", NULL});
    run_ok((const char *const[]){"sim", "--arch", "tiny", mm, mm, "--trace", trace, NULL});
    char *run_json = strdup(harness_src_path("tests/data/report/run.json")); /* a static buffer */
    run_ok((const char *const[]){"report", run_json, trace,
                                 harness_src_path("tests/data/report/sweep.jsonl"), "--arch",
                                 "tiny", "--set", "system.topology=hierarchical", "--set",
                                 "system.chips=8", "-o", html, NULL});
    free(run_json);
    char *page = harness_read_file(html, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(page);
    /* self-contained: nothing to fetch (the SVG namespace is a name, not a request) */
    CU_ASSERT_PTR_NULL(strstr(page, "<script src"));
    CU_ASSERT_PTR_NULL(strstr(page, "<link"));
    CU_ASSERT_PTR_NULL(strstr(page, "<img"));
    CU_ASSERT_PTR_NULL(strstr(page, "url("));
    for (const char *p = page; (p = strstr(p, "http")); p++)
        CU_ASSERT_EQUAL(strncmp(p, "http://www.w3.org/2000/svg", 26), 0);
    char *copy = checked_copy(page);
    const char *check = tmp("check.html");
    FILE *f = fopen(check, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs(copy, f);
    fclose(f);
    free(copy);
    free(page);
    char url[400];
    snprintf(url, sizeof url, "file://%s", check);
    const char *dom_path = tmp("dom.html");
    CU_ASSERT_EQUAL(browse("--dump-dom", url, dom_path), 0);
    char *page_dom = harness_read_file(dom_path, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(page_dom);
    const char *dom = strstr(page_dom, "<pre id=\"selfcheck\">"); /* what the checker wrote */
    CU_ASSERT_PTR_NOT_NULL_FATAL(dom);
    CU_ASSERT_PTR_NOT_NULL(strstr(dom, "ERRORS 0"));
    if (!strstr(dom, "ERRORS 0"))
        fprintf(stderr, "report: %s\n", strstr(dom, "ERRORS"));
    static const char *const charts[] = {"chart-chip-time", "chart-breakdown", "chart-timeline",
                                         "chart-util",      "chart-util-grid", "chart-links",
                                         "chart-roofline",  "chart-memory",    "chart-comm",
                                         "chart-sweep"};
    for (size_t i = 0; i < sizeof charts / sizeof charts[0]; i++)
        CU_ASSERT_TRUE(chart_ok(dom, charts[i]));
    /* labels inside their chart: the communication chart's and the memory chart's (a text's
     * box as the browser lays it out, within the chart's width; a glyph may start 1 px left of 0) */
    CU_ASSERT_PTR_NOT_NULL(strstr(dom, "OVERFLOW chart-comm 0\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(dom, "OVERFLOW chart-memory 0\n"));
    for (const char *o = dom; (o = strstr(o, "OVERFLOW ")); o++)
        if (strncmp(strchr(o + 9, ' '), " 0\n", 3))
            fprintf(stderr, "report: %.60s\n", o);
    /* the sweep's script drew the points and a Pareto front among them */
    CU_ASSERT_PTR_NOT_NULL(strstr(page_dom, "class=\"pareto\""));
    free(page_dom);
    /* a screenshot of the report as it is */
    char shot[320], arg[400];
    snprintf(shot, sizeof shot, "%s/report.png", dir);
    snprintf(arg, sizeof arg, "--window-size=1100,2600 --screenshot='%s'", shot);
    snprintf(url, sizeof url, "file://%s", html);
    CU_ASSERT_EQUAL(browse(arg, url, tmp("shot.out")), 0);
    size_t n = 0;
    char *png = harness_read_file(shot, &n);
    CU_ASSERT_PTR_NOT_NULL_FATAL(png);
    CU_ASSERT(n > 10000 && !memcmp(png, "\x89PNG", 4));
    free(png);
    FILE *keep = fopen("report.png", "wb"); /* in the test's working directory (build/tests) */
    if (keep) {
        png = harness_read_file(shot, &n);
        fwrite(png, 1, n, keep);
        fclose(keep);
        free(png);
    }
}

TEST(a_collective_report_plots_bus_bandwidth_and_bad_inputs_are_errors)
{
    const char *out = tmp("coll.json"), *html = tmp("coll.html");
    harness_run r = harness_npusim("collective", "--op", "all_reduce", "--json", "--max-bytes",
                                   "1M", NULL);
    CU_ASSERT_EQUAL_FATAL(r.exit_status, 0);
    FILE *f = fopen(out, "w");
    fputs(r.out, f);
    fclose(f);
    harness_run_free(&r);
    run_ok((const char *const[]){"report", out, "-o", html, NULL});
    char *page = harness_read_file(html, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(page);
    CU_ASSERT_PTR_NOT_NULL(strstr(page, "id=\"chart-collective\""));
    CU_ASSERT(strstr(page, "<polyline") != NULL);
    free(page);
    /* a file that is not JSON: its name and position; no output: a usage error */
    const char *bad = tmp("bad.json");
    f = fopen(bad, "w");
    fputs("{\"step_time_s\": 1,\n  oops}\n", f);
    fclose(f);
    r = harness_npusim("report", bad, "-o", html, NULL);
    CU_ASSERT_EQUAL(r.exit_status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "bad.json:2:"));
    harness_run_free(&r);
    r = harness_npusim("report", bad, NULL);
    CU_ASSERT_EQUAL(r.exit_status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "-o"));
    harness_run_free(&r);
}

/* How many of the page's link marks are titled name ("chipA->chipB", written with the arrow
 * escaped); *avg: the last one's average GB/s (-1 when it has none). */
static int link_marks(const char *page, const char *name, double *avg)
{
    const char *arrow = strstr(name, "->");
    char title[96];
    snprintf(title, sizeof title, "<title>%.*s-&gt;%s: ", (int)(arrow - name), name, arrow + 2);
    int n = 0;
    for (const char *p = page; (p = strstr(p, title)); p++) {
        const char *open = p;
        while (open > page && open[-1] != '\n')
            open--; /* the mark's element starts its line */
        if (strncmp(open, "<line class=\"link\"", 18) && strncmp(open, "<path class=\"link\"", 18))
            continue;
        n++;
        if (sscanf(p + strlen(title), "%lf GB/s average", avg) != 1)
            *avg = -1;
    }
    return n;
}

static double run_link_avg(const char *run_json, const char *name)
{
    char quoted[64];
    snprintf(quoted, sizeof quoted, "\"%s\"", name);
    const char *p = strstr(run_json, quoted);
    const char *a = p ? strstr(p, "\"avg_gbps\":") : NULL;
    double v = -1;
    if (a)
        sscanf(a + 11, "%lf", &v);
    return v;
}

TEST(the_link_map_of_8_chips_of_a_4096_chip_torus_draws_the_box_of_the_torus_they_use)
{
    /* the README's default run's shape (gpt-tiny for speed): dp 2 x tp 2 x pp 2 on tpu-pod's
     * 16 x 16 x 16 torus */
    const char *trace = tmp("run.json.gz"), *json = tmp("run.json"), *html = tmp("run.html"),
               *html2 = tmp("run_trace_only.html");
    harness_run r = harness_npusim("run", "--model", "gpt-tiny", "--batch", "16", "--microbatch",
                                   "2", "--dp", "2", "--tp", "2", "--pp", "2", "--json",
                                   "--trace", trace, NULL);
    CU_ASSERT_EQUAL_FATAL(r.exit_status, 0);
    FILE *f = fopen(json, "w");
    fputs(r.out, f);
    fclose(f);
    run_ok((const char *const[]){"report", json, trace, "-o", html, NULL});
    run_ok((const char *const[]){"report", trace, "--arch", "tpu-pod", "-o", html2, NULL});
    char *page = harness_read_file(html, NULL), *page2 = harness_read_file(html2, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(page);
    CU_ASSERT_PTR_NOT_NULL_FATAL(page2);
    CU_ASSERT_PTR_NULL(strstr(page, "More than 256 chips"));
    /* the chips: tp pairs along x, the two pipeline stages one row apart (chip c at x = c %
     * 16, y = c / 16 % 16): chips 0..3 and 16..19, a 4 x 2 x 1 box */
    static const unsigned chips[] = {0, 1, 2, 3, 16, 17, 18, 19};
    CU_ASSERT_PTR_NOT_NULL(strstr(page, "The 4 x 2 x 1 box of the 16 x 16 x 16 torus"));
    for (size_t i = 0; i < 8; i++) {
        char t[48];
        snprintf(t, sizeof t, "<title>chip %u</title>", chips[i]);
        CU_ASSERT_PTR_NOT_NULL(strstr(page, t));
    }
    /* every torus link inside the box, both ways, once: the pairs one apart along x in a row
     * and 16 apart along y — 6 + 4 pairs, 20 links */
    size_t expected = 0;
    for (size_t i = 0; i < 8; i++)
        for (size_t j = 0; j < 8; j++) {
            unsigned a = chips[i], b = chips[j];
            bool x_nb = a / 16 == b / 16 && (a + 1 == b || b + 1 == a);
            bool y_nb = a % 16 == b % 16 && (a + 16 == b || b + 16 == a);
            if (!x_nb && !y_nb)
                continue;
            char name[48];
            snprintf(name, sizeof name, "chip%u->chip%u", a, b);
            expected++;
            double avg = -1, avg2 = -1;
            CU_ASSERT_EQUAL(link_marks(page, name, &avg), 1);
            CU_ASSERT_EQUAL(link_marks(page2, name, &avg2), 1);
            CU_ASSERT(avg > 0); /* every one of them carried something */
            /* a link the run lists: its figure; from the trace alone: the counter's integral
             * over the span, the same bytes within the counter's rounding */
            double want = run_link_avg(r.out, name);
            if (want > 0) {
                CU_ASSERT_DOUBLE_EQUAL(avg, want, 0.0005 + 1e-9);
                CU_ASSERT_DOUBLE_EQUAL(avg2, want, want * 0.005 + 0.001);
            }
        }
    CU_ASSERT_EQUAL(expected, 20);
    size_t marks = 0;
    for (const char *p = page; (p = strstr(p, "class=\"link\"")); p++)
        marks++;
    CU_ASSERT_EQUAL(marks, 20);
    /* the first screen: each chip's computing share is the run's compute utilization */
    const char *c = strstr(page, "</span> computing "); /* the legend's, to 0.1 % */
    const char *u = strstr(r.out, "\"kind\": \"compute\"");
    double pct = -1, util = -2;
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_PTR_NOT_NULL_FATAL(u);
    sscanf(c + 18, "%lf", &pct);
    u = strstr(u, "\"mean_util_pct\":");
    CU_ASSERT_PTR_NOT_NULL_FATAL(u);
    sscanf(u + 16, "%lf", &util);
    CU_ASSERT_DOUBLE_EQUAL(pct, util, 0.051);
    free(page);
    free(page2);
    harness_run_free(&r);
}

TEST(a_run_over_more_than_256_chips_lists_its_links_instead_of_drawing_them)
{
    /* a ring over 300 of 4096 chips: the chips used are too many to draw */
    const char *json = tmp("ring300.json"), *html = tmp("ring300.html");
    FILE *f = fopen(json, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs("{\"step_time_s\": 1, \"links\": [", f);
    for (unsigned i = 0; i < 300; i++)
        fprintf(f, "%s{\"name\": \"chip%u->chip%u\", \"avg_gbps\": 1, \"peak_gbps\": 2}",
                i ? ", " : "", i, i + 1);
    fputs("]}\n", f);
    fclose(f);
    run_ok((const char *const[]){"report", json, "--arch", "tpu-pod", "--set",
                                 "system.topology=ring", "-o", html, NULL});
    char *page = harness_read_file(html, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(page);
    CU_ASSERT_PTR_NOT_NULL(strstr(page, "More than 256 chips used"));
    CU_ASSERT_PTR_NULL(strstr(page, "id=\"chart-links\""));
    free(page);
    /* 200 of them: the chips used, on a circle */
    f = fopen(json, "w");
    fputs("{\"step_time_s\": 1, \"links\": [", f);
    for (unsigned i = 0; i < 200; i++)
        fprintf(f, "%s{\"name\": \"chip%u->chip%u\", \"avg_gbps\": 1, \"peak_gbps\": 2}",
                i ? ", " : "", i, i + 1);
    fputs("]}\n", f);
    fclose(f);
    run_ok((const char *const[]){"report", json, "--arch", "tpu-pod", "--set",
                                 "system.topology=ring", "-o", html, NULL});
    page = harness_read_file(html, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(page);
    CU_ASSERT_PTR_NOT_NULL(strstr(page, "id=\"chart-links\""));
    size_t nodes = 0, marks = 0;
    for (const char *p = page; (p = strstr(p, "class=\"node\"")); p++)
        nodes++;
    for (const char *p = page; (p = strstr(p, "class=\"link\"")); p++)
        marks++;
    CU_ASSERT_EQUAL(nodes, 201);
    CU_ASSERT_EQUAL(marks, 200);
    free(page);
}

/* ---- every input string escaped --------------------------------------------------------------- */

/* s as HTML writes it in text and in a double-quoted attribute (character references). */
static void html_of(const char *s, char *out, size_t n)
{
    size_t k = 0;
    for (; *s && k + 8 < n; s++) {
        const char *r = *s == '&' ? "&amp;" : *s == '<' ? "&lt;" : *s == '>' ? "&gt;"
                      : *s == '"' ? "&quot;" : *s == '\'' ? "&#39;" : NULL;
        if (r)
            k += (size_t)snprintf(out + k, n - k, "%s", r);
        else
            out[k++] = *s;
    }
    out[k] = '\0';
}

static bool in_list(const char *name, size_t n, const char *const *list)
{
    for (; *list; list++)
        if (strlen(*list) == n && !strncmp(*list, name, n))
            return true;
    return false;
}

/* An '&' at p starts a character reference ("&amp;", "&#39;"). */
static bool reference_at(const char *p)
{
    size_t n = p[1] == '#' ? 2 + strspn(p + 2, "0123456789")
                           : 1 + strspn(p + 1, "abcdefghijklmnopqrstuvwxyz");
    return n > 2 && p[n] == ';';
}

/* The page read as a browser tokenizes it (HTML text, tags, double-quoted attributes, raw
 * script and style text): NULL when every tag and attribute is one the report writes and
 * every '<' and '&' of text and attribute values is markup or a reference, so no input
 * string became markup; else where it goes wrong. *json: the first JSON data script's text. */
static const char *page_problem(const char *page, char *json, size_t json_n)
{
    static const char *const tags[] = {
        "!DOCTYPE", "html", "head", "meta", "title", "style", "body", "h1", "h2", "p", "section",
        "div", "span", "svg", "rect", "text", "line", "circle", "polyline", "path", "table", "tr",
        "th", "td", "select", "option", "script", "footer", NULL};
    static const char *const attrs[] = {
        "class", "id", "width", "height", "viewBox", "role", "aria-label", "x", "y", "x1", "y1",
        "x2", "y2", "cx", "cy", "r", "fill", "stroke", "stroke-width", "fill-opacity",
        "text-anchor", "points", "d", "style", "lang", "charset", "type", "value", "html", NULL};
    json[0] = '\0';
    for (const char *p = page; *p;) {
        if (*p == '&' && !reference_at(p))
            return p;
        if (*p == '>')
            return p; /* text never holds a bare '>' (the report writes &gt;) */
        if (*p != '<') {
            p++;
            continue;
        }
        const char *name = ++p;
        if (*p == '/')
            name = ++p;
        size_t n = strspn(p, "!ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789");
        if (!in_list(name, n, tags))
            return name - 1;
        bool closing = name[-1] == '/', raw = !closing && (in_list(name, n, (const char *const[]){
                                                               "script", "style", NULL}));
        bool is_json = false;
        p += n;
        for (;;) { /* attributes: name="value" */
            p += strspn(p, " \n");
            if (*p == '>' || (p[0] == '/' && p[1] == '>'))
                break;
            size_t an = strspn(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-");
            if (!in_list(p, an, attrs))
                return p;
            if (an == 4 && !strncmp(p, "type", 4) && !strncmp(p + an, "=\"application/json\"", 19))
                is_json = true;
            p += an;
            if (*p != '=') /* a bare name (<!DOCTYPE html>) */
                continue;
            if (p[1] != '"')
                return p;
            for (p += 2; *p != '"'; p++)
                if (!*p || *p == '<' || *p == '>' || (*p == '&' && !reference_at(p)))
                    return p;
            p++;
            if (*p != ' ' && *p != '>' && *p != '/' && *p != '\n')
                return p; /* a quote that ended a value early */
        }
        p += *p == '/' ? 2 : 1;
        if (raw) { /* script and style: raw text to their end tag, no '<' in JSON data */
            const char *end = strstr(p, n == 6 ? "</script>" : "</style>");
            if (!end)
                return p;
            if (is_json) {
                if (memchr(p, '<', (size_t)(end - p)) || memchr(p, '>', (size_t)(end - p)))
                    return p;
                if (!json[0])
                    snprintf(json, json_n, "%.*s", (int)(end - p), p);
            }
            p = end;
        }
    }
    return NULL;
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs(text, f);
    fclose(f);
}

/* One report of inputs as args (NULL-terminated), checked: clean, and the page's text. */
static char *hostile_report(const char *const *args, const char *html, char *json, size_t json_n)
{
    run_ok(args);
    char *page = harness_read_file(html, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(page);
    const char *bad = page_problem(page, json, json_n);
    if (bad)
        fprintf(stderr, "report: markup from an input at: %.120s\n", bad);
    CU_ASSERT_PTR_NULL(bad);
    CU_ASSERT_PTR_NULL(strstr(page, "<img"));
    CU_ASSERT_PTR_NULL(strstr(page, "onerror=\""));
    return page;
}

static void expect_in(const char *page, const char *before, const char *text, const char *after)
{
    char want[1024];
    snprintf(want, sizeof want, "%s%s%s", before, text, after);
    if (!strstr(page, want))
        fprintf(stderr, "report: the page lacks '%s'\n", want);
    CU_ASSERT_PTR_NOT_NULL(strstr(page, want));
}

TEST(every_input_string_reaches_the_page_escaped_for_its_context)
{
    /* each payload in every input field: names of the trace's processes, threads (unit kinds),
     * kernels and communication kinds; the run's memory roles, comm kinds, unit kinds, link
     * names, kernel names, collective op; a sweep's keys and values; the architecture's name
     * (--set name=), the title and the inputs' file names */
    static const char *const payloads[] = {
        "</title></rect></svg><img src=x onerror=alert(1)>", "\"'&<>",
        "</script><script>alert(1)</script><!--"};
    for (size_t pi = 0; pi < sizeof payloads / sizeof payloads[0]; pi++) {
        const char *P = payloads[pi];
        char unit[256];
        snprintf(unit, sizeof unit, "core0.%s", P); /* a thread of unit kind P */
        json_t *js = json_string(P), *ju = json_string(unit);
        char *jp = json_dumps(js, JSON_ENCODE_ANY), /* P as a JSON string, quotes included */
            *jt = json_dumps(ju, JSON_ENCODE_ANY);
        json_decref(js);
        json_decref(ju);
        char e[512], text[8192];
        html_of(P, e, sizeof e);
        /* file names with quotes and markup characters ('/' cannot be in one) */
        const char *trace = tmp("t\"'&<>.json"), *run = tmp("run\"'&<>.json"),
                   *coll = tmp("coll\"'&<>.json"), *sw = tmp("s\"'&<>.jsonl"),
                   *html = tmp("hostile.html");
        snprintf(text, sizeof text,
                 "{\"traceEvents\": [\n"
                 "{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": 0, \"args\": {\"name\": %s}},\n"
                 "{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": 1, \"args\": {\"name\": \"chip 1\"}},\n"
                 "{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": 0, \"tid\": 1, \"args\": {\"name\": \"core0.mxu\"}},\n"
                 "{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": 0, \"tid\": 2, \"args\": {\"name\": \"kernels\"}},\n"
                 "{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": 0, \"tid\": 3, \"args\": {\"name\": %s}},\n"
                 "{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": 1, \"tid\": 1, \"args\": {\"name\": \"core0.mxu\"}},\n"
                 "{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": 1, \"tid\": 2, \"args\": {\"name\": \"comm\"}},\n"
                 "{\"ph\": \"X\", \"name\": \"matmul\", \"cat\": \"mxu\", \"pid\": 0, \"tid\": 1, \"ts\": 0, \"dur\": 10},\n"
                 "{\"ph\": \"X\", \"name\": %s, \"cat\": \"kernel\", \"pid\": 0, \"tid\": 2, \"ts\": 0, \"dur\": 10, \"args\": {\"flops\": 1e6, \"bytes\": 1e4}},\n"
                 "{\"ph\": \"X\", \"name\": \"op\", \"cat\": \"vpu\", \"pid\": 0, \"tid\": 3, \"ts\": 2, \"dur\": 3},\n"
                 "{\"ph\": \"X\", \"name\": \"matmul\", \"cat\": \"mxu\", \"pid\": 1, \"tid\": 1, \"ts\": 0, \"dur\": 5},\n"
                 "{\"ph\": \"X\", \"name\": %s, \"cat\": \"comm\", \"pid\": 1, \"tid\": 2, \"ts\": 5, \"dur\": 5, \"args\": {\"kind\": %s}}\n"
                 "]}\n",
                 jp, jt, jp, jp, jp);
        write_text(trace, text);
        snprintf(text, sizeof text,
                 "{\"step_time_s\": 1, \"arch\": %s,\n"
                 " \"memory\": {\"weights_bytes\": 1e9, %.*s_bytes\": 2e9, \"peak_bytes\": 3e9,"
                 " \"hbm_bytes\": 8e9},\n"
                 " \"comm\": [{\"kind\": %s, \"total_s\": 0.1, \"exposed_s\": 0.05}],\n"
                 " \"units\": [{\"kind\": %s, \"min_util_pct\": 1, \"mean_util_pct\": 2,"
                 " \"max_util_pct\": 3}],\n"
                 " \"links\": [{\"name\": \"chip0#\\\"'&<>->chip1\", \"avg_gbps\": 1,"
                 " \"peak_gbps\": 2}],\n"
                 " \"kernels\": [{\"name\": %s, \"chip\": 0, \"core\": 0, \"cycles\": 100}]}\n",
                 jp, (int)strlen(jp) - 1, jp, jp, jp, jp);
        write_text(run, text);
        snprintf(text, sizeof text,
                 "{\"op\": %s, \"algo\": %s, \"chips\": 2, \"rows\": [{\"bytes\": 1024, "
                 "\"busbw_gbps\": 1, \"time_us\": 1}, {\"bytes\": 2048, \"busbw_gbps\": 2, "
                 "\"time_us\": 1}]}\n", jp, jp);
        write_text(coll, text);
        snprintf(text, sizeof text,
                 "{\"point\": 0, \"status\": %s, \"params\": {%s: 1}, \"metrics\": {%s: 2}}\n"
                 "{\"point\": 1, \"status\": %s, \"params\": {%s: 2}, \"metrics\": {%s: 1}}\n",
                 jp, jp, jp, jp, jp, jp);
        write_text(sw, text);
        char set[600], json[4096];
        snprintf(set, sizeof set, "name=%s", P);
        /* the run and the sweep */
        char *page = hostile_report((const char *const[]){"report", run, sw, "--arch", "tiny",
                                                          "--set", set, "--title", P, "-o",
                                                          html, NULL},
                                    html, json, sizeof json);
        expect_in(page, "<title>", e, "</title>");          /* the page's title */
        expect_in(page, "arch: ", e, "</p>");               /* the architecture's name */
        expect_in(page, "/run&quot;&#39;&amp;&lt;&gt;.json", "", " sweep: "); /* a path */
        expect_in(page, "<title>", e, ": 1.86 GiB</title>"); /* memory role (2e9 B) */
        expect_in(page, "<title>weights: ", "953.67 MiB", "</title>"); /* a normal role */
        expect_in(page, "class=\"lbl\">", e, "</text>");    /* comm and unit kinds */
        expect_in(page, "<tr><td>", e, "</td>");            /* the run's kernel */
        expect_in(page, "<title>chip0#&quot;&#39;&amp;&lt;&gt;-&gt;chip1", "", ": ");
        /* the sweep's data parses back to the same keys */
        json_error_t je;
        json_t *rows = json_loads(json, 0, &je);
        CU_ASSERT_TRUE(json_is_array(rows));
        json_t *r0 = json_array_get(rows, 0);
        CU_ASSERT_PTR_NOT_NULL(json_object_get(json_object_get(r0, "params"), P));
        const char *status = json_string_value(json_object_get(r0, "status"));
        CU_ASSERT_STRING_EQUAL(status ? status : "", P);
        json_decref(rows);
        free(page);
        /* the trace alone: its names on the timeline, utilization, roofline, kernels */
        page = hostile_report((const char *const[]){"report", trace, "--arch", "tiny", "--set",
                                                    set, "-o", html, NULL},
                              html, json, sizeof json);
        expect_in(page, "class=\"lbl\">", e, "</text>");       /* chip 0's row */
        expect_in(page, "<title>", e, " compute from 0 s</title>"); /* timeline */
        expect_in(page, "class=\"lbl\">chip 1", "", "</text>"); /* a normal name */
        expect_in(page, "<title>chip 1 compute from ", "0 s", "</title>");
        snprintf(text, sizeof text, "%s %s: ", e, e); /* chip P's unit P, per chip */
        expect_in(page, "<title>", text, "");
        expect_in(page, "<tr><td>", e, "</td>");               /* the kernel table */
        expect_in(page, "<title>", e, ": 100 FLOP/byte");      /* roofline point */
        expect_in(page, "Ceilings of ", e, ", each kernel");   /* the roofline's arch */
        free(page);
        /* a collective's JSON: its op and algorithm on the first screen */
        page = hostile_report((const char *const[]){"report", coll, "-o", html, NULL}, html,
                              json, sizeof json);
        free(page);
        free(jp);
        free(jt);
    }
}

/* ---- the memory chart ------------------------------------------------------------------------- */

/* The n-th "<rect x=.. y=.. width=.." of the chart id in page (its x and width); false when
 * there is none. */
static bool chart_rect(const char *page, const char *id, int n, double *x, double *w)
{
    char key[64];
    snprintf(key, sizeof key, "id=\"%s\"", id);
    const char *p = strstr(page, key), *end = p ? strstr(p, "</svg>") : NULL;
    for (int k = 0; p && (p = strstr(p + 1, "<rect ")) && p < end; k++)
        if (k == n)
            return sscanf(p, "<rect x=\"%lf\" y=\"%*d\" width=\"%lf\"", x, w) == 2;
    return false;
}

TEST(the_memory_chart_stacks_the_parts_to_their_sum_on_the_capacitys_scale)
{
    /* a run using 24.75 of 32 GiB in six parts; total_bytes and peak_bytes are their sum, not
     * parts. The chart's scale: (960 - 40) px for the largest of capacity and total, 32 GiB */
    const double G = 1073741824.0;
    const double part[] = {4, 4, 8, 6, 2, 0.75}; /* GiB */
    const char *json = tmp("mem.json"), *html = tmp("mem.html");
    FILE *f = fopen(json, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fprintf(f, "{\"step_time_s\": 1, \"memory\": {\"params_bytes\": %.0f, \"grads_bytes\": %.0f, "
               "\"optstate_bytes\": %.0f, \"activations_bytes\": %.0f, \"buffers_bytes\": %.0f, "
               "\"workspace_bytes\": %.0f, \"total_bytes\": %.0f, \"peak_bytes\": %.0f, "
               "\"hbm_bytes\": %.0f, \"stage\": 0, \"fits\": true}}\n",
            part[0] * G, part[1] * G, part[2] * G, part[3] * G, part[4] * G, part[5] * G,
            24.75 * G, 24.75 * G, 32 * G);
    fclose(f);
    run_ok((const char *const[]){"report", json, "-o", html, NULL});
    char *page = harness_read_file(html, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(page);
    double x, w, sum = 0, end = 20;
    int n = 0;
    for (; chart_rect(page, "chart-memory", n, &x, &w); n++) {
        CU_ASSERT_DOUBLE_EQUAL(x, end, 0.011); /* each part where the one before ends */
        if (n < 6)
            CU_ASSERT_DOUBLE_EQUAL(w, part[n] / 32 * 920, 0.006); /* 4 GiB: 115 px */
        sum += w, end = x + w;
    }
    CU_ASSERT_EQUAL(n, 6); /* the parts, and no seventh for the total */
    CU_ASSERT_DOUBLE_EQUAL(sum, 24.75 / 32 * 920, 0.03); /* 711.5625 px: 77.3 % of 920 */
    /* the capacity line at 20 + 920, the bar well inside it */
    CU_ASSERT_PTR_NOT_NULL(strstr(page, "<line x1=\"940.00\" y1=\"4\" x2=\"940.00\""));
    CU_ASSERT(end < 940);
    CU_ASSERT_PTR_NOT_NULL(strstr(page, ">total 24.75 GiB (77.3 % of capacity)</text>"));
    CU_ASSERT_PTR_NULL(strstr(page, "<title>total:"));
    free(page);
}

/* ---- the energy section ------------------------------------------------------------------------ */

TEST(the_energy_section_draws_one_steps_joules_by_part_and_is_left_out_without_energy)
{
    /* two steps of 4 J: 3 J of MACs and 1 J of HBM, so a step's 1.5 J and 0.5 J, drawn 3/4 and
     * 1/4 of the 960 px chart */
    const char *json = tmp("energy.json"), *html = tmp("energy.html");
    write_text(json, "{\"step_time_s\": 1, \"steps\": 2, \"energy\": {\"total_j\": 4, "
                     "\"per_step_j\": 2, \"avg_w_per_chip\": 250, \"peak_w_per_chip\": 400, "
                     "\"tflops_per_w\": 0.5, \"j_per_token\": 0.001, \"parts_j\": {\"mac\": 3, "
                     "\"vector\": 0, \"hbm\": 1}}}\n");
    run_ok((const char *const[]){"report", json, "-o", html, NULL});
    char *page = harness_read_file(html, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(page);
    double x, w;
    CU_ASSERT_TRUE(chart_rect(page, "chart-energy", 0, &x, &w));
    CU_ASSERT_DOUBLE_EQUAL(x, 0, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(w, 720, 0.006);
    CU_ASSERT_TRUE(chart_rect(page, "chart-energy", 1, &x, &w));
    CU_ASSERT_DOUBLE_EQUAL(x, 720, 0.006);
    CU_ASSERT_DOUBLE_EQUAL(w, 240, 0.006);
    CU_ASSERT_FALSE(chart_rect(page, "chart-energy", 2, &x, &w)); /* no bar for 0 J */
    CU_ASSERT_PTR_NOT_NULL(strstr(page, "<title>mac: 1.50 J (75.0 %)</title>"));
    CU_ASSERT_PTR_NOT_NULL(strstr(page, "<title>hbm: 500 mJ (25.0 %)</title>"));
    CU_ASSERT_PTR_NOT_NULL(strstr(page, "<div class=\"v\">2 J</div><div class=\"l\">energy per step"));
    CU_ASSERT_PTR_NOT_NULL(strstr(page, "<div class=\"v\">250 W</div>"));
    CU_ASSERT_PTR_NOT_NULL(strstr(page, "<div class=\"v\">1 mJ</div><div class=\"l\">energy per token"));
    free(page);
    /* a run that models no energy has no energy section (nothing to apologize for) */
    write_text(json, "{\"step_time_s\": 1}\n");
    run_ok((const char *const[]){"report", json, "-o", html, NULL});
    page = harness_read_file(html, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(page);
    CU_ASSERT_PTR_NULL(strstr(page, "id=\"energy\""));
    free(page);
}

/* ---- two runs compared ------------------------------------------------------------------------- */

/* The row of figure `path` in the comparison table: its A and B values, its difference text. */
static bool compare_row(const char *page, const char *path, double *a, double *b, char *rel,
                        size_t n)
{
    char key[96];
    snprintf(key, sizeof key, "<tr data-figure=\"%s\" data-a=\"", path);
    const char *p = strstr(page, key);
    if (!p || sscanf(p + strlen(key), "%lf\" data-b=\"%lf\"", a, b) != 2)
        return false;
    const char *end = strstr(p, "</tr>"), *last = NULL;
    for (const char *q = p; (q = strstr(q + 1, "<td>")) && q < end;)
        last = q;
    if (!last)
        return false;
    snprintf(rel, n, "%.*s", (int)(strstr(last, "</td>") - last - 4), last + 4);
    return true;
}

TEST(two_runs_are_compared_side_by_side_with_their_differences_and_one_scale)
{
    /* A: a 2 s step (1.5 s compute, 0.5 s exposed); B: 2.5 s (1.5, 0.5, 0.5 s bubble), on
     * another mesh; the chart's scale is the longer step's: (960 - 170 - 10) px for 2.5 s */
    const char *a = tmp("a.json"), *b = tmp("b.json"), *html = tmp("cmp.html");
    write_text(a, "{\"model\": \"m\", \"chips\": 8, \"mesh\": {\"dp\": 8, \"tp\": 1, \"pp\": 1}, "
                  "\"step_time_s\": 2, \"tokens_per_s\": 1000, \"time\": {\"compute_s\": 1.5, "
                  "\"exposed_comm_s\": 0.5, \"bubble_s\": 0, \"idle_s\": 0}}\n");
    write_text(b, "{\"model\": \"m\", \"chips\": 8, \"mesh\": {\"dp\": 2, \"tp\": 1, \"pp\": 4}, "
                  "\"step_time_s\": 2.5, \"tokens_per_s\": 800, \"time\": {\"compute_s\": 1.5, "
                  "\"exposed_comm_s\": 0.5, \"bubble_s\": 0.5, \"idle_s\": 0}}\n");
    run_ok((const char *const[]){"report", a, b, "-o", html, NULL});
    char *page = harness_read_file(html, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(page);
    double va, vb;
    char rel[64];
    CU_ASSERT_TRUE(compare_row(page, "step_time_s", &va, &vb, rel, sizeof rel));
    CU_ASSERT_DOUBLE_EQUAL(va, 2, 0);
    CU_ASSERT_DOUBLE_EQUAL(vb, 2.5, 0);
    CU_ASSERT_STRING_EQUAL(rel, "+25.0 %");
    CU_ASSERT_TRUE(compare_row(page, "tokens_per_s", &va, &vb, rel, sizeof rel));
    CU_ASSERT_STRING_EQUAL(rel, "-20.0 %");
    CU_ASSERT_TRUE(compare_row(page, "time/bubble_s", &va, &vb, rel, sizeof rel));
    CU_ASSERT_STRING_EQUAL(rel, "&mdash;"); /* from 0: no ratio */
    CU_ASSERT_FALSE(compare_row(page, "mfu_pct", &va, &vb, rel, sizeof rel)); /* in neither */
    /* the configurations: only the mesh differs */
    CU_ASSERT_PTR_NOT_NULL(strstr(page, "<tr class=\"diff\"><td>mesh</td><td>dp 8 x tp 1 x pp 1</td>"
                                        "<td>dp 2 x tp 1 x pp 4</td></tr>"));
    CU_ASSERT_PTR_NOT_NULL(strstr(page, "<tr><td>chips</td><td>8</td><td>8</td></tr>"));
    /* the bars: A's 1.5 s and 0.5 s, B's 1.5, 0.5 and 0.5 s at 312 px per second */
    const double want[][2] = {{170, 468}, {638, 156}, {170, 468}, {638, 156}, {794, 156}};
    double x, w;
    for (int k = 0; k < 5; k++) {
        CU_ASSERT_TRUE(chart_rect(page, "chart-compare", k, &x, &w));
        CU_ASSERT_DOUBLE_EQUAL(x, want[k][0], 0.006);
        CU_ASSERT_DOUBLE_EQUAL(w, want[k][1], 0.006);
    }
    CU_ASSERT_FALSE(chart_rect(page, "chart-compare", 5, &x, &w));
    free(page);
    /* a third run, or a second trace for one run, is refused naming it */
    harness_run r = harness_npusim("report", a, b, a, "-o", html, NULL);
    CU_ASSERT_EQUAL(r.exit_status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "a third run"));
    harness_run_free(&r);
}

TEST(a_two_run_comparison_with_both_traces_renders_in_chromium_on_one_time_scale)
{
    if (!chromium()) {
        CU_FAIL("no Chromium: scripts/setup.sh installs Debian's chromium (or set NPUSIM_CHROMIUM)");
        return;
    }
    /* gpt-tiny on 8 chips, data parallel against tp 4 x dp 2 */
    const char *ta = tmp("ta.json.gz"), *tb = tmp("tb.json.gz"), *html = tmp("cmp2.html");
    char ja[300], jb[300];
    snprintf(ja, sizeof ja, "%s", tmp("ja.json"));
    snprintf(jb, sizeof jb, "%s", tmp("jb.json"));
    const char *cfgs[2][4] = {{"--dp", "8", ta, ja}, {"--dp", "2", tb, jb}};
    for (int k = 0; k < 2; k++) {
        harness_run r = harness_npusim("run", "--arch", "a100-80g", "--model", "gpt-tiny",
                                       "--batch", "16", cfgs[k][0], cfgs[k][1], "--tp",
                                       k ? "4" : "1", "--trace", cfgs[k][2], "--json", NULL);
        CU_ASSERT_EQUAL_FATAL(r.exit_status, 0);
        write_text(cfgs[k][3], r.out);
        harness_run_free(&r);
    }
    run_ok((const char *const[]){"report", ja, ta, jb, tb, "-o", html, NULL});
    char *page = harness_read_file(html, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(page);
    /* both timelines end at the longer step's span: the same label at their right ends */
    const char *t1 = strstr(page, "id=\"chart-timeline-a\""), *t2 = strstr(page, "id=\"chart-timeline-b\"");
    CU_ASSERT_PTR_NOT_NULL_FATAL(t1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t2);
    const char *e1 = strstr(t1, "text-anchor=\"end\">"), *e2 = strstr(t2, "text-anchor=\"end\">");
    CU_ASSERT_PTR_NOT_NULL_FATAL(e1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e2);
    CU_ASSERT_EQUAL(strncmp(e1, e2, 40), 0);
    char *copy = checked_copy(page);
    const char *check = tmp("check2.html");
    write_text(check, copy);
    free(copy);
    free(page);
    char url[400];
    snprintf(url, sizeof url, "file://%s", check);
    const char *dom_path = tmp("dom2.html");
    CU_ASSERT_EQUAL(browse("--dump-dom", url, dom_path), 0);
    char *dom = harness_read_file(dom_path, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(dom);
    CU_ASSERT_PTR_NOT_NULL(strstr(dom, "ERRORS 0"));
    static const char *const charts[] = {"chart-compare", "chart-timeline-a", "chart-timeline-b",
                                         "chart-timeline"};
    for (size_t i = 0; i < sizeof charts / sizeof charts[0]; i++)
        CU_ASSERT_TRUE(chart_ok(dom, charts[i]));
    free(dom);
}

/* ---- the communication chart ------------------------------------------------------------------ */

TEST(the_communication_chart_labels_exposed_and_overlapped_time_inside_the_chart)
{
    /* the run's figures per kind: total_s in flight, exposed_s of it with compute idle, the
     * rest overlapped (docs/run.md): tp 3.016164 s of which 2.414 s exposed, 602.164 ms
     * overlapped; dp 48 ms, 6 ms exposed, 42 ms overlapped, 1.5 MiB sent by each chip that
     * takes part; pp all exposed */
    const char *json = tmp("comm.json"), *html = tmp("comm.html");
    write_text(json, "{\"step_time_s\": 4, \"comm\": ["
                     "{\"kind\": \"tp\", \"total_s\": 3.016164, \"exposed_s\": 2.414},"
                     "{\"kind\": \"dp\", \"total_s\": 0.048, \"exposed_s\": 0.006, "
                     "\"bytes_per_chip\": 1572864},"
                     "{\"kind\": \"pp\", \"total_s\": 0.009, \"exposed_s\": 0.009}]}\n");
    run_ok((const char *const[]){"report", json, "-o", html, NULL});
    char *page = harness_read_file(html, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(page);
    static const char *const want[] = {"exposed 2.414 s, overlapped 602.164 ms",
                                       "exposed 6.000 ms, overlapped 42.000 ms, 1.50 MiB sent a chip",
                                       "exposed 9.000 ms, overlapped 0 s"};
    static const double exposed[] = {2.414, 0.006, 0.009}, total[] = {3.016164, 0.048, 0.009};
    for (int i = 0; i < 3; i++) {
        double x0, w_exp, x1, w_over, tx = -1;
        CU_ASSERT_TRUE_FATAL(chart_rect(page, "chart-comm", 2 * i, &x0, &w_exp));
        CU_ASSERT_TRUE_FATAL(chart_rect(page, "chart-comm", 2 * i + 1, &x1, &w_over));
        /* the bar: exposed then overlapped, in the figures' proportion */
        CU_ASSERT_DOUBLE_EQUAL(x1, x0 + w_exp, 0.011);
        CU_ASSERT_DOUBLE_EQUAL(w_exp / (w_exp + w_over), exposed[i] / total[i], 0.0005);
        /* the label: after the bar, its text ending inside the 960 px chart (an 11 px label's
         * characters are at most 7 px wide) */
        char text[128];
        snprintf(text, sizeof text, "class=\"lbl\">%s</text>", want[i]);
        const char *t = strstr(page, text);
        if (!t)
            fprintf(stderr, "report: no label '%s'\n", want[i]);
        CU_ASSERT_PTR_NOT_NULL_FATAL(t);
        const char *open = t;
        while (open > page && strncmp(open, "<text x=\"", 9))
            open--;
        sscanf(open, "<text x=\"%lf\"", &tx);
        CU_ASSERT(tx >= x1 + w_over);
        CU_ASSERT(tx + 7.0 * (double)strlen(want[i]) <= 960);
    }
    CU_ASSERT_PTR_NULL(strstr(page, " of 602")); /* exposed "of" overlapped */
    free(page);
}

/* ---- the kernel table ------------------------------------------------------------------------- */

TEST(the_kernel_table_lists_kernels_not_collectives_with_counts_in_thousands)
{
    /* 1,234 matmul slices of 1 us and 56 of softmax on a chip's kernel track, and 3 all_reduce
     * collectives of 100 us: the table has the two kernels, matmul 1,234.000 us of 1,290 us */
    const char *trace = tmp("kern.json"), *html = tmp("kern.html");
    FILE *f = fopen(trace, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs("{\"traceEvents\": [\n"
          "{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": 0, \"args\": {\"name\": \"chip 0\"}},\n"
          "{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": 0, \"tid\": 1, \"args\": {\"name\": \"kernels\"}},\n"
          "{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": 0, \"tid\": 2, \"args\": {\"name\": \"tp\"}}",
          f);
    for (int i = 0; i < 1290; i++)
        fprintf(f, ",\n{\"ph\": \"X\", \"name\": \"%s\", \"cat\": \"kernel\", \"pid\": 0, \"tid\": 1, "
                   "\"ts\": %d, \"dur\": 1}", i < 1234 ? "matmul" : "softmax", 2 * i);
    for (int i = 0; i < 3; i++)
        fprintf(f, ",\n{\"ph\": \"X\", \"name\": \"all_reduce\", \"cat\": \"collective\", \"pid\": 0, "
                   "\"tid\": 2, \"ts\": %d, \"dur\": 100, \"args\": {\"kind\": \"tp\"}}", 200 * i);
    fputs("\n]}\n", f);
    fclose(f);
    run_ok((const char *const[]){"report", trace, "-o", html, NULL});
    char *page = harness_read_file(html, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(page);
    const char *table = strstr(page, "<section id=\"kernels\">");
    CU_ASSERT_PTR_NOT_NULL_FATAL(table);
    CU_ASSERT_PTR_NOT_NULL(strstr(table, "<tr><td>matmul</td><td>1,234</td><td>1.234 ms</td>"
                                         "<td>95.7 %</td></tr>")); /* 1234 / 1290 */
    CU_ASSERT_PTR_NOT_NULL(strstr(table, "<tr><td>softmax</td><td>56</td><td>56.000 us</td>"
                                         "<td>4.3 %</td></tr>"));
    CU_ASSERT_PTR_NULL(strstr(table, "all_reduce"));
    /* the first screen's top kernels: the same two, the collective in the communication */
    const char *top = strstr(page, "Top kernels by time, over every chip:");
    CU_ASSERT_PTR_NOT_NULL_FATAL(top);
    CU_ASSERT_EQUAL(strncmp(top, "Top kernels by time, over every chip: matmul 95.7 %, softmax "
                                 "4.3 % (", 67), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(page, "<text x=\"0\" y=\"24\" class=\"lbl\">tp</text>"));
    free(page);
}

/* ---- the roofline ----------------------------------------------------------------------------- */

TEST(the_roofline_puts_each_kernel_under_the_ceiling_of_the_cores_it_ran_on)
{
    /* tiny: a core is a 4 x 4 array at 1 GHz, 2 FLOP a MAC: 32 GFLOP/s; 2 cores a chip: 64.
     * matmul on the chip's track (npusim run's: every core of the chip): 1e6 FLOP in 20 us,
     * 50 GFLOP/s, over one core's roof but 78.1 % of the chip's; gemm on core 0's track
     * (npusim sim's): 1e5 FLOP in 8 us, 12.5 GFLOP/s, 39.1 % of one core's */
    const char *trace = tmp("roof.json"), *html = tmp("roof.html");
    write_text(trace,
               "{\"traceEvents\": [\n"
               "{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": 0, \"args\": {\"name\": \"chip 0\"}},\n"
               "{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": 0, \"tid\": 1, \"args\": {\"name\": \"kernels\"}},\n"
               "{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": 0, \"tid\": 2, \"args\": {\"name\": \"core0 kernels\"}},\n"
               "{\"ph\": \"X\", \"name\": \"matmul\", \"cat\": \"kernel\", \"pid\": 0, \"tid\": 1, \"ts\": 0, \"dur\": 20, \"args\": {\"flops\": 1e6, \"bytes\": 1e3}},\n"
               "{\"ph\": \"X\", \"name\": \"gemm\", \"cat\": \"kernel\", \"pid\": 0, \"tid\": 2, \"ts\": 30, \"dur\": 8, \"args\": {\"flops\": 1e5, \"bytes\": 1e3}}\n"
               "]}\n");
    run_ok((const char *const[]){"report", trace, "--arch", "tiny", "-o", html, NULL});
    char *page = harness_read_file(html, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(page);
    CU_ASSERT_PTR_NOT_NULL(strstr(page, "one core 32 G FLOP/s (bf16); the chip's 2 cores 64 G FLOP/s"));
    CU_ASSERT_PTR_NOT_NULL(strstr(page, "<title>matmul: 1e+03 FLOP/byte, 50 G FLOP/s (78.1 % of "
                                        "the chip's peak)</title>"));
    CU_ASSERT_PTR_NOT_NULL(strstr(page, "<title>gemm: 100 FLOP/byte, 12.5 G FLOP/s (39.1 % of "
                                        "the core's peak)</title>"));
    /* each point under its own roof: the roof's flat part (its last point) is above it (SVG's
     * y grows downward) */
    double roof[2] = {-1, -1};
    const char *p = page;
    for (int r = 0; r < 2; r++) {
        p = strstr(p, "<polyline class=\"roof\"");
        CU_ASSERT_PTR_NOT_NULL_FATAL(p);
        const char *end = strstr(p, "\">");
        const char *last = end;
        while (last > p && last[-1] != ' ')
            last--;
        sscanf(strchr(last, ','), ",%lf", &roof[r]);
        p = end;
    }
    double cy_mm = -1, cy_gemm = -1;
    const char *m = strstr(page, "<title>matmul:"), *g = strstr(page, "<title>gemm:");
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    while (strncmp(m, "<circle", 7))
        m--;
    while (strncmp(g, "<circle", 7))
        g--;
    sscanf(strstr(m, "cy=\""), "cy=\"%lf", &cy_mm);
    sscanf(strstr(g, "cy=\""), "cy=\"%lf", &cy_gemm);
    CU_ASSERT(roof[0] > roof[1]);           /* one core's roof under the chip's */
    CU_ASSERT(cy_mm < roof[0]);             /* matmul above one core's roof ... */
    CU_ASSERT(cy_mm > roof[1]);             /* ... under the chip's */
    CU_ASSERT(cy_gemm > roof[0]);           /* gemm under one core's */
    free(page);
}
