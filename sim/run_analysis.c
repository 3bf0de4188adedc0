/* run_analysis.c — what the routes allow, found before the run (see run_engine.h):
 *
 * 1. Link owners. Every traffic channel marks the links it may use: each used rendezvous slot
 *    (a (stream, groupset) pair's group) the links of the routes between every ordered pair
 *    of its members (a superset of what any algorithm uses), every send channel its route.
 *    A link marked by two channels is shared. (A group of more than RS_GROUP_ROUTES_MAX
 *    members makes every link shared: nothing is reused or mirrored then.)
 * 2. Reuse. A slot whose links are all its own runs its collectives alone (its stream runs
 *    one at a time), so a collective there takes a time fixed by what it is and by the
 *    group's routes. The routes are written as a signature — per ordered pair the route's
 *    links renumbered by first use and its latency, then each link's bandwidth and latency —
 *    and slots with equal signatures share timings (run_reuse.c).
 * 3. Mirrors. A groupset G qualifies when it splits all ranks into groups of n >= 2 of one
 *    class each, all its slots are reused, and for every position k the map m_k (position 0
 *    of a G group -> position k of the same group) carries every other group and every send
 *    of position-0 ranks onto those of position-k ranks, route by route onto links of equal
 *    bandwidth and latency, while no link carries traffic of two positions. Then positions
 *    1 .. n-1 replay position 0 exactly and are not simulated. The largest such G is taken.
 * 4. The links the sampler reads: those that carry simulated traffic on the network.
 */
#include "run_sim.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define RA_SHARED (RUN_NONE - 1)

typedef struct ra {
    run_sim *s;
    uint32_t *owner;  /* per link: the channel (slot, or p2p_ch), RA_SHARED or RUN_NONE */
    uint32_t p2p_ch;  /* the channel id of every send */
    uint8_t *uses;    /* per class and comm: 1 when the class runs collectives on it */
    bool all_shared;
    uint32_t *path;   /* a route copied out of net_route's buffer */
    uint32_t cap_path;
    uint32_t *words;  /* a signature being built */
    uint32_t n_words, cap_words;
    uint32_t *loc;    /* per link: its local number in the signature being built */
} ra;

static np_status ra_oom(np_err *err)
{
    return np_err_set(err, NP_ERR_NOMEM, "out of memory analysing the run's routes");
}

static bool ra_push(ra *a, uint32_t w)
{
    if (a->n_words == a->cap_words) {
        uint32_t cap = a->cap_words ? a->cap_words * 2 : 256;
        uint32_t *v = realloc(a->words, (size_t)cap * sizeof *v);
        if (!v)
            return false;
        a->words = v;
        a->cap_words = cap;
    }
    a->words[a->n_words++] = w;
    return true;
}

static bool ra_push64(ra *a, uint64_t w)
{
    return ra_push(a, (uint32_t)w) && ra_push(a, (uint32_t)(w >> 32));
}

static bool ra_slot_used(const ra *a, uint32_t comm, uint32_t grp)
{
    const run_graph *g = a->s->g;
    const rg_groupset *gs = &g->gs[g->comm[comm].groupset];
    uint32_t r0 = gs->members[(size_t)grp * gs->size];
    return a->uses[(size_t)g->class_of[r0] * g->n_comm + comm];
}

/* Marks the links of route a -> b as used by channel ch. */
static np_status ra_mark(ra *a, uint32_t ca, uint32_t cb, uint32_t ch, np_err *err)
{
    net_path_info p;
    if (net_route(a->s->n, ca, cb, &p, err) != NP_OK)
        return err->status;
    for (uint32_t i = 0; i < p.n_links; i++) {
        uint32_t *o = &a->owner[p.links[i]];
        if (*o == RUN_NONE)
            *o = ch;
        else if (*o != ch)
            *o = RA_SHARED;
    }
    return NP_OK;
}

