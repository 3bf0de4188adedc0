/* kc_row.c — the tiled, double-buffered schedule of the row kernels and their vector-step
 * helpers (see kc_row.h). */
#include "kc_row.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

static uint64_t cdiv(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

#define KC_ROW_MIN_TILE (256u << 10) /* bytes of a tile's streams (see kc_rows_emit) */

/* ---- checks --------------------------------------------------------------------------------- */

bool kc_is_float(nn_dtype t) { return t == NN_F32 || t == NN_BF16 || t == NN_F16; }

bool kc_same_shape(const kc_tensor *a, const kc_tensor *b)
{
    if (a->ndim != b->ndim)
        return false;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d])
            return false;
    return true;
}

np_status kc_rows_of(kc_ctx *x, const kc_tensor *t, const char *what, uint64_t *rows,
                     uint64_t *width, int64_t *ld)
{
    int64_t e = (int64_t)nn_dtype_size(t->dtype);
    if (t->ndim == 0) {
        *rows = 1, *width = 1, *ld = e;
        return NP_OK;
    }
    int n = t->ndim;
    *width = (uint64_t)t->shape[n - 1];
    if (t->shape[n - 1] > 1 && t->stride[n - 1] != e)
        return kc_fail(x, NP_ERR_INCONSISTENT, "%s: the last dim must be packed (stride %" PRId64
                       " bytes, elements of %" PRId64 ")", what, t->stride[n - 1], e);
    /* the leading dims as one: each steps as the next one's whole extent */
    uint64_t r = 1;
    int64_t inner = -1; /* stride of the innermost leading dim of more than one index */
    int64_t next = 0;   /* what the next-outer dim's stride must be */
    for (int d = n - 2; d >= 0; d--) {
        if (t->shape[d] == 1)
            continue;
        if (inner < 0)
            inner = t->stride[d];
        else if (t->stride[d] != next)
            return kc_fail(x, NP_ERR_INCONSISTENT, "%s: dims 0..%d do not merge into rows (dim %d "
                           "strides %" PRId64 " bytes, %" PRId64 " expected)", what, n - 2, d,
                           t->stride[d], next);
        next = t->stride[d] * t->shape[d];
        r *= (uint64_t)t->shape[d];
    }
    *rows = r;
    *ld = inner < 0 ? (int64_t)*width * e : inner;
    return NP_OK;
}

/* ---- vector steps --------------------------------------------------------------------------- */

static isa_opnd krw_spad(uint64_t a)
{
    return isa_spad((unsigned)(a >> 56), a & ((UINT64_C(1) << 56) - 1));
}

void krw_fma(kc_ctx *x, isa_op op, uint64_t dst, uint64_t a, uint64_t b, uint64_t c,
            uint64_t rows, uint64_t cols, isa_dtype dt, isa_dtype odt, isa_bcast bb,
            isa_bcast cb, int64_t sum)
{
    isa_insn in;
    isa_insn_init(&in, op); /* vpu.fma and vpu.fexp share the family's fields */
    isa_args_VPU_FMA *f = &in.VPU_FMA;
    f->dst = krw_spad(dst), f->a = krw_spad(a), f->b = krw_spad(b);
    f->c = krw_spad(c), f->rows = isa_imm((int64_t)rows), f->cols = isa_imm((int64_t)cols);
    f->dtype = isa_enum(dt), f->odtype = isa_enum(odt), f->bb = isa_enum(bb);
    f->cb = isa_enum(cb), f->sum = sum < 0 ? isa_none() : krw_spad((uint64_t)sum);
    isa_emit_insn(x->e, &in);
}

void krw_rdot(kc_ctx *x, uint64_t dst, uint64_t a, uint64_t b, uint64_t rows, uint64_t cols,
             isa_dtype dt, isa_dtype odt, isa_bcast bc)
{
    ISA_EMIT(x->e, VPU_RDOT, krw_spad(dst), krw_spad(a), krw_spad(b),
             isa_imm((int64_t)rows), isa_imm((int64_t)cols), isa_enum(dt), isa_enum(odt),
             isa_enum(bc));
}

