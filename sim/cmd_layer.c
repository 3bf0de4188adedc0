/* cmd_layer.c — `npusim layer`: a single-layer study in the manner of SCALE-Sim.
 *
 * A GEMM layer is compiled by compiler/kgen_matmul.h's matmul generator; a convolution (--conv,
 * a topology file's conv rows, each depthwise channel as a one-channel conv) by its conv
 * generator (implicit im2col: the A slices are gathered from the NHWC input in HBM). Without
 * --pad a conv has SCALE-Sim's output size E = ceil((H - R + stride) / stride); when the
 * stride does not divide H - R that window reads past the input, so the kernel runs on the
 * input zero-padded at the bottom/right by (E - 1) x stride + R - H (and likewise for W); with
 * --pad P, ordinary semantics on the input padded by P on every side. The padding itself is
 * not charged. Everything runs on the timing-mode core. compute_cycles, mapping and compute
 * utilization and the SRAM counts are SCALE-Sim v2's figures for the layer's GEMM on the array
 * (hw-model/mxu_timing.h; equal to its COMPUTE_REPORT with memory that never stalls);
 * total_cycles, the DRAM bytes and bandwidth come from the simulated program; stall_cycles =
 * total - compute. With core.mxu_pipelined_folds the simulated program's array overlaps its
 * folds while the SCALE-Sim figures stay SCALE-Sim's. JSON names are documented in
 * docs/hw-model.md and kept stable. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "cli.h"
#include "cli_trace.h"
#include "csv.h"
#include "clock.h"
#include "human.h"
#include "parse.h"
#include "core.h"
#include "kgen_matmul.h"
#include "layer_model.h"
#include "layer_sim.h"
#include "mxu_report.h"
#include "mxu_timing.h"
#include "mxu_scalecfg.h"
#include "mxu_topo.h"

#define LAYER_MAX_SETS 60

const char cmd_layer_usage[] =
    "usage: npusim layer [--arch PRESET|FILE] [--set SECTION.KEY=VALUE ...] [--array RxC]\n"
    "                    [--dataflow os|ws|is] [--scalesim-config FILE.cfg] [--pad P]\n"
    "                    (--gemm M,N,K | --conv H,W,R,S,C,K,STRIDE | --topology FILE.csv |\n"
    "                     --model NAME|FILE [--batch B]) [--reports DIR] [--cores N]\n"
    "                    [--trace FILE[.gz] [--trace-chips L] [--trace-level K]] [--json | --csv]\n"
    "\n"
    "  --arch A        architecture preset or YAML file (default: " CLI_DEFAULT_ARCH ")\n"
    "  --set K=V       override one config key (repeatable)\n"
    "  --array RxC     systolic array rows x columns (default: core.array_rows/cols)\n"
    "  --dataflow D    os, ws or is (default: core.dataflow)\n"
    "  --gemm M,N,K    the layer is C[M][N] = A[M][K] x B[K][N]\n"
    "  --conv ...      input H x W with C channels, R x S filters, K of them, one stride;\n"
    "                  SCALE-Sim's convention: no padding, E = ceil((H - R + stride) / stride)\n"
    "                  (run on the input zero-padded at the bottom/right where that window\n"
    "                  reads past it); simulated as the conv kernel (implicit im2col)\n"
    "  --pad P         (--conv) ordinary semantics instead: P zeros on every side,\n"
    "                  E = (H + 2P - R) / stride + 1, the kernel run on the padded input\n"
    "  --topology F    a SCALE-Sim topology file: lines of name,M,N,K (GEMM) or\n"
    "                  name,H,W,R,S,C,filters,stride (conv; \"DP\" in the name: depthwise);\n"
    "                  the text output is then SCALE-Sim's COMPUTE_REPORT.csv columns\n"
    "  --model M       the conv and linear layers of a zoo model (or model file) as a\n"
    "                  topology, at --batch B (default 1)\n"
    "  --scalesim-config F  a SCALE-Sim .cfg file: its array size, dataflow, SRAM sizes and\n"
    "                  (InterfaceBandwidth: USER) Bandwidth override the architecture;\n"
    "                  --set, --array and --dataflow override it in turn. With\n"
    "                  InterfaceBandwidth: CALC, as in SCALE-Sim, the memory is sized so\n"
    "                  that the array never stalls: total = compute cycles, 0 stalls (the\n"
    "                  simulated kernel's own time is reported beside them)\n"
    "  --reports DIR   write SCALE-Sim's COMPUTE_REPORT.csv, BANDWIDTH_REPORT.csv and\n"
    "                  DETAILED_ACCESS_REPORT.csv into DIR/RUN_NAME (the .cfg's run_name,\n"
    "                  else npusim_layer), as SCALE-Sim does with -p DIR\n"
    "  --cores N       split each layer's output tiles over cores 0 .. N-1 of the chip\n"
    "                  (default 1; at most chip.cores); the SCALE-Sim compute figure stays\n"
    "                  one array's, and the stall cycles are counted against the compute of\n"
    "                  one core's share (its ceil(folds / N) folds)\n"
    "  --trace F       write a Chrome/Perfetto trace of the runs, one layer after the other\n"
    "                  (gzip when F ends in .gz; a \"layers\" thread marks each layer)\n"
    CLI_TRACE_USAGE
    "  --json          print {\"layers\": [...]} (fields in docs/hw-model.md)\n"
    "  --csv           print a row per layer as CSV (the names of --json's layers)\n"
    "\n"
    "Operands are bf16.\n";

/* Parses "a,b,c,..." into exactly n values in 1 .. 2^32 (names: what each one is). */
static np_status layer_parse_list(const char *opt, const char *text, uint64_t *v, int n,
                                  const char *names, np_err *err)
{
    const char *p = text;
    for (int i = 0; i < n; i++) {
        size_t len = strcspn(p, ",");
        char field[32];
        if ((i < n - 1 ? p[len] != ',' : p[len] != '\0') || len >= sizeof field)
            return np_err_set(err, NP_ERR_USAGE, "%s: expected %d integers separated by commas "
                              "(%s), got '%.60s'", opt, n, names, text);
        memcpy(field, p, len);
        field[len] = '\0';
        const char *nm = names; /* the i-th of "M,N,K" */
        for (int k = 0; k < i; k++)
            nm += strcspn(nm, ",") + 1;
        char src[64];
        snprintf(src, sizeof src, "%s %.*s", opt, (int)strcspn(nm, ","), nm);
        if (np_parse_u64(NP_SRC_OPT(src), field, 1, 1ull << 32, &v[i], err) != NP_OK)
            return err->status;
        p += len + 1;
    }
    return NP_OK;
}

