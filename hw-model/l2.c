/* l2.c — the L2 cache's tags, fills and waiters (see l2.h).
 *
 * The tag store is a set of parallel arrays indexed by way slot (set x ways + way): the tags of
 * one set lie together, so a lookup reads l2_ways consecutive words; the rest of a line's state
 * is touched only for the way that hits or is replaced. A tag is the line number's quotient by
 * the sets + 1 (0: an empty way), in 32 bits (l2_create checks that every address's fits). LRU
 * is a stamp per way from a 32-bit counter that every access advances; when it would wrap, the
 * stamps of each set are renumbered by their order (l2_renumber), which keeps every order.
 *
 * Fill records live in a pool: a line holds (record + 1, its generation); a record's
 * generation advances when it completes, so a line naming an older generation is no longer
 * pending, and no line needs to be visited when a fill completes. */
#include "l2.h"

#include <stdlib.h>
#include <string.h>

#define NONE UINT32_MAX

typedef struct l2_fill {
    uint32_t gen;          /* advances when the record completes */
    uint32_t parts;        /* HBM parts still running */
    uint32_t waiters;      /* first waiter (NONE: none), in arrival order via tail */
    uint32_t tail;
    uint32_t next_free;
    bool live;
    uint64_t owner;        /* the walk that made it (its token) */
    uint64_t last_waiter;  /* the token of the last walk that waits for it */
    l2_done_fn done;       /* the owner's completion */
    void *ctx;
    uint64_t arg;
} l2_fill;

typedef struct l2_waiter {
    l2_done_fn done;
    void *ctx;
    uint64_t arg;
    uint32_t next;
} l2_waiter;

/* A line's state but its tag and LRU stamp (a way slot's, together in one cache line). */
typedef struct l2_line {
    uint32_t valid, dirty, pend; /* sector masks; pend: brought by the line's fill */
    uint32_t fill;               /* record + 1 of the line's latest fill (0: none) */
    uint32_t fgen;               /* that record's generation */
    uint32_t pad_;
} l2_line;

struct l2 {
    uint64_t line, sector, ways, sets, slices;
    uint32_t spl;           /* sectors per line */
    uint64_t il, nch;       /* partitions: HBM interleave and channels */
    uint32_t nparts;
    uint32_t *tag;          /* per way slot: line / sets + 1, 0 empty */
    uint32_t *stamp;        /* last access */
    l2_line *st;            /* the rest of its state */
    uint32_t clock;
    uint32_t *rank;         /* l2_renumber's copy of a set's stamps */
    uint64_t token;
    l2_fill *f;
    uint32_t nf, capf, freef;
    l2_waiter *wt;
    uint32_t nw, capw, freew;
    uint32_t *slice_mark, slice_epoch;
    double *pr, *pwr, *pf, *pw; /* per partition: a walk's reads, writes, fills, write-backs */
    uint64_t dirty_sectors, valid_sectors;
    l2_figures fig;
};

static unsigned pop(uint32_t m)
{
    m = m - ((m >> 1) & 0x55555555u);
    m = (m & 0x33333333u) + ((m >> 2) & 0x33333333u);
    return (((m + (m >> 4)) & 0x0f0f0f0fu) * 0x01010101u) >> 24;
}

void l2_free(l2 *c)
{
    if (!c)
        return;
    free(c->tag);
    free(c->stamp);
    free(c->st);
    free(c->rank);
    free(c->f);
    free(c->wt);
    free(c->slice_mark);
    free(c->pr);
    free(c->pwr);
    free(c->pf);
    free(c->pw);
    free(c);
}

