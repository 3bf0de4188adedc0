/* kc_attn_st.c — the streamed attention kernels (kc_attn_st.h): the plan (block rows, unit
 * sets, the split of heads x row blocks over the cores, the cost model), the driver of units
 * over a core's row blocks and heads, and the forward (attention, attention_lse):
 *
 *   per query block i of a head (a unit; online softmax: running max m, sum l, output O fp32):
 *     DMA  q_i and k_0, one group of copies
 *     per key block j (j <= i when causal, the diagonal block masked):
 *       MXU  S = q_i k_j^T x scale (drained fp32)
 *       DMA  v_j and k_{j+1}, one group, into the buffers S_j and P V_{j-2} freed
 *       VPU  mc = rowmax S; m' = max(m, mc); a_j = exp(m - m'); m = m';
 *            P_j = exp(S - m) in the input type with its row sums s (vpu.fexp); l = l a_j + s
 *       MXU  PV = P_{j-1} v_{j-1} (one block behind S: the array computes block j's S while
 *            the vector unit works on block j - 1)
 *       VPU  O = O a_{j-1} + PV (vpu.fma)
 *     VPU  out_i = O / l into the PV buffer (vpu.fma, rounded once), lse_i = m + log l
 *     DMA  out_i, lse_i -> HBM (in the next unit's body)
 *
 * attention_lse is the same without v, P V and O. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kc_attn_st.h"
#include "kc_gemm.h"
#include "kc_phase.h"

static isa_opnd SP(unsigned reg, uint64_t off) { return isa_spad(reg, off); }
static uint64_t al64(uint64_t n) { return (n + 63) & ~(uint64_t)63; }
static uint64_t max_u64(uint64_t a, uint64_t b) { return a > b ? a : b; }

/* ---- shared helpers ----------------------------------------------------------------------- */

isa_opnd ks_hbm(ks *s, int role, int64_t more)
{
    const ks_op *o = &s->op[s->at[role]];
    return isa_hbm(o->reg, (uint64_t)((int64_t)o->off + more));
}

void ks_wait(ks *s, isa_unit u, int sem, unsigned n) { kce_wait(s->c, u, s->sem[sem], n); }
void ks_signal(ks *s, isa_unit u, int sem, unsigned n) { kce_signal(s->c, u, s->sem[sem], n); }

void ks_fma(ks *s, isa_op op, isa_opnd dst, isa_opnd a, isa_opnd b, isa_bcast bb, isa_opnd c,
            isa_bcast cb, uint64_t rows, uint64_t cols, isa_dtype odt, isa_opnd sum)
{
    isa_insn in;
    isa_insn_init(&in, op);
    isa_args_VPU_FMA *f = &in.VPU_FMA;
    f->dst = dst, f->a = a, f->b = b, f->c = c;
    f->rows = isa_imm((int64_t)rows), f->cols = isa_imm((int64_t)cols);
    f->dtype = isa_enum(ISA_DTYPE_FP32), f->odtype = isa_enum(odt);
    f->bb = isa_enum(bb), f->cb = isa_enum(cb), f->sum = sum;
    isa_emit_insn(s->x->e, &in);
}

void ks_build_mask(ks *s, uint64_t off, bool keys_rows)
{
    uint64_t t = s->t, rs = t * 4;
    kce_fill(s->c, SP(0, off), 0.0f, t, t, ISA_DTYPE_FP32, 0);
    for (uint64_t r = 0; r + 1 < t; r++) {
        if (keys_rows)
            kce_fill(s->c, SP(0, off + (r + 1) * rs), -INFINITY, 1, r + 1, ISA_DTYPE_FP32, 0);
        else
            kce_fill(s->c, SP(0, off + r * rs + (r + 1) * 4), -INFINITY, 1, t - 1 - r,
                     ISA_DTYPE_FP32, 0);
    }
}

void ks_mask(ks *s, uint64_t off, uint64_t n, uint64_t rs, bool keys_rows)
{
    uint64_t t = s->t, mask = keys_rows ? s->f_maskb : s->f_maskf;
    for (uint64_t r0 = 0; r0 < n; r0 += t) {
        uint64_t rows = n - r0 < t ? n - r0 : t, row = off + r0 * rs;
        if (keys_rows) { /* keys r0 .. see no query before r0 */
            if (r0)
                kce_fill(s->c, SP(0, row), -INFINITY, rows, r0, ISA_DTYPE_FP32, rs);
        } else if (r0 + t < n) { /* queries r0 .. see no key after their sub-tile */
            kce_fill(s->c, SP(0, row + (r0 + t) * 4), -INFINITY, rows, n - r0 - t,
                     ISA_DTYPE_FP32, rs);
        }
        kce_bin(s->c, ISA_OP_VPU_ADD, SP(0, row + r0 * 4), SP(0, row + r0 * 4), SP(0, mask),
                rows, rows, ISA_DTYPE_FP32, ISA_BCAST_FULL, rs, rs, t * 4);
    }
}

/* ---- operands and registers ---------------------------------------------------------------- */

/* The kinds (phases) of a's kernel. */
static int ks_kinds(const ka *a, ks_kind *k)
{
    if (a->kind == KA_FWD)
        return k[0] = KS_FWD, 1;
    if (a->kind == KA_LSE)
        return k[0] = KS_LSE, 1;
    k[0] = KS_D, k[1] = KS_DKV, k[2] = KS_DQ;
    return 3;
}

/* s's operands for its kind from a's (role, ka operand, unit or streamed), grouped: operands
 * with the same class, head steps and block step share a register, based at the group's
 * lowest address. */
