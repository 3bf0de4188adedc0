/* cmd_asm.c — `npusim asm`: assemble a program into an ELF file; `--doc` prints the ISA
 * reference (docs/isa.md is this output). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "cli.h"
#include "isa.h"
#include "isa_asm.h"
#include "isa_elf.h"

const char cmd_asm_usage[] =
    "usage: npusim asm IN.s [-o OUT.elf] [--arch PRESET|FILE] [--set SECTION.KEY=VALUE]...\n"
    "       npusim asm --doc\n"
    "\n"
    "Assembles IN.s (syntax: docs/isa.md) into an npusim ELF program.\n"
    "\n"
    "  -o, --output FILE   the ELF file to write (default: IN with .s replaced by .elf)\n"
    "  --arch PRESET|FILE  the architecture to build for (default: " CLI_DEFAULT_ARCH ");\n"
    "                      recorded in the program's note. A .target directive in the\n"
    "                      source must agree with an architecture given here; without\n"
    "                      --arch, .target wins\n"
    "  --set S.K=V         override one key of the architecture (repeatable)\n"
    "  --doc               print the ISA reference in Markdown (docs/isa.md) and exit\n";

#define ASM_MAX_SETS 64

np_status cmd_asm(int argc, char **argv, np_err *err)
{
    static const struct option longopts[] = {
        {"output", required_argument, NULL, 'o'}, {"arch", required_argument, NULL, 'a'},
        {"set", required_argument, NULL, 's'},    {"doc", no_argument, NULL, 'd'},
        {"help", no_argument, NULL, 'h'},         {0}};
    const char *out = NULL, *arch = NULL;
    const char *sets[ASM_MAX_SETS];
    size_t n_sets = 0;
    bool doc = false;
    int c;
    cli_getopt_reset();
    while ((c = cli_getopt(argc, argv, "ho:", longopts, err)) != -1) {
        switch (c) {
        case '?':
            return err->status;
        case 'h':
            cli_print_usage(cli_find("asm"));
            return NP_OK;
        case 'o':
            out = optarg;
            break;
        case 'a':
            arch = optarg;
            break;
        case 's':
            if (cli_add_set(sets, &n_sets, ASM_MAX_SETS, optarg, err) != NP_OK)
                return err->status;
            break;
        case 'd':
            doc = true;
            break;
        default:
            break;
        }
    }
    if (doc) {
        if (optind < argc)
            return np_err_set(err, NP_ERR_USAGE, "--doc takes no input file");
        char *md = isa_doc_markdown();
        if (!md)
            return np_err_set(err, NP_ERR_NOMEM, "out of memory");
        fputs(md, stdout);
        free(md);
        return NP_OK;
    }
    if (optind >= argc)
        return np_err_set(err, NP_ERR_USAGE, "no input file");
    if (optind + 1 < argc)
        return np_err_set(err, NP_ERR_USAGE, "unexpected argument '%s'", argv[optind + 1]);
    const char *in = argv[optind];

    arch_config cfg;
    np_status st = arch_resolve(arch ? arch : CLI_DEFAULT_ARCH, sets, n_sets, &cfg, err);
    if (st != NP_OK)
        return st;
    isa_target target;
    isa_target_from_arch(&cfg, &target);
    isa_asm_opts opts = {&target, arch != NULL || n_sets > 0};

    char out_buf[4096];
    if (!out) {
        size_t len = strlen(in);
        if (len > 2 && strcmp(in + len - 2, ".s") == 0)
            len -= 2;
        if (len + 5 > sizeof out_buf)
            return np_err_set(err, NP_ERR_USAGE, "input name too long; give -o");
        snprintf(out_buf, sizeof out_buf, "%.*s.elf", (int)len, in);
        out = out_buf;
    }
    if (cli_output_not_input("-o", out, &in, 1, err) != NP_OK)
        return err->status;
    isa_program *p;
    st = isa_asm_file(in, &opts, &p, err);
    if (st != NP_OK)
        return st;
    st = isa_elf_write(p, out, err);
    isa_program_free(p);
    return st;
}
