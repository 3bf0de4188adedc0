/* test_coll_isa.c — collectives lowered to ISA programs (compiler/kgen_coll.h) and run on the
 * core model, one program per chip, over the chip-to-chip network (hw-model/core.h):
 * values against the sums computed here, times against docs/collectives.md's alpha-beta
 * costs and against the flow-level collective engine (noc/coll.h) on the same network. */
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

/* tiny with p chips on a ring, one core per chip (so the flow engine's reduction rate, which
 * counts every core of a chip, equals one core's). */
static arch_config ring_of(uint32_t p)
{
    char chips[64];
    snprintf(chips, sizeof chips, "system.chips=%u", p);
    const char *sets[] = {chips, "chip.cores=1"};
    arch_config cfg;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tiny", sets, 2, &cfg, &e), NP_OK);
    return cfg;
}

static void free_progs(isa_program **pv, uint32_t p)
{
    for (uint32_t i = 0; i < p; i++)
        isa_program_free(pv[i]);
    free(pv);
}

/* Runs op on p chips, rank v's X[i] = 1000 v + i (fp32, exact sums), and checks every
 * rank's X afterwards against the op's meaning. */
static void check_values(kgen_coll_op op, uint32_t p, uint64_t elems)
{
    arch_config cfg = ring_of(p);
    kgen_coll kc = {op, p, elems * 4, ISA_DTYPE_FP32};
    isa_program **pv;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(kgen_coll_build(&cfg, &kc, &pv, NULL, &e), NP_OK);
    uint64_t x = isa_program_symbol(pv[0], "X")->addr;
    float *in = malloc(p * elems * sizeof *in), *out = malloc(p * elems * sizeof *out);
    core_hbm_io *ii = malloc(p * sizeof *ii), *oo = malloc(p * sizeof *oo);
    CU_ASSERT_FATAL(in && out && ii && oo);
    for (uint32_t v = 0; v < p; v++) {
        for (uint64_t i = 0; i < elems; i++)
            in[v * elems + i] = (float)(1000 * v + i);
        ii[v] = (core_hbm_io){x, in + v * elems, elems * 4, v};
        oo[v] = (core_hbm_io){x, out + v * elems, elems * 4, v};
    }
    core_sim_opts o = {.functional = true, .inputs = ii, .n_inputs = p, .outputs = oo,
                       .n_outputs = p};
    core_report *r;
    CU_ASSERT_EQUAL_FATAL(core_sim_run_chips(&cfg, (const isa_program *const *)pv, p, &o, NULL,
                                             &r, &e), NP_OK);
    /* segment j: elements [j q + min(j, rem), ...) of q + (j < rem) */
    uint64_t q = elems / p, rem = elems % p;
    for (uint32_t v = 0; v < p; v++)
        for (uint64_t i = 0; i < elems; i++) {
            uint64_t j = i < rem * (q + 1) ? i / (q + 1) : rem + (i - rem * (q + 1)) / (q ? q : 1);
            float sum = (float)(1000.0 * p * (p - 1) / 2 + (double)p * (double)i);
            float got = out[v * elems + i], want;
            if (op == KGEN_COLL_ALL_REDUCE)
                want = sum;
            else if (op == KGEN_COLL_ALL_GATHER)
                want = (float)(1000 * j + i); /* segment j comes from rank j */
            else
                want = j == v ? sum : got; /* only rank v's own segment is defined */
            if (got != want) {
                CU_FAIL("a rank's buffer differs from the expected values");
                fprintf(stderr, "%s p=%u elems=%llu rank %u element %llu: %g, expected %g\n",
                        kgen_coll_op_name(op), p, (unsigned long long)elems, v,
                        (unsigned long long)i, got, want);
                v = p;
                break;
            }
        }
    core_report_free(r);
    free_progs(pv, p);
    free(in), free(out), free(ii), free(oo);
}

TEST(lowered_collectives_compute_sums_and_gathers_on_every_rank)
{
    static const uint32_t ps[] = {2, 3, 4, 5};
    static const uint64_t ns[] = {1, 3, 7, 64};
    for (int op = 0; op < 3; op++)
        for (size_t a = 0; a < 4; a++)
            for (size_t b = 0; b < 4; b++)
                check_values((kgen_coll_op)op, ps[a], ns[b]);
}

/* Total time of op over p chips with n bytes on the core model, in ns (tiny: 1 GHz). */
static double isa_ns(kgen_coll_op op, uint32_t p, uint64_t n)
{
    arch_config cfg = ring_of(p);
    kgen_coll kc = {op, p, n, ISA_DTYPE_FP32};
    isa_program **pv;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(kgen_coll_build(&cfg, &kc, &pv, NULL, &e), NP_OK);
    core_report *r;
    CU_ASSERT_EQUAL_FATAL(core_sim_run_chips(&cfg, (const isa_program *const *)pv, p, NULL, NULL,
                                             &r, &e), NP_OK);
    double t = (double)r->total_ps / 1000.0;
    core_report_free(r);
    free_progs(pv, p);
    return t;
}

