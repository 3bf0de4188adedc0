/* coll_isa.h — one collective lowered to ISA programs (compiler/kgen_coll.h: one SPMD text
 * for every rank of its group) and run on the core model by every chip of the network, the
 * chips outside the group idle: what `npusim collective --isa` times beside the flow engine. */
#ifndef NPUSIM_SIM_COLL_ISA_H
#define NPUSIM_SIM_COLL_ISA_H

#include "arch.h"
#include "coll.h"
#include "core.h"
#include "err.h"
#include "kgen_coll.h"

/* Runs kc on cfg's system (cfg.system is the network: net_params_to_arch makes it any
 * net_params'). *r: the ring, kc's ranks and bytes, the run's end time (t_start_ps 0) and
 * the chip-to-chip bytes. trace (may be NULL) is called with trace_ctx as each instruction
 * completes. report (may be NULL) receives the core model's report, which the caller frees
 * with core_report_free. Errors: the generator's, the core model's, NP_ERR_NOMEM. */
np_status coll_isa_run(const arch_config *cfg, const kgen_coll *kc, core_trace_fn trace,
                       void *trace_ctx, coll_result *r, core_report **report, np_err *err);

#endif
