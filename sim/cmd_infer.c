/* cmd_infer.c — `npusim infer`: one batch of requests served on one chip, prefill then decode
 * against a paged kv cache: time to first token, time per output token, end-to-end latency,
 * tokens/s, the kv cache's memory, and each iteration's bound. The computation is sim/infer.h;
 * this file parses options and prints. docs/serving.md says what each figure means. */
#include <inttypes.h>
#include <stdio.h>

#include "cli.h"
#include "human.h"
#include "infer.h"
#include "kvcheck.h"

#define INFER_FUNCTIONAL_TOL 1e-4 /* fp32: the two paths sum in different orders only */

#define INFER_MAX_SETS 64

const char cmd_infer_usage[] =
    "usage: npusim infer --model M [--arch PRESET|FILE] [--set SECTION.KEY=VALUE ...] [--tp T]\n"
    "                    --prompt S --output N [--batch B] [--kv-block K]\n"
    "                    [--kernel-cache FILE] [--functional] [--json]\n"
    "\n"
    "  --model M       a gpt or llama model of the zoo (npusim models), a model file or a\n"
    "                  Hugging Face config\n"
    "  --arch A        architecture preset or YAML file (default: " CLI_DEFAULT_ARCH ")\n"
    "  --set K=V       override one config key (repeatable)\n"
    "  --tp T          tensor-parallel chips (only 1 so far)\n"
    "  --prompt S      tokens of each prompt (the prefill)\n"
    "  --output N      tokens generated for each sequence (the first by the prefill, then\n"
    "                  N - 1 decode steps)\n"
    "  --batch B       sequences served together (default 1)\n"
    "  --kv-block K    tokens of a kv-cache block (default 16, vLLM's)\n"
    "  --kernel-cache F  keep kernel timings in file F (as npusim run does)\n"
    "  --functional    instead of timing: run the prefill and decode steps on the reference\n"
    "                  executor through a paged cache and compare every step's logits with\n"
    "                  the full-sequence forward's (fp32; exit 1 beyond 1e-4 relative)\n"
    "  --json          print one object with exact values (fields in docs/serving.md)\n";

static json_t *iter_json(const infer_iter *it)
{
    return json_pack("{s:I, s:I, s:I, s:f, s:f, s:i, s:f, s:I, s:I, s:I, s:f, s:f, s:s}",
                     "batch", (json_int_t)it->batch, "tokens", (json_int_t)it->tokens, "past",
                     (json_int_t)it->past, "time_s", it->time_s, "roofline_attention_s",
                     it->roofline_s, "kernels", it->kernels, "flops", it->flops,
                     "weight_read_bytes", (json_int_t)it->weight_bytes, "kv_read_bytes",
                     (json_int_t)it->kv_read_bytes, "kv_write_bytes",
                     (json_int_t)it->kv_write_bytes, "compute_bound_s", it->compute_s,
                     "hbm_bound_s", it->hbm_s, "bound", it->hbm_bound ? "hbm" : "compute");
}

static json_t *result_json(const char *model, const char *arch, const infer_opts *o,
                           const infer_result *r)
{
    json_t *j = json_pack("{s:s, s:s, s:i, s:I, s:I, s:I, s:I}", "model", model, "arch", arch,
                          "tp", o->tp, "batch", (json_int_t)o->batch, "prompt",
                          (json_int_t)o->prompt, "output", (json_int_t)o->output, "kv_block",
                          (json_int_t)o->kv_block);
    json_object_set_new(j, "ttft_s", json_real(r->ttft_s));
    json_object_set_new(j, "tpot_mean_s", json_real(r->tpot_mean_s));
    json_object_set_new(j, "tpot_last_s", json_real(r->tpot_last_s));
    json_object_set_new(j, "e2e_s", json_real(r->e2e_s));
    json_object_set_new(j, "tokens_per_s", json_real(r->tokens_per_s));
    json_object_set_new(j, "decode_steps", json_integer((json_int_t)r->decode_steps));
    json_object_set_new(j, "kv_cache_bytes", json_integer((json_int_t)r->kv_bytes));
    json_object_set_new(j, "kv_blocks", json_integer((json_int_t)r->kv_blocks));
    json_object_set_new(j, "weight_bytes", json_integer((json_int_t)r->weight_bytes));
    json_object_set_new(j, "hbm_bytes", json_integer((json_int_t)r->hbm_bytes));
    json_object_set_new(j, "fits", json_boolean(r->fits));
    json_object_set_new(j, "peak_flops", json_real(r->peak_flops));
    json_object_set_new(j, "hbm_bytes_per_s", json_real(r->hbm_bytes_per_s));
    json_object_set_new(j, "prefill", iter_json(&r->prefill));
    if (r->decode_steps) {
        json_object_set_new(j, "decode_first", iter_json(&r->decode_first));
        json_object_set_new(j, "decode_last", iter_json(&r->decode_last));
    }
    return j;
}

