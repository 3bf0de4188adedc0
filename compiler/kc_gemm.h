/* kc_gemm.h — the GEMM schedule shared by matmul and conv2d (internal to compiler/): its plan,
 * built by kc_matmul.c from a kernel, emitted by kc_gemm_emit.c and estimated by
 * kc_gemm_cost.c. */
#ifndef NPUSIM_KC_GEMM_H
#define NPUSIM_KC_GEMM_H

#include <stdbool.h>
#include <stdint.h>

#include "kc_emit.h"
#include "kc_matmul.h"
#include "kernel.h"


typedef enum { KMM_A_ROWS, KMM_A_COLS, KMM_A_CONV } kmm_akind;

/* A convolution's geometry as the schedule needs it (kc_conv.c plans it; elements unless
 * said). Per tile row the input rows its output rows need are staged in the scratchpad (the
 * block): zero-padded on every side, channels-last ([row][column][channel]) for an NHWC
 * input, channel-major ([channel][row][column]) for an NCHW one; the A slices are gathered
 * from the block by scratchpad-to-scratchpad dma.copy. K runs over the filter window in the
 * input's order — (r, s, c) channels-last, (c, r, s) channel-major — and is cut into runs:
 * elements of K contiguous in the block for one output pixel (an (s, c) row of the window,
 * or with a dilation a c run, channels-last; an s run, or single elements, channel-major). */
typedef struct kmm_conv {
    uint64_t h, w, c;        /* input height, width; channels of one group */
    uint64_t ctot;           /* channels of the whole input (every group) */
    uint64_t r, s;           /* filter height and width */
    uint64_t sh, sw, dh, dw, ph, pw; /* strides, dilations, zero padding (rows, columns) */
    uint64_t e_out, f_out;   /* output rows; output pixels a row */
    bool cm;                 /* channel-major (NCHW) input */
    uint64_t unit, runs;     /* elements of a run; runs in K */
    uint64_t rb, wp, wcopy;  /* the block: rows (the most a tile row needs), columns (padded),
                                input columns copied into it (after pw zero columns) */
    uint64_t pix_step, row_step; /* block elements from one output pixel / row to the next */
    uint64_t xrow, xchan;    /* HBM bytes from one input row / channel to the next */
    /* this core's block, the register the gathers address it with (stepped by the K
     * loop), and the semaphores of its staging */
    uint64_t sb;
    unsigned rG, s_fence, s_zf, s_zd, s_init;
    int64_t kstep;           /* block bytes from one K slice's runs to the next's (loops) */
} kmm_conv;

/* Element offset in the block of run u's first element for the block's first output row's
 * pixel 0. */
uint64_t kmm_run_base(const kmm_conv *g, uint64_t u);
/* Rows of the block of a tile row of tm pixels starting at pixel i0, and the most for any
 * tile row of tm pixels. */
uint64_t kmm_block_rows(const kmm_conv *g, uint64_t i0, uint64_t tm);
uint64_t kmm_block_rows_max(const kmm_conv *g, uint64_t tm);
/* Scratchpad bytes of the block for tiles of tm pixels (e: element size). */
uint64_t kmm_stage_bytes(const kmm_conv *g, uint64_t tm, uint64_t e);

/* An operand of the epilogue: where its tile for output tile (i0, j0) comes from. */
typedef struct kmm_arg {
    uint64_t base;       /* HBM address of the element for output (0, 0) of batch 0 */
    int64_t sbat[3];     /* bytes per batch index of each batch loop */
    int64_t sm, sn;      /* bytes per output row / column (0: broadcast) */
    isa_dtype dt;
    isa_bcast bcast;     /* how the VPU reads the loaded tile */
    bool cast;           /* loaded in dt, converted to the output's type (or fp32 for a bias) */
    unsigned reg;
    uint64_t raw, buf;   /* scratchpad: as loaded, and converted (== raw without a cast) */
} kmm_arg;

/* One vector step of the epilogue on the drained C tile. */
typedef struct kmm_step {
    isa_op op;
    int arg;   /* index into args, or -1 */
    float imm; /* VPU_MULS */
} kmm_step;

#define KMM_MAX_BATCH 3
#define KMM_MAX_KSPLIT 16 /* cores sharing one block's K */

