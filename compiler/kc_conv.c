/* kc_conv.c — 2-D convolution through the kernel ABI: implicit im2col on the GEMM schedule
 * of kc_gemm_emit.c (docs/compiler.md, "conv2d").
 *
 * The GEMM of a group is M = OH x OW output pixels, N = O / groups filters, K = KH x KW x
 * C / groups window elements. No im2col matrix exists anywhere: per tile row, the input rows
 * its output rows need are staged once in the scratchpad (the block, zero-padded on every
 * side: padding is zeros in the scratchpad, never a padded copy in HBM), and each A slice is
 * gathered from the block by scratchpad-to-scratchpad dma.copy (kmm_conv in kc_gemm.h). It
 * takes the framework's layout — x NCHW, w OIHW, out NCHW — and channels-last (x NHWC, w as
 * [(kh, kw, c)][o] or [o][(kh, kw, c)], out NHWC): the block is channel-major or
 * channels-last as the input is, and K runs over the window in the input's order ((c, kh, kw)
 * or (kh, kw, c)), which the weights must share. Groups (and depthwise) are a batch loop.
 * This file has the checks, the geometry, the plan, the framework reference, the `npusim
 * kernel --op` keys and the table row. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "kc_gemm.h"

#define min_u64 kmm_min
#define cdiv kmm_cdiv

/* ---- the geometry ------------------------------------------------------------------------- */

uint64_t kmm_run_base(const kmm_conv *g, uint64_t u)
{
    if (!g->cm) { /* runs: r (an (s, c) row of the window), or (r, s) with a dilation */
        if (g->dw == 1)
            return u * g->dh * g->wp * g->c;
        return ((u / g->s) * g->dh * g->wp + (u % g->s) * g->dw) * g->c;
    }
    if (g->dw == 1) /* runs: (c, r) (an s row), or (c, r, s) with a dilation */
        return ((u / g->r) * g->rb + (u % g->r) * g->dh) * g->wp;
    uint64_t cr = u / g->s;
    return ((cr / g->r) * g->rb + (cr % g->r) * g->dh) * g->wp + (u % g->s) * g->dw;
}

uint64_t kmm_block_rows(const kmm_conv *g, uint64_t i0, uint64_t tm)
{
    uint64_t span = (i0 + tm - 1) / g->f_out - i0 / g->f_out; /* output rows - 1 */
    return span * g->sh + (g->r - 1) * g->dh + 1;
}

uint64_t kmm_block_rows_max(const kmm_conv *g, uint64_t tm)
{
    uint64_t span = min_u64(g->e_out - 1, tm > 1 ? cdiv(tm - 1, g->f_out) : 0);
    return span * g->sh + (g->r - 1) * g->dh + 1;
}

uint64_t kmm_stage_bytes(const kmm_conv *g, uint64_t tm, uint64_t e)
{
    return kmm_block_rows_max(g, tm) * g->wp * g->c * e;
}

/* ---- the kernel --------------------------------------------------------------------------- */

/* A dim of `size` elements has byte stride `want`, or does not matter (size 1). */
static bool fits(int64_t stride, int64_t want, int64_t size) { return size == 1 || stride == want; }

/* The stride of a linear index over dims (innermost first) of extents ext and strides st: the
 * stride of the first dim longer than 1 (*lin false when they are not one linear index). */
static int64_t linear(const int64_t *st, const int64_t *ext, int n, bool *lin)
{
    int64_t unit = 0, span = 1;
    *lin = true;
    for (int i = 0; i < n; i++) {
        if (ext[i] == 1)
            continue;
        if (!unit)
            unit = st[i];
        *lin = *lin && st[i] == unit * span;
        span *= ext[i];
    }
    return unit;
}

/* Whether w (strides ws of [O, Cg, R, S]) holds each filter's window in x's order —
 * (c, kh, kw) when cm, else (kh, kw, c) — in one stride, as B's columns ([o][window]: *b_cols)
 * or rows ([window][o]), B's leading dimension *ldb bytes. */
