/* cmd_summary.c — `npusim summary`: a model's layers, parameters and FLOPs (torchinfo-like).
 * The JSON keys are stable and documented in docs/models.md. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "csv.h"
#include "model.h"
#include "parse.h"

const char cmd_summary_usage[] =
    "usage: npusim summary --model NAME|FILE [--batch B] [--seq S] [--json | --csv]\n"
    "\n"
    "  --model M       a zoo model (see `npusim models`) or a model file\n"
    "  --batch B       batch size (default: the model file's batch, else 1)\n"
    "  --seq S         sequence length of language models (default: the model's context)\n"
    "  --json          print {model, total_params, trainable_params, forward_flops,\n"
    "                  train_step_flops, layers: [{name, op, output_shape, params, flops,\n"
    "                  train_flops}], memory: {...}}\n"
    "  --csv           print the per-layer table as CSV (layer, op, output_shape, params,\n"
    "                  flops, train_flops)\n"
    "\n"
    "  FLOPs count a multiply-add as 2 floating-point operations; the training step is the\n"
    "  forward pass, the backward pass and an AdamW update.\n";

/* --batch and --seq: the model file's bounds (docs/models.md) */
static np_status summary_parse_pos(const char *opt, const char *text, int64_t max, int64_t *out,
                                   np_err *err)
{
    return np_parse_i64(NP_SRC_OPT(opt), text, 1, max, out, err);
}

static json_t *summary_shape_json(const nn_summary_row *r)
{
    json_t *a = json_array();
    for (int d = 0; d < r->ndim; d++)
        json_array_append_new(a, json_integer(r->ne[d]));
    return a;
}

static void summary_shape_text(const nn_summary_row *r, char *buf, size_t n)
{
    nn_tensor t = {0};
    t.ndim = r->ndim;
    for (int d = 0; d < r->ndim; d++)
        t.ne[d] = r->ne[d];
    nn_shape_str(&t, buf, n);
}

