/* kc_vec.c — the streaming tile engine of the vector kernels (see kc_vec.h). */
#include "kc_vec.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "kc_emit.h"

#define KV_MAX_ST (KV_MAX_IN + KV_MAX_OUT)
#define KV_MAX_GR (KV_MAX_ST + KV_MAX_POS)
#define KV_S1_LIMIT ((int64_t)1 << 24) /* dma.copy s1 strides: 24 bits */
#define KV_S2_LIMIT ((int64_t)1 << 27) /* s2: 27 bits */
#define KV_MAX_CNT 65535u              /* rows, cols (vpu), n1, n2 (dma) */
#define KV_MIN_TILE 32768u             /* elements: below this a copy pays its latency */
#define KV_TILES_PER_CORE 16u          /* the tiles a core's range is cut into, at least */

static uint64_t min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }
static uint64_t cdiv(uint64_t a, uint64_t b) { return (a + b - 1) / b; }
static uint64_t align64(uint64_t v) { return (v + 63) & ~(uint64_t)63; }

/* An input or output as the engine moves it. */
typedef struct kv_stream {
    const kc_tensor *t;
    bool out;
    isa_dtype dt;
    uint64_t e;
    int64_t s[KC_MAX_DIMS]; /* bytes per index of each canonical dim */
    int g;                  /* its register group */
    isa_bcast bcast;        /* its tile's layout */
    bool hoisted;           /* loaded once per core */
    int64_t sr, sc;         /* bytes per tile row and column */
    uint64_t off[2];        /* its buffers in the core's block, per parity */
    int over, over_req;     /* an output written over this input stream's buffers, else -1
                               (over_req: as the plan asks; over: this core) */
} kv_stream;

/* Operands that step alike share a register: its value is their position (bytes or, for a
 * position, elements) from the core's start, plus the core's own offset. */
typedef struct kv_group {
    int64_t s[KC_MAX_DIMS];
    bool nonzero;     /* else no register: r0 */
    unsigned reg, lag; /* lag: the previous tile's position, for its stores */
    bool has_out;
} kv_group;

typedef struct kv_level {
    uint64_t extent, t, nfull;
    bool shifted;
} kv_level;

typedef struct kv_state {
    kc_ctx *x;
    const kv_plan *p;
    int nd;
    int64_t shape[KC_MAX_DIMS];
    bool virt; /* one dim, cut into runs of rows x cols elements */
    int split;
    int whole; /* the canonical dim a tile covers whole, or -1 */
    uint64_t used;
    kv_stream st[KV_MAX_ST];
    int n_st;
    int64_t ps[KV_MAX_POS][KC_MAX_DIMS];
    int pos_g[KV_MAX_POS];
    kv_group gr[KV_MAX_GR];
    int n_gr;
    uint64_t target, budget; /* tile elements wanted; scratchpad bytes there are */
    uint64_t rows, cols, tl[KC_MAX_DIMS];
    kv_level lv[KC_MAX_DIMS];
    uint64_t base, tmp_off[2][KV_MAX_TMP];
    unsigned s_free[2], s_full[2], s_done[2], s_hoist;
    bool any_hoist;
    kce em;                      /* its copies' HBM bytes (em.x is x; em.mult the loops' trips) */
} kv_state;

/* ---- helpers for tile callbacks ------------------------------------------------------------- */

uint64_t kv_buf_elems(const kv_tile *t, isa_bcast b)
{
    switch (b) {
    case ISA_BCAST_ROW: return t->cols;
    case ISA_BCAST_COL: return t->rows;
    case ISA_BCAST_SCALAR: return 1;
    default: return t->rows * t->cols;
    }
}

void kv_binary(kc_ctx *x, const kv_tile *t, isa_op op, uint64_t dst, kv_buf a, kv_buf b)
{
    isa_insn in;
    isa_insn_init(&in, op);
    in.VPU_ADD.dst = isa_spad(0, dst), in.VPU_ADD.a = isa_spad(0, a.addr);
    in.VPU_ADD.b = isa_spad(0, b.addr);
    in.VPU_ADD.rows = isa_imm((int64_t)t->rows), in.VPU_ADD.cols = isa_imm((int64_t)t->cols);
    in.VPU_ADD.dtype = isa_enum(a.dt), in.VPU_ADD.bcast = isa_enum(b.bcast);
    isa_emit_insn(x->e, &in);
}

void kv_scalar(kc_ctx *x, const kv_tile *t, isa_op op, uint64_t dst, kv_buf a, float imm)
{
    isa_insn in;
    isa_insn_init(&in, op);
    in.VPU_ADDS.dst = isa_spad(0, dst), in.VPU_ADDS.a = isa_spad(0, a.addr);
    in.VPU_ADDS.imm = isa_f32(imm);
    in.VPU_ADDS.rows = isa_imm((int64_t)t->rows), in.VPU_ADDS.cols = isa_imm((int64_t)t->cols);
    in.VPU_ADDS.dtype = isa_enum(a.dt);
    isa_emit_insn(x->e, &in);
}

