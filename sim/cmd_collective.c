/* cmd_collective.c — `npusim collective`: one collective over the chip network at a range
 * of sizes, in nccl-tests' table: size, count, type, redop, root, then time, algbw, busbw
 * and #wrong out of place and in place, each row printed as soon as it is simulated, and the
 * "# Avg bus bandwidth" footer. The flow engine moves no data, so both halves of a row show
 * the one simulation and #wrong is N/A.
 *
 * algbw = bytes / time; busbw = algbw x nccl-tests' factor for the op (coll_busbw_factor).
 * With --algo auto the tuner picks per size (coll_tune.h); a "#  algo" line says so whenever
 * the choice changes. --proto (default: system.coll_protocol) names the protocol (coll_proto.h:
 * raw, or NCCL's ll, ll128, simple, or auto: the tuner's choice), which the "#  algo" line
 * names too when it is not raw.
 * --chips N builds the topology kind at N chips: a ring of N, the most square torus2d or most
 * cubic torus3d that holds N, N chips on a switch or fat tree (radix raised if needed), N/island
 * islands, or N fully connected chips (links raised to N - 1). A torus or ring gets at least
 * the links per chip its dimensions need. With --isa the collective is lowered to one ISA
 * program per chip (compiler/kgen_coll.h) and run on the core model (hw-model/core.h) on the
 * same network instead of the flow-level engine. JSON field names are documented in
 * docs/collectives.md and kept stable. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "arch.h"
#include "wallclock.h"
#include "cli.h"
#include "cli_trace.h"
#include "cli_trace_coll.h"
#include "coll.h"
#include "coll_isa.h"
#include "core.h"
#include "csv.h"
#include "energy.h"
#include "human.h"
#include "kgen_coll.h"
#include "parse.h"
#include "run_faults.h"

#define COL_MAX_SETS 64
#define COL_MAX_CHIPS (1u << 20) /* --chips, a topology's dimensions and their product */

const char cmd_collective_usage[] =
    "usage: npusim collective [--arch PRESET|FILE] [--set K=V ...] --op OP [--algo ALGO]\n"
    "                         [--proto P] [--chips N] [--topology KIND[:DIMS]] [--group SPEC]\n"
    "                         [-b|--min-bytes B] [-e|--max-bytes B] [-f|--factor F]\n"
    "                         [-n|--iters N] [-w|--warmup N] [--chunk B] [--root R]\n"
    "                         [--elem-bytes E] [--rank-order] [--max-ranks N] [--engine flow|packet\n"
    "                         [--mtu B] [--buf N]] [--isa [--core C]]\n"
    "                         [--trace FILE[.gz] [--trace-chips L] [--trace-level K]]\n"
    "                         [--slow-link L:S ...] [--fail-link L ...]\n"
    "                         [--json | --csv]\n"
    "\n"
    "  --arch A          architecture preset or YAML file (default: " CLI_DEFAULT_ARCH ")\n"
    "  --set K=V         override one config key (repeatable)\n"
    "  --op OP           all_reduce, all_gather, reduce_scatter, broadcast, reduce, scatter,\n"
    "                    gather, all_to_all or sendrecv\n"
    "  --algo ALGO       auto (default: the tuner's choice per size), ring, biring, tree, rhd,\n"
    "                    hier, chain, pairwise, direct, nvls (all-reduce in a switch that\n"
    "                    reduces: system.switch_reduce)\n"
    "  --proto P         how messages cross the links: raw (payload only), NCCL's ll, ll128\n"
    "                    or simple, or auto (the tuner's choice per size); default: the\n"
    "                    architecture's system.coll_protocol\n"
    "  --chips N         build the topology kind at N chips (default: system.chips)\n"
    "  --topology T      ring, torus2d, torus3d, fully_connected, switch, fat_tree or\n"
    "                    hierarchical, with optional dimensions (torus2d:4x8, torus3d:4x4x4)\n"
    "  --group SPEC      the ranks' chips: N, A-B or A-B:STEP items separated by commas\n"
    "                    (0-7, 0,2,5, 0-1,4-5; default: all chips)\n"
    "  -b, --min-bytes B smallest size (default 8); sizes take K, M, G (binary) suffixes\n"
    "  -e, --max-bytes B largest size (default 128M)\n"
    "  -f, --factor F    multiply the size by F between rows (default 2)\n"
    "  -n, --iters N     runs per size, back to back, averaged (default 1; every run of the\n"
    "                    deterministic model takes the same time)\n"
    "  -w, --warmup N    runs per size before those measured (default 0)\n"
    "  --chunk B         pipelining chunk of ring, tree and chain (default 0: none)\n"
    "  --root R          root rank of broadcast, reduce, scatter, gather (default 0)\n"
    "  --elem-bytes E    element size for counts and reductions (default 4, float)\n"
    "  --rank-order      rings in rank order instead of fitted to the topology\n"
    "  --max-ranks N     the largest group simulated (default 16,384): a ring over n ranks\n"
    "                    moves on the order of n^2 messages, so a larger one is refused\n"
    "  --engine E        flow (default: max-min fair flows) or packet (packets through\n"
    "                    per-port queues with link-level flow control)\n"
    "  --mtu B           packet engine: the largest packet (default 4K)\n"
    "  --buf N           packet engine: packets each link's far end buffers (default 32)\n"
    "  --isa             lower the collective to one SPMD ISA program (comm.send/recv, peers\n"
    "                    by group rank) that every chip of the group runs on the core model:\n"
    "                    all_reduce, all_gather and reduce_scatter, ring, no chunking, 4\n"
    "                    (fp32) or 2 (bf16) byte elements; reductions on one core's vector unit\n"
    "  --core C          (--isa) the core of each chip that runs it (default 0)\n"
    "  --slow-link L:S   link L (e.g. chip3->chip4, quoted in a shell) keeps the share S of\n"
    "                    its bandwidth, 0 < S <= 1 (repeatable)\n"
    "  --fail-link L     link L carries nothing: routes go around it, or the run fails\n"
    "                    naming it (repeatable; docs/run.md, \"Stragglers and failures\")\n"
    "  --trace F         a Chrome/Perfetto trace of the runs, one size after the other: a\n"
    "                    process per chip; the flow engine's collective per rank, its\n"
    "                    messages (send, recv/reduce) and link bandwidth counters; with\n"
    "                    --isa the comm.* of each chip as slices (not --engine packet)\n"
    CLI_TRACE_USAGE_20
    "  --json            print {\"op\", \"algo\", \"chips\", \"topology\", \"rows\": [...]}\n"
    "  --csv             print the rows as CSV (the names of --json's rows)\n"
    "\n"
    "Each row is printed as soon as it is simulated; a row that takes more than 2 s shows\n"
    "its progress on standard error when that is a terminal.\n";