np_status l2_create(const arch_config *cfg, uint32_t partitions, l2 **out, np_err *err)
{
    *out = NULL;
    const arch_chip *h = &cfg->chip;
    l2 *c = calloc(1, sizeof *c);
    if (!c)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory creating the L2");
    c->line = (uint64_t)h->l2_line_bytes;
    c->sector = (uint64_t)h->l2_sector_bytes;
    c->spl = (uint32_t)(c->line / c->sector);
    c->ways = (uint64_t)h->l2_ways;
    c->sets = h->l2_bytes / c->line / c->ways;
    c->slices = (uint64_t)h->l2_slices;
    c->il = (uint64_t)h->hbm_interleave_bytes;
    c->nch = (uint64_t)h->hbm_channels;
    c->nparts = partitions;
    /* the largest tag: the last line of the HBM and of what follows it (a buffer's addresses
     * do not reach the cache, but a bound that holds for any address is simplest) */
    uint64_t top = (h->hbm_bytes + h->l2_bytes) / c->line / c->sets + 1;
    if (c->sets && top >= UINT32_MAX) {
        uint64_t sets = c->sets;
        free(c);
        return np_err_set(err, NP_ERR_RANGE, "the L2's %llu sets are too few for 32-bit tags "
                          "over chip.hbm_bytes: give it more sets (fewer chip.l2_ways or more "
                          "chip.l2_bytes)", (unsigned long long)sets);
    }
    size_t n = (size_t)(c->sets * c->ways);
    c->tag = calloc(n, sizeof *c->tag);
    c->stamp = calloc(n, sizeof *c->stamp);
    c->st = calloc(n, sizeof *c->st);
    c->rank = calloc((size_t)c->ways, sizeof *c->rank);
    c->slice_mark = calloc((size_t)c->slices, sizeof *c->slice_mark);
    size_t np = partitions ? partitions : 1;
    c->pr = calloc(np, sizeof *c->pr);
    c->pwr = calloc(np, sizeof *c->pwr);
    c->pf = calloc(np, sizeof *c->pf);
    c->pw = calloc(np, sizeof *c->pw);
    c->freef = c->freew = NONE;
    if (!c->sets || !c->tag || !c->stamp || !c->st || !c->rank || !c->slice_mark || !c->pr ||
        !c->pwr || !c->pf || !c->pw) {
        l2_free(c);
        return np_err_set(err, NP_ERR_NOMEM, "out of memory creating the L2's tags (%llu lines)",
                          (unsigned long long)n);
    }
    *out = c;
    return NP_OK;
}

void l2_clear(l2 *c)
{
    size_t n = (size_t)(c->sets * c->ways);
    memset(c->tag, 0, n * sizeof *c->tag);
    memset(c->st, 0, n * sizeof *c->st);
    c->dirty_sectors = c->valid_sectors = 0;
}

/* ---- fill records and waiters ------------------------------------------------------------ */

static bool fill_pending(const l2 *c, const l2_line *x)
{
    if (!x->fill)
        return false;
    const l2_fill *r = &c->f[x->fill - 1];
    return r->live && r->gen == x->fgen;
}

static uint32_t fill_new(l2 *c, l2_done_fn done, void *ctx, uint64_t arg)
{
    uint32_t id = c->freef;
    if (id != NONE) {
        c->freef = c->f[id].next_free;
    } else {
        if (c->nf == c->capf) {
            uint32_t cap = c->capf ? 2 * c->capf : 64;
            l2_fill *v = realloc(c->f, cap * sizeof *v);
            if (!v)
                return NONE;
            c->f = v;
            c->capf = cap;
        }
        id = c->nf++;
        c->f[id].gen = 0;
    }
    l2_fill *r = &c->f[id];
    r->parts = 1;
    r->waiters = r->tail = NONE;
    r->next_free = NONE;
    r->live = true;
    r->owner = r->last_waiter = c->token;
    r->done = done, r->ctx = ctx, r->arg = arg;
    return id;
}

/* The walk (token) waits for fill id: once per fill. false: out of memory. */
static bool fill_wait(l2 *c, uint32_t id, l2_done_fn done, void *ctx, uint64_t arg,
                      uint32_t *waits)
{
    l2_fill *r = &c->f[id];
    if (r->last_waiter == c->token)
        return true; /* its own, or already waited for */
    uint32_t w = c->freew;
    if (w != NONE) {
        c->freew = c->wt[w].next;
    } else {
        if (c->nw == c->capw) {
            uint32_t cap = c->capw ? 2 * c->capw : 256;
            l2_waiter *v = realloc(c->wt, cap * sizeof *v);
            if (!v)
                return false;
            c->wt = v;
            c->capw = cap;
        }
        w = c->nw++;
    }
    r = &c->f[id];
    r->last_waiter = c->token;
    c->wt[w] = (l2_waiter){done, ctx, arg, NONE};
    if (r->tail == NONE)
        r->waiters = w;
    else
        c->wt[r->tail].next = w;
    r->tail = w;
    (*waits)++;
    return true;
}

