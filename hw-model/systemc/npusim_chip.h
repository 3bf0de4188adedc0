// npusim_chip.h — npusim's NPU chips as SystemC TLM-2.0 targets, for virtual platforms.
//
// An npusim_platform owns the model: one architecture config, one event queue and one
// hw_system (hw-model/hw_system.h) of n chips; each chip is an npusim_chip, a module with a
// target socket (the register block and the HBM window of npusim_regs.h) and an interrupt
// output. Chip-to-chip messages (comm.send / comm.recv naming another chip) travel npusim's
// network model between them, since every chip's model lives on the platform's one queue.
//
// Time. The platform's process runs the model ahead of SystemC time, a quantum at a time
// (loosely timed, tlm_global_quantum unless npusim_platform_opts.quantum says otherwise): it
// dispatches the model's events up to the next quantum boundary, then waits in SystemC (its
// tlm_quantumkeeper's local time) until SystemC time reaches the model's. When a chip's program
// ends, the model stops at that instant, SystemC waits exactly until it, and the chip raises its
// interrupt then: at the interrupt sc_time_stamp() equals the model's end time, to the ps.
// A START written at SystemC time t (the transaction's sc_time_stamp() + its annotated delay)
// starts the program at the first common edge of the chip's core and NoC clocks at or after t
// (every 1 ns at 1 GHz, 20 ns at 1.05 GHz: where the clocks stand as at time 0, so the program
// takes exactly the time `npusim sim` gives it), or after the model's time if another running
// chip has taken the model further (at most one quantum ahead). A deadlock is seen when the model
// runs out of events; the interrupt then comes at the end of that quantum.
//
// Functional mode (npusim_platform_opts.functional) moves real bytes: what an initiator writes
// into the HBM window is what the program reads, and what the program writes is read back.
// In timing mode the model moves no data; the window then keeps the initiator's bytes for the
// chip itself (the ELF image it loads) and the program's outputs are not computed.
//
// DMI. The HBM window grants DMI pointers page by page (NPUSIM_CHIP_DMI_PAGE bytes). In
// functional mode a page granted while the chip is idle is a copy of the model's page; every
// LOAD or START writes such copies back into the model and invalidates every DMI pointer of the
// window first, and no DMI is granted while a program runs (b_transport reaches the model's
// bytes directly then). In timing mode the window's pages are the chip's own and stay valid.
//
//   arch_config cfg;                     // arch_resolve("tiny", NULL, 0, &cfg, &err)
//   npusim_platform plat("npu", cfg, 2, npusim_platform_opts{});
//   host.socket.bind(plat.chip(0).socket);   // or through a bus
//   plat.chip(0).irq.bind(irq0);         // sc_signal<bool>
//
// Errors: the constructors throw npusim_error (a std::runtime_error carrying the np_status)
// when the model cannot be built; nothing after elaboration throws or aborts.
#ifndef NPUSIM_CHIP_H
#define NPUSIM_CHIP_H

#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <systemc>
#include <tlm>
#include <tlm_utils/simple_target_socket.h>
#include <tlm_utils/tlm_quantumkeeper.h>

extern "C" {
#include "arch.h"
#include "err.h"
#include "evq.h"
#include "hw_system.h"
#include "isa_prog.h"
}

#include "npusim_regs.h"

// A failure while building the platform (the model's own error, with its class).
class npusim_error : public std::runtime_error {
  public:
    npusim_error(const np_err &e) : std::runtime_error(e.msg), status(e.status) {}
    np_status status;
};

struct npusim_platform_opts {
    bool functional = false;       // move real bytes (core_func.h); else timing only
    sc_core::sc_time quantum = sc_core::SC_ZERO_TIME; // how far the model may run ahead of
                                                      // SystemC; 0: tlm_global_quantum, or 1 us
                                                      // when that is 0 too
    sc_core::sc_time reg_latency = sc_core::sc_time(10, sc_core::SC_NS); // per register access
    std::vector<core_group> groups; // the group table of SPMD programs (hw_system_opts.groups)
};

class npusim_platform;

// Bytes per DMI grant of the HBM window.
constexpr uint64_t NPUSIM_CHIP_DMI_PAGE = 64 * 1024;

class npusim_chip : public sc_core::sc_module {
  public:
    tlm_utils::simple_target_socket<npusim_chip> socket;
    sc_core::sc_out<bool> irq; // high while IRQ_STATUS and IRQ_ENABLE bit 0 are both set

