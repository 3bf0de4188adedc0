/* cli_trace.c — core-model runs as Chrome/Perfetto traces for the commands (see cli_trace.h). */
#include "cli_trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CLI_TID_PER_CORE 32 /* tids of core c: 32c + DMA lane (0..15), MXU 16, VPU 17, COMM 18,
                               kernels 19 */

static uint32_t cli_tid(uint32_t core, isa_unit u, unsigned lane)
{
    unsigned k = u == ISA_UNIT_DMA ? lane : u == ISA_UNIT_MXU ? 16 : u == ISA_UNIT_VPU ? 17 : 18;
    return core * CLI_TID_PER_CORE + k;
}

static size_t slot_of(uint64_t key, size_t cap)
{
    return (size_t)(key * 0x9e3779b97f4a7c15ull >> 17) & (cap - 1);
}

/* Whether (pid, tid) is new; adds it. */
static bool first_sight(cli_trace *t, uint32_t pid, uint32_t tid)
{
    if (2 * (t->n + 1) > t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 256;
        uint64_t *v = calloc(cap, sizeof *v);
        if (!v) {
            t->oom = true;
            return false;
        }
        for (size_t i = 0; i < t->cap; i++) {
            if (!t->seen[i])
                continue;
            size_t j = slot_of(t->seen[i], cap);
            while (v[j])
                j = (j + 1) & (cap - 1);
            v[j] = t->seen[i];
        }
        free(t->seen);
        t->seen = v, t->cap = cap;
    }
    uint64_t key = ((uint64_t)pid << 32 | tid) + 1;
    size_t j = slot_of(key, t->cap);
    while (t->seen[j] && t->seen[j] != key)
        j = (j + 1) & (t->cap - 1);
    if (t->seen[j])
        return false;
    t->seen[j] = key;
    t->n++;
    return true;
}

/* Names process pid and thread tid the first time they appear. */
static void name_once(cli_trace *t, uint32_t pid, uint32_t tid, const char *thread)
{
    if (first_sight(t, pid, UINT32_MAX)) {
        char buf[32];
        snprintf(buf, sizeof buf, "chip %u", pid);
        trace_name_process(t->w, pid, buf);
    }
    if (first_sight(t, pid, tid))
        trace_name_thread(t->w, pid, tid, thread);
}

np_status cli_trace_open(cli_trace *t, const char *path, np_err *err)
{
    memset(t, 0, sizeof *t);
    return trace_open(path, &t->w, err);
}

void cli_trace_insn(void *ctx, const core_trace_insn *in)
{
    cli_trace *t = ctx;
    uint32_t tid = cli_tid(in->core, in->unit, in->lane);
    char thread[48], name[32];
    if (in->unit == ISA_UNIT_DMA && in->lane)
        snprintf(thread, sizeof thread, "core%u.dma[%u]", in->core, in->lane);
    else
        snprintf(thread, sizeof thread, "core%u.%s", in->core, isa_unit_names[in->unit]);
    name_once(t, in->chip, tid, thread);
    snprintf(name, sizeof name, "%.*s", (int)strcspn(in->text, " "), in->text);
    json_t *args = json_pack("{s:I, s:s, s:s?}", "pc", (json_int_t)in->pc, "insn", in->text,
                             "kernel", in->kernel);
    trace_slice(t->w, in->chip, tid, name, isa_unit_names[in->unit], t->offset_ps + in->start_ps,
                in->end_ps - in->start_ps, args);
}

void cli_trace_span(cli_trace *t, uint32_t pid, uint32_t tid, const char *thread,
                    const char *name, const char *cat, uint64_t start_ps, uint64_t dur_ps)
{
    name_once(t, pid, tid, thread);
    trace_slice(t->w, pid, tid, name, cat, t->offset_ps + start_ps, dur_ps, NULL);
}

void cli_trace_kernels(cli_trace *t, const core_report *r)
{
    for (uint32_t i = 0; r && i < r->n_kernels; i++) {
        const core_kernel_report *k = &r->kernels[i];
        if (k->end_ps <= k->start_ps && !k->cycles)
            continue; /* never ran */
        char thread[48];
        snprintf(thread, sizeof thread, "core%u kernels", k->core);
        cli_trace_span(t, k->chip, k->core * CLI_TID_PER_CORE + 19, thread, k->name, "kernel",
                       k->start_ps, k->end_ps - k->start_ps);
    }
}

np_status cli_trace_close(cli_trace *t, np_err *err)
{
    free(t->seen);
    t->seen = NULL;
    np_status st = trace_close(t->w, err);
    t->w = NULL;
    if (st == NP_OK && t->oom)
        st = np_err_set(err, NP_ERR_NOMEM, "out of memory writing the trace");
    return st;
}
