/* core_cost.c — footprints and cycle costs of resolved instructions (see core_cost.h). */
#include "core_cost.h"

#include <math.h>
#include <string.h>

static uint64_t ceil_div(uint64_t a, uint64_t b) { return b ? a / b + (a % b != 0) : 0; }

/* Rows of row_bytes each, stride apart (0: packed). */
static core_range tile(const isa_opnd *o, const char *what, uint64_t rows, uint64_t row_bytes,
                       int64_t stride, bool write)
{
    uint64_t s = stride ? (uint64_t)stride : row_bytes;
    core_range r = {(isa_space)o->space, (uint64_t)o->val, (rows - 1) * s + row_bytes,
                    rows * row_bytes, write, what, 1, 0, rows, s, row_bytes, 0};
    return r;
}

static double macs_rate(const arch_config *cfg, isa_dtype d)
{
    switch (d) {
    case ISA_DTYPE_BF16: return cfg->core.macs_per_pe_bf16;
    case ISA_DTYPE_FP16: return cfg->core.macs_per_pe_fp16;
    case ISA_DTYPE_FP32: return cfg->core.macs_per_pe_fp32;
    case ISA_DTYPE_INT8: return cfg->core.macs_per_pe_int8;
    default: return 0;
    }
}

/* ---- footprints, one function per operand family (isa.def's FAMILY column) ---------------- */

typedef unsigned (*ranges_fn)(const isa_insn *in, uint64_t mxu_k, uint64_t mxu_n, core_range *out);

static unsigned ranges_none(const isa_insn *in, uint64_t mxu_k, uint64_t mxu_n, core_range *out)
{
    (void)in, (void)mxu_k, (void)mxu_n, (void)out;
    return 0;
}

static unsigned ranges_dma(const isa_insn *in, uint64_t mxu_k, uint64_t mxu_n, core_range *out)
{
    (void)mxu_k, (void)mxu_n;
    const isa_args_DMA_COPY *a = &in->DMA_COPY;
    uint64_t row = (uint64_t)a->n0.val * isa_dtype_size[a->dtype.val];
    uint64_t n1 = (uint64_t)a->n1.val, n2 = (uint64_t)a->n2.val;
    const isa_opnd *ends[2] = {&a->src, &a->dst};
    const int64_t s1[2] = {a->src_s1.val, a->dst_s1.val}, s2[2] = {a->src_s2.val, a->dst_s2.val};
    for (int i = 0; i < 2; i++) {
        uint64_t rs = s1[i] ? (uint64_t)s1[i] : row;
        uint64_t ps = s2[i] ? (uint64_t)s2[i] : n1 * rs;
        out[i] = (core_range){(isa_space)ends[i]->space, (uint64_t)ends[i]->val,
                              (n2 - 1) * ps + (n1 - 1) * rs + row, n2 * n1 * row, i == 1,
                              i ? "dst" : "src", n2, ps, n1, rs, row, 0};
    }
    return 2;
}

static unsigned ranges_mxu_load(const isa_insn *in, uint64_t mxu_k, uint64_t mxu_n,
                                core_range *out)
{
    (void)mxu_k, (void)mxu_n;
    const isa_args_MXU_LOAD *a = &in->MXU_LOAD;
    uint64_t e = isa_dtype_size[a->dtype.val], k = (uint64_t)a->k.val, nn = (uint64_t)a->n.val;
    out[0] = a->trans.val ? tile(&a->w, "w", nn, k * e, a->stride.val, false)
                          : tile(&a->w, "w", k, nn * e, a->stride.val, false);
    return 1;
}

static unsigned ranges_mxu_mm(const isa_insn *in, uint64_t mxu_k, uint64_t mxu_n, core_range *out)
{
    const isa_args_MXU_MM *a = &in->MXU_MM;
    uint64_t e = isa_dtype_size[a->dtype.val], m = (uint64_t)a->m.val;
    out[0] = tile(&a->a, "a", m, mxu_k * e, a->stride.val, false);
    out[1] = tile(&a->acc, "acc", 1, m * mxu_n * 4, 0, true);
    return 2;
}

