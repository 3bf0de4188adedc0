/* test_l2.c — the shared on-chip level between the cores and the HBM (chip.l2_bytes > 0):
 * the L2 cache's tags (hw-model/l2.h), the DMA copies that go through it (core_l2.c), the
 * global buffer, the figures, the compiler's use of it, and the config's checks.
 *
 * References, each independent of the code under test:
 *   - times by hand on tiny (1 GHz, so a cycle is a ns; HBM 16 B/cycle after 100 ns): a hit of
 *     B bytes takes l2_latency + B / min(L2 share, ports), a miss the longer of that and
 *     hbm_latency + B / 16, copies sharing a stream get equal shares;
 *   - hit, miss and write-back counts by hand for small copies, and on random traces a
 *     set-associative LRU cache written here from its definition (a recency list per set);
 *   - a GEMM's HBM bytes against the analytical minimum (each operand once) when the L2 holds
 *     all operands;
 *   - with the L2 off (the default) every figure of the other tests is unchanged: they run
 *     without it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "core.h"
#include "harness.h"
#include "isa_asm.h"
#include "kc_gemm.h"
#include "kernel.h"
#include "krun.h"
#include "l2.h"
#include "rng.h"

static arch_config tiny_with(const char *const *sets, size_t n)
{
    arch_config cfg;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tiny", sets, n, &cfg, &e), NP_OK);
    return cfg;
}

static core_report *run(const arch_config *cfg, const char *src)
{
    isa_target t;
    isa_target_from_arch(cfg, &t);
    isa_asm_opts o = {.target = &t};
    isa_program *p = NULL;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(isa_asm(src, strlen(src), "test.s", &o, &p, &e), NP_OK);
    core_report *r = NULL;
    np_status st = core_sim_run(cfg, p, NULL, &r, &e);
    if (st != NP_OK)
        fprintf(stderr, "\n%s\n", e.msg);
    CU_ASSERT_EQUAL_FATAL(st, NP_OK);
    isa_program_free(p);
    return r;
}

static const core_unit_report *unit(const core_report *r, const char *name)
{
    for (uint32_t i = 0; i < r->n_units; i++)
        if (!strcmp(r->units[i].name, name))
            return &r->units[i];
    CU_FAIL_FATAL("no such unit");
    return NULL;
}

/* Runs `spec` on cores 0 .. cores-1 of cfg (functional: its values checked against the
 * reference). */
static void run_kernel(const arch_config *cfg, const char *spec, uint32_t cores, bool functional,
                       krun_result *r)
{
    np_err e = {0};
    kc_spec sp;
    CU_ASSERT_EQUAL_FATAL(kc_spec_parse(spec, &sp, &e), NP_OK);
    kc_prog *scratch;
    CU_ASSERT_EQUAL_FATAL(kc_prog_new(cfg, &(kc_prog_opts){.cores = 1}, &scratch, &e), NP_OK);
    kc_kernel k;
    CU_ASSERT_EQUAL_FATAL(kc_spec_kernel(scratch, &sp, &k, &e), NP_OK);
    kc_prog_free(scratch);
    k.place.n_cores = cores;
    krun_opts o = {.prog_cores = cores};
    np_status st;
    if (functional) {
        krun_check c = {0};
        st = krun_kernel_check(cfg, &k, 7, &o, r, &c, &e);
        CU_ASSERT_EQUAL(c.bad, 0);
    } else {
        st = krun_kernel(cfg, &k, NULL, &o, r, &e);
    }
    if (st != NP_OK)
        fprintf(stderr, "\n%s\n", e.msg);
    CU_ASSERT_EQUAL_FATAL(st, NP_OK);
}

/* tiny with a 64 KiB L2 of 128-byte lines of four 32-byte sectors, 4 ways (128 sets), 32 B per
 * cycle, hit latency 20 ns, plus `more`. */
#define L2_TINY "chip.l2_bytes=64KiB", "chip.l2_ways=4", "chip.l2_gb_per_s=32", \
                "chip.l2_latency_ns=20"

static arch_config tiny_l2(const char *more)
{
    const char *sets[] = {L2_TINY, more};
    return tiny_with(sets, more ? 5 : 4);
}

/* ---- copies through the cache, by hand ------------------------------------------------------ */

