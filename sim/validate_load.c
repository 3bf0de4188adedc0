/* validate_load.c — the data files of `npusim validate` (validation/README.md): a provenance
 * block of "# key: value" lines, one CSV header naming the kind's columns, then the rows,
 * each field read through the one door (base/parse.h) with its file, line and column. */
#include "datadir.h"
#include "validate.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "arch.h"
#include "coll_sched.h"
#include "kernel.h"
#include "parse.h"
#include "plan.h"
#include "readfile.h"
#include "suggest.h"

#define VAL_FILE_MAX_BYTES (16u << 20)
#define VAL_MAX_FIELDS 32
#define VAL_DIR_ENV "NPUSIM_VALIDATION_DIR"

#ifndef NPUSIM_VALIDATION_DIR
#error "NPUSIM_VALIDATION_DIR (the source tree's validation/ folder) must be defined by the build"
#endif

const val_suite val_suites[] = {
#define VAL_SUITE(name, kind, what) {name, VAL_KIND_##kind, what},
#include "validate_suites.def"
#undef VAL_SUITE
};
const size_t val_n_suites = sizeof val_suites / sizeof val_suites[0];

const val_suite *val_suite_find(const char *name)
{
    for (size_t i = 0; i < val_n_suites; i++)
        if (strcmp(val_suites[i].name, name) == 0)
            return &val_suites[i];
    return NULL;
}

/* The columns of each kind, once: the loader checks a header against them and reads the
 * fields in this order. */
static const char *const train_cols[] = {
    "model", "params_b", "layers", "hidden", "heads", "seq", "vocab", "gpus", "tp", "pp", "dp",
    "global_batch", "micro_batch", "virtual_stages", "recompute", "precision", "dropout",
    "measured", "unit", "sp", "zero", "attention", "flops", "ddp", "p2p", "host_sync",
    "loss_scale", "clip_grad", "tp_comm_overlap", "overlap_param_gather"};
static const char *const kernel_cols[] = {"op", "shape", "dtype", "measured_us",
                                          "host_overhead_us"};
static const char *const nccl_cols[] = {"nodes", "gpus_per_node", "op", "dtype", "bytes",
                                        "time_us", "busbw_gb_s"};

static const struct {
    const char *const *cols;
    size_t n;
    const char *header;
} val_kinds[VAL_KIND_COUNT] = {
    [VAL_KIND_TRAIN] = {train_cols, sizeof train_cols / sizeof *train_cols,
                        "model,params_b,layers,hidden,heads,seq,vocab,gpus,tp,pp,dp,"
                        "global_batch,micro_batch,virtual_stages,recompute,precision,dropout,"
                        "measured,unit,sp,zero,attention,flops,ddp,p2p,host_sync,loss_scale,"
                        "clip_grad,tp_comm_overlap,overlap_param_gather"},
    [VAL_KIND_KERNEL] = {kernel_cols, sizeof kernel_cols / sizeof *kernel_cols,
                         "op,shape,dtype,measured_us,host_overhead_us"},
    [VAL_KIND_NCCL] = {nccl_cols, sizeof nccl_cols / sizeof *nccl_cols,
                       "nodes,gpus_per_node,op,dtype,bytes,time_us,busbw_gb_s"},
};

const char *val_columns(val_kind k) { return val_kinds[k].header; }

const char *val_default_dir(void)
{
    return np_data_dir(VAL_DIR_ENV, "validation", NPUSIM_VALIDATION_DIR);
}

/* ---- provenance ----------------------------------------------------------------------------- */

enum {
    PK_TITLE, PK_SOURCE, PK_WHERE, PK_MACHINE, PK_CONFIG, PK_COMMAND, PK_ARCH, PK_COMMIT,
    PK_ALGO, PK_NOTES, PK_ASSUMED, PK_COUNT
};
static const char *const prov_keys[PK_COUNT] = {"title", "source", "where", "machine", "config",
                                                "command", "arch", "commit", "algo", "notes",
                                                "assumed"};
static const bool prov_required[PK_COUNT] = {[PK_TITLE] = true, [PK_SOURCE] = true,
                                             [PK_WHERE] = true, [PK_MACHINE] = true,
                                             [PK_CONFIG] = true, [PK_ARCH] = true};

