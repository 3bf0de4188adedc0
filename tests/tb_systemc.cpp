// tb_systemc.cpp — tests of the SystemC TLM-2.0 chip (hw-model/systemc/npusim_chip.h) and the
// example virtual platform (hw-model/systemc/vp/): registered with ctest as systemc.<name>.
//
// The reference is the core model run directly (core_sim_run_chips, what `npusim sim` runs)
// on the same programs and inputs: the platform must give the same output bytes, and at each
// interrupt sc_time_stamp() must equal the chip's end time while the end minus the start
// equals the model's total_ps. The CLI test runs the npusim-vp binary against the npusim
// binary itself. Bad transactions are checked for their response status, and the platform is
// then shown to run on.
//
// SystemC elaborates once per process, so each test runs in a process of its own: ctest runs
// `tb_systemc NAME`; with no argument every test is run that way, one child each.
#include <CUnit/Basic.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <jansson.h>

#include "vp_host.h"

extern "C" {
#include "core.h"
#include "isa_asm.h"
#include "isa_elf.h"
#include "kgen_matmul.h"
}

using sc_core::sc_time;
using sc_core::SC_NS;

namespace {

arch_config arch(const char *name, std::vector<const char *> sets = {})
{
    arch_config cfg;
    np_err e{};
    if (arch_resolve(name, sets.data(), sets.size(), &cfg, &e) != NP_OK)
        fprintf(stderr, "%s\n", e.msg);
    return cfg;
}

isa_program *assemble(const arch_config &cfg, const char *src)
{
    isa_target t;
    isa_target_from_arch(&cfg, &t);
    isa_asm_opts o{};
    o.target = &t;
    isa_program *p = nullptr;
    np_err e{};
    if (isa_asm(src, strlen(src), "test.s", &o, &p, &e) != NP_OK)
        fprintf(stderr, "%s\n", e.msg);
    return p;
}

std::vector<uint8_t> image(const isa_program *p)
{
    uint8_t *buf = nullptr;
    size_t len = 0;
    np_err e{};
    if (isa_elf_image(p, &buf, &len, &e) != NP_OK)
        return {};
    std::vector<uint8_t> v(buf, buf + len);
    free(buf);
    return v;
}

// n bytes of elements of dtype d with small exact values (sums stay exact in fp32).
std::vector<uint8_t> values(size_t n_elems, isa_dtype d, uint64_t seed)
{
    std::vector<uint8_t> v;
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 7;
    for (size_t i = 0; i < n_elems; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        float f = (float)((int)(x % 17) - 8) / 4.0f;
        uint32_t bits;
        memcpy(&bits, &f, 4);
        if (d == ISA_DTYPE_BF16) {
            v.push_back((uint8_t)(bits >> 16));
            v.push_back((uint8_t)(bits >> 24));
        } else {
            for (int k = 0; k < 4; k++)
                v.push_back((uint8_t)(bits >> (8 * k)));
        }
    }
    return v;
}

struct ref_run {
    np_err err{};
    uint64_t total_ps = 0, total_cycles = 0;
    std::vector<std::vector<uint8_t>> outputs; // one per requested output
};

// The core model alone (what `npusim sim` runs) on progs with these inputs; outs name the
// (chip, symbol)s to read back.
ref_run reference(const arch_config &cfg, const std::vector<isa_program *> &progs, bool functional,
                  const std::vector<vp_io> &ins, const std::vector<vp_io> &outs)
{
    ref_run r;
    std::vector<core_hbm_io> in_io, out_io;
    std::vector<std::vector<uint8_t>> in_copy;
    for (const vp_io &i : ins) {
        const isa_symbol *s = isa_program_symbol(progs[i.chip], i.symbol.c_str());
        in_copy.push_back(i.bytes);
        in_io.push_back({s->addr, in_copy.back().data(), i.bytes.size(), i.chip});
    }
    r.outputs.resize(outs.size());
    for (size_t k = 0; k < outs.size(); k++) {
        const isa_symbol *s = isa_program_symbol(progs[outs[k].chip], outs[k].symbol.c_str());
        r.outputs[k].resize(s->size);
        out_io.push_back({s->addr, r.outputs[k].data(), s->size, outs[k].chip});
    }
    // in_copy may have moved while growing: take the pointers now
    for (size_t k = 0; k < in_io.size(); k++)
        in_io[k].buf = in_copy[k].data();
    core_sim_opts o{};
    o.functional = functional;
    o.inputs = in_io.data();
    o.n_inputs = in_io.size();
    o.outputs = out_io.data();
    o.n_outputs = out_io.size();
    core_report *rep = nullptr;
    std::vector<const isa_program *> cp(progs.begin(), progs.end());
    if (core_sim_run_chips(&cfg, cp.data(), (uint32_t)cp.size(), &o, nullptr, &rep, &r.err) ==
        NP_OK) {
        r.total_ps = rep->total_ps;
        r.total_cycles = rep->total_cycles;
    }
    core_report_free(rep);
    return r;
}

vp_io io(uint32_t chip, const char *sym, std::vector<uint8_t> bytes = {}, const char *name = "")
{
    vp_io x;
    x.chip = chip;
    x.symbol = sym;
    x.bytes = std::move(bytes);
    x.name = name;
    return x;
}

// Runs progs on the example platform with the given inputs and expected outputs (the
// reference's), checks outputs and times against the reference, and prints both times.
void check_vp_against_reference(const arch_config &cfg, std::vector<isa_program *> progs,
                                std::vector<vp_io> ins, std::vector<vp_io> outs, bool functional,
                                const char *what)
{
    ref_run ref = reference(cfg, progs, functional, ins, outs);
    CU_ASSERT_EQUAL_FATAL(ref.err.status, NP_OK);
    vp_job job;
    for (size_t i = 0; i < progs.size(); i++) {
        job.images.push_back(image(progs[i]));
        job.image_names.push_back(std::string(what) + " chip " + std::to_string(i));
    }
    job.inputs = ins;
    for (size_t k = 0; k < outs.size(); k++)
        job.expects.push_back(
            io(outs[k].chip, outs[k].symbol.c_str(), ref.outputs[k], "npusim sim"));
    npusim_platform_opts opts;
    opts.functional = functional;
    opts.quantum = sc_time(1000, SC_NS);
    vp_system vp(cfg, opts, job);
    sc_core::sc_start();
    const vp_result &r = vp.host.result;
    if (r.err.status != NP_OK)
        fprintf(stderr, "%s\n", r.err.msg);
    CU_ASSERT_TRUE_FATAL(r.finished);
    CU_ASSERT_EQUAL(r.err.status, NP_OK);
    CU_ASSERT_EQUAL(r.outputs.size(), outs.size());
    for (const vp_output &o : r.outputs) {
        CU_ASSERT_TRUE(o.match);
        CU_ASSERT(o.bytes > 0);
    }
    uint64_t last = 0;
    for (size_t i = 0; i < r.chips.size(); i++) {
        const vp_chip_result &c = r.chips[i];
        CU_ASSERT_EQUAL(c.state, NPU_STATE_DONE);
        CU_ASSERT_EQUAL(c.irq_ps, c.end_ps); // sc_time_stamp() at the interrupt
        // every chip starts at the first edge (1 ns on tiny) at or after the host's START
        CU_ASSERT_EQUAL(c.start_ps, r.chips[0].start_ps);
        CU_ASSERT(c.start_ps >= r.start_ps && c.start_ps - r.start_ps < 1000);
        CU_ASSERT_EQUAL(c.start_ps % 1000, 0u);
        last = std::max(last, c.end_ps - c.start_ps);
        printf("\n  %s chip %zu: interrupt at sc_time_stamp() %" PRIu64 " ps, T_END %" PRIu64
               " ps, started %" PRIu64 " ps: %" PRIu64 " ps, %" PRIu64 " cycles", what, i,
               c.irq_ps, c.end_ps, c.start_ps, c.end_ps - c.start_ps, c.cycles);
    }
    printf("\n  %s npusim sim: %" PRIu64 " ps, %" PRIu64 " cycles\n", what, ref.total_ps,
           ref.total_cycles);
    CU_ASSERT_EQUAL(last, ref.total_ps);
    CU_ASSERT_EQUAL(r.chips.back().cycles, ref.total_cycles);
    for (isa_program *p : progs)
        isa_program_free(p);
}

// ---- the example platform against the core model -----------------------------------------

void vp_matmul_outputs_and_time_equal_npusim_sim()
{
    arch_config cfg = arch("tiny");
    kgen_matmul mm{};
    mm.m = 12, mm.n = 10, mm.k = 20, mm.dtype = ISA_DTYPE_BF16;
    isa_program *p = nullptr;
    char *text = nullptr;
    np_err e{};
    CU_ASSERT_EQUAL_FATAL(kgen_matmul_build(&cfg, &mm, &text, &p, &e), NP_OK);
    free(text);
    check_vp_against_reference(cfg, {p},
                               {io(0, "A", values(12 * 20, ISA_DTYPE_BF16, 1)),
                                io(0, "B", values(20 * 10, ISA_DTYPE_BF16, 2))},
                               {io(0, "C")}, true, "matmul");
}

void vp_conv_outputs_and_time_equal_npusim_sim()
{
    arch_config cfg = arch("tiny");
    kgen_conv cv{};
    cv.h = 7, cv.w = 6, cv.c = 3, cv.r = 3, cv.s = 2, cv.filters = 5, cv.stride = 1;
    cv.dtype = ISA_DTYPE_BF16;
    cv.cores = 2;
    isa_program *p = nullptr;
    char *text = nullptr;
    np_err e{};
    CU_ASSERT_EQUAL_FATAL(kgen_conv_build(&cfg, &cv, &text, &p, &e), NP_OK);
    free(text);
    check_vp_against_reference(cfg, {p},
                               {io(0, "X", values(7 * 6 * 3, ISA_DTYPE_BF16, 3)),
                                io(0, "B", values(3 * 2 * 3 * 5, ISA_DTYPE_BF16, 4))},
                               {io(0, "C")}, true, "conv");
}

// Chip 0 sends x to chip 1, which adds its y and stores the sum: a message over the network
// model between two chip modules.
const char *const ping_s = ".bss\n"
                           "x: .space 256\n"
                           ".core 0\n"
                           ".kernel ping\n"
                           "  dma.copy spad[0], hbm[x], fp32, 64\n"
                           "  sem.signal dma, s0\n"
                           "  sem.wait comm, s0\n"
                           "  comm.send peer(1, 0), spad[0], 256, 5\n"
                           "  halt\n";
const char *const pong_s = ".bss\n"
                           "y: .space 256\n"
                           "out: .space 256\n"
                           ".core 0\n"
                           ".kernel pong\n"
                           "  dma.copy spad[0], hbm[y], fp32, 64\n"
                           "  sem.signal dma, s0\n"
                           "  sem.wait comm, s0\n"
                           "  comm.recv peer(0, 0), spad[0], 256, 5, add, fp32\n"
                           "  sem.signal comm, s1\n"
                           "  sem.wait dma, s1\n"
                           "  dma.copy hbm[out], spad[0], fp32, 64\n"
                           "  halt\n";

void vp_two_chip_send_recv_outputs_and_time_equal_npusim_sim()
{
    arch_config cfg = arch("tiny");
    isa_program *a = assemble(cfg, ping_s), *b = assemble(cfg, pong_s);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    check_vp_against_reference(cfg, {a, b},
                               {io(0, "x", values(64, ISA_DTYPE_FP32, 5)),
                                io(1, "y", values(64, ISA_DTYPE_FP32, 6))},
                               {io(1, "out")}, true, "send/recv");
}

void vp_timing_mode_matmul_time_equals_npusim_sim()
{
    arch_config cfg = arch("tiny");
    kgen_matmul mm{};
    mm.m = 40, mm.n = 36, mm.k = 50, mm.dtype = ISA_DTYPE_BF16;
    isa_program *p = nullptr;
    char *text = nullptr;
    np_err e{};
    CU_ASSERT_EQUAL_FATAL(kgen_matmul_build(&cfg, &mm, &text, &p, &e), NP_OK);
    free(text);
    check_vp_against_reference(cfg, {p}, {}, {}, false, "timing-mode matmul");
}

// ---- a probe: an initiator whose thread runs a test body ---------------------------------

struct probe : sc_core::sc_module {
    tlm_utils::simple_initiator_socket<probe> socket;
    sc_core::sc_in<bool> irq;
    std::function<void(probe &)> body;
    unsigned invalidations = 0;
    sc_time local = sc_core::SC_ZERO_TIME;

