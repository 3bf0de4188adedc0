/* traffic_ref.c — reading the BookSim 2 reference figures (see traffic.h, noc_ref_load) and
 * finding a study's saturation rate the way scripts/booksim_noc.sh finds BookSim's. */
#include "traffic.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parse.h"
#include "readfile.h"

#define NOC_REF_MAX_BYTES (16u << 20) /* a reference file: a few KiB of rows */

np_status noc_study_saturation(const noc_study_params *p, double rel_tol, double *rate,
                               np_err *err)
{
    noc_study_params q = *p;
    double lo = 0, hi = 1.0;
    while (hi - lo > rel_tol * hi) {
        q.rate = (lo + hi) / 2;
        noc_study_result r;
        if (noc_study_run(&q, &r, err) != NP_OK)
            return err->status;
        if (r.saturated)
            hi = q.rate;
        else
            lo = q.rate;
    }
    *rate = lo;
    return NP_OK;
}

void noc_ref_hotspots(uint32_t k, uint32_t out[4])
{
    uint32_t c = k / 2;
    out[0] = (c - 1) * k + c - 1;
    out[1] = (c - 1) * k + c;
    out[2] = c * k + c - 1;
    out[3] = c * k + c;
}

noc_study_params noc_ref_study(const noc_ref *ref, const noc_ref_point *pt, double rate,
                               uint32_t hot[4])
{
    noc_study_params p = {.mesh = ref->mesh, .traffic = pt->traffic, .rate = rate,
                          .packet_flits = pt->packet_flits, .warmup = 2000, .seed = 1};
    p.mesh.kx = p.mesh.ky = pt->k;
    double per_cycle = rate * pt->k * pt->k / pt->packet_flits; /* packets per cycle */
    double sat = 0; /* the configuration's saturation rate, for the points near it */
    for (size_t i = 0; i < ref->n; i++) {
        const noc_ref_point *q = &ref->pts[i];
        if (q->saturation && q->k == pt->k && q->traffic == pt->traffic &&
            q->packet_flits == pt->packet_flits)
            sat = q->offered;
    }
    uint64_t least = pt->saturation ? 20000 : 6000;
    double packets = sat > 0 && rate > 0.6 * sat ? 12000 : 4000;
    p.measure = per_cycle > 0 ? (uint64_t)(packets / per_cycle) : least;
    if (p.measure < least)
        p.measure = least;
    p.drain_max = 4 * p.measure;
    if (pt->traffic == NOC_TRAFFIC_HOTSPOT) {
        noc_ref_hotspots(pt->k, hot);
        p.hotspots = hot;
        p.n_hotspots = 4;
    }
    return p;
}

void noc_ref_free(noc_ref *ref)
{
    free(ref->pts);
    ref->pts = NULL;
    ref->n = 0;
}

/* BookSim's base configuration, as far as the mapping needs it. */
typedef struct bs_cfg {
    long vcs, buf, rd, va, sa, stp, stf, cd, speedup, wait_tail, iters;
    char router[16], vc_alloc[16], sw_alloc[16], routing[16], policy[16];
} bs_cfg;

/* One "#   key = value;" line of BookSim's base configuration into c: integers through the
 * one door (base/parse.h), in the ranges BookSim and the mapping accept, errors at
 * path:line:col. Other lines and keys are left alone. */
