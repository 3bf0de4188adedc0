/* cmd_kernel.c — `npusim kernel`: one operator compiled to a kernel through the kernel ABI
 * and run on the core model: cycles and time, achieved TFLOP/s and GB/s against the roofline,
 * HBM bytes against the analytical minimum, per-unit utilization.
 *
 * --op "NAME key=value ..." names the op as framework/ops.def writes it; its keys are those its
 * row of the kernel table declares (compiler/kernels.def: --op keys and attributes), so an op
 * plugs in here by registering its kernel. What is computed lives in sim/krun.h; this file
 * parses options and prints. JSON field names are documented in docs/compiler.md and kept
 * stable. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "cli.h"
#include "cli_trace.h"
#include "core.h"
#include "energy.h"
#include "human.h"
#include "isa_asm.h"
#include "kernel.h"
#include "kc_tiles.h"
#include "krun.h"

#define KERNEL_DEFAULT_ARCH "tpu-pod"
#define KERNEL_MAX_SETS 64

const char cmd_kernel_usage[] =
    "usage: npusim kernel --op \"NAME key=value ...\" [--arch PRESET|FILE]\n"
    "                     [--set SECTION.KEY=VALUE ...] [--cores N] [--tune] [--tune-top K]\n"
    "                     [--tiles FILE.json] [--functional] [--seed S] [--emit-asm]\n"
    "                     [--trace FILE[.gz]] [--json]\n"
    "\n"
    "  --op SPEC       the op and its keys, e.g. \"matmul m=4096 n=4096 k=4096 dtype=bf16\":\n"
    "                  matmul m n k [batch ta tb dtype tm tn tk]; conv2d h w c k r s [n\n"
    "                  stride stride_w pad dilation groups dtype tm tn tk]; `npusim kernel\n"
    "                  --list` shows every op with a kernel and its keys\n"
    "  --list          print the ops with kernels, their keys and attributes\n"
    "  --arch A        architecture preset or YAML file (default: " KERNEL_DEFAULT_ARCH ")\n"
    "  --set K=V       override one config key (repeatable)\n"
    "  --cores N       spread the kernel over cores 0 .. N-1 of the chip (default 1)\n"
    "  --tune          simulate the cost model's best tilings and keep the fastest\n"
    "  --tune-top K    how many of them (default 16, at most 16)\n"
    "  --tiles F       a tiling cache: its tiling for this kernel is used; with --tune the\n"
    "                  fastest is stored there (keyed by op, shapes, dtypes, architecture)\n"
    "  --functional    also compute values on seeded inputs and check them against the\n"
    "                  framework's reference executor (timing is unchanged)\n"
    "  --seed S        the inputs' seed for --functional (default 1)\n"
    "  --emit-asm      print the kernel's program (the disassembler's text; in --json: \"asm\")\n"
    "  --trace F       write a Chrome/Perfetto trace of the run (gzip when F ends in .gz)\n"
    "  --json          print one object (fields in docs/compiler.md)\n";

/* ---- --list --------------------------------------------------------------------------------- */

static const char *type_name(kc_attr_type t)
{
    static const char *const n[] = {"int", "bool", "real", "dtype", "shape"};
    return (unsigned)t < sizeof n / sizeof n[0] ? n[t] : "?";
}

static void print_key(const kc_attr_def *a)
{
    printf("    %-10s %-6s ", a->name, type_name(a->type));
    if (isnan(a->dflt))
        printf("%-10s", "(required)");
    else if (a->type == KC_ATTR_DTYPE)
        printf("%-10s", nn_dtype_name((nn_dtype)(int)a->dflt));
    else if (a->type == KC_ATTR_SHAPE)
        printf("%-10s", "");
    else
        printf("%-10g", a->dflt);
    printf(" %s\n", a->doc);
}

