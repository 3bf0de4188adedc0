/* test_kernels_audit.c — issue 10, done-when 2, kernel by kernel and dtype by dtype: every op
 * with a kernel (compiler/kernels.def) is built from `npusim kernel --op` text at shapes that
 * are not multiples of tiny's 4 x 4 array, its 4 lanes or any tile, for every dtype it takes,
 * on tiny's two cores, and checked as `npusim kernel --functional` checks it
 * (krun_kernel_check: seeded inputs, the framework's reference executor, the bound the
 * kernel's row documents — exact for integer outputs). The families' own tests
 * (tests/test_kernels_*.c) go deeper (layouts, tiles forced, more cores); this table makes
 * sure no kernel and dtype is left without a check, and a kernel added without a row here
 * fails. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "harness.h"
#include "kernel.h"
#include "krun.h"

#define F3 {"bf16", "fp16", "fp32"}
#define F3I8 {"bf16", "fp16", "fp32", "int8"}
#define F3INT {"bf16", "fp16", "fp32", "int8", "i32"}

typedef struct audit_row {
    const char *spec;     /* the op and its keys, without the dtype */
    const char *key;      /* the key that takes the dtype */
    const char *dtypes[5];
} audit_row;

/* elementwise: integer types only where the op is exact on integers as the framework
 * computes it (moves, adds of small values, compare-and-select); the kernels refuse the others
 * on integers (test_kernels_vec.c) */
static const audit_row elementwise[] = {
    {"add shape=7x37 bshape=37", "dtype", F3INT},
    {"sub shape=5x3x13 bshape=5x1x13", "dtype", F3INT},
    {"mul shape=41x9", "dtype", F3},
    {"div shape=6x19 bshape=6x1", "dtype", F3},
    {"scale shape=3x5x7 s=0.75", "dtype", F3},
    {"relu shape=29x11 clamp=6", "dtype", F3INT},
    {"gelu shape=37x5", "dtype", F3},
    {"silu shape=9x23", "dtype", F3},
    {"tanh shape=101", "dtype", F3},
    {"exp shape=7x13", "dtype", F3},
    {"log shape=7x13", "dtype", F3},
    {"cast shape=5x27 to=fp32", "dtype", F3INT},
    {"cast shape=5x27 to=bf16", "dtype", F3},
    {"dropout shape=17x19 p=0.3 seed=5", "dtype", F3},
    {"causal_mask shape=2x13x13", "dtype", F3},
    {"causal_mask shape=2x13x13 fill=-100", "dtype", F3INT},
    {"relu_grad shape=19x7", "dtype", F3INT},
    {"gelu_grad shape=19x7", "dtype", F3},
    {"silu_grad shape=19x7", "dtype", F3},
    {"tanh_grad shape=19x7", "dtype", F3},
    {"fill shape=7x37 v=1.5", "dtype", F3},
    {"fill shape=7x37 v=-3", "dtype", F3INT},
    {"one_hot shape=5x3 classes=13", "dtype", F3INT},
    {"grad_acc shape=7x37", "dtype", F3},
    {"copy_to shape=7x37 sdtype=fp32", "dtype", F3},
};

static const audit_row reductions[] = {
    {"broadcast_to shape=1x13 to=7x13", "dtype", F3INT},
    {"sum_to shape=5x7x13 to=13", "dtype", F3},
    {"reduce_sum shape=5x7x13 axis=1", "dtype", F3},
    {"reduce_mean shape=5x7x13 axis=-1", "dtype", F3},
    {"reduce_max shape=5x7x13 axis=0", "dtype", F3INT},
    {"reduce_max_grad shape=5x7x13 axis=1", "dtype", F3INT},
};

