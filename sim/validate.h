/* validate.h — `npusim validate` as a library: published measurements of real machines
 * (validation/<suite>/<source>.csv, format in validation/README.md) loaded, each row run
 * through the library of the command that computes its figure, and ours set beside theirs.
 *
 *   val_set set;
 *   val_load_dir(val_default_dir(), &set, &err);     // every file; errors name file:line:col
 *   for (size_t f = 0; f < set.n_files; f++)
 *       for (size_t r = 0; r < set.files[f].n_rows; r++) {
 *           val_result res;
 *           val_run_row(&set.files[f], r, &(val_opts){0}, &res, &err);
 *           // res.published, res.ours, res.err_pct; !res.ran: res.why
 *       }
 *   val_set_free(&set);
 *
 * The kinds of row (validate_suites.def names the suites and their kinds):
 *   TRAIN   one training step of a GPT under the row's strategy on the file's `arch` preset
 *           with system.chips = the row's GPUs (run_job.h, `npusim run`); the step time
 *           becomes the source's own figure by the source's own FLOP formula (the `flops`
 *           column), so the comparison is of step times in the source's units;
 *   KERNEL  one kernel (`npusim kernel --op`'s spec) spread over every core of the preset's
 *           chip (krun.h, `npusim kernel`); ours = its simulated time + the row's
 *           host_overhead_us (the source's convention for what its harness adds);
 *   NCCL    one collective over every GPU of nodes x gpus_per_node (noc/coll.h, `npusim
 *           collective`), nccl-tests' bus bandwidth for sizes of 1 MiB and more, its time
 *           below (the figures the issue bounds: bandwidth at size, latency when small).
 * error = 100 x (ours - published) / published, signed: + is ours above theirs.
 */
#ifndef NPUSIM_SIM_VALIDATE_H
#define NPUSIM_SIM_VALIDATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

typedef enum val_kind { VAL_KIND_TRAIN, VAL_KIND_KERNEL, VAL_KIND_NCCL, VAL_KIND_COUNT } val_kind;

typedef struct val_suite {
    const char *name; /* "megatron-sc21": validation/'s folder and --suite's value */
    val_kind kind;
    const char *what; /* one line */
} val_suite;

extern const val_suite val_suites[];
extern const size_t val_n_suites;

/* The suite of that name, or NULL. */
const val_suite *val_suite_find(const char *name);

/* The columns of a kind's files, in order, separated by commas (the header line). */
const char *val_columns(val_kind k);

/* ---- rows ----------------------------------------------------------------------------------- */

typedef enum val_flops {
    VAL_FLOPS_MEGATRON_EQ3, /* Narayanan et al. SC21, eq. (3): 96 B s l h^2 (1 + s/6h +
                               V/16lh), the recomputed forward pass counted */
    VAL_FLOPS_MCORE_R08,    /* Megatron-Core r0.8.0, training.py num_floating_point_operations:
                               12 B s l h^2 ((1 + g/a + s/h) q/h + f/h + V/2lh), no recompute */
    VAL_FLOPS_COUNT
} val_flops;

typedef struct val_train {
    char model[64];
    double params_b;
    int64_t layers, hidden, heads, seq, vocab;
    int64_t gpus, tp, pp, dp, global_batch, micro_batch, virtual_stages;
    int recompute;          /* nn_recompute (`uniform`: Megatron-LM's whole-layer recomputation) */
    int precision;          /* 0 bf16 (bf16 or fp16 in the file: the same Tensor Core rate), 1 fp32 */
    char precision_text[8]; /* as written */
    double dropout;
    double measured;        /* TFLOP/s per GPU */
    bool sp;
    int zero;
    bool fused_attention;   /* attention `fused` (flash) */
    bool fused_softmax;     /* attention `composite`: scale, mask and softmax as one kernel
                               (FusedScaleMaskSoftmax); `unfused`: each its own */
    val_flops flops;
    int ddp;                /* nn_ddp: `torch` or `local` */
    bool p2p_blocking;      /* p2p `blocking` (Megatron-LM 2021) or `eager` */
    bool host_sync;         /* the host's synchronizations of Megatron-LM 2021's timers */
    double loss_scale;      /* static fp16 loss scale (0: none) */
    double clip_grad;       /* global gradient-norm clipping (0: none) */
    bool tp_comm_overlap;   /* Megatron-Core's --tp-comm-overlap (needs sp) */
    bool overlap_param_gather; /* Megatron-Core's --overlap-param-gather (needs zero 1 or 2) */
} val_train;

