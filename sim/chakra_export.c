/* chakra_export.c — `npusim run --chakra DIR`: the run's task graph as one Chakra execution
 * trace per rank, with its communicator groups (chakra.h says what each node carries). Every
 * figure comes from the run itself: the tasks, dependencies, groups and peers of its run graph,
 * the sizes of its collectives and messages, and each compute task's duration as the engine
 * ran it in the first step. */
#include "chakra.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "coll_sched.h"
#include "core.h"
#include "run_impl.h"

#if NPUSIM_CHAKRA
#include "et_def.pb-c.h"
#endif

/* ---- What the engine did ------------------------------------------------------------------- */

struct chakra_rec {
    const run_graph *g;
    uint64_t **dur;   /* per class, per task: the compute task's duration in step 0 (ps);
                         UINT64_MAX while not seen */
    uint32_t n_cls;
    const run_observer *inner;
    run_observer obs;
};

static void cr_compute(void *ctx, uint32_t rank, uint32_t task, uint32_t step, uint64_t s,
                       uint64_t e, const run_ktime *kt)
{
    chakra_rec *r = ctx;
    uint64_t *d = &r->dur[run_graph_class_of(r->g, rank)][task];
    if (step == 0 && *d == UINT64_MAX)
        *d = e - s;
    if (r->inner && r->inner->compute)
        r->inner->compute(r->inner->ctx, rank, task, step, s, e, kt);
}

static void cr_coll(void *ctx, uint32_t rank, uint32_t task, uint32_t step, uint64_t s,
                    uint64_t e, uint64_t group, uint32_t size, uint64_t bytes)
{
    chakra_rec *r = ctx;
    if (r->inner && r->inner->coll)
        r->inner->coll(r->inner->ctx, rank, task, step, s, e, group, size, bytes);
}

static void cr_transfer(void *ctx, uint32_t src, uint32_t dst, uint32_t task, uint32_t step,
                        uint64_t s, uint64_t e, uint64_t bytes)
{
    chakra_rec *r = ctx;
    if (r->inner && r->inner->transfer)
        r->inner->transfer(r->inner->ctx, src, dst, task, step, s, e, bytes);
}

static void cr_comm_busy(void *ctx, uint32_t rank, uint64_t s, uint64_t e)
{
    chakra_rec *r = ctx;
    if (r->inner && r->inner->comm_busy)
        r->inner->comm_busy(r->inner->ctx, rank, s, e);
}

static void cr_link(void *ctx, uint32_t link, const char *name, const double *bytes, uint32_t n,
                    uint64_t window_ps)
{
    chakra_rec *r = ctx;
    if (r->inner && r->inner->link)
        r->inner->link(r->inner->ctx, link, name, bytes, n, window_ps);
}

np_status chakra_rec_create(const run_plan *rp, const run_observer *inner, chakra_rec **out,
                            np_err *err)
{
    *out = NULL;
    chakra_rec *r = calloc(1, sizeof *r);
    if (!r)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory (chakra trace)");
    r->g = rp->g;
    r->inner = inner;
    r->n_cls = run_graph_classes(rp->g);
    r->dur = calloc(r->n_cls, sizeof *r->dur);
    for (uint32_t c = 0; r->dur && c < r->n_cls; c++) {
        uint32_t n = run_graph_tasks(rp->g, c);
        r->dur[c] = malloc((n ? n : 1) * sizeof **r->dur);
        if (!r->dur[c]) {
            chakra_rec_free(r);
            return np_err_set(err, NP_ERR_NOMEM, "out of memory (chakra trace)");
        }
        memset(r->dur[c], 0xff, (n ? n : 1) * sizeof **r->dur);
    }
    if (!r->dur) {
        free(r);
        return np_err_set(err, NP_ERR_NOMEM, "out of memory (chakra trace)");
    }
    r->obs = (run_observer){.compute = cr_compute, .coll = cr_coll, .transfer = cr_transfer,
                            .comm_busy = cr_comm_busy, .link = cr_link, .ctx = r};
    *out = r;
    return NP_OK;
}

