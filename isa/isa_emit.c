/* isa_emit.c — the emitter (see isa_emit.h): typed constructors from the table, operand
 * checks, kernels, names and HBM data of a program under construction. */
#include "isa_emit.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "isa_asm.h"

/* Per core text (parallel to prog->cores): capacity and the open kernel and loops. */
typedef struct emit_core {
    uint32_t cap;        /* allocated entries of insns */
    bool open;           /* a kernel is open */
    uint32_t open_start;
    char *open_name;
    unsigned depth;      /* open loops */
    unsigned kernel_depth; /* open loops when the kernel was opened */
} emit_core;

struct isa_emit {
    isa_program *p;
    emit_core *cs;     /* p->n_cores entries */
    uint32_t cur;      /* index into p->cores, or UINT32_MAX */
    uint64_t data_base, bss_base, hbm_limit;
    np_status status;  /* sticky */
    np_err err;
};

/* ---- errors ------------------------------------------------------------------------------- */

static np_status emit_failv(isa_emit *e, np_status s, const char *fmt, va_list ap)
{
    if (e->status != NP_OK)
        return e->status;
    char msg[NP_ERR_MSG_MAX];
    vsnprintf(msg, sizeof msg, fmt, ap);
    e->status = np_err_set(&e->err, s, "%s", msg);
    return s;
}

np_status isa_emit_fail(isa_emit *e, np_status s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    np_status st = emit_failv(e, s, fmt, ap);
    va_end(ap);
    return st;
}

/* An error at the current core's next instruction: "core 0, instruction 12 (kernel mm): ". */
static np_status emit_fail_here(isa_emit *e, const np_err *cause)
{
    if (e->status != NP_OK)
        return e->status;
    e->err = *cause;
    e->status = cause->status;
    if (e->cur != UINT32_MAX) {
        const isa_core_text *ct = &e->p->cores[e->cur];
        const emit_core *c = &e->cs[e->cur];
        if (c->open)
            np_err_prefix(&e->err, "core %" PRIu32 ", instruction %" PRIu32 " (kernel %s)",
                          ct->core, ct->n_insns, c->open_name);
        else
            np_err_prefix(&e->err, "core %" PRIu32 ", instruction %" PRIu32, ct->core,
                          ct->n_insns);
    }
    return e->status;
}

np_status isa_emit_status(const isa_emit *e, np_err *err)
{
    if (e->status != NP_OK && err)
        *err = e->err;
    return e->status;
}

/* ---- creation ----------------------------------------------------------------------------- */

np_status isa_emit_new(isa_program *p, const isa_emit_opts *opts, isa_emit **out, np_err *err)
{
    *out = NULL;
    isa_emit *e = calloc(1, sizeof *e);
    if (!e || !(e->cs = calloc(p->n_cores ? p->n_cores : 1, sizeof *e->cs))) {
        free(e);
        return np_err_set(err, NP_ERR_NOMEM, "out of memory creating an emitter");
    }
    e->p = p;
    e->cur = UINT32_MAX;
    for (uint32_t c = 0; c < p->n_cores; c++)
        e->cs[c].cap = p->cores[c].n_insns;
    e->data_base = opts && opts->data_base ? opts->data_base : ISA_EMIT_DATA_BASE;
    e->bss_base = opts && opts->bss_base ? opts->bss_base : ISA_EMIT_BSS_BASE;
    e->hbm_limit = opts && opts->hbm_bytes && opts->hbm_bytes < ISA_HBM_LIMIT ? opts->hbm_bytes
                                                                             : ISA_HBM_LIMIT;
    *out = e;
    return NP_OK;
}

void isa_emit_free(isa_emit *e)
{
    if (!e)
        return;
    for (uint32_t c = 0; c < e->p->n_cores; c++)
        free(e->cs[c].open_name);
    free(e->cs);
    free(e);
}

isa_program *isa_emit_program(const isa_emit *e) { return e->p; }

/* ---- cores -------------------------------------------------------------------------------- */

