/* ksuite.h — a suite of kernels for the tile choice (bench/kernel_suite.txt): per kernel the
 * cost model's choice and the tuned one, both simulated, and the model's error. The bench
 * (bench/bench_kernel_suite) prints it; tests/test_compiler_suite.c checks issue 10's
 * criteria on it.
 *
 * The file: one kernel a line, "ARCH CORES OP-SPEC" (`npusim kernel --op` text), '#' starts a
 * comment. */
#ifndef NPUSIM_KSUITE_H
#define NPUSIM_KSUITE_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "kernel.h"

typedef struct ksuite_row {
    char arch[64];
    uint32_t cores;
    char op[256];
    /* results (ksuite_run) */
    uint64_t est_cycles;    /* the cost model's estimate of its own choice */
    uint64_t model_cycles;  /* its choice, simulated */
    uint64_t tuned_cycles;  /* the fastest of the tuner's candidates, simulated */
    unsigned tried;
    double err_pct;         /* 100 x (est - model) / model */
    double gain_pct;        /* 100 x (1 - tuned / model): how much faster tuning is */
    kc_tiling tuned;        /* the fastest candidate's tiling attributes */
} ksuite_row;

/* Reads the suite at path into *rows (malloc'd, *n of them). NP_ERR_IO, NP_ERR_SYNTAX with
 * the file and line, NP_ERR_NOMEM. */
np_status ksuite_load(const char *path, ksuite_row **rows, size_t *n, np_err *err);

/* Runs row r: its kernel tuned over `top` candidates (krun_tune); fills the results. Errors of
 * the architecture, the op text and the runs, prefixed with the row's op. */
np_status ksuite_run(ksuite_row *r, unsigned top, np_err *err);

/* The suite's summary: the model's absolute error distribution and the tuning gains. */
typedef struct ksuite_summary {
    size_t n;
    double err_min, err_p25, err_median, err_p75, err_max; /* signed % */
    double abs_err_mean, abs_err_max;
    size_t within_15;       /* rows whose |err| <= 15% */
    size_t tuned_slower;    /* rows where tuning lost (must be 0) */
    size_t gain_10;         /* rows where tuning is >= 10% faster */
} ksuite_summary;

void ksuite_summarize(const ksuite_row *rows, size_t n, ksuite_summary *s);

#endif