static void ks_ops(ks *s)
{
    const ka *a = s->a;
    struct { int role, ka; bool unit; } t[KR_NROLE];
    int n = 0;
#define KS_ADD(R, I, U) do { t[n].role = (R), t[n].ka = (I), t[n].unit = (U); n++; } while (0)
    switch (s->kind) {
    case KS_FWD:
        KS_ADD(KR_Q, KA_Q, true);
        KS_ADD(KR_K, KA_K, false);
        KS_ADD(KR_V, KA_V, false);
        KS_ADD(KR_OUT, KA_FOUT, true);
        KS_ADD(KR_LSE, KA_FLSE, true);
        break;
    case KS_LSE:
        KS_ADD(KR_Q, KA_Q, true);
        KS_ADD(KR_K, KA_K, false);
        KS_ADD(KR_LSE, KA_LLSE, true);
        break;
    case KS_D:
        KS_ADD(KR_OUT, KA_O, true);
        KS_ADD(KR_DO, KA_DO, true);
        KS_ADD(KR_LSE, KA_LSE_IN, true);
        KS_ADD(KR_GQ, KA_GRAD, true);
        break;
    case KS_DKV:
        KS_ADD(KR_Q, KA_Q, false);
        KS_ADD(KR_DO, KA_DO, false);
        KS_ADD(KR_GQ, KA_GRAD, false);
        KS_ADD(KR_K, KA_K, true);
        KS_ADD(KR_V, KA_V, true);
        KS_ADD(KR_GKV, KA_GRAD, true);
        break;
    case KS_DQ:
        KS_ADD(KR_Q, KA_Q, true);
        KS_ADD(KR_DO, KA_DO, true);
        KS_ADD(KR_GQ, KA_GRAD, true);
        KS_ADD(KR_K, KA_K, false);
        KS_ADD(KR_V, KA_V, false);
        break;
    }
#undef KS_ADD
    for (int r = 0; r < KR_NROLE; r++)
        s->at[r] = -1;
    s->n_op = n, s->n_grp = 0;
    for (int i = 0; i < n; i++) {
        const ka_opnd *src = &a->op[t[i].ka];
        ks_op *o = &s->op[i];
        s->at[t[i].role] = i;
        o->base = src->base + (t[i].role == KR_GKV ? (uint64_t)a->part : 0);
        o->sb = src->sb, o->sh = src->sh, o->srow = src->srow, o->dt = src->dt;
        o->bstep = (int64_t)s->T * src->srow;
        o->unit = t[i].unit;
        unsigned g = 0;
        while (g < s->n_grp && !(s->gunit[g] == o->unit && s->gsb[g] == o->sb &&
                                 s->gsh[g] == o->sh && s->gbstep[g] == o->bstep))
            g++;
        if (g == s->n_grp) {
            s->gunit[g] = o->unit, s->gsb[g] = o->sb, s->gsh[g] = o->sh;
            s->gbstep[g] = o->bstep, s->gbase[g] = UINT64_MAX;
            s->n_grp++;
        }
        o->g = g;
        if (o->base < s->gbase[g])
            s->gbase[g] = o->base;
    }
    for (int i = 0; i < n; i++)
        s->op[i].off = s->op[i].base - s->gbase[s->op[i].g];
}

/* Registers a kind needs: its groups, the unit sets, the stream sets, a scratch, the pending
 * store's address and its staging set (or the lse address). */
static unsigned ks_regs(const ks *s, unsigned nus) { return s->n_grp + 6 + (nus > 1); }

/* ---- layout ---------------------------------------------------------------------------------- */

/* The forward's (and lse's) layout; the backward's is kc_attn_stb.c's. */
static uint64_t ks_layout(ks *s, unsigned nus, uint64_t base, uint64_t acc, uint64_t *accb)
{
    if (s->kind != KS_FWD && s->kind != KS_LSE)
        return ks_bwd_layout(s, nus, base, acc, accb);
    uint64_t T = s->T, Dh = s->Dh, e = s->e, f4 = al64(T * 4);
    bool fwd = s->kind == KS_FWD;
    uint64_t tile = al64(T * Dh * e);
    s->u_q = 0;
    uint64_t usz = tile;
    s->s_k = 0, s->s_v = tile;
    s->s_p = s->s_v + (fwd ? tile : 0);
    s->s_al = s->s_p + (fwd ? al64(T * T * e) : 0);
    uint64_t ssz = s->s_al + f4;
    uint64_t at = base;
    s->us[0] = at, at += usz;
    s->us[1] = nus > 1 ? at : s->us[0], at += nus > 1 ? usz : 0;
    s->ss[0] = at, at += ssz;
    s->ss[1] = at, at += ssz;
    s->f_s = at, at += al64(T * T * 4);
    s->f_pv = at, at += fwd ? al64(T * Dh * 4) : 0; /* also out's staging (oe <= 4) */
    s->f_o = at, at += fwd ? al64(T * Dh * 4) : 0;
    s->f_lst = at, at += f4;
    s->f_m = at, at += f4;
    s->f_l = at, at += f4;
    s->f_mc = at, at += f4;
    s->f_lc = at, at += f4;
    s->f_nm = at, at += f4;
    s->f_maskf = at, at += s->causal ? al64(s->t * s->t * 4) : 0;
    s->f_one = at, at += 64;
    s->a_s = acc, s->a_pv = acc + al64(T * T * 4);
    *accb = al64(T * T * 4) + (fwd ? al64(T * Dh * 4) : 0);
    return at - base;
}

/* ---- the cost model --------------------------------------------------------------------------- */

double ks_lat(const ks *s, unsigned copies)
{
    const arch_config *cfg = s->x->cfg;
    double one = cfg->chip.hbm_latency_ns * cfg->core.clock_ghz;
    uint64_t out = cfg->core.dma_outstanding ? cfg->core.dma_outstanding : 1;
    return one * (double)ka_cdiv(copies, out);
}

