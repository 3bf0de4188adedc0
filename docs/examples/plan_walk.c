/* plan_walk.c — the example of docs/parallel.md: build the plan of gpt-tiny under dp2 x tp2 x pp2
 * and walk one rank's step the way a run engine does, entry by entry in schedule order, with
 * the concrete groups and peers of that rank. Built and run by ctest
 * (framework_example.plan_walk). Exits 0 when every send has a peer on the next or previous
 * stage and every collective's group holds the rank. */
#include <stdio.h>

#include "plan.h"

int main(void)
{
    np_err err = {0};
    nn_model_desc d;
    nn_strategy s;
    nn_strategy_default(&s);
    s.dp = s.tp = s.pp = 2;
    s.microbatch = 1;
    nn_model_opts o = {.batch = 8, .compute = NN_BF16, .seed = 1};
    nn_optim adam = {.kind = NN_OPTIM_ADAM, .lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8};
    nn_plan *p = NULL;
    if (nn_model_load("gpt-tiny", &d, &err) != NP_OK ||
        nn_plan_build(&d, &o, &s, &adam, NULL, &p, &err) != NP_OK) {
        fprintf(stderr, "plan_walk: %s\n", err.msg);
        return 1;
    }
    int rank = 5, c[NN_MESH_AXES];
    nn_mesh_coords(&p->mesh, rank, c);
    const nn_plan_class *cls = &p->classes[nn_plan_rank_class(p, rank)];
    printf("rank %d: dp %d, tp %d, pp %d, class %d, %d micro-batches\n", rank, c[NN_MESH_DP],
           c[NN_MESH_TP], c[NN_MESH_PP], cls->stage, p->n_micro);

    nn_plan_iter it;
    nn_plan_iter_begin(&it, p, cls);
    const nn_plan_entry *e;
    const nn_plan_block *b;
    int mb, n[4] = {0}, bad = 0;
    int64_t flops = 0;
    while ((e = nn_plan_iter_next(&it, &b, &mb))) {
        n[e->kind]++;
        if (e->kind == NN_PLAN_COMPUTE) { /* a graph node: op, shapes, dtypes, attributes */
            flops += e->flops;
        } else if (e->kind == NN_PLAN_COLLECTIVE) {
            int ranks[64], chips[64], in = 0;
            int size = nn_plan_group(p, rank, e, ranks, 64);
            nn_plan_group_chips(p, rank, e, chips, 64);
            for (int k = 0; k < size; k++)
                in += ranks[k] == rank;
            bad += in != 1;
            if (n[e->kind] <= 3)
                printf("  %s %s over %d ranks (chips %d..%d), %llu bytes, micro-batch %d\n",
                       nn_op_name(e->nodes[0]->op), nn_comm_tag_name(e->tag), size, chips[0],
                       chips[size - 1], (unsigned long long)e->bytes, mb);
        } else { /* send or recv: the peer along the pipeline */
            int peer = nn_plan_peer(p, rank, e), pc[NN_MESH_AXES];
            nn_mesh_coords(&p->mesh, peer, pc);
            bad += pc[NN_MESH_PP] == c[NN_MESH_PP] || pc[NN_MESH_TP] != c[NN_MESH_TP];
        }
    }
    printf("%d compute, %d collectives, %d sends, %d recvs; %lld FLOPs\n", n[NN_PLAN_COMPUTE],
           n[NN_PLAN_COLLECTIVE], n[NN_PLAN_SEND], n[NN_PLAN_RECV], (long long)flops);
    nn_plan_free(p);
    return bad ? 1 : 0;
}
