/* cmd_validate.c — `npusim validate`: every published measurement of validation/ run through
 * the command that computes its figure, ours beside theirs with the signed error per row and
 * each suite's statistics. Rows print as they finish (progress on a terminal's standard
 * error); the exit status is 0 whatever the errors (it measures, it does not judge), 2 for a
 * bad data file or flag. The work is validate.h's; this file parses options and prints
 * (docs/validation.md). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "wallclock.h"
#include "csv.h"
#include "human.h"
#include "suggest.h"
#include "validate.h"
#include "validate_md.h"

#define VAL_MAX_PICKS 64

enum { VO_SUITE = 0x7701, VO_ROW, VO_QUICK, VO_LIST, VO_CSV, VO_MD, VO_DIR, VO_CACHE, VO_RESULTS, VO_JSON };

const char cmd_validate_usage[] =
    "usage: npusim validate [--suite NAME ...] [--row ID ...] [--quick] [--list]\n"
    "                       [--json | --csv | --markdown] [--dir DIR] [--kernel-cache FILE]\n"
    "                       [-j N] [--results R.json [R.json ...]]\n"
    "\n"
    "Runs every published measurement of the validation folder (one file per source, with\n"
    "the exact configuration its authors ran) through the library of the command that\n"
    "computes the figure — run for a training step, kernel for a kernel, collective for a\n"
    "collective — and prints ours beside the published figure, the signed error per row\n"
    "(100 x (ours - published) / published) and each suite's mean, median and worst error.\n"
    "Exit status 0 whatever the errors; 2 for a bad data file or flag. The whole run takes\n"
    "about two hours of one core (every training row simulates a step of thousands of\n"
    "GPUs): -j N runs N rows at once.\n"
    "\n"
    "  --suite NAME      only this suite (repeatable): kernels-a100, nccl, megatron-sc21,\n"
    "                    megatron-core-h100\n"
    "  --row ID          only this row (repeatable), as --list names it: FILE#N\n"
    "  --quick           only the quick subset (a few GEMMs and memory-bound ops, the\n"
    "                    8-GPU nccl rows): what tests/test_validate.c runs\n"
    "  --list            list the suites, their files and rows; run nothing\n"
    "  --json            one object at the end: every row's exact figures, each suite's\n"
    "                    statistics and its files' provenance (docs/validation.md)\n"
    "  --csv             one CSV row per row as it finishes: suite, id, file, line,\n"
    "                    configuration, figure, published, ours, error_pct, ran, why, sim_s\n"
    "  --markdown        the tables and sources of docs/validation.md (scripts/\n"
    "                    validation_doc.sh puts them there)\n"
    "  --dir DIR         the data folder (default: $NPUSIM_VALIDATION_DIR, else the source\n"
    "                    tree's validation/)\n"
    "  --kernel-cache F  training rows keep their kernel timings in file F (as npusim run's):\n"
    "                    a second run of the same architecture simulates no kernel again\n"
    "  -j, --jobs N      run up to N rows at once, each in a process of its own (default 1);\n"
    "                    the output is the same, in the same order (not with --kernel-cache)\n"
    "  --results R.json  run nothing: take each row's figures from R, the --json output of an\n"
    "                    earlier run of any rows (the arguments after it are more such files;\n"
    "                    the last file holding a row wins); a picked row none holds is shown\n"
    "                    as not run. A long run in parts (a --row per job), printed together.\n";

typedef enum { OUT_TEXT, OUT_JSON, OUT_CSV, OUT_MD } out_mode;

typedef struct val_cli {
    const char *suites[VAL_MAX_PICKS], *rows[VAL_MAX_PICKS];
    size_t n_suites, n_rows;
    bool quick, list;
    out_mode mode;
    const char *dir, *kernel_cache;
    const char **results; /* argc entries: every --results file and the arguments after it */
    uint64_t jobs;
    size_t n_results;
} val_cli;

/* ---- selection ------------------------------------------------------------------------------ */

static bool suite_picked(const val_cli *c, const val_suite *s)
{
    if (!c->n_suites)
        return true;
    for (size_t i = 0; i < c->n_suites; i++)
        if (strcmp(c->suites[i], s->name) == 0)
            return true;
    return false;
}