/* the array's kernels: int8 multiplies into int32 */
static const audit_row gemm[] = {
    {"matmul m=37 n=45 k=29", "dtype", F3I8},
    {"matmul m=21 n=13 k=35 ta=1 tb=1 batch=3", "dtype", F3I8},
    {"conv2d n=2 h=9 w=11 c=5 k=6 r=3 s=3 pad=1", "dtype", F3I8},
    /* grouped (NCHW, stride 2) and depthwise */
    {"conv2d n=1 h=9 w=10 c=6 k=6 r=3 s=3 groups=3 stride=2 nchw=1", "dtype", F3I8},
    {"conv2d n=2 h=8 w=9 c=5 k=5 r=3 s=3 groups=5 pad=1", "dtype", F3I8},
};

/* the convolution gradients: plain with a stride, grouped, depthwise (the vector unit) */
static const audit_row conv_grads[] = {
    {"conv2d_grad_input n=2 h=9 w=11 c=5 k=6 r=3 s=3 pad=1 stride=2", "dtype", F3},
    {"conv2d_grad_input n=1 h=10 w=9 c=6 k=4 r=3 s=3 groups=2", "dtype", F3},
    {"conv2d_grad_input n=2 h=8 w=9 c=5 k=5 r=3 s=3 groups=5 pad=1", "dtype", F3},
    {"conv2d_grad_weight n=2 h=9 w=11 c=5 k=6 r=3 s=3 pad=1 stride=2", "dtype", F3},
    {"conv2d_grad_weight n=1 h=10 w=9 c=6 k=4 r=3 s=3 groups=2", "dtype", F3},
    {"conv2d_grad_weight n=2 h=8 w=9 c=5 k=5 r=3 s=3 groups=5 pad=1", "dtype", F3},
    {"maxpool2d shape=2x5x9x7 kernel=3 stride=2 pad=1", "dtype", F3},
    {"maxpool2d_grad shape=2x5x9x7 kernel=3 stride=2 pad=1", "dtype", F3},
    {"avgpool2d shape=2x5x9x7 kernel=3 stride=2 pad=1", "dtype", F3},
    {"avgpool2d_grad shape=2x5x9x7 kernel=3 stride=2 pad=1", "dtype", F3},
};

static const audit_row rows[] = {
    {"batchnorm shape=3x5x3x7", "dtype", F3},
    {"batchnorm_grad shape=3x5x3x7", "dtype", F3},
    {"batchnorm_infer shape=3x5x3x7", "dtype", F3},
    {"layernorm shape=7x37", "dtype", F3},
    {"layernorm_grad shape=7x37", "dtype", F3},
    {"rmsnorm shape=5x3x19 affine=1", "dtype", F3},
    {"rmsnorm_grad shape=5x3x19", "dtype", F3},
    {"rope shape=2x3x5x10", "dtype", F3},
    {"softmax shape=5x37", "dtype", F3},
    {"softmax shape=2x3x19x19 scale=0.25 causal=1", "dtype", F3},
    {"log_softmax shape=2x3x19", "dtype", F3},
    {"softmax_grad shape=5x37", "dtype", F3},
    {"softmax_grad shape=2x3x19x19 scale=0.25 causal=1", "dtype", F3},
    {"cross_entropy shape=9x13", "dtype", F3},
    {"cross_entropy shape=9x13 labels=i8", "dtype", F3},
    {"cross_entropy_grad shape=9x13", "dtype", F3},
    {"cross_entropy_grad shape=11x7 labels=i8", "dtype", F3},
};

/* forward and backward, causal and not: S and Dh no multiple of the array or the blocks */
static const audit_row attention[] = {
    {"attention shape=2x2x37x12", "dtype", F3},
    {"attention shape=1x3x29x5 causal=1", "dtype", F3},
    {"attention_lse shape=2x2x37x7 causal=1", "dtype", F3},
    {"attention_lse shape=1x2x21x6", "dtype", F3},
    {"attention_grad shape=2x2x37x12", "dtype", F3},
    {"attention_grad shape=1x2x29x5 causal=1", "dtype", F3},
};

