/* kc_attn_bwd.c — attention_grad's work on one resident head, FlashAttention-2's order
 * (kc_attn.c plans the kernel and walks the heads; docs/compiler.md, "Attention"):
 *
 *   VPU  D = rowsum(dout . out) for every query row (fp32)
 *   per key block j:
 *     per query block i (i >= j when causal; the first one sets dk_j, dv_j):
 *       MXU  S^T = k_j q_i^T (x scale) -> ST;  dP^T = v_j dout_i^T -> DPT
 *       VPU  mask (the diagonal); P^T = exp(S^T - lse_i), kept fp32 in ST and cast -> PT;
 *            dS^T = P^T (dP^T - D_i) in DPT, cast -> DST; dS = transpose(dS^T) -> DS
 *       MXU  dv_j += P^T dout_i; dk_j += dS^T q_i; dq_i += dS k_j (dq's accumulators hold
 *            the whole head, set by the first key block)
 *     MXU  dk_j x scale, dv_j drained into a staging set;  DMA  -> HBM
 *   MXU  dq x scale drained over the head's out (read only for D);  DMA  -> HBM
 *
 * Semaphores count (sfull, dpfull: the array's tiles drained; pfull, dsready: the vector
 * unit's); one set of tiles serves every pair: the array drains the next pair's S^T only
 * after dS was ready, so the vector unit has read everything of the pair before. */
#include <math.h>

#include "kc_attn.h"

static isa_opnd SP(unsigned reg, uint64_t off) { return isa_spad(reg, off); }
static uint64_t al64(uint64_t n) { return (n + 63) & ~(uint64_t)63; }
static uint64_t max_u64(uint64_t a, uint64_t b) { return a > b ? a : b; }

/* ---- layout ----------------------------------------------------------------------------- */

/* Residency: q, k, v, out (also dq's staging), dout, lse, D; one set of pair tiles; two
 * staging sets for dk, dv; the mask. */
static uint64_t bwd_layout(ka *a, uint64_t T, bool dbuf, uint64_t base)
{
    uint64_t S = a->S, Dh = a->Dh, e = a->e, oe = a->oe, t = T < KA_MASK_T ? T : KA_MASK_T;
    uint64_t row = al64(S * Dh * e);
    a->rq = 0, a->rk = row, a->rv = 2 * row, a->ro = 3 * row;
    a->rdo = a->ro + al64(S * Dh * max_u64(e, oe));
    a->rlse = a->rdo + row;
    a->rdd = a->rlse + al64(S * 4);
    a->res_sz = a->rdd + al64(S * 4);
    uint64_t f32 = al64(max_u64(T * T, Dh) * 4), low = al64(T * T * e);
    a->bs = 0, a->bdp = f32;
    a->bp = 2 * f32;
    a->bds = a->bp + (e != 4 ? low : 0);
    a->bdsn = a->bds + (e != 4 ? low : 0);
    a->sbk_sz = a->bdsn + low;
    a->obk_sz = 2 * al64(T * Dh * oe);
    uint64_t at = base;
    a->res[0] = at, at += a->res_sz;
    a->res[1] = dbuf ? at : a->res[0], at += dbuf ? a->res_sz : 0;
    a->sbk[0] = a->sbk[1] = at, at += a->sbk_sz;
    a->obk[0] = at, at += a->obk_sz;
    a->obk[1] = at, at += a->obk_sz;
    a->mask = at, at += a->causal ? al64(t * t * 4) : 0;
    return at - base;
}

uint64_t ka_bwd_spad(const ka *a, uint64_t T, bool dbuf)
{
    ka p = *a;
    return bwd_layout(&p, T, dbuf, 0);
}

uint64_t ka_bwd_acc(const ka *a, uint64_t T)
{
    return 2 * al64(T * T * 4) + 2 * al64(T * a->Dh * 4) + al64(a->S * a->Dh * 4);
}

