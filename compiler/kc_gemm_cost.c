/* kc_gemm_cost.c — the analytical cost model of the GEMM schedule (kc_gemm_emit.c) and the
 * tile search that uses it (docs/compiler.md, "The cost model").
 *
 * Durations, per output tile of tm x tn with slices of tk:
 *   array      array(tm, tn, tk) per slice (the hardware model's formula: folds x fold cycles
 *              per the dataflow, hw-model/mxu_timing.h, the streamed term divided by the
 *              dtype's MACs/PE), drain = tm x tn / array_cols
 *   DMA        per slice copies x latency + bytes / bw, bw = min(HBM / active cores, HBM x
 *              the fraction of its channels the copy's rows touch, the scratchpad ports),
 *              bytes in whole bursts; the store and the epilogue's operands per tile
 *   VPU        a transposed A's transposes (with its loads), the epilogue's steps
 * Then the two queues are stepped through the schedule's order and dependencies (double
 * buffering, one output buffer, the next tile's head before the store) row by row; rows and
 * batches that repeat are stepped a few times and extrapolated at the last one's pace. The
 * kernel's time is the busiest core's, and no less than all cores' HBM bytes at the HBM's
 * bandwidth.
 *
 * With an L2 cache (chip.l2_bytes > 0, l2_mode cache; docs/hw-model.md "The L2") the copies
 * stream from it: at a core's share of the L2's bandwidth (no channel fraction: its lines
 * interleave over its slices), still paying the HBM's latency (cores in step wait for the
 * fill of what they read first). The kernel is then no less than all cores' bytes at the
 * L2's bandwidth, nor than what reaches the HBM at the HBM's: each operand once, or again
 * for every tile or row of a core's block whose reuse the L2 cannot hold (kmm_l2_hbm, which
 * also picks the split). Without an L2 nothing here changes.
 */
#include <math.h>
#include <string.h>

#include "kc_gemm.h"

#define min_u64 kmm_min
#define cdiv kmm_cdiv

/* ---- the array ------------------------------------------------------------------------------ */

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

uint64_t kmm_fold_gap(const arch_config *cfg, uint64_t t_prev, uint64_t t_next)
{
    uint64_t R = (uint64_t)cfg->core.array_rows, C = (uint64_t)cfg->core.array_cols;
    bool os = cfg->core.dataflow == ARCH_DATAFLOW_OS, db = cfg->core.mxu_weight_double_buffer;
    if (!cfg->core.mxu_pipelined_folds)
        return (os ? R : 2 * R) + C + t_prev - 2 - (db && !os ? R : 0);
    if (os) {
        uint64_t edge = t_prev + R > t_next ? t_prev + R - t_next : 0;
        return t_prev > edge ? t_prev : edge;
    }
    return db ? (t_prev > R ? t_prev : R) : t_prev + R - 1;
}

void kmm_array_sched(const arch_config *cfg, isa_dtype dt, uint64_t m, uint64_t n, uint64_t k,
                     kmm_sched *out)
{
    uint64_t R = (uint64_t)cfg->core.array_rows, C = (uint64_t)cfg->core.array_cols, sr, sc, t;
    switch (cfg->core.dataflow) {
    case ARCH_DATAFLOW_OS: sr = m, sc = n, t = k; break;
    case ARCH_DATAFLOW_IS: sr = k, sc = m, t = n; break;
    default: sr = k, sc = n, t = m; break;
    }
    double rate = macs_rate(cfg, dt);
    if (rate > 0 && rate != 1.0)
        t = (uint64_t)ceil((double)t / rate);
    out->folds = cdiv(sr, R) * cdiv(sc, C);
    out->stream = t;
    out->lead = cfg->core.dataflow == ARCH_DATAFLOW_OS ? 0 : R;
    out->period = kmm_fold_gap(cfg, t, t);
    out->tail = t + R + C - 2;
    out->cycles = out->lead + (out->folds - 1) * out->period + out->tail;
}

uint64_t kmm_array_cycles(const arch_config *cfg, isa_dtype dt, uint64_t m, uint64_t n, uint64_t k)
{
    kmm_sched s;
    kmm_array_sched(cfg, dt, m, n, k, &s);
    return s.cycles;
}

/* With pipelined folds, the cycles an mxu.mm of schedule s adds when it goes on right after
 * one whose last fold streamed t_prev cycles (the array's run of folds continues:
 * hw-model/core.c); without, its cycles alone. */
static double chain_cycles(const arch_config *cfg, const kmm_sched *s, uint64_t t_prev)
{
    if (!cfg->core.mxu_pipelined_folds)
        return (double)s->cycles;
    return (double)kmm_fold_gap(cfg, t_prev, s->stream) + (double)((s->folds - 1) * s->period) +
           (double)s->tail - (double)(t_prev + s->tail - s->stream);
}

