/* core_run.c — core_sim_run_chips (core.h): program i on chip i, all run to their end on an
 * event queue of the run's own, through the steppable system (hw_system.h); the cycle limit;
 * the run's first fault, or its deadlock over all chips, as one error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core_sim.h"

typedef struct run_ctx {
    evq *q;
    uint32_t chips_left;  /* chips whose program is not done */
    evq_handle watchdog;  /* the core_sim_opts.max_cycles event, while armed */
    bool over_limit;      /* it fired with work still pending */
} run_ctx;

/* A chip's program ended: the first fault ends the run; the last chip done disarms the
 * cycle limit. */
static void run_on_end(void *ctx, hw_system *sys, uint32_t chip, hw_chip_state st)
{
    (void)sys, (void)chip;
    run_ctx *r = ctx;
    if (st == HW_CHIP_FAULT)
        evq_stop(r->q);
    else if (st == HW_CHIP_DONE && --r->chips_left == 0)
        evq_cancel(r->q, r->watchdog);
}

/* core_sim_opts.max_cycles reached: work still pending is a run over its limit; with none,
 * the run has deadlocked earlier (run_check reports it). */
static void run_watchdog_ev(evq *q, void *ctx, uint64_t arg)
{
    (void)arg;
    run_ctx *r = ctx;
    r->watchdog = EVQ_HANDLE_NONE;
    if (evq_pending(q)) {
        r->over_limit = true;
        evq_stop(q);
    }
}

/* Checks an HBM range given by the caller of core_sim_run_chips. */
static np_status io_check(const hw_system *y, const core_hbm_io *io, const char *what,
                          np_err *err)
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

/* Builds the network when some program may talk to another chip, and when any has a comm.*
 * or a barrier among cores every chip's mesh (a message may land on any chip), in that order
 * (the order their counters appear in a registry). */
static np_status run_build_network(hw_system *y, const isa_program *const *progs, np_err *err)
{
    bool cross = false, meshes = false;
    for (uint32_t c = 0; c < y->n_chips; c++)
        for (uint32_t i = 0; i < progs[c]->n_cores; i++)
            for (uint32_t pc = 0; pc < progs[c]->cores[i].n_insns; pc++) {
                const isa_insn *in = &progs[c]->cores[i].insns[pc];
                const isa_opnd *peer = in->op == ISA_OP_COMM_SEND   ? &in->COMM_SEND.peer
                                       : in->op == ISA_OP_COMM_RECV ? &in->COMM_RECV.peer
                                                                    : NULL;
                meshes = meshes || peer || (in->op == ISA_OP_BARRIER && progs[c]->n_cores > 1);
                if (peer)
                    cross = cross || (peer->form == ISA_PEER_FORM_CHIP
                                          ? (uint64_t)peer->val != c : y->n_chips > 1);
            }
    if (cross && sys_ensure_net(y, err) != NP_OK)
        return err->status;
    for (uint32_t c = 0; meshes && c < y->n_chips; c++)
        if (chip_ensure(&y->chips[c], err) != NP_OK ||
            chip_ensure_mesh(&y->chips[c], err) != NP_OK)
            return err->status;
    return NP_OK;
}

