/* test_trace.c — the trace writer (traces/trace.h), the layout (trace_layout.h), the
 * streaming reader (trace_read.h) and the checks (trace_db.h). What the writer writes is read
 * back with zlib and jansson, independently of the reader; the checks are shown to catch
 * each kind of bad trace, written here by hand; the traces of npusim sim, layer and
 * collective --isa pass them and are identical on a rerun. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include <jansson.h>

#include "harness.h"
#include "trace.h"
#include "trace_db.h"
#include "trace_layout.h"
#include "trace_read.h"

static char tmp_dir[64];

static const char *tmp(const char *name)
{
    static char buf[4][256];
    static int k;
    if (!tmp_dir[0]) {
        snprintf(tmp_dir, sizeof tmp_dir, "/tmp/npusim_trace_XXXXXX");
        CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(tmp_dir));
    }
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmp_dir, name);
    return buf[k];
}

/* The whole (possibly gzip-compressed) file, parsed by jansson in one piece. */
static json_t *read_whole(const char *path)
{
    gzFile f = gzopen(path, "rb"); /* reads plain files as they are */
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    int k;
    while ((k = gzread(f, buf + n, (unsigned)(cap - n - 1))) > 0) {
        n += (size_t)k;
        if (cap - n < 2)
            buf = realloc(buf, cap *= 2);
    }
    gzclose(f);
    buf[n] = '\0';
    json_error_t je;
    json_t *j = json_loads(buf, 0, &je);
    if (!j)
        fprintf(stderr, "%s:%d:%d: %s\n", path, je.line, je.column, je.text);
    CU_ASSERT_PTR_NOT_NULL(j);
    free(buf);
    return j;
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs(text, f);
    fclose(f);
}

static json_t *event(json_t *trace, size_t i)
{
    return json_array_get(json_object_get(trace, "traceEvents"), i);
}

static const char *str(json_t *o, const char *k) { return json_string_value(json_object_get(o, k)); }

static void write_and_check(const char *path, bool gz)
{
    trace_writer *w;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(trace_open(path, &w, &e), NP_OK);
    trace_name_process(w, 3, "chip \"3\"");
    trace_name_thread(w, 3, 7, "core0.dma\\n\x01");
    /* 123456789012 ps = 123456.789012 us; 1 ps = 0.000001 us */
    trace_arg a[] = {TRACE_ARG_U("pc", 4), TRACE_ARG_I("delta", -2), TRACE_ARG_F("x", 0.5),
                     TRACE_ARG_S("insn", "dma.copy \"q\""), TRACE_ARG_S("none", NULL)};
    trace_slice(w, 3, 7, "dma.copy", "dma", 123456789012ull, 1, a, 5);
    trace_slice(w, 3, 7, "k", "kernel", 0, 356000, NULL, 0);
    trace_arg c = TRACE_ARG_F("GB/s", 12.5);
    trace_counter(w, 3, "hbm.read", 1000, &c, 1);
    trace_flow(w, 's', 42, 3, 7, "msg", "msg", 2000);
    trace_flow(w, 'f', 42, 3, 7, "msg", "msg", 3000);
    CU_ASSERT_EQUAL(trace_events(w), 7u);
    CU_ASSERT_EQUAL_FATAL(trace_close(w, &e), NP_OK);
    FILE *f = fopen(path, "rb");
    unsigned char magic[2] = {0};
    CU_ASSERT_EQUAL(fread(magic, 1, 2, f), 2u);
    fclose(f);
    CU_ASSERT_EQUAL(magic[0] == 0x1f && magic[1] == 0x8b, gz); /* the gzip magic */
    json_t *j = read_whole(path);
    CU_ASSERT_STRING_EQUAL(str(j, "displayTimeUnit"), "ns");
    CU_ASSERT_EQUAL_FATAL(json_array_size(json_object_get(j, "traceEvents")), 7u);
    json_t *p = event(j, 0), *t = event(j, 1), *s = event(j, 2);
    CU_ASSERT_STRING_EQUAL(str(p, "ph"), "M");
    CU_ASSERT_STRING_EQUAL(str(json_object_get(p, "args"), "name"), "chip \"3\"");
    CU_ASSERT_STRING_EQUAL(str(json_object_get(t, "args"), "name"), "core0.dma\\n\x01");
    CU_ASSERT_STRING_EQUAL(str(s, "ph"), "X");
    CU_ASSERT_DOUBLE_EQUAL(json_number_value(json_object_get(s, "ts")), 123456.789012, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(json_number_value(json_object_get(s, "dur")), 0.000001, 1e-12);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(s, "pid")), 3);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(s, "tid")), 7);
    json_t *args = json_object_get(s, "args");
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(args, "pc")), 4);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(args, "delta")), -2);
    CU_ASSERT_DOUBLE_EQUAL(json_real_value(json_object_get(args, "x")), 0.5, 0);
    CU_ASSERT_STRING_EQUAL(str(args, "insn"), "dma.copy \"q\"");
    CU_ASSERT_PTR_NULL(json_object_get(args, "none"));
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(event(j, 3), "ts")), 0);
    json_t *cn = event(j, 4);
    CU_ASSERT_STRING_EQUAL(str(cn, "ph"), "C");
    CU_ASSERT_DOUBLE_EQUAL(json_number_value(json_object_get(json_object_get(cn, "args"), "GB/s")),
                           12.5, 0);
    CU_ASSERT_STRING_EQUAL(str(event(j, 5), "ph"), "s");
    CU_ASSERT_STRING_EQUAL(str(event(j, 6), "bp"), "e");
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(event(j, 6), "id")), 42);
    json_decref(j);
}

TEST(a_trace_reads_back_as_the_events_written_plain_and_gzipped)
{
    write_and_check(tmp("t.json"), false);
    write_and_check(tmp("t.json.gz"), true);
}

TEST(names_that_are_not_utf8_are_written_with_replacement_characters_and_stay_json)
{
    const char *path = tmp("u.json");
    trace_writer *w;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(trace_open(path, &w, &e), NP_OK);
    /* a bad lead byte, a cut sequence, an overlong form, then good 2-, 3- and 4-byte ones */
    trace_name_process(w, 0, "a\xff" "b\xe2\x82" "c\xc0\xaf"
                             "d \xc2\xb5s \xe2\x82\xac \xf0\x9f\x98\x80\"");
    CU_ASSERT_EQUAL_FATAL(trace_close(w, &e), NP_OK);
    json_t *j = read_whole(path); /* jansson refuses JSON that is not UTF-8 */
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    CU_ASSERT_STRING_EQUAL(str(json_object_get(event(j, 0), "args"), "name"),
                           "a\xef\xbf\xbd" "b\xef\xbf\xbd\xef\xbf\xbd"
                           "c\xef\xbf\xbd\xef\xbf\xbd"
                           "d \xc2\xb5s \xe2\x82\xac \xf0\x9f\x98\x80\"");
    json_decref(j);
}

