/* kc_shard.c — shard_slice: a rank's part of a tensor along one dim, the part chosen at run
 * time by a value in HBM (the plan's RANKVALUE leaf: the rank's coordinate x the part's
 * length, framework/plan.h), so one program serves every rank of a group.
 *
 * in[0] a [..., D, ...], in[1] the offset (an i32 or i8 scalar), out [..., D / size, ...]
 * along attribute dim: part k = offset / (D / size) (as the distributed executor takes it,
 * framework/dist.c). The address depends on data, so the copy is an indexed one: the VPU
 * turns the offset into the part's row indices (k x len + i, i < len: the offset loaded into
 * the scratchpad, divided exactly in fp32, vpu.iota added), and dma.gather moves the rows —
 * each the elements after dim, contiguous — from a straight into out, HBM to HBM, per index
 * of the dims before dim and per piece of at most 65535 elements of a row. An offset past the
 * tensor is a fault of the run naming the index (dma.gather checks its limit). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "kernel.h"
#include "plan.h"

#define KS_MAX_N 65535u /* a gather's n0 and n1 */

/* Elements after dim (a row), or 0 when they are not contiguous. */
static int64_t row_elems(const kc_tensor *t, int dim)
{
    int64_t n = 1, e = (int64_t)nn_dtype_size(t->dtype);
    for (int d = t->ndim - 1; d > dim; d--) {
        if (t->shape[d] != 1 && t->stride[d] != n * e)
            return 0;
        n *= t->shape[d];
    }
    return n;
}

static void sem(kc_ctx *x, bool wait, isa_unit u, unsigned s)
{
    if (wait)
        ISA_EMIT(x->e, SEM_WAIT, isa_enum(u), isa_sem(s));
    else
        ISA_EMIT(x->e, SEM_SIGNAL, isa_enum(u), isa_sem(s));
}

/* vpu ops on single fp32 elements at scratchpad offsets */
#define ONE isa_imm(1), isa_imm(1)

