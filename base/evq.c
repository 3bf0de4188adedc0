/* evq.c — the discrete-event kernel (see evq.h for the contract).
 *
 * A timing wheel (calendar queue) with power-of-two bucket width and count, a sorted run and a
 * small heap for the bucket being dispatched, and an overflow heap for events beyond the
 * wheel. With vb(t) = t >> shift (the "virtual bucket" of time t), nb = 2^log_nb buckets and
 * cur = cur_vb:
 *
 *   run       array of (time, seq, node) sorted by (time, seq), read from index run_i on;
 *   bottom    binary heap by (time, seq). Together they hold every event with vb <= cur, and
 *             dispatch takes the smaller of the run's next entry and the heap's top. A bucket
 *             becomes the run when it is reached; events scheduled into the current bucket
 *             are appended to the run when they sort after its last entry (an event at now
 *             always does when the run holds only now's events), else pushed on the heap.
 *   buckets   slot vb & (nb-1) holds, as an unsorted singly-linked list (push-front), the
 *             events with cur < vb < cur + nb: one vb per slot; slot cur & (nb-1) is empty.
 *             A list element is a node (one event) or a block (tag bit 1): an array of
 *             (seq, node) references to events that share one time, in increasing seq.
 *   bits0/1   two-level bitmap: bits0 has one bit per non-empty slot, bits1 one bit per
 *             non-zero bits0 word, so empty buckets are skipped 64 or 4096 at a time.
 *   overflow  binary heap by (time, seq) holding every event with vb >= cur + nb.
 *
 * Everything in run and bottom precedes everything in the buckets, which precedes everything
 * in the overflow, so the merged run/bottom order is the global (time, seq) order. When both
 * are empty, cur advances to the next non-empty slot (or to the overflow's first event when
 * the wheel is empty), that slot's list becomes the run (or, if it is far from sorted, the
 * bottom heap), and overflow events that entered the window move into buckets. Each event
 * thus costs O(1) list work plus a step of the run or a heap operation on a heap of a few
 * events, as long as the width is a few times the mean spacing of events and the window
 * (nb * width) covers most pending events.
 *
 * Lockstep systems (hundreds of chips acting at the same instant) put hundreds of events at
 * one time, scheduled one after another by the dispatches of an earlier time. As one linked
 * list, such a bucket is read node by node, each a cache miss that waits for the one before
 * (2.5-5 M events/s at 10^6 pending). So the times of recent bucket events are remembered in
 * a small direct-mapped table (finding one costs no memory access), and from the
 * EVQ_RUN_MIN-th event at a remembered time on, events go into that time's open block (the
 * first block small, later ones large) instead of the list. Loading the bucket then reads
 * the references in order, in a few lines per block, and the sorted run lets dispatch fetch
 * nodes ahead, many at a time (20-25 M events/s; see bench/README.md). Blocks are listed
 * newest first like nodes, so reversing the loaded list gives, for events scheduled in
 * order, a run that is sorted already; a bucket whose events were scheduled out of order is
 * insertion-sorted if that is cheap (EVQ_SORT_MOVES), else heapified.
 *
 * Adaptation: the structure is rebuilt (every event redistributed, O(pending)) when the
 * pending count leaves [nb/4, nb] (a rebuild makes nb 2 to 4 times the count), when the bucket
 * width is 4 or more times away from EVQ_WIDTH_GAPS times the mean gap between the events
 * dispatched over the last check period (max(nb, 4096) dispatches), and when cancelled events
 * outnumber pending ones by 1024. Between two rebuilds come a number of operations that grows
 * with the count (one boundary case aside), so the cost stays O(1) per event amortized; a
 * rebuild that cannot get memory keeps the old layout and is retried only after the count
 * has doubled or halved again. A rebuild puts every event back as a node of its own.
 *
 * Memory: past EVQ_PREFETCH_MIN pending events the nodes no longer fit in the caches and each
 * event would cost two misses: the list head of its bucket when scheduled, and the node itself
 * when its bucket is reached. Both are prefetched: new bucket events wait in a small stage
 * (flushed before anything reads the buckets) while their list heads are fetched, each advance
 * fetches the first elements of the next few non-empty buckets, and dispatch from the run
 * fetches the node EVQ_RUN_AHEAD entries ahead. This roughly doubles the throughput at 10^6
 * pending events.
 *
 * Cancellation is lazy: the node's fn becomes NULL and it is dropped ("reaped") when the
 * structure next reads it. Nodes come from chunks of EVQ_CHUNK_NODES with a free list, blocks
 * from chunks of EVQ_BCHUNK_BYTES with a free list per size; chunks are kept until evq_free,
 * and a node's seq is 0 while free, so a handle (node, seq) names its event exactly while
 * that event is pending or cancelled-but-not-reaped. Every held node is referenced exactly
 * once: from the run (at or after run_i), the bottom or overflow heap, the stage, a bucket
 * list, or a block in a bucket list.
 */
#include "evq.h"

#include <assert.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define EVQ_CHUNK_NODES 4096
#define EVQ_LOG_NB_MIN 6  /* 64 buckets: one bitmap word */
#define EVQ_LOG_NB_MAX 24 /* 16 M buckets (128 MiB of list heads) */
#define EVQ_LOG_NB_PER_EVENT 1 /* nb ~ pending * 2^this, rounded up to 2^k */
#define EVQ_WIDTH_GAPS 2       /* bucket width ~ this many mean gaps, rounded up to 2^k */
#define EVQ_SHIFT_INITIAL 10   /* 1024 ps until the first rebuild measures something */
#define EVQ_PERIOD_MIN 4096    /* dispatches between spacing checks, at least */
#define EVQ_GAP_MIN_COUNT 256  /* dispatches needed before a period's mean gap is trusted */
#define EVQ_SAMPLE 256         /* pending events sampled for the spacing without history */
#define EVQ_PREFETCH 8         /* non-empty buckets ahead whose events are prefetched */
#define EVQ_PREFETCH_MIN 16384 /* ... when this many events are pending (not all in cache) */
#define EVQ_STAGE 16           /* new bucket events staged while their list heads are fetched */
#define EVQ_LOG_OPEN 4         /* 2^this recently scheduled times remembered */
#define EVQ_RUN_MIN 4          /* events at one remembered time before they go into blocks */
#define EVQ_RUN_AHEAD 12       /* run entries ahead of dispatch whose nodes are prefetched */
#define EVQ_RUN_COMPACT 4096   /* dispatched run entries dropped when a new one is appended */
#define EVQ_BLK_SMALL 6        /* references in the first block of a time (128 bytes) */
#define EVQ_BLK_LARGE 30       /* references in each further block (512 bytes) */
#define EVQ_BCHUNK_BYTES 65536 /* blocks are allocated this many bytes at a time */
#define EVQ_SORT_MOVES 4       /* a loaded bucket is insertion-sorted if that takes at most
                                  this many moves per event, else heapified */

/* A bucket list element: 0 (end), an evq_node *, or an evq_blk * with bit 0 set. */
typedef uintptr_t evq_elem;

typedef struct evq_node {
    uint64_t time;
    uint64_t seq;  /* 0 while on the free list */
    evq_fn fn;     /* NULL once cancelled, until reaped */
    void *ctx;
    uint64_t arg;
    evq_elem next; /* bucket list, or (untagged) the free list */
} evq_node;

typedef struct evq_ref {
    uint64_t seq;
    evq_node *node;
} evq_ref;

/* Events at one time, in increasing seq; the block is freed when its bucket is loaded. */
typedef struct evq_blk {
    evq_elem next; /* bucket list, or (untagged) the free list of its size */
    uint64_t time;
    uint32_t n, cap; /* references held; room (EVQ_BLK_SMALL or EVQ_BLK_LARGE) */
    evq_ref ref[];
} evq_blk;

