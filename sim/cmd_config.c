/* cmd_config.c — `npusim config show|check|list|doc`: the resolved architecture config, its
 * validation, the presets and the key reference (all from base/arch.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "cli.h"
#include "suggest.h"

const char cmd_config_usage[] =
    "usage: npusim config show PRESET|FILE [--set SECTION.KEY=VALUE ...] [--json]\n"
    "       npusim config check PRESET|FILE... [--json]\n"
    "       npusim config list [--json]\n"
    "       npusim config doc\n"
    "\n"
    "  show       print the resolved config (defaults, then the file, then each --set) with\n"
    "             units, as YAML that loads again; derived peak throughput at the end\n"
    "  check      validate each config; print 'FILE: ok', or every error it has (exit\n"
    "             status 2); with --json one document of every file's errors\n"
    "  list       list the presets (NAME.yaml in $NPUSIM_CONFIG_DIR, default: configs/)\n"
    "  doc        print the Markdown reference of every key (docs/config.md)\n"
    "\n"
    "  PRESET|FILE                 a path (exists, contains '/', or ends in .yaml/.yml), else\n"
    "                              a preset name such as tiny, edge, tpu-pod, a100-cluster\n"
    "  -s, --set SECTION.KEY=VALUE override one key, e.g. --set core.array_rows=256 or\n"
    "                              --set 'core.sram_bytes=32 MiB' (repeatable)\n"
    "  --json                      show: {\"name\", \"core\": {KEY: {\"value\", \"unit\"}}, ...};\n"
    "                              check: [{\"file\", \"valid\", \"n_errors\", \"errors\":\n"
    "                              [{\"line\", \"col\", \"class\", \"message\"}]}];\n"
    "                              list: [{\"name\", \"path\", \"summary\"}]\n";

enum { CFG_SHOW, CFG_CHECK, CFG_LIST, CFG_DOC, CFG_N_SUB };
static const char *const cfg_subs[CFG_N_SUB] = {"show", "check", "list", "doc"};

/* "2 chips (ring) x 2 cores x 4x4 PEs, 0.0 TFLOP/s bf16 per chip" */
static void cfg_summary(const arch_config *c, char *buf, size_t n)
{
    char topo[64];
    arch_value_text(c, &arch_keys[ARCH_KEY_system_topology], topo, sizeof topo);
    snprintf(buf, n,
             "%lld chip%s (%s) x %lld core%s x %lldx%lld PEs, %.4g TFLOP/s bf16 per chip",
             (long long)c->system.chips, c->system.chips == 1 ? "" : "s", topo,
             (long long)c->chip.cores, c->chip.cores == 1 ? "" : "s",
             (long long)c->core.array_rows, (long long)c->core.array_cols,
             arch_chip_peak_flops(c, c->core.macs_per_pe_bf16) / 1e12);
}

static np_status cfg_show(const char *arg, const char *const *sets, size_t n_sets, bool json,
                          np_err *err)
{
    arch_config cfg;
    np_status st = arch_resolve(arg, sets, n_sets, &cfg, err);
    if (st != NP_OK)
        return st;
    if (json)
        return cli_print_json(arch_to_json(&cfg), err);
    printf("# npusim architecture config, resolved from %s", cfg.src.path);
    for (size_t i = 0; i < n_sets; i++)
        printf("%s --set %s", i ? "" : " with", sets[i]);
    printf("\n");
    arch_print(&cfg, stdout);
    return NP_OK;
}

#define CFG_MAX_ERRORS 64

/* Checks every argument, each file for all its errors at once (arch_check_text): prints
 * "ARG: ok" for the good ones and every error of the bad ones as main prints one (text), or
 * one JSON document [{"file", "valid", "errors": [{"line", "col", "class", "message"}]}]. The
 * last error is returned for main to print (text) or the first, already printed (JSON). */
