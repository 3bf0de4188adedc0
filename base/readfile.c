/* readfile.c — whole-file reads with a size cap (see readfile.h). */
#include "readfile.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "human.h"

np_status np_read_file(const char *path, uint64_t max_bytes, const char *what, char **text,
                       size_t *len, np_err *err)
{
    *text = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return np_err_at(err, NP_ERR_IO, path, 0, 0, "cannot open: %s", strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0) {
        int e = errno;
        fclose(f);
        return np_err_at(err, NP_ERR_IO, path, 0, 0, "cannot read: %s", strerror(e));
    }
    if (S_ISDIR(st.st_mode) || S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ||
        S_ISSOCK(st.st_mode)) {
        fclose(f);
        return np_err_at(err, NP_ERR_IO, path, 0, 0, "is %s, not %s",
                         S_ISDIR(st.st_mode) ? "a directory" : "a device", what);
    }
    char cap_text[NP_HUMAN_MAX];
    np_human_bytes(max_bytes, cap_text, sizeof cap_text);
    if (S_ISREG(st.st_mode) && (uint64_t)st.st_size > max_bytes) {
        fclose(f);
        return np_err_at(err, NP_ERR_RANGE, path, 0, 0, "larger than %s (the limit for %s)",
                         cap_text, what);
    }
    size_t cap = S_ISREG(st.st_mode) ? (size_t)st.st_size + 1 : 4096, n = 0;
    char *buf = malloc(cap + 1);
    if (!buf) {
        fclose(f);
        return np_err_set(err, NP_ERR_NOMEM, "out of memory reading %s", path);
    }
    np_status s = NP_OK;
    for (;;) {
        if (n == cap) {
            if (cap > max_bytes) {
                s = np_err_at(err, NP_ERR_RANGE, path, 0, 0, "larger than %s (the limit for %s)",
                              cap_text, what);
                break;
            }
            size_t nc = cap * 2 > max_bytes + 1 ? (size_t)max_bytes + 1 : cap * 2;
            char *nb = realloc(buf, nc + 1);
            if (!nb) {
                s = np_err_set(err, NP_ERR_NOMEM, "out of memory reading %s", path);
                break;
            }
            buf = nb, cap = nc;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) {
            if (ferror(f))
                s = np_err_at(err, NP_ERR_IO, path, 0, 0, "read error");
            break;
        }
    }
    fclose(f);
    if (s == NP_OK && n > max_bytes)
        s = np_err_at(err, NP_ERR_RANGE, path, 0, 0, "larger than %s (the limit for %s)",
                      cap_text, what);
    if (s != NP_OK) {
        free(buf);
        return s;
    }
    buf[n] = '\0';
    *text = buf;
    *len = n;
    return NP_OK;
}
