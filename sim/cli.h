/* cli.h — the command-line layer shared by sim/main.c and the sim/cmd_*.c commands.
 *
 * Only this layer prints results and errors and chooses exit codes. Conventions every command
 * follows: `--help` prints its usage and succeeds; `--json` prints one JSON document on stdout
 * instead of text; an unknown option or a missing argument is NP_ERR_USAGE, which main turns
 * into a message, a hint to run `npusim CMD --help`, and exit status 2.
 */
#ifndef NPUSIM_CLI_H
#define NPUSIM_CLI_H

#include <getopt.h>
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

/* The architecture every command uses without --arch: the tiny preset, on which every
 * command means something (2 chips of 2 cores on a 2 x 1 mesh, 4 x 4 arrays) and runs in
 * milliseconds. Stated in each command's --help. */
#define CLI_DEFAULT_ARCH "tiny"

typedef np_status (*cli_cmd_fn)(int argc, char **argv, np_err *err);

typedef struct cli_cmd {
    const char *name;
    const char *summary;
    const char *usage; /* synopsis line(s) then option lines */
    cli_cmd_fn run;
} cli_cmd;

#define NPUSIM_CMD(name, summary)                                                          \
    np_status cmd_##name(int argc, char **argv, np_err *err);                              \
    extern const char cmd_##name##_usage[];
#include "commands.def"
#undef NPUSIM_CMD

extern const cli_cmd cli_commands[];
extern const size_t cli_n_commands;

/* The command called name, or NULL. */
const cli_cmd *cli_find(const char *name);

/* The command name closest to name (edit distance <= 2), or NULL: for "did you mean". */
const char *cli_suggest(const char *name);

/* Prints "usage: npusim NAME ..." and the option lines of cmd to stdout. */
void cli_print_usage(const cli_cmd *cmd);

/* getopt_long wrapper used by every command: returns the option character, -1 at the end of
 * options, or '?' after filling err with NP_ERR_USAGE naming the unknown option (with "did
 * you mean" among longopts), the ambiguous prefix, or the option whose value is missing.
 * Call cli_getopt_reset() before the first call. */
void cli_getopt_reset(void);
int cli_getopt(int argc, char **argv, const char *shortopts, const struct option *longopts,
               np_err *err);

/* Parses the value `text` of option `opt` (e.g. "--seed") as a decimal integer in lo..hi:
 * np_parse_u64 (parse.h, the checked parsers every option goes through). NP_ERR_USAGE naming
 * the option, the value and the allowed range otherwise (*out unchanged). */
np_status cli_parse_u64(const char *opt, const char *text, uint64_t lo, uint64_t hi,
                        uint64_t *out, np_err *err);

/* Appends a --set argument to sets[0..*n), which holds at most max: NP_ERR_USAGE when full. */
np_status cli_add_set(const char **sets, size_t *n, size_t max, const char *arg, np_err *err);

/* s itself when it is valid UTF-8, else a copy in buf (n bytes) with each bad byte replaced
 * by U+FFFD: for file names and other free text on its way to JSON. */
const char *cli_json_safe(const char *s, char *buf, size_t n);

/* NP_OK unless output path out (of option opt) is one of the n input files ins (np_same_file):
 * NP_ERR_USAGE naming both, since writing it would destroy the input. */
np_status cli_output_not_input(const char *opt, const char *out, const char *const *ins,
                               size_t n, np_err *err);

/* A count held in a double (FLOPs of a step, which can pass int64's range): an exact JSON
 * integer when v is integral and below 2^53, else a real (--json's 12 significant digits).
 * A new reference (NULL when out of memory, which json_pack reports). */
json_t *cli_json_count(double v);

/* Progress of a long step on standard error, when it is a terminal: "\r<what>: 42 %",
 * overwritten in place and erased by cli_progress_end. cli_progress_fn is a callback of the
 * (void *ctx, double done) form the libraries take (trace_read_progress, ...), done 0 .. 1. */
typedef struct cli_progress {
    bool on;
    int len;
    const char *what;
} cli_progress;
void cli_progress_init(cli_progress *p, const char *what);
void cli_progress_fn(void *ctx, double done);
/* The same line saying `what` instead of p->what (a job of several steps). */
void cli_progress_show(cli_progress *p, const char *what, double done);
void cli_progress_end(cli_progress *p);

/* Prints a JSON document (object keys in insertion order, 2-space indent) and a newline to
 * stdout, then drops the reference. NP_ERR_INTERNAL (filling err) if j is NULL. */
np_status cli_print_json(json_t *j, np_err *err);

#endif
