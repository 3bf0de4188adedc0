/* cmd_sim.c — `npusim sim`: run ELF programs, one per chip, on the chips' cores (timing mode,
 * or functional mode with --functional --input --dump).
 *
 * Loads the programs (each checked against the architecture by isa_elf_load_arch), runs them
 * with core_sim_run_chips (hw-model/core.h), program i on chip i, and reports total cycles,
 * per-unit busy/stall/idle cycles, traffic and per-kernel cycles; --trace writes a Perfetto
 * trace (sim/cli_trace.h). JSON field names are documented in docs/hw-model.md and kept
 * stable. A deadlock or a fault of the simulated program is an error (exit status 3) whose
 * message names the units, program counters and instructions involved. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "cli.h"
#include "parse.h"
#include "readfile.h"
#include "core.h"
#include "isa_elf.h"
#include "stats.h"
#include "cli_trace.h"
#include "csv.h"

#define SIM_MAX_SETS 64
#define SIM_MAX_IO 64

/* A run still going after this many core cycles stops with exit status 3 (--max-cycles). */
#define SIM_DEFAULT_MAX_CYCLES 1000000000ull

const char cmd_sim_usage[] =
    "usage: npusim sim [--arch PRESET|FILE] [--set SECTION.KEY=VALUE ...] [--functional]\n"
    "                  [--input [CHIP:]SYM=FILE ...] [--dump [CHIP:]SYM=FILE ...]\n"
    "                  [--trace FILE[.gz] [--trace-chips L] [--trace-level K]]\n"
    "                  [--stats FILE[.json]] [--max-cycles N] [--json | --csv]\n"
    "                  PROG.elf [PROG.elf ...]\n"
    "\n"
    "  --arch A        architecture preset or YAML file (default: " CLI_DEFAULT_ARCH "); the\n"
    "                  program must have been built for it\n"
    "  --set K=V       override one config key (repeatable)\n"
    "  --functional    compute real values (bf16/fp16/fp32/int8); timing is unchanged\n"
    "  --input S=F     (functional) load the raw bytes of file F into data symbol S first;\n"
    "                  F may be shorter than S, never longer; C:S=F: chip C's symbol\n"
    "  --dump S=F      (functional) write data symbol S's bytes to file F after the run\n"
    "  --trace F       write a Chrome/Perfetto trace (gzip when F ends in .gz): one process\n"
    "                  per chip, one thread per unit (per DMA lane), a slice per\n"
    "                  instruction a unit runs (DMA, MXU, VPU, COMM), per semaphore wait\n"
    "                  and per kernel (open in ui.perfetto.dev); the front end's control\n"
    "                  instructions and sem.signal take no unit time and have no slice\n"
    CLI_TRACE_USAGE
    "  --stats F       write every statistic of the run (units, on-chip mesh links,\n"
    "                  chip-to-chip links) to F: text, or JSON when F ends in .json\n"
    "  --max-cycles N  stop a run still going after N core cycles (exit status 3; default\n"
    "                  1,000,000,000; 0: no limit)\n"
    "  --json          print {\"total_cycles\", \"units\": [...], \"kernels\": [...],\n"
    "                  \"traffic\": {...}} (fields in docs/hw-model.md)\n"
    "  --csv           print the units' table as CSV (name, busy_cycles, stall_cycles,\n"
    "                  idle_cycles, insns, bytes: the names of --json's units)\n"
    "\n"
    "The i-th program runs on chip i (at most system.chips programs); comm.send/recv between\n"
    "cores of one chip use its mesh, between chips the chip-to-chip network.\n";

/* The registry as text, or as JSON when path ends in .json. */
static np_status sim_write_stats(const stats *reg, const char *path, np_err *err)
{
    size_t n = strlen(path);
    bool as_json = n > 5 && !strcmp(path + n - 5, ".json");
    FILE *f = fopen(path, "w");
    if (!f)
        return np_err_at(err, NP_ERR_IO, path, 0, 0, "cannot create the statistics file");
    bool ok = true;
    if (as_json) {
        json_t *j = stats_to_json(reg);
        ok = j && json_dumpf(j, f, JSON_INDENT(1) | JSON_PRESERVE_ORDER) == 0 && fputc('\n', f) != EOF;
        json_decref(j);
    } else {
        stats_dump_text(reg, f);
    }
    if (fclose(f) != 0 || !ok)
        return np_err_at(err, NP_ERR_IO, path, 0, 0, "cannot write the statistics file");
    return NP_OK;
}