static void kernel_list(void)
{
    for (int op = 0; op < NN_OP_COUNT; op++) {
        const kc_kernel_def *d = kc_kernel_find((nn_op)op);
        if (!d)
            continue;
        printf("%s — %s\n", nn_op_name((nn_op)op), d->doc);
        for (unsigned i = 0; i < d->n_keys; i++)
            print_key(&d->keys[i]);
        for (unsigned i = 0; i < d->n_attrs; i++)
            print_key(&d->attrs[i]);
    }
}

/* ---- the command ---------------------------------------------------------------------------- */

/* The kernel's time in ps: its cycles at the core clock. */
static uint64_t figures_ps(const krun_figures *f) { return (uint64_t)llround(f->time_us * 1e6); }

static json_t *figures_json(const char *op, const arch_config *cfg, const krun_figures *f,
                            const krun_result *r)
{
    json_t *j = json_object();
    json_object_set_new(j, "op", json_string(op));
    json_object_set_new(j, "cycles", json_integer((json_int_t)f->cycles));
    json_object_set_new(j, "time_us", json_real(f->time_us));
    json_object_set_new(j, "time_ps", json_integer((json_int_t)figures_ps(f)));
    /* launched on an idle stream: the launch latency and the gap first (docs/run.md) */
    uint64_t launch = core_kernel_launch_ps(cfg, true);
    json_object_set_new(j, "launch_ps", json_integer((json_int_t)launch));
    json_object_set_new(j, "time_launched_ps", json_integer((json_int_t)(figures_ps(f) + launch)));
    json_object_set_new(j, "flops", json_integer((json_int_t)f->flops));
    json_object_set_new(j, "tflops", json_real(f->tflops));
    json_object_set_new(j, "hbm_bytes", json_integer((json_int_t)f->hbm_bytes));
    json_object_set_new(j, "hbm_bytes_min", json_integer((json_int_t)f->hbm_bytes_min));
    json_object_set_new(j, "gbps", json_real(f->gbps));
    if (f->l2)
        json_object_set_new(j, "l2", json_pack("{s:I, s:f, s:f, s:f, s:I}", "bytes",
                                               (json_int_t)f->l2_bytes, "gbps", f->l2_gbps,
                                               "peak_gbps", f->l2_peak_gbps, "hit_pct",
                                               f->l2_hit_pct, "dirty_bytes",
                                               (json_int_t)f->l2_dirty_bytes));
    json_object_set_new(j, "bound", json_string(f->compute_bound ? "compute" : "memory"));
    json_object_set_new(j, "roofline_pct", json_real(f->roofline_pct));
    json_object_set_new(j, "mxu_util_pct", json_real(f->mxu_util_pct));
    json_object_set_new(j, "cores", json_integer(f->cores));
    json_object_set_new(j, "peak_tflops", json_real(f->peak_tflops));
    json_object_set_new(j, "peak_gbps", json_real(f->peak_gbps));
    json_object_set_new(j, "kernel", json_string(r->kernel.name));
    json_object_set_new(j, "schedule", json_string(r->kernel.schedule));
    json_object_set_new(j, "insns", json_integer((json_int_t)r->kernel.insns));
    json_object_set_new(j, "est_cycles", json_integer((json_int_t)r->kernel.est_cycles));
    if (f->energy.modelled)
        json_object_set_new(j, "energy", energy_figures_json(&f->energy));
    if (f->area.modelled) {
        json_object_set_new(j, "area_mm2", json_real(f->area.chip_mm2));
        json_object_set_new(j, "tflops_per_mm2", json_real(f->tflops_per_mm2));
    }
    json_t *rep = core_report_json(r->report);
    if (rep) {
        json_object_set(j, "units", json_object_get(rep, "units"));
        json_decref(rep);
    }
    return j;
}

/* {"cap_w", "throttled", "nominal_ghz", "ghz", "nominal_ps", "ps", "throttle_ps",
 *  "nominal_w", "w", "sims"} */
