/* cmd_noc.c — `npusim noc`: synthetic-traffic studies of the on-chip mesh, BookSim style.
 *
 * The mesh comes from the architecture (chip.mesh_x/y, noc_vcs, noc_vc_buf_flits,
 * noc_router_cycles, noc_link_cycles, noc_max_packet_flits), each overridable by an option.
 * With a rate range the study runs once per rate and stops after the first saturated row;
 * --saturation finds the saturation rate by bisection; --compare FILE runs every point of a
 * BookSim reference file (noc/traffic.h, noc_ref_load) and prints ours beside it. JSON field
 * names are documented in docs/noc.md and kept stable. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "arch.h"
#include "cli.h"
#include "cli_trace.h"
#include "cli_trace_noc.h"
#include "csv.h"
#include "parse.h"
#include "traffic.h"

#define NOC_MAX_SETS 64
#define NOC_MAX_HOT 64
#define NOC_MAX_ROWS 1000

const char cmd_noc_usage[] =
    "usage: npusim noc [--arch PRESET|FILE] [--set K=V ...] [--mesh KxK]\n"
    "                  [--traffic uniform|transpose|bitcomp|hotspot|neighbor]\n"
    "                  [--rate R[:R_END:STEP]] [--packet-flits F] [--vcs V] [--buf B]\n"
    "                  [--router-cycles P] [--link-cycles L] [--credit-delay D]\n"
    "                  [--input-speedup S] [--wait-tail-credit] [--warmup N] [--cycles N]\n"
    "                  [--hotspot N[,N...]] [--seed S] [--saturation]\n"
    "                  [--trace FILE[.gz] [--trace-every N]] [--json | --csv]\n"
    "       npusim noc --compare FILE [--json]\n"
    "\n"
    "  --arch A           architecture preset or YAML file (default: " CLI_DEFAULT_ARCH ")\n"
    "  --set K=V          override one config key (repeatable)\n"
    "  --mesh KxK         mesh size in routers (default: chip.mesh_x x chip.mesh_y)\n"
    "  --traffic T        destination pattern (default: uniform)\n"
    "  --rate R           offered load in flits/node/cycle, or a sweep R:R_END:STEP\n"
    "                     (default: 0.1); a sweep stops after the first saturated rate\n"
    "  --packet-flits F   flits per packet (default: 4)\n"
    "  --vcs V, --buf B   VCs per port and flits per VC (default: chip.noc_vcs, noc_vc_buf_flits)\n"
    "  --router-cycles P  router pipeline depth (default: chip.noc_router_cycles)\n"
    "  --link-cycles L    link latency in cycles (default: chip.noc_link_cycles)\n"
    "  --credit-delay D   extra cycles before a returned credit is usable (default: 0)\n"
    "  --input-speedup S  crossbar inputs per input port, VC v on input v mod S (default: 1)\n"
    "  --wait-tail-credit reallocate an output VC only when its tail's credit is back\n"
    "  --warmup N         warm-up cycles before measuring (default: 1000)\n"
    "  --cycles N         measurement window in cycles (default: 10000)\n"
    "  --hotspot LIST     hotspot nodes for --traffic hotspot (default: the centre node)\n"
    "  --seed S           seed of the injection process (default: 1)\n"
    "  --saturation       also find the saturation rate by bisection (to 1%)\n"
    "  --trace F          write a Chrome/Perfetto trace of the rates' runs, one after the\n"
    "                     other (gzip when F ends in .gz): per router its buffered flits and\n"
    "                     per link its flits/cycle as counters, sampled every N cycles\n"
    "  --trace-every N    cycles between the trace's samples (default: 100)\n"
    "  --compare FILE     run every point of a BookSim reference file (such as\n"
    "                     tests/data/noc/booksim_mesh.csv) and print ours beside it\n"
    "  --json             print {\"rows\": [...], ...} (fields in docs/noc.md)\n"
    "  --csv              print the rows as CSV (the names of --json's rows)\n";

static np_status noc_parse_double(const char *opt, const char *text, double *out, np_err *err)
{
    return np_parse_f64(NP_SRC_OPT(opt), text, 0, 1, out, err);
}

static np_status noc_parse_rates(const char *text, double *r0, double *r1, double *step,
                                 np_err *err)
{
    char buf[128];
    if (strlen(text) >= sizeof buf)
        return np_err_set(err, NP_ERR_USAGE, "--rate: '%s' is too long", text);
    strcpy(buf, text);
    char *a = buf, *b = strchr(a, ':');
    if (!b) {
        *step = 0;
        if (noc_parse_double("--rate", a, r0, err) != NP_OK)
            return err->status;
        *r1 = *r0;
        return NP_OK;
    }
    *b++ = '\0';
    char *c = strchr(b, ':');
    if (!c)
        return np_err_set(err, NP_ERR_USAGE, "--rate: expected R or R:R_END:STEP, got '%s'",
                          text);
    *c++ = '\0';
    if (noc_parse_double("--rate", a, r0, err) != NP_OK ||
        noc_parse_double("--rate", b, r1, err) != NP_OK ||
        noc_parse_double("--rate", c, step, err) != NP_OK)
        return err->status;
    if (*step <= 0 || *r1 < *r0)
        return np_err_set(err, NP_ERR_USAGE, "--rate %s: needs R <= R_END and STEP > 0", text);
    if ((*r1 - *r0) / *step > NOC_MAX_ROWS)
        return np_err_set(err, NP_ERR_USAGE, "--rate %s: more than %d rates", text,
                          NOC_MAX_ROWS);
    return NP_OK;
}

static json_t *noc_row_json(const noc_study_result *r)
{
    return json_pack("{s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:I, s:b}",
                     "offered_rate", r->offered_rate, "accepted_rate", r->accepted_rate,
                     "avg_packet_latency", r->avg_packet_latency, "avg_network_latency",
                     r->avg_network_latency, "p50_packet_latency", r->p50_packet_latency,
                     "p99_packet_latency", r->p99_packet_latency, "zero_load_latency",
                     r->zero_load_latency, "avg_hops", r->avg_hops, "max_link_util",
                     r->max_link_util, "packets_measured", (json_int_t)r->packets_measured,
                     "saturated", r->saturated);
}

/* Progress on stderr when it is a terminal. */
static void noc_progress(size_t i, size_t n, const char *what)
{
    if (!isatty(2))
        return;
    fprintf(stderr, "\r[%zu/%zu] %-40s", i, n, what);
    if (i == n)
        fprintf(stderr, "\r%60s\r", "");
    fflush(stderr);
}