static json_t *layer_json(const mxu_layer *l, const layer_result *r)
{
    return json_pack(
        "{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:f, s:f, s:f, s:{s:I, s:I, s:I}, "
        "s:{s:I, s:I, s:I}, s:I, s:I, s:f, s:s}",
        "name", l->name, "m", (json_int_t)l->m, "n", (json_int_t)l->n, "k", (json_int_t)l->k,
        "total_cycles", (json_int_t)r->total, "compute_cycles", (json_int_t)r->t.scalesim_cycles,
        "compute_cycles_per_core", (json_int_t)r->compute_core,
        "simulated_cycles", (json_int_t)r->sim_total,
        "stall_cycles", (json_int_t)r->stall, "overall_util_pct", r->overall_pct,
        "mapping_efficiency_pct", r->t.mapping_efficiency_pct, "compute_util_pct",
        r->t.compute_util_pct, "sram_reads", "ifmap", (json_int_t)r->t.sram_ifmap_reads,
        "filter", (json_int_t)r->t.sram_filter_reads, "ofmap", (json_int_t)0, "sram_writes",
        "ifmap", (json_int_t)0, "filter", (json_int_t)0, "ofmap",
        (json_int_t)r->t.sram_ofmap_writes, "dram_read_bytes", (json_int_t)r->dram_rd,
        "dram_write_bytes", (json_int_t)r->dram_wr, "dram_gb_per_s", r->dram_gbs, "kernel",
        r->kernel);
}

