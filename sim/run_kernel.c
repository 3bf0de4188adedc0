/* run_kernel.c — a plan's compute node as a kernel of the kernel ABI, its key, and its timing
 * on the core model with an optional cache file (see run_kernel.h). */
#include "run_kernel.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core.h"
#include "run_hash.h"

/* ---- the framework's parameters of each op, as its kernel's attributes --------------------- */

/* Where a kernel attribute comes from in the framework node (framework/ops_api.c, optim.c,
 * op_linalg.c): fp[idx], or ip[idx] + add. A row whose attribute the op's kernel does not
 * declare is skipped; the reference check (rk_check_reference) then tells whether the
 * kernel still describes the node. */
typedef struct rk_attr_row {
    nn_op op;
    const char *name;
    char from;    /* 'f': fp[idx], 'i': ip[idx] + add, 'p': ip[0 .. ndim) as decimal digits */
    int idx;
    int64_t add;
} rk_attr_row;

static const rk_attr_row rk_attr_rows[] = {
#define RK_CONV(OP)                                                                             \
    {OP, "stride", 'i', 0, 0}, {OP, "pad", 'i', 1, 0}, {OP, "dilation", 'i', 2, 0},              \
    {OP, "groups", 'i', 3, 0}
    RK_CONV(NN_OP_CONV2D),
    RK_CONV(NN_OP_CONV2D_GRAD_INPUT),
    RK_CONV(NN_OP_CONV2D_GRAD_WEIGHT),
#undef RK_CONV
#define RK_POOL(OP) {OP, "kernel", 'i', 0, 0}, {OP, "stride", 'i', 1, 0}, {OP, "pad", 'i', 2, 0}
    RK_POOL(NN_OP_MAXPOOL2D),
    RK_POOL(NN_OP_MAXPOOL2D_GRAD),
    RK_POOL(NN_OP_AVGPOOL2D),
    RK_POOL(NN_OP_AVGPOOL2D_GRAD),
#undef RK_POOL
    {NN_OP_PERMUTE, "axes", 'p', 0, 0},
    {NN_OP_CONCAT, "axis", 'i', 0, 0},
    {NN_OP_SLICE, "axis", 'i', 0, 0},
    {NN_OP_SLICE, "start", 'i', 1, 0},
    {NN_OP_PAD, "axis", 'i', 0, 0},
    {NN_OP_PAD, "before", 'i', 1, 0},
    {NN_OP_BATCHNORM, "eps", 'f', 0, 0},
    {NN_OP_BATCHNORM_GRAD, "eps", 'f', 0, 0},
    {NN_OP_BATCHNORM_INFER, "eps", 'f', 0, 0},
    {NN_OP_ROPE, "base", 'f', 0, 0},
    {NN_OP_ROPE, "dir", 'f', 1, 0},
    {NN_OP_REDUCE_SUM, "axis", 'i', 0, 0},
    {NN_OP_REDUCE_SUM, "keepdim", 'i', 1, 0},
    {NN_OP_REDUCE_MEAN, "axis", 'i', 0, 0},
    {NN_OP_REDUCE_MEAN, "keepdim", 'i', 1, 0},
    {NN_OP_REDUCE_MAX, "axis", 'i', 0, 0},
    {NN_OP_REDUCE_MAX, "keepdim", 'i', 1, 0},
    {NN_OP_REDUCE_MAX_GRAD, "axis", 'i', 0, 0},
    {NN_OP_REDUCE_MAX_GRAD, "keepdim", 'i', 1, 0},
    {NN_OP_SCALE, "s", 'f', 0, 0},
    {NN_OP_RELU, "clamp", 'f', 0, 0},
    {NN_OP_RELU_GRAD, "clamp", 'f', 0, 0},
    {NN_OP_CAST, "to", 'i', 0, 0},
    {NN_OP_DROPOUT, "p", 'f', 0, 0},
    {NN_OP_DROPOUT, "seed", 'i', 0, 0},
    {NN_OP_CAUSAL_MASK, "fill", 'f', 0, 0},
    {NN_OP_LAYERNORM, "eps", 'f', 0, 0},
    {NN_OP_LAYERNORM_GRAD, "eps", 'f', 0, 0},
    {NN_OP_RMSNORM, "eps", 'f', 0, 0},
    {NN_OP_RMSNORM_GRAD, "eps", 'f', 0, 0},
    /* optimizers: lr, then the rule's constants; ip[0] counts the steps taken before */
    {NN_OP_SGD_UPDATE, "lr", 'f', 0, 0},
    {NN_OP_SGD_UPDATE, "momentum", 'f', 1, 0},
    {NN_OP_SGD_UPDATE, "weight_decay", 'f', 2, 0},
    {NN_OP_SGD_UPDATE, "step", 'i', 0, 1},
#define RK_ADAM(OP)                                                                             \
    {OP, "lr", 'f', 0, 0}, {OP, "beta1", 'f', 1, 0}, {OP, "beta2", 'f', 2, 0},                    \
    {OP, "eps", 'f', 3, 0}, {OP, "weight_decay", 'f', 4, 0}, {OP, "step", 'i', 0, 1}
    RK_ADAM(NN_OP_ADAM_UPDATE),
    RK_ADAM(NN_OP_ADAMW_UPDATE),
#undef RK_ADAM
};

