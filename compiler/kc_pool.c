/* kc_pool.c — 2-D pooling on the vector unit: maxpool2d, avgpool2d (the padding counted) and
 * their gradients maxpool2d_grad (the first maximum of each window in scan order gets the
 * gradient, as the reference picks it) and avgpool2d_grad. docs/compiler.md ("Pooling").
 *
 * Operands are channels-last (NHWC in memory: channels contiguous, any pixel, row and image
 * strides), or all channel-major as the framework lays them out (NCHW: each channel is then
 * an image of one channel, N x C of them). A tile is one image's whole spatial extent for a
 * block of Cb channels, held padded in the scratchpad: the copy writes the image's interior
 * into a (H + 2p) x (W + 2p)
 * buffer whose border holds the padding value (-inf for max, 0 for avg), filled once per
 * buffer, so every output row sees every tap and one loop body serves every row:
 *
 *   per output row oh (a loop; registers step s padded rows and one output row), per tap
 *   (kh, kw) (emitted, k x k of them): the OW x Cb tile of the padded input at row
 *   oh s + kh, column kw, its rows s x Cb elements apart, combined on the vector unit:
 *     maxpool   y = max(y, tap)                     (the input's type: exact)
 *     avgpool   acc += tap (fp32), then y = acc / k^2
 *     avg grad  dx[tap] += dy / k^2                 (dx padded, fp32)
 *     max grad  y = max over taps; then per tap in scan order: m = (tap == y) x free,
 *               free -= m, dx[tap] += m x dy         (free: 1 until a row's first maximum)
 *
 * The same engine serves the depthwise convolution gradients (kc_depthwise_grad, called by
 * kc_convgrad.c; any stride, padding and dilation per dimension), w's or dw's KH x KW taps
 * one row of Cb channels each:
 *     dw input  dx[tap] += dy x w[tap]               (w's taps cast to fp32 once a tile)
 *     dw weight dw[tap] += column sum of x[tap] x dy (fp32 sums over a block's images,
 *               stored after its last image; the cores take the channel blocks)
 *
 * Every input byte is read once and every output byte written once. Tiles are walked image by
 * image per channel block (kce_walk); the next tile's loads are issued before this tile's
 * stores, into the other of two buffer sets (registers swapped per tile). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kc_emit.h"
#include "kc_gemm.h"
#include "kc_pool.h"

static isa_opnd SP(unsigned reg, uint64_t off) { return isa_spad(reg, off); }
static uint64_t al64(uint64_t n) { return (n + 63) & ~(uint64_t)63; }

typedef enum { KP_MAX, KP_AVG, KP_MAX_GRAD, KP_AVG_GRAD, KP_DW_DX, KP_DW_DW } kp_kind;

/* What a kind reads and writes: x padded (and, for taps read in fp32, its fp32 cast), dy, w's
 * taps; a whole padded fp32 dx cropped into the output, or the taps' sums over the images. */
static bool kp_has_x(kp_kind k)
{
    return k == KP_MAX || k == KP_AVG || k == KP_MAX_GRAD || k == KP_DW_DW;
}
static bool kp_f32x(kp_kind k) { return k == KP_AVG || k == KP_MAX_GRAD || k == KP_DW_DW; }
static bool kp_has_dy(kp_kind k) { return k == KP_MAX_GRAD || k == KP_AVG_GRAD || k >= KP_DW_DX; }
static bool kp_dx_out(kp_kind k) { return k == KP_MAX_GRAD || k == KP_AVG_GRAD || k == KP_DW_DX; }

/* An NHWC operand: image, row and pixel strides (channels contiguous). */
typedef struct kp_opnd {
    uint64_t addr;
    int64_t sn, sh, sw;
    isa_dtype dt;
    unsigned reg;
} kp_opnd;

typedef struct kp {
    kc_ctx *x;
    kce c;
    kp_kind kind;
    uint64_t N, C, H, W, OH, OW, KH, KW, sh, sw, ph, pw, dh, dw, Hp, Wp, Cb;
    isa_dtype dt, odt;
    uint64_t e, oe;
    kp_opnd in[2], out; /* forward: x; max grad: x, dy; avg grad: dy; depthwise: dy, w / x, dy */
    int64_t w_skh, w_skw;  /* depthwise: w's (or dw's) tap strides; its channels contiguous */
    int n_in;
    /* scratchpad: two sets of input and output tiles; fp32 work buffers; row temps */
    uint64_t xin[2], dyin[2], tout[2], xf, dx, r_y, r_free, r_m, r_dy, wf, dwacc;
    uint64_t xin_sz, dyin_sz, tout_sz;
    /* registers: inputs' and output's HBM, the tile sets (swapped), row walkers */
    unsigned rX, rX2, rD, rD2, rO, rO2, rT, rXr, rOr, rDr, rGr;
    unsigned s_infree, s_infull, s_outfree, s_outfull;
} kp;

/* ---- a tile ------------------------------------------------------------------------------ */

/* The padded tile's pixel pitch is Cb elements (an edge block uses its first cb). */
static uint64_t kp_px(const kp *p, uint64_t e) { return p->Cb * e; }

/* Loads the tile of cb channels at offsets off (per input) into the set at regs[i]. */
static void kp_load(kp *p, const int64_t *off, const unsigned *dst_reg, uint64_t cb)
{
    kce *c = &p->c;
    kce_wait(c, ISA_UNIT_DMA, p->s_infree, 1);
    for (int i = 0; i < p->n_in; i++) {
        const kp_opnd *o = &p->in[i];
        if (p->kind == KP_DW_DX && i == 1) { /* w's taps: KH x KW rows of cb channels */
            uint64_t e = isa_dtype_size[o->dt];
            isa_opnd src = off[i] >= 0 ? isa_hbm(o->reg, (uint64_t)off[i]) : isa_hbm(p->rT, 0);
            if (off[i] < 0)
                kce_addi(c, p->rT, o->reg, off[i]);
            kce_dma(c, SP(dst_reg[i], 0), src, o->dt, cb, p->KW, p->KH, kp_px(p, e),
                    (uint64_t)p->w_skw, p->KW * kp_px(p, e), (uint64_t)p->w_skh);
            continue;
        }
        bool x = kp_has_x(p->kind) && i == 0;
        uint64_t rows = x ? p->H : p->OH, px = x ? p->W : p->OW;
        uint64_t pitch = x ? p->Wp : p->OW, e = isa_dtype_size[o->dt];
        uint64_t at = x ? (p->ph * p->Wp + p->pw) * kp_px(p, e) : 0;
        isa_opnd src = off[i] >= 0 ? isa_hbm(o->reg, (uint64_t)off[i]) : isa_hbm(p->rT, 0);
        if (off[i] < 0)
            kce_addi(c, p->rT, o->reg, off[i]);
        kce_dma(c, SP(dst_reg[i], at), src, o->dt, cb, px, rows, kp_px(p, e), (uint64_t)o->sw,
                pitch * kp_px(p, e), (uint64_t)o->sh);
    }
    kce_signal(c, ISA_UNIT_DMA, p->s_infull, 1);
}

/* The VPU's output rows: per output row oh the taps of the padded input at rXr (x) and the
 * output / gradient rows at rOr (y), rDr (dy), rGr (dx, padded fp32). */