/* The command line, parsed. */
typedef struct sim_cli {
    const char *arch_name, *trace_path, *stats_path;
    uint64_t max_cycles;
    const char *inputs[SIM_MAX_IO], *dumps[SIM_MAX_IO];
    size_t n_inputs, n_dumps;
    const char *sets[SIM_MAX_SETS];
    size_t n_sets;
    bool functional, json, csv, help;
    char **progs; /* the ELF files */
    uint32_t n_progs;
} sim_cli;

/* Reads the options into *c (defaults first). With --help: the usage printed, c->help set. */
static np_status sim_parse(int argc, char **argv, sim_cli *c, trace_layout_opts *trace_opts,
                           np_err *err)
{
    static const struct option longopts[] = {
        {"arch", required_argument, NULL, 'a'}, {"set", required_argument, NULL, 's'},
        {"functional", no_argument, NULL, 'f'}, {"input", required_argument, NULL, 'i'},
        {"dump", required_argument, NULL, 'd'}, {"trace", required_argument, NULL, 't'},
        {"max-cycles", required_argument, NULL, 'm'}, {"stats", required_argument, NULL, 'S'},
        {"json", no_argument, NULL, 'j'},       {"help", no_argument, NULL, 'h'},
        {"csv", no_argument, NULL, 'V'},        CLI_TRACE_LONGOPTS,
        {0}};
    memset(c, 0, sizeof *c);
    c->arch_name = CLI_DEFAULT_ARCH;
    c->max_cycles = SIM_DEFAULT_MAX_CYCLES;
    int o;
    cli_getopt_reset();
    while ((o = cli_getopt(argc, argv, "h", longopts, err)) != -1) {
        np_status st = NP_OK;
        switch (o) {
        case 'a': c->arch_name = optarg; break;
        case 's': st = cli_add_set(c->sets, &c->n_sets, SIM_MAX_SETS, optarg, err); break;
        case 'f': c->functional = true; break;
        case 'i':
        case 'd':
            if ((o == 'i' ? c->n_inputs : c->n_dumps) == SIM_MAX_IO)
                return np_err_set(err, NP_ERR_USAGE, "at most %d --input and --dump options each",
                                  SIM_MAX_IO);
            if (!strchr(optarg, '=') || optarg[0] == '=')
                return np_err_set(err, NP_ERR_USAGE, "--%s: expected [CHIP:]SYMBOL=FILE, got '%s'",
                                  o == 'i' ? "input" : "dump", optarg);
            if (o == 'i')
                c->inputs[c->n_inputs++] = optarg;
            else
                c->dumps[c->n_dumps++] = optarg;
            break;
        case 'j': c->json = true; break;
        case 'V': c->csv = true; break;
        case 't': c->trace_path = optarg; break;
        case CLI_TRACE_OPT_CHIPS:
        case CLI_TRACE_OPT_MAX_BYTES:
        case CLI_TRACE_OPT_LEVEL: st = cli_trace_flag(trace_opts, o, optarg, err); break;
        case 'S': c->stats_path = optarg; break;
        case 'm':
            st = cli_parse_u64("--max-cycles", optarg, 0, UINT64_MAX / 1000000, &c->max_cycles,
                               err);
            break;
        case 'h': cli_print_usage(cli_find("sim")); c->help = true; return NP_OK;
        default: return err->status;
        }
        if (st != NP_OK)
            return st;
    }
    if (cli_trace_need_path(c->trace_path, trace_opts, err) != NP_OK)
        return err->status;
    if (optind >= argc)
        return np_err_set(err, NP_ERR_USAGE, "missing the program (PROG.elf)");
    if ((c->n_inputs || c->n_dumps) && !c->functional)
        return np_err_set(err, NP_ERR_USAGE, "--input and --dump need --functional");
    if (c->json && c->csv)
        return np_err_set(err, NP_ERR_USAGE, "--json and --csv: one output format at a time");
    c->progs = argv + optind;
    c->n_progs = (uint32_t)(argc - optind);
    /* no output may be an input: the programs and the --input files */
    const char *ins[SIM_MAX_IO + 64];
    size_t n_ins = 0;
    for (uint32_t i = 0; i < c->n_progs && n_ins < 64; i++)
        ins[n_ins++] = c->progs[i];
    for (size_t i = 0; i < c->n_inputs; i++)
        ins[n_ins++] = strchr(c->inputs[i], '=') + 1;
    if ((c->trace_path && cli_output_not_input("--trace", c->trace_path, ins, n_ins, err)) ||
        (c->stats_path && cli_output_not_input("--stats", c->stats_path, ins, n_ins, err)))
        return err->status;
    for (size_t i = 0; i < c->n_dumps; i++)
        if (cli_output_not_input("--dump", strchr(c->dumps[i], '=') + 1, ins, n_ins, err))
            return err->status;
    return NP_OK;
}

