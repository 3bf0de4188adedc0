// tb_dma_rtl.cpp — Verilator test bench: the register-level DMA request issue of
// hw-model/rtl/dma_issue.sv runs seeded sequences of copies and semaphore signals, and when it
// dispatches, starts, completes and retires each one is compared, cycle for cycle, with
// hw-model's core running the same sequence as an ISA program (tb_rtl_model.h).
//
// Each sequence has its own core.dma_outstanding (1..16) and core.dma_setup_cycles (0..12),
// and 48 entries: HBM -> scratchpad and scratchpad -> HBM copies of 1..16 rows of 64 bytes,
// sem.signal on the DMA queue now and then, and runs of nops. The bench's front end does what
// the model's does (one instruction or nop a cycle, waiting while the queue is full); the RTL
// decides when each copy starts, when its transfer request goes out and when entries retire.
//
// The bench's memory is independent of both: a transfer of n rows is over D = latency + n x
// 64 / (bandwidth / channels) cycles after its request. That is the model's HBM time for
// these copies on this configuration, where nothing shares: every row lies in one 64-byte
// interleave unit of one channel (rows 1024 bytes apart: 16 channels x 64), so a copy is
// capped at one channel's share (4 bytes a cycle of 64), and 16 copies in flight use exactly
// the whole HBM; their scratchpad streams (at most 16 x 1 KiB through 256 bytes a cycle) end
// long before. So the model's completions are the RTL's only if both issued at the same
// cycles. The scoreboard is off (it is not part of the issue logic).
#include <CUnit/Basic.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "Vdma_issue.h"
#include "tb_rtl_model.h"