static void kp_row(kp *p, uint64_t cb)
{
    kce *c = &p->c;
    isa_dtype F = ISA_DTYPE_FP32, dt = p->dt;
    uint64_t KH = p->KH, KW = p->KW, OW = p->OW, e = p->e, oe = p->oe;
    /* a tap's OW x cb tile: rows sw pixels apart; tap (kh, kw) dh rows and dw pixels on */
    uint64_t xs = p->sw * kp_px(p, e), xo = p->dw * kp_px(p, e), fs = p->sw * kp_px(p, 4);
    uint64_t fo = p->dw * kp_px(p, 4);
    uint64_t prow = p->dh * p->Wp * kp_px(p, e), frow = p->dh * p->Wp * kp_px(p, 4);
    /* tap (kh, kw) of the input (its type at rXr, or fp32 at rXr's fp32 twin rGr's row) */
    switch (p->kind) {
    case KP_MAX: {
        isa_opnd y = SP(p->rOr, 0);
        for (uint64_t kh = 0; kh < KH; kh++)
            for (uint64_t kw = 0; kw < KW; kw++) {
                isa_opnd t = SP(p->rXr, kh * prow + kw * xo);
                if (kh == 0 && kw == 0)
                    kce_un(c, ISA_OP_VPU_COPY, y, t, OW, cb, dt, kp_px(p, oe), xs);
                else
                    kce_bin(c, ISA_OP_VPU_MAX, y, y, t, OW, cb, dt, ISA_BCAST_FULL, kp_px(p, oe),
                            kp_px(p, oe), xs);
            }
        break;
    }
    case KP_AVG: {
        /* the fp32 input rows at rGr (a cast of the tile when it is not fp32) */
        isa_opnd acc = SP(0, p->r_y);
        for (uint64_t kh = 0; kh < KH; kh++)
            for (uint64_t kw = 0; kw < KW; kw++) {
                isa_opnd t = SP(p->rGr, kh * frow + kw * fo);
                if (kh == 0 && kw == 0)
                    kce_un(c, ISA_OP_VPU_COPY, acc, t, OW, cb, F, kp_px(p, 4), fs);
                else
                    kce_bin(c, ISA_OP_VPU_ADD, acc, acc, t, OW, cb, F, ISA_BCAST_FULL,
                            kp_px(p, 4), kp_px(p, 4), fs);
            }
        float inv = (float)(1.0 / (double)(KH * KW));
        if (p->odt == F) {
            kce_scal(c, ISA_OP_VPU_MULS, SP(p->rOr, 0), acc, inv, OW, cb, F, kp_px(p, 4),
                     kp_px(p, 4));
        } else {
            kce_scal(c, ISA_OP_VPU_MULS, acc, acc, inv, OW, cb, F, kp_px(p, 4), kp_px(p, 4));
            kce_cast(c, SP(p->rOr, 0), acc, OW, cb, p->odt, F, kp_px(p, oe), kp_px(p, 4));
        }
        break;
    }
    case KP_AVG_GRAD: {
        isa_opnd d = SP(0, p->r_dy);
        float inv = (float)(1.0 / (double)(KH * KW));
        if (dt == F) {
            kce_scal(c, ISA_OP_VPU_MULS, d, SP(p->rDr, 0), inv, OW, cb, F, kp_px(p, 4),
                     kp_px(p, 4));
        } else {
            kce_cast(c, d, SP(p->rDr, 0), OW, cb, F, dt, kp_px(p, 4), kp_px(p, e));
            kce_scal(c, ISA_OP_VPU_MULS, d, d, inv, OW, cb, F, kp_px(p, 4), kp_px(p, 4));
        }
        for (uint64_t kh = 0; kh < KH; kh++)
            for (uint64_t kw = 0; kw < KW; kw++) {
                isa_opnd g = SP(p->rGr, kh * frow + kw * fo);
                kce_bin(c, ISA_OP_VPU_ADD, g, g, d, OW, cb, F, ISA_BCAST_FULL, fs, fs,
                        kp_px(p, 4));
            }
        break;
    }
    case KP_DW_DX: { /* dx[tap] += dy x w[tap] (per channel) */
        isa_opnd d = SP(0, p->r_dy), m = SP(0, p->r_m);
        uint64_t ps = kp_px(p, 4);
        if (dt == F)
            kce_un(c, ISA_OP_VPU_COPY, d, SP(p->rDr, 0), OW, cb, F, ps, ps);
        else
            kce_cast(c, d, SP(p->rDr, 0), OW, cb, F, dt, ps, kp_px(p, e));
        for (uint64_t kh = 0; kh < KH; kh++)
            for (uint64_t kw = 0; kw < KW; kw++) {
                isa_opnd g = SP(p->rGr, kh * frow + kw * fo);
                kce_bin(c, ISA_OP_VPU_MUL, m, d, SP(0, p->wf + (kh * KW + kw) * ps), OW, cb, F,
                        ISA_BCAST_ROW, ps, ps, 0);
                kce_bin(c, ISA_OP_VPU_ADD, g, g, m, OW, cb, F, ISA_BCAST_FULL, fs, fs, ps);
            }
        break;
    }
    case KP_DW_DW: { /* dw[tap] += sum over the row of x[tap] x dy (per channel) */
        isa_opnd d = SP(0, p->r_dy), m = SP(0, p->r_m), cs = SP(0, p->r_y);
        uint64_t ps = kp_px(p, 4);
        if (dt == F)
            kce_un(c, ISA_OP_VPU_COPY, d, SP(p->rDr, 0), OW, cb, F, ps, ps);
        else
            kce_cast(c, d, SP(p->rDr, 0), OW, cb, F, dt, ps, kp_px(p, e));
        for (uint64_t kh = 0; kh < KH; kh++)
            for (uint64_t kw = 0; kw < KW; kw++) {
                isa_opnd t = SP(p->rXr, kh * frow + kw * fo);
                isa_opnd acc = SP(0, p->dwacc + (kh * KW + kw) * ps);
                kce_bin(c, ISA_OP_VPU_MUL, m, t, d, OW, cb, F, ISA_BCAST_FULL, ps, fs, ps);
                kce_red(c, ISA_OP_VPU_CSUM, cs, m, OW, cb, F, ps);
                kce_bin(c, ISA_OP_VPU_ADD, acc, acc, cs, 1, cb, F, ISA_BCAST_FULL, 0, 0, 0);
            }
        break;
    }
    default: { /* KP_MAX_GRAD: x in fp32 at rXr (cast when needed), dx at rGr */
        isa_opnd y = SP(0, p->r_y), fr = SP(0, p->r_free), m = SP(0, p->r_m), d = SP(0, p->r_dy);
        uint64_t ps = kp_px(p, 4);
        for (uint64_t kh = 0; kh < KH; kh++)
            for (uint64_t kw = 0; kw < KW; kw++) {
                isa_opnd t = SP(p->rXr, kh * frow + kw * fo);
                if (kh == 0 && kw == 0)
                    kce_un(c, ISA_OP_VPU_COPY, y, t, OW, cb, F, ps, fs);
                else
                    kce_bin(c, ISA_OP_VPU_MAX, y, y, t, OW, cb, F, ISA_BCAST_FULL, ps, ps, fs);
            }
        kce_fill(c, fr, 1.0f, OW, cb, F, ps);
        if (dt == F)
            kce_un(c, ISA_OP_VPU_COPY, d, SP(p->rDr, 0), OW, cb, F, ps, ps);
        else
            kce_cast(c, d, SP(p->rDr, 0), OW, cb, F, dt, ps, kp_px(p, e));
        for (uint64_t kh = 0; kh < KH; kh++)
            for (uint64_t kw = 0; kw < KW; kw++) {
                isa_opnd t = SP(p->rXr, kh * frow + kw * fo);
                isa_opnd g = SP(p->rGr, kh * frow + kw * fo);
                kce_bin(c, ISA_OP_VPU_CMPEQ, m, t, y, OW, cb, F, ISA_BCAST_FULL, ps, fs, ps);
                kce_bin(c, ISA_OP_VPU_MUL, m, m, fr, OW, cb, F, ISA_BCAST_FULL, ps, ps, ps);
                kce_bin(c, ISA_OP_VPU_SUB, fr, fr, m, OW, cb, F, ISA_BCAST_FULL, ps, ps, ps);
                kce_bin(c, ISA_OP_VPU_MUL, m, m, d, OW, cb, F, ISA_BCAST_FULL, ps, ps, ps);
                kce_bin(c, ISA_OP_VPU_ADD, g, g, m, OW, cb, F, ISA_BCAST_FULL, fs, fs, ps);
            }
        break;
    }
    }
}

