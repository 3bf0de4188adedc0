/* test_kernels_update.c — kernels of the ops parallel strategies add to a step
 * (compiler/kc_update.c, kc_shard.c): grad_acc, copy_to and shard_slice, run functionally on
 * the core model (sim/krun.h) against the framework's reference executor on odd shapes (tiles
 * that do not divide them, one core and two), every dtype each takes, in place where the
 * framework updates in place; shard_slice's part chosen at run time by a value in HBM, against
 * the distributed executor's rule (part offset / length) and a fault for an offset past the
 * tensor. (fill and one_hot: tests/test_kernels_fill.c.) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "core.h"
#include "harness.h"
#include "kernel.h"
#include "krun.h"
#include "nn.h"
#include "rng.h"

static arch_config arch(void)
{
    arch_config cfg;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tiny", NULL, 0, &cfg, &e), NP_OK);
    return cfg;
}

/* Quarter-integers in [-8, 8] (exact in every float type, sums too), or integers in
 * [lo, lo + span). */
static nn_tensor *leaf(nn_graph *g, nn_dtype dt, int nd, const int64_t *ne, rng *r, int64_t lo,
                       int64_t span)
{
    nn_tensor *t = nn_input(g, "in", dt, nd, ne);
    CU_ASSERT_FATAL(t && nn_tensor_alloc(t));
    for (int64_t i = 0; i < nn_numel(t); i++)
        t->data[i] = span ? (float)(lo + (int64_t)rng_below(r, (uint64_t)span))
                          : (float)((int)rng_below(r, 65) - 32) / 4.0f;
    return t;
}

static nn_tensor *like(nn_graph *g, nn_dtype dt, int nd, const int64_t *ne)
{
    nn_tensor *t = nn_input(g, "got", dt, nd, ne);
    CU_ASSERT_FATAL(t && nn_tensor_alloc(t));
    return t;
}

/* Runs k on io against ref: every element equal. */
static void run_exact(const kc_kernel *k, krun_io *io, const nn_tensor *ref, const char *what)
{
    arch_config cfg = arch();
    np_err err = {0};
    krun_result r;
    np_status st = krun_kernel(&cfg, k, io, &(krun_opts){.functional = true}, &r, &err);
    if (st != NP_OK)
        fprintf(stderr, "%s: %s\n", what, err.msg);
    CU_ASSERT_EQUAL_FATAL(st, NP_OK);
    krun_diff d = krun_compare(io->out[0], ref, 0, 0);
    if (d.bad)
        fprintf(stderr, "%s: %lld of %lld differ (worst %g at %lld)\n", what, (long long)d.bad,
                (long long)d.n, d.max_abs, (long long)d.worst);
    CU_ASSERT_EQUAL(d.bad, 0);
    CU_ASSERT_EQUAL(r.report->hbm_read_bytes, r.kernel.hbm_read_bytes);
    CU_ASSERT_EQUAL(r.report->hbm_write_bytes, r.kernel.hbm_write_bytes);
    CU_ASSERT(r.kernel.hbm_bytes_min <= r.kernel.hbm_read_bytes + r.kernel.hbm_write_bytes);
    krun_result_free(&r);
}

/* The update on a copy of the buffer (the table row's reference): its node's values. */
static nn_tensor *reference(nn_graph *g, const kc_kernel *k, nn_tensor **in)
{
    np_err err = {0};
    nn_tensor *y = NULL;
    CU_ASSERT_EQUAL_FATAL(kc_kernel_find(k->op)->reference(g, k, in, &y, &err), NP_OK);
    CU_ASSERT_EQUAL_FATAL(nn_graph_compute(g, &err), NP_OK);
    return y;
}