    SC_HAS_PROCESS(probe);
    probe(sc_core::sc_module_name n, std::function<void(probe &)> b)
        : sc_module(n), socket("socket"), irq("irq"), body(std::move(b))
    {
        socket.register_invalidate_direct_mem_ptr(this, &probe::invalidate);
        SC_THREAD(run);
    }
    void run()
    {
        body(*this);
        sc_core::sc_stop();
    }
    void invalidate(sc_dt::uint64, sc_dt::uint64) { invalidations++; }

    tlm::tlm_response_status access(tlm::tlm_command cmd, uint64_t addr, uint8_t *p, unsigned n,
                                    uint8_t *be = nullptr, unsigned be_len = 0)
    {
        tlm::tlm_generic_payload tr;
        tr.set_command(cmd);
        tr.set_address(addr);
        tr.set_data_ptr(p);
        tr.set_data_length(n);
        tr.set_streaming_width(n);
        tr.set_byte_enable_ptr(be);
        tr.set_byte_enable_length(be_len);
        tr.set_response_status(tlm::TLM_INCOMPLETE_RESPONSE);
        socket->b_transport(tr, local);
        return tr.get_response_status();
    }
    tlm::tlm_response_status write64(uint64_t addr, uint64_t v)
    {
        uint8_t b[8];
        for (int i = 0; i < 8; i++)
            b[i] = (uint8_t)(v >> (8 * i));
        return access(tlm::TLM_WRITE_COMMAND, addr, b, 8);
    }
    uint64_t read64(uint64_t addr)
    {
        uint8_t b[8] = {0};
        CU_ASSERT_EQUAL(access(tlm::TLM_READ_COMMAND, addr, b, 8), tlm::TLM_OK_RESPONSE);
        uint64_t v = 0;
        for (int i = 0; i < 8; i++)
            v |= (uint64_t)b[i] << (8 * i);
        return v;
    }
    std::string message(uint64_t base = 0)
    {
        std::vector<char> m(NPU_ERR_MSG_BYTES + 1, 0);
        CU_ASSERT_EQUAL(access(tlm::TLM_READ_COMMAND, base + NPU_REG_ERR_MSG, (uint8_t *)m.data(),
                               NPU_ERR_MSG_BYTES), tlm::TLM_OK_RESPONSE);
        return std::string(m.data());
    }
    void sync() // let SystemC time catch up with the probe's
    {
        wait(local);
        local = sc_core::SC_ZERO_TIME;
    }
    // Writes an image at the top of the HBM and loads it; returns STATUS.
    uint64_t load(const std::vector<uint8_t> &img, uint64_t hbm, uint64_t base = 0)
    {
        uint64_t at = (hbm - img.size()) & ~(uint64_t)4095;
        std::vector<uint8_t> c(img);
        CU_ASSERT_EQUAL(access(tlm::TLM_WRITE_COMMAND, base + NPU_HBM_BASE + at, c.data(),
                               (unsigned)c.size()), tlm::TLM_OK_RESPONSE);
        write64(base + NPU_REG_PROG_ADDR, at);
        write64(base + NPU_REG_PROG_SIZE, img.size());
        write64(base + NPU_REG_IRQ_ENABLE, 1);
        write64(base + NPU_REG_CTRL, NPU_CTRL_LOAD);
        return read64(base + NPU_REG_STATUS);
    }
    void wait_irq()
    {
        sync();
        if (!irq.read())
            wait(irq.posedge_event());
    }
};

// A platform of n chips of cfg and a probe on chip 0's socket (chip 0's interrupt).
struct bench {
    npusim_platform plat;
    probe host;
    sc_core::sc_signal<bool> irq0;
    std::vector<std::unique_ptr<sc_core::sc_signal<bool>>> others;
    bench(const arch_config &cfg, bool functional, std::function<void(probe &)> body,
          uint32_t n = 1)
        : plat("npu", cfg, n, opts(functional)), host("probe", std::move(body)), irq0("irq0")
    {
        host.socket.bind(plat.chip(0).socket);
        plat.chip(0).irq.bind(irq0);
        host.irq.bind(irq0);
        for (uint32_t i = 1; i < n; i++) {
            others.emplace_back(new sc_core::sc_signal<bool>(("irq" + std::to_string(i)).c_str()));
            plat.chip(i).irq.bind(*others.back());
        }
    }
    static npusim_platform_opts opts(bool functional)
    {
        npusim_platform_opts o;
        o.functional = functional;
        o.quantum = sc_time(100, SC_NS);
        return o;
    }
};

// A program that runs a few thousand cycles (so that a START can arrive while it runs).
const char *const busy_s = ".bss\n"
                           "src: .space 4096\n"
                           "dst: .space 4096\n"
                           ".core 0\n"
                           "  dma.copy spad[0], hbm[src], bf16, 2048\n"
                           "  sem.signal dma, s0\n"
                           "  sem.wait vpu, s0\n"
                           "  vpu.exp spad[0x1000], spad[0], 64, 32, bf16\n"
                           "  sem.signal vpu, s1\n"
                           "  sem.wait dma, s1\n"
                           "  dma.copy hbm[dst], spad[0x1000], bf16, 2048\n"
                           "  halt\n";

// ---- bad transactions --------------------------------------------------------------------

void bad_transactions_get_tlm_error_responses_and_the_platform_runs_on()
{
    arch_config cfg = arch("tiny");
    isa_program *p = assemble(cfg, busy_s);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    std::vector<uint8_t> img = image(p);
    std::vector<uint8_t> in = values(2048, ISA_DTYPE_BF16, 9);
    ref_run ref = reference(cfg, {p}, true, {io(0, "src", in)}, {io(0, "dst")});
    CU_ASSERT_EQUAL_FATAL(ref.err.status, NP_OK);
    const isa_symbol *src = isa_program_symbol(p, "src"), *dst = isa_program_symbol(p, "dst");
    uint64_t hbm = (uint64_t)cfg.chip.hbm_bytes;
    bool body_done = false;
    bench b(cfg, true, [&](probe &h) {
        uint8_t buf[8] = {0};
        using tlm::TLM_READ_COMMAND;
        using tlm::TLM_WRITE_COMMAND;
        // outside every window
        CU_ASSERT_EQUAL(h.access(TLM_READ_COMMAND, NPU_REG_BLOCK_BYTES, buf, 8),
                        tlm::TLM_ADDRESS_ERROR_RESPONSE);
        CU_ASSERT_EQUAL(h.access(TLM_WRITE_COMMAND, NPU_HBM_BASE - 8, buf, 8),
                        tlm::TLM_ADDRESS_ERROR_RESPONSE);
        CU_ASSERT_EQUAL(h.access(TLM_READ_COMMAND, NPU_HBM_BASE + hbm - 4, buf, 8),
                        tlm::TLM_ADDRESS_ERROR_RESPONSE); // straddles the end of the HBM
        CU_ASSERT_EQUAL(h.access(TLM_READ_COMMAND, NPU_HBM_BASE + hbm, buf, 1),
                        tlm::TLM_ADDRESS_ERROR_RESPONSE);
        // unmapped and misaligned register offsets
        CU_ASSERT_EQUAL(h.access(TLM_READ_COMMAND, 0x060, buf, 8), tlm::TLM_ADDRESS_ERROR_RESPONSE);
        CU_ASSERT_EQUAL(h.access(TLM_READ_COMMAND, 0x3f8, buf, 8), tlm::TLM_ADDRESS_ERROR_RESPONSE);
        CU_ASSERT_EQUAL(h.access(TLM_READ_COMMAND, NPU_REG_STATUS + 2, buf, 4),
                        tlm::TLM_ADDRESS_ERROR_RESPONSE);
        CU_ASSERT_EQUAL(h.access(TLM_READ_COMMAND, NPU_REG_ERR_MSG + NPU_ERR_MSG_BYTES - 4, buf, 8),
                        tlm::TLM_ADDRESS_ERROR_RESPONSE);
        // writes to read-only registers
        for (uint64_t r : {NPU_REG_ID, NPU_REG_STATUS, NPU_REG_CYCLES, NPU_REG_T_START,
                           NPU_REG_T_END, NPU_REG_ERR_CODE, NPU_REG_ERR_LEN, NPU_REG_ERR_MSG})
            CU_ASSERT_EQUAL(h.write64(r, 1), tlm::TLM_COMMAND_ERROR_RESPONSE);
        // sizes and byte enables
        CU_ASSERT_EQUAL(h.access(TLM_READ_COMMAND, NPU_REG_STATUS, buf, 2),
                        tlm::TLM_BURST_ERROR_RESPONSE);
        uint8_t be[8] = {0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0};
        CU_ASSERT_EQUAL(h.access(TLM_WRITE_COMMAND, NPU_REG_PROG_ADDR, buf, 8, be, 8),
                        tlm::TLM_BYTE_ENABLE_ERROR_RESPONSE);
        // nothing above changed a register
        CU_ASSERT_EQUAL(h.read64(NPU_REG_ID), NPU_ID_VALUE);
        CU_ASSERT_EQUAL(h.read64(NPU_REG_STATUS), NPU_STATE_EMPTY);
        CU_ASSERT_EQUAL(h.read64(NPU_REG_PROG_ADDR), 0u);
        // a 4-byte access reaches one half of a register
        uint8_t half[4] = {0x78, 0x56, 0x34, 0x12};
        CU_ASSERT_EQUAL(h.access(TLM_WRITE_COMMAND, NPU_REG_PROG_ADDR + 4, half, 4),
                        tlm::TLM_OK_RESPONSE);
        CU_ASSERT_EQUAL(h.read64(NPU_REG_PROG_ADDR), 0x1234567800000000ull);
        // a START with no image is refused: status and message say why
        CU_ASSERT_EQUAL(h.write64(NPU_REG_CTRL, NPU_CTRL_START), tlm::TLM_OK_RESPONSE);
        uint64_t st = h.read64(NPU_REG_STATUS);
        CU_ASSERT_EQUAL(st & NPU_STATUS_STATE_MASK, NPU_STATE_EMPTY);
        CU_ASSERT(st & NPU_STATUS_REFUSED);
        CU_ASSERT_EQUAL(h.read64(NPU_REG_ERR_CODE), (uint64_t)NP_ERR_RANGE);
        CU_ASSERT(h.message().find("is not an image inside the HBM") != std::string::npos);
        // a corrupt image is refused with the loader's message
        std::vector<uint8_t> bad(img);
        bad[0] ^= 0xff;
        st = h.load(bad, hbm);
        CU_ASSERT(st & NPU_STATUS_REFUSED);
        CU_ASSERT_EQUAL(h.read64(NPU_REG_ERR_CODE), (uint64_t)NP_ERR_FORMAT);
        printf("\n  a corrupt image: %s", h.message().c_str());
        // the real image loads; a START while running is refused
        st = h.load(img, hbm);
        CU_ASSERT_EQUAL(st, NPU_STATE_LOADED);
        CU_ASSERT_EQUAL(h.read64(NPU_REG_ERR_LEN), 0u);
        std::vector<uint8_t> inb(in);
        CU_ASSERT_EQUAL(h.access(TLM_WRITE_COMMAND, NPU_HBM_BASE + src->addr, inb.data(),
                                 (unsigned)inb.size()), tlm::TLM_OK_RESPONSE);
        h.sync();
        uint64_t t0 = npusim_platform::ps_of(sc_core::sc_time_stamp() + h.local);
        CU_ASSERT_EQUAL(h.write64(NPU_REG_CTRL, NPU_CTRL_START), tlm::TLM_OK_RESPONSE);
        CU_ASSERT_EQUAL(h.read64(NPU_REG_STATUS), NPU_STATE_RUNNING);
        h.local += sc_time(500, SC_NS);
        h.sync(); // the program runs meanwhile
        CU_ASSERT(h.read64(NPU_REG_CYCLES) > 0);
        CU_ASSERT_EQUAL(h.read64(NPU_REG_T_END), 0u);
        CU_ASSERT_EQUAL(h.write64(NPU_REG_CTRL, NPU_CTRL_START), tlm::TLM_OK_RESPONSE);
        st = h.read64(NPU_REG_STATUS);
        CU_ASSERT_EQUAL(st & NPU_STATUS_STATE_MASK, NPU_STATE_RUNNING);
        CU_ASSERT(st & NPU_STATUS_REFUSED);
        CU_ASSERT(h.message().find("is running: a start is refused") != std::string::npos);
        CU_ASSERT_EQUAL(h.write64(NPU_REG_CTRL, NPU_CTRL_LOAD), tlm::TLM_OK_RESPONSE);
        CU_ASSERT(h.read64(NPU_REG_STATUS) & NPU_STATUS_REFUSED);
        // more bad transactions while it runs
        CU_ASSERT_EQUAL(h.access(TLM_READ_COMMAND, 0x2000, buf, 8),
                        tlm::TLM_ADDRESS_ERROR_RESPONSE);
        CU_ASSERT_EQUAL(h.write64(NPU_REG_STATUS, 0), tlm::TLM_COMMAND_ERROR_RESPONSE);
        // ... and the program ends as it would have: the interrupt, its time, its bytes
        h.wait_irq();
        uint64_t now = npusim_platform::ps_of(sc_core::sc_time_stamp());
        CU_ASSERT_EQUAL(h.read64(NPU_REG_STATUS) & NPU_STATUS_STATE_MASK, NPU_STATE_DONE);
        CU_ASSERT_EQUAL(h.read64(NPU_REG_T_START), t0);
        CU_ASSERT_EQUAL(h.read64(NPU_REG_T_END), now);
        CU_ASSERT_EQUAL(now - t0, ref.total_ps);
        CU_ASSERT(h.read64(NPU_REG_STATUS) & NPU_STATUS_IRQ);
        CU_ASSERT_EQUAL(h.write64(NPU_REG_IRQ_STATUS, 1), tlm::TLM_OK_RESPONSE);
        CU_ASSERT_FALSE(h.read64(NPU_REG_STATUS) & NPU_STATUS_IRQ);
        h.sync();
        wait(sc_core::SC_ZERO_TIME);
        CU_ASSERT_FALSE(h.irq.read()); // the line follows IRQ_STATUS
        std::vector<uint8_t> out(dst->size);
        CU_ASSERT_EQUAL(h.access(TLM_READ_COMMAND, NPU_HBM_BASE + dst->addr, out.data(),
                                 (unsigned)out.size()), tlm::TLM_OK_RESPONSE);
        CU_ASSERT(out == ref.outputs[0]);
        // a done chip takes its next start (the same image, loaded again)
        CU_ASSERT_EQUAL(h.write64(NPU_REG_CTRL, NPU_CTRL_START), tlm::TLM_OK_RESPONSE);
        CU_ASSERT_EQUAL(h.read64(NPU_REG_STATUS), NPU_STATE_RUNNING);
        uint64_t t1 = h.read64(NPU_REG_T_START);
        h.wait_irq();
        CU_ASSERT_EQUAL(h.read64(NPU_REG_STATUS) & NPU_STATUS_STATE_MASK, NPU_STATE_DONE);
        CU_ASSERT_EQUAL(h.read64(NPU_REG_T_END) - t1, ref.total_ps);
        body_done = true;
    });
    sc_core::sc_start();
    CU_ASSERT_TRUE(body_done);
    isa_program_free(p);
}

// Through the example platform's bus: each chip's window at its stride, and an address above
// the last chip an address error.
void the_bus_answers_an_address_past_the_last_chip_with_an_address_error()
{
    arch_config cfg = arch("tiny");
    struct tap : sc_core::sc_module {
        tlm_utils::simple_initiator_socket<tap> s;
        tlm::tlm_response_status st[4];
        uint64_t id[4] = {0};
        SC_HAS_PROCESS(tap);
        tap(sc_core::sc_module_name n) : sc_module(n), s("s") { SC_THREAD(run); }
        void run()
        {
            const uint64_t addrs[4] = {NPU_REG_ID, VP_CHIP_STRIDE + NPU_REG_ID,
                                       2 * VP_CHIP_STRIDE + NPU_REG_ID, 7 * VP_CHIP_STRIDE};
            for (int i = 0; i < 4; i++) {
                uint8_t b[8] = {0};
                tlm::tlm_generic_payload tr;
                tr.set_command(tlm::TLM_READ_COMMAND);
                tr.set_address(addrs[i]);
                tr.set_data_ptr(b);
                tr.set_data_length(8);
                tr.set_streaming_width(8);
                sc_time d = sc_core::SC_ZERO_TIME;
                s->b_transport(tr, d);
                st[i] = tr.get_response_status();
                for (int k = 0; k < 8; k++)
                    id[i] |= (uint64_t)b[k] << (8 * k);
            }
        }
    };
    vp_bus bus("bus", 2);
    tap t("tap");
    t.s.bind(bus.target);
    npusim_platform plat("npu", cfg, 2, npusim_platform_opts{});
    sc_core::sc_signal<bool> irq0("irq0"), irq1("irq1");
    bus.chips[0]->bind(plat.chip(0).socket);
    bus.chips[1]->bind(plat.chip(1).socket);
    plat.chip(0).irq.bind(irq0);
    plat.chip(1).irq.bind(irq1);
    sc_core::sc_start();
    CU_ASSERT_EQUAL(t.st[0], tlm::TLM_OK_RESPONSE);
    CU_ASSERT_EQUAL(t.st[1], tlm::TLM_OK_RESPONSE);
    CU_ASSERT_EQUAL(t.id[0], NPU_ID_VALUE);
    CU_ASSERT_EQUAL(t.id[1], NPU_ID_VALUE);
    CU_ASSERT_EQUAL(t.st[2], tlm::TLM_ADDRESS_ERROR_RESPONSE);
    CU_ASSERT_EQUAL(t.st[3], tlm::TLM_ADDRESS_ERROR_RESPONSE);
}

// ---- failing programs --------------------------------------------------------------------

// Runs src on chip 0 through a probe: the interrupt comes with `state` and the model's own
// message (the reference's error); then a new program is loaded and run, or refused (fault).
void check_failing_program(const char *src, unsigned state, np_status status)
{
    arch_config cfg = arch("tiny");
    isa_program *p = assemble(cfg, src), *ok = assemble(cfg, busy_s);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    ref_run ref = reference(cfg, {p}, true, {}, {});
    CU_ASSERT_EQUAL_FATAL(ref.err.status, status);
    std::vector<uint8_t> img = image(p), img_ok = image(ok);
    uint64_t hbm = (uint64_t)cfg.chip.hbm_bytes;
    bool body_done = false;
    bench b(cfg, true, [&](probe &h) {
        CU_ASSERT_EQUAL(h.load(img, hbm), NPU_STATE_LOADED);
        CU_ASSERT_EQUAL(h.write64(NPU_REG_CTRL, NPU_CTRL_START), tlm::TLM_OK_RESPONSE);
        h.wait_irq();
        uint64_t st = h.read64(NPU_REG_STATUS);
        CU_ASSERT_EQUAL(st & NPU_STATUS_STATE_MASK, state);
        CU_ASSERT(st & NPU_STATUS_IRQ);
        CU_ASSERT_EQUAL(h.read64(NPU_REG_ERR_CODE), (uint64_t)status);
        std::string msg = h.message();
        CU_ASSERT_EQUAL(h.read64(NPU_REG_ERR_LEN), strlen(ref.err.msg));
        CU_ASSERT_STRING_EQUAL(msg.c_str(), ref.err.msg);
        printf("\n  %s: %s", hw_chip_state_names[state], msg.c_str());
        CU_ASSERT(h.read64(NPU_REG_T_END) <= npusim_platform::ps_of(sc_core::sc_time_stamp()));
        h.write64(NPU_REG_IRQ_STATUS, 1);
        // A deadlocked chip takes a new program; a faulted one refuses it.
        st = h.load(img_ok, hbm);
        if (state == NPU_STATE_FAULT) {
            CU_ASSERT(st & NPU_STATUS_REFUSED);
            CU_ASSERT_EQUAL(st & NPU_STATUS_STATE_MASK, NPU_STATE_FAULT);
            CU_ASSERT(h.message().find("faulted: it takes no further program") !=
                      std::string::npos);
        } else {
            CU_ASSERT_EQUAL(st, NPU_STATE_LOADED);
            h.write64(NPU_REG_CTRL, NPU_CTRL_START);
            h.wait_irq();
            CU_ASSERT_EQUAL(h.read64(NPU_REG_STATUS) & NPU_STATUS_STATE_MASK, NPU_STATE_DONE);
        }
        body_done = true;
    });
    sc_core::sc_start();
    CU_ASSERT_TRUE(body_done);
    isa_program_free(p);
    isa_program_free(ok);
}

void a_faulting_program_raises_the_interrupt_with_the_models_message()
{
    check_failing_program(".core 0\n"
                          "  dma.copy spad[0], hbm[0], bf16, 64\n"
                          "  dma.copy spad[0xfff0], hbm[0], bf16, 64\n"
                          "  halt\n",
                          NPU_STATE_FAULT, NP_ERR_SIM_FAULT);
}

void a_deadlocked_program_raises_the_interrupt_naming_every_waiting_unit()
{
    check_failing_program(".core 0\n"
                          "  dma.copy spad[0], hbm[0], bf16, 64\n"
                          "  sem.wait vpu, s3\n"
                          "  vpu.relu spad[0x100], spad[0], 4, 16, bf16\n"
                          ".core 1\n"
                          "  sem.wait dma, s1\n",
                          NPU_STATE_DEADLOCK, NP_ERR_DEADLOCK);
}

// ---- DMI ---------------------------------------------------------------------------------

void dmi_pages_carry_the_programs_bytes_and_are_invalidated_at_each_command()
{
    arch_config cfg = arch("tiny");
    isa_program *p = assemble(cfg, busy_s);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    std::vector<uint8_t> img = image(p), in = values(2048, ISA_DTYPE_BF16, 11);
    ref_run ref = reference(cfg, {p}, true, {io(0, "src", in)}, {io(0, "dst")});
    const isa_symbol *src = isa_program_symbol(p, "src"), *dst = isa_program_symbol(p, "dst");
    uint64_t hbm = (uint64_t)cfg.chip.hbm_bytes;
    bool body_done = false;
    bench b(cfg, true, [&](probe &h) {
        CU_ASSERT_EQUAL(h.load(img, hbm), NPU_STATE_LOADED);
        CU_ASSERT_EQUAL(h.invalidations, 0u);
        // a pointer to src's page
        tlm::tlm_generic_payload tr;
        tlm::tlm_dmi dmi;
        tr.set_address(NPU_HBM_BASE + src->addr);
        tr.set_command(tlm::TLM_WRITE_COMMAND);
        CU_ASSERT_TRUE_FATAL(h.socket->get_direct_mem_ptr(tr, dmi));
        CU_ASSERT(dmi.is_read_write_allowed());
        CU_ASSERT(dmi.get_start_address() <= NPU_HBM_BASE + src->addr);
        CU_ASSERT(dmi.get_end_address() >= NPU_HBM_BASE + src->addr + src->size - 1);
        memcpy(dmi.get_dmi_ptr() + (NPU_HBM_BASE + src->addr - dmi.get_start_address()), in.data(),
               in.size());
        // b_transport sees what DMI wrote
        std::vector<uint8_t> back(in.size());
        CU_ASSERT_EQUAL(h.access(tlm::TLM_READ_COMMAND, NPU_HBM_BASE + src->addr, back.data(),
                                 (unsigned)back.size()), tlm::TLM_OK_RESPONSE);
        CU_ASSERT(back == in);
        // no DMI for registers
        tlm::tlm_dmi none;
        tr.set_address(NPU_REG_STATUS);
        CU_ASSERT_FALSE(h.socket->get_direct_mem_ptr(tr, none));
        // START invalidates the pointer; the program reads what DMI wrote
        CU_ASSERT_EQUAL(h.write64(NPU_REG_CTRL, NPU_CTRL_START), tlm::TLM_OK_RESPONSE);
        CU_ASSERT_EQUAL(h.invalidations, 1u);
        tr.set_address(NPU_HBM_BASE + dst->addr);
        CU_ASSERT_FALSE(h.socket->get_direct_mem_ptr(tr, none)); // not while it runs
        h.wait_irq();
        CU_ASSERT_EQUAL(h.read64(NPU_REG_STATUS) & NPU_STATUS_STATE_MASK, NPU_STATE_DONE);
        // after the end, a pointer to dst's page holds the program's output
        tlm::tlm_dmi out;
        CU_ASSERT_TRUE_FATAL(h.socket->get_direct_mem_ptr(tr, out));
        std::vector<uint8_t> got(
            out.get_dmi_ptr() + (NPU_HBM_BASE + dst->addr - out.get_start_address()),
            out.get_dmi_ptr() + (NPU_HBM_BASE + dst->addr - out.get_start_address()) + dst->size);
        CU_ASSERT(got == ref.outputs[0]);
        body_done = true;
    });
    sc_core::sc_start();
    CU_ASSERT_TRUE(body_done);
    isa_program_free(p);
}

// ---- the npusim-vp command against the npusim command --------------------------------------

struct cmd_out {
    int status = -1;
    std::string out;
};

cmd_out run_cmd(const std::string &cmd)
{
    cmd_out r;
    FILE *f = popen((cmd + " 2>&1").c_str(), "r");
    if (!f)
        return r;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        r.out.append(buf, n);
    int st = pclose(f);
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
    return r;
}

bool write_bytes(const std::string &path, const std::vector<uint8_t> &b)
{
    FILE *f = fopen(path.c_str(), "wb");
    bool ok = f && fwrite(b.data(), 1, b.size(), f) == b.size();
    if (f)
        fclose(f);
    return ok;
}

void npusim_vp_on_npusim_asm_output_matches_npusim_sim_at_any_quantum()
{
    char dir[] = "/tmp/npusim_vp_XXXXXX";
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
    std::string d = dir, npusim = NPUSIM_BIN, vp = NPUSIM_VP_BIN;
    FILE *f = fopen((d + "/ping.s").c_str(), "w");
    fputs(ping_s, f);
    fclose(f);
    f = fopen((d + "/pong.s").c_str(), "w");
    fputs(pong_s, f);
    fclose(f);
    CU_ASSERT_TRUE(write_bytes(d + "/x.bin", values(64, ISA_DTYPE_FP32, 21)));
    CU_ASSERT_TRUE(write_bytes(d + "/y.bin", values(64, ISA_DTYPE_FP32, 22)));
    for (const char *s : {"ping", "pong"}) {
        cmd_out a =
            run_cmd(npusim + " asm --arch tiny " + d + "/" + s + ".s -o " + d + "/" + s + ".elf");
        CU_ASSERT_EQUAL_FATAL(a.status, 0);
    }
    std::string progs = " " + d + "/ping.elf " + d + "/pong.elf";
    std::string io = " --input 0:x=" + d + "/x.bin --input 1:y=" + d + "/y.bin";
    cmd_out sim = run_cmd(npusim + " sim --arch tiny --functional --json" + io + " --dump 1:out=" +
                          d + "/out.bin" + progs);
    CU_ASSERT_EQUAL_FATAL(sim.status, 0);
    json_error_t je;
    json_t *js = json_loads(sim.out.c_str(), 0, &je);
    CU_ASSERT_PTR_NOT_NULL_FATAL(js);
    json_int_t sim_ps = json_integer_value(json_object_get(js, "total_ps"));
    CU_ASSERT(sim_ps > 0);
    // quanta that divide nothing in particular, smaller and larger than the whole run
    for (const char *q : {"1", "7", "333", "1000", "1000000"}) {
        cmd_out r = run_cmd(vp + " --arch tiny --functional --json --quantum " + q + io +
                            " --expect 1:out=" + d + "/out.bin" + progs);
        CU_ASSERT_EQUAL(r.status, 0);
        json_t *j = json_loads(r.out.c_str(), 0, &je);
        CU_ASSERT_PTR_NOT_NULL_FATAL(j);
        CU_ASSERT_EQUAL(json_integer_value(json_object_get(j, "model_ps")), sim_ps);
        json_t *res = json_object_get(j, "results");
        json_int_t last = 0;
        for (size_t i = 0; i < json_array_size(res); i++) {
            json_t *c = json_array_get(res, i);
            json_int_t irq = json_integer_value(json_object_get(c, "irq_ps"));
            json_int_t end = json_integer_value(json_object_get(c, "end_ps"));
            json_int_t start = json_integer_value(json_object_get(c, "start_ps"));
            CU_ASSERT_EQUAL(irq, end);
            CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(c, "state")), "done");
            last = std::max(last, end - start);
        }
        CU_ASSERT_EQUAL(last, sim_ps);
        json_t *o = json_array_get(json_object_get(j, "outputs"), 0);
        CU_ASSERT(json_is_true(json_object_get(o, "match")));
        printf("\n  quantum %s ns: npusim-vp %lld ps, npusim sim %lld ps", q, (long long)last,
               (long long)sim_ps);
        json_decref(j);
    }
    json_decref(js);
    // a wrong expectation is a failure with the first differing byte
    std::vector<uint8_t> wrong(256, 0);
    CU_ASSERT_TRUE(write_bytes(d + "/wrong.bin", wrong));
    cmd_out w = run_cmd(vp + " --arch tiny --functional" + io + " --expect 1:out=" + d +
                        "/wrong.bin" + progs);
    CU_ASSERT_EQUAL(w.status, 3);
    CU_ASSERT(w.out.find("differs from") != std::string::npos);
    // an expectation shorter than its symbol (its first 16 bytes, which match) differs: the
    // whole symbol is compared
    std::vector<uint8_t> out_bytes;
    {
        FILE *o = fopen((d + "/out.bin").c_str(), "rb");
        CU_ASSERT_PTR_NOT_NULL_FATAL(o);
        uint8_t b[16];
        CU_ASSERT_EQUAL(fread(b, 1, 16, o), 16u);
        fclose(o);
        out_bytes.assign(b, b + 16);
    }
    CU_ASSERT_TRUE(write_bytes(d + "/short.bin", out_bytes));
    cmd_out sh = run_cmd(vp + " --arch tiny --functional" + io + " --expect 1:out=" + d +
                         "/short.bin" + progs);
    CU_ASSERT_EQUAL(sh.status, 3);
    CU_ASSERT(sh.out.find("16 bytes expected, the symbol has 256") != std::string::npos);
    // the default architecture is npusim's (tiny): its programs run without --arch
    cmd_out def = run_cmd(vp + progs);
    CU_ASSERT_EQUAL(def.status, 0);
    CU_ASSERT(def.out.find("of tiny") != std::string::npos);
    // bad input: exit 2 with the file named
    cmd_out bad = run_cmd(vp + " --arch tiny " + d + "/x.bin");
    CU_ASSERT_EQUAL(bad.status, 2);
    CU_ASSERT(bad.out.find("x.bin") != std::string::npos);
    // a device or a directory as a program or an input: refused, not read forever or thrown
    for (const char *p : {"/dev/zero", "/tmp"}) {
        cmd_out dv = run_cmd(vp + " " + p);
        CU_ASSERT_EQUAL(dv.status, 2);
        CU_ASSERT(dv.out.find(std::string("npusim-vp: ") + p + ": is a") != std::string::npos);
        dv = run_cmd(vp + " --functional --input x=" + p + progs);
        CU_ASSERT_EQUAL(dv.status, 2);
        CU_ASSERT(dv.out.find(std::string("npusim-vp: ") + p + ": --input: is a") !=
                  std::string::npos);
    }
    // a chip number past what a system can have is quoted as given, not wrapped
    cmd_out ch = run_cmd(vp + " --functional --input 99999999999999999999:x=" + d + "/x.bin" +
                         progs);
    CU_ASSERT_EQUAL(ch.status, 2);
    CU_ASSERT(ch.out.find("chip 99999999999999999999 is out of range") != std::string::npos);
    // the results cannot be written: an error, not success
    cmd_out full = run_cmd("(" + vp + progs + " >/dev/full)"); // its errors to the pipe
    CU_ASSERT_EQUAL(full.status, 2);
    CU_ASSERT(full.out.find("cannot write the results to standard output") != std::string::npos);
    run_cmd("rm -rf " + d);
}


