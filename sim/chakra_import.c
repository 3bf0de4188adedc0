/* chakra_import.c — `npusim replay DIR`: a Chakra trace directory (chakra.h's layout), each
 * rank's file decoded by chakra_decode.c, simulated on an npusim architecture by the run engine.
 * Each rank is a class of its own; compute nodes run on its compute engine in issue order;
 * collectives over their pg_name's communicator group, sends and recvs to and from their
 * peers, over the chip network. Nodes of other types (metadata, memory) run nothing: their
 * dependents wait for what they waited for. */
#include "chakra.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "run_impl.h"

#if NPUSIM_CHAKRA
#include "chakra_impl.h"

typedef struct ci_ctx {
    ci_cost cost;
    chakra_replay_result *out;
    /* communicator groups */
    char **pg_name;
    uint32_t *pg_gs;
    uint32_t n_pg;
} ci_ctx;

static np_status ci_oom(np_err *err)
{
    return np_err_set(err, NP_ERR_NOMEM, "out of memory (chakra trace)");
}

/* Appends x to the growing array *v (of *n, room for *cap); false when out of memory. */
static bool ci_push(uint32_t **v, uint64_t *n, uint64_t *cap, uint32_t x)
{
    if (*cap <= *n + 1) {
        uint64_t nc = *cap ? *cap * 2 : 1024;
        uint32_t *w = realloc(*v, nc * sizeof *w);
        if (!w)
            return false;
        *v = w, *cap = nc;
    }
    (*v)[(*n)++] = x;
    return true;
}

/* ---- The directory -------------------------------------------------------------------------- */

static np_status ci_read_file(const char *path, uint8_t **buf, size_t *n, np_err *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return np_err_set(err, NP_ERR_IO, "%s: %s", path, strerror(errno));
    size_t cap = 1 << 16, len = 0;
    uint8_t *b = malloc(cap);
    np_status st = b ? NP_OK : ci_oom(err);
    while (st == NP_OK) {
        if (len == cap) {
            if (cap >= CI_FILE_MAX) {
                st = np_err_set(err, NP_ERR_RANGE, "%s: larger than %zu MiB", path,
                                CI_FILE_MAX >> 20);
                break;
            }
            uint8_t *nb = realloc(b, cap * 2);
            if (!nb) {
                st = ci_oom(err);
                break;
            }
            b = nb, cap *= 2;
        }
        size_t got = fread(b + len, 1, cap - len, f);
        len += got;
        if (got == 0) {
            if (ferror(f))
                st = np_err_set(err, NP_ERR_IO, "%s: %s", path, strerror(errno));
            break;
        }
    }
    fclose(f);
    if (st != NP_OK) {
        free(b);
        return st;
    }
    *buf = b, *n = len;
    return NP_OK;
}

/* The trace's name: the one <name>.<digits>.et of dir with a rank 0, and its ranks (counted
 * from 0 without gaps). */
static np_status ci_scan(const char *dir, uint32_t max_ranks, char *name, size_t nn,
                         uint32_t *ranks, np_err *err)
{
    DIR *d = opendir(dir);
    if (!d)
        return np_err_set(err, NP_ERR_IO, "%s: %s", dir, strerror(errno));
    name[0] = 0;
    struct dirent *e;
    np_status st = NP_OK;
    while ((e = readdir(d)) && st == NP_OK) {
        size_t l = strlen(e->d_name);
        if (l > 5 && strcmp(e->d_name + l - 5, ".0.et") == 0) {
            if (name[0])
                st = np_err_set(err, NP_ERR_INCONSISTENT, "%s: two traces (%s and %.*s): one "
                                "trace per directory", dir, name, (int)(l - 5), e->d_name);
            else if (l - 5 >= nn)
                st = np_err_set(err, NP_ERR_RANGE, "%s: name too long", e->d_name);
            else
                snprintf(name, nn, "%.*s", (int)(l - 5), e->d_name);
        }
    }
    closedir(d);
    if (st == NP_OK && !name[0])
        st = np_err_set(err, NP_ERR_MISSING, "%s: no Chakra trace (no <name>.0.et)", dir);
    if (st != NP_OK)
        return st;
    size_t plen = strlen(dir) + nn + 32;
    char *path = malloc(plen);
    if (!path)
        return ci_oom(err);
    uint32_t r = 0;
    for (;; r++) {
        snprintf(path, plen, "%s/%s.%u.et", dir, name, r);
        FILE *f = fopen(path, "rb");
        if (!f)
            break;
        fclose(f);
        if (r >= max_ranks) {
            free(path);
            return np_err_set(err, NP_ERR_RANGE, "%s: more than %u ranks", dir, max_ranks);
        }
    }
    free(path);
    *ranks = r;
    return NP_OK;
}

