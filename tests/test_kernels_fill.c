/* test_kernels_fill.c — fill and one_hot (compiler/kc_fill.c) against the framework's
 * reference executor: exact, on shapes that are not multiples of tiles or lanes, each dtype,
 * on both of tiny's cores; one_hot's offset moves the labels, and labels it moves out of the
 * classes give zero rows. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "kernel.h"
#include "krun.h"

static arch_config tiny(void)
{
    arch_config cfg;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tiny", NULL, 0, &cfg, &e), NP_OK);
    return cfg;
}

/* krun_kernel_check of an --op spec on both cores: every element exact. */
static void spec_check(const char *spec)
{
    arch_config cfg = tiny();
    np_err err = {0};
    kc_spec s;
    CU_ASSERT_EQUAL_FATAL(kc_spec_parse(spec, &s, &err), NP_OK);
    kc_prog *p;
    CU_ASSERT_EQUAL_FATAL(kc_prog_new(&cfg, &(kc_prog_opts){.cores = 1}, &p, &err), NP_OK);
    kc_kernel k;
    np_status st = kc_spec_kernel(p, &s, &k, &err);
    kc_prog_free(p);
    CU_ASSERT_EQUAL_FATAL(st, NP_OK);
    k.place = (kc_place){0, 0, 2};
    krun_result r;
    krun_check c;
    st = krun_kernel_check(&cfg, &k, 3, NULL, &r, &c, &err);
    if (st != NP_OK || c.bad || c.max_abs != 0)
        fprintf(stderr, "%s: %s (%lld of %lld bad, largest difference %g)\n", spec,
                st ? err.msg : "", (long long)c.bad, (long long)c.n, c.max_abs);
    CU_ASSERT_EQUAL_FATAL(st, NP_OK);
    CU_ASSERT(c.n > 0);
    CU_ASSERT_EQUAL(c.bad, 0);
    CU_ASSERT_EQUAL(c.max_abs, 0);
    krun_result_free(&r);
}

TEST(fill_sets_every_element_of_any_shape_and_dtype_exactly)
{
    spec_check("fill shape=37x45 dtype=bf16 v=1.5");
    spec_check("fill shape=3x5x7 dtype=fp32 v=-2.25");
    spec_check("fill shape=1001 dtype=int32 v=7");
    spec_check("fill shape=2x3 dtype=fp16 v=0");
}

TEST(one_hot_gives_one_where_the_label_names_the_class)
{
    spec_check("one_hot shape=77 classes=9 dtype=bf16");
    spec_check("one_hot shape=5x19 classes=13");
    spec_check("one_hot shape=3x4 classes=1000 dtype=fp32");
}

/* Labels 0..29 with an offset of 12 and 10 classes: rows 12..21 are one-hot, the rest zero. */
TEST(one_hot_subtracts_its_offset_and_leaves_labels_outside_the_classes_zero)
{
    arch_config cfg = tiny();
    np_err e = {0};
    nn_graph *g = nn_graph_new(1);
    nn_tensor *lab = nn_input(g, "labels", NN_I32, 1, (int64_t[]){30});
    nn_tensor *off = nn_input(g, "offset", NN_I32, 0, NULL);
    nn_tensor *y = nn_one_hot(g, lab, off, 10, NN_BF16);
    CU_ASSERT_EQUAL_FATAL(nn_graph_status(g, &e), NP_OK);
    nn_tensor_alloc(lab);
    nn_tensor_alloc(off);
    for (int i = 0; i < 30; i++)
        lab->data[i] = (float)i;
    off->data[0] = 12;
    CU_ASSERT_EQUAL_FATAL(nn_graph_compute(g, &e), NP_OK);
    nn_tensor *got = nn_input(g, "got", NN_BF16, 2, (int64_t[]){30, 10});
    kc_kernel k = {.op = NN_OP_ONE_HOT, .n_in = 2, .n_out = 1, .place = {0, 0, 2}};
    kc_tensor_of(&k.in[0], 0, lab);
    kc_tensor_of(&k.in[1], 0, off);
    kc_tensor_of(&k.out[0], 0, y);
    krun_io io = {.in = {lab, off}, .out = {got}};
    krun_result r;
    CU_ASSERT_EQUAL_FATAL(krun_kernel(&cfg, &k, &io, &(krun_opts){.functional = true}, &r, &e),
                          NP_OK);
    krun_diff d = krun_compare(got, y, 0, 0);
    CU_ASSERT_EQUAL(d.bad, 0);
    int ones = 0;
    for (int i = 0; i < 300; i++)
        ones += got->data[i] == 1.0f;
    CU_ASSERT_EQUAL(ones, 10); /* the hand count: labels 12 .. 21 */
    CU_ASSERT_EQUAL(got->data[12 * 10 + 0], 1.0f);
    CU_ASSERT_EQUAL(got->data[21 * 10 + 9], 1.0f);
    krun_result_free(&r);
    nn_graph_free(g);
}
