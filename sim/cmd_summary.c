/* cmd_summary.c — `npusim summary`: a model's layers, parameters and FLOPs (torchinfo-like).
 * The JSON keys are stable and documented in docs/models.md. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "csv.h"
#include "model.h"
#include "human.h"
#include "parse.h"

const char cmd_summary_usage[] =
    "usage: npusim summary --model NAME|FILE [--batch B] [--seq S] [--json | --csv]\n"
    "\n"
    "  --model M       a zoo model (see `npusim models`), a model file, a Hugging Face\n"
    "                  config.json or its folder, or an .onnx file (docs/interop.md)\n"
    "  --batch B       batch size (default: the model file's batch, else 1)\n"
    "  --seq S         sequence length of language models (default: the model's context)\n"
    "  --json          print {model, type, total_params, trainable_params,\n"
    "                  non_trainable_params, active_params, total_mult_adds, forward_flops, train_step_flops,\n"
    "                  size_estimate, memory, modules: [...], layers: [{name, op, type, depth,\n"
    "                  index, output_shape, params, mult_adds, flops, train_flops}]}\n"
    "  --csv           print the per-layer table as CSV (layer, op, output_shape, params,\n"
    "                  flops, train_flops, type, mult_adds)\n"
    "\n"
    "The table is torchinfo's: the layers as a tree of modules (type: depth-idx), each\n"
    "layer's output shape, parameters and Mult-Adds (torchinfo's: a convolution's parameters\n"
    "x batch x output pixels, a linear layer's x batch x tokens, another layer's parameters\n"
    "x batch), totals and torchinfo's size\n"
    "estimates (MB = 10^6 bytes), then the exact forward FLOPs of each layer (a multiply-add\n"
    "is 2 FLOPs) and the memory of a training step (forward, backward, AdamW).\n";

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

/* torchinfo's shape text: "[1, 64, 112, 112]" ("--" for a scalar). */
static void summary_shape_dims(int ndim, const int64_t *ne, char *buf, size_t n)
{
    size_t used = (size_t)snprintf(buf, n, "%s", ndim ? "[" : "--");
    for (int k = 0; k < ndim && used < n; k++)
        used += (size_t)snprintf(buf + used, n - used, "%s%" PRId64 "%s", k ? ", " : "", ne[k],
                                 k == ndim - 1 ? "]" : "");
}

/* One row of the table: the tree drawn as torchinfo draws it. */
static void summary_print_row(const nn_summary_row *r)
{
    char tree[160], shape[96], p[NP_HUMAN_MAX], ma[NP_HUMAN_MAX], f[NP_HUMAN_MAX];
    size_t used = 0;
    for (int k = 1; k < r->depth && used < sizeof tree; k++)
        used += (size_t)snprintf(tree + used, sizeof tree - used, "%s", "\xe2\x94\x82    ");
    snprintf(tree + used, sizeof tree - used, "%s%s: %d-%d",
             r->depth > 1 ? "\xe2\x94\x94\xe2\x94\x80" : "\xe2\x94\x9c\xe2\x94\x80", r->type,
             r->depth, r->index);
    summary_shape_dims(r->ndim, r->ne, shape, sizeof shape);
    /* the tree's box characters take 3 bytes for one column: pad by bytes */
    int pad = 46 + 2 * (r->depth - 1) + 4;
    printf("%-*s %-24s %15s %18s  %-28s %16s\n", pad, tree, shape,
           r->params ? np_human_int(r->params, p, sizeof p) : "--",
           r->container || !r->params ? "--" : np_human_int(r->mult_adds, ma, sizeof ma),
           r->name, np_human_int(r->flops, f, sizeof f));
}

