/* kc_matmul.c — matmul (batched, any operand transposed) through the kernel ABI, and the
 * planning it shares with conv2d (kc_conv.c): the checks of its operands and layouts, the
 * plan of the GEMM schedule (kc_gemm_emit.c emits it; docs/compiler.md, "The GEMM kernels"),
 * the epilogue's plan, the tile and variant choice, its framework reference, its `npusim
 * kernel --op` keys and its table row. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "kc_gemm.h"

#define min_u64 kmm_min
#define cdiv kmm_cdiv

/* ---- tiles ---------------------------------------------------------------------------------- */

np_status kc_gemm_tiles(const arch_config *cfg, const kc_gemm_shape *g, uint64_t spad,
                        uint64_t acc, uint64_t *tm_io, uint64_t *tn_io, uint64_t *tk_io,
                        np_err *err)
{
    if (!g->m || !g->n || !g->k)
        return np_err_set(err, NP_ERR_RANGE, "a %llux%llux%llu GEMM: M, N and K must be >= 1",
                          (unsigned long long)g->m, (unsigned long long)g->n,
                          (unsigned long long)g->k);
    uint64_t e = g->e, ce = g->ce;
    uint64_t R = (uint64_t)cfg->core.array_rows, C = (uint64_t)cfg->core.array_cols;
    /* The dimension the dataflow streams through time (os: K, ws: M, is: N) gets the largest
     * tile the memories allow: splitting it makes every fold pay its fill and drain again.
     * The two spatial dimensions get 4 array widths, so folds stay whole. The buffers beyond
     * A, B (double) and C count as kc_gemm_shape says. */
    uint64_t tm = *tm_io, tn = *tn_io, tk = *tk_io;
    uint64_t ea = e * (2 + g->extra_mk), fixed_n = g->extra_n, fixed_m = g->extra_m;
    switch (cfg->core.dataflow) {
    case ARCH_DATAFLOW_OS:
        tm = tm ? tm : min_u64(g->m, 4 * R);
        tn = tn ? tn : min_u64(g->n, 4 * C);
        tm = min_u64(tm, 65535), tn = min_u64(tn, 65535);
        if (!*tm_io) /* the accumulators bound the spatial tile */
            while (tm > 1 && tm * tn * 4 > acc)
                tm = (tm + 1) / 2;
        if (!tk) {
            uint64_t fixed = tm * tn * (ce + g->extra_mn) + tn * fixed_n + tm * fixed_m + g->extra;
            tk = spad > fixed ? (spad - fixed) / (ea * tm + 2 * tn * e) : 0;
            tk = min_u64(min_u64(g->k, 65535), tk);
        }
        break;
    case ARCH_DATAFLOW_IS:
        tk = tk ? tk : min_u64(g->k, 4 * R);
        tm = tm ? tm : min_u64(g->m, 4 * C);
        tk = min_u64(tk, 65535), tm = min_u64(tm, 65535);
        if (!tn) {
            uint64_t by_acc = acc / (4 * tm), fixed = ea * tm * tk + tm * fixed_m + g->extra;
            uint64_t by_spad = spad > fixed ? (spad - fixed) / (2 * tk * e + tm * (ce + g->extra_mn) + fixed_n) : 0;
            tn = min_u64(min_u64(g->n, 65535), min_u64(by_acc, by_spad));
        }
        break;
    default: /* WS */
        tk = tk ? tk : min_u64(g->k, 4 * R);
        tn = tn ? tn : min_u64(g->n, 4 * C);
        tk = min_u64(tk, 65535), tn = min_u64(tn, 65535);
        if (!tm) {
            uint64_t by_acc = acc / (4 * tn), fixed = 2 * tk * tn * e + tn * fixed_n + g->extra;
            uint64_t by_spad = spad > fixed ? (spad - fixed) / (ea * tk + tn * (ce + g->extra_mn) + fixed_m) : 0;
            tm = min_u64(min_u64(g->m, 65535), min_u64(by_acc, by_spad));
        }
        break;
    }
    /* With several cores, enough output tiles for all of them: halve the larger of the
     * output tile sizes not given. */
    for (uint64_t cores = g->cores ? g->cores : 1; cores > 1 && tm && tn;) {
        uint64_t tiles = cdiv(g->m, tm) * cdiv(g->n, tn);
        bool can_m = !*tm_io && tm > 1, can_n = !*tn_io && tn > 1;
        if (tiles >= cores || (!can_m && !can_n))
            break;
        if (can_m && (!can_n || tm >= tn))
            tm = (tm + 1) / 2;
        else
            tn = (tn + 1) / 2;
    }
    if (!tm || !tn || !tk)
        return np_err_set(err, NP_ERR_RANGE,
                          "a %llux%llux%llu GEMM: no tile fits the scratchpad (%llu bytes free) "
                          "and accumulators (%llu bytes free)",
                          (unsigned long long)g->m, (unsigned long long)g->n,
                          (unsigned long long)g->k, (unsigned long long)spad,
                          (unsigned long long)acc);
    if (tm * tn * 4 > acc)
        return np_err_set(err, NP_ERR_RANGE, "a %llux%llu tile needs %llu accumulator bytes, "
                          "more than the %llu free", (unsigned long long)tm,
                          (unsigned long long)tn, (unsigned long long)(tm * tn * 4),
                          (unsigned long long)acc);
    uint64_t need = kc_gemm_spad_bytes(g, tm, tn, tk);
    if (need > spad)
        return np_err_set(err, NP_ERR_RANGE, "%llux%llux%llu tiles (double-buffered) need %llu "
                          "scratchpad bytes, more than the %llu free",
                          (unsigned long long)tm, (unsigned long long)tn,
                          (unsigned long long)tk, (unsigned long long)need,
                          (unsigned long long)spad);
    *tm_io = tm, *tn_io = tn, *tk_io = tk;
    return NP_OK;
}

