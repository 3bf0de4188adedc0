/* cmd_search.c — `npusim search`: the best parallel strategies of a model's training step on
 * N chips, found by simulation with branch and bound (sim/search.h, docs/search.md). This
 * file parses the options and prints; the search is search_run's. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "cli.h"
#include "csv.h"
#include "human.h"
#include "parse.h"
#include "cli_strategy.h"
#include "run_job.h"
#include "search.h"

const char cmd_search_usage[] =
    "usage: npusim search --model M --arch A --chips N --batch B [--seq S]\n"
    "                     [--objective step-time|tokens-per-s|mfu|memory] [--top K]\n"
    "                     [--max-microbatch b] [--max-virtual V] [--exhaustive] [-j J]\n"
    "                     [--kernel-cache FILE] [--set K=V ...] [how the software runs\n"
    "                     the step: --attention, --dropout, --precision, --bucket-mb, --ddp,\n"
    "                     --p2p, --host-sync, --loss-scale, --clip-grad, ...] [--json | --csv]\n"
    "\n"
    "Every legal strategy of N chips (dp x tp x pp = N, micro-batch, ZeRO, recomputation,\n"
    "sequence parallelism, 1F1B, GPipe, interleaved:V), what does not fit in HBM discarded,\n"
    "the rest ordered by a lower bound of the step and simulated (fast fidelity, one kernel\n"
    "timer for all) while the bound can still beat the K-th best found (docs/search.md).\n"
    "\n"
    "  --model M          a zoo model, a model file, a Hugging Face config or an .onnx file\n"
    "  --arch A           architecture preset or YAML file; with more chips than it has,\n"
    "                     system.chips is set to N\n"
    "  --chips N          chips of every strategy (dp x tp x pp)\n"
    "  --batch B          global batch (samples per step)\n"
    "  --seq S            sequence length of language models (default: the model's context)\n"
    "  --objective O      step-time (default), tokens-per-s, mfu (for a fixed model and batch\n"
    "                     all three rank by the step) or memory (the largest chip's)\n"
    "  --top K            the K best, found exactly (default 10)\n"
    "  --max-microbatch b largest micro-batch tried (default 8)\n"
    "  --max-virtual V    largest number of interleaved virtual stages tried (default 4)\n"
    "  --exhaustive       simulate every strategy that fits (no bound prunes)\n"
    "  -j J               J worker processes: they screen the candidates' plans, then\n"
    "                     bound and simulate several of the best at a time (default 1)\n"
    "  --kernel-cache F   kernel timings kept in file F across searches and runs\n"
    "  --set K=V          override an architecture key (repeatable)\n"
    "  the flags of npusim plan that are not searched (--attention, --dropout, --precision,\n"
    "  --bucket-mb, --placement, --no-pp-scatter-gather, --ddp, --p2p, --host-sync,\n"
    "  --loss-scale, --clip-grad, --tp-comm-overlap, --overlap-param-gather) hold for every\n"
    "  candidate; --dp, --tp, --pp, --zero, --sp, --microbatch, --schedule, --recompute and\n"
    "  --stage-layers are what the search chooses\n"
    "  --json             {candidates, illegal, oom, pruned_cheap, pruned_tight, simulated,\n"
    "                     failed, ranking: [{rank, strategy, flags, step_time_s, ...}],\n"
    "                     discarded: [...]} with exact values\n"
    "  --csv              one row per candidate: its state, strategy, figures and bounds\n";

enum {
    SO_MODEL = 0x100, SO_ARCH, SO_CHIPS, SO_OBJECTIVE, SO_TOP, SO_MAX_MB,
    SO_MAX_V, SO_EXHAUSTIVE, SO_KCACHE, SO_SET, SO_JSON, SO_CSV
};

#define SO_SETS_MAX 64

typedef struct so_print {
    cli_progress prog;
    bool stream;    /* text output: print each simulated candidate as it comes */
    search_objective obj;
} so_print;

static void so_progress(void *ctx, const char *what, double done)
{
    so_print *p = ctx;
    cli_progress_show(&p->prog, what, done);
}

static const char *const so_state_names[] = {"illegal", "oom", "pruned", "simulated",
                                              "failed"};