static bool row_picked(const val_cli *c, const val_file *f, const val_row *r)
{
    if (!suite_picked(c, f->suite) || (c->quick && !val_row_is_quick(f, r)))
        return false;
    if (!c->n_rows)
        return true;
    char id[96];
    val_row_id(f, r, id, sizeof id);
    for (size_t i = 0; i < c->n_rows; i++)
        if (strcmp(c->rows[i], id) == 0)
            return true;
    return false;
}

/* Every --suite names a suite and every --row a row of the set. */
static np_status check_picks(const val_cli *c, const val_set *set, np_err *err)
{
    const char *names[VAL_MAX_PICKS];
    for (size_t i = 0; i < val_n_suites && i < VAL_MAX_PICKS; i++)
        names[i] = val_suites[i].name;
    for (size_t i = 0; i < c->n_suites; i++)
        if (!val_suite_find(c->suites[i])) {
            const char *g = np_suggest(c->suites[i], names, val_n_suites, 2);
            return g ? np_err_set(err, NP_ERR_USAGE, "--suite: unknown suite '%s'; did you "
                                  "mean '%s'?", c->suites[i], g)
                     : np_err_set(err, NP_ERR_USAGE, "--suite: unknown suite '%s' (suites: "
                                  "kernels-a100, nccl, megatron-sc21, megatron-core-h100)",
                                  c->suites[i]);
        }
    for (size_t i = 0; i < c->n_rows; i++) {
        bool found = false;
        char id[96];
        for (size_t f = 0; f < set->n_files && !found; f++)
            for (size_t r = 0; r < set->files[f].n_rows && !found; r++)
                found = strcmp(val_row_id(&set->files[f], &set->files[f].rows[r], id,
                                          sizeof id), c->rows[i]) == 0;
        if (!found)
            return np_err_set(err, NP_ERR_USAGE, "--row: no row '%s' (`npusim validate "
                              "--list` names them: FILE#N)", c->rows[i]);
    }
    return NP_OK;
}

/* ---- progress on a terminal ----------------------------------------------------------------- */

typedef struct vc_progress {
    bool on;
    int len;
    char head[160]; /* "[3/131] megatron-sc21 narayanan-sc21-table1#3" */
    double t0;
} vc_progress;

static void vc_progress_show(vc_progress *p, const char *what, double done)
{
    if (!p->on)
        return;
    int n = what ? fprintf(stderr, "\r%s: %s %3.0f %% (%.0f s)", p->head, what, 100.0 * done,
                           np_wall_s() - p->t0)
                 : fprintf(stderr, "\r%s", p->head);
    for (int i = n; i < p->len; i++)
        fputc(' ', stderr);
    p->len = n;
    fflush(stderr);
}

static void vc_progress_fn(void *ctx, const char *what, double done)
{
    vc_progress_show(ctx, what, done);
}

static void vc_progress_clear(vc_progress *p)
{
    if (p->on && p->len) {
        fprintf(stderr, "\r%*s\r", p->len, "");
        fflush(stderr);
        p->len = 0;
    }
}

/* ---- text ----------------------------------------------------------------------------------- */

/* One line of a suite's table, columns aligned on a terminal (UTF-8 units count as one). */
static void text_line(const char *id, const char *cfg, const char *pub, const char *ours,
                      const char *e)
{
    printf("  %-30s %-*s %*s %*s %*s\n", id, np_human_width(cfg, 46), cfg,
           np_human_width(pub, 15), pub, np_human_width(ours, 15), ours, np_human_width(e, 9),
           e);
}

static void text_suite_head(const val_suite *s, const val_set *set, const val_cli *c)
{
    size_t files = 0, rows = 0;
    for (size_t f = 0; f < set->n_files; f++) {
        if (set->files[f].suite != s)
            continue;
        size_t n = 0;
        for (size_t r = 0; r < set->files[f].n_rows; r++)
            n += row_picked(c, &set->files[f], &set->files[f].rows[r]);
        files += n > 0;
        rows += n;
    }
    printf("\n%s — %s\n  %zu row%s from %zu file%s\n", s->name, s->what, rows,
           rows == 1 ? "" : "s", files, files == 1 ? "" : "s");
    text_line("row", "configuration", "published", "ours", "error");
}

