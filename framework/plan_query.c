/* plan_query.c — what a plan answers about a rank: its class, groups, peers and
 * rank-dependent values; iteration over its entries in execution order; FLOPs; the
 * analytical bubble. */
#include <string.h>

#include "plan_impl.h"

int nn_plan_rank_class(const nn_plan *p, int rank)
{
    int c[NN_MESH_AXES];
    nn_mesh_coords(&p->mesh, rank, c);
    return c[NN_MESH_PP];
}

int nn_plan_axis_group(const nn_plan *p, int rank, nn_mesh_axis axis, int *ranks, int max)
{
    int c[NN_MESH_AXES];
    nn_mesh_coords(&p->mesh, rank, c);
    int n = p->mesh.size[axis];
    for (int k = 0; k < n && k < max; k++) {
        c[axis] = k;
        ranks[k] = nn_mesh_rank(&p->mesh, c);
    }
    return n;
}

int nn_plan_group(const nn_plan *p, int rank, const nn_plan_entry *e, int *ranks, int max)
{
    nn_mesh_axis axis = nn_comm_tag_axis(e->tag);
    const nn_tensor *t = e->n_nodes ? e->nodes[0] : NULL;
    if (t && t->op == NN_OP_ALL_REDUCE && t->ip[NN_COMM_IP_PEER] == NN_GROUP_ENDS) {
        int c[NN_MESH_AXES];
        nn_mesh_coords(&p->mesh, rank, c);
        int last = p->mesh.size[axis] - 1;
        for (int k = 0; k < 2 && k < max; k++) {
            c[axis] = k ? last : 0;
            ranks[k] = nn_mesh_rank(&p->mesh, c);
        }
        return 2;
    }
    return nn_plan_axis_group(p, rank, axis, ranks, max);
}

int nn_plan_group_chips(const nn_plan *p, int rank, const nn_plan_entry *e, int *chips, int max)
{
    int n = nn_plan_group(p, rank, e, chips, max);
    for (int k = 0; k < n && k < max; k++)
        chips[k] = p->mesh.chip[chips[k]];
    return n;
}

int nn_plan_peer(const nn_plan *p, int rank, const nn_plan_entry *e)
{
    int c[NN_MESH_AXES];
    nn_mesh_coords(&p->mesh, rank, c);
    int pp = p->mesh.size[NN_MESH_PP];
    c[NN_MESH_PP] = ((c[NN_MESH_PP] + e->peer) % pp + pp) % pp;
    return nn_mesh_rank(&p->mesh, c);
}

int64_t nn_plan_rank_value(const nn_plan *p, int rank, const nn_plan_leaf *l)
{
    int c[NN_MESH_AXES];
    nn_mesh_coords(&p->mesh, rank, c);
    return (int64_t)c[l->axis] * l->scale;
}

const nn_plan_leaf *nn_plan_leaf_of(const nn_plan_class *c, const nn_tensor *t)
{
    for (int i = 0; i < c->n_leaves; i++)
        if (c->leaves[i].t == t)
            return &c->leaves[i];
    return NULL;
}

bool nn_plan_node_is_offset_view(const nn_tensor *t)
{
    if (t->op != NN_OP_SHARD_SLICE || t->ip[NN_COMM_IP_TAG] != NN_COMM_PP_SG)
        return false;
    for (int d = 0; d < t->ip[NN_COMM_IP_DIM]; d++)
        if (t->ne[d] != 1)
            return false;
    return true;
}

uint64_t nn_plan_offset_view_bytes(const nn_plan *p, const nn_plan_class *c, int rank,
                                   const nn_tensor *t)
{
    const nn_plan_leaf *l = nn_plan_leaf_of(c, t->src[1]);
    uint64_t row = nn_dtype_size(t->dtype);
    for (int d = (int)t->ip[NN_COMM_IP_DIM] + 1; d < t->ndim; d++)
        row *= (uint64_t)t->ne[d];
    return l ? (uint64_t)nn_plan_rank_value(p, rank, l) * row : 0;
}

/* The leaf under t's chain of in-place updates and views (t itself when there is none). */
static const nn_tensor *nn_plan_buffer_leaf(const nn_tensor *t)
{
    while (t->op != NN_OP_LEAF && t->n_src > 0 &&
           (nn_op_flags(t->op) & (NN_OPF_UPDATE | NN_OPF_VIEW)) != 0)
        t = t->src[0];
    return t;
}

bool nn_plan_entry_is_bucket(const nn_plan_entry *e)
{
    if (e->kind != NN_PLAN_COLLECTIVE || e->n_nodes < 2)
        return false;
    const nn_tensor *n0 = e->nodes[0];
    for (int k = 0; k < e->n_nodes; k++) {
        const nn_tensor *t = e->nodes[k], *leaf = nn_plan_buffer_leaf(t->src[0]);
        if (t->op != NN_OP_ALL_REDUCE || t->dtype != n0->dtype || leaf->op != NN_OP_LEAF ||
            t->ip[NN_COMM_IP_SIZE] != n0->ip[NN_COMM_IP_SIZE] || t->ip[NN_COMM_IP_SIZE] <= 1 ||
            t->region == NN_REGION_FORWARD)
            return false;
        for (int j = 0; j < k; j++) /* a leaf reduced twice in one entry */
            if (nn_plan_buffer_leaf(e->nodes[j]->src[0]) == leaf)
                return false;
    }
    return true;
}

