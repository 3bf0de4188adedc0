/* test_coll_pipe.c — NCCL's kernel pipeline (system.coll_pipeline): the channels a size gets,
 * the protocols' slices, Simple's post per slice, and NVLS's chunks and heads, against
 * NCCL's own rules worked by hand and hand-computed schedules.
 *
 * References, independent of the code under test:
 *  - NCCL's constants and rules (src/include/device.h, collectives.h, comm.h, src/init.cc,
 *    src/enqueue.cc at 5067397c), applied by hand: a ring of nBytes keeps its channels while
 *    nBytes >= channels x threads x threshold (Simple 512 x 64 B, LL128 640 x 8 B, LL 512 x 8 B
 *    x ranks); Simple moves a channel's segment in loops of 2 MiB chunks (four 512 KiB steps
 *    of its 4 MiB buffer), each in two slices of at least 32 KiB; LL and LL128 one FIFO step
 *    (32 KiB, 576,000 bytes of data) a slice; NVLS chunks of 128 KiB shrink to 64, 32, 16 KiB
 *    below 64, 8, 2 x ranks x the chunk per channel;
 *  - the schedule of a ring of K slices a step on an idle path (each slice a message of T on
 *    the wire, completing max(path, step) = L after its last byte left), worked by hand: a
 *    Simple sender posts each slice before the next, so its port waits g = step - path after
 *    each last byte; a rank's next step needs its predecessor's slice, which the K - 1 slices
 *    before it on the port cover when (K - 1)(T + g) >= path; so the last of (p - 1) K slices
 *    completes at base + (p - 1) K T + ((p - 1) K - 1) g + L. LL128 posts nothing: the step
 *    hides behind the next slices, base + (p - 1) K T + L;
 *  - a switch that reduces moves n + n/p each way on every chip's link however it is cut.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "coll.h"
#include "harness.h"

typedef struct pfx {
    arch_config cfg;
    evq *q;
    coll_sys *s;
} pfx;

/* tiny's chips on one switch: 2 x 8 GB/s per chip, links 200 ns, the switch 300 ns, NCCL's
 * Simple and LL128 latencies, and the extra sets. */
static void pfx_open(pfx *f, uint32_t chips, const char *const *sets, size_t n_sets)
{
    np_err e = {0};
    memset(f, 0, sizeof *f);
    const char *all[32] = {"system.topology=switch", "system.coll_simple_base_ns=8400",
                           "system.coll_simple_step_ns=3400", "system.coll_ll128_base_ns=14000",
                           "system.coll_ll128_step_ns=1900"};
    size_t n = 5;
    char nc[64];
    snprintf(nc, sizeof nc, "system.chips=%u", chips);
    all[n++] = nc;
    for (size_t i = 0; i < n_sets && n < 32; i++)
        all[n++] = sets[i];
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tiny", all, n, &f->cfg, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(evq_create(&f->q, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(coll_sys_create(&f->cfg, NULL, f->q, NULL, &f->s, &e), NP_OK);
}

static void pfx_close(pfx *f)
{
    coll_sys_free(f->s);
    evq_free(f->q);
}

static coll_result prun(pfx *f, coll_desc d)
{
    coll_result r = {0};
    np_err e = {0};
    CU_ASSERT_EQUAL(coll_run(f->s, &d, &r, &e), NP_OK);
    if (e.status)
        fprintf(stderr, "\n    %s\n", e.msg);
    CU_ASSERT_EQUAL(net_verify(coll_sys_net(f->s), &e), NP_OK);
    return r;
}

static double dur_ps(const coll_result *r) { return (double)(r->t_end_ps - r->t_start_ps); }