static void so_row(const search_cand *c, int rank, const search_result *r)
{
    char st[32], tok[32], mem[32], bnd[32], name[160];
    np_human_s(c->fig.step_s, st, sizeof st);
    np_human_si(c->fig.tokens_per_s, "tokens/s", tok, sizeof tok);
    np_human_bytes(c->mem_bytes, mem, sizeof mem);
    np_human_s(c->bound_s, bnd, sizeof bnd);
    char rk[16];
    snprintf(rk, sizeof rk, rank > 0 ? "%d" : "-", rank);
    printf("%4s %*s %*s %6.1f %% %*s %*s  %s\n", rk, np_human_width(st, 10), st,
           np_human_width(tok, 18), tok, c->fig.mfu_pct, np_human_width(mem, 10), mem,
           np_human_width(bnd, 10), bnd, search_strategy_name(&c->s, name, sizeof name));
    (void)r;
}

static void so_header(void)
{
    printf("%4s %10s %18s %8s %10s %10s  %s\n", "rank", "step", "throughput", "MFU",
           "memory", "bound", "strategy");
}

static void so_simulated(void *ctx, const search_result *r, uint32_t i)
{
    so_print *p = ctx;
    if (!p->stream)
        return;
    cli_progress_end(&p->prog);
    so_row(&r->cand[i], 0, r);
    fflush(stdout);
}

/* "+1.23 ms" / "-0.40 ms" */
static const char *so_delta(double d, char *buf, size_t n)
{
    char v[24];
    np_human_s(fabs(d), v, sizeof v);
    snprintf(buf, n, "%s%s", d < 0 ? "-" : "+", v);
    return buf;
}

static void so_explain(const search_result *r, const search_cand *a, const search_cand *b)
{
    char n1[160], n2[160], x[32], y[32], d[32];
    printf("\nthe winner against the runner-up (per step, mean over chips):\n");
    printf("  winner      %s\n  runner-up   %s\n", search_strategy_name(&a->s, n1, sizeof n1),
           search_strategy_name(&b->s, n2, sizeof n2));
    struct {
        const char *what;
        double va, vb;
    } rows[] = {{"step", a->fig.step_s, b->fig.step_s},
                {"compute", a->fig.compute_s, b->fig.compute_s},
                {"exposed comm", a->fig.exposed_comm_s, b->fig.exposed_comm_s},
                {"bubble", a->fig.bubble_s, b->fig.bubble_s},
                {"other idle", a->fig.idle_s, b->fig.idle_s}};
    printf("  %-18s %12s %12s %12s\n", "", "winner", "runner-up", "difference");
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        printf("  %-18s %12s %12s %12s\n", rows[i].what, np_human_s(rows[i].va, x, sizeof x),
               np_human_s(rows[i].vb, y, sizeof y), so_delta(rows[i].va - rows[i].vb, d,
                                                             sizeof d));
    for (int k = 0; k < RUN_COMM_COUNT; k++) {
        if (a->fig.exposed_s[k] == 0 && b->fig.exposed_s[k] == 0)
            continue;
        char what[64];
        snprintf(what, sizeof what, "  exposed %s", run_comm_kind_name((run_comm_kind)k));
        printf("  %-18s %12s %12s %12s\n", what, np_human_s(a->fig.exposed_s[k], x, sizeof x),
               np_human_s(b->fig.exposed_s[k], y, sizeof y),
               so_delta(a->fig.exposed_s[k] - b->fig.exposed_s[k], d, sizeof d));
    }
    if (r->hbm_bytes) {
        char ha[32], hb[32];
        printf("  %-18s %12s %12s\n", "memory headroom",
               np_human_bytes(r->hbm_bytes - a->mem_bytes, ha, sizeof ha),
               np_human_bytes(r->hbm_bytes - b->mem_bytes, hb, sizeof hb));
    }
}

