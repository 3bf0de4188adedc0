/* fuzz_cli.c — libFuzzer harness for the command-line option parser: cli_getopt (getopt_long
 * with did-you-mean, ambiguity and missing values) and the option values of a typical command
 * through the one door (base/parse.h). The input is an argument vector, one argument per
 * line. Every outcome is an option and its checked value, the end of the options, or a usage
 * error with a message naming what was wrong; the parser never reads past argv. */
#include <getopt.h>
#include <string.h>

#include "cli.h"
#include "fuzz_harness.h"
#include "parse.h"

#define FUZZ_MAX_ARGS 24

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const struct option longopts[] = {
        {"arch", required_argument, NULL, 'a'},  {"set", required_argument, NULL, 's'},
        {"seed", required_argument, NULL, 'S'},  {"mesh", required_argument, NULL, 'm'},
        {"group", required_argument, NULL, 'g'}, {"min-bytes", required_argument, NULL, 'b'},
        {"rate", required_argument, NULL, 'r'},  {"dataflow", required_argument, NULL, 'd'},
        {"saturation", no_argument, NULL, 'Z'},  {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},        {0}};
    static char buf[4096];
    if (size >= sizeof buf)
        size = sizeof buf - 1;
    memcpy(buf, data, size);
    buf[size] = '\0';
    char *argv[FUZZ_MAX_ARGS + 1];
    int argc = 0;
    argv[argc++] = "fuzz";
    for (char *p = buf; argc < FUZZ_MAX_ARGS;) {
        argv[argc++] = p;
        char *nl = memchr(p, '\n', (size_t)(buf + size - p));
        if (!nl)
            break;
        *nl = '\0';
        p = nl + 1;
    }
    argv[argc] = NULL;
    np_err e = {0};
    int c;
    cli_getopt_reset();
    while ((c = cli_getopt(argc, argv, "hj", longopts, &e)) != -1) {
        np_status st = NP_OK;
        uint64_t u, d[3], g[64];
        int nd;
        size_t n, idx;
        double r;
        static const char *const dfs[] = {"os", "ws", "is"};
        switch (c) {
        case 'a': case 's': case 'Z': case 'j': case 'h': break;
        case 'S': st = cli_parse_u64("--seed", optarg, 0, UINT64_MAX, &u, &e); break;
        case 'm':
            st = np_parse_dims(NP_SRC_OPT("--mesh"), optarg, 2, 2, 1, 1024, UINT64_MAX, d, &nd,
                               &e);
            break;
        case 'g':
            st = np_parse_list(NP_SRC_OPT("--group"), optarg, 0, 1023, g, 64, &n, &e);
            break;
        case 'b':
            st = np_parse_size(NP_SRC_OPT("--min-bytes"), optarg, 1, UINT64_MAX, &u, &e);
            break;
        case 'r': st = np_parse_f64(NP_SRC_OPT("--rate"), optarg, 0, 1, &r, &e); break;
        case 'd':
            st = np_parse_enum(NP_SRC_OPT("--dataflow"), optarg, "dataflow", dfs, 3, &idx, &e);
            break;
        case '?':
            if (e.status != NP_ERR_USAGE || !e.msg[0])
                abort(); /* an unknown or incomplete option is a usage error that says so */
            return 0;
        default: abort(); /* getopt returned something that is no option of the table */
        }
        if (st != NP_OK) {
            fuzz_check_failure(st, &e);
            if (e.status != NP_ERR_USAGE || e.msg[0] != '-')
                abort(); /* a bad value's message starts with the option */
            return 0;
        }
    }
    if (optind > argc)
        abort();
    return 0;
}
