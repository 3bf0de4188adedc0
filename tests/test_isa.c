/* test_isa.c — the instruction table itself, the encoder and decoder: structural checks of
 * isa.def (Spike's overlap test), hand-computed encodings, the exact errors of encode and
 * decode, seeded round-trip properties, and the freshness of docs/isa.md. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "isa.h"
#include "isa_asm.h"
#include "test_isa_gen.h"

/* ---- The table ------------------------------------------------------------------------------- */

TEST(table_has_unique_mnemonics_and_opcodes)
{
    for (int a = 1; a < ISA_OP_COUNT; a++) {
        CU_ASSERT_PTR_NOT_NULL_FATAL(isa_ops[a].mnemonic);
        CU_ASSERT(isa_ops[a].opcode != 0);
        for (int b = a + 1; b < ISA_OP_COUNT; b++) {
            CU_ASSERT(strcmp(isa_ops[a].mnemonic, isa_ops[b].mnemonic) != 0);
            CU_ASSERT(isa_ops[a].opcode != isa_ops[b].opcode);
        }
        CU_ASSERT_EQUAL(isa_op_find(isa_ops[a].mnemonic), a);
        CU_ASSERT_EQUAL(isa_op_by_opcode(isa_ops[a].opcode), a);
    }
    CU_ASSERT_EQUAL(isa_op_by_opcode(0), ISA_OP_ILLEGAL);
    CU_ASSERT_EQUAL(isa_op_find("vpu.ad"), ISA_OP_ILLEGAL);
}

TEST(table_mnemonics_are_the_op_names_in_lower_case_with_dots)
{
    for (int op = 1; op < ISA_OP_COUNT; op++) {
        char want[64];
        size_t n = strlen(isa_ops[op].name);
        for (size_t i = 0; i <= n; i++)
            want[i] = isa_ops[op].name[i] == '_' ? '.' : (char)tolower(isa_ops[op].name[i]);
        CU_ASSERT_STRING_EQUAL(isa_ops[op].mnemonic, want);
    }
}

TEST(table_every_op_has_semantics_and_timing)
{
    for (int op = 1; op < ISA_OP_COUNT; op++) {
        CU_ASSERT(isa_ops[op].semantics && strlen(isa_ops[op].semantics) > 5);
        CU_ASSERT(isa_ops[op].timing && strlen(isa_ops[op].timing) > 5);
        CU_ASSERT(isa_ops[op].unit < ISA_UNIT_COUNT);
    }
}

TEST(table_fields_fit_the_word_with_the_widths_of_their_kinds)
{
    for (int op = 1; op < ISA_OP_COUNT; op++) {
        const isa_op_info *in = &isa_ops[op];
        unsigned bits = 0;
        bool seen_optional = false;
        CU_ASSERT(in->n_fields <= ISA_MAX_OPNDS);
        for (unsigned f = 0; f < in->n_fields; f++) {
            const isa_field *fd = &in->fields[f];
            if (isa_kinds[fd->kind].bits)
                CU_ASSERT_EQUAL(fd->bits, isa_kinds[fd->kind].bits);
            CU_ASSERT(fd->bits >= 1 && fd->bits <= 64);
            /* Required operands come first, so positional operands map to fields in order. */
            if (fd->optional)
                seen_optional = true;
            else
                CU_ASSERT(!seen_optional);
            /* Defaults are valid values of the field. */
            if (fd->optional) {
                isa_opnd o = {.val = fd->dflt};
                np_err e = {0};
                CU_ASSERT_EQUAL(isa_operand_check((isa_op)op, f, &o, &e), NP_OK);
            }
            for (unsigned g = 0; g < f; g++)
                CU_ASSERT(strcmp(in->fields[g].name, fd->name) != 0);
            CU_ASSERT_EQUAL(isa_field_pos((isa_op)op, f), ISA_POS_FIELDS + bits);
            bits += fd->bits;
        }
        CU_ASSERT(ISA_POS_FIELDS + bits <= ISA_WORD_BITS);
    }
}

/* Spike's check: no word matches two instructions' (match, mask) patterns. Two patterns can
 * both match a word exactly when they agree on the bits both masks cover. */
