/* kc_attn.c — fused, flash-style attention through the kernel ABI: attention (out, and each
 * query's log-sum-exp as a second output), attention_lse (the log-sum-exp alone) and, with
 * kc_attn_bwd.c, attention_grad. No score matrix is ever written to HBM. docs/compiler.md
 * ("Attention") has the whole story.
 *
 * Heads are a batch dimension: the B x H grid of heads is cut into one block per core and
 * each core runs its heads one after another. A head's inputs are loaded into the
 * scratchpad whole, once — so every input byte is read once and every output byte written
 * once, the analytical minimum — into two residency sets when two heads fit, the next head's
 * loads issued at the start of this head's work (before its stores, so the DMA queue runs
 * them at once). A head is cut into T-row blocks of queries and of keys:
 *
 *   per query block i (online softmax; running max m, sum l and output O per row, fp32):
 *     per key block j (j <= i when causal, the diagonal block masked):
 *       MXU  S = q_i k_j^T (mxu.load k_j transposed, mxu.mm), drained x scale -> S
 *       VPU  mask; mc = rowmax S; m' = max(m, mc); a = exp(m - m'); m = m'; S = exp(S - m);
 *            l = l a + rowsum S; P = S in the input type
 *       MXU  PV = P v_j, drained -> PV
 *       VPU  O = O a + PV
 *     VPU  out_i = O / l, lse_i = m + log l;   DMA  out_i, lse_i -> HBM
 *
 * The array runs one key block ahead (S of block j + 1 before PV of block j), so it overlaps
 * the vector unit; the buffers of consecutive blocks (S, P, PV, a) alternate between two
 * sets through two registers swapped after every block, and every semaphore counts, so one
 * loop body serves every block (the middle key blocks, and the query blocks when not causal,
 * are ISA loops; the first and last key block of a row, and the edge query block, are
 * emitted once each). attention_lse is the same without P V and O.
 *
 * Causal masking: key j > query i is -inf. Query and key blocks line up, so only the diagonal
 * block of a row is partly masked and the blocks beyond it are skipped. The diagonal block is
 * cut into t x t sub-tiles (t = min(T, 32)): the part right of each sub-row's diagonal
 * sub-tile is filled with -inf and the diagonal sub-tile gets a t x t triangle of 0 / -inf
 * added, built once per kernel by fills. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kc_attn.h"
#include "kc_attn_st.h"
#include "kc_gemm.h"

static isa_opnd SP(unsigned reg, uint64_t off) { return isa_spad(reg, off); }
static uint64_t al64(uint64_t n) { return (n + 63) & ~(uint64_t)63; }

/* ---- pieces every kind shares --------------------------------------------------------- */

/* The t x t triangle: forward mask[r][c] = -inf for c > r (rows are queries), backward for
 * r > c (rows are keys); zeros elsewhere. */
static void ka_build_mask(ka *a)
{
    uint64_t t = a->t, rs = t * 4;
    kce_fill(&a->c, SP(0, a->mask), 0.0f, t, t, ISA_DTYPE_FP32, 0);
    for (uint64_t r = 0; r + 1 < t; r++) {
        if (a->kind == KA_BWD)
            kce_fill(&a->c, SP(0, a->mask + (r + 1) * rs), -INFINITY, 1, r + 1, ISA_DTYPE_FP32, 0);
        else
            kce_fill(&a->c, SP(0, a->mask + r * rs + (r + 1) * 4), -INFINITY, 1, t - 1 - r,
                     ISA_DTYPE_FP32, 0);
    }
}

void ka_mask_diag(ka *a, unsigned reg, uint64_t off, uint64_t n)
{
    uint64_t t = a->t, RS = a->RS;
    for (uint64_t r0 = 0; r0 < n; r0 += t) {
        uint64_t rows = n - r0 < t ? n - r0 : t, row = off + r0 * RS;
        if (a->kind == KA_BWD) { /* keys r0 .. see no query before r0 */
            if (r0)
                kce_fill(&a->c, SP(reg, row), -INFINITY, rows, r0, ISA_DTYPE_FP32, RS);
        } else if (r0 + t < n) { /* queries r0 .. see no key after their sub-tile */
            kce_fill(&a->c, SP(reg, row + (r0 + t) * 4), -INFINITY, rows, n - r0 - t,
                     ISA_DTYPE_FP32, RS);
        }
        kce_bin(&a->c, ISA_OP_VPU_ADD, SP(reg, row + r0 * 4), SP(reg, row + r0 * 4),
                SP(0, a->mask), rows, rows, ISA_DTYPE_FP32, ISA_BCAST_FULL, RS, RS, a->t * 4);
    }
}

isa_opnd ka_hbm(ka *a, int i, int64_t hoff, int64_t more)
{
    const ka_opnd *o = &a->op[i];
    int64_t off = (int64_t)o->off + hoff + more;
    if (off >= 0)
        return isa_hbm(o->reg, (uint64_t)off);
    kce_addi(&a->c, a->rT, o->reg, off); /* MEM offsets are unsigned */
    return isa_hbm(a->rT, 0);
}

void ka_load_head(ka *a, const int64_t *hoff, unsigned reg)
{
    kce *c = &a->c;
    uint64_t dst[6] = {a->rq, a->rk, a->rv, a->ro, a->rdo, a->rlse};
    kce_wait(c, ISA_UNIT_DMA, a->s_kvfree, 1);
    for (int i = 0; i < a->n_in; i++) {
        const ka_opnd *o = &a->op[i];
        isa_opnd src = ka_hbm(a, i, hoff[i], 0);
        if (a->kind == KA_BWD && i == KA_LSE_IN) /* S fp32 values in a row */
            kce_dma(c, SP(reg, dst[i]), src, o->dt, a->S, 1, 1, 0, 0, 0, 0);
        else
            kce_dma(c, SP(reg, dst[i]), src, o->dt, a->Dh, a->S, 1, 0, (uint64_t)o->srow, 0, 0);
    }
    /* the array reads the set; backward, the vector unit too */
    kce_signal(c, ISA_UNIT_DMA, a->s_kvfull, a->kind == KA_BWD ? 2 : 1);
}

/* ---- forward ---------------------------------------------------------------------------- */

/* A query block: its rows (tq), its index relative to the registers' values, and each
 * operand's head offset. */
typedef struct ka_qpos {
    const int64_t *hoff;
    uint64_t i, tq;
} ka_qpos;

/* S of key block j (tk keys) for the query block at rQb into the current block set, then the
 * vector unit's online-softmax step on it (diag: the causal diagonal). */
/* The array's half of fwd_step_s: S of key block j for the query block qoff bytes past rQb. */
static void fwd_step_s_mxu(ka *a, uint64_t tq, uint64_t qoff, uint64_t j, uint64_t tk)
{
    isa_emit *e = a->x->e;
    kce *c = &a->c;
    uint64_t T = a->T, Dh = a->Dh, blk = T * Dh * a->e, RS = a->RS;
    if (a->kind == KA_LSE) /* S's buffer of two blocks back has been read */
        kce_wait(c, ISA_UNIT_MXU, a->s_pfull, 1);
    ISA_EMIT(e, MXU_LOAD, SP(a->rKj, a->rk + j * blk), isa_imm((int64_t)Dh), isa_imm((int64_t)tk),
             isa_enum(a->dt), isa_imm(1));
    ISA_EMIT(e, MXU_MM, isa_acc(0, a->acc_s), SP(a->rQb, a->rq + qoff), isa_imm((int64_t)tq),
             isa_enum(a->dt));
    ISA_EMIT(e, MXU_DRAIN, SP(a->rCur, a->bs), isa_acc(0, a->acc_s), isa_imm((int64_t)tq),
             isa_imm((int64_t)tk), isa_enum(ISA_DTYPE_FP32), isa_enum(ISA_ACT_NONE),
             isa_f32(a->scale), isa_none(), isa_imm(tk * 4 == RS || tq < 2 ? 0 : (int64_t)RS));
    kce_signal(c, ISA_UNIT_MXU, a->s_sfull, 1);
}

