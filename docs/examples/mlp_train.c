/* mlp_train.c — the example of docs/framework.md: an MLP training step built with the C API,
 * trained on the CPU reference executor. Built and run by ctest (framework_example.mlp_train),
 * so it cannot go stale. Exits 0 when the loss fell below 0.1. */
#include <stdio.h>

#include "nn.h"
#include "optim.h"
#include "rng.h"

#define BATCH 64
#define HIDDEN 32

int main(void)
{
    np_err err = {0};
    nn_graph *g = nn_graph_new(42);
    if (!g)
        return 1;

    /* 1. Describe the model: leaves, then ops. Nothing runs yet (graph mode). */
    nn_tensor *x = nn_input(g, "x", NN_F32, 2, (int64_t[]){BATCH, 2});
    nn_tensor *labels = nn_input(g, "labels", NN_I32, 1, (int64_t[]){BATCH});
    nn_graph_set_scope(g, "fc1");
    nn_tensor *w1 = nn_param(g, "weight", NN_F32, 2, (int64_t[]){2, HIDDEN});
    nn_tensor *b1 = nn_param(g, "bias", NN_F32, 1, (int64_t[]){HIDDEN});
    nn_tensor *h = nn_relu(g, nn_linear(g, x, w1, b1));
    nn_graph_set_scope(g, "fc2");
    nn_tensor *w2 = nn_param(g, "weight", NN_F32, 2, (int64_t[]){HIDDEN, 2});
    nn_tensor *b2 = nn_param(g, "bias", NN_F32, 1, (int64_t[]){2});
    nn_tensor *logits = nn_linear(g, h, w2, b2);
    nn_graph_set_scope(g, "loss");
    nn_tensor *loss = nn_cross_entropy(g, logits, labels);
    if (nn_graph_status(g, &err) != NP_OK) /* one check for every constructor above */
        goto fail;

    /* 2. Append the backward pass and the optimizer: one graph is one training step. */
    nn_optim adam = {.kind = NN_OPTIM_ADAM, .lr = 0.01, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8};
    if (nn_backward(g, loss, &err) != NP_OK || nn_optim_step(g, &adam, &err) != NP_OK)
        goto fail;

    /* 3. Give the leaves values and run the step repeatedly on the reference executor. */
    nn_tensor_randn(w1, 1, 0.7);
    nn_tensor_randn(w2, 2, 0.2);
    nn_tensor_fill(b1, 0.0f);
    nn_tensor_fill(b2, 0.0f);
    rng r;
    rng_seed(&r, 7);
    double first = 0, last = 0;
    for (int step = 0; step < 300; step++) {
        float xv[2 * BATCH], lv[BATCH], l;
        for (int i = 0; i < BATCH; i++) { /* label: same sign of both coordinates */
            double a = 2 * rng_unit(&r) - 1, b = 2 * rng_unit(&r) - 1;
            xv[2 * i] = (float)a;
            xv[2 * i + 1] = (float)b;
            lv[i] = a * b > 0 ? 1.0f : 0.0f;
        }
        if (nn_tensor_write(x, xv, 2 * BATCH, &err) != NP_OK ||
            nn_tensor_write(labels, lv, BATCH, &err) != NP_OK ||
            nn_graph_compute(g, &err) != NP_OK || nn_tensor_read(loss, &l, 1, &err) != NP_OK)
            goto fail;
        if (step == 0)
            first = l;
        last = l;
    }
    printf("loss %.4f -> %.4f\n", first, last);
    nn_graph_free(g);
    return last < 0.1 ? 0 : 1;

fail:;
    char buf[1024];
    fprintf(stderr, "mlp_train: %s\n", np_err_format(&err, buf, sizeof buf));
    nn_graph_free(g);
    return 1;
}
