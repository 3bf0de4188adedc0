/* lower_verify.c — lower_prog_verify: a lowered program checked against what it was lowered
 * from, after the fact.
 *
 *   - memory: every operand of every kernel (inputs, outputs, epilogue arguments) lies whole
 *     inside one data section of the program (.data or .bss: the leaves and the arena), and a
 *     kernel stores its value where lower_addr_mb says that value lives;
 *   - totals: the program's FLOPs and HBM bytes are its kernels' sums;
 *   - a plan's rank: its kernels are the compute entries of its class in issue order
 *     (nn_plan_iter), each instance of an entry whose node lowers to a kernel exactly once,
 *     none out of order or from elsewhere; its communication records are instances of its
 *     communication entries in issue order, every one that moves bytes over a group of two
 *     or more present (a bucket at most once: packed with the buckets after it it has no
 *     record of its own; other entries once per node at most).
 */
#include <inttypes.h>
#include <stdio.h>

#include "lower.h"

static np_status lv_operand(const lower_prog *lp, const lower_step *s, uint32_t k,
                            const kc_tensor *x, const char *role, np_err *err)
{
    uint64_t lo = x->addr, hi = x->addr + kc_tensor_extent(x);
    for (uint32_t d = 0; d < lp->prog->n_data; d++) {
        const isa_data *sec = &lp->prog->data[d];
        if (lo >= sec->addr && hi <= sec->addr + sec->size && hi >= lo)
            return NP_OK;
    }
    char desc[160];
    return np_err_set(err, NP_ERR_INTERNAL, "lowered program: kernel %" PRIu32 " (%s) %s at "
                      "0x%" PRIx64 "..0x%" PRIx64 " is in no data section of the program", k,
                      lower_node_desc(s->node, desc, sizeof desc), role, lo, hi);
}

static np_status lv_memory(const lower_prog *lp, np_err *err)
{
    uint64_t flops = 0, bytes = 0;
    for (uint32_t k = 0; k < lp->n_steps; k++) {
        const lower_step *s = &lp->steps[k];
        const kc_kernel *kk = &s->k;
        np_status st = NP_OK;
        for (int i = 0; i < kk->n_in && st == NP_OK; i++)
            st = lv_operand(lp, s, k, &kk->in[i], "an input", err);
        for (int i = 0; i < kk->n_out && st == NP_OK; i++)
            st = lv_operand(lp, s, k, &kk->out[i], "an output", err);
        for (int i = 0; i < kk->n_epi && st == NP_OK; i++)
            if (kk->epi[i].has_arg)
                st = lv_operand(lp, s, k, &kk->epi[i].arg, "an epilogue argument", err);
        if (st != NP_OK)
            return st;
        uint64_t at = lower_addr_mb(lp, s->last, s->mb);
        if (!(nn_op_flags(s->node->op) & NN_OPF_UPDATE) && at != UINT64_MAX &&
            kk->n_out && kk->out[0].addr != at) {
            char desc[160];
            return np_err_set(err, NP_ERR_INTERNAL, "lowered program: kernel %" PRIu32 " (%s) "
                              "stores %s at 0x%" PRIx64 ", where the program keeps it at 0x%"
                              PRIx64, k, lower_node_desc(s->node, desc, sizeof desc),
                              s->last->name, kk->out[0].addr, at);
        }
        flops += s->res.flops;
        bytes += s->res.hbm_read_bytes + s->res.hbm_write_bytes;
    }
    if (flops != lp->flops || bytes != lp->hbm_bytes)
        return np_err_set(err, NP_ERR_INTERNAL, "lowered program: %" PRIu64 " FLOPs and %" PRIu64
                          " HBM bytes, its kernels' sums are %" PRIu64 " and %" PRIu64,
                          lp->flops, lp->hbm_bytes, flops, bytes);
    return NP_OK;
}

/* Whether a step's or record's instance rec_mb is the iteration's micro-batch mb: the same,
 * a per-step buffer's (-1), or, for a step block (mb -1), the last micro-batch's buffer it
 * reads (lower_plan.c's lw_src_inst). */
static bool lv_same_mb(int rec_mb, int mb, int last)
{
    return rec_mb == mb || rec_mb == -1 || (mb == -1 && rec_mb == last);
}

static np_status lv_plan(const lower_prog *lp, const nn_plan *p, int rank, np_err *err)
{
    const nn_plan_class *c = &p->classes[nn_plan_rank_class(p, rank)];
    nn_plan_iter it;
    nn_plan_iter_begin(&it, p, c);
    const nn_plan_entry *e;
    int mb;
    uint32_t j = 0, k = 0;
    while ((e = nn_plan_iter_next(&it, NULL, &mb))) {
        if (e->kind == NN_PLAN_COMPUTE) {
            const nn_tensor *t = e->nodes[0];
            if (j < lp->n_steps && lp->steps[j].e == e && lv_same_mb(lp->steps[j].mb, mb, p->n_micro - 1)) {
                j++;
                continue;
            }
            if (t->id <= lp->max_id && lp->kind[t->id] == LOWER_NODE_KERNEL &&
                t->op != NN_OP_ATTENTION_LSE)
                return np_err_set(err, NP_ERR_INTERNAL, "lowered program of rank %d: no kernel "
                                  "for %s (micro-batch %d) where the plan issues it (kernel %"
                                  PRIu32 " of %" PRIu32 ")", rank, t->name, mb, j, lp->n_steps);
            continue;
        }
        uint32_t n = 0;
        while (k < lp->n_comm && lp->comm[k].e == e && lv_same_mb(lp->comm[k].mb, mb, p->n_micro - 1))
            k++, n++;
        /* buckets may be packed into one collective with the buckets after them (the local
         * DDP's one all-reduce per model chunk: lower_coll.c), named by the first */
        bool bucket = nn_plan_entry_is_bucket(e);
        bool moves = e->group_size > 1 && e->bytes > 0;
        if ((moves && n == 0 && !bucket) || n > (uint32_t)(bucket ? 1 : e->n_nodes))
            return np_err_set(err, NP_ERR_INTERNAL, "lowered program of rank %d: %" PRIu32 " "
                              "communication records for %s (micro-batch %d, %d ranks, %" PRIu64
                              " bytes), where the plan issues it", rank, n, e->nodes[0]->name,
                              mb, e->group_size, e->bytes);
    }
    if (j != lp->n_steps || k != lp->n_comm)
        return np_err_set(err, NP_ERR_INTERNAL, "lowered program of rank %d: kernel %" PRIu32
                          " of %" PRIu32 " or communication record %" PRIu32 " of %" PRIu32
                          " is no instance of the plan in its issue order", rank, j,
                          lp->n_steps, k, lp->n_comm);
    return NP_OK;
}

np_status lower_prog_verify(const lower_prog *lp, const nn_plan *p, int rank, np_err *err)
{
    np_status st = lv_memory(lp, err);
    return st == NP_OK && p ? lv_plan(lp, p, rank, err) : st;
}