TEST(a_second_core_reading_what_the_first_brought_hits_at_the_l2s_latency_and_bandwidth)
{
    /* Core 0 reads 4096 bytes (128 sectors, all missing): its L2 stream takes 20 + 4096 / 32 =
     * 148 and its fill from the HBM 100 + 4096 / 16 = 356; it ends with the later, 356. It
     * then meets core 1 at a barrier (core 1 goes on at 364, docs/hw-model.md), which reads
     * the same 4096 bytes: all hits, 148 cycles on the L2 alone, nothing from the HBM. */
    arch_config cfg = tiny_l2(NULL);
    core_report *r = run(&cfg, ".core 0\ndma.copy spad[0], hbm[0], bf16, 2048\nbarrier 1\n"
                               ".core 1\nbarrier 1\ndma.copy spad[0], hbm[0], bf16, 2048\n");
    CU_ASSERT_EQUAL(unit(r, "core0.dma")->busy_cycles, 356u);
    CU_ASSERT_EQUAL(unit(r, "core0.dma")->stall_cycles, 0u);
    CU_ASSERT_EQUAL(unit(r, "core1.dma")->busy_cycles, 148u);
    CU_ASSERT_EQUAL(unit(r, "core1.dma")->stall_cycles, 0u);
    CU_ASSERT_EQUAL(r->total_cycles, 364u + 148u);
    CU_ASSERT_TRUE(r->l2.present);
    CU_ASSERT_EQUAL(r->l2.read_misses, 128u);
    CU_ASSERT_EQUAL(r->l2.read_hits, 128u);
    CU_ASSERT_EQUAL(r->l2.pending_hits, 0u);
    CU_ASSERT_EQUAL(r->l2.fill_bytes, 4096u);
    CU_ASSERT_EQUAL(r->l2.read_bytes, 8192u); /* what the cores asked */
    CU_ASSERT_EQUAL(r->hbm_read_bytes, 4096u); /* what reached the HBM */
    CU_ASSERT_EQUAL(r->hbm_write_bytes, 0u);
    CU_ASSERT_DOUBLE_EQUAL(r->l2.hit_pct, 50.0, 1e-9);
    core_report_free(r);
}

TEST(cores_reading_the_same_lines_at_once_share_one_fill_and_wait_for_it)
{
    /* Both cores start the same 4096-byte read at cycle 0. Core 0 misses every sector and
     * fills them; core 1 finds them valid but still being filled: it waits for core 0's fill
     * (356), while the two L2 streams share 32 B/cycle (20 + 2 x 4096 / 32 = 276). Both end at
     * 356; the HBM is read once. Without the L2 the two share the HBM: 100 + 8192 / 16 = 612. */
    const char *src = ".core 0\ndma.copy spad[0], hbm[0], bf16, 2048\n"
                      ".core 1\ndma.copy spad[0], hbm[0], bf16, 2048\n";
    arch_config cfg = tiny_l2(NULL);
    core_report *r = run(&cfg, src);
    CU_ASSERT_EQUAL(r->total_cycles, 356u);
    CU_ASSERT_EQUAL(unit(r, "core1.dma")->busy_cycles, 148u); /* alone: a hit */
    CU_ASSERT_EQUAL(unit(r, "core1.dma")->stall_cycles, 356u - 148u);
    CU_ASSERT_EQUAL(r->l2.pending_hits, 128u);
    CU_ASSERT_EQUAL(r->hbm_read_bytes, 4096u);
    core_report_free(r);
    arch_config off = tiny_with(NULL, 0);
    r = run(&off, src);
    CU_ASSERT_EQUAL(r->total_cycles, 612u);
    CU_ASSERT_EQUAL(r->hbm_read_bytes, 8192u);
    CU_ASSERT_FALSE(r->l2.present);
    core_report_free(r);
}

TEST(writes_allocate_dirty_lines_that_are_written_back_when_evicted)
{
    /* An L2 of 4 KiB (32 lines, 4 ways, 8 sets). A 4096-byte store fills it with dirty
     * lines without reading the HBM: 20 + 4096 / 32 = 148 cycles. A read of the next 4 KiB
     * maps to the same sets and evicts every one of them: 4096 bytes written back (a stream
     * of their own), 4096 read. Only the first 64 bytes of another store then: 2 sectors. */
    const char *sets[] = {"chip.l2_bytes=4KiB", "chip.l2_ways=4", "chip.l2_gb_per_s=32",
                          "chip.l2_latency_ns=20"};
    arch_config cfg = tiny_with(sets, 4);
    core_report *r = run(&cfg, ".core 0\ndma.copy hbm[0], spad[0], bf16, 2048\n");
    CU_ASSERT_EQUAL(r->total_cycles, 148u);
    CU_ASSERT_EQUAL(r->hbm_write_bytes, 0u);
    CU_ASSERT_EQUAL(r->l2.write_misses, 128u);
    CU_ASSERT_EQUAL(r->l2.dirty_bytes, 4096u);
    CU_ASSERT_EQUAL(r->l2.write_bytes, 4096u);
    core_report_free(r);
    r = run(&cfg, ".core 0\ndma.copy hbm[0], spad[0], bf16, 2048\n"
                  "dma.copy spad[0x1000], hbm[0x1000], bf16, 2048\n"
                  "dma.copy hbm[0x2000], spad[0], bf16, 32\n");
    CU_ASSERT_EQUAL(r->l2.writeback_bytes, 4096u);
    CU_ASSERT_EQUAL(r->hbm_write_bytes, 4096u);
    CU_ASSERT_EQUAL(r->hbm_read_bytes, 4096u);
    CU_ASSERT_EQUAL(r->l2.read_misses, 128u);
    CU_ASSERT_EQUAL(r->l2.write_misses, 130u);
    CU_ASSERT_EQUAL(r->l2.dirty_bytes, 64u);
    core_report_free(r);
}

