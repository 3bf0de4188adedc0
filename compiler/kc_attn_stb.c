/* kc_attn_stb.c — attention_grad with K/V streamed (kc_attn_st.h): three phases, a barrier
 * between them (kc_attn_st.c plans, drives the units and places the phases):
 *
 *   D    per query block i:  DMA out_i, dout_i, lse_i
 *                            VPU (-lse_i, D_i = rowsum(dout_i . out_i)) (vpu.neg, vpu.rdot)
 *                            DMA the pair -> the first bytes of block i's dq rows
 *   DKV  per key block j (dk_j, dv_j in the accumulators), per query block i (i >= j causal):
 *          MXU  S^T = k_j q_i^T x scale;  dP^T = v_j dout_i^T
 *          VPU  [mask]; P^T = exp(S^T - lse_i) (vpu.fexp), cast; dS^T = P^T (dP^T - D_i), cast
 *          MXU  dv_j += P^T dout_i;  dk_j += dS^T q_i
 *        MXU dk_j x scale, dv_j drained over k_j, v_j;  DMA -> HBM
 *   DQ   per query block i (dq_i in the accumulators), per key block j (j <= i causal):
 *          MXU  S = q_i k_j^T x scale;  dP = dout_i v_j^T
 *          VPU  [mask]; P = exp(S - lse_i); dS = P (dP - D_i), cast
 *          MXU  dq_i += dS k_j
 *        MXU dq_i x scale drained over q_i;  DMA -> HBM (over block i's pair, read already)
 *
 * Streamed blocks go through two stream sets (the next one loads while this one is worked
 * on); the score tiles (S, dP and their 16-bit copies) are one set, handed between the array
 * and the vector unit by counting semaphores. */
#include <math.h>

#include "kc_attn_st.h"
#include "kc_gemm.h"

static isa_opnd SP(unsigned reg, uint64_t off) { return isa_spad(reg, off); }
static uint64_t al64(uint64_t n) { return (n + 63) & ~(uint64_t)63; }

/* ---- layout ---------------------------------------------------------------------------------- */

uint64_t ks_bwd_layout(ks *s, unsigned nus, uint64_t base, uint64_t acc, uint64_t *accb)
{
    uint64_t T = s->T, Dh = s->Dh, e = s->e, eo = s->e > s->oe ? s->e : s->oe;
    uint64_t tile = al64(T * Dh * e), otile = al64(T * Dh * eo), ld = al64(2 * T * 4);
    uint64_t f32t = al64(T * T * 4), low = s->f32 ? 0 : al64(T * T * e);
    uint64_t usz = 0, ssz = 0;
    *accb = 0;
    switch (s->kind) {
    case KS_D:
        s->u_o = 0, s->u_do = tile, s->u_lse = 2 * tile, s->u_ld = 2 * tile + al64(T * 4);
        usz = s->u_ld + ld;
        break;
    case KS_DKV:
        s->u_k = 0, s->u_v = otile, usz = 2 * otile;
        s->s_q = 0, s->s_do = tile, s->s_ld = 2 * tile, ssz = 2 * tile + ld;
        break;
    default: /* KS_DQ */
        s->u_q = 0, s->u_do = otile, s->u_ld = otile + tile, usz = s->u_ld + ld;
        s->s_k = 0, s->s_v = tile, ssz = 2 * tile;
        break;
    }
    uint64_t at = base;
    s->us[0] = at, at += usz;
    s->us[1] = nus > 1 ? at : s->us[0], at += nus > 1 ? usz : 0;
    s->ss[0] = at, at += ssz;
    s->ss[1] = at, at += ssz;
    if (s->kind != KS_D) {
        s->f_s = at, at += f32t;
        s->f_dp = at, at += f32t;
        s->f_pt = s->f32 ? s->f_s : at, at += s->kind == KS_DKV ? low : 0;
        s->f_ds = s->f32 ? s->f_dp : at, at += low;
        s->f_maskf = s->f_maskb = at, at += s->causal ? al64(s->t * s->t * 4) : 0;
        s->f_one = at, at += 64;
        s->a_s = acc, s->a_dp = acc + f32t;
        s->a_dk = s->a_dq = acc + 2 * f32t;
        s->a_dv = s->a_dk + al64(T * Dh * 4);
        *accb = 2 * f32t + al64(T * Dh * 4) * (s->kind == KS_DKV ? 2 : 1);
    }
    return at - base;
}

