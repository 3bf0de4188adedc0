/* test_isa_asm.c — the assembler and disassembler: hand-checked values of expressions, data
 * directives and layout; every malformed input in tests/data/isa/ with its exact error and
 * exit status; the manual's and isa/examples' programs; and seeded random programs that
 * disassemble and reassemble to the same program and the same ELF bytes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "harness.h"
#include "isa.h"
#include "isa_asm.h"
#include "isa_elf.h"
#include "test_isa_gen.h"

/* The `tiny` preset's fingerprint, written out by hand. */
static const isa_target tiny = {.array_rows = 4, .array_cols = 4, .cores = 2,
                                .spad_bytes = 64 * 1024, .acc_bytes = 4 * 1024,
                                .dtypes = (1u << ISA_DTYPE_FP32) | (1u << ISA_DTYPE_BF16) |
                                          (1u << ISA_DTYPE_FP16) | (1u << ISA_DTYPE_INT8)};

static isa_program *assemble(const char *src, np_err *e)
{
    isa_asm_opts o = {&tiny, false};
    isa_program *p = NULL;
    if (isa_asm(src, strlen(src), "t.s", &o, &p, e) != NP_OK) {
        fprintf(stderr, "t.s:%d:%d: %s\n", e->line, e->col, e->msg);
        return NULL;
    }
    return p;
}

/* Disassembles p, reassembles the text, and checks that the program and its ELF bytes are the
 * same. */
static void check_round_trip(const isa_program *p)
{
    char *text = NULL;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(isa_disasm(p, &text, &e), NP_OK);
    isa_asm_opts o = {NULL, false};
    isa_program *q = NULL;
    if (isa_asm(text, strlen(text), "dis.s", &o, &q, &e) != NP_OK) {
        fprintf(stderr, "%s\ndis.s:%d:%d: %s\n", text, e.line, e.col, e.msg);
        CU_FAIL("disassembly does not assemble");
        free(text);
        return;
    }
    if (!isa_program_equal(p, q)) {
        fprintf(stderr, "%s\n", text);
        CU_FAIL("disassembly reassembles to a different program");
    }
    uint8_t *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
    CU_ASSERT_EQUAL(isa_elf_image(p, &a, &na, &e), NP_OK);
    CU_ASSERT_EQUAL(isa_elf_image(q, &b, &nb, &e), NP_OK);
    CU_ASSERT(na == nb && a && b && memcmp(a, b, na) == 0);
    free(a);
    free(b);
    isa_program_free(q);
    free(text);
}

/* ---- Values ------------------------------------------------------------------------------------- */