static char **prov_slot(val_file *f, int k)
{
    switch (k) {
    case PK_TITLE: return &f->title;
    case PK_SOURCE: return &f->source;
    case PK_WHERE: return &f->where;
    case PK_MACHINE: return &f->machine;
    case PK_CONFIG: return &f->config;
    case PK_COMMAND: return &f->command;
    case PK_ARCH: return &f->arch;
    case PK_COMMIT: return &f->commit;
    case PK_ALGO: return &f->algo;
    default: return &f->notes;
    }
}

/* Appends value to *slot (a new line when it already holds one). */
static np_status prov_append(char **slot, const char *value, np_err *err)
{
    size_t old = *slot ? strlen(*slot) + 1 : 0, len = strlen(value);
    char *s = realloc(*slot, old + len + 1);
    if (!s)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory");
    if (old)
        s[old - 1] = '\n';
    memcpy(s + old, value, len + 1);
    *slot = s;
    return NP_OK;
}

/* A provenance line (text after "#"): "key: value" is kept in f (an unknown key is an error);
 * anything else is a comment: no lower-case word followed by ':' right after "# ", or a URL
 * ("https://..."). */
static np_status prov_line(val_file *f, const char *path, int line, char *text, np_err *err)
{
    char *p = text;
    if (*p == ' ')
        p++;
    size_t n = strspn(p, "abcdefghijklmnopqrstuvwxyz_");
    if (n == 0 || p[n] != ':' || strncmp(p + n + 1, "//", 2) == 0)
        return NP_OK; /* a comment (a URL alone on its line too) */
    int col = (int)(p - text) + 2;
    p[n] = '\0';
    char *value = p + n + 1;
    value += strspn(value, " \t");
    for (size_t e = strlen(value); e > 0 && (value[e - 1] == ' ' || value[e - 1] == '\t');)
        value[--e] = '\0';
    int k = -1;
    for (int i = 0; i < PK_COUNT; i++)
        if (strcmp(p, prov_keys[i]) == 0)
            k = i;
    if (k < 0) {
        const char *guess = np_suggest(p, prov_keys, PK_COUNT, 2);
        return guess ? np_err_at(err, NP_ERR_UNKNOWN_KEY, path, line, col,
                                 "unknown provenance key '%s'; did you mean '%s'?", p, guess)
                     : np_err_at(err, NP_ERR_UNKNOWN_KEY, path, line, col,
                                 "unknown provenance key '%s' (keys: title, source, where, "
                                 "machine, config, command, arch, commit, algo, notes, "
                                 "assumed)", p);
    }
    if (!value[0])
        return np_err_at(err, NP_ERR_MISSING, path, line, col, "%s: no value after '%s:'",
                         prov_keys[k], prov_keys[k]);
    if (k == PK_ASSUMED) {
        if (f->n_assumed == VAL_MAX_ASSUMED)
            return np_err_at(err, NP_ERR_RANGE, path, line, col, "more than %d 'assumed' lines",
                             VAL_MAX_ASSUMED);
        f->assumed[f->n_assumed] = strdup(value);
        if (!f->assumed[f->n_assumed])
            return np_err_set(err, NP_ERR_NOMEM, "out of memory");
        f->n_assumed++;
        return NP_OK;
    }
    if (k == PK_ARCH && f->arch)
        return np_err_at(err, NP_ERR_DUPLICATE, path, line, col, "arch: given twice (a file's "
                         "rows run on one preset)");
    if (k == PK_ALGO) { /* nccl: the algorithm the authors forced (NCCL_ALGO) */
        coll_algo a;
        np_err ae = {0};
        if (f->algo)
            return np_err_at(err, NP_ERR_DUPLICATE, path, line, col, "algo: given twice");
        if (coll_algo_parse(value, &a, &ae) != NP_OK)
            return np_err_at(err, ae.status, path, line, col + (int)(value - p), "algo: %s",
                             ae.msg);
    }
    if (k == PK_ARCH) {
        arch_config cfg;
        np_err ae = {0};
        if (arch_resolve(value, NULL, 0, &cfg, &ae) != NP_OK)
            return np_err_at(err, ae.status, path, line, col + (int)(value - p), "arch: %s",
                             ae.msg);
    }
    return prov_append(prov_slot(f, k), value, err);
}

/* ---- fields --------------------------------------------------------------------------------- */

typedef struct val_fields {
    const char *path;
    int line;
    int n;
    char *v[VAL_MAX_FIELDS];
    int col[VAL_MAX_FIELDS]; /* 1-based column of each field's first character */
} val_fields;