/* All output rows of the tile of cb channels at the sets rX / rD (inputs) and rO (output). */
static void kp_rows(kp *p, uint64_t cb)
{
    kce *c = &p->c;
    isa_dtype F = ISA_DTYPE_FP32;
    uint64_t e = p->e, oe = p->oe, s = p->sh; /* an output row is sh padded rows on */
    bool grad = kp_dx_out(p->kind);
    bool f32x = kp_f32x(p->kind); /* taps read fp32 x */
    if (p->kind == KP_DW_DX) /* w's taps in fp32, for the rows' multiplies */
        kce_cast(c, SP(0, p->wf), SP(p->rX, 0), p->KH * p->KW, cb, F, p->dt, kp_px(p, 4),
                 kp_px(p, e));
    /* fp32 x: a cast of the padded tile, row by row (border included: -inf / 0 stay) */
    if (f32x) {
        kce_mov(c, p->rXr, p->rX);
        kce_addi(c, p->rGr, 0, (int64_t)p->xf);
        kc_loop l;
        unsigned regs[2] = {p->rXr, p->rGr};
        int64_t st[2] = {(int64_t)(p->Wp * kp_px(p, e)), (int64_t)(p->Wp * kp_px(p, 4))};
        kc_loop_begin(p->x, &l, p->Hp, 2, regs, st);
        if (p->dt == F)
            kce_un(c, ISA_OP_VPU_COPY, SP(p->rGr, 0), SP(p->rXr, 0), p->Wp, cb, F, kp_px(p, 4),
                   kp_px(p, 4));
        else
            kce_cast(c, SP(p->rGr, 0), SP(p->rXr, 0), p->Wp, cb, F, p->dt, kp_px(p, 4),
                     kp_px(p, e));
        kc_loop_end(p->x, &l);
    }
    if (grad) { /* dx's padded accumulators, row by row */
        kce_addi(c, p->rGr, 0, (int64_t)p->dx);
        kc_loop l;
        int64_t st1 = (int64_t)(p->Wp * kp_px(p, 4));
        kc_loop_begin(p->x, &l, p->Hp, 1, &p->rGr, &st1);
        kce_fill(c, SP(p->rGr, 0), 0.0f, p->Wp, cb, F, kp_px(p, 4));
        kc_loop_end(p->x, &l);
    }
    /* the row walkers */
    unsigned regs[4];
    int64_t st[4];
    unsigned n = 0;
    switch (p->kind) {
    case KP_MAX:
        kce_mov(c, p->rXr, p->rX);
        kce_mov(c, p->rOr, p->rO);
        regs[n] = p->rXr, st[n++] = (int64_t)(s * p->Wp * kp_px(p, e));
        regs[n] = p->rOr, st[n++] = (int64_t)(p->OW * kp_px(p, oe));
        break;
    case KP_AVG:
        kce_addi(c, p->rGr, 0, (int64_t)p->xf);
        kce_mov(c, p->rOr, p->rO);
        regs[n] = p->rGr, st[n++] = (int64_t)(s * p->Wp * kp_px(p, 4));
        regs[n] = p->rOr, st[n++] = (int64_t)(p->OW * kp_px(p, oe));
        break;
    case KP_AVG_GRAD:
        kce_mov(c, p->rDr, p->rD);
        kce_addi(c, p->rGr, 0, (int64_t)p->dx);
        regs[n] = p->rDr, st[n++] = (int64_t)(p->OW * kp_px(p, e));
        regs[n] = p->rGr, st[n++] = (int64_t)(s * p->Wp * kp_px(p, 4));
        break;
    case KP_DW_DX:
        kce_mov(c, p->rDr, p->rD);
        kce_addi(c, p->rGr, 0, (int64_t)p->dx);
        regs[n] = p->rDr, st[n++] = (int64_t)(p->OW * kp_px(p, e));
        regs[n] = p->rGr, st[n++] = (int64_t)(s * p->Wp * kp_px(p, 4));
        break;
    case KP_DW_DW:
        kce_addi(c, p->rXr, 0, (int64_t)p->xf);
        kce_mov(c, p->rDr, p->rD);
        regs[n] = p->rXr, st[n++] = (int64_t)(s * p->Wp * kp_px(p, 4));
        regs[n] = p->rDr, st[n++] = (int64_t)(p->OW * kp_px(p, e));
        break;
    default:
        kce_addi(c, p->rXr, 0, (int64_t)p->xf);
        kce_mov(c, p->rDr, p->rD);
        kce_addi(c, p->rGr, 0, (int64_t)p->dx);
        regs[n] = p->rXr, st[n++] = (int64_t)(s * p->Wp * kp_px(p, 4));
        regs[n] = p->rDr, st[n++] = (int64_t)(p->OW * kp_px(p, e));
        regs[n] = p->rGr, st[n++] = (int64_t)(s * p->Wp * kp_px(p, 4));
        break;
    }
    kc_loop l;
    kc_loop_begin(p->x, &l, p->OH, n, regs, st);
    kp_row(p, cb);
    kc_loop_end(p->x, &l);
    if (grad) { /* dx's interior, in the output type, into the output set */
        kce_mov(c, p->rOr, p->rO);
        kce_addi(c, p->rGr, 0, (int64_t)(p->dx + (p->ph * p->Wp + p->pw) * kp_px(p, 4)));
        unsigned r2[2] = {p->rOr, p->rGr};
        int64_t s2[2] = {(int64_t)(p->W * kp_px(p, oe)), (int64_t)(p->Wp * kp_px(p, 4))};
        kc_loop_begin(p->x, &l, p->H, 2, r2, s2);
        if (p->odt == F)
            kce_un(c, ISA_OP_VPU_COPY, SP(p->rOr, 0), SP(p->rGr, 0), p->W, cb, F, kp_px(p, 4),
                   kp_px(p, 4));
        else
            kce_cast(c, SP(p->rOr, 0), SP(p->rGr, 0), p->W, cb, p->odt, F, kp_px(p, oe),
                     kp_px(p, 4));
        kc_loop_end(p->x, &l);
    }
}