/* The vector unit's half: the online-softmax step on the S just drained. */
static void fwd_step_s_vpu(ka *a, uint64_t tq, uint64_t tk, bool diag)
{
    kce *c = &a->c;
    isa_dtype F = ISA_DTYPE_FP32;
    uint64_t T = a->T, RS = a->RS;
    kce_wait(c, ISA_UNIT_VPU, a->s_sfull, 1);
    if (diag)
        ka_mask_diag(a, a->rCur, a->bs, tq);
    isa_opnd S = SP(a->rCur, a->bs), m = SP(0, a->m_off), mc = SP(0, a->mc_off);
    isa_opnd l = SP(0, a->l_off), lc = SP(0, a->lc_off), al = SP(a->rCur, a->bal);
    kce_red(c, ISA_OP_VPU_RMAX, mc, S, tq, tk, F, RS);
    kce_bin(c, ISA_OP_VPU_MAX, mc, m, mc, 1, tq, F, ISA_BCAST_FULL, 0, 0, 0);
    kce_bin(c, ISA_OP_VPU_SUB, al, m, mc, 1, tq, F, ISA_BCAST_FULL, 0, 0, 0);
    kce_un(c, ISA_OP_VPU_EXP, al, al, 1, tq, F, 0, 0);
    kce_un(c, ISA_OP_VPU_COPY, m, mc, 1, tq, F, 0, 0);
    bool cast = a->kind == KA_FWD && a->dt != F;
    if (tk * 4 == RS) {
        /* a whole block (packed rows): P = exp(S - m) in the input type straight from the
         * fp32 scores, with its row sums, in one pass (vpu.fexp: exp(S x 1 + (-m))) */
        kce_un(c, ISA_OP_VPU_NEG, mc, m, 1, tq, F, 0, 0);
        isa_insn in;
        isa_insn_init(&in, ISA_OP_VPU_FEXP);
        isa_args_VPU_FMA *f = &in.VPU_FMA;
        f->dst = cast ? SP(a->rCur, a->bp) : S, f->a = S, f->b = SP(0, a->one_off);
        f->c = mc, f->rows = isa_imm((int64_t)tq), f->cols = isa_imm((int64_t)tk);
        f->dtype = isa_enum(F), f->odtype = isa_enum(cast ? a->dt : F);
        f->bb = isa_enum(ISA_BCAST_SCALAR), f->cb = isa_enum(ISA_BCAST_COL), f->sum = lc;
        isa_emit_insn(a->x->e, &in);
    } else {
        kce_bin(c, ISA_OP_VPU_SUB, S, S, m, tq, tk, F, ISA_BCAST_COL, RS, RS, 0);
        kce_un(c, ISA_OP_VPU_EXP, S, S, tq, tk, F, RS, RS);
        kce_red(c, ISA_OP_VPU_RSUM, lc, S, tq, tk, F, RS);
        if (cast)
            kce_cast(c, SP(a->rCur, a->bp), S, tq, tk, a->dt, F, T * a->e, RS);
    }
    kce_bin(c, ISA_OP_VPU_MUL, l, l, al, 1, tq, F, ISA_BCAST_FULL, 0, 0, 0);
    kce_bin(c, ISA_OP_VPU_ADD, l, l, lc, 1, tq, F, ISA_BCAST_FULL, 0, 0, 0);
    kce_signal(c, ISA_UNIT_VPU, a->s_pfull, 1);
}

static void fwd_step_s(ka *a, const ka_qpos *q, uint64_t j, uint64_t tk, bool diag)
{
    fwd_step_s_mxu(a, q->tq, 0, j, tk);
    fwd_step_s_vpu(a, q->tq, tk, diag);
}

/* P V of key block j (tk keys) from the previous block set, and O's update. */
static void fwd_step_pv(ka *a, const ka_qpos *q, uint64_t j, uint64_t tk)
{
    isa_emit *e = a->x->e;
    kce *c = &a->c;
    isa_dtype F = ISA_DTYPE_FP32;
    uint64_t tq = q->tq, T = a->T, Dh = a->Dh, blk = T * Dh * a->e;
    bool f32 = a->dt == F;
    uint64_t ps = f32 ? a->RS : T * a->e; /* P's row stride */
    kce_wait(c, ISA_UNIT_MXU, a->s_pfull, 1);
    ISA_EMIT(e, MXU_LOAD, SP(a->rKj, a->rv + j * blk), isa_imm((int64_t)tk), isa_imm((int64_t)Dh),
             isa_enum(a->dt));
    ISA_EMIT(e, MXU_MM, isa_acc(0, a->acc_pv), SP(a->rPrev, f32 ? a->bs : a->bp),
             isa_imm((int64_t)tq), isa_enum(a->dt), isa_enum(ISA_ACCM_SET),
             isa_imm(ps == tk * a->e || tq < 2 ? 0 : (int64_t)ps));
    ISA_EMIT(e, MXU_DRAIN, SP(a->rPrev, a->bpv), isa_acc(0, a->acc_pv), isa_imm((int64_t)tq),
             isa_imm((int64_t)Dh), isa_enum(F));
    kce_signal(c, ISA_UNIT_MXU, a->s_pvfull, 1);
    kce_wait(c, ISA_UNIT_VPU, a->s_pvfull, 1);
    isa_opnd O = SP(0, a->o_off);
    kce_bin(c, ISA_OP_VPU_MUL, O, O, SP(a->rPrev, a->bal), tq, Dh, F, ISA_BCAST_COL, 0, 0, 0);
    kce_bin(c, ISA_OP_VPU_ADD, O, O, SP(a->rPrev, a->bpv), tq, Dh, F, ISA_BCAST_FULL, 0, 0, 0);
}

static void fwd_swap(ka *a) { kce_swap(&a->c, a->rCur, a->rPrev, a->rT); }

/* One query block over key blocks 0 .. n-1 (the last has tk_last keys and, causal, is the
 * diagonal), then its out and lse. started: the array drained this row's first S already
 * (the previous row issued it); next_tq: the next row's rows, whose first S the array
 * computes before this row's last P V (0: none) — causal rows so overlap, the array going
 * on with the next row while the vector unit ends this one. */
