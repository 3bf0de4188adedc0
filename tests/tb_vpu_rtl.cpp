// tb_vpu_rtl.cpp — Verilator test bench: the register-level vector lane group of
// hw-model/rtl/vpu_lanes.sv runs seeded sequences of vector instructions, and when it
// dispatches, starts and completes each one is compared, cycle for cycle, with hw-model's
// core running the same sequence as an ISA program (tb_rtl_model.h).
//
// A sequence is a program of vpu.add / vpu.mul / vpu.max (the elementwise class) and vpu.exp
// / vpu.sqrt (the transcendental class) of random shapes (1..8 rows, 1..48 columns), with runs
// of nops between some of them and bursts longer than the queue. The bench's front end does
// what the model's does with them: one instruction a cycle, a nop a cycle, waiting while the
// queue is full. The RTL then decides when each starts and completes; the bench also feeds
// operands to every beat and checks every element comes out once, in order, with the right
// value (32-bit integer arithmetic; the transcendental class computes an integer sqrt).
//
// The scratchpad ports never bind here (core.sram_port_bytes_per_cycle: 256, above the 3 x
// lanes x ops x 4 bytes a cycle of any fp32 op), so the model's time is the lane group's
// compute time alone, which is what the RTL implements; the scoreboard is off (the operands
// repeat; it is not part of the lane group).
#include <CUnit/Basic.h>

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "Vvpu_lanes_3x1_1_4.h"
#include "Vvpu_lanes_4x1_1_4.h"
#include "Vvpu_lanes_8x2_1_2.h"
#include "tb_rtl_model.h"