uint64_t kc_gemm_spad_bytes(const kc_gemm_shape *g, uint64_t tm, uint64_t tn, uint64_t tk)
{
    uint64_t a = g->reuse_k ? tm * g->reuse_k * g->e : (2 + g->extra_mk) * tm * tk * g->e;
    return a + (2 + g->extra_kn) * tk * tn * g->e +
           tm * tn * (g->ce + g->extra_mn) + tn * g->extra_n + tm * g->extra_m + g->extra;
}

/* ---- from a kernel description to the plan --------------------------------------------------- */

/* Strides of t over the dims of an output of out_nd dims (numpy broadcasting): 0 where t has
 * no such dim or it is 1. */
static void bcast_strides(const kc_tensor *t, int out_nd, int64_t *s)
{
    for (int d = 0; d < out_nd; d++) {
        int dt = d - (out_nd - t->ndim);
        s[d] = dt < 0 || t->shape[dt] == 1 ? 0 : t->stride[dt];
    }
}

/* The epilogue: the drain's fused prefix [scale] [bias] [activation], the rest vector steps.
 * With a split K (m->pk > 1) all of it is vector steps (the drain sees a partial sum); under
 * ct the drain sees C^T, so its per-column bias cannot hold C's row vector. m->eg:
 * the output has nd dims; bdims[0..nbd) are those of the batch loops, mdim and ndim those of
 * the GEMM's rows and columns (for a conv the pixel dim ow; then an operand's stride along
 * dim mouter, oh, must be ratio = OW times its stride along ow; mouter -1: none). */