/* ---- copies --------------------------------------------------------------------------------- */

/* Whether the chip's copies go through an L2 (a cache, or a global buffer the GEMM stages its
 * operands in: taken as the same here, every copy at the L2's bandwidth). */
static bool has_l2(const arch_config *cfg) { return cfg->chip.l2_bytes != 0; }

/* Bytes per core cycle of what the copies stream from: the L2 with one, else the HBM. */
static double mem_bw(const arch_config *cfg)
{
    return (has_l2(cfg) ? cfg->chip.l2_gb_per_s : cfg->chip.hbm_gb_per_s) / cfg->core.clock_ghz;
}

/* What reaches the HBM when the cores move `bytes` through the L2 in the split pr x pc
 * (kmm_l2_hbm), at most those bytes; in core cycles at the HBM's bandwidth. */
static double hbm_behind_l2(const kmm *m, const arch_config *cfg, uint64_t pr, uint64_t pc,
                            double bytes)
{
    double h = kmm_l2_hbm(m, cfg, pr, pc);
    return (h < bytes ? h : bytes) / (cfg->chip.hbm_gb_per_s / cfg->core.clock_ghz);
}

/* The fraction of HBM channels that rows of row_bytes at addr, addr + stride, ... touch. */
static double chan_frac(const arch_config *cfg, uint64_t addr, uint64_t rows, uint64_t stride,
                        uint64_t row_bytes)
{
    uint64_t I = (uint64_t)cfg->chip.hbm_interleave_bytes, Ch = (uint64_t)cfg->chip.hbm_channels;
    if (stride == row_bytes || rows == 1) { /* one contiguous run */
        uint64_t n = (addr + rows * row_bytes - 1) / I - addr / I + 1;
        return n >= Ch ? 1.0 : (double)n / (double)Ch;
    }
    uint8_t seen[4096] = {0};
    uint64_t count = 0, period = I * Ch;
    /* rows repeat their channels every period / gcd(stride, period) rows */
    uint64_t a = stride % period, b = period;
    while (a) {
        uint64_t t = b % a;
        b = a, a = t;
    }
    uint64_t scan = min_u64(rows, period / b + 1);
    for (uint64_t i = 0; i < scan && count < Ch; i++) {
        uint64_t s = addr + i * stride, first = s / I, last = (s + row_bytes - 1) / I;
        if (last - first + 1 >= Ch)
            last = first + Ch - 1;
        for (uint64_t u = first; u <= last; u++)
            if (!seen[u % Ch]) {
                seen[u % Ch] = 1;
                count++;
            }
    }
    return (double)count / (double)Ch;
}

/* Bytes an HBM access of rows x row_bytes (stride apart) moves in whole bursts. */
static uint64_t burst_bytes(const arch_config *cfg, uint64_t addr, uint64_t rows, uint64_t stride,
                            uint64_t row_bytes)
{
    uint64_t B = (uint64_t)cfg->chip.hbm_burst_bytes;
    if (stride == row_bytes || rows == 1)
        return ((addr + rows * row_bytes - 1) / B - addr / B + 1) * B;
    return rows * ((addr % B + row_bytes + B - 1) / B) * B;
}

/* What the cost model knows of one core's run. */
typedef struct cm {
    const kmm *m;
    const arch_config *cfg;
    double bw;        /* HBM bytes per core cycle this core gets */
    double bw_all;    /* the whole HBM's */
    double port_bw;   /* scratchpad bytes per cycle */
    double lat;       /* cycles of HBM latency and DMA setup per copy */
    uint64_t outstanding;
    uint64_t hbm_bytes;
    uint64_t K;       /* this core's part of K */
} cm;

/* Core cycles of one dma.copy with its HBM side at addr (rows x row_bytes, stride apart). */
static double copy_cycles(cm *c, uint64_t addr, uint64_t rows, uint64_t stride,
                          uint64_t row_bytes, uint64_t count)
{
    /* the copy streams at its share of the HBM, at most what the channels it touches give,
     * and at most the scratchpad ports */
    double f = has_l2(c->cfg) ? 1.0 : chan_frac(c->cfg, addr, rows, stride, row_bytes);
    uint64_t b = burst_bytes(c->cfg, addr, rows, stride, row_bytes);
    double bw = c->bw < c->bw_all * f ? c->bw : c->bw_all * f;
    bw = bw < c->port_bw ? bw : c->port_bw;
    c->hbm_bytes += rows * row_bytes * count;
    return (double)b / bw;
}

