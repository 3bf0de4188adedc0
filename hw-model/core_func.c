/* core_func.c — functional-mode memories and instruction semantics (see core_func.h). */
#include "core_func.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core_cost.h"
#include "isa_asm.h"
#include "philox.h"

#define PAGE_BITS 16
#define PAGE_BYTES ((uint64_t)1 << PAGE_BITS)

typedef struct core_fmem {
    uint8_t *spad, *acc;
    /* the stationary tile of the last mxu.load */
    double *w;
    uint64_t wk, wn;
} core_fmem;

struct core_func {
    const arch_config *cfg;
    uint8_t **pages; /* HBM pages, NULL until written */
    uint64_t n_pages;
    core_fmem *cores;
    uint32_t n_cores;
    double *tmp; /* scratch for one operation */
    size_t tmp_n;
};

/* ---- numbers ---------------------------------------------------------------------------------- */

static float fp16_to_f32(uint16_t h)
{
    uint32_t s = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 0x1f, m = h & 0x3ff;
    float f;
    if (e == 0)
        f = ldexpf((float)m, -24); /* zero or subnormal */
    else if (e == 31)
        f = m ? NAN : INFINITY;
    else
        f = ldexpf((float)(m | 0x400), (int)e - 25);
    uint32_t bits;
    memcpy(&bits, &f, 4);
    bits |= s;
    memcpy(&f, &bits, 4);
    return f;
}

double core_elem_get(const uint8_t *p, isa_dtype d)
{
    switch (d) {
    case ISA_DTYPE_FP32: {
        float f;
        memcpy(&f, p, 4);
        return f;
    }
    case ISA_DTYPE_BF16: {
        uint32_t bits = (uint32_t)(p[0] | (p[1] << 8)) << 16;
        float f;
        memcpy(&f, &bits, 4);
        return f;
    }
    case ISA_DTYPE_FP16: return fp16_to_f32((uint16_t)(p[0] | (p[1] << 8)));
    case ISA_DTYPE_INT8: return (int8_t)p[0];
    case ISA_DTYPE_INT32: {
        int32_t v;
        memcpy(&v, p, 4);
        return v;
    }
    default: return 0;
    }
}

static double sat_round(double v, double lo, double hi)
{
    if (isnan(v))
        return 0;
    v = nearbyint(v);
    return v < lo ? lo : v > hi ? hi : v;
}

void core_elem_put(uint8_t *p, isa_dtype d, double v)
{
    switch (d) {
    case ISA_DTYPE_FP32: {
        float f = (float)v;
        memcpy(p, &f, 4);
        break;
    }
    case ISA_DTYPE_BF16:
    case ISA_DTYPE_FP16: {
        uint16_t h = d == ISA_DTYPE_BF16 ? isa_f32_to_bf16((float)v) : isa_f32_to_fp16((float)v);
        p[0] = (uint8_t)h, p[1] = (uint8_t)(h >> 8);
        break;
    }
    case ISA_DTYPE_INT8: p[0] = (uint8_t)(int8_t)sat_round(v, -128, 127); break;
    case ISA_DTYPE_INT32: {
        int32_t x = (int32_t)sat_round(v, -2147483648.0, 2147483647.0);
        memcpy(p, &x, 4);
        break;
    }
    default: break;
    }
}

/* ---- memories --------------------------------------------------------------------------------- */

np_status core_func_create(const arch_config *cfg, const isa_program *p, core_func **out,
                           np_err *err)
{
    *out = NULL;
    core_func *f = calloc(1, sizeof *f);
    if (!f)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory creating functional-mode memories");
    f->cfg = cfg;
    /* the HBM, and after it a global buffer's addresses (chip.l2_mode buffer) */
    f->n_pages = (core_space_bytes(cfg, ISA_SPACE_HBM) + PAGE_BYTES - 1) >> PAGE_BITS;
    f->pages = calloc(f->n_pages, sizeof *f->pages);
    if (!f->pages) {
        core_func_free(f);
        return np_err_set(err, NP_ERR_NOMEM, "out of memory creating functional-mode memories");
    }
    if (core_func_load(f, p, err) != NP_OK) {
        core_func_free(f);
        return err->status;
    }
    *out = f;
    return NP_OK;
}

void core_func_free(core_func *f)
{
    if (!f)
        return;
    if (f->pages)
        for (uint64_t i = 0; i < f->n_pages; i++)
            free(f->pages[i]);
    free(f->pages);
    if (f->cores)
        for (uint32_t i = 0; i < f->n_cores; i++) {
            free(f->cores[i].spad);
            free(f->cores[i].acc);
            free(f->cores[i].w);
        }
    free(f->cores);
    free(f->tmp);
    free(f);
}

np_status core_func_load(core_func *f, const isa_program *p, np_err *err)
{
    for (uint32_t i = 0; f->cores && i < f->n_cores; i++) {
        free(f->cores[i].spad);
        free(f->cores[i].acc);
        free(f->cores[i].w);
    }
    free(f->cores);
    f->n_cores = 0;
    f->cores = calloc(p->n_cores ? p->n_cores : 1, sizeof *f->cores);
    if (!f->cores)
        goto nomem;
    f->n_cores = p->n_cores;
    for (uint32_t i = 0; i < p->n_cores; i++) {
        f->cores[i].spad = calloc(1, f->cfg->core.sram_bytes);
        f->cores[i].acc = calloc(1, f->cfg->core.acc_bytes);
        if (!f->cores[i].spad || !f->cores[i].acc)
            goto nomem;
    }
    for (uint32_t i = 0; i < p->n_data; i++) {
        const isa_data *d = &p->data[i];
        if (d->bytes && d->addr + d->size <= f->cfg->chip.hbm_bytes &&
            core_func_hbm_write(f, d->addr, d->bytes, d->size, err) != NP_OK)
            return err->status;
    }
    return NP_OK;
nomem:
    return np_err_set(err, NP_ERR_NOMEM, "out of memory creating functional-mode memories");
}

