/* harness.h — what every tests/test_<module>.c includes.
 *
 * Write each behaviour as `TEST(sentence_like_name) { ... CU_ASSERT...; }` at the start of a
 * line. CMake finds every TEST() in the file and registers it with CUnit (suite = module) and
 * with ctest (as module.name), so a test cannot be forgotten. `test_<module> NAME` runs one
 * test; with no argument the whole suite runs and CUnit prints its summary.
 */
#ifndef NPUSIM_TEST_HARNESS_H
#define NPUSIM_TEST_HARNESS_H

#include <CUnit/CUnit.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define TEST(name) void test_##name(void); void test_##name(void)

/* String equality that shows both strings when they differ. */
#define EXPECT_STR(actual, expected)                                                          \
    do {                                                                                      \
        const char *a_ = (actual), *e_ = (expected);                                          \
        if (!a_ || strcmp(a_, e_) != 0)                                                       \
            fprintf(stderr, "\n    got:  %s\n    want: %s\n", a_ ? a_ : "(null)", e_);         \
        CU_ASSERT_STRING_EQUAL(a_ ? a_ : "", e_);                                             \
    } while (0)

/* Result of running the npusim executable (built by this tree) with arguments. */
typedef struct harness_run {
    int exit_status; /* the process exit status; 128+N when killed by signal N */
    char *out;       /* everything written to stdout, NUL-terminated (free with harness_run_free) */
    char *err;       /* everything written to stderr */
} harness_run;

/* Runs `npusim ARGS...` (NULL-terminated list) with stdin from /dev/null. */
harness_run harness_npusim(const char *arg0, ...);
/* The same with the arguments in a NULL-terminated array, run in directory dir (NULL: here). */
harness_run harness_npusim_in(const char *dir, const char *const *args);
void harness_run_free(harness_run *r);

/* Path of a file under the source tree (e.g. "configs/tiny.yaml"), in a static buffer. */
const char *harness_src_path(const char *rel);

/* Reads a whole file into a malloc'd NUL-terminated string; NULL if it cannot be read. */
char *harness_read_file(const char *path, size_t *len);

/* Returns doc (freeing it) with every "/tmp/" replaced by a directory of this process's own
 * (made once, under /tmp), so documented commands that write /tmp files cannot race with
 * other test processes running the same examples. NULL when out of memory. */
char *harness_private_tmp(char *doc);

#endif