void ka_bwd_place(ka *a, uint64_t base, uint64_t acc)
{
    bwd_layout(a, a->T, a->dbuf, base);
    uint64_t T = a->T, Dh = a->Dh;
    a->acc_s = acc;
    a->acc_dp = a->acc_s + al64(T * T * 4);
    a->acc_dk = a->acc_dp + al64(T * T * 4);
    a->acc_dv = a->acc_dk + al64(T * Dh * 4);
    a->acc_dq = a->acc_dv + al64(T * Dh * 4);
}

/* ---- a head ----------------------------------------------------------------------------- */

/* D = rowsum(dout . out) of n query rows at rQb (out, dout) / rLi (D), through the pair tiles
 * (scratch). */
static void bwd_dchunk(ka *a, uint64_t n)
{
    kce *c = &a->c;
    isa_dtype F = ISA_DTYPE_FP32;
    uint64_t Dh = a->Dh;
    isa_opnd x = SP(0, a->sbk[0] + a->bs), y = SP(0, a->sbk[0] + a->bdp);
    isa_opnd o = SP(a->rQb, a->ro), d = SP(a->rQb, a->rdo);
    if (a->dt == F) {
        kce_bin(c, ISA_OP_VPU_MUL, x, o, d, n, Dh, F, ISA_BCAST_FULL, 0, 0, 0);
    } else {
        kce_cast(c, x, o, n, Dh, F, a->dt, 0, 0);
        kce_cast(c, y, d, n, Dh, F, a->dt, 0, 0);
        kce_bin(c, ISA_OP_VPU_MUL, x, x, y, n, Dh, F, ISA_BCAST_FULL, 0, 0, 0);
    }
    kce_red(c, ISA_OP_VPU_RSUM, SP(a->rLi, a->rdd), x, n, Dh, F, 0);
}

/* D of every query row, in chunks that fit the pair tiles: the full chunks as a loop. */
static void bwd_dvec(ka *a)
{
    kce *c = &a->c;
    uint64_t S = a->S, Dh = a->Dh, T = a->T;
    uint64_t rows = max_u64(T * T, Dh) / Dh;
    rows = rows > S ? S : rows;
    uint64_t full = S / rows, rest = S - full * rows;
    kce_mov(c, a->rQb, a->rRes);
    kce_mov(c, a->rLi, a->rRes);
    kc_loop l;
    unsigned regs[2] = {a->rQb, a->rLi};
    int64_t st[2] = {(int64_t)(rows * Dh * a->e), (int64_t)(rows * 4)};
    kc_loop_begin(a->x, &l, full, 2, regs, st);
    bwd_dchunk(a, rows);
    kc_loop_end(a->x, &l);
    if (rest) {
        kce_addi(c, a->rQb, a->rQb, (int64_t)(full * rows * Dh * a->e));
        kce_addi(c, a->rLi, a->rLi, (int64_t)(full * rows * 4));
        bwd_dchunk(a, rest);
    }
}