static np_status ra_owners(ra *a, np_err *err)
{
    run_sim *s = a->s;
    const run_graph *g = s->g;
    for (uint32_t k = 0; k < g->n_comm && !a->all_shared; k++) {
        const rg_groupset *gs = &g->gs[g->comm[k].groupset];
        for (uint32_t i = 0; i < gs->n_groups && !a->all_shared; i++) {
            if (!ra_slot_used(a, k, i))
                continue;
            if (gs->size > RS_GROUP_ROUTES_MAX) {
                a->all_shared = true;
                break;
            }
            const uint32_t *chips = s->gs_chips[g->comm[k].groupset] + (size_t)i * gs->size;
            for (uint32_t x = 0; x < gs->size; x++)
                for (uint32_t y = 0; y < gs->size; y++)
                    if (x != y && ra_mark(a, chips[x], chips[y], g->comm[k].base + i, err) != NP_OK)
                        return err->status;
        }
    }
    for (uint32_t r = 0; r < g->ranks; r++)
        for (uint32_t c = g->send_off[r]; c < g->send_off[r + 1]; c++)
            if (ra_mark(a, g->chip_of[r], g->chip_of[g->send_dst[c]], a->p2p_ch, err) != NP_OK)
                return err->status;
    return NP_OK;
}

/* Whether every link slot `slot` (group chips[0 .. n)) may use is its own. */
static np_status ra_exclusive(ra *a, const uint32_t *chips, uint32_t n, uint32_t slot,
                              bool *out, np_err *err)
{
    *out = !a->all_shared;
    for (uint32_t x = 0; x < n && *out; x++)
        for (uint32_t y = 0; y < n && *out; y++) {
            if (x == y)
                continue;
            net_path_info p;
            if (net_route(a->s->n, chips[x], chips[y], &p, err) != NP_OK)
                return err->status;
            for (uint32_t i = 0; i < p.n_links; i++)
                if (a->owner[p.links[i]] != slot)
                    *out = false;
        }
    return NP_OK;
}

/* Builds the signature of a group's routes and interns it: *sig, and the group's local link
 * table appended to s->loc_links at *loc_off. */
static np_status ra_signature(ra *a, const uint32_t *chips, uint32_t n, uint32_t *sig,
                              uint32_t *loc_off, np_err *err)
{
    run_sim *s = a->s;
    a->n_words = 0;
    uint32_t first = s->n_loc, nloc = 0;
    bool ok = ra_push(a, n);
    for (uint32_t x = 0; x < n && ok; x++)
        for (uint32_t y = 0; y < n && ok; y++) {
            if (x == y)
                continue;
            net_path_info p;
            if (net_route(s->n, chips[x], chips[y], &p, err) != NP_OK)
                return err->status;
            ok = ra_push(a, p.n_links);
            for (uint32_t i = 0; i < p.n_links && ok; i++) {
                uint32_t l = p.links[i];
                if (a->loc[l] == RUN_NONE) {
                    if (s->n_loc == s->cap_loc) {
                        uint32_t cap = s->cap_loc ? s->cap_loc * 2 : 256;
                        uint32_t *v = realloc(s->loc_links, (size_t)cap * sizeof *v);
                        if (!v) {
                            ok = false;
                            break;
                        }
                        s->loc_links = v;
                        s->cap_loc = cap;
                    }
                    a->loc[l] = nloc++;
                    s->loc_links[s->n_loc++] = l;
                }
                ok = ra_push(a, a->loc[l]);
            }
            ok = ok && ra_push64(a, p.latency_ps);
        }
    for (uint32_t j = 0; j < nloc && ok; j++) {
        net_link_info li;
        net_link_get(s->n, s->loc_links[first + j], &li);
        uint64_t bw;
        memcpy(&bw, &li.bytes_per_s, sizeof bw);
        ok = ra_push64(a, bw) && ra_push64(a, li.latency_ps);
    }
    for (uint32_t j = 0; j < nloc; j++)
        a->loc[s->loc_links[first + j]] = RUN_NONE;
    if (!ok)
        return ra_oom(err);
    *loc_off = first;
    uint64_t h = np_hash_bytes(a->words, (size_t)a->n_words * sizeof *a->words, 0);
    for (uint32_t it = 0, i; (i = np_hmap_next(&s->sig_index, h, &it)) != NP_HMAP_END;)
        if (s->sig[i].len == a->n_words &&
            memcmp(s->sig_pool + s->sig[i].off, a->words, (size_t)a->n_words * 4) == 0) {
            *sig = i;
            return NP_OK;
        }
    while (s->n_sig_pool + a->n_words > s->cap_sig_pool) {
        uint32_t cap = s->cap_sig_pool ? s->cap_sig_pool * 2 : 1024;
        uint32_t *v = realloc(s->sig_pool, (size_t)cap * sizeof *v);
        if (!v)
            return ra_oom(err);
        s->sig_pool = v;
        s->cap_sig_pool = cap;
    }
    if (s->n_sig == s->cap_sig) {
        uint32_t cap = s->cap_sig ? s->cap_sig * 2 : 16;
        rs_sig *v = realloc(s->sig, (size_t)cap * sizeof *v);
        uint32_t *w = realloc(s->loc_n, (size_t)cap * sizeof *w);
        if (v)
            s->sig = v;
        if (w)
            s->loc_n = w;
        if (!v || !w)
            return ra_oom(err);
        s->cap_sig = cap;
    }
    if (!np_hmap_put(&s->sig_index, h, s->n_sig))
        return ra_oom(err);
    memcpy(s->sig_pool + s->n_sig_pool, a->words, (size_t)a->n_words * 4);
    s->sig[s->n_sig] = (rs_sig){s->n_sig_pool, a->n_words};
    s->loc_n[s->n_sig] = nloc;
    s->n_sig_pool += a->n_words;
    *sig = s->n_sig++;
    return NP_OK;
}

