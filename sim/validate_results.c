/* validate_results.c — the results of an earlier `npusim validate --json` read back (see
 * validate.h: val_results_load), so that a long validation can be run in parts (a row or a
 * suite per job, on several machines or days) and its tables printed from them. */
#include "validate.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

size_t val_set_rows(const val_set *set)
{
    size_t n = 0;
    for (size_t f = 0; f < set->n_files; f++)
        n += set->files[f].n_rows;
    return n;
}

size_t val_row_index(const val_set *set, const val_file *f, size_t r)
{
    size_t n = 0;
    for (const val_file *g = set->files; g != f; g++)
        n += g->n_rows;
    return n + r;
}

/* The row of set whose id is id; false when none is. */
static bool find_row(const val_set *set, const char *id, size_t *at)
{
    char buf[96];
    size_t n = 0;
    for (size_t f = 0; f < set->n_files; f++)
        for (size_t r = 0; r < set->files[f].n_rows; r++, n++)
            if (strcmp(val_row_id(&set->files[f], &set->files[f].rows[r], buf, sizeof buf),
                       id) == 0) {
                *at = n;
                return true;
            }
    return false;
}

const val_file *val_row_at(const val_set *set, size_t at, size_t *r)
{
    for (size_t f = 0; f < set->n_files; f++) {
        if (at < set->files[f].n_rows) {
            *r = at;
            return &set->files[f];
        }
        at -= set->files[f].n_rows;
    }
    return NULL;
}

/* A number of the row object j, or NAN when it is absent or not a number. */
static double num_of(const json_t *j, const char *key)
{
    const json_t *v = json_object_get(j, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

/* Fills *out from the row object j of row at; a message in err otherwise. */
static np_status row_of(const val_set *set, const char *path, const json_t *j, size_t at,
                        val_result *out, np_err *err)
{
    size_t r = 0;
    const val_file *f = val_row_at(set, at, &r);
    const char *id = json_string_value(json_object_get(j, "id"));
    double pub = num_of(j, "published"), data = val_row_published(f, &f->rows[r]);
    if (!(fabs(pub - data) <= 1e-9 * fabs(data)))
        return np_err_at(err, NP_ERR_INCONSISTENT, path, 0, 0,
                         "row '%s': published %.17g here, %.17g in the data: results of "
                         "other data files (run the row again)", id, pub, data);
    const json_t *ran = json_object_get(j, "ran");
    if (!json_is_boolean(ran))
        return np_err_at(err, NP_ERR_MISSING, path, 0, 0,
                         "row '%s' has no result (\"ran\": true or false): the output of "
                         "`npusim validate --list --json`, not of a run", id);
    memset(out, 0, sizeof *out);
    out->published = data;
    out->ran = json_is_true(ran);
    out->wall_s = num_of(j, "wall_s");
    if (!out->ran) {
        const char *why = json_string_value(json_object_get(j, "why"));
        snprintf(out->why, sizeof out->why, "%s", why ? why : "");
        return NP_OK;
    }
    out->ours = num_of(j, "ours");
    out->sim_s = num_of(j, "sim_s");
    if (!isfinite(out->ours) || !isfinite(out->sim_s) || !isfinite(out->wall_s))
        return np_err_at(err, NP_ERR_MISSING, path, 0, 0,
                         "row '%s' ran but lacks a number among ours, sim_s and wall_s", id);
    out->err_pct = 100.0 * (out->ours - data) / data;
    return NP_OK;
}

np_status val_results_load(const val_set *set, const char *path, val_result *out, bool *have,
                           np_err *err)
{
    json_error_t je;
    json_t *doc = json_load_file(path, 0, &je);
    if (!doc) {
        FILE *probe = fopen(path, "r");
        if (!probe)
            return np_err_at(err, NP_ERR_IO, path, 0, 0, "cannot read: %s", je.text);
        fclose(probe);
        return np_err_at(err, NP_ERR_SYNTAX, path, je.line, je.column, "not JSON: %s",
                         je.text);
    }
    np_status st = NP_OK;
    const json_t *suites = json_object_get(doc, "suites");
    if (!json_is_array(suites))
        st = np_err_at(err, NP_ERR_FORMAT, path, 0, 0,
                       "not the output of `npusim validate --json` (no \"suites\" array)");
    size_t si;
    const json_t *s;
    json_array_foreach(suites, si, s)
    {
        const json_t *rows = json_object_get(s, "rows");
        if (st != NP_OK)
            break;
        if (!json_is_array(rows)) {
            st = np_err_at(err, NP_ERR_FORMAT, path, 0, 0, "suite %zu has no \"rows\" array",
                           si + 1);
            break;
        }
        size_t ri;
        const json_t *j;
        json_array_foreach(rows, ri, j)
        {
            const char *id = json_string_value(json_object_get(j, "id"));
            size_t at;
            if (!id) {
                st = np_err_at(err, NP_ERR_FORMAT, path, 0, 0,
                               "row %zu of suite %zu has no \"id\"", ri + 1, si + 1);
                break;
            }
            if (!find_row(set, id, &at)) {
                st = np_err_at(err, NP_ERR_UNKNOWN_KEY, path, 0, 0,
                               "row '%s' is not a row of the data (`npusim validate --list`)",
                               id);
                break;
            }
            if ((st = row_of(set, path, j, at, &out[at], err)) != NP_OK)
                break;
            have[at] = true;
        }
    }
    json_decref(doc);
    return st;
}
