/* test_arch.c — the architecture config: the schema table itself, YAML loading with exact
 * error positions (tests/data/arch/ holds one malformed file per problem; every expected
 * line:col below was read off the file, not copied from the program), values and --set,
 * consistency rules, the presets against the numbers written in them and against published
 * peaks, the `npusim config` command, and docs/config.md against what the program generates. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../base/arch.h"
#include "../base/arch_area.h"
#include "harness.h"

static const char *const presets[] = {"tiny", "edge", "tpu-pod", "a100-cluster", "a100-80g",
                                       "h100-sxm"};
#define N_PRESETS (sizeof presets / sizeof presets[0])

static char *data_path(const char *name)
{
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s", harness_src_path("tests/data/arch/"));
    strncat(buf, name, sizeof buf - strlen(buf) - 1);
    return buf;
}

static np_status load_and_validate(const char *path, arch_config *cfg, np_err *e)
{
    np_status st = arch_load_file(path, cfg, e);
    return st == NP_OK ? arch_validate(cfg, e) : st;
}

/* The malformed file tests/data/arch/NAME fails with this class, position and message, both
 * through the API and through `npusim config check` (exit status 2, one line on stderr). */
static void expect_bad(const char *name, np_status status, int line, int col, const char *msg)
{
    char path[4096], want[4096 + 1024];
    snprintf(path, sizeof path, "%s", data_path(name));
    arch_config cfg;
    np_err e = {0};
    np_status st = load_and_validate(path, &cfg, &e);
    if (st != status)
        fprintf(stderr, "\n    %s: got class %s, want %s\n", name, np_status_name(st),
                np_status_name(status));
    CU_ASSERT_EQUAL(st, status);
    CU_ASSERT_EQUAL(e.status, status);
    EXPECT_STR(e.file, path);
    CU_ASSERT_EQUAL(e.line, line);
    CU_ASSERT_EQUAL(e.col, col);
    EXPECT_STR(e.msg, msg);

    harness_run r = harness_npusim("config", "check", path, NULL);
    CU_ASSERT_EQUAL(r.exit_status, 2);
    snprintf(want, sizeof want, "npusim: %s:%d:%d: %s\n", path, line, col, msg);
    EXPECT_STR(r.err, want);
    EXPECT_STR(r.out, "");
    harness_run_free(&r);
}

/* ---- The schema table ----------------------------------------------------------------------- */

TEST(schema_defaults_lie_within_their_ranges_and_integers_are_exact)
{
    for (size_t i = 0; i < ARCH_KEY_COUNT; i++) {
        const arch_key_info *k = &arch_keys[i];
        if (k->type == ARCH_TYPE_ENUM) {
            CU_ASSERT(k->enum_info && k->enum_info->n > 0);
            CU_ASSERT(k->def >= 0 && k->def < (double)k->enum_info->n);
            continue;
        }
        CU_ASSERT(k->min <= k->def && k->def <= k->max);
        if (k->type != ARCH_TYPE_REAL) {
            CU_ASSERT(k->min == floor(k->min) && k->max == floor(k->max) &&
                      k->def == floor(k->def));
            CU_ASSERT(k->max < 9007199254740992.0); /* 2^53: exact in the double table */
            CU_ASSERT(k->min >= 0);
        }
    }
}

TEST(schema_key_names_are_unique_even_across_sections)
{
    for (size_t i = 0; i < ARCH_KEY_COUNT; i++)
        for (size_t j = i + 1; j < ARCH_KEY_COUNT; j++)
            CU_ASSERT(strcmp(arch_keys[i].name, arch_keys[j].name) != 0);
}

TEST(schema_every_key_has_help_a_unit_and_its_full_name)
{
    for (size_t i = 0; i < ARCH_KEY_COUNT; i++) {
        const arch_key_info *k = &arch_keys[i];
        char full[128];
        snprintf(full, sizeof full, "%s.%s", arch_sections[k->section].name, k->name);
        EXPECT_STR(k->full_name, full);
        EXPECT_STR(k->section_name, arch_sections[k->section].name);
        CU_ASSERT(strlen(k->help) > 10);
        CU_ASSERT_PTR_NULL(strchr(k->help, '|')); /* would break the Markdown table */
        CU_ASSERT(k->type == ARCH_TYPE_ENUM ? k->unit[0] == '\0' : k->unit[0] != '\0');
        CU_ASSERT_PTR_EQUAL(arch_key_find(full), k);
        CU_ASSERT_PTR_EQUAL(arch_key_lookup(k->section_name, k->name), k);
    }
    CU_ASSERT_PTR_NULL(arch_key_find("core.mesh_x"));
    CU_ASSERT_PTR_NULL(arch_key_lookup("chip", "array_rows"));
}

TEST(every_consistency_rule_has_text_and_blames_a_key)
{
    CU_ASSERT(arch_n_checks >= 8);
    for (size_t i = 0; i < arch_n_checks; i++) {
        CU_ASSERT(strlen(arch_checks[i].rule) > 10);
        CU_ASSERT(arch_checks[i].blame[0] < ARCH_KEY_COUNT);
        CU_ASSERT_PTR_NOT_NULL(arch_checks[i].ok);
    }
}

TEST(the_fields_of_arch_config_follow_the_schema)
{
    arch_config c;
    arch_defaults(&c);
    c.core.array_rows = 77;
    c.chip.hbm_bytes = 12345;
    c.system.topology = ARCH_TOPOLOGY_TORUS3D;
    c.core.clock_ghz = 2.5;
    CU_ASSERT_EQUAL(arch_get(&c, arch_key_find("core.array_rows")), 77);
    CU_ASSERT_EQUAL(arch_get(&c, arch_key_find("chip.hbm_bytes")), 12345);
    CU_ASSERT_EQUAL(arch_get(&c, arch_key_find("system.topology")), ARCH_TOPOLOGY_TORUS3D);
    CU_ASSERT_EQUAL(arch_get(&c, arch_key_find("core.clock_ghz")), 2.5);
}

/* The example at the top of base/arch.h, as written there. */
static np_status header_example(uint64_t *pes)
{
    arch_config cfg;
    np_err e = {0};
    const char *sets[] = {"core.array_rows=256"};
    if (arch_resolve("tpu-pod", sets, 1, &cfg, &e) != NP_OK)
        return e.status;                     // e: "file:line:col: message" via np_err_format
    uint64_t peak = cfg.core.array_rows * cfg.core.array_cols;
    *pes = peak;
    return NP_OK;
}

TEST(the_header_example_runs)
{
    uint64_t pes = 0;
    CU_ASSERT_EQUAL(header_example(&pes), NP_OK);
    CU_ASSERT_EQUAL(pes, 256 * 128);
}

/* ---- Defaults and values -------------------------------------------------------------------- */

TEST(defaults_form_a_valid_config)
{
    arch_config c;
    np_err e = {0};
    arch_defaults(&c);
    CU_ASSERT_EQUAL(arch_validate(&c, &e), NP_OK);
}

TEST(omitted_keys_take_their_defaults)
{
    static const char text[] = "# only two keys\ncore:\n  array_rows: 8\nchip:\n  cores: 1\n";
    arch_config c, d;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(arch_load_string(text, strlen(text), "two-keys.yaml", &c, &e), NP_OK);
    arch_defaults(&d);
    CU_ASSERT_EQUAL(c.core.array_rows, 8);
    EXPECT_STR(c.name, "two-keys"); /* no name: the file's base name */
    /* The documented defaults, written out by hand. */
    CU_ASSERT_EQUAL(c.core.array_cols, 128);
    CU_ASSERT_EQUAL(c.core.dataflow, ARCH_DATAFLOW_WS);
    CU_ASSERT_EQUAL(c.core.sram_bytes, 16u << 20);
    CU_ASSERT_EQUAL(c.core.macs_per_pe_fp32, 0.25);
    CU_ASSERT_EQUAL(c.chip.hbm_bytes, 16ull << 30);
    CU_ASSERT_EQUAL(c.system.chips, 1);
    CU_ASSERT_EQUAL(c.system.topology, ARCH_TOPOLOGY_RING);
    for (size_t i = 0; i < ARCH_KEY_COUNT; i++) {
        const arch_key_info *k = &arch_keys[i];
        if (i == ARCH_KEY_core_array_rows || i == ARCH_KEY_chip_cores)
            continue;
        CU_ASSERT_EQUAL(arch_get(&c, k), arch_get(&d, k));
        CU_ASSERT_EQUAL(arch_get(&c, k), k->def);
        CU_ASSERT_EQUAL(c.src.key[i].origin, ARCH_ORIGIN_DEFAULT);
    }
    CU_ASSERT_EQUAL(c.src.key[ARCH_KEY_core_array_rows].origin, ARCH_ORIGIN_FILE);
    CU_ASSERT_EQUAL(c.src.key[ARCH_KEY_core_array_rows].line, 3);
    CU_ASSERT_EQUAL(c.src.key[ARCH_KEY_core_array_rows].col, 3);
}