static json_t *throttle_json(const arch_config *cfg, const energy_throttle *th)
{
    return json_pack("{s:f, s:b, s:f, s:f, s:I, s:I, s:I, s:f, s:f, s:i}", "cap_w",
                     cfg->chip.power_cap_w, "throttled", th->capped, "nominal_ghz",
                     th->nominal_ghz, "ghz", th->ghz, "nominal_ps", (json_int_t)th->nominal_ps,
                     "ps", (json_int_t)th->ps, "throttle_ps",
                     (json_int_t)(th->ps > th->nominal_ps ? th->ps - th->nominal_ps : 0), "nominal_w", th->nominal_w, "w",
                     th->w, "sims", (int)th->sims);
}

static void throttle_print(const arch_config *cfg, const energy_throttle *th)
{
    char a[NP_HUMAN_MAX], b[NP_HUMAN_MAX], c[NP_HUMAN_MAX], d[NP_HUMAN_MAX], e[NP_HUMAN_MAX];
    char g[NP_HUMAN_MAX], h[NP_HUMAN_MAX], i[NP_HUMAN_MAX];
    printf("  power cap     %s a chip: ", np_human_si(cfg->chip.power_cap_w, "W", a, sizeof a));
    if (!th->capped) {
        printf("the kernel draws %s at %s, under it\n",
               np_human_si(th->nominal_w, "W", b, sizeof b),
               np_human_si(th->nominal_ghz * 1e9, "Hz", c, sizeof c));
        return;
    }
    uint64_t lost = th->ps > th->nominal_ps ? th->ps - th->nominal_ps : 0;
    printf("%s at %s, throttled to %s (%s): %s instead of %s, %s (%+.1f%%) lost to "
           "throttling\n", np_human_si(th->nominal_w, "W", b, sizeof b),
           np_human_si(th->nominal_ghz * 1e9, "Hz", c, sizeof c),
           np_human_si(th->ghz * 1e9, "Hz", d, sizeof d), np_human_si(th->w, "W", e, sizeof e),
           np_human_ps(th->ps, g, sizeof g), np_human_ps(th->nominal_ps, h, sizeof h),
           np_human_ps(lost, i, sizeof i),
           100.0 * ((double)th->ps / (double)th->nominal_ps - 1.0));
}