/* Splits a line (modified in place) at commas, each field trimmed of spaces. */
static np_status split_fields(char *text, val_fields *fs, np_err *err)
{
    fs->n = 0;
    char *p = text;
    for (;;) {
        char *end = strchr(p, ',');
        if (end)
            *end = '\0';
        char *b = p + strspn(p, " \t");
        for (size_t e = strlen(b); e > 0 && (b[e - 1] == ' ' || b[e - 1] == '\t');)
            b[--e] = '\0';
        if (fs->n == VAL_MAX_FIELDS)
            return np_err_at(err, NP_ERR_SYNTAX, fs->path, fs->line, 1, "more than %d fields",
                             VAL_MAX_FIELDS);
        if (b[0] == '"')
            return np_err_at(err, NP_ERR_SYNTAX, fs->path, fs->line, (int)(b - text) + 1,
                             "quoted fields are not read: a field holds no comma");
        fs->col[fs->n] = (int)(b - text) + 1;
        fs->v[fs->n++] = b;
        if (!end)
            return NP_OK;
        p = end + 1;
    }
}

#define AT(fs, i, name) NP_SRC_AT((fs)->path, (fs)->line, (fs)->col[i], (name))

static np_status f_int(const val_fields *fs, const char *const *cols, int i, int64_t lo,
                       int64_t hi, int64_t *out, np_err *err)
{
    return np_parse_i64(AT(fs, i, cols[i]), fs->v[i], lo, hi, out, err);
}

static np_status f_real(const val_fields *fs, const char *const *cols, int i, double lo,
                        double hi, double *out, np_err *err)
{
    return np_parse_f64(AT(fs, i, cols[i]), fs->v[i], lo, hi, out, err);
}

static np_status f_enum(const val_fields *fs, const char *const *cols, int i, const char *what,
                        const char *const *names, size_t n, size_t *out, np_err *err)
{
    return np_parse_enum(AT(fs, i, cols[i]), fs->v[i], what, names, n, out, err);
}

static np_status f_text(const val_fields *fs, const char *const *cols, int i, char *out,
                        size_t n, np_err *err)
{
    size_t len = strlen(fs->v[i]);
    if (!len)
        return np_err_at(err, NP_ERR_MISSING, fs->path, fs->line, fs->col[i], "%s: empty",
                         cols[i]);
    if (len >= n)
        return np_err_at(err, NP_ERR_RANGE, fs->path, fs->line, fs->col[i],
                         "%s: longer than %zu characters", cols[i], n - 1);
    if (np_parse_name(AT(fs, i, cols[i]), fs->v[i], n - 1, err) != NP_OK)
        return err->status;
    memcpy(out, fs->v[i], len + 1);
    return NP_OK;
}

static np_status row_inconsistent(const val_fields *fs, const char *fmt, const char *a,
                                  np_err *err)
{
    return np_err_at(err, NP_ERR_INCONSISTENT, fs->path, fs->line, 1, fmt, a);
}

/* ---- the kinds' rows ------------------------------------------------------------------------ */