TEST(grad_acc_and_copy_to_equal_the_frameworks_in_place_updates)
{
    rng r;
    rng_seed(&r, 20261208);
    /* buffer dtype, the other input's, shape (the other input flat: the framework needs the
     * counts to agree, not the shapes), cores */
    static const struct {
        nn_op op;
        nn_dtype bt, st;
        int nd;
        int64_t ne[3];
        bool flat;
        uint32_t cores;
    } cs[] = {
        {NN_OP_GRAD_ACC, NN_F32, NN_BF16, 2, {37, 129}, false, 2},
        {NN_OP_GRAD_ACC, NN_BF16, NN_BF16, 3, {3, 5, 77}, true, 1},
        {NN_OP_GRAD_ACC, NN_F32, NN_F32, 1, {4099}, false, 2},
        {NN_OP_GRAD_ACC, NN_F16, NN_F32, 2, {63, 65}, false, 1},
        {NN_OP_COPY_TO, NN_BF16, NN_F32, 2, {129, 7}, false, 2},
        {NN_OP_COPY_TO, NN_F32, NN_BF16, 3, {2, 9, 31}, true, 1},
        {NN_OP_COPY_TO, NN_I32, NN_I32, 1, {1000}, false, 1},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        nn_graph *g = nn_graph_new(1);
        int64_t n = 1;
        for (int d = 0; d < cs[i].nd; d++)
            n *= cs[i].ne[d];
        bool ints = cs[i].bt == NN_I32;
        nn_tensor *in[2] = {leaf(g, cs[i].bt, cs[i].nd, cs[i].ne, &r, -100, ints ? 200 : 0)};
        in[1] = cs[i].flat ? leaf(g, cs[i].st, 1, &n, &r, -100, ints ? 200 : 0)
                           : leaf(g, cs[i].st, cs[i].nd, cs[i].ne, &r, -100, ints ? 200 : 0);
        kc_kernel k = {.op = cs[i].op, .n_in = 2, .n_out = 1, .place = {0, 0, cs[i].cores}};
        for (int j = 0; j < k.n_in; j++)
            kc_tensor_of(&k.in[j], 0, in[j]);
        kc_tensor_of(&k.out[0], 0, in[0]);
        nn_tensor *want = reference(g, &k, in);
        krun_io io = {.in = {in[0], in[1]}, .out = {like(g, cs[i].bt, cs[i].nd, cs[i].ne)}};
        run_exact(&k, &io, want, nn_op_name(cs[i].op));
        nn_graph_free(g);
    }
}

TEST(an_update_in_place_leaves_what_the_reference_leaves_in_the_buffer)
{
    /* grad_acc with out = in[0] (one buffer, read and written): the buffer afterwards holds
     * acc + g; 1517 elements on 2 cores, the last tile overlapping the one before it */
    arch_config cfg = arch();
    np_err err = {0};
    int64_t n = 1517;
    uint64_t bytes = (uint64_t)n * 4;
    kc_prog *p;
    CU_ASSERT_EQUAL_FATAL(kc_prog_new(&cfg, &(kc_prog_opts){.cores = 2}, &p, &err), NP_OK);
    uint64_t at[2];
    float *v[2], *got = malloc(bytes);
    kc_kernel k = {.op = NN_OP_GRAD_ACC, .n_in = 2, .n_out = 1, .place = {0, 0, 2}};
    for (int i = 0; i < 2; i++) {
        CU_ASSERT_EQUAL_FATAL(kc_prog_bss(p, NULL, bytes, &at[i], &err), NP_OK);
        kc_tensor_dense(&k.in[i], at[i], NN_F32, 1, &n);
        v[i] = malloc(bytes);
        for (int64_t j = 0; j < n; j++)
            v[i][j] = (float)((j * 7 + i * 13) % 17) / 8.0f - 1;
    }
    k.out[0] = k.in[0];
    CU_ASSERT_EQUAL_FATAL(kc_compile(p, &k, NULL, &err), NP_OK);
    CU_ASSERT_EQUAL_FATAL(kc_prog_finish(p, &err), NP_OK);
    isa_program *prog = kc_prog_take(p);
    kc_prog_free(p);
    core_hbm_io in[2] = {{at[0], v[0], bytes, 0}, {at[1], v[1], bytes, 0}};
    core_hbm_io o = {at[0], got, bytes, 0};
    core_sim_opts so = {.functional = true, .inputs = in, .n_inputs = 2, .outputs = &o,
                        .n_outputs = 1};
    core_report *rep;
    CU_ASSERT_EQUAL_FATAL(core_sim_run_opts(&cfg, prog, &so, NULL, &rep, &err), NP_OK);
    bool same = true;
    for (int64_t j = 0; j < n; j++)
        same = same && got[j] == v[0][j] + v[1][j];
    CU_ASSERT(same);
    core_report_free(rep);
    isa_program_free(prog);
    free(got), free(v[0]), free(v[1]);
}

/* shard_slice of a (shape ne, along dim, in parts of len) with offset off into out (its
 * strides: packed, or pad elements after every innermost row). */