void krw_binary(kc_ctx *x, isa_op op, uint64_t dst, uint64_t a, uint64_t b, uint64_t rows,
               uint64_t cols, isa_dtype dt, isa_bcast bc)
{
    isa_insn in;
    isa_insn_init(&in, op);
    in.VPU_ADD.dst = krw_spad(dst), in.VPU_ADD.a = krw_spad(a);
    in.VPU_ADD.b = krw_spad(b), in.VPU_ADD.rows = isa_imm((int64_t)rows);
    in.VPU_ADD.cols = isa_imm((int64_t)cols), in.VPU_ADD.dtype = isa_enum(dt);
    in.VPU_ADD.bcast = isa_enum(bc);
    isa_emit_insn(x->e, &in);
}

/* n packed elements as a tile of rows x KRW_SPAN_COLS and a row of the rest (rem), so that
 * no count exceeds the 16-bit rows and cols fields (n below 65536: one row of n). */
#define KRW_SPAN_COLS 32768u
static void krw_span(uint64_t n, uint64_t *rows, uint64_t *cols, uint64_t *rem)
{
    if (n <= 65535u) {
        *rows = 1, *cols = n, *rem = 0;
        return;
    }
    *cols = KRW_SPAN_COLS, *rows = n / KRW_SPAN_COLS, *rem = n % KRW_SPAN_COLS;
}

void krw_scalar(kc_ctx *x, isa_op op, uint64_t dst, uint64_t a, float imm, uint64_t n,
               isa_dtype dt)
{
    uint64_t rows, cols, rem, done = 0, e = isa_dtype_size[dt];
    krw_span(n, &rows, &cols, &rem);
    for (int part = 0; part < 2; part++, done = rows * cols, rows = 1, cols = rem) {
        if (!rows || !cols)
            continue;
        isa_insn in;
        isa_insn_init(&in, op);
        in.VPU_ADDS.dst = krw_spad(dst + done * e), in.VPU_ADDS.a = krw_spad(a + done * e);
        in.VPU_ADDS.imm = isa_f32(imm), in.VPU_ADDS.rows = isa_imm((int64_t)rows);
        in.VPU_ADDS.cols = isa_imm((int64_t)cols), in.VPU_ADDS.dtype = isa_enum(dt);
        isa_emit_insn(x->e, &in);
    }
}

void krw_unary(kc_ctx *x, isa_op op, uint64_t dst, uint64_t src, uint64_t n, isa_dtype dt)
{
    uint64_t rows, cols, rem, done = 0, e = isa_dtype_size[dt];
    krw_span(n, &rows, &cols, &rem);
    for (int part = 0; part < 2; part++, done = rows * cols, rows = 1, cols = rem) {
        if (!rows || !cols)
            continue;
        isa_insn in;
        isa_insn_init(&in, op);
        in.VPU_EXP.dst = krw_spad(dst + done * e), in.VPU_EXP.src = krw_spad(src + done * e);
        in.VPU_EXP.rows = isa_imm((int64_t)rows), in.VPU_EXP.cols = isa_imm((int64_t)cols);
        in.VPU_EXP.dtype = isa_enum(dt);
        isa_emit_insn(x->e, &in);
    }
}

void krw_cast(kc_ctx *x, uint64_t dst, uint64_t src, uint64_t n, isa_dtype dt, isa_dtype sdt)
{
    uint64_t rows, cols, rem, done = 0;
    krw_span(n, &rows, &cols, &rem);
    for (int part = 0; part < 2; part++, done = rows * cols, rows = 1, cols = rem)
        if (rows && cols)
            ISA_EMIT(x->e, VPU_CAST, krw_spad(dst + done * isa_dtype_size[dt]),
                     krw_spad(src + done * isa_dtype_size[sdt]), isa_imm((int64_t)rows),
                     isa_imm((int64_t)cols), isa_enum(dt), isa_enum(sdt));
}

