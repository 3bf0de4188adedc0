/* sweep.h — parameter sweeps (`npusim sweep`; docs/sweeps.md): a YAML file names an npusim
 * subcommand, the axes to vary and the metrics to keep; every point runs as its own npusim
 * process (a local pool of -j workers, and across machines with MPI when built with it);
 * every finished point is appended at once, as one write, to a CSV file and a JSON-lines file
 * beside it, so a killed sweep resumes (--resume) without losing a finished point or running
 * one twice. When the sweep ends both files are rewritten in point order, so a sweep gives
 * the same bytes however it was run (-j, resumed, MPI).
 *
 *   command: [layer, --gemm, "512,256,128"]   # the npusim subcommand and fixed arguments
 *   arch: tiny                                # (optional) --arch
 *   grid:                                     # every combination, the last axis fastest
 *     core.array_rows: [8, 16, 32]            #   section.key: --set section.key=V
 *     --cores: [1, 2]                         #   --flag: --flag V
 *   zip:                                      # (optional) axes that vary together (one axis
 *     core.array_cols: [8, 16]                #   of the grid, after its own axes)
 *     core.sram_bytes: [64 KiB, 128 KiB]
 *   points:                                   # (optional) more points, each given whole
 *     - {core.array_rows: 64, --cores: 4}
 *   metrics:                                  # name: path into the command's --json output
 *     cycles: layers/0/total_cycles           #   (keys and indices by '/'; -1: the last)
 *   pareto: {cycles: min}                     # (optional) objectives: min or max
 *
 * Rows: point, status (ok or error), the axes' values (their text as written), the metrics,
 * error (the failed run's exit status and first line of stderr). The JSON lines also hold
 * each point's npusim arguments ("args"): --resume takes a row only when its point has the
 * same values and arguments in this sweep. */
#ifndef NPUSIM_SWEEP_H
#define NPUSIM_SWEEP_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

typedef struct sweep sweep;

/* The default cap on a sweep's points (sweep_load's max_points; --max-points). */
#define SWEEP_MAX_POINTS_DEFAULT 100000u

/* Reads and checks a sweep file: errors name the file, line and column (NP_ERR_SYNTAX, also
 * for a second YAML document; NP_ERR_UNKNOWN_KEY for a top-level key or an architecture key
 * that does not exist; NP_ERR_TYPE; NP_ERR_MISSING for no command or metrics;
 * NP_ERR_INCONSISTENT for zip axes of different lengths; NP_ERR_DUPLICATE for a key given
 * twice in a mapping or an axis in grid and zip; NP_ERR_RANGE for nesting deeper than 16
 * levels, more points than max_points (counted before any is made) and a value refused by
 * the one door: NaN, infinities, out of range, hexadecimal), NP_ERR_IO (not a regular file,
 * over 16 MiB), NP_ERR_NOMEM. */
np_status sweep_load(const char *path, size_t max_points, sweep **out, np_err *err);
void sweep_free(sweep *s);

/* Its points, and the npusim arguments of point i (after the program name; NULL-terminated,
 * valid until sweep_free). */
size_t sweep_points(const sweep *s);
const char *const *sweep_point_args(const sweep *s, size_t i);

/* What one sweep run did. */
typedef struct sweep_result {
    size_t points, ran, resumed, failed;
    size_t *pareto;   /* the front's points, in point order (malloc'd; free with free) */
    size_t n_pareto;
} sweep_result;

/* (optional) called after each finished point with the counts so far (all ranks' points). */
typedef void (*sweep_progress_fn)(void *ctx, size_t done, size_t total, size_t failed);

typedef struct sweep_opts {
    const char *npusim;    /* the executable each point runs */
    const char *csv_path;  /* the JSON lines go to csv_path with .csv replaced by .jsonl */
    unsigned jobs;         /* worker processes (>= 1) */
    bool resume;           /* continue the files; without it they must not exist */
    sweep_progress_fn progress;
    void *progress_ctx;
} sweep_opts;

/* Runs every point not yet in the files (the local pool; with MPI, this process's share,
 * rank 0 gathering every row). The files must be regular files or not exist. NP_ERR_IO (a
 * file that is a device, directory or symlink, cannot be read or written — with the reason
 * —, or exists without resume; an interrupted sweep), NP_ERR_INCONSISTENT (resumed files
 * written by another sweep or by this one before its grid was edited: their header, a row's
 * values or its arguments differ from this sweep's point of that number), NP_ERR_SYNTAX (a
 * malformed row before the last), NP_ERR_NOMEM; a point that fails is a row with status
 * error (out->failed counts them), not an error. A point cut short by an interrupt is not
 * recorded, and a recorded one ("exit 130" or "exit 143", from a sweep before this rule) is
 * run again on resume. */
np_status sweep_run(const sweep *s, const sweep_opts *o, sweep_result *out, np_err *err);

/* With MPI: whether this process is rank 0 (the one that writes and reports); true without. */
bool sweep_is_root(void);

/* The JSON-lines path of a CSV path (".csv" replaced or ".jsonl" appended): malloc'd (free
 * it); NULL when out of memory. */
char *sweep_jsonl_path(const char *csv_path);

#endif