/* `npusim noc --compare FILE`: every point of the reference, ours beside it. */
static np_status noc_compare(const char *path, bool json, np_err *err)
{
    noc_ref ref;
    if (noc_ref_load(path, &ref, err) != NP_OK) {
        noc_ref_free(&ref);
        return err->status;
    }
    json_t *rows = json ? json_array() : NULL;
    if (!json) {
        printf("# npusim mesh vs BookSim 2 (commit %s): %s\n", ref.commit[0] ? ref.commit : "?",
               path);
        printf("# router: %" PRIu32 " VCs x %" PRIu32 " flits, router %" PRIu32 " cycles, link %"
               PRIu32 " cycles; latencies in cycles, rates in flits/node/cycle\n",
               ref.mesh.vcs, ref.mesh.buf_flits, ref.mesh.router_cycles, ref.mesh.link_cycles);
        printf("# %-5s %-9s %2s %-10s %8s %9s %9s %7s\n", "mesh", "traffic", "F", "point",
               "offered", "BookSim", "npusim", "diff");
    }
    np_status st = NP_OK;
    for (size_t i = 0; i < ref.n && st == NP_OK; i++) {
        const noc_ref_point *pt = &ref.pts[i];
        char what[64], mesh_s[16];
        snprintf(mesh_s, sizeof mesh_s, "%ux%u", pt->k, pt->k);
        snprintf(what, sizeof what, "%s %s %u-flit %s", mesh_s, noc_traffic_name(pt->traffic),
                 pt->packet_flits, pt->saturation ? "saturation" : "latency");
        noc_progress(i, ref.n, what);
        uint32_t hot[4];
        noc_study_params p = noc_ref_study(&ref, pt, pt->offered, hot);
        double bs, ours;
        bool sat = false;
        if (pt->saturation) {
            bs = pt->offered;
            if ((st = noc_study_saturation(&p, 0.01, &ours, err)) != NP_OK)
                break;
        } else {
            if (!pt->stable)
                continue;
            noc_study_result r;
            if ((st = noc_study_run(&p, &r, err)) != NP_OK)
                break;
            bs = pt->packet_latency;
            ours = r.avg_packet_latency;
            sat = r.saturated;
        }
        double diff = bs > 0 ? (ours - bs) / bs : 0;
        if (json) {
            json_array_append_new(rows, json_pack("{s:i, s:s, s:i, s:s, s:f, s:f, s:f, s:b}",
                                                  "k", (int)pt->k, "traffic",
                                                  noc_traffic_name(pt->traffic), "packet_flits",
                                                  (int)pt->packet_flits, "point",
                                                  pt->saturation ? "saturation" : "latency",
                                                  "offered", pt->offered, "booksim", bs,
                                                  "npusim", ours, "saturated", sat));
        } else if (pt->saturation) {
            printf("  %-5s %-9s %2u %-10s %8s %9.4f %9.4f %+6.1f%%\n", mesh_s,
                   noc_traffic_name(pt->traffic), pt->packet_flits, "saturation", "", bs, ours,
                   100 * diff);
        } else {
            printf("  %-5s %-9s %2u %-10s %8.4f %9.2f %9.2f %+6.1f%%%s\n", mesh_s,
                   noc_traffic_name(pt->traffic), pt->packet_flits, "latency", pt->offered, bs,
                   ours, 100 * diff, sat ? "  saturated" : "");
        }
    }
    noc_progress(ref.n, ref.n, "");
    char commit[64];
    snprintf(commit, sizeof commit, "%s", ref.commit);
    noc_ref_free(&ref);
    if (st != NP_OK) {
        json_decref(rows);
        return st;
    }
    char fb[1024];
    if (json)
        return cli_print_json(json_pack("{s:s, s:s, s:o}", "reference",
                                        cli_json_safe(path, fb, sizeof fb), "booksim_commit",
                                        commit, "rows", rows),
                              err);
    return NP_OK;
}