const run_observer *chakra_rec_observer(chakra_rec *r) { return &r->obs; }

void chakra_rec_free(chakra_rec *r)
{
    if (!r)
        return;
    for (uint32_t c = 0; r->dur && c < r->n_cls; c++)
        free(r->dur[c]);
    free(r->dur);
    free(r);
}

#if NPUSIM_CHAKRA

/* ---- Writing messages ---------------------------------------------------------------------- */

typedef struct ce_out {
    FILE *f;
    const char *path;
    uint8_t *buf;
    size_t cap;
} ce_out;

/* One message as protolib's encodeMessage writes it: its length (varint), then its bytes. */
static np_status ce_write(ce_out *o, const ProtobufCMessage *m, np_err *err)
{
    size_t n = protobuf_c_message_get_packed_size(m);
    if (n > UINT32_MAX)
        return np_err_set(err, NP_ERR_RANGE, "%s: a node of %zu bytes (at most 4 GiB)", o->path,
                          n);
    if (n + 5 > o->cap) {
        size_t cap = (n + 5) * 2;
        uint8_t *b = realloc(o->buf, cap);
        if (!b)
            return np_err_set(err, NP_ERR_NOMEM, "out of memory (chakra trace)");
        o->buf = b;
        o->cap = cap;
    }
    size_t k = 0;
    for (uint32_t v = (uint32_t)n; ; v >>= 7) {
        o->buf[k++] = (uint8_t)((v & 0x7f) | (v >= 0x80 ? 0x80 : 0));
        if (v < 0x80)
            break;
    }
    protobuf_c_message_pack(m, o->buf + k);
    if (fwrite(o->buf, 1, k + n, o->f) != k + n)
        return np_err_set(err, NP_ERR_IO, "%s: %s", o->path, strerror(errno));
    return NP_OK;
}

typedef ChakraProtoMsg__AttributeProto ce_attr;

static ce_attr *ce_i64(ce_attr *a, const char *name, int64_t v)
{
    chakra_proto_msg__attribute_proto__init(a);
    a->name = (char *)name;
    a->value_case = CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_INT64_VAL;
    a->int64_val = v;
    return a;
}

static ce_attr *ce_i32(ce_attr *a, const char *name, int32_t v)
{
    chakra_proto_msg__attribute_proto__init(a);
    a->name = (char *)name;
    a->value_case = CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_INT32_VAL;
    a->int32_val = v;
    return a;
}

static ce_attr *ce_u64(ce_attr *a, const char *name, uint64_t v)
{
    chakra_proto_msg__attribute_proto__init(a);
    a->name = (char *)name;
    a->value_case = CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_UINT64_VAL;
    a->uint64_val = v;
    return a;
}

static ce_attr *ce_bool(ce_attr *a, const char *name, bool v)
{
    chakra_proto_msg__attribute_proto__init(a);
    a->name = (char *)name;
    a->value_case = CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_BOOL_VAL;
    a->bool_val = v;
    return a;
}

static ce_attr *ce_str(ce_attr *a, const char *name, const char *v)
{
    chakra_proto_msg__attribute_proto__init(a);
    a->name = (char *)name;
    a->value_case = CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_STRING_VAL;
    a->string_val = (char *)v;
    return a;
}

/* Chakra's CollectiveCommType of a collective; -1 when Chakra has none. */
static int ce_comm_type(coll_op op)
{
    switch (op) {
    case COLL_OP_ALL_REDUCE: return CHAKRA_PROTO_MSG__COLLECTIVE_COMM_TYPE__ALL_REDUCE;
    case COLL_OP_REDUCE: return CHAKRA_PROTO_MSG__COLLECTIVE_COMM_TYPE__REDUCE;
    case COLL_OP_ALL_GATHER: return CHAKRA_PROTO_MSG__COLLECTIVE_COMM_TYPE__ALL_GATHER;
    case COLL_OP_GATHER: return CHAKRA_PROTO_MSG__COLLECTIVE_COMM_TYPE__GATHER;
    case COLL_OP_SCATTER: return CHAKRA_PROTO_MSG__COLLECTIVE_COMM_TYPE__SCATTER;
    case COLL_OP_BROADCAST: return CHAKRA_PROTO_MSG__COLLECTIVE_COMM_TYPE__BROADCAST;
    case COLL_OP_ALL_TO_ALL: return CHAKRA_PROTO_MSG__COLLECTIVE_COMM_TYPE__ALL_TO_ALL;
    case COLL_OP_REDUCE_SCATTER: return CHAKRA_PROTO_MSG__COLLECTIVE_COMM_TYPE__REDUCE_SCATTER;
    default: return -1;
    }
}

