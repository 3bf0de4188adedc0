/* test_bad_input.c — the bad-input corpus (the .case files of tests/data/bad): hostile
 * inputs, each with the exit status and the message a user should get. Every case runs the
 * built npusim, so in the sanitizer build (scripts/test.sh --sanitize) the corpus runs under
 * ASan and UBSan too.
 *
 * A case file holds lines of
 *   # comment                      why the case is here (the class of the audit it stands for)
 *   pre: ARGS                      npusim commands run first, each of which must succeed
 *   args: ARGS                     the command under test
 *   exit: N                        its exit status
 *   stderr: TEXT                   text its standard error must contain (repeatable)
 *   stdout: TEXT                   text its standard output must contain (repeatable)
 *   messages: N                    "npusim: " messages on stderr (default 1; config check
 *                                  names every error of a file)
 * ARGS are separated by single spaces; in ARGS and TEXT, @DIR@ is tests/data/bad, @TMP@ a
 * fresh folder, \xHH a byte and \s a space. A failing exit status (2) must come with that
 * many "npusim: " messages and never a signal, a sanitizer report or a hang (ctest's
 * timeout). */
#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#define BAD_MAX_ARGS 32
#define BAD_MAX_TEXT 8

static char bad_tmp[64];

/* text with @DIR@, @TMP@, \xHH and \s expanded, into a new string. */
static char *bad_expand(const char *text, const char *dir)
{
    size_t cap = strlen(text) * 4 + 512, n = 0;
    char *out = malloc(cap);
    for (const char *p = text; *p && n + 300 < cap;) {
        if (strncmp(p, "@DIR@", 5) == 0) {
            n += (size_t)snprintf(out + n, cap - n, "%s", dir);
            p += 5;
        } else if (strncmp(p, "@TMP@", 5) == 0) {
            n += (size_t)snprintf(out + n, cap - n, "%s", bad_tmp);
            p += 5;
        } else if (p[0] == '\\' && p[1] == 'x' && p[2] && p[3]) {
            char hex[3] = {p[2], p[3], 0};
            out[n++] = (char)strtoul(hex, NULL, 16);
            p += 4;
        } else if (p[0] == '\\' && p[1] == 's') {
            out[n++] = ' ';
            p += 2;
        } else {
            out[n++] = *p++;
        }
    }
    out[n] = '\0';
    return out;
}

/* Splits a line of ARGS (expanded) at single spaces into args[] (NULL-terminated). */
static int bad_split(char *line, const char *dir, char **args, char **owned)
{
    int n = 0;
    for (char *tok = strtok(line, " "); tok && n < BAD_MAX_ARGS - 1; tok = strtok(NULL, " "))
        owned[n] = args[n] = bad_expand(tok, dir), n++;
    args[n] = NULL;
    return n;
}