static void layer_print(const mxu_layer *l, const mxu_array *arr, const layer_result *r,
                        const kgen_conv *kc, uint64_t cores, bool calc)
{
    char a[NP_HUMAN_MAX], b[NP_HUMAN_MAX];
    if (cores == 1)
        printf("layer %s: M=%" PRIu64 " N=%" PRIu64 " K=%" PRIu64 " on a %" PRIu64 "x%" PRIu64
               " array\n", l->name, l->m, l->n, l->k, arr->rows, arr->cols);
    else
        printf("layer %s: M=%" PRIu64 " N=%" PRIu64 " K=%" PRIu64 " on %" PRIu64 " cores of "
               "%" PRIu64 "x%" PRIu64 " arrays\n", l->name, l->m, l->n, l->k, cores, arr->rows,
               arr->cols);
    if (kc && !strcmp(r->kernel, "conv"))
        printf("kernel:                 conv (implicit im2col) on a %" PRIu64 "x%" PRIu64
               "x%" PRIu64 " input (padding included)\n", kc->h, kc->w, kc->c);
    else if (kc)
        printf("kernel:                 matmul: the conv's im2col GEMM (the conv kernel's "
               "staged input rows do not fit the scratchpad)\n");
    else
        printf("kernel:                 matmul\n");
    printf("total cycles:           %s cycles%s\n", np_human_count(r->total, a, sizeof a),
           calc ? " (InterfaceBandwidth: CALC: SCALE-Sim's, without stalls)" : "");
    printf("compute cycles:         %s cycles (SCALE-Sim v2, one array)\n",
           np_human_count(r->t.scalesim_cycles, a, sizeof a));
    if (cores > 1)
        printf("compute cycles / core:  %s cycles (%" PRIu64 " of %" PRIu64 " folds)\n",
               np_human_count(r->compute_core, a, sizeof a),
               (r->t.folds + cores - 1) / cores, r->t.folds);
    printf("stall cycles:           %s cycles\n", np_human_count(r->stall, a, sizeof a));
    if (calc)
        printf("simulated kernel:       %s cycles on the architecture's memory\n",
               np_human_count(r->sim_total, a, sizeof a));
    printf("overall utilization:    %.2f %%\n", r->overall_pct);
    printf("mapping efficiency:     %.2f %%\n", r->t.mapping_efficiency_pct);
    printf("compute utilization:    %.2f %%\n", r->t.compute_util_pct);
    printf("SRAM reads:             ifmap %s, filter %s elements\n",
           np_human_count(r->t.sram_ifmap_reads, a, sizeof a),
           np_human_count(r->t.sram_filter_reads, b, sizeof b));
    printf("SRAM writes:            ofmap %s elements\n",
           np_human_count(r->t.sram_ofmap_writes, a, sizeof a));
    printf("DRAM:                   read %s, written %s (%.2f GB/s)\n",
           np_human_bytes(r->dram_rd, a, sizeof a), np_human_bytes(r->dram_wr, b, sizeof b),
           r->dram_gbs);
    if (r->l2) { /* the L2: what the cores moved through it, what reached the HBM */
        printf("L2:                     read %s, written %s, %.1f %% of the sectors read hit\n",
               np_human_bytes((uint64_t)json_integer_value(json_object_get(r->l2, "read_bytes")),
                              a, sizeof a),
               np_human_bytes((uint64_t)json_integer_value(json_object_get(r->l2, "write_bytes")),
                              b, sizeof b),
               json_real_value(json_object_get(r->l2, "hit_pct")));
    }
    if (r->hbm_mesh) { /* controllers on the mesh: what set the DMA's rate */
        json_t *lim = json_object_get(r->hbm_mesh, "limited_bytes");
        double all = (double)json_integer_value(json_object_get(r->hbm_mesh, "bytes"));
        if (all <= 0)
            all = 1;
        printf("HBM over the mesh:      rate set by the controllers %.1f %%, their ports %.1f %%, "
               "mesh links %.1f %%, the copies %.1f %%\n",
               100.0 * (double)json_integer_value(json_object_get(lim, "controllers")) / all,
               100.0 * (double)json_integer_value(json_object_get(lim, "controller_ports")) / all,
               100.0 * (double)json_integer_value(json_object_get(lim, "mesh_links")) / all,
               100.0 * (double)json_integer_value(json_object_get(lim, "copies")) / all);
        json_t *c;
        size_t i;
        json_array_foreach(json_object_get(r->hbm_mesh, "controllers"), i, c)
            printf("  %-20s  router %-3" JSON_INTEGER_FORMAT "  %.1f %% busy, %s limited by it\n",
                   json_string_value(json_object_get(c, "name")),
                   json_integer_value(json_object_get(c, "router")),
                   json_real_value(json_object_get(c, "util_pct")),
                   np_human_bytes((uint64_t)json_integer_value(json_object_get(c, "limited_bytes")),
                                  a, sizeof a));
    }
}

