/* test_trace.c — the Chrome/Perfetto trace writer (traces/trace.h): what it writes is read
 * back with zlib and jansson and compared with what was given. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include <jansson.h>

#include "harness.h"
#include "trace.h"

/* The whole (possibly gzip-compressed) file, parsed. */
static json_t *read_trace(const char *path)
{
    gzFile f = gzopen(path, "rb"); /* reads plain files as they are */
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    static char buf[1 << 16];
    int n = gzread(f, buf, sizeof buf - 1);
    gzclose(f);
    CU_ASSERT_FATAL(n > 0);
    buf[n] = '\0';
    json_error_t je;
    json_t *j = json_loads(buf, 0, &je);
    CU_ASSERT_PTR_NOT_NULL(j);
    return j;
}

static void write_and_check(const char *path, bool gz)
{
    trace_writer *w;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(trace_open(path, &w, &e), NP_OK);
    trace_name_process(w, 3, "chip \"3\"");
    trace_name_thread(w, 3, 7, "core0.dma\\n");
    /* 123456789012 ps = 123456.789012 us; 1 ps = 0.000001 us */
    trace_slice(w, 3, 7, "dma.copy", "dma", 123456789012ull, 1, json_pack("{s:i}", "pc", 4));
    trace_slice(w, 3, 7, "k", "kernel", 0, 356000, NULL);
    CU_ASSERT_EQUAL(trace_events(w), 4u);
    CU_ASSERT_EQUAL_FATAL(trace_close(w, &e), NP_OK);
    FILE *f = fopen(path, "rb");
    unsigned char magic[2] = {0};
    CU_ASSERT_EQUAL(fread(magic, 1, 2, f), 2u);
    fclose(f);
    CU_ASSERT_EQUAL(magic[0] == 0x1f && magic[1] == 0x8b, gz); /* the gzip magic */
    json_t *j = read_trace(path);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(j, "displayTimeUnit")), "ns");
    json_t *ev = json_object_get(j, "traceEvents");
    CU_ASSERT_EQUAL_FATAL(json_array_size(ev), 4u);
    json_t *p = json_array_get(ev, 0), *t = json_array_get(ev, 1), *s = json_array_get(ev, 2);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(p, "ph")), "M");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_object_get(p, "args"), "name")),
                           "chip \"3\"");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_object_get(t, "args"), "name")),
                           "core0.dma\\n");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(s, "ph")), "X");
    CU_ASSERT_DOUBLE_EQUAL(json_real_value(json_object_get(s, "ts")), 123456.789012, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(json_real_value(json_object_get(s, "dur")), 0.000001, 1e-12);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(s, "pid")), 3);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(s, "tid")), 7);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(json_object_get(s, "args"), "pc")), 4);
    json_decref(j);
}

TEST(a_trace_reads_back_as_the_events_written_plain_and_gzipped)
{
    char dir[] = "/tmp/npusim_trace_XXXXXX";
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
    char plain[256], gz[256];
    snprintf(plain, sizeof plain, "%s/t.json", dir);
    snprintf(gz, sizeof gz, "%s/t.json.gz", dir);
    write_and_check(plain, false);
    write_and_check(gz, true);
    remove(plain);
    remove(gz);
    rmdir(dir);
}

TEST(a_trace_that_cannot_be_created_is_an_io_error_naming_the_file)
{
    trace_writer *w;
    np_err e = {0};
    CU_ASSERT_EQUAL(trace_open("/nonexistent-dir/t.json", &w, &e), NP_ERR_IO);
    CU_ASSERT_PTR_NULL(w);
    CU_ASSERT_STRING_EQUAL(e.file, "/nonexistent-dir/t.json");
}
