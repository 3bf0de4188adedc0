/* test_isa_emit.c — the emitter (isa/isa_emit.h): programs built through the table's typed
 * constructors equal what the assembler makes of the same source, operands are range-checked
 * from the table with the core, instruction and kernel in the message, errors are sticky,
 * loops and kernels nest correctly, and HBM data is laid out as documented. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "isa.h"
#include "isa_asm.h"
#include "isa_emit.h"
#include "isa_prog.h"

static isa_target target(uint32_t cores)
{
    return (isa_target){.array_rows = 4, .array_cols = 4, .cores = cores,
                        .dtypes = (1u << ISA_DTYPE_BF16) | (1u << ISA_DTYPE_INT8),
                        .spad_bytes = 65536, .acc_bytes = 4096};
}

static isa_program *assemble(const char *src, uint32_t cores)
{
    isa_target t = target(cores);
    isa_asm_opts o = {.target = &t};
    isa_program *p;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(isa_asm(src, strlen(src), "t.s", &o, &p, &e), NP_OK);
    return p;
}

/* The header's example, and the same program written in assembly. */
TEST(the_header_example_builds_the_program_the_assembler_makes_of_its_source)
{
    isa_target t = target(2);
    isa_program *p = isa_program_new(&t);
    isa_emit *e;
    np_err err = {0};
    CU_ASSERT_EQUAL_FATAL(isa_emit_new(p, NULL, &e, &err), NP_OK);
    uint64_t x;
    isa_emit_bss(e, "X", 4096, 64, &x);
    isa_emit_core(e, 0);
    isa_emit_kernel_begin(e, "scale");
    ISA_EMIT(e, LI, isa_reg(1), isa_imm((int64_t)x));
    ISA_EMIT(e, LOOP, isa_imm(4), isa_step(1, 1024));
    ISA_EMIT(e, DMA_COPY, isa_spad(0, 0), isa_hbm(1, 0), isa_enum(ISA_DTYPE_FP32), isa_imm(256));
    ISA_EMIT(e, VPU_MULS, isa_spad(0, 0), isa_spad(0, 0), isa_f32(2.0f), isa_imm(16),
             isa_imm(16), isa_enum(ISA_DTYPE_FP32));
    ISA_EMIT(e, DMA_COPY, isa_hbm(1, 0), isa_spad(0, 0), isa_enum(ISA_DTYPE_FP32), isa_imm(16),
             .n1 = isa_imm(16), .src_s1 = isa_imm(64));
    ISA_EMIT(e, ENDLOOP);
    isa_emit_kernel_end(e);
    ISA_EMIT(e, HALT);
    CU_ASSERT_EQUAL_FATAL(isa_emit_finish(e, &err), NP_OK);
    isa_emit_free(e);
    CU_ASSERT_EQUAL(x, ISA_EMIT_BSS_BASE);
    const char *src = ".bss 0x100000\nX: .space 4096\n.core 0\n.kernel scale\n"
                      "    li r1, 0x100000\n    loop 4, r1+=1024\n"
                      "    dma.copy spad[0], hbm[r1], fp32, 256\n"
                      "    vpu.muls spad[0], spad[0], 2.0, 16, 16, fp32\n"
                      "    dma.copy hbm[r1], spad[0], fp32, 16, 16, src_s1=64\n"
                      "    endloop\n.endk\n    halt\n";
    isa_program *q = assemble(src, 2);
    CU_ASSERT(isa_program_equal(p, q));
    /* the disassembler shows it, and its text assembles back to the same program */
    char *text;
    CU_ASSERT_EQUAL_FATAL(isa_disasm(p, &text, &err), NP_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "loop 4, r1+=1024"));
    isa_program *r = assemble(text, 2);
    CU_ASSERT(isa_program_equal(p, r));
    free(text);
    isa_program_free(p);
    isa_program_free(q);
    isa_program_free(r);
}

