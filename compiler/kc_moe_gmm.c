/* kc_moe_gmm.c — the grouped matmul of a mixture-of-experts layer (framework/op_moe.c):
 * moe_gmm (rows [N, K] x w [E, K, F], or w [E, F, K] transposed -> [N, F], each expert's rows
 * by its own matrix) and moe_gmm_grad_w (rows a [N, P], b [N, Q] -> [E, P, Q]: a_e^T b_e), as
 * phases (kc_phase.h) of the GEMM kernel (kc_matmul.c) on the systolic array, over every core
 * of the placement. Which rows are expert e's depends on the routing:
 *
 *   capacity C > 0   expert e's rows are e C .. e C + C whatever the indices: one batched
 *                    GEMM over the E experts (the padded rows computed too, as the framework
 *                    does);
 *   dropless, counts (attribute route 1 uniform, 2 skew: a timing run's routing distribution,
 *                    framework/moe_route.h) expert e's rows are the count_e rows after the
 *                    counts of the experts before it, known when the kernel is compiled: one
 *                    GEMM per expert with rows (an expert with none: nothing; its weight
 *                    gradient a fill of zeros) — the grouped GEMM of Megatron-LM, which takes
 *                    the tokens per expert on the host. Values are the framework's when the
 *                    indices route as the counts say;
 *   dropless, data   (route 0, what a functional run's nodes carry) the counts are data: the
 *                    routing layout is computed on the VPU (kc_moe.h) twice, dropless and with
 *                    a capacity of N rows per expert, the rows moved by dma.gather/scatter into
 *                    a zeroed scratch buffer of E x N rows, one batched GEMM over it, and the
 *                    results moved back: right for any indices, at E times the GEMM's work
 *                    (the padding) — a schedule for values, not for timing.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "kc_moe.h"
#include "kc_phase.h"
#include "moe_route.h"

enum { KG_DATA = 0, KG_UNIFORM = 1, KG_SKEW = 2, KG_MAX_E = 8192 };

/* What the phases moved and computed, summed (each phase's compile overwrites x->res). */
typedef struct kg_sum {
    uint64_t flops, rd, wr, insns;
} kg_sum;

static kc_tensor kg_view(uint64_t addr, nn_dtype dt, int ndim, const int64_t *shape,
                         const int64_t *stride_el)
{
    kc_tensor t = {.addr = addr, .dtype = dt, .ndim = ndim};
    int64_t e = (int64_t)nn_dtype_size(dt);
    for (int d = 0; d < ndim; d++)
        t.shape[d] = shape[d], t.stride[d] = stride_el[d] * e;
    return t;
}

/* One phase: sub's schedule over the placement, then a barrier. */
static np_status kg_phase(kc_ctx *x, kc_kernel *sub, kg_sum *sum)
{
    sub->place = x->k->place;
    memset(x->res, 0, sizeof *x->res);
    if (kc_phase_run(x, sub) != NP_OK)
        return kc_status(x);
    sum->flops += x->res->flops;
    sum->rd += x->res->hbm_read_bytes;
    sum->wr += x->res->hbm_write_bytes;
    return kc_phase_end(x);
}

static np_status kg_matmul(kc_ctx *x, kc_tensor a, kc_tensor b, kc_tensor c, kg_sum *sum)
{
    kc_kernel mk = {.op = NN_OP_MATMUL, .n_in = 2, .n_out = 1, .in = {a, b}, .out = {c}};
    return kg_phase(x, &mk, sum);
}

static np_status kg_zero(kc_ctx *x, kc_tensor t, kg_sum *sum)
{
    kc_kernel fk = {.op = NN_OP_FILL, .n_in = 1, .n_out = 1, .in = {t}, .out = {t},
                    .n_attrs = 1, .attrs = {KC_REAL("v", 0)}};
    return kg_phase(x, &fk, sum);
}

/* Rows between the layouts, per core over its tokens: for every assignment, row `from` of src
 * (in layout rf: dropless or padded) to row `to` of dst (layout rt), via the scratchpad. */
