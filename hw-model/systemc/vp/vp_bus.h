// vp_bus.h — the example platform's interconnect: one target socket for the host, one initiator
// socket per chip; chip i's address window (its register block and HBM, npusim_regs.h) starts
// at i x VP_CHIP_STRIDE. It forwards b_transport, DMI requests and debug transport with the
// address made local to the chip, and DMI invalidations back with the global address. An
// address above the last chip's window is TLM_ADDRESS_ERROR_RESPONSE.
#ifndef NPUSIM_VP_BUS_H
#define NPUSIM_VP_BUS_H

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <systemc>
#include <tlm>
#include <tlm_utils/simple_initiator_socket.h>
#include <tlm_utils/simple_target_socket.h>

#include "npusim_regs.h"

constexpr uint64_t VP_CHIP_STRIDE = 1ull << 49; // > NPU_HBM_BASE + any HBM

class vp_bus : public sc_core::sc_module {
  public:
    using init_socket = tlm_utils::simple_initiator_socket_tagged<vp_bus>;
    tlm_utils::simple_target_socket<vp_bus> target;
    std::vector<std::unique_ptr<init_socket>> chips;

    vp_bus(sc_core::sc_module_name name, unsigned n_chips) : sc_module(name), target("target")
    {
        target.register_b_transport(this, &vp_bus::b_transport);
        target.register_get_direct_mem_ptr(this, &vp_bus::get_direct_mem_ptr);
        target.register_transport_dbg(this, &vp_bus::transport_dbg);
        for (unsigned i = 0; i < n_chips; i++) {
            chips.emplace_back(new init_socket(("chip" + std::to_string(i)).c_str()));
            chips.back()->register_invalidate_direct_mem_ptr(this, &vp_bus::invalidate, (int)i);
        }
    }

  private:
    // The chip addr falls in (its address made local), or -1.
    int decode(tlm::tlm_generic_payload &tr)
    {
        uint64_t i = tr.get_address() / VP_CHIP_STRIDE;
        if (i >= chips.size())
            return -1;
        tr.set_address(tr.get_address() % VP_CHIP_STRIDE);
        return (int)i;
    }

    void b_transport(tlm::tlm_generic_payload &tr, sc_core::sc_time &delay)
    {
        uint64_t a = tr.get_address();
        int i = decode(tr);
        if (i < 0) {
            tr.set_response_status(tlm::TLM_ADDRESS_ERROR_RESPONSE);
            return;
        }
        (*chips[i])->b_transport(tr, delay);
        tr.set_address(a);
    }

    bool get_direct_mem_ptr(tlm::tlm_generic_payload &tr, tlm::tlm_dmi &dmi)
    {
        uint64_t a = tr.get_address();
        int i = decode(tr);
        if (i < 0)
            return false;
        bool ok = (*chips[i])->get_direct_mem_ptr(tr, dmi);
        uint64_t base = (uint64_t)i * VP_CHIP_STRIDE;
        dmi.set_start_address(dmi.get_start_address() + base);
        dmi.set_end_address(dmi.get_end_address() + base);
        tr.set_address(a);
        return ok;
    }

    unsigned transport_dbg(tlm::tlm_generic_payload &tr)
    {
        uint64_t a = tr.get_address();
        int i = decode(tr);
        if (i < 0)
            return 0;
        unsigned n = (*chips[i])->transport_dbg(tr);
        tr.set_address(a);
        return n;
    }

    void invalidate(int i, sc_dt::uint64 start, sc_dt::uint64 end)
    {
        uint64_t base = (uint64_t)i * VP_CHIP_STRIDE;
        target->invalidate_direct_mem_ptr(start + base, end + base);
    }
};

#endif
