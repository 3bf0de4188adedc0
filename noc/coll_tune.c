/* coll_tune.c — the tuner's cost models and memo (see coll_tune.h; the formulas are in
 * docs/collectives.md, "Choosing the algorithm").
 *
 * A group profile holds, per algorithm, the alpha and beta of its patterns on the network,
 * measured the first time an answer for that (group, algorithm[, root]) is needed. Answers
 * are memoised in a hash map keyed by (group, op, bytes, element size, chunk, root). */
#include "coll_tune.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "coll.h"
#include "coll_impl.h"
#include "coll_topo.h"
#include "hmap.h"

/* A pattern's cost: alpha (ps) and beta (ps per byte of each message), and the bottleneck
 * bandwidth of its fastest route (bytes/s: where a paced protocol stretches messages most).
 * alpha is over every message; ai and an over those within islands and those over the
 * scale-out network (which take a protocol's network step), fn the fraction of the latter,
 * each a mean or a maximum as alpha. A ring whose hops differ (channels across islands) is
 * paced by the mean of its hops where latency dominates and by its slowest where bandwidth
 * does: bmean is that mean. */
typedef struct tune_pat {
    double alpha, beta, bw;
    double ai, an, fn;
    double bmean; /* mean_lat patterns: the mean over messages of their own slowest link's
                     load over its bandwidth (beta when every message sees the same) */
    bool mean;
} tune_pat;

#define TUNE_MAX_ROUNDS 64 /* log2 of the largest group, twice */

typedef struct tune_profile {
    bool done;
    uint32_t root;               /* trees and chains: the root it was measured for */
    uint32_t n;                  /* rounds / levels used */
    tune_pat pat[TUNE_MAX_ROUNDS];
    tune_pat pat2[TUNE_MAX_ROUNDS]; /* trees: the way down; rhd: the doubling steps */
    uint32_t q[COLL_MAX_LEVELS]; /* hier: ranks per level */
    uint32_t want, lanes;        /* ring: channels asked for and run (coll_topo.h) */
} tune_profile;

enum { TUNE_RING, TUNE_BIRING, TUNE_TREE, TUNE_CHAIN, TUNE_RHD, TUNE_HIER, TUNE_PAIRWISE,
       TUNE_DIRECT, TUNE_NVLS, TUNE_FAMILIES };

typedef struct tune_group {
    uint64_t hash;
    uint32_t p;
    uint32_t *chips;
    tune_profile prof[TUNE_FAMILIES];
} tune_group;

typedef struct tune_answer {
    uint32_t group, channels;
    coll_op op;
    uint64_t bytes, chunk;
    uint32_t elem, root;
    coll_algo want_algo;   /* asked for: AUTO or fixed */
    coll_proto want_proto; /* asked for: AUTO or fixed (SYSTEM resolved) */
    coll_tune_pick pick;
} tune_answer;

struct coll_tuner {
    net *n;
    arch_config cfg;
    tune_group *groups;
    uint32_t n_groups, cap_groups;
    np_hmap group_map, answer_map; /* hashes -> groups, answers (their keys compared) */
    tune_answer *answers;
    uint32_t n_answers, cap_answers;
    uint32_t *load;      /* per link: messages of the pattern being measured */
    uint32_t *touched;   /* links with a load */
    uint64_t computed, memoised;
};

/* ---- maps --------------------------------------------------------------------------------- */

static uint64_t tune_mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    h ^= h >> 31;
    h *= 0xbf58476d1ce4e5b9ULL;
    return h ^ (h >> 29);
}

/* Calls match(ctx, value) on every value stored under key until it returns true; returns
 * that value or UINT32_MAX. */
static uint32_t tune_map_find(const np_hmap *m, uint64_t key, bool (*match)(void *, uint32_t),
                              void *ctx)
{
    for (uint32_t it = 0, id; (id = np_hmap_next(m, key, &it)) != NP_HMAP_END;)
        if (match(ctx, id))
            return id;
    return UINT32_MAX;
}

/* ---- the tuner --------------------------------------------------------------------------- */

np_status coll_tuner_create(net *n, const arch_config *cfg, coll_tuner **out, np_err *err)
{
    coll_tuner *t = calloc(1, sizeof *t);
    if (!t)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory creating a tuner");
    t->n = n;
    t->cfg = *cfg;
    t->load = calloc(net_links(n) + 1, sizeof *t->load);
    t->touched = malloc((net_links(n) + 1) * sizeof *t->touched);
    if (!t->load || !t->touched) {
        coll_tuner_free(t);
        return np_err_set(err, NP_ERR_NOMEM, "out of memory creating a tuner");
    }
    *out = t;
    return NP_OK;
}

