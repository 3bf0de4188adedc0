/* pass_fuse.c — elementwise fusion groups for the compiler (matmul/conv epilogues and
 * chains of elementwise ops). The pass only records groups (t->fusion_group); the graph is
 * unchanged, so values cannot change. */
#include <stdlib.h>

#include "pass.h"

int nn_pass_fuse(nn_graph *g)
{
    int *uses = nn_graph_use_counts(g);
    nn_tensor **order;
    int n, groups = 0;
    np_err e = {0};
    if (!uses || nn_schedule(g, &order, &n, &e) != NP_OK) {
        free(uses);
        return 0;
    }
    for (int i = 0; i < n; i++)
        order[i]->fusion_group = -1;
    for (int i = 0; i < n; i++) {
        nn_tensor *t = order[i];
        unsigned fl = nn_op_flags(t->op);
        if (!(fl & (NN_OPF_ELEM | NN_OPF_VIEW)) || t->op == NN_OP_LEAF)
            continue;
        for (int s = 0; s < t->n_src; s++) {
            nn_tensor *p = t->src[s];
            if (p->op == NN_OP_LEAF || (nn_op_flags(p->op) & NN_OPF_UPDATE) ||
                uses[p->id] != 1 || p->is_output || nn_numel(p) != nn_numel(t))
                continue;
            if (p->fusion_group < 0) {
                p->fusion_group = p->id;
                groups++;
            }
            t->fusion_group = p->fusion_group;
            break;
        }
    }
    free(uses);
    free(order);
    return groups;
}
