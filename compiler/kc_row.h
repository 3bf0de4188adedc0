/* kc_row.h — the schedule the row kernels share (internal to compiler/): softmax, the norms,
 * their gradients, the batch norms, cross-entropy, RoPE and the vector transposes work on
 * rows, a tile of TR rows at a time, double-buffered between the DMA and the vector unit
 * (kc_row.c).
 *
 * A kernel describes its streams — the tensors it reads or writes row by row, each `width`
 * elements of its dtype per row, `ld` bytes apart in HBM — and callbacks: a per-core
 * prologue (its constants and work buffers, sized by the chosen TR), the vector work of one
 * tile, optional DMA of its own beside each tile's loads and stores, and one before each
 * pass. kc_rows_emit splits the rows over the placed cores (a contiguous block each), chooses
 * TR (what fits the scratchpad with every stream's tile double-buffered, at most 65535, 16
 * tiles a core but tiles of at least 256 KiB when the rows allow), and emits per core
 *
 *   DMA  wait free[b]; every input stream's tile -> in[b]; signal full[b]       load(t)
 *   VPU  wait full[b]; wait ofree[b]; the tile's work; signal free[b], ofull[b]  work(t)
 *   DMA  wait ofull[b]; every output stream's tile -> HBM; signal ofree[b]       store(t)
 *
 * in the order load(0), then per tile load(t + 1), work(t), store(t) — so the DMA fetches the
 * next tile and stores the last while the vector unit works — with b alternating. The regular
 * part (every tile but the last one or two) is a loop over pairs of tiles stepping one
 * register per stream (and any registers the kernel asks to step per tile), so a kernel's
 * size does not grow with its rows. Every semaphore ends at zero and the DMA queue ends on
 * waits for its own copies. A plan may make several passes over its rows, each with streams
 * of its own (columns chunks of a wide row), reusing the buffers and semaphores: each pass
 * is the schedule above, and the next starts when its buffers are free.
 */
#ifndef NPUSIM_KC_ROW_H
#define NPUSIM_KC_ROW_H

#include "kernel.h"

#define KC_ROW_MAX_IN 4
#define KC_ROW_MAX_OUT 2
#define KC_ROW_MAX_XREG 4
#define KC_ROW_MAX_CORES 256 /* a100-cluster: 108 */
#define KC_ROW_MAX_LOOPS 4

/* A kernel's per-core part of its context (the cores' scratchpads need not be alike):
 * KC_ROW_PC(k, core) is core's element of k->pc[], k->core0 the placement's first core. */
#define KC_ROW_PC(k, core) (&(k)->pc[(core) - (k)->core0])

/* A stream of rows in HBM: row r (of the kernel's rows) at addr + r x ld, width elements;
 * with planes > 1, each row is `planes` such pieces pstride bytes apart (piece q of row r at
 * addr + q x pstride + r x ld), and a tile of R rows lies in the scratchpad plane by plane
 * (planes x R x width packed): the vector unit sees planes rows of R x width. */
typedef struct kc_row_stream {
    uint64_t addr;
    int64_t ld;       /* bytes between rows */
    isa_dtype dt;
    uint64_t width;
    uint64_t planes;  /* 0 or 1: one piece */
    int64_t pstride;
} kc_row_stream;

/* One tile as the kernel's work callback sees it. */
typedef struct kc_row_tile {
    uint32_t core;
    uint64_t rows;                    /* TR, or fewer for the last tile of a core */
    uint64_t in[KC_ROW_MAX_IN];       /* scratchpad: the input streams' tiles (packed rows) */
    uint64_t out[KC_ROW_MAX_OUT];     /* and the output streams' */
    unsigned xreg[KC_ROW_MAX_XREG];   /* the stepped registers (n_xreg) on this core ... */
    int64_t xoff[KC_ROW_MAX_XREG];    /* ... and the offset of this tile from them */
    unsigned pass;
    unsigned parity;                  /* the buffer set (0, 1) of the tile, for the kernel's */
    /* HBM: stream i's tile is at register reg + offset off (the hooks copy from there) */
    unsigned in_reg[KC_ROW_MAX_IN], out_reg[KC_ROW_MAX_OUT];
    uint64_t in_off[KC_ROW_MAX_IN], out_off[KC_ROW_MAX_OUT];
} kc_row_tile;