static np_status plan_epilogue(kmm *m)
{
    bool fuse = m->pk <= 1, fuse_bias = fuse && !m->ct;
    kc_ctx *x = m->x;
    const kc_kernel *k = x->k;
    int nd = m->eg.nd, nbd = m->eg.nbd, mdim = m->eg.mdim, ndim = m->eg.ndim;
    int mouter = m->eg.mouter;
    const int *bdims = m->eg.bdims;
    int64_t m_outer_ratio = m->eg.ratio;
    m->act = ISA_ACT_NONE;
    m->scale = 1.0f;
    m->bias = -1;
    m->n_args = m->n_steps = 0;
    int i = 0;
    if (fuse && i < k->n_epi && k->epi[i].op == NN_OP_SCALE)
        m->scale = (float)k->epi[i++].f;
    for (; i < k->n_epi; i++) {
        const kc_epi *s = &k->epi[i];
        int64_t st[KC_MAX_DIMS];
        kmm_arg g = {0};
        if (s->has_arg) {
            bcast_strides(&s->arg, nd, st);
            g.base = s->arg.addr;
            g.dt = kc_isa_dtype(s->arg.dtype);
            g.sm = st[mdim];
            g.sn = st[ndim];
            if (mouter >= 0 && st[mouter] != g.sm * m_outer_ratio)
                return kc_fail(x, NP_ERR_INCONSISTENT, "epilogue step %d: its operand's "
                               "pixel rows are not %" PRId64 " pixels apart", i, m_outer_ratio);
            for (int b = 0; b < nbd; b++)
                g.sbat[b] = st[bdims[b]] * (m->eg.bmul[b] ? m->eg.bmul[b] : 1);
            uint64_t ae = isa_dtype_size[g.dt];
            if (g.sn && g.sn != (int64_t)ae)
                return kc_fail(x, NP_ERR_INCONSISTENT, "epilogue step %d: its operand's last "
                               "dim must be contiguous (stride %" PRId64 ", element %" PRIu64
                               " bytes)", i, g.sn, ae);
            g.bcast = !g.sm && !g.sn ? ISA_BCAST_SCALAR : !g.sm ? ISA_BCAST_ROW
                      : !g.sn        ? ISA_BCAST_COL : ISA_BCAST_FULL;
        }
        /* the drain's bias: the first step, an add of a row vector (after a scale) */
        bool batch_free = true;
        for (int b = 0; b < nbd; b++)
            batch_free = batch_free && !g.sbat[b];
        if (fuse_bias && m->bias < 0 && m->n_args == 0 && m->n_steps == 0 &&
            m->act == ISA_ACT_NONE && s->op == NN_OP_ADD && g.bcast == ISA_BCAST_ROW &&
            batch_free) {
            g.cast = g.dt != ISA_DTYPE_FP32;
            m->bias = m->n_args;
            m->args[m->n_args++] = g;
            continue;
        }
        isa_act act = s->op == NN_OP_RELU ? ISA_ACT_RELU : s->op == NN_OP_GELU ? ISA_ACT_GELU
                      : s->op == NN_OP_SILU ? ISA_ACT_SILU : s->op == NN_OP_TANH ? ISA_ACT_TANH
                                            : ISA_ACT_NONE;
        if (fuse && act != ISA_ACT_NONE && m->act == ISA_ACT_NONE && m->n_steps == 0) {
            m->act = act;
            continue;
        }
        kmm_step *v = &m->steps[m->n_steps++];
        v->arg = -1;
        switch (s->op) {
        case NN_OP_ADD: v->op = ISA_OP_VPU_ADD; break;
        case NN_OP_SUB: v->op = ISA_OP_VPU_SUB; break;
        case NN_OP_MUL: v->op = ISA_OP_VPU_MUL; break;
        case NN_OP_DIV: v->op = ISA_OP_VPU_DIV; break;
        case NN_OP_SCALE: v->op = ISA_OP_VPU_MULS, v->imm = (float)s->f; break;
        case NN_OP_RELU: v->op = ISA_OP_VPU_RELU; break;
        case NN_OP_GELU: v->op = ISA_OP_VPU_GELU; break;
        case NN_OP_SILU: v->op = ISA_OP_VPU_SILU; break;
        case NN_OP_TANH: v->op = ISA_OP_VPU_TANH; break;
        default: v->op = ISA_OP_VPU_EXP; break; /* EXP (kc_compile allows no other) */
        }
        if (s->has_arg) {
            g.cast = g.dt != m->cdt;
            v->arg = m->n_args;
            m->args[m->n_args++] = g;
        }
    }
    return NP_OK;
}

/* The GEMM as the tile choice sees the plan: its dimensions, element sizes, cores and the
 * scratchpad beyond double-buffered A and B slices and one C tile (kc_gemm_shape): staging
 * for the transposes of A's or B's slices, the transposed C tile, the partial sums of a
 * split K, the epilogue's operand tiles. */