/* A size of option opt (parse.h: "64K", "1 GiB") in lo..hi bytes. */
static np_status col_parse_size(const char *opt, const char *text, uint64_t lo, uint64_t hi,
                                uint64_t *out, np_err *err)
{
    return np_parse_size(NP_SRC_OPT(opt), text, lo, hi, out, err);
}

static np_status col_parse_u32(const char *opt, const char *text, uint32_t lo, uint32_t hi,
                               uint32_t *out, np_err *err)
{
    uint64_t v;
    if (cli_parse_u64(opt, text, lo, hi, &v, err) != NP_OK)
        return err->status;
    *out = (uint32_t)v;
    return NP_OK;
}

/* The chips of a --group list (parse.h: "0-7", "0,2,5", "0-14:2", "0-1,4-5"), each one of the
 * network's `chips`, at most `chips` of them (counted before anything is allocated), into a
 * new array. */
static np_status col_group(const char *spec, uint32_t chips, uint32_t **out, uint32_t *n,
                           np_err *err)
{
    size_t count;
    if (np_parse_list(NP_SRC_OPT("--group"), spec, 0, chips - 1, NULL, chips, &count, err) !=
        NP_OK)
        return err->status;
    uint64_t *v = malloc(count * sizeof *v);
    uint32_t *g = malloc(count * sizeof *g);
    if (!v || !g) {
        free(v);
        free(g);
        return np_err_set(err, NP_ERR_NOMEM, "out of memory");
    }
    np_parse_list(NP_SRC_OPT("--group"), spec, 0, chips - 1, v, count, &count, err);
    for (size_t i = 0; i < count; i++)
        g[i] = (uint32_t)v[i];
    free(v);
    *out = g;
    *n = (uint32_t)count;
    return NP_OK;
}