void krw_fill(kc_ctx *x, uint64_t dst, float v, uint64_t n, isa_dtype dt)
{
    uint64_t rows, cols, rem, done = 0;
    krw_span(n, &rows, &cols, &rem);
    for (int part = 0; part < 2; part++, done = rows * cols, rows = 1, cols = rem)
        if (rows && cols)
            ISA_EMIT(x->e, VPU_FILL, krw_spad(dst + done * isa_dtype_size[dt]), isa_f32(v),
                     isa_imm((int64_t)rows), isa_imm((int64_t)cols), isa_enum(dt));
}

void krw_copy(kc_ctx *x, isa_opnd dst, isa_opnd src, isa_dtype dt, uint64_t n0, uint64_t n1,
             int64_t ds1, int64_t ss1)
{
    int64_t row = (int64_t)(n0 * isa_dtype_size[dt]);
    if (n1 == 1 || ds1 == row)
        ds1 = 0;
    if (n1 == 1 || ss1 == row)
        ss1 = 0;
    ISA_EMIT(x->e, DMA_COPY, dst, src, isa_enum(dt), isa_imm((int64_t)n0), isa_imm((int64_t)n1),
             .dst_s1 = isa_imm(ds1), .src_s1 = isa_imm(ss1));
}

void krw_signal(kc_ctx *x, isa_unit u, unsigned s)
{
    ISA_EMIT(x->e, SEM_SIGNAL, isa_enum(u), isa_sem(s));
}

void krw_wait(kc_ctx *x, isa_unit u, unsigned s)
{
    ISA_EMIT(x->e, SEM_WAIT, isa_enum(u), isa_sem(s));
}

uint64_t krw_alloc(kc_ctx *x, uint64_t n)
{
    uint64_t off = 0;
    if (kc_spad_alloc(x, n ? n : 1, 64, &off) != NP_OK)
        return 0;
    return off;
}

void krw_load_f32(kc_ctx *x, uint64_t dst, uint64_t stage, uint64_t addr, uint64_t n,
                 isa_dtype dt)
{
    unsigned s;
    if (kc_sem_alloc(x, &s) != NP_OK)
        return;
    bool cast = dt != ISA_DTYPE_FP32;
    krw_copy(x, isa_spad(0, cast ? stage : dst), isa_hbm(0, addr), dt, n, 1, 0, 0);
    krw_signal(x, ISA_UNIT_DMA, s);
    krw_wait(x, ISA_UNIT_VPU, s);
    if (cast)
        krw_cast(x, dst, stage, n, ISA_DTYPE_FP32, dt);
    x->res->hbm_read_bytes += n * isa_dtype_size[dt];
}

/* ---- the schedule --------------------------------------------------------------------------- */

/* Per core: the stream registers, buffers and semaphores. */
typedef struct krow {
    kc_ctx *x;
    kc_row_plan *p;
    uint32_t core;
    uint64_t tr, n, last; /* tiles of TR rows, the last one of `last` */
    unsigned reg_in[KC_ROW_MAX_IN], reg_out[KC_ROW_MAX_OUT];
    uint64_t in[KC_ROW_MAX_IN][2], out[KC_ROW_MAX_OUT][2];
    unsigned full[2], free_[2], ofull[2], ofree[2];
    unsigned xreg[KC_ROW_MAX_XREG];
    unsigned pass;
} krow;

static uint64_t tile_rows(const krow *r, uint64_t t) { return t + 1 == r->n ? r->last : r->tr; }

static uint64_t planes_of(const kc_row_stream *s) { return s->planes ? s->planes : 1; }

