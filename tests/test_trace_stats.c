/* test_trace_stats.c — `npusim trace stats` (traces/trace_stats.h) against traces built by
 * hand with answers worked out by hand (utilization, exposed communication, the critical
 * path, GPipe's bubble (p-1)/(m+p-1)), and against `npusim sim --json`'s own report of the
 * same run (every unit's busy + stall cycles). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "harness.h"
#include "trace.h"
#include "trace_db.h"
#include "trace_stats.h"

#define NS 1000ull /* ps */

static const char *tmp(const char *name)
{
    static char dir[64], buf[4][256];
    static int k;
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/npusim_tstats_XXXXXX");
        CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
    }
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

static trace_writer *open_trace(const char *path)
{
    trace_writer *w;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(trace_open(path, &w, &e), NP_OK);
    return w;
}

static void named(trace_writer *w, uint32_t pid, uint32_t tid, const char *thread)
{
    char p[32];
    snprintf(p, sizeof p, "chip %u", pid);
    trace_name_process(w, pid, p);
    trace_name_thread(w, pid, tid, thread);
}

/* A slice from a to b ns. */
static void sl(trace_writer *w, uint32_t pid, uint32_t tid, const char *name, const char *cat,
               uint64_t a, uint64_t b, const trace_arg *args, size_t n)
{
    trace_slice(w, pid, tid, name, cat, a * NS, (b - a) * NS, args, n);
}

/* Loads path (which must pass the checks) and computes its statistics. */
static tdb *load(const char *path, tstats *s)
{
    tdb *db;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(tdb_load(path, &db, &e), NP_OK);
    for (uint64_t i = 0; i < db->problems && i < TDB_PROBLEMS_KEPT; i++)
        fprintf(stderr, "%s\n", db->problem[i]);
    CU_ASSERT_EQUAL(db->problems, 0u);
    CU_ASSERT_EQUAL_FATAL(tstats_compute(db, s, &e), NP_OK);
    return db;
}

static const tstats_track *track(const tdb *db, const tstats *s, uint32_t pid, const char *name)
{
    for (size_t i = 0; i < s->n_tracks; i++)
        if (db->processes[s->tracks[i].process].pid == pid && !strcmp(s->tracks[i].name, name))
            return &s->tracks[i];
    CU_FAIL("no such track");
    return &s->tracks[0];
}

