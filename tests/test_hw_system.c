/* test_hw_system.c — the steppable system (hw-model/hw_system.h) on an event queue the test
 * owns, and SPMD programs (peers by group rank, docs/isa.md "Groups").
 *
 * On `tiny` (1 GHz: a cycle is a nanosecond; HBM 16 bytes/cycle after 100 ns; chips in a ring
 * of 8 GB/s links with 200 ns latency; core 0 at the link ports). Expected figures are
 * computed by hand beside each check, or come from core_sim_run_chips (the whole-run
 * wrapper, itself checked by hand in test_core.c) when a test shows that stepping changes
 * nothing; SPMD values are checked against what each rank must hold by construction. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "arch.h"
#include "core.h"
#include "evq.h"
#include "harness.h"
#include "hw_system.h"
#include "isa_asm.h"
#include "core_sim.h"
#include "verify.h"

static arch_config tiny_chips(unsigned chips)
{
    arch_config cfg;
    np_err e = {0};
    char set[64];
    snprintf(set, sizeof set, "system.chips=%u", chips);
    const char *sets[1] = {set};
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tiny", sets, 1, &cfg, &e), NP_OK);
    return cfg;
}

static isa_program *assemble(const arch_config *cfg, const char *src)
{
    isa_target t;
    isa_target_from_arch(cfg, &t);
    isa_asm_opts o = {.target = &t};
    isa_program *p = NULL;
    np_err e = {0};
    if (isa_asm(src, strlen(src), "test.s", &o, &p, &e) != NP_OK)
        fprintf(stderr, "%s\n", e.msg);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    return p;
}

/* The end callback's log: chip and state of each call, in order. */
typedef struct end_log {
    unsigned n;
    uint32_t chip[16];
    hw_chip_state state[16];
    uint64_t t_ps[16];
    evq *q;
} end_log;

static void log_end(void *ctx, hw_system *sys, uint32_t chip, hw_chip_state st)
{
    (void)sys;
    end_log *l = ctx;
    if (l->n < 16) {
        l->chip[l->n] = chip;
        l->state[l->n] = st;
        l->t_ps[l->n] = evq_now(l->q);
    }
    l->n++;
}

static const char *const send64 = ".core 0\ncomm.send peer(1, 0), spad[0], 64, 3\n";
static const char *const recv64 = ".core 0\ncomm.recv peer(0, 0), spad[0], 64, 3\n";

TEST(the_header_example_runs_two_chips_to_done_on_the_callers_queue)
{
    arch_config cfg = tiny_chips(2);
    const isa_program *prog0 = assemble(&cfg, send64), *prog1 = assemble(&cfg, recv64);
    /* hw_system.h's example, as written there */
    evq *q;  hw_system *sys;  np_err err = {0};
    if (evq_create(&q, &err) != NP_OK ||
        hw_system_create(&cfg, q, &(hw_system_opts){.n_chips = 2}, &sys, &err) != NP_OK ||
        hw_system_load(sys, 0, prog0, &err) != NP_OK || hw_system_load(sys, 1, prog1, &err) != NP_OK ||
        hw_system_start(sys, 0, &err) != NP_OK || hw_system_start(sys, 1, &err) != NP_OK ||
        evq_run(q, &err) != NP_OK)
        CU_FAIL_FATAL(err.msg);
    hw_system_check(sys);
    if (hw_system_chip_state(sys, 0) != HW_CHIP_DONE) hw_system_chip_error(sys, 0, &err);
    /* 64 bytes over one link: they arrive at 200 + 64 / 8 = 208 ns; the sender, at the link
     * ports, is done when its last byte has left: 64 / 8 = 8 ns */
    CU_ASSERT_EQUAL(hw_system_chip_state(sys, 0), HW_CHIP_DONE);
    CU_ASSERT_EQUAL(hw_system_chip_state(sys, 1), HW_CHIP_DONE);
    hw_chip_info a, b;
    hw_system_chip_info(sys, 0, &a);
    hw_system_chip_info(sys, 1, &b);
    CU_ASSERT_EQUAL(a.cycles, 8u);
    CU_ASSERT_EQUAL(b.cycles, 208u);
    CU_ASSERT_EQUAL(b.t_end_ps, 208000u);
    core_report *r;
    CU_ASSERT_EQUAL_FATAL(hw_system_report(sys, HW_ALL_CHIPS, NULL, &r, &err), NP_OK);
    CU_ASSERT_EQUAL(r->total_cycles, 208u);
    CU_ASSERT_EQUAL(r->c2c_bytes, 64u);
    core_report_free(r);
    hw_system_free(sys);
    evq_free(q);
    isa_program_free((isa_program *)prog0);
    isa_program_free((isa_program *)prog1);
}