/* ---- the cost model --------------------------------------------------------------------------- */

double ks_bwd_pair(const ks *s, double bw)
{
    if (s->kind == KS_D)
        return 0;
    const arch_config *cfg = s->x->cfg;
    isa_dtype dt = s->a->dt;
    double lanes = (double)cfg->core.vector_lanes * cfg->core.vector_ops_per_lane;
    double tr = (double)cfg->core.vector_lanes * cfg->core.vector_transc_ops_per_lane;
    double C = (double)cfg->core.array_cols, T = (double)s->T, Dh = (double)s->Dh;
    double el = T * T, blk = T * Dh * (double)s->e;
    double sc = (double)kmm_array_cycles(cfg, dt, s->T, s->T, s->Dh);
    double gr = (double)kmm_array_cycles(cfg, dt, s->T, s->Dh, s->T);
    double mxu, vpu, dma;
    if (s->kind == KS_DKV) {
        /* the array waits for P^T (exp and cast); dS^T hides under dv */
        mxu = 2 * sc + 2 * el / C + 2 * gr;
        vpu = el / tr + (s->f32 ? 0 : el / lanes);
        dma = ks_dma(s, 2 * blk + 8 * T, 3, bw); /* q, dout, the pairs: one group */
    } else {
        mxu = 2 * sc + 2 * el / C + gr;
        vpu = el / tr + (s->f32 ? 2 : 3) * el / lanes;
        dma = ks_dma(s, 2 * blk, 2, bw);
    }
    double m = mxu + vpu;
    return (m > dma ? m : dma) + 60;
}

double ks_bwd_unit(const ks *s, double bw)
{
    const arch_config *cfg = s->x->cfg;
    double lanes = (double)cfg->core.vector_lanes * cfg->core.vector_ops_per_lane;
    double C = (double)cfg->core.array_cols, T = (double)s->T, Dh = (double)s->Dh;
    double blk = T * Dh * (double)s->e, oblk = T * Dh * (double)s->oe, v, d;
    switch (s->kind) {
    case KS_D:
        v = T * Dh / lanes;
        d = (2 * blk + 12 * T) / bw + ks_lat(s, 3) + ks_lat(s, 1);
        break;
    case KS_DKV:
        v = 2 * T * Dh / C;
        d = (2 * blk + 2 * oblk) / bw + ks_lat(s, 2) + ks_lat(s, 2);
        break;
    default:
        v = T * Dh / C;
        d = (2 * blk + 8 * T + oblk) / bw + ks_lat(s, 3) + ks_lat(s, 1);
        break;
    }
    return (v > d ? v : d) + 100;
}

/* ---- pieces ------------------------------------------------------------------------------------ */

static uint64_t ks_tb(const ks *s, uint64_t i) { return i + 1 == s->nq ? s->edge : s->T; }

/* Rows rows x Dh of role at block brel (streamed: blocks past the registers) into spad. */
static void sb_load(ks *s, isa_opnd dst, int role, int64_t brel, uint64_t rows)
{
    const ks_op *o = &s->op[s->at[role]];
    kce_dma(s->c, dst, ks_hbm(s, role, brel * o->bstep), o->dt, s->Dh, rows, 1, 0,
            (uint64_t)o->srow, 0, 0);
}

/* The (-lse, D) pairs of a block of rows: HBM (the block's dq rows) <-> spad [-lse | D] of T
 * values each. */
static void sb_ld(ks *s, bool store, unsigned reg, uint64_t off, int64_t brel, uint64_t rows)
{
    const ks_op *o = &s->op[s->at[KR_GQ]];
    isa_opnd h = store ? isa_hbm(s->rOst, 0) : ks_hbm(s, KR_GQ, brel * o->bstep);
    isa_opnd p = SP(reg, off);
    uint64_t T4 = s->T * 4;
    if (s->packed_ld) /* [-lse (rows) | D (rows)] at the block's first row */
        kce_dma(s->c, store ? h : p, store ? p : h, ISA_DTYPE_FP32, rows, 2, 1,
                store ? rows * 4 : T4, store ? T4 : rows * 4, 0, 0);
    else /* (-lse, D) in the first 8 bytes of each row */
        kce_dma(s->c, store ? h : p, store ? p : h, ISA_DTYPE_FP32, 1, rows, 2,
                store ? (uint64_t)o->srow : 4, store ? 4 : (uint64_t)o->srow, store ? 4 : T4,
                store ? T4 : 4);
}

