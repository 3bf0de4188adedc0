/* csv.h — CSV output (RFC 4180) for the commands' --csv and the sweep's results: fields are
 * quoted when they hold a comma, a quote or a line break, quotes doubled. */
#ifndef NPUSIM_CSV_H
#define NPUSIM_CSV_H

#include <stdbool.h>
#include <stdio.h>

#include <jansson.h>

/* s as one field: a copy, quoted when needed (malloc'd; NULL when out of memory). */
char *csv_quote(const char *s);

/* Writes the fields of one row to f, separated by commas, ended by a newline. */
void csv_row(FILE *f, const char *const *fields, size_t n);

/* A table of JSON objects (rows, an array; what a command's --json prints) as CSV: the
 * header `keys`, then per object its values of those keys — integers exactly, reals with 12
 * significant digits, strings as they are, true / false, null or absent as an empty field.
 * Returns false when out of memory (a row may be cut then). */
bool csv_json_rows(FILE *f, const json_t *rows, const char *const *keys, size_t n_keys);

#endif