static_assert(EVQ_RUN_MIN < 64, "an evq_open state below 64 is a count, not a block");
static_assert(offsetof(evq_blk, ref) + EVQ_BLK_SMALL * sizeof(evq_ref) <= 128,
              "a small block fits in 128 bytes");
static_assert(offsetof(evq_blk, ref) + EVQ_BLK_LARGE * sizeof(evq_ref) <= 512,
              "a large block fits in 512 bytes");

static const size_t evq_blk_bytes[2] = {128, 512}; /* by size class: 0 small, 1 large */

typedef struct evq_hent {
    uint64_t time, seq;
    evq_node *node;
} evq_hent;

typedef struct evq_heap {
    evq_hent *a;
    size_t n, cap;
} evq_heap;

/* A recently scheduled time and what is known of it, in a direct-mapped table indexed by the
 * low bits of the time's bucket (a new time replaces the one in its entry). Time 0 marks an
 * unused entry, as no bucket event is at time 0. An entry whose vb is <= cur_vb is stale: its
 * bucket was loaded, and as cur_vb only grows between rebuilds (which forget every entry), it
 * can match no new bucket event. */
typedef struct evq_open {
    uint64_t time;
    uintptr_t state; /* below EVQ_RUN_MIN: events seen at this time since the entry was made;
                        else the (64-byte aligned) block being filled */
} evq_open;

#define EVQ_OPEN (1u << EVQ_LOG_OPEN)

typedef struct evq_bchunk {
    void *mem;
    unsigned cls;
} evq_bchunk;

struct evq {
    uint64_t now;
    uint64_t cur_vb;
    unsigned shift, log_nb;
    uint64_t nb, mask;
    evq_elem *bucket;
    uint64_t *bits0, *bits1;
    uint64_t n_words1;
    uint64_t n_wheel; /* events in bucket lists and their blocks, cancelled ones included */
    evq_node *stage[EVQ_STAGE]; /* bound for buckets, their list heads being prefetched */
    unsigned n_stage;
    evq_heap run, bottom, over;
    size_t run_i;
    evq_node *free_list;

    evq_open open[EVQ_OPEN];
    evq_elem blk_free[2];
    evq_bchunk *bchunks;
    size_t n_bchunks, cap_bchunks;

    uint64_t next_seq;
    uint64_t n_pending, n_dead; /* n_dead: cancelled nodes not yet reaped */
    uint64_t n_dispatched, n_cancelled, n_rebuilds;
    uint64_t grow_above, shrink_below;

    uint64_t check_at;            /* n_dispatched at which the spacing is checked next */
    uint64_t period_d0, period_t0; /* n_dispatched and now when this check period began */
    uint64_t last_span, last_cnt;  /* time span and dispatches of the last full period */

    evq_node **chunks;
    size_t n_chunks, cap_chunks;

    bool running, stop;
};

/* ---- binary heaps of (time, seq) ---------------------------------------------------------- */

static inline bool evq_hent_lt(const evq_hent *a, const evq_hent *b)
{
    return a->time < b->time || (a->time == b->time && a->seq < b->seq);
}

static inline void evq_heap_sift_up(evq_hent *a, size_t i, evq_hent x)
{
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!evq_hent_lt(&x, &a[p]))
            break;
        a[i] = a[p];
        i = p;
    }
    a[i] = x;
}

static inline void evq_heap_sift_down(evq_hent *a, size_t n, size_t i, evq_hent x)
{
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && evq_hent_lt(&a[c + 1], &a[c]))
            c++;
        if (!evq_hent_lt(&a[c], &x))
            break;
        a[i] = a[c];
        i = c;
    }
    a[i] = x;
}

/* Capacity for at least want entries; on failure nothing changes. */
static np_status evq_heap_reserve(evq_heap *h, size_t want)
{
    if (want <= h->cap)
        return NP_OK;
    size_t cap = h->cap ? h->cap : 16;
    while (cap < want)
        cap *= 2;
    evq_hent *a = realloc(h->a, cap * sizeof *a);
    if (!a)
        return NP_ERR_NOMEM;
    h->a = a;
    h->cap = cap;
    return NP_OK;
}

/* Capacity must already be there. */
static inline void evq_heap_push(evq_heap *h, evq_hent x)
{
    evq_heap_sift_up(h->a, h->n++, x);
}

static inline void evq_heap_pop(evq_heap *h)
{
    evq_hent x = h->a[--h->n];
    if (h->n)
        evq_heap_sift_down(h->a, h->n, 0, x);
}

static void evq_heap_build(evq_heap *h)
{
    evq_hent *a = h->a;
    size_t n = h->n;
    if (n <= 8) { /* a sorted array is a heap; insertion sort wins for the usual few */
        for (size_t i = 1; i < n; i++) {
            evq_hent x = a[i];
            size_t j = i;
            for (; j > 0 && evq_hent_lt(&x, &a[j - 1]); j--)
                a[j] = a[j - 1];
            a[j] = x;
        }
        return;
    }
    for (size_t i = n / 2; i-- > 0;)
        evq_heap_sift_down(a, n, i, a[i]);
}

/* Gives back memory when a heap holds far fewer entries than it has room for. */
static void evq_heap_trim(evq_heap *h)
{
    if (h->cap <= 1024 || h->n * 8 > h->cap)
        return;
    size_t cap = h->cap;
    while (cap > 1024 && h->n * 8 <= cap)
        cap /= 2;
    evq_hent *a = realloc(h->a, cap * sizeof *a);
    if (a) {
        h->a = a;
        h->cap = cap;
    }
}

/* ---- node pool ---------------------------------------------------------------------------- */

static np_status evq_pool_grow(evq *q)
{
    if (q->n_chunks == q->cap_chunks) {
        size_t cap = q->cap_chunks ? q->cap_chunks * 2 : 16;
        evq_node **c = realloc(q->chunks, cap * sizeof *c);
        if (!c)
            return NP_ERR_NOMEM;
        q->chunks = c;
        q->cap_chunks = cap;
    }
    evq_node *chunk = malloc(EVQ_CHUNK_NODES * sizeof *chunk);
    if (!chunk)
        return NP_ERR_NOMEM;
    q->chunks[q->n_chunks++] = chunk;
    for (size_t i = 0; i < EVQ_CHUNK_NODES; i++) {
        chunk[i].seq = 0;
        chunk[i].fn = NULL;
        chunk[i].next = (evq_elem)(i + 1 < EVQ_CHUNK_NODES ? &chunk[i + 1] : q->free_list);
    }
    q->free_list = chunk;
    return NP_OK;
}

static inline void evq_node_release(evq *q, evq_node *nd)
{
    nd->seq = 0;
    nd->next = (evq_elem)q->free_list;
    q->free_list = nd;
}

/* Drops a cancelled node that the structure no longer holds. */
static inline void evq_reap(evq *q, evq_node *nd)
{
    evq_node_release(q, nd);
    q->n_dead--;
}

/* ---- block pool ---------------------------------------------------------------------------- */

/* Puts every block of chunk c on the free list of its size. */
static void evq_bchunk_free_all(evq *q, const evq_bchunk *c)
{
    size_t bytes = evq_blk_bytes[c->cls];
    for (size_t off = 0; off + bytes <= EVQ_BCHUNK_BYTES; off += bytes) {
        evq_blk *b = (evq_blk *)((char *)c->mem + off);
        b->next = q->blk_free[c->cls];
        q->blk_free[c->cls] = (evq_elem)b;
    }
}