/* The rows of rates r0 .. r1 (step) and, when asked, the saturation rate, printed; each
 * row's run traced into tn (may be NULL) when p0 has its sampler. */
static np_status noc_rates(const noc_study_params *p0, const char *arch, double r0, double r1,
                           double step, bool find_sat, bool json, bool csv, cli_trace_noc *tn,
                           np_err *err)
{
    noc_study_params p = *p0;
    noc_traffic traffic = p.traffic;
    json_t *rows = json || csv ? json_array() : NULL;
    double sat_rate = -1;
    if (!json && !csv) {
        mesh_stages stg;
        mesh_stages_of(&p.mesh, &stg);
        printf("# mesh %" PRIu32 "x%" PRIu32 ", %s traffic, %" PRIu32 "-flit packets, %" PRIu32
               " VCs x %" PRIu32 " flits, router %" PRIu32 " cycles (route %" PRIu32
               ", VC alloc 1, switch alloc 1, crossbar %" PRIu32 "), link %" PRIu32 " cycles\n",
               p.mesh.kx, p.mesh.ky, noc_traffic_name(traffic), p.packet_flits, p.mesh.vcs,
               p.mesh.buf_flits, p.mesh.router_cycles, stg.routing, stg.crossbar,
               p.mesh.link_cycles);
        printf("# %8s %9s %11s %11s %9s %9s  %s\n", "offered", "accepted", "pkt_lat", "net_lat",
               "p99", "zero_ld", "(flits/node/cycle; latencies in cycles)");
    }
    for (int i = 0;; i++) {
        double r = r0 + i * step;
        if (r > r1 + 1e-9 || (step == 0 && i > 0))
            break;
        p.rate = r;
        noc_study_result res;
        if (noc_study_run(&p, &res, err) != NP_OK) {
            json_decref(rows);
            return err->status;
        }
        if (tn)
            cli_trace_noc_run(tn, &p, &res);
        if (rows)
            json_array_append_new(rows, noc_row_json(&res));
        else
            printf("  %8.4f %9.4f %11.2f %11.2f %9.1f %9.2f%s\n", res.offered_rate,
                   res.accepted_rate, res.avg_packet_latency, res.avg_network_latency,
                   res.p99_packet_latency, res.zero_load_latency,
                   res.saturated ? "  saturated" : "");
        if (res.saturated) {
            sat_rate = r;
            break;
        }
    }
    double max_rate = -1;
    p.sample = NULL; /* the bisection's runs are not traced */
    if (find_sat && noc_study_saturation(&p, 0.01, &max_rate, err) != NP_OK) {
        json_decref(rows);
        return err->status;
    }
    if (json) {
        json_t *mj = json_pack("{s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:b}", "kx",
                               (int)p.mesh.kx, "ky", (int)p.mesh.ky, "vcs", (int)p.mesh.vcs,
                               "buf_flits", (int)p.mesh.buf_flits, "router_cycles",
                               (int)p.mesh.router_cycles, "link_cycles",
                               (int)p.mesh.link_cycles, "credit_delay",
                               (int)p.mesh.credit_delay, "input_speedup",
                               (int)p.mesh.input_speedup, "wait_tail_credit",
                               p.mesh.wait_tail_credit);
        json_t *doc = json_pack("{s:s, s:o, s:s, s:i, s:I, s:I, s:o, s:o}", "arch", arch,
                                "mesh", mj, "traffic", noc_traffic_name(traffic),
                                "packet_flits", (int)p.packet_flits, "warmup_cycles",
                                (json_int_t)p.warmup, "measure_cycles", (json_int_t)p.measure,
                                "saturation_rate",
                                sat_rate >= 0 ? json_real(sat_rate) : json_null(), "rows", rows);
        if (find_sat)
            json_object_set_new(doc, "max_sustainable_rate", json_real(max_rate));
        return cli_print_json(doc, err);
    }
    if (csv) { /* the rows (the bisection's rate is not a row) */
        static const char *const keys[] = {"offered_rate", "accepted_rate", "avg_packet_latency",
                                           "avg_network_latency", "p50_packet_latency",
                                           "p99_packet_latency", "zero_load_latency",
                                           "avg_hops", "max_link_util", "packets_measured",
                                           "saturated"};
        bool ok = csv_json_rows(stdout, rows, keys, sizeof keys / sizeof keys[0]);
        json_decref(rows);
        return ok ? NP_OK : np_err_set(err, NP_ERR_NOMEM, "out of memory");
    }
    if (sat_rate >= 0)
        printf("# saturated at an offered %.4f flits/node/cycle\n", sat_rate);
    else if (step > 0)
        printf("# not saturated up to %.4f flits/node/cycle\n", r1);
    if (find_sat)
        printf("# highest rate not saturated (bisection to 1%%): %.4f flits/node/cycle\n",
               max_rate);
    return NP_OK;
}