static np_status shard_compile(kc_ctx *x)
{
    const kc_kernel *k = x->k;
    const kc_tensor *A = &k->in[0], *O = &k->in[1], *Y = &k->out[0];
    int dim = (int)kc_attr_int(x, "dim");
    if (dim >= A->ndim || A->ndim != Y->ndim || A->dtype != Y->dtype)
        return kc_fail(x, NP_ERR_INCONSISTENT, "out must be a's dims and dtype (dim %d of %d)",
                       dim, A->ndim);
    for (int d = 0; d < A->ndim; d++)
        if (d != dim && A->shape[d] != Y->shape[d])
            return kc_fail(x, NP_ERR_INCONSISTENT, "out differs from a in dim %d", d);
    int64_t D = A->shape[dim], len = Y->shape[dim];
    if (len < 1 || D % len)
        return kc_fail(x, NP_ERR_INCONSISTENT, "a's dim %d of %" PRId64 " does not split into "
                       "parts of %" PRId64, dim, D, len);
    int64_t size = kc_attr_int(x, "size");
    if (size && size * len != D)
        return kc_fail(x, NP_ERR_INCONSISTENT, "a group of %" PRId64 " ranks takes parts of %"
                       PRId64 " of a's dim %d, not %" PRId64, size, D / size, dim, len);
    if ((O->dtype != NN_I32 && O->dtype != NN_I8) || kc_tensor_numel(O) != 1)
        return kc_fail(x, NP_ERR_INCONSISTENT, "the offset must be an integer scalar");
    int64_t row = row_elems(A, dim), yrow = row_elems(Y, dim);
    if (!row || !yrow)
        return kc_fail(x, NP_ERR_INCONSISTENT, "the dims after dim %d must be packed in a and "
                       "out", dim);
    int64_t e = (int64_t)nn_dtype_size(A->dtype), sa = A->stride[dim], sy = Y->stride[dim];
    if (D >= (1 << 24) || sa >= (1 << 24) || sy >= (1 << 24))
        return kc_fail(x, NP_ERR_RANGE, "a dim of %" PRId64 " (below 2^24) with rows %" PRId64
                       " and %" PRId64 " bytes apart (below 16 MiB)", D, sa, sy);
    isa_emit *em = x->e;
    isa_dtype dt = kc_isa_dtype(A->dtype), ot = kc_isa_dtype(O->dtype);
    kc_core(x, k->place.core0);
    /* A part that is one block (dim packed in a and out, under 16 MiB) is one indexed row:
     * index k, rows len x row elements apart; else its rows are indexed one by one: k x len +
     * i, rows sa bytes apart. The indices are computed in fp32 (exact below 2^24). */
    bool block = sa == row * e && sy == yrow * e && len * row * e < (1 << 24);
    int64_t n_idx = block ? 1 : len;
    uint64_t cols = n_idx < 1024 ? (uint64_t)n_idx : 1024;
    uint64_t rows = ((uint64_t)n_idx + cols - 1) / cols;
    uint64_t s_off, s_t, s_iota, s_idx;
    unsigned so, si, se;
    kc_spad_alloc(x, 64, 64, &s_off);
    kc_spad_alloc(x, 64, 64, &s_t);
    kc_spad_alloc(x, rows * cols * 4, 64, &s_iota);
    kc_spad_alloc(x, rows * cols * 4, 64, &s_idx);
    kc_sem_alloc(x, &so), kc_sem_alloc(x, &si), kc_sem_alloc(x, &se);
    if (kc_status(x) != NP_OK)
        return kc_status(x);
    ISA_EMIT(em, DMA_COPY, isa_spad(0, s_off), isa_hbm(0, O->addr), isa_enum(ot), isa_imm(1));
    sem(x, false, ISA_UNIT_DMA, so);
    sem(x, true, ISA_UNIT_VPU, so);
    uint64_t o = s_t, q = s_t + 4, r = s_t + 8, m = s_t + 12;
    float L = (float)len;
    ISA_EMIT(em, VPU_CAST, isa_spad(0, o), isa_spad(0, s_off), ONE, isa_enum(ISA_DTYPE_FP32),
             isa_enum(ot));
    /* k = round(o / len), one less when k x len passes o: the floor */
    ISA_EMIT(em, VPU_DIVS, isa_spad(0, q), isa_spad(0, o), isa_f32(L), ONE,
             isa_enum(ISA_DTYPE_FP32));
    ISA_EMIT(em, VPU_CAST, isa_spad(0, r), isa_spad(0, q), ONE, isa_enum(ISA_DTYPE_INT32),
             isa_enum(ISA_DTYPE_FP32));
    ISA_EMIT(em, VPU_CAST, isa_spad(0, q), isa_spad(0, r), ONE, isa_enum(ISA_DTYPE_FP32),
             isa_enum(ISA_DTYPE_INT32));
    ISA_EMIT(em, VPU_MULS, isa_spad(0, r), isa_spad(0, q), isa_f32(L), ONE,
             isa_enum(ISA_DTYPE_FP32));
    ISA_EMIT(em, VPU_SUB, isa_spad(0, r), isa_spad(0, o), isa_spad(0, r), ONE,
             isa_enum(ISA_DTYPE_FP32));
    ISA_EMIT(em, VPU_CMPLTS, isa_spad(0, m), isa_spad(0, r), isa_f32(0.0f), ONE,
             isa_enum(ISA_DTYPE_FP32));
    ISA_EMIT(em, VPU_SUB, isa_spad(0, q), isa_spad(0, q), isa_spad(0, m), ONE,
             isa_enum(ISA_DTYPE_FP32));
    if (block) {
        ISA_EMIT(em, VPU_CAST, isa_spad(0, s_idx), isa_spad(0, q), ONE,
                 isa_enum(ISA_DTYPE_INT32), isa_enum(ISA_DTYPE_FP32));
    } else {
        ISA_EMIT(em, VPU_MULS, isa_spad(0, q), isa_spad(0, q), isa_f32(L), ONE,
                 isa_enum(ISA_DTYPE_FP32));
        ISA_EMIT(em, VPU_IOTA, isa_spad(0, s_iota), isa_val(0, 0), isa_imm((int64_t)cols),
                 isa_imm(1), isa_imm((int64_t)rows), isa_imm((int64_t)cols),
                 isa_enum(ISA_DTYPE_FP32));
        ISA_EMIT(em, VPU_ADD, isa_spad(0, s_iota), isa_spad(0, s_iota), isa_spad(0, q),
                 isa_imm((int64_t)rows), isa_imm((int64_t)cols), isa_enum(ISA_DTYPE_FP32),
                 isa_enum(ISA_BCAST_SCALAR));
        ISA_EMIT(em, VPU_CAST, isa_spad(0, s_idx), isa_spad(0, s_iota), isa_imm((int64_t)rows),
                 isa_imm((int64_t)cols), isa_enum(ISA_DTYPE_INT32), isa_enum(ISA_DTYPE_FP32));
    }
    sem(x, false, ISA_UNIT_VPU, si);
    sem(x, true, ISA_UNIT_DMA, si);
    /* the gathers: per index of the dims before dim (their loops), per piece of a row, per
     * run of at most 65535 rows */
    unsigned ra, ry;
    kc_reg_alloc(x, &ra), kc_reg_alloc(x, &ry);
    if (kc_status(x) != NP_OK)
        return kc_status(x);
    ISA_EMIT(em, LI, isa_reg(ra), isa_imm((int64_t)A->addr));
    ISA_EMIT(em, LI, isa_reg(ry), isa_imm((int64_t)Y->addr));
    kc_loop loops[KC_MAX_DIMS];
    int nl = 0;
    uint64_t outer = 1;
    for (int d = 0; d < dim; d++) {
        if (A->shape[d] == 1)
            continue;
        unsigned regs[2] = {ra, ry};
        int64_t steps[2] = {A->stride[d], Y->stride[d]};
        kc_loop_begin(x, &loops[nl++], (uint64_t)A->shape[d], 2, regs, steps);
        outer *= (uint64_t)A->shape[d];
    }
    for (int64_t c0 = 0; block && c0 < len * row; c0 += KS_MAX_N) { /* the part at once */
        int64_t n0 = len * row - c0 < KS_MAX_N ? len * row - c0 : KS_MAX_N;
        ISA_EMIT(em, DMA_GATHER, isa_hbm(ry, (uint64_t)(c0 * e)), isa_hbm(ra, (uint64_t)(c0 * e)),
                 isa_spad(0, s_idx), isa_enum(dt), isa_imm(n0), isa_imm(1), isa_imm(D / len),
                 .src_s1 = isa_imm(len * row * e == n0 * e ? 0 : len * row * e));
    }
    for (int64_t c0 = 0; !block && c0 < row; c0 += KS_MAX_N)
        for (int64_t i0 = 0; i0 < len; i0 += KS_MAX_N) {
            int64_t n0 = row - c0 < KS_MAX_N ? row - c0 : KS_MAX_N;
            int64_t n1 = len - i0 < KS_MAX_N ? len - i0 : KS_MAX_N;
            ISA_EMIT(em, DMA_GATHER, isa_hbm(ry, (uint64_t)(i0 * sy + c0 * e)),
                     isa_hbm(ra, (uint64_t)(c0 * e)), isa_spad(0, s_idx + (uint64_t)i0 * 4),
                     isa_enum(dt), isa_imm(n0), isa_imm(n1), isa_imm(D),
                     .dst_s1 = isa_imm(sy == n0 * e ? 0 : sy),
                     .src_s1 = isa_imm(sa == n0 * e ? 0 : sa));
        }
    while (nl > 0)
        kc_loop_end(x, &loops[--nl]);
    sem(x, false, ISA_UNIT_DMA, se); /* the DMA queue ends on its own copies */
    sem(x, true, ISA_UNIT_DMA, se);
    uint64_t bytes = outer * (uint64_t)(len * row * e);
    x->res->hbm_read_bytes = bytes + nn_dtype_size(O->dtype);
    x->res->hbm_write_bytes = bytes;
    /* the minimum: the part (not the whole of a), the offset, the output */
    x->res->hbm_bytes_min = x->res->hbm_read_bytes + x->res->hbm_write_bytes;
    x->res->cores = 1;
    if (block)
        snprintf(x->res->schedule, sizeof x->res->schedule, "dma.gather of the part (%" PRId64
                 " elements) x %" PRIu64 ", chosen by the offset", len * row, outer);
    else
        snprintf(x->res->schedule, sizeof x->res->schedule, "dma.gather of %" PRId64 " rows of %"
                 PRId64 " elements x %" PRIu64 ", the part chosen by the offset", len, row, outer);
    return kc_status(x);
}