TEST(omitted_optional_operands_take_the_table_defaults)
{
    isa_target t = target(1);
    isa_program *p = isa_program_new(&t);
    isa_emit *e;
    np_err err = {0};
    CU_ASSERT_EQUAL_FATAL(isa_emit_new(p, NULL, &e, &err), NP_OK);
    isa_emit_core(e, 0);
    ISA_EMIT(e, SEM_SIGNAL, isa_enum(ISA_UNIT_DMA), isa_sem(3));
    ISA_EMIT(e, MXU_DRAIN, isa_spad(0, 64), isa_acc(0, 0), isa_imm(4), isa_imm(4),
             isa_enum(ISA_DTYPE_BF16));
    ISA_EMIT(e, DMA_COPY, isa_spad(0, 0), isa_hbm(0, 0x100000), isa_enum(ISA_DTYPE_BF16),
             isa_imm(8));
    CU_ASSERT_EQUAL_FATAL(isa_emit_finish(e, &err), NP_OK);
    isa_emit_free(e);
    isa_insn want;
    isa_insn_init(&want, ISA_OP_SEM_SIGNAL);
    want.SEM_SIGNAL.sem = isa_imm(3);
    CU_ASSERT(isa_insn_equal(&p->cores[0].insns[0], &want));
    CU_ASSERT_EQUAL(p->cores[0].insns[0].SEM_SIGNAL.n.val, 1);           /* n = 1 */
    CU_ASSERT_EQUAL(isa_opnd_f32(&p->cores[0].insns[1].MXU_DRAIN.scale), 1.0f); /* scale = 1.0 */
    CU_ASSERT_EQUAL(p->cores[0].insns[1].MXU_DRAIN.bias.space, ISA_SPACE_NONE);
    CU_ASSERT_EQUAL(p->cores[0].insns[2].DMA_COPY.n1.val, 1);
    CU_ASSERT_EQUAL(p->cores[0].insns[2].DMA_COPY.n2.val, 1);
    /* a whole instruction goes in as it is: scale = 0.0 is expressible */
    CU_ASSERT_EQUAL_FATAL(isa_emit_new(p, NULL, &e, &err), NP_OK);
    isa_emit_core(e, 0);
    isa_insn d = p->cores[0].insns[1];
    d.MXU_DRAIN.scale = isa_f32(0.0f);
    CU_ASSERT_EQUAL(isa_emit_insn(e, &d), NP_OK);
    CU_ASSERT_EQUAL(isa_opnd_f32(&p->cores[0].insns[3].MXU_DRAIN.scale), 0.0f);
    isa_emit_free(e);
    isa_program_free(p);
}