static np_status evq_bpool_grow(evq *q, unsigned cls)
{
    if (q->n_bchunks == q->cap_bchunks) {
        size_t cap = q->cap_bchunks ? q->cap_bchunks * 2 : 16;
        evq_bchunk *c = realloc(q->bchunks, cap * sizeof *c);
        if (!c)
            return NP_ERR_NOMEM;
        q->bchunks = c;
        q->cap_bchunks = cap;
    }
    void *mem = aligned_alloc(64, EVQ_BCHUNK_BYTES);
    if (!mem)
        return NP_ERR_NOMEM;
    q->bchunks[q->n_bchunks] = (evq_bchunk){mem, cls};
    evq_bchunk_free_all(q, &q->bchunks[q->n_bchunks++]);
    return NP_OK;
}

/* An empty block of size class cls (0 small, 1 large) for time t, or NULL without memory. */
static evq_blk *evq_blk_take(evq *q, unsigned cls, uint64_t t)
{
    if (!q->blk_free[cls] && evq_bpool_grow(q, cls) != NP_OK)
        return NULL;
    evq_blk *b = (evq_blk *)q->blk_free[cls];
    q->blk_free[cls] = b->next;
    b->time = t;
    b->n = 0;
    b->cap = cls ? EVQ_BLK_LARGE : EVQ_BLK_SMALL;
    return b;
}

static inline void evq_blk_release(evq *q, evq_blk *b)
{
    unsigned cls = b->cap == EVQ_BLK_LARGE;
    b->next = q->blk_free[cls];
    q->blk_free[cls] = (evq_elem)b;
}

/* ---- wheel: bucket lists and the bitmap of non-empty slots --------------------------------- */

static inline bool evq_elem_is_blk(evq_elem e) { return e & 1; }
static inline evq_node *evq_elem_node(evq_elem e) { return (evq_node *)e; }
static inline evq_blk *evq_elem_blk(evq_elem e) { return (evq_blk *)(e - 1); }
static inline evq_elem evq_elem_next(evq_elem e)
{
    return evq_elem_is_blk(e) ? evq_elem_blk(e)->next : evq_elem_node(e)->next;
}

/* Makes element e, whose next field already holds the slot's list, the head of slot s. */
static inline void evq_slot_link(evq *q, uint64_t s, evq_elem e)
{
    q->bucket[s] = e;
    uint64_t *w0 = &q->bits0[s >> 6];
    if (!*w0)
        q->bits1[s >> 12] |= 1ULL << ((s >> 6) & 63);
    *w0 |= 1ULL << (s & 63);
}

static inline void evq_bucket_push(evq *q, evq_node *nd, uint64_t vb)
{
    uint64_t s = vb & q->mask;
    nd->next = q->bucket[s];
    evq_slot_link(q, s, (evq_elem)nd);
    q->n_wheel++;
}

static inline void evq_bucket_push_blk(evq *q, evq_blk *b, uint64_t vb)
{
    uint64_t s = vb & q->mask;
    b->next = q->bucket[s];
    evq_slot_link(q, s, (evq_elem)b | 1);
}

/* Links the staged events into their buckets. The lines of their list heads were prefetched
 * when they were staged, so the misses overlap instead of stalling one schedule each. Must run
 * before anything reads the buckets or changes cur_vb or the geometry. */
static void evq_flush_stage(evq *q)
{
    for (unsigned i = 0; i < q->n_stage; i++)
        evq_bucket_push(q, q->stage[i], q->stage[i]->time >> q->shift);
    q->n_stage = 0;
}

static inline void evq_bit_clear(evq *q, uint64_t s)
{
    uint64_t w = q->bits0[s >> 6] &= ~(1ULL << (s & 63));
    if (!w)
        q->bits1[s >> 12] &= ~(1ULL << ((s >> 6) & 63));
}

/* Adds node nd (scheduled at t, in bucket vb inside the window) to the block of t's
 * remembered entry o once RUN_MIN events at t have been seen; false when it must be a list
 * node of its own (too few seen yet, or no memory for a block). */
static bool evq_open_add(evq *q, evq_open *o, evq_node *nd, uint64_t seq, uint64_t t,
                         uint64_t vb)
{
    if (o->state < EVQ_RUN_MIN - 1) {
        o->state++;
        return false;
    }
    evq_blk *b = o->state >= EVQ_RUN_MIN ? (evq_blk *)o->state : NULL;
    if (!b || b->n == b->cap) {
        b = evq_blk_take(q, b != NULL, t);
        if (!b)
            return false;
        /* the staged events go first, so that the list holds this time's events in seq
         * order read backwards, which the load turns into a sorted run at no cost */
        evq_flush_stage(q);
        evq_bucket_push_blk(q, b, vb);
        o->state = (uintptr_t)b;
    }
    b->ref[b->n++] = (evq_ref){seq, nd};
    q->n_wheel++;
    return true;
}

/* The first non-empty slot at or after from (< nb), or nb when there is none. */
static uint64_t evq_find_from(const evq *q, uint64_t from)
{
    uint64_t w = from >> 6;
    uint64_t word = q->bits0[w] & (~0ULL << (from & 63));
    if (word)
        return (w << 6) | (uint64_t)__builtin_ctzll(word);
    uint64_t w1 = w >> 6;
    unsigned b = (unsigned)(w & 63) + 1;
    uint64_t word1 = b < 64 ? q->bits1[w1] & (~0ULL << b) : 0;
    while (!word1) {
        if (++w1 >= q->n_words1)
            return q->nb;
        word1 = q->bits1[w1];
    }
    w = (w1 << 6) | (uint64_t)__builtin_ctzll(word1);
    return (w << 6) | (uint64_t)__builtin_ctzll(q->bits0[w]);
}

/* ---- sizing ------------------------------------------------------------------------------- */

static unsigned evq_ceil_log2(uint64_t x)
{
    return x <= 1 ? 0 : 64 - (unsigned)__builtin_clzll(x - 1);
}

static unsigned evq_log_nb_for(uint64_t n_pending)
{
    unsigned l = evq_ceil_log2(n_pending) + EVQ_LOG_NB_PER_EVENT;
    return l < EVQ_LOG_NB_MIN ? EVQ_LOG_NB_MIN : l > EVQ_LOG_NB_MAX ? EVQ_LOG_NB_MAX : l;
}

/* log2 of the bucket width for a mean gap of span / cnt ps between events. */
static unsigned evq_shift_for(uint64_t span, uint64_t cnt)
{
    if (cnt == 0)
        return EVQ_SHIFT_INITIAL;
    unsigned __int128 w = ((unsigned __int128)span * EVQ_WIDTH_GAPS + cnt - 1) / cnt;
    if (w >> 62)
        return 62;
    return evq_ceil_log2((uint64_t)w);
}

static uint64_t evq_period_len(const evq *q)
{
    return q->nb > EVQ_PERIOD_MIN ? q->nb : EVQ_PERIOD_MIN;
}

static void evq_set_geometry(evq *q, unsigned shift, unsigned log_nb, uint64_t cur_vb)
{
    q->shift = shift;
    q->log_nb = log_nb;
    q->nb = 1ULL << log_nb;
    q->mask = q->nb - 1;
    q->n_words1 = q->nb >> 12 ? q->nb >> 12 : 1;
    q->cur_vb = cur_vb;
    q->grow_above = log_nb < EVQ_LOG_NB_MAX ? 2 * (q->nb >> EVQ_LOG_NB_PER_EVENT) : UINT64_MAX;
    q->shrink_below = log_nb > EVQ_LOG_NB_MIN ? (q->nb >> EVQ_LOG_NB_PER_EVENT) / 2 : 0;
}

typedef struct evq_wheel_arrays {
    evq_elem *bucket;
    uint64_t *bits0, *bits1;
} evq_wheel_arrays;