static bool w_window(const int64_t *ws, int64_t O, int64_t Cg, int64_t R, int64_t S, int64_t e,
                     bool cm, bool *b_cols, int64_t *ldb)
{
    int64_t kst[3] = {ws[1], ws[3], ws[2]}, kex[3] = {Cg, S, R}; /* (kh, kw, c): c innermost */
    if (cm) /* (c, kh, kw): kw innermost */
        kst[0] = ws[3], kst[1] = ws[2], kst[2] = ws[1], kex[0] = S, kex[1] = R, kex[2] = Cg;
    bool lin;
    int64_t ek = linear(kst, kex, 3, &lin), Kg = R * S * Cg;
    if (lin && Kg > 1 && ek == e) /* [o][window] */
        *b_cols = true, *ldb = O > 1 ? ws[0] : Kg * e;
    else if (lin && fits(ws[0], e, O)) /* [window][o] */
        *b_cols = false, *ldb = Kg > 1 ? ek : O * e;
    else if (Kg == 1)
        *b_cols = true, *ldb = ws[0];
    else
        return false;
    return true;
}

/* Whether K's slices of TK repeat in the block: every slice's runs sit where the first
 * slice's do, shifted by the same step (*step, bytes), so a loop can step one register. */
static bool slices_regular(const kmm *m, int64_t *step)
{
    const kmm_conv *g = &m->cv;
    if (m->TK % g->unit || m->TK >= m->K) {
        *step = 0;
        return m->TK >= m->K;
    }
    uint64_t q = m->TK / g->unit;
    int64_t d = (int64_t)kmm_run_base(g, q) - (int64_t)kmm_run_base(g, 0);
    for (uint64_t u = 0; u + q < g->runs; u++)
        if ((int64_t)kmm_run_base(g, u + q) - (int64_t)kmm_run_base(g, u) != d)
            return false;
    *step = d * (int64_t)m->e;
    return true;
}

#define FIELD_N0 (1u << 20)
#define FIELD_N (1u << 16)
#define FIELD_S1 (1u << 24)
#define FIELD_S2 (1u << 27)