/* The system and the run, then nccl-tests' three header lines. */
static void col_print_header(coll_op op, coll_algo algo, coll_proto proto, uint32_t ranks,
                             const net_params *np, double link_eff, uint64_t min_b,
                             uint64_t max_b, uint32_t factor, uint32_t iters, uint32_t warmup,
                             uint64_t chunk, bool isa)
{
    const char *topo_name = arch_keys[ARCH_KEY_system_topology].enum_info->values[np->topology];
    printf("# npusim collective: %s (%s", coll_op_name(op), coll_algo_name(algo));
    if (proto != COLL_PROTO_RAW)
        printf(", protocol %s", coll_proto_name(proto));
    printf(") over %" PRIu32 " of %" PRIu32 " chips, %s", ranks, np->chips, topo_name);
    if (np->topology <= ARCH_TOPOLOGY_TORUS3D)
        printf(" %" PRIu32 "x%" PRIu32 "x%" PRIu32, np->dims[0], np->dims[1], np->dims[2]);
    printf(", links %.3g GB/s x %" PRIu32 " per chip", np->link_bytes_per_s / link_eff / 1e9,
           np->links_per_chip);
    if (link_eff < 1)
        printf(" (%.3g%% payload)", link_eff * 100);
    printf(", chunk %" PRIu64 " B; %s\n", chunk,
           isa ? "ISA programs on the core model"
               : np->engine == NET_ENGINE_PACKET ? "packet engine" : "flow engine");
    printf("# minBytes %" PRIu64 " maxBytes %" PRIu64 " step: %" PRIu32 "(factor) warmup iters: "
           "%" PRIu32 " iters: %" PRIu32 " validation: 0\n#\n", min_b, max_b, factor, warmup,
           iters);
    printf("# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place"
           "          \n", "", "", "", "", "");
    printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s\n", "size",
           "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw",
           "busbw", "#wrong");
    printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s\n", "(B)",
           "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)",
           "");
}

/* nccl-tests' time column: fewer decimals as it grows. */
static void col_time_str(double us, char *buf, size_t n)
{
    snprintf(buf, n, us >= 10000 ? "%7.0f" : us >= 100 ? "%7.1f" : "%7.2f", us);
}

static const char *col_type_name(uint32_t elem, bool isa)
{
    switch (elem) {
    case 1: return "int8";
    case 2: return isa ? "bfloat16" : "half";
    case 4: return "float";
    case 8: return "double";
    default: return "bytes";
    }
}

/* Progress of a long row on standard error (a terminal only), past 2 s. */
typedef struct col_progress {
    bool tty, shown;
    double t0, last;
    uint64_t bytes;
} col_progress;

static void col_progress_cb(void *ctx, uint64_t done, uint64_t total)
{
    col_progress *pg = ctx;
    if (!pg->tty)
        return;
    double now = np_wall_s();
    if (now - pg->t0 < 2.0 || now - pg->last < 0.5)
        return;
    pg->last = now;
    pg->shown = true;
    fprintf(stderr, "\r# %" PRIu64 " B: %3.0f%% (%" PRIu64 " of %" PRIu64 " messages), %.0f s",
            pg->bytes, total ? 100.0 * (double)done / (double)total : 100.0, done, total,
            now - pg->t0);
    fflush(stderr);
}

/* The busiest link's utilization over the last run (its bytes since the previous call /
 * (bandwidth x duration)); prev holds every link's byte count and is updated. */
static double col_busiest_link(net *n, uint64_t *prev, double seconds)
{
    double best = 0;
    for (uint32_t l = 0; l < net_links(n); l++) {
        net_link_info li;
        net_link_get(n, l, &li);
        double u = seconds > 0 ? (double)(li.bytes - prev[l]) / (li.bytes_per_s * seconds) : 0;
        if (u > best)
            best = u;
        prev[l] = li.bytes;
    }
    return best;
}

/* The command line, parsed. */
typedef struct col_cli {
    const char *arch_name, *topo, *group, *trace_path;
    const char *sets[COL_MAX_SETS];
    size_t n_sets;
    bool have_op, json, csv, isa, rank_order, have_core, help;
    coll_op op;
    coll_algo algo;
    coll_proto proto;
    kgen_coll_op kop; /* --isa: the lowered op */
    uint32_t chips, factor, root, elem, iters, warmup, max_ranks, buf, core;
    uint64_t min_b, max_b, chunk, mtu;
    net_engine engine;
    run_faults_job faults;
} col_cli;

/* --op, --algo or --proto: a name of the collectives' own parsers, as a usage error. */
static np_status col_usage_prefix(np_status st, const char *flag, np_err *err)
{
    if (st == NP_OK)
        return NP_OK;
    err->status = NP_ERR_USAGE;
    np_err_prefix(err, "%s", flag);
    return NP_ERR_USAGE;
}

