// tb_rtl_model.h — what the RTL test benches (tests/tb_vpu_rtl.cpp, tests/tb_dma_rtl.cpp) need
// from hw-model: run one core's program in timing mode and tell, per instruction, when the
// model dispatched, started, completed and retired it, in core cycles.
//
// The bench writes each instruction it wants to observe as a kernel of its own ("i<N>" around
// it, .endk after), so the report's kernel figures give its dispatch (the kernel's first
// dispatch) and retirement (its last retirement); the trace hook gives its start and completion.
#ifndef NPUSIM_TB_RTL_MODEL_H
#define NPUSIM_TB_RTL_MODEL_H

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

extern "C" {
#include "arch.h"
#include "core.h"
#include "isa_asm.h"
}

struct tb_insn_times {
    bool seen = false;     // in the trace (it occupied its unit)
    int64_t dispatch = -1, start = -1, end = -1, retire = -1; // core cycles
};

struct tb_model_run {
    bool ok = false;
    std::string error;
    std::vector<tb_insn_times> t; // by kernel number N of "i<N>"
};

inline bool tb_arch(const char *preset, const std::vector<std::string> &sets, arch_config *cfg,
                    std::string *error)
{
    std::vector<const char *> s;
    for (const std::string &x : sets)
        s.push_back(x.c_str());
    np_err e{};
    if (arch_resolve(preset, s.data(), s.size(), cfg, &e) != NP_OK) {
        *error = e.msg;
        return false;
    }
    return true;
}

// Runs src (one core's program whose kernels "i0" .. "i<n-1>" each hold one instruction) on
// cfg in timing mode; cfg's core clock must be 1 GHz (a cycle is 1000 ps).
inline tb_model_run tb_model(const arch_config &cfg, const std::string &src, size_t n)
{
    tb_model_run r;
    r.t.resize(n);
    isa_target t;
    isa_target_from_arch(&cfg, &t);
    isa_asm_opts o{};
    o.target = &t;
    isa_program *p = nullptr;
    np_err e{};
    if (isa_asm(src.c_str(), src.size(), "tb.s", &o, &p, &e) != NP_OK) {
        r.error = e.msg;
        return r;
    }
    // pc -> kernel number, for the trace
    std::vector<int> of(p->cores[0].n_insns, -1);
    for (uint32_t k = 0; k < p->cores[0].n_kernels; k++) {
        const isa_kernel &kn = p->cores[0].kernels[k];
        if (kn.name[0] == 'i')
            for (uint32_t pc = kn.start; pc < kn.start + kn.count; pc++)
                of[pc] = atoi(kn.name + 1);
    }
    struct ctx_t {
        tb_model_run *r;
        std::vector<int> *of;
    } ctx{&r, &of};
    core_sim_opts so{};
    so.trace = [](void *c, const core_trace_insn *ti) {
        ctx_t *x = static_cast<ctx_t *>(c);
        int k = ti->pc < x->of->size() ? (*x->of)[ti->pc] : -1;
        if (k >= 0 && (size_t)k < x->r->t.size()) {
            x->r->t[k].seen = true;
            x->r->t[k].start = (int64_t)(ti->start_ps / 1000);
            x->r->t[k].end = (int64_t)(ti->end_ps / 1000);
        }
    };
    so.trace_ctx = &ctx;
    core_report *rep = nullptr;
    if (core_sim_run_opts(&cfg, p, &so, nullptr, &rep, &e) != NP_OK) {
        r.error = e.msg;
        isa_program_free(p);
        return r;
    }
    for (uint32_t k = 0; k < rep->n_kernels; k++) {
        const core_kernel_report &kr = rep->kernels[k];
        if (kr.name[0] != 'i')
            continue;
        size_t i = (size_t)atoi(kr.name + 1);
        if (i < n) {
            r.t[i].dispatch = (int64_t)(kr.start_ps / 1000);
            r.t[i].retire = (int64_t)(kr.end_ps / 1000);
        }
    }
    core_report_free(rep);
    isa_program_free(p);
    r.ok = true;
    return r;
}

// A small deterministic generator (xorshift64*), seeded.
struct tb_rng {
    uint64_t x;
    explicit tb_rng(uint64_t seed) : x(seed * 0x9e3779b97f4a7c15ull + 0x2545f4914f6cdd1dull) {}
    uint64_t next()
    {
        x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
        return x * 0x2545f4914f6cdd1dull;
    }
    unsigned below(unsigned n) { return (unsigned)(next() % n); }
};

#endif