static void check_shard(int nd, const int64_t *ne, int dim, int64_t parts, int64_t off,
                        nn_dtype dt, int64_t pad, rng *r)
{
    nn_graph *g = nn_graph_new(1);
    nn_tensor *in[2] = {leaf(g, dt, nd, ne, r, -100, dt == NN_I8 ? 200 : 0)};
    in[1] = nn_input(g, "off", NN_I32, 1, (int64_t[]){1});
    CU_ASSERT_FATAL(nn_tensor_alloc(in[1]));
    in[1]->data[0] = (float)off;
    int64_t oe[KC_MAX_DIMS], len = ne[dim] / parts;
    memcpy(oe, ne, sizeof(int64_t) * (size_t)nd);
    oe[dim] = len;
    kc_kernel k = {.op = NN_OP_SHARD_SLICE, .n_in = 2, .n_out = 1, .n_attrs = 1,
                   .attrs = {KC_INT("dim", dim)}};
    kc_tensor_of(&k.in[0], 0, in[0]);
    kc_tensor_of(&k.in[1], 0, in[1]);
    nn_tensor *got = like(g, dt, nd, oe);
    kc_tensor_of(&k.out[0], 0, got);
    if (pad) { /* rows of out pad elements longer than their data */
        int64_t e = (int64_t)nn_dtype_size(dt), s = (oe[nd - 1] + pad) * e;
        for (int d = nd - 2; d >= 0; d--) {
            k.out[0].stride[d] = s;
            s *= oe[d];
        }
    }
    /* the distributed executor's part: offset / len (framework/dist.c), as framework slices */
    int64_t part = off / len;
    nn_tensor *want = nn_slice(g, in[0], dim, part * len, (part + 1) * len);
    np_err err = {0};
    CU_ASSERT_EQUAL_FATAL(nn_graph_compute(g, &err), NP_OK);
    krun_io io = {.in = {in[0], in[1]}, .out = {got}};
    run_exact(&k, &io, want, "shard_slice");
    /* the table row's reference agrees */
    nn_tensor *ref = NULL;
    CU_ASSERT_EQUAL_FATAL(kc_kernel_find(NN_OP_SHARD_SLICE)->reference(g, &k, in, &ref, &err),
                          NP_OK);
    CU_ASSERT_EQUAL_FATAL(nn_graph_compute(g, &err), NP_OK);
    CU_ASSERT_EQUAL(krun_compare(ref, want, 0, 0).bad, 0);
    nn_graph_free(g);
}

TEST(shard_slice_takes_the_part_its_offset_in_hbm_names)
{
    rng r;
    rng_seed(&r, 17);
    /* every part of a packed tensor along each dim (one indexed block a part) */
    int64_t a[3] = {6, 10, 7};
    for (int dim = 0; dim < 3; dim++) {
        int64_t parts = dim == 2 ? 7 : 2;
        for (int64_t p = 0; p < parts; p++)
            check_shard(3, a, dim, parts, p * (a[dim] / parts), NN_BF16, 0, &r);
    }
    /* an offset inside a part takes that part; a group of one, the whole tensor */
    check_shard(2, (int64_t[]){12, 9}, 0, 4, 7, NN_F32, 0, &r);
    check_shard(2, (int64_t[]){5, 13}, 1, 1, 0, NN_I8, 0, &r);
    /* an out with padded rows: the part's rows indexed one by one; rows past a gather's 65535
     * elements in pieces */
    check_shard(3, (int64_t[]){3, 8, 11}, 1, 4, 6, NN_BF16, 3, &r);
    check_shard(2, (int64_t[]){4, 70001}, 0, 2, 2, NN_I8, 0, &r);
    check_shard(2, (int64_t[]){4, 70001}, 0, 2, 3, NN_I8, 5, &r);
}

TEST(a_shard_offset_past_the_tensor_is_a_fault_of_the_run)
{
    arch_config cfg = arch();
    np_err err = {0};
    nn_graph *g = nn_graph_new(1);
    nn_tensor *a = nn_input(g, "a", NN_BF16, 2, (int64_t[]){8, 4});
    nn_tensor *off = nn_input(g, "off", NN_I32, 1, (int64_t[]){1});
    nn_tensor *got = nn_input(g, "got", NN_BF16, 2, (int64_t[]){2, 4});
    CU_ASSERT_FATAL(nn_tensor_alloc(a) && nn_tensor_alloc(off) && nn_tensor_alloc(got));
    off->data[0] = 8; /* parts 0..3 of 2 rows: 8 / 2 = part 4 */
    kc_kernel k = {.op = NN_OP_SHARD_SLICE, .n_in = 2, .n_out = 1};
    kc_tensor_of(&k.in[0], 0, a);
    kc_tensor_of(&k.in[1], 0, off);
    kc_tensor_of(&k.out[0], 0, got);
    krun_io io = {.in = {a, off}, .out = {got}};
    krun_result r;
    CU_ASSERT_EQUAL(krun_kernel(&cfg, &k, &io, &(krun_opts){.functional = true}, &r, &err),
                    NP_ERR_SIM_FAULT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "dma.gather"));
    /* a part length that does not divide the dim is an error at compile time */
    kc_tensor_dense(&k.out[0], 0, NN_BF16, 2, (int64_t[]){3, 4});
    CU_ASSERT_EQUAL(krun_kernel(&cfg, &k, NULL, &(krun_opts){0}, &r, &err), NP_ERR_INCONSISTENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "does not split"));
    nn_graph_free(g);
}