static np_status evq_wheel_alloc(evq_wheel_arrays *w, unsigned log_nb)
{
    uint64_t nb = 1ULL << log_nb;
    w->bucket = calloc(nb, sizeof *w->bucket);
    w->bits0 = calloc(nb / 64, sizeof *w->bits0);
    w->bits1 = calloc(nb >> 12 ? nb >> 12 : 1, sizeof *w->bits1);
    if (w->bucket && w->bits0 && w->bits1)
        return NP_OK;
    free(w->bucket);
    free(w->bits0);
    free(w->bits1);
    return NP_ERR_NOMEM;
}

/* ---- rebuild ------------------------------------------------------------------------------ */

/* Fills arr (room for cap, which is the number held) with every held node, cancelled ones
 * included, without changing anything; returns how many. A node is held iff its seq is not 0. */
static size_t evq_gather(const evq *q, evq_node **arr, size_t cap)
{
    size_t n = 0;
    if (cap >= q->n_chunks * (EVQ_CHUNK_NODES / 4)) {
        /* most nodes are held: a sequential scan of the pool beats walking the lists */
        for (size_t c = 0; c < q->n_chunks; c++)
            for (size_t i = 0; i < EVQ_CHUNK_NODES && n < cap; i++)
                if (q->chunks[c][i].seq)
                    arr[n++] = &q->chunks[c][i];
        return n;
    }
    for (unsigned i = 0; i < q->n_stage && n < cap; i++)
        arr[n++] = q->stage[i];
    for (size_t i = q->run_i; i < q->run.n && n < cap; i++)
        arr[n++] = q->run.a[i].node;
    for (size_t i = 0; i < q->bottom.n && n < cap; i++)
        arr[n++] = q->bottom.a[i].node;
    for (size_t i = 0; i < q->over.n && n < cap; i++)
        arr[n++] = q->over.a[i].node;
    for (uint64_t w = 0; w < q->nb / 64; w++)
        for (uint64_t word = q->bits0[w]; word; word &= word - 1)
            for (evq_elem e = q->bucket[(w << 6) | (uint64_t)__builtin_ctzll(word)]; e;
                 e = evq_elem_next(e)) {
                if (!evq_elem_is_blk(e)) {
                    if (n < cap)
                        arr[n++] = evq_elem_node(e);
                    continue;
                }
                const evq_blk *b = evq_elem_blk(e);
                for (uint32_t k = 0; k < b->n && n < cap; k++)
                    arr[n++] = b->ref[k].node;
            }
    return n;
}

/* Empties run, bottom, stage, buckets and overflow, frees every block and forgets the
 * remembered times (the nodes themselves are untouched). */
static void evq_clear(evq *q)
{
    q->run.n = q->run_i = 0;
    q->bottom.n = q->over.n = 0;
    q->n_stage = 0;
    for (uint64_t w = 0; w < q->nb / 64; w++) {
        for (uint64_t word = q->bits0[w]; word; word &= word - 1)
            q->bucket[(w << 6) | (uint64_t)__builtin_ctzll(word)] = 0;
        q->bits0[w] = 0;
    }
    memset(q->bits1, 0, q->n_words1 * sizeof *q->bits1);
    q->n_wheel = 0;
    q->blk_free[0] = q->blk_free[1] = 0;
    for (size_t c = 0; c < q->n_bchunks; c++)
        evq_bchunk_free_all(q, &q->bchunks[c]);
    memset(q->open, 0, sizeof q->open);
}

static int evq_cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* The bucket width for the rebuild: from the mean gap between recently dispatched events when
 * enough were dispatched, else from the density of the earliest half of a sample of the
 * pending events (n held nodes in arr). */
static unsigned evq_choose_shift(const evq *q, evq_node *const *arr, size_t n)
{
    uint64_t cnt = q->n_dispatched - q->period_d0;
    if (cnt >= EVQ_GAP_MIN_COUNT)
        return evq_shift_for(q->now - q->period_t0, cnt);
    if (q->last_cnt >= EVQ_GAP_MIN_COUNT)
        return evq_shift_for(q->last_span, q->last_cnt);
    uint64_t sample[EVQ_SAMPLE];
    size_t ns = 0, stride = n / EVQ_SAMPLE + 1;
    for (size_t i = 0; i < n && ns < EVQ_SAMPLE; i += stride)
        if (arr[i]->fn)
            sample[ns++] = arr[i]->time;
    if (ns < 2)
        return q->shift;
    qsort(sample, ns, sizeof sample[0], evq_cmp_u64);
    size_t k = ns / 2;
    /* k sampled gaps stand for k * pending / ns events */
    unsigned __int128 span = (unsigned __int128)(sample[k] - sample[0]) * ns;
    uint64_t events = k * q->n_pending;
    if (span >> 64)
        return 62;
    return evq_shift_for((uint64_t)span, events);
}

/* Puts the n nodes of arr into the emptied structure under the current geometry, reaping the
 * cancelled ones; the heaps must have room. Nodes and their buckets are prefetched ahead:
 * arr's order is not memory order. */
static void evq_distribute(evq *q, evq_node *const *arr, size_t n)
{
    uint64_t cur = q->cur_vb;
    for (size_t i = 0; i < n; i++) {
        if (i + 16 < n)
            __builtin_prefetch(arr[i + 16]);
        if (i + 8 < n)
            __builtin_prefetch(&q->bucket[(arr[i + 8]->time >> q->shift) & q->mask], 1);
        evq_node *nd = arr[i];
        if (!nd->fn) {
            evq_reap(q, nd);
            continue;
        }
        uint64_t vb = nd->time >> q->shift;
        evq_hent e = {nd->time, nd->seq, nd};
        if (vb <= cur)
            q->bottom.a[q->bottom.n++] = e;
        else if (vb - cur < q->nb)
            evq_bucket_push(q, nd, vb);
        else
            q->over.a[q->over.n++] = e;
    }
    evq_heap_build(&q->bottom);
    evq_heap_build(&q->over);
}

/* After a rebuild, or a failed one: when memory kept the wheel from being sized for the
 * pending count, try again only after the count has doubled or halved again, so that failed
 * rebuilds stay amortized. */
static void evq_rearm(evq *q)
{
    uint64_t n = q->n_pending;
    if (n > q->grow_above)
        q->grow_above = n < UINT64_MAX / 2 ? 2 * n : UINT64_MAX;
    if (n < q->shrink_below)
        q->shrink_below = n / 2;
}

/* Redistributes every pending event over a wheel sized for the pending count, with the bucket
 * width chosen by evq_choose_shift, each as a node of its own, and drops cancelled nodes. If memory for the new layout
 * cannot be had, the old layout is kept: a rebuild never fails. */
static void evq_rebuild(evq *q)
{
    size_t n_held = (size_t)(q->n_pending + q->n_dead);
    evq_node **arr = malloc((n_held ? n_held : 1) * sizeof *arr);
    if (!arr) {
        evq_rearm(q);
        return;
    }
    size_t n = evq_gather(q, arr, n_held);
    unsigned old_log = q->log_nb, log_nb = evq_log_nb_for(q->n_pending);
    unsigned shift = evq_choose_shift(q, arr, n);
    uint64_t cur = q->now >> shift;
    evq_wheel_arrays w = {q->bucket, q->bits0, q->bits1};
    if (log_nb != old_log && evq_wheel_alloc(&w, log_nb) != NP_OK)
        log_nb = old_log;
    /* room in the heaps for the new layout */
    uint64_t nb = 1ULL << log_nb;
    size_t n_bottom = 0, n_over = 0;
    for (size_t i = 0; i < n; i++) {
        if (i + 16 < n)
            __builtin_prefetch(arr[i + 16]);
        uint64_t vb = arr[i]->time >> shift;
        bool live = arr[i]->fn != NULL;
        n_bottom += live && vb <= cur;
        n_over += live && vb > cur && vb - cur >= nb;
    }
    bool ok = evq_heap_reserve(&q->bottom, n_bottom) == NP_OK &&
              evq_heap_reserve(&q->over, n_over) == NP_OK;
    if (!ok && log_nb != old_log) {
        free(w.bucket);
        free(w.bits0);
        free(w.bits1);
    }
    evq_clear(q);
    if (ok && log_nb != old_log) {
        free(q->bucket);
        free(q->bits0);
        free(q->bits1);
        q->bucket = w.bucket;
        q->bits0 = w.bits0;
        q->bits1 = w.bits1;
    }
    if (ok) /* else the old layout, which fits in the room the heaps had */
        evq_set_geometry(q, shift, log_nb, cur);
    else
        evq_set_geometry(q, q->shift, q->log_nb, q->cur_vb);
    evq_distribute(q, arr, n);
    free(arr);
    evq_rearm(q);
    if (ok) {
        evq_heap_trim(&q->run);
        evq_heap_trim(&q->bottom);
        evq_heap_trim(&q->over);
        q->n_rebuilds++;
    }
}