TEST(times_are_written_as_exact_decimal_microseconds)
{
    char b[32];
    static const struct {
        uint64_t ps;
        const char *us;
    } cases[] = {{0, "0"},
                 {1, "0.000001"},
                 {3000, "0.003"},
                 {625, "0.000625"},
                 {1234567, "1.234567"},
                 {5000000, "5"},
                 {18446744073709551615ull, "18446744073709.551615"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t n = trace_format_us(cases[i].ps, b);
        b[n] = '\0';
        CU_ASSERT_STRING_EQUAL(b, cases[i].us);
    }
}

TEST(a_trace_that_cannot_be_created_is_an_io_error_naming_the_file)
{
    trace_writer *w;
    np_err e = {0};
    CU_ASSERT_EQUAL(trace_open("/nonexistent-dir/t.json", &w, &e), NP_ERR_IO);
    CU_ASSERT_PTR_NULL(w);
    CU_ASSERT_STRING_EQUAL(e.file, "/nonexistent-dir/t.json");
}

TEST(chip_lists_parse_and_bad_ones_name_the_flag)
{
    trace_chips c;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(trace_chips_parse("--trace-chips", "0-3,8,12-13", &c, &e), NP_OK);
    bool want[16] = {1, 1, 1, 1, 0, 0, 0, 0, 1, 0, 0, 0, 1, 1, 0, 0};
    for (uint32_t i = 0; i < 16; i++)
        CU_ASSERT_EQUAL(trace_chips_has(&c, i), want[i]);
    CU_ASSERT_FALSE(trace_chips_has(&c, 100000));
    trace_chips_free(&c);
    const char *bad[] = {"", "3-1", "1,,2", "x", "1-", "2000000", "1;2"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CU_ASSERT_EQUAL(trace_chips_parse("--trace-chips", bad[i], &c, &e), NP_ERR_USAGE);
        CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "--trace-chips"));
    }
    trace_level l;
    CU_ASSERT_EQUAL(trace_level_parse("--trace-level", "kernel", &l, &e), NP_OK);
    CU_ASSERT_EQUAL(l, TRACE_LEVEL_KERNEL);
    CU_ASSERT_EQUAL(trace_level_parse("--trace-level", "cycle", &l, &e), NP_ERR_USAGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "kernel, insn"));
}

/* A small system through the layout: chips 0..2, a send 0 -> 1 and 1 -> 2 on core 0's COMM
 * (two on the channel 0 -> 1), a collective kernel span on each chip, a DMA on lane 1. */
static void layout_scene(const char *path, const trace_layout_opts *o)
{
    trace_layout *lay;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(trace_layout_open(path, o, &lay, &e), NP_OK);
    trace_sink k = trace_layout_sink(lay);
    trace_unit_slice s = {.core = 0, .unit = 3, .unit_name = "comm", .name = "comm.send"};
    for (int i = 0; i < 2; i++) { /* chip 0 sends twice to chip 1, tag 5 */
        s.chip = 0, s.msg = TRACE_MSG_SEND, s.peer_chip = 1, s.tag = 5;
        s.start_ps = 1000 + 10000 * (uint64_t)i, s.end_ps = s.start_ps + 1000;
        k.ops->unit_slice(k.ctx, &s);
    }
    for (int i = 0; i < 2; i++) {
        s.chip = 1, s.msg = TRACE_MSG_RECV, s.peer_chip = 0, s.name = "comm.recv";
        s.start_ps = 500 + 10000 * (uint64_t)i, s.end_ps = s.start_ps + 3000;
        k.ops->unit_slice(k.ctx, &s);
    }
    s = (trace_unit_slice){.chip = 1, .core = 0, .unit = 3, .unit_name = "comm",
                           .name = "comm.send", .start_ps = 30000, .end_ps = 31000,
                           .msg = TRACE_MSG_SEND, .peer_chip = 2};
    k.ops->unit_slice(k.ctx, &s);
    s.chip = 2, s.peer_chip = 1, s.msg = TRACE_MSG_RECV, s.name = "comm.recv";
    s.start_ps = 30000, s.end_ps = 33000;
    k.ops->unit_slice(k.ctx, &s);
    s = (trace_unit_slice){.chip = 0, .core = 1, .unit = 0, .unit_name = "dma", .lane = 1,
                           .name = "dma.copy", .start_ps = 0, .end_ps = 4000};
    k.ops->unit_slice(k.ctx, &s);
    trace_link_slice ln = {0, 5, "chip0->chip1", "msg", 1500, 2500, 64};
    k.ops->link_slice(k.ctx, &ln);
    trace_link_slice sw = {TRACE_SYSTEM_CHIP, 9, "sw0->chip2", "msg", 30500, 32000, 64};
    k.ops->link_slice(k.ctx, &sw);
    k.ops->level(k.ctx, 1, "hbm.used", 0, 4096);
    for (uint32_t c = 0; c < 3; c++) {
        trace_span sp = {.chip = c, .core = 0, .track = "kernels", .name = "all_reduce",
                         .cat = "collective", .start_ps = 100 * c, .end_ps = 40000,
                         .group = 77, .group_size = 3};
        k.ops->span(k.ctx, &sp);
    }
    CU_ASSERT_EQUAL_FATAL(trace_layout_close(lay, &e), NP_OK);
}

/* The (pid, tid) of the thread named name, or false. */
static bool find_thread(json_t *j, const char *name, json_int_t *pid, json_int_t *tid)
{
    json_t *ev;
    size_t i;
    json_array_foreach(json_object_get(j, "traceEvents"), i, ev) {
        if (!strcmp(str(ev, "name"), "thread_name") &&
            !strcmp(str(json_object_get(ev, "args"), "name"), name)) {
            *pid = json_integer_value(json_object_get(ev, "pid"));
            *tid = json_integer_value(json_object_get(ev, "tid"));
            return true;
        }
    }
    return false;
}