void coll_tuner_free(coll_tuner *t)
{
    if (!t)
        return;
    for (uint32_t i = 0; i < t->n_groups; i++)
        free(t->groups[i].chips);
    free(t->groups);
    np_hmap_free(&t->group_map);
    np_hmap_free(&t->answer_map);
    free(t->answers);
    free(t->load);
    free(t->touched);
    free(t);
}

void coll_tuner_stats(const coll_tuner *t, uint64_t *computed, uint64_t *memoised)
{
    *computed = t->computed;
    *memoised = t->memoised;
}

typedef struct group_key {
    coll_tuner *t;
    const uint32_t *chips;
    uint32_t p;
} group_key;

static bool group_match(void *ctx, uint32_t g)
{
    group_key *k = ctx;
    const tune_group *tg = &k->t->groups[g];
    if (tg->p != k->p)
        return false;
    for (uint32_t i = 0; i < k->p; i++)
        if (tg->chips[i] != (k->chips ? k->chips[i] : i))
            return false;
    return true;
}

/* The group's index, added when new. UINT32_MAX when out of memory. */
static uint32_t tune_group_of(coll_tuner *t, const uint32_t *chips, uint32_t p)
{
    uint64_t h = tune_mix(0x1234, p);
    for (uint32_t i = 0; i < p; i++)
        h = tune_mix(h, chips ? chips[i] : i);
    group_key k = {t, chips, p};
    uint32_t g = tune_map_find(&t->group_map, h, group_match, &k);
    if (g != UINT32_MAX)
        return g;
    if (t->n_groups == t->cap_groups) {
        uint32_t cap = t->cap_groups ? 2 * t->cap_groups : 16;
        tune_group *v = realloc(t->groups, (size_t)cap * sizeof *v);
        if (!v)
            return UINT32_MAX;
        t->groups = v;
        t->cap_groups = cap;
    }
    tune_group *tg = &t->groups[t->n_groups];
    memset(tg, 0, sizeof *tg);
    tg->hash = h;
    tg->p = p;
    tg->chips = malloc((size_t)p * sizeof *tg->chips);
    if (!tg->chips || !np_hmap_put(&t->group_map, h, t->n_groups)) {
        free(tg->chips);
        return UINT32_MAX;
    }
    for (uint32_t i = 0; i < p; i++)
        tg->chips[i] = chips ? chips[i] : i;
    return t->n_groups++;
}

/* Measures the pattern of messages from rank src[i] to rank dst[i] of the group: alpha is
 * the largest path latency (mean_lat: the mean), beta the most loaded link's messages over
 * its bandwidth. */
static np_status tune_pattern(coll_tuner *t, const tune_group *g, const uint32_t *src,
                              const uint32_t *dst, uint32_t m, bool mean_lat, tune_pat *out,
                              np_err *err)
{
    double lat_max = 0, lat_sum = 0, bw = 0, lm[2] = {0, 0}, ls[2] = {0, 0};
    uint32_t nt = 0, cnt[2] = {0, 0};
    for (uint32_t i = 0; i < m; i++) {
        net_path_info pi;
        uint32_t a = g->chips[src[i]], b = g->chips[dst[i]];
        if (net_route(t->n, a, b, &pi, err) != NP_OK)
            return err->status;
        int k = net_is_scaleout(t->n, a, b);
        lat_max = fmax(lat_max, (double)pi.latency_ps);
        lat_sum += (double)pi.latency_ps;
        lm[k] = fmax(lm[k], (double)pi.latency_ps);
        ls[k] += (double)pi.latency_ps;
        cnt[k]++;
        bw = fmax(bw, pi.bytes_per_s);
        for (uint32_t j = 0; j < pi.n_links; j++)
            if (t->load[pi.links[j]]++ == 0)
                t->touched[nt++] = pi.links[j];
    }
    double beta = 0;
    for (uint32_t i = 0; i < nt; i++) {
        net_link_info li;
        net_link_get(t->n, t->touched[i], &li);
        beta = fmax(beta, t->load[t->touched[i]] * 1e12 / li.bytes_per_s);
    }
    double bsum = 0, bmin = INFINITY;
    for (uint32_t i = 0; mean_lat && i < m; i++) { /* each message's own slowest link */
        net_path_info pi;
        if (net_route(t->n, g->chips[src[i]], g->chips[dst[i]], &pi, err) != NP_OK)
            return err->status;
        double b = 0;
        for (uint32_t j = 0; j < pi.n_links; j++) {
            net_link_info li;
            net_link_get(t->n, pi.links[j], &li);
            b = fmax(b, t->load[pi.links[j]] * 1e12 / li.bytes_per_s);
        }
        bsum += b;
        bmin = fmin(bmin, b);
    }
    for (uint32_t i = 0; i < nt; i++)
        t->load[t->touched[i]] = 0;
    *out = (tune_pat){.alpha = mean_lat && m ? lat_sum / m : lat_max, .beta = beta, .bw = bw};
    out->bmean = mean_lat && m && beta - bmin > 1e-9 * beta ? bsum / m : beta;
    out->mean = mean_lat;
    out->ai = mean_lat ? (cnt[0] ? ls[0] / cnt[0] : 0) : lm[0];
    out->an = mean_lat ? (cnt[1] ? ls[1] / cnt[1] : 0) : lm[1];
    out->fn = m ? (double)cnt[1] / m : 0;
    return NP_OK;
}

