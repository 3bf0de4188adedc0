/* hw_system.c — the steppable system (hw_system.h): chips and their programs on the caller's
 * event queue; loading and starting programs, the end of a program, faults, the deadlock
 * check, the group table, host access to HBM. One core's machinery is core.c, messages are
 * core_comm.c, the report core_report.c. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core_sim.h"
#include "verify.h"

const char *const hw_chip_state_names[HW_CHIP_STATE_COUNT] = {
    [HW_CHIP_EMPTY] = "empty",       [HW_CHIP_LOADED] = "loaded", [HW_CHIP_RUNNING] = "running",
    [HW_CHIP_DONE] = "done",         [HW_CHIP_DEADLOCK] = "deadlock",
    [HW_CHIP_FAULT] = "fault",
};

static const isa_program no_program; /* the functional memories before the first load */

/* ---- chips ---------------------------------------------------------------------------------- */

static void chip_free_cores(chip_sim *s)
{
    for (uint32_t i = 0; s->cores && i < s->n_cores; i++) {
        core_model *c = &s->cores[i];
        free(c->kernels);
        free(c->pcs);
        free(c->pipe);
        hbm_free(c->ports);
        hbm_free(c->acc_port);
    }
    free(s->cores);
    s->cores = NULL;
    s->n_cores = 0;
    if (s->slots)
        for (int64_t i = 0; i < s->cfg->chip.cores; i++)
            s->slots[i].idx = UINT32_MAX;
}

static void chip_free(chip_sim *s)
{
    chip_free_cores(s);
    free(s->slots);
    hbm_mesh_free(s->hmesh);
    mesh_free(s->noc);
    l2_free(s->l2);
    hbm_free(s->l2srv);
    core_func_free(s->func);
    hbm_free(s->mem);
}

np_status chip_ensure(chip_sim *s, np_err *err)
{
    const arch_config *cfg = s->cfg;
    size_t nc = (size_t)cfg->chip.cores;
    if (!s->slots) {
        if (!(s->slots = malloc(nc * sizeof *s->slots)))
            return np_err_set(err, NP_ERR_NOMEM, "out of memory creating chip %" PRIu32, s->chip);
        for (size_t i = 0; i < nc; i++)
            s->slots[i] = (chip_core){UINT32_MAX, UINT32_MAX, UINT32_MAX};
    }
    /* GB/s = 10^9 bytes/s = 10^-3 bytes/ps */
    if (!s->mem && hbm_create(s->q, cfg->chip.hbm_gb_per_s / 1000.0,
                              (uint64_t)(cfg->chip.hbm_latency_ns * 1000.0 + 0.5), &s->mem,
                              err) != NP_OK)
        return err->status;
    if (core_l2_ensure(s, err) != NP_OK)
        return err->status;
    if (s->sys->functional && !s->func &&
        core_func_create(cfg, &no_program, &s->func, err) != NP_OK)
        return err->status;
    return NP_OK;
}

np_status chip_ensure_mesh(chip_sim *s, np_err *err)
{
    if (s->noc)
        return NP_OK;
    const arch_config *cfg = s->cfg;
    mesh_params mp; /* core i at router i, clocked by chip.noc_clock_ghz */
    mesh_params_from_arch(cfg, &mp);
    char prefix[32];
    if (s->sys->n_chips > 1)
        snprintf(prefix, sizeof prefix, "chip%" PRIu32 ".noc", s->chip);
    else
        snprintf(prefix, sizeof prefix, "noc");
    mesh *m;
    if (clk_init_ghz(&s->noc_clk, cfg->chip.noc_clock_ghz, err) != NP_OK ||
        mesh_create(&mp, s->sys->reg, prefix, &m, err) != NP_OK)
        return err->status;
    if (mesh_attach(m, s->q, &s->noc_clk, err) != NP_OK) {
        mesh_free(m);
        return err->status;
    }
    mesh_set_deliver(m, core_comm_mesh_deliver, s);
    mesh_set_sent(m, core_comm_mesh_sent, s);
    if (cfg->chip.hbm_controllers) {
        if (hbm_mesh_create(cfg, m, &s->hmesh, err) != NP_OK) {
            mesh_free(m);
            return err->status;
        }
        mesh_set_access_done(m, core_dma_access_done, s);
    }
    s->noc = m;
    return NP_OK;
}

