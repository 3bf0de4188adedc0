/* npusim_regs.h — the register map of an npusim chip as a TLM-2.0 target (npusim_chip.h), for
 * the software that drives it (C or C++; nothing here depends on SystemC).
 *
 * A chip's target socket decodes addresses local to the chip:
 *
 *   [0, NPU_REG_BLOCK_BYTES)                       the register block below
 *   [NPU_HBM_BASE, NPU_HBM_BASE + chip.hbm_bytes)  the chip's HBM (byte-addressed memory; DMI)
 *
 * Registers are 64 bits wide, little-endian, at 8-byte offsets; an access is 4 or 8 bytes,
 * aligned to its size (a 4-byte access reaches one half). The error message window is read-only
 * memory of any aligned size up to its length. Anything else in the block is unmapped.
 *
 *   offset  name        access  meaning
 *   0x000   ID          RO      NPU_ID_VALUE ("NPUSIM", then the register map's version)
 *   0x008   PROG_ADDR   RW      HBM address of the program's ELF image (as `npusim asm` writes)
 *   0x010   PROG_SIZE   RW      its size in bytes
 *   0x018   CTRL        WO      NPU_CTRL_LOAD: read the ELF image and load it (its .data goes
 *                               into HBM now); NPU_CTRL_START: start the loaded program (loading
 *                               it first if CTRL_LOAD was not written since PROG_* last changed).
 *                               Reads as 0. A command the chip cannot take (it is running, it
 *                               faulted, the image is bad) is refused: STATUS.REFUSED and the
 *                               ERR_* registers say why, nothing else changes.
 *   0x020   STATUS      RO      bits 0-7: NPU_STATE_*; bit 8 REFUSED (the last command was
 *                               refused); bit 9 IRQ (the interrupt is pending)
 *   0x028   CYCLES      RO      core cycles of the program: so far while running (at the
 *                               current SystemC time), from start to end once it ended
 *   0x030   T_START     RO      when the program started (ps of SystemC time)
 *   0x038   T_END       RO      when it ended (ps; the interrupt is raised then); 0 while running
 *   0x040   ERR_CODE    RO      why it failed or why the last command was refused: an np_status
 *                               (base/err.def; 0 none)
 *   0x048   ERR_LEN     RO      bytes of the message in ERR_MSG (no NUL)
 *   0x050   IRQ_ENABLE  RW      bit 0: raise the interrupt output when a program ends
 *   0x058   IRQ_STATUS  RW1C    bit 0: a program ended (done, deadlock or fault); write 1 to clear
 *   0x400   ERR_MSG     RO      NPU_ERR_MSG_BYTES of message text (the model's own words: the
 *                               fault, or every waiting unit of a deadlock)
 *
 * Transactions the chip refuses (the response status; the platform runs on): an address in no
 * window, or an unmapped or misaligned register offset: TLM_ADDRESS_ERROR_RESPONSE; a write to
 * a read-only register: TLM_COMMAND_ERROR_RESPONSE; a register access of another size, or a
 * streaming width below the length: TLM_BURST_ERROR_RESPONSE; byte enables:
 * TLM_BYTE_ENABLE_ERROR_RESPONSE.
 */
#ifndef NPUSIM_REGS_H
#define NPUSIM_REGS_H

#define NPU_REG_BLOCK_BYTES 0x1000u
#define NPU_HBM_BASE (1ull << 48) /* above any HBM a config can describe (ISA_HBM_LIMIT) */

#define NPU_REG_ID 0x000u
#define NPU_REG_PROG_ADDR 0x008u
#define NPU_REG_PROG_SIZE 0x010u
#define NPU_REG_CTRL 0x018u
#define NPU_REG_STATUS 0x020u
#define NPU_REG_CYCLES 0x028u
#define NPU_REG_T_START 0x030u
#define NPU_REG_T_END 0x038u
#define NPU_REG_ERR_CODE 0x040u
#define NPU_REG_ERR_LEN 0x048u
#define NPU_REG_IRQ_ENABLE 0x050u
#define NPU_REG_IRQ_STATUS 0x058u
#define NPU_REG_ERR_MSG 0x400u
#define NPU_ERR_MSG_BYTES 0x400u

#define NPU_ID_VALUE 0x4e505553494d0001ull /* "NPUSIM" in the top 6 bytes, map version 1 */

#define NPU_CTRL_LOAD 1u
#define NPU_CTRL_START 2u

/* STATUS bits 0-7: the chip's state (the values of hw_chip_state, hw-model/hw_system.h). */
#define NPU_STATE_EMPTY 0u    /* no program loaded */
#define NPU_STATE_LOADED 1u   /* loaded, not started */
#define NPU_STATE_RUNNING 2u
#define NPU_STATE_DONE 3u
#define NPU_STATE_DEADLOCK 4u /* it could never finish: ERR_MSG names every waiting unit */
#define NPU_STATE_FAULT 5u    /* it faulted: ERR_MSG says where; the chip takes no new program */
#define NPU_STATUS_STATE_MASK 0xffu
#define NPU_STATUS_REFUSED (1u << 8)
#define NPU_STATUS_IRQ (1u << 9)

#endif
