/* cmd_version.c — `npusim version` (also `npusim --version`). */
#include <stdio.h>

#include "arch.h"
#include "cli.h"
#include "model.h"
#include "validate.h"

const char cmd_version_usage[] =
    "usage: npusim version [--json]\n"
    "\n"
    "Prints the version and the folders npusim reads its presets, model zoo and validation\n"
    "data from (docs/install.md: $NPUSIM_CONFIG_DIR, $NPUSIM_MODEL_DIR, $NPUSIM_VALIDATION_DIR,\n"
    "else an installed npusim's share/npusim/, else the source tree's).\n"
    "\n"
    "  --json    print {\"name\": \"npusim\", \"version\": \"X.Y.Z\", \"configs\": DIR,\n"
    "            \"models\": DIR, \"validation\": DIR}\n";

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
        return cli_print_json(json_pack("{s:s, s:s, s:s, s:s, s:s}", "name", "npusim",
                                        "version", NPUSIM_VERSION, "configs", arch_config_dir(),
                                        "models", nn_model_dir(), "validation",
                                        val_default_dir()), err);
    printf("npusim %s\n", NPUSIM_VERSION);
    printf("presets     %s\n", arch_config_dir());
    printf("models      %s\n", nn_model_dir());
    printf("validation  %s\n", val_default_dir());
    return NP_OK;
}
