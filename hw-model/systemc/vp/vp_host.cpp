// vp_host.cpp — the example platform's host and its assembly (vp_host.h).
#include "vp_host.h"

#include <algorithm>
#include <cinttypes>
#include <cstring>

extern "C" {
#include "isa_elf.h"
}

using sc_core::sc_time;

namespace {

uint64_t global(uint32_t chip, uint64_t local) { return chip * VP_CHIP_STRIDE + local; }

} // namespace

vp_host::vp_host(sc_core::sc_module_name name, const arch_config &cfg, vp_job job)
    : sc_module(name), socket("socket"), irq("irq", job.images.size()), cfg_(cfg),
      job_(std::move(job))
{
    socket.register_invalidate_direct_mem_ptr(this, &vp_host::invalidate);
    SC_HAS_PROCESS(vp_host);
    SC_THREAD(main);
}

void vp_host::main()
{
    result.finished = run_job();
    for (isa_program *p : progs_)
        isa_program_free(p);
    progs_.clear();
    sc_core::sc_stop();
}

// ---- transactions ------------------------------------------------------------------------

void vp_host::invalidate(sc_dt::uint64 start, sc_dt::uint64 end)
{
    dmi_.erase(std::remove_if(dmi_.begin(), dmi_.end(),
                              [&](const tlm::tlm_dmi &d) {
                                  return d.get_start_address() <= end &&
                                         start <= d.get_end_address();
                              }),
               dmi_.end());
}

// One b_transport at the host's local time; false (result.err set) unless TLM_OK_RESPONSE.
bool vp_host::transact(tlm::tlm_command cmd, uint64_t addr, uint8_t *p, unsigned n)
{
    tlm::tlm_generic_payload tr;
    tr.set_command(cmd);
    tr.set_address(addr);
    tr.set_data_ptr(p);
    tr.set_data_length(n);
    tr.set_streaming_width(n);
    tr.set_response_status(tlm::TLM_INCOMPLETE_RESPONSE);
    sc_time delay = qk_.get_local_time();
    socket->b_transport(tr, delay);
    qk_.set(delay);
    if (qk_.need_sync())
        qk_.sync();
    if (tr.is_response_error()) {
        np_err_set(&result.err, NP_ERR_INTERNAL, "%s of %u bytes at 0x%" PRIx64 " failed: %s",
                   cmd == tlm::TLM_READ_COMMAND ? "read" : "write", n, addr,
                   tr.get_response_string().c_str());
        return false;
    }
    if (tr.is_dmi_allowed()) { // ask for a pointer for the next accesses
        tlm::tlm_dmi d;
        if (socket->get_direct_mem_ptr(tr, d))
            dmi_.push_back(d);
    }
    return true;
}

// HBM bytes of chip [addr, addr + n): through a DMI pointer where one is granted, else
// b_transport in pieces of at most 64 KiB.
bool vp_host::mem(uint32_t chip, uint64_t addr, uint8_t *p, uint64_t n, bool write)
{
    uint64_t a = global(chip, NPU_HBM_BASE + addr);
    while (n) {
        const tlm::tlm_dmi *d = nullptr;
        for (const tlm::tlm_dmi &x : dmi_)
            if (x.get_start_address() <= a && a <= x.get_end_address() &&
                (write ? x.is_write_allowed() : x.is_read_allowed()))
                d = &x;
        if (d) {
            uint64_t k = std::min<uint64_t>(n, d->get_end_address() - a + 1);
            uint8_t *q = d->get_dmi_ptr() + (a - d->get_start_address());
            write ? memcpy(q, p, k) : memcpy(p, q, k);
            qk_.inc(write ? d->get_write_latency() : d->get_read_latency());
            result.dmi_bytes += k;
            a += k, p += k, n -= k;
            continue;
        }
        unsigned k = (unsigned)std::min<uint64_t>(n, 64 * 1024 - a % (64 * 1024));
        if (!transact(write ? tlm::TLM_WRITE_COMMAND : tlm::TLM_READ_COMMAND, a, p, k))
            return false;
        result.bt_bytes += k;
        a += k, p += k, n -= k;
    }
    return true;
}

bool vp_host::reg_write(uint32_t chip, uint64_t reg, uint64_t v)
{
    uint8_t b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    return transact(tlm::TLM_WRITE_COMMAND, global(chip, reg), b, 8);
}

bool vp_host::reg_read(uint32_t chip, uint64_t reg, uint64_t *v)
{
    uint8_t b[8];
    if (!transact(tlm::TLM_READ_COMMAND, global(chip, reg), b, 8))
        return false;
    *v = 0;
    for (int i = 0; i < 8; i++)
        *v |= (uint64_t)b[i] << (8 * i);
    return true;
}

// ---- the job -----------------------------------------------------------------------------

