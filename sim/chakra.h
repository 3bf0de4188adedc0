/* chakra.h — Chakra execution traces (MLCommons' et_def.proto, sim/schema/) out of a run and
 * into the run engine, and ASTRA-sim's configuration files for the same architecture
 * (docs/interop.md, "Chakra execution traces and ASTRA-sim").
 *
 * File layout, as Chakra's tools (protolib's encodeMessage) and ASTRA-sim's feeder read it:
 * DIR/<name>.<rank>.et holds one GlobalMetadata message then one Node message per task, each
 * preceded by its length as a varint (no magic number, no compression); the communicator groups
 * are DIR/<name>.comm_group.json ({"1": [ranks], ...}: the keys are the collectives' pg_name).
 *
 * What a node carries (attributes as ASTRA-sim's feeder reads them, npusim's own prefixed
 * npusim_, ignored by other readers):
 *   compute: COMP_NODE, duration_micros (rounded), num_ops (int64: hardware FLOPs), tensor_size
 *            (uint64: HBM bytes), is_cpu_op false; npusim_duration_ps (uint64: exact, without
 *            the launch gap the engine adds), npusim_launch (bool: waits the host's launch)
 *   collective: COMM_COLL_NODE, comm_type (int64: CollectiveCommType), comm_size (int64:
 *            bytes of a rank's input: nccl-tests sizes, but an all-gather's or gather's output
 *            over the ranks, as Chakra's converter and ASTRA-sim take it), pg_name (string: the
 *            group's key), npusim_root (int32), npusim_bytes (uint64: npusim's size of an
 *            all-gather or gather whose output does not divide evenly)
 *   send / recv: COMM_SEND_NODE / COMM_RECV_NODE, comm_src, comm_dst, comm_tag (int32),
 *            comm_size (int64)
 *   every communication node: npusim_stream (int32: the rank's stream), npusim_comm (string:
 *            tp, dp, pp, ...)
 *   data_deps: the task graph's dependencies plus the previous task of the same engine (the
 *            compute engine and each stream run their tasks in issue order; a reader that
 *            knows no streams keeps that order through the dependencies). Node ids are the
 *            rank's task ids (0, 1, ... in issue order).
 */
#ifndef NPUSIM_SIM_CHAKRA_H
#define NPUSIM_SIM_CHAKRA_H

#include <stdbool.h>
#include <stdint.h>

#include "arch.h"
#include "err.h"
#include "run_engine.h"
#include "run_plan.h"

/* ---- Export --------------------------------------------------------------------------------- */

/* Records what the run engine did that the trace needs (each compute task's duration in the
 * first step, per class), forwarding every call to inner (may be NULL: a trace writer). */
typedef struct chakra_rec chakra_rec;

np_status chakra_rec_create(const run_plan *rp, const run_observer *inner, chakra_rec **out,
                            np_err *err);
const run_observer *chakra_rec_observer(chakra_rec *r);
void chakra_rec_free(chakra_rec *r);

typedef struct chakra_export_info {
    uint32_t ranks;
    uint64_t nodes;        /* over every rank */
    bool astra;            /* the ASTRA-sim files were written */
    char astra_why[160];   /* else why not (the topology has no ASTRA-sim form) */
} chakra_export_info;

/* Writes the trace of the run recorded by rec (rp's graph, after run_simulate) into dir
 * (created when missing): <name>.<rank>.et per rank, <name>.comm_group.json, and ASTRA-sim's
 * system.json, network.yml and remote_memory.json when cfg's topology maps onto ASTRA-sim's
 * analytical network (chakra_astra_network). NP_ERR_IO naming the file, NP_ERR_NOMEM. */
np_status chakra_export(const chakra_rec *rec, const run_plan *rp, const arch_config *cfg,
                        const char *dir, const char *name, chakra_export_info *info,
                        np_err *err);

/* ASTRA-sim's analytical network for cfg's chip network carrying `ranks` ranks on chips
 * 0 .. ranks-1, as YAML text into buf (topology, npus_count, bandwidth in GB/s, latency in ns
 * per dimension): true, or false with why (a topology ASTRA-sim's analytical backend has no
 * form for, or a run on fewer chips than the network has). */
bool chakra_astra_network(const arch_config *cfg, uint32_t ranks, char *buf, size_t n,
                          char *why, size_t nwhy);

/* ---- Import and replay ---------------------------------------------------------------------- */

typedef struct chakra_replay_opts {
    double duration_scale; /* recorded durations (npusim_duration_ps, duration_micros) x this
                              (0: 1) */
    bool roofline;         /* cost every compute node with num_ops or tensor_size on cfg's
                              roofline, not by its recorded duration (another chip's) */
    uint32_t max_ranks;    /* 0: 4096 */
} chakra_replay_opts;

typedef struct chakra_replay_result {
    uint32_t ranks;
    uint64_t nodes, compute, colls, sends, recvs;
    uint64_t timed_exact, timed_recorded, timed_roofline; /* how each compute node was costed */
    run_result *res;       /* the engine's result (owned: chakra_replay_result_free) */
} chakra_replay_result;

/* Reads every <name>.<rank>.et of dir (ranks 0 .. n-1 without gaps, one name) and its
 * <name>.comm_group.json, builds one class per rank (compute nodes on the compute engine in
 * node order; collectives, sends and recvs on npusim's streams: npusim_stream, else one per
 * pg_name / direction) and simulates one step on cfg. Compute nodes cost npusim_duration_ps,
 * else duration_micros, times the scale, else (or with o->roofline) num_ops and tensor_size on
 * cfg's chip roofline.
 * Errors name the file and the node index: NP_ERR_FORMAT (truncated, bad varint, not a
 * Chakra message), NP_ERR_MISSING (a dependency on no node, an unknown group),
 * NP_ERR_INCONSISTENT (a cycle, collectives that do not match), NP_ERR_RANGE (sizes), NP_ERR_IO;
 * the engine's NP_ERR_DEADLOCK. */
np_status chakra_replay(const char *dir, const arch_config *cfg, const chakra_replay_opts *o,
                        chakra_replay_result *out, np_err *err);
void chakra_replay_result_free(chakra_replay_result *r);

/* Decodes one .et file's bytes (for tests and the fuzz harness): the number of nodes, or an
 * error naming path and the node. */
np_status chakra_check_bytes(const char *path, const uint8_t *buf, size_t n, uint64_t *nodes,
                             np_err *err);

#endif
