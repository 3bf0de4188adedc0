/* arch.h — the architecture configuration: what the simulated system is made of.
 *
 * An arch_config describes one system: its cores (systolic array, vector unit, SRAMs), each
 * chip (cores on a mesh NoC, off-chip memory) and the chips' network. Every key is defined
 * once, in arch_schema.def; the structs below, the YAML and --set parsers, the defaults, the
 * range and consistency checks, the text/JSON output and docs/config.md all come from it.
 *
 * Where a config comes from, in order: the defaults (arch_defaults), then a YAML file (a
 * preset name or a path), then `--set section.key=value` overrides, then arch_validate. The
 * usual entry point does all of it:
 *
 *   arch_config cfg;
 *   np_err e = {0};
 *   const char *sets[] = {"core.array_rows=256"};
 *   if (arch_resolve("tpu-pod", sets, 1, &cfg, &e) != NP_OK)
 *       return e.status;                     // e: "file:line:col: message" via np_err_format
 *   uint64_t peak = cfg.core.array_rows * cfg.core.array_cols;
 *
 * Errors are values (err.h): parse errors carry the file, line and column of the offending
 * key or value; consistency errors (NP_ERR_INCONSISTENT) carry the position of a key the user
 * wrote. Nothing here prints except the functions whose job is output (arch_print,
 * arch_write_markdown), and nothing exits.
 */
#ifndef NPUSIM_ARCH_H
#define NPUSIM_ARCH_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "err.h"

/* ---- Types generated from the schema -------------------------------------------------------- */

/* The enumerated value types, e.g. arch_dataflow { ARCH_DATAFLOW_OS, ..., ARCH_DATAFLOW_COUNT }. */
#define ARCH_V(NAME, text, help) ARCH_##NAME
#define ARCH_ENUM(type, TYPE, help, ...) typedef enum arch_##type { __VA_ARGS__, ARCH_##TYPE##_COUNT } arch_##type;
#include "arch_schema.def"
#undef ARCH_V

/* C type of each schema type. */
#define ARCH_CTYPE_INT int64_t
#define ARCH_CTYPE_REAL double
#define ARCH_CTYPE_SIZE uint64_t
#define ARCH_CTYPE_ENUM(type) arch_##type
#define ARCH_FIELD_(type, key) ARCH_CTYPE_##type key;

/* One struct per section, its fields in schema order (ARCH_IN_<sec> picks the section's rows). */
#define ARCH_KEY(sec, key, type, unit, min, max, def, help) ARCH_IN_##sec(ARCH_FIELD_(type, key))
#define ARCH_IN_core(field) field
#define ARCH_IN_chip(field)
#define ARCH_IN_system(field)
#define ARCH_IN_energy(field)
#define ARCH_IN_area(field)
typedef struct arch_core {
#include "arch_schema.def"
} arch_core;
#undef ARCH_IN_core
#undef ARCH_IN_chip
#undef ARCH_IN_system
#undef ARCH_IN_energy
#undef ARCH_IN_area

#define ARCH_KEY(sec, key, type, unit, min, max, def, help) ARCH_IN_##sec(ARCH_FIELD_(type, key))
#define ARCH_IN_core(field)
#define ARCH_IN_chip(field) field
#define ARCH_IN_system(field)
#define ARCH_IN_energy(field)
#define ARCH_IN_area(field)
typedef struct arch_chip {
#include "arch_schema.def"
} arch_chip;
#undef ARCH_IN_core
#undef ARCH_IN_chip
#undef ARCH_IN_system
#undef ARCH_IN_energy
#undef ARCH_IN_area

#define ARCH_KEY(sec, key, type, unit, min, max, def, help) ARCH_IN_##sec(ARCH_FIELD_(type, key))
#define ARCH_IN_core(field)
#define ARCH_IN_chip(field)
#define ARCH_IN_system(field) field
#define ARCH_IN_energy(field)
#define ARCH_IN_area(field)
typedef struct arch_system {
#include "arch_schema.def"
} arch_system;
#undef ARCH_IN_core
#undef ARCH_IN_chip
#undef ARCH_IN_system
#undef ARCH_IN_energy
#undef ARCH_IN_area