/* ---- the framework's computation (checks) --------------------------------------------------- */

static int64_t attr_or(const kc_kernel *k, const char *name, int64_t dflt)
{
    for (int i = 0; i < k->n_attrs; i++)
        if (k->attrs[i].name && !strcmp(k->attrs[i].name, name))
            return k->attrs[i].i;
    return dflt;
}

/* The framework's node (nn_shard_slice with the attributes' tag, group size and dim): what
 * the kernel computes. The reference executor runs it for a group of one only; for more, with
 * the offset's value known, the part is the distributed executor's (framework/dist.c: part
 * offset / len), as a framework slice. */
static np_status shard_reference(nn_graph *g, const kc_kernel *k, nn_tensor *const *in,
                                 nn_tensor **out, np_err *err)
{
    int dim = (int)attr_or(k, "dim", 0);
    if (dim >= in[0]->ndim)
        return np_err_set(err, NP_ERR_RANGE, "shard_slice: dim %d of %d", dim, in[0]->ndim);
    int64_t len = k->out[0].shape[dim], D = in[0]->ne[dim];
    int64_t size = attr_or(k, "size", 0) ? attr_or(k, "size", 0) : D / len;
    if (size > 1 && in[1]->data) {
        int64_t part = (int64_t)in[1]->data[0] / len;
        out[0] = nn_slice(g, in[0], dim, part * len, (part + 1) * len);
    } else {
        out[0] = nn_shard_slice(g, in[0], in[1], (int)attr_or(k, "tag", 0), (int)size, dim);
    }
    return out[0] ? NP_OK : nn_graph_status(g, err);
}