TEST(running_until_a_time_shows_the_state_and_the_report_so_far)
{
    arch_config cfg = tiny_chips(2);
    /* 4096 bytes from HBM: 100 ns latency + 4096 / 16 = 356 cycles (test_core.c) */
    isa_program *p = assemble(&cfg, ".core 0\ndma.copy spad[0], hbm[0], bf16, 2048\n");
    evq *q;
    hw_system *sys;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(evq_create(&q, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(hw_system_create(&cfg, q, NULL, &sys, &e), NP_OK);
    CU_ASSERT_EQUAL(hw_system_n_chips(sys), 2u); /* system.chips */
    CU_ASSERT_EQUAL(hw_system_chip_state(sys, 0), HW_CHIP_EMPTY);
    CU_ASSERT_EQUAL_FATAL(hw_system_load(sys, 0, p, &e), NP_OK);
    CU_ASSERT_EQUAL(hw_system_chip_state(sys, 0), HW_CHIP_LOADED);
    CU_ASSERT_EQUAL(hw_system_core_state(sys, 0, 0), HW_CHIP_LOADED);
    CU_ASSERT_EQUAL(hw_system_core_state(sys, 0, 1), HW_CHIP_EMPTY); /* runs no part */
    CU_ASSERT_EQUAL_FATAL(hw_system_start(sys, 0, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(evq_run_until(q, 100000, &e), NP_OK); /* 100 ns */
    hw_system_check(sys); /* events pending: no deadlock */
    hw_chip_info in;
    hw_system_chip_info(sys, 0, &in);
    CU_ASSERT_EQUAL(in.state, HW_CHIP_RUNNING);
    CU_ASSERT_EQUAL(in.cycles, 100u);
    CU_ASSERT_EQUAL(in.cores_done, 0u);
    CU_ASSERT_EQUAL(in.t_end_ps, 0u);
    core_report *r;
    CU_ASSERT_EQUAL_FATAL(hw_system_report(sys, 0, NULL, &r, &e), NP_OK);
    CU_ASSERT_EQUAL(r->total_cycles, 100u);
    CU_ASSERT_EQUAL(r->units[0].busy_cycles, 100u); /* core0.dma, busy all along */
    CU_ASSERT_STRING_EQUAL(r->units[0].name, "chip0.core0.dma");
    CU_ASSERT_EQUAL(r->units[0].kind, ISA_UNIT_DMA);
    CU_ASSERT_EQUAL(r->units[0].chip, 0u);
    CU_ASSERT_EQUAL(r->units[0].core, 0u);
    CU_ASSERT_PTR_EQUAL(core_report_unit(r, 0, 0, ISA_UNIT_DMA), &r->units[0]);
    core_report_free(r);
    CU_ASSERT_EQUAL_FATAL(evq_run(q, &e), NP_OK);
    hw_system_check(sys);
    hw_system_chip_info(sys, 0, &in);
    CU_ASSERT_EQUAL(in.state, HW_CHIP_DONE);
    CU_ASSERT_EQUAL(in.cycles, 356u);
    CU_ASSERT_EQUAL(in.cores_done, 1u);
    CU_ASSERT_EQUAL(hw_system_core_state(sys, 0, 0), HW_CHIP_DONE);
    CU_ASSERT_EQUAL_FATAL(hw_system_report(sys, 0, NULL, &r, &e), NP_OK);
    CU_ASSERT_EQUAL(r->total_cycles, 356u);
    CU_ASSERT_EQUAL(r->units[0].busy_cycles, 356u);
    CU_ASSERT_EQUAL(r->hbm_read_bytes, 4096u);
    core_report_free(r);
    /* A chip without a program has no report. */
    CU_ASSERT_EQUAL(hw_system_report(sys, 1, NULL, &r, &e), NP_ERR_RANGE);
    CU_ASSERT_PTR_NULL(r);
    hw_system_free(sys);
    evq_free(q);
    isa_program_free(p);
}

/* Loads (and starts) the next program of the log's chip from the end callback. */
typedef struct chain {
    end_log log;
    const isa_program *next;
    hw_system *sys;
    np_status st;
} chain;

static void chain_end(void *ctx, hw_system *sys, uint32_t chip, hw_chip_state state)
{
    chain *c = ctx;
    log_end(&c->log, sys, chip, state);
    if (state == HW_CHIP_DONE && c->next) {
        np_err e = {0};
        c->st = hw_system_load(sys, chip, c->next, &e);
        if (c->st == NP_OK)
            c->st = hw_system_start(sys, chip, &e);
        c->next = NULL;
    }
}

TEST(kernel_after_kernel_on_one_chip_keeps_its_hbm_and_each_times_as_alone)
{
    arch_config cfg = tiny_chips(2);
    /* Kernel 1: HBM 0x1000 -> spad -> HBM 0x2000, 64 fp32. Kernel 2: 0x2000 -> spad -> 0x3000.
     * Kernel 2's scratchpad starts zero; what it copies is what kernel 1 left in HBM. */
    isa_program *k1 = assemble(&cfg, ".core 0\n.kernel k1\ndma.copy spad[0], hbm[0x1000], fp32, 64\n"
                                     "sem.signal dma, s0\nsem.wait dma, s0\n"
                                     "dma.copy hbm[0x2000], spad[0], fp32, 64\n");
    isa_program *k2 = assemble(&cfg, ".core 0\n.kernel k2\ndma.copy spad[0x100], hbm[0x2000], fp32, 64\n"
                                     "sem.signal dma, s0\nsem.wait dma, s0\n"
                                     "dma.copy hbm[0x3000], spad[0x100], fp32, 64\n");
    /* Each alone, as core_sim_run measures it. */
    core_report *r1, *r2;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(core_sim_run(&cfg, k1, NULL, &r1, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(core_sim_run(&cfg, k2, NULL, &r2, &e), NP_OK);
    evq *q;
    hw_system *sys;
    chain c = {.next = k2};
    CU_ASSERT_EQUAL_FATAL(evq_create(&q, &e), NP_OK);
    c.log.q = q;
    hw_system_opts o = {.functional = true, .on_end = chain_end, .on_end_ctx = &c};
    CU_ASSERT_EQUAL_FATAL(hw_system_create(&cfg, q, &o, &sys, &e), NP_OK);
    c.sys = sys;
    float in[64], out[64];
    for (int i = 0; i < 64; i++)
        in[i] = (float)i * 0.5f - 3.0f;
    CU_ASSERT_EQUAL_FATAL(hw_system_hbm_write(sys, 0, 0x1000, in, sizeof in, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(hw_system_load(sys, 0, k1, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(hw_system_start(sys, 0, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(evq_run(q, &e), NP_OK);
    hw_system_check(sys);
    CU_ASSERT_EQUAL(c.st, NP_OK);
    CU_ASSERT_EQUAL_FATAL(c.log.n, 2u); /* k1 done, then k2 done */
    CU_ASSERT_EQUAL(c.log.state[0], HW_CHIP_DONE);
    CU_ASSERT_EQUAL(c.log.state[1], HW_CHIP_DONE);
    CU_ASSERT_EQUAL(c.log.t_ps[0], r1->total_ps);
    CU_ASSERT_EQUAL(c.log.t_ps[1], r1->total_ps + r2->total_ps);
    hw_chip_info info;
    hw_system_chip_info(sys, 0, &info);
    CU_ASSERT_EQUAL(info.programs, 2u);
    CU_ASSERT_EQUAL(info.t_start_ps, r1->total_ps);
    CU_ASSERT_EQUAL(info.cycles, r2->total_cycles);
    core_report *r;
    CU_ASSERT_EQUAL_FATAL(hw_system_report(sys, 0, NULL, &r, &e), NP_OK);
    CU_ASSERT_EQUAL(r->total_cycles, r2->total_cycles);
    CU_ASSERT_EQUAL_FATAL(r->n_kernels, 1u);
    CU_ASSERT_STRING_EQUAL(r->kernels[0].name, "k2");
    CU_ASSERT_EQUAL(r->kernels[0].cycles, r2->kernels[0].cycles);
    CU_ASSERT_EQUAL(r->hbm_read_bytes, 256u); /* k2's own traffic only */
    core_report_free(r);
    CU_ASSERT_EQUAL_FATAL(hw_system_hbm_read(sys, 0, 0x3000, out, sizeof out, &e), NP_OK);
    CU_ASSERT_EQUAL(memcmp(in, out, sizeof in), 0);
    core_report_free(r1);
    core_report_free(r2);
    hw_system_free(sys);
    evq_free(q);
    isa_program_free(k1);
    isa_program_free(k2);
}

static void caller_ev(evq *q, void *ctx, uint64_t arg)
{
    (void)q, (void)arg;
    ++*(int *)ctx;
}

TEST(every_end_is_reported_once_done_fault_and_deadlock_with_the_waiting_unit)
{
    arch_config cfg = tiny_chips(3);
    isa_program *ok = assemble(&cfg, ".core 0\nnop\n");
    /* 64 MiB of HBM: a copy from 0x4000000 reads outside it. */
    isa_program *bad = assemble(&cfg, ".core 0\nnop\nnop\ndma.copy spad[0], hbm[0x4000000], fp32, 4\n");
    isa_program *stuck = assemble(&cfg, ".core 0\nnop\nsem.wait vpu, s7\n");
    evq *q;
    hw_system *sys;
    np_err e = {0};
    end_log log = {0};
    CU_ASSERT_EQUAL_FATAL(evq_create(&q, &e), NP_OK);
    log.q = q;
    hw_system_opts o = {.on_end = log_end, .on_end_ctx = &log};
    CU_ASSERT_EQUAL_FATAL(hw_system_create(&cfg, q, &o, &sys, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(hw_system_load(sys, 0, ok, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(hw_system_load(sys, 1, bad, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(hw_system_load(sys, 2, stuck, &e), NP_OK);
    for (uint32_t c = 0; c < 3; c++)
        CU_ASSERT_EQUAL_FATAL(hw_system_start(sys, c, &e), NP_OK);
    /* The caller's own event, 1 us ahead, keeps the queue from running empty. */
    int fired = 0;
    CU_ASSERT_EQUAL_FATAL(evq_schedule_at(q, 1000000, caller_ev, &fired, 0, NULL, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(evq_run_until(q, 500000, &e), NP_OK);
    hw_system_check(sys);
    /* chip 0: the nop's cycle, done at 1 ns; chip 1: the copy dispatched at cycle 2 faults */
    CU_ASSERT_EQUAL_FATAL(log.n, 2u);
    CU_ASSERT_EQUAL(log.chip[0], 0u);
    CU_ASSERT_EQUAL(log.state[0], HW_CHIP_DONE);
    CU_ASSERT_EQUAL(log.t_ps[0], 1000u);
    CU_ASSERT_EQUAL(log.chip[1], 1u);
    CU_ASSERT_EQUAL(log.state[1], HW_CHIP_FAULT);
    CU_ASSERT_EQUAL(log.t_ps[1], 2000u);
    CU_ASSERT_EQUAL(hw_system_chip_error(sys, 1, &e), NP_ERR_SIM_FAULT);
    CU_ASSERT_STRING_EQUAL(e.msg, "chip 1 core 0 dma pc 2 `dma.copy spad[0x0], hbm[0x4000000], "
                                  "fp32, 4`: src range 0x4000000 + 16 bytes is outside its space "
                                  "(67108864 bytes)");
    CU_ASSERT_EQUAL(hw_system_chip_error(sys, 0, &e), NP_OK);
    CU_ASSERT_EQUAL(hw_system_chip_state(sys, 2), HW_CHIP_RUNNING); /* not yet known stuck */
    /* Once the caller's event has run the queue is empty: chip 2 is deadlocked, at the cycle
     * its front end halted (1 + 1), not at the caller's 1000. */
    CU_ASSERT_EQUAL_FATAL(evq_run(q, &e), NP_OK);
    CU_ASSERT_EQUAL(fired, 1);
    hw_system_check(sys);
    hw_system_check(sys); /* reported once */
    CU_ASSERT_EQUAL_FATAL(log.n, 3u);
    CU_ASSERT_EQUAL(log.chip[2], 2u);
    CU_ASSERT_EQUAL(log.state[2], HW_CHIP_DEADLOCK);
    CU_ASSERT_EQUAL(hw_system_chip_error(sys, 2, &e), NP_ERR_DEADLOCK);
    CU_ASSERT_STRING_EQUAL(e.msg, "the program can never finish (at cycle 2 nothing is left to "
                                  "happen):\n  chip 2 core 0 vpu: pc 1 `sem.wait vpu, s7` waits on "
                                  "semaphore s7 (value 0, needs 1)");
    hw_chip_info in;
    hw_system_chip_info(sys, 2, &in);
    CU_ASSERT_EQUAL(in.t_end_ps, 2000u);
    CU_ASSERT_EQUAL(in.cycles, 2u);
    /* A faulted chip takes no other program; a deadlocked one does. */
    CU_ASSERT_EQUAL(hw_system_load(sys, 1, ok, &e), NP_ERR_INCONSISTENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "chip 1 is fault"));
    CU_ASSERT_EQUAL_FATAL(hw_system_load(sys, 2, ok, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(hw_system_start(sys, 2, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(evq_run(q, &e), NP_OK);
    hw_system_check(sys);
    CU_ASSERT_EQUAL(hw_system_chip_state(sys, 2), HW_CHIP_DONE);
    CU_ASSERT_EQUAL(log.n, 4u);
    hw_system_free(sys);
    evq_free(q);
    isa_program_free(ok);
    isa_program_free(bad);
    isa_program_free(stuck);
}

TEST(loads_starts_and_host_accesses_are_refused_in_the_wrong_state_or_place)
{
    arch_config cfg = tiny_chips(2);
    isa_program *p = assemble(&cfg, ".core 0\nnop\n");
    isa_program *wide = assemble(&cfg, ".core 1\nnop\n");
    evq *q;
    hw_system *sys;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(evq_create(&q, &e), NP_OK);
    CU_ASSERT_EQUAL(hw_system_create(&cfg, q, &(hw_system_opts){.n_chips = 3}, &sys, &e),
                    NP_ERR_RANGE);
    CU_ASSERT_STRING_EQUAL(e.msg, "3 chips for a system of 2 chips");
    CU_ASSERT_EQUAL_FATAL(hw_system_create(&cfg, q, NULL, &sys, &e), NP_OK);
    CU_ASSERT_EQUAL(hw_system_start(sys, 0, &e), NP_ERR_INCONSISTENT);
    CU_ASSERT_STRING_EQUAL(e.msg, "chip 0 is empty: only a loaded program can start");
    CU_ASSERT_EQUAL(hw_system_load(sys, 2, p, &e), NP_ERR_RANGE);
    CU_ASSERT_STRING_EQUAL(e.msg, "chip 2 is not in this system (2 chips)");
    CU_ASSERT_EQUAL_FATAL(hw_system_load(sys, 0, p, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(hw_system_load(sys, 0, wide, &e), NP_OK); /* replaces it */
    CU_ASSERT_EQUAL_FATAL(hw_system_start(sys, 0, &e), NP_OK);
    CU_ASSERT_EQUAL(hw_system_load(sys, 0, p, &e), NP_ERR_INCONSISTENT);
    CU_ASSERT_STRING_EQUAL(e.msg, "chip 0 is running: a program is loaded on a chip that is "
                                  "empty, loaded, done or deadlocked");
    CU_ASSERT_EQUAL(hw_system_start(sys, 0, &e), NP_ERR_INCONSISTENT);
    uint8_t b[4];
    CU_ASSERT_EQUAL(hw_system_hbm_write(sys, 0, 0, b, 4, &e), NP_ERR_INCONSISTENT);
    CU_ASSERT_STRING_EQUAL(e.msg, "the system runs in timing mode: its HBM holds no bytes");
    CU_ASSERT_EQUAL_FATAL(evq_run(q, &e), NP_OK);
    hw_system_check(sys);
    CU_ASSERT_EQUAL(hw_system_core_state(sys, 0, 1), HW_CHIP_DONE);
    CU_ASSERT_EQUAL(hw_system_core_state(sys, 0, 0), HW_CHIP_EMPTY);
    hw_system_free(sys);
    CU_ASSERT_EQUAL_FATAL(hw_system_create(&cfg, q, &(hw_system_opts){.functional = true}, &sys,
                                           &e), NP_OK);
    CU_ASSERT_EQUAL(hw_system_hbm_read(sys, 1, 64 << 20, b, 1, &e), NP_ERR_RANGE);
    CU_ASSERT_STRING_EQUAL(e.msg, "HBM range 0x4000000 + 1 bytes is outside the HBM (67108864 "
                                  "bytes)");
    CU_ASSERT_EQUAL_FATAL(hw_system_hbm_read(sys, 1, (64 << 20) - 4, b, 4, &e), NP_OK);
    CU_ASSERT_EQUAL(b[0] | b[1] | b[2] | b[3], 0); /* never written: zero */
    hw_system_free(sys);
    evq_free(q);
    isa_program_free(p);
    isa_program_free(wide);
}

TEST(a_message_to_a_chip_between_programs_waits_for_its_next_one)
{
    arch_config cfg = tiny_chips(2);
    isa_program *snd = assemble(&cfg, ".core 0\ncomm.send peer(1, 0), hbm[0x100], 16, 7\n");
    isa_program *idle = assemble(&cfg, ".core 0\nnop\n");
    isa_program *rcv = assemble(&cfg, ".core 0\ncomm.recv peer(0, 0), hbm[0x200], 16, 7\n");
    evq *q;
    hw_system *sys;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(evq_create(&q, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(hw_system_create(&cfg, q, &(hw_system_opts){.functional = true}, &sys,
                                           &e), NP_OK);
    const uint8_t msg[16] = "sixteen bytes..";
    CU_ASSERT_EQUAL_FATAL(hw_system_hbm_write(sys, 0, 0x100, msg, 16, &e), NP_OK);
    /* Chip 1 has no program when the message is sent, then a program without a recv. */
    CU_ASSERT_EQUAL_FATAL(hw_system_load(sys, 0, snd, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(hw_system_start(sys, 0, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(evq_run_until(q, 100000, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(hw_system_load(sys, 1, idle, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(hw_system_start(sys, 1, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(evq_run(q, &e), NP_OK);
    hw_system_check(sys);
    CU_ASSERT_EQUAL(hw_system_chip_state(sys, 0), HW_CHIP_DONE);
    CU_ASSERT_EQUAL(hw_system_chip_state(sys, 1), HW_CHIP_DONE);
    /* The next program's recv takes it at once: it arrived long ago (200 + 16 / 8 = 202 ns),
     * so the recv retires in its first cycle. */
    CU_ASSERT_EQUAL_FATAL(hw_system_load(sys, 1, rcv, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(hw_system_start(sys, 1, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(evq_run(q, &e), NP_OK);
    hw_system_check(sys);
    CU_ASSERT_EQUAL(hw_system_chip_state(sys, 1), HW_CHIP_DONE);
    hw_chip_info in;
    hw_system_chip_info(sys, 1, &in);
    CU_ASSERT_EQUAL(in.cycles, 1u);
    uint8_t got[16];
    CU_ASSERT_EQUAL_FATAL(hw_system_hbm_read(sys, 1, 0x200, got, 16, &e), NP_OK);
    CU_ASSERT_EQUAL(memcmp(got, msg, 16), 0);
    hw_system_free(sys);
    evq_free(q);
    isa_program_free(snd);
    isa_program_free(idle);
    isa_program_free(rcv);
}

/* ---- SPMD: peers by group rank ----------------------------------------------------------- */

#define RING_BLOCK 64
#define RING_BASE 0x10000

/* The SPMD ring all-gather of docs/isa.md (examples), for groups of n ranks: slot k of rank r
 * ends up holding the block of rank r - k (mod n). */
static isa_program *ring_all_gather(const arch_config *cfg, unsigned n)
{
    char src[1024];
    snprintf(src, sizeof src,
             ".core 0\n"
             "    li r1, %u\n"
             "    li r2, %u\n"
             "    loop %u, r1+=%u, r2+=%u\n"
             "        comm.send peer(g0[rank+1], 0), hbm[r1], %u, 1\n"
             "        comm.recv peer(g0[rank-1], 0), hbm[r2], %u, 1\n"
             "    endloop\n",
             RING_BASE, RING_BASE + RING_BLOCK, n - 1, RING_BLOCK, RING_BLOCK, RING_BLOCK,
             RING_BLOCK);
    return assemble(cfg, src);
}

static void ring_block(uint32_t chip, uint8_t *b)
{
    for (unsigned i = 0; i < RING_BLOCK; i++)
        b[i] = (uint8_t)(chip * 29 + i);
}

static uint32_t member(const core_group *g, uint32_t r)
{
    return g->chips ? g->chips[r] : g->first + r * g->stride;
}

/* Runs the ring all-gather on every member of the groups (instances of g0, all of n ranks) of
 * a 16-chip system, chips outside them left empty, and checks every slot of every rank. */
static void check_ring(const core_group *groups, size_t n_groups, unsigned n)
{
    arch_config cfg = tiny_chips(16);
    isa_program *p = ring_all_gather(&cfg, n);
    evq *q;
    hw_system *sys;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(evq_create(&q, &e), NP_OK);
    hw_system_opts o = {.functional = true, .groups = groups, .n_groups = n_groups};
    CU_ASSERT_EQUAL_FATAL(hw_system_create(&cfg, q, &o, &sys, &e), NP_OK);
    uint8_t b[RING_BLOCK], got[RING_BLOCK];
    for (size_t g = 0; g < n_groups; g++)
        for (uint32_t r = 0; r < n; r++) {
            uint32_t c = member(&groups[g], r);
            ring_block(c, b);
            CU_ASSERT_EQUAL_FATAL(hw_system_hbm_write(sys, c, RING_BASE, b, RING_BLOCK, &e), NP_OK);
            CU_ASSERT_EQUAL_FATAL(hw_system_load(sys, c, p, &e), NP_OK);
            CU_ASSERT_EQUAL_FATAL(hw_system_start(sys, c, &e), NP_OK);
        }
    CU_ASSERT_EQUAL_FATAL(evq_run(q, &e), NP_OK);
    hw_system_check(sys);
    unsigned bad = 0;
    for (size_t g = 0; g < n_groups; g++)
        for (uint32_t r = 0; r < n; r++) {
            uint32_t c = member(&groups[g], r);
            if (hw_system_chip_state(sys, c) != HW_CHIP_DONE) {
                hw_system_chip_error(sys, c, &e);
                fprintf(stderr, "chip %u: %s\n", c, e.msg);
                bad++;
                continue;
            }
            for (uint32_t k = 0; k < n; k++) {
                ring_block(member(&groups[g], (r + n - k) % n), b);
                CU_ASSERT_EQUAL_FATAL(hw_system_hbm_read(sys, c, RING_BASE + k * RING_BLOCK, got,
                                                         RING_BLOCK, &e), NP_OK);
                bad += memcmp(b, got, RING_BLOCK) != 0;
            }
        }
    CU_ASSERT_EQUAL(bad, 0u);
    hw_system_free(sys);
    evq_free(q);
    isa_program_free(p);
}

TEST(one_ring_text_runs_on_every_rank_of_contiguous_strided_and_listed_groups)
{
    static const uint32_t list[] = {5, 0, 9, 2, 14, 7, 11, 3}; /* any placement */
    for (unsigned n = 2; n <= 8; n++) {
        core_group contiguous = {.id = 0, .n = n, .first = 16 - n, .stride = 1};
        core_group strided = {.id = 0, .n = n, .first = 1, .stride = 2};
        core_group listed = {.id = 0, .n = n, .chips = list};
        check_ring(&contiguous, 1, n);
        check_ring(&strided, 1, n);
        check_ring(&listed, 1, n);
    }
    /* Two instances of g0 side by side (the data-parallel groups of a tp2 x dp4 mesh): each
     * ring stays inside its own. */
    core_group two[] = {{.id = 0, .n = 4, .first = 0, .stride = 2},
                        {.id = 0, .n = 4, .first = 1, .stride = 2}};
    check_ring(two, 2, 4);
}

TEST(recursive_doubling_with_xor_peers_sums_over_the_group)
{
    arch_config cfg = tiny_chips(16);
    static const uint32_t list[] = {12, 3, 8, 1, 6, 15, 0, 9};
    for (unsigned n = 2; n <= 8; n *= 2) {
        char src[2048] = ".core 0\n";
        for (unsigned k = 1; k < n; k *= 2) { /* partner rank ^ k, the sum so far added in */
            char line[200];
            snprintf(line, sizeof line, "comm.send peer(g0[rank^%u], 0), hbm[0x100], 64, %u\n"
                                        "comm.recv peer(g0[rank^%u], 0), hbm[0x100], 64, %u, add, fp32\n",
                     k, k, k, k);
            strcat(src, line);
        }
        isa_program *p = assemble(&cfg, src);
        core_group g = {.id = 0, .n = n, .chips = list};
        evq *q;
        hw_system *sys;
        np_err e = {0};
        CU_ASSERT_EQUAL_FATAL(evq_create(&q, &e), NP_OK);
        hw_system_opts o = {.functional = true, .groups = &g, .n_groups = 1};
        CU_ASSERT_EQUAL_FATAL(hw_system_create(&cfg, q, &o, &sys, &e), NP_OK);
        float v[16], want[16] = {0};
        for (unsigned r = 0; r < n; r++) {
            for (int i = 0; i < 16; i++) {
                v[i] = (float)list[r] + 0.25f * (float)i; /* sums are exact in fp32 */
                want[i] += v[i];
            }
            CU_ASSERT_EQUAL_FATAL(hw_system_hbm_write(sys, list[r], 0x100, v, sizeof v, &e), NP_OK);
            CU_ASSERT_EQUAL_FATAL(hw_system_load(sys, list[r], p, &e), NP_OK);
            CU_ASSERT_EQUAL_FATAL(hw_system_start(sys, list[r], &e), NP_OK);
        }
        CU_ASSERT_EQUAL_FATAL(evq_run(q, &e), NP_OK);
        hw_system_check(sys);
        for (unsigned r = 0; r < n; r++) {
            CU_ASSERT_EQUAL(hw_system_chip_state(sys, list[r]), HW_CHIP_DONE);
            CU_ASSERT_EQUAL_FATAL(hw_system_hbm_read(sys, list[r], 0x100, v, sizeof v, &e), NP_OK);
            CU_ASSERT_EQUAL(memcmp(v, want, sizeof v), 0);
        }
        hw_system_free(sys);
        evq_free(q);
        isa_program_free(p);
    }
}

TEST(a_register_in_the_rank_index_walks_the_group_in_a_loop)
{
    /* All-to-all, pairwise: step k = 1 .. n-1 sends block (rank + k) to rank + k and receives
     * from rank - k (r4 = -k: registers are only added) into block (rank - k). Addresses are
     * rank-relative too: a rank's block j sits at slot (j - rank) mod n, so r1 and r2 step
     * like k. */
    arch_config cfg = tiny_chips(16);
    enum { N = 5, B = 32 };
    static const uint32_t list[N] = {4, 13, 2, 7, 10};
    char src[1024];
    snprintf(src, sizeof src,
             ".core 0\n"
             "li r3, 1\nli r4, -1\nli r1, %u\nli r2, %u\n"
             "loop %u, r3+=1, r4-=1, r1+=%u\n"
             "  comm.send peer(g0[rank+r3], 0), hbm[r1+0x1000], %u, 5\n"
             "  comm.recv peer(g0[rank+r4], 0), hbm[r1+0x2000], %u, 5\n"
             "endloop\n",
             B, B, N - 1, B, B, B);
    isa_program *p = assemble(&cfg, src);
    core_group g = {.id = 0, .n = N, .chips = list};
    evq *q;
    hw_system *sys;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(evq_create(&q, &e), NP_OK);
    hw_system_opts o = {.functional = true, .groups = &g, .n_groups = 1};
    CU_ASSERT_EQUAL_FATAL(hw_system_create(&cfg, q, &o, &sys, &e), NP_OK);
    /* Rank r's outgoing slot s (at 0x1000 + s x B) holds "from r to r + s". */
    uint8_t blk[B];
    for (unsigned r = 0; r < N; r++) {
        for (unsigned s = 1; s < N; s++) {
            memset(blk, (int)(r * 16 + (r + s) % N), B);
            CU_ASSERT_EQUAL_FATAL(hw_system_hbm_write(sys, list[r], 0x1000 + s * B, blk, B, &e), NP_OK);
        }
        CU_ASSERT_EQUAL_FATAL(hw_system_load(sys, list[r], p, &e), NP_OK);
        CU_ASSERT_EQUAL_FATAL(hw_system_start(sys, list[r], &e), NP_OK);
    }
    CU_ASSERT_EQUAL_FATAL(evq_run(q, &e), NP_OK);
    hw_system_check(sys);
    /* Rank r's incoming slot s (at 0x2000 + s x B) holds "from r - s to r". */
    unsigned bad = 0;
    for (unsigned r = 0; r < N; r++) {
        CU_ASSERT_EQUAL(hw_system_chip_state(sys, list[r]), HW_CHIP_DONE);
        for (unsigned s = 1; s < N; s++) {
            uint8_t got[B];
            CU_ASSERT_EQUAL_FATAL(hw_system_hbm_read(sys, list[r], 0x2000 + s * B, got, B, &e), NP_OK);
            memset(blk, (int)(((r + N - s) % N) * 16 + r), B);
            bad += memcmp(got, blk, B) != 0;
        }
    }
    CU_ASSERT_EQUAL(bad, 0u);
    hw_system_free(sys);
    evq_free(q);
    isa_program_free(p);
}

/* core_sim_run_chips of n programs (texts src[i], or the same text for all when one is
 * given) with the group table, timing mode. */
static np_status run_all(const arch_config *cfg, const char *const *src, unsigned n_src,
                         unsigned n, const core_group *groups, size_t n_groups, core_report **r,
                         np_err *e)
{
    isa_program *p[8];
    for (unsigned i = 0; i < n; i++)
        p[i] = assemble(cfg, src[n_src == 1 ? 0 : i]);
    core_sim_opts o = {.groups = groups, .n_groups = n_groups};
    np_status st = core_sim_run_chips(cfg, (const isa_program *const *)p, n, &o, NULL, r, e);
    for (unsigned i = 0; i < n; i++)
        isa_program_free(p[i]);
    return st;
}

TEST(peers_by_group_rank_time_exactly_as_the_same_peers_by_chip_number)
{
    /* A 6-chip ring (tiny's links), g0 = chips 0, 2, 4, 1, 3, 5 (every hop two links but the
     * wrap-around), 4 KiB per step: one SPMD text against six texts with the chips written
     * out. Same messages, same events: the same figures to the cycle. */
    arch_config cfg = tiny_chips(6);
    static const uint32_t order[6] = {0, 2, 4, 1, 3, 5};
    core_group g = {.id = 0, .n = 6, .chips = order};
    const char *spmd = ".core 0\nloop 5\ncomm.send peer(g0[rank+1], 0), hbm[0], 4096, 1\n"
                       "comm.recv peer(g0[rank-1], 0), hbm[0x1000], 4096, 1, add, fp32\n"
                       "endloop\n";
    char texts[6][512];
    const char *each[6];
    for (unsigned c = 0; c < 6; c++) {
        unsigned r = 0;
        while (order[r] != c)
            r++;
        snprintf(texts[c], sizeof texts[c], ".core 0\nloop 5\ncomm.send peer(%u, 0), hbm[0], 4096, 1\n"
                 "comm.recv peer(%u, 0), hbm[0x1000], 4096, 1, add, fp32\nendloop\n",
                 order[(r + 1) % 6], order[(r + 5) % 6]);
        each[c] = texts[c];
    }
    core_report *a, *b;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(run_all(&cfg, &spmd, 1, 6, &g, 1, &a, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(run_all(&cfg, each, 6, 6, NULL, 0, &b, &e), NP_OK);
    CU_ASSERT_EQUAL(a->total_ps, b->total_ps);
    CU_ASSERT_EQUAL(a->c2c_bytes, 6u * 5 * 4096);
    CU_ASSERT_EQUAL(a->c2c_bytes, b->c2c_bytes);
    CU_ASSERT_EQUAL_FATAL(a->n_units, b->n_units);
    for (uint32_t i = 0; i < a->n_units; i++) {
        CU_ASSERT_EQUAL(a->units[i].busy_cycles, b->units[i].busy_cycles);
        CU_ASSERT_EQUAL(a->units[i].stall_cycles, b->units[i].stall_cycles);
    }
    core_report_free(a);
    core_report_free(b);
    /* Without a group table g0 is every chip of the run in order: rank + 1 is chip + 1. */
    const char *world = ".core 0\ncomm.send peer(g0[rank+1], 0), hbm[0], 64, 1\n"
                        "comm.recv peer(g0[rank-1], 0), hbm[0x40], 64, 1\n";
    char ring[2][256];
    const char *abs2[2] = {ring[0], ring[1]};
    for (unsigned c = 0; c < 2; c++)
        snprintf(ring[c], sizeof ring[c], ".core 0\ncomm.send peer(%u, 0), hbm[0], 64, 1\n"
                 "comm.recv peer(%u, 0), hbm[0x40], 64, 1\n", 1 - c, 1 - c);
    cfg = tiny_chips(2);
    CU_ASSERT_EQUAL_FATAL(run_all(&cfg, &world, 1, 2, NULL, 0, &a, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(run_all(&cfg, abs2, 2, 2, NULL, 0, &b, &e), NP_OK);
    CU_ASSERT_EQUAL(a->total_ps, b->total_ps);
    CU_ASSERT_EQUAL(a->total_cycles, 208u); /* both ways at once, one link each: 200 + 8 */
    core_report_free(a);
    core_report_free(b);
}

TEST(a_peer_outside_its_group_is_a_fault_naming_the_rank_arithmetic)
{
    arch_config cfg = tiny_chips(4);
    core_group three = {.id = 0, .n = 3, .first = 0, .stride = 1};
    core_report *r;
    np_err e = {0};
    /* rank 1 ^ 2 = 3 is past the 3 ranks (rank 0 -> 2 and rank 2 -> 0 are fine; chip 1
     * faults in its first cycle, the run stops there). */
    const char *x = ".core 0\ncomm.send peer(g0[rank^2], 0), hbm[0], 16, 0\n";
    CU_ASSERT_EQUAL(run_all(&cfg, &x, 1, 3, &three, 1, &r, &e), NP_ERR_SIM_FAULT);
    CU_ASSERT_STRING_EQUAL(e.msg, "chip 1 core 0 comm pc 0 `comm.send peer(g0[rank^2], 0), hbm[0x0], "
                                  "16, 0`: rank 1 ^ 2 is not a rank of g0 (3 ranks: chips 0, 1, 2)");
    /* an index from a register: r3 + 1 = 6 */
    const char *idx = ".core 0\nli r3, 5\ncomm.send peer(g0[r3+1], 0), hbm[0], 16, 0\n";
    core_group strided = {.id = 0, .n = 2, .first = 1, .stride = 2};
    CU_ASSERT_EQUAL(run_all(&cfg, &idx, 1, 4, &strided, 1, &r, &e), NP_ERR_SIM_FAULT);
    CU_ASSERT_STRING_EQUAL(e.msg, "chip 0 core 0 comm pc 1 `comm.send peer(g0[r3+1], 0), hbm[0x0], "
                                  "16, 0`: chip 0 is in no group g0 (the group table gives it none)");
    const char *idx1 = ".core 0\nnop\n";
    const char *both[4] = {idx1, idx, idx1, idx1};
    CU_ASSERT_EQUAL(run_all(&cfg, both, 4, 4, &strided, 1, &r, &e), NP_ERR_SIM_FAULT);
    CU_ASSERT_STRING_EQUAL(e.msg, "chip 1 core 0 comm pc 1 `comm.send peer(g0[r3+1], 0), hbm[0x0], "
                                  "16, 0`: 6 is not a rank of g0 (2 ranks: chips 1, 3)");
    /* a group the table does not define */
    const char *g1 = ".core 0\ncomm.recv peer(g1[rank-1], 0), hbm[0], 16, 0\n";
    CU_ASSERT_EQUAL(run_all(&cfg, &g1, 1, 1, NULL, 0, &r, &e), NP_ERR_SIM_FAULT);
    CU_ASSERT_STRING_EQUAL(e.msg, "core 0 comm pc 0 `comm.recv peer(g1[rank-1], 0), hbm[0x0], "
                                  "16, 0`: chip 0 is in no group g1 (the group table gives it none)");
}

TEST(the_group_table_is_checked_when_the_system_is_created)
{
    arch_config cfg = tiny_chips(4);
    evq *q;
    hw_system *sys;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(evq_create(&q, &e), NP_OK);
    static const uint32_t dup[] = {0, 2, 0};
    static const uint32_t outside[] = {1, 4};
    struct {
        core_group g[2];
        size_t n;
        np_status st;
        const char *msg;
    } cases[] = {
        {{{.id = 16, .n = 1}}, 1, NP_ERR_RANGE,
         "group table entry 0: group g16 does not exist (g0..g15)"},
        {{{.id = 1, .n = 0}}, 1, NP_ERR_RANGE, "group table entry 0 (g1) has no members"},
        {{{.id = 0, .n = 3, .chips = dup}}, 1, NP_ERR_DUPLICATE,
         "group table entry 0 (g0): chip 0 is already in this group"},
        {{{.id = 0, .n = 2, .chips = outside}}, 1, NP_ERR_RANGE,
         "group table entry 0 (g0): chip 4 is not in the system (4 chips)"},
        {{{.id = 0, .n = 3, .first = 1, .stride = 2}}, 1, NP_ERR_RANGE,
         "group table entry 0 (g0): chips 1 + 2 x k, k < 3, leave the system's 4 chips"},
        {{{.id = 0, .n = 2, .first = 1, .stride = 0}}, 1, NP_ERR_DUPLICATE,
         "group table entry 0 (g0): stride 0 repeats chip 1"},
        {{{.id = 3, .n = 2, .first = 0, .stride = 1}, {.id = 3, .n = 2, .first = 1, .stride = 2}},
         2, NP_ERR_DUPLICATE, "group table entry 1 (g3): chip 1 is already in another group of "
                              "that id"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        hw_system_opts o = {.groups = cases[i].g, .n_groups = cases[i].n};
        np_err ce = {0};
        CU_ASSERT_EQUAL(hw_system_create(&cfg, q, &o, &sys, &ce), cases[i].st);
        CU_ASSERT_PTR_NULL(sys);
        if (strcmp(ce.msg, cases[i].msg))
            fprintf(stderr, "case %zu: got '%s'\n", i, ce.msg);
        CU_ASSERT_STRING_EQUAL(ce.msg, cases[i].msg);
    }
    evq_free(q);
}

TEST(npusim_sim_runs_one_spmd_elf_on_every_chip_of_the_run)
{
    /* Without a group table g0 is every chip of the run: the same ELF four times on a ring of
     * four chips passes 64 bytes to the next chip; each goes over its own link, 200 + 64 / 8
     * = 208 cycles, 4 x 64 bytes between chips. */
    char dir[] = "/tmp/npusim_spmd_XXXXXX";
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
    char s_path[256], elf[256];
    snprintf(s_path, sizeof s_path, "%s/ring.s", dir);
    snprintf(elf, sizeof elf, "%s/ring.elf", dir);
    FILE *f = fopen(s_path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs(".core 0\ncomm.send peer(g0[rank+1], 0), hbm[0x100], 64, 1\n"
          "comm.recv peer(g0[rank-1], 0), hbm[0x200], 64, 1\n", f);
    fclose(f);
    harness_run a = harness_npusim("asm", s_path, "-o", elf, NULL);
    CU_ASSERT_EQUAL(a.exit_status, 0);
    harness_run_free(&a);
    harness_run s = harness_npusim("sim", "--set", "system.chips=4", "--json", elf, elf, elf, elf,
                                   NULL);
    CU_ASSERT_EQUAL(s.exit_status, 0);
    json_error_t je;
    json_t *j = json_loads(s.out, 0, &je);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(j, "total_cycles")), 208);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(json_object_get(j, "traffic"),
                                                       "c2c_bytes")), 256);
    json_decref(j);
    harness_run_free(&s);
    remove(s_path);
    remove(elf);
    rmdir(dir);
}

/* ---- the core model's invariants (hw_system_verify, core_verify.c) ---- */

TEST(the_verifier_passes_a_run_and_names_each_corrupted_invariant)
{
    arch_config cfg = tiny_chips(1);
    /* a 16 KiB copy: 100 ns of latency, then 1,024 cycles of 16 bytes */
    isa_program *prog = assemble(&cfg, ".core 0\ndma.copy spad[0], hbm[0], fp32, 4096\n");
    evq *q;
    hw_system *sys;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(evq_create(&q, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(hw_system_create(&cfg, q, &(hw_system_opts){.n_chips = 1}, &sys, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(hw_system_load(sys, 0, prog, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(hw_system_start(sys, 0, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(evq_run_until(q, 500000, &e), NP_OK);
    CU_ASSERT_EQUAL(hw_system_verify(sys, &e), NP_OK); /* mid-copy */
    core_model *c = &sys->chips[0].cores[0];
    core_queue *dq = &c->q[ISA_UNIT_DMA];
    CU_ASSERT_EQUAL_FATAL(dq->n_inflight, 1u);
    struct {
        uint32_t *field;
        uint32_t bad;
        const char *phrase;
    } cases[] = {
        {&dq->lanes, dq->lanes | 1u << 5, "lane mask"},
        {&sys->chips[0].cores_left, 0, "counted left"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        uint32_t keep = *cases[k].field;
        *cases[k].field = cases[k].bad;
        CU_ASSERT_EQUAL(hw_system_verify(sys, &e), NP_ERR_INTERNAL);
        CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, cases[k].phrase));
        *cases[k].field = keep;
    }
    dq->n_inflight++;
    CU_ASSERT_EQUAL(hw_system_verify(sys, &e), NP_ERR_INTERNAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "more in flight than started"));
    dq->n_inflight--;
    dq->ring[dq->head].done = true; /* done while counted in flight */
    CU_ASSERT_EQUAL(hw_system_verify(sys, &e), NP_ERR_INTERNAL);
    dq->ring[dq->head].done = false;
    CU_ASSERT_EQUAL(hw_system_verify(sys, &e), NP_OK);
    /* with the verifiers on, a front end said busier than the run makes the end a fault */
    np_verify_enable(true);
    uint64_t busy = c->fe_busy_ps;
    c->fe_busy_ps = 1ull << 50;
    CU_ASSERT_EQUAL_FATAL(evq_run(q, &e), NP_OK);
    CU_ASSERT_EQUAL(hw_system_chip_state(sys, 0), HW_CHIP_FAULT);
    CU_ASSERT_EQUAL(hw_system_chip_error(sys, 0, &e), NP_ERR_INTERNAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "front end busy"));
    c->fe_busy_ps = busy;
    hw_system_free(sys);
    evq_free(q);
    /* the same program run whole: done, and its ended state passes */
    CU_ASSERT_EQUAL_FATAL(evq_create(&q, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(hw_system_create(&cfg, q, &(hw_system_opts){.n_chips = 1}, &sys, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(hw_system_load(sys, 0, prog, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(hw_system_start(sys, 0, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(evq_run(q, &e), NP_OK);
    CU_ASSERT_EQUAL(hw_system_chip_state(sys, 0), HW_CHIP_DONE);
    CU_ASSERT_EQUAL(hw_system_verify(sys, &e), NP_OK);
    c = &sys->chips[0].cores[0];
    c->q[ISA_UNIT_DMA].count = 1; /* an entry left in an ended program's queue */
    c->q_used |= 1u << ISA_UNIT_DMA;
    CU_ASSERT_EQUAL(hw_system_verify(sys, &e), NP_ERR_INTERNAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "ended program"));
    c->q[ISA_UNIT_DMA].count = 0;
    hw_system_free(sys);
    evq_free(q);
    isa_program_free(prog);
}