static np_status read_train(const val_fields *fs, val_train *t, np_err *err)
{
    const char *const *c = train_cols;
    static const char *const recomputes[] = {"none", "selective", "full", "uniform"};
    static const nn_recompute recompute_of[] = {NN_RECOMPUTE_NONE, NN_RECOMPUTE_SELECTIVE,
                                                NN_RECOMPUTE_FULL, NN_RECOMPUTE_UNIFORM};
    static const char *const precisions[] = {"bf16", "fp16", "fp32"};
    static const char *const units[] = {"tflops_per_gpu"};
    static const char *const attentions[] = {"fused", "composite", "unfused"};
    static const char *const ddps[] = {"torch", "local"};
    static const char *const p2ps[] = {"eager", "blocking"};
    static const char *const flops[] = {"megatron_eq3", "mcore_r0.8"};
    const int64_t BIG = (int64_t)1 << 24;
    size_t e;
    int64_t v;
    np_status st = f_text(fs, c, 0, t->model, sizeof t->model, err);
    if (st == NP_OK)
        st = f_real(fs, c, 1, 0, 1e6, &t->params_b, err);
    int64_t *ints[] = {&t->layers, &t->hidden, &t->heads, &t->seq, &t->vocab, &t->gpus,
                       &t->tp, &t->pp, &t->dp, &t->global_batch, &t->micro_batch,
                       &t->virtual_stages};
    for (int i = 0; i < 12 && st == NP_OK; i++)
        st = f_int(fs, c, 2 + i, 1, BIG, ints[i], err);
    if (st == NP_OK && (st = f_enum(fs, c, 14, "recompute", recomputes, 4, &e, err)) == NP_OK)
        t->recompute = (int)recompute_of[e];
    if (st == NP_OK && (st = f_enum(fs, c, 15, "precision", precisions, 3, &e, err)) == NP_OK) {
        t->precision = e == 2;
        snprintf(t->precision_text, sizeof t->precision_text, "%s", precisions[e]);
    }
    if (st == NP_OK)
        st = f_real(fs, c, 16, 0, 0.99, &t->dropout, err);
    if (st == NP_OK)
        st = f_real(fs, c, 17, 1e-9, 1e9, &t->measured, err);
    if (st == NP_OK)
        st = f_enum(fs, c, 18, "unit", units, 1, &e, err);
    if (st == NP_OK && (st = f_int(fs, c, 19, 0, 1, &v, err)) == NP_OK)
        t->sp = v == 1;
    if (st == NP_OK && (st = f_int(fs, c, 20, 0, 3, &v, err)) == NP_OK)
        t->zero = (int)v;
    if (st == NP_OK && (st = f_enum(fs, c, 21, "attention", attentions, 3, &e, err)) == NP_OK) {
        t->fused_attention = e == 0;
        t->fused_softmax = e == 1;
    }
    if (st == NP_OK && (st = f_enum(fs, c, 22, "FLOP formula", flops, 2, &e, err)) == NP_OK)
        t->flops = (val_flops)e;
    if (st == NP_OK && (st = f_enum(fs, c, 23, "ddp", ddps, 2, &e, err)) == NP_OK)
        t->ddp = e == 0 ? NN_DDP_TORCH : NN_DDP_LOCAL;
    if (st == NP_OK && (st = f_enum(fs, c, 24, "p2p", p2ps, 2, &e, err)) == NP_OK)
        t->p2p_blocking = e == 1;
    if (st == NP_OK && (st = f_int(fs, c, 25, 0, 1, &v, err)) == NP_OK)
        t->host_sync = v == 1;
    if (st == NP_OK)
        st = f_real(fs, c, 26, 0, 1e9, &t->loss_scale, err);
    if (st == NP_OK)
        st = f_real(fs, c, 27, 0, 1e9, &t->clip_grad, err);
    if (st == NP_OK && (st = f_int(fs, c, 28, 0, 1, &v, err)) == NP_OK)
        t->tp_comm_overlap = v == 1;
    if (st == NP_OK && (st = f_int(fs, c, 29, 0, 1, &v, err)) == NP_OK)
        t->overlap_param_gather = v == 1;
    if (st != NP_OK)
        return st;
    char msg[160];
    if (t->tp * t->pp * t->dp != t->gpus) {
        snprintf(msg, sizeof msg, "%lld", (long long)(t->tp * t->pp * t->dp));
        return row_inconsistent(fs, "gpus is not tp x pp x dp (%s)", msg, err);
    }
    if (t->global_batch % (t->dp * t->micro_batch)) {
        snprintf(msg, sizeof msg, "%lld", (long long)(t->dp * t->micro_batch));
        return row_inconsistent(fs, "global_batch is not a multiple of dp x micro_batch (%s)",
                                msg, err);
    }
    if (t->virtual_stages > 1 && (t->pp < 2 || t->layers % (t->pp * t->virtual_stages))) {
        snprintf(msg, sizeof msg, "%lld", (long long)(t->pp * t->virtual_stages));
        return row_inconsistent(fs, "virtual_stages > 1 needs pp > 1 and layers a multiple of "
                                "pp x virtual_stages (%s)", msg, err);
    }
    if (t->hidden % t->heads)
        return row_inconsistent(fs, "hidden is not a multiple of heads%s", "", err);
    if (t->sp && t->tp < 2)
        return row_inconsistent(fs, "sp (sequence parallelism) needs tp > 1%s", "", err);
    if (t->tp_comm_overlap && !t->sp)
        return row_inconsistent(fs, "tp_comm_overlap needs sp (sequence parallelism)%s", "", err);
    if (t->overlap_param_gather && t->zero != 1 && t->zero != 2)
        return row_inconsistent(fs, "overlap_param_gather needs zero 1 or 2 (the distributed "
                                "optimizer)%s", "", err);
    return NP_OK;
}