TEST(the_layout_gives_a_process_per_chip_a_thread_per_unit_and_lane_and_joins_messages)
{
    const char *path = tmp("layout.json");
    layout_scene(path, NULL);
    json_t *j = read_whole(path);
    json_int_t pid, tid, pid2, tid2;
    CU_ASSERT_TRUE(find_thread(j, "core0.comm", &pid, &tid));
    CU_ASSERT_TRUE(find_thread(j, "core1.dma[1]", &pid2, &tid2));
    CU_ASSERT_EQUAL(pid2, 0);
    CU_ASSERT_NOT_EQUAL(tid2, tid);
    CU_ASSERT_TRUE(find_thread(j, "core0 kernels", &pid, &tid));
    CU_ASSERT_TRUE(find_thread(j, "link chip0->chip1", &pid, &tid)); /* the chip's own link */
    CU_ASSERT_EQUAL(pid, 0);
    CU_ASSERT_TRUE(find_thread(j, "sw0->chip2", &pid, &tid)); /* the network's */
    CU_ASSERT_EQUAL(pid, TRACE_PID_SYSTEM);
    /* flows: the k-th send of a channel ends at its k-th receive */
    json_t *ev;
    size_t i;
    json_int_t send_id[2] = {-1, -1}, recv_id[2] = {-1, -1}, coll = -1;
    int ns = 0, nr = 0, procs = 0, coll_steps = 0;
    char coll_ph[4] = "";
    json_array_foreach(json_object_get(j, "traceEvents"), i, ev) {
        const char *ph = str(ev, "ph"), *name = str(ev, "name");
        json_int_t id = json_integer_value(json_object_get(ev, "id"));
        json_int_t p = json_integer_value(json_object_get(ev, "pid"));
        if (!strcmp(name, "process_name"))
            procs++;
        if (!strcmp(name, "msg") && !strcmp(ph, "s") && p == 0 && ns < 2)
            send_id[ns++] = id;
        if (!strcmp(name, "msg") && !strcmp(ph, "f") && p == 1 && nr < 2)
            recv_id[nr++] = id;
        if (!strcmp(name, "coll")) {
            CU_ASSERT_EQUAL(json_integer_value(json_object_get(ev, "pid")), coll_steps);
            coll_ph[coll_steps++] = ph[0];
            CU_ASSERT(coll < 0 || coll == id);
            coll = id;
        }
    }
    CU_ASSERT_EQUAL(procs, 4); /* three chips and the system */
    CU_ASSERT_EQUAL(ns, 2);
    CU_ASSERT_EQUAL(nr, 2);
    CU_ASSERT_NOT_EQUAL(send_id[0], send_id[1]);
    CU_ASSERT_EQUAL(send_id[0], recv_id[0]);
    CU_ASSERT_EQUAL(send_id[1], recv_id[1]);
    CU_ASSERT_STRING_EQUAL(coll_ph, "stf"); /* one flow through the three ranks, in order */
    json_decref(j);
    tdb *db;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(tdb_load(path, &db, &e), NP_OK);
    CU_ASSERT_EQUAL(db->problems, 0u);
    CU_ASSERT_EQUAL(db->n_flows, 3u + 2u); /* three messages, a collective of two arrows */
    tdb_free(db);
}

TEST(trace_chips_and_trace_level_kernel_keep_big_traces_small)
{
    trace_layout_opts o = {.level = TRACE_LEVEL_INSN};
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(trace_chips_parse("--trace-chips", "0,2", &o.chips, &e), NP_OK);
    const char *path = tmp("filtered.json");
    layout_scene(path, &o);
    trace_chips_free(&o.chips);
    tdb *db;
    CU_ASSERT_EQUAL_FATAL(tdb_load(path, &db, &e), NP_OK);
    CU_ASSERT_EQUAL(db->problems, 0u); /* flows to chip 1 are gone at both ends */
    CU_ASSERT_EQUAL(db->n_processes, 3u); /* chips 0 and 2, the system */
    for (size_t p = 0; p < db->n_processes; p++)
        CU_ASSERT_NOT_EQUAL(db->processes[p].pid, 1u);
    CU_ASSERT_EQUAL(db->n_counters, 0u); /* chip 1's level is gone too */
    CU_ASSERT_EQUAL(db->n_flows, 1u); /* the collective, chip 0 -> chip 2 */
    tdb_free(db);
    o.level = TRACE_LEVEL_KERNEL;
    layout_scene(path, &o);
    CU_ASSERT_EQUAL_FATAL(tdb_load(path, &db, &e), NP_OK);
    CU_ASSERT_EQUAL(db->problems, 0u);
    CU_ASSERT_EQUAL(db->n_slices, 3u); /* the kernel spans only: no instruction, no link */
    CU_ASSERT_EQUAL(db->n_flows, 2u);
    tdb_free(db);
}

TEST(a_bandwidth_counter_keeps_every_byte_in_at_most_its_bins)
{
    const char *path = tmp("counter.json");
    trace_layout *lay;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(trace_layout_open(path, NULL, &lay, &e), NP_OK);
    trace_sink k = trace_layout_sink(lay);
    /* 1000 B in [0, 1 ns): 1 B/ps = 1000 GB/s; then 3 MB over [2 us, 1 ms): bins coarsen */
    trace_transfer t = {0, "hbm.read", 1000, 0, 1000};
    k.ops->transfer(k.ctx, &t);
    trace_transfer u = {0, "hbm.read", 3000000, 2000000, 1000000000};
    k.ops->transfer(k.ctx, &u);
    k.ops->run_end(k.ctx, 1000000000);
    CU_ASSERT_EQUAL_FATAL(trace_layout_close(lay, &e), NP_OK);
    tdb *db;
    CU_ASSERT_EQUAL_FATAL(tdb_load(path, &db, &e), NP_OK);
    CU_ASSERT_EQUAL(db->problems, 0u);
    CU_ASSERT_EQUAL_FATAL(db->n_counters, 1u);
    const tdb_counter *c = &db->counters[0];
    CU_ASSERT(c->samples <= TRACE_COUNTER_BINS + 1);
    /* the integral of GB/s over ps is bytes x 10^-3 */
    CU_ASSERT_DOUBLE_EQUAL(c->integral * 1e-3, 3001000.0, 1e-6 * 3001000.0);
    tdb_free(db);
    /* one small transfer: its exact rate, then 0 */
    CU_ASSERT_EQUAL_FATAL(trace_layout_open(path, NULL, &lay, &e), NP_OK);
    k = trace_layout_sink(lay);
    k.ops->transfer(k.ctx, &t);
    CU_ASSERT_EQUAL_FATAL(trace_layout_close(lay, &e), NP_OK);
    json_t *j = read_whole(path);
    json_t *ev;
    size_t i;
    double v[2] = {-1, -1};
    int n = 0;
    json_array_foreach(json_object_get(j, "traceEvents"), i, ev)
        if (!strcmp(str(ev, "ph"), "C") && n < 2)
            v[n++] = json_number_value(json_object_get(json_object_get(ev, "args"), "GB/s"));
    CU_ASSERT_EQUAL(n, 2);
    CU_ASSERT_DOUBLE_EQUAL(v[0], 1000.0, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(v[1], 0.0, 0);
    json_decref(j);
}

static np_status count_events(void *ctx, json_t *ev, uint64_t i, np_err *err)
{
    (void)err;
    uint64_t *n = ctx;
    CU_ASSERT_EQUAL(i, *n);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(json_object_get(ev, "args"), "i")),
                    (json_int_t)i);
    (*n)++;
    return NP_OK;
}

typedef struct progress_log {
    double v[64];
    int n;
    bool decreased;
} progress_log;

static void log_progress(void *ctx, double done)
{
    progress_log *l = ctx;
    if (l->n && done < l->v[l->n - 1])
        l->decreased = true;
    if (l->n < 64)
        l->v[l->n++] = done;
}

/* trace_read_with tells the share of the file read after each 1 MiB chunk: a plain file
 * of 4 MiB and a bit gets about 1/4, 2/4, 3/4, then 1 at the end, never decreasing. */
