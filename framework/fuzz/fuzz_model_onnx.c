/* fuzz_model_onnx.c — libFuzzer harness for ONNX files (nn_model_load_onnx, then
 * nn_model_build through nn_onnx_build). The input is written to a file of this process's
 * and imported through the --model door: it must import or fail with a bad-input error whose
 * message names the file (the protobuf decoding is protobuf-c's on Debian's schema; what is
 * fuzzed is what npusim does with what it decodes: nesting, tensors, shapes, attributes). A
 * model that imports builds at batch 1, or fails the same way. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_harness.h"
#include "model.h"

static char path[64];

static void remove_input(void)
{
    unlink(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > (1 << 20))
        return 0;
    if (!path[0]) {
        snprintf(path, sizeof path, "/tmp/npusim_fuzz_onnx_%d.onnx", (int)getpid());
        atexit(remove_input);
    }
    FILE *f = fopen(path, "wb");
    if (!f)
        return 0;
    size_t wrote = fwrite(data, 1, size, f);
    if (fclose(f) != 0 || wrote != size)
        return 0;
    static nn_model_desc d;
    np_err e = {0};
    np_status st = nn_model_load(path, &d, &e);
    if (st == NP_OK) {
        nn_model m;
        nn_model_opts o = {.batch = 1};
        st = nn_model_build(&d, &o, &m, &e);
        if (st == NP_OK)
            nn_graph_free(m.g);
    }
    if (st != NP_OK) {
        fuzz_check_failure(st, &e);
        if (strcmp(e.file, path) != 0)
            abort(); /* an ONNX file's error names the file */
    }
    return 0;
}