/* Iterations first .. n-1 of a unit's streamed blocks (block i at i - i0 past the first), the
 * middle ones a loop: iter(s, block, brel of that block, first, last) */
typedef void (*sb_iter_fn)(ks *s, uint64_t i, int64_t brel, bool first);
static void sb_iters(ks *s, uint64_t i0, uint64_t n, sb_iter_fn iter)
{
    iter(s, i0, (int64_t)i0, true);
    uint64_t end = i0 + n; /* blocks i0 .. end-1 */
    if (n >= 4) {          /* i0+1 .. end-3: whole, unmasked, loading whole ones */
        kc_loop l;
        unsigned regs[KR_NROLE];
        int64_t st[KR_NROLE];
        unsigned nr = 0;
        for (unsigned g = 0; g < s->n_grp; g++)
            if (!s->gunit[g])
                regs[nr] = s->greg[g], st[nr++] = s->gbstep[g];
        kc_loop_begin(s->x, &l, n - 3, nr, regs, st);
        uint64_t saved = s->c->mult;
        s->c->mult *= n - 3;
        iter(s, i0 + 1, (int64_t)i0 + 1, false);
        s->c->mult = saved;
        kc_loop_end(s->x, &l);
    }
    for (uint64_t i = n >= 4 ? end - 2 : i0 + 1; i < end; i++)
        iter(s, i, (int64_t)i, false);
}

/* ---- D ------------------------------------------------------------------------------------------ */

static void d_store(ks *s, uint64_t rows)
{
    ks_wait(s, ISA_UNIT_DMA, KS_OFULL, 1);
    sb_ld(s, true, s->rLst, s->u_ld, 0, rows);
    ks_signal(s, ISA_UNIT_DMA, KS_UFREE, 1);
}

static void d_unit(ks *s, uint64_t r, bool pending)
{
    (void)r;
    kce *c = s->c;
    uint64_t tq = s->seg_rows;
    const ks_op *l = &s->op[s->at[KR_LSE]];
    ks_wait(s, ISA_UNIT_DMA, KS_UFREE, 1);
    sb_load(s, SP(s->rU, s->u_o), KR_OUT, 0, tq);
    sb_load(s, SP(s->rU, s->u_do), KR_DO, 0, tq);
    kce_dma(c, SP(s->rU, s->u_lse), ks_hbm(s, KR_LSE, 0), l->dt, tq, 1, 1, 0, 0, 0, 0);
    ks_signal(s, ISA_UNIT_DMA, KS_UFULL, 1);
    if (pending)
        s->store(s, tq);
    ks_wait(s, ISA_UNIT_VPU, KS_UFULL, 1);
    kce_un(c, ISA_OP_VPU_NEG, SP(s->rU, s->u_ld), SP(s->rU, s->u_lse), 1, tq, ISA_DTYPE_FP32, 0,
           0);
    ISA_EMIT(s->x->e, VPU_RDOT, SP(s->rU, s->u_ld + s->T * 4), SP(s->rU, s->u_o),
             SP(s->rU, s->u_do), isa_imm((int64_t)tq), isa_imm((int64_t)s->Dh),
             isa_enum(s->a->dt), isa_enum(ISA_DTYPE_FP32));
    ks_signal(s, ISA_UNIT_VPU, KS_OFULL, 1);
    const ks_op *g = &s->op[s->at[KR_GQ]];
    kce_addi(c, s->rOst, g->reg, (int64_t)g->off);
    kce_mov(c, s->rLst, s->rU);
    if (s->p->nus > 1)
        kce_swap(c, s->rU, s->rU2, s->rT);
}

/* ---- DKV ---------------------------------------------------------------------------------------- */

static uint64_t dkv_tk(const ks *s) { return s->seg_rows; }

static void dkv_load(ks *s, unsigned set, int64_t brel, uint64_t tq)
{
    ks_wait(s, ISA_UNIT_DMA, KS_SFREE, 1);
    ks_wait(s, ISA_UNIT_DMA, KS_SFREE2, 1);
    sb_load(s, SP(set, s->s_q), KR_Q, brel, tq);
    sb_load(s, SP(set, s->s_do), KR_DO, brel, tq);
    sb_ld(s, false, set, s->s_ld, brel, tq);
    ks_signal(s, ISA_UNIT_DMA, KS_SFULL, 1);
    ks_signal(s, ISA_UNIT_DMA, KS_SFULL2, 1);
}

