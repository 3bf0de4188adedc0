/* cmd_report.c — `npusim report [RUN.json] [TRACE] [SWEEP.jsonl] -o report.html`: one
 * self-contained HTML report (traces/report.h, docs/report.md) of what the inputs hold. Each
 * input is recognised by its content: a trace (Chrome/Perfetto JSON, gzip or plain), a
 * sweep's results (JSON lines, npusim sweep -o's .jsonl), or a command's --json output
 * (npusim run, sim or collective). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "arch.h"
#include "cli.h"
#include "cli_trace.h"
#include "readfile.h"
#include "report.h"
#include "trace_db.h"
#include "trace_stats.h"

#define REPORT_MAX_SETS 64
#define REPORT_SWEEP_MAX_BYTES (256u << 20) /* a sweep's results: a line per point */
#define REPORT_RUN_MAX_BYTES (64u << 20)    /* a run's --json: a few KiB to a few MiB */

const char cmd_report_usage[] =
    "usage: npusim report [RUN.json] [TRACE.json[.gz]] [RESULTS.jsonl] -o REPORT.html\n"
    "       npusim report A.json [TRACE_A] B.json [TRACE_B] -o REPORT.html\n"
    "                     [--arch PRESET|FILE] [--set K=V ...] [--title TEXT]\n"
    "                     [--max-events N] [--max-event-size S]\n"
    "\n"
    "  RUN.json        what npusim run, sim or collective printed with --json\n"
    "  TRACE           a trace those commands wrote with --trace\n"
    "  RESULTS.jsonl   the JSON lines of npusim sweep (next to its CSV)\n"
    "  A.json B.json   two runs compared side by side: figures, differences, the step's\n"
    "                  time by part, both timelines (a trace after a run is that run's)\n"
    "  -o F            the HTML file to write: self-contained (inline SVG, no network)\n"
    "  --arch A        the architecture, for the roofline's ceilings and the topology\n"
    "                  (default: the run's \"arch\" when it names a preset)\n"
    "  --set K=V       override one config key of that architecture (repeatable)\n"
    "  --title T       the report's title\n"
    CLI_TRACE_READ_USAGE
    "\n"
    "Charts: where the time went (each chip's time and the critical path by kind of\n"
    "work), a timeline per chip, utilization per unit and chip, link bandwidth on the\n"
    "topology, a roofline of every kernel, memory against capacity, exposed vs overlapped\n"
    "communication, bus bandwidth per size, top kernels, and for sweeps any metric against\n"
    "any swept key with the Pareto front (docs/report.md).\n";

typedef enum input_kind { INPUT_RUN, INPUT_TRACE, INPUT_SWEEP } input_kind;

/* What path holds, from its first bytes (gzip is read through). */
static np_status input_kind_of(const char *path, input_kind *out, np_err *err)
{
    size_t n = strlen(path);
    if (n > 6 && !strcmp(path + n - 6, ".jsonl")) {
        *out = INPUT_SWEEP;
        return NP_OK;
    }
    gzFile f = gzopen(path, "rb");
    if (!f)
        return np_err_at(err, NP_ERR_IO, path, 0, 0, "cannot open the file");
    char buf[4097];
    int k = gzread(f, buf, sizeof buf - 1);
    gzclose(f);
    if (k < 0)
        return np_err_at(err, NP_ERR_IO, path, 0, 0, "cannot read the file");
    buf[k] = '\0';
    const char *p = buf + strspn(buf, " \t\r\n");
    *out = *p == '[' || strstr(buf, "\"traceEvents\"") ? INPUT_TRACE : INPUT_RUN;
    return NP_OK;
}

/* The sweep's JSON lines as an array (a line that does not parse is an error naming it); the
 * file through base/readfile.h (no directory or device, at most REPORT_SWEEP_MAX_BYTES). */