double ks_dma(const ks *s, double bytes, unsigned copies, double bw)
{
    return bytes / bw + ks_lat(s, copies);
}

/* Cycles of one T x T pair of the forward kinds: the array's products and drains, the vector
 * unit's passes and the DMA's blocks (ks_dma), overlapped. */
static double ks_pair(const ks *s, double bw)
{
    if (s->kind != KS_FWD && s->kind != KS_LSE)
        return ks_bwd_pair(s, bw);
    const arch_config *cfg = s->x->cfg;
    isa_dtype dt = s->a->dt;
    double lanes = (double)cfg->core.vector_lanes * cfg->core.vector_ops_per_lane;
    double tr = (double)cfg->core.vector_lanes * cfg->core.vector_transc_ops_per_lane;
    double C = (double)cfg->core.array_cols, T = (double)s->T, Dh = (double)s->Dh;
    double el = T * T, blk = T * Dh * (double)s->e;
    double mxu = (double)kmm_array_cycles(cfg, dt, s->T, s->T, s->Dh) + el / C;
    double vpu = el / lanes + el / tr + 8 * T / lanes;
    if (s->kind == KS_FWD) {
        mxu += (double)kmm_array_cycles(cfg, dt, s->T, s->Dh, s->T) + T * Dh / C;
        vpu += T * Dh / lanes;
    }
    bool fwd = s->kind == KS_FWD; /* one group of copies: v_j and k_{j+1} */
    double dma = ks_dma(s, (fwd ? 2 : 1) * blk, fwd ? 2 : 1, bw);
    double m = mxu > vpu ? mxu : vpu;
    return (m > dma ? m : dma) + 40;
}

/* Cycles of one unit besides its pairs: its own loads and store, fills and the final pass. */
static double ks_unit_cost(const ks *s, double bw)
{
    if (s->kind != KS_FWD && s->kind != KS_LSE)
        return ks_bwd_unit(s, bw);
    const arch_config *cfg = s->x->cfg;
    double lanes = (double)cfg->core.vector_lanes * cfg->core.vector_ops_per_lane;
    double T = (double)s->T, Dh = (double)s->Dh;
    double v = s->kind == KS_FWD ? 2 * T * Dh / lanes : 0;
    double d = (T * Dh * (double)(s->e + (s->kind == KS_FWD ? s->oe : 0)) + 4 * T) / bw;
    return (v > d ? v : d) + ks_lat(s, 2) + ks_lat(s, s->kind == KS_FWD ? 2 : 1) + 100;
}

/* Pairs of unit r (its block index). */
static uint64_t ks_pairs(const ks *s, uint64_t r)
{
    if (s->kind == KS_D)
        return 0;
    if (!s->causal)
        return s->nq;
    return s->kind == KS_DKV ? s->nq - r : r + 1;
}

/* Part p of rp of the row blocks 0 .. nq-1: contiguous blocks (not causal), or dealt from the
 * last down in snake order (causal: block i has i + 1 pairs, so the parts get even work).
 * Fills rows (ascending, the edge block first when it is partial); returns the count. */
static uint64_t ks_rows_of(const ks *s, uint64_t rp, uint64_t p, uint64_t *rows)
{
    uint64_t n = 0, nq = s->nq;
    if (!s->causal) {
        uint64_t lo, hi;
        kmm_block(nq, rp, p, &lo, &hi);
        for (uint64_t r = lo; r < hi; r++)
            rows[n++] = r;
    } else {
        for (uint64_t r = 0; r < nq; r++) {
            uint64_t k = nq - 1 - r, round = k / rp, pos = k % rp;
            if ((round % 2 ? rp - 1 - pos : pos) == p)
                rows[n++] = r;
        }
    }
    if (n > 1 && rows[n - 1] == nq - 1 && s->edge < s->T) { /* the edge block first */
        uint64_t last = rows[n - 1];
        memmove(rows + 1, rows, (size_t)(n - 1) * sizeof *rows);
        rows[0] = last;
    }
    return n;
}

/* The cycles of the busiest row part of rp, over every kind of the kernel, per head (load:
 * rp doubles of scratch). */
static double ks_part_cost(ks *s, const ks_kind *kinds, int nk, uint64_t rp, double bw,
                           double *load)
{
    double total = 0;
    const arch_config *cfg = s->x->cfg;
    double lanes = (double)cfg->core.vector_lanes * cfg->core.vector_ops_per_lane;
    double T = (double)s->T, t = (double)s->t, mask = (T * T / 2 + T * t / 2) / lanes;
    for (int k = 0; k < nk; k++) {
        s->kind = kinds[k];
        double pair = ks_pair(s, bw), unit = ks_unit_cost(s, bw), worst = 0;
        if (!s->causal) { /* contiguous parts, the larger ones first */
            double w = (double)ka_cdiv(s->nq, rp) * ((double)ks_pairs(s, 0) * pair + unit);
            worst = w;
        } else { /* the rows dealt in snake order (ks_rows_of) */
            for (uint64_t p = 0; p < rp; p++)
                load[p] = 0;
            for (uint64_t r = 0; r < s->nq; r++) {
                uint64_t kk = s->nq - 1 - r, round = kk / rp, pos = kk % rp;
                load[round % 2 ? rp - 1 - pos : pos] +=
                    (double)ks_pairs(s, r) * pair + unit + (s->kind == KS_D ? 0 : mask);
            }
            for (uint64_t p = 0; p < rp; p++)
                worst = load[p] > worst ? load[p] : worst;
        }
        total += worst + (k ? 2000 : 0); /* a barrier between phases */
    }
    return total;
}

