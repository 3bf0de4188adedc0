/* chakra_decode.c — one rank's Chakra trace file (chakra.h's layout) decoded through
 * protobuf-c's generated unpacker into the nodes the replay needs, and its dependencies
 * resolved into an issue order (chakra_impl.h). Depends on base/ and the schema only, so the
 * fuzz harness (sim/fuzz/fuzz_chakra.c) builds it alone. */
#include "chakra.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if NPUSIM_CHAKRA
#include "chakra_impl.h"
#include "run_graph.h"

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

coll_op ci_coll_op(int64_t t)
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

void ci_rank_free(ci_rank *k)
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
static np_status ci_node_read(const ci_cost *c, const char *path, const ChakraProtoMsg__Node *m,
                              ci_rank *k, np_err *err)
{
    ci_node *d = &k->nodes[k->n];
    memset(d, 0, sizeof *d);
    d->id = m->id;
    d->type = m->type;
    d->stream = -1;
    int64_t v;
    const char *s;
    uint32_t idx = k->n;
    if (ci_int(m, "npusim_stream", &v)) {
        if (v < 0 || v >= RUN_STREAMS)
            return np_err_set(err, NP_ERR_RANGE, "%s: node %u (id %" PRIu64 "): npusim_stream "
                              "%" PRId64 " (0 .. %d)", path, idx, m->id, v, RUN_STREAMS - 1);
        d->stream = (int32_t)v;
    }
    d->comm = ci_str(m, "npusim_comm");
    switch (m->type) {
    case CHAKRA_PROTO_MSG__NODE_TYPE__COMP_NODE: {
        int64_t ps = 0, ops = 0, bytes = 0;
        bool has_ops = ci_int(m, "num_ops", &ops), has_bytes = ci_int(m, "tensor_size", &bytes);
        d->flops = ops > 0 ? (double)ops : 0;
        bool roof = c->roofline && (has_ops || has_bytes);
        if (!roof && ci_int(m, "npusim_duration_ps", &ps) && ps >= 0) {
            double t = (double)ps * c->scale;
            d->ps = (uint64_t)(t > 1e21 ? 1e21 : t + 0.5);
            d->how = CI_EXACT;
        } else if (!roof && (m->duration_micros > 0 || !(has_ops || has_bytes))) {
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
        d->npusim_bytes = ci_int(m, "npusim_bytes", &v) && v > 0 ? (uint64_t)v : 0;
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

np_status ci_decode(const ci_cost *c, const char *path, const uint8_t *buf, size_t n,
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
np_status ci_resolve(const char *path, ci_rank *k, uint32_t **order_out, np_err *err)
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

np_status chakra_check_bytes(const char *path, const uint8_t *buf, size_t n, uint64_t *nodes,
                             np_err *err)
{
    arch_config cfg;
    arch_defaults(&cfg);
    ci_cost c = {.cfg = &cfg, .scale = 1};
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

#else /* without protobuf-c */

np_status chakra_check_bytes(const char *path, const uint8_t *buf, size_t n, uint64_t *nodes,
                             np_err *err)
{
    (void)path, (void)buf, (void)n;
    *nodes = 0;
    return np_err_set(err, NP_ERR_USAGE, "this npusim was built without Chakra traces "
                      "(apt-get install protobuf-c-compiler libprotobuf-c-dev, then rebuild)");
}

#endif
