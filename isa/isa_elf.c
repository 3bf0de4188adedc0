/* isa_elf.c — the ELF writer and the checking loader (see isa_elf.h for the layout).
 *
 * Loading goes in two layers. First the raw bytes are checked by hand (header, every section
 * header, bounds and overlaps in the file, the name tables), so that libelf is only ever
 * given an image whose structure is sane; then libelf reads the sections, symbols and data,
 * and every instruction word is decoded. The program is built in the canonical form the
 * assembler produces (data sections .data then .bss, symbols in address order, kernels in
 * text order) and checked with isa_program_validate, so that disassembling any loadable file
 * reassembles to the same program.
 */
#include "isa_elf.h"
#include "readfile.h"

#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "isa_util.h"

#define EHDR_BYTES 64u
#define SHDR_BYTES 64u
#define SYM_BYTES 24u
#define NOTE_BYTES (12u + 8u + ISA_ELF_NOTE_DESC_BYTES)

static bool elf_lib_ready(void)
{
    static int ready = -1;
    if (ready < 0)
        ready = elf_version(EV_CURRENT) != EV_NONE;
    return ready == 1;
}

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint16_t get16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get64(const uint8_t *p)
{
    return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

/* ---- Writer ------------------------------------------------------------------------------------ */

typedef struct elf_names {
    uint32_t *map;   /* old offset -> new offset (names_len entries) */
    char *table;     /* the canonical table */
    size_t len;
} elf_names;

typedef struct elf_name_ref {
    const char *s;
    uint32_t off;
} elf_name_ref;

static int elf_cmp_name_ref(const void *a, const void *b)
{
    return strcmp(((const elf_name_ref *)a)->s, ((const elf_name_ref *)b)->s);
}

/* Builds the canonical name table: the strings NAME operands use, sorted and unique. */
static np_status elf_canonical_names(const isa_program *p, elf_names *nm, np_err *err)
{
    memset(nm, 0, sizeof *nm);
    if (!p->names_len)
        return NP_OK;
    nm->map = calloc(p->names_len, sizeof *nm->map);
    uint8_t *used = calloc(p->names_len, 1);
    elf_name_ref *refs = NULL;
    size_t n_refs = 0;
    np_status st = NP_OK;
    if (!nm->map || !used)
        goto nomem;
    for (uint32_t c = 0; c < p->n_cores; c++)
        for (uint32_t i = 0; i < p->cores[c].n_insns; i++) {
            const isa_insn *in = &p->cores[c].insns[i];
            for (unsigned f = 0; f < isa_ops[in->op].n_fields; f++)
                if (isa_ops[in->op].fields[f].kind == ISA_KIND_NAME && !used[in->opnd[f].val]) {
                    used[in->opnd[f].val] = 1;
                    n_refs++;
                }
        }
    refs = malloc((n_refs ? n_refs : 1) * sizeof *refs);
    if (!refs)
        goto nomem;
    n_refs = 0;
    for (size_t o = 0; o < p->names_len; o++)
        if (used[o])
            refs[n_refs++] = (elf_name_ref){p->names + o, (uint32_t)o};
    qsort(refs, n_refs, sizeof *refs, elf_cmp_name_ref);
    size_t len = 1;
    for (size_t k = 0; k < n_refs; k++)
        if (k == 0 || strcmp(refs[k].s, refs[k - 1].s) != 0)
            len += strlen(refs[k].s) + 1;
    nm->table = malloc(len);
    if (!nm->table)
        goto nomem;
    nm->table[0] = '\0';
    size_t at = 1, last = 0;
    for (size_t k = 0; k < n_refs; k++) {
        if (k == 0 || strcmp(refs[k].s, refs[k - 1].s) != 0) {
            size_t l = strlen(refs[k].s) + 1;
            memcpy(nm->table + at, refs[k].s, l);
            last = at;
            at += l;
        }
        nm->map[refs[k].off] = (uint32_t)last;
    }
    nm->len = n_refs ? len : 0;
    goto done;
nomem:
    st = np_err_set(err, NP_ERR_NOMEM, "out of memory while writing ELF");
    free(nm->map);
    free(nm->table);
    memset(nm, 0, sizeof *nm);
done:
    free(used);
    free(refs);
    return st;
}

typedef struct elf_out_sec {
    const char *name;
    uint32_t type;
    uint64_t flags, addr, align, entsize;
    uint32_t link, info;
    void *buf;
    size_t size;
    Elf_Type dtype;
} elf_out_sec;

static np_status elf_write_fd(const isa_program *p, int fd, const char *what, np_err *err)
{
    np_status st = isa_program_validate(p, err);
    if (st != NP_OK)
        return st;
    if (!elf_lib_ready())
        return np_err_set(err, NP_ERR_INTERNAL, "libelf: %s", elf_errmsg(-1));
    elf_names nm;
    st = elf_canonical_names(p, &nm, err);
    if (st != NP_OK)
        return st;

    uint32_t n_sec = p->n_cores + p->n_data + 6;
    elf_out_sec *secs = calloc(n_sec, sizeof *secs);
    uint8_t **texts = calloc(p->n_cores ? p->n_cores : 1, sizeof *texts);
    char **text_names = calloc(p->n_cores ? p->n_cores : 1, sizeof *text_names);
    uint32_t n_syms = 1 + p->n_symbols;
    for (uint32_t c = 0; c < p->n_cores; c++)
        n_syms += p->cores[c].n_kernels;
    Elf64_Sym *syms = calloc(n_syms, sizeof *syms);
    isa_buf strtab = {0}, shstrtab = {0};
    uint8_t note[NOTE_BYTES];
    Elf *e = NULL;
    uint32_t ns = 0;
    if (!secs || !texts || !text_names || !syms)
        goto nomem;

    /* Text: one section per core, re-encoded with canonical name offsets. */
    for (uint32_t c = 0; c < p->n_cores; c++) {
        const isa_core_text *ct = &p->cores[c];
        texts[c] = malloc((size_t)ct->n_insns * ISA_WORD_BYTES + 1);
        text_names[c] = malloc(32);
        if (!texts[c] || !text_names[c])
            goto nomem;
        snprintf(text_names[c], 32, ".text.core%" PRIu32, ct->core);
        for (uint32_t i = 0; i < ct->n_insns; i++) {
            isa_insn in = ct->insns[i];
            for (unsigned f = 0; f < isa_ops[in.op].n_fields; f++)
                if (isa_ops[in.op].fields[f].kind == ISA_KIND_NAME)
                    in.opnd[f].val = nm.map[in.opnd[f].val];
            st = isa_encode(&in, texts[c] + (size_t)i * ISA_WORD_BYTES, err);
            if (st != NP_OK)
                goto fail;
        }
        secs[ns++] = (elf_out_sec){text_names[c], SHT_PROGBITS, SHF_ALLOC | SHF_EXECINSTR, 0,
                                   ISA_WORD_BYTES, 0, 0, 0, texts[c],
                                   (size_t)ct->n_insns * ISA_WORD_BYTES, ELF_T_BYTE};
    }
    uint32_t first_data = ns;
    for (uint32_t d = 0; d < p->n_data; d++) {
        const isa_data *dd = &p->data[d];
        secs[ns++] = (elf_out_sec){dd->name, dd->bytes ? SHT_PROGBITS : SHT_NOBITS,
                                   SHF_ALLOC | SHF_WRITE, dd->addr, 64, 0, 0, 0, dd->bytes,
                                   (size_t)dd->size, ELF_T_BYTE};
    }
    if (nm.len)
        secs[ns++] = (elf_out_sec){".npu.names", SHT_STRTAB, 0, 0, 1, 0, 0, 0, nm.table, nm.len,
                                   ELF_T_BYTE};
    /* The note. */
    put32(note, sizeof ISA_ELF_NOTE_NAME);
    put32(note + 4, ISA_ELF_NOTE_DESC_BYTES);
    put32(note + 8, ISA_ELF_NOTE_TARGET);
    memset(note + 12, 0, 8);
    memcpy(note + 12, ISA_ELF_NOTE_NAME, sizeof ISA_ELF_NOTE_NAME);
    uint8_t *desc = note + 20;
    put32(desc, ISA_VERSION);
    put32(desc + 4, p->target.array_rows);
    put32(desc + 8, p->target.array_cols);
    put32(desc + 12, p->target.cores);
    put32(desc + 16, p->target.dtypes);
    put32(desc + 20, 0);
    put64(desc + 24, p->target.spad_bytes);
    put64(desc + 32, p->target.acc_bytes);
    secs[ns++] = (elf_out_sec){".note.npusim", SHT_NOTE, 0, 0, 4, 0, 0, 0, note, sizeof note,
                               ELF_T_BYTE};
    /* Symbols: data objects in program order, then kernels by core. Section indices count
     * the null section, hence the + 1. */
    isa_buf_put(&strtab, "", 1);
    uint32_t k = 1;
    for (uint32_t s = 0; s < p->n_symbols; s++) {
        const isa_symbol *sy = &p->symbols[s];
        syms[k].st_name = (uint32_t)strtab.len;
        isa_buf_put(&strtab, sy->name, strlen(sy->name) + 1);
        syms[k].st_info = ELF64_ST_INFO(STB_GLOBAL, STT_OBJECT);
        syms[k].st_shndx = (uint16_t)(first_data + sy->data + 1);
        syms[k].st_value = sy->addr;
        syms[k].st_size = sy->size;
        k++;
    }
    for (uint32_t c = 0; c < p->n_cores; c++)
        for (uint32_t j = 0; j < p->cores[c].n_kernels; j++) {
            const isa_kernel *ke = &p->cores[c].kernels[j];
            syms[k].st_name = (uint32_t)strtab.len;
            isa_buf_put(&strtab, ke->name, strlen(ke->name) + 1);
            syms[k].st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC);
            syms[k].st_shndx = (uint16_t)(c + 1);
            syms[k].st_value = (uint64_t)ke->start * ISA_WORD_BYTES;
            syms[k].st_size = (uint64_t)ke->count * ISA_WORD_BYTES;
            k++;
        }
    if (strtab.oom)
        goto nomem;
    uint32_t symtab_i = ns;
    secs[ns++] = (elf_out_sec){".symtab", SHT_SYMTAB, 0, 0, 8, SYM_BYTES, symtab_i + 2, 1, syms,
                               (size_t)n_syms * sizeof *syms, ELF_T_SYM};
    secs[ns++] = (elf_out_sec){".strtab", SHT_STRTAB, 0, 0, 1, 0, 0, 0, strtab.s, strtab.len,
                               ELF_T_BYTE};
    uint32_t shstr_i = ns;
    secs[ns++] = (elf_out_sec){".shstrtab", SHT_STRTAB, 0, 0, 1, 0, 0, 0, NULL, 0, ELF_T_BYTE};
    uint32_t *name_off = calloc(ns, sizeof *name_off);
    if (!name_off)
        goto nomem;
    isa_buf_put(&shstrtab, "", 1);
    for (uint32_t s = 0; s < ns; s++) {
        name_off[s] = (uint32_t)shstrtab.len;
        isa_buf_put(&shstrtab, secs[s].name, strlen(secs[s].name) + 1);
    }
    secs[shstr_i].buf = shstrtab.s;
    secs[shstr_i].size = shstrtab.len;
    if (shstrtab.oom) {
        free(name_off);
        goto nomem;
    }

    e = elf_begin(fd, ELF_C_WRITE, NULL);
    Elf64_Ehdr *eh = e ? elf64_newehdr(e) : NULL;
    if (!eh) {
        free(name_off);
        goto libelf;
    }
    eh->e_ident[EI_CLASS] = ELFCLASS64;
    eh->e_ident[EI_DATA] = ELFDATA2LSB;
    eh->e_ident[EI_VERSION] = EV_CURRENT;
    eh->e_ident[EI_OSABI] = ELFOSABI_NONE;
    eh->e_type = ET_EXEC;
    eh->e_machine = (Elf64_Half)ISA_ELF_MACHINE;
    eh->e_version = EV_CURRENT;
    for (uint32_t s = 0; s < ns; s++) {
        Elf_Scn *scn = elf_newscn(e);
        Elf_Data *d = scn ? elf_newdata(scn) : NULL;
        Elf64_Shdr *sh = scn ? elf64_getshdr(scn) : NULL;
        if (!d || !sh) {
            free(name_off);
            goto libelf;
        }
        d->d_buf = secs[s].buf;
        d->d_size = secs[s].size;
        d->d_type = secs[s].dtype;
        d->d_align = secs[s].align;
        d->d_version = EV_CURRENT;
        sh->sh_name = name_off[s];
        sh->sh_type = secs[s].type;
        sh->sh_flags = secs[s].flags;
        sh->sh_addr = secs[s].addr;
        sh->sh_addralign = secs[s].align;
        sh->sh_entsize = secs[s].entsize;
        sh->sh_link = secs[s].link;
        sh->sh_info = secs[s].info;
    }
    free(name_off);
    eh->e_shstrndx = (Elf64_Half)(shstr_i + 1);
    if (elf_update(e, ELF_C_WRITE) < 0)
        goto libelf;
    st = NP_OK;
    goto done;
libelf:
    st = np_err_set(err, NP_ERR_IO, "writing %s: libelf: %s", what, elf_errmsg(-1));
    goto done;
nomem:
    st = np_err_set(err, NP_ERR_NOMEM, "out of memory while writing ELF");
    goto done;
fail:
done:
    if (e)
        elf_end(e);
    for (uint32_t c = 0; texts && c < p->n_cores; c++)
        free(texts[c]);
    for (uint32_t c = 0; text_names && c < p->n_cores; c++)
        free(text_names[c]);
    free(texts);
    free(text_names);
    free(secs);
    free(syms);
    free(strtab.s);
    free(shstrtab.s);
    free(nm.map);
    free(nm.table);
    return st;
}