void l2_fill_parts(l2 *c, uint32_t fill, uint32_t parts)
{
    c->f[fill].parts = parts;
}

void l2_fill_done(l2 *c, uint32_t fill)
{
    l2_fill *r = &c->f[fill];
    if (--r->parts)
        return;
    /* take everything out of the record first: the calls may start walks (new records,
     * pools that move) */
    l2_done_fn done = r->done;
    void *ctx = r->ctx;
    uint64_t arg = r->arg;
    uint32_t w = r->waiters;
    r->live = false;
    r->gen++;
    r->next_free = c->freef;
    c->freef = fill;
    done(ctx, arg);
    while (w != NONE) {
        l2_waiter x = c->wt[w];
        c->wt[w].next = c->freew;
        c->freew = w;
        w = x.next;
        x.done(x.ctx, x.arg);
    }
}

/* ---- the walk ----------------------------------------------------------------------------- */

typedef struct walk_ctx {
    l2_done_fn done;
    void *ctx;
    uint64_t arg;
    l2_walk *w;
    bool nomem;
} walk_ctx;

static uint32_t partition_of(const l2 *c, uint64_t ln)
{
    return (uint32_t)(((ln * c->line) / c->il % c->nch) % c->nparts);
}

/* The way slot of line ln in set `set`, after allocating it when absent (*hit false). */
static size_t line_slot(l2 *c, uint32_t key, uint64_t set, bool *hit, walk_ctx *x)
{
    size_t base = (size_t)(set * c->ways), end = base + (size_t)c->ways, victim = base;
    uint32_t oldest = UINT32_MAX;
    const uint32_t *tag = c->tag;
    for (size_t i = base; i < end; i++)
        if (tag[i] == key) {
            *hit = true;
            return i;
        }
    for (size_t i = base; i < end; i++) {
        uint32_t age = tag[i] ? c->stamp[i] : 0; /* an empty way first */
        if (age < oldest) {
            oldest = age;
            victim = i;
        }
    }
    *hit = false;
    l2_line *v = &c->st[victim];
    if (c->tag[victim]) {
        if (v->dirty) {
            unsigned d = pop(v->dirty);
            x->w->wb_bytes += (uint64_t)d * c->sector;
            if (c->nparts)
                c->pw[partition_of(c, (uint64_t)(c->tag[victim] - 1) * c->sets + set)] +=
                    (double)d * (double)c->sector;
            c->dirty_sectors -= d;
        }
        c->valid_sectors -= pop(v->valid);
    }
    c->tag[victim] = key;
    *v = (l2_line){0};
    return victim;
}

/* Gives each set's stamps their rank, 1 .. ways, in their order (the counter is about to wrap). */
static void l2_renumber(l2 *c)
{
    for (uint64_t s = 0; s < c->sets; s++) {
        uint32_t *st = &c->stamp[s * c->ways];
        memcpy(c->rank, st, (size_t)c->ways * sizeof *st);
        for (uint64_t i = 0; i < c->ways; i++) {
            uint32_t rank = 1;
            for (uint64_t j = 0; j < c->ways; j++)
                rank += c->rank[j] < c->rank[i] || (c->rank[j] == c->rank[i] && j < i);
            st[i] = rank; /* order kept; empty ways are found by their tag, not their stamp */
        }
    }
    c->clock = (uint32_t)c->ways;
}