static np_status bs_line(bs_cfg *c, const char *line, const char *path, int ln, np_err *err)
{
    char key[64], val[64];
    int at = 0;
    if (sscanf(line, "#%*[ ]%63[a-z_] = %n%63[^;];", key, &at, val) != 2)
        return NP_OK;
    static const struct { const char *key; size_t off; long lo, hi; } ints[] = {
        {"num_vcs", offsetof(bs_cfg, vcs), 1, 64},
        {"vc_buf_size", offsetof(bs_cfg, buf), 1, 4096},
        {"routing_delay", offsetof(bs_cfg, rd), 0, 62},
        {"vc_alloc_delay", offsetof(bs_cfg, va), 0, 64},
        {"sw_alloc_delay", offsetof(bs_cfg, sa), 0, 64},
        {"st_prepare_delay", offsetof(bs_cfg, stp), 0, 64},
        {"st_final_delay", offsetof(bs_cfg, stf), 0, 64},
        {"credit_delay", offsetof(bs_cfg, cd), 0, 64},
        {"input_speedup", offsetof(bs_cfg, speedup), 0, 6},
        {"wait_for_tail_credit", offsetof(bs_cfg, wait_tail), 0, 1},
        {"alloc_iters", offsetof(bs_cfg, iters), 1, 64}};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        if (strcmp(key, ints[i].key) != 0)
            continue;
        int64_t v;
        if (np_parse_i64(NP_SRC_AT(path, ln, at + 1, key), val, ints[i].lo, ints[i].hi, &v,
                         err) != NP_OK)
            return err->status;
        *(long *)((char *)c + ints[i].off) = (long)v;
    }
    static const struct { const char *key; size_t off; } strs[] = {
        {"router", offsetof(bs_cfg, router)},         {"vc_allocator", offsetof(bs_cfg, vc_alloc)},
        {"sw_allocator", offsetof(bs_cfg, sw_alloc)}, {"routing_function", offsetof(bs_cfg, routing)},
        {"buffer_policy", offsetof(bs_cfg, policy)}};
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++)
        if (strcmp(key, strs[i].key) == 0)
            snprintf((char *)c + strs[i].off, 16, "%.15s", val);
    return NP_OK;
}

/* Maps c onto our router, or explains at path:line why it cannot. */
static np_status bs_map(const bs_cfg *c, mesh_params *m, const char *path, int line, np_err *err)
{
    const char *why = NULL;
    if (strcmp(c->router, "iq") || strcmp(c->routing, "dor"))
        why = "only BookSim's iq router with dor routing is modelled";
    else if (strcmp(c->vc_alloc, "islip") || strcmp(c->sw_alloc, "islip") || c->iters != 1)
        why = "only islip VC and switch allocators with alloc_iters = 1 are modelled";
    else if (c->va != 1 || c->sa != 1 || c->stp + c->stf != 1 || c->rd < 0 || c->rd > 62)
        why = "the router needs vc_alloc_delay = sw_alloc_delay = 1, st_prepare_delay + "
              "st_final_delay = 1 and routing_delay 0 .. 62";
    else if (strcmp(c->policy, "private"))
        why = "only private VC buffers are modelled";
    if (why)
        return np_err_at(err, NP_ERR_INCONSISTENT, path, line, 0, "%s", why);
    *m = (mesh_params){.vcs = (uint32_t)c->vcs, .buf_flits = (uint32_t)c->buf,
                       .router_cycles = (uint32_t)c->rd + 2, .link_cycles = 2,
                       .credit_delay = (uint32_t)c->cd, .input_speedup = (uint32_t)c->speedup,
                       .wait_tail_credit = c->wait_tail != 0};
    return NP_OK;
}

/* Splits a CSV line into at most n fields (empty fields allowed); returns the count. */
static int csv_split(char *s, char **f, int n)
{
    int k = 0;
    for (;;) {
        if (k == n)
            return n + 1;
        f[k++] = s;
        char *c = strchr(s, ',');
        if (!c)
            break;
        *c = '\0';
        s = c + 1;
    }
    s = f[k - 1];
    s[strcspn(s, "\r\n")] = '\0';
    return k;
}

/* A field of a row: empty (an unstable run's figures) is 0, else a finite real. */
static bool csv_num(const char *s, double *out)
{
    if (!*s) {
        *out = 0;
        return true;
    }
    np_err e;
    return np_parse_f64(NP_SRC_OPT(NULL), s, -1e300, 1e300, out, &e) == NP_OK;
}