static void plan_shape(const kmm *m, uint64_t cores, kc_gemm_shape *g)
{
    *g = (kc_gemm_shape){m->M, m->N, m->K, m->e, m->ce, cores, 0, 0, 0, 0, 0, 0, 0};
    g->extra_mk = kmm_a_transposed(m) ? 2 : 0;
    g->extra_kn = kmm_b_transposed(m) ? 2 : 0;
    g->reuse_k = m->reuse ? m->K : 0;
    if (kmm_c_transposes(m))
        g->extra_mn += m->ce;
    if (m->pk > 1)
        g->extra_mn += 4;
    for (int a = 0; a < m->n_args; a++) {
        const kmm_arg *r = &m->args[a];
        uint64_t per = isa_dtype_size[r->dt] + (r->cast ? (a == m->bias ? 4 : m->ce) : 0);
        switch (r->bcast) {
        case ISA_BCAST_ROW: g->extra_n += per; break;
        case ISA_BCAST_COL: g->extra_m += per; break;
        case ISA_BCAST_SCALAR: g->extra += per; break;
        default: g->extra_mn += per; break;
        }
    }
}

/* A schedule variant of the plan: transposed (ct) or not, K split over pk cores a block. */
static np_status plan_variant(const kmm *base, bool ct, uint64_t pk, bool reuse, uint64_t cores,
                              kmm *v, kc_gemm_shape *g)
{
    *v = *base;
    v->ct = ct;
    v->pk = pk;
    v->reuse = reuse;
    if (plan_epilogue(v) != NP_OK)
        return kc_status(v->x);
    plan_shape(v, cores, g);
    return NP_OK;
}

/* Whether the plan can keep A's rows resident (reuse): a row-major A, no split K. */
static bool reuse_ok(const kmm *m, uint64_t pk) { return m->ak == KMM_A_ROWS && pk <= 1; }

#define KMM_BEST 8 /* candidates the search keeps */

/* Tiles: the attributes tm, tn, tk, ksplit, ct, reuse where given, the rest chosen by the cost
 * model for the placed cores' free memories (kc_gemm_cost.c) among the schedule's variants —
 * C or C^T computed, K split among 2, 4, ... cores a block of tiles (their partial sums added
 * over the mesh, the epilogue on the VPU after the sum) or not. The model ranks the plain
 * schedule; reuse (A's rows resident across a tile row) is left to the tuner: the result's
 * candidates for it are the model's best, each followed by its reuse twin where one fits. */
