/* kc_prog.c — the program under construction: per-core resources, fences and barriers, the
 * allocation calls of kernels, and finishing (see kernel.h). */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kc_impl.h"

np_status kc_prog_new(const arch_config *cfg, const kc_prog_opts *opts, kc_prog **out,
                      np_err *err)
{
    *out = NULL;
    kc_prog_opts o = opts ? *opts : (kc_prog_opts){0};
    uint32_t chip_cores = (uint32_t)cfg->chip.cores;
    if (o.cores == 0)
        o.cores = chip_cores;
    if (o.cores > chip_cores)
        return np_err_set(err, NP_ERR_RANGE, "a program on %" PRIu32 " cores, but the chip has "
                          "%" PRIu32, o.cores, chip_cores);
    if (o.emit.hbm_bytes == 0)
        o.emit.hbm_bytes = cfg->chip.hbm_bytes;
    kc_prog *p = calloc(1, sizeof *p);
    if (!p)
        goto nomem;
    p->cfg = cfg;
    p->chip = o.chip;
    p->n_cores = o.cores;
    p->no_auto_barrier = o.no_auto_barrier;
    p->stream_order = o.stream_order;
    p->fences_nocomm = o.fences_nocomm;
    p->tiles = o.tiles;
    isa_target t;
    isa_target_from_arch(cfg, &t);
    if (!(p->p = isa_program_new(&t)) || !(p->cores = calloc(o.cores, sizeof *p->cores)))
        goto nomem;
    if (isa_emit_new(p->p, &o.emit, &p->e, err) != NP_OK) {
        kc_prog_free(p);
        return err->status;
    }
    for (uint32_t c = 0; c < o.cores; c++) {
        kc_blocks_init(&p->cores[c].spad, cfg->core.sram_bytes);
        kc_blocks_init(&p->cores[c].acc, cfg->core.acc_bytes);
    }
    *out = p;
    return NP_OK;
nomem:
    kc_prog_free(p);
    return np_err_set(err, NP_ERR_NOMEM, "out of memory creating a program");
}

void kc_prog_free(kc_prog *p)
{
    if (!p)
        return;
    if (p->cores)
        for (uint32_t c = 0; c < p->n_cores; c++) {
            kc_blocks_fini(&p->cores[c].spad);
            kc_blocks_fini(&p->cores[c].acc);
        }
    free(p->cores);
    isa_emit_free(p->e);
    isa_program_free(p->p);
    free(p->acc);
    free(p);
}

const arch_config *kc_prog_arch(const kc_prog *p) { return p->cfg; }
uint32_t kc_prog_cores(const kc_prog *p) { return p->n_cores; }
isa_emit *kc_prog_emit(kc_prog *p) { return p->e; }
isa_program *kc_prog_program(kc_prog *p) { return p->p; }

isa_program *kc_prog_take(kc_prog *p)
{
    isa_program *q = p->p;
    p->p = NULL;
    isa_emit_free(p->e);
    p->e = NULL;
    return q;
}

np_status kc_prog_bss(kc_prog *p, const char *name, uint64_t bytes, uint64_t *addr,
                      np_err *err)
{
    if (isa_emit_bss(p->e, name, bytes, 64, addr) != NP_OK)
        return isa_emit_status(p->e, err);
    return NP_OK;
}

np_status kc_tensor_fresh(kc_prog *p, kc_tensor *t, nn_dtype dtype, int ndim,
                          const int64_t *shape, np_err *err)
{
    kc_tensor_dense(t, 0, dtype, ndim, shape);
    return kc_prog_bss(p, NULL, kc_tensor_bytes(t) ? kc_tensor_bytes(t) : 1, &t->addr, err);
}

void kc_prog_quiesce(kc_prog *p, uint32_t core)
{
    kc_blocks_quiesce(&p->cores[core].spad);
    kc_blocks_quiesce(&p->cores[core].acc);
    kc_sems_quiesce(&p->cores[core].sems);
}

np_status kc_prog_spad_alloc(kc_prog *p, uint32_t core, uint64_t bytes, uint64_t align,
                             uint64_t *off, np_err *err)
{
    bool oom;
    if (core >= p->n_cores)
        return np_err_set(err, NP_ERR_RANGE, "scratchpad of core %" PRIu32 ": the program "
                          "has %" PRIu32 " cores", core, p->n_cores);
    if (!kc_blocks_alloc(&p->cores[core].spad, bytes, align, 0, off, &oom))
        return np_err_set(err, oom ? NP_ERR_NOMEM : NP_ERR_RANGE, "scratchpad of core %" PRIu32
                          ": %" PRIu64 " bytes do not fit (largest free block %" PRIu64 ")",
                          core, bytes, kc_blocks_largest(&p->cores[core].spad, align, false));
    return NP_OK;
}

void kc_prog_spad_free(kc_prog *p, uint32_t core, uint64_t off)
{
    if (core < p->n_cores)
        kc_blocks_free(&p->cores[core].spad, off);
}