/* A slice's DMA time (the A and B parts) of the tile at (i0, j0), depth tk at k0. A
 * convolution's A slice is gathered from the staged block: scratchpad copies, each paying
 * the DMA's setup and moving its bytes twice through the ports. */
static double slice_dma(cm *c, uint64_t i0, uint64_t j0, uint64_t tm, uint64_t tn, uint64_t k0,
                        uint64_t tk, uint64_t count, uint64_t *copies)
{
    const kmm *m = c->m;
    uint64_t e = m->e, gathers = 0;
    double t = 0;
    *copies = 2;
    switch (m->ak) {
    case KMM_A_ROWS:
        t += copy_cycles(c, m->a_base + i0 * (uint64_t)m->lda + k0 * e, tm, (uint64_t)m->lda,
                         tk * e, count);
        break;
    case KMM_A_COLS:
        t += copy_cycles(c, m->a_base + k0 * (uint64_t)m->lda + i0 * e, tk, (uint64_t)m->lda,
                         tm * e, count);
        break;
    case KMM_A_CONV:
        gathers = kmm_gather_count(&m->cv, i0, tm, k0, tk);
        t += 2.0 * (double)(tm * tk * e) / c->port_bw;
        *copies = 1;
        break;
    }
    if (!m->b_cols)
        t += copy_cycles(c, m->b_base + k0 * (uint64_t)m->ldb + j0 * e, tk, (uint64_t)m->ldb,
                         tn * e, count);
    else
        t += copy_cycles(c, m->b_base + j0 * (uint64_t)m->ldb + k0 * e, tn, (uint64_t)m->ldb,
                         tk * e, count);
    return t + c->lat * (double)cdiv(*copies, c->outstanding) +
           (double)(gathers * (uint64_t)c->cfg->core.dma_setup_cycles);
}

/* A convolution's staging of the block of the tile row of tm pixels at i0 (count such rows):
 * the input rows it needs (at most the input's) copied from HBM, after a fence. */
static double stage_cost(cm *c, uint64_t i0, uint64_t tm, uint64_t count)
{
    const kmm *m = c->m;
    const kmm_conv *g = &m->cv;
    uint64_t e = m->e, n = min_u64(kmm_block_rows(g, i0, tm), g->h);
    double t;
    if (g->cm) /* per channel n rows of wcopy, or one run when the rows are whole */
        t = g->wcopy == g->w ? copy_cycles(c, m->a_base, g->c, g->xchan, n * g->xrow, count)
                             : copy_cycles(c, m->a_base, n * g->c, g->xrow, g->wcopy * e, count);
    else if (g->c == g->ctot)
        t = copy_cycles(c, m->a_base, n, g->xrow, g->wcopy * g->c * e, count);
    else
        t = copy_cycles(c, m->a_base, n * g->wcopy, g->ctot * e, g->c * e, count);
    return t + c->lat;
}

/* The durations of one tile class (tm x tn): per slice, full and edge (DMA loads, array);
 * the drain (array), the epilogue (VPU) and the store (DMA, with the epilogue's loads). */
typedef struct tile_t {
    uint64_t tm, tn;
    double load_full, load_edge, mm_full, mm_edge, drain, vpu, store;
    kmm_sched s_full, s_edge; /* the slices' fold schedules */
    double chain_full, chain_edge; /* a slice's cycles right after the one before it (a full
                                      slice's), the array's run of folds going on */
} tile_t;

