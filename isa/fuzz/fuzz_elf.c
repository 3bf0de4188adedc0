/* fuzz_elf.c — libFuzzer harness for the ELF loader: the input is a file. It must load or be
 * refused with a message, never read outside the input or crash; what loads must disassemble
 * and reassemble to the same program. Run through scripts/fuzz.sh. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "isa_asm.h"
#include "isa_elf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* An exact-size copy, so that ASan sees any read past the end. */
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    isa_program *p = NULL;
    isa_elf_info *info = NULL;
    np_err e = {0};
    np_status st = isa_elf_load_mem(buf, size, "fuzz.elf", NULL, &p, &info, &e);
    free(buf);
    if (st != NP_OK) {
        if (p || info || !e.msg[0] || e.status == NP_ERR_INTERNAL)
            abort();
        return 0;
    }
    char *text = NULL;
    if (isa_disasm(p, &text, &e) != NP_OK)
        abort();
    isa_asm_opts none = {NULL, false};
    isa_program *q = NULL;
    if (isa_asm(text, strlen(text), "dis.s", &none, &q, &e) != NP_OK || !isa_program_equal(p, q))
        abort(); /* a loadable file that does not round-trip through assembly */
    isa_program_free(q);
    isa_program_free(p);
    isa_elf_info_free(info);
    free(text);
    return 0;
}