TEST(table_encodings_do_not_overlap)
{
    for (int a = 1; a < ISA_OP_COUNT; a++) {
        uint8_t ma[ISA_WORD_BYTES], ka[ISA_WORD_BYTES];
        isa_op_match_mask((isa_op)a, ma, ka);
        CU_ASSERT_EQUAL(ka[0], 0xff);
        CU_ASSERT_EQUAL(ma[0], isa_ops[a].opcode);
        for (int b = a + 1; b < ISA_OP_COUNT; b++) {
            uint8_t mb[ISA_WORD_BYTES], kb[ISA_WORD_BYTES];
            isa_op_match_mask((isa_op)b, mb, kb);
            bool disjoint = false;
            for (int i = 0; i < ISA_WORD_BYTES; i++)
                disjoint |= ((ma[i] ^ mb[i]) & ka[i] & kb[i]) != 0;
            CU_ASSERT(disjoint);
        }
    }
}

TEST(table_names_every_kind_value_once)
{
    for (int k = 0; k < ISA_KIND_COUNT; k++) {
        unsigned n;
        const char *const *v = isa_kind_values_of((isa_kind)k, &n);
        if (!v)
            continue;
        CU_ASSERT(n >= 2 && n <= (1u << isa_kinds[k].bits));
        for (unsigned i = 0; i < n; i++)
            for (unsigned j = i + 1; j < n; j++)
                CU_ASSERT(strcmp(v[i], v[j]) != 0);
    }
    CU_ASSERT_EQUAL(isa_dtype_size[ISA_DTYPE_BF16], 2);
    CU_ASSERT_EQUAL(isa_dtype_size[ISA_DTYPE_INT8], 1);
    CU_ASSERT_EQUAL(isa_dtype_size[ISA_DTYPE_FP32], 4);
}

/* ---- Hand-computed encodings ------------------------------------------------------------------- */

static void expect_word(const uint8_t *w, const uint8_t want[ISA_WORD_BYTES])
{
    for (int i = 0; i < ISA_WORD_BYTES; i++)
        if (w[i] != want[i]) {
            fprintf(stderr, "byte %d: got 0x%02x, want 0x%02x\n", i, w[i], want[i]);
            CU_FAIL("encoding differs from the hand-computed word");
            return;
        }
}

/* Encodes in, compares with want, and checks that the text form assembles to the same word. */
static void check_encoding(const isa_insn *in, const char *text, const uint8_t *want)
{
    uint8_t w[ISA_WORD_BYTES];
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(isa_encode(in, w, &e), NP_OK);
    expect_word(w, want);
    isa_insn back;
    CU_ASSERT_EQUAL(isa_decode(w, &back, &e), NP_OK);
    CU_ASSERT(isa_insn_equal(&back, in));
    char src[256];
    snprintf(src, sizeof src, "%s\n", text);
    isa_target t = {.array_rows = 4, .array_cols = 4, .cores = 2, .spad_bytes = 65536,
                    .acc_bytes = 4096, .dtypes = 0xf};
    isa_asm_opts o = {&t, false};
    isa_program *p = NULL;
    CU_ASSERT_EQUAL_FATAL(isa_asm(src, strlen(src), "hand.s", &o, &p, &e), NP_OK);
    CU_ASSERT_FATAL(p->n_cores == 1 && p->cores[0].n_insns >= 1);
    CU_ASSERT(isa_insn_equal(&p->cores[0].insns[0], in));
    isa_program_free(p);
}

TEST(li_encodes_as_computed_by_hand)
{
    isa_insn in;
    isa_insn_init(&in, ISA_OP_LI);
    in.LI.rd = isa_reg(3);
    in.LI.imm = isa_imm(0x1234);
    /* opcode 0x03; rd = 3 in bits 8..11; imm in bits 12..75 */
    const uint8_t want[ISA_WORD_BYTES] = {0x03, 0x43, 0x23, 0x01};
    check_encoding(&in, "li r3, 0x1234", want);
}

