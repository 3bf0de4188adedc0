/* test_models_onnx.c — models from ONNX files (framework/model_onnx.c) against the zoo: ONNX
 * files of ResNet-18, resnet-tiny and gpt-tiny written at test time by tests/onnx_models.py
 * (Debian's python3-onnx) import with the zoo's parameter counts and, given the zoo's
 * parameter values by name, compute the zoo's logits and loss within fp32 tolerance on the
 * reference executor; `npusim run --functional` runs one; bad files are refused by node and
 * operator. Skipped (exit 77, ctest's SKIP_RETURN_CODE) with the reason when npusim was built
 * without ONNX import or python3-onnx is absent. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "model.h"

static char onnx_dir[64];

static void onnx_dir_remove(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", onnx_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", onnx_dir);
}

/* The path of NAME.onnx, written by tests/onnx_models.py into a folder of this process's;
 * skips the test (exit 77) when that cannot be done, saying why. */
static const char *onnx_file(const char *name)
{
#ifndef NPUSIM_ONNX
    fprintf(stderr, "SKIPPED: npusim was built without ONNX import (needs Debian's "
                    "protobuf-c-compiler, libprotobuf-c-dev and libonnx-dev)\n");
    exit(77);
#endif
    if (!onnx_dir[0]) {
        snprintf(onnx_dir, sizeof onnx_dir, "/tmp/npusim_onnx_XXXXXX");
        if (!mkdtemp(onnx_dir)) {
            fprintf(stderr, "SKIPPED: no temporary folder\n");
            exit(77);
        }
        atexit(onnx_dir_remove);
    }
    static char path[256];
    snprintf(path, sizeof path, "%s/%s.onnx", onnx_dir, name);
    if (access(path, R_OK) != 0) {
        char cmd[1024];
        snprintf(cmd, sizeof cmd, "'%s' '%s' '%s' %s", NPUSIM_PYTHON3,
                 harness_src_path("tests/onnx_models.py"), onnx_dir, name);
        int st = system(cmd);
        if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) == 77 || WEXITSTATUS(st) == 127) {
            fprintf(stderr, "SKIPPED: %s cannot write ONNX files: python3-onnx (Debian's, for "
                            "%s) is not installed\n", "tests/onnx_models.py", NPUSIM_PYTHON3);
            exit(77);
        }
        CU_ASSERT_EQUAL_FATAL(WEXITSTATUS(st), 0);
    }
    return path;
}

static int64_t params_of(const char *name_or_path, int64_t batch)
{
    nn_model_desc d;
    nn_model m;
    np_err e = {0};
    nn_model_opts o = {.batch = batch};
    if (nn_model_load(name_or_path, &d, &e) != NP_OK || nn_model_build(&d, &o, &m, &e) != NP_OK) {
        fprintf(stderr, "%s: %s\n", name_or_path, e.msg);
        return -1;
    }
    int64_t n = nn_graph_param_count(m.g);
    nn_graph_free(m.g);
    return n;
}

TEST(onnx_resnet18_and_gpt_tiny_have_the_zoos_parameter_counts)
{
    /* torchvision's ResNet-18: 11,689,512 (its model card), the zoo's resnet18 */
    CU_ASSERT_EQUAL(params_of(onnx_file("resnet18"), 1), 11689512);
    CU_ASSERT_EQUAL(params_of("resnet18", 1), 11689512);
    CU_ASSERT_EQUAL(params_of(onnx_file("resnet-tiny"), 2), params_of("resnet-tiny", 2));
    /* gpt-tiny, tied head (wte used twice is one parameter): by hand 16 x 32 + 16 x 32 +
     * 2 (2 x 64 + 32 x 96 + 96 + 32 x 32 + 32 + 32 x 128 + 128 + 128 x 32 + 32) + 64 */
    int64_t gpt = 16 * 32 + 16 * 32 + 2 * (2 * 64 + 32 * 96 + 96 + 32 * 32 + 32 + 32 * 128 + 128 +
                                           128 * 32 + 32) + 64;
    CU_ASSERT_EQUAL(params_of(onnx_file("gpt-tiny"), 1), gpt);
    CU_ASSERT_EQUAL(params_of("gpt-tiny", 1), gpt);
}

/* Builds zoo model `zoo` and ONNX file `path` at batch B, gives every parameter (and
 * batch-norm statistic) of the ONNX graph the zoo's value of the same name (transposed where
 * the ONNX layout is, as Gemm's transB weight), the same input and labels, runs both on the
 * reference executor and returns the largest difference of the logits relative to their
 * largest magnitude, and both losses. */
