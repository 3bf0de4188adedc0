/* validate_run.c — one row of a validation file run through the library of the command that
 * computes its figure (see validate.h): run_job.h for a training step, krun.h for a kernel,
 * noc/coll.h for a collective; and the statistics of a suite's errors. */
#include "validate.h"
#include "wallclock.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "arch.h"
#include "coll.h"
#include "kernel.h"
#include "krun.h"
#include "model.h"
#include "run_job.h"

/* A failure of the row's run: NOMEM and INTERNAL are errors, anything else is a row npusim
 * cannot run yet (the message says why). */
static np_status val_cannot(val_result *out, np_status st, const np_err *e, np_err *err)
{
    if (st == NP_ERR_NOMEM || st == NP_ERR_INTERNAL) {
        *err = *e;
        return st;
    }
    out->ran = false;
    char buf[NP_ERR_MSG_MAX + NP_ERR_FILE_MAX + 32];
    snprintf(out->why, sizeof out->why, "%s", np_err_format(e, buf, sizeof buf));
    return NP_OK;
}

/* The file's preset with sets applied; *ok false (and out filled) when it cannot be made. */
static np_status val_arch(const val_file *f, const char *const *sets, size_t n_sets,
                          arch_config *cfg, bool *ok, val_result *out, np_err *err)
{
    np_err e = {0};
    np_status st = arch_resolve(f->arch, sets, n_sets, cfg, &e);
    *ok = st == NP_OK;
    return *ok ? NP_OK : val_cannot(out, st, &e, err);
}

/* ---- training steps ------------------------------------------------------------------------- */

double val_train_flops(const val_train *t)
{
    double B = (double)t->global_batch, s = (double)t->seq, l = (double)t->layers;
    double h = (double)t->hidden, V = (double)t->vocab;
    if (t->flops == VAL_FLOPS_MEGATRON_EQ3) /* Narayanan et al. (2021), equation (3) */
        return 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
    /* Megatron-Core r0.8.0, megatron/training/training.py num_floating_point_operations, for
     * the GPT of these rows: multi-head attention (query groups = heads, kv channels x heads
     * = hidden), ffn_hidden_size 4h, no SwiGLU, no experts; the vocabulary padded to a
     * multiple of 128 x tp (--make-vocab-size-divisible-by 128) */
    double q = h, g = (double)t->heads, a = (double)t->heads, ffn = 4 * h;
    double pad = 128.0 * (double)t->tp, Vp = ceil(V / pad) * pad;
    return 12 * B * s * l * h * h *
           ((1 + g / a + s / h) * (q / h) + (ffn / h) * 1 * 1 + Vp / (2 * l * h));
}