TEST(sem_wait_encodes_as_computed_by_hand)
{
    isa_insn in;
    isa_insn_init(&in, ISA_OP_SEM_WAIT);
    in.SEM_WAIT.unit = isa_imm(ISA_UNIT_MXU);
    in.SEM_WAIT.sem = isa_imm(5);
    in.SEM_WAIT.n = isa_imm(3);
    /* unit = 1 in bits 8..9, sem = 5 in bits 10..17, n = 3 in bits 18..33 */
    const uint8_t want[ISA_WORD_BYTES] = {0x11, 0x15, 0x0c};
    check_encoding(&in, "sem.wait mxu, s5, 3", want);
}

TEST(dma_copy_encodes_as_computed_by_hand)
{
    isa_insn in;
    isa_insn_init(&in, ISA_OP_DMA_COPY);
    in.DMA_COPY.dst = isa_spad(2, 0x40);
    in.DMA_COPY.src = isa_hbm(3, 0);
    in.DMA_COPY.dtype = isa_imm(ISA_DTYPE_BF16);
    in.DMA_COPY.n0 = isa_imm(128);
    in.DMA_COPY.n1 = isa_imm(16);
    in.DMA_COPY.src_s1 = isa_imm(4096);
    /* dst: space 0 @8, reg 2 @9..12 (bit 10), off 0x40 @13.. (bit 19); src: hbm @53, reg 3
     * @54..57 (bits 54, 55); dtype 1 @98; n0 128 @102.. (bit 109); n1 16 @122.. (bit 126);
     * n2 1 @138; src_s1 4096 @178.. (bit 190). */
    uint8_t want[ISA_WORD_BYTES] = {0};
    want[0] = 0x20;
    want[1] = 0x04;
    want[2] = 0x08;
    want[6] = 0xe0;
    want[12] = 0x04;
    want[13] = 0x20;
    want[15] = 0x40;
    want[17] = 0x04;
    want[23] = 0x40;
    check_encoding(&in, "dma.copy spad[r2+0x40], hbm[r3], bf16, 128, n1=16, src_s1=4096", want);
}

TEST(comm_send_encodes_as_computed_by_hand)
{
    isa_insn in;
    isa_insn_init(&in, ISA_OP_COMM_SEND);
    in.COMM_SEND.peer = isa_peer(3, 1);
    in.COMM_SEND.src = isa_hbm(0, 0x100);
    in.COMM_SEND.bytes = isa_imm(64);
    in.COMM_SEND.tag = isa_imm(9);
    /* peer @8..53: form 0 @8, group 0 @10, reg 0 @14, chip 3 @18.. (bits 18, 19), core 1 @38;
     * src @54..98: hbm bit @54, reg @55, off 0x100 @59.. (bit 67); bytes 64 @99.. (bit 105);
     * tag 9 @131.. (bits 131, 134) */
    uint8_t want[ISA_WORD_BYTES] = {0};
    want[0] = 0x70;
    want[2] = 0x0c;
    want[4] = 0x40;
    want[6] = 0x40;
    want[8] = 0x08;
    want[13] = 0x02;
    want[16] = 0x48;
    check_encoding(&in, "comm.send peer(3, 1), hbm[0x100], 64, 9", want);
}

TEST(a_peer_by_group_rank_encodes_as_computed_by_hand)
{
    isa_insn in;
    isa_insn_init(&in, ISA_OP_COMM_RECV);
    in.COMM_RECV.peer = isa_peer_rel(ISA_PEER_FORM_ADD, 2, 5, -1, 3);
    in.COMM_RECV.dst = isa_spad(0, 0);
    in.COMM_RECV.bytes = isa_imm(1);
    in.COMM_RECV.tag = isa_imm(0);
    /* peer @8..53: form ADD (1) @8, group 2 @10.. (bit 11), reg 5 @14.. (bits 14, 16),
     * offset -1 (20 ones) @18..37, core 3 @38.. (bits 38, 39); dst spad 0 @54..98; bytes 1
     * @99 */
    uint8_t want[ISA_WORD_BYTES] = {0};
    want[0] = 0x71;
    want[1] = 0x01 | 0x08 | 0x40;
    want[2] = 0x01 | 0xfc;
    want[3] = 0xff;
    want[4] = 0x3f | 0x40 | 0x80;
    want[12] = 0x08;
    check_encoding(&in, "comm.recv peer(g2[rank+r5-1], 3), spad[0x0], 1, 0", want);
}