static unsigned ranges_mxu_drain(const isa_insn *in, uint64_t mxu_k, uint64_t mxu_n,
                                 core_range *out)
{
    (void)mxu_k, (void)mxu_n;
    const isa_args_MXU_DRAIN *a = &in->MXU_DRAIN;
    uint64_t e = isa_dtype_size[a->dtype.val], m = (uint64_t)a->m.val, nn = (uint64_t)a->n.val;
    unsigned n = 0;
    out[n++] = tile(&a->acc, "acc", 1, m * nn * 4, 0, false);
    out[n++] = tile(&a->dst, "dst", m, nn * e, a->stride.val, true);
    if (a->bias.space != ISA_SPACE_NONE)
        out[n++] = tile(&a->bias, "bias", 1, nn * 4, 0, false);
    return n;
}

/* The VPU families share operand layouts (isa.def: ISA_VPU_BINARY_ etc.; every op of a family
 * has its first op's fields, so the first op's view reads them all). */
static unsigned ranges_vpu_binary(const isa_insn *in, uint64_t mxu_k, uint64_t mxu_n,
                                  core_range *out)
{
    (void)mxu_k, (void)mxu_n;
    const isa_args_VPU_ADD *a = &in->VPU_ADD;
    uint64_t e = isa_dtype_size[a->dtype.val], rows = (uint64_t)a->rows.val, cols = (uint64_t)a->cols.val;
    out[0] = tile(&a->a, "a", rows, cols * e, a->a_s.val, false);
    switch (a->bcast.val) {
    case ISA_BCAST_ROW: out[1] = tile(&a->b, "b", 1, cols * e, 0, false); break;
    case ISA_BCAST_COL: out[1] = tile(&a->b, "b", 1, rows * e, 0, false); break;
    case ISA_BCAST_SCALAR: out[1] = tile(&a->b, "b", 1, e, 0, false); break;
    default: out[1] = tile(&a->b, "b", rows, cols * e, a->b_s.val, false); break;
    }
    out[2] = tile(&a->dst, "dst", rows, cols * e, a->dst_s.val, true);
    return 3;
}

static unsigned ranges_vpu_scalar(const isa_insn *in, uint64_t mxu_k, uint64_t mxu_n,
                                  core_range *out)
{
    (void)mxu_k, (void)mxu_n;
    const isa_args_VPU_ADDS *a = &in->VPU_ADDS;
    uint64_t e = isa_dtype_size[a->dtype.val], rows = (uint64_t)a->rows.val, cols = (uint64_t)a->cols.val;
    out[0] = tile(&a->a, "a", rows, cols * e, a->a_s.val, false);
    out[1] = tile(&a->dst, "dst", rows, cols * e, a->dst_s.val, true);
    return 2;
}

static unsigned ranges_vpu_unary(const isa_insn *in, uint64_t mxu_k, uint64_t mxu_n,
                                 core_range *out)
{
    (void)mxu_k, (void)mxu_n;
    const isa_args_VPU_EXP *a = &in->VPU_EXP;
    uint64_t e = isa_dtype_size[a->dtype.val], rows = (uint64_t)a->rows.val, cols = (uint64_t)a->cols.val;
    out[0] = tile(&a->src, "src", rows, cols * e, a->src_s.val, false);
    out[1] = tile(&a->dst, "dst", rows, cols * e, a->dst_s.val, true);
    return 2;
}

/* Reductions: dst is a packed vector of one element per row (rrow) or per column (rcol). */
static unsigned ranges_vpu_reduce(const isa_insn *in, bool per_row, core_range *out)
{
    const isa_args_VPU_RSUM *a = &in->VPU_RSUM;
    uint64_t e = isa_dtype_size[a->dtype.val], rows = (uint64_t)a->rows.val, cols = (uint64_t)a->cols.val;
    out[0] = tile(&a->src, "src", rows, cols * e, a->src_s.val, false);
    out[1] = tile(&a->dst, "dst", 1, (per_row ? rows : cols) * e, 0, true);
    return 2;
}

static unsigned ranges_vpu_rrow(const isa_insn *in, uint64_t mxu_k, uint64_t mxu_n,
                                core_range *out)
{
    (void)mxu_k, (void)mxu_n;
    return ranges_vpu_reduce(in, true, out);
}

static unsigned ranges_vpu_rcol(const isa_insn *in, uint64_t mxu_k, uint64_t mxu_n,
                                core_range *out)
{
    (void)mxu_k, (void)mxu_n;
    return ranges_vpu_reduce(in, false, out);
}