/* The loaded programs and the HBM buffers of --input and --dump. */
typedef struct sim_job {
    isa_program **progs;
    uint32_t n_progs;
    core_hbm_io in_io[SIM_MAX_IO], out_io[SIM_MAX_IO];
    char *out_path[SIM_MAX_IO];
    size_t n_in, n_out;
} sim_job;

/* One --input or --dump "[CHIP:]SYMBOL=FILE": the symbol of the chip's program, its file read
 * into an input buffer, or a dump buffer of the symbol's size. */
static np_status sim_bind(sim_job *j, const char *arg, bool is_in, np_err *err)
{
    const char *eq = strchr(arg, '=');
    uint32_t chip = 0;
    const char *colon = strchr(arg, ':');
    if (colon && colon < eq && colon > arg && arg[0] >= '0' && arg[0] <= '9') {
        char cs[32]; /* "C:SYM=FILE" */
        uint64_t cn;
        snprintf(cs, sizeof cs, "%.*s", (int)(colon - arg < 31 ? colon - arg : 31), arg);
        if (np_parse_u64(NP_SRC_OPT(is_in ? "--input CHIP" : "--dump CHIP"), cs, 0, UINT32_MAX,
                         &cn, err) != NP_OK)
            return err->status;
        if (cn >= j->n_progs)
            return np_err_set(err, NP_ERR_USAGE, "--%s: chip %" PRIu64 " has no program (%u "
                              "given)", is_in ? "input" : "dump", cn, j->n_progs);
        chip = (uint32_t)cn;
        arg = colon + 1;
    }
    char name[256];
    snprintf(name, sizeof name, "%.*s", (int)(eq - arg), arg);
    const isa_symbol *sym = isa_program_symbol(j->progs[chip], name);
    if (!sym)
        return np_err_set(err, NP_ERR_UNKNOWN_KEY, "--%s: chip %u's program has no data "
                          "symbol '%s'", is_in ? "input" : "dump", chip, name);
    if (!is_in) {
        j->out_io[j->n_out] = (core_hbm_io){sym->addr, malloc(sym->size ? sym->size : 1),
                                            sym->size, chip};
        j->out_path[j->n_out] = (char *)(eq + 1);
        if (!j->out_io[j->n_out++].buf)
            return np_err_set(err, NP_ERR_NOMEM, "out of memory");
        return NP_OK;
    }
    char what[600], *buf;
    size_t got;
    snprintf(what, sizeof what, "--input %s (the size of symbol %s)", name, name);
    if (np_read_file(eq + 1, sym->size, what, &buf, &got, err) != NP_OK)
        return err->status;
    j->in_io[j->n_in++] = (core_hbm_io){sym->addr, (uint8_t *)buf, got, chip};
    return NP_OK;
}

/* The programs on the chips, traced and counted as asked: *r the core model's report (also
 * after a fault or deadlock, for the trace). */