TEST(an_out_of_range_operand_is_a_sticky_error_naming_core_instruction_and_kernel)
{
    isa_target t = target(2);
    isa_program *p = isa_program_new(&t);
    isa_emit *e;
    np_err err = {0};
    CU_ASSERT_EQUAL_FATAL(isa_emit_new(p, NULL, &e, &err), NP_OK);
    isa_emit_core(e, 1);
    isa_emit_kernel_begin(e, "k");
    ISA_EMIT(e, NOP);
    /* n0 is a 20-bit count: 1 .. 1048575 */
    np_status st = ISA_EMIT(e, DMA_COPY, isa_spad(0, 0), isa_hbm(0, 0), isa_enum(ISA_DTYPE_BF16),
                            isa_imm(1 << 20));
    CU_ASSERT_EQUAL(st, NP_ERR_RANGE);
    CU_ASSERT_EQUAL(isa_emit_status(e, &err), NP_ERR_RANGE);
    CU_ASSERT_STRING_EQUAL(err.msg, "core 1, instruction 1 (kernel k): operand 'n0' of dma.copy: "
                                    "1048576 is out of range 1..1048575");
    /* later calls do nothing and report the first error */
    CU_ASSERT_EQUAL(ISA_EMIT(e, NOP), NP_ERR_RANGE);
    CU_ASSERT_EQUAL(isa_emit_kernel_end(e), NP_ERR_RANGE);
    CU_ASSERT_EQUAL(p->cores[0].n_insns, 1u);
    np_err err2 = {0};
    CU_ASSERT_EQUAL(isa_emit_finish(e, &err2), NP_ERR_RANGE);
    CU_ASSERT_STRING_EQUAL(err2.msg, err.msg);
    isa_emit_free(e);
    /* a wrong address space is a type error; a core the target lacks a range error */
    CU_ASSERT_EQUAL_FATAL(isa_emit_new(p, NULL, &e, &err), NP_OK);
    isa_emit_core(e, 0);
    CU_ASSERT_EQUAL(ISA_EMIT(e, MXU_LOAD, isa_hbm(0, 0), isa_imm(4), isa_imm(4),
                             isa_enum(ISA_DTYPE_BF16)), NP_ERR_TYPE);
    isa_emit_free(e);
    CU_ASSERT_EQUAL_FATAL(isa_emit_new(p, NULL, &e, &err), NP_OK);
    CU_ASSERT_EQUAL(isa_emit_core(e, 2), NP_ERR_RANGE);
    CU_ASSERT_EQUAL(ISA_EMIT(e, NOP), NP_ERR_RANGE);
    isa_emit_free(e);
    /* no core selected */
    CU_ASSERT_EQUAL_FATAL(isa_emit_new(p, NULL, &e, &err), NP_OK);
    CU_ASSERT_EQUAL(ISA_EMIT(e, NOP), NP_ERR_INCONSISTENT);
    isa_emit_free(e);
    isa_program_free(p);
}

TEST(loops_and_kernels_nest_as_the_isa_allows)
{
    isa_target t = target(1);
    isa_program *p = isa_program_new(&t);
    isa_emit *e;
    np_err err = {0};
    /* eight nested loops are fine, a ninth is not */
    CU_ASSERT_EQUAL_FATAL(isa_emit_new(p, NULL, &e, &err), NP_OK);
    isa_emit_core(e, 0);
    for (int i = 0; i < ISA_LOOP_DEPTH; i++)
        CU_ASSERT_EQUAL(ISA_EMIT(e, LOOP, isa_imm(2)), NP_OK);
    CU_ASSERT_EQUAL(isa_emit_loop_depth(e), (unsigned)ISA_LOOP_DEPTH);
    CU_ASSERT_EQUAL(ISA_EMIT(e, LOOP, isa_imm(2)), NP_ERR_FORMAT);
    isa_emit_free(e);
    isa_program_free(p);
    /* endloop without loop; a loop left open at the end */
    p = isa_program_new(&t);
    CU_ASSERT_EQUAL_FATAL(isa_emit_new(p, NULL, &e, &err), NP_OK);
    isa_emit_core(e, 0);
    CU_ASSERT_EQUAL(ISA_EMIT(e, ENDLOOP), NP_ERR_FORMAT);
    isa_emit_free(e);
    isa_program_free(p);
    p = isa_program_new(&t);
    CU_ASSERT_EQUAL_FATAL(isa_emit_new(p, NULL, &e, &err), NP_OK);
    isa_emit_core(e, 0);
    ISA_EMIT(e, LOOP, isa_imm(3));
    CU_ASSERT_EQUAL(isa_emit_finish(e, &err), NP_ERR_INCONSISTENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "1 loop not closed"));
    isa_emit_free(e);
    isa_program_free(p);
    /* a kernel cannot end with a loop of its own open, nor close a loop opened before it */
    p = isa_program_new(&t);
    CU_ASSERT_EQUAL_FATAL(isa_emit_new(p, NULL, &e, &err), NP_OK);
    isa_emit_core(e, 0);
    ISA_EMIT(e, LOOP, isa_imm(3));
    isa_emit_kernel_begin(e, "inner");
    CU_ASSERT_EQUAL(ISA_EMIT(e, ENDLOOP), NP_ERR_FORMAT);
    isa_emit_free(e);
    isa_program_free(p);
    p = isa_program_new(&t);
    CU_ASSERT_EQUAL_FATAL(isa_emit_new(p, NULL, &e, &err), NP_OK);
    isa_emit_core(e, 0);
    isa_emit_kernel_begin(e, "k");
    ISA_EMIT(e, LOOP, isa_imm(3));
    CU_ASSERT_EQUAL(isa_emit_kernel_end(e), NP_ERR_INCONSISTENT);
    isa_emit_free(e);
    isa_program_free(p);
    /* kernels do not nest, names are unique per core and must be identifiers */
    p = isa_program_new(&t);
    CU_ASSERT_EQUAL_FATAL(isa_emit_new(p, NULL, &e, &err), NP_OK);
    isa_emit_core(e, 0);
    isa_emit_kernel_begin(e, "a");
    CU_ASSERT_EQUAL(isa_emit_kernel_begin(e, "b"), NP_ERR_INCONSISTENT);
    isa_emit_free(e);
    isa_program_free(p);
    p = isa_program_new(&t);
    CU_ASSERT_EQUAL_FATAL(isa_emit_new(p, NULL, &e, &err), NP_OK);
    isa_emit_core(e, 0);
    isa_emit_kernel_begin(e, "a");
    ISA_EMIT(e, NOP);
    isa_emit_kernel_end(e);
    CU_ASSERT(isa_emit_has_kernel(e, 0, "a"));
    CU_ASSERT_EQUAL(isa_emit_kernel_begin(e, "a"), NP_ERR_DUPLICATE);
    isa_emit_free(e);
    CU_ASSERT_EQUAL_FATAL(isa_emit_new(p, NULL, &e, &err), NP_OK);
    isa_emit_core(e, 0);
    CU_ASSERT_EQUAL(isa_emit_kernel_begin(e, "r3"), NP_ERR_TYPE);
    isa_emit_free(e);
    isa_program_free(p);
}