static np_status load_sweep(const char *path, json_t **out, np_err *err)
{
    char *text;
    size_t len;
    if (np_read_file(path, REPORT_SWEEP_MAX_BYTES, "sweep results (JSON lines)", &text, &len,
                     err) != NP_OK)
        return err->status;
    json_t *a = json_array();
    int lineno = 0;
    np_status st = a ? NP_OK : np_err_set(err, NP_ERR_NOMEM, "out of memory");
    for (char *line = text, *next; st == NP_OK && line < text + len; line = next) {
        lineno++;
        char *nl = memchr(line, '\n', (size_t)(text + len - line));
        next = nl ? nl + 1 : text + len;
        if (memchr(line, '\0', (size_t)(next - line))) {
            st = np_err_at(err, NP_ERR_SYNTAX, path, lineno, 1, "a NUL byte: not JSON lines");
            break;
        }
        if (nl)
            *nl = '\0';
        if (strspn(line, " \t\r") == strlen(line))
            continue;
        json_error_t je;
        json_t *j = json_loads(line, 0, &je);
        if (!json_is_object(j)) {
            json_decref(j);
            st = np_err_at(err, NP_ERR_SYNTAX, path, lineno, je.column, "not a JSON object: %s",
                           je.text);
            break;
        }
        json_array_append_new(a, j);
    }
    free(text);
    if (st != NP_OK) {
        json_decref(a);
        return st;
    }
    *out = a;
    return NP_OK;
}

static void fill_arch(const arch_config *cfg, report_arch *a)
{
    char buf[64];
    const arch_key_info *topo = arch_key_find("system.topology");
    static char topology[32];
    snprintf(topology, sizeof topology, "%s", arch_value_text(cfg, topo, buf, sizeof buf));
    a->name = cfg->name;
    a->core_flops_per_s = (double)cfg->core.array_rows * (double)cfg->core.array_cols *
                          cfg->core.macs_per_pe_bf16 * 2 * cfg->core.clock_ghz * 1e9;
    a->chip_flops_per_s = a->core_flops_per_s * (double)cfg->chip.cores;
    a->hbm_bytes_per_s = cfg->chip.hbm_gb_per_s * 1e9;
    a->hbm_capacity_bytes = (double)cfg->chip.hbm_bytes;
    a->link_gbps = cfg->system.link_gb_per_s;
    a->topology = topology;
    a->chips = (uint32_t)cfg->system.chips;
    a->torus_x = (uint32_t)cfg->system.torus_x;
    a->torus_y = (uint32_t)cfg->system.torus_y;
    a->torus_z = (uint32_t)cfg->system.torus_z;
    a->island_chips = (uint32_t)cfg->system.island_chips;
}