/* The node's parameters (framework/op_comm.c): its group's tag and size, and the dim. */
static np_status shard_from_node(const nn_tensor *t, kc_kernel *k, np_err *err)
{
    if (k->n_attrs + 3 > KC_MAX_ATTRS)
        return np_err_set(err, NP_ERR_RANGE, "shard_slice: no room for its attributes");
    k->attrs[k->n_attrs++] = KC_INT("dim", t->ip[NN_COMM_IP_DIM]);
    k->attrs[k->n_attrs++] = KC_INT("size", t->ip[NN_COMM_IP_SIZE]);
    k->attrs[k->n_attrs++] = KC_INT("tag", t->ip[NN_COMM_IP_TAG]);
    return NP_OK;
}

/* The offset input's values: any element of the dim (the kernel takes its part). */
static int64_t shard_index_bound(const kc_kernel *k, int in)
{
    int dim = (int)attr_or(k, "dim", 0);
    return in == 1 && dim < k->in[0].ndim ? k->in[0].shape[dim] : 0;
}

/* ---- `npusim kernel --op` ------------------------------------------------------------------- */

static np_status shard_build(kc_prog *p, const kc_spec *s, kc_kernel *k, np_err *err)
{
    const kc_spec_val *sh = kc_spec_get(s, "shape"), *dt = kc_spec_get(s, "dtype");
    int64_t size = kc_spec_get(s, "size")->i, dim = kc_spec_get(s, "dim")->i;
    size = size ? size : 2;
    if (!sh || !sh->ndim || dim >= sh->ndim || sh->shape[dim] % size)
        return np_err_set(err, NP_ERR_RANGE, "shard_slice: shape's dim %" PRId64 " must split "
                          "into size = %" PRId64 " parts", dim, size);
    memset(k, 0, sizeof *k);
    k->op = NN_OP_SHARD_SLICE, k->n_in = 2, k->n_out = 1;
    int64_t o[KC_MAX_DIMS];
    memcpy(o, sh->shape, sizeof(int64_t) * (size_t)sh->ndim);
    o[dim] /= size;
    kc_tensor_dense(&k->in[0], 0, (nn_dtype)dt->i, sh->ndim, sh->shape);
    kc_tensor_dense(&k->in[1], 0, NN_I32, 1, (int64_t[]){1});
    kc_tensor_dense(&k->out[0], 0, (nn_dtype)dt->i, sh->ndim, o);
    for (int i = 0; i < 3; i++) {
        kc_tensor *t = i < 2 ? &k->in[i] : &k->out[0];
        if (kc_prog_bss(p, NULL, kc_tensor_bytes(t), &t->addr, err) != NP_OK)
            return err->status;
    }
    return NP_OK;
}

static const kc_attr_def shard_keys[] = {
    {"shape", KC_ATTR_SHAPE, KC_REQUIRED, 0, 0, "a's shape, AxBx..."},
    {"dtype", KC_ATTR_DTYPE, NN_BF16, 0, 0, "its element type"},
};
static const kc_attr_def shard_attrs[] = {
    {"dim", KC_ATTR_INT, 0, 0, KC_MAX_DIMS - 1, "the dim cut into parts"},
    {"size", KC_ATTR_INT, 0, 0, 1 << 24, "the group's ranks (0: a's dim / out's)"},
    {"tag", KC_ATTR_INT, 0, 0, NN_COMM_TAG_COUNT - 1,
     "the group's mesh axis (tp, sp, dp, zero, pp, pp-sg: the node's)"},
};

const kc_kernel_def kc_shard_slice_def = {
    .op = NN_OP_SHARD_SLICE, .n_in = 2, .n_out = 1, .attrs = shard_attrs,
    .n_attrs = sizeof shard_attrs / sizeof shard_attrs[0], .compile = shard_compile,
    .keys = shard_keys, .n_keys = sizeof shard_keys / sizeof shard_keys[0], .build = shard_build,
    .reference = shard_reference, .index_bound = shard_index_bound,
    .from_node = shard_from_node,
    .doc = "the offset turned into the part's row indices by the VPU, the rows moved HBM to HBM "
           "by dma.gather",
};