#define ARCH_KEY(sec, key, type, unit, min, max, def, help) ARCH_IN_##sec(ARCH_FIELD_(type, key))
#define ARCH_IN_core(field)
#define ARCH_IN_chip(field)
#define ARCH_IN_system(field)
#define ARCH_IN_energy(field) field
#define ARCH_IN_area(field)
typedef struct arch_energy {
#include "arch_schema.def"
} arch_energy;
#undef ARCH_IN_core
#undef ARCH_IN_chip
#undef ARCH_IN_system
#undef ARCH_IN_energy
#undef ARCH_IN_area

#define ARCH_KEY(sec, key, type, unit, min, max, def, help) ARCH_IN_##sec(ARCH_FIELD_(type, key))
#define ARCH_IN_core(field)
#define ARCH_IN_chip(field)
#define ARCH_IN_system(field)
#define ARCH_IN_energy(field)
#define ARCH_IN_area(field) field
typedef struct arch_area {
#include "arch_schema.def"
} arch_area;
#undef ARCH_IN_core
#undef ARCH_IN_chip
#undef ARCH_IN_system
#undef ARCH_IN_energy
#undef ARCH_IN_area
#undef ARCH_FIELD_

typedef enum arch_section {
#define ARCH_SECTION(sec, help) ARCH_SECTION_##sec,
#include "arch_schema.def"
    ARCH_SECTION_COUNT
} arch_section;

/* Index of every key in schema order: ARCH_KEY_core_array_rows, ... */
typedef enum arch_key {
#define ARCH_KEY(sec, key, type, unit, min, max, def, help) ARCH_KEY_##sec##_##key,
#include "arch_schema.def"
    ARCH_KEY_COUNT
} arch_key;

/* ---- The configuration ---------------------------------------------------------------------- */

#define ARCH_NAME_MAX 64

/* Where a value came from; used only to place error messages. */
typedef enum arch_origin {
    ARCH_ORIGIN_DEFAULT = 0, /* not written anywhere */
    ARCH_ORIGIN_FILE,        /* written in the file at line:col */
    ARCH_ORIGIN_SET,         /* given by a --set override (arch_set) */
} arch_origin;

typedef struct arch_pos {
    arch_origin origin;
    int line, col; /* 1-based, of the key as written; 0 unless origin is ARCH_ORIGIN_FILE */
} arch_pos;

typedef struct arch_source {
    char path[NP_ERR_FILE_MAX]; /* the file loaded, "" if none */
    arch_pos name;
    arch_pos section[ARCH_SECTION_COUNT];
    arch_pos key[ARCH_KEY_COUNT];
} arch_source;

/* A whole architecture. A plain value: copy it with `=`; it owns no memory. */
typedef struct arch_config {
    char name[ARCH_NAME_MAX]; /* `name:` from the file; else the preset or file's base name */
    arch_core core;
    arch_chip chip;
    arch_system system;
    arch_energy energy; /* per-action energies and power: change no time */
    arch_area area;     /* silicon area per unit: changes no time or energy */
    arch_source src; /* where each value came from (error positions only) */
} arch_config;

/* ---- Loading, overriding, validating -------------------------------------------------------- */

/* Fills out with every key's default and an empty source. The defaults form a valid config. */
void arch_defaults(arch_config *out);

/* Parses a YAML config from text[0..len) on top of the defaults into *out. path names the text
 * in errors and in out->src.path, and gives the default name (its base name without .yaml).
 * Checks syntax, structure, keys, types and ranges, but not consistency between keys, so that
 * --set can still fix a file: call arch_validate (or use arch_resolve). On failure fills err
 * (file:line:col of the offending key or value) and leaves *out unchanged. */
np_status arch_load_string(const char *text, size_t len, const char *path, arch_config *out,
                           np_err *err);

/* The largest config file read: 16 MiB. */
#define ARCH_FILE_MAX_BYTES (16u << 20)

/* arch_load_string on the contents of the file at path. NP_ERR_IO (naming path) if it cannot
 * be read. *out is unchanged on failure. */
np_status arch_load_file(const char *path, arch_config *out, np_err *err);

/* Applies one override "section.key=value" (or "name=value") to cfg, parsing value exactly as
 * the YAML loader does (sizes such as "32 MiB" included) and checking its range; marks the key
 * as set by --set. Errors (NP_ERR_USAGE without '=', NP_ERR_UNKNOWN_KEY with a suggestion,
 * NP_ERR_TYPE, NP_ERR_RANGE) have no position. cfg is unchanged on failure. */
