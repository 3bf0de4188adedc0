/* run_job.c — `npusim run` from the plan to the report (see run_job.h). */
#include "run_job.h"
#include "wallclock.h"

#include <math.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chakra.h"
#include "lower.h"
#include "run_job_impl.h"
#include "run_kernel.h"
#include "run_plan.h"
#include "run_trace.h"

nn_optim run_job_optim(void)
{
    return (nn_optim){.kind = NN_OPTIM_ADAMW, .lr = 1e-4, .beta1 = 0.9, .beta2 = 0.95,
                      .eps = 1e-8, .weight_decay = 0.1};
}

typedef struct rj_progress {
    const run_job *j;
    uint32_t kernels, timed;
} rj_progress;

static void rj_kernel_progress(void *ctx, const char *key)
{
    rj_progress *p = ctx;
    char what[96];
    const char *sp = strchr(key, ' ');
    snprintf(what, sizeof what, "kernel %u of %u (%.*s)", p->timed + 1, p->kernels,
             sp ? (int)(sp - key) : (int)strlen(key), key);
    p->timed++;
    p->j->progress(p->j->progress_ctx, what, p->kernels ? (double)p->timed / p->kernels : 1);
}

static void rj_run_progress(void *ctx, double done)
{
    rj_progress *p = ctx;
    p->j->progress(p->j->progress_ctx, "simulating", done);
}

/* The full-fidelity job: the plan's ranks lowered and run on the core model. */
static np_status rj_run_full(const run_job *j, nn_plan *p, run_report *out, np_err *err)
{
    if (j->trace_path)
        return np_err_set(err, NP_ERR_USAGE, "--trace is not available with --fidelity full "
                          "yet (the fast fidelity's trace has the same layout)");
    if (j->steps > 1)
        return np_err_set(err, NP_ERR_USAGE, "--fidelity full simulates one step (--steps 1)");
    if (j->faults.n_slow || j->faults.n_links || j->faults.mtbf_hours > 0)
        return np_err_set(err, NP_ERR_USAGE, "%s is not available with --fidelity full yet",
                          j->faults.n_slow ? "--slow-chip" : j->faults.n_links
                          ? "--slow-link / --fail-link" : "--mtbf-hours");
    if (p->s.tp_comm_overlap || p->s.overlap_param_gather)
        return np_err_set(err, NP_ERR_USAGE, "%s is not available with --fidelity full yet "
                          "(the step's lowering runs each collective between its kernels, in "
                          "the step's order)", p->s.tp_comm_overlap ? "--tp-comm-overlap"
                                                                     : "--overlap-param-gather");
    run_full_result fr;
    double loss, loss_ref;
    np_status st = rj_full(j, p, &fr, &loss, &loss_ref, err);
    if (st != NP_OK)
        return st;
    st = run_report_make(p, NULL, j->cfg, fr.r, NULL, out, err);
    if (st == NP_OK) {
        out->fidelity = "full";
        out->loss = loss;
        out->loss_reference = loss_ref;
        out->kernels = (uint32_t)fr.kernels;
        out->events = fr.events;
        out->tasks = fr.kernels + fr.comm;
    }
    run_full_result_free(&fr);
    return st;
}

/* What a memo keeps of one attention kernel: whether it compiles for the chip, and if not
 * the compiler's message. */
struct run_attn_fit {
    char key[RUN_KEY_MAX];
    bool fits;
    char why[RUN_REPORT_WHY_MAX];
};

void run_attn_memo_free(run_attn_memo *m)
{
    free(m->v);
    memset(m, 0, sizeof *m);
}

/* Whether the kernel of key compiles (its operands fit the scratchpad), from the memo when it
 * holds it; else lower_kernel_alone says, and the memo (when there is one and memory allows)
 * keeps the answer. */
static bool rj_kernel_fits(const kc_kernel *k, const char *key, const arch_config *cfg,
                           run_attn_memo *memo, char *why, size_t n)
{
    for (uint32_t i = 0; memo && i < memo->n; i++)
        if (strcmp(memo->v[i].key, key) == 0) {
            if (!memo->v[i].fits)
                snprintf(why, n, "%s", memo->v[i].why);
            return memo->v[i].fits;
        }
    kc_result res;
    np_err e = {0};
    bool fits = lower_kernel_alone(cfg, k, &res, NULL, &e) != NP_ERR_RANGE;
    if (!fits)
        snprintf(why, n, "%s", e.msg);
    if (memo && memo->n == memo->cap) {
        uint32_t cap = memo->cap ? 2 * memo->cap : 16;
        struct run_attn_fit *v = realloc(memo->v, cap * sizeof *v);
        if (v) {
            memo->v = v;
            memo->cap = cap;
        }
    }
    if (memo && memo->n < memo->cap) {
        struct run_attn_fit *f = &memo->v[memo->n++];
        snprintf(f->key, sizeof f->key, "%s", key);
        f->fits = fits;
        snprintf(f->why, sizeof f->why, "%.319s", fits ? "" : e.msg);
    }
    return fits;
}