static void so_text(const search_opts *o, const search_result *r, const char *model,
                    const char *arch, const char *model_arg, const char *arch_arg,
                    const char *const *sets, size_t n_sets)
{
    char c1[32], c2[32], c3[32], c4[32], hbm[32], w[32];
    uint32_t fit = r->n_cand - r->n_illegal - r->n_oom;
    printf("\n# search: %s on %s, %d chips, batch %" PRId64 ", objective %s, top %d\n", model,
           arch, o->chips, o->batch, search_objective_name(o->objective), o->top ? o->top : 10);
    printf("candidates  %s enumerated: %s illegal (the plan refuses them), %s do not fit in "
           "%s of HBM, %s fit\n", np_human_count(r->n_cand, c1, sizeof c1),
           np_human_count(r->n_illegal, c2, sizeof c2), np_human_count(r->n_oom, c3, sizeof c3),
           np_human_bytes(r->hbm_bytes, hbm, sizeof hbm), np_human_count(fit, c4, sizeof c4));
    printf("pruned      %u by the cheap bound, %u by the tight bound; %u simulated, %u failed "
           "(%s)\n", r->n_pruned_cheap, r->n_pruned_tight, r->n_simulated, r->n_failed,
           np_human_s(r->wall_s, w, sizeof w));
    if (r->kernels)
        printf("kernels     %s distinct (%s compiled and simulated by the "
               "search itself, the rest by its workers or from the kernel cache file)\n",
               np_human_count(r->kernels, c1, sizeof c1),
               np_human_count(r->kernels_simulated, c2, sizeof c2));
    const char *shown = NULL;
    for (uint32_t i = 0; i < r->n_cand; i++)
        if (r->cand[i].state == SEARCH_ILLEGAL && !shown)
            shown = r->cand[i].why;
    if (shown)
        printf("illegal     e.g. %s\n", shown);
    printf("\n");
    so_header();
    uint32_t top = (uint32_t)(o->top ? o->top : 10);
    for (uint32_t k = 0; k < r->n_order && k < top; k++)
        so_row(&r->cand[r->order[k]], (int)k + 1, r);
    if (r->n_order >= 2)
        so_explain(r, &r->cand[r->order[0]], &r->cand[r->order[1]]);
    if (r->n_order >= 1) {
        char f[200];
        /* as given: the architecture argument and its overrides (a file's name is not its
         * path, and a preset with --set is not the preset) */
        printf("\nrun the best: npusim run --model %s --arch %s", model_arg, arch_arg);
        for (size_t k = 0; k < n_sets; k++)
            printf(strpbrk(sets[k], " \t'\"$\\") ? " --set '%s'" : " --set %s", sets[k]);
        printf(" --batch %" PRId64 " %s\n", o->batch,
               search_strategy_flags(&r->cand[r->order[0]].s, f, sizeof f));
    }
}

static json_t *so_cand_json(const search_cand *c)
{
    char name[160], flags[200];
    json_t *j = json_pack("{s:s, s:s, s:s, s:i, s:i, s:i, s:I, s:i, s:b, s:s, s:i, s:I, s:f, "
                          "s:f}",
                          "state", so_state_names[c->state], "strategy",
                          search_strategy_name(&c->s, name, sizeof name), "flags",
                          search_strategy_flags(&c->s, flags, sizeof flags), "dp", c->s.dp,
                          "tp", c->s.tp, "pp", c->s.pp, "microbatch", (json_int_t)c->s.microbatch,
                          "zero", c->s.zero, "sp", c->s.sp, "recompute",
                          c->s.recompute == NN_RECOMPUTE_NONE ? "none"
                          : c->s.recompute == NN_RECOMPUTE_FULL ? "full" : "selective",
                          "virtual_stages", c->s.virtual_stages, "memory_bytes",
                          (json_int_t)c->mem_bytes, "bound_cheap_s", c->bound_cheap_s,
                          "bound_s", c->bound_s);
    if (!j)
        return NULL;
    json_object_set_new(j, "schedule", json_string(c->s.schedule == NN_PP_GPIPE ? "gpipe"
                                                   : c->s.schedule == NN_PP_1F1B ? "1f1b"
                                                                                 : "interleaved"));
    if (c->state == SEARCH_SIMULATED) {
        json_object_set_new(j, "step_time_s", json_real(c->fig.step_s));
        json_object_set_new(j, "tokens_per_s", json_real(c->fig.tokens_per_s));
        json_object_set_new(j, "mfu_pct", json_real(c->fig.mfu_pct));
        json_object_set_new(j, "compute_s", json_real(c->fig.compute_s));
        json_object_set_new(j, "exposed_comm_s", json_real(c->fig.exposed_comm_s));
        json_object_set_new(j, "bubble_s", json_real(c->fig.bubble_s));
        json_object_set_new(j, "idle_s", json_real(c->fig.idle_s));
        json_t *ex = json_object();
        for (int k = 0; k < RUN_COMM_COUNT; k++)
            if (c->fig.exposed_s[k] > 0)
                json_object_set_new(ex, run_comm_kind_name((run_comm_kind)k),
                                    json_real(c->fig.exposed_s[k]));
        json_object_set_new(j, "exposed_s", ex);
    }
    if (c->why[0])
        json_object_set_new(j, "why", json_string(c->why));
    return j;
}

