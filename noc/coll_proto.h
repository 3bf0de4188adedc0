/* coll_proto.h — what a protocol does to a collective's messages: NCCL's LL, LL128 and Simple
 * as the flow engine (coll.c) and the tuner (coll_tune.c) run them. One place defines them.
 *
 * A protocol changes four things, never the schedule (the messages, their order and deps):
 *
 *   base    a fixed cost per collective (kernel launch, setup: NCCL's baseLatencies), paid
 *           before its first message leaves;
 *   step    the least time from a message's last byte leaving its sender to its receive
 *           completing (the flag write and the receiver's poll: NCCL's hwLatencies per step,
 *           measured with the hop included, so the path latency counts toward it): a message
 *           completes at  sent + max(path latency, step); a message that crosses the
 *           scale-out network between islands takes the protocol's network step instead
 *           (NCCL's hwLatencies NET: the proxy's network send and receive), and within an
 *           island a collective that spans islands takes at least the network overhead a step
 *           (NCCL's getNetOverhead: the proxy posts every step's network operations);
 *   wire    the bytes a message puts on its links: LL sends 16-byte lines of 8 data bytes and
 *           8 flag bytes (NCCL's ncclLLFifoLine), LL128 128-byte lines of 120 data bytes and an
 *           8-byte flag (NCCL_LL128_LINESIZE, NCCL_LL128_DATAELEMS); Simple the payload alone;
 *   pace    LL's payload rate is at most max_bytes_per_s (the SMs polling line by line: NCCL's
 *           llMaxBws): a message whose path is faster is stretched to that rate.
 *
 * RAW is the ideal transfer (payload only, no base, step or pace): what every engine did
 * before protocols existed, and the default. Parameters come from cfg.system (coll_*_base_ns,
 * coll_*_step_ns, coll_*_net_step_ns, coll_ll_max_gb_per_s); docs/collectives.md, "Protocols",
 * gives the model and the sources of the presets' values.
 */
#ifndef NPUSIM_NOC_COLL_PROTO_H
#define NPUSIM_NOC_COLL_PROTO_H

#include <stdint.h>

#include "arch.h"
#include "err.h"

/* A collective's protocol. SYSTEM (0, what a zeroed coll_desc asks for) is cfg.system's
 * coll_protocol; AUTO is the tuner's choice. The rest follow arch_coll_protocol's order. */
typedef enum coll_proto {
    COLL_PROTO_SYSTEM,
    COLL_PROTO_RAW,
    COLL_PROTO_AUTO,
    COLL_PROTO_LL,
    COLL_PROTO_LL128,
    COLL_PROTO_SIMPLE,
    COLL_PROTO_COUNT
} coll_proto;

/* The protocol cfg.system.coll_protocol names. */
coll_proto coll_proto_of_arch(arch_coll_protocol p);

/* p with SYSTEM replaced by cfg's protocol (may be AUTO). */
coll_proto coll_proto_resolve(const arch_config *cfg, coll_proto p);

/* "raw", "auto", "ll", "ll128", "simple" (the spellings of system.coll_protocol); "system"
 * for SYSTEM; NULL out of range. */
const char *coll_proto_name(coll_proto p);

/* Parses a protocol name (case-insensitive); NP_ERR_UNKNOWN_KEY listing the valid names. */
np_status coll_proto_parse(const char *s, coll_proto *out, np_err *err);

/* A concrete protocol's parameters (RAW: all zero, lines of 1 data byte in 1 wire byte). */
typedef struct coll_proto_params {
    uint64_t base_ps;        /* per collective, before its first message */
    uint64_t step_ps;        /* least time from a message's last byte leaving to completion */
    uint64_t net_step_ps;    /* ... for a message over the scale-out network (step_ps when its
                                key is 0) */
    uint64_t span_step_ps;   /* ... for a message within an island of a collective whose group
                                spans islands: max(step_ps, the network overhead, x3 Simple) */
    uint32_t line_bytes;     /* wire bytes per line ... */
    uint32_t line_data;      /* ... of which payload */
    double max_bytes_per_s;  /* payload pace per message; 0: none */
} coll_proto_params;

/* The parameters of p (RAW, LL, LL128 or SIMPLE; anything else gives RAW's) from cfg.system. */
void coll_proto_params_of(const arch_config *cfg, coll_proto p, coll_proto_params *out);

/* The bytes a message of `payload` bytes puts on a route whose bottleneck moves
 * route_bytes_per_s (payload bytes per second): whole lines, then stretched so that at the
 * route's rate the payload goes no faster than max_bytes_per_s. payload 0: 0. */
uint64_t coll_proto_wire_bytes(const coll_proto_params *pp, uint64_t payload,
                               double route_bytes_per_s);

/* The wire bytes per payload byte of a large message on such a route (>= 1). */
double coll_proto_wire_factor(const coll_proto_params *pp, double route_bytes_per_s);

#endif