static void fwd_qblock(ka *a, const ka_qpos *q, uint64_t n, uint64_t tk_last, bool started,
                       uint64_t next_tq)
{
    kce *c = &a->c;
    isa_dtype F = ISA_DTYPE_FP32;
    uint64_t tq = q->tq, T = a->T, Dh = a->Dh, blk = T * Dh * a->e;
    bool fwd = a->kind == KA_FWD;
    if (!started)
        kce_mov(c, a->rKj, a->rRes);
    kce_fill(c, SP(0, a->m_off), -INFINITY, 1, tq, F, 0);
    kce_fill(c, SP(0, a->l_off), 0.0f, 1, tq, F, 0);
    if (fwd)
        kce_fill(c, SP(0, a->o_off), 0.0f, tq, Dh, F, 0);
    else
        kce_signal(c, ISA_UNIT_MXU, a->s_pfull, 2); /* both S buffers are free */
    uint64_t tk0 = n == 1 ? tk_last : T;
    if (!started)
        fwd_step_s_mxu(a, tq, 0, 0, tk0);
    fwd_step_s_vpu(a, tq, tk0, n == 1 && a->causal);
    fwd_swap(a);
    if (n >= 3) { /* key blocks 1 .. n-2: S of j, P V of j - 1 */
        kc_loop l;
        unsigned reg = a->rKj;
        int64_t st = (int64_t)blk;
        kc_loop_begin(a->x, &l, n - 2, 1, &reg, &st);
        uint64_t saved = c->mult;
        c->mult *= n - 2;
        fwd_step_s(a, q, 1, T, false);
        if (fwd)
            fwd_step_pv(a, q, 0, T);
        fwd_swap(a);
        c->mult = saved;
        kc_loop_end(a->x, &l);
    }
    if (n >= 2) {
        fwd_step_s(a, q, n - 1, tk_last, a->causal);
        if (fwd)
            fwd_step_pv(a, q, n - 2, T);
        fwd_swap(a);
    }
    if (next_tq) /* the next row's first block (its queries one block on, its first keys) */
        fwd_step_s_mxu(a, next_tq, blk, 0, T); /* its first block is whole: it has two or more */
    if (fwd)
        fwd_step_pv(a, q, n - 1, tk_last);
    else
        kce_wait(c, ISA_UNIT_MXU, a->s_pfull, 2);
    /* out = O / l, lse = m + log l, into the staging set; the DMA stores them */
    isa_opnd lc = SP(0, a->lc_off), l = SP(0, a->l_off);
    uint64_t lse_at = fwd ? al64(T * Dh * a->oe) : 0;
    kce_wait(c, ISA_UNIT_VPU, a->s_ofree, 1);
    if (fwd) {
        isa_opnd O = SP(0, a->o_off);
        kce_un(c, ISA_OP_VPU_RECIP, lc, l, 1, tq, F, 0, 0);
        if (a->odt == F) {
            kce_bin(c, ISA_OP_VPU_MUL, SP(a->rOo, 0), O, lc, tq, Dh, F, ISA_BCAST_COL, 0, 0, 0);
        } else {
            kce_bin(c, ISA_OP_VPU_MUL, O, O, lc, tq, Dh, F, ISA_BCAST_COL, 0, 0, 0);
            kce_cast(c, SP(a->rOo, 0), O, tq, Dh, a->odt, F, 0, 0);
        }
    }
    kce_un(c, ISA_OP_VPU_LOG, lc, l, 1, tq, F, 0, 0);
    kce_bin(c, ISA_OP_VPU_ADD, SP(a->rOo, lse_at), SP(0, a->m_off), lc, 1, tq, F, ISA_BCAST_FULL,
            0, 0, 0);
    kce_signal(c, ISA_UNIT_VPU, a->s_ofull, 1);
    kce_wait(c, ISA_UNIT_DMA, a->s_ofull, 1);
    if (fwd) {
        const ka_opnd *o = &a->op[KA_FOUT];
        isa_opnd dst = ka_hbm(a, KA_FOUT, q->hoff[KA_FOUT], (int64_t)(q->i * T) * o->srow);
        kce_dma(c, dst, SP(a->rOo, 0), a->odt, Dh, tq, 1, (uint64_t)o->srow, 0, 0, 0);
    }
    int il = fwd ? KA_FLSE : KA_LLSE;
    isa_opnd dst = ka_hbm(a, il, q->hoff[il], (int64_t)(q->i * T * 4));
    kce_dma(c, dst, SP(a->rOo, lse_at), ISA_DTYPE_FP32, tq, 1, 1, 0, 0, 0, 0);
    kce_signal(c, ISA_UNIT_DMA, a->s_ofree, 1);
    kce_swap(c, a->rOo, a->rOo2, a->rT);
}

/* A head's query blocks, its inputs resident at rRes. */
static void fwd_head(ka *a, const int64_t *hoff)
{
    kce *c = &a->c;
    uint64_t S = a->S, T = a->T, nq = ka_cdiv(S, T), edge = S - (nq - 1) * T;
    uint64_t blk = T * a->Dh * a->e;
    kce_mov(c, a->rQb, a->rRes);
    ka_qpos q = {hoff, 0, T};
    if (a->causal) { /* row i sees key blocks 0 .. i: a body of its own each */
        bool overlap = a->kind == KA_FWD;
        for (uint64_t i = 0; i < nq; i++) {
            if (i)
                kce_addi(c, a->rQb, a->rQb, (int64_t)blk);
            q.i = i, q.tq = i + 1 < nq ? T : edge;
            uint64_t next = overlap && i + 1 < nq ? (i + 2 < nq ? T : edge) : 0;
            fwd_qblock(a, &q, i + 1, q.tq, overlap && i > 0, next);
        }
        return;
    }
    /* The full query blocks: a loop stepping rQb and the output registers. The forward's
     * rows are rotated as the causal ones are: each row's body computes the next row's first
     * S before its own last P V, so the array goes on while the vector unit ends the row; the
     * first and last full rows are emitted alone (the first computes its own first S, the
     * last hands the edge row's or nothing), the rows between them are the loop (each
     * started by the row before, its q.i = 1 offset on registers based at row 1). */
    uint64_t full = S / T;
    bool rot = a->kind == KA_FWD && nq > 1;
    uint64_t lo = rot ? 1 : 0, hi = rot ? (full ? full - 1 : 0) : full; /* the loop's rows */
    if (rot && full) { /* row 0 */
        q.i = 0, q.tq = T;
        fwd_qblock(a, &q, nq, edge, false, full > 1 ? T : edge);
    }
    if (hi > lo) {
        kc_loop l;
        unsigned regs[3] = {a->rQb, 0, 0};
        int64_t st[3] = {(int64_t)blk, 0, 0};
        unsigned n = 1;
        for (int i = a->n_in; i < a->n_op; i++) { /* each output group once */
            bool seen = false;
            for (unsigned k = 1; k < n; k++)
                seen = seen || regs[k] == a->op[i].reg;
            if (!seen)
                regs[n] = a->op[i].reg, st[n++] = a->op[i].step;
        }
        if (lo)
            kce_addi(c, a->rQb, a->rQb, (int64_t)(lo * blk));
        kc_loop_begin(a->x, &l, hi - lo, n, regs, st);
        uint64_t saved = c->mult;
        c->mult *= hi - lo;
        q.i = lo, q.tq = T;
        fwd_qblock(a, &q, nq, edge, rot, rot ? T : 0);
        c->mult = saved;
        kc_loop_end(a->x, &l);
        if (lo)
            kce_addi(c, a->rQb, a->rQb, -(int64_t)(lo * blk));
    }
    if (rot && full > 1) { /* the last full row: the edge row's first S, if there is one */
        kce_addi(c, a->rQb, a->rQb, (int64_t)((full - 1) * blk));
        q.i = full - 1, q.tq = T;
        fwd_qblock(a, &q, nq, edge, true, full < nq ? edge : 0);
        kce_addi(c, a->rQb, a->rQb, -(int64_t)((full - 1) * blk));
    }
    if (full < nq) {
        kce_addi(c, a->rQb, a->rQb, (int64_t)(full * blk));
        q.i = full, q.tq = edge;
        fwd_qblock(a, &q, nq, edge, rot && full > 0, 0);
    }
}

/* ---- heads ------------------------------------------------------------------------------ */

/* One head: the next head's loads (two residency sets) or its own, then its work. */
static void ka_head(ka *a, const int64_t *hoff, const int64_t *next)
{
    kce *c = &a->c;
    if (!a->dbuf)
        ka_load_head(a, hoff, a->rRes);
    else if (next)
        ka_load_head(a, next, a->rRes2);
    kce_wait(c, ISA_UNIT_MXU, a->s_kvfull, 1);
    if (a->kind == KA_BWD) {
        ka_bwd_head(a, hoff); /* the DMA frees the set once dq is stored */
    } else {
        fwd_head(a, hoff);
        kce_signal(c, ISA_UNIT_MXU, a->s_kvfree, 1);
    }
    if (a->dbuf)
        kce_swap(c, a->rRes, a->rRes2, a->rT);
}

/* The head walk's registers: each operand group's once. */
typedef struct ka_walk {
    ka *a;
    unsigned n, reg[KA_MAX_OP];
    int slot[KA_MAX_OP]; /* operand i's register in reg[] */
} ka_walk;

