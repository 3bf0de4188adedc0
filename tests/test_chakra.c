/* test_chakra.c — Chakra execution traces out of `npusim run` and back in (sim/chakra.h).
 *
 * The exported files are decoded here with protobuf-c's generated unpacker (not npusim's
 * importer) and compared with the plan built independently (framework/'s nn_plan: its
 * collectives per rank and their sizes, its pipeline peers) and with the boundary sizes by
 * hand; the replay of the export is compared with the run's step time; a hand-built single-rank
 * trace replays to the sum of its durations by hand; malformed files are refused naming the
 * file and the node. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "chakra.h"
#include "harness.h"
#include "model.h"
#include "run_job.h"

#if NPUSIM_CHAKRA
#include "et_def.pb-c.h"

/* ---- reading a trace file with protobuf-c ------------------------------------------------- */

typedef struct et_file {
    ChakraProtoMsg__GlobalMetadata *md;
    ChakraProtoMsg__Node **node;
    size_t n;
} et_file;

static bool et_read(const char *path, et_file *f)
{
    memset(f, 0, sizeof *f);
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return false;
    static uint8_t buf[1 << 20];
    size_t len = fread(buf, 1, sizeof buf, fp), pos = 0;
    fclose(fp);
    f->node = calloc(1 << 14, sizeof *f->node);
    while (pos < len) {
        uint32_t v = 0;
        for (int k = 0; pos < len; k++) { /* the varint length protolib writes */
            v |= (uint32_t)(buf[pos] & 0x7f) << (7 * k);
            if (!(buf[pos++] & 0x80))
                break;
        }
        if (v > len - pos)
            return false;
        if (!f->md) {
            f->md = chakra_proto_msg__global_metadata__unpack(NULL, v, buf + pos);
            if (!f->md)
                return false;
        } else {
            f->node[f->n] = chakra_proto_msg__node__unpack(NULL, v, buf + pos);
            if (!f->node[f->n++])
                return false;
        }
        pos += v;
    }
    return f->md != NULL;
}

static void et_free(et_file *f)
{
    if (f->md)
        chakra_proto_msg__global_metadata__free_unpacked(f->md, NULL);
    for (size_t i = 0; i < f->n; i++)
        if (f->node[i])
            chakra_proto_msg__node__free_unpacked(f->node[i], NULL);
    free(f->node);
}

static const ChakraProtoMsg__AttributeProto *et_attr(const ChakraProtoMsg__Node *n,
                                                     const char *name)
{
    for (size_t i = 0; i < n->n_attr; i++)
        if (strcmp(n->attr[i]->name, name) == 0)
            return n->attr[i];
    return NULL;
}

/* ---- the job -------------------------------------------------------------------------------- */

static char tmp_dir[64];

static const char *make_tmp(void)
{
    snprintf(tmp_dir, sizeof tmp_dir, "/tmp/npusim_chakra_XXXXXX");
    return mkdtemp(tmp_dir);
}

static void rm_tmp(const char *dir)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CU_ASSERT_EQUAL(system(cmd), 0);
}

/* GPT-tiny, dp 2 x tp 2 x pp 2 on tpu-pod, global batch 8 in micro-batches of 2 (2 per dp
 * rank's step): its run into *rep, its trace into dir, its plan (built on its own) into *p. */
static void gpt_tiny_job(const char *dir, arch_config *cfg, nn_model_desc *d, run_report *rep,
                         nn_plan **p)
{
    np_err err = {0};
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tpu-pod", NULL, 0, cfg, &err), NP_OK);
    CU_ASSERT_EQUAL_FATAL(nn_model_load("gpt-tiny", d, &err), NP_OK);
    run_job j = {.cfg = cfg, .model = d, .steps = 1, .optim = run_job_optim(),
                 .chakra_dir = dir, .chakra_name = "gpt-tiny"};
    nn_strategy_default(&j.s);
    j.s.dp = j.s.tp = j.s.pp = 2;
    j.s.microbatch = 2;
    j.o = (nn_model_opts){.batch = 8, .compute = NN_BF16, .seed = 1};
    CU_ASSERT_EQUAL_FATAL(run_job_run(&j, rep, &err), NP_OK);
    char why[256];
    CU_ASSERT_EQUAL_FATAL(run_build_plan(d, &j.o, &j.s, &j.optim, cfg, p, why, sizeof why, &err),
                          NP_OK);
}