typedef struct kc_row_plan kc_row_plan;
struct kc_row_plan {
    uint64_t rows;
    unsigned n_in, n_out;
    kc_row_stream in[KC_ROW_MAX_IN], out[KC_ROW_MAX_OUT];
    uint64_t work_row_bytes; /* the kernel's scratchpad per tile row (work tiles, vectors) */
    uint64_t fixed_bytes;    /* and per core (constants), both allocated by its prologue */
    uint64_t tr;             /* rows per tile; 0: chosen */
    /* registers stepped by xstep bytes per row of a tile (for per-row vectors of the kernel's
     * own): allocated and set to 0 on each core before the prologue; tile t's vectors are at
     * xreg + xoff (KRW_AT) */
    unsigned n_xreg;
    int64_t xstep[KC_ROW_MAX_XREG];
    /* passes over the rows (1 when 0); before each, (optional) pass() may change the
     * streams' addresses, widths (at most the plan's first ones, which size the buffers) and
     * n_in / n_out (at most the first ones) for that pass: a row too wide for the
     * scratchpad is streamed in chunks of columns, one pass per chunk */
    unsigned n_pass;
    void (*pass)(kc_ctx *x, void *ctx, unsigned pass, kc_row_plan *p);
    /* (optional) each pass in loops that step where the streams start: n_loop dims
     * (outermost first) of loop_n[d] iterations each, stream i's start stepped by
     * loop_in[d][i] (loop_out[d][i]) bytes an iteration of dim d; the program holds the
     * pass once (pass() may change the loops too) */
    unsigned n_loop;
    uint64_t loop_n[KC_ROW_MAX_LOOPS];
    int64_t loop_in[KC_ROW_MAX_LOOPS][KC_ROW_MAX_IN], loop_out[KC_ROW_MAX_LOOPS][KC_ROW_MAX_OUT];
    /* (optional) per core before its tiles, with the block's rows [row0, row0 + rows) and TR;
     * xreg: the core's stepped registers */
    void (*prologue)(kc_ctx *x, void *ctx, uint32_t core, uint64_t row0, uint64_t rows,
                     uint64_t tr, const unsigned *xreg);
    void (*work)(kc_ctx *x, void *ctx, const kc_row_tile *t);
    /* (optional) more DMA of a tile: after its streams' loads (before full[b] is signalled),
     * and before its streams' stores (after ofull[b] is waited for) */
    void (*load_more)(kc_ctx *x, void *ctx, const kc_row_tile *t);
    void (*store_more)(kc_ctx *x, void *ctx, const kc_row_tile *t);
    uint64_t tr_max;         /* (optional) a bound of the kernel's on TR */
    uint64_t row_align;      /* (optional) the cores' blocks start at multiples of it */
    void *ctx;
    /* filled by kc_rows_emit */
    uint64_t tr_used;
    uint32_t cores_used;
};

/* Emits the schedule on every placed core (fewer when there are fewer rows than cores) and
 * adds the streams' bytes to x->res (hbm_read_bytes, hbm_write_bytes, cores); errors (a row
 * that does not fit the scratchpad, a stream too wide for one copy) through kc_fail. */
np_status kc_rows_emit(kc_ctx *x, kc_row_plan *p);

/* The largest TR kc_rows_emit could use on core for plan p (0: not even one row fits). */
uint64_t kc_rows_fit(const kc_ctx *x, const kc_row_plan *p, uint32_t core);

/* Rows of width elements (`what`: "elements", "classes") streamed in chunks: after chunks of *w
 * columns did not fit core's scratchpad, the next width to try, in *w: the most columns that
 * per_col bytes each leave room for beside fixed bytes, at most 65535. Fails through kc_fail
 * (NP_ERR_RANGE) when the width was the tiling's own `chunk` attribute (chunk != 0), or when
 * the new width would not be narrower than *w or not even one column fits. */
np_status kc_chunk_narrow(kc_ctx *x, uint32_t core, uint64_t chunk, uint64_t width,
                          const char *what, uint64_t fixed, uint64_t per_col, uint64_t *w);

/* ---- the kernels' common checks and vector steps --------------------------------------------- */

