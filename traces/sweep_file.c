/* sweep_file.c — a sweep file read with libyaml into its points and each point's npusim
 * arguments (see sweep.h for the format). Every error names the file, line and column.
 *
 * Before the document is built, one pass over libyaml's events refuses what the file format
 * has no use for and what would cost time or memory: nesting deeper than SWEEP_MAX_DEPTH and
 * a second document. Every mapping is then checked for duplicate keys, every axis value goes
 * through sweep_value (the one door a swept value passes), and the number of points is
 * counted against the cap before any point is made. */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "arch.h"
#include "parse.h"
#include "readfile.h"
#include "sweep_impl.h"

#define SWEEP_MAX_DEPTH 16                /* a sweep file needs 3 (points: - {k: v}) */
#define SWEEP_MAX_FILE_BYTES (16u << 20)   /* a sweep file is hand-written */

/* ---- a value ---------------------------------------------------------------------------------- */

np_status sweep_value(const np_src *src, const char *text, json_t **out, np_err *err)
{
    if (out)
        *out = NULL;
    char *end;
    errno = 0;
    double d = strtod(text, &end);
    bool range = errno == ERANGE;
    bool number = end != text && !*end; /* what strtod takes: decimal, hex, inf, nan */
    const char *t = text + (*text == '+' || *text == '-');
    if (number && (*t == 'i' || *t == 'I' || *t == 'n' || *t == 'N'))
        return np_src_fail(src, NP_ERR_RANGE, 0, err, "'%s' is not a finite number (NaN and "
                           "infinities are refused)", text);
    if (number && t[0] == '0' && (t[1] == 'x' || t[1] == 'X'))
        return np_src_fail(src, NP_ERR_SYNTAX, 0, err, "'%s' is hexadecimal: write the value "
                           "in decimal", text);
    bool integer = number && *text != '+' && strspn(t, "0123456789") == strlen(t);
    json_t *j = NULL;
    if (integer) {
        int64_t i;
        if (np_parse_i64(src, text, INT64_MIN, INT64_MAX, &i, err) != NP_OK)
            return err->status;
        j = json_integer((json_int_t)i);
    } else if (number) {
        double v;
        if (range && !isfinite(d))
            return np_src_fail(src, NP_ERR_RANGE, 0, err, "'%s' is larger than a double holds "
                               "(about 1.8e308)", text);
        if (range) /* below the smallest normal double: it would not read as written */
            return np_src_fail(src, NP_ERR_RANGE, 0, err, "'%s' is too small for a double "
                               "(it would read as %g)", text, d);
        if (np_parse_f64(src, text, -DBL_MAX, DBL_MAX, &v, err) != NP_OK)
            return err->status;
        char shown[40];
        snprintf(shown, sizeof shown, "%.12g", v); /* what the JSON lines print */
        j = strtod(shown, NULL) == v ? json_real(v) : json_string(text);
    } else {
        j = json_string(text);
    }
    if (!out) {
        json_decref(j);
        return NP_OK;
    }
    if (!j)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory");
    *out = j;
    return NP_OK;
}

/* ---- the file --------------------------------------------------------------------------------- */

typedef struct loader {
    yaml_document_t doc;
    const char *path;
    size_t max_points;
    np_err *err;
} loader;

static np_status at(loader *l, const yaml_node_t *n, np_status s, const char *fmt, const char *a,
                    const char *b)
{
    char msg[400];
    snprintf(msg, sizeof msg, fmt, a ? a : "", b ? b : "");
    return np_err_at(l->err, s, l->path, n ? (int)n->start_mark.line + 1 : 0,
                     n ? (int)n->start_mark.column + 1 : 0, "%s", msg);
}

