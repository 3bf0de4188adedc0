// npusim_chip.cpp — one chip as a TLM-2.0 target (npusim_chip.h): the register block and the
// HBM window of npusim_regs.h, commands, DMI pages, the interrupt.
//
// The chip's state as SystemC sees it (STATUS bits 0-7), and what moves it:
//
//   EMPTY --CTRL_LOAD--> LOADED --CTRL_START--> RUNNING --(the model's end, at its time)-->
//        DONE | DEADLOCK | FAULT;  DONE, DEADLOCK --CTRL_LOAD / CTRL_START--> LOADED / RUNNING
//
// A command in RUNNING or FAULT, or one whose image does not load, is refused (STATUS.REFUSED,
// ERR_CODE, ERR_MSG) and changes nothing else.
#include "npusim_chip.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>

extern "C" {
#include "clock.h"
#include "isa_elf.h"
}

using sc_core::sc_time;
using tlm::tlm_response_status;

// STATUS shows hw_chip_state itself; ERR_MSG holds any model message.
static_assert(NPU_STATE_EMPTY == HW_CHIP_EMPTY && NPU_STATE_LOADED == HW_CHIP_LOADED &&
                  NPU_STATE_RUNNING == HW_CHIP_RUNNING && NPU_STATE_DONE == HW_CHIP_DONE &&
                  NPU_STATE_DEADLOCK == HW_CHIP_DEADLOCK && NPU_STATE_FAULT == HW_CHIP_FAULT,
              "npusim_regs.h's states are hw_chip_state's");
static_assert(NP_ERR_MSG_MAX <= NPU_ERR_MSG_BYTES, "the message window holds a whole np_err");