/* conv2d: in[0] x [N, C, H, W], in[1] w [O, C / groups, KH, KW], out [N, O, OH, OW]. */
static np_status conv2d_compile(kc_ctx *x)
{
    const kc_kernel *k = x->k;
    const kc_tensor *X = &k->in[0], *Wt = &k->in[1], *Y = &k->out[0];
    kmm m;
    memset(&m, 0, sizeof m);
    m.x = x, m.em.x = x;
    if (X->ndim != 4 || Wt->ndim != 4 || Y->ndim != 4)
        return kc_fail(x, NP_ERR_INCONSISTENT, "x, w and out must be 4-D ([N, C, H, W], "
                       "[O, C/groups, KH, KW], [N, O, OH, OW])");
    if (X->dtype != Wt->dtype)
        return kc_fail(x, NP_ERR_INCONSISTENT, "x is %s, w %s: the array multiplies one type",
                       nn_dtype_name(X->dtype), nn_dtype_name(Wt->dtype));
    m.dt = kc_isa_dtype(X->dtype), m.cdt = kc_isa_dtype(Y->dtype);
    m.e = isa_dtype_size[m.dt], m.ce = isa_dtype_size[m.cdt];
    if (!(isa_emit_program(x->e)->target.dtypes & (1u << m.dt)))
        return kc_fail(x, NP_ERR_INCONSISTENT, "the array does not multiply %s",
                       isa_dtype_names[m.dt]);
    int64_t sh = kc_attr_int(x, "stride"), sw = kc_attr_int(x, "stride_w");
    int64_t ph = kc_attr_int(x, "pad"), pw = kc_attr_int(x, "pad_w");
    int64_t dh = kc_attr_int(x, "dilation"), dw = kc_attr_int(x, "dilation_w");
    int64_t G = kc_attr_int(x, "groups");
    sw = sw ? sw : sh, pw = pw >= 0 ? pw : ph, dw = dw ? dw : dh;
    int64_t N = X->shape[0], C = X->shape[1], H = X->shape[2], W = X->shape[3];
    int64_t O = Wt->shape[0], Cg = Wt->shape[1], R = Wt->shape[2], S = Wt->shape[3];
    if (C % G || O % G || Cg * G != C)
        return kc_fail(x, NP_ERR_INCONSISTENT, "x has %" PRId64 " channels and w %" PRId64
                       " filters of %" PRId64 " channels: not %" PRId64 " groups", C, O, Cg, G);
    int64_t eh = H + 2 * ph - dh * (R - 1) - 1, ew = W + 2 * pw - dw * (S - 1) - 1;
    if (eh < 0 || ew < 0)
        return kc_fail(x, NP_ERR_INCONSISTENT, "a %" PRId64 "x%" PRId64 " filter (dilation %"
                       PRId64 "x%" PRId64 ") does not fit the %" PRId64 "x%" PRId64 " input "
                       "padded by %" PRId64 "x%" PRId64, R, S, dh, dw, H, W, ph, pw);
    int64_t E = eh / sh + 1, F = ew / sw + 1;
    if (Y->shape[0] != N || Y->shape[1] != O || Y->shape[2] != E || Y->shape[3] != F)
        return kc_fail(x, NP_ERR_INCONSISTENT, "out must be [%" PRId64 ", %" PRId64 ", %" PRId64
                       ", %" PRId64 "]", N, O, E, F);
    /* layouts: x channels-last or channel-major; w's window in x's order; out either */
    int64_t e = (int64_t)m.e, ce = (int64_t)m.ce;
    const int64_t *xs = X->stride, *ws = Wt->stride, *ys = Y->stride;
    bool cl = fits(xs[1], e, C) && fits(xs[3], C * e, W) && fits(xs[2], W * C * e, H);
    bool cm = fits(xs[3], e, W) && fits(xs[2], W * e, H) && fits(xs[1], H * W * e, C);
    if (!cl && !cm)
        return kc_fail(x, NP_ERR_INCONSISTENT, "x must be NCHW (strides C %" PRId64 ", H %"
                       PRId64 ", W %" PRId64 " bytes) or channels-last (NHWC in memory: C %"
                       PRId64 ", H %" PRId64 ", W %" PRId64 ")", H * W * e, W * e, e, e,
                       W * C * e, C * e);
    int64_t Kg = R * S * Cg, Ng = O / G;
    /* x both (one pixel): the order w's window is in */
    m.cv.cm = !cl || (cm && !w_window(ws, O, Cg, R, S, e, false, &m.b_cols, &m.ldb));
    if (!w_window(ws, O, Cg, R, S, e, m.cv.cm, &m.b_cols, &m.ldb))
        return kc_fail(x, NP_ERR_INCONSISTENT, "w must hold each filter's window in x's order, "
                       "%s, in one stride: as [%s][o] or [o][%s]", m.cv.cm ? "(c, kh, kw)"
                       : "(kh, kw, c)", m.cv.cm ? "(c, kh, kw)" : "(kh, kw, c)",
                       m.cv.cm ? "(c, kh, kw) (OIHW)" : "(kh, kw, c)");
    int64_t ps = F > 1 ? ys[3] : E > 1 ? ys[2] : ce; /* bytes from one output pixel to the next */
    if (!fits(ys[2], F * ps, E))
        return kc_fail(x, NP_ERR_INCONSISTENT, "out's pixels must follow one another (OH stride "
                       "%" PRId64 " = OW x the OW stride %" PRId64 ")", ys[2], ps);
    if (fits(ys[1], ce, O))
        m.c_cols = false, m.ldc = ps;
    else if (ps == ce || E * F == 1)
        m.c_cols = true, m.ldc = ys[1];
    else
        return kc_fail(x, NP_ERR_INCONSISTENT, "out must be NCHW or channels-last (NHWC in "
                       "memory)");
    m.M = (uint64_t)(E * F), m.N = (uint64_t)Ng, m.K = (uint64_t)Kg;
    m.ak = KMM_A_CONV;
    m.a_base = X->addr, m.b_base = Wt->addr, m.c_base = Y->addr;
    kmm_conv *g = &m.cv;
    g->h = (uint64_t)H, g->w = (uint64_t)W, g->c = (uint64_t)Cg, g->ctot = (uint64_t)C;
    g->r = (uint64_t)R, g->s = (uint64_t)S, g->sh = (uint64_t)sh, g->sw = (uint64_t)sw;
    g->dh = (uint64_t)dh, g->dw = (uint64_t)dw, g->ph = (uint64_t)ph, g->pw = (uint64_t)pw;
    g->e_out = (uint64_t)E, g->f_out = (uint64_t)F;
    g->unit = g->cm ? (dw == 1 ? (uint64_t)S : 1) : (dw == 1 ? (uint64_t)(S * Cg) : (uint64_t)Cg);
    g->runs = m.K / g->unit;
    g->wp = (uint64_t)((F - 1) * sw + (S - 1) * dw + 1);
    g->wcopy = g->wp > (uint64_t)pw ? min_u64((uint64_t)W, g->wp - (uint64_t)pw) : 0;
    g->pix_step = g->cm ? (uint64_t)sw : (uint64_t)(sw * Cg);
    g->row_step = (uint64_t)sh * g->wp * (g->cm ? 1 : (uint64_t)Cg);
    g->xrow = (uint64_t)(g->cm ? W * e : W * C * e);
    g->xchan = (uint64_t)(g->cm ? H * W * e : e);
    /* batches: images, then groups (each its channels, filters and output channels) */
    int nb = 0;
    if (N > 1) {
        m.bcount[nb] = (uint64_t)N, m.bsa[nb] = xs[0], m.bsb[nb] = 0, m.bsc[nb] = ys[0];
        m.eg.bdims[nb] = 0, m.eg.bmul[nb] = 1, nb++;
    }
    if (G > 1) {
        m.bcount[nb] = (uint64_t)G, m.bsa[nb] = Cg * (int64_t)g->xchan, m.bsb[nb] = Ng * ws[0];
        m.bsc[nb] = Ng * ys[1];
        m.eg.bdims[nb] = 1, m.eg.bmul[nb] = Ng, nb++;
    }
    m.nb = nb;
    /* the epilogue sees out's dims [N, O, OH, OW]: GEMM rows are pixels (ow; oh = F pixels) */
    m.eg.nd = 4, m.eg.nbd = nb, m.eg.mdim = 3, m.eg.ndim = 1, m.eg.mouter = 2;
    m.eg.ratio = F;
    /* the block's rows for the tile rows the cost model considers: set per candidate */
    g->rb = kmm_block_rows_max(g, m.M);
    if (kmm_plan_tiles(&m) != NP_OK)
        return kc_status(x);
    g->rb = kmm_block_rows_max(g, min_u64(m.TM, m.M));
    /* dma.copy and vpu.fill fields: counts n0 20 bits, n1 and n2 16, strides s1 24, s2 27 */
    uint64_t tm_max = min_u64(m.TM, m.M), ue = m.e;
    bool ok = g->unit < FIELD_N0 && min_u64((uint64_t)F, tm_max) < FIELD_N &&
              tm_max / (uint64_t)F < FIELD_N && g->pix_step * ue < FIELD_S1 &&
              m.TK * ue < FIELD_S1 && g->row_step * ue < FIELD_S2 &&
              (uint64_t)F * m.TK * ue < FIELD_S2 && g->rb < FIELD_N && g->wp < FIELD_N &&
              g->xrow < FIELD_S1 && g->wp * g->c * ue < FIELD_S1 &&
              (!g->cm || (g->wcopy < FIELD_N0 && g->c < FIELD_N && g->xchan < FIELD_S2 &&
                          g->rb * g->wp * ue < FIELD_S1)) &&
              (g->cm || G > 1 || g->wcopy * g->c < FIELD_N0) &&
              (g->cm || G == 1 || (g->c < FIELD_N0 && g->wcopy < FIELD_N &&
                                   g->ctot * ue < FIELD_S1));
    if (!ok)
        return kc_fail(x, NP_ERR_RANGE, "too large for the fields of the staging and gather "
                       "copies (dma.copy counts of 20 and 16 bits, strides of 24 and 27)");
    m.m_regular = m.TM % (uint64_t)F == 0;
    m.k_regular = slices_regular(&m, &g->kstep);
    kmm_plan_result(&m, (uint64_t)(N * G));
    return kmm_emit(&m);
}