static np_status cfg_check(int n, char **args, bool json, np_err *err)
{
    np_err pending = {0}, first = {0};
    json_t *list = json ? json_array() : NULL;
    if (json && !list)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory");
    np_err *errs = calloc(CFG_MAX_ERRORS, sizeof *errs);
    if (!errs) {
        json_decref(list);
        return np_err_set(err, NP_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < n; i++) {
        char path[NP_ERR_FILE_MAX];
        size_t n_errs = 0;
        np_err e = {0};
        if (arch_locate(args[i], path, sizeof path, &e) != NP_OK) {
            errs[0] = e;
            n_errs = 1;
        } else {
            arch_check_file(path, errs, CFG_MAX_ERRORS, &n_errs);
        }
        size_t shown = n_errs < CFG_MAX_ERRORS ? n_errs : CFG_MAX_ERRORS;
        if (json) {
            json_t *ej = json_array();
            char fb[3 * NP_ERR_FILE_MAX], mb[3 * NP_ERR_MSG_MAX];
            for (size_t k = 0; k < shown; k++)
                json_array_append_new(ej, json_pack("{s:i, s:i, s:s, s:s}", "line", errs[k].line,
                                                    "col", errs[k].col, "class",
                                                    np_status_name(errs[k].status), "message",
                                                    cli_json_safe(errs[k].msg, mb, sizeof mb)));
            json_array_append_new(list, json_pack("{s:s, s:b, s:I, s:o}", "file",
                                                  cli_json_safe(args[i], fb, sizeof fb), "valid",
                                                  n_errs == 0, "n_errors", (json_int_t)n_errs,
                                                  "errors", ej));
        } else if (!n_errs) {
            printf("%s: ok\n", args[i]);
        }
        for (size_t k = 0; k < shown; k++) {
            if (!json && pending.status != NP_OK) {
                char buf[NP_ERR_FILE_MAX + NP_ERR_MSG_MAX + 32];
                fflush(stdout);
                fprintf(stderr, "npusim: %s\n", np_err_format(&pending, buf, sizeof buf));
            }
            pending = errs[k];
            if (first.status == NP_OK)
                first = errs[k];
        }
        if (!json && n_errs > shown)
            fprintf(stderr, "npusim: %s: %zu more errors\n", args[i], n_errs - shown);
    }
    free(errs);
    if (json) {
        np_status st = cli_print_json(list, err);
        if (st != NP_OK)
            return st;
        if (first.status == NP_OK)
            return NP_OK;
        /* the errors are in the document; main still exits 2, with a one-line summary */
        return np_err_set(err, first.status, "config check: invalid configs (see the JSON)");
    }
    if (pending.status == NP_OK)
        return NP_OK;
    if (err)
        *err = pending;
    return pending.status;
}

static np_status cfg_list(bool json, np_err *err)
{
    arch_presets p;
    np_status st = arch_presets_list(&p, err);
    if (st != NP_OK)
        return st;
    json_t *list = json ? json_array() : NULL;
    for (size_t i = 0; i < p.n; i++) {
        char path[NP_ERR_FILE_MAX], summary[256];
        arch_config cfg;
        np_err e = {0};
        if (arch_resolve(p.names[i], NULL, 0, &cfg, &e) == NP_OK) {
            cfg_summary(&cfg, summary, sizeof summary);
        } else {
            char buf[NP_ERR_FILE_MAX + NP_ERR_MSG_MAX + 32];
            snprintf(summary, sizeof summary, "error: %s", np_err_format(&e, buf, sizeof buf));
        }
        snprintf(path, sizeof path, "%s/%s.yaml", arch_config_dir(), p.names[i]);
        char fb[3 * NP_ERR_FILE_MAX], sb[3 * sizeof summary];
        if (json)
            json_array_append_new(list, json_pack("{s:s, s:s, s:s}", "name", p.names[i],
                                                  "path", cli_json_safe(path, fb, sizeof fb),
                                                  "summary",
                                                  cli_json_safe(summary, sb, sizeof sb)));
        else
            printf("%-14s %s\n", p.names[i], summary);
    }
    arch_presets_free(&p);
    return json ? cli_print_json(list, err) : NP_OK;
}

np_status cmd_config(int argc, char **argv, np_err *err)
{
    static const struct option longopts[] = {{"json", no_argument, NULL, 'j'},
                                             {"set", required_argument, NULL, 's'},
                                             {"help", no_argument, NULL, 'h'},
                                             {0}};
    if (argc < 2)
        return np_err_set(err, NP_ERR_USAGE, "config needs a subcommand: show, check, list or doc");
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        cli_print_usage(cli_find("config"));
        return NP_OK;
    }
    int sub = 0;
    while (sub < CFG_N_SUB && strcmp(argv[1], cfg_subs[sub]) != 0)
        sub++;
    if (sub == CFG_N_SUB) {
        const char *guess = np_suggest(argv[1], cfg_subs, CFG_N_SUB, 2);
        if (guess)
            return np_err_set(err, NP_ERR_USAGE,
                              "unknown config subcommand '%s'; did you mean '%s'?", argv[1],
                              guess);
        return np_err_set(err, NP_ERR_USAGE,
                          "unknown config subcommand '%s' (show, check, list, doc)", argv[1]);
    }

    /* Options of the subcommand: argv[1] plays argv[0] for getopt. */
    int sargc = argc - 1;
    char **sargv = argv + 1;
    const char **sets = calloc((size_t)sargc, sizeof *sets);
    if (!sets)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory");
    size_t n_sets = 0;
    bool json = false;
    np_status st = NP_OK;
    int c;
    cli_getopt_reset();
    while ((c = cli_getopt(sargc, sargv, "hs:", longopts, err)) != -1) {
        if (c == '?') {
            st = err->status;
            goto done;
        }
        if (c == 'h') {
            cli_print_usage(cli_find("config"));
            goto done;
        }
        if (c == 's')
            sets[n_sets++] = optarg;
        else if (c == 'j')
            json = true;
    }
    int npos = sargc - optind;
    char **pos = sargv + optind;
    if (n_sets && sub != CFG_SHOW) {
        st = np_err_set(err, NP_ERR_USAGE, "--set applies to 'config show' only");
        goto done;
    }
    if (json && sub == CFG_DOC) {
        st = np_err_set(err, NP_ERR_USAGE, "--json applies to 'config show', 'check' and "
                        "'list'");
        goto done;
    }
    switch (sub) {
    case CFG_SHOW:
        if (npos != 1)
            st = np_err_set(err, NP_ERR_USAGE, npos ? "config show takes one PRESET or FILE"
                                                    : "config show needs a PRESET or FILE");
        else
            st = cfg_show(pos[0], sets, n_sets, json, err);
        break;
    case CFG_CHECK:
        if (npos < 1)
            st = np_err_set(err, NP_ERR_USAGE, "config check needs at least one PRESET or FILE");
        else
            st = cfg_check(npos, pos, json, err);
        break;
    case CFG_LIST:
    case CFG_DOC:
        if (npos > 0) {
            st = np_err_set(err, NP_ERR_USAGE, "unexpected argument '%s'", pos[0]);
            break;
        }
        if (sub == CFG_LIST)
            st = cfg_list(json, err);
        else
            arch_write_markdown(stdout);
        break;
    }
done:
    free(sets);
    return st;
}