/* Line ln, tag key, in set `set`: the sectors of mask (n of them) read or written. */
static void access_line(l2 *c, uint64_t ln, uint32_t key, uint64_t set, uint32_t mask,
                        unsigned n, bool write, walk_ctx *x)
{
    l2_walk *w = x->w;
    bool hit;
    size_t i = line_slot(c, key, set, &hit, x);
    if (c->clock == UINT32_MAX)
        l2_renumber(c);
    c->stamp[i] = ++c->clock;
    l2_line *l = &c->st[i];
    double bytes = (double)n * (double)c->sector;
    w->bytes += (uint64_t)n * c->sector;
    uint32_t part = c->nparts ? partition_of(c, ln) : 0;
    if (c->nparts)
        (write ? c->pwr : c->pr)[part] += bytes;
    if (write) {
        c->fig.write_bytes += (uint64_t)n * c->sector;
        if (hit)
            c->fig.write_hits += n, w->hit_sectors += n;
        else
            c->fig.write_misses += n, w->miss_sectors += n;
        if (mask & ~l->valid)
            c->valid_sectors += pop(mask & ~l->valid);
        if (mask & ~l->dirty)
            c->dirty_sectors += pop(mask & ~l->dirty);
        l->valid |= mask;
        l->dirty |= mask;
        l->pend &= ~mask;
        return;
    }
    c->fig.read_bytes += (uint64_t)n * c->sector;
    uint32_t have = l->valid & mask, miss = mask & ~l->valid;
    bool pending = fill_pending(c, l);
    if (have) {
        unsigned nh = have == mask ? n : pop(have);
        c->fig.read_hits += nh;
        w->hit_sectors += nh;
        if (pending && (have & l->pend)) {
            uint32_t id = l->fill - 1;
            if (c->f[id].owner != c->token) {
                c->fig.pending_hits += pop(have & l->pend);
                if (!fill_wait(c, id, x->done, x->ctx, x->arg, &w->waits))
                    x->nomem = true;
            }
        }
    }
    if (!miss)
        return;
    if (w->fill == L2_NO_FILL && (w->fill = fill_new(c, x->done, x->ctx, x->arg)) == NONE) {
        w->fill = L2_NO_FILL;
        x->nomem = true;
        return;
    }
    unsigned m = miss == mask ? n : pop(miss);
    c->fig.read_misses += m;
    w->miss_sectors += m;
    w->fill_bytes += (uint64_t)m * c->sector;
    c->fig.fill_bytes += (uint64_t)m * c->sector;
    if (c->nparts)
        c->pf[part] += (double)m * (double)c->sector;
    c->valid_sectors += m;
    l->valid |= miss;
    /* the line now names this fill; sectors another fill still brings stay pending under it
     * (a reader of them waits for the later fill: conservative) */
    l->pend = (pending ? l->pend : 0) | miss;
    l->fill = w->fill + 1;
    l->fgen = c->f[w->fill].gen;
}

/* The walk asks the host's memory for a set's tags and stamps this many lines before it
 * looks at them (a 40 MiB L2's tags outgrow the host's caches: a lookup waits for memory). */
#define L2_AHEAD 4

static void l2_prefetch(const l2 *c, uint64_t set)
{
    size_t i = (size_t)(set * c->ways);
    __builtin_prefetch(&c->tag[i]);
    __builtin_prefetch(&c->stamp[i]);
    if (c->ways > 16) { /* the second host line of a 32-way set */
        __builtin_prefetch(&c->tag[i + 16]);
        __builtin_prefetch(&c->stamp[i + 16]);
    }
}

/* Bytes [a, end) (end > a) of one row. */
static void walk_bytes(l2 *c, uint64_t a, uint64_t end, bool write, walk_ctx *x)
{
    uint64_t first = a / c->line, last = (end - 1) / c->line;
    uint64_t set = first % c->sets, sl = c->slices > 1 ? first % c->slices : 0;
    uint32_t key = (uint32_t)(first / c->sets + 1);
    for (uint64_t ln = first; ln <= last; ln++) {
        uint64_t lo = ln == first ? a - ln * c->line : 0;
        uint64_t hi = ln == last ? end - ln * c->line : c->line;
        uint32_t s0 = (uint32_t)(lo / c->sector), s1 = (uint32_t)((hi - 1) / c->sector);
        uint32_t mask = (s1 >= 31 ? UINT32_MAX : ((1u << (s1 + 1)) - 1)) & ~((1u << s0) - 1);
        if (c->slices > 1) {
            if (c->slice_mark[sl] != c->slice_epoch) {
                c->slice_mark[sl] = c->slice_epoch;
                x->w->slices++;
            }
            if (++sl == c->slices)
                sl = 0;
        }
        if (ln + L2_AHEAD <= last) /* the tags and stamps of a line a few ahead */
            l2_prefetch(c, set + L2_AHEAD < c->sets ? set + L2_AHEAD : set + L2_AHEAD - c->sets);
        access_line(c, ln, key, set, mask, s1 - s0 + 1, write, x);
        if (++set == c->sets) {
            set = 0;
            key++;
        }
    }
}