static unsigned ranges_vpu_cast(const isa_insn *in, uint64_t mxu_k, uint64_t mxu_n,
                                core_range *out)
{
    (void)mxu_k, (void)mxu_n;
    const isa_args_VPU_CAST *a = &in->VPU_CAST;
    uint64_t r = (uint64_t)a->rows.val, c = (uint64_t)a->cols.val;
    out[0] = tile(&a->src, "src", r, c * isa_dtype_size[a->src_dtype.val], a->src_s.val, false);
    out[1] = tile(&a->dst, "dst", r, c * isa_dtype_size[a->dtype.val], a->dst_s.val, true);
    return 2;
}

static unsigned ranges_vpu_transpose(const isa_insn *in, uint64_t mxu_k, uint64_t mxu_n,
                                     core_range *out)
{
    (void)mxu_k, (void)mxu_n;
    const isa_args_VPU_TRANSPOSE *a = &in->VPU_TRANSPOSE;
    uint64_t e = isa_dtype_size[a->dtype.val], r = (uint64_t)a->rows.val, c = (uint64_t)a->cols.val;
    out[0] = tile(&a->src, "src", r, c * e, a->src_s.val, false);
    out[1] = tile(&a->dst, "dst", c, r * e, a->dst_s.val, true);
    return 2;
}

static unsigned ranges_vpu_fill(const isa_insn *in, uint64_t mxu_k, uint64_t mxu_n,
                                core_range *out)
{
    (void)mxu_k, (void)mxu_n;
    const isa_args_VPU_FILL *a = &in->VPU_FILL;
    out[0] = tile(&a->dst, "dst", (uint64_t)a->rows.val,
                  (uint64_t)a->cols.val * isa_dtype_size[a->dtype.val], a->dst_s.val, true);
    return 1;
}

static unsigned ranges_vpu_select(const isa_insn *in, uint64_t mxu_k, uint64_t mxu_n,
                                  core_range *out)
{
    (void)mxu_k, (void)mxu_n;
    const isa_args_VPU_SEL *a = &in->VPU_SEL;
    uint64_t e = isa_dtype_size[a->dtype.val], rows = (uint64_t)a->rows.val, cols = (uint64_t)a->cols.val;
    out[0] = tile(&a->m, "m", rows, cols * e, a->src_s.val, false);
    out[1] = tile(&a->a, "a", rows, cols * e, a->src_s.val, false);
    switch (a->bcast.val) {
    case ISA_BCAST_ROW: out[2] = tile(&a->b, "b", 1, cols * e, 0, false); break;
    case ISA_BCAST_COL: out[2] = tile(&a->b, "b", 1, rows * e, 0, false); break;
    case ISA_BCAST_SCALAR: out[2] = tile(&a->b, "b", 1, e, 0, false); break;
    default: out[2] = tile(&a->b, "b", rows, cols * e, a->src_s.val, false); break;
    }
    out[3] = tile(&a->dst, "dst", rows, cols * e, a->dst_s.val, true);
    return 4;
}

static unsigned ranges_vpu_selects(const isa_insn *in, uint64_t mxu_k, uint64_t mxu_n,
                                   core_range *out)
{
    (void)mxu_k, (void)mxu_n;
    const isa_args_VPU_SELS *a = &in->VPU_SELS;
    uint64_t e = isa_dtype_size[a->dtype.val], rows = (uint64_t)a->rows.val, cols = (uint64_t)a->cols.val;
    out[0] = tile(&a->m, "m", rows, cols * e, a->src_s.val, false);
    out[1] = tile(&a->a, "a", rows, cols * e, a->src_s.val, false);
    out[2] = tile(&a->dst, "dst", rows, cols * e, a->dst_s.val, true);
    return 3;
}

static unsigned ranges_vpu_iota(const isa_insn *in, uint64_t mxu_k, uint64_t mxu_n,
                                core_range *out)
{
    (void)mxu_k, (void)mxu_n;
    const isa_args_VPU_IOTA *a = &in->VPU_IOTA;
    out[0] = tile(&a->dst, "dst", (uint64_t)a->rows.val,
                  (uint64_t)a->cols.val * isa_dtype_size[a->dtype.val], a->dst_s.val, true);
    return 1;
}