np_status isa_elf_write(const isa_program *p, const char *path, np_err *err)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        return np_err_at(err, NP_ERR_IO, path, 0, 0, "cannot create: %s", strerror(errno));
    np_status st = elf_write_fd(p, fd, path, err);
    if (close(fd) != 0 && st == NP_OK)
        st = np_err_at(err, NP_ERR_IO, path, 0, 0, "cannot write: %s", strerror(errno));
    return st;
}

np_status isa_elf_image(const isa_program *p, uint8_t **buf, size_t *len, np_err *err)
{
    *buf = NULL;
    *len = 0;
    FILE *f = tmpfile();
    if (!f)
        return np_err_set(err, NP_ERR_IO, "cannot create a temporary file: %s", strerror(errno));
    np_status st = elf_write_fd(p, fileno(f), "a temporary file", err);
    if (st == NP_OK) {
        off_t end = lseek(fileno(f), 0, SEEK_END);
        uint8_t *b = end >= 0 ? malloc((size_t)end + 1) : NULL;
        if (!b)
            st = np_err_set(err, NP_ERR_NOMEM, "out of memory reading back the ELF image");
        else if (pread(fileno(f), b, (size_t)end, 0) != (ssize_t)end) {
            free(b);
            st = np_err_set(err, NP_ERR_IO, "cannot read back the temporary ELF file");
        } else {
            *buf = b;
            *len = (size_t)end;
        }
    }
    fclose(f);
    return st;
}