static const audit_row movement[] = {
    {"permute shape=3x5x7 axes=210", "dtype", F3INT},
    {"permute shape=2x3x5x7 axes=0213", "dtype", F3INT},
    {"concat shape=3x5 n=3 axis=1", "dtype", F3INT},
    {"slice shape=5x7 axis=1 start=2 end=5", "dtype", F3INT},
    {"pad shape=5x7 axis=0 before=1 after=2", "dtype", F3INT},
    {"embedding shape=3x5 vocab=11 dim=7", "dtype", F3INT},
    {"embedding shape=4x9 vocab=7 dim=5 index=i8 shard=1", "dtype", F3},
    /* the scatter-add gradient: repeated indices accumulate */
    {"embedding_grad shape=13 vocab=7 dim=5", "dtype", F3},
    {"embedding_grad shape=3x9 vocab=5 dim=7 index=i8", "dtype", F3},
    {"embedding_grad shape=29 vocab=9 dim=5 shard=1", "dtype", F3},
    {"shard_slice shape=6x7 dim=0 size=2", "dtype", F3INT},
};

/* mixture of experts: top-k, the routing ops (indices drawn in [0, E)), dropless and with
 * capacity */
static const audit_row moe[] = {
    {"topk shape=7x13 k=3", "dtype", F3},
    {"topk shape=7x12 k=3 groups=4 keep=2 group_top=2", "dtype", F3},
    {"moe_dispatch tokens=13 k=2 d=7 experts=5 weighted=1", "dtype", F3},
    {"moe_dispatch tokens=13 k=3 d=9 experts=4 capacity=5", "dtype", F3},
    {"moe_combine tokens=13 k=2 d=7 experts=5 weighted=1 capacity=4", "dtype", F3},
    {"moe_combine_grad tokens=13 k=2 d=7 experts=5", "dtype", F3},
    /* the grouped matmul: rows from the indices (route 0), or with capacity */
    {"moe_gmm tokens=11 k=2 experts=3 kdim=7 fdim=9", "dtype", F3},
    {"moe_gmm tokens=11 k=2 experts=3 kdim=7 fdim=9 capacity=5 trans=1", "dtype", F3},
    {"moe_gmm_grad_w tokens=11 k=2 experts=3 kdim=7 fdim=9", "dtype", F3},
};

/* optimizer updates: fp32 state and masters, the gradient's type varies */
static const audit_row updates[] = {
    {"sgd_update shape=7x37 momentum=0.9 step=2", "gdtype", F3},
    {"sgd_update shape=41 weight_decay=0.01", "gdtype", F3},
    {"adam_update shape=7x37 step=3", "gdtype", F3},
    {"adamw_update shape=7x37 step=3 weight_decay=0.01", "gdtype", F3},
};

#define N_OF(a) (sizeof a / sizeof a[0])

static const struct {
    const audit_row *rows;
    size_t n;
} families[] = {
    {elementwise, N_OF(elementwise)}, {reductions, N_OF(reductions)}, {gemm, N_OF(gemm)},
    {conv_grads, N_OF(conv_grads)},   {rows, N_OF(rows)},             {attention, N_OF(attention)},
    {movement, N_OF(movement)},       {updates, N_OF(updates)},       {moe, N_OF(moe)},
};

