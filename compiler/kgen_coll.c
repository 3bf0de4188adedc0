/* kgen_coll.c — collectives as one SPMD ISA program from their schedule (see kgen_coll.h).
 *
 * The lowering reads the ring's schedule (noc/coll_sched.h) over ring positions: each op of
 * position v becomes relative — its peer as an offset from v, its X offset as a slot offset
 * from v's own slot — and must be the same for every v. Position 0's ops, in the order their
 * dependencies allow in one in-order COMM queue (a send once the receives it waits for are
 * before it), are the program; runs of (send, receive) steps whose relative slots step evenly
 * are one loop each, with r1 and r2 stepping the send and receive addresses. */
#include "kgen_coll.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "coll.h"
#include "isa_emit.h"

const char *kgen_coll_op_name(kgen_coll_op op)
{
    static const char *const names[] = {"all_reduce", "all_gather", "reduce_scatter"};
    return names[op];
}

static coll_op kgen_coll_sched_op(kgen_coll_op op)
{
    return op == KGEN_COLL_ALL_GATHER ? COLL_OP_ALL_GATHER
           : op == KGEN_COLL_REDUCE_SCATTER ? COLL_OP_REDUCE_SCATTER : COLL_OP_ALL_REDUCE;
}

/* One op of a rank, relative to it. */
typedef struct kgen_op {
    bool send, reduce;
    int64_t peer;      /* rank offset, in (-p/2, p/2] */
    uint64_t off;      /* X offset from the rank's own slot, mod the buffer */
    uint64_t bytes;
} kgen_op;

static kgen_op kgen_rel(const coll_xfer *x, bool send, uint32_t v, uint32_t p,
                        uint64_t slot)
{
    uint64_t total = (uint64_t)p * slot;
    int64_t d = ((int64_t)x->peer - v + p) % p;
    if (d > (int64_t)p / 2)
        d -= p;
    return (kgen_op){send, !send && x->reduce, d, (x->offset + total - (uint64_t)v * slot) % total,
                     x->bytes};
}

static bool kgen_op_eq(const kgen_op *a, const kgen_op *b)
{
    return a->send == b->send && a->reduce == b->reduce && a->peer == b->peer &&
           a->off == b->off && a->bytes == b->bytes;
}

/* Position 0's ops in COMM-queue order into *ops (malloc'd), checked against every
 * position's. */
static np_status kgen_ops(const coll_sched *s, uint32_t p, uint64_t slot, kgen_op **ops,
                          uint32_t *n_ops, np_err *err)
{
    uint32_t ns = coll_sched_sends(s, 0, 0), nr = coll_sched_recvs(s, 0);
    kgen_op *v = malloc(((size_t)ns + nr + 1) * sizeof *v);
    uint32_t *have = calloc((size_t)ns + 1, sizeof *have); /* receives before each send */
    if (!v || !have) {
        free(v);
        free(have);
        return np_err_set(err, NP_ERR_NOMEM, "out of memory lowering a collective");
    }
    np_status st = NP_OK;
    uint32_t n = 0, si = 0, ri = 0;
    while (si < ns || ri < nr) {
        coll_xfer x;
        if (si < ns) {
            coll_sched_send(s, 0, 0, si, &x);
            if (have[si] == x.deps) {
                v[n++] = kgen_rel(&x, true, 0, p, slot);
                si++;
                continue;
            }
        }
        if (ri == nr) {
            st = np_err_set(err, NP_ERR_INTERNAL, "send %" PRIu32 " of the schedule waits for "
                            "a receive that never comes", si);
            goto out;
        }
        coll_sched_recv(s, 0, ri++, &x);
        if (x.unblock_port == 0)
            for (uint32_t k = x.unblock_lo; k < x.unblock_hi && k < ns; k++)
                have[k]++;
        v[n++] = kgen_rel(&x, false, 0, p, slot);
    }
    /* one text for every rank: the same relative ops everywhere */
    for (uint32_t r = 1; r < p && st == NP_OK; r++) {
        if (coll_sched_sends(s, r, 0) != ns || coll_sched_recvs(s, r) != nr) {
            st = np_err_set(err, NP_ERR_INTERNAL, "rank %" PRIu32 " of the schedule has other "
                            "ops than rank 0", r);
            break;
        }
        uint32_t a = 0, b = 0;
        for (uint32_t i = 0; i < n; i++) {
            coll_xfer x;
            if (v[i].send)
                coll_sched_send(s, r, 0, a++, &x);
            else
                coll_sched_recv(s, r, b++, &x);
            kgen_op o = kgen_rel(&x, v[i].send, r, p, slot);
            if (!kgen_op_eq(&o, &v[i])) {
                st = np_err_set(err, NP_ERR_INTERNAL, "rank %" PRIu32 "'s op %" PRIu32 " is not "
                                "rank 0's, relatively: the schedule is not one text", r, i);
                break;
            }
        }
    }
out:
    free(have);
    if (st != NP_OK) {
        free(v);
        return st;
    }
    *ops = v;
    *n_ops = n;
    return NP_OK;
}