void kv_unary(kc_ctx *x, const kv_tile *t, isa_op op, uint64_t dst, kv_buf a)
{
    isa_insn in;
    isa_insn_init(&in, op);
    in.VPU_EXP.dst = isa_spad(0, dst), in.VPU_EXP.src = isa_spad(0, a.addr);
    in.VPU_EXP.rows = isa_imm((int64_t)t->rows), in.VPU_EXP.cols = isa_imm((int64_t)t->cols);
    in.VPU_EXP.dtype = isa_enum(a.dt);
    isa_emit_insn(x->e, &in);
}

void kv_cast(kc_ctx *x, const kv_tile *t, uint64_t dst, kv_buf a, isa_dtype to)
{
    uint64_t rows = a.bcast == ISA_BCAST_FULL ? t->rows : 1, cols = kv_buf_elems(t, a.bcast) / rows;
    ISA_EMIT(x->e, VPU_CAST, isa_spad(0, dst), isa_spad(0, a.addr), isa_imm((int64_t)rows),
             isa_imm((int64_t)cols), isa_enum(to), isa_enum(a.dt));
}

void kv_dense_pos(int ndim, const int64_t *shape, int64_t *stride)
{
    int64_t s = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        stride[d] = s;
        s *= shape[d];
    }
}

/* ---- planning ------------------------------------------------------------------------------- */

/* Strides of t over the space's dims (numpy broadcasting): 0 where t has no such dim or it
 * is 1. False when t does not broadcast to the space. */
static bool space_strides(const kv_plan *p, const kc_tensor *t, bool exact, int64_t *s)
{
    if (t->ndim > p->ndim || (exact && t->ndim != p->ndim))
        return false;
    for (int d = 0; d < p->ndim; d++) {
        int dt = d - (p->ndim - t->ndim);
        if (dt < 0 || t->shape[dt] == 1) {
            s[d] = 0;
            if (dt >= 0 && exact && p->shape[d] != 1)
                return false;
            continue;
        }
        if (t->shape[dt] != p->shape[d])
            return false;
        s[d] = t->stride[dt];
    }
    return true;
}

static bool same_tensor(const kc_tensor *a, const kc_tensor *b)
{
    if (a->addr != b->addr || a->dtype != b->dtype || a->ndim != b->ndim)
        return false;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d] || a->stride[d] != b->stride[d])
            return false;
    return true;
}

/* Drops dims of 1 and merges dims every operand and position steps through as one. */
static np_status canonicalize(kv_state *s)
{
    const kv_plan *p = s->p;
    int64_t raw[KV_MAX_ST][KC_MAX_DIMS];
    for (int i = 0; i < s->n_st; i++)
        if (!space_strides(p, s->st[i].t, s->st[i].out, raw[i]))
            return kc_fail(s->x, NP_ERR_INCONSISTENT, "%s %d does not %s the output's shape",
                           s->st[i].out ? "output" : "input",
                           s->st[i].out ? i - p->n_in : i,
                           s->st[i].out ? "have" : "broadcast to");
    /* inner to outer: keep a dim, or fold it into the one inside it */
    int n = 0;
    int64_t shape[KC_MAX_DIMS], st[KV_MAX_ST][KC_MAX_DIMS], ps[KV_MAX_POS][KC_MAX_DIMS];
    for (int d = p->ndim - 1; d >= 0; d--) {
        if (p->shape[d] == 1)
            continue;
        bool merge = n > 0 && d + 1 != p->whole - 1 && d != p->whole - 1;
        for (int i = 0; i < s->n_st && merge; i++)
            merge = raw[i][d] == st[i][n - 1] * shape[n - 1];
        for (int q = 0; q < p->n_pos && merge; q++)
            merge = p->pos_stride[q][d] == ps[q][n - 1] * shape[n - 1];
        if (merge) {
            shape[n - 1] *= p->shape[d];
            continue;
        }
        if (d == p->whole - 1)
            s->whole = n; /* inner-first for now */
        shape[n] = p->shape[d];
        for (int i = 0; i < s->n_st; i++)
            st[i][n] = raw[i][d];
        for (int q = 0; q < p->n_pos; q++)
            ps[q][n] = p->pos_stride[q][d];
        n++;
    }
    s->whole = p->whole && p->shape[p->whole - 1] > 1 ? s->whole : -1;
    if (s->whole >= 0 && n == 1) { /* the whole dim alone: rows of it, one row */
        shape[1] = 1;
        for (int i = 0; i < s->n_st; i++)
            st[i][1] = 0;
        for (int q = 0; q < p->n_pos; q++)
            ps[q][1] = 0;
        n = 2;
    }
    if (n == 0) { /* one element */
        shape[0] = 1;
        for (int i = 0; i < s->n_st; i++)
            st[i][0] = 0;
        for (int q = 0; q < p->n_pos; q++)
            ps[q][0] = 0;
        n = 1;
    }
    s->nd = n;
    for (int c = 0; c < n; c++) { /* back to outer-first */
        s->shape[c] = shape[n - 1 - c];
        for (int i = 0; i < s->n_st; i++)
            s->st[i].s[c] = st[i][n - 1 - c];
        for (int q = 0; q < p->n_pos; q++)
            s->ps[q][c] = ps[q][n - 1 - c];
    }
    s->virt = n == 1;
    if (s->whole >= 0) {
        s->whole = n - 1 - s->whole; /* outer-first */
        if (s->whole < n - 2)
            return kc_fail(s->x, NP_ERR_INCONSISTENT, "the operands' layout puts dim %d "
                           "outside the last two that a tile covers", p->whole - 1);
    }
    return NP_OK;
}

