/* kgen_coll.h — collectives lowered to ISA programs: one SPMD program that every rank of a
 * group of chips runs, on any one core of each, built through the emitter (isa/isa_emit.h)
 * from the collective's schedule (noc/coll_sched.h) — the ring is not written again here.
 *
 * The ring follows the topology as the flow engine's does (noc/coll_topo.h); the group the
 * program names, gG, lists the chips in ring order (ring[]: the group table entry a loader
 * needs), so a chip's rank in gG is its ring position, peers are peer(gG[rank+1], core) and
 * peer(gG[rank-1], core), and nothing in the text depends on which chip runs it.
 *
 * The buffer is the .bss symbol X at the same HBM address on every chip: p slots of q =
 * ceil(elements / p) elements (`slot_bytes`; a collective of `bytes` not divisible into p
 * slots is padded: elements past `bytes` are scratch). The collective's buffer is cut into p
 * segments of q elements, segment s the elements [s q, (s + 1) q), and each chip keeps them
 * rotated by its ring position k: slot j holds segment (k + j) mod p, so its own segment k is
 * in slot 0. Then every rank's schedule is the same in slots and relative peers (the lowering
 * checks that it is, op by op), which is what lets one text serve every rank:
 *
 *   all_reduce      every chip's X: the sum of all chips' buffers (rotated as they came)
 *   all_gather      chip at position k contributes segment k from slot 0; every chip ends
 *                   with every segment (slot j: the segment of position k + j)
 *   reduce_scatter  the chip at position k ends with the sum of segment k in slot 0
 *
 * The schedule's steps go one after the other in the COMM queue (a send, then the receive of
 * the same step, with `add` on arrival when it reduces), in runs whose slots step evenly
 * becoming one loop each: a handful of instructions at any rank count. On an idle network
 * the time is docs/collectives.md's alpha-beta cost with gamma one core's vector unit (plus
 * the few front-end cycles before the first send), as the flow engine gives on one core. */
#ifndef NPUSIM_KGEN_COLL_H
#define NPUSIM_KGEN_COLL_H

#include <stdbool.h>
#include <stdint.h>

#include "arch.h"
#include "err.h"
#include "isa.h"
#include "isa_prog.h"

typedef enum kgen_coll_op {
    KGEN_COLL_ALL_REDUCE,
    KGEN_COLL_ALL_GATHER,
    KGEN_COLL_REDUCE_SCATTER,
} kgen_coll_op;

typedef struct kgen_coll {
    kgen_coll_op op;
    const uint32_t *chips;  /* the group, distinct chips of cfg's system; NULL: chips 0 ..
                               ranks-1 */
    uint32_t ranks;         /* 2 .. system.chips */
    uint32_t core;          /* the core each chip runs it on */
    unsigned group;         /* the group id the program names (gG), 0 .. ISA_N_GROUPS-1 */
    uint64_t bytes;         /* the collective's buffer (whole elements of dtype) */
    isa_dtype dtype;        /* of the elements (and of the reduction: add) */
    bool rank_order;        /* ring in rank order, not fitted to the topology */
} kgen_coll;

typedef struct kgen_coll_prog {
    isa_program *prog;      /* the one program of every rank */
    uint32_t *ring;         /* the group's chips in ring order: gG's members, rank k = ring[k]
                               (malloc'd) */
    uint32_t ranks;
    unsigned group;
    uint64_t x_addr;        /* X's HBM address */
    uint64_t slot_bytes;    /* X is `ranks` slots of this many bytes */
} kgen_coll_prog;

/* Lowers c for cfg into *out (free with kgen_coll_prog_free). NP_ERR_RANGE: fewer than 2 or
 * more than system.chips ranks, a chip outside the system or twice, a core or group id the
 * chip or ISA does not have, a size that is not whole elements or does not fit the HBM, a slot
 * over the comm.* byte field; NP_ERR_INTERNAL when the schedule is not the same on every rank
 * (it always is for rings); NP_ERR_NOMEM. *out is zeroed on failure. */
np_status kgen_coll_build(const arch_config *cfg, const kgen_coll *c, kgen_coll_prog *out,
                          np_err *err);
void kgen_coll_prog_free(kgen_coll_prog *p);

/* A program for a chip that takes no part: core 0 halts. *out: the caller frees it. */
np_status kgen_coll_idle(const arch_config *cfg, isa_program **out, np_err *err);

/* The op's name as docs/collectives.md writes it ("all_reduce", ...). */
const char *kgen_coll_op_name(kgen_coll_op op);

#endif