/* Runs every row and dtype of a family; returns the checks run. */
static int run_family(const audit_row *t, size_t n)
{
    arch_config cfg;
    np_err err = {0};
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tiny", NULL, 0, &cfg, &err), NP_OK);
    int runs = 0;
    for (size_t i = 0; i < n; i++)
        for (int d = 0; d < 5 && t[i].dtypes[d]; d++) {
            char text[256];
            snprintf(text, sizeof text, "%s %s=%s", t[i].spec, t[i].key, t[i].dtypes[d]);
            kc_spec s;
            kc_kernel k;
            memset(&k, 0, sizeof k);
            kc_prog *p = NULL;
            np_status st = kc_spec_parse(text, &s, &err);
            if (st == NP_OK)
                st = kc_prog_new(&cfg, &(kc_prog_opts){.cores = 1}, &p, &err);
            if (st == NP_OK)
                st = kc_spec_kernel(p, &s, &k, &err);
            kc_prog_free(p);
            if (st != NP_OK) {
                fprintf(stderr, "%s: %s\n", text, err.msg);
                CU_FAIL("an audit spec does not build");
                continue;
            }
            k.place = (kc_place){0, 0, 2};
            krun_result r;
            krun_check c;
            st = krun_kernel_check(&cfg, &k, 11 + (uint64_t)(i * 5 + (size_t)d), NULL, &r, &c,
                                   &err);
            if (st != NP_OK || c.bad || getenv("KAUDIT_DEBUG"))
                fprintf(stderr, "%s: %s%lld of %lld bad (largest difference %g)\n", text,
                        st ? err.msg : "", (long long)c.bad, (long long)c.n, c.max_abs);
            CU_ASSERT_EQUAL(st, NP_OK);
            if (st != NP_OK)
                continue;
            CU_ASSERT(c.n > 0);
            CU_ASSERT_EQUAL(c.bad, 0);
            krun_result_free(&r);
            runs++;
        }
    return runs;
}

TEST(every_elementwise_kernel_equals_the_reference_on_odd_shapes_for_each_dtype)
{
    CU_ASSERT(run_family(elementwise, N_OF(elementwise)) > 60);
}

TEST(every_reduction_and_broadcast_equals_the_reference_on_odd_shapes_for_each_dtype)
{
    CU_ASSERT(run_family(reductions, N_OF(reductions)) > 15);
}

TEST(matmul_and_conv2d_grouped_and_depthwise_equal_the_reference_for_each_dtype)
{
    CU_ASSERT(run_family(gemm, N_OF(gemm)) == 20);
}

TEST(conv_gradients_grouped_and_depthwise_and_pooling_equal_the_reference_for_each_dtype)
{
    CU_ASSERT(run_family(conv_grads, N_OF(conv_grads)) == 30);
}

TEST(norms_their_gradients_softmax_rope_and_losses_equal_the_reference_for_each_dtype)
{
    CU_ASSERT(run_family(rows, N_OF(rows)) == 51); /* 17 rows, 3 float types each */
}

TEST(attention_forward_and_backward_causal_and_not_equal_the_reference_for_each_dtype)
{
    CU_ASSERT(run_family(attention, N_OF(attention)) == 18);
}

TEST(data_movement_embeddings_and_scatter_add_equal_the_reference_for_each_dtype)
{
    CU_ASSERT(run_family(movement, N_OF(movement)) > 40);
}

TEST(moe_routing_kernels_equal_the_reference_for_each_dtype)
{
    CU_ASSERT(run_family(moe, N_OF(moe)) == 3 * (int)N_OF(moe));
}

TEST(optimizer_updates_equal_the_reference_for_each_gradient_dtype)
{
    CU_ASSERT(run_family(updates, N_OF(updates)) == 12);
}

/* Every op with a kernel has a row above, for every float type at least. */
TEST(every_kernel_of_the_table_has_an_audit_row)
{
    for (int op = 0; op < NN_OP_COUNT; op++) {
        if (!kc_kernel_find((nn_op)op))
            continue;
        const char *name = nn_op_name((nn_op)op);
        size_t len = strlen(name);
        bool found = false;
        for (size_t f = 0; f < N_OF(families) && !found; f++)
            for (size_t i = 0; i < families[f].n && !found; i++) {
                const audit_row *r = &families[f].rows[i];
                found = !strncmp(r->spec, name, len) && r->spec[len] == ' ' && r->dtypes[2];
            }
        if (!found)
            fprintf(stderr, "no audit row for the kernel of '%s'\n", name);
        CU_ASSERT(found);
    }
}