/* End of a check period: remember its mean gap, rebuild if the width is far from it. */
static void evq_check_spacing(evq *q)
{
    q->last_span = q->now - q->period_t0;
    q->last_cnt = q->n_dispatched - q->period_d0;
    q->period_t0 = q->now;
    q->period_d0 = q->n_dispatched;
    q->check_at = q->n_dispatched + evq_period_len(q);
    unsigned ideal = evq_shift_for(q->last_span, q->last_cnt);
    if (ideal > q->shift + 1 || ideal + 1 < q->shift)
        evq_rebuild(q);
}

/* ---- public API --------------------------------------------------------------------------- */

np_status evq_create(evq **out, np_err *err)
{
    evq *q = calloc(1, sizeof *q);
    evq_wheel_arrays w;
    if (!q || evq_wheel_alloc(&w, EVQ_LOG_NB_MIN) != NP_OK) {
        free(q);
        return np_err_set(err, NP_ERR_NOMEM, "evq: out of memory creating an event queue");
    }
    q->bucket = w.bucket;
    q->bits0 = w.bits0;
    q->bits1 = w.bits1;
    evq_set_geometry(q, EVQ_SHIFT_INITIAL, EVQ_LOG_NB_MIN, 0);
    q->next_seq = 1;
    q->check_at = EVQ_PERIOD_MIN;
    *out = q;
    return NP_OK;
}

void evq_free(evq *q)
{
    if (!q)
        return;
    for (size_t i = 0; i < q->n_chunks; i++)
        free(q->chunks[i]);
    free(q->chunks);
    for (size_t i = 0; i < q->n_bchunks; i++)
        free(q->bchunks[i].mem);
    free(q->bchunks);
    free(q->bucket);
    free(q->bits0);
    free(q->bits1);
    free(q->run.a);
    free(q->bottom.a);
    free(q->over.a);
    free(q);
}


/* Puts node nd (bucket vb inside the window) in its bucket's list, through the stage when
 * the buckets are too many to be in the caches. */
static inline void evq_place_in_bucket(evq *q, evq_node *nd, uint64_t vb)
{
    if (q->n_pending >= EVQ_PREFETCH_MIN) {
        if (q->n_stage == EVQ_STAGE)
            evq_flush_stage(q);
        __builtin_prefetch(&q->bucket[vb & q->mask], 1);
        q->stage[q->n_stage++] = nd;
    } else {
        evq_bucket_push(q, nd, vb);
    }
}

np_status evq_schedule_at(evq *q, uint64_t t_ps, evq_fn fn, void *ctx, uint64_t arg,
                          evq_handle *h, np_err *err)
{
    if (t_ps < q->now)
        return np_err_set(err, NP_ERR_INTERNAL,
                          "evq: event scheduled at %llu ps, before the current time %llu ps",
                          (unsigned long long)t_ps, (unsigned long long)q->now);
    if (!fn)
        return np_err_set(err, NP_ERR_INTERNAL, "evq: event scheduled with no callback");
    if (!q->free_list && evq_pool_grow(q) != NP_OK)
        return np_err_set(err, NP_ERR_NOMEM, "evq: out of memory for a new event");
    evq_node *nd = q->free_list;
    uint64_t seq = q->next_seq;
    uint64_t vb = t_ps >> q->shift;
    if (vb > q->cur_vb && vb - q->cur_vb < q->nb) {
        q->free_list = evq_elem_node(nd->next);
        evq_open *o = &q->open[vb & (EVQ_OPEN - 1)];
        if (o->time != t_ps) {
            *o = (evq_open){t_ps, 1};
            evq_place_in_bucket(q, nd, vb);
        } else if (!evq_open_add(q, o, nd, seq, t_ps, vb)) {
            evq_place_in_bucket(q, nd, vb);
        }
    } else if (vb <= q->cur_vb) {
        evq_heap *r = &q->run;
        if (q->run_i == r->n) {
            r->n = q->run_i = 0;
        } else if (q->run_i >= EVQ_RUN_COMPACT && q->run_i * 2 >= r->n) {
            /* a time that keeps scheduling at itself must not grow the run without end */
            memmove(r->a, r->a + q->run_i, (r->n - q->run_i) * sizeof *r->a);
            r->n -= q->run_i;
            q->run_i = 0;
        }
        evq_heap *hp = r->n == 0 || r->a[r->n - 1].time <= t_ps ? r : &q->bottom;
        if (hp->n == hp->cap && evq_heap_reserve(hp, hp->n + 1) != NP_OK)
            return np_err_set(err, NP_ERR_NOMEM, "evq: out of memory for a new event");
        q->free_list = evq_elem_node(nd->next);
        if (hp == r) /* sorts after the run's last entry: it has the largest seq so far */
            r->a[r->n++] = (evq_hent){t_ps, seq, nd};
        else
            evq_heap_push(hp, (evq_hent){t_ps, seq, nd});
    } else {
        evq_heap *hp = &q->over;
        if (hp->n == hp->cap && evq_heap_reserve(hp, hp->n + 1) != NP_OK)
            return np_err_set(err, NP_ERR_NOMEM, "evq: out of memory for a new event");
        q->free_list = evq_elem_node(nd->next);
        evq_heap_push(hp, (evq_hent){t_ps, seq, nd});
    }
    nd->time = t_ps;
    nd->seq = seq;
    nd->fn = fn;
    nd->ctx = ctx;
    nd->arg = arg;
    q->next_seq = seq + 1;
    q->n_pending++;
    if (h) {
        h->node = nd;
        h->seq = seq;
    }
    if (q->n_pending > q->grow_above)
        evq_rebuild(q);
    return NP_OK;
}

np_status evq_schedule_in(evq *q, uint64_t delay_ps, evq_fn fn, void *ctx, uint64_t arg,
                          evq_handle *h, np_err *err)
{
    if (delay_ps > UINT64_MAX - q->now)
        return np_err_set(err, NP_ERR_RANGE,
                          "evq: %llu ps after %llu ps is beyond the last representable time",
                          (unsigned long long)delay_ps, (unsigned long long)q->now);
    return evq_schedule_at(q, q->now + delay_ps, fn, ctx, arg, h, err);
}

bool evq_cancel(evq *q, evq_handle h)
{
    evq_node *nd = h.node;
    if (!nd || h.seq == 0 || nd->seq != h.seq || !nd->fn)
        return false;
    nd->fn = NULL;
    q->n_pending--;
    q->n_dead++;
    q->n_cancelled++;
    if (q->n_dead > q->n_pending + 1024)
        evq_rebuild(q);
    return true;
}

/* Sorts a[0..n) by (time, seq) by insertion when that takes at most EVQ_SORT_MOVES * n moves,
 * as it does for a bucket of runs at one time; false, with a[] some permutation of itself,
 * when it would take more. */