/* The communicator group key of (groupset gs, group): 1 + the groups of earlier groupsets +
 * group, so every group of the run has one key. */
static uint32_t ce_pg(const run_graph *g, uint32_t gs, uint32_t group)
{
    uint32_t base = 1;
    for (uint32_t i = 0; i < gs; i++)
        base += g->gs[i].n_groups;
    return base + group;
}

static int ce_cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* The task id of dependency d ((engine, position)) of class c. */
static uint32_t ce_dep_task(const rg_class *c, uint32_t d)
{
    uint32_t e = d >> RG_DEP_ENGINE_SHIFT;
    return c->order[c->eng_off[e] + (d & RG_DEP_POS_MASK)];
}

static np_status ce_rank(const chakra_rec *rec, const run_plan *rp, const arch_config *cfg,
                         uint32_t r, ce_out *o, uint64_t *nodes, np_err *err)
{
    const run_graph *g = rp->g;
    uint32_t ci = run_graph_class_of(g, r);
    const rg_class *c = &g->cls[ci];
    ChakraProtoMsg__GlobalMetadata md = CHAKRA_PROTO_MSG__GLOBAL_METADATA__INIT;
    ce_attr ma[3], *mp[3] = {ce_str(&ma[0], "schema", "1.0.2-chakra.1.0.0"),
                             ce_str(&ma[1], "generator", "npusim run --chakra"),
                             ce_u64(&ma[2], "npusim_chip", run_graph_chip_of(g, r))};
    md.version = "0.0.4";
    md.n_attr = 3;
    md.attr = mp;
    np_status st = ce_write(o, &md.base, err);
    size_t dcap = (size_t)c->n_deps + 2;
    uint64_t *deps = malloc(dcap * sizeof *deps);
    if (!deps)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory (chakra trace)");
    uint64_t launch_ps = core_kernel_launch_ps(cfg, false), host_ps = core_kernel_launch_ps(cfg, true);
    bool first_compute = true;
    uint64_t cum_ps = 0, cum_us = 0; /* the rank's compute time so far, exact and as written */
    for (uint32_t i = 0; st == NP_OK && i < c->n_tasks; i++) {
        const rg_task *t = &c->tasks[i];
        const run_plan_task *pt = rp->tasks && rp->tasks[ci] ? &rp->tasks[ci][i] : NULL;
        if (t->n_deps + 1 > dcap) { /* a task's deps are at most the class's */
            st = np_err_set(err, NP_ERR_INTERNAL, "chakra: task %u's dependencies", i);
            break;
        }
        size_t nd = 0;
        for (uint32_t k = 0; k < t->n_deps; k++)
            deps[nd++] = ce_dep_task(c, c->deps[t->dep_off + k]);
        if (t->pos > 0)
            deps[nd++] = c->order[c->eng_off[t->engine] + t->pos - 1];
        qsort(deps, nd, sizeof *deps, ce_cmp_u64);
        size_t u = 0;
        for (size_t k = 0; k < nd; k++)
            if (u == 0 || deps[u - 1] != deps[k])
                deps[u++] = deps[k];
        ChakraProtoMsg__Node nd_msg = CHAKRA_PROTO_MSG__NODE__INIT;
        ce_attr a[13], *ap[13];
        size_t na = 0;
        char name[160], pg[16];
        const char *what = pt && pt->e && pt->e->n_nodes > 0 ? pt->e->nodes[0]->name : "";
        nd_msg.id = i;
        nd_msg.data_deps = deps;
        nd_msg.n_data_deps = u;
        switch ((run_task_kind)t->kind) {
        case RUN_TASK_COMPUTE: {
            const run_kernel *k = run_graph_kernel(g, t->ref);
            const run_kspec *ks = k ? k->data : NULL;
            uint64_t d = rec->dur[ci][i] == UINT64_MAX ? 0 : rec->dur[ci][i];
            bool host = first_compute || (t->flags & RUN_TASK_LAUNCH);
            first_compute = false;
            nd_msg.type = CHAKRA_PROTO_MSG__NODE_TYPE__COMP_NODE;
            /* a reader without npusim's launch gaps gets them in the duration; rounded to the
             * schema's microseconds so that the rank's sum stays the exact one's, rounded (each
             * node's the running sum's rounding less what was written before it: a kernel of
             * 0.4 us is 0 or 1 us, never lost in every node) */
            cum_ps += d + (host ? host_ps : launch_ps);
            nd_msg.duration_micros = (cum_ps + 500000) / 1000000 - cum_us;
            cum_us += nd_msg.duration_micros;
            double fl = k ? (k->hw_flops > 0 ? k->hw_flops : k->flops) : 0;
            ap[na] = ce_i64(&a[na], "num_ops", (int64_t)fl), na++;
            ap[na] = ce_u64(&a[na], "tensor_size", ks ? ks->hbm_bytes : 0), na++;
            ap[na] = ce_bool(&a[na], "is_cpu_op", false), na++;
            ap[na] = ce_u64(&a[na], "npusim_duration_ps", d), na++;
            if (t->flags & RUN_TASK_LAUNCH)
                ap[na] = ce_bool(&a[na], "npusim_launch", true), na++;
            const char *kn = what[0] ? what : ks && ks->name[0] ? ks->name : "compute";
            if (pt && pt->mb >= 0)
                snprintf(name, sizeof name, "%s mb%d", kn, pt->mb);
            else
                snprintf(name, sizeof name, "%s", kn);
            break;
        }
        case RUN_TASK_COLL: {
            const rg_spec *sp = &g->spec[t->ref];
            const rg_groupset *gs = &g->gs[sp->groupset];
            int ct = ce_comm_type(sp->op);
            if (ct < 0) {
                st = np_err_set(err, NP_ERR_RANGE, "chakra: rank %u task %u: %s has no Chakra "
                                "collective type", r, i, coll_op_name(sp->op));
                break;
            }
            nd_msg.type = CHAKRA_PROTO_MSG__NODE_TYPE__COMM_COLL_NODE;
            snprintf(pg, sizeof pg, "%u", ce_pg(g, sp->groupset, gs->group_of[r]));
            ap[na] = ce_i64(&a[na], "comm_type", ct), na++;
            /* comm_size is a rank's input, as Chakra's PyTorch converter writes it and
             * ASTRA-sim reads it (its Ring: an all-gather of comm_size gathers comm_size x
             * ranks): npusim's own size for every op but all-gather and gather, whose
             * npusim size is the gathered output; npusim_bytes keeps a share that does not
             * divide evenly */
            uint64_t in = sp->bytes;
            if (sp->op == COLL_OP_ALL_GATHER || sp->op == COLL_OP_GATHER) {
                in = sp->bytes / gs->size;
                if (in * gs->size != sp->bytes)
                    ap[na] = ce_u64(&a[na], "npusim_bytes", sp->bytes), na++;
            }
            ap[na] = ce_i64(&a[na], "comm_size", (int64_t)in), na++;
            ap[na] = ce_str(&a[na], "pg_name", pg), na++;
            ap[na] = ce_bool(&a[na], "is_cpu_op", false), na++;
            if (sp->root)
                ap[na] = ce_i32(&a[na], "npusim_root", (int32_t)sp->root), na++;
            if (sp->elem_bytes)
                ap[na] = ce_i32(&a[na], "npusim_elem_bytes", (int32_t)sp->elem_bytes), na++;
            if (sp->algo != COLL_ALGO_AUTO)
                ap[na] = ce_str(&a[na], "npusim_algo", coll_algo_name(sp->algo)), na++;
            ap[na] = ce_i32(&a[na], "npusim_stream", (int32_t)t->engine - 1), na++;
            ap[na] = ce_str(&a[na], "npusim_comm", run_comm_kind_name(t->comm)), na++;
            snprintf(name, sizeof name, "%s %s%s%s", coll_op_name(sp->op), gs->name,
                     what[0] ? " " : "", what);
            break;
        }
        case RUN_TASK_SEND:
        case RUN_TASK_RECV: {
            bool send = t->kind == RUN_TASK_SEND;
            const rg_chan *ch = send ? &c->send[t->ref] : &c->recv[t->ref];
            uint32_t peer = rg_chan_peer(g, r, ch);
            nd_msg.type = send ? CHAKRA_PROTO_MSG__NODE_TYPE__COMM_SEND_NODE
                               : CHAKRA_PROTO_MSG__NODE_TYPE__COMM_RECV_NODE;
            ap[na] = ce_i32(&a[na], "comm_src", (int32_t)(send ? r : peer)), na++;
            ap[na] = ce_i32(&a[na], "comm_dst", (int32_t)(send ? peer : r)), na++;
            ap[na] = ce_i32(&a[na], "comm_tag", (int32_t)ch->tag), na++;
            ap[na] = ce_i64(&a[na], "comm_size", (int64_t)t->bytes), na++;
            ap[na] = ce_bool(&a[na], "is_cpu_op", false), na++;
            ap[na] = ce_i32(&a[na], "npusim_stream", (int32_t)t->engine - 1), na++;
            ap[na] = ce_str(&a[na], "npusim_comm", run_comm_kind_name(t->comm)), na++;
            snprintf(name, sizeof name, "%s %u%s%s", send ? "send to" : "recv from", peer,
                     what[0] ? " " : "", what);
            break;
        }
        default:
            st = np_err_set(err, NP_ERR_INTERNAL, "chakra: task kind %u", t->kind);
        }
        if (st != NP_OK)
            break;
        nd_msg.name = name;
        nd_msg.n_attr = na;
        nd_msg.attr = ap;
        st = ce_write(o, &nd_msg.base, err);
        (*nodes)++;
    }
    free(deps);
    return st;
}

