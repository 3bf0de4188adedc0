/* kc_emit.c — emission helpers for the attention, pooling and convolution-gradient kernels
 * (kc_emit.h). */
#include "kc_emit.h"

void kce_wait(kce *c, isa_unit u, unsigned sem, unsigned n)
{
    ISA_EMIT(c->x->e, SEM_WAIT, isa_enum(u), isa_sem(sem), isa_imm(n > 1 ? n : 0));
}

void kce_signal(kce *c, isa_unit u, unsigned sem, unsigned n)
{
    ISA_EMIT(c->x->e, SEM_SIGNAL, isa_enum(u), isa_sem(sem), isa_imm(n > 1 ? n : 0));
}

void kce_dma(kce *c, isa_opnd dst, isa_opnd src, isa_dtype dt, uint64_t n0, uint64_t n1,
             uint64_t n2, uint64_t ds1, uint64_t ss1, uint64_t ds2, uint64_t ss2)
{
    bool rows = n1 > 1 || n2 > 1, planes = n2 > 1;
    uint64_t row = n0 * isa_dtype_size[dt];
    if (!rows || ds1 == row)
        ds1 = 0;
    if (!rows || ss1 == row)
        ss1 = 0;
    if (!planes || ds2 == n1 * (ds1 ? ds1 : row))
        ds2 = 0;
    if (!planes || ss2 == n1 * (ss1 ? ss1 : row))
        ss2 = 0;
    ISA_EMIT(c->x->e, DMA_COPY, dst, src, isa_enum(dt), isa_imm((int64_t)n0),
             isa_imm((int64_t)n1), isa_imm((int64_t)n2), isa_imm((int64_t)ds1),
             isa_imm((int64_t)ss1), isa_imm((int64_t)ds2), isa_imm((int64_t)ss2));
    uint64_t bytes = n0 * n1 * n2 * isa_dtype_size[dt] * c->mult;
    if (src.space == ISA_SPACE_HBM)
        c->rd += bytes;
    if (dst.space == ISA_SPACE_HBM)
        c->wr += bytes;
}

/* A row stride that equals the packed one is written as 0. */
static isa_opnd stride(uint64_t s, uint64_t rows, uint64_t cols, isa_dtype dt)
{
    return isa_imm(rows < 2 || s == cols * isa_dtype_size[dt] ? 0 : (int64_t)s);
}

void kce_bin(kce *c, isa_op op, isa_opnd dst, isa_opnd a, isa_opnd b, uint64_t rows,
             uint64_t cols, isa_dtype dt, isa_bcast bcast, uint64_t dst_s, uint64_t a_s,
             uint64_t b_s)
{
    isa_insn in;
    isa_insn_init(&in, op);
    isa_args_VPU_ADD *v = &in.VPU_ADD; /* the binary family's layout */
    v->dst = dst, v->a = a, v->b = b;
    v->rows = isa_imm((int64_t)rows), v->cols = isa_imm((int64_t)cols), v->dtype = isa_enum(dt);
    v->bcast = isa_enum(bcast);
    v->dst_s = stride(dst_s, rows, cols, dt), v->a_s = stride(a_s, rows, cols, dt);
    v->b_s = bcast == ISA_BCAST_FULL ? stride(b_s, rows, cols, dt) : isa_imm(0);
    isa_emit_insn(c->x->e, &in);
}

void kce_scal(kce *c, isa_op op, isa_opnd dst, isa_opnd a, float imm, uint64_t rows,
              uint64_t cols, isa_dtype dt, uint64_t dst_s, uint64_t a_s)
{
    isa_insn in;
    isa_insn_init(&in, op);
    isa_args_VPU_ADDS *v = &in.VPU_ADDS; /* the scalar family's layout */
    v->dst = dst, v->a = a, v->imm = isa_f32(imm);
    v->rows = isa_imm((int64_t)rows), v->cols = isa_imm((int64_t)cols), v->dtype = isa_enum(dt);
    v->dst_s = stride(dst_s, rows, cols, dt), v->a_s = stride(a_s, rows, cols, dt);
    isa_emit_insn(c->x->e, &in);
}

void kce_un(kce *c, isa_op op, isa_opnd dst, isa_opnd src, uint64_t rows, uint64_t cols,
            isa_dtype dt, uint64_t dst_s, uint64_t src_s)
{
    isa_insn in;
    isa_insn_init(&in, op);
    isa_args_VPU_EXP *v = &in.VPU_EXP; /* the unary family's layout (transpose's too) */
    v->dst = dst, v->src = src;
    v->rows = isa_imm((int64_t)rows), v->cols = isa_imm((int64_t)cols), v->dtype = isa_enum(dt);
    v->dst_s = op == ISA_OP_VPU_TRANSPOSE ? stride(dst_s, cols, rows, dt)
                                           : stride(dst_s, rows, cols, dt);
    v->src_s = stride(src_s, rows, cols, dt);
    isa_emit_insn(c->x->e, &in);
}