/* The command line, parsed. */
typedef struct layer_cli {
    const char *arch_name, *topology, *scalecfg_path, *trace_path, *model, *reports;
    const char *array, *dataflow;
    uint64_t pad, cores, batch, gemm[3], conv[7];
    bool have_pad, have_gemm, have_conv, json, csv, help;
    const char *sets[MXU_SCALECFG_MAX_SETS + LAYER_MAX_SETS + 3];
    size_t n_sets;
    char rows_set[64], cols_set[64], df_set[64];
} layer_cli;

/* Reads the options into *c (defaults first); NP_ERR_USAGE for a bad or missing one. With
 * --help: the usage printed, c->help set, NP_OK. */
static np_status layer_parse(int argc, char **argv, layer_cli *c, trace_layout_opts *trace_opts,
                             np_err *err)
{
    static const struct option longopts[] = {
        {"arch", required_argument, NULL, 'a'}, {"set", required_argument, NULL, 's'},
        {"array", required_argument, NULL, 'A'}, {"dataflow", required_argument, NULL, 'd'},
        {"gemm", required_argument, NULL, 'g'}, {"conv", required_argument, NULL, 'c'},
        {"topology", required_argument, NULL, 't'},
        {"scalesim-config", required_argument, NULL, 'S'},
        {"pad", required_argument, NULL, 'p'},  {"cores", required_argument, NULL, 'n'},
        {"trace", required_argument, NULL, 'T'}, {"model", required_argument, NULL, 'm'},
        {"batch", required_argument, NULL, 'B'}, {"reports", required_argument, NULL, 'R'},
        {"json", no_argument, NULL, 'j'},       {"help", no_argument, NULL, 'h'},
        {"csv", no_argument, NULL, 'V'},        CLI_TRACE_LONGOPTS,
        {0}};
    memset(c, 0, sizeof *c);
    c->arch_name = CLI_DEFAULT_ARCH;
    c->cores = c->batch = 1;
    int o;
    cli_getopt_reset();
    while ((o = cli_getopt(argc, argv, "h", longopts, err)) != -1) {
        np_status st = NP_OK;
        switch (o) {
        case 'a': c->arch_name = optarg; break;
        case 's': st = cli_add_set(c->sets, &c->n_sets, LAYER_MAX_SETS, optarg, err); break;
        case 'A': c->array = optarg; break;
        case 'd': c->dataflow = optarg; break;
        case 'g':
            st = layer_parse_list("--gemm", optarg, c->gemm, 3, "M,N,K", err);
            c->have_gemm = true;
            break;
        case 'c':
            st = layer_parse_list("--conv", optarg, c->conv, 7, "H,W,R,S,C,K,STRIDE", err);
            c->have_conv = true;
            break;
        case 't': c->topology = optarg; break;
        case 'S': c->scalecfg_path = optarg; break;
        case 'p':
            st = cli_parse_u64("--pad", optarg, 0, 1u << 20, &c->pad, err);
            c->have_pad = true;
            break;
        case 'n': st = cli_parse_u64("--cores", optarg, 1, 65536, &c->cores, err); break;
        case 'T': c->trace_path = optarg; break;
        case CLI_TRACE_OPT_CHIPS:
        case CLI_TRACE_OPT_MAX_BYTES:
        case CLI_TRACE_OPT_LEVEL: st = cli_trace_flag(trace_opts, o, optarg, err); break;
        case 'm': c->model = optarg; break;
        case 'B': st = cli_parse_u64("--batch", optarg, 1, 1 << 20, &c->batch, err); break;
        case 'R': c->reports = optarg; break;
        case 'j': c->json = true; break;
        case 'V': c->csv = true; break;
        case 'h': cli_print_usage(cli_find("layer")); c->help = true; return NP_OK;
        default: return err->status;
        }
        if (st != NP_OK)
            return st;
    }
    if (cli_trace_need_path(c->trace_path, trace_opts, err) != NP_OK)
        return err->status;
    if (optind < argc)
        return np_err_set(err, NP_ERR_USAGE, "unexpected argument '%s'", argv[optind]);
    if ((int)c->have_gemm + (int)c->have_conv + (c->topology != NULL) + (c->model != NULL) != 1)
        return np_err_set(err, NP_ERR_USAGE, "give exactly one of --gemm, --conv, --topology "
                          "and --model");
    if (c->have_pad && !c->have_conv)
        return np_err_set(err, NP_ERR_USAGE, "--pad applies to --conv only");
    if (c->json && c->csv)
        return np_err_set(err, NP_ERR_USAGE, "--json and --csv: one output format at a time");
    return NP_OK;
}

