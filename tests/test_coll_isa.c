/* test_coll_isa.c — collectives lowered to one SPMD ISA program (compiler/kgen_coll.h) that
 * every chip of a group runs on the core model, over the chip-to-chip network
 * (hw-model/core.h): values against the sums computed here (in the lowering's rotated slot
 * layout), times against docs/collectives.md's alpha-beta costs and against the flow-level
 * collective engine (noc/coll.h) on the same network. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "arch.h"
#include "coll.h"
#include "core.h"
#include "evq.h"
#include "harness.h"
#include "kgen_coll.h"

/* tiny with p chips on a ring and `cores` cores per chip (one core: the flow engine's
 * reduction rate, which counts every core of a chip, equals one core's). */
static arch_config tiny_of(uint32_t p, uint32_t cores)
{
    char chips[64], cs[64];
    snprintf(chips, sizeof chips, "system.chips=%u", p);
    snprintf(cs, sizeof cs, "chip.cores=%u", cores);
    const char *sets[] = {chips, cs};
    arch_config cfg;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tiny", sets, 2, &cfg, &e), NP_OK);
    return cfg;
}

static arch_config ring_of(uint32_t p) { return tiny_of(p, 1); }

/* Runs the lowered program kp on the chips of its group (the rest idle) with opts (their
 * group table filled in here). */
static core_report *run_lowered(const arch_config *cfg, const kgen_coll_prog *kp,
                                core_sim_opts o)
{
    uint32_t n = (uint32_t)cfg->system.chips;
    const isa_program **pv = calloc(n, sizeof *pv);
    isa_program *idle;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(kgen_coll_idle(cfg, &idle, &e), NP_OK);
    for (uint32_t c = 0; c < n; c++)
        pv[c] = idle;
    for (uint32_t k = 0; k < kp->ranks; k++)
        pv[kp->ring[k]] = kp->prog; /* the same program on every rank */
    core_group g = {.id = kp->group, .n = kp->ranks, .chips = kp->ring};
    o.groups = &g;
    o.n_groups = 1;
    core_report *r = NULL;
    np_status st = core_sim_run_chips(cfg, pv, n, &o, NULL, &r, &e);
    if (st != NP_OK)
        fprintf(stderr, "%s\n", e.msg);
    CU_ASSERT_EQUAL_FATAL(st, NP_OK);
    isa_program_free(idle);
    free(pv);
    return r;
}

/* Runs op over group chips[0 .. p) on core `core` of a system of n chips; rank r's buffer is
 * L_r[i] = 1000 r + i (fp32, exact sums), placed in the rotated slot layout (the chip at ring
 * position k keeps segment (k + j) mod p in slot j); checks every rank's X afterwards against
 * the op's meaning. */