/* One pair: query block di past rQb / rLi / rDQ's (tq rows), key block at rKj + koff (tk). */
static void bwd_pair(ka *a, uint64_t di, uint64_t koff, uint64_t tq, uint64_t tk, bool diag,
                     isa_accm kv_mode, isa_accm dq_mode)
{
    isa_emit *e = a->x->e;
    kce *c = &a->c;
    isa_dtype F = ISA_DTYPE_FP32, dt = a->dt;
    uint64_t T = a->T, Dh = a->Dh, RS = a->RS, es = a->e, qoff = di * T * Dh * es;
    bool f32 = dt == F;
    isa_opnd q = SP(a->rQb, a->rq + qoff), dO = SP(a->rQb, a->rdo + qoff);
    isa_opnd K = SP(a->rKj, a->rk + koff), V = SP(a->rKj, a->rv + koff);
    isa_opnd lse = SP(a->rLi, a->rlse + di * T * 4), D = SP(a->rLi, a->rdd + di * T * 4);
    uint64_t tb = a->sbk[0], ls = T * es; /* the low-precision tiles' row stride */
    isa_opnd ST = SP(0, tb + a->bs), DPT = SP(0, tb + a->bdp);
    isa_opnd PT = f32 ? ST : SP(0, tb + a->bp), DST = f32 ? DPT : SP(0, tb + a->bds);
    isa_opnd DS = SP(0, tb + a->bdsn);
    uint64_t ps = f32 ? RS : ls; /* PT's and DST's row stride */
    int64_t drs = tq * 4 == RS || tk < 2 ? 0 : (int64_t)RS;
    int64_t pts = ps == tq * es || tk < 2 ? 0 : (int64_t)ps;
    int64_t dss = ls == tk * es || tq < 2 ? 0 : (int64_t)ls;
    /* the array: S^T and dP^T */
    ISA_EMIT(e, MXU_LOAD, q, isa_imm((int64_t)Dh), isa_imm((int64_t)tq), isa_enum(dt), isa_imm(1));
    ISA_EMIT(e, MXU_MM, isa_acc(0, a->acc_s), K, isa_imm((int64_t)tk), isa_enum(dt));
    ISA_EMIT(e, MXU_DRAIN, ST, isa_acc(0, a->acc_s), isa_imm((int64_t)tk), isa_imm((int64_t)tq),
             isa_enum(F), isa_enum(ISA_ACT_NONE), isa_f32(a->scale), isa_none(), isa_imm(drs));
    kce_signal(c, ISA_UNIT_MXU, a->s_sfull, 1);
    ISA_EMIT(e, MXU_LOAD, dO, isa_imm((int64_t)Dh), isa_imm((int64_t)tq), isa_enum(dt), isa_imm(1));
    ISA_EMIT(e, MXU_MM, isa_acc(0, a->acc_dp), V, isa_imm((int64_t)tk), isa_enum(dt));
    ISA_EMIT(e, MXU_DRAIN, DPT, isa_acc(0, a->acc_dp), isa_imm((int64_t)tk), isa_imm((int64_t)tq),
             isa_enum(F), isa_enum(ISA_ACT_NONE), isa_f32(1.0f), isa_none(), isa_imm(drs));
    kce_signal(c, ISA_UNIT_MXU, a->s_dpfull, 1);
    /* the vector unit: P^T, dS^T, dS */
    kce_wait(c, ISA_UNIT_VPU, a->s_sfull, 1);
    if (diag)
        ka_mask_diag(a, 0, tb + a->bs, tk);
    kce_bin(c, ISA_OP_VPU_SUB, ST, ST, lse, tk, tq, F, ISA_BCAST_ROW, RS, RS, 0);
    kce_un(c, ISA_OP_VPU_EXP, ST, ST, tk, tq, F, RS, RS);
    if (!f32)
        kce_cast(c, PT, ST, tk, tq, dt, F, ls, RS);
    kce_signal(c, ISA_UNIT_VPU, a->s_pfull, 1);
    kce_wait(c, ISA_UNIT_VPU, a->s_dpfull, 1);
    kce_bin(c, ISA_OP_VPU_SUB, DPT, DPT, D, tk, tq, F, ISA_BCAST_ROW, RS, RS, 0);
    kce_bin(c, ISA_OP_VPU_MUL, DPT, DPT, ST, tk, tq, F, ISA_BCAST_FULL, RS, RS, RS);
    if (!f32)
        kce_cast(c, DST, DPT, tk, tq, dt, F, ls, RS);
    kce_un(c, ISA_OP_VPU_TRANSPOSE, DS, DST, tk, tq, dt, ls, ps);
    kce_signal(c, ISA_UNIT_VPU, a->s_dsready, 1);
    /* the array: dv += P^T dout, dk += dS^T q, dq += dS k */
    kce_wait(c, ISA_UNIT_MXU, a->s_pfull, 1);
    ISA_EMIT(e, MXU_LOAD, dO, isa_imm((int64_t)tq), isa_imm((int64_t)Dh), isa_enum(dt));
    ISA_EMIT(e, MXU_MM, isa_acc(0, a->acc_dv), PT, isa_imm((int64_t)tk), isa_enum(dt),
             isa_enum(kv_mode), isa_imm(pts));
    kce_wait(c, ISA_UNIT_MXU, a->s_dsready, 1);
    ISA_EMIT(e, MXU_LOAD, q, isa_imm((int64_t)tq), isa_imm((int64_t)Dh), isa_enum(dt));
    ISA_EMIT(e, MXU_MM, isa_acc(0, a->acc_dk), DST, isa_imm((int64_t)tk), isa_enum(dt),
             isa_enum(kv_mode), isa_imm(pts));
    ISA_EMIT(e, MXU_LOAD, K, isa_imm((int64_t)tk), isa_imm((int64_t)Dh), isa_enum(dt));
    ISA_EMIT(e, MXU_MM, isa_acc(a->rDQ, di * T * Dh * 4), DS, isa_imm((int64_t)tq), isa_enum(dt),
             isa_enum(dq_mode), isa_imm(dss));
}

