/* cmd_plan.c — `npusim plan`: a model's training step under a parallel strategy — the mesh
 * and its placement on the architecture's chips, each pipeline stage's layers and FLOPs, the
 * collectives one rank of each stage issues, memory per chip by role against HBM, and the
 * analytical bubble. The plan is framework/plan.h's; the JSON names are documented in
 * docs/parallel.md and kept stable. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "cli.h"
#include "human.h"
#include "cli_strategy.h"
#include "plan.h"
#include "run_job.h"

const char cmd_plan_usage[] =
    "usage: npusim plan --arch A --model M --batch B [--seq S] [--dp D] [--tp T] [--pp P]\n"
    "                   [--zero 0|1|2|3] [--sp] [--microbatch b]\n"
    "                   [--schedule gpipe|1f1b|interleaved:V|zb-h1] [--recompute none|selective|full|uniform]\n"
    "                   [--attention fused|composite|unfused] [--bucket-mb X] [--precision bf16|fp32] [--placement ORDER]\n"
    "                   [--stage-layers N,N,...] [--dropout P] [--no-pp-scatter-gather]\n"
    "                   [--ddp torch|local] [--p2p eager|blocking] [--host-sync]\n"
    "                   [--loss-scale S] [--clip-grad C] [--tp-comm-overlap]\n"
    "                   [--overlap-param-gather] [--json]\n"
    "\n"
    "  --arch A          architecture preset or YAML file (its chips and HBM)\n"
    "  --model M         a zoo model (see `npusim models`), a model file, a Hugging Face\n"
    "                    config.json or its folder, or an .onnx file (docs/interop.md)\n"
    CLI_STRATEGY_USAGE
    "  --json            print {chips, mesh, stages, collectives, memory, flops_per_step,\n"
    "                    bubble_analytical, ...} (docs/parallel.md)\n";

/* "1.50 GiB" */
static const char *plan_bytes(uint64_t b, char *buf, size_t n)
{
    const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    double v = (double)b;
    int k = 0;
    while (v >= 1024 && k < 5)
        v /= 1024, k++;
    snprintf(buf, n, k ? "%.2f %s" : "%.0f %s", v, unit[k]);
    return buf;
}

/* "1.23 PFLOP" */
static const char *plan_flops(double f, char *buf, size_t n)
{
    const char *unit[] = {"FLOP", "kFLOP", "MFLOP", "GFLOP", "TFLOP", "PFLOP", "EFLOP"};
    int k = 0;
    while (f >= 1000 && k < 6)
        f /= 1000, k++;
    snprintf(buf, n, "%.2f %s", f, unit[k]);
    return buf;
}


static json_t *plan_mem_json(const nn_plan_mem *m)
{
    return json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "params_bytes", (json_int_t)m->params_bytes,
                     "grads_bytes", (json_int_t)m->grads_bytes, "optstate_bytes",
                     (json_int_t)m->optstate_bytes, "activations_bytes",
                     (json_int_t)m->activations_bytes, "buffers_bytes", (json_int_t)m->buffers_bytes,
                     "workspace_bytes", (json_int_t)m->workspace_bytes, "total_bytes",
                     (json_int_t)m->total_bytes);
}