np_status kmm_plan_tiles(kmm *m)
{
    kc_ctx *x = m->x;
    const kc_place *pl = &x->k->place;
    uint64_t n = pl->n_cores ? pl->n_cores : 1, spad = UINT64_MAX, acc = UINT64_MAX;
    for (uint32_t c = pl->core0; c < pl->core0 + n; c++) {
        spad = min_u64(spad, kc_spad_avail(x, c));
        acc = min_u64(acc, kc_acc_avail(x, c));
    }
    uint64_t tm = (uint64_t)kc_attr_int(x, "tm"), tn = (uint64_t)kc_attr_int(x, "tn"),
             tk = (uint64_t)kc_attr_int(x, "tk"), ks = (uint64_t)kc_attr_int(x, "ksplit");
    int64_t cta = kc_attr_int(x, "ct");
    bool reuse = kc_attr_int(x, "reuse");
    if (ks > n)
        return kc_fail(x, NP_ERR_RANGE, "ksplit %" PRIu64 " over %" PRIu64 " cores", ks, n);
    if (reuse && !reuse_ok(m, ks))
        return kc_fail(x, NP_ERR_INCONSISTENT, "reuse keeps a row-major A's rows: %s",
                       m->ak != KMM_A_ROWS ? "A is not row-major" : "not with a split K");
    bool search = !tm || !tn || !tk || !ks || !cta;
    kmm_cand best[KMM_BEST];
    unsigned nb = 0;
    kmm v;
    kc_gemm_shape g;
    for (int ct = 0; ct < 2 && search; ct++) {
        if (cta && cta != 1 + ct)
            continue;
        for (uint64_t pk = ks ? ks : 1; pk <= n && pk <= KMM_MAX_KSPLIT; pk *= 2) {
            if (reuse && pk > 1)
                break;
            if (plan_variant(m, ct, pk, reuse, n, &v, &g) != NP_OK)
                return kc_status(x);
            v.TM = tm, v.TN = tn, v.TK = tk;
            kmm_search(&v, x->cfg, &g, spad, acc, n, best, &nb, KMM_BEST);
            if (ks)
                break;
        }
    }
    if (nb) { /* the best candidate's variant */
        if (plan_variant(m, best[0].ct, best[0].pk, reuse, n, &v, &g) != NP_OK)
            return kc_status(x);
        *m = v;
        m->TM = best[0].tm, m->TN = best[0].tn, m->TK = best[0].tk;
    } else { /* all given, or nothing fits: the heuristic checks them and names the limit */
        if (plan_variant(m, cta == 2, ks > 1 ? ks : 1, reuse, n, &v, &g) != NP_OK)
            return kc_status(x);
        *m = v;
        m->TM = tm, m->TN = tn, m->TK = tk;
        np_err e = {0};
        if (kc_gemm_tiles(x->cfg, &g, spad, acc, &m->TM, &m->TN, &m->TK, &e) != NP_OK)
            return kc_fail(x, e.status, "%s", e.msg);
        if (m->pk > 1 && cdiv(m->K, m->TK) < m->pk)
            return kc_fail(x, NP_ERR_RANGE, "ksplit %" PRIu64 ": K = %" PRIu64 " has only %"
                           PRIu64 " slices of %" PRIu64, m->pk, m->K, cdiv(m->K, m->TK), m->TK);
        uint64_t need = kc_gemm_spad_bytes(&g, m->TM, m->TN, m->TK) +
                        (m->ak == KMM_A_CONV ? kmm_stage_bytes(&m->cv, m->TM, m->e) : 0);
        if (need > spad)
            return kc_fail(x, NP_ERR_RANGE, "%" PRIu64 "x%" PRIu64 "x%" PRIu64 " tiles "
                           "(double-buffered%s) need %" PRIu64 " scratchpad bytes, more than "
                           "the %" PRIu64 " free", m->TM, m->TN, m->TK,
                           m->ak == KMM_A_CONV ? ", with the staged input rows" : "", need,
                           spad);
    }
    /* the candidates for a tuner: the ranking's best, the chosen one first, each with the
     * schedule's estimate (kmm_estimate steps its queues; of the plain schedule: it does not
     * price reuse) and followed by its reuse twin when it fits */
    kc_result *r = x->res;
    if (!nb)
        best[nb++] = (kmm_cand){m->TM, m->TN, m->TK, m->pk, 0, m->ct, m->reuse};
    r->n_cands = 0;
    for (unsigned i = 0; i < nb && r->n_cands < KC_MAX_CANDS; i++) {
        kmm_est est;
        if (i == 0) {
            kmm_estimate(m, x->cfg, n, &est);
            r->est_cycles = est.cycles;
        } else {
            if (plan_variant(m, best[i].ct, best[i].pk, reuse, n, &v, &g) != NP_OK)
                return kc_status(x);
            v.TM = best[i].tm, v.TN = best[i].tn, v.TK = best[i].tk;
            kmm_estimate(&v, x->cfg, n, &est);
        }
        for (int twin = 0; twin < 2 && r->n_cands < KC_MAX_CANDS; twin++) {
            bool ru = reuse || twin;
            if (twin && (reuse || !search || !reuse_ok(m, best[i].pk)))
                break;
            if (twin) { /* it needs the slab in the scratchpad */
                kmm w;
                kc_gemm_shape gw;
                if (plan_variant(m, best[i].ct, 1, true, n, &w, &gw) != NP_OK)
                    return kc_status(x);
                if (kc_gemm_spad_bytes(&gw, best[i].tm, best[i].tn, best[i].tk) > spad)
                    break;
            }
            r->cands[r->n_cands++] =
                (kc_tiling){6, {KC_INT("tm", best[i].tm), KC_INT("tn", best[i].tn),
                                KC_INT("tk", best[i].tk), KC_INT("ksplit", best[i].pk),
                                KC_INT("ct", best[i].ct ? 2 : 1), KC_INT("reuse", ru)},
                            est.cycles};
        }
    }
    return NP_OK;
}