static unsigned ranges_vpu_rand(const isa_insn *in, uint64_t mxu_k, uint64_t mxu_n,
                                core_range *out)
{
    (void)mxu_k, (void)mxu_n;
    const isa_args_VPU_RAND *a = &in->VPU_RAND;
    out[0] = tile(&a->dst, "dst", (uint64_t)a->rows.val,
                  (uint64_t)a->cols.val * isa_dtype_size[a->dtype.val], a->dst_s.val, true);
    return 1;
}

static unsigned ranges_comm_send(const isa_insn *in, uint64_t mxu_k, uint64_t mxu_n,
                                 core_range *out)
{
    (void)mxu_k, (void)mxu_n;
    out[0] = tile(&in->COMM_SEND.src, "src", 1, (uint64_t)in->COMM_SEND.bytes.val, 0, false);
    return 1;
}

static unsigned ranges_comm_recv(const isa_insn *in, uint64_t mxu_k, uint64_t mxu_n,
                                 core_range *out)
{
    (void)mxu_k, (void)mxu_n; /* with a reduction the recv also reads dst */
    out[0] = tile(&in->COMM_RECV.dst, "dst", 1, (uint64_t)in->COMM_RECV.bytes.val, 0, true);
    return 1;
}

/* vpu.fma / vpu.fexp: a (dtype), the fp32 coefficients b and c per bb / cb, dst (odtype), and
 * the optional fp32 row sums. All tiles packed. */
static core_range coef(const isa_opnd *o, const char *what, uint64_t bcast, uint64_t rows,
                       uint64_t cols)
{
    switch (bcast) {
    case ISA_BCAST_ROW: return tile(o, what, 1, cols * 4, 0, false);
    case ISA_BCAST_COL: return tile(o, what, 1, rows * 4, 0, false);
    case ISA_BCAST_SCALAR: return tile(o, what, 1, 4, 0, false);
    default: return tile(o, what, rows, cols * 4, 0, false);
    }
}

static unsigned ranges_vpu_fma(const isa_insn *in, uint64_t mxu_k, uint64_t mxu_n,
                               core_range *out)
{
    (void)mxu_k, (void)mxu_n;
    const isa_args_VPU_FMA *a = &in->VPU_FMA;
    uint64_t rows = (uint64_t)a->rows.val, cols = (uint64_t)a->cols.val;
    unsigned n = 0;
    out[n++] = tile(&a->a, "a", rows, cols * isa_dtype_size[a->dtype.val], 0, false);
    out[n++] = coef(&a->b, "b", (uint64_t)a->bb.val, rows, cols);
    out[n++] = coef(&a->c, "c", (uint64_t)a->cb.val, rows, cols);
    out[n++] = tile(&a->dst, "dst", rows, cols * isa_dtype_size[a->odtype.val], 0, true);
    if (a->sum.space != ISA_SPACE_NONE)
        out[n++] = tile(&a->sum, "sum", 1, rows * 4, 0, true);
    return n;
}

/* vpu.rdot: a and b (per bcast) in dtype, one odtype element per row at dst. */
static unsigned ranges_vpu_rdot(const isa_insn *in, uint64_t mxu_k, uint64_t mxu_n,
                                core_range *out)
{
    (void)mxu_k, (void)mxu_n;
    const isa_args_VPU_RDOT *a = &in->VPU_RDOT;
    uint64_t e = isa_dtype_size[a->dtype.val], rows = (uint64_t)a->rows.val, cols = (uint64_t)a->cols.val;
    out[0] = tile(&a->a, "a", rows, cols * e, a->a_s.val, false);
    switch (a->bcast.val) {
    case ISA_BCAST_ROW: out[1] = tile(&a->b, "b", 1, cols * e, 0, false); break;
    case ISA_BCAST_COL: out[1] = tile(&a->b, "b", 1, rows * e, 0, false); break;
    case ISA_BCAST_SCALAR: out[1] = tile(&a->b, "b", 1, e, 0, false); break;
    default: out[1] = tile(&a->b, "b", rows, cols * e, a->b_s.val, false); break;
    }
    out[2] = tile(&a->dst, "dst", 1, rows * isa_dtype_size[a->odtype.val], 0, true);
    return 3;
}