static tile_t tile_cost(cm *c, uint64_t i0, uint64_t j0, uint64_t tm, uint64_t tn,
                        uint64_t count)
{
    const kmm *m = c->m;
    const arch_config *cfg = c->cfg;
    tile_t t = {.tm = tm, .tn = tn};
    uint64_t full = c->K / m->TK, edge = c->K % m->TK, copies;
    double lanes = (double)cfg->core.vector_lanes * cfg->core.vector_ops_per_lane;
    /* the VPU's transposes of a slice: a column-major A streamed, a row-major B under ct */
    double tr_per_k = ((kmm_a_transposed(m) ? (double)tm : 0) +
                       (kmm_b_transposed(m) ? (double)tn : 0)) / lanes;
    /* the array: A streamed through B, or under ct B^T through A^T */
    uint64_t sm = m->ct ? tn : tm, sn = m->ct ? tm : tn;
    if (full) {
        t.load_full = slice_dma(c, i0, j0, tm, tn, 0, m->TK, count * full, &copies) +
                      tr_per_k * (double)m->TK;
        kmm_array_sched(cfg, m->dt, sm, sn, m->TK, &t.s_full);
        t.mm_full = (double)t.s_full.cycles;
        t.chain_full = chain_cycles(cfg, &t.s_full, t.s_full.stream);
    }
    if (edge) {
        t.load_edge = slice_dma(c, i0, j0, tm, tn, full * m->TK, edge, count, &copies) +
                      tr_per_k * (double)edge;
        kmm_array_sched(cfg, m->dt, sm, sn, edge, &t.s_edge);
        t.mm_edge = (double)t.s_edge.cycles;
        t.chain_edge = full ? chain_cycles(cfg, &t.s_edge, t.s_full.stream) : t.mm_edge;
    }
    t.drain = (double)cdiv(tm * tn, (uint64_t)cfg->core.array_cols);
    if (m->c_cols)
        t.store = copy_cycles(c, m->c_base + j0 * (uint64_t)m->ldc + i0 * m->ce, tn,
                              (uint64_t)m->ldc, tm * m->ce, count) + c->lat;
    else
        t.store = copy_cycles(c, m->c_base + i0 * (uint64_t)m->ldc + j0 * m->ce, tm,
                              (uint64_t)m->ldc, tn * m->ce, count) + c->lat;
    t.vpu = (double)kmm_c_transposes(m) * (double)(tm * tn) / lanes;
    for (int a = 0; a < m->n_args; a++) {
        const kmm_arg *g = &m->args[a];
        uint64_t ae = isa_dtype_size[g->dt];
        uint64_t rows = g->bcast == ISA_BCAST_FULL || g->bcast == ISA_BCAST_COL ? tm : 1;
        uint64_t cols = g->bcast == ISA_BCAST_FULL || g->bcast == ISA_BCAST_ROW ? tn : 1;
        t.store += copy_cycles(c, g->base, rows, g->sm ? (uint64_t)g->sm : cols * ae, cols * ae,
                               count) + c->lat;
        if (g->cast)
            t.vpu += (double)(rows * cols) / lanes;
    }
    for (int i = 0; i < m->n_steps; i++)
        t.vpu += (double)(tm * tn) / lanes;
    if (m->pk > 1) {
        /* the root receives pk - 1 partial-sum tiles over the mesh, adding each at the vector
         * rate, then converts the sum */
        double noc = (double)cfg->chip.noc_flit_bytes * cfg->chip.noc_clock_ghz / cfg->core.clock_ghz;
        double bytes = (double)(tm * tn * 4), add = (double)(tm * tn) / lanes;
        /* they arrive through the root router's one ejection port, a flit per NoC cycle,
         * while it adds */
        double wire = (double)(m->pk - 1) * bytes / noc, adds = (double)(m->pk - 1) * add;
        t.vpu += (wire > adds ? wire : adds) + add +
                 2 * (double)(cfg->chip.noc_router_cycles + cfg->chip.noc_link_cycles);
    }
    return t;
}

/* ---- the two queues, step by step ----------------------------------------------------------- */

/* The DMA and array queues of one core as the schedule orders them (kc_gemm_emit.c): slices
 * alternate between two buffers (a load waits for the array to finish the slice two before),
 * a tile's drain waits for the previous tile's store (one output buffer), its store for its
 * drain (and epilogue); in the DMA queue the next tile's head (first two slices) comes
 * before this tile's store within a row. */
typedef struct pipe {
    double dma, mxu;      /* when each queue is free */
    bool run;             /* pipelined folds: the array's last op was a slice, which ended at
                             mxu, its last fold streaming from s_last for t_last cycles */
    double s_last;
    uint64_t t_last;
    double mm_done[2];    /* the array's last two slices (by buffer) */
    double store_done;    /* the last store */
    unsigned parity;
} pipe;

/* Loads and computes slices [from, to) of tile t; returns when the last array op ends. */
static void pipe_loads(pipe *p, const tile_t *t, uint64_t S, uint64_t full, uint64_t from,
                       uint64_t to, double *load_done)
{
    for (uint64_t i = from; i < to; i++) {
        unsigned b = (p->parity + (unsigned)i) & 1;
        double start = p->dma > p->mm_done[b] ? p->dma : p->mm_done[b];
        p->dma = start + (i < full ? t->load_full : t->load_edge);
        load_done[i % 4] = p->dma;
    }
    (void)S;
}

static void pipe_mms(pipe *p, const arch_config *cfg, const tile_t *t, uint64_t full,
                     uint64_t from, uint64_t to, const double *load_done)
{
    for (uint64_t i = from; i < to; i++) {
        unsigned b = (p->parity + (unsigned)i) & 1;
        const kmm_sched *s = i < full ? &t->s_full : &t->s_edge;
        double start = p->mxu > load_done[i % 4] ? p->mxu : load_done[i % 4];
        double s0 = start + (double)s->lead; /* alone */
        if (cfg->core.mxu_pipelined_folds && p->run) { /* the run of folds goes on */
            double g = p->s_last + (double)kmm_fold_gap(cfg, p->t_last, s->stream);
            double r = load_done[i % 4] + (double)s->lead;
            double v = g > r ? g : r;
            s0 = v < s0 ? v : s0;
        }
        p->s_last = s0 + (double)((s->folds - 1) * s->period);
        p->t_last = s->stream;
        p->run = true;
        p->mxu = p->s_last + (double)s->tail;
        p->mm_done[b] = p->mxu;
    }
}