uint64_t nn_plan_comm_node_bytes(const nn_tensor *t)
{
    if (t->op == NN_OP_ALL_GATHER || t->op == NN_OP_RECV)
        return nn_nbytes(t);
    return nn_nbytes(t->src[0]);
}

bool nn_plan_entry_runs(const nn_plan_entry *e, int mb, int n_micro)
{
    return e->when == NN_PLAN_EVERY_MB || mb < 0 || mb == n_micro - 1;
}

void nn_plan_iter_begin(nn_plan_iter *it, const nn_plan *p, const nn_plan_class *c)
{
    memset(it, 0, sizeof *it);
    it->c = c;
    it->n_micro = p->n_micro;
}

const nn_plan_entry *nn_plan_iter_next(nn_plan_iter *it, const nn_plan_block **block, int *mb)
{
    const nn_plan_class *c = it->c;
    int n = c->n_issue ? c->n_issue : c->n_sched;
    while (it->s < n) {
        const nn_plan_issue *pc = c->n_issue ? &c->issue[it->s] : NULL;
        const nn_plan_sched *s = &c->sched[pc ? pc->sched : it->s];
        const nn_plan_block *b = &c->blocks[s->block];
        if (pc && it->e == 0 && pc->sync)
            it->pending = true;
        while (it->e < b->n_entries) {
            const nn_plan_entry *e = &b->entries[it->e++];
            if ((pc && pc->part != NN_PART_ALL && e->part != pc->part) ||
                !nn_plan_entry_runs(e, s->mb, it->n_micro))
                continue;
            it->block = s->block;
            it->entry = it->e - 1;
            it->sync = it->pending || e->sync;
            it->pending = false;
            it->call = pc && (e->kind == NN_PLAN_SEND || e->kind == NN_PLAN_RECV) ? pc->call : 0;
            if (block)
                *block = b;
            if (mb)
                *mb = s->mb;
            return e;
        }
        it->s++;
        it->e = 0;
    }
    return NULL;
}

nn_plan_buffer_kind nn_plan_buffer_kind_of(const nn_tensor *t)
{
    while (t->op != NN_OP_LEAF && (nn_op_flags(t->op) & NN_OPF_UPDATE))
        t = t->src[0];
    if (t->op == NN_OP_LEAF)
        return NN_BUFFER_PERSISTENT;
    if (t->region == NN_REGION_OPTIM || t->chunk < 0)
        return NN_BUFFER_STEP;
    return NN_BUFFER_MICRO;
}

void nn_plan_class_flops(const nn_plan *p, const nn_plan_class *c, double *model_flops,
                         double *hw_flops)
{
    double model = 0, hw = 0;
    nn_plan_iter it;
    nn_plan_iter_begin(&it, p, c);
    const nn_plan_entry *e;
    while ((e = nn_plan_iter_next(&it, NULL, NULL))) {
        if (e->kind != NN_PLAN_COMPUTE)
            continue;
        hw += (double)e->flops;
        if (e->region != NN_REGION_RECOMPUTE)
            model += (double)e->model_flops;
    }
    *model_flops = model;
    *hw_flops = hw;
}

bool nn_plan_block_is_micro(nn_plan_block_kind k)
{
    return k == NN_BLOCK_FORWARD || k == NN_BLOCK_BACKWARD || k == NN_BLOCK_BACKWARD_W;
}

double nn_plan_bubble(const nn_plan *p)
{
    double pp = p->s.pp, m = p->n_micro, v = p->s.virtual_stages;
    if (p->s.schedule != NN_PP_ZB_H1)
        return (pp - 1) / (v * m + pp - 1);
    double t[3] = {0, 0, 0}; /* F, B, W: one micro-batch's hardware FLOPs, all stages */
    for (int c = 0; c < p->n_classes; c++)
        for (int b = 0; b < p->classes[c].n_blocks; b++) {
            const nn_plan_block *blk = &p->classes[c].blocks[b];
            int k = blk->kind == NN_BLOCK_FORWARD ? 0 : blk->kind == NN_BLOCK_BACKWARD ? 1
                    : blk->kind == NN_BLOCK_BACKWARD_W ? 2 : -1;
            for (int e = 0; k >= 0 && e < blk->n_entries; e++)
                if (blk->entries[e].kind == NN_PLAN_COMPUTE &&
                    nn_plan_entry_runs(&blk->entries[e], 0, 2))
                    t[k] += (double)blk->entries[e].flops;
        }
    double bubble = (pp - 1) * (t[0] + t[1] - t[2]), work = m * (t[0] + t[1] + t[2]);
    return bubble + work > 0 ? bubble / (bubble + work) : 0;
}
