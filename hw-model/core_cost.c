/* core_cost.c — footprints and cycle costs of resolved instructions (see core_cost.h). */
#include "core_cost.h"

#include <math.h>

static uint64_t ceil_div(uint64_t a, uint64_t b) { return b ? a / b + (a % b != 0) : 0; }

/* Rows of row_bytes each, stride apart (0: packed). */
static core_range tile(const isa_opnd *o, const char *what, uint64_t rows, uint64_t row_bytes,
                       int64_t stride, bool write)
{
    uint64_t s = stride ? (uint64_t)stride : row_bytes;
    core_range r = {(isa_space)o->space, (uint64_t)o->val, (rows - 1) * s + row_bytes,
                    rows * row_bytes, write, what, 1, 0, rows, s, row_bytes};
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

unsigned core_ranges(const isa_insn *in, uint64_t mxu_k, uint64_t mxu_n,
                     core_range out[CORE_MAX_RANGES])
{
    unsigned n = 0;
    switch (in->op) {
    case ISA_OP_DMA_COPY: {
        const isa_args_DMA_COPY *a = &in->DMA_COPY;
        uint64_t row = (uint64_t)a->n0.val * isa_dtype_size[a->dtype.val];
        uint64_t n1 = (uint64_t)a->n1.val, n2 = (uint64_t)a->n2.val;
        const isa_opnd *ends[2] = {&a->src, &a->dst};
        const int64_t s1[2] = {a->src_s1.val, a->dst_s1.val}, s2[2] = {a->src_s2.val, a->dst_s2.val};
        for (int i = 0; i < 2; i++) {
            uint64_t rs = s1[i] ? (uint64_t)s1[i] : row;
            uint64_t ps = s2[i] ? (uint64_t)s2[i] : n1 * rs;
            out[n++] = (core_range){(isa_space)ends[i]->space, (uint64_t)ends[i]->val,
                                    (n2 - 1) * ps + (n1 - 1) * rs + row, n2 * n1 * row, i == 1,
                                    i ? "dst" : "src", n2, ps, n1, rs, row};
        }
        break;
    }
    case ISA_OP_MXU_LOAD: {
        const isa_args_MXU_LOAD *a = &in->MXU_LOAD;
        uint64_t e = isa_dtype_size[a->dtype.val], k = (uint64_t)a->k.val, nn = (uint64_t)a->n.val;
        out[n++] = a->trans.val ? tile(&a->w, "w", nn, k * e, a->stride.val, false)
                                : tile(&a->w, "w", k, nn * e, a->stride.val, false);
        break;
    }
    case ISA_OP_MXU_MM: {
        const isa_args_MXU_MM *a = &in->MXU_MM;
        uint64_t e = isa_dtype_size[a->dtype.val], m = (uint64_t)a->m.val;
        out[n++] = tile(&a->a, "a", m, mxu_k * e, a->stride.val, false);
        out[n++] = tile(&a->acc, "acc", 1, m * mxu_n * 4, 0, true);
        break;
    }
    case ISA_OP_MXU_DRAIN: {
        const isa_args_MXU_DRAIN *a = &in->MXU_DRAIN;
        uint64_t e = isa_dtype_size[a->dtype.val], m = (uint64_t)a->m.val, nn = (uint64_t)a->n.val;
        out[n++] = tile(&a->acc, "acc", 1, m * nn * 4, 0, false);
        out[n++] = tile(&a->dst, "dst", m, nn * e, a->stride.val, true);
        if (a->bias.space != ISA_SPACE_NONE)
            out[n++] = tile(&a->bias, "bias", 1, nn * 4, 0, false);
        break;
    }
    case ISA_OP_VPU_CAST: {
        const isa_args_VPU_CAST *a = &in->VPU_CAST;
        uint64_t r = (uint64_t)a->rows.val, c = (uint64_t)a->cols.val;
        out[n++] = tile(&a->src, "src", r, c * isa_dtype_size[a->src_dtype.val], a->src_s.val, false);
        out[n++] = tile(&a->dst, "dst", r, c * isa_dtype_size[a->dtype.val], a->dst_s.val, true);
        break;
    }
    case ISA_OP_VPU_FILL: {
        const isa_args_VPU_FILL *a = &in->VPU_FILL;
        out[n++] = tile(&a->dst, "dst", (uint64_t)a->rows.val,
                        (uint64_t)a->cols.val * isa_dtype_size[a->dtype.val], a->dst_s.val, true);
        break;
    }
    case ISA_OP_VPU_TRANSPOSE: {
        const isa_args_VPU_TRANSPOSE *a = &in->VPU_TRANSPOSE;
        uint64_t e = isa_dtype_size[a->dtype.val], r = (uint64_t)a->rows.val, c = (uint64_t)a->cols.val;
        out[n++] = tile(&a->src, "src", r, c * e, a->src_s.val, false);
        out[n++] = tile(&a->dst, "dst", c, r * e, a->dst_s.val, true);
        break;
    }
    case ISA_OP_COMM_SEND:
        out[n++] = tile(&in->COMM_SEND.src, "src", 1, (uint64_t)in->COMM_SEND.bytes.val, 0, false);
        break;
    case ISA_OP_COMM_RECV: /* with a reduction the recv also reads dst */
        out[n++] = tile(&in->COMM_RECV.dst, "dst", 1, (uint64_t)in->COMM_RECV.bytes.val, 0, true);
        break;
    default:
        break;
    }
    if (n || in->op < ISA_OP_VPU_ADD || in->op > ISA_OP_VPU_CMAX)
        return n;
    /* The VPU families share operand layouts (isa.def: ISA_VPU_BINARY_ etc.). */
    if (in->op <= ISA_OP_VPU_MIN) {
        const isa_args_VPU_ADD *a = &in->VPU_ADD; /* same layout for the binary family */
        uint64_t e = isa_dtype_size[a->dtype.val], rows = (uint64_t)a->rows.val, cols = (uint64_t)a->cols.val;
        out[n++] = tile(&a->a, "a", rows, cols * e, a->a_s.val, false);
        switch (a->bcast.val) {
        case ISA_BCAST_ROW: out[n++] = tile(&a->b, "b", 1, cols * e, 0, false); break;
        case ISA_BCAST_COL: out[n++] = tile(&a->b, "b", 1, rows * e, 0, false); break;
        case ISA_BCAST_SCALAR: out[n++] = tile(&a->b, "b", 1, e, 0, false); break;
        default: out[n++] = tile(&a->b, "b", rows, cols * e, a->b_s.val, false); break;
        }
        out[n++] = tile(&a->dst, "dst", rows, cols * e, a->dst_s.val, true);
    } else if (in->op <= ISA_OP_VPU_MINS) {
        const isa_args_VPU_ADDS *a = &in->VPU_ADDS;
        uint64_t e = isa_dtype_size[a->dtype.val], rows = (uint64_t)a->rows.val, cols = (uint64_t)a->cols.val;
        out[n++] = tile(&a->a, "a", rows, cols * e, a->a_s.val, false);
        out[n++] = tile(&a->dst, "dst", rows, cols * e, a->dst_s.val, true);
    } else if (in->op <= ISA_OP_VPU_COPY) {
        const isa_args_VPU_EXP *a = &in->VPU_EXP;
        uint64_t e = isa_dtype_size[a->dtype.val], rows = (uint64_t)a->rows.val, cols = (uint64_t)a->cols.val;
        out[n++] = tile(&a->src, "src", rows, cols * e, a->src_s.val, false);
        out[n++] = tile(&a->dst, "dst", rows, cols * e, a->dst_s.val, true);
    } else {
        const isa_args_VPU_RSUM *a = &in->VPU_RSUM;
        uint64_t e = isa_dtype_size[a->dtype.val], rows = (uint64_t)a->rows.val, cols = (uint64_t)a->cols.val;
        bool per_row = in->op <= ISA_OP_VPU_RMIN;
        out[n++] = tile(&a->src, "src", rows, cols * e, a->src_s.val, false);
        out[n++] = tile(&a->dst, "dst", 1, (per_row ? rows : cols) * e, 0, true);
    }
    return n;
}

uint64_t core_units_touched(const core_range *r, unsigned n, isa_space space, uint64_t unit_bytes,
                           uint64_t units)
{
    uint8_t seen[4096] = {0}; /* sram_banks, hbm_channels <= 4096 (schema) */
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
                for (uint64_t u = first; u <= last; u++)
                    if (!seen[u % units]) {
                        seen[u % units] = 1;
                        count++;
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
    case ISA_SPACE_HBM: return cfg->chip.hbm_bytes;
    default: return 0;
    }
}

uint64_t core_spad_bytes_per_cycle(const arch_config *cfg)
{
    return (uint64_t)cfg->core.sram_banks * (uint64_t)cfg->core.sram_port_bytes_per_cycle;
}

uint64_t core_mxu_cycles(const mxu_array *a, uint64_t m, uint64_t n, uint64_t k,
                         double macs_per_pe)
{
    mxu_timing t;
    np_err e = {0};
    if (mxu_gemm_timing(a, m, n, k, &t, &e) != NP_OK || !(macs_per_pe > 0))
        return 0;
    if (macs_per_pe == 1.0)
        return t.cycles;
    uint64_t stream = (uint64_t)ceil((double)t.t / macs_per_pe);
    return t.cycles - t.folds * t.t + t.folds * stream;
}

uint64_t core_exec_cycles(const arch_config *cfg, const isa_insn *in, uint64_t mxu_k,
                          uint64_t mxu_n)
{
    if (in->op == ISA_OP_MXU_LOAD)
        return 0;
    if (in->op == ISA_OP_MXU_MM) {
        mxu_array arr;
        mxu_array_from_arch(cfg, &arr);
        return core_mxu_cycles(&arr, (uint64_t)in->MXU_MM.m.val, mxu_n, mxu_k,
                               macs_rate(cfg, (isa_dtype)in->MXU_MM.dtype.val));
    }
    if (in->op == ISA_OP_MXU_DRAIN)
        return ceil_div((uint64_t)in->MXU_DRAIN.m.val * (uint64_t)in->MXU_DRAIN.n.val,
                        (uint64_t)cfg->core.array_cols);
    /* VPU: every VPU op has rows and cols fields. */
    int ri = isa_field_find(in->op, "rows"), ci = isa_field_find(in->op, "cols");
    if (ri < 0 || ci < 0)
        return 0;
    uint64_t elems = (uint64_t)in->opnd[ri].val * (uint64_t)in->opnd[ci].val;
    if (isa_ops[in->op].cost == ISA_COST_TRANSC) {
        double per_cycle = (double)cfg->core.vector_lanes * cfg->core.vector_transc_ops_per_lane;
        return (uint64_t)ceil((double)elems / per_cycle - 1e-9);
    }
    uint64_t per_cycle = (uint64_t)cfg->core.vector_lanes * (uint64_t)cfg->core.vector_ops_per_lane;
    return ceil_div(elems, per_cycle);
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
