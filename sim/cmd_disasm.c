/* cmd_disasm.c — `npusim disasm`: an ELF program as assembly that reassembles to the same
 * bytes, or (--json) as one record per instruction: pc, encoded word, text, kernel. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "isa.h"
#include "isa_asm.h"
#include "isa_elf.h"

const char cmd_disasm_usage[] =
    "usage: npusim disasm IN.elf [-o OUT.s] [--arch PRESET|FILE] [--json]\n"
    "\n"
    "Prints the program as assembly: `npusim asm` on the output gives the same ELF bytes.\n"
    "The file is checked as `npusim sim` would load it.\n"
    "\n"
    "  -o, --output FILE   write the assembly to FILE instead of standard output\n"
    "  --arch PRESET|FILE  also check that the program was built for this architecture\n"
    "  --json              print {\"cores\": [{\"core\", \"insns\": [{\"pc\", \"word\",\n"
    "                      \"text\", \"kernel\"}]}]} instead (word: 64 hex digits, bit 255\n"
    "                      first; kernel: the symbol the instruction belongs to, or null)\n";

/* The program as JSON: per core, per instruction its pc, word, text and kernel. */
static json_t *disasm_json(const isa_program *p, np_err *err)
{
    json_t *cores = json_array();
    for (uint32_t i = 0; cores && i < p->n_cores; i++) {
        const isa_core_text *t = &p->cores[i];
        json_t *insns = json_array();
        if (!insns || json_array_append_new(cores, json_pack("{s:I, s:o}", "core",
                                                             (json_int_t)t->core, "insns", insns)))
            goto nomem;
        for (uint32_t pc = 0; pc < t->n_insns; pc++) {
            uint8_t w[ISA_WORD_BYTES];
            char hex[2 * ISA_WORD_BYTES + 1], text[512];
            if (isa_encode(&t->insns[pc], w, err) != NP_OK) {
                json_decref(cores);
                return NULL;
            }
            for (int b = 0; b < ISA_WORD_BYTES; b++) /* little-endian word, printed MSB first */
                snprintf(hex + 2 * b, 3, "%02x", w[ISA_WORD_BYTES - 1 - b]);
            isa_format(&t->insns[pc], p->names, p->names_len, text, sizeof text);
            const char *kernel = NULL;
            for (uint32_t k = 0; k < t->n_kernels; k++)
                if (pc >= t->kernels[k].start && pc < t->kernels[k].start + t->kernels[k].count)
                    kernel = t->kernels[k].name;
            json_t *o = json_pack("{s:I, s:s, s:s, s:s?}", "pc", (json_int_t)pc, "word", hex,
                                  "text", text, "kernel", kernel);
            if (!o || json_array_append_new(insns, o))
                goto nomem;
        }
    }
    if (cores)
        return cores;
nomem:
    json_decref(cores);
    np_err_set(err, NP_ERR_NOMEM, "out of memory");
    return NULL;
}

np_status cmd_disasm(int argc, char **argv, np_err *err)
{
    static const struct option longopts[] = {{"output", required_argument, NULL, 'o'},
                                             {"arch", required_argument, NULL, 'a'},
                                             {"json", no_argument, NULL, 'j'},
                                             {"help", no_argument, NULL, 'h'},
                                             {0}};
    const char *out = NULL, *arch = NULL;
    bool json = false;
    int c;
    cli_getopt_reset();
    while ((c = cli_getopt(argc, argv, "ho:", longopts, err)) != -1) {
        if (c == '?')
            return err->status;
        if (c == 'h') {
            cli_print_usage(cli_find("disasm"));
            return NP_OK;
        }
        if (c == 'o')
            out = optarg;
        if (c == 'a')
            arch = optarg;
        if (c == 'j')
            json = true;
    }
    if (optind >= argc)
        return np_err_set(err, NP_ERR_USAGE, "no input file");
    if (optind + 1 < argc)
        return np_err_set(err, NP_ERR_USAGE, "unexpected argument '%s'", argv[optind + 1]);
    isa_program *p;
    np_status st = isa_elf_load_named_arch(argv[optind], arch, &p, NULL, err);
    if (st != NP_OK)
        return st;
    if (json) {
        if (out) {
            isa_program_free(p);
            return np_err_set(err, NP_ERR_USAGE, "--json prints to standard output; drop -o");
        }
        json_t *cores = disasm_json(p, err);
        isa_program_free(p);
        if (!cores)
            return err->status;
        char fb[1024];
        return cli_print_json(json_pack("{s:s, s:o}", "file",
                                        cli_json_safe(argv[optind], fb, sizeof fb), "cores",
                                        cores), err);
    }
    char *text;
    st = isa_disasm(p, &text, err);
    isa_program_free(p);
    if (st != NP_OK)
        return st;
    if (out) {
        FILE *f = fopen(out, "w");
        bool ok = f && fputs(text, f) >= 0;
        if (f && fclose(f) != 0)
            ok = false;
        if (!ok) {
            free(text);
            return np_err_at(err, NP_ERR_IO, out, 0, 0, "cannot write");
        }
    } else {
        fputs(text, stdout);
    }
    free(text);
    return NP_OK;
}
