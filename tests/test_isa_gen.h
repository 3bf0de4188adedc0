/* test_isa_gen.h — seeded random instructions and programs for the ISA property tests
 * (tests/test_isa.c, tests/test_isa_asm.c, tests/test_isa_elf.c). Header-only: each test
 * executable includes it once. */
#ifndef NPUSIM_TEST_ISA_GEN_H
#define NPUSIM_TEST_ISA_GEN_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "isa.h"
#include "isa_prog.h"

/* splitmix64 */
static inline uint64_t gen_u64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

static inline uint64_t gen_below(uint64_t *s, uint64_t n)
{
    return n ? gen_u64(s) % n : 0;
}

/* A value in [lo, hi], often one of the ends (where encoders break). */
static inline uint64_t gen_range(uint64_t *s, uint64_t lo, uint64_t hi)
{
    switch (gen_below(s, 8)) {
    case 0:
        return lo;
    case 1:
        return hi;
    default:
        return hi - lo == UINT64_MAX ? gen_u64(s) : lo + gen_below(s, hi - lo + 1);
    }
}

static inline uint64_t gen_mask(unsigned bits)
{
    return bits >= 64 ? UINT64_MAX : ((uint64_t)1 << bits) - 1;
}

/* A valid operand for field f. NAME operands take one of names[0..n_names) (byte offsets). */
static inline isa_opnd gen_opnd(uint64_t *s, const isa_field *f, const int64_t *names,
                                size_t n_names)
{
    isa_opnd o = {0};
    unsigned n_values;
    if (f->optional && gen_below(s, 3) == 0) {
        o.val = f->dflt;
        return o;
    }
    switch (f->kind) {
    case ISA_KIND_REG:
        o.reg = (uint8_t)gen_below(s, ISA_N_REGS);
        break;
    case ISA_KIND_SIMM:
        o.val = (int64_t)gen_range(s, 0, gen_mask(f->bits));
        if (f->bits < 64 && (o.val >> (f->bits - 1)) & 1)
            o.val -= (int64_t)1 << (f->bits - 1) << 1;
        break;
    case ISA_KIND_CNT:
        o.val = (int64_t)gen_range(s, 1, gen_mask(f->bits));
        break;
    case ISA_KIND_F32:
        o.val = (int64_t)(gen_u64(s) & 0xffffffffu);
        break;
    case ISA_KIND_NAME:
        o.val = n_names ? names[gen_below(s, n_names)] : 0;
        break;
    case ISA_KIND_PEER:
        o.form = (uint8_t)gen_below(s, ISA_PEER_FORM_COUNT);
        o.core = (uint32_t)gen_range(s, 0, gen_mask(ISA_SIZE_CORE));
        if (o.form == ISA_PEER_FORM_CHIP) {
            o.val = (int64_t)gen_range(s, 0, gen_mask(ISA_SIZE_CHIP));
        } else {
            o.group = (uint8_t)gen_below(s, ISA_N_GROUPS);
            o.reg = (uint8_t)gen_below(s, ISA_N_REGS);
            o.val = (int64_t)gen_range(s, 0, gen_mask(ISA_SIZE_CHIP)) - ((int64_t)1 << (ISA_SIZE_CHIP - 1));
        }
        break;
    case ISA_KIND_SPAD:
    case ISA_KIND_ACC:
    case ISA_KIND_SPADOPT:
    case ISA_KIND_MEM:
        if (f->kind == ISA_KIND_SPADOPT && gen_below(s, 2))
            break; /* absent */
        o.space = f->kind == ISA_KIND_ACC ? ISA_SPACE_ACC
                  : f->kind == ISA_KIND_MEM && gen_below(s, 2) ? ISA_SPACE_HBM : ISA_SPACE_SPAD;
        o.reg = (uint8_t)gen_below(s, ISA_N_REGS);
        o.val = (int64_t)gen_range(s, 0, gen_mask(f->kind == ISA_KIND_MEM ? ISA_SIZE_HBM_OFF
                                                                         : ISA_SIZE_SPAD_OFF));
        break;
    case ISA_KIND_STEP:
    case ISA_KIND_VAL:
        o.reg = (uint8_t)gen_below(s, ISA_N_REGS);
        o.val = (int64_t)gen_range(s, 0, gen_mask(ISA_SIZE_STEP)) - ((int64_t)1 << (ISA_SIZE_STEP - 1));
        break;
    default:
        if (isa_kind_values_of(f->kind, &n_values))
            o.val = (int64_t)gen_below(s, n_values);
        else
            o.val = (int64_t)gen_range(s, 0, gen_mask(f->bits));
        break;
    }
    return o;
}