np_status kc_prog_sem_alloc(kc_prog *p, uint32_t core, unsigned *sem, np_err *err)
{
    if (core >= p->n_cores)
        return np_err_set(err, NP_ERR_RANGE, "semaphore of core %" PRIu32 ": the program has %"
                          PRIu32 " cores", core, p->n_cores);
    int i = kc_sems_alloc(&p->cores[core].sems, 0);
    if (i < 0)
        return np_err_set(err, NP_ERR_RANGE, "all %d semaphores of core %" PRIu32 " are taken",
                          ISA_N_SEMS, core);
    *sem = (unsigned)i;
    return NP_OK;
}

void kc_prog_sem_free(kc_prog *p, uint32_t core, unsigned sem)
{
    if (core < p->n_cores && sem < ISA_N_SEMS && p->cores[core].sems.state[sem] == 1)
        p->cores[core].sems.state[sem] = KC_SEM_QUARANTINED;
}

np_status kc_fence(kc_prog *p, uint32_t core, np_err *err)
{
    if (core >= p->n_cores)
        return np_err_set(err, NP_ERR_RANGE, "fence on core %" PRIu32 ": the program has %"
                          PRIu32 " cores", core, p->n_cores);
    if (isa_emit_core(p->e, core) != NP_OK || ISA_EMIT(p->e, FENCE, .nocomm = isa_imm(p->fences_nocomm)) != NP_OK)
        return isa_emit_status(p->e, err);
    kc_prog_quiesce(p, core);
    return NP_OK;
}

np_status kc_barrier(kc_prog *p, np_err *err)
{
    uint32_t id = p->barriers++ & 0xffffu;
    for (uint32_t c = 0; c < p->n_cores; c++) {
        if (isa_emit_core(p->e, c) != NP_OK || ISA_EMIT(p->e, BARRIER, isa_imm(id), .nocomm = isa_imm(p->fences_nocomm)) != NP_OK)
            return isa_emit_status(p->e, err);
        kc_prog_quiesce(p, c);
    }
    p->n_acc = 0;
    return NP_OK;
}

np_status kc_prog_finish(kc_prog *p, np_err *err)
{
    if (!p->p)
        return np_err_set(err, NP_ERR_INCONSISTENT, "the program was handed over already");
    if (!p->finished) {
        for (uint32_t c = 0; c < p->n_cores; c++)
            if (isa_emit_core(p->e, c) != NP_OK || ISA_EMIT(p->e, HALT) != NP_OK)
                return isa_emit_status(p->e, err);
        p->finished = true;
    }
    return isa_emit_finish(p->e, err);
}

/* ---- the calls of a kernel being compiled ------------------------------------------------- */

static kc_ctx_impl *impl(const kc_ctx *x) { return (kc_ctx_impl *)(uintptr_t)x; }

np_status kc_status(const kc_ctx *x) { return isa_emit_status(x->e, NULL); }