/* Outputs may overlap inputs only exactly, over a one-dim space; never each other. */
static np_status check_aliases(kv_state *s)
{
    const kv_plan *p = s->p;
    for (int o = 0; o < p->n_out; o++) {
        const kc_tensor *a = &p->out[o];
        uint64_t alo = a->addr, ahi = a->addr + kc_tensor_extent(a);
        for (int i = 0; i < p->n_in + o; i++) {
            const kc_tensor *b = i < p->n_in ? &p->in[i] : &p->out[i - p->n_in];
            uint64_t blo = b->addr, bhi = b->addr + kc_tensor_extent(b);
            if (ahi <= blo || bhi <= alo)
                continue;
            if (i >= p->n_in)
                return kc_fail(s->x, NP_ERR_INCONSISTENT, "outputs %d and %d overlap",
                               i - p->n_in, o);
            if (!same_tensor(a, b) || !s->virt)
                return kc_fail(s->x, NP_ERR_INCONSISTENT, "output %d overlaps input %d: an "
                               "output may only be an input itself (same address, shape, "
                               "strides and dtype) of dense operands", o, i);
        }
    }
    return NP_OK;
}

static isa_bcast layout_of(int64_t sr, int64_t sc)
{
    return !sr && !sc ? ISA_BCAST_SCALAR
           : !sr      ? ISA_BCAST_ROW
           : !sc      ? ISA_BCAST_COL
                      : ISA_BCAST_FULL;
}

/* Tile row and column strides of every stream for the tile shape chosen. */
static void set_layouts(kv_state *s)
{
    for (int i = 0; i < s->n_st; i++) {
        kv_stream *t = &s->st[i];
        if (s->virt)
            t->sc = t->s[0], t->sr = (int64_t)s->cols * t->s[0];
        else
            t->sc = t->s[s->nd - 1], t->sr = t->s[s->nd - 2];
        t->bcast = layout_of(t->sr, t->sc);
    }
}

/* Scratchpad bytes of one core's block for the tile shape (every input double-buffered
 * unless hoisted). */
static uint64_t block_bytes(const kv_state *s, uint64_t rows, uint64_t cols)
{
    uint64_t n = 0, full = rows * cols;
    for (int i = 0; i < s->n_st; i++) {
        const kv_stream *t = &s->st[i];
        if (t->over >= 0)
            continue;
        uint64_t el = t->bcast == ISA_BCAST_ROW ? cols : t->bcast == ISA_BCAST_COL ? rows
                      : t->bcast == ISA_BCAST_SCALAR ? 1 : full;
        n += (t->hoisted ? 1 : 2) * align64(el * t->e);
    }
    for (int i = 0; i < s->p->n_tmp; i++)
        n += 2 * align64(full * s->p->tmp_bytes[i]);
    return n;
}

/* Whether the DMA fields take the streams' strides for this tile shape; clears rows/cols to
 * 1 where they do not. */
static void fit_strides(const kv_state *s, uint64_t *rows, uint64_t *cols)
{
    for (int i = 0; i < s->n_st; i++) {
        const kv_stream *t = &s->st[i];
        int64_t sc = s->virt ? t->s[0] : t->s[s->nd - 1];
        int64_t sr = s->virt ? (int64_t)*cols * sc : t->s[s->nd - 2];
        bool inner_packed = sc == (int64_t)t->e || sc == 0;
        if (!inner_packed && *cols > 1 && sc >= KV_S1_LIMIT)
            *cols = 1;
        if (s->virt)
            sr = (int64_t)*cols * sc;
        if (*rows > 1 && sr) {
            bool packed = inner_packed && sc && sr == (int64_t)(*cols * t->e);
            int64_t lim = inner_packed ? KV_S1_LIMIT : KV_S2_LIMIT;
            if (!packed && sr >= lim) {
                if (s->virt && *cols > 1 && sc < lim)
                    *cols = (uint64_t)((lim - 1) / sc); /* a shorter run of rows fits */
                else
                    *rows = 1;
            }
        }
    }
}

/* Per-core extent of dim d (core c of used). */
static uint64_t core_extent(const kv_state *s, int d, uint64_t c, uint64_t *lo)
{
    uint64_t total = (uint64_t)s->shape[d];
    if (lo)
        *lo = 0;
    if (d != s->split)
        return total;
    uint64_t base = total / s->used, extra = total % s->used;
    if (lo)
        *lo = c * base + (c < extra ? c : extra);
    return base + (c < extra ? 1 : 0);
}

