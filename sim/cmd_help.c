/* cmd_help.c — `npusim help [COMMAND]`: the command list, or one command's usage. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

const char cmd_help_usage[] =
    "usage: npusim help [COMMAND] [--json]\n"
    "\n"
    "  COMMAND   show this command's usage (same as 'npusim COMMAND --help')\n"
    "  --json    list the commands as JSON: [{\"name\", \"summary\"}]\n";

np_status cmd_help(int argc, char **argv, np_err *err)
{
    static const struct option longopts[] = {
        {"json", no_argument, NULL, 'j'}, {"help", no_argument, NULL, 'h'}, {0}};
    bool json = false;
    int c;
    cli_getopt_reset();
    while ((c = cli_getopt(argc, argv, "h", longopts, err)) != -1) {
        if (c == '?')
            return err->status;
        if (c == 'h') {
            cli_print_usage(cli_find("help"));
            return NP_OK;
        }
        json = true;
    }
    if (optind < argc) {
        const cli_cmd *cmd = cli_find(argv[optind]);
        if (!cmd)
            return np_err_set(err, NP_ERR_USAGE, "unknown command '%s'", argv[optind]);
        cli_print_usage(cmd);
        return NP_OK;
    }
    if (json) {
        json_t *list = json_array();
        for (size_t i = 0; i < cli_n_commands; i++)
            json_array_append_new(list, json_pack("{s:s, s:s}", "name", cli_commands[i].name,
                                                  "summary", cli_commands[i].summary));
        return cli_print_json(list, err);
    }
    printf("npusim — a cycle-approximate simulator of NPU systems and their software\n\n"
           "usage: npusim COMMAND [OPTIONS]\n\ncommands:\n");
    for (size_t i = 0; i < cli_n_commands; i++)
        printf("  %-10s %s\n", cli_commands[i].name, cli_commands[i].summary);
    printf("\nRun 'npusim COMMAND --help' for a command's options.\n");
    return NP_OK;
}
