/* arch_preset.c — presets (configs/<name>.yaml), telling a preset name from a file path, and
 * arch_resolve: defaults, file, --set overrides, validation. */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "arch.h"
#include "datadir.h"
#include "suggest.h"

#ifndef NPUSIM_CONFIG_DIR
#error "NPUSIM_CONFIG_DIR (the source tree's configs/ folder) must be defined by the build"
#endif

const char *arch_config_dir(void)
{
    return np_data_dir("NPUSIM_CONFIG_DIR", "configs", NPUSIM_CONFIG_DIR);
}

static bool arch_ends_with(const char *s, const char *suffix)
{
    size_t ls = strlen(s), lx = strlen(suffix);
    return ls >= lx && strcmp(s + ls - lx, suffix) == 0;
}

static int arch_cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void arch_presets_free(arch_presets *p)
{
    for (size_t i = 0; i < p->n; i++)
        free(p->names[i]);
    free(p->names);
    p->names = NULL;
    p->n = 0;
}

np_status arch_presets_list(arch_presets *out, np_err *err)
{
    out->names = NULL;
    out->n = 0;
    const char *dir = arch_config_dir();
    DIR *d = opendir(dir);
    if (!d)
        return np_err_at(err, NP_ERR_IO, dir, 0, 0, "cannot read the preset folder: %s",
                         strerror(errno));
    size_t cap = 0;
    np_status st = NP_OK;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (e->d_name[0] == '.' || !arch_ends_with(e->d_name, ".yaml") || len == 5)
            continue;
        if (out->n == cap) {
            cap = cap ? 2 * cap : 16;
            char **bigger = realloc(out->names, cap * sizeof *bigger);
            if (!bigger) {
                st = np_err_set(err, NP_ERR_NOMEM, "out of memory listing presets");
                break;
            }
            out->names = bigger;
        }
        char *name = strndup(e->d_name, len - 5);
        if (!name) {
            st = np_err_set(err, NP_ERR_NOMEM, "out of memory listing presets");
            break;
        }
        out->names[out->n++] = name;
    }
    closedir(d);
    if (st != NP_OK) {
        arch_presets_free(out);
        return st;
    }
    if (out->n)
        qsort(out->names, out->n, sizeof *out->names, arch_cmp_names);
    return NP_OK;
}

np_status arch_locate(const char *preset_or_file, char *path, size_t n, np_err *err)
{
    struct stat sb;
    const char *arg = preset_or_file;
    if (stat(arg, &sb) == 0 || strchr(arg, '/') || arch_ends_with(arg, ".yaml") ||
        arch_ends_with(arg, ".yml")) {
        snprintf(path, n, "%s", arg);
        return NP_OK;
    }
    const char *dir = arch_config_dir();
    snprintf(path, n, "%s/%s.yaml", dir, arg);
    if (arg[0] && stat(path, &sb) == 0)
        return NP_OK;

    arch_presets p;
    if (arch_presets_list(&p, err) != NP_OK) {
        np_err_prefix(err, "unknown preset '%s'", arg);
        return err ? err->status : NP_ERR_IO;
    }
    char list[256] = "";
    size_t used = 0;
    for (size_t i = 0; i < p.n && used < sizeof list; i++)
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "",
                                 p.names[i]);
    const char *guess = np_suggest(arg, (const char *const *)p.names, p.n, 3);
    np_status st;
    if (guess)
        st = np_err_set(err, NP_ERR_UNKNOWN_KEY,
                        "unknown preset '%s'; did you mean '%s'? (presets: %s; or give a file "
                        "path)", arg, guess, list);
    else
        st = np_err_set(err, NP_ERR_UNKNOWN_KEY,
                        "unknown preset '%s' (presets: %s; or give a file path)", arg,
                        p.n ? list : "none");
    arch_presets_free(&p);
    return st;
}

np_status arch_resolve(const char *preset_or_file, const char *const *sets, size_t n_sets,
                       arch_config *out, np_err *err)
{
    char path[NP_ERR_FILE_MAX];
    arch_config cfg;
    np_status st = arch_locate(preset_or_file, path, sizeof path, err);
    if (st == NP_OK)
        st = arch_load_file(path, &cfg, err);
    for (size_t i = 0; st == NP_OK && i < n_sets; i++)
        if ((st = arch_set(&cfg, sets[i], err)) != NP_OK)
            np_err_prefix(err, "--set %s", sets[i]);
    if (st == NP_OK)
        st = arch_validate(&cfg, err);
    if (st == NP_OK)
        *out = cfg;
    return st;
}
