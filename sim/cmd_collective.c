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

/* The most balanced factorisation of n into `dims` factors (x <= y <= z). */
static void col_balanced(uint32_t n, int dims, uint32_t out[3])
{
    out[0] = n;
    out[1] = out[2] = 1;
    if (dims == 2) {
        for (uint32_t x = 1; (uint64_t)x * x <= n; x++)
            if (n % x == 0) {
                out[0] = x;
                out[1] = n / x;
            }
    } else if (dims == 3) {
        uint32_t best = UINT32_MAX;
        for (uint32_t x = 1; (uint64_t)x * x * x <= n; x++) {
            if (n % x)
                continue;
            for (uint32_t y = x; (uint64_t)y * y <= n / x; y++) {
                if ((n / x) % y)
                    continue;
                uint32_t z = n / x / y;
                if (z - x < best) {
                    best = z - x;
                    out[0] = x;
                    out[1] = y;
                    out[2] = z;
                }
            }
        }
    }
}

static np_status col_topology(const char *spec, uint32_t chips_opt, net_params *np,
                              np_err *err)
{
    if (spec) {
        char kind[64];
        const char *colon = strchr(spec, ':');
        size_t len = colon ? (size_t)(colon - spec) : strlen(spec);
        snprintf(kind, sizeof kind, "%.*s", (int)(len < 63 ? len : 63), spec);
        const arch_key_info *k = arch_key_find("system.topology");
        size_t found;
        if (np_parse_enum(NP_SRC_OPT("--topology"), kind, "topology",
                          k->enum_info->values, k->enum_info->n, &found, err) != NP_OK)
            return err->status;
        np->topology = (arch_topology)found;
        if (colon) {
            /* a torus names each of its dimensions; the others one count */
            int want = np->topology == ARCH_TOPOLOGY_TORUS2D   ? 2
                       : np->topology == ARCH_TOPOLOGY_TORUS3D ? 3
                                                               : 1;
            uint64_t d[3] = {1, 1, 1};
            int nd;
            if (np_parse_dims(NP_SRC_OPT("--topology"), colon + 1, want, want, 1, COL_MAX_CHIPS,
                              COL_MAX_CHIPS, d, &nd, err) != NP_OK)
                return err->status;
            if (np->topology == ARCH_TOPOLOGY_HIERARCHICAL) {
                np->island_chips = (uint32_t)d[0];
            } else {
                for (int i = 0; i < 3; i++)
                    np->dims[i] = (uint32_t)d[i];
                if (!chips_opt)
                    np->chips = (uint32_t)(d[0] * d[1] * d[2]);
            }
        } else if (!chips_opt && (np->topology == ARCH_TOPOLOGY_TORUS2D ||
                                  np->topology == ARCH_TOPOLOGY_TORUS3D)) {
            chips_opt = np->chips;
        }
    }
    if (chips_opt)
        np->chips = chips_opt;
    uint32_t n = np->chips;
    switch (np->topology) {
    case ARCH_TOPOLOGY_RING:
        np->dims[0] = n;
        np->dims[1] = np->dims[2] = 1;
        break;
    case ARCH_TOPOLOGY_TORUS2D:
    case ARCH_TOPOLOGY_TORUS3D:
        if ((uint64_t)np->dims[0] * np->dims[1] * np->dims[2] != n)
            col_balanced(n, np->topology == ARCH_TOPOLOGY_TORUS2D ? 2 : 3, np->dims);
        break;
    case ARCH_TOPOLOGY_FULLY_CONNECTED:
        if (np->links_per_chip < n - 1)
            np->links_per_chip = n - 1;
        break;
    case ARCH_TOPOLOGY_SWITCH:
        if (np->switch_radix < n)
            np->switch_radix = n;
        break;
    case ARCH_TOPOLOGY_FAT_TREE:
        while ((uint64_t)np->switch_radix * np->switch_radix / 2 < n)
            np->switch_radix *= 2;
        break;
    case ARCH_TOPOLOGY_HIERARCHICAL:
        if (np->island_chips > n)
            np->island_chips = n;
        if (n % np->island_chips)
            return np_err_set(err, NP_ERR_USAGE, "%" PRIu32 " chips are not whole islands of "
                              "%" PRIu32, n, np->island_chips);
        break;
    case ARCH_TOPOLOGY_COUNT: break;
    }
    if (np->topology <= ARCH_TOPOLOGY_TORUS3D) {
        uint32_t need = 0;
        for (int d = 0; d < 3; d++)
            need += np->dims[d] > 1 ? 2 : 0;
        if (np->links_per_chip < need)
            np->links_per_chip = need;
    }
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

/* cfg.system set to the network of np, so that a run built from cfg (the core model) gets the
 * network the flow engine gets from np. */
static void col_system_from_net(arch_config *cfg, const net_params *np)
{
    cfg->system.chips = np->chips;
    cfg->system.topology = np->topology;
    cfg->system.torus_x = np->dims[0];
    cfg->system.torus_y = np->dims[1];
    cfg->system.torus_z = np->dims[2];
    cfg->system.links_per_chip = np->links_per_chip;
    cfg->system.switch_radix = np->switch_radix;
    cfg->system.island_chips = np->island_chips;
}

/* The collective kc lowered to one SPMD program and run on the core model by the chips of its
 * group (the others idle): its time in *r. */
static np_status col_run_isa(const arch_config *cfg, const kgen_coll *kc, cli_trace *tr,
                             coll_result *r, np_err *err)
{
    kgen_coll_prog kp;
    if (kgen_coll_build(cfg, kc, &kp, err) != NP_OK)
        return err->status;
    uint32_t n_chips = 0;
    for (uint32_t k = 0; k < kp.ranks; k++)
        n_chips = kp.ring[k] + 1 > n_chips ? kp.ring[k] + 1 : n_chips;
    const isa_program **pv = calloc(n_chips, sizeof *pv);
    isa_program *idle = NULL;
    np_status st = pv ? NP_OK : np_err_set(err, NP_ERR_NOMEM, "out of memory");
    if (st == NP_OK && n_chips > kp.ranks)
        st = kgen_coll_idle(cfg, &idle, err);
    core_report *rep = NULL;
    if (st == NP_OK) {
        for (uint32_t c = 0; c < n_chips; c++)
            pv[c] = idle;
        for (uint32_t k = 0; k < kp.ranks; k++)
            pv[kp.ring[k]] = kp.prog; /* one text for every rank */
        core_group g = {.id = kp.group, .n = kp.ranks, .chips = kp.ring};
        core_sim_opts o = {.trace = tr ? cli_trace_insn : NULL, .trace_ctx = tr, .groups = &g,
                           .n_groups = 1};
        st = core_sim_run_chips(cfg, pv, n_chips, &o, NULL, &rep, err);
    }
    if (tr && st == NP_OK) {
        cli_trace_kernels(tr, rep);
        tr->offset_ps += rep->total_ps;
    }
    free(pv);
    isa_program_free(idle);
    uint32_t ranks = kp.ranks;
    kgen_coll_prog_free(&kp);
    if (st != NP_OK)
        return st;
    *r = (coll_result){.algo = COLL_ALGO_RING, .ranks = ranks, .bytes = kc->bytes,
                       .t_end_ps = rep->total_ps, .bytes_sent = rep->c2c_bytes};
    core_report_free(rep);
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

/* The command with its trace options (whose chip list the caller frees). */
static np_status col_main(int argc, char **argv, trace_layout_opts *trace_opts, np_err *err)
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
    const char *arch_name = CLI_DEFAULT_ARCH, *topo = NULL, *group = NULL;
    const char *sets[COL_MAX_SETS];
    size_t n_sets = 0;
    bool have_op = false, json = false, csv = false, isa = false, rank_order = false;
    const char *trace_path = NULL;
    coll_op op = COLL_OP_ALL_REDUCE;
    coll_algo algo = COLL_ALGO_AUTO;
    coll_proto proto = COLL_PROTO_SYSTEM;
    uint32_t chips = 0, factor = 2, root = 0, elem = 4, iters = 1, warmup = 0, max_ranks = 0;
    uint64_t min_b = 8, max_b = 128ULL << 20, chunk = 0, mtu = 0;
    uint32_t buf = 0, core = 0;
    bool have_core = false;
    net_engine engine = NET_ENGINE_FLOW;
    run_faults_job faults = {0};
    int c;
    cli_getopt_reset();
    while ((c = cli_getopt(argc, argv, "hb:e:f:n:w:", longopts, err)) != -1) {
        np_status st = NP_OK;
        switch (c) {
        case 'a': arch_name = optarg; break;
        case 's':
            if (cli_add_set(sets, &n_sets, COL_MAX_SETS, optarg, err) != NP_OK)
                return err->status;
            break;
        case 'o':
            if (coll_op_parse(optarg, &op, err) != NP_OK) {
                err->status = NP_ERR_USAGE;
                np_err_prefix(err, "--op");
                return NP_ERR_USAGE;
            }
            have_op = true;
            break;
        case 'A':
            if (coll_algo_parse(optarg, &algo, err) != NP_OK) {
                err->status = NP_ERR_USAGE;
                np_err_prefix(err, "--algo");
                return NP_ERR_USAGE;
            }
            break;
        case 'P':
            if (coll_proto_parse(optarg, &proto, err) != NP_OK) {
                err->status = NP_ERR_USAGE;
                np_err_prefix(err, "--proto");
                return NP_ERR_USAGE;
            }
            break;
        case 'C': st = col_parse_u32("--chips", optarg, 1, COL_MAX_CHIPS, &chips, err); break;
        case 't': topo = optarg; break;
        case 'g': group = optarg; break;
        case 'b': st = col_parse_size("--min-bytes", optarg, 1, 1ULL << 50, &min_b, err); break;
        case 'e': st = col_parse_size("--max-bytes", optarg, 1, 1ULL << 50, &max_b, err); break;
        case 'f': st = col_parse_u32("--factor", optarg, 2, 1024, &factor, err); break;
        case 'n': st = col_parse_u32("--iters", optarg, 1, 1000000, &iters, err); break;
        case 'w': st = col_parse_u32("--warmup", optarg, 0, 1000000, &warmup, err); break;
        case 'c': st = col_parse_size("--chunk", optarg, 0, 1ULL << 50, &chunk, err); break;
        case 'r': st = col_parse_u32("--root", optarg, 0, UINT32_MAX, &root, err); break;
        case 'E': st = col_parse_u32("--elem-bytes", optarg, 1, 64, &elem, err); break;
        case 'X': st = col_parse_u32("--max-ranks", optarg, 1, UINT32_MAX, &max_ranks, err); break;
        case 'j': json = true; break;
        case 'V': csv = true; break;
        case 'R': rank_order = true; break;
        case 'G': {
            static const char *const engines[] = {"flow", "packet"};
            size_t e = 0;
            st = np_parse_enum(NP_SRC_OPT("--engine"), optarg, "engine", engines, 2, &e, err);
            engine = e == 1 ? NET_ENGINE_PACKET : NET_ENGINE_FLOW;
            break;
        }
        case 'M':
            st = col_parse_size("--mtu", optarg, 1, 1u << 30, &mtu, err);
            break;
        case 'B': st = col_parse_u32("--buf", optarg, 2, 1u << 20, &buf, err); break;
        case 'K':
            st = col_parse_u32("--core", optarg, 0, 65535, &core, err);
            have_core = true;
            break;
        case 'I': isa = true; break;
        case 'L':
        case 'F': st = run_faults_link_flag(&faults, optarg, c == 'F', err); break;
        case 'T': trace_path = optarg; break;
        case CLI_TRACE_OPT_CHIPS:
        case CLI_TRACE_OPT_MAX_BYTES:
        case CLI_TRACE_OPT_LEVEL: st = cli_trace_flag(trace_opts, c, optarg, err); break;
        case 'h': cli_print_usage(cli_find("collective")); return NP_OK;
        default: return err->status;
        }
        if (st != NP_OK)
            return st;
    }
    if (cli_trace_need_path(trace_path, trace_opts, err) != NP_OK)
        return err->status;
    if (optind < argc)
        return np_err_set(err, NP_ERR_USAGE, "unexpected argument '%s'", argv[optind]);
    if (!have_op)
        return np_err_set(err, NP_ERR_USAGE, "--op is required");
    if (json && csv)
        return np_err_set(err, NP_ERR_USAGE, "--json and --csv: one output format at a time");
    if (max_b < min_b)
        return np_err_set(err, NP_ERR_USAGE, "--max-bytes is below --min-bytes");
    if (!coll_algo_supported(op, algo))
        return np_err_set(err, NP_ERR_USAGE, "--algo: %s has no %s algorithm", coll_op_name(op),
                          coll_algo_name(algo));
    if (trace_path && engine == NET_ENGINE_PACKET)
        return np_err_set(err, NP_ERR_USAGE, "--trace: the packet engine is not traced (the "
                          "flow engine and --isa are)");
    if (have_core && !isa)
        return np_err_set(err, NP_ERR_USAGE, "--core needs --isa (the flow engine moves data "
                          "between chips, not cores)");
    if ((mtu || buf) && engine != NET_ENGINE_PACKET)
        return np_err_set(err, NP_ERR_USAGE, "--mtu and --buf need --engine packet");
    if (isa && engine != NET_ENGINE_FLOW)
        return np_err_set(err, NP_ERR_USAGE, "--isa runs on the flow engine's network (no "
                          "--engine packet)");
    kgen_coll_op kop = KGEN_COLL_ALL_REDUCE;
    if (isa) {
        if (op == COLL_OP_ALL_GATHER)
            kop = KGEN_COLL_ALL_GATHER;
        else if (op == COLL_OP_REDUCE_SCATTER)
            kop = KGEN_COLL_REDUCE_SCATTER;
        else if (op != COLL_OP_ALL_REDUCE)
            return np_err_set(err, NP_ERR_USAGE, "--isa: %s is not lowered yet (all_reduce, "
                              "all_gather and reduce_scatter are)", coll_op_name(op));
        if ((algo != COLL_ALGO_AUTO && algo != COLL_ALGO_RING) || chunk ||
            (elem != 4 && elem != 2))
            return np_err_set(err, NP_ERR_USAGE, "--isa runs the ring without chunking, with 4- "
                              "or 2-byte elements (no --algo other than ring, no --chunk)");
        algo = COLL_ALGO_RING;
    }

    arch_config cfg;
    if (arch_resolve(arch_name, sets, n_sets, &cfg, err) != NP_OK)
        return err->status;
    proto = coll_proto_resolve(&cfg, proto);
    if (isa && proto != COLL_PROTO_RAW)
        return np_err_set(err, NP_ERR_USAGE, "--isa: the lowered programs move raw payload (no "
                          "--proto %s, no system.coll_protocol other than raw)",
                          coll_proto_name(proto));
    net_params np;
    net_params_from_arch(&cfg, &np);
    if (col_topology(topo, chips, &np, err) != NP_OK)
        return err->status;
    np.engine = engine;
    np.mtu_bytes = (uint32_t)mtu;
    np.buf_packets = buf;
    np.faults = faults.links;
    np.n_faults = faults.n_links;
    if (isa && faults.n_links)
        return np_err_set(err, NP_ERR_USAGE, "--isa: --slow-link and --fail-link are not "
                          "available with the lowered programs yet");
    if (np.chips < 2)
        return np_err_set(err, NP_ERR_USAGE, "a collective needs at least 2 chips (the "
                          "architecture has %" PRIu32 "; use --chips)", np.chips);
    if (trace_chips_check(&trace_opts->chips, np.chips, "--trace-chips", err) != NP_OK)
        return err->status;
    uint32_t *grp = NULL, n_grp = 0;
    if (group && col_group(group, np.chips, &grp, &n_grp, err) != NP_OK)
        return err->status;

    evq *q = NULL;
    coll_sys *sys = NULL;
    cli_trace tr = {0};
    cli_trace_coll *tc = NULL;
    json_t *rows = NULL;
    uint64_t *link_bytes = NULL;
    np_status st = evq_create(&q, err);
    if (st == NP_OK)
        st = coll_sys_create(&cfg, &np, q, NULL, &sys, err);
    if (st != NP_OK)
        goto out;
    uint32_t ranks = grp ? n_grp : np.chips;
    link_bytes = calloc(net_links(coll_sys_net(sys)) + 1, sizeof *link_bytes);
    if (!link_bytes) {
        st = np_err_set(err, NP_ERR_NOMEM, "out of memory");
        goto out;
    }
    const char *topo_name = arch_keys[ARCH_KEY_system_topology].enum_info->values[np.topology];
    const char *redop = coll_op_reduces(op) ? "sum" : "none";
    int root_col = coll_op_rooted(op) ? (int)root : -1;
    coll_algo shown = COLL_ALGO_AUTO; /* the algorithm and protocol of the last row printed */
    coll_proto shown_proto = COLL_PROTO_SYSTEM;
    bool header = false;
    double busbw_sum = 0;
    uint32_t n_rows = 0;
    if (json || csv)
        rows = json_array();
    if (isa) /* the core model builds its network from cfg.system: make it the one above */
        col_system_from_net(&cfg, &np);
    if (trace_path && (st = cli_trace_open_opts(&tr, trace_path, trace_opts, err)) != NP_OK)
        goto out;
    if (trace_path && isa && (st = cli_trace_set_arch(&tr, &cfg, err)) != NP_OK)
        goto out;
    if (trace_path && !isa &&
        (st = cli_trace_coll_create(coll_sys_net(sys), tr.sink, trace_opts->level, &tc, err)) !=
            NP_OK)
        goto out;
    col_progress pg = {.tty = !json && !csv && isatty(2)};
    for (uint64_t b = min_b; b <= max_b;) {
        coll_desc d = {.op = op, .algo = algo, .chips = grp, .n_chips = n_grp, .bytes = b,
                       .root = root, .chunk_bytes = chunk, .elem_bytes = elem,
                       .rank_order = rank_order, .proto = proto, .max_ranks = max_ranks};
        coll_result r = {0};
        double t_ps = 0, busiest = 0;
        energy_counts acts = {0}; /* the last run's link bytes (energy.h) */
        pg.t0 = pg.last = np_wall_s();
        pg.bytes = b;
        for (uint32_t it = 0; it < warmup + iters && st == NP_OK; it++) {
            if (isa) {
                kgen_coll kc = {.op = kop, .chips = grp, .ranks = ranks, .core = core,
                                .bytes = b, .dtype = elem == 4 ? ISA_DTYPE_FP32 : ISA_DTYPE_BF16,
                                .rank_order = rank_order};
                st = col_run_isa(&cfg, &kc, tr.w && it == warmup ? &tr : NULL, &r, err);
            } else {
                d.obs = tc && it == warmup ? cli_trace_coll_observer(tc) : NULL;
                energy_counts before, after;
                energy_counts_of_net(coll_sys_net(sys), &before);
                st = coll_run_progress(sys, &d, col_progress_cb, &pg, &r, err);
                energy_counts_of_net(coll_sys_net(sys), &after);
                acts.link_bytes = after.link_bytes - before.link_bytes;
                if (st == NP_OK && d.obs)
                    cli_trace_coll_done(tc, &r, grp);
                if (st == NP_OK) /* over the measured runs */
                    busiest = col_busiest_link(coll_sys_net(sys), link_bytes,
                                               (double)(r.t_end_ps - r.t_start_ps) / 1e12);
            }
            if (it >= warmup)
                t_ps += (double)(r.t_end_ps - r.t_start_ps) / iters;
        }
        if (pg.shown) {
            fprintf(stderr, "\r%60s\r", "");
            pg.shown = false;
        }
        if (st != NP_OK)
            goto out;
        if (!json && !csv && !header) { /* after the first run, so an error comes alone */
            header = true;
            col_print_header(op, algo, proto, ranks, &np, cfg.system.link_efficiency, min_b,
                             max_b, factor, iters, warmup, chunk, isa);
        }
        double t_us = t_ps / 1e6;
        double algbw = t_us > 0 ? (double)b / (t_us * 1e3) : 0;
        double busbw = algbw * coll_busbw_factor(op, ranks);
        busbw_sum += busbw;
        n_rows++;
        if (isa)
            r.proto = COLL_PROTO_RAW;
        energy_figures ef; /* one collective: its links' bits, its ranks' static power */
        energy_figures_of(&cfg, &acts, ranks, (uint64_t)llround(t_ps), 0, &ef);
        bool show_energy = ef.modelled && !isa;
        if (rows) {
            json_array_append_new(rows, json_pack("{s:I, s:I, s:s, s:s, s:I, s:f, s:f, s:f, "
                                                  "s:o, s:o}", "bytes", (json_int_t)b, "count",
                                                  (json_int_t)(b / elem), "algo",
                                                  coll_algo_name(r.algo), "proto",
                                                  coll_proto_name(r.proto), "time_ps",
                                                  (json_int_t)llround(t_ps), "time_us", t_us,
                                                  "algbw_gbps", algbw, "busbw_gbps", busbw,
                                                  "wrong", json_null(), "busiest_link_util",
                                                  isa ? json_null() : json_real(busiest)));
            if (show_energy) {
                json_t *row = json_array_get(rows, json_array_size(rows) - 1);
                json_object_set_new(row, "energy_j", json_real(ef.total_j));
                json_object_set_new(row, "link_energy_j", json_real(ef.part_j[ENERGY_PART_LINK]));
                json_object_set_new(row, "avg_w", json_real(ef.avg_w));
            }
        } else {
            bool tuned = algo == COLL_ALGO_AUTO || proto == COLL_PROTO_AUTO;
            if (tuned && (r.algo != shown || r.proto != shown_proto)) {
                printf("#  algo: %s", coll_algo_name(r.algo));
                if (r.proto != COLL_PROTO_RAW)
                    printf(", protocol %s", coll_proto_name(r.proto));
                printf(" (tuner)\n");
            }
            char ts[32];
            col_time_str(t_us, ts, sizeof ts);
            printf("  %10" PRIu64 "  %12" PRIu64 "  %8s  %6s  %6d  %7s  %6.2f  %6.2f  %5s  %7s  "
                   "%6.2f  %6.2f  %5s\n", b, b / elem, col_type_name(elem, isa), redop, root_col,
                   ts, algbw, busbw, "N/A", ts, algbw, busbw, "N/A");
            if (show_energy) {
                char ej[NP_HUMAN_MAX], lj[NP_HUMAN_MAX], w[NP_HUMAN_MAX];
                printf("#  energy: %s (links %s), %s average over its %" PRIu32 " chips\n",
                       np_human_j(ef.total_j, ej, sizeof ej),
                       np_human_j(ef.part_j[ENERGY_PART_LINK], lj, sizeof lj),
                       np_human_si(ef.avg_w, "W", w, sizeof w), ranks);
            }
            fflush(stdout);
        }
        shown = r.algo;
        shown_proto = r.proto;
        if (b > max_b / factor)
            break;
        b *= factor;
    }
    double avg_busbw = n_rows ? busbw_sum / n_rows : 0;
    if (json) {
        json_t *g = json_array();
        for (uint32_t i = 0; i < ranks; i++)
            json_array_append_new(g, json_integer(grp ? grp[i] : i));
        json_t *dims = json_pack("[i, i, i]", (int)np.dims[0], (int)np.dims[1], (int)np.dims[2]);
        json_t *doc = json_pack("{s:s, s:s, s:s, s:s, s:s, s:i, s:i, s:s, s:o, s:o, s:f, s:f, "
                                "s:I, s:i, s:i, s:f, s:o}",
                                "arch", cfg.name, "op", coll_op_name(op), "algo",
                                coll_algo_name(algo), "proto", coll_proto_name(proto),
                                "engine",
                                isa ? "isa" : engine == NET_ENGINE_PACKET ? "packet" : "flow",
                                "chips",
                                (int)np.chips, "ranks", (int)ranks,
                                "topology", topo_name, "dims", dims, "group", g,
                                "link_gbps", np.link_bytes_per_s / 1e9, "link_efficiency",
                                cfg.system.link_efficiency, "chunk_bytes",
                                (json_int_t)chunk, "iters", (int)iters, "warmup", (int)warmup,
                                "avg_busbw_gbps", avg_busbw, "rows", rows);
        rows = NULL;
        st = cli_print_json(doc, err);
    } else if (csv) {
        static const char *const keys[] = {"bytes", "count", "algo", "proto", "time_ps",
                                           "time_us",
                                           "algbw_gbps", "busbw_gbps", "busiest_link_util"};
        if (!csv_json_rows(stdout, rows, keys, sizeof keys / sizeof keys[0]))
            st = np_err_set(err, NP_ERR_NOMEM, "out of memory");
    } else {
        printf("# Out of bounds values : 0 OK\n# Avg bus bandwidth    : %g \n#\n", avg_busbw);
    }
out:
    if (tc && st == NP_OK)
        st = cli_trace_coll_status(tc, err);
    cli_trace_coll_free(tc);
    if (tr.w) {
        np_err terr;
        np_status ts = cli_trace_close(&tr, st == NP_OK ? err : &terr);
        if (st == NP_OK)
            st = ts;
    }
    free(link_bytes);
    json_decref(rows);
    coll_sys_free(sys);
    evq_free(q);
    free(grp);
    return st;
}

np_status cmd_collective(int argc, char **argv, np_err *err)
{
    trace_layout_opts o = {.level = TRACE_LEVEL_INSN};
    np_status st = col_main(argc, argv, &o, err);
    trace_chips_free(&o.chips);
    return st;
}