/* The tile of about target elements for dims of ext (the largest share of the split) and
 * ext_min (the smallest): tiles cut each dim into equal parts (so the shifted last one
 * overlaps little), a one-dim space into runs of rows x cols with cols up to 1024 (one tile:
 * exactly the run, if it has such a shape). */
static void tile_shape(const kv_state *s, uint64_t target, const uint64_t *ext,
                       const uint64_t *ext_min, uint64_t *rows_out, uint64_t *cols_out)
{
    uint64_t rows = 0, cols = 0;
    if (s->virt) {
        uint64_t e = ext[0], n_t = cdiv(e, target), tt = cdiv(e, n_t);
        if (n_t == 1 && e <= KV_MAX_CNT) {
            rows = 1, cols = e;
        } else if (n_t == 1) {
            uint64_t r0 = cdiv(e, KV_MAX_CNT);
            for (uint64_t r = r0; r <= min_u64(KV_MAX_CNT, r0 + 4096); r++)
                if (e % r == 0) {
                    rows = r, cols = e / r;
                    break;
                }
            if (!rows)
                tt = cdiv(e, 2);
        }
        if (!rows) {
            cols = min_u64(1024, tt);
            rows = min_u64(KV_MAX_CNT, cdiv(tt, cols));
        }
        if (rows * cols > ext_min[0]) { /* the smaller shares of the split */
            cols = min_u64(cols, ext_min[0]);
            rows = ext_min[0] / cols;
        }
    } else {
        uint64_t C = ext[s->nd - 1], R = ext[s->nd - 2];
        cols = min_u64(min_u64(C, KV_MAX_CNT), target);
        cols = cdiv(C, cdiv(C, cols));
        rows = min_u64(min_u64(R, KV_MAX_CNT), target / cols ? target / cols : 1);
        rows = cdiv(R, cdiv(R, rows));
        cols = min_u64(cols, ext_min[s->nd - 1]);
        rows = min_u64(rows, ext_min[s->nd - 2]);
        if (s->whole == s->nd - 1) {
            cols = min_u64(C, KV_MAX_CNT);
            rows = min_u64(min_u64(R, KV_MAX_CNT), target / C ? target / C : 1);
        }
        if (s->whole == s->nd - 2) {
            rows = min_u64(R, KV_MAX_CNT);
            cols = min_u64(min_u64(C, KV_MAX_CNT), target / R ? target / R : 1);
        }
    }
    fit_strides(s, &rows, &cols);
    *rows_out = rows, *cols_out = cols;
}

static np_status choose_tiles(kv_state *s)
{
    kc_ctx *x = s->x;
    const kc_place *pl = &x->k->place;
    uint64_t n_cores = pl->n_cores ? pl->n_cores : 1;
    /* the split: the outermost dim with a share for every core, else the largest */
    s->split = -1;
    for (int d = 0; d < s->nd && s->split < 0; d++)
        if ((uint64_t)s->shape[d] >= n_cores && d != s->whole)
            s->split = d;
    if (s->split < 0) {
        s->split = s->whole == 0 ? 1 : 0;
        for (int d = 1; d < s->nd; d++)
            if (s->shape[d] > s->shape[s->split] && d != s->whole)
                s->split = d;
    }
    s->used = min_u64(n_cores, (uint64_t)s->shape[s->split]);
    /* the tile target: a sixteenth of the largest share (at least KV_MIN_TILE) */
    uint64_t elems = 1;
    for (int d = 0; d < s->nd; d++)
        elems *= d == s->split ? cdiv((uint64_t)s->shape[d], s->used) : (uint64_t)s->shape[d];
    /* the scratchpad: the smallest free block of the placed cores (a small kernel takes
     * little of it: its tiles are a sixteenth of its elements, at least KV_MIN_TILE) */
    uint64_t budget = x->cfg->core.sram_bytes;
    for (uint32_t c = pl->core0; c < pl->core0 + n_cores; c++)
        budget = min_u64(budget, kc_spad_avail(x, c));
    uint64_t per_elem = 0;
    for (int i = 0; i < s->n_st; i++)
        per_elem += s->st[i].over >= 0 ? 0 : 2 * s->st[i].e;
    for (int i = 0; i < s->p->n_tmp; i++)
        per_elem += 2 * s->p->tmp_bytes[i];
    uint64_t t_max = budget / (per_elem ? per_elem : 1);
    uint64_t target = min_u64(elems, min_u64(t_max, elems / KV_TILES_PER_CORE > KV_MIN_TILE
                                                        ? elems / KV_TILES_PER_CORE
                                                        : KV_MIN_TILE));
    if (!target)
        target = 1;
    if (s->p->max_tile && target > s->p->max_tile)
        target = s->p->max_tile;
    s->target = target ? target : 1;
    s->budget = budget;
    return NP_OK;
}

/* Where the streams live for a tile of tl elements per dim over a core's extents ext: an
 * input whose tile never moves within the core is loaded once (hoisted: one buffer, not
 * two), and an output then gets buffers of its own instead of that input's (it would write
 * over what later tiles read). The fit check measures this layout, the one emit_core lays
 * out: hoisting can take more bytes than it saves (an update whose core share is one tile:
 * every input hoisted, every output its own double buffers). */