static inline void gen_insn(uint64_t *s, isa_op op, isa_insn *in, const int64_t *names,
                            size_t n_names)
{
    isa_insn_init(in, op);
    for (unsigned f = 0; f < isa_ops[op].n_fields; f++)
        in->opnd[f] = gen_opnd(s, &isa_ops[op].fields[f], names, n_names);
}

static inline int gen_cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A random valid program: up to 3 cores of up to n_max instructions each (balanced loops,
 * trace names from a pool of awkward strings), kernels with gaps and empty ones, a .data
 * section with labels (some with explicit sizes) and a .bss section. The target allows every
 * dtype. */
static inline isa_program *gen_program(uint64_t *s, uint32_t n_max)
{
    static const char *const pool[] = {"gemm", "a b", "q\"uote", "back\\slash", "tab\tnl\n",
                                       "\x01\x7f", "r\xc3\xa9gion", "softmax.tile"};
    enum { NP = sizeof pool / sizeof pool[0] };
    isa_target t = {.array_rows = 16, .array_cols = 16, .cores = 8, .spad_bytes = 1 << 20,
                    .acc_bytes = 1 << 16, .dtypes = (1u << ISA_DTYPE_COUNT) - 1};
    isa_program *p = isa_program_new(&t);
    /* Instructions first, with name indices in NAME operands; offsets are fixed below. */
    int64_t idx[NP];
    for (int k = 0; k < NP; k++)
        idx[k] = k;
    bool used[NP] = {false};
    p->cores = calloc(3, sizeof *p->cores);
    uint32_t core = (uint32_t)gen_below(s, 2);
    for (int c = 0; c < 3; c++) {
        if (gen_below(s, 4) == 0)
            continue;
        isa_core_text *ct = &p->cores[p->n_cores++];
        ct->core = core;
        core += 1 + (uint32_t)gen_below(s, 2);
        uint32_t n = (uint32_t)gen_below(s, n_max + 1);
        ct->insns = calloc(n + ISA_LOOP_DEPTH + 1, sizeof *ct->insns);
        unsigned depth = 0;
        uint32_t i = 0;
        while (i < n) {
            isa_op op = (isa_op)(1 + gen_below(s, ISA_OP_COUNT - 1));
            if (op == ISA_OP_LOOP && depth == ISA_LOOP_DEPTH)
                continue;
            if (op == ISA_OP_ENDLOOP && depth == 0)
                continue;
            gen_insn(s, op, &ct->insns[i++], idx, NP);
            depth += op == ISA_OP_LOOP;
            depth -= op == ISA_OP_ENDLOOP;
        }
        while (depth--)
            isa_insn_init(&ct->insns[i++], ISA_OP_ENDLOOP);
        ct->n_insns = i;
        for (uint32_t k = 0; k < ct->n_insns; k++)
            for (unsigned f = 0; f < isa_ops[ct->insns[k].op].n_fields; f++)
                if (isa_ops[ct->insns[k].op].fields[f].kind == ISA_KIND_NAME)
                    used[ct->insns[k].opnd[f].val] = true;
        /* Kernels: disjoint ranges in order, some empty, some with gaps between. */
        ct->kernels = calloc(8, sizeof *ct->kernels);
        uint32_t at = 0;
        for (int k = 0; k < 8 && at <= ct->n_insns; k++) {
            if (gen_below(s, 3) == 0)
                continue;
            at += (uint32_t)gen_below(s, 3) == 0 ? (uint32_t)gen_below(s, 3) : 0;
            if (at > ct->n_insns)
                break;
            uint32_t cnt = (uint32_t)gen_below(s, ct->n_insns - at + 1);
            if (gen_below(s, 2))
                cnt = ct->n_insns - at < 3 ? ct->n_insns - at : (uint32_t)gen_below(s, 3);
            char name[16];
            snprintf(name, sizeof name, "k%d_%u", k, ct->core);
            ct->kernels[ct->n_kernels++] = (isa_kernel){strdup(name), at, cnt};
            at += cnt;
        }
    }
    /* The name table: the used names, sorted, and their offsets patched in. */
    const char *names[NP];
    int n_used = 0;
    for (int k = 0; k < NP; k++)
        if (used[k])
            names[n_used++] = pool[k];
    qsort(names, (size_t)n_used, sizeof *names, gen_cmp_str);
    int64_t off_of[NP];
    size_t len = 1;
    for (int k = 0; k < n_used; k++)
        len += strlen(names[k]) + 1;
    if (n_used) {
        p->names = malloc(len);
        p->names[0] = '\0';
        size_t at = 1;
        for (int k = 0; k < n_used; k++) {
            for (int j = 0; j < NP; j++)
                if (pool[j] == names[k])
                    off_of[j] = (int64_t)at;
            memcpy(p->names + at, names[k], strlen(names[k]) + 1);
            at += strlen(names[k]) + 1;
        }
        p->names_len = len;
    }
    for (uint32_t c = 0; c < p->n_cores; c++)
        for (uint32_t k = 0; k < p->cores[c].n_insns; k++) {
            isa_insn *in = &p->cores[c].insns[k];
            for (unsigned f = 0; f < isa_ops[in->op].n_fields; f++)
                if (isa_ops[in->op].fields[f].kind == ISA_KIND_NAME)
                    in->opnd[f].val = off_of[in->opnd[f].val];
        }
    /* Data and symbols. */
    p->data = calloc(2, sizeof *p->data);
    p->symbols = calloc(16, sizeof *p->symbols);
    uint64_t next = gen_below(s, 4) * 0x1000;
    for (int d = 0; d < 2; d++) {
        if (gen_below(s, 3) == 0)
            continue;
        isa_data *dd = &p->data[p->n_data];
        dd->name = strdup(d ? ".bss" : ".data");
        dd->addr = next;
        dd->size = gen_below(s, 200);
        if (!d) {
            dd->bytes = malloc(dd->size + 1);
            for (uint64_t b = 0; b < dd->size; b++)
                dd->bytes[b] = (uint8_t)gen_u64(s);
        }
        next = (dd->addr + dd->size + 4095) / 4096 * 4096 + 4096 * gen_below(s, 2);
        uint64_t at = 0;
        int n_sym = (int)gen_below(s, 5);
        for (int k = 0; k < n_sym && at <= dd->size; k++) {
            at += gen_below(s, dd->size - at + 1) / 2;
            isa_symbol *sy = &p->symbols[p->n_symbols++];
            char name[16];
            snprintf(name, sizeof name, "%s%d", d ? "b" : "d", k);
            sy->name = strdup(name);
            sy->data = p->n_data;
            sy->addr = dd->addr + at;
            sy->size = gen_below(s, dd->size - at + 1); /* fixed up below if natural */
        }
        p->n_data++;
    }
    /* Half of the symbols get the natural size (up to the next label or the section end). */
    for (uint32_t k = 0; k < p->n_symbols; k++)
        if (gen_below(s, 2)) {
            const isa_data *dd = &p->data[p->symbols[k].data];
            uint64_t end = dd->addr + dd->size;
            if (k + 1 < p->n_symbols && p->symbols[k + 1].data == p->symbols[k].data)
                end = p->symbols[k + 1].addr;
            p->symbols[k].size = end - p->symbols[k].addr;
        }
    return p;
}

#endif
