/* cmd_config.c — placeholder while the command is written. */
#include "cli.h"
const char cmd_config_usage[] = "usage: npusim config\n";
np_status cmd_config(int argc, char **argv, np_err *err)
{
    (void)argc; (void)argv;
    return np_err_set(err, NP_ERR_INTERNAL, "not yet");
}