/* A row of n tiles of class t (the last one of class last, e.g. an edge tile), after the
 * staging of its block (a convolution's: stage cycles of the DMA). */
static void pipe_row(pipe *p, const arch_config *cfg, const tile_t *t, const tile_t *last,
                     uint64_t n, uint64_t S, uint64_t full, double stage)
{
    uint64_t h = S < 2 ? S : 2;
    double ld[4] = {0}, ld_next[4] = {0};
    p->dma += stage;
    /* the first tile's head */
    pipe_loads(p, n == 1 ? last : t, S, full, 0, h, ld);
    for (uint64_t j = 0; j < n; j++) {
        const tile_t *c = j + 1 == n ? last : t;
        /* the array: the head's slices (loaded), then the rest as they load */
        pipe_mms(p, cfg, c, full, 0, h, ld);
        double rest_ld[4] = {0};
        for (uint64_t i = h; i < S; i++) {
            pipe_loads(p, c, S, full, i, i + 1, rest_ld);
            pipe_mms(p, cfg, c, full, i, i + 1, rest_ld);
        }
        /* the drain waits for the previous store; then the epilogue */
        double ds = p->mxu > p->store_done ? p->mxu : p->store_done;
        p->mxu = ds + c->drain;
        p->run = false; /* the drain ends the run of folds */
        double ready = p->mxu + c->vpu;
        p->parity = (p->parity + (unsigned)S) & 1;
        /* the DMA: the next tile's head, then this store */
        if (j + 1 < n) {
            const tile_t *nx = j + 2 == n ? last : t;
            pipe_loads(p, nx, S, full, 0, h, ld_next);
            memcpy(ld, ld_next, sizeof ld);
        }
        double ss = p->dma > ready ? p->dma : ready;
        p->dma = ss + c->store;
        p->store_done = p->dma;
    }
}

/* The costs of one core's part (kmm_part: batches, tile rows, tile columns) at HBM bandwidth bw
 * (bytes per cycle): its tile classes (full and edge rows x full and edge columns), the
 * staging of a convolution's blocks, and the counts they repeat. */
typedef struct block_t {
    cm c;
    uint64_t batches, nfr, ncols, nfc, S, full, edge;
    bool er;
    tile_t ff, fe, ef, ee;
    double st_full, st_edge;
} block_t;

static void block_costs(block_t *k, const kmm *m, const arch_config *cfg, double bw,
                        const kmm_part *pt)
{
    uint64_t rows = cdiv(m->M, m->TM), cols = cdiv(m->N, m->TN), batches = 1;
    uint64_t r0 = pt->r0, r1 = pt->r1, c0 = pt->c0, c1 = pt->c1;
    for (int b = 0; b < m->nb; b++)
        batches *= b ? m->bcount[b] : pt->b1 - pt->b0;
    uint64_t pk = m->pk ? m->pk : 1, kl = min_u64(m->K, cdiv(cdiv(m->K, m->TK), pk) * m->TK);
    double ghz = cfg->core.clock_ghz;
    k->c = (cm){m, cfg, bw, mem_bw(cfg),
                (double)cfg->core.sram_banks * (double)cfg->core.sram_port_bytes_per_cycle,
                cfg->chip.hbm_latency_ns * ghz + (double)cfg->core.dma_setup_cycles,
                (uint64_t)cfg->core.dma_outstanding, 0, kl};
    cm *c = &k->c;
    k->batches = batches, k->S = cdiv(kl, m->TK), k->full = kl / m->TK, k->edge = kl % m->TK;
    bool er = r1 == rows && m->M % m->TM, ec = c1 == cols && m->N % m->TN;
    k->er = er;
    k->nfr = r1 - r0 - er, k->ncols = c1 - c0, k->nfc = k->ncols - ec;
    uint64_t nfr = k->nfr, nfc = k->nfc;
    uint64_t tm_e = m->M - (rows - 1) * m->TM, tn_e = m->N - (cols - 1) * m->TN;
    uint64_t i0 = r0 * m->TM, j0 = c0 * m->TN, ie = (rows - 1) * m->TM, je = (cols - 1) * m->TN;
    k->ff = tile_cost(c, i0, j0, m->TM, m->TN, nfr * nfc * batches);
    k->fe = ec ? tile_cost(c, i0, je, m->TM, tn_e, nfr * batches) : k->ff;
    k->ef = er ? tile_cost(c, ie, j0, tm_e, m->TN, nfc * batches) : k->ff;
    k->ee = er && ec ? tile_cost(c, ie, je, tm_e, tn_e, batches) : er ? k->ef : k->fe;
    if (!nfc) /* only the edge column */
        k->ff = k->fe, k->ef = k->ee;
    k->st_full = k->st_edge = 0;
    if (m->ak == KMM_A_CONV) {
        k->st_full = nfr ? stage_cost(c, i0, m->TM, nfr * batches) : 0;
        k->st_edge = er ? stage_cost(c, ie, tm_e, batches) : 0;
    }
}

