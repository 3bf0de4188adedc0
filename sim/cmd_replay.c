/* cmd_replay.c — `npusim replay DIR`: a Chakra execution trace directory (one .et per rank and
 * its communicator groups, as `npusim run --chakra` or Chakra's tools write it) simulated on an
 * npusim architecture (sim/chakra.h, chakra_replay). Prints the step time and where each rank's
 * time went; --json the exact values. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "chakra.h"
#include "cli.h"
#include "human.h"
#include "parse.h"

#define REPLAY_MAX_SETS 64

const char cmd_replay_usage[] =
    "usage: npusim replay DIR [--arch A] [--set K=V ...] [--duration-scale S] [--roofline]\n"
    "                     [--json]\n"
    "\n"
    "Simulates the Chakra execution trace in DIR (DIR/<name>.<rank>.et for ranks 0 .. n-1 and\n"
    "DIR/<name>.comm_group.json) on every chip of an architecture: compute nodes for their\n"
    "duration (npusim's exact one, else duration_micros x S, else num_ops and tensor_size on\n"
    "the chip's roofline), collectives, sends and receives over the chip network.\n"
    "\n"
    "  --arch A            architecture preset or YAML file (default: tpu-pod)\n"
    "  --set K=V           override one config key (repeatable)\n"
    "  --duration-scale S  multiply recorded durations (npusim's, duration_micros) by S\n"
    "                      (default 1)\n"
    "  --roofline          cost every compute node that has num_ops or tensor_size on this\n"
    "                      architecture's roofline, not by its recorded duration (the chip it\n"
    "                      was recorded on)\n"
    "  --json              print one object, exact values (times in ps)\n";

enum { REPLAY_OPT_SCALE = 0x7a01, REPLAY_OPT_ROOFLINE };

static void replay_print(const char *dir, const arch_config *cfg, const chakra_replay_result *r)
{
    const run_result *res = r->res;
    char a[32], b[32], c[32], d[32], e[32], f[32];
    uint64_t comp = 0, expo = 0, idle = 0;
    for (uint32_t i = 0; i < res->ranks; i++)
        comp += res->rank[i].computing_ps, expo += res->rank[i].exposed_all_ps,
            idle += res->rank[i].idle_ps;
    uint32_t n = res->ranks ? res->ranks : 1;
    printf("# Chakra trace %s on %s: %s ranks, %s nodes (%s compute, %s collectives, %s sends, "
           "%s recvs)\n", dir, cfg->name, np_human_count(r->ranks, a, sizeof a),
           np_human_count(r->nodes, b, sizeof b), np_human_count(r->compute, c, sizeof c),
           np_human_count(r->colls, d, sizeof d), np_human_count(r->sends, e, sizeof e),
           np_human_count(r->recvs, f, sizeof f));
    printf("# compute nodes costed: %" PRIu64 " by npusim's duration, %" PRIu64 " by their "
           "recorded duration, %" PRIu64 " on the roofline\n\n",
           r->timed_exact, r->timed_recorded, r->timed_roofline);
    printf("step time            %s\n", np_human_ps(res->step_ps, a, sizeof a));
    printf("step per rank        compute %s + exposed communication %s + idle %s (mean over "
           "ranks)\n", np_human_ps(comp / n, a, sizeof a), np_human_ps(expo / n, b, sizeof b),
           np_human_ps(idle / n, c, sizeof c));
    printf("communication        kind    in flight (sum)   exposed (sum)   bytes\n");
    for (int k = 0; k < RUN_COMM_COUNT; k++)
        if (res->comm_ps[k] || res->comm_bytes[k])
            printf("                     %-7s %15s %15s %9s\n", run_comm_kind_name(k),
                   np_human_ps(res->comm_ps[k], a, sizeof a),
                   np_human_ps(res->exposed_ps[k], b, sizeof b),
                   np_human_bytes(res->comm_bytes[k], c, sizeof c));
}

static json_t *replay_json(const char *dir, const arch_config *cfg, const chakra_replay_result *r)
{
    const run_result *res = r->res;
    json_t *ranks = json_array(), *comm = json_object();
    for (uint32_t i = 0; i < res->ranks; i++)
        json_array_append_new(ranks, json_pack("{s:I, s:I, s:I, s:I}", "end_ps",
                                               (json_int_t)res->rank[i].end_ps, "computing_ps",
                                               (json_int_t)res->rank[i].computing_ps,
                                               "exposed_ps",
                                               (json_int_t)res->rank[i].exposed_all_ps,
                                               "idle_ps", (json_int_t)res->rank[i].idle_ps));
    for (int k = 0; k < RUN_COMM_COUNT; k++)
        if (res->comm_ps[k] || res->comm_bytes[k])
            json_object_set_new(comm, run_comm_kind_name(k),
                                json_pack("{s:I, s:I, s:I}", "in_flight_ps",
                                          (json_int_t)res->comm_ps[k], "exposed_ps",
                                          (json_int_t)res->exposed_ps[k], "bytes",
                                          (json_int_t)res->comm_bytes[k]));
    char fb[1024];
    return json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:{s:I, s:I, s:I}, s:I, s:o, "
                     "s:o}", "trace", cli_json_safe(dir, fb, sizeof fb), "arch", cfg->name,
                     "ranks", (json_int_t)r->ranks, "nodes", (json_int_t)r->nodes, "compute",
                     (json_int_t)r->compute, "collectives", (json_int_t)r->colls, "sends",
                     (json_int_t)r->sends, "recvs", (json_int_t)r->recvs, "costed", "exact",
                     (json_int_t)r->timed_exact, "recorded", (json_int_t)r->timed_recorded,
                     "roofline", (json_int_t)r->timed_roofline, "step_time_ps",
                     (json_int_t)res->step_ps, "comm", comm, "rank", ranks);
}

np_status cmd_replay(int argc, char **argv, np_err *err)
{
    static const struct option longopts[] = {
        {"arch", required_argument, NULL, 'a'},
        {"set", required_argument, NULL, 's'},
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {"duration-scale", required_argument, NULL, REPLAY_OPT_SCALE},
        {"roofline", no_argument, NULL, REPLAY_OPT_ROOFLINE},
        {0}};
    const char *arch_name = "tpu-pod";
    const char *sets[REPLAY_MAX_SETS];
    size_t n_sets = 0;
    bool json = false;
    chakra_replay_opts o = {.duration_scale = 1};
    np_status st = NP_OK;
    int c;
    cli_getopt_reset();
    while (st == NP_OK && (c = cli_getopt(argc, argv, "h", longopts, err)) != -1) {
        switch (c) {
        case 'a': arch_name = optarg; break;
        case 's': st = cli_add_set(sets, &n_sets, REPLAY_MAX_SETS, optarg, err); break;
        case 'j': json = true; break;
        case 'h': cli_print_usage(cli_find("replay")); return NP_OK;
        case REPLAY_OPT_SCALE:
            st = np_parse_f64(NP_SRC_OPT("--duration-scale"), optarg, 1e-9, 1e9,
                              &o.duration_scale, err);
            break;
        case REPLAY_OPT_ROOFLINE: o.roofline = true; break;
        default: st = err->status; break;
        }
    }
    if (st != NP_OK)
        return st;
    if (optind + 1 != argc)
        return np_err_set(err, NP_ERR_USAGE, optind >= argc ? "replay: which trace directory?"
                                                            : "unexpected argument '%s'",
                          argv[optind + 1 < argc ? optind + 1 : 0]);
    const char *dir = argv[optind];
    arch_config cfg;
    if (arch_resolve(arch_name, sets, n_sets, &cfg, err) != NP_OK)
        return err->status;
    chakra_replay_result r;
    st = chakra_replay(dir, &cfg, &o, &r, err);
    if (st == NP_OK) {
        if (json)
            st = cli_print_json(replay_json(dir, &cfg, &r), err);
        else
            replay_print(dir, &cfg, &r);
    }
    chakra_replay_result_free(&r);
    return st;
}
