/* core_run.c — a run of the core model: the chips of the system, each with its program, its
 * HBM, its cores and its mesh, on one event queue with the chip-to-chip network between them;
 * the event loop; the deadlock check when it ends (see core.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core_sim.h"

static void chip_free(chip_sim *s)
{
    if (s->cores)
        for (uint32_t i = 0; i < s->n_cores; i++) {
            free(s->cores[i].k_first);
            free(s->cores[i].k_last);
            free(s->cores[i].k_seen);
            free(s->cores[i].kernel_of);
            hbm_free(s->cores[i].ports);
            hbm_free(s->cores[i].acc_port);
        }
    free(s->cores);
    mesh_free(s->noc);
    core_func_free(s->func);
    hbm_free(s->mem);
}

static void sys_free(sys_sim *y)
{
    for (uint32_t i = 0; y->chips && i < y->n_chips; i++)
        chip_free(&y->chips[i]);
    free(y->chips);
    for (uint32_t i = 0; i < y->n_msgs; i++)
        free(y->msgs[i].data);
    free(y->msgs);
    net_free(y->net);
    evq_free(y->q);
}

/* Builds chip `chip` of run y with program p (y->q exists); reg (may be NULL) gets its
 * mesh's link counters. */
static np_status chip_init(sys_sim *y, uint32_t chip, const isa_program *p, stats *reg,
                           np_err *err)
{
    chip_sim *s = &y->chips[chip];
    const arch_config *cfg = y->cfg;
    s->sys = y;
    s->chip = chip;
    s->cfg = cfg;
    s->prog = p;
    s->q = y->q;
    if (clk_init_ghz(&s->clk, cfg->core.clock_ghz, err) != NP_OK)
        return err->status;
    /* GB/s = 10^9 bytes/s = 10^-3 bytes/ps */
    if (hbm_create(s->q, cfg->chip.hbm_gb_per_s / 1000.0,
                   (uint64_t)(cfg->chip.hbm_latency_ns * 1000.0 + 0.5), &s->mem, err) != NP_OK)
        return err->status;
    if (y->meshes) { /* the chip's mesh, core i at router i, clocked by chip.noc_clock_ghz */
        mesh_params mp;
        mesh_params_from_arch(cfg, &mp);
        char prefix[32];
        if (y->n_chips > 1)
            snprintf(prefix, sizeof prefix, "chip%u.noc", chip);
        else
            snprintf(prefix, sizeof prefix, "noc");
        if (clk_init_ghz(&s->noc_clk, cfg->chip.noc_clock_ghz, err) != NP_OK ||
            mesh_create(&mp, reg, prefix, &s->noc, err) != NP_OK ||
            mesh_attach(s->noc, s->q, &s->noc_clk, err) != NP_OK)
            return err->status;
        mesh_set_deliver(s->noc, core_comm_mesh_deliver, s);
        mesh_set_sent(s->noc, core_comm_mesh_sent, s);
    }
    s->n_cores = p->n_cores;
    s->cores = calloc(p->n_cores ? p->n_cores : 1, sizeof *s->cores);
    if (!s->cores)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory creating the cores");
    for (uint32_t i = 0; i < p->n_cores; i++) {
        core_model *c = &s->cores[i];
        const isa_core_text *t = &p->cores[i];
        c->chip = s;
        c->id = t->core;
        c->index = i;
        c->mbox_head = c->mbox_tail = UINT32_MAX;
        if (hbm_create(s->q, (double)core_spad_bytes_per_cycle(cfg) * cfg->core.clock_ghz / 1000.0,
                       0, &c->ports, err) != NP_OK)
            return err->status;
        if (cfg->core.acc_port_bytes_per_cycle &&
            hbm_create(s->q, (double)cfg->core.acc_port_bytes_per_cycle * cfg->core.clock_ghz / 1000.0,
                       0, &c->acc_port, err) != NP_OK)
            return err->status;
        c->text = t;
        uint32_t nk = t->n_kernels ? t->n_kernels : 1;
        c->k_first = calloc(nk, sizeof *c->k_first);
        c->k_last = calloc(nk, sizeof *c->k_last);
        c->k_seen = calloc(nk, sizeof *c->k_seen);
        c->kernel_of = malloc((t->n_insns ? t->n_insns : 1) * sizeof *c->kernel_of);
        if (!c->k_first || !c->k_last || !c->k_seen || !c->kernel_of)
            return np_err_set(err, NP_ERR_NOMEM, "out of memory creating core %u", c->id);
        for (uint32_t pc = 0; pc < t->n_insns; pc++)
            c->kernel_of[pc] = -1;
        for (uint32_t k = 0; k < t->n_kernels; k++)
            for (uint32_t pc = t->kernels[k].start; pc < t->kernels[k].start + t->kernels[k].count; pc++)
                c->kernel_of[pc] = (int32_t)k;
        if (evq_schedule_at(s->q, 0, core_fe_step_ev, c, 0, NULL, err) != NP_OK)
            return err->status;
    }
    return NP_OK;
}

