/* test_core_table.c — the hardware model covers the whole ISA table: every instruction's
 * operand family has a footprint and a compute-time entry, and every instruction has
 * semantics in functional mode (Spike's "every opcode has semantics and a timing entry").
 * A row added to isa.def without them fails here, not silently in a run. */
#include <string.h>

#include "core_cost.h"
#include "core_func.h"
#include "harness.h"
#include "isa.h"

TEST(every_op_has_a_family_a_cost_entry_and_semantics_in_the_hardware_model)
{
    for (int op = 1; op < ISA_OP_COUNT; op++) {
        isa_family f = isa_ops[op].family;
        CU_ASSERT((unsigned)f < ISA_FAMILY_COUNT);
        if (!core_family_modelled(f) || !core_func_has_semantics((isa_op)op))
            CU_FAIL_FATAL(isa_ops[op].mnemonic);
    }
    CU_ASSERT(!core_func_has_semantics(ISA_OP_ILLEGAL));
    CU_ASSERT(!core_family_modelled(ISA_FAMILY_COUNT));
}

TEST(footprints_follow_the_family_of_each_op)
{
    /* Two ops of one family have the same footprint for the same operands; a reduction per
     * row writes one element per row, one per column writes one per column. */
    isa_insn add, mul, rsum, csum;
    isa_insn_init(&add, ISA_OP_VPU_ADD);
    add.VPU_ADD.dst = isa_spad(0, 0x1000);
    add.VPU_ADD.a = isa_spad(0, 0x2000);
    add.VPU_ADD.b = isa_spad(0, 0x3000);
    add.VPU_ADD.rows = isa_imm(3);
    add.VPU_ADD.cols = isa_imm(5);
    add.VPU_ADD.dtype = isa_imm(ISA_DTYPE_FP32);
    mul = add;
    mul.op = ISA_OP_VPU_MUL;
    core_range ra[CORE_MAX_RANGES], rm[CORE_MAX_RANGES];
    unsigned na = core_ranges(&add, 0, 0, ra), nm = core_ranges(&mul, 0, 0, rm);
    CU_ASSERT_EQUAL_FATAL(na, 3u);
    CU_ASSERT_EQUAL_FATAL(nm, 3u);
    for (unsigned i = 0; i < na; i++) {
        CU_ASSERT_EQUAL(ra[i].addr, rm[i].addr);
        CU_ASSERT_EQUAL(ra[i].bytes, rm[i].bytes);
        CU_ASSERT_EQUAL(ra[i].write, rm[i].write);
    }
    CU_ASSERT_EQUAL(ra[2].bytes, 3u * 5u * 4u); /* dst: rows x cols fp32 */
    isa_insn_init(&rsum, ISA_OP_VPU_RSUM);
    rsum.VPU_RSUM.dst = isa_spad(0, 0);
    rsum.VPU_RSUM.src = isa_spad(0, 0x100);
    rsum.VPU_RSUM.rows = isa_imm(3);
    rsum.VPU_RSUM.cols = isa_imm(5);
    rsum.VPU_RSUM.dtype = isa_imm(ISA_DTYPE_BF16);
    csum = rsum;
    csum.op = ISA_OP_VPU_CSUM;
    core_range r[CORE_MAX_RANGES];
    CU_ASSERT_EQUAL_FATAL(core_ranges(&rsum, 0, 0, r), 2u);
    CU_ASSERT_EQUAL(r[1].bytes, 3u * 2u);
    CU_ASSERT_EQUAL_FATAL(core_ranges(&csum, 0, 0, r), 2u);
    CU_ASSERT_EQUAL(r[1].bytes, 5u * 2u);
    /* front-end instructions touch nothing */
    isa_insn nop;
    isa_insn_init(&nop, ISA_OP_FENCE);
    CU_ASSERT_EQUAL(core_ranges(&nop, 0, 0, r), 0u);
}
