/* isa_arch.c — the architecture fingerprint of a config (kept apart from the rest of isa/ so
 * that the fuzz harnesses build without the config parser). */
#include "arch.h"
#include "isa_elf.h"
#include "isa_prog.h"

void isa_target_from_arch(const arch_config *cfg, isa_target *t)
{
    t->array_rows = (uint32_t)cfg->core.array_rows;
    t->array_cols = (uint32_t)cfg->core.array_cols;
    t->cores = (uint32_t)cfg->chip.cores;
    t->spad_bytes = cfg->core.sram_bytes;
    t->acc_bytes = cfg->core.acc_bytes;
    t->dtypes = (cfg->core.macs_per_pe_fp32 > 0 ? 1u << ISA_DTYPE_FP32 : 0) |
                (cfg->core.macs_per_pe_bf16 > 0 ? 1u << ISA_DTYPE_BF16 : 0) |
                (cfg->core.macs_per_pe_fp16 > 0 ? 1u << ISA_DTYPE_FP16 : 0) |
                (cfg->core.macs_per_pe_int8 > 0 ? 1u << ISA_DTYPE_INT8 : 0);
}

np_status isa_elf_load_arch(const char *path, const arch_config *cfg, isa_program **out,
                            np_err *err)
{
    isa_target t;
    isa_target_from_arch(cfg, &t);
    return isa_elf_load(path, &t, out, NULL, err);
}

np_status isa_elf_load_named_arch(const char *path, const char *arch, isa_program **out,
                                  isa_elf_info **info, np_err *err)
{
    isa_target t;
    if (arch) {
        arch_config cfg;
        if (arch_resolve(arch, NULL, 0, &cfg, err) != NP_OK)
            return err->status;
        isa_target_from_arch(&cfg, &t);
    }
    return isa_elf_load(path, arch ? &t : NULL, out, info, err);
}