    uint32_t index() const { return idx_; }
    uint64_t hbm_bytes() const;
    // What STATUS bits 0-7 read now (an NPU_STATE_*).
    unsigned state() const { return vis_; }
    // Notified when a program ends (at the time of its end), whether or not the interrupt
    // is enabled.
    const sc_core::sc_event &end_event() const { return end_ev_; }

  private:
    friend class npusim_platform;
    npusim_chip(sc_core::sc_module_name name, npusim_platform &plat, uint32_t idx);
    ~npusim_chip() override;

    void b_transport(tlm::tlm_generic_payload &tr, sc_core::sc_time &delay);
    bool get_direct_mem_ptr(tlm::tlm_generic_payload &tr, tlm::tlm_dmi &dmi);
    unsigned transport_dbg(tlm::tlm_generic_payload &tr);

    tlm::tlm_response_status reg_read(uint64_t off, uint8_t *p, unsigned len);
    tlm::tlm_response_status reg_write(uint64_t off, const uint8_t *p, unsigned len,
                                       const sc_core::sc_time &delay);
    uint64_t reg_value(uint64_t reg) const;
    void command(uint64_t ctrl, uint64_t t_ps);
    bool load(np_err *err);
    void refuse(const np_err &e);
    void model_ended(hw_chip_state st); // from the platform, at the end's SystemC time
    void irq_update();                  // the one writer of irq (an SC_METHOD)

    // The HBM window's bytes (see the header comment).
    bool hbm_access(uint64_t addr, uint8_t *p, uint64_t n, bool write, np_err *err);
    uint8_t *page(uint64_t pg, bool fill, np_err *err);
    bool flush_pages(np_err *err);

    npusim_platform &plat_;
    uint32_t idx_;
    unsigned vis_ = NPU_STATE_EMPTY; // the state as SystemC sees it
    bool refused_ = false, irq_pending_ = false, irq_enable_ = false;
    bool loaded_current_ = false; // the program loaded is the one PROG_ADDR/PROG_SIZE name
    uint64_t prog_addr_ = 0, prog_size_ = 0;
    uint64_t t_start_ps_ = 0, t_end_ps_ = 0, cycles_ = 0;
    np_err err_{};
    isa_program *prog_ = nullptr; // the program loaded (the model borrows it)
    std::map<uint64_t, std::unique_ptr<uint8_t[]>> pages_;
    sc_core::sc_event irq_ev_, end_ev_;
};

class npusim_platform : public sc_core::sc_module {
  public:
    // n_chips chips ("chip0", ...) of cfg (copied). Throws npusim_error.
    npusim_platform(sc_core::sc_module_name name, const arch_config &cfg, uint32_t n_chips,
                    const npusim_platform_opts &opts);
    ~npusim_platform() override;

    npusim_chip &chip(uint32_t i) { return *chips_.at(i); }
    uint32_t n_chips() const { return (uint32_t)chips_.size(); }
    const arch_config &config() const { return cfg_; }
    bool functional() const { return opts_.functional; }
    // The model, for queries (hw_system_chip_info, hw_system_report, ...): the platform owns it
    // and runs its queue; do not start, load or free through it.
    hw_system *system() { return sys_; }
    uint64_t model_now_ps() const { return evq_now(q_); }
    uint64_t quantum_ps() const;

    // SystemC time <-> ps (the model's unit).
    static uint64_t ps_of(const sc_core::sc_time &t);
    static sc_core::sc_time time_of_ps(uint64_t ps);

  private:
    friend class npusim_chip;
    void run();     // the SC_METHOD that runs the model in step with SystemC time
    bool start_at(npusim_chip &c, uint64_t t_ps, np_err *err);
    static void on_end(void *ctx, hw_system *sys, uint32_t chip, hw_chip_state st);
    static void start_ev(evq *q, void *ctx, uint64_t arg);

    arch_config cfg_;
    npusim_platform_opts opts_;
    evq *q_ = nullptr;
    hw_system *sys_ = nullptr;
    std::vector<npusim_chip *> chips_; // children (owned; deleted in the destructor)
    std::vector<uint32_t> ended_;      // chips whose program ended in the model, not yet shown
    std::vector<hw_chip_state> ended_state_;
    uint64_t start_granule_ps_ = 1; // programs start at multiples of this (the chip's clocks
                                    // then have their edges where they had them at time 0)
    np_err broken_{}; // the model ran out of host memory inside an event: nothing runs again
    sc_core::sc_event wake_;
    tlm_utils::tlm_quantumkeeper qk_; // the model's lead over SystemC time
    uint64_t quantum_ = 1;            // ps
};

#endif
