/* csv.h — CSV output (RFC 4180) for the commands' --csv and the sweep's results: fields are
 * quoted when they hold a comma, a quote or a line break, quotes doubled. */
#ifndef NPUSIM_CSV_H
#define NPUSIM_CSV_H

#include <stdio.h>

/* s as one field: a copy, quoted when needed (malloc'd; NULL when out of memory). */
char *csv_quote(const char *s);

/* Writes the fields of one row to f, separated by commas, ended by a newline. */
void csv_row(FILE *f, const char *const *fields, size_t n);

#endif