static void dkv_iter(ks *s, uint64_t i, int64_t brel, bool first)
{
    isa_emit *e = s->x->e;
    kce *c = s->c;
    isa_dtype F = ISA_DTYPE_FP32, dt = s->a->dt;
    uint64_t tk = dkv_tk(s), tq = ks_tb(s, i), Dh = s->Dh;
    bool diag = first && s->causal, f32 = s->f32;
    unsigned set = s->rA;
    if (i + 1 < s->nq)
        dkv_load(s, s->rB, brel + 1, ks_tb(s, i + 1));
    /* the array: S^T, dP^T */
    ks_wait(s, ISA_UNIT_MXU, KS_SFULL, 1);
    ISA_EMIT(e, MXU_LOAD, SP(set, s->s_q), isa_imm((int64_t)Dh), isa_imm((int64_t)tq),
             isa_enum(dt), isa_imm(1));
    ISA_EMIT(e, MXU_MM, isa_acc(0, s->a_s), SP(s->rU, s->u_k), isa_imm((int64_t)tk), isa_enum(dt));
    ks_wait(s, ISA_UNIT_MXU, KS_TFREE, 1);
    ISA_EMIT(e, MXU_DRAIN, SP(0, s->f_s), isa_acc(0, s->a_s), isa_imm((int64_t)tk),
             isa_imm((int64_t)tq), isa_enum(F), isa_enum(ISA_ACT_NONE), isa_f32(s->a->scale));
    ks_signal(s, ISA_UNIT_MXU, KS_TFULL, 1);
    ISA_EMIT(e, MXU_LOAD, SP(set, s->s_do), isa_imm((int64_t)Dh), isa_imm((int64_t)tq),
             isa_enum(dt), isa_imm(1));
    ISA_EMIT(e, MXU_MM, isa_acc(0, s->a_dp), SP(s->rU, s->u_v), isa_imm((int64_t)tk), isa_enum(dt));
    ISA_EMIT(e, MXU_DRAIN, SP(0, s->f_dp), isa_acc(0, s->a_dp), isa_imm((int64_t)tk),
             isa_imm((int64_t)tq), isa_enum(F));
    ks_signal(s, ISA_UNIT_MXU, KS_T2FULL, 1);
    /* the vector unit: P^T, dS^T (lse and D broadcast along the rows: one per query) */
    isa_opnd ST = SP(0, s->f_s), DPT = SP(0, s->f_dp);
    ks_wait(s, ISA_UNIT_VPU, KS_SFULL2, 1);
    ks_wait(s, ISA_UNIT_VPU, KS_TFULL, 1);
    if (diag)
        ks_mask(s, s->f_s, tk, tq * 4, true);
    ks_fma(s, ISA_OP_VPU_FEXP, ST, ST, SP(0, s->f_one), ISA_BCAST_SCALAR, SP(set, s->s_ld),
           ISA_BCAST_ROW, tk, tq, F, isa_none());
    if (!f32) {
        ks_wait(s, ISA_UNIT_VPU, KS_PFREE, 1);
        kce_cast(c, SP(0, s->f_pt), ST, tk, tq, dt, F, 0, 0);
    }
    ks_signal(s, ISA_UNIT_VPU, KS_PFULL, 1);
    ks_wait(s, ISA_UNIT_VPU, KS_T2FULL, 1);
    kce_bin(c, ISA_OP_VPU_SUB, DPT, DPT, SP(set, s->s_ld + s->T * 4), tk, tq, F, ISA_BCAST_ROW,
            0, 0, 0);
    kce_bin(c, ISA_OP_VPU_MUL, DPT, DPT, ST, tk, tq, F, ISA_BCAST_FULL, 0, 0, 0);
    ks_signal(s, ISA_UNIT_VPU, KS_SFREE2, 1);
    if (!f32) {
        ks_wait(s, ISA_UNIT_VPU, KS_XFREE, 1);
        kce_cast(c, SP(0, s->f_ds), DPT, tk, tq, dt, F, 0, 0);
    }
    ks_signal(s, ISA_UNIT_VPU, KS_TFREE, 1);
    ks_signal(s, ISA_UNIT_VPU, KS_XFULL, 1);
    /* the array: dv += P^T dout, dk += dS^T q */
    isa_accm mode = first ? ISA_ACCM_SET : ISA_ACCM_ACCUM;
    ks_wait(s, ISA_UNIT_MXU, KS_PFULL, 1);
    ISA_EMIT(e, MXU_LOAD, SP(set, s->s_do), isa_imm((int64_t)tq), isa_imm((int64_t)Dh),
             isa_enum(dt));
    ISA_EMIT(e, MXU_MM, isa_acc(0, s->a_dv), SP(0, s->f_pt), isa_imm((int64_t)tk), isa_enum(dt),
             isa_enum(mode));
    if (!f32)
        ks_signal(s, ISA_UNIT_MXU, KS_PFREE, 1);
    ks_wait(s, ISA_UNIT_MXU, KS_XFULL, 1);
    ISA_EMIT(e, MXU_LOAD, SP(set, s->s_q), isa_imm((int64_t)tq), isa_imm((int64_t)Dh),
             isa_enum(dt));
    ISA_EMIT(e, MXU_MM, isa_acc(0, s->a_dk), SP(0, s->f_ds), isa_imm((int64_t)tk), isa_enum(dt),
             isa_enum(mode));
    if (!f32)
        ks_signal(s, ISA_UNIT_MXU, KS_XFREE, 1);
    ks_signal(s, ISA_UNIT_MXU, KS_SFREE, 1);
    kce_swap(c, s->rA, s->rB, s->rT);
}