/* kce_walk's tile: offsets per register to offsets per operand. */
static void ka_walk_head(void *v, const int64_t *cur, const int64_t *next, unsigned flags)
{
    ka_walk *w = v;
    (void)flags;
    int64_t hc[KA_MAX_OP], hn[KA_MAX_OP];
    for (int i = 0; i < w->a->n_op; i++) {
        hc[i] = cur[w->slot[i]];
        hn[i] = next ? next[w->slot[i]] : 0;
    }
    ka_head(w->a, hc, next ? hn : NULL);
}

/* The core's nb x nh heads: rows of heads along b, heads along h. */
static void ka_heads(ka *a, uint64_t nb, uint64_t nh)
{
    ka_walk w = {.a = a};
    int64_t sb[KA_MAX_OP], sh[KA_MAX_OP];
    for (int i = 0; i < a->n_op; i++) {
        unsigned k = 0;
        while (k < w.n && w.reg[k] != a->op[i].reg)
            k++;
        if (k == w.n) {
            w.reg[w.n] = a->op[i].reg, sb[w.n] = a->op[i].sb, sh[w.n] = a->op[i].sh;
            w.n++;
        }
        w.slot[i] = (int)k;
    }
    kce_walk(&a->c, w.n, w.reg, sb, sh, nb, nh, NULL, ka_walk_head, &w);
}

/* ---- the plan ----------------------------------------------------------------------------- */

/* Scratchpad and accumulator bytes of the forward with blocks of T. */
static uint64_t fwd_layout(ka *a, uint64_t T, bool dbuf, uint64_t base, uint64_t acc)
{
    uint64_t S = a->S, Dh = a->Dh, e = a->e, t = T < KA_MASK_T ? T : KA_MASK_T;
    bool fwd = a->kind == KA_FWD;
    a->rq = 0, a->rk = al64(S * Dh * e), a->rv = 2 * a->rk;
    a->res_sz = (fwd ? 3 : 2) * a->rk;
    a->bs = 0;
    a->bp = al64(T * T * 4);
    a->bpv = a->bp + (fwd && e != 4 ? al64(T * T * e) : 0);
    a->bal = a->bpv + (fwd ? al64(T * Dh * 4) : 0);
    a->sbk_sz = a->bal + al64(T * 4);
    a->obk_sz = (fwd ? al64(T * Dh * a->oe) : 0) + al64(T * 4);
    uint64_t at = base;
    a->res[0] = at, at += a->res_sz;
    a->res[1] = dbuf ? at : a->res[0], at += dbuf ? a->res_sz : 0;
    a->sbk[0] = at, at += a->sbk_sz;
    a->sbk[1] = at, at += a->sbk_sz;
    a->obk[0] = at, at += a->obk_sz;
    a->obk[1] = at, at += a->obk_sz;
    a->o_off = at, at += fwd ? al64(T * Dh * 4) : 0;
    a->m_off = at, at += al64(T * 4);
    a->l_off = at, at += al64(T * 4);
    a->mc_off = at, at += al64(T * 4);
    a->lc_off = at, at += al64(T * 4);
    a->mask = at, at += a->causal ? al64(t * t * 4) : 0;
    a->one_off = at, at += 64;
    a->acc_s = acc, a->acc_pv = acc + al64(T * T * 4);
    return at - base;
}

static uint64_t fwd_acc(uint64_t T, uint64_t Dh, bool fwd)
{
    return al64(T * T * 4) + (fwd ? al64(T * Dh * 4) : 0);
}

/* The cost model's cycles of one (tq queries, tk keys) block pair: the array (hw-model's
 * formula per mxu.mm, one accumulator row a cycle per drain) and the vector unit (its ops at
 * their rates) overlap; plus issue and semaphore hand-offs. */
static double ka_pair(const ka *a, uint64_t tq, uint64_t tk, uint64_t T, double *fill)
{
    const arch_config *cfg = a->x->cfg;
    isa_dtype dt = a->dt;
    double lanes = (double)cfg->core.vector_lanes * cfg->core.vector_ops_per_lane;
    double tr = (double)cfg->core.vector_lanes * cfg->core.vector_transc_ops_per_lane;
    double C = (double)cfg->core.array_cols, el = (double)(tq * tk), mxu, vpu;
    uint64_t Dh = a->Dh;
    if (a->kind == KA_BWD) {
        mxu = 2.0 * (double)kmm_array_cycles(cfg, dt, tk, tq, Dh) +
              2.0 * (double)kmm_array_cycles(cfg, dt, tk, Dh, tq) +
              (double)kmm_array_cycles(cfg, dt, tq, Dh, tk) + 2 * el / C;
        vpu = el * (dt == ISA_DTYPE_FP32 ? 4 : 6) / lanes + el / tr;
    } else {
        mxu = (double)kmm_array_cycles(cfg, dt, tq, tk, Dh) + el / C;
        /* the row max, then a whole block's exp, row sums and cast in one vpu.fexp; an edge
         * block's subtract, exp, row sums and cast one pass each */
        vpu = tk == T ? el / lanes + el / tr
                      : el * (a->kind == KA_FWD && dt != ISA_DTYPE_FP32 ? 5 : 4) / lanes + el / tr;
        if (a->kind == KA_FWD) {
            mxu += (double)kmm_array_cycles(cfg, dt, tq, Dh, tk) + (double)(tq * Dh) / C;
            vpu += 2.0 * (double)(tq * Dh) / lanes;
        }
    }
    if (fill)
        *fill = mxu < vpu ? mxu : vpu;
    return (mxu > vpu ? mxu : vpu) + 40;
}

/* The cost model's cycles for one core's heads with blocks of T (nq of them, the last edge
 * rows): the pairs a head computes, counted in closed form, and the heads' loads, exposed
 * without two residency sets. */
static double ka_estimate(const ka *a, uint64_t T, bool dbuf, uint64_t heads, uint64_t cores)
{
    const arch_config *cfg = a->x->cfg;
    uint64_t S = a->S, nq = ka_cdiv(S, T), edge = S - (nq - 1) * T;
    double fill;
    double full = ka_pair(a, T, T, T, &fill), fe = ka_pair(a, T, edge, T, NULL);
    double ef = ka_pair(a, edge, T, T, NULL), ee = ka_pair(a, edge, edge, T, NULL);
    double n = (double)(nq - 1), head;
    if (a->causal) /* row i sees i + 1 blocks; the edge row all, the last being its diagonal */
        head = n * (n + 1) / 2 * full + n * ef + ee;
    else
        head = n * n * full + n * fe + n * ef + ee;
    /* attention_lse's rows do not overlap: a row's first S waits for the vector unit to end
     * the row before, and the vector unit for it (the forward computes the next row's first
     * S under the row's end) */
    if (a->kind == KA_LSE)
        head += (double)nq * fill;
    if (a->causal) { /* each row's diagonal block: -inf right of its sub-tiles, triangles */
        const arch_config *c = a->x->cfg;
        double lanes = (double)c->core.vector_lanes * c->core.vector_ops_per_lane;
        double t = (double)(T < KA_MASK_T ? T : KA_MASK_T), Tq = (double)T;
        head += (double)nq * (Tq * Tq / 2 + Tq * t / 2) / lanes;
    }
    double bytes = (double)(S * a->Dh * a->e * (uint64_t)a->n_in);
    double bw = cfg->chip.hbm_gb_per_s / cfg->core.clock_ghz / (double)cores;
    double load = cfg->chip.hbm_latency_ns * cfg->core.clock_ghz + bytes / bw;
    return (double)heads * head + (dbuf ? load : (double)heads * load);
}

/* The operands' groups: operands with the same head steps and block step share a register
 * (based at the group's lowest address). */