TEST(the_reader_tells_its_progress_through_the_file_chunk_by_chunk)
{
    const char *path = tmp("progress.json");
    FILE *f = fopen(path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs("{\"traceEvents\":[", f);
    long events = 0;
    while (ftell(f) < (4l << 20) + 1000) {
        fprintf(f, "%s{\"ph\":\"X\",\"name\":\"k\",\"pid\":0,\"tid\":0,\"ts\":%ld,"
                "\"dur\":1,\"args\":{\"i\":%ld,\"pad\":\"%0100d\"}}", events ? "," : "", events,
                events, 0);
        events++;
    }
    fputs("]}\n", f);
    fclose(f);
    progress_log l = {0};
    uint64_t n = 0;
    np_err e = {0};
    trace_read_opts o = {.progress = log_progress, .progress_ctx = &l};
    CU_ASSERT_EQUAL(trace_read_with(path, count_events, &n, &o, &e), NP_OK);
    CU_ASSERT_EQUAL(n, (uint64_t)events);
    CU_ASSERT_TRUE(l.n >= 5);
    CU_ASSERT_FALSE(l.decreased);
    CU_ASSERT_TRUE(l.v[0] > 0.2 && l.v[0] < 0.3); /* 1 MiB (and zlib's input buffer) of 4 */
    CU_ASSERT_EQUAL(l.v[l.n - 1], 1.0);
}

/* The reader's limits: a small gzip holding one 80 MiB string (issue 26's audit: a 388 KB gzip
 * of a 400 MB string took 23 s and 1.17 GB) is refused at the default 64 MiB per event, and a
 * lower limit or an event count is refused as soon as it is passed, naming file and position. */
TEST(the_reader_refuses_an_event_or_an_event_count_past_its_limits)
{
    const char *path = tmp("huge.json.gz");
    gzFile g = gzopen(path, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    gzputs(g, "{\"traceEvents\":[{\"ph\":\"X\",\"name\":\"");
    static char block[1 << 16];
    memset(block, 'a', sizeof block);
    for (int i = 0; i < 80 * 16; i++) /* 80 MiB */
        gzwrite(g, block, sizeof block);
    gzputs(g, "\"}]}");
    gzclose(g);
    uint64_t n = 0;
    np_err e = {0};
    CU_ASSERT_EQUAL(trace_read(path, count_events, &n, &e), NP_ERR_RANGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "longer than 64 MiB"));
    CU_ASSERT_PTR_NOT_NULL(strstr(e.file, "huge.json.gz"));
    CU_ASSERT_EQUAL(n, 0);
    /* a limit of 4 MiB refuses it sooner */
    trace_read_opts o = {.max_event_bytes = 4 << 20};
    CU_ASSERT_EQUAL(trace_read_with(path, count_events, &n, &o, &e), NP_ERR_RANGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "longer than 4 MiB"));
    /* ten events against a limit of five: the first five are read, the sixth refused */
    const char *ten = tmp("ten.json");
    FILE *f = fopen(ten, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs("[", f);
    for (int i = 0; i < 10; i++)
        fprintf(f, "%s{\"ph\":\"i\",\"args\":{\"i\":%d}}", i ? ",\n" : "", i);
    fputs("]", f);
    fclose(f);
    n = 0;
    o = (trace_read_opts){.max_events = 5};
    CU_ASSERT_EQUAL(trace_read_with(ten, count_events, &n, &o, &e), NP_ERR_RANGE);
    CU_ASSERT_EQUAL(n, 5);
    CU_ASSERT_EQUAL(e.line, 6); /* the sixth event's line */
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "more than 5 events"));
    n = 0;
    o.max_events = 10;
    CU_ASSERT_EQUAL(trace_read_with(ten, count_events, &n, &o, &e), NP_OK);
    CU_ASSERT_EQUAL(n, 10);
}

/* The writer's budget (trace_set_max_bytes): past it every event is left out and counted, the
 * file stays within the budget and one 64 KiB buffer, and the trace it leaves is valid — a
 * flow whose start was written and whose end was cut is not a fault of a cut trace. */