static bool rk_declares(const kc_kernel_def *def, const char *name)
{
    for (unsigned i = 0; i < def->n_attrs; i++)
        if (!strcmp(def->attrs[i].name, name))
            return true;
    return false;
}

/* Fills k's attributes from node's parameters; false when the op has no row. */
static bool rk_attrs(const kc_kernel_def *def, const nn_tensor *n, kc_kernel *k)
{
    bool any = false;
    for (size_t i = 0; i < sizeof rk_attr_rows / sizeof rk_attr_rows[0]; i++) {
        const rk_attr_row *r = &rk_attr_rows[i];
        if (r->op != n->op)
            continue;
        any = true;
        if (!rk_declares(def, r->name) || k->n_attrs == KC_MAX_ATTRS)
            continue;
        int64_t digits = 0;
        for (int d = 0; r->from == 'p' && d < n->ndim; d++)
            digits = digits * 10 + n->ip[d];
        k->attrs[k->n_attrs++] = r->from == 'f'   ? KC_REAL(r->name, n->fp[r->idx])
                                 : r->from == 'p' ? KC_INT(r->name, digits)
                                                  : KC_INT(r->name, n->ip[r->idx] + r->add);
    }
    return any;
}

/* ---- nodes --------------------------------------------------------------------------------- */

bool run_node_is_view(const nn_tensor *node)
{
    return (nn_op_flags(node->op) & NN_OPF_VIEW) || kc_no_kernel_reason(node->op) != NULL;
}

static size_t rk_shape(const nn_tensor *t, char *buf, size_t n)
{
    char sh[96];
    return (size_t)snprintf(buf, n, "%s%s", nn_dtype_name(t->dtype), nn_shape_str(t, sh, sizeof sh));
}

char *run_node_desc(const nn_tensor *node, char *buf, size_t n)
{
    size_t k = (size_t)snprintf(buf, n, "%s ", nn_op_name(node->op));
    for (int i = 0; i < node->n_src && k < n; i++) {
        k += rk_shape(node->src[i], buf + k, n - k);
        if (i + 1 < node->n_src && k < n)
            k += (size_t)snprintf(buf + k, n - k, ", ");
    }
    if (k < n)
        k += (size_t)snprintf(buf + k, n - k, " -> ");
    if (k < n)
        rk_shape(node, buf + k, n - k);
    return buf;
}

/* The reference node the kernel's attributes describe equals the plan's node (op, shape,
 * dtype and parameters; a stand-in kernel, `as` != node's op: its op, shape and dtype). */