/* A ks for planning and emission: a's shapes with blocks of T. */
static void ks_init(ks *s, const ka *a, kce *c, kc_ctx *x, uint64_t T)
{
    memset(s, 0, sizeof *s);
    s->a = a, s->x = x, s->c = c;
    s->T = T, s->nq = ka_cdiv(a->S, T), s->edge = a->S - (s->nq - 1) * T;
    s->Dh = a->Dh, s->e = a->e, s->oe = a->oe, s->t = T < KA_MASK_T ? T : KA_MASK_T;
    s->causal = a->causal, s->f32 = a->dt == ISA_DTYPE_FP32;
    if (a->kind == KA_BWD)
        s->packed_ld = a->op[KA_GRAD].srow == (int64_t)(a->Dh * a->oe);
}

bool ks_plan_make(const ka *a, uint64_t T, uint64_t spad, uint64_t accb, unsigned n_regs,
                  uint64_t n_cores, ks_plan *p, uint64_t *need_spad, uint64_t *need_acc,
                  const char **why)
{
    ks s;
    ks_init(&s, a, NULL, a->x, T); /* planning: nothing emitted */
    if (why)
        *why = "";
    ks_kind kinds[3];
    int nk = ks_kinds(a, kinds);
    if (a->kind == KA_BWD && a->Dh * a->oe < 8) {
        if (why)
            *why = "a gradient row under 8 bytes cannot hold its (-lse, D) pair";
        *need_spad = *need_acc = 0;
        return false;
    }
    for (unsigned nus = 2; nus >= 1; nus--) {
        uint64_t ns = 0, na = 0;
        unsigned nr = 0;
        for (int k = 0; k < nk; k++) {
            s.kind = kinds[k];
            uint64_t ab, sb = ks_layout(&s, nus, 0, 0, &ab);
            ks_ops(&s);
            ns = max_u64(ns, sb), na = max_u64(na, ab);
            unsigned r = ks_regs(&s, nus);
            nr = r > nr ? r : nr;
        }
        *need_spad = ns, *need_acc = na;
        if (ns > spad || na > accb)
            continue;
        if (nr > n_regs) {
            if (why)
                *why = "too few registers";
            continue;
        }
        /* the split: row parts rp and head blocks, the busiest core's cycles */
        const arch_config *cfg = a->x->cfg;
        double best = INFINITY;
        uint64_t heads = a->B * a->H, max_rp = s.nq < n_cores ? s.nq : n_cores;
        double *load = malloc((size_t)max_rp * sizeof *load);
        if (!load) {
            if (why)
                *why = "out of memory planning it";
            return false;
        }
        for (uint64_t rp = 1; rp <= max_rp; rp++) {
            uint64_t hp = n_cores / rp, pr, pc;
            hp = hp < heads ? hp : heads;
            kmm_split_grid(a->B, a->H, hp, &pr, &pc);
            uint64_t hc = ka_cdiv(a->B, pr) * ka_cdiv(a->H, pc), cores = pr * pc * rp;
            double bw = cfg->chip.hbm_gb_per_s / cfg->core.clock_ghz / (double)cores;
            double est = (double)hc * ks_part_cost(&s, kinds, nk, rp, bw, load);
            if (est < best * 0.999) {
                best = est;
                *p = (ks_plan){T, nus, pr, pc, rp, ns, na, nr, est};
            }
        }
        free(load);
        return true;
    }
    return false;
}

/* ---- the forward's unit ---------------------------------------------------------------------- */

static uint64_t ks_tk(const ks *s, uint64_t j) { return j + 1 == s->nq ? s->edge : s->T; }

/* A copy of key block j (jrel blocks past the stream registers, tk keys) of k or v into the
 * set at reg; its semaphores are the caller's (a group's copies go in flight together). */
static void sf_copy(ks *s, int role, unsigned set, int64_t jrel, uint64_t tk)
{
    const ks_op *o = &s->op[s->at[role]];
    kce_dma(s->c, SP(set, role == KR_K ? s->s_k : s->s_v), ks_hbm(s, role, jrel * o->bstep), o->dt,
            s->Dh, tk, 1, 0, (uint64_t)o->srow, 0, 0);
}

/* One group of loads: v of key block j into set (tkv keys; 0: none) and k of block j + 1 into
 * set2 (tkk keys; 0: none) — the waits, the copies, then the signals. */
static void sf_group(ks *s, unsigned set, unsigned set2, int64_t jrel, uint64_t tkv,
                     uint64_t tkk)
{
    if (tkv)
        ks_wait(s, ISA_UNIT_DMA, KS_VFREE, 1);
    if (tkk)
        ks_wait(s, ISA_UNIT_DMA, KS_KFREE, 1);
    if (tkv)
        sf_copy(s, KR_V, set, jrel, tkv);
    if (tkk)
        sf_copy(s, KR_K, set2, jrel + 1, tkk);
    if (tkv)
        ks_signal(s, ISA_UNIT_DMA, KS_VFULL, 1);
    if (tkk)
        ks_signal(s, ISA_UNIT_DMA, KS_KFULL, 1);
}

/* The array: S = q k^T x scale of the key block in set (tk keys), drained fp32 packed. */
static void sf_s_mxu(ks *s, unsigned set, uint64_t tq, uint64_t tk)
{
    isa_emit *e = s->x->e;
    isa_dtype dt = s->a->dt;
    ks_wait(s, ISA_UNIT_MXU, KS_KFULL, 1);
    ISA_EMIT(e, MXU_LOAD, SP(set, s->s_k), isa_imm((int64_t)s->Dh), isa_imm((int64_t)tk),
             isa_enum(dt), isa_imm(1));
    ISA_EMIT(e, MXU_MM, isa_acc(0, s->a_s), SP(s->rU, s->u_q), isa_imm((int64_t)tq),
             isa_enum(dt));
    ks_signal(s, ISA_UNIT_MXU, KS_KFREE, 1);
    ks_wait(s, ISA_UNIT_MXU, KS_TFREE, 1);
    ISA_EMIT(e, MXU_DRAIN, SP(0, s->f_s), isa_acc(0, s->a_s), isa_imm((int64_t)tq),
             isa_imm((int64_t)tk), isa_enum(ISA_DTYPE_FP32), isa_enum(ISA_ACT_NONE),
             isa_f32(s->a->scale));
    ks_signal(s, ISA_UNIT_MXU, KS_TFULL, 1);
}