TEST(empty_sections_and_an_empty_mapping_mean_all_defaults)
{
    static const char *texts[] = {"{}\n", "core:\nchip: {}\nsystem: ~\n", "name: x\n"};
    for (size_t i = 0; i < 3; i++) {
        arch_config c;
        np_err e = {0};
        CU_ASSERT_EQUAL(arch_load_string(texts[i], strlen(texts[i]), "t.yaml", &c, &e), NP_OK);
        CU_ASSERT_EQUAL(arch_validate(&c, &e), NP_OK);
        CU_ASSERT_EQUAL(c.core.array_rows, 128);
    }
}

static uint64_t size_of(const char *key, const char *text, np_status want)
{
    arch_value v = {.u = 999};
    np_err e = {0};
    np_status st = arch_value_parse(arch_key_find(key), text, false, &v, &e);
    if (st != want)
        fprintf(stderr, "\n    '%s': %s (%s)\n", text, np_status_name(st), e.msg);
    CU_ASSERT_EQUAL(st, want);
    return v.u;
}

TEST(size_strings_parse_to_bytes)
{
    CU_ASSERT_EQUAL(size_of("core.sram_bytes", "32 MiB", NP_OK), 33554432u);
    CU_ASSERT_EQUAL(size_of("core.sram_bytes", "1 GiB", NP_OK), 1073741824u);
    CU_ASSERT_EQUAL(size_of("core.sram_bytes", "512KiB", NP_OK), 524288u);
    CU_ASSERT_EQUAL(size_of("core.sram_bytes", "4096", NP_OK), 4096u);
    CU_ASSERT_EQUAL(size_of("core.sram_bytes", "4096 B", NP_OK), 4096u);
    CU_ASSERT_EQUAL(size_of("core.sram_bytes", "1.5 KiB", NP_OK), 1536u);
    CU_ASSERT_EQUAL(size_of("core.sram_bytes", "+8 KiB", NP_OK), 8192u);
    CU_ASSERT_EQUAL(size_of("chip.hbm_bytes", "64 TiB", NP_OK), 70368744177664ull);
    CU_ASSERT_EQUAL(size_of("chip.hbm_bytes", "80 GiB", NP_OK), 85899345920ull);

    /* Through YAML, plain and quoted. */
    static const char text[] = "core:\n  sram_bytes: 32 MiB\n  acc_bytes: \"512KiB\"\n";
    arch_config c;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(arch_load_string(text, strlen(text), "s.yaml", &c, &e), NP_OK);
    CU_ASSERT_EQUAL(c.core.sram_bytes, 33554432u);
    CU_ASSERT_EQUAL(c.core.acc_bytes, 524288u);
}