static void check_values(kgen_coll_op op, const uint32_t *chips, uint32_t p, uint32_t n,
                         uint32_t core, uint64_t elems)
{
    arch_config cfg = tiny_of(n, core + 1);
    kgen_coll kc = {.op = op, .chips = chips, .ranks = p, .core = core, .group = 3,
                    .bytes = elems * 4, .dtype = ISA_DTYPE_FP32};
    kgen_coll_prog kp;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(kgen_coll_build(&cfg, &kc, &kp, &e), NP_OK);
    CU_ASSERT_EQUAL(isa_program_symbol(kp.prog, "X")->addr, kp.x_addr);
    uint64_t q = kp.slot_bytes / 4, tot = q * p; /* elements per slot, in X */
    float *in = calloc(p * tot, sizeof *in), *out = calloc(p * tot, sizeof *out);
    core_hbm_io *ii = malloc(p * sizeof *ii), *oo = malloc(p * sizeof *oo);
    uint32_t *rank_at = malloc(p * sizeof *rank_at); /* ring position -> group rank */
    CU_ASSERT_FATAL(in && out && ii && oo && rank_at);
    for (uint32_t k = 0; k < p; k++)
        for (uint32_t r = 0; r < p; r++)
            if ((chips ? chips[r] : r) == kp.ring[k])
                rank_at[k] = r;
    for (uint32_t k = 0; k < p; k++) {
        uint32_t r = rank_at[k];
        for (uint64_t j = 0; j < p; j++) {
            uint64_t s = (k + j) % p; /* the segment in slot j */
            if (op == KGEN_COLL_ALL_GATHER && s != k)
                continue; /* a gather starts with its own segment only */
            for (uint64_t x = 0; x < q; x++) {
                uint64_t i = s * q + x;
                if (i < elems)
                    in[k * tot + j * q + x] = (float)(1000 * r + i);
            }
        }
        ii[k] = (core_hbm_io){kp.x_addr, in + k * tot, tot * 4, kp.ring[k]};
        oo[k] = (core_hbm_io){kp.x_addr, out + k * tot, tot * 4, kp.ring[k]};
    }
    core_sim_opts o = {.functional = true, .inputs = ii, .n_inputs = p, .outputs = oo,
                       .n_outputs = p};
    core_report_free(run_lowered(&cfg, &kp, o));
    for (uint32_t k = 0; k < p; k++)
        for (uint64_t j = 0; j < p; j++) {
            uint64_t s = (k + j) % p;
            for (uint64_t x = 0; x < q; x++) {
                uint64_t i = s * q + x;
                if (i >= elems)
                    continue; /* padding */
                float sum = (float)(1000.0 * p * (p - 1) / 2 + (double)p * (double)i);
                float got = out[k * tot + j * q + x], want = got;
                if (op == KGEN_COLL_ALL_REDUCE)
                    want = sum;
                else if (op == KGEN_COLL_ALL_GATHER) /* segment s from position s */
                    want = (float)(1000 * rank_at[s] + i);
                else if (j == 0) /* reduce-scatter: the own segment, in slot 0 */
                    want = sum;
                if (got != want) {
                    CU_FAIL("a rank's buffer differs from the expected values");
                    fprintf(stderr, "%s p=%u elems=%llu position %u slot %llu element %llu: %g, "
                            "expected %g\n", kgen_coll_op_name(op), p, (unsigned long long)elems,
                            k, (unsigned long long)j, (unsigned long long)i, got, want);
                    k = p, j = p;
                    break;
                }
            }
        }
    kgen_coll_prog_free(&kp);
    free(in), free(out), free(ii), free(oo), free(rank_at);
}

TEST(lowered_collectives_compute_sums_and_gathers_on_every_rank)
{
    static const uint32_t ps[] = {2, 3, 4, 5};
    static const uint64_t ns[] = {1, 3, 7, 64};
    for (int op = 0; op < 3; op++)
        for (size_t a = 0; a < 4; a++)
            for (size_t b = 0; b < 4; b++)
                check_values((kgen_coll_op)op, NULL, ps[a], ps[a], 0, ns[b]);
}

TEST(one_program_runs_on_any_group_of_chips_on_any_core)
{
    /* a group of 4 of 8 chips, in no order, on core 1; and 5 chips of 9 */
    uint32_t g4[] = {6, 1, 4, 3}, g5[] = {8, 0, 5, 2, 7};
    for (int op = 0; op < 3; op++) {
        check_values((kgen_coll_op)op, g4, 4, 8, 1, 64);
        check_values((kgen_coll_op)op, g5, 5, 9, 1, 23);
    }
    /* the text is a handful of instructions whatever the rank count: four loops (each phase
     * of the all-reduce wraps round the slots once), 26 instructions at 64 or 256 ranks */
    uint32_t insns[2];
    for (int k = 0; k < 2; k++) {
        uint32_t p = k ? 256 : 64;
        arch_config cfg = ring_of(p);
        kgen_coll kc = {.op = KGEN_COLL_ALL_REDUCE, .ranks = p, .bytes = (uint64_t)p * 4096,
                        .dtype = ISA_DTYPE_FP32};
        kgen_coll_prog kp;
        np_err e = {0};
        CU_ASSERT_EQUAL_FATAL(kgen_coll_build(&cfg, &kc, &kp, &e), NP_OK);
        CU_ASSERT_EQUAL(kp.prog->n_cores, 1);
        insns[k] = kp.prog->cores[0].n_insns;
        for (uint32_t i = 0; i < kp.prog->cores[0].n_insns; i++) { /* peers by group rank */
        const isa_insn *in = &kp.prog->cores[0].insns[i];
        if (in->op == ISA_OP_COMM_SEND)
            CU_ASSERT_EQUAL(in->COMM_SEND.peer.form, ISA_PEER_FORM_ADD);
        if (in->op == ISA_OP_COMM_RECV)
            CU_ASSERT_EQUAL(in->COMM_RECV.peer.form, ISA_PEER_FORM_ADD);
        }
        kgen_coll_prog_free(&kp);
    }
    CU_ASSERT_EQUAL(insns[0], 26);
    CU_ASSERT_EQUAL(insns[1], 26);
}