static np_status rk_check_reference(const kc_kernel_def *def, const kc_kernel *k,
                                    const nn_tensor *node, nn_op as, np_err *err)
{
    char desc[256];
    nn_graph *g = nn_graph_new(1);
    if (!g)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory checking a kernel");
    nn_tensor *in[KC_MAX_IN] = {0}, *out[KC_MAX_OUT] = {0};
    for (int i = 0; i < k->n_in; i++)
        in[i] = nn_leaf(g, "in", NN_ROLE_INPUT, k->in[i].dtype, k->in[i].ndim, k->in[i].shape);
    np_err e = {0};
    np_status st = nn_graph_status(g, &e);
    if (st == NP_OK)
        st = def->reference(g, k, in, out, &e);
    const nn_tensor *r = out[0];
    bool same = st == NP_OK && r && r->op == as && r->dtype == node->dtype &&
                r->ndim == node->ndim;
    for (int d = 0; same && d < node->ndim; d++)
        same = r->ne[d] == node->ne[d];
    for (int i = 0; same && as == node->op && i < NN_MAX_IPARAMS; i++)
        same = r->ip[i] == node->ip[i];
    for (int i = 0; same && as == node->op && i < NN_MAX_FPARAMS; i++)
        same = r->fp[i] == node->fp[i];
    nn_graph_free(g);
    if (same)
        return NP_OK;
    run_node_desc(node, desc, sizeof desc);
    if (st != NP_OK)
        return np_err_set(err, NP_ERR_INCONSISTENT, "%s (node '%s'): the kernel's reference "
                          "refuses the mapped attributes: %s", desc, node->name, e.msg);
    return np_err_set(err, NP_ERR_UNKNOWN_KEY, "%s (node '%s'): npusim run cannot yet map the "
                      "node's parameters onto the attributes of the %s kernel", desc, node->name,
                      nn_op_name(node->op));
}

/* The in-place updates whose ops have no kernel of their own compute what an elementwise
 * kernel computes, written over their buffer (src[0]): grad_acc(acc, g) = add(acc, g),
 * copy_to(dst, src) = cast(src) to dst's dtype, fill(buf, v) = broadcast_to(a scalar v) to
 * buf's shape. The stand-in's key is that kernel's, so a grad_acc is timed as the add it is. */
static np_status rk_stand_in(const nn_tensor *node, const arch_config *cfg, kc_kernel *k,
                             bool *done, np_err *err)
{
    nn_op as = node->op == NN_OP_GRAD_ACC ? NN_OP_ADD
               : node->op == NN_OP_COPY_TO ? NN_OP_CAST
               : node->op == NN_OP_FILL    ? NN_OP_BROADCAST_TO
                                           : NN_OP_COUNT;
    const kc_kernel_def *def = as == NN_OP_COUNT ? NULL : kc_kernel_find(as);
    *done = def != NULL;
    if (!def)
        return NP_OK;
    k->op = as;
    k->n_out = 1;
    kc_tensor_of(&k->out[0], 0, node);
    if (as == NN_OP_ADD) {
        k->n_in = 2;
        kc_tensor_of(&k->in[0], 0, node->src[0]);
        kc_tensor_of(&k->in[1], 0, node->src[1]);
    } else if (as == NN_OP_CAST) {
        k->n_in = 1;
        kc_tensor_of(&k->in[0], 0, node->src[1]);
        if (rk_declares(def, "to"))
            k->attrs[k->n_attrs++] = KC_INT("to", node->dtype);
    } else {
        k->n_in = 1;
        kc_tensor_dense(&k->in[0], 0, node->dtype, 0, NULL);
    }
    k->place = (kc_place){.chip = 0, .core0 = 0, .n_cores = (uint32_t)cfg->chip.cores};
    return def->reference ? rk_check_reference(def, k, node, as, err) : NP_OK;
}