/* ---- the framework's computation (for checks) ---------------------------------------------- */

static int64_t attr_or(const kc_kernel *k, const char *name, int64_t dflt)
{
    const kc_attr *a = kc_kernel_attr(k, name);
    return a ? a->i : dflt;
}

static np_status conv2d_reference(nn_graph *g, const kc_kernel *k, nn_tensor *const *in,
                                  nn_tensor **out, np_err *err)
{
    int64_t s = attr_or(k, "stride", 1), sw = attr_or(k, "stride_w", 0);
    int64_t p = attr_or(k, "pad", 0), pw = attr_or(k, "pad_w", -1);
    int64_t d = attr_or(k, "dilation", 1), dw = attr_or(k, "dilation_w", 0);
    if ((sw && sw != s) || (pw >= 0 && pw != p) || (dw && dw != d))
        return np_err_set(err, NP_ERR_INCONSISTENT, "conv2d: the framework's conv2d has one "
                          "stride, pad and dilation for both dims (stride %" PRId64 "/%" PRId64
                          ", pad %" PRId64 "/%" PRId64 ", dilation %" PRId64 "/%" PRId64 ")", s,
                          sw, p, pw, d, dw);
    return kmm_ref_status(g, out, nn_conv2d(g, in[0], in[1], (int)s, (int)p, (int)d,
                                            (int)attr_or(k, "groups", 1)), err);
}