static bool evq_sort_run(evq_hent *a, size_t n)
{
    size_t budget = EVQ_SORT_MOVES * n;
    for (size_t i = 1; i < n; i++) {
        if (!evq_hent_lt(&a[i], &a[i - 1]))
            continue;
        evq_hent x = a[i];
        size_t j = i;
        while (j > 0 && evq_hent_lt(&x, &a[j - 1])) {
            if (budget == 0) {
                a[j] = x;
                return false;
            }
            budget--;
            a[j] = a[j - 1];
            j--;
        }
        a[j] = x;
    }
    return true;
}

/* Moves slot s's list into the (empty) run, or into the bottom heap when far from sorted,
 * freeing its blocks and reaping cancelled list nodes (cancelled events in blocks are reaped
 * when dispatch reaches them); on NOMEM nothing changes and both stay empty. The caller moves
 * cur_vb. */
static np_status evq_load_slot(evq *q, uint64_t s)
{
    evq_heap *r = &q->run;
    evq_elem head = q->bucket[s];
    if (!evq_elem_is_blk(head) && !evq_elem_node(head)->next) { /* the usual lone event */
        evq_node *nd = evq_elem_node(head);
        if (!r->cap && evq_heap_reserve(r, 1) != NP_OK)
            return NP_ERR_NOMEM;
        if (nd->fn)
            r->a[r->n++] = (evq_hent){nd->time, nd->seq, nd};
        else
            evq_reap(q, nd);
        q->bucket[s] = 0;
        evq_bit_clear(q, s);
        q->n_wheel--;
        q->run_i = 0;
        return NP_OK;
    }
    size_t n = 0;
    uint64_t held = 0;
    bool any_blk = false, any_dead = false;
    for (evq_elem e = head; e; e = evq_elem_next(e)) {
        if (evq_elem_is_blk(e)) {
            const evq_blk *b = evq_elem_blk(e);
            if (n + b->n > r->cap && evq_heap_reserve(r, n + b->n) != NP_OK)
                return NP_ERR_NOMEM;
            for (uint32_t k = b->n; k-- > 0;) /* backwards, like the list */
                r->a[n++] = (evq_hent){b->time, b->ref[k].seq, b->ref[k].node};
            held += b->n;
            any_blk = true;
            continue;
        }
        evq_node *nd = evq_elem_node(e);
        held++;
        if (!nd->fn) {
            any_dead = true;
            continue;
        }
        if (n == r->cap && evq_heap_reserve(r, n + 1) != NP_OK)
            return NP_ERR_NOMEM;
        r->a[n++] = (evq_hent){nd->time, nd->seq, nd};
    }
    if (any_blk || any_dead) {
        for (evq_elem e = head, next; e; e = next) {
            next = evq_elem_next(e);
            if (evq_elem_is_blk(e))
                evq_blk_release(q, evq_elem_blk(e));
            else if (!evq_elem_node(e)->fn)
                evq_reap(q, evq_elem_node(e));
        }
    }
    q->bucket[s] = 0;
    evq_bit_clear(q, s);
    q->n_wheel -= held;
    r->n = n;
    q->run_i = 0;
    /* The list is newest first: reversed, events scheduled in order come out sorted. The
     * nodes of list elements were just read; those of blocks are fetched ahead of need. */
    if (any_blk)
        for (size_t i = 0, j = n; i + 1 < j; i++, j--) {
            evq_hent x = r->a[i];
            r->a[i] = r->a[j - 1];
            r->a[j - 1] = x;
        }
    if (!evq_sort_run(r->a, n)) {
        evq_heap tmp = q->bottom; /* empty */
        q->bottom = *r;
        *r = tmp;
        evq_heap_build(&q->bottom);
        return NP_OK;
    }
    if (any_blk)
        for (size_t i = 0; i < n && i < EVQ_RUN_AHEAD; i++)
            __builtin_prefetch(r->a[i].node);
    return NP_OK;
}

/* Moves overflow events that are now inside the window into their buckets. */
static void evq_migrate(evq *q)
{
    while (q->over.n) {
        evq_hent top = q->over.a[0];
        uint64_t vb = top.time >> q->shift;
        if (vb - q->cur_vb >= q->nb)
            break;
        evq_heap_pop(&q->over);
        if (!top.node->fn)
            evq_reap(q, top.node);
        else
            evq_bucket_push(q, top.node, vb);
    }
}

/* Prefetches the lines of list element e past its first, which the caller has read. */
static inline void evq_prefetch_rest(evq_elem e)
{
    if (!evq_elem_is_blk(e))
        return;
    const evq_blk *b = evq_elem_blk(e);
    const char *end = (const char *)&b->ref[b->n];
    for (const char *p = (const char *)b + 64; p < end; p += 64)
        __builtin_prefetch(p);
}

/* With the run and the bottom heap empty: moves cur to the next non-empty bucket, or to the
 * first overflow event when the wheel is empty, and fills the run (or bottom) from it. NOMEM
 * leaves all as it was. Both may still be empty afterwards if that bucket held only cancelled
 * events. */
static np_status evq_advance(evq *q)
{
    evq_flush_stage(q);
    q->run.n = q->run_i = 0;
    if (q->n_wheel) {
        uint64_t cs = q->cur_vb & q->mask;
        uint64_t s = cs + 1 < q->nb ? evq_find_from(q, cs + 1) : q->nb;
        if (s >= q->nb)
            s = evq_find_from(q, 0);
        if (evq_load_slot(q, s) != NP_OK)
            return NP_ERR_NOMEM;
        q->cur_vb += (s - cs) & q->mask;
        /* Fetch the first list elements of the next few non-empty buckets ahead of need:
         * once the events outgrow the caches, each would be a miss stalling its advance. A
         * software pipeline along each list: the head EVQ_PREFETCH buckets ahead, the rest of
         * it and the second element half as far ahead (the head has arrived by then), the
         * rest of that and the third element a quarter as far. */
        if (q->n_pending >= EVQ_PREFETCH_MIN) {
            uint64_t p = s;
            for (int k = 1; k <= EVQ_PREFETCH && p + 1 < q->nb; k++) {
                p = evq_find_from(q, p + 1);
                if (p >= q->nb)
                    break;
                evq_elem e = q->bucket[p];
                if (k == EVQ_PREFETCH) {
                    __builtin_prefetch((const void *)(e & ~(evq_elem)1));
                } else if (k == EVQ_PREFETCH / 2) {
                    evq_prefetch_rest(e);
                    evq_elem e2 = evq_elem_next(e);
                    if (e2)
                        __builtin_prefetch((const void *)(e2 & ~(evq_elem)1));
                } else if (k == EVQ_PREFETCH / 4) {
                    evq_elem e2 = evq_elem_next(e), e3 = e2 ? evq_elem_next(e2) : 0;
                    if (e2)
                        evq_prefetch_rest(e2);
                    if (e3)
                        __builtin_prefetch((const void *)(e3 & ~(evq_elem)1));
                }
            }
        }
    } else if (q->over.n) {
        evq_heap *r = &q->run;
        uint64_t vb = q->over.a[0].time >> q->shift;
        while (q->over.n && q->over.a[0].time >> q->shift == vb) {
            evq_hent top = q->over.a[0];
            if (!top.node->fn) {
                evq_heap_pop(&q->over);
                evq_reap(q, top.node);
                continue;
            }
            if (r->n == r->cap && evq_heap_reserve(r, r->n + 1) != NP_OK) {
                while (r->n) /* put them back: the overflow has room for them */
                    evq_heap_push(&q->over, r->a[--r->n]);
                return NP_ERR_NOMEM;
            }
            evq_heap_pop(&q->over);
            r->a[r->n++] = top; /* popped in order: sorted */
        }
        q->cur_vb = vb;
    } else {
        return NP_ERR_INTERNAL;
    }
    evq_migrate(q);
    return NP_OK;
}