static void figures_print(const char *op, const arch_config *cfg, const char *arch,
                          const krun_figures *f, const krun_result *r, const energy_throttle *th)
{
    char a[NP_HUMAN_MAX], b[NP_HUMAN_MAX], c[NP_HUMAN_MAX], d[NP_HUMAN_MAX];
    printf("%s on %s, %" PRIu32 " core%s\n", op, arch, f->cores, f->cores == 1 ? "" : "s");
    printf("  schedule      %s (%s instructions)\n", r->kernel.schedule,
           np_human_count(r->kernel.insns, a, sizeof a));
    printf("  time          %s cycles, %s at %s\n", np_human_count(f->cycles, a, sizeof a),
           np_human_ps(figures_ps(f), b, sizeof b),
           np_human_si(cfg->core.clock_ghz * 1e9, "Hz", c, sizeof c));
    uint64_t launch = core_kernel_launch_ps(cfg, true);
    if (launch)
        printf("  launched      %s on an idle stream: the launch latency %s and the gap %s "
               "first\n", np_human_ps(figures_ps(f) + launch, a, sizeof a),
               np_human_ps(launch - core_kernel_launch_ps(cfg, false), b, sizeof b),
               np_human_ps(core_kernel_launch_ps(cfg, false), c, sizeof c));
    printf("  compute       %s at %s, %.1f%% of the peak %s",
           np_human_si((double)f->flops, "FLOP", a, sizeof a),
           np_human_si(f->tflops * 1e12, "FLOP/s", b, sizeof b),
           f->peak_tflops > 0 ? 100.0 * f->tflops / f->peak_tflops : 0.0,
           np_human_si(f->peak_tflops * 1e12, "FLOP/s", c, sizeof c));
    if (r->kernel.mxu_flops)
        printf(" (MXU utilization %.1f%%)", f->mxu_util_pct);
    printf("\n  HBM           %s moved (minimum %s) at %s, %.1f%% of %s",
           np_human_bytes(f->hbm_bytes, a, sizeof a), np_human_bytes(f->hbm_bytes_min, b, sizeof b),
           np_human_si(f->gbps * 1e9, "B/s", c, sizeof c),
           f->peak_gbps > 0 ? 100.0 * f->gbps / f->peak_gbps : 0.0,
           np_human_si(f->peak_gbps * 1e9, "B/s", d, sizeof d));
    if (f->l2 && f->l2_dirty_bytes)
        printf("; %s more dirty in the L2", np_human_bytes(f->l2_dirty_bytes, a, sizeof a));
    printf("\n");
    if (f->l2) {
        printf("  L2            cores <- L2 %s (the HBM traffic without it) at %s, %.1f%% of %s",
               np_human_bytes(f->l2_bytes, a, sizeof a),
               np_human_si(f->l2_gbps * 1e9, "B/s", b, sizeof b),
               f->l2_peak_gbps > 0 ? 100.0 * f->l2_gbps / f->l2_peak_gbps : 0.0,
               np_human_si(f->l2_peak_gbps * 1e9, "B/s", c, sizeof c));
        if (cfg->chip.l2_mode == ARCH_L2_MODE_CACHE)
            printf("; %.1f%% of sectors read hit", f->l2_hit_pct);
        printf("\n");
    }
    printf("  roofline      %s-bound: %.1f%% of the bound\n",
           f->compute_bound ? "compute" : "memory", f->roofline_pct);
    if (r->kernel.est_cycles)
        printf("  cost model    %s cycles (%+.1f%% of the simulated)\n",
               np_human_count(r->kernel.est_cycles, a, sizeof a),
               100.0 * ((double)r->kernel.est_cycles - (double)f->cycles) / (double)f->cycles);
    if (f->energy.modelled)
        energy_print(&f->energy, "  ", stdout);
    if (f->area.modelled)
        printf("  area          %.3f mm² of one chip: %.3f TFLOP/s per mm² achieved\n",
               f->area.chip_mm2, f->tflops_per_mm2);
    if (cfg->chip.power_cap_w > 0)
        throttle_print(cfg, th);
    printf("\n");
    core_report_print(r->report, stdout);
}

/* The command line, parsed. */
typedef struct kernel_cli {
    const char *arch_name, *op_text, *trace_path, *tiles_path;
    const char *sets[KERNEL_MAX_SETS];
    size_t n_sets;
    uint64_t top, cores, seed;
    bool tune, functional, emit_asm, json, done; /* done: --help or --list printed */
} kernel_cli;

