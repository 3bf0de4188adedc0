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