static unsigned ka_groups(ka *a, unsigned *first)
{
    unsigned n = 0;
    for (int i = 0; i < a->n_op; i++) {
        ka_opnd *o = &a->op[i];
        int g = -1;
        for (unsigned k = 0; k < n && g < 0; k++) {
            const ka_opnd *f = &a->op[first[k]];
            if (f->sb == o->sb && f->sh == o->sh && f->step == o->step)
                g = (int)k;
        }
        if (g < 0)
            first[n] = (unsigned)i, g = (int)n++;
        o->reg = (unsigned)g; /* a group index until registers are taken */
    }
    return n;
}

/* Checks a [B, H, S, Dh] operand (or [B, H, S] for lse) and records its steps. */
static np_status ka_opnd_of(ka *a, int i, const kc_tensor *t, const char *what, bool lse)
{
    kc_ctx *x = a->x;
    int nd = lse ? 3 : 4;
    if (t->ndim != nd || t->shape[0] != (int64_t)a->B || t->shape[1] != (int64_t)a->H ||
        t->shape[2] != (int64_t)a->S || (!lse && t->shape[3] != (int64_t)a->Dh)) {
        char dims[96];
        int n = snprintf(dims, sizeof dims, "[%" PRIu64 ", %" PRIu64 ", %" PRIu64, a->B, a->H,
                         a->S);
        if (!lse)
            snprintf(dims + n, sizeof dims - (size_t)n, ", %" PRIu64, a->Dh);
        return kc_fail(x, NP_ERR_INCONSISTENT, "%s must be %s] like q", what, dims);
    }
    uint64_t es = nn_dtype_size(t->dtype);
    if (t->stride[nd - 1] != (int64_t)es && t->shape[nd - 1] > 1)
        return kc_fail(x, NP_ERR_INCONSISTENT, "%s: its last dim must be contiguous (stride %"
                       PRId64 ", element %" PRIu64 " bytes)", what, t->stride[nd - 1], es);
    if (!lse && (t->stride[2] < 0 || t->stride[2] >= (1 << 24)))
        return kc_fail(x, NP_ERR_RANGE, "%s: rows %" PRId64 " bytes apart (the copies take < 16 "
                       "MiB)", what, t->stride[2]);
    ka_opnd *o = &a->op[i];
    o->base = t->addr;
    o->sb = t->stride[0], o->sh = t->stride[1], o->srow = lse ? 4 : t->stride[2];
    o->dt = kc_isa_dtype(t->dtype);
    return NP_OK;
}

/* Registers and semaphores of one core. */
static np_status ka_resources(ka *a, unsigned n_grp)
{
    kc_ctx *x = a->x;
    unsigned gregs[KA_MAX_OP];
    for (unsigned g = 0; g < n_grp; g++)
        kc_reg_alloc(x, &gregs[g]);
    for (int i = 0; i < a->n_op; i++)
        a->op[i].reg = gregs[a->op[i].reg];
    kc_reg_alloc(x, &a->rRes);
    if (a->dbuf)
        kc_reg_alloc(x, &a->rRes2);
    else
        a->rRes2 = a->rRes;
    kc_reg_alloc(x, &a->rQb);
    kc_reg_alloc(x, &a->rKj);
    kc_reg_alloc(x, &a->rOo);
    kc_reg_alloc(x, &a->rOo2);
    kc_reg_alloc(x, &a->rT);
    if (a->kind == KA_BWD) {
        kc_reg_alloc(x, &a->rLi);
        kc_reg_alloc(x, &a->rDQ);
    } else {
        kc_reg_alloc(x, &a->rCur);
        kc_reg_alloc(x, &a->rPrev);
    }
    unsigned *sems[] = {&a->s_kvfree, &a->s_kvfull, &a->s_sfull, &a->s_pfull, &a->s_pvfull,
                        &a->s_ofree, &a->s_ofull, &a->s_dpfull, &a->s_dsready, &a->s_dready,
                        &a->s_hdone, &a->s_dqfull};
    for (size_t i = 0; i < sizeof sems / sizeof sems[0]; i++)
        kc_sem_alloc(x, sems[i]);
    return kc_status(x);
}

/* One core's block of heads: b in [b0, b0 + nb), h in [h0, h0 + nh). */
static np_status ka_core(ka *a, uint32_t core, uint64_t b0, uint64_t nb, uint64_t h0,
                         uint64_t nh, uint64_t spad, uint64_t accb, unsigned n_grp,
                         const unsigned *first)
{
    kc_ctx *x = a->x;
    kce *c = &a->c;
    if (kc_core(x, core) != NP_OK)
        return kc_status(x);
    uint64_t at, acc;
    kc_spad_alloc(x, spad, 64, &at);
    kc_acc_alloc(x, accb, 64, &acc);
    if (kc_status(x) != NP_OK)
        return kc_status(x);
    if (a->kind == KA_BWD)
        ka_bwd_place(a, at, acc);
    else
        fwd_layout(a, a->T, a->dbuf, at, acc);
    /* group registers keep their group index in op[].reg until ka_resources maps them */
    uint64_t gbase[KA_MAX_OP];
    for (unsigned g = 0; g < n_grp; g++)
        gbase[g] = UINT64_MAX;
    for (int i = 0; i < a->n_op; i++)
        if (a->op[i].base < gbase[a->op[i].reg])
            gbase[a->op[i].reg] = a->op[i].base;
    for (int i = 0; i < a->n_op; i++)
        a->op[i].off = a->op[i].base - gbase[a->op[i].reg];
    if (ka_resources(a, n_grp) != NP_OK)
        return kc_status(x);
    for (unsigned g = 0; g < n_grp; g++) {
        const ka_opnd *f = &a->op[first[g]];
        ISA_EMIT(x->e, LI, isa_reg(f->reg),
                 isa_imm((int64_t)gbase[g] + (int64_t)b0 * f->sb + (int64_t)h0 * f->sh));
    }
    ISA_EMIT(x->e, LI, isa_reg(a->rRes), isa_imm((int64_t)a->res[0]));
    if (a->dbuf)
        ISA_EMIT(x->e, LI, isa_reg(a->rRes2), isa_imm((int64_t)a->res[1]));
    ISA_EMIT(x->e, LI, isa_reg(a->rOo), isa_imm((int64_t)a->obk[0]));
    ISA_EMIT(x->e, LI, isa_reg(a->rOo2), isa_imm((int64_t)a->obk[1]));
    if (a->kind != KA_BWD) {
        ISA_EMIT(x->e, LI, isa_reg(a->rCur), isa_imm((int64_t)a->sbk[0]));
        ISA_EMIT(x->e, LI, isa_reg(a->rPrev), isa_imm((int64_t)a->sbk[1]));
    }
    unsigned sets = a->dbuf ? 2 : 1;
    kce_signal(c, ISA_UNIT_DMA, a->s_kvfree, sets);
    kce_signal(c, ISA_UNIT_DMA, a->s_ofree, 2);
    if (a->kind == KA_BWD)
        kce_signal(c, ISA_UNIT_MXU, a->s_hdone, 1);
    if (a->causal)
        ka_build_mask(a);
    if (a->kind != KA_BWD)
        kce_fill(c, SP(0, a->one_off), 1.0f, 1, 1, ISA_DTYPE_FP32, 0);
    int64_t zero[KA_MAX_OP] = {0};
    if (a->dbuf)
        ka_load_head(a, zero, a->rRes);
    ka_heads(a, nb, nh);
    /* settle: every semaphore back at zero, the DMA queue's last copies waited for */
    if (a->kind == KA_BWD)
        kce_wait(c, ISA_UNIT_VPU, a->s_hdone, 1);
    kce_wait(c, ISA_UNIT_DMA, a->s_ofree, 2);
    kce_wait(c, ISA_UNIT_DMA, a->s_kvfree, sets);
    return kc_status(x);
}

static int64_t ka_pairs(uint64_t S, bool causal)
{
    return causal ? (int64_t)(S * (S + 1) / 2) : (int64_t)(S * S);
}

