/* fuzz_chakra.c — libFuzzer harness for one rank's Chakra execution trace (chakra_check_bytes:
 * sim/chakra_decode.c, what `npusim replay` reads of every .et file). The length-delimited
 * framing, the nodes' attributes and the dependency resolution are npusim's; the protobuf
 * decoding is protobuf-c's on Chakra's schema. Every input is a trace of some nodes or a
 * bad-input error whose message names the file. */
#include <string.h>

#include "chakra.h"
#include "fuzz_harness.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > (1 << 20))
        return 0;
    uint64_t nodes = 0;
    np_err e = {0};
    np_status st = chakra_check_bytes("fuzz.0.et", data, size, &nodes, &e);
    if (st != NP_OK) {
        fuzz_check_failure(st, &e);
        if (strncmp(e.msg, "fuzz.0.et", 9) != 0)
            abort(); /* a trace's error names the file */
    }
    return 0;
}
