/* run_trace.c — the run's trace: the engine's observations as trace sink calls (see
 * run_trace.h). */
#include "run_trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Units of the chip as a whole (trace_unit_slice.unit): their threads' places. */
enum { RT_U_COMPUTE, RT_U_MXU, RT_U_VPU, RT_U_DMA, RT_U_COMM };

struct run_trace {
    const run_plan *rp;
    trace_sink sink;
    run_observer obs;
    uint64_t transfers; /* flow ids of sends */
};

static const run_plan_task *rt_task(const run_trace *t, uint32_t rank, uint32_t task)
{
    uint32_t c = run_graph_class_of(t->rp->g, rank);
    return &t->rp->tasks[c][task];
}

static void rt_unit(const run_trace *t, uint32_t chip, unsigned unit, const char *unit_name,
                    const char *name, const char *cat, uint64_t a, uint64_t b)
{
    trace_unit_slice s = {.chip = chip, .core = TRACE_NO_CORE, .unit = unit,
                          .unit_name = unit_name, .name = name, .cat = cat, .start_ps = a,
                          .end_ps = b};
    t->sink.ops->unit_slice(t->sink.ctx, &s);
}

static void rt_compute(void *ctx, uint32_t rank, uint32_t task, uint32_t step, uint64_t a,
                       uint64_t b, const run_ktime *kt)
{
    (void)step;
    run_trace *t = ctx;
    const run_plan_task *pt = rt_task(t, rank, task);
    const run_kspec *ks = &t->rp->kspecs[pt->kernel];
    const nn_plan_entry *e = pt->e;
    uint32_t chip = run_graph_chip_of(t->rp->g, rank);
    const char *name = ks->name[0] ? ks->name : nn_op_name(ks->k.op);
    const nn_plan_class *cl = &t->rp->p->classes[run_graph_class_of(t->rp->g, rank)];
    trace_arg args[7];
    size_t n = 0;
    args[n++] = TRACE_ARG_S("node", e->nodes[0]->name);
    args[n++] = TRACE_ARG_I("layer", e->layer);
    args[n++] = TRACE_ARG_F("flops", (double)e->flops);
    if (ks->hbm_bytes)
        args[n++] = TRACE_ARG_U("bytes", ks->hbm_bytes);
    if (pt->mb >= 0) /* forward and backward work */
        args[n++] = TRACE_ARG_I("mb", pt->mb);
    if (pt->mb >= 0 && t->rp->gs_pp != RUN_NONE) /* ... of a pipeline stage */
        args[n++] = TRACE_ARG_I("stage", cl->stage);
    if (e->region == NN_REGION_RECOMPUTE)
        args[n++] = TRACE_ARG_S("region", "recompute");
    if (t->sink.ops->span) {
        trace_span sp = {.chip = chip, .core = TRACE_NO_CORE, .track = "kernels", .name = name,
                         .cat = "kernel", .start_ps = a, .end_ps = b, .args = args, .n_args = n};
        t->sink.ops->span(t->sink.ctx, &sp);
    }
    if (t->sink.ops->unit_slice) {
        rt_unit(t, chip, RT_U_COMPUTE, "compute", name, NULL, a, b);
        rt_unit(t, chip, RT_U_MXU, "mxu", name, NULL, a, a + kt->unit_ps[RUN_UNIT_MXU]);
        rt_unit(t, chip, RT_U_VPU, "vpu", name, NULL, a, a + kt->unit_ps[RUN_UNIT_VPU]);
        rt_unit(t, chip, RT_U_DMA, "dma", name, NULL, a, a + kt->unit_ps[RUN_UNIT_DMA]);
    }
}

static run_comm_kind rt_kind(nn_comm_tag tag)
{
    static const run_comm_kind k[NN_COMM_TAG_COUNT] = {
        [NN_COMM_TP] = RUN_COMM_TP, [NN_COMM_SP] = RUN_COMM_SP, [NN_COMM_DP] = RUN_COMM_DP,
        [NN_COMM_ZERO] = RUN_COMM_ZERO, [NN_COMM_PP] = RUN_COMM_PP};
    return tag < NN_COMM_TAG_COUNT ? k[tag] : RUN_COMM_OTHER;
}

