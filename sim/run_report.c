/* run_report.c — the figures of `npusim run` (see run_report.h; definitions in docs/run.md). */
#include "run_report.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


double run_peak_flops(const arch_config *cfg, nn_dtype dtype)
{
    double macs = dtype == NN_F32    ? cfg->core.macs_per_pe_fp32
                  : dtype == NN_F16  ? cfg->core.macs_per_pe_fp16
                  : dtype == NN_I8   ? cfg->core.macs_per_pe_int8
                                     : cfg->core.macs_per_pe_bf16;
    return 2.0 * (double)cfg->core.array_rows * (double)cfg->core.array_cols * macs *
           cfg->core.clock_ghz * 1e9 * (double)cfg->chip.cores;
}

static const char *rr_bytes(uint64_t b, char *buf, size_t n)
{
    const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    double v = (double)b;
    int k = 0;
    while (v >= 1024 && k < 5)
        v /= 1024, k++;
    snprintf(buf, n, k ? "%.2f %s" : "%.0f %s", v, unit[k]);
    return buf;
}

np_status run_memory_check(const nn_plan *p, np_err *err)
{
    nn_plan_summary s;
    if (nn_plan_summarize(p, &s, err) != NP_OK)
        return err->status;
    const nn_plan_mem *m = &s.mem[s.largest];
    np_status st = NP_OK;
    if (p->hbm_bytes && m->total_bytes > p->hbm_bytes) {
        char b[8][32];
        st = np_err_set(err, NP_ERR_RANGE, "%s does not fit: the largest chip (stage %d) needs "
                        "%s of its %s of HBM (parameters %s, gradients %s, optimizer state %s, "
                        "activations %s, communication buffers %s, workspace %s); fewer "
                        "samples per micro-batch, recomputation, ZeRO or more model parallelism "
                        "would help (--allow-oom simulates it anyway)", p->model, s.largest,
                        rr_bytes(m->total_bytes, b[0], 32), rr_bytes(p->hbm_bytes, b[1], 32),
                        rr_bytes(m->params_bytes, b[2], 32), rr_bytes(m->grads_bytes, b[3], 32),
                        rr_bytes(m->optstate_bytes, b[4], 32),
                        rr_bytes(m->activations_bytes, b[5], 32),
                        rr_bytes(m->buffers_bytes, b[6], 32), rr_bytes(m->workspace_bytes, b[7], 32));
    }
    nn_plan_summary_free(&s);
    return st;
}

uint32_t run_report_comm_rows(const run_result *r, run_report_comm rows[RUN_COMM_COUNT])
{
    double steps = r->steps ? r->steps : 1;
    uint32_t n = 0;
    for (int k = 0; k < RUN_COMM_COUNT; k++) {
        run_report_comm c = {.kind = (run_comm_kind)k};
        uint64_t tot = 0, exp = 0, bytes = 0;
        for (uint32_t i = 0; i < r->ranks; i++) {
            const run_rank_stats *st = &r->rank[i];
            bytes += st->comm_bytes[k];
            if (!st->comm_ps[k])
                continue;
            c.chips++;
            tot += st->comm_ps[k];
            exp += st->exposed_ps[k];
        }
        if (!c.chips)
            continue;
        c.total_s = (double)tot * 1e-12 / c.chips / steps;
        c.exposed_s = (double)exp * 1e-12 / c.chips / steps;
        c.bytes_per_chip = (double)bytes / steps / c.chips;
        rows[n++] = c;
    }
    return n;
}

/* The job: model, architecture, batch and the strategy as the plan holds it. */
static void rr_job(const nn_plan *p, const arch_config *cfg, const run_result *r, run_report *o)
{
    snprintf(o->model, sizeof o->model, "%s", p->model);
    snprintf(o->arch, sizeof o->arch, "%s", cfg->name);
    o->chips = (uint32_t)p->mesh.n_ranks;
    o->system_chips = (uint32_t)cfg->system.chips;
    o->steps = r->steps;
    o->batch = p->batch;
    o->seq = p->seq;
    o->microbatch = p->microbatch;
    o->micro_batches = p->n_micro;
    nn_schedule_name(&p->s, o->schedule, sizeof o->schedule);
    o->recompute = nn_recompute_name(p->s.recompute);
    o->precision = p->compute == NN_F32 ? "fp32" : "bf16";
    o->fidelity = "fast";
    o->dropout = p->dropout;
    o->attention_fused = p->attention_fused;
    o->attention_composite = p->attention_composite;
    o->attention = p->attention_fused ? (p->attention_composite ? "mixed" : "fused")
                                      : (p->attention_composite ? "composite" : "none");
    o->attention_requested = run_attention_requested(&p->s);
    o->zero = p->s.zero;
    o->sp = p->s.sp;
    o->pp_scatter_gather = p->s.pp_scatter_gather;
    o->pp_scattered = p->pp_scattered;
    o->ddp = nn_ddp_name(p->s.ddp);
    o->p2p_blocking = p->s.p2p_blocking;
    o->host_sync = p->s.host_sync;
    o->tp_comm_overlap = p->s.tp_comm_overlap;
    o->overlap_param_gather = p->s.overlap_param_gather;
    o->loss_scale = p->s.loss_scale;
    o->clip_grad = p->s.clip_grad;
    o->dp = p->mesh.size[NN_MESH_DP];
    o->tp = p->mesh.size[NN_MESH_TP];
    o->pp = p->mesh.size[NN_MESH_PP];
    snprintf(o->order, sizeof o->order, "%s", p->mesh.order);

}

