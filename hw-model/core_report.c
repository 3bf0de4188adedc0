/* core_report.c — the run report of core_sim_run as JSON and as text (field names are
 * documented in docs/hw-model.md and kept stable). */
#include <inttypes.h>

#include "core.h"

json_t *core_report_json(const core_report *r)
{
    json_t *units = json_array(), *kernels = json_array();
    if (!units || !kernels)
        goto fail;
    for (uint32_t i = 0; i < r->n_units; i++) {
        const core_unit_report *u = &r->units[i];
        if (json_array_append_new(units, json_pack("{s:s, s:I, s:I, s:I, s:I, s:I}", "name",
                                                   u->name, "busy_cycles", (json_int_t)u->busy_cycles,
                                                   "stall_cycles", (json_int_t)u->stall_cycles,
                                                   "idle_cycles", (json_int_t)u->idle_cycles,
                                                   "insns", (json_int_t)u->insns, "bytes",
                                                   (json_int_t)u->bytes)))
            goto fail;
    }
    for (uint32_t i = 0; i < r->n_kernels; i++) {
        const core_kernel_report *k = &r->kernels[i];
        if (json_array_append_new(kernels, json_pack("{s:s, s:I, s:I}", "name", k->name, "core",
                                                     (json_int_t)k->core, "cycles",
                                                     (json_int_t)k->cycles)))
            goto fail;
    }
    json_t *traffic = json_pack("{s:I, s:I, s:I, s:I, s:I, s:I}", "hbm_read_bytes",
                                (json_int_t)r->hbm_read_bytes, "hbm_write_bytes",
                                (json_int_t)r->hbm_write_bytes, "sram_read_bytes",
                                (json_int_t)r->sram_read_bytes, "sram_write_bytes",
                                (json_int_t)r->sram_write_bytes, "acc_read_bytes",
                                (json_int_t)r->acc_read_bytes, "acc_write_bytes",
                                (json_int_t)r->acc_write_bytes);
    if (!traffic)
        goto fail;
    return json_pack("{s:I, s:I, s:o, s:o, s:o}", "total_cycles", (json_int_t)r->total_cycles,
                     "total_ps", (json_int_t)r->total_ps, "units", units, "kernels", kernels,
                     "traffic", traffic);
fail:
    json_decref(units);
    json_decref(kernels);
    return NULL;
}

void core_report_print(const core_report *r, FILE *out)
{
    fprintf(out, "total: %" PRIu64 " cycles (%" PRIu64 " ps)\n\n", r->total_cycles, r->total_ps);
    fprintf(out, "%-14s %12s %12s %12s %8s %14s\n", "unit", "busy cycles", "stall cycles",
            "idle cycles", "insns", "bytes");
    for (uint32_t i = 0; i < r->n_units; i++) {
        const core_unit_report *u = &r->units[i];
        fprintf(out, "%-14s %12" PRIu64 " %12" PRIu64 " %12" PRIu64 " %8" PRIu64 " %14" PRIu64 "\n",
                u->name, u->busy_cycles, u->stall_cycles, u->idle_cycles, u->insns, u->bytes);
    }
    fprintf(out, "\ntraffic: HBM read %" PRIu64 " B, HBM write %" PRIu64 " B, scratchpad read %" PRIu64
            " B, scratchpad write %" PRIu64 " B, accumulator read %" PRIu64 " B, write %" PRIu64 " B\n",
            r->hbm_read_bytes, r->hbm_write_bytes, r->sram_read_bytes, r->sram_write_bytes,
            r->acc_read_bytes, r->acc_write_bytes);
    if (r->n_kernels) {
        fprintf(out, "\n%-24s %6s %12s\n", "kernel", "core", "cycles");
        for (uint32_t i = 0; i < r->n_kernels; i++)
            fprintf(out, "%-24s %6" PRIu32 " %12" PRIu64 "\n", r->kernels[i].name,
                    r->kernels[i].core, r->kernels[i].cycles);
    }
}
