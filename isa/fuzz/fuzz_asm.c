/* fuzz_asm.c — libFuzzer harness for the assembler: the input is a source file. It must
 * assemble or fail with a positioned error, never crash; what assembles must disassemble to
 * text that assembles to the same program. Run through scripts/fuzz.sh. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "isa_asm.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const isa_target tiny = {.array_rows = 4, .array_cols = 4, .cores = 2,
                                    .spad_bytes = 65536, .acc_bytes = 4096, .dtypes = 0x0f};
    isa_asm_opts o = {&tiny, false};
    isa_program *p = NULL;
    np_err e = {0};
    if (isa_asm((const char *)data, size, "fuzz.s", &o, &p, &e) != NP_OK) {
        if (p || !e.msg[0] || e.status == NP_OK || e.status == NP_ERR_INTERNAL)
            abort();
        return 0;
    }
    char *text = NULL;
    if (isa_disasm(p, &text, &e) != NP_OK)
        abort();
    isa_asm_opts none = {NULL, false};
    isa_program *q = NULL;
    if (isa_asm(text, strlen(text), "dis.s", &none, &q, &e) != NP_OK || !isa_program_equal(p, q))
        abort(); /* the disassembly does not reassemble to the same program */
    isa_program_free(q);
    isa_program_free(p);
    free(text);
    return 0;
}