/* Reads the options into *c (defaults first). */
static np_status kernel_parse(int argc, char **argv, kernel_cli *c, np_err *err)
{
    static const struct option longopts[] = {
        {"op", required_argument, NULL, 'o'},    {"arch", required_argument, NULL, 'a'},
        {"set", required_argument, NULL, 's'},   {"cores", required_argument, NULL, 'c'},
        {"functional", no_argument, NULL, 'f'},  {"seed", required_argument, NULL, 'S'},
        {"emit-asm", no_argument, NULL, 'e'},    {"trace", required_argument, NULL, 't'},
        {"json", no_argument, NULL, 'j'},        {"list", no_argument, NULL, 'l'},
        {"tune", no_argument, NULL, 'T'},        {"tune-top", required_argument, NULL, 'K'},
        {"tiles", required_argument, NULL, 'C'}, {"help", no_argument, NULL, 'h'},
        {0}};
    *c = (kernel_cli){.arch_name = KERNEL_DEFAULT_ARCH, .top = KC_MAX_CANDS, .cores = 1,
                      .seed = 1};
    int o;
    cli_getopt_reset();
    while ((o = cli_getopt(argc, argv, "h", longopts, err)) != -1) {
        np_status st = NP_OK;
        switch (o) {
        case 'o': c->op_text = optarg; break;
        case 'a': c->arch_name = optarg; break;
        case 's': st = cli_add_set(c->sets, &c->n_sets, KERNEL_MAX_SETS, optarg, err); break;
        case 'c': st = cli_parse_u64("--cores", optarg, 1, 65536, &c->cores, err); break;
        case 'f': c->functional = true; break;
        case 'S': st = cli_parse_u64("--seed", optarg, 0, UINT64_MAX / 2, &c->seed, err); break;
        case 'e': c->emit_asm = true; break;
        case 't': c->trace_path = optarg; break;
        case 'j': c->json = true; break;
        case 'l': kernel_list(); c->done = true; return NP_OK;
        case 'T': c->tune = true; break;
        case 'K': st = cli_parse_u64("--tune-top", optarg, 1, KC_MAX_CANDS, &c->top, err); break;
        case 'C': c->tiles_path = optarg; break;
        case 'h': cli_print_usage(cli_find("kernel")); c->done = true; return NP_OK;
        default: return err->status;
        }
        if (st != NP_OK)
            return st;
    }
    if (optind < argc)
        return np_err_set(err, NP_ERR_USAGE, "unexpected argument '%s'", argv[optind]);
    if (!c->op_text)
        return np_err_set(err, NP_ERR_USAGE, "--op \"NAME key=value ...\" is required");
    return NP_OK;
}

/* The kernel of --op with its operands (krun places them again in a program of its own),
 * spread over --cores. */
static np_status kernel_of_spec(const kernel_cli *c, const arch_config *cfg, kc_kernel *k,
                                np_err *err)
{
    if (c->cores > (uint64_t)cfg->chip.cores)
        return np_err_set(err, NP_ERR_USAGE, "--cores %" PRIu64 ": the chip has %lld cores",
                          c->cores, (long long)cfg->chip.cores);
    kc_spec spec;
    if (kc_spec_parse(c->op_text, &spec, err) != NP_OK) {
        np_err_prefix(err, "--op");
        return err->status;
    }
    kc_prog *scratch;
    if (kc_prog_new(cfg, &(kc_prog_opts){.cores = 1}, &scratch, err) != NP_OK)
        return err->status;
    np_status st = kc_spec_kernel(scratch, &spec, k, err);
    kc_prog_free(scratch);
    if (st != NP_OK) {
        np_err_prefix(err, "--op");
        return st;
    }
    k->place.n_cores = (uint32_t)c->cores;
    return NP_OK;
}

/* --tune: the cost model's best tilings simulated, the fastest kept in k (and in the tiling
 * cache when there is one). */
static np_status kernel_tune(const kernel_cli *c, const arch_config *cfg, kc_kernel *k,
                             kc_tile_cache *tiles, krun_tuned *tuned, np_err *err)
{
    if (krun_tune(cfg, k, (unsigned)c->top, &(krun_opts){.prog_cores = (uint32_t)c->cores},
                  tuned, err) != NP_OK) {
        np_err_prefix(err, "--tune");
        return err->status;
    }
    char key[2048];
    if (tiles && kc_tile_key(cfg, k, key, sizeof key)[0] &&
        (kc_tile_cache_put(tiles, key, &tuned->best, tuned->cycles[tuned->best_index], err) !=
             NP_OK ||
         kc_tile_cache_save(tiles, c->tiles_path, err) != NP_OK))
        return err->status;
    krun_with_tiling(k, &tuned->best);
    return NP_OK;
}

/* The kernel run (and with --functional checked against the reference executor), traced to
 * --trace; then, under a power cap, at the clock the governor chooses (krun_power_cap). */