/* Reads the options into *c (defaults first). With --help: the usage printed, c->help set. */
static np_status col_parse(int argc, char **argv, col_cli *c, trace_layout_opts *trace_opts,
                           np_err *err)
{
    static const struct option longopts[] = {
        {"arch", required_argument, NULL, 'a'},     {"set", required_argument, NULL, 's'},
        {"op", required_argument, NULL, 'o'},       {"algo", required_argument, NULL, 'A'},
        {"chips", required_argument, NULL, 'C'},    {"topology", required_argument, NULL, 't'},
        {"group", required_argument, NULL, 'g'},    {"min-bytes", required_argument, NULL, 'b'},
        {"max-bytes", required_argument, NULL, 'e'}, {"factor", required_argument, NULL, 'f'},
        {"iters", required_argument, NULL, 'n'},    {"warmup", required_argument, NULL, 'w'},
        {"chunk", required_argument, NULL, 'c'},    {"root", required_argument, NULL, 'r'},
        {"elem-bytes", required_argument, NULL, 'E'}, {"json", no_argument, NULL, 'j'},
        {"csv", no_argument, NULL, 'V'},          {"max-ranks", required_argument, NULL, 'X'},
        {"rank-order", no_argument, NULL, 'R'},   {"engine", required_argument, NULL, 'G'},
        {"mtu", required_argument, NULL, 'M'},      {"buf", required_argument, NULL, 'B'},
        {"isa", no_argument, NULL, 'I'},          {"trace", required_argument, NULL, 'T'},
        {"core", required_argument, NULL, 'K'},   {"proto", required_argument, NULL, 'P'},
        {"slow-link", required_argument, NULL, 'L'}, {"fail-link", required_argument, NULL, 'F'},
        CLI_TRACE_LONGOPTS,
        {"help", no_argument, NULL, 'h'},           {0}};
    memset(c, 0, sizeof *c);
    c->arch_name = CLI_DEFAULT_ARCH;
    c->op = COLL_OP_ALL_REDUCE, c->algo = COLL_ALGO_AUTO, c->proto = COLL_PROTO_SYSTEM;
    c->factor = 2, c->elem = 4, c->iters = 1;
    c->min_b = 8, c->max_b = 128ULL << 20;
    c->engine = NET_ENGINE_FLOW;
    int o;
    cli_getopt_reset();
    while ((o = cli_getopt(argc, argv, "hb:e:f:n:w:", longopts, err)) != -1) {
        np_status st = NP_OK;
        switch (o) {
        case 'a': c->arch_name = optarg; break;
        case 's': st = cli_add_set(c->sets, &c->n_sets, COL_MAX_SETS, optarg, err); break;
        case 'o':
            st = col_usage_prefix(coll_op_parse(optarg, &c->op, err), "--op", err);
            c->have_op = true;
            break;
        case 'A': st = col_usage_prefix(coll_algo_parse(optarg, &c->algo, err), "--algo", err); break;
        case 'P':
            st = col_usage_prefix(coll_proto_parse(optarg, &c->proto, err), "--proto", err);
            break;
        case 'C': st = col_parse_u32("--chips", optarg, 1, COL_MAX_CHIPS, &c->chips, err); break;
        case 't': c->topo = optarg; break;
        case 'g': c->group = optarg; break;
        case 'b': st = col_parse_size("--min-bytes", optarg, 1, 1ULL << 50, &c->min_b, err); break;
        case 'e': st = col_parse_size("--max-bytes", optarg, 1, 1ULL << 50, &c->max_b, err); break;
        case 'f': st = col_parse_u32("--factor", optarg, 2, 1024, &c->factor, err); break;
        case 'n': st = col_parse_u32("--iters", optarg, 1, 1000000, &c->iters, err); break;
        case 'w': st = col_parse_u32("--warmup", optarg, 0, 1000000, &c->warmup, err); break;
        case 'c': st = col_parse_size("--chunk", optarg, 0, 1ULL << 50, &c->chunk, err); break;
        case 'r': st = col_parse_u32("--root", optarg, 0, UINT32_MAX, &c->root, err); break;
        case 'E': st = col_parse_u32("--elem-bytes", optarg, 1, 64, &c->elem, err); break;
        case 'X':
            st = col_parse_u32("--max-ranks", optarg, 1, UINT32_MAX, &c->max_ranks, err);
            break;
        case 'j': c->json = true; break;
        case 'V': c->csv = true; break;
        case 'R': c->rank_order = true; break;
        case 'G': {
            static const char *const engines[] = {"flow", "packet"};
            size_t e = 0;
            st = np_parse_enum(NP_SRC_OPT("--engine"), optarg, "engine", engines, 2, &e, err);
            c->engine = e == 1 ? NET_ENGINE_PACKET : NET_ENGINE_FLOW;
            break;
        }
        case 'M': st = col_parse_size("--mtu", optarg, 1, 1u << 30, &c->mtu, err); break;
        case 'B': st = col_parse_u32("--buf", optarg, 2, 1u << 20, &c->buf, err); break;
        case 'K':
            st = col_parse_u32("--core", optarg, 0, 65535, &c->core, err);
            c->have_core = true;
            break;
        case 'I': c->isa = true; break;
        case 'L':
        case 'F': st = run_faults_link_flag(&c->faults, optarg, o == 'F', err); break;
        case 'T': c->trace_path = optarg; break;
        case CLI_TRACE_OPT_CHIPS:
        case CLI_TRACE_OPT_MAX_BYTES:
        case CLI_TRACE_OPT_LEVEL: st = cli_trace_flag(trace_opts, o, optarg, err); break;
        case 'h': cli_print_usage(cli_find("collective")); c->help = true; return NP_OK;
        default: return err->status;
        }
        if (st != NP_OK)
            return st;
    }
    if (cli_trace_need_path(c->trace_path, trace_opts, err) != NP_OK)
        return err->status;
    if (optind < argc)
        return np_err_set(err, NP_ERR_USAGE, "unexpected argument '%s'", argv[optind]);
    return NP_OK;
}

