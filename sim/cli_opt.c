/* cli_opt.c — the option helpers of cli.h: getopt_long with did-you-mean, checked option
 * values through the one door (base/parse.h) and text on its way to JSON. Kept apart from the
 * command table so that the CLI fuzz harness (sim/fuzz/fuzz_cli.c) links them alone. */
#include <stdbool.h>
#include <stdio.h>
#include <unistd.h>
#include <string.h>

#include "cli.h"
#include "parse.h"

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
    if (!strcmp(name, "csv") || !strcmp(name, "json")) { /* an output format it has not */
        np_err_set(err, NP_ERR_USAGE, "this command has no --%s output%s", name,
                   !strcmp(name, "csv") ? " (its result is not one table; --json gives every "
                                          "figure exactly)" : "");
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


void cli_progress_init(cli_progress *p, const char *what)
{
    *p = (cli_progress){.on = isatty(2) != 0, .what = what};
}

void cli_progress_fn(void *ctx, double done)
{
    cli_progress *p = ctx;
    cli_progress_show(p, p->what, done);
}

void cli_progress_show(cli_progress *p, const char *what, double done)
{
    if (!p->on)
        return;
    int n = fprintf(stderr, "\r%s: %3.0f %%", what, 100.0 * done);
    for (int i = n; i < p->len; i++)
        fputc(' ', stderr);
    p->len = n > p->len ? n : p->len;
    fflush(stderr);
}

void cli_progress_end(cli_progress *p)
{
    if (p->on && p->len) {
        fprintf(stderr, "\r%*s\r", p->len, "");
        fflush(stderr);
    }
    p->len = 0;
}