/* The command line, parsed. */
typedef struct noc_cli {
    const char *arch_name, *mesh_arg, *rate_arg, *hot_arg, *compare, *trace_path;
    const char *sets[NOC_MAX_SETS];
    size_t n_sets;
    noc_traffic traffic;
    uint64_t flits, vcs, buf, pipe, link, warmup, cycles, seed, credit_delay, speedup;
    uint64_t trace_every;
    bool wait_tail, json, csv, find_sat, have_every, help;
} noc_cli;

/* Reads the options into *c (defaults first). With --help: the usage printed, c->help set. */
static np_status noc_parse(int argc, char **argv, noc_cli *c, np_err *err)
{
    static const struct option longopts[] = {
        {"arch", required_argument, NULL, 'a'},
        {"set", required_argument, NULL, 's'},
        {"mesh", required_argument, NULL, 'm'},
        {"traffic", required_argument, NULL, 't'},
        {"rate", required_argument, NULL, 'r'},
        {"packet-flits", required_argument, NULL, 'f'},
        {"vcs", required_argument, NULL, 'v'},
        {"buf", required_argument, NULL, 'b'},
        {"router-cycles", required_argument, NULL, 'p'},
        {"link-cycles", required_argument, NULL, 'l'},
        {"warmup", required_argument, NULL, 'w'},
        {"cycles", required_argument, NULL, 'c'},
        {"hotspot", required_argument, NULL, 'H'},
        {"seed", required_argument, NULL, 'S'},
        {"credit-delay", required_argument, NULL, 'C'},
        {"input-speedup", required_argument, NULL, 'I'},
        {"wait-tail-credit", no_argument, NULL, 'T'},
        {"saturation", no_argument, NULL, 'Z'},
        {"compare", required_argument, NULL, 'X'},
        {"trace", required_argument, NULL, 'F'},
        {"trace-every", required_argument, NULL, 'E'},
        {"json", no_argument, NULL, 'j'},
        {"csv", no_argument, NULL, 'V'},
        {"help", no_argument, NULL, 'h'},
        {0}};
    *c = (noc_cli){.arch_name = CLI_DEFAULT_ARCH, .rate_arg = "0.1",
                   .traffic = NOC_TRAFFIC_UNIFORM, .flits = 4, .warmup = 1000, .cycles = 10000,
                   .seed = 1, .speedup = 1, .trace_every = 100};
    int o;
    cli_getopt_reset();
    while ((o = cli_getopt(argc, argv, "h", longopts, err)) != -1) {
        np_status st = NP_OK;
        switch (o) {
        case 'a': c->arch_name = optarg; break;
        case 's': st = cli_add_set(c->sets, &c->n_sets, NOC_MAX_SETS, optarg, err); break;
        case 'm': c->mesh_arg = optarg; break;
        case 't':
            if (noc_traffic_parse(optarg, &c->traffic, err) != NP_OK) {
                err->status = NP_ERR_USAGE;
                np_err_prefix(err, "--traffic");
                return NP_ERR_USAGE;
            }
            break;
        case 'r': c->rate_arg = optarg; break;
        case 'f': st = cli_parse_u64("--packet-flits", optarg, 1, 1024, &c->flits, err); break;
        case 'v': st = cli_parse_u64("--vcs", optarg, 1, 64, &c->vcs, err); break;
        case 'b': st = cli_parse_u64("--buf", optarg, 1, 4096, &c->buf, err); break;
        case 'p': st = cli_parse_u64("--router-cycles", optarg, 1, 64, &c->pipe, err); break;
        case 'l': st = cli_parse_u64("--link-cycles", optarg, 1, 64, &c->link, err); break;
        case 'w': st = cli_parse_u64("--warmup", optarg, 0, 100000000, &c->warmup, err); break;
        case 'c': st = cli_parse_u64("--cycles", optarg, 1, 100000000, &c->cycles, err); break;
        case 'S': st = cli_parse_u64("--seed", optarg, 0, UINT64_MAX, &c->seed, err); break;
        case 'C':
            st = cli_parse_u64("--credit-delay", optarg, 0, 64, &c->credit_delay, err);
            break;
        case 'I': st = cli_parse_u64("--input-speedup", optarg, 1, 6, &c->speedup, err); break;
        case 'T': c->wait_tail = true; break;
        case 'Z': c->find_sat = true; break;
        case 'X': c->compare = optarg; break;
        case 'F': c->trace_path = optarg; break;
        case 'E':
            st = cli_parse_u64("--trace-every", optarg, 1, 100000000, &c->trace_every, err);
            c->have_every = true;
            break;
        case 'H': c->hot_arg = optarg; break;
        case 'j': c->json = true; break;
        case 'V': c->csv = true; break;
        case 'h': cli_print_usage(cli_find("noc")); c->help = true; return NP_OK;
        default: return err->status;
        }
        if (st != NP_OK)
            return st;
    }
    if (optind < argc)
        return np_err_set(err, NP_ERR_USAGE, "unexpected argument '%s'", argv[optind]);
    if (c->json && c->csv)
        return np_err_set(err, NP_ERR_USAGE, "--json and --csv: one output format at a time");
    if (c->csv && c->compare)
        return np_err_set(err, NP_ERR_USAGE, "--csv: not with --compare (its --json has the "
                          "rows)");
    if (c->have_every && !c->trace_path)
        return np_err_set(err, NP_ERR_USAGE, "--trace-every needs --trace");
    if (c->compare && c->trace_path)
        return np_err_set(err, NP_ERR_USAGE, "--trace: not with --compare (trace the runs of "
                          "--rate)");
    return NP_OK;
}

