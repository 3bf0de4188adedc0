/* cmd_run.c — placeholder while the command is written. */
#include "cli.h"
const char cmd_run_usage[] = "usage: npusim run\n";
np_status cmd_run(int argc, char **argv, np_err *err)
{
    (void)argc; (void)argv;
    return np_err_set(err, NP_ERR_INTERNAL, "not yet");
}
