/* fuzz_harness.h — what the libFuzzer harnesses of npusim share: the entry point's prototype
 * and the contract every failing parser keeps (an error class of bad input, a message, never
 * an internal error). Each harness abort()s when a contract is broken, which libFuzzer
 * reports as a finding. */
#ifndef NPUSIM_FUZZ_HARNESS_H
#define NPUSIM_FUZZ_HARNESS_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "err.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A parser that failed on outside input: it says why, with a class that exits 2. */
static inline void fuzz_check_failure(np_status st, const np_err *e)
{
    if (st == NP_OK || e->status != st || !e->msg[0] || np_status_exit_code(st) != 2)
        abort();
}

#endif