static np_status kernel_run(const kernel_cli *c, const arch_config *cfg, kc_kernel *k,
                            kc_tile_cache *tiles, krun_result *r, krun_check *chk,
                            energy_throttle *th, np_err *err)
{
    cli_trace tr = {0};
    if (c->trace_path && cli_trace_open(&tr, c->trace_path, err) != NP_OK)
        return err->status;
    krun_opts o = {.prog_cores = (uint32_t)c->cores, .trace = c->trace_path ? cli_trace_insn : NULL,
                   .trace_ctx = &tr, .tiles = tiles};
    np_status st = c->functional ? krun_kernel_check(cfg, k, c->seed, &o, r, chk, err)
                                 : krun_kernel(cfg, k, NULL, &o, r, err);
    if (c->trace_path) {
        if (st == NP_OK)
            cli_trace_kernels(&tr, r->report);
        np_err te = {0};
        if (cli_trace_close(&tr, &te) != NP_OK && st == NP_OK) {
            *err = te;
            st = te.status;
        }
    }
    if (st != NP_OK) {
        if (st != NP_ERR_DEADLOCK && st != NP_ERR_SIM_FAULT)
            np_err_prefix(err, "--op");
        return st;
    }
    if (cfg->chip.power_cap_w > 0 && krun_power_cap(cfg, k, &o, r, th, err) != NP_OK) {
        if (r->report)
            krun_result_free(r);
        return err->status;
    }
    return NP_OK;
}

/* --functional's figures in the JSON. */
static json_t *kernel_check_json(const krun_check *chk)
{
    json_t *fj = json_object();
    json_object_set_new(fj, "elements", json_integer((json_int_t)chk->n));
    json_object_set_new(fj, "bad", json_integer((json_int_t)chk->bad));
    json_object_set_new(fj, "max_abs_err", json_real(chk->max_abs));
    json_object_set_new(fj, "rtol", json_real(chk->out[0].rtol));
    json_object_set_new(fj, "atol", json_real(chk->out[0].atol));
    json_t *outs = json_array();
    for (int i = 0; i < chk->n_out; i++) {
        const krun_check_out *co = &chk->out[i];
        json_t *oj = json_object();
        json_object_set_new(oj, "elements", json_integer((json_int_t)co->n));
        json_object_set_new(oj, "bad", json_integer((json_int_t)co->bad));
        json_object_set_new(oj, "max_abs_err", json_real(co->max_abs));
        json_object_set_new(oj, "rtol", json_real(co->rtol));
        json_object_set_new(oj, "atol", json_real(co->atol));
        json_array_append_new(outs, oj);
    }
    json_object_set_new(fj, "outputs", outs);
    return fj;
}

/* --tune's candidates in the JSON. */
static json_t *kernel_tune_json(const krun_tuned *tuned)
{
    json_t *tj = json_object(), *cands = json_array();
    for (unsigned i = 0; i < tuned->tried; i++) {
        json_t *cj = json_object();
        json_object_set_new(cj, "est_cycles", json_integer((json_int_t)tuned->est[i]));
        json_object_set_new(cj, "cycles", json_integer((json_int_t)tuned->cycles[i]));
        json_array_append_new(cands, cj);
    }
    json_object_set_new(tj, "candidates", cands);
    json_object_set_new(tj, "best", json_integer(tuned->best_index));
    json_object_set_new(tj, "model_cycles", json_integer((json_int_t)tuned->cycles[0]));
    json_object_set_new(tj, "tuned_cycles",
                        json_integer((json_int_t)tuned->cycles[tuned->best_index]));
    return tj;
}