/* ---- Loader ------------------------------------------------------------------------------------ */

typedef struct elf_sec {
    const char *name; /* in the image's .shstrtab (checked NUL-terminated) */
    uint32_t name_off;
    uint32_t type, link, info;
    uint64_t flags, addr, offset, size, align, entsize;
} elf_sec;

typedef struct elf_ld {
    const uint8_t *buf;
    size_t len;
    const char *file;
    np_err *err;
    uint16_t shnum, shstrndx;
    elf_sec *sec;
    int text_of_core_count;
    int data_i, bss_i, names_i, note_i, symtab_i, strtab_i;
} elf_ld;

static np_status ld_fail(elf_ld *l, np_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static np_status ld_fail(elf_ld *l, np_status st, const char *fmt, ...)
{
    char msg[NP_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return np_err_at(l->err, st, l->file, 0, 0, "%s", msg);
}

#define LD_FORMAT(...) ld_fail(l, NP_ERR_FORMAT, __VA_ARGS__)

static const char *ld_machine_name(unsigned m)
{
    switch (m) {
    case EM_386: return "Intel 80386";
    case EM_ARM: return "ARM";
    case EM_X86_64: return "x86-64";
    case EM_AARCH64: return "AArch64";
    case EM_RISCV: return "RISC-V";
    case EM_BPF: return "BPF";
    default: return "unknown";
    }
}

static np_status ld_header(elf_ld *l)
{
    const uint8_t *b = l->buf;
    if (l->len >= SELFMAG && memcmp(b, ELFMAG, SELFMAG) != 0)
        return LD_FORMAT("not an ELF file (bad magic)");
    if (l->len < EHDR_BYTES)
        return LD_FORMAT("truncated ELF header: the file has %zu bytes, an ELF64 header needs %u",
                         l->len, EHDR_BYTES);
    if (b[EI_CLASS] != ELFCLASS64)
        return LD_FORMAT("wrong ELF class %s: npusim programs are ELFCLASS64",
                         b[EI_CLASS] == ELFCLASS32 ? "ELFCLASS32" : "(invalid)");
    if (b[EI_DATA] != ELFDATA2LSB)
        return LD_FORMAT("wrong byte order (%s): npusim programs are little-endian",
                         b[EI_DATA] == ELFDATA2MSB ? "big-endian" : "invalid");
    if (b[EI_VERSION] != EV_CURRENT || get32(b + 20) != EV_CURRENT)
        return LD_FORMAT("unknown ELF version %u (expected %u)", b[EI_VERSION], EV_CURRENT);
    uint16_t type = get16(b + 16), machine = get16(b + 18);
    if (machine != ISA_ELF_MACHINE)
        return LD_FORMAT("wrong machine: e_machine %u (%s), npusim programs have 0x%x",
                         machine, ld_machine_name(machine), ISA_ELF_MACHINE);
    if (type != ET_EXEC)
        return LD_FORMAT("ELF type %u is not an executable (ET_EXEC)", type);
    if (get32(b + 48) != 0)
        return LD_FORMAT("e_flags is 0x%x: no flags are defined", get32(b + 48));
    if (get16(b + 52) != EHDR_BYTES)
        return LD_FORMAT("e_ehsize is %u, expected %u", get16(b + 52), EHDR_BYTES);
    if (get16(b + 56) != 0 || get64(b + 32) != 0)
        return LD_FORMAT("the file has program headers, which npusim programs do not use");
    uint64_t shoff = get64(b + 40);
    l->shnum = get16(b + 60);
    l->shstrndx = get16(b + 62);
    if (l->shnum == 0)
        return LD_FORMAT("the file has no section headers");
    if (get16(b + 58) != SHDR_BYTES)
        return LD_FORMAT("e_shentsize is %u, expected %u", get16(b + 58), SHDR_BYTES);
    if (l->shnum > ISA_ELF_MAX_SECTIONS)
        return LD_FORMAT("%u sections, more than the %u allowed", l->shnum, ISA_ELF_MAX_SECTIONS);
    if (shoff > l->len || (l->len - shoff) / SHDR_BYTES < l->shnum)
        return LD_FORMAT("the section header table [0x%" PRIx64 ", +%u x %u) lies outside the "
                         "file (%zu bytes): truncated?", shoff, l->shnum, SHDR_BYTES, l->len);
    if (shoff < EHDR_BYTES)
        return LD_FORMAT("the section header table overlaps the ELF header");
    if (l->shstrndx == 0 || l->shstrndx >= l->shnum)
        return LD_FORMAT("e_shstrndx %u is not a section (the file has %u)", l->shstrndx,
                         l->shnum);
    l->sec = calloc(l->shnum, sizeof *l->sec);
    if (!l->sec)
        return ld_fail(l, NP_ERR_NOMEM, "out of memory");
    for (unsigned i = 0; i < l->shnum; i++) {
        const uint8_t *h = b + shoff + (uint64_t)i * SHDR_BYTES;
        elf_sec *s = &l->sec[i];
        s->type = get32(h + 4);
        s->flags = get64(h + 8);
        s->addr = get64(h + 16);
        s->offset = get64(h + 24);
        s->size = get64(h + 32);
        s->link = get32(h + 40);
        s->info = get32(h + 44);
        s->align = get64(h + 48);
        s->entsize = get64(h + 56);
        s->name_off = get32(h);
        if (i == 0) {
            for (unsigned k = 0; k < SHDR_BYTES; k++)
                if (h[k])
                    return LD_FORMAT("section 0 must be an all-zero SHT_NULL header");
        } else if (s->type != SHT_NOBITS &&
                   (s->offset > l->len || s->size > l->len - s->offset)) {
            return LD_FORMAT("section %u: [0x%" PRIx64 ", +0x%" PRIx64 ") lies outside the file "
                             "(%zu bytes): truncated?", i, s->offset, s->size, l->len);
        }
    }
    /* The section-name table, then every name. */
    const elf_sec *ss = &l->sec[l->shstrndx];
    if (ss->type != SHT_STRTAB || ss->size == 0 || b[ss->offset] != 0 ||
        b[ss->offset + ss->size - 1] != 0)
        return LD_FORMAT("section %u (e_shstrndx) is not a NUL-delimited string table",
                         l->shstrndx);
    for (unsigned i = 0; i < l->shnum; i++) {
        uint64_t off = l->sec[i].name_off;
        if (off >= ss->size)
            return LD_FORMAT("section %u: name offset %" PRIu64 " is outside the section-name "
                             "table", i, off);
        l->sec[i].name = (const char *)b + ss->offset + off;
    }
    return NP_OK;
}

typedef struct ld_range {
    uint64_t lo, hi;
    const char *what;
} ld_range;

static int ld_cmp_range(const void *a, const void *b)
{
    const ld_range *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo ? 1 : x->hi < y->hi ? -1 : x->hi > y->hi;
}

/* Sections may not overlap each other, the ELF header or the section header table. */
static np_status ld_overlaps(elf_ld *l)
{
    ld_range *r = calloc((size_t)l->shnum + 2, sizeof *r);
    if (!r)
        return ld_fail(l, NP_ERR_NOMEM, "out of memory");
    size_t n = 0;
    uint64_t shoff = get64(l->buf + 40);
    r[n++] = (ld_range){0, EHDR_BYTES, "the ELF header"};
    r[n++] = (ld_range){shoff, shoff + (uint64_t)l->shnum * SHDR_BYTES, "the section header table"};
    for (unsigned i = 1; i < l->shnum; i++)
        if (l->sec[i].type != SHT_NOBITS && l->sec[i].size)
            r[n++] = (ld_range){l->sec[i].offset, l->sec[i].offset + l->sec[i].size,
                                l->sec[i].name};
    qsort(r, n, sizeof *r, ld_cmp_range);
    np_status st = NP_OK;
    for (size_t k = 1; k < n && st == NP_OK; k++)
        if (r[k].lo < r[k - 1].hi)
            st = LD_FORMAT("'%s' [0x%" PRIx64 ", 0x%" PRIx64 ") and '%s' [0x%" PRIx64 ", 0x%"
                           PRIx64 ") overlap in the file", r[k - 1].what, r[k - 1].lo,
                           r[k - 1].hi, r[k].what, r[k].lo, r[k].hi);
    free(r);
    return st;
}

/* ".text.core<N>" with N a canonical decimal 0..65535 (-1 for other names). */
static long ld_text_core(const char *name)
{
    const char *pre = ".text.core";
    size_t n = strlen(pre);
    if (strncmp(name, pre, n) != 0)
        return -1;
    const char *d = name + n;
    size_t len = strlen(d);
    if (len == 0 || len > 5 || (d[0] == '0' && len > 1))
        return -2;
    long v = 0;
    for (size_t i = 0; i < len; i++) {
        if (d[i] < '0' || d[i] > '9')
            return -2;
        v = v * 10 + (d[i] - '0');
    }
    return v <= 0xffff ? v : -2;
}

static np_status ld_classify(elf_ld *l)
{
    l->data_i = l->bss_i = l->names_i = l->note_i = l->symtab_i = l->strtab_i = -1;
    for (unsigned i = 1; i < l->shnum; i++) {
        const elf_sec *s = &l->sec[i];
        for (unsigned j = 1; j < i; j++)
            if (strcmp(l->sec[j].name, s->name) == 0)
                return LD_FORMAT("two sections are named '%s'", s->name);
        long core = ld_text_core(s->name);
        int *slot = NULL;
        uint32_t want_type = 0;
        uint64_t want_flags = 0;
        if (core == -2)
            return LD_FORMAT("section '%s': not a valid core text name (.text.core0 .. "
                             ".text.core65535)", s->name);
        if (core >= 0) {
            want_type = SHT_PROGBITS;
            want_flags = SHF_ALLOC | SHF_EXECINSTR;
            if (s->size % ISA_WORD_BYTES)
                return LD_FORMAT("section '%s': size %" PRIu64 " is not a multiple of the %d-byte "
                                 "instruction word", s->name, s->size, ISA_WORD_BYTES);
            if (s->addr != 0)
                return LD_FORMAT("section '%s': address 0x%" PRIx64 " (core text starts at 0)",
                                 s->name, s->addr);
        } else if (strcmp(s->name, ".data") == 0) {
            slot = &l->data_i, want_type = SHT_PROGBITS, want_flags = SHF_ALLOC | SHF_WRITE;
        } else if (strcmp(s->name, ".bss") == 0) {
            slot = &l->bss_i, want_type = SHT_NOBITS, want_flags = SHF_ALLOC | SHF_WRITE;
        } else if (strcmp(s->name, ".npu.names") == 0) {
            slot = &l->names_i, want_type = SHT_STRTAB;
        } else if (strcmp(s->name, ".note.npusim") == 0) {
            slot = &l->note_i, want_type = SHT_NOTE;
        } else if (strcmp(s->name, ".symtab") == 0) {
            slot = &l->symtab_i, want_type = SHT_SYMTAB;
        } else if (strcmp(s->name, ".strtab") == 0) {
            slot = &l->strtab_i, want_type = SHT_STRTAB;
        } else if (strcmp(s->name, ".shstrtab") == 0) {
            want_type = SHT_STRTAB;
            if (i != l->shstrndx)
                return LD_FORMAT("'.shstrtab' is not the section-name table (e_shstrndx)");
        } else {
            return LD_FORMAT("unexpected section '%s'", s->name);
        }
        if (s->type != want_type || s->flags != want_flags)
            return LD_FORMAT("section '%s': type %u flags 0x%" PRIx64 ", expected type %u flags "
                             "0x%" PRIx64, s->name, s->type, s->flags, want_type, want_flags);
        if (slot)
            *slot = (int)i;
    }
    if (l->note_i < 0)
        return LD_FORMAT("no '.note.npusim' section: not an npusim program");
    if (l->symtab_i >= 0) {
        const elf_sec *s = &l->sec[l->symtab_i];
        if (s->entsize != SYM_BYTES || s->size % SYM_BYTES || s->size == 0)
            return LD_FORMAT("'.symtab': entry size %" PRIu64 " and size %" PRIu64 " are not "
                             "whole %u-byte symbols", s->entsize, s->size, SYM_BYTES);
        if ((int)s->link != l->strtab_i || l->strtab_i < 0)
            return LD_FORMAT("'.symtab' does not link to '.strtab'");
    } else if (l->strtab_i >= 0) {
        return LD_FORMAT("'.strtab' without '.symtab'");
    }
    if (l->strtab_i >= 0) {
        const elf_sec *s = &l->sec[l->strtab_i];
        if (s->size == 0 || l->buf[s->offset] || l->buf[s->offset + s->size - 1])
            return LD_FORMAT("'.strtab' is not a NUL-delimited string table");
    }
    return NP_OK;
}

static np_status ld_note(elf_ld *l, uint32_t *version, isa_target *t)
{
    const elf_sec *s = &l->sec[l->note_i];
    const uint8_t *n = l->buf + s->offset;
    if (s->size != NOTE_BYTES || get32(n) != sizeof ISA_ELF_NOTE_NAME ||
        get32(n + 4) != ISA_ELF_NOTE_DESC_BYTES || get32(n + 8) != ISA_ELF_NOTE_TARGET ||
        memcmp(n + 12, ISA_ELF_NOTE_NAME, sizeof ISA_ELF_NOTE_NAME) != 0 || n[19] != 0)
        return LD_FORMAT("'.note.npusim' is not an npusim target note (want name \"%s\", type %u, "
                         "%u-byte descriptor)", ISA_ELF_NOTE_NAME, ISA_ELF_NOTE_TARGET,
                         ISA_ELF_NOTE_DESC_BYTES);
    const uint8_t *d = n + 20;
    *version = get32(d);
    if (*version != ISA_VERSION)
        return LD_FORMAT("the program is for ISA version %" PRIu32 "; this npusim implements "
                         "version %u", *version, ISA_VERSION);
    if (get32(d + 20) != 0)
        return LD_FORMAT("'.note.npusim': reserved field is 0x%x, must be 0", get32(d + 20));
    t->array_rows = get32(d + 4);
    t->array_cols = get32(d + 8);
    t->cores = get32(d + 12);
    t->dtypes = get32(d + 16);
    t->spad_bytes = get64(d + 24);
    t->acc_bytes = get64(d + 32);
    if (!t->array_rows || !t->array_cols || !t->cores || !t->spad_bytes || !t->acc_bytes ||
        (t->dtypes >> ISA_DTYPE_COUNT) || t->spad_bytes >> 63 || t->acc_bytes >> 63)
        return LD_FORMAT("'.note.npusim': the architecture fingerprint is not valid (zero sizes "
                         "or unknown dtypes)");
    return NP_OK;
}

/* The name table: '\0', then strictly increasing non-empty NUL-terminated strings. */
static np_status ld_names(elf_ld *l, isa_program *p)
{
    if (l->names_i < 0)
        return NP_OK;
    const elf_sec *s = &l->sec[l->names_i];
    const char *n = (const char *)l->buf + s->offset;
    if (s->size < 3 || n[0] || n[s->size - 1])
        return LD_FORMAT("'.npu.names' is not a NUL-delimited string table with names");
    const char *prev = NULL;
    for (size_t at = 1; at < s->size; at += strlen(n + at) + 1) {
        if (!n[at] || (prev && strcmp(prev, n + at) >= 0))
            return LD_FORMAT("'.npu.names' is not sorted, unique and free of empty names (at "
                             "offset %zu)", at);
        prev = n + at;
    }
    p->names = malloc(s->size);
    if (!p->names)
        return ld_fail(l, NP_ERR_NOMEM, "out of memory");
    memcpy(p->names, n, s->size);
    p->names_len = s->size;
    return NP_OK;
}

static int ld_cmp_core(const void *a, const void *b)
{
    uint32_t x = ((const isa_core_text *)a)->core, y = ((const isa_core_text *)b)->core;
    return x < y ? -1 : x > y;
}

static np_status ld_text(elf_ld *l, Elf *e, isa_program *p, int *core_of_sec)
{
    uint32_t n = 0;
    for (unsigned i = 1; i < l->shnum; i++)
        n += ld_text_core(l->sec[i].name) >= 0;
    p->cores = calloc(n ? n : 1, sizeof *p->cores);
    if (!p->cores)
        return ld_fail(l, NP_ERR_NOMEM, "out of memory");
    for (unsigned i = 1; i < l->shnum; i++) {
        long core = ld_text_core(l->sec[i].name);
        core_of_sec[i] = -1;
        if (core < 0)
            continue;
        Elf_Scn *scn = elf_getscn(e, i);
        Elf_Data *d = scn ? elf_getdata(scn, NULL) : NULL;
        if (l->sec[i].size && (!d || d->d_size != l->sec[i].size || !d->d_buf))
            return LD_FORMAT("section '%s': libelf cannot read it (%s)", l->sec[i].name,
                             elf_errmsg(-1));
        isa_core_text *ct = &p->cores[p->n_cores++];
        ct->core = (uint32_t)core;
        ct->n_insns = (uint32_t)(l->sec[i].size / ISA_WORD_BYTES);
        ct->insns = calloc(ct->n_insns ? ct->n_insns : 1, sizeof *ct->insns);
        if (!ct->insns)
            return ld_fail(l, NP_ERR_NOMEM, "out of memory for %" PRIu32 " instructions",
                           ct->n_insns);
        for (uint32_t k = 0; k < ct->n_insns; k++) {
            np_err de = {0};
            if (isa_decode((const uint8_t *)d->d_buf + (size_t)k * ISA_WORD_BYTES, &ct->insns[k],
                           &de) != NP_OK)
                return LD_FORMAT("section '%s', instruction %" PRIu32 " (offset 0x%" PRIx64
                                 "): %s", l->sec[i].name, k, (uint64_t)k * ISA_WORD_BYTES, de.msg);
        }
    }
    qsort(p->cores, p->n_cores, sizeof *p->cores, ld_cmp_core);
    for (uint32_t c = 1; c < p->n_cores; c++)
        if (p->cores[c].core == p->cores[c - 1].core)
            return LD_FORMAT("two text sections for core %" PRIu32, p->cores[c].core);
    for (unsigned i = 1; i < l->shnum; i++) {
        long core = ld_text_core(l->sec[i].name);
        for (uint32_t c = 0; core >= 0 && c < p->n_cores; c++)
            if (p->cores[c].core == (uint32_t)core)
                core_of_sec[i] = (int)c;
    }
    return NP_OK;
}

static np_status ld_data(elf_ld *l, Elf *e, isa_program *p, int *data_of_sec)
{
    p->data = calloc(2, sizeof *p->data);
    if (!p->data)
        return ld_fail(l, NP_ERR_NOMEM, "out of memory");
    int order[2] = {l->data_i, l->bss_i};
    for (int k = 0; k < 2; k++) {
        int i = order[k];
        if (i < 0)
            continue;
        const elf_sec *s = &l->sec[i];
        isa_data *d = &p->data[p->n_data];
        d->name = strdup(s->name);
        if (!d->name)
            return ld_fail(l, NP_ERR_NOMEM, "out of memory");
        d->addr = s->addr;
        d->size = s->size;
        data_of_sec[i] = (int)p->n_data++;
        if (k == 1)
            continue;
        Elf_Scn *scn = elf_getscn(e, (size_t)i);
        Elf_Data *ed = scn ? elf_getdata(scn, NULL) : NULL;
        if (s->size && (!ed || ed->d_size != s->size || !ed->d_buf))
            return LD_FORMAT("section '%s': libelf cannot read it (%s)", s->name, elf_errmsg(-1));
        d->bytes = malloc(s->size ? s->size : 1);
        if (!d->bytes)
            return ld_fail(l, NP_ERR_NOMEM, "out of memory");
        if (s->size)
            memcpy(d->bytes, ed->d_buf, s->size);
    }
    return NP_OK;
}

/* Stable sorts by key: qsort on (key, position in the file). */
typedef struct ld_sym_seq {
    isa_symbol sym;
    size_t seq;
} ld_sym_seq;

typedef struct ld_kernel_seq {
    isa_kernel k;
    size_t seq;
} ld_kernel_seq;

static int ld_cmp_symbol(const void *a, const void *b)
{
    const ld_sym_seq *x = a, *y = b;
    if (x->sym.data != y->sym.data)
        return x->sym.data < y->sym.data ? -1 : 1;
    if (x->sym.addr != y->sym.addr)
        return x->sym.addr < y->sym.addr ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int ld_cmp_kernel(const void *a, const void *b)
{
    const ld_kernel_seq *x = a, *y = b;
    if (x->k.start != y->k.start)
        return x->k.start < y->k.start ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static bool ld_sort_symbols(isa_program *p)
{
    size_t n = p->n_symbols;
    ld_sym_seq *t = malloc((n ? n : 1) * sizeof *t);
    if (!t)
        return false;
    for (size_t i = 0; i < n; i++)
        t[i] = (ld_sym_seq){p->symbols[i], i};
    qsort(t, n, sizeof *t, ld_cmp_symbol);
    for (size_t i = 0; i < n; i++)
        p->symbols[i] = t[i].sym;
    free(t);
    return true;
}

static bool ld_sort_kernels(isa_core_text *ct)
{
    size_t n = ct->n_kernels;
    ld_kernel_seq *t = malloc((n ? n : 1) * sizeof *t);
    if (!t)
        return false;
    for (size_t i = 0; i < n; i++)
        t[i] = (ld_kernel_seq){ct->kernels[i], i};
    qsort(t, n, sizeof *t, ld_cmp_kernel);
    for (size_t i = 0; i < n; i++)
        ct->kernels[i] = t[i].k;
    free(t);
    return true;
}

static np_status ld_symbols(elf_ld *l, Elf *e, isa_program *p, const int *core_of_sec,
                            const int *data_of_sec, isa_elf_info *info)
{
    if (l->symtab_i < 0)
        return NP_OK;
    Elf_Scn *scn = elf_getscn(e, (size_t)l->symtab_i);
    Elf_Data *d = scn ? elf_getdata(scn, NULL) : NULL;
    size_t n = (size_t)(l->sec[l->symtab_i].size / SYM_BYTES);
    if (!d)
        return LD_FORMAT("'.symtab': libelf cannot read it (%s)", elf_errmsg(-1));
    p->symbols = calloc(n, sizeof *p->symbols);
    uint32_t *n_k = calloc(p->n_cores ? p->n_cores : 1, sizeof *n_k);
    if (info)
        info->symbols = calloc(n, sizeof *info->symbols);
    if (!p->symbols || !n_k || (info && !info->symbols)) {
        free(n_k);
        return ld_fail(l, NP_ERR_NOMEM, "out of memory");
    }
    for (uint32_t c = 0; c < p->n_cores; c++) {
        p->cores[c].kernels = calloc(n, sizeof *p->cores[c].kernels);
        if (!p->cores[c].kernels) {
            free(n_k);
            return ld_fail(l, NP_ERR_NOMEM, "out of memory");
        }
    }
    np_status st = NP_OK;
    /* seq[i]: the definition order of symbol i among data symbols, to keep equal addresses in
     * file order (the order the assembler defined them). */
    for (size_t i = 0; i < n && st == NP_OK; i++) {
        GElf_Sym sym;
        if (!gelf_getsym(d, (int)i, &sym)) {
            st = LD_FORMAT("'.symtab': libelf cannot read symbol %zu (%s)", i, elf_errmsg(-1));
            break;
        }
        const char *name = elf_strptr(e, (size_t)l->strtab_i, sym.st_name);
        if (!name) {
            st = LD_FORMAT("symbol %zu: name offset %" PRIu32 " is outside '.strtab'", i,
                           sym.st_name);
            break;
        }
        unsigned type = GELF_ST_TYPE(sym.st_info), bind = GELF_ST_BIND(sym.st_info);
        if (info) {
            isa_elf_symbol_info *si = &info->symbols[info->n_symbols++];
            si->name = strdup(name);
            si->type = (uint8_t)type;
            si->bind = (uint8_t)bind;
            si->shndx = sym.st_shndx;
            si->value = sym.st_value;
            si->size = sym.st_size;
            if (!si->name) {
                st = ld_fail(l, NP_ERR_NOMEM, "out of memory");
                break;
            }
        }
        if (i == 0) {
            if (sym.st_name || sym.st_info || sym.st_other || sym.st_shndx || sym.st_value ||
                sym.st_size)
                st = LD_FORMAT("symbol 0 must be the all-zero null symbol");
            continue;
        }
        if (bind != STB_GLOBAL || sym.st_other)
            st = LD_FORMAT("symbol '%s': binding %u visibility %u (npusim symbols are global "
                           "and default)", name, bind, sym.st_other);
        else if (type == STT_FUNC) {
            int c = sym.st_shndx < l->shnum ? core_of_sec[sym.st_shndx] : -1;
            const elf_sec *s = c >= 0 ? &l->sec[sym.st_shndx] : NULL;
            if (!s)
                st = LD_FORMAT("kernel '%s' is not in a core text section", name);
            else if (sym.st_value % ISA_WORD_BYTES || sym.st_size % ISA_WORD_BYTES ||
                     sym.st_value > s->size || sym.st_size > s->size - sym.st_value)
                st = LD_FORMAT("kernel '%s' [0x%" PRIx64 ", +0x%" PRIx64 ") is not whole "
                               "instructions inside '%s'", name, sym.st_value, sym.st_size,
                               s->name);
            else {
                isa_core_text *ct = &p->cores[c];
                ct->kernels[ct->n_kernels++] = (isa_kernel){
                    strdup(name), (uint32_t)(sym.st_value / ISA_WORD_BYTES),
                    (uint32_t)(sym.st_size / ISA_WORD_BYTES)};
                if (!ct->kernels[ct->n_kernels - 1].name)
                    st = ld_fail(l, NP_ERR_NOMEM, "out of memory");
            }
        } else if (type == STT_OBJECT) {
            int k = sym.st_shndx < l->shnum && (sym.st_shndx == l->data_i || sym.st_shndx == l->bss_i)
                        ? data_of_sec[sym.st_shndx] : -1;
            if (k < 0)
                st = LD_FORMAT("data symbol '%s' is not in .data or .bss", name);
            else {
                isa_symbol *sy = &p->symbols[p->n_symbols++];
                sy->name = strdup(name);
                sy->data = (uint32_t)k;
                sy->addr = sym.st_value;
                sy->size = sym.st_size;
                if (!sy->name)
                    st = ld_fail(l, NP_ERR_NOMEM, "out of memory");
            }
        } else {
            st = LD_FORMAT("symbol '%s': type %u (npusim symbols are STT_FUNC or STT_OBJECT)",
                           name, type);
        }
    }
    free(n_k);
    if (st != NP_OK)
        return st;
    /* Canonical order; equal keys keep their order in the file. */
    bool ok = ld_sort_symbols(p);
    for (uint32_t c = 0; c < p->n_cores && ok; c++)
        ok = ld_sort_kernels(&p->cores[c]);
    if (!ok)
        return ld_fail(l, NP_ERR_NOMEM, "out of memory");
    return NP_OK;
}

/* Every name of the table is used by some instruction, at its first byte. */
static np_status ld_names_used(elf_ld *l, const isa_program *p)
{
    if (!p->names_len)
        return NP_OK;
    uint8_t *used = calloc(p->names_len, 1);
    if (!used)
        return ld_fail(l, NP_ERR_NOMEM, "out of memory");
    np_status st = NP_OK;
    for (uint32_t c = 0; c < p->n_cores && st == NP_OK; c++)
        for (uint32_t i = 0; i < p->cores[c].n_insns && st == NP_OK; i++) {
            const isa_insn *in = &p->cores[c].insns[i];
            for (unsigned f = 0; f < isa_ops[in->op].n_fields; f++) {
                if (isa_ops[in->op].fields[f].kind != ISA_KIND_NAME)
                    continue;
                int64_t o = in->opnd[f].val;
                if (o <= 0 || (uint64_t)o >= p->names_len || p->names[o - 1] != '\0') {
                    st = LD_FORMAT("core %" PRIu32 ", instruction %" PRIu32 " (%s): name offset "
                                   "%" PRId64 " is not the start of a name in '.npu.names'",
                                   p->cores[c].core, i, isa_ops[in->op].mnemonic, o);
                    break;
                }
                used[o] = 1;
            }
        }
    for (size_t at = 1; st == NP_OK && at < p->names_len; at += strlen(p->names + at) + 1)
        if (!used[at])
            st = LD_FORMAT("name \"%s\" in '.npu.names' is not used by any instruction",
                           p->names + at);
    free(used);
    return st;
}

static np_status ld_info(elf_ld *l, isa_elf_info *info)
{
    const uint8_t *b = l->buf;
    info->ei_class = b[EI_CLASS];
    info->ei_data = b[EI_DATA];
    info->ei_version = b[EI_VERSION];
    info->ei_osabi = b[EI_OSABI];
    info->type = get16(b + 16);
    info->machine = get16(b + 18);
    info->version = get32(b + 20);
    info->entry = get64(b + 24);
    info->flags = get32(b + 48);
    info->shoff = get64(b + 40);
    info->shnum = l->shnum;
    info->shstrndx = l->shstrndx;
    info->sections = calloc(l->shnum, sizeof *info->sections);
    if (!info->sections)
        return ld_fail(l, NP_ERR_NOMEM, "out of memory");
    for (unsigned i = 0; i < l->shnum; i++) {
        const elf_sec *s = &l->sec[i];
        isa_elf_section_info *o = &info->sections[info->n_sections++];
        o->name = strdup(s->name);
        if (!o->name)
            return ld_fail(l, NP_ERR_NOMEM, "out of memory");
        o->type = s->type;
        o->link = s->link;
        o->info = s->info;
        o->flags = s->flags;
        o->addr = s->addr;
        o->offset = s->offset;
        o->size = s->size;
        o->align = s->align;
        o->entsize = s->entsize;
    }
    return NP_OK;
}

void isa_elf_info_free(isa_elf_info *info)
{
    if (!info)
        return;
    for (uint32_t i = 0; i < info->n_sections; i++)
        free(info->sections[i].name);
    free(info->sections);
    for (uint32_t i = 0; i < info->n_symbols; i++)
        free(info->symbols[i].name);
    free(info->symbols);
    free(info);
}

np_status isa_elf_load_mem(const uint8_t *buf, size_t len, const char *name,
                           const isa_target *expect, isa_program **out, isa_elf_info **info,
                           np_err *err)
{
    elf_ld ld = {.buf = buf, .len = len, .file = name ? name : "<image>", .err = err};
    elf_ld *l = &ld;
    isa_program *p = NULL;
    isa_elf_info *inf = NULL;
    char *image = NULL;
    Elf *e = NULL;
    int *core_of_sec = NULL, *data_of_sec = NULL;
    *out = NULL;
    if (info)
        *info = NULL;
    np_status st = ld_header(l);
    if (st == NP_OK)
        st = ld_overlaps(l);
    if (st == NP_OK)
        st = ld_classify(l);
    uint32_t version = 0;
    isa_target t = {0};
    if (st == NP_OK)
        st = ld_note(l, &version, &t);
    char why[256];
    if (st == NP_OK && expect && !isa_target_equal(&t, expect, why, sizeof why))
        st = ld_fail(l, NP_ERR_INCONSISTENT, "the program was built for another architecture "
                     "(program vs this one): %s", why);
    if (st == NP_OK && info) {
        inf = calloc(1, sizeof *inf);
        st = inf ? ld_info(l, inf) : ld_fail(l, NP_ERR_NOMEM, "out of memory");
        if (inf) {
            inf->isa_version = version;
            inf->target = t;
        }
    }
    if (st == NP_OK) {
        p = isa_program_new(&t);
        image = malloc(len);
        core_of_sec = calloc(l->shnum, sizeof *core_of_sec);
        data_of_sec = calloc(l->shnum, sizeof *data_of_sec);
        if (!p || !image || !core_of_sec || !data_of_sec)
            st = ld_fail(l, NP_ERR_NOMEM, "out of memory");
    }
    if (st == NP_OK) {
        memcpy(image, buf, len);
        if (!elf_lib_ready() || !(e = elf_memory(image, len)) || elf_kind(e) != ELF_K_ELF)
            st = LD_FORMAT("libelf cannot read the file: %s", elf_errmsg(-1));
    }
    if (st == NP_OK)
        st = ld_names(l, p);
    if (st == NP_OK)
        st = ld_text(l, e, p, core_of_sec);
    if (st == NP_OK)
        st = ld_data(l, e, p, data_of_sec);
    if (st == NP_OK)
        st = ld_symbols(l, e, p, core_of_sec, data_of_sec, inf);
    if (st == NP_OK)
        st = ld_names_used(l, p);
    if (st == NP_OK && isa_program_validate(p, err) != NP_OK) {
        char msg[NP_ERR_MSG_MAX];
        snprintf(msg, sizeof msg, "%s", err->msg);
        st = LD_FORMAT("%s", msg);
    }
    if (e)
        elf_end(e);
    free(image);
    free(core_of_sec);
    free(data_of_sec);
    free(l->sec);
    if (st != NP_OK) {
        isa_program_free(p);
        isa_elf_info_free(inf);
        return st;
    }
    *out = p;
    if (info)
        *info = inf;
    return NP_OK;
}

np_status isa_elf_load(const char *path, const isa_target *expect, isa_program **out,
                       isa_elf_info **info, np_err *err)
{
    *out = NULL;
    if (info)
        *info = NULL;
    char *text; /* through base/readfile.h: no directory or device, at most the cap */
    size_t len;
    if (np_read_file(path, ISA_ELF_MAX_FILE_BYTES, "an ELF program", &text, &len, err) != NP_OK)
        return err->status;
    np_status st = isa_elf_load_mem((const uint8_t *)text, len, path, expect, out, info, err);
    free(text);
    return st;
}