/* The options that do not go together, and --isa's op (c->kop) and algorithm. */
static np_status col_check(col_cli *c, np_err *err)
{
    if (!c->have_op)
        return np_err_set(err, NP_ERR_USAGE, "--op is required");
    if (c->json && c->csv)
        return np_err_set(err, NP_ERR_USAGE, "--json and --csv: one output format at a time");
    if (c->max_b < c->min_b)
        return np_err_set(err, NP_ERR_USAGE, "--max-bytes is below --min-bytes");
    if (!coll_algo_supported(c->op, c->algo))
        return np_err_set(err, NP_ERR_USAGE, "--algo: %s has no %s algorithm",
                          coll_op_name(c->op), coll_algo_name(c->algo));
    if (c->trace_path && c->engine == NET_ENGINE_PACKET)
        return np_err_set(err, NP_ERR_USAGE, "--trace: the packet engine is not traced (the "
                          "flow engine and --isa are)");
    if (c->have_core && !c->isa)
        return np_err_set(err, NP_ERR_USAGE, "--core needs --isa (the flow engine moves data "
                          "between chips, not cores)");
    if ((c->mtu || c->buf) && c->engine != NET_ENGINE_PACKET)
        return np_err_set(err, NP_ERR_USAGE, "--mtu and --buf need --engine packet");
    if (!c->isa)
        return NP_OK;
    if (c->engine != NET_ENGINE_FLOW)
        return np_err_set(err, NP_ERR_USAGE, "--isa runs on the flow engine's network (no "
                          "--engine packet)");
    if (c->op == COLL_OP_ALL_GATHER)
        c->kop = KGEN_COLL_ALL_GATHER;
    else if (c->op == COLL_OP_REDUCE_SCATTER)
        c->kop = KGEN_COLL_REDUCE_SCATTER;
    else if (c->op == COLL_OP_ALL_REDUCE)
        c->kop = KGEN_COLL_ALL_REDUCE;
    else
        return np_err_set(err, NP_ERR_USAGE, "--isa: %s is not lowered yet (all_reduce, "
                          "all_gather and reduce_scatter are)", coll_op_name(c->op));
    if ((c->algo != COLL_ALGO_AUTO && c->algo != COLL_ALGO_RING) || c->chunk ||
        (c->elem != 4 && c->elem != 2))
        return np_err_set(err, NP_ERR_USAGE, "--isa runs the ring without chunking, with 4- "
                          "or 2-byte elements (no --algo other than ring, no --chunk)");
    c->algo = COLL_ALGO_RING;
    return NP_OK;
}

/* Everything the sizes' runs share. */
typedef struct col_job {
    col_cli *c;
    arch_config cfg;
    net_params np;
    uint32_t *grp, n_grp, ranks;
    coll_sys *sys;
    evq *q;
    cli_trace tr;
    cli_trace_coll *tc;
    json_t *rows;         /* --json, --csv */
    uint64_t *link_bytes; /* every link's bytes after the previous run */
    coll_algo shown;      /* the algorithm and protocol of the last row printed */
    coll_proto shown_proto;
    bool header;
    double busbw_sum;
    uint32_t n_rows;
    col_progress pg;
} col_job;