const isa_symbol *vp_host::symbol(uint32_t chip, const std::string &name, const char *what)
{
    if (chip >= progs_.size()) {
        np_err_set(&result.err, NP_ERR_RANGE, "%s %" PRIu32 ":%s: there are %zu chips", what,
                   chip, name.c_str(), progs_.size());
        return nullptr;
    }
    const isa_symbol *s = progs_[chip] ? isa_program_symbol(progs_[chip], name.c_str()) : nullptr;
    if (!s)
        np_err_set(&result.err, NP_ERR_UNKNOWN_KEY, "%s: chip %" PRIu32 "'s program (%s) has no "
                   "data symbol '%s'", what, chip, job_.image_names[chip].c_str(), name.c_str());
    return s;
}

// Writes chip's image into the top of its HBM, programs the registers and loads it (the chip
// refuses an image that overlaps the program's data).
bool vp_host::prepare(uint32_t chip)
{
    const std::vector<uint8_t> &img = job_.images[chip];
    uint64_t hbm = (uint64_t)cfg_.chip.hbm_bytes;
    if (img.size() > hbm)
        return np_err_set(&result.err, NP_ERR_RANGE, "%s: the image (%zu bytes) is larger than "
                          "the HBM (%" PRIu64 " bytes)", job_.image_names[chip].c_str(),
                          img.size(), hbm),
               false;
    // [docs/systemc.md: load]
    uint64_t at = (hbm - img.size()) & ~(uint64_t)4095;
    std::vector<uint8_t> copy(img);
    uint64_t status, len;
    if (!mem(chip, at, copy.data(), copy.size(), true) || !reg_write(chip, NPU_REG_PROG_ADDR, at) ||
        !reg_write(chip, NPU_REG_PROG_SIZE, img.size()) ||
        !reg_write(chip, NPU_REG_IRQ_ENABLE, 1) || !reg_write(chip, NPU_REG_CTRL, NPU_CTRL_LOAD) ||
        !reg_read(chip, NPU_REG_STATUS, &status))
        return false;
    // [end load]
    if (status & NPU_STATUS_REFUSED) {
        uint64_t code;
        char msg[NPU_ERR_MSG_BYTES + 1] = {0};
        if (!reg_read(chip, NPU_REG_ERR_CODE, &code) || !reg_read(chip, NPU_REG_ERR_LEN, &len) ||
            !transact(tlm::TLM_READ_COMMAND, global(chip, NPU_REG_ERR_MSG), (uint8_t *)msg,
                      NPU_ERR_MSG_BYTES))
            return false;
        return np_err_set(&result.err, (np_status)code, "chip %" PRIu32 " refused %s: %s", chip,
                          job_.image_names[chip].c_str(), msg),
               false;
    }
    return true;
}

