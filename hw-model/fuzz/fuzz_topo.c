/* fuzz_topo.c — libFuzzer harness for SCALE-Sim topology CSV files (mxu_topology_parse). The
 * input is a topology file. It must parse or fail with a bad-input error and a message naming
 * the file; a topology that parses has layers whose names are UTF-8 without control
 * characters and whose GEMMs have every dimension >= 1, and the timing model accepts each. */
#include <string.h>

#include "fuzz_harness.h"
#include "mxu_timing.h"
#include "mxu_topo.h"
#include "parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    mxu_topology t;
    np_err e = {0};
    np_status st = mxu_topology_parse((const char *)data, size, "fuzz.csv", &t, &e);
    if (st != NP_OK) {
        fuzz_check_failure(st, &e);
        if (strcmp(e.file, "fuzz.csv") != 0)
            abort();
        return 0;
    }
    if (!t.n || t.n > MXU_TOPO_MAX_LAYERS)
        abort();
    mxu_array arr = {32, 32, ARCH_DATAFLOW_WS, false, false};
    for (size_t i = 0; i < t.n; i++) {
        const mxu_layer *l = &t.layers[i];
        size_t len = strlen(l->name);
        if (np_utf8_invalid_at(l->name, len) != len || !l->m || !l->n || !l->k)
            abort();
        for (size_t c = 0; c < len; c++)
            if ((unsigned char)l->name[c] < 0x20)
                abort();
        mxu_timing tm;
        st = mxu_gemm_timing(&arr, l->m, l->n, l->k, &tm, &e);
        if (st != NP_OK && st != NP_ERR_RANGE)
            abort(); /* only a product past 64 bits is refused */
    }
    mxu_topology_free(&t);
    return 0;
}