/* Whether every distinct attention kernel of p compiles for cfg's chip; the first that does
 * not (NP_ERR_RANGE: its operands do not fit the scratchpad) in why. Other errors are left to
 * the run, which reports them as it does for every kernel. */
static bool rj_attention_fits(const nn_plan *p, const arch_config *cfg, run_attn_memo *memo,
                              char *why, size_t n)
{
    enum { RJ_KEYS = 16 };
    char keys[RJ_KEYS][RUN_KEY_MAX];
    int n_keys = 0;
    for (int c = 0; c < p->n_classes; c++)
        for (int i = 0; i < nn_graph_n_nodes(p->classes[c].g); i++) {
            const nn_tensor *t = nn_graph_node(p->classes[c].g, i);
            if (t->op != NN_OP_ATTENTION && t->op != NN_OP_ATTENTION_LSE &&
                t->op != NN_OP_ATTENTION_GRAD)
                continue;
            kc_kernel k;
            np_err e = {0};
            char key[RUN_KEY_MAX];
            if (run_kernel_of_node(t, cfg, &k, &e) != NP_OK)
                continue;
            run_kernel_key(&k, key, sizeof key);
            bool seen = false;
            for (int q = 0; q < n_keys && !seen; q++)
                seen = strcmp(keys[q], key) == 0;
            if (seen)
                continue;
            if (n_keys < RJ_KEYS)
                snprintf(keys[n_keys++], sizeof keys[0], "%s", key);
            if (!rj_kernel_fits(&k, key, cfg, memo, why, n))
                return false;
        }
    return true;
}

np_status run_build_plan_memo(const nn_model_desc *d, const nn_model_opts *o,
                              const nn_strategy *s, const nn_optim *opt,
                              const arch_config *cfg, run_attn_memo *memo, nn_plan **out,
                              char *why, size_t n, np_err *err)
{
    if (n)
        why[0] = 0;
    np_status st = nn_plan_build(d, o, s, opt, cfg, out, err);
    if (st != NP_OK || !s->fuse_attention || !(*out)->attention_fused ||
        rj_attention_fits(*out, cfg, memo, why, n))
        return st;
    nn_plan_free(*out);
    nn_strategy composite = *s;
    composite.fuse_attention = false;
    return nn_plan_build(d, o, &composite, opt, cfg, out, err);
}

np_status run_build_plan(const nn_model_desc *d, const nn_model_opts *o, const nn_strategy *s,
                         const nn_optim *opt, const arch_config *cfg, nn_plan **out, char *why,
                         size_t n, np_err *err)
{
    return run_build_plan_memo(d, o, s, opt, cfg, NULL, out, why, n, err);
}

/* Every stage's grouped matmuls take their rows per expert from the job's routing. */
static np_status rj_mark_routing(const run_job *j, nn_plan *p, np_err *err)
{
    nn_moe_route_spec uniform = nn_moe_route_uniform();
    const nn_moe_route_spec *s = j->routing ? j->routing : &uniform;
    for (int c = 0; c < p->n_classes; c++)
        if (nn_moe_route_mark(p->classes[c].g, s, err) != NP_OK)
            return err->status;
    return NP_OK;
}