TEST(kernels_on_several_cores_and_appends_after_assembled_text)
{
    /* A program from the assembler goes on growing: the emitter appends after its text and
     * data, and a core it adds is kept in ascending order. */
    isa_program *p = assemble(".bss 0x100000\nA: .space 100\n.core 1\n    nop\n", 2);
    isa_emit *e;
    np_err err = {0};
    CU_ASSERT_EQUAL_FATAL(isa_emit_new(p, NULL, &e, &err), NP_OK);
    uint64_t b;
    CU_ASSERT_EQUAL(isa_emit_bss(e, "B", 10, 32, &b), NP_OK);
    CU_ASSERT_EQUAL(b, 0x100000u + 128u); /* after A's 100 bytes, 32-aligned */
    for (uint32_t c = 2; c-- > 0;) {
        isa_emit_core(e, c);
        isa_emit_kernel_begin(e, "mm");
        ISA_EMIT(e, FENCE);
        isa_emit_kernel_end(e);
        CU_ASSERT_EQUAL(isa_emit_cur_core(e), c);
    }
    isa_opnd nm;
    isa_emit_name(e, "phase", &nm);
    isa_opnd nm2;
    isa_emit_name(e, "phase", &nm2);
    CU_ASSERT_EQUAL(nm.val, nm2.val); /* stored once */
    isa_emit_core(e, 0);
    ISA_EMIT(e, TRACE_BEGIN, nm);
    ISA_EMIT(e, TRACE_END, nm);
    CU_ASSERT_EQUAL_FATAL(isa_emit_finish(e, &err), NP_OK);
    isa_emit_free(e);
    CU_ASSERT_EQUAL_FATAL(p->n_cores, 2u);
    CU_ASSERT_EQUAL(p->cores[0].core, 0u);
    CU_ASSERT_EQUAL(p->cores[1].core, 1u);
    CU_ASSERT_EQUAL(p->cores[1].n_insns, 2u); /* nop, then the kernel's fence */
    CU_ASSERT_EQUAL(p->cores[1].kernels[0].start, 1u);
    CU_ASSERT_EQUAL(p->cores[1].kernels[0].count, 1u);
    CU_ASSERT_STRING_EQUAL(isa_program_name(p, nm.val), "phase");
    CU_ASSERT_EQUAL(isa_program_symbol(p, "B")->addr, b);
    isa_program_free(p);
}

