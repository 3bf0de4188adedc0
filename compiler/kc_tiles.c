/* kc_tiles.c — the tiling cache (see kc_tiles.h). */
#include "kc_tiles.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "readfile.h"

#define KC_TILE_CACHE_MAX_BYTES (64u << 20) /* a cache of many thousand tilings */

typedef struct kc_tile_entry {
    char *key;
    kc_tiling t;
    uint64_t cycles;
} kc_tile_entry;

struct kc_tile_cache {
    kc_tile_entry *e; /* sorted by key */
    size_t n, cap;
};

kc_tile_cache *kc_tile_cache_new(void) { return calloc(1, sizeof(kc_tile_cache)); }

void kc_tile_cache_free(kc_tile_cache *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->n; i++) {
        free(c->e[i].key);
        for (unsigned a = 0; a < c->e[i].t.n_attrs; a++)
            free((char *)(uintptr_t)c->e[i].t.attrs[a].name);
    }
    free(c->e);
    free(c);
}

size_t kc_tile_cache_size(const kc_tile_cache *c) { return c->n; }

/* The index of key, or where it would go (*found false). */
static size_t find(const kc_tile_cache *c, const char *key, bool *found)
{
    size_t lo = 0, hi = c->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int cmp = strcmp(c->e[mid].key, key);
        if (cmp == 0) {
            *found = true;
            return mid;
        }
        if (cmp < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = false;
    return lo;
}

bool kc_tile_cache_get(const kc_tile_cache *c, const char *key, kc_tiling *out, uint64_t *cycles)
{
    bool found;
    size_t i = find(c, key, &found);
    if (!found)
        return false;
    *out = c->e[i].t;
    if (cycles)
        *cycles = c->e[i].cycles;
    return true;
}

np_status kc_tile_cache_put(kc_tile_cache *c, const char *key, const kc_tiling *t,
                            uint64_t cycles, np_err *err)
{
    bool found;
    size_t i = find(c, key, &found);
    kc_tiling copy = *t;
    if (copy.n_attrs > KC_TILING_MAX_ATTRS)
        copy.n_attrs = KC_TILING_MAX_ATTRS;
    for (unsigned a = 0; a < copy.n_attrs; a++)
        if (!(copy.attrs[a].name = strdup(t->attrs[a].name))) {
            for (unsigned b = 0; b < a; b++)
                free((char *)(uintptr_t)copy.attrs[b].name);
            return np_err_set(err, NP_ERR_NOMEM, "out of memory");
        }
    if (found) {
        for (unsigned a = 0; a < c->e[i].t.n_attrs; a++)
            free((char *)(uintptr_t)c->e[i].t.attrs[a].name);
        c->e[i].t = copy;
        c->e[i].cycles = cycles;
        return NP_OK;
    }
    char *k = strdup(key);
    if (c->n == c->cap) {
        size_t nc = c->cap ? 2 * c->cap : 16;
        kc_tile_entry *ne = realloc(c->e, nc * sizeof *ne);
        if (ne)
            c->e = ne, c->cap = nc;
    }
    if (!k || c->n == c->cap) {
        free(k);
        for (unsigned a = 0; a < copy.n_attrs; a++)
            free((char *)(uintptr_t)copy.attrs[a].name);
        return np_err_set(err, NP_ERR_NOMEM, "out of memory");
    }
    memmove(&c->e[i + 1], &c->e[i], (c->n - i) * sizeof *c->e);
    c->e[i] = (kc_tile_entry){k, copy, cycles};
    c->n++;
    return NP_OK;
}

np_status kc_tile_cache_load(const char *path, kc_tile_cache **out, np_err *err)
{
    *out = NULL;
    kc_tile_cache *c = kc_tile_cache_new();
    if (!c)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory");
    if (access(path, F_OK) != 0 && errno == ENOENT) { /* a new cache */
        *out = c;
        return NP_OK;
    }
    char *text; /* through base/readfile.h: no directory or device, at most the cap */
    size_t len;
    if (np_read_file(path, KC_TILE_CACHE_MAX_BYTES, "a tiling cache", &text, &len, err) !=
        NP_OK) {
        kc_tile_cache_free(c);
        return err->status;
    }
    json_error_t je;
    json_t *j = json_loadb(text, len, 0, &je);
    free(text);
    np_status st = NP_OK;
    json_t *list = j ? json_object_get(j, "tilings") : NULL;
    if (!j)
        st = np_err_at(err, NP_ERR_FORMAT, path, je.line, je.column, "%s", je.text);
    else if (json_integer_value(json_object_get(j, "version")) != 1 || !json_is_array(list))
        st = np_err_at(err, NP_ERR_FORMAT, path, 0, 0, "not a tiling cache (version 1, "
                       "\"tilings\": [...])");
    for (size_t i = 0; st == NP_OK && i < json_array_size(list); i++) {
        json_t *e = json_array_get(list, i), *attrs = json_object_get(e, "attrs");
        const char *key = json_string_value(json_object_get(e, "key"));
        json_t *cyc = json_object_get(e, "cycles");
        if (!key || !json_is_object(attrs) || json_object_size(attrs) > KC_TILING_MAX_ATTRS ||
            !json_is_integer(cyc)) {
            st = np_err_at(err, NP_ERR_FORMAT, path, 0, 0, "tiling %zu: expected {\"key\", "
                           "\"attrs\" (at most %d integers), \"cycles\"}", i,
                           KC_TILING_MAX_ATTRS);
            break;
        }
        kc_tiling t = {0};
        const char *name;
        json_t *v;
        json_object_foreach(attrs, name, v) {
            if (!json_is_integer(v)) {
                st = np_err_at(err, NP_ERR_FORMAT, path, 0, 0, "tiling %zu: attribute '%s' is "
                               "not an integer", i, name);
                break;
            }
            t.attrs[t.n_attrs++] = KC_INT(name, json_integer_value(v));
        }
        if (st == NP_OK)
            st = kc_tile_cache_put(c, key, &t, (uint64_t)json_integer_value(cyc), err);
    }
    json_decref(j);
    if (st != NP_OK) {
        kc_tile_cache_free(c);
        return st;
    }
    *out = c;
    return NP_OK;
}

np_status kc_tile_cache_save(const kc_tile_cache *c, const char *path, np_err *err)
{
    json_t *j = json_object(), *list = json_array();
    json_object_set_new(j, "version", json_integer(1));
    for (size_t i = 0; i < c->n; i++) {
        json_t *e = json_object(), *attrs = json_object();
        json_object_set_new(e, "key", json_string(c->e[i].key));
        for (unsigned a = 0; a < c->e[i].t.n_attrs; a++)
            json_object_set_new(attrs, c->e[i].t.attrs[a].name,
                                json_integer(c->e[i].t.attrs[a].i));
        json_object_set_new(e, "attrs", attrs);
        json_object_set_new(e, "cycles", json_integer((json_int_t)c->e[i].cycles));
        json_array_append_new(list, e);
    }
    json_object_set_new(j, "tilings", list);
    int rc = json_dump_file(j, path, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
    json_decref(j);
    if (rc != 0)
        return np_err_at(err, NP_ERR_IO, path, 0, 0, "cannot write the tiling cache");
    return NP_OK;
}

void kc_arch_fingerprint(const arch_config *cfg, char out[17])
{
    json_t *j = arch_to_json(cfg);
    char *s = j ? json_dumps(j, JSON_SORT_KEYS | JSON_COMPACT) : NULL;
    uint64_t h = 1469598103934665603ull;
    for (const char *p = s ? s : ""; *p; p++)
        h = (h ^ (uint8_t)*p) * 1099511628211ull;
    snprintf(out, 17, "%016" PRIx64, h);
    free(s);
    json_decref(j);
}

/* Appends "name[s0,s1..:st0,st1..]dtype" for t. */
static size_t put_tensor(char *buf, size_t n, size_t len, const char *name, const kc_tensor *t)
{
    len += (size_t)snprintf(buf + (len < n ? len : n), len < n ? n - len : 0, " %s=", name);
    for (int d = 0; d < t->ndim; d++)
        len += (size_t)snprintf(buf + (len < n ? len : n), len < n ? n - len : 0, "%s%" PRId64,
                                d ? "x" : "", t->shape[d]);
    len += (size_t)snprintf(buf + (len < n ? len : n), len < n ? n - len : 0, "/");
    for (int d = 0; d < t->ndim; d++)
        len += (size_t)snprintf(buf + (len < n ? len : n), len < n ? n - len : 0, "%s%" PRId64,
                                d ? "," : "", t->stride[d]);
    len += (size_t)snprintf(buf + (len < n ? len : n), len < n ? n - len : 0, "/%s",
                            nn_dtype_name(t->dtype));
    return len;
}

char *kc_tile_key(const arch_config *cfg, const kc_kernel *k, char *buf, size_t n)
{
    char fp[17];
    kc_arch_fingerprint(cfg, fp);
    size_t len = (size_t)snprintf(buf, n, "%s arch=%s cores=%u", nn_op_name(k->op), fp,
                                  k->place.n_cores ? k->place.n_cores : 1);
    for (int i = 0; i < k->n_in; i++)
        len = put_tensor(buf, n, len, "in", &k->in[i]);
    for (int i = 0; i < k->n_out; i++)
        len = put_tensor(buf, n, len, "out", &k->out[i]);
    for (int i = 0; i < k->n_epi; i++) {
        len += (size_t)snprintf(buf + (len < n ? len : n), len < n ? n - len : 0, " epi=%s",
                                nn_op_name(k->epi[i].op));
        if (k->epi[i].has_arg)
            len = put_tensor(buf, n, len, "arg", &k->epi[i].arg);
    }
    /* attributes that are not tiling attributes change the kernel too */
    const kc_kernel_def *d = kc_kernel_find(k->op);
    for (int i = 0; i < k->n_attrs; i++)
        if (!kc_attr_is_tiling(d, k->attrs[i].name))
            len += (size_t)snprintf(buf + (len < n ? len : n), len < n ? n - len : 0,
                                    " %s=%" PRId64 "/%g", k->attrs[i].name, k->attrs[i].i,
                                    k->attrs[i].f);
    if (len >= n && n)
        buf[0] = '\0';
    return buf;
}