np_status run_kernel_of_node(const nn_tensor *node, const arch_config *cfg, kc_kernel *k,
                             np_err *err)
{
    char desc[256];
    memset(k, 0, sizeof *k);
    const kc_kernel_def *def = kc_kernel_find(node->op);
    bool done = false;
    if (!def && rk_stand_in(node, cfg, k, &done, err) != NP_OK)
        return err->status;
    if (done)
        return NP_OK;
    if (!def)
        return np_err_set(err, NP_ERR_MISSING, "no kernel for %s yet (node '%s')",
                          run_node_desc(node, desc, sizeof desc), node->name);
    /* outputs: the node's result; an in-place update with several outputs also writes the
     * state it updates, its sources 2, 3, ... (the optimizers: p, then m and v) */
    bool update = (nn_op_flags(node->op) & NN_OPF_UPDATE) != 0;
    int n_out = def->n_out;
    if ((def->n_in >= 0 && def->n_in != node->n_src) || n_out < 1 || n_out > KC_MAX_OUT ||
        (n_out > 1 && (!update || n_out > node->n_src)) || node->n_src > KC_MAX_IN)
        return np_err_set(err, NP_ERR_INCONSISTENT, "%s (node '%s'): the %s kernel takes %d "
                          "inputs and %d outputs, the node has %d sources and one result",
                          run_node_desc(node, desc, sizeof desc), node->name,
                          nn_op_name(node->op), def->n_in, def->n_out, node->n_src);
    k->op = node->op;
    k->n_in = node->n_src;
    k->n_out = n_out;
    for (int i = 0; i < node->n_src; i++)
        kc_tensor_of(&k->in[i], 0, node->src[i]);
    kc_tensor_of(&k->out[0], 0, node);
    for (int i = 1; i < n_out; i++)
        kc_tensor_of(&k->out[i], 0, node->src[i + 1]);
    if (!rk_attrs(def, node, k) && def->n_attrs && !def->reference)
        return np_err_set(err, NP_ERR_UNKNOWN_KEY, "%s (node '%s'): npusim run cannot yet map "
                          "the node's parameters onto the attributes of the %s kernel",
                          run_node_desc(node, desc, sizeof desc), node->name,
                          nn_op_name(node->op));
    k->place = (kc_place){.chip = 0, .core0 = 0, .n_cores = (uint32_t)cfg->chip.cores};
    if (def->reference)
        return rk_check_reference(def, k, node, node->op, err);
    return NP_OK;
}

/* ---- keys ---------------------------------------------------------------------------------- */

static size_t rk_tensor_key(const kc_tensor *t, char *buf, size_t n)
{
    size_t k = (size_t)snprintf(buf, n, "%s[", nn_dtype_name(t->dtype));
    for (int d = 0; d < t->ndim && k < n; d++)
        k += (size_t)snprintf(buf + k, n - k, "%s%" PRId64, d ? "," : "", t->shape[d]);
    /* strides only when they are not the dense row-major ones */
    int64_t dense = (int64_t)nn_dtype_size(t->dtype);
    bool is_dense = true;
    for (int d = t->ndim - 1; d >= 0; d--) {
        is_dense = is_dense && t->stride[d] == dense;
        dense *= t->shape[d];
    }
    if (!is_dense)
        for (int d = 0; d < t->ndim && k < n; d++)
            k += (size_t)snprintf(buf + k, n - k, "%s%" PRId64, d ? "," : "/", t->stride[d]);
    if (k < n)
        k += (size_t)snprintf(buf + k, n - k, "]");
    return k;
}

