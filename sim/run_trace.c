/* run_trace.c — the run's trace: the engine's observations as trace sink calls (see
 * run_trace.h). */
#include "run_trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace_map.h"

/* Units of the chip as a whole (trace_unit_slice.unit): their threads' places. */
enum { RT_U_COMPUTE, RT_U_MXU, RT_U_VPU, RT_U_DMA, RT_U_COMM };

struct run_trace {
    const run_plan *rp;
    trace_sink sink;
    run_observer obs;
    uint64_t transfers; /* flow ids of sends */
    /* HBM occupancy ("hbm.used"): per class what stays resident, and per (class, layer) a
     * micro-batch's saved activations and the backward tasks that read them */
    uint32_t n_layers;
    uint64_t *resident;  /* per class */
    uint64_t *saved;     /* per class x layer */
    uint32_t *bwd_tasks; /* per class x layer: backward tasks of one micro-batch */
    uint64_t *used;      /* per rank: its HBM occupancy now; UINT64_MAX before its first task */
    uint32_t n_ranks;
    u64map stash;        /* (rank, layer, micro-batch) + 1 -> its backward tasks still to end */
    const arch_config *energy; /* the "power" counter's energies (NULL: no counter) */
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

/* A compute task of rank ended at t_ps: its HBM occupancy — the class's resident bytes from
 * time 0, a micro-batch's saved activations of a layer from the end of its first forward
 * task to the end of the last backward task of that layer that reads them. */
static void rt_hbm_used(run_trace *t, uint32_t rank, const run_plan_task *pt, uint64_t t_ps)
{
    if (!t->used || !t->sink.ops->level || rank >= t->n_ranks)
        return;
    uint32_t c = run_graph_class_of(t->rp->g, rank), chip = run_graph_chip_of(t->rp->g, rank);
    uint64_t *u = &t->used[rank], before = *u;
    if (*u == UINT64_MAX) {
        *u = t->resident[c];
        t->sink.ops->level(t->sink.ctx, chip, "hbm.used", 0, (double)*u);
        before = *u;
    }
    int L = pt->e->layer;
    bool fwd = pt->e->region == NN_REGION_FORWARD, bwd = pt->e->region == NN_REGION_BACKWARD;
    if (L < 0 || (uint32_t)L >= t->n_layers || pt->mb < 0 || (!fwd && !bwd))
        return;
    size_t cl = (size_t)c * t->n_layers + (size_t)L;
    if (!t->bwd_tasks[cl] || !t->saved[cl])
        return;
    uint64_t key = ((uint64_t)rank << 40 | (uint64_t)L << 20 | (uint64_t)(pt->mb & 0xfffff)) + 1;
    bool fresh;
    uint64_t *left = u64map_slot(&t->stash, key, &fresh);
    if (!left)
        return;
    if (fwd && *left == 0) { /* its first forward task: the layer's activations are saved */
        *left = t->bwd_tasks[cl];
        *u += t->saved[cl];
    } else if (bwd && *left && --*left == 0) { /* the last backward task that reads them */
        *u -= t->saved[cl];
    }
    if (*u != before)
        t->sink.ops->level(t->sink.ctx, chip, "hbm.used", t_ps, (double)*u);
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
    if (t->sink.ops->transfer && ks->hbm_bytes) { /* HBM bandwidth: the kernel's bytes */
        trace_transfer x = {chip, "hbm", ks->hbm_bytes, a, b};
        t->sink.ops->transfer(t->sink.ctx, &x);
    }
    rt_hbm_used(t, rank, pt, b);
    if (t->sink.ops->level && t->energy && b > a) { /* the chip's power while it runs */
        double w = t->energy->energy.static_w;
        t->sink.ops->level(t->sink.ctx, chip, "power", a,
                           w + energy_dynamic_j(t->energy, &kt->acts, NULL) /
                                   ((double)(b - a) * 1e-12));
        t->sink.ops->level(t->sink.ctx, chip, "power", b, w);
    }
    if (t->sink.ops->level && ks->spad_bytes) { /* the kernel's scratchpad while it runs */
        t->sink.ops->level(t->sink.ctx, chip, "spad.used", a, (double)ks->spad_bytes);
        t->sink.ops->level(t->sink.ctx, chip, "spad.used", b, 0);
    }
    if (t->sink.ops->unit_slice) {
        rt_unit(t, chip, RT_U_COMPUTE, "compute", name, NULL, a, b);
        rt_unit(t, chip, RT_U_MXU, "mxu", name, NULL, a, a + kt->unit_ps[RUN_UNIT_MXU]);
        rt_unit(t, chip, RT_U_VPU, "vpu", name, NULL, a, a + kt->unit_ps[RUN_UNIT_VPU]);
        rt_unit(t, chip, RT_U_DMA, "dma", name, NULL, a, a + kt->unit_ps[RUN_UNIT_DMA]);
    }
}

static void rt_comm_span(const run_trace *t, uint32_t rank, const run_plan_task *pt,
                         const char *name, const char *cat, uint64_t a, uint64_t b,
                         uint64_t bytes, uint64_t group, uint32_t group_size)
{
    if (!t->sink.ops->span)
        return;
    const char *kind = run_comm_kind_name(run_plan_comm_kind(pt->e->tag));
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

void run_trace_set_energy(run_trace *t, const arch_config *cfg)
{
    t->energy = energy_modelled(cfg) ? cfg : NULL;
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
    /* HBM occupancy: resident bytes per class, saved activations per (class, layer) */
    uint32_t C = rp->n_classes, R = run_graph_ranks(rp->g);
    for (uint32_t c = 0; c < C; c++)
        for (uint32_t i = 0; i < rp->n_tasks[c]; i++)
            if (rp->tasks[c][i].e && rp->tasks[c][i].e->layer >= 0 &&
                (uint32_t)rp->tasks[c][i].e->layer + 1 > t->n_layers)
                t->n_layers = (uint32_t)rp->tasks[c][i].e->layer + 1;
    size_t CL = (size_t)C * t->n_layers;
    t->resident = calloc(C + 1, sizeof *t->resident);
    t->saved = calloc(CL + 1, sizeof *t->saved);
    t->bwd_tasks = calloc(CL + 1, sizeof *t->bwd_tasks);
    t->used = malloc(((size_t)R + 1) * sizeof *t->used);
    if (!t->resident || !t->saved || !t->bwd_tasks || !t->used) {
        run_trace_free(t);
        return np_err_set(err, NP_ERR_NOMEM, "out of memory");
    }
    for (uint32_t r = 0; r < R; r++)
        t->used[r] = UINT64_MAX;
    t->n_ranks = R;
    for (uint32_t c = 0; c < C && c < (uint32_t)rp->p->n_classes; c++) {
        const nn_plan_class *cl = &rp->p->classes[c];
        nn_plan_mem m;
        if (nn_plan_class_memory(rp->p, cl, &m, err) != NP_OK) {
            run_trace_free(t);
            return err->status;
        }
        t->resident[c] = m.params_bytes + m.grads_bytes + m.optstate_bytes;
        for (uint32_t L = 0; L < t->n_layers; L++)
            t->saved[(size_t)c * t->n_layers + L] = nn_plan_layer_saved_bytes(rp->p, cl, (int)L);
        int32_t mb0 = -1; /* the backward tasks of one micro-batch */
        for (uint32_t i = 0; i < rp->n_tasks[c]; i++) {
            const run_plan_task *pt = &rp->tasks[c][i];
            if (!pt->e || pt->mb < 0 || pt->e->region != NN_REGION_BACKWARD || pt->e->layer < 0)
                continue;
            if (mb0 < 0)
                mb0 = pt->mb;
            if (pt->mb == mb0 && pt->kernel != RUN_NONE)
                t->bwd_tasks[(size_t)c * t->n_layers + (size_t)pt->e->layer]++;
        }
    }
    t->obs = (run_observer){.compute = rt_compute, .coll = rt_coll, .transfer = rt_transfer,
                            .comm_busy = rt_comm_busy, .link = rt_link, .ctx = t};
    *out = t;
    return NP_OK;
}

const run_observer *run_trace_observer(const run_trace *t) { return &t->obs; }

void run_trace_free(run_trace *t)
{
    if (!t)
        return;
    free(t->resident);
    free(t->saved);
    free(t->bwd_tasks);
    free(t->used);
    u64map_free(&t->stash);
    free(t);
}