TEST(loop_with_a_negative_step_encodes_as_computed_by_hand)
{
    isa_insn in;
    isa_insn_init(&in, ISA_OP_LOOP);
    in.LOOP.count = isa_imm(3);
    in.LOOP.step0 = isa_step(4, -32);
    /* count 3 @8..39; step0: reg 4 @40..43 (bit 42), -32 as 40 bits @44..83: bits 49..83 */
    uint8_t want[ISA_WORD_BYTES] = {0};
    want[0] = 0x05;
    want[1] = 0x03;
    want[5] = 0x04;
    want[6] = 0xfe;
    want[7] = want[8] = want[9] = 0xff;
    want[10] = 0x0f;
    check_encoding(&in, "loop 3, r4-=32\nendloop", want);
}

/* ---- Encode and decode errors ---------------------------------------------------------------- */

static void expect_encode_error(const isa_insn *in, np_status st, const char *msg)
{
    uint8_t w[ISA_WORD_BYTES];
    memset(w, 0xaa, sizeof w);
    np_err e = {0};
    CU_ASSERT_EQUAL(isa_encode(in, w, &e), st);
    CU_ASSERT_EQUAL(e.status, st);
    CU_ASSERT_STRING_EQUAL(e.msg, msg);
    CU_ASSERT_EQUAL(w[0], 0xaa); /* untouched on failure */
}

TEST(encode_rejects_operands_out_of_range_naming_the_range)
{
    isa_insn in;
    isa_insn_init(&in, ISA_OP_VPU_ADD);
    in.VPU_ADD.dst = in.VPU_ADD.a = in.VPU_ADD.b = isa_spad(0, 0);
    in.VPU_ADD.rows = isa_imm(0);
    in.VPU_ADD.cols = isa_imm(4);
    expect_encode_error(&in, NP_ERR_RANGE, "operand 'rows' of vpu.add: 0 is out of range 1..65535");
    in.VPU_ADD.rows = isa_imm(4);
    in.VPU_ADD.dtype = isa_imm(9);
    expect_encode_error(&in, NP_ERR_RANGE, "operand 'dtype' of vpu.add: 9 is not a DTYPE (0..4)");
    in.VPU_ADD.dtype = isa_imm(0);
    in.VPU_ADD.a = isa_spad(0, (uint64_t)1 << 32);
    expect_encode_error(&in, NP_ERR_RANGE,
                        "operand 'a' of vpu.add: 0x100000000 is out of range 0x0..0xffffffff");
    in.VPU_ADD.a = isa_hbm(0, 0);
    expect_encode_error(&in, NP_ERR_TYPE, "operand 'a' of vpu.add: expected a spad address, got hbm");

    isa_insn_init(&in, ISA_OP_LI);
    in.LI.rd = isa_reg(16);
    expect_encode_error(&in, NP_ERR_RANGE, "operand 'rd' of li: register r16 does not exist (r0..r15)");

    isa_insn_init(&in, ISA_OP_COMM_SEND);
    in.COMM_SEND.peer = isa_peer(1u << 20, 0);
    in.COMM_SEND.src = isa_spad(0, 0);
    in.COMM_SEND.bytes = isa_imm(1);
    expect_encode_error(&in, NP_ERR_RANGE,
                        "operand 'peer' of comm.send: 1048576 is out of range 0..1048575");
    in.COMM_SEND.peer = isa_peer(0, 0);
    in.COMM_SEND.tag = isa_imm(70000);
    expect_encode_error(&in, NP_ERR_RANGE, "operand 'tag' of comm.send: 70000 is out of range 0..65535");
    in.COMM_SEND.tag = (isa_opnd){.val = 1, .reg = 2};
    expect_encode_error(&in, NP_ERR_TYPE,
                        "operand 'tag' of comm.send: members set that this kind does not use");
    in.COMM_SEND.tag = isa_imm(0);
    in.COMM_SEND.src = isa_acc(0, 0);
    expect_encode_error(&in, NP_ERR_TYPE,
                        "operand 'src' of comm.send: expected a spad or hbm address, got acc");

    isa_insn_init(&in, ISA_OP_LOOP);
    in.LOOP.count = isa_imm(1);
    in.LOOP.step1 = isa_step(1, (int64_t)1 << 39);
    expect_encode_error(&in, NP_ERR_RANGE, "operand 'step1' of loop: step 549755813888 is out of "
                        "range -549755813888..549755813887");
    in.op = ISA_OP_ILLEGAL;
    expect_encode_error(&in, NP_ERR_UNKNOWN_KEY, "cannot encode op 0: no such instruction");
}

