/* test_coll_sched.c — collective schedules (noc/coll_sched.h) checked by running them on
 * values, with no timing, and comparing every rank's buffers with what the op means.
 *
 * The reference is the op's definition, written here: an all-reduce leaves on every rank the
 * sum of every rank's buffer, an all-gather leaves segment s of rank s's buffer everywhere,
 * and so on. Each rank contributes 2^rank, so a sum that counts a rank twice or misses one is
 * seen. The run is adversarial: every send leaves as soon as its deps allow (copying the
 * sender's buffer at that moment), and messages in flight arrive in a seeded random order, so
 * a missing dependency shows up as stale data. Every schedule also passes coll_sched_verify.
 */
#include <stdlib.h>
#include <string.h>

#include "coll_sched.h"
#include "harness.h"

typedef struct msg {
    uint32_t to, recv;
    uint64_t *data; /* elements */
} msg;

typedef struct run {
    const coll_sched *s;
    uint32_t p, P;
    uint64_t elems;
    uint64_t **x, **out;
    uint32_t **left; /* [rank][port * maxsend + i] deps left */
    uint32_t *next;  /* [rank * P + port] */
    uint32_t maxsend;
} run;

static uint64_t xorshift(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Runs s on the buffers x[r], out[r] (elements of 4 bytes). Returns false on a structural
 * failure (a message not element-aligned, a deadlock). */
static bool run_values(const coll_sched *s, uint64_t **x, uint64_t **out, uint64_t elems,
                       uint64_t seed)
{
    uint32_t p = coll_sched_ranks(s) + coll_sched_switches(s), P = coll_sched_ports(s);
    uint32_t maxsend = 0;
    for (uint32_t r = 0; r < p; r++)
        for (uint32_t q = 0; q < P; q++)
            if (coll_sched_sends(s, r, q) > maxsend)
                maxsend = coll_sched_sends(s, r, q);
    uint32_t **left = calloc(p, sizeof *left);
    uint32_t *next = calloc((size_t)p * P, sizeof *next);
    uint64_t total = coll_sched_messages(s);
    msg *fl = calloc(total + 1, sizeof *fl);
    uint64_t nfl = 0, sent = 0, got = 0;
    bool ok = true;
    for (uint32_t r = 0; r < p; r++) {
        left[r] = calloc((size_t)P * maxsend + 1, sizeof **left);
        for (uint32_t q = 0; q < P; q++)
            for (uint32_t i = 0; i < coll_sched_sends(s, r, q); i++) {
                coll_xfer t;
                coll_sched_send(s, r, q, i, &t);
                left[r][q * maxsend + i] = t.deps;
            }
    }
    for (;;) {
        for (uint32_t r = 0; r < p; r++)
            for (uint32_t q = 0; q < P; q++) {
                uint32_t *nx = &next[r * P + q];
                while (*nx < coll_sched_sends(s, r, q) && left[r][q * maxsend + *nx] == 0) {
                    coll_xfer t;
                    coll_sched_send(s, r, q, *nx, &t);
                    if (t.offset % 4 || t.bytes % 4 || t.buf != COLL_BUF_X ||
                        t.offset + t.bytes > elems * 4) {
                        ok = false;
                        goto out;
                    }
                    msg *m = &fl[nfl++];
                    m->to = t.peer;
                    m->recv = t.match;
                    m->data = malloc((t.bytes / 4 + 1) * sizeof *m->data);
                    memcpy(m->data, x[r] + t.offset / 4, t.bytes / 4 * sizeof *m->data);
                    (*nx)++;
                    sent++;
                }
            }
        if (nfl == 0)
            break;
        /* deliver one message in flight, chosen at random */
        uint64_t k = xorshift(&seed) % nfl;
        msg m = fl[k];
        fl[k] = fl[--nfl];
        coll_xfer t;
        coll_sched_recv(s, m.to, m.recv, &t);
        uint64_t *buf = t.buf == COLL_BUF_X ? x[m.to] : out[m.to];
        uint64_t cap = t.buf == COLL_BUF_X ? elems : elems + p; /* OUT: p blocks */
        if (t.offset % 4 || t.bytes % 4 || t.offset + t.bytes > cap * 4) {
            free(m.data);
            ok = false;
            goto out;
        }
        for (uint64_t e = 0; e < t.bytes / 4; e++)
            buf[t.offset / 4 + e] = t.reduce ? buf[t.offset / 4 + e] + m.data[e] : m.data[e];
        free(m.data);
        got++;
        for (uint32_t pq = 0; pq < (t.unblock_ports > 1 ? t.unblock_ports : 1); pq++)
            for (uint32_t i = t.unblock_lo; i < t.unblock_hi; i++)
                left[m.to][(t.unblock_port + pq) * maxsend + i]--;
    }
    ok = sent == total && got == total;
out:
    for (uint64_t i = 0; i < nfl; i++)
        free(fl[i].data);
    for (uint32_t r = 0; r < p; r++)
        free(left[r]);
    free(left);
    free(next);
    free(fl);
    return ok;
}

/* Element range of part i of p of `elems` elements (coll_sched.h's split). */
static uint64_t part(uint64_t elems, uint32_t p, uint32_t i)
{
    return i * (elems / p) + (i < elems % p ? i : elems % p);
}

/* Builds d's schedule, runs it on values and checks the result; returns the failures. */
static int check(coll_sched_desc d, uint64_t elems, uint64_t seed)
{
    d.bytes = elems * 4;
    d.elem_bytes = 4;
    coll_sched *s;
    np_err e = {0};
    if (coll_sched_create(&d, &s, &e) != NP_OK) {
        fprintf(stderr, "%s/%s p=%u: %s\n", coll_op_name(d.op), coll_algo_name(d.algo),
                d.ranks, e.msg);
        return 1;
    }
    int bad = 0;
    if (coll_sched_verify(s, &e) != NP_OK) {
        fprintf(stderr, "%s/%s p=%u: %s\n", coll_op_name(d.op), coll_algo_name(d.algo),
                d.ranks, e.msg);
        bad++;
    }
    uint32_t p = d.ranks, pa = p + coll_sched_switches(s); /* switches: buffers of zeros */
    uint64_t **x = calloc(pa, sizeof *x), **out = calloc(pa, sizeof *out);
    uint64_t all = (p >= 64 ? 0 : (1ULL << p)) - 1;
    uint32_t root = d.root;
    for (uint32_t r = 0; r < pa; r++) {
        x[r] = calloc(elems + 1, sizeof **x);
        out[r] = calloc(elems + p + 1, sizeof **out);
        if (r >= p)
            continue;
        uint32_t vr = (r + p - root) % p;
        for (uint64_t i = 0; i < elems; i++) {
            uint64_t v = 0;
            switch (d.op) {
            case COLL_OP_ALL_REDUCE:
            case COLL_OP_REDUCE_SCATTER:
            case COLL_OP_REDUCE: v = 1ULL << r; break;
            case COLL_OP_ALL_GATHER: v = i >= part(elems, p, r) && i < part(elems, p, r + 1)
                                             ? 1ULL << r : 0; break;
            case COLL_OP_BROADCAST: v = r == root ? 1ULL << r : 0; break;
            case COLL_OP_SCATTER: v = r == root ? i + 1 : 0; break;
            case COLL_OP_GATHER: v = i >= part(elems, p, vr) && i < part(elems, p, vr + 1)
                                         ? 1ULL << r : 0; break;
            case COLL_OP_ALL_TO_ALL: v = 1000 * r + i + 1; break;
            case COLL_OP_SENDRECV: v = 1000 * r + i + 1; break;
            default: break;
            }
            x[r][i] = v;
        }
    }
    if (!run_values(s, x, out, elems, seed)) {
        fprintf(stderr, "%s/%s p=%u elems=%llu: the run did not complete or moved bytes off "
                "element boundaries\n", coll_op_name(d.op), coll_algo_name(d.algo), p,
                (unsigned long long)elems);
        bad++;
    }
    for (uint32_t r = 0; r < p && !bad; r++) {
        uint32_t vr = (r + p - root) % p;
        for (uint64_t i = 0; i < elems; i++) {
            uint64_t got = x[r][i], want = got;
            switch (d.op) {
            case COLL_OP_ALL_REDUCE: want = all; break;
            case COLL_OP_REDUCE_SCATTER:
                if (i >= part(elems, p, r) && i < part(elems, p, r + 1))
                    want = all;
                break;
            case COLL_OP_REDUCE:
                if (r == root)
                    want = all;
                break;
            case COLL_OP_ALL_GATHER:
                for (uint32_t t = 0; t < p; t++)
                    if (i >= part(elems, p, t) && i < part(elems, p, t + 1))
                        want = 1ULL << t;
                break;
            case COLL_OP_BROADCAST: want = 1ULL << root; break;
            case COLL_OP_SCATTER:
                if (i >= part(elems, p, vr) && i < part(elems, p, vr + 1))
                    want = i + 1;
                break;
            case COLL_OP_GATHER:
                if (r == root)
                    for (uint32_t t = 0; t < p; t++)
                        if (i >= part(elems, p, t) && i < part(elems, p, t + 1))
                            want = 1ULL << ((t + root) % p);
                break;
            case COLL_OP_ALL_TO_ALL: {
                /* block from rank t: t's block r (elements part(r) ..) at t * |block r| */
                uint64_t n = part(elems, p, r + 1) - part(elems, p, r);
                if (n && i < p * n) {
                    uint32_t t = (uint32_t)(i / n);
                    got = out[r][i];
                    want = t == r ? got : 1000 * t + part(elems, p, r) + i % n + 1;
                }
                break;
            }
            case COLL_OP_SENDRECV:
                got = out[r][i];
                want = p > 1 ? 1000 * ((r + p - 1) % p) + i + 1 : got;
                break;
            default: break;
            }
            if (got != want) {
                fprintf(stderr, "%s/%s p=%u elems=%llu chunk=%llu root=%u: rank %u element "
                        "%llu is %llx, expected %llx\n", coll_op_name(d.op),
                        coll_algo_name(d.algo), p, (unsigned long long)elems,
                        (unsigned long long)d.chunk_bytes, root, r, (unsigned long long)i,
                        (unsigned long long)got, (unsigned long long)want);
                bad++;
                break;
            }
        }
    }
    for (uint32_t r = 0; r < pa; r++) {
        free(x[r]);
        free(out[r]);
    }
    free(x);
    free(out);
    coll_sched_free(s);
    return bad;
}

TEST(every_schedule_computes_its_op_on_values_for_odd_groups_sizes_chunks_and_roots)
{
    static const uint32_t ps[] = {1, 2, 3, 4, 5, 7, 8, 16};
    static const uint64_t ns[] = {1, 3, 7, 64, 1001};
    static const uint64_t chunks[] = {0, 8, 36};
    int bad = 0, runs = 0;
    uint64_t seed = 12345;
    for (int op = 0; op < COLL_OP_COUNT; op++)
        for (int al = 1; al < COLL_ALGO_COUNT; al++) {
            if (!coll_algo_supported((coll_op)op, (coll_algo)al))
                continue;
            for (size_t a = 0; a < sizeof ps / sizeof *ps; a++) {
                uint32_t p = ps[a];
                if (al == COLL_ALGO_RHD && (p & (p - 1)))
                    continue;
                for (size_t b = 0; b < sizeof ns / sizeof *ns; b++)
                    for (size_t c = 0; c < sizeof chunks / sizeof *chunks; c++)
                        for (uint32_t root = 0; root < p; root += p > 2 ? p - 1 : 1) {
                            coll_sched_desc d = {.op = (coll_op)op, .algo = (coll_algo)al,
                                                 .ranks = p, .chunk_bytes = chunks[c],
                                                 .root = root};
                            bad += check(d, ns[b], seed++);
                            runs++;
                        }
            }
        }
    CU_ASSERT(runs > 500);
    CU_ASSERT_EQUAL(bad, 0);
}

TEST(rings_in_any_order_and_multi_level_rings_compute_their_ops)
{
    uint32_t order[16];
    uint64_t seed = 777;
    int bad = 0;
    for (uint32_t p = 2; p <= 16; p += 3) {
        for (uint32_t i = 0; i < p; i++)
            order[i] = i;
        for (uint32_t i = p - 1; i > 0; i--) { /* a seeded shuffle */
            uint32_t j = (uint32_t)(xorshift(&seed) % (i + 1)), t = order[i];
            order[i] = order[j];
            order[j] = t;
        }
        static const coll_op ops[] = {COLL_OP_ALL_REDUCE, COLL_OP_ALL_GATHER,
                                      COLL_OP_REDUCE_SCATTER};
        for (int k = 0; k < 3; k++)
            for (uint64_t chunk = 0; chunk <= 16; chunk += 16) {
                coll_sched_desc d = {.op = ops[k], .algo = COLL_ALGO_RING, .ranks = p,
                                     .order = order, .chunk_bytes = chunk};
                bad += check(d, 5 * p + 3, seed++);
                if (ops[k] == COLL_OP_ALL_REDUCE) {
                    d.algo = COLL_ALGO_BIRING;
                    bad += check(d, 5 * p + 3, seed++);
                }
            }
    }
    static const uint32_t levels[][5] = {/* ranks, levels... */
                                         {16, 4, 4}, {16, 2, 8}, {16, 2, 2, 4}, {12, 3, 4},
                                         {8, 2, 2, 2}, {24, 2, 3, 4}, {6, 1, 6}, {6, 6}};
    for (size_t k = 0; k < sizeof levels / sizeof *levels; k++) {
        coll_sched_desc d = {.op = COLL_OP_ALL_REDUCE, .algo = COLL_ALGO_HIER,
                             .ranks = levels[k][0]};
        for (uint32_t e = 1; e < 5 && levels[k][e]; e++)
            d.level_ranks[d.n_levels++] = levels[k][e];
        for (uint32_t i = 0; i < d.ranks; i++)
            order[i % 16] = i; /* identity, and a shuffle below for 16 ranks */
        bad += check(d, 100, seed++);
        d.chunk_bytes = 12;
        bad += check(d, 100, seed++);
        if (d.ranks == 16) {
            for (uint32_t i = 15; i > 0; i--) {
                uint32_t j = (uint32_t)(xorshift(&seed) % (i + 1)), t = order[i];
                order[i] = order[j];
                order[j] = t;
            }
            d.order = order;
            bad += check(d, 100, seed++);
        }
    }
    CU_ASSERT_EQUAL(bad, 0);
}

/* NCCL's channels: C rings side by side, each in its own order, ring c over part c of every
 * rank's segment; the ops' results are those of one ring (rank r ends a reduce-scatter with
 * segment r, starts an all-gather from it). */
TEST(channels_of_rings_in_their_own_orders_compute_their_ops)
{
    static const uint32_t ps[] = {2, 3, 5, 8, 16};
    static const uint32_t cs[] = {2, 3, 8};
    static const coll_op ops[] = {COLL_OP_ALL_REDUCE, COLL_OP_ALL_GATHER,
                                  COLL_OP_REDUCE_SCATTER};
    uint32_t orders[8 * 16];
    uint64_t seed = 4242;
    int bad = 0, runs = 0;
    for (size_t a = 0; a < sizeof ps / sizeof *ps; a++)
        for (size_t b = 0; b < sizeof cs / sizeof *cs; b++) {
            uint32_t p = ps[a], C = cs[b];
            for (uint32_t c = 0; c < C; c++) { /* a seeded shuffle per channel */
                uint32_t *o = orders + (size_t)c * p;
                for (uint32_t i = 0; i < p; i++)
                    o[i] = i;
                for (uint32_t i = p - 1; i > 0; i--) {
                    uint32_t j = (uint32_t)(xorshift(&seed) % (i + 1)), t = o[i];
                    o[i] = o[j];
                    o[j] = t;
                }
            }
            for (int k = 0; k < 3; k++)
                for (uint64_t chunk = 0; chunk <= 16; chunk += 16)
                    for (int own = 0; own < 2; own++) {
                        static const uint64_t ns[] = {1, 7, 83, 1001};
                        for (size_t n = 0; n < sizeof ns / sizeof *ns; n++) {
                            coll_sched_desc d = {.op = ops[k], .algo = COLL_ALGO_RING,
                                                 .ranks = p, .chunk_bytes = chunk,
                                                 .channels = C,
                                                 .channel_orders = own ? orders : NULL};
                            bad += check(d, ns[n], seed++);
                            runs++;
                        }
                    }
        }
    CU_ASSERT(runs > 300);
    CU_ASSERT_EQUAL(bad, 0);
    /* channels are rings' alone, and at most COLL_MAX_CHANNELS; a channel order is a
     * permutation */
    coll_sched *s;
    np_err e = {0};
    coll_sched_desc d = {.op = COLL_OP_ALL_REDUCE, .algo = COLL_ALGO_TREE, .ranks = 4,
                         .bytes = 64, .channels = 2};
    CU_ASSERT_EQUAL(coll_sched_create(&d, &s, &e), NP_ERR_INCONSISTENT);
    d.algo = COLL_ALGO_RING;
    d.channels = COLL_MAX_CHANNELS + 1;
    CU_ASSERT_EQUAL(coll_sched_create(&d, &s, &e), NP_ERR_INCONSISTENT);
    uint32_t twice[8] = {0, 1, 2, 3, 0, 1, 1, 3};
    d.channels = 2;
    d.channel_orders = twice;
    CU_ASSERT_EQUAL(coll_sched_create(&d, &s, &e), NP_ERR_RANGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "channel's ring order"));
    /* C rings of p ranks: C ports, each ring's 2(p - 1) steps */
    twice[6] = 2;
    CU_ASSERT_EQUAL_FATAL(coll_sched_create(&d, &s, &e), NP_OK);
    CU_ASSERT_EQUAL(coll_sched_ports(s), 2);
    CU_ASSERT_EQUAL(coll_sched_messages(s), 2 * 4 * 2 * 3);
    coll_sched_free(s);
}

