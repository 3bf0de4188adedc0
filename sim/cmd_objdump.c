/* cmd_objdump.c — `npusim objdump`: the headers, sections, symbols and architecture note of
 * an ELF program, as text or JSON. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "human.h"
#include "isa_elf.h"

const char cmd_objdump_usage[] =
    "usage: npusim objdump IN.elf [--json] [--arch PRESET|FILE]\n"
    "\n"
    "Shows the ELF header, sections, symbols, the architecture note and a summary per core.\n"
    "The file is checked as `npusim sim` would load it.\n"
    "\n"
    "  --json              print one JSON object: file, header, sections, symbols, target,\n"
    "                      cores (keys documented in docs/isa.md)\n"
    "  --arch PRESET|FILE  also check that the program was built for this architecture\n";

static const char *od_type(uint32_t t)
{
    switch (t) {
    case 0: return "NULL";
    case 1: return "PROGBITS";
    case 2: return "SYMTAB";
    case 3: return "STRTAB";
    case 7: return "NOTE";
    case 8: return "NOBITS";
    default: return "?";
    }
}

static void od_flags(uint64_t f, char *buf)
{
    buf[0] = '\0';
    if (f & 2)
        strcat(buf, "A");
    if (f & 1)
        strcat(buf, "W");
    if (f & 4)
        strcat(buf, "X");
}

static const char *od_sym_type(unsigned t)
{
    return t == 0 ? "NOTYPE" : t == 1 ? "OBJECT" : t == 2 ? "FUNC" : "?";
}

static json_t *od_json(const char *file, const isa_elf_info *in, const isa_program *p)
{
    char dt[64], fl[8];
    json_t *sections = json_array(), *symbols = json_array(), *cores = json_array();
    for (uint32_t i = 0; i < in->n_sections; i++) {
        const isa_elf_section_info *s = &in->sections[i];
        od_flags(s->flags, fl);
        json_array_append_new(sections, json_pack(
            "{s:I, s:s, s:s, s:s, s:I, s:I, s:I, s:I}", "index", (json_int_t)i, "name", s->name,
            "type", od_type(s->type), "flags", fl, "address", (json_int_t)s->addr, "offset",
            (json_int_t)s->offset, "size", (json_int_t)s->size, "align", (json_int_t)s->align));
    }
    for (uint32_t i = 1; i < in->n_symbols; i++) {
        const isa_elf_symbol_info *s = &in->symbols[i];
        const char *sec = s->shndx < in->n_sections ? in->sections[s->shndx].name : "?";
        json_array_append_new(symbols, json_pack(
            "{s:s, s:s, s:s, s:I, s:I}", "name", s->name, "type", od_sym_type(s->type),
            "section", sec, "value", (json_int_t)s->value, "size", (json_int_t)s->size));
    }
    for (uint32_t c = 0; c < p->n_cores; c++) {
        const isa_core_text *ct = &p->cores[c];
        json_t *ks = json_array();
        for (uint32_t k = 0; k < ct->n_kernels; k++)
            json_array_append_new(ks, json_pack("{s:s, s:I, s:I}", "name", ct->kernels[k].name,
                                                "start", (json_int_t)ct->kernels[k].start,
                                                "count", (json_int_t)ct->kernels[k].count));
        json_array_append_new(cores, json_pack("{s:I, s:I, s:o}", "core", (json_int_t)ct->core,
                                               "instructions", (json_int_t)ct->n_insns,
                                               "kernels", ks));
    }
    const isa_target *t = &in->target;
    char fb[1024];
    return json_pack(
        "{s:s, s:{s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:I}, s:o, s:o, "
        "s:{s:I, s:I, s:I, s:I, s:I, s:I, s:s}, s:o}",
        "file", cli_json_safe(file, fb, sizeof fb),
        "header", "class", in->ei_class == 2 ? "ELFCLASS64" : "?", "data",
        in->ei_data == 1 ? "little-endian" : "?", "type", in->type == 2 ? "EXEC" : "?",
        "machine", (json_int_t)in->machine, "version", (json_int_t)in->version, "entry",
        (json_int_t)in->entry, "flags", (json_int_t)in->flags, "shnum", (json_int_t)in->shnum,
        "sections", sections, "symbols", symbols,
        "target", "isa_version", (json_int_t)in->isa_version, "array_rows",
        (json_int_t)t->array_rows, "array_cols", (json_int_t)t->array_cols, "cores",
        (json_int_t)t->cores, "spad_bytes", (json_int_t)t->spad_bytes, "acc_bytes",
        (json_int_t)t->acc_bytes, "dtypes", isa_dtypes_text(t->dtypes, dt, sizeof dt),
        "cores", cores);
}

static void od_text(const char *file, const isa_elf_info *in, const isa_program *p)
{
    char dt[64], fl[8];
    printf("%s: npusim ELF program, ISA version %" PRIu32 "\n\n", file, in->isa_version);
    printf("ELF header:\n");
    printf("  class     %s, %s\n", in->ei_class == 2 ? "ELFCLASS64" : "?",
           in->ei_data == 1 ? "little-endian" : "?");
    printf("  type      %s\n", in->type == 2 ? "EXEC (executable)" : "?");
    printf("  machine   0x%x (npusim NPU)\n", in->machine);
    printf("  version   %" PRIu32 "\n", in->version);
    printf("  entry     0x%" PRIx64 "\n", in->entry);
    printf("  flags     0x%" PRIx32 "\n", in->flags);
    printf("  sections  %u, header table at 0x%" PRIx64 ", names in section %u\n\n", in->shnum,
           in->shoff, in->shstrndx);
    printf("Sections:\n  [Nr] %-16s %-9s %-5s %-18s %-10s %-10s %s\n", "Name", "Type", "Flags",
           "Address", "Offset", "Size", "Align");
    for (uint32_t i = 0; i < in->n_sections; i++) {
        const isa_elf_section_info *s = &in->sections[i];
        od_flags(s->flags, fl);
        printf("  [%2" PRIu32 "] %-16s %-9s %-5s 0x%016" PRIx64 " 0x%08" PRIx64 " 0x%08" PRIx64
               " %" PRIu64 "\n", i, s->name, od_type(s->type), fl, s->addr, s->offset, s->size,
               s->align);
    }
    printf("\nSymbols:\n  %-4s %-18s %-10s %-7s %-14s %s\n", "Num", "Value", "Size", "Type",
           "Section", "Name");
    for (uint32_t i = 1; i < in->n_symbols; i++) {
        const isa_elf_symbol_info *s = &in->symbols[i];
        printf("  %-4" PRIu32 " 0x%016" PRIx64 " %-10" PRIu64 " %-7s %-14s %s\n", i, s->value,
               s->size, od_sym_type(s->type),
               s->shndx < in->n_sections ? in->sections[s->shndx].name : "?", s->name);
    }
    const isa_target *t = &in->target;
    printf("\nTarget (.note.npusim):\n");
    printf("  isa_version  %" PRIu32 "\n", in->isa_version);
    printf("  array        %" PRIu32 " x %" PRIu32 "\n", t->array_rows, t->array_cols);
    printf("  cores        %" PRIu32 "\n", t->cores);
    char hb[NP_HUMAN_MAX];
    printf("  spad_bytes   %" PRIu64 " (%s)\n", t->spad_bytes,
           np_human_bytes(t->spad_bytes, hb, sizeof hb));
    printf("  acc_bytes    %" PRIu64 " (%s)\n", t->acc_bytes,
           np_human_bytes(t->acc_bytes, hb, sizeof hb));
    printf("  dtypes       %s\n", isa_dtypes_text(t->dtypes, dt, sizeof dt));
    printf("\nCores:\n");
    for (uint32_t c = 0; c < p->n_cores; c++) {
        const isa_core_text *ct = &p->cores[c];
        printf("  core %" PRIu32 ": %s instructions", ct->core,
               np_human_count(ct->n_insns, hb, sizeof hb));
        for (uint32_t k = 0; k < ct->n_kernels; k++)
            printf("%s%s [%" PRIu32 ", %" PRIu32 ")", k ? ", " : "; kernels ",
                   ct->kernels[k].name, ct->kernels[k].start,
                   ct->kernels[k].start + ct->kernels[k].count);
        printf("\n");
    }
}

np_status cmd_objdump(int argc, char **argv, np_err *err)
{
    static const struct option longopts[] = {{"json", no_argument, NULL, 'j'},
                                             {"arch", required_argument, NULL, 'a'},
                                             {"help", no_argument, NULL, 'h'},
                                             {0}};
    const char *arch = NULL;
    bool json = false;
    int c;
    cli_getopt_reset();
    while ((c = cli_getopt(argc, argv, "h", longopts, err)) != -1) {
        if (c == '?')
            return err->status;
        if (c == 'h') {
            cli_print_usage(cli_find("objdump"));
            return NP_OK;
        }
        if (c == 'j')
            json = true;
        if (c == 'a')
            arch = optarg;
    }
    if (optind >= argc)
        return np_err_set(err, NP_ERR_USAGE, "no input file");
    if (optind + 1 < argc)
        return np_err_set(err, NP_ERR_USAGE, "unexpected argument '%s'", argv[optind + 1]);
    const char *file = argv[optind];
    isa_program *p;
    isa_elf_info *info;
    np_status st = isa_elf_load_named_arch(file, arch, &p, &info, err);
    if (st != NP_OK)
        return st;
    if (json)
        st = cli_print_json(od_json(file, info, p), err);
    else
        od_text(file, info, p);
    isa_program_free(p);
    isa_elf_info_free(info);
    return st;
}