/* A tile walk's context: the channel block's width and the width of the tile after. */
typedef struct kp_walk {
    kp *p;
    uint64_t cb, cb_after;
} kp_walk;

/* One tile: prefetch the next (into the other sets), compute this one, store it. */
static void kp_tile(void *v, const int64_t *cur, const int64_t *next, unsigned flags)
{
    bool after = flags & KCE_NEXT_AFTER;
    kp_walk *w = v;
    kp *p = w->p;
    kce *c = &p->c;
    if (next) {
        unsigned dst[2] = {p->rX2, p->rD2};
        if (p->kind == KP_AVG_GRAD || p->kind == KP_DW_DX) /* dy first */
            dst[0] = p->rD2, dst[1] = p->rX2;
        kp_load(p, next, dst, after ? w->cb_after : w->cb);
    }
    kce_wait(c, ISA_UNIT_VPU, p->s_infull, 1);
    bool dw = p->kind == KP_DW_DW, store = !dw || (flags & KCE_ROW_END);
    if (!dw)
        kce_wait(c, ISA_UNIT_VPU, p->s_outfree, 1);
    kp_rows(p, w->cb);
    kce_signal(c, ISA_UNIT_VPU, p->s_infree, 1);
    if (dw && store) { /* the channel block's last image: its taps' sums out, zeroed again */
        kce_wait(c, ISA_UNIT_VPU, p->s_outfree, 1);
        uint64_t taps = p->KH * p->KW, ps = kp_px(p, 4);
        kce_cast(c, SP(p->rO, 0), SP(0, p->dwacc), taps, w->cb, p->odt, ISA_DTYPE_FP32,
                 kp_px(p, p->oe), ps);
        kce_fill(c, SP(0, p->dwacc), 0.0f, taps, w->cb, ISA_DTYPE_FP32, ps);
    }
    if (store)
        kce_signal(c, ISA_UNIT_VPU, p->s_outfull, 1);
    /* the store */
    const kp_opnd *o = &p->out;
    int64_t off = cur[p->n_in];
    isa_opnd dst = off >= 0 ? isa_hbm(o->reg, (uint64_t)off) : isa_hbm(p->rT, 0);
    if (store) {
        kce_wait(c, ISA_UNIT_DMA, p->s_outfull, 1);
        if (off < 0)
            kce_addi(c, p->rT, o->reg, off);
        if (dw) {
            kce_dma(c, dst, SP(p->rO, 0), o->dt, w->cb, p->KW, p->KH, (uint64_t)p->w_skw,
                    kp_px(p, p->oe), (uint64_t)p->w_skh, p->KW * kp_px(p, p->oe));
        } else {
            bool grad = kp_dx_out(p->kind);
            uint64_t rows = grad ? p->H : p->OH, px = grad ? p->W : p->OW;
            kce_dma(c, dst, SP(p->rO, 0), o->dt, w->cb, px, rows, (uint64_t)o->sw,
                    kp_px(p, p->oe), (uint64_t)o->sh, px * kp_px(p, p->oe));
        }
        kce_signal(c, ISA_UNIT_DMA, p->s_outfree, 1);
    }
    kce_swap(c, p->rX, p->rX2, p->rT);
    if (p->n_in > 1 || p->kind == KP_AVG_GRAD)
        kce_swap(c, p->rD, p->rD2, p->rT);
    if (store)
        kce_swap(c, p->rO, p->rO2, p->rT);
}

/* ---- the plan ----------------------------------------------------------------------------- */

/* Scratchpad of tiles of cb channels, laid out from base. */
static uint64_t kp_layout(kp *p, uint64_t cb, uint64_t base)
{
    p->Cb = cb;
    uint64_t e = p->e, oe = p->oe, pad = p->Hp * p->Wp, taps = p->KH * p->KW;
    bool x = kp_has_x(p->kind), dy = kp_has_dy(p->kind), grad = kp_dx_out(p->kind);
    p->xin_sz = x ? al64(pad * kp_px(p, e)) : p->kind == KP_DW_DX ? al64(taps * kp_px(p, e)) : 0;
    p->dyin_sz = dy ? al64(p->OH * p->OW * kp_px(p, e)) : 0;
    p->tout_sz = grad ? al64(p->H * p->W * kp_px(p, oe))
                 : p->kind == KP_DW_DW ? al64(taps * kp_px(p, oe))
                                       : al64(p->OH * p->OW * kp_px(p, oe));
    uint64_t at = base;
    for (int i = 0; i < 2; i++) {
        p->xin[i] = at, at += p->xin_sz;
        p->dyin[i] = at, at += p->dyin_sz;
        p->tout[i] = at, at += p->tout_sz;
    }
    p->xf = at, at += kp_f32x(p->kind) ? al64(pad * kp_px(p, 4)) : 0;
    p->dx = at, at += grad ? al64(pad * kp_px(p, 4)) : 0;
    uint64_t row = al64(p->OW * kp_px(p, 4));
    bool dwk = p->kind >= KP_DW_DX;
    p->r_y = at, at += row;
    p->r_free = at, at += p->kind == KP_MAX_GRAD ? row : 0;
    p->r_m = at, at += p->kind == KP_MAX_GRAD || dwk ? row : 0;
    p->r_dy = at, at += dy ? row : 0;
    p->wf = at, at += p->kind == KP_DW_DX ? al64(taps * kp_px(p, 4)) : 0;
    p->dwacc = at, at += p->kind == KP_DW_DW ? al64(taps * kp_px(p, 4)) : 0;
    return at - base;
}

/* Checks an NHWC operand of shape [N, c, h, w]. */
static np_status kp_opnd_of(kp *p, kp_opnd *o, const kc_tensor *t, const char *what, uint64_t c,
                            uint64_t h, uint64_t w)
{
    kc_ctx *x = p->x;
    if (t->ndim != 4 || (uint64_t)t->shape[0] != p->N || (uint64_t)t->shape[1] != c ||
        (uint64_t)t->shape[2] != h || (uint64_t)t->shape[3] != w)
        return kc_fail(x, NP_ERR_INCONSISTENT, "%s must be [%" PRIu64 ", %" PRIu64 ", %" PRIu64
                       ", %" PRIu64 "]", what, p->N, c, h, w);
    uint64_t e = nn_dtype_size(t->dtype);
    if (t->stride[1] != (int64_t)e && c > 1)
        return kc_fail(x, NP_ERR_INCONSISTENT, "%s must be channels-last (NHWC in memory: "
                       "channel stride %" PRIu64 " bytes, not %" PRId64 ")", what, e, t->stride[1]);
    if (t->stride[3] >= (1 << 24) || t->stride[2] >= (1 << 27) || t->stride[3] < 0 ||
        t->stride[2] < 0)
        return kc_fail(x, NP_ERR_RANGE, "%s: pixels %" PRId64 " and rows %" PRId64 " bytes apart "
                       "(the copies take < 16 MiB and < 128 MiB)", what, t->stride[3],
                       t->stride[2]);
    o->addr = t->addr, o->sn = t->stride[0], o->sh = t->stride[2], o->sw = t->stride[3];
    o->dt = kc_isa_dtype(t->dtype);
    return NP_OK;
}

