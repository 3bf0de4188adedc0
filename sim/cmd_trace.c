/* cmd_trace.c — `npusim trace check|stats T.json[.gz]`: a trace's checks against the Chrome
 * trace-event format (traces/trace_db.h) and where its time went (traces/trace_stats.h).
 * JSON names are documented in docs/traces.md and kept stable. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cli_trace.h"
#include "csv.h"
#include "human.h"
#include "trace_db.h"
#include "trace_stats.h"

const char cmd_trace_usage[] =
    "usage: npusim trace check T.json[.gz] [--max-events N] [--max-event-size S] [--json]\n"
    "       npusim trace stats T.json[.gz] [--top N] [--path N] [--max-events N]\n"
    "                          [--max-event-size S] [--json | --csv]\n"
    "\n"
    "  check           the trace against the Chrome trace-event format: required fields,\n"
    "                  durations >= 0, flows matched and bound to slices, counters with\n"
    "                  numbers, every process and thread named, slices nested (exit 2 when a\n"
    "                  check fails)\n"
    "  stats           busy and utilization per track and per unit kind, top kernels, exposed\n"
    "                  communication per kind, the critical path, bubbles per pipeline stage\n"
    "  --top N         kernels to list (default 10)\n"
    "  --path N        steps of the critical path to list (default 20)\n"
    "  --json          print the figures as JSON (names in docs/traces.md)\n"
    "  --csv           print the per-track table as CSV (process, pid, track, slices,\n"
    "                  busy_ps, wait_ps, util_pct)\n"
    CLI_TRACE_READ_USAGE;

/* Loads path within the limits of o, with progress on a terminal. */
static np_status trace_load(const char *path, trace_read_opts o, tdb **db, np_err *err)
{
    cli_progress prog;
    cli_progress_init(&prog, "reading the trace");
    o.progress = cli_progress_fn;
    o.progress_ctx = &prog;
    np_status st = tdb_load_with(path, &o, db, err);
    cli_progress_end(&prog);
    return st;
}

static np_status trace_check(const char *path, const trace_read_opts *o, bool json, np_err *err)
{
    tdb *db;
    if (trace_load(path, *o, &db, err) != NP_OK)
        return err->status;
    uint64_t n = db->problems;
    if (json) {
        json_t *probs = json_array();
        for (uint64_t i = 0; probs && i < n && i < TDB_PROBLEMS_KEPT; i++)
            json_array_append_new(probs, json_string(db->problem[i]));
        char fb[1024];
        cli_print_json(json_pack("{s:s, s:b, s:I, s:I, s:I, s:I, s:I, s:o, s:b, s:I}", "trace",
                                 cli_json_safe(path, fb, sizeof fb),
                                 "valid", n == 0, "events", (json_int_t)db->events, "slices",
                                 (json_int_t)db->n_slices, "flows", (json_int_t)db->n_flows,
                                 "counters", (json_int_t)db->n_counters, "problems",
                                 (json_int_t)n, "messages", probs, "truncated", db->truncated,
                                 "events_left_out", (json_int_t)db->events_left_out),
                       err);
    } else {
        char e[NP_HUMAN_MAX], sl[NP_HUMAN_MAX], fl[NP_HUMAN_MAX];
        printf("%s: %s events, %s slices, %s flows, %zu counter series, %zu processes, %zu "
               "threads: %s\n",
               path, np_human_count(db->events, e, sizeof e),
               np_human_count(db->n_slices, sl, sizeof sl),
               np_human_count(db->n_flows, fl, sizeof fl), db->n_counters, db->n_processes,
               db->n_threads, n ? "INVALID" : "valid");
        if (db->truncated)
            printf("  cut at its size budget by the writer (--trace-max-bytes): %s later events "
                   "left out\n", np_human_count(db->events_left_out, e, sizeof e));
        for (uint64_t i = 0; i < n && i < TDB_PROBLEMS_KEPT; i++)
            printf("  %s\n", db->problem[i]);
        if (n > TDB_PROBLEMS_KEPT)
            printf("  ... and %s more\n",
                   np_human_count(n - TDB_PROBLEMS_KEPT, e, sizeof e));
    }
    tdb_free(db);
    if (n)
        return np_err_at(err, NP_ERR_FORMAT, path, 0, 0, "%" PRIu64 " problem%s in the trace",
                         n, n == 1 ? "" : "s");
    return NP_OK;
}