TEST(expressions_data_directives_and_layout_give_the_hand_computed_values)
{
    const char *src =
        ".equ N, 3 + 4 * 2          ; 11\n"
        ".equ SH, (1 << 10) | 5     ; 1029\n"
        ".equ NEG, -N % 4           ; -3, C's truncating remainder\n"
        ".data 0x100\n"
        "d0: .byte 1, -1, 0xff\n"
        "    .half -2\n"
        "    .align 8\n"
        "d1: .word 0xdeadbeef\n"
        "    .dword -1\n"
        "    .float 1.5\n"
        "    .bf16 1.0, -2.5\n"
        "    .fp16 1.0, 65504.0, 5.96e-8\n"
        "d2: .zero 3\n"
        ".size d1, 4\n"
        ".bss\n"
        "b0: .space 10\n"
        ".core 1\n"
        ".kernel k1\n"
        "    li r1, N\n"
        "    li r2, SH\n"
        "    li r3, NEG\n"
        "    li r4, d1 + 2\n"
        "    li r5, here\n"
        "here: addi r6, r5, ~0\n"
        ".endk\n"
        "    nop\n"
        ".kernel k2\n";
    np_err e = {0};
    isa_program *p = assemble(src, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    static const uint8_t data[] = {
        0x01, 0xff, 0xff, 0xfe, 0xff, 0, 0, 0,      /* d0: bytes, half, .align 8 */
        0xef, 0xbe, 0xad, 0xde,                     /* d1: word */
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        0x00, 0x00, 0xc0, 0x3f,                     /* 1.5f */
        0x80, 0x3f, 0x20, 0xc0,                     /* bf16 1.0, -2.5 */
        0x00, 0x3c, 0xff, 0x7b, 0x01, 0x00,         /* fp16 1.0, 65504 (the largest), 2^-24 */
        0, 0, 0};                                   /* d2 */
    CU_ASSERT_EQUAL_FATAL(p->n_data, 2);
    CU_ASSERT_STRING_EQUAL(p->data[0].name, ".data");
    CU_ASSERT_EQUAL(p->data[0].addr, 0x100);
    CU_ASSERT_EQUAL_FATAL(p->data[0].size, sizeof data);
    CU_ASSERT_EQUAL(memcmp(p->data[0].bytes, data, sizeof data), 0);
    CU_ASSERT_STRING_EQUAL(p->data[1].name, ".bss");
    CU_ASSERT_EQUAL(p->data[1].addr, 0x1000); /* the 4 KiB boundary after .data */
    CU_ASSERT_EQUAL(p->data[1].size, 10);
    CU_ASSERT_PTR_NULL(p->data[1].bytes);
    CU_ASSERT_EQUAL_FATAL(p->n_symbols, 4);
    CU_ASSERT_STRING_EQUAL(p->symbols[0].name, "d0");
    CU_ASSERT_EQUAL(p->symbols[0].addr, 0x100);
    CU_ASSERT_EQUAL(p->symbols[0].size, 8);
    CU_ASSERT_STRING_EQUAL(p->symbols[1].name, "d1");
    CU_ASSERT_EQUAL(p->symbols[1].addr, 0x108);
    CU_ASSERT_EQUAL(p->symbols[1].size, 4); /* .size */
    CU_ASSERT_EQUAL(p->symbols[2].addr, 0x122);
    CU_ASSERT_EQUAL(p->symbols[2].size, 3);
    CU_ASSERT_STRING_EQUAL(p->symbols[3].name, "b0");
    CU_ASSERT_EQUAL(p->symbols[3].addr, 0x1000);
    CU_ASSERT_EQUAL_FATAL(p->n_cores, 1);
    const isa_core_text *ct = &p->cores[0];
    CU_ASSERT_EQUAL(ct->core, 1);
    CU_ASSERT_EQUAL_FATAL(ct->n_insns, 7);
    CU_ASSERT_EQUAL(ct->insns[0].LI.imm.val, 11);
    CU_ASSERT_EQUAL(ct->insns[1].LI.imm.val, 1029);
    CU_ASSERT_EQUAL(ct->insns[2].LI.imm.val, -3);
    CU_ASSERT_EQUAL(ct->insns[3].LI.imm.val, 0x10a);
    CU_ASSERT_EQUAL(ct->insns[4].LI.imm.val, 5 * 32); /* a text label: its byte offset */
    CU_ASSERT_EQUAL(ct->insns[5].ADDI.imm.val, -1);
    CU_ASSERT_EQUAL(ct->insns[5].ADDI.rs.reg, 5);
    CU_ASSERT_EQUAL_FATAL(ct->n_kernels, 2);
    CU_ASSERT_STRING_EQUAL(ct->kernels[0].name, "k1");
    CU_ASSERT_EQUAL(ct->kernels[0].start, 0);
    CU_ASSERT_EQUAL(ct->kernels[0].count, 6); /* ended by .endk, before the nop */
    CU_ASSERT_EQUAL(ct->kernels[1].start, 7);
    CU_ASSERT_EQUAL(ct->kernels[1].count, 0);
    check_round_trip(p);
    isa_program_free(p);
}

TEST(operands_accept_names_positions_and_defaults)
{
    const char *src =
        "    dma.copy spad[r1+16], hbm[r2+0x40], int8, 7, src_s2=64, n2=3\n"
        "    mxu.drain spad[0], acc[r3+8], 2, 3, fp16, scale=2.5, act=gelu\n"
        "    comm.recv peer(2, 1), hbm[0], 4, 5, max, int32\n"
        "    sem.signal vpu, s255, 2\n"
        "    sem.wait comm, 3\n";
    np_err e = {0};
    isa_program *p = assemble(src, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    const isa_insn *in = p->cores[0].insns;
    CU_ASSERT_EQUAL(in[0].DMA_COPY.dst.space, ISA_SPACE_SPAD);
    CU_ASSERT_EQUAL(in[0].DMA_COPY.dst.reg, 1);
    CU_ASSERT_EQUAL(in[0].DMA_COPY.dst.val, 16);
    CU_ASSERT_EQUAL(in[0].DMA_COPY.src.space, ISA_SPACE_HBM);
    CU_ASSERT_EQUAL(in[0].DMA_COPY.src.val, 0x40);
    CU_ASSERT_EQUAL(in[0].DMA_COPY.dtype.val, ISA_DTYPE_INT8);
    CU_ASSERT_EQUAL(in[0].DMA_COPY.n1.val, 1); /* default */
    CU_ASSERT_EQUAL(in[0].DMA_COPY.n2.val, 3);
    CU_ASSERT_EQUAL(in[0].DMA_COPY.src_s2.val, 64);
    CU_ASSERT_EQUAL(isa_opnd_f32(&in[1].MXU_DRAIN.scale), 2.5f);
    CU_ASSERT_EQUAL(in[1].MXU_DRAIN.act.val, ISA_ACT_GELU);
    CU_ASSERT_EQUAL(in[1].MXU_DRAIN.bias.space, ISA_SPACE_NONE);
    CU_ASSERT_EQUAL(in[2].COMM_RECV.peer.val, 2);
    CU_ASSERT_EQUAL(in[2].COMM_RECV.peer.core, 1);
    CU_ASSERT_EQUAL(in[2].COMM_RECV.red.val, ISA_RED_MAX);
    CU_ASSERT_EQUAL(in[2].COMM_RECV.dtype.val, ISA_DTYPE_INT32);
    CU_ASSERT_EQUAL(in[3].SEM_SIGNAL.sem.val, 255);
    CU_ASSERT_EQUAL(in[3].SEM_SIGNAL.n.val, 2);
    CU_ASSERT_EQUAL(in[4].SEM_WAIT.sem.val, 3); /* a plain number is a semaphore too */
    CU_ASSERT_EQUAL(in[4].SEM_WAIT.n.val, 1);
    isa_program_free(p);
}

TEST(peers_by_group_rank_parse_to_their_form_group_register_and_offset)
{
    static const struct {
        const char *src, *text; /* as written; as the disassembler writes it back */
        isa_peer_form form;
        unsigned group, reg;
        int64_t off;
    } cases[] = {
        {"peer(3, 1)", "peer(3, 1)", ISA_PEER_FORM_CHIP, 0, 0, 3},
        {"peer(g0[rank+1], 1)", "peer(g0[rank+1], 1)", ISA_PEER_FORM_ADD, 0, 0, 1},
        {"peer(g0[rank - 1], 1)", "peer(g0[rank-1], 1)", ISA_PEER_FORM_ADD, 0, 0, -1},
        {"peer(g15[rank], 1)", "peer(g15[rank], 1)", ISA_PEER_FORM_ADD, 15, 0, 0},
        {"peer(g2[rank-1+3], 1)", "peer(g2[rank+2], 1)", ISA_PEER_FORM_ADD, 2, 0, 2},
        {"peer(g1[rank+r3], 1)", "peer(g1[rank+r3], 1)", ISA_PEER_FORM_ADD, 1, 3, 0},
        {"peer(g1[rank+r3-2], 1)", "peer(g1[rank+r3-2], 1)", ISA_PEER_FORM_ADD, 1, 3, -2},
        {"peer(g0[rank^4], 1)", "peer(g0[rank^4], 1)", ISA_PEER_FORM_XOR, 0, 0, 4},
        {"peer(g0[rank^r5], 1)", "peer(g0[rank^r5], 1)", ISA_PEER_FORM_XOR, 0, 5, 0},
        {"peer(g0[rank^(r5+2)], 1)", "peer(g0[rank^(r5+2)], 1)", ISA_PEER_FORM_XOR, 0, 5, 2},
        {"peer(g0[rank^(1+2)], 1)", "peer(g0[rank^3], 1)", ISA_PEER_FORM_XOR, 0, 0, 3},
        {"peer(g3[0], 1)", "peer(g3[0], 1)", ISA_PEER_FORM_RANK, 3, 0, 0},
        {"peer(g3[r7+1], 1)", "peer(g3[r7+1], 1)", ISA_PEER_FORM_RANK, 3, 7, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char src[128];
        snprintf(src, sizeof src, "comm.send %s, hbm[0], 64, 1\n", cases[i].src);
        isa_asm_opts o = {&tiny, false};
        isa_program *p = NULL;
        np_err e = {0};
        CU_ASSERT_EQUAL_FATAL(isa_asm(src, strlen(src), "p.s", &o, &p, &e), NP_OK);
        const isa_opnd *peer = &p->cores[0].insns[0].COMM_SEND.peer;
        CU_ASSERT_EQUAL(peer->form, cases[i].form);
        CU_ASSERT_EQUAL(peer->group, cases[i].group);
        CU_ASSERT_EQUAL(peer->reg, cases[i].reg);
        CU_ASSERT_EQUAL(peer->val, cases[i].off);
        CU_ASSERT_EQUAL(peer->core, 1u);
        char text[128], want[128];
        isa_format(&p->cores[0].insns[0], p->names, p->names_len, text, sizeof text);
        snprintf(want, sizeof want, "comm.send %s, hbm[0x0], 64, 1", cases[i].text);
        CU_ASSERT_STRING_EQUAL(text, want);
        isa_program_free(p);
    }
}

TEST(names_are_interned_sorted_and_shared)
{
    np_err e = {0};
    isa_program *p = assemble("trace.begin \"z\"\ntrace.begin \"a\\tb\"\ntrace.end \"z\"\n"
                              "trace.end \"a\\tb\"\n", &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    static const char want[] = "\0a\tb\0z"; /* sorted; sizeof includes the final NUL */
    CU_ASSERT_EQUAL_FATAL(p->names_len, sizeof want);
    CU_ASSERT_EQUAL(memcmp(p->names, want, sizeof want), 0);
    CU_ASSERT_EQUAL(p->cores[0].insns[0].TRACE_BEGIN.name.val, 5);
    CU_ASSERT_EQUAL(p->cores[0].insns[1].TRACE_BEGIN.name.val, 1);
    CU_ASSERT_EQUAL(p->cores[0].insns[2].TRACE_END.name.val, 5);
    isa_program_free(p);
}

TEST(a_target_directive_overrides_the_default_and_must_match_a_strict_one)
{
    const char *src = ".target rows=8, cols=16, cores=3, spad=0x8000, acc=1024, dtypes=int8|bf16\n"
                      "    nop\n";
    isa_asm_opts o = {&tiny, false};
    isa_program *p = NULL;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(isa_asm(src, strlen(src), "t.s", &o, &p, &e), NP_OK);
    isa_target want = {.array_rows = 8, .array_cols = 16, .cores = 3, .spad_bytes = 0x8000,
                       .acc_bytes = 1024,
                       .dtypes = (1u << ISA_DTYPE_INT8) | (1u << ISA_DTYPE_BF16)};
    CU_ASSERT_EQUAL(memcmp(&p->target, &want, sizeof want), 0);
    isa_program_free(p);
    o.target_strict = true;
    CU_ASSERT_EQUAL(isa_asm(src, strlen(src), "t.s", &o, &p, &e), NP_ERR_INCONSISTENT);
    CU_ASSERT_EQUAL(e.line, 1);
    CU_ASSERT_EQUAL(e.col, 1);
    CU_ASSERT_STRING_EQUAL(e.msg, ".target differs from the architecture asked for: array_rows 8 "
                                  "vs 4, array_cols 16 vs 4, cores 3 vs 2, spad_bytes 32768 vs "
                                  "65536, acc_bytes 1024 vs 4096, dtypes bf16|int8 vs "
                                  "fp32|bf16|fp16|int8");
    CU_ASSERT_PTR_NULL(p);
    isa_asm_opts none = {NULL, false};
    CU_ASSERT_EQUAL(isa_asm("nop\n", 4, "t.s", &none, &p, &e), NP_ERR_MISSING);
    CU_ASSERT_STRING_EQUAL(e.msg, "no target architecture: give one (npusim asm --arch) or write "
                                  "a .target directive");
}

/* ---- Malformed inputs -------------------------------------------------------------------------- */

TEST(value_operands_are_a_register_plus_a_signed_offset)
{
    const char *src = "    vpu.iota spad[0], r3-7, -1, 2, 2, 3, fp32\n"
                      "    vpu.iota spad[0], -42, 0, 1, 1, 1, fp32\n"
                      "    vpu.rand spad[0], r15+0x10, 1, 2, 1, 1, bf16, ctr_s=9\n"
                      "    vpu.iota spad[0], r4, 1, 1, 1, 1, fp32\n";
    np_err e = {0};
    isa_program *p = assemble(src, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    const isa_insn *in = p->cores[0].insns;
    CU_ASSERT(in[0].VPU_IOTA.start.reg == 3 && in[0].VPU_IOTA.start.val == -7);
    CU_ASSERT_EQUAL(in[0].VPU_IOTA.row_step.val, -1);
    CU_ASSERT(in[1].VPU_IOTA.start.reg == 0 && in[1].VPU_IOTA.start.val == -42);
    CU_ASSERT(in[2].VPU_RAND.ctr.reg == 15 && in[2].VPU_RAND.ctr.val == 16);
    CU_ASSERT_EQUAL(in[2].VPU_RAND.ctr_s.val, 9);
    CU_ASSERT(in[3].VPU_IOTA.start.reg == 4 && in[3].VPU_IOTA.start.val == 0);
    char text[160];
    isa_format(&in[0], NULL, 0, text, sizeof text);
    CU_ASSERT_STRING_EQUAL(text, "vpu.iota spad[0x0], r3-7, -1, 2, 2, 3, fp32");
    isa_format(&in[1], NULL, 0, text, sizeof text);
    CU_ASSERT_STRING_EQUAL(text, "vpu.iota spad[0x0], -42, 0, 1, 1, 1, fp32");
    check_round_trip(p);
    isa_program_free(p);
}

static const struct {
    const char *file;
    int line, col;
    np_status status;
    const char *msg;
} bad_asm[] = {
    {"unknown_mnemonic.s", 2, 5, NP_ERR_UNKNOWN_KEY,
     "unknown mnemonic 'vpu.ad'; did you mean 'vpu.add'?"},
    {"rows_out_of_range.s", 1, 31, NP_ERR_RANGE,
     "operand 'rows' of vpu.exp: 70000 is out of range 1..65535"},
    {"undefined_label.s", 1, 12, NP_ERR_UNKNOWN_KEY,
     "undefined symbol 'tile_b'; did you mean 'tile_a'?"},
    {"wrong_address_space.s", 1, 14, NP_ERR_TYPE,
     "operand 'w' of mxu.load: expected a scratchpad address spad[...], got 'hbm[r1]'"},
    {"register_as_number.s", 1, 23, NP_ERR_TYPE, "expected a number, got register 'r1'"},
    {"missing_operand.s", 1, 5, NP_ERR_MISSING, "dma.copy: missing operand 'n0' (expr)"},
    {"operands_on_nop.s", 1, 9, NP_ERR_SYNTAX, "nop takes no operands"},
    {"unknown_operand_name.s", 1, 43, NP_ERR_UNKNOWN_KEY,
     "vpu.exp has no operand 'dst_ss'; did you mean 'dst_s'?"},
    {"operand_given_twice.s", 1, 52, NP_ERR_DUPLICATE, "operand 'dst_s' of vpu.exp is given twice"},
    {"unknown_dtype.s", 1, 37, NP_ERR_UNKNOWN_KEY,
     "operand 'dtype' of vpu.exp: unknown dtype 'bf61'; did you mean 'bf16'?"},
    {"endloop_without_loop.s", 1, 5, NP_ERR_SYNTAX, "endloop without a matching loop"},
    {"loop_not_closed.s", 1, 5, NP_ERR_SYNTAX, "loop is not closed by an endloop"},
    {"loops_too_deep.s", 9, 1, NP_ERR_RANGE, "loops nest deeper than 8"},
    {"duplicate_label.s", 2, 1, NP_ERR_DUPLICATE, "symbol 'a' is already defined at line 1"},
    {"unknown_directive.s", 1, 1, NP_ERR_UNKNOWN_KEY,
     "unknown directive '.dta'; did you mean '.data'?"},
    {"register_out_of_range.s", 1, 8, NP_ERR_RANGE, "register 'r16' does not exist (r0..r15)"},
    {"step_out_of_range.s", 1, 13, NP_ERR_RANGE,
     "operand 'step0' of loop: step 1099511627776 is out of range -549755813888..549755813887"},
    {"value_out_of_range.s", 1, 23, NP_ERR_RANGE,
     "operand 'start' of vpu.iota: offset 1099511627776 is out of range "
     "-549755813888..549755813887"},
    {"spad_offset_out_of_range.s", 1, 13, NP_ERR_RANGE,
     "operand 'dst' of vpu.exp: 0x100000000 is out of range 0x0..0xffffffff"},
    {"unterminated_string.s", 1, 17, NP_ERR_SYNTAX, "unterminated string"},
    {"equ_cycle.s", 2, 9, NP_ERR_INCONSISTENT, "symbol 'A' is defined in terms of itself"},
    {"division_by_zero.s", 1, 14, NP_ERR_RANGE, "division by zero"},
    {"core_out_of_range.s", 1, 1, NP_ERR_RANGE, "core 5 does not exist: the target has 2 cores"},
    {"dtype_not_in_target.s", 2, 5, NP_ERR_INCONSISTENT,
     "mxu.mm: the target's array does not multiply int8 (it does bf16)"},
    {"instruction_in_data.s", 2, 5, NP_ERR_SYNTAX,
     "instruction 'nop' in a data section (switch with .core N)"},
    {"byte_out_of_range.s", 2, 7, NP_ERR_RANGE, ".byte: 300 is out of range -128..255"},
    {"float_for_integer.s", 1, 12, NP_ERR_TYPE, "operand 'imm' of li: expected an integer, got 1.5"},
    {"missing_comma.s", 1, 11, NP_ERR_SYNTAX,
     "expected ',' or end of line after an operand, got '5'"},
    {"label_in_layout.s", 2, 7, NP_ERR_UNKNOWN_KEY,
     "undefined symbol 'end' (values of .core, .data, .bss, .zero, .space and .align may only "
     "use .equ symbols defined above)"},
    {"reserved_label.s", 1, 1, NP_ERR_SYNTAX, "'spad' is a reserved word and cannot name a symbol"},
    {"target_missing_key.s", 1, 1, NP_ERR_MISSING, ".target: missing key 'cores'"},
    {"positional_after_named.s", 1, 39, NP_ERR_SYNTAX,
     "positional operand after name=value operands"},
    {"nul_byte.s", 1, 4, NP_ERR_SYNTAX, "unexpected byte 0x00"},
    {"bad_escape.s", 1, 19, NP_ERR_SYNTAX,
     "bad escape in string (use \\n, \\t, \\\\, \\\" or \\xNN)"},
    {"bss_with_data.s", 2, 1, NP_ERR_SYNTAX, ".word in .bss, which holds no data (use .space)"},
    {"kernel_twice.s", 3, 9, NP_ERR_DUPLICATE, "kernel 'k' is already defined on core 0"},
    {"peer_group_out_of_range.s", 1, 16, NP_ERR_RANGE,
     "operand 'peer' of comm.send: group 'g16' does not exist (g0..g15)"},
    {"peer_minus_register.s", 1, 24, NP_ERR_SYNTAX,
     "operand 'peer' of comm.recv: a register can only be added to the rank (rank+rN)"},
    {"peer_rank_operator.s", 1, 23, NP_ERR_SYNTAX,
     "operand 'peer' of comm.send: expected '+', '-', '^' or ']' after rank, got '*'"},
    {"peer_offset_out_of_range.s", 1, 11, NP_ERR_RANGE,
     "operand 'peer' of comm.send: rank offset 600000 is out of range -524288..524287"},
    {"peer_xor_unclosed.s", 1, 29, NP_ERR_SYNTAX, "expected ')' to close rank^(rN+expr), got ']'"},
    {"reserved_rank.s", 1, 1, NP_ERR_SYNTAX, "'rank' is a reserved word and cannot name a symbol"},
};

TEST(malformed_assembly_gives_the_exact_error_and_position)
{
    size_t n = sizeof bad_asm / sizeof bad_asm[0];
    CU_ASSERT(n >= 25);
    for (size_t k = 0; k < n; k++) {
        char rel[256];
        snprintf(rel, sizeof rel, "tests/data/isa/%s", bad_asm[k].file);
        char path[4096];
        snprintf(path, sizeof path, "%s", harness_src_path(rel));
        isa_asm_opts o = {&tiny, false};
        isa_program *p = (isa_program *)1;
        np_err e = {0};
        np_status st = isa_asm_file(path, &o, &p, &e);
        bool ok = st == bad_asm[k].status && e.status == st && e.line == bad_asm[k].line &&
                  e.col == bad_asm[k].col && strcmp(e.msg, bad_asm[k].msg) == 0 && !p &&
                  strcmp(e.file, path) == 0;
        if (!ok) {
            fprintf(stderr, "%s: got %s %d:%d: %s\n  want %s %d:%d: %s\n", bad_asm[k].file,
                    np_status_name(st), e.line, e.col, e.msg, np_status_name(bad_asm[k].status),
                    bad_asm[k].line, bad_asm[k].col, bad_asm[k].msg);
            CU_FAIL("wrong assembler error");
        }
    }
}

TEST(malformed_assembly_makes_npusim_asm_exit_2_with_file_line_col)
{
    char out[] = "/tmp/npusim_isa_bad_XXXXXX";
    int fd = mkstemp(out);
    CU_ASSERT_FATAL(fd >= 0);
    close(fd);
    for (size_t k = 0; k < sizeof bad_asm / sizeof bad_asm[0]; k++) {
        char rel[256], path[4096], want[4600];
        snprintf(rel, sizeof rel, "tests/data/isa/%s", bad_asm[k].file);
        snprintf(path, sizeof path, "%s", harness_src_path(rel));
        harness_run r = harness_npusim("asm", path, "-o", out, NULL);
        snprintf(want, sizeof want, "npusim: %s:%d:%d: %s\n", path, bad_asm[k].line,
                 bad_asm[k].col, bad_asm[k].msg);
        if (r.exit_status != 2 || strcmp(r.err, want) != 0) {
            fprintf(stderr, "%s: status %d, stderr %s", bad_asm[k].file, r.exit_status, r.err);
            CU_FAIL("npusim asm did not fail with status 2 and the positioned message");
        }
        harness_run_free(&r);
    }
    unlink(out);
}

TEST(nothing_is_written_when_assembly_fails)
{
    char out[] = "/tmp/npusim_isa_none_XXXXXX";
    int fd = mkstemp(out);
    CU_ASSERT_FATAL(fd >= 0);
    close(fd);
    unlink(out);
    harness_run r = harness_npusim("asm", harness_src_path("tests/data/isa/missing_comma.s"), "-o",
                                   out, NULL);
    CU_ASSERT_EQUAL(r.exit_status, 2);
    CU_ASSERT_NOT_EQUAL(access(out, F_OK), 0);
    harness_run_free(&r);
    r = harness_npusim("asm", "/nonexistent/x.s", "-o", out, NULL);
    CU_ASSERT_EQUAL(r.exit_status, 2);
    CU_ASSERT_STRING_EQUAL(r.err, "npusim: /nonexistent/x.s: cannot open: No such file or directory\n");
    harness_run_free(&r);
}

TEST(hostile_nesting_is_an_error_not_a_stack_overflow)
{
    size_t n = 100000;
    char *src = malloc(3 * n + 64);
    np_err e = {0};
    /* 100000 unary minus signs, then 100000 parentheses */
    strcpy(src, "li r1, ");
    memset(src + 7, '-', n);
    strcpy(src + 7 + n, "1\n");
    CU_ASSERT_PTR_NULL(assemble(src, &e));
    CU_ASSERT_EQUAL(e.status, NP_ERR_RANGE);
    CU_ASSERT_EQUAL(e.col, 8 + 256);
    CU_ASSERT_STRING_EQUAL(e.msg, "expression nested more than 256 deep");
    memset(src + 7, '(', n);
    CU_ASSERT_PTR_NULL(assemble(src, &e));
    CU_ASSERT_STRING_EQUAL(e.msg, "expression nested more than 256 deep");
    /* a chain of 5000 .equ symbols, each defined by the next */
    size_t len = 0;
    for (int k = 0; k < 5000; k++)
        len += (size_t)sprintf(src + len, ".equ A%d, A%d\n", k, k + 1);
    sprintf(src + len, ".equ A5000, 1\nli r1, A0\n");
    CU_ASSERT_PTR_NULL(assemble(src, &e));
    CU_ASSERT_EQUAL(e.status, NP_ERR_RANGE);
    CU_ASSERT_STRING_EQUAL(e.msg, "symbol 'A64': .equ symbols nest more than 64 deep");
    /* literals that no float holds */
    CU_ASSERT_PTR_NULL(assemble(".data\n.float 1e999\n", &e));
    CU_ASSERT_STRING_EQUAL(e.msg, "number '1e999' is out of range");
    CU_ASSERT_PTR_NULL(assemble(".data\n.float 1e300\n", &e));
    CU_ASSERT_STRING_EQUAL(e.msg, ".float: 1e+300 does not fit fp32");
    /* nor a half-precision one: 65520 is the fp16 midpoint past 65504 that ties to infinity;
     * 3.4e38 rounds past bf16's largest 0x7f7f (3.3895e38) */
    CU_ASSERT_PTR_NULL(assemble(".data\n.fp16 65520\n", &e));
    CU_ASSERT_STRING_EQUAL(e.msg, ".fp16: 65520 does not fit fp16 (largest finite 65504)");
    CU_ASSERT_PTR_NULL(assemble(".data\n.fp16 -70000\n", &e));
    CU_ASSERT_EQUAL(e.status, NP_ERR_RANGE);
    CU_ASSERT_PTR_NULL(assemble(".data\n.bf16 3.4e38\n", &e));
    CU_ASSERT_EQUAL(e.status, NP_ERR_RANGE);
    isa_program *p = assemble(".data\n.bf16 3.38e38\n.fp16 65519\n", &e);
    CU_ASSERT_PTR_NOT_NULL(p); /* both round down to the largest finite value */
    isa_program_free(p);
    /* an empty trace name, which the ELF cannot hold */
    CU_ASSERT_PTR_NULL(assemble(".core 0\ntrace.begin \"\"\n", &e));
    CU_ASSERT_STRING_EQUAL(e.msg, "operand 'name' of trace.begin: the name is empty");
    /* nor a raw NUL byte inside a string (found by fuzz_isa_asm: the name was cut there, so
     * the disassembly did not reassemble) */
    static const char raw_nul[] = ".core 0\ntrace.end \"a\0b\"\nhalt\n";
    isa_asm_opts o = {&tiny, false};
    isa_program *q = NULL;
    CU_ASSERT_EQUAL(isa_asm(raw_nul, sizeof raw_nul - 1, "n.s", &o, &q, &e), NP_ERR_RANGE);
    CU_ASSERT_STRING_EQUAL(e.msg, "a string cannot contain a NUL byte");
    CU_ASSERT_EQUAL(e.col, 13); /* the NUL: trace.end "a then it */
    CU_ASSERT_PTR_NULL(q);
    free(src);
}

/* ---- Programs ---------------------------------------------------------------------------------- */

TEST(the_manuals_examples_assemble_and_round_trip)
{
    for (size_t k = 0; k < isa_doc_n_examples; k++) {
        np_err e = {0};
        isa_program *p = assemble(isa_doc_examples[k], &e);
        if (!p) {
            fprintf(stderr, "example %zu\n", k);
            CU_FAIL("an example of docs/isa.md does not assemble");
            continue;
        }
        check_round_trip(p);
        isa_program_free(p);
    }
}

static void check_example_file(const char *name, const char *kernel, uint32_t min_insns)
{
    char rel[256], src[4096], elf1[] = "/tmp/npusim_isa_ex1_XXXXXX",
                              elf2[] = "/tmp/npusim_isa_ex2_XXXXXX",
                              dis[] = "/tmp/npusim_isa_exs_XXXXXX";
    snprintf(rel, sizeof rel, "isa/examples/%s", name);
    snprintf(src, sizeof src, "%s", harness_src_path(rel));
    close(mkstemp(elf1));
    close(mkstemp(elf2));
    close(mkstemp(dis));
    harness_run r = harness_npusim("asm", src, "-o", elf1, NULL);
    CU_ASSERT_EQUAL(r.exit_status, 0);
    CU_ASSERT_STRING_EQUAL(r.err, "");
    harness_run_free(&r);
    r = harness_npusim("disasm", elf1, "-o", dis, NULL);
    CU_ASSERT_EQUAL(r.exit_status, 0);
    harness_run_free(&r);
    r = harness_npusim("asm", dis, "-o", elf2, NULL);
    CU_ASSERT_EQUAL(r.exit_status, 0);
    harness_run_free(&r);
    size_t n1 = 0, n2 = 0;
    char *a = harness_read_file(elf1, &n1), *b = harness_read_file(elf2, &n2);
    CU_ASSERT(a && b && n1 > 0 && n1 == n2 && memcmp(a, b, n1) == 0);
    isa_program *p = NULL;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(isa_elf_load(elf1, &tiny, &p, NULL, &e), NP_OK);
    CU_ASSERT(p->n_cores >= 1);
    CU_ASSERT(p->cores[0].n_insns >= min_insns);
    CU_ASSERT(p->cores[0].n_kernels == 1 && strcmp(p->cores[0].kernels[0].name, kernel) == 0);
    isa_program_free(p);
    free(a);
    free(b);
    unlink(elf1);
    unlink(elf2);
    unlink(dis);
}

TEST(example_programs_assemble_disassemble_and_reassemble_identically)
{
    check_example_file("matmul_db.s", "matmul", 30);
    check_example_file("softmax.s", "softmax", 15);
    check_example_file("sendrecv.s", "send_and_collect", 9);
}

TEST(the_double_buffered_matmul_alternates_buffers_and_loops_instead_of_unrolling)
{
    isa_program *p = NULL;
    np_err e = {0};
    isa_asm_opts o = {&tiny, false};
    CU_ASSERT_EQUAL_FATAL(isa_asm_file(harness_src_path("isa/examples/matmul_db.s"), &o, &p, &e),
                          NP_OK);
    const isa_core_text *ct = &p->cores[0];
    unsigned loops = 0, mm = 0, first = 0;
    int64_t a_bufs[2] = {-1, -1};
    for (uint32_t i = 0; i < ct->n_insns; i++) {
        const isa_insn *in = &ct->insns[i];
        loops += in->op == ISA_OP_LOOP;
        if (in->op == ISA_OP_MXU_MM) {
            if (mm < 2)
                a_bufs[mm] = in->MXU_MM.a.val;
            mm++;
            first += in->MXU_MM.mode.val == ISA_ACCM_FIRST;
        }
    }
    /* 64x64x128 in 32x16x32 tiles would be 2*4*4 = 32 multiplies unrolled; the program has
     * two (ping and pong) inside three loops. */
    CU_ASSERT_EQUAL(loops, 3);
    CU_ASSERT_EQUAL(mm, 2);
    CU_ASSERT_EQUAL(first, 1);
    CU_ASSERT_EQUAL(a_bufs[0], 0x0000);
    CU_ASSERT_EQUAL(a_bufs[1], 0x0800); /* A1 = A0 + 32 x 32 x 2 */
    isa_program_free(p);
}

TEST(random_programs_disassemble_and_reassemble_to_the_same_program_and_bytes)
{
    uint64_t seed = 0xd15a5;
    unsigned insns = 0;
    for (int k = 0; k < 40; k++) {
        isa_program *p = gen_program(&seed, 120);
        np_err e = {0};
        if (isa_program_validate(p, &e) != NP_OK) {
            fprintf(stderr, "generated program %d is invalid: %s\n", k, e.msg);
            CU_FAIL("generator bug");
            isa_program_free(p);
            continue;
        }
        for (uint32_t c = 0; c < p->n_cores; c++)
            insns += p->cores[c].n_insns;
        check_round_trip(p);
        isa_program_free(p);
    }
    CU_ASSERT(insns >= 2000);
}

/* Runs of zeros in a data section disassemble as one .zero line (a fuzzed program with two
 * megabytes of .zero took 14 MB of .byte text, seconds to reassemble): .word 1 and .zero
 * 100000 then .byte 5 are bytes 01 00 00 00, 100,000 zeros, 05 -> the first .byte line holds
 * 01 and 15 zeros, then .zero 99,988, then the 05. */
TEST(zeros_in_data_disassemble_as_one_zero_line_and_reassemble_identically)
{
    np_err e = {0};
    isa_program *p = assemble(".data 0x0\nx: .word 1\n.zero 100000\n.byte 5\n"
                              ".core 0\n.kernel k\n    halt\n", &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    char *text = NULL;
    CU_ASSERT_EQUAL_FATAL(isa_disasm(p, &text, &e), NP_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "    .byte 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, "
                                        "0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00\n"
                                        "    .zero 99988\n    .byte 0x05\n"));
    CU_ASSERT(strlen(text) < 1000);
    free(text);
    check_round_trip(p);
    isa_program_free(p);
}

TEST(disasm_json_lists_every_instruction_with_its_word_text_and_kernel)
{
    char src[] = "/tmp/npusim_isa_js_XXXXXX", elf[] = "/tmp/npusim_isa_je_XXXXXX";
    close(mkstemp(src));
    close(mkstemp(elf));
    FILE *f = fopen(src, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs(".core 0\nnop\n.kernel load\ndma.copy spad[0x40], hbm[0x100], bf16, 8\nhalt\n", f);
    fclose(f);
    harness_run r = harness_npusim("asm", "--arch", "tiny", src, "-o", elf, NULL);
    CU_ASSERT_EQUAL_FATAL(r.exit_status, 0);
    harness_run_free(&r);
    r = harness_npusim("disasm", "--json", elf, NULL);
    CU_ASSERT_EQUAL_FATAL(r.exit_status, 0);
    json_error_t je;
    json_t *j = json_loads(r.out, 0, &je);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    json_t *insns = json_object_get(json_array_get(json_object_get(j, "cores"), 0), "insns");
    CU_ASSERT_EQUAL_FATAL(json_array_size(insns), 3u);
    /* docs/isa.md: opcodes nop 0x01, dma.copy 0x20, halt 0x02 in bits 0..7 (the last two hex
     * digits of the word, printed from bit 255 down); the kernel runs from its label on. */
    static const char *const text[] = {"nop", "dma.copy spad[0x40], hbm[0x100], bf16, 8", "halt"};
    static const char *const op[] = {"01", "20", "02"};
    for (size_t i = 0; i < 3; i++) {
        json_t *in = json_array_get(insns, i);
        const char *w = json_string_value(json_object_get(in, "word"));
        CU_ASSERT_EQUAL(json_integer_value(json_object_get(in, "pc")), (json_int_t)i);
        CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(in, "text")), text[i]);
        CU_ASSERT_FATAL(w && strlen(w) == 64);
        CU_ASSERT_STRING_EQUAL(w + 62, op[i]);
        if (i == 0) {
            CU_ASSERT_TRUE(json_is_null(json_object_get(in, "kernel")));
        } else {
            CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(in, "kernel")), "load");
        }
    }
    CU_ASSERT_EQUAL(strspn(json_string_value(json_object_get(json_array_get(insns, 0), "word")), "0"),
                    63u); /* nop has no operands: all zero but the opcode bit 0 */
    json_decref(j);
    harness_run_free(&r);
    unlink(src);
    unlink(elf);
}