/* Key block j (tk keys at rKj + koff): its query blocks, then dk_j and dv_j to HBM (joff:
 * key block j's row offset from the output register). */
static void bwd_kblock(ka *a, const int64_t *hoff, uint64_t j, uint64_t koff, int64_t joff,
                       uint64_t tk)
{
    kce *c = &a->c;
    isa_emit *e = a->x->e;
    uint64_t S = a->S, T = a->T, Dh = a->Dh, nq = ka_cdiv(S, T), edge = S - (nq - 1) * T;
    uint64_t i0 = a->causal ? j : 0, qblk = T * Dh * a->e;
    isa_accm dq_mode = j == 0 ? ISA_ACCM_SET : ISA_ACCM_ACCUM;
    kce_addi(c, a->rQb, a->rRes, (int64_t)(i0 * qblk));
    kce_addi(c, a->rLi, a->rRes, (int64_t)(i0 * T * 4));
    ISA_EMIT(e, LI, isa_reg(a->rDQ), isa_imm((int64_t)(a->acc_dq + i0 * T * Dh * 4)));
    bwd_pair(a, 0, koff, i0 + 1 < nq ? T : edge, tk, a->causal, ISA_ACCM_SET, dq_mode);
    uint64_t mid = nq > i0 + 2 ? nq - i0 - 2 : 0;
    if (mid) {
        kc_loop l;
        unsigned regs[3] = {a->rQb, a->rLi, a->rDQ};
        int64_t st[3] = {(int64_t)qblk, (int64_t)(T * 4), (int64_t)(T * Dh * 4)};
        kc_loop_begin(a->x, &l, mid, 3, regs, st);
        uint64_t saved = c->mult;
        c->mult *= mid;
        bwd_pair(a, 1, koff, T, tk, false, ISA_ACCM_ACCUM, dq_mode);
        c->mult = saved;
        kc_loop_end(a->x, &l);
    }
    if (nq > i0 + 1)
        bwd_pair(a, nq - 1 - i0, koff, edge, tk, false, ISA_ACCM_ACCUM, dq_mode);
    /* dk_j x scale, dv_j: drained into the staging set, stored */
    isa_dtype od = a->odt;
    uint64_t dv_at = al64(T * Dh * a->oe);
    kce_wait(c, ISA_UNIT_MXU, a->s_ofree, 1);
    ISA_EMIT(e, MXU_DRAIN, SP(a->rOo, 0), isa_acc(0, a->acc_dk), isa_imm((int64_t)tk),
             isa_imm((int64_t)Dh), isa_enum(od), isa_enum(ISA_ACT_NONE), isa_f32(a->scale));
    ISA_EMIT(e, MXU_DRAIN, SP(a->rOo, dv_at), isa_acc(0, a->acc_dv), isa_imm((int64_t)tk),
             isa_imm((int64_t)Dh), isa_enum(od));
    kce_signal(c, ISA_UNIT_MXU, a->s_ofull, 1);
    kce_wait(c, ISA_UNIT_DMA, a->s_ofull, 1);
    const ka_opnd *g = &a->op[KA_GRAD];
    isa_opnd dst = ka_hbm(a, KA_GRAD, hoff[KA_GRAD], a->part + joff);
    kce_dma(c, dst, SP(a->rOo, 0), od, Dh, tk, 1, (uint64_t)g->srow, 0, 0, 0);
    dst = ka_hbm(a, KA_GRAD, hoff[KA_GRAD], 2 * a->part + joff);
    kce_dma(c, dst, SP(a->rOo, dv_at), od, Dh, tk, 1, (uint64_t)g->srow, 0, 0, 0);
    kce_signal(c, ISA_UNIT_DMA, a->s_ofree, 1);
    kce_swap(c, a->rOo, a->rOo2, a->rT);
}