TEST(busy_utilization_kernels_and_exposed_communication_of_a_hand_built_trace)
{
    /* chip 0: mxu [0,40) [60,100); dma lanes [0,30) and [20,50), a wait [50,70); comm (dp)
     * [30,70); kernels matmul twice. chip 1: mxu [0,100), comm (dp) [0,10). */
    const char *path = tmp("util.json");
    trace_writer *w = open_trace(path);
    named(w, 0, 1, "core0.mxu");
    named(w, 0, 2, "core0.dma");
    named(w, 0, 3, "core0.dma[1]");
    named(w, 0, 4, "core0.comm");
    named(w, 0, 5, "core0 kernels");
    named(w, 1, 1, "core0.mxu");
    named(w, 1, 4, "core0.comm");
    trace_arg dp = TRACE_ARG_S("kind", "dp");
    sl(w, 0, 1, "mxu.mm", "mxu", 0, 40, NULL, 0);
    sl(w, 0, 1, "mxu.mm", "mxu", 60, 100, NULL, 0);
    sl(w, 0, 2, "dma.copy", "dma", 0, 30, NULL, 0);
    sl(w, 0, 3, "dma.copy", "dma", 20, 50, NULL, 0);
    sl(w, 0, 2, "sem.wait", "wait", 50, 70, NULL, 0);
    sl(w, 0, 4, "comm.send", "comm", 30, 70, &dp, 1);
    sl(w, 0, 5, "matmul", "kernel", 0, 40, NULL, 0);
    sl(w, 0, 5, "matmul", "kernel", 60, 100, NULL, 0);
    sl(w, 0, 5, "softmax", "kernel", 40, 45, NULL, 0);
    sl(w, 1, 1, "mxu.mm", "mxu", 0, 100, NULL, 0);
    sl(w, 1, 4, "comm.recv", "comm", 0, 10, &dp, 1);
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(trace_close(w, &e), NP_OK);
    tstats s;
    tdb *db = load(path, &s);
    CU_ASSERT_EQUAL(s.span_ps, 100 * NS);
    const tstats_track *mxu0 = track(db, &s, 0, "core0.mxu"), *dma0 = track(db, &s, 0, "core0.dma");
    CU_ASSERT_EQUAL(mxu0->busy_ps, 80 * NS);
    CU_ASSERT_DOUBLE_EQUAL(mxu0->util_pct, 80.0, 1e-9);
    CU_ASSERT_EQUAL(dma0->busy_ps, 70 * NS); /* lanes merged: [0,50) and the wait [50,70) */
    CU_ASSERT_EQUAL(dma0->wait_ps, 20 * NS);
    CU_ASSERT_DOUBLE_EQUAL(dma0->util_pct, 50.0, 1e-9);
    CU_ASSERT_EQUAL(dma0->slices, 3u);
    CU_ASSERT_DOUBLE_EQUAL(track(db, &s, 1, "core0.mxu")->util_pct, 100.0, 1e-9);
    bool mxu_seen = false;
    for (size_t i = 0; i < s.n_units; i++)
        if (!strcmp(s.units[i].kind, "mxu")) {
            mxu_seen = true;
            CU_ASSERT_EQUAL(s.units[i].chips, 2u);
            CU_ASSERT_DOUBLE_EQUAL(s.units[i].min_pct, 80.0, 1e-9);
            CU_ASSERT_DOUBLE_EQUAL(s.units[i].mean_pct, 90.0, 1e-9);
            CU_ASSERT_DOUBLE_EQUAL(s.units[i].max_pct, 100.0, 1e-9);
        }
    CU_ASSERT_TRUE(mxu_seen);
    CU_ASSERT_EQUAL_FATAL(s.n_kernels, 2u);
    CU_ASSERT_STRING_EQUAL(tdb_str(db, s.kernels[0].name), "matmul");
    CU_ASSERT_EQUAL(s.kernels[0].count, 2u);
    CU_ASSERT_EQUAL(s.kernels[0].total_ps, 80 * NS);
    CU_ASSERT_EQUAL_FATAL(s.n_comm, 1u);
    CU_ASSERT_STRING_EQUAL(tdb_str(db, s.comm[0].kind), "dp");
    CU_ASSERT_EQUAL(s.comm[0].chips, 2u);
    CU_ASSERT_EQUAL(s.comm[0].total_ps, 50 * NS);   /* 40 + 10 */
    CU_ASSERT_EQUAL(s.comm[0].exposed_ps, 20 * NS); /* [40,60) on chip 0; none on chip 1 */
    CU_ASSERT_EQUAL(s.n_stages, 0u);
    tstats_free(&s);
    tdb_free(db);
}

