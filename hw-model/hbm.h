/* hbm.h — a shared bandwidth server: the chip's off-chip memory, and (with latency 0) each
 * core's scratchpad ports.
 *
 * Every transfer first waits the access latency, then joins the set of active transfers that
 * share the peak bandwidth max-min fairly: each moves at min(cap, its fair share) bytes per
 * ps, where cap is the transfer's own limit, and what capped transfers leave is shared
 * equally by the others. Whenever a transfer joins or leaves, the others' remaining bytes are
 * brought up to date and the next completion is rescheduled, so a lone transfer of B bytes
 * takes exactly latency + B / min(cap, bw), and n equal concurrent ones n times the
 * bandwidth term. Completions fall on whole ps (rounded up); the bandwidth a finishing
 * transfer did not need in that last fraction goes to the others, so a busy server moves
 * exactly its peak (n copies back to back end at latency + total bytes / bw). Channels interleave every transfer (addresses spread over all of them), so
 * one transfer can reach the whole bandwidth; the channel count does not change timing here.
 *
 *   state of one transfer:   LATENCY --hbm_join--> STREAMING --hbm_finish--> (done callback)
 */
#ifndef NPUSIM_HBM_H
#define NPUSIM_HBM_H

#include <stdint.h>

#include "err.h"
#include "evq.h"

typedef struct hbm hbm;

/* Called when a transfer has moved its last byte (at evq_now). */
typedef void (*hbm_done_fn)(void *ctx, uint64_t arg);

/* A memory of bw_bytes_per_ps (> 0) peak bandwidth and lat_ps access latency on queue q.
 * NP_ERR_NOMEM / NP_ERR_RANGE; *out is NULL on failure. */
np_status hbm_create(evq *q, double bw_bytes_per_ps, uint64_t lat_ps, hbm **out, np_err *err);
void hbm_free(hbm *h);

/* Starts a transfer of bytes (>= 1) limited to cap_bytes_per_ps (> 0); done(ctx, arg) runs
 * when it completes. NP_ERR_NOMEM. */
np_status hbm_transfer(hbm *h, uint64_t bytes, double cap_bytes_per_ps, hbm_done_fn done,
                       void *ctx, uint64_t arg, np_err *err);

/* Transfers in flight (latency or streaming). */
uint64_t hbm_active(const hbm *h);

/* The first error an event callback met (events cannot return one), or NP_OK. */
np_status hbm_error(const hbm *h, np_err *err);

#endif
