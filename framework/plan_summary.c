/* plan_summary.c — what `npusim plan` reports, computed here so that tests and the run engine
 * can have it too: per stage, the collectives and point-to-point transfers one rank issues
 * in a step (grouped by kind, axis, group size and bytes), its memory by role and its FLOPs;
 * the step's FLOPs over every rank. */
#include <stdlib.h>
#include <string.h>

#include "plan_impl.h"

void nn_plan_summary_free(nn_plan_summary *s)
{
    free(s->rows);
    free(s->mem);
    free(s->model_flops);
    free(s->hw_flops);
    memset(s, 0, sizeof *s);
}

np_status nn_plan_summarize(const nn_plan *p, nn_plan_summary *s, np_err *err)
{
    memset(s, 0, sizeof *s);
    int nc = p->n_classes, cap = 0;
    s->mem = nn_calloc((size_t)nc, sizeof *s->mem);
    s->model_flops = nn_calloc((size_t)nc, sizeof *s->model_flops);
    s->hw_flops = nn_calloc((size_t)nc, sizeof *s->hw_flops);
    if (!s->mem || !s->model_flops || !s->hw_flops)
        goto oom;
    double per_class_ranks = (double)p->mesh.size[NN_MESH_DP] * p->mesh.size[NN_MESH_TP];
    for (int c = 0; c < nc; c++) {
        const nn_plan_class *cls = &p->classes[c];
        if (nn_plan_class_memory(p, cls, &s->mem[c], err) != NP_OK) {
            nn_plan_summary_free(s);
            return err->status;
        }
        if (s->mem[c].total_bytes > s->mem[s->largest].total_bytes)
            s->largest = c;
        nn_plan_class_flops(p, cls, &s->model_flops[c], &s->hw_flops[c]);
        s->flops_per_step += s->model_flops[c] * per_class_ranks;
        s->hw_flops_per_step += s->hw_flops[c] * per_class_ranks;
        int first = s->n_rows;
        nn_plan_iter it;
        nn_plan_iter_begin(&it, p, cls);
        const nn_plan_entry *e;
        while ((e = nn_plan_iter_next(&it, NULL, NULL))) {
            if (e->kind == NN_PLAN_COMPUTE)
                continue;
            nn_plan_comm_row row = {c, e->nodes[0]->op, e->tag,
                                    e->kind == NN_PLAN_COLLECTIVE ? e->group_size : 2, e->bytes, 1};
            int k = first;
            while (k < s->n_rows && !(s->rows[k].op == row.op && s->rows[k].tag == row.tag &&
                                      s->rows[k].group_size == row.group_size &&
                                      s->rows[k].bytes == row.bytes))
                k++;
            if (k < s->n_rows) {
                s->rows[k].count++;
                continue;
            }
            if (s->n_rows == cap) {
                cap = cap ? 2 * cap : 64;
                nn_plan_comm_row *r = nn_realloc(s->rows, (size_t)cap * sizeof *r);
                if (!r)
                    goto oom;
                s->rows = r;
            }
            s->rows[s->n_rows++] = row;
        }
    }
    return NP_OK;
oom:
    nn_plan_summary_free(s);
    return np_err_set(err, NP_ERR_NOMEM, "out of memory summarizing the plan");
}