/* The summary as --json prints it (NULL when out of memory). */
static json_t *summary_json(const nn_summary *s)
{
    json_t *layers = json_array();
    for (int i = 0; i < s->n_rows; i++) {
        const nn_summary_row *r = &s->rows[i];
        json_array_append_new(layers, json_pack("{s:s, s:s, s:s, s:i, s:i, s:o, s:I, s:I, "
                                                "s:I, s:I}", "name", r->name, "op", r->op,
                                                "type", r->type, "depth", r->depth,
                                                "index", r->index, "output_shape",
                                                summary_shape_json(r), "params",
                                                (json_int_t)r->params, "mult_adds",
                                                (json_int_t)r->mult_adds, "flops",
                                                (json_int_t)r->flops, "train_flops",
                                                (json_int_t)r->train_flops));
    }
    json_t *mem = json_pack(
        "{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "parameters_bytes",
        (json_int_t)s->param_bytes, "optimizer_state_bytes", (json_int_t)s->optimizer_bytes,
        "inputs_bytes", (json_int_t)s->input_bytes, "activation_arena_bytes",
        (json_int_t)s->arena_bytes, "no_reuse_bytes", (json_int_t)s->no_reuse_bytes,
        "peak_activation_bytes", (json_int_t)s->peak_activation_bytes, "peak_gradient_bytes",
        (json_int_t)s->peak_gradient_bytes, "peak_bytes", (json_int_t)s->peak_bytes);
    json_t *modules = json_array();
    for (int i = 0; i < s->n_modules; i++) {
        const nn_summary_row *r = &s->modules[i];
        json_array_append_new(modules, json_pack("{s:s, s:s, s:i, s:i, s:i, s:o, s:I}",
                                                 "name", r->name, "type", r->type, "depth",
                                                 r->depth, "index", r->index, "before",
                                                 s->module_before[i], "output_shape",
                                                 summary_shape_json(r), "params",
                                                 (json_int_t)r->params));
    }
    json_t *est = json_pack("{s:I, s:I, s:I, s:I}", "input_bytes",
                            (json_int_t)s->est_input_bytes, "forward_backward_bytes",
                            (json_int_t)s->est_fwd_bwd_bytes, "params_bytes",
                            (json_int_t)s->est_params_bytes, "total_bytes",
                            (json_int_t)s->est_total_bytes);
    json_t *j = json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, "
                          "s:o, s:o, s:o, s:o}", "model", s->model, "type", s->model_type,
                          "batch", (json_int_t)s->batch, "seq", (json_int_t)s->seq,
                          "total_params", (json_int_t)s->total_params, "trainable_params",
                          (json_int_t)s->trainable_params, "non_trainable_params",
                          (json_int_t)s->non_trainable_params, "active_params",
                          (json_int_t)s->active_params, "total_mult_adds",
                          (json_int_t)s->total_mult_adds, "forward_flops",
                          (json_int_t)s->forward_flops, "forward_macs",
                          (json_int_t)s->forward_macs, "train_step_flops",
                          (json_int_t)s->train_step_flops, "size_estimate", est, "memory",
                          mem, "modules", modules, "layers", layers);
    return j;
}

/* The per-layer table as CSV. */
static void summary_csv(const nn_summary *s)
{
    static const char *const head[] = {"layer", "op", "output_shape", "params", "flops",
                                       "train_flops", "type", "mult_adds"};
    csv_row(stdout, head, 8);
    for (int i = 0; i < s->n_rows; i++) {
        const nn_summary_row *r = &s->rows[i];
        char shape[96], p[24], f[24], t[24], ma[24];
        summary_shape_text(r, shape, sizeof shape);
        snprintf(p, sizeof p, "%" PRId64, r->params);
        snprintf(f, sizeof f, "%" PRId64, r->flops);
        snprintf(t, sizeof t, "%" PRId64, r->train_flops);
        snprintf(ma, sizeof ma, "%" PRId64, r->mult_adds);
        const char *row[] = {r->name, r->op, shape, p, f, t, r->type, ma};
        csv_row(stdout, row, 8);
    }
}

/* torchinfo's table (the tree: type, depth-idx; output shape, params, mult-adds; then our
 * layer name and exact forward FLOPs) and the step's FLOPs and memory. */
