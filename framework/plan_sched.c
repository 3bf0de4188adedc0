/* plan_sched.c — pipeline stages and schedules.
 *
 * Partition. The model's forward nodes fall into pipeline units: the nodes before the first
 * layer (embedding), each layer, and the nodes after the last (head and loss). The units are
 * cut into pp x v contiguous model chunks (v = virtual stages), each of at least one unit:
 * balanced by forward FLOPs (the smallest largest chunk, ties broken by the smaller sum of
 * squares) or by the layer counts the strategy gives (the embedding goes with the first
 * chunk, the head with the last). Chunk c runs on stage c mod pp (Megatron's interleaving).
 *
 * Schedules, per stage s of p, m micro-batches (Narayanan et al. 2021, Megatron-LM):
 *   GPipe       F0 .. F(m-1), then B0 .. B(m-1)
 *   1F1B        min(p-s-1, m) warm-up forwards, then one forward and one backward each,
 *               then the remaining backwards
 *   interleaved the m*v (chunk, micro-batch) units of the stage in groups of p micro-batches
 *               per chunk (forward chunk (k/p) mod v, backward the reverse), with
 *               (p-s-1)*2 + (v-1)*p warm-up forwards
 *   ZB-H1       (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024, section 2.1 and
 *               figure 3) each backward split into B and W: min(p-s, m) warm-up forwards
 *               (one more than 1F1B's), then s times B F with their W deferred, then B W F
 *               while forwards remain, then B W for the rest, then the s deferred W. Every
 *               stage then has p micro-batches whose W is not done at most, the number
 *               1F1B's first stage holds, and the bubble is (p-1)(T_F+T_B-T_W) against
 *               1F1B's (p-1)(T_F+T_B+T_W)
 * framed by the STEP_BEGIN and STEP_END blocks. */
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "plan_impl.h"

/* The pipeline unit of every forward node (pb->unit): 0 before the layers, 1..L the layers,
 * L + 1 after; -1 for leaves and parameters. */
static void nn_pb_units(nn_pb *pb, int L)
{
    int n = nn_graph_n_nodes(pb->g0);
    for (int i = 0; i < n; i++) {
        const nn_tensor *x = nn_graph_node(pb->g0, i);
        pb->unit[x->id] = -1;
        if (x->op == NN_OP_LEAF || pb->param[x->id])
            continue;
        int u = 0;
        if (x->layer >= 0) {
            u = x->layer + 1;
        } else {
            for (int s = 0; s < x->n_src; s++)
                if (pb->unit[x->src[s]->id] >= 1)
                    u = L + 1;
        }
        for (int s = 0; s < x->n_src; s++)
            if (pb->unit[x->src[s]->id] > u)
                u = pb->unit[x->src[s]->id] > L ? L + 1 : pb->unit[x->src[s]->id];
        pb->unit[x->id] = u;
    }
    /* a node of parameters and constants alone outside the layers (the tied head's
     * transposed embedding) goes with its first consumer */
    for (int i = n - 1; i >= 0; i--) {
        const nn_tensor *x = nn_graph_node(pb->g0, i);
        if (pb->unit[x->id] < 0 || x->layer >= 0)
            continue;
        bool floating = true;
        for (int s = 0; s < x->n_src && floating; s++)
            floating = (x->src[s]->op == NN_OP_LEAF && x->src[s]->role != NN_ROLE_INPUT) ||
                       pb->param[x->src[s]->id];
        int best = -1;
        for (int u = pb->use_start[x->id]; floating && u < pb->use_start[x->id + 1]; u++) {
            int cu = pb->unit[nn_graph_node(pb->g0, pb->uses[u])->id];
            if (cu >= 0 && (best < 0 || cu < best))
                best = cu;
        }
        if (floating && best >= 0)
            pb->unit[x->id] = best;
    }
}

/* first[0..K]: the chunks of the strategy's layer counts (--stage-layers) over the nu units
 * (indices in units[]); the units before the layers go with chunk 0, after with the last. */
