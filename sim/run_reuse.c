/* run_reuse.c — reused collective timings (see run_engine.h, run_analysis.c).
 *
 * A timing is keyed by (collective spec, route signature). The first time a key is needed,
 * the collective runs alone on a scratch copy of the network (its own evq, the same
 * architecture and network parameters) over the chips of the group that needs it; the queue is
 * stepped one event at a time and the group's links' byte counters are read after each event,
 * so the timing records the duration and every link's bytes at the time the network counted
 * them (a flow's bytes count on each of its links when its last byte has left). Replaying adds
 * those bytes at the same offsets from the replayed collective's start: the figures are the
 * ones simulating it in place would give, because its links carry nothing else.
 */
#include "run_sim.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static np_status rr_oom(np_err *err)
{
    return np_err_set(err, NP_ERR_NOMEM, "out of memory reusing a collective's timing");
}

static np_status rr_prof_push(run_sim *s, uint32_t link, uint64_t rel, uint64_t bytes,
                              np_err *err)
{
    if (s->n_prof == s->cap_prof) {
        uint32_t cap = s->cap_prof ? s->cap_prof * 2 : 1024;
        rs_prof *v = realloc(s->prof, (size_t)cap * sizeof *v);
        if (!v)
            return rr_oom(err);
        s->prof = v;
        s->cap_prof = cap;
    }
    s->prof[s->n_prof++] = (rs_prof){link, rel, bytes};
    return NP_OK;
}

/* Runs spec on the scratch network over rdv's group and records its timing as entry e. */
static np_status rr_simulate(run_sim *s, const rs_rdv *v, rs_reuse *e, np_err *err)
{
    const run_graph *g = s->g;
    const rg_spec *sp = &g->spec[e->spec];
    const rg_groupset *gs = &g->gs[sp->groupset];
    if (!s->sq) {
        net_params np = *net_get_params(s->n);
        if (evq_create(&s->sq, err) != NP_OK ||
            coll_sys_create(s->cfg, &np, s->sq, NULL, &s->scs, err) != NP_OK)
            return err->status;
    }
    net *sn = coll_sys_net(s->scs);
    uint32_t nloc = s->loc_n[v->sig];
    const uint32_t *loc = s->loc_links + v->loc_off;
    uint64_t last[2 * RS_GROUP_ROUTES_MAX * 8], *lastp = last;
    if (nloc > sizeof last / sizeof *last && !(lastp = malloc((size_t)nloc * sizeof *lastp)))
        return rr_oom(err);
    for (uint32_t j = 0; j < nloc; j++) {
        net_link_info li;
        net_link_get(sn, loc[j], &li);
        lastp[j] = li.bytes;
    }
    coll_desc d = {.op = sp->op, .algo = sp->algo,
                   .chips = s->gs_chips[sp->groupset] + (size_t)v->group * gs->size,
                   .n_chips = gs->size, .bytes = sp->bytes, .root = sp->root,
                   .chunk_bytes = sp->chunk_bytes, .elem_bytes = sp->elem_bytes};
    coll *c;
    np_status st = coll_start(s->scs, &d, &c, err);
    if (st != NP_OK)
        goto out;
    uint64_t t0 = evq_now(s->sq);
    e->prof_off = s->n_prof;
    while (!coll_is_done(c) && st == NP_OK) {
        bool any;
        if ((st = evq_step(s->sq, &any, err)) != NP_OK)
            break;
        if (!any) {
            st = np_err_set(err, NP_ERR_INTERNAL, "a %s on the scratch network stopped before "
                            "it completed", coll_op_name(sp->op));
            break;
        }
        if ((st = coll_status(c, err)) != NP_OK)
            break;
        uint64_t rel = evq_now(s->sq) - t0;
        for (uint32_t j = 0; j < nloc && st == NP_OK; j++) {
            net_link_info li;
            net_link_get(sn, loc[j], &li);
            if (li.bytes != lastp[j]) {
                st = rr_prof_push(s, j, rel, li.bytes - lastp[j], err);
                lastp[j] = li.bytes;
            }
        }
    }
    if (st == NP_OK) {
        const coll_result *res = coll_get_result(c);
        e->dur_ps = res->t_end_ps - res->t_start_ps;
        e->bytes_sent = res->bytes_sent;
        e->reduced_bytes = res->reduced_bytes;
        e->prof_n = s->n_prof - e->prof_off;
        if (evq_pending(s->sq) != 0) /* a finished collective leaves nothing behind */
            st = np_err_set(err, NP_ERR_INTERNAL, "%" PRIu64 " events left on the scratch "
                            "network after a %s", evq_pending(s->sq), coll_op_name(sp->op));
    }
    if (st == NP_OK || coll_is_done(c))
        coll_free(c);
    s->colls_scratch++;
out:
    if (lastp != last)
        free(lastp);
    return st;
}

np_status rs_reuse_get(run_sim *s, const rs_rdv *v, uint32_t *out, np_err *err)
{
    uint32_t key[2] = {v->spec, v->sig};
    uint64_t h = np_hash_bytes(key, sizeof key, 0);
    for (uint32_t it = 0, i; (i = np_hmap_next(&s->reuse_index, h, &it)) != NP_HMAP_END;)
        if (s->reuse[i].spec == v->spec && s->reuse[i].sig == v->sig) {
            *out = i;
            return NP_OK;
        }
    if (s->n_reuse == s->cap_reuse) {
        uint32_t cap = s->cap_reuse ? s->cap_reuse * 2 : 64;
        rs_reuse *nv = realloc(s->reuse, (size_t)cap * sizeof *nv);
        if (!nv)
            return rr_oom(err);
        s->reuse = nv;
        s->cap_reuse = cap;
    }
    rs_reuse *e = &s->reuse[s->n_reuse];
    memset(e, 0, sizeof *e);
    e->spec = v->spec;
    e->sig = v->sig;
    if (rr_simulate(s, v, e, err) != NP_OK)
        return err->status;
    if (!np_hmap_put(&s->reuse_index, h, s->n_reuse))
        return rr_oom(err);
    *out = s->n_reuse++;
    return NP_OK;
}

void rs_reuse_free(run_sim *s)
{
    coll_sys_free(s->scs);
    evq_free(s->sq);
    np_hmap_free(&s->sig_index);
    np_hmap_free(&s->reuse_index);
    free(s->sig_pool);
    free(s->sig);
    free(s->loc_n);
    free(s->loc_links);
    free(s->reuse);
    free(s->prof);
}
