/* kernel_check.c — docs/compiler.md's example: a kernel described through the ABI, run on the
 * core model in functional mode, and checked against the framework's reference executor.
 * Built and run by ctest (compiler_example.kernel_check), so it cannot go stale.
 *
 * y = relu(a x b + bias), bf16, on 2 cores of the tiny preset; exits 0 when every element of
 * the kernel's output is within the bf16 roundings the fusion saves of the reference. */
#include <stdio.h>

#include "arch.h"
#include "kernel.h"
#include "krun.h"
#include "nn.h"

int main(void)
{
    np_err err = {0};
    arch_config cfg;
    if (arch_resolve("tiny", NULL, 0, &cfg, &err) != NP_OK)
        goto fail;

    /* 1. the op in the framework, with seeded values, and its reference result */
    nn_graph *g = nn_graph_new(1);
    nn_tensor *a = nn_input(g, "a", NN_BF16, 2, (int64_t[]){37, 45});
    nn_tensor *b = nn_input(g, "b", NN_BF16, 2, (int64_t[]){45, 29});
    nn_tensor *bias = nn_input(g, "bias", NN_BF16, 1, (int64_t[]){29});
    nn_tensor *mm = nn_matmul(g, a, b);
    nn_tensor *y = nn_relu(g, nn_add(g, mm, bias));
    if (!y || !nn_tensor_randn(a, 1, 1.0) || !nn_tensor_randn(b, 2, 1.0) ||
        !nn_tensor_randn(bias, 3, 1.0) || nn_graph_compute(g, &err) != NP_OK)
        goto fail_graph;
    nn_tensor *got = nn_input(g, "got", NN_BF16, 2, (int64_t[]){37, 29}); /* receives it */

    /* 2. the kernel: the op, its operands (shapes, dtypes, strides; krun places them in
     *    HBM), the fused epilogue and the placement */
    kc_kernel k = {.op = NN_OP_MATMUL, .n_in = 2, .n_out = 1, .n_epi = 2,
                   .place = {.chip = 0, .core0 = 0, .n_cores = 2}};
    kc_tensor_of(&k.in[0], 0, a);
    kc_tensor_of(&k.in[1], 0, b);
    kc_tensor_of(&k.out[0], 0, got);
    k.epi[0] = (kc_epi){.op = NN_OP_ADD, .has_arg = true};
    kc_tensor_of(&k.epi[0].arg, 0, bias);
    k.epi[1] = (kc_epi){.op = NN_OP_RELU};

    /* 3. compiled into a program of its own, run functionally on the core model */
    krun_io io = {.in = {a, b}, .epi = {bias}, .out = {got}};
    krun_result r;
    if (krun_kernel(&cfg, &k, &io, &(krun_opts){.functional = true}, &r, &err) != NP_OK)
        goto fail_graph;
    printf("%s: %llu cycles, %llu FLOPs, %llu HBM bytes (minimum %llu), %s\n", r.kernel.name,
           (unsigned long long)r.report->total_cycles, (unsigned long long)r.kernel.flops,
           (unsigned long long)(r.kernel.hbm_read_bytes + r.kernel.hbm_write_bytes),
           (unsigned long long)r.kernel.hbm_bytes_min, r.kernel.schedule);

    /* 4. against the reference: the drain fuses bias and relu in fp32 and rounds once, the
     *    framework rounds after the matmul and after the add, so the two differ by up to an
     *    ulp of the matmul's result (bf16: 2^-7 relative) plus one of the output */
    double big = 0;
    for (int64_t i = 0; i < nn_numel(mm); i++)
        big = mm->data[i] > big ? mm->data[i] : -mm->data[i] > big ? -mm->data[i] : big;
    krun_diff d = krun_compare(got, y, 1.0 / 128, big / 128);
    printf("%lld of %lld elements off (largest difference %g)\n", (long long)d.bad,
           (long long)d.n, d.max_abs);
    krun_result_free(&r);
    nn_graph_free(g);
    return d.bad ? 1 : 0;

fail_graph:
    if (nn_graph_status(g, &err) == NP_OK && err.status == NP_OK)
        snprintf(err.msg, sizeof err.msg, "out of memory");
    nn_graph_free(g);
fail:
    fprintf(stderr, "kernel_check: %s\n", err.msg);
    return 1;
}