void kmm_plan_result(kmm *m, uint64_t batches)
{
    kc_result *r = m->x->res;
    uint64_t mn = m->M * m->N * batches;
    r->mxu_flops = 2 * mn * m->K;
    r->flops = r->mxu_flops + mn * (uint64_t)(m->x->k->n_epi);
    char split[64] = "";
    if (m->pk > 1)
        snprintf(split, sizeof split, ", K split over %" PRIu64 " cores", m->pk);
    if (m->reuse)
        snprintf(split + strlen(split), sizeof split - strlen(split), ", A's rows kept");
    if (m->ct)
        snprintf(split + strlen(split), sizeof split - strlen(split), ", C^T = B^T A^T");
    snprintf(r->schedule, sizeof r->schedule, "%" PRIu64 "x%" PRIu64 "x%" PRIu64 " GEMM%s, tiles "
             "%" PRIu64 "x%" PRIu64 "x%" PRIu64 " (M x N x K)%s", m->M, m->N, m->K,
             batches > 1 ? " per batch" : "", m->TM, m->TN, m->TK, split);
}

/* matmul: in[0] A [..., M, K], in[1] B [..., K, N], out [..., M, N]; batch dims broadcast.
 * Each matrix is row-major (last stride = element) or column-major (the other). */
static np_status matmul_compile(kc_ctx *x)
{
    const kc_kernel *k = x->k;
    const kc_tensor *A = &k->in[0], *B = &k->in[1], *C = &k->out[0];
    kmm m;
    memset(&m, 0, sizeof m);
    m.x = x, m.em.x = x;
    if (A->ndim < 2 || B->ndim < 2 || C->ndim < 2)
        return kc_fail(x, NP_ERR_INCONSISTENT, "operands need at least 2 dims (A %d, B %d, "
                       "out %d)", A->ndim, B->ndim, C->ndim);
    int nd = C->ndim;
    m.M = (uint64_t)A->shape[A->ndim - 2];
    m.K = (uint64_t)A->shape[A->ndim - 1];
    m.N = (uint64_t)B->shape[B->ndim - 1];
    if ((uint64_t)B->shape[B->ndim - 2] != m.K || (uint64_t)C->shape[nd - 2] != m.M ||
        (uint64_t)C->shape[nd - 1] != m.N)
        return kc_fail(x, NP_ERR_INCONSISTENT, "A is %" PRIu64 "x%" PRIu64 ", B %" PRId64 "x%"
                       PRId64 ", out %" PRId64 "x%" PRId64 ": not (M x K) (K x N) (M x N)", m.M,
                       m.K, B->shape[B->ndim - 2], B->shape[B->ndim - 1], C->shape[nd - 2],
                       C->shape[nd - 1]);
    if (A->dtype != B->dtype)
        return kc_fail(x, NP_ERR_INCONSISTENT, "A is %s, B %s: the array multiplies one type",
                       nn_dtype_name(A->dtype), nn_dtype_name(B->dtype));
    m.dt = kc_isa_dtype(A->dtype);
    m.cdt = kc_isa_dtype(C->dtype);
    m.e = isa_dtype_size[m.dt];
    m.ce = isa_dtype_size[m.cdt];
    isa_program *prog = isa_emit_program(x->e);
    if (!(prog->target.dtypes & (1u << m.dt)))
        return kc_fail(x, NP_ERR_INCONSISTENT, "the array does not multiply %s",
                       isa_dtype_names[m.dt]);
    /* layouts */
    int64_t a1 = A->stride[A->ndim - 1], a2 = A->stride[A->ndim - 2];
    int64_t b1 = B->stride[B->ndim - 1], b2 = B->stride[B->ndim - 2];
    if (a1 == (int64_t)m.e || m.K == 1)
        m.ak = KMM_A_ROWS, m.lda = a2;
    else if (a2 == (int64_t)m.e || m.M == 1)
        m.ak = KMM_A_COLS, m.lda = a1;
    else
        return kc_fail(x, NP_ERR_INCONSISTENT, "A (strides %" PRId64 ", %" PRId64 " bytes) is "
                       "neither row- nor column-major", a2, a1);
    if (b1 == (int64_t)m.e || m.N == 1)
        m.b_cols = false, m.ldb = b2;
    else if (b2 == (int64_t)m.e || m.K == 1)
        m.b_cols = true, m.ldb = b1;
    else
        return kc_fail(x, NP_ERR_INCONSISTENT, "B (strides %" PRId64 ", %" PRId64 " bytes) is "
                       "neither row- nor column-major", b2, b1);
    if (C->stride[nd - 1] == (int64_t)m.ce || m.N == 1)
        m.c_cols = false, m.ldc = C->stride[nd - 2];
    else if (C->stride[nd - 2] == (int64_t)m.ce || m.M == 1)
        m.c_cols = true, m.ldc = C->stride[nd - 1];
    else
        return kc_fail(x, NP_ERR_INCONSISTENT, "out (strides %" PRId64 ", %" PRId64 " bytes) is "
                       "neither row- nor column-major", C->stride[nd - 2], C->stride[nd - 1]);
    m.a_base = A->addr, m.b_base = B->addr, m.c_base = C->addr;
    /* batch dims: out's leading dims; A's and B's broadcast to them; then merged where every
     * operand's strides allow and dims of 1 dropped */
    int64_t sa[KC_MAX_DIMS], sb[KC_MAX_DIMS];
    kc_tensor Ab = *A, Bb = *B;
    Ab.ndim -= 2, Bb.ndim -= 2;
    bcast_strides(&Ab, nd - 2, sa);
    bcast_strides(&Bb, nd - 2, sb);
    for (int d = 0; d < nd - 2; d++) {
        int da = d - (nd - 2 - Ab.ndim), db = d - (nd - 2 - Bb.ndim);
        if ((da >= 0 && Ab.shape[da] != 1 && Ab.shape[da] != C->shape[d]) ||
            (db >= 0 && Bb.shape[db] != 1 && Bb.shape[db] != C->shape[d]))
            return kc_fail(x, NP_ERR_INCONSISTENT, "batch dim %d: A's and B's do not broadcast "
                           "to out's %" PRId64, d, C->shape[d]);
    }
    int bdims[KC_MAX_DIMS], nbd = 0;
    uint64_t cnt[KC_MAX_DIMS];
    int64_t bsa[KC_MAX_DIMS], bsb[KC_MAX_DIMS], bsc[KC_MAX_DIMS];
    for (int d = 0; d < nd - 2; d++) {
        if (C->shape[d] == 1)
            continue;
        if (nbd && bsa[nbd - 1] == sa[d] * C->shape[d] && bsb[nbd - 1] == sb[d] * C->shape[d] &&
            bsc[nbd - 1] == C->stride[d] * C->shape[d] && k->n_epi == 0) {
            cnt[nbd - 1] *= (uint64_t)C->shape[d]; /* the outer dim steps as the inner runs on */
            bsa[nbd - 1] = sa[d], bsb[nbd - 1] = sb[d], bsc[nbd - 1] = C->stride[d];
            bdims[nbd - 1] = d;
            continue;
        }
        bdims[nbd] = d;
        cnt[nbd] = (uint64_t)C->shape[d];
        bsa[nbd] = sa[d], bsb[nbd] = sb[d], bsc[nbd] = C->stride[d];
        nbd++;
    }
    if (nbd > KMM_MAX_BATCH)
        return kc_fail(x, NP_ERR_RANGE, "%d batch dims that do not merge (at most %d)", nbd,
                       KMM_MAX_BATCH);
    m.nb = nbd;
    uint64_t batches = 1;
    for (int b = 0; b < nbd; b++) {
        m.bcount[b] = cnt[b], m.bsa[b] = bsa[b], m.bsb[b] = bsb[b], m.bsc[b] = bsc[b];
        batches *= cnt[b];
    }
    m.m_regular = m.k_regular = true;
    m.eg.nd = nd, m.eg.nbd = nbd, m.eg.mdim = nd - 2, m.eg.ndim = nd - 1, m.eg.mouter = -1;
    m.eg.ratio = 0;
    for (int b = 0; b < nbd; b++)
        m.eg.bdims[b] = bdims[b];
    if (kmm_plan_tiles(&m) != NP_OK)
        return kc_status(x);
    kmm_plan_result(&m, batches);
    return kmm_emit(&m);
}

