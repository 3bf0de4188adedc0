/* run_full.c — full fidelity: lowered steps executed by the core model (see run_full.h). */
#include "run_full.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "core_func.h"
#include "evq.h"
#include "kernel.h"

/* ---- host access ------------------------------------------------------------------------- */

np_status run_full_write(hw_system *sys, uint32_t chip, uint64_t addr, nn_dtype dt,
                         const float *v, int64_t n, np_err *err)
{
    isa_dtype d = kc_isa_dtype(dt);
    size_t es = nn_dtype_size(dt);
    uint8_t *b = malloc((size_t)n * es + 1);
    if (!b)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory writing HBM");
    for (int64_t i = 0; i < n; i++)
        core_elem_put(b + (size_t)i * es, d, v[i]);
    np_status st = hw_system_hbm_write(sys, chip, addr, b, (uint64_t)n * es, err);
    free(b);
    return st;
}

np_status run_full_read(hw_system *sys, uint32_t chip, uint64_t addr, nn_dtype dt, float *v,
                        int64_t n, np_err *err)
{
    isa_dtype d = kc_isa_dtype(dt);
    size_t es = nn_dtype_size(dt);
    uint8_t *b = malloc((size_t)n * es + 1);
    if (!b)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory reading HBM");
    np_status st = hw_system_hbm_read(sys, chip, addr, b, (uint64_t)n * es, err);
    for (int64_t i = 0; st == NP_OK && i < n; i++)
        v[i] = (float)core_elem_get(b + (size_t)i * es, d);
    free(b);
    return st;
}

/* ---- one graph on one chip ---------------------------------------------------------------- */

void run_full_graph_result_free(run_full_graph_result *r)
{
    lower_prog_free(r->lp);
    core_report_free(r->report);
    memset(r, 0, sizeof *r);
}

/* A chip that did not end DONE as an error naming its state. */
static np_status run_full_chip_ok(hw_system *sys, uint32_t chip, np_err *err)
{
    hw_chip_state s = hw_system_chip_state(sys, chip);
    if (s == HW_CHIP_DONE)
        return NP_OK;
    np_err e = {0};
    hw_system_chip_error(sys, chip, &e);
    return np_err_set(err, NP_ERR_INTERNAL, "chip %" PRIu32 "'s step program ended %s%s%s", chip,
                      hw_chip_state_names[s], e.msg[0] ? ": " : "", e.msg);
}

/* Whether leaf t's values go back to the graph after the run. */
static bool run_full_readback(const nn_tensor *t)
{
    return (t->op == NN_OP_LEAF && t->role != NN_ROLE_CONST && t->role != NN_ROLE_INPUT) ||
           t->is_output;
}

np_status run_full_graph(const arch_config *cfg, nn_graph *g, const run_full_graph_opts *opts,
                         run_full_graph_result *out, np_err *err)
{
    memset(out, 0, sizeof *out);
    run_full_graph_opts o = opts ? *opts : (run_full_graph_opts){0};
    evq *q = NULL;
    hw_system *sys = NULL;
    np_status st = lower_graph(cfg, g, &o.lower, &out->lp, err);
    if (st != NP_OK)
        return st;
    const lower_prog *lp = out->lp;
    hw_system_opts so = {.n_chips = 1, .functional = o.functional, .trace = o.trace,
                         .trace_ctx = o.trace_ctx};
    if ((st = evq_create(&q, err)) != NP_OK ||
        (st = hw_system_create(cfg, q, &so, &sys, err)) != NP_OK ||
        (st = hw_system_load(sys, 0, lp->prog, err)) != NP_OK)
        goto done;
    int n = nn_graph_n_nodes(g);
    for (int i = 0; o.functional && i < n && st == NP_OK; i++) {
        const nn_tensor *t = nn_graph_node(g, i);
        if (t->op == NN_OP_LEAF && t->data && lower_addr(lp, t) != UINT64_MAX &&
            !(t->role == NN_ROLE_CONST && t->data)) /* constants are the program's .data */
            st = run_full_write(sys, 0, lower_addr(lp, t), t->dtype, t->data, nn_numel(t), err);
    }
    if (st != NP_OK || (st = hw_system_start(sys, 0, err)) != NP_OK ||
        (st = evq_run(q, err)) != NP_OK)
        goto done;
    hw_system_check(sys);
    if ((st = run_full_chip_ok(sys, 0, err)) != NP_OK ||
        (st = hw_system_report(sys, 0, NULL, &out->report, err)) != NP_OK)
        goto done;
    out->cycles = out->report->total_cycles;
    out->time_ps = out->report->total_ps;
    /* values back: first into scratch copies, so that g is unchanged on failure */
    float **back = calloc((size_t)n + 1, sizeof *back);
    if (!back) {
        st = np_err_set(err, NP_ERR_NOMEM, "out of memory reading the step's results");
        goto done;
    }
    for (int i = 0; o.functional && i < n && st == NP_OK; i++) {
        nn_tensor *t = nn_graph_node(g, i);
        if (!run_full_readback(t) || lower_addr(lp, t) == UINT64_MAX)
            continue;
        if (!(back[i] = malloc((size_t)nn_numel(t) * sizeof(float) + 1)))
            st = np_err_set(err, NP_ERR_NOMEM, "out of memory reading the step's results");
        else
            st = run_full_read(sys, 0, lower_addr(lp, t), t->dtype, back[i], nn_numel(t), err);
    }
    for (int i = 0; o.functional && i < n && st == NP_OK; i++) {
        nn_tensor *t = nn_graph_node(g, i);
        if (back[i] && !nn_tensor_set(t, back[i]))
            st = np_err_set(err, NP_ERR_NOMEM, "out of memory reading the step's results");
    }
    for (int i = 0; st == NP_OK && i < n; i++) { /* as nn_graph_compute counts steps */
        nn_tensor *t = nn_graph_node(g, i);
        if ((t->op == NN_OP_SGD_UPDATE || t->op == NN_OP_ADAM_UPDATE ||
             t->op == NN_OP_ADAMW_UPDATE) && lp->kind[t->id] == LOWER_NODE_KERNEL)
            t->ip[0]++;
    }
    for (int i = 0; i < n; i++)
        free(back[i]);
    free(back);
done:
    hw_system_free(sys);
    evq_free(q);
    if (st != NP_OK)
        run_full_graph_result_free(out);
    return st;
}