static np_status ra_reuse(ra *a, np_err *err)
{
    run_sim *s = a->s;
    const run_graph *g = s->g;
    for (uint32_t k = 0; k < g->n_comm; k++) {
        const rg_groupset *gs = &g->gs[g->comm[k].groupset];
        for (uint32_t i = 0; i < gs->n_groups; i++) {
            uint32_t slot = g->comm[k].base + i;
            if (!ra_slot_used(a, k, i))
                continue;
            const uint32_t *chips = s->gs_chips[g->comm[k].groupset] + (size_t)i * gs->size;
            bool excl;
            if (ra_exclusive(a, chips, gs->size, slot, &excl, err) != NP_OK)
                return err->status;
            if (excl && ra_signature(a, chips, gs->size, &s->rdv[slot].sig,
                                     &s->rdv[slot].loc_off, err) != NP_OK)
                return err->status;
        }
    }
    return NP_OK;
}

/* ---- mirrors ------------------------------------------------------------------------------ */

typedef struct ra_mir {
    uint32_t gs, n;
    uint32_t *map;  /* n * links: map[k * links + l0] = the link of position k */
    uint32_t *rev;  /* n * links: the reverse, to refuse two links onto one */
    uint32_t *pos;  /* per link: the position whose traffic uses it (RUN_NONE: none) */
} ra_mir;

/* Position 0 rank r0's image at position k. */
static uint32_t ra_img(const rg_groupset *G, uint32_t r0, uint32_t k)
{
    return G->members[(size_t)G->group_of[r0] * G->size + k];
}