// ---- docs/systemc.md ----------------------------------------------------------------------

std::string slurp(const std::string &path)
{
    FILE *f = fopen(path.c_str(), "rb");
    std::string s;
    if (!f)
        return s;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        s.append(buf, n);
    fclose(f);
    return s;
}

// The lines of src between "[docs/systemc.md: name]" and "[end name]", without the start
// marker's indentation.
std::string excerpt(const std::string &src, const std::string &name)
{
    std::string open = "// [docs/systemc.md: " + name + "]\n", close = "// [end " + name + "]";
    size_t a = src.find(open), b = src.find(close);
    if (a == std::string::npos || b == std::string::npos || b < a)
        return "";
    size_t ls = src.rfind('\n', a) + 1, indent = a - ls;
    std::string out, body = src.substr(a + open.size(), src.rfind('\n', b) + 1 - (a + open.size()));
    for (size_t i = 0; i < body.size();) {
        size_t e = body.find('\n', i);
        std::string line = body.substr(i, e - i);
        out += (line.size() >= indent ? line.substr(indent) : line) + "\n";
        i = e + 1;
    }
    return out;
}

void docs_show_the_code_the_build_compiles()
{
    std::string doc = slurp(std::string(NPUSIM_SOURCE_DIR) + "/docs/systemc.md");
    CU_ASSERT_FATAL(!doc.empty());
    const std::string tag = "<!-- code: ";
    unsigned blocks = 0;
    for (size_t at = doc.find(tag); at != std::string::npos; at = doc.find(tag, at + 1)) {
        size_t eol = doc.find(" -->", at);
        std::string ref = doc.substr(at + tag.size(), eol - at - tag.size());
        std::string file = ref.substr(0, ref.find(' ')), name = ref.substr(ref.find(' ') + 1);
        size_t open = doc.find("```cpp\n", eol), close = doc.find("```\n", open + 7);
        std::string block = doc.substr(open + 7, close - open - 7);
        std::string want = excerpt(slurp(std::string(NPUSIM_SOURCE_DIR) + "/" + file), name);
        CU_ASSERT(!want.empty());
        if (block != want)
            fprintf(stderr, "\n  docs/systemc.md's %s block is not %s's:\n%s", name.c_str(),
                    file.c_str(), want.c_str());
        CU_ASSERT(block == want);
        blocks++;
    }
    CU_ASSERT_EQUAL(blocks, 3u);
}