/* The fitted ring order or levels of the group, as the flow engine will run them; a ring with
 * `want` channels: their count in *lanes and their orders from order[p] on (order needs
 * p x (1 + want) entries). */
static np_status tune_fit(coll_tuner *t, const tune_group *g, coll_algo a, uint32_t want,
                          uint32_t *order, uint32_t *lanes, uint32_t *n_levels,
                          uint32_t levels[COLL_MAX_LEVELS], np_err *err)
{
    coll_desc d = {.algo = a, .chips = g->chips, .n_chips = g->p, .channels = want};
    coll_sched_desc sd = {.algo = a, .ranks = g->p};
    uint32_t *o;
    if (coll_fit(t->n, &d, &sd, &o, err) != NP_OK)
        return err->status;
    for (uint32_t k = 0; k < g->p; k++)
        order[k] = o ? o[k] : k;
    *lanes = sd.channels > 1 ? sd.channels : 1;
    if (*lanes > 1)
        memcpy(order + g->p, sd.channel_orders, (size_t)g->p * *lanes * sizeof *order);
    free(o);
    *n_levels = sd.n_levels;
    memcpy(levels, sd.level_ranks, sizeof sd.level_ranks);
    if (a == COLL_ALGO_HIER && sd.n_levels == 0) { /* the schedule's default: two levels */
        uint32_t best = 1;
        for (uint32_t k = 1; (uint64_t)k * k <= g->p; k++)
            if (g->p % k == 0)
                best = k;
        levels[0] = best;
        levels[1] = g->p / best;
        *n_levels = 2;
    }
    return NP_OK;
}

/* Measures family f's patterns on group g (root for trees and chains, channels wanted for
 * rings). */