/* NVLS on NCCL's channels (contiguous parts of the buffer, each its own ports) and with its
 * heads taking a channel's slices one at a time (the last contribution of each posted): the
 * same sums on every rank, for odd groups, sizes and chunks; p contributions, a sum, a store
 * and p multicasts per chip and slice, so 2 p (p + 1) messages a slice. */
TEST(nvls_on_channels_with_serial_heads_computes_the_all_reduce)
{
    static const uint32_t ps[] = {2, 3, 5, 8};
    static const uint32_t cs[] = {1, 2, 3, 16};
    static const uint64_t ns[] = {1, 7, 83, 1001};
    uint64_t seed = 777;
    int bad = 0, runs = 0;
    for (size_t a = 0; a < sizeof ps / sizeof *ps; a++)
        for (size_t b = 0; b < sizeof cs / sizeof *cs; b++)
            for (int serial = 0; serial < 2; serial++)
                for (uint64_t chunk = 8; chunk <= 512; chunk *= 8)
                    for (size_t n = 0; n < sizeof ns / sizeof *ns; n++) {
                        coll_sched_desc d = {.op = COLL_OP_ALL_REDUCE, .algo = COLL_ALGO_NVLS,
                                             .ranks = ps[a], .chunk_bytes = chunk,
                                             .channels = cs[b], .heads_serial = serial};
                        bad += check(d, ns[n], seed++);
                        runs++;
                    }
    CU_ASSERT(runs >= 190);
    CU_ASSERT_EQUAL(bad, 0);
    /* 4 ranks, 2 channels, 1 MiB in chunks of 16 KiB: 8 slices a channel */
    coll_sched *s;
    np_err e = {0};
    coll_sched_desc d = {.op = COLL_OP_ALL_REDUCE, .algo = COLL_ALGO_NVLS, .ranks = 4,
                         .bytes = 1 << 20, .chunk_bytes = 16 << 10, .channels = 2,
                         .heads_serial = true};
    CU_ASSERT_EQUAL_FATAL(coll_sched_create(&d, &s, &e), NP_OK);
    CU_ASSERT_EQUAL(coll_sched_messages(s), 16 * 2 * 4 * 5);
    CU_ASSERT_EQUAL(coll_sched_ports(s), 2 * 2 * 4);
    coll_xfer x;
    coll_sched_send(s, 1, 0, 3, &x); /* chip 1's last contribution to slice 0: posted */
    CU_ASSERT(x.post && x.bytes == 16 << 10);
    coll_sched_send(s, 1, 0, 2, &x);
    CU_ASSERT(!x.post);
    CU_ASSERT_EQUAL(coll_sched_verify(s, &e), NP_OK);
    coll_sched_free(s);
}