TEST(channels_and_slices_follow_nccls_rules)
{
    /* channels: 24 at 1 MiB (>= 24 x 32 KiB), 16 at 512 KiB, one for the smallest */
    CU_ASSERT_EQUAL(coll_pipe_channels(COLL_PROTO_SIMPLE, 1 << 20, 8, 24), 24);
    CU_ASSERT_EQUAL(coll_pipe_channels(COLL_PROTO_SIMPLE, 512 << 10, 8, 24), 16);
    CU_ASSERT_EQUAL(coll_pipe_channels(COLL_PROTO_SIMPLE, 8, 8, 24), 1);
    CU_ASSERT_EQUAL(coll_pipe_channels(COLL_PROTO_LL, 512 << 10, 8, 24), 16); /* 8 x 8 x 512 */
    CU_ASSERT_EQUAL(coll_pipe_channels(COLL_PROTO_LL, 512 << 10, 16, 24), 8);
    CU_ASSERT_EQUAL(coll_pipe_channels(COLL_PROTO_LL128, 64 << 10, 8, 24), 12); /* 12 x 5120 */
    CU_ASSERT_EQUAL(coll_pipe_channels(COLL_PROTO_RAW, 8, 8, 24), 24);
    /* Simple: loops of 2 MiB, two slices each, a last chunk of up to 32 KiB in one */
    CU_ASSERT_EQUAL(coll_pipe_slices(COLL_PROTO_SIMPLE, 0), 1);
    CU_ASSERT_EQUAL(coll_pipe_slices(COLL_PROTO_SIMPLE, 32 << 10), 1);
    CU_ASSERT_EQUAL(coll_pipe_slices(COLL_PROTO_SIMPLE, (32 << 10) + 1), 2);
    CU_ASSERT_EQUAL(coll_pipe_slices(COLL_PROTO_SIMPLE, 2 << 20), 2);
    CU_ASSERT_EQUAL(coll_pipe_slices(COLL_PROTO_SIMPLE, (2 << 20) + 1), 3);
    CU_ASSERT_EQUAL(coll_pipe_slices(COLL_PROTO_SIMPLE, (2 << 20) + (64 << 10)), 4);
    CU_ASSERT_EQUAL(coll_pipe_slices(COLL_PROTO_SIMPLE, 5 << 20), 6);
    /* LL: 32 KiB of data a step; LL128: 576,000 bytes */
    CU_ASSERT_EQUAL(coll_pipe_slices(COLL_PROTO_LL, 32 << 10), 1);
    CU_ASSERT_EQUAL(coll_pipe_slices(COLL_PROTO_LL, (32 << 10) + 1), 2);
    CU_ASSERT_EQUAL(coll_pipe_slices(COLL_PROTO_LL, 1 << 20), 32);
    CU_ASSERT_EQUAL(coll_pipe_slices(COLL_PROTO_LL128, 576000), 1);
    CU_ASSERT_EQUAL(coll_pipe_slices(COLL_PROTO_LL128, 576001), 2);
    CU_ASSERT_EQUAL(coll_pipe_slices(COLL_PROTO_RAW, 1 << 30), 1);
    /* NVLS on 8 heads and 16 channels: 1 GiB keeps 128 KiB; 16 MiB (1 MiB a channel) takes
     * 32 KiB; 4 MiB (256 KiB a channel) 16 KiB; 128 MiB 64 KiB */
    CU_ASSERT_EQUAL(coll_pipe_nvls_chunk(1ULL << 30, 8, 16), 128 << 10);
    CU_ASSERT_EQUAL(coll_pipe_nvls_chunk(128 << 20, 8, 16), 64 << 10);
    CU_ASSERT_EQUAL(coll_pipe_nvls_chunk(16 << 20, 8, 16), 32 << 10);
    CU_ASSERT_EQUAL(coll_pipe_nvls_chunk(4 << 20, 8, 16), 16 << 10);
    /* the chunk of a ring's messages: 24 MiB over 4 ranks, 2 channels of one island: a
     * channel's part 3 MiB is 4 slices (2 MiB in two, 1 MiB in two), so the 6 MiB segment
     * moves in messages of 1.5 MiB; over islands, 2 lanes: their own 3 MiB in 4 */
    arch_config cfg;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tiny", NULL, 0, &cfg, &e), NP_OK);
    CU_ASSERT_EQUAL(coll_pipe_chunk(&cfg, COLL_PROTO_SIMPLE, 24 << 20, 4, 4, 0, 2), 3 << 19);
    CU_ASSERT_EQUAL(coll_pipe_chunk(&cfg, COLL_PROTO_SIMPLE, 24 << 20, 4, 4, 2, 0), 3 << 18);
    CU_ASSERT_EQUAL(coll_pipe_chunk(&cfg, COLL_PROTO_SIMPLE, 64 << 10, 4, 4, 0, 2), 0);
    CU_ASSERT_EQUAL(coll_pipe_chunk(&cfg, COLL_PROTO_RAW, 24 << 20, 4, 4, 0, 2), 0);
}