np_status run_job_run(const run_job *j, run_report *out, np_err *err)
{
    double t0 = np_wall_s();
    memset(out, 0, sizeof *out);
    if (j->chakra_dir && j->full)
        return np_err_set(err, NP_ERR_USAGE, "--chakra needs --fidelity fast (the trace is the "
                          "fast run's task graph)");
    if (j->functional && !j->full)
        return np_err_set(err, NP_ERR_USAGE, "--functional needs --fidelity full (values are "
                          "computed by the whole-step programs on the core model)");
    nn_plan *p = NULL;
    run_plan *rp = NULL;
    run_ktimer *kt = NULL;
    trace_layout *lay = NULL;
    run_trace *tr = NULL;
    run_result *res = NULL;
    chakra_rec *crec = NULL;
    char why[RUN_REPORT_WHY_MAX] = "";
    np_status st = run_build_plan(j->model, &j->o, &j->s, &j->optim, j->cfg, &p, why,
                                  sizeof why, err);
    if (st == NP_OK && !j->allow_oom)
        st = run_memory_check(p, err);
    if (st == NP_OK && !j->functional) /* timing: the routing's counts, not the indices' */
        st = rj_mark_routing(j, p, err);
    if (st == NP_OK && j->full) {
        st = rj_run_full(j, p, out, err);
        if (st == NP_OK)
            run_report_set_attention(out, &j->s, why);
        out->wall_s = np_wall_s() - t0;
        nn_plan_free(p);
        return st;
    }
    if (st == NP_OK)
        st = run_plan_build(p, j->cfg, &(run_plan_opts){.nodes_only = j->time_kernel != NULL},
                            &rp, err);
    bool own_kt = !j->ktimer;
    if (st == NP_OK && !j->time_kernel && j->ktimer)
        kt = j->ktimer;
    else if (st == NP_OK && !j->time_kernel)
        st = run_ktimer_create(j->cfg, j->no_cache ? NULL : j->kernel_cache, &kt, err);
    rj_progress prog = {.j = j, .kernels = rp ? rp->n_kspecs : 0};
    if (st == NP_OK && kt && own_kt && j->progress && !j->no_cache)
        run_ktimer_set_progress(kt, rj_kernel_progress, &prog);
    if (st == NP_OK && j->trace_path) {
        st = trace_layout_open(j->trace_path, &j->trace_opts, &lay, err);
        if (st == NP_OK)
            st = run_trace_create(rp, trace_layout_sink(lay), &tr, err);
        if (st == NP_OK)
            run_trace_set_energy(tr, j->cfg);
    }
    if (st == NP_OK && j->chakra_dir)
        st = chakra_rec_create(rp, tr ? run_trace_observer(tr) : NULL, &crec, err);
    if (st == NP_OK) {
        run_opts o = {.steps = j->steps, .time_kernel = j->time_kernel ? j->time_kernel
                                                                       : run_ktimer_time,
                      .time_ctx = j->time_kernel ? j->time_ctx : kt,
                      .no_kernel_cache = j->no_cache, .no_rank_dedup = j->no_dedup,
                      .top_links = j->top_links,
                      .slow = j->faults.slow, .n_slow = j->faults.n_slow,
                      .link_faults = j->faults.links, .n_link_faults = j->faults.n_links,
                      .observer = crec ? chakra_rec_observer(crec)
                                  : tr ? run_trace_observer(tr) : NULL,
                      .progress = j->progress ? rj_run_progress : NULL, .progress_ctx = &prog};
        st = run_simulate(rp->g, j->cfg, NULL, &o, &res, err);
    }
    if (st == NP_OK && crec) {
        chakra_export_info ci;
        st = chakra_export(crec, rp, j->cfg, j->chakra_dir,
                           j->chakra_name ? j->chakra_name : "npusim", &ci, err);
        if (j->chakra_info)
            *j->chakra_info = ci;
    }
    uint64_t left_out = 0;
    if (lay) {
        np_err e2 = {0};
        if (trace_layout_close_counted(lay, &left_out, &e2) != NP_OK && st == NP_OK) {
            *err = e2;
            st = e2.status;
        }
    }
    if (st == NP_OK) {
        run_ktimer_stats ks = kt ? run_ktimer_get_stats(kt) : (run_ktimer_stats){0};
        st = run_report_make(p, rp, j->cfg, res, kt ? &ks : NULL, out, err);
        run_report_set_attention(out, &j->s, why);
        out->trace_left_out = left_out;
        out->faults.n_slow = j->faults.n_slow;
        memcpy(out->faults.slow, j->faults.slow, sizeof out->faults.slow);
        out->faults.n_links = j->faults.n_links;
        memcpy(out->faults.links, j->faults.links, sizeof out->faults.links);
        if (st == NP_OK && j->faults.mtbf_hours > 0)
            st = run_faults_goodput(&j->faults, p, j->cfg, out->step_time_s, out->chips,
                                    &out->faults, err);
        out->wall_s = np_wall_s() - t0;
    }
    run_result_free(res);
    chakra_rec_free(crec);
    run_trace_free(tr);
    if (own_kt)
        run_ktimer_free(kt);
    run_plan_free(rp);
    nn_plan_free(p);
    return st;
}

int64_t run_default_microbatch(int64_t batch, int dp)
{
    int64_t share = dp > 0 && batch % dp == 0 ? batch / dp : 0;
    return share > 0 && share % RUN_DEFAULT_MICROBATCH == 0 ? RUN_DEFAULT_MICROBATCH : share;
}