TEST(a_working_set_larger_than_the_cache_thrashes_under_lru_and_a_smaller_one_stays)
{
    /* A 4 KiB, 4-way L2: reading 8 KiB twice in order misses every time (each set sees 8
     * lines cycled through 4 ways: LRU always evicts the line needed next); 4 KiB twice hits
     * the second time. */
    const char *sets[] = {"chip.l2_bytes=4KiB", "chip.l2_ways=4", "chip.l2_gb_per_s=32",
                          "chip.l2_latency_ns=20"};
    arch_config cfg = tiny_with(sets, 4);
    core_report *r = run(&cfg, ".core 0\ndma.copy spad[0], hbm[0], bf16, 4096\n"
                               "dma.copy spad[0], hbm[0], bf16, 4096\n");
    CU_ASSERT_EQUAL(r->l2.read_misses, 512u);
    CU_ASSERT_EQUAL(r->l2.read_hits, 0u);
    CU_ASSERT_EQUAL(r->hbm_read_bytes, 16384u);
    core_report_free(r);
    r = run(&cfg, ".core 0\ndma.copy spad[0], hbm[0], bf16, 2048\n"
                  "dma.copy spad[0], hbm[0], bf16, 2048\n");
    CU_ASSERT_EQUAL(r->l2.read_misses, 128u);
    CU_ASSERT_EQUAL(r->l2.read_hits, 128u);
    CU_ASSERT_EQUAL(r->hbm_read_bytes, 4096u);
    /* the second copy alone: a hit, 148 cycles after the first's 356 (and one to issue) */
    CU_ASSERT_EQUAL(r->total_cycles, 356u + 148u);
    core_report_free(r);
}

TEST(a_row_touching_part_of_a_line_moves_only_its_sectors)
{
    /* 16 rows of 16 bytes, 128 bytes apart, at byte 40: each touches one sector (bytes 40..55
     * of a line: sector 1) of its own line: 16 sectors, 512 bytes through the L2 and 512 from
     * the HBM, where the copy asked for 256 */
    arch_config cfg = tiny_l2(NULL);
    core_report *r = run(&cfg, ".core 0\ndma.copy spad[0], hbm[40], bf16, 8, 16, src_s1=128\n");
    CU_ASSERT_EQUAL(r->l2.read_misses, 16u);
    CU_ASSERT_EQUAL(r->l2.moved_bytes, 512u);
    CU_ASSERT_EQUAL(r->l2.read_bytes, 256u);
    CU_ASSERT_EQUAL(r->hbm_read_bytes, 512u);
    core_report_free(r);
}

TEST(slices_cap_a_copy_at_the_share_of_the_slices_its_lines_touch)
{
    /* 4 slices (slice = line mod 4): a hit on 8 lines 512 bytes apart sits on slice 0 only and
     * streams at 32 / 4 = 8 B/cycle: 20 + 8 x 128 / 8 = 148; the same bytes packed touch all
     * four: 20 + 1024 / 32 = 52. Each copy is read twice, the second time all hits. */
    arch_config cfg = tiny_l2("chip.l2_slices=4");
    core_report *r = run(&cfg, ".core 0\ndma.copy spad[0], hbm[0], bf16, 64, 8, src_s1=512\n"
                               "dma.copy spad[0], hbm[0], bf16, 64, 8, src_s1=512\n");
    CU_ASSERT_EQUAL(unit(r, "core0.dma")->busy_cycles, (100u + 1024 / 16) + (20u + 1024 / 8));
    core_report_free(r);
    r = run(&cfg, ".core 0\ndma.copy spad[0], hbm[0], bf16, 512\n"
                  "dma.copy spad[0], hbm[0], bf16, 512\n");
    CU_ASSERT_EQUAL(unit(r, "core0.dma")->busy_cycles, (100u + 1024 / 16) + (20u + 1024 / 32));
    core_report_free(r);
}

TEST(gathers_tables_bypass_the_cache_and_go_to_the_hbm_as_without_it)
{
    /* where a gathered row lies is data: the table side reads the HBM as without an L2 (8 rows
     * of 64 bytes from an aligned table: 100 + 512 / 16 = 132 cycles, docs/hw-model.md) */
    arch_config cfg = tiny_l2(NULL), off = tiny_with(NULL, 0);
    const char *src = ".core 0\ndma.gather spad[0], hbm[0], spad[0x1000], fp32, 16, 8, 16\n";
    core_report *r = run(&cfg, src), *o = run(&off, src);
    CU_ASSERT_EQUAL(r->total_cycles, o->total_cycles);
    CU_ASSERT_EQUAL(r->total_cycles, 132u);
    CU_ASSERT_EQUAL(r->hbm_read_bytes, o->hbm_read_bytes);
    CU_ASSERT_EQUAL(r->l2.read_bytes, 0u);
    core_report_free(r);
    core_report_free(o);
}