static const char *scalar(const yaml_node_t *n)
{
    return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

static char **grow_strs(char **v, size_t n)
{
    return realloc(v, (n + 1) * sizeof *v);
}

/* The column of key (added when new; its kind checked: "--flag" or an architecture key). */
static np_status column(loader *l, sweep *s, const yaml_node_t *kn, size_t *out)
{
    const char *key = scalar(kn);
    if (!key || !*key)
        return at(l, kn, NP_ERR_TYPE, "an axis is named by a text (section.key or --flag)%s%s",
                  NULL, NULL);
    for (size_t c = 0; c < s->n_cols; c++)
        if (!strcmp(s->cols[c], key)) {
            *out = c;
            return NP_OK;
        }
    bool flag = !strncmp(key, "--", 2);
    if (!flag && !arch_key_find(key)) {
        const arch_key_info *near = arch_key_suggest(key, NULL);
        char hint[96] = "";
        if (near)
            snprintf(hint, sizeof hint, " (did you mean %s?)", near->full_name);
        return at(l, kn, NP_ERR_UNKNOWN_KEY,
                  "'%s' is neither an architecture key (section.key, given as --set) nor a flag "
                  "(--name)%s", key, hint);
    }
    char **cols = grow_strs(s->cols, s->n_cols);
    if (cols)
        s->cols = cols;
    bool *fl = realloc(s->col_flag, (s->n_cols + 1) * sizeof *fl);
    if (fl)
        s->col_flag = fl;
    if (!cols || !fl || !(s->cols[s->n_cols] = strdup(key)))
        return np_err_set(l->err, NP_ERR_NOMEM, "out of memory");
    s->col_flag[s->n_cols] = flag;
    *out = s->n_cols++;
    return NP_OK;
}

typedef struct axis {
    size_t col;
    yaml_node_t *key, *vals; /* vals: a sequence of scalars */
} axis;

/* Value node vn of axis key through the one door (sweep_value); a NUL byte (a YAML "\0"
 * escape) would cut it short, so it is refused too. */
static np_status value_ok(loader *l, const yaml_node_t *vn, const char *key)
{
    const char *v = scalar(vn);
    if (strlen(v) != vn->data.scalar.length)
        return at(l, vn, NP_ERR_SYNTAX, "the value of '%s' holds a NUL byte%s", key, NULL);
    return sweep_value(NP_SRC_AT(l->path, (int)vn->start_mark.line + 1,
                                 (int)vn->start_mark.column + 1, key),
                       v, NULL, l->err);
}

/* The axes of a mapping (grid or zip): each key a column, each value a non-empty sequence. */
static np_status axes(loader *l, sweep *s, yaml_node_t *map, axis **out, size_t *n)
{
    *out = NULL, *n = 0;
    if (!map)
        return NP_OK;
    if (map->type != YAML_MAPPING_NODE)
        return at(l, map, NP_ERR_TYPE, "expected a mapping of axes (key: [values])%s%s", NULL, NULL);
    size_t k = (size_t)(map->data.mapping.pairs.top - map->data.mapping.pairs.start);
    axis *a = calloc(k + 1, sizeof *a);
    if (!a)
        return np_err_set(l->err, NP_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < k; i++) {
        yaml_node_pair_t *p = &map->data.mapping.pairs.start[i];
        yaml_node_t *kn = yaml_document_get_node(&l->doc, p->key),
                    *vn = yaml_document_get_node(&l->doc, p->value);
        np_status st = column(l, s, kn, &a[i].col);
        if (st == NP_OK && (vn->type != YAML_SEQUENCE_NODE ||
                            vn->data.sequence.items.top == vn->data.sequence.items.start))
            st = at(l, vn, NP_ERR_TYPE, "axis '%s' needs a list of one or more values%s",
                    scalar(kn), NULL);
        for (yaml_node_item_t *it = vn->data.sequence.items.start;
             st == NP_OK && vn->type == YAML_SEQUENCE_NODE && it < vn->data.sequence.items.top;
             it++) {
            yaml_node_t *v = yaml_document_get_node(&l->doc, *it);
            st = scalar(v) ? value_ok(l, v, scalar(kn))
                           : at(l, v, NP_ERR_TYPE, "the values of '%s' are scalars%s",
                                scalar(kn), NULL);
        }
        if (st != NP_OK) {
            free(a);
            return st;
        }
        a[i].key = kn, a[i].vals = vn;
    }
    *out = a, *n = k;
    return NP_OK;
}

static size_t seq_len(const yaml_node_t *n)
{
    return (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
}

static const char *seq_at(loader *l, const yaml_node_t *n, size_t i)
{
    return scalar(yaml_document_get_node(&l->doc, n->data.sequence.items.start[i]));
}

/* Appends a point (values per column, copied; NULL: unset). */
static np_status add_point(sweep *s, const char *const *v, np_err *err)
{
    char ***vals = realloc(s->vals, (s->n_points + 1) * sizeof *vals);
    if (!vals)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory");
    s->vals = vals;
    char **row = calloc(s->n_cols + 1, sizeof *row);
    if (!row)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory");
    s->vals[s->n_points++] = row;
    for (size_t c = 0; c < s->n_cols; c++)
        if (v[c] && !(row[c] = strdup(v[c])))
            return np_err_set(err, NP_ERR_NOMEM, "out of memory");
    return NP_OK;
}

static np_status build_args(sweep *s, np_err *err)
{
    if (!(s->args = calloc(s->n_points + 1, sizeof *s->args)))
        return np_err_set(err, NP_ERR_NOMEM, "out of memory");
    for (size_t p = 0; p < s->n_points; p++) {
        size_t n = s->n_cmd + 2 + 2 * s->n_cols + 2;
        char **a = calloc(n, sizeof *a);
        if (!a)
            return np_err_set(err, NP_ERR_NOMEM, "out of memory");
        s->args[p] = a;
        size_t k = 0;
        bool ok = true;
        for (size_t i = 0; i < s->n_cmd; i++)
            ok &= (a[k++] = strdup(s->cmd[i])) != NULL;
        if (s->arch) {
            ok &= (a[k++] = strdup("--arch")) != NULL;
            ok &= (a[k++] = strdup(s->arch)) != NULL;
        }
        for (size_t c = 0; c < s->n_cols; c++) {
            const char *v = s->vals[p][c];
            if (!v)
                continue;
            if (s->col_flag[c]) {
                ok &= (a[k++] = strdup(s->cols[c])) != NULL;
                ok &= (a[k++] = strdup(v)) != NULL;
            } else {
                size_t len = strlen(s->cols[c]) + strlen(v) + 2;
                ok &= (a[k++] = strdup("--set")) != NULL;
                if ((a[k] = malloc(len)))
                    snprintf(a[k], len, "%s=%s", s->cols[c], v);
                ok &= a[k++] != NULL;
            }
        }
        ok &= (a[k++] = strdup("--json")) != NULL;
        if (!ok)
            return np_err_set(err, NP_ERR_NOMEM, "out of memory");
    }
    return NP_OK;
}

typedef struct key_at {
    const char *key;
    const yaml_node_t *node;
    size_t i; /* its place in the mapping */
} key_at;

static int key_cmp(const void *a, const void *b)
{
    const key_at *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    return c ? c : (x->i > y->i) - (x->i < y->i);
}

/* No mapping of the document gives a key twice (libyaml keeps both; the sweep would take
 * the last command: or cross an axis with itself). The error is at the first repetition in
 * the file. */
static np_status no_duplicate_keys(loader *l)
{
    key_at *k = NULL;
    size_t cap = 0;
    const yaml_node_t *dup = NULL;
    size_t first_line = 0;
    for (yaml_node_t *n = l->doc.nodes.start; n < l->doc.nodes.top; n++) {
        if (n->type != YAML_MAPPING_NODE)
            continue;
        size_t m = 0, np = (size_t)(n->data.mapping.pairs.top - n->data.mapping.pairs.start);
        if (np > cap) {
            key_at *g = realloc(k, np * sizeof *g);
            if (!g) {
                free(k);
                return np_err_set(l->err, NP_ERR_NOMEM, "out of memory");
            }
            k = g, cap = np;
        }
        for (size_t i = 0; i < np; i++) {
            const yaml_node_t *kn = yaml_document_get_node(&l->doc,
                                                           n->data.mapping.pairs.start[i].key);
            if (scalar(kn))
                k[m++] = (key_at){scalar(kn), kn, i};
        }
        qsort(k, m, sizeof *k, key_cmp); /* equal keys together, in file order */
        for (size_t i = 1, first = 0; i < m; i++) {
            if (strcmp(k[i].key, k[first].key)) {
                first = i;
                continue;
            }
            if (!dup || k[i].node->start_mark.index < dup->start_mark.index)
                dup = k[i].node, first_line = k[first].node->start_mark.line + 1;
        }
    }
    free(k);
    if (!dup)
        return NP_OK;
    char ln[32];
    snprintf(ln, sizeof ln, "%zu", first_line);
    return at(l, dup, NP_ERR_DUPLICATE, "duplicate key '%s' (first at line %s)", scalar(dup), ln);
}

static np_status load_doc(loader *l, sweep *s)
{
    np_status dup = no_duplicate_keys(l);
    if (dup != NP_OK)
        return dup;
    yaml_node_t *root = yaml_document_get_root_node(&l->doc);
    if (!root || root->type != YAML_MAPPING_NODE)
        return at(l, root, NP_ERR_TYPE, "a sweep file is a mapping (command:, grid:, metrics:, "
                  "...)%s%s", NULL, NULL);
    yaml_node_t *cmd = NULL, *grid = NULL, *zip = NULL, *points = NULL, *metrics = NULL,
                *pareto = NULL;
    static const char *const known = "command, arch, grid, zip, points, metrics, pareto";
    for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top;
         p++) {
        yaml_node_t *kn = yaml_document_get_node(&l->doc, p->key),
                    *vn = yaml_document_get_node(&l->doc, p->value);
        const char *k = scalar(kn);
        if (!k)
            return at(l, kn, NP_ERR_TYPE, "keys are names (%s)%s", known, NULL);
        if (!strcmp(k, "command"))
            cmd = vn;
        else if (!strcmp(k, "arch")) {
            if (!scalar(vn))
                return at(l, vn, NP_ERR_TYPE, "arch is a preset name or a file%s%s", NULL, NULL);
            if (!(s->arch = strdup(scalar(vn))))
                return np_err_set(l->err, NP_ERR_NOMEM, "out of memory");
        } else if (!strcmp(k, "grid"))
            grid = vn;
        else if (!strcmp(k, "zip"))
            zip = vn;
        else if (!strcmp(k, "points"))
            points = vn;
        else if (!strcmp(k, "metrics"))
            metrics = vn;
        else if (!strcmp(k, "pareto"))
            pareto = vn;
        else
            return at(l, kn, NP_ERR_UNKNOWN_KEY, "unknown key '%s' (known: %s)", k, known);
    }
    /* command: [sub, args...] or "sub" */
    if (!cmd)
        return at(l, root, NP_ERR_MISSING, "no command: (the npusim subcommand each point "
                  "runs, e.g. [layer, --gemm, \"512,256,128\"])%s%s", NULL, NULL);
    if (scalar(cmd)) {
        if (!(s->cmd = calloc(1, sizeof *s->cmd)) || !(s->cmd[0] = strdup(scalar(cmd))))
            return np_err_set(l->err, NP_ERR_NOMEM, "out of memory");
        s->n_cmd = 1;
    } else if (cmd->type == YAML_SEQUENCE_NODE && seq_len(cmd)) {
        if (!(s->cmd = calloc(seq_len(cmd), sizeof *s->cmd)))
            return np_err_set(l->err, NP_ERR_NOMEM, "out of memory");
        for (size_t i = 0; i < seq_len(cmd); i++) {
            const char *v = seq_at(l, cmd, i);
            if (!v)
                return at(l, cmd, NP_ERR_TYPE, "command: a list of words%s%s", NULL, NULL);
            if (!(s->cmd[s->n_cmd++] = strdup(v)))
                return np_err_set(l->err, NP_ERR_NOMEM, "out of memory");
        }
    } else {
        return at(l, cmd, NP_ERR_TYPE, "command: the subcommand and its fixed arguments, as a "
                  "list%s%s", NULL, NULL);
    }
    if (!strcmp(s->cmd[0], "sweep"))
        return at(l, cmd, NP_ERR_TYPE, "a sweep cannot run sweeps%s%s", NULL, NULL);
    /* metrics: name: path */
    if (!metrics || metrics->type != YAML_MAPPING_NODE ||
        metrics->data.mapping.pairs.top == metrics->data.mapping.pairs.start)
        return at(l, metrics ? metrics : root, metrics ? NP_ERR_TYPE : NP_ERR_MISSING,
                  "metrics: a mapping of names to paths into the command's --json output "
                  "(cycles: layers/0/total_cycles)%s%s", NULL, NULL);
    size_t nm = (size_t)(metrics->data.mapping.pairs.top - metrics->data.mapping.pairs.start);
    s->metric_names = calloc(nm, sizeof(char *));
    s->metric_paths = calloc(nm, sizeof(char *));
    s->pareto_dir = calloc(nm, sizeof(int));
    if (!s->metric_names || !s->metric_paths || !s->pareto_dir)
        return np_err_set(l->err, NP_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < nm; i++) {
        yaml_node_pair_t *p = &metrics->data.mapping.pairs.start[i];
        const char *k = scalar(yaml_document_get_node(&l->doc, p->key)),
                   *v = scalar(yaml_document_get_node(&l->doc, p->value));
        if (!k || !v || !*k || !*v)
            return at(l, yaml_document_get_node(&l->doc, p->key), NP_ERR_TYPE,
                      "a metric is name: path%s%s", NULL, NULL);
        if (!(s->metric_names[i] = strdup(k)) || !(s->metric_paths[i] = strdup(v)))
            return np_err_set(l->err, NP_ERR_NOMEM, "out of memory");
        s->n_metrics++;
    }
    if (pareto) {
        if (pareto->type != YAML_MAPPING_NODE)
            return at(l, pareto, NP_ERR_TYPE, "pareto: a mapping of metrics to min or max%s%s",
                      NULL, NULL);
        for (yaml_node_pair_t *p = pareto->data.mapping.pairs.start;
             p < pareto->data.mapping.pairs.top; p++) {
            yaml_node_t *kn = yaml_document_get_node(&l->doc, p->key),
                        *vn = yaml_document_get_node(&l->doc, p->value);
            const char *k = scalar(kn), *v = scalar(vn);
            size_t m = 0;
            while (k && m < s->n_metrics && strcmp(s->metric_names[m], k))
                m++;
            if (!k || m == s->n_metrics)
                return at(l, kn, NP_ERR_UNKNOWN_KEY, "pareto: '%s' is not one of the metrics%s",
                          k, NULL);
            if (!v || (strcmp(v, "min") && strcmp(v, "max")))
                return at(l, vn, NP_ERR_TYPE, "pareto: '%s' is min or max%s", k, NULL);
            s->pareto_dir[m] = strcmp(v, "min") ? 1 : -1;
        }
    }
    /* the points: grid x zip, then points */
    axis *ga = NULL, *za = NULL;
    size_t ng = 0, nz = 0;
    np_status st = axes(l, s, grid, &ga, &ng);
    if (st == NP_OK)
        st = axes(l, s, zip, &za, &nz);
    size_t zlen = nz ? seq_len(za[0].vals) : 1;
    for (size_t i = 1; st == NP_OK && i < nz; i++)
        if (seq_len(za[i].vals) != zlen)
            st = at(l, za[i].vals, NP_ERR_INCONSISTENT,
                    "zip: '%s' has a different number of values than '%s'", s->cols[za[i].col],
                    s->cols[za[0].col]);
    for (size_t i = 0; st == NP_OK && i < nz; i++)
        for (size_t g = 0; st == NP_OK && g < ng; g++)
            if (za[i].col == ga[g].col)
                st = at(l, za[i].key, NP_ERR_DUPLICATE, "'%s' is an axis of grid: and of zip: "
                        "(an axis is in one of them)%s", s->cols[za[i].col], NULL);
    if (st == NP_OK && points && points->type != YAML_SEQUENCE_NODE)
        st = at(l, points, NP_ERR_TYPE, "points: a list of mappings (key: value)%s%s", NULL, NULL);
    /* the number of points, against the cap, before any is made */
    size_t total = 1, n_given = points && st == NP_OK ? seq_len(points) : 0;
    bool over = false;
    for (size_t g = 0; g < ng; g++)
        over |= __builtin_mul_overflow(total, seq_len(ga[g].vals), &total);
    over |= __builtin_mul_overflow(total, zlen, &total);
    if (!ng && !nz)
        total = 0;
    over |= __builtin_add_overflow(total, n_given, &total);
    if (st == NP_OK && (over || total > l->max_points)) {
        char n[32];
        if (over)
            snprintf(n, sizeof n, "more than %zu", SIZE_MAX);
        else
            snprintf(n, sizeof n, "%zu", total);
        const yaml_node_t *where = grid ? grid : zip ? zip : points;
        st = np_err_at(l->err, NP_ERR_RANGE, l->path, (int)where->start_mark.line + 1,
                       (int)where->start_mark.column + 1, "the sweep has %s points, more than "
                       "the cap of %zu (--max-points N raises it)", n, l->max_points);
    }
    /* the columns of points come in before any point is made */
    for (size_t i = 0; st == NP_OK && points && i < seq_len(points); i++) {
        yaml_node_t *pt = yaml_document_get_node(&l->doc, points->data.sequence.items.start[i]);
        if (pt->type != YAML_MAPPING_NODE) {
            st = at(l, pt, NP_ERR_TYPE, "a point is a mapping (key: value)%s%s", NULL, NULL);
            break;
        }
        for (yaml_node_pair_t *p = pt->data.mapping.pairs.start;
             st == NP_OK && p < pt->data.mapping.pairs.top; p++) {
            size_t c;
            st = column(l, s, yaml_document_get_node(&l->doc, p->key), &c);
            yaml_node_t *vn = yaml_document_get_node(&l->doc, p->value);
            if (st == NP_OK)
                st = scalar(vn) ? value_ok(l, vn, s->cols[c])
                                : at(l, vn, NP_ERR_TYPE, "the value of '%s' is a scalar%s",
                                     s->cols[c], NULL);
        }
    }
    const char **row = calloc(s->n_cols + 1, sizeof *row);
    size_t *idx = calloc(ng + 1, sizeof *idx);
    if (st == NP_OK && (!row || !idx))
        st = np_err_set(l->err, NP_ERR_NOMEM, "out of memory");
    if (st == NP_OK && (ng || nz)) {
        for (;;) { /* odometer over the grid, the zip axis last */
            for (size_t z = 0; st == NP_OK && z < zlen; z++) {
                memset(row, 0, (s->n_cols + 1) * sizeof *row);
                for (size_t g = 0; g < ng; g++)
                    row[ga[g].col] = seq_at(l, ga[g].vals, idx[g]);
                for (size_t k = 0; k < nz; k++)
                    row[za[k].col] = seq_at(l, za[k].vals, z);
                st = add_point(s, row, l->err);
            }
            size_t g = ng;
            while (g && ++idx[g - 1] == seq_len(ga[g - 1].vals))
                idx[--g] = 0;
            if (!g || st != NP_OK)
                break;
        }
    }
    for (size_t i = 0; st == NP_OK && points && i < seq_len(points); i++) {
        yaml_node_t *pt = yaml_document_get_node(&l->doc, points->data.sequence.items.start[i]);
        memset(row, 0, (s->n_cols + 1) * sizeof *row);
        for (yaml_node_pair_t *p = pt->data.mapping.pairs.start; p < pt->data.mapping.pairs.top;
             p++) {
            size_t c;
            column(l, s, yaml_document_get_node(&l->doc, p->key), &c);
            row[c] = scalar(yaml_document_get_node(&l->doc, p->value));
        }
        st = add_point(s, row, l->err);
    }
    free(row);
    free(idx);
    free(ga);
    free(za);
    if (st == NP_OK && !s->n_points)
        st = at(l, root, NP_ERR_MISSING, "no points: give grid:, zip: or points:%s%s", NULL, NULL);
    if (st == NP_OK)
        st = build_args(s, l->err);
    return st;
}

/* The events of text, before a document is built: nesting deeper than SWEEP_MAX_DEPTH and a
 * second document are refused (at their first character), as is bad YAML. */
static np_status prescan(const char *path, const char *text, size_t len, np_err *err)
{
    yaml_parser_t p;
    if (!yaml_parser_initialize(&p))
        return np_err_set(err, NP_ERR_NOMEM, "out of memory");
    yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
    np_status st = NP_OK;
    int depth = 0, docs = 0;
    for (bool end = false; !end && st == NP_OK;) {
        yaml_event_t e;
        if (!yaml_parser_parse(&p, &e)) {
            st = np_err_at(err, NP_ERR_SYNTAX, path, (int)p.problem_mark.line + 1,
                           (int)p.problem_mark.column + 1, "%s",
                           p.problem ? p.problem : "bad YAML");
            break;
        }
        int line = (int)e.start_mark.line + 1, col = (int)e.start_mark.column + 1;
        if (e.type == YAML_DOCUMENT_START_EVENT && ++docs > 1)
            st = np_err_at(err, NP_ERR_SYNTAX, path, line, col, "a second YAML document (after "
                           "'---'): a sweep file is one document");
        else if ((e.type == YAML_SEQUENCE_START_EVENT || e.type == YAML_MAPPING_START_EVENT) &&
                 ++depth > SWEEP_MAX_DEPTH)
            st = np_err_at(err, NP_ERR_RANGE, path, line, col, "nested deeper than %d levels "
                           "(a sweep file needs 3)", SWEEP_MAX_DEPTH);
        else if (e.type == YAML_SEQUENCE_END_EVENT || e.type == YAML_MAPPING_END_EVENT)
            depth--;
        end = e.type == YAML_STREAM_END_EVENT;
        yaml_event_delete(&e);
    }
    yaml_parser_delete(&p);
    return st;
}

np_status sweep_load(const char *path, size_t max_points, sweep **out, np_err *err)
{
    *out = NULL;
    char *text;
    size_t len;
    np_status st = np_read_file(path, SWEEP_MAX_FILE_BYTES, "a sweep file", &text, &len, err);
    if (st != NP_OK)
        return st;
    if ((st = prescan(path, text, len, err)) != NP_OK) {
        free(text);
        return st;
    }
    sweep *s = calloc(1, sizeof *s);
    loader l = {.path = path, .max_points = max_points, .err = err};
    yaml_parser_t parser;
    if (!s || !yaml_parser_initialize(&parser)) {
        free(s);
        free(text);
        return np_err_set(err, NP_ERR_NOMEM, "out of memory");
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &l.doc)) {
        st = np_err_at(err, NP_ERR_SYNTAX, path, (int)parser.problem_mark.line + 1,
                       (int)parser.problem_mark.column + 1, "%s", parser.problem ? parser.problem
                                                                                 : "bad YAML");
    } else {
        if (!(s->path = strdup(path)))
            st = np_err_set(err, NP_ERR_NOMEM, "out of memory");
        else
            st = load_doc(&l, s);
        yaml_document_delete(&l.doc);
    }
    yaml_parser_delete(&parser);
    free(text);
    if (st != NP_OK) {
        sweep_free(s);
        return st;
    }
    *out = s;
    return NP_OK;
}

