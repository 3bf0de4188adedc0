/* cmd_version.c — `npusim version` (also `npusim --version`). */
#include <stdio.h>

#include "cli.h"

const char cmd_version_usage[] =
    "usage: npusim version [--json]\n"
    "\n"
    "  --json    print {\"name\": \"npusim\", \"version\": \"X.Y.Z\"}\n";

np_status cmd_version(int argc, char **argv, np_err *err)
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
            cli_print_usage(cli_find("version"));
            return NP_OK;
        }
        json = true;
    }
    if (optind < argc)
        return np_err_set(err, NP_ERR_USAGE, "unexpected argument '%s'", argv[optind]);
    if (json)
        return cli_print_json(json_pack("{s:s, s:s}", "name", "npusim", "version",
                                        NPUSIM_VERSION), err);
    printf("npusim %s\n", NPUSIM_VERSION);
    return NP_OK;
}