static void text_row(const val_file *f, const val_row *r, const val_result *res)
{
    char id[96], cfg[256], pub[64], ours[64], e[32];
    const char *fig = val_row_figure(f, r);
    val_row_id(f, r, id, sizeof id);
    val_row_config(f, r, cfg, sizeof cfg);
    val_value(fig, val_row_published(f, r), pub, sizeof pub);
    if (!res) {
        text_line(id, cfg, pub, "", "");
    } else if (!res->ran) {
        text_line(id, cfg, pub, "cannot run", "");
        printf("      %s\n", res->why);
    } else {
        text_line(id, cfg, pub, val_value(fig, res->ours, ours, sizeof ours),
                  val_err_text(res->err_pct, e, sizeof e));
    }
    fflush(stdout);
}

/* ---- JSON ----------------------------------------------------------------------------------- */

static json_t *jstr_or_null(const char *s)
{
    char buf[4096];
    return s ? json_string(cli_json_safe(s, buf, sizeof buf)) : json_null();
}

static json_t *json_file(const val_file *f)
{
    json_t *j = json_object(), *a = json_array();
    json_object_set_new(j, "id", json_string(f->id));
    json_object_set_new(j, "path", jstr_or_null(f->path));
    json_object_set_new(j, "rows", json_integer((json_int_t)f->n_rows));
    const char *keys[] = {"title", "source", "where", "machine", "config", "command", "arch",
                          "commit", "notes"};
    const char *vals[] = {f->title, f->source, f->where, f->machine, f->config, f->command,
                          f->arch, f->commit, f->notes};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
        json_object_set_new(j, keys[i], jstr_or_null(vals[i]));
    for (int i = 0; i < f->n_assumed; i++)
        json_array_append_new(a, jstr_or_null(f->assumed[i]));
    json_object_set_new(j, "assumed", a);
    return j;
}

static json_t *json_row(const val_file *f, const val_row *r, const val_result *res)
{
    char id[96], cfg[256];
    json_t *j = json_object();
    json_object_set_new(j, "id", json_string(val_row_id(f, r, id, sizeof id)));
    json_object_set_new(j, "file", json_string(f->id));
    json_object_set_new(j, "line", json_integer(r->line));
    json_object_set_new(j, "config", jstr_or_null(val_row_config(f, r, cfg, sizeof cfg)));
    json_object_set_new(j, "figure", json_string(val_row_figure(f, r)));
    json_object_set_new(j, "published", json_real(val_row_published(f, r)));
    json_object_set_new(j, "quick", json_boolean(val_row_is_quick(f, r)));
    if (!res)
        return j;
    json_object_set_new(j, "ran", json_boolean(res->ran));
    json_object_set_new(j, "ours", res->ran ? json_real(res->ours) : json_null());
    json_object_set_new(j, "error_pct", res->ran ? json_real(res->err_pct) : json_null());
    json_object_set_new(j, "why", res->ran ? json_null() : jstr_or_null(res->why));
    json_object_set_new(j, "sim_s", res->ran ? json_real(res->sim_s) : json_null());
    json_object_set_new(j, "wall_s", json_real(res->wall_s));
    return j;
}

static json_t *json_stats(const val_stats *s, const char *worst_id)
{
    json_t *j = json_object();
    json_object_set_new(j, "rows", json_integer((json_int_t)s->rows));
    json_object_set_new(j, "ran", json_integer((json_int_t)s->ran));
    json_object_set_new(j, "cannot_run", json_integer((json_int_t)(s->rows - s->ran)));
    if (s->ran) {
        json_object_set_new(j, "mean_abs_error_pct", json_real(s->mean_abs_pct));
        json_object_set_new(j, "median_abs_error_pct", json_real(s->median_abs_pct));
        json_object_set_new(j, "worst_error_pct", json_real(s->worst_pct));
        json_object_set_new(j, "worst_row", json_string(worst_id));
        json_object_set_new(j, "within_10_pct", json_real(s->within10_pct));
        json_object_set_new(j, "within_20_pct", json_real(s->within20_pct));
    }
    return j;
}

/* ---- the run -------------------------------------------------------------------------------- */

/* The picked rows of suite s as (file, row) pairs, in file then row order. */
typedef struct picked {
    const val_file *f;
    size_t r;
} picked;

static size_t pick(const val_cli *c, const val_set *set, const val_suite *s, picked *out)
{
    size_t n = 0;
    for (size_t f = 0; f < set->n_files; f++)
        for (size_t r = 0; r < set->files[f].n_rows; r++)
            if (set->files[f].suite == s && row_picked(c, &set->files[f], &set->files[f].rows[r]))
                out[n++] = (picked){&set->files[f], r};
    return n;
}