static np_status ce_open(ce_out *o, const char *path, np_err *err)
{
    o->path = path;
    o->f = fopen(path, "wb");
    if (!o->f)
        return np_err_set(err, NP_ERR_IO, "%s: %s", path, strerror(errno));
    return NP_OK;
}

static np_status ce_close(ce_out *o, np_status st, np_err *err)
{
    if (o->f && fclose(o->f) != 0 && st == NP_OK)
        st = np_err_set(err, NP_ERR_IO, "%s: %s", o->path, strerror(errno));
    o->f = NULL;
    return st;
}

/* {"1": [ranks of group 0 of groupset 0], ...}: every group of every groupset. */
static np_status ce_comm_groups(const run_graph *g, const char *path, np_err *err)
{
    ce_out o = {0};
    if (ce_open(&o, path, err) != NP_OK)
        return err->status;
    fputs("{", o.f);
    const char *sep = "\n";
    for (uint32_t s = 0; s < g->n_gs; s++)
        for (uint32_t k = 0; k < g->gs[s].n_groups; k++) {
            fprintf(o.f, "%s  \"%u\": [", sep, ce_pg(g, s, k));
            for (uint32_t j = 0; j < g->gs[s].size; j++)
                fprintf(o.f, "%s%u", j ? ", " : "", g->gs[s].members[k * g->gs[s].size + j]);
            fputs("]", o.f);
            sep = ",\n";
        }
    fputs("\n}\n", o.f);
    return ce_close(&o, ferror(o.f) ? np_err_set(err, NP_ERR_IO, "%s: write failed", path)
                                    : NP_OK, err);
}