/* --tune's candidates and --functional's check, as text after the figures. */
static void kernel_print_extras(const kernel_cli *c, const krun_tuned *tuned,
                                const krun_check *chk)
{
    if (c->tune) {
        printf("\ntuned: %u tilings simulated (cycles: cost model's estimate -> simulated)\n",
               tuned->tried);
        for (unsigned i = 0; i < tuned->tried; i++) {
            char a1[NP_HUMAN_MAX], a2[NP_HUMAN_MAX];
            printf("  %s %-14s -> %14s\n", i == tuned->best_index ? "*" : " ",
                   np_human_count(tuned->est[i], a1, sizeof a1),
                   np_human_count(tuned->cycles[i], a2, sizeof a2));
        }
        printf("  the fastest is %.1f%% faster than the cost model's choice\n",
               100.0 * (1.0 - (double)tuned->cycles[tuned->best_index] /
                                  (double)tuned->cycles[0]));
    }
    for (int i = 0; c->functional && i < chk->n_out; i++) {
        char which[32] = "", nb[NP_HUMAN_MAX], nn[NP_HUMAN_MAX];
        if (chk->n_out > 1)
            snprintf(which, sizeof which, " (output %d)", i);
        printf("%sfunctional%s: %s of %s elements outside the tolerance (largest "
               "difference %g; rtol %g, atol %g) against the reference executor\n",
               i ? "" : "\n", which, np_human_int(chk->out[i].bad, nb, sizeof nb),
               np_human_int(chk->out[i].n, nn, sizeof nn), chk->out[i].max_abs,
               chk->out[i].rtol, chk->out[i].atol);
    }
}

np_status cmd_kernel(int argc, char **argv, np_err *err)
{
    kernel_cli c;
    if (kernel_parse(argc, argv, &c, err) != NP_OK)
        return err->status;
    if (c.done)
        return NP_OK;
    arch_config cfg;
    kc_kernel k;
    if (arch_resolve(c.arch_name, c.sets, c.n_sets, &cfg, err) != NP_OK ||
        kernel_of_spec(&c, &cfg, &k, err) != NP_OK)
        return err->status;
    kc_tile_cache *tiles = NULL;
    if (c.tiles_path && kc_tile_cache_load(c.tiles_path, &tiles, err) != NP_OK)
        return err->status;
    krun_tuned tuned = {0};
    krun_result r;
    krun_check chk = {0};
    energy_throttle th = {0};
    np_status st = c.tune ? kernel_tune(&c, &cfg, &k, tiles, &tuned, err) : NP_OK;
    if (st == NP_OK)
        st = kernel_run(&c, &cfg, &k, tiles, &r, &chk, &th, err);
    kc_tile_cache_free(tiles);
    if (st != NP_OK)
        return st;
    arch_config shown = cfg; /* the clock it ran at, for the time line */
    shown.core.clock_ghz = th.capped ? th.ghz : cfg.core.clock_ghz;
    char *asm_text = NULL;
    if (c.emit_asm && isa_disasm(r.prog, &asm_text, err) != NP_OK) {
        krun_result_free(&r);
        return err->status;
    }
    krun_figures f;
    krun_figures_of(&cfg, &k, &r, &f);
    const char *op = nn_op_name(k.op);
    if (c.json) {
        json_t *j = figures_json(op, &cfg, &f, &r);
        if (cfg.chip.power_cap_w > 0)
            json_object_set_new(j, "power_cap", throttle_json(&cfg, &th));
        json_object_set_new(j, "spec", json_string(c.op_text));
        json_object_set_new(j, "arch", json_string(c.arch_name));
        if (c.functional)
            json_object_set_new(j, "functional", kernel_check_json(&chk));
        if (c.tune)
            json_object_set_new(j, "tune", kernel_tune_json(&tuned));
        if (asm_text)
            json_object_set_new(j, "asm", json_string(asm_text));
        st = cli_print_json(j, err);
    } else {
        if (asm_text)
            fputs(asm_text, stdout), putchar('\n');
        figures_print(c.op_text, &shown, c.arch_name, &f, &r, &th);
        kernel_print_extras(&c, &tuned, &chk);
    }
    free(asm_text);
    krun_result_free(&r);
    char nb[NP_HUMAN_MAX], nn[NP_HUMAN_MAX];
    if (st == NP_OK && c.functional && chk.bad)
        return np_err_set(err, NP_ERR_SIM_FAULT, "--functional: %s of %s output elements "
                          "differ from the reference executor",
                          np_human_int(chk.bad, nb, sizeof nb), np_human_int(chk.n, nn, sizeof nn));
    return st;
}