/* Statistics of the rows of p[0..n) (results res) that belong to file f (NULL: all). */
static void stats_of(const picked *p, const val_result *res, size_t n, const val_file *f,
                     val_stats *st, char *worst_id, size_t idn)
{
    val_result *sub = malloc((n ? n : 1) * sizeof *sub);
    size_t *map = malloc((n ? n : 1) * sizeof *map), m = 0;
    for (size_t i = 0; sub && map && i < n; i++)
        if (!f || p[i].f == f)
            map[m] = i, sub[m++] = res[i];
    val_stats_of(sub, m, st);
    worst_id[0] = '\0';
    if (st->ran)
        val_row_id(p[map[st->worst]].f, &p[map[st->worst]].f->rows[p[map[st->worst]].r],
                   worst_id, idn);
    free(sub);
    free(map);
}

static void print_stats(const val_cli *c, const val_suite *s, const picked *p,
                        const val_result *res, size_t n, json_t *jsuite)
{
    val_stats st;
    char wid[96], text[512];
    stats_of(p, res, n, NULL, &st, wid, sizeof wid);
    if (jsuite)
        json_object_set_new(jsuite, "stats", json_stats(&st, wid));
    if (c->mode == OUT_TEXT)
        printf("  %s: %s\n", s->name, val_stats_text(&st, wid, text, sizeof text));
    else if (c->mode == OUT_MD)
        printf("\n**%s**: %s.\n", s->name, val_stats_text(&st, wid, text, sizeof text));
    json_t *per_file = jsuite ? json_object() : NULL;
    size_t files = 0;
    for (size_t i = 0; i < n; i++)
        files += i == 0 || p[i].f != p[i - 1].f;
    for (size_t i = 0; files > 1 && i < n; i++) {
        if (i && p[i].f == p[i - 1].f)
            continue;
        stats_of(p, res, n, p[i].f, &st, wid, sizeof wid);
        if (per_file)
            json_object_set_new(per_file, p[i].f->id, json_stats(&st, wid));
        if (c->mode == OUT_TEXT)
            printf("    %s: %s\n", p[i].f->id, val_stats_text(&st, wid, text, sizeof text));
        else if (c->mode == OUT_MD)
            printf("- %s: %s.\n", p[i].f->id, val_stats_text(&st, wid, text, sizeof text));
    }
    if (per_file)
        json_object_set_new(jsuite, "files_stats", per_file);
}

static const char *const csv_head[] = {"suite", "id", "file", "line", "config", "figure",
                                       "published", "ours", "error_pct", "ran", "why", "sim_s"};

static void csv_result(const val_file *f, const val_row *r, const val_result *res)
{
    char id[96], cfg[256], line[16], pub[32], ours[32] = "", e[32] = "", sim[32] = "";
    snprintf(line, sizeof line, "%d", r->line);
    snprintf(pub, sizeof pub, "%.17g", val_row_published(f, r));
    if (res && res->ran) {
        snprintf(ours, sizeof ours, "%.17g", res->ours);
        snprintf(e, sizeof e, "%.17g", res->err_pct);
        snprintf(sim, sizeof sim, "%.17g", res->sim_s);
    }
    const char *fields[] = {f->suite->name, val_row_id(f, r, id, sizeof id), f->id, line,
                            val_row_config(f, r, cfg, sizeof cfg), val_row_figure(f, r), pub,
                            ours, e, !res ? "" : res->ran ? "true" : "false",
                            res && !res->ran ? res->why : "", sim};
    csv_row(stdout, fields, sizeof fields / sizeof *fields);
    fflush(stdout);
}

