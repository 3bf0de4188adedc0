/* cmd_serve.c — `npusim serve`: requests from a trace file or Poisson arrivals served by one
 * model on one chip under vLLM's continuous batching: latency distributions (TTFT, TPOT,
 * end-to-end), throughput, goodput under an SLO, kv-cache occupancy, preemptions. The
 * simulation is sim/serve.h; this file parses options and prints. docs/serving.md defines
 * every figure. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "human.h"
#include "serve.h"

#define SERVE_MAX_SETS 64

const char cmd_serve_usage[] =
    "usage: npusim serve --model M [--arch PRESET|FILE] [--set SECTION.KEY=VALUE ...] [--tp T]\n"
    "                    (--trace FILE | --rate R --requests N --prompt DIST --output DIST\n"
    "                    [--seed S]) [--kv-block B] [--kv-blocks N] [--max-batch-tokens N]\n"
    "                    [--max-seqs N] [--chunked-prefill C] [--slo-ttft MS] [--slo-tpot MS]\n"
    "                    [--bucket-bits K] [--kernel-cache FILE] [--json | --csv]\n"
    "\n"
    "  --model M       a gpt or llama model of the zoo, a model file or a Hugging Face config\n"
    "  --arch A        architecture preset or YAML file (default: " CLI_DEFAULT_ARCH ")\n"
    "  --set K=V       override one config key (repeatable)\n"
    "  --tp T          tensor-parallel chips (only 1 so far)\n"
    "  --trace FILE    requests from FILE: CSV lines arrival_s,prompt_tokens,output_tokens\n"
    "                  (optional header) or JSON lines with those members (--requests FILE\n"
    "                  too, when FILE is not a number)\n"
    "  --rate R        Poisson arrivals at R requests/s ...\n"
    "  --requests N    ... N of them (default 1000)\n"
    "  --prompt DIST   prompt tokens: N, uniform:A:B, normal:MEAN:SD or lognormal:MEAN:SD\n"
    "  --output DIST   output tokens (the first by the prefill), the same forms\n"
    "  --seed S        the generator's seed (default 1): the same seed, the same requests\n"
    "  --kv-block B    tokens of a kv-cache block (default 16, vLLM's)\n"
    "  --kv-blocks N   blocks of the cache (default: 90 % of the HBM less the weights)\n"
    "  --max-batch-tokens N  tokens an iteration computes at most (default max(context, 2048))\n"
    "  --max-seqs N    sequences running at most (default 256)\n"
    "  --chunked-prefill C  split prompts into chunks of at most C tokens, batched with\n"
    "                  decodes (default: off, prefill iterations apart)\n"
    "  --slo-ttft MS   goodput counts requests whose time to first token is at most MS ms\n"
    "  --slo-tpot MS   ... and whose time per output token is at most MS ms\n"
    "  --bucket-bits K 2^K shape buckets an octave, iteration times interpolated between\n"
    "                  them (default 2; 30: every shape timed exactly)\n"
    "  --kernel-cache F  keep kernel timings in file F (as npusim run does)\n"
    "  --json          print one object with exact values (fields in docs/serving.md)\n"
    "  --csv           print one CSV row per request as it finishes instead of the summary\n";

static np_status parse_ms(const char *flag, const char *text, double *s, np_err *err)
{
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || errno || !isfinite(v) || v <= 0 || v > 1e9 ||
        (*end && strcmp(end, "ms") != 0))
        return np_err_set(err, NP_ERR_USAGE, "%s '%s': expected milliseconds > 0", flag, text);
    *s = v * 1e-3;
    return NP_OK;
}

static np_status csv_row(void *ctx, const serve_req_result *r, np_err *err)
{
    (void)ctx, (void)err;
    printf("%" PRId64 ",%.9f,%" PRId64 ",%" PRId64 ",%.9f,%.9f,%.9f,%.9f,%" PRId64 "\n", r->id,
           r->arrival_s, r->prompt, r->output, r->ttft_s, r->tpot_s, r->e2e_s, r->finish_s,
           r->preemptions);
    fflush(stdout);
    return NP_OK;
}

static json_t *stat_json(const serve_stat *s)
{
    return json_pack("{s:I, s:f, s:f, s:f, s:f, s:f}", "n", (json_int_t)s->n, "mean", s->mean,
                     "p50", s->p50, "p90", s->p90, "p99", s->p99, "max", s->max);
}

static json_t *result_json(const char *model, const char *arch, const serve_result *r,
                           const serve_opts *o)
{
    json_t *j = json_pack("{s:s, s:s, s:i}", "model", model, "arch", arch, "tp", o->tp);
    struct { const char *k; int64_t v; } ints[] = {
        {"requests", r->requests}, {"finished", r->finished}, {"ignored", r->ignored},
        {"clamped", r->clamped}, {"iterations", r->iterations},
        {"prefill_iterations", r->prefill_iterations}, {"decode_iterations",
        r->decode_iterations}, {"mixed_iterations", r->mixed_iterations},
        {"preemptions", r->preemptions}, {"prompt_tokens", r->prompt_tokens},
        {"output_tokens", r->output_tokens}, {"kv_blocks", r->kv_blocks},
        {"kv_block_tokens", r->kv_block_tokens}, {"kv_block_bytes", (int64_t)r->kv_block_bytes},
        {"weight_bytes", (int64_t)r->weight_bytes}, {"hbm_bytes", (int64_t)r->hbm_bytes},
        {"kv_peak_blocks", r->kv_peak_blocks}, {"max_batch_tokens", r->max_batch_tokens},
        {"max_seqs", r->max_seqs}, {"chunked_prefill", r->chunk},
        {"bucket_bits", r->bucket_bits}, {"shapes_timed", r->shapes_timed}};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        json_object_set_new(j, ints[i].k, json_integer((json_int_t)ints[i].v));
    struct { const char *k; double v; } reals[] = {
        {"first_arrival_s", r->first_arrival_s}, {"last_finish_s", r->last_finish_s},
        {"duration_s", r->duration_s}, {"busy_s", r->busy_s},
        {"output_tokens_per_s", r->output_tokens_per_s}, {"requests_per_s", r->requests_per_s},
        {"kv_mean", r->kv_mean}, {"kv_peak", r->kv_peak}};
    for (size_t i = 0; i < sizeof reals / sizeof reals[0]; i++)
        json_object_set_new(j, reals[i].k, json_real(reals[i].v));
    json_object_set_new(j, "ttft_s", stat_json(&r->ttft));
    json_object_set_new(j, "tpot_s", stat_json(&r->tpot));
    json_object_set_new(j, "e2e_s", stat_json(&r->e2e));
    if (r->slo) {
        json_object_set_new(j, "slo_ttft_s", o->slo_ttft_s > 0 ? json_real(o->slo_ttft_s)
                                                                : json_null());
        json_object_set_new(j, "slo_tpot_s", o->slo_tpot_s > 0 ? json_real(o->slo_tpot_s)
                                                                : json_null());
        json_object_set_new(j, "slo_met", json_integer((json_int_t)r->slo_met));
        json_object_set_new(j, "goodput_requests_per_s", json_real(r->goodput_rps));
    }
    return j;
}

static void print_stat(const char *what, const serve_stat *s)
{
    char a[5][32];
    printf("  %-22s %10s %10s %10s %10s %10s\n", what, np_human_s(s->mean, a[0], 32),
           np_human_s(s->p50, a[1], 32), np_human_s(s->p90, a[2], 32),
           np_human_s(s->p99, a[3], 32), np_human_s(s->max, a[4], 32));
}

static void result_print(const char *model, const char *arch, const char *source,
                         const serve_result *r, const serve_opts *o)
{
    char a[32], b[32], c[32], d[32], e[32];
    printf("%s on %s, one chip: %s\n", model, arch, source);
    printf("  kv cache       %s blocks of %" PRId64 " tokens (%s each, %s), weights %s, "
           "HBM %s\n", np_human_int(r->kv_blocks, a, sizeof a), r->kv_block_tokens,
           np_human_bytes(r->kv_block_bytes, b, sizeof b),
           np_human_bytes(r->kv_block_bytes * (uint64_t)r->kv_blocks, c, sizeof c),
           np_human_bytes(r->weight_bytes, d, sizeof d), np_human_bytes(r->hbm_bytes, e, sizeof e));
    printf("  scheduler      vLLM v0 policy: at most %s sequences and %s tokens an iteration, ",
           np_human_int(r->max_seqs, a, sizeof a), np_human_int(r->max_batch_tokens, b, sizeof b));
    if (r->chunk)
        printf("chunked prefill of %s tokens\n", np_human_int(r->chunk, a, sizeof a));
    else
        printf("prefill iterations apart\n");
    char f[32], g[32], h[32], k[32], l[32];
    printf("  served         %s of %s requests (%s ignored, %s clamped to the context) in %s: "
           "%s iterations (%s prefill, %s decode, %s mixed), %s preemption%s\n",
           np_human_int(r->finished, a, sizeof a), np_human_int(r->requests, b, sizeof b),
           np_human_int(r->ignored, c, sizeof c), np_human_int(r->clamped, d, sizeof d),
           np_human_s(r->duration_s, e, sizeof e), np_human_int(r->iterations, f, sizeof f),
           np_human_int(r->prefill_iterations, g, sizeof g),
           np_human_int(r->decode_iterations, h, sizeof h),
           np_human_int(r->mixed_iterations, k, sizeof k),
           np_human_int(r->preemptions, l, sizeof l), r->preemptions == 1 ? "" : "s");
    printf("  busy           %s of the %s (%.1f %%)\n", np_human_s(r->busy_s, a, sizeof a),
           np_human_s(r->duration_s, b, sizeof b),
           r->duration_s > 0 ? 100 * r->busy_s / r->duration_s : 0.0);
    printf("  throughput     %s output, %s\n",
           np_human_si(r->output_tokens_per_s, "token/s", a, sizeof a),
           np_human_si(r->requests_per_s, "request/s", b, sizeof b));
    if (r->slo) {
        printf("  goodput        %s within", np_human_si(r->goodput_rps, "request/s", a, sizeof a));
        if (o->slo_ttft_s > 0)
            printf(" TTFT %s", np_human_s(o->slo_ttft_s, b, sizeof b));
        if (o->slo_tpot_s > 0)
            printf("%s TPOT %s", o->slo_ttft_s > 0 ? " and" : "",
                   np_human_s(o->slo_tpot_s, c, sizeof c));
        printf(" (%s of %s requests)\n", np_human_int(r->slo_met, a, sizeof a),
               np_human_int(r->finished, b, sizeof b));
    }
    printf("  kv cache used  %.1f %% mean (time-weighted), %.1f %% peak (%s blocks)\n",
           100 * r->kv_mean, 100 * r->kv_peak, np_human_int(r->kv_peak_blocks, a, sizeof a));
    if (r->bucket_bits >= 30)
        printf("  shapes timed   %s (every shape exact)\n",
               np_human_int(r->shapes_timed, a, sizeof a));
    else
        printf("  shapes timed   %s (%d buckets an octave)\n",
               np_human_int(r->shapes_timed, a, sizeof a), 1 << r->bucket_bits);
    printf("  %-22s %10s %10s %10s %10s %10s\n", "latency", "mean", "p50", "p90", "p99", "max");
    print_stat("time to first token", &r->ttft);
    if (r->tpot.n)
        print_stat("time per output token", &r->tpot);
    print_stat("end-to-end", &r->e2e);
}

static bool is_count(const char *s)
{
    return *s && strspn(s, "0123456789") == strlen(s);
}

np_status cmd_serve(int argc, char **argv, np_err *err)
{
    static const struct option longopts[] = {
        {"model", required_argument, NULL, 'm'},  {"arch", required_argument, NULL, 'a'},
        {"set", required_argument, NULL, 's'},    {"tp", required_argument, NULL, 't'},
        {"trace", required_argument, NULL, 'T'},  {"rate", required_argument, NULL, 'r'},
        {"requests", required_argument, NULL, 'n'}, {"prompt", required_argument, NULL, 'p'},
        {"output", required_argument, NULL, 'o'}, {"seed", required_argument, NULL, 'S'},
        {"kv-block", required_argument, NULL, 'k'}, {"kv-blocks", required_argument, NULL, 'B'},
        {"max-batch-tokens", required_argument, NULL, 'M'},
        {"max-seqs", required_argument, NULL, 'q'},
        {"chunked-prefill", required_argument, NULL, 'c'},
        {"slo-ttft", required_argument, NULL, 'f'}, {"slo-tpot", required_argument, NULL, 'g'},
        {"bucket-bits", required_argument, NULL, 'b'},
        {"kernel-cache", required_argument, NULL, 'K'}, {"json", no_argument, NULL, 'j'},
        {"csv", no_argument, NULL, 'C'}, {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    const char *model = NULL, *arch_name = CLI_DEFAULT_ARCH, *trace = NULL, *rate_s = NULL;
    const char *prompt_s = NULL, *output_s = NULL;
    const char *sets[SERVE_MAX_SETS];
    size_t n_sets = 0;
    uint64_t tp = 1, requests = 0, seed = 1, block = 16, blocks = 0, max_tokens = 0;
    uint64_t max_seqs = 0, chunk = 0, bits = 2;
    bool json = false, csv = false;
    serve_opts o = {.bucket_bits = -1};
    int c;
    cli_getopt_reset();
    while ((c = cli_getopt(argc, argv, "h", longopts, err)) != -1) {
        np_status st = NP_OK;
        switch (c) {
        case 'm': model = optarg; break;
        case 'a': arch_name = optarg; break;
        case 's': st = cli_add_set(sets, &n_sets, SERVE_MAX_SETS, optarg, err); break;
        case 't': st = cli_parse_u64("--tp", optarg, 1, 1 << 20, &tp, err); break;
        case 'T': trace = optarg; break;
        case 'r': rate_s = optarg; break;
        case 'n':
            if (is_count(optarg))
                st = cli_parse_u64("--requests", optarg, 1, 100000000, &requests, err);
            else
                trace = optarg;
            break;
        case 'p': prompt_s = optarg; break;
        case 'o': output_s = optarg; break;
        case 'S': st = cli_parse_u64("--seed", optarg, 0, UINT64_MAX, &seed, err); break;
        case 'k': st = cli_parse_u64("--kv-block", optarg, 1, 1 << 16, &block, err); break;
        case 'B': st = cli_parse_u64("--kv-blocks", optarg, 1, INT64_MAX, &blocks, err); break;
        case 'M': st = cli_parse_u64("--max-batch-tokens", optarg, 1, 1 << 30, &max_tokens, err);
                  break;
        case 'q': st = cli_parse_u64("--max-seqs", optarg, 1, 1 << 24, &max_seqs, err); break;
        case 'c': st = cli_parse_u64("--chunked-prefill", optarg, 1, 1 << 30, &chunk, err); break;
        case 'f': st = parse_ms("--slo-ttft", optarg, &o.slo_ttft_s, err); break;
        case 'g': st = parse_ms("--slo-tpot", optarg, &o.slo_tpot_s, err); break;
        case 'b': st = cli_parse_u64("--bucket-bits", optarg, 0, 30, &bits, err);
                  o.bucket_bits = (int)bits;
                  break;
        case 'K': o.kernel_cache = optarg; break;
        case 'j': json = true; break;
        case 'C': csv = true; break;
        case 'h': cli_print_usage(cli_find("serve")); return NP_OK;
        default: return err->status;
        }
        if (st != NP_OK)
            return st;
    }
    if (optind < argc)
        return np_err_set(err, NP_ERR_USAGE, "unexpected argument '%s'", argv[optind]);
    if (!model)
        return np_err_set(err, NP_ERR_USAGE, "--model is required (a gpt or llama model)");
    if (json && csv)
        return np_err_set(err, NP_ERR_USAGE, "--json and --csv: give one");
    if (trace && (rate_s || prompt_s || output_s || requests))
        return np_err_set(err, NP_ERR_USAGE, "--trace: the requests come from the file; "
                          "--rate, --requests, --prompt and --output generate them instead");
    if (!trace && (!rate_s || !prompt_s || !output_s))
        return np_err_set(err, NP_ERR_USAGE, "give --trace FILE, or --rate R with --prompt "
                          "DIST and --output DIST (and --requests N)");
    serve_request *rq = NULL;
    int64_t n = 0;
    char source[256];
    if (trace) {
        if (serve_trace_read(trace, &rq, &n, err) != NP_OK)
            return err->status;
        snprintf(source, sizeof source, "%" PRId64 " requests of %s", n, trace);
    } else {
        serve_dist pd, od;
        char *end;
        errno = 0;
        double rate = strtod(rate_s, &end);
        if (end == rate_s || *end || errno || !(rate > 0) || !isfinite(rate))
            return np_err_set(err, NP_ERR_USAGE, "--rate '%s': expected requests/s > 0", rate_s);
        n = requests ? (int64_t)requests : 1000;
        if (serve_dist_parse("--prompt", prompt_s, &pd, err) != NP_OK ||
            serve_dist_parse("--output", output_s, &od, err) != NP_OK ||
            serve_poisson(rate, n, &pd, &od, seed, &rq, err) != NP_OK)
            return err->status;
        snprintf(source, sizeof source, "%" PRId64 " requests, Poisson at %g request/s, prompt "
                 "%s, output %s tokens, seed %" PRIu64, n, rate, prompt_s, output_s, seed);
    }
    arch_config cfg;
    nn_model_desc d;
    if (arch_resolve(arch_name, sets, n_sets, &cfg, err) != NP_OK ||
        nn_model_load(model, &d, err) != NP_OK) {
        free(rq);
        return err->status;
    }
    o.model = &d, o.cfg = &cfg, o.tp = (int)tp, o.kv_block = (int64_t)block;
    o.kv_blocks = (int64_t)blocks, o.max_batch_tokens = (int64_t)max_tokens;
    o.max_seqs = (int64_t)max_seqs, o.chunk = (int64_t)chunk;
    cli_progress prog;
    cli_progress_init(&prog, "serving");
    o.progress = cli_progress_fn, o.progress_ctx = &prog;
    if (csv) {
        printf("id,arrival_s,prompt_tokens,output_tokens,ttft_s,tpot_s,e2e_s,finish_s,"
               "preemptions\n");
        o.on_finish = csv_row;
    }
    serve_result r;
    np_status st = serve_run(&o, rq, n, &r, err);
    cli_progress_end(&prog);
    free(rq);
    if (st != NP_OK || csv)
        return st;
    if (json)
        return cli_print_json(result_json(d.name, cfg.name, &r, &o), err);
    result_print(d.name, cfg.name, source, &r, &o);
    return NP_OK;
}