static np_status ka_compile(kc_ctx *x, ka_kind kind)
{
    const kc_kernel *k = x->k;
    ka a;
    memset(&a, 0, sizeof a);
    a.x = x, a.kind = kind, a.c = (kce){x, 1, 0, 0};
    const kc_tensor *q = &k->in[0];
    if (q->ndim != 4)
        return kc_fail(x, NP_ERR_INCONSISTENT, "q must be [B, H, S, Dh] (it has %d dims)",
                       q->ndim);
    a.B = (uint64_t)q->shape[0], a.H = (uint64_t)q->shape[1], a.S = (uint64_t)q->shape[2];
    a.Dh = (uint64_t)q->shape[3];
    a.dt = kc_isa_dtype(q->dtype);
    a.e = isa_dtype_size[a.dt];
    a.causal = kc_attr_int(x, "causal") != 0;
    double sc = kc_attr_real(x, "scale");
    a.scale = (float)(sc > 0 ? sc : 1.0 / sqrt((double)a.Dh));
    if (a.dt == ISA_DTYPE_INT8 || a.dt == ISA_DTYPE_INT32)
        return kc_fail(x, NP_ERR_INCONSISTENT, "q is %s: attention takes floats",
                       nn_dtype_name(q->dtype));
    if (!(isa_emit_program(x->e)->target.dtypes & (1u << a.dt)))
        return kc_fail(x, NP_ERR_INCONSISTENT, "the array does not multiply %s",
                       isa_dtype_names[a.dt]);
    if (a.S > 65535 || a.Dh > 65535)
        return kc_fail(x, NP_ERR_RANGE, "S %" PRIu64 " and Dh %" PRIu64 " must be <= 65535",
                       a.S, a.Dh);
    static const char *const in_names[] = {"q", "k", "v", "out", "dout", "lse"};
    a.n_in = kind == KA_FWD ? 3 : kind == KA_LSE ? 2 : 6;
    for (int i = 0; i < a.n_in; i++) {
        bool lse = kind == KA_BWD && i == KA_LSE_IN;
        if (ka_opnd_of(&a, i, &k->in[i], in_names[i], lse) != NP_OK)
            return kc_status(x);
        if (lse ? k->in[i].dtype != NN_F32 : k->in[i].dtype != q->dtype)
            return kc_fail(x, NP_ERR_INCONSISTENT, "%s is %s, must be %s", in_names[i],
                           nn_dtype_name(k->in[i].dtype),
                           nn_dtype_name(lse ? NN_F32 : q->dtype));
    }
    const kc_tensor *out = &k->out[0];
    a.odt = kind == KA_LSE ? ISA_DTYPE_FP32 : kc_isa_dtype(out->dtype);
    a.oe = isa_dtype_size[a.odt];
    if (kind == KA_FWD) {
        if (ka_opnd_of(&a, KA_FOUT, out, "out", false) != NP_OK ||
            ka_opnd_of(&a, KA_FLSE, &k->out[1], "lse", true) != NP_OK)
            return kc_status(x);
        if (k->out[1].dtype != NN_F32 || a.odt == ISA_DTYPE_INT8 || a.odt == ISA_DTYPE_INT32)
            return kc_fail(x, NP_ERR_INCONSISTENT, "out must be a float type and lse fp32");
        a.n_op = 5;
    } else if (kind == KA_LSE) {
        if (ka_opnd_of(&a, KA_LLSE, out, "lse", true) != NP_OK)
            return kc_status(x);
        if (out->dtype != NN_F32)
            return kc_fail(x, NP_ERR_INCONSISTENT, "lse must be fp32");
        a.n_op = 3;
    } else {
        if (out->ndim != 5 || out->shape[0] != 3)
            return kc_fail(x, NP_ERR_INCONSISTENT, "the gradient must be [3, B, H, S, Dh]");
        kc_tensor part = *out;
        part.ndim = 4, part.addr = out->addr;
        memmove(part.shape, out->shape + 1, 4 * sizeof part.shape[0]);
        memmove(part.stride, out->stride + 1, 4 * sizeof part.stride[0]);
        if (ka_opnd_of(&a, KA_GRAD, &part, "the gradient's part", false) != NP_OK)
            return kc_status(x);
        if (a.odt == ISA_DTYPE_INT8 || a.odt == ISA_DTYPE_INT32)
            return kc_fail(x, NP_ERR_INCONSISTENT, "the gradient must be a float type");
        a.part = out->stride[0];
        a.n_op = 7;
    }
    /* groups of operands sharing a head register: the same head steps and block step (an
     * output moves by T rows per query block forward, per key block backward) */
    for (int i = a.n_in; i < a.n_op; i++)
        a.op[i].step = a.op[i].srow;
    unsigned first[KA_MAX_OP];
    unsigned n_grp = ka_groups(&a, first);
    /* the block size and the schedule: given, or the cost model's among those that fit —
     * each head resident (two sets or one) or K/V streamed (kc_attn_st.c) */
    const kc_place *pl = &k->place;
    uint64_t n_cores = pl->n_cores ? pl->n_cores : 1, pr, pc;
    kmm_split_grid(a.B, a.H, n_cores, &pr, &pc);
    uint64_t heads = ka_cdiv(a.B, pr) * ka_cdiv(a.H, pc);
    uint64_t spad = UINT64_MAX, accb = UINT64_MAX;
    for (uint32_t cc = pl->core0; cc < pl->core0 + n_cores; cc++) {
        uint64_t s1 = kc_spad_avail(x, cc), a1 = kc_acc_avail(x, cc);
        spad = s1 < spad ? s1 : spad;
        accb = a1 < accb ? a1 : accb;
    }
    uint64_t given = (uint64_t)kc_attr_int(x, "block");
    int64_t mode = kc_attr_int(x, "stream"); /* 0: the cost model's, 1: resident, 2: streamed */
    /* candidates: (block rows, streamed), each with its estimate */
    enum { KA_NC = 24 };
    uint64_t cT[KA_NC];
    bool cst[KA_NC], cdb[KA_NC];
    double cest[KA_NC];
    ks_plan cplan[KA_NC];
    unsigned nc = 0;
    for (int st = 0; st < 2; st++) {
        if ((st && mode == 1) || (!st && mode == 2))
            continue;
        uint64_t lo = 8, hi = st ? 256 : 1024;
        for (uint64_t T = given ? given : lo; nc < KA_NC; T *= 2) {
            uint64_t t = T < a.S ? T : a.S;
            if (!given && T > hi)
                break;
            cT[nc] = t, cst[nc] = st, cdb[nc] = false, cest[nc] = INFINITY;
            nc++;
            if (given || t == a.S)
                break;
        }
    }
    /* what the smallest of each needs, for the error when none fits */
    uint64_t res_s = 0, res_a = 0, str_s = 0, str_a = 0, resT = 0, strT = 0;
    const char *str_why = "";
    for (unsigned ci = 0; ci < nc; ci++) {
        uint64_t T = cT[ci];
        if (cst[ci]) {
            uint64_t ns, na;
            const char *why;
            if (ks_plan_make(&a, T, spad, accb, ISA_N_REGS - 1, n_cores, &cplan[ci], &ns, &na,
                             &why))
                cest[ci] = cplan[ci].est;
            else if (!strT)
                strT = T, str_s = ns, str_a = na, str_why = why;
            continue;
        }
        for (int db = 1; db >= 0; db--) {
            ka probe = a;
            uint64_t need_s = kind == KA_BWD ? ka_bwd_spad(&probe, T, db) :
                                               fwd_layout(&probe, T, db, 0, 0);
            uint64_t need_a = kind == KA_BWD ? ka_bwd_acc(&probe, T)
                                             : fwd_acc(T, a.Dh, kind == KA_FWD);
            if (!resT && !db)
                resT = T, res_s = need_s, res_a = need_a;
            if (need_s > spad || need_a > accb)
                continue;
            if (n_grp + 8 + (unsigned)db > ISA_N_REGS - 1) /* registers: one residency set */
                continue;
            double est = ka_estimate(&a, T, db, heads, pr * pc);
            if (est < cest[ci] * 0.999)
                cest[ci] = est, cdb[ci] = db;
        }
    }
    unsigned pick = nc;
    for (unsigned ci = 0; ci < nc; ci++)
        if (isfinite(cest[ci]) && (pick == nc || cest[ci] < cest[pick] * 0.999))
            pick = ci;
    if (pick == nc) {
        char msg[512];
        int n = snprintf(msg, sizeof msg, "a head of %" PRIu64 " x %" PRIu64 " %s does not fit",
                         a.S, a.Dh, isa_dtype_names[a.dt]);
        if (strT && !str_why[0])
            n += snprintf(msg + n, sizeof msg - (size_t)n, ": with K/V streamed in %" PRIu64
                          "-row blocks it needs %" PRIu64 " scratchpad bytes (%" PRIu64
                          " free) and %" PRIu64 " accumulator bytes (%" PRIu64 " free)", strT,
                          str_s, spad, str_a, accb);
        else if (strT)
            n += snprintf(msg + n, sizeof msg - (size_t)n, ": streamed, %s", str_why);
        if (resT)
            snprintf(msg + n, sizeof msg - (size_t)n, "%s resident with %" PRIu64 "-row blocks "
                     "it needs %" PRIu64 " scratchpad bytes (%" PRIu64 " free) and %" PRIu64
                     " accumulator bytes (%" PRIu64 " free)", strT ? ";" : ":", resT, res_s,
                     spad, res_a, accb);
        return kc_fail(x, NP_ERR_RANGE, "%s", msg);
    }
    double best = cest[pick];
    bool streamed = cst[pick];
    a.T = cT[pick], a.dbuf = cdb[pick], a.t = a.T < KA_MASK_T ? a.T : KA_MASK_T;
    a.RS = a.T * 4;
    for (int i = a.n_in; i < a.n_op; i++)
        a.op[i].step = (int64_t)a.T * a.op[i].srow;
    /* the result */
    kc_result *r = x->res;
    int64_t heads_all = (int64_t)(a.B * a.H), P = ka_pairs(a.S, a.causal), Dh = (int64_t)a.Dh;
    switch (kind) {
    case KA_FWD:
        r->flops = (uint64_t)(heads_all * P * (4 * Dh + 5));
        r->mxu_flops = (uint64_t)(heads_all * P * 4 * Dh);
        break;
    case KA_LSE:
        r->flops = (uint64_t)(heads_all * P * (2 * Dh + 4));
        r->mxu_flops = (uint64_t)(heads_all * P * 2 * Dh);
        break;
    default:
        r->flops = (uint64_t)(heads_all * (P * (10 * Dh + 4) + (int64_t)a.S * 2 * Dh));
        r->mxu_flops = (uint64_t)(heads_all * P * 10 * Dh);
        break;
    }
    r->est_cycles = (uint64_t)best;
    /* the tuner's candidates (`block` and `stream` select one): the chosen one first, then
     * the others that fit, fewest estimated cycles first */
    r->n_cands = 0;
    cest[pick] = -1; /* first */
    while (r->n_cands < KC_MAX_CANDS) {
        unsigned c = nc;
        for (unsigned ci = 0; ci < nc; ci++)
            if (isfinite(cest[ci]) && (c == nc || cest[ci] < cest[c]))
                c = ci;
        if (c == nc)
            break;
        r->cands[r->n_cands++] = (kc_tiling){
            2, {KC_INT("block", (int64_t)cT[c]), KC_INT("stream", cst[c] ? 2 : 1)},
            cest[c] < 0 ? (uint64_t)best : (uint64_t)cest[c]};
        cest[c] = INFINITY;
    }
    if (streamed) {
        const ks_plan *kp = &cplan[pick];
        snprintf(r->schedule, sizeof r->schedule, "%" PRIu64 " heads of %" PRIu64 "x%" PRIu64
                 "%s, K/V streamed in %" PRIu64 "-row blocks, %" PRIu64 " x %" PRIu64
                 " head blocks x %" PRIu64 " row parts, %s", a.B * a.H, a.S, a.Dh,
                 a.causal ? " causal" : "", a.T, kp->pr, kp->pc, kp->rp,
                 kp->nus > 1 ? "next unit prefetched" : "one unit set");
        return ks_compile(&a, kp);
    }
    ka probe = a;
    uint64_t need_s = kind == KA_BWD ? ka_bwd_spad(&probe, a.T, a.dbuf) :
                                       fwd_layout(&probe, a.T, a.dbuf, 0, 0);
    uint64_t need_a = kind == KA_BWD ? ka_bwd_acc(&probe, a.T) : fwd_acc(a.T, a.Dh, kind == KA_FWD);
    snprintf(r->schedule, sizeof r->schedule, "%" PRIu64 " heads of %" PRIu64 "x%" PRIu64
             "%s, %" PRIu64 "-row blocks, %s", a.B * a.H, a.S, a.Dh,
             a.causal ? " causal" : "", a.T,
             a.dbuf ? "next head prefetched" : "one head resident");
    for (uint64_t i = 0; i < pr * pc; i++) {
        uint64_t b0, b1, h0, h1;
        kmm_block(a.B, pr, i / pc, &b0, &b1);
        kmm_block(a.H, pc, i % pc, &h0, &h1);
        ka run = a;
        if (ka_core(&run, pl->core0 + (uint32_t)i, b0, b1 - b0, h0, h1 - h0, need_s, need_a,
                    n_grp, first) != NP_OK)
            return kc_status(x);
        r->hbm_read_bytes += run.c.rd;
        r->hbm_write_bytes += run.c.wr;
    }
    r->cores = (uint32_t)(pr * pc);
    return kc_status(x);
}

