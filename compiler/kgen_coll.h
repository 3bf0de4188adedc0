/* kgen_coll.h — collectives lowered to ISA programs: one program per chip, comm.send and
 * comm.recv (with the reduction on arrival) on core 0 of each chip.
 *
 * The buffer is the .bss symbol X (`bytes` bytes of `dtype`, at the same HBM address on every
 * chip). The ring schedules are those of docs/collectives.md: ranks are chips 0 .. p-1 in
 * order, rank v sends to v + 1 and receives from v - 1 (mod p); the buffer is cut into p
 * segments of whole elements (the remainder spread over the first ones). With an offset o,
 *
 *   reduce-scatter steps g = 0 .. p-2: send segment (v + o - g) mod p, receive segment
 *                  (v + o - g - 1) mod p and add it into X; rank v ends with the sum of
 *                  segment (v + o + 1) mod p
 *   all-gather     steps k = 0 .. p-2: send segment (v + o - k) mod p, receive segment
 *                  (v + o - k - 1) mod p into X; rank v starts with segment (v + o) mod p
 *
 *   reduce_scatter  o = -1: rank v ends with the sum of segment v (as NCCL)
 *   all_gather      o = 0: rank v contributes segment v
 *   all_reduce      reduce-scatter with o = 0, then all-gather with o = 1 (the segment each
 *                   rank has summed): every rank ends with the whole sum
 *
 * The messages read and write X in HBM directly (the COMM engine moves HBM bytes), one step
 * after the other in the COMM queue: a send retires when delivered, the receive of a step
 * (and its reduction) retires before the next step's send, so on an idle network the time
 * is docs/collectives.md's alpha-beta cost with gamma the reduction rate of one core's vector
 * unit. Empty segments (fewer elements than ranks) send nothing. */
#ifndef NPUSIM_KGEN_COLL_H
#define NPUSIM_KGEN_COLL_H

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
    uint32_t chips;  /* ranks: chips 0 .. chips-1 (2 .. system.chips) */
    uint64_t bytes;  /* the buffer X on every chip (whole elements) */
    isa_dtype dtype; /* of the elements (and of the reduction: add) */
} kgen_coll;

/* The programs, progs[i] for chip i (an array of chips programs, malloc'd; free each with
 * isa_program_free and the array with free), and with texts non-NULL their assembly (each
 * malloc'd, the array too). NP_ERR_RANGE: fewer than 2 or more than system.chips chips, a
 * size that is not whole elements or does not fit the HBM, a segment over the comm.* byte
 * field, more steps than tags; NP_ERR_NOMEM. Nothing is returned on failure. */
np_status kgen_coll_build(const arch_config *cfg, const kgen_coll *c, isa_program ***progs,
                          char ***texts, np_err *err);

/* The op's name as docs/collectives.md writes it ("all_reduce", ...). */
const char *kgen_coll_op_name(kgen_coll_op op);

#endif
