/* arch_doc.c — docs/config.md, generated from the schema and the consistency rules
 * (`npusim config doc > docs/config.md`; a test fails when the committed file differs). */
#include <math.h>

#include "arch.h"

static char *doc_num(double x, char *buf, size_t n)
{
    if (x == floor(x) && fabs(x) < 1e15)
        snprintf(buf, n, "%.0f", x);
    else
        snprintf(buf, n, "%.15g", x);
    return buf;
}

static const char *doc_type_name(const arch_key_info *k)
{
    switch (k->type) {
    case ARCH_TYPE_INT: return "integer";
    case ARCH_TYPE_REAL: return "real";
    case ARCH_TYPE_SIZE: return "size";
    case ARCH_TYPE_ENUM: return k->enum_info->name;
    case ARCH_TYPE_COUNT: break;
    }
    return "?";
}

static void doc_intro(FILE *out)
{
    fputs(
        "# Architecture configuration\n"
        "\n"
        "<!-- Generated from base/arch_schema.def by `npusim config doc`; do not edit by hand.\n"
        "     Regenerate with: npusim config doc > docs/config.md -->\n"
        "\n"
        "An architecture config describes the simulated system: the NPU **core** (systolic\n"
        "array, vector unit, scratchpad and accumulator SRAMs), the **chip** (its cores on a\n"
        "mesh network-on-chip, and its off-chip memory) and the **system** (the chips and the\n"
        "network between them). It is a YAML file; comments are allowed:\n"
        "\n"
        "```yaml\n"
        "name: my-npu          # optional; defaults to the file's base name\n"
        "core:\n"
        "  array_rows: 64\n"
        "  array_cols: 64\n"
        "  sram_bytes: 8 MiB\n"
        "chip:\n"
        "  cores: 4\n"
        "  mesh_x: 2\n"
        "  mesh_y: 2\n"
        "system:\n"
        "  chips: 1\n"
        "```\n"
        "\n"
        "Every section and every key is optional: an omitted key takes its default (below), and\n"
        "the defaults on their own form a valid config. A file holds one YAML document whose top\n"
        "level is a mapping of `name` and the sections `core`, `chip`, `system`, `energy` and\n"
        "`area`; each\n"
        "section is a mapping of `key: value`. Unknown sections or keys, a key given twice, and\n"
        "YAML aliases are errors.\n"
        "\n"
        "## Where a config comes from\n"
        "\n"
        "`npusim config show`, `npusim config check` and `npusim run` take a PRESET or a FILE:\n"
        "\n"
        "- an argument that names an existing file, contains `/`, or ends in `.yaml` or `.yml`\n"
        "  is a file;\n"
        "- anything else is a preset, the file `NAME.yaml` in `$NPUSIM_CONFIG_DIR` (the source\n"
        "  tree's `configs/` when the variable is unset or empty). `npusim config list` lists\n"
        "  them.\n"
        "\n"
        "The config is built in this order: the defaults, then the file, then each\n"
        "`--set SECTION.KEY=VALUE` override in the order given (`--set name=NAME` renames), and\n"
        "only then the consistency checks below. So a `--set` can repair an inconsistent file,\n"
        "and a `--set` that makes the config inconsistent is reported as such. `--set` values are\n"
        "parsed exactly like values in files.\n"
        "\n"
        "## Values\n"
        "\n"
        "| type | written as | examples |\n"
        "|---|---|---|\n"
        "| integer | a decimal integer; a number with no fractional part is accepted | `128`, "
        "`1e3` |\n"
        "| real | a decimal number, optionally with an exponent | `1.05`, `0.25`, `1e-3` |\n"
        "| size | a number of bytes, or a number and a binary unit `B`, `KiB`, `MiB`, `GiB`, "
        "`TiB`, `PiB` (powers of 1024); it must come to a whole number of bytes. `kB`, `MB`, "
        "`GB`, `TB` are refused as ambiguous | `4096`, `512KiB`, `32 MiB`, `1.5 KiB` |\n"
        "| enum | one of the names listed for the key | `ws`, `torus3d` |\n"
        "\n"
        "A quoted number (`\"128\"`) is a string and is refused where an integer or a real is\n"
        "expected; sizes and enum names may be quoted. `~`, `null` and an empty value mean \"no\n"
        "value\", which is an error for a key (an empty section is fine).\n"
        "\n"
        "Peak throughput is derived, never configured. The MAC rates are per processing element\n"
        "(PE) per core cycle, so one chip's peak matmul throughput is\n"
        "\n"
        "    2 FLOP x array_rows x array_cols x macs_per_pe_TYPE x clock_ghz x 1e9 x cores\n"
        "\n"
        "per second; for example 128 x 128 PEs at 1.05 GHz, 1 bf16 MAC per PE per cycle and 8\n"
        "cores give 275 TFLOP/s. `npusim config show` prints these peaks.\n",
        out);
}

