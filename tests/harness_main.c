/* harness_main.c — the main() of every test executable: registers the TEST()s that CMake
 * listed in TEST_LIST_FILE as one CUnit suite and runs all of them, or the one named on the
 * command line. Also the helpers declared in harness.h. */
#include "harness.h"

#include <CUnit/Basic.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define TEST_ENTRY(name) void test_##name(void);
#include TEST_LIST_FILE
#undef TEST_ENTRY

static const struct {
    const char *name;
    CU_TestFunc fn;
} harness_tests[] = {
#define TEST_ENTRY(name) {#name, test_##name},
#include TEST_LIST_FILE
#undef TEST_ENTRY
};

int main(int argc, char **argv)
{
    const char *only = argc > 1 ? argv[1] : NULL;
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    CU_pSuite suite = CU_add_suite(TEST_SUITE_NAME, NULL, NULL);
    size_t added = 0;
    for (size_t i = 0; i < sizeof harness_tests / sizeof harness_tests[0]; i++) {
        if (only && strcmp(only, harness_tests[i].name) != 0)
            continue;
        CU_add_test(suite, harness_tests[i].name, harness_tests[i].fn);
        added++;
    }
    if (added == 0) {
        fprintf(stderr, "test_%s: no test named '%s'\n", TEST_SUITE_NAME, only ? only : "");
        CU_cleanup_registry();
        return 2;
    }
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned failed = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
    CU_cleanup_registry();
    return failed ? 1 : 0;
}

static char *harness_slurp_fd(int fd)
{
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (len + 1024 > cap)
            buf = realloc(buf, cap *= 2);
        ssize_t n = read(fd, buf + len, cap - len - 1);
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    buf[len] = '\0';
    return buf;
}

harness_run harness_npusim_in(const char *dir, const char *const *args)
{
    const char *argv[64];
    int argc = 0;
    argv[argc++] = NPUSIM_BIN;
    for (const char *const *a = args; *a && argc < 63; a++)
        argv[argc++] = *a;
    argv[argc] = NULL;

    harness_run r = {-1, NULL, NULL};
    char out_path[] = "/tmp/npusim_test_out_XXXXXX", err_path[] = "/tmp/npusim_test_err_XXXXXX";
    int out_fd = mkstemp(out_path), err_fd = mkstemp(err_path);
    CU_ASSERT_FATAL(out_fd >= 0 && err_fd >= 0);
    unlink(out_path);
    unlink(err_path);
    pid_t pid = fork();
    if (pid == 0) {
        int null_fd = open("/dev/null", O_RDONLY);
        dup2(null_fd, 0);
        dup2(out_fd, 1);
        dup2(err_fd, 2);
        if (dir && chdir(dir) != 0)
            _exit(126);
        execv(NPUSIM_BIN, (char *const *)argv);
        _exit(127);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    r.exit_status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    lseek(out_fd, 0, SEEK_SET);
    lseek(err_fd, 0, SEEK_SET);
    r.out = harness_slurp_fd(out_fd);
    r.err = harness_slurp_fd(err_fd);
    close(out_fd);
    close(err_fd);
    return r;
}

harness_run harness_npusim(const char *arg0, ...)
{
    const char *args[64];
    int n = 0;
    va_list ap;
    va_start(ap, arg0);
    for (const char *a = arg0; a && n < 62; a = va_arg(ap, const char *))
        args[n++] = a;
    va_end(ap);
    args[n] = NULL;
    return harness_npusim_in(NULL, args);
}

void harness_run_free(harness_run *r)
{
    free(r->out);
    free(r->err);
    r->out = r->err = NULL;
}

const char *harness_src_path(const char *rel)
{
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s/%s", NPUSIM_SOURCE_DIR, rel);
    return buf;
}

char *harness_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    size_t got;
    while ((got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += got;
        if (n + 1 >= cap)
            buf = realloc(buf, cap *= 2);
    }
    fclose(f);
    buf[n] = '\0';
    if (len)
        *len = n;
    return buf;
}

static char private_dir[64];

/* Removes the private folder and the files the examples wrote in it (at exit). */
static void private_tmp_remove(void)
{
    DIR *d = opendir(private_dir);
    if (d) {
        for (struct dirent *e; (e = readdir(d));) {
            char path[512];
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
                snprintf(path, sizeof path, "%s/%s", private_dir, e->d_name);
                remove(path);
            }
        }
        closedir(d);
    }
    rmdir(private_dir);
}

char *harness_private_tmp(char *doc)
{
    char *dir = private_dir;
    if (!doc)
        return NULL;
    if (!dir[0]) {
        snprintf(dir, sizeof private_dir, "/tmp/npusim_doc_XXXXXX");
        if (!mkdtemp(dir)) {
            dir[0] = '\0';
            return doc; /* no private folder: the shared /tmp it is */
        }
        atexit(private_tmp_remove);
    }
    size_t n = 0, len = strlen(doc), dl = strlen(dir);
    for (const char *p = doc; (p = strstr(p, "/tmp/")); p += 5)
        n++;
    char *out = malloc(len + n * dl + 1);
    if (!out) {
        free(doc);
        return NULL;
    }
    char *w = out;
    for (const char *p = doc, *q; ; p = q + 4) {
        q = strstr(p, "/tmp/");
        if (!q) {
            strcpy(w, p);
            break;
        }
        memcpy(w, p, (size_t)(q - p));
        w += q - p;
        memcpy(w, dir, dl);
        w += dl;
    }
    free(doc);
    return out;
}