/* <name>.comm_group.json: each group a groupset of one group. */
static np_status ci_groups(ci_ctx *c, run_graph *g, const char *path, uint32_t ranks,
                           np_err *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NP_OK; /* none: a collective then names a group that is not there */
    fclose(f);
    json_error_t je;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return np_err_at(err, NP_ERR_SYNTAX, path, je.line, je.column, "%s", je.text);
    np_status st = NP_OK;
    if (!json_is_object(root))
        st = np_err_at(err, NP_ERR_FORMAT, path, 1, 1, "expected an object {\"group\": [ranks]}");
    size_t n = st == NP_OK ? json_object_size(root) : 0;
    if (n > CI_GROUPS_MAX)
        st = np_err_set(err, NP_ERR_RANGE, "%s: more than %u groups", path, CI_GROUPS_MAX);
    if (st == NP_OK && n) {
        c->pg_name = calloc(n, sizeof *c->pg_name);
        c->pg_gs = calloc(n, sizeof *c->pg_gs);
        if (!c->pg_name || !c->pg_gs)
            st = ci_oom(err);
    }
    uint32_t *mem = st == NP_OK ? malloc((ranks ? ranks : 1) * sizeof *mem) : NULL;
    if (st == NP_OK && !mem)
        st = ci_oom(err);
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        if (st != NP_OK)
            break;
        size_t m = json_array_size(v);
        if (!json_is_array(v) || m == 0 || m > ranks) {
            st = np_err_set(err, NP_ERR_FORMAT, "%s: group \"%s\": expected a list of 1 .. %u "
                            "ranks", path, key, ranks);
            break;
        }
        for (size_t i = 0; i < m && st == NP_OK; i++) {
            json_t *x = json_array_get(v, i);
            if (!json_is_integer(x) || json_integer_value(x) < 0 ||
                json_integer_value(x) >= ranks)
                st = np_err_set(err, NP_ERR_RANGE, "%s: group \"%s\": member %zu is not a rank "
                                "of the trace (0 .. %u)", path, key, i, ranks - 1);
            else
                mem[i] = (uint32_t)json_integer_value(x);
        }
        char gname[RUN_NAME_MAX];
        snprintf(gname, sizeof gname, "pg %s", key);
        if (st == NP_OK &&
            run_graph_add_groupset(g, gname, 1, (uint32_t)m, mem, &c->pg_gs[c->n_pg], err) != NP_OK)
            np_err_prefix(err, "%s: group \"%s\"", path, key), st = err->status;
        if (st == NP_OK && !(c->pg_name[c->n_pg++] = strdup(key)))
            st = ci_oom(err);
    }
    free(mem);
    json_decref(root);
    return st;
}

/* The report's kind named by npusim_comm, else def. */
static run_comm_kind ci_comm_kind(const char *name, run_comm_kind def)
{
    for (int i = 0; name && i < RUN_COMM_COUNT; i++)
        if (strcmp(name, run_comm_kind_name((run_comm_kind)i)) == 0)
            return (run_comm_kind)i;
    return def;
}

static np_status ci_ktime(void *ctx, const run_kernel *k, run_ktime *out, np_err *err)
{
    (void)ctx, (void)err;
    memset(out, 0, sizeof *out);
    out->ps = strtoull(k->key + 2, NULL, 10); /* "d=<ps>" */
    return NP_OK;
}