void run_kernel_key(const kc_kernel *k, char *buf, size_t n)
{
    size_t o = (size_t)snprintf(buf, n, "%s", nn_op_name(k->op));
    for (int i = 0; i < k->n_in && o < n; i++) {
        o += (size_t)snprintf(buf + o, n - o, " in%d=", i);
        if (o < n)
            o += rk_tensor_key(&k->in[i], buf + o, n - o);
    }
    for (int i = 0; i < k->n_out && o < n; i++) {
        o += (size_t)snprintf(buf + o, n - o, " out%d=", i);
        if (o < n)
            o += rk_tensor_key(&k->out[i], buf + o, n - o);
    }
    for (int i = 0; i < k->n_attrs && o < n; i++)
        o += (size_t)snprintf(buf + o, n - o, " %s=%.17g", k->attrs[i].name, k->attrs[i].f);
    for (int i = 0; i < k->n_epi && o < n; i++) {
        const kc_epi *e = &k->epi[i];
        o += (size_t)snprintf(buf + o, n - o, " epi=%s/%.17g", nn_op_name(e->op), e->f);
        if (e->has_arg && o < n)
            o += rk_tensor_key(&e->arg, buf + o, n - o);
    }
    if (o < n)
        snprintf(buf + o, n - o, " cores=%" PRIu32 "+%" PRIu32, k->place.core0,
                 k->place.n_cores ? k->place.n_cores : 1);
}

uint64_t run_arch_fingerprint(const arch_config *cfg)
{
    json_t *j = arch_to_json(cfg);
    uint64_t h = 0;
    const char *sections[] = {"core", "chip"};
    for (int i = 0; i < 2; i++) {
        char *s = j ? json_dumps(json_object_get(j, sections[i]), JSON_SORT_KEYS | JSON_COMPACT)
                    : NULL;
        if (s)
            h = run_hash_bytes(s, strlen(s), h);
        free(s);
    }
    json_decref(j);
    return h;
}

/* ---- the timer ----------------------------------------------------------------------------- */

/* A hash of the running executable's bytes: the build whose compiler and core model made a
 * timing (0 when it cannot be read; timings are then not kept in the file). */
static uint64_t rk_build_id(void)
{
    FILE *f = fopen("/proc/self/exe", "rb");
    if (!f)
        return 0;
    unsigned char buf[1 << 16];
    uint64_t h = 0;
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        h = run_hash_bytes(buf, n, h);
    bool bad = ferror(f) != 0;
    fclose(f);
    return bad ? 0 : h | 1;
}

typedef struct rk_entry {
    char *key;
    run_ktime t;
    uint64_t hbm_bytes;
    char name[64];
} rk_entry;

struct run_ktimer {
    const arch_config *cfg;
    uint64_t fingerprint; /* architecture x build */
    char *path;
    rk_entry *v;         /* timings of this architecture and build: from the file, then new */
    uint32_t n, cap;
    run_hmap index;      /* key hash -> entry */
    run_ktimer_stats st;
    void (*progress)(void *ctx, const char *what);
    void *progress_ctx;
};

static const run_unit rk_units[] = {RUN_UNIT_DMA, RUN_UNIT_MXU, RUN_UNIT_VPU};

static const rk_entry *rk_get(const run_ktimer *t, const char *key)
{
    uint64_t h = run_hash_bytes(key, strlen(key), 0);
    for (uint32_t it = 0, i; (i = run_hmap_next(&t->index, h, &it)) != RUN_HMAP_END;)
        if (!strcmp(t->v[i].key, key))
            return &t->v[i];
    return NULL;
}

static bool rk_put(run_ktimer *t, const char *key, const rk_entry *e)
{
    if (t->n == t->cap) {
        uint32_t cap = t->cap ? 2 * t->cap : 64;
        rk_entry *v = realloc(t->v, (size_t)cap * sizeof *v);
        if (!v)
            return false;
        t->v = v, t->cap = cap;
    }
    char *k = strdup(key);
    if (!k || !run_hmap_put(&t->index, run_hash_bytes(key, strlen(key), 0), t->n)) {
        free(k);
        return false;
    }
    t->v[t->n] = *e;
    t->v[t->n++].key = k;
    return true;
}

