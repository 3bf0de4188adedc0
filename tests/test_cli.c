/* test_cli.c — the `npusim` command line: dispatch, help, version, usage errors and their
 * exit statuses, checked by running the built executable. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

TEST(no_command_is_a_usage_error_with_status_2)
{
    harness_run r = harness_npusim(NULL);
    CU_ASSERT_EQUAL(r.exit_status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "no command given"));
    harness_run_free(&r);
}

TEST(unknown_command_gets_suggestion_and_status_2)
{
    harness_run r = harness_npusim("confg", NULL);
    CU_ASSERT_EQUAL(r.exit_status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "unknown command 'confg'; did you mean 'config'?"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "--help"));
    CU_ASSERT_STRING_EQUAL(r.out, "");
    harness_run_free(&r);
}

TEST(unknown_option_names_the_option_and_exits_2)
{
    harness_run r = harness_npusim("version", "--jsn", NULL);
    CU_ASSERT_EQUAL(r.exit_status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "npusim: unknown option '--jsn'"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "Run 'npusim version --help' for usage."));
    harness_run_free(&r);

    r = harness_npusim("help", "-x", NULL);
    CU_ASSERT_EQUAL(r.exit_status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "unknown option '-x'"));
    harness_run_free(&r);
}

TEST(version_flag_and_command_agree)
{
    harness_run a = harness_npusim("--version", NULL);
    harness_run b = harness_npusim("version", NULL);
    CU_ASSERT_EQUAL(a.exit_status, 0);
    CU_ASSERT_STRING_EQUAL(a.out, b.out);
    CU_ASSERT_EQUAL(strncmp(a.out, "npusim ", 7), 0);
    harness_run_free(&a);
    harness_run_free(&b);
}

TEST(version_json_is_an_object_with_the_version)
{
    harness_run r = harness_npusim("version", "--json", NULL);
    CU_ASSERT_EQUAL(r.exit_status, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "\"version\": \""));
    CU_ASSERT_EQUAL(r.out[0], '{');
    harness_run_free(&r);
}

/* An installed npusim (cmake --install, docs/install.md) reads the presets, the zoo and the
 * validation data it was installed with, from any folder, with no environment variables. */
TEST(an_installed_npusim_finds_its_presets_zoo_and_validation_data_next_to_itself)
{
    char prefix[] = "/tmp/npusim-install-XXXXXX", cmd[4096], bin[256], share[256];
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(prefix));
    snprintf(cmd, sizeof cmd, "'%s' --install '%s' --prefix '%s' > /dev/null", NPUSIM_CMAKE,
             NPUSIM_BUILD_DIR, prefix);
    CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
    snprintf(bin, sizeof bin, "%s/bin/npusim", prefix);
    snprintf(share, sizeof share, "%s/bin/../share/npusim/", prefix);
    /* the version names the installed folders */
    snprintf(cmd, sizeof cmd, "cd / && env -u NPUSIM_CONFIG_DIR -u NPUSIM_MODEL_DIR "
             "-u NPUSIM_VALIDATION_DIR '%s' version > '%s/v.txt'", bin, prefix);
    CU_ASSERT_EQUAL(system(cmd), 0);
    char path[600];
    snprintf(path, sizeof path, "%s/v.txt", prefix);
    char *v = harness_read_file(path, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    char want[700];
    snprintf(want, sizeof want, "presets     %sconfigs\n", share);
    CU_ASSERT_PTR_NOT_NULL(strstr(v, want));
    snprintf(want, sizeof want, "models      %smodels\n", share);
    CU_ASSERT_PTR_NOT_NULL(strstr(v, want));
    snprintf(want, sizeof want, "validation  %svalidation\n", share);
    CU_ASSERT_PTR_NOT_NULL(strstr(v, want));
    free(v);
    /* and uses them: a preset, a zoo model and the validation list, from / */
    snprintf(cmd, sizeof cmd, "cd / && env -u NPUSIM_CONFIG_DIR -u NPUSIM_MODEL_DIR "
             "-u NPUSIM_VALIDATION_DIR sh -c \"'%s' config show a100-80g && "
             "'%s' plan --arch a100-80g --model gpt2-small --batch 8 && "
             "'%s' validate --list\" > /dev/null", bin, bin, bin);
    CU_ASSERT_EQUAL(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", prefix);
    CU_ASSERT_EQUAL(system(cmd), 0);
}

TEST(help_lists_every_command_of_the_table)
{
    static const char *names[] = {
#define NPUSIM_CMD(name, summary) #name,
#include "../sim/commands.def"
#undef NPUSIM_CMD
    };
    harness_run r = harness_npusim("help", NULL);
    CU_ASSERT_EQUAL(r.exit_status, 0);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char line[64];
        snprintf(line, sizeof line, "\n  %-10s ", names[i]);
        CU_ASSERT_PTR_NOT_NULL(strstr(r.out, line));
    }
    harness_run_free(&r);
}