static void expect_decode_error(const uint8_t *w, const char *msg)
{
    isa_insn in;
    np_err e = {0};
    CU_ASSERT_EQUAL(isa_decode(w, &in, &e), NP_ERR_FORMAT);
    CU_ASSERT_EQUAL(e.status, NP_ERR_FORMAT);
    CU_ASSERT_STRING_EQUAL(e.msg, msg);
}

TEST(decode_rejects_unknown_opcodes_reserved_bits_and_bad_fields_with_the_reason)
{
    uint8_t w[ISA_WORD_BYTES] = {0};
    expect_decode_error(w, "unknown opcode 0x00");
    w[0] = 0xff;
    expect_decode_error(w, "unknown opcode 0xff");
    w[0] = 0x01; /* nop */
    w[1] = 0x01;
    expect_decode_error(w, "nop: reserved bit 8 is set (bits 8..255 must be zero)");
    w[1] = 0;
    w[31] = 0x80;
    expect_decode_error(w, "nop: reserved bit 255 is set (bits 8..255 must be zero)");

    /* vpu.exp spad[0], spad[0], 4, 4, fp32: rows @80..95, cols @96..111, dtype @112..115 */
    isa_insn in;
    isa_insn_init(&in, ISA_OP_VPU_EXP);
    in.VPU_EXP.dst = in.VPU_EXP.src = isa_spad(0, 0);
    in.VPU_EXP.rows = in.VPU_EXP.cols = isa_imm(4);
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(isa_encode(&in, w, &e), NP_OK);
    CU_ASSERT_EQUAL(w[10], 4);
    CU_ASSERT_EQUAL(w[12], 4);
    w[14] = 0x07;
    expect_decode_error(w, "operand 'dtype' of vpu.exp: 7 is not a DTYPE (0..4)");
    w[14] = 0;
    w[10] = 0;
    expect_decode_error(w, "operand 'rows' of vpu.exp: 0 is out of range 1..65535");
    w[10] = 4;
    w[20] = 0x10; /* bit 164: the first above the last field (src_s is bits 140..163) */
    expect_decode_error(w, "vpu.exp: reserved bit 164 is set (bits 164..255 must be zero)");

    /* mxu.drain: bias (SPADOPT) @151..187: present bit 151 clear, register bit 152 set */
    isa_insn_init(&in, ISA_OP_MXU_DRAIN);
    in.MXU_DRAIN.dst = isa_spad(0, 0);
    in.MXU_DRAIN.acc = isa_acc(0, 0);
    in.MXU_DRAIN.m = in.MXU_DRAIN.n = isa_imm(1);
    CU_ASSERT_EQUAL_FATAL(isa_encode(&in, w, &e), NP_OK);
    w[19] |= 0x01; /* bit 152 */
    expect_decode_error(w, "operand 'bias' of mxu.drain: absent (none), but its register or "
                           "offset bits are set");
}

/* ---- Properties ------------------------------------------------------------------------------- */

TEST(random_instructions_of_every_opcode_round_trip_through_encode_and_decode)
{
    uint64_t seed = 0x15a0001;
    int64_t names[] = {1, 7, 0xfffff};
    unsigned n = 0;
    for (int round = 0; round < 80; round++)
        for (int op = 1; op < ISA_OP_COUNT; op++) {
            isa_insn in, back;
            gen_insn(&seed, (isa_op)op, &in, names, 3);
            uint8_t w[ISA_WORD_BYTES], w2[ISA_WORD_BYTES];
            np_err e = {0};
            if (isa_encode(&in, w, &e) != NP_OK) {
                fprintf(stderr, "%s: %s\n", isa_ops[op].mnemonic, e.msg);
                CU_FAIL("a valid random instruction did not encode");
                continue;
            }
            CU_ASSERT_EQUAL_FATAL(isa_decode(w, &back, &e), NP_OK);
            CU_ASSERT(isa_insn_equal(&in, &back));
            CU_ASSERT_EQUAL(isa_encode(&back, w2, &e), NP_OK);
            CU_ASSERT_EQUAL(memcmp(w, w2, sizeof w), 0);
            n++;
        }
    CU_ASSERT(n >= 4000);
}