/* A line: fingerprint ps dma_ps mxu_ps vpu_ps hbm_bytes name key (the fingerprint in hex). */
static np_status rk_load(run_ktimer *t, np_err *err)
{
    FILE *f = fopen(t->path, "r");
    if (!f) {
        if (errno == ENOENT)
            return NP_OK;
        return np_err_set(err, NP_ERR_IO, "%s: cannot read the kernel cache: %s", t->path,
                          strerror(errno));
    }
    char line[RUN_KEY_MAX + 256];
    int lineno = 0;
    np_status st = NP_OK;
    while (st == NP_OK && fgets(line, sizeof line, f)) {
        lineno++;
        if (line[0] == '#' || line[0] == '\n')
            continue;
        uint64_t fp, v[5];
        int at = 0;
        rk_entry e = {0};
        if (sscanf(line, "%" SCNx64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64
                   " %63s %n", &fp, &v[0], &v[1], &v[2], &v[3], &v[4], e.name, &at) != 7 || !at) {
            st = np_err_at(err, NP_ERR_FORMAT, t->path, lineno, 1, "not a kernel cache entry "
                           "(fingerprint, ps, dma, mxu and vpu ps, HBM bytes, name, key)");
            break;
        }
        char *key = line + at;
        key[strcspn(key, "\n")] = '\0';
        if (fp != t->fingerprint || rk_get(t, key))
            continue;
        e.t.ps = v[0];
        for (int u = 0; u < 3; u++)
            e.t.unit_ps[rk_units[u]] = v[1 + u];
        e.hbm_bytes = v[4];
        if (!rk_put(t, key, &e))
            st = np_err_set(err, NP_ERR_NOMEM, "out of memory reading the kernel cache");
    }
    fclose(f);
    return st;
}

np_status run_ktimer_create(const arch_config *cfg, const char *path, run_ktimer **out,
                            np_err *err)
{
    run_ktimer *t = calloc(1, sizeof *t);
    if (!t || (path && !(t->path = strdup(path)))) {
        free(t);
        return np_err_set(err, NP_ERR_NOMEM, "out of memory");
    }
    t->cfg = cfg;
    if (t->path) {
        uint64_t build = rk_build_id();
        t->fingerprint = run_hash_bytes(&build, sizeof build, run_arch_fingerprint(cfg));
        if (!build) { /* no build identity: nothing can be known to be the same */
            free(t->path);
            t->path = NULL;
        }
    }
    if (t->path && rk_load(t, err) != NP_OK) {
        run_ktimer_free(t);
        return err->status;
    }
    *out = t;
    return NP_OK;
}

void run_ktimer_free(run_ktimer *t)
{
    if (!t)
        return;
    for (uint32_t i = 0; i < t->n; i++)
        free(t->v[i].key);
    free(t->path);
    free(t->v);
    run_hmap_free(&t->index);
    free(t);
}

void run_ktimer_set_progress(run_ktimer *t, void (*fn)(void *ctx, const char *what), void *ctx)
{
    t->progress = fn;
    t->progress_ctx = ctx;
}

run_ktimer_stats run_ktimer_get_stats(const run_ktimer *t) { return t->st; }

static double rk_wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* k compiled alone: every operand in a .bss buffer of its own, then halt on every core. */
static np_status rk_compile(const arch_config *cfg, const kc_kernel *k0, kc_result *res,
                            isa_program **prog, np_err *err)
{
    kc_kernel k = *k0;
    uint32_t cores = k.place.core0 + (k.place.n_cores ? k.place.n_cores : 1);
    kc_prog *p;
    if (kc_prog_new(cfg, &(kc_prog_opts){.cores = cores}, &p, err) != NP_OK)
        return err->status;
    np_status st = NP_OK;
    for (int i = 0; i < k.n_in && st == NP_OK; i++)
        st = kc_prog_bss(p, NULL, kc_tensor_extent(&k.in[i]), &k.in[i].addr, err);
    for (int i = 0; i < k.n_epi && st == NP_OK; i++)
        if (k.epi[i].has_arg)
            st = kc_prog_bss(p, NULL, kc_tensor_extent(&k.epi[i].arg), &k.epi[i].arg.addr, err);
    for (int i = 0; i < k.n_out && st == NP_OK; i++)
        st = kc_prog_bss(p, NULL, kc_tensor_extent(&k.out[i]), &k.out[i].addr, err);
    if (st == NP_OK)
        st = kc_compile(p, &k, res, err);
    if (st == NP_OK)
        st = kc_prog_finish(p, err);
    if (st == NP_OK)
        *prog = kc_prog_take(p);
    kc_prog_free(p);
    return st;
}

