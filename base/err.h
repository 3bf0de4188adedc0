/* err.h — errors as values.
 *
 * Every function that can fail returns an np_status and, on failure, fills a caller-provided
 * np_err with the class, an optional source position and a message. Nothing below sim/main
 * prints or exits; the command-line layer formats the error (np_err_format) and exits with
 * np_status_exit_code(). The classes are defined once, in err.def.
 *
 *   np_err e = {0};
 *   if (arch_load_file(path, &cfg, &e) != NP_OK) { np_err_format(&e, buf, sizeof buf); ... }
 */
#ifndef NPUSIM_ERR_H
#define NPUSIM_ERR_H

#include <stddef.h>

typedef enum np_status {
    NP_OK = 0,
#define ERR_CLASS(name, text, exit_status, desc) NP_ERR_##name,
#include "err.def"
#undef ERR_CLASS
    NP_STATUS_COUNT
} np_status;

#define NP_ERR_FILE_MAX 256
#define NP_ERR_MSG_MAX 512

typedef struct np_err {
    np_status status;           /* NP_OK until something fails */
    char file[NP_ERR_FILE_MAX]; /* "" when the error has no source file */
    int line, col;              /* 1-based; 0 when unknown */
    char msg[NP_ERR_MSG_MAX];
} np_err;

/* Fills e (when not NULL) with status s and a printf-style message; returns s. */
np_status np_err_set(np_err *e, np_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Like np_err_set, with a source position (file may be NULL; line/col 0 when unknown). */
np_status np_err_at(np_err *e, np_status s, const char *file, int line, int col,
                    const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* Prepends "context: " to e's message (e.g. the option that carried a bad value). */
void np_err_prefix(np_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Writes "file:line:col: message" (or the parts that are known) into buf; returns buf. */
char *np_err_format(const np_err *e, char *buf, size_t n);

/* "syntax", "range", ... — the class name used in messages and JSON. */
const char *np_status_name(np_status s);

/* The process exit status for a command that failed with s (0 for NP_OK). */
int np_status_exit_code(np_status s);

#endif