namespace {

constexpr int DEPTH = 16;

struct dinsn {
    enum kind { NOP, LOAD, STORE, SIGNAL } k;
    unsigned rows; // copies: 64-byte rows
};

struct config {
    unsigned outstanding, setup;
    std::vector<dinsn> s;
};

config sequence(uint64_t seed)
{
    tb_rng g(seed);
    config c{1 + g.below(DEPTH), g.below(13), {}};
    while (c.s.size() < 48) {
        unsigned r = g.below(12);
        if (r < 2)
            for (unsigned k = 1 + g.below(4); k; k--)
                c.s.push_back({dinsn::NOP, 0});
        else if (r < 3)
            c.s.push_back({dinsn::SIGNAL, 0});
        else
            c.s.push_back({r < 8 ? dinsn::LOAD : dinsn::STORE, 1 + g.below(16)});
    }
    return c;
}

std::string program(const config &c)
{
    std::string src = ".core 0\n";
    char line[200];
    for (size_t i = 0; i < c.s.size(); i++) {
        const dinsn &x = c.s[i];
        uint64_t hbm = 0x100000 + i * 0x4000, spad = (i % 32) * 0x400; // 64-byte aligned
        switch (x.k) {
        case dinsn::NOP: src += "  nop\n"; continue;
        case dinsn::SIGNAL: snprintf(line, sizeof line, "  sem.signal dma, s1\n"); break;
        case dinsn::LOAD:
            snprintf(line, sizeof line, "  dma.copy spad[0x%" PRIx64 "], hbm[0x%" PRIx64
                     "], bf16, 32, %u, src_s1=1024\n", spad, hbm, x.rows);
            break;
        case dinsn::STORE:
            snprintf(line, sizeof line, "  dma.copy hbm[0x%" PRIx64 "], spad[0x%" PRIx64
                     "], bf16, 32, %u, dst_s1=1024\n", hbm, spad, x.rows);
            break;
        }
        src += ".kernel i" + std::to_string(i) + "\n" + line + ".endk\n";
    }
    return src + "  halt\n";
}

bool check_sequence(uint64_t seed, std::string *why)
{
    config c = sequence(seed);
    arch_config cfg;
    if (!tb_arch("tiny",
                 {"core.dma_outstanding=" + std::to_string(c.outstanding),
                  "core.dma_setup_cycles=" + std::to_string(c.setup), "core.scoreboard=0",
                  "core.sram_banks=16", "core.sram_port_bytes_per_cycle=16",
                  "chip.hbm_channels=16", "chip.hbm_interleave_bytes=64",
                  "chip.hbm_gb_per_s=64", "chip.hbm_burst_bytes=32", "chip.hbm_latency_ns=100"},
                 &cfg, why))
        return false;
    tb_model_run m = tb_model(cfg, program(c), c.s.size());
    if (!m.ok) {
        *why = "the model: " + m.error;
        return false;
    }
    // The memory: latency + bytes / (one channel's share of the bandwidth), in cycles.
    const int64_t lat = 100, per_row = 64 / (64 / 16);
    std::unique_ptr<Vdma_issue> v(new Vdma_issue);
    v->cfg_outstanding = c.outstanding;
    v->cfg_setup = c.setup;
    v->rst = 1;
    v->clk = 0;
    v->eval();
    v->clk = 1;
    v->eval();
    v->rst = 0;
    std::vector<tb_insn_times> r(c.s.size());
    std::vector<int64_t> rsp_at(c.s.size(), -1);
    int slot_of[DEPTH];
    for (int &x : slot_of)
        x = -1;
    size_t pc = 0, retired = 0, expected = 0, next_retire = 0;
    for (const dinsn &x : c.s)
        expected += x.k != dinsn::NOP;
    char msg[300];
    unsigned inflight = 0;
    for (int64_t cyc = 0; retired < expected && cyc < 1000000; cyc++) {
        v->clk = 0;
        uint32_t rsp = 0;
        for (int sl = 0; sl < DEPTH; sl++)
            if (slot_of[sl] >= 0 && rsp_at[slot_of[sl]] == cyc) {
                rsp |= 1u << sl;
                r[slot_of[sl]].end = cyc;
                inflight--;
            }
        v->rsp_mask = rsp;
        bool push = pc < c.s.size() && c.s[pc].k != dinsn::NOP;
        v->in_valid = push;
        v->in_signal = push && c.s[pc].k == dinsn::SIGNAL;
        v->eval();
        // retirements of entries that were there (their slots may take the push)
        std::vector<int> gone;
        for (int sl = 0; sl < DEPTH; sl++)
            if (v->retire_mask >> sl & 1) {
                gone.push_back(slot_of[sl]);
                slot_of[sl] = -1;
            }
        if (push && v->in_ready) { // dispatched into slot in_slot
            r[pc].dispatch = cyc;
            if (v->in_retire)
                gone.push_back((int)pc);
            else
                slot_of[v->in_slot] = (int)pc;
        }
        std::sort(gone.begin(), gone.end());
        for (int i : gone) { // in program order
            while (next_retire < c.s.size() && c.s[next_retire].k == dinsn::NOP)
                next_retire++;
            if (i < 0 || (size_t)i != next_retire) {
                snprintf(msg, sizeof msg, "seed %" PRIu64 ": pc %d retired out of order (pc %zu "
                         "is next)", seed, i, next_retire);
                return *why = msg, false;
            }
            r[i].retire = cyc;
            next_retire++;
            retired++;
        }
        for (int sl = 0; sl < DEPTH; sl++) {
            int i = slot_of[sl];
            if (i < 0)
                continue;
            if (v->start_mask >> sl & 1) {
                r[i].start = cyc;
                if (++inflight > c.outstanding) {
                    snprintf(msg, sizeof msg, "seed %" PRIu64 ": %u copies in flight, limit %u",
                             seed, inflight, c.outstanding);
                    return *why = msg, false;
                }
            }
            if (v->req_mask >> sl & 1)
                rsp_at[i] = cyc + lat + per_row * c.s[i].rows;
        }
        if (pc < c.s.size() && (!push || v->in_ready))
            pc++;
        v->clk = 1;
        v->eval();
    }
    static const char *const kinds[] = {"nop", "load", "store", "signal"};
    for (size_t i = 0; i < c.s.size(); i++) {
        if (c.s[i].k == dinsn::NOP)
            continue;
        tb_insn_times a = r[i], b = m.t[i];
        if (c.s[i].k == dinsn::SIGNAL) // no trace slice: it starts and ends as it retires
            a.start = a.end = b.start = b.end = -1;
        if (a.dispatch != b.dispatch || a.start != b.start || a.end != b.end ||
            a.retire != b.retire) {
            snprintf(msg, sizeof msg,
                     "seed %" PRIu64 " (%u outstanding, %u setup cycles) pc %zu %s %u rows: RTL "
                     "dispatch %" PRId64 " start %" PRId64 " end %" PRId64 " retire %" PRId64
                     ", model %" PRId64 " %" PRId64 " %" PRId64 " %" PRId64, seed, c.outstanding,
                     c.setup, i, kinds[c.s[i].k], c.s[i].rows, a.dispatch, a.start, a.end,
                     a.retire, b.dispatch, b.start, b.end, b.retire);
            return *why = msg, false;
        }
    }
    return true;
}

void dma_request_issue_rtl_matches_the_model_cycle_for_cycle()
{
    for (uint64_t seed = 1; seed <= 60; seed++) {
        std::string why;
        if (!check_sequence(seed, &why)) {
            fprintf(stderr, "\n  %s\n", why.c_str());
            CU_FAIL("the RTL DMA issue and the model differ");
            return;
        }
    }
    CU_PASS("60 sequences agree");
}

const struct {
    const char *name;
    void (*fn)();
} tests[] = {
    {"dma_request_issue_rtl_matches_the_model_cycle_for_cycle",
     dma_request_issue_rtl_matches_the_model_cycle_for_cycle},
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