typedef struct kmm {
    kc_ctx *x;
    uint64_t M, N, K, TM, TN, TK;
    isa_dtype dt, cdt;
    uint64_t e, ce;
    kmm_akind ak;
    bool b_cols;             /* B is stored column-major (N rows of K) */
    bool c_cols;             /* C is stored column-major (N rows of M): ldc steps j */
    /* Transposed: the array computes C^T = B^T A^T: it holds A's slice (mxu.load, tk x tm)
     * and streams B^T's (tn rows of tk), so the streamed dimension is N; the accumulator
     * tile is tn x tm. A row-major B is transposed by the VPU (staging buffers). */
    bool ct;
    /* Reuse: a tile row's A rows (tm x this core's K, row-major A) are loaded into the
     * scratchpad once, at the row's start, and every tile of the row multiplies them there
     * (the slab, addressed by rS), instead of loading A's slice with each B slice. */
    bool reuse;
    unsigned rS;
    uint64_t slab;
    uint64_t a_base, b_base, c_base;
    int64_t lda, ldb, ldc;   /* bytes between rows: A (ROWS: i, COLS: k), B (k, or n), C (i,
                                or j when c_cols) */
    int nb;                  /* batch loops */
    uint64_t bcount[KMM_MAX_BATCH];
    int64_t bsa[KMM_MAX_BATCH], bsb[KMM_MAX_BATCH], bsc[KMM_MAX_BATCH];
    kmm_conv cv;
    bool m_regular, k_regular; /* rows of full tiles / pairs of full slices can loop */
    /* the epilogue: the drain's fused part, then vector steps */
    isa_act act;
    float scale;
    int bias;                /* arg index of the drain's bias, or -1 */
    int n_args, n_steps;
    kmm_arg args[KC_MAX_EPI];
    kmm_step steps[KC_MAX_EPI];
    /* this core's resources */
    unsigned rA, rB, rC;
    unsigned s_full[2], s_free[2], s_staged[2], s_cfull, s_cfree, s_drained, s_eready, s_braw,
        s_bready;
    uint64_t abuf[2], bbuf[2], stage[2], bstage[2], cbuf, tbuf, sbuf, acc;
    /* the copies' emitter (kc_emit.h): HBM traffic counted as emitted times the enclosing
     * loops' counts */
    kce em;
    /* K split over pk cores per block of tiles (1: none). This core's K range [kb, kb + kl);
     * kpart 0: no split, 1: the block's root (receives and adds the partial sums, then
     * stores), 2: another core of the block (sends its partial sums to kroot). */
    uint64_t pk, kb, kl;
    int kpart;
    uint32_t kroot, kpeers[KMM_MAX_KSPLIT];
    unsigned n_kpeers, tag;
    unsigned s_pready, s_pfree, s_reduced;
    uint64_t pbuf;             /* the fp32 partial-sum tile */
    /* a global buffer (chip.l2_mode buffer): A's and B's slices are read from their copies
     * staged in it (kmm_gbuf_plan), whose reads are counted in gb_rd, not the HBM's */
    bool a_gb, b_gb;
    uint64_t gb_rd;
    /* how the epilogue's operands map onto the output (kc_matmul.c, plan_epilogue) */
    struct {
        int nd, nbd, mdim, ndim, mouter;
        int bdims[KMM_MAX_BATCH];
        int64_t bmul[KMM_MAX_BATCH]; /* indices of dim bdims[b] per batch index (groups) */
        int64_t ratio;
    } eg;
} kmm;

/* The VPU work of the schedule (kc_matmul.c plans it so; kc_gemm_emit.c emits it, the cost
 * model prices it): a slice's transposes (a column-major A streamed, a row-major B streamed
 * under ct), and after the drain the C tile's transposes — into C's orientation for the
 * epilogue's vector steps, and into the stored orientation. */
static inline bool kmm_a_transposed(const kmm *m) { return !m->ct && m->ak == KMM_A_COLS; }
static inline bool kmm_b_transposed(const kmm *m) { return m->ct && !m->b_cols; }
/* Transposes of the drained tile: before the vector steps (the accumulators hold C^T) and
 * before the store (the orientation then differs from C's layout). */
static inline unsigned kmm_c_transposes(const kmm *m)
{
    bool t = m->ct; /* the orientation of the tile: true = C^T */
    unsigned n = 0;
    if (m->n_steps && t)
        n++, t = false;
    if (t != m->c_cols)
        n++;
    return n;
}
/* The drain is followed by VPU work on the tile. */
static inline bool kmm_vpu_after_drain(const kmm *m)
{
    return m->n_steps || kmm_c_transposes(m);
}

/* The representative position of a body: batch byte offsets and output tile origin. */
typedef struct kmm_pos {
    int64_t oa, ob, oc, oarg[KC_MAX_EPI];
    uint64_t i0, j0;
} kmm_pos;