TEST(every_command_answers_help_with_its_usage)
{
    static const char *names[] = {
#define NPUSIM_CMD(name, summary) #name,
#include "../sim/commands.def"
#undef NPUSIM_CMD
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        harness_run r = harness_npusim(names[i], "--help", NULL);
        char want[64];
        snprintf(want, sizeof want, "usage: npusim %s", names[i]);
        CU_ASSERT_EQUAL(r.exit_status, 0);
        CU_ASSERT_PTR_NOT_NULL(strstr(r.out, want));
        harness_run_free(&r);
    }
}

TEST(integer_options_outside_their_range_name_the_option_and_the_range)
{
    harness_run r = harness_npusim("noc", "--vcs", "0", NULL);
    CU_ASSERT_EQUAL(r.exit_status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "npusim: --vcs: expected an integer in 1 .. 64, got '0'"));
    harness_run_free(&r);

    r = harness_npusim("run", "--steps", "-3", NULL);
    CU_ASSERT_EQUAL(r.exit_status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "--steps: expected an integer in 1 .. 1000000, got '-3'"));
    harness_run_free(&r);
}

/* A fresh folder dir (a mkdtemp template) holding p.s, a one-core program with a 16-byte data
 * symbol X, and p.elf assembled from it for tiny: their paths in src and elf (256 bytes). */
