/* kc_attn_st.h — the attention kernels with K/V streamed through the scratchpad block by block
 * (internal to compiler/): FlashAttention-2's loop order for heads a core's scratchpad cannot
 * hold whole (docs/compiler.md, "Attention", "Streamed"). kc_attn.c checks the operands and
 * chooses between the resident schedule and this one; kc_attn_st.c plans this one (block
 * rows, unit sets, the split of heads x blocks over the cores), drives its units over a
 * core's blocks and heads and emits the forward (attention, attention_lse); kc_attn_stb.c
 * emits the backward's three phases.
 *
 * The work is cut into units: one block of T rows of one head (b, h). A unit keeps its own
 * operands in a unit set of the scratchpad and streams the other side's blocks through two
 * stream sets, the DMA loading block j + 1 while the array and the vector unit work on block
 * j (and, with two unit sets, the next unit's operands while this one runs). Per kind:
 *
 *   kind  unit (its block's rows)                 streamed per block            writes
 *   FWD   q_i                                     k_j, v_j (j <= i causal)      out_i, lse_i
 *   LSE   q_i                                     k_j                           lse_i
 *   D     out_i, dout_i, lse_i                    -                             (-lse_i, D_i)
 *   DKV   k_j, v_j                                q_i, dout_i, (-lse_i, D_i)    dk_j, dv_j
 *                                                 (i >= j causal)
 *   DQ    q_i, dout_i, (-lse_i, D_i)              k_j, v_j (j <= i causal)      dq_i
 *
 * attention_grad is the three phases D, DKV, DQ with a barrier between them. D = rowsum(dout
 * . out) and -lse of each query block are written into the first bytes of that block's dq
 * rows (the gradient's dq part, written for real only by DQ, which reads a block's pair
 * before it overwrites it). So dq is never accumulated across key blocks in HBM nor across
 * cores: every output row is written once, by one unit, and the values do not depend on the
 * split (deterministic). The price is S and dP computed again in DQ: seven block products a
 * pair where FlashAttention-2's atomic dq adds need five.
 *
 * A unit's store is deferred into the next unit's body, after that unit's first loads, so the
 * in-order DMA queue loads the next unit while this one ends. Units of one block size make a
 * segment (the edge block's, then the full blocks'): a segment's first unit has no store
 * pending, and the segment's last store is emitted after it. */
#ifndef NPUSIM_KC_ATTN_ST_H
#define NPUSIM_KC_ATTN_ST_H

#include <stdbool.h>
#include <stdint.h>

#include "kc_attn.h"

typedef enum { KS_FWD, KS_LSE, KS_D, KS_DKV, KS_DQ } ks_kind;

/* The streamed plan of a kernel: block rows, unit sets, the split over the cores (the B x H
 * heads cut kmm_split_grid-wise into pr x pc blocks, each one's row blocks into rp parts: core
 * core0 + (head block) x rp + part), the largest phase's needs, and the cost model's cycles. */
typedef struct ks_plan {
    uint64_t T;
    unsigned nus;              /* unit sets: 2 (the next unit loads while this one runs) or 1 */
    uint64_t pr, pc, rp;
    uint64_t spad, acc;        /* bytes */
    unsigned regs;
    double est;                /* cycles of the busiest core, all phases */
} ks_plan;

/* The best streamed plan of a's kernel (operands checked; kind, causal, S, Dh, dtypes set)
 * with blocks of T rows (8 <= T <= S) in spad / accb free bytes, n_regs free registers and
 * n_cores cores. False when it does not fit: *need_spad, *need_acc then say what one unit set
 * needs; *why (may be NULL) a reason other than memory ("" when memory). */
bool ks_plan_make(const ka *a, uint64_t T, uint64_t spad, uint64_t accb, unsigned n_regs,
                  uint64_t n_cores, ks_plan *p, uint64_t *need_spad, uint64_t *need_acc,
                  const char **why);

/* Emits a's kernel on its placement's cores with plan p (a->T is p->T); adds the HBM bytes
 * its copies move to x->res and sets x->res->cores. Returns kc_status. */
np_status ks_compile(ka *a, const ks_plan *p);

/* ---- internal to kc_attn_st.c and kc_attn_stb.c ----------------------------------------- */

/* Operand roles of a phase: q, k, v, out (forward's output; backward's input), dout, lse,
 * the gradient's dq rows (backward: the (-lse, D) pairs, then dq) and its dk rows (dv
 * `part` bytes further). */
enum { KR_Q, KR_K, KR_V, KR_OUT, KR_DO, KR_LSE, KR_GQ, KR_GKV, KR_NROLE };

typedef struct ks_op {
    uint64_t base, off; /* off: from its group register's value */
    int64_t sb, sh;     /* bytes per b, per h */
    int64_t bstep;      /* bytes per block of T rows */
    int64_t srow;       /* bytes per row */
    bool unit;          /* the unit's operand (else streamed) */
    unsigned g, reg;    /* its group, that group's register */
    isa_dtype dt;
} ks_op;