/* Rank r's nodes as the tasks of class r. */
static np_status ci_tasks(ci_ctx *c, run_graph *g, const char *path, uint32_t r, ci_rank *k,
                          const uint32_t *order, np_err *err)
{
    uint32_t n = k->n;
    uint32_t *task = malloc((n ? n : 1) * sizeof *task);   /* node -> task, RUN_NONE: none */
    uint32_t *tdeps = malloc(((size_t)k->n_deps + 1) * sizeof *tdeps);
    /* a node that runs nothing passes on its own dependencies: kept at pass[node] */
    uint32_t *pass_off = calloc((size_t)n + 1, sizeof *pass_off), *pass = NULL;
    uint32_t *pass_len = calloc((size_t)n + 1, sizeof *pass_len);
    uint64_t n_pass = 0, cap_pass = 0;
    np_status st = task && tdeps && pass_off && pass_len ? NP_OK : ci_oom(err);
    for (uint32_t oi = 0; oi < n && st == NP_OK; oi++) {
        uint32_t i = order[oi];
        const ci_node *d = &k->nodes[i];
        uint32_t nd = 0;
        uint64_t p0 = n_pass;
        /* dependencies as tasks (through nodes that run nothing) */
        for (uint32_t j = 0; j < d->n_deps; j++) {
            uint32_t p = (uint32_t)k->deps[d->dep_off + j];
            if (task[p] != RUN_NONE)
                tdeps[nd++] = task[p];
            else
                for (uint32_t q = pass_off[p]; q < pass_off[p] + pass_len[p]; q++)
                    if (!ci_push(&pass, &n_pass, &cap_pass, pass[q])) {
                        st = ci_oom(err);
                        break;
                    }
        }
        if (st != NP_OK)
            break;
        run_task t = {.kind = RUN_TASK_COMPUTE};
        bool runs = true;
        switch (d->type) {
        case CHAKRA_PROTO_MSG__NODE_TYPE__COMP_NODE: {
            char key[32];
            snprintf(key, sizeof key, "d=%" PRIu64, d->ps);
            st = run_graph_add_kernel(g, &(run_kernel){.key = key, .flops = d->flops},
                                      &t.kernel, err);
            t.flags = d->launch ? RUN_TASK_LAUNCH : 0;
            c->out->compute++;
            c->out->timed_exact += d->how == CI_EXACT;
            c->out->timed_recorded += d->how == CI_RECORDED;
            c->out->timed_roofline += d->how == CI_ROOFLINE;
            break;
        }
        case CHAKRA_PROTO_MSG__NODE_TYPE__COMM_COLL_NODE: {
            uint32_t pg = 0;
            while (pg < c->n_pg && strcmp(c->pg_name[pg], d->pg))
                pg++;
            if (pg == c->n_pg) {
                st = np_err_set(err, NP_ERR_MISSING, "%s: node %u (id %" PRIu64 "): pg_name "
                                "\"%s\" is no group of the communicator groups", path, i,
                                d->id, d->pg);
                break;
            }
            const rg_groupset *gs = &g->gs[c->pg_gs[pg]];
            if (gs->group_of[r] == RUN_NONE) {
                st = np_err_set(err, NP_ERR_INCONSISTENT, "%s: node %u (id %" PRIu64 "): rank "
                                "%u is not in group \"%s\"", path, i, d->id, r, d->pg);
                break;
            }
            t.kind = RUN_TASK_COLL;
            t.op = ci_coll_op(d->comm_type);
            /* comm_size is a rank's input: an all-gather's or gather's npusim size (its
             * output) is the ranks' inputs together, unless npusim_bytes says it */
            t.bytes = (uint64_t)d->size;
            if (d->npusim_bytes)
                t.bytes = d->npusim_bytes;
            else if (t.op == COLL_OP_ALL_GATHER || t.op == COLL_OP_GATHER)
                t.bytes *= gs->size;
            t.groupset = c->pg_gs[pg];
            t.root = (uint32_t)d->root;
            t.elem_bytes = d->elem_bytes;
            t.algo = (coll_algo)d->algo;
            if (t.root >= gs->size)
                st = np_err_set(err, NP_ERR_RANGE, "%s: node %u (id %" PRIu64 "): root %u of a "
                                "group of %u", path, i, d->id, t.root, gs->size);
            t.stream = d->stream >= 0 ? (uint32_t)d->stream : c->pg_gs[pg] % (RUN_STREAMS - 4);
            t.comm = ci_comm_kind(d->comm, RUN_COMM_OTHER);
            c->out->colls++;
            break;
        }
        case CHAKRA_PROTO_MSG__NODE_TYPE__COMM_SEND_NODE:
        case CHAKRA_PROTO_MSG__NODE_TYPE__COMM_RECV_NODE: {
            bool send = d->type == CHAKRA_PROTO_MSG__NODE_TYPE__COMM_SEND_NODE;
            uint32_t me = (uint32_t)(send ? d->src : d->dst);
            uint32_t peer = (uint32_t)(send ? d->dst : d->src);
            if (me != r || peer >= run_graph_ranks(g) || peer == r) {
                st = np_err_set(err, NP_ERR_INCONSISTENT, "%s: node %u (id %" PRIu64 "): a %s "
                                "from %d to %d in rank %u's trace", path, i, d->id,
                                send ? "send" : "recv", d->src, d->dst, r);
                break;
            }
            t.kind = send ? RUN_TASK_SEND : RUN_TASK_RECV;
            t.peer_groupset = RUN_NONE;
            t.peer = (int32_t)peer;
            t.tag = (uint32_t)d->tag;
            t.bytes = (uint64_t)d->size;
            t.stream = d->stream >= 0 ? (uint32_t)d->stream
                                      : (uint32_t)(RUN_STREAMS - 4 + (send ? 0 : 2) + (peer > r ? 0 : 1));
            t.comm = ci_comm_kind(d->comm, RUN_COMM_PP);
            if (send)
                c->out->sends++;
            else
                c->out->recvs++;
            break;
        }
        default: runs = false;
        }
        if (st != NP_OK)
            break;
        if (!runs) { /* pass on its dependencies */
            task[i] = RUN_NONE;
            for (uint32_t j = 0; j < nd; j++)
                if (!ci_push(&pass, &n_pass, &cap_pass, tdeps[j])) {
                    st = ci_oom(err);
                    break;
                }
            pass_off[i] = (uint32_t)p0;
            pass_len[i] = (uint32_t)(n_pass - p0);
            continue;
        }
        /* the passed-on dependencies of skipped nodes, then the own ones */
        uint32_t *all = malloc(((n_pass - p0) + nd + 1) * sizeof *all);
        if (!all) {
            st = ci_oom(err);
            break;
        }
        uint32_t na = 0;
        for (uint64_t q = p0; q < n_pass; q++)
            all[na++] = pass[q];
        for (uint32_t j = 0; j < nd; j++)
            all[na++] = tdeps[j];
        n_pass = p0;
        t.deps = all;
        t.n_deps = na;
        st = run_graph_add_task(g, r, &t, &task[i], err);
        free(all);
        if (st != NP_OK)
            np_err_prefix(err, "%s: node %u (id %" PRIu64 ")", path, i, d->id);
    }
    free(task), free(tdeps), free(pass_off), free(pass_len), free(pass);
    return st;
}