static np_status kp_emit_all(kp *pp);

/* When every operand of k is channel-major ([N, C, H, W] with channels C > 1 not contiguous
 * and the image stride C times the channel stride), turns them into [N x C, 1, H, W]: the
 * same elements, each channel an image of its own. */
static bool kp_channel_major(kc_kernel *k)
{
    int n = k->n_in + k->n_out;
    for (int i = 0; i < n; i++) {
        const kc_tensor *t = i < k->n_in ? &k->in[i] : &k->out[i - k->n_in];
        if (t->ndim != 4 || t->shape[1] < 2 || t->stride[1] == (int64_t)nn_dtype_size(t->dtype) ||
            (t->shape[0] > 1 && t->stride[0] != t->shape[1] * t->stride[1]))
            return false;
    }
    for (int i = 0; i < n; i++) {
        kc_tensor *t = i < k->n_in ? &k->in[i] : &k->out[i - k->n_in];
        t->shape[0] *= t->shape[1], t->shape[1] = 1;
        t->stride[0] = t->stride[1], t->stride[1] = (int64_t)nn_dtype_size(t->dtype);
    }
    return true;
}

static np_status kp_compile(kc_ctx *x, kp_kind kind)
{
    const kc_kernel *k = x->k;
    kp p;
    memset(&p, 0, sizeof p);
    p.x = x, p.kind = kind, p.c = (kce){x, 1, 0, 0};
    bool grad = kind == KP_MAX_GRAD || kind == KP_AVG_GRAD;
    const kc_tensor *img = grad ? &k->out[0] : &k->in[0]; /* [N, C, H, W] */
    const kc_tensor *dy = kind == KP_MAX_GRAD ? &k->in[1] : kind == KP_AVG_GRAD ? &k->in[0]
                                                                              : &k->out[0];
    if (img->ndim != 4 || dy->ndim != 4)
        return kc_fail(x, NP_ERR_INCONSISTENT, "operands must be [N, C, H, W]");
    p.N = (uint64_t)img->shape[0], p.C = (uint64_t)img->shape[1];
    p.H = (uint64_t)img->shape[2], p.W = (uint64_t)img->shape[3];
    uint64_t kk = (uint64_t)kc_attr_int(x, "kernel"), ks = (uint64_t)kc_attr_int(x, "stride");
    uint64_t kpd = (uint64_t)kc_attr_int(x, "pad");
    ks = ks ? ks : kk;
    if (2 * kpd > kk || p.H + 2 * kpd < kk || p.W + 2 * kpd < kk)
        return kc_fail(x, NP_ERR_RANGE, "kernel %" PRIu64 ", pad %" PRIu64 " on %" PRIu64 "x%"
                       PRIu64 " (pad at most half the kernel, the kernel within the padded "
                       "input)", kk, kpd, p.H, p.W);
    p.KH = p.KW = kk, p.sh = p.sw = ks, p.ph = p.pw = kpd, p.dh = p.dw = 1;
    p.OH = (p.H + 2 * kpd - kk) / ks + 1, p.OW = (p.W + 2 * kpd - kk) / ks + 1;
    p.Hp = p.H + 2 * p.ph, p.Wp = p.W + 2 * p.pw;
    p.dt = kc_isa_dtype(dy->dtype); /* the data's type (x's, dy's) */
    if (!grad)
        p.dt = kc_isa_dtype(img->dtype);
    p.odt = kc_isa_dtype(grad ? img->dtype : dy->dtype);
    p.e = isa_dtype_size[p.dt], p.oe = isa_dtype_size[p.odt];
    if (p.dt == ISA_DTYPE_INT8 || p.dt == ISA_DTYPE_INT32 || p.odt == ISA_DTYPE_INT8 ||
        p.odt == ISA_DTYPE_INT32)
        return kc_fail(x, NP_ERR_INCONSISTENT, "pooling takes floats");
    if (p.Wp > 65535 || p.Hp > 65535)
        return kc_fail(x, NP_ERR_RANGE, "a padded image of %" PRIu64 "x%" PRIu64 " pixels (at "
                       "most 65535 a side)", p.Hp, p.Wp);
    /* operands; channel-major ones (the framework's NCHW: images and channels one index)
     * are N x C images of one channel each */
    kc_kernel kv = *k;
    if (kp_channel_major(&kv)) {
        k = &kv;
        p.N *= p.C, p.C = 1;
    }
    np_status st = NP_OK;
    switch (kind) {
    case KP_MAX:
    case KP_AVG:
        p.n_in = 1;
        st = kp_opnd_of(&p, &p.in[0], &k->in[0], "x", p.C, p.H, p.W);
        if (st == NP_OK)
            st = kp_opnd_of(&p, &p.out, &k->out[0], "out", p.C, p.OH, p.OW);
        if (st == NP_OK && k->out[0].dtype != k->in[0].dtype)
            st = kc_fail(x, NP_ERR_INCONSISTENT, "out must have x's type");
        break;
    case KP_MAX_GRAD:
        p.n_in = 2;
        st = kp_opnd_of(&p, &p.in[0], &k->in[0], "x", p.C, p.H, p.W);
        if (st == NP_OK)
            st = kp_opnd_of(&p, &p.in[1], &k->in[1], "dy", p.C, p.OH, p.OW);
        if (st == NP_OK)
            st = kp_opnd_of(&p, &p.out, &k->out[0], "dx", p.C, p.H, p.W);
        if (st == NP_OK && k->in[0].dtype != k->in[1].dtype)
            st = kc_fail(x, NP_ERR_INCONSISTENT, "x and dy must have one type");
        break;
    default:
        p.n_in = 1;
        st = kp_opnd_of(&p, &p.in[0], &k->in[0], "dy", p.C, p.OH, p.OW);
        if (st == NP_OK)
            st = kp_opnd_of(&p, &p.out, &k->out[0], "dx", p.C, p.H, p.W);
        break;
    }
    if (st != NP_OK)
        return st;
    return kp_emit_all(&p);
}