np_status core_func_hbm_write(core_func *f, uint64_t addr, const void *buf, uint64_t n,
                              np_err *err)
{
    const uint8_t *s = buf;
    while (n) {
        uint64_t pg = addr >> PAGE_BITS, off = addr & (PAGE_BYTES - 1);
        uint64_t k = PAGE_BYTES - off < n ? PAGE_BYTES - off : n;
        if (!f->pages[pg] && !(f->pages[pg] = calloc(1, PAGE_BYTES)))
            return np_err_set(err, NP_ERR_NOMEM, "out of memory for simulated HBM");
        memcpy(f->pages[pg] + off, s, k);
        s += k, addr += k, n -= k;
    }
    return NP_OK;
}

np_status core_func_hbm_read(core_func *f, uint64_t addr, void *buf, uint64_t n, np_err *err)
{
    (void)err;
    uint8_t *d = buf;
    while (n) {
        uint64_t pg = addr >> PAGE_BITS, off = addr & (PAGE_BYTES - 1);
        uint64_t k = PAGE_BYTES - off < n ? PAGE_BYTES - off : n;
        if (f->pages[pg])
            memcpy(d, f->pages[pg] + off, k);
        else
            memset(d, 0, k);
        d += k, addr += k, n -= k;
    }
    return NP_OK;
}

/* Copies n bytes between any two spaces of core ci. */
static np_status mem_read(core_func *f, uint32_t ci, isa_space s, uint64_t a, void *buf,
                          uint64_t n, np_err *err)
{
    if (s == ISA_SPACE_HBM)
        return core_func_hbm_read(f, a, buf, n, err);
    memcpy(buf, (s == ISA_SPACE_ACC ? f->cores[ci].acc : f->cores[ci].spad) + a, n);
    return NP_OK;
}

static np_status mem_write(core_func *f, uint32_t ci, isa_space s, uint64_t a, const void *buf,
                           uint64_t n, np_err *err)
{
    if (s == ISA_SPACE_HBM)
        return core_func_hbm_write(f, a, buf, n, err);
    memcpy((s == ISA_SPACE_ACC ? f->cores[ci].acc : f->cores[ci].spad) + a, buf, n);
    return NP_OK;
}

np_status core_func_mem_read(core_func *f, uint32_t ci, isa_space s, uint64_t a, void *buf,
                             uint64_t n, np_err *err)
{
    return mem_read(f, ci, s, a, buf, n, err);
}

np_status core_func_mem_write(core_func *f, uint32_t ci, isa_space s, uint64_t a,
                              const void *buf, uint64_t n, np_err *err)
{
    return mem_write(f, ci, s, a, buf, n, err);
}

/* A scratchpad tile element pointer (ranges were checked at dispatch). */
static uint8_t *spad_at(core_func *f, uint32_t ci, const isa_opnd *o, uint64_t row,
                        uint64_t col, uint64_t row_bytes, int64_t stride, isa_dtype d)
{
    uint64_t s = stride ? (uint64_t)stride : row_bytes;
    return f->cores[ci].spad + (uint64_t)o->val + row * s + col * isa_dtype_size[d];
}

static np_status tmp_reserve(core_func *f, size_t n, np_err *err)
{
    if (f->tmp_n >= n)
        return NP_OK;
    double *t = realloc(f->tmp, n * sizeof *t);
    if (!t)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory in functional mode");
    f->tmp = t, f->tmp_n = n;
    return NP_OK;
}

/* ---- semantics -------------------------------------------------------------------------------- */