/* The duration and the mean busy time over the chip's cores of the DMA, matrix and vector
 * units, from a core report. */
static void rk_from_report(const arch_config *cfg, const core_report *r, run_ktime *t)
{
    memset(t, 0, sizeof *t);
    t->ps = r->total_ps;
    double ps_per_cycle = r->total_cycles ? (double)r->total_ps / (double)r->total_cycles : 0;
    uint64_t busy[3] = {0};
    for (uint32_t i = 0; i < r->n_units; i++) { /* 5 per core: dma, mxu, vpu, comm, ctrl */
        unsigned u = i % 5;
        if (u < 3)
            busy[u] += r->units[i].busy_cycles;
    }
    for (int u = 0; u < 3; u++)
        t->unit_ps[rk_units[u]] =
            (uint64_t)((double)busy[u] * ps_per_cycle / (double)cfg->chip.cores + 0.5);
}

np_status run_ktimer_time(void *ctx, const run_kernel *rk, run_ktime *out, np_err *err)
{
    run_ktimer *t = ctx;
    run_kspec *ks = rk->data;
    const rk_entry *have = t->path ? rk_get(t, rk->key) : NULL;
    if (have) {
        *out = have->t;
        snprintf(ks->name, sizeof ks->name, "%s", have->name);
        ks->hbm_bytes = have->hbm_bytes;
        t->st.from_file++;
        return NP_OK;
    }
    if (t->progress)
        t->progress(t->progress_ctx, rk->key);
    double t0 = rk_wall();
    kc_result res;
    isa_program *prog = NULL;
    core_report *rep = NULL;
    np_status st = rk_compile(t->cfg, &ks->k, &res, &prog, err);
    if (st == NP_OK) {
        t->st.compiled++;
        st = core_sim_run_opts(t->cfg, prog, NULL, NULL, &rep, err);
    }
    isa_program_free(prog);
    if (st != NP_OK) {
        np_err_prefix(err, "kernel %s", rk->key);
        return st;
    }
    rk_from_report(t->cfg, rep, out);
    core_report_free(rep);
    t->st.simulated++;
    snprintf(ks->name, sizeof ks->name, "%s", res.name);
    ks->hbm_bytes = res.hbm_read_bytes + res.hbm_write_bytes;
    t->st.sim_wall_s += rk_wall() - t0;
    if (!t->path)
        return NP_OK;
    rk_entry e = {.t = *out, .hbm_bytes = ks->hbm_bytes};
    snprintf(e.name, sizeof e.name, "%s", ks->name[0] ? ks->name : nn_op_name(ks->k.op));
    if (!rk_put(t, rk->key, &e))
        return np_err_set(err, NP_ERR_NOMEM, "out of memory");
    FILE *f = fopen(t->path, "a");
    bool ok = f && fprintf(f, "%016" PRIx64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64
                           " %" PRIu64 " %s %s\n", t->fingerprint, out->ps,
                           out->unit_ps[RUN_UNIT_DMA], out->unit_ps[RUN_UNIT_MXU],
                           out->unit_ps[RUN_UNIT_VPU], ks->hbm_bytes, e.name, rk->key) > 0;
    if (f && fclose(f) != 0)
        ok = false;
    if (!ok)
        return np_err_set(err, NP_ERR_IO, "%s: cannot append to the kernel cache: %s", t->path,
                          strerror(errno));
    return NP_OK;
}