static np_status kg_move(kc_ctx *x, const kc_tensor *idx, int64_t C_from, int64_t C_to,
                         uint64_t src, uint64_t dst, int64_t rows_from, int64_t rows_to,
                         int64_t D, nn_dtype dt, kg_sum *sum)
{
    isa_emit *em = x->e;
    int64_t e = (int64_t)nn_dtype_size(dt);
    isa_dtype it = kc_isa_dtype(dt);
    km_route f, t;
    if (km_route_of(x, 2, &f) != NP_OK)
        return kc_status(x);
    t = f;
    f.C = C_from, t.C = C_to;
    f.N = rows_from, t.N = rows_to;
    uint32_t nc = km_cores(x, f.T);
    for (uint32_t c = 0; c < nc; c++) {
        km_split(f.T, nc, c, &f.lo, &f.hi);
        t.lo = f.lo, t.hi = f.hi;
        kc_core(x, x->k->place.core0 + c);
        if (km_slots(x, idx, &f) != NP_OK || km_slots(x, idx, &t) != NP_OK)
            return kc_status(x);
        int64_t Tc = f.hi - f.lo, tt = km_tile_rows(x, (uint64_t)(D * e), Tc);
        uint64_t buf;
        if (tt < 1 || kc_spad_alloc(x, (uint64_t)(tt * D * e), 64, &buf) != NP_OK)
            return kc_fail(x, NP_ERR_RANGE, "a row of %" PRId64 " elements does not fit", D);
        for (int64_t j = 0; j < f.k; j++)
            for (int64_t t0 = 0; t0 < Tc; t0 += tt) {
                int64_t m = Tc - t0 < tt ? Tc - t0 : tt;
                uint64_t off = (uint64_t)(j * Tc + t0) * 4;
                ISA_EMIT(em, DMA_GATHER, isa_spad(0, buf), isa_hbm(0, src), isa_spad(0, f.si + off),
                         isa_enum(it), isa_imm(D), isa_imm(m), isa_imm(rows_from),
                         .skip = isa_imm(1));
                km_sync(x, ISA_UNIT_DMA, ISA_UNIT_DMA, &f.sem);
                ISA_EMIT(em, DMA_SCATTER, isa_hbm(0, dst), isa_spad(0, buf),
                         isa_spad(0, t.si + off), isa_enum(it), isa_imm(D), isa_imm(m),
                         isa_imm(rows_to), .skip = isa_imm(1));
                km_sync(x, ISA_UNIT_DMA, ISA_UNIT_DMA, &f.sem);
            }
        sum->rd += (uint64_t)(Tc * f.k * D * e);
        sum->wr += (uint64_t)(Tc * f.k * D * e);
    }
    return kc_phase_end(x);
}

/* One phase on the cores `at` (a group of the placement's), ended by a fence per core: the
 * groups run their experts at the same time. */
static np_status kg_run(kc_ctx *x, kc_kernel *sub, kc_place at, kg_sum *sum)
{
    memset(x->res, 0, sizeof *x->res);
    sub->place = at;
    if (kc_phase_run(x, sub) != NP_OK)
        return kc_status(x);
    sum->flops += x->res->flops;
    sum->rd += x->res->hbm_read_bytes;
    sum->wr += x->res->hbm_write_bytes;
    return kc_phase_end_local(x);
}

/* Groups of cores that run experts' GEMMs at the same time: a GEMM gets about as many cores
 * as it has output tiles of 128 x 128 (its rows the mean expert's; grad_w: K x F), so small
 * experts (many of them) share the chip and large ones (few) get all of it; the experts go to
 * the groups largest first, each to the least loaded (rows). grp[e] is expert e's group;
 * returns the groups. */
static uint32_t kg_groups(const kc_ctx *x, const int64_t *counts, int64_t E, int64_t K,
                          int64_t F, int *grp)
{
    uint32_t nc = x->k->place.n_cores ? x->k->place.n_cores : 1;
    int64_t rows = 0, busy = 0;
    for (int64_t e = 0; e < E; e++)
        rows += counts[e], busy += counts[e] > 0;
    busy = busy ? busy : 1;
    int64_t m = K ? K : (rows / busy + 127) / 128 * 128;
    int64_t tiles = ((m + 127) / 128) * ((F + 127) / 128);
    uint32_t cpg = tiles >= (int64_t)nc ? nc : (uint32_t)(tiles < 1 ? 1 : tiles);
    uint32_t ng = nc / cpg;
    ng = (int64_t)ng > busy ? (uint32_t)busy : ng;
    int64_t load[KG_MAX_E] = {0};
    bool done[KG_MAX_E] = {0};
    for (int64_t n = 0; n < E; n++) { /* the largest expert left to the least loaded group */
        int64_t big = -1;
        for (int64_t e = 0; e < E; e++)
            if (!done[e] && (big < 0 || counts[e] > counts[big]))
                big = e;
        uint32_t g = 0;
        for (uint32_t i = 1; i < ng; i++)
            if (load[i] < load[g])
                g = i;
        done[big] = true;
        grp[big] = (int)g;
        load[g] += counts[big] + (K ? 1 : 0);
    }
    return ng;
}

