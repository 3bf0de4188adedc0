/* csv.h — CSV (RFC 4180) for the commands' --csv and the sweep's results: written with fields
 * quoted when they hold a comma, a quote or a line break, quotes doubled; read back (a
 * sweep's --resume) by csv_next, which takes what csv_row writes and any RFC 4180 text. */
#ifndef NPUSIM_CSV_H
#define NPUSIM_CSV_H

#include <stdbool.h>
#include <stdio.h>

#include <jansson.h>

#include "err.h"

/* s as one field: a copy, quoted when needed (malloc'd; NULL when out of memory). */
char *csv_quote(const char *s);

/* Writes the fields of one row to f, separated by commas, ended by a newline. */
void csv_row(FILE *f, const char *const *fields, size_t n);

/* A table of JSON objects (rows, an array; what a command's --json prints) as CSV: the
 * header `keys`, then per object its values of those keys — integers exactly, reals with 12
 * significant digits, strings as they are, true / false, null or absent as an empty field.
 * Returns false when out of memory (a row may be cut then). */
bool csv_json_rows(FILE *f, const json_t *rows, const char *const *keys, size_t n_keys);

/* Reading: records of text[0..len), one call each.
 *
 *   csv_reader r;
 *   csv_reader_init(&r, text, len);
 *   while ((st = csv_next(&r, path, &f, &n, &torn, err)) == NP_OK && f) { ...; csv_fields_free(f, n); }
 */
typedef struct csv_reader {
    const char *p, *end;
    int line; /* the line the next record starts on (1-based) */
} csv_reader;

void csv_reader_init(csv_reader *r, const char *text, size_t len);

/* The next record: *fields a malloc'd array of *n malloc'd strings (csv_fields_free), or
 * NULL with *n 0 at the end of the text. A quoted field holds commas, doubled quotes and line
 * breaks; a record ends at a line break outside quotes ("\n" or "\r\n"). *torn is true for a
 * last record that no line break ends (a write cut short), an unclosed quote included; its
 * fields are given all the same. *line is the line it starts on. NP_ERR_SYNTAX at
 * path:line:col for a quote inside an unquoted field, text after a closing quote or a NUL
 * byte; NP_ERR_NOMEM. On failure *fields is NULL. */
np_status csv_next(csv_reader *r, const char *path, char ***fields, size_t *n, bool *torn,
                   int *line, np_err *err);

void csv_fields_free(char **fields, size_t n);

#endif