/* dma.gather / dma.scatter: the indices, the dense side (n1 rows), and the indexed side (the
 * whole table as footprint, n1 rows accessed), which a reduction also reads. */
static unsigned ranges_dma_idx(const isa_insn *in, uint64_t mxu_k, uint64_t mxu_n,
                               core_range *out)
{
    (void)mxu_k, (void)mxu_n;
    const isa_args_DMA_GATHER *a = &in->DMA_GATHER;
    bool gather = in->op == ISA_OP_DMA_GATHER;
    uint64_t row = (uint64_t)a->n0.val * isa_dtype_size[a->dtype.val];
    uint64_t n1 = (uint64_t)a->n1.val, lim = (uint64_t)a->limit.val;
    uint64_t ds = a->dst_s1.val ? (uint64_t)a->dst_s1.val : row;
    uint64_t ss = a->src_s1.val ? (uint64_t)a->src_s1.val : row;
    unsigned n = 0;
    out[n++] = tile(&a->idx, "idx", 1, 4 * n1, 0, false);
    core_range src = tile(&a->src, "src", gather ? lim : n1, row, (int64_t)ss, false);
    core_range dst = tile(&a->dst, "dst", gather ? n1 : lim, row, (int64_t)ds, true);
    core_range *table = gather ? &src : &dst;
    table->idx_rows = n1;
    table->bytes = n1 * row;
    out[n++] = src;
    out[n++] = dst;
    if (a->red.val != ISA_RED_NONE) { /* read, then combined and written */
        out[n] = dst;
        out[n].write = false;
        out[n++].what = "dst (read)";
    }
    return n;
}

static const ranges_fn core_family_ranges[ISA_FAMILY_COUNT] = {
    [ISA_FAMILY_CTRL] = ranges_none,
    [ISA_FAMILY_SEM] = ranges_none,
    [ISA_FAMILY_DMA] = ranges_dma,
    [ISA_FAMILY_MXU_LOAD] = ranges_mxu_load,
    [ISA_FAMILY_MXU_MM] = ranges_mxu_mm,
    [ISA_FAMILY_MXU_DRAIN] = ranges_mxu_drain,
    [ISA_FAMILY_VPU_BINARY] = ranges_vpu_binary,
    [ISA_FAMILY_VPU_SCALAR] = ranges_vpu_scalar,
    [ISA_FAMILY_VPU_UNARY] = ranges_vpu_unary,
    [ISA_FAMILY_VPU_RROW] = ranges_vpu_rrow,
    [ISA_FAMILY_VPU_RCOL] = ranges_vpu_rcol,
    [ISA_FAMILY_VPU_CAST] = ranges_vpu_cast,
    [ISA_FAMILY_VPU_TRANSPOSE] = ranges_vpu_transpose,
    [ISA_FAMILY_VPU_FILL] = ranges_vpu_fill,
    [ISA_FAMILY_VPU_SELECT] = ranges_vpu_select,
    [ISA_FAMILY_VPU_SELECTS] = ranges_vpu_selects,
    [ISA_FAMILY_VPU_IOTA] = ranges_vpu_iota,
    [ISA_FAMILY_VPU_RAND] = ranges_vpu_rand,
    [ISA_FAMILY_COMM_SEND] = ranges_comm_send,
    [ISA_FAMILY_COMM_RECV] = ranges_comm_recv,
    [ISA_FAMILY_VPU_FMA] = ranges_vpu_fma,
    [ISA_FAMILY_VPU_RDOT] = ranges_vpu_rdot,
    [ISA_FAMILY_DMA_IDX] = ranges_dma_idx,
};

unsigned core_ranges(const isa_insn *in, uint64_t mxu_k, uint64_t mxu_n,
                     core_range out[CORE_MAX_RANGES])
{
    return core_family_ranges[isa_ops[in->op].family](in, mxu_k, mxu_n, out);
}