/* Total time of op over p chips with n bytes on the core model, in ns (tiny: 1 GHz). */
static double isa_ns(const arch_config *cfg, kgen_coll_op op, uint32_t p, uint64_t n)
{
    kgen_coll kc = {.op = op, .ranks = p, .bytes = n, .dtype = ISA_DTYPE_FP32};
    kgen_coll_prog kp;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(kgen_coll_build(cfg, &kc, &kp, &e), NP_OK);
    core_report *r = run_lowered(cfg, &kp, (core_sim_opts){0});
    double t = (double)r->total_ps / 1000.0;
    core_report_free(r);
    kgen_coll_prog_free(&kp);
    return t;
}

/* The same collective on the flow-level engine, in ns. */
static double flow_ns(const arch_config *cfg, coll_op op, uint32_t p, uint64_t n)
{
    evq *q;
    coll_sys *s;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(evq_create(&q, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(coll_sys_create(cfg, NULL, q, NULL, &s, &e), NP_OK);
    coll_desc d = {.op = op, .algo = COLL_ALGO_RING, .n_chips = p, .bytes = n};
    coll_result res;
    CU_ASSERT_EQUAL_FATAL(coll_run(s, &d, &res, &e), NP_OK);
    coll_sys_free(s);
    evq_free(q);
    return (double)(res.t_end_ps - res.t_start_ps) / 1000.0;
}

TEST(lowered_ring_collectives_take_the_alpha_beta_time_and_agree_with_the_flow_engine)
{
    /* tiny: alpha = 200 ns (one ring hop), beta = 1 / 8 ns per byte, gamma = 1 / (4 bytes x 4
     * lanes x 1 op x 1 GHz) = 1 / 16 ns per byte (one core's vector unit, fp32). */
    const double a = 200, b = 1.0 / 8, g = 1.0 / 16;
    static const uint32_t ps[] = {2, 4, 8};
    for (size_t i = 0; i < 3; i++) {
        uint32_t p = ps[i];
        arch_config cfg = ring_of(p);
        uint64_t n = 64 * 1024 * (uint64_t)p; /* n / p = 64 KiB per segment */
        double s = (double)n / p;
        double ar = 2 * (p - 1) * (a + s * b) + (p - 1) * s * g;
        double ag = (p - 1) * (a + s * b), rs = (p - 1) * (a + s * b + s * g);
        double t_ar = isa_ns(&cfg, KGEN_COLL_ALL_REDUCE, p, n);
        double t_ag = isa_ns(&cfg, KGEN_COLL_ALL_GATHER, p, n);
        double t_rs = isa_ns(&cfg, KGEN_COLL_REDUCE_SCATTER, p, n);
        CU_ASSERT_DOUBLE_EQUAL(t_ar, ar, ar * 0.01);
        CU_ASSERT_DOUBLE_EQUAL(t_ag, ag, ag * 0.01);
        CU_ASSERT_DOUBLE_EQUAL(t_rs, rs, rs * 0.01);
        double f_ar = flow_ns(&cfg, COLL_OP_ALL_REDUCE, p, n);
        CU_ASSERT_DOUBLE_EQUAL(t_ar, f_ar, f_ar * 0.01);
        CU_ASSERT_DOUBLE_EQUAL(t_ag, flow_ns(&cfg, COLL_OP_ALL_GATHER, p, n), t_ag * 0.01);
        CU_ASSERT_DOUBLE_EQUAL(t_rs, flow_ns(&cfg, COLL_OP_REDUCE_SCATTER, p, n), t_rs * 0.01);
    }
    /* a 4x4 torus: the ring the lowering runs is the flow engine's, embedded (one hop a
     * step), so the two agree there too */
    const char *sets[] = {"system.chips=16", "system.topology=torus2d", "system.torus_x=4",
                          "system.torus_y=4", "system.links_per_chip=4", "chip.cores=1"};
    arch_config cfg;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tiny", sets, 6, &cfg, &e), NP_OK);
    uint64_t n = 16 * 65536;
    double t = isa_ns(&cfg, KGEN_COLL_ALL_REDUCE, 16, n);
    double f = flow_ns(&cfg, COLL_OP_ALL_REDUCE, 16, n);
    double ar = 2 * 15 * (a + 65536 * b) + 15 * 65536 * g;
    CU_ASSERT_DOUBLE_EQUAL(t, ar, ar * 0.01);
    CU_ASSERT_DOUBLE_EQUAL(t, f, f * 0.01);
}

TEST(on_islands_joined_by_a_slower_network_the_lowered_ring_matches_the_flow_engine)
{
    /* a100-cluster, 16 chips: two NVLink islands of 8 joined by a 25 GB/s, 2 us scale-out
     * network, so two of the ring's hops are slow. A send retires when its last byte has
     * left, so ranks behind the slow hops do not pay its latency every step; the flow engine's
     * ports behave the same. 1 MiB all-gather (no reductions): within 0.1%. */
    arch_config cfg;
    np_err e = {0};
    const char *sets[] = {"system.chips=16"};
    CU_ASSERT_EQUAL_FATAL(arch_resolve("a100-cluster", sets, 1, &cfg, &e), NP_OK);
    double t_isa = isa_ns(&cfg, KGEN_COLL_ALL_GATHER, 16, 1 << 20) * 1000;
    double t_flow = flow_ns(&cfg, COLL_OP_ALL_GATHER, 16, 1 << 20) * 1000;
    CU_ASSERT_DOUBLE_EQUAL(t_isa, t_flow, t_flow * 0.001);
    /* and well below a lockstep ring that pays the slow hop in full at each of the 15 steps:
     * 15 x (2 us + 65536 B / 25 GB/s) = 15 x 4.62 us = 69.3 us */
    CU_ASSERT(t_isa < 0.75 * 15 * (2e6 + 65536.0 / 25e9 * 1e12));
}

TEST(lowering_refuses_what_the_isa_or_the_system_cannot_hold)
{
    arch_config cfg = ring_of(4);
    kgen_coll_prog kp;
    np_err e = {0};
    kgen_coll one = {.op = KGEN_COLL_ALL_REDUCE, .ranks = 1, .bytes = 64};
    CU_ASSERT_EQUAL(kgen_coll_build(&cfg, &one, &kp, &e), NP_ERR_RANGE);
    CU_ASSERT_STRING_EQUAL(e.msg,
                           "all_reduce: 1 ranks for a system of 4 chips (2 .. system.chips)");
    kgen_coll five = {.op = KGEN_COLL_ALL_REDUCE, .ranks = 5, .bytes = 64};
    CU_ASSERT_EQUAL(kgen_coll_build(&cfg, &five, &kp, &e), NP_ERR_RANGE);
    kgen_coll odd = {.op = KGEN_COLL_ALL_GATHER, .ranks = 4, .bytes = 6};
    CU_ASSERT_EQUAL(kgen_coll_build(&cfg, &odd, &kp, &e), NP_ERR_RANGE);
    CU_ASSERT_STRING_EQUAL(e.msg, "all_gather: 6 bytes are not whole fp32 elements (at least one)");
    uint32_t twice[] = {0, 2, 2}, far[] = {0, 4};
    kgen_coll dup = {.op = KGEN_COLL_ALL_REDUCE, .chips = twice, .ranks = 3, .bytes = 64};
    CU_ASSERT_EQUAL(kgen_coll_build(&cfg, &dup, &kp, &e), NP_ERR_RANGE);
    CU_ASSERT_STRING_EQUAL(e.msg, "all_reduce: group rank 2 names chip 2 again");
    kgen_coll out = {.op = KGEN_COLL_ALL_REDUCE, .chips = far, .ranks = 2, .bytes = 64};
    CU_ASSERT_EQUAL(kgen_coll_build(&cfg, &out, &kp, &e), NP_ERR_RANGE);
    kgen_coll core = {.op = KGEN_COLL_ALL_REDUCE, .ranks = 2, .core = 1, .bytes = 64};
    CU_ASSERT_EQUAL(kgen_coll_build(&cfg, &core, &kp, &e), NP_ERR_RANGE); /* one core a chip */
    CU_ASSERT_PTR_NULL(kp.prog);
}

TEST(npusim_collective_isa_runs_the_lowered_programs)
{
    /* 4 chips, 64 KiB all-reduce: 2 x 3 x (200 + 16384 / 8) + 3 x 16384 / 16 = 16560 ns,
     * plus the 3 front-end cycles (li, li, loop) before each program's first send */
    harness_run r = harness_npusim("collective", "--set", "system.chips=4", "--set",
                                   "chip.cores=1", "--op", "all_reduce", "--isa", "--min-bytes",
                                   "64K", "--max-bytes", "64K", "--json", NULL);
    CU_ASSERT_EQUAL_FATAL(r.exit_status, 0);
    json_error_t je;
    json_t *j = json_loads(r.out, 0, &je);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(j, "engine")), "isa");
    json_t *row = json_array_get(json_object_get(j, "rows"), 0);
    CU_ASSERT_DOUBLE_EQUAL(json_real_value(json_object_get(row, "time_us")), 16.563, 1e-9);
    CU_ASSERT_TRUE(json_is_null(json_object_get(row, "busiest_link_util")));
    json_decref(j);
    harness_run_free(&r);
    /* a group of every other chip of 8, on core 0: each ring hop is two links, so
     * 2 x 3 x (2 x 200 + 16384 / 8) + 3 x 16384 / 16 = 17760 ns, + 3 cycles; on core 1 the
     * messages also cross each chip's mesh to and from the link ports */
    double t[2];
    for (int k = 0; k < 2; k++) {
        r = harness_npusim("collective", "--set", "system.chips=8", "--set", "chip.cores=2",
                           "--op", "all_reduce", "--isa", "--group", "1,3,5,7", "--core",
                           k ? "1" : "0", "-b", "64K", "-e", "64K", "--json", NULL);
        CU_ASSERT_EQUAL_FATAL(r.exit_status, 0);
        j = json_loads(r.out, 0, &je);
        CU_ASSERT_PTR_NOT_NULL_FATAL(j);
        t[k] = json_real_value(json_object_get(json_array_get(json_object_get(j, "rows"), 0),
                                               "time_us"));
        json_decref(j);
        harness_run_free(&r);
    }
    CU_ASSERT_DOUBLE_EQUAL(t[0], 17.763, 1e-9);
    CU_ASSERT_TRUE(t[1] > t[0]);
    r = harness_npusim("collective", "--op", "broadcast", "--isa", NULL);
    CU_ASSERT_EQUAL(r.exit_status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "--isa: broadcast is not lowered yet"));
    harness_run_free(&r);
}