/* The architecture, the network (--topology, --chips, the engine, faults) and the group. */
static np_status col_network(col_job *j, trace_layout_opts *trace_opts, np_err *err)
{
    col_cli *c = j->c;
    if (arch_resolve(c->arch_name, c->sets, c->n_sets, &j->cfg, err) != NP_OK)
        return err->status;
    c->proto = coll_proto_resolve(&j->cfg, c->proto);
    if (c->isa && c->proto != COLL_PROTO_RAW)
        return np_err_set(err, NP_ERR_USAGE, "--isa: the lowered programs move raw payload (no "
                          "--proto %s, no system.coll_protocol other than raw)",
                          coll_proto_name(c->proto));
    net_params *np = &j->np;
    net_params_from_arch(&j->cfg, np);
    if (net_params_shape(np, c->topo, c->chips, "--topology", err) != NP_OK)
        return err->status;
    np->engine = c->engine;
    np->mtu_bytes = (uint32_t)c->mtu;
    np->buf_packets = c->buf;
    np->faults = c->faults.links;
    np->n_faults = c->faults.n_links;
    if (c->isa && c->faults.n_links)
        return np_err_set(err, NP_ERR_USAGE, "--isa: --slow-link and --fail-link are not "
                          "available with the lowered programs yet");
    if (np->chips < 2)
        return np_err_set(err, NP_ERR_USAGE, "a collective needs at least 2 chips (the "
                          "architecture has %" PRIu32 "; use --chips)", np->chips);
    if (trace_chips_check(&trace_opts->chips, np->chips, "--trace-chips", err) != NP_OK)
        return err->status;
    if (c->group && col_group(c->group, np->chips, &j->grp, &j->n_grp, err) != NP_OK)
        return err->status;
    j->ranks = j->grp ? j->n_grp : np->chips;
    if (c->isa) /* the core model builds its network from cfg.system: make it the one above */
        net_params_to_arch(np, &j->cfg);
    return NP_OK;
}

/* The engine, the traces and the rows' state. */
static np_status col_open(col_job *j, trace_layout_opts *trace_opts, np_err *err)
{
    const col_cli *c = j->c;
    if (evq_create(&j->q, err) != NP_OK ||
        coll_sys_create(&j->cfg, &j->np, j->q, NULL, &j->sys, err) != NP_OK)
        return err->status;
    j->link_bytes = calloc(net_links(coll_sys_net(j->sys)) + 1, sizeof *j->link_bytes);
    if (c->json || c->csv)
        j->rows = json_array();
    if (!j->link_bytes || ((c->json || c->csv) && !j->rows))
        return np_err_set(err, NP_ERR_NOMEM, "out of memory");
    j->shown = COLL_ALGO_AUTO, j->shown_proto = COLL_PROTO_SYSTEM;
    j->pg.tty = !c->json && !c->csv && isatty(2);
    if (c->trace_path && cli_trace_open_opts(&j->tr, c->trace_path, trace_opts, err) != NP_OK)
        return err->status;
    if (c->trace_path && c->isa && cli_trace_set_arch(&j->tr, &j->cfg, err) != NP_OK)
        return err->status;
    if (c->trace_path && !c->isa &&
        cli_trace_coll_create(coll_sys_net(j->sys), j->tr.sink, trace_opts->level, &j->tc, err) !=
            NP_OK)
        return err->status;
    return NP_OK;
}

/* One size's runs: the warm-up and the measured ones (the first of which is traced). *t_ps: the
 * mean measured time; *busiest: the busiest link's utilization over the measured runs; *acts:
 * the last run's link bytes. */
static np_status col_size(col_job *j, uint64_t b, coll_result *r, double *t_ps, double *busiest,
                          energy_counts *acts, np_err *err)
{
    const col_cli *c = j->c;
    coll_desc d = {.op = c->op, .algo = c->algo, .chips = j->grp, .n_chips = j->n_grp,
                   .bytes = b, .root = c->root, .chunk_bytes = c->chunk, .elem_bytes = c->elem,
                   .rank_order = c->rank_order, .proto = c->proto, .max_ranks = c->max_ranks};
    *t_ps = *busiest = 0;
    j->pg.t0 = j->pg.last = np_wall_s();
    j->pg.bytes = b;
    np_status st = NP_OK;
    for (uint32_t it = 0; it < c->warmup + c->iters && st == NP_OK; it++) {
        bool traced = it == c->warmup;
        if (c->isa) {
            kgen_coll kc = {.op = c->kop, .chips = j->grp, .ranks = j->ranks, .core = c->core,
                            .bytes = b, .rank_order = c->rank_order,
                            .dtype = c->elem == 4 ? ISA_DTYPE_FP32 : ISA_DTYPE_BF16};
            core_report *rep = NULL;
            bool tr = j->tr.w && traced;
            st = coll_isa_run(&j->cfg, &kc, tr ? cli_trace_insn : NULL, &j->tr, r,
                              tr ? &rep : NULL, err);
            if (st == NP_OK && tr) {
                cli_trace_kernels(&j->tr, rep);
                j->tr.offset_ps += rep->total_ps;
            }
            core_report_free(rep);
        } else {
            d.obs = j->tc && traced ? cli_trace_coll_observer(j->tc) : NULL;
            energy_counts before, after;
            energy_counts_of_net(coll_sys_net(j->sys), &before);
            st = coll_run_progress(j->sys, &d, col_progress_cb, &j->pg, r, err);
            energy_counts_of_net(coll_sys_net(j->sys), &after);
            acts->link_bytes = after.link_bytes - before.link_bytes;
            if (st == NP_OK && d.obs)
                cli_trace_coll_done(j->tc, r, j->grp);
            if (st == NP_OK) /* over the measured runs */
                *busiest = col_busiest_link(coll_sys_net(j->sys), j->link_bytes,
                                            (double)(r->t_end_ps - r->t_start_ps) / 1e12);
        }
        if (it >= c->warmup)
            *t_ps += (double)(r->t_end_ps - r->t_start_ps) / c->iters;
    }
    if (j->pg.shown) {
        fprintf(stderr, "\r%60s\r", "");
        j->pg.shown = false;
    }
    return st;
}

