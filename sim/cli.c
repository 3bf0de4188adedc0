/* cli.c — the command table (from commands.def) and option/JSON helpers for commands. */
#include "cli.h"

#include <stdio.h>
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

/* Levenshtein distance, capped at the lengths npusim's names have. */
static size_t cli_edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63)
        return 64;
    size_t prev[64], cur[64];
    for (size_t j = 0; j <= lb; j++)
        prev[j] = j;
    for (size_t i = 1; i <= la; i++) {
        cur[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t sub = prev[j - 1] + (a[i - 1] != b[j - 1]);
            size_t del = prev[j] + 1, ins = cur[j - 1] + 1;
            cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
        }
        memcpy(prev, cur, sizeof cur);
    }
    return prev[lb];
}

const char *cli_suggest(const char *name)
{
    const char *best = NULL;
    size_t best_d = 3;
    for (size_t i = 0; i < cli_n_commands; i++) {
        size_t d = cli_edit_distance(name, cli_commands[i].name);
        if (d < best_d) {
            best_d = d;
            best = cli_commands[i].name;
        }
    }
    return best;
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

np_status cli_print_json(json_t *j, np_err *err)
{
    if (!j)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory building JSON output");
    json_dumpf(j, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(12));
    fputc('\n', stdout);
    json_decref(j);
    return NP_OK;
}