TEST(sizes_that_are_not_sizes_are_refused_with_a_reason)
{
    static const struct {
        const char *text;
        np_status st;
        const char *msg;
    } cases[] = {
        {"32 MB", NP_ERR_TYPE, "core.sram_bytes: size unit 'MB' is ambiguous (10^n or 2^n "
                               "bytes?); write 'MiB' for powers of 1024, or the number of bytes"},
        {"32 mib", NP_ERR_TYPE, "core.sram_bytes: unknown size unit 'mib'; did you mean 'MiB'? "
                                "(units: B, KiB, MiB, GiB, TiB, PiB)"},
        {"32 xyz", NP_ERR_TYPE,
         "core.sram_bytes: unknown size unit 'xyz' (units: B, KiB, MiB, GiB, TiB, PiB)"},
        {"1.3 KiB", NP_ERR_TYPE, "core.sram_bytes = 1.3 KiB is not a whole number of bytes"},
        {"lots", NP_ERR_TYPE, "core.sram_bytes expects a size in bytes such as 4096, 512KiB or "
                              "32 MiB, got 'lots'"},
        {"-1 MiB", NP_ERR_RANGE,
         "core.sram_bytes = -1 MiB is out of range: allowed 1 KiB to 4 GiB"},
        {"100", NP_ERR_RANGE,
         "core.sram_bytes = 100 bytes is out of range: allowed 1 KiB to 4 GiB"},
        {"99999999999999999999 PiB", NP_ERR_RANGE,
         "core.sram_bytes = 99999999999999999999 PiB is out of range: allowed 1 KiB to 4 GiB"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        arch_value v;
        np_err e = {0};
        CU_ASSERT_EQUAL(arch_value_parse(arch_key_find("core.sram_bytes"), cases[i].text, false,
                                         &v, &e),
                        cases[i].st);
        EXPECT_STR(e.msg, cases[i].msg);
        CU_ASSERT_EQUAL(e.line, 0);
    }
}

TEST(size_text_uses_the_largest_exact_binary_unit)
{
    char buf[64];
    EXPECT_STR(arch_size_text(33554432, buf, sizeof buf), "32 MiB");
    EXPECT_STR(arch_size_text(1536, buf, sizeof buf), "1536");
    EXPECT_STR(arch_size_text(1024, buf, sizeof buf), "1 KiB");
    EXPECT_STR(arch_size_text(0, buf, sizeof buf), "0");
    EXPECT_STR(arch_size_text(1ull << 50, buf, sizeof buf), "1 PiB");
}

/* ---- --set ---------------------------------------------------------------------------------- */

TEST(set_changes_a_value_of_each_type)
{
    arch_config c;
    np_err e = {0};
    arch_defaults(&c);
    CU_ASSERT_EQUAL(arch_set(&c, "core.array_rows=256", &e), NP_OK);
    CU_ASSERT_EQUAL(c.core.array_rows, 256);
    CU_ASSERT_EQUAL(arch_set(&c, "core.clock_ghz=1.5", &e), NP_OK);
    CU_ASSERT_EQUAL(c.core.clock_ghz, 1.5);
    CU_ASSERT_EQUAL(arch_set(&c, " core.sram_bytes = 32 MiB ", &e), NP_OK);
    CU_ASSERT_EQUAL(c.core.sram_bytes, 33554432u);
    CU_ASSERT_EQUAL(arch_set(&c, "system.topology=torus2d", &e), NP_OK);
    CU_ASSERT_EQUAL(c.system.topology, ARCH_TOPOLOGY_TORUS2D);
    CU_ASSERT_EQUAL(arch_set(&c, "name=my npu", &e), NP_OK);
    EXPECT_STR(c.name, "my npu");
    CU_ASSERT_EQUAL(c.src.key[ARCH_KEY_core_array_rows].origin, ARCH_ORIGIN_SET);
    CU_ASSERT_EQUAL(c.src.key[ARCH_KEY_core_array_cols].origin, ARCH_ORIGIN_DEFAULT);
    CU_ASSERT_EQUAL(c.src.name.origin, ARCH_ORIGIN_SET);
}

TEST(set_refuses_bad_assignments_of_each_type_and_changes_nothing)
{
    static const struct {
        const char *assign;
        np_status st;
        const char *msg;
    } cases[] = {
        {"core.array_rows=abc", NP_ERR_TYPE,
         "core.array_rows expects an integer number of PEs, got 'abc'"},
        {"core.array_rows=1.5", NP_ERR_TYPE, "core.array_rows expects a whole number of PEs, got 1.5"},
        {"core.array_rows=0", NP_ERR_RANGE,
         "core.array_rows = 0 PEs is out of range: allowed 1 to 4096 PEs"},
        {"core.array_rows=99999999999999999999", NP_ERR_RANGE,
         "core.array_rows = 99999999999999999999 PEs is out of range: allowed 1 to 4096 PEs"},
        {"core.clock_ghz=fast", NP_ERR_TYPE, "core.clock_ghz expects a number in GHz, got 'fast'"},
        {"core.clock_ghz=nan", NP_ERR_TYPE, "core.clock_ghz expects a number in GHz, got 'nan'"},
        {"core.clock_ghz=1000", NP_ERR_RANGE,
         "core.clock_ghz = 1000 GHz is out of range: allowed 0.001 to 100 GHz"},
        {"core.sram_bytes=32 Mb", NP_ERR_TYPE,
         "core.sram_bytes: unknown size unit 'Mb'; did you mean 'MiB'? (units: B, KiB, MiB, "
         "GiB, TiB, PiB)"},
        {"system.topology=star", NP_ERR_UNKNOWN_KEY,
         "unknown system.topology 'star' (one of ring, torus2d, torus3d, fully_connected, "
         "switch, fat_tree, hierarchical)"},
        {"core.dataflow=wss", NP_ERR_UNKNOWN_KEY,
         "unknown core.dataflow 'wss'; did you mean 'ws'? (one of os, ws, is)"},
        {"core.array_rows", NP_ERR_USAGE, "expected SECTION.KEY=VALUE, got 'core.array_rows'"},
        {"core.array_rows=", NP_ERR_MISSING,
         "core.array_rows has no value (it expects an integer number of PEs)"},
        {"core.arry_rows=4", NP_ERR_UNKNOWN_KEY,
         "unknown key 'core.arry_rows'; did you mean 'core.array_rows'?"},
        {"array_rows=4", NP_ERR_UNKNOWN_KEY, "unknown key 'array_rows'; did you mean 'core.array_rows'?"},
        {"core.mesh_x=4", NP_ERR_UNKNOWN_KEY, "unknown key 'core.mesh_x'; did you mean 'chip.mesh_x'?"},
        /* a key without its unit: the one key that is it with one */
        {"core.clock=1", NP_ERR_UNKNOWN_KEY, "unknown key 'core.clock'; did you mean 'core.clock_ghz'?"},
        {"qqq.zzz=4", NP_ERR_UNKNOWN_KEY, "unknown key 'qqq.zzz' (keys are SECTION.KEY, e.g. core.array_rows)"},
        {"name=", NP_ERR_MISSING, "name has no value"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        arch_config c, before;
        np_err e = {0};
        arch_defaults(&c);
        before = c;
        CU_ASSERT_EQUAL(arch_set(&c, cases[i].assign, &e), cases[i].st);
        EXPECT_STR(e.msg, cases[i].msg);
        CU_ASSERT_EQUAL(memcmp(&c, &before, sizeof c), 0);
    }
}

TEST(show_reports_a_bad_set_naming_the_argument)
{
    harness_run r = harness_npusim("config", "show", "tiny", "--set", "core.array_rows=abc", NULL);
    CU_ASSERT_EQUAL(r.exit_status, 2);
    EXPECT_STR(r.err, "npusim: --set core.array_rows=abc: core.array_rows expects an integer "
                      "number of PEs, got 'abc'\n");
    EXPECT_STR(r.out, "");
    harness_run_free(&r);
}

TEST(set_can_repair_an_inconsistent_file)
{
    const char *sets[] = {"chip.mesh_x=4"};
    arch_config c;
    np_err e = {0};
    CU_ASSERT_EQUAL(arch_resolve(data_path("mesh_too_small.yaml"), sets, 1, &c, &e), NP_OK);
    CU_ASSERT_EQUAL(c.chip.cores, 8);
    CU_ASSERT_EQUAL(c.chip.mesh_x, 4);
}

TEST(set_that_breaks_consistency_is_blamed_on_the_set)
{
    const char *sets[] = {"core.array_rows=16", "chip.cores=8"};
    arch_config c;
    np_err e = {0};
    CU_ASSERT_EQUAL(arch_resolve("tiny", sets, 2, &c, &e), NP_ERR_INCONSISTENT);
    /* tiny.yaml writes mesh_x: 2 and mesh_y: 1; the --set is the user's latest word. */
    EXPECT_STR(e.msg, "--set chip.cores=8: a mesh of chip.mesh_x x chip.mesh_y = 2 x 1 routers "
                      "cannot hold chip.cores = 8 cores (one core per router)");
    EXPECT_STR(e.file, "");
    CU_ASSERT_EQUAL(e.line, 0);
}

/* A message between chips is counted in pieces of chip.c2c_piece_bytes in 32 bits: 256 GiB of
 * HBM in 64-byte pieces is 2^38 / 2^6 = 2^32 pieces, one too many; 65-byte pieces give
 * 2^38 / 65 = 4,228,890,877 (< 2^32 - 1). */
TEST(chip_to_chip_pieces_of_a_whole_hbm_message_fit_32_bits)
{
    const char *over[] = {"chip.hbm_bytes=256GiB", "chip.c2c_piece_bytes=64"};
    const char *fits[] = {"chip.hbm_bytes=256GiB", "chip.c2c_piece_bytes=65"};
    arch_config c;
    np_err e = {0};
    CU_ASSERT_EQUAL(arch_resolve("tpu-pod", over, 2, &c, &e), NP_ERR_INCONSISTENT);
    EXPECT_STR(e.msg, "--set chip.c2c_piece_bytes=64: chip.c2c_piece_bytes = 64 bytes is too "
                      "small for chip.hbm_bytes = 256 GiB: a message of the whole HBM would be "
                      "more pieces than 32 bits count (at least 65 bytes)");
    CU_ASSERT_EQUAL(arch_resolve("tpu-pod", fits, 2, &c, &e), NP_OK);
}

TEST(one_chip_system_is_valid_with_any_topology)
{
    for (int t = 0; t < ARCH_TOPOLOGY_COUNT; t++) {
        arch_config c;
        np_err e = {0};
        char set[64];
        arch_defaults(&c);
        snprintf(set, sizeof set, "system.topology=%s",
                 arch_keys[ARCH_KEY_system_topology].enum_info->values[t]);
        CU_ASSERT_EQUAL(arch_set(&c, set, &e), NP_OK);
        CU_ASSERT_EQUAL(arch_set(&c, "system.torus_x=4", &e), NP_OK);
        CU_ASSERT_EQUAL(arch_set(&c, "system.island_chips=3", &e), NP_OK);
        CU_ASSERT_EQUAL(arch_set(&c, "system.links_per_chip=0", &e), NP_OK);
        CU_ASSERT_EQUAL(arch_validate(&c, &e), NP_OK);
        /* ... and the same with 2 chips is not (a ring with no links, and so on). */
        CU_ASSERT_EQUAL(arch_set(&c, "system.chips=2", &e), NP_OK);
        CU_ASSERT_EQUAL(arch_validate(&c, &e), NP_ERR_INCONSISTENT);
    }
}

TEST(validate_checks_ranges_of_a_config_built_in_code)
{
    arch_config c;
    np_err e = {0};
    arch_defaults(&c);
    c.core.array_cols = 0;
    CU_ASSERT_EQUAL(arch_validate(&c, &e), NP_ERR_RANGE);
    EXPECT_STR(e.msg, "core.array_cols = 0 PEs is out of range: allowed 1 to 4096 PEs");
    arch_defaults(&c);
    c.system.topology = (arch_topology)42;
    CU_ASSERT_EQUAL(arch_validate(&c, &e), NP_ERR_RANGE);
    EXPECT_STR(e.msg, "system.topology holds 42, which is not a topology value");
}

TEST(the_topology_rules_accept_what_they_should)
{
    static const char *const good[][6] = {
        {"system.chips=16", "system.topology=torus2d", "system.torus_x=4", "system.torus_y=4",
         "system.links_per_chip=4", NULL},
        {"system.chips=8", "system.topology=torus2d", "system.torus_x=8", "system.torus_y=1",
         "system.links_per_chip=2", NULL}, /* a 1-long dimension needs no links */
        {"system.chips=8", "system.topology=fully_connected", "system.links_per_chip=7", NULL},
        {"system.chips=64", "system.topology=switch", "system.links_per_chip=1", NULL},
        {"system.chips=2048", "system.topology=fat_tree", "system.links_per_chip=1", NULL},
        {"system.chips=16", "system.topology=hierarchical", "system.island_chips=8", NULL},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        arch_config c;
        np_err e = {0};
        arch_defaults(&c);
        for (size_t j = 0; good[i][j]; j++)
            CU_ASSERT_EQUAL(arch_set(&c, good[i][j], &e), NP_OK);
        if (arch_validate(&c, &e) != NP_OK)
            fprintf(stderr, "\n    case %zu: %s\n", i, e.msg);
        CU_ASSERT_EQUAL(arch_validate(&c, &e), NP_OK);
    }
    /* radix 64: a fat tree holds 64 * 64 / 2 = 2048 chips, not 2049 */
    arch_config c;
    np_err e = {0};
    arch_defaults(&c);
    arch_set(&c, "system.chips=2049", &e);
    arch_set(&c, "system.topology=fat_tree", &e);
    CU_ASSERT_EQUAL(arch_validate(&c, &e), NP_ERR_INCONSISTENT);
    EXPECT_STR(e.msg, "--set system.chips=2049: a two-level fat tree of system.switch_radix = "
                      "64-port switches connects at most 2048 chips (radix^2/2), not "
                      "system.chips = 2049");
}

/* ---- Malformed files: class, file:line:col and message -------------------------------------- */

TEST(yaml_tab_indentation_is_a_syntax_error_at_the_tab)
{
    expect_bad("syntax_tab_indent.yaml", NP_ERR_SYNTAX, 3, 1,
               "YAML syntax error: found character that cannot start any token (while "
               "scanning for the next token at line 3, column 1)");
}

TEST(yaml_colon_inside_a_plain_value_is_a_syntax_error_at_the_colon)
{
    expect_bad("syntax_colon_in_plain_value.yaml", NP_ERR_SYNTAX, 1, 13,
               "YAML syntax error: mapping values are not allowed in this context");
}

TEST(yaml_unclosed_flow_mapping_is_reported_at_the_end_with_its_start)
{
    expect_bad("syntax_unclosed_flow.yaml", NP_ERR_SYNTAX, 3, 1,
               "YAML syntax error: did not find expected ',' or '}' (while parsing a flow "
               "mapping at line 2, column 7)");
}

TEST(invalid_utf8_is_reported_at_the_bad_byte)
{
    expect_bad("invalid_utf8.yaml", NP_ERR_SYNTAX, 1, 10,
               "YAML syntax error: invalid leading UTF-8 octet (byte 0xFF)");
}

TEST(two_documents_in_one_file_are_refused_at_the_second)
{
    expect_bad("two_documents.yaml", NP_ERR_SYNTAX, 3, 1,
               "a config file holds one YAML document; a second one starts here");
}

TEST(top_level_sequence_is_a_type_error)
{
    expect_bad("top_level_sequence.yaml", NP_ERR_TYPE, 2, 1,
               "the top level must be a mapping with the sections core:, chip:, system:, got a "
               "sequence");
}

TEST(empty_file_is_missing_at_the_start)
{
    expect_bad("empty.yaml", NP_ERR_MISSING, 1, 1,
               "the file is empty; expected a mapping with the sections core:, chip:, system:");
}

TEST(file_of_comments_only_is_empty)
{
    expect_bad("comments_only.yaml", NP_ERR_MISSING, 1, 1,
               "the file is empty; expected a mapping with the sections core:, chip:, system:");
}

TEST(unknown_section_suggests_the_nearest)
{
    expect_bad("unknown_section.yaml", NP_ERR_UNKNOWN_KEY, 2, 1,
               "unknown section 'cores'; did you mean 'core'?");
}

TEST(key_at_top_level_suggests_its_section)
{
    expect_bad("key_at_top_level.yaml", NP_ERR_UNKNOWN_KEY, 1, 1,
               "unknown section 'array_rows'; did you mean 'core.array_rows' (keys go inside "
               "their section)?");
}

TEST(unknown_key_suggests_the_nearest)
{
    expect_bad("unknown_key.yaml", NP_ERR_UNKNOWN_KEY, 3, 3,
               "unknown key 'core.arry_cols'; did you mean 'core.array_cols'?");
}

TEST(key_in_the_wrong_section_suggests_the_right_one)
{
    expect_bad("key_in_wrong_section.yaml", NP_ERR_UNKNOWN_KEY, 3, 3,
               "unknown key 'core.mesh_x'; did you mean 'chip.mesh_x'?");
}

TEST(complex_key_is_a_type_error)
{
    expect_bad("complex_key.yaml", NP_ERR_TYPE, 2, 5, "core: keys must be names, got a sequence");
}

TEST(duplicate_key_is_reported_at_the_second_with_the_first)
{
    expect_bad("duplicate_key.yaml", NP_ERR_DUPLICATE, 4, 3,
               "duplicate key 'core.array_rows' (first given at line 2, column 3)");
}

TEST(duplicate_section_is_reported_at_the_second_with_the_first)
{
    expect_bad("duplicate_section.yaml", NP_ERR_DUPLICATE, 5, 1,
               "duplicate section 'core' (first given at line 1, column 1)");
}

TEST(section_that_is_not_a_mapping_is_a_type_error)
{
    expect_bad("section_not_mapping.yaml", NP_ERR_TYPE, 1, 7,
               "section 'core' expects a mapping of key: value, got '128'");
}

TEST(string_for_an_integer_is_a_type_error_at_the_value)
{
    expect_bad("string_for_integer.yaml", NP_ERR_TYPE, 2, 10,
               "chip.cores expects an integer number of cores, got 'many'");
}

TEST(two_keys_on_one_line_make_a_string_value)
{
    expect_bad("two_keys_on_one_line.yaml", NP_ERR_TYPE, 2, 15,
               "core.array_rows expects an integer number of PEs, got '4 array_cols'");
}

TEST(quoted_integer_is_a_string)
{
    expect_bad("quoted_integer.yaml", NP_ERR_TYPE, 2, 15,
               "core.array_rows expects an integer number of PEs, got the string \"128\"");
}

TEST(mapping_where_a_value_belongs_is_a_type_error)
{
    expect_bad("mapping_for_scalar.yaml", NP_ERR_TYPE, 3, 5,
               "core.array_rows expects an integer number of PEs, got a mapping");
}

TEST(sequence_where_a_value_belongs_is_a_type_error)
{
    expect_bad("sequence_for_scalar.yaml", NP_ERR_TYPE, 2, 14,
               "core.clock_ghz expects a number in GHz, got a sequence");
}

TEST(alias_is_refused)
{
    expect_bad("alias.yaml", NP_ERR_TYPE, 3, 15,
               "core.array_cols expects an integer number of PEs, got an alias (aliases are not "
               "supported in config files)");
}

TEST(fraction_for_an_integer_is_a_type_error)
{
    expect_bad("fractional_integer.yaml", NP_ERR_TYPE, 3, 15,
               "core.array_cols expects a whole number of PEs, got 12.5");
}

TEST(negative_count_is_out_of_range)
{
    expect_bad("negative.yaml", NP_ERR_RANGE, 2, 10,
               "chip.cores = -4 cores is out of range: allowed 1 to 65536 cores");
}

TEST(too_large_integer_gives_the_range_and_unit)
{
    expect_bad("out_of_range.yaml", NP_ERR_RANGE, 2, 15,
               "core.array_rows = 100000 PEs is out of range: allowed 1 to 4096 PEs");
}

TEST(real_below_its_minimum_gives_the_range_and_unit)
{
    expect_bad("real_out_of_range.yaml", NP_ERR_RANGE, 2, 14,
               "core.clock_ghz = 0 GHz is out of range: allowed 0.001 to 100 GHz");
}

TEST(bad_enum_value_lists_the_values_and_suggests)
{
    expect_bad("bad_enum.yaml", NP_ERR_UNKNOWN_KEY, 3, 13,
               "unknown system.topology 'torus'; did you mean 'torus2d'? (one of ring, torus2d, "
               "torus3d, fully_connected, switch, fat_tree, hierarchical)");
}

TEST(bad_size_unit_suggests_the_binary_unit)
{
    expect_bad("bad_size_suffix.yaml", NP_ERR_TYPE, 2, 15,
               "core.sram_bytes: unknown size unit 'Mib'; did you mean 'MiB'? (units: B, KiB, "
               "MiB, GiB, TiB, PiB)");
}

TEST(key_without_value_is_missing_at_the_key)
{
    expect_bad("missing_value.yaml", NP_ERR_MISSING, 2, 3,
               "core.array_rows has no value (it expects an integer number of PEs)");
}

TEST(mesh_too_small_for_the_cores_is_inconsistent_at_mesh_x)
{
    expect_bad("mesh_too_small.yaml", NP_ERR_INCONSISTENT, 4, 3,
               "a mesh of chip.mesh_x x chip.mesh_y = 2 x 2 routers cannot hold chip.cores = 8 "
               "cores (one core per router)");
}

TEST(cores_without_a_mesh_are_inconsistent_at_cores)
{
    expect_bad("cores_without_mesh.yaml", NP_ERR_INCONSISTENT, 2, 3,
               "a mesh of chip.mesh_x x chip.mesh_y = 1 x 1 routers cannot hold chip.cores = 4 "
               "cores (one core per router)");
}

TEST(torus3d_dims_must_multiply_to_the_chips)
{
    expect_bad("torus3d_dims.yaml", NP_ERR_INCONSISTENT, 4, 3,
               "system.topology torus3d: system.torus_x x system.torus_y x system.torus_z = 4 "
               "x 4 x 2 = 32 chips, but system.chips = 64");
}

TEST(torus2d_with_a_z_dimension_is_inconsistent)
{
    expect_bad("torus2d_with_z.yaml", NP_ERR_INCONSISTENT, 6, 3,
               "system.topology torus2d has no z dimension: system.torus_z must be 1, not 2");
}

TEST(hierarchical_chips_must_be_whole_islands)
{
    expect_bad("islands.yaml", NP_ERR_INCONSISTENT, 4, 3,
               "system.topology hierarchical: system.chips = 12 is not a whole number of "
               "islands of system.island_chips = 8 chips");
}

TEST(fully_connected_needs_chips_minus_one_links)
{
    expect_bad("links_fully_connected.yaml", NP_ERR_INCONSISTENT, 4, 3,
               "system.links_per_chip = 4 links is too few for a fully_connected of 8 chips: it "
               "needs 7 (one to every other chip)");
}

TEST(torus3d_needs_six_links_blamed_on_the_topology_when_links_are_unwritten)
{
    expect_bad("links_torus3d.yaml", NP_ERR_INCONSISTENT, 2, 3,
               "system.links_per_chip = 2 links is too few for a torus3d of 64 chips: it needs 6 "
               "(2 per dimension longer than 1)");
}

TEST(sram_must_divide_into_equal_banks)
{
    expect_bad("sram_banks.yaml", NP_ERR_INCONSISTENT, 2, 3,
               "core.sram_bytes = 100000 bytes is not divisible by core.sram_banks = 3 banks "
               "(every bank has the same size)");
}

TEST(accumulator_must_hold_one_row_of_fp32)
{
    expect_bad("acc_too_small.yaml", NP_ERR_INCONSISTENT, 3, 3,
               "core.acc_bytes = 256 bytes cannot hold one row of fp32 accumulators: "
               "core.array_cols = 128 PEs x 4 bytes = 512 bytes");
}

TEST(switch_needs_a_port_per_chip)
{
    expect_bad("switch_radix.yaml", NP_ERR_INCONSISTENT, 4, 3,
               "system.switch_radix = 64 ports cannot connect system.chips = 128 chips to one "
               "switch (one port per chip)");
}

TEST(array_must_support_some_data_type)
{
    expect_bad("no_dtype.yaml", NP_ERR_INCONSISTENT, 2, 3,
               "the array supports no data type: core.macs_per_pe_bf16, _fp16, _fp32 and _int8 "
               "are all 0");
}

TEST(missing_file_is_an_io_error_naming_the_path)
{
    const char *path = data_path("does-not-exist.yaml");
    char want[4200];
    arch_config c;
    np_err e = {0};
    CU_ASSERT_EQUAL(arch_load_file(path, &c, &e), NP_ERR_IO);
    EXPECT_STR(e.file, path);
    EXPECT_STR(e.msg, "cannot open: No such file or directory");
    harness_run r = harness_npusim("config", "check", path, NULL);
    CU_ASSERT_EQUAL(r.exit_status, 2);
    snprintf(want, sizeof want, "npusim: %s: cannot open: No such file or directory\n",
             path);
    EXPECT_STR(r.err, want);
    harness_run_free(&r);
}

TEST(directory_is_an_io_error)
{
    arch_config c;
    np_err e = {0};
    CU_ASSERT_EQUAL(arch_load_file(harness_src_path("tests/data/arch"), &c, &e), NP_ERR_IO);
    EXPECT_STR(e.msg, "is a directory, not a config file");
}

TEST(odd_and_huge_inputs_give_errors_not_crashes)
{
    size_t n = 300000;
    char *text = malloc(n + 64);
    arch_config c;
    np_err e = {0};
    /* deep nesting is refused at its first bracket, never walked */
    strcpy(text, "core:\n  array_rows: ");
    size_t at = strlen(text);
    memset(text + at, '[', n);
    text[at + n] = '\0';
    CU_ASSERT_EQUAL(arch_load_string(text, strlen(text), "deep.yaml", &c, &e), NP_ERR_TYPE);
    CU_ASSERT_EQUAL(e.line, 2);
    CU_ASSERT_EQUAL(e.col, 15);
    /* a huge key (libyaml takes a plain key of over 1024 characters for a scalar) and a huge
     * value */
    memset(text, 'k', n);
    memcpy(text + n, ": 1\n", 5);
    CU_ASSERT_EQUAL(arch_load_string(text, strlen(text), "k.yaml", &c, &e), NP_ERR_TYPE);
    memcpy(text + 1000, ": 1\n", 5);
    CU_ASSERT_EQUAL(arch_load_string(text, strlen(text), "k.yaml", &c, &e), NP_ERR_UNKNOWN_KEY);
    snprintf(text, 64, "core:\n  array_rows: ");
    at = strlen(text);
    memset(text + at, '9', n);
    text[at + n] = '\0';
    CU_ASSERT_EQUAL(arch_load_string(text, strlen(text), "v.yaml", &c, &e), NP_ERR_RANGE);
    /* a long name; a NUL in a value; a name that is a mapping */
    static const char longname[] = "name: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n";
    CU_ASSERT_EQUAL(arch_load_string(longname, strlen(longname), "n.yaml", &c, &e), NP_ERR_RANGE);
    EXPECT_STR(e.msg, "name is longer than 63 characters");
    static const char nul[] = "core:\n  dataflow: \"ws\\0x\"\n";
    CU_ASSERT_EQUAL(arch_load_string(nul, strlen(nul), "z.yaml", &c, &e), NP_ERR_TYPE);
    EXPECT_STR(e.msg, "core.dataflow: the value holds a control character");
    static const char block[] = "core:\n  array_rows: |\n    12\n    34\n";
    CU_ASSERT_EQUAL(arch_load_string(block, strlen(block), "b.yaml", &c, &e), NP_ERR_TYPE);
    CU_ASSERT_PTR_NULL(strchr(e.msg, '\n'));
    static const char qkey[] = "core:\n  \"arr\\nay\": 1\n";
    CU_ASSERT_EQUAL(arch_load_string(qkey, strlen(qkey), "q.yaml", &c, &e), NP_ERR_UNKNOWN_KEY);
    EXPECT_STR(e.msg, "unknown key 'core.arr?ay'");
    arch_defaults(&c);
    CU_ASSERT_EQUAL(arch_set(&c, "core.dataflow=w\ns", &e), NP_ERR_TYPE);
    CU_ASSERT_EQUAL(arch_load_string(nul, strlen(nul), "z.yaml", &c, NULL), NP_ERR_TYPE);
    CU_ASSERT_EQUAL(arch_load_string(longname, 20, "z.yaml", &c, NULL), NP_OK);
    static const char map[] = "name: {a: 1}\n";
    CU_ASSERT_EQUAL(arch_load_string(map, strlen(map), "m.yaml", &c, &e), NP_ERR_TYPE);
    EXPECT_STR(e.msg, "name expects a string, got a mapping");
    free(text);
}

/* Every prefix of every preset, and many random corruptions of one, either load or fail with
 * an ordinary error placed inside the text: no crash, no hang, no internal error. */
static void check_fails_cleanly(const char *text, size_t len, np_status st, const np_err *e)
{
    if (st == NP_OK)
        return;
    int lines = 1;
    for (size_t i = 0; i < len; i++)
        lines += text[i] == '\n';
    CU_ASSERT(st != NP_ERR_INTERNAL && st != NP_ERR_NOMEM && st != NP_ERR_USAGE);
    CU_ASSERT(e->line >= 1 && e->line <= lines + 1);
    CU_ASSERT(e->col >= 1);
    CU_ASSERT(e->msg[0] != '\0');
}

TEST(every_prefix_of_every_preset_loads_or_fails_with_a_position)
{
    for (size_t p = 0; p < N_PRESETS; p++) {
        char rel[64];
        size_t len;
        snprintf(rel, sizeof rel, "configs/%s.yaml", presets[p]);
        char *text = harness_read_file(harness_src_path(rel), &len);
        CU_ASSERT_PTR_NOT_NULL_FATAL(text);
        for (size_t n = 0; n <= len; n++) {
            arch_config c;
            np_err e = {0};
            np_status st = arch_load_string(text, n, "p.yaml", &c, &e);
            check_fails_cleanly(text, n, st, &e);
        }
        free(text);
    }
}

TEST(random_corruptions_of_a_preset_fail_cleanly)
{
    size_t len;
    char *orig = harness_read_file(harness_src_path("configs/tpu-pod.yaml"), &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(orig);
    char *text = malloc(len + 1);
    static const char bytes[] = ":{}[]-,#&*!|>'\"%@` \t\n\r\0\x80\xff"
                                "0123456789.aZ~";
    uint64_t seed = 12345;
    for (int round = 0; round < 3000; round++) {
        memcpy(text, orig, len + 1);
        for (int k = 0; k < 1 + round % 4; k++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            size_t at = (size_t)(seed >> 33) % len;
            text[at] = bytes[(seed >> 20) % (sizeof bytes - 1)];
        }
        arch_config c;
        np_err e = {0};
        np_status st = arch_load_string(text, len, "r.yaml", &c, &e);
        if (st == NP_OK)
            st = arch_validate(&c, &e);
        if (st != NP_OK && st != NP_ERR_INCONSISTENT)
            check_fails_cleanly(text, len, st, &e);
    }
    free(text);
    free(orig);
}

/* ---- Presets -------------------------------------------------------------------------------- */

TEST(every_preset_validates)
{
    for (size_t i = 0; i < N_PRESETS; i++) {
        arch_config c;
        np_err e = {0};
        np_status st = arch_resolve(presets[i], NULL, 0, &c, &e);
        if (st != NP_OK)
            fprintf(stderr, "\n    %s: %s\n", presets[i], e.msg);
        CU_ASSERT_EQUAL(st, NP_OK);
        EXPECT_STR(c.name, presets[i]);
    }
    harness_run r = harness_npusim("config", "check", "tiny", "edge", "tpu-pod", "a100-cluster",
                                   "a100-80g", "h100-sxm", NULL);
    CU_ASSERT_EQUAL(r.exit_status, 0);
    EXPECT_STR(r.out, "tiny: ok\nedge: ok\ntpu-pod: ok\na100-cluster: ok\na100-80g: ok\n"
                      "h100-sxm: ok\n");
    EXPECT_STR(r.err, "");
    harness_run_free(&r);
}

TEST(check_reports_every_bad_file_in_order_and_exits_2)
{
    char a[4096], b[4096], want[9000];
    snprintf(a, sizeof a, "%s", data_path("negative.yaml"));
    snprintf(b, sizeof b, "%s", data_path("unknown_key.yaml"));
    harness_run r = harness_npusim("config", "check", "tiny", a, b, "edge", NULL);
    CU_ASSERT_EQUAL(r.exit_status, 2);
    EXPECT_STR(r.out, "tiny: ok\nedge: ok\n");
    snprintf(want, sizeof want,
             "npusim: %s:2:10: chip.cores = -4 cores is out of range: allowed 1 to 65536 cores\n"
             "npusim: %s:3:3: unknown key 'core.arry_cols'; did you mean 'core.array_cols'?\n",
             a, b);
    EXPECT_STR(r.err, want);
    harness_run_free(&r);
}

static json_t *show_json(const char *preset, const char *set)
{
    harness_run r = set ? harness_npusim("config", "show", preset, "--set", set, "--json", NULL)
                        : harness_npusim("config", "show", preset, "--json", NULL);
    CU_ASSERT_EQUAL(r.exit_status, 0);
    json_error_t je;
    json_t *j = json_loads(r.out, 0, &je);
    if (!j)
        fprintf(stderr, "\n    invalid JSON: %s (line %d)\n", je.text, je.line);
    harness_run_free(&r);
    return j;
}

TEST(show_json_has_every_schema_key_with_its_unit)
{
    json_t *j = show_json("tpu-pod", NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    EXPECT_STR(json_string_value(json_object_get(j, "name")), "tpu-pod");
    size_t seen = 0;
    for (int s = 0; s < ARCH_SECTION_COUNT; s++)
        seen += json_object_size(json_object_get(j, arch_sections[s].name));
    CU_ASSERT_EQUAL(seen, ARCH_KEY_COUNT);
    for (size_t i = 0; i < ARCH_KEY_COUNT; i++) {
        const arch_key_info *k = &arch_keys[i];
        json_t *entry = json_object_get(json_object_get(j, k->section_name), k->name);
        CU_ASSERT_PTR_NOT_NULL(entry);
        CU_ASSERT_PTR_NOT_NULL(json_object_get(entry, "value"));
        EXPECT_STR(json_string_value(json_object_get(entry, "unit")), k->unit);
    }
    /* a few units, spelled out */
    EXPECT_STR(json_string_value(json_object_get(
                   json_object_get(json_object_get(j, "core"), "array_rows"), "unit")),
               "PEs");
    EXPECT_STR(json_string_value(json_object_get(
                   json_object_get(json_object_get(j, "chip"), "hbm_gb_per_s"), "unit")),
               "GB/s");
    json_decref(j);
}

static double jnum(json_t *j, const char *sec, const char *key)
{
    json_t *v = json_object_get(json_object_get(json_object_get(j, sec), key), "value");
    CU_ASSERT(json_is_number(v));
    return json_number_value(v);
}

static const char *jstr(json_t *j, const char *sec, const char *key)
{
    json_t *v = json_object_get(json_object_get(json_object_get(j, sec), key), "value");
    return json_string_value(v) ? json_string_value(v) : "(not a string)";
}

TEST(show_json_set_changes_array_rows)
{
    json_t *j = show_json("tpu-pod", "core.array_rows=256");
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    CU_ASSERT_EQUAL(jnum(j, "core", "array_rows"), 256);
    CU_ASSERT_EQUAL(jnum(j, "core", "array_cols"), 128);
    /* 2 x 256 x 128 x 1.05 GHz x 8 cores = 550.5024 TFLOP/s */
    CU_ASSERT_DOUBLE_EQUAL(jnum(j, "derived", "chip_peak_tflops_bf16"), 550.5024, 1e-9);
    json_decref(j);
}

/* tpu-pod.yaml's values, written out by hand from the file. */
TEST(tpu_pod_json_values_equal_the_numbers_written_in_its_yaml)
{
    json_t *j = show_json("tpu-pod", NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    CU_ASSERT_EQUAL(jnum(j, "core", "array_rows"), 128);
    CU_ASSERT_EQUAL(jnum(j, "core", "array_cols"), 128);
    EXPECT_STR(jstr(j, "core", "dataflow"), "ws");
    CU_ASSERT_EQUAL(jnum(j, "core", "clock_ghz"), 1.05);
    CU_ASSERT_EQUAL(jnum(j, "core", "macs_per_pe_bf16"), 1);
    CU_ASSERT_EQUAL(jnum(j, "core", "macs_per_pe_fp16"), 0);
    CU_ASSERT_EQUAL(jnum(j, "core", "macs_per_pe_fp32"), 0.166667);
    CU_ASSERT_EQUAL(jnum(j, "core", "macs_per_pe_int8"), 1);
    CU_ASSERT_EQUAL(jnum(j, "core", "vector_lanes"), 256);
    CU_ASSERT_EQUAL(jnum(j, "core", "vector_ops_per_lane"), 1);
    CU_ASSERT_EQUAL(jnum(j, "core", "sram_bytes"), 8388608);
    CU_ASSERT_EQUAL(jnum(j, "core", "sram_banks"), 32);
    CU_ASSERT_EQUAL(jnum(j, "core", "sram_port_bytes_per_cycle"), 64);
    CU_ASSERT_EQUAL(jnum(j, "core", "acc_bytes"), 2097152);
    CU_ASSERT_EQUAL(jnum(j, "chip", "cores"), 8);
    CU_ASSERT_EQUAL(jnum(j, "chip", "mesh_x"), 4);
    CU_ASSERT_EQUAL(jnum(j, "chip", "mesh_y"), 2);
    CU_ASSERT_EQUAL(jnum(j, "chip", "noc_clock_ghz"), 1.05);
    CU_ASSERT_EQUAL(jnum(j, "chip", "noc_flit_bytes"), 64);
    CU_ASSERT_EQUAL(jnum(j, "chip", "noc_router_cycles"), 2);
    CU_ASSERT_EQUAL(jnum(j, "chip", "noc_link_cycles"), 1);
    CU_ASSERT_EQUAL(jnum(j, "chip", "noc_vcs"), 4);
    CU_ASSERT_EQUAL(jnum(j, "chip", "noc_vc_buf_flits"), 8);
    CU_ASSERT_EQUAL(jnum(j, "chip", "hbm_bytes"), 34359738368.0);
    CU_ASSERT_EQUAL(jnum(j, "chip", "hbm_channels"), 32);
    CU_ASSERT_EQUAL(jnum(j, "chip", "hbm_gb_per_s"), 1200);
    CU_ASSERT_EQUAL(jnum(j, "chip", "hbm_latency_ns"), 100);
    CU_ASSERT_EQUAL(jnum(j, "system", "chips"), 4096);
    EXPECT_STR(jstr(j, "system", "topology"), "torus3d");
    CU_ASSERT_EQUAL(jnum(j, "system", "torus_x"), 16);
    CU_ASSERT_EQUAL(jnum(j, "system", "torus_y"), 16);
    CU_ASSERT_EQUAL(jnum(j, "system", "torus_z"), 16);
    CU_ASSERT_EQUAL(jnum(j, "system", "links_per_chip"), 6);
    CU_ASSERT_EQUAL(jnum(j, "system", "link_gb_per_s"), 50);
    CU_ASSERT_EQUAL(jnum(j, "system", "link_latency_ns"), 500);
    /* not written in the file: the defaults */
    CU_ASSERT_EQUAL(jnum(j, "system", "island_chips"), 8);
    CU_ASSERT_EQUAL(jnum(j, "system", "switch_radix"), 64);
    json_decref(j);
}

/* An independent reading of each preset: every "  key: value" line of the file, taken apart
 * here by hand (no libyaml), must equal what `config show --json` reports. */
TEST(every_value_written_in_a_preset_file_is_what_show_reports)
{
    static const struct {
        const char *unit;
        double mult;
    } units[] = {{"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}};
    for (size_t p = 0; p < N_PRESETS; p++) {
        char rel[64], section[32] = "";
        snprintf(rel, sizeof rel, "configs/%s.yaml", presets[p]);
        char *text = harness_read_file(harness_src_path(rel), NULL);
        CU_ASSERT_PTR_NOT_NULL_FATAL(text);
        json_t *j = show_json(presets[p], NULL);
        CU_ASSERT_PTR_NOT_NULL_FATAL(j);
        int checked = 0;
        for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
            char *hash = strchr(line, '#');
            if (hash)
                *hash = '\0';
            char key[64], value[64];
            if (line[0] != ' ' && sscanf(line, "%31[a-z]:", section) == 1)
                continue;
            if (sscanf(line, " %63[a-z0-9_]: %63[^\n]", key, value) != 2 || line[0] != ' ')
                continue;
            for (char *end = value + strlen(value); end > value && end[-1] == ' ';)
                *--end = '\0';
            char *rest;
            double want = strtod(value, &rest);
            while (*rest == ' ')
                rest++;
            if (rest == value) { /* a name */
                EXPECT_STR(jstr(j, section, key), value);
            } else {
                for (size_t u = 0; u < 3; u++)
                    if (strcmp(rest, units[u].unit) == 0)
                        want *= units[u].mult, rest += strlen(rest);
                CU_ASSERT_EQUAL(*rest, '\0');
                if (jnum(j, section, key) != want)
                    fprintf(stderr, "\n    %s: %s.%s = %s\n", presets[p], section, key, value);
                CU_ASSERT_EQUAL(jnum(j, section, key), want);
            }
            checked++;
        }
        CU_ASSERT(checked >= 15);
        json_decref(j);
        free(text);
    }
}

/* The published peaks the presets are meant to reproduce. */
TEST(presets_reproduce_published_peak_throughput)
{
    arch_config c;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tpu-pod", NULL, 0, &c, &e), NP_OK);
    /* TPU v4: 275 TFLOP/s bf16 and 275 TOP/s int8 per chip; 32 GiB HBM at 1200 GB/s */
    CU_ASSERT_DOUBLE_EQUAL(arch_chip_peak_flops(&c, c.core.macs_per_pe_bf16) / 1e12, 275, 0.5);
    CU_ASSERT_DOUBLE_EQUAL(arch_chip_peak_flops(&c, c.core.macs_per_pe_int8) / 1e12, 275, 0.5);
    CU_ASSERT_EQUAL(c.chip.hbm_bytes, 32ull << 30);
    CU_ASSERT_EQUAL(c.system.chips, 4096);
    CU_ASSERT_EQUAL_FATAL(arch_resolve("a100-cluster", NULL, 0, &c, &e), NP_OK);
    /* A100: 312 TFLOP/s bf16, 156 TF32, 624 TOP/s int8; NVLink3 300 GB/s per direction */
    CU_ASSERT_DOUBLE_EQUAL(arch_chip_peak_flops(&c, c.core.macs_per_pe_bf16) / 1e12, 312, 0.5);
    CU_ASSERT_DOUBLE_EQUAL(arch_chip_peak_flops(&c, c.core.macs_per_pe_fp32) / 1e12, 156, 0.5);
    CU_ASSERT_DOUBLE_EQUAL(arch_chip_peak_flops(&c, c.core.macs_per_pe_int8) / 1e12, 624, 1.0);
    CU_ASSERT_DOUBLE_EQUAL((double)c.system.links_per_chip * c.system.link_gb_per_s, 300, 1e-9);
    CU_ASSERT_EQUAL(c.chip.hbm_gb_per_s, 2039);
}

/* The real machines' presets against their white papers' and data sheets' figures (the
 * numbers as printed there, not derived from the files): A100 SXM4 80GB in a DGX A100, H100
 * SXM5 in a DGX H100. */
TEST(a100_80g_and_h100_sxm_reproduce_their_data_sheets)
{
    arch_config c;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(arch_resolve("a100-80g", NULL, 0, &c, &e), NP_OK);
    /* A100 white paper, Table 1: 312 TFLOP/s FP16/BF16 dense, 156 TF32, 624 TOP/s INT8;
     * 108 SMs at 1410 MHz; data sheet: 80 GB HBM2e at 2,039 GB/s, NVLink 600 GB/s both ways */
    CU_ASSERT_DOUBLE_EQUAL(arch_chip_peak_flops(&c, c.core.macs_per_pe_bf16) / 1e12, 312, 0.5);
    CU_ASSERT_DOUBLE_EQUAL(arch_chip_peak_flops(&c, c.core.macs_per_pe_fp16) / 1e12, 312, 0.5);
    CU_ASSERT_DOUBLE_EQUAL(arch_chip_peak_flops(&c, c.core.macs_per_pe_fp32) / 1e12, 156, 0.5);
    CU_ASSERT_DOUBLE_EQUAL(arch_chip_peak_flops(&c, c.core.macs_per_pe_int8) / 1e12, 624, 1.0);
    CU_ASSERT_EQUAL(c.chip.cores, 108);
    CU_ASSERT_DOUBLE_EQUAL(c.core.clock_ghz, 1.41, 1e-12);
    CU_ASSERT_EQUAL(c.chip.hbm_bytes, 80ull << 30);
    CU_ASSERT_EQUAL(c.chip.hbm_gb_per_s, 2039);
    CU_ASSERT_DOUBLE_EQUAL(2.0 * (double)c.system.links_per_chip * c.system.link_gb_per_s, 600,
                           1e-9);
    /* DGX A100: 8 GPUs per node, one HDR 200 Gb/s adapter each; one node by default */
    CU_ASSERT_EQUAL(c.system.topology, ARCH_TOPOLOGY_HIERARCHICAL);
    CU_ASSERT_EQUAL(c.system.island_chips, 8);
    CU_ASSERT_EQUAL(c.system.chips, 8);
    CU_ASSERT_DOUBLE_EQUAL(c.system.scaleout_gb_per_s * 8, 200, 1e-9);

    CU_ASSERT_EQUAL_FATAL(arch_resolve("h100-sxm", NULL, 0, &c, &e), NP_OK);
    /* H100 white paper, Table 3 (SXM5): 989.4 TFLOP/s BF16/FP16 dense, 494.7 TF32, 1978.9
     * TOP/s INT8, 132 SMs; data sheet: 80 GB HBM3 at 3.35 TB/s, NVLink 900 GB/s both ways */
    CU_ASSERT_DOUBLE_EQUAL(arch_chip_peak_flops(&c, c.core.macs_per_pe_bf16) / 1e12, 989.4, 0.1);
    CU_ASSERT_DOUBLE_EQUAL(arch_chip_peak_flops(&c, c.core.macs_per_pe_fp16) / 1e12, 989.4, 0.1);
    CU_ASSERT_DOUBLE_EQUAL(arch_chip_peak_flops(&c, c.core.macs_per_pe_fp32) / 1e12, 494.7, 0.1);
    CU_ASSERT_DOUBLE_EQUAL(arch_chip_peak_flops(&c, c.core.macs_per_pe_int8) / 1e12, 1978.9, 0.1);
    CU_ASSERT_EQUAL(c.chip.cores, 132);
    CU_ASSERT_EQUAL(c.chip.hbm_bytes, 80ull << 30);
    CU_ASSERT_DOUBLE_EQUAL(c.chip.hbm_gb_per_s, 3350, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(2.0 * (double)c.system.links_per_chip * c.system.link_gb_per_s, 900,
                           1e-9);
    /* DGX H100: 8 GPUs per node, one NDR 400 Gb/s adapter each; one node by default */
    CU_ASSERT_EQUAL(c.system.topology, ARCH_TOPOLOGY_HIERARCHICAL);
    CU_ASSERT_EQUAL(c.system.island_chips, 8);
    CU_ASSERT_EQUAL(c.system.chips, 8);
    CU_ASSERT_DOUBLE_EQUAL(c.system.scaleout_gb_per_s * 8, 400, 1e-9);
}

TEST(text_show_loads_back_to_the_same_config)
{
    for (size_t p = 0; p < N_PRESETS; p++) {
        harness_run r = harness_npusim("config", "show", presets[p], NULL);
        CU_ASSERT_EQUAL(r.exit_status, 0);
        CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "  array_rows: "));
        CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "# PEs\n"));
        arch_config shown, orig;
        np_err e = {0};
        CU_ASSERT_EQUAL_FATAL(arch_load_string(r.out, strlen(r.out), "shown.yaml", &shown, &e),
                              NP_OK);
        CU_ASSERT_EQUAL_FATAL(arch_resolve(presets[p], NULL, 0, &orig, &e), NP_OK);
        EXPECT_STR(shown.name, orig.name);
        for (size_t i = 0; i < ARCH_KEY_COUNT; i++)
            CU_ASSERT_EQUAL(arch_get(&shown, &arch_keys[i]), arch_get(&orig, &arch_keys[i]));
        harness_run_free(&r);
    }
}

TEST(config_list_includes_every_preset)
{
    harness_run r = harness_npusim("config", "list", NULL);
    CU_ASSERT_EQUAL(r.exit_status, 0);
    for (size_t i = 0; i < N_PRESETS; i++) {
        char want[64];
        snprintf(want, sizeof want, "%s ", presets[i]);
        CU_ASSERT(strncmp(r.out, want, strlen(want)) == 0 || strstr(r.out, want) != NULL);
    }
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "tpu-pod        4096 chips (torus3d) x 8 cores x "
                                         "128x128 PEs, 275.3 TFLOP/s bf16 per chip\n"));
    harness_run_free(&r);

    r = harness_npusim("config", "list", "--json", NULL);
    CU_ASSERT_EQUAL(r.exit_status, 0);
    json_t *j = json_loads(r.out, 0, NULL);
    CU_ASSERT_FATAL(json_is_array(j));
    for (size_t i = 0; i < N_PRESETS; i++) {
        bool found = false;
        for (size_t k = 0; k < json_array_size(j); k++) {
            json_t *e = json_array_get(j, k);
            found |= strcmp(json_string_value(json_object_get(e, "name")), presets[i]) == 0 &&
                     json_string_value(json_object_get(e, "path")) != NULL;
        }
        CU_ASSERT(found);
    }
    json_decref(j);
    harness_run_free(&r);
}

TEST(unknown_preset_lists_the_presets_with_a_suggestion)
{
    arch_config c;
    np_err e = {0};
    CU_ASSERT_EQUAL(arch_resolve("tpu_pod", NULL, 0, &c, &e), NP_ERR_UNKNOWN_KEY);
    EXPECT_STR(e.msg, "unknown preset 'tpu_pod'; did you mean 'tpu-pod'? (presets: "
                      "a100-80g, a100-cluster, edge, h100-sxm, tiny, tpu-pod; or give a file "
                      "path)");
    harness_run r = harness_npusim("config", "show", "zzzzzz", NULL);
    CU_ASSERT_EQUAL(r.exit_status, 2);
    EXPECT_STR(r.err, "npusim: unknown preset 'zzzzzz' (presets: a100-80g, a100-cluster, edge, "
                      "h100-sxm, tiny, tpu-pod; or give a file path)\n");
    harness_run_free(&r);
}

TEST(an_argument_with_a_slash_or_yaml_suffix_is_a_file)
{
    char path[64];
    arch_config c;
    np_err e = {0};
    CU_ASSERT_EQUAL(arch_locate("tiny", path, sizeof path, &e), NP_OK);
    CU_ASSERT(strstr(path, "/tiny.yaml") != NULL);
    CU_ASSERT_EQUAL(arch_locate("./tiny", path, sizeof path, &e), NP_OK);
    EXPECT_STR(path, "./tiny");
    CU_ASSERT_EQUAL(arch_locate("tiny.yml", path, sizeof path, &e), NP_OK);
    EXPECT_STR(path, "tiny.yml");
    CU_ASSERT_EQUAL(arch_resolve("nowhere.yaml", NULL, 0, &c, &e), NP_ERR_IO);
    EXPECT_STR(e.file, "nowhere.yaml");
}

TEST(config_dir_variable_overrides_the_preset_folder)
{
    char dir[] = "/tmp/npusim_arch_presets_XXXXXX", file[128];
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
    snprintf(file, sizeof file, "%s/my-npu.yaml", dir);
    FILE *f = fopen(file, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs("core:\n  array_rows: 64\n", f);
    fclose(f);
    setenv("NPUSIM_CONFIG_DIR", dir, 1);
    EXPECT_STR(arch_config_dir(), dir);
    json_t *j = show_json("my-npu", NULL);
    CU_ASSERT_PTR_NOT_NULL(j);
    if (j) {
        EXPECT_STR(json_string_value(json_object_get(j, "name")), "my-npu");
        CU_ASSERT_EQUAL(jnum(j, "core", "array_rows"), 64);
        json_decref(j);
    }
    harness_run r = harness_npusim("config", "list", NULL);
    CU_ASSERT_EQUAL(strncmp(r.out, "my-npu ", 7), 0);
    CU_ASSERT_PTR_NULL(strstr(r.out, "tpu-pod"));
    harness_run_free(&r);
    unsetenv("NPUSIM_CONFIG_DIR");
    unlink(file);
    rmdir(dir);
}

/* ---- The command line and the docs ---------------------------------------------------------- */

TEST(config_usage_errors_exit_2_with_a_hint)
{
    static const char *const cases[][4] = {
        {"config", NULL, NULL, NULL},
        {"config", "shw", NULL, NULL},
        {"config", "show", NULL, NULL},
        {"config", "check", "tiny", "--set"},
        {"config", "doc", "extra", NULL},
    };
    static const char *const msgs[] = {
        "npusim: config needs a subcommand: show, check, list or doc\n",
        "npusim: unknown config subcommand 'shw'; did you mean 'show'?\n",
        "npusim: config show needs a PRESET or FILE\n",
        "npusim: option '--set' needs an argument\n",
        "npusim: unexpected argument 'extra'\n",
    };
    for (size_t i = 0; i < sizeof msgs / sizeof msgs[0]; i++) {
        harness_run r = harness_npusim(cases[i][0], cases[i][1], cases[i][2], cases[i][3], NULL);
        CU_ASSERT_EQUAL(r.exit_status, 2);
        CU_ASSERT_EQUAL(strncmp(r.err, msgs[i], strlen(msgs[i])), 0);
        CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "Run 'npusim config --help' for usage."));
        harness_run_free(&r);
    }
}