static np_status nn_pb_cut_given(nn_pb *pb, const int *units, int nu, int L, int *first)
{
    const nn_strategy *s = pb->s;
    int K = pb->n_chunks, sum = 0;
    np_err *err = pb->err;
    if (s->n_stage_layers != K)
        return np_err_set(err, NP_ERR_RANGE, "--stage-layers: %d counts for %d model chunks "
                          "(pp x virtual stages)", s->n_stage_layers, K);
    for (int c = 0; c < K; c++) {
        if (s->stage_layers[c] < 0)
            return np_err_set(err, NP_ERR_RANGE, "--stage-layers: count %d is negative", c + 1);
        sum += s->stage_layers[c];
    }
    if (sum != L)
        return np_err_set(err, NP_ERR_RANGE, "--stage-layers: the counts sum to %d, but %s has "
                          "%d layers", sum, pb->plan->model, L);
    /* chunk c: layers [acc, acc + count) */
    int acc = 0, k = 0;
    for (int c = 0; c < K; c++) {
        first[c] = k;
        acc += s->stage_layers[c];
        while (k < nu) {
            int u = units[k];
            if (u == 0 || (u <= L && u - 1 < acc) || (u == L + 1 && c == K - 1))
                k++;
            else
                break;
        }
        if (k == first[c])
            return np_err_set(err, NP_ERR_RANGE, "--stage-layers: model chunk %d would be empty",
                              c);
    }
    first[K] = nu;
    return NP_OK;
}

/* first[0..K]: the linear partition of the nu units (costs cost[units[i]]) into K chunks with
 * the smallest largest chunk, ties broken by the smaller sum of squares. */
static np_status nn_pb_cut_balanced(nn_pb *pb, const int *units, int nu, const double *cost,
                                    int *first)
{
    int K = pb->n_chunks;
    double *pre = nn_calloc((size_t)nu + 1, sizeof *pre);
    double *bmax = nn_malloc((size_t)(K + 1) * (nu + 1) * sizeof *bmax);
    double *bsq = nn_malloc((size_t)(K + 1) * (nu + 1) * sizeof *bsq);
    int *cut = nn_malloc((size_t)(K + 1) * (nu + 1) * sizeof *cut);
    if (!pre || !bmax || !bsq || !cut) {
        free(pre), free(bmax), free(bsq), free(cut);
        return np_err_set(pb->err, NP_ERR_NOMEM, "out of memory partitioning the model");
    }
    for (int i = 0; i < nu; i++)
        pre[i + 1] = pre[i] + cost[units[i]];
#define IX(k, i) ((k) * (nu + 1) + (i))
    for (int k = 0; k <= K; k++)
        for (int i = 0; i <= nu; i++)
            bmax[IX(k, i)] = bsq[IX(k, i)] = DBL_MAX, cut[IX(k, i)] = 0;
    bmax[IX(0, 0)] = bsq[IX(0, 0)] = 0;
    for (int k = 1; k <= K; k++) /* best over the first i units in k chunks */
        for (int i = k; i <= nu; i++)
            for (int j = k - 1; j < i; j++) {
                if (bmax[IX(k - 1, j)] == DBL_MAX)
                    continue;
                double w = pre[i] - pre[j];
                double mx = bmax[IX(k - 1, j)] > w ? bmax[IX(k - 1, j)] : w;
                double sq = bsq[IX(k - 1, j)] + w * w;
                if (mx < bmax[IX(k, i)] || (mx == bmax[IX(k, i)] && sq < bsq[IX(k, i)])) {
                    bmax[IX(k, i)] = mx;
                    bsq[IX(k, i)] = sq;
                    cut[IX(k, i)] = j;
                }
            }
    first[K] = nu;
    for (int k = K, i = nu; k >= 1; k--) {
        first[k - 1] = cut[IX(k, i)];
        i = first[k - 1];
    }
#undef IX
    free(pre), free(bmax), free(bsq), free(cut);
    return NP_OK;
}

/* The chunk of every unit and node (pb->chunk) and the layers of every chunk (p). */
static np_status nn_pb_assign_chunks(nn_pb *pb, nn_plan *p, const int *units, const int *first,
                                     int U, int L)
{
    int K = pb->n_chunks, n = nn_graph_n_nodes(pb->g0);
    int *chunk_of_unit = nn_malloc((size_t)U * sizeof *chunk_of_unit);
    if (!chunk_of_unit)
        return np_err_set(pb->err, NP_ERR_NOMEM, "out of memory partitioning the model");
    for (int c = 0; c < K; c++) {
        p->chunk_layer_first[c] = p->chunk_layer_last[c] = -1;
        for (int k = first[c]; k < first[c + 1]; k++) {
            int u = units[k];
            chunk_of_unit[u] = c;
            if (u >= 1 && u <= L) {
                if (p->chunk_layer_first[c] < 0)
                    p->chunk_layer_first[c] = u - 1;
                p->chunk_layer_last[c] = u - 1;
            }
        }
    }
    for (int i = 0; i < n; i++) {
        const nn_tensor *x = nn_graph_node(pb->g0, i);
        pb->chunk[x->id] = pb->unit[x->id] >= 0 ? chunk_of_unit[pb->unit[x->id]] : -1;
    }
    free(chunk_of_unit);
    return NP_OK;
}