static np_status ce_text(const char *path, const char *text, np_err *err)
{
    ce_out o = {0};
    if (ce_open(&o, path, err) != NP_OK)
        return err->status;
    fputs(text, o.f);
    return ce_close(&o, ferror(o.f) ? np_err_set(err, NP_ERR_IO, "%s: write failed", path)
                                    : NP_OK, err);
}

/* ASTRA-sim's system configuration: what npusim's run engine simulates, as far as ASTRA-sim's
 * keys can say it (docs/interop.md, "The ASTRA-sim round trip"):
 *   - ring collectives on every dimension, as its examples/system/native_collectives give them
 *     (on a group of two ranks, the only kind in a run of dp, tp and pp of 2, every algorithm
 *     npusim's tuner has is the same one exchange each way);
 *   - preferred-dataset-splits 1: npusim runs a collective as one message per step, unchunked
 *     (the run's collectives have chunk_bytes 0), where ASTRA-sim's default 4 splits it into
 *     chunks that each pay every step's link latency again;
 *   - active-chunks-per-dimension: the most collective streams a rank has (npusim runs one
 *     collective of each stream at a time, the streams side by side; with one chunk a
 *     collective, ASTRA-sim's active chunks are its collectives in flight);
 *   - endpoint-delay 0: npusim's raw protocol (system.coll_protocol, the default) adds nothing
 *     to a message beyond its path; ASTRA-sim's default adds 10 ns per message and step;
 *   - FIFO: a stream's collectives run in issue order;
 *   - local-mem-bw: ASTRA-sim reduces a received chunk of s bytes in 3 s / local-mem-bw (two
 *     reads and a write of local memory), npusim in s / R, R its vector units' reduction rate
 *     (coll_reduce_ps: one element per lane-op on every core), so 3 R in GB/s, R for the element
 *     size of most of the run's reduced bytes (bf16 or fp32). */