/* The counts of a timing run's routing (route 1, 2) for the kernel's T, k, E. */
static np_status kg_counts(kc_ctx *x, int64_t T, int64_t k, int64_t E, int64_t *counts)
{
    nn_moe_route_spec s = nn_moe_route_uniform();
    if (kc_attr_int(x, "route") == KG_SKEW) {
        s.kind = NN_ROUTE_SKEW;
        s.skew = kc_attr_real(x, "skew");
        s.seed = (uint64_t)kc_attr_int(x, "seed");
    }
    np_err e = {0};
    if (nn_moe_route_counts(&s, kc_attr_int(x, "layer"), T, k, E, counts, &e) != NP_OK)
        return kc_fail(x, e.status, "%s", e.msg);
    return NP_OK;
}

static np_status gmm_compile(kc_ctx *x)
{
    const kc_kernel *k = x->k;
    bool gw = k->op == NN_OP_MOE_GMM_GRAD_W;
    const kc_tensor *A = &k->in[0], *B = &k->in[1], *idx = &k->in[2], *Y = &k->out[0];
    km_route r;
    if (km_route_of(x, 2, &r) != NP_OK)
        return kc_status(x);
    bool tr = !gw && kc_attr_int(x, "trans");
    int64_t E = r.E, C = r.C, N = r.N, route = kc_attr_int(x, "route");
    nn_dtype dt = A->dtype;
    /* gmm: A [N, K], B [E, K, F] (tr: [E, F, K]), Y [N, F]; grad_w: A [N, P], B [N, Q],
     * Y [E, P, Q] */
    int64_t K = A->ndim == 2 ? A->shape[1] : 0;
    int64_t F = gw ? (B->ndim == 2 ? B->shape[1] : 0) : (B->ndim == 3 ? B->shape[tr ? 1 : 2] : 0);
    bool ok = A->ndim == 2 && A->shape[0] == N && km_dense(A) && km_dense(B) && km_dense(Y) &&
              B->dtype == dt && Y->dtype == dt;
    if (gw)
        ok = ok && B->ndim == 2 && B->shape[0] == N && Y->ndim == 3 && Y->shape[0] == E &&
             Y->shape[1] == K && Y->shape[2] == F;
    else
        ok = ok && B->ndim == 3 && B->shape[0] == E && B->shape[tr ? 2 : 1] == K &&
             Y->ndim == 2 && Y->shape[0] == N && Y->shape[1] == F;
    if (!ok)
        return kc_fail(x, NP_ERR_INCONSISTENT, gw ? "a [%" PRId64 ", P], b [%" PRId64 ", Q] and "
                       "out [E, P, Q], dense, of one dtype" : "rows [%" PRId64 ", K], w [E, K, F]"
                       " (trans: [E, F, K]) and out [%" PRId64 ", F], dense, of one dtype", N, N);
    /* B's element (e, kk, f) */
    int64_t bs[3] = {K * F, tr ? 1 : F, tr ? K : 1};
    kg_sum sum = {0};
    char how[160];
    if (C > 0 || route == KG_DATA) {
        /* rows in the capacity layout: A's own (C > 0), or a padded copy of N rows an expert */
        int64_t P = C > 0 ? C : N;
        uint64_t a_addr = A->addr, b_addr = B->addr, y_addr = Y->addr;
        if (C == 0) {
            np_err e = {0};
            uint64_t bytes = (uint64_t)(E * P * (K + F) * (int64_t)nn_dtype_size(dt));
            if (kc_prog_bss(x->prog, NULL, bytes, &a_addr, &e) != NP_OK)
                return kc_fail(x, e.status, "the padded rows: %s", e.msg);
            b_addr = a_addr + (uint64_t)(E * P * K * (int64_t)nn_dtype_size(dt));
            if (gw) { /* both padded, zero where no row lands */
                kg_zero(x, kg_view(a_addr, dt, 2, (int64_t[]){E * P, K + F}, (int64_t[]){K + F, 1}),
                        &sum);
                kg_move(x, idx, 0, P, A->addr, a_addr, N, E * P, K, dt, &sum);
                kg_move(x, idx, 0, P, B->addr, b_addr, N, E * P, F, dt, &sum);
            } else {
                y_addr = b_addr;
                kg_move(x, idx, 0, P, A->addr, a_addr, N, E * P, K, dt, &sum);
            }
        }
        if (gw) /* out_e = a_e^T b_e: a_e [P, K] read as K x P */
            kg_matmul(x, kg_view(a_addr, dt, 3, (int64_t[]){E, K, P}, (int64_t[]){P * K, 1, K}),
                      kg_view(b_addr, dt, 3, (int64_t[]){E, P, F}, (int64_t[]){P * F, F, 1}),
                      *Y, &sum);
        else
            kg_matmul(x, kg_view(a_addr, dt, 3, (int64_t[]){E, P, K}, (int64_t[]){P * K, K, 1}),
                      kg_view(B->addr, dt, 3, (int64_t[]){E, K, F}, bs),
                      kg_view(y_addr, dt, 3, (int64_t[]){E, P, F}, (int64_t[]){P * F, F, 1}),
                      &sum);
        if (C == 0 && !gw)
            kg_move(x, idx, P, 0, y_addr, Y->addr, E * P, N, F, dt, &sum);
        if (C > 0)
            snprintf(how, sizeof how, "one batched GEMM of %" PRId64 " experts x %" PRId64
                     " rows", E, P);
        else
            snprintf(how, sizeof how, "the layout from the indices, %" PRId64 " experts padded "
                     "to %" PRId64 " rows, one batched GEMM", E, P);
    } else {
        int64_t counts[KG_MAX_E], firsts[KG_MAX_E], busy = 0;
        int grp[KG_MAX_E];
        if (E > KG_MAX_E)
            return kc_fail(x, NP_ERR_RANGE, "%" PRId64 " experts (at most %d)", E, KG_MAX_E);
        if (kg_counts(x, r.T, r.k, E, counts) != NP_OK)
            return kc_status(x);
        for (int64_t e = 0, f = 0; e < E; f += counts[e], e++) {
            firsts[e] = f;
            busy += counts[e] > 0;
        }
        uint32_t ng = kg_groups(x, counts, E, gw ? K : 0, F, grp);
        uint32_t nc = k->place.n_cores ? k->place.n_cores : 1, cpg = nc / ng;
        for (uint32_t g = 0; g < ng; g++)
            for (int64_t e = 0; e < E && kc_status(x) == NP_OK; e++) {
                int64_t c = counts[e], first = firsts[e];
                if (grp[e] != (int)g || (c == 0 && !gw))
                    continue;
                kc_place at = {k->place.chip, k->place.core0 + g * cpg, cpg};
                kc_tensor Ae, Be, Ye;
                if (gw) {
                    Ye = kg_view(Y->addr + (uint64_t)(e * K * F * (int64_t)nn_dtype_size(dt)), dt,
                                 2, (int64_t[]){K, F}, (int64_t[]){F, 1});
                    if (c == 0) {
                        kc_kernel fk = {.op = NN_OP_FILL, .n_in = 1, .n_out = 1, .in = {Ye},
                                        .out = {Ye}, .n_attrs = 1, .attrs = {KC_REAL("v", 0)}};
                        kg_run(x, &fk, at, &sum);
                        continue;
                    }
                    Ae = kg_view(A->addr + (uint64_t)(first * K * (int64_t)nn_dtype_size(dt)), dt,
                                 2, (int64_t[]){K, c}, (int64_t[]){1, K});
                    Be = kg_view(B->addr + (uint64_t)(first * F * (int64_t)nn_dtype_size(dt)), dt,
                                 2, (int64_t[]){c, F}, (int64_t[]){F, 1});
                } else {
                    Ae = kg_view(A->addr + (uint64_t)(first * K * (int64_t)nn_dtype_size(dt)), dt,
                                 2, (int64_t[]){c, K}, (int64_t[]){K, 1});
                    Be = kg_view(B->addr + (uint64_t)(e * K * F * (int64_t)nn_dtype_size(dt)), dt,
                                 2, (int64_t[]){K, F}, bs + 1);
                    Ye = kg_view(Y->addr + (uint64_t)(first * F * (int64_t)nn_dtype_size(dt)), dt,
                                 2, (int64_t[]){c, F}, (int64_t[]){F, 1});
                }
                kc_kernel mk = {.op = NN_OP_MATMUL, .n_in = 2, .n_out = 1, .in = {Ae, Be},
                                .out = {Ye}};
                kg_run(x, &mk, at, &sum);
            }
        if (kc_status(x) == NP_OK)
            kc_phase_end(x);
        snprintf(how, sizeof how, "a GEMM per expert (%" PRId64 " of %" PRId64 " with rows, "
                 "the %s routing's counts), %u groups of %u cores at once", busy, E,
                 kc_attr_int(x, "route") == KG_SKEW ? "skewed" : "uniform", ng, cpg);
    }
    if (kc_status(x) != NP_OK)
        return kc_status(x);
    memset(x->res, 0, sizeof *x->res);
    x->res->flops = sum.flops;
    x->res->mxu_flops = sum.flops;
    x->res->hbm_read_bytes = sum.rd;
    x->res->hbm_write_bytes = sum.wr;
    x->res->hbm_bytes_min = kc_tensor_bytes(A) + kc_tensor_bytes(B) + kc_tensor_bytes(Y);
    x->res->cores = k->place.n_cores ? k->place.n_cores : 1;
    snprintf(x->res->schedule, sizeof x->res->schedule, "%s", how);
    return kc_status(x);
}

