/* kc_impl.h — the state behind kernel.h's kc_prog and kc_ctx (internal to compiler/). */
#ifndef NPUSIM_KC_IMPL_H
#define NPUSIM_KC_IMPL_H

#include "kc_alloc.h"
#include "kernel.h"

/* One core's resources. */
typedef struct kc_core_res {
    kc_blocks spad, acc;
    kc_sems sems;
    uint16_t regs;        /* bit r: register r taken (r0 never) */
    uint32_t regs_owner[ISA_N_REGS];
} kc_core_res;

/* An HBM range some kernel read or wrote since the last barrier, and who. */
typedef struct kc_access {
    uint64_t lo, hi;
    uint32_t core0, n_cores;
    bool write;
} kc_access;

struct kc_prog {
    const arch_config *cfg;
    isa_program *p;
    isa_emit *e;
    uint32_t chip, n_cores;
    kc_core_res *cores;
    uint32_t barriers;    /* emitted so far (the next id, mod 2^16) */
    uint32_t kernels;     /* compiled so far: owner ids are 1 + this */
    bool no_auto_barrier, fences_nocomm, stream_order, finished;
    const struct kc_tile_cache *tiles;
    kc_access *acc;
    uint32_t n_acc, cap_acc;
};

/* The kernel being compiled: kc_ctx's private part. */
typedef struct kc_ctx_impl {
    kc_ctx pub;
    const kc_kernel_def *def;
    uint32_t owner;
    uint32_t core; /* current */
} kc_ctx_impl;

/* Quiesces core's quarantined resources (after a fence or barrier there). */
void kc_prog_quiesce(kc_prog *p, uint32_t core);

#endif