#endif

TEST(export_of_gpt_tiny_dp2_tp2_pp2_decodes_to_the_plan_s_collectives_sends_and_dependencies)
{
#if NPUSIM_CHAKRA
    const char *dir = make_tmp();
    CU_ASSERT_PTR_NOT_NULL_FATAL(dir);
    arch_config cfg;
    nn_model_desc d;
    run_report rep;
    nn_plan *p = NULL;
    gpt_tiny_job(dir, &cfg, &d, &rep, &p);
    char path[256];
    snprintf(path, sizeof path, "%s/gpt-tiny.comm_group.json", dir);
    json_error_t je;
    json_t *groups = json_load_file(path, 0, &je);
    CU_ASSERT_PTR_NOT_NULL_FATAL(groups);
    /* 3 axes of 4 groups of 2 ranks */
    CU_ASSERT_EQUAL(json_object_size(groups), 12);
    for (int r = 0; r < 8; r++) {
        snprintf(path, sizeof path, "%s/gpt-tiny.%d.et", dir, r);
        et_file f;
        CU_ASSERT_TRUE_FATAL(et_read(path, &f));
        /* what the plan says this rank runs */
        const nn_plan_class *c = &p->classes[nn_plan_rank_class(p, r)];
        nn_plan_iter it;
        nn_plan_iter_begin(&it, p, c);
        const nn_plan_block *b;
        int mb;
        uint64_t colls = 0, coll_bytes = 0;
        double flops = 0;
        for (const nn_plan_entry *e; (e = nn_plan_iter_next(&it, &b, &mb));) {
            /* comm_size is a rank's input (Chakra's converter, ASTRA-sim's reading): the
             * plan's size but for an all-gather, whose plan size is its output, the ranks'
             * inputs together */
            if (e->kind == NN_PLAN_COLLECTIVE && e->group_size > 1)
                colls++, coll_bytes += e->nodes[0]->op == NN_OP_ALL_GATHER
                                           ? e->bytes / (uint64_t)e->group_size
                                           : e->bytes;
            if (e->kind == NN_PLAN_COMPUTE)
                flops += (double)e->flops;
        }
        int pp_group[2];
        CU_ASSERT_EQUAL(nn_plan_axis_group(p, r, NN_MESH_PP, pp_group, 2), 2);
        int peer = pp_group[0] == r ? pp_group[1] : pp_group[0];
        uint64_t n_coll = 0, sum_coll = 0, n_send = 0, n_recv = 0, sum_us = 0, sum_ps = 0;
        double num_ops = 0;
        for (size_t i = 0; i < f.n; i++) {
            const ChakraProtoMsg__Node *n = f.node[i];
            CU_ASSERT_EQUAL(n->id, i);
            for (size_t k = 0; k < n->n_data_deps; k++) /* issue order is a topological one */
                CU_ASSERT(n->data_deps[k] < n->id);
            const ChakraProtoMsg__AttributeProto *a;
            switch (n->type) {
            case CHAKRA_PROTO_MSG__NODE_TYPE__COMP_NODE:
                CU_ASSERT_PTR_NOT_NULL_FATAL(a = et_attr(n, "num_ops"));
                num_ops += (double)a->int64_val;
                CU_ASSERT_PTR_NOT_NULL_FATAL(a = et_attr(n, "npusim_duration_ps"));
                sum_ps += a->uint64_val;
                sum_us += n->duration_micros;
                break;
            case CHAKRA_PROTO_MSG__NODE_TYPE__COMM_COLL_NODE: {
                n_coll++;
                CU_ASSERT_PTR_NOT_NULL_FATAL(a = et_attr(n, "comm_size"));
                sum_coll += (uint64_t)a->int64_val;
                CU_ASSERT_PTR_NOT_NULL_FATAL(a = et_attr(n, "pg_name"));
                json_t *g = json_object_get(groups, a->string_val);
                CU_ASSERT_PTR_NOT_NULL_FATAL(g);
                CU_ASSERT_EQUAL(json_array_size(g), 2);
                bool member = false;
                for (size_t k = 0; k < json_array_size(g); k++)
                    member |= json_integer_value(json_array_get(g, k)) == r;
                CU_ASSERT_TRUE(member);
                /* the group is the plan's group of the collective's axis: tp (and the
                 * pipeline boundary's scatter/gather, pp-sg, over the tp ranks), dp, and pp
                 * (the tied embedding's all-reduce between the first and last stage) */
                const char *kind = et_attr(n, "npusim_comm")->string_val;
                nn_mesh_axis ax = !strcmp(kind, "dp") ? NN_MESH_DP
                                  : !strcmp(kind, "pp") ? NN_MESH_PP : NN_MESH_TP;
                CU_ASSERT(!strcmp(kind, "dp") || !strcmp(kind, "pp") || !strcmp(kind, "tp") ||
                          !strcmp(kind, "pp-sg"));
                int want[2];
                CU_ASSERT_EQUAL_FATAL(nn_plan_axis_group(p, r, ax, want, 2), 2);
                for (size_t k = 0; k < 2; k++)
                    CU_ASSERT_EQUAL(json_integer_value(json_array_get(g, k)), want[k]);
                break;
            }
            case CHAKRA_PROTO_MSG__NODE_TYPE__COMM_SEND_NODE:
            case CHAKRA_PROTO_MSG__NODE_TYPE__COMM_RECV_NODE: {
                bool send = n->type == CHAKRA_PROTO_MSG__NODE_TYPE__COMM_SEND_NODE;
                n_send += send, n_recv += !send;
                CU_ASSERT_EQUAL(et_attr(n, send ? "comm_src" : "comm_dst")->int32_val, r);
                CU_ASSERT_EQUAL(et_attr(n, send ? "comm_dst" : "comm_src")->int32_val, peer);
                /* a pipeline boundary of a micro-batch, 2 x 16 tokens x 32 bf16 values, in
                 * 1/tp shards (pipeline scatter/gather): 1,024 bytes */
                CU_ASSERT_EQUAL(et_attr(n, "comm_size")->int64_val, 2 * 16 * 32 * 2 / 2);
                break;
            }
            default: CU_FAIL("a node of another type");
            }
        }
        CU_ASSERT_EQUAL(n_coll, colls);
        CU_ASSERT_EQUAL(sum_coll, coll_bytes);
        /* 1F1B over 2 stages, 2 micro-batches: each stage sends 2 boundaries (activations
         * forward, gradients back) and receives 2 */
        CU_ASSERT_EQUAL(n_send, 2);
        CU_ASSERT_EQUAL(n_recv, 2);
        CU_ASSERT_DOUBLE_EQUAL(num_ops, flops, 0.5);
        /* whole microseconds that add up to the exact sum, rounded (tpu-pod: no launch gaps) */
        CU_ASSERT(sum_ps > 0);
        CU_ASSERT_EQUAL(sum_us, (sum_ps + 500000) / 1000000);
        et_free(&f);
    }
    json_decref(groups);
    nn_plan_free(p);
    run_report_free(&rep);
    rm_tmp(dir);
#else
    CU_PASS("built without protobuf-c: no Chakra traces");
#endif
}
#if NPUSIM_CHAKRA