/* The first fault of the run (by chip), or a deadlock: some core of some chip is not done. */
static np_status run_check(hw_system *y, const run_ctx *r, const core_sim_opts *opts,
                           np_err *err)
{
    uint32_t cores_left = 0;
    for (uint32_t c = 0; c < y->n_chips; c++) {
        chip_sim *s = &y->chips[c];
        if (s->state == HW_CHIP_FAULT) {
            *err = s->fault;
            return err->status;
        }
        if (hbm_error(s->mem, err) != NP_OK || (s->l2srv && hbm_error(s->l2srv, err) != NP_OK))
            return err->status;
        cores_left += s->cores_left;
    }
    if (r->over_limit)
        return np_err_set(err, NP_ERR_SIM_FAULT, "the run did not finish within %llu cycles "
                          "(the cycle limit); %u core%s still running", (unsigned long long)
                          opts->max_cycles, cores_left, cores_left == 1 ? " is" : "s are");
    if (!cores_left)
        return NP_OK;
    /* The last thing that happened: the last event, or a front-end wait that began after it
     * (fe_next); with a cycle limit the limit's event moved now past the end. */
    uint64_t t_end = opts && opts->max_cycles ? 0 : evq_now(r->q);
    for (uint32_t c = 0; c < y->n_chips; c++) {
        uint64_t t = chip_last_activity_ps(&y->chips[c]);
        t_end = t > t_end ? t : t_end;
    }
    char buf[NP_ERR_MSG_MAX] = "";
    for (uint32_t c = 0; c < y->n_chips; c++)
        chip_deadlock_lines(&y->chips[c], buf, sizeof buf);
    return np_err_set(err, NP_ERR_DEADLOCK, "the program can never finish (at cycle %llu "
                      "nothing is left to happen):%s",
                      (unsigned long long)clk_ps_to_cycles(&y->chips[0].clk, t_end), buf);
}

np_status core_sim_run_chips(const arch_config *cfg, const isa_program *const *progs,
                             uint32_t n_chips, const core_sim_opts *opts, stats *reg,
                             core_report **out, np_err *err)
{
    *out = NULL;
    if (n_chips == 0 || n_chips > (uint64_t)cfg->system.chips)
        return np_err_set(err, NP_ERR_RANGE, "%u programs for a system of %lld chips (one "
                          "program per chip, at least one)", n_chips,
                          (long long)cfg->system.chips);
    run_ctx r = {.chips_left = n_chips, .watchdog = EVQ_HANDLE_NONE};
    if (evq_create(&r.q, err) != NP_OK)
        return err->status;
    bool func = opts && opts->functional;
    hw_system_opts so = {.n_chips = n_chips, .functional = func, .on_end = run_on_end,
                         .on_end_ctx = &r, .reg = reg};
    if (opts) {
        so.groups = opts->groups;
        so.n_groups = opts->n_groups;
        so.trace = opts->trace;
        so.trace_ctx = opts->trace_ctx;
    }
    hw_system *y = NULL;
    np_status st = hw_system_create(cfg, r.q, &so, &y, err);
    if (st == NP_OK)
        st = run_build_network(y, progs, err);
    for (uint32_t c = 0; st == NP_OK && c < n_chips; c++)
        st = hw_system_load(y, c, progs[c], err);
    for (size_t i = 0; st == NP_OK && func && i < opts->n_inputs; i++) {
        const core_hbm_io *io = &opts->inputs[i];
        st = io_check(y, io, "input", err);
        if (st == NP_OK)
            st = hw_system_hbm_write(y, io->chip, io->addr, io->buf, io->n, err);
    }
    for (size_t i = 0; st == NP_OK && func && i < opts->n_outputs; i++)
        st = io_check(y, &opts->outputs[i], "output", err);
    for (uint32_t c = 0; st == NP_OK && c < n_chips; c++)
        st = hw_system_start(y, c, err);
    if (st == NP_OK && opts && opts->max_cycles)
        st = evq_schedule_at(r.q, clk_cycles_to_ps(&y->chips[0].clk, opts->max_cycles),
                             run_watchdog_ev, &r, 0, &r.watchdog, err);
    if (st == NP_OK)
        st = evq_run(r.q, err);
    if (st == NP_OK)
        st = run_check(y, &r, opts, err);
    for (size_t i = 0; st == NP_OK && func && i < opts->n_outputs; i++) {
        const core_hbm_io *io = &opts->outputs[i];
        st = hw_system_hbm_read(y, io->chip, io->addr, io->buf, io->n, err);
    }
    if (st == NP_OK)
        st = hw_system_report(y, HW_ALL_CHIPS, reg, out, err);
    hw_system_free(y);
    evq_free(r.q);
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