TEST(npusim_collective_isa_traces_every_message_of_every_chip)
{
    /* 4 chips, one 64 KiB all-reduce: each chip sends and receives 2 (4 - 1) = 6 messages,
     * and the last slice ends with the run, 16.563 us (the test above). */
    char path[] = "/tmp/npusim_coll_trace_XXXXXX";
    close(mkstemp(path));
    harness_run r = harness_npusim("collective", "--set", "system.chips=4", "--set",
                                   "chip.cores=1", "--op", "all_reduce", "--isa", "--min-bytes",
                                   "64K", "--max-bytes", "64K", "--trace", path, NULL);
    CU_ASSERT_EQUAL_FATAL(r.exit_status, 0);
    harness_run_free(&r);
    char *text = harness_read_file(path, NULL);
    json_error_t je;
    json_t *j = text ? json_loads(text, 0, &je) : NULL;
    free(text);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    json_t *ev = json_object_get(j, "traceEvents");
    unsigned sends[4] = {0}, recvs[4] = {0};
    double end = 0;
    for (size_t i = 0; i < json_array_size(ev); i++) {
        json_t *e = json_array_get(ev, i);
        if (strcmp(json_string_value(json_object_get(e, "ph")), "X"))
            continue;
        json_int_t pid = json_integer_value(json_object_get(e, "pid"));
        CU_ASSERT_FATAL(pid >= 0 && pid < 4);
        const char *name = json_string_value(json_object_get(e, "name"));
        sends[pid] += !strcmp(name, "comm.send");
        recvs[pid] += !strcmp(name, "comm.recv");
        double t = json_number_value(json_object_get(e, "ts")) +
                   json_number_value(json_object_get(e, "dur"));
        end = t > end ? t : end;
    }
    for (int c = 0; c < 4; c++) {
        CU_ASSERT_EQUAL(sends[c], 6u);
        CU_ASSERT_EQUAL(recvs[c], 6u);
    }
    CU_ASSERT_DOUBLE_EQUAL(end, 16.563, 1e-9);
    json_decref(j);
    remove(path);
}