static void doc_section(FILE *out, int s)
{
    fprintf(out, "\n## `%s` — %s\n\n", arch_sections[s].name, arch_sections[s].help);
    fputs("| key | type | unit | default | allowed | description |\n"
          "|---|---|---|---|---|---|\n",
          out);
    arch_config def;
    arch_defaults(&def);
    for (size_t i = 0; i < ARCH_KEY_COUNT; i++) {
        const arch_key_info *k = &arch_keys[i];
        if ((int)k->section != s)
            continue;
        char dv[64], lo[48], hi[48], allowed[256];
        arch_value_text(&def, k, dv, sizeof dv);
        if (k->type == ARCH_TYPE_ENUM) {
            size_t used = 0;
            allowed[0] = '\0';
            for (size_t j = 0; j < k->enum_info->n && used < sizeof allowed; j++)
                used += (size_t)snprintf(allowed + used, sizeof allowed - used, "%s`%s`",
                                         j ? ", " : "", k->enum_info->values[j]);
        } else if (k->type == ARCH_TYPE_SIZE) {
            snprintf(allowed, sizeof allowed, "%s to %s",
                     arch_size_text((uint64_t)k->min, lo, sizeof lo),
                     arch_size_text((uint64_t)k->max, hi, sizeof hi));
        } else {
            snprintf(allowed, sizeof allowed, "%s to %s", doc_num(k->min, lo, sizeof lo),
                     doc_num(k->max, hi, sizeof hi));
        }
        fprintf(out, "| `%s` | %s | %s | `%s` | %s | %s |\n", k->name, doc_type_name(k),
                k->unit[0] ? k->unit : "", dv, allowed, k->help);
    }
    for (size_t i = 0; i < ARCH_KEY_COUNT; i++) {
        const arch_key_info *k = &arch_keys[i];
        if ((int)k->section != s || k->type != ARCH_TYPE_ENUM)
            continue;
        const arch_enum_info *e = k->enum_info;
        fprintf(out, "\n`%s.%s`: %s.\n\n| value | meaning |\n|---|---|\n", arch_sections[s].name,
                k->name, e->help);
        for (size_t j = 0; j < e->n; j++)
            fprintf(out, "| `%s` | %s |\n", e->values[j], e->value_help[j]);
    }
}

static void doc_checks(FILE *out)
{
    fputs("\n## Consistency checks\n"
          "\n"
          "After the file and every `--set` are applied, each value's range is checked, then\n"
          "these rules in this order. The first rule broken is reported as an `inconsistent`\n"
          "error with the values involved, at the first of the rule's keys (listed after it)\n"
          "given by `--set`, else at the first written in the file (its `file:line:col`).\n"
          "Rules about the chip-to-chip network do not apply to a 1-chip system, which is\n"
          "valid with any topology.\n\n",
          out);
    for (size_t i = 0; i < arch_n_checks; i++) {
        fprintf(out, "%zu. %s Reported at:", i + 1, arch_checks[i].rule);
        for (const arch_key *k = arch_checks[i].blame; *k != ARCH_KEY_COUNT; k++)
            fprintf(out, "%s `%s`", k == arch_checks[i].blame ? "" : ",",
                    arch_keys[*k].full_name);
        fputs(".\n", out);
    }
}

static void doc_output(FILE *out)
{
    fputs(
        "\n## Output\n"
        "\n"
        "`npusim config show PRESET|FILE [--set SECTION.KEY=VALUE ...]` prints the resolved\n"
        "config as YAML that loads again, every key with its unit in a comment, followed by the\n"
        "derived peak throughput of one chip and, when the `area` section is set, its area by\n"
        "part. With `--json` it prints one object with `name`, one\n"
        "object per section holding every key as `{\"value\": ..., \"unit\": ...}` (sizes as\n"
        "integers in bytes, enums as their names with unit `\"\"`), and `derived` (with an `area`\n"
        "section, also `chip_area_mm2` and `chip_area_<part>_mm2` for each part of\n"
        "base/arch_area.h: `pe`, `vector`, `sram`, `acc`, `l2`, `noc`, `mem`, `link`, `other`):\n"
        "\n"
        "```json\n"
        "{\n"
        "  \"name\": \"tpu-pod\",\n"
        "  \"core\": {\n"
        "    \"array_rows\": {\"value\": 128, \"unit\": \"PEs\"},\n"
        "    \"dataflow\": {\"value\": \"ws\", \"unit\": \"\"},\n"
        "    \"sram_bytes\": {\"value\": 8388608, \"unit\": \"bytes\"}\n"
        "  },\n"
        "  \"chip\": {\"cores\": {\"value\": 8, \"unit\": \"cores\"}},\n"
        "  \"system\": {\"topology\": {\"value\": \"torus3d\", \"unit\": \"\"}},\n"
        "  \"derived\": {\"chip_peak_tflops_bf16\": {\"value\": 275.2512, \"unit\": "
        "\"TFLOP/s\"}}\n"
        "}\n"
        "```\n"
        "\n"
        "(abridged: every key of the schema appears, in the order of the tables above).\n"
        "\n"
        "`npusim config check FILE...` prints `FILE: ok` for each valid config. `npusim config\n"
        "list [--json]` lists the presets; `npusim config doc` prints this file.\n"
        "\n"
        "## Errors\n"
        "\n"
        "A bad config stops the command with exit status 2 and one message on stderr per bad\n"
        "file, `npusim: FILE:LINE:COL: MESSAGE`, pointing at the offending key or value (the\n"
        "first problem in the file). The classes are `syntax` (not well-formed YAML, or more than one\n"
        "document), `type` (a value of the wrong kind: text for a number, a mapping for a value,\n"
        "a fraction for an integer, a bad size unit), `range` (outside the allowed range),\n"
        "`unknown_key` (unknown section, key, enum value or preset; with a did-you-mean),\n"
        "`duplicate`, `missing` (an empty file or value), `inconsistent` (above) and `io` (the\n"
        "file cannot be read). A bad `--set` is reported as `--set ASSIGNMENT: MESSAGE`.\n",
        out);
}

void arch_write_markdown(FILE *out)
{
    doc_intro(out);
    for (int s = 0; s < ARCH_SECTION_COUNT; s++)
        doc_section(out, s);
    doc_checks(out);
    doc_output(out);
}