TEST(a_trace_cut_at_its_budget_stays_small_valid_and_says_how_much_it_left_out)
{
    const char *path = tmp("cut.json");
    trace_writer *w;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(trace_open(path, &w, &e), NP_OK);
    trace_set_max_bytes(w, 200 * 1024);
    trace_name_process(w, 0, "chip 0");
    trace_name_thread(w, 0, 0, "core0");
    const uint64_t n = 20000;
    for (uint64_t i = 0; i < n; i++) {
        trace_arg a = TRACE_ARG_U("i", i);
        trace_slice(w, 0, 0, "kernel", "k", i * 1000, 500, &a, 1);
        if (i % 100 == 0)
            trace_flow(w, 's', i, 0, 0, "f", "c", i * 1000 + 10);
        if (i % 100 == 50)
            trace_flow(w, 'f', i - 50, 0, 0, "f", "c", i * 1000 + 10);
    }
    uint64_t left = trace_dropped(w), written = trace_events(w);
    CU_ASSERT_TRUE(left > 0);
    CU_ASSERT_EQUAL(left + written, 2 + n + n / 100 * 2); /* names, slices, flow steps */
    CU_ASSERT_EQUAL_FATAL(trace_close(w, &e), NP_OK);
    FILE *f = fopen(path, "rb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fclose(f);
    CU_ASSERT_TRUE(size >= 200 * 1024 && size <= 200 * 1024 + 64 * 1024 + 256);
    tdb *db;
    CU_ASSERT_EQUAL_FATAL(tdb_load(path, &db, &e), NP_OK);
    CU_ASSERT_EQUAL(db->problems, 0);
    CU_ASSERT_TRUE(db->truncated);
    CU_ASSERT_EQUAL(db->events_left_out, left);
    CU_ASSERT_EQUAL(db->events, written + 1); /* and the truncation's metadata event */
    tdb_free(db);
    /* without a budget nothing is left out and the trace is not marked */
    CU_ASSERT_EQUAL_FATAL(trace_open(path, &w, &e), NP_OK);
    for (uint64_t i = 0; i < 100; i++)
        trace_slice(w, 0, 0, "kernel", "k", i * 1000, 500, NULL, 0);
    CU_ASSERT_EQUAL(trace_dropped(w), 0);
    CU_ASSERT_EQUAL_FATAL(trace_close(w, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(tdb_load(path, &db, &e), NP_OK);
    CU_ASSERT_FALSE(db->truncated);
    tdb_free(db);
}

TEST(the_reader_streams_events_across_chunks_in_both_forms_of_the_format)
{
    /* about 4 MB of events: several of the reader's 1 MiB chunks, in a gzip file */
    const char *path = tmp("big.json.gz");
    trace_writer *w;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(trace_open(path, &w, &e), NP_OK);
    char name[200];
    memset(name, 'x', sizeof name - 1);
    name[sizeof name - 1] = '\0';
    for (uint64_t i = 0; i < 20000; i++) {
        trace_arg a = TRACE_ARG_U("i", i);
        trace_slice(w, 0, 0, name, "c", i * 1000, 1000, &a, 1);
    }
    CU_ASSERT_EQUAL_FATAL(trace_close(w, &e), NP_OK);
    uint64_t n = 0;
    CU_ASSERT_EQUAL(trace_read(path, count_events, &n, &e), NP_OK);
    CU_ASSERT_EQUAL(n, 20000u);
    /* the bare array form, and other keys around traceEvents */
    const char *arr = tmp("array.json");
    write_file(arr, "[{\"ph\":\"X\",\"args\":{\"i\":0}},\n{\"ph\":\"X\",\"args\":{\"i\":1}}]\n");
    n = 0;
    CU_ASSERT_EQUAL(trace_read(arr, count_events, &n, &e), NP_OK);
    CU_ASSERT_EQUAL(n, 2u);
    write_file(arr, "{\"otherData\":{\"v\":[1,2]},\"traceEvents\":[{\"args\":{\"i\":0}}],"
                    "\"displayTimeUnit\":\"ns\"}");
    n = 0;
    CU_ASSERT_EQUAL(trace_read(arr, count_events, &n, &e), NP_OK);
    CU_ASSERT_EQUAL(n, 1u);
}

TEST(a_trace_that_is_not_one_is_an_error_with_its_position)
{
    const char *p = tmp("bad.json");
    np_err e = {0};
    uint64_t n = 0;
    write_file(p, "{\"traceEvents\":[\n{\"ph\":\"X\"},\n{\"ph\" \"X\"}]}");
    CU_ASSERT_EQUAL(trace_read(p, count_events, &n, &e), NP_ERR_SYNTAX);
    CU_ASSERT_STRING_EQUAL(e.file, p);
    CU_ASSERT_EQUAL(e.line, 3);
    n = 0;
    write_file(p, "{\"traceEvents\":[{\"ph\":\"X\"},");
    CU_ASSERT_EQUAL(trace_read(p, count_events, &n, &e), NP_ERR_FORMAT); /* cut short */
    n = 0;
    write_file(p, "{\"traceEvents\":[1]}");
    CU_ASSERT_EQUAL(trace_read(p, count_events, &n, &e), NP_ERR_FORMAT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "not an object"));
    write_file(p, "{\"events\":[]}");
    CU_ASSERT_EQUAL(trace_read(p, count_events, &n, &e), NP_ERR_FORMAT);
    CU_ASSERT_EQUAL(trace_read(tmp("missing.json"), count_events, &n, &e), NP_ERR_IO);
}

/* The number of problems tdb_load finds in a trace given as its events' text; the first
 * problem's message must contain want. */
static uint64_t problems(const char *events, const char *want)
{
    const char *p = tmp("check.json");
    char text[4096];
    snprintf(text, sizeof text,
             "{\"traceEvents\":[\n"
             "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":0,\"tid\":0,\"args\":{\"name\":\"c\"}},\n"
             "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":1,\"args\":{\"name\":\"t\"}}%s%s]}",
             *events ? ",\n" : "", events);
    write_file(p, text);
    tdb *db;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(tdb_load(p, &db, &e), NP_OK);
    uint64_t n = db->problems;
    if (want && (!n || !strstr(db->problem[0], want))) {
        fprintf(stderr, "expected a problem with '%s', got %llu: %s\n", want,
                (unsigned long long)n, n ? db->problem[0] : "");
        CU_FAIL("the check did not report the problem");
    }
    tdb_free(db);
    return n;
}

#define X(ts, dur) "{\"name\":\"a\",\"ph\":\"X\",\"pid\":0,\"tid\":1,\"ts\":" #ts ",\"dur\":" #dur "}"

TEST(the_checks_pass_a_good_trace_and_catch_each_kind_of_bad_one)
{
    CU_ASSERT_EQUAL(problems(X(0, 5) "," X(1, 2) "," X(5, 1)                /* nested, touching */
                             ",{\"name\":\"m\",\"ph\":\"s\",\"id\":1,\"pid\":0,\"tid\":1,\"ts\":0.5}"
                             ",{\"name\":\"m\",\"ph\":\"f\",\"bp\":\"e\",\"id\":1,\"pid\":0,\"tid\":1,\"ts\":5.5}"
                             ",{\"name\":\"c\",\"ph\":\"C\",\"pid\":0,\"ts\":0,\"args\":{\"v\":1}}",
                             NULL),
                    0u);
    CU_ASSERT_EQUAL(problems("{\"name\":\"a\",\"pid\":0,\"tid\":1,\"ts\":0}", "\"ph\""), 1u);
    CU_ASSERT_EQUAL(problems("{\"ph\":\"X\",\"pid\":0,\"tid\":1,\"ts\":0,\"dur\":1}", "\"name\""), 1u);
    CU_ASSERT_EQUAL(problems("{\"name\":\"a\",\"ph\":\"X\",\"tid\":1,\"ts\":0,\"dur\":1}", "\"pid\""), 1u);
    CU_ASSERT_EQUAL(problems("{\"name\":\"a\",\"ph\":\"X\",\"pid\":0,\"ts\":0,\"dur\":1}", "\"tid\""), 1u);
    CU_ASSERT_EQUAL(problems("{\"name\":\"a\",\"ph\":\"X\",\"pid\":0,\"tid\":1,\"dur\":1}", "\"ts\""), 1u);
    CU_ASSERT_EQUAL(problems(X(0, -1), "\"dur\""), 1u);
    CU_ASSERT_EQUAL(problems(X(-3, 1), "\"ts\""), 1u);
    CU_ASSERT_EQUAL(problems(X(0, 5) "," X(3, 4), "overlaps"), 1u);
    CU_ASSERT_EQUAL(problems("{\"name\":\"c\",\"ph\":\"C\",\"pid\":0,\"ts\":0,\"args\":{\"v\":\"1\"}}",
                             "not a number"), 1u);
    CU_ASSERT_EQUAL(problems("{\"name\":\"c\",\"ph\":\"C\",\"pid\":0,\"ts\":0}", "no args"), 1u);
    CU_ASSERT_EQUAL(problems(X(0, 5) ",{\"name\":\"m\",\"ph\":\"s\",\"id\":1,\"pid\":0,\"tid\":1,\"ts\":1}",
                             "start(s) and 0 end(s)"), 1u);
    CU_ASSERT_EQUAL(problems(X(0, 5) ",{\"name\":\"m\",\"ph\":\"s\",\"id\":1,\"pid\":0,\"tid\":1,\"ts\":1}"
                             ",{\"name\":\"m\",\"ph\":\"f\",\"id\":1,\"pid\":0,\"tid\":1,\"ts\":9}",
                             "inside no slice"), 1u);
    CU_ASSERT_EQUAL(problems("{\"name\":\"a\",\"ph\":\"X\",\"pid\":0,\"tid\":2,\"ts\":0,\"dur\":1}",
                             "no thread_name"), 1u);
    CU_ASSERT_EQUAL(problems("{\"name\":\"a\",\"ph\":\"X\",\"pid\":4,\"tid\":1,\"ts\":0,\"dur\":1}",
                             "no "), 2u); /* neither the process nor its thread is named */
    CU_ASSERT_EQUAL(problems("{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":3,\"tid\":0}", "args.name"), 1u);
    CU_ASSERT_EQUAL(problems("{\"name\":\"a\",\"ph\":\"B\",\"pid\":0,\"tid\":1,\"ts\":0}", "never ends"), 1u);
}

/* Runs npusim with args (NULL-terminated) and expects success. */
static void run_ok(const char *const *args)
{
    harness_run r = harness_npusim_in(NULL, args);
    if (r.exit_status)
        fprintf(stderr, "npusim %s exited %d: %s\n", args[0], r.exit_status, r.err);
    CU_ASSERT_EQUAL(r.exit_status, 0);
    harness_run_free(&r);
}

/* The trace a command writes passes every check and has at least min_slices slices; with
 * rerun, a second run writes the same bytes. Returns it loaded (the caller frees it). */
static tdb *trace_of(const char *const *args, const char *path, size_t min_slices, bool rerun)
{
    run_ok(args);
    size_t n1, n2;
    char *a = harness_read_file(path, &n1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    if (rerun) {
        run_ok(args);
        char *b = harness_read_file(path, &n2);
        CU_ASSERT_PTR_NOT_NULL_FATAL(b);
        if (n1 != n2 || memcmp(a, b, n1)) {
            CU_FAIL("a rerun wrote other bytes");
            fprintf(stderr, "npusim %s: %s differs on a rerun\n", args[0], path);
        }
        free(b);
    }
    free(a);
    tdb *db;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(tdb_load(path, &db, &e), NP_OK);
    for (uint64_t i = 0; i < db->problems && i < TDB_PROBLEMS_KEPT; i++)
        fprintf(stderr, "%s: %s\n", path, db->problem[i]);
    CU_ASSERT_EQUAL(db->problems, 0u);
    CU_ASSERT(db->n_slices >= min_slices);
    return db;
}

/* Slices of category cat in db. */
static size_t slices_of(const tdb *db, const char *cat)
{
    uint32_t id = tdb_find_str(db, cat);
    size_t n = 0;
    for (size_t i = 0; i < db->n_slices; i++)
        n += db->slices[i].cat == id;
    return n;
}

/* Whether every process of db is one of the chips in `chips` (a -1 terminated list) or the
 * system process. */
static bool only_chips(const tdb *db, const int *chips)
{
    for (size_t i = 0; i < db->n_processes; i++) {
        uint32_t pid = db->processes[i].pid;
        bool ok = pid == TRACE_PID_SYSTEM;
        for (const int *c = chips; *c >= 0; c++)
            ok |= pid == (uint32_t)*c;
        if (!ok)
            return false;
    }
    return true;
}

TEST(traces_of_sim_layer_collective_noc_and_run_are_valid_and_identical_on_rerun)
{
    const char *elf = tmp("sendrecv.elf"), *mm = tmp("mm.elf");
    const char *as1[] = {"asm", harness_src_path("isa/examples/sendrecv.s"), "-o", elf, NULL};
    run_ok(as1);
    const char *as2[] = {"asm", harness_src_path("isa/examples/matmul_db.s"), "-o", mm,
                         "--arch", "tiny", NULL};
    run_ok(as2);
    const char *t1 = tmp("sim.json.gz");
    const char *sim[] = {"sim", elf, "--trace", t1, NULL};
    tdb *db = trace_of(sim, t1, 10, true);
    CU_ASSERT_EQUAL(db->n_flows, 2u); /* the send and the send back */
    tdb_free(db);
    const char *t2 = tmp("simmm.json");
    const char *sim2[] = {"sim", "--arch", "tiny", mm, mm, "--trace", t2, NULL};
    tdb_free(trace_of(sim2, t2, 10, true));
    const char *t3 = tmp("layer.json.gz");
    const char *layer[] = {"layer", "--arch", "tiny", "--topology",
                           harness_src_path("tests/data/hw/mini_conv.csv"), "--trace", t3, NULL};
    tdb_free(trace_of(layer, t3, 10, true));
    const char *t4 = tmp("coll.json.gz");
    const char *coll[] = {"collective", "--op", "all_reduce", "--algo", "ring", "--isa",
                          "--chips", "4", "--max-bytes", "1K", "--trace", t4, NULL};
    /* a ring all-reduce on 4 chips: 2 (p - 1) = 6 sends per chip per size */
    db = trace_of(coll, t4, 10, true);
    CU_ASSERT(db->n_flows >= 8 * 6 * 4);
    tdb_free(db);
    /* the flow engine: 3 sizes x 4 ranks x 6 messages, and per collective one flow through
     * its 4 ranks (3 arrows) */
    const char *t5 = tmp("collflow.json.gz");
    const char *flow[] = {"collective", "--op", "all_reduce", "--algo", "ring", "--chips", "4",
                          "-b", "1K", "-e", "4K", "--trace", t5, NULL};
    db = trace_of(flow, t5, 3 * 4 * 6 * 2, true);
    CU_ASSERT_EQUAL(db->n_flows, 3u * 4 * 6 + 3 * 3);
    CU_ASSERT_EQUAL(slices_of(db, "collective"), 3u * 4);
    CU_ASSERT_EQUAL(slices_of(db, "comm"), 3u * 4 * 6 * 2);
    tdb_free(db);
    const char *t6 = tmp("noc.json.gz");
    const char *noc[] = {"noc", "--mesh", "4x4", "--rate", "0.1:0.3:0.2", "--cycles", "2000",
                         "--trace", t6, NULL};
    db = trace_of(noc, t6, 2 * 4, true); /* per rate: its span and 3 phases */
    CU_ASSERT_EQUAL(db->n_counters, 16u + 2 * 24 + 16); /* 16 routers, 48 links, 16 ejections */
    tdb_free(db);
    const char *t7 = tmp("run.json.gz");
    const char *run[] = {"run", "--arch", "tpu-pod", "--model", "gpt-tiny", "--batch", "8",
                         "--dp", "2", "--pp", "2", "--microbatch", "1", "--trace", t7, NULL};
    db = trace_of(run, t7, 100, true);
    CU_ASSERT(db->n_flows > 0);
    CU_ASSERT(db->n_counters > 0);
    tdb_free(db);
}

TEST(trace_chips_and_trace_level_keep_only_what_they_name_on_every_command)
{
    const char *elf = tmp("sendrecv2.elf"), *mm = tmp("mm2.elf");
    const char *as[] = {"asm", harness_src_path("isa/examples/sendrecv.s"), "-o", elf, NULL};
    run_ok(as);
    const char *as2[] = {"asm", harness_src_path("isa/examples/matmul_db.s"), "-o", mm,
                         "--arch", "tiny", NULL};
    run_ok(as2);
    static const int chip0[] = {0, -1}, chip1[] = {1, -1}, chips01[] = {0, 1, -1};
    const char *t1 = tmp("simk.json");
    const char *sim[] = {"sim", elf, "--trace", t1, "--trace-level", "kernel", NULL};
    tdb *db = trace_of(sim, t1, 1, false);
    CU_ASSERT_EQUAL(db->n_flows, 0u);  /* messages are instruction-level */
    CU_ASSERT_EQUAL(slices_of(db, "comm"), 0u);
    CU_ASSERT(slices_of(db, "kernel") + slices_of(db, "collective") == db->n_slices);
    tdb_free(db);
    const char *sim1[] = {"sim", "--arch", "tiny", mm, mm, "--trace", t1, "--trace-chips", "1",
                          NULL};
    db = trace_of(sim1, t1, 1, false);
    CU_ASSERT(only_chips(db, chip1));
    CU_ASSERT(slices_of(db, "dma") > 0);
    tdb_free(db);
    const char *t2 = tmp("layerk.json");
    const char *layer[] = {"layer", "--arch", "tiny", "--gemm", "64,64,64", "--trace", t2,
                           "--trace-level", "kernel", NULL};
    db = trace_of(layer, t2, 2, false);
    CU_ASSERT(slices_of(db, "kernel") + slices_of(db, "layer") == db->n_slices);
    tdb_free(db);
    const char *t3 = tmp("collk.json");
    const char *coll[] = {"collective", "--op", "all_reduce", "--algo", "ring", "--chips", "4",
                          "-b", "1K", "-e", "1K", "--trace", t3, "--trace-chips", "0-1",
                          "--trace-level", "kernel", NULL};
    db = trace_of(coll, t3, 2, false);
    CU_ASSERT(only_chips(db, chips01));
    CU_ASSERT_EQUAL(slices_of(db, "collective"), db->n_slices); /* no message slices */
    CU_ASSERT_EQUAL(db->n_flows, 1u); /* the collective's, through the two ranks kept */
    tdb_free(db);
    const char *t4 = tmp("runk.json");
    const char *run[] = {"run", "--arch", "tpu-pod", "--model", "gpt-tiny", "--batch", "8",
                         "--dp", "2", "--pp", "2", "--microbatch", "1", "--trace", t4,
                         "--trace-chips", "0", "--trace-level", "kernel", NULL};
    db = trace_of(run, t4, 10, false);
    CU_ASSERT(only_chips(db, chip0));
    tdb_free(db);
}

TEST(trace_chips_and_trace_level_without_trace_are_usage_errors_naming_the_flag_in_every_command)
{
    /* each command's smallest valid call, then each option alone, even at its default value
     * (insn, chip 0): exit 2 naming it, before anything runs */
    static const char *const cmds[][6] = {
        {"sim", "prog.elf", NULL},
        {"layer", "--gemm", "8,8,8", NULL},
        {"collective", "--op", "all_reduce", NULL},
        {"run", NULL}};
    static const char *const flags[][3] = {{"--trace-level", "insn", "--trace-level"},
                                           {"--trace-level", "kernel", "--trace-level"},
                                           {"--trace-chips", "0", "--trace-chips"}};
    for (size_t c = 0; c < sizeof cmds / sizeof cmds[0]; c++)
        for (size_t k = 0; k < sizeof flags / sizeof flags[0]; k++) {
            const char *args[10];
            size_t n = 0;
            for (size_t i = 0; cmds[c][i]; i++)
                args[n++] = cmds[c][i];
            args[n++] = flags[k][0];
            args[n++] = flags[k][1];
            args[n] = NULL;
            harness_run r = harness_npusim_in(NULL, args);
            char want[64];
            snprintf(want, sizeof want, "%s needs --trace", flags[k][2]);
            CU_ASSERT_EQUAL(r.exit_status, 2);
            CU_ASSERT_PTR_NOT_NULL(strstr(r.err, want));
            if (r.exit_status != 2 || !strstr(r.err, want))
                fprintf(stderr, "npusim %s %s %s: exit %d, %s\n", cmds[c][0], flags[k][0],
                        flags[k][1], r.exit_status, r.err);
            harness_run_free(&r);
        }
}

/* The sum of the integrals over time of the counter series whose names end in suffix. */
static double counters_integral(const tdb *db, const char *suffix, size_t *n)
{
    double sum = 0;
    *n = 0;
    size_t ls = strlen(suffix);
    for (size_t i = 0; i < db->n_counters; i++) {
        const char *name = tdb_str(db, db->counters[i].name);
        size_t l = strlen(name);
        if (l >= ls && !strcmp(name + l - ls, suffix))
            sum += db->counters[i].integral, (*n)++;
    }
    return sum;
}

TEST(the_noc_traces_ejection_counters_carry_the_offered_load)
{
    /* Uniform traffic at 0.2 flits/node/cycle, below saturation: each router ejects what the
     * nodes offer, 0.2 flits per cycle on average; an ejection counter's integral over time
     * is its flits x the cycle time (1 ns at tiny's noc_clock_ghz = 1). */
    const char *t = tmp("nocload.json");
    const char *noc[] = {"noc", "--mesh", "4x4", "--rate", "0.2", "--warmup", "500",
                         "--cycles", "20000", "--trace", t, "--trace-every", "50", NULL};
    tdb *db = trace_of(noc, t, 4, false);
    size_t n;
    double flits = counters_integral(db, ".local flits/cycle", &n) / 1000.0; /* ps per cycle */
    CU_ASSERT_EQUAL(n, 16u);
    double span = (double)(db->t_end_ps - db->t_begin_ps) / 1000.0; /* cycles */
    double rate = flits / (16 * span);
    CU_ASSERT_DOUBLE_EQUAL(rate, 0.2, 0.2 * 0.03);
    if (fabs(rate - 0.2) > 0.006)
        fprintf(stderr, "ejected %.4f flits/node/cycle\n", rate);
    tdb_free(db);
}

/* Runs the examples of a doc: a ```yaml block whose first line is "# PATH ..." is written to
 * PATH; every line of a ```sh block that starts with "npusim" runs from the repository root
 * and must succeed. The files after "-o " are removed first, so each run starts afresh.
 * Returns the number of commands run. */
static unsigned run_doc(const char *rel)
{
    char *doc = harness_private_tmp(harness_read_file(harness_src_path(rel), NULL));
    CU_ASSERT_PTR_NOT_NULL_FATAL(doc);
    char root[4096];
    snprintf(root, sizeof root, "%s", harness_src_path(""));
    for (const char *o = doc; (o = strstr(o, " -o ")); o += 4) { /* fresh outputs */
        char path[512];
        if (sscanf(o + 4, "%511s", path) == 1 && path[0] == '/') {
            remove(path);
            size_t n = strlen(path);
            if (n > 4 && !strcmp(path + n - 4, ".csv")) {
                char jl[600];
                snprintf(jl, sizeof jl, "%.*s.jsonl", (int)(n - 4), path);
                remove(jl);
            }
        }
    }
    unsigned ran = 0;
    enum { NONE, SH, YAML } in = NONE;
    FILE *yaml = NULL;
    for (char *line = doc, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        if (!strncmp(line, "```", 3)) {
            if (yaml)
                fclose(yaml), yaml = NULL;
            in = in != NONE ? NONE : !strcmp(line, "```sh") ? SH : !strcmp(line, "```yaml") ? YAML : NONE;
            if (in == YAML && next && !strncmp(next, "# /", 3)) {
                char path[512];
                if (sscanf(next + 2, "%511s", path) == 1)
                    yaml = fopen(path, "w");
            }
            continue;
        }
        if (in == YAML && yaml) {
            fputs(line, yaml);
            fputc('\n', yaml);
            continue;
        }
        if (in != SH || strncmp(line, "npusim ", 7))
            continue;
        char cmd[2048];
        snprintf(cmd, sizeof cmd, "%s", line + 7);
        const char *args[64];
        int n = 0;
        char *save = NULL;
        for (char *w = strtok_r(cmd, " ", &save); w && n < 63; w = strtok_r(NULL, " ", &save))
            args[n++] = w;
        args[n] = NULL;
        harness_run r = harness_npusim_in(root, args);
        if (r.exit_status != 0) {
            CU_FAIL("a documented command failed");
            fprintf(stderr, "%s: `%s` exited %d: %s\n", rel, line, r.exit_status, r.err);
        }
        harness_run_free(&r);
        ran++;
    }
    if (yaml)
        fclose(yaml);
    free(doc);
    return ran;
}

TEST(every_example_of_the_trace_sweep_and_report_docs_runs)
{
    CU_ASSERT(run_doc("docs/traces.md") >= 6);
    CU_ASSERT(run_doc("docs/sweeps.md") >= 4);
    CU_ASSERT(run_doc("docs/report.md") >= 3);
}

TEST(the_run_traces_hbm_counters_carry_the_kernels_bytes_and_the_plans_memory)
{
    /* gpt-tiny, dp 2 x pp 2, four micro-batches under 1F1B: each chip's "hbm.used" starts at
     * its resident bytes (parameters, gradients, optimizer states), peaks at the plan's
     * saved activations on top of them (npusim run --json's memory, the largest stage) and
     * comes back to them; the "hbm" bandwidth counters integrate to the kernels' HBM bytes
     * (their spans' bytes args; GB/s x ps = 1e-3 bytes). */
    const char *t = tmp("runmem.json");
    const char *args[] = {"run", "--arch", "tpu-pod", "--model", "gpt-tiny", "--batch", "8",
                          "--dp", "2", "--pp", "2", "--microbatch", "1", "--json", "--trace", t,
                          NULL};
    harness_run r = harness_npusim_in(NULL, args);
    CU_ASSERT_EQUAL_FATAL(r.exit_status, 0);
    json_t *j = json_loads(r.out, 0, NULL);
    harness_run_free(&r);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    json_t *m = json_object_get(j, "memory");
    double resident = 0, act = (double)json_integer_value(json_object_get(m, "activations_bytes"));
    static const char *const roles[] = {"params_bytes", "grads_bytes", "optstate_bytes"};
    for (int k = 0; k < 3; k++)
        resident += (double)json_integer_value(json_object_get(m, roles[k]));
    json_decref(j);
    CU_ASSERT(act > 0);
    tdb *db;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(tdb_load(t, &db, &e), NP_OK);
    CU_ASSERT_EQUAL(db->problems, 0u);
    uint32_t used = tdb_find_str(db, "hbm.used"), hbm = tdb_find_str(db, "hbm");
    double peak = 0, low_at_peak = 0, hbm_bytes = 0, span_bytes = 0;
    size_t n_used = 0, n_hbm = 0;
    for (size_t i = 0; i < db->n_counters; i++) {
        const tdb_counter *c = &db->counters[i];
        if (c->name == used) {
            n_used++;
            if (c->max > peak)
                peak = c->max, low_at_peak = c->min;
        } else if (c->name == hbm) {
            n_hbm++;
            hbm_bytes += c->integral * 1e-3;
        }
    }
    uint32_t kernel = tdb_find_str(db, "kernel");
    for (size_t i = 0; i < db->n_slices; i++)
        if (db->slices[i].cat == kernel)
            span_bytes += db->slices[i].bytes;
    CU_ASSERT_EQUAL(n_used, 4u);
    CU_ASSERT_EQUAL(n_hbm, 4u);
    CU_ASSERT_DOUBLE_EQUAL(peak, resident + act, 0.5);
    CU_ASSERT_DOUBLE_EQUAL(low_at_peak, resident, 0.5);
    CU_ASSERT(span_bytes > 0);
    CU_ASSERT_DOUBLE_EQUAL(hbm_bytes, span_bytes, 1e-6 * span_bytes);
    tdb_free(db);
}

/* The largest value of counter `name` over the series of db (-1 when none), and how many. */
static double counter_max(const tdb *db, const char *name, size_t *n)
{
    uint32_t id = tdb_find_str(db, name);
    double mx = -1;
    *n = 0;
    for (size_t i = 0; i < db->n_counters; i++)
        if (db->counters[i].name == id) {
            (*n)++;
            if (db->counters[i].max > mx)
                mx = db->counters[i].max;
        }
    return mx;
}

TEST(the_sim_traces_occupancy_counters_are_the_programs_hbm_data_and_scratchpad_tiles)
{
    /* isa/examples/matmul_db.s: M = N = 64, K = 128 bf16 in .bss, A + B + C = 16,384 + 16,384
     * + 8,192 bytes of HBM per chip; its DMA fills the scratchpad's A0, A1 (TM x TK = 32 x 32
     * x 2 bytes each) and B0, B1 (TK x TN = 32 x 16 x 2) tiles, up to B1 + 1,024 = 6,144
     * bytes (C0 after them is written by mxu.drain, not DMA). */
    const char *mm = tmp("occ_mm.elf"), *t = tmp("occ.json");
    const char *as[] = {"asm", harness_src_path("isa/examples/matmul_db.s"), "-o", mm, "--arch",
                        "tiny", NULL};
    run_ok(as);
    const char *sim[] = {"sim", "--arch", "tiny", mm, mm, "--trace", t, NULL};
    tdb *db = trace_of(sim, t, 10, false);
    size_t n;
    CU_ASSERT_DOUBLE_EQUAL(counter_max(db, "hbm.used", &n), 40960, 0);
    CU_ASSERT_EQUAL(n, 2u); /* one per chip */
    CU_ASSERT_DOUBLE_EQUAL(counter_max(db, "core0.spad", &n), 6144, 0);
    CU_ASSERT_EQUAL(n, 2u);
    tdb_free(db);
}

TEST(the_isa_collectives_link_counters_carry_the_rings_bytes)
{
    /* A ring all-reduce of B = 1 KiB on a ring of 4 chips lowered to ISA: every rank sends
     * 2 (p - 1) = 6 segments of B / p = 256 bytes to its neighbour, so each link of the ring
     * carries 1,536 bytes (a GB/s counter's integral over ps is 1e-3 bytes). */
    const char *t = tmp("isalinks.json");
    const char *coll[] = {"collective", "--op", "all_reduce", "--algo", "ring", "--isa",
                          "--chips", "4", "-b", "1K", "-e", "1K", "--trace", t, NULL};
    tdb *db = trace_of(coll, t, 4, false);
    size_t links = 0;
    for (size_t i = 0; i < db->n_counters; i++) {
        const tdb_counter *c = &db->counters[i];
        if (db->processes[c->process].pid != TRACE_PID_SYSTEM)
            continue;
        links++;
        CU_ASSERT_DOUBLE_EQUAL(c->integral * 1e-3, 1536, 1e-6);
        CU_ASSERT_PTR_NOT_NULL(strstr(tdb_str(db, c->name), "->"));
    }
    CU_ASSERT_EQUAL(links, 4u);
    tdb_free(db);
}