#endif

TEST(replay_of_the_exported_trace_gives_the_run_s_step_time_within_2_percent)
{
#if NPUSIM_CHAKRA
    const char *dir = make_tmp();
    CU_ASSERT_PTR_NOT_NULL_FATAL(dir);
    arch_config cfg;
    nn_model_desc d;
    run_report rep;
    nn_plan *p = NULL;
    gpt_tiny_job(dir, &cfg, &d, &rep, &p);
    chakra_replay_result r;
    np_err err = {0};
    CU_ASSERT_EQUAL_FATAL(chakra_replay(dir, &cfg, NULL, &r, &err), NP_OK);
    CU_ASSERT_EQUAL(r.ranks, 8);
    CU_ASSERT_EQUAL(r.timed_exact, r.compute);
    double replay_s = (double)r.res->step_ps * 1e-12;
    CU_ASSERT(fabs(replay_s - rep.step_time_s) <= 0.02 * rep.step_time_s);
    uint64_t computing = 0;
    for (uint32_t i = 0; i < r.res->ranks; i++)
        computing += r.res->rank[i].computing_ps;
    chakra_replay_result_free(&r);
    /* durations x 2: every rank computes twice as long (tpu-pod: no launch gaps) */
    CU_ASSERT_EQUAL_FATAL(chakra_replay(dir, &cfg, &(chakra_replay_opts){.duration_scale = 2},
                                        &r, &err), NP_OK);
    uint64_t computing2 = 0;
    for (uint32_t i = 0; i < r.res->ranks; i++)
        computing2 += r.res->rank[i].computing_ps;
    CU_ASSERT(llabs((long long)computing2 - 2 * (long long)computing) <= (long long)r.compute);
    chakra_replay_result_free(&r);
    /* on the roofline: every compute node has its FLOPs and bytes */
    CU_ASSERT_EQUAL_FATAL(chakra_replay(dir, &cfg, &(chakra_replay_opts){.roofline = true}, &r,
                                        &err), NP_OK);
    CU_ASSERT_EQUAL(r.timed_roofline, r.compute);
    CU_ASSERT_EQUAL(r.timed_exact, 0);
    chakra_replay_result_free(&r);
    nn_plan_free(p);
    run_report_free(&rep);
    rm_tmp(dir);
#else
    CU_PASS("built without protobuf-c: no Chakra traces");
#endif
}
#if NPUSIM_CHAKRA