/* ---- the framework's nodes ------------------------------------------------------------------ */

/* ip: experts, capacity, trans, route, seed, layer; fp[0]: skew (op_moe.c's node parameters;
 * the routing ones set by nn_moe_route_mark) */
static np_status gmm_reference(nn_graph *g, const kc_kernel *k, nn_tensor *const *in,
                               nn_tensor **out, np_err *err)
{
    int64_t ip[NN_MAX_IPARAMS] = {km_attr(k, "experts", 1), km_attr(k, "capacity", 0),
                                  k->op == NN_OP_MOE_GMM ? km_attr(k, "trans", 0) : 0,
                                  km_attr(k, "route", 0), km_attr(k, "seed", 0),
                                  km_attr(k, "layer", 0)};
    double fp[NN_MAX_FPARAMS] = {0};
    for (int i = 0; i < k->n_attrs; i++)
        if (!strcmp(k->attrs[i].name, "skew"))
            fp[0] = k->attrs[i].f;
    out[0] = nn_node(g, k->op, 3, in, ip, fp);
    return out[0] ? NP_OK : nn_graph_status(g, err);
}

static np_status gmm_from_node(const nn_tensor *t, kc_kernel *k, np_err *err)
{
    if (k->n_attrs + 7 > KC_MAX_ATTRS)
        return np_err_set(err, NP_ERR_RANGE, "%s: no room for its attributes", nn_op_name(t->op));
    k->attrs[k->n_attrs++] = KC_INT("experts", t->ip[0]);
    k->attrs[k->n_attrs++] = KC_INT("capacity", t->ip[1]);
    if (t->op == NN_OP_MOE_GMM)
        k->attrs[k->n_attrs++] = KC_INT("trans", t->ip[2]);
    k->attrs[k->n_attrs++] = KC_INT("route", t->ip[3]);
    k->attrs[k->n_attrs++] = KC_INT("seed", t->ip[4]);
    k->attrs[k->n_attrs++] = KC_INT("layer", t->ip[5]);
    k->attrs[k->n_attrs++] = KC_REAL("skew", t->fp[0]);
    return NP_OK;
}