void kce_red(kce *c, isa_op op, isa_opnd dst, isa_opnd src, uint64_t rows, uint64_t cols,
             isa_dtype dt, uint64_t src_s)
{
    isa_insn in;
    isa_insn_init(&in, op);
    isa_args_VPU_RSUM *v = &in.VPU_RSUM; /* the reduction layout */
    v->dst = dst, v->src = src;
    v->rows = isa_imm((int64_t)rows), v->cols = isa_imm((int64_t)cols), v->dtype = isa_enum(dt);
    v->src_s = stride(src_s, rows, cols, dt);
    isa_emit_insn(c->x->e, &in);
}

void kce_fill(kce *c, isa_opnd dst, float v, uint64_t rows, uint64_t cols, isa_dtype dt,
              uint64_t dst_s)
{
    ISA_EMIT(c->x->e, VPU_FILL, dst, isa_f32(v), isa_imm((int64_t)rows), isa_imm((int64_t)cols),
             isa_enum(dt), stride(dst_s, rows, cols, dt));
}

void kce_cast(kce *c, isa_opnd dst, isa_opnd src, uint64_t rows, uint64_t cols, isa_dtype dt,
              isa_dtype src_dt, uint64_t dst_s, uint64_t src_s)
{
    ISA_EMIT(c->x->e, VPU_CAST, dst, src, isa_imm((int64_t)rows), isa_imm((int64_t)cols),
             isa_enum(dt), isa_enum(src_dt), stride(dst_s, rows, cols, dt),
             stride(src_s, rows, cols, src_dt));
}

void kce_mov(kce *c, unsigned rd, unsigned rs) { kce_addi(c, rd, rs, 0); }

void kce_addi(kce *c, unsigned rd, unsigned rs, int64_t imm)
{
    ISA_EMIT(c->x->e, ADDI, isa_reg(rd), isa_reg(rs), isa_imm(imm));
}

void kce_swap(kce *c, unsigned a, unsigned b, unsigned t)
{
    kce_mov(c, t, a);
    kce_mov(c, a, b);
    kce_mov(c, b, t);
}

typedef struct kce_grid {
    kce *c;
    unsigned n;
    const unsigned *reg;
    const int64_t *outer, *inner, *after;
    uint64_t n_inner;
    kce_tile_fn body;
    void *ctx;
} kce_grid;

static void grid_offsets(const kce_grid *g, int64_t db, int64_t dh, int64_t *off)
{
    for (unsigned i = 0; i < g->n; i++)
        off[i] = db * g->outer[i] + dh * g->inner[i];
}

/* Row db of the grid: its tiles but the last as a loop, then the last. */
static void grid_row(const kce_grid *g, int64_t db, bool last_row)
{
    kce *c = g->c;
    int64_t cur[KCE_WALK_REGS], next[KCE_WALK_REGS];
    if (g->n_inner > 1) {
        kc_loop l;
        kc_loop_begin(c->x, &l, g->n_inner - 1, g->n, g->reg, g->inner);
        uint64_t saved = c->mult;
        c->mult *= g->n_inner - 1;
        grid_offsets(g, db, 0, cur);
        grid_offsets(g, db, 1, next);
        g->body(g->ctx, cur, next, 0);
        c->mult = saved;
        kc_loop_end(c->x, &l);
    }
    grid_offsets(g, db, (int64_t)g->n_inner - 1, cur);
    grid_offsets(g, db + 1, 0, next);
    if (!last_row)
        g->body(g->ctx, cur, next, KCE_ROW_END);
    else
        g->body(g->ctx, cur, g->after, KCE_ROW_END | (g->after ? KCE_NEXT_AFTER : 0));
}

void kce_walk(kce *c, unsigned n, const unsigned *reg, const int64_t *outer,
              const int64_t *inner, uint64_t n_outer, uint64_t n_inner, const int64_t *after,
              kce_tile_fn body, void *ctx)
{
    if (n > KCE_WALK_REGS || !n_outer || !n_inner) {
        kc_fail(c->x, NP_ERR_RANGE, "a walk over %u registers of %llu x %llu tiles", n,
                (unsigned long long)n_outer, (unsigned long long)n_inner);
        return;
    }
    kce_grid g = {c, n, reg, outer, inner, after, n_inner, body, ctx};
    if (n_outer > 1) {
        kc_loop l;
        kc_loop_begin(c->x, &l, n_outer - 1, n, reg, outer);
        uint64_t saved = c->mult;
        c->mult *= n_outer - 1;
        grid_row(&g, 0, false);
        c->mult = saved;
        kc_loop_end(c->x, &l);
    }
    grid_row(&g, (int64_t)n_outer - 1, true);
}
