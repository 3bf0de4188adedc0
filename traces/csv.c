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