static double act_apply(isa_act a, double x)
{
    switch (a) {
    case ISA_ACT_RELU: return x > 0 ? x : 0;
    case ISA_ACT_GELU: return 0.5 * x * (1 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
    case ISA_ACT_SILU: return x / (1 + exp(-x));
    case ISA_ACT_TANH: return tanh(x);
    case ISA_ACT_SIGMOID: return 1 / (1 + exp(-x));
    default: return x;
    }
}

static np_status exec_dma(core_func *f, uint32_t ci, const isa_args_DMA_COPY *a, np_err *err)
{
    uint64_t e = isa_dtype_size[a->dtype.val], row = (uint64_t)a->n0.val * e;
    uint64_t n1 = (uint64_t)a->n1.val, n2 = (uint64_t)a->n2.val;
    uint64_t ss1 = a->src_s1.val ? (uint64_t)a->src_s1.val : row, ds1 = a->dst_s1.val ? (uint64_t)a->dst_s1.val : row;
    uint64_t ss2 = a->src_s2.val ? (uint64_t)a->src_s2.val : n1 * ss1, ds2 = a->dst_s2.val ? (uint64_t)a->dst_s2.val : n1 * ds1;
    uint8_t buf[4096];
    for (uint64_t i2 = 0; i2 < n2; i2++)
        for (uint64_t i1 = 0; i1 < n1; i1++)
            for (uint64_t off = 0; off < row; off += sizeof buf) {
                uint64_t k = row - off < sizeof buf ? row - off : sizeof buf;
                if (mem_read(f, ci, (isa_space)a->src.space, (uint64_t)a->src.val + i2 * ss2 + i1 * ss1 + off, buf, k, err) != NP_OK ||
                    mem_write(f, ci, (isa_space)a->dst.space, (uint64_t)a->dst.val + i2 * ds2 + i1 * ds1 + off, buf, k, err) != NP_OK)
                    return err->status;
            }
    return NP_OK;
}

static np_status exec_load(core_func *f, uint32_t ci, const isa_args_MXU_LOAD *a, np_err *err)
{
    core_fmem *c = &f->cores[ci];
    isa_dtype d = (isa_dtype)a->dtype.val;
    uint64_t k = (uint64_t)a->k.val, n = (uint64_t)a->n.val, e = isa_dtype_size[d];
    double *w = realloc(c->w, k * n * sizeof *w);
    if (!w)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory in functional mode");
    c->w = w, c->wk = k, c->wn = n;
    for (uint64_t kk = 0; kk < k; kk++)
        for (uint64_t j = 0; j < n; j++)
            w[kk * n + j] = a->trans.val
                                ? core_elem_get(spad_at(f, ci, &a->w, j, kk, k * e, a->stride.val, d), d)
                                : core_elem_get(spad_at(f, ci, &a->w, kk, j, n * e, a->stride.val, d), d);
    return NP_OK;
}

static void exec_mm(core_func *f, uint32_t ci, const isa_args_MXU_MM *a, bool first)
{
    core_fmem *c = &f->cores[ci];
    isa_dtype d = (isa_dtype)a->dtype.val;
    uint64_t m = (uint64_t)a->m.val, k = c->wk, n = c->wn, e = isa_dtype_size[d];
    bool set = a->mode.val == ISA_ACCM_SET || (a->mode.val == ISA_ACCM_FIRST && first);
    uint8_t *acc = c->acc + (uint64_t)a->acc.val;
    for (uint64_t i = 0; i < m; i++)
        for (uint64_t j = 0; j < n; j++) {
            uint8_t *p = acc + (i * n + j) * 4;
            if (d == ISA_DTYPE_INT8 || d == ISA_DTYPE_INT32) {
                uint32_t s = 0;
                if (!set)
                    memcpy(&s, p, 4);
                for (uint64_t kk = 0; kk < k; kk++)
                    s += (uint32_t)((int64_t)core_elem_get(spad_at(f, ci, &a->a, i, kk, k * e, a->stride.val, d), d) *
                                    (int64_t)c->w[kk * n + j]);
                memcpy(p, &s, 4);
            } else {
                float s = 0;
                if (!set)
                    memcpy(&s, p, 4);
                for (uint64_t kk = 0; kk < k; kk++)
                    s += (float)core_elem_get(spad_at(f, ci, &a->a, i, kk, k * e, a->stride.val, d), d) *
                         (float)c->w[kk * n + j];
                memcpy(p, &s, 4);
            }
        }
}

static void exec_drain(core_func *f, uint32_t ci, const isa_args_MXU_DRAIN *a)
{
    core_fmem *c = &f->cores[ci];
    isa_dtype d = (isa_dtype)a->dtype.val;
    uint64_t m = (uint64_t)a->m.val, n = (uint64_t)a->n.val, e = isa_dtype_size[d];
    bool ints = d == ISA_DTYPE_INT8 || d == ISA_DTYPE_INT32;
    double scale = isa_opnd_f32(&a->scale);
    for (uint64_t i = 0; i < m; i++)
        for (uint64_t j = 0; j < n; j++) {
            const uint8_t *p = c->acc + (uint64_t)a->acc.val + (i * n + j) * 4;
            double v = core_elem_get(p, ints ? ISA_DTYPE_INT32 : ISA_DTYPE_FP32) * scale;
            if (a->bias.space != ISA_SPACE_NONE)
                v += core_elem_get(c->spad + (uint64_t)a->bias.val + j * 4, ISA_DTYPE_FP32);
            core_elem_put(spad_at(f, ci, &a->dst, i, j, n * e, a->stride.val, d), d,
                          act_apply((isa_act)a->act.val, v));
        }
}

/* ---- per-op semantics of the elementwise and reduction families ------------------------------- */

typedef double (*core_binop_fn)(double x, double y);
typedef double (*core_unop_fn)(double x);

static double f_add(double x, double y) { return x + y; }
static double f_sub(double x, double y) { return x - y; }
static double f_mul(double x, double y) { return x * y; }
static double f_div(double x, double y) { return x / y; }
static double f_max(double x, double y) { return x > y ? x : y; }
static double f_min(double x, double y) { return x < y ? x : y; }
static double f_eq(double x, double y) { return x == y; }
static double f_ne(double x, double y) { return x != y; }
static double f_lt(double x, double y) { return x < y; }
static double f_le(double x, double y) { return x <= y; }
static double f_gt(double x, double y) { return x > y; }
static double f_ge(double x, double y) { return x >= y; }

/* The activation derivatives times the upstream gradient y, as the framework's backward
 * rules compute them (framework/op_elem.c), in double. */
static double f_dgelu(double x, double y)
{
    double u = 0.7978845608028654 * (x + 0.044715 * x * x * x), th = tanh(u);
    return (0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * 0.7978845608028654 *
                                   (1.0 + 3 * 0.044715 * x * x)) * y;
}
static double f_dsilu(double x, double y)
{
    double s = 1.0 / (1.0 + exp(-x));
    return s * (1.0 + x * (1.0 - s)) * y;
}
static double f_dtanh(double x, double y) { return (1.0 - x * x) * y; }

static double f_exp(double x) { return exp(x); }
static double f_log(double x) { return log(x); }
static double f_sqrt(double x) { return sqrt(x); }
static double f_rsqrt(double x) { return 1 / sqrt(x); }
static double f_recip(double x) { return 1 / x; }
static double f_tanh(double x) { return tanh(x); }
static double f_sigmoid(double x) { return 1 / (1 + exp(-x)); }
static double f_gelu(double x) { return act_apply(ISA_ACT_GELU, x); }
static double f_silu(double x) { return x / (1 + exp(-x)); }
static double f_relu(double x) { return x > 0 ? x : 0; }
static double f_abs(double x) { return fabs(x); }
static double f_neg(double x) { return -x; }
static double f_copy(double x) { return x; }

/* vpu.binary and vpu.scalar: dst = f(a, b or imm) */
static const core_binop_fn core_binops[ISA_OP_COUNT] = {
    [ISA_OP_VPU_ADD] = f_add, [ISA_OP_VPU_SUB] = f_sub, [ISA_OP_VPU_MUL] = f_mul,
    [ISA_OP_VPU_DIV] = f_div, [ISA_OP_VPU_MAX] = f_max, [ISA_OP_VPU_MIN] = f_min,
    [ISA_OP_VPU_ADDS] = f_add, [ISA_OP_VPU_SUBS] = f_sub, [ISA_OP_VPU_MULS] = f_mul,
    [ISA_OP_VPU_DIVS] = f_div, [ISA_OP_VPU_MAXS] = f_max, [ISA_OP_VPU_MINS] = f_min,
    [ISA_OP_VPU_CMPEQ] = f_eq, [ISA_OP_VPU_CMPNE] = f_ne, [ISA_OP_VPU_CMPLT] = f_lt,
    [ISA_OP_VPU_CMPLE] = f_le, [ISA_OP_VPU_CMPGT] = f_gt, [ISA_OP_VPU_CMPGE] = f_ge,
    [ISA_OP_VPU_CMPEQS] = f_eq, [ISA_OP_VPU_CMPNES] = f_ne, [ISA_OP_VPU_CMPLTS] = f_lt,
    [ISA_OP_VPU_CMPLES] = f_le, [ISA_OP_VPU_CMPGTS] = f_gt, [ISA_OP_VPU_CMPGES] = f_ge,
    [ISA_OP_VPU_DGELU] = f_dgelu, [ISA_OP_VPU_DSILU] = f_dsilu, [ISA_OP_VPU_DTANH] = f_dtanh,
};

/* vpu.unary: dst = f(src) */
static const core_unop_fn core_unops[ISA_OP_COUNT] = {
    [ISA_OP_VPU_EXP] = f_exp,   [ISA_OP_VPU_LOG] = f_log,         [ISA_OP_VPU_SQRT] = f_sqrt,
    [ISA_OP_VPU_RSQRT] = f_rsqrt, [ISA_OP_VPU_RECIP] = f_recip,   [ISA_OP_VPU_TANH] = f_tanh,
    [ISA_OP_VPU_SIGMOID] = f_sigmoid, [ISA_OP_VPU_GELU] = f_gelu, [ISA_OP_VPU_SILU] = f_silu,
    [ISA_OP_VPU_RELU] = f_relu, [ISA_OP_VPU_ABS] = f_abs,         [ISA_OP_VPU_NEG] = f_neg,
    [ISA_OP_VPU_COPY] = f_copy,
};

/* vpu.rrow and vpu.rcol: the combining function (the first element starts the reduction) */
static const core_binop_fn core_reductions[ISA_OP_COUNT] = {
    [ISA_OP_VPU_RSUM] = f_add, [ISA_OP_VPU_RMAX] = f_max, [ISA_OP_VPU_RMIN] = f_min,
    [ISA_OP_VPU_CSUM] = f_add, [ISA_OP_VPU_CMAX] = f_max,
};

/* vpu.fma family: dst = f(a x b + c) */
static const core_unop_fn core_fma_fns[ISA_OP_COUNT] = {
    [ISA_OP_VPU_FMA] = f_copy, [ISA_OP_VPU_FEXP] = f_exp,
};

bool core_func_has_semantics(isa_op op)
{
    if ((unsigned)op == 0 || (unsigned)op >= ISA_OP_COUNT)
        return false;
    switch (isa_ops[op].family) {
    case ISA_FAMILY_VPU_BINARY:
    case ISA_FAMILY_VPU_SCALAR: return core_binops[op] != NULL;
    case ISA_FAMILY_VPU_UNARY: return core_unops[op] != NULL;
    case ISA_FAMILY_VPU_RROW:
    case ISA_FAMILY_VPU_RCOL: return core_reductions[op] != NULL;
    case ISA_FAMILY_VPU_FMA: return core_fma_fns[op] != NULL;
    case ISA_FAMILY_VPU_RDOT:
    case ISA_FAMILY_DMA_IDX:
    case ISA_FAMILY_CTRL:          /* core.c's front end */
    case ISA_FAMILY_SEM:           /* core.c's queues */
    case ISA_FAMILY_COMM_SEND:     /* core_comm.c moves the bytes */
    case ISA_FAMILY_COMM_RECV:
    case ISA_FAMILY_DMA:
    case ISA_FAMILY_MXU_LOAD:
    case ISA_FAMILY_MXU_MM:
    case ISA_FAMILY_MXU_DRAIN:
    case ISA_FAMILY_VPU_CAST:
    case ISA_FAMILY_VPU_TRANSPOSE:
    case ISA_FAMILY_VPU_FILL:
    case ISA_FAMILY_VPU_SELECT:
    case ISA_FAMILY_VPU_SELECTS:
    case ISA_FAMILY_VPU_IOTA:
    case ISA_FAMILY_VPU_RAND: return true;
    default: return false;
    }
}

static np_status exec_fill(core_func *f, uint32_t ci, const isa_args_VPU_FILL *a)
{
    isa_dtype d = (isa_dtype)a->dtype.val;
    uint64_t r = (uint64_t)a->rows.val, cn = (uint64_t)a->cols.val, e = isa_dtype_size[d];
    for (uint64_t i = 0; i < r; i++)
        for (uint64_t j = 0; j < cn; j++)
            core_elem_put(spad_at(f, ci, &a->dst, i, j, cn * e, a->dst_s.val, d), d, isa_opnd_f32(&a->value));
    return NP_OK;
}

/* vpu.sel / vpu.sels: dst = m != 0 ? a : (b or imm); sources read first, so dst may overlap */
static np_status exec_select(core_func *f, uint32_t ci, const isa_insn *in, np_err *err)
{
    bool scalar = isa_ops[in->op].family == ISA_FAMILY_VPU_SELECTS;
    const isa_args_VPU_SEL *a = &in->VPU_SEL;
    const isa_args_VPU_SELS *s = &in->VPU_SELS;
    isa_dtype d = (isa_dtype)(scalar ? s->dtype.val : a->dtype.val);
    uint64_t r = (uint64_t)(scalar ? s->rows.val : a->rows.val);
    uint64_t cn = (uint64_t)(scalar ? s->cols.val : a->cols.val), e = isa_dtype_size[d], rb = cn * e;
    int64_t src_s = scalar ? s->src_s.val : a->src_s.val;
    const isa_opnd *m = scalar ? &s->m : &a->m, *x = scalar ? &s->a : &a->a;
    if (tmp_reserve(f, r * cn, err) != NP_OK)
        return err->status;
    double imm = scalar ? isa_opnd_f32(&s->imm) : 0;
    for (uint64_t i = 0; i < r; i++)
        for (uint64_t j = 0; j < cn; j++) {
            if (core_elem_get(spad_at(f, ci, m, i, j, rb, src_s, d), d) != 0) {
                f->tmp[i * cn + j] = core_elem_get(spad_at(f, ci, x, i, j, rb, src_s, d), d);
            } else if (scalar) {
                f->tmp[i * cn + j] = imm;
            } else {
                const isa_opnd *b = &a->b;
                uint8_t *bp = a->bcast.val == ISA_BCAST_ROW      ? spad_at(f, ci, b, 0, j, rb, 0, d)
                              : a->bcast.val == ISA_BCAST_COL    ? spad_at(f, ci, b, 0, i, r * e, 0, d)
                              : a->bcast.val == ISA_BCAST_SCALAR ? spad_at(f, ci, b, 0, 0, e, 0, d)
                                                                 : spad_at(f, ci, b, i, j, rb, src_s, d);
                f->tmp[i * cn + j] = core_elem_get(bp, d);
            }
        }
    const isa_opnd *dst = scalar ? &s->dst : &a->dst;
    int64_t dst_s = scalar ? s->dst_s.val : a->dst_s.val;
    for (uint64_t i = 0; i < r; i++)
        for (uint64_t j = 0; j < cn; j++)
            core_elem_put(spad_at(f, ci, dst, i, j, rb, dst_s, d), d, f->tmp[i * cn + j]);
    return NP_OK;
}

static void exec_iota(core_func *f, uint32_t ci, const isa_args_VPU_IOTA *a)
{
    isa_dtype d = (isa_dtype)a->dtype.val;
    uint64_t r = (uint64_t)a->rows.val, cn = (uint64_t)a->cols.val, e = isa_dtype_size[d];
    for (uint64_t i = 0; i < r; i++)
        for (uint64_t j = 0; j < cn; j++) {
            int64_t v = a->start.val + (int64_t)i * a->row_step.val + (int64_t)j * a->col_step.val;
            core_elem_put(spad_at(f, ci, &a->dst, i, j, cn * e, a->dst_s.val, d), d, (double)v);
        }
}

static void exec_rand(core_func *f, uint32_t ci, const isa_args_VPU_RAND *a)
{
    isa_dtype d = (isa_dtype)a->dtype.val;
    uint64_t r = (uint64_t)a->rows.val, cn = (uint64_t)a->cols.val, e = isa_dtype_size[d];
    uint64_t seed = (uint64_t)a->key_lo.val | (uint64_t)a->key_hi.val << 32;
    uint64_t cs = a->ctr_s.val ? (uint64_t)a->ctr_s.val : cn;
    for (uint64_t i = 0; i < r; i++)
        for (uint64_t j = 0; j < cn; j++)
            core_elem_put(spad_at(f, ci, &a->dst, i, j, cn * e, a->dst_s.val, d), d,
                          np_philox_uniform24(seed, (uint64_t)a->ctr.val + i * cs + j));
}

static np_status exec_cast(core_func *f, uint32_t ci, const isa_args_VPU_CAST *a, np_err *err)
{
    isa_dtype d = (isa_dtype)a->dtype.val, sd = (isa_dtype)a->src_dtype.val;
    uint64_t r = (uint64_t)a->rows.val, cn = (uint64_t)a->cols.val;
    if (tmp_reserve(f, r * cn, err) != NP_OK)
        return err->status;
    for (uint64_t i = 0; i < r; i++)
        for (uint64_t j = 0; j < cn; j++)
            f->tmp[i * cn + j] = core_elem_get(spad_at(f, ci, &a->src, i, j, cn * isa_dtype_size[sd], a->src_s.val, sd), sd);
    for (uint64_t i = 0; i < r; i++)
        for (uint64_t j = 0; j < cn; j++)
            core_elem_put(spad_at(f, ci, &a->dst, i, j, cn * isa_dtype_size[d], a->dst_s.val, d), d, f->tmp[i * cn + j]);
    return NP_OK;
}

/* An fp32 coefficient of vpu.fma at (i, j) per its broadcast mode (tiles packed). */
static double coef_at(core_func *f, uint32_t ci, const isa_opnd *o, int64_t bcast, uint64_t i,
                      uint64_t j, uint64_t cols)
{
    const uint8_t *p = f->cores[ci].spad + (uint64_t)o->val;
    uint64_t k = bcast == ISA_BCAST_ROW ? j : bcast == ISA_BCAST_COL ? i
               : bcast == ISA_BCAST_SCALAR ? 0 : i * cols + j;
    return core_elem_get(p + 4 * k, ISA_DTYPE_FP32);
}

/* vpu.fma, vpu.fexp: all results computed (into tmp) before any is stored, so dst may
 * overlap a, b or c. */
static np_status exec_fma(core_func *f, uint32_t ci, const isa_insn *in, np_err *err)
{
    const isa_args_VPU_FMA *a = &in->VPU_FMA;
    core_unop_fn fn = core_fma_fns[in->op];
    isa_dtype d = (isa_dtype)a->dtype.val, od = (isa_dtype)a->odtype.val;
    uint64_t r = (uint64_t)a->rows.val, cn = (uint64_t)a->cols.val;
    if (tmp_reserve(f, r * cn + r, err) != NP_OK)
        return err->status;
    double *y = f->tmp, *sums = f->tmp + r * cn;
    for (uint64_t i = 0; i < r; i++) {
        sums[i] = 0;
        for (uint64_t j = 0; j < cn; j++) {
            double x = core_elem_get(spad_at(f, ci, &a->a, i, j, cn * isa_dtype_size[d], 0, d), d);
            double v = fn(x * coef_at(f, ci, &a->b, a->bb.val, i, j, cn) +
                          coef_at(f, ci, &a->c, a->cb.val, i, j, cn));
            y[i * cn + j] = v;
            sums[i] += v;
        }
    }
    for (uint64_t i = 0; i < r; i++)
        for (uint64_t j = 0; j < cn; j++)
            core_elem_put(spad_at(f, ci, &a->dst, i, j, cn * isa_dtype_size[od], 0, od), od,
                          y[i * cn + j]);
    if (a->sum.space != ISA_SPACE_NONE)
        for (uint64_t i = 0; i < r; i++)
            core_elem_put(f->cores[ci].spad + (uint64_t)a->sum.val + 4 * i, ISA_DTYPE_FP32, sums[i]);
    return NP_OK;
}

static np_status exec_rdot(core_func *f, uint32_t ci, const isa_args_VPU_RDOT *a, np_err *err)
{
    isa_dtype d = (isa_dtype)a->dtype.val, od = (isa_dtype)a->odtype.val;
    uint64_t r = (uint64_t)a->rows.val, cn = (uint64_t)a->cols.val, e = isa_dtype_size[d];
    if (tmp_reserve(f, r, err) != NP_OK)
        return err->status;
    for (uint64_t i = 0; i < r; i++) {
        double acc = 0;
        for (uint64_t j = 0; j < cn; j++) {
            const isa_opnd *b = &a->b;
            uint8_t *bp = a->bcast.val == ISA_BCAST_ROW      ? spad_at(f, ci, b, 0, j, cn * e, 0, d)
                          : a->bcast.val == ISA_BCAST_COL    ? spad_at(f, ci, b, 0, i, r * e, 0, d)
                          : a->bcast.val == ISA_BCAST_SCALAR ? spad_at(f, ci, b, 0, 0, e, 0, d)
                                                             : spad_at(f, ci, b, i, j, cn * e, a->b_s.val, d);
            acc += core_elem_get(spad_at(f, ci, &a->a, i, j, cn * e, a->a_s.val, d), d) *
                   core_elem_get(bp, d);
        }
        f->tmp[i] = acc;
    }
    for (uint64_t i = 0; i < r; i++)
        core_elem_put(f->cores[ci].spad + (uint64_t)a->dst.val + i * isa_dtype_size[od], od, f->tmp[i]);
    return NP_OK;
}

/* dma.gather / dma.scatter, one row at a time in index order (so repeated indices of a
 * scatter combine with every earlier row). */
static np_status exec_dma_idx(core_func *f, uint32_t ci, const isa_insn *in, np_err *err)
{
    const isa_args_DMA_GATHER *a = &in->DMA_GATHER;
    bool gather = in->op == ISA_OP_DMA_GATHER;
    isa_dtype d = (isa_dtype)a->dtype.val;
    uint64_t e = isa_dtype_size[d], n0 = (uint64_t)a->n0.val, row = n0 * e;
    uint64_t n1 = (uint64_t)a->n1.val, lim = (uint64_t)a->limit.val;
    uint64_t ds = a->dst_s1.val ? (uint64_t)a->dst_s1.val : row;
    uint64_t ss = a->src_s1.val ? (uint64_t)a->src_s1.val : row;
    isa_red red = (isa_red)a->red.val;
    uint8_t src[2048], dst[2048]; /* chunks of a row, whole elements */
    uint64_t chunk = sizeof src / e * e;
    for (uint64_t i = 0; i < n1; i++) {
        int32_t j;
        if (mem_read(f, ci, (isa_space)a->idx.space, (uint64_t)a->idx.val + 4 * i, &j, 4, err) != NP_OK)
            return err->status;
        if ((j < 0 || (uint64_t)j >= lim) && a->skip.val) {
            if (gather && red == ISA_RED_NONE) { /* a row of zeros */
                memset(src, 0, row < chunk ? row : chunk);
                for (uint64_t off = 0; off < row; off += chunk)
                    if (mem_write(f, ci, (isa_space)a->dst.space, (uint64_t)a->dst.val + i * ds +
                                  off, src, row - off < chunk ? row - off : chunk, err) != NP_OK)
                        return err->status;
            }
            continue;
        }
        if (j < 0 || (uint64_t)j >= lim)
            return np_err_set(err, NP_ERR_SIM_FAULT, "core %" PRIu32 " %s: index %" PRId32 " (number "
                              "%" PRIu64 ") is outside the table's rows 0..%" PRIu64, ci,
                              isa_ops[in->op].mnemonic, j, i, lim - 1);
        uint64_t sa = (uint64_t)a->src.val + (gather ? (uint64_t)j : i) * ss;
        uint64_t da = (uint64_t)a->dst.val + (gather ? i : (uint64_t)j) * ds;
        for (uint64_t off = 0; off < row; off += chunk) {
            uint64_t k = row - off < chunk ? row - off : chunk;
            if (mem_read(f, ci, (isa_space)a->src.space, sa + off, src, k, err) != NP_OK)
                return err->status;
            if (red != ISA_RED_NONE) {
                if (mem_read(f, ci, (isa_space)a->dst.space, da + off, dst, k, err) != NP_OK)
                    return err->status;
                for (uint64_t t = 0; t < k; t += e) {
                    double x = core_elem_get(dst + t, d), y = core_elem_get(src + t, d);
                    core_elem_put(src + t, d, red == ISA_RED_ADD ? x + y : red == ISA_RED_MAX
                                  ? (x > y ? x : y) : (x < y ? x : y));
                }
            }
            if (mem_write(f, ci, (isa_space)a->dst.space, da + off, src, k, err) != NP_OK)
                return err->status;
        }
    }
    return NP_OK;
}

/* The other VPU families read their source(s) into tmp first, so dst may overlap them. */
static np_status exec_vpu(core_func *f, uint32_t ci, const isa_insn *in, np_err *err)
{
    isa_op op = in->op;
    isa_family fam = isa_ops[op].family;
    int ri = isa_field_find(op, "rows"), cidx = isa_field_find(op, "cols"), di = isa_field_find(op, "dtype");
    uint64_t r = (uint64_t)in->opnd[ri].val, cn = (uint64_t)in->opnd[cidx].val;
    isa_dtype d = (isa_dtype)in->opnd[di].val;
    uint64_t e = isa_dtype_size[d], rb = cn * e;
    if (tmp_reserve(f, 2 * r * cn + r + cn, err) != NP_OK)
        return err->status;
    double *x = f->tmp, *y = f->tmp + r * cn;
    if (fam == ISA_FAMILY_VPU_BINARY) {
        const isa_args_VPU_ADD *a = &in->VPU_ADD; /* the binary family's layout */
        core_binop_fn fn = core_binops[op];
        for (uint64_t i = 0; i < r; i++)
            for (uint64_t j = 0; j < cn; j++) {
                const isa_opnd *b = &a->b;
                uint8_t *bp = a->bcast.val == ISA_BCAST_ROW      ? spad_at(f, ci, b, 0, j, rb, 0, d)
                              : a->bcast.val == ISA_BCAST_COL    ? spad_at(f, ci, b, 0, i, r * e, 0, d)
                              : a->bcast.val == ISA_BCAST_SCALAR ? spad_at(f, ci, b, 0, 0, e, 0, d)
                                                                 : spad_at(f, ci, b, i, j, rb, a->b_s.val, d);
                y[i * cn + j] = fn(core_elem_get(spad_at(f, ci, &a->a, i, j, rb, a->a_s.val, d), d),
                                   core_elem_get(bp, d));
            }
        for (uint64_t i = 0; i < r; i++)
            for (uint64_t j = 0; j < cn; j++)
                core_elem_put(spad_at(f, ci, &a->dst, i, j, rb, a->dst_s.val, d), d, y[i * cn + j]);
    } else if (fam == ISA_FAMILY_VPU_SCALAR) {
        const isa_args_VPU_ADDS *a = &in->VPU_ADDS; /* the scalar family's layout */
        core_binop_fn fn = core_binops[op];
        double imm = isa_opnd_f32(&a->imm);
        for (uint64_t i = 0; i < r; i++)
            for (uint64_t j = 0; j < cn; j++)
                y[i * cn + j] = fn(core_elem_get(spad_at(f, ci, &a->a, i, j, rb, a->a_s.val, d), d), imm);
        for (uint64_t i = 0; i < r; i++)
            for (uint64_t j = 0; j < cn; j++)
                core_elem_put(spad_at(f, ci, &a->dst, i, j, rb, a->dst_s.val, d), d, y[i * cn + j]);
    } else if (fam == ISA_FAMILY_VPU_UNARY || fam == ISA_FAMILY_VPU_TRANSPOSE) {
        const isa_args_VPU_EXP *a = &in->VPU_EXP; /* the unary layout, transpose's too */
        core_unop_fn fn = fam == ISA_FAMILY_VPU_TRANSPOSE ? f_copy : core_unops[op];
        for (uint64_t i = 0; i < r; i++)
            for (uint64_t j = 0; j < cn; j++)
                x[i * cn + j] = fn(core_elem_get(spad_at(f, ci, &a->src, i, j, rb, a->src_s.val, d), d));
        for (uint64_t i = 0; i < r; i++)
            for (uint64_t j = 0; j < cn; j++) {
                if (fam == ISA_FAMILY_VPU_TRANSPOSE)
                    core_elem_put(spad_at(f, ci, &a->dst, j, i, r * e, a->dst_s.val, d), d, x[i * cn + j]);
                else
                    core_elem_put(spad_at(f, ci, &a->dst, i, j, rb, a->dst_s.val, d), d, x[i * cn + j]);
            }
    } else { /* reductions: vpu.rrow, vpu.rcol */
        const isa_args_VPU_RSUM *a = &in->VPU_RSUM; /* the reduction layout */
        core_binop_fn fn = core_reductions[op];
        bool per_row = fam == ISA_FAMILY_VPU_RROW;
        uint64_t outs = per_row ? r : cn, len = per_row ? cn : r;
        for (uint64_t o = 0; o < outs; o++) {
            double acc = 0;
            for (uint64_t t = 0; t < len; t++) {
                uint64_t i = per_row ? o : t, j = per_row ? t : o;
                double v = core_elem_get(spad_at(f, ci, &a->src, i, j, rb, a->src_s.val, d), d);
                acc = t == 0 ? v : fn(acc, v);
            }
            y[o] = acc;
        }
        for (uint64_t o = 0; o < outs; o++)
            core_elem_put(spad_at(f, ci, &a->dst, 0, o, outs * e, 0, d), d, y[o]);
    }
    return NP_OK;
}

np_status core_func_exec(core_func *f, uint32_t ci, const isa_insn *in, bool first, np_err *err)
{
    switch (isa_ops[in->op].family) {
    case ISA_FAMILY_DMA: return exec_dma(f, ci, &in->DMA_COPY, err);
    case ISA_FAMILY_DMA_IDX: return exec_dma_idx(f, ci, in, err);
    case ISA_FAMILY_VPU_FMA: return exec_fma(f, ci, in, err);
    case ISA_FAMILY_VPU_RDOT: return exec_rdot(f, ci, &in->VPU_RDOT, err);
    case ISA_FAMILY_MXU_LOAD: return exec_load(f, ci, &in->MXU_LOAD, err);
    case ISA_FAMILY_MXU_MM: exec_mm(f, ci, &in->MXU_MM, first); return NP_OK;
    case ISA_FAMILY_MXU_DRAIN: exec_drain(f, ci, &in->MXU_DRAIN); return NP_OK;
    case ISA_FAMILY_VPU_FILL: return exec_fill(f, ci, &in->VPU_FILL);
    case ISA_FAMILY_VPU_CAST: return exec_cast(f, ci, &in->VPU_CAST, err);
    case ISA_FAMILY_VPU_SELECT:
    case ISA_FAMILY_VPU_SELECTS: return exec_select(f, ci, in, err);
    case ISA_FAMILY_VPU_IOTA: exec_iota(f, ci, &in->VPU_IOTA); return NP_OK;
    case ISA_FAMILY_VPU_RAND: exec_rand(f, ci, &in->VPU_RAND); return NP_OK;
    case ISA_FAMILY_VPU_BINARY:
    case ISA_FAMILY_VPU_SCALAR:
    case ISA_FAMILY_VPU_UNARY:
    case ISA_FAMILY_VPU_RROW:
    case ISA_FAMILY_VPU_RCOL:
    case ISA_FAMILY_VPU_TRANSPOSE: return exec_vpu(f, ci, in, err);
    default: return NP_OK; /* front end, semaphores and comm.* act elsewhere */
    }
}