np_status kc_fail(kc_ctx *x, np_status s, const char *fmt, ...)
{
    char msg[NP_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return isa_emit_fail(x->e, s, "%s: %s", nn_op_name(x->k->op), msg);
}

np_status kc_core(kc_ctx *x, uint32_t core)
{
    const kc_place *pl = &x->k->place;
    uint32_t n = pl->n_cores ? pl->n_cores : 1;
    if (core < pl->core0 || core - pl->core0 >= n)
        return kc_fail(x, NP_ERR_INCONSISTENT, "core %" PRIu32 " is not in the placement "
                       "(cores %" PRIu32 "..%" PRIu32 ")", core, pl->core0, pl->core0 + n - 1);
    impl(x)->core = core;
    return isa_emit_core(x->e, core);
}

/* Allocates from one memory of the current core, fencing first when only that frees it. */
static np_status mem_alloc(kc_ctx *x, bool spad, uint64_t bytes, uint64_t align, uint64_t *off)
{
    *off = 0;
    if (kc_status(x) != NP_OK)
        return kc_status(x);
    kc_ctx_impl *xi = impl(x);
    kc_core_res *r = &x->prog->cores[xi->core];
    kc_blocks *b = spad ? &r->spad : &r->acc;
    const char *what = spad ? "scratchpad" : "accumulator SRAM";
    if (align & (align - 1))
        return kc_fail(x, NP_ERR_RANGE, "%s alignment %" PRIu64 " is not a power of two", what,
                       align);
    bool oom, got = kc_blocks_alloc(b, bytes, align, xi->owner, off, &oom);
    if (!got && !oom && kc_blocks_largest(b, align, true) >= bytes) {
        np_err e = {0};
        if (kc_fence(x->prog, xi->core, &e) != NP_OK)
            return kc_status(x);
        got = kc_blocks_alloc(b, bytes, align, xi->owner, off, &oom);
    }
    if (got) {
        uint64_t held = spad ? kc_blocks_owned(b, xi->owner) : 0; /* kc_result.spad_bytes */
        if (held > x->res->spad_bytes)
            x->res->spad_bytes = held;
        return NP_OK;
    }
    if (oom)
        return kc_fail(x, NP_ERR_NOMEM, "out of memory");
    return kc_fail(x, NP_ERR_RANGE, "%" PRIu64 " bytes of %s on core %" PRIu32 " do not fit: "
                   "the largest free block is %" PRIu64 " of %" PRIu64 " bytes", bytes, what,
                   xi->core, kc_blocks_largest(b, align, true), b->size);
}

np_status kc_spad_alloc(kc_ctx *x, uint64_t bytes, uint64_t align, uint64_t *off)
{
    return mem_alloc(x, true, bytes, align, off);
}

np_status kc_acc_alloc(kc_ctx *x, uint64_t bytes, uint64_t align, uint64_t *off)
{
    return mem_alloc(x, false, bytes, align, off);
}

uint64_t kc_spad_avail(const kc_ctx *x, uint32_t core)
{
    return core < x->prog->n_cores ? kc_blocks_largest(&x->prog->cores[core].spad, 64, true) : 0;
}

uint64_t kc_acc_avail(const kc_ctx *x, uint32_t core)
{
    return core < x->prog->n_cores ? kc_blocks_largest(&x->prog->cores[core].acc, 64, true) : 0;
}

np_status kc_sem_alloc(kc_ctx *x, unsigned *sem)
{
    *sem = 0;
    if (kc_status(x) != NP_OK)
        return kc_status(x);
    kc_ctx_impl *xi = impl(x);
    kc_sems *s = &x->prog->cores[xi->core].sems;
    int i = kc_sems_alloc(s, xi->owner);
    if (i < 0 && kc_sems_any_quarantined(s)) {
        np_err e = {0};
        if (kc_fence(x->prog, xi->core, &e) != NP_OK)
            return kc_status(x);
        i = kc_sems_alloc(s, xi->owner);
    }
    if (i < 0)
        return kc_fail(x, NP_ERR_RANGE, "all %d semaphores of core %" PRIu32 " are taken",
                       ISA_N_SEMS, xi->core);
    *sem = (unsigned)i;
    return NP_OK;
}

np_status kc_reg_alloc(kc_ctx *x, unsigned *reg)
{
    *reg = 0;
    if (kc_status(x) != NP_OK)
        return kc_status(x);
    kc_ctx_impl *xi = impl(x);
    kc_core_res *r = &x->prog->cores[xi->core];
    for (unsigned i = 1; i < ISA_N_REGS; i++)
        if (!(r->regs & (1u << i))) {
            r->regs |= (uint16_t)(1u << i);
            r->regs_owner[i] = xi->owner;
            *reg = i;
            return NP_OK;
        }
    return kc_fail(x, NP_ERR_RANGE, "all %d registers of core %" PRIu32 " are taken",
                   ISA_N_REGS - 1, xi->core);
}

/* ---- loops -------------------------------------------------------------------------------- */

np_status kc_loop_begin(kc_ctx *x, kc_loop *l, uint64_t count, unsigned n, const unsigned *reg,
                        const int64_t *step)
{
    memset(l, 0, sizeof *l);
    if (kc_status(x) != NP_OK)
        return kc_status(x);
    if (count == 0 || count > UINT32_MAX || n > KC_LOOP_MAX_REGS)
        return kc_fail(x, NP_ERR_RANGE, "a loop of %" PRIu64 " iterations stepping %u registers "
                       "(1..%u iterations, at most %d registers)", count, n, UINT32_MAX,
                       KC_LOOP_MAX_REGS);
    l->count = count;
    for (unsigned i = 0; i < n; i++)
        if (reg[i] && step[i]) { /* r0 and zero steps need nothing */
            l->reg[l->n] = reg[i];
            l->step[l->n++] = step[i];
        }
    if (count == 1)
        return NP_OK;
    isa_opnd st[3] = {{0}, {0}, {0}};
    for (unsigned i = 0; i < l->n && i < 3; i++)
        st[i] = isa_step(l->reg[i], l->step[i]);
    l->real = true;
    return ISA_EMIT(x->e, LOOP, isa_imm((int64_t)count), st[0], st[1], st[2]);
}

np_status kc_loop_end(kc_ctx *x, kc_loop *l)
{
    if (!l->real)
        return kc_status(x);
    for (unsigned i = 3; i < l->n; i++)
        ISA_EMIT(x->e, ADDI, isa_reg(l->reg[i]), isa_reg(l->reg[i]), isa_imm(l->step[i]));
    ISA_EMIT(x->e, ENDLOOP);
    for (unsigned i = 3; i < l->n; i++)
        ISA_EMIT(x->e, ADDI, isa_reg(l->reg[i]), isa_reg(l->reg[i]),
                 isa_imm(-(int64_t)l->count * l->step[i]));
    return kc_status(x);
}