np_status nn_pb_partition(nn_pb *pb, nn_plan *p)
{
    int n = nn_graph_n_nodes(pb->g0), L = 0;
    np_err *err = pb->err;
    for (int i = 0; i < n; i++) {
        const nn_tensor *x = nn_graph_node(pb->g0, i);
        if (x->op != NN_OP_LEAF && x->layer + 1 > L)
            L = x->layer + 1;
    }
    int U = L + 2, K = pb->n_chunks, nu = 0;
    double *cost = nn_calloc((size_t)U, sizeof *cost);
    bool *used = nn_calloc((size_t)U, sizeof *used);
    int *units = nn_malloc((size_t)U * sizeof *units);
    int *first = nn_malloc((size_t)(K + 1) * sizeof *first); /* first unit index of chunk */
    np_status st = NP_OK;
    if (!cost || !used || !units || !first) {
        st = np_err_set(err, NP_ERR_NOMEM, "out of memory partitioning the model");
        goto done;
    }
    nn_pb_units(pb, L);
    for (int i = 0; i < n; i++) {
        const nn_tensor *x = nn_graph_node(pb->g0, i);
        if (pb->unit[x->id] < 0)
            continue;
        used[pb->unit[x->id]] = true;
        cost[pb->unit[x->id]] += (double)nn_node_flops(x);
    }
    for (int u = 0; u < U; u++)
        if (used[u])
            units[nu++] = u;
    const char *name = pb->plan->model;
    if (pb->pp > 1 && pb->pp > L) {
        st = np_err_set(err, NP_ERR_RANGE, "--pp %d is more than the %d layers of %s", pb->pp, L, name);
        goto done;
    }
    if (K > nu) {
        st = np_err_set(err, NP_ERR_RANGE,
                        "--schedule interleaved:%d with --pp %d needs %d model chunks, but %s has "
                        "%d pipeline units (%d layers%s%s)", pb->s->virtual_stages, pb->pp, K, name,
                        nu, L, used[0] ? ", the embedding" : "", used[L + 1] ? " and the head" : "");
        goto done;
    }
    st = pb->s->n_stage_layers ? nn_pb_cut_given(pb, units, nu, L, first)
                               : nn_pb_cut_balanced(pb, units, nu, cost, first);
    if (st == NP_OK)
        st = nn_pb_assign_chunks(pb, p, units, first, U, L);
    p->has_pre_layers = used[0];
done:
    free(cost);
    free(used);
    free(units);
    free(first);
    return st;
}

/* ---- the issue order of host synchronizations and blocking p2p ----
 *
 * Megatron-LM 2021 (megatron/schedules.py, p2p_communication.py) runs a step as compute phases
 * (a forward or backward step of one micro-batch, or of one model chunk's micro-batch) and p2p
 * calls between them: each call sends what the phases before it produced and receives what the
 * phases after it read, as one batch_isend_irecv, then waits for all of it and synchronizes the
 * device; the received parts are all-gathered right after (scatter/gather). Its timers
 * synchronize the device at the start and stop of every phase and call too. The calls:
 *   non-interleaved 1F1B (and GPipe here): recv_forward | F | send_forward in the warm-up;
 *     F | send_forward_recv_backward | B | send_backward_recv_forward in the steady state —
 *     the sends after a forward go with the receives of the backward after it, and the other
 *     way round; the cool-down's recv_backward | B | send_backward alone again. A call whose
 *     stage has nothing to send or receive is not made (the first and last stages).
 *   interleaved: recv_forward before the first phase; after each iteration (a warm-up
 *     forward; a steady forward and backward; a cool-down backward) one call sends what the
 *     iteration produced and receives what the next one reads (send_forward_recv_forward,
 *     send_forward_backward_recv_forward_backward, send_backward_recv_backward), made even
 *     when it has nothing to move; when every unit is a warm-up one the forwards' last send and
 *     the backwards' first receive are calls of their own. */

typedef struct nn_issue_b {
    nn_plan_issue *v;
    int n, cap, call;
    bool pending, host;  /* the next piece follows a synchronization; host_sync */
} nn_issue_b;