static np_status val_run_train(const val_file *f, const val_row *r, const val_opts *o,
                               val_result *out, np_err *err)
{
    const val_train *t = &r->t;
    char chips[48];
    snprintf(chips, sizeof chips, "system.chips=%lld", (long long)t->gpus);
    const char *sets[] = {chips};
    arch_config cfg;
    bool ok;
    np_status st = val_arch(f, sets, 1, &cfg, &ok, out, err);
    if (st != NP_OK || !ok)
        return st;
    /* Megatron-LM's GPT: learned positions, LayerNorm, GELU MLP of 4h, tied embeddings —
     * the zoo's gpt family (docs/models.md) */
    char text[512];
    snprintf(text, sizeof text, "family = gpt\ndescription = %s (%s)\nlayers = %lld\n"
             "d_model = %lld\nheads = %lld\nvocab = %lld\ncontext = %lld\n", t->model, f->id,
             (long long)t->layers, (long long)t->hidden, (long long)t->heads,
             (long long)t->vocab, (long long)t->seq);
    nn_model_desc d;
    np_err e = {0};
    if ((st = nn_model_parse(f->id, text, &d, &e)) != NP_OK)
        return val_cannot(out, st, &e, err);
    run_job j = {.cfg = &cfg, .model = &d, .steps = 1, .optim = run_job_optim(),
                 .kernel_cache = o->kernel_cache, .progress = o->progress,
                 .progress_ctx = o->progress_ctx};
    nn_strategy_default(&j.s);
    j.s.dp = (int)t->dp, j.s.tp = (int)t->tp, j.s.pp = (int)t->pp;
    j.s.zero = t->zero;
    j.s.sp = t->sp;
    j.s.microbatch = t->micro_batch;
    if (t->virtual_stages > 1) {
        j.s.schedule = NN_PP_INTERLEAVED;
        j.s.virtual_stages = (int)t->virtual_stages;
    }
    j.s.recompute = (nn_recompute)t->recompute;
    j.s.fuse_attention = t->fused_attention;
    j.s.fuse_softmax = t->fused_softmax;
    j.s.ddp = (nn_ddp)t->ddp;
    j.s.p2p_blocking = t->p2p_blocking;
    j.s.host_sync = t->host_sync;
    j.s.loss_scale = t->loss_scale;
    j.s.clip_grad = t->clip_grad;
    j.s.tp_comm_overlap = t->tp_comm_overlap;
    j.s.overlap_param_gather = t->overlap_param_gather;
    j.o = (nn_model_opts){.batch = t->global_batch, .seq = t->seq,
                          .compute = t->precision ? NN_F32 : NN_BF16, .seed = 1,
                          .dropout = t->dropout};
    run_report rep;
    if ((st = run_job_run(&j, &rep, &e)) != NP_OK)
        return val_cannot(out, st, &e, err);
    out->sim_s = rep.step_time_s;
    out->ours = val_train_flops(t) / (rep.step_time_s * (double)t->gpus) / 1e12;
    out->ran = true;
    run_report_free(&rep);
    return NP_OK;
}

/* ---- kernels -------------------------------------------------------------------------------- */

static np_status val_run_kernel(const val_file *f, const val_row *r, val_result *out,
                                np_err *err)
{
    const val_kernel *k = &r->k;
    arch_config cfg;
    bool ok;
    np_status st = val_arch(f, NULL, 0, &cfg, &ok, out, err);
    if (st != NP_OK || !ok)
        return st;
    char text[512];
    snprintf(text, sizeof text, "%s %s dtype=%s", k->op, k->shape, k->dtype);
    np_err e = {0};
    kc_spec spec;
    kc_prog *scratch = NULL;
    kc_kernel kern;
    if ((st = kc_spec_parse(text, &spec, &e)) == NP_OK &&
        (st = kc_prog_new(&cfg, &(kc_prog_opts){.cores = 1}, &scratch, &e)) == NP_OK)
        st = kc_spec_kernel(scratch, &spec, &kern, &e); /* operands: krun places them again */
    kc_prog_free(scratch);
    if (st != NP_OK)
        return val_cannot(out, st, &e, err);
    /* spread over every core of the chip, as the GPU spreads a kernel over every SM */
    kern.place.n_cores = (uint32_t)cfg.chip.cores;
    krun_result kr;
    if ((st = krun_kernel(&cfg, &kern, NULL, &(krun_opts){.prog_cores = kern.place.n_cores},
                          &kr, &e)) != NP_OK)
        return val_cannot(out, st, &e, err);
    krun_figures fig;
    krun_figures_of(&cfg, &kern, &kr, &fig);
    krun_result_free(&kr);
    out->sim_s = fig.time_us * 1e-6;
    out->ours = fig.time_us + k->host_overhead_us;
    out->ran = true;
    return NP_OK;
}

/* ---- collectives ---------------------------------------------------------------------------- */