typedef struct val_kernel {
    char op[32];
    char shape[256];        /* the spec's keys: "m=64 n=12288 k=12288" */
    char dtype[8];
    double measured_us, host_overhead_us;
} val_kernel;

typedef struct val_nccl {
    int64_t nodes, gpus_per_node;
    int op;                 /* coll_op */
    char op_text[32], dtype[16];
    uint32_t elem_bytes;
    uint64_t bytes;
    double time_us, busbw_gb_s;
} val_nccl;

typedef struct val_row {
    int line;               /* 1-based line of the file */
    int index;              /* 1-based row of the file: the row's id is "<file id>#<index>" */
    union {
        val_train t;
        val_kernel k;
        val_nccl n;
    };
} val_row;

/* ---- files ---------------------------------------------------------------------------------- */

#define VAL_MAX_ASSUMED 32

typedef struct val_file {
    char *path;
    char id[64];              /* the file name without .csv */
    const val_suite *suite;
    /* the provenance block (validation/README.md); a key given on several lines is their
     * lines joined by "\n"; NULL where an optional key is absent */
    char *title, *source, *where, *machine, *config, *command, *arch, *commit, *notes;
    char *algo;               /* nccl (optional): the algorithm the authors forced, as
                                 `npusim collective --algo` names it; NULL: the tuner's */
    char *assumed[VAL_MAX_ASSUMED];
    int n_assumed;
    val_row *rows;
    size_t n_rows;
} val_file;

typedef struct val_set {
    val_file *files;          /* in suite order (validate_suites.def), then by id */
    size_t n_files;
} val_set;

/* The folder of the data files: $NPUSIM_VALIDATION_DIR when set and not empty, else the
 * source tree's validation/ (compiled in). */
const char *val_default_dir(void);

/* Loads path as a file of suite s into *f (free with val_file_free). Errors, each as
 * "path:line:col: message" (np_err's position): NP_ERR_IO (cannot read), NP_ERR_SYNTAX (a
 * provenance line without "key: value", a header other than the kind's columns, a row with
 * the wrong number of fields, a quoted field), NP_ERR_UNKNOWN_KEY (an unknown provenance key,
 * with a did-you-mean; an unknown op, dtype, preset or word of a column), NP_ERR_MISSING (a
 * required key; no rows), NP_ERR_RANGE / NP_ERR_SYNTAX (a number: the column named),
 * NP_ERR_INCONSISTENT (a row that contradicts itself: gpus != tp x pp x dp, ...). */
np_status val_load_file(const char *path, const val_suite *s, val_file *f, np_err *err);
void val_file_free(val_file *f);

/* Every <suite>/<id>.csv of dir, for each suite of validate_suites.def (a suite without a
 * folder has no files); a folder of dir that names no suite, or a file in it that is not a
 * .csv, is NP_ERR_UNKNOWN_KEY. The first bad file's error. */
np_status val_load_dir(const char *dir, val_set *out, np_err *err);
void val_set_free(val_set *s);

/* "<file id>#<index>" */
const char *val_row_id(const val_file *f, const val_row *r, char *buf, size_t n);

/* The row's configuration in a few words, e.g. "GPT 1.7B, 32 GPUs tp1 pp1 dp32, mb 16" */
const char *val_row_config(const val_file *f, const val_row *r, char *buf, size_t n);

/* The figure a row is compared on ("TFLOP/s per GPU", "µs", "GB/s busbw") and its published
 * value. */
const char *val_row_figure(const val_file *f, const val_row *r);
double val_row_published(const val_file *f, const val_row *r);

/* Whether the row is of the quick subset (tests/test_validate.c and --quick): a few GEMMs
 * and memory-bound ops of kernels-a100 (val_quick_kernels) and every 8-GPU one-node row of
 * nccl; no training row (each takes minutes). */
bool val_row_is_quick(const val_file *f, const val_row *r);
extern const char *const val_quick_kernels[];

/* ---- running -------------------------------------------------------------------------------- */

typedef struct val_opts {
    const char *kernel_cache; /* (optional) TRAIN: run_job's timing cache file */
    /* (optional) progress of a long row: what is being done and the fraction done */
    void (*progress)(void *ctx, const char *what, double done);
    void *progress_ctx;
} val_opts;