static bool nn_issue_add(nn_issue_b *ib, int sched, nn_plan_part part, bool sync, int call)
{
    if (ib->n == ib->cap) {
        int cap = ib->cap ? 2 * ib->cap : 64;
        nn_plan_issue *v = nn_realloc(ib->v, (size_t)cap * sizeof *v);
        if (!v)
            return false;
        ib->v = v, ib->cap = cap;
    }
    ib->v[ib->n++] = (nn_plan_issue){sched, part, sync || ib->pending, call};
    ib->pending = false;
    return true;
}

/* Whether block b of class c has an entry of part `part`. */
static bool nn_block_has(const nn_plan_class *c, int sched, nn_plan_part part)
{
    const nn_plan_block *b = &c->blocks[c->sched[sched].block];
    for (int e = 0; e < b->n_entries; e++)
        if (b->entries[e].part == part)
            return true;
    return false;
}

/* One p2p call: the sends of schedule steps snd[0..ns) and the receives of rcv[0..nr), then
 * the receives' gathers; made when it moves something or `always`. */
static bool nn_issue_call(nn_issue_b *ib, const nn_plan_class *c, const int *snd, int ns,
                          const int *rcv, int nr, bool always)
{
    bool any = always;
    for (int i = 0; i < ns; i++)
        any = any || nn_block_has(c, snd[i], NN_PART_SEND);
    for (int i = 0; i < nr; i++)
        any = any || nn_block_has(c, rcv[i], NN_PART_RECV);
    if (!any)
        return true;
    int call = ++ib->call;
    bool first = true;
    for (int i = 0; i < ns; i++, first = false)
        if (!nn_issue_add(ib, snd[i], NN_PART_SEND, first && ib->host, call))
            return false;
    for (int i = 0; i < nr; i++, first = false)
        if (!nn_issue_add(ib, rcv[i], NN_PART_RECV, first && ib->host, call))
            return false;
    ib->pending = true; /* the call's torch.cuda.synchronize() */
    for (int i = 0; i < nr; i++)
        if (!nn_issue_add(ib, rcv[i], NN_PART_GATHER, false, 0))
            return false;
    return true;
}

/* The calls of blocking p2p between c's compute phases (the comment above). False: out of
 * memory. */
static bool nn_issue_calls(nn_issue_b *ib, const nn_plan *p, const nn_plan_class *c)
{
    int last = c->n_sched - 1, first_bwd = last, n_it = 0;
    bool inter = p->s.schedule == NN_PP_INTERLEAVED, ok = true;
    for (int s = 1; s < last && first_bwd == last; s++)
        if (c->blocks[c->sched[s].block].kind == NN_BLOCK_BACKWARD)
            first_bwd = s;
    /* every forward before the first backward: all warm-up units (m = p) */
    bool all_warm = inter && 2 * (first_bwd - 1) == last - 1;
    /* iterations: runs of schedule steps 1 .. last-1, an interleaved steady forward with its
     * backward */
    int *first = nn_malloc(((size_t)c->n_sched + 1) * sizeof *first);
    if (!first)
        return false;
    for (int s = 1; s < last;) {
        first[n_it++] = s;
        bool pair = inter && !all_warm && s + 1 < last && s + 1 >= first_bwd &&
                    c->blocks[c->sched[s].block].kind == NN_BLOCK_FORWARD &&
                    c->blocks[c->sched[s + 1].block].kind == NN_BLOCK_BACKWARD;
        s += pair ? 2 : 1;
    }
    first[n_it] = last;
    int rcv0[2] = {first[0], first[0] + 1};
    if (n_it)
        ok = nn_issue_call(ib, c, NULL, 0, rcv0, first[1] - first[0], false);
    for (int k = 0; ok && k < n_it; k++) {
        int a = first[k], b = first[k + 1], nb = k + 1 < n_it ? first[k + 2] - b : 0;
        int snd[2] = {a, a + 1}, rcv[2] = {b, b + 1};
        for (int s = a; ok && s < b; s++)
            ok = nn_issue_add(ib, s, NN_PART_COMPUTE, ib->host, 0);
        nn_plan_block_kind here = c->blocks[c->sched[a].block].kind;
        bool merge = inter ? !(all_warm && here == NN_BLOCK_FORWARD && nb &&
                               c->blocks[c->sched[b].block].kind == NN_BLOCK_BACKWARD)
                           : nb && c->blocks[c->sched[b].block].kind != here;
        if (ok && merge)
            ok = nn_issue_call(ib, c, snd, b - a, rcv, nb, inter);
        else if (ok)
            ok = nn_issue_call(ib, c, snd, b - a, NULL, 0, inter) &&
                 nn_issue_call(ib, c, NULL, 0, rcv, nb, false);
    }
    free(first);
    return ok;
}