static json_t *plan_json(const nn_plan *p, const nn_plan_summary *s, const arch_config *a,
                         const char *why)
{
    char sched[32];
    json_t *chips = json_array();
    for (int r = 0; r < p->mesh.n_ranks; r++)
        json_array_append_new(chips, json_integer(p->mesh.chip[r]));
    json_t *mesh = json_pack("{s:i, s:i, s:i, s:s, s:s, s:o}", "dp", p->mesh.size[NN_MESH_DP], "tp",
                             p->mesh.size[NN_MESH_TP], "pp", p->mesh.size[NN_MESH_PP], "order",
                             p->mesh.order, "placement", p->mesh.why, "chip_of_rank", chips);
    json_t *stages = json_array();
    for (int c = 0; c < p->n_classes; c++) {
        json_t *layers = json_array(), *chunks = json_array();
        for (int k = c; k < p->n_chunks; k += p->s.pp) {
            int f = p->chunk_layer_first[k], l = p->chunk_layer_last[k];
            for (int i = f; f >= 0 && i <= l; i++)
                json_array_append_new(layers, json_integer(i));
            json_array_append_new(chunks, json_pack("{s:i, s:i, s:i, s:b, s:b}", "chunk", k,
                                                    "first_layer", f, "last_layer", l,
                                                    "before_layers", k == 0 && p->has_pre_layers,
                                                    "after_layers", k == p->n_chunks - 1));
        }
        json_array_append_new(stages, json_pack("{s:i, s:o, s:o, s:o, s:o, s:o}", "stage", c, "layers",
                                                layers, "chunks", chunks, "flops",
                                                cli_json_count(s->model_flops[c]), "hardware_flops",
                                                cli_json_count(s->hw_flops[c]), "memory",
                                                plan_mem_json(&s->mem[c])));
    }
    json_t *colls = json_array();
    for (int i = 0; i < s->n_rows; i++) {
        const nn_plan_comm_row *r = &s->rows[i];
        json_array_append_new(colls, json_pack("{s:i, s:s, s:s, s:i, s:I, s:I}", "stage", r->stage,
                                               "kind", nn_op_name(r->op), "axis", nn_comm_tag_name(r->tag),
                                               "group_size", r->group_size, "bytes", (json_int_t)r->bytes,
                                               "count_per_step", (json_int_t)r->count));
    }
    json_t *mem = plan_mem_json(&s->mem[s->largest]);
    json_object_set_new(mem, "stage", json_integer(s->largest));
    json_object_set_new(mem, "hbm_bytes", json_integer((json_int_t)p->hbm_bytes));
    json_object_set_new(mem, "fits", json_boolean(s->mem[s->largest].total_bytes <= p->hbm_bytes));
    return json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:i, s:s, s:s, s:s, s:i, s:b, s:o, s:o, s:o, "
                     "s:o, s:o, s:o, s:f, s:i, s:i, s:s, s:f, s:b, s:i, s:s, s:s, s:b, s:b, s:b, s:f, s:f}",
                     "model", p->model, "arch", a->name, "chips", (json_int_t)p->mesh.n_ranks,
                     "system_chips", (json_int_t)a->system.chips, "batch", (json_int_t)p->batch,
                     "seq", (json_int_t)p->seq, "microbatch", (json_int_t)p->microbatch,
                     "micro_batches", p->n_micro, "schedule", nn_schedule_name(&p->s, sched, sizeof sched),
                     "recompute", nn_recompute_name(p->s.recompute), "precision",
                     p->compute == NN_F32 ? "fp32" : "bf16", "zero", p->s.zero, "sp", p->s.sp,
                     "mesh", mesh, "stages", stages, "collectives", colls, "memory", mem,
                     "flops_per_step", cli_json_count(s->flops_per_step), "hardware_flops_per_step",
                     cli_json_count(s->hw_flops_per_step), "bubble_analytical", nn_plan_bubble(p),
                     "attention_fused", p->attention_fused, "attention_composite",
                     p->attention_composite, "attention_why", why, "dropout", p->dropout,
                     "pp_scatter_gather", p->s.pp_scatter_gather, "pp_scattered", p->pp_scattered,
                     "ddp", nn_ddp_name(p->s.ddp), "p2p", p->s.p2p_blocking ? "blocking" : "eager",
                     "host_sync", p->s.host_sync, "tp_comm_overlap", p->s.tp_comm_overlap,
                     "overlap_param_gather", p->s.overlap_param_gather, "loss_scale",
                     p->s.loss_scale, "clip_grad",
                     p->s.clip_grad);
}

