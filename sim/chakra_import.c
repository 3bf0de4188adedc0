/* chakra_import.c — `npusim replay DIR`: a Chakra trace directory (chakra.h's layout) decoded
 * through protobuf-c and simulated on an npusim architecture by the run engine. Each rank is a
 * class of its own; compute nodes run on its compute engine in node order, costed by
 * npusim_duration_ps, else duration_micros (x the scale), else num_ops and tensor_size on the
 * chip's roofline; collectives over their pg_name's communicator group, sends and recvs to and
 * from their peers, over the chip network. Nodes of other types (metadata, memory) run
 * nothing: their dependents wait for what they waited for. */
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
#include "et_def.pb-c.h"

#define CI_FILE_MAX ((size_t)1 << 30) /* a rank's trace: at most 1 GiB */
#define CI_NODES_MAX (1u << 26)       /* nodes of one rank */
#define CI_GROUPS_MAX 65536           /* communicator groups */

enum { CI_EXACT, CI_RECORDED, CI_ROOFLINE };

typedef struct ci_node {
    uint64_t id;
    int type;
    uint64_t ps;          /* compute: its duration */
    int how;              /* compute: CI_* */
    double flops;
    bool launch;
    int32_t stream;       /* -1: not given */
    int comm;             /* run_comm_kind, -1: not given */
    int64_t comm_type;
    int64_t size;
    uint32_t elem_bytes;  /* 0: the engine's default */
    int algo;             /* coll_algo */
    const char *pg;       /* into the message (kept) */
    int32_t src, dst, tag, root;
    uint32_t dep_off, n_deps; /* into the rank's deps: node ids, then node indices */
} ci_node;

typedef struct ci_rank {
    ProtobufCMessage **msgs; /* kept until the graph is built (the nodes' strings) */
    uint32_t n_msgs;
    ci_node *nodes;
    uint32_t n;
    uint64_t *deps;
    uint64_t n_deps;
    int64_t chip;            /* GlobalMetadata's npusim_chip, -1: not given */
} ci_rank;

