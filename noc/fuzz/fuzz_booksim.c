/* fuzz_booksim.c — libFuzzer harness for BookSim reference files (noc_ref_parse, what `npusim
 * noc --compare` reads). The input is a file. It must parse or fail with a bad-input error
 * naming the file; a file that parses gives a router the mesh accepts (mesh_params_check at
 * its smallest mesh) and points in the ranges noc_ref_parse promises. */
#include <string.h>

#include "fuzz_harness.h"
#include "mesh.h"
#include "traffic.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    noc_ref ref;
    np_err e = {0};
    np_status st = noc_ref_parse(text, size, "fuzz.csv", &ref, &e);
    free(text);
    if (st != NP_OK) {
        fuzz_check_failure(st, &e);
        if (strcmp(e.file, "fuzz.csv") != 0)
            abort();
        noc_ref_free(&ref);
        return 0;
    }
    mesh_params m = ref.mesh;
    m.kx = m.ky = 2;
    if (mesh_params_check(&m, &e) != NP_OK)
        abort(); /* every router the file can name is one the mesh builds */
    for (size_t i = 0; i < ref.n; i++) {
        const noc_ref_point *p = &ref.pts[i];
        if (p->k < 2 || p->k > 1024 || p->packet_flits < 1 || p->packet_flits > 1024 ||
            !(p->offered > 0 && p->offered <= 1))
            abort();
    }
    noc_ref_free(&ref);
    return 0;
}