static int64_t gmm_index_bound(const kc_kernel *k, int in)
{
    return in == 2 ? km_attr(k, "experts", 1) : 0;
}

/* ---- `npusim kernel --op` ------------------------------------------------------------------- */

static np_status gmm_build(kc_prog *p, const kc_spec *s, kc_kernel *k, np_err *err)
{
    nn_dtype dt = (nn_dtype)kc_spec_get(s, "dtype")->i;
    int64_t T = kc_spec_get(s, "tokens")->i, kk = kc_spec_get(s, "k")->i;
    int64_t E = kc_spec_get(s, "experts")->i, C = kc_spec_get(s, "capacity")->i;
    int64_t K = kc_spec_get(s, "kdim")->i, F = kc_spec_get(s, "fdim")->i;
    int64_t N = C > 0 ? E * C : T * kk;
    bool tr = s->op == NN_OP_MOE_GMM && kc_spec_get(s, "trans")->i;
    memset(k, 0, sizeof *k);
    k->op = s->op, k->n_in = 3, k->n_out = 1;
    np_status st = kc_tensor_fresh(p, &k->in[0], dt, 2, (int64_t[]){N, K}, err);
    if (st == NP_OK)
        st = s->op == NN_OP_MOE_GMM
                 ? kc_tensor_fresh(p, &k->in[1], dt, 3, tr ? (int64_t[]){E, F, K} : (int64_t[]){E, K, F},
                            err)
                 : kc_tensor_fresh(p, &k->in[1], dt, 2, (int64_t[]){N, F}, err);
    if (st == NP_OK)
        st = kc_tensor_fresh(p, &k->in[2], NN_I32, 2, (int64_t[]){T, kk}, err);
    if (st == NP_OK)
        st = s->op == NN_OP_MOE_GMM ? kc_tensor_fresh(p, &k->out[0], dt, 2, (int64_t[]){N, F}, err)
                                    : kc_tensor_fresh(p, &k->out[0], dt, 3, (int64_t[]){E, K, F}, err);
    return st;
}