/* One core's part of the work at HBM bandwidth bw (bytes per cycle), stepped through the
 * queues: its time, and its HBM bytes in *bytes. */
static double core_time(const kmm *m, const arch_config *cfg, double bw, const kmm_part *pt,
                        uint64_t *bytes)
{
    block_t k;
    block_costs(&k, m, cfg, bw, pt);
    uint64_t batches = k.batches, nfr = k.nfr, ncols = k.ncols, S = k.S, full = k.full;
    bool er = k.er;
    const tile_t ff = k.ff, fe = k.fe, ef = k.ef, ee = k.ee;
    double st_full = k.st_full, st_edge = k.st_edge;
    pipe p = {0};
    /* rows repeat: step a few of each kind, then go on at the last one's pace */
    double before = 0;
    for (uint64_t b = 0; b < batches; b++) {
        double batch0 = p.mxu > p.dma ? p.mxu : p.dma;
        for (uint64_t r = 0; r < nfr; r++) {
            if (r >= 3 && nfr > 4) { /* steady: the rest of the full rows */
                double now = p.mxu > p.dma ? p.mxu : p.dma, step = now - before;
                double shift = step * (double)(nfr - r);
                p.dma += shift, p.mxu += shift, p.store_done += shift;
                p.mm_done[0] += shift, p.mm_done[1] += shift, p.s_last += shift;
                p.parity = (p.parity + (unsigned)((nfr - r) * ncols * S)) & 1;
                break;
            }
            before = p.mxu > p.dma ? p.mxu : p.dma;
            pipe_row(&p, cfg, &ff, &fe, ncols, S, full, st_full);
        }
        if (er)
            pipe_row(&p, cfg, &ef, &ee, ncols, S, full, st_edge);
        if (b >= 2 && batches > 3) { /* steady: the rest of the batches */
            double now = p.mxu > p.dma ? p.mxu : p.dma;
            double shift = (now - batch0) * (double)(batches - b - 1);
            p.dma += shift, p.mxu += shift, p.store_done += shift;
            p.mm_done[0] += shift, p.mm_done[1] += shift, p.s_last += shift;
            break;
        }
    }
    *bytes = k.c.hbm_bytes;
    return p.dma > p.mxu ? p.dma : p.mxu;
}

#define KMM_EST_MAX_CORES 256

void kmm_estimate(const kmm *m, const arch_config *cfg, uint64_t n_cores, kmm_est *out)
{
    memset(out, 0, sizeof *out);
    uint64_t pb, pr, pc, pk = m->pk ? m->pk : 1;
    kmm_split(m, cfg, (n_cores ? n_cores : 1) / pk, &pb, &pr, &pc);
    uint64_t P = pb * pr * pc; /* blocks; pk cores each share the HBM too */
    double hbm = mem_bw(cfg); /* bytes per core cycle (the L2's with one) */
    /* Pass 1: every core at an equal share. Pass 2 (up to KMM_EST_MAX_CORES cores): each core
     * shares the HBM with the cores still running, on average over its run: cores that finish
     * early leave their bandwidth to the others, as the shared HBM (max-min fair) does. (Cores
     * in step load at the same time, so a core's compute phases leave no bandwidth to the
     * others.) */
    double t1[KMM_EST_MAX_CORES];
    double worst = 0;
    uint64_t bytes = 0;
    bool two = P <= KMM_EST_MAX_CORES && P > 1;
    for (uint64_t i = 0; i < P; i++) {
        uint64_t b;
        kmm_part pt;
        kmm_part_of(m, pb, pr, pc, i, &pt);
        double t = core_time(m, cfg, hbm / (double)(P * pk), &pt, &b);
        if (two)
            t1[i] = t;
        worst = t > worst ? t : worst;
        bytes += b * pk;
    }
    if (two) {
        worst = 0;
        for (uint64_t i = 0; i < P; i++) {
            double active = 0; /* cores running, on average over this one's run */
            for (uint64_t j = 0; j < P; j++)
                active += t1[j] < t1[i] ? t1[j] / t1[i] : 1.0;
            double share = hbm / (active > 1 ? active : 1) / (double)pk;
            uint64_t b;
            kmm_part pt;
            kmm_part_of(m, pb, pr, pc, i, &pt);
            double t = core_time(m, cfg, share, &pt, &b);
            worst = t > worst ? t : worst;
        }
    }
    out->hbm_bytes = bytes;
    double chip = (double)bytes / hbm;
    if (has_l2(cfg)) { /* and what reaches the HBM behind the L2 */
        double behind = hbm_behind_l2(m, cfg, pr, pc, (double)bytes);
        chip = chip > behind ? chip : behind;
    }
    out->cycles = (uint64_t)ceil(worst > chip ? worst : chip);
    out->cores = P * pk;
}