static np_status read_kernel(const val_fields *fs, val_kernel *k, np_err *err)
{
    const char *const *c = kernel_cols;
    np_status st = f_text(fs, c, 0, k->op, sizeof k->op, err);
    if (st == NP_OK)
        st = f_text(fs, c, 1, k->shape, sizeof k->shape, err);
    if (st == NP_OK)
        st = f_text(fs, c, 2, k->dtype, sizeof k->dtype, err);
    if (st == NP_OK)
        st = f_real(fs, c, 3, 1e-6, 1e12, &k->measured_us, err);
    if (st == NP_OK)
        st = f_real(fs, c, 4, 0, 1e12, &k->host_overhead_us, err);
    if (st != NP_OK)
        return st;
    char spec[512];
    snprintf(spec, sizeof spec, "%s %s dtype=%s", k->op, k->shape, k->dtype);
    kc_spec s;
    np_err se = {0};
    if (kc_spec_parse(spec, &s, &se) != NP_OK)
        return np_err_at(err, se.status, fs->path, fs->line, fs->col[0],
                         "not a kernel of `npusim kernel --op \"%s\"`: %s", spec, se.msg);
    return NP_OK;
}

static np_status read_nccl(const val_fields *fs, val_nccl *n, np_err *err)
{
    const char *const *c = nccl_cols;
    /* nccl-tests' type names (-d), and their sizes */
    static const char *const types[] = {"int8", "uint8", "half", "bfloat16", "float", "int32",
                                        "uint32", "double", "int64", "uint64"};
    static const uint32_t sizes[] = {1, 1, 2, 2, 4, 4, 4, 8, 8, 8};
    size_t e;
    np_status st = f_int(fs, c, 0, 1, 1 << 16, &n->nodes, err);
    if (st == NP_OK)
        st = f_int(fs, c, 1, 1, 1 << 10, &n->gpus_per_node, err);
    if (st == NP_OK) {
        coll_op op;
        np_err oe = {0};
        if (coll_op_parse(fs->v[2], &op, &oe) != NP_OK || (op != COLL_OP_ALL_REDUCE &&
                                                           op != COLL_OP_ALL_GATHER &&
                                                           op != COLL_OP_REDUCE_SCATTER))
            return np_err_at(err, NP_ERR_UNKNOWN_KEY, fs->path, fs->line, fs->col[2],
                             "op: expected all_reduce, all_gather or reduce_scatter, got '%s'",
                             fs->v[2]);
        n->op = (int)op;
        snprintf(n->op_text, sizeof n->op_text, "%s", coll_op_name(op));
    }
    if (st == NP_OK && (st = f_enum(fs, c, 3, "nccl-tests type", types, 10, &e, err)) == NP_OK) {
        n->elem_bytes = sizes[e];
        snprintf(n->dtype, sizeof n->dtype, "%s", types[e]);
    }
    int64_t b = 0;
    if (st == NP_OK && (st = f_int(fs, c, 4, 1, (int64_t)1 << 50, &b, err)) == NP_OK)
        n->bytes = (uint64_t)b;
    if (st == NP_OK)
        st = f_real(fs, c, 5, 1e-6, 1e12, &n->time_us, err);
    if (st == NP_OK)
        st = f_real(fs, c, 6, 0, 1e9, &n->busbw_gb_s, err);
    if (st == NP_OK && n->nodes * n->gpus_per_node < 2)
        return row_inconsistent(fs, "a collective needs at least 2 GPUs (nodes x "
                                "gpus_per_node)%s", "", err);
    return st;
}

/* ---- a file --------------------------------------------------------------------------------- */

void val_file_free(val_file *f)
{
    free(f->path);
    for (int k = 0; k < PK_COUNT; k++)
        if (k != PK_ASSUMED)
            free(*prov_slot(f, k));
    for (int i = 0; i < f->n_assumed; i++)
        free(f->assumed[i]);
    free(f->rows);
    memset(f, 0, sizeof *f);
}