/* ---- hand-built traces ---------------------------------------------------------------------- */

static void put(FILE *f, const ProtobufCMessage *m)
{
    uint8_t buf[4096];
    size_t n = protobuf_c_message_pack(m, buf);
    for (size_t v = n; ; v >>= 7) {
        fputc((int)((v & 0x7f) | (v >= 0x80 ? 0x80 : 0)), f);
        if (v < 0x80)
            break;
    }
    fwrite(buf, 1, n, f);
}

/* dir/hand.0.et: compute nodes of durations us[i] (0: by FLOPs ops[i]), node i depending on
 * node deps[i] (-1: none). */
static void write_single_rank(const char *dir, int n, const uint64_t *us, const int64_t *ops,
                              const int *deps)
{
    char path[256];
    snprintf(path, sizeof path, "%s/hand.0.et", dir);
    FILE *f = fopen(path, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    ChakraProtoMsg__GlobalMetadata md = CHAKRA_PROTO_MSG__GLOBAL_METADATA__INIT;
    md.version = "0.0.4";
    put(f, &md.base);
    for (int i = 0; i < n; i++) {
        ChakraProtoMsg__Node nd = CHAKRA_PROTO_MSG__NODE__INIT;
        ChakraProtoMsg__AttributeProto a = CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__INIT, *ap = &a;
        uint64_t dep = deps[i] >= 0 ? (uint64_t)deps[i] : 0;
        nd.id = (uint64_t)(10 + i); /* ids need not be positions */
        nd.name = "k";
        nd.type = CHAKRA_PROTO_MSG__NODE_TYPE__COMP_NODE;
        nd.duration_micros = us[i];
        if (deps[i] >= 0) {
            dep += 10;
            nd.data_deps = &dep;
            nd.n_data_deps = 1;
        }
        if (ops[i]) {
            a.name = "num_ops";
            a.value_case = CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_INT64_VAL;
            a.int64_val = ops[i];
            nd.attr = &ap;
            nd.n_attr = 1;
        }
        put(f, &nd.base);
    }
    fclose(f);
}

#endif

TEST(replay_of_a_single_rank_trace_of_durations_is_their_sum_by_hand)
{
#if NPUSIM_CHAKRA
    const char *dir = make_tmp();
    CU_ASSERT_PTR_NOT_NULL_FATAL(dir);
    /* 5 + 7 + 11 us, and a node of FLOPs only: tpu-pod's chip peaks at 128 x 128 PEs x 8
     * cores x 1.05 GHz x 2 FLOPs (bf16, 1 MAC per PE per cycle) = 275.2512 TFLOP/s, so
     * 1,101,004,800 FLOPs take 4 us */
    uint64_t us[] = {5, 7, 11, 0};
    int64_t ops[] = {0, 0, 0, 1101004800};
    int deps[] = {-1, 0, 0, 2};
    write_single_rank(dir, 4, us, ops, deps);
    arch_config cfg;
    np_err err = {0};
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tpu-pod", NULL, 0, &cfg, &err), NP_OK);
    chakra_replay_result r;
    CU_ASSERT_EQUAL_FATAL(chakra_replay(dir, &cfg, NULL, &r, &err), NP_OK);
    CU_ASSERT_EQUAL(r.ranks, 1);
    CU_ASSERT_EQUAL(r.timed_recorded, 3);
    CU_ASSERT_EQUAL(r.timed_roofline, 1);
    CU_ASSERT(llabs((long long)r.res->step_ps - 27000000LL) <= 1); /* 27 us */
    chakra_replay_result_free(&r);
    /* a kernel gap of 100 ns before each of the 4 kernels, durations scaled by 2: 2 x 23 + 4
     * (FLOPs are not scaled) + 0.4 us */
    const char *sets[] = {"chip.kernel_gap_ns=100"};
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tpu-pod", sets, 1, &cfg, &err), NP_OK);
    CU_ASSERT_EQUAL_FATAL(chakra_replay(dir, &cfg, &(chakra_replay_opts){.duration_scale = 2},
                                        &r, &err), NP_OK);
    CU_ASSERT(llabs((long long)r.res->step_ps - 50400000LL) <= 1);
    chakra_replay_result_free(&r);
    rm_tmp(dir);
#else
    CU_PASS("built without protobuf-c: no Chakra traces");
#endif
}
#if NPUSIM_CHAKRA

/* ---- malformed files ------------------------------------------------------------------------ */

static const uint8_t md_bytes[] = {0x07, 0x0a, 0x05, '0', '.', '0', '.', '4'};

static np_status check(const uint8_t *tail, size_t n, np_err *err)
{
    uint8_t buf[256];
    memcpy(buf, md_bytes, sizeof md_bytes);
    memcpy(buf + sizeof md_bytes, tail, n);
    uint64_t nodes;
    return chakra_check_bytes("x.0.et", buf, sizeof md_bytes + n, &nodes, err);
}

#endif

TEST(malformed_traces_are_refused_naming_the_file_and_the_node)
{
#if NPUSIM_CHAKRA
    np_err err = {0};
    /* node 0: id 1, type COMP; node 1: announces 9 bytes, has 2 */
    const uint8_t truncated[] = {0x04, 0x08, 0x01, 0x18, 0x04, 0x09, 0x08, 0x02};
    CU_ASSERT_EQUAL(check(truncated, sizeof truncated, &err), NP_ERR_FORMAT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "x.0.et: node 1: truncated"));
    const uint8_t varint[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
    CU_ASSERT_EQUAL(check(varint, sizeof varint, &err), NP_ERR_FORMAT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "node 0: bad varint"));
    /* node 0: id 1 depending on id 99 (data_deps, packed) */
    const uint8_t dangling[] = {0x07, 0x08, 0x01, 0x18, 0x04, 0x2a, 0x01, 0x63};
    CU_ASSERT_EQUAL(check(dangling, sizeof dangling, &err), NP_ERR_MISSING);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "x.0.et: node 0 (id 1): depends on id 99"));
    /* nodes 1 -> 2 -> 1 */
    const uint8_t cycle[] = {0x07, 0x08, 0x01, 0x18, 0x04, 0x2a, 0x01, 0x02,
                             0x07, 0x08, 0x02, 0x18, 0x04, 0x2a, 0x01, 0x01};
    CU_ASSERT_EQUAL(check(cycle, sizeof cycle, &err), NP_ERR_INCONSISTENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "cycle"));
    /* a field of wire type 7 (none) */
    const uint8_t junk[] = {0x02, 0x0f, 0x00};
    CU_ASSERT_EQUAL(check(junk, sizeof junk, &err), NP_ERR_FORMAT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "node 0: not a Chakra Node"));
    /* a collective without its group */
    const uint8_t nogroup[] = {0x04, 0x08, 0x01, 0x18, 0x07};
    CU_ASSERT_EQUAL(check(nogroup, sizeof nogroup, &err), NP_ERR_FORMAT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "node 0 (id 1): collective without"));