/* The run of (send, receive) pairs starting at op i: how many pairs step their offsets
 * evenly (0 when ops i, i + 1 are not such a pair), and the steps. */
static uint32_t kgen_run(const kgen_op *v, uint32_t n, uint32_t i, int64_t *ds, int64_t *dr)
{
    if (i + 1 >= n || !v[i].send || v[i + 1].send)
        return 0;
    uint32_t k = 1;
    *ds = *dr = 0;
    while (i + 2 * k + 1 < n) {
        const kgen_op *s0 = &v[i + 2 * (k - 1)], *r0 = s0 + 1, *s1 = s0 + 2, *r1 = s0 + 3;
        if (!s1->send || r1->send || s1->peer != s0->peer || r1->peer != r0->peer ||
            s1->bytes != s0->bytes || r1->bytes != r0->bytes || r1->reduce != r0->reduce)
            break;
        int64_t a = (int64_t)s1->off - (int64_t)s0->off, b = (int64_t)r1->off - (int64_t)r0->off;
        if (k > 1 && (a != *ds || b != *dr))
            break;
        *ds = a;
        *dr = b;
        k++;
    }
    return k;
}

static void kgen_emit_comm(isa_emit *e, const kgen_coll *c, const kgen_op *o, unsigned reg,
                           uint64_t x_addr)
{
    isa_opnd peer = isa_peer_rel(ISA_PEER_FORM_ADD, c->group, 0, o->peer, c->core);
    if (o->send) {
        ISA_EMIT(e, COMM_SEND, peer, isa_hbm(reg, x_addr), isa_imm((int64_t)o->bytes),
                 isa_imm(0));
    } else if (o->reduce) {
        ISA_EMIT(e, COMM_RECV, peer, isa_hbm(reg, x_addr), isa_imm((int64_t)o->bytes),
                 isa_imm(0), isa_enum(ISA_RED_ADD), isa_enum(c->dtype));
    } else {
        ISA_EMIT(e, COMM_RECV, peer, isa_hbm(reg, x_addr), isa_imm((int64_t)o->bytes),
                 isa_imm(0));
    }
}

/* The program of ops (relative, position 0's = every rank's). */
static np_status kgen_emit_prog(const arch_config *cfg, const kgen_coll *c, const kgen_op *v,
                                uint32_t n, uint64_t total, kgen_coll_prog *out, np_err *err)
{
    isa_target t;
    isa_target_from_arch(cfg, &t);
    if (!(out->prog = isa_program_new(&t)))
        return np_err_set(err, NP_ERR_NOMEM, "out of memory lowering a collective");
    isa_emit *e;
    isa_emit_opts o = {.hbm_bytes = cfg->chip.hbm_bytes};
    if (isa_emit_new(out->prog, &o, &e, err) != NP_OK)
        return err->status;
    isa_emit_bss(e, "X", total, 64, &out->x_addr);
    isa_emit_core(e, c->core);
    isa_emit_kernel_begin(e, kgen_coll_op_name(c->op));
    for (uint32_t i = 0; i < n;) {
        int64_t ds, dr;
        uint32_t k = kgen_run(v, n, i, &ds, &dr);
        if (k == 0) { /* a lone op */
            ISA_EMIT(e, LI, isa_reg(1), isa_imm((int64_t)v[i].off));
            kgen_emit_comm(e, c, &v[i], 1, out->x_addr);
            i++;
            continue;
        }
        ISA_EMIT(e, LI, isa_reg(1), isa_imm((int64_t)v[i].off));
        ISA_EMIT(e, LI, isa_reg(2), isa_imm((int64_t)v[i + 1].off));
        ISA_EMIT(e, LOOP, isa_imm(k), isa_step(1, ds), isa_step(2, dr));
        kgen_emit_comm(e, c, &v[i], 1, out->x_addr);
        kgen_emit_comm(e, c, &v[i + 1], 2, out->x_addr);
        ISA_EMIT(e, ENDLOOP);
        i += 2 * k;
    }
    isa_emit_kernel_end(e);
    ISA_EMIT(e, FENCE);
    ISA_EMIT(e, HALT);
    np_status st = isa_emit_finish(e, err);
    isa_emit_free(e);
    return st;
}

void kgen_coll_prog_free(kgen_coll_prog *p)
{
    if (!p)
        return;
    isa_program_free(p->prog);
    free(p->ring);
    memset(p, 0, sizeof *p);
}