static np_status check_header(const val_fields *fs, val_kind kind, const char *suite,
                              np_err *err)
{
    const char *const *cols = val_kinds[kind].cols;
    int n = (int)val_kinds[kind].n;
    for (int i = 0; i < n && i < fs->n; i++)
        if (strcmp(fs->v[i], cols[i]) != 0)
            return np_err_at(err, NP_ERR_SYNTAX, fs->path, fs->line, fs->col[i],
                             "column %d is '%s', expected '%s' (the header of a %s file: %s)",
                             i + 1, fs->v[i], cols[i], suite, val_kinds[kind].header);
    if (fs->n != n)
        return np_err_at(err, NP_ERR_SYNTAX, fs->path, fs->line, 1,
                         "%d columns, expected %d (the header of a %s file: %s)", fs->n, n,
                         suite, val_kinds[kind].header);
    return NP_OK;
}

static np_status val_parse(char *text, const char *path, const val_suite *s, val_file *f,
                           np_err *err)
{
    bool header = false;
    size_t cap = 0;
    int line = 0;
    for (char *p = text, *next; p && *p; p = next) {
        line++;
        next = strchr(p, '\n');
        if (next)
            *next++ = '\0';
        size_t len = strlen(p);
        if (len && p[len - 1] == '\r')
            p[--len] = '\0';
        if (np_utf8_invalid_at(p, len) < len)
            return np_err_at(err, NP_ERR_SYNTAX, path, line, (int)np_utf8_invalid_at(p, len) + 1,
                             "not UTF-8 text");
        if (strspn(p, " \t") == len)
            continue;
        if (p[0] == '#') {
            np_status st = header ? NP_OK : prov_line(f, path, line, p + 1, err);
            if (st != NP_OK)
                return st;
            continue;
        }
        val_fields fs = {.path = path, .line = line};
        np_status st = split_fields(p, &fs, err);
        if (st != NP_OK)
            return st;
        if (!header) {
            for (int k = 0; k < PK_COUNT; k++)
                if (prov_required[k] && !*prov_slot(f, k))
                    return np_err_at(err, NP_ERR_MISSING, path, line, 1,
                                     "the provenance block has no '%s:' line (required: title, "
                                     "source, where, machine, config, arch)", prov_keys[k]);
            if ((st = check_header(&fs, s->kind, s->name, err)) != NP_OK)
                return st;
            header = true;
            continue;
        }
        if (fs.n != (int)val_kinds[s->kind].n)
            return np_err_at(err, NP_ERR_SYNTAX, path, line, 1, "%d fields, expected %d (%s)",
                             fs.n, (int)val_kinds[s->kind].n, val_kinds[s->kind].header);
        if (f->n_rows == cap) {
            cap = cap ? 2 * cap : 16;
            val_row *bigger = realloc(f->rows, cap * sizeof *bigger);
            if (!bigger)
                return np_err_set(err, NP_ERR_NOMEM, "out of memory");
            f->rows = bigger;
        }
        val_row *r = &f->rows[f->n_rows];
        memset(r, 0, sizeof *r);
        r->line = line;
        r->index = (int)f->n_rows + 1;
        st = s->kind == VAL_KIND_TRAIN    ? read_train(&fs, &r->t, err)
             : s->kind == VAL_KIND_KERNEL ? read_kernel(&fs, &r->k, err)
                                          : read_nccl(&fs, &r->n, err);
        if (st != NP_OK)
            return st;
        f->n_rows++;
    }
    if (!header)
        return np_err_at(err, NP_ERR_MISSING, path, line, 0, "no header line (%s)",
                         val_kinds[s->kind].header);
    if (!f->n_rows)
        return np_err_at(err, NP_ERR_MISSING, path, line, 0, "no rows after the header");
    return NP_OK;
}

np_status val_load_file(const char *path, const val_suite *s, val_file *f, np_err *err)
{
    memset(f, 0, sizeof *f);
    char *text = NULL;
    size_t len;
    if (np_read_file(path, VAL_FILE_MAX_BYTES, "a validation data file", &text, &len, err) !=
        NP_OK)
        return err->status;
    f->suite = s;
    f->path = strdup(path);
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t n = strlen(base);
    if (n > 4 && strcmp(base + n - 4, ".csv") == 0)
        n -= 4;
    snprintf(f->id, sizeof f->id, "%.*s", (int)(n < sizeof f->id ? n : sizeof f->id - 1), base);
    np_status st = f->path ? val_parse(text, path, s, f, err)
                           : np_err_set(err, NP_ERR_NOMEM, "out of memory");
    free(text);
    if (st != NP_OK)
        val_file_free(f);
    return st;
}

