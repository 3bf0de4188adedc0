/* test_tutorial.c — docs/tutorial.md stays true: every line of its `sh` blocks that starts
 * with `npusim` runs, from the repository root, and exits 0 with some output. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

TEST(every_command_of_the_tutorial_runs)
{
    char *doc = harness_private_tmp(harness_read_file(harness_src_path("docs/tutorial.md"), NULL));
    CU_ASSERT_PTR_NOT_NULL_FATAL(doc);
    char root[4096];
    snprintf(root, sizeof root, "%s", harness_src_path(""));
    unsigned ran = 0;
    bool in_sh = false;
    for (char *line = strtok(doc, "\n"); line; line = strtok(NULL, "\n")) {
        if (!strncmp(line, "```", 3)) {
            in_sh = !in_sh && !strcmp(line, "```sh");
            continue;
        }
        if (!in_sh || strncmp(line, "npusim ", 7))
            continue;
        char cmd[1024];
        snprintf(cmd, sizeof cmd, "%s", line + 7);
        const char *args[64];
        int n = 0;
        char *save = NULL;
        for (char *w = strtok_r(cmd, " ", &save); w && n < 63; w = strtok_r(NULL, " ", &save))
            args[n++] = w;
        args[n] = NULL;
        harness_run r = harness_npusim_in(root, args);
        if (r.exit_status != 0 || !r.out || (!r.out[0] && !strstr(line, " -o "))) {
            CU_FAIL("a tutorial command failed");
            fprintf(stderr, "docs/tutorial.md: `%s` exited %d: %s\n", line, r.exit_status,
                    r.err ? r.err : "");
        }
        harness_run_free(&r);
        ran++;
    }
    free(doc);
    CU_ASSERT(ran >= 10);
}
