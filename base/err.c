/* err.c — errors as values: filling and formatting np_err (see err.h). */
#include "err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const struct {
    const char *name;
    int exit_code;
} err_classes[NP_STATUS_COUNT] = {
    [NP_OK] = {"ok", 0},
#define ERR_CLASS(cname, text, exit_status, desc) [NP_ERR_##cname] = {text, exit_status},
#include "err.def"
#undef ERR_CLASS
};

static np_status err_vset(np_err *e, np_status s, const char *file, int line, int col,
                          const char *fmt, va_list ap)
{
    if (!e)
        return s;
    e->status = s;
    snprintf(e->file, sizeof e->file, "%s", file ? file : "");
    e->line = line;
    e->col = col;
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    return s;
}

np_status np_err_set(np_err *e, np_status s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    err_vset(e, s, NULL, 0, 0, fmt, ap);
    va_end(ap);
    return s;
}

np_status np_err_at(np_err *e, np_status s, const char *file, int line, int col,
                    const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    err_vset(e, s, file, line, col, fmt, ap);
    va_end(ap);
    return s;
}

void np_err_prefix(np_err *e, const char *fmt, ...)
{
    if (!e)
        return;
    char old[NP_ERR_MSG_MAX];
    memcpy(old, e->msg, sizeof old);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    size_t used = n < 0 ? 0 : (size_t)n;
    if (used + 3 < sizeof e->msg) {
        size_t room = sizeof e->msg - used - 3, len = strlen(old);
        if (len > room)
            len = room;
        memcpy(e->msg + used, ": ", 2);
        memcpy(e->msg + used + 2, old, len);
        e->msg[used + 2 + len] = '\0';
    }
}

char *np_err_format(const np_err *e, char *buf, size_t n)
{
    if (e->file[0] && e->line > 0 && e->col > 0)
        snprintf(buf, n, "%s:%d:%d: %s", e->file, e->line, e->col, e->msg);
    else if (e->file[0] && e->line > 0)
        snprintf(buf, n, "%s:%d: %s", e->file, e->line, e->msg);
    else if (e->file[0])
        snprintf(buf, n, "%s: %s", e->file, e->msg);
    else
        snprintf(buf, n, "%s", e->msg);
    return buf;
}

const char *np_status_name(np_status s)
{
    return (unsigned)s < NP_STATUS_COUNT ? err_classes[s].name : "unknown";
}

int np_status_exit_code(np_status s)
{
    return (unsigned)s < NP_STATUS_COUNT ? err_classes[s].exit_code : 1;
}