/* A tile of stream s between HBM and its packed scratchpad buffer (store: to HBM). */
static void copy3(kc_ctx *x, isa_opnd dst, isa_opnd src, const kc_row_stream *s, uint64_t rows,
                  bool store)
{
    uint64_t np = planes_of(s);
    if (np == 1) {
        krw_copy(x, dst, src, s->dt, s->width, rows, store ? s->ld : 0, store ? 0 : s->ld);
        return;
    }
    int64_t row = (int64_t)(s->width * isa_dtype_size[s->dt]);
    int64_t hs1 = s->ld == row ? 0 : s->ld, hs2 = s->pstride;
    ISA_EMIT(x->e, DMA_COPY, dst, src, isa_enum(s->dt), isa_imm((int64_t)s->width),
             isa_imm((int64_t)rows), isa_imm((int64_t)np), .dst_s1 = isa_imm(store ? hs1 : 0),
             .src_s1 = isa_imm(store ? 0 : hs1), .dst_s2 = isa_imm(store ? hs2 : 0),
             .src_s2 = isa_imm(store ? 0 : hs2));
}

static kc_row_tile tile_of(const krow *r, uint64_t t, uint64_t tbase)
{
    const kc_row_plan *p = r->p;
    kc_row_tile tl = {.core = r->core, .rows = tile_rows(r, t), .pass = r->pass,
                      .parity = (unsigned)(t & 1)};
    unsigned b = t & 1;
    for (unsigned i = 0; i < p->n_in; i++) {
        tl.in[i] = r->in[i][b];
        tl.in_reg[i] = r->reg_in[i];
        tl.in_off[i] = (t - tbase) * r->tr * (uint64_t)p->in[i].ld;
    }
    for (unsigned i = 0; i < p->n_out; i++) {
        tl.out[i] = r->out[i][b];
        tl.out_reg[i] = r->reg_out[i];
        tl.out_off[i] = (t - tbase) * r->tr * (uint64_t)p->out[i].ld;
    }
    for (unsigned i = 0; i < p->n_xreg; i++) {
        tl.xreg[i] = r->xreg[i];
        tl.xoff[i] = (int64_t)((t - tbase) * r->tr) * p->xstep[i];
    }
    return tl;
}

static void load(krow *r, uint64_t t, uint64_t tbase)
{
    kc_ctx *x = r->x;
    kc_row_tile tl = tile_of(r, t, tbase);
    krw_wait(x, ISA_UNIT_DMA, r->free_[tl.parity]);
    for (unsigned i = 0; i < r->p->n_in; i++) {
        const kc_row_stream *s = &r->p->in[i];
        copy3(x, isa_spad(0, tl.in[i]), isa_hbm(tl.in_reg[i], tl.in_off[i]), s, tl.rows, false);
    }
    if (r->p->load_more)
        r->p->load_more(x, r->p->ctx, &tl);
    krw_signal(x, ISA_UNIT_DMA, r->full[tl.parity]);
}

static void work(krow *r, uint64_t t, uint64_t tbase)
{
    kc_ctx *x = r->x;
    const kc_row_plan *p = r->p;
    kc_row_tile tl = tile_of(r, t, tbase);
    krw_wait(x, ISA_UNIT_VPU, r->full[tl.parity]);
    if (p->n_out)
        krw_wait(x, ISA_UNIT_VPU, r->ofree[tl.parity]);
    p->work(x, p->ctx, &tl);
    krw_signal(x, ISA_UNIT_VPU, r->free_[tl.parity]);
    if (p->n_out)
        krw_signal(x, ISA_UNIT_VPU, r->ofull[tl.parity]);
}

static void store(krow *r, uint64_t t, uint64_t tbase)
{
    kc_ctx *x = r->x;
    if (!r->p->n_out)
        return;
    kc_row_tile tl = tile_of(r, t, tbase);
    krw_wait(x, ISA_UNIT_DMA, r->ofull[tl.parity]);
    if (r->p->store_more)
        r->p->store_more(x, r->p->ctx, &tl);
    for (unsigned i = 0; i < r->p->n_out; i++) {
        const kc_row_stream *s = &r->p->out[i];
        copy3(x, isa_hbm(tl.out_reg[i], tl.out_off[i]), isa_spad(0, tl.out[i]), s, tl.rows, true);
    }
    krw_signal(x, ISA_UNIT_DMA, r->ofree[tl.parity]);
}