static void print_stats(const tdb *db, const tstats *s, size_t top, size_t max_path)
{
    char a[NP_HUMAN_MAX], b[NP_HUMAN_MAX], c[NP_HUMAN_MAX];
    printf("span %s, %s slices on %zu tracks\n", np_human_ps(s->span_ps, a, sizeof a),
           np_human_count(db->n_slices, b, sizeof b), s->n_tracks);
    if (s->n_units) {
        printf("\n%-12s %6s %10s %10s %10s\n", "unit", "chips", "min util", "mean util",
               "max util");
        for (size_t i = 0; i < s->n_units; i++)
            printf("%-12s %6u %9.2f%% %9.2f%% %9.2f%%\n", s->units[i].kind, s->units[i].chips,
                   s->units[i].min_pct, s->units[i].mean_pct, s->units[i].max_pct);
    }
    printf("\n%-28s %-20s %8s %12s %12s %8s\n", "process", "track", "slices", "busy", "wait",
           "util");
    for (size_t i = 0; i < s->n_tracks; i++) {
        const tstats_track *t = &s->tracks[i];
        const char *pn = tdb_str(db, db->processes[t->process].name);
        np_human_ps(t->busy_ps, a, sizeof a), np_human_ps(t->wait_ps, b, sizeof b);
        printf("%-28s %-20s %8s %*s %*s %7.2f%%\n", pn ? pn : "?", t->name,
               np_human_count(t->slices, c, sizeof c), np_human_width(a, 12), a,
               np_human_width(b, 12), b, t->util_pct);
    }
    if (s->n_kernels) {
        uint64_t total = 0;
        for (size_t i = 0; i < s->n_kernels; i++)
            total += s->kernels[i].total_ps;
        printf("\n%-32s %8s %12s %8s\n", "kernel", "count", "total", "share");
        for (size_t i = 0; i < s->n_kernels && i < top; i++)
            printf("%-32s %8s %*s %7.2f%%\n", tdb_str(db, s->kernels[i].name),
                   np_human_count(s->kernels[i].count, b, sizeof b),
                   np_human_width(np_human_ps(s->kernels[i].total_ps, a, sizeof a), 12), a,
                   total ? 100.0 * (double)s->kernels[i].total_ps / (double)total : 0);
    }
    if (s->n_comm) {
        printf("\n%-12s %6s %14s %14s %10s   (means over the chips)\n", "comm", "chips",
               "total", "exposed", "exposed");
        for (size_t i = 0; i < s->n_comm; i++) {
            const tstats_comm *m = &s->comm[i];
            uint64_t n = m->chips ? m->chips : 1;
            np_human_ps(m->total_ps / n, a, sizeof a), np_human_ps(m->exposed_ps / n, b, sizeof b);
            printf("%-12s %6u %*s %*s %9.2f%%\n",
                   m->kind == TDB_NONE ? "comm" : tdb_str(db, m->kind), m->chips,
                   np_human_width(a, 14), a, np_human_width(b, 14), b,
                   m->total_ps ? 100.0 * (double)m->exposed_ps / (double)m->total_ps : 0);
        }
    }
    if (s->n_stages) {
        printf("\n%-6s %6s %6s %14s %14s %10s %8s\n", "stage", "chips", "mbs", "busy", "idle",
               "bubble", "ratio");
        for (size_t i = 0; i < s->n_stages; i++) {
            const tstats_stage *g = &s->stages[i];
            uint64_t n = g->chips ? g->chips : 1;
            np_human_ps(g->busy_ps / n, a, sizeof a), np_human_ps(g->idle_ps / n, b, sizeof b);
            printf("%-6d %6u %6u %*s %*s %9.2f%% %8.4f\n", g->stage, g->chips, g->microbatches,
                   np_human_width(a, 14), a, np_human_width(b, 14), b,
                   g->bubble_pct, g->bubble_ratio);
        }
        printf("bubble: %.2f%% of the step ((p-1)/(m+p-1) form), %.4f of the busy time "
               "((p-1)/m form)\n", s->bubble_pct, s->bubble_ratio);
    }
    printf("\ncritical path: %s over %s steps, %s of it idle\n",
           np_human_ps(s->path_ps, a, sizeof a), np_human_count(s->n_path, c, sizeof c),
           np_human_ps(s->path_idle_ps, b, sizeof b));
    for (size_t i = 0; i < s->n_path_names && i < top; i++) { /* where its time goes */
        const tstats_kernel *k = &s->path_names[i];
        np_human_ps(k->total_ps, a, sizeof a);
        printf("  %-32s %*s %6.2f%%  in %s step%s\n", tdb_str(db, k->name), np_human_width(a, 12),
               a, s->path_ps ? 100.0 * (double)k->total_ps / (double)s->path_ps : 0,
               np_human_count(k->count, c, sizeof c), k->count == 1 ? "" : "s");
    }
    if (s->n_path_names > top)
        printf("  ... %s more names (--top N)\n",
               np_human_count(s->n_path_names - top, a, sizeof a));
    if (s->n_path && max_path)
        printf("the first steps:\n");
    for (size_t i = 0; i < s->n_path && i < max_path; i++) {
        const tdb_slice *sl = &db->slices[s->path[i].slice];
        char label[200];
        tdb_thread_label(db, &db->threads[sl->thread], label, sizeof label);
        np_human_ps(sl->start_ps, a, sizeof a), np_human_ps(sl->end_ps - sl->start_ps, b, sizeof b);
        printf("  %*s  %-32s %-20s %*s", np_human_width(a, 12), a, label, tdb_str(db, sl->name),
               np_human_width(b, 10), b);
        if (s->path[i].idle_before_ps)
            printf("  (after %s idle)", np_human_ps(s->path[i].idle_before_ps, c, sizeof c));
        putchar('\n');
    }
    if (s->n_path > max_path)
        printf("  ... %s more steps (--path N)\n",
               np_human_count(s->n_path - max_path, a, sizeof a));
}