/* Step time, throughput, FLOPs per step and per chip against the peak, energy and throttling. */
static void rr_throughput(const nn_plan *p, const arch_config *cfg, const run_result *r,
                          run_report *o)
{
    double steps = r->steps ? r->steps : 1;
    o->step_time_s = (double)r->step_ps * 1e-12;
    double samples = (double)p->batch;
    if (o->step_time_s > 0) {
        if (p->seq > 1)
            o->tokens_per_s = samples * (double)p->seq / o->step_time_s;
        else
            o->samples_per_s = samples / o->step_time_s;
    }
    for (uint32_t i = 0; i < r->ranks; i++) {
        o->model_flops_per_step += r->rank[i].flops / steps;
        o->hw_flops_per_step += r->rank[i].hw_flops / steps;
    }
    o->peak_flops_per_chip = run_peak_flops(cfg, p->compute);
    if (o->step_time_s > 0 && o->chips) {
        double per_chip = o->model_flops_per_step / o->step_time_s / o->chips;
        double hw_per_chip = o->hw_flops_per_step / o->step_time_s / o->chips;
        o->tflops_per_chip = per_chip * 1e-12;
        o->hw_tflops_per_chip = hw_per_chip * 1e-12;
        if (o->peak_flops_per_chip > 0) {
            o->mfu_pct = 100.0 * per_chip / o->peak_flops_per_chip;
            o->hfu_pct = 100.0 * hw_per_chip / o->peak_flops_per_chip;
        }
    }
    /* energy: the run's action counts (run_energy.h) */
    run_energy_of(cfg, r, o->hw_flops_per_step * steps, &o->energy);
    if (p->batch > 0) {
        double per_sample = o->energy.per_step_j / (double)p->batch;
        if (p->seq > 1)
            o->energy_per_token_j = per_sample / (double)p->seq;
        else
            o->energy_per_sample_j = per_sample;
    }
    o->power_cap_w = cfg->chip.power_cap_w;
    for (uint32_t i = 0; i < r->ranks; i++)
        o->throttle_s += (double)r->rank[i].throttle_ps * 1e-12 / steps / r->ranks;
}

/* The pipeline bubble, measured only with a pipeline, per stage; NP_ERR_NOMEM. */
static np_status rr_bubbles(const nn_plan *p, const run_result *r, run_report *o, np_err *err)
{
    /* bubbles: measured only with a pipeline */
    o->stages = o->pp > 1 ? r->stages : 1;
    o->bubble_analytical = o->pp > 1 ? nn_plan_bubble(p) : 0;
    o->stage_bubble_pct = calloc(o->stages, sizeof *o->stage_bubble_pct);
    o->stage_bubble_ratio = calloc(o->stages, sizeof *o->stage_bubble_ratio);
    if (!o->stage_bubble_pct || !o->stage_bubble_ratio)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory");
    if (o->pp > 1) {
        o->bubble_pct = 100.0 * r->bubble_frac;
        o->bubble_ratio = r->bubble_ratio;
        for (uint32_t s = 0; s < o->stages; s++) {
            o->stage_bubble_pct[s] = 100.0 * r->stage_bubble_frac[s];
            o->stage_bubble_ratio[s] = r->stage_bubble_ratio[s];
        }
    }
    return NP_OK;
}