/* The dispatch loop shared by run, run_until and step. */
static np_status evq_dispatch(evq *q, uint64_t t_end, uint64_t max_events, uint64_t *n_done,
                              bool *stopped, np_err *err)
{
    if (q->running)
        return np_err_set(err, NP_ERR_INTERNAL, "evq: run called from inside an event callback");
    q->running = true;
    q->stop = false;
    uint64_t done = 0;
    np_status st = NP_OK;
    while (done < max_events && !q->stop) {
        evq_hent top;
        bool from_run;
        if (q->run_i < q->run.n) {
            top = q->run.a[q->run_i];
            from_run = !(q->bottom.n && evq_hent_lt(&q->bottom.a[0], &top));
            if (!from_run)
                top = q->bottom.a[0];
        } else if (q->bottom.n) {
            top = q->bottom.a[0];
            from_run = false;
        } else {
            if (q->n_pending == 0)
                break;
            st = evq_advance(q);
            if (st == NP_OK)
                continue;
            if (st == NP_ERR_NOMEM)
                np_err_set(err, st, "evq: out of memory moving events to the current bucket");
            else
                np_err_set(err, st, "evq: %llu events pending but none held (a bug)",
                           (unsigned long long)q->n_pending);
            break;
        }
        evq_node *nd = top.node;
        if (!nd->fn) {
            if (from_run)
                q->run_i++;
            else
                evq_heap_pop(&q->bottom);
            evq_reap(q, nd);
            continue;
        }
        if (top.time > t_end)
            break;
        if (from_run) {
            size_t ahead = q->run_i++ + EVQ_RUN_AHEAD;
            if (ahead < q->run.n)
                __builtin_prefetch(q->run.a[ahead].node);
        } else {
            evq_heap_pop(&q->bottom);
        }
        q->now = top.time;
        evq_fn fn = nd->fn;
        void *ctx = nd->ctx;
        uint64_t arg = nd->arg;
        evq_node_release(q, nd);
        q->n_pending--;
        q->n_dispatched++;
        done++;
        fn(q, ctx, arg);
        if (q->n_dispatched >= q->check_at)
            evq_check_spacing(q);
        else if (q->n_pending < q->shrink_below)
            evq_rebuild(q);
    }
    q->running = false;
    if (stopped)
        *stopped = q->stop;
    q->stop = false;
    if (n_done)
        *n_done = done;
    return st;
}

np_status evq_run_until(evq *q, uint64_t t_end_ps, np_err *err)
{
    if (t_end_ps < q->now)
        return np_err_set(err, NP_ERR_INTERNAL,
                          "evq: run until %llu ps, before the current time %llu ps",
                          (unsigned long long)t_end_ps, (unsigned long long)q->now);
    bool stopped = false;
    np_status st = evq_dispatch(q, t_end_ps, UINT64_MAX, NULL, &stopped, err);
    if (st == NP_OK && !stopped)
        q->now = t_end_ps;
    return st;
}

np_status evq_run(evq *q, np_err *err)
{
    return evq_dispatch(q, UINT64_MAX, UINT64_MAX, NULL, NULL, err);
}

np_status evq_step(evq *q, bool *dispatched, np_err *err)
{
    uint64_t done = 0;
    np_status st = evq_dispatch(q, UINT64_MAX, 1, &done, NULL, err);
    if (dispatched)
        *dispatched = done == 1;
    return st;
}

void evq_stop(evq *q)
{
    if (q->running)
        q->stop = true;
}

uint64_t evq_now(const evq *q) { return q->now; }
uint64_t evq_pending(const evq *q) { return q->n_pending; }
uint64_t evq_dispatched(const evq *q) { return q->n_dispatched; }
uint64_t evq_cancelled(const evq *q) { return q->n_cancelled; }
uint64_t evq_rebuilds(const evq *q) { return q->n_rebuilds; }

/* ---- invariants --------------------------------------------------------------------------- */

#define EVQ_CHECK(cond, ...)                                                                   \
    do {                                                                                       \
        if (!(cond))                                                                           \
            return np_err_set(err, NP_ERR_INTERNAL, "evq_verify: " __VA_ARGS__);               \
    } while (0)

/* Checks one held node; counts it as live or cancelled. */
static np_status evq_verify_node(const evq *q, const evq_node *nd, uint64_t *live,
                                 uint64_t *dead, np_err *err)
{
    EVQ_CHECK(nd->seq != 0 && nd->seq < q->next_seq, "held node with seq %llu (next %llu)",
              (unsigned long long)nd->seq, (unsigned long long)q->next_seq);
    /* a cancelled event may stay held after now passed it, until the structure reaches it */
    EVQ_CHECK(nd->time >= q->now || !nd->fn, "event seq %llu at %llu ps is before now (%llu ps)",
              (unsigned long long)nd->seq, (unsigned long long)nd->time,
              (unsigned long long)q->now);
    if (nd->fn)
        ++*live;
    else
        ++*dead;
    return NP_OK;
}

/* Checks the entries [from, h->n) of the run (sorted) or of a heap. */
static np_status evq_verify_entries(const evq *q, const evq_heap *h, size_t from,
                                    const char *name, uint64_t *live, uint64_t *dead,
                                    np_err *err)
{
    EVQ_CHECK(from <= h->n && h->n <= h->cap, "%s holds %zu entries from %zu in room for %zu",
              name, h->n, from, h->cap);
    for (size_t i = from; i < h->n; i++) {
        const evq_hent *e = &h->a[i];
        EVQ_CHECK(e->node && e->time == e->node->time && e->seq == e->node->seq,
                  "%s entry %zu does not match its node", name, i);
        if (h == &q->run)
            EVQ_CHECK(i == from || evq_hent_lt(&h->a[i - 1], e),
                      "run entry %zu precedes the one before it", i);
        else
            EVQ_CHECK(i == 0 || !evq_hent_lt(e, &h->a[(i - 1) / 2]),
                      "%s heap entry %zu precedes its parent", name, i);
        uint64_t vb = e->time >> q->shift;
        if (h != &q->over)
            EVQ_CHECK(vb <= q->cur_vb, "%s entry %zu is in bucket %llu, after current %llu",
                      name, i, (unsigned long long)vb, (unsigned long long)q->cur_vb);
        else
            EVQ_CHECK(vb > q->cur_vb && vb - q->cur_vb >= q->nb,
                      "overflow entry %zu (bucket %llu) is inside the window at %llu", i,
                      (unsigned long long)vb, (unsigned long long)q->cur_vb);
        np_status st = evq_verify_node(q, e->node, live, dead, err);
        if (st != NP_OK)
            return st;
    }
    return NP_OK;
}

/* Checks one block of slot s's list (whose bucket is vb_want); counts its events. */
static np_status evq_verify_blk(const evq *q, const evq_blk *b, uint64_t vb_want,
                                uint64_t *in_wheel, uint64_t *live, uint64_t *dead,
                                np_err *err)
{
    EVQ_CHECK((b->cap == EVQ_BLK_SMALL || b->cap == EVQ_BLK_LARGE) && b->n >= 1 &&
                  b->n <= b->cap,
              "a block holds %u references in room for %u", b->n, b->cap);
    EVQ_CHECK(b->time >> q->shift == vb_want,
              "block at %llu ps is in the list of bucket %llu", (unsigned long long)b->time,
              (unsigned long long)vb_want);
    for (uint32_t k = 0; k < b->n; k++) {
        const evq_ref *r = &b->ref[k];
        EVQ_CHECK(r->node && r->node->seq == r->seq && r->node->time == b->time,
                  "block reference %u at %llu ps does not match its node", k,
                  (unsigned long long)b->time);
        EVQ_CHECK(k == 0 || b->ref[k - 1].seq < r->seq,
                  "block reference %u is out of seq order", k);
        np_status st = evq_verify_node(q, r->node, live, dead, err);
        if (st != NP_OK)
            return st;
    }
    *in_wheel += b->n;
    return NP_OK;
}