static np_status tune_profile_of(coll_tuner *t, tune_group *g, int f, uint32_t root,
                                 uint32_t want, tune_profile **out, np_err *err)
{
    if (f < 0 || f >= TUNE_FAMILIES)
        return np_err_set(err, NP_ERR_INTERNAL, "no cost model for family %d", f);
    tune_profile *pr = &g->prof[f];
    bool rooted = f == TUNE_TREE || f == TUNE_CHAIN;
    want = f == TUNE_RING && want > 1 ? (want < COLL_MAX_CHANNELS ? want : COLL_MAX_CHANNELS) : 1;
    *out = pr;
    if (pr->done && (!rooted || pr->root == root) && pr->want == want)
        return NP_OK;
    uint32_t p = g->p;
    size_t half = (size_t)p * (want > 2 ? want : 2);
    uint32_t *src = malloc(half * 2 * sizeof *src), *dst = src ? src + half : NULL;
    uint32_t *order = malloc((size_t)p * (1 + want) * sizeof *order);
    np_status st = NP_OK;
    if (!src || !order) {
        st = np_err_set(err, NP_ERR_NOMEM, "out of memory measuring a collective");
        goto out;
    }
    memset(pr, 0, sizeof *pr);
    pr->root = root;
    pr->want = want;
    pr->lanes = 1;
    uint32_t m = 0;
    switch (f) {
    case TUNE_RING:
    case TUNE_BIRING: { /* every lane's hops at once (channels: each ring in its order) */
        uint32_t nl, lv[COLL_MAX_LEVELS];
        if ((st = tune_fit(t, g, COLL_ALGO_RING, want, order, &pr->lanes, &nl, lv, err)) !=
            NP_OK)
            goto out;
        for (uint32_t c = 0; c < pr->lanes; c++) {
            const uint32_t *o = pr->lanes > 1 ? order + (size_t)p * (1 + c) : order;
            for (uint32_t k = 0; k < p; k++) {
                src[m] = o[k], dst[m++] = o[(k + 1) % p];
                if (f == TUNE_BIRING)
                    src[m] = o[(k + 1) % p], dst[m++] = o[k];
            }
        }
        st = tune_pattern(t, g, src, dst, m, true, &pr->pat[0], err);
        pr->n = 1;
        break;
    }
    case TUNE_TREE: /* binomial rounds by mask: up (child -> parent) and down */
        for (uint32_t mask = 1; mask < p && st == NP_OK; mask *= 2) {
            m = 0;
            for (uint32_t vr = 0; vr + mask < p; vr += 2 * mask)
                src[m] = (vr + mask + root) % p, dst[m++] = (vr + root) % p;
            st = tune_pattern(t, g, src, dst, m, false, &pr->pat[pr->n], err);
            if (st == NP_OK)
                st = tune_pattern(t, g, dst, src, m, false, &pr->pat2[pr->n], err);
            pr->n++;
        }
        break;
    case TUNE_CHAIN:
        for (uint32_t vr = 0; vr + 1 < p; vr++)
            src[m] = (vr + 1 + root) % p, dst[m++] = (vr + root) % p;
        st = tune_pattern(t, g, src, dst, m, true, &pr->pat[0], err); /* up */
        if (st == NP_OK)
            st = tune_pattern(t, g, dst, src, m, true, &pr->pat2[0], err); /* down */
        pr->n = 1;
        break;
    case TUNE_RHD: /* exchanges with rank ^ mask, mask = p/2, ..., 1 (halving order) */
        for (uint32_t mask = p / 2; mask >= 1 && st == NP_OK; mask /= 2) {
            m = 0;
            for (uint32_t r = 0; r < p; r++)
                src[m] = r, dst[m++] = r ^ mask;
            st = tune_pattern(t, g, src, dst, m, false, &pr->pat[pr->n++], err);
        }
        break;
    case TUNE_HIER: {
        uint32_t nl, lv[COLL_MAX_LEVELS], lanes;
        if ((st = tune_fit(t, g, COLL_ALGO_HIER, 1, order, &lanes, &nl, lv, err)) != NP_OK)
            goto out;
        uint32_t stride = 1;
        for (uint32_t e = 0; e < nl && st == NP_OK; e++) {
            if (lv[e] < 2)
                continue;
            m = 0;
            for (uint32_t pos = 0; pos < p; pos++) {
                uint32_t k = (pos / stride) % lv[e], k2 = (k + 1) % lv[e];
                src[m] = order[pos], dst[m++] = order[pos - k * stride + k2 * stride];
            }
            pr->q[pr->n] = lv[e];
            st = tune_pattern(t, g, src, dst, m, true, &pr->pat[pr->n++], err);
            stride *= lv[e];
        }
        break;
    }
    case TUNE_PAIRWISE: { /* step k: r -> r + k; sampled beyond 256 ranks */
        uint32_t steps = p - 1, take = steps > 255 ? 64 : steps;
        double a = 0, b = 0, bw = 0;
        for (uint32_t i = 0; i < take && st == NP_OK; i++) {
            uint32_t k = 1 + (uint32_t)((uint64_t)i * steps / take);
            m = 0;
            for (uint32_t r = 0; r < p; r++)
                src[m] = r, dst[m++] = (r + k) % p;
            tune_pat x;
            st = tune_pattern(t, g, src, dst, m, false, &x, err);
            a += x.alpha;
            b += x.beta;
            bw = fmax(bw, x.bw);
        }
        pr->pat[0] = (tune_pat){.alpha = a * steps / take, .beta = b * steps / take,
                                .bw = bw}; /* sums over steps */
        pr->n = 1;
        break;
    }
    case TUNE_NVLS: { /* up: every chip to the switch; down: the switch to every chip */
        uint32_t sw = t->cfg.system.switch_reduce ? net_chip_switch(t->n, g->chips[0])
                                                  : UINT32_MAX;
        for (uint32_t r = 1; r < p && sw != UINT32_MAX; r++)
            if (net_chip_switch(t->n, g->chips[r]) != sw)
                sw = UINT32_MAX;
        if (sw == UINT32_MAX) {
            st = np_err_set(err, NP_ERR_INCONSISTENT, "nvls needs the group's chips on one "
                            "switch that reduces");
            goto out;
        }
        tune_pat up = {.beta = 0}, down = {.beta = 0};
        for (uint32_t r = 0; r < p && st == NP_OK; r++)
            for (int dir = 0; dir < 2 && st == NP_OK; dir++) {
                net_path_info pi;
                uint32_t c = g->chips[r];
                st = dir ? net_route(t->n, sw, c, &pi, err) : net_route(t->n, c, sw, &pi, err);
                tune_pat *x = dir ? &down : &up;
                x->alpha = fmax(x->alpha, (double)pi.latency_ps);
                x->beta = fmax(x->beta, 1e12 / pi.bytes_per_s);
                x->bw = fmax(x->bw, pi.bytes_per_s);
            }
        up.bmean = up.beta;
        down.bmean = down.beta;
        pr->pat[0] = up;
        pr->pat2[0] = down;
        pr->n = 1;
        break;
    }
    case TUNE_DIRECT: { /* every pair at once; every 16th source beyond 256 ranks */
        uint32_t every = p > 256 ? 16 : 1;
        uint32_t *s2 = malloc((size_t)p * p / every * 2 * sizeof *s2 + sizeof *s2);
        if (!s2) {
            st = np_err_set(err, NP_ERR_NOMEM, "out of memory measuring a collective");
            goto out;
        }
        uint32_t *d2 = s2 + (size_t)p * p / every;
        for (uint32_t r = 0; r < p; r += every)
            for (uint32_t k = 1; k < p; k++)
                s2[m] = r, d2[m++] = (r + k) % p;
        st = tune_pattern(t, g, s2, d2, m, false, &pr->pat[0], err);
        pr->pat[0].beta *= every;
        pr->n = 1;
        free(s2);
        break;
    }
    }
    pr->done = st == NP_OK;
out:
    free(src);
    free(order);
    return st;
}