np_status chakra_replay(const char *dir, const arch_config *cfg, const chakra_replay_opts *o,
                        chakra_replay_result *out, np_err *err)
{
    memset(out, 0, sizeof *out);
    chakra_replay_opts def = {0};
    if (!o)
        o = &def;
    ci_ctx c = {.cost = {.cfg = cfg, .scale = o->duration_scale > 0 ? o->duration_scale : 1,
                         .roofline = o->roofline},
                .out = out};
    char name[256];
    uint32_t ranks = 0;
    np_status st = ci_scan(dir, o->max_ranks ? o->max_ranks : 4096, name, sizeof name, &ranks,
                           err);
    run_graph *g = NULL;
    if (st == NP_OK)
        st = run_graph_create(ranks, &g, err);
    size_t plen = strlen(dir) + sizeof name + 32;
    char *path = malloc(plen);
    if (st == NP_OK && !path)
        st = ci_oom(err);
    if (st == NP_OK) {
        snprintf(path, plen, "%s/%s.comm_group.json", dir, name);
        st = ci_groups(&c, g, path, ranks, err);
    }
    for (uint32_t r = 0; st == NP_OK && r < ranks; r++) {
        char cname[RUN_NAME_MAX];
        uint32_t cls;
        snprintf(cname, sizeof cname, "rank %u", r);
        st = run_graph_add_class(g, cname, &cls, err);
        if (st == NP_OK)
            st = run_graph_set_class(g, r, cls, err);
        uint8_t *buf = NULL;
        size_t n = 0;
        snprintf(path, plen, "%s/%s.%u.et", dir, name, r);
        if (st == NP_OK)
            st = ci_read_file(path, &buf, &n, err);
        ci_rank k = {0};
        uint32_t *order = NULL;
        if (st == NP_OK)
            st = ci_decode(&c.cost, path, buf, n, &k, err);
        free(buf);
        if (st == NP_OK)
            st = ci_resolve(path, &k, &order, err);
        if (st == NP_OK && k.chip >= 0)
            st = run_graph_set_chip(g, r, (uint32_t)k.chip, err);
        if (st == NP_OK)
            st = ci_tasks(&c, g, path, cls, &k, order, err);
        out->nodes += k.n;
        free(order);
        ci_rank_free(&k);
    }
    free(path);
    for (uint32_t i = 0; i < c.n_pg; i++)
        free(c.pg_name[i]);
    free(c.pg_name);
    free(c.pg_gs);
    if (st == NP_OK)
        st = run_graph_finalize(g, err);
    if (st == NP_OK) {
        run_opts ro = {.steps = 1, .time_kernel = ci_ktime};
        st = run_simulate(g, cfg, NULL, &ro, &out->res, err);
    }
    out->ranks = ranks;
    run_graph_free(g);
    return st;
}

void chakra_replay_result_free(chakra_replay_result *r)
{
    if (r)
        run_result_free(r->res);
}

#else /* without protobuf-c */

static np_status ci_off(np_err *err)
{
    return np_err_set(err, NP_ERR_USAGE, "this npusim was built without Chakra traces "
                      "(apt-get install protobuf-c-compiler libprotobuf-c-dev, then rebuild)");
}

np_status chakra_replay(const char *dir, const arch_config *cfg, const chakra_replay_opts *o,
                        chakra_replay_result *out, np_err *err)
{
    (void)dir, (void)cfg, (void)o;
    memset(out, 0, sizeof *out);
    return ci_off(err);
}

void chakra_replay_result_free(chakra_replay_result *r) { (void)r; }

#endif