static void dkv_store(ks *s, uint64_t rows)
{
    const ks_op *g = &s->op[s->at[KR_GKV]];
    isa_dtype od = s->a->odt;
    int64_t part = s->a->part;
    ks_wait(s, ISA_UNIT_DMA, KS_OFULL, 1);
    kce_dma(s->c, isa_hbm(s->rOst, 0), SP(s->rLst, s->u_k), od, s->Dh, rows, 1,
            (uint64_t)g->srow, 0, 0, 0);
    kce_dma(s->c, isa_hbm(s->rOst, (uint64_t)part), SP(s->rLst, s->u_v), od, s->Dh, rows, 1,
            (uint64_t)g->srow, 0, 0, 0);
    ks_signal(s, ISA_UNIT_DMA, KS_UFREE, 1);
}

/* Key block r: k_r, v_r resident; query blocks i0 .. streamed. */
static void dkv_unit(ks *s, uint64_t r, bool pending)
{
    isa_emit *e = s->x->e;
    kce *c = s->c;
    uint64_t tk = s->seg_rows, i0 = s->causal ? r : 0, Dh = s->Dh;
    ks_wait(s, ISA_UNIT_DMA, KS_UFREE, 1);
    sb_load(s, SP(s->rU, s->u_k), KR_K, 0, tk);
    sb_load(s, SP(s->rU, s->u_v), KR_V, 0, tk);
    ks_signal(s, ISA_UNIT_DMA, KS_UFULL, 1);
    dkv_load(s, s->rA, (int64_t)i0, ks_tb(s, i0));
    if (pending)
        s->store(s, tk);
    ks_wait(s, ISA_UNIT_MXU, KS_UFULL, 1);
    sb_iters(s, i0, s->nq - i0, dkv_iter);
    /* dk x scale, dv over k, v (the array's last reads of them were the pairs' products) */
    ISA_EMIT(e, MXU_DRAIN, SP(s->rU, s->u_k), isa_acc(0, s->a_dk), isa_imm((int64_t)tk),
             isa_imm((int64_t)Dh), isa_enum(s->a->odt), isa_enum(ISA_ACT_NONE),
             isa_f32(s->a->scale));
    ISA_EMIT(e, MXU_DRAIN, SP(s->rU, s->u_v), isa_acc(0, s->a_dv), isa_imm((int64_t)tk),
             isa_imm((int64_t)Dh), isa_enum(s->a->odt));
    ks_signal(s, ISA_UNIT_MXU, KS_OFULL, 1);
    const ks_op *g = &s->op[s->at[KR_GKV]];
    kce_addi(c, s->rOst, g->reg, (int64_t)g->off);
    kce_mov(c, s->rLst, s->rU);
    if (s->p->nus > 1)
        kce_swap(c, s->rU, s->rU2, s->rT);
}

/* ---- DQ ----------------------------------------------------------------------------------------- */

static void dq_load(ks *s, unsigned set, int64_t brel, uint64_t tk)
{
    ks_wait(s, ISA_UNIT_DMA, KS_SFREE, 1);
    sb_load(s, SP(set, s->s_k), KR_K, brel, tk);
    sb_load(s, SP(set, s->s_v), KR_V, brel, tk);
    ks_signal(s, ISA_UNIT_DMA, KS_SFULL, 1);
}

