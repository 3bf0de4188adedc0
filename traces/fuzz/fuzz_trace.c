/* fuzz_trace.c — libFuzzer harness for the trace reader and analyzer (tdb_load, which
 * streams the file through trace_read, then tstats_compute and tstats_json). The input is a
 * trace file, written to a temporary file first (the reader takes a path; gzip or plain), in
 * $TMPDIR, else /dev/shm, else /tmp. It must load or fail with a bad-input error and a message
 * naming the file; a trace that loads is analyzed without failing, its slices within its
 * processes' threads, and its figures are JSON. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_harness.h"
#include "trace_db.h"
#include "trace_stats.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char path[4200];
    if (!path[0]) { /* in memory when the system has it: a disk write per input is most of a run */
        const char *dir = getenv("TMPDIR");
        if (!dir || !*dir || strlen(dir) > 4096)
            dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        snprintf(path, sizeof path, "%s/npusim_fuzz_trace_%d.json", dir, (int)getpid());
    }
    FILE *f = fopen(path, "wb");
    if (!f)
        return 0;
    fwrite(data, 1, size, f);
    fclose(f);
    tdb *db = NULL;
    np_err e = {0};
    np_status st = tdb_load(path, &db, &e);
    if (st != NP_OK) {
        fuzz_check_failure(st, &e);
        if (db)
            abort();
        return 0;
    }
    tstats s;
    st = tstats_compute(db, &s, &e);
    if (st != NP_OK) {
        fuzz_check_failure(st, &e);
    } else {
        json_t *j = tstats_json(db, &s, 10, 100);
        if (!j)
            abort(); /* a loaded trace's figures are JSON (its names are UTF-8) */
        char *text = json_dumps(j, 0);
        if (!text)
            abort();
        free(text);
        json_decref(j);
        tstats_free(&s);
    }
    tdb_free(db);
    return 0;
}