static void plan_text(const nn_plan *p, const nn_plan_summary *s, const arch_config *a,
                      const char *why)
{
    char b1[32], b2[32], sched[32];
    char nr[NP_HUMAN_MAX], nc[NP_HUMAN_MAX];
    printf("# %s on %s: %s of %s chips, dp %d x tp %d x pp %d", p->model, a->name,
           np_human_count((uint64_t)p->mesh.n_ranks, nr, sizeof nr),
           np_human_count((uint64_t)a->system.chips, nc, sizeof nc), p->mesh.size[NN_MESH_DP],
           p->mesh.size[NN_MESH_TP], p->mesh.size[NN_MESH_PP]);
    printf(", %s, %d micro-batch%s of %" PRId64 " (global batch %" PRId64,
           nn_schedule_name(&p->s, sched, sizeof sched), p->n_micro, p->n_micro == 1 ? "" : "es",
           p->microbatch, p->batch);
    if (p->seq > 1)
        printf(", sequence %" PRId64, p->seq);
    printf(")\n# %s, ZeRO %d%s, recompute %s, ",
           p->compute == NN_F32 ? "fp32" : "bf16 compute with fp32 masters", p->s.zero,
           p->s.sp ? ", sequence parallel" : "", nn_recompute_name(p->s.recompute));
    if (p->dropout > 0)
        printf("dropout %g (attention with dropout stays composite), ", p->dropout);
    if (p->s.ddp != NN_DDP_TORCH || p->s.p2p_blocking || p->s.host_sync)
        printf("DDP %s%s%s, ", nn_ddp_name(p->s.ddp), p->s.p2p_blocking ? ", blocking p2p" : "",
               p->s.host_sync ? ", host synchronizations" : "");
    if (p->s.loss_scale > 0)
        printf("loss scale %g, ", p->s.loss_scale);
    if (p->s.clip_grad > 0)
        printf("gradients clipped to norm %g, ", p->s.clip_grad);
    if (p->s.tp_comm_overlap)
        printf("tp communication overlapped with GEMMs, ");
    if (p->s.overlap_param_gather)
        printf("parameter gathers under the forward, ");
    printf("attention: %d fused, %d composite\n", p->attention_fused, p->attention_composite);
    if (p->pp_scattered)
        printf("# pipeline scatter/gather: %d boundar%s sent in 1/%d shards, all-gathered over tp "
               "(--no-pp-scatter-gather sends %s whole)\n", p->pp_scattered,
               p->pp_scattered == 1 ? "y" : "ies", p->mesh.size[NN_MESH_TP],
               p->pp_scattered == 1 ? "it" : "them");
    if (why[0])
        printf("# attention composite: the fused kernel does not fit the chip (%s)\n", why);
    if (p->vocab_padded)
        printf("# vocabulary padded to %" PRId64 " rows, a multiple of tp %d (Megatron-LM pads "
               "to a multiple of 128 x tp)\n", p->vocab_padded, p->mesh.size[NN_MESH_TP]);
    printf("\nplacement: %s (order %s)\n", p->mesh.why, p->mesh.order);
    int show = p->mesh.n_ranks < 16 ? p->mesh.n_ranks : 16;
    printf("  rank -> chip:");
    for (int r = 0; r < show; r++)
        printf(" %d->%d", r, p->mesh.chip[r]);
    printf("%s\n", show < p->mesh.n_ranks ? " ..." : "");
    /* each stage's layers ("0-7", "pre+0-3,8-11", "35-39,75-79+head"), the column as wide as
     * the widest */
    char (*lays)[256] = calloc((size_t)p->n_classes + 1, sizeof *lays);
    if (!lays)
        return;
    int width = 14;
    for (int c = 0; c < p->n_classes; c++) {
        char *lay = lays[c];
        size_t k = 0;
        for (int ch = c; ch < p->n_chunks && k < sizeof lays[c]; ch += p->s.pp) {
            int f = p->chunk_layer_first[ch], l = p->chunk_layer_last[ch];
            const char *extra = ch == 0 && p->has_pre_layers ? "pre" : "";
            if (f < 0)
                k += (size_t)snprintf(lay + k, sizeof lays[c] - k, "%s%s", k ? "," : "",
                                      ch == p->n_chunks - 1 ? "head" : extra);
            else
                k += (size_t)snprintf(lay + k, sizeof lays[c] - k, "%s%s%s%d-%d%s", k ? "," : "",
                                      extra, extra[0] ? "+" : "", f, l,
                                      ch == p->n_chunks - 1 ? "+head" : "");
        }
        if (k >= sizeof lays[c]) /* cut: say so */
            memcpy(lay + sizeof lays[c] - 4, "...", 4);
        int w = (int)strlen(lay);
        width = w > width ? w : width;
    }
    printf("\n%-6s %-*s %16s %16s %12s\n", "stage", width, "layers", "FLOP/step/chip", "executed",
           "memory");
    for (int c = 0; c < p->n_classes; c++) {
        const char *lay = lays[c];
        printf("%-6d %-*s %16s %16s %12s\n", c, width, lay, plan_flops(s->model_flops[c], b1, sizeof b1),
               plan_flops(s->hw_flops[c], b2, sizeof b2),
               plan_bytes(s->mem[c].total_bytes, (char[32]){0}, 32));
    }
    free(lays);
    /* per stage: (kind, axis, group) with the issues and bytes of a step; stages with the
     * same lines are printed once */
    printf("\ncommunication per step (one rank of each stage; buckets of one kind together):\n"
           "%-8s %-15s %-5s %6s %9s %12s %12s\n", "stages", "kind", "axis", "group", "per step",
           "bytes each", "bytes/step");
    int *line_of = calloc((size_t)s->n_rows + 1, sizeof *line_of);
    char (*lines)[160] = calloc((size_t)p->n_classes * 16 + 1, sizeof *lines);
    int *n_lines = calloc((size_t)p->n_classes + 1, sizeof *n_lines);
    for (int c = 0; c < p->n_classes && lines; c++) {
        for (int i = 0; i < s->n_rows; i++) {
            const nn_plan_comm_row *r = &s->rows[i];
            if (r->stage != c || line_of[i])
                continue;
            int64_t cnt = 0;
            uint64_t tot = 0, each = r->bytes;
            bool same = true;
            for (int k = i; k < s->n_rows; k++) {
                const nn_plan_comm_row *q = &s->rows[k];
                if (q->stage != c || q->op != r->op || q->tag != r->tag || q->group_size != r->group_size)
                    continue;
                line_of[k] = 1;
                cnt += q->count;
                tot += q->bytes * (uint64_t)q->count;
                same = same && q->bytes == each;
            }
            if (n_lines[c] < 16)
                snprintf(lines[c * 16 + n_lines[c]++], 160, "%-15s %-5s %6d %9" PRId64 " %12s %12s",
                         nn_op_name(r->op), nn_comm_tag_name(r->tag), r->group_size, cnt,
                         same ? plan_bytes(each, b1, sizeof b1) : "(mixed)",
                         plan_bytes(tot, b2, sizeof b2));
        }
    }
    for (int c = 0; c < p->n_classes && lines; c++) {
        int last = c;
        while (last + 1 < p->n_classes && n_lines[last + 1] == n_lines[c] &&
               memcmp(lines[(last + 1) * 16], lines[c * 16], sizeof lines[0] * (size_t)n_lines[c]) == 0)
            last++;
        char st[24];
        snprintf(st, sizeof st, last > c ? "%d-%d" : "%d", c, last);
        for (int k = 0; k < n_lines[c]; k++)
            printf("%-8s %s\n", k ? "" : st, lines[c * 16 + k]);
        c = last;
    }
    free(line_of);
    free(lines);
    free(n_lines);
    const nn_plan_mem *m = &s->mem[s->largest];
    printf("\nmemory of the largest chip (stage %d) against %s of HBM:\n", s->largest,
           plan_bytes(p->hbm_bytes, b1, sizeof b1));
    const char *names[] = {"parameters", "gradients", "optimizer state", "activations",
                           "comm buffers", "workspace", "total"};
    uint64_t vals[] = {m->params_bytes, m->grads_bytes, m->optstate_bytes, m->activations_bytes,
                       m->buffers_bytes, m->workspace_bytes, m->total_bytes};
    for (int i = 0; i < 7; i++)
        printf("  %-16s %12s\n", names[i], plan_bytes(vals[i], b1, sizeof b1));
    if (p->hbm_bytes && m->total_bytes > p->hbm_bytes)
        printf("  does not fit: %s more than the chip has\n",
               plan_bytes(m->total_bytes - p->hbm_bytes, b1, sizeof b1));
    printf("\nFLOPs per step (all chips): %s model, %s executed\n",
           plan_flops(s->flops_per_step, b1, sizeof b1),
           plan_flops(s->hw_flops_per_step, b2, sizeof b2));
    printf("pipeline bubble (analytical, %s): %.2f %%\n",
           p->s.schedule == NN_PP_INTERLEAVED ? "(p-1)/(vm+p-1)"
           : p->s.schedule == NN_PP_ZB_H1     ? "(p-1)(F+B-W)/((p-1)(F+B-W)+m(F+B+W)), by FLOPs"
                                              : "(p-1)/(m+p-1)",
           100.0 * nn_plan_bubble(p));
}