/* Runs one case; returns true when it behaved as it says (printing why not otherwise). */
static bool bad_case(const char *path, const char *name, const char *dir)
{
    size_t len;
    char *text = harness_read_file(path, &len);
    if (!text) {
        printf("\n  %s: cannot read\n", name);
        return false;
    }
    char *args_line = NULL, *want_err[BAD_MAX_TEXT], *want_out[BAD_MAX_TEXT], *pre[8];
    int n_err = 0, n_out = 0, n_pre = 0, want_exit = -1, want_msgs = 1;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        if (strncmp(line, "args: ", 6) == 0)
            args_line = line + 6;
        else if (strncmp(line, "pre: ", 5) == 0 && n_pre < 8)
            pre[n_pre++] = line + 5;
        else if (strncmp(line, "exit: ", 6) == 0)
            want_exit = atoi(line + 6);
        else if (strncmp(line, "messages: ", 10) == 0)
            want_msgs = atoi(line + 10);
        else if (strncmp(line, "stderr: ", 8) == 0 && n_err < BAD_MAX_TEXT)
            want_err[n_err++] = line + 8;
        else if (strncmp(line, "stdout: ", 8) == 0 && n_out < BAD_MAX_TEXT)
            want_out[n_out++] = line + 8;
    }
    bool ok = args_line && want_exit >= 0;
    if (!ok)
        printf("\n  %s: needs 'args:' and 'exit:'\n", name);
    /* strtok is used for the file; the argument lines are split on copies */
    for (int i = 0; ok && i < n_pre; i++) {
        char *copy = strdup(pre[i]), *args[BAD_MAX_ARGS], *owned[BAD_MAX_ARGS];
        int na = bad_split(copy, dir, args, owned);
        harness_run r = harness_npusim_in(NULL, (const char *const *)args);
        if (r.exit_status != 0) {
            printf("\n  %s: 'pre: %s' failed (%d): %s\n", name, pre[i], r.exit_status, r.err);
            ok = false;
        }
        harness_run_free(&r);
        for (int k = 0; k < na; k++)
            free(owned[k]);
        free(copy);
    }
    if (ok) {
        char *copy = strdup(args_line), *args[BAD_MAX_ARGS], *owned[BAD_MAX_ARGS];
        int na = bad_split(copy, dir, args, owned);
        harness_run r = harness_npusim_in(NULL, (const char *const *)args);
        if (r.exit_status != want_exit) {
            printf("\n  %s: exit status %d, expected %d\n  stderr: %s\n", name, r.exit_status,
                   want_exit, r.err);
            ok = false;
        }
        for (int i = 0; i < n_err; i++) {
            char *w = bad_expand(want_err[i], dir);
            if (!strstr(r.err, w)) {
                printf("\n  %s: stderr lacks '%s'\n  stderr: %s\n", name, w, r.err);
                ok = false;
            }
            free(w);
        }
        for (int i = 0; i < n_out; i++) {
            char *w = bad_expand(want_out[i], dir);
            if (!strstr(r.out, w)) {
                printf("\n  %s: stdout lacks '%s'\n", name, w);
                ok = false;
            }
            free(w);
        }
        if (want_exit != 0) { /* clear messages: "npusim: ..." as many as said, and usage */
            int msgs = 0;
            for (const char *p = r.err; (p = strstr(p, "npusim: ")); p++)
                msgs++;
            bool sanitizer = strstr(r.err, "Sanitizer") || strstr(r.err, "runtime error");
            if (strncmp(r.err, "npusim: ", 8) != 0 || msgs != want_msgs || sanitizer) {
                printf("\n  %s: expected %d 'npusim: ' message(s), got: %s\n", name, want_msgs,
                       r.err);
                ok = false;
            }
        }
        harness_run_free(&r);
        for (int k = 0; k < na; k++)
            free(owned[k]);
        free(copy);
    }
    free(text);
    return ok;
}

static int bad_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

TEST(every_case_of_the_bad_input_corpus_exits_as_it_says)
{
    const char *dir = harness_src_path("tests/data/bad");
    char dirbuf[512];
    snprintf(dirbuf, sizeof dirbuf, "%s", dir);
    snprintf(bad_tmp, sizeof bad_tmp, "/tmp/npusim_bad_XXXXXX");
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(bad_tmp));
    DIR *d = opendir(dirbuf);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    char *names[512];
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d)) && n < 512) {
        size_t l = strlen(de->d_name);
        if (l > 5 && strcmp(de->d_name + l - 5, ".case") == 0)
            names[n++] = strdup(de->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof *names, bad_cmp);
    CU_ASSERT(n >= 30); /* the corpus is there */
    size_t failed = 0;
    for (size_t i = 0; i < n; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dirbuf, names[i]);
        if (!bad_case(path, names[i], dirbuf))
            failed++;
        free(names[i]);
    }
    CU_ASSERT_EQUAL(failed, 0);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", bad_tmp);
    CU_ASSERT_EQUAL(system(cmd), 0);
}