TEST(the_critical_path_follows_a_message_from_the_chip_that_sent_it)
{
    /* chip 0: mxu A [0,10), then comm send [10,12) -> chip 1: recv [5,20) (posted early),
     * then chip 1 mxu B [20,30). Distractors: chip 1 mxu C [0,3), chip 0 dma D [0,25). The
     * path: A, send, recv, B; 30 ns, no idle step. */
    const char *path = tmp("path.json");
    trace_writer *w = open_trace(path);
    named(w, 0, 1, "core0.mxu");
    named(w, 0, 2, "core0.comm");
    named(w, 0, 3, "core0.dma");
    named(w, 1, 1, "core0.mxu");
    named(w, 1, 2, "core0.comm");
    sl(w, 0, 1, "A", "mxu", 0, 10, NULL, 0);
    sl(w, 0, 2, "send", "comm", 10, 12, NULL, 0);
    trace_flow(w, 's', 9, 0, 2, "msg", "msg", 11 * NS);
    sl(w, 1, 2, "recv", "comm", 5, 20, NULL, 0);
    trace_flow(w, 'f', 9, 1, 2, "msg", "msg", 19 * NS);
    sl(w, 1, 1, "C", "mxu", 0, 3, NULL, 0);
    sl(w, 1, 1, "B", "mxu", 20, 30, NULL, 0);
    sl(w, 0, 3, "D", "dma", 0, 25, NULL, 0);
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(trace_close(w, &e), NP_OK);
    tstats s;
    tdb *db = load(path, &s);
    CU_ASSERT_EQUAL(db->n_flows, 1u);
    const char *want[] = {"A", "send", "recv", "B"};
    CU_ASSERT_EQUAL_FATAL(s.n_path, 4u);
    for (size_t i = 0; i < 4; i++)
        CU_ASSERT_STRING_EQUAL(tdb_str(db, db->slices[s.path[i].slice].name), want[i]);
    CU_ASSERT_EQUAL(s.path_ps, 30 * NS);
    CU_ASSERT_EQUAL(s.path_idle_ps, 0u);
    /* by name, longest first: recv 15 ns, A and B 10 ns each (by name on a tie), send 2 ns */
    static const struct {
        const char *name;
        uint64_t ps;
    } by[] = {{"recv", 15 * NS}, {"A", 10 * NS}, {"B", 10 * NS}, {"send", 2 * NS}};
    CU_ASSERT_EQUAL_FATAL(s.n_path_names, 4u);
    for (size_t i = 0; i < 4; i++) {
        CU_ASSERT_EQUAL(s.path_names[i].count, 1u);
        CU_ASSERT_EQUAL(s.path_names[i].total_ps, by[i].ps);
    }
    CU_ASSERT_STRING_EQUAL(tdb_str(db, s.path_names[0].name), "recv");
    CU_ASSERT_STRING_EQUAL(tdb_str(db, s.path_names[3].name), "send");
    tstats_free(&s);
    tdb_free(db);
}

TEST(gpipe_bubbles_per_stage_are_p_minus_1_over_m_plus_p_minus_1)
{
    /* p = 2 stages on chips 0 and 1, m = 4 micro-batches, forward and backward 1 us each:
     * stage 0 runs F0..F3 in [0,4), B3..B0 in [6,10); stage 1 F in [1,5), B in [5,9). */
    const char *path = tmp("gpipe.json");
    trace_writer *w = open_trace(path);
    named(w, 0, 1, "compute");
    named(w, 1, 1, "compute");
    for (int st = 0; st < 2; st++)
        for (int mb = 0; mb < 4; mb++) {
            trace_arg a[] = {TRACE_ARG_I("stage", st), TRACE_ARG_I("mb", mb)};
            uint64_t f = (uint64_t)(st + mb), b = (uint64_t)(st == 1 ? 5 + (3 - mb) : 6 + (3 - mb));
            sl(w, (uint32_t)st, 1, "F", "compute", f * 1000, f * 1000 + 1000, a, 2);
            sl(w, (uint32_t)st, 1, "B", "compute", b * 1000, b * 1000 + 1000, a, 2);
        }
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(trace_close(w, &e), NP_OK);
    tstats s;
    tdb *db = load(path, &s);
    CU_ASSERT_EQUAL_FATAL(s.n_stages, 2u);
    for (size_t i = 0; i < 2; i++) {
        CU_ASSERT_EQUAL(s.stages[i].stage, (int32_t)i);
        CU_ASSERT_EQUAL(s.stages[i].microbatches, 4u);
        CU_ASSERT_DOUBLE_EQUAL(s.stages[i].bubble_pct, 100.0 * 1 / (4 + 2 - 1), 1e-9);
        CU_ASSERT_DOUBLE_EQUAL(s.stages[i].bubble_ratio, 1.0 / 4, 1e-9);
    }
    CU_ASSERT_DOUBLE_EQUAL(s.bubble_pct, 20.0, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(s.bubble_ratio, 0.25, 1e-9);
    tstats_free(&s);
    tdb_free(db);
}

static json_t *run_json(const char *const *args)
{
    harness_run r = harness_npusim_in(NULL, args);
    if (r.exit_status)
        fprintf(stderr, "npusim %s: %s\n", args[0], r.err);
    CU_ASSERT_EQUAL_FATAL(r.exit_status, 0);
    json_error_t je;
    json_t *j = json_loads(r.out, 0, &je);
    harness_run_free(&r);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    return j;
}

/* npusim sim's report and trace stats of its trace agree on every unit that ran: the trace's
 * busy time is the report's busy + stall cycles, its utilization the busy cycles' share
 * (no contention between units here), with and without the operand scoreboard. */
static void sim_agrees(const char *scoreboard)
{
    const char *elf = tmp("mm.elf"), *t = tmp("mm.json.gz");
    const char *as[] = {"asm", harness_src_path("isa/examples/matmul_db.s"), "-o", elf, "--arch",
                        "tiny", NULL};
    harness_run r = harness_npusim_in(NULL, as);
    CU_ASSERT_EQUAL_FATAL(r.exit_status, 0);
    harness_run_free(&r);
    const char *sim[] = {"sim", "--arch", "tiny", "--set", scoreboard, elf, elf,
                         "--trace", t, "--json", NULL};
    json_t *rep = run_json(sim);
    const char *st[] = {"trace", "stats", t, "--json", NULL};
    json_t *ts = run_json(st);
    double ps_per_cycle = (double)json_integer_value(json_object_get(rep, "total_ps")) /
                          (double)json_integer_value(json_object_get(rep, "total_cycles"));
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(ts, "span_ps")),
                    json_integer_value(json_object_get(rep, "total_ps")));
    size_t i, k, matched = 0;
    json_t *u, *tr;
    json_array_foreach(json_object_get(rep, "units"), i, u) {
        const char *name = json_string_value(json_object_get(u, "name")); /* chipN.coreM.unit */
        unsigned chip;
        char unit[32];
        if (sscanf(name, "chip%u.%31s", &chip, unit) != 2)
            continue;
        double busy = (double)json_integer_value(json_object_get(u, "busy_cycles")),
               stall = (double)json_integer_value(json_object_get(u, "stall_cycles"));
        json_array_foreach(json_object_get(ts, "tracks"), k, tr) {
            if (json_integer_value(json_object_get(tr, "pid")) != chip ||
                strcmp(json_string_value(json_object_get(tr, "track")), unit))
                continue;
            matched++;
            double tb = (double)json_integer_value(json_object_get(tr, "busy_ps")) / ps_per_cycle;
            CU_ASSERT_DOUBLE_EQUAL(tb, busy + stall, 1.0);
            double util = 100.0 * busy /
                          (double)json_integer_value(json_object_get(rep, "total_cycles"));
            CU_ASSERT_DOUBLE_EQUAL(json_real_value(json_object_get(tr, "util_pct")), util, 0.01);
        }
    }
    CU_ASSERT_EQUAL(matched, 4u); /* dma and mxu of two chips */
    json_decref(rep);
    json_decref(ts);
}

