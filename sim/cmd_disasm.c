/* cmd_disasm.c — `npusim disasm`: an ELF program as assembly that reassembles to the same
 * bytes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "isa_asm.h"
#include "isa_elf.h"

const char cmd_disasm_usage[] =
    "usage: npusim disasm IN.elf [-o OUT.s] [--arch PRESET|FILE]\n"
    "\n"
    "Prints the program as assembly: `npusim asm` on the output gives the same ELF bytes.\n"
    "The file is checked as `npusim sim` would load it.\n"
    "\n"
    "  -o, --output FILE   write the assembly to FILE instead of standard output\n"
    "  --arch PRESET|FILE  also check that the program was built for this architecture\n";

np_status cmd_disasm(int argc, char **argv, np_err *err)
{
    static const struct option longopts[] = {{"output", required_argument, NULL, 'o'},
                                             {"arch", required_argument, NULL, 'a'},
                                             {"help", no_argument, NULL, 'h'},
                                             {0}};
    const char *out = NULL, *arch = NULL;
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
    }
    if (optind >= argc)
        return np_err_set(err, NP_ERR_USAGE, "no input file");
    if (optind + 1 < argc)
        return np_err_set(err, NP_ERR_USAGE, "unexpected argument '%s'", argv[optind + 1]);
    isa_program *p;
    np_status st = isa_elf_load_named_arch(argv[optind], arch, &p, NULL, err);
    if (st != NP_OK)
        return st;
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
