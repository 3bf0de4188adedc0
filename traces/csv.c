/* csv.c — CSV fields and rows (see csv.h). */
#include "csv.h"

#include <stdlib.h>
#include <string.h>

char *csv_quote(const char *s)
{
    size_t n = strlen(s), q = 0;
    if (!strpbrk(s, ",\"\r\n"))
        return strdup(s);
    for (const char *p = s; *p; p++)
        q += *p == '"';
    char *out = malloc(n + q + 3), *o = out;
    if (!out)
        return NULL;
    *o++ = '"';
    for (; *s; s++) {
        if (*s == '"')
            *o++ = '"';
        *o++ = *s;
    }
    *o++ = '"';
    *o = '\0';
    return out;
}

void csv_row(FILE *f, const char *const *fields, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char *q = csv_quote(fields[i] ? fields[i] : "");
        if (i)
            fputc(',', f);
        fputs(q ? q : "", f);
        free(q);
    }
    fputc('\n', f);
}

bool csv_json_rows(FILE *f, const json_t *rows, const char *const *keys, size_t n_keys)
{
    csv_row(f, keys, n_keys);
    const char **fields = malloc((n_keys ? n_keys : 1) * sizeof *fields);
    char *text = malloc((n_keys ? n_keys : 1) * 32);
    if (!fields || !text) {
        free(fields);
        free(text);
        return false;
    }
    size_t i;
    const json_t *o;
    json_array_foreach(rows, i, o) {
        for (size_t k = 0; k < n_keys; k++) {
            const json_t *v = json_object_get(o, keys[k]);
            char *buf = text + 32 * k;
            fields[k] = buf;
            if (json_is_string(v))
                fields[k] = json_string_value(v);
            else if (json_is_integer(v))
                snprintf(buf, 32, "%lld", (long long)json_integer_value(v));
            else if (json_is_real(v))
                snprintf(buf, 32, "%.12g", json_real_value(v));
            else if (json_is_boolean(v))
                fields[k] = json_is_true(v) ? "true" : "false";
            else
                fields[k] = "";
        }
        csv_row(f, fields, n_keys);
    }
    free(fields);
    free(text);
    return true;
}

/* ---- reading ---------------------------------------------------------------------------------- */

void csv_reader_init(csv_reader *r, const char *text, size_t len)
{
    *r = (csv_reader){text, text + len, 1};
}

void csv_fields_free(char **fields, size_t n)
{
    for (size_t i = 0; fields && i < n; i++)
        free(fields[i]);
    free(fields);
}

/* Appends field [s, s+len) (quotes already undone into it when quoted) to *f. */
static bool csv_push(char ***f, size_t *n, size_t *cap, char *field)
{
    if (!field)
        return false;
    if (*n == *cap) {
        size_t c = *cap ? 2 * *cap : 8;
        char **g = realloc(*f, c * sizeof *g);
        if (!g) {
            free(field);
            return false;
        }
        *f = g, *cap = c;
    }
    (*f)[(*n)++] = field;
    return true;
}

np_status csv_next(csv_reader *r, const char *path, char ***fields, size_t *n, bool *torn,
                   int *line, np_err *err)
{
    *fields = NULL, *n = 0, *torn = false, *line = r->line;
    if (r->p >= r->end)
        return NP_OK;
    const char *p = r->p, *line_start = p;
    char **f = NULL;
    size_t nf = 0, cap = 0;
    np_status st = NP_OK;
    for (;;) { /* one field per pass */
        char *buf = malloc((size_t)(r->end - p) + 1), *o = buf;
        if (!buf) {
            st = np_err_set(err, NP_ERR_NOMEM, "out of memory reading %s", path);
            break;
        }
        bool quoted = p < r->end && *p == '"', closed = !quoted;
        if (quoted)
            p++;
        while (p < r->end) {
            char c = *p;
            if (c == '\0') {
                st = np_err_at(err, NP_ERR_SYNTAX, path, r->line, (int)(p - line_start) + 1,
                               "a NUL byte: not CSV text");
                break;
            }
            if (quoted && !closed) {
                if (c == '"' && p + 1 < r->end && p[1] == '"') {
                    *o++ = '"', p += 2;
                } else if (c == '"') {
                    closed = true, p++;
                } else {
                    if (c == '\n')
                        r->line++, line_start = p + 1;
                    *o++ = c, p++;
                }
                continue;
            }
            if (c == ',' || c == '\n' || (c == '\r' && p + 1 < r->end && p[1] == '\n'))
                break;
            if (c == '"' || quoted) {
                st = np_err_at(err, NP_ERR_SYNTAX, path, r->line, (int)(p - line_start) + 1,
                               quoted ? "text after a closing quote (a quoted field ends at "
                                        "',' or the line's end)"
                                      : "a quote inside a field that does not start with one");
                break;
            }
            *o++ = c, p++;
        }
        *o = '\0';
        if (st != NP_OK) {
            free(buf);
            break;
        }
        if (!csv_push(&f, &nf, &cap, buf)) {
            st = np_err_set(err, NP_ERR_NOMEM, "out of memory reading %s", path);
            break;
        }
        if (p >= r->end) { /* the text ends without a line break: a torn record */
            *torn = true;
            break;
        }
        if (*p == ',') {
            p++;
            continue;
        }
        p += *p == '\r' ? 2 : 1; /* the record's line break */
        r->line++;
        break;
    }
    if (st != NP_OK) {
        csv_fields_free(f, nf);
        return st;
    }
    r->p = p;
    *fields = f, *n = nf;
    return NP_OK;
}