/* The common part: channels per tile, the result, every core's tiles. */
static np_status kp_emit_all(kp *pp)
{
    kp p = *pp;
    kc_ctx *x = p.x;
    const kc_kernel *k = x->k;
    kp_kind kind = p.kind;
    /* channels per tile: given, or the most that fit twice buffered */
    const kc_place *pl = &k->place;
    uint64_t n_cores = pl->n_cores ? pl->n_cores : 1, spad = UINT64_MAX;
    for (uint32_t cc = pl->core0; cc < pl->core0 + n_cores; cc++) {
        uint64_t s1 = kc_spad_avail(x, cc);
        spad = s1 < spad ? s1 : spad;
    }
    uint64_t given = kind >= KP_DW_DX ? 0 : (uint64_t)kc_attr_int(x, "cblock");
    uint64_t cb = given && given < p.C ? given : p.C;
    if (!given)
        while (cb > 1 && kp_layout(&p, cb, 0) > spad)
            cb = (cb + 1) / 2;
    /* the depthwise weight gradient's cores take channel blocks: one at least for each */
    if (kind == KP_DW_DW && kmm_cdiv(p.C, cb) < n_cores)
        cb = kmm_cdiv(p.C, n_cores < p.C ? n_cores : p.C);
    uint64_t need = kp_layout(&p, cb, 0);
    if (need > spad)
        return kc_fail(x, NP_ERR_RANGE, "a %" PRIu64 "x%" PRIu64 " image of %" PRIu64 " channel%s "
                       "(padded, twice buffered) needs %" PRIu64 " scratchpad bytes, more than "
                       "the %"
                       PRIu64 " free", p.H, p.W, cb, cb > 1 ? "s" : "", need, spad);
    p.Cb = cb;
    if (cb > 65535 || p.pw * cb > 65535 || (p.sw > p.Wp ? p.sw : p.Wp) * cb * 4 >= (1u << 24))
        return kc_fail(x, NP_ERR_RANGE, "%" PRIu64 " channels a tile are too many for the vector "
                       "unit's fields (give cblock)", cb);
    /* tiles: channel blocks (full ones, then the edge) x images */
    uint64_t edge = p.C % cb;
    kc_result *r = x->res;
    uint64_t outer = (uint64_t)(p.N * p.OH * p.OW * p.C) * p.KH * p.KW;
    r->flops = kind == KP_MAX_GRAD ? 6 * outer : kind >= KP_DW_DX ? 2 * outer : outer;
    snprintf(r->schedule, sizeof r->schedule, "%s%" PRIu64 "x%" PRIu64 " images padded by %" PRIu64
             "x%" PRIu64 ", %" PRIu64 " channels a tile, %" PRIu64 "x%" PRIu64 " windows stride %"
             PRIu64 "x%" PRIu64, kind >= KP_DW_DX ? "depthwise on the vector unit: " : "", p.H,
             p.W, p.ph, p.pw, cb, p.KH, p.KW, p.sh, p.sw);
    /* cores split the images, or (the depthwise weight gradient sums them) the channel
     * blocks */
    uint64_t nblk = kmm_cdiv(p.C, cb);
    bool by_blocks = kind == KP_DW_DW;
    uint64_t units = by_blocks ? (n_cores < nblk ? n_cores : nblk) : n_cores;
    uint32_t used = 0;
    for (uint64_t core = 0; core < units; core++) {
        uint64_t n0 = 0, n1 = p.N, b0 = 0, b1 = nblk;
        if (by_blocks)
            kmm_block(nblk, units, core, &b0, &b1);
        else
            n0 = p.N * core / n_cores, n1 = p.N * (core + 1) / n_cores;
        if (n1 == n0 || b1 == b0)
            continue;
        uint64_t nfull = b1 - b0 - (b1 == nblk && edge ? 1 : 0);
        uint64_t cedge = b1 == nblk ? edge : 0;
        kp q = p;
        q.c = (kce){x, 1, 0, 0};
        if (kc_core(x, pl->core0 + (uint32_t)core) != NP_OK)
            return kc_status(x);
        uint64_t at;
        if (kc_spad_alloc(x, need, 64, &at) != NP_OK)
            return kc_status(x);
        kp_layout(&q, cb, at);
        q.Cb = cb;
        kp_opnd *ops[3] = {&q.in[0], &q.in[1], &q.out};
        int nops = q.n_in + 1;
        ops[q.n_in] = &q.out;
        for (int i = 0; i < nops; i++)
            kc_reg_alloc(x, &ops[i]->reg);
        unsigned *regs[] = {&q.rX, &q.rX2, &q.rD, &q.rD2, &q.rO, &q.rO2, &q.rT, &q.rXr, &q.rOr,
                            &q.rDr, &q.rGr};
        for (size_t i = 0; i < sizeof regs / sizeof regs[0]; i++)
            kc_reg_alloc(x, regs[i]);
        unsigned *sems[] = {&q.s_infree, &q.s_infull, &q.s_outfree, &q.s_outfull};
        for (size_t i = 0; i < 4; i++)
            kc_sem_alloc(x, sems[i]);
        if (kc_status(x) != NP_OK)
            return kc_status(x);
        for (int i = 0; i < nops; i++)
            ISA_EMIT(x->e, LI, isa_reg(ops[i]->reg),
                     isa_imm((int64_t)(ops[i]->addr + n0 * (uint64_t)ops[i]->sn +
                                       b0 * cb * isa_dtype_size[ops[i]->dt])));
        bool xin = kind != KP_AVG_GRAD;
        ISA_EMIT(x->e, LI, isa_reg(q.rX), isa_imm((int64_t)(xin ? q.xin[0] : q.dyin[0])));
        ISA_EMIT(x->e, LI, isa_reg(q.rX2), isa_imm((int64_t)(xin ? q.xin[1] : q.dyin[1])));
        ISA_EMIT(x->e, LI, isa_reg(q.rD), isa_imm((int64_t)q.dyin[0]));
        ISA_EMIT(x->e, LI, isa_reg(q.rD2), isa_imm((int64_t)q.dyin[1]));
        ISA_EMIT(x->e, LI, isa_reg(q.rO), isa_imm((int64_t)q.tout[0]));
        ISA_EMIT(x->e, LI, isa_reg(q.rO2), isa_imm((int64_t)q.tout[1]));
        kce *c = &q.c;
        kce_signal(c, ISA_UNIT_DMA, q.s_infree, 2);
        kce_signal(c, ISA_UNIT_DMA, q.s_outfree, 2);
        /* the padded borders of both input sets, once (the copies write the interior) */
        if (kind == KP_DW_DW) /* the taps' sums start at zero */
            kce_fill(c, SP(0, q.dwacc), 0.0f, q.KH * q.KW, cb, ISA_DTYPE_FP32, kp_px(&q, 4));
        if (kp_has_x(kind) && (q.ph || q.pw)) {
            float pv = kind == KP_AVG || kind == KP_DW_DW ? 0.0f : -INFINITY;
            uint64_t px = kp_px(&q, q.e);
            for (int i = 0; i < 2; i++) {
                uint64_t b = q.xin[i];
                for (uint64_t r0 = 0; r0 < q.ph; r0++) { /* top and bottom rows */
                    kce_fill(c, SP(0, b + r0 * q.Wp * px), pv, q.Wp, cb, q.dt, px);
                    kce_fill(c, SP(0, b + (q.ph + q.H + r0) * q.Wp * px), pv, q.Wp, cb, q.dt,
                             px);
                }
                if (q.pw) { /* left and right columns */
                    kce_fill(c, SP(0, b + q.ph * q.Wp * px), pv, q.H, q.pw * cb, q.dt, q.Wp * px);
                    kce_fill(c, SP(0, b + (q.ph * q.Wp + q.pw + q.W) * px), pv, q.H, q.pw * cb,
                             q.dt, q.Wp * px);
                }
            }
        }
        /* the first tile, then the walk: images (inner) of each channel block (outer) */
        unsigned wr[3];
        int64_t wo[3], wi[3];
        for (int i = 0; i < nops; i++)
            wr[i] = ops[i]->reg, wo[i] = (int64_t)(cb * isa_dtype_size[ops[i]->dt]),
            wi[i] = ops[i]->sn;
        int64_t zero[3] = {0, 0, 0};
        unsigned first[2] = {q.rX, q.rD};
        if (kind == KP_AVG_GRAD || kind == KP_DW_DX) /* dy first */
            first[0] = q.rD, first[1] = q.rX;
        uint64_t nn = n1 - n0;
        kp_load(&q, zero, first, nfull ? cb : cedge);
        kp_walk w = {&q, cb, cedge};
        int64_t after[3];
        for (int i = 0; i < nops; i++)
            after[i] = (int64_t)nfull * wo[i];
        if (nfull)
            kce_walk(c, (unsigned)nops, wr, wo, wi, nfull, nn, cedge ? after : NULL, kp_tile, &w);
        if (cedge) {
            for (int i = 0; i < nops; i++) /* the edge block: a walk of its own */
                kce_addi(c, wr[i], wr[i], (int64_t)nfull * wo[i]);
            kp_walk we = {&q, cedge, cedge};
            kce_walk(c, (unsigned)nops, wr, wo, wi, 1, nn, NULL, kp_tile, &we);
        }
        kce_wait(c, ISA_UNIT_DMA, q.s_outfree, 2);
        kce_wait(c, ISA_UNIT_DMA, q.s_infree, 2);
        r->hbm_read_bytes += q.c.rd;
        r->hbm_write_bytes += q.c.wr;
        used++;
    }
    r->cores = used;
    return kc_status(x);
}