#else
    CU_PASS("built without protobuf-c: no Chakra traces");
#endif
}
#if NPUSIM_CHAKRA
#endif

/* ---- ASTRA-sim's configuration files ------------------------------------------------------- */

/* The values of `key: [ a, b, c ]` in network YAML text into v (at most 3); how many. */
static int yml_list(const char *yml, const char *key, double *v)
{
    const char *p = strstr(yml, key);
    if (!p || !(p = strchr(p, '[')))
        return 0;
    int n = 0;
    for (p++; n < 3;) {
        char *end;
        double x = strtod(p, &end);
        if (end == p)
            break;
        v[n++] = x;
        p = end;
        while (*p == ' ' || *p == ',')
            p++;
    }
    return n;
}

static void astra_net(const char *const *sets, size_t n_sets, uint32_t ranks, char *yml,
                      size_t n)
{
    arch_config cfg;
    np_err err = {0};
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tpu-pod", sets, n_sets, &cfg, &err), NP_OK);
    char why[160];
    CU_ASSERT_TRUE_FATAL(chakra_astra_network(&cfg, ranks, yml, n, why, sizeof why));
}

TEST(astra_network_gives_each_dimension_the_bundled_links_and_latency_npusim_simulates)
{
    char yml[1024];
    double bw[3], lat[3], cnt[3];
    /* ASTRA-sim reads its network's "GB/s" as 2^30 B/s (astra-network-analytical's
     * bw_GBps_to_Bpns): npusim's 1e9 B/s are 1e9 / 2^30 of them */
    const double gb = 1e9 / 1073741824.0;
    /* tpu-pod: 6 links of 50 GB/s, 500 ns. A ring of 8: 3 links to each of the 2 neighbours,
     * bundled into one of 150 GB/s each way (noc/net_topo.c), one hop of 500 ns */
    const char *ring[] = {"system.chips=8", "system.topology=ring", "system.torus_x=1",
                          "system.torus_y=1", "system.torus_z=1"};
    astra_net(ring, 5, 8, yml, sizeof yml);
    CU_ASSERT_PTR_NOT_NULL(strstr(yml, "topology: [ Ring ]"));
    CU_ASSERT_EQUAL(yml_list(yml, "npus_count", cnt), 1);
    CU_ASSERT_EQUAL(cnt[0], 8);
    CU_ASSERT_EQUAL(yml_list(yml, "bandwidth", bw), 1);
    CU_ASSERT_DOUBLE_EQUAL(bw[0], 150 * gb, 1e-9);
    CU_ASSERT_EQUAL(yml_list(yml, "latency", lat), 1);
    CU_ASSERT_DOUBLE_EQUAL(lat[0], 500, 1e-9);
    /* a 2 x 2 x 2 torus: 6 links over 3 dimensions x 2 directions, one link each: 50 GB/s */
    const char *torus[] = {"system.chips=8", "system.torus_x=2", "system.torus_y=2",
                           "system.torus_z=2"};
    astra_net(torus, 4, 8, yml, sizeof yml);
    CU_ASSERT_PTR_NOT_NULL(strstr(yml, "topology: [ Ring, Ring, Ring ]"));
    CU_ASSERT_EQUAL(yml_list(yml, "bandwidth", bw), 3);
    CU_ASSERT_EQUAL(yml_list(yml, "latency", lat), 3);
    for (int d = 0; d < 3; d++) {
        CU_ASSERT_DOUBLE_EQUAL(bw[d], 50 * gb, 1e-9);
        CU_ASSERT_DOUBLE_EQUAL(lat[d], 500, 1e-9);
    }
    /* a switch of 8: each chip's 6 links to the switch, 300 GB/s; ASTRA-sim counts two hops of
     * the given latency, npusim's route is 2 links + the switch: (2 x 500 + 300) / 2 = 650 ns */
    const char *sw[] = {"system.chips=8", "system.topology=switch", "system.torus_x=1",
                        "system.torus_y=1", "system.torus_z=1", "system.switch_latency_ns=300"};
    astra_net(sw, 6, 8, yml, sizeof yml);
    CU_ASSERT_PTR_NOT_NULL(strstr(yml, "topology: [ Switch ]"));
    CU_ASSERT_EQUAL(yml_list(yml, "bandwidth", bw), 1);
    CU_ASSERT_DOUBLE_EQUAL(bw[0], 300 * gb, 1e-9);
    CU_ASSERT_EQUAL(yml_list(yml, "latency", lat), 1);
    CU_ASSERT_DOUBLE_EQUAL(lat[0], 650, 1e-9);
    /* islands of 4 (as above) and a scale-out switch of 40 GB/s, 2,000 ns end to end: two
     * hops of 1,000 ns */
    const char *hier[] = {"system.chips=16", "system.topology=hierarchical",
                          "system.torus_x=1", "system.torus_y=1", "system.torus_z=1",
                          "system.island_chips=4", "system.switch_latency_ns=300",
                          "system.scaleout_gb_per_s=40", "system.scaleout_latency_ns=2000"};
    astra_net(hier, 9, 16, yml, sizeof yml);
    CU_ASSERT_PTR_NOT_NULL(strstr(yml, "topology: [ Switch, Switch ]"));
    CU_ASSERT_EQUAL(yml_list(yml, "npus_count", cnt), 2);
    CU_ASSERT_EQUAL(cnt[0], 4);
    CU_ASSERT_EQUAL(cnt[1], 4);
    CU_ASSERT_EQUAL(yml_list(yml, "bandwidth", bw), 2);
    CU_ASSERT_DOUBLE_EQUAL(bw[0], 300 * gb, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(bw[1], 40 * gb, 1e-9);
    CU_ASSERT_EQUAL(yml_list(yml, "latency", lat), 2);
    CU_ASSERT_DOUBLE_EQUAL(lat[0], 650, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(lat[1], 1000, 1e-9);
}

TEST(astra_system_runs_collectives_unchunked_without_endpoint_delay_one_per_stream)
{
#if NPUSIM_CHAKRA
    const char *dir = make_tmp();
    CU_ASSERT_PTR_NOT_NULL_FATAL(dir);
    np_err err = {0};
    arch_config cfg;
    nn_model_desc d;
    const char *torus[] = {"system.chips=8", "system.torus_x=2", "system.torus_y=2",
                           "system.torus_z=2"};
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tpu-pod", torus, 4, &cfg, &err), NP_OK);
    CU_ASSERT_EQUAL_FATAL(nn_model_load("gpt-tiny", &d, &err), NP_OK);
    run_job j = {.cfg = &cfg, .model = &d, .steps = 1, .optim = run_job_optim(),
                 .chakra_dir = dir, .chakra_name = "gpt-tiny"};
    nn_strategy_default(&j.s);
    j.s.dp = j.s.tp = j.s.pp = 2;
    j.s.microbatch = 2;
    j.o = (nn_model_opts){.batch = 8, .compute = NN_BF16, .seed = 1};
    run_report rep;
    CU_ASSERT_EQUAL_FATAL(run_job_run(&j, &rep, &err), NP_OK);
    char path[256];
    snprintf(path, sizeof path, "%s/system.json", dir);
    json_error_t je;
    json_t *sys = json_load_file(path, 0, &je);
    CU_ASSERT_PTR_NOT_NULL_FATAL(sys);
    /* npusim runs a collective as one message per step (no chunks: docs/collectives.md) with
     * nothing added to a message beyond its path (the raw protocol, tpu-pod's) */
    CU_ASSERT_EQUAL(cfg.system.coll_protocol, ARCH_COLL_PROTOCOL_RAW);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(sys, "preferred-dataset-splits")), 1);
    /* one collective at a time per stream, the streams side by side: a stage of GPT-tiny
     * dp 2 x tp 2 x pp 2 has 3 collective streams (docs/run.md: tp, with the pipeline's
     * scatter/gather; dp; pp, the tied embedding's all-reduce between the first and the last
     * stage), so 3 collectives (one chunk each) in flight */
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(sys, "active-chunks-per-dimension")), 3);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(sys, "endpoint-delay")), 0);
    /* one ring implementation per network dimension: Ring, Ring, Ring */
    CU_ASSERT_EQUAL(json_array_size(json_object_get(sys, "all-reduce-implementation")), 3);
    /* ASTRA-sim reduces s bytes in 3 s / local-mem-bw, npusim in s / (its vector units' rate):
     * bf16 (GPT-tiny's reduced bytes) on tpu-pod, 2 B x 256 lanes x 1 op x 1.05 GHz x 8 cores
     * = 4,300.8 GB/s, so 12,902.4 */
    CU_ASSERT_DOUBLE_EQUAL(json_number_value(json_object_get(sys, "local-mem-bw")), 12902.4,
                           1e-6);
    json_decref(sys);
    run_report_free(&rep);
    rm_tmp(dir);
#else
    CU_PASS("built without protobuf-c: no Chakra traces");
#endif
}