TEST(every_decodable_word_re_encodes_to_itself)
{
    /* Valid words with one bit flipped: whatever still decodes must be a fixed point. */
    uint64_t seed = 0xb17f11b;
    int64_t names[] = {1};
    unsigned decoded = 0, rejected = 0;
    for (int k = 0; k < 4000; k++) {
        isa_insn in, back;
        gen_insn(&seed, (isa_op)(1 + gen_below(&seed, ISA_OP_COUNT - 1)), &in, names, 1);
        uint8_t w[ISA_WORD_BYTES], w2[ISA_WORD_BYTES];
        np_err e = {0};
        CU_ASSERT_EQUAL_FATAL(isa_encode(&in, w, &e), NP_OK);
        unsigned bit = (unsigned)gen_below(&seed, ISA_WORD_BITS);
        w[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        if (isa_decode(w, &back, &e) != NP_OK) {
            CU_ASSERT_EQUAL(e.status, NP_ERR_FORMAT);
            rejected++;
            continue;
        }
        decoded++;
        CU_ASSERT_EQUAL_FATAL(isa_encode(&back, w2, &e), NP_OK);
        CU_ASSERT_EQUAL(memcmp(w, w2, sizeof w), 0);
    }
    CU_ASSERT(decoded > 1000 && rejected > 500);
}

TEST(random_instructions_format_to_text_that_assembles_to_the_same_bytes)
{
    uint64_t seed = 0x7e47;
    const char table[] = "\0gemm\0q\"t\\x\n\x01\0";
    int64_t names[] = {1, 6};
    isa_target t = {.array_rows = 4, .array_cols = 4, .cores = 2, .spad_bytes = 65536,
                    .acc_bytes = 4096, .dtypes = (1u << ISA_DTYPE_COUNT) - 1};
    isa_asm_opts o = {&t, false};
    unsigned n = 0;
    for (int round = 0; round < 60; round++)
        for (int op = 1; op < ISA_OP_COUNT; op++) {
            if (op == ISA_OP_LOOP || op == ISA_OP_ENDLOOP)
                continue; /* need a partner; covered by the program round trips */
            isa_insn in;
            gen_insn(&seed, (isa_op)op, &in, names, 2);
            char line[1024];
            isa_format(&in, table, sizeof table, line, sizeof line);
            strcat(line, "\n");
            isa_program *p = NULL;
            np_err e = {0};
            if (isa_asm(line, strlen(line), "line.s", &o, &p, &e) != NP_OK) {
                fprintf(stderr, "%s\n  -> %s\n", line, e.msg);
                CU_FAIL("formatted instruction does not assemble");
                continue;
            }
            uint8_t w[ISA_WORD_BYTES], w2[ISA_WORD_BYTES];
            isa_insn back = p->cores[0].insns[0];
            /* The assembler's name table is its own: compare the strings, then the words with
             * the name offsets made equal. */
            for (unsigned f = 0; f < isa_ops[op].n_fields; f++)
                if (isa_ops[op].fields[f].kind == ISA_KIND_NAME) {
                    CU_ASSERT_STRING_EQUAL(isa_program_name(p, back.opnd[f].val),
                                           table + in.opnd[f].val);
                    back.opnd[f].val = in.opnd[f].val;
                }
            CU_ASSERT_EQUAL(isa_encode(&in, w, &e), NP_OK);
            CU_ASSERT_EQUAL(isa_encode(&back, w2, &e), NP_OK);
            if (memcmp(w, w2, sizeof w) != 0) {
                fprintf(stderr, "differs after reassembly: %s", line);
                CU_FAIL("reassembled word differs");
            }
            isa_program_free(p);
            n++;
        }
    CU_ASSERT(n >= 2500);
}

TEST(float_immediates_print_and_parse_back_bit_exactly)
{
    static const uint32_t cases[] = {0x00000000, 0x80000000, 0x3f800000, 0x00000001, 0x807fffff,
                                     0x7f7fffff, 0x7f800000, 0xff800000, 0x7fc00001, 0xffbfffff,
                                     0x3eaaaaab, 0x4b800001};
    isa_target t = {.array_rows = 4, .array_cols = 4, .cores = 2, .spad_bytes = 65536,
                    .acc_bytes = 4096, .dtypes = 0xf};
    isa_asm_opts o = {&t, false};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        isa_insn in;
        isa_insn_init(&in, ISA_OP_VPU_FILL);
        in.VPU_FILL.dst = isa_spad(0, 0);
        in.VPU_FILL.value = isa_imm(cases[k]);
        in.VPU_FILL.rows = in.VPU_FILL.cols = isa_imm(1);
        char line[256];
        isa_format(&in, NULL, 0, line, sizeof line);
        strcat(line, "\n");
        isa_program *p = NULL;
        np_err e = {0};
        CU_ASSERT_EQUAL_FATAL(isa_asm(line, strlen(line), "f.s", &o, &p, &e), NP_OK);
        CU_ASSERT_EQUAL(p->cores[0].insns[0].VPU_FILL.value.val, (int64_t)cases[k]);
        isa_program_free(p);
    }
    char line[128];
    isa_insn in;
    isa_insn_init(&in, ISA_OP_VPU_FILL);
    in.VPU_FILL.dst = isa_spad(0, 0);
    in.VPU_FILL.value = isa_f32(-0.0f);
    in.VPU_FILL.rows = in.VPU_FILL.cols = isa_imm(2);
    isa_format(&in, NULL, 0, line, sizeof line);
    CU_ASSERT_STRING_EQUAL(line, "vpu.fill spad[0x0], -0.0, 2, 2, fp32");
    in.VPU_FILL.value = isa_imm(0x7fc00001);
    isa_format(&in, NULL, 0, line, sizeof line);
    CU_ASSERT_STRING_EQUAL(line, "vpu.fill spad[0x0], bits(0x7fc00001), 2, 2, fp32");
}