/* Size b's row: into the JSON rows, or printed in nccl-tests' columns. */
static void col_row(col_job *j, uint64_t b, coll_result *r, double t_ps, double busiest,
                    const energy_counts *acts)
{
    const col_cli *c = j->c;
    if (!c->json && !c->csv && !j->header) { /* after the first run, so an error comes alone */
        j->header = true;
        col_print_header(c->op, c->algo, c->proto, j->ranks, &j->np,
                         j->cfg.system.link_efficiency, c->min_b, c->max_b, c->factor, c->iters,
                         c->warmup, c->chunk, c->isa);
    }
    double t_us = t_ps / 1e6;
    double algbw = t_us > 0 ? (double)b / (t_us * 1e3) : 0;
    double busbw = algbw * coll_busbw_factor(c->op, j->ranks);
    j->busbw_sum += busbw;
    j->n_rows++;
    if (c->isa)
        r->proto = COLL_PROTO_RAW;
    energy_figures ef; /* one collective: its links' bits, its ranks' static power */
    energy_figures_of(&j->cfg, acts, j->ranks, (uint64_t)llround(t_ps), 0, &ef);
    bool show_energy = ef.modelled && !c->isa;
    if (j->rows) {
        json_t *row = json_pack("{s:I, s:I, s:s, s:s, s:I, s:f, s:f, s:f, s:o, s:o}", "bytes",
                                (json_int_t)b, "count", (json_int_t)(b / c->elem), "algo",
                                coll_algo_name(r->algo), "proto", coll_proto_name(r->proto),
                                "time_ps", (json_int_t)llround(t_ps), "time_us", t_us,
                                "algbw_gbps", algbw, "busbw_gbps", busbw, "wrong", json_null(),
                                "busiest_link_util", c->isa ? json_null() : json_real(busiest));
        if (row && show_energy) {
            json_object_set_new(row, "energy_j", json_real(ef.total_j));
            json_object_set_new(row, "link_energy_j", json_real(ef.part_j[ENERGY_PART_LINK]));
            json_object_set_new(row, "avg_w", json_real(ef.avg_w));
        }
        json_array_append_new(j->rows, row);
    } else {
        bool tuned = c->algo == COLL_ALGO_AUTO || c->proto == COLL_PROTO_AUTO;
        if (tuned && (r->algo != j->shown || r->proto != j->shown_proto)) {
            printf("#  algo: %s", coll_algo_name(r->algo));
            if (r->proto != COLL_PROTO_RAW)
                printf(", protocol %s", coll_proto_name(r->proto));
            printf(" (tuner)\n");
        }
        char ts[32];
        col_time_str(t_us, ts, sizeof ts);
        printf("  %10" PRIu64 "  %12" PRIu64 "  %8s  %6s  %6d  %7s  %6.2f  %6.2f  %5s  %7s  "
               "%6.2f  %6.2f  %5s\n", b, b / c->elem, col_type_name(c->elem, c->isa),
               coll_op_reduces(c->op) ? "sum" : "none",
               coll_op_rooted(c->op) ? (int)c->root : -1, ts, algbw, busbw, "N/A", ts, algbw,
               busbw, "N/A");
        if (show_energy) {
            char ej[NP_HUMAN_MAX], lj[NP_HUMAN_MAX], w[NP_HUMAN_MAX];
            printf("#  energy: %s (links %s), %s average over its %" PRIu32 " chips\n",
                   np_human_j(ef.total_j, ej, sizeof ej),
                   np_human_j(ef.part_j[ENERGY_PART_LINK], lj, sizeof lj),
                   np_human_si(ef.avg_w, "W", w, sizeof w), j->ranks);
        }
        fflush(stdout);
    }
    j->shown = r->algo;
    j->shown_proto = r->proto;
}