np_status isa_emit_core(isa_emit *e, uint32_t core)
{
    if (e->status != NP_OK)
        return e->status;
    isa_program *p = e->p;
    if (core >= p->target.cores)
        return isa_emit_fail(e, NP_ERR_RANGE, "core %" PRIu32 ": the target has %" PRIu32
                             " core%s", core, p->target.cores, p->target.cores == 1 ? "" : "s");
    uint32_t i = 0;
    while (i < p->n_cores && p->cores[i].core < core)
        i++;
    if (i < p->n_cores && p->cores[i].core == core) {
        e->cur = i;
        return NP_OK;
    }
    isa_core_text *nc = realloc(p->cores, (p->n_cores + 1) * sizeof *nc);
    if (nc)
        p->cores = nc;
    emit_core *ns = realloc(e->cs, (p->n_cores + 1) * sizeof *ns);
    if (ns)
        e->cs = ns;
    if (!nc || !ns)
        return isa_emit_fail(e, NP_ERR_NOMEM, "out of memory adding core %" PRIu32, core);
    memmove(&p->cores[i + 1], &p->cores[i], (p->n_cores - i) * sizeof *nc);
    memmove(&e->cs[i + 1], &e->cs[i], (p->n_cores - i) * sizeof *ns);
    p->cores[i] = (isa_core_text){.core = core};
    e->cs[i] = (emit_core){0};
    p->n_cores++;
    e->cur = i;
    return NP_OK;
}

uint32_t isa_emit_cur_core(const isa_emit *e)
{
    return e->cur == UINT32_MAX ? UINT32_MAX : e->p->cores[e->cur].core;
}

uint32_t isa_emit_pc(const isa_emit *e)
{
    return e->cur == UINT32_MAX ? 0 : e->p->cores[e->cur].n_insns;
}

unsigned isa_emit_loop_depth(const isa_emit *e)
{
    return e->cur == UINT32_MAX ? 0 : e->cs[e->cur].depth;
}

/* ---- instructions ------------------------------------------------------------------------- */

np_status isa_emit_insn(isa_emit *e, const isa_insn *in)
{
    if (e->status != NP_OK)
        return e->status;
    if (e->cur == UINT32_MAX)
        return isa_emit_fail(e, NP_ERR_INCONSISTENT, "no core to append to (isa_emit_core)");
    np_err cause = {0};
    if ((unsigned)in->op == 0 || (unsigned)in->op >= ISA_OP_COUNT) {
        np_err_set(&cause, NP_ERR_TYPE, "no such op %d", (int)in->op);
        return emit_fail_here(e, &cause);
    }
    const isa_op_info *info = &isa_ops[in->op];
    for (unsigned i = 0; i < info->n_fields; i++)
        if (isa_operand_check(in->op, i, &in->opnd[i], &cause) != NP_OK)
            return emit_fail_here(e, &cause);
    isa_core_text *ct = &e->p->cores[e->cur];
    emit_core *c = &e->cs[e->cur];
    if (in->op == ISA_OP_LOOP && c->depth >= ISA_LOOP_DEPTH) {
        np_err_set(&cause, NP_ERR_FORMAT, "loops nest deeper than %d", ISA_LOOP_DEPTH);
        return emit_fail_here(e, &cause);
    }
    if (in->op == ISA_OP_ENDLOOP && (c->depth == 0 || (c->open && c->depth <= c->kernel_depth))) {
        np_err_set(&cause, NP_ERR_FORMAT, "endloop without a loop%s",
                   c->depth ? " opened in this kernel" : "");
        return emit_fail_here(e, &cause);
    }
    if (ct->n_insns >= ISA_ASM_MAX_INSNS) {
        np_err_set(&cause, NP_ERR_RANGE, "more than %u instructions on one core; use loops or "
                   "larger tiles", ISA_ASM_MAX_INSNS);
        return emit_fail_here(e, &cause);
    }
    if (ct->n_insns == c->cap) {
        uint32_t ncap = c->cap < 64 ? 64 : c->cap * 2;
        isa_insn *ni = realloc(ct->insns, (size_t)ncap * sizeof *ni);
        if (!ni)
            return isa_emit_fail(e, NP_ERR_NOMEM, "out of memory appending an instruction");
        ct->insns = ni;
        c->cap = ncap;
    }
    isa_insn *slot = &ct->insns[ct->n_insns++];
    memset(slot, 0, sizeof *slot);
    slot->op = in->op;
    memcpy(slot->opnd, in->opnd, info->n_fields * sizeof(isa_opnd));
    if (in->op == ISA_OP_LOOP)
        c->depth++;
    else if (in->op == ISA_OP_ENDLOOP)
        c->depth--;
    return NP_OK;
}