/* The vector unit: the online-softmax step on S (a_j and P_j into set). */
static void sf_s_vpu(ks *s, unsigned set, uint64_t tq, uint64_t tk, bool diag)
{
    kce *c = s->c;
    isa_dtype F = ISA_DTYPE_FP32;
    bool fwd = s->kind == KS_FWD;
    ks_wait(s, ISA_UNIT_VPU, KS_TFULL, 1);
    if (diag)
        ks_mask(s, s->f_s, tq, tk * 4, false);
    isa_opnd S = SP(0, s->f_s), m = SP(0, s->f_m), mc = SP(0, s->f_mc), al = SP(set, s->s_al);
    kce_red(c, ISA_OP_VPU_RMAX, mc, S, tq, tk, F, 0);
    kce_bin(c, ISA_OP_VPU_MAX, mc, m, mc, 1, tq, F, ISA_BCAST_FULL, 0, 0, 0);
    kce_bin(c, ISA_OP_VPU_SUB, al, m, mc, 1, tq, F, ISA_BCAST_FULL, 0, 0, 0);
    kce_un(c, ISA_OP_VPU_EXP, al, al, 1, tq, F, 0, 0);
    kce_un(c, ISA_OP_VPU_COPY, m, mc, 1, tq, F, 0, 0);
    kce_un(c, ISA_OP_VPU_NEG, SP(0, s->f_nm), m, 1, tq, F, 0, 0);
    if (fwd)
        ks_wait(s, ISA_UNIT_VPU, KS_PFREE, 1);
    ks_fma(s, ISA_OP_VPU_FEXP, fwd ? SP(set, s->s_p) : S, S, SP(0, s->f_one), ISA_BCAST_SCALAR,
           SP(0, s->f_nm), ISA_BCAST_COL, tq, tk, fwd ? s->a->dt : F, SP(0, s->f_lc));
    ks_signal(s, ISA_UNIT_VPU, KS_TFREE, 1);
    isa_opnd l = SP(0, s->f_l);
    ks_fma(s, ISA_OP_VPU_FMA, l, l, al, ISA_BCAST_FULL, SP(0, s->f_lc), ISA_BCAST_FULL, 1, tq, F,
           isa_none());
    if (fwd)
        ks_signal(s, ISA_UNIT_VPU, KS_PFULL, 1);
}

/* The array: PV = P v of the key block in set (tk keys). */
static void sf_pv_mxu(ks *s, unsigned set, uint64_t tq, uint64_t tk)
{
    isa_emit *e = s->x->e;
    isa_dtype dt = s->a->dt;
    ks_wait(s, ISA_UNIT_MXU, KS_VFULL, 1);
    ks_wait(s, ISA_UNIT_MXU, KS_PFULL, 1);
    ISA_EMIT(e, MXU_LOAD, SP(set, s->s_v), isa_imm((int64_t)tk), isa_imm((int64_t)s->Dh),
             isa_enum(dt));
    ISA_EMIT(e, MXU_MM, isa_acc(0, s->a_pv), SP(set, s->s_p), isa_imm((int64_t)tq),
             isa_enum(dt), isa_enum(ISA_ACCM_SET));
    ks_signal(s, ISA_UNIT_MXU, KS_VFREE, 1);
    ks_signal(s, ISA_UNIT_MXU, KS_PFREE, 1);
    ks_wait(s, ISA_UNIT_MXU, KS_PVFREE, 1);
    ISA_EMIT(e, MXU_DRAIN, SP(0, s->f_pv), isa_acc(0, s->a_pv), isa_imm((int64_t)tq),
             isa_imm((int64_t)s->Dh), isa_enum(ISA_DTYPE_FP32));
    ks_signal(s, ISA_UNIT_MXU, KS_PVFULL, 1);
}

/* The vector unit: O = O a + PV (a of the block in set). */
static void sf_o_vpu(ks *s, unsigned set, uint64_t tq, bool last)
{
    isa_opnd O = SP(0, s->f_o);
    ks_wait(s, ISA_UNIT_VPU, KS_PVFULL, 1);
    ks_fma(s, ISA_OP_VPU_FMA, O, O, SP(set, s->s_al), ISA_BCAST_COL, SP(0, s->f_pv),
           ISA_BCAST_FULL, tq, s->Dh, ISA_DTYPE_FP32, isa_none());
    if (!last) /* the last PV's buffer becomes out's staging: the store frees it */
        ks_signal(s, ISA_UNIT_VPU, KS_PVFREE, 1);
}

/* Iteration j of a unit (jrel blocks past the stream registers; the current set holds k_j,
 * the other v_{j-1} and P_{j-1}): S of block j (tk keys), P V of block j - 1 (tkp keys; 0:
 * none, j = 0), the loads of v_j (here: forward) and k_{j+1} (tk1 keys; 0: none) into the
 * sets they free, block j's softmax and O's update; then the sets swap. */