np_status cmd_plan(int argc, char **argv, np_err *err)
{
    static const struct option longopts[] = {
        {"arch", required_argument, NULL, 'a'}, {"model", required_argument, NULL, 'm'},
        {"json", no_argument, NULL, 'j'},       {"help", no_argument, NULL, 'h'},
        CLI_STRATEGY_LONGOPTS,                  {0}};
    const char *arch = NULL, *model = NULL;
    bool json = false;
    cli_strategy cs;
    cli_strategy_init(&cs);
    int c;
    cli_getopt_reset();
    while ((c = cli_getopt(argc, argv, "h", longopts, err)) != -1) {
        if (cli_strategy_is_flag(c)) {
            if (cli_strategy_flag(&cs, c, optarg, err) != NP_OK)
                return err->status;
            continue;
        }
        switch (c) {
        case 'a': arch = optarg; break;
        case 'm': model = optarg; break;
        case 'j': json = true; break;
        case 'h': cli_print_usage(cli_find("plan")); return NP_OK;
        default: return err->status;
        }
    }
    if (optind < argc)
        return np_err_set(err, NP_ERR_USAGE, "unexpected argument '%s'", argv[optind]);
    if (!arch || !model || !cs.o.batch)
        return np_err_set(err, NP_ERR_USAGE, "%s is required", !arch ? "--arch" : !model ? "--model" : "--batch");
    arch_config a;
    nn_model_desc d;
    if (arch_resolve(arch, NULL, 0, &a, err) != NP_OK || nn_model_load(model, &d, err) != NP_OK)
        return err->status;
    nn_optim adam = cli_strategy_optim();
    nn_plan *p = NULL;
    nn_plan_summary sum;
    char why[RUN_REPORT_WHY_MAX];
    if (run_build_plan(&d, &cs.o, &cs.s, &adam, &a, &p, why, sizeof why, err) != NP_OK)
        return err->status;
    if (nn_plan_summarize(p, &sum, err) != NP_OK) {
        nn_plan_free(p);
        return err->status;
    }
    np_status st = NP_OK;
    if (json)
        st = cli_print_json(plan_json(p, &sum, &a, why), err);
    else
        plan_text(p, &sum, &a, why);
    nn_plan_summary_free(&sum);
    nn_plan_free(p);
    return st;
}