/* Rows x width of t seen as rows of its last dim: fails unless the last dim is packed and the
 * leading dims merge into one row stride. */
np_status kc_rows_of(kc_ctx *x, const kc_tensor *t, const char *what, uint64_t *rows,
                     uint64_t *width, int64_t *ld);

/* Whether a and b have the same shape. */
bool kc_same_shape(const kc_tensor *a, const kc_tensor *b);

/* Float dtypes the row kernels take (fp32, bf16, fp16). */
bool kc_is_float(nn_dtype t);

/* A scratchpad operand of the krw_* steps: an address, or register reg + off (KRW_AT). */
#define KRW_AT(reg, off) (((uint64_t)(reg) << 56) | (uint64_t)(off))

/* One vector instruction; scratchpad operands as addresses or KRW_AT. */
void krw_fma(kc_ctx *x, isa_op op, uint64_t dst, uint64_t a, uint64_t b, uint64_t c,
            uint64_t rows, uint64_t cols, isa_dtype dt, isa_dtype odt, isa_bcast bb,
            isa_bcast cb, int64_t sum); /* op: VPU_FMA or VPU_FEXP; sum < 0: none */
void krw_rdot(kc_ctx *x, uint64_t dst, uint64_t a, uint64_t b, uint64_t rows, uint64_t cols,
             isa_dtype dt, isa_dtype odt, isa_bcast bc);
void krw_binary(kc_ctx *x, isa_op op, uint64_t dst, uint64_t a, uint64_t b, uint64_t rows,
               uint64_t cols, isa_dtype dt, isa_bcast bc);
/* krw_scalar, krw_unary, krw_cast, krw_fill: n packed elements, any n (beyond the 16-bit
 * cols field: a tile of 32768-element rows and one row of the rest) */
void krw_scalar(kc_ctx *x, isa_op op, uint64_t dst, uint64_t a, float imm, uint64_t n,
               isa_dtype dt);
void krw_unary(kc_ctx *x, isa_op op, uint64_t dst, uint64_t src, uint64_t n, isa_dtype dt);
void krw_cast(kc_ctx *x, uint64_t dst, uint64_t src, uint64_t n, isa_dtype dt, isa_dtype sdt);
void krw_fill(kc_ctx *x, uint64_t dst, float v, uint64_t n, isa_dtype dt);
/* A dma.copy of n1 rows of n0 elements, strides as given (0: packed). */
void krw_copy(kc_ctx *x, isa_opnd dst, isa_opnd src, isa_dtype dt, uint64_t n0, uint64_t n1,
             int64_t ds1, int64_t ss1);
void krw_signal(kc_ctx *x, isa_unit u, unsigned s);
void krw_wait(kc_ctx *x, isa_unit u, unsigned s);

/* Scratchpad of the current core for n bytes (64-aligned), 0 after an error. */
uint64_t krw_alloc(kc_ctx *x, uint64_t n);

/* Loads n elements of dtype dt at HBM address addr into the scratchpad as fp32 at dst (a
 * staging buffer stage of n x size(dt) bytes when dt is not fp32), ordered before the vector
 * unit's next instructions by a semaphore: the per-core constants (gamma, beta). */
void krw_load_f32(kc_ctx *x, uint64_t dst, uint64_t stage, uint64_t addr, uint64_t n,
                 isa_dtype dt);

/* ---- `npusim kernel --op` ------------------------------------------------------------------- */

/* The value of key name of a parsed spec (NULL when absent). */
const kc_spec_val *kc_spec_find(const kc_spec *s, const char *name);

/* The keys of an op of one input and one output of the same shape and dtype: shape=AxBx...
 * dtype=...; kc_spec_unary builds it with fresh operands (in "X", out "Y"). */
extern const kc_attr_def kc_unary_keys[];
#define KC_UNARY_N_KEYS 2
np_status kc_spec_unary(kc_prog *p, const kc_spec *s, kc_kernel *k, np_err *err);
/* A fresh dense operand in p's HBM named name. */
np_status kc_spec_tensor(kc_prog *p, const char *name, nn_dtype dt, int ndim,
                         const int64_t *shape, kc_tensor *t, np_err *err);

#endif