/* Fills op's optional operands that are all zero with their defaults, then appends. */
static np_status emit_with_defaults(isa_emit *e, isa_op op, const isa_opnd *ops)
{
    isa_insn in;
    memset(&in, 0, sizeof in);
    in.op = op;
    const isa_op_info *info = &isa_ops[op];
    static const isa_opnd zero = {0};
    for (unsigned i = 0; i < info->n_fields; i++) {
        in.opnd[i] = ops[i];
        if (info->fields[i].optional && memcmp(&ops[i], &zero, sizeof zero) == 0)
            in.opnd[i].val = info->fields[i].dflt;
    }
    return isa_emit_insn(e, &in);
}

#define ISA_OP(NAME, mnemonic, opcode, UNIT, FAMILY, COST, fields, semantics, timing)          \
    np_status isa_emit_##NAME(isa_emit *e, isa_args_##NAME a)                                \
    {                                                                                        \
        return emit_with_defaults(e, ISA_OP_##NAME, (const isa_opnd *)(const void *)&a);     \
    }
#include "isa.def"

/* ---- kernels ------------------------------------------------------------------------------ */

bool isa_emit_has_kernel(const isa_emit *e, uint32_t core, const char *name)
{
    const isa_core_text *ct = isa_program_core(e->p, core);
    if (!ct)
        return false;
    for (uint32_t k = 0; k < ct->n_kernels; k++)
        if (strcmp(ct->kernels[k].name, name) == 0)
            return true;
    for (uint32_t c = 0; c < e->p->n_cores; c++)
        if (e->p->cores[c].core == core && e->cs[c].open && strcmp(e->cs[c].open_name, name) == 0)
            return true;
    return false;
}

np_status isa_emit_kernel_begin(isa_emit *e, const char *name)
{
    if (e->status != NP_OK)
        return e->status;
    if (e->cur == UINT32_MAX)
        return isa_emit_fail(e, NP_ERR_INCONSISTENT, "kernel '%s': no core to append to "
                             "(isa_emit_core)", name);
    emit_core *c = &e->cs[e->cur];
    uint32_t core = e->p->cores[e->cur].core;
    if (!name || !isa_name_ok(name, strlen(name)))
        return isa_emit_fail(e, NP_ERR_TYPE, "kernel name '%s' is not an identifier (letters, "
                             "digits, _ . $; not a register or keyword)", name ? name : "");
    if (c->open)
        return isa_emit_fail(e, NP_ERR_INCONSISTENT, "core %" PRIu32 ": kernel '%s' begins "
                             "inside kernel '%s' (kernels do not nest)", core, name, c->open_name);
    if (isa_emit_has_kernel(e, core, name))
        return isa_emit_fail(e, NP_ERR_DUPLICATE, "core %" PRIu32 ": kernel '%s' is defined "
                             "twice", core, name);
    char *copy = strdup(name);
    if (!copy)
        return isa_emit_fail(e, NP_ERR_NOMEM, "out of memory");
    c->open = true;
    c->open_name = copy;
    c->open_start = e->p->cores[e->cur].n_insns;
    c->kernel_depth = c->depth;
    return NP_OK;
}

np_status isa_emit_kernel_end(isa_emit *e)
{
    if (e->status != NP_OK)
        return e->status;
    if (e->cur == UINT32_MAX || !e->cs[e->cur].open)
        return isa_emit_fail(e, NP_ERR_INCONSISTENT, "kernel end without a kernel begin on "
                             "core %" PRIu32, isa_emit_cur_core(e));
    emit_core *c = &e->cs[e->cur];
    isa_core_text *ct = &e->p->cores[e->cur];
    if (c->depth != c->kernel_depth)
        return isa_emit_fail(e, NP_ERR_INCONSISTENT, "core %" PRIu32 ": kernel '%s' ends with "
                             "%u loop%s open", ct->core, c->open_name, c->depth - c->kernel_depth,
                             c->depth - c->kernel_depth == 1 ? "" : "s");
    isa_kernel *nk = realloc(ct->kernels, (ct->n_kernels + 1) * sizeof *nk);
    if (!nk)
        return isa_emit_fail(e, NP_ERR_NOMEM, "out of memory");
    ct->kernels = nk;
    nk[ct->n_kernels++] = (isa_kernel){c->open_name, c->open_start, ct->n_insns - c->open_start};
    c->open_name = NULL;
    c->open = false;
    return NP_OK;
}

/* ---- names -------------------------------------------------------------------------------- */

np_status isa_emit_name(isa_emit *e, const char *s, isa_opnd *out)
{
    *out = isa_imm(0);
    if (e->status != NP_OK)
        return e->status;
    size_t n = strlen(s);
    if (n > ISA_ASM_MAX_NAME)
        return isa_emit_fail(e, NP_ERR_RANGE, "a name of %zu bytes, more than %u", n,
                             ISA_ASM_MAX_NAME);
    isa_program *p = e->p;
    for (size_t off = 1; off < p->names_len; off += strlen(p->names + off) + 1)
        if (strcmp(p->names + off, s) == 0) {
            *out = isa_imm((int64_t)off);
            return NP_OK;
        }
    size_t base = p->names_len ? p->names_len : 1;
    char *nn = realloc(p->names, base + n + 1);
    if (!nn)
        return isa_emit_fail(e, NP_ERR_NOMEM, "out of memory");
    nn[0] = '\0';
    memcpy(nn + base, s, n + 1);
    p->names = nn;
    p->names_len = base + n + 1;
    *out = isa_imm((int64_t)base);
    return NP_OK;
}

/* ---- data --------------------------------------------------------------------------------- */

static int data_find(const isa_program *p, const char *name)
{
    for (uint32_t d = 0; d < p->n_data; d++)
        if (strcmp(p->data[d].name, name) == 0)
            return (int)d;
    return -1;
}

/* Appends bytes (NULL: zeros) to section sec (".data" or ".bss"), named name (or not). */
static np_status data_alloc(isa_emit *e, const char *sec, const char *name, const void *bytes,
                            uint64_t n, uint64_t align, uint64_t *addr)
{
    *addr = 0;
    if (e->status != NP_OK)
        return e->status;
    isa_program *p = e->p;
    if (align == 0)
        align = 64;
    if (n == 0 || (align & (align - 1)))
        return isa_emit_fail(e, NP_ERR_RANGE, "%s '%s': %" PRIu64 " bytes aligned to %" PRIu64
                             " (need >= 1 byte and a power-of-two alignment)", sec,
                             name ? name : "", n, align);
    if (name && !isa_name_ok(name, strlen(name)))
        return isa_emit_fail(e, NP_ERR_TYPE, "symbol name '%s' is not an identifier", name);
    if (name && isa_program_symbol(p, name))
        return isa_emit_fail(e, NP_ERR_DUPLICATE, "symbol '%s' is defined twice", name);
    bool is_data = strcmp(sec, ".data") == 0;
    int d = data_find(p, sec);
    uint64_t start = d >= 0 ? p->data[d].addr : is_data ? e->data_base : e->bss_base;
    uint64_t end = d >= 0 ? start + p->data[d].size : start;
    uint64_t at = (end + align - 1) & ~(align - 1);
    if (at < end || at + n < at || at + n > e->hbm_limit)
        return isa_emit_fail(e, NP_ERR_RANGE, "%s '%s': %" PRIu64 " bytes at 0x%" PRIx64
                             " do not fit below the HBM limit 0x%" PRIx64, sec, name ? name : "",
                             n, at, e->hbm_limit);
    int other = data_find(p, is_data ? ".bss" : ".data");
    if (other >= 0) {
        uint64_t lo = p->data[other].addr, hi = lo + p->data[other].size;
        if (start < (hi > lo ? hi : lo + 1) && lo < at + n)
            return isa_emit_fail(e, NP_ERR_RANGE, "%s '%s': %" PRIu64 " bytes at 0x%" PRIx64
                                 " would reach the %s section at 0x%" PRIx64 "; start the "
                                 "sections further apart (isa_emit_opts)", sec,
                                 name ? name : "", n, at, is_data ? ".bss" : ".data", lo);
    }
    if (d < 0) {
        isa_data *nd = realloc(p->data, (p->n_data + 1) * sizeof *nd);
        if (!nd)
            return isa_emit_fail(e, NP_ERR_NOMEM, "out of memory");
        p->data = nd;
        char *dn = strdup(sec);
        if (!dn)
            return isa_emit_fail(e, NP_ERR_NOMEM, "out of memory");
        nd[p->n_data] = (isa_data){dn, start, 0, NULL};
        d = (int)p->n_data++;
    }
    isa_data *sd = &p->data[d];
    uint64_t new_size = at + n - sd->addr;
    if (is_data) {
        uint8_t *nb = realloc(sd->bytes, new_size);
        if (!nb)
            return isa_emit_fail(e, NP_ERR_NOMEM, "out of memory for %" PRIu64 " bytes of .data",
                                 new_size);
        memset(nb + sd->size, 0, new_size - sd->size);
        memcpy(nb + (at - sd->addr), bytes, n);
        sd->bytes = nb;
    }
    sd->size = new_size;
    if (name) {
        isa_symbol *ns = realloc(p->symbols, (p->n_symbols + 1) * sizeof *ns);
        char *sn = strdup(name);
        if (ns)
            p->symbols = ns;
        if (!ns || !sn) {
            free(sn);
            return isa_emit_fail(e, NP_ERR_NOMEM, "out of memory");
        }
        /* section-then-address order: after every symbol of this or an earlier section */
        uint32_t pos = 0;
        while (pos < p->n_symbols && p->symbols[pos].data <= (uint32_t)d)
            pos++;
        memmove(&p->symbols[pos + 1], &p->symbols[pos], (p->n_symbols - pos) * sizeof *ns);
        p->symbols[pos] = (isa_symbol){sn, (uint32_t)d, at, n};
        p->n_symbols++;
    }
    *addr = at;
    return NP_OK;
}

np_status isa_emit_bss(isa_emit *e, const char *name, uint64_t bytes, uint64_t align,
                       uint64_t *addr)
{
    return data_alloc(e, ".bss", name, NULL, bytes, align, addr);
}

np_status isa_emit_data(isa_emit *e, const char *name, const void *data, uint64_t bytes,
                        uint64_t align, uint64_t *addr)
{
    return data_alloc(e, ".data", name, data, bytes, align, addr);
}

/* ---- finishing ---------------------------------------------------------------------------- */

np_status isa_emit_finish(isa_emit *e, np_err *err)
{
    if (e->status != NP_OK)
        return isa_emit_status(e, err);
    for (uint32_t c = 0; c < e->p->n_cores; c++) {
        if (e->cs[c].open)
            return np_err_set(err, NP_ERR_INCONSISTENT, "core %" PRIu32 ": kernel '%s' is not "
                              "ended", e->p->cores[c].core, e->cs[c].open_name);
        if (e->cs[c].depth)
            return np_err_set(err, NP_ERR_INCONSISTENT, "core %" PRIu32 ": %u loop%s not closed "
                              "by endloop", e->p->cores[c].core, e->cs[c].depth,
                              e->cs[c].depth == 1 ? "" : "s");
    }
    return isa_program_validate(e->p, err);
}
