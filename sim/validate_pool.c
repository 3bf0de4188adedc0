/* validate_pool.c — rows of `npusim validate` run in worker processes, several at once (see
 * validate.h: val_pool_*). Each worker is a fork of the caller that runs one row with
 * val_run_row and sends its status, result and error back through a pipe; the caller takes
 * the results in the order it asked for them, so its output streams in that order. */
#include "validate.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fdio.h"

/* What a worker sends back: the whole message, or nothing if it died. */
typedef struct pool_msg {
    np_status st;
    val_result res;
    np_err err;
} pool_msg;

/* The worker writes its message and exits before the caller reads it (after waitpid), so the
 * message must fit in the pipe: POSIX guarantees PIPE_BUF bytes. */
_Static_assert(sizeof(pool_msg) <= PIPE_BUF, "a worker's message must fit in a pipe");

typedef struct pool_slot {
    pid_t pid; /* 0: free */
    int fd;    /* the read end of the worker's pipe */
    size_t k;  /* its place in the order */
} pool_slot;

struct val_pool {
    const val_set *set;
    const size_t *order;
    size_t n, next; /* rows in the order; the next to launch */
    val_opts o;
    pool_slot *slot;
    int jobs;
    pool_msg *msg;  /* n: each row's message once it came */
    bool *done;
};

np_status val_pool_create(const val_set *set, const size_t *order, size_t n, int jobs,
                          const val_opts *o, val_pool **out, np_err *err)
{
    *out = NULL;
    if (jobs < 1)
        return np_err_set(err, NP_ERR_RANGE, "a pool of %d workers", jobs);
    val_pool *p = calloc(1, sizeof *p);
    if (p) {
        p->slot = calloc((size_t)jobs, sizeof *p->slot);
        p->msg = calloc(n ? n : 1, sizeof *p->msg);
        p->done = calloc(n ? n : 1, sizeof *p->done);
    }
    if (!p || !p->slot || !p->msg || !p->done) {
        val_pool_free(p);
        return np_err_set(err, NP_ERR_NOMEM, "out of memory");
    }
    p->set = set, p->order = order, p->n = n, p->jobs = jobs;
    p->o = o ? *o : (val_opts){0};
    p->o.progress = NULL; /* the workers print nothing */
    p->o.progress_ctx = NULL;
    *out = p;
    return NP_OK;
}

/* Starts the next row of the order in slot s. */
static np_status pool_launch(val_pool *p, pool_slot *s, np_err *err)
{
    size_t k = p->next, r;
    const val_file *f = val_row_at(p->set, p->order[k], &r);
    int fd[2];
    if (pipe(fd))
        return np_err_set(err, NP_ERR_IO, "cannot make a pipe for a worker: %s",
                          strerror(errno));
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        close(fd[0]);
        close(fd[1]);
        return np_err_set(err, NP_ERR_IO, "cannot start a worker process: %s", strerror(errno));
    }
    if (pid == 0) { /* the worker: one row, its message, gone */
        close(fd[0]);
        pool_msg m = {0};
        m.st = val_run_row(f, r, &p->o, &m.res, &m.err);
        _exit(np_write_all(fd[1], &m, sizeof m) ? 0 : 1);
    }
    close(fd[1]);
    *s = (pool_slot){pid, fd[0], k};
    p->next++;
    return NP_OK;
}

/* Reads the message of the worker of slot s, which has ended with status ws. */
static np_status pool_collect(val_pool *p, pool_slot *s, int ws, np_err *err)
{
    size_t k = s->k;
    pool_msg *m = &p->msg[k];
    size_t got = np_read_full(s->fd, m, sizeof *m);
    close(s->fd);
    size_t r;
    const val_file *f = val_row_at(p->set, p->order[k], &r);
    *s = (pool_slot){0};
    if (got == sizeof *m && WIFEXITED(ws) && WEXITSTATUS(ws) == 0) {
        p->done[k] = true;
        return NP_OK;
    }
    char id[96];
    val_row_id(f, &f->rows[r], id, sizeof id);
    if (WIFSIGNALED(ws))
        return np_err_set(err, NP_ERR_INTERNAL, "row %s: its worker process died of signal %d "
                          "(%s)", id, WTERMSIG(ws), strsignal(WTERMSIG(ws)));
    return np_err_set(err, NP_ERR_INTERNAL, "row %s: its worker process ended (status %d) "
                      "without its result", id, WIFEXITED(ws) ? WEXITSTATUS(ws) : -1);
}

size_t val_pool_running(const val_pool *p)
{
    size_t n = 0;
    for (int i = 0; i < p->jobs; i++)
        n += p->slot[i].pid != 0;
    return n;
}

np_status val_pool_get(val_pool *p, size_t k, val_result *res, np_err *err)
{
    if (k >= p->n)
        return np_err_set(err, NP_ERR_INTERNAL, "row %zu of a pool of %zu", k, p->n);
    while (!p->done[k]) {
        for (int i = 0; i < p->jobs && p->next < p->n; i++)
            if (!p->slot[i].pid && pool_launch(p, &p->slot[i], err) != NP_OK)
                return err->status;
        int ws;
        pid_t pid = waitpid(-1, &ws, 0);
        if (pid < 0) {
            if (errno == EINTR)
                continue;
            return np_err_set(err, NP_ERR_INTERNAL, "waiting for the workers: %s",
                              strerror(errno));
        }
        for (int i = 0; i < p->jobs; i++)
            if (p->slot[i].pid == pid && pool_collect(p, &p->slot[i], ws, err) != NP_OK)
                return err->status;
    }
    const pool_msg *m = &p->msg[k];
    *res = m->res;
    if (m->st != NP_OK)
        *err = m->err;
    return m->st;
}

void val_pool_free(val_pool *p)
{
    if (!p)
        return;
    for (int i = 0; p->slot && i < p->jobs; i++)
        if (p->slot[i].pid) {
            kill(p->slot[i].pid, SIGTERM);
            waitpid(p->slot[i].pid, NULL, 0);
            close(p->slot[i].fd);
        }
    free(p->slot);
    free(p->msg);
    free(p->done);
    free(p);
}