static void dq_iter(ks *s, uint64_t j, int64_t brel, bool first)
{
    isa_emit *e = s->x->e;
    kce *c = s->c;
    isa_dtype F = ISA_DTYPE_FP32, dt = s->a->dt;
    uint64_t tq = s->seg_rows, tk = ks_tb(s, j), Dh = s->Dh;
    bool diag = s->causal && j == s->cur_r, f32 = s->f32;
    unsigned set = s->rA;
    if (j + 1 < s->cur_n)
        dq_load(s, s->rB, brel + 1, ks_tb(s, j + 1));
    /* the array: S, dP */
    ks_wait(s, ISA_UNIT_MXU, KS_SFULL, 1);
    ISA_EMIT(e, MXU_LOAD, SP(set, s->s_k), isa_imm((int64_t)Dh), isa_imm((int64_t)tk),
             isa_enum(dt), isa_imm(1));
    ISA_EMIT(e, MXU_MM, isa_acc(0, s->a_s), SP(s->rU, s->u_q), isa_imm((int64_t)tq), isa_enum(dt));
    ks_wait(s, ISA_UNIT_MXU, KS_TFREE, 1);
    ISA_EMIT(e, MXU_DRAIN, SP(0, s->f_s), isa_acc(0, s->a_s), isa_imm((int64_t)tq),
             isa_imm((int64_t)tk), isa_enum(F), isa_enum(ISA_ACT_NONE), isa_f32(s->a->scale));
    ks_signal(s, ISA_UNIT_MXU, KS_TFULL, 1);
    ISA_EMIT(e, MXU_LOAD, SP(set, s->s_v), isa_imm((int64_t)Dh), isa_imm((int64_t)tk),
             isa_enum(dt), isa_imm(1));
    ISA_EMIT(e, MXU_MM, isa_acc(0, s->a_dp), SP(s->rU, s->u_do), isa_imm((int64_t)tq),
             isa_enum(dt));
    ISA_EMIT(e, MXU_DRAIN, SP(0, s->f_dp), isa_acc(0, s->a_dp), isa_imm((int64_t)tq),
             isa_imm((int64_t)tk), isa_enum(F));
    ks_signal(s, ISA_UNIT_MXU, KS_T2FULL, 1);
    /* the vector unit: P, dS (lse and D one per row) */
    isa_opnd S = SP(0, s->f_s), DP = SP(0, s->f_dp);
    ks_wait(s, ISA_UNIT_VPU, KS_TFULL, 1);
    if (diag)
        ks_mask(s, s->f_s, tq, tk * 4, false);
    ks_fma(s, ISA_OP_VPU_FEXP, S, S, SP(0, s->f_one), ISA_BCAST_SCALAR, SP(s->rU, s->u_ld),
           ISA_BCAST_COL, tq, tk, F, isa_none());
    ks_wait(s, ISA_UNIT_VPU, KS_T2FULL, 1);
    kce_bin(c, ISA_OP_VPU_SUB, DP, DP, SP(s->rU, s->u_ld + s->T * 4), tq, tk, F, ISA_BCAST_COL,
            0, 0, 0);
    kce_bin(c, ISA_OP_VPU_MUL, DP, DP, S, tq, tk, F, ISA_BCAST_FULL, 0, 0, 0);
    if (!f32) {
        ks_wait(s, ISA_UNIT_VPU, KS_XFREE, 1);
        kce_cast(c, SP(0, s->f_ds), DP, tq, tk, dt, F, 0, 0);
    }
    ks_signal(s, ISA_UNIT_VPU, KS_TFREE, 1);
    ks_signal(s, ISA_UNIT_VPU, KS_XFULL, 1);
    /* the array: dq += dS k */
    ks_wait(s, ISA_UNIT_MXU, KS_XFULL, 1);
    ISA_EMIT(e, MXU_LOAD, SP(set, s->s_k), isa_imm((int64_t)tk), isa_imm((int64_t)Dh),
             isa_enum(dt));
    ISA_EMIT(e, MXU_MM, isa_acc(0, s->a_dq), SP(0, s->f_ds), isa_imm((int64_t)tq), isa_enum(dt),
             isa_enum(first ? ISA_ACCM_SET : ISA_ACCM_ACCUM));
    if (!f32)
        ks_signal(s, ISA_UNIT_MXU, KS_XFREE, 1);
    ks_signal(s, ISA_UNIT_MXU, KS_SFREE, 1);
    kce_swap(c, s->rA, s->rB, s->rT);
}