np_status kgen_coll_build(const arch_config *cfg, const kgen_coll *c, kgen_coll_prog *out,
                          np_err *err)
{
    memset(out, 0, sizeof *out);
    const char *name = kgen_coll_op_name(c->op);
    uint64_t p = c->ranks, e = isa_dtype_size[c->dtype], nc = (uint64_t)cfg->system.chips;
    if (p < 2 || p > nc)
        return np_err_set(err, NP_ERR_RANGE, "%s: %llu ranks for a system of %llu chips (2 .. "
                          "system.chips)", name, (unsigned long long)p, (unsigned long long)nc);
    if (c->core >= (uint64_t)cfg->chip.cores || c->group >= ISA_N_GROUPS)
        return np_err_set(err, NP_ERR_RANGE, "%s: core %u of a %lld-core chip, group g%u (the "
                          "ISA has g0 .. g%d)", name, (unsigned)c->core,
                          (long long)cfg->chip.cores, c->group, ISA_N_GROUPS - 1);
    if (!c->bytes || c->bytes % e)
        return np_err_set(err, NP_ERR_RANGE, "%s: %llu bytes are not whole %s elements (at "
                          "least one)", name, (unsigned long long)c->bytes,
                          isa_dtype_names[c->dtype]);
    uint64_t slot = (c->bytes / e + p - 1) / p * e, total = slot * p;
    if (total > cfg->chip.hbm_bytes - ISA_EMIT_BSS_BASE)
        return np_err_set(err, NP_ERR_RANGE, "%s: %llu bytes do not fit the HBM above 0x%x", name,
                          (unsigned long long)total, ISA_EMIT_BSS_BASE);
    if (slot > UINT32_MAX)
        return np_err_set(err, NP_ERR_RANGE, "%s: a slot of %llu bytes exceeds comm.*'s 32-bit "
                          "byte count", name, (unsigned long long)slot);
    out->ring = malloc(p * sizeof *out->ring);
    uint32_t *chips = malloc(p * sizeof *chips);
    if (!out->ring || !chips) {
        free(chips);
        kgen_coll_prog_free(out);
        return np_err_set(err, NP_ERR_NOMEM, "out of memory lowering %s", name);
    }
    for (uint32_t i = 0; i < p; i++)
        chips[i] = c->chips ? c->chips[i] : i;
    /* the ring the flow engine runs on this topology: positions -> chips */
    net_params np;
    net_params_from_arch(cfg, &np);
    evq *q = NULL;
    net *n = NULL;
    coll_sched *s = NULL;
    uint32_t *order = NULL;
    kgen_op *ops = NULL;
    uint32_t n_ops = 0;
    coll_desc d = {.op = kgen_coll_sched_op(c->op), .algo = COLL_ALGO_RING, .chips = chips,
                   .n_chips = (uint32_t)p, .rank_order = c->rank_order};
    coll_sched_desc sd = {.op = d.op, .algo = COLL_ALGO_RING, .ranks = (uint32_t)p,
                          .bytes = total, .elem_bytes = (uint32_t)e};
    np_status st = evq_create(&q, err);
    if (st == NP_OK)
        st = net_create(&np, q, NULL, &n, err);
    for (uint32_t i = 0; st == NP_OK && i < p; i++)
        for (uint32_t j = 0; j < i; j++)
            if (chips[i] >= nc || chips[i] == chips[j]) {
                st = np_err_set(err, NP_ERR_RANGE, "%s: group rank %" PRIu32 " names chip %"
                                PRIu32 "%s", name, i, chips[i], chips[i] >= nc
                                ? ", which is not in the system" : " again");
                break;
            }
    if (st == NP_OK && chips[0] >= nc)
        st = np_err_set(err, NP_ERR_RANGE, "%s: group rank 0 names chip %" PRIu32 ", which is "
                        "not in the system", name, chips[0]);
    if (st == NP_OK)
        st = coll_fit(n, &d, &sd, &order, err);
    if (st == NP_OK) {
        for (uint32_t k = 0; k < p; k++)
            out->ring[k] = chips[order ? order[k] : k];
        sd.order = NULL; /* the schedule over ring positions: rank k is position k */
        st = coll_sched_create(&sd, &s, err);
    }
    if (st == NP_OK)
        st = kgen_ops(s, (uint32_t)p, slot, &ops, &n_ops, err);
    if (st == NP_OK)
        st = kgen_emit_prog(cfg, c, ops, n_ops, total, out, err);
    free(ops);
    coll_sched_free(s);
    free(order);
    net_free(n);
    evq_free(q);
    free(chips);
    if (st != NP_OK) {
        kgen_coll_prog_free(out);
        return st;
    }
    out->ranks = (uint32_t)p;
    out->group = c->group;
    out->slot_bytes = slot;
    return NP_OK;
}

np_status kgen_coll_idle(const arch_config *cfg, isa_program **out, np_err *err)
{
    isa_target t;
    isa_target_from_arch(cfg, &t);
    isa_program *p = isa_program_new(&t);
    isa_emit *e = NULL;
    if (!p)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory");
    np_status st = isa_emit_new(p, NULL, &e, err);
    if (st == NP_OK) {
        isa_emit_core(e, 0);
        ISA_EMIT(e, HALT);
        st = isa_emit_finish(e, err);
    }
    isa_emit_free(e);
    if (st != NP_OK) {
        isa_program_free(p);
        return st;
    }
    *out = p;
    return NP_OK;
}