TEST(a_simple_ring_in_slices_pays_each_slices_post)
{
    /* 4 chips on the switch: 16 GB/s a chip (62.5 ps a byte), path 200 + 300 + 200 ns; an
     * all-gather of 24 MiB on 2 channels: K = 4 slices of 1.5 MiB a step (as worked above) */
    const char *sets[] = {"system.coll_pipeline=1", "system.coll_island_channels=2",
                          "system.coll_protocol=simple"};
    pfx f;
    pfx_open(&f, 4, sets, 3);
    const uint64_t n = 24 << 20;
    coll_result r = prun(&f, (coll_desc){.op = COLL_OP_ALL_GATHER, .algo = COLL_ALGO_RING,
                                         .bytes = n});
    const double T = (3 << 19) * 62.5, path = 700e3, step = 3400e3, g = step - path;
    const double base = 8400e3, slices = 3 * 4;
    CU_ASSERT_EQUAL(r.transfers, 4 * slices);
    double want = base + slices * T + (slices - 1) * g + step;
    CU_ASSERT_DOUBLE_EQUAL(dur_ps(&r), want, 1e-6 * want);
    pfx_close(&f);

    /* without the pipeline: one message a step, its step once: base + 3 (6 MiB / B + step) */
    const char *off[] = {"system.coll_island_channels=2", "system.coll_protocol=simple"};
    pfx_open(&f, 4, off, 2);
    r = prun(&f, (coll_desc){.op = COLL_OP_ALL_GATHER, .algo = COLL_ALGO_RING, .bytes = n});
    CU_ASSERT_EQUAL(r.transfers, 4 * 3);
    want = base + 3 * ((6 << 20) * 62.5 + step);
    CU_ASSERT_DOUBLE_EQUAL(dur_ps(&r), want, 1e-6 * want);
    pfx_close(&f);

    /* 24 channels at this size: a channel's part is 256 KiB, two slices, two messages a step
     * carrying every channel's; at 64 KiB the channels drop to 2 (64 KiB / 32 KiB), each
     * with 8 KiB: one slice, one message a step */
    const char *c24[] = {"system.coll_pipeline=1", "system.coll_island_channels=24",
                         "system.coll_protocol=simple"};
    pfx_open(&f, 4, c24, 3);
    r = prun(&f, (coll_desc){.op = COLL_OP_ALL_GATHER, .algo = COLL_ALGO_RING, .bytes = n});
    CU_ASSERT_EQUAL(r.transfers, 4 * 3 * 2);
    r = prun(&f, (coll_desc){.op = COLL_OP_ALL_GATHER, .algo = COLL_ALGO_RING,
                             .bytes = 64 << 10});
    CU_ASSERT_EQUAL(r.transfers, 4 * 3);
    pfx_close(&f);
}

TEST(ll128_slices_hide_the_step_behind_the_next)
{
    /* LL128, 2 channels, 24 MiB: a channel's 3 MiB is 6 steps of 576,000 bytes, so 1 MiB
     * messages, each 8739 lines of 128 wire bytes; no post: base + 18 T + step */
    const char *sets[] = {"system.coll_pipeline=1", "system.coll_island_channels=2",
                          "system.coll_protocol=ll128"};
    pfx f;
    pfx_open(&f, 4, sets, 3);
    coll_result r = prun(&f, (coll_desc){.op = COLL_OP_ALL_GATHER, .algo = COLL_ALGO_RING,
                                         .bytes = 24 << 20});
    CU_ASSERT_EQUAL(r.transfers, 4 * 3 * 6);
    const double T = 8739.0 * 128 * 62.5;
    double want = 14000e3 + 18 * T + 1900e3;
    CU_ASSERT_DOUBLE_EQUAL(dur_ps(&r), want, 1e-6 * want);
    pfx_close(&f);
}