/* ---- the ranking: a closed-form estimate ------------------------------------------------- */

static double dmax(double a, double b) { return a > b ? a : b; }

/* A tile's cycles in the schedule's steady state, in closed form: its slices go at the pace
 * of the slower of their load (DMA) and their multiply (array), then the array drains it;
 * the DMA loads its slices and stores it; and its drain, the VPU's work on it and its store
 * are a chain the next tile's drain waits for (one C buffer). The tile takes the longest. */
static double quick_tile(const tile_t *t, uint64_t full, uint64_t edge)
{
    /* the first slice after the drain pays its fill; with pipelined folds the others go on
     * from the one before */
    double slices = full ? dmax(t->load_full, t->mm_full) +
                               (double)(full - 1) * dmax(t->load_full, t->chain_full) +
                               (edge ? dmax(t->load_edge, t->chain_edge) : 0)
                         : (edge ? dmax(t->load_edge, t->mm_edge) : 0);
    double dma = (double)full * t->load_full + (edge ? t->load_edge : 0) + t->store;
    return dmax(dmax(slices + t->drain, dma), t->drain + t->vpu + t->store);
}

/* A core's block in closed form: its tiles in the steady state, per tile row the staging of
 * a convolution's block and the first slice's load before the array starts, and at the end
 * the last tile's VPU work and store. */
static double quick_core(const kmm *m, const arch_config *cfg, double bw, const kmm_part *pt,
                         uint64_t *bytes)
{
    block_t k;
    block_costs(&k, m, cfg, bw, pt);
    double f = (double)(k.ncols - k.nfc);
    double per_row = (double)k.nfc * quick_tile(&k.ff, k.full, k.edge) +
                     f * quick_tile(&k.fe, k.full, k.edge);
    double t = (double)k.nfr * (per_row + k.st_full + k.ff.load_full);
    if (k.er)
        t += (double)k.nfc * quick_tile(&k.ef, k.full, k.edge) +
             f * quick_tile(&k.ee, k.full, k.edge) + k.st_edge + k.ef.load_full;
    const tile_t *last = k.er ? &k.ee : &k.fe;
    *bytes = k.c.hbm_bytes;
    return (double)k.batches * t + last->vpu + last->store;
}

uint64_t kmm_quick(const kmm *m, const arch_config *cfg, uint64_t n_cores)
{
    uint64_t pb, pr, pc, bytes, pk = m->pk ? m->pk : 1;
    kmm_split(m, cfg, (n_cores ? n_cores : 1) / pk, &pb, &pr, &pc);
    double hbm = mem_bw(cfg), cores = (double)(pb * pr * pc * pk);
    /* the first block is the largest: the busiest core, at an equal share of the HBM (of the
     * L2 with one) */
    kmm_part pt;
    kmm_part_of(m, pb, pr, pc, 0, &pt);
    double t = quick_core(m, cfg, hbm / cores, &pt, &bytes);
    double chip = (double)bytes * cores / hbm;
    if (has_l2(cfg))
        chip = dmax(chip, hbm_behind_l2(m, cfg, pr, pc, (double)bytes * cores));
    return (uint64_t)ceil(dmax(t, chip));
}

/* ---- the search ----------------------------------------------------------------------------- */

/* Candidate sizes for a dimension of dim laid along an array side of `side` (or streamed):
 * the whole dimension, multiples of the side (powers of two, and 3x), and dim / n rounded up
 * to the side; all <= 65535. */