/* ---- the framework's computation of each (for checks) ---------------------------------------- */

np_status kmm_ref_status(nn_graph *g, nn_tensor **out, nn_tensor *t, np_err *err)
{
    out[0] = t;
    return t ? NP_OK : nn_graph_status(g, err);
}

static np_status matmul_reference(nn_graph *g, const kc_kernel *k, nn_tensor *const *in,
                                  nn_tensor **out, np_err *err)
{
    (void)k;
    return kmm_ref_status(g, out, nn_matmul(g, in[0], in[1]), err);
}

/* ---- `npusim kernel --op` ------------------------------------------------------------------- */

int64_t kmm_spec_i(const kc_spec *s, const char *name)
{
    const kc_spec_val *v = kc_spec_get(s, name);
    return v ? v->i : 0;
}

static const kc_attr_def matmul_keys[] = {
    {"m", KC_ATTR_INT, KC_REQUIRED, 1, 4294967295.0, "rows of A and of the output"},
    {"n", KC_ATTR_INT, KC_REQUIRED, 1, 4294967295.0, "columns of B and of the output"},
    {"k", KC_ATTR_INT, KC_REQUIRED, 1, 4294967295.0, "columns of A, rows of B"},
    {"batch", KC_ATTR_INT, 1, 1, 65536, "independent matmuls (A, B and the output batched)"},
    {"ta", KC_ATTR_BOOL, 0, 0, 1, "A stored transposed (column-major)"},
    {"tb", KC_ATTR_BOOL, 0, 0, 1, "B stored transposed (column-major)"},
    {"dtype", KC_ATTR_DTYPE, NN_BF16, 0, 0, "A's and B's type (the output's too; int8 gives int32)"},
    {"pad", KC_ATTR_INT, 0, 0, 65536, "elements of padding after every matrix row (a leading dimension that does not map every row to the same HBM channels)"},
};

