/* chakra_impl.h — what sim/chakra_decode.c and sim/chakra_import.c share (not a public API):
 * a rank's trace file decoded through protobuf-c into nodes, and its dependencies resolved. */
#ifndef NPUSIM_SIM_CHAKRA_IMPL_H
#define NPUSIM_SIM_CHAKRA_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include "arch.h"
#include "coll_sched.h"
#include "err.h"
#include "et_def.pb-c.h"

#define CI_FILE_MAX ((size_t)1 << 30) /* a rank's trace: at most 1 GiB */
#define CI_NODES_MAX (1u << 26)       /* nodes of one rank */
#define CI_GROUPS_MAX 65536           /* communicator groups */

enum { CI_EXACT, CI_RECORDED, CI_ROOFLINE }; /* how a compute node is costed */

/* One node as the replay needs it. */
typedef struct ci_node {
    uint64_t id;
    int type;             /* ChakraProtoMsg__NodeType */
    uint64_t ps;          /* compute: its duration */
    int how;              /* compute: CI_* */
    double flops;
    bool launch;
    int32_t stream;       /* -1: not given */
    const char *comm;     /* npusim_comm (into the message), NULL: not given */
    int64_t comm_type;
    int64_t size;
    uint64_t npusim_bytes; /* collective: npusim's size when comm_size x ranks is not (0: none) */
    uint32_t elem_bytes;  /* 0: the engine's default */
    int algo;             /* coll_algo */
    const char *pg;       /* into the message */
    int32_t src, dst, tag, root;
    uint32_t dep_off, n_deps; /* into the rank's deps: node ids, after ci_resolve node indices */
} ci_node;

/* One rank's trace. */
typedef struct ci_rank {
    ProtobufCMessage **msgs; /* the decoded messages (the nodes' strings point into them) */
    uint32_t n_msgs;
    ci_node *nodes;
    uint32_t n;
    uint64_t *deps;
    uint64_t n_deps;
    int64_t chip;            /* GlobalMetadata's npusim_chip, -1: not given */
} ci_rank;

/* How compute nodes are costed: recorded durations x scale, else (or with roofline, whenever
 * the node has num_ops or tensor_size) cfg's roofline. */
typedef struct ci_cost {
    const arch_config *cfg;
    double scale;
    bool roofline;
} ci_cost;

/* Decodes buf (the file path, for messages) into *k (zeroed first by the caller; free with
 * ci_rank_free even on failure). NP_ERR_FORMAT / NP_ERR_RANGE / NP_ERR_MISSING /
 * NP_ERR_UNKNOWN_KEY naming path and the node, NP_ERR_NOMEM. */
np_status ci_decode(const ci_cost *c, const char *path, const uint8_t *buf, size_t n,
                    ci_rank *k, np_err *err);
void ci_rank_free(ci_rank *k);

/* Turns k's dependencies from ids into node indices and gives the order to issue the nodes in
 * (*order: k->n indices, the caller frees): file order when every dependency is an earlier
 * node, else Kahn's. NP_ERR_MISSING (a dependency on no node), NP_ERR_DUPLICATE (an id twice),
 * NP_ERR_INCONSISTENT (a cycle), naming path and the node. */
np_status ci_resolve(const char *path, ci_rank *k, uint32_t **order, np_err *err);

/* npusim's collective of Chakra's CollectiveCommType t; COLL_OP_COUNT when none. */
coll_op ci_coll_op(int64_t t);

#endif
