/* kgen_matmul.h — standalone matmul and convolution programs, for `npusim layer` and tests.
 *
 * C[M][N] = A[M][K] x B[K][N], all row-major in HBM (.bss symbols A, B, C), as one program:
 * the matmul kernel of the kernel ABI (compiler/kernel.h, kc_matmul.c: tiled, double-buffered,
 * its regular part as loops) on cores 0 .. cores-1, then halt. The output is cut into TM x TN
 * tiles (edge tiles smaller), each computed over TK-deep K slices that alternate between two
 * scratchpad buffer sets, so the DMA engine fetches slice l + 1 while the array multiplies
 * slice l:
 *
 *   per tile (i, j), per slice l (buffer b):
 *     DMA:  wait free[b] -> dma.copy A slice, B slice -> signal full[b]
 *     MXU:  wait full[b] -> mxu.load B slice -> mxu.mm (set on l = 0, else accum) ->
 *           signal free[b]
 *   then MXU: wait cfree -> mxu.drain to scratchpad C -> signal cfull; DMA: wait cfull ->
 *   store the C tile -> signal cfree.
 *
 * A convolution (kgen_conv_build) is the conv2d kernel: the same schedule with implicit
 * im2col, each tile row's input rows staged once in the scratchpad and each A slice gathered
 * from them by strided dma.copy.
 * The text these return is the program's disassembly (isa_disasm).
 */
#ifndef NPUSIM_KGEN_MATMUL_H
#define NPUSIM_KGEN_MATMUL_H

#include <stdint.h>

#include "arch.h"
#include "err.h"
#include "isa.h"
#include "isa_prog.h"

typedef struct kgen_matmul {
    uint64_t m, n, k;     /* the GEMM */
    isa_dtype dtype;      /* of A and B, and of C except that int8 gives int32 C
                             (kgen_matmul_out_dtype); the accumulators are 4 bytes */
    uint64_t tm, tn, tk;  /* tile sizes; 0: chosen by kgen_matmul_tiles */
    uint64_t cores;       /* cores 0 .. cores-1 share the output tiles, each a block of tile
                             rows x tile columns with its own buffers; 0 means 1 */
} kgen_matmul;

/* The element type of C for inputs of type in: int32 for int8, else in. */
isa_dtype kgen_matmul_out_dtype(isa_dtype in);

/* Fills 0 tile sizes of *mm for cfg as the matmul kernel chooses them on an empty core
 * (kc_gemm_tiles, compiler/kc_matmul.h): the dimension the dataflow streams through time
 * (os: K, ws: M, is: N) gets the largest tile the accumulator SRAM (TM x TN x 4 bytes) and the
 * double-buffered scratchpad (2 x (TM x TK + TK x TN) + TM x TN elements, C's in its own type)
 * allow; the two spatial ones min(dim, 4 x the array side they map to). With cores > 1, the
 * larger of TM and TN (those not given) is halved until there are at least as many output
 * tiles as cores. NP_ERR_RANGE when a dimension is 0 or the tiles cannot fit (the message
 * says which memory); *mm is unchanged on failure. */
np_status kgen_matmul_tiles(const arch_config *cfg, kgen_matmul *mm, np_err *err);

/* The program for *mm on cfg (tile sizes chosen as above when 0) in *prog (when not NULL) and
 * its disassembly in *text (malloc'd). The cores share the output tiles as blocks of tile rows
 * x tile columns. NP_ERR_RANGE (shape, tiles, HBM too small, more cores than the chip has),
 * NP_ERR_NOMEM; outputs are NULL on failure. */
np_status kgen_matmul_build(const arch_config *cfg, const kgen_matmul *mm, char **text,
                            isa_program **prog, np_err *err);

/* A convolution with ordinary semantics: no padding (pad the input yourself), output
 * E = (H - R) / stride + 1 by F = (W - S) / stride_w + 1. NHWC input X (H x W x C), filters B
 * laid out [(r, s, c)][filter], output C = [(oh, ow)][filter]. */
typedef struct kgen_conv {
    uint64_t h, w, c;   /* input */
    uint64_t r, s;      /* filter */
    uint64_t filters;   /* output channels */
    uint64_t stride;    /* vertical stride (and horizontal when stride_w is 0) */
    isa_dtype dtype;
    uint64_t cores;     /* as kgen_matmul.cores: blocks of output tiles, each core gathers
                           its own A slices */
    uint64_t stride_w;  /* horizontal stride; 0: stride */
    uint64_t tm, tn, tk; /* tiles of the GEMM; 0: chosen by kgen_conv_tiles */
} kgen_conv;

/* The GEMM of a convolution: M = E x F, N = filters, K = R x S x C (tiles copied from *cv,
 * not chosen). NP_ERR_RANGE for a zero dimension or a filter larger than the input. */
np_status kgen_conv_gemm(const kgen_conv *cv, kgen_matmul *mm, np_err *err);

/* The GEMM of *cv with its tiles filled as kgen_conv_build uses them: kgen_matmul_tiles, then,
 * when not given, the dimension the dataflow streams through time is cut on window
 * boundaries without adding tiles — ws: TM = ceil(E / ceil(M / TM)) x F output pixels (whole
 * output rows) if that is <= TM; os: TK = ceil(R / ceil(K / TK)) x S x C (whole filter rows)
 * if that is <= TK. The spatial tiles stay as kgen_matmul_tiles chose them (whole folds).
 * Errors as kgen_conv_gemm and kgen_matmul_tiles. */
np_status kgen_conv_tiles(const arch_config *cfg, const kgen_conv *cv, kgen_matmul *mm,
                          np_err *err);

/* A convolution as one kernel (named conv) with implicit im2col: the tiled,
 * double-buffered matmul above with tiles from kgen_conv_tiles, except that each tile row's
 * input rows are staged from X (symbol X, NHWC) into the scratchpad once and each A slice
 * (rows: the tile's output pixels; columns: the slice's part of the (r, s, c) window) is
 * gathered from them into its buffer: one strided dma.copy per (piece of the M tile, filter
 * row the K slice touches), where a piece is a partial output row (n0 = the run of (s, c)
 * within that filter row, n1 = pixels, src_s1 = stride_w x C) or a run of whole output rows
 * (n2 = rows), or one per output row for whole filter rows (docs/hw-model.md). No A operand
 * exists in HBM: HBM reads are the staged rows and the filters (symbol B), writes only C.
 * Errors as kgen_matmul_build, plus NP_ERR_RANGE when a gather's counts or strides exceed
 * the ISA's fields. */
np_status kgen_conv_build(const arch_config *cfg, const kgen_conv *cv, char **text,
                          isa_program **prog, np_err *err);

#endif
