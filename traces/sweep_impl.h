/* sweep_impl.h — what sweep_file.c (the file and its points) and sweep.c (running them)
 * share (internal to traces/). */
#ifndef NPUSIM_SWEEP_IMPL_H
#define NPUSIM_SWEEP_IMPL_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "parse.h"
#include "sweep.h"

struct sweep {
    char *path;
    char **cmd;
    size_t n_cmd;
    char *arch;
    char **cols; /* the axes, in order of first appearance */
    bool *col_flag;
    size_t n_cols;
    char ***vals; /* [point][col]: the value, or NULL */
    char ***args; /* [point]: argv after the program name, NULL-terminated */
    size_t n_points;
    char **metric_names, **metric_paths;
    int *pareto_dir; /* per metric: -1 min, +1 max, 0 not an objective */
    size_t n_metrics;
};

/* The one door of a swept value (a grid, zip or points value): text is kept as written (the
 * CSV and the point's arguments use it unchanged); *out (when out is not NULL; a new
 * reference) is what the JSON lines record — an integer for a decimal integer, a real for a
 * decimal real that 12 significant digits print exactly, else the text. Refused, naming src:
 * NaN and infinities, hexadecimal, integers outside int64 and reals outside a double
 * (NP_ERR_RANGE or NP_ERR_SYNTAX); NP_ERR_NOMEM. */
np_status sweep_value(const np_src *src, const char *text, json_t **out, np_err *err);

#endif