static void tiny_program(char *dir, char *src, char *elf)
{
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
    snprintf(src, 256, "%s/p.s", dir);
    snprintf(elf, 256, "%s/p.elf", dir);
    FILE *f = fopen(src, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs(".core 0\n.data\nX: .space 16\n.core 0\nnop\n", f);
    fclose(f);
    harness_run a = harness_npusim("asm", "--arch", "tiny", src, "-o", elf, NULL);
    CU_ASSERT_EQUAL_FATAL(a.exit_status, 0);
    harness_run_free(&a);
}

TEST(options_of_sim_layer_collective_and_disasm_refuse_bad_values_with_status_2)
{
    char dir[] = "/tmp/npusim_cli_XXXXXX", src[256], elf[256];
    tiny_program(dir, src, elf);
    const struct {
        const char *args[10];
        const char *msg; /* the whole first line of stderr */
    } cases[] = {
        {{"sim", "--max-cycles", "abc", elf},
         "npusim: --max-cycles: expected an integer in 0 .. 18446744073709, got 'abc'\n"},
        {{"sim", "--functional", "--input", "3:X=/dev/null", elf},
         "npusim: --input: chip 3 has no program (1 given)\n"},
        {{"sim", elf, elf, elf}, "npusim: 3 programs for a system of 2 chips (one per chip)\n"},
        {{"sim", "--trace", "/nonexistent-dir/t.json", elf},
         "npusim: /nonexistent-dir/t.json: cannot create the trace file\n"},
        {{"sim", "--stats", "/nonexistent-dir/s.json", elf},
         "npusim: /nonexistent-dir/s.json: cannot create the statistics file\n"},
        {{"disasm", "--json", "-o", "x.s", elf},
         "npusim: --json prints to standard output; drop -o\n"},
        {{"layer", "--gemm", "8,8,8", "--cores", "0"},
         "npusim: --cores: expected an integer in 1 .. 65536, got '0'\n"},
        {{"layer", "--gemm", "8,8,8", "--trace", "/nonexistent-dir/t.json"},
         "npusim: /nonexistent-dir/t.json: cannot create the trace file\n"},
        {{"collective", "--op", "all_reduce", "--engine", "packet", "--trace", "t.json"},
         "npusim: --trace: the packet engine is not traced (the flow engine and --isa are)\n"},
        {{"collective", "--op", "all_reduce", "--isa", "--chunk", "64"},
         "npusim: --isa runs the ring without chunking, with 4- or 2-byte elements (no --algo "
         "other than ring, no --chunk)\n"},
        {{"collective", "--op", "all_to_all", "--isa"},
         "npusim: --isa: all_to_all is not lowered yet (all_reduce, all_gather and "
         "reduce_scatter are)\n"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *const *v = cases[i].args;
        harness_run r = harness_npusim(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8],
                                       v[9], NULL);
        CU_ASSERT_EQUAL(r.exit_status, 2);
        if (strncmp(r.err, cases[i].msg, strlen(cases[i].msg))) {
            CU_FAIL("the message is not the expected one");
            fprintf(stderr, "npusim %s ...: got '%s', expected '%s'\n", v[0], r.err, cases[i].msg);
        }
        harness_run_free(&r);
    }
    remove(src);
    remove(elf);
    rmdir(dir);
}

TEST(every_command_that_takes_an_architecture_defaults_to_the_same_one_and_says_so)
{
    /* asm, sim, noc and layer: CLI_DEFAULT_ARCH; an ELF built without --arch runs without it */
    static const char *cmds[] = {"asm", "sim", "noc", "layer"};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        harness_run r = harness_npusim(cmds[i], "--help", NULL);
        CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "(default: tiny)"));
        harness_run_free(&r);
    }
    char dir[] = "/tmp/npusim_cli_XXXXXX";
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
    char elf[256];
    snprintf(elf, sizeof elf, "%s/m.elf", dir);
    harness_run a = harness_npusim("asm", harness_src_path("isa/examples/matmul_db.s"), "-o", elf,
                                   NULL);
    CU_ASSERT_EQUAL(a.exit_status, 0);
    harness_run_free(&a);
    harness_run s = harness_npusim("sim", elf, NULL);
    CU_ASSERT_EQUAL(s.exit_status, 0);
    /* figures for people: grouped cycles, a scaled time, scaled bytes (the JSON keeps 50553) */
    CU_ASSERT_PTR_NOT_NULL(strstr(s.out, "total: 50,553 cycles (50.6 \xc2\xb5s)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(s.out, "HBM read 96.0 KiB"));
    harness_run_free(&s);
    s = harness_npusim("sim", "--json", elf, NULL);
    CU_ASSERT_PTR_NOT_NULL(strstr(s.out, "\"total_cycles\": 50553"));
    harness_run_free(&s);
    harness_run n = harness_npusim("noc", "--cycles", "200", "--warmup", "50", NULL);
    CU_ASSERT_EQUAL(n.exit_status, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(n.out, "# mesh 2x1")); /* tiny's mesh, not a 1x1 */
    harness_run_free(&n);
    remove(elf);
    rmdir(dir);
}

TEST(an_output_that_names_an_input_file_is_refused_and_the_input_kept)
{
    /* report -o X of input X, asm -o X.s of X.s, sim --trace/--stats/--dump onto the program
     * or an --input file (also spelled another way: ./dir/../dir/X): exit 2 naming both, and
     * the input byte for byte as it was */
    char dir[] = "/tmp/npusim_cli_XXXXXX", src[256], elf[256], alias[300], in[256];
    tiny_program(dir, src, elf);
    snprintf(alias, sizeof alias, "%s/../%s/p.elf", dir, strrchr(dir, '/') + 1);
    snprintf(in, sizeof in, "%s/x.bin", dir);
    FILE *f = fopen(in, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs("0123456789abcdef", f);
    fclose(f);
    char io_arg[300]; /* X=x.bin, for --input and --dump */
    snprintf(io_arg, sizeof io_arg, "X=%s", in);
    size_t n_src, n_elf, n_in;
    char *src0 = harness_read_file(src, &n_src), *elf0 = harness_read_file(elf, &n_elf),
         *in0 = harness_read_file(in, &n_in);
    const struct {
        const char *args[10];
        const char *opt, *out, *input;
    } cases[] = {
        {{"report", elf, "-o", elf}, "-o", elf, elf},
        {{"asm", "--arch", "tiny", src, "-o", src}, "-o", src, src},
        {{"sim", "--arch", "tiny", elf, "--trace", alias}, "--trace", alias, elf},
        {{"sim", "--arch", "tiny", elf, "--stats", elf}, "--stats", elf, elf},
        {{"sim", "--arch", "tiny", "--functional", "--input", io_arg, "--dump", io_arg, elf},
         "--dump", in, in},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const char *const *v = cases[i].args;
        harness_run r = harness_npusim(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8],
                                       v[9], NULL);
        char want[1024];
        snprintf(want, sizeof want, "npusim: %s %s: that is the input %s, which writing it "
                 "would destroy; give another file\n", cases[i].opt, cases[i].out,
                 cases[i].input);
        CU_ASSERT_EQUAL(r.exit_status, 2);
        CU_ASSERT_PTR_NOT_NULL(strstr(r.err, want));
        if (!strstr(r.err, want))
            fprintf(stderr, "case %zu: %s", i, r.err);
        harness_run_free(&r);
    }
    size_t n;
    char *s = harness_read_file(src, &n);
    CU_ASSERT(n == n_src && memcmp(s, src0, n) == 0);
    free(s);
    s = harness_read_file(elf, &n);
    CU_ASSERT(n == n_elf && memcmp(s, elf0, n) == 0);
    free(s);
    s = harness_read_file(in, &n);
    CU_ASSERT(n == n_in && memcmp(s, in0, n) == 0);
    free(s);
    free(src0), free(elf0), free(in0);
}