TEST(trace_stats_equal_npusim_sims_report_of_the_same_run)
{
    sim_agrees("core.scoreboard=1");
    sim_agrees("core.scoreboard=0");
}

TEST(trace_stats_of_an_isa_collective_count_every_rank_and_expose_all_its_communication)
{
    const char *t = tmp("coll.json.gz");
    const char *coll[] = {"collective", "--op", "all_reduce", "--algo", "ring", "--isa",
                          "--chips", "4", "--min-bytes", "1K", "--max-bytes", "4K", "--trace",
                          t, NULL};
    harness_run r = harness_npusim_in(NULL, coll);
    CU_ASSERT_EQUAL_FATAL(r.exit_status, 0);
    harness_run_free(&r);
    tstats s;
    tdb *db = load(t, &s);
    CU_ASSERT_EQUAL_FATAL(s.n_kernels, 1u);
    CU_ASSERT_EQUAL(s.kernels[0].count, 3u * 4u); /* 3 sizes x 4 ranks */
    CU_ASSERT_EQUAL_FATAL(s.n_comm, 1u);
    CU_ASSERT_EQUAL(s.comm[0].chips, 4u);
    CU_ASSERT_EQUAL(s.comm[0].exposed_ps, s.comm[0].total_ps); /* nothing computes meanwhile */
    /* the ring's critical path crosses chips through messages: more than one chip on it */
    uint32_t first_pid = db->threads[db->slices[s.path[0].slice].thread].pid;
    bool crossed = false;
    for (size_t i = 0; i < s.n_path; i++)
        crossed |= db->threads[db->slices[s.path[i].slice].thread].pid != first_pid;
    CU_ASSERT_TRUE(crossed);
    CU_ASSERT(s.path_ps <= s.span_ps);
    CU_ASSERT(s.path_ps * 10 >= s.span_ps * 9); /* the path explains the run's length */
    tstats_free(&s);
    tdb_free(db);
}