/* Route a0 -> b0 (position 0) against ak -> bk (position k): equal shape, links mapped. */
static np_status ra_map_route(ra *a, ra_mir *m, uint32_t k, uint32_t a0, uint32_t b0, uint32_t ak,
                              uint32_t bk, bool *ok, np_err *err)
{
    run_sim *s = a->s;
    net_path_info p0, pk;
    if (net_route(s->n, a0, b0, &p0, err) != NP_OK)
        return err->status;
    if (p0.n_links > a->cap_path) {
        uint32_t *v = realloc(a->path, (size_t)p0.n_links * 2 * sizeof *v);
        if (!v)
            return ra_oom(err);
        a->path = v;
        a->cap_path = p0.n_links * 2;
    }
    memcpy(a->path, p0.links, (size_t)p0.n_links * sizeof *a->path);
    uint32_t n0 = p0.n_links;
    uint64_t lat0 = p0.latency_ps;
    if (net_route(s->n, ak, bk, &pk, err) != NP_OK)
        return err->status;
    if (pk.n_links != n0 || pk.latency_ps != lat0) {
        *ok = false;
        return NP_OK;
    }
    size_t L = s->n_links;
    for (uint32_t i = 0; i < n0 && *ok; i++) {
        uint32_t l0 = a->path[i], lk = pk.links[i];
        net_link_info i0, ik;
        net_link_get(s->n, l0, &i0);
        net_link_get(s->n, lk, &ik);
        uint32_t *f = &m->map[k * L + l0], *r = &m->rev[k * L + lk];
        if (i0.bytes_per_s != ik.bytes_per_s || i0.latency_ps != ik.latency_ps ||
            (*f != RUN_NONE && *f != lk) || (*r != RUN_NONE && *r != l0))
            *ok = false;
        *f = lk;
        *r = l0;
    }
    return NP_OK;
}

/* Marks the links of a -> b as used by position `pos`; a second position fails the mirror. */
static np_status ra_mark_pos(ra *a, ra_mir *m, uint32_t ca, uint32_t cb, uint32_t pos, bool *ok,
                             np_err *err)
{
    net_path_info p;
    if (net_route(a->s->n, ca, cb, &p, err) != NP_OK)
        return err->status;
    for (uint32_t i = 0; i < p.n_links; i++) {
        uint32_t *o = &m->pos[p.links[i]];
        if (*o == RUN_NONE)
            *o = pos;
        else if (*o != pos)
            *ok = false;
    }
    return NP_OK;
}

