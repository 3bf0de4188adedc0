/* serve.h — a serving simulator: requests arriving over time (a trace file, or Poisson
 * arrivals with length distributions) served by one model on one chip under vLLM's
 * continuous-batching scheduler (v0's default policy: FCFS admission while kv-cache blocks,
 * the iteration's token budget and the sequence limit allow; preemption by recompute when a
 * running sequence needs a block and none is free; optional chunked prefill), each
 * iteration timed from infer.h's parts (the fast engine's kernels) cached by shape bucket;
 * the latency distributions, throughput, goodput and kv-cache occupancy of `npusim serve`.
 * docs/serving.md defines the policy, every figure and the bucketing.
 *
 *   serve_request *rq; int64_t n;
 *   serve_trace_read("trace.csv", &rq, &n, &err);             (or serve_poisson)
 *   serve_result r;
 *   serve_run(&(serve_opts){.model = &d, .cfg = &cfg, ...}, rq, n, &r, &err);
 *   ... r.ttft.p99 ...; free(rq);
 */
#ifndef NPUSIM_SIM_SERVE_H
#define NPUSIM_SIM_SERVE_H

#include <stdbool.h>
#include <stdint.h>

#include "arch.h"
#include "err.h"
#include "model.h"

/* A length distribution (tokens): `N` fixed; `uniform:A:B` integers A .. B, each equally
 * likely; `normal:MEAN:SD` and `lognormal:MEAN:SD` (the tokens' own mean and standard
 * deviation; the log's mu and sigma derived), rounded to the nearest integer and at least 1. */
typedef enum serve_dist_kind {
    SERVE_DIST_FIXED,
    SERVE_DIST_UNIFORM,
    SERVE_DIST_NORMAL,
    SERVE_DIST_LOGNORMAL
} serve_dist_kind;

typedef struct serve_dist {
    serve_dist_kind kind;
    double a, b; /* N; A, B; MEAN, SD */
} serve_dist;

/* Parses text as a distribution; NP_ERR_USAGE naming flag and the text when it is not one
 * (a count < 1, B < A, a mean <= 0 or sd < 0). */
np_status serve_dist_parse(const char *flag, const char *text, serve_dist *out, np_err *err);

/* A request: it arrives at arrival_s, its prompt has `prompt` tokens and it generates
 * `output` tokens (the first by its prefill). line: of its trace file (0: generated). */
typedef struct serve_request {
    double arrival_s;
    int64_t prompt, output;
    int64_t line;
} serve_request;

/* Reads a trace: CSV (lines `arrival_s,prompt_tokens,output_tokens`, an optional header line
 * of those names, `#` comments and blank lines skipped) or JSON lines (a file whose first
 * character that is not blank is `{`: one object a line with those three members). Sorted by
 * arrival (ties in file order). *out malloc'd, the caller's to free. NP_ERR_IO when the file
 * cannot be read, NP_ERR_FORMAT naming file:line for a line that is not a request (a
 * negative or non-numeric time, a count < 1, a missing field), or a file of no request. */
np_status serve_trace_read(const char *path, serve_request **out, int64_t *n, np_err *err);

/* n requests of Poisson arrivals at `rate` requests/s (exponential gaps, the first at the
 * first gap) with lengths drawn from prompt and output, the same for the same seed.
 * NP_ERR_USAGE for n < 1 or rate <= 0; NP_ERR_NOMEM. *out the caller's to free. */
np_status serve_poisson(double rate, int64_t n, const serve_dist *prompt,
                        const serve_dist *output, uint64_t seed, serve_request **out,
                        np_err *err);

/* One request served (serve_opts.on_finish, in the order they finish). */
typedef struct serve_req_result {
    int64_t id;               /* its index in the request array */
    double arrival_s, first_token_s, finish_s; /* times on the simulated clock */
    int64_t prompt, output;   /* as served (after the context's clamp) */
    int64_t preemptions;      /* times it was preempted (and its prefill recomputed) */
    double ttft_s;            /* first_token_s - arrival_s */
    double tpot_s;            /* (finish_s - first_token_s) / (output - 1); 0 for output 1 */
    double e2e_s;             /* finish_s - arrival_s */
} serve_req_result;