/* The reduction time (ps) of `bytes`. */
static double tune_red(const coll_tuner *t, double bytes, uint32_t elem)
{
    return (double)coll_reduce_ps(&t->cfg, (uint32_t)t->cfg.chip.cores, (uint64_t)bytes, elem);
}

static int tune_family(coll_algo a)
{
    switch (a) {
    case COLL_ALGO_RING: return TUNE_RING;
    case COLL_ALGO_BIRING: return TUNE_BIRING;
    case COLL_ALGO_TREE: return TUNE_TREE;
    case COLL_ALGO_CHAIN: return TUNE_CHAIN;
    case COLL_ALGO_RHD: return TUNE_RHD;
    case COLL_ALGO_HIER: return TUNE_HIER;
    case COLL_ALGO_PAIRWISE: return TUNE_PAIRWISE;
    case COLL_ALGO_DIRECT: return TUNE_DIRECT;
    case COLL_ALGO_NVLS: return TUNE_NVLS;
    default: return -1;
    }
}

/* A pattern's latency with a protocol's steps (within islands and over the scale-out network):
 * each message takes at least its step; a mean over messages or the largest, as measured. */
static double tune_alpha(const tune_pat *x, double step, double nstep)
{
    if (x->fn <= 0)
        return fmax(x->alpha, step);
    double i = fmax(x->ai, step), o = fmax(x->an, nstep);
    if (x->mean)
        return (1 - x->fn) * i + x->fn * o;
    return fmax(x->fn < 1 ? i : 0, o);
}

/* The model of algo with protocol proto (RAW, LL, LL128 or SIMPLE) for q on group g (see
 * docs/collectives.md). A protocol makes a message's latency at least its step (A), scales
 * beta by its wire bytes per payload byte on the pattern's fastest route (B), and adds its
 * base cost once. */
