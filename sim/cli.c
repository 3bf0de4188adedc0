/* cli.c — the command table (from commands.def) and JSON output for commands; the option
 * helpers are in cli_opt.c. */
#include "cli.h"
#include "suggest.h"
#include "fdio.h"

#include <math.h>
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

np_status cli_output_not_input(const char *opt, const char *out, const char *const *ins,
                               size_t n, np_err *err)
{
    for (size_t i = 0; i < n; i++)
        if (np_same_file(out, ins[i]))
            return np_err_set(err, NP_ERR_USAGE, "%s %s: that is the input %s, which writing "
                              "it would destroy; give another file", opt, out, ins[i]);
    return NP_OK;
}

json_t *cli_json_count(double v)
{
    if (v == floor(v) && fabs(v) <= 9007199254740992.0) /* 2^53 */
        return json_integer((json_int_t)v);
    return json_real(v);
}

np_status cli_print_json(json_t *j, np_err *err)
{
    if (!j) /* names are checked where they enter (parse.h); a bad one here is our bug */
        return np_err_set(err, NP_ERR_INTERNAL, "the JSON output could not be built (a string "
                          "that is not UTF-8, or out of memory)");
    json_dumpf(j, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(12));
    fputc('\n', stdout);
    json_decref(j);
    return NP_OK;
}