np_status sys_ensure_net(hw_system *y, np_err *err)
{
    if (y->net)
        return NP_OK;
    net_params np;
    net_params_from_arch(y->cfg, &np);
    return net_create(&np, y->q, y->reg, &y->net, err);
}

/* Whether program p on chip `chip` may send to or receive from another chip (a peer by
 * number that is not its own, or by group rank); *need_mesh: it has a comm.*, or a barrier
 * among several cores (which travels the mesh too). */
static bool prog_scan(const isa_program *p, uint32_t chip, uint32_t n_chips, bool *need_mesh)
{
    bool cross = false;
    *need_mesh = false;
    for (uint32_t i = 0; i < p->n_cores; i++)
        for (uint32_t pc = 0; pc < p->cores[i].n_insns; pc++) {
            const isa_insn *in = &p->cores[i].insns[pc];
            const isa_opnd *peer = in->op == ISA_OP_COMM_SEND   ? &in->COMM_SEND.peer
                                   : in->op == ISA_OP_COMM_RECV ? &in->COMM_RECV.peer
                                                                : NULL;
            *need_mesh = *need_mesh || peer || (in->op == ISA_OP_BARRIER && p->n_cores > 1);
            if (peer)
                cross = cross || (peer->form == ISA_PEER_FORM_CHIP ? (uint64_t)peer->val != chip
                                                                  : n_chips > 1);
        }
    return cross;
}

/* Builds the cores of chip s for program p (the chip has no cores). */
static np_status chip_build_cores(chip_sim *s, const isa_program *p, np_err *err)
{
    const arch_config *cfg = s->cfg;
    s->cores = calloc(p->n_cores ? p->n_cores : 1, sizeof *s->cores);
    if (!s->cores)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory creating the cores");
    s->n_cores = p->n_cores;
    for (uint32_t i = 0; i < p->n_cores; i++) {
        core_model *c = &s->cores[i];
        const isa_core_text *t = &p->cores[i];
        c->chip = s;
        c->eq = s->q;
        c->clk = s->clk;
        c->cfg = cfg;
        c->id = t->core;
        c->index = i;
        c->text = t;
        c->n_insns = t->n_insns;
        s->slots[t->core].idx = i;
        if (hbm_create(s->q, (double)core_spad_bytes_per_cycle(cfg) * cfg->core.clock_ghz / 1000.0,
                       0, &c->ports, err) != NP_OK)
            return err->status;
        if (cfg->core.acc_port_bytes_per_cycle &&
            hbm_create(s->q, (double)cfg->core.acc_port_bytes_per_cycle * cfg->core.clock_ghz / 1000.0,
                       0, &c->acc_port, err) != NP_OK)
            return err->status;
        if (cfg->core.mxu_pipelined_folds && !(c->pipe = calloc(1, sizeof *c->pipe)))
            return np_err_set(err, NP_ERR_NOMEM, "out of memory creating core %u", c->id);
        uint32_t nk = t->n_kernels ? t->n_kernels : 1;
        c->kernels = calloc(nk, sizeof *c->kernels);
        c->pcs = malloc((t->n_insns ? t->n_insns : 1) * sizeof *c->pcs);
        if (!c->kernels || !c->pcs)
            return np_err_set(err, NP_ERR_NOMEM, "out of memory creating core %u", c->id);
        for (uint32_t pc = 0; pc < t->n_insns; pc++)
            c->pcs[pc] = (pc_info){-1, (uint8_t)isa_insn_queue(&t->insns[pc]), HW_LAUNCH_NONE};
        bool launches = s->sys->launch && core_kernel_launch_ps(cfg, true);
        for (uint32_t k = 0; k < t->n_kernels; k++) {
            for (uint32_t pc = t->kernels[k].start; pc < t->kernels[k].start + t->kernels[k].count; pc++)
                c->pcs[pc].kernel = (int32_t)k;
            if (launches && t->kernels[k].count)
                c->pcs[t->kernels[k].start].launch =
                    (uint8_t)s->sys->launch(s->sys->launch_ctx, s->chip, t->core,
                                            t->kernels[k].start, t->kernels[k].name);
        }
    }
    return NP_OK;
}