/* The fields of one CSV line (RFC 4180 quotes), into f[]; returns how many. */
static size_t csv_fields(const char *line, char f[][128], size_t max)
{
    size_t n = 0;
    while (n < max) {
        size_t k = 0;
        if (*line == '"') {
            for (line++; *line && !(*line == '"' && line[1] != '"'); line++) {
                if (*line == '"')
                    line++;
                if (k < 127)
                    f[n][k++] = *line;
            }
            if (*line == '"')
                line++;
        } else {
            for (; *line && *line != ',' && *line != '\n'; line++)
                if (k < 127)
                    f[n][k++] = *line;
        }
        f[n++][k] = '\0';
        if (*line != ',')
            break;
        line++;
    }
    return n;
}

TEST(csv_tables_hold_the_figures_of_the_json_output)
{
    /* trace stats: every track's busy time */
    const char *t = tmp("csv.json");
    trace_writer *w = open_trace(t);
    named(w, 0, 1, "core0.mxu");
    named(w, 0, 2, "core0.dma");
    sl(w, 0, 1, "a", "mxu", 0, 7, NULL, 0);
    sl(w, 0, 2, "b", "dma", 2, 5, NULL, 0);
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(trace_close(w, &e), NP_OK);
    json_t *j = run_json((const char *const[]){"trace", "stats", t, "--json", NULL});
    harness_run r = harness_npusim("trace", "stats", t, "--csv", NULL);
    CU_ASSERT_EQUAL_FATAL(r.exit_status, 0);
    char f[8][128];
    const char *line = r.out;
    CU_ASSERT_EQUAL(csv_fields(line, f, 8), 7u);
    CU_ASSERT_STRING_EQUAL(f[4], "busy_ps");
    size_t i;
    json_t *tr;
    json_array_foreach(json_object_get(j, "tracks"), i, tr) {
        line = strchr(line, '\n') + 1;
        CU_ASSERT_EQUAL_FATAL(csv_fields(line, f, 8), 7u);
        CU_ASSERT_STRING_EQUAL(f[2], json_string_value(json_object_get(tr, "track")));
        CU_ASSERT_EQUAL(strtoll(f[4], NULL, 10), json_integer_value(json_object_get(tr, "busy_ps")));
    }
    CU_ASSERT_EQUAL(i, 2u);
    harness_run_free(&r);
    json_decref(j);
    /* models and summary: names and parameter counts, a quoted description among them */
    j = run_json((const char *const[]){"models", "--json", NULL});
    r = harness_npusim("models", "--csv", NULL);
    CU_ASSERT_EQUAL_FATAL(r.exit_status, 0);
    line = r.out;
    json_t *m;
    json_array_foreach(j, i, m) {
        line = strchr(line, '\n') + 1;
        CU_ASSERT_EQUAL_FATAL(csv_fields(line, f, 8), 5u);
        CU_ASSERT_STRING_EQUAL(f[0], json_string_value(json_object_get(m, "name")));
        CU_ASSERT_EQUAL(strtoll(f[2], NULL, 10), json_integer_value(json_object_get(m, "params")));
        CU_ASSERT_EQUAL(strtoll(f[3], NULL, 10),
                        json_integer_value(json_object_get(m, "active_params")));
        CU_ASSERT_STRING_EQUAL(f[4], json_string_value(json_object_get(m, "description")));
    }
    harness_run_free(&r);
    json_decref(j);
    j = run_json((const char *const[]){"summary", "--model", "mlp-tiny", "--json", NULL});
    r = harness_npusim("summary", "--model", "mlp-tiny", "--csv", NULL);
    CU_ASSERT_EQUAL_FATAL(r.exit_status, 0);
    line = r.out;
    json_array_foreach(json_object_get(j, "layers"), i, m) {
        line = strchr(line, '\n') + 1;
        CU_ASSERT_EQUAL_FATAL(csv_fields(line, f, 8), 8u);
        CU_ASSERT_STRING_EQUAL(f[0], json_string_value(json_object_get(m, "name")));
        CU_ASSERT_EQUAL(strtoll(f[4], NULL, 10), json_integer_value(json_object_get(m, "flops")));
    }
    CU_ASSERT(i > 0);
    harness_run_free(&r);
    json_decref(j);
    r = harness_npusim("models", "--csv", "--json", NULL);
    CU_ASSERT_EQUAL(r.exit_status, 2);
    harness_run_free(&r);
}