static void summary_text(const nn_model_desc *d, const nn_summary *s)
{
    /* torchinfo's table: the tree (type: depth-idx), output shape, params, mult-adds; then
     * our layer name and exact forward FLOPs */
    static const char rule[] = "================================================================"
                               "================================================================"
                               "==========";
    char a[NP_HUMAN_MAX], b[NP_HUMAN_MAX], cc[NP_HUMAN_MAX], shape[96];
    printf("# %s (%s), batch %" PRId64, s->model, nn_model_word(d, "description", d->family),
           s->batch);
    if (s->seq > 1)
        printf(", sequence %" PRId64, s->seq);
    printf("\n%s\n%-46s %-24s %15s %18s  %-28s %16s\n%s\n", rule, "Layer (type:depth-idx)",
           "Output Shape", "Param #", "Mult-Adds", "layer", "forward FLOPs", rule);
    summary_shape_dims(s->ndim, s->ne, shape, sizeof shape);
    printf("%-46s %-24s %15s %18s  %-28s %16s\n", s->model_type, shape, "--", "--", s->model,
           np_human_int(s->forward_flops, cc, sizeof cc));
    int mi = 0;
    for (int i = 0; i < s->n_rows; i++) {
        while (mi < s->n_modules && s->module_before[mi] == i)
            summary_print_row(&s->modules[mi++]);
        summary_print_row(&s->rows[i]);
    }
    printf("%s\n", rule);
    printf("Total params: %s\n", np_human_int(s->total_params, a, sizeof a));
    printf("Trainable params: %s\n", np_human_int(s->trainable_params, a, sizeof a));
    printf("Non-trainable params: %s\n", np_human_int(s->non_trainable_params, a, sizeof a));
    if (s->active_params != s->trainable_params) /* a mixture of experts */
        printf("Active params (per token): %s\n", np_human_int(s->active_params, a, sizeof a));
    printf("Total mult-adds (G): %.2f\n", (double)s->total_mult_adds / 1e9);
    printf("%s\n", rule);
    printf("Input size (MB): %.2f\n", (double)s->est_input_bytes / 1e6);
    printf("Forward/backward pass size (MB): %.2f\n", (double)s->est_fwd_bwd_bytes / 1e6);
    printf("Params size (MB): %.2f\n", (double)s->est_params_bytes / 1e6);
    printf("Estimated Total Size (MB): %.2f\n", (double)s->est_total_bytes / 1e6);
    printf("%s\n", rule);
    printf("forward:       %s (%s FLOPs; %s in matmul and conv)\n",
           np_human_si((double)s->forward_flops, "FLOP", a, sizeof a),
           np_human_int(s->forward_flops, b, sizeof b),
           np_human_si((double)s->forward_macs, "MAC", cc, sizeof cc));
    printf("training step: %s (%s FLOPs; forward + backward + AdamW)\n",
           np_human_si((double)s->train_step_flops, "FLOP", a, sizeof a),
           np_human_int(s->train_step_flops, b, sizeof b));
    printf("memory of a training step (f32, AdamW):\n");
    printf("  parameters:      %s\n", np_human_bytes(s->param_bytes, a, sizeof a));
    printf("  optimizer state: %s\n", np_human_bytes(s->optimizer_bytes, a, sizeof a));
    printf("  inputs:          %s\n", np_human_bytes(s->input_bytes, a, sizeof a));
    printf("  transient arena: %s with buffer reuse (%s without;",
           np_human_bytes(s->arena_bytes, a, sizeof a),
           np_human_bytes(s->no_reuse_bytes, b, sizeof b));
    printf(" at the live peak %s activations, %s gradients)\n",
           np_human_bytes(s->peak_activation_bytes, a, sizeof a),
           np_human_bytes(s->peak_gradient_bytes, cc, sizeof cc));
    printf("  peak:            %s\n", np_human_bytes(s->peak_bytes, a, sizeof a));
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
    np_status st = NP_OK;
    if (json)
        st = cli_print_json(summary_json(&s), err);
    else if (csv)
        summary_csv(&s);
    else
        summary_text(&d, &s);
    nn_summary_free(&s);
    return st;
}