static double onnx_vs_zoo(const char *zoo, const char *path, int64_t B, bool inference,
                          double *loss_zoo, double *loss_onnx)
{
    nn_model_desc dz, dx;
    nn_model mz, mx;
    np_err e = {0};
    nn_model_opts o = {.batch = B, .inference = inference, .seed = 3};
    CU_ASSERT_EQUAL_FATAL(nn_model_load(zoo, &dz, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(nn_model_build(&dz, &o, &mz, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(nn_model_init(mz.g, 7, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(nn_model_load(path, &dx, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(nn_model_build(&dx, &o, &mx, &e), NP_OK);
    int copied = 0;
    for (int i = 0; i < nn_graph_n_nodes(mx.g); i++) {
        nn_tensor *t = nn_graph_node(mx.g, i);
        if (t->op != NN_OP_LEAF || t->role == NN_ROLE_INPUT || t->dtype != NN_F32 || t->ndim == 0)
            continue;
        nn_tensor *z = nn_graph_find(mz.g, t->name);
        if (!z) {
            if (t->trainable || strstr(t->name, "running_"))
                fprintf(stderr, "%s: no zoo tensor named %s\n", path, t->name);
            CU_ASSERT(!t->trainable && !strstr(t->name, "running_"));
            continue;
        }
        CU_ASSERT_EQUAL_FATAL(nn_numel(z), nn_numel(t));
        bool transposed = t->ndim == 2 && z->ndim == 2 && t->ne[0] == z->ne[1] &&
                          t->ne[1] == z->ne[0] && t->ne[0] != t->ne[1];
        nn_tensor_alloc(t);
        for (int64_t k = 0; k < nn_numel(t); k++)
            t->data[k] = transposed ? z->data[(k % t->ne[1]) * z->ne[1] + k / t->ne[1]] : z->data[k];
        copied++;
    }
    CU_ASSERT(copied > 0);
    CU_ASSERT_EQUAL_FATAL(nn_numel(mz.input), nn_numel(mx.input));
    nn_tensor_alloc(mz.input);
    nn_tensor_alloc(mx.input);
    for (int64_t k = 0; k < nn_numel(mz.input); k++) /* run_job_full.c's batch */
        mz.input->data[k] = mx.input->data[k] = mz.input->dtype == NN_I32
                                                    ? (float)(k * 7 % mz.logits->ne[1])
                                                    : (float)sin((double)k * 0.37);
    nn_tensor_alloc(mz.labels);
    nn_tensor_alloc(mx.labels);
    for (int64_t k = 0; k < nn_numel(mz.labels); k++)
        mz.labels->data[k] = mx.labels->data[k] = (float)(k * 5 % mz.logits->ne[1]);
    CU_ASSERT_EQUAL_FATAL(nn_graph_compute(mz.g, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(nn_graph_compute(mx.g, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(nn_numel(mz.logits), nn_numel(mx.logits));
    double big = 0, diff = 0;
    for (int64_t k = 0; k < nn_numel(mz.logits); k++) {
        big = fmax(big, fabs(mz.logits->data[k]));
        diff = fmax(diff, fabs((double)mz.logits->data[k] - mx.logits->data[k]));
    }
    *loss_zoo = mz.loss->data[0];
    *loss_onnx = mx.loss->data[0];
    nn_graph_free(mz.g);
    nn_graph_free(mx.g);
    return diff / (big > 0 ? big : 1);
}

TEST(onnx_graphs_compute_the_zoos_outputs_within_fp32_tolerance)
{
    /* fp32: the two graphs sum in different orders (a bias added after a convolution, the
     * tanh GELU spelled out, the causal mask as an added constant), each rounding within a few
     * ulp per op: 1e-4 of the logits' scale and of the loss */
    struct { const char *zoo; int64_t batch; bool inference; } cases[] = {
        {"gpt-tiny", 2, false}, {"resnet-tiny", 2, false}, {"resnet-tiny", 2, true}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        double lz, lx;
        double rel = onnx_vs_zoo(cases[i].zoo, onnx_file(cases[i].zoo), cases[i].batch,
                                 cases[i].inference, &lz, &lx);
        fprintf(stderr, "%s%s: logits differ by %.3g of their scale; loss %.7f (zoo) %.7f "
                        "(onnx)\n", cases[i].zoo, cases[i].inference ? " (inference)" : "", rel,
                lz, lx);
        CU_ASSERT(rel < 1e-4);
        CU_ASSERT(fabs(lz - lx) < 1e-4 * fabs(lz));
        CU_ASSERT(lz > 0.5);
    }
}

TEST(run_functional_of_an_onnx_gpt_gives_the_reference_executors_loss)
{
    harness_run r = harness_npusim("run", "--arch", "tpu-pod", "--model", onnx_file("gpt-tiny"),
                                   "--batch", "8", "--dp", "2", "--pp", "1", "--fidelity", "full",
                                   "--functional", "--json", NULL);
    CU_ASSERT_EQUAL_FATAL(r.exit_status, 0);
    json_t *j = json_loads(r.out, 0, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    double loss = json_number_value(json_object_get(j, "loss"));
    double ref = json_number_value(json_object_get(j, "loss_reference"));
    /* the file's weights (0.1 x normal) on 16 tokens: about ln 16; bf16 within 2^-8 */
    CU_ASSERT(fabs(ref - log(16.0)) < 0.3);
    CU_ASSERT(fabs(loss - ref) <= ldexp(1.0, -8) * ref);
    json_decref(j);
    harness_run_free(&r);
    /* no tensor-parallel split of an imported graph (yet): refused, not guessed */
    r = harness_npusim("plan", "--arch", "tpu-pod", "--model", onnx_file("gpt-tiny"), "--batch",
                       "8", "--tp", "2", NULL);
    CU_ASSERT_EQUAL(r.exit_status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "onnx models have no tensor-parallel split"));
    harness_run_free(&r);
}

TEST(bad_onnx_files_are_refused_by_node_and_operator)
{
    np_err e = {0};
    nn_model_desc d;
    char buf[1024];
    /* an operator npusim does not import: named with its node */
    CU_ASSERT_EQUAL(nn_model_load(onnx_file("erf"), &d, &e), NP_ERR_UNKNOWN_KEY);
    np_err_format(&e, buf, sizeof buf);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "erf.onnx: node 1 'gelu/Erf_1' (Erf): operator Erf is not "
                                       "imported (npusim imports Conv, "));
    /* a truncated file and a file of text: not an ONNX model */
    char path[300];
    snprintf(path, sizeof path, "%s", onnx_file("gpt-tiny"));
    size_t len;
    char *bytes = harness_read_file(path, &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(bytes);
    char cut[320];
    snprintf(cut, sizeof cut, "%s/cut.onnx", onnx_dir);
    FILE *f = fopen(cut, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fwrite(bytes, 1, len / 2, f);
    fclose(f);
    free(bytes);
    CU_ASSERT_EQUAL(nn_model_load(cut, &d, &e), NP_ERR_FORMAT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "not an ONNX model"));
    harness_run r = harness_npusim("summary", "--model",
                                   harness_src_path("tests/data/bad/files/not_onnx.onnx"), NULL);
    CU_ASSERT_EQUAL(r.exit_status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "not_onnx.onnx: not an ONNX model"));
    harness_run_free(&r);
}

/* Prepends the field header (field, length-delimited) of the bytes [*pos, end) before them. */
static void wrap(uint8_t *buf, size_t *pos, size_t end, unsigned field)
{
    uint8_t v[10];
    size_t n = 0;
    for (uint64_t len = end - *pos; ; len >>= 7) {
        v[n++] = (uint8_t)((len & 0x7f) | (len >= 0x80 ? 0x80 : 0));
        if (len < 0x80)
            break;
    }
    *pos -= n;
    memcpy(buf + *pos, v, n);
    buf[--*pos] = (uint8_t)(field << 3 | 2);
}

TEST(onnx_subgraphs_nested_without_end_are_refused_not_a_stack_overflow)
{
#ifndef NPUSIM_ONNX
    fprintf(stderr, "SKIPPED: npusim was built without ONNX import\n");
    exit(77);
#endif
    /* ModelProto.graph (7) { GraphProto.node (1) { NodeProto.attribute (5) { AttributeProto.g
     * (6) { ... } } } }, 100,000 graphs deep (onnx.proto's field numbers), written inside out */
    size_t cap = 8 << 20, pos = cap;
    uint8_t *buf = malloc(cap);
    CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
    for (int i = 0; i < 100000; i++) {
        wrap(buf, &pos, cap, 6);
        wrap(buf, &pos, cap, 5);
        wrap(buf, &pos, cap, 1);
    }
    wrap(buf, &pos, cap, 7);
    char path[64];
    snprintf(path, sizeof path, "/tmp/npusim_deep_XXXXXX");
    int fd = mkstemp(path);
    CU_ASSERT_FATAL(fd >= 0);
    CU_ASSERT_EQUAL_FATAL(write(fd, buf + pos, cap - pos), (ssize_t)(cap - pos));
    close(fd);
    free(buf);
    char named[80];
    snprintf(named, sizeof named, "%s.onnx", path);
    CU_ASSERT_EQUAL_FATAL(rename(path, named), 0);
    harness_run r = harness_npusim("summary", "--model", named, NULL);
    CU_ASSERT_EQUAL(r.exit_status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "nested more than 32 deep"));
    harness_run_free(&r);
    unlink(named);
}