/* Whether groupset gi can be the mirror; fills m when it can. */
static np_status ra_try_mirror(ra *a, uint32_t gi, ra_mir *m, bool *ok, np_err *err)
{
    run_sim *s = a->s;
    const run_graph *g = s->g;
    const rg_groupset *G = &g->gs[gi];
    uint32_t n = G->size;
    *ok = n >= 2 && (uint64_t)G->n_groups * n == g->ranks;
    for (uint32_t i = 0; i < G->n_groups && *ok; i++) {
        const uint32_t *mem = G->members + (size_t)i * n;
        for (uint32_t j = 1; j < n; j++)
            if (g->class_of[mem[j]] != g->class_of[mem[0]])
                *ok = false;
    }
    for (uint32_t k = 0; k < g->n_comm && *ok; k++) {
        const rg_comm *cm = &g->comm[k];
        const rg_groupset *H = &g->gs[cm->groupset];
        for (uint32_t i = 0; i < H->n_groups && *ok; i++) {
            if (!ra_slot_used(a, k, i))
                continue;
            if (cm->groupset == gi) {
                if (s->rdv[cm->base + i].sig == RUN_NONE)
                    *ok = false;
                continue;
            }
            const uint32_t *mem = H->members + (size_t)i * H->size;
            for (uint32_t j = 1; j < H->size; j++)
                if (G->pos_of[mem[j]] != G->pos_of[mem[0]])
                    *ok = false;
        }
    }
    if (!*ok)
        return NP_OK;
    size_t L = s->n_links;
    m->gs = gi;
    m->n = n;
    m->map = malloc((size_t)n * L * sizeof *m->map);
    m->rev = malloc((size_t)n * L * sizeof *m->rev);
    m->pos = malloc(L * sizeof *m->pos);
    if (!m->map || !m->rev || !m->pos)
        return ra_oom(err);
    for (size_t i = 0; i < (size_t)n * L; i++)
        m->map[i] = m->rev[i] = RUN_NONE;
    for (size_t i = 0; i < L; i++)
        m->pos[i] = RUN_NONE;
    /* Every position's traffic outside G on links of its own. */
    for (uint32_t k = 0; k < g->n_comm && *ok; k++) {
        const rg_comm *cm = &g->comm[k];
        if (cm->groupset == gi)
            continue;
        const rg_groupset *H = &g->gs[cm->groupset];
        for (uint32_t i = 0; i < H->n_groups && *ok; i++) {
            if (!ra_slot_used(a, k, i))
                continue;
            const uint32_t *mem = H->members + (size_t)i * H->size;
            uint32_t pos = G->pos_of[mem[0]];
            for (uint32_t x = 0; x < H->size && *ok; x++)
                for (uint32_t y = 0; y < H->size && *ok; y++)
                    if (x != y && ra_mark_pos(a, m, g->chip_of[mem[x]], g->chip_of[mem[y]], pos,
                                              ok, err) != NP_OK)
                        return err->status;
        }
    }
    for (uint32_t r = 0; r < g->ranks && *ok; r++)
        for (uint32_t c = g->send_off[r]; c < g->send_off[r + 1] && *ok; c++) {
            uint32_t d = g->send_dst[c];
            if (G->pos_of[d] != G->pos_of[r])
                *ok = false;
            else if (ra_mark_pos(a, m, g->chip_of[r], g->chip_of[d], G->pos_of[r], ok, err) !=
                     NP_OK)
                return err->status;
        }
    /* Position 0's groups and sends carried onto position k's, route by route. */
    for (uint32_t kk = 1; kk < n && *ok; kk++) {
        for (uint32_t k = 0; k < g->n_comm && *ok; k++) {
            const rg_comm *cm = &g->comm[k];
            if (cm->groupset == gi)
                continue;
            const rg_groupset *H = &g->gs[cm->groupset];
            for (uint32_t i = 0; i < H->n_groups && *ok; i++) {
                const uint32_t *mem = H->members + (size_t)i * H->size;
                if (!ra_slot_used(a, k, i) || G->pos_of[mem[0]] != 0)
                    continue;
                uint32_t img = H->group_of[ra_img(G, mem[0], kk)];
                for (uint32_t j = 0; j < H->size && *ok; j++) {
                    uint32_t rk = ra_img(G, mem[j], kk);
                    if (H->group_of[rk] != img || H->pos_of[rk] != j)
                        *ok = false;
                }
                for (uint32_t x = 0; x < H->size && *ok; x++)
                    for (uint32_t y = 0; y < H->size && *ok; y++)
                        if (x != y &&
                            ra_map_route(a, m, kk, g->chip_of[mem[x]], g->chip_of[mem[y]],
                                         g->chip_of[ra_img(G, mem[x], kk)],
                                         g->chip_of[ra_img(G, mem[y], kk)], ok, err) != NP_OK)
                            return err->status;
            }
        }
        for (uint32_t r = 0; r < g->ranks && *ok; r++) {
            if (G->pos_of[r] != 0)
                continue;
            uint32_t rk = ra_img(G, r, kk);
            for (uint32_t c = 0; c < g->send_off[r + 1] - g->send_off[r] && *ok; c++) {
                uint32_t d = g->send_dst[g->send_off[r] + c];
                uint32_t dk = g->send_dst[g->send_off[rk] + c];
                if (dk != ra_img(G, d, kk))
                    *ok = false;
                else if (ra_map_route(a, m, kk, g->chip_of[r], g->chip_of[d], g->chip_of[rk],
                                      g->chip_of[dk], ok, err) != NP_OK)
                    return err->status;
            }
        }
    }
    return NP_OK;
}

static void ra_mir_free(ra_mir *m)
{
    free(m->map);
    free(m->rev);
    free(m->pos);
    memset(m, 0, sizeof *m);
}

