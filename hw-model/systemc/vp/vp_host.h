// vp_host.h — the example virtual platform (npusim-vp): a host initiator that drives npusim
// chips (npusim_chip.h) the way a driver would, only through TLM transactions and interrupts,
// and vp_system, the platform put together (host -> bus -> chips, one interrupt line per chip).
//
// The host's thread, for a job of one ELF image per chip (as `npusim asm` or the compiler
// writes them):
//   1. reads the symbol table of each image it has inputs or outputs for (the driver's
//      knowledge of the program's buffers), writes each image into the top of its chip's HBM
//      (through DMI when the chip grants it, else b_transport), then PROG_ADDR, PROG_SIZE,
//      IRQ_ENABLE and CTRL_LOAD;
//   2. writes the inputs into their data symbols;
//   3. starts every chip at one instant (the same annotated time), and waits for the
//      interrupts, noting sc_time_stamp() at each and reading STATUS, T_START, T_END, CYCLES,
//      and ERR_MSG when the program failed;
//   4. reads the outputs back and compares them with what was expected; stops the simulation.
// Every step's failure is a value in vp_result, never an abort.
#ifndef NPUSIM_VP_HOST_H
#define NPUSIM_VP_HOST_H

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <systemc>
#include <tlm>
#include <tlm_utils/simple_initiator_socket.h>
#include <tlm_utils/tlm_quantumkeeper.h>

#include "npusim_chip.h"
#include "vp_bus.h"

// Bytes for (or from) one data symbol of one chip's program.
struct vp_io {
    uint32_t chip = 0;
    std::string symbol;
    std::vector<uint8_t> bytes; // inputs and expected outputs: given; dumps: filled
    std::string name;           // where the bytes come from or go (messages)
};

struct vp_job {
    std::vector<std::vector<uint8_t>> images; // chip i runs images[i]
    std::vector<std::string> image_names;     // for messages
    std::vector<vp_io> inputs;                // written before the start
    std::vector<vp_io> expects;               // compared byte for byte after the end
    std::vector<vp_io> dumps;                 // read back after the end
};

struct vp_chip_result {
    unsigned state = NPU_STATE_EMPTY; // STATUS bits 0-7 after the interrupt
    uint64_t irq_ps = 0;              // sc_time_stamp() when the interrupt was seen
    uint64_t start_ps = 0, end_ps = 0, cycles = 0; // T_START, T_END, CYCLES
    std::string error;                // ERR_MSG of a failed program
};

struct vp_output {
    uint32_t chip;
    std::string symbol, name;
    uint64_t bytes;
    bool match;
    std::string diff; // where it first differs
};

struct vp_result {
    bool finished = false;             // the host reached the end of its job
    np_err err{};                      // the first failure (bad input, a program, an output)
    uint64_t start_ps = 0;             // the instant every chip was started
    std::vector<vp_chip_result> chips;
    std::vector<vp_output> outputs;    // one per expect
    std::vector<vp_io> dumps;          // the job's dumps, their bytes read back
    uint64_t dmi_bytes = 0, bt_bytes = 0; // image and I/O bytes moved by DMI / by b_transport
};

class vp_host : public sc_core::sc_module {
  public:
    tlm_utils::simple_initiator_socket<vp_host> socket;
    sc_core::sc_vector<sc_core::sc_in<bool>> irq;
    vp_result result;

    vp_host(sc_core::sc_module_name name, const arch_config &cfg, vp_job job);

  private:
    void main();
    bool run_job();
    bool prepare(uint32_t chip);
    const isa_symbol *symbol(uint32_t chip, const std::string &name, const char *what);
    bool mem(uint32_t chip, uint64_t addr, uint8_t *p, uint64_t n, bool write);
    bool reg_write(uint32_t chip, uint64_t reg, uint64_t v);
    bool reg_read(uint32_t chip, uint64_t reg, uint64_t *v);
    bool transact(tlm::tlm_command cmd, uint64_t addr, uint8_t *p, unsigned n);
    void invalidate(sc_dt::uint64 start, sc_dt::uint64 end);

    const arch_config &cfg_;
    vp_job job_;
    std::vector<isa_program *> progs_;
    std::vector<tlm::tlm_dmi> dmi_;
    tlm_utils::tlm_quantumkeeper qk_;
};

// The example platform: host, bus, npusim_platform with one chip per image, interrupt wires.
struct vp_system {
    npusim_platform plat;
    vp_bus bus;
    vp_host host;
    sc_core::sc_vector<sc_core::sc_signal<bool>> irq;

    vp_system(const arch_config &cfg, const npusim_platform_opts &opts, vp_job job);
};

#endif