namespace {

uint64_t get_le(const uint8_t *p, unsigned n)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

void put_le(uint8_t *p, uint64_t v, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

bool reg_known(uint64_t reg) { return reg <= NPU_REG_IRQ_STATUS; }

bool reg_writable(uint64_t reg)
{
    return reg == NPU_REG_PROG_ADDR || reg == NPU_REG_PROG_SIZE || reg == NPU_REG_CTRL ||
           reg == NPU_REG_IRQ_ENABLE || reg == NPU_REG_IRQ_STATUS;
}

} // namespace

npusim_chip::npusim_chip(sc_core::sc_module_name name, npusim_platform &plat, uint32_t idx)
    : sc_module(name), socket("socket"), irq("irq"), plat_(plat), idx_(idx)
{
    socket.register_b_transport(this, &npusim_chip::b_transport);
    socket.register_get_direct_mem_ptr(this, &npusim_chip::get_direct_mem_ptr);
    socket.register_transport_dbg(this, &npusim_chip::transport_dbg);
    SC_HAS_PROCESS(npusim_chip);
    SC_METHOD(irq_update);
    sensitive << irq_ev_;
}

npusim_chip::~npusim_chip() { isa_program_free(prog_); }

uint64_t npusim_chip::hbm_bytes() const { return (uint64_t)plat_.cfg_.chip.hbm_bytes; }

void npusim_chip::irq_update() { irq.write(irq_enable_ && irq_pending_); }

// ---- transactions ------------------------------------------------------------------------

void npusim_chip::b_transport(tlm::tlm_generic_payload &tr, sc_time &delay)
{
    uint64_t addr = tr.get_address();
    unsigned len = tr.get_data_length();
    uint8_t *p = tr.get_data_ptr();
    if (tr.get_byte_enable_ptr()) {
        tr.set_response_status(tlm::TLM_BYTE_ENABLE_ERROR_RESPONSE);
        return;
    }
    if (tr.get_streaming_width() < len) {
        tr.set_response_status(tlm::TLM_BURST_ERROR_RESPONSE);
        return;
    }
    if (tr.is_read() || tr.is_write()) {
        if (addr < NPU_REG_BLOCK_BYTES) {
            tlm_response_status st = tr.is_read() ? reg_read(addr, p, len)
                                                  : reg_write(addr, p, len, delay);
            delay += plat_.opts_.reg_latency;
            tr.set_response_status(st);
            return;
        }
        uint64_t off = addr - NPU_HBM_BASE;
        if (addr < NPU_HBM_BASE || off > hbm_bytes() || len > hbm_bytes() - off) {
            tr.set_response_status(tlm::TLM_ADDRESS_ERROR_RESPONSE);
            return;
        }
        np_err err{};
        if (!hbm_access(off, p, len, tr.is_write(), &err)) {
            tr.set_response_status(tlm::TLM_GENERIC_ERROR_RESPONSE); // out of host memory
            return;
        }
        // The host's access costs what one of the chip's HBM transfers alone would.
        const arch_chip &ch = plat_.cfg_.chip;
        double ps = ch.hbm_latency_ns * 1000.0 + (double)len * 1000.0 / ch.hbm_gb_per_s;
        delay += npusim_platform::time_of_ps((uint64_t)std::ceil(ps));
        tr.set_dmi_allowed(!(plat_.functional() && vis_ == NPU_STATE_RUNNING));
    } else if (addr >= NPU_REG_BLOCK_BYTES &&
               (addr < NPU_HBM_BASE || addr - NPU_HBM_BASE >= hbm_bytes())) {
        tr.set_response_status(tlm::TLM_ADDRESS_ERROR_RESPONSE);
        return;
    }
    tr.set_response_status(tlm::TLM_OK_RESPONSE);
}

unsigned npusim_chip::transport_dbg(tlm::tlm_generic_payload &tr)
{
    uint64_t addr = tr.get_address();
    unsigned len = tr.get_data_length();
    uint8_t *p = tr.get_data_ptr();
    np_err err{};
    if (addr < NPU_REG_BLOCK_BYTES && tr.is_read())
        return reg_read(addr, p, len) == tlm::TLM_OK_RESPONSE ? len : 0;
    uint64_t off = addr - NPU_HBM_BASE;
    if (addr < NPU_HBM_BASE || off >= hbm_bytes() || !(tr.is_read() || tr.is_write()))
        return 0;
    len = (unsigned)std::min<uint64_t>(len, hbm_bytes() - off);
    return hbm_access(off, p, len, tr.is_write(), &err) ? len : 0;
}

bool npusim_chip::get_direct_mem_ptr(tlm::tlm_generic_payload &tr, tlm::tlm_dmi &dmi)
{
    uint64_t addr = tr.get_address(), hbm = hbm_bytes();
    dmi.allow_none();
    if (addr < NPU_HBM_BASE || addr - NPU_HBM_BASE >= hbm) { // no DMI below the window
        dmi.set_start_address(0);
        dmi.set_end_address(NPU_HBM_BASE - 1);
        return false;
    }
    if (plat_.functional() && vis_ == NPU_STATE_RUNNING) { // the model's bytes are live
        dmi.set_start_address(NPU_HBM_BASE);
        dmi.set_end_address(NPU_HBM_BASE + hbm - 1);
        return false;
    }
    uint64_t pg = (addr - NPU_HBM_BASE) / NPUSIM_CHIP_DMI_PAGE;
    np_err err{};
    uint8_t *p = page(pg, true, &err);
    if (!p)
        return false;
    uint64_t start = NPU_HBM_BASE + pg * NPUSIM_CHIP_DMI_PAGE;
    dmi.set_dmi_ptr(p);
    dmi.set_start_address(start);
    dmi.set_end_address(start + std::min(NPUSIM_CHIP_DMI_PAGE, hbm - pg * NPUSIM_CHIP_DMI_PAGE) -
                        1);
    dmi.allow_read_write();
    sc_time lat = npusim_platform::time_of_ps(
        (uint64_t)std::llround(plat_.cfg_.chip.hbm_latency_ns * 1000.0));
    dmi.set_read_latency(lat);
    dmi.set_write_latency(lat);
    return true;
}

// ---- registers ---------------------------------------------------------------------------

uint64_t npusim_chip::reg_value(uint64_t reg) const
{
    switch (reg) {
    case NPU_REG_ID: return NPU_ID_VALUE;
    case NPU_REG_PROG_ADDR: return prog_addr_;
    case NPU_REG_PROG_SIZE: return prog_size_;
    case NPU_REG_STATUS:
        return vis_ | (refused_ ? NPU_STATUS_REFUSED : 0) | (irq_pending_ ? NPU_STATUS_IRQ : 0);
    case NPU_REG_CYCLES: {
        if (vis_ != NPU_STATE_RUNNING)
            return cycles_;
        clk_domain clk;
        np_err e{};
        uint64_t now = npusim_platform::ps_of(sc_core::sc_time_stamp());
        if (clk_init_ghz(&clk, plat_.cfg_.core.clock_ghz, &e) != NP_OK || now < t_start_ps_)
            return 0;
        return clk_ps_to_cycles(&clk, now) - clk_ps_to_cycles(&clk, t_start_ps_);
    }
    case NPU_REG_T_START: return t_start_ps_;
    case NPU_REG_T_END: return vis_ == NPU_STATE_RUNNING ? 0 : t_end_ps_;
    case NPU_REG_ERR_CODE: return (uint64_t)err_.status;
    case NPU_REG_ERR_LEN: return err_.status != NP_OK ? strlen(err_.msg) : 0;
    case NPU_REG_IRQ_ENABLE: return irq_enable_;
    case NPU_REG_IRQ_STATUS: return irq_pending_;
    default: return 0; // CTRL
    }
}

tlm_response_status npusim_chip::reg_read(uint64_t off, uint8_t *p, unsigned len)
{
    if (off >= NPU_REG_ERR_MSG && off < NPU_REG_ERR_MSG + NPU_ERR_MSG_BYTES) {
        uint64_t at = off - NPU_REG_ERR_MSG;
        if (len > NPU_ERR_MSG_BYTES - at)
            return tlm::TLM_ADDRESS_ERROR_RESPONSE;
        size_t n = err_.status != NP_OK ? strlen(err_.msg) : 0;
        for (unsigned i = 0; i < len; i++)
            p[i] = at + i < n ? (uint8_t)err_.msg[at + i] : 0;
        return tlm::TLM_OK_RESPONSE;
    }
    if (len != 4 && len != 8)
        return tlm::TLM_BURST_ERROR_RESPONSE;
    uint64_t reg = off & ~(uint64_t)7;
    if (off % len || !reg_known(reg))
        return tlm::TLM_ADDRESS_ERROR_RESPONSE;
    uint64_t v = reg_value(reg);
    put_le(p, (off & 4) ? v >> 32 : v, len);
    return tlm::TLM_OK_RESPONSE;
}

tlm_response_status npusim_chip::reg_write(uint64_t off, const uint8_t *p, unsigned len,
                                           const sc_time &delay)
{
    if (off >= NPU_REG_ERR_MSG && off < NPU_REG_ERR_MSG + NPU_ERR_MSG_BYTES)
        return tlm::TLM_COMMAND_ERROR_RESPONSE; // the message window is read-only
    if (len != 4 && len != 8)
        return tlm::TLM_BURST_ERROR_RESPONSE;
    uint64_t reg = off & ~(uint64_t)7;
    if (off % len || !reg_known(reg))
        return tlm::TLM_ADDRESS_ERROR_RESPONSE;
    if (!reg_writable(reg))
        return tlm::TLM_COMMAND_ERROR_RESPONSE;
    uint64_t v = get_le(p, len);
    if (len == 4) { // one half of the register: the other keeps its value
        uint64_t old = reg_value(reg);
        v = (off & 4) ? (old & 0xffffffffull) | (v << 32) : (old & ~0xffffffffull) | v;
    }
    switch (reg) {
    case NPU_REG_PROG_ADDR:
    case NPU_REG_PROG_SIZE:
        (reg == NPU_REG_PROG_ADDR ? prog_addr_ : prog_size_) = v;
        loaded_current_ = false;
        break;
    case NPU_REG_CTRL:
        if (len == 8 || !(off & 4)) // the command bits are in the low half
            command(v, npusim_platform::ps_of(sc_core::sc_time_stamp() + delay));
        break;
    case NPU_REG_IRQ_ENABLE:
        irq_enable_ = v & 1;
        irq_ev_.notify(sc_core::SC_ZERO_TIME);
        break;
    case NPU_REG_IRQ_STATUS:
        if (v & 1)
            irq_pending_ = false;
        irq_ev_.notify(sc_core::SC_ZERO_TIME);
        break;
    }
    return tlm::TLM_OK_RESPONSE;
}

// ---- commands ----------------------------------------------------------------------------

void npusim_chip::refuse(const np_err &e)
{
    refused_ = true;
    err_ = e;
}

void npusim_chip::command(uint64_t ctrl, uint64_t t_ps)
{
    if (!(ctrl & (NPU_CTRL_LOAD | NPU_CTRL_START)))
        return;
    const char *what = ctrl & NPU_CTRL_START ? "start" : "load";
    np_err e{};
    if (vis_ == NPU_STATE_RUNNING) {
        np_err_set(&e, NP_ERR_INCONSISTENT, "chip %" PRIu32 " is running: a %s is refused until "
                   "its program ends", idx_, what);
        refuse(e);
        return;
    }
    if (vis_ == NPU_STATE_FAULT) {
        np_err_set(&e, NP_ERR_INCONSISTENT, "chip %" PRIu32 " faulted: it takes no further "
                   "program (a %s is refused)", idx_, what);
        refuse(e);
        return;
    }
    bool need_load = (ctrl & NPU_CTRL_LOAD) || !loaded_current_ || vis_ != NPU_STATE_LOADED;
    if (!flush_pages(&e) || (need_load && !load(&e))) {
        refuse(e);
        return;
    }
    refused_ = false;
    err_ = np_err{};
    if (!(ctrl & NPU_CTRL_START))
        return;
    if (!plat_.start_at(*this, t_ps, &e)) { // the model cannot take an event: out of memory
        refuse(e);
        return;
    }
    vis_ = NPU_STATE_RUNNING;
    t_end_ps_ = cycles_ = 0;
}

bool npusim_chip::load(np_err *err)
{
    uint64_t hbm = hbm_bytes();
    if (prog_size_ == 0 || prog_size_ > ISA_ELF_MAX_FILE_BYTES || prog_addr_ > hbm ||
        prog_size_ > hbm - prog_addr_) {
        np_err_set(err, NP_ERR_RANGE, "chip %" PRIu32 ": PROG_ADDR 0x%" PRIx64 " + PROG_SIZE %"
                   PRIu64 " bytes is not an image inside the HBM (%" PRIu64 " bytes)", idx_,
                   prog_addr_, prog_size_, hbm);
        return false;
    }
    std::vector<uint8_t> img(prog_size_);
    if (!hbm_access(prog_addr_, img.data(), prog_size_, false, err))
        return false;
    char name[64];
    snprintf(name, sizeof name, "chip %" PRIu32 " hbm[0x%" PRIx64 "]", idx_, prog_addr_);
    isa_target t;
    isa_target_from_arch(&plat_.cfg_, &t);
    isa_program *p = nullptr;
    if (isa_elf_load_mem(img.data(), img.size(), name, &t, &p, nullptr, err) != NP_OK) {
        if (!strstr(err->msg, name))
            np_err_prefix(err, "%s", name);
        return false;
    }
    for (uint32_t i = 0; i < p->n_data; i++) { // the program would overwrite its own image
        const isa_data *d = &p->data[i];
        if (d->addr < prog_addr_ + prog_size_ && prog_addr_ < d->addr + d->size) {
            np_err_set(err, NP_ERR_INCONSISTENT, "%s: the image (%" PRIu64 " bytes) overlaps the "
                       "program's %s section at 0x%" PRIx64 " + %" PRIu64 " bytes", name,
                       prog_size_, d->name, d->addr, d->size);
            isa_program_free(p);
            return false;
        }
    }
    if (hw_system_load(plat_.sys_, idx_, p, err) != NP_OK) {
        isa_program_free(p);
        if (err->status == NP_ERR_NOMEM) { // the chip is EMPTY: the old program is let go
            isa_program_free(prog_);
            prog_ = nullptr;
            vis_ = NPU_STATE_EMPTY;
        }
        return false;
    }
    isa_program_free(prog_);
    prog_ = p;
    vis_ = NPU_STATE_LOADED;
    loaded_current_ = true;
    return true;
}

void npusim_chip::model_ended(hw_chip_state st)
{
    hw_chip_info info;
    hw_system_chip_info(plat_.sys_, idx_, &info);
    if ((st == HW_CHIP_FAULT || st == HW_CHIP_DEADLOCK) && err_.status == NP_OK)
        hw_system_chip_error(plat_.sys_, idx_, &err_);
    uint64_t now = npusim_platform::ps_of(sc_core::sc_time_stamp());
    vis_ = (unsigned)st;
    t_end_ps_ = info.state == st && info.t_end_ps ? info.t_end_ps : now;
    cycles_ = info.cycles;
    irq_pending_ = true;
    irq_ev_.notify(sc_core::SC_ZERO_TIME);
    end_ev_.notify(sc_core::SC_ZERO_TIME);
}

// ---- the HBM window's bytes --------------------------------------------------------------

uint8_t *npusim_chip::page(uint64_t pg, bool fill, np_err *err)
{
    auto it = pages_.find(pg);
    if (it != pages_.end())
        return it->second.get();
    uint8_t *p = new (std::nothrow) uint8_t[NPUSIM_CHIP_DMI_PAGE]();
    if (!p) {
        np_err_set(err, NP_ERR_NOMEM, "out of memory for chip %" PRIu32 "'s HBM window", idx_);
        return nullptr;
    }
    pages_[pg].reset(p);
    uint64_t at = pg * NPUSIM_CHIP_DMI_PAGE;
    if (fill && plat_.functional() &&
        hw_system_hbm_read(plat_.sys_, idx_, at, p,
                           std::min(NPUSIM_CHIP_DMI_PAGE, hbm_bytes() - at), err) != NP_OK) {
        pages_.erase(pg);
        return nullptr;
    }
    return p;
}

bool npusim_chip::flush_pages(np_err *err)
{
    if (!plat_.functional() || pages_.empty())
        return true;
    socket->invalidate_direct_mem_ptr(NPU_HBM_BASE, NPU_HBM_BASE + hbm_bytes() - 1);
    for (auto &kv : pages_) {
        uint64_t at = kv.first * NPUSIM_CHIP_DMI_PAGE;
        if (hw_system_hbm_write(plat_.sys_, idx_, at, kv.second.get(),
                                std::min(NPUSIM_CHIP_DMI_PAGE, hbm_bytes() - at), err) != NP_OK)
            return false;
    }
    pages_.clear();
    return true;
}

bool npusim_chip::hbm_access(uint64_t addr, uint8_t *p, uint64_t n, bool write, np_err *err)
{
    bool func = plat_.functional();
    while (n) {
        uint64_t pg = addr / NPUSIM_CHIP_DMI_PAGE, off = addr % NPUSIM_CHIP_DMI_PAGE;
        uint64_t k = std::min(n, NPUSIM_CHIP_DMI_PAGE - off);
        auto it = pages_.find(pg);
        if (func && it == pages_.end()) { // the model's bytes (no copy of this page out)
            np_status st = write ? hw_system_hbm_write(plat_.sys_, idx_, addr, p, k, err)
                                 : hw_system_hbm_read(plat_.sys_, idx_, addr, p, k, err);
            if (st != NP_OK)
                return false;
        } else if (write) {
            uint8_t *d = it != pages_.end() ? it->second.get() : page(pg, false, err);
            if (!d)
                return false;
            memcpy(d + off, p, k);
        } else if (it != pages_.end()) {
            memcpy(p, it->second.get() + off, k);
        } else {
            memset(p, 0, k); // timing mode: never written
        }
        addr += k, p += k, n -= k;
    }
    return true;
}