/* One iteration (serve_opts.on_iter). */
typedef struct serve_iter {
    double start_s, time_s;   /* on the simulated clock */
    int64_t seqs;             /* sequences in the batch */
    int64_t prefills;         /* of them, prefills or prompt chunks (the rest decode a token) */
    int64_t tokens;           /* tokens computed */
    int64_t kv_used;          /* blocks in use during it */
    int64_t preempted;        /* sequences preempted while forming it */
} serve_iter;

typedef struct serve_opts {
    const nn_model_desc *model;
    const arch_config *cfg;
    int tp;                   /* tensor-parallel chips (1: the only one infer.h builds) */
    int64_t kv_block;         /* tokens of a kv-cache block (>= 1) */
    int64_t kv_blocks;        /* blocks of the cache; 0: the HBM left after the weights */
    double hbm_fraction;      /* of the HBM serving may use when kv_blocks is 0 (0: 0.9) */
    int64_t max_batch_tokens; /* tokens an iteration computes at most (0: max(context, 2048)) */
    int64_t max_seqs;         /* sequences running at most (0: 256) */
    int64_t chunk;            /* chunked prefill: a prompt's tokens an iteration takes at most
                                 (0: off, a prompt is computed whole in a prefill iteration) */
    int bucket_bits;          /* shape buckets: 2^bits points an octave (integers of bits + 1
                                 significant bits) iteration times are interpolated between
                                 (-1: 2; >= 30: every shape exact) */
    const char *kernel_cache; /* (optional) the kernel timing cache file */
    double slo_ttft_s, slo_tpot_s; /* goodput's service-level objectives (0: none) */
    void (*progress)(void *ctx, double done); /* (optional) done 0 .. 1 of the requests */
    void *progress_ctx;
    /* (optional) each request as it finishes; a non-NP_OK return stops the run with it */
    np_status (*on_finish)(void *ctx, const serve_req_result *r, np_err *err);
    void *finish_ctx;
    void (*on_iter)(void *ctx, const serve_iter *it); /* (optional) each iteration */
    void *iter_ctx;
} serve_opts;

/* mean and percentiles (linear between the closest ranks, as numpy's default) */
typedef struct serve_stat {
    int64_t n;
    double mean, p50, p90, p99, max;
} serve_stat;

typedef struct serve_result {
    int64_t requests;         /* given */
    int64_t finished;         /* served to their last token */
    int64_t ignored;          /* never schedulable: longer than the token budget or the cache
                                 (vLLM ignores them too) */
    int64_t clamped;          /* prompt + output cut to the model's context */
    int64_t iterations, prefill_iterations, mixed_iterations, decode_iterations;
    int64_t preemptions;      /* preemptions (each a recompute) */
    double first_arrival_s, last_finish_s, duration_s; /* duration: last finish - first arrival */
    double busy_s;            /* the iterations' time */
    serve_stat ttft, tpot, e2e; /* seconds; tpot over requests of output > 1 */
    int64_t output_tokens, prompt_tokens;
    double output_tokens_per_s, requests_per_s; /* over duration_s */
    bool slo;                 /* an SLO was given */
    int64_t slo_met;          /* finished requests within both SLOs given */
    double goodput_rps;       /* slo_met / duration_s */
    int64_t kv_blocks, kv_block_tokens; /* the cache */
    uint64_t kv_block_bytes, weight_bytes, hbm_bytes;
    double kv_mean, kv_peak;  /* blocks in use / kv_blocks: time-weighted mean, peak */
    int64_t kv_peak_blocks;
    int64_t max_batch_tokens, max_seqs, chunk;
    int bucket_bits;
    int64_t shapes_timed;     /* bucket points timed through infer.h */
} serve_result;

/* Serves reqs[0 .. n-1] (sorted by arrival) as the scheduler above; fills *out. NP_ERR_USAGE
 * naming the flag for a bad option (--kv-block < 1, --tp other than 1, --kv-blocks 0 when the
 * weights leave no HBM), errors of infer.h's timing and of on_finish. */
np_status serve_run(const serve_opts *o, const serve_request *reqs, int64_t n, serve_result *out,
                    np_err *err);

#endif