static np_status val_run_nccl(const val_file *f, const val_row *r, val_result *out,
                              np_err *err)
{
    const val_nccl *n = &r->n;
    /* every GPU of the nodes; a node is an island (NVSwitch), joined by InfiniBand */
    char chips[48], island[48];
    snprintf(chips, sizeof chips, "system.chips=%lld", (long long)(n->nodes * n->gpus_per_node));
    snprintf(island, sizeof island, "system.island_chips=%lld", (long long)n->gpus_per_node);
    const char *sets[] = {chips, island};
    arch_config cfg;
    bool ok;
    np_status st = val_arch(f, sets, 2, &cfg, &ok, out, err);
    if (st != NP_OK || !ok)
        return st;
    net_params np;
    net_params_from_arch(&cfg, &np);
    evq *q = NULL;
    coll_sys *sys = NULL;
    coll_result cr = {0};
    np_err e = {0};
    /* as `npusim collective --op OP -b BYTES -e BYTES --elem-bytes E [--algo A]` runs it: the
     * file's algorithm (its `algo:`, what the authors forced) or the tuner's, over every chip,
     * one run (the model is deterministic) */
    coll_desc d = {.op = (coll_op)n->op, .algo = COLL_ALGO_AUTO, .bytes = n->bytes,
                   .elem_bytes = n->elem_bytes};
    if (f->algo && coll_algo_parse(f->algo, &d.algo, &e) != NP_OK) /* checked at load */
        return val_cannot(out, e.status, &e, err);
    if ((st = evq_create(&q, &e)) == NP_OK && (st = coll_sys_create(&cfg, &np, q, NULL, &sys,
                                                                    &e)) == NP_OK)
        st = coll_run(sys, &d, &cr, &e);
    coll_sys_free(sys);
    evq_free(q);
    if (st != NP_OK)
        return val_cannot(out, st, &e, err);
    double t_us = (double)(cr.t_end_ps - cr.t_start_ps) / 1e6;
    double algbw = t_us > 0 ? (double)n->bytes / (t_us * 1e3) : 0; /* GB/s */
    double busbw = algbw * coll_busbw_factor((coll_op)n->op, cr.ranks);
    out->sim_s = t_us * 1e-6;
    out->ours = n->bytes >= (1u << 20) ? busbw : t_us;
    out->ran = true;
    return NP_OK;
}

/* ---- a row ---------------------------------------------------------------------------------- */

np_status val_run_row(const val_file *f, size_t i, const val_opts *o, val_result *out,
                      np_err *err)
{
    static const val_opts none = {0};
    const val_row *r = &f->rows[i];
    memset(out, 0, sizeof *out);
    out->published = val_row_published(f, r);
    double t0 = np_wall_s();
    np_status st = f->suite->kind == VAL_KIND_TRAIN    ? val_run_train(f, r, o ? o : &none, out, err)
                   : f->suite->kind == VAL_KIND_KERNEL ? val_run_kernel(f, r, out, err)
                                                       : val_run_nccl(f, r, out, err);
    out->wall_s = np_wall_s() - t0;
    if (st == NP_OK && out->ran)
        out->err_pct = 100.0 * (out->ours - out->published) / out->published;
    return st;
}

/* ---- statistics ----------------------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

void val_stats_of(const val_result *res, size_t n, val_stats *out)
{
    memset(out, 0, sizeof *out);
    out->rows = n;
    double *abs_err = malloc((n ? n : 1) * sizeof *abs_err);
    double sum = 0;
    size_t w10 = 0, w20 = 0;
    for (size_t i = 0; i < n; i++) {
        if (!res[i].ran)
            continue;
        double a = fabs(res[i].err_pct);
        if (abs_err)
            abs_err[out->ran] = a;
        out->ran++;
        sum += a;
        w10 += a <= 10;
        w20 += a <= 20;
        if (a > fabs(out->worst_pct) || out->ran == 1) {
            out->worst_pct = res[i].err_pct;
            out->worst = i;
        }
    }
    if (!out->ran) {
        free(abs_err);
        return;
    }
    out->mean_abs_pct = sum / (double)out->ran;
    out->within10_pct = 100.0 * (double)w10 / (double)out->ran;
    out->within20_pct = 100.0 * (double)w20 / (double)out->ran;
    if (abs_err) {
        qsort(abs_err, out->ran, sizeof *abs_err, cmp_double);
        size_t m = out->ran / 2;
        out->median_abs_pct = out->ran % 2 ? abs_err[m] : (abs_err[m - 1] + abs_err[m]) / 2;
    }
    free(abs_err);
}