/* Fills c->issue when the strategy's host synchronizations or blocking p2p shape the order
 * (else leaves it empty: the schedule's order). */
static np_status nn_pb_issue(const nn_plan *p, nn_plan_class *c, np_err *err)
{
    bool p2p = p->s.p2p_blocking && p->s.pp > 1;
    if (!p2p && !p->s.host_sync)
        return NP_OK;
    nn_issue_b ib = {.host = p->s.host_sync};
    int last = c->n_sched - 1;
    bool ok = nn_issue_add(&ib, 0, NN_PART_ALL, false, 0);
    if (p2p)
        ok = ok && nn_issue_calls(&ib, p, c);
    else /* every phase its own, synchronized before */
        for (int s = 1; ok && s < last; s++)
            ok = nn_issue_add(&ib, s, NN_PART_ALL, true, 0);
    if (ok)
        ok = nn_issue_add(&ib, last, NN_PART_ALL, ib.host || ib.pending, 0);
    if (!ok) {
        free(ib.v);
        return np_err_set(err, NP_ERR_NOMEM, "out of memory building schedules");
    }
    c->issue = ib.v;
    c->n_issue = ib.n;
    return NP_OK;
}

np_status nn_pb_schedules(nn_plan *p, np_err *err)
{
    const nn_strategy *S = &p->s;
    int pp = p->s.pp, v = p->s.schedule == NN_PP_INTERLEAVED ? p->s.virtual_stages : 1;
    int m = p->n_micro;
    for (int s = 0; s < pp; s++) {
        nn_plan_class *c = &p->classes[s];
        int n = nn_pb_per_chunk(S) * m * v + 2, k = 0;
        c->sched = nn_malloc((size_t)n * sizeof *c->sched);
        if (!c->sched)
            return np_err_set(err, NP_ERR_NOMEM, "out of memory building schedules");
        c->sched[k++] = (nn_plan_sched){0, -1};
#define F(vi, mb) (c->sched[k++] = (nn_plan_sched){nn_pb_fwd_block(S, vi), (mb)})
#define B(vi, mb) (c->sched[k++] = (nn_plan_sched){nn_pb_bwd_block(S, vi), (mb)})
#define W(mb) (c->sched[k++] = (nn_plan_sched){nn_pb_w_block(S, 0), (mb)})
        if (p->s.schedule == NN_PP_ZB_H1) {
            int f = 0, b = 0, w = 0, warm = pp - s < m ? pp - s : m;
            while (f < warm)
                F(0, f++);
            for (int i = 0; i < s && f < m; i++) {
                B(0, b++);
                F(0, f++);
            }
            while (f < m) {
                B(0, b++);
                W(w++);
                F(0, f++);
            }
            while (b < m) {
                B(0, b++);
                W(w++);
            }
            while (w < m)
                W(w++);
        } else if (p->s.schedule == NN_PP_GPIPE) {
            for (int i = 0; i < m; i++)
                F(0, i);
            for (int i = 0; i < m; i++)
                B(0, i);
        } else if (v == 1) {
            int warm = pp - s - 1 < m ? pp - s - 1 : m;
            for (int i = 0; i < warm; i++)
                F(0, i);
            for (int i = 0; i < m - warm; i++) {
                F(0, warm + i);
                B(0, i);
            }
            for (int i = m - warm; i < m; i++)
                B(0, i);
        } else {
            int total = m * v, warm = (pp - s - 1) * 2 + (v - 1) * pp;
            if (warm > total)
                warm = total;
#define FCHUNK(u) (((u) / pp) % v)
#define BCHUNK(u) (v - 1 - ((u) / pp) % v)
#define MB(u) (((u) / (pp * v)) * pp + (u) % pp)
            for (int u = 0; u < warm; u++)
                F(FCHUNK(u), MB(u));
            for (int i = 0; i < total - warm; i++) {
                F(FCHUNK(warm + i), MB(warm + i));
                B(BCHUNK(i), MB(i));
            }
            for (int u = total - warm; u < total; u++)
                B(BCHUNK(u), MB(u));
#undef FCHUNK
#undef BCHUNK
#undef MB
        }
#undef F
#undef B
#undef W
        c->sched[k++] = (nn_plan_sched){1 + nn_pb_per_chunk(S) * v, -1};
        c->n_sched = k;
        np_status st = nn_pb_issue(p, c, err);
        if (st != NP_OK)
            return st;
    }
    return NP_OK;
}