static np_status attn_compile(kc_ctx *x) { return ka_compile(x, KA_FWD); }
static np_status lse_compile(kc_ctx *x) { return ka_compile(x, KA_LSE); }
static np_status grad_compile(kc_ctx *x) { return ka_compile(x, KA_BWD); }

/* ---- the framework's computation of each ------------------------------------------------ */

static void ka_params(const kc_kernel *k, const nn_tensor *q, int64_t *ip, double *fp)
{
    memset(ip, 0, NN_MAX_IPARAMS * sizeof *ip);
    memset(fp, 0, NN_MAX_FPARAMS * sizeof *fp);
    double scale = 0;
    for (int i = 0; i < k->n_attrs; i++) {
        if (!strcmp(k->attrs[i].name, "causal"))
            ip[0] = k->attrs[i].i != 0;
        else if (!strcmp(k->attrs[i].name, "scale"))
            scale = k->attrs[i].f;
    }
    fp[0] = scale > 0 ? scale : 1.0 / sqrt((double)q->ne[q->ndim - 1]);
}

/* The inverse of ka_params: a node's causal flag (ip[0]) and scale (fp[0]) as attributes. */
static np_status ka_from_node(const nn_tensor *t, kc_kernel *k, np_err *err)
{
    if (k->n_attrs + 2 > KC_MAX_ATTRS)
        return np_err_set(err, NP_ERR_RANGE, "%s: no room for its attributes",
                          nn_op_name(t->op));
    k->attrs[k->n_attrs++] = KC_INT("causal", t->ip[0] != 0);
    k->attrs[k->n_attrs++] = KC_REAL("scale", t->fp[0]);
    return NP_OK;
}

static np_status ka_ref(nn_graph *g, nn_tensor **out, int n, np_err *err)
{
    for (int i = 0; i < n; i++)
        if (!out[i])
            return nn_graph_status(g, err);
    return NP_OK;
}