/* Tile t's body: the next tile's load, this one's work and store. */
static void body(krow *r, uint64_t t, uint64_t tbase)
{
    if (t + 1 < r->n)
        load(r, t + 1, tbase);
    work(r, t, tbase);
    store(r, t, tbase);
}

/* Bytes of one row of stream s (all its planes). */
static uint64_t row_bytes(const kc_row_stream *s)
{
    return planes_of(s) * s->width * isa_dtype_size[s->dt];
}

static uint64_t stream_bytes(const kc_row_plan *p)
{
    uint64_t b = 0;
    for (unsigned i = 0; i < p->n_in; i++)
        b += 2 * row_bytes(&p->in[i]);
    for (unsigned i = 0; i < p->n_out; i++)
        b += 2 * row_bytes(&p->out[i]);
    return b;
}

uint64_t kc_rows_fit(const kc_ctx *x, const kc_row_plan *p, uint32_t core)
{
    uint64_t avail = kc_spad_avail(x, core);
    /* alignment: every buffer may lose up to 64 bytes; the kernel's own a few dozen */
    uint64_t slop = 64 * (2 * (p->n_in + p->n_out) + 24) + p->fixed_bytes;
    uint64_t per = stream_bytes(p) + p->work_row_bytes + 64;
    return avail > slop ? (avail - slop) / per : 0;
}

np_status kc_chunk_narrow(kc_ctx *x, uint32_t core, uint64_t chunk, uint64_t width,
                          const char *what, uint64_t fixed, uint64_t per_col, uint64_t *w)
{
    if (chunk)
        return kc_fail(x, NP_ERR_RANGE, "chunks of %" PRIu64 " columns do not fit the "
                       "scratchpad (or exceed 65535)", chunk);
    uint64_t avail = kc_spad_avail(x, core);
    uint64_t n = avail > fixed ? (avail - fixed) / per_col : 0;
    n = n > 65535 ? 65535 : n;
    if (n < 1 || n >= *w)
        return kc_fail(x, NP_ERR_RANGE, "rows of %" PRIu64 " %s: not even a chunk of them fits "
                       "the scratchpad (%" PRIu64 " bytes free)", width, what, avail);
    *w = n;
    return NP_OK;
}

/* Resources of core r->core, once for all passes. */
static void setup_core(krow *r, const kc_row_plan *p)
{
    kc_ctx *x = r->x;
    for (unsigned i = 0; i < p->n_in; i++)
        kc_reg_alloc(x, &r->reg_in[i]);
    for (unsigned i = 0; i < p->n_out; i++)
        kc_reg_alloc(x, &r->reg_out[i]);
    for (unsigned b = 0; b < 2; b++) {
        for (unsigned i = 0; i < p->n_in; i++)
            r->in[i][b] = krw_alloc(x, r->tr * row_bytes(&p->in[i]));
        for (unsigned i = 0; i < p->n_out; i++)
            r->out[i][b] = krw_alloc(x, r->tr * row_bytes(&p->out[i]));
        kc_sem_alloc(x, &r->full[b]);
        kc_sem_alloc(x, &r->free_[b]);
        if (p->n_out) {
            kc_sem_alloc(x, &r->ofull[b]);
            kc_sem_alloc(x, &r->ofree[b]);
        }
    }
}

/* Points the stream registers at rows [row0, ...) of the plan's current streams. */
static void set_streams(krow *r, uint64_t row0)
{
    kc_ctx *x = r->x;
    kc_row_plan *p = r->p;
    for (unsigned i = 0; i < p->n_in; i++)
        ISA_EMIT(x->e, LI, isa_reg(r->reg_in[i]),
                 isa_imm((int64_t)(p->in[i].addr + row0 * (uint64_t)p->in[i].ld)));
    for (unsigned i = 0; i < p->n_out; i++)
        ISA_EMIT(x->e, LI, isa_reg(r->reg_out[i]),
                 isa_imm((int64_t)(p->out[i].addr + row0 * (uint64_t)p->out[i].ld)));
}