static void sf_iter(ks *s, uint64_t tq, int64_t jrel, uint64_t tk, uint64_t tk1, uint64_t tkp,
                    bool diag, bool last)
{
    bool fwd = s->kind == KS_FWD;
    sf_s_mxu(s, s->rA, tq, tk);
    if (last)
        ks_signal(s, ISA_UNIT_MXU, KS_UFREE, 1); /* q is read for the last time */
    if (fwd && tkp)
        sf_pv_mxu(s, s->rB, tq, tkp);
    sf_group(s, s->rA, s->rB, jrel, fwd ? tk : 0, tk1);
    sf_s_vpu(s, s->rA, tq, tk, diag);
    if (fwd && tkp)
        sf_o_vpu(s, s->rB, tq, false);
    kce_swap(s->c, s->rA, s->rB, s->rT);
}

/* The pending store: out and lse of the unit before, from their staging. */
static void sf_store(ks *s, uint64_t rows)
{
    kce *c = s->c;
    bool fwd = s->kind == KS_FWD;
    ks_wait(s, ISA_UNIT_DMA, KS_OFULL, 1);
    if (fwd) {
        const ks_op *o = &s->op[s->at[KR_OUT]];
        kce_dma(c, isa_hbm(s->rOst, 0), SP(0, s->f_pv), s->a->odt, s->Dh, rows, 1,
                (uint64_t)o->srow, 0, 0, 0);
    }
    kce_dma(c, isa_hbm(s->rLst, 0), SP(0, s->f_lst), ISA_DTYPE_FP32, rows, 1, 1, 0, 0, 0, 0);
    if (fwd)
        ks_signal(s, ISA_UNIT_DMA, KS_PVFREE, 1);
    ks_signal(s, ISA_UNIT_DMA, KS_LFREE, 1);
}

/* Unit r: query block r of the current head (the unit registers point at it). */
static void sf_unit(ks *s, uint64_t r, bool pending)
{
    kce *c = s->c;
    isa_dtype F = ISA_DTYPE_FP32;
    bool fwd = s->kind == KS_FWD;
    uint64_t tq = s->seg_rows, n = s->causal ? r + 1 : s->nq;
    const ks_op *q = &s->op[s->at[KR_Q]];
    /* q_i and k_0; then each iteration loads the v it works on next and the next k */
    ks_wait(s, ISA_UNIT_DMA, KS_UFREE, 1);
    ks_wait(s, ISA_UNIT_DMA, KS_KFREE, 1);
    kce_dma(c, SP(s->rU, s->u_q), ks_hbm(s, KR_Q, 0), q->dt, s->Dh, tq, 1, 0, (uint64_t)q->srow,
            0, 0);
    sf_copy(s, KR_K, s->rA, 0, ks_tk(s, 0));
    ks_signal(s, ISA_UNIT_DMA, KS_UFULL, 1);
    ks_signal(s, ISA_UNIT_DMA, KS_KFULL, 1);
    if (pending)
        s->store(s, tq);
    kce_fill(c, SP(0, s->f_m), -INFINITY, 1, tq, F, 0);
    kce_fill(c, SP(0, s->f_l), 0.0f, 1, tq, F, 0);
    if (fwd)
        kce_fill(c, SP(0, s->f_o), 0.0f, tq, s->Dh, F, 0);
    ks_wait(s, ISA_UNIT_MXU, KS_UFULL, 1);
    sf_iter(s, tq, 0, ks_tk(s, 0), n > 1 ? ks_tk(s, 1) : 0, 0, s->causal && r == 0, n == 1);
    /* blocks 1 .. n-1: the middle ones (whole, unmasked, loading whole ones) a loop */
    uint64_t T = s->T;
    if (n >= 4) {
        kc_loop l;
        unsigned regs[KR_NROLE];
        int64_t st[KR_NROLE];
        unsigned nr = 0;
        for (unsigned g = 0; g < s->n_grp; g++)
            if (!s->gunit[g])
                regs[nr] = s->greg[g], st[nr++] = s->gbstep[g];
        kc_loop_begin(s->x, &l, n - 3, nr, regs, st);
        uint64_t saved = c->mult;
        c->mult *= n - 3;
        sf_iter(s, tq, 1, T, T, T, false, false);
        c->mult = saved;
        kc_loop_end(s->x, &l);
    }
    for (uint64_t j = n >= 4 ? n - 2 : 1; j < n; j++)
        sf_iter(s, tq, (int64_t)j, ks_tk(s, j), j + 1 < n ? ks_tk(s, j + 1) : 0,
                ks_tk(s, j - 1), s->causal && j == r, j + 1 == n);
    if (fwd) {
        sf_pv_mxu(s, s->rB, tq, ks_tk(s, n - 1));
        sf_o_vpu(s, s->rB, tq, true);
    }
    /* out = O / l, rounded once, into the PV buffer; lse = m + log l */
    isa_opnd l = SP(0, s->f_l), lc = SP(0, s->f_lc);
    ks_wait(s, ISA_UNIT_VPU, KS_LFREE, 1);
    kce_un(c, ISA_OP_VPU_RECIP, lc, l, 1, tq, F, 0, 0);
    if (fwd)
        ks_fma(s, ISA_OP_VPU_FMA, SP(0, s->f_pv), SP(0, s->f_o), lc, ISA_BCAST_COL,
               SP(0, s->f_one + 4), ISA_BCAST_SCALAR, tq, s->Dh, s->a->odt, isa_none());
    kce_un(c, ISA_OP_VPU_LOG, lc, l, 1, tq, F, 0, 0);
    kce_bin(c, ISA_OP_VPU_ADD, SP(0, s->f_lst), SP(0, s->f_m), lc, 1, tq, F, ISA_BCAST_FULL, 0,
            0, 0);
    ks_signal(s, ISA_UNIT_VPU, KS_OFULL, 1);
    /* this unit's store is the next one's (or the segment's end's) */
    if (fwd) {
        const ks_op *o = &s->op[s->at[KR_OUT]];
        kce_addi(c, s->rOst, o->reg, (int64_t)o->off);
    }
    const ks_op *o = &s->op[s->at[KR_LSE]];
    kce_addi(c, s->rLst, o->reg, (int64_t)o->off);
    if (s->p->nus > 1)
        kce_swap(c, s->rU, s->rU2, s->rT);
}