static double ce_astra_mem_bw(const run_graph *g, const arch_config *cfg)
{
    double by_size[9] = {0}; /* reduced bytes per element size 1 .. 8 (0: 4, the default) */
    for (uint32_t ci = 0; ci < g->n_cls; ci++)
        for (uint32_t i = 0; i < g->cls[ci].n_tasks; i++) {
            const rg_task *t = &g->cls[ci].tasks[i];
            if (t->kind != RUN_TASK_COLL)
                continue;
            const rg_spec *sp = &g->spec[t->ref];
            uint32_t eb = sp->elem_bytes ? sp->elem_bytes : 4;
            if ((sp->op == COLL_OP_ALL_REDUCE || sp->op == COLL_OP_REDUCE_SCATTER ||
                 sp->op == COLL_OP_REDUCE) && eb <= 8)
                by_size[eb] += (double)sp->bytes;
        }
    uint32_t eb = 4;
    for (uint32_t k = 1; k <= 8; k++)
        if (by_size[k] > by_size[eb])
            eb = k;
    const uint64_t bytes = 1ULL << 40;
    double rate = (double)bytes /
                  ((double)coll_reduce_ps(cfg, (uint32_t)cfg->chip.cores, bytes, eb) * 1e-12);
    return 3 * rate * 1e-9;
}

/* The most collective streams (engines) one rank's collectives use, at least 1. */
static uint32_t ce_coll_streams(const run_graph *g)
{
    uint32_t most = 1;
    for (uint32_t ci = 0; ci < g->n_cls; ci++) {
        bool used[RUN_ENGINES] = {0};
        uint32_t k = 0;
        for (uint32_t i = 0; i < g->cls[ci].n_tasks; i++) {
            const rg_task *t = &g->cls[ci].tasks[i];
            if (t->kind == RUN_TASK_COLL && t->engine < RUN_ENGINES && !used[t->engine])
                used[t->engine] = true, k++;
        }
        most = k > most ? k : most;
    }
    return most;
}