static np_status vc_run(const val_cli *c, const val_set *set, np_err *err)
{
    size_t total = 0, done = 0, ran_all = 0, absent = 0;
    for (size_t f = 0; f < set->n_files; f++)
        for (size_t r = 0; r < set->files[f].n_rows; r++)
            total += row_picked(c, &set->files[f], &set->files[f].rows[r]);
    picked *p = malloc((total ? total : 1) * sizeof *p);
    val_result *res = malloc((total ? total : 1) * sizeof *res);
    json_t *doc = c->mode == OUT_JSON ? json_object() : NULL, *jsuites = json_array();
    if (!p || !res || !jsuites) {
        free(p);
        free(res);
        json_decref(doc);
        json_decref(jsuites);
        return np_err_set(err, NP_ERR_NOMEM, "out of memory");
    }
    np_status st = NP_OK;
    /* --results: every row's figures as an earlier run left them */
    size_t n_set = val_set_rows(set);
    val_result *prev = c->n_results ? calloc(n_set ? n_set : 1, sizeof *prev) : NULL;
    bool *have = c->n_results ? calloc(n_set ? n_set : 1, sizeof *have) : NULL;
    if (c->n_results && (!prev || !have))
        st = np_err_set(err, NP_ERR_NOMEM, "out of memory");
    for (size_t i = 0; st == NP_OK && i < c->n_results; i++)
        st = val_results_load(set, c->results[i], prev, have, err);
    /* -j N: every picked row in the order the loop below takes them, run by a pool */
    size_t *order = NULL, n_order = 0, k_next = 0;
    val_pool *pool = NULL;
    val_opts o = {.kernel_cache = c->kernel_cache, .progress = vc_progress_fn};
    if (st == NP_OK && c->jobs > 1 && !prev) {
        if (!(order = malloc((total ? total : 1) * sizeof *order)))
            st = np_err_set(err, NP_ERR_NOMEM, "out of memory");
        for (size_t si = 0; st == NP_OK && si < val_n_suites; si++) {
            size_t n = pick(c, set, &val_suites[si], p);
            for (size_t i = 0; i < n; i++)
                order[n_order++] = val_row_index(set, p[i].f, p[i].r);
        }
        if (st == NP_OK)
            st = val_pool_create(set, order, n_order, (int)c->jobs, &o, &pool, err);
    }
    vc_progress prog = {.on = isatty(2) != 0 && !prev};
    o.progress_ctx = &prog;
    double t_all = np_wall_s();
    if (st == NP_OK && c->mode == OUT_TEXT)
        printf("# npusim validate: %zu row%s (error = 100 x (ours - published) / published)\n",
               total, total == 1 ? "" : "s");
    else if (st == NP_OK && c->mode == OUT_CSV)
        csv_row(stdout, csv_head, sizeof csv_head / sizeof *csv_head);
    for (size_t si = 0; si < val_n_suites && st == NP_OK; si++) {
        const val_suite *s = &val_suites[si];
        size_t n = pick(c, set, s, p);
        if (!n)
            continue;
        json_t *jsuite = NULL, *jrows = NULL, *jfiles = NULL;
        if (doc) {
            jsuite = json_object();
            json_object_set_new(jsuite, "name", json_string(s->name));
            json_object_set_new(jsuite, "what", json_string(s->what));
            json_object_set_new(jsuite, "files", jfiles = json_array());
            json_object_set_new(jsuite, "rows", jrows = json_array());
            json_array_append_new(jsuites, jsuite);
        }
        if (c->mode == OUT_TEXT)
            text_suite_head(s, set, c);
        else if (c->mode == OUT_MD)
            val_md_suite_head(stdout, s);
        double t_suite = np_wall_s();
        for (size_t i = 0; i < n && st == NP_OK; i++) {
            const val_file *f = p[i].f;
            const val_row *r = &f->rows[p[i].r];
            char id[96];
            snprintf(prog.head, sizeof prog.head, "[%zu/%zu] %s", done + 1, total,
                     val_row_id(f, r, id, sizeof id));
            prog.t0 = np_wall_s();
            vc_progress_show(&prog, NULL, 0);
            if (prev) {
                size_t at = val_row_index(set, f, p[i].r);
                if (have[at]) {
                    res[i] = prev[at];
                } else {
                    absent++;
                    res[i] = (val_result){.published = val_row_published(f, r)};
                    snprintf(res[i].why, sizeof res[i].why, "not run: no result in the "
                             "--results files");
                }
            } else if (pool) {
                snprintf(prog.head, sizeof prog.head, "[%zu/%zu] %s (%zu rows running)",
                         done + 1, total, val_row_id(f, r, id, sizeof id),
                         val_pool_running(pool));
                vc_progress_show(&prog, NULL, 0);
                st = val_pool_get(pool, k_next++, &res[i], err);
            } else {
                st = val_run_row(f, p[i].r, &o, &res[i], err);
            }
            vc_progress_clear(&prog);
            if (st != NP_OK)
                break;
            done++;
            ran_all += res[i].ran;
            if (c->mode == OUT_TEXT)
                text_row(f, r, &res[i]);
            else if (c->mode == OUT_CSV)
                csv_result(f, r, &res[i]);
            else if (c->mode == OUT_MD)
                val_md_row(stdout, f, r, &res[i]);
            else
                json_array_append_new(jrows, json_row(f, r, &res[i]));
            if (jfiles && (i == 0 || p[i - 1].f != f))
                json_array_append_new(jfiles, json_file(f));
        }
        if (st != NP_OK)
            break;
        print_stats(c, s, p, res, n, jsuite);
        if (c->mode == OUT_TEXT)
            printf("  %s: %.1f s wall%s\n", s->name, np_wall_s() - t_suite,
                   prev ? " (the rows' figures from --results, nothing run)" : "");
        if (c->mode == OUT_MD) {
            printf("\nSources of %s:\n\n", s->name);
            for (size_t i = 0; i < n; i++)
                if (i == 0 || p[i - 1].f != p[i].f)
                    val_md_sources(stdout, p[i].f);
            printf("\n");
        }
        fflush(stdout);
    }
    if (st == NP_OK && c->mode == OUT_TEXT)
        printf("\n# %zu row%s, %zu ran, %zu cannot run yet%s; %.1f s wall\n", total,
               total == 1 ? "" : "s", ran_all, total - ran_all - absent,
               absent ? ", the others not in the --results files" : "", np_wall_s() - t_all);
    if (st == NP_OK && doc) {
        json_object_set_new(doc, "dir", jstr_or_null(c->dir));
        json_object_set_new(doc, "rows", json_integer((json_int_t)total));
        json_object_set_new(doc, "ran", json_integer((json_int_t)ran_all));
        json_object_set_new(doc, "suites", jsuites);
        json_object_set_new(doc, "wall_s", json_real(np_wall_s() - t_all));
        jsuites = NULL;
        st = cli_print_json(doc, err);
        doc = NULL;
    }
    json_decref(jsuites);
    json_decref(doc);
    val_pool_free(pool);
    free(order);
    free(prev);
    free(have);
    free(p);
    free(res);
    return st;
}