TEST(with_the_controllers_on_the_mesh_the_slices_sit_with_them_and_hits_cross_the_mesh)
{
    /* tiny, one controller (router 0) and its L2 slice beside it (32 GB/s: 2 flits per NoC
     * cycle, a port of 1). P = 2, L = 1: h = (H + 1)(P + L) + L; the slice's own latency is
     * 20 - (2 (P + 2L) - 1) = 13 cycles. A miss's data reaches the core in the slice's access
     * while the slice reads the HBM beside it, which keeps the core waiting as a read over the
     * mesh would: 100 + 2H (P + L) + 4096 / 16.
     *   core 0 (H = 0, h = 4): slice 2 x 4 + 13 + 256 - 1 = 276, fill 100 + 256 = 356 -> 356
     *   core 1 (H = 1, h = 7): slice 14 + 13 + 255 = 282, fill 106 + 256 = 362 -> 362, and
     *   the same bytes again hit: 282, ending at 362 + 282 = 644 */
    arch_config cfg = tiny_l2("chip.hbm_controllers=1");
    core_report *r = run(&cfg, ".core 0\ndma.copy spad[0], hbm[0], bf16, 2048\n");
    CU_ASSERT_EQUAL(r->total_cycles, 356u);
    CU_ASSERT_EQUAL(r->hbm_read_bytes, 4096u);
    CU_ASSERT_EQUAL(r->l2.fill_bytes, 4096u);
    CU_ASSERT_EQUAL(r->hbm_ctrls[0].read_bytes, 4096u); /* the fill, at the controller */
    core_report_free(r);
    r = run(&cfg, ".core 1\ndma.copy spad[0], hbm[0], bf16, 2048\n"
                  "dma.copy spad[0], hbm[0], bf16, 2048\n");
    CU_ASSERT_EQUAL(r->total_cycles, 644u);
    CU_ASSERT_EQUAL(unit(r, "core1.dma")->busy_cycles, 644u);
    CU_ASSERT_EQUAL(r->l2.read_hits, 128u);
    CU_ASSERT_EQUAL(r->hbm_read_bytes, 4096u);
    core_report_free(r);
}

/* ---- the global buffer ------------------------------------------------------------------ */

TEST(a_global_buffer_is_addresses_after_the_hbm_at_the_l2s_bandwidth_and_keeps_values)
{
    /* tiny with a 64 KiB global buffer: hbm[0x4000000] (64 MiB, tiny's HBM) is its first
     * byte. 4096 bytes staged from the HBM into it (the HBM side 100 + 4096 / 16 = 356, the
     * buffer's 20 + 4096 / 32 = 148: 356), read from it into the scratchpad (148) and stored
     * back to the HBM (356): 860 cycles, and the values come back as they went. */
    const char *sets[] = {"chip.l2_bytes=64KiB", "chip.l2_mode=buffer", "chip.l2_gb_per_s=32",
                          "chip.l2_latency_ns=20"};
    arch_config cfg = tiny_with(sets, 4);
    const char *src = ".core 0\ndma.copy hbm[0x4000000], hbm[0], fp32, 1024\n"
                      "dma.copy spad[0], hbm[0x4000000], fp32, 1024\n"
                      "dma.copy hbm[0x1000], spad[0], fp32, 1024\n";
    isa_target t;
    isa_target_from_arch(&cfg, &t);
    isa_asm_opts ao = {.target = &t};
    isa_program *p = NULL;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(isa_asm(src, strlen(src), "test.s", &ao, &p, &e), NP_OK);
    static float in_v[1024], out_v[1024];
    for (int i = 0; i < 1024; i++)
        in_v[i] = (float)i * 0.25f - 7.0f;
    core_hbm_io in[1] = {{0, in_v, sizeof in_v, 0}}, o[1] = {{0x1000, out_v, sizeof out_v, 0}};
    core_sim_opts opts = {.functional = true, .inputs = in, .n_inputs = 1, .outputs = o,
                          .n_outputs = 1};
    core_report *r = NULL;
    CU_ASSERT_EQUAL_FATAL(core_sim_run_opts(&cfg, p, &opts, NULL, &r, &e), NP_OK);
    CU_ASSERT_EQUAL(memcmp(in_v, out_v, sizeof in_v), 0);
    CU_ASSERT_EQUAL(r->total_cycles, 356u + 148u + 356u);
    CU_ASSERT_TRUE(r->l2.buffer);
    CU_ASSERT_EQUAL(r->l2.read_bytes, 4096u);
    CU_ASSERT_EQUAL(r->l2.write_bytes, 4096u);
    CU_ASSERT_EQUAL(r->hbm_read_bytes, 4096u);
    CU_ASSERT_EQUAL(r->hbm_write_bytes, 4096u);
    core_report_free(r);
    /* past the buffer's end: a fault naming the space's size (64 MiB + 64 KiB) */
    const char *bad = ".core 0\ndma.copy spad[0], hbm[0x400f000], fp32, 2048\n";
    isa_program_free(p);
    CU_ASSERT_EQUAL_FATAL(isa_asm(bad, strlen(bad), "bad.s", &ao, &p, &e), NP_OK);
    CU_ASSERT_EQUAL(core_sim_run(&cfg, p, NULL, &r, &e), NP_ERR_SIM_FAULT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "outside its space (67174400 bytes)"));
    isa_program_free(p);
}

