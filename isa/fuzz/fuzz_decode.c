/* fuzz_decode.c — libFuzzer harness for the decoder: the input is a sequence of 32-byte
 * words. Every word either decodes or is refused with a reason; a word that decodes must
 * re-encode to itself, and its text form must fit what isa_format reports. Run through
 * scripts/fuzz.sh. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "isa.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char names[] = "\0name\0";
    for (size_t at = 0; at + ISA_WORD_BYTES <= size; at += ISA_WORD_BYTES) {
        isa_insn in;
        np_err e = {0};
        if (isa_decode(data + at, &in, &e) != NP_OK) {
            if (e.status != NP_ERR_FORMAT || !e.msg[0])
                abort();
            continue;
        }
        uint8_t w[ISA_WORD_BYTES];
        if (isa_encode(&in, w, &e) != NP_OK || memcmp(w, data + at, ISA_WORD_BYTES) != 0)
            abort(); /* decode and encode disagree */
        char text[2048];
        int n = isa_format(&in, names, sizeof names, text, sizeof text);
        if (n < 0 || (size_t)n >= sizeof text || strlen(text) != (size_t)n)
            abort();
    }
    return 0;
}