/* Checks a depthwise filter operand [C, 1, KH, KW] whose channels are contiguous. */
static np_status kp_filter_of(kp *p, kp_opnd *o, const kc_tensor *t, const char *what)
{
    uint64_t e = nn_dtype_size(t->dtype);
    if (t->ndim != 4 || (uint64_t)t->shape[0] != p->C || t->shape[1] != 1 ||
        (uint64_t)t->shape[2] != p->KH || (uint64_t)t->shape[3] != p->KW)
        return kc_fail(p->x, NP_ERR_INCONSISTENT, "%s must be [%" PRIu64 ", 1, %" PRIu64 ", %"
                       PRIu64 "]", what, p->C, p->KH, p->KW);
    if (t->stride[0] != (int64_t)e && p->C > 1)
        return kc_fail(p->x, NP_ERR_INCONSISTENT, "%s must be laid out as [(kh, kw)][c] (c "
                       "contiguous: stride %" PRIu64 ", not %" PRId64 ")", what, e, t->stride[0]);
    o->addr = t->addr, o->sn = 0, o->sh = 0, o->sw = 0;
    o->dt = kc_isa_dtype(t->dtype);
    p->w_skh = t->stride[2], p->w_skw = t->stride[3];
    return NP_OK;
}

np_status kc_depthwise_grad(kc_ctx *x, bool wgrad)
{
    const kc_kernel *k = x->k;
    kp p;
    memset(&p, 0, sizeof p);
    p.x = x, p.kind = wgrad ? KP_DW_DW : KP_DW_DX, p.c = (kce){x, 1, 0, 0};
    const kc_tensor *img = wgrad ? &k->in[0] : &k->out[0], *dy = wgrad ? &k->in[1] : &k->in[0];
    const kc_tensor *w = wgrad ? &k->out[0] : &k->in[1];
    p.N = (uint64_t)img->shape[0], p.C = (uint64_t)img->shape[1];
    p.H = (uint64_t)img->shape[2], p.W = (uint64_t)img->shape[3];
    p.KH = (uint64_t)w->shape[2], p.KW = (uint64_t)w->shape[3];
    int64_t sh = kc_attr_int(x, "stride"), sw = kc_attr_int(x, "stride_w");
    int64_t ph = kc_attr_int(x, "pad"), pw = kc_attr_int(x, "pad_w");
    int64_t dh = kc_attr_int(x, "dilation"), dw = kc_attr_int(x, "dilation_w");
    p.sh = (uint64_t)sh, p.sw = (uint64_t)(sw ? sw : sh), p.ph = (uint64_t)ph;
    p.pw = (uint64_t)(pw >= 0 ? pw : ph), p.dh = (uint64_t)dh, p.dw = (uint64_t)(dw ? dw : dh);
    p.OH = (p.H + 2 * p.ph - p.dh * (p.KH - 1) - 1) / p.sh + 1;
    p.OW = (p.W + 2 * p.pw - p.dw * (p.KW - 1) - 1) / p.sw + 1;
    p.Hp = p.H + 2 * p.ph, p.Wp = p.W + 2 * p.pw;
    p.dt = kc_isa_dtype(dy->dtype), p.odt = kc_isa_dtype(k->out[0].dtype);
    p.e = isa_dtype_size[p.dt], p.oe = isa_dtype_size[p.odt];
    if (p.Wp > 65535 || p.Hp > 65535 || p.KH * p.KW > 65535)
        return kc_fail(x, NP_ERR_RANGE, "a padded image of %" PRIu64 "x%" PRIu64 " pixels (at "
                       "most 65535 a side)", p.Hp, p.Wp);
    p.n_in = 2;
    np_status st;
    if (wgrad) {
        st = kp_opnd_of(&p, &p.in[0], img, "x", p.C, p.H, p.W);
        if (st == NP_OK)
            st = kp_opnd_of(&p, &p.in[1], dy, "dy", p.C, p.OH, p.OW);
        if (st == NP_OK)
            st = kp_filter_of(&p, &p.out, w, "dw");
    } else {
        st = kp_opnd_of(&p, &p.in[0], dy, "dy", p.C, p.OH, p.OW);
        if (st == NP_OK)
            st = kp_filter_of(&p, &p.in[1], w, "w");
        if (st == NP_OK)
            st = kp_opnd_of(&p, &p.out, img, "dx", p.C, p.H, p.W);
    }
    if (st != NP_OK)
        return st;
    return kp_emit_all(&p);
}

static np_status maxpool_compile(kc_ctx *x) { return kp_compile(x, KP_MAX); }
static np_status avgpool_compile(kc_ctx *x) { return kp_compile(x, KP_AVG); }
static np_status maxpool_grad_compile(kc_ctx *x) { return kp_compile(x, KP_MAX_GRAD); }
static np_status avgpool_grad_compile(kc_ctx *x) { return kp_compile(x, KP_AVG_GRAD); }

/* ---- the framework's computation of each -------------------------------------------------- */

static int64_t kp_attr(const kc_kernel *k, const char *name, int64_t dflt)
{
    for (int i = 0; i < k->n_attrs; i++)
        if (!strcmp(k->attrs[i].name, name))
            return k->attrs[i].i;
    return dflt;
}