TEST(a_gemm_stages_what_several_tiles_read_in_the_global_buffer_and_reads_the_hbm_once)
{
    /* 256 x 256 x 256 bf16 on tiny's 2 cores in tiles of 128 x 8 x 16 (2 tile rows, 32
     * columns): A is read by 32 tiles, B by 2, both fit a 1 MiB buffer: each is copied into
     * it once (128 KiB each, half by each core) and read there by every tile; the HBM sees A
     * and B once and C written. Without the buffer the HBM serves every tile's reads. */
    const char *sets[] = {"chip.l2_bytes=1MiB", "chip.l2_mode=buffer", "chip.l2_gb_per_s=64",
                          "chip.l2_latency_ns=20"};
    arch_config cfg = tiny_with(sets, 4), off = tiny_with(NULL, 0);
    const char *spec = "matmul m=256 n=256 k=256 dtype=bf16 tm=128 tn=8 tk=16";
    krun_result r, o;
    run_kernel(&cfg, spec, 2, true, &r);
    run_kernel(&off, spec, 2, false, &o);
    uint64_t op = 256u * 256 * 2;
    CU_ASSERT_EQUAL(r.report->hbm_read_bytes, 2 * op);
    CU_ASSERT_EQUAL(r.report->hbm_write_bytes, op);
    CU_ASSERT_EQUAL(r.report->l2.write_bytes, 2 * op); /* the staging */
    /* the tiles' reads, from the buffer now: what they read from the HBM without it */
    CU_ASSERT_EQUAL(r.report->l2.read_bytes, o.report->hbm_read_bytes);
    /* and the compiler counts what it emitted as the run does */
    CU_ASSERT_EQUAL(r.kernel.hbm_read_bytes, r.report->hbm_read_bytes);
    CU_ASSERT_EQUAL(r.kernel.hbm_write_bytes, r.report->hbm_write_bytes);
    krun_result_free(&r);
    krun_result_free(&o);
}

/* ---- the tags against a reference LRU cache ---------------------------------------------- */

/* A set-associative, sectored, write-back write-allocate LRU cache from its definition: each
 * set a list of lines, most recent first. */
typedef struct ref_line {
    uint64_t line;
    uint32_t valid, dirty;
} ref_line;

typedef struct ref_cache {
    uint64_t line_bytes, sector_bytes, sets, ways;
    ref_line *v; /* sets x ways, most recent first; n[set] used */
    uint32_t *n;
} ref_cache;

/* One access of sectors `mask` of line ln; adds to hits, misses, write-back bytes. */
static void ref_access(ref_cache *c, uint64_t ln, uint32_t mask, bool write, uint64_t *hits,
                       uint64_t *misses, uint64_t *wb)
{
    uint64_t set = ln % c->sets;
    ref_line *s = &c->v[set * c->ways];
    uint32_t k = 0;
    while (k < c->n[set] && s[k].line != ln)
        k++;
    ref_line cur;
    if (k < c->n[set]) {
        cur = s[k];
        memmove(&s[1], &s[0], k * sizeof *s); /* to the front */
        uint32_t have = write ? mask : cur.valid & mask;
        *hits += (uint64_t)__builtin_popcount(have);
        *misses += (uint64_t)__builtin_popcount(mask & ~have);
    } else {
        if (c->n[set] == c->ways) { /* the least recent leaves */
            *wb += (uint64_t)__builtin_popcount(s[c->ways - 1].dirty) * c->sector_bytes;
            c->n[set]--;
        }
        memmove(&s[1], &s[0], c->n[set] * sizeof *s);
        c->n[set]++;
        cur = (ref_line){ln, 0, 0};
        *misses += (uint64_t)__builtin_popcount(mask);
    }
    cur.valid |= mask;
    if (write)
        cur.dirty |= mask;
    s[0] = cur;
}

static void no_done(void *ctx, uint64_t arg) { (void)ctx, (void)arg; }