np_status cmd_summary(int argc, char **argv, np_err *err)
{
    static const struct option longopts[] = {
        {"model", required_argument, NULL, 'm'}, {"batch", required_argument, NULL, 'b'},
        {"seq", required_argument, NULL, 's'},   {"json", no_argument, NULL, 'j'},
        {"csv", no_argument, NULL, 'c'},         {"help", no_argument, NULL, 'h'},
        {0}};
    const char *model = NULL;
    int64_t batch = 0, seq = 0;
    bool json = false, csv = false;
    int c;
    cli_getopt_reset();
    while ((c = cli_getopt(argc, argv, "h", longopts, err)) != -1) {
        switch (c) {
        case 'm': model = optarg; break;
        case 'b':
            if (summary_parse_pos("--batch", optarg, 1 << 20, &batch, err) != NP_OK)
                return err->status;
            break;
        case 's':
            if (summary_parse_pos("--seq", optarg, 1 << 24, &seq, err) != NP_OK)
                return err->status;
            break;
        case 'j': json = true; break;
        case 'c': csv = true; break;
        case 'h': cli_print_usage(cli_find("summary")); return NP_OK;
        default: return err->status;
        }
    }
    if (optind < argc)
        return np_err_set(err, NP_ERR_USAGE, "unexpected argument '%s'", argv[optind]);
    if (!model)
        return np_err_set(err, NP_ERR_USAGE, "--model is required");
    if (json && csv)
        return np_err_set(err, NP_ERR_USAGE, "--json and --csv: one output format at a time");
    nn_model_desc d;
    nn_summary s;
    if (nn_model_load(model, &d, err) != NP_OK || nn_summary_build(&d, batch, seq, &s, err) != NP_OK)
        return err->status;
    if (json) {
        json_t *layers = json_array();
        for (int i = 0; i < s.n_rows; i++) {
            const nn_summary_row *r = &s.rows[i];
            json_array_append_new(layers, json_pack("{s:s, s:s, s:o, s:I, s:I, s:I}", "name",
                                                    r->name, "op", r->op, "output_shape",
                                                    summary_shape_json(r), "params",
                                                    (json_int_t)r->params, "flops",
                                                    (json_int_t)r->flops, "train_flops",
                                                    (json_int_t)r->train_flops));
        }
        json_t *mem = json_pack(
            "{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "parameters_bytes",
            (json_int_t)s.param_bytes, "optimizer_state_bytes", (json_int_t)s.optimizer_bytes,
            "inputs_bytes", (json_int_t)s.input_bytes, "activation_arena_bytes",
            (json_int_t)s.arena_bytes, "no_reuse_bytes", (json_int_t)s.no_reuse_bytes,
            "peak_activation_bytes", (json_int_t)s.peak_activation_bytes, "peak_gradient_bytes",
            (json_int_t)s.peak_gradient_bytes, "peak_bytes", (json_int_t)s.peak_bytes);
        json_t *j = json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:o, s:o}", "model", s.model,
                              "batch", (json_int_t)s.batch, "seq", (json_int_t)s.seq,
                              "total_params", (json_int_t)s.total_params, "trainable_params",
                              (json_int_t)s.trainable_params, "forward_flops",
                              (json_int_t)s.forward_flops, "forward_macs",
                              (json_int_t)s.forward_macs, "train_step_flops",
                              (json_int_t)s.train_step_flops, "memory", mem, "layers", layers);
        nn_summary_free(&s);
        return cli_print_json(j, err);
    }
    if (csv) { /* the per-layer table */
        static const char *const head[] = {"layer", "op", "output_shape", "params", "flops",
                                           "train_flops"};
        csv_row(stdout, head, 6);
        for (int i = 0; i < s.n_rows; i++) {
            const nn_summary_row *r = &s.rows[i];
            char shape[96], p[24], f[24], t[24];
            summary_shape_text(r, shape, sizeof shape);
            snprintf(p, sizeof p, "%" PRId64, r->params);
            snprintf(f, sizeof f, "%" PRId64, r->flops);
            snprintf(t, sizeof t, "%" PRId64, r->train_flops);
            const char *row[] = {r->name, r->op, shape, p, f, t};
            csv_row(stdout, row, 6);
        }
        nn_summary_free(&s);
        return NP_OK;
    }
    printf("# %s (%s), batch %" PRId64, s.model, nn_model_word(&d, "description", d.family), s.batch);
    if (s.seq > 1)
        printf(", sequence %" PRId64, s.seq);
    printf("\n%-40s %-14s %-22s %14s %18s %18s\n", "layer", "op", "output shape", "params",
           "forward flops", "train flops");
    for (int i = 0; i < s.n_rows; i++) {
        const nn_summary_row *r = &s.rows[i];
        char shape[96];
        summary_shape_text(r, shape, sizeof shape);
        printf("%-40s %-14s %-22s %14" PRId64 " %18" PRId64 " %18" PRId64 "\n", r->name, r->op,
               shape, r->params, r->flops, r->train_flops);
    }
    printf("\ntotal params:       %" PRId64 "\n", s.total_params);
    printf("trainable params:   %" PRId64 "\n", s.trainable_params);
    printf("forward:            %" PRId64 " flops (%.3f GFLOP, %.3f GMAC in matmul/conv)\n",
           s.forward_flops, (double)s.forward_flops / 1e9, (double)s.forward_macs / 1e9);
    printf("training step:      %" PRId64 " flops (%.3f GFLOP; forward + backward + AdamW)\n",
           s.train_step_flops, (double)s.train_step_flops / 1e9);
    const double mib = 1024.0 * 1024.0;
    printf("memory (f32 training step with AdamW):\n");
    printf("  parameters:       %.1f MiB\n", (double)s.param_bytes / mib);
    printf("  optimizer state:  %.1f MiB\n", (double)s.optimizer_bytes / mib);
    printf("  inputs:           %.1f MiB\n", (double)s.input_bytes / mib);
    printf("  transient arena:  %.1f MiB with buffer reuse (%.1f MiB without; at the live peak "
           "%.1f MiB activations, %.1f MiB gradients)\n",
           (double)s.arena_bytes / mib, (double)s.no_reuse_bytes / mib,
           (double)s.peak_activation_bytes / mib, (double)s.peak_gradient_bytes / mib);
    printf("  peak:             %.1f MiB\n", (double)s.peak_bytes / mib);
    nn_summary_free(&s);
    return NP_OK;
}