np_status noc_ref_load(const char *path, noc_ref *ref, np_err *err)
{
    memset(ref, 0, sizeof *ref);
    char *text;
    size_t len;
    if (np_read_file(path, NOC_REF_MAX_BYTES, "a BookSim reference file", &text, &len, err) !=
        NP_OK)
        return err->status;
    np_status st = noc_ref_parse(text, len, path, ref, err);
    free(text);
    return st;
}

np_status noc_ref_parse(char *text, size_t len, const char *path, noc_ref *ref, np_err *err)
{
    memset(ref, 0, sizeof *ref);
    bs_cfg c = {.vcs = 16, .buf = 8, .rd = 1, .va = 1, .sa = 1, .stf = 1, .speedup = 1,
                .iters = 1, .router = "iq", .vc_alloc = "islip", .sw_alloc = "islip",
                .routing = "none", .policy = "private"}; /* BookSim's defaults */
    int ln = 0;
    bool header = false;
    size_t cap = 0;
    np_status st = NP_OK;
    for (char *next = text, *line; (line = next) && *line;) {
        ln++;
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        if (strlen(line) != (size_t)((next ? next - 1 : text + len) - line)) {
            st = np_err_at(err, NP_ERR_SYNTAX, path, ln, (int)strlen(line) + 1, "a NUL byte");
            goto out;
        }
        if (line[0] == '#') {
            if ((st = bs_line(&c, line, path, ln, err)) != NP_OK)
                goto out;
            sscanf(line, "# booksim commit: %63s", ref->commit);
            continue;
        }
        if (!header) {
            if (strncmp(line, "k,traffic,packet_flits,kind,offered,", 36) != 0) {
                st = np_err_at(err, NP_ERR_SYNTAX, path, ln, 1, "expected the header "
                               "'k,traffic,packet_flits,kind,offered,stable,...'");
                goto out;
            }
            header = true;
            if ((st = bs_map(&c, &ref->mesh, path, ln, err)) != NP_OK)
                goto out;
            continue;
        }
        char *f[10];
        if (csv_split(line, f, 10) != 10) {
            st = np_err_at(err, NP_ERR_SYNTAX, path, ln, 1, "expected 10 comma-separated "
                           "fields");
            goto out;
        }
        noc_ref_point p = {0};
        double k, pf, stable;
        np_err terr;
        if (!csv_num(f[0], &k) || k < 2 || k > 1024 || k != (uint32_t)k ||
            noc_traffic_parse(f[1], &p.traffic, &terr) != NP_OK || !csv_num(f[2], &pf) ||
            pf < 1 || pf > 1024 || pf != (uint32_t)pf ||
            (strcmp(f[3], "saturation") && strcmp(f[3], "latency")) ||
            !csv_num(f[4], &p.offered) || !(p.offered > 0 && p.offered <= 1) ||
            !csv_num(f[5], &stable) || (stable != 0 && stable != 1) ||
            !csv_num(f[6], &p.accepted) || !csv_num(f[7], &p.packet_latency) ||
            !csv_num(f[8], &p.network_latency) || !csv_num(f[9], &p.hops)) {
            st = np_err_at(err, NP_ERR_SYNTAX, path, ln, 1, "bad row: want k (2 .. 1024), a "
                           "traffic pattern, packet flits, saturation|latency, a rate in "
                           "(0, 1], stable 0|1 and numbers");
            goto out;
        }
        p.k = (uint32_t)k;
        p.packet_flits = (uint32_t)pf;
        p.saturation = strcmp(f[3], "saturation") == 0;
        p.stable = stable == 1;
        if (ref->n == cap) {
            cap = cap ? 2 * cap : 64;
            noc_ref_point *v = realloc(ref->pts, cap * sizeof *v);
            if (!v) {
                st = np_err_set(err, NP_ERR_NOMEM, "out of memory reading %s", path);
                goto out;
            }
            ref->pts = v;
        }
        ref->pts[ref->n++] = p;
    }
    if (!header)
        st = np_err_at(err, NP_ERR_SYNTAX, path, ln, 0, "no header line");
out:
    if (st != NP_OK)
        noc_ref_free(ref);
    return st;
}