static void dq_store(ks *s, uint64_t rows)
{
    const ks_op *g = &s->op[s->at[KR_GQ]];
    ks_wait(s, ISA_UNIT_DMA, KS_OFULL, 1);
    kce_dma(s->c, isa_hbm(s->rOst, 0), SP(s->rLst, s->u_q), s->a->odt, s->Dh, rows, 1,
            (uint64_t)g->srow, 0, 0, 0);
    ks_signal(s, ISA_UNIT_DMA, KS_UFREE, 1);
}

/* Query block r: q_r, dout_r and its (-lse, D) resident; key blocks 0 .. streamed. */
static void dq_unit(ks *s, uint64_t r, bool pending)
{
    kce *c = s->c;
    uint64_t tq = s->seg_rows, n = s->causal ? r + 1 : s->nq;
    ks_wait(s, ISA_UNIT_DMA, KS_UFREE, 1);
    sb_load(s, SP(s->rU, s->u_q), KR_Q, 0, tq);
    sb_load(s, SP(s->rU, s->u_do), KR_DO, 0, tq);
    sb_ld(s, false, s->rU, s->u_ld, 0, tq);
    ks_signal(s, ISA_UNIT_DMA, KS_UFULL, 2); /* the array's and the vector unit's */
    dq_load(s, s->rA, 0, ks_tb(s, 0));
    if (pending)
        s->store(s, tq);
    ks_wait(s, ISA_UNIT_MXU, KS_UFULL, 1);
    ks_wait(s, ISA_UNIT_VPU, KS_UFULL, 1);
    s->cur_r = r, s->cur_n = n;
    sb_iters(s, 0, n, dq_iter);
    ISA_EMIT(s->x->e, MXU_DRAIN, SP(s->rU, s->u_q), isa_acc(0, s->a_dq), isa_imm((int64_t)tq),
             isa_imm((int64_t)s->Dh), isa_enum(s->a->odt), isa_enum(ISA_ACT_NONE),
             isa_f32(s->a->scale));
    ks_signal(s, ISA_UNIT_MXU, KS_OFULL, 1);
    const ks_op *g = &s->op[s->at[KR_GQ]];
    kce_addi(c, s->rOst, g->reg, (int64_t)g->off);
    kce_mov(c, s->rLst, s->rU);
    if (s->p->nus > 1)
        kce_swap(c, s->rU, s->rU2, s->rT);
}

/* ---- binding, setup, settle ---------------------------------------------------------------------- */

void ks_bwd_bind(ks *s)
{
    switch (s->kind) {
    case KS_D: s->unit = d_unit, s->store = d_store; break;
    case KS_DKV: s->unit = dkv_unit, s->store = dkv_store; break;
    default: s->unit = dq_unit, s->store = dq_store; break;
    }
}

/* Every semaphore's initial count: the free buffers each side starts with. */
static void sb_counts(ks *s, void (*fn)(ks *, isa_unit, int, unsigned))
{
    fn(s, ISA_UNIT_DMA, KS_UFREE, s->p->nus);
    if (s->kind == KS_D)
        return;
    fn(s, ISA_UNIT_DMA, KS_SFREE, 2);
    fn(s, ISA_UNIT_MXU, KS_TFREE, 1);
    if (s->kind == KS_DKV)
        fn(s, ISA_UNIT_DMA, KS_SFREE2, 2);
    if (!s->f32) {
        fn(s, ISA_UNIT_VPU, KS_XFREE, 1);
        if (s->kind == KS_DKV)
            fn(s, ISA_UNIT_VPU, KS_PFREE, 1);
    }
}

void ks_bwd_setup(ks *s)
{
    sb_counts(s, ks_signal);
    if (s->kind == KS_D)
        return;
    if (s->causal)
        ks_build_mask(s, s->f_maskf, s->kind == KS_DKV);
    kce_fill(s->c, SP(0, s->f_one), 1.0f, 1, 1, ISA_DTYPE_FP32, 0);
}

static void sb_wait(ks *s, isa_unit u, int sem, unsigned n) { ks_wait(s, u, sem, n); }

void ks_bwd_settle(ks *s) { sb_counts(s, sb_wait); }