np_status cmd_report(int argc, char **argv, np_err *err)
{
    static const struct option longopts[] = {
        {"output", required_argument, NULL, 'o'}, {"arch", required_argument, NULL, 'a'},
        {"set", required_argument, NULL, 's'},    {"title", required_argument, NULL, 't'},
        {"help", no_argument, NULL, 'h'},         CLI_TRACE_READ_LONGOPTS, {0}};
    const char *out_path = NULL, *arch_name = NULL, *title = NULL;
    trace_read_opts ro = {0};
    const char *sets[REPORT_MAX_SETS];
    size_t n_sets = 0;
    int c;
    cli_getopt_reset();
    while ((c = cli_getopt(argc, argv, "ho:", longopts, err)) != -1) {
        if (cli_trace_read_is_flag(c)) {
            if (cli_trace_read_flag(&ro, c, optarg, err) != NP_OK)
                return err->status;
            continue;
        }
        switch (c) {
        case 'o': out_path = optarg; break;
        case 'a': arch_name = optarg; break;
        case 't': title = optarg; break;
        case 's':
            if (cli_add_set(sets, &n_sets, REPORT_MAX_SETS, optarg, err) != NP_OK)
                return err->status;
            break;
        case 'h': cli_print_usage(cli_find("report")); return NP_OK;
        default: return err->status;
        }
    }
    if (!out_path)
        return np_err_set(err, NP_ERR_USAGE, "missing -o REPORT.html");
    if (optind >= argc)
        return np_err_set(err, NP_ERR_USAGE, "nothing to report: give RUN.json, a trace or "
                          "sweep results");
    if (cli_output_not_input("-o", out_path, (const char *const *)argv + optind,
                             (size_t)(argc - optind), err) != NP_OK)
        return err->status;
    /* one run, or two compared (A, then B): a trace after a run is that run's */
    report_input in = {.title = title}, in_b = {.title = title};
    report_input *slot[2] = {&in, &in_b};
    json_t *run[2] = {NULL, NULL}, *sweep = NULL;
    tdb *db[2] = {NULL, NULL};
    tstats st[2] = {{0}, {0}};
    bool have_st[2] = {false, false};
    int cur = 0; /* the run the next trace belongs to */
    np_status rc = NP_OK;
    for (int i = optind; i < argc && rc == NP_OK; i++) {
        input_kind k = INPUT_RUN;
        if ((rc = input_kind_of(argv[i], &k, err)) != NP_OK)
            break;
        if (k == INPUT_RUN && run[0])
            cur = 1;
        if ((k == INPUT_TRACE && db[cur]) || (k == INPUT_SWEEP && sweep) ||
            (k == INPUT_RUN && run[cur])) {
            rc = np_err_set(err, NP_ERR_USAGE, "%s ('%s'): at most two runs, each with one "
                            "trace after it, and one sweep", k == INPUT_RUN ? "a third run" :
                            k == INPUT_SWEEP ? "a second sweep" : "a second trace for one run",
                            argv[i]);
            break;
        }
        if (k == INPUT_TRACE) {
            cli_progress prog;
            cli_progress_init(&prog, "reading the trace");
            ro.progress = cli_progress_fn;
            ro.progress_ctx = &prog;
            rc = tdb_load_with(argv[i], &ro, &db[cur], err);
            cli_progress_end(&prog);
            if (rc == NP_OK &&
                (rc = tstats_compute(db[cur], &st[cur], err)) == NP_OK)
                have_st[cur] = true, slot[cur]->trace_path = argv[i];
        } else if (k == INPUT_SWEEP) {
            if ((rc = load_sweep(argv[i], &sweep, err)) == NP_OK)
                in.sweep_path = argv[i];
        } else {
            json_error_t je;
            char *text = NULL;
            size_t len = 0;
            if ((rc = np_read_file(argv[i], REPORT_RUN_MAX_BYTES, "a run's --json output", &text,
                                   &len, err)) != NP_OK)
                break;
            if (!(run[cur] = json_loadb(text, len, 0, &je)) || !json_is_object(run[cur]))
                rc = np_err_at(err, NP_ERR_SYNTAX, argv[i], je.line, je.column,
                               "not a JSON object (the --json output of npusim run, sim or "
                               "collective): %s", run[cur] ? "" : je.text);
            else
                slot[cur]->run_path = argv[i];
            free(text);
        }
    }
    if (rc == NP_OK && db[1] && !run[1])
        rc = np_err_set(err, NP_ERR_USAGE, "'%s': a second trace needs a second run before it "
                        "(npusim report A.json [TA] B.json [TB])", in_b.trace_path);
    arch_config cfg;
    if (rc == NP_OK) {
        const char *from_run = run[0] ? json_string_value(json_object_get(run[0], "arch")) : NULL;
        if (arch_name) {
            if ((rc = arch_resolve(arch_name, sets, n_sets, &cfg, err)) == NP_OK)
                fill_arch(&cfg, &in.arch);
        } else if (from_run) {
            np_err ignore = {0}; /* a run's arch that is not a preset here: no ceilings */
            if (arch_resolve(from_run, sets, n_sets, &cfg, &ignore) == NP_OK)
                fill_arch(&cfg, &in.arch);
        }
    }
    if (rc == NP_OK) {
        in.run = run[0], in.sweep = sweep, in.db = db[0], in.st = have_st[0] ? &st[0] : NULL;
        if (run[1]) {
            in_b.run = run[1], in_b.db = db[1], in_b.st = have_st[1] ? &st[1] : NULL;
            in_b.arch = in.arch;
            in.cmp = &in_b;
        }
        FILE *f = fopen(out_path, "w");
        if (!f)
            rc = np_err_at(err, NP_ERR_IO, out_path, 0, 0, "cannot create the report");
        else {
            rc = report_write(&in, f, err);
            if (fclose(f) != 0 && rc == NP_OK)
                rc = np_err_at(err, NP_ERR_IO, out_path, 0, 0, "cannot write the report");
        }
    }
    for (int r = 0; r < 2; r++) {
        if (have_st[r])
            tstats_free(&st[r]);
        tdb_free(db[r]);
        json_decref(run[r]);
    }
    json_decref(sweep);
    return rc;
}