static void set_residency(kv_state *s, const uint64_t *ext, const uint64_t *tl)
{
    s->any_hoist = false;
    for (int i = 0; i < s->n_st; i++) {
        kv_stream *t = &s->st[i];
        t->hoisted = !t->out;
        for (int d = 0; d < s->nd && t->hoisted; d++)
            if (cdiv(ext[d], tl[d]) > 1 && t->s[d])
                t->hoisted = false;
        s->any_hoist = s->any_hoist || t->hoisted;
    }
    for (int i = 0; i < s->n_st; i++) {
        kv_stream *t = &s->st[i];
        t->over = t->over_req;
        if (t->over >= 0 && (s->st[t->over].hoisted || s->st[t->over].bcast != ISA_BCAST_FULL))
            t->over = -1;
    }
}

/* The elements of a tile along each canonical dim for rows x cols. */
static void tile_lengths(const kv_state *s, uint64_t rows, uint64_t cols, uint64_t *tl)
{
    for (int d = 0; d < s->nd; d++)
        tl[d] = 1;
    if (s->virt)
        tl[0] = rows * cols;
    else
        tl[s->nd - 1] = cols, tl[s->nd - 2] = rows;
}

/* Core c's tile (its shares are its own: tiles cut them evenly), the layouts of the streams
 * for it, and which inputs it loads once: the largest tile of at most the target whose
 * block, as emit_core lays it out, fits the scratchpad. */
static np_status core_tiles(kv_state *s, uint64_t c)
{
    kc_ctx *x = s->x;
    uint64_t ext[KC_MAX_DIMS], rows, cols, target = s->target;
    for (int d = 0; d < s->nd; d++)
        ext[d] = core_extent(s, d, c, NULL);
    for (;;) {
        tile_shape(s, target, ext, ext, &rows, &cols);
        s->cols = cols; /* the layouts of a one-dim space depend on cols */
        set_layouts(s);
        tile_lengths(s, rows, cols, s->tl);
        set_residency(s, ext, s->tl);
        if (block_bytes(s, rows, cols) <= s->budget || target == 1)
            break;
        target -= (target + 7) / 8;
    }
    s->rows = rows, s->cols = cols;
    if (s->whole >= 0 && s->tl[s->whole] != (uint64_t)s->shape[s->whole])
        return kc_fail(x, NP_ERR_RANGE, "a tile cannot hold the whole dim of %" PRId64
                       " elements it reduces (at most %u, in the scratchpad)",
                       s->shape[s->whole], KV_MAX_CNT);
    if (block_bytes(s, rows, cols) > s->budget)
        return kc_fail(x, NP_ERR_RANGE, "its tiles of %" PRIu64 " x %" PRIu64 " elements need %"
                       PRIu64 " scratchpad bytes, more than the %" PRIu64 " free", rows, cols,
                       block_bytes(s, rows, cols), s->budget);
    return NP_OK;
}

static np_status make_groups(kv_state *s)
{
    const kv_plan *p = s->p;
    int n = s->n_st + p->n_pos;
    for (int i = 0; i < n; i++) {
        const int64_t *v = i < s->n_st ? s->st[i].s : s->ps[i - s->n_st];
        int g = 0;
        while (g < s->n_gr && memcmp(s->gr[g].s, v, sizeof(int64_t) * (size_t)s->nd))
            g++;
        if (g == s->n_gr) {
            kv_group *ng = &s->gr[s->n_gr++];
            memset(ng, 0, sizeof *ng);
            memcpy(ng->s, v, sizeof(int64_t) * (size_t)s->nd);
            for (int d = 0; d < s->nd; d++)
                ng->nonzero = ng->nonzero || v[d];
        }
        if (i < s->n_st) {
            s->st[i].g = g;
            s->gr[g].has_out = s->gr[g].has_out || s->st[i].out;
        } else {
            s->pos_g[i - s->n_st] = g;
        }
    }
    return NP_OK;
}

/* ---- emitting ------------------------------------------------------------------------------- */

static void sem_wait(kv_state *s, isa_unit u, unsigned sem)
{
    kce_wait(&s->em, u, sem, 1);
}

static void sem_signal(kv_state *s, isa_unit u, unsigned sem)
{
    kce_signal(&s->em, u, sem, 1);
}

/* dma.copy of n2 x n1 x n0 elements of dt (strides equal to the packed layout left out). */
static void dma(kv_state *s, isa_opnd dst, isa_opnd src, isa_dtype dt, uint64_t n0, uint64_t n1,
                uint64_t n2, uint64_t ds1, uint64_t ss1, uint64_t ds2, uint64_t ss2)
{
    kce_dma(&s->em, dst, src, dt, n0, n1, n2, ds1, ss1, ds2, ss2);
}

