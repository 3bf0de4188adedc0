/* kc_phase.c — kernels made of phases (see kc_phase.h). */
#include "kc_phase.h"

#include "kc_impl.h"

np_status kc_phase_run(kc_ctx *x, const kc_kernel *sub)
{
    const kc_kernel_def *d = kc_kernel_find(sub->op);
    if (!d)
        return kc_fail(x, NP_ERR_INCONSISTENT, "a phase of op %s, which has no kernel",
                       nn_op_name(sub->op));
    kc_ctx_impl *xi = (kc_ctx_impl *)(uintptr_t)x;
    kc_ctx_impl si = *xi;
    si.pub.k = sub;
    si.def = d;
    isa_emit_core(x->e, sub->place.core0);
    si.core = sub->place.core0;
    d->compile(&si.pub);
    return kc_status(x);
}

/* The kernel's resources on its cores given back (into quarantine). */
static void kc_phase_release(kc_ctx *x)
{
    kc_ctx_impl *xi = (kc_ctx_impl *)(uintptr_t)x;
    const kc_place *pl = &x->k->place;
    uint32_t n = pl->n_cores ? pl->n_cores : 1;
    for (uint32_t c = pl->core0; c < pl->core0 + n; c++) {
        kc_core_res *r = &x->prog->cores[c];
        kc_blocks_release(&r->spad, xi->owner);
        kc_blocks_release(&r->acc, xi->owner);
        kc_sems_release(&r->sems, xi->owner);
        for (unsigned i = 1; i < ISA_N_REGS; i++)
            if ((r->regs & (1u << i)) && r->regs_owner[i] == xi->owner)
                r->regs &= (uint16_t)~(1u << i);
    }
}

np_status kc_phase_end(kc_ctx *x)
{
    if (kc_status(x) != NP_OK)
        return kc_status(x);
    kc_phase_release(x);
    np_err e = {0};
    if (kc_barrier(x->prog, &e) != NP_OK)
        return kc_fail(x, e.status, "%s", e.msg);
    return kc_core(x, x->k->place.core0);
}

np_status kc_phase_end_local(kc_ctx *x)
{
    if (kc_status(x) != NP_OK)
        return kc_status(x);
    kc_phase_release(x);
    const kc_place *pl = &x->k->place;
    uint32_t n = pl->n_cores ? pl->n_cores : 1;
    np_err e = {0};
    for (uint32_t c = pl->core0; c < pl->core0 + n; c++)
        if (kc_fence(x->prog, c, &e) != NP_OK)
            return kc_fail(x, e.status, "%s", e.msg);
    return kc_core(x, pl->core0);
}