/* The study's parameters: the architecture's mesh with the options' overrides; hot[] holds
 * the --hotspot routers p points to. */
static np_status noc_params(const noc_cli *c, const arch_config *cfg, noc_study_params *p,
                            uint32_t hot[NOC_MAX_HOT], np_err *err)
{
    *p = (noc_study_params){.traffic = c->traffic, .packet_flits = (uint32_t)c->flits,
                            .warmup = c->warmup, .measure = c->cycles,
                            .drain_max = 2 * c->cycles, .seed = c->seed};
    mesh_params_from_arch(cfg, &p->mesh);
    if (c->vcs)
        p->mesh.vcs = (uint32_t)c->vcs;
    if (c->buf)
        p->mesh.buf_flits = (uint32_t)c->buf;
    if (c->pipe)
        p->mesh.router_cycles = (uint32_t)c->pipe;
    if (c->link)
        p->mesh.link_cycles = (uint32_t)c->link;
    p->mesh.credit_delay = (uint32_t)c->credit_delay;
    p->mesh.input_speedup = (uint32_t)c->speedup;
    p->mesh.wait_tail_credit = c->wait_tail;
    if (c->mesh_arg) {
        uint64_t k[2];
        int nd;
        if (np_parse_dims(NP_SRC_OPT("--mesh"), c->mesh_arg, 2, 2, 1, 1024, UINT64_MAX, k, &nd,
                          err) != NP_OK)
            return err->status;
        p->mesh.kx = (uint32_t)k[0];
        p->mesh.ky = (uint32_t)k[1];
    }
    if (p->mesh.kx * p->mesh.ky < 2)
        return np_err_set(err, NP_ERR_USAGE, "architecture %s has a 1x1 mesh (one core): no "
                          "network to study; give --mesh KXxKY or another --arch", cfg->name);
    if (c->hot_arg) {
        uint64_t hv[NOC_MAX_HOT];
        size_t nh;
        if (np_parse_list(NP_SRC_OPT("--hotspot"), c->hot_arg, 0, p->mesh.kx * p->mesh.ky - 1,
                          hv, NOC_MAX_HOT, &nh, err) != NP_OK)
            return err->status;
        for (size_t i = 0; i < nh; i++)
            hot[i] = (uint32_t)hv[i];
        p->hotspots = hot;
        p->n_hotspots = (uint32_t)nh;
    }
    return NP_OK;
}