/* The planning kc_matmul.c shares with kc_conv.c: the tiles and the schedule's variant
 * chosen by the cost model (plan_tiles), the result's flops and schedule text. */
np_status kmm_plan_tiles(kmm *m);
void kmm_plan_result(kmm *m, uint64_t batches);

/* The framework reference's result (kc_kernel_def.reference): out[0] = t, or the graph's
 * error. The value of `--op` key name (0 when the op declares none). */
np_status kmm_ref_status(nn_graph *g, nn_tensor **out, nn_tensor *t, np_err *err);
int64_t kmm_spec_i(const kc_spec *s, const char *name);

/* The tiling attributes of the GEMM kernels. */
#define KMM_TILE_ATTRS                                                                          \
    {"tm", KC_ATTR_INT, 0, 0, 65535, "tile: output tile rows (0: the cost model's)"},          \
    {"tn", KC_ATTR_INT, 0, 0, 65535, "tile: output tile columns (0: the cost model's)"},       \
    {"tk", KC_ATTR_INT, 0, 0, 65535, "tile: K slice depth (0: the cost model's)"},              \
    {"ksplit", KC_ATTR_INT, 0, 0, 16, "tile: cores sharing one block of tiles' K, their "       \
     "partial sums added over the mesh (0: the cost model's, 1: none)"},                        \
    {"ct", KC_ATTR_INT, 0, 0, 2, "tile: 2 computes C^T = B^T A^T (the array holds A and "       \
     "streams B^T: N streams through it instead of M), 1 C = A B, 0 the cost model's choice"}, \
    {"reuse", KC_ATTR_BOOL, 0, 0, 1, "tile: 1 keeps a tile row's A rows in the scratchpad "      \
     "across its tiles (a row-major A, no split K; the tuner's choice: the cost model prices "  \
     "the plain schedule)"}

/* Emits the plan on the placed cores (one block of the tile grid each, or with m->pk > 1 pk
 * cores a block, each over its part of K), filling the kernel's result (cores, HBM bytes).
 * Returns kc_status. */
np_status kmm_emit(kmm *m);

/* A core's part of the work: batches [b0, b1) of the outermost batch loop, tile rows
 * [r0, r1) and tile columns [c0, c1). */
typedef struct kmm_part {
    uint64_t b0, b1, r0, r1, c0, c1;
} kmm_part;

/* The tile grid (rows x cols tiles) cut into *pr x *pc blocks for up to `cores` cores: the
 * split with the fewest tiles on the busiest core, then the fewest blocks. */
void kmm_split_grid(uint64_t rows, uint64_t cols, uint64_t cores, uint64_t *pr, uint64_t *pc);

/* The batches (of the outermost batch loop) x tile rows x tile columns cut into *pb x *pr x
 * *pc blocks for up to `cores` cores: the split with the fewest tiles on the busiest core,
 * then (with an L2 cache on cfg's chip; cfg may be NULL) the least HBM traffic by kmm_l2_hbm,
 * then the fewest blocks. kmm_part_of gives block blk's part (blocks in batch, row, column
 * order); kmm_block is block i of n of [0, total), as even as possible, the larger first. */
void kmm_split(const kmm *m, const arch_config *cfg, uint64_t cores, uint64_t *pb, uint64_t *pr,
               uint64_t *pc);

/* The bytes of the kernel's operands, each once: A (a convolution's input), B and C, over
 * the batch loops each steps through. */
void kmm_operand_bytes(const kmm *m, uint64_t *a, uint64_t *b, uint64_t *c);

/* What reaches the HBM through an L2 cache of chip.l2_bytes when the tiles are split pr x pc
 * (docs/compiler.md "The L2"): cores walk their blocks in step, tile by tile along a row, so
 * the cores of a block row read the same A band at once (one fill) and those of a block
 * column the same B band. A core's next tile reuses its A band a tile later, its next row its
 * B band bc tiles later (bc: the block's columns): a band stays when what all cores read in
 * between — per tile pr A bands, pc B bands (over K) and pr x pc C tiles — fits the L2, and
 * is read again for every tile (A) or every row (B) of the block when it does not. So A x (1
 * or bc) + B x (1 or br) + C, each operand once when everything fits. */
double kmm_l2_hbm(const kmm *m, const arch_config *cfg, uint64_t pr, uint64_t pc);