static void print_iter(const char *what, const infer_iter *it)
{
    char a[32], b[32], c[32], d[32], e[32], f[32];
    printf("  %-13s %s (%s new token%s x %s after %s cached): %s-bound; roofline compute %s, "
           "HBM %s", what, np_human_s(it->time_s, a, sizeof a),
           np_human_int(it->tokens, b, sizeof b),
           it->tokens == 1 ? "" : "s", np_human_int(it->batch, c, sizeof c),
           np_human_int(it->past, d, sizeof d), it->hbm_bound ? "HBM" : "compute",
           np_human_s(it->compute_s, e, sizeof e), np_human_s(it->hbm_s, f, sizeof f));
    if (it->roofline_s > 0)
        printf("; decode attention %s as its roofline", np_human_s(it->roofline_s, c, sizeof c));
    printf("\n");
}

static void result_print(const char *model, const char *arch, const infer_opts *o,
                         const infer_result *r)
{
    char a[32], b[32], c[32], d[32];
    printf("%s on %s, one chip: %" PRId64 " sequence%s, prompt %" PRId64 ", output %" PRId64
           " token%s, kv blocks of %" PRId64 " tokens\n", model, arch, o->batch,
           o->batch == 1 ? "" : "s", o->prompt, o->output, o->output == 1 ? "" : "s",
           o->kv_block);
    printf("  time to first token   %s\n", np_human_s(r->ttft_s, a, sizeof a));
    if (r->decode_steps)
        printf("  time per output token %s mean, %s the last\n",
               np_human_s(r->tpot_mean_s, a, sizeof a), np_human_s(r->tpot_last_s, b, sizeof b));
    printf("  end-to-end latency    %s\n", np_human_s(r->e2e_s, a, sizeof a));
    printf("  throughput            %s\n", np_human_si(r->tokens_per_s, "token/s", a, sizeof a));
    printf("  memory per chip       weights %s + kv cache %s (%s block%s) of %s HBM: %s\n",
           np_human_bytes(r->weight_bytes, a, sizeof a), np_human_bytes(r->kv_bytes, b, sizeof b),
           np_human_int(r->kv_blocks, c, sizeof c), r->kv_blocks == 1 ? "" : "s", np_human_bytes(r->hbm_bytes, d, sizeof d),
           r->fits ? "fits" : "DOES NOT FIT");
    printf("iterations (peaks %s, %s):\n", np_human_si(r->peak_flops, "FLOP/s", a, sizeof a),
           np_human_si(r->hbm_bytes_per_s, "B/s", b, sizeof b));
    print_iter("prefill", &r->prefill);
    if (r->decode_steps) {
        print_iter("decode first", &r->decode_first);
        if (r->decode_steps > 1)
            print_iter("decode last", &r->decode_last);
    }
}

/* --functional: nn_kv_check of the flags' batch, prompt, output - 1 steps and block. */
static np_status infer_functional(const nn_model_desc *d, const infer_opts *o, bool json,
                                  np_err *err)
{
    nn_kv_check_result r;
    if (nn_kv_check(d, &(nn_kv_check_opts){.batch = o->batch, .prompt = o->prompt,
                    .steps = o->output - 1, .block = o->kv_block, .compute = NN_F32, .seed = 1},
                    &r, err) != NP_OK)
        return err->status;
    bool ok = r.worst <= INFER_FUNCTIONAL_TOL;
    if (json) {
        np_status st = cli_print_json(json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:f, s:f, "
                                                "s:b}", "model", d->name, "batch",
                                                (json_int_t)o->batch, "prompt",
                                                (json_int_t)o->prompt, "decode_steps",
                                                (json_int_t)(o->output - 1), "kv_block",
                                                (json_int_t)o->kv_block, "logits",
                                                (json_int_t)r.logits, "worst_rel_diff",
                                                r.worst, "tolerance", INFER_FUNCTIONAL_TOL,
                                                "equal", ok), err);
        if (st != NP_OK)
            return st;
    } else {
        char a[32];
        printf("%s: prefill of %" PRId64 " tokens and %" PRId64 " decode steps of %" PRId64
               " sequence%s through a paged kv cache (blocks of %" PRId64 " tokens, %" PRId64
               " in use) against the full forward: %s logits, worst relative difference %.3g "
               "(fp32; tolerance %.0e): %s\n", d->name, o->prompt, o->output - 1, o->batch,
               o->batch == 1 ? "" : "s", o->kv_block, r.blocks,
               np_human_int(r.logits, a, sizeof a), r.worst, INFER_FUNCTIONAL_TOL,
               ok ? "equal" : "DIFFERENT");
    }
    return ok ? NP_OK : np_err_set(err, NP_ERR_INTERNAL, "the kv-cache path's logits differ "
                                   "from the full forward's by %.3g relative (tolerance %.0e)",
                                   r.worst, INFER_FUNCTIONAL_TOL);
}

