/* mxu_topo.c — SCALE-Sim topology CSV reader (see mxu_topo.h). */
#include "mxu_topo.h"

#include "parse.h"
#include "readfile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOPO_MAX_FIELDS 10

static np_status topo_add(mxu_topology *t, size_t *cap, const char *name, uint64_t m,
                          uint64_t n, uint64_t k, const mxu_conv *conv, const char *path,
                          int line, np_err *err)
{
    if (t->n == MXU_TOPO_MAX_LAYERS)
        return np_err_at(err, NP_ERR_RANGE, path, line, 1, "more than %d layers",
                         MXU_TOPO_MAX_LAYERS);
    if (t->n == *cap) {
        size_t nc = *cap ? 2 * *cap : 16;
        mxu_layer *nl = realloc(t->layers, nc * sizeof *nl);
        if (!nl)
            return np_err_set(err, NP_ERR_NOMEM, "out of memory reading %s", path);
        t->layers = nl;
        *cap = nc;
    }
    mxu_layer *l = &t->layers[t->n++];
    snprintf(l->name, sizeof l->name, "%s", name);
    l->m = m, l->n = n, l->k = k;
    l->is_conv = conv != NULL;
    l->conv = conv ? *conv : (mxu_conv){0};
    return NP_OK;
}

/* One line (without its newline) into the topology. */
static np_status topo_line(mxu_topology *t, size_t *cap, char *s, const char *path, int line,
                           np_err *err)
{
    char *field[TOPO_MAX_FIELDS + 1];
    int col[TOPO_MAX_FIELDS + 1];
    int nf = 0;
    char *p = s;
    for (;;) {
        if (nf > TOPO_MAX_FIELDS)
            return np_err_at(err, NP_ERR_SYNTAX, path, line, (int)(p - s) + 1,
                             "too many fields (a layer has 4, 8 or 9)");
        while (*p == ' ' || *p == '\t')
            p++;
        field[nf] = p;
        col[nf] = (int)(p - s) + 1;
        nf++;
        char *comma = strchr(p, ',');
        char *end = comma ? comma : p + strlen(p);
        char *q = end;
        while (q > p && (q[-1] == ' ' || q[-1] == '\t' || q[-1] == '\r'))
            q--;
        *q = '\0';
        if (!comma)
            break;
        p = comma + 1;
    }
    if (nf > 1 && field[nf - 1][0] == '\0')
        nf--; /* trailing comma */
    if (nf != 4 && nf != 8 && nf != 9)
        return np_err_at(err, NP_ERR_SYNTAX, path, line, 1,
                         "expected 4 fields (name, M, N, K) or 8-9 (name, H, W, R, S, C, "
                         "filters, stride[, stride_w]), found %d", nf);
    /* a depthwise layer's name gets "Channel_<i>" (at most 14 bytes) appended */
    bool dw = nf != 4 && strstr(field[0], "DP") != NULL;
    if (np_parse_name(NP_SRC_AT(path, line, col[0], "layer name"), field[0],
                      MXU_TOPO_NAME_MAX - 1 - (dw ? 14 : 0), err) != NP_OK)
        return err->status;
    static const char *const conv_names[] = {"", "H", "W", "R", "S", "C", "filters", "stride",
                                             "stride_w"};
    static const char *const gemm_names[] = {"", "M", "N", "K"};
    uint64_t v[TOPO_MAX_FIELDS] = {0};
    for (int i = 1; i < nf; i++)
        if (np_parse_u64(NP_SRC_AT(path, line, col[i], nf == 4 ? gemm_names[i] : conv_names[i]),
                         field[i], 1, 1ull << 32, &v[i], err) != NP_OK)
            return err->status;
    if (nf == 4) /* name, M, N, K */
        return topo_add(t, cap, field[0], v[1], v[2], v[3], NULL, path, line, err);
    mxu_conv c = {v[1], v[2], v[3], v[4], v[5], v[6], v[7], nf == 9 ? v[8] : v[7]};
    uint64_t m, n, k;
    uint64_t copies = dw ? c.channels : 1;
    if (dw)
        c.channels = 1;
    if (mxu_conv_gemm(&c, &m, &n, &k, err) != NP_OK) {
        char why[NP_ERR_MSG_MAX];
        snprintf(why, sizeof why, "%s", err->msg);
        return np_err_at(err, NP_ERR_RANGE, path, line, 1, "%s", why);
    }
    if (copies > MXU_TOPO_MAX_LAYERS)
        return np_err_at(err, NP_ERR_RANGE, path, line, col[5], "more than %d layers",
                         MXU_TOPO_MAX_LAYERS);
    for (uint64_t i = 0; i < copies; i++) {
        char name[MXU_TOPO_NAME_MAX + 32];
        if (dw)
            snprintf(name, sizeof name, "%sChannel_%llu", field[0], (unsigned long long)i);
        else
            snprintf(name, sizeof name, "%s", field[0]);
        if (topo_add(t, cap, name, m, n, k, &c, path, line, err) != NP_OK)
            return err->status;
    }
    return NP_OK;
}

np_status mxu_topology_parse(const char *text, size_t len, const char *path, mxu_topology *out,
                             np_err *err)
{
    mxu_topology t = {0};
    size_t cap = 0;
    char buf[1024];
    int line = 0;
    size_t i = 0;
    while (i < len) {
        size_t j = i;
        while (j < len && text[j] != '\n')
            j++;
        line++;
        size_t n = j - i;
        if (line > 1) {
            if (n >= sizeof buf) {
                mxu_topology_free(&t);
                return np_err_at(err, NP_ERR_SYNTAX, path, line, 1, "line longer than %zu bytes",
                                 sizeof buf - 1);
            }
            memcpy(buf, text + i, n);
            buf[n] = '\0';
            bool blank = true;
            for (size_t q = 0; q < n; q++)
                blank = blank && (buf[q] == ' ' || buf[q] == '\t' || buf[q] == '\r');
            if (!blank && topo_line(&t, &cap, buf, path, line, err) != NP_OK) {
                mxu_topology_free(&t);
                return err->status;
            }
        }
        i = j + 1;
    }
    if (!t.n)
        return np_err_at(err, NP_ERR_MISSING, path, 0, 0, "no layers (the first line is the header)");
    *out = t;
    return NP_OK;
}

np_status mxu_topology_load(const char *path, mxu_topology *out, np_err *err)
{
    char *text;
    size_t len;
    if (np_read_file(path, MXU_TOPO_MAX_FILE_BYTES, "a topology file", &text, &len, err) != NP_OK)
        return err->status;
    np_status st = mxu_topology_parse(text, len, path, out, err);
    free(text);
    return st;
}

void mxu_topology_free(mxu_topology *t)
{
    free(t->layers);
    t->layers = NULL;
    t->n = 0;
}
