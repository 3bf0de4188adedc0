/* fuzz_scalecfg.c — libFuzzer harness for SCALE-Sim .cfg files (mxu_scalecfg_parse). The
 * input is a .cfg file. It must parse or fail with a bad-input error and a message naming the
 * file; a file that parses gives overrides that every apply to the default architecture
 * (arch_set): an out-of-range value is the file's error, with its line, never an internal
 * --set's. */
#include <string.h>

#include "arch.h"
#include "fuzz_harness.h"
#include "mxu_scalecfg.h"
#include "parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    mxu_scalecfg c;
    np_err e = {0};
    np_status st = mxu_scalecfg_parse((const char *)data, size, "fuzz.cfg", 1.0, &c, &e);
    if (st != NP_OK) {
        fuzz_check_failure(st, &e);
        if (strcmp(e.file, "fuzz.cfg") != 0)
            abort();
        return 0;
    }
    if (c.n_sets < 3 || c.n_sets > MXU_SCALECFG_MAX_SETS)
        abort();
    arch_config cfg;
    arch_defaults(&cfg);
    for (size_t i = 0; i < c.n_sets; i++)
        if (arch_set(&cfg, c.sets[i], &e) != NP_OK)
            abort(); /* every override is in range */
    size_t len = strlen(c.run_name);
    if (np_utf8_invalid_at(c.run_name, len) != len || strchr(c.run_name, '/'))
        abort();
    return 0;
}
