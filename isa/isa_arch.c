/* isa_arch.c — the architecture fingerprint of a config (kept apart from the rest of isa/ so
 * that the fuzz harnesses build without the config parser). */
#include <inttypes.h>

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

/* NP_ERR_RANGE naming the file unless every data section of p lies inside cfg's HBM: a
 * section past its end would otherwise be dropped at load, its symbols reading back 0. */
static np_status isa_data_fits(const char *path, const isa_program *p, const arch_config *cfg,
                               np_err *err)
{
    uint64_t hbm = cfg->chip.hbm_bytes;
    for (uint32_t i = 0; i < p->n_data; i++) {
        const isa_data *d = &p->data[i];
        if (d->addr > hbm || d->size > hbm - d->addr)
            return np_err_at(err, NP_ERR_RANGE, path, 0, 0,
                             "%s at 0x%" PRIx64 " + %" PRIu64 " bytes ends past the HBM of %s "
                             "(%" PRIu64 " bytes)", d->name, d->addr, d->size, cfg->name, hbm);
    }
    return NP_OK;
}

np_status isa_elf_load_arch(const char *path, const arch_config *cfg, isa_program **out,
                            np_err *err)
{
    isa_target t;
    isa_target_from_arch(cfg, &t);
    if (isa_elf_load(path, &t, out, NULL, err) != NP_OK)
        return err->status;
    if (isa_data_fits(path, *out, cfg, err) != NP_OK) {
        isa_program_free(*out);
        *out = NULL;
        return err->status;
    }
    return NP_OK;
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
        if (isa_elf_load(path, &t, out, info, err) != NP_OK)
            return err->status;
        if (isa_data_fits(path, *out, &cfg, err) != NP_OK) {
            isa_program_free(*out);
            *out = NULL;
            if (info) {
                isa_elf_info_free(*info);
                *info = NULL;
            }
            return err->status;
        }
        return NP_OK;
    }
    return isa_elf_load(path, NULL, out, info, err);
}
