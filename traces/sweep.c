/* sweep.c — running a sweep (see sweep.h; the file is read by sweep_file.c): the process
 * pool, the append-only results and their resumption, the Pareto front, and the MPI split.
 *
 * A point runs as `npusim ARGS... --json` in a child process whose stdout and stderr come
 * back through pipes (poll); its row is built from the JSON. Rows go to the files in the
 * order points finish, each with one write(2) on an O_APPEND descriptor: the CSV row first,
 * then the JSON line. On resume a point counts as finished when both files hold it; anything
 * else (a torn last line, a CSV row whose JSON line was never written, a run cut short by an
 * interrupt) is dropped and the point runs again — points are deterministic, so the row
 * comes out the same. A row is taken only when it is this sweep's point of that number: the
 * CSV row's values and the JSON line's arguments ("args") are the point's; anything else
 * means another sweep's results or an edited grid, and is refused rather than mixed in.
 *
 * The files are regular files: a device, directory or symlink named by -o is refused before
 * anything is read or written (the final rewrite renames a new file over the old one, which
 * would replace a symlink or /dev/null by a regular file). */
#include "sweep.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "csv.h"
#include "fdio.h"
#include "readfile.h"
#include "sweep_impl.h"

#define SWEEP_RESULTS_MAX_BYTES (1ull << 30) /* a results file read to resume */
#define SWEEP_ERROR_MAX_BYTES 200             /* a failed run's stderr kept in its row */

#ifdef NPUSIM_HAVE_MPI
#include <mpi.h>
#endif


/* ---- rows ------------------------------------------------------------------------------------- */

typedef struct strbuf {
    char *s;
    size_t n, cap;
} strbuf;

static bool sb_put(strbuf *b, const char *s, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *p = realloc(b->s, cap);
        if (!p)
            return false;
        b->s = p, b->cap = cap;
    }
    if (n)
        memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = '\0';
    return true;
}

static bool sb_puts(strbuf *b, const char *s) { return sb_put(b, s, strlen(s)); }

/* A CSV field (csv.h). */
static bool sb_csv(strbuf *b, const char *s)
{
    char *q = csv_quote(s);
    bool ok = q && sb_puts(b, q);
    free(q);
    return ok;
}

static char *csv_header(const sweep *s)
{
    strbuf b = {0};
    bool ok = sb_puts(&b, "point,status");
    for (size_t c = 0; c < s->n_cols; c++)
        ok &= sb_put(&b, ",", 1) && sb_csv(&b, s->cols[c]);
    for (size_t m = 0; m < s->n_metrics; m++)
        ok &= sb_put(&b, ",", 1) && sb_csv(&b, s->metric_names[m]);
    ok &= sb_puts(&b, ",error\n");
    if (!ok) {
        free(b.s);
        return NULL;
    }
    return b.s;
}

/* The value at path ("a/0/b", "rows/-1/x") in j, or NULL. */
static json_t *json_path(json_t *j, const char *path)
{
    char *buf = strdup(path);
    if (!buf)
        return NULL;
    char *save = NULL;
    for (char *part = strtok_r(buf, "/", &save); part && j; part = strtok_r(NULL, "/", &save)) {
        if (json_is_array(j)) {
            char *end;
            long i = strtol(part, &end, 10);
            if (*end)
                return NULL;
            if (i < 0)
                i += (long)json_array_size(j);
            j = i >= 0 ? json_array_get(j, (size_t)i) : NULL;
        } else {
            j = json_object_get(j, part);
        }
    }
    free(buf);
    return j;
}