TEST(the_tags_agree_with_a_reference_lru_cache_on_random_traces)
{
    static const struct { const char *ways, *line, *sector, *bytes; } geo[] = {
        {"chip.l2_ways=1", "chip.l2_line_bytes=64", "chip.l2_sector_bytes=64",
         "chip.l2_bytes=4KiB"},
        {"chip.l2_ways=2", "chip.l2_line_bytes=128", "chip.l2_sector_bytes=32",
         "chip.l2_bytes=4KiB"},
        {"chip.l2_ways=4", "chip.l2_line_bytes=128", "chip.l2_sector_bytes=32",
         "chip.l2_bytes=8KiB"},
        {"chip.l2_ways=8", "chip.l2_line_bytes=256", "chip.l2_sector_bytes=8",
         "chip.l2_bytes=16KiB"},
        {"chip.l2_ways=3", "chip.l2_line_bytes=128", "chip.l2_sector_bytes=16",
         "chip.l2_bytes=6KiB"},
    };
    for (size_t g = 0; g < sizeof geo / sizeof geo[0]; g++) {
        const char *sets[] = {geo[g].ways, geo[g].line, geo[g].sector, geo[g].bytes};
        arch_config cfg = tiny_with(sets, 4);
        l2 *c = NULL;
        np_err e = {0};
        CU_ASSERT_EQUAL_FATAL(l2_create(&cfg, 0, &c, &e), NP_OK);
        ref_cache ref = {(uint64_t)cfg.chip.l2_line_bytes, (uint64_t)cfg.chip.l2_sector_bytes, 0,
                         (uint64_t)cfg.chip.l2_ways, NULL, NULL};
        ref.sets = cfg.chip.l2_bytes / ref.line_bytes / ref.ways;
        ref.v = calloc(ref.sets * ref.ways, sizeof *ref.v);
        ref.n = calloc(ref.sets, sizeof *ref.n);
        rng rg;
        rng_seed(&rg, 24 + g);
        bool wrap = g % 2; /* the LRU counter wraps (at 2^32 accesses) half-way */
        uint64_t span = 4 * cfg.chip.l2_bytes; /* addresses over 4 x the capacity */
        for (int it = 0; it < 4000; it++) {
            if (wrap && it == 100) /* stamps of a few hundred accesses before the wrap */
                l2_set_clock(c, UINT32_MAX - 2000);
            /* a copy of 1 .. 4 rows of 1 .. 300 bytes, 0 .. 1000 bytes apart, read or write */
            uint64_t rows = 1 + rng_next(&rg) % 4, rb = 1 + rng_next(&rg) % 300;
            uint64_t stride = rb + rng_next(&rg) % 1000, addr = rng_next(&rg) % span;
            bool write = rng_next(&rg) % 3 == 0;
            core_range r = {.space = ISA_SPACE_HBM, .addr = addr, .bytes = rows * rb,
                            .extent = (rows - 1) * stride + rb, .write = write, .planes = 1,
                            .rows = rows, .row_stride = stride, .row_bytes = rb};
            uint64_t hits = 0, misses = 0, wb = 0;
            /* rows without a gap between them are one run (a packed copy streams its lines
             * once) */
            uint64_t n_runs = stride == rb ? 1 : rows, run_bytes = stride == rb ? rows * rb : rb;
            for (uint64_t i = 0; i < n_runs; i++) {
                uint64_t a = addr + i * stride, end = a + run_bytes;
                for (uint64_t ln = a / ref.line_bytes; ln <= (end - 1) / ref.line_bytes; ln++) {
                    uint64_t lo = ln * ref.line_bytes > a ? ln * ref.line_bytes : a;
                    uint64_t hi = (ln + 1) * ref.line_bytes < end ? (ln + 1) * ref.line_bytes : end;
                    uint32_t mask = 0;
                    for (uint64_t b = lo; b < hi; b++)
                        mask |= 1u << ((b % ref.line_bytes) / ref.sector_bytes);
                    ref_access(&ref, ln, mask, write, &hits, &misses, &wb);
                }
            }
            l2_walk w;
            CU_ASSERT_EQUAL_FATAL(l2_walk_copy(c, &r, 1, no_done, NULL, 0, &w, &e), NP_OK);
            if (w.fill != L2_NO_FILL)
                l2_fill_done(c, w.fill);
            CU_ASSERT_EQUAL(w.hit_sectors, hits);
            CU_ASSERT_EQUAL(w.miss_sectors, misses);
            CU_ASSERT_EQUAL(w.wb_bytes, wb);
            CU_ASSERT_EQUAL(w.fill_bytes, write ? 0 : misses * ref.sector_bytes);
            if (w.hit_sectors != hits || w.miss_sectors != misses || w.wb_bytes != wb) {
                fprintf(stderr, "\ngeometry %zu, access %d (%llu rows of %llu every %llu at "
                        "%llu, %s): hits %llu/%llu misses %llu/%llu wb %llu/%llu\n", g, it,
                        (unsigned long long)rows, (unsigned long long)rb,
                        (unsigned long long)stride, (unsigned long long)addr,
                        write ? "write" : "read", (unsigned long long)w.hit_sectors,
                        (unsigned long long)hits, (unsigned long long)w.miss_sectors,
                        (unsigned long long)misses, (unsigned long long)w.wb_bytes,
                        (unsigned long long)wb);
                break;
            }
        }
        /* and the contents line by line */
        uint64_t dirty = 0;
        for (uint64_t s = 0; s < ref.sets; s++)
            for (uint32_t k = 0; k < ref.n[s]; k++) {
                const ref_line *x = &ref.v[s * ref.ways + k];
                uint32_t v, d;
                CU_ASSERT_TRUE(l2_probe(c, x->line * ref.line_bytes, &v, &d));
                CU_ASSERT_EQUAL(v, x->valid);
                CU_ASSERT_EQUAL(d, x->dirty);
                dirty += (uint64_t)__builtin_popcount(x->dirty) * ref.sector_bytes;
            }
        CU_ASSERT_EQUAL(l2_dirty_bytes(c), dirty);
        free(ref.v);
        free(ref.n);
        l2_free(c);
    }
}

static uint64_t done_order[8];
static int n_done;

static void log_done(void *ctx, uint64_t arg)
{
    (void)ctx;
    if (n_done < 8)
        done_order[n_done] = arg;
    n_done++;
}