static void ce_astra_system(const run_graph *g, const arch_config *cfg, uint32_t dims,
                            char *buf, size_t n)
{
    char impl[64] = "";
    for (uint32_t d = 0; d < dims; d++)
        snprintf(impl + strlen(impl), sizeof impl - strlen(impl), "%s\"ring\"", d ? ", " : "");
    snprintf(buf, n,
             "{\n"
             "    \"scheduling-policy\": \"FIFO\",\n"
             "    \"endpoint-delay\": 0,\n"
             "    \"active-chunks-per-dimension\": %u,\n"
             "    \"preferred-dataset-splits\": 1,\n"
             "    \"all-reduce-implementation\": [%s],\n"
             "    \"all-gather-implementation\": [%s],\n"
             "    \"reduce-scatter-implementation\": [%s],\n"
             "    \"all-to-all-implementation\": [%s],\n"
             "    \"collective-optimization\": \"localBWAware\",\n"
             "    \"local-mem-bw\": %.10g,\n"
             "    \"boost-mode\": 0\n"
             "}\n",
             ce_coll_streams(g), impl, impl, impl, impl, ce_astra_mem_bw(g, cfg));
}

np_status chakra_export(const chakra_rec *rec, const run_plan *rp, const arch_config *cfg,
                        const char *dir, const char *name, chakra_export_info *info,
                        np_err *err)
{
    memset(info, 0, sizeof *info);
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return np_err_set(err, NP_ERR_IO, "--chakra %s: %s", dir, strerror(errno));
    const run_graph *g = rp->g;
    size_t plen = strlen(dir) + strlen(name) + 64;
    char *path = malloc(plen);
    if (!path)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory (chakra trace)");
    np_status st = NP_OK;
    ce_out o = {0};
    info->ranks = run_graph_ranks(g);
    for (uint32_t r = 0; st == NP_OK && r < info->ranks; r++) {
        snprintf(path, plen, "%s/%s.%u.et", dir, name, r);
        st = ce_open(&o, path, err);
        if (st == NP_OK)
            st = ce_close(&o, ce_rank(rec, rp, cfg, r, &o, &info->nodes, err), err);
    }
    free(o.buf);
    /* a larger trace of the same name written there before would be read as ranks of this one */
    for (uint32_t r = info->ranks; st == NP_OK; r++) {
        snprintf(path, plen, "%s/%s.%u.et", dir, name, r);
        if (unlink(path) != 0)
            break;
    }
    if (st == NP_OK) {
        snprintf(path, plen, "%s/%s.comm_group.json", dir, name);
        st = ce_comm_groups(g, path, err);
    }
    char netyml[1024];
    uint32_t dims = 0;
    info->astra = chakra_astra_network(cfg, info->ranks, netyml, sizeof netyml, info->astra_why,
                                       sizeof info->astra_why);
    for (const char *p = strstr(netyml, "npus_count"); info->astra && p && *p && *p != '\n'; p++)
        dims += *p == ',';
    if (st == NP_OK && info->astra) {
        char sys[1024];
        ce_astra_system(g, cfg, dims + 1, sys, sizeof sys);
        snprintf(path, plen, "%s/network.yml", dir);
        st = ce_text(path, netyml, err);
        snprintf(path, plen, "%s/system.json", dir);
        if (st == NP_OK)
            st = ce_text(path, sys, err);
        snprintf(path, plen, "%s/remote_memory.json", dir);
        if (st == NP_OK)
            st = ce_text(path, "{\n    \"memory-type\": \"NO_MEMORY_EXPANSION\"\n}\n", err);
    }
    for (int k = 0; st == NP_OK && !info->astra && k < 3; k++) { /* none of an earlier run */
        static const char *const f[3] = {"network.yml", "system.json", "remote_memory.json"};
        snprintf(path, plen, "%s/%s", dir, f[k]);
        unlink(path);
    }
    free(path);
    return st;
}

#else /* without protobuf-c */

np_status chakra_export(const chakra_rec *rec, const run_plan *rp, const arch_config *cfg,
                        const char *dir, const char *name, chakra_export_info *info,
                        np_err *err)
{
    (void)rec, (void)rp, (void)cfg, (void)dir, (void)name;
    memset(info, 0, sizeof *info);
    return np_err_set(err, NP_ERR_USAGE, "--chakra: this npusim was built without Chakra "
                      "traces (apt-get install protobuf-c-compiler libprotobuf-c-dev, then "
                      "rebuild)");
}

#endif