/* One tile of stream t between its HBM place and its packed buffer at spad. */
static void move(kv_state *s, const kv_stream *t, uint64_t spad, isa_opnd hbm, bool store)
{
    isa_opnd sp = isa_spad(0, spad);
    isa_opnd dst = store ? hbm : sp, src = store ? sp : hbm;
    int64_t e = (int64_t)t->e, rows = (int64_t)s->rows, cols = (int64_t)s->cols;
    /* the HBM side's strides; the scratchpad side is packed */
    int64_t h1, h2, p1, p2;
    uint64_t n0, n1, n2;
    switch (t->bcast) {
    case ISA_BCAST_SCALAR: n0 = 1, n1 = 1, n2 = 1, h1 = p1 = h2 = p2 = 0; break;
    case ISA_BCAST_COL: n0 = 1, n1 = (uint64_t)rows, n2 = 1, h1 = t->sr, p1 = e, h2 = p2 = 0; break;
    case ISA_BCAST_ROW:
        if (t->sc == e)
            n0 = (uint64_t)cols, n1 = 1, n2 = 1, h1 = p1 = h2 = p2 = 0;
        else
            n0 = 1, n1 = (uint64_t)cols, n2 = 1, h1 = t->sc, p1 = e, h2 = p2 = 0;
        break;
    default:
        if (t->sc == e)
            n0 = (uint64_t)cols, n1 = (uint64_t)rows, n2 = 1, h1 = t->sr, p1 = cols * e,
            h2 = p2 = 0;
        else
            n0 = 1, n1 = (uint64_t)cols, n2 = (uint64_t)rows, h1 = t->sc, p1 = e, h2 = t->sr,
            p2 = cols * e;
        break;
    }
    dma(s, dst, src, t->dt, n0, n1, n2, store ? h1 : p1, store ? p1 : h1, store ? h2 : p2,
        store ? p2 : h2);
}

static uint64_t buf_of(const kv_state *s, const kv_stream *t, unsigned b)
{
    return s->base + t->off[t->hoisted ? 0 : b];
}

static isa_opnd hbm_at(const kv_state *s, const kv_stream *t, const int64_t *pos)
{
    return isa_hbm(s->gr[t->g].reg, (uint64_t)((int64_t)t->t->addr + pos[t->g]));
}

/* Stores the outputs of the tile in buffer set b, addressed by the lag registers. */
static void emit_stores(kv_state *s, unsigned b)
{
    sem_wait(s, ISA_UNIT_DMA, s->s_done[b]);
    for (int i = 0; i < s->n_st; i++)
        if (s->st[i].out)
            move(s, &s->st[i], buf_of(s, &s->st[i], b),
                 isa_hbm(s->gr[s->st[i].g].lag, s->st[i].t->addr), true);
    sem_signal(s, ISA_UNIT_DMA, s->s_free[b]);
}

/* One tile at static offsets pos (per group), in buffer set b. */
static void emit_tile(kv_state *s, const int64_t *pos, unsigned b, bool first)
{
    kc_ctx *x = s->x;
    const kv_plan *p = s->p;
    sem_wait(s, ISA_UNIT_DMA, s->s_free[b]);
    for (int i = 0; i < s->n_st; i++)
        if (!s->st[i].out && !s->st[i].hoisted)
            move(s, &s->st[i], buf_of(s, &s->st[i], b), hbm_at(s, &s->st[i], pos), false);
    sem_signal(s, ISA_UNIT_DMA, s->s_full[b]);
    if (!first)
        emit_stores(s, b ^ 1);
    for (int g = 0; g < s->n_gr; g++)
        if (s->gr[g].has_out && s->gr[g].lag)
            ISA_EMIT(x->e, ADDI, isa_reg(s->gr[g].lag), isa_reg(s->gr[g].reg), isa_imm(pos[g]));
    sem_wait(s, ISA_UNIT_VPU, s->s_full[b]);
    if (first && s->any_hoist)
        sem_wait(s, ISA_UNIT_VPU, s->s_hoist);
    kv_tile t;
    memset(&t, 0, sizeof t);
    t.rows = s->rows, t.cols = s->cols;
    for (int i = 0; i < s->n_st; i++) {
        kv_buf bf = {buf_of(s, &s->st[i], b), s->st[i].bcast, s->st[i].dt};
        if (s->st[i].out)
            t.out[i - p->n_in] = bf;
        else
            t.in[i] = bf;
    }
    for (int i = 0; i < p->n_tmp; i++)
        t.tmp[i] = s->base + s->tmp_off[b][i];
    for (int q = 0; q < p->n_pos; q++) {
        int g = s->pos_g[q];
        t.pos[q] = isa_val(s->gr[g].reg, pos[g]);
        t.pos_col[q] = s->virt ? s->ps[q][0] : s->ps[q][s->nd - 1];
        t.pos_row[q] = s->virt ? (int64_t)s->cols * s->ps[q][0] : s->ps[q][s->nd - 2];
    }
    p->tile(x, &t, p->ctx);
    sem_signal(s, ISA_UNIT_VPU, s->s_done[b]);
}