/* Where a chip's step goes, the communication rows and the units' utilization. */
static void rr_time(const run_result *r, run_report *o)
{
    double steps = r->steps ? r->steps : 1;
    /* where a chip's step goes (mean over chips, per step) */
    for (uint32_t i = 0; i < r->ranks; i++) {
        const run_rank_stats *st = &r->rank[i];
        o->compute_s += (double)st->computing_ps / steps;
        o->exposed_comm_s += (double)st->exposed_all_ps / steps;
        o->bubble_s += (double)st->bubble_all_ps / steps;
        o->idle_s += (double)(st->idle_ps - st->bubble_all_ps) / steps;
    }
    if (r->ranks) {
        double k = 1e-12 / r->ranks;
        o->compute_s *= k, o->exposed_comm_s *= k, o->bubble_s *= k, o->idle_s *= k;
    }
    o->n_comm = run_report_comm_rows(r, o->comm);
    /* units: busy over the run's time per chip */
    for (int u = 0; u < RUN_UNIT_COUNT; u++) {
        run_report_unit *x = &o->units[u];
        x->unit = (run_unit)u;
        x->min_pct = 1e300;
        double sum = 0;
        for (uint32_t i = 0; i < r->ranks; i++) {
            double pct = r->time_ps ? 100.0 * (double)r->rank[i].busy_ps[u] / (double)r->time_ps : 0;
            sum += pct;
            x->min_pct = pct < x->min_pct ? pct : x->min_pct;
            x->max_pct = pct > x->max_pct ? pct : x->max_pct;
        }
        x->mean_pct = r->ranks ? sum / r->ranks : 0;
        if (!r->ranks)
            x->min_pct = 0;
    }
}

static void rr_links(const run_result *r, run_report *o)
{
    /* the busiest links that carried anything, their peak over windows of a fixed length */
    o->link_peak_window_s = (double)r->link_window_ps * 1e-12;
    for (uint32_t i = 0; i < r->n_top && o->n_links < RUN_REPORT_LINKS_MAX; i++) {
        const run_link_stats *l = &r->links[r->top[i]];
        if (!l->bytes)
            break;
        run_report_link *x = &o->links[o->n_links++];
        snprintf(x->name, sizeof x->name, "%s", l->name);
        x->bytes = l->bytes;
        x->avg_gbps = l->avg_bytes_per_s * 1e-9;
        x->peak_gbps = l->peak_bytes_per_s * 1e-9;
        x->capacity_gbps = l->capacity_bytes_per_s * 1e-9;
    }
}

/* The memory of the largest rank against the HBM. */
static np_status rr_memory(const nn_plan *p, run_report *o, np_err *err)
{
    /* memory of the largest rank */
    nn_plan_summary s;
    if (nn_plan_summarize(p, &s, err) != NP_OK)
        return err->status;
    o->mem = s.mem[s.largest];
    o->mem_stage = s.largest;
    o->hbm_bytes = p->hbm_bytes;
    o->fits = !p->hbm_bytes || o->mem.total_bytes <= p->hbm_bytes;
    nn_plan_summary_free(&s);
    return NP_OK;
}

/* What the engine did: events, tasks, collectives, kernels, mirroring. */
static void rr_engine(const run_plan *rp, const run_result *r, const run_ktimer_stats *kt,
                      run_report *o)
{
    /* the engine */
    o->events = r->events;
    o->loss = o->loss_reference = NAN;
    for (uint32_t c = 0; rp && c < rp->n_classes; c++)
        for (uint32_t i = 0; i < r->ranks; i++)
            if (run_graph_class_of(rp->g, i) == c)
                o->tasks += (uint64_t)rp->n_tasks[c] * r->steps;
    o->colls_simulated = r->colls_simulated;
    o->colls_reused = r->colls_reused;
    o->transfers = r->transfers;
    o->kernels = rp ? rp->n_kspecs : 0;
    if (kt) {
        o->kernels_simulated = kt->simulated;
        o->kernels_from_file = kt->from_file;
        o->kernels_rejected = kt->rejected;
    }
    o->ranks_simulated = r->ranks_simulated;
    o->mirror_ways = r->mirror_ways;
}

np_status run_report_make(const nn_plan *p, const run_plan *rp, const arch_config *cfg,
                          const run_result *r, const run_ktimer_stats *kt, run_report *out,
                          np_err *err)
{
    memset(out, 0, sizeof *out);
    rr_job(p, cfg, r, out);
    rr_throughput(p, cfg, r, out);
    np_status st = rr_bubbles(p, r, out, err);
    if (st == NP_OK) {
        rr_time(r, out);
        rr_links(r, out);
        st = rr_memory(p, out, err);
    }
    if (st != NP_OK) {
        run_report_free(out);
        return st;
    }
    rr_engine(rp, r, kt, out);
    return NP_OK;
}

void run_report_free(run_report *rep)
{
    free(rep->stage_bubble_pct);
    free(rep->stage_bubble_ratio);
    rep->stage_bubble_pct = rep->stage_bubble_ratio = NULL;
}