static np_status tune_model(coll_tuner *t, tune_group *g, const coll_tune_query *q,
                            coll_algo algo, coll_proto proto, double *out, np_err *err)
{
    uint32_t p = g->p, el = q->elem_bytes ? q->elem_bytes : 4;
    double n = (double)q->bytes, P = p;
    if (!coll_algo_supported(q->op, algo) || algo == COLL_ALGO_AUTO)
        return np_err_set(err, NP_ERR_INCONSISTENT, "%s has no %s algorithm",
                          coll_op_name(q->op), coll_algo_name(algo));
    if (algo == COLL_ALGO_RHD && (p & (p - 1)))
        return np_err_set(err, NP_ERR_INCONSISTENT, "recursive halving/doubling needs a "
                          "power-of-two group, not %u ranks", (unsigned)p);
    if (p < 2) {
        *out = 0;
        return NP_OK;
    }
    coll_proto_params pp;
    coll_proto_params_of(&t->cfg, proto, &pp);
    bool spans = false; /* the group spans islands: steps within one take the net overhead */
    for (uint32_t i = 1; i < p && !spans; i++)
        spans = net_is_scaleout(t->n, g->chips[0], g->chips[i]);
    double step = (double)(spans ? pp.span_step_ps : pp.step_ps), nstep = (double)pp.net_step_ps;
#define A(pt) tune_alpha(&(pt), step, nstep)
#define B(pt) ((pt).beta * coll_proto_wire_factor(&pp, (pt).bw))
    bool one_algo = q->op == COLL_OP_SENDRECV || q->op == COLL_OP_SCATTER ||
                    q->op == COLL_OP_GATHER;
    if (one_algo && proto == COLL_PROTO_RAW) {
        *out = 0; /* one algorithm and no protocol: nothing to choose */
        return NP_OK;
    }
    tune_profile *pr = NULL;
    uint32_t root = q->op == COLL_OP_ALL_REDUCE ? 0 : q->root;
    int fam = q->op == COLL_OP_SENDRECV ? TUNE_RING /* each rank to the next: a ring step */
              : q->op == COLL_OP_SCATTER || q->op == COLL_OP_GATHER ? TUNE_TREE
                                                                     : tune_family(algo);
    if (fam < 0)
        return np_err_set(err, NP_ERR_INCONSISTENT, "no model for %s", coll_algo_name(algo));
    uint32_t want = q->channels ? q->channels : (uint32_t)t->cfg.system.coll_channels;
    np_status st = tune_profile_of(t, g, fam, root, want, &pr, err);
    if (st != NP_OK)
        return st;
    const tune_pat *x = pr->pat;
    double T = 0, s = n / P;
    bool reduce = coll_op_reduces(q->op);
    if (q->op == COLL_OP_SENDRECV) {
        T = A(*x) + n * B(*x);
    } else if (q->op == COLL_OP_SCATTER || q->op == COLL_OP_GATHER) {
        for (uint32_t r = 0; r < pr->n; r++) /* round r moves up to half of what is left */
            T += A(pr->pat[r]) + n / (double)(2u << r) * B(pr->pat[r]);
    } else {
        switch (algo) {
        case COLL_ALGO_RING: { /* each of the lanes moves s / lanes a step, paced by the mean
                                  hop or the slowest link */
            double steps = q->op == COLL_OP_ALL_REDUCE ? 2 * (P - 1) : P - 1, sl = s / pr->lanes;
            double bm = x->bmean * coll_proto_wire_factor(&pp, x->bw);
            T = steps * fmax(A(*x) + sl * bm, sl * B(*x)) +
                (reduce ? (P - 1) * tune_red(t, s, el) : 0);
            break;
        }
        case COLL_ALGO_BIRING: /* one half's reduction a step hides behind the other's transfer */
            T = 2 * (P - 1) * (A(*x) + s / 2 * B(*x)) + (P - 1) * tune_red(t, s / 2, el);
            break;
        case COLL_ALGO_TREE:
            for (uint32_t r = 0; r < pr->n; r++) {
                if (q->op != COLL_OP_BROADCAST) /* up: reduce */
                    T += A(pr->pat[r]) + n * B(pr->pat[r]) + tune_red(t, n, el);
                if (q->op != COLL_OP_REDUCE) /* down: broadcast */
                    T += A(pr->pat2[r]) + n * B(pr->pat2[r]);
            }
            break;
        case COLL_ALGO_CHAIN: {
            double c = (double)coll_chunks(q->bytes, q->chunk_bytes), sc = n / c;
            const tune_pat *y = q->op == COLL_OP_REDUCE ? &pr->pat[0] : &pr->pat2[0];
            double red = q->op == COLL_OP_REDUCE ? tune_red(t, sc, el) : 0;
            T = (P - 1) * (A(*y) + sc * B(*y) + red) + (c - 1) * fmax(sc * B(*y), red);
            break;
        }
        case COLL_ALGO_RHD: {
            uint32_t L = pr->n;
            bool halve = q->op != COLL_OP_ALL_GATHER, dbl = q->op != COLL_OP_REDUCE_SCATTER;
            for (uint32_t k = 0; k < L; k++) { /* pat[k]: mask p / 2^(k+1) */
                double b = n / (double)(2u << k);
                if (halve)
                    T += A(pr->pat[k]) + b * B(pr->pat[k]) + tune_red(t, b, el);
                if (dbl) /* doubling step with mask 2^t = p / 2^(k+1) sends n 2^t / p = b */
                    T += A(pr->pat[k]) + b * B(pr->pat[k]);
            }
            break;
        }
        case COLL_ALGO_HIER: {
            double m = n;
            for (uint32_t e = 0; e < pr->n; e++) {
                double qq = pr->q[e], b = m / qq;
                /* reduce-scatter and all-gather at this level (the top one: its all-reduce) */
                T += 2 * (qq - 1) * (A(pr->pat[e]) + b * B(pr->pat[e])) +
                     (qq - 1) * tune_red(t, b, el);
                m = b;
            }
            break;
        }
        case COLL_ALGO_PAIRWISE: /* alpha and beta sum over the p - 1 steps */
            T = fmax(x->alpha, (P - 1) * step) + s * B(*x);
            break;
        case COLL_ALGO_DIRECT:
            T = A(*x) + s * B(*x);
            break;
        case COLL_ALGO_NVLS: { /* coll_nvls.c: n + n/p each way on every chip's link to the
                                  switch, slices pipelined; a slice's chain is up, down (the
                                  chip's step), up, down */
            const tune_pat *dn = &pr->pat2[0];
            double eff = t->cfg.system.switch_reduce_efficiency;
            double chunk = q->chunk_bytes ? (double)q->chunk_bytes : 128.0 * 1024;
            double K = fmin(fmax(ceil(n / (chunk * P)), 1), 64), seg = n / K / P;
            double bw = fmax(x->beta, dn->beta) / eff * coll_proto_wire_factor(&pp, x->bw);
            T = (n + s) * bw + 2 * (x->alpha + fmax(dn->alpha, step)) + 2 * seg * bw;
            break;
        }
        default:
            return np_err_set(err, NP_ERR_INCONSISTENT, "no model for %s",
                              coll_algo_name(algo));
        }
    }
#undef A
#undef B
    double base = (double)pp.base_ps;
    if (algo == COLL_ALGO_NVLS && t->cfg.system.coll_nvls_base_ns > 0)
        base = t->cfg.system.coll_nvls_base_ns * 1000.0;
    *out = T + base;
    return NP_OK;
}