np_status cmd_noc(int argc, char **argv, np_err *err)
{
    noc_cli c;
    if (noc_parse(argc, argv, &c, err) != NP_OK)
        return err->status;
    if (c.help)
        return NP_OK;
    if (c.compare)
        return noc_compare(c.compare, c.json, err);
    double r0, r1, step;
    if (noc_parse_rates(c.rate_arg, &r0, &r1, &step, err) != NP_OK)
        return err->status;
    arch_config cfg;
    if (arch_resolve(c.arch_name, c.sets, c.n_sets, &cfg, err) != NP_OK)
        return err->status;
    noc_study_params p;
    uint32_t hot[NOC_MAX_HOT];
    if (noc_params(&c, &cfg, &p, hot, err) != NP_OK)
        return err->status;
    cli_trace tr = {0};
    cli_trace_noc *tn = NULL;
    if (c.trace_path) {
        double ghz = cfg.chip.noc_clock_ghz > 0 ? cfg.chip.noc_clock_ghz : 1;
        uint64_t cycle_ps = (uint64_t)(1000.0 / ghz + 0.5);
        if (cli_trace_open(&tr, c.trace_path, err) != NP_OK)
            return err->status;
        if (cli_trace_noc_create(&p.mesh, tr.sink, cycle_ps, &tn, err) != NP_OK) {
            np_err terr;
            cli_trace_close(&tr, &terr);
            return err->status;
        }
        p.sample = cli_trace_noc_sample, p.sample_ctx = tn, p.sample_every = c.trace_every;
    }
    np_status st = noc_rates(&p, cfg.name, r0, r1, step, c.find_sat, c.json, c.csv, tn, err);
    cli_trace_noc_free(tn);
    if (tr.w) {
        np_err terr;
        np_status ts = cli_trace_close(&tr, st == NP_OK ? err : &terr);
        if (st == NP_OK)
            st = ts;
    }
    return st;
}