json_t *run_report_json(const run_report *o)
{
    json_t *stages = json_array(), *comm = json_array(), *units = json_array(),
           *links = json_array();
    for (uint32_t s = 0; s < o->stages && o->pp > 1; s++)
        json_array_append_new(stages, json_pack("{s:i, s:f, s:f}", "stage", (int)s, "bubble_pct",
                                                o->stage_bubble_pct[s], "bubble_ratio",
                                                o->stage_bubble_ratio[s]));
    for (uint32_t i = 0; i < o->n_comm; i++) {
        const run_report_comm *c = &o->comm[i];
        json_array_append_new(comm, json_pack("{s:s, s:i, s:f, s:f, s:f, s:f}", "kind",
                                              run_comm_kind_name(c->kind), "chips", (int)c->chips,
                                              "total_s", c->total_s, "exposed_s", c->exposed_s,
                                              "overlapped_s", c->total_s - c->exposed_s,
                                              "bytes_per_chip", c->bytes_per_chip));
    }
    for (int u = 0; u < RUN_UNIT_COUNT; u++) {
        const run_report_unit *x = &o->units[u];
        json_array_append_new(units, json_pack("{s:s, s:f, s:f, s:f}", "kind",
                                               run_unit_name(x->unit), "min_util_pct", x->min_pct,
                                               "mean_util_pct", x->mean_pct, "max_util_pct",
                                               x->max_pct));
    }
    for (uint32_t i = 0; i < o->n_links; i++) {
        const run_report_link *l = &o->links[i];
        json_array_append_new(links, json_pack("{s:s, s:I, s:f, s:f, s:f}", "name", l->name,
                                               "bytes", (json_int_t)l->bytes, "avg_gbps",
                                               l->avg_gbps, "peak_gbps", l->peak_gbps,
                                               "capacity_gbps", l->capacity_gbps));
    }
    const nn_plan_mem *m = &o->mem;
    json_t *mem = json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:i, s:b}",
                            "params_bytes", (json_int_t)m->params_bytes, "grads_bytes",
                            (json_int_t)m->grads_bytes, "optstate_bytes",
                            (json_int_t)m->optstate_bytes, "activations_bytes",
                            (json_int_t)m->activations_bytes, "buffers_bytes",
                            (json_int_t)m->buffers_bytes, "workspace_bytes",
                            (json_int_t)m->workspace_bytes, "total_bytes",
                            (json_int_t)m->total_bytes, "peak_bytes", (json_int_t)m->total_bytes,
                            "hbm_bytes", (json_int_t)o->hbm_bytes, "stage", o->mem_stage, "fits",
                            o->fits);
    json_t *engine = json_pack("{s:I, s:I, s:i, s:i, s:i, s:i, s:I, s:I, s:I, s:i, s:i}",
                               "events", (json_int_t)o->events, "tasks", (json_int_t)o->tasks,
                               "kernels", (int)o->kernels, "kernels_simulated",
                               (int)o->kernels_simulated, "kernels_from_file",
                               (int)o->kernels_from_file, "kernels_rejected",
                               (int)o->kernels_rejected, "colls_simulated",
                               (json_int_t)o->colls_simulated, "colls_reused",
                               (json_int_t)o->colls_reused, "transfers", (json_int_t)o->transfers,
                               "ranks_simulated", (int)o->ranks_simulated, "mirror_ways",
                               (int)o->mirror_ways);
    json_t *mesh = json_pack("{s:i, s:i, s:i, s:s}", "dp", o->dp, "tp", o->tp, "pp", o->pp,
                             "order", o->order);
    json_t *j = json_pack("{s:s, s:s, s:i, s:i, s:I, s:I, s:I, s:i, s:s, s:s, s:s, s:i, s:b, "
                          "s:o, s:i, s:s, s:f}",
                          "model", o->model, "arch", o->arch, "chips", (int)o->chips,
                          "system_chips", (int)o->system_chips, "batch", (json_int_t)o->batch,
                          "seq", (json_int_t)o->seq, "microbatch", (json_int_t)o->microbatch,
                          "micro_batches", o->micro_batches, "schedule", o->schedule,
                          "recompute", o->recompute, "precision", o->precision, "zero", o->zero,
                          "sp", o->sp, "mesh", mesh, "steps", (int)o->steps, "fidelity",
                          o->fidelity, "step_time_s", o->step_time_s);
    if (!j)
        return NULL;
    json_object_set_new(j, "pp_scatter_gather", json_boolean(o->pp_scatter_gather));
    json_object_set_new(j, "pp_scattered", json_integer(o->pp_scattered));
    json_object_set_new(j, "ddp", json_string(o->ddp));
    json_object_set_new(j, "p2p", json_string(o->p2p_blocking ? "blocking" : "eager"));
    json_object_set_new(j, "host_sync", json_boolean(o->host_sync));
    json_object_set_new(j, "loss_scale", json_real(o->loss_scale));
    json_object_set_new(j, "clip_grad", json_real(o->clip_grad));
    json_object_set_new(j, "tp_comm_overlap", json_boolean(o->tp_comm_overlap));
    json_object_set_new(j, "overlap_param_gather", json_boolean(o->overlap_param_gather));
    json_object_set_new(j, "dropout", json_real(o->dropout));
    json_object_set_new(j, "attention", json_string(o->attention));
    json_object_set_new(j, "attention_requested", json_string(o->attention_requested));
    json_object_set_new(j, "attention_fused", json_integer(o->attention_fused));
    json_object_set_new(j, "attention_composite", json_integer(o->attention_composite));
    json_object_set_new(j, "attention_why", json_string(o->attention_why));
    json_object_set_new(j, o->seq > 1 ? "tokens_per_s" : "samples_per_s",
                        json_real(o->seq > 1 ? o->tokens_per_s : o->samples_per_s));
    json_object_set_new(j, "model_flops_per_step", json_real(o->model_flops_per_step));
    json_object_set_new(j, "hardware_flops_per_step", json_real(o->hw_flops_per_step));
    json_object_set_new(j, "peak_flops_per_chip", json_real(o->peak_flops_per_chip));
    json_object_set_new(j, "tflops_per_chip", json_real(o->tflops_per_chip));
    json_object_set_new(j, "hardware_tflops_per_chip", json_real(o->hw_tflops_per_chip));
    json_object_set_new(j, "mfu_pct", json_real(o->mfu_pct));
    json_object_set_new(j, "hfu_pct", json_real(o->hfu_pct));
    json_object_set_new(j, "bubble_pct", json_real(o->bubble_pct));
    json_object_set_new(j, "bubble_ratio", json_real(o->bubble_ratio));
    json_object_set_new(j, "bubble_analytical", json_real(o->bubble_analytical));
    json_object_set_new(j, "stages", stages);
    json_object_set_new(j, "time", json_pack("{s:f, s:f, s:f, s:f}", "compute_s", o->compute_s,
                                             "exposed_comm_s", o->exposed_comm_s, "bubble_s",
                                             o->bubble_s, "idle_s", o->idle_s));
    json_object_set_new(j, "comm", comm);
    json_object_set_new(j, "units", units);
    json_object_set_new(j, "links", links);
    json_object_set_new(j, "link_peak_window_s", json_real(o->link_peak_window_s));
    json_object_set_new(j, "memory", mem);
    json_object_set_new(j, "engine", engine);
    if (!run_faults_json(&o->faults, j)) {
        json_decref(j);
        return NULL;
    }
    if (!isnan(o->loss)) {
        json_object_set_new(j, "loss", json_real(o->loss));
        json_object_set_new(j, "loss_reference", json_real(o->loss_reference));
    }
    if (o->energy.fig.modelled) {
        json_t *e = energy_figures_json(&o->energy.fig);
        if (e) {
            json_object_set_new(e, "per_step_j", json_real(o->energy.per_step_j));
            json_object_set_new(e, "avg_w_per_chip", json_real(o->energy.avg_w_per_chip));
            json_object_set_new(e, "peak_w_per_chip", json_real(o->energy.peak_w_per_chip));
            json_object_set_new(e, o->seq > 1 ? "j_per_token" : "j_per_sample",
                                json_real(o->seq > 1 ? o->energy_per_token_j
                                                     : o->energy_per_sample_j));
            json_object_set_new(j, "energy", e);
        }
    }
    if (o->power_cap_w > 0)
        json_object_set_new(j, "power_cap", json_pack("{s:f, s:f}", "cap_w", o->power_cap_w,
                                                      "throttle_s", o->throttle_s));
    json_object_set_new(j, "wall_s", json_real(o->wall_s));
    return j;
}

const char *run_attention_requested(const nn_strategy *s)
{
    return s->fuse_attention ? "fused" : s->fuse_softmax ? "composite" : "unfused";
}

void run_report_set_attention(run_report *rep, const nn_strategy *s, const char *why)
{
    rep->attention_requested = run_attention_requested(s);
    snprintf(rep->attention_why, sizeof rep->attention_why, "%s", why ? why : "");
}