uint64_t core_units_touched(const core_range *r, unsigned n, isa_space space, uint64_t unit_bytes,
                           uint64_t units)
{
    /* a bit per unit (sram_banks, hbm_channels <= 4096: schema); only the words of `units`
     * cleared, since this runs for every memory instruction */
    uint64_t seen[4096 / 64];
    if (units > 4096)
        units = 4096;
    memset(seen, 0, (size_t)((units + 63) / 64) * sizeof *seen);
    uint64_t count = 0;
    for (unsigned i = 0; i < n && count < units; i++) {
        if (r[i].space != space)
            continue;
        uint64_t scanned = 0;
        for (uint64_t p = 0; p < r[i].planes && count < units && scanned < CORE_BANK_SCAN_ROWS; p++)
            for (uint64_t row = 0; row < r[i].rows && count < units && scanned < CORE_BANK_SCAN_ROWS;
                 row++, scanned++) {
                uint64_t a = r[i].addr + p * r[i].plane_stride + row * r[i].row_stride;
                uint64_t first = a / unit_bytes, last = (a + r[i].row_bytes - 1) / unit_bytes;
                if (last - first + 1 >= units)
                    last = first + units - 1;
                for (uint64_t u = first; u <= last; u++) {
                    uint64_t b = u % units;
                    if (!(seen[b / 64] >> (b % 64) & 1)) {
                        seen[b / 64] |= (uint64_t)1 << (b % 64);
                        count++;
                    }
                }
            }
    }
    return count ? count : units;
}

uint64_t core_spad_banks_touched(const arch_config *cfg, const core_range *r, unsigned n)
{
    return core_units_touched(r, n, ISA_SPACE_SPAD, (uint64_t)cfg->core.sram_port_bytes_per_cycle,
                              (uint64_t)cfg->core.sram_banks);
}

uint64_t core_burst_bytes(const core_range *range, uint64_t burst)
{
    if (range->idx_rows) {
        uint64_t per = ceil_div(range->row_bytes, burst);
        if (range->addr % burst || range->row_stride % burst)
            per++;
        return range->idx_rows * per * burst;
    }
    /* Rows that follow each other without a gap are one access stream: merge them. */
    core_range m = *range, *r = &m;
    if (r->rows == 1 || r->row_stride == r->row_bytes) {
        r->row_bytes *= r->rows;
        r->rows = 1;
        r->row_stride = r->row_bytes;
        if (r->planes == 1 || r->plane_stride == r->row_bytes) {
            r->row_bytes *= r->planes;
            r->planes = 1;
            r->row_stride = r->row_bytes;
        } else { /* planes become the rows */
            r->rows = r->planes;
            r->row_stride = r->plane_stride;
            r->planes = 1;
        }
    }
    uint64_t rows = r->planes * r->rows, scanned = 0, bursts = 0;
    bool uniform = r->row_stride % burst == 0 && (r->planes == 1 || r->plane_stride % burst == 0);
    for (uint64_t p = 0; p < r->planes && scanned < CORE_BANK_SCAN_ROWS; p++)
        for (uint64_t i = 0; i < r->rows && scanned < CORE_BANK_SCAN_ROWS; i++, scanned++) {
            uint64_t a = r->addr + p * r->plane_stride + i * r->row_stride;
            bursts += (a + r->row_bytes - 1) / burst - a / burst + 1;
            if (uniform) /* every row starts at the same offset in its burst */
                return bursts * rows * burst;
        }
    /* rows beyond the scan: as many bursts as the scanned ones on average, rounded up */
    return scanned == rows ? bursts * burst : ceil_div(bursts * rows, scanned) * burst;
}

uint64_t core_space_bytes(const arch_config *cfg, isa_space s)
{
    switch (s) {
    case ISA_SPACE_SPAD: return cfg->core.sram_bytes;
    case ISA_SPACE_ACC: return cfg->core.acc_bytes;
    case ISA_SPACE_HBM: /* and a global buffer's addresses after it (core_l2.c) */
        return cfg->chip.hbm_bytes +
               (cfg->chip.l2_mode == ARCH_L2_MODE_BUFFER ? cfg->chip.l2_bytes : 0);
    default: return 0;
    }
}

uint64_t core_spad_bytes_per_cycle(const arch_config *cfg)
{
    return (uint64_t)cfg->core.sram_banks * (uint64_t)cfg->core.sram_port_bytes_per_cycle;
}

