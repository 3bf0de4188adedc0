/* arch_print.c — a resolved config as YAML text (readable, and loadable again) and as JSON,
 * every schema key with its unit, plus the chip's derived peak throughput and, when its area
 * section is set, its area by part (arch_area.h). */
#include <inttypes.h>
#include <string.h>

#include "arch.h"
#include "arch_area.h"

/* Derived figures shown after the keys; never read back. */
static const struct {
    const char *json_name, *label, *unit;
    arch_key rate;
} arch_derived[] = {
    {"chip_peak_tflops_bf16", "bf16", "TFLOP/s", ARCH_KEY_core_macs_per_pe_bf16},
    {"chip_peak_tflops_fp16", "fp16", "TFLOP/s", ARCH_KEY_core_macs_per_pe_fp16},
    {"chip_peak_tflops_fp32", "fp32", "TFLOP/s", ARCH_KEY_core_macs_per_pe_fp32},
    {"chip_peak_tops_int8", "int8", "TOP/s", ARCH_KEY_core_macs_per_pe_int8},
};
#define ARCH_N_DERIVED (sizeof arch_derived / sizeof arch_derived[0])

static double arch_derived_value(const arch_config *cfg, size_t i)
{
    return arch_chip_peak_flops(cfg, arch_get(cfg, &arch_keys[arch_derived[i].rate])) / 1e12;
}

json_t *arch_to_json(const arch_config *cfg)
{
    json_t *root = json_object();
    if (!root)
        return NULL;
    int bad = json_object_set_new(root, "name", json_string(cfg->name));
    json_t *sec[ARCH_SECTION_COUNT];
    for (int s = 0; s < ARCH_SECTION_COUNT; s++) {
        sec[s] = json_object();
        bad |= json_object_set_new(root, arch_sections[s].name, sec[s]);
    }
    for (size_t i = 0; i < ARCH_KEY_COUNT && !bad; i++) {
        const arch_key_info *k = &arch_keys[i];
        const void *p = (const char *)cfg + k->offset;
        json_t *v = NULL;
        switch (k->type) {
        case ARCH_TYPE_INT: v = json_integer(*(const int64_t *)p); break;
        case ARCH_TYPE_REAL: v = json_real(*(const double *)p); break;
        case ARCH_TYPE_SIZE: v = json_integer((json_int_t) * (const uint64_t *)p); break;
        case ARCH_TYPE_ENUM: {
            char text[64];
            v = json_string(arch_value_text(cfg, k, text, sizeof text));
            break;
        }
        case ARCH_TYPE_COUNT: break;
        }
        bad |= json_object_set_new(sec[k->section], k->name,
                                   json_pack("{s:o?, s:s}", "value", v, "unit", k->unit));
    }
    json_t *derived = json_object();
    bad |= json_object_set_new(root, "derived", derived);
    for (size_t i = 0; i < ARCH_N_DERIVED && !bad; i++)
        bad |= json_object_set_new(derived, arch_derived[i].json_name,
                                   json_pack("{s:f, s:s}", "value", arch_derived_value(cfg, i),
                                             "unit", arch_derived[i].unit));
    arch_area_figures area;
    arch_area_of(cfg, &area);
    if (area.modelled && !bad) {
        bad |= json_object_set_new(derived, "chip_area_mm2",
                                   json_pack("{s:f, s:s}", "value", area.chip_mm2, "unit", "mm²"));
        for (int i = 0; i < ARCH_AREA_PART_COUNT && !bad; i++) {
            char name[48];
            snprintf(name, sizeof name, "chip_area_%s_mm2", arch_area_part_names[i]);
            bad |= json_object_set_new(derived, name, json_pack("{s:f, s:s}", "value",
                                                                area.part_mm2[i], "unit", "mm²"));
        }
    }
    if (bad) {
        json_decref(root);
        return NULL;
    }
    return root;
}

/* name as a YAML double-quoted scalar */
static void arch_print_quoted(const char *s, FILE *out)
{
    fputc('"', out);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(out, "\\%c", c);
        else if (c < 0x20 || c == 0x7F)
            fprintf(out, "\\x%02X", c);
        else
            fputc(c, out);
    }
    fputc('"', out);
}

void arch_print(const arch_config *cfg, FILE *out)
{
    fputs("name: ", out);
    arch_print_quoted(cfg->name, out);
    fputc('\n', out);
    for (int s = 0; s < ARCH_SECTION_COUNT; s++) {
        fprintf(out, "\n%s:\n", arch_sections[s].name);
        for (size_t i = 0; i < ARCH_KEY_COUNT; i++) {
            const arch_key_info *k = &arch_keys[i];
            if ((int)k->section != s)
                continue;
            char text[64], line[128], unit[160];
            snprintf(line, sizeof line, "  %s: %s", k->name,
                     arch_value_text(cfg, k, text, sizeof text));
            if (k->type == ARCH_TYPE_ENUM) {
                size_t used = 0;
                unit[0] = '\0';
                for (size_t j = 0; j < k->enum_info->n && used < sizeof unit; j++)
                    used += (size_t)snprintf(unit + used, sizeof unit - used, "%s%s",
                                             j ? " | " : "", k->enum_info->values[j]);
            } else {
                snprintf(unit, sizeof unit, "%s", k->unit);
            }
            fprintf(out, "%-40s # %s\n", line, unit);
        }
    }
    fprintf(out, "\n# derived (not read back): peak of one chip, %" PRId64 " cores\n",
            cfg->chip.cores);
    for (size_t i = 0; i < ARCH_N_DERIVED; i++)
        fprintf(out, "#   %-5s %12.3f %s\n", arch_derived[i].label, arch_derived_value(cfg, i),
                arch_derived[i].unit);
    arch_area_figures area;
    arch_area_of(cfg, &area);
    if (!area.modelled)
        return;
    fprintf(out, "# derived (not read back): area of one chip, %.3f mm²\n", area.chip_mm2);
    for (int i = 0; i < ARCH_AREA_PART_COUNT; i++)
        if (area.part_mm2[i] > 0)
            fprintf(out, "#   %-6s %11.3f mm²  %5.1f %%\n", arch_area_part_names[i],
                    area.part_mm2[i], 100.0 * area.part_mm2[i] / area.chip_mm2);
}