static void sf_setup(ks *s)
{
    bool fwd = s->kind == KS_FWD;
    ks_signal(s, ISA_UNIT_DMA, KS_UFREE, s->p->nus);
    ks_signal(s, ISA_UNIT_DMA, KS_KFREE, 2);
    ks_signal(s, ISA_UNIT_MXU, KS_TFREE, 1);
    ks_signal(s, ISA_UNIT_VPU, KS_LFREE, 1);
    if (fwd) {
        ks_signal(s, ISA_UNIT_DMA, KS_VFREE, 2);
        ks_signal(s, ISA_UNIT_VPU, KS_PFREE, 2);
        ks_signal(s, ISA_UNIT_MXU, KS_PVFREE, 1);
    }
    if (s->causal)
        ks_build_mask(s, s->f_maskf, false);
    kce_fill(s->c, SP(0, s->f_one), 1.0f, 1, 1, ISA_DTYPE_FP32, 0);
    kce_fill(s->c, SP(0, s->f_one + 4), 0.0f, 1, 1, ISA_DTYPE_FP32, 0);
}

static void sf_settle(ks *s)
{
    bool fwd = s->kind == KS_FWD;
    ks_wait(s, ISA_UNIT_DMA, KS_UFREE, s->p->nus);
    ks_wait(s, ISA_UNIT_DMA, KS_KFREE, 2);
    ks_wait(s, ISA_UNIT_MXU, KS_TFREE, 1);
    ks_wait(s, ISA_UNIT_VPU, KS_LFREE, 1);
    if (fwd) {
        ks_wait(s, ISA_UNIT_DMA, KS_VFREE, 2);
        ks_wait(s, ISA_UNIT_VPU, KS_PFREE, 2);
        ks_wait(s, ISA_UNIT_MXU, KS_PVFREE, 1);
    }
}

/* ---- the driver -------------------------------------------------------------------------------- */

/* Adds k blocks to every unit register (k may be negative). */
static void ks_unit_regs(ks *s, int64_t k)
{
    if (!k)
        return;
    for (unsigned g = 0; g < s->n_grp; g++)
        if (s->gunit[g])
            kce_addi(s->c, s->greg[g], s->greg[g], k * s->gbstep[g]);
}

/* Every group register stepped by its b step (outer) or h step. */
static void ks_head_regs(ks *s, bool outer, unsigned *regs, int64_t *st)
{
    for (unsigned g = 0; g < s->n_grp; g++)
        regs[g] = s->greg[g], st[g] = outer ? s->gsb[g] : s->gsh[g];
}

static void ks_head_add(ks *s, bool outer, int64_t k)
{
    for (unsigned g = 0; g < s->n_grp; g++)
        kce_addi(s->c, s->greg[g], s->greg[g], k * (outer ? s->gsb[g] : s->gsh[g]));
}

/* A loop of count over the heads along b (outer) or h whose body is fn. */
static void ks_head_loop(ks *s, bool outer, uint64_t count, void (*fn)(ks *, uint64_t, uint64_t),
                         uint64_t r, uint64_t nh)
{
    kc_loop l;
    unsigned regs[KR_NROLE];
    int64_t st[KR_NROLE];
    ks_head_regs(s, outer, regs, st);
    kc_loop_begin(s->x, &l, count, s->n_grp, regs, st);
    uint64_t saved = s->c->mult;
    s->c->mult *= count;
    fn(s, r, nh);
    s->c->mult = saved;
    kc_loop_end(s->x, &l);
}

static void ks_unit_pending(ks *s, uint64_t r, uint64_t nh) { (void)nh, s->unit(s, r, true); }
static void ks_row_of_heads(ks *s, uint64_t r, uint64_t nh)
{
    ks_head_loop(s, false, nh, ks_unit_pending, r, nh);
}

/* Row block r of the nb x nh heads (the unit registers point at its block); peel: the first
 * unit has no store pending. */
static void ks_heads(ks *s, uint64_t r, uint64_t nb, uint64_t nh, bool peel)
{
    if (!peel) {
        ks_head_loop(s, true, nb, ks_row_of_heads, r, nh);
        return;
    }
    s->unit(s, r, false);
    if (nh > 1) {
        ks_head_add(s, false, 1);
        ks_head_loop(s, false, nh - 1, ks_unit_pending, r, nh);
        ks_head_add(s, false, -1);
    }
    if (nb > 1) {
        ks_head_add(s, true, 1);
        ks_head_loop(s, true, nb - 1, ks_row_of_heads, r, nh);
        ks_head_add(s, true, -1);
    }
}

/* A segment: the units of row blocks rows[0 .. n) (one block size), the last one's store. */
static void ks_segment(ks *s, const uint64_t *rows, uint64_t n, uint64_t nb, uint64_t nh,
                       uint64_t brows)
{
    s->seg_rows = brows;
    ks_unit_regs(s, (int64_t)rows[0]);
    ks_heads(s, rows[0], nb, nh, true);
    ks_unit_regs(s, -(int64_t)rows[0]);
    if (n > 1 && !s->causal) { /* rows[1 ..] are contiguous and alike: a loop */
        kc_loop l;
        unsigned regs[KR_NROLE];
        int64_t st[KR_NROLE];
        unsigned nr = 0;
        for (unsigned g = 0; g < s->n_grp; g++)
            if (s->gunit[g])
                regs[nr] = s->greg[g], st[nr++] = s->gbstep[g];
        ks_unit_regs(s, (int64_t)rows[1]);
        kc_loop_begin(s->x, &l, n - 1, nr, regs, st);
        uint64_t saved = s->c->mult;
        s->c->mult *= n - 1;
        ks_heads(s, rows[1], nb, nh, false);
        s->c->mult = saved;
        kc_loop_end(s->x, &l);
        ks_unit_regs(s, -(int64_t)rows[1]);
    } else {
        for (uint64_t k = 1; k < n; k++) {
            ks_unit_regs(s, (int64_t)rows[k]);
            ks_heads(s, rows[k], nb, nh, false);
            ks_unit_regs(s, -(int64_t)rows[k]);
        }
    }
    s->store(s, brows);
}

