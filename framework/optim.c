/* optim.c — optimizer updates as graph ops (SGD with momentum, Adam, AdamW) and
 * nn_optim_step, which appends one update per trained parameter.
 *
 * An update node writes its src[0] (the parameter) and its state sources in place; its
 * output aliases the parameter's storage. Updates are roots for dead-code elimination and
 * the scheduler runs each after every other reader of its parameter, as soon as its gradient
 * is complete.
 *
 *   SGD_UPDATE  (p, g, mom)   fp: lr, momentum, weight_decay          (PyTorch SGD)
 *   ADAM_UPDATE (p, g, m, v)  fp: lr, beta1, beta2, eps, weight_decay (L2 added to g)
 *   ADAMW_UPDATE(p, g, m, v)  same, decoupled weight decay (Loshchilov & Hutter)
 *   ip[0] counts the steps taken (bias correction).
 *
 * Mixed precision: parameters and state stay f32 (master weights); the model computes on
 * nn_cast(p, NN_BF16) and the cast's backward returns an f32 gradient.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "op_kernels.h"
#include "optim.h"

np_status nn_infer_update(nn_tensor *t, np_err *err)
{
    const nn_tensor *p = t->src[0];
    for (int i = 1; i < t->n_src; i++)
        if (!nn_same_shape(t->src[i], p))
            return nn_infer_fail(t, err, NP_ERR_INCONSISTENT, "input %d differs from the parameter's shape", i);
    int want = t->op == NN_OP_SGD_UPDATE ? 3 : 4;
    if (t->n_src != want)
        return nn_infer_fail(t, err, NP_ERR_INCONSISTENT, "takes %d inputs", want);
    nn_set_shape(t, p->ndim, p->ne);
    t->dtype = p->dtype;
    return NP_OK;
}

void nn_fwd_update(nn_tensor *t)
{
    float *p = t->src[0]->data;
    const float *gr = t->src[1]->data;
    int64_t n = nn_numel(t);
    double lr = t->fp[0];
    t->ip[0]++;
    if (t->op == NN_OP_SGD_UPDATE) {
        float *mom = t->src[2]->data;
        double mu = t->fp[1], wd = t->fp[2];
        for (int64_t i = 0; i < n; i++) {
            double g = gr[i] + wd * p[i];
            double b = t->ip[0] == 1 ? g : mu * mom[i] + g;
            mom[i] = (float)b;
            p[i] = (float)(p[i] - lr * b);
        }
    } else {
        float *m = t->src[2]->data, *v = t->src[3]->data;
        double b1 = t->fp[1], b2 = t->fp[2], eps = t->fp[3], wd = t->fp[4];
        double c1 = 1.0 - pow(b1, (double)t->ip[0]), c2 = 1.0 - pow(b2, (double)t->ip[0]);
        bool decoupled = t->op == NN_OP_ADAMW_UPDATE;
        for (int64_t i = 0; i < n; i++) {
            double g = gr[i] + (decoupled ? 0.0 : wd * p[i]);
            m[i] = (float)(b1 * m[i] + (1.0 - b1) * g);
            v[i] = (float)(b2 * v[i] + (1.0 - b2) * g * g);
            double step = lr * (m[i] / c1) / (sqrt(v[i] / c2) + eps);
            double pv = p[i];
            if (decoupled)
                pv -= lr * wd * pv;
            p[i] = (float)(pv - step);
        }
    }
}

int64_t nn_flops_update(const nn_tensor *t)
{
    return (t->op == NN_OP_SGD_UPDATE ? 4 : 12) * nn_numel(t);
}

static nn_tensor *nn_optim_state(nn_graph *g, const nn_tensor *p, const char *suffix)
{
    char name[NN_NAME_MAX];
    snprintf(name, sizeof name, "%.80s.%s", p->name, suffix);
    nn_tensor *s = nn_leaf(g, name, NN_ROLE_OPTSTATE, NN_F32, p->ndim, p->ne);
    if (s)
        snprintf(s->name, sizeof s->name, "%s", name); /* not under the current scope */
    return s;
}

np_status nn_optim_step(nn_graph *g, const nn_optim *opt, np_err *err)
{
    int n = nn_graph_n_nodes(g);
    nn_graph_set_region(g, NN_REGION_OPTIM);
    char scope[NN_NAME_MAX];
    snprintf(scope, sizeof scope, "%s", nn_graph_scope(g));
    nn_graph_set_scope(g, "%s", "");
    for (int i = 0; i < n; i++) {
        nn_tensor *p = nn_graph_node(g, i);
        if (!p->trainable || !p->grad)
            continue;
        nn_graph_set_scope(g, "%s", p->scope); /* the update belongs to the layer */
        nn_tensor *srcs[4] = {p, p->grad, NULL, NULL};
        double fp[NN_MAX_FPARAMS] = {opt->lr};
        nn_op op;
        int ns;
        if (opt->kind == NN_OPTIM_SGD) {
            op = NN_OP_SGD_UPDATE;
            ns = 3;
            srcs[2] = nn_optim_state(g, p, "momentum");
            fp[1] = opt->momentum;
            fp[2] = opt->weight_decay;
        } else {
            op = opt->kind == NN_OPTIM_ADAM ? NN_OP_ADAM_UPDATE : NN_OP_ADAMW_UPDATE;
            ns = 4;
            srcs[2] = nn_optim_state(g, p, "adam_m");
            srcs[3] = nn_optim_state(g, p, "adam_v");
            fp[1] = opt->beta1;
            fp[2] = opt->beta2;
            fp[3] = opt->eps;
            fp[4] = opt->weight_decay;
        }
        if (!srcs[2] || (ns == 4 && !srcs[3]))
            break;
        /* Storage for state exists whenever the parameter has values (executor runs). */
        for (int s = 2; s < ns; s++)
            if (p->data && !nn_tensor_alloc(srcs[s]))
                return np_err_set(err, NP_ERR_NOMEM, "out of memory for optimizer state");
        nn_tensor *u = nn_node(g, op, ns, srcs, NULL, fp);
        if (!u)
            break;
        nn_tensor_set_name(u, "%.80s.update", p->name);
        /* Run as soon as the gradient is complete (and every reader of p is done), so that
         * gradients do not pile up until the end of the backward pass. */
        u->sched_key = p->grad->sched_key + 0.25;
        nn_graph_set_output(g, u);
    }
    nn_graph_set_region(g, NN_REGION_FORWARD);
    nn_graph_set_scope(g, "%s", scope);
    return nn_graph_status(g, err);
}
