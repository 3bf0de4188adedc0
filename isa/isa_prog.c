/* isa_prog.c — programs: creation, lookup, the validity rules shared by the loader and the
 * writer, equality, and target fingerprints. */
#include "isa_prog.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

isa_program *isa_program_new(const isa_target *t)
{
    isa_program *p = calloc(1, sizeof *p);
    if (p && t)
        p->target = *t;
    return p;
}

void isa_program_free(isa_program *p)
{
    if (!p)
        return;
    for (uint32_t c = 0; c < p->n_cores; c++) {
        free(p->cores[c].insns);
        for (uint32_t k = 0; k < p->cores[c].n_kernels; k++)
            free(p->cores[c].kernels[k].name);
        free(p->cores[c].kernels);
    }
    free(p->cores);
    for (uint32_t d = 0; d < p->n_data; d++) {
        free(p->data[d].name);
        free(p->data[d].bytes);
    }
    free(p->data);
    for (uint32_t s = 0; s < p->n_symbols; s++)
        free(p->symbols[s].name);
    free(p->symbols);
    free(p->names);
    free(p);
}

const isa_core_text *isa_program_core(const isa_program *p, uint32_t core)
{
    for (uint32_t c = 0; c < p->n_cores; c++)
        if (p->cores[c].core == core)
            return &p->cores[c];
    return NULL;
}

const isa_symbol *isa_program_symbol(const isa_program *p, const char *name)
{
    for (uint32_t s = 0; s < p->n_symbols; s++)
        if (strcmp(p->symbols[s].name, name) == 0)
            return &p->symbols[s];
    return NULL;
}

const char *isa_program_name(const isa_program *p, int64_t off)
{
    if (!p->names || off < 0 || (uint64_t)off >= p->names_len)
        return NULL;
    if (!memchr(p->names + off, '\0', p->names_len - (size_t)off))
        return NULL;
    return p->names + off;
}

char *isa_dtypes_text(uint32_t mask, char *buf, size_t n)
{
    size_t len = 0;
    if (n)
        buf[0] = '\0';
    for (unsigned d = 0; d < ISA_DTYPE_COUNT; d++)
        if (mask & (1u << d)) {
            int k = snprintf(buf + len, len < n ? n - len : 0, "%s%s", len ? "|" : "",
                             isa_dtype_names[d]);
            if (k > 0 && len + (size_t)k < n)
                len += (size_t)k;
        }
    if (len == 0 && n)
        snprintf(buf, n, "none");
    return buf;
}

bool isa_target_equal(const isa_target *a, const isa_target *b, char *why, size_t n)
{
    size_t len = 0;
    if (n)
        why[0] = '\0';
#define ISA_DIFF_(fmt, x, y, label)                                                            \
    if ((x) != (y)) {                                                                          \
        int k = snprintf(why + len, len < n ? n - len : 0, "%s" label " " fmt " vs " fmt,     \
                         len ? ", " : "", x, y);                                               \
        if (k > 0 && len + (size_t)k < n)                                                      \
            len += (size_t)k;                                                                  \
    }
    ISA_DIFF_("%" PRIu32, a->array_rows, b->array_rows, "array_rows")
    ISA_DIFF_("%" PRIu32, a->array_cols, b->array_cols, "array_cols")
    ISA_DIFF_("%" PRIu32, a->cores, b->cores, "cores")
    ISA_DIFF_("%" PRIu64, a->spad_bytes, b->spad_bytes, "spad_bytes")
    ISA_DIFF_("%" PRIu64, a->acc_bytes, b->acc_bytes, "acc_bytes")
#undef ISA_DIFF_
    if (a->dtypes != b->dtypes) {
        char da[64], db[64];
        int k = snprintf(why + len, len < n ? n - len : 0, "%sdtypes %s vs %s", len ? ", " : "",
                         isa_dtypes_text(a->dtypes, da, sizeof da),
                         isa_dtypes_text(b->dtypes, db, sizeof db));
        if (k > 0 && len + (size_t)k < n)
            len += (size_t)k;
    }
    return a->array_rows == b->array_rows && a->array_cols == b->array_cols &&
           a->cores == b->cores && a->spad_bytes == b->spad_bytes &&
           a->acc_bytes == b->acc_bytes && a->dtypes == b->dtypes;
}