TEST(format_names_optional_operands_and_keeps_loop_steps_positional)
{
    char line[256];
    isa_insn in;
    isa_insn_init(&in, ISA_OP_DMA_COPY);
    in.DMA_COPY.dst = isa_spad(1, 0);
    in.DMA_COPY.src = isa_hbm(0, 0x2000);
    in.DMA_COPY.n0 = isa_imm(64);
    in.DMA_COPY.src_s2 = isa_imm(4096);
    isa_format(&in, NULL, 0, line, sizeof line);
    CU_ASSERT_STRING_EQUAL(line, "dma.copy spad[r1], hbm[0x2000], fp32, 64, src_s2=4096");
    isa_insn_init(&in, ISA_OP_LOOP);
    in.LOOP.count = isa_imm(8);
    in.LOOP.step0 = isa_step(1, 64);
    in.LOOP.step1 = isa_step(2, -4096);
    isa_format(&in, NULL, 0, line, sizeof line);
    CU_ASSERT_STRING_EQUAL(line, "loop 8, r1+=64, r2-=4096");
    in.LOOP.step0 = isa_step(0, 0);
    isa_format(&in, NULL, 0, line, sizeof line);
    CU_ASSERT_STRING_EQUAL(line, "loop 8, step1=r2-=4096");
    isa_insn_init(&in, ISA_OP_LI);
    in.LI.rd = isa_reg(5);
    in.LI.imm = isa_imm(-0x10000);
    isa_format(&in, NULL, 0, line, sizeof line);
    CU_ASSERT_STRING_EQUAL(line, "li r5, -0x10000");
    /* snprintf-like: the length needed is returned when the buffer is short */
    CU_ASSERT_EQUAL(isa_format(&in, NULL, 0, line, 4), (int)strlen("li r5, -0x10000"));
    CU_ASSERT_STRING_EQUAL(line, "li ");
}