namespace {

struct vinsn {
    bool nop;
    unsigned op; // 0 add, 1 mul, 2 max, 3 transcendental (exp or sqrt in the program)
    const char *mnemonic;
    unsigned rows, cols;
};

std::vector<vinsn> sequence(uint64_t seed, size_t n)
{
    tb_rng g(seed);
    std::vector<vinsn> s;
    static const char *const names[5] = {"vpu.add", "vpu.mul", "vpu.max", "vpu.exp", "vpu.sqrt"};
    while (s.size() < n) {
        if (g.below(4) == 0) { // a run of nops
            for (unsigned k = 1 + g.below(3); k; k--)
                s.push_back({true, 0, "nop", 0, 0});
            continue;
        }
        unsigned m = g.below(5);
        s.push_back({false, m < 3 ? m : 3u, names[m], 1 + g.below(8), 1 + g.below(48)});
    }
    return s;
}

std::string program(const std::vector<vinsn> &s)
{
    std::string src = ".core 0\n";
    char line[160];
    for (size_t i = 0; i < s.size(); i++) {
        if (s[i].nop) {
            src += "  nop\n";
            continue;
        }
        snprintf(line, sizeof line,
                 ".kernel i%zu\n  %s spad[0x0], spad[0x2000]%s, %u, %u, fp32\n.endk\n", i,
                 s[i].mnemonic, s[i].op < 3 ? ", spad[0x4000]" : "", s[i].rows, s[i].cols);
        src += line;
    }
    return src + "  halt\n";
}

uint32_t operand(size_t insn, uint32_t elem, int which)
{
    uint64_t x = (insn + 1) * 0x9e3779b97f4a7c15ull ^ (elem + 1) * 0xbf58476d1ce4e5b9ull ^
                 (uint64_t)which * 0x94d049bb133111ebull;
    x ^= x >> 31;
    return (uint32_t)x;
}

uint32_t reference(unsigned op, uint32_t a, uint32_t b)
{
    switch (op) {
    case 0: return a + b;
    case 1: return a * b;
    case 2: return (int32_t)a > (int32_t)b ? a : b;
    default: return (uint32_t)std::sqrt((double)a); // exact for 32-bit a
    }
}

// One sequence on the RTL lane group of LANES x OPS (TR_NUM / TR_DEN transcendental) and on
// the model; false (with a message) at the first difference.
template <class V>
bool check_sequence(unsigned lanes, unsigned ops, unsigned tr_num, unsigned tr_den, uint64_t seed,
                    std::string *why)
{
    const size_t n = 64;
    std::vector<vinsn> s = sequence(seed, n);
    arch_config cfg;
    char tr[32];
    snprintf(tr, sizeof tr, "%g", (double)tr_num / tr_den);
    if (!tb_arch("tiny",
                 {"core.vector_lanes=" + std::to_string(lanes),
                  "core.vector_ops_per_lane=" + std::to_string(ops),
                  std::string("core.vector_transc_ops_per_lane=") + tr, "core.scoreboard=0",
                  "core.sram_port_bytes_per_cycle=256"},
                 &cfg, why))
        return false;
    tb_model_run m = tb_model(cfg, program(s), s.size());
    if (!m.ok) {
        *why = "the model: " + m.error;
        return false;
    }
    // The RTL, driven by the bench's front end.
    std::unique_ptr<V> v(new V);
    const unsigned w = lanes * ops;
    v->rst = 1;
    v->clk = 0;
    v->eval();
    v->clk = 1;
    v->eval();
    v->rst = 0;
    std::vector<tb_insn_times> r(s.size());
    std::vector<uint32_t> next_elem(s.size(), 0);
    size_t pc = 0, completed = 0, expected = 0;
    for (const vinsn &x : s)
        expected += !x.nop;
    char msg[256];
    for (int64_t cyc = 0; completed < expected && cyc < 1000000; cyc++) {
        v->clk = 0;
        bool push = pc < s.size() && !s[pc].nop;
        v->in_valid = push;
        v->in_tag = (uint16_t)pc;
        v->in_op = push ? s[pc].op : 0;
        v->in_elems = push ? s[pc].rows * s[pc].cols : 0;
        v->eval(); // the head of this cycle, with the push
        if (v->head_valid && r[v->beat_tag].start < 0)
            r[v->beat_tag].start = cyc;
        if (v->beat_valid) { // operands for the elements of this beat, then their results
            size_t t = v->beat_tag;
            for (unsigned i = 0; i < w; i++) {
                v->beat_a[i] = i < v->beat_count ? operand(t, v->beat_first + i, 0) : 0;
                v->beat_b[i] = i < v->beat_count ? operand(t, v->beat_first + i, 1) : 0;
            }
            v->eval();
            if (v->beat_first != next_elem[t]) {
                snprintf(msg, sizeof msg, "pc %zu: a beat of elements from %u, expected %u", t,
                         (unsigned)v->beat_first, next_elem[t]);
                return *why = msg, false;
            }
            for (unsigned i = 0; i < v->beat_count; i++) {
                uint32_t e = v->beat_first + i;
                if (v->beat_y[i] != reference(s[t].op, operand(t, e, 0), operand(t, e, 1))) {
                    snprintf(msg, sizeof msg, "pc %zu (%s) element %u: %u, expected %u", t,
                             s[t].mnemonic, e, (unsigned)v->beat_y[i],
                             reference(s[t].op, operand(t, e, 0), operand(t, e, 1)));
                    return *why = msg, false;
                }
            }
            next_elem[t] += v->beat_count;
        }
        if (v->done_valid) {
            r[v->done_tag].end = r[v->done_tag].retire = cyc + 1;
            completed++;
        }
        if (pc < s.size()) {
            if (s[pc].nop)
                pc++;
            else if (v->in_ready) // dispatched this cycle
                r[pc++].dispatch = cyc;
        }
        v->clk = 1;
        v->eval();
    }
    for (size_t i = 0; i < s.size(); i++) {
        if (s[i].nop)
            continue;
        const tb_insn_times &a = r[i], &b = m.t[i];
        if (next_elem[i] != s[i].rows * s[i].cols || a.dispatch != b.dispatch ||
            a.start != b.start || a.end != b.end || a.retire != b.retire || !b.seen) {
            snprintf(msg, sizeof msg,
                     "seed %" PRIu64 " pc %zu `%s %ux%u`: RTL dispatch %" PRId64 " start %" PRId64
                     " end %" PRId64 " retire %" PRId64 " (%u elements), model %" PRId64 " %" PRId64
                     " %" PRId64 " %" PRId64, seed, i, s[i].mnemonic, s[i].rows, s[i].cols,
                     a.dispatch, a.start, a.end, a.retire, next_elem[i], b.dispatch, b.start,
                     b.end, b.retire);
            return *why = msg, false;
        }
    }
    return true;
}

template <class V>
void check_config(unsigned lanes, unsigned ops, unsigned tr_num, unsigned tr_den)
{
    for (uint64_t seed = 1; seed <= 25; seed++) {
        std::string why;
        if (!check_sequence<V>(lanes, ops, tr_num, tr_den, seed, &why)) {
            fprintf(stderr, "\n  %ux%u lanes, %u/%u transcendental: %s\n", lanes, ops, tr_num,
                    tr_den, why.c_str());
            CU_FAIL("the RTL lane group and the model differ");
            return;
        }
    }
    CU_PASS("25 sequences agree");
}

void vector_lane_group_rtl_matches_the_model_cycle_for_cycle()
{
    check_config<Vvpu_lanes_4x1_1_4>(4, 1, 1, 4); // tiny's vector unit
    check_config<Vvpu_lanes_8x2_1_2>(8, 2, 1, 2);
    check_config<Vvpu_lanes_3x1_1_4>(3, 1, 1, 4); // 0.75 transcendental results a cycle
}

const struct {
    const char *name;
    void (*fn)();
} tests[] = {
    {"vector_lane_group_rtl_matches_the_model_cycle_for_cycle",
     vector_lane_group_rtl_matches_the_model_cycle_for_cycle},
};

} // namespace

int main(int argc, char **argv)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    CU_pSuite suite = CU_add_suite("rtl", nullptr, nullptr);
    for (const auto &t : tests)
        if (argc < 2 || !strcmp(argv[1], t.name))
            CU_add_test(suite, t.name, t.fn);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned failed = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
    unsigned ran = CU_get_number_of_tests_run();
    CU_cleanup_registry();
    return failed || !ran ? 1 : 0;
}