/* The architecture: the preset or file, then a SCALE-Sim .cfg's settings (*sc), then --set,
 * --array and --dataflow over them. */
static np_status layer_arch(layer_cli *c, arch_config *cfg, mxu_scalecfg *sc, np_err *err)
{
    if (c->scalecfg_path) {
        /* The SCALE-Sim file comes first, so --set, --array and --dataflow override it; its
         * bandwidth needs the clock of the architecture as the user gave it. */
        arch_config base;
        if (arch_resolve(c->arch_name, c->sets, c->n_sets, &base, err) != NP_OK)
            return err->status;
        if (mxu_scalecfg_load(c->scalecfg_path, base.core.clock_ghz, sc, err) != NP_OK)
            return err->status;
        memmove(c->sets + sc->n_sets, c->sets, c->n_sets * sizeof *c->sets);
        for (size_t i = 0; i < sc->n_sets; i++)
            c->sets[i] = sc->sets[i];
        c->n_sets += sc->n_sets;
    }
    if (c->array) {
        const arch_key_info *kr = arch_key_find("core.array_rows");
        uint64_t rc[2];
        int nd;
        if (np_parse_dims(NP_SRC_OPT("--array"), c->array, 2, 2, (uint64_t)kr->min,
                          (uint64_t)kr->max, UINT64_MAX, rc, &nd, err) != NP_OK)
            return err->status;
        snprintf(c->rows_set, sizeof c->rows_set, "core.array_rows=%" PRIu64, rc[0]);
        snprintf(c->cols_set, sizeof c->cols_set, "core.array_cols=%" PRIu64, rc[1]);
        c->sets[c->n_sets++] = c->rows_set;
        c->sets[c->n_sets++] = c->cols_set;
    }
    if (c->dataflow) {
        const arch_enum_info *ei = arch_key_find("core.dataflow")->enum_info;
        size_t idx;
        if (np_parse_enum(NP_SRC_OPT("--dataflow"), c->dataflow, "dataflow", ei->values, ei->n,
                          &idx, err) != NP_OK)
            return err->status;
        snprintf(c->df_set, sizeof c->df_set, "core.dataflow=%s", ei->values[idx]);
        c->sets[c->n_sets++] = c->df_set;
    }
    if (arch_resolve(c->arch_name, c->sets, c->n_sets, cfg, err) != NP_OK)
        return err->status;
    if (c->cores > (uint64_t)cfg->chip.cores)
        return np_err_set(err, NP_ERR_USAGE, "--cores %llu: the chip has %lld cores",
                          (unsigned long long)c->cores, (long long)cfg->chip.cores);
    return NP_OK;
}

/* The layers: a topology file, a model's, or the one of --gemm or --conv. */
static np_status layer_topology(const layer_cli *c, mxu_topology *topo, np_err *err)
{
    if (c->topology)
        return mxu_topology_load(c->topology, topo, err);
    if (c->model)
        return layer_model_topology(c->model, (int64_t)c->batch, topo, err);
    topo->layers = calloc(1, sizeof *topo->layers);
    if (!topo->layers)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory");
    topo->n = 1;
    mxu_layer *l = &topo->layers[0];
    const uint64_t *conv = c->conv;
    snprintf(l->name, sizeof l->name, "%s", c->have_gemm ? "gemm" : "conv");
    l->m = c->gemm[0], l->n = c->gemm[1], l->k = c->gemm[2];
    if (c->have_conv && c->have_pad) {
        /* ordinary semantics: pad on every side, E = (H + 2 pad - R) / stride + 1 */
        uint64_t h = conv[0] + 2 * c->pad, w = conv[1] + 2 * c->pad;
        if (conv[2] > h || conv[3] > w)
            return np_err_set(err, NP_ERR_RANGE, "--conv: the filter is larger than the "
                              "padded input");
        l->m = layer_sim_mul((h - conv[2]) / conv[6] + 1, (w - conv[3]) / conv[6] + 1);
        l->n = conv[5];
        l->k = layer_sim_mul(layer_sim_mul(conv[2], conv[3]), conv[4]);
    } else if (c->have_conv) {
        mxu_conv cv = {conv[0], conv[1], conv[2], conv[3], conv[4], conv[5], conv[6], conv[6]};
        if (mxu_conv_gemm(&cv, &l->m, &l->n, &l->k, err) != NP_OK)
            return err->status;
        l->is_conv = true, l->conv = cv;
    }
    return NP_OK;
}

