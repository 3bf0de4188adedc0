/* sweep_impl.h — what sweep_file.c (the file and its points) and sweep.c (running them)
 * share (internal to traces/). */
#ifndef NPUSIM_SWEEP_IMPL_H
#define NPUSIM_SWEEP_IMPL_H

#include <stdbool.h>
#include <stddef.h>

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

#endif