static np_status kp_reference(nn_graph *g, const kc_kernel *k, nn_tensor *const *in,
                              nn_tensor **out, np_err *err)
{
    int64_t kk = kp_attr(k, "kernel", 2), s = kp_attr(k, "stride", 0), pad = kp_attr(k, "pad", 0);
    s = s ? s : kk;
    switch (k->op) {
    case NN_OP_MAXPOOL2D: out[0] = nn_maxpool2d(g, in[0], (int)kk, (int)s, (int)pad); break;
    case NN_OP_AVGPOOL2D: out[0] = nn_avgpool2d(g, in[0], (int)kk, (int)s, (int)pad); break;
    default: {
        int64_t ip[NN_MAX_IPARAMS] = {kk, s, pad, 0, k->out[0].shape[2], k->out[0].shape[3]};
        out[0] = k->op == NN_OP_MAXPOOL2D_GRAD
                     ? nn_node(g, NN_OP_MAXPOOL2D_GRAD, 2, (nn_tensor *[]){in[0], in[1]}, ip, NULL)
                     : nn_node(g, NN_OP_AVGPOOL2D_GRAD, 1, (nn_tensor *[]){in[0]}, ip, NULL);
        break;
    }
    }
    return out[0] ? NP_OK : nn_graph_status(g, err);
}

/* The pools' node parameters (framework/ops_api.c, op_linalg.c): ip[0] the window side,
 * ip[1] the stride, ip[2] the pad (the gradients' ip[4..5]: x's H and W, the output's). */
static np_status kp_from_node(const nn_tensor *t, kc_kernel *k, np_err *err)
{
    if (k->n_attrs + 3 > KC_MAX_ATTRS)
        return np_err_set(err, NP_ERR_RANGE, "%s: no room for its attributes", nn_op_name(t->op));
    k->attrs[k->n_attrs++] = KC_INT("kernel", t->ip[0]);
    k->attrs[k->n_attrs++] = KC_INT("stride", t->ip[1]);
    k->attrs[k->n_attrs++] = KC_INT("pad", t->ip[2]);
    return NP_OK;
}

/* ---- `npusim kernel --op` ------------------------------------------------------------------ */

static const kc_attr_def kp_keys[] = {
    {"shape", KC_ATTR_SHAPE, KC_REQUIRED, 0, 0, "x's shape NxCxHxW (stored channels-last)"},
    {"dtype", KC_ATTR_DTYPE, NN_BF16, 0, 0, "every operand's type"},
};

static np_status kp_build(kc_prog *pr, const kc_spec *s, kc_kernel *k, np_err *err)
{
    const kc_spec_val *sh = kc_spec_get(s, "shape");
    nn_dtype dt = (nn_dtype)kc_spec_get(s, "dtype")->i;
    if (sh->ndim != 4)
        return np_err_set(err, NP_ERR_RANGE, "%s: shape= must be NxCxHxW", nn_op_name(s->op));
    int64_t N = sh->shape[0], C = sh->shape[1], H = sh->shape[2], W = sh->shape[3];
    int64_t kk = 2, st = 0, pad = 0;
    const kc_spec_val *v;
    if ((v = kc_spec_get(s, "kernel")))
        kk = v->i;
    if ((v = kc_spec_get(s, "stride")))
        st = v->i;
    if ((v = kc_spec_get(s, "pad")))
        pad = v->i;
    st = st ? st : kk;
    int64_t OH = (H + 2 * pad - kk) / st + 1, OW = (W + 2 * pad - kk) / st + 1;
    if (OH < 1 || OW < 1)
        return np_err_set(err, NP_ERR_RANGE, "%s: a %" PRId64 "x%" PRId64 " window does not fit "
                          "%" PRId64 "x%" PRId64, nn_op_name(s->op), kk, kk, H, W);
    int64_t e = (int64_t)nn_dtype_size(dt);
    uint64_t ax, ay;
    int64_t big[4] = {N, C, H, W}, small[4] = {N, C, OH, OW};
    bool grad = s->op == NN_OP_MAXPOOL2D_GRAD || s->op == NN_OP_AVGPOOL2D_GRAD;
    /* channels-last buffers */
    kc_tensor tx, ty;
    if (kc_prog_bss(pr, "X", (uint64_t)(N * C * H * W * e), &ax, err) != NP_OK ||
        kc_prog_bss(pr, "Y", (uint64_t)(N * C * OH * OW * e), &ay, err) != NP_OK)
        return err->status;
    tx = (kc_tensor){ax, dt, 4, {big[0], big[1], big[2], big[3]},
                     {H * W * C * e, e, W * C * e, C * e}};
    ty = (kc_tensor){ay, dt, 4, {small[0], small[1], small[2], small[3]},
                     {OH * OW * C * e, e, OW * C * e, C * e}};
    if (!grad) {
        k->n_in = 1, k->n_out = 1, k->in[0] = tx, k->out[0] = ty;
        return NP_OK;
    }
    uint64_t adx;
    if (kc_prog_bss(pr, "DX", (uint64_t)(N * C * H * W * e), &adx, err) != NP_OK)
        return err->status;
    kc_tensor tdx = tx;
    tdx.addr = adx;
    k->n_out = 1, k->out[0] = tdx;
    if (s->op == NN_OP_MAXPOOL2D_GRAD)
        k->n_in = 2, k->in[0] = tx, k->in[1] = ty;
    else
        k->n_in = 1, k->in[0] = ty;
    return NP_OK;
}

/* ---- the table rows ----------------------------------------------------------------------- */

static const kc_attr_def kp_attrs[] = {
    {"kernel", KC_ATTR_INT, 2, 1, 255, "window side"},
    {"stride", KC_ATTR_INT, 0, 0, 255, "window step (0: the kernel)"},
    {"pad", KC_ATTR_INT, 0, 0, 127, "padding on every side (at most half the kernel)"},
    {"cblock", KC_ATTR_INT, 0, 0, 1048575, "tile: channels per tile (0: as many as fit)"},
};

#define KP_ROW(OP, def, nin, comp, text)                                                        \
    const kc_kernel_def def = {                                                                 \
        .op = OP, .n_in = nin, .n_out = 1,                                                      \
        .attrs = kp_attrs, .n_attrs = sizeof kp_attrs / sizeof kp_attrs[0],                     \
        .compile = comp, .reference = kp_reference, .from_node = kp_from_node,                  \
        .keys = kp_keys, .n_keys = sizeof kp_keys / sizeof kp_keys[0], .build = kp_build,       \
        .doc = text,                                                                            \
    }

KP_ROW(NN_OP_MAXPOOL2D, kc_maxpool2d_def, 1, maxpool_compile,
       "padded image tiles in the scratchpad; per output row a max over the window's taps");
KP_ROW(NN_OP_AVGPOOL2D, kc_avgpool2d_def, 1, avgpool_compile,
       "padded image tiles (fp32); per output row a sum over the taps, times 1 / k^2");
KP_ROW(NN_OP_MAXPOOL2D_GRAD, kc_maxpool2d_grad_def, 2, maxpool_grad_compile,
       "per output row the window's max again, then per tap in scan order the first equal "
       "element (compare, a free mask) adds dy into padded fp32 dx");
KP_ROW(NN_OP_AVGPOOL2D_GRAD, kc_avgpool2d_grad_def, 1, avgpool_grad_compile,
       "per output row dy / k^2 added into every tap of padded fp32 dx");
