/* isa.c — the tables derived from isa.def, the encoder and decoder, operand checks, and the
 * one-instruction formatter (the disassembler's core).
 *
 * Encoding and decoding walk the field table of the op: nothing here names an instruction.
 * Both directions share one validity check (isa_operand_check), so a word decodes exactly
 * when it is what the encoder would produce for some instruction.
 */
#include "isa.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* ---- Compile-time checks of the table ------------------------------------------------------ */

#define F(name, KIND, bits) +1
#define O(name, KIND, bits, dflt) +1
#define ISA_OP(NAME, mnemonic, opcode, UNIT, FAMILY, COST, fields, semantics, timing)              \
    _Static_assert((0 fields) <= ISA_MAX_OPNDS, #NAME ": more fields than ISA_MAX_OPNDS");     \
    _Static_assert(offsetof(isa_args_##NAME, end_) == (0 fields) * sizeof(isa_opnd),            \
                   #NAME ": operand view is not an array of isa_opnd");
#include "isa.def"

#define F(name, KIND, bits) +(bits)
#define O(name, KIND, bits, dflt) +(bits)
#define ISA_OP(NAME, mnemonic, opcode, UNIT, FAMILY, COST, fields, semantics, timing)              \
    _Static_assert(ISA_POS_FIELDS + (0 fields) <= ISA_WORD_BITS, #NAME ": fields exceed the word"); \
    _Static_assert((opcode) > 0 && (opcode) < 256, #NAME ": opcode must be 1..255");
#include "isa.def"

_Static_assert(sizeof(isa_opnd) == 16, "isa_opnd must have no padding");
_Static_assert(ISA_UNIT_DMA == 0 && ISA_UNIT_MXU == 1 && ISA_UNIT_VPU == 2 && ISA_UNIT_COMM == 3,
               "the first ISA_N_QUEUES units are the queues");

/* ---- Tables ---------------------------------------------------------------------------------- */

#define F(name, KIND, bits) {#name, ISA_KIND_##KIND, bits, false, 0},
#define O(name, KIND, bits, dflt) {#name, ISA_KIND_##KIND, bits, true, dflt},
#define ISA_OP(NAME, mnemonic, opcode, UNIT, FAMILY, COST, fields, semantics, timing)              \
    static const isa_field isa_fields_##NAME[] = {fields{NULL, ISA_KIND_COUNT, 0, false, 0}};
#include "isa.def"

#define F(name, KIND, bits) +1
#define O(name, KIND, bits, dflt) +1
const isa_op_info isa_ops[ISA_OP_COUNT] = {
    [ISA_OP_ILLEGAL] = {"ILLEGAL", NULL, 0, ISA_UNIT_CTRL, ISA_FAMILY_CTRL, ISA_COST_NONE, 0, NULL,
                        NULL, NULL},
#define ISA_OP(NAME, mnemonic, opcode, UNIT, FAMILY, COST, fields, semantics, timing)              \
    [ISA_OP_##NAME] = {#NAME, mnemonic, opcode, ISA_UNIT_##UNIT, ISA_FAMILY_##FAMILY,         \
                       ISA_COST_##COST, (0 fields), isa_fields_##NAME, semantics, timing},
#include "isa.def"
};

/* opcode -> op; a duplicate opcode in isa.def is a duplicate initializer (-Woverride-init). */
static const uint8_t isa_op_of_opcode[256] = {
#define ISA_OP(NAME, mnemonic, opcode, UNIT, FAMILY, COST, fields, semantics, timing) \
    [opcode] = ISA_OP_##NAME,
#include "isa.def"
};
_Static_assert(ISA_OP_COUNT <= 256, "ops must fit the opcode map");

const char *const isa_unit_names[ISA_UNIT_COUNT] = {
#define ISA_UNIT(NAME, text, doc) [ISA_UNIT_##NAME] = text,
#include "isa.def"
};
const char *const isa_unit_docs[ISA_UNIT_COUNT] = {
#define ISA_UNIT(NAME, text, doc) [ISA_UNIT_##NAME] = doc,
#include "isa.def"
};
const char *const isa_dtype_names[ISA_DTYPE_COUNT] = {
#define ISA_DTYPE(NAME, text, bytes, doc) [ISA_DTYPE_##NAME] = text,
#include "isa.def"
};
const char *const isa_dtype_docs[ISA_DTYPE_COUNT] = {
#define ISA_DTYPE(NAME, text, bytes, doc) [ISA_DTYPE_##NAME] = doc,
#include "isa.def"
};
const uint8_t isa_dtype_size[ISA_DTYPE_COUNT] = {
#define ISA_DTYPE(NAME, text, bytes, doc) [ISA_DTYPE_##NAME] = bytes,
#include "isa.def"
};

const char *const isa_family_names[ISA_FAMILY_COUNT] = {
#define ISA_FAMILY(NAME, text, doc) [ISA_FAMILY_##NAME] = text,
#include "isa.def"
};
const char *const isa_family_docs[ISA_FAMILY_COUNT] = {
#define ISA_FAMILY(NAME, text, doc) [ISA_FAMILY_##NAME] = doc,
#include "isa.def"
};
const char *const isa_peer_form_syntax[ISA_PEER_FORM_COUNT] = {
#define ISA_PEER_FORM(NAME, syntax, doc) [ISA_PEER_FORM_##NAME] = syntax,
#include "isa.def"
};
const char *const isa_peer_form_docs[ISA_PEER_FORM_COUNT] = {
#define ISA_PEER_FORM(NAME, syntax, doc) [ISA_PEER_FORM_##NAME] = doc,
#include "isa.def"
};
_Static_assert(ISA_PEER_FORM_COUNT <= (1 << ISA_SIZE_PEER_FORM), "PEER forms must fit the form bits");
_Static_assert(ISA_PEER_FORM_CHIP == 0, "an all-zero PEER is peer(0, 0)");

static const char *const isa_act_names[] = {
#define ISA_ACT(NAME, text, doc) [ISA_ACT_##NAME] = text,
#include "isa.def"
};
static const char *const isa_bcast_names[] = {
#define ISA_BCAST(NAME, text, doc) [ISA_BCAST_##NAME] = text,
#include "isa.def"
};
static const char *const isa_red_names[] = {
#define ISA_RED(NAME, text, doc) [ISA_RED_##NAME] = text,
#include "isa.def"
};
static const char *const isa_accm_names[] = {
#define ISA_ACCM(NAME, text, doc) [ISA_ACCM_##NAME] = text,
#include "isa.def"
};

/* Value names of each enumerated kind (the UNIT kind names the queues only). */
#define ISA_KIND_VALUES_UNIT isa_unit_names, ISA_N_QUEUES
#define ISA_KIND_VALUES_DTYPE isa_dtype_names, ISA_DTYPE_COUNT
#define ISA_KIND_VALUES_ACT isa_act_names, ISA_ACT_COUNT
#define ISA_KIND_VALUES_BCAST isa_bcast_names, ISA_BCAST_COUNT
#define ISA_KIND_VALUES_RED isa_red_names, ISA_RED_COUNT
#define ISA_KIND_VALUES_ACCM isa_accm_names, ISA_ACCM_COUNT

static const struct {
    const char *const *values;
    unsigned n;
} isa_kind_values[ISA_KIND_COUNT] = {
    [ISA_KIND_UNIT] = {ISA_KIND_VALUES_UNIT},   [ISA_KIND_DTYPE] = {ISA_KIND_VALUES_DTYPE},
    [ISA_KIND_ACT] = {ISA_KIND_VALUES_ACT},     [ISA_KIND_BCAST] = {ISA_KIND_VALUES_BCAST},
    [ISA_KIND_RED] = {ISA_KIND_VALUES_RED},     [ISA_KIND_ACCM] = {ISA_KIND_VALUES_ACCM},
};

const isa_kind_info isa_kinds[ISA_KIND_COUNT] = {
#define ISA_KIND(NAME, bits, syntax, doc) [ISA_KIND_##NAME] = {#NAME, bits, syntax, doc},
#include "isa.def"
};

/* ---- Lookups --------------------------------------------------------------------------------- */

isa_op isa_op_find(const char *mnemonic)
{
    for (int op = 1; op < ISA_OP_COUNT; op++)
        if (strcmp(isa_ops[op].mnemonic, mnemonic) == 0)
            return (isa_op)op;
    return ISA_OP_ILLEGAL;
}

isa_op isa_op_by_opcode(unsigned opcode)
{
    return opcode < 256 ? (isa_op)isa_op_of_opcode[opcode] : ISA_OP_ILLEGAL;
}

int isa_field_find(isa_op op, const char *name)
{
    if ((unsigned)op >= ISA_OP_COUNT)
        return -1;
    for (unsigned i = 0; i < isa_ops[op].n_fields; i++)
        if (strcmp(isa_ops[op].fields[i].name, name) == 0)
            return (int)i;
    return -1;
}

unsigned isa_field_pos(isa_op op, unsigned i)
{
    unsigned pos = ISA_POS_FIELDS;
    for (unsigned j = 0; j < i && j < isa_ops[op].n_fields; j++)
        pos += isa_ops[op].fields[j].bits;
    return pos;
}

isa_unit isa_insn_queue(const isa_insn *in)
{
    isa_unit u = isa_ops[in->op].unit;
    if (u == ISA_UNIT_SYNC) {
        int i = isa_field_find(in->op, "unit");
        return i >= 0 ? (isa_unit)in->opnd[i].val : ISA_UNIT_CTRL;
    }
    return u;
}

const char *const *isa_kind_values_of(isa_kind k, unsigned *n)
{
    if ((unsigned)k >= ISA_KIND_COUNT) {
        *n = 0;
        return NULL;
    }
    *n = isa_kind_values[k].n;
    return isa_kind_values[k].values;
}

/* ---- Constructors ---------------------------------------------------------------------------- */

void isa_insn_init(isa_insn *in, isa_op op)
{
    memset(in, 0, sizeof *in);
    in->op = op;
    if ((unsigned)op >= ISA_OP_COUNT)
        return;
    for (unsigned i = 0; i < isa_ops[op].n_fields; i++)
        if (isa_ops[op].fields[i].optional)
            in->opnd[i].val = isa_ops[op].fields[i].dflt;
}

isa_opnd isa_imm(int64_t v)
{
    return (isa_opnd){.val = v};
}

isa_opnd isa_reg(unsigned r)
{
    return (isa_opnd){.reg = (uint8_t)r};
}

isa_opnd isa_f32(float f)
{
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    return (isa_opnd){.val = bits};
}

float isa_opnd_f32(const isa_opnd *o)
{
    uint32_t bits = (uint32_t)o->val;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

isa_opnd isa_spad(unsigned reg, uint64_t off)
{
    return (isa_opnd){.val = (int64_t)off, .reg = (uint8_t)reg, .space = ISA_SPACE_SPAD};
}

isa_opnd isa_acc(unsigned reg, uint64_t off)
{
    return (isa_opnd){.val = (int64_t)off, .reg = (uint8_t)reg, .space = ISA_SPACE_ACC};
}

isa_opnd isa_hbm(unsigned reg, uint64_t off)
{
    return (isa_opnd){.val = (int64_t)off, .reg = (uint8_t)reg, .space = ISA_SPACE_HBM};
}

isa_opnd isa_peer(uint32_t chip, uint32_t core)
{
    return (isa_opnd){.val = chip, .core = core};
}

isa_opnd isa_peer_rel(isa_peer_form form, unsigned g, unsigned reg, int64_t off, uint32_t core)
{
    return (isa_opnd){.val = off, .core = core, .reg = (uint8_t)reg, .form = (uint8_t)form,
                      .group = (uint8_t)g};
}

isa_opnd isa_step(unsigned reg, int64_t step)
{
    return (isa_opnd){.val = step, .reg = (uint8_t)reg};
}

isa_opnd isa_val(unsigned reg, int64_t off)
{
    return (isa_opnd){.val = off, .reg = (uint8_t)reg};
}

bool isa_insn_equal(const isa_insn *a, const isa_insn *b)
{
    if (a->op != b->op || (unsigned)a->op >= ISA_OP_COUNT)
        return false;
    return memcmp(a->opnd, b->opnd, isa_ops[a->op].n_fields * sizeof(isa_opnd)) == 0;
}

/* ---- Operand checks -------------------------------------------------------------------------- */

static uint64_t isa_mask(unsigned bits)
{
    return bits >= 64 ? UINT64_MAX : ((uint64_t)1 << bits) - 1;
}

static const char *isa_space_name(unsigned s)
{
    static const char *const names[ISA_SPACE_COUNT] = {"none", "spad", "hbm", "acc"};
    return s < ISA_SPACE_COUNT ? names[s] : "?";
}

/* Checks that o's members other than those listed are zero. */
static np_status isa_check_stray(const char *what, const isa_opnd *o, bool val, bool reg,
                                 bool core, bool space, np_err *err)
{
    if ((!val && o->val) || (!reg && o->reg) || (!core && o->core) || (!space && o->space) ||
        o->form || o->group)
        return np_err_set(err, NP_ERR_TYPE, "%s: members set that this kind does not use", what);
    return NP_OK;
}

static np_status isa_check_unsigned(const char *what, int64_t v, uint64_t lo, uint64_t hi,
                                    bool hex, np_err *err)
{
    if (v < 0 || (uint64_t)v < lo || (uint64_t)v > hi) {
        if (hex)
            return np_err_set(err, NP_ERR_RANGE, "%s: %s0x%" PRIx64 " is out of range 0x%" PRIx64
                              "..0x%" PRIx64, what, v < 0 ? "-" : "",
                              v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v, lo, hi);
        return np_err_set(err, NP_ERR_RANGE, "%s: %" PRId64 " is out of range %" PRIu64 "..%" PRIu64,
                          what, v, lo, hi);
    }
    return NP_OK;
}

static np_status isa_check_addr(const char *what, const isa_opnd *o, unsigned space_ok_mask,
                                unsigned off_bits, np_err *err)
{
    if (o->space >= ISA_SPACE_COUNT || !(space_ok_mask & (1u << o->space))) {
        char allowed[64] = "";
        for (unsigned s = 0; s < ISA_SPACE_COUNT; s++)
            if (space_ok_mask & (1u << s)) {
                if (allowed[0])
                    strcat(allowed, " or ");
                strcat(allowed, isa_space_name(s));
            }
        return np_err_set(err, NP_ERR_TYPE, "%s: expected a %s address, got %s", what, allowed,
                          o->space == ISA_SPACE_NONE ? "no address" : isa_space_name(o->space));
    }
    if (o->space == ISA_SPACE_NONE) {
        if (o->reg || o->val || o->core || o->form || o->group)
            return np_err_set(err, NP_ERR_TYPE, "%s: absent (none), but its register or offset "
                              "bits are set", what);
        return NP_OK;
    }
    if (o->reg >= ISA_N_REGS)
        return np_err_set(err, NP_ERR_RANGE, "%s: register r%u does not exist (r0..r15)", what,
                          o->reg);
    np_status st = isa_check_unsigned(what, o->val, 0, isa_mask(off_bits), true, err);
    if (st != NP_OK)
        return st;
    return isa_check_stray(what, o, true, true, false, true, err);
}

/* isa_operand_check with what naming the operand in messages. */
static np_status isa_operand_check_as(isa_op op, unsigned i, const isa_opnd *o,
                                      const char *what, np_err *err)
{
    const isa_field *f = &isa_ops[op].fields[i];
    unsigned n_values;
    const char *const *values;
    np_status st;
    switch (f->kind) {
    case ISA_KIND_REG:
        if (o->reg >= ISA_N_REGS)
            return np_err_set(err, NP_ERR_RANGE, "%s: register r%u does not exist (r0..r15)",
                              what, o->reg);
        return isa_check_stray(what, o, false, true, false, false, err);
    case ISA_KIND_UIMM:
    case ISA_KIND_STRIDE:
    case ISA_KIND_F32:
    case ISA_KIND_BOOL:
    case ISA_KIND_SEM:
    case ISA_KIND_NAME:
        st = isa_check_unsigned(what, o->val, 0, isa_mask(f->bits), false, err);
        return st ? st : isa_check_stray(what, o, true, false, false, false, err);
    case ISA_KIND_CNT:
        st = isa_check_unsigned(what, o->val, 1, isa_mask(f->bits), false, err);
        return st ? st : isa_check_stray(what, o, true, false, false, false, err);
    case ISA_KIND_SIMM:
        if (f->bits < 64) {
            int64_t lo = -((int64_t)1 << (f->bits - 1)), hi = ((int64_t)1 << (f->bits - 1)) - 1;
            if (o->val < lo || o->val > hi)
                return np_err_set(err, NP_ERR_RANGE, "%s: %" PRId64 " is out of range %" PRId64
                                  "..%" PRId64, what, o->val, lo, hi);
        }
        return isa_check_stray(what, o, true, false, false, false, err);
    case ISA_KIND_UNIT:
    case ISA_KIND_DTYPE:
    case ISA_KIND_ACT:
    case ISA_KIND_BCAST:
    case ISA_KIND_RED:
    case ISA_KIND_ACCM:
        values = isa_kind_values_of(f->kind, &n_values);
        (void)values;
        if (o->val < 0 || o->val >= (int64_t)n_values)
            return np_err_set(err, NP_ERR_RANGE, "%s: %" PRId64 " is not a %s (0..%u)", what,
                              o->val, isa_kinds[f->kind].name, n_values - 1);
        return isa_check_stray(what, o, true, false, false, false, err);
    case ISA_KIND_PEER: {
        if (o->core > isa_mask(ISA_SIZE_CORE))
            return np_err_set(err, NP_ERR_RANGE, "%s: core %u is out of range 0..%" PRIu64, what,
                              o->core, isa_mask(ISA_SIZE_CORE));
        if (o->space)
            return np_err_set(err, NP_ERR_TYPE, "%s: members set that this kind does not use",
                              what);
        if (o->form == ISA_PEER_FORM_CHIP) {
            if (o->reg || o->group)
                return np_err_set(err, NP_ERR_TYPE, "%s: a peer given by chip number has no "
                                  "group or register", what);
            return isa_check_unsigned(what, o->val, 0, isa_mask(ISA_SIZE_CHIP), false, err);
        }
        if (o->form >= ISA_PEER_FORM_COUNT)
            return np_err_set(err, NP_ERR_RANGE, "%s: peer form %u does not exist (0..%u)", what,
                              o->form, ISA_PEER_FORM_COUNT - 1);
        if (o->group >= ISA_N_GROUPS)
            return np_err_set(err, NP_ERR_RANGE, "%s: group g%u does not exist (g0..g%u)", what,
                              o->group, ISA_N_GROUPS - 1);
        if (o->reg >= ISA_N_REGS)
            return np_err_set(err, NP_ERR_RANGE, "%s: register r%u does not exist (r0..r15)",
                              what, o->reg);
        int64_t lim = (int64_t)1 << (ISA_SIZE_CHIP - 1);
        if (o->val < -lim || o->val > lim - 1)
            return np_err_set(err, NP_ERR_RANGE, "%s: rank offset %" PRId64 " is out of range "
                              "%" PRId64 "..%" PRId64, what, o->val, -lim, lim - 1);
        return NP_OK;
    }
    case ISA_KIND_SPAD:
        return isa_check_addr(what, o, 1u << ISA_SPACE_SPAD, ISA_SIZE_SPAD_OFF, err);
    case ISA_KIND_ACC:
        return isa_check_addr(what, o, 1u << ISA_SPACE_ACC, ISA_SIZE_SPAD_OFF, err);
    case ISA_KIND_SPADOPT:
        return isa_check_addr(what, o, (1u << ISA_SPACE_SPAD) | (1u << ISA_SPACE_NONE),
                              ISA_SIZE_SPAD_OFF, err);
    case ISA_KIND_MEM:
        return isa_check_addr(what, o, (1u << ISA_SPACE_SPAD) | (1u << ISA_SPACE_HBM),
                              ISA_SIZE_HBM_OFF, err);
    case ISA_KIND_STEP:
    case ISA_KIND_VAL: {
        int64_t lim = (int64_t)1 << (ISA_SIZE_STEP - 1);
        if (o->reg >= ISA_N_REGS)
            return np_err_set(err, NP_ERR_RANGE, "%s: register r%u does not exist (r0..r15)",
                              what, o->reg);
        if (o->val < -lim || o->val > lim - 1)
            return np_err_set(err, NP_ERR_RANGE, "%s: %s %" PRId64 " is out of range %" PRId64
                              "..%" PRId64, what, f->kind == ISA_KIND_STEP ? "step" : "offset",
                              o->val, -lim, lim - 1);
        return isa_check_stray(what, o, true, true, false, false, err);
    }
    default:
        break;
    }
    return np_err_set(err, NP_ERR_INTERNAL, "%s: unknown kind %d", what, (int)f->kind);
}

np_status isa_operand_check(isa_op op, unsigned i, const isa_opnd *o, np_err *err)
{
    if ((unsigned)op == 0 || (unsigned)op >= ISA_OP_COUNT || i >= isa_ops[op].n_fields)
        return np_err_set(err, NP_ERR_UNKNOWN_KEY, "no operand %u of op %d", i, (int)op);
    /* Every emitted instruction's operands pass here: the operand's name is formatted only
     * for a message, by checking again (the check has no other effect). */
    np_err scratch;
    if (isa_operand_check_as(op, i, o, "", &scratch) == NP_OK)
        return NP_OK;
    char what[96];
    snprintf(what, sizeof what, "operand '%s' of %s", isa_ops[op].fields[i].name,
             isa_ops[op].mnemonic);
    return isa_operand_check_as(op, i, o, what, err);
}

/* ---- Bits of the word -------------------------------------------------------------------------- */

static void isa_word_load(const uint8_t *word, uint64_t w[4])
{
    for (int i = 0; i < 4; i++) {
        w[i] = 0;
        for (int b = 7; b >= 0; b--)
            w[i] = w[i] << 8 | word[i * 8 + b];
    }
}

static void isa_word_store(const uint64_t w[4], uint8_t *word)
{
    for (int i = 0; i < 4; i++)
        for (int b = 0; b < 8; b++)
            word[i * 8 + b] = (uint8_t)(w[i] >> (8 * b));
}

static uint64_t isa_bits_get(const uint64_t w[4], unsigned pos, unsigned bits)
{
    unsigned lane = pos / 64, sh = pos % 64;
    uint64_t v = w[lane] >> sh;
    if (sh && sh + bits > 64 && lane + 1 < 4)
        v |= w[lane + 1] << (64 - sh);
    return v & isa_mask(bits);
}

static void isa_bits_put(uint64_t w[4], unsigned pos, unsigned bits, uint64_t v)
{
    unsigned lane = pos / 64, sh = pos % 64;
    v &= isa_mask(bits);
    w[lane] |= v << sh;
    if (sh && sh + bits > 64 && lane + 1 < 4)
        w[lane + 1] |= v >> (64 - sh);
}

/* The raw bits of a (checked) operand. */
static uint64_t isa_opnd_pack(isa_kind k, unsigned bits, const isa_opnd *o)
{
    uint64_t v = (uint64_t)o->val;
    switch (k) {
    case ISA_KIND_REG:
        return o->reg;
    case ISA_KIND_PEER:
        return o->form | (uint64_t)o->group << ISA_SIZE_PEER_FORM |
               (uint64_t)o->reg << (ISA_SIZE_PEER_FORM + ISA_SIZE_GROUP) |
               (v & isa_mask(ISA_SIZE_CHIP)) << (ISA_SIZE_PEER_FORM + ISA_SIZE_GROUP + ISA_SIZE_REG) |
               (uint64_t)o->core << (ISA_SIZE_PEER_FORM + ISA_SIZE_GROUP + ISA_SIZE_REG + ISA_SIZE_CHIP);
    case ISA_KIND_SPAD:
    case ISA_KIND_ACC:
        return o->reg | v << ISA_SIZE_REG;
    case ISA_KIND_SPADOPT:
        return o->space == ISA_SPACE_NONE ? 0 : 1 | (uint64_t)o->reg << 1 | v << (1 + ISA_SIZE_REG);
    case ISA_KIND_MEM:
        return (o->space == ISA_SPACE_HBM) | (uint64_t)o->reg << 1 | v << (1 + ISA_SIZE_REG);
    case ISA_KIND_STEP:
    case ISA_KIND_VAL:
        return o->reg | (v & isa_mask(ISA_SIZE_STEP)) << ISA_SIZE_REG;
    default:
        return v & isa_mask(bits);
    }
}

static int64_t isa_sext(uint64_t v, unsigned bits)
{
    if (bits >= 64)
        return (int64_t)v;
    uint64_t sign = (uint64_t)1 << (bits - 1);
    return (int64_t)((v ^ sign) - sign);
}

/* The operand from raw bits; not yet checked (the SPADOPT absent case keeps stray bits so
 * that the check can reject them). */
static isa_opnd isa_opnd_unpack(isa_kind k, unsigned bits, uint64_t v)
{
    isa_opnd o = {0};
    switch (k) {
    case ISA_KIND_REG:
        o.reg = (uint8_t)v;
        break;
    case ISA_KIND_SIMM:
        o.val = isa_sext(v, bits);
        break;
    case ISA_KIND_PEER: {
        unsigned pos = ISA_SIZE_PEER_FORM + ISA_SIZE_GROUP + ISA_SIZE_REG;
        uint64_t x = (v >> pos) & isa_mask(ISA_SIZE_CHIP);
        o.form = (uint8_t)(v & isa_mask(ISA_SIZE_PEER_FORM));
        o.group = (uint8_t)((v >> ISA_SIZE_PEER_FORM) & isa_mask(ISA_SIZE_GROUP));
        o.reg = (uint8_t)((v >> (ISA_SIZE_PEER_FORM + ISA_SIZE_GROUP)) & isa_mask(ISA_SIZE_REG));
        o.val = o.form == ISA_PEER_FORM_CHIP ? (int64_t)x : isa_sext(x, ISA_SIZE_CHIP);
        o.core = (uint32_t)(v >> (pos + ISA_SIZE_CHIP));
        break;
    }
    case ISA_KIND_SPAD:
        o.space = ISA_SPACE_SPAD;
        o.reg = v & 15;
        o.val = (int64_t)(v >> ISA_SIZE_REG);
        break;
    case ISA_KIND_ACC:
        o.space = ISA_SPACE_ACC;
        o.reg = v & 15;
        o.val = (int64_t)(v >> ISA_SIZE_REG);
        break;
    case ISA_KIND_SPADOPT:
        o.space = (v & 1) ? ISA_SPACE_SPAD : ISA_SPACE_NONE;
        o.reg = (v >> 1) & 15;
        o.val = (int64_t)(v >> (1 + ISA_SIZE_REG));
        break;
    case ISA_KIND_MEM:
        o.space = (v & 1) ? ISA_SPACE_HBM : ISA_SPACE_SPAD;
        o.reg = (v >> 1) & 15;
        o.val = (int64_t)(v >> (1 + ISA_SIZE_REG));
        break;
    case ISA_KIND_STEP:
    case ISA_KIND_VAL:
        o.reg = v & 15;
        o.val = isa_sext(v >> ISA_SIZE_REG, ISA_SIZE_STEP);
        break;
    default:
        o.val = (int64_t)v;
        break;
    }
    return o;
}

np_status isa_encode(const isa_insn *in, uint8_t word[ISA_WORD_BYTES], np_err *err)
{
    if ((unsigned)in->op == 0 || (unsigned)in->op >= ISA_OP_COUNT)
        return np_err_set(err, NP_ERR_UNKNOWN_KEY, "cannot encode op %d: no such instruction",
                          (int)in->op);
    const isa_op_info *info = &isa_ops[in->op];
    for (unsigned i = 0; i < info->n_fields; i++) {
        np_status st = isa_operand_check(in->op, i, &in->opnd[i], err);
        if (st != NP_OK)
            return st;
    }
    uint64_t w[4] = {info->opcode, 0, 0, 0};
    unsigned pos = ISA_POS_FIELDS;
    for (unsigned i = 0; i < info->n_fields; i++) {
        const isa_field *f = &info->fields[i];
        isa_bits_put(w, pos, f->bits, isa_opnd_pack(f->kind, f->bits, &in->opnd[i]));
        pos += f->bits;
    }
    isa_word_store(w, word);
    return NP_OK;
}

np_status isa_decode(const uint8_t word[ISA_WORD_BYTES], isa_insn *out, np_err *err)
{
    uint64_t w[4];
    isa_word_load(word, w);
    unsigned opcode = (unsigned)isa_bits_get(w, ISA_POS_OPCODE, ISA_SIZE_OPCODE);
    isa_op op = isa_op_by_opcode(opcode);
    if (op == ISA_OP_ILLEGAL)
        return np_err_set(err, NP_ERR_FORMAT, "unknown opcode 0x%02x", opcode);
    const isa_op_info *info = &isa_ops[op];
    isa_insn_init(out, op);
    unsigned pos = ISA_POS_FIELDS;
    for (unsigned i = 0; i < info->n_fields; i++) {
        const isa_field *f = &info->fields[i];
        out->opnd[i] = isa_opnd_unpack(f->kind, f->bits, isa_bits_get(w, pos, f->bits));
        pos += f->bits;
        np_status st = isa_operand_check(op, i, &out->opnd[i], err);
        if (st != NP_OK) {
            err->status = NP_ERR_FORMAT;
            return NP_ERR_FORMAT;
        }
    }
    for (unsigned b = pos; b < ISA_WORD_BITS; b++)
        if (isa_bits_get(w, b, 1))
            return np_err_set(err, NP_ERR_FORMAT, "%s: reserved bit %u is set (bits %u..%u must "
                              "be zero)", info->mnemonic, b, pos, ISA_WORD_BITS - 1);
    return NP_OK;
}

void isa_op_match_mask(isa_op op, uint8_t match[ISA_WORD_BYTES], uint8_t mask[ISA_WORD_BYTES])
{
    uint64_t m[4] = {0}, k[4] = {0};
    if ((unsigned)op > 0 && (unsigned)op < ISA_OP_COUNT) {
        unsigned end = isa_field_pos(op, isa_ops[op].n_fields);
        isa_bits_put(m, ISA_POS_OPCODE, ISA_SIZE_OPCODE, isa_ops[op].opcode);
        isa_bits_put(k, ISA_POS_OPCODE, ISA_SIZE_OPCODE, isa_mask(ISA_SIZE_OPCODE));
        for (unsigned b = end; b < ISA_WORD_BITS; b++)
            isa_bits_put(k, b, 1, 1);
    }
    isa_word_store(m, match);
    isa_word_store(k, mask);
}

/* ---- Text ------------------------------------------------------------------------------------- */

/* A bounded string builder like snprintf: keeps counting past the end of buf. */
typedef struct isa_out {
    char *buf;
    size_t n, len;
} isa_out;

static void isa_put(isa_out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void isa_put(isa_out *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *dst = o->len < o->n ? o->buf + o->len : NULL;
    size_t room = o->len < o->n ? o->n - o->len : 0;
    int k = vsnprintf(dst, room, fmt, ap);
    va_end(ap);
    if (k > 0)
        o->len += (size_t)k;
}

int isa_format_string(const char *s, char *buf, size_t n)
{
    isa_out o = {buf, n, 0};
    if (n)
        buf[0] = '\0';
    isa_put(&o, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            isa_put(&o, "\\%c", *p);
        else if (*p == '\n')
            isa_put(&o, "\\n");
        else if (*p == '\t')
            isa_put(&o, "\\t");
        else if (*p < 0x20 || *p >= 0x7f)
            isa_put(&o, "\\x%02x", *p);
        else
            isa_put(&o, "%c", *p);
    }
    isa_put(&o, "\"");
    return (int)o.len;
}

static void isa_format_addr(isa_out *o, const isa_opnd *a)
{
    const char *sp = a->space == ISA_SPACE_HBM ? "hbm" : a->space == ISA_SPACE_ACC ? "acc" : "spad";
    if (a->reg && a->val)
        isa_put(o, "%s[r%u+0x%" PRIx64 "]", sp, a->reg, (uint64_t)a->val);
    else if (a->reg)
        isa_put(o, "%s[r%u]", sp, a->reg);
    else
        isa_put(o, "%s[0x%" PRIx64 "]", sp, (uint64_t)a->val);
}

/* A float that the assembler reads back to the same bits: %.9g for finite values (with a
 * ".0" so that "-0" stays negative zero), bits(0x...) for infinities and NaNs. */
static void isa_format_f32(isa_out *o, uint32_t bits)
{
    float f;
    memcpy(&f, &bits, sizeof f);
    if (!isfinite(f)) {
        isa_put(o, "bits(0x%08" PRIx32 ")", bits);
        return;
    }
    char tmp[48];
    snprintf(tmp, sizeof tmp, "%.9g", (double)f);
    if (!strpbrk(tmp, ".e"))
        strcat(tmp, ".0");
    isa_put(o, "%s", tmp);
}

static void isa_format_opnd(isa_out *o, const isa_field *f, const isa_opnd *v, const char *names,
                            size_t names_len)
{
    unsigned n_values;
    const char *const *values;
    switch (f->kind) {
    case ISA_KIND_REG:
        isa_put(o, "r%u", v->reg);
        break;
    case ISA_KIND_F32:
        isa_format_f32(o, (uint32_t)v->val);
        break;
    case ISA_KIND_SEM:
        isa_put(o, "s%" PRId64, v->val);
        break;
    case ISA_KIND_SIMM:
    case ISA_KIND_UIMM:
        if (v->val >= 4096)
            isa_put(o, "0x%" PRIx64, (uint64_t)v->val);
        else if (v->val <= -4096)
            isa_put(o, "-0x%" PRIx64, (uint64_t)0 - (uint64_t)v->val);
        else
            isa_put(o, "%" PRId64, v->val);
        break;
    case ISA_KIND_UNIT:
    case ISA_KIND_DTYPE:
    case ISA_KIND_ACT:
    case ISA_KIND_BCAST:
    case ISA_KIND_RED:
    case ISA_KIND_ACCM:
        values = isa_kind_values_of(f->kind, &n_values);
        if (v->val >= 0 && v->val < (int64_t)n_values)
            isa_put(o, "%s", values[v->val]);
        else
            isa_put(o, "%" PRId64, v->val);
        break;
    case ISA_KIND_NAME:
        if (names && v->val >= 0 && (uint64_t)v->val < names_len &&
            memchr(names + v->val, '\0', names_len - (size_t)v->val)) {
            int k = isa_format_string(names + v->val, NULL, 0);
            char small[256];
            char *tmp = small;
            if ((size_t)k + 1 > sizeof small)
                tmp = NULL;
            if (tmp) {
                isa_format_string(names + v->val, tmp, sizeof small);
                isa_put(o, "%s", tmp);
            } else {
                /* Long names: write straight into the output. */
                size_t room = o->len < o->n ? o->n - o->len : 0;
                isa_format_string(names + v->val, o->len < o->n ? o->buf + o->len : NULL, room);
                o->len += (size_t)k;
            }
        } else {
            isa_put(o, "\"?name@0x%" PRIx64 "\"", (uint64_t)v->val);
        }
        break;
    case ISA_KIND_PEER:
        if (v->form == ISA_PEER_FORM_CHIP) {
            isa_put(o, "peer(%" PRId64 ", %" PRIu32 ")", v->val, v->core);
            break;
        }
        isa_put(o, "peer(g%u[%s", v->group, v->form == ISA_PEER_FORM_ADD ? "rank"
                                            : v->form == ISA_PEER_FORM_XOR ? "rank^" : "");
        /* rank, rank+1, rank-1, rank+r3-2 | rank^4, rank^r3, rank^(r3+4) | 2, r3, r3+1 */
        if (v->form == ISA_PEER_FORM_XOR && v->reg && v->val)
            isa_put(o, "(r%u%+" PRId64 ")", v->reg, v->val);
        else if (v->reg || v->form == ISA_PEER_FORM_ADD) {
            if (v->reg)
                isa_put(o, "%sr%u", v->form == ISA_PEER_FORM_ADD ? "+" : "", v->reg);
            if (v->val)
                isa_put(o, "%+" PRId64, v->val);
        } else {
            isa_put(o, "%" PRId64, v->val);
        }
        isa_put(o, "], %" PRIu32 ")", v->core);
        break;
    case ISA_KIND_SPAD:
    case ISA_KIND_ACC:
    case ISA_KIND_MEM:
        isa_format_addr(o, v);
        break;
    case ISA_KIND_SPADOPT:
        if (v->space == ISA_SPACE_NONE)
            isa_put(o, "none");
        else
            isa_format_addr(o, v);
        break;
    case ISA_KIND_STEP:
        if (v->val < 0)
            isa_put(o, "r%u-=%" PRIu64, v->reg, (uint64_t)0 - (uint64_t)v->val);
        else
            isa_put(o, "r%u+=%" PRId64, v->reg, v->val);
        break;
    case ISA_KIND_VAL:
        if (!v->reg)
            isa_put(o, "%" PRId64, v->val);
        else if (v->val < 0)
            isa_put(o, "r%u-%" PRIu64, v->reg, (uint64_t)0 - (uint64_t)v->val);
        else
            isa_put(o, "r%u+%" PRId64, v->reg, v->val);
        break;
    default:
        isa_put(o, "%" PRId64, v->val);
        break;
    }
}

/* Is operand v of field f at its default? */
static bool isa_opnd_is_default(const isa_field *f, const isa_opnd *v)
{
    return v->val == f->dflt && v->reg == 0 && v->core == 0 && v->space == 0;
}

int isa_format(const isa_insn *in, const char *names, size_t names_len, char *buf, size_t n)
{
    isa_out o = {buf, n, 0};
    if (n)
        buf[0] = '\0';
    if ((unsigned)in->op == 0 || (unsigned)in->op >= ISA_OP_COUNT) {
        isa_put(&o, "<illegal op %d>", (int)in->op);
        return (int)o.len;
    }
    const isa_op_info *info = &isa_ops[in->op];
    isa_put(&o, "%s", info->mnemonic);
    /* Required operands positionally; optional ones as name=value when they differ from their
     * default, except loop steps, which read best positionally ("loop 4, r1+=64") and are
     * printed so while every earlier optional operand was. */
    bool positional = true, first = true;
    for (unsigned i = 0; i < info->n_fields; i++) {
        const isa_field *f = &info->fields[i];
        if (f->optional && isa_opnd_is_default(f, &in->opnd[i])) {
            positional = false;
            continue;
        }
        isa_put(&o, first ? " " : ", ");
        first = false;
        if (f->optional && !(positional && f->kind == ISA_KIND_STEP)) {
            positional = false;
            isa_put(&o, "%s=", f->name);
        }
        isa_format_opnd(&o, f, &in->opnd[i], names, names_len);
    }
    return (int)o.len;
}