typedef struct ci_ctx {
    const arch_config *cfg;
    double scale;
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

static const ChakraProtoMsg__AttributeProto *ci_attr(const ChakraProtoMsg__Node *m,
                                                     const char *name)
{
    for (size_t i = 0; i < m->n_attr; i++)
        if (m->attr[i]->name && strcmp(m->attr[i]->name, name) == 0)
            return m->attr[i];
    return NULL;
}

/* An integer attribute of any of the schema's integer forms; false when absent or not one. */
static bool ci_int(const ChakraProtoMsg__Node *m, const char *name, int64_t *v)
{
    const ChakraProtoMsg__AttributeProto *a = ci_attr(m, name);
    if (!a)
        return false;
    switch (a->value_case) {
    case CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_INT32_VAL: *v = a->int32_val; return true;
    case CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_INT64_VAL: *v = a->int64_val; return true;
    case CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_UINT32_VAL: *v = a->uint32_val; return true;
    case CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_UINT64_VAL:
        *v = a->uint64_val > INT64_MAX ? INT64_MAX : (int64_t)a->uint64_val;
        return true;
    case CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_SINT32_VAL: *v = a->sint32_val; return true;
    case CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_SINT64_VAL: *v = a->sint64_val; return true;
    case CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_BOOL_VAL: *v = a->bool_val; return true;
    default: return false;
    }
}

static const char *ci_str(const ChakraProtoMsg__Node *m, const char *name)
{
    const ChakraProtoMsg__AttributeProto *a = ci_attr(m, name);
    return a && a->value_case == CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_STRING_VAL
               ? a->string_val : NULL;
}

static coll_op ci_coll_op(int64_t t)
{
    switch (t) {
    case CHAKRA_PROTO_MSG__COLLECTIVE_COMM_TYPE__ALL_REDUCE: return COLL_OP_ALL_REDUCE;
    case CHAKRA_PROTO_MSG__COLLECTIVE_COMM_TYPE__REDUCE: return COLL_OP_REDUCE;
    case CHAKRA_PROTO_MSG__COLLECTIVE_COMM_TYPE__ALL_GATHER: return COLL_OP_ALL_GATHER;
    case CHAKRA_PROTO_MSG__COLLECTIVE_COMM_TYPE__GATHER: return COLL_OP_GATHER;
    case CHAKRA_PROTO_MSG__COLLECTIVE_COMM_TYPE__SCATTER: return COLL_OP_SCATTER;
    case CHAKRA_PROTO_MSG__COLLECTIVE_COMM_TYPE__BROADCAST: return COLL_OP_BROADCAST;
    case CHAKRA_PROTO_MSG__COLLECTIVE_COMM_TYPE__ALL_TO_ALL: return COLL_OP_ALL_TO_ALL;
    case CHAKRA_PROTO_MSG__COLLECTIVE_COMM_TYPE__REDUCE_SCATTER:
    case CHAKRA_PROTO_MSG__COLLECTIVE_COMM_TYPE__REDUCE_SCATTER_BLOCK:
        return COLL_OP_REDUCE_SCATTER;
    default: return COLL_OP_COUNT;
    }
}

/* ---- Decoding one file ---------------------------------------------------------------------- */

/* The next length-prefixed message of buf at *pos: NP_OK with *len, or NP_ERR_FORMAT. */
static np_status ci_frame(const char *path, const uint8_t *buf, size_t n, size_t *pos,
                          uint64_t node, size_t *len, np_err *err)
{
    uint64_t v = 0;
    for (int k = 0;; k++) {
        if (*pos >= n)
            return np_err_set(err, NP_ERR_FORMAT, "%s: node %" PRIu64 ": truncated length "
                              "(the file ends inside a varint)", path, node);
        if (k == 5)
            return np_err_set(err, NP_ERR_FORMAT, "%s: node %" PRIu64 ": bad varint (a "
                              "message length of more than 5 bytes)", path, node);
        uint8_t b = buf[(*pos)++];
        v |= (uint64_t)(b & 0x7f) << (7 * k);
        if (!(b & 0x80))
            break;
    }
    if (v > UINT32_MAX)
        return np_err_set(err, NP_ERR_FORMAT, "%s: node %" PRIu64 ": bad varint (a length of "
                          "%" PRIu64 " bytes)", path, node, v);
    if (v > n - *pos)
        return np_err_set(err, NP_ERR_FORMAT, "%s: node %" PRIu64 ": truncated (%" PRIu64
                          " bytes announced, %zu left)", path, node, v, n - *pos);
    *len = (size_t)v;
    return NP_OK;
}

static void ci_rank_free(ci_rank *k)
{
    for (uint32_t i = 0; i < k->n_msgs; i++)
        if (k->msgs[i])
            protobuf_c_message_free_unpacked(k->msgs[i], NULL);
    free(k->msgs);
    free(k->nodes);
    free(k->deps);
    memset(k, 0, sizeof *k);
}

/* One node message into k->nodes[k->n]. */
static np_status ci_node_read(const ci_ctx *c, const char *path, const ChakraProtoMsg__Node *m,
                              ci_rank *k, np_err *err)
{
    ci_node *d = &k->nodes[k->n];
    memset(d, 0, sizeof *d);
    d->id = m->id;
    d->type = m->type;
    d->stream = -1;
    d->comm = -1;
    int64_t v;
    const char *s;
    uint32_t idx = k->n;
    if (ci_int(m, "npusim_stream", &v)) {
        if (v < 0 || v >= RUN_STREAMS)
            return np_err_set(err, NP_ERR_RANGE, "%s: node %u (id %" PRIu64 "): npusim_stream "
                              "%" PRId64 " (0 .. %d)", path, idx, m->id, v, RUN_STREAMS - 1);
        d->stream = (int32_t)v;
    }
    if ((s = ci_str(m, "npusim_comm")))
        for (int i = 0; i < RUN_COMM_COUNT; i++)
            if (strcmp(s, run_comm_kind_name((run_comm_kind)i)) == 0)
                d->comm = i;
    switch (m->type) {
    case CHAKRA_PROTO_MSG__NODE_TYPE__COMP_NODE: {
        int64_t ps = 0, ops = 0, bytes = 0;
        bool has_ops = ci_int(m, "num_ops", &ops), has_bytes = ci_int(m, "tensor_size", &bytes);
        d->flops = ops > 0 ? (double)ops : 0;
        if (ci_int(m, "npusim_duration_ps", &ps) && ps >= 0) {
            d->ps = (uint64_t)ps;
            d->how = CI_EXACT;
        } else if (m->duration_micros > 0 || !(has_ops || has_bytes)) {
            double t = (double)m->duration_micros * 1e6 * c->scale;
            if (t > 1e21)
                return np_err_set(err, NP_ERR_RANGE, "%s: node %u (id %" PRIu64 "): duration "
                                  "%" PRIu64 " us is too long", path, idx, m->id,
                                  m->duration_micros);
            d->ps = (uint64_t)(t + 0.5);
            d->how = CI_RECORDED;
        } else { /* the chip's roofline: the longer of its FLOPs and its bytes */
            double peak = arch_chip_peak_flops(c->cfg, c->cfg->core.macs_per_pe_bf16);
            double tf = peak > 0 ? d->flops / peak : 0;
            double tb = bytes > 0 ? (double)bytes / (c->cfg->chip.hbm_gb_per_s * 1e9) : 0;
            d->ps = (uint64_t)((tf > tb ? tf : tb) * 1e12 + 0.5);
            d->how = CI_ROOFLINE;
        }
        d->launch = ci_int(m, "npusim_launch", &v) && v;
        break;
    }
    case CHAKRA_PROTO_MSG__NODE_TYPE__COMM_COLL_NODE:
        if (!ci_int(m, "comm_type", &d->comm_type) || ci_coll_op(d->comm_type) == COLL_OP_COUNT)
            return np_err_set(err, NP_ERR_FORMAT, "%s: node %u (id %" PRIu64 "): collective "
                              "without a known comm_type", path, idx, m->id);
        if (!ci_int(m, "comm_size", &d->size) || d->size < 0)
            return np_err_set(err, NP_ERR_FORMAT, "%s: node %u (id %" PRIu64 "): collective "
                              "without comm_size", path, idx, m->id);
        if (!(d->pg = ci_str(m, "pg_name")))
            return np_err_set(err, NP_ERR_MISSING, "%s: node %u (id %" PRIu64 "): collective "
                              "without pg_name (its communicator group)", path, idx, m->id);
        d->root = ci_int(m, "npusim_root", &v) ? (int32_t)v : 0;
        if (ci_int(m, "npusim_elem_bytes", &v)) {
            if (v < 1 || v > 64)
                return np_err_set(err, NP_ERR_RANGE, "%s: node %u (id %" PRIu64 "): "
                                  "npusim_elem_bytes %" PRId64 " (1 .. 64)", path, idx, m->id, v);
            d->elem_bytes = (uint32_t)v;
        }
        d->algo = COLL_ALGO_AUTO;
        if ((s = ci_str(m, "npusim_algo"))) {
            int a = 0;
            while (a < COLL_ALGO_COUNT && strcmp(coll_algo_name((coll_algo)a), s))
                a++;
            if (a == COLL_ALGO_COUNT)
                return np_err_set(err, NP_ERR_UNKNOWN_KEY, "%s: node %u (id %" PRIu64 "): "
                                  "npusim_algo '%s' is no algorithm of npusim's", path, idx,
                                  m->id, s);
            d->algo = a;
        }
        break;
    case CHAKRA_PROTO_MSG__NODE_TYPE__COMM_SEND_NODE:
    case CHAKRA_PROTO_MSG__NODE_TYPE__COMM_RECV_NODE: {
        int64_t a, b, t = 0;
        if (!ci_int(m, "comm_src", &a) || !ci_int(m, "comm_dst", &b) ||
            !ci_int(m, "comm_size", &d->size) || d->size < 0)
            return np_err_set(err, NP_ERR_FORMAT, "%s: node %u (id %" PRIu64 "): %s without "
                              "comm_src, comm_dst or comm_size", path, idx, m->id,
                              m->type == CHAKRA_PROTO_MSG__NODE_TYPE__COMM_SEND_NODE ? "send"
                                                                                      : "recv");
        ci_int(m, "comm_tag", &t);
        if (a < 0 || b < 0 || a > INT32_MAX || b > INT32_MAX || t < 0 || t > INT32_MAX)
            return np_err_set(err, NP_ERR_RANGE, "%s: node %u (id %" PRIu64 "): comm_src, "
                              "comm_dst or comm_tag out of range", path, idx, m->id);
        d->src = (int32_t)a, d->dst = (int32_t)b, d->tag = (int32_t)t;
        break;
    }
    default: break; /* runs nothing */
    }
    if (m->n_data_deps + m->n_ctrl_deps > UINT32_MAX - k->n_deps)
        return np_err_set(err, NP_ERR_RANGE, "%s: too many dependencies", path);
    uint64_t *nd = realloc(k->deps, (k->n_deps + m->n_data_deps + m->n_ctrl_deps + 1) *
                                        sizeof *nd);
    if (!nd)
        return ci_oom(err);
    k->deps = nd;
    d->dep_off = (uint32_t)k->n_deps;
    for (size_t i = 0; i < m->n_data_deps; i++)
        k->deps[k->n_deps++] = m->data_deps[i];
    for (size_t i = 0; i < m->n_ctrl_deps; i++)
        k->deps[k->n_deps++] = m->ctrl_deps[i];
    d->n_deps = (uint32_t)(k->n_deps - d->dep_off);
    k->n++;
    return NP_OK;
}

static np_status ci_decode(const ci_ctx *c, const char *path, const uint8_t *buf, size_t n,
                           ci_rank *k, np_err *err)
{
    size_t pos = 0, len;
    uint32_t cap = 0;
    np_err fe;
    if (ci_frame(path, buf, n, &pos, 0, &len, &fe) != NP_OK)
        return np_err_set(err, NP_ERR_FORMAT, "%s: not a Chakra trace (no GlobalMetadata "
                          "message first)", path);
    ChakraProtoMsg__GlobalMetadata *md =
        chakra_proto_msg__global_metadata__unpack(NULL, len, buf + pos);
    if (!md)
        return np_err_set(err, NP_ERR_FORMAT, "%s: not a Chakra trace (its first message is "
                          "not a GlobalMetadata)", path);
    k->chip = -1;
    for (size_t i = 0; i < md->n_attr; i++)
        if (md->attr[i]->name && strcmp(md->attr[i]->name, "npusim_chip") == 0 &&
            md->attr[i]->value_case == CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_UINT64_VAL &&
            md->attr[i]->uint64_val < (1u << 24))
            k->chip = (int64_t)md->attr[i]->uint64_val;
    chakra_proto_msg__global_metadata__free_unpacked(md, NULL);
    pos += len;
    while (pos < n) {
        if (k->n >= CI_NODES_MAX)
            return np_err_set(err, NP_ERR_RANGE, "%s: more than %u nodes", path, CI_NODES_MAX);
        if (ci_frame(path, buf, n, &pos, k->n, &len, err) != NP_OK)
            return err->status;
        ChakraProtoMsg__Node *m = chakra_proto_msg__node__unpack(NULL, len, buf + pos);
        if (!m)
            return np_err_set(err, NP_ERR_FORMAT, "%s: node %u: not a Chakra Node message "
                              "(%zu bytes at offset %zu)", path, k->n, len, pos);
        pos += len;
        if (k->n == cap) {
            cap = cap ? cap * 2 : 256;
            ci_node *nn = realloc(k->nodes, cap * sizeof *nn);
            ProtobufCMessage **nm = realloc(k->msgs, cap * sizeof *nm);
            if (nn)
                k->nodes = nn;
            if (nm)
                k->msgs = nm;
            if (!nn || !nm) {
                chakra_proto_msg__node__free_unpacked(m, NULL);
                return ci_oom(err);
            }
        }
        k->msgs[k->n_msgs++] = &m->base;
        if (ci_node_read(c, path, m, k, err) != NP_OK)
            return err->status;
    }
    return NP_OK;
}

typedef struct ci_idx {
    uint64_t id;
    uint32_t i;
} ci_idx;

static int ci_cmp_idx(const void *a, const void *b)
{
    const ci_idx *x = a, *y = b;
    return x->id != y->id ? (x->id > y->id) - (x->id < y->id) : (x->i > y->i) - (x->i < y->i);
}

/* Dependencies as node indices; the order the nodes are issued in (file order when it is
 * topological, else Kahn's in file order). */
static np_status ci_resolve(const char *path, ci_rank *k, uint32_t **order_out, np_err *err)
{
    *order_out = NULL;
    uint32_t n = k->n;
    ci_idx *by_id = malloc((n ? n : 1) * sizeof *by_id);
    uint32_t *order = malloc((n ? n : 1) * sizeof *order);
    uint32_t *indeg = calloc(n ? n : 1, sizeof *indeg);
    if (!by_id || !order || !indeg) {
        free(by_id), free(order), free(indeg);
        return ci_oom(err);
    }
    for (uint32_t i = 0; i < n; i++)
        by_id[i] = (ci_idx){k->nodes[i].id, i};
    qsort(by_id, n, sizeof *by_id, ci_cmp_idx);
    np_status st = NP_OK;
    for (uint32_t i = 1; i < n && st == NP_OK; i++)
        if (by_id[i].id == by_id[i - 1].id)
            st = np_err_set(err, NP_ERR_DUPLICATE, "%s: node %u: id %" PRIu64 " is also node "
                            "%u's", path, by_id[i].i, by_id[i].id, by_id[i - 1].i);
    bool file_order = true;
    for (uint32_t i = 0; i < n && st == NP_OK; i++) {
        ci_node *d = &k->nodes[i];
        for (uint32_t j = 0; j < d->n_deps; j++) {
            uint64_t id = k->deps[d->dep_off + j];
            uint32_t lo = 0, hi = n;
            while (lo < hi) {
                uint32_t mid = lo + (hi - lo) / 2;
                if (by_id[mid].id < id)
                    lo = mid + 1;
                else
                    hi = mid;
            }
            if (lo == n || by_id[lo].id != id) {
                st = np_err_set(err, NP_ERR_MISSING, "%s: node %u (id %" PRIu64 "): depends on "
                                "id %" PRIu64 ", which is no node of the trace", path, i, d->id,
                                id);
                break;
            }
            k->deps[d->dep_off + j] = by_id[lo].i;
            file_order &= by_id[lo].i < i;
            indeg[i]++;
        }
    }
    free(by_id);
    if (st == NP_OK && file_order) {
        for (uint32_t i = 0; i < n; i++)
            order[i] = i;
    } else if (st == NP_OK) { /* Kahn's: children lists built on the fly by scanning */
        uint32_t *cnt = calloc((size_t)n + 1, sizeof *cnt), *child = NULL;
        uint64_t total = 0;
        for (uint32_t i = 0; cnt && i < n; i++)
            for (uint32_t j = 0; j < k->nodes[i].n_deps; j++)
                cnt[k->deps[k->nodes[i].dep_off + j] + 1]++, total++;
        if (cnt)
            child = malloc((total ? total : 1) * sizeof *child);
        if (!cnt || !child) {
            free(cnt), free(child), free(order), free(indeg);
            return ci_oom(err);
        }
        for (uint32_t i = 0; i < n; i++)
            cnt[i + 1] += cnt[i];
        uint32_t *fill = calloc(n ? n : 1, sizeof *fill);
        for (uint32_t i = 0; fill && i < n; i++)
            for (uint32_t j = 0; j < k->nodes[i].n_deps; j++) {
                uint32_t p = (uint32_t)k->deps[k->nodes[i].dep_off + j];
                child[cnt[p] + fill[p]++] = i;
            }
        uint32_t head = 0, tail = 0;
        for (uint32_t i = 0; fill && i < n; i++)
            if (!indeg[i])
                order[tail++] = i;
        while (fill && head < tail) {
            uint32_t v = order[head++];
            for (uint32_t j = cnt[v]; j < cnt[v + 1]; j++)
                if (--indeg[child[j]] == 0)
                    order[tail++] = child[j];
        }
        if (!fill)
            st = ci_oom(err);
        else if (tail < n) {
            uint32_t bad = 0;
            while (bad < n && !indeg[bad])
                bad++;
            st = np_err_set(err, NP_ERR_INCONSISTENT, "%s: node %u (id %" PRIu64 "): its "
                            "dependencies form a cycle", path, bad, k->nodes[bad].id);
        }
        free(fill), free(cnt), free(child);
    }
    free(indeg);
    if (st != NP_OK) {
        free(order);
        return st;
    }
    *order_out = order;
    return NP_OK;
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
                for (uint32_t q = pass_off[p]; q < pass_off[p] + pass_len[p]; q++) {
                    if (cap_pass <= n_pass + 1) {
                        uint64_t nc = cap_pass ? cap_pass * 2 : 1024;
                        uint32_t *np2 = realloc(pass, nc * sizeof *np2);
                        if (!np2) {
                            st = ci_oom(err);
                            break;
                        }
                        pass = np2, cap_pass = nc;
                    }
                    pass[n_pass++] = pass[q];
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
            t.bytes = (uint64_t)d->size;
            t.groupset = c->pg_gs[pg];
            t.root = (uint32_t)d->root;
            t.elem_bytes = d->elem_bytes;
            t.algo = (coll_algo)d->algo;
            if (t.root >= gs->size)
                st = np_err_set(err, NP_ERR_RANGE, "%s: node %u (id %" PRIu64 "): root %u of a "
                                "group of %u", path, i, d->id, t.root, gs->size);
            t.stream = d->stream >= 0 ? (uint32_t)d->stream : c->pg_gs[pg] % (RUN_STREAMS - 4);
            t.comm = d->comm >= 0 ? (run_comm_kind)d->comm : RUN_COMM_OTHER;
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
            t.comm = d->comm >= 0 ? (run_comm_kind)d->comm : RUN_COMM_PP;
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
            for (uint32_t j = 0; j < nd; j++) {
                if (cap_pass <= n_pass + 1) {
                    uint64_t nc = cap_pass ? cap_pass * 2 : 1024;
                    uint32_t *np2 = realloc(pass, nc * sizeof *np2);
                    if (!np2) {
                        st = ci_oom(err);
                        break;
                    }
                    pass = np2, cap_pass = nc;
                }
                pass[n_pass++] = tdeps[j];
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

np_status chakra_check_bytes(const char *path, const uint8_t *buf, size_t n, uint64_t *nodes,
                             np_err *err)
{
    arch_config cfg;
    arch_defaults(&cfg);
    chakra_replay_result out = {0};
    ci_ctx c = {.cfg = &cfg, .scale = 1, .out = &out};
    ci_rank k = {0};
    uint32_t *order = NULL;
    np_status st = ci_decode(&c, path, buf, n, &k, err);
    if (st == NP_OK)
        st = ci_resolve(path, &k, &order, err);
    *nodes = k.n;
    free(order);
    ci_rank_free(&k);
    return st;
}

np_status chakra_replay(const char *dir, const arch_config *cfg, const chakra_replay_opts *o,
                        chakra_replay_result *out, np_err *err)
{
    memset(out, 0, sizeof *out);
    chakra_replay_opts def = {0};
    if (!o)
        o = &def;
    ci_ctx c = {.cfg = cfg, .scale = o->duration_scale > 0 ? o->duration_scale : 1, .out = out};
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
            st = ci_decode(&c, path, buf, n, &k, err);
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

np_status chakra_check_bytes(const char *path, const uint8_t *buf, size_t n, uint64_t *nodes,
                             np_err *err)
{
    (void)path, (void)buf, (void)n;
    *nodes = 0;
    return ci_off(err);
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