TEST(every_spec_of_these_kernels_builds_and_passes_the_seeded_check)
{
    /* `npusim kernel --op` texts: the row's keys build the kernel, and krun_kernel_check (what
     * `npusim kernel --functional` runs) finds every element within its bound */
    static const char *specs[] = {
        "grad_acc shape=37x129 dtype=fp32 sdtype=bf16", "grad_acc shape=1000 dtype=bf16",
        "copy_to shape=129x7 dtype=bf16 sdtype=fp32",
        "shard_slice shape=64x48 size=4", "shard_slice shape=5x6x70 size=3 dim=1 dtype=fp32",
        "conv2d n=2 h=9 w=8 c=4 k=6 r=3 s=3 pad=1 nchw=1 groups=2",
        "conv2d h=11 w=10 c=3 k=5 r=3 s=2 stride=2 pad=2 dilation=2 dtype=int8",
        "matmul m=37 n=45 k=29 ct=2",
        "matmul m=37 n=45 k=29 reuse=1 tm=8 tn=16 tk=16 ksplit=1 ct=1",
    };
    arch_config cfg = arch();
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        np_err err = {0};
        kc_spec s;
        CU_ASSERT_EQUAL_FATAL(kc_spec_parse(specs[i], &s, &err), NP_OK);
        kc_prog *p;
        CU_ASSERT_EQUAL_FATAL(kc_prog_new(&cfg, NULL, &p, &err), NP_OK);
        kc_kernel k;
        CU_ASSERT_EQUAL_FATAL(kc_spec_kernel(p, &s, &k, &err), NP_OK);
        kc_prog_free(p);
        krun_result r;
        krun_check c;
        np_status st = krun_kernel_check(&cfg, &k, 7, NULL, &r, &c, &err);
        if (st != NP_OK || c.bad)
            fprintf(stderr, "%s: %s, %lld of %lld bad\n", specs[i], st ? err.msg : "ran",
                    (long long)c.bad, (long long)c.n);
        CU_ASSERT_EQUAL(st, NP_OK);
        CU_ASSERT(c.n > 0 && c.bad == 0);
        if (st == NP_OK)
            krun_result_free(&r);
    }
}

TEST(shard_slice_describes_the_plans_node_from_its_parameters)
{
    /* the lowering makes a node's kernel with from_node and checks that the kernel's reference
     * is the node: its op, shape and parameters (group tag and size, dim) */
    nn_graph *g = nn_graph_new(1);
    nn_tensor *a = nn_input(g, "a", NN_BF16, 3, (int64_t[]){2, 12, 5});
    nn_tensor *off = nn_input(g, "off", NN_I32, 1, (int64_t[]){1});
    nn_tensor *node = nn_shard_slice(g, a, off, 2, 4, 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(node);
    const kc_kernel_def *d = kc_kernel_find(NN_OP_SHARD_SLICE);
    kc_kernel k = {.op = NN_OP_SHARD_SLICE, .n_in = 2, .n_out = 1};
    np_err err = {0};
    CU_ASSERT_EQUAL_FATAL(d->from_node(node, &k, &err), NP_OK);
    kc_tensor_of(&k.in[0], 0, a);
    kc_tensor_of(&k.in[1], 0, off);
    kc_tensor_of(&k.out[0], 0, node);
    nn_graph *h = nn_graph_new(1);
    nn_tensor *in[2] = {nn_input(h, "a", NN_BF16, 3, a->ne),
                        nn_input(h, "off", NN_I32, 1, off->ne)};
    nn_tensor *r = NULL;
    CU_ASSERT_EQUAL_FATAL(d->reference(h, &k, in, &r, &err), NP_OK);
    CU_ASSERT_EQUAL(r->op, NN_OP_SHARD_SLICE);
    CU_ASSERT_EQUAL(r->ne[1], 3);
    CU_ASSERT_EQUAL(memcmp(r->ip, node->ip, sizeof r->ip), 0);
    /* and it compiles for that node: a group of 4 takes parts of 3 of the 12 */
    arch_config cfg = arch();
    krun_result kr;
    CU_ASSERT_EQUAL(krun_kernel(&cfg, &k, NULL, &(krun_opts){0}, &kr, &err), NP_OK);
    krun_result_free(&kr);
    k.attrs[1] = KC_INT("size", 3); /* a group that does not match the shapes */
    CU_ASSERT_EQUAL(krun_kernel(&cfg, &k, NULL, &(krun_opts){0}, &kr, &err), NP_ERR_INCONSISTENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "a group of 3 ranks"));
    nn_graph_free(h);
    nn_graph_free(g);
}