/* ---- a folder ------------------------------------------------------------------------------- */

void val_set_free(val_set *s)
{
    for (size_t i = 0; i < s->n_files; i++)
        val_file_free(&s->files[i]);
    free(s->files);
    s->files = NULL;
    s->n_files = 0;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The entries of dir (not . or ..) in byte order, into a new array of new strings. */
static np_status list_dir(const char *dir, char ***out, size_t *n, np_err *err)
{
    *out = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d)
        return np_err_at(err, NP_ERR_IO, dir, 0, 0, "cannot read the folder: %s",
                         strerror(errno));
    size_t cap = 0;
    struct dirent *e;
    np_status st = NP_OK;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            char **bigger = realloc(*out, cap * sizeof *bigger);
            if (!bigger) {
                st = np_err_set(err, NP_ERR_NOMEM, "out of memory");
                break;
            }
            *out = bigger;
        }
        if (!((*out)[*n] = strdup(e->d_name))) {
            st = np_err_set(err, NP_ERR_NOMEM, "out of memory");
            break;
        }
        (*n)++;
    }
    closedir(d);
    if (*n)
        qsort(*out, *n, sizeof **out, cmp_names);
    return st;
}

static void free_names(char **names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

np_status val_load_dir(const char *dir, val_set *out, np_err *err)
{
    memset(out, 0, sizeof *out);
    char **subs;
    size_t n_subs;
    if (list_dir(dir, &subs, &n_subs, err) != NP_OK) {
        free_names(subs, n_subs);
        return err->status;
    }
    np_status st = NP_OK;
    const char *names[64];
    for (size_t i = 0; i < val_n_suites && i < 64; i++)
        names[i] = val_suites[i].name;
    char path[8448];
    for (size_t i = 0; i < n_subs && st == NP_OK; i++) { /* every folder names a suite */
        struct stat sb;
        snprintf(path, sizeof path, "%s/%s", dir, subs[i]);
        if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode) || val_suite_find(subs[i]))
            continue;
        const char *guess = np_suggest(subs[i], names, val_n_suites, 2);
        st = guess ? np_err_at(err, NP_ERR_UNKNOWN_KEY, path, 0, 0,
                               "a folder that names no suite; did you mean '%s'?", guess)
                   : np_err_at(err, NP_ERR_UNKNOWN_KEY, path, 0, 0,
                               "a folder that names no suite (`npusim validate --list`)");
    }
    free_names(subs, n_subs);
    size_t cap = 0;
    for (size_t s = 0; s < val_n_suites && st == NP_OK; s++) {
        char sdir[4096];
        struct stat sb;
        snprintf(sdir, sizeof sdir, "%s/%s", dir, val_suites[s].name);
        if (stat(sdir, &sb) != 0 || !S_ISDIR(sb.st_mode))
            continue; /* a suite without files */
        char **files;
        size_t n_files;
        st = list_dir(sdir, &files, &n_files, err);
        for (size_t i = 0; i < n_files && st == NP_OK; i++) {
            size_t len = strlen(files[i]);
            snprintf(path, sizeof path, "%s/%s", sdir, files[i]);
            if (len <= 4 || strcmp(files[i] + len - 4, ".csv") != 0) {
                st = np_err_at(err, NP_ERR_UNKNOWN_KEY, path, 0, 0,
                               "not a data file (<source>.csv; validation/README.md)");
                break;
            }
            if (out->n_files == cap) {
                cap = cap ? 2 * cap : 16;
                val_file *bigger = realloc(out->files, cap * sizeof *bigger);
                if (!bigger) {
                    st = np_err_set(err, NP_ERR_NOMEM, "out of memory");
                    break;
                }
                out->files = bigger;
            }
            st = val_load_file(path, &val_suites[s], &out->files[out->n_files], err);
            if (st == NP_OK)
                out->n_files++;
        }
        free_names(files, n_files);
    }
    if (st != NP_OK)
        val_set_free(out);
    return st;
}

/* ---- rows for people ------------------------------------------------------------------------ */

const char *val_row_id(const val_file *f, const val_row *r, char *buf, size_t n)
{
    snprintf(buf, n, "%s#%d", f->id, r->index);
    return buf;
}