TEST(a_fill_completes_its_owner_then_its_waiters_once_each)
{
    /* Walk 1 misses line 0 (its fill); walk 2 reads it twice while it is pending (one wait);
     * walk 3 misses line 1 (a fill of its own) and reads line 0 (a wait for walk 1's).
     * Completing walk 1's fill calls 1, then 2, then 3, once each; walk 3's then calls 3. */
    arch_config cfg = tiny_l2(NULL);
    l2 *c = NULL;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(l2_create(&cfg, 0, &c, &e), NP_OK);
    n_done = 0;
    core_range l0 = {.space = ISA_SPACE_HBM, .addr = 0, .bytes = 128, .extent = 128,
                     .planes = 1, .rows = 1, .row_stride = 128, .row_bytes = 128};
    core_range l01 = l0, twice[2] = {l0, l0};
    l01.bytes = l01.extent = l01.row_bytes = l01.row_stride = 256;
    l2_walk w1, w2, w3;
    CU_ASSERT_EQUAL_FATAL(l2_walk_copy(c, &l0, 1, log_done, NULL, 1, &w1, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(l2_walk_copy(c, twice, 2, log_done, NULL, 2, &w2, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(l2_walk_copy(c, &l01, 1, log_done, NULL, 3, &w3, &e), NP_OK);
    CU_ASSERT_NOT_EQUAL(w1.fill, L2_NO_FILL);
    CU_ASSERT_EQUAL(w1.fill_bytes, 128u);
    CU_ASSERT_EQUAL(w2.fill, L2_NO_FILL);
    CU_ASSERT_EQUAL(w2.waits, 1u);
    CU_ASSERT_EQUAL(w2.hit_sectors, 8u);
    CU_ASSERT_EQUAL(w3.waits, 1u);
    CU_ASSERT_EQUAL(w3.fill_bytes, 128u);
    CU_ASSERT_EQUAL(n_done, 0);
    l2_fill_done(c, w1.fill);
    CU_ASSERT_EQUAL_FATAL(n_done, 3);
    CU_ASSERT_EQUAL(done_order[0], 1u);
    CU_ASSERT_EQUAL(done_order[1], 2u);
    CU_ASSERT_EQUAL(done_order[2], 3u);
    /* a fill of two parts completes on the second */
    l2_fill_parts(c, w3.fill, 2);
    l2_fill_done(c, w3.fill);
    CU_ASSERT_EQUAL(n_done, 3);
    l2_fill_done(c, w3.fill);
    CU_ASSERT_EQUAL(n_done, 4);
    CU_ASSERT_EQUAL(done_order[3], 3u);
    /* line 0 is no longer pending: a read hits without waiting */
    l2_walk w4;
    CU_ASSERT_EQUAL_FATAL(l2_walk_copy(c, &l0, 1, log_done, NULL, 4, &w4, &e), NP_OK);
    CU_ASSERT_EQUAL(w4.waits, 0u);
    CU_ASSERT_EQUAL(w4.hit_sectors, 4u);
    l2_free(c);
}

/* ---- kernels through the cache ------------------------------------------------------------ */

TEST(a_gemm_whose_operands_fit_the_l2_reads_each_once_from_the_hbm_and_computes_the_same_values)
{
    /* 256 x 256 x 256 bf16 on tiny's 2 cores, tiles of 128 x 8 x 16 given (the cost model
     * picks others with an L2): each A row band is read by 32 tiles, each B column band by
     * 2. Without an L2 the HBM serves every tile's reads; with a 1 MiB L2 it reads A and B
     * once (128 KiB each) and the 128 KiB of C stay dirty in it: what reaches the HBM, or
     * will, is the analytical minimum. The values are the reference's either way (the L2 is
     * timing only). */
    const char *spec = "matmul m=256 n=256 k=256 dtype=bf16 tm=128 tn=8 tk=16";
    arch_config off = tiny_with(NULL, 0);
    const char *sets[] = {"chip.l2_bytes=1MiB", "chip.l2_gb_per_s=64", "chip.l2_latency_ns=20"};
    arch_config on = tiny_with(sets, 3);
    krun_result a, b;
    run_kernel(&off, spec, 2, true, &a);
    run_kernel(&on, spec, 2, true, &b);
    uint64_t ab = 2u * 256 * 256 * 2, c = 256u * 256 * 2;
    CU_ASSERT_EQUAL(b.kernel.hbm_bytes_min, ab + c);
    CU_ASSERT(a.report->hbm_read_bytes > 2 * ab); /* each operand several times */
    CU_ASSERT_EQUAL(b.report->hbm_read_bytes, ab);
    CU_ASSERT_EQUAL(b.report->hbm_write_bytes + b.report->l2.dirty_bytes, c);
    /* the cores asked the L2 for what they asked the HBM for without it */
    CU_ASSERT_EQUAL(b.report->l2.read_bytes, a.report->hbm_read_bytes);
    CU_ASSERT_EQUAL(b.report->l2.write_bytes, a.report->hbm_write_bytes);
    CU_ASSERT(b.report->total_cycles <= a.report->total_cycles);
    krun_result_free(&a);
    krun_result_free(&b);
    /* the tiles the cost model picks with the L2: the minimum still */
    run_kernel(&on, "matmul m=256 n=256 k=256 dtype=bf16", 2, false, &b);
    CU_ASSERT_EQUAL(b.report->hbm_read_bytes, ab);
    CU_ASSERT_EQUAL(b.report->hbm_write_bytes + b.report->l2.dirty_bytes, c);
    krun_result_free(&b);
}

TEST(with_an_l2_the_split_keeps_the_bands_cores_share_in_it_and_reads_each_operand_once)
{
    /* bf16 2048 x 9216 x 2304 in tiles of 128 x 96 (16 tile rows, 96 columns) on 108 cores:
     * every split with at most 16 tiles a core is as good without an L2, and the fewest blocks
     * first is 1 x 96 (a column each). By hand, a band is 128 x 2304 x 2 = 589,824 bytes of A,
     * 2304 x 96 x 2 = 442,368 of B, a C tile 24,576; the L2 40 MiB = 41,943,040:
     *   1 x 96: a step reads 1 A band, 96 B bands, 96 C tiles = 45,416,448 > the L2: a core's
     *           B band (reused by its next row, a step later) is gone: B is read 16 times:
     *           9,437,184 + 16 x 42,467,328 + 37,748,736 = 726,663,168 bytes;
     *   16 x 6: a step is 16 A + 6 B bands + 96 C tiles = 14,450,688, which fits: A reused by
     *           the next tile; B used by one row only: A + B + C = 89,653,248, the minimum. */
    const char *sets[] = {"chip.l2_bytes=40MiB"};
    arch_config off, on;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(arch_resolve("a100-cluster", NULL, 0, &off, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(arch_resolve("a100-cluster", sets, 1, &on, &e), NP_OK);
    kmm m = {.M = 2048, .N = 9216, .K = 2304, .TM = 128, .TN = 96, .TK = 192, .e = 2, .ce = 2,
             .ak = KMM_A_ROWS};
    CU_ASSERT_DOUBLE_EQUAL(kmm_l2_hbm(&m, &on, 1, 96), 726663168.0, 0.5);
    CU_ASSERT_DOUBLE_EQUAL(kmm_l2_hbm(&m, &on, 16, 6), 89653248.0, 0.5);
    uint64_t pb, pr, pc;
    kmm_split(&m, &off, 108, &pb, &pr, &pc);
    CU_ASSERT_EQUAL(pr, 1u);
    CU_ASSERT_EQUAL(pc, 96u);
    kmm_split(&m, &on, 108, &pb, &pr, &pc);
    CU_ASSERT_EQUAL(pr, 16u);
    CU_ASSERT_EQUAL(pc, 6u);
}

/* ---- the config -------------------------------------------------------------------------- */

TEST(bad_l2_geometries_are_refused_at_the_key_that_breaks_them)
{
    static const struct {
        const char *text;
        int line, col;
        const char *msg;
    } cases[] = {
        {"chip:\n  l2_bytes: 1000\n", 2, 3,
         "chip.l2_line_bytes = 128 bytes does not divide chip.l2_bytes = 1000 bytes: the L2 "
         "holds whole lines"},
        {"chip:\n  l2_bytes: 1 MiB\n  l2_sector_bytes: 48\n", 3, 3,
         "chip.l2_sector_bytes = 48 bytes must divide chip.l2_line_bytes = 128 bytes into at "
         "most 32 sectors"},
        {"chip:\n  l2_bytes: 1 MiB\n  l2_line_bytes: 128\n  l2_sector_bytes: 2\n", 4, 3,
         "chip.l2_sector_bytes = 2 bytes must divide chip.l2_line_bytes = 128 bytes into at "
         "most 32 sectors"},
        {"chip:\n  l2_bytes: 1 KiB\n  l2_ways: 16\n", 3, 3,
         "chip.l2_ways = 16 ways are more than the 8 lines of chip.l2_bytes = 1 KiB "
         "(chip.l2_line_bytes = 128 bytes): every set has l2_ways lines"},
        {"chip:\n  l2_ways: 3\n  l2_bytes: 1 MiB\n", 2, 3,
         "chip.l2_ways = 3 ways do not divide the 8192 lines of chip.l2_bytes = 1 MiB "
         "(chip.l2_line_bytes = 128 bytes): every set has l2_ways lines"},
        {"chip:\n  l2_bytes: 1 KiB\n  l2_ways: 1\n  l2_slices: 9\n", 4, 3,
         "chip.l2_slices = 9 slices are more than the 8 lines of the L2: every slice holds at "
         "least one line"},
    };
    /* each at the line and column of the key it blames (the first of its rule's keys that the
     * file wrote) */
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        arch_config c;
        np_err e = {0};
        CU_ASSERT_EQUAL_FATAL(arch_load_string(cases[i].text, strlen(cases[i].text), "l2.yaml",
                                               &c, &e), NP_OK);
        CU_ASSERT_EQUAL(arch_validate(&c, &e), NP_ERR_INCONSISTENT);
        CU_ASSERT_EQUAL(e.line, cases[i].line);
        CU_ASSERT_EQUAL(e.col, cases[i].col);
        CU_ASSERT_STRING_EQUAL(e.msg, cases[i].msg);
        if (e.line != cases[i].line || e.col != cases[i].col || strcmp(e.msg, cases[i].msg))
            fprintf(stderr, "\ncase %zu: %d:%d %s\n", i, e.line, e.col, e.msg);
    }
    /* without an L2 (l2_bytes 0, the default) its other keys are not looked at */
    static const char off[] = "chip:\n  l2_ways: 3\n  l2_sector_bytes: 7\n";
    arch_config c;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(arch_load_string(off, strlen(off), "off.yaml", &c, &e), NP_OK);
    CU_ASSERT_EQUAL(arch_validate(&c, &e), NP_OK);
}