bool isa_name_ok(const char *s, size_t n)
{
    static const char *const words[] = {"spad", "hbm", "acc", "peer", "rank", "bits", "none"};
    if (n == 0 || !(isalpha((unsigned char)s[0]) || strchr("_.$", s[0])))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!(isalnum((unsigned char)s[i]) || (s[i] && strchr("_.$", s[i]))))
            return false;
    for (size_t k = 0; k < sizeof words / sizeof words[0]; k++)
        if (n == strlen(words[k]) && memcmp(s, words[k], n) == 0)
            return false;
    if (n >= 2 && (s[0] == 'r' || s[0] == 's')) {
        for (size_t i = 1; i < n; i++)
            if (!isdigit((unsigned char)s[i]))
                return true;
        return false;
    }
    return true;
}

static int isa_cmp_name(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The first name that occurs twice among names[0..n) (sorted in place), or NULL. */
static const char *isa_duplicate(const char **names, size_t n)
{
    qsort(names, n, sizeof *names, isa_cmp_name);
    for (size_t i = 1; i < n; i++)
        if (strcmp(names[i - 1], names[i]) == 0)
            return names[i];
    return NULL;
}

/* ---- Validation --------------------------------------------------------------------------------- */

static np_status isa_validate_core(const isa_program *p, const isa_core_text *ct, np_err *err)
{
    unsigned depth = 0;
    for (uint32_t i = 0; i < ct->n_insns; i++) {
        const isa_insn *in = &ct->insns[i];
        if ((unsigned)in->op == 0 || (unsigned)in->op >= ISA_OP_COUNT)
            return np_err_set(err, NP_ERR_FORMAT, "core %" PRIu32 ", instruction %" PRIu32
                              ": no such op %d", ct->core, i, (int)in->op);
        const isa_op_info *info = &isa_ops[in->op];
        for (unsigned f = 0; f < info->n_fields; f++) {
            np_status st = isa_operand_check(in->op, f, &in->opnd[f], err);
            if (st != NP_OK) {
                np_err_prefix(err, "core %" PRIu32 ", instruction %" PRIu32, ct->core, i);
                err->status = NP_ERR_FORMAT;
                return NP_ERR_FORMAT;
            }
            if (info->fields[f].kind == ISA_KIND_NAME && !isa_program_name(p, in->opnd[f].val))
                return np_err_set(err, NP_ERR_FORMAT, "core %" PRIu32 ", instruction %" PRIu32
                                  " (%s): name offset %" PRId64 " is outside the name table "
                                  "(%zu bytes)", ct->core, i, info->mnemonic, in->opnd[f].val,
                                  p->names_len);
            if (info->fields[f].kind == ISA_KIND_DTYPE && info->unit == ISA_UNIT_MXU &&
                in->op != ISA_OP_MXU_DRAIN &&
                !(p->target.dtypes & (1u << in->opnd[f].val))) {
                char have[64];
                return np_err_set(err, NP_ERR_FORMAT, "core %" PRIu32 ", instruction %" PRIu32
                                  " (%s): the target's array does not multiply %s (it does %s)",
                                  ct->core, i, info->mnemonic, isa_dtype_names[in->opnd[f].val],
                                  isa_dtypes_text(p->target.dtypes, have, sizeof have));
            }
        }
        if (in->op == ISA_OP_LOOP && ++depth > ISA_LOOP_DEPTH)
            return np_err_set(err, NP_ERR_FORMAT, "core %" PRIu32 ", instruction %" PRIu32
                              ": loops nest deeper than %d", ct->core, i, ISA_LOOP_DEPTH);
        if (in->op == ISA_OP_ENDLOOP && depth-- == 0)
            return np_err_set(err, NP_ERR_FORMAT, "core %" PRIu32 ", instruction %" PRIu32
                              ": endloop without a loop", ct->core, i);
    }
    if (depth)
        return np_err_set(err, NP_ERR_FORMAT, "core %" PRIu32 ": %u loop%s not closed by endloop",
                          ct->core, depth, depth > 1 ? "s" : "");
    for (uint32_t k = 0; k < ct->n_kernels; k++) {
        const isa_kernel *ke = &ct->kernels[k];
        if (!ke->name || !isa_name_ok(ke->name, strlen(ke->name)))
            return np_err_set(err, NP_ERR_FORMAT, "core %" PRIu32 ": kernel %" PRIu32
                              " has no valid name", ct->core, k);
        if (ke->start > ct->n_insns || ke->count > ct->n_insns - ke->start)
            return np_err_set(err, NP_ERR_FORMAT, "core %" PRIu32 ": kernel '%s' "
                              "(instructions %" PRIu32 "..+%" PRIu32 ") exceeds the %" PRIu32
                              " instructions of the core", ct->core, ke->name, ke->start,
                              ke->count, ct->n_insns);
        if (k > 0 && ke->start < ct->kernels[k - 1].start + ct->kernels[k - 1].count)
            return np_err_set(err, NP_ERR_FORMAT, "core %" PRIu32 ": kernel '%s' overlaps or "
                              "precedes kernel '%s'", ct->core, ke->name, ct->kernels[k - 1].name);
    }
    const char **names = malloc((ct->n_kernels ? ct->n_kernels : 1) * sizeof *names);
    if (!names)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory");
    for (uint32_t k = 0; k < ct->n_kernels; k++)
        names[k] = ct->kernels[k].name;
    const char *dup = isa_duplicate(names, ct->n_kernels);
    np_status st = dup ? np_err_set(err, NP_ERR_FORMAT, "core %" PRIu32 ": kernel '%s' is "
                                    "defined twice", ct->core, dup) : NP_OK;
    free(names);
    return st;
}

np_status isa_program_validate(const isa_program *p, np_err *err)
{
    if (p->names_len && (p->names[0] != '\0' || p->names[p->names_len - 1] != '\0'))
        return np_err_set(err, NP_ERR_FORMAT, "the name table must start and end with a NUL "
                          "byte");
    for (uint32_t c = 0; c < p->n_cores; c++) {
        const isa_core_text *ct = &p->cores[c];
        if (c > 0 && ct->core <= p->cores[c - 1].core)
            return np_err_set(err, NP_ERR_FORMAT, "core %" PRIu32 " appears %s", ct->core,
                              ct->core == p->cores[c - 1].core ? "twice" : "out of order");
        if (ct->core >= p->target.cores)
            return np_err_set(err, NP_ERR_FORMAT, "text for core %" PRIu32 ", but the target "
                              "has %" PRIu32 " core%s", ct->core, p->target.cores,
                              p->target.cores == 1 ? "" : "s");
        np_status st = isa_validate_core(p, ct, err);
        if (st != NP_OK)
            return st;
    }
    for (uint32_t d = 0; d < p->n_data; d++) {
        const isa_data *a = &p->data[d];
        bool is_data = a->name && strcmp(a->name, ".data") == 0;
        if (!a->name || (!is_data && strcmp(a->name, ".bss") != 0) || is_data != !!a->bytes)
            return np_err_set(err, NP_ERR_FORMAT, "data section %" PRIu32 " must be .data (with "
                              "contents) or .bss (without)", d);
        for (uint32_t e = 0; e < d; e++)
            if (strcmp(p->data[e].name, a->name) == 0)
                return np_err_set(err, NP_ERR_FORMAT, "more than one %s section", a->name);
        if (a->addr > ISA_HBM_LIMIT || a->size > ISA_HBM_LIMIT - a->addr)
            return np_err_set(err, NP_ERR_FORMAT, "data section '%s' [0x%" PRIx64 ", +0x%" PRIx64
                              ") does not lie below the HBM limit 0x%" PRIx64, a->name, a->addr,
                              a->size, ISA_HBM_LIMIT);
        for (uint32_t e = 0; e < d; e++) {
            const isa_data *b = &p->data[e];
            if (a->size && b->size && a->addr < b->addr + b->size && b->addr < a->addr + a->size)
                return np_err_set(err, NP_ERR_FORMAT, "data sections '%s' [0x%" PRIx64
                                  ", 0x%" PRIx64 ") and '%s' [0x%" PRIx64 ", 0x%" PRIx64
                                  ") overlap in HBM", b->name, b->addr, b->addr + b->size,
                                  a->name, a->addr, a->addr + a->size);
        }
    }
    for (uint32_t s = 0; s < p->n_symbols; s++) {
        const isa_symbol *sy = &p->symbols[s];
        if (!sy->name || !isa_name_ok(sy->name, strlen(sy->name)))
            return np_err_set(err, NP_ERR_FORMAT, "data symbol %" PRIu32 " has no valid name", s);
        if (sy->data >= p->n_data)
            return np_err_set(err, NP_ERR_FORMAT, "symbol '%s' is in no data section", sy->name);
        const isa_data *d = &p->data[sy->data];
        if (sy->addr < d->addr || sy->addr - d->addr > d->size ||
            sy->size > d->size - (sy->addr - d->addr))
            return np_err_set(err, NP_ERR_FORMAT, "symbol '%s' [0x%" PRIx64 ", +%" PRIu64
                              ") lies outside its section '%s'", sy->name, sy->addr, sy->size,
                              d->name);
        if (s > 0 && (sy->data < p->symbols[s - 1].data ||
                      (sy->data == p->symbols[s - 1].data && sy->addr < p->symbols[s - 1].addr)))
            return np_err_set(err, NP_ERR_FORMAT, "symbol '%s' is out of section-then-address "
                              "order", sy->name);
    }
    const char **names = malloc((p->n_symbols ? p->n_symbols : 1) * sizeof *names);
    if (!names)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory");
    for (uint32_t s = 0; s < p->n_symbols; s++)
        names[s] = p->symbols[s].name;
    const char *dup = isa_duplicate(names, p->n_symbols);
    np_status st = dup ? np_err_set(err, NP_ERR_FORMAT, "symbol '%s' is defined twice", dup)
                       : NP_OK;
    free(names);
    return st;
}

/* ---- Equality ---------------------------------------------------------------------------------- */

static bool isa_str_eq(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

bool isa_program_equal(const isa_program *a, const isa_program *b)
{
    if (memcmp(&a->target, &b->target, sizeof a->target) != 0 || a->n_cores != b->n_cores ||
        a->n_data != b->n_data || a->n_symbols != b->n_symbols ||
        a->names_len != b->names_len ||
        (a->names_len && memcmp(a->names, b->names, a->names_len) != 0))
        return false;
    for (uint32_t c = 0; c < a->n_cores; c++) {
        const isa_core_text *x = &a->cores[c], *y = &b->cores[c];
        if (x->core != y->core || x->n_insns != y->n_insns || x->n_kernels != y->n_kernels)
            return false;
        for (uint32_t i = 0; i < x->n_insns; i++)
            if (!isa_insn_equal(&x->insns[i], &y->insns[i]))
                return false;
        for (uint32_t k = 0; k < x->n_kernels; k++)
            if (!isa_str_eq(x->kernels[k].name, y->kernels[k].name) ||
                x->kernels[k].start != y->kernels[k].start ||
                x->kernels[k].count != y->kernels[k].count)
                return false;
    }
    for (uint32_t d = 0; d < a->n_data; d++) {
        const isa_data *x = &a->data[d], *y = &b->data[d];
        if (!isa_str_eq(x->name, y->name) || x->addr != y->addr || x->size != y->size ||
            !x->bytes != !y->bytes || (x->bytes && memcmp(x->bytes, y->bytes, x->size) != 0))
            return false;
    }
    for (uint32_t s = 0; s < a->n_symbols; s++) {
        const isa_symbol *x = &a->symbols[s], *y = &b->symbols[s];
        if (!isa_str_eq(x->name, y->name) || x->data != y->data || x->addr != y->addr ||
            x->size != y->size)
            return false;
    }
    return true;
}