void sweep_free(sweep *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n_cmd; i++)
        free(s->cmd[i]);
    free(s->cmd);
    for (size_t p = 0; p < s->n_points; p++) {
        for (size_t c = 0; c < s->n_cols; c++)
            free(s->vals[p][c]);
        free(s->vals[p]);
        for (size_t k = 0; s->args && s->args[p] && s->args[p][k]; k++)
            free(s->args[p][k]);
        if (s->args)
            free(s->args[p]);
    }
    free(s->vals);
    free(s->args);
    for (size_t c = 0; c < s->n_cols; c++)
        free(s->cols[c]);
    free(s->cols);
    free(s->col_flag);
    for (size_t m = 0; m < s->n_metrics; m++) {
        free(s->metric_names[m]);
        free(s->metric_paths[m]);
    }
    free(s->metric_names);
    free(s->metric_paths);
    free(s->pareto_dir);
    free(s->arch);
    free(s->path);
    free(s);
}

size_t sweep_points(const sweep *s) { return s->n_points; }

const char *const *sweep_point_args(const sweep *s, size_t i)
{
    return (const char *const *)s->args[i];
}

char *sweep_jsonl_path(const char *csv_path)
{
    size_t len = strlen(csv_path);
    bool csv = len > 4 && !strcmp(csv_path + len - 4, ".csv");
    size_t base = csv ? len - 4 : len;
    char *p = malloc(base + 7);
    if (p) {
        memcpy(p, csv_path, base);
        memcpy(p + base, ".jsonl", 7);
    }
    return p;
}