/* Semaphores (all counting; the queues take them in program order). */
enum {
    KS_UFREE, KS_UFULL, KS_UFULL2, KS_SFREE, KS_SFULL, KS_SFREE2, KS_SFULL2, KS_KFREE, KS_KFULL,
    KS_VFREE, KS_VFULL, KS_TFREE, KS_TFULL, KS_T2FULL, KS_PFREE, KS_PFULL, KS_PVFREE, KS_PVFULL,
    KS_XFREE, KS_XFULL, KS_OFULL, KS_LFREE, KS_NSEM
};

typedef struct ks ks;
struct ks {
    const ka *a;
    kc_ctx *x;
    kce *c;                      /* the emitter's counters (NULL while planning) */
    ks_kind kind;
    const ks_plan *p;
    uint64_t T, nq, edge, Dh, e, oe, t;
    bool causal, f32, packed_ld; /* packed_ld: the (-lse, D) pairs of a block packed at its
                                    first dq row (its dq rows contiguous), else in each row */
    int at[KR_NROLE];            /* role -> op index, -1 when absent */
    int n_op;
    ks_op op[KR_NROLE];
    unsigned n_grp;
    uint64_t gbase[KR_NROLE];
    int64_t gsb[KR_NROLE], gsh[KR_NROLE], gbstep[KR_NROLE];
    bool gunit[KR_NROLE];
    unsigned greg[KR_NROLE];
    /* scratchpad: unit sets, stream sets (offsets of their buffers inside a set), the rest */
    uint64_t us[2], ss[2];
    uint64_t u_q, u_k, u_v, u_o, u_do, u_lse, u_ld;
    uint64_t s_k, s_v, s_p, s_al, s_q, s_do, s_ld;
    uint64_t f_s, f_pv, f_o, f_lst, f_m, f_l, f_mc, f_lc, f_nm, f_dp, f_pt, f_ds, f_maskf,
        f_maskb, f_one;
    uint64_t a_s, a_pv, a_dp, a_dk, a_dv, a_dq;
    unsigned rU, rU2, rA, rB, rT, rOst, rLst;
    unsigned sem[KS_NSEM];
    uint64_t seg_rows;           /* the rows of the current segment's blocks */
    uint64_t cur_r, cur_n;       /* the unit being emitted: its block, its streamed blocks */
    void (*unit)(ks *s, uint64_t r, bool pending);
    void (*store)(ks *s, uint64_t rows);
};

/* The scratchpad and accumulator layout of s's kind with s->T and nus unit sets from
 * scratchpad offset base / accumulator offset acc; returns the scratchpad bytes, *accb the
 * accumulator's. The backward's (kc_attn_stb.c) for D, DKV, DQ. */
uint64_t ks_bwd_layout(ks *s, unsigned nus, uint64_t base, uint64_t acc, uint64_t *accb);

/* The cost model's cycles of one pair of blocks (T x T) of the backward kinds and of one
 * unit besides its pairs, bw the core's bytes a cycle of the HBM (kc_attn_stb.c). */
double ks_bwd_pair(const ks *s, double bw);
double ks_bwd_unit(const ks *s, double bw);

/* The cycles of HBM latency a group of `copies` copies pays (core.dma_outstanding of them in
 * flight at once). */
double ks_lat(const ks *s, unsigned copies);
/* The DMA's cycles for bytes in one group of `copies` copies: the bytes at the core's share bw
 * (bytes a cycle) of the HBM, and the group's latency. */
double ks_dma(const ks *s, double bytes, unsigned copies, double bw);

/* The backward's unit bodies and stores (kc_attn_stb.c), and its per-core setup and settle. */
void ks_bwd_bind(ks *s);
void ks_bwd_setup(ks *s);
void ks_bwd_settle(ks *s);

/* Shared emission helpers (kc_attn_st.c). */
isa_opnd ks_hbm(ks *s, int role, int64_t more);
void ks_wait(ks *s, isa_unit u, int sem, unsigned n);
void ks_signal(ks *s, isa_unit u, int sem, unsigned n);
/* The causal mask on the n x n diagonal block of fp32 scores at spad offset off (rows rs
 * bytes apart): queries x keys (keys_rows false) or keys x queries. */
void ks_mask(ks *s, uint64_t off, uint64_t n, uint64_t rs, bool keys_rows);
/* The t x t triangle of that mask at spad offset off: -inf where the key is after the query. */
void ks_build_mask(ks *s, uint64_t off, bool keys_rows);
/* vpu.fma / vpu.fexp: dst (odt) = [exp](a x b + c), a a packed rows x cols fp32 tile. */
void ks_fma(ks *s, isa_op op, isa_opnd dst, isa_opnd a, isa_opnd b, isa_bcast bb, isa_opnd c,
            isa_bcast cb, uint64_t rows, uint64_t cols, isa_dtype odt, isa_opnd sum);

#endif