/* ---- --list --------------------------------------------------------------------------------- */

static np_status vc_list(const val_cli *c, const val_set *set, np_err *err)
{
    json_t *doc = c->mode == OUT_JSON ? json_array() : NULL;
    if (c->mode == OUT_CSV)
        csv_row(stdout, csv_head, sizeof csv_head / sizeof *csv_head);
    for (size_t si = 0; si < val_n_suites; si++) {
        const val_suite *s = &val_suites[si];
        if (!suite_picked(c, s))
            continue;
        json_t *js = NULL, *jf = NULL;
        if (doc) {
            js = json_pack("{s:s, s:s}", "name", s->name, "what", s->what);
            json_object_set_new(js, "files", jf = json_array());
            json_array_append_new(doc, js);
        }
        if (c->mode == OUT_TEXT)
            text_suite_head(s, set, c);
        else if (c->mode == OUT_MD)
            val_md_suite_head(stdout, s);
        for (size_t f = 0; f < set->n_files; f++) {
            const val_file *vf = &set->files[f];
            if (vf->suite != s)
                continue;
            json_t *jfile = doc ? json_file(vf) : NULL, *jrows = doc ? json_array() : NULL;
            for (size_t r = 0; r < vf->n_rows; r++) {
                if (!row_picked(c, vf, &vf->rows[r]))
                    continue;
                if (c->mode == OUT_TEXT)
                    text_row(vf, &vf->rows[r], NULL);
                else if (c->mode == OUT_CSV)
                    csv_result(vf, &vf->rows[r], NULL);
                else if (c->mode == OUT_MD)
                    val_md_row(stdout, vf, &vf->rows[r], NULL);
                else
                    json_array_append_new(jrows, json_row(vf, &vf->rows[r], NULL));
            }
            if (jfile) {
                json_object_set_new(jfile, "row_list", jrows);
                json_array_append_new(jf, jfile);
            }
        }
        if (c->mode == OUT_TEXT)
            for (size_t f = 0; f < set->n_files; f++)
                if (set->files[f].suite == s)
                    printf("  file %s (%s, on %s): %s\n", set->files[f].id,
                           set->files[f].path, set->files[f].arch, set->files[f].title);
        if (c->mode == OUT_MD) {
            printf("\nSources of %s:\n\n", s->name);
            for (size_t f = 0; f < set->n_files; f++)
                if (set->files[f].suite == s)
                    val_md_sources(stdout, &set->files[f]);
            printf("\n");
        }
    }
    return doc ? cli_print_json(doc, err) : NP_OK;
}

