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
 * cycles), or when the flits waiting in the source queues grew during the window by more than
 * 2% of the flits offered in it (and by more than one per node): the network accepts less
 * than it is offered, so queues grow without bound.
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
    /* (optional) an observer of the mesh (traces): called after every sample_every-th cycle's
     * step and after the last cycle, and with reset set just before the link counts are
     * cleared as the window opens (mesh_cycle(m) is the cycles done). It only reads. */
    void (*sample)(void *ctx, const mesh *m, bool reset);
    void *sample_ctx;
    uint64_t sample_every; /* cycles (>= 1 when sample is set) */
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

/* The highest offered rate (flits/node/cycle) at which the study p (its rate ignored) is not
 * saturated, by bisection on [0, 1] until the saturated bound is within `rel_tol` (e.g. 0.01)
 * of it — the way scripts/booksim_noc.sh finds BookSim's. *rate = 0 when even the lowest
 * rate tried saturates. Errors as noc_study_run. */
np_status noc_study_saturation(const noc_study_params *p, double rel_tol, double *rate,
                               np_err *err);

/* ---- reference figures (BookSim 2 runs, tests/data/noc/booksim_mesh.csv) --------------------
 *
 * The file scripts/booksim_noc.sh writes: '#' comment lines, among them the BookSim base
 * configuration ("#   key = value;"), then the header
 *   k,traffic,packet_flits,kind,offered,stable,accepted,packet_latency,network_latency,hops
 * and one row per BookSim run on a k x k mesh: kind "saturation" (offered = the highest stable
 * rate BookSim found) or "latency" (offered = a fraction of it). Traffic "hotspot" means the
 * four centre nodes (noc_ref_hotspots). */
typedef struct noc_ref_point {
    uint32_t k;                 /* k x k mesh */
    noc_traffic traffic;
    uint32_t packet_flits;
    bool saturation;            /* kind: the saturation rate (else a latency point) */
    double offered;             /* flits/node/cycle */
    bool stable;                /* BookSim's verdict; the figures below are 0 when not */
    double accepted, packet_latency, network_latency, hops;
} noc_ref_point;

typedef struct noc_ref {
    mesh_params mesh;           /* BookSim's router mapped onto ours (kx = ky = 0 here) */
    noc_ref_point *pts;
    size_t n;
    char commit[64];            /* "booksim commit: ..." from the comments */
} noc_ref;

/* Reads a reference file. The router of its base configuration must be one our mesh models
 * exactly (iq router, dor, islip allocators with one iteration, vc_alloc_delay =
 * sw_alloc_delay = 1, st_prepare_delay + st_final_delay = 1, private buffers): it becomes
 * ref->mesh with router_cycles = routing_delay + 2 and link_cycles = 2 (BookSim's channel of
 * latency 1 between registered router outputs and inputs). NP_ERR_IO; NP_ERR_SYNTAX for a
 * malformed row and NP_ERR_INCONSISTENT for a router we do not model, both at file:line;
 * NP_ERR_NOMEM. The caller frees with noc_ref_free (also after a failure). */
np_status noc_ref_load(const char *path, noc_ref *ref, np_err *err);
/* The same for a file's text[0..len) (NUL-terminated; split in place), errors naming path. A
 * file is read through base/readfile.h (at most 16 MiB, no directory or device); its
 * base-configuration integers go through base/parse.h in the ranges the mapping accepts. */
np_status noc_ref_parse(char *text, size_t len, const char *path, noc_ref *ref, np_err *err);
void noc_ref_free(noc_ref *ref);

/* The study that reproduces reference point pt at offered `rate` (its router, mesh, traffic,
 * packet size, seed 1; the four centre nodes as hotspots, written to hot): 2,000 warm-up
 * cycles and a window long enough for about 4,000 measured packets (12,000 above 0.6 of the
 * configuration's saturation rate, where queues make the mean noisier) and at least 6,000
 * cycles (20,000 for a saturation point: near saturation a permutation's busiest flows
 * saturate alone, and their queues need time to show it), measured packets allowed four
 * windows to drain. */
noc_study_params noc_ref_study(const noc_ref *ref, const noc_ref_point *pt, double rate,
                               uint32_t hot[4]);

/* The hotspot nodes of the reference's "hotspot" traffic on a k x k mesh (k >= 2 even): the
 * four centre nodes. Writes 4 nodes. */
void noc_ref_hotspots(uint32_t k, uint32_t out[4]);

#endif
