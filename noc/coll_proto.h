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

#include <stdbool.h>
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
    bool serial;             /* NCCL's kernel pipeline with Simple (coll_pipe_*): a sender's
                                next message within an island leaves no sooner than its step
                                less its path latency after its last byte left (the thread
                                block fences and posts each slice before its next) */
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

/* NCCL's kernel pipeline (system.coll_pipeline; docs/collectives.md, "NCCL's kernel
 * pipeline"), from NCCL's own constants (src/include/device.h, collectives.h, comm.h,
 * src/init.cc, src/enqueue.cc at 5067397c):
 *
 *   channels  a ring collective of `bytes` (nccl-tests' size: NCCL's nBytes of all-reduce,
 *             all-gather and reduce-scatter) runs on `max` channels, one fewer while
 *             bytes < channels x threads x threshold (NCCL's topoGetAlgoInfo): Simple 512
 *             threads x 64 B, LL128 640 x 8 B, LL 512 x 8 B x ranks; at least 1. RAW: max.
 *   slices    each rank's segment of `seg` bytes on one channel (a ring step's message) moves
 *             as the protocol's slices, each its own message: Simple in loops of chunks of
 *             four of NCCL_STEPS = 8 steps of its 4 MiB buffer (2 MiB), each chunk two slices
 *             of half the chunk but at least 32 KiB (a chunk of up to 32 KiB is one); LL one
 *             FIFO step of data per slice (32 KiB: 512 threads x 8 lines of 16 bytes, half of
 *             them flags); LL128 one step (614,400 wire bytes: 576,000 of data). RAW, and a
 *             segment of 0 bytes: 1. */
uint32_t coll_pipe_channels(coll_proto p, uint64_t bytes, uint32_t ranks, uint32_t max);
uint64_t coll_pipe_slices(coll_proto p, uint64_t seg);

/* The chunk (bytes, whole elements of elem) that cuts a ring's messages with NCCL's pipeline,
 * for `bytes` over `ranks` (each rank's segment bytes / ranks, the largest): over islands,
 * `lanes` rings side by side (> 0), each a channel, in the slices of its part of a segment;
 * within one island (lanes 0), NCCL's channels (`channels`; 0: cfg's coll_island_channels,
 * fewer for small messages, coll_pipe_channels), which move in step over the same links, so
 * a message carries every channel's slice: the segment in the slices of a channel's part.
 * 0 (no chunking) when that is one slice. */
uint64_t coll_pipe_chunk(const arch_config *cfg, coll_proto p, uint64_t bytes, uint32_t ranks,
                         uint32_t elem, uint32_t lanes, uint32_t channels);

/* NCCL's NVLS chunk (bytes per rank and loop) for an all-reduce of `bytes` on `channels`
 * channels of `ranks` heads (src/enqueue.cc calcCollChunking, one node: NCCL_NVLS_CHUNKSIZE
 * 128 KiB; each channel's part of n bytes takes 64 KiB when n < 64 x ranks x the chunk, 32 KiB
 * when n < 8 x ranks x the chunk, 16 KiB when n < 2 x ranks x the chunk). */
uint64_t coll_pipe_nvls_chunk(uint64_t bytes, uint32_t ranks, uint32_t channels);

#endif