TEST(nvls_runs_nccls_channels_and_chunks_one_slice_at_a_time)
{
    /* 4 chips on a switch that reduces, 2 NVLS channels, Simple: 4 MiB is 2 MiB a channel,
     * under 8 x 4 x 128 KiB... so 64 KiB chunks (not under 8 x 4 x 64 KiB), 8 slices a
     * channel of 4 x 64 KiB */
    const char *sets[] = {"system.switch_reduce=1", "system.coll_pipeline=1",
                          "system.coll_nvls_channels=2", "system.coll_protocol=simple"};
    pfx f;
    pfx_open(&f, 4, sets, 4);
    net *n = coll_sys_net(f.s);
    uint32_t sw = net_chip_switch(n, 0);
    const uint64_t bytes = 4 << 20;
    coll_result r = prun(&f, (coll_desc){.op = COLL_OP_ALL_REDUCE, .algo = COLL_ALGO_NVLS,
                                         .bytes = bytes});
    CU_ASSERT_EQUAL(r.algo, COLL_ALGO_NVLS);
    /* a slice: 4 x 4 contributions up, 4 sums down, 4 stores up, 4 x 4 multicast */
    CU_ASSERT_EQUAL(r.transfers, 16 * (16 + 4 + 4 + 16));
    CU_ASSERT_EQUAL(r.reductions, 16 * 16);
    for (uint32_t c = 0; c < 4; c++) { /* n + n/p each way on every chip's link */
        net_link_info up, down;
        net_link_get(n, net_link_between(n, c, sw), &up);
        net_link_get(n, net_link_between(n, sw, c), &down);
        CU_ASSERT_EQUAL(up.bytes, bytes + bytes / 4);
        CU_ASSERT_EQUAL(down.bytes, bytes + bytes / 4);
    }
    pfx_close(&f);
    /* each chip posts its last contribution to a slice and waits its step less the path
     * before its next: with a step of 100 us those waits dominate, 7 between the 8 slices of
     * a channel at least, and the last slice's chain (three more steps) at most */
    const char *slow[] = {"system.switch_reduce=1", "system.coll_pipeline=1",
                          "system.coll_nvls_channels=2", "system.coll_protocol=simple",
                          "system.coll_simple_step_ns=100000"};
    pfx_open(&f, 4, slow, 5);
    coll_result rs = prun(&f, (coll_desc){.op = COLL_OP_ALL_REDUCE, .algo = COLL_ALGO_NVLS,
                                          .bytes = bytes});
    double wire = 2.0 * (bytes + bytes / 4) * 62.5; /* both directions' bytes, serialized */
    CU_ASSERT(dur_ps(&rs) >= 8400e3 + 7 * (100000e3 - 1000e3));
    CU_ASSERT(dur_ps(&rs) <= 8400e3 + 7 * 100000e3 + 3 * 100000e3 + wire);
    pfx_close(&f);
    /* without NCCL's pipeline: 64 slices of 128 KiB... at most 64 of one channel, no waits */
    const char *off[] = {"system.switch_reduce=1", "system.coll_protocol=simple"};
    pfx_open(&f, 4, off, 2);
    coll_result r0 = prun(&f, (coll_desc){.op = COLL_OP_ALL_REDUCE, .algo = COLL_ALGO_NVLS,
                                          .bytes = bytes});
    CU_ASSERT_EQUAL(r0.transfers, 8 * (16 + 4 + 4 + 16)); /* 4 MiB / (4 x 128 KiB) slices */
    CU_ASSERT(dur_ps(&r0) < dur_ps(&r));
    pfx_close(&f);
}