/* The CSV of `npusim ... --csv` against the array `field` of the same command's --json: one
 * header of names, then a row per element with each name's value (integers exactly, reals
 * to 1e-9, strings, true/false, null as empty). */
static void csv_matches_json(const char *const *args, const char *field, size_t min_rows)
{
    const char *v[24];
    size_t n = 0;
    for (; args[n]; n++)
        v[n] = args[n];
    v[n] = "--json", v[n + 1] = NULL;
    json_t *j = run_json(v);
    v[n] = "--csv";
    harness_run r = harness_npusim_in(NULL, v);
    CU_ASSERT_EQUAL_FATAL(r.exit_status, 0);
    json_t *rows = json_object_get(j, field);
    CU_ASSERT_FATAL(json_array_size(rows) >= min_rows);
    char head[24][128], f[24][128];
    const char *line = r.out;
    size_t nk = csv_fields(line, head, 24), i;
    CU_ASSERT(nk >= 4);
    json_t *o;
    json_array_foreach(rows, i, o) {
        const char *nl = strchr(line, '\n');
        CU_ASSERT_PTR_NOT_NULL_FATAL(nl);
        line = nl + 1;
        CU_ASSERT_EQUAL_FATAL(csv_fields(line, f, 24), nk);
        for (size_t k = 0; k < nk; k++) {
            json_t *x = json_object_get(o, head[k]);
            CU_ASSERT_PTR_NOT_NULL(x); /* every column is a field of the JSON rows */
            const char *want = json_is_string(x) ? json_string_value(x)
                               : json_is_boolean(x) ? (json_is_true(x) ? "true" : "false")
                               : json_is_null(x) ? "" : NULL;
            if (want) {
                CU_ASSERT_STRING_EQUAL(f[k], want);
            } else if (json_is_integer(x)) {
                CU_ASSERT_EQUAL(strtoll(f[k], NULL, 10), json_integer_value(x));
            } else if (json_is_real(x)) {
                CU_ASSERT_DOUBLE_EQUAL(strtod(f[k], NULL), json_real_value(x),
                                       1e-9 * (1 + fabs(json_real_value(x))));
            }
        }
    }
    CU_ASSERT_EQUAL(strchr(line, '\n')[1], '\0'); /* no row beyond the JSON's */
    harness_run_free(&r);
    json_decref(j);
    v[n] = "--csv", v[n + 1] = "--json", v[n + 2] = NULL;
    r = harness_npusim_in(NULL, v);
    CU_ASSERT_EQUAL(r.exit_status, 2);
    harness_run_free(&r);
}

TEST(sim_layer_collective_and_noc_print_the_rows_of_their_json_as_csv)
{
    const char *elf = tmp("csv_mm.elf");
    const char *as[] = {"asm", "--arch", "tiny", harness_src_path("isa/examples/matmul_db.s"),
                        "-o", elf, NULL};
    harness_run a = harness_npusim_in(NULL, as);
    CU_ASSERT_EQUAL_FATAL(a.exit_status, 0);
    harness_run_free(&a);
    csv_matches_json((const char *const[]){"sim", "--arch", "tiny", elf, elf, NULL}, "units", 10);
    csv_matches_json((const char *const[]){"layer", "--arch", "tiny", "--topology",
                                           harness_src_path("tests/data/hw/mini_conv.csv"), NULL},
                     "layers", 2);
    csv_matches_json((const char *const[]){"collective", "--op", "all_reduce", "--chips", "4",
                                           "-b", "1K", "-e", "8K", NULL},
                     "rows", 4);
    csv_matches_json((const char *const[]){"noc", "--mesh", "4x4", "--rate", "0.1:0.3:0.1",
                                           "--cycles", "2000", NULL},
                     "rows", 3);
}