typedef struct val_result {
    bool ran;                /* false: npusim cannot run the row yet (why says why) */
    char why[512];
    double published, ours;  /* in the figure's unit */
    double err_pct;          /* 100 (ours - published) / published */
    double sim_s;            /* the simulated time behind ours: the step, the kernel (without
                                the host overhead), the collective */
    double wall_s;           /* host time the row took (not deterministic) */
} val_result;

/* Runs row r of f and fills *out. A row that cannot run (the plan does not fit in HBM, a
 * kernel the compiler cannot build, ...) is NP_OK with out->ran false and the reason; only
 * NP_ERR_NOMEM and NP_ERR_INTERNAL (a bug) are errors. */
np_status val_run_row(const val_file *f, size_t r, const val_opts *o, val_result *out,
                      np_err *err);

/* ---- results of earlier runs (validate_results.c) ------------------------------------------- */

/* The rows of set, all files together; and row r of file f's place among them (f a file of
 * set): the index into the arrays of val_results_load. */
size_t val_set_rows(const val_set *set);
size_t val_row_index(const val_set *set, const val_file *f, size_t r);
/* The file of the row at index `at` (< val_set_rows) and its row in it (*r). */
const val_file *val_row_at(const val_set *set, size_t at, size_t *r);

/* Reads path, the output of an earlier `npusim validate --json` (of any selection of rows),
 * into out[val_row_index(..)] and marks have[..] true for each row it holds (a row already
 * had is overwritten: the last file given wins). out and have have val_set_rows(set) entries.
 * The row's error is recomputed from ours and the data's published figure. Errors name path:
 * NP_ERR_IO (cannot read), NP_ERR_SYNTAX (not JSON: line and column), NP_ERR_FORMAT (JSON
 * but not validate's document), NP_ERR_UNKNOWN_KEY (a row the data does not have),
 * NP_ERR_INCONSISTENT (a published figure other than the data's: results of other data
 * files), NP_ERR_MISSING (a row without its result, as --list --json prints). */
np_status val_results_load(const val_set *set, const char *path, val_result *out, bool *have,
                           np_err *err);

/* ---- rows in worker processes (validate_pool.c) ---------------------------------------------- */

/* A pool that runs the rows order[0..n) of set (val_row_index values) in forked worker
 * processes, at most jobs (>= 1) at once, each with val_run_row and o (whose progress callback
 * the workers do not call; o may be NULL). order must outlive the pool. NP_ERR_NOMEM;
 * NP_ERR_RANGE for jobs < 1. Nothing runs before the first val_pool_get. */
typedef struct val_pool val_pool;
np_status val_pool_create(const val_set *set, const size_t *order, size_t n, int jobs,
                          const val_opts *o, val_pool **out, np_err *err);

/* The result of order[k]: launches rows in order until jobs run, waits until order[k]'s
 * worker has ended, then returns val_run_row's status (and *err) and *res as the row gave them.
 * Rows are launched ahead of k (the next free slots), so asking for k = 0, 1, 2, ... keeps
 * jobs workers busy. NP_ERR_IO when a worker cannot be started; NP_ERR_INTERNAL when one dies
 * without its result (the row and the signal named). */
np_status val_pool_get(val_pool *p, size_t k, val_result *res, np_err *err);

/* The workers running now. */
size_t val_pool_running(const val_pool *p);

/* Stops (SIGTERM) and reaps the workers still running; frees p (NULL: nothing). */
void val_pool_free(val_pool *p);

/* The FLOPs of one training step of row t by the formula of its flops column. */
double val_train_flops(const val_train *t);

/* ---- statistics ----------------------------------------------------------------------------- */

typedef struct val_stats {
    size_t rows, ran;            /* rows seen; rows that ran (the others cannot run yet) */
    double mean_abs_pct;         /* over the rows that ran */
    double median_abs_pct;
    double worst_pct;            /* the signed error of largest magnitude */
    size_t worst;                /* its index in the results given */
    double within10_pct, within20_pct; /* share of rows within 10 % and 20 % */
} val_stats;

/* The statistics of n results (rows that did not run are counted, not averaged). */
void val_stats_of(const val_result *res, size_t n, val_stats *out);

#endif