const struct {
    const char *name;
    void (*fn)();
} tests[] = {
#define T(n) {#n, n}
    T(vp_matmul_outputs_and_time_equal_npusim_sim),
    T(vp_conv_outputs_and_time_equal_npusim_sim),
    T(vp_two_chip_send_recv_outputs_and_time_equal_npusim_sim),
    T(vp_timing_mode_matmul_time_equals_npusim_sim),
    T(bad_transactions_get_tlm_error_responses_and_the_platform_runs_on),
    T(the_bus_answers_an_address_past_the_last_chip_with_an_address_error),
    T(a_faulting_program_raises_the_interrupt_with_the_models_message),
    T(a_deadlocked_program_raises_the_interrupt_naming_every_waiting_unit),
    T(dmi_pages_carry_the_programs_bytes_and_are_invalidated_at_each_command),
    T(npusim_vp_on_npusim_asm_output_matches_npusim_sim_at_any_quantum),
    T(docs_show_the_code_the_build_compiles),
#undef T
};

} // namespace

int sc_main(int, char **) { return 1; } // never called: main below runs the tests

int main(int argc, char **argv)
{
    setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 1);
    sc_core::sc_report_handler::set_actions("/OSCI/SystemC", sc_core::SC_INFO,
                                            sc_core::SC_DO_NOTHING);
    if (argc < 2) { // every test in a process of its own
        unsigned failed = 0;
        for (const auto &t : tests) {
            std::string cmd = std::string(argv[0]) + " " + t.name;
            int st = system(cmd.c_str());
            failed += st != 0;
        }
        printf("%zu passed, %u failed\n", sizeof tests / sizeof tests[0] - failed, failed);
        return failed ? 1 : 0;
    }
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    CU_pSuite suite = CU_add_suite("systemc", nullptr, nullptr);
    for (const auto &t : tests)
        if (!strcmp(argv[1], t.name))
            CU_add_test(suite, t.name, t.fn);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned failed = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
    unsigned ran = CU_get_number_of_tests_run();
    CU_cleanup_registry();
    return failed || !ran ? 1 : 0;
}