/* Whether some comm.* of progs names a chip other than its own (*need_mesh: any comm.*, or
 * a barrier among several cores, which travels the mesh too). */
static bool sys_scan_comm(const isa_program *const *progs, uint32_t n_chips, bool *need_mesh)
{
    bool cross = false;
    *need_mesh = false;
    for (uint32_t c = 0; c < n_chips; c++)
        for (uint32_t i = 0; i < progs[c]->n_cores; i++)
            for (uint32_t pc = 0; pc < progs[c]->cores[i].n_insns; pc++) {
                const isa_insn *in = &progs[c]->cores[i].insns[pc];
                bool send = in->op == ISA_OP_COMM_SEND, recv = in->op == ISA_OP_COMM_RECV;
                *need_mesh = *need_mesh || send || recv ||
                        (in->op == ISA_OP_BARRIER && progs[c]->n_cores > 1);
                cross = cross || (send && (uint64_t)in->COMM_SEND.peer.val != c) ||
                        (recv && (uint64_t)in->COMM_RECV.peer.val != c);
            }
    return cross;
}

static np_status sys_init(sys_sim *y, const arch_config *cfg, const isa_program *const *progs,
                          uint32_t n_chips, stats *reg, np_err *err)
{
    memset(y, 0, sizeof *y);
    y->cfg = cfg;
    if (n_chips == 0 || n_chips > (uint64_t)cfg->system.chips)
        return np_err_set(err, NP_ERR_RANGE, "%u programs for a system of %lld chips (one "
                          "program per chip, at least one)", n_chips,
                          (long long)cfg->system.chips);
    if (evq_create(&y->q, err) != NP_OK)
        return err->status;
    if (sys_scan_comm(progs, n_chips, &y->meshes)) {
        net_params np;
        net_params_from_arch(cfg, &np);
        if (net_create(&np, y->q, reg, &y->net, err) != NP_OK)
            return err->status;
    }
    y->chips = calloc(n_chips, sizeof *y->chips);
    if (!y->chips)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory creating the chips");
    y->n_chips = n_chips;
    y->watchdog = EVQ_HANDLE_NONE;
    for (uint32_t c = 0; c < n_chips; c++) {
        if (chip_init(y, c, progs[c], reg, err) != NP_OK)
            return err->status;
        y->cores_left += y->chips[c].n_cores;
    }
    return NP_OK;
}

/* Checks an HBM range given by the caller of core_sim_run_chips. */
static np_status io_check(const sys_sim *y, const core_hbm_io *io, const char *what, np_err *err)
{
    uint64_t lim = (uint64_t)y->cfg->chip.hbm_bytes;
    if (io->chip >= y->n_chips)
        return np_err_set(err, NP_ERR_RANGE, "%s: chip %u is not in this run (%u chips)", what,
                          io->chip, y->n_chips);
    if (io->addr > lim || io->n > lim - io->addr)
        return np_err_set(err, NP_ERR_RANGE, "%s: HBM range 0x%llx + %llu bytes is outside the "
                          "HBM (%llu bytes)", what, (unsigned long long)io->addr,
                          (unsigned long long)io->n, (unsigned long long)lim);
    return NP_OK;
}

/* core_sim_opts.max_cycles reached: work still pending is a run over its limit; with none,
 * the run has deadlocked earlier (sys_check reports it). */
static void sys_watchdog_ev(evq *q, void *ctx, uint64_t arg)
{
    (void)arg;
    sys_sim *y = ctx;
    y->watchdog = EVQ_HANDLE_NONE;
    if (evq_pending(q)) {
        y->over_limit = true;
        evq_stop(q);
    }
}

/* The latest time any unit of any core did or began to wait for something: when a run that
 * ran into the cycle limit's event had in fact stopped. */