static void rt_comm_span(const run_trace *t, uint32_t rank, const run_plan_task *pt,
                         const char *name, const char *cat, uint64_t a, uint64_t b,
                         uint64_t bytes, uint64_t group, uint32_t group_size)
{
    if (!t->sink.ops->span)
        return;
    const char *kind = run_comm_kind_name(rt_kind(pt->e->tag));
    trace_arg args[3]; /* no stage: communication is not the pipeline's busy time */
    size_t n = 0;
    args[n++] = TRACE_ARG_S("kind", kind);
    args[n++] = TRACE_ARG_U("bytes", bytes);
    if (pt->mb >= 0)
        args[n++] = TRACE_ARG_I("mb", pt->mb);
    trace_span sp = {.chip = run_graph_chip_of(t->rp->g, rank), .core = TRACE_NO_CORE,
                     .track = kind, .name = name, .cat = cat, .start_ps = a, .end_ps = b,
                     .args = args, .n_args = n, .group = group, .group_size = group_size};
    t->sink.ops->span(t->sink.ctx, &sp);
}

static void rt_coll(void *ctx, uint32_t rank, uint32_t task, uint32_t step, uint64_t a,
                    uint64_t b, uint64_t group, uint32_t group_size, uint64_t bytes)
{
    (void)step;
    run_trace *t = ctx;
    const run_plan_task *pt = rt_task(t, rank, task);
    rt_comm_span(t, rank, pt, nn_op_name(pt->e->nodes[0]->op), "collective", a, b, bytes, group,
                 group_size);
}

static void rt_transfer(void *ctx, uint32_t src, uint32_t dst, uint32_t task, uint32_t step,
                        uint64_t a, uint64_t b, uint64_t bytes)
{
    (void)step;
    run_trace *t = ctx;
    const run_plan_task *pt = rt_task(t, src, task);
    uint64_t group = (1ull << 63) | ++t->transfers;
    rt_comm_span(t, src, pt, "send", "comm", a, b, bytes, group, 2);
    rt_comm_span(t, dst, pt, "recv", "comm", a, b, bytes, group, 2);
}

static void rt_comm_busy(void *ctx, uint32_t rank, uint64_t a, uint64_t b)
{
    run_trace *t = ctx;
    if (t->sink.ops->unit_slice)
        rt_unit(t, run_graph_chip_of(t->rp->g, rank), RT_U_COMM, "comm", "communication", "busy",
                a, b);
}

static void rt_link(void *ctx, uint32_t link, const char *name, const double *bytes, uint32_t n,
                    uint64_t window_ps)
{
    (void)link;
    run_trace *t = ctx;
    if (!t->sink.ops->transfer)
        return;
    for (uint32_t k = 0; k < n; k++)
        if (bytes[k] > 0) {
            trace_transfer tr = {.chip = TRACE_SYSTEM_CHIP, .counter = name,
                                 .bytes = (uint64_t)(bytes[k] + 0.5), .start_ps = k * window_ps,
                                 .end_ps = (k + 1) * window_ps};
            t->sink.ops->transfer(t->sink.ctx, &tr);
        }
}

np_status run_trace_create(const run_plan *rp, trace_sink sink, run_trace **out, np_err *err)
{
    run_trace *t = calloc(1, sizeof *t);
    if (!t)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory");
    static const trace_sink_ops none = {0};
    t->rp = rp;
    t->sink = sink;
    if (!t->sink.ops)
        t->sink.ops = &none;
    t->obs = (run_observer){.compute = rt_compute, .coll = rt_coll, .transfer = rt_transfer,
                            .comm_busy = rt_comm_busy, .link = rt_link, .ctx = t};
    *out = t;
    return NP_OK;
}

const run_observer *run_trace_observer(const run_trace *t) { return &t->obs; }

void run_trace_free(run_trace *t) { free(t); }