static np_status sim_run(const sim_cli *c, const arch_config *cfg, sim_job *j,
                         trace_layout_opts *trace_opts, core_report **r, np_err *err)
{
    stats *reg = NULL;
    np_status st = NP_OK;
    if (c->stats_path && !(reg = stats_create()))
        return np_err_set(err, NP_ERR_NOMEM, "out of memory");
    cli_trace tr = {0};
    if (c->trace_path)
        st = cli_trace_open_opts(&tr, c->trace_path, trace_opts, err);
    if (st == NP_OK && tr.w)
        st = cli_trace_set_arch(&tr, cfg, err);
    for (uint32_t i = 0; st == NP_OK && tr.w && i < j->n_progs; i++) { /* what each HBM holds */
        uint64_t bytes = 0;
        for (uint32_t k = 0; k < j->progs[i]->n_data; k++)
            bytes += j->progs[i]->data[k].size;
        cli_trace_level(&tr, i, "hbm.used", 0, (double)bytes);
    }
    if (st == NP_OK) {
        core_sim_opts o = {.functional = c->functional, .inputs = j->in_io, .n_inputs = j->n_in,
                           .outputs = j->out_io, .n_outputs = j->n_out,
                           .trace = tr.w ? cli_trace_insn : NULL, .trace_ctx = &tr,
                           .max_cycles = c->max_cycles};
        st = core_sim_run_chips(cfg, (const isa_program *const *)j->progs, j->n_progs, &o, reg,
                                r, err);
    }
    if (st == NP_OK && reg)
        st = sim_write_stats(reg, c->stats_path, err);
    stats_free(reg);
    if (tr.w) { /* written up to a fault or deadlock too, which is when it helps most */
        cli_trace_kernels(&tr, *r);
        np_err terr;
        np_status ts = cli_trace_close(&tr, st == NP_OK ? err : &terr);
        if (st == NP_OK)
            st = ts;
    }
    for (size_t i = 0; st == NP_OK && i < j->n_out; i++) { /* --dump */
        FILE *f = fopen(j->out_path[i], "wb");
        if (!f || fwrite(j->out_io[i].buf, 1, j->out_io[i].n, f) != j->out_io[i].n)
            st = np_err_set(err, NP_ERR_IO, "--dump: cannot write '%s'", j->out_path[i]);
        if (f && fclose(f) != 0 && st == NP_OK)
            st = np_err_set(err, NP_ERR_IO, "--dump: cannot write '%s'", j->out_path[i]);
    }
    return st;
}

/* The report (taken) as text, JSON or the units' CSV rows. */
static np_status sim_output(const sim_cli *c, core_report *r, np_err *err)
{
    if (!c->json && !c->csv) {
        core_report_print(r, stdout);
        core_report_free(r);
        return NP_OK;
    }
    json_t *j = core_report_json(r);
    core_report_free(r);
    if (!j)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory building the JSON report");
    if (c->json)
        return cli_print_json(j, err);
    static const char *const keys[] = {"name", "busy_cycles", "stall_cycles", "idle_cycles",
                                       "insns", "bytes"};
    bool ok = csv_json_rows(stdout, json_object_get(j, "units"), keys,
                            sizeof keys / sizeof keys[0]);
    json_decref(j);
    return ok ? NP_OK : np_err_set(err, NP_ERR_NOMEM, "out of memory");
}

/* The command with its trace options (whose chip list the caller frees). */
static np_status sim_main(int argc, char **argv, trace_layout_opts *trace_opts, np_err *err)
{
    sim_cli c;
    np_status st = sim_parse(argc, argv, &c, trace_opts, err);
    if (st != NP_OK || c.help)
        return st;
    arch_config cfg;
    if (arch_resolve(c.arch_name, c.sets, c.n_sets, &cfg, err) != NP_OK)
        return err->status;
    if (c.n_progs > (uint64_t)cfg.system.chips)
        return np_err_set(err, NP_ERR_USAGE, "%u programs for a system of %lld chips (one per "
                          "chip)", c.n_progs, (long long)cfg.system.chips);
    sim_job j = {.n_progs = c.n_progs, .progs = calloc(c.n_progs, sizeof *j.progs)};
    if (!j.progs)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory");
    for (uint32_t i = 0; i < c.n_progs && st == NP_OK; i++)
        st = isa_elf_load_arch(c.progs[i], &cfg, &j.progs[i], err);
    for (size_t i = 0; i < c.n_inputs + c.n_dumps && st == NP_OK; i++)
        st = i < c.n_inputs ? sim_bind(&j, c.inputs[i], true, err)
                            : sim_bind(&j, c.dumps[i - c.n_inputs], false, err);
    core_report *r = NULL;
    if (st == NP_OK)
        st = sim_run(&c, &cfg, &j, trace_opts, &r, err);
    for (size_t i = 0; i < j.n_in; i++)
        free(j.in_io[i].buf);
    for (size_t i = 0; i < j.n_out; i++)
        free(j.out_io[i].buf);
    for (uint32_t i = 0; i < j.n_progs; i++)
        isa_program_free(j.progs[i]);
    free(j.progs);
    if (st != NP_OK) {
        core_report_free(r);
        return st;
    }
    return sim_output(&c, r, err);
}

np_status cmd_sim(int argc, char **argv, np_err *err)
{
    trace_layout_opts o = {.level = TRACE_LEVEL_INSN};
    np_status st = sim_main(argc, argv, &o, err);
    trace_chips_free(&o.chips);
    return st;
}