/* ---- a core ----------------------------------------------------------------------------------- */

/* One phase on one core: the heads [b0, b0 + nb) x [h0, h0 + nh), row blocks rows[0 .. n). */
static np_status ks_core(ks *s, uint32_t core, uint64_t b0, uint64_t nb, uint64_t h0,
                         uint64_t nh, const uint64_t *rows, uint64_t n)
{
    kc_ctx *x = s->x;
    if (kc_core(x, core) != NP_OK)
        return kc_status(x);
    uint64_t ab, need = ks_layout(s, s->p->nus, 0, 0, &ab), at, acc = 0;
    kc_spad_alloc(x, need, 64, &at);
    kc_acc_alloc(x, ab ? ab : 64, 64, &acc);
    if (kc_status(x) != NP_OK)
        return kc_status(x);
    ks_layout(s, s->p->nus, at, acc, &ab);
    ks_ops(s);
    for (unsigned g = 0; g < s->n_grp; g++)
        kc_reg_alloc(x, &s->greg[g]);
    for (int i = 0; i < s->n_op; i++)
        s->op[i].reg = s->greg[s->op[i].g];
    unsigned *regs[] = {&s->rU, &s->rA, &s->rB, &s->rT, &s->rOst, &s->rLst};
    for (size_t i = 0; i < sizeof regs / sizeof regs[0]; i++)
        kc_reg_alloc(x, regs[i]);
    if (s->p->nus > 1)
        kc_reg_alloc(x, &s->rU2);
    else
        s->rU2 = s->rU;
    for (int i = 0; i < KS_NSEM; i++)
        kc_sem_alloc(x, &s->sem[i]);
    if (kc_status(x) != NP_OK)
        return kc_status(x);
    for (unsigned g = 0; g < s->n_grp; g++)
        ISA_EMIT(x->e, LI, isa_reg(s->greg[g]),
                 isa_imm((int64_t)s->gbase[g] + (int64_t)b0 * s->gsb[g] +
                         (int64_t)h0 * s->gsh[g]));
    ISA_EMIT(x->e, LI, isa_reg(s->rU), isa_imm((int64_t)s->us[0]));
    if (s->p->nus > 1)
        ISA_EMIT(x->e, LI, isa_reg(s->rU2), isa_imm((int64_t)s->us[1]));
    ISA_EMIT(x->e, LI, isa_reg(s->rA), isa_imm((int64_t)s->ss[0]));
    ISA_EMIT(x->e, LI, isa_reg(s->rB), isa_imm((int64_t)s->ss[1]));
    bool fwd = s->kind == KS_FWD || s->kind == KS_LSE;
    if (fwd) {
        s->unit = sf_unit, s->store = sf_store;
        sf_setup(s);
    } else {
        ks_bwd_bind(s);
        ks_bwd_setup(s);
    }
    uint64_t i = 0;
    if (rows[0] == s->nq - 1 && s->edge < s->T) {
        ks_segment(s, rows, 1, nb, nh, s->edge);
        i = 1;
    }
    if (i < n)
        ks_segment(s, rows + i, n - i, nb, nh, s->T);
    if (fwd)
        sf_settle(s);
    else
        ks_bwd_settle(s);
    return kc_status(x);
}

np_status ks_compile(ka *a, const ks_plan *p)
{
    kc_ctx *x = a->x;
    const kc_place *pl = &x->k->place;
    ks_kind kinds[3];
    int nk = ks_kinds(a, kinds);
    ks s;
    ks_init(&s, a, &a->c, x, p->T);
    s.p = p;
    uint64_t *rows = malloc((size_t)s.nq * sizeof *rows);
    if (!rows)
        return kc_fail(x, NP_ERR_NOMEM, "out of memory");
    uint64_t used = 0;
    for (int k = 0; k < nk && kc_status(x) == NP_OK; k++) {
        for (uint64_t hb = 0; hb < p->pr * p->pc; hb++) {
            uint64_t b0, b1, h0, h1;
            kmm_block(a->B, p->pr, hb / p->pc, &b0, &b1);
            kmm_block(a->H, p->pc, hb % p->pc, &h0, &h1);
            for (uint64_t part = 0; part < p->rp; part++) {
                uint64_t n = ks_rows_of(&s, p->rp, part, rows);
                if (!n || b1 == b0 || h1 == h0)
                    continue;
                ks run = s;
                run.kind = kinds[k];
                uint64_t core = hb * p->rp + part;
                used = core + 1 > used ? core + 1 : used;
                a->c.rd = a->c.wr = 0;
                a->c.mult = 1;
                if (ks_core(&run, pl->core0 + (uint32_t)core, b0, b1 - b0, h0, h1 - h0, rows,
                            n) != NP_OK)
                    break;
                x->res->hbm_read_bytes += a->c.rd;
                x->res->hbm_write_bytes += a->c.wr;
            }
        }
        if (k + 1 < nk)
            kc_phase_end(x);
    }
    free(rows);
    x->res->cores = (uint32_t)used;
    return kc_status(x);
}