static np_status sys_chip_arg(const hw_system *y, uint32_t chip, np_err *err)
{
    if (chip >= y->n_chips)
        return np_err_set(err, NP_ERR_RANGE, "chip %" PRIu32 " is not in this system (%" PRIu32
                          " chip%s)", chip, y->n_chips, y->n_chips == 1 ? "" : "s");
    return NP_OK;
}

np_status hw_system_load(hw_system *y, uint32_t chip, const isa_program *p, np_err *err)
{
    if (sys_chip_arg(y, chip, err) != NP_OK)
        return err->status;
    chip_sim *s = &y->chips[chip];
    if (s->state == HW_CHIP_RUNNING || s->state == HW_CHIP_FAULT)
        return np_err_set(err, NP_ERR_INCONSISTENT, "chip %" PRIu32 " is %s: a program is "
                          "loaded on a chip that is empty, loaded, done or deadlocked", chip,
                          hw_chip_state_names[s->state]);
    for (uint32_t i = 0; i < p->n_cores; i++)
        if (p->cores[i].core >= (uint64_t)y->cfg->chip.cores)
            return np_err_set(err, NP_ERR_RANGE, "the program has code for core %" PRIu32
                              ", but the chip has %lld cores", p->cores[i].core,
                              (long long)y->cfg->chip.cores);
    bool need_mesh, cross = prog_scan(p, chip, y->n_chips, &need_mesh);
    need_mesh = need_mesh || y->cfg->chip.hbm_controllers; /* the DMA crosses it */
    chip_free_cores(s);
    y->epoch++;
    s->state = HW_CHIP_EMPTY;
    s->prog = NULL;
    if ((cross && sys_ensure_net(y, err) != NP_OK) || chip_ensure(s, err) != NP_OK ||
        (need_mesh && chip_ensure_mesh(s, err) != NP_OK) || chip_build_cores(s, p, err) != NP_OK ||
        (s->func && core_func_load(s->func, p, err) != NP_OK)) {
        chip_free_cores(s);
        return err->status;
    }
    s->prog = p;
    s->programs++;
    s->state = HW_CHIP_LOADED;
    s->cores_left = p->n_cores;
    s->barrier_arrived = 0;
    s->t_start_ps = s->t_end_ps = 0;
    s->hbm_rd = s->hbm_wr = s->spad_rd = s->spad_wr = s->acc_rd = s->acc_wr = s->c2c_bytes = 0;
    s->l2_rd = s->l2_wr = 0;
    memset(s->macs, 0, sizeof s->macs);
    s->vec_ops = 0;
    s->noc_base = s->noc ? core_noc_flit_hops(s->noc) : 0;
    if (s->l2)
        l2_get_figures(s->l2, &s->l2_base); /* its figures count from this program on */
    if (s->hmesh)
        hbm_mesh_mark(s->hmesh); /* its figures count from this program on */
    s->err = s->fault = (np_err){0};
    return NP_OK;
}

/* ---- a program's run ------------------------------------------------------------------------ */

static void chip_done_ev(evq *q, void *ctx, uint64_t arg);

/* The start of chip ctx's program: each core's front end takes its first step, in core order
 * (as if each had an event of its own, scheduled in that order). */