static uint64_t tiles_inside(const kv_state *s, int lv)
{
    uint64_t n = 1;
    for (int d = lv; d < s->nd; d++)
        n *= s->lv[d].nfull + (s->lv[d].shifted ? 1 : 0);
    return n;
}

static unsigned emit_level(kv_state *s, int lv, const int64_t *pos, bool first, unsigned b);

/* m iterations of level lv from static offsets pos (registers stepped by a loop). */
static unsigned emit_run(kv_state *s, int lv, const int64_t *pos, uint64_t m, unsigned b)
{
    if (!m)
        return b;
    const kv_level *L = &s->lv[lv];
    int64_t step[KV_MAX_GR];
    for (int g = 0; g < s->n_gr; g++)
        step[g] = (int64_t)L->t * s->gr[g].s[lv];
    if (m == 1)
        return emit_level(s, lv + 1, pos, false, b);
    bool odd = tiles_inside(s, lv + 1) & 1;
    uint64_t per = odd ? 2 : 1, iters = m / per;
    unsigned regs[KV_MAX_GR], n = 0;
    int64_t steps[KV_MAX_GR];
    for (int g = 0; g < s->n_gr; g++)
        if (s->gr[g].nonzero && step[g]) {
            regs[n] = s->gr[g].reg;
            steps[n++] = step[g] * (int64_t)per;
        }
    kc_loop l;
    kc_loop_begin(s->x, &l, iters, n, regs, steps);
    uint64_t saved = s->em.mult;
    s->em.mult *= iters;
    unsigned q = b;
    for (uint64_t k = 0; k < per; k++) {
        int64_t pk[KV_MAX_GR];
        for (int g = 0; g < s->n_gr; g++)
            pk[g] = pos[g] + (int64_t)k * step[g];
        q = emit_level(s, lv + 1, pk, false, q);
    }
    s->em.mult = saved;
    kc_loop_end(s->x, &l);
    if (per == 2 && m % 2) { /* the odd one out, registers back at the loop's start */
        int64_t pk[KV_MAX_GR];
        for (int g = 0; g < s->n_gr; g++)
            pk[g] = pos[g] + (int64_t)(m - 1) * step[g];
        q = emit_level(s, lv + 1, pk, false, q);
    }
    return q;
}

/* Level lv and the levels inside it at static offsets pos; first: its first iteration is
 * the core's first tile (peeled: it has no previous tile to store). Returns the parity. */
static unsigned emit_level(kv_state *s, int lv, const int64_t *pos, bool first, unsigned b)
{
    if (lv == s->nd) {
        emit_tile(s, pos, b, first);
        return b ^ 1;
    }
    const kv_level *L = &s->lv[lv];
    int64_t p1[KV_MAX_GR];
    uint64_t k0 = 0;
    if (first) {
        b = emit_level(s, lv + 1, pos, true, b);
        k0 = 1;
    }
    for (int g = 0; g < s->n_gr; g++)
        p1[g] = pos[g] + (int64_t)(k0 * L->t) * s->gr[g].s[lv];
    b = emit_run(s, lv, p1, L->nfull - k0, b);
    if (L->shifted) {
        for (int g = 0; g < s->n_gr; g++)
            p1[g] = pos[g] + (int64_t)(L->extent - L->t) * s->gr[g].s[lv];
        b = emit_level(s, lv + 1, p1, false, b);
    }
    return b;
}

/* Takes core c's resources and emits its share. */
static np_status emit_core(kv_state *s, uint64_t c)
{
    kc_ctx *x = s->x;
    const kv_plan *p = s->p;
    if (core_tiles(s, c) != NP_OK || kc_core(x, x->k->place.core0 + (uint32_t)c) != NP_OK)
        return kc_status(x);
    uint64_t lo = 0;
    for (int d = 0; d < s->nd; d++) {
        kv_level *L = &s->lv[d];
        L->extent = core_extent(s, d, c, d == s->split ? &lo : NULL);
        L->t = s->tl[d];
        L->nfull = L->extent / L->t;
        L->shifted = L->extent % L->t != 0;
    }
    /* scratchpad: every buffer in one block */
    uint64_t off = 0, full = s->rows * s->cols;
    for (int i = 0; i < s->n_st; i++) {
        kv_stream *t = &s->st[i];
        uint64_t el = t->bcast == ISA_BCAST_ROW ? s->cols : t->bcast == ISA_BCAST_COL ? s->rows
                      : t->bcast == ISA_BCAST_SCALAR ? 1 : full;
        if (t->over >= 0) {
            t->off[0] = s->st[t->over].off[0], t->off[1] = s->st[t->over].off[1];
            continue;
        }
        for (unsigned b = 0; b < (t->hoisted ? 1u : 2u); b++) {
            t->off[b] = off;
            off += align64(el * t->e);
        }
    }
    for (unsigned b = 0; b < 2; b++)
        for (int i = 0; i < p->n_tmp; i++) {
            s->tmp_off[b][i] = off;
            off += align64(full * p->tmp_bytes[i]);
        }
    kc_spad_alloc(x, off ? off : 64, 64, &s->base);
    for (int b = 0; b < 2; b++) {
        kc_sem_alloc(x, &s->s_free[b]);
        kc_sem_alloc(x, &s->s_full[b]);
        kc_sem_alloc(x, &s->s_done[b]);
    }
    if (s->any_hoist)
        kc_sem_alloc(x, &s->s_hoist);
    for (int g = 0; g < s->n_gr; g++) {
        kv_group *gr = &s->gr[g];
        gr->reg = gr->lag = 0;
        if (gr->nonzero)
            kc_reg_alloc(x, &gr->reg);
        if (gr->nonzero && gr->has_out)
            kc_reg_alloc(x, &gr->lag);
    }
    if (kc_status(x) != NP_OK)
        return kc_status(x);
    for (int g = 0; g < s->n_gr; g++)
        if (s->gr[g].reg)
            ISA_EMIT(x->e, LI, isa_reg(s->gr[g].reg), isa_imm((int64_t)lo * s->gr[g].s[s->split]));
    sem_signal(s, ISA_UNIT_DMA, s->s_free[0]);
    sem_signal(s, ISA_UNIT_DMA, s->s_free[1]);
    int64_t pos[KV_MAX_GR] = {0};
    if (s->any_hoist) {
        for (int i = 0; i < s->n_st; i++)
            if (s->st[i].hoisted)
                move(s, &s->st[i], buf_of(s, &s->st[i], 0), hbm_at(s, &s->st[i], pos), false);
        sem_signal(s, ISA_UNIT_DMA, s->s_hoist);
    }
    unsigned b = emit_level(s, 0, pos, true, 0);
    emit_stores(s, b ^ 1);
    sem_wait(s, ISA_UNIT_DMA, s->s_free[0]);
    sem_wait(s, ISA_UNIT_DMA, s->s_free[1]);
    return kc_status(x);
}