/* After the last size: the JSON document, the CSV rows or nccl-tests' footer. */
static np_status col_output(col_job *j, np_err *err)
{
    const col_cli *c = j->c;
    const net_params *np = &j->np;
    double avg_busbw = j->n_rows ? j->busbw_sum / j->n_rows : 0;
    if (c->json) {
        json_t *g = json_array();
        for (uint32_t i = 0; i < j->ranks; i++)
            json_array_append_new(g, json_integer(j->grp ? j->grp[i] : i));
        json_t *dims = json_pack("[i, i, i]", (int)np->dims[0], (int)np->dims[1],
                                 (int)np->dims[2]);
        json_t *doc = json_pack(
            "{s:s, s:s, s:s, s:s, s:s, s:i, s:i, s:s, s:o, s:o, s:f, s:f, s:I, s:i, s:i, s:f, "
            "s:o}", "arch", j->cfg.name, "op", coll_op_name(c->op), "algo",
            coll_algo_name(c->algo), "proto", coll_proto_name(c->proto), "engine",
            c->isa ? "isa" : c->engine == NET_ENGINE_PACKET ? "packet" : "flow", "chips",
            (int)np->chips, "ranks", (int)j->ranks, "topology",
            arch_keys[ARCH_KEY_system_topology].enum_info->values[np->topology], "dims", dims,
            "group", g, "link_gbps", np->link_bytes_per_s / 1e9, "link_efficiency",
            j->cfg.system.link_efficiency, "chunk_bytes", (json_int_t)c->chunk, "iters",
            (int)c->iters, "warmup", (int)c->warmup, "avg_busbw_gbps", avg_busbw, "rows",
            j->rows);
        j->rows = NULL;
        return cli_print_json(doc, err);
    }
    if (c->csv) {
        static const char *const keys[] = {"bytes", "count", "algo", "proto", "time_ps",
                                           "time_us", "algbw_gbps", "busbw_gbps",
                                           "busiest_link_util"};
        return csv_json_rows(stdout, j->rows, keys, sizeof keys / sizeof keys[0])
                   ? NP_OK
                   : np_err_set(err, NP_ERR_NOMEM, "out of memory");
    }
    printf("# Out of bounds values : 0 OK\n# Avg bus bandwidth    : %g \n#\n", avg_busbw);
    return NP_OK;
}

/* The command with its trace options (whose chip list the caller frees). */
static np_status col_main(int argc, char **argv, trace_layout_opts *trace_opts, np_err *err)
{
    col_cli c;
    np_status st = col_parse(argc, argv, &c, trace_opts, err);
    if (st != NP_OK || c.help)
        return st;
    if (col_check(&c, err) != NP_OK)
        return err->status;
    col_job j = {.c = &c};
    st = col_network(&j, trace_opts, err);
    if (st == NP_OK)
        st = col_open(&j, trace_opts, err);
    for (uint64_t b = c.min_b; st == NP_OK && b <= c.max_b;) {
        coll_result r = {0};
        double t_ps, busiest;
        energy_counts acts = {0}; /* the last run's link bytes (energy.h) */
        st = col_size(&j, b, &r, &t_ps, &busiest, &acts, err);
        if (st != NP_OK)
            break;
        col_row(&j, b, &r, t_ps, busiest, &acts);
        if (b > c.max_b / c.factor)
            break;
        b *= c.factor;
    }
    if (st == NP_OK)
        st = col_output(&j, err);
    if (j.tc && st == NP_OK)
        st = cli_trace_coll_status(j.tc, err);
    cli_trace_coll_free(j.tc);
    if (j.tr.w) {
        np_err terr;
        np_status ts = cli_trace_close(&j.tr, st == NP_OK ? err : &terr);
        if (st == NP_OK)
            st = ts;
    }
    free(j.link_bytes);
    json_decref(j.rows);
    coll_sys_free(j.sys);
    evq_free(j.q);
    free(j.grp);
    return st;
}

np_status cmd_collective(int argc, char **argv, np_err *err)
{
    trace_layout_opts o = {.level = TRACE_LEVEL_INSN};
    np_status st = col_main(argc, argv, &o, err);
    trace_chips_free(&o.chips);
    return st;
}