np_status arch_set(arch_config *cfg, const char *assignment, np_err *err);

/* Checks every value's range and the consistency rules (arch_checks) between keys. The first
 * failure fills err, placed at the first key of the rule given by --set ("--set
 * section.key=value: " before the message), else at the first one the file wrote
 * (file:line:col), else at the section, else at the file. */
np_status arch_validate(const arch_config *cfg, np_err *err);

/* Every failure of arch_validate at once: errs[0..min(*n, max)) in the order of keys, then of
 * rules; *n counts them all. Returns the first one's status, NP_OK when there is none. */
np_status arch_validate_all(const arch_config *cfg, np_err *errs, size_t max, size_t *n);

/* `npusim config check`: every error of a config file's text at once — each bad key or value
 * (loading goes on with the next key), then, when every value loaded, every failed rule of
 * arch_validate — into errs[0..min(*n, max)); a syntax error still stops the file (then *n is
 * 1). Returns the first error's status, NP_OK for a valid config. */
np_status arch_check_text(const char *text, size_t len, const char *path, np_err *errs,
                          size_t max, size_t *n);

/* arch_check_text on the file at path (read as arch_load_file reads it; a file that cannot be
 * read is its one error). */
np_status arch_check_file(const char *path, np_err *errs, size_t max, size_t *n);

/* Where config files come from: $NPUSIM_CONFIG_DIR if set and not empty, else the source
 * tree's configs/ folder (compiled in). */
const char *arch_config_dir(void);

/* Turns a preset name or a file path into a path (in path[0..n)). The argument is a file if it
 * names an existing file, contains '/', or ends in .yaml or .yml; otherwise it is a preset,
 * arch_config_dir()/NAME.yaml, and an unknown one is NP_ERR_UNKNOWN_KEY listing the presets
 * with a did-you-mean. A file is not opened here. */
np_status arch_locate(const char *preset_or_file, char *path, size_t n, np_err *err);

/* The whole pipeline: arch_locate, arch_load_file, each of sets[0..n_sets) with arch_set (an
 * error is prefixed "--set ASSIGNMENT: "), then arch_validate. *out is unchanged on failure. */
np_status arch_resolve(const char *preset_or_file, const char *const *sets, size_t n_sets,
                       arch_config *out, np_err *err);

/* The presets of arch_config_dir(): names (file names without .yaml), sorted. */
typedef struct arch_presets {
    char **names;
    size_t n;
} arch_presets;

/* Lists the presets into *out (free with arch_presets_free). NP_ERR_IO if the folder cannot
 * be read, NP_ERR_NOMEM; out is empty on failure. */
np_status arch_presets_list(arch_presets *out, np_err *err);
void arch_presets_free(arch_presets *p);

/* ---- Output --------------------------------------------------------------------------------- */

/* The resolved config as JSON (new reference; NULL only when out of memory):
 *   {"name": "tpu-pod",
 *    "core": {"array_rows": {"value": 128, "unit": "PEs"}, "dataflow": {"value": "ws",
 *             "unit": ""}, ...},
 *    "chip": {...}, "system": {...},
 *    "derived": {"chip_peak_tflops_bf16": {"value": 275.2512, "unit": "TFLOP/s"}, ...}}
 * Every schema key appears, in schema order; sizes are integers in bytes. */
json_t *arch_to_json(const arch_config *cfg);

/* Prints cfg as YAML that arch_load_string reads back to the same values: `name:`, then each
 * section with every key, its value and its unit in a comment, then derived peaks as comments. */
void arch_print(const arch_config *cfg, FILE *out);

/* Prints the Markdown reference of every key, value syntax and consistency rule
 * (docs/config.md is this output). */
void arch_write_markdown(FILE *out);

/* Peak dense matmul throughput of one chip in FLOP/s (2 per MAC) at macs_per_pe MACs per PE
 * per cycle, e.g. arch_chip_peak_flops(&cfg, cfg.core.macs_per_pe_bf16). */
double arch_chip_peak_flops(const arch_config *cfg, double macs_per_pe);