static void chip_start_ev(evq *q, void *ctx, uint64_t arg)
{
    chip_sim *s = ctx;
    for (uint32_t i = 0; i < s->n_cores; i++)
        core_fe_step_ev(q, &s->cores[i], arg);
    if (s->n_cores == 0) /* nothing to run: done at once */
        chip_done_ev(q, s, 0);
}

np_status hw_system_start(hw_system *y, uint32_t chip, np_err *err)
{
    if (sys_chip_arg(y, chip, err) != NP_OK)
        return err->status;
    chip_sim *s = &y->chips[chip];
    if (s->state != HW_CHIP_LOADED)
        return np_err_set(err, NP_ERR_INCONSISTENT, "chip %" PRIu32 " is %s: only a loaded "
                          "program can start", chip, hw_chip_state_names[s->state]);
    if (evq_schedule_at(y->q, evq_now(y->q), chip_start_ev, s, 0, NULL, err) != NP_OK)
        return err->status;
    s->state = HW_CHIP_RUNNING;
    s->t_start_ps = evq_now(y->q);
    return NP_OK;
}

static void chip_end(chip_sim *s, hw_chip_state st)
{
    hw_system *y = s->sys;
    s->state = st;
    if (y->on_end)
        y->on_end(y->on_end_ctx, y, s->chip, st);
}

/* Every core of chip ctx's program is done (an event, so that the end callback runs with no
 * core code on the stack and may load the chip's next program). */
static void chip_done_ev(evq *q, void *ctx, uint64_t arg)
{
    (void)q, (void)arg;
    chip_sim *s = ctx;
    if (s->state != HW_CHIP_RUNNING)
        return;
    uint64_t t = s->t_start_ps;
    for (uint32_t i = 0; i < s->n_cores; i++)
        t = s->cores[i].t_done_ps > t ? s->cores[i].t_done_ps : t;
    s->t_end_ps = t;
    if (np_verify_on() && core_sim_verify(s, true, &s->err) != NP_OK) {
        chip_fail(s);
        return;
    }
    chip_end(s, HW_CHIP_DONE);
}

void chip_core_done(core_model *c)
{
    chip_sim *s = c->chip;
    if (--s->cores_left)
        return;
    if (evq_schedule_at(s->q, evq_now(s->q), chip_done_ev, s, 0, NULL, &s->err) != NP_OK)
        chip_fail(s);
}

void chip_fail(chip_sim *s)
{
    if (s->state != HW_CHIP_RUNNING)
        return;
    s->fault = s->err;
    s->t_end_ps = evq_now(s->q);
    chip_end(s, HW_CHIP_FAULT);
}