/* A printf into a new string (NULL when out of memory). */
static char *str_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *str_printf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *p = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (p) {
        va_start(ap, fmt);
        vsnprintf(p, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    return p;
}

/* The first line of a failed run's stderr as it goes into a row: bytes that are not
 * well-formed UTF-8 and control characters become '?', and it is cut to at most max bytes
 * at a character's boundary (never inside one), "..." marking the cut. Into a new string. */
static char *error_line(const char *text, size_t max)
{
    size_t n = strcspn(text, "\n");
    strbuf b = {0};
    bool ok = sb_put(&b, "", 0), cut = false;
    for (size_t i = 0; ok && i < n;) {
        size_t good = np_utf8_invalid_at(text + i, n - i), k = good ? 1 : 0;
        if (good) { /* one whole character */
            unsigned char c = (unsigned char)text[i];
            k = c < 0x80 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
        }
        if (b.n + (k ? k : 1) > max) {
            cut = true;
            break;
        }
        if (!k || (unsigned char)text[i] < 0x20 || text[i] == 0x7f)
            ok = sb_put(&b, "?", 1), i += k ? k : 1;
        else
            ok = sb_put(&b, text + i, k), i += k;
    }
    if (ok && cut)
        ok = sb_puts(&b, "...");
    if (!ok) {
        free(b.s);
        return NULL;
    }
    return b.s;
}

typedef struct row {
    bool done, ok;
    char *csv, *jsonl;
    double *metrics;
} row;

static void number_text(const json_t *v, char *buf, size_t n)
{
    if (json_is_integer(v))
        snprintf(buf, n, "%lld", (long long)json_integer_value(v));
    else
        snprintf(buf, n, "%.12g", json_number_value(v));
}

/* Builds point p's row from its run: exit status, stdout, stderr. */
static bool make_row(const sweep *s, size_t p, int status, const char *out, const char *errtext,
                     row *r)
{
    char *msg = NULL;
    json_t *j = NULL, *metrics = json_object();
    json_t **vals = calloc(s->n_metrics + 1, sizeof *vals);
    bool ok = status == 0, good = metrics && vals;
    if (!ok) {
        char *line = error_line(errtext, SWEEP_ERROR_MAX_BYTES);
        msg = line ? str_printf("exit %d: %s", status, line) : NULL;
        free(line);
    } else {
        json_error_t je;
        if (!(j = json_loads(out, 0, &je))) {
            ok = false;
            msg = str_printf("the output is not JSON (line %d: %s)", je.line, je.text);
        }
    }
    for (size_t m = 0; good && ok && m < s->n_metrics; m++) {
        json_t *v = json_path(j, s->metric_paths[m]);
        if (!json_is_number(v)) {
            ok = false;
            msg = str_printf("metric %s: no number at '%s' in the output", s->metric_names[m],
                             s->metric_paths[m]);
        }
        vals[m] = v;
    }
    good &= ok || msg; /* a failed row always says why */
    strbuf c = {0};
    char num[64];
    snprintf(num, sizeof num, "%zu", p);
    good &= sb_puts(&c, num) && sb_puts(&c, ok ? ",ok" : ",error");
    json_t *params = json_object(), *args = json_array();
    good &= params && args;
    for (size_t k = 0; good && k < s->n_cols; k++) {
        const char *v = s->vals[p][k];
        json_t *pv = NULL;
        good &= sb_put(&c, ",", 1) && (!v || sb_csv(&c, v));
        if (v)
            good &= sweep_value(NULL, v, &pv, NULL) == NP_OK &&
                    !json_object_set_new(params, s->cols[k], pv);
    }
    for (const char *const *a = sweep_point_args(s, p); good && *a; a++)
        good &= !json_array_append_new(args, json_string(*a));
    for (size_t m = 0; good && m < s->n_metrics; m++) {
        good &= sb_put(&c, ",", 1);
        r->metrics[m] = 0;
        if (!ok)
            continue;
        number_text(vals[m], num, sizeof num);
        good &= sb_puts(&c, num);
        r->metrics[m] = json_number_value(vals[m]);
        good &= !json_object_set_new(metrics, s->metric_names[m], json_deep_copy(vals[m]));
    }
    good &= sb_put(&c, ",", 1) && sb_csv(&c, ok ? "" : msg) && sb_put(&c, "\n", 1);
    json_t *line = good ? json_pack("{s:I, s:s, s:O, s:O, s:O}", "point", (json_int_t)p,
                                    "status", ok ? "ok" : "error", "params", params, "args",
                                    args, "metrics", metrics)
                        : NULL;
    if (line && !ok)
        good &= !json_object_set_new(line, "error", json_string(msg));
    char *js = line ? json_dumps(line, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(12))
                    : NULL;
    json_decref(line);
    json_decref(params);
    json_decref(args);
    json_decref(metrics);
    json_decref(j);
    free(vals);
    free(msg);
    strbuf jb = {0};
    good &= js && sb_puts(&jb, js) && sb_put(&jb, "\n", 1);
    free(js);
    if (!good) {
        free(c.s);
        free(jb.s);
        return false;
    }
    r->csv = c.s, r->jsonl = jb.s, r->ok = ok, r->done = true;
    return true;
}

/* ---- files ------------------------------------------------------------------------------------ */

/* path may be written: it does not exist, or is a regular file (not a symlink, a device, a
 * directory or a pipe). NP_ERR_IO naming it otherwise. */
static np_status check_target(const char *path, np_err *err)
{
    struct stat sb;
    if (lstat(path, &sb) != 0)
        return errno == ENOENT ? NP_OK
                               : np_err_at(err, NP_ERR_IO, path, 0, 0, "cannot use the results "
                                           "file: %s", strerror(errno));
    if (S_ISREG(sb.st_mode))
        return NP_OK;
    const char *what = S_ISLNK(sb.st_mode)   ? "a symbolic link"
                       : S_ISDIR(sb.st_mode) ? "a directory"
                       : S_ISCHR(sb.st_mode) || S_ISBLK(sb.st_mode) ? "a device"
                                                                    : "not a regular file";
    return np_err_at(err, NP_ERR_IO, path, 0, 0, "is %s: the results go to regular files only "
                     "(-o names a new file or the results of this sweep)", what);
}

/* Writes header and every done row, in point order, to path (through a temporary file and a
 * rename: the file is whole at every moment). NP_ERR_IO with the reason. */
static np_status rewrite(const char *path, const char *header, const row *rows, size_t n,
                         bool jsonl, np_err *err)
{
    char *tmp = str_printf("%s.tmp", path);
    if (!tmp)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory");
    unlink(tmp); /* a stale one (or a symlink planted there): never written through */
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    const char *step = "cannot create";
    bool ok = fd >= 0;
    if (ok && header)
        ok = np_write_all(fd, header, strlen(header)), step = "cannot write";
    for (size_t p = 0; ok && p < n; p++)
        if (rows[p].done) {
            const char *l = jsonl ? rows[p].jsonl : rows[p].csv;
            ok = np_write_all(fd, l, strlen(l)), step = "cannot write";
        }
    if (ok)
        ok = fsync(fd) == 0, step = "cannot write";
    int e = errno;
    if (fd >= 0 && close(fd) != 0 && ok)
        ok = false, e = errno, step = "cannot write";
    if (ok && rename(tmp, path) != 0)
        ok = false, e = errno, step = "cannot rename it to the results";
    np_status st = NP_OK;
    if (!ok) {
        st = np_err_at(err, NP_ERR_IO, tmp, 0, 0, "%s: %s", step, strerror(e));
        if (fd >= 0)
            unlink(tmp);
    }
    free(tmp);
    return st;
}

/* A results file read whole (NULL text and 0 when it does not exist). */
static np_status read_results(const char *path, char **text, size_t *len, np_err *err)
{
    *text = NULL, *len = 0;
    struct stat sb;
    if (lstat(path, &sb) != 0 && errno == ENOENT)
        return NP_OK;
    np_status st = np_read_file(path, SWEEP_RESULTS_MAX_BYTES, "sweep results", text, len, err);
    if (st == NP_OK && strlen(*text) != *len) {
        st = np_err_at(err, NP_ERR_SYNTAX, path, 0, 0, "a NUL byte: not sweep results");
        free(*text);
        *text = NULL;
    }
    return st;
}

/* What a resumed row of point p must be: this sweep's point (else NP_ERR_INCONSISTENT at
 * path:line saying what differs). */
static np_status not_this_sweep(np_err *err, const char *path, int line, size_t p,
                                const char *what)
{
    return np_err_at(err, NP_ERR_INCONSISTENT, path, line, 0, "point %zu %s: these results "
                     "are another sweep's, or this sweep's grid was edited since (use another "
                     "-o, or remove the results to start again)", p, what);
}

/* The CSV rows (after a header equal to this sweep's) into csv_rec[point] (the record's
 * text, with its line break; torn last record dropped), each checked against the point's
 * values. */
static np_status resume_csv(const sweep *s, const char *path, const char *text, size_t len,
                            char **csv_rec, bool *csv_ok, np_err *err)
{
    csv_reader r;
    csv_reader_init(&r, text, len);
    char **f;
    size_t n, want = s->n_cols + s->n_metrics + 3;
    bool torn;
    int line;
    np_status st = csv_next(&r, path, &f, &n, &torn, &line, err);
    if (st != NP_OK || !f)
        return st;
    bool same = !torn && n == want && !strcmp(f[0], "point") && !strcmp(f[1], "status") &&
                !strcmp(f[n - 1], "error");
    for (size_t c = 0; same && c < s->n_cols; c++)
        same = !strcmp(f[2 + c], s->cols[c]);
    for (size_t m = 0; same && m < s->n_metrics; m++)
        same = !strcmp(f[2 + s->n_cols + m], s->metric_names[m]);
    csv_fields_free(f, n);
    if (!same)
        return np_err_at(err, NP_ERR_INCONSISTENT, path, 1, 1, "the results were written by "
                         "another sweep (their columns differ from this one's)");
    for (;;) {
        const char *start = r.p;
        if ((st = csv_next(&r, path, &f, &n, &torn, &line, err)) != NP_OK || !f || torn) {
            csv_fields_free(f, n); /* a torn last record is dropped (rerun) */
            break;
        }
        uint64_t p;
        if (n != want)
            st = np_err_at(err, NP_ERR_SYNTAX, path, line, 0, "%zu fields where the header has "
                           "%zu", n, want);
        else if (np_parse_u64(NP_SRC_AT(path, line, 1, "point"), f[0], 0, UINT64_MAX, &p,
                              err) != NP_OK)
            st = err->status;
        else if (p >= s->n_points)
            st = not_this_sweep(err, path, line, (size_t)p, "is not in this sweep (it has fewer "
                                "points)");
        for (size_t c = 0; st == NP_OK && c < s->n_cols; c++) {
            const char *v = s->vals[p][c] ? s->vals[p][c] : "";
            if (strcmp(f[2 + c], v)) {
                char *what = str_printf("has %s = '%s' in the results but '%s' in this sweep",
                                        s->cols[c], f[2 + c], v);
                st = what ? not_this_sweep(err, path, line, (size_t)p, what)
                          : np_err_set(err, NP_ERR_NOMEM, "out of memory");
                free(what);
            }
        }
        if (st == NP_OK) {
            free(csv_rec[p]);
            csv_rec[p] = strndup(start, (size_t)(r.p - start));
            csv_ok[p] = !strcmp(f[1], "ok");
            if (!csv_rec[p])
                st = np_err_set(err, NP_ERR_NOMEM, "out of memory");
        }
        csv_fields_free(f, n);
        if (st != NP_OK)
            break;
    }
    return st;
}

/* Whether a JSON line's args are point p's. */
static bool same_args(const sweep *s, size_t p, const json_t *args)
{
    const char *const *a = sweep_point_args(s, p);
    size_t k = 0;
    for (; a[k]; k++) {
        const char *v = json_string_value(json_array_get(args, k));
        if (!v || strcmp(v, a[k]))
            return false;
    }
    return json_is_array(args) && json_array_size(args) == k;
}

/* Takes the finished points from existing files into rows (a point counts when both files
 * have it, with the same status, and its run was not cut short by an interrupt). */
static np_status resume_rows(const sweep *s, const char *csv_path, const char *jsonl_path,
                             row *rows, size_t *n_done, np_err *err)
{
    char *csv = NULL, *jl = NULL;
    size_t csv_len, jl_len;
    char **csv_rec = calloc(s->n_points + 1, sizeof *csv_rec);
    bool *csv_ok = calloc(s->n_points + 1, sizeof *csv_ok);
    *n_done = 0;
    np_status st = csv_rec && csv_ok ? NP_OK : np_err_set(err, NP_ERR_NOMEM, "out of memory");
    if (st == NP_OK)
        st = read_results(csv_path, &csv, &csv_len, err);
    if (st == NP_OK)
        st = read_results(jsonl_path, &jl, &jl_len, err);
    if (st == NP_OK && csv)
        st = resume_csv(s, csv_path, csv, csv_len, csv_rec, csv_ok, err);
    /* the JSON lines: {"point": N, "status", "params", "args", ...}; a torn last one dropped */
    int ln = 1;
    for (char *line = st == NP_OK ? jl : NULL, *nl; line && (nl = strchr(line, '\n'));
         line = nl + 1, ln++) {
        *nl = '\0';
        json_error_t je;
        json_t *j = json_loads(line, 0, &je);
        json_t *pt = json_object_get(j, "point");
        const char *status = json_string_value(json_object_get(j, "status")),
                   *error = json_string_value(json_object_get(j, "error"));
        if (!j || !json_is_integer(pt) || !status) {
            st = np_err_at(err, NP_ERR_SYNTAX, jsonl_path, ln, j ? 0 : je.column,
                           "not a row of sweep results (%s)",
                           j ? "no \"point\" or \"status\"" : je.text);
            json_decref(j);
            break;
        }
        json_int_t id = json_integer_value(pt);
        size_t p = (size_t)id;
        if (id < 0 || p >= s->n_points)
            st = not_this_sweep(err, jsonl_path, ln, p, "is not in this sweep (it has fewer "
                                "points)");
        else if (!same_args(s, p, json_object_get(j, "args")))
            st = not_this_sweep(err, jsonl_path, ln, p, json_object_get(j, "args")
                                ? "ran with other arguments than this sweep's point"
                                : "has no \"args\" (results of an older npusim: which "
                                  "point it was cannot be checked)");
        bool interrupted = error && (!strncmp(error, "exit 130:", 9) ||
                                     !strncmp(error, "exit 143:", 9));
        if (st == NP_OK && csv_rec[p] && csv_ok[p] == !strcmp(status, "ok") && !interrupted) {
            row *r = &rows[p];
            free(r->csv);
            free(r->jsonl);
            r->csv = csv_rec[p], csv_rec[p] = NULL;
            r->jsonl = str_printf("%s\n", line);
            if (!r->jsonl) {
                st = np_err_set(err, NP_ERR_NOMEM, "out of memory");
                json_decref(j);
                break;
            }
            json_t *m = json_object_get(j, "metrics");
            r->ok = csv_ok[p];
            for (size_t k = 0; k < s->n_metrics; k++)
                r->metrics[k] = json_number_value(json_object_get(m, s->metric_names[k]));
            *n_done += !r->done;
            r->done = true;
        }
        json_decref(j);
        if (st != NP_OK)
            break;
    }
    for (size_t p = 0; csv_rec && p < s->n_points; p++)
        free(csv_rec[p]);
    free(csv_rec);
    free(csv_ok);
    free(csv);
    free(jl);
    return st;
}

/* ---- the pool --------------------------------------------------------------------------------- */

typedef struct job {
    pid_t pid;
    size_t point;
    int fd[2]; /* stdout, stderr; -1 when closed */
    strbuf out, err;
} job;

static volatile sig_atomic_t sweep_stop;

static void on_signal(int sig)
{
    (void)sig;
    sweep_stop = 1;
}

static bool job_start(const sweep *s, const char *npusim, size_t point, job *j)
{
    int po[2], pe[2];
    if (pipe(po))
        return false;
    if (pipe(pe)) {
        close(po[0]);
        close(po[1]);
        return false;
    }
    const char *const *args = sweep_point_args(s, point);
    size_t n = 0;
    while (args[n])
        n++;
    char **argv = calloc(n + 2, sizeof *argv);
    pid_t pid = argv ? fork() : -1;
    if (pid == 0) {
        argv[0] = (char *)npusim;
        for (size_t i = 0; i < n; i++)
            argv[i + 1] = (char *)args[i];
        int nul = open("/dev/null", O_RDONLY);
        if (nul >= 0)
            dup2(nul, 0);
        dup2(po[1], 1);
        dup2(pe[1], 2);
        close(po[0]), close(pe[0]), close(po[1]), close(pe[1]);
        execv(npusim, argv);
        fprintf(stderr, "cannot run %s: %s\n", npusim, strerror(errno));
        _exit(127);
    }
    free(argv);
    close(po[1]);
    close(pe[1]);
    if (pid < 0) {
        close(po[0]);
        close(pe[0]);
        return false;
    }
    *j = (job){pid, point, {po[0], pe[0]}, {0}, {0}};
    return true;
}

/* ---- MPI -------------------------------------------------------------------------------------- */

static int mpi_rank, mpi_size = 1;

bool sweep_is_root(void) { return mpi_rank == 0; }

#ifdef NPUSIM_HAVE_MPI
#define TAG_ROW 1
#define TAG_DONE 2
static bool under_mpirun(void)
{
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") || getenv("PMIX_RANK");
}
#endif

/* ---- the run ---------------------------------------------------------------------------------- */

typedef struct run_state {
    const sweep *s;
    const sweep_opts *o;
    row *rows;
    int csv_fd, jsonl_fd;
    size_t done, failed;
    bool io_failed;
    int io_errno;
} run_state;

/* A finished row on the root: into the files and the counts. */
static void deliver(run_state *rs, size_t p)
{
    row *r = &rs->rows[p];
    if (!rs->io_failed && (!np_write_all(rs->csv_fd, r->csv, strlen(r->csv)) ||
                           !np_write_all(rs->jsonl_fd, r->jsonl, strlen(r->jsonl))))
        rs->io_failed = true, rs->io_errno = errno;
    rs->done++;
    rs->failed += !r->ok;
    if (rs->o->progress)
        rs->o->progress(rs->o->progress_ctx, rs->done, rs->s->n_points, rs->failed);
}

#ifdef NPUSIM_HAVE_MPI
/* Root: takes whatever other ranks sent. Returns how many ranks said they are done. */
static int mpi_collect(run_state *rs, np_err *err, np_status *st)
{
    int dones = 0, flag;
    MPI_Status ms;
    while (MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &ms) == MPI_SUCCESS &&
           flag) {
        int n;
        MPI_Get_count(&ms, MPI_CHAR, &n);
        char *buf = malloc((size_t)n + 1);
        if (!buf) {
            *st = np_err_set(err, NP_ERR_NOMEM, "out of memory");
            return dones;
        }
        MPI_Recv(buf, n, MPI_CHAR, ms.MPI_SOURCE, ms.MPI_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        buf[n] = '\0';
        if (ms.MPI_TAG == TAG_DONE) {
            dones++;
        } else { /* "point\ncsv-line\njsonl-line\n" */
            char *a = strchr(buf, '\n'), *b = a ? strchr(a + 1, '\n') : NULL;
            size_t p = strtoul(buf, NULL, 10);
            if (b && p < rs->s->n_points && !rs->rows[p].done) {
                row *r = &rs->rows[p];
                r->csv = strndup(a + 1, (size_t)(b - a));
                r->jsonl = strdup(b + 1);
                json_t *j = r->jsonl ? json_loads(r->jsonl, 0, NULL) : NULL;
                json_t *m = json_object_get(j, "metrics");
                const char *status = json_string_value(json_object_get(j, "status"));
                r->ok = status && !strcmp(status, "ok");
                for (size_t k = 0; k < rs->s->n_metrics; k++)
                    r->metrics[k] = json_number_value(json_object_get(m, rs->s->metric_names[k]));
                json_decref(j);
                r->done = r->csv && r->jsonl;
                if (r->done)
                    deliver(rs, p);
            }
        }
        free(buf);
    }
    return dones;
}
#endif

/* Runs the points this process owns (mine[p]) on the pool; rows to the root. */
static np_status pool(run_state *rs, const bool *mine, np_err *err)
{
    const sweep *s = rs->s;
    unsigned jobs = rs->o->jobs ? rs->o->jobs : 1;
    job *js = calloc(jobs, sizeof *js);
    struct pollfd *pf = calloc(2 * jobs, sizeof *pf);
    if (!js || !pf) {
        free(js);
        free(pf);
        return np_err_set(err, NP_ERR_NOMEM, "out of memory");
    }
    np_status st = NP_OK;
    size_t next = 0, active = 0;
    int ranks_done = 0;
    (void)ranks_done;
    for (;;) {
        while (st == NP_OK && !sweep_stop && active < jobs) {
            while (next < s->n_points && (!mine[next] || rs->rows[next].done))
                next++;
            if (next == s->n_points)
                break;
            size_t slot = 0;
            while (js[slot].pid)
                slot++;
            if (!job_start(s, rs->o->npusim, next, &js[slot])) {
                st = np_err_set(err, NP_ERR_IO, "cannot start %s: %s", rs->o->npusim,
                                strerror(errno));
                break;
            }
            next++, active++;
        }
#ifdef NPUSIM_HAVE_MPI
        if (mpi_size > 1 && mpi_rank == 0)
            ranks_done += mpi_collect(rs, err, &st);
        bool waiting = mpi_size > 1 && mpi_rank == 0 && ranks_done < mpi_size - 1;
#else
        bool waiting = false;
#endif
        if (!active && (!waiting || st != NP_OK || sweep_stop))
            break;
        size_t n = 0;
        for (unsigned k = 0; k < jobs; k++)
            for (int f = 0; f < 2; f++)
                if (js[k].pid && js[k].fd[f] >= 0)
                    pf[n++] = (struct pollfd){js[k].fd[f], POLLIN, 0};
        if (poll(pf, n, waiting ? 5 : 200) < 0 && errno != EINTR) {
            st = np_err_set(err, NP_ERR_IO, "poll: %s", strerror(errno));
            break;
        }
        for (unsigned k = 0; k < jobs; k++) {
            job *j = &js[k];
            if (!j->pid)
                continue;
            for (int f = 0; f < 2; f++) {
                if (j->fd[f] < 0)
                    continue;
                char buf[65536];
                struct pollfd one = {j->fd[f], POLLIN, 0};
                if (poll(&one, 1, 0) <= 0)
                    continue;
                ssize_t r = read(j->fd[f], buf, sizeof buf);
                if (r > 0) {
                    if (!sb_put(f ? &j->err : &j->out, buf, (size_t)r))
                        st = np_err_set(err, NP_ERR_NOMEM, "out of memory");
                } else if (r == 0 || errno != EINTR) {
                    close(j->fd[f]);
                    j->fd[f] = -1;
                }
            }
            if (j->fd[0] >= 0 || j->fd[1] >= 0)
                continue;
            int ws;
            while (waitpid(j->pid, &ws, 0) < 0 && errno == EINTR)
                ;
            int code = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
            row *r = &rs->rows[j->point];
            /* a run cut short by Ctrl-C or a TERM (to the process group, or to the point
             * alone) is not its point's result: not recorded, and the sweep stops */
            if (code == 128 + SIGINT || code == 128 + SIGTERM)
                sweep_stop = 1;
            bool record = !sweep_stop;
            if (record && !make_row(s, j->point, code, j->out.s ? j->out.s : "",
                                    j->err.s ? j->err.s : "", r))
                st = np_err_set(err, NP_ERR_NOMEM, "out of memory");
            else if (record && mpi_rank == 0)
                deliver(rs, j->point);
#ifdef NPUSIM_HAVE_MPI
            else if (record) {
                strbuf m = {0};
                char id[32];
                snprintf(id, sizeof id, "%zu\n", j->point);
                if (sb_puts(&m, id) && sb_puts(&m, r->csv) && sb_puts(&m, r->jsonl))
                    MPI_Send(m.s, (int)m.n, MPI_CHAR, 0, TAG_ROW, MPI_COMM_WORLD);
                free(m.s);
            }
#endif
            free(j->out.s);
            free(j->err.s);
            memset(j, 0, sizeof *j);
            active--;
        }
    }
    for (unsigned k = 0; k < jobs; k++) /* interrupted: stop what still runs */
        if (js[k].pid) {
            kill(js[k].pid, SIGTERM);
            waitpid(js[k].pid, NULL, 0);
            for (int f = 0; f < 2; f++)
                if (js[k].fd[f] >= 0)
                    close(js[k].fd[f]);
            free(js[k].out.s);
            free(js[k].err.s);
        }
    free(js);
    free(pf);
    if (st == NP_OK && sweep_stop)
        st = np_err_set(err, NP_ERR_IO, "interrupted: %zu of %zu points are in the results "
                        "(npusim sweep --resume goes on)", rs->done, s->n_points);
    return st;
}

/* The points no other ok point dominates on the pareto objectives (all of them when there
 * are none). */
static void pareto_front(const sweep *s, const row *rows, sweep_result *out)
{
    out->pareto = calloc(s->n_points + 1, sizeof *out->pareto);
    if (!out->pareto)
        return;
    bool any = false;
    for (size_t m = 0; m < s->n_metrics; m++)
        any |= s->pareto_dir[m] != 0;
    for (size_t p = 0; any && p < s->n_points; p++) {
        if (!rows[p].done || !rows[p].ok)
            continue;
        bool dominated = false;
        for (size_t q = 0; q < s->n_points && !dominated; q++) {
            if (q == p || !rows[q].done || !rows[q].ok)
                continue;
            bool no_worse = true, better = false;
            for (size_t m = 0; m < s->n_metrics; m++) {
                if (!s->pareto_dir[m])
                    continue;
                double a = rows[p].metrics[m] * s->pareto_dir[m],
                       b = rows[q].metrics[m] * s->pareto_dir[m]; /* higher is better */
                no_worse &= b >= a;
                better |= b > a;
            }
            dominated = no_worse && better;
        }
        if (!dominated)
            out->pareto[out->n_pareto++] = p;
    }
}

np_status sweep_run(const sweep *s, const sweep_opts *o, sweep_result *out, np_err *err)
{
    memset(out, 0, sizeof *out);
    out->points = s->n_points;
#ifdef NPUSIM_HAVE_MPI
    bool mpi = under_mpirun();
    if (mpi) {
        MPI_Init(NULL, NULL);
        MPI_Comm_rank(MPI_COMM_WORLD, &mpi_rank);
        MPI_Comm_size(MPI_COMM_WORLD, &mpi_size);
    }
#endif
    char *jsonl_path = sweep_jsonl_path(o->csv_path);
    row *rows = calloc(s->n_points, sizeof *rows);
    double *mem = calloc(s->n_points * (s->n_metrics + 1), sizeof *mem);
    bool *mine = calloc(s->n_points + 1, sizeof *mine);
    char *header = csv_header(s);
    np_status st = rows && mem && mine && header && jsonl_path
                       ? NP_OK
                       : np_err_set(err, NP_ERR_NOMEM, "out of memory");
    for (size_t p = 0; rows && mem && p < s->n_points; p++)
        rows[p].metrics = mem + p * (s->n_metrics + 1);
    run_state rs = {s, o, rows, -1, -1, 0, 0, false, 0};
    if (st == NP_OK && mpi_rank == 0) { /* the root owns the files */
        size_t resumed = 0;
        struct stat sb;
        st = check_target(o->csv_path, err);
        if (st == NP_OK)
            st = check_target(jsonl_path, err);
        bool exists = lstat(o->csv_path, &sb) == 0 || lstat(jsonl_path, &sb) == 0;
        if (st == NP_OK && exists && !o->resume)
            st = np_err_at(err, NP_ERR_IO, o->csv_path, 0, 0, "the results exist (--resume "
                           "continues them; or remove %s and %s)", o->csv_path, jsonl_path);
        else if (st == NP_OK && exists)
            st = resume_rows(s, o->csv_path, jsonl_path, rows, &resumed, err);
        if (st == NP_OK)
            st = rewrite(o->csv_path, header, rows, s->n_points, false, err);
        if (st == NP_OK)
            st = rewrite(jsonl_path, NULL, rows, s->n_points, true, err);
        const char *bad = o->csv_path;
        if (st == NP_OK &&
            ((rs.csv_fd = open(o->csv_path, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC)) < 0 ||
             (bad = jsonl_path,
              rs.jsonl_fd = open(jsonl_path, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC)) < 0))
            st = np_err_at(err, NP_ERR_IO, bad, 0, 0, "cannot open the results: %s",
                           strerror(errno));
        out->resumed = rs.done = resumed;
        for (size_t p = 0; p < s->n_points; p++)
            rs.failed += rows[p].done && !rows[p].ok;
    }
#ifdef NPUSIM_HAVE_MPI
    if (mpi_size > 1) { /* everyone learns the root's status and what is already done */
        int ok = st == NP_OK;
        MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
        if (!ok && mpi_rank)
            st = np_err_set(err, NP_ERR_IO, "rank 0 could not set up the results");
        if (ok) {
            unsigned char *done = calloc(s->n_points + 1, 1);
            for (size_t p = 0; done && p < s->n_points; p++)
                done[p] = rows[p].done;
            MPI_Bcast(done, (int)s->n_points, MPI_UNSIGNED_CHAR, 0, MPI_COMM_WORLD);
            for (size_t p = 0; done && p < s->n_points; p++)
                rows[p].done = done[p];
            free(done);
        }
    }
#endif
    size_t todo = 0; /* this rank's share: every size-th point not yet done */
    for (size_t p = 0; mine && p < s->n_points; p++)
        if (!rows[p].done)
            mine[p] = todo++ % (size_t)mpi_size == (size_t)mpi_rank;
    if (st == NP_OK) {
        sweep_stop = 0;
        struct sigaction sa = {0}, old_int, old_term;
        sa.sa_handler = on_signal;
        sigaction(SIGINT, &sa, &old_int);
        sigaction(SIGTERM, &sa, &old_term);
        if (o->progress && mpi_rank == 0)
            o->progress(o->progress_ctx, rs.done, s->n_points, rs.failed);
        st = pool(&rs, mine, err);
        sigaction(SIGINT, &old_int, NULL);
        sigaction(SIGTERM, &old_term, NULL);
    }
#ifdef NPUSIM_HAVE_MPI
    if (mpi_size > 1 && mpi_rank)
        MPI_Send("", 0, MPI_CHAR, 0, TAG_DONE, MPI_COMM_WORLD);
#endif
    if (mpi_rank == 0 && rs.csv_fd >= 0) {
        if (rs.csv_fd >= 0)
            close(rs.csv_fd);
        if (rs.jsonl_fd >= 0)
            close(rs.jsonl_fd);
        if (rs.io_failed && st == NP_OK)
            st = np_err_at(err, NP_ERR_IO, o->csv_path, 0, 0, "cannot append to the results: %s",
                           strerror(rs.io_errno));
        if (st == NP_OK)
            st = rewrite(o->csv_path, header, rows, s->n_points, false, err);
        if (st == NP_OK)
            st = rewrite(jsonl_path, NULL, rows, s->n_points, true, err);
        out->ran = rs.done - out->resumed;
        out->failed = rs.failed;
        if (st == NP_OK)
            pareto_front(s, rows, out);
    }
#ifdef NPUSIM_HAVE_MPI
    if (mpi) {
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Finalize();
    }
#endif
    for (size_t p = 0; rows && p < s->n_points; p++) {
        free(rows[p].csv);
        free(rows[p].jsonl);
    }
    free(rows);
    free(mem);
    free(mine);
    free(header);
    free(jsonl_path);
    return st;
}