TEST(config_help_lists_the_subcommands)
{
    harness_run r = harness_npusim("config", "show", "--help", NULL);
    CU_ASSERT_EQUAL(r.exit_status, 0);
    const char *subs[] = {"config show PRESET|FILE", "config check", "config list", "config doc",
                          "--set SECTION.KEY=VALUE", "--json"};
    for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++)
        CU_ASSERT_PTR_NOT_NULL(strstr(r.out, subs[i]));
    harness_run_free(&r);
}

TEST(docs_config_md_matches_the_generated_reference)
{
    harness_run r = harness_npusim("config", "doc", NULL);
    CU_ASSERT_EQUAL(r.exit_status, 0);
    char *committed = harness_read_file(harness_src_path("docs/config.md"), NULL);
    if (!committed || strcmp(committed, r.out) != 0) {
        fprintf(stderr, "\n    docs/config.md is out of date with base/arch_schema.def; "
                        "regenerate it with:\n      %s config doc > %s\n",
                NPUSIM_BIN, harness_src_path("docs/config.md"));
        CU_FAIL("docs/config.md differs from `npusim config doc`; regenerate it with "
                "`npusim config doc > docs/config.md`");
    }
    /* and the reference names every key */
    for (size_t i = 0; i < ARCH_KEY_COUNT; i++) {
        char cell[96];
        snprintf(cell, sizeof cell, "| `%s` |", arch_keys[i].name);
        CU_ASSERT_PTR_NOT_NULL(strstr(r.out, cell));
    }
    free(committed);
    harness_run_free(&r);
}