/* One pass of the schedule over `rows` rows from where the stream registers point. */
static void run_pass(krow *r, uint64_t rows)
{
    kc_ctx *x = r->x;
    kc_row_plan *p = r->p;
    for (unsigned b = 0; b < 2; b++) {
        krw_signal(x, ISA_UNIT_DMA, r->free_[b]);
        if (p->n_out)
            krw_signal(x, ISA_UNIT_DMA, r->ofree[b]);
    }
    r->n = cdiv(rows, r->tr);
    r->last = rows - (r->n - 1) * r->tr;
    uint64_t full = rows / r->tr;
    load(r, 0, 0);
    /* pairs of regular bodies: tiles t and t + 1 both full, for t < 2P */
    uint64_t pairs = full >= 1 ? (full - 1) / 2 : 0;
    if (pairs) {
        unsigned regs[KC_ROW_MAX_IN + KC_ROW_MAX_OUT + KC_ROW_MAX_XREG];
        int64_t steps[KC_ROW_MAX_IN + KC_ROW_MAX_OUT + KC_ROW_MAX_XREG];
        unsigned n = 0;
        for (unsigned i = 0; i < p->n_in; i++)
            regs[n] = r->reg_in[i], steps[n++] = 2 * (int64_t)r->tr * p->in[i].ld;
        for (unsigned i = 0; i < p->n_out; i++)
            regs[n] = r->reg_out[i], steps[n++] = 2 * (int64_t)r->tr * p->out[i].ld;
        for (unsigned i = 0; i < p->n_xreg; i++)
            regs[n] = r->xreg[i], steps[n++] = 2 * (int64_t)r->tr * p->xstep[i];
        kc_loop l;
        kc_loop_begin(x, &l, pairs, n, regs, steps);
        body(r, 0, 0);
        body(r, 1, 0);
        kc_loop_end(x, &l);
    }
    for (uint64_t t = 2 * pairs; t < r->n; t++)
        body(r, t, 0);
    for (unsigned b = 0; b < 2; b++) {
        krw_wait(x, ISA_UNIT_DMA, r->free_[b]);
        if (p->n_out)
            krw_wait(x, ISA_UNIT_DMA, r->ofree[b]);
    }
}