TEST(schedules_refuse_groups_that_do_not_fit_and_count_their_messages)
{
    coll_sched *s;
    np_err e = {0};
    coll_sched_desc d = {.op = COLL_OP_ALL_REDUCE, .algo = COLL_ALGO_RHD, .ranks = 6,
                         .bytes = 64};
    CU_ASSERT_EQUAL(coll_sched_create(&d, &s, &e), NP_ERR_INCONSISTENT);
    d = (coll_sched_desc){.op = COLL_OP_ALL_REDUCE, .algo = COLL_ALGO_HIER, .ranks = 12,
                          .bytes = 64, .n_levels = 2, .level_ranks = {5, 3}};
    CU_ASSERT_EQUAL(coll_sched_create(&d, &s, &e), NP_ERR_INCONSISTENT);
    uint32_t notperm[] = {0, 1, 1, 3};
    d = (coll_sched_desc){.op = COLL_OP_ALL_GATHER, .algo = COLL_ALGO_RING, .ranks = 4,
                          .bytes = 64, .order = notperm};
    CU_ASSERT_EQUAL(coll_sched_create(&d, &s, &e), NP_ERR_RANGE);
    d = (coll_sched_desc){.op = COLL_OP_BROADCAST, .algo = COLL_ALGO_RING, .ranks = 4};
    CU_ASSERT_EQUAL(coll_sched_create(&d, &s, &e), NP_ERR_INCONSISTENT);
    d = (coll_sched_desc){.op = COLL_OP_BROADCAST, .algo = COLL_ALGO_TREE, .ranks = 4,
                          .root = 4};
    CU_ASSERT_EQUAL(coll_sched_create(&d, &s, &e), NP_ERR_RANGE);
    /* message counts: ring all-reduce 2p(p-1) per chunk, pairwise all-to-all p(p-1),
     * binomial broadcast p-1 per chunk, rhd all-reduce 2 p log2 p */
    struct { coll_op op; coll_algo a; uint32_t p; uint64_t bytes, chunk, msgs; } cases[] = {
        {COLL_OP_ALL_REDUCE, COLL_ALGO_RING, 8, 8 * 64, 0, 2 * 8 * 7},
        {COLL_OP_ALL_REDUCE, COLL_ALGO_RING, 8, 8 * 64, 16, 2 * 8 * 7 * 4},
        {COLL_OP_ALL_TO_ALL, COLL_ALGO_PAIRWISE, 9, 900, 0, 9 * 8},
        {COLL_OP_ALL_TO_ALL, COLL_ALGO_DIRECT, 9, 900, 0, 9 * 8},
        {COLL_OP_BROADCAST, COLL_ALGO_TREE, 13, 1000, 100, 12 * 10},
        {COLL_OP_ALL_REDUCE, COLL_ALGO_RHD, 16, 1 << 12, 0, 2 * 16 * 4},
        {COLL_OP_ALL_REDUCE, COLL_ALGO_HIER, 16, 1 << 12, 0, 16 * 3 * 2 + 16 * 3 * 2},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        d = (coll_sched_desc){.op = cases[k].op, .algo = cases[k].a, .ranks = cases[k].p,
                              .bytes = cases[k].bytes, .chunk_bytes = cases[k].chunk};
        CU_ASSERT_EQUAL_FATAL(coll_sched_create(&d, &s, &e), NP_OK);
        CU_ASSERT_EQUAL(coll_sched_messages(s), cases[k].msgs);
        coll_sched_free(s);
    }
}