static void print_csv(const tdb *db, const tstats *s)
{
    static const char *const head[] = {"process", "pid", "track", "slices", "busy_ps",
                                       "wait_ps", "util_pct"};
    csv_row(stdout, head, 7);
    for (size_t i = 0; i < s->n_tracks; i++) {
        const tstats_track *t = &s->tracks[i];
        char pid[16], n[24], busy[24], wait[24], util[32];
        snprintf(pid, sizeof pid, "%u", db->processes[t->process].pid);
        snprintf(n, sizeof n, "%" PRIu64, t->slices);
        snprintf(busy, sizeof busy, "%" PRIu64, t->busy_ps);
        snprintf(wait, sizeof wait, "%" PRIu64, t->wait_ps);
        snprintf(util, sizeof util, "%.6f", t->util_pct);
        const char *row[] = {tdb_str(db, db->processes[t->process].name), pid, t->name, n, busy,
                             wait, util};
        csv_row(stdout, row, 7);
    }
}

static np_status trace_stats(const char *path, const trace_read_opts *o, bool json, bool csv,
                             size_t top, size_t max_path, np_err *err)
{
    tdb *db;
    if (trace_load(path, *o, &db, err) != NP_OK)
        return err->status;
    tstats s;
    np_status st = tstats_compute(db, &s, err);
    if (st == NP_OK) {
        if (json) {
            json_t *j = tstats_json(db, &s, top, max_path);
            char fb[1024];
            if (j)
                json_object_set_new(j, "trace", json_string(cli_json_safe(path, fb, sizeof fb)));
            st = cli_print_json(j, err);
        } else if (csv) {
            print_csv(db, &s);
        } else {
            if (db->problems)
                printf("(the trace has %" PRIu64 " format problems: npusim trace check %s)\n",
                       db->problems, path);
            if (db->truncated) {
                char lo[NP_HUMAN_MAX];
                printf("(the trace was cut at its size budget, --trace-max-bytes: %s later "
                       "events left out; the figures are of what it holds)\n",
                       np_human_count(db->events_left_out, lo, sizeof lo));
            }
            print_stats(db, &s, top, max_path);
        }
        tstats_free(&s);
    }
    tdb_free(db);
    return st;
}

np_status cmd_trace(int argc, char **argv, np_err *err)
{
    static const struct option longopts[] = {{"json", no_argument, NULL, 'j'},
                                             {"top", required_argument, NULL, 't'},
                                             {"path", required_argument, NULL, 'p'},
                                             {"csv", no_argument, NULL, 'c'},
                                             {"help", no_argument, NULL, 'h'},
                                             CLI_TRACE_READ_LONGOPTS,
                                             {0}};
    bool json = false, csv = false;
    trace_read_opts ro = {0};
    uint64_t top = 10, max_path = 20;
    int c;
    cli_getopt_reset();
    while ((c = cli_getopt(argc, argv, "h", longopts, err)) != -1) {
        if (cli_trace_read_is_flag(c)) {
            if (cli_trace_read_flag(&ro, c, optarg, err) != NP_OK)
                return err->status;
            continue;
        }
        switch (c) {
        case 'j': json = true; break;
        case 'c': csv = true; break;
        case 't':
            if (cli_parse_u64("--top", optarg, 0, 1000000, &top, err) != NP_OK)
                return err->status;
            break;
        case 'p':
            if (cli_parse_u64("--path", optarg, 0, 100000000, &max_path, err) != NP_OK)
                return err->status;
            break;
        case 'h': cli_print_usage(cli_find("trace")); return NP_OK;
        default: return err->status;
        }
    }
    if (optind >= argc)
        return np_err_set(err, NP_ERR_USAGE, "missing the action (check or stats)");
    const char *action = argv[optind];
    if (strcmp(action, "check") && strcmp(action, "stats"))
        return np_err_set(err, NP_ERR_USAGE, "unknown action '%s' (known: check, stats)", action);
    if (optind + 1 >= argc)
        return np_err_set(err, NP_ERR_USAGE, "missing the trace file (T.json or T.json.gz)");
    if (optind + 2 < argc)
        return np_err_set(err, NP_ERR_USAGE, "one trace at a time ('%s' is extra)",
                          argv[optind + 2]);
    const char *path = argv[optind + 1];
    if (json && csv)
        return np_err_set(err, NP_ERR_USAGE, "--json and --csv: one output format at a time");
    if (!strcmp(action, "check"))
        return trace_check(path, &ro, json, err);
    return trace_stats(path, &ro, json, csv, (size_t)top, (size_t)max_path, err);
}