static uint64_t sys_last_activity_ps(const sys_sim *y)
{
    uint64_t t = 0;
    for (uint32_t ch = 0; ch < y->n_chips; ch++)
        for (uint32_t i = 0; i < y->chips[ch].n_cores; i++) {
            const core_model *c = &y->chips[ch].cores[i];
            uint64_t v[] = {c->t_done_ps, c->fe_stall_from};
            for (size_t k = 0; k < 2; k++)
                t = v[k] > t ? v[k] : t;
            for (unsigned u = 0; u < ISA_N_QUEUES; u++) {
                const core_queue *q = &c->q[u];
                uint64_t w[] = {q->t_acct_ps, q->t_wait_ps, q->sb_from_ps};
                for (size_t k = 0; k < 3; k++)
                    t = w[k] > t ? w[k] : t;
            }
        }
    return t;
}

/* The first fault of the run, or a deadlock: some core of some chip is not done. */
static np_status sys_check(sys_sim *y, const core_sim_opts *opts, np_err *err)
{
    for (uint32_t c = 0; c < y->n_chips; c++) {
        chip_sim *s = &y->chips[c];
        if (s->err.status != NP_OK) {
            *err = s->err;
            return err->status;
        }
        if (hbm_error(s->mem, err) != NP_OK)
            return err->status;
    }
    if (y->over_limit)
        return np_err_set(err, NP_ERR_SIM_FAULT, "the run did not finish within %llu cycles "
                          "(the cycle limit); %u core%s still running", (unsigned long long)
                          opts->max_cycles, y->cores_left, y->cores_left == 1 ? " is" : "s are");
    uint64_t t_end = evq_now(y->q);
    if (opts && opts->max_cycles && y->cores_left) /* the limit's event moved now past the end */
        t_end = sys_last_activity_ps(y);
    char buf[NP_ERR_MSG_MAX] = "";
    bool stuck = false;
    for (uint32_t c = 0; c < y->n_chips; c++)
        for (uint32_t i = 0; i < y->chips[c].n_cores; i++)
            if (y->chips[c].cores[i].fe != FE_DONE) {
                stuck = true;
                core_deadlock_lines(&y->chips[c].cores[i], buf, sizeof buf);
            }
    if (stuck)
        return np_err_set(err, NP_ERR_DEADLOCK, "the program can never finish (at cycle %llu "
                          "nothing is left to happen):%s",
                          (unsigned long long)clk_ps_to_cycles(&y->chips[0].clk, t_end), buf);
    return NP_OK;
}

np_status core_sim_run_chips(const arch_config *cfg, const isa_program *const *progs,
                             uint32_t n_chips, const core_sim_opts *opts, stats *reg,
                             core_report **out, np_err *err)
{
    *out = NULL;
    sys_sim y;
    np_status st = sys_init(&y, cfg, progs, n_chips, reg, err);
    bool func = opts && opts->functional;
    if (opts) {
        y.trace = opts->trace;
        y.trace_ctx = opts->trace_ctx;
    }
    for (uint32_t c = 0; st == NP_OK && func && c < n_chips; c++)
        st = core_func_create(cfg, progs[c], &y.chips[c].func, err);
    for (size_t i = 0; st == NP_OK && func && i < opts->n_inputs; i++) {
        const core_hbm_io *io = &opts->inputs[i];
        st = io_check(&y, io, "input", err);
        if (st == NP_OK)
            st = core_func_hbm_write(y.chips[io->chip].func, io->addr, io->buf, io->n, err);
    }
    for (size_t i = 0; st == NP_OK && func && i < opts->n_outputs; i++)
        st = io_check(&y, &opts->outputs[i], "output", err);
    if (st == NP_OK && opts && opts->max_cycles)
        st = evq_schedule_at(y.q, clk_cycles_to_ps(&y.chips[0].clk, opts->max_cycles),
                             sys_watchdog_ev, &y, 0, &y.watchdog, err);
    if (st == NP_OK)
        st = evq_run(y.q, err);
    if (st == NP_OK)
        st = sys_check(&y, opts, err);
    for (size_t i = 0; st == NP_OK && func && i < opts->n_outputs; i++) {
        const core_hbm_io *io = &opts->outputs[i];
        st = core_func_hbm_read(y.chips[io->chip].func, io->addr, io->buf, io->n, err);
    }
    if (st == NP_OK)
        st = core_report_build(&y, reg, out, err);
    sys_free(&y);
    return st;
}

np_status core_sim_run_opts(const arch_config *cfg, const isa_program *p,
                            const core_sim_opts *opts, stats *reg, core_report **out,
                            np_err *err)
{
    return core_sim_run_chips(cfg, &p, 1, opts, reg, out, err);
}

np_status core_sim_run(const arch_config *cfg, const isa_program *p, stats *reg,
                       core_report **out, np_err *err)
{
    return core_sim_run_opts(cfg, p, NULL, reg, out, err);
}