/* Checks the remembered times and the block pool; *in_lists is the blocks in bucket lists. */
static np_status evq_verify_blocks(const evq *q, uint64_t in_lists, np_err *err)
{
    for (unsigned i = 0; i < EVQ_OPEN; i++) {
        const evq_open *o = &q->open[i];
        uint64_t t = o->time;
        uint64_t vb = t >> q->shift;
        if (t == 0 || vb <= q->cur_vb)
            continue; /* unused or stale */
        EVQ_CHECK(vb - q->cur_vb < q->nb, "remembered time %llu ps is outside the window",
                  (unsigned long long)t);
        EVQ_CHECK((vb & (EVQ_OPEN - 1)) == i, "time %llu ps is remembered in the wrong entry",
                  (unsigned long long)t);
        EVQ_CHECK(o->state >= 1 && (o->state < EVQ_RUN_MIN || o->state % 64 == 0),
                  "remembered time %llu ps has a bad state %#llx", (unsigned long long)t,
                  (unsigned long long)o->state);
        if (o->state < EVQ_RUN_MIN)
            continue;
        const evq_blk *blk = (const evq_blk *)o->state;
        EVQ_CHECK(blk->time == t, "the open block of %llu ps holds events at %llu ps",
                  (unsigned long long)t, (unsigned long long)blk->time);
        bool found = false;
        for (evq_elem e = q->bucket[vb & q->mask]; e && !found; e = evq_elem_next(e))
            found = e == ((evq_elem)blk | 1);
        EVQ_CHECK(found, "the open block of %llu ps is not in its bucket",
                  (unsigned long long)t);
    }
    uint64_t total = 0, n_free = 0;
    for (size_t c = 0; c < q->n_bchunks; c++)
        total += EVQ_BCHUNK_BYTES / evq_blk_bytes[q->bchunks[c].cls];
    for (unsigned cls = 0; cls < 2; cls++)
        for (evq_elem e = q->blk_free[cls]; e; e = ((const evq_blk *)e)->next)
            EVQ_CHECK(++n_free <= total, "a block free list has a cycle");
    EVQ_CHECK(n_free + in_lists == total, "%llu free + %llu used blocks != %llu allocated",
              (unsigned long long)n_free, (unsigned long long)in_lists,
              (unsigned long long)total);
    return NP_OK;
}

np_status evq_verify(const evq *q, np_err *err)
{
    EVQ_CHECK(q->nb == 1ULL << q->log_nb && q->mask == q->nb - 1 &&
                  q->log_nb >= EVQ_LOG_NB_MIN && q->log_nb <= EVQ_LOG_NB_MAX && q->shift < 64,
              "bad geometry (log_nb %u, shift %u)", q->log_nb, q->shift);
    EVQ_CHECK(q->n_dispatched + q->n_pending + q->n_cancelled == q->next_seq - 1,
              "%llu dispatched + %llu pending + %llu cancelled != %llu scheduled",
              (unsigned long long)q->n_dispatched, (unsigned long long)q->n_pending,
              (unsigned long long)q->n_cancelled, (unsigned long long)(q->next_seq - 1));
    uint64_t live = 0, dead = 0;
    np_status st = evq_verify_entries(q, &q->run, q->run_i, "run", &live, &dead, err);
    if (st == NP_OK)
        st = evq_verify_entries(q, &q->bottom, 0, "bottom", &live, &dead, err);
    if (st == NP_OK)
        st = evq_verify_entries(q, &q->over, 0, "overflow", &live, &dead, err);
    if (st != NP_OK)
        return st;
    uint64_t in_wheel = 0, elems = 0, blocks = 0;
    for (uint64_t s = 0; s < q->nb; s++) {
        bool bit0 = q->bits0[s >> 6] >> (s & 63) & 1;
        EVQ_CHECK(bit0 == (q->bucket[s] != 0), "slot %llu: bitmap says %s",
                  (unsigned long long)s, bit0 ? "non-empty" : "empty");
        if ((s & 63) == 0) {
            bool bit1 = q->bits1[s >> 12] >> ((s >> 6) & 63) & 1;
            EVQ_CHECK(bit1 == (q->bits0[s >> 6] != 0), "bitmap word %llu: level 1 disagrees",
                      (unsigned long long)(s >> 6));
        }
        EVQ_CHECK(s != (q->cur_vb & q->mask) || !q->bucket[s],
                  "the current slot %llu holds events", (unsigned long long)s);
        uint64_t vb_want = q->cur_vb + ((s - q->cur_vb) & q->mask);
        for (evq_elem e = q->bucket[s]; e; e = evq_elem_next(e)) {
            EVQ_CHECK(++elems <= q->next_seq, "a bucket list has a cycle");
            if (evq_elem_is_blk(e)) {
                blocks++;
                st = evq_verify_blk(q, evq_elem_blk(e), vb_want, &in_wheel, &live, &dead, err);
                if (st != NP_OK)
                    return st;
                continue;
            }
            const evq_node *nd = evq_elem_node(e);
            EVQ_CHECK(nd->time >> q->shift == vb_want,
                      "event at %llu ps is in slot %llu, which holds bucket %llu",
                      (unsigned long long)nd->time, (unsigned long long)s,
                      (unsigned long long)vb_want);
            st = evq_verify_node(q, nd, &live, &dead, err);
            if (st != NP_OK)
                return st;
            in_wheel++;
        }
    }
    for (uint64_t w = q->nb >> 12 ? q->nb >> 12 : 1; w < q->n_words1; w++)
        EVQ_CHECK(q->bits1[w] == 0, "level-1 bitmap word %llu past the end is set",
                  (unsigned long long)w);
    st = evq_verify_blocks(q, blocks, err);
    if (st != NP_OK)
        return st;
    EVQ_CHECK(q->n_stage <= EVQ_STAGE, "%u staged events", q->n_stage);
    for (unsigned i = 0; i < q->n_stage; i++) {
        const evq_node *nd = q->stage[i];
        uint64_t vb = nd->time >> q->shift;
        EVQ_CHECK(vb > q->cur_vb && vb - q->cur_vb < q->nb,
                  "staged event at %llu ps is outside the window", (unsigned long long)nd->time);
        st = evq_verify_node(q, nd, &live, &dead, err);
        if (st != NP_OK)
            return st;
    }
    EVQ_CHECK(in_wheel == q->n_wheel, "%llu events in the wheel, %llu counted",
              (unsigned long long)in_wheel, (unsigned long long)q->n_wheel);
    EVQ_CHECK(live == q->n_pending, "%llu live events held, %llu pending counted",
              (unsigned long long)live, (unsigned long long)q->n_pending);
    EVQ_CHECK(dead == q->n_dead, "%llu cancelled events held, %llu counted",
              (unsigned long long)dead, (unsigned long long)q->n_dead);
    uint64_t n_free = 0;
    for (const evq_node *nd = q->free_list; nd; nd = evq_elem_node(nd->next)) {
        EVQ_CHECK(nd->seq == 0, "a free node has seq %llu", (unsigned long long)nd->seq);
        EVQ_CHECK(++n_free <= q->n_chunks * EVQ_CHUNK_NODES, "the free list has a cycle");
    }
    EVQ_CHECK(n_free + live + dead == q->n_chunks * EVQ_CHUNK_NODES,
              "%llu free + %llu held nodes != %llu allocated", (unsigned long long)n_free,
              (unsigned long long)(live + dead),
              (unsigned long long)(q->n_chunks * EVQ_CHUNK_NODES));
    EVQ_CHECK(!q->stop || q->running, "stop flag left set outside a run");
    return NP_OK;
}
