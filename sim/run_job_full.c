/* run_job_full.c — `npusim run --fidelity full [--functional]`: the plan's every rank lowered
 * to one program per core and run on the core model (sim/run_full.h); functional runs start
 * from a seeded initialisation and batch, run the reference distributed executor on the same
 * (framework/dist.h), and give the simulated loss beside the executor's (see run_job.h).
 * The values flow as tests/test_run_full.c checks them against one device's. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dist.h"
#include "run_job_impl.h"

/* The simulation's values: the initial ones (parameters loaded, never stepped) from `init`;
 * each data leaf's micro-batch from the global batch as the executor splits it (dist.h: dp
 * rank c takes rows [c B/dp, (c + 1) B/dp), micro-batch mb the mb-th run of `microbatch` of
 * them); what the step leaves goes into `init`, and the losses (one per dp rank and
 * micro-batch: the tp ranks hold the same) are summed. */
typedef struct rjf_io {
    const nn_plan *p;
    nn_dist *init;
    const float *input, *labels;
    float *scratch;
    double loss_sum;
    int n_loss;
} rjf_io;

static const float *rjf_load(void *ctx, int rank, const nn_tensor *t, int mb)
{
    rjf_io *x = ctx;
    const nn_plan *p = x->p;
    const nn_plan_leaf *l = nn_plan_leaf_of(&p->classes[nn_plan_rank_class(p, rank)], t);
    if (!l || l->kind != NN_LEAF_DATA)
        return nn_dist_values(x->init, rank, t, mb);
    int co[NN_MESH_AXES];
    nn_mesh_coords(&p->mesh, rank, co);
    int64_t n = nn_numel(t), row = n / p->microbatch;
    int64_t first = co[NN_MESH_DP] * (p->batch / p->mesh.size[NN_MESH_DP]) +
                    (int64_t)mb * p->microbatch;
    const float *src = strcmp(l->source, "labels") == 0 ? x->labels : x->input;
    memcpy(x->scratch, src + first * row, (size_t)n * sizeof *x->scratch);
    return x->scratch;
}

static np_status rjf_store(void *ctx, int rank, const nn_tensor *t, int mb, const float *v,
                           np_err *err)
{
    rjf_io *x = ctx;
    const nn_plan_class *c = &x->p->classes[nn_plan_rank_class(x->p, rank)];
    if (t == c->loss) {
        int co[NN_MESH_AXES];
        nn_mesh_coords(&x->p->mesh, rank, co);
        if (co[NN_MESH_TP] == 0) {
            x->loss_sum += v[0];
            x->n_loss++;
        }
        return NP_OK;
    }
    float *d = nn_dist_values(x->init, rank, t, mb);
    if (d)
        memcpy(d, v, (size_t)nn_numel(t) * sizeof *d);
    (void)err;
    return NP_OK;
}

/* A deterministic batch: tokens i * 7 mod vocab (or features sin(0.37 i)), labels
 * i * 5 mod classes. */
static void rjf_batch(const nn_model *m, float *in, float *lab)
{
    int64_t classes = m->logits->ne[m->logits->ndim - 1];
    for (int64_t i = 0; i < nn_numel(m->input); i++)
        in[i] = m->input->dtype == NN_I32 ? (float)(i * 7 % classes) : (float)sin((double)i * 0.37);
    for (int64_t i = 0; i < nn_numel(m->labels); i++)
        lab[i] = (float)(i * 5 % classes);
}

np_status rj_full(const run_job *j, const nn_plan *p, run_full_result *fr, double *loss,
                  double *loss_ref, np_err *err)
{
    run_full_opts o = {.top_links = j->top_links, .functional = j->functional,
                       .progress = j->progress, .progress_ctx = j->progress_ctx};
    *loss = *loss_ref = NAN;
    if (!j->functional)
        return run_full_plan(j->cfg, p, &o, fr, err);
    nn_model init = {0};
    nn_dist *ref = NULL, *start = NULL;
    float *in = NULL, *lab = NULL;
    rjf_io x = {.p = p};
    nn_model_opts mo = j->o;
    np_status st = nn_model_build(j->model, &mo, &init, err);
    if (st == NP_OK)
        st = nn_model_init(init.g, j->o.seed, err);
    if (st == NP_OK) {
        in = malloc(((size_t)nn_numel(init.input) + 1) * sizeof *in);
        lab = malloc(((size_t)nn_numel(init.labels) + 1) * sizeof *lab);
        x.scratch = malloc(((size_t)nn_numel(init.input) + (size_t)nn_numel(init.labels) + 1) *
                           sizeof *x.scratch);
        if (!in || !lab || !x.scratch)
            st = np_err_set(err, NP_ERR_NOMEM, "out of memory");
    }
    if (st == NP_OK) {
        rjf_batch(&init, in, lab);
        st = nn_dist_new(p, &ref, err);
    }
    if (st == NP_OK)
        st = nn_dist_new(p, &start, err);
    if (st == NP_OK)
        st = nn_dist_load_params(ref, init.g, err);
    if (st == NP_OK)
        st = nn_dist_load_params(start, init.g, err);
    if (st == NP_OK)
        st = nn_dist_step(ref, in, lab, loss_ref, err);
    if (st == NP_OK) {
        x.init = start, x.input = in, x.labels = lab;
        o.io = (run_full_io){.load = rjf_load, .store = rjf_store, .ctx = &x};
        st = run_full_plan(j->cfg, p, &o, fr, err);
    }
    if (st == NP_OK && x.n_loss)
        *loss = x.loss_sum / x.n_loss;
    nn_dist_free(ref);
    nn_dist_free(start);
    nn_graph_free(init.g);
    free(x.scratch);
    free(in);
    free(lab);
    return st;
}
