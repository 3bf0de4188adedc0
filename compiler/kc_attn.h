/* kc_attn.h — the plan of the fused attention kernels (internal to compiler/): kc_attn.c
 * checks the operands, lays out the scratchpad, walks the heads and emits the forward
 * (attention, attention_lse); kc_attn_bwd.c emits the backward (attention_grad). */
#ifndef NPUSIM_KC_ATTN_H
#define NPUSIM_KC_ATTN_H

#include <stdbool.h>
#include <stdint.h>

#include "kc_emit.h"
#include "kernel.h"

#define KA_MAX_OP 8    /* HBM operands of one kernel */
#define KA_MASK_T 32u  /* side of the causal mask's sub-tiles */

typedef enum { KA_FWD, KA_LSE, KA_BWD } ka_kind;

/* An HBM operand as the loops see it: head (b, h) at base + b x sb + h x sh; rows along S
 * srow bytes apart; reg holds the current head's address of its group (operands with the
 * same steps share one), off is its distance from it. */
typedef struct ka_opnd {
    uint64_t base, off;
    int64_t sb, sh, srow;
    int64_t step;     /* per query block (forward outputs) or key block (backward outputs) */
    unsigned reg;
    isa_dtype dt;
} ka_opnd;

/* Operand indices. */
enum { KA_Q, KA_K, KA_V, KA_O, KA_DO, KA_LSE_IN, KA_GRAD };      /* backward */
enum { KA_FOUT = 3, KA_FLSE = 4 };                             /* forward out, lse */
enum { KA_LLSE = 2 };                                          /* lse only: its output */

typedef struct ka {
    kc_ctx *x;
    kce c;
    ka_kind kind;
    bool causal, dbuf; /* dbuf: two heads resident, the next one prefetched */
    uint64_t B, H, S, Dh, T, t;
    float scale;
    isa_dtype dt, odt; /* the inputs' type, the outputs' (lse: fp32) */
    uint64_t e, oe;
    int n_in, n_op;
    ka_opnd op[KA_MAX_OP];
    int64_t part;      /* backward: bytes from dq to dk to dv in the output */
    /* scratchpad: residency sets, the block buffers (two sets forward), output staging */
    uint64_t res[2], res_sz;
    uint64_t rq, rk, rv, ro, rdo, rlse, rdd;       /* offsets in a residency set */
    uint64_t sbk[2], sbk_sz;
    uint64_t bs, bp, bpv, bal, bdp, bds, bdsn;     /* offsets in a block set */
    uint64_t obk[2], obk_sz;
    uint64_t o_off, m_off, l_off, mc_off, lc_off, mask, one_off; /* one_off: fp32 1.0 */
    uint64_t RS;       /* row stride of the fp32 score tiles: T x 4 */
    uint64_t acc_s, acc_pv, acc_dp, acc_dk, acc_dv, acc_dq;
    /* registers */
    unsigned rRes, rRes2, rQb, rKj, rCur, rPrev, rOo, rOo2, rT, rLi, rDQ;
    /* semaphores (all counting: queues take them in program order) */
    unsigned s_kvfree, s_kvfull, s_sfull, s_pfull, s_pvfull, s_ofree, s_ofull, s_dpfull,
        s_dsready, s_dready, s_hdone, s_dqfull;
} ka;

static inline uint64_t ka_cdiv(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

/* The scratchpad / accumulator bytes of the backward with blocks of T (two residency sets
 * when dbuf), and its layout from absolute scratchpad offset base and accumulator offset
 * acc (kc_attn_bwd.c). */
uint64_t ka_bwd_spad(const ka *a, uint64_t T, bool dbuf);
uint64_t ka_bwd_acc(const ka *a, uint64_t T);
void ka_bwd_place(ka *a, uint64_t base, uint64_t acc);

/* Shared pieces (kc_attn.c): the causal diagonal's mask on the n x n block of fp32 scores at
 * reg + off, and a head's inputs loaded into residency set reg (hoff: each operand's offset
 * from its register for this head). */
void ka_mask_diag(ka *a, unsigned reg, uint64_t off, uint64_t n);
void ka_load_head(ka *a, const int64_t *hoff, unsigned reg);
isa_opnd ka_hbm(ka *a, int i, int64_t hoff, int64_t more);

/* One head of the backward (kc_attn_bwd.c), its inputs resident at rRes. */
void ka_bwd_head(ka *a, const int64_t *hoff);

#endif