void ka_bwd_head(ka *a, const int64_t *hoff)
{
    kce *c = &a->c;
    isa_emit *e = a->x->e;
    uint64_t S = a->S, T = a->T, Dh = a->Dh, nk = ka_cdiv(S, T), edge = S - (nk - 1) * T;
    uint64_t kblk = T * Dh * a->e;
    const ka_opnd *g = &a->op[KA_GRAD];
    int64_t jrow = (int64_t)T * g->srow;
    /* the vector unit: D, once the head is loaded and the array is done with the tiles */
    kce_wait(c, ISA_UNIT_VPU, a->s_kvfull, 1);
    kce_wait(c, ISA_UNIT_VPU, a->s_hdone, 1);
    bwd_dvec(a);
    kce_signal(c, ISA_UNIT_VPU, a->s_dready, 1);
    kce_wait(c, ISA_UNIT_MXU, a->s_dready, 1);
    kce_mov(c, a->rKj, a->rRes);
    if (a->causal) { /* key block j sees query blocks j ..: a body of its own each */
        for (uint64_t j = 0; j < nk; j++)
            bwd_kblock(a, hoff, j, j * kblk, (int64_t)j * jrow, j + 1 < nk ? T : edge);
    } else {
        bwd_kblock(a, hoff, 0, 0, 0, nk > 1 ? T : edge);
        if (nk > 2) { /* the middle key blocks: rKj and the output register stepped */
            kc_loop l;
            unsigned regs[2] = {a->rKj, g->reg};
            int64_t st[2] = {(int64_t)kblk, jrow};
            kc_loop_begin(a->x, &l, nk - 2, 2, regs, st);
            uint64_t saved = c->mult;
            c->mult *= nk - 2;
            bwd_kblock(a, hoff, 1, kblk, jrow, T);
            c->mult = saved;
            kc_loop_end(a->x, &l);
        }
        if (nk > 1)
            bwd_kblock(a, hoff, nk - 1, (nk - 1) * kblk, (int64_t)(nk - 1) * jrow, edge);
    }
    kce_signal(c, ISA_UNIT_MXU, a->s_hdone, 1);
    /* dq x scale over the head's out, stored; then the residency set is free */
    ISA_EMIT(e, MXU_DRAIN, SP(a->rRes, a->ro), isa_acc(0, a->acc_dq), isa_imm((int64_t)S),
             isa_imm((int64_t)Dh), isa_enum(a->odt), isa_enum(ISA_ACT_NONE), isa_f32(a->scale));
    kce_signal(c, ISA_UNIT_MXU, a->s_dqfull, 1);
    kce_wait(c, ISA_UNIT_DMA, a->s_dqfull, 1);
    isa_opnd dst = ka_hbm(a, KA_GRAD, hoff[KA_GRAD], 0);
    kce_dma(c, dst, SP(a->rRes, a->ro), a->odt, Dh, S, 1, (uint64_t)g->srow, 0, 0, 0);
    kce_signal(c, ISA_UNIT_DMA, a->s_kvfree, 1);
}