static json_t *so_json(const search_opts *o, const search_result *r, const char *model,
                       const char *arch)
{
    json_t *rank = json_array(), *all = json_array();
    for (uint32_t k = 0; k < r->n_order; k++) {
        json_t *c = so_cand_json(&r->cand[r->order[k]]);
        json_object_set_new(c, "rank", json_integer(k + 1));
        json_array_append_new(rank, c);
    }
    for (uint32_t i = 0; i < r->n_cand; i++)
        json_array_append_new(all, so_cand_json(&r->cand[i]));
    return json_pack("{s:s, s:s, s:i, s:I, s:s, s:i, s:I, s:i, s:i, s:i, s:i, s:i, s:i, s:i, "
                     "s:i, s:i, s:o, s:o}",
                     "model", model, "arch", arch, "chips", o->chips, "batch",
                     (json_int_t)o->batch, "objective", search_objective_name(o->objective),
                     "top", o->top ? o->top : 10, "hbm_bytes", (json_int_t)r->hbm_bytes,
                     "candidates", (int)r->n_cand, "illegal", (int)r->n_illegal, "oom",
                     (int)r->n_oom, "pruned_cheap", (int)r->n_pruned_cheap, "pruned_tight",
                     (int)r->n_pruned_tight, "simulated", (int)r->n_simulated, "failed",
                     (int)r->n_failed, "kernels", (int)r->kernels, "kernels_simulated",
                     (int)r->kernels_simulated, "ranking", rank, "candidates_all", all);
}

static np_status so_csv(const search_result *r, np_err *err)
{
    json_t *rows = json_array();
    bool ok = rows != NULL;
    for (uint32_t i = 0; ok && i < r->n_cand; i++) {
        json_t *c = so_cand_json(&r->cand[i]);
        ok = c && json_object_set_new(c, "index", json_integer(i)) == 0 &&
             json_array_append_new(rows, c) == 0;
    }
    for (uint32_t k = 0; ok && k < r->n_order; k++)
        json_object_set_new(json_array_get(rows, r->order[k]), "rank", json_integer(k + 1));
    static const char *const head[] = {"index", "rank", "state", "strategy", "dp", "tp", "pp",
                                       "microbatch", "schedule", "virtual_stages", "zero", "sp",
                                       "recompute", "memory_bytes", "bound_cheap_s", "bound_s",
                                       "step_time_s", "tokens_per_s", "mfu_pct", "compute_s",
                                       "exposed_comm_s", "bubble_s", "idle_s", "why"};
    ok = ok && csv_json_rows(stdout, rows, head, sizeof head / sizeof head[0]);
    json_decref(rows);
    return ok ? NP_OK : np_err_set(err, NP_ERR_NOMEM, "out of memory");
}