/* ---- area (arch_area.h) ---- */

TEST(a_chips_area_is_the_sum_of_its_units_by_hand_and_config_show_prints_it)
{
    arch_config cfg;
    np_err e = {0};
    const char *sets[] = {"core.array_rows=4", "core.array_cols=8", "chip.cores=2",
                          "core.sram_bytes=1 MiB", "core.acc_bytes=256 KiB",
                          "core.vector_lanes=16", "chip.l2_bytes=4 MiB", "chip.mesh_x=2",
                          "chip.mesh_y=1", "chip.hbm_channels=8", "system.links_per_chip=2",
                          "system.chips=4", "area.pe_um2=1000", "area.vector_lane_um2=500",
                          "area.sram_mm2_per_mib=3", "area.acc_mm2_per_mib=4",
                          "area.l2_mm2_per_mib=2", "area.router_mm2=0.5",
                          "area.mem_channel_mm2=1.5", "area.link_mm2=3", "area.other_mm2=10"};
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tiny", sets, sizeof sets / sizeof sets[0], &cfg, &e), NP_OK);
    arch_area_figures a;
    arch_area_of(&cfg, &a);
    CU_ASSERT_TRUE(a.modelled);
    /* 2 cores x 32 PEs x 1000 um2; 2 x 16 lanes x 500 um2; 2 x 1 MiB x 3; 2 x 1/4 MiB x 4;
     * 4 MiB x 2; 2 routers x 0.5; 8 channels x 1.5; 2 links x 3; 10 */
    const double part[] = {0.064, 0.016, 6, 2, 8, 1, 12, 6, 10};
    double sum = 0;
    for (int i = 0; i < ARCH_AREA_PART_COUNT; i++) {
        CU_ASSERT_DOUBLE_EQUAL(a.part_mm2[i], part[i], 1e-12);
        sum += part[i];
    }
    CU_ASSERT_DOUBLE_EQUAL(a.chip_mm2, 45.08, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(a.chip_mm2, sum, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(a.system_mm2, 4 * 45.08, 1e-12);
    /* no area key: not modelled, and config show prints no area */
    arch_config plain;
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tiny", NULL, 0, &plain, &e), NP_OK);
    arch_area_of(&plain, &a);
    CU_ASSERT_FALSE(a.modelled);
    CU_ASSERT_DOUBLE_EQUAL(a.chip_mm2, 0, 0);
    harness_run r = harness_npusim("config", "show", "tiny", "--set", "area.pe_um2=1000",
                                   "--set", "area.other_mm2=10", "--json", NULL);
    CU_ASSERT_EQUAL_FATAL(r.exit_status, 0);
    json_t *j = json_loads(r.out, 0, NULL);
    json_t *d = json_object_get(json_object_get(j, "derived"), "chip_area_mm2");
    /* tiny: 2 cores of 4 x 4 PEs (32 x 1000 um2) + 10 */
    CU_ASSERT_DOUBLE_EQUAL(json_real_value(json_object_get(d, "value")), 32 * 1000e-6 + 10, 1e-9);
    json_decref(j);
    harness_run_free(&r);
    r = harness_npusim("config", "show", "tiny", NULL);
    CU_ASSERT_PTR_NULL(strstr(r.out, "area of one chip"));
    harness_run_free(&r);
}
