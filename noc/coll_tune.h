/* coll_tune.h — which algorithm a collective should use on this network at this size, like
 * NCCL's tuner: every algorithm the op has gets a cost model, evaluated on the actual
 * topology, and the cheapest wins (COLL_ALGO_AUTO).
 *
 * A model is the algorithm's alpha-beta-gamma cost (docs/collectives.md) with the alpha and
 * beta of each of its communication patterns measured on the network: the pattern's messages
 * (all ranks' sends of one step, on the ring order and levels coll_topo.h gives) are routed,
 * alpha is their largest path latency (for rings, the mean over the ring: a rank waits for
 * its predecessor only, so a slow hop is paid once a lap, not once a step), and beta is
 * max over links of (messages on the link / its bandwidth) — what max-min sharing gives the
 * slowest message. gamma is the chip's reduction rate (coll_reduce_ps). So a ring on a torus
 * it does not fit, a tree on a ring, recursive doubling across islands all pay for the links
 * they share. A protocol (coll_proto.h) adds its base cost once, makes every message's latency
 * at least its step, and multiplies beta by its wire bytes per payload byte (lines, pacing on
 * the pattern's fastest route); with protocol auto the tuner picks the protocol too (LL, LL128
 * or Simple), as NCCL's does. With system.coll_algos = nccl only the algorithms NCCL runs are
 * candidates.
 *
 * The tuner is a library function for the run engine, called for every collective of a step:
 * patterns are measured once per (group, algorithm) and every answer is memoised per
 * (op, group, bytes, element size, chunk, root), so repeated calls cost a hash lookup.
 *
 *   coll_tuner *t;
 *   coll_tuner_create(net, &cfg, &t, &err);
 *   coll_tune_query q = {.op = COLL_OP_ALL_REDUCE, .chips = grp, .ranks = 16, .bytes = 64 << 20};
 *   coll_algo a;
 *   double ps;
 *   coll_tune(t, &q, &a, &ps, &err);   // a == COLL_ALGO_HIER on a100-cluster's islands
 *   coll_tuner_free(t);
 */
#ifndef NPUSIM_NOC_COLL_TUNE_H
#define NPUSIM_NOC_COLL_TUNE_H

#include <stdint.h>

#include "arch.h"
#include "coll_proto.h"
#include "coll_sched.h"
#include "err.h"
#include "net.h"

typedef struct coll_tuner coll_tuner;

typedef struct coll_tune_query {
    coll_op op;
    const uint32_t *chips;  /* the group in rank order; NULL: chips 0 .. ranks-1 */
    uint32_t ranks;
    uint64_t bytes;         /* as coll.h defines per op */
    uint32_t elem_bytes;    /* 0: 4 */
    uint64_t chunk_bytes;   /* 0: none */
    uint32_t root;
    coll_proto proto;       /* SYSTEM (0): the system's coll_protocol; AUTO: choose it */
    uint32_t channels;      /* rings side by side across islands (coll.h); 0: the system's */
} coll_tune_query;

/* What the tuner chose and the modelled time. */
typedef struct coll_tune_pick {
    coll_algo algo;         /* never AUTO */
    coll_proto proto;       /* never SYSTEM or AUTO */
    double t_ps;
} coll_tune_pick;

/* A tuner for network n (borrowed: it must outlive the tuner) and the reduction rate of cfg
 * (copied). NP_ERR_NOMEM. */
np_status coll_tuner_create(net *n, const arch_config *cfg, coll_tuner **out, np_err *err);
void coll_tuner_free(coll_tuner *t);

/* The algorithm with the least modelled time for q on the network, and that time (ps, may
 * be NULL). NP_ERR_RANGE for a group that is not distinct chips of the network or has no
 * ranks, NP_ERR_NOMEM. */
np_status coll_tune(coll_tuner *t, const coll_tune_query *q, coll_algo *algo, double *t_ps,
                    np_err *err);

/* The (algorithm, protocol) with the least modelled time for q: algo fixed or AUTO (among the
 * candidates of system.coll_algos), q->proto fixed, SYSTEM or AUTO (LL, LL128 or Simple).
 * Errors as coll_tune, and NP_ERR_INCONSISTENT for a fixed algorithm the op lacks or the group
 * does not fit. */
np_status coll_tune_choose(coll_tuner *t, const coll_tune_query *q, coll_algo algo,
                           coll_tune_pick *out, np_err *err);

/* The modelled time (ps) of one algorithm for q (with q->proto; AUTO: its best protocol).
 * NP_ERR_INCONSISTENT when the op lacks the algorithm or the group does not fit it (recursive
 * halving/doubling on a group that is not a power of two); errors as coll_tune. */
np_status coll_tune_cost(coll_tuner *t, const coll_tune_query *q, coll_algo algo,
                         double *t_ps, np_err *err);

/* Answers computed / taken from the memo so far (for tests and benches). */
void coll_tuner_stats(const coll_tuner *t, uint64_t *computed, uint64_t *memoised);

#endif