np_status kc_rows_emit(kc_ctx *x, kc_row_plan *p)
{
    const kc_place *pl = &x->k->place;
    uint32_t cores = pl->n_cores ? pl->n_cores : 1;
    uint64_t align = p->row_align ? p->row_align : 1, units = p->rows / align;
    if (p->rows % align)
        return kc_fail(x, NP_ERR_INCONSISTENT, "%" PRIu64 " rows in blocks of %" PRIu64, p->rows,
                       align);
    if (units < cores)
        cores = (uint32_t)(units ? units : 1);
    for (unsigned i = 0; i < p->n_in + p->n_out; i++) {
        const kc_row_stream *s = i < p->n_in ? &p->in[i] : &p->out[i - p->n_in];
        if (s->width > 65535)
            return kc_fail(x, NP_ERR_RANGE, "rows of %" PRIu64 " elements: at most 65535 (the "
                           "vector unit's cols)", s->width);
        if (s->ld >= (1 << 24) && p->rows > 1)
            return kc_fail(x, NP_ERR_RANGE, "a row stride of %" PRId64 " bytes: at most %d (the "
                           "copies' row stride field)", s->ld, (1 << 24) - 1);
        if (planes_of(s) > 65535 || (planes_of(s) > 1 && s->pstride >= (1 << 27)))
            return kc_fail(x, NP_ERR_RANGE, "%" PRIu64 " planes %" PRId64 " bytes apart: at most "
                           "65535, below 2^27 bytes (the copies' plane fields)", planes_of(s),
                           s->pstride);
    }
    /* TR: what fits on every core, at most 65535, and 16 tiles a core when the rows allow */
    uint64_t per_core = cdiv(units, cores) * align, tr = p->tr;
    uint64_t fit = UINT64_MAX;
    for (uint32_t c = pl->core0; c < pl->core0 + cores; c++) {
        uint64_t f = kc_rows_fit(x, p, c);
        fit = f < fit ? f : fit;
    }
    if (fit == 0)
        return kc_fail(x, NP_ERR_RANGE, "one row needs %" PRIu64 " scratchpad bytes (its tiles "
                       "double-buffered and its work), more than the %" PRIu64 " free",
                       stream_bytes(p) + p->work_row_bytes + p->fixed_bytes,
                       kc_spad_avail(x, pl->core0));
    if (!tr) {
        /* 16 tiles a core, so the pipeline's fill and drain are short, but tiles of at least
         * KC_ROW_MIN_TILE bytes, so each copy's HBM latency is (with one copy in flight) */
        uint64_t rb = 0;
        for (unsigned i = 0; i < p->n_in + p->n_out; i++)
            rb += row_bytes(i < p->n_in ? &p->in[i] : &p->out[i - p->n_in]);
        tr = cdiv(per_core, 16);
        if (rb && tr * rb < KC_ROW_MIN_TILE)
            tr = cdiv(KC_ROW_MIN_TILE, rb);
        tr = tr > fit ? fit : tr;
    } else if (tr > fit) {
        return kc_fail(x, NP_ERR_RANGE, "tiles of %" PRIu64 " rows do not fit the scratchpad (at "
                       "most %" PRIu64 ")", tr, fit);
    }
    tr = tr > 65535 ? 65535 : tr;
    tr = p->tr_max && tr > p->tr_max ? p->tr_max : tr;
    tr = tr > per_core ? per_core : tr;
    tr = tr ? tr : 1;
    p->tr_used = tr;
    p->cores_used = cores;
    kc_row_plan first = *p; /* the streams that size the buffers */
    krow rs[KC_ROW_MAX_CORES];
    if (cores > KC_ROW_MAX_CORES)
        return kc_fail(x, NP_ERR_RANGE, "%" PRIu32 " cores (at most %d)", cores, KC_ROW_MAX_CORES);
    for (uint32_t i = 0; i < cores; i++) {
        uint64_t r0 = units * i / cores * align, r1 = units * (i + 1) / cores * align;
        rs[i] = (krow){.x = x, .p = p, .core = pl->core0 + i, .tr = tr};
        if (kc_core(x, rs[i].core) != NP_OK)
            return kc_status(x);
        for (unsigned j = 0; j < p->n_xreg; j++) {
            kc_reg_alloc(x, &rs[i].xreg[j]);
            ISA_EMIT(x->e, LI, isa_reg(rs[i].xreg[j]), isa_imm(0));
        }
        if (p->prologue)
            p->prologue(x, p->ctx, rs[i].core, r0, r1 - r0, tr, rs[i].xreg);
        setup_core(&rs[i], &first);
    }
    if (p->n_loop > KC_ROW_MAX_LOOPS)
        return kc_fail(x, NP_ERR_RANGE, "%u loops of passes (at most %d)", p->n_loop,
                       KC_ROW_MAX_LOOPS);
    unsigned passes = p->n_pass ? p->n_pass : 1;
    for (unsigned ps = 0; ps < passes && kc_status(x) == NP_OK; ps++) {
        *p = first;
        if (p->pass)
            p->pass(x, p->ctx, ps, p);
        if (p->n_in > first.n_in || p->n_out > first.n_out)
            return kc_fail(x, NP_ERR_INCONSISTENT, "pass %u has more streams than the first", ps);
        for (unsigned i = 0; i < p->n_in + p->n_out; i++) {
            const kc_row_stream *s = i < p->n_in ? &p->in[i] : &p->out[i - p->n_in];
            const kc_row_stream *f = i < p->n_in ? &first.in[i] : &first.out[i - p->n_in];
            if (row_bytes(s) > row_bytes(f))
                return kc_fail(x, NP_ERR_INCONSISTENT, "pass %u: a stream wider than its buffers",
                               ps);
        }
        uint64_t nl = 1; /* the pass runs in loops that step the streams' starts */
        for (unsigned d = 0; d < p->n_loop; d++)
            nl *= p->loop_n[d];
        for (uint32_t i = 0; i < cores; i++) {
            uint64_t r0 = units * i / cores * align, r1 = units * (i + 1) / cores * align;
            if (kc_core(x, rs[i].core) != NP_OK)
                return kc_status(x);
            rs[i].pass = ps;
            set_streams(&rs[i], r0);
            kc_loop l[KC_ROW_MAX_LOOPS];
            for (unsigned d = 0; d < p->n_loop; d++) {
                unsigned regs[KC_ROW_MAX_IN + KC_ROW_MAX_OUT], m = 0;
                int64_t steps[KC_ROW_MAX_IN + KC_ROW_MAX_OUT];
                for (unsigned j = 0; j < p->n_in; j++)
                    regs[m] = rs[i].reg_in[j], steps[m++] = p->loop_in[d][j];
                for (unsigned j = 0; j < p->n_out; j++)
                    regs[m] = rs[i].reg_out[j], steps[m++] = p->loop_out[d][j];
                kc_loop_begin(x, &l[d], p->loop_n[d], m, regs, steps);
            }
            run_pass(&rs[i], r1 - r0);
            for (unsigned d = p->n_loop; d-- > 0;)
                kc_loop_end(x, &l[d]);
        }
        for (unsigned i = 0; i < p->n_in; i++)
            x->res->hbm_read_bytes += nl * p->rows * row_bytes(&p->in[i]);
        for (unsigned i = 0; i < p->n_out; i++)
            x->res->hbm_write_bytes += nl * p->rows * row_bytes(&p->out[i]);
    }
    *p = first;
    x->res->cores = cores;
    return kc_status(x);
}