static void walk_range(l2 *c, const core_range *range, walk_ctx *x)
{
    /* rows (and planes) that follow each other without a gap are one run */
    core_range m = *range, *r = &m;
    if (r->rows == 1 || r->row_stride == r->row_bytes) {
        r->row_bytes *= r->rows;
        r->rows = 1;
        r->row_stride = r->row_bytes;
        if (r->planes == 1 || r->plane_stride == r->row_bytes) {
            r->row_bytes *= r->planes;
            r->planes = 1;
        } else {
            r->rows = r->planes;
            r->row_stride = r->plane_stride;
            r->planes = 1;
        }
    }
    if (!r->row_bytes)
        return;
    for (uint64_t p = 0; p < r->planes; p++)
        for (uint64_t i = 0; i < r->rows; i++) {
            uint64_t a = r->addr + p * r->plane_stride + i * r->row_stride;
            if (i + 2 < r->rows) /* the first line of the row after next */
                l2_prefetch(c, (a + 2 * r->row_stride) / c->line % c->sets);
            walk_bytes(c, a, a + r->row_bytes, r->write, x);
        }
}

np_status l2_walk_copy(l2 *c, const core_range *r, unsigned nr, l2_done_fn done, void *ctx,
                       uint64_t arg, l2_walk *w, np_err *err)
{
    *w = (l2_walk){.fill = L2_NO_FILL};
    c->token++;
    c->fig.copies++;
    if (++c->slice_epoch == 0) { /* wrapped: forget every mark */
        memset(c->slice_mark, 0, (size_t)c->slices * sizeof *c->slice_mark);
        c->slice_epoch = 1;
    }
    if (c->nparts)
        for (uint32_t j = 0; j < c->nparts; j++)
            c->pr[j] = c->pwr[j] = c->pf[j] = c->pw[j] = 0;
    walk_ctx x = {done, ctx, arg, w, false};
    for (unsigned i = 0; i < nr; i++)
        if (r[i].space == ISA_SPACE_HBM && !r[i].idx_rows)
            walk_range(c, &r[i], &x);
    c->fig.wb_bytes += w->wb_bytes;
    if (c->slices == 1 && w->bytes)
        w->slices = 1;
    if (c->nparts) {
        w->part_read = c->pr;
        w->part_write = c->pwr;
        w->part_fill = c->pf;
        w->part_wb = c->pw;
    }
    if (x.nomem)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory in the L2 model");
    return NP_OK;
}

void l2_get_figures(const l2 *c, l2_figures *f) { *f = c->fig; }

void l2_set_clock(l2 *c, uint32_t clock)
{
    uint64_t n = c->sets * c->ways;
    for (uint64_t i = 0; i < n; i++) /* every stamp moved by the same amount: the same order */
        if (c->tag[i])
            c->stamp[i] = clock - (c->clock - c->stamp[i]);
    c->clock = clock;
}

uint64_t l2_dirty_bytes(const l2 *c) { return c->dirty_sectors * c->sector; }

uint64_t l2_valid_bytes(const l2 *c) { return c->valid_sectors * c->sector; }

bool l2_probe(const l2 *c, uint64_t addr, uint32_t *valid, uint32_t *dirty)
{
    uint64_t ln = addr / c->line;
    size_t base = (size_t)(ln % c->sets * c->ways);
    for (size_t i = base; i < base + c->ways; i++)
        if (c->tag[i] == (uint32_t)(ln / c->sets + 1)) {
            *valid = c->st[i].valid;
            *dirty = c->st[i].dirty;
            return true;
        }
    *valid = *dirty = 0;
    return false;
}