/* conv2d's node parameters (framework/op_linalg.c): ip[0] stride, ip[1] pad, ip[2] dilation,
 * ip[3] groups (one of each for both dims). */
static np_status conv2d_from_node(const nn_tensor *t, kc_kernel *k, np_err *err)
{
    if (k->n_attrs + 4 > KC_MAX_ATTRS)
        return np_err_set(err, NP_ERR_RANGE, "conv2d: no room for its attributes");
    k->attrs[k->n_attrs++] = KC_INT("stride", t->ip[0]);
    k->attrs[k->n_attrs++] = KC_INT("pad", t->ip[1]);
    k->attrs[k->n_attrs++] = KC_INT("dilation", t->ip[2]);
    k->attrs[k->n_attrs++] = KC_INT("groups", t->ip[3]);
    return NP_OK;
}

/* ---- `npusim kernel --op` ------------------------------------------------------------------- */

static const kc_attr_def conv2d_keys[] = {
    {"n", KC_ATTR_INT, 1, 1, 65536, "images"},
    {"h", KC_ATTR_INT, KC_REQUIRED, 1, 1048576, "input height"},
    {"w", KC_ATTR_INT, KC_REQUIRED, 1, 1048576, "input width"},
    {"c", KC_ATTR_INT, KC_REQUIRED, 1, 1048576, "input channels"},
    {"k", KC_ATTR_INT, KC_REQUIRED, 1, 1048576, "output channels (filters)"},
    {"r", KC_ATTR_INT, KC_REQUIRED, 1, 65535, "filter height"},
    {"s", KC_ATTR_INT, KC_REQUIRED, 1, 65535, "filter width"},
    {"dtype", KC_ATTR_DTYPE, NN_BF16, 0, 0,
     "input and filter type (the output's too; int8 gives int32)"},
    {"nchw", KC_ATTR_BOOL, 0, 0, 1, "1: the framework's layout (x NCHW, w OIHW, out NCHW); 0: "
     "channels-last (x NHWC, w [(kh, kw, c)][o], out NHWC)"},
};

