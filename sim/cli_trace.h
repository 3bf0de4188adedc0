/* cli_trace.h — the commands' traces of core-model runs (`npusim sim --trace`, `npusim layer
 * --trace`): core_trace_insn events (hw-model/core.h) written with traces/trace.h.
 *
 * Process "chip N" per chip; per core the threads coreN.dma (coreN.dma[k] for the k-th copy
 * in flight), coreN.mxu, coreN.vpu, coreN.comm and "coreN kernels"; a slice per instruction
 * named by its mnemonic with args {pc, insn, kernel}. Every time is shifted by offset_ps, so
 * several runs can follow each other in one trace (npusim layer: one run per layer). */
#ifndef NPUSIM_CLI_TRACE_H
#define NPUSIM_CLI_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core.h"
#include "err.h"
#include "trace.h"

typedef struct cli_trace {
    trace_writer *w;    /* NULL: no trace */
    uint64_t offset_ps; /* added to every time */
    uint64_t *seen;     /* (pid, tid) already named: open addressing on (pid << 32 | tid) + 1 */
    size_t cap, n;
    bool oom;
} cli_trace;

/* Opens path (gzip when it ends in .gz); *t zeroed first. */
np_status cli_trace_open(cli_trace *t, const char *path, np_err *err);

/* core_sim_opts.trace: one instruction (ctx: the cli_trace). */
void cli_trace_insn(void *ctx, const core_trace_insn *in);

/* The kernels of a finished run (r may be NULL). */
void cli_trace_kernels(cli_trace *t, const core_report *r);

/* A slice on a thread of its own (named thread, tid `tid` of process pid). */
void cli_trace_span(cli_trace *t, uint32_t pid, uint32_t tid, const char *thread,
                    const char *name, const char *cat, uint64_t start_ps, uint64_t dur_ps);

/* Closes the trace (see trace_close) and frees the rest. */
np_status cli_trace_close(cli_trace *t, np_err *err);

#endif