uint64_t chip_last_activity_ps(const chip_sim *s)
{
    uint64_t t = s->t_start_ps;
    for (uint32_t i = 0; i < s->n_cores; i++) {
        const core_model *c = &s->cores[i];
        uint64_t v[] = {c->t_done_ps, c->t_halt_ps, c->fe_stall_from};
        for (size_t k = 0; k < 3; k++)
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

void chip_deadlock_lines(const chip_sim *s, char *buf, size_t n)
{
    for (uint32_t i = 0; i < s->n_cores; i++)
        if (s->cores[i].fe != FE_DONE)
            core_deadlock_lines(&s->cores[i], buf, n);
}

void hw_system_check(hw_system *y)
{
    for (uint32_t i = 0; i < y->n_chips; i++) {
        chip_sim *s = &y->chips[i];
        if (s->state == HW_CHIP_RUNNING && (hbm_error(s->mem, &s->err) != NP_OK ||
                                            (s->l2srv && hbm_error(s->l2srv, &s->err) != NP_OK)))
            chip_fail(s);
    }
    if (evq_pending(y->q))
        return;
    /* First every chip that is stuck, then the callbacks (which may start other chips). */
    for (uint32_t i = 0; i < y->n_chips; i++) {
        chip_sim *s = &y->chips[i];
        if (s->state != HW_CHIP_RUNNING)
            continue;
        char buf[NP_ERR_MSG_MAX] = "";
        chip_deadlock_lines(s, buf, sizeof buf);
        s->t_end_ps = chip_last_activity_ps(s);
        np_err_set(&s->fault, NP_ERR_DEADLOCK, "the program can never finish (at cycle %llu "
                   "nothing is left to happen):%s", (unsigned long long)
                   (clk_ps_to_cycles(&s->clk, s->t_end_ps) - clk_ps_to_cycles(&s->clk, s->t_start_ps)),
                   buf);
        s->state = HW_CHIP_DEADLOCK;
        s->end_pending = true;
    }
    for (uint32_t i = 0; i < y->n_chips; i++)
        if (y->chips[i].end_pending) {
            y->chips[i].end_pending = false;
            if (y->on_end)
                y->on_end(y->on_end_ctx, y, i, HW_CHIP_DEADLOCK);
        }
}

/* ---- queries --------------------------------------------------------------------------------- */

uint32_t hw_system_n_chips(const hw_system *y) { return y->n_chips; }

const struct net *hw_system_net(const hw_system *y) { return y->net; }

uint64_t hw_system_route_latency_ps(hw_system *y, uint32_t a, uint32_t b)
{
    net_path_info pi;
    np_err e;
    return y->net && net_route(y->net, a, b, &pi, &e) == NP_OK ? pi.latency_ps : 0;
}

hw_chip_state hw_system_chip_state(const hw_system *y, uint32_t chip)
{
    return chip < y->n_chips ? y->chips[chip].state : HW_CHIP_EMPTY;
}

np_status hw_system_chip_error(const hw_system *y, uint32_t chip, np_err *err)
{
    hw_chip_state st = hw_system_chip_state(y, chip);
    if (st != HW_CHIP_FAULT && st != HW_CHIP_DEADLOCK)
        return NP_OK;
    *err = y->chips[chip].fault;
    return err->status;
}

void hw_system_chip_info(const hw_system *y, uint32_t chip, hw_chip_info *out)
{
    *out = (hw_chip_info){.state = HW_CHIP_EMPTY};
    if (chip >= y->n_chips)
        return;
    const chip_sim *s = &y->chips[chip];
    out->state = s->state;
    out->t_start_ps = s->t_start_ps;
    out->t_end_ps = s->state == HW_CHIP_RUNNING ? 0 : s->t_end_ps;
    out->n_cores = s->n_cores;
    out->cores_done = s->n_cores - s->cores_left;
    out->programs = s->programs;
    if (s->state >= HW_CHIP_RUNNING) {
        uint64_t end = s->state == HW_CHIP_RUNNING ? evq_now(y->q) : s->t_end_ps;
        out->cycles = clk_ps_to_cycles(&s->clk, end) - clk_ps_to_cycles(&s->clk, s->t_start_ps);
    }
}

hw_chip_state hw_system_core_state(const hw_system *y, uint32_t chip, uint32_t core)
{
    if (chip >= y->n_chips)
        return HW_CHIP_EMPTY;
    const chip_sim *s = &y->chips[chip];
    uint32_t i = core_index_of(s, core);
    if (i == UINT32_MAX)
        return HW_CHIP_EMPTY;
    if (s->state >= HW_CHIP_RUNNING && s->cores[i].fe == FE_DONE)
        return HW_CHIP_DONE;
    return s->state;
}

np_status hw_system_report(hw_system *y, uint32_t chip, stats *reg, core_report **out,
                           np_err *err)
{
    *out = NULL;
    if (chip != HW_ALL_CHIPS && sys_chip_arg(y, chip, err) != NP_OK)
        return err->status;
    if (chip != HW_ALL_CHIPS && !y->chips[chip].prog)
        return np_err_set(err, NP_ERR_RANGE, "chip %" PRIu32 " has no program", chip);
    return core_report_build(y, chip, reg, out, err);
}

/* ---- host access to HBM ---------------------------------------------------------------------- */

static np_status sys_hbm_arg(hw_system *y, uint32_t chip, uint64_t addr, uint64_t n,
                             np_err *err)
{
    uint64_t lim = (uint64_t)y->cfg->chip.hbm_bytes;
    if (sys_chip_arg(y, chip, err) != NP_OK)
        return err->status;
    if (!y->functional)
        return np_err_set(err, NP_ERR_INCONSISTENT, "the system runs in timing mode: its HBM "
                          "holds no bytes");
    if (addr > lim || n > lim - addr)
        return np_err_set(err, NP_ERR_RANGE, "HBM range 0x%llx + %llu bytes is outside the "
                          "HBM (%llu bytes)", (unsigned long long)addr, (unsigned long long)n,
                          (unsigned long long)lim);
    return chip_ensure(&y->chips[chip], err);
}

np_status hw_system_hbm_write(hw_system *y, uint32_t chip, uint64_t addr, const void *buf,
                              uint64_t n, np_err *err)
{
    if (sys_hbm_arg(y, chip, addr, n, err) != NP_OK)
        return err->status;
    return core_func_hbm_write(y->chips[chip].func, addr, buf, n, err);
}

np_status hw_system_hbm_read(hw_system *y, uint32_t chip, uint64_t addr, void *buf, uint64_t n,
                             np_err *err)
{
    if (sys_hbm_arg(y, chip, addr, n, err) != NP_OK)
        return err->status;
    return core_func_hbm_read(y->chips[chip].func, addr, buf, n, err);
}

/* ---- the group table ------------------------------------------------------------------------ */

static uint32_t group_member(const sys_group *g, uint32_t i)
{
    return g->chips ? g->chips[i] : g->first + i * g->stride;
}

/* Copies the group table into y and gives every chip its instance and rank of each group. */
static np_status sys_groups_init(hw_system *y, const core_group *groups, size_t n, np_err *err)
{
    bool world = true; /* no instance of g0 given: g0 is every chip */
    for (size_t i = 0; i < n; i++)
        world = world && groups[i].id != 0;
    y->groups = calloc(n + world, sizeof *y->groups);
    if (!y->groups)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory copying the group table");
    for (size_t i = 0; i < n; i++) {
        const core_group *g = &groups[i];
        if (g->id >= ISA_N_GROUPS)
            return np_err_set(err, NP_ERR_RANGE, "group table entry %zu: group g%u does not "
                              "exist (g0..g%d)", i, g->id, ISA_N_GROUPS - 1);
        if (g->n == 0)
            return np_err_set(err, NP_ERR_RANGE, "group table entry %zu (g%u) has no members",
                              i, g->id);
        if (!g->chips && g->n > 1 && g->stride == 0)
            return np_err_set(err, NP_ERR_DUPLICATE, "group table entry %zu (g%u): stride 0 "
                              "repeats chip %" PRIu32, i, g->id, g->first);
        if (!g->chips && (uint64_t)g->first + (uint64_t)(g->n - 1) * g->stride >= y->n_chips)
            return np_err_set(err, NP_ERR_RANGE, "group table entry %zu (g%u): chips %" PRIu32
                              " + %" PRIu32 " x k, k < %" PRIu32 ", leave the system's %" PRIu32
                              " chips", i, g->id, g->first, g->stride, g->n, y->n_chips);
        sys_group *c = &y->groups[y->n_groups++];
        *c = (sys_group){.id = g->id, .n = g->n, .first = g->first, .stride = g->stride};
        if (g->chips) {
            if (!(c->chips = malloc((size_t)g->n * sizeof *c->chips)))
                return np_err_set(err, NP_ERR_NOMEM, "out of memory copying the group table");
            memcpy(c->chips, g->chips, (size_t)g->n * sizeof *c->chips);
        }
    }
    if (world)
        y->groups[y->n_groups++] = (sys_group){.id = 0, .n = y->n_chips, .first = 0, .stride = 1};
    for (uint32_t i = 0; i < y->n_groups; i++) {
        const sys_group *g = &y->groups[i];
        for (uint32_t r = 0; r < g->n; r++) {
            uint32_t ch = group_member(g, r);
            if (ch >= y->n_chips)
                return np_err_set(err, NP_ERR_RANGE, "group table entry %" PRIu32 " (g%" PRIu32
                                  "): chip %" PRIu32 " is not in the system (%" PRIu32 " chips)",
                                  i, g->id, ch, y->n_chips);
            chip_sim *s = &y->chips[ch];
            if (s->grp_inst[g->id] != UINT32_MAX)
                return np_err_set(err, NP_ERR_DUPLICATE, "group table entry %" PRIu32 " (g%" PRIu32
                                  "): chip %" PRIu32 " is already in %s", i, g->id, ch,
                                  s->grp_inst[g->id] == i ? "this group"
                                                           : "another group of that id");
            s->grp_inst[g->id] = i;
            s->grp_rank[g->id] = r;
        }
    }
    return NP_OK;
}

/* ---- create, free --------------------------------------------------------------------------- */

np_status hw_system_create(const arch_config *cfg, evq *q, const hw_system_opts *opts,
                           hw_system **out, np_err *err)
{
    *out = NULL;
    hw_system_opts o = opts ? *opts : (hw_system_opts){0};
    uint64_t n = o.n_chips ? o.n_chips : (uint64_t)cfg->system.chips;
    if (n == 0 || n > (uint64_t)cfg->system.chips)
        return np_err_set(err, NP_ERR_RANGE, "%llu chips for a system of %lld chips",
                          (unsigned long long)n, (long long)cfg->system.chips);
    hw_system *y = calloc(1, sizeof *y);
    if (!y || !(y->chips = calloc(n, sizeof *y->chips))) {
        free(y);
        return np_err_set(err, NP_ERR_NOMEM, "out of memory creating the system");
    }
    y->cfg = cfg;
    y->q = q;
    y->reg = o.reg;
    y->n_chips = (uint32_t)n;
    y->functional = o.functional;
    y->free_msg = UINT32_MAX;
    y->epoch = 1;
    y->trace = o.trace;
    y->trace_ctx = o.trace_ctx;
    y->launch = o.launch;
    y->launch_ctx = o.launch_ctx;
    y->trace_no_text = o.trace_no_text;
    y->on_end = o.on_end;
    y->on_end_ctx = o.on_end_ctx;
    for (uint32_t i = 0; i < y->n_chips; i++) {
        chip_sim *s = &y->chips[i];
        s->sys = y;
        s->chip = i;
        s->cfg = cfg;
        s->q = q;
        s->route_dst = UINT32_MAX;
        for (unsigned g = 0; g < ISA_N_GROUPS; g++)
            s->grp_inst[g] = UINT32_MAX;
        if (clk_init_ghz(&s->clk, cfg->core.clock_ghz, err) != NP_OK) {
            hw_system_free(y);
            return err->status;
        }
    }
    if (sys_groups_init(y, o.groups, o.n_groups, err) != NP_OK) {
        hw_system_free(y);
        return err->status;
    }
    *out = y;
    return NP_OK;
}

void hw_system_free(hw_system *y)
{
    if (!y)
        return;
    for (uint32_t i = 0; y->chips && i < y->n_chips; i++)
        chip_free(&y->chips[i]);
    free(y->chips);
    for (uint32_t i = 0; i < y->n_msgs; i++)
        free(y->msgs[i].data);
    free(y->msgs);
    net_free(y->net);
    for (uint32_t i = 0; i < y->n_groups; i++)
        free(y->groups[i].chips);
    free(y->groups);
    free(y);
}