static np_status conv2d_build(kc_prog *p, const kc_spec *s, kc_kernel *k, np_err *err)
{
    nn_dtype dt = (nn_dtype)kmm_spec_i(s, "dtype"), od = dt == NN_I8 ? NN_I32 : dt;
    int64_t N = kmm_spec_i(s, "n"), H = kmm_spec_i(s, "h"), W = kmm_spec_i(s, "w"),
            C = kmm_spec_i(s, "c"), O = kmm_spec_i(s, "k"), R = kmm_spec_i(s, "r"),
            S = kmm_spec_i(s, "s"), G = kmm_spec_i(s, "groups");
    int64_t sh = kmm_spec_i(s, "stride"), sw = kmm_spec_i(s, "stride_w");
    int64_t ph = kmm_spec_i(s, "pad"), pw = kmm_spec_i(s, "pad_w");
    int64_t dh = kmm_spec_i(s, "dilation"), dw = kmm_spec_i(s, "dilation_w");
    sw = sw ? sw : sh, pw = pw >= 0 ? pw : ph, dw = dw ? dw : dh;
    if (C % G || O % G)
        return np_err_set(err, NP_ERR_RANGE, "conv2d: %" PRId64 " groups do not divide c = %"
                          PRId64 " and k = %" PRId64, G, C, O);
    int64_t E = (H + 2 * ph - dh * (R - 1) - 1) / sh + 1,
            F = (W + 2 * pw - dw * (S - 1) - 1) / sw + 1;
    if (H + 2 * ph - dh * (R - 1) - 1 < 0 || W + 2 * pw - dw * (S - 1) - 1 < 0)
        return np_err_set(err, NP_ERR_RANGE, "conv2d: a %" PRId64 "x%" PRId64 " filter does not "
                          "fit a %" PRId64 "x%" PRId64 " input", R, S, H, W);
    int64_t e = (int64_t)nn_dtype_size(dt), ce = (int64_t)nn_dtype_size(od), Cg = C / G;
    uint64_t ax, aw, ay;
    if (kc_prog_bss(p, "X", (uint64_t)(N * H * W * C * e), &ax, err) != NP_OK ||
        kc_prog_bss(p, "W", (uint64_t)(R * S * Cg * O * e), &aw, err) != NP_OK ||
        kc_prog_bss(p, "Y", (uint64_t)(N * E * F * O * ce), &ay, err) != NP_OK)
        return err->status;
    k->n_in = 2, k->n_out = 1;
    if (kmm_spec_i(s, "nchw")) {
        kc_tensor_dense(&k->in[0], ax, dt, 4, (int64_t[]){N, C, H, W});
        kc_tensor_dense(&k->in[1], aw, dt, 4, (int64_t[]){O, Cg, R, S});
        kc_tensor_dense(&k->out[0], ay, od, 4, (int64_t[]){N, O, E, F});
        return NP_OK;
    }
    k->in[0] = (kc_tensor){ax, dt, 4, {N, C, H, W}, {H * W * C * e, e, W * C * e, C * e}};
    k->in[1] = (kc_tensor){aw, dt, 4, {O, Cg, R, S}, {e, O * e, S * Cg * O * e, Cg * O * e}};
    k->out[0] = (kc_tensor){ay, od, 4, {N, O, E, F}, {E * F * O * ce, ce, F * O * ce, O * ce}};
    return NP_OK;
}

/* ---- the table row -------------------------------------------------------------------------- */

static const kc_attr_def conv2d_attrs[] = {
    {"stride", KC_ATTR_INT, 1, 1, 65535, "vertical stride (and horizontal unless stride_w)"},
    {"stride_w", KC_ATTR_INT, 0, 0, 65535, "horizontal stride (0: stride)"},
    {"pad", KC_ATTR_INT, 0, 0, 65535,
     "zero padding above and below (and left and right unless pad_w)"},
    {"pad_w", KC_ATTR_INT, -1, -1, 65535, "zero padding left and right (-1: pad)"},
    {"dilation", KC_ATTR_INT, 1, 1, 65535,
     "filter dilation, vertical (and horizontal unless dilation_w)"},
    {"dilation_w", KC_ATTR_INT, 0, 0, 65535, "horizontal filter dilation (0: dilation)"},
    {"groups", KC_ATTR_INT, 1, 1, 1048576, "channel groups (groups = channels: depthwise)"},
    KMM_TILE_ATTRS,
};

const kc_kernel_def kc_conv2d_def = {
    .op = NN_OP_CONV2D, .flags = KC_DEF_EPILOGUE, .n_in = 2, .n_out = 1,
    .attrs = conv2d_attrs, .n_attrs = sizeof conv2d_attrs / sizeof conv2d_attrs[0],
    .compile = conv2d_compile,
    .keys = conv2d_keys, .n_keys = sizeof conv2d_keys / sizeof conv2d_keys[0],
    .build = conv2d_build,
    .reference = conv2d_reference,
    .from_node = conv2d_from_node,
    .doc = "implicit im2col: per tile row the input rows it needs staged zero-padded in the "
           "scratchpad, each A slice gathered from them by DMA, on the GEMM schedule of matmul; "
           "groups as a batch loop",
};