np_status kv_emit(kc_ctx *x, const kv_plan *p)
{
    kv_state s;
    memset(&s, 0, sizeof s);
    s.x = s.em.x = x, s.p = p;
    if (p->n_in > KV_MAX_IN || p->n_out > KV_MAX_OUT || p->n_out < 1 || p->n_pos > KV_MAX_POS ||
        p->n_tmp > KV_MAX_TMP)
        return kc_fail(x, NP_ERR_RANGE, "%d inputs, %d outputs, %d positions, %d scratch "
                       "tiles (at most %d, %d, %d, %d)", p->n_in, p->n_out, p->n_pos, p->n_tmp,
                       KV_MAX_IN, KV_MAX_OUT, KV_MAX_POS, KV_MAX_TMP);
    for (int i = 0; i < p->n_in + p->n_out; i++) {
        kv_stream *t = &s.st[s.n_st++];
        t->out = i >= p->n_in;
        t->t = t->out ? &p->out[i - p->n_in] : &p->in[i];
        t->dt = kc_isa_dtype(t->t->dtype);
        t->e = isa_dtype_size[t->dt];
        t->over = -1;
        if (t->out && p->out_over[i - p->n_in] > 0) {
            int j = p->out_over[i - p->n_in] - 1;
            if (j >= p->n_in || p->in[j].dtype != t->t->dtype)
                return kc_fail(x, NP_ERR_INTERNAL, "output %d over input %d of another dtype",
                               i - p->n_in, j);
            t->over = j;
        }
        t->over_req = t->over;
    }
    if (canonicalize(&s) != NP_OK || check_aliases(&s) != NP_OK || choose_tiles(&s) != NP_OK ||
        make_groups(&s) != NP_OK)
        return kc_status(x);
    unsigned regs = 0;
    for (int g = 0; g < s.n_gr; g++)
        regs += (s.gr[g].nonzero ? 1u : 0u) + (s.gr[g].nonzero && s.gr[g].has_out ? 1u : 0u);
    if (regs > ISA_N_REGS - 1)
        return kc_fail(x, NP_ERR_RANGE, "its operands step in %d different ways: %u registers "
                       "(at most %d)", s.n_gr, regs, ISA_N_REGS - 1);
    s.em.mult = 1;
    uint64_t rows0 = 0, cols0 = 0;
    for (uint64_t c = 0; c < s.used; c++) {
        if (emit_core(&s, c) != NP_OK)
            return kc_status(x);
        if (!c)
            rows0 = s.rows, cols0 = s.cols;
    }
    kc_result *r = x->res;
    r->cores = (uint32_t)s.used;
    r->hbm_read_bytes = s.em.rd;
    r->hbm_write_bytes = s.em.wr;
    char dims[96];
    size_t k = 0;
    for (int d = 0; d < s.nd && k < sizeof dims; d++)
        k += (size_t)snprintf(dims + k, sizeof dims - k, "%s%" PRId64, d ? " x " : "", s.shape[d]);
    snprintf(r->schedule, sizeof r->schedule, "%s over [%s], tiles %" PRIu64 " x %" PRIu64
             " double-buffered, %" PRIu64 " core%s", p->what ? p->what : "elementwise", dims,
             rows0, cols0, s.used, s.used == 1 ? "" : "s");
    return kc_status(x);
}