/* ---- The schema, for output, tools and tests ------------------------------------------------ */

typedef enum arch_type {
    ARCH_TYPE_INT,  /* int64_t */
    ARCH_TYPE_REAL, /* double */
    ARCH_TYPE_SIZE, /* uint64_t bytes */
    ARCH_TYPE_ENUM, /* one of arch_enum_info.values; stored as its C enum */
    ARCH_TYPE_COUNT
} arch_type;

typedef struct arch_enum_info {
    const char *name; /* "dataflow" */
    const char *help;
    const char *const *values;     /* spellings, indexed by the C enum value */
    const char *const *value_help; /* one line each */
    size_t n;
} arch_enum_info;

typedef struct arch_key_info {
    arch_section section;
    const char *section_name; /* "core" */
    const char *name;         /* "array_rows" */
    const char *full_name;    /* "core.array_rows" */
    arch_type type;
    const arch_enum_info *enum_info; /* ARCH_TYPE_ENUM only */
    const char *unit;                /* "" for enums */
    double min, max, def;            /* inclusive; integer types hold exact integers */
    const char *help;
    size_t offset; /* of the field in arch_config */
} arch_key_info;

typedef struct arch_section_info {
    const char *name;
    const char *help;
} arch_section_info;

extern const arch_key_info arch_keys[ARCH_KEY_COUNT];
extern const arch_section_info arch_sections[ARCH_SECTION_COUNT];

/* A consistency rule between keys, checked by arch_validate in this order. */
typedef struct arch_check_info {
    const char *rule;         /* one sentence, for docs/config.md */
    arch_key blame[8];        /* involved keys in order of blame, ended by ARCH_KEY_COUNT */
    /* Returns true if cfg satisfies the rule; else writes why (values and units) to msg. */
    bool (*ok)(const arch_config *cfg, char *msg, size_t n);
} arch_check_info;

extern const arch_check_info arch_checks[];
extern const size_t arch_n_checks;

/* The key called "section.key" (or section and key given apart: arch_key_lookup("core",
 * "array_rows")); NULL if there is none. */
const arch_key_info *arch_key_find(const char *full_name);
const arch_key_info *arch_key_lookup(const char *section, const char *key);

/* The nearest key to a misspelt name (bare "arry_rows" or "core.arry_rows"), preferring
 * keys of section `prefer` (may be NULL) on ties; else the one key that is the name with its
 * unit ("clock" -> clock_ghz); NULL if nothing is close. */
const arch_key_info *arch_key_suggest(const char *name, const char *prefer);

/* A key's value in cfg as a double (enums: their index). */
double arch_get(const arch_config *cfg, const arch_key_info *k);

/* A parsed value of some key, in the member of its type. */
typedef union arch_value {
    int64_t i;  /* ARCH_TYPE_INT */
    double r;   /* ARCH_TYPE_REAL */
    uint64_t u; /* ARCH_TYPE_SIZE */
    int e;      /* ARCH_TYPE_ENUM */
} arch_value;

/* Parses text as a value of key k and checks its range: the one value parser of the YAML
 * loader and of arch_set. quoted says the text was a quoted YAML string, which INT and REAL
 * keys refuse. Errors (NP_ERR_TYPE, NP_ERR_RANGE, NP_ERR_UNKNOWN_KEY for an enum value) name
 * the key and have no position; *out is unchanged on failure. */
np_status arch_value_parse(const arch_key_info *k, const char *text, bool quoted,
                           arch_value *out, np_err *err);

/* Stores v (from arch_value_parse for the same key) into cfg. */
void arch_value_store(arch_config *cfg, const arch_key_info *k, arch_value v);

/* A key's value as text that the parser reads back ("128", "1.05", "32 MiB", "ws"), without
 * the unit; returns buf. */
char *arch_value_text(const arch_config *cfg, const arch_key_info *k, char *buf, size_t n);

/* What a value of k looks like, for messages: "an integer number of PEs", "a number in GHz",
 * "a size in bytes such as ...", "one of os, ws, is"; returns buf. */
char *arch_key_expects(const arch_key_info *k, char *buf, size_t n);

/* A size in bytes as "32 MiB" when that is exact, else "33554433" (bytes); returns buf. */
char *arch_size_text(uint64_t bytes, char *buf, size_t n);

#endif