TEST(data_symbols_are_laid_out_in_their_sections_with_their_alignment)
{
    isa_target t = target(1);
    isa_program *p = isa_program_new(&t);
    isa_emit *e;
    np_err err = {0};
    isa_emit_opts o = {.data_base = 0x1000, .bss_base = 0x2000, .hbm_bytes = 0x3000};
    CU_ASSERT_EQUAL_FATAL(isa_emit_new(p, &o, &e, &err), NP_OK);
    uint64_t a, b, c, d;
    const uint8_t bytes[3] = {1, 2, 3};
    CU_ASSERT_EQUAL(isa_emit_bss(e, "A", 5, 0, &a), NP_OK);
    CU_ASSERT_EQUAL(isa_emit_data(e, "K", bytes, 3, 16, &b), NP_OK);
    CU_ASSERT_EQUAL(isa_emit_bss(e, NULL, 1, 256, &c), NP_OK); /* anonymous */
    CU_ASSERT_EQUAL(isa_emit_data(e, "L", bytes, 2, 8, &d), NP_OK);
    CU_ASSERT_EQUAL(a, 0x2000u);
    CU_ASSERT_EQUAL(b, 0x1000u);
    CU_ASSERT_EQUAL(c, 0x2100u);
    CU_ASSERT_EQUAL(d, 0x1008u);
    CU_ASSERT_EQUAL(isa_emit_bss(e, "A", 1, 1, &c), NP_ERR_DUPLICATE);
    isa_emit_free(e);
    CU_ASSERT_EQUAL(isa_program_validate(p, &err), NP_OK);
    const isa_data *dd = &p->data[1];
    CU_ASSERT_STRING_EQUAL(dd->name, ".data");
    CU_ASSERT_EQUAL(dd->size, 10u);
    CU_ASSERT(dd->bytes[0] == 1 && dd->bytes[2] == 3 && dd->bytes[5] == 0 && dd->bytes[9] == 2);
    CU_ASSERT_STRING_EQUAL(p->symbols[0].name, "A"); /* section-then-address order */
    CU_ASSERT_STRING_EQUAL(p->symbols[1].name, "K");
    CU_ASSERT_STRING_EQUAL(p->symbols[2].name, "L");
    /* .data may not grow into .bss, nor .bss past the HBM */
    CU_ASSERT_EQUAL_FATAL(isa_emit_new(p, &o, &e, &err), NP_OK);
    CU_ASSERT_EQUAL(isa_emit_data(e, "M", bytes, 0x1000, 1, &d), NP_ERR_RANGE);
    isa_emit_free(e);
    CU_ASSERT_EQUAL_FATAL(isa_emit_new(p, &o, &e, &err), NP_OK);
    CU_ASSERT_EQUAL(isa_emit_bss(e, "Z", 0x1000, 1, &d), NP_ERR_RANGE);
    isa_emit_status(e, &err);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "HBM limit"));
    isa_emit_free(e);
    CU_ASSERT_EQUAL_FATAL(isa_emit_new(p, &o, &e, &err), NP_OK);
    CU_ASSERT_EQUAL(isa_emit_bss(e, "Z", 0, 1, &d), NP_ERR_RANGE);
    isa_emit_free(e);
    isa_program_free(p);
}