/* A [batch, M, K] (or [M, K]) in a fresh buffer, column-major when trans, every stored row
 * pad elements longer than its data. */
static np_status spec_matrix(kc_prog *p, const char *name, nn_dtype dt, int64_t batch, int64_t r,
                             int64_t c, bool trans, int64_t pad, kc_tensor *t, np_err *err)
{
    int64_t e = (int64_t)nn_dtype_size(dt);
    int64_t rows = trans ? c : r, len = (trans ? r : c) + pad; /* stored rows x their length */
    uint64_t addr;
    if (kc_prog_bss(p, name, (uint64_t)(batch * rows * len * e), &addr, err) != NP_OK)
        return err->status;
    int nd = batch > 1 ? 3 : 2;
    int64_t shape[3] = {batch, r, c};
    kc_tensor_dense(t, addr, dt, nd, batch > 1 ? shape : shape + 1);
    t->stride[nd - 2] = trans ? e : len * e;
    t->stride[nd - 1] = trans ? len * e : e;
    if (nd == 3)
        t->stride[0] = rows * len * e;
    return NP_OK;
}

static np_status matmul_build(kc_prog *p, const kc_spec *s, kc_kernel *k, np_err *err)
{
    nn_dtype dt = (nn_dtype)kmm_spec_i(s, "dtype"), od = dt == NN_I8 ? NN_I32 : dt;
    int64_t M = kmm_spec_i(s, "m"), N = kmm_spec_i(s, "n"), K = kmm_spec_i(s, "k");
    int64_t B = kmm_spec_i(s, "batch");
    int64_t pad = kmm_spec_i(s, "pad");
    k->n_in = 2, k->n_out = 1;
    if (spec_matrix(p, "A", dt, B, M, K, kmm_spec_i(s, "ta"), pad, &k->in[0], err) != NP_OK ||
        spec_matrix(p, "B", dt, B, K, N, kmm_spec_i(s, "tb"), pad, &k->in[1], err) != NP_OK ||
        spec_matrix(p, "C", od, B, M, N, false, pad, &k->out[0], err) != NP_OK)
        return err->status;
    return NP_OK;
}

/* ---- the table rows --------------------------------------------------------------------------- */

static const kc_attr_def matmul_attrs[] = {KMM_TILE_ATTRS};

const kc_kernel_def kc_matmul_def = {
    .op = NN_OP_MATMUL, .flags = KC_DEF_EPILOGUE, .n_in = 2, .n_out = 1,
    .attrs = matmul_attrs, .n_attrs = sizeof matmul_attrs / sizeof matmul_attrs[0],
    .compile = matmul_compile,
    .keys = matmul_keys, .n_keys = sizeof matmul_keys / sizeof matmul_keys[0],
    .build = matmul_build,
    .reference = matmul_reference,
    .doc = "tiled, double-buffered GEMM on the matrix unit; batches, rows of tiles, tiles and "
           "pairs of K slices as loops",
};