/* Whether NCCL runs algo for q's op on group g (system.coll_algos = nccl): rings for
 * all-reduce, all-gather and reduce-scatter (through every NIC with coll_channels), and
 * multi-level rings for an all-reduce whose group spans several islands (standing for NCCL's
 * trees, which like them reduce within the islands first); NVLS in a switch that reduces (its
 * model refuses other groups); chains for broadcast and reduce (NCCL's pipelined rings); every
 * peer at once for all-to-all and sendrecv; the one algorithm of scatter and gather. */
static bool tune_nccl_runs(const coll_tuner *t, const tune_group *g, coll_op op,
                           coll_algo algo)
{
    switch (op) {
    case COLL_OP_ALL_REDUCE:
        if (algo == COLL_ALGO_HIER) {
            uint32_t per, d0 = net_chip_domain(t->n, g->chips[0], &per);
            for (uint32_t i = 1; per && i < g->p; i++)
                if (net_chip_domain(t->n, g->chips[i], &per) != d0)
                    return true;
            return false;
        }
        return algo == COLL_ALGO_RING || algo == COLL_ALGO_NVLS;
    case COLL_OP_ALL_GATHER:
    case COLL_OP_REDUCE_SCATTER: return algo == COLL_ALGO_RING;
    case COLL_OP_BROADCAST:
    case COLL_OP_REDUCE: return algo == COLL_ALGO_CHAIN;
    case COLL_OP_ALL_TO_ALL:
    case COLL_OP_SENDRECV: return algo == COLL_ALGO_DIRECT;
    default: return true;
    }
}

/* The least modelled time of algo for q over the protocols asked (proto fixed, or AUTO: LL,
 * LL128, Simple; on a tie the one listed first), and that protocol. */
static np_status tune_algo(coll_tuner *t, tune_group *g, const coll_tune_query *q,
                           coll_algo algo, coll_proto proto, double *t_ps,
                           coll_proto *best_proto, np_err *err)
{
    static const coll_proto autos[] = {COLL_PROTO_SIMPLE, COLL_PROTO_LL128, COLL_PROTO_LL};
    const coll_proto *cand = proto == COLL_PROTO_AUTO ? autos : &proto;
    size_t nc = proto == COLL_PROTO_AUTO ? sizeof autos / sizeof *autos : 1;
    if (algo == COLL_ALGO_NVLS && proto == COLL_PROTO_AUTO)
        nc = 1; /* NCCL runs NVLS with Simple alone */
    *t_ps = INFINITY;
    *best_proto = cand[0];
    for (size_t i = 0; i < nc; i++) {
        double c = INFINITY;
        np_status st = tune_model(t, g, q, algo, cand[i], &c, err);
        if (st != NP_OK)
            return st;
        if (c < *t_ps) {
            *t_ps = c;
            *best_proto = cand[i];
        }
    }
    return NP_OK;
}

static np_status tune_check(const coll_tuner *t, const coll_tune_query *q, np_err *err)
{
    if (q->ranks == 0)
        return np_err_set(err, NP_ERR_RANGE, "a collective needs at least one rank");
    uint32_t nc = net_chips(t->n);
    if (!q->chips && q->ranks > nc)
        return np_err_set(err, NP_ERR_RANGE, "%" PRIu32 " ranks, but the network has %" PRIu32
                          " chips", q->ranks, nc);
    for (uint32_t i = 0; q->chips && i < q->ranks; i++)
        if (q->chips[i] >= nc)
            return np_err_set(err, NP_ERR_RANGE, "group rank %" PRIu32 " names chip %" PRIu32
                              ", which is not in the network", i, q->chips[i]);
    return NP_OK;
}

/* q's protocol with SYSTEM replaced by the system's. */
static coll_proto tune_proto(const coll_tuner *t, const coll_tune_query *q)
{
    return coll_proto_resolve(&t->cfg, q->proto);
}

np_status coll_tune_cost(coll_tuner *t, const coll_tune_query *q, coll_algo algo,
                         double *t_ps, np_err *err)
{
    if (tune_check(t, q, err) != NP_OK)
        return err->status;
    uint32_t g = tune_group_of(t, q->chips, q->ranks);
    if (g == UINT32_MAX)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory tuning a collective");
    coll_proto used;
    return tune_algo(t, &t->groups[g], q, algo, tune_proto(t, q), t_ps, &used, err);
}

typedef struct answer_key {
    coll_tuner *t;
    uint32_t group;
    const coll_tune_query *q;
    coll_algo algo;
    coll_proto proto;
} answer_key;

