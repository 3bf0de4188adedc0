/* cli.c — the command table (from commands.def) and option/JSON helpers for commands. */
#include "cli.h"
#include "parse.h"
#include "suggest.h"

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

void cli_getopt_reset(void)
{
    optind = 0; /* glibc: 0 also resets getopt's internal state */
    opterr = 0;
}

/* The message for an unknown or ambiguous long option text ("--arhc", "--s=1"). */
static void cli_long_option_error(const char *text, const struct option *longopts, np_err *err)
{
    char name[64];
    const char *body = text + 2;
    size_t len = strcspn(body, "=");
    snprintf(name, sizeof name, "%.*s", (int)(len < 60 ? len : 60), body);
    const char *names[128], *prefixed[128];
    size_t n = 0, n_prefixed = 0;
    const struct option *exact = NULL;
    for (const struct option *o = longopts; o && o->name && n < 128; o++) {
        names[n++] = o->name;
        if (strcmp(o->name, name) == 0)
            exact = o;
        else if (len && strncmp(o->name, name, len) == 0)
            prefixed[n_prefixed++] = o->name;
    }
    if (exact && exact->has_arg == no_argument && body[len] == '=') {
        np_err_set(err, NP_ERR_USAGE, "option '--%s' takes no value", name);
        return;
    }
    if (!exact && n_prefixed > 1) {
        char list[256];
        size_t used = 0;
        list[0] = '\0';
        for (size_t i = 0; i < n_prefixed && used < sizeof list; i++)
            used += (size_t)snprintf(list + used, sizeof list - used, "%s--%s", i ? ", " : "",
                                     prefixed[i]);
        np_err_set(err, NP_ERR_USAGE, "option '--%s' is ambiguous (%s)", name, list);
        return;
    }
    const char *guess = np_suggest_name(name, names, n);
    if (guess)
        np_err_set(err, NP_ERR_USAGE, "unknown option '--%s'; did you mean '--%s'?", name, guess);
    else
        np_err_set(err, NP_ERR_USAGE, "unknown option '--%s'", name);
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
    bool is_long = arg[0] == '-' && arg[1] == '-';
    if (optopt && !is_long)
        arg = shortname;
    if (c == ':')
        np_err_set(err, NP_ERR_USAGE, "option '%s' needs an argument", arg);
    else if (is_long)
        cli_long_option_error(arg, longopts, err);
    else
        np_err_set(err, NP_ERR_USAGE, "unknown option '%s'", arg);
    return '?';
}

np_status cli_parse_u64(const char *opt, const char *text, uint64_t lo, uint64_t hi,
                        uint64_t *out, np_err *err)
{
    return np_parse_u64(NP_SRC_OPT(opt), text, lo, hi, out, err);
}

const char *cli_json_safe(const char *s, char *buf, size_t n)
{
    size_t len = strlen(s), at = np_utf8_invalid_at(s, len);
    if (at == len || n < 4)
        return at == len ? s : "?";
    size_t w = 0;
    for (size_t i = 0; i < len && w + 4 <= n;) {
        at = np_utf8_invalid_at(s + i, len - i);
        size_t take = at < n - 4 - w ? at : n - 4 - w;
        memcpy(buf + w, s + i, take);
        w += take, i += take;
        if (take < at)
            break;
        if (i < len) { /* one bad byte becomes U+FFFD */
            memcpy(buf + w, "\xef\xbf\xbd", 3);
            w += 3, i++;
        }
    }
    buf[w] = '\0';
    return buf;
}

np_status cli_add_set(const char **sets, size_t *n, size_t max, const char *arg, np_err *err)
{
    if (*n >= max)
        return np_err_set(err, NP_ERR_USAGE, "at most %zu --set options", max);
    sets[(*n)++] = arg;
    return NP_OK;
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
