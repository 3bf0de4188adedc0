/* traffic.h — synthetic-traffic studies of the mesh, as BookSim 2 runs them.
 *
 * Patterns (BookSim's traffic.cpp definitions, on a kx x ky mesh of n nodes):
 *   uniform    each packet to a node drawn uniformly from all n nodes (the source included)
 *   transpose  (x, y) -> (y, x); needs a square mesh
 *   bitcomp    node i -> ~i & (n - 1); needs n a power of two
 *   hotspot    each packet to one of the hotspot nodes, drawn uniformly (default: the node
 *              nearest the centre)
 *   neighbor   (x, y) -> ((x + 1) mod kx, (y + 1) mod ky)
 * Injection is Bernoulli: every cycle, each node creates a packet of F flits with probability
 * rate / F, so `rate` is offered flits per node per cycle (BookSim's
 * injection_rate_uses_flits = 1).
 *
 * Measurement (BookSim's latency mode with one sample period): `warmup` cycles of traffic,
 * then a window of `measure` cycles; packets created in the window are measured; traffic
 * continues while the measured packets drain (at most `drain_max` cycles). Packet latency
 * runs from creation, source queueing included; network latency from the head flit's
 * injection; both end when the tail arrives. Accepted throughput is the flits delivered
 * during the window per node per cycle.
 *
 * Saturation: a row is saturated when the measured packets did not all drain within
 * drain_max, when the average packet latency exceeds latency_thres (BookSim's default, 500
 * cycles), or when accepted throughput falls below 95% of the offered rate.
 */
#ifndef NPUSIM_NOC_TRAFFIC_H
#define NPUSIM_NOC_TRAFFIC_H

#include <stdbool.h>
#include <stdint.h>

#include "err.h"
#include "mesh.h"

typedef enum noc_traffic {
    NOC_TRAFFIC_UNIFORM,
    NOC_TRAFFIC_TRANSPOSE,
    NOC_TRAFFIC_BITCOMP,
    NOC_TRAFFIC_HOTSPOT,
    NOC_TRAFFIC_NEIGHBOR,
    NOC_TRAFFIC_COUNT
} noc_traffic;

/* "uniform", ...; NULL out of range. */
const char *noc_traffic_name(noc_traffic t);
/* The pattern called name: NP_ERR_UNKNOWN_KEY listing the names otherwise. */
np_status noc_traffic_parse(const char *name, noc_traffic *out, np_err *err);

/* The destination of a packet from src under pattern t (random draws from r where needed).
 * Checks nothing; noc_study_run checks the pattern fits the mesh. */
struct rng;
uint32_t noc_traffic_dest(noc_traffic t, const mesh_params *p, uint32_t src,
                          const uint32_t *hotspots, uint32_t n_hotspots, struct rng *r);

typedef struct noc_study_params {
    mesh_params mesh;
    noc_traffic traffic;
    double rate;            /* offered flits per node per cycle, 0 .. 1 */
    uint32_t packet_flits;  /* F >= 1 */
    uint64_t warmup;        /* cycles */
    uint64_t measure;       /* cycles (>= 1) */
    uint64_t drain_max;     /* cycles allowed for measured packets to drain */
    double latency_thres;   /* cycles; 0: 500 */
    uint64_t seed;
    const uint32_t *hotspots; /* NULL: the centre node */
    uint32_t n_hotspots;
} noc_study_params;

typedef struct noc_study_result {
    double offered_rate;        /* flits/node/cycle actually created in the window */
    double accepted_rate;       /* flits/node/cycle delivered in the window */
    double avg_packet_latency;  /* cycles, from creation */
    double avg_network_latency; /* cycles, from injection */
    double p50_packet_latency, p99_packet_latency;
    double avg_hops;
    double zero_load_latency;   /* the formula averaged over the measured packets */
    uint64_t packets_measured, packets_unfinished;
    double max_link_util;       /* busiest router-to-router link, flits/cycle in the window */
    uint64_t cycles;            /* simulated in all */
    bool saturated;
    bool conserved;             /* mesh_verify passed at the end */
} noc_study_result;

/* Runs one study. NP_ERR_RANGE / NP_ERR_INCONSISTENT for bad parameters (a pattern that does
 * not fit the mesh, rate outside [0, 1]), NP_ERR_NOMEM, NP_ERR_INTERNAL when the flit
 * conservation check fails. */
np_status noc_study_run(const noc_study_params *p, noc_study_result *res, np_err *err);

#endif