/* ---- the command ---------------------------------------------------------------------------- */

np_status cmd_validate(int argc, char **argv, np_err *err)
{
    static const struct option longopts[] = {
        {"suite", required_argument, NULL, VO_SUITE}, {"row", required_argument, NULL, VO_ROW},
        {"quick", no_argument, NULL, VO_QUICK},       {"list", no_argument, NULL, VO_LIST},
        {"json", no_argument, NULL, VO_JSON},         {"csv", no_argument, NULL, VO_CSV},
        {"jobs", required_argument, NULL, 'j'},
        {"markdown", no_argument, NULL, VO_MD},       {"dir", required_argument, NULL, VO_DIR},
        {"kernel-cache", required_argument, NULL, VO_CACHE},
        {"results", required_argument, NULL, VO_RESULTS},
        {"help", no_argument, NULL, 'h'},             {0}};
    val_cli c = {.dir = val_default_dir(), .results = calloc((size_t)argc + 1, sizeof(char *)),
                 .jobs = 1};
    if (!c.results)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory");
    int outs = 0, ch;
    np_status st = NP_OK;
    cli_getopt_reset();
    while (st == NP_OK && (ch = cli_getopt(argc, argv, "hj:", longopts, err)) != -1) {
        switch (ch) {
        case VO_SUITE:
        case VO_ROW: {
            size_t *n = ch == VO_SUITE ? &c.n_suites : &c.n_rows;
            if (*n == VAL_MAX_PICKS)
                st = np_err_set(err, NP_ERR_USAGE, "%s: at most %d", ch == VO_SUITE ?
                                "--suite" : "--row", VAL_MAX_PICKS);
            else
                (ch == VO_SUITE ? c.suites : c.rows)[(*n)++] = optarg;
            break;
        }
        case VO_QUICK: c.quick = true; break;
        case VO_LIST: c.list = true; break;
        case VO_JSON: c.mode = OUT_JSON, outs++; break;
        case 'j': st = cli_parse_u64("-j", optarg, 1, 1024, &c.jobs, err); break;
        case VO_CSV: c.mode = OUT_CSV, outs++; break;
        case VO_MD: c.mode = OUT_MD, outs++; break;
        case VO_DIR: c.dir = optarg; break;
        case VO_CACHE: c.kernel_cache = optarg; break;
        case VO_RESULTS: c.results[c.n_results++] = optarg; break;
        case 'h':
            free(c.results);
            cli_print_usage(cli_find("validate"));
            return NP_OK;
        default: st = err->status; break;
        }
    }
    for (; st == NP_OK && optind < argc && c.n_results; optind++) /* --results R1 R2 ... */
        c.results[c.n_results++] = argv[optind];
    if (st == NP_OK && optind < argc)
        st = np_err_set(err, NP_ERR_USAGE, "unexpected argument '%s'", argv[optind]);
    else if (st == NP_OK && c.n_results && (c.list || c.kernel_cache))
        st = np_err_set(err, NP_ERR_USAGE, "--results runs nothing: not with %s",
                        c.list ? "--list" : "--kernel-cache");
    else if (st == NP_OK && c.jobs > 1 && c.kernel_cache)
        st = np_err_set(err, NP_ERR_USAGE, "-j %llu with --kernel-cache: the workers would "
                        "append to one file at once (run with -j 1, or without the cache)",
                        (unsigned long long)c.jobs);
    else if (st == NP_OK && outs > 1)
        st = np_err_set(err, NP_ERR_USAGE, "--json, --csv and --markdown: one output format "
                        "at a time");
    val_set set;
    if (st == NP_OK && (st = val_load_dir(c.dir, &set, err)) == NP_OK) {
        st = check_picks(&c, &set, err);
        if (st == NP_OK)
            st = c.list ? vc_list(&c, &set, err) : vc_run(&c, &set, err);
        val_set_free(&set);
    }
    free(c.results);
    return st;
}
