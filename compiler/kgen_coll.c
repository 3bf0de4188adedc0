/* kgen_coll.c — ring collectives as one ISA program per chip (see kgen_coll.h). */
#include "kgen_coll.h"

#include <stdlib.h>

#include "kgen_text.h"

#define KGEN_COLL_X 0x100000ull /* X's HBM address, as the matmul's operands */

const char *kgen_coll_op_name(kgen_coll_op op)
{
    static const char *const names[] = {"all_reduce", "all_gather", "reduce_scatter"};
    return names[op];
}

/* Element offset of segment i (of p over elems elements) and its size. */
static uint64_t seg_first(uint64_t elems, uint64_t p, uint64_t i)
{
    uint64_t q = elems / p, r = elems % p;
    return i * q + (i < r ? i : r);
}

static uint64_t seg_count(uint64_t elems, uint64_t p, uint64_t i)
{
    return elems / p + (i < elems % p);
}

/* One ring phase of rank v: steps g = 0 .. p-2 send segment s_g = (v + o - g) mod p and
 * receive r_g = s_g - 1 mod p (reduce: add it in), all with tag `tag` (a pair's messages of
 * one tag are taken in send order). Steps go in runs in which neither index wraps and
 * neither segment's size changes, so each run is one loop whose registers r1 (send) and r2
 * (receive) step down one segment per iteration: O(1) instructions whatever p is. */
static void emit_phase(kgen_text *t, const kgen_coll *c, uint64_t v, int64_t o, bool reduce,
                       uint64_t tag)
{
    uint64_t p = c->chips, e = isa_dtype_size[c->dtype], elems = c->bytes / e;
    uint64_t next = (v + 1) % p, prev = (v + p - 1) % p, rem = elems % p;
    const char *dt = isa_dtype_names[c->dtype];
    for (uint64_t g = 0; g + 1 < p;) {
        uint64_t s = (v + 2 * p + (uint64_t)(o + 1) - 1 - g) % p, r = (s + p - 1) % p;
        /* the run: while s and r stay >= 0 without wrapping and on the same side of rem */
        uint64_t n = p - 1 - g;          /* steps left */
        uint64_t lim_s = s + 1, lim_r = r + 1; /* steps before s or r wraps below 0 */
        if (s >= rem && rem)
            lim_s = s - rem + 1; /* then it crosses from size q into size q + 1 */
        if (r >= rem && rem)
            lim_r = r - rem + 1;
        n = n < lim_s ? n : lim_s;
        n = n < lim_r ? n : lim_r;
        uint64_t sn = seg_count(elems, p, s), rn = seg_count(elems, p, r);
        if (sn || rn) {
            kgen_emit(t, "    li r1, 0x%llx\n    li r2, 0x%llx\n"
                         "    loop %llu, r1-=0x%llx, r2-=0x%llx\n",
                      (unsigned long long)(seg_first(elems, p, s) * e),
                      (unsigned long long)(seg_first(elems, p, r) * e), (unsigned long long)n,
                      (unsigned long long)(sn * e), (unsigned long long)(rn * e));
            if (sn)
                kgen_emit(t, "    comm.send peer(%llu, 0), hbm[r1+X], %llu, %llu\n",
                          (unsigned long long)next, (unsigned long long)(sn * e),
                          (unsigned long long)tag);
            if (rn)
                kgen_emit(t, "    comm.recv peer(%llu, 0), hbm[r2+X], %llu, %llu%s%s\n",
                          (unsigned long long)prev, (unsigned long long)(rn * e),
                          (unsigned long long)tag, reduce ? ", add, " : "", reduce ? dt : "");
            kgen_emit(t, "    endloop\n");
        }
        g += n;
    }
}

np_status kgen_coll_build(const arch_config *cfg, const kgen_coll *c, isa_program ***progs,
                          char ***texts, np_err *err)
{
    *progs = NULL;
    if (texts)
        *texts = NULL;
    uint64_t p = c->chips, e = isa_dtype_size[c->dtype];
    if (p < 2 || p > (uint64_t)cfg->system.chips)
        return np_err_set(err, NP_ERR_RANGE, "%s: %llu ranks for a system of %lld chips (2 .. "
                          "system.chips)", kgen_coll_op_name(c->op), (unsigned long long)p,
                          (long long)cfg->system.chips);
    if (!c->bytes || c->bytes % e)
        return np_err_set(err, NP_ERR_RANGE, "%s: %llu bytes are not whole %s elements (at "
                          "least one)", kgen_coll_op_name(c->op), (unsigned long long)c->bytes,
                          isa_dtype_names[c->dtype]);
    if (c->bytes > cfg->chip.hbm_bytes - KGEN_COLL_X)
        return np_err_set(err, NP_ERR_RANGE, "%s: %llu bytes do not fit the HBM above 0x%llx",
                          kgen_coll_op_name(c->op), (unsigned long long)c->bytes,
                          (unsigned long long)KGEN_COLL_X);
    uint64_t seg = (c->bytes / e + p - 1) / p * e;
    if (seg > UINT32_MAX)
        return np_err_set(err, NP_ERR_RANGE, "%s: a segment of %llu bytes exceeds comm.*'s "
                          "32-bit byte count", kgen_coll_op_name(c->op), (unsigned long long)seg);
    isa_program **pv = calloc(p, sizeof *pv);
    char **tv = calloc(p, sizeof *tv);
    if (!pv || !tv) {
        free(pv);
        free(tv);
        return np_err_set(err, NP_ERR_NOMEM, "out of memory generating %s",
                          kgen_coll_op_name(c->op));
    }
    np_status st = NP_OK;
    for (uint64_t v = 0; v < p && st == NP_OK; v++) {
        kgen_text t;
        kgen_text_init(&t);
        kgen_emit(&t, "; %s ring, rank %llu of %llu, %llu bytes of %s (generated by kgen_coll)\n"
                      ".bss 0x%llx\nX: .space %llu\n.core 0\n.kernel %s\n",
                  kgen_coll_op_name(c->op), (unsigned long long)v, (unsigned long long)p,
                  (unsigned long long)c->bytes, isa_dtype_names[c->dtype],
                  (unsigned long long)KGEN_COLL_X, (unsigned long long)c->bytes,
                  kgen_coll_op_name(c->op));
        if (c->op == KGEN_COLL_ALL_REDUCE) {
            emit_phase(&t, c, v, 0, true, 0);
            emit_phase(&t, c, v, 1, false, 1);
        } else if (c->op == KGEN_COLL_REDUCE_SCATTER) {
            emit_phase(&t, c, v, -1, true, 0);
        } else {
            emit_phase(&t, c, v, 0, false, 0);
        }
        kgen_emit(&t, "    fence\n    halt\n");
        st = kgen_text_finish(&t, cfg, "kgen_coll.s", &tv[v], &pv[v], err);
    }
    if (st != NP_OK) {
        for (uint64_t v = 0; v < p; v++) {
            isa_program_free(pv[v]);
            free(tv[v]);
        }
        free(pv);
        free(tv);
        return st;
    }
    *progs = pv;
    if (texts) {
        *texts = tv;
    } else {
        for (uint64_t v = 0; v < p; v++)
            free(tv[v]);
        free(tv);
    }
    return NP_OK;
}