bool core_mxu_sched(const mxu_array *a, uint64_t m, uint64_t n, uint64_t k, double macs_per_pe,
                    mxu_sched *out)
{
    mxu_timing t;
    np_err e = {0};
    if (mxu_gemm_timing(a, m, n, k, &t, &e) != NP_OK || !(macs_per_pe > 0))
        return false;
    uint64_t stream = macs_per_pe == 1.0 ? t.t : (uint64_t)ceil((double)t.t / macs_per_pe);
    mxu_sched_of(a, t.folds, stream ? stream : 1, out);
    return true;
}

uint64_t core_mxu_cycles(const mxu_array *a, uint64_t m, uint64_t n, uint64_t k,
                         double macs_per_pe)
{
    mxu_sched s;
    return core_mxu_sched(a, m, n, k, macs_per_pe, &s) ? s.cycles : 0;
}

bool core_mxu_insn_sched(const arch_config *cfg, const isa_insn *in, uint64_t mxu_k,
                         uint64_t mxu_n, mxu_sched *out)
{
    mxu_array arr;
    mxu_array_from_arch(cfg, &arr);
    return core_mxu_sched(&arr, (uint64_t)in->MXU_MM.m.val, mxu_n, mxu_k,
                          macs_rate(cfg, (isa_dtype)in->MXU_MM.dtype.val), out);
}

/* ---- compute time, by family ---------------------------------------------------------------- */

/* The time classes of the families: what sets an instruction's compute cycles. */
typedef enum core_time_class {
    CORE_TIME_NONE = 0, /* no entry (a family the model does not know: tests fail) */
    CORE_TIME_FREE,     /* no unit cycles: front end, semaphores, comm (the network times it),
                           DMA (its bytes through the ports and the HBM time it), mxu.load
                           (its preload is part of each mxu.mm fold) */
    CORE_TIME_ARRAY,    /* mxu.mm: the array model */
    CORE_TIME_DRAIN,    /* mxu.drain: one accumulator row of array_cols per cycle */
    CORE_TIME_VECTOR,   /* rows x cols elements at the vector rate of the op's cost class */
} core_time_class;

static const core_time_class core_family_time[ISA_FAMILY_COUNT] = {
    [ISA_FAMILY_CTRL] = CORE_TIME_FREE,
    [ISA_FAMILY_SEM] = CORE_TIME_FREE,
    [ISA_FAMILY_DMA] = CORE_TIME_FREE,
    [ISA_FAMILY_MXU_LOAD] = CORE_TIME_FREE,
    [ISA_FAMILY_MXU_MM] = CORE_TIME_ARRAY,
    [ISA_FAMILY_MXU_DRAIN] = CORE_TIME_DRAIN,
    [ISA_FAMILY_VPU_BINARY] = CORE_TIME_VECTOR,
    [ISA_FAMILY_VPU_SCALAR] = CORE_TIME_VECTOR,
    [ISA_FAMILY_VPU_UNARY] = CORE_TIME_VECTOR,
    [ISA_FAMILY_VPU_RROW] = CORE_TIME_VECTOR,
    [ISA_FAMILY_VPU_RCOL] = CORE_TIME_VECTOR,
    [ISA_FAMILY_VPU_CAST] = CORE_TIME_VECTOR,
    [ISA_FAMILY_VPU_TRANSPOSE] = CORE_TIME_VECTOR,
    [ISA_FAMILY_VPU_FILL] = CORE_TIME_VECTOR,
    [ISA_FAMILY_VPU_SELECT] = CORE_TIME_VECTOR,
    [ISA_FAMILY_VPU_SELECTS] = CORE_TIME_VECTOR,
    [ISA_FAMILY_VPU_IOTA] = CORE_TIME_VECTOR,
    [ISA_FAMILY_VPU_RAND] = CORE_TIME_VECTOR,
    [ISA_FAMILY_COMM_SEND] = CORE_TIME_FREE,
    [ISA_FAMILY_COMM_RECV] = CORE_TIME_FREE,
    [ISA_FAMILY_VPU_FMA] = CORE_TIME_VECTOR,
    [ISA_FAMILY_VPU_RDOT] = CORE_TIME_VECTOR,
    [ISA_FAMILY_DMA_IDX] = CORE_TIME_FREE,
};

bool core_family_modelled(isa_family f)
{
    return (unsigned)f < ISA_FAMILY_COUNT && core_family_ranges[f] != NULL &&
           core_family_time[f] != CORE_TIME_NONE;
}

