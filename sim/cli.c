/* cli.c — the command table (from commands.def) and option/JSON helpers for commands. */
#include "cli.h"
#include "suggest.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const cli_cmd cli_commands[] = {
#define NPUSIM_CMD(name, summary) {#name, summary, cmd_##name##_usage, cmd_##name},
#include "commands.def"
#undef NPUSIM_CMD
};
const size_t cli_n_commands = sizeof cli_commands / sizeof cli_commands[0];

const cli_cmd *cli_find(const char *name)
{
    for (size_t i = 0; i < cli_n_commands; i++)
        if (strcmp(cli_commands[i].name, name) == 0)
            return &cli_commands[i];
    return NULL;
}

const char *cli_suggest(const char *name)
{
    const char *names[64];
    size_t n = 0;
    for (size_t i = 0; i < cli_n_commands && n < 64; i++)
        names[n++] = cli_commands[i].name;
    return np_suggest(name, names, n, 2);
}

void cli_print_usage(const cli_cmd *cmd)
{
    printf("npusim %s — %s\n\n%s", cmd->name, cmd->summary, cmd->usage);
}

void cli_getopt_reset(void)
{
    optind = 0; /* glibc: 0 also resets getopt's internal state */
    opterr = 0;
}

int cli_getopt(int argc, char **argv, const char *shortopts, const struct option *longopts,
               np_err *err)
{
    char opts[128]; /* leading ':' makes getopt report a missing argument as ':' */
    snprintf(opts, sizeof opts, ":%s", shortopts);
    int c = getopt_long(argc, argv, opts, longopts, NULL);
    if (c != '?' && c != ':')
        return c;
    const char *arg = optind > 0 && optind <= argc ? argv[optind - 1] : "";
    char shortname[3] = {'-', (char)optopt, '\0'};
    if (optopt && !(arg[0] == '-' && arg[1] == '-'))
        arg = shortname;
    if (c == ':')
        np_err_set(err, NP_ERR_USAGE, "option '%s' needs an argument", arg);
    else
        np_err_set(err, NP_ERR_USAGE, "unknown option '%s'", arg);
    return '?';
}

np_status cli_parse_u64(const char *opt, const char *text, uint64_t lo, uint64_t hi,
                        uint64_t *out, np_err *err)
{
    char *end = NULL;
    unsigned long long v = 0;
    bool digits = text[0] >= '0' && text[0] <= '9';
    if (digits)
        v = strtoull(text, &end, 10);
    if (digits && *end == '\0' && v >= lo && v <= hi) {
        *out = v;
        return NP_OK;
    }
    if (lo == 0 && hi == UINT64_MAX)
        return np_err_set(err, NP_ERR_USAGE, "%s: expected a non-negative integer, got '%s'",
                          opt, text);
    return np_err_set(err, NP_ERR_USAGE,
                      "%s: expected an integer in %" PRIu64 " .. %" PRIu64 ", got '%s'", opt,
                      lo, hi, text);
}

np_status cli_add_set(const char **sets, size_t *n, size_t max, const char *arg, np_err *err)
{
    if (*n >= max)
        return np_err_set(err, NP_ERR_USAGE, "at most %zu --set options", max);
    sets[(*n)++] = arg;
    return NP_OK;
}

np_status cli_print_json(json_t *j, np_err *err)
{
    if (!j)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory building JSON output");
    json_dumpf(j, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(12));
    fputc('\n', stdout);
    json_decref(j);
    return NP_OK;
}