/* What the layers' loop needs besides the command line. */
typedef struct layer_job {
    const layer_cli *c;
    const arch_config *cfg;
    mxu_array arr;
    bool calc, table;
    cli_trace tr;
    json_t *layers;       /* --json, --csv: a row per layer */
    mxu_report_row *rows; /* --reports: a row per layer, else NULL */
} layer_job;

/* Layer i simulated, its figures kept (rows, layers) or printed. */
static np_status layer_one(layer_job *j, const mxu_layer *l, size_t i, np_err *err)
{
    const layer_cli *c = j->c;
    const uint64_t *conv = c->conv;
    /* a conv runs as the conv kernel on its padded input (the padding is not charged): --pad,
     * ordinary semantics; else SCALE-Sim's output size (layer_sim_scalesim_conv) */
    kgen_conv kc = {.h = conv[0] + 2 * c->pad, .w = conv[1] + 2 * c->pad, .c = conv[4],
                    .r = conv[2], .s = conv[3], .filters = conv[5], .stride = conv[6],
                    .dtype = ISA_DTYPE_BF16};
    if (!c->have_pad && l->is_conv)
        kc = layer_sim_scalesim_conv(&l->conv);
    kc.cores = c->cores;
    const kgen_conv *kp = c->have_pad || l->is_conv ? &kc : NULL;
    uint64_t in_e = kp ? layer_sim_mul(layer_sim_mul(kp->h, kp->w), kp->c)
                       : layer_sim_mul(l->m, l->k);
    layer_result lr;
    core_report *rep = NULL;
    core_sim_opts so = {.trace = j->tr.w ? cli_trace_insn : NULL, .trace_ctx = &j->tr};
    np_status st = layer_sim_check_fits(j->cfg, l->name, in_e, layer_sim_mul(l->k, l->n),
                                        layer_sim_mul(l->m, l->n), err);
    if (st == NP_OK)
        st = layer_sim_run(j->cfg, &j->arr, l->m, l->n, l->k, kp, c->cores, j->calc, &so, &lr,
                           j->tr.w ? &rep : NULL, err);
    if (st != NP_OK) {
        np_err_prefix(err, "layer %zu (%s)", i, l->name);
        return st;
    }
    if (j->rows) {
        j->rows[i] = (mxu_report_row){.t = lr.t, .total_cycles = lr.total,
                                      .stall_cycles = lr.stall, .dram_cycles = lr.sim_total,
                                      .pes = j->arr.rows * j->arr.cols * c->cores};
        mxu_report_words(l, &j->rows[i].ifmap_words, &j->rows[i].filter_words,
                         &j->rows[i].ofmap_words);
    }
    if (j->tr.w) { /* the layer on its own thread; the next one starts where it ended */
        cli_trace_kernels(&j->tr, rep);
        core_report_free(rep);
        cli_trace_span(&j->tr, 0, UINT32_MAX - 1, "layers", l->name, "layer", 0, lr.total_ps);
        j->tr.offset_ps += lr.total_ps;
    }
    if (c->json || c->csv) {
        json_t *o = layer_json(l, &lr);
        if (o && ((lr.hbm_mesh && json_object_set(o, "hbm_mesh", lr.hbm_mesh)) ||
                  (lr.l2 && json_object_set(o, "l2", lr.l2)))) {
            json_decref(o);
            o = NULL;
        }
        if (!o || json_array_append_new(j->layers, o))
            st = np_err_set(err, NP_ERR_NOMEM, "out of memory");
    } else if (j->table) {
        printf("%zu, %" PRIu64 ", %" PRIu64 ", %.4f, %.4f, %.4f, %" PRIu64 ",\n", i, lr.total,
               lr.stall, lr.overall_pct, lr.t.mapping_efficiency_pct, lr.t.compute_util_pct,
               lr.compute_core);
    } else {
        layer_print(l, &j->arr, &lr, kp, c->cores, j->calc);
    }
    json_decref(lr.hbm_mesh);
    json_decref(lr.l2);
    return st;
}

