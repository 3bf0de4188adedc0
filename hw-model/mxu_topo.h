/* mxu_topo.h — SCALE-Sim topology files: the layers of a single-layer study.
 *
 * A CSV file whose first line is a header (ignored). Every other non-empty line is one layer,
 * its fields separated by commas (a trailing comma, as SCALE-Sim writes, is allowed):
 *
 *   name, M, N, K                                   a GEMM (SCALE-Sim's `-i gemm` files)
 *   name, H, W, R, S, C, filters, stride [, stride_w]   a convolution (SCALE-Sim's conv files)
 *
 * The kind is decided per line by the number of fields. As in SCALE-Sim, a convolution whose
 * name contains "DP" is depthwise: it becomes C layers named "<name>Channel_<i>", each with
 * one channel and the same filters. Layers map to GEMMs with mxu_conv_gemm (no padding); a
 * convolution layer also keeps its shape (for a depthwise channel, with one channel).
 */
#ifndef NPUSIM_MXU_TOPO_H
#define NPUSIM_MXU_TOPO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "mxu_timing.h"

#define MXU_TOPO_NAME_MAX 96
#define MXU_TOPO_MAX_LAYERS 100000
#define MXU_TOPO_MAX_FILE_BYTES (64ull << 20)

typedef struct mxu_layer {
    char name[MXU_TOPO_NAME_MAX];
    uint64_t m, n, k; /* the GEMM */
    bool is_conv;     /* a convolution row (conv below); else a GEMM row */
    mxu_conv conv;    /* the convolution as written (channels 1 for a depthwise channel) */
} mxu_layer;

typedef struct mxu_topology {
    mxu_layer *layers;
    size_t n;
} mxu_topology;

/* Parses text[0..len) (path names it in errors) into *out (free with mxu_topology_free).
 * NP_ERR_SYNTAX (file:line:col) for a line that is not 4, 8 or 9 fields, a field that is
 * not an integer or a name that is not UTF-8 without control characters (at most
 * MXU_TOPO_NAME_MAX - 1 bytes), NP_ERR_RANGE for a value outside 1 .. 2^32, an impossible
 * convolution or too many layers,
 * NP_ERR_MISSING for a file without layers, NP_ERR_NOMEM; *out is empty on failure. */
np_status mxu_topology_parse(const char *text, size_t len, const char *path, mxu_topology *out,
                             np_err *err);

/* mxu_topology_parse on the file at path (at most 64 MiB); NP_ERR_IO if it cannot be read or
 * is not a file. */
np_status mxu_topology_load(const char *path, mxu_topology *out, np_err *err);

void mxu_topology_free(mxu_topology *t);

#endif