static unsigned dim_candidates(uint64_t dim, uint64_t side, uint64_t unit, uint64_t *out,
                               unsigned max)
{
    unsigned n = 0;
    uint64_t cap = min_u64(dim, 65535);
    if (unit > 1) /* whole windows (a conv's output rows / filter rows) */
        for (uint64_t v = unit; v <= cap && n < max / 2; v *= 2)
            out[n++] = v;
    out[n++] = cap;
    for (uint64_t v = side; v < cap && n < max; v *= 2) {
        out[n++] = v;
        if (3 * v / 2 < cap && v >= 2 * side && n < max)
            out[n++] = 3 * v / 2;
    }
    for (uint64_t d = 2; d <= 8 && n < max; d++) {
        uint64_t v = cdiv(cdiv(dim, d), side) * side;
        if (v < cap)
            out[n++] = v;
    }
    /* unique */
    unsigned k = 0;
    for (unsigned i = 0; i < n; i++) {
        bool dup = false;
        for (unsigned j = 0; j < k; j++)
            dup = dup || out[j] == out[i];
        if (!dup && out[i] >= 1)
            out[k++] = out[i];
    }
    return k;
}

void kmm_search(kmm *m, const arch_config *cfg, const kc_gemm_shape *g, uint64_t spad,
                uint64_t acc, uint64_t n_cores, kmm_cand *best, unsigned *n, unsigned max_best)
{
    uint64_t R = (uint64_t)cfg->core.array_rows, C = (uint64_t)cfg->core.array_cols;
    /* the array sides the mxu.mm's rows (m), columns (n) and depth (k) map to (1: streamed) */
    uint64_t side_mm = cfg->core.dataflow == ARCH_DATAFLOW_OS ? R
                       : cfg->core.dataflow == ARCH_DATAFLOW_IS ? C : 1;
    uint64_t side_mn = cfg->core.dataflow == ARCH_DATAFLOW_IS ? 1 : C;
    uint64_t side_k = cfg->core.dataflow == ARCH_DATAFLOW_OS ? 1 : R;
    /* under ct the mxu.mm's rows are N's and its columns M's */
    uint64_t side_m = m->ct ? side_mn : side_mm, side_n = m->ct ? side_mm : side_mn;
    uint64_t unit_m = m->ak == KMM_A_CONV ? m->cv.f_out : 1;
    uint64_t unit_k = m->ak == KMM_A_CONV ? m->cv.unit : 1;
    uint64_t cm_[64], cn_[64], ck_[64];
    unsigned nm = dim_candidates(m->M, side_m ? side_m : R, unit_m, cm_, 64);
    unsigned nn = dim_candidates(m->N, side_n ? side_n : C, 1, cn_, 64);
    unsigned nk = dim_candidates(m->K, side_k ? side_k : R, unit_k, ck_, 64);
    if (side_m == 1) /* streamed: multiples of the array too */
        nm = dim_candidates(m->M, R, unit_m, cm_, 64);
    if (side_n == 1)
        nn = dim_candidates(m->N, R, 1, cn_, 64);
    uint64_t given_m = m->TM, given_n = m->TN, given_k = m->TK;
    unsigned n_best = *n;
    for (unsigned a = 0; a < nm; a++)
        for (unsigned b = 0; b < nn; b++)
            for (unsigned c = 0; c < nk; c++) {
                uint64_t tm = given_m ? given_m : cm_[a], tn = given_n ? given_n : cn_[b],
                         tk = given_k ? given_k : ck_[c];
                if ((given_m && a) || (given_n && b) || (given_k && c))
                    continue;
                uint64_t need = kc_gemm_spad_bytes(g, tm, tn, tk);
                if (m->ak == KMM_A_CONV) /* the staged block; the gathers' fields */
                    need += kmm_stage_bytes(&m->cv, min_u64(tm, m->M), m->e);
                if (tm * tn * 4 > acc || need > spad)
                    continue;
                if (m->ak == KMM_A_CONV &&
                    (tk * m->e >= (1u << 24) || min_u64(m->cv.unit, tk) >= (1u << 20)))
                    continue;
                if (m->pk > 1 && cdiv(m->K, tk) < m->pk) /* every core of a split a slice */
                    continue;
                m->TM = tm, m->TN = tn, m->TK = tk;
                /* insert, best (fewest cycles by the ranking; then fewer tiles) first */
                kmm_cand cd = {tm, tn, tk, m->pk ? m->pk : 1, kmm_quick(m, cfg, n_cores), m->ct,
                               m->reuse};
                unsigned pos = n_best;
                while (pos > 0 && (best[pos - 1].cycles > cd.cycles ||
                                   (best[pos - 1].cycles == cd.cycles &&
                                    best[pos - 1].tm * best[pos - 1].tn * best[pos - 1].tk <
                                        tm * tn * tk)))
                    pos--;
                if (pos >= max_best)
                    continue;
                if (n_best < max_best)
                    n_best++;
                memmove(&best[pos + 1], &best[pos], (n_best - 1 - pos) * sizeof *best);
                best[pos] = cd;
            }
    *n = n_best;
}