/* --csv or --json: the layers' rows (taken), after the loop. */
static np_status layer_output(const layer_job *j, json_t *layers, np_err *err)
{
    const layer_cli *c = j->c;
    if (c->csv) {
        static const char *const keys[] = {
            "name", "m", "n", "k", "total_cycles", "compute_cycles", "compute_cycles_per_core",
            "simulated_cycles", "stall_cycles", "overall_util_pct", "mapping_efficiency_pct",
            "compute_util_pct", "dram_read_bytes", "dram_write_bytes", "dram_gb_per_s", "kernel"};
        bool ok = csv_json_rows(stdout, layers, keys, sizeof keys / sizeof keys[0]);
        json_decref(layers);
        return ok ? NP_OK : np_err_set(err, NP_ERR_NOMEM, "out of memory");
    }
    if (!c->json) {
        json_decref(layers);
        return NP_OK;
    }
    static const char *dfn[] = {"os", "ws", "is"};
    char arrs[64];
    snprintf(arrs, sizeof arrs, "%" PRIu64 "x%" PRIu64, j->arr.rows, j->arr.cols);
    return cli_print_json(json_pack("{s:s, s:s, s:s, s:I, s:s, s:o}", "arch", j->cfg->name,
                                    "array", arrs, "dataflow", dfn[j->arr.dataflow], "cores",
                                    (json_int_t)c->cores, "interface_bandwidth",
                                    !c->scalecfg_path ? "arch" : j->calc ? "CALC" : "USER",
                                    "layers", layers),
                          err);
}

/* The command with its trace options (whose chip list the caller frees). */
static np_status layer_main(int argc, char **argv, trace_layout_opts *trace_opts, np_err *err)
{
    layer_cli c;
    np_status st = layer_parse(argc, argv, &c, trace_opts, err);
    if (st != NP_OK || c.help)
        return st;
    mxu_scalecfg sc = {0};
    arch_config cfg;
    if (layer_arch(&c, &cfg, &sc, err) != NP_OK)
        return err->status;
    mxu_topology topo = {0};
    if (layer_topology(&c, &topo, err) != NP_OK) {
        mxu_topology_free(&topo);
        return err->status;
    }
    layer_job j = {.c = &c, .cfg = &cfg, .table = c.topology || c.model,
                   .calc = c.scalecfg_path && sc.calc_bandwidth, .layers = json_array()};
    mxu_array_from_arch(&cfg, &j.arr);
    j.arr.pipelined = false; /* SCALE-Sim's figures are SCALE-Sim's; the kernel runs as set */
    j.rows = c.reports ? calloc(topo.n, sizeof *j.rows) : NULL;
    if (!j.layers || (c.reports && !j.rows))
        st = np_err_set(err, NP_ERR_NOMEM, "out of memory");
    if (st == NP_OK && c.trace_path)
        st = cli_trace_open_opts(&j.tr, c.trace_path, trace_opts, err);
    if (st == NP_OK && !c.json && !c.csv && j.table) /* SCALE-Sim's COMPUTE_REPORT columns */
        printf("LayerID, Total Cycles, Stall Cycles, Overall Util %%, Mapping Efficiency %%, "
               "Compute Util %%, Compute Cycles,\n");
    for (size_t i = 0; i < topo.n && st == NP_OK; i++)
        st = layer_one(&j, &topo.layers[i], i, err);
    if (st == NP_OK && j.rows)
        st = mxu_reports_write(c.reports, sc.run_name[0] ? sc.run_name : "npusim_layer", j.rows,
                               topo.n, err);
    free(j.rows);
    mxu_topology_free(&topo);
    if (j.tr.w) {
        np_err terr;
        np_status ts = cli_trace_close(&j.tr, st == NP_OK ? err : &terr);
        if (st == NP_OK)
            st = ts;
    }
    if (st != NP_OK) {
        json_decref(j.layers);
        return st;
    }
    return layer_output(&j, j.layers, err);
}

np_status cmd_layer(int argc, char **argv, np_err *err)
{
    trace_layout_opts o = {.level = TRACE_LEVEL_INSN};
    np_status st = layer_main(argc, argv, &o, err);
    trace_chips_free(&o.chips);
    return st;
}