static np_status attn_reference(nn_graph *g, const kc_kernel *k, nn_tensor *const *in,
                                nn_tensor **out, np_err *err)
{
    int64_t ip[NN_MAX_IPARAMS];
    double fp[NN_MAX_FPARAMS];
    ka_params(k, in[0], ip, fp);
    out[0] = nn_node(g, NN_OP_ATTENTION, 3, (nn_tensor *[]){in[0], in[1], in[2]}, ip, fp);
    out[1] = nn_node(g, NN_OP_ATTENTION_LSE, 2, (nn_tensor *[]){in[0], in[1]}, ip, fp);
    return ka_ref(g, out, 2, err);
}

static np_status lse_reference(nn_graph *g, const kc_kernel *k, nn_tensor *const *in,
                               nn_tensor **out, np_err *err)
{
    int64_t ip[NN_MAX_IPARAMS];
    double fp[NN_MAX_FPARAMS];
    ka_params(k, in[0], ip, fp);
    out[0] = nn_node(g, NN_OP_ATTENTION_LSE, 2, (nn_tensor *[]){in[0], in[1]}, ip, fp);
    return ka_ref(g, out, 1, err);
}

static np_status grad_reference(nn_graph *g, const kc_kernel *k, nn_tensor *const *in,
                                nn_tensor **out, np_err *err)
{
    int64_t ip[NN_MAX_IPARAMS];
    double fp[NN_MAX_FPARAMS];
    ka_params(k, in[0], ip, fp);
    out[0] = nn_node(g, NN_OP_ATTENTION_GRAD, 6, in, ip, fp);
    return ka_ref(g, out, 1, err);
}

/* ---- `npusim kernel --op` ------------------------------------------------------------------ */

static const kc_attr_def ka_keys[] = {
    {"shape", KC_ATTR_SHAPE, KC_REQUIRED, 0, 0, "q's shape BxHxSxDh (k, v, out alike)"},
    {"dtype", KC_ATTR_DTYPE, NN_BF16, 0, 0, "q, k, v and out (lse is fp32)"},
};

/* A dense tensor of shape in a fresh buffer. */
static np_status ka_buf(kc_prog *p, const char *name, nn_dtype dt, int nd, const int64_t *shape,
                        kc_tensor *t, np_err *err)
{
    int64_t n = 1;
    for (int d = 0; d < nd; d++)
        n *= shape[d];
    uint64_t addr;
    if (kc_prog_bss(p, name, (uint64_t)n * nn_dtype_size(dt), &addr, err) != NP_OK)
        return err->status;
    kc_tensor_dense(t, addr, dt, nd, shape);
    return NP_OK;
}

static np_status ka_build(kc_prog *p, const kc_spec *s, kc_kernel *k, np_err *err, ka_kind kind)
{
    const kc_spec_val *sh = kc_spec_get(s, "shape");
    nn_dtype dt = (nn_dtype)kc_spec_get(s, "dtype")->i;
    if (sh->ndim != 4)
        return np_err_set(err, NP_ERR_RANGE, "%s: shape= must be BxHxSxDh", nn_op_name(s->op));
    const int64_t *q = sh->shape;
    static const char *const names[] = {"Q", "K", "V", "O", "DO"};
    int n_in = kind == KA_FWD ? 3 : kind == KA_LSE ? 2 : 5;
    for (int i = 0; i < n_in; i++)
        if (ka_buf(p, names[i], dt, 4, q, &k->in[i], err) != NP_OK)
            return err->status;
    k->n_in = n_in;
    if (kind == KA_BWD) {
        if (ka_buf(p, "LSE", NN_F32, 3, q, &k->in[5], err) != NP_OK ||
            ka_buf(p, "GRAD", dt, 5, (int64_t[]){3, q[0], q[1], q[2], q[3]}, &k->out[0], err) !=
                NP_OK)
            return err->status;
        k->n_in = 6, k->n_out = 1;
    } else if (kind == KA_FWD) {
        if (ka_buf(p, "OUT", dt, 4, q, &k->out[0], err) != NP_OK ||
            ka_buf(p, "LSE", NN_F32, 3, q, &k->out[1], err) != NP_OK)
            return err->status;
        k->n_out = 2;
    } else {
        if (ka_buf(p, "LSE", NN_F32, 3, q, &k->out[0], err) != NP_OK)
            return err->status;
        k->n_out = 1;
    }
    return NP_OK;
}

static np_status attn_build(kc_prog *p, const kc_spec *s, kc_kernel *k, np_err *err)
{
    return ka_build(p, s, k, err, KA_FWD);
}
static np_status lse_build(kc_prog *p, const kc_spec *s, kc_kernel *k, np_err *err)
{
    return ka_build(p, s, k, err, KA_LSE);
}
static np_status grad_build(kc_prog *p, const kc_spec *s, kc_kernel *k, np_err *err)
{
    return ka_build(p, s, k, err, KA_BWD);
}

/* ---- the table rows ----------------------------------------------------------------------- */

static const kc_attr_def ka_attrs[] = {
    {"causal", KC_ATTR_BOOL, 0, 0, 1, "mask key j > query i"},
    {"scale", KC_ATTR_REAL, 0, 0, 1e30, "scores' scale (0: 1 / sqrt(Dh))"},
    {"block", KC_ATTR_INT, 0, 0, 65535, "tile: query and key block rows (0: the cost model's)"},
    {"stream", KC_ATTR_INT, 0, 0, 2, "tile: 1 each head resident, 2 K/V streamed block by block "
                                      "(0: the cost model's)"},
};

/* The bounds of docs/compiler.md ("Attention", values): out fp32 within 2^-18 of the largest
 * output, 16-bit within 2 ulp x max |out| + 1 ulp x |out|; lse within 1e-5; the backward's
 * parts within 4 ulp x the largest magnitude + 1 ulp x |value| (fp32: 2^-18 for the ulp). */
static void ka_tolerance(const kc_kernel *k, int out, kc_tol *t)
{
    nn_dtype dt = k->in[0].dtype;
    double u = dt == NN_F32 ? 0x1p-18 : kc_tol_ulp(dt).rtol;
    bool lse = (k->op == NN_OP_ATTENTION && out == 1) || k->op == NN_OP_ATTENTION_LSE;
    if (lse)
        *t = (kc_tol){0, 1e-5, 0};
    else if (k->op == NN_OP_ATTENTION_GRAD)
        *t = (kc_tol){dt == NN_F32 ? 0 : u, 0, 4 * u};
    else
        *t = dt == NN_F32 ? (kc_tol){0, 0, u} : (kc_tol){u, 0, 2 * u};
}

#define KA_ROW(OP, def, nin, nout, comp, ref, bld, text)                                        \
    const kc_kernel_def def = {                                                                 \
        .op = OP, .n_in = nin, .n_out = nout,                                                   \
        .attrs = ka_attrs, .n_attrs = sizeof ka_attrs / sizeof ka_attrs[0],                     \
        .compile = comp, .reference = ref,                                                      \
        .keys = ka_keys, .n_keys = sizeof ka_keys / sizeof ka_keys[0], .build = bld,            \
        .doc = text, .tolerance = ka_tolerance, .from_node = ka_from_node,                      \
    }

KA_ROW(NN_OP_ATTENTION, kc_attention_def, 3, 2, attn_compile, attn_reference, attn_build,
       "flash attention: each head resident once, query x key blocks with an online softmax "
       "(array one block ahead of the vector unit); out and lse");
KA_ROW(NN_OP_ATTENTION_LSE, kc_attention_lse_def, 2, 1, lse_compile, lse_reference, lse_build,
       "attention's score pass alone: each query's log-sum-exp by an online max and sum");
KA_ROW(NN_OP_ATTENTION_GRAD, kc_attention_grad_def, 6, 1, grad_compile, grad_reference,
       grad_build,
       "FlashAttention-2 backward: per key block, its query blocks recompute P from lse; dk, dv "
       "and dq (the whole head's) in the accumulators");
