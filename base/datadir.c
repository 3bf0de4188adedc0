/* datadir.c — the folders of npusim's data (see datadir.h). */
#include "datadir.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *np_data_share(char *buf, unsigned long n)
{
    char exe[PATH_MAX];
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    buf[0] = 0;
    if (k <= 0)
        return buf;
    exe[k] = 0;
    char *slash = strrchr(exe, '/');
    if (!slash)
        return buf;
    *slash = 0;
    /* <prefix>/bin/npusim -> <prefix>/share/npusim */
    int w = snprintf(buf, n, "%s/../share/npusim", exe);
    if (w < 0 || (unsigned long)w >= n)
        buf[0] = 0;
    return buf;
}

const char *np_data_dir(const char *env, const char *kind, const char *built_in)
{
    static struct {
        const char *kind;
        char path[PATH_MAX + 32];
    } found[NP_DATADIR_KINDS];
    const char *v = env ? getenv(env) : NULL;
    if (v && v[0])
        return v;
    int slot = -1;
    for (int i = 0; i < NP_DATADIR_KINDS && slot < 0; i++)
        if (!found[i].kind || strcmp(found[i].kind, kind) == 0)
            slot = i;
    if (slot < 0)
        return built_in;
    char share[PATH_MAX];
    struct stat st;
    np_data_share(share, sizeof share);
    int w = snprintf(found[slot].path, sizeof found[slot].path, "%s/%s", share, kind);
    if (!share[0] || w < 0 || (size_t)w >= sizeof found[slot].path ||
        stat(found[slot].path, &st) != 0 || !S_ISDIR(st.st_mode))
        return built_in;
    found[slot].kind = kind;
    return found[slot].path;
}
