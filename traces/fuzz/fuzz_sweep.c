/* fuzz_sweep.c — libFuzzer harness for the sweep file (sweep_load: libyaml, the nesting and
 * document pass, duplicate keys, the one door of swept values, the points cap) and the CSV
 * reader a resume reads results with (csv_next). The input is written to a temporary file
 * (sweep_load takes a path), in $TMPDIR, else /dev/shm, else /tmp. A sweep file loads or
 * fails with a bad-input error and a message; one that loads has at most the cap of points,
 * each with NULL-terminated arguments ending in --json, and every value passes the door
 * again. The CSV reader consumes the same bytes to the end or stops with a syntax error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "csv.h"
#include "fuzz_harness.h"
#include "sweep_impl.h"

#define FUZZ_SWEEP_MAX_POINTS 4096

static void fuzz_csv(const uint8_t *data, size_t size)
{
    csv_reader r;
    csv_reader_init(&r, (const char *)data, size);
    for (;;) {
        char **f;
        size_t n;
        bool torn;
        int line;
        np_err e = {0};
        np_status st = csv_next(&r, "fuzz.csv", &f, &n, &torn, &line, &e);
        if (st != NP_OK) {
            fuzz_check_failure(st, &e);
            return;
        }
        if (!f)
            return;
        if (!n || (torn && r.p != r.end))
            abort();
        csv_fields_free(f, n);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_csv(data, size);
    static char path[4200];
    if (!path[0]) {
        const char *dir = getenv("TMPDIR");
        if (!dir || !*dir || strlen(dir) > 4096)
            dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        snprintf(path, sizeof path, "%s/npusim_fuzz_sweep_%d.yaml", dir, (int)getpid());
    }
    FILE *f = fopen(path, "wb");
    if (!f)
        return 0;
    fwrite(data, 1, size, f);
    fclose(f);
    sweep *s = NULL;
    np_err e = {0};
    np_status st = sweep_load(path, FUZZ_SWEEP_MAX_POINTS, &s, &e);
    if (st != NP_OK) {
        if (st != NP_ERR_NOMEM)
            fuzz_check_failure(st, &e);
        if (s)
            abort();
        return 0;
    }
    if (sweep_points(s) < 1 || sweep_points(s) > FUZZ_SWEEP_MAX_POINTS)
        abort();
    for (size_t p = 0; p < sweep_points(s); p++) {
        const char *const *a = sweep_point_args(s, p);
        size_t k = 0;
        while (a[k])
            k++;
        if (!k || strcmp(a[k - 1], "--json"))
            abort();
        for (size_t c = 0; c < s->n_cols; c++)
            if (s->vals[p][c] && sweep_value(NULL, s->vals[p][c], NULL, &e) != NP_OK)
                abort();
    }
    sweep_free(s);
    return 0;
}
