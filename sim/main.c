/* main.c — the `npusim` command: dispatches to the subcommands of commands.def, prints
 * errors as "npusim: [file:line:col: ]message" and exits with the error class's status.
 * This is the only place in npusim that exits. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static int main_fail(const char *cmd, const np_err *err)
{
    char buf[NP_ERR_FILE_MAX + NP_ERR_MSG_MAX + 32];
    fflush(stdout);
    fprintf(stderr, "npusim: %s\n", np_err_format(err, buf, sizeof buf));
    if (err->status == NP_ERR_USAGE)
        fprintf(stderr, "Run 'npusim %s--help' for usage.\n", cmd ? cmd : "");
    return np_status_exit_code(err->status);
}

int main(int argc, char **argv)
{
    np_err err = {0};
    if (argc < 2) {
        np_err_set(&err, NP_ERR_USAGE, "no command given");
        return main_fail(NULL, &err);
    }
    const char *name = argv[1];
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0)
        name = "help";
    else if (strcmp(name, "--version") == 0 || strcmp(name, "-V") == 0)
        name = "version";
    const cli_cmd *cmd = cli_find(name);
    if (!cmd) {
        const char *guess = cli_suggest(name);
        if (name[0] == '-')
            np_err_set(&err, NP_ERR_USAGE, "unknown option '%s' (options follow the command)",
                       name);
        else if (guess)
            np_err_set(&err, NP_ERR_USAGE, "unknown command '%s'; did you mean '%s'?", name,
                       guess);
        else
            np_err_set(&err, NP_ERR_USAGE, "unknown command '%s'", name);
        return main_fail(NULL, &err);
    }
    argv[1] = (char *)cmd->name;
    np_status st = cmd->run(argc - 1, argv + 1, &err);
    if (fflush(stdout) != 0 && st == NP_OK)
        st = np_err_set(&err, NP_ERR_IO, "cannot write to standard output");
    if (st != NP_OK) {
        char cmdsp[64];
        snprintf(cmdsp, sizeof cmdsp, "%s ", cmd->name);
        return main_fail(cmdsp, &err);
    }
    return 0;
}