TEST(sync_instructions_run_in_the_queue_they_name)
{
    isa_insn in;
    isa_insn_init(&in, ISA_OP_SEM_WAIT);
    in.SEM_WAIT.unit = isa_imm(ISA_UNIT_COMM);
    CU_ASSERT_EQUAL(isa_insn_queue(&in), ISA_UNIT_COMM);
    isa_insn_init(&in, ISA_OP_MXU_MM);
    CU_ASSERT_EQUAL(isa_insn_queue(&in), ISA_UNIT_MXU);
    isa_insn_init(&in, ISA_OP_LOOP);
    CU_ASSERT_EQUAL(isa_insn_queue(&in), ISA_UNIT_CTRL);
    isa_insn_init(&in, ISA_OP_MXU_DRAIN);
    CU_ASSERT_EQUAL(isa_opnd_f32(&in.MXU_DRAIN.scale), 1.0f); /* the table's default */
}

/* ---- docs/isa.md ------------------------------------------------------------------------------ */

TEST(docs_isa_md_is_generated_from_the_current_table)
{
    harness_run r = harness_npusim("asm", "--doc", NULL);
    CU_ASSERT_EQUAL_FATAL(r.exit_status, 0);
    char *doc = harness_read_file(harness_src_path("docs/isa.md"), NULL);
    if (!doc || strcmp(doc, r.out) != 0) {
        size_t line = 1;
        for (size_t i = 0; doc && doc[i] && doc[i] == r.out[i]; i++)
            line += doc[i] == '\n';
        fprintf(stderr, "docs/isa.md is stale (first difference on line %zu); regenerate it with\n"
                        "  build/sim/npusim asm --doc > docs/isa.md\n", line);
        CU_FAIL("docs/isa.md is stale: regenerate with `build/sim/npusim asm --doc > docs/isa.md`");
    }
    /* Every instruction is documented. */
    for (int op = 1; op < ISA_OP_COUNT; op++) {
        char head[64];
        snprintf(head, sizeof head, "### `%s` — opcode 0x%02x", isa_ops[op].mnemonic,
                 isa_ops[op].opcode);
        CU_ASSERT_PTR_NOT_NULL(strstr(r.out, head));
    }
    free(doc);
    harness_run_free(&r);
}

/* hw-model dispatches by operand family (isa.def's FAMILY column), reading every op of a
 * family through its first op's operand view: a row that joins a family must have the
 * family's fields (names, kinds, widths, order), or its footprint would be read wrongly. */
TEST(table_every_op_of_a_family_has_the_operand_fields_of_its_first_op)
{
    int first[ISA_FAMILY_COUNT];
    for (int f = 0; f < ISA_FAMILY_COUNT; f++)
        first[f] = 0;
    for (int op = 1; op < ISA_OP_COUNT; op++) {
        isa_family fam = isa_ops[op].family;
        CU_ASSERT_FATAL((unsigned)fam < ISA_FAMILY_COUNT);
        if (!first[fam]) {
            first[fam] = op;
            continue;
        }
        if (fam == ISA_FAMILY_CTRL || fam == ISA_FAMILY_SEM)
            continue; /* no memory footprint: their operands are their own */
        const isa_op_info *a = &isa_ops[first[fam]], *b = &isa_ops[op];
        CU_ASSERT_EQUAL(a->n_fields, b->n_fields);
        for (unsigned i = 0; i < a->n_fields && i < b->n_fields; i++) {
            CU_ASSERT_STRING_EQUAL(a->fields[i].name, b->fields[i].name);
            CU_ASSERT_EQUAL(a->fields[i].kind, b->fields[i].kind);
            CU_ASSERT_EQUAL(a->fields[i].bits, b->fields[i].bits);
        }
        CU_ASSERT_EQUAL(a->unit, b->unit);
    }
    /* every family is used, has a name and a doc; the vector families run on the VPU and
     * have rows and cols (their compute time is rows x cols elements) */
    for (int f = 0; f < ISA_FAMILY_COUNT; f++) {
        CU_ASSERT(first[f] != 0);
        CU_ASSERT(isa_family_names[f] && isa_family_docs[f] && strlen(isa_family_docs[f]) > 5);
    }
    for (int op = 1; op < ISA_OP_COUNT; op++)
        if (isa_ops[op].unit == ISA_UNIT_VPU) {
            CU_ASSERT(isa_field_find((isa_op)op, "rows") >= 0);
            CU_ASSERT(isa_field_find((isa_op)op, "cols") >= 0);
            CU_ASSERT(isa_field_find((isa_op)op, "dtype") >= 0);
        }
}
