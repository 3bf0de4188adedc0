/* arch_schema.c — the key, section and enum tables built from arch_schema.def, lookups by
 * name, defaults, and generic access to a key's field. */
#include <assert.h>
#include <string.h>

#include "arch.h"
#include "suggest.h"

#define ARCH_NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* Enum spellings and help, one array pair and one arch_enum_info per enum type. */
#define ARCH_V(NAME, text, help) [ARCH_##NAME] = text
#define ARCH_ENUM(type, TYPE, help, ...)                                                      \
    static const char *const arch_##type##_values[] = {__VA_ARGS__};                        \
    static_assert(ARCH_NELEM(arch_##type##_values) == ARCH_##TYPE##_COUNT,                  \
                  "every " #type " value has a spelling");
#include "arch_schema.def"
#undef ARCH_V

#define ARCH_V(NAME, text, help) [ARCH_##NAME] = help
#define ARCH_ENUM(type, TYPE, help, ...)                                                      \
    static const char *const arch_##type##_help[] = {__VA_ARGS__};                          \
    static_assert(ARCH_NELEM(arch_##type##_help) == ARCH_##TYPE##_COUNT,                    \
                  "every " #type " value has help");                                        \
    static const arch_enum_info arch_enum_##type = {#type, help, arch_##type##_values,        \
                                                    arch_##type##_help, ARCH_##TYPE##_COUNT};
#include "arch_schema.def"
#undef ARCH_V

const arch_section_info arch_sections[ARCH_SECTION_COUNT] = {
#define ARCH_SECTION(sec, help) [ARCH_SECTION_##sec] = {#sec, help},
#include "arch_schema.def"
};
static_assert(ARCH_SECTION_COUNT == 5, "a new section needs its struct in arch.h and arch_config");

#define ARCH_TINFO_INT ARCH_TYPE_INT, NULL
#define ARCH_TINFO_REAL ARCH_TYPE_REAL, NULL
#define ARCH_TINFO_SIZE ARCH_TYPE_SIZE, NULL
#define ARCH_TINFO_ENUM(type) ARCH_TYPE_ENUM, &arch_enum_##type

const arch_key_info arch_keys[ARCH_KEY_COUNT] = {
#define ARCH_KEY(sec, key, type, unit, min, max, def, help)                                   \
    [ARCH_KEY_##sec##_##key] = {ARCH_SECTION_##sec, #sec, #key, #sec "." #key,               \
                                ARCH_TINFO_##type, unit, min, max, (double)(def), help,      \
                                offsetof(arch_config, sec.key)},
#include "arch_schema.def"
};

static_assert(ARCH_NELEM(arch_keys) == ARCH_KEY_COUNT, "one arch_keys entry per schema row");

/* The C field type matches the schema type (sizes asserted per type). */
#define ARCH_KEY(sec, key, type, unit, min, max, def, help)                                   \
    static_assert(sizeof(((arch_config *)0)->sec.key) == sizeof(ARCH_CTYPE_##type),          \
                  #sec "." #key " has the C type of its schema type");
#include "arch_schema.def"

const arch_key_info *arch_key_lookup(const char *section, const char *key)
{
    for (size_t i = 0; i < ARCH_KEY_COUNT; i++)
        if (strcmp(arch_keys[i].section_name, section) == 0 && strcmp(arch_keys[i].name, key) == 0)
            return &arch_keys[i];
    return NULL;
}

const arch_key_info *arch_key_find(const char *full_name)
{
    for (size_t i = 0; i < ARCH_KEY_COUNT; i++)
        if (strcmp(arch_keys[i].full_name, full_name) == 0)
            return &arch_keys[i];
    return NULL;
}

const arch_key_info *arch_key_suggest(const char *name, const char *prefer)
{
    const char *dot = strchr(name, '.');
    const char *bare = dot ? dot + 1 : name;
    size_t len = strlen(bare), max_dist = len / 3 > 2 ? len / 3 : 2;
    const arch_key_info *best = NULL;
    size_t best_d = max_dist + 1;
    for (int pass = 0; pass < 2; pass++) /* the preferred section first: it wins ties */
        for (size_t i = 0; i < ARCH_KEY_COUNT; i++) {
            const arch_key_info *k = &arch_keys[i];
            bool preferred = prefer && strcmp(k->section_name, prefer) == 0;
            if (preferred != (pass == 0))
                continue;
            size_t d = np_edit_distance(bare, k->name);
            if (d < best_d) {
                best_d = d;
                best = k;
            }
        }
    /* else the one key (of the preferred section, then of any) that is the name with its
     * unit: clock -> clock_ghz, sram -> sram_bytes */
    for (int pass = 0; !best && len && pass < 2; pass++) {
        const arch_key_info *only = NULL;
        int n = 0;
        for (size_t i = 0; i < ARCH_KEY_COUNT; i++) {
            const arch_key_info *k = &arch_keys[i];
            if (pass == 0 && !(prefer && strcmp(k->section_name, prefer) == 0))
                continue;
            if (strncmp(k->name, bare, len) == 0 && k->name[len] == '_')
                only = k, n++;
        }
        if (n == 1)
            best = only;
    }
    return best;
}

static void *arch_field(arch_config *cfg, const arch_key_info *k)
{
    return (char *)cfg + k->offset;
}

static const void *arch_cfield(const arch_config *cfg, const arch_key_info *k)
{
    return (const char *)cfg + k->offset;
}

double arch_get(const arch_config *cfg, const arch_key_info *k)
{
    const void *p = arch_cfield(cfg, k);
    switch (k->type) {
    case ARCH_TYPE_INT: return (double)*(const int64_t *)p;
    case ARCH_TYPE_REAL: return *(const double *)p;
    case ARCH_TYPE_SIZE: return (double)*(const uint64_t *)p;
    case ARCH_TYPE_ENUM: return (double)*(const int *)p;
    case ARCH_TYPE_COUNT: break;
    }
    assert(!"bad arch_type");
    return 0;
}

void arch_value_store(arch_config *cfg, const arch_key_info *k, arch_value v)
{
    void *p = arch_field(cfg, k);
    switch (k->type) {
    case ARCH_TYPE_INT: *(int64_t *)p = v.i; return;
    case ARCH_TYPE_REAL: *(double *)p = v.r; return;
    case ARCH_TYPE_SIZE: *(uint64_t *)p = v.u; return;
    case ARCH_TYPE_ENUM: *(int *)p = v.e; return;
    case ARCH_TYPE_COUNT: break;
    }
    assert(!"bad arch_type");
}

/* Enum fields are stored through int *: the C enums must be int-sized. */
#define ARCH_V(NAME, text, help) ARCH_##NAME
#define ARCH_ENUM(type, TYPE, help, ...)                                                      \
    static_assert(sizeof(arch_##type) == sizeof(int), "arch_" #type " is stored as an int");
#include "arch_schema.def"
#undef ARCH_V

void arch_defaults(arch_config *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "default");
    for (size_t i = 0; i < ARCH_KEY_COUNT; i++) {
        const arch_key_info *k = &arch_keys[i];
        arch_value v;
        switch (k->type) {
        case ARCH_TYPE_INT: v.i = (int64_t)k->def; break;
        case ARCH_TYPE_REAL: v.r = k->def; break;
        case ARCH_TYPE_SIZE: v.u = (uint64_t)k->def; break;
        case ARCH_TYPE_ENUM: v.e = (int)k->def; break;
        default: assert(!"bad arch_type"); v.i = 0; break;
        }
        arch_value_store(out, k, v);
    }
}

double arch_chip_peak_flops(const arch_config *cfg, double macs_per_pe)
{
    return 2.0 * (double)cfg->core.array_rows * (double)cfg->core.array_cols * macs_per_pe *
           cfg->core.clock_ghz * 1e9 * (double)cfg->chip.cores;
}