/* ---- `npusim kernel --op` ------------------------------------------------------------------- */

const kc_attr_def kc_unary_keys[KC_UNARY_N_KEYS] = {
    {"shape", KC_ATTR_SHAPE, KC_REQUIRED, 0, 0,
     "the input's shape, AxBx... (the last dim is the row)"},
    {"dtype", KC_ATTR_DTYPE, NN_BF16, 0, 0, "element type"},
};

np_status kc_spec_tensor(kc_prog *p, const char *name, nn_dtype dt, int ndim,
                         const int64_t *shape, kc_tensor *t, np_err *err)
{
    uint64_t addr, n = nn_dtype_size(dt);
    for (int d = 0; d < ndim; d++)
        n *= (uint64_t)shape[d];
    if (kc_prog_bss(p, name, n, &addr, err) != NP_OK)
        return err->status;
    kc_tensor_dense(t, addr, dt, ndim, shape);
    return NP_OK;
}

np_status kc_spec_unary(kc_prog *p, const kc_spec *s, kc_kernel *k, np_err *err)
{
    const kc_spec_val *sh = kc_spec_get(s, "shape"), *dt = kc_spec_get(s, "dtype");
    if (!sh || !dt || sh->ndim < 1)
        return np_err_set(err, NP_ERR_MISSING, "%s: shape=AxBx... is needed", nn_op_name(s->op));
    k->n_in = 1, k->n_out = 1;
    if (kc_spec_tensor(p, "X", (nn_dtype)dt->i, sh->ndim, sh->shape, &k->in[0], err) != NP_OK ||
        kc_spec_tensor(p, "Y", (nn_dtype)dt->i, sh->ndim, sh->shape, &k->out[0], err) != NP_OK)
        return err->status;
    return NP_OK;
}