#define KG_ROUTE_ATTRS                                                                       \
    {"experts", KC_ATTR_INT, 1, 1, 65535, "the experts E"},                                  \
    {"capacity", KC_ATTR_INT, 0, 0, 1 << 24, "rows per expert C (0: dropless, T k rows)"},   \
    {"route", KC_ATTR_INT, 0, 0, 2, "dropless rows per expert: 0 from the indices (values), " \
                                    "1 uniform, 2 skew (a timing run's counts, moe_route.h)"}, \
    {"skew", KC_ATTR_REAL, 0, 0, 64, "route 2: the Zipf exponent S"},                        \
    {"seed", KC_ATTR_INT, 0, 0, 9007199254740992.0, "route 2: the seed of the ranks"},       \
    {"layer", KC_ATTR_INT, 0, 0, 1 << 20, "route 1, 2: the MoE layer (its own busiest expert)"}

static const kc_attr_def gmm_attrs[] = {
    KG_ROUTE_ATTRS,
    {"trans", KC_ATTR_BOOL, 0, 0, 1, "w is [E, F, K] (x w_e^T)"},
};
static const kc_attr_def gmm_grad_attrs[] = {KG_ROUTE_ATTRS};
static const kc_attr_def gmm_keys[] = {
    {"tokens", KC_ATTR_INT, KC_REQUIRED, 1, 65535, "tokens T"},
    {"k", KC_ATTR_INT, 2, 1, 64, "the experts per token"},
    {"kdim", KC_ATTR_INT, KC_REQUIRED, 1, 1 << 20, "gmm: K, a row's elements; grad_w: P"},
    {"fdim", KC_ATTR_INT, KC_REQUIRED, 1, 1 << 20, "gmm: F, the output's columns; grad_w: Q"},
    {"dtype", KC_ATTR_DTYPE, NN_BF16, 0, 0, "the element type"},
};

const kc_kernel_def kc_moe_gmm_def = {
    .op = NN_OP_MOE_GMM, .n_in = 3, .n_out = 1, .attrs = gmm_attrs,
    .n_attrs = sizeof gmm_attrs / sizeof gmm_attrs[0], .compile = gmm_compile,
    .keys = gmm_keys, .n_keys = 5, .build = gmm_build,
    .doc = "GEMM phases on the matrix unit: one batched GEMM (capacity, or rows padded from "
           "the indices), or one per expert with a timing run's counts",
    .reference = gmm_reference, .index_bound = gmm_index_bound, .from_node = gmm_from_node,
};
const kc_kernel_def kc_moe_gmm_grad_w_def = {
    .op = NN_OP_MOE_GMM_GRAD_W, .n_in = 3, .n_out = 1, .attrs = gmm_grad_attrs,
    .n_attrs = sizeof gmm_grad_attrs / sizeof gmm_grad_attrs[0], .compile = gmm_compile,
    .keys = gmm_keys, .n_keys = 5, .build = gmm_build,
    .doc = "a_e^T b_e as GEMM phases on the matrix unit (as moe_gmm's), zeros for experts "
           "without rows",
    .reference = gmm_reference, .index_bound = gmm_index_bound, .from_node = gmm_from_node,
};