/* With a global buffer (chip.l2_mode buffer) instead: which of A and B the GEMM stages in it
 * (docs/compiler.md "The L2"): the operand that more tiles read first (A by every tile column,
 * B by every tile row), each if several tiles read it and it fits what the buffer has left;
 * not a convolution's A (staged per tile row in the scratchpad already), nor batched GEMMs.
 * kmm_l2_hbm then counts a staged operand once and another for every tile that reads it. */
void kmm_gbuf_plan(const kmm *m, const arch_config *cfg, bool *stage_a, bool *stage_b);
void kmm_part_of(const kmm *m, uint64_t pb, uint64_t pr, uint64_t pc, uint64_t blk,
                 kmm_part *pt);
void kmm_block(uint64_t total, uint64_t n, uint64_t i, uint64_t *lo, uint64_t *hi);

/* The pieces of the M tile [i0, i0 + tm) of a convolution with F output pixels a row: each a
 * partial output row or a run of whole rows; with fn non-NULL, called per piece. Returns
 * their count. */
uint64_t kmm_tile_pieces(uint64_t F, uint64_t i0, uint64_t tm,
                         void (*fn)(void *, uint64_t, uint64_t, uint64_t), void *ctx);

/* The scratchpad copies emit_gather makes for the A slice of tile rows [i0, i0 + tm), K
 * columns [k0, k0 + tk) of a convolution. */
uint64_t kmm_gather_count(const kmm_conv *g, uint64_t i0, uint64_t tm, uint64_t k0, uint64_t tk);

/* The cost model (kc_gemm_cost.c) of the plan with its tiles m->TM, TN, TK on n_cores. */
typedef struct kmm_est {
    uint64_t cycles;                 /* the kernel's (the busiest core's, and no less than all
                                        HBM bytes at the HBM's bandwidth) */
    uint64_t mxu_cycles, dma_cycles; /* the busiest core's array and DMA time */
    uint64_t hbm_bytes;              /* all cores */
    uint64_t cores;                  /* cores with work */
} kmm_est;
void kmm_estimate(const kmm *m, const arch_config *cfg, uint64_t n_cores, kmm_est *out);

/* Array cycles of one mxu.mm of m x n x k of dt (hw-model/mxu_timing.h's formula; a test
 * checks that they agree). */
uint64_t kmm_array_cycles(const arch_config *cfg, isa_dtype dt, uint64_t m, uint64_t n,
                          uint64_t k);

/* Its fold schedule (mxu_timing.h's mxu_sched, the streamed term at the dtype's rate):
 * cycles = lead + (folds - 1) x period + tail. */
typedef struct kmm_sched {
    uint64_t folds, stream, lead, period, tail, cycles;
} kmm_sched;
void kmm_array_sched(const arch_config *cfg, isa_dtype dt, uint64_t m, uint64_t n, uint64_t k,
                     kmm_sched *out);

/* Cycles from one fold's stream start (t_prev long) to the next one's (t_next long):
 * mxu_timing.h's mxu_fold_gap for cfg's array (a test checks that they agree). */
uint64_t kmm_fold_gap(const arch_config *cfg, uint64_t t_prev, uint64_t t_next);

/* The ranking of the tile search (kc_gemm_cost.c): the plan's cycles in closed form — each
 * tile at the pace of its slowest resource (slices at the slower of load and multiply, then
 * the drain; the DMA's loads and store; the drain, VPU and store chain), per tile row the
 * first load (and a convolution's staging), the busiest core at an equal share of the HBM,
 * and no less than all bytes at the HBM's bandwidth. Cheap enough for every candidate, and
 * blind to what only stepping the queues shows (kmm_estimate): the tuner simulates its best
 * candidates. */
uint64_t kmm_quick(const kmm *m, const arch_config *cfg, uint64_t n_cores);

/* The best tilings by the ranking (kmm_quick) among the candidates (sizes already in
 * m->TM/TN/TK kept, 0 ones searched; K split over m->pk cores per block) that fit spad
 * scratchpad and acc accumulator bytes, merged into best[0 .. *n) (at most max_best, fewest
 * cycles first). m's tiles are left changed. */
typedef struct kmm_cand {
    uint64_t tm, tn, tk, pk, cycles; /* cycles: the ranking's */
    bool ct, reuse;
} kmm_cand;
void kmm_search(kmm *m, const arch_config *cfg, const kc_gemm_shape *g, uint64_t spad,
                uint64_t acc, uint64_t n_cores, kmm_cand *best, unsigned *n, unsigned max_best);

static inline uint64_t kmm_min(uint64_t a, uint64_t b) { return a < b ? a : b; }
static inline uint64_t kmm_cdiv(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

#endif