static bool answer_match(void *ctx, uint32_t i)
{
    answer_key *k = ctx;
    const tune_answer *a = &k->t->answers[i];
    const coll_tune_query *q = k->q;
    return a->group == k->group && a->channels == q->channels && a->op == q->op &&
           a->bytes == q->bytes &&
           a->chunk == q->chunk_bytes && a->elem == q->elem_bytes &&
           a->want_algo == k->algo && a->want_proto == k->proto &&
           (!coll_op_rooted(q->op) || a->root == q->root);
}

np_status coll_tune_choose(coll_tuner *t, const coll_tune_query *q, coll_algo algo,
                           coll_tune_pick *out, np_err *err)
{
    if (tune_check(t, q, err) != NP_OK)
        return err->status;
    coll_proto proto = tune_proto(t, q);
    if ((unsigned)proto >= COLL_PROTO_COUNT || proto == COLL_PROTO_SYSTEM)
        return np_err_set(err, NP_ERR_RANGE, "unknown collective protocol %d", (int)q->proto);
    uint32_t g = tune_group_of(t, q->chips, q->ranks);
    if (g == UINT32_MAX)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory tuning a collective");
    uint64_t h = tune_mix(tune_mix(tune_mix(tune_mix(g, q->op), q->bytes), q->chunk_bytes),
                          (uint64_t)q->elem_bytes << 32 | (coll_op_rooted(q->op) ? q->root : 0));
    h = tune_mix(h, (uint64_t)q->channels << 16 | (uint64_t)algo << 8 | (uint64_t)proto);
    answer_key k = {t, g, q, algo, proto};
    uint32_t i = tune_map_find(&t->answer_map, h, answer_match, &k);
    if (i != UINT32_MAX) {
        t->memoised++;
        *out = t->answers[i].pick;
        return NP_OK;
    }
    coll_tune_pick best = {COLL_ALGO_AUTO, COLL_PROTO_RAW, INFINITY};
    if (algo != COLL_ALGO_AUTO) {
        np_status st = tune_algo(t, &t->groups[g], q, algo, proto, &best.t_ps, &best.proto,
                                 err);
        if (st != NP_OK)
            return st;
        best.algo = algo;
    } else {
        /* the cheapest supported algorithm; on a tie the one listed first */
        static const coll_algo prefer[] = {COLL_ALGO_RING, COLL_ALGO_HIER, COLL_ALGO_BIRING,
                                           COLL_ALGO_RHD, COLL_ALGO_TREE, COLL_ALGO_CHAIN,
                                           COLL_ALGO_PAIRWISE, COLL_ALGO_DIRECT, COLL_ALGO_NVLS};
        bool nccl = t->cfg.system.coll_algos == ARCH_COLL_ALGOS_NCCL;
        for (size_t j = 0; j < sizeof prefer / sizeof *prefer; j++) {
            if (!coll_algo_supported(q->op, prefer[j]) ||
                (nccl && !tune_nccl_runs(t, &t->groups[g], q->op, prefer[j])))
                continue;
            double c = INFINITY;
            coll_proto cp = proto;
            np_err e2;
            np_status st = tune_algo(t, &t->groups[g], q, prefer[j], proto, &c, &cp, &e2);
            if (st == NP_ERR_INCONSISTENT)
                continue; /* the group does not fit it */
            if (st != NP_OK) {
                *err = e2;
                return st;
            }
            if (c < best.t_ps)
                best = (coll_tune_pick){prefer[j], cp, c};
        }
        if (best.algo == COLL_ALGO_AUTO)
            return np_err_set(err, NP_ERR_INCONSISTENT, "no algorithm of %s fits a group of "
                              "%" PRIu32 " ranks", coll_op_name(q->op), q->ranks);
    }
    t->computed++;
    if (t->n_answers == t->cap_answers) {
        uint32_t cap = t->cap_answers ? 2 * t->cap_answers : 64;
        tune_answer *v = realloc(t->answers, (size_t)cap * sizeof *v);
        if (!v)
            return np_err_set(err, NP_ERR_NOMEM, "out of memory tuning a collective");
        t->answers = v;
        t->cap_answers = cap;
    }
    t->answers[t->n_answers] = (tune_answer){g, q->channels, q->op, q->bytes, q->chunk_bytes,
                                             q->elem_bytes, coll_op_rooted(q->op) ? q->root : 0,
                                             algo, proto, best};
    if (!np_hmap_put(&t->answer_map, h, t->n_answers))
        return np_err_set(err, NP_ERR_NOMEM, "out of memory tuning a collective");
    t->n_answers++;
    *out = best;
    return NP_OK;
}

np_status coll_tune(coll_tuner *t, const coll_tune_query *q, coll_algo *algo, double *t_ps,
                    np_err *err)
{
    coll_tune_pick pick;
    if (coll_tune_choose(t, q, COLL_ALGO_AUTO, &pick, err) != NP_OK)
        return err->status;
    *algo = pick.algo;
    if (t_ps)
        *t_ps = pick.t_ps;
    return NP_OK;
}