np_status cmd_search(int argc, char **argv, np_err *err)
{
    static const struct option longopts[] = {
        {"model", required_argument, NULL, SO_MODEL},
        {"arch", required_argument, NULL, SO_ARCH},
        {"chips", required_argument, NULL, SO_CHIPS},
        {"objective", required_argument, NULL, SO_OBJECTIVE},
        {"top", required_argument, NULL, SO_TOP},
        {"max-microbatch", required_argument, NULL, SO_MAX_MB},
        {"max-virtual", required_argument, NULL, SO_MAX_V},
        {"exhaustive", no_argument, NULL, SO_EXHAUSTIVE},
        {"kernel-cache", required_argument, NULL, SO_KCACHE},
        {"set", required_argument, NULL, SO_SET},
        {"json", no_argument, NULL, SO_JSON},
        {"csv", no_argument, NULL, SO_CSV},
        {"help", no_argument, NULL, 'h'},
        CLI_STRATEGY_LONGOPTS,
        {NULL, 0, NULL, 0}};
    cli_strategy cs;
    cli_strategy_init(&cs);
    const char *model = NULL, *arch = NULL;
    const char *sets[SO_SETS_MAX + 1];
    size_t n_sets = 0;
    bool json = false, csv = false;
    search_opts o = {0};
    uint64_t v;
    int c;
    np_status st = NP_OK;
    cli_getopt_reset();
    while (st == NP_OK && (c = cli_getopt(argc, argv, "hj:", longopts, err)) != -1) {
        if (cli_strategy_is_flag(c)) {
            st = cli_strategy_flag(&cs, c, optarg, err);
            if (st == NP_OK && c != CLI_STRATEGY_OPT_BATCH && c != CLI_STRATEGY_OPT_SEQ &&
                (c <= CLI_STRATEGY_OPT_RECOMPUTE || c == CLI_STRATEGY_OPT_STAGE_LAYERS)) {
                const char *name = "?";
                for (const struct option *lo = longopts; lo->name; lo++)
                    if (lo->val == c)
                        name = lo->name;
                st = np_err_set(err, NP_ERR_USAGE, "--%s is what npusim search chooses (every "
                                "legal value is tried): leave it out", name);
            }
            continue;
        }
        switch (c) {
        case SO_MODEL: model = optarg; break;
        case SO_ARCH: arch = optarg; break;
        case SO_CHIPS:
            st = cli_parse_u64("--chips", optarg, 1, 1048576, &v, err);
            o.chips = (int)v;
            break;
        case SO_OBJECTIVE: {
            int ob = search_objective_parse(optarg);
            if (ob < 0)
                st = np_err_set(err, NP_ERR_USAGE, "--objective '%s': expected step-time, "
                                "tokens-per-s, mfu or memory", optarg);
            o.objective = (search_objective)(ob < 0 ? 0 : ob);
            break;
        }
        case SO_TOP:
            st = cli_parse_u64("--top", optarg, 1, 100000, &v, err);
            o.top = (int)v;
            break;
        case SO_MAX_MB:
            st = cli_parse_u64("--max-microbatch", optarg, 1, 1 << 20, &v, err);
            o.max_microbatch = (int)v;
            break;
        case SO_MAX_V:
            st = cli_parse_u64("--max-virtual", optarg, 2, 64, &v, err);
            o.max_virtual = (int)v;
            break;
        case SO_EXHAUSTIVE: o.exhaustive = true; break;
        case 'j':
            st = cli_parse_u64("-j", optarg, 1, 64, &v, err);
            o.jobs = (int)v;
            break;
        case SO_KCACHE: o.kernel_cache = optarg; break;
        case SO_SET: st = cli_add_set(sets, &n_sets, SO_SETS_MAX, optarg, err); break;
        case SO_JSON: json = true; break;
        case SO_CSV: csv = true; break;
        case 'h': cli_print_usage(cli_find("search")); return NP_OK;
        default: st = err->status; break;
        }
    }
    if (st == NP_OK && optind < argc)
        st = np_err_set(err, NP_ERR_USAGE, "unexpected argument '%s'", argv[optind]);
    if (st == NP_OK && json && csv)
        st = np_err_set(err, NP_ERR_USAGE, "--json and --csv: one output format at a time");
    o.batch = cs.o.batch;
    o.seq = cs.o.seq;
    o.fp32 = cs.o.compute == NN_F32;
    o.dropout = cs.o.dropout;
    o.base = &cs.s;
    if (st == NP_OK && (!model || !arch || !o.chips || !o.batch))
        st = np_err_set(err, NP_ERR_USAGE, "%s is required", !model ? "--model" : !arch
                        ? "--arch" : !o.chips ? "--chips" : "--batch");
    if (st != NP_OK)
        return st;
    arch_config cfg;
    nn_model_desc d;
    st = arch_resolve(arch, sets, n_sets, &cfg, err);
    char chips_set[48];
    if (st == NP_OK && o.chips > cfg.system.chips) { /* grow the system to N chips */
        snprintf(chips_set, sizeof chips_set, "system.chips=%d", o.chips);
        sets[n_sets++] = chips_set;
        st = arch_resolve(arch, sets, n_sets, &cfg, err);
    }
    if (st == NP_OK)
        st = nn_model_load(model, &d, err);
    if (st != NP_OK)
        return st;
    so_print pr = {.stream = !json && !csv};
    cli_progress_init(&pr.prog, "search");
    o.cfg = &cfg;
    o.model = &d;
    o.progress = so_progress;
    o.progress_ctx = &pr;
    o.simulated = so_simulated;
    o.simulated_ctx = &pr;
    if (pr.stream)
        printf("simulated as found (step, throughput, MFU, memory, tight bound):\n");
    search_result r;
    st = search_run(&o, &r, err);
    cli_progress_end(&pr.prog);
    if (st != NP_OK)
        return st;
    if (json)
        st = cli_print_json(so_json(&o, &r, d.name, cfg.name), err);
    else if (csv)
        st = so_csv(&r, err);
    else
        so_text(&o, &r, d.name, cfg.name, model, arch, sets, n_sets);
    search_result_free(&r);
    return st;
}