static np_status ra_mirror(ra *a, ra_mir *best, np_err *err)
{
    run_sim *s = a->s;
    const run_graph *g = s->g;
    for (uint32_t gi = 0; gi < g->n_gs; gi++) {
        ra_mir m = {0};
        bool ok;
        if (ra_try_mirror(a, gi, &m, &ok, err) != NP_OK) {
            ra_mir_free(&m);
            return err->status;
        }
        if (ok && m.n > best->n) {
            ra_mir_free(best);
            *best = m;
        } else {
            ra_mir_free(&m);
        }
    }
    if (!best->n)
        return NP_OK;
    const rg_groupset *G = &g->gs[best->gs];
    s->mirror_gs = best->gs;
    s->mirror_n = best->n;
    s->mirror_link = best->map;
    best->map = NULL;
    for (uint32_t r = 0; r < g->ranks; r++) {
        rs_rank *x = &s->rank[r];
        x->rep = G->members[(size_t)G->group_of[r] * G->size];
        x->sim = G->pos_of[r] == 0;
    }
    for (uint32_t k = 0; k < g->n_comm; k++) {
        if (g->comm[k].groupset != best->gs)
            continue;
        for (uint32_t i = 0; i < G->n_groups; i++) {
            rs_rdv *v = &s->rdv[g->comm[k].base + i];
            v->members = &s->one_member[G->members[(size_t)i * G->size]];
            v->n_members = v->expect = 1;
        }
    }
    return NP_OK;
}

/* ---- sampled links ------------------------------------------------------------------------ */

static np_status ra_sampled(ra *a, const ra_mir *m, np_err *err)
{
    run_sim *s = a->s;
    s->sampled = malloc(((size_t)s->n_links + 1) * sizeof *s->sampled);
    s->link_last = calloc((size_t)s->n_links + 1, sizeof *s->link_last);
    if (!s->sampled || !s->link_last)
        return ra_oom(err);
    for (uint32_t l = 0; l < s->n_links; l++) {
        uint32_t o = a->owner[l];
        bool on_net = a->all_shared || (o != RUN_NONE && (o == RA_SHARED || o == a->p2p_ch ||
                                                          s->rdv[o].sig == RUN_NONE));
        if (on_net && m->n && m->pos[l] != 0)
            on_net = false; /* carries only mirrored traffic */
        if (on_net)
            s->sampled[s->n_sampled++] = l;
    }
    return NP_OK;
}

np_status rs_analyze(run_sim *s, np_err *err)
{
    const run_graph *g = s->g;
    ra a = {.s = s, .p2p_ch = g->n_slots};
    ra_mir m = {0};
    np_status st = NP_OK;
    a.owner = malloc(((size_t)s->n_links + 1) * sizeof *a.owner);
    a.loc = malloc(((size_t)s->n_links + 1) * sizeof *a.loc);
    a.uses = calloc((size_t)g->n_cls * g->n_comm + 1, 1);
    if (!a.owner || !a.loc || !a.uses) {
        st = ra_oom(err);
        goto out;
    }
    for (uint32_t l = 0; l < s->n_links; l++)
        a.owner[l] = a.loc[l] = RUN_NONE;
    for (uint32_t c = 0; c < g->n_cls; c++)
        for (uint32_t t = 0; t < g->cls[c].n_tasks; t++)
            if (g->cls[c].tasks[t].kind == RUN_TASK_COLL)
                a.uses[(size_t)c * g->n_comm + g->spec[g->cls[c].tasks[t].ref].comm_id] = 1;
    if ((st = ra_owners(&a, err)) != NP_OK)
        goto out;
    if (!s->o.no_coll_reuse && (st = ra_reuse(&a, err)) != NP_OK)
        goto out;
    if (!s->o.no_rank_dedup && !a.all_shared && (st = ra_mirror(&a, &m, err)) != NP_OK)
        goto out;
    st = ra_sampled(&a, &m, err);
out:
    ra_mir_free(&m);
    free(a.owner);
    free(a.loc);
    free(a.uses);
    free(a.path);
    free(a.words);
    return st;
}