np_status cmd_infer(int argc, char **argv, np_err *err)
{
    static const struct option longopts[] = {
        {"model", required_argument, NULL, 'm'},  {"arch", required_argument, NULL, 'a'},
        {"set", required_argument, NULL, 's'},    {"tp", required_argument, NULL, 't'},
        {"prompt", required_argument, NULL, 'p'}, {"output", required_argument, NULL, 'o'},
        {"batch", required_argument, NULL, 'b'},  {"kv-block", required_argument, NULL, 'k'},
        {"kernel-cache", required_argument, NULL, 'K'}, {"json", no_argument, NULL, 'j'},
        {"functional", no_argument, NULL, 'f'},
        {"help", no_argument, NULL, 'h'},         {0}};
    const char *arch_name = CLI_DEFAULT_ARCH, *model = NULL, *sets[INFER_MAX_SETS];
    size_t n_sets = 0;
    uint64_t tp = 1, prompt = 0, output = 0, batch = 1, block = 16;
    infer_opts o = {0};
    bool json = false, functional = false;
    int c;
    cli_getopt_reset();
    while ((c = cli_getopt(argc, argv, "h", longopts, err)) != -1) {
        np_status st = NP_OK;
        switch (c) {
        case 'm': model = optarg; break;
        case 'a': arch_name = optarg; break;
        case 's': st = cli_add_set(sets, &n_sets, INFER_MAX_SETS, optarg, err); break;
        case 't': st = cli_parse_u64("--tp", optarg, 1, 1 << 20, &tp, err); break;
        case 'p': st = cli_parse_u64("--prompt", optarg, 1, 1 << 24, &prompt, err); break;
        case 'o': st = cli_parse_u64("--output", optarg, 1, 1 << 24, &output, err); break;
        case 'b': st = cli_parse_u64("--batch", optarg, 1, 1 << 20, &batch, err); break;
        case 'k': st = cli_parse_u64("--kv-block", optarg, 1, 1 << 16, &block, err); break;
        case 'K': o.kernel_cache = optarg; break;
        case 'j': json = true; break;
        case 'f': functional = true; break;
        case 'h': cli_print_usage(cli_find("infer")); return NP_OK;
        default: return err->status;
        }
        if (st != NP_OK)
            return st;
    }
    if (optind < argc)
        return np_err_set(err, NP_ERR_USAGE, "unexpected argument '%s'", argv[optind]);
    if (!model)
        return np_err_set(err, NP_ERR_USAGE, "--model is required (a gpt or llama model)");
    if (!prompt || !output)
        return np_err_set(err, NP_ERR_USAGE, "--%s is required", !prompt ? "prompt" : "output");
    arch_config cfg;
    nn_model_desc d;
    if (arch_resolve(arch_name, sets, n_sets, &cfg, err) != NP_OK ||
        nn_model_load(model, &d, err) != NP_OK)
        return err->status;
    o.model = &d, o.cfg = &cfg, o.tp = (int)tp, o.batch = (int64_t)batch;
    o.prompt = (int64_t)prompt, o.output = (int64_t)output, o.kv_block = (int64_t)block;
    infer_ctx *ctx;
    infer_result r;
    if (infer_ctx_create(&o, &ctx, err) != NP_OK)
        return err->status;
    if (functional) {
        infer_ctx_free(ctx);
        return infer_functional(&d, &o, json, err);
    }
    np_status st = infer_run(ctx, &r, err);
    infer_ctx_free(ctx);
    if (st != NP_OK)
        return st;
    if (json)
        return cli_print_json(result_json(d.name, cfg.name, &o, &r), err);
    result_print(d.name, cfg.name, &o, &r);
    return NP_OK;
}