/* The same collective on the flow-level engine, in ns. */
static double flow_ns(coll_op op, uint32_t p, uint64_t n)
{
    arch_config cfg = ring_of(p);
    evq *q;
    coll_sys *s;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(evq_create(&q, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(coll_sys_create(&cfg, NULL, q, NULL, &s, &e), NP_OK);
    coll_desc d = {.op = op, .algo = COLL_ALGO_RING, .bytes = n};
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
        uint64_t n = 64 * 1024 * (uint64_t)p; /* n / p = 64 KiB per segment */
        double s = (double)n / p;
        double ar = 2 * (p - 1) * (a + s * b) + (p - 1) * s * g;
        double ag = (p - 1) * (a + s * b), rs = (p - 1) * (a + s * b + s * g);
        double t_ar = isa_ns(KGEN_COLL_ALL_REDUCE, p, n), t_ag = isa_ns(KGEN_COLL_ALL_GATHER, p, n),
               t_rs = isa_ns(KGEN_COLL_REDUCE_SCATTER, p, n);
        CU_ASSERT_DOUBLE_EQUAL(t_ar, ar, ar * 0.01);
        CU_ASSERT_DOUBLE_EQUAL(t_ag, ag, ag * 0.01);
        CU_ASSERT_DOUBLE_EQUAL(t_rs, rs, rs * 0.01);
        double f_ar = flow_ns(COLL_OP_ALL_REDUCE, p, n);
        CU_ASSERT_DOUBLE_EQUAL(t_ar, f_ar, f_ar * 0.01);
        CU_ASSERT_DOUBLE_EQUAL(t_ag, flow_ns(COLL_OP_ALL_GATHER, p, n), t_ag * 0.01);
        CU_ASSERT_DOUBLE_EQUAL(t_rs, flow_ns(COLL_OP_REDUCE_SCATTER, p, n), t_rs * 0.01);
    }
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
    kgen_coll kc = {KGEN_COLL_ALL_GATHER, 16, 1 << 20, ISA_DTYPE_FP32};
    isa_program **pv;
    CU_ASSERT_EQUAL_FATAL(kgen_coll_build(&cfg, &kc, &pv, NULL, &e), NP_OK);
    core_report *r;
    CU_ASSERT_EQUAL_FATAL(core_sim_run_chips(&cfg, (const isa_program *const *)pv, 16, NULL, NULL,
                                             &r, &e), NP_OK);
    double t_isa = (double)r->total_ps;
    core_report_free(r);
    free_progs(pv, 16);
    evq *q;
    coll_sys *s;
    CU_ASSERT_EQUAL_FATAL(evq_create(&q, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(coll_sys_create(&cfg, NULL, q, NULL, &s, &e), NP_OK);
    coll_desc d = {.op = COLL_OP_ALL_GATHER, .algo = COLL_ALGO_RING, .bytes = 1 << 20};
    coll_result res;
    CU_ASSERT_EQUAL_FATAL(coll_run(s, &d, &res, &e), NP_OK);
    double t_flow = (double)(res.t_end_ps - res.t_start_ps);
    coll_sys_free(s);
    evq_free(q);
    CU_ASSERT_DOUBLE_EQUAL(t_isa, t_flow, t_flow * 0.001);
    /* and well below a lockstep ring that pays the slow hop in full at each of the 15 steps:
     * 15 x (2 us + 65536 B / 25 GB/s) = 15 x 4.62 us = 69.3 us */
    CU_ASSERT(t_isa < 0.75 * 15 * (2e6 + 65536.0 / 25e9 * 1e12));
}

TEST(lowering_refuses_what_the_isa_or_the_system_cannot_hold)
{
    arch_config cfg = ring_of(4);
    isa_program **pv;
    np_err e = {0};
    kgen_coll one = {KGEN_COLL_ALL_REDUCE, 1, 64, ISA_DTYPE_FP32};
    CU_ASSERT_EQUAL(kgen_coll_build(&cfg, &one, &pv, NULL, &e), NP_ERR_RANGE);
    CU_ASSERT_STRING_EQUAL(e.msg, "all_reduce: 1 ranks for a system of 4 chips (2 .. system.chips)");
    kgen_coll five = {KGEN_COLL_ALL_REDUCE, 5, 64, ISA_DTYPE_FP32};
    CU_ASSERT_EQUAL(kgen_coll_build(&cfg, &five, &pv, NULL, &e), NP_ERR_RANGE);
    kgen_coll odd = {KGEN_COLL_ALL_GATHER, 4, 6, ISA_DTYPE_FP32};
    CU_ASSERT_EQUAL(kgen_coll_build(&cfg, &odd, &pv, NULL, &e), NP_ERR_RANGE);
    CU_ASSERT_STRING_EQUAL(e.msg, "all_gather: 6 bytes are not whole fp32 elements (at least one)");
    CU_ASSERT_PTR_NULL(pv);
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
