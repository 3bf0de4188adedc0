/* cli_trace_coll.h — the trace of `npusim collective`'s flow engine (noc/coll.h): a
 * coll_observer that tells the trace layout (traces/trace_layout.h, docs/traces.md) what every
 * message of a collective did, in the names `npusim trace stats` reads.
 *
 * Per collective run, on every rank's chip:
 *   - a span on track "collectives" named by the op, category "collective", args bytes and
 *     algo, from the collective's start to the rank's last send leaving or receive
 *     completing; the spans of one collective on every rank are joined by a flow ("coll");
 *   - at --trace-level insn, per message: a slice "send" on thread chip.send (lane = the
 *     sender's port, one message after the other) from its start until its last byte left,
 *     and a slice on thread chip.recv at the receiver, "reduce" over its reduction or a
 *     zero-length "recv" at its arrival, category "comm", args bytes; the two are joined by a
 *     flow ("msg"). Ports beyond the 32 lanes of a thread get no message slices.
 * Counters: the sender's "c2c.send" and a bandwidth counter per network link on the system
 * process (named as noc/ names links: "chip0->chip1"), each message's bytes spread over its
 * [start, last byte left) — at every level.
 *
 * The observer keeps the messages in flight (their start) and a time per chip: memory is
 * what is in flight, not what has run. */
#ifndef NPUSIM_CLI_TRACE_COLL_H
#define NPUSIM_CLI_TRACE_COLL_H

#include <stdint.h>

#include "coll.h"
#include "err.h"
#include "trace_layout.h"
#include "trace_sink.h"

typedef struct cli_trace_coll cli_trace_coll;

/* An observer of collectives on network n writing into sink at level (both outlive it).
 * NP_ERR_NOMEM. */
np_status cli_trace_coll_create(net *n, trace_sink sink, trace_level level,
                                cli_trace_coll **out, np_err *err);

/* The observer to put into coll_desc.obs for the next collective. */
const coll_observer *cli_trace_coll_observer(cli_trace_coll *t);

/* The collective r ran on chips (NULL: 0 .. ranks-1) with the observer: its spans per rank,
 * then the end of the run (the counters go out). */
void cli_trace_coll_done(cli_trace_coll *t, const coll_result *r, const uint32_t *chips);

/* NP_ERR_NOMEM when a table could not grow (messages were dropped then). */
np_status cli_trace_coll_status(const cli_trace_coll *t, np_err *err);
void cli_trace_coll_free(cli_trace_coll *t);

#endif