uint64_t core_exec_cycles(const arch_config *cfg, const isa_insn *in, uint64_t mxu_k,
                          uint64_t mxu_n)
{
    switch (core_family_time[isa_ops[in->op].family]) {
    case CORE_TIME_ARRAY: {
        mxu_array arr;
        mxu_array_from_arch(cfg, &arr);
        return core_mxu_cycles(&arr, (uint64_t)in->MXU_MM.m.val, mxu_n, mxu_k,
                               macs_rate(cfg, (isa_dtype)in->MXU_MM.dtype.val));
    }
    case CORE_TIME_DRAIN:
        return ceil_div((uint64_t)in->MXU_DRAIN.m.val * (uint64_t)in->MXU_DRAIN.n.val,
                        (uint64_t)cfg->core.array_cols);
    case CORE_TIME_VECTOR: {
        /* every VPU family has rows and cols fields (tests/test_isa.c) */
        int ri = isa_field_find(in->op, "rows"), ci = isa_field_find(in->op, "cols");
        uint64_t elems = (uint64_t)in->opnd[ri].val * (uint64_t)in->opnd[ci].val;
        if (isa_ops[in->op].cost == ISA_COST_TRANSC) {
            double per_cycle = (double)cfg->core.vector_lanes * cfg->core.vector_transc_ops_per_lane;
            return (uint64_t)ceil((double)elems / per_cycle - 1e-9);
        }
        uint64_t per_cycle = (uint64_t)cfg->core.vector_lanes * (uint64_t)cfg->core.vector_ops_per_lane;
        return ceil_div(elems, per_cycle);
    }
    default:
        return 0;
    }
}

/* Whether bytes [x, x + len) meet a row of plane p of b. */
static bool row_meets(uint64_t x, uint64_t len, const core_range *b, uint64_t p)
{
    uint64_t base = b->addr + p * b->plane_stride;
    if (x + len <= base)
        return false;
    uint64_t rs = b->row_stride ? b->row_stride : b->row_bytes;
    uint64_t i_max = (x + len - 1 - base) / rs; /* last row starting before the end of x */
    if (i_max >= b->rows)
        i_max = b->rows - 1;
    /* first row ending after x: base + i x rs + row_bytes > x */
    uint64_t i_min = x + 1 > base + b->row_bytes ? ceil_div(x + 1 - base - b->row_bytes, rs) : 0;
    return i_min <= i_max;
}

bool core_ranges_overlap(const core_range *a, const core_range *b)
{
    if (a->space != b->space || !a->bytes || !b->bytes || a->addr >= b->addr + b->extent ||
        b->addr >= a->addr + a->extent)
        return false;
    if (a->planes * a->rows > b->planes * b->rows) { /* walk the rows of the smaller one */
        const core_range *t = a;
        a = b, b = t;
    }
    uint64_t ars = a->row_stride ? a->row_stride : a->row_bytes;
    uint64_t bps = b->plane_stride;
    uint64_t bpe = (b->rows - 1) * (b->row_stride ? b->row_stride : b->row_bytes) + b->row_bytes;
    uint64_t work = 0;
    for (uint64_t p = 0; p < a->planes; p++)
        for (uint64_t i = 0; i < a->rows; i++) {
            uint64_t x = a->addr + p * a->plane_stride + i * ars, end = x + a->row_bytes;
            if (end <= b->addr)
                continue;
            /* the planes of b that can meet [x, end): start before end, end after x */
            uint64_t q_lo = 0, q_hi = 0;
            if (b->planes > 1 && bps) {
                q_hi = (end - 1 - b->addr) / bps;
                if (q_hi >= b->planes)
                    q_hi = b->planes - 1;
                q_lo = x + 1 > b->addr + bpe ? ceil_div(x + 1 - b->addr - bpe, bps) : 0;
            } else if (b->planes > 1) {
                q_hi = 0; /* planes on top of each other: the first stands for all */
            }
            for (uint64_t q = q_lo; q <= q_hi; q++) {
                if (++work > CORE_OVERLAP_SCAN_ROWS)
                    return true; /* too many to compare: the extents overlap */
                if (row_meets(x, a->row_bytes, b, q))
                    return true;
            }
        }
    return false;
}