const char *val_row_figure(const val_file *f, const val_row *r)
{
    switch (f->suite->kind) {
    case VAL_KIND_TRAIN: return "TFLOP/s per GPU";
    case VAL_KIND_KERNEL: return "µs";
    default: return r->n.bytes >= (1u << 20) ? "GB/s busbw" : "µs";
    }
}

double val_row_published(const val_file *f, const val_row *r)
{
    switch (f->suite->kind) {
    case VAL_KIND_TRAIN: return r->t.measured;
    case VAL_KIND_KERNEL: return r->k.measured_us;
    default: return r->n.bytes >= (1u << 20) ? r->n.busbw_gb_s : r->n.time_us;
    }
}

/* bytes as nccl-tests' sizes read: 8 B, 64 KiB, 128 MiB */
static const char *size_text(uint64_t b, char *buf, size_t n)
{
    static const char *const u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int i = 0;
    while (i < 4 && b >= 1024 && b % 1024 == 0)
        b /= 1024, i++;
    snprintf(buf, n, "%llu %s", (unsigned long long)b, u[i]);
    return buf;
}

const char *val_row_config(const val_file *f, const val_row *r, char *buf, size_t n)
{
    switch (f->suite->kind) {
    case VAL_KIND_TRAIN: {
        const val_train *t = &r->t;
        char vs[24] = "";
        if (t->virtual_stages > 1)
            snprintf(vs, sizeof vs, " v%lld", (long long)t->virtual_stages);
        snprintf(buf, n, "%s, %lld GPUs tp%lld pp%lld%s dp%lld, mb %lld of %lld", t->model,
                 (long long)t->gpus, (long long)t->tp, (long long)t->pp, vs, (long long)t->dp,
                 (long long)t->micro_batch, (long long)t->global_batch);
        break;
    }
    case VAL_KIND_KERNEL:
        snprintf(buf, n, "%s %s %s", r->k.op, r->k.shape, r->k.dtype);
        break;
    default: {
        char sz[32];
        snprintf(buf, n, "%s %s, %lld x %lld GPUs, %s", r->n.op_text,
                 size_text(r->n.bytes, sz, sizeof sz), (long long)r->n.nodes,
                 (long long)r->n.gpus_per_node, r->n.dtype);
        break;
    }
    }
    return buf;
}

/* ---- the quick subset ----------------------------------------------------------------------- */

/* kernels-a100 rows of the quick subset (ids), chosen to take seconds together: GEMMs from
 * latency-bound to near peak, and the three memory-bound ops from small to large. */
const char *const val_quick_kernels[] = {
    "llmcompass-matmul-a100#2",     /* 128 x 12288 x 12288: a thin GEMM */
    "llmcompass-matmul-a100#3",     /* 256 x 12288 x 12288 */
    "llmcompass-matmul-a100#5",     /* 1024 x 12288 x 12288 */
    "llmcompass-matmul-a100#12",    /* 8192 x 128 x 128: latency-bound */
    "llmcompass-matmul-a100#14",    /* 8192 x 512 x 512 */
    "llmcompass-matmul-a100#16",    /* 8192 x 2048 x 2048 */
    "llmcompass-matmul-a100#17",    /* 8192 x 4096 x 4096: near peak on the A100 */
    "llmcompass-softmax-a100#4",    /* 4096 x 256 */
    "llmcompass-softmax-a100#8",    /* 4096 x 4096 */
    "llmcompass-softmax-a100#20",   /* 8192 x 4096 */
    "llmcompass-layernorm-a100#4",  /* 4096 x 256 */
    "llmcompass-layernorm-a100#8",  /* 4096 x 4096 */
    "llmcompass-layernorm-a100#20", /* 8192 x 4096 */
    "llmcompass-gelu-a100#10",      /* 2^19 elements: the host overhead dominates */
    "llmcompass-gelu-a100#15",      /* 2^24 */
    "llmcompass-gelu-a100#18",      /* 2^27: bandwidth-bound */
    NULL};

bool val_row_is_quick(const val_file *f, const val_row *r)
{
    if (f->suite->kind == VAL_KIND_NCCL)
        return r->n.nodes == 1 && r->n.gpus_per_node == 8;
    if (f->suite->kind != VAL_KIND_KERNEL)
        return false;
    char id[96];
    val_row_id(f, r, id, sizeof id);
    for (int i = 0; val_quick_kernels[i]; i++)
        if (strcmp(val_quick_kernels[i], id) == 0)
            return true;
    return false;
}