bool vp_host::run_job()
{
    uint32_t n = (uint32_t)job_.images.size();
    isa_target t;
    isa_target_from_arch(&cfg_, &t);
    // The driver reads the symbol table of each program it has buffers for.
    progs_.assign(n, nullptr);
    std::vector<bool> io(n, false);
    for (const std::vector<vp_io> *v : {&job_.inputs, &job_.expects, &job_.dumps})
        for (const vp_io &x : *v)
            if (x.chip < n)
                io[x.chip] = true;
    for (uint32_t i = 0; i < n; i++)
        if (io[i] && isa_elf_load_mem(job_.images[i].data(), job_.images[i].size(),
                                      job_.image_names[i].c_str(), &t, &progs_[i], nullptr,
                                      &result.err) != NP_OK)
            return false;
    for (uint32_t i = 0; i < n; i++)
        if (!prepare(i))
            return false;
    for (vp_io &in : job_.inputs) {
        const isa_symbol *s = symbol(in.chip, in.symbol, "input");
        if (!s)
            return false;
        if (in.bytes.size() > s->size)
            return np_err_set(&result.err, NP_ERR_RANGE, "input %s: %zu bytes for symbol '%s' of "
                              "%" PRIu64 " bytes", in.name.c_str(), in.bytes.size(),
                              in.symbol.c_str(), s->size),
                   false;
        if (!mem(in.chip, s->addr, in.bytes.data(), in.bytes.size(), true))
            return false;
    }
    // [docs/systemc.md: start]
    // Every chip starts at one instant: the same annotated time for each START.
    qk_.sync();
    result.start_ps = npusim_platform::ps_of(sc_core::sc_time_stamp());
    sc_time latest = sc_core::SC_ZERO_TIME;
    for (uint32_t i = 0; i < n; i++) {
        uint8_t b[8] = {NPU_CTRL_START};
        tlm::tlm_generic_payload tr;
        tr.set_command(tlm::TLM_WRITE_COMMAND);
        tr.set_address(global(i, NPU_REG_CTRL));
        tr.set_data_ptr(b);
        tr.set_data_length(8);
        tr.set_streaming_width(8);
        sc_time delay = sc_core::SC_ZERO_TIME;
        socket->b_transport(tr, delay);
        latest = std::max(latest, delay);
        if (tr.is_response_error())
            return np_err_set(&result.err, NP_ERR_INTERNAL, "chip %" PRIu32 ": START failed: %s",
                              i, tr.get_response_string().c_str()),
                   false;
    }
    qk_.set(latest);
    result.chips.assign(n, vp_chip_result{});
    for (uint32_t i = 0; i < n; i++) {
        uint64_t status;
        if (!reg_read(i, NPU_REG_STATUS, &status))
            return false;
        if (status & NPU_STATUS_REFUSED)
            return np_err_set(&result.err, NP_ERR_INTERNAL, "chip %" PRIu32 " refused START", i),
                   false;
    }
    qk_.sync();
    // Wait for every chip's interrupt.
    std::vector<bool> seen(n, false);
    for (uint32_t left = n; left;) {
        bool high = false;
        sc_core::sc_event_or_list any;
        for (uint32_t i = 0; i < n; i++)
            if (!seen[i]) {
                high = high || irq[i].read();
                any |= irq[i].posedge_event();
            }
        if (!high)
            sc_core::wait(any);
        // [end start]
        for (uint32_t i = 0; i < n; i++) {
            if (seen[i] || !irq[i].read())
                continue;
            vp_chip_result &r = result.chips[i];
            r.irq_ps = npusim_platform::ps_of(sc_core::sc_time_stamp());
            uint64_t status, len;
            if (!reg_read(i, NPU_REG_STATUS, &status) ||
                !reg_read(i, NPU_REG_T_START, &r.start_ps) ||
                !reg_read(i, NPU_REG_T_END, &r.end_ps) || !reg_read(i, NPU_REG_CYCLES, &r.cycles) ||
                !reg_read(i, NPU_REG_ERR_LEN, &len))
                return false;
            r.state = (unsigned)(status & NPU_STATUS_STATE_MASK);
            if (len) {
                std::vector<char> msg(NPU_ERR_MSG_BYTES);
                if (!transact(tlm::TLM_READ_COMMAND, global(i, NPU_REG_ERR_MSG),
                              (uint8_t *)msg.data(), NPU_ERR_MSG_BYTES))
                    return false;
                r.error.assign(msg.data(), std::min<uint64_t>(len, NPU_ERR_MSG_BYTES));
            }
            if (!reg_write(i, NPU_REG_IRQ_STATUS, 1))
                return false;
            seen[i] = true;
            left--;
        }
    }
    for (uint32_t i = 0; i < n; i++)
        if (result.chips[i].state != NPU_STATE_DONE && result.err.status == NP_OK)
            np_err_set(&result.err, result.chips[i].state == NPU_STATE_DEADLOCK ? NP_ERR_DEADLOCK
                                                                               : NP_ERR_SIM_FAULT,
                       "chip %" PRIu32 ": %s", i, result.chips[i].error.c_str());
    // Read the outputs back.
    for (vp_io &d : job_.dumps) {
        const isa_symbol *s = symbol(d.chip, d.symbol, "dump");
        if (!s)
            return false;
        d.bytes.resize(s->size);
        if (!mem(d.chip, s->addr, d.bytes.data(), s->size, false))
            return false;
        result.dumps.push_back(d);
    }
    for (const vp_io &e : job_.expects) {
        const isa_symbol *s = symbol(e.chip, e.symbol, "expect");
        if (!s)
            return false;
        uint64_t k = std::min<uint64_t>(e.bytes.size(), s->size);
        std::vector<uint8_t> got(k);
        if (!mem(e.chip, s->addr, got.data(), k, false))
            return false;
        vp_output o{e.chip, e.symbol, e.name, k, e.bytes.size() == s->size, ""};
        char diff[160] = "";
        if (!o.match)
            snprintf(diff, sizeof diff, "%zu bytes expected, the symbol has %" PRIu64,
                     e.bytes.size(), s->size);
        for (uint64_t j = 0; j < k && o.match; j++)
            if (got[j] != e.bytes[j]) {
                o.match = false;
                snprintf(diff, sizeof diff, "byte %" PRIu64 ": 0x%02x, expected 0x%02x", j,
                         got[j], e.bytes[j]);
            }
        o.diff = diff;
        if (!o.match && result.err.status == NP_OK)
            np_err_set(&result.err, NP_ERR_SIM_FAULT, "chip %" PRIu32 " %s differs from %s: %s",
                       e.chip, e.symbol.c_str(), e.name.c_str(), diff);
        result.outputs.push_back(o);
    }
    return true;
}

// ---- the platform ------------------------------------------------------------------------

// [docs/systemc.md: bind]
vp_system::vp_system(const arch_config &cfg, const npusim_platform_opts &opts, vp_job job)
    : plat("npu", cfg, (uint32_t)job.images.size(), opts), bus("bus", job.images.size()),
      host("host", cfg, job), irq("irq", job.images.size())
{
    host.socket.bind(bus.target);
    for (uint32_t i = 0; i < plat.n_chips(); i++) {
        bus.chips[i]->bind(plat.chip(i).socket);
        plat.chip(i).irq.bind(irq[i]);
        host.irq[i].bind(irq[i]);
    }
}
// [end bind]
