/* test_scalesim.c — a SCALE-Sim user's own files through `npusim layer`: .cfg files in CALC
 * and USER modes with a conv and a GEMM topology, against SCALE-Sim v2's own runs of the same
 * files (tests/data/hw/scalesim, provenance in its README): the same compute cycles, no
 * stalls in CALC, SCALE-Sim's three report files with its column names (as its source writes
 * them), its SRAM counts and, in CALC, its DRAM counts. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#define SS_MAX_ROWS 8
#define SS_MAX_COLS 20

typedef struct ss_csv {
    char header[1024];
    int n_rows;
    double v[SS_MAX_ROWS][SS_MAX_COLS];
    int n_cols;
} ss_csv;

/* Reads a SCALE-Sim report: a header line, then rows of numbers separated by ", ". */
static bool ss_read(const char *path, ss_csv *c)
{
    size_t len;
    char *text = harness_read_file(path, &len);
    if (!text)
        return false;
    memset(c, 0, sizeof *c);
    char *save = NULL;
    char *line = strtok_r(text, "\n", &save);
    snprintf(c->header, sizeof c->header, "%s", line ? line : "");
    while ((line = strtok_r(NULL, "\n", &save)) && c->n_rows < SS_MAX_ROWS) {
        int k = 0;
        for (char *p = line; *p && k < SS_MAX_COLS;) {
            char *end;
            c->v[c->n_rows][k++] = strtod(p, &end);
            if (end == p)
                break;
            p = end;
            while (*p == ',' || *p == ' ')
                p++;
        }
        c->n_cols = k;
        c->n_rows++;
    }
    free(text);
    return true;
}

static const char *ss_data(const char *rel)
{
    static char buf[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", harness_src_path("tests/data/hw/scalesim"), rel);
    return buf[k];
}

static const char *const ss_reports[] = {"COMPUTE_REPORT.csv", "BANDWIDTH_REPORT.csv",
                                         "DETAILED_ACCESS_REPORT.csv"};

/* Runs npusim layer on cfg and topo, writing the reports into a fresh folder; fills ours[3]
 * with them and theirs[3] with SCALE-Sim's. */
static void ss_run(const char *cfg, const char *topo, const char *run_name, ss_csv *ours,
                   ss_csv *theirs)
{
    char dir[] = "/tmp/npusim_scalesim_XXXXXX";
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
    char cfg_file[64], topo_file[64], gold[160];
    snprintf(cfg_file, sizeof cfg_file, "%s.cfg", cfg);
    snprintf(topo_file, sizeof topo_file, "%s.csv", topo);
    snprintf(gold, sizeof gold, "%s_%s", cfg, topo);
    const char *args[] = {"layer", "--scalesim-config", ss_data(cfg_file), "--topology",
                          ss_data(topo_file), "--reports", dir, NULL};
    harness_run r = harness_npusim_in(NULL, args);
    CU_ASSERT_EQUAL(r.exit_status, 0);
    if (r.exit_status)
        fprintf(stderr, "%s\n", r.err);
    harness_run_free(&r);
    for (int i = 0; i < 3; i++) {
        char path[700], ref[256];
        snprintf(path, sizeof path, "%s/%s/%s", dir, run_name, ss_reports[i]);
        CU_ASSERT_TRUE(ss_read(path, &ours[i])); /* in the run_name folder */
        snprintf(ref, sizeof ref, "%s/%s", gold, ss_reports[i]);
        CU_ASSERT_TRUE_FATAL(ss_read(ss_data(ref), &theirs[i]));
        remove(path);
    }
    char sub[600];
    snprintf(sub, sizeof sub, "%s/%s", dir, run_name);
    rmdir(sub);
    rmdir(dir);
}

TEST(report_columns_are_scalesim_sources_column_names)
{
    /* the header strings as scalesim/simulator.py builds them, joined */
    size_t len;
    char *src = harness_read_file(ss_data("simulator_py_headers.txt"), &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(src);
    char headers[3][1024] = {"", "", ""};
    int h = -1;
    for (char *line = strtok(src, "\n"); line; line = strtok(NULL, "\n")) {
        if (strstr(line, "header = "))
            h++;
        char *q1 = strchr(line, '\''), *q2 = q1 ? strrchr(line, '\'') : NULL;
        if (h < 0 || h > 2 || !q1 || q2 == q1)
            continue;
        strncat(headers[h], q1 + 1, (size_t)(q2 - q1 - 1));
    }
    free(src);
    CU_ASSERT_EQUAL_FATAL(h, 2);
    ss_csv ours[3], theirs[3];
    ss_run("calc_os", "conv", "npusim_calc_os", ours, theirs);
    for (int i = 0; i < 3; i++) {
        char *nl = strstr(headers[i], "\\n"); /* the source's "\n" */
        if (nl)
            *nl = '\0';
        CU_ASSERT_STRING_EQUAL(ours[i].header, headers[i]);
        CU_ASSERT_STRING_EQUAL(theirs[i].header, headers[i]); /* and SCALE-Sim wrote them */
    }
}

/* Compute cycles equal; in CALC, no stalls and SCALE-Sim's totals; mapping efficiency and
 * compute utilization equal; SRAM counts equal; in CALC, DRAM counts equal. */
static void ss_compare(const char *cfg, const char *topo, const char *run_name, bool calc)
{
    ss_csv ours[3], theirs[3];
    ss_run(cfg, topo, run_name, ours, theirs);
    CU_ASSERT_EQUAL_FATAL(ours[0].n_rows, theirs[0].n_rows);
    for (int l = 0; l < ours[0].n_rows; l++) {
        const double *o = ours[0].v[l], *t = theirs[0].v[l];
        double their_compute = t[1] - t[2];
        if (calc) {
            CU_ASSERT_EQUAL(o[1], t[1]); /* total cycles */
            CU_ASSERT_EQUAL(o[2], 0);    /* stall cycles */
            CU_ASSERT_EQUAL(t[2], 0);
            CU_ASSERT_DOUBLE_EQUAL(o[3], t[3], 1e-9); /* overall utilization */
        } else {
            CU_ASSERT_EQUAL(o[1] - o[2], their_compute); /* stalls: npusim's kernel's */
        }
        CU_ASSERT_DOUBLE_EQUAL(o[4], t[4], 1e-9); /* mapping efficiency */
        CU_ASSERT_DOUBLE_EQUAL(o[5], t[5], 1e-9); /* compute utilization */
        const double *od = ours[2].v[l], *td = theirs[2].v[l];
        CU_ASSERT_EQUAL(od[3], td[3]); /* SRAM IFMAP reads */
        CU_ASSERT_EQUAL(od[6], td[6]); /* SRAM filter reads */
        CU_ASSERT_EQUAL(od[9], td[9]); /* SRAM OFMAP writes */
        if (calc) {
            CU_ASSERT_EQUAL(od[12], td[12]); /* DRAM IFMAP reads */
            CU_ASSERT_EQUAL(od[15], td[15]); /* DRAM filter reads */
            CU_ASSERT_EQUAL(od[18], td[18]); /* DRAM OFMAP writes */
            for (int k = 1; k <= 3; k++) /* SRAM bandwidths: the counts over the same cycles */
                CU_ASSERT_DOUBLE_EQUAL(ours[1].v[l][k], theirs[1].v[l][k], 1e-9);
        }
    }
    /* the compute cycles through --json: SCALE-Sim's total less its stalls, in both modes */
    char cfg_file[64], topo_file[64];
    snprintf(cfg_file, sizeof cfg_file, "%s.cfg", cfg);
    snprintf(topo_file, sizeof topo_file, "%s.csv", topo);
    const char *args[] = {"layer", "--scalesim-config", ss_data(cfg_file), "--topology",
                          ss_data(topo_file), "--json", NULL};
    harness_run r = harness_npusim_in(NULL, args);
    CU_ASSERT_EQUAL(r.exit_status, 0);
    const char *p = r.out;
    for (int l = 0; l < theirs[0].n_rows; l++) {
        p = strstr(p, "\"compute_cycles\": ");
        CU_ASSERT_PTR_NOT_NULL_FATAL(p);
        p += strlen("\"compute_cycles\": ");
        CU_ASSERT_EQUAL(strtod(p, NULL), theirs[0].v[l][1] - theirs[0].v[l][2]);
    }
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, calc ? "\"interface_bandwidth\": \"CALC\""
                                              : "\"interface_bandwidth\": \"USER\""));
    harness_run_free(&r);
}

TEST(calc_mode_matches_scalesim_on_a_conv_topology_with_no_stalls)
{
    ss_compare("calc_os", "conv", "npusim_calc_os", true);
}

TEST(calc_mode_matches_scalesim_on_a_gemm_topology_with_no_stalls)
{
    ss_compare("calc_os", "gemm", "npusim_calc_os", true);
}

TEST(user_mode_gives_scalesims_compute_cycles_on_a_conv_topology)
{
    ss_compare("user_ws", "conv", "npusim_user_ws", false);
}

TEST(user_mode_gives_scalesims_compute_cycles_on_a_gemm_topology)
{
    ss_compare("user_ws", "gemm", "npusim_user_ws", false);
}

/* The value of "key": N after the i-th occurrence of "key" in text (0 when absent). */
static double ss_json_num(const char *text, const char *key, int i)
{
    char k[64];
    snprintf(k, sizeof k, "\"%s\": ", key);
    const char *p = text;
    for (int n = 0; n <= i; n++) {
        p = strstr(p, k);
        if (!p)
            return 0;
        p += strlen(k);
    }
    return strtod(p, NULL);
}

TEST(layer_model_runs_the_conv_and_linear_layers_of_a_zoo_model)
{
    /* resnet18 at batch 1: 20 convolutions and the fc layer (torchvision's); conv1 is 7 x 7
     * stride 2 to 112 x 112 x 64: SCALE-Sim's form is an input of (112 - 1) x 2 + 7 = 229
     * rows, M = 112 x 112 = 12544, N = 64, K = 7 x 7 x 3 = 147; fc is 1 x 1000 x 512 */
    const char *args[] = {"layer", "--arch", "tpu-pod", "--model", "resnet18", "--json", NULL};
    harness_run r = harness_npusim_in(NULL, args);
    CU_ASSERT_EQUAL_FATAL(r.exit_status, 0);
    int n = 0;
    for (const char *p = r.out; (p = strstr(p, "\"name\": ")); p++)
        n++;
    CU_ASSERT_EQUAL(n, 21);
    CU_ASSERT_EQUAL(ss_json_num(r.out, "m", 0), 12544);
    CU_ASSERT_EQUAL(ss_json_num(r.out, "n", 0), 64);
    CU_ASSERT_EQUAL(ss_json_num(r.out, "k", 0), 147);
    CU_ASSERT_EQUAL(ss_json_num(r.out, "m", 20), 1);
    CU_ASSERT_EQUAL(ss_json_num(r.out, "n", 20), 1000);
    CU_ASSERT_EQUAL(ss_json_num(r.out, "k", 20), 512);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "\"name\": \"conv1\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "\"name\": \"layer4.1.conv2\""));
    harness_run_free(&r);
}

TEST(layer_on_several_cores_counts_stalls_against_one_cores_share_of_the_folds)
{
    /* 1024^3 ws on 128 x 128: 8 x 8 = 64 folds of 2 x 128 + 128 + 1024 - 2 = 1406 cycles
     * (SCALE-Sim: 64 x 1406 - 1 = 89983); on 4 cores a core's share is 16 folds: 22495 */
    const char *args[] = {"layer", "--arch", "tpu-pod", "--gemm", "1024,1024,1024", "--cores",
                          "4", "--set", "core.mxu_weight_double_buffer=0", "--json", NULL};
    harness_run r = harness_npusim_in(NULL, args);
    CU_ASSERT_EQUAL_FATAL(r.exit_status, 0);
    double total = ss_json_num(r.out, "total_cycles", 0);
    CU_ASSERT_EQUAL(ss_json_num(r.out, "compute_cycles", 0), 89983);
    CU_ASSERT_EQUAL(ss_json_num(r.out, "compute_cycles_per_core", 0), 22495);
    CU_ASSERT(total > 22495);
    CU_ASSERT_EQUAL(ss_json_num(r.out, "stall_cycles", 0), total - 22495);
    CU_ASSERT_EQUAL(ss_json_num(r.out, "cores", 0), 4);
    harness_run_free(&r);
    /* tpu-pod's own double-buffered weights: only the first fold pays the 128-cycle preload,
     * 64 x 1278 + 128 - 1 = 81919 in all, 16 x 1278 + 128 - 1 = 20575 for a core's share */
    const char *db[] = {"layer", "--arch", "tpu-pod", "--gemm", "1024,1024,1024", "--cores", "4",
                        "--json", NULL};
    r = harness_npusim_in(NULL, db);
    CU_ASSERT_EQUAL(ss_json_num(r.out, "compute_cycles", 0), 81919);
    CU_ASSERT_EQUAL(ss_json_num(r.out, "compute_cycles_per_core", 0), 20575);
    harness_run_free(&r);
    const char *text[] = {"layer", "--arch", "tpu-pod", "--gemm", "1024,1024,1024", "--cores",
                          "4", "--set", "core.mxu_weight_double_buffer=0", NULL};
    r = harness_npusim_in(NULL, text);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "on 4 cores of 128x128 arrays"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "compute cycles / core:  22,495 cycles (16 of 64 folds)"));
    harness_run_free(&r);
}

TEST(layer_model_runs_resnet50_on_the_default_architecture_as_a_new_user_types_it)
{
    /* `npusim layer --model resnet50` on tiny (4 x 4 arrays, ws, a 64 KiB scratchpad): every
     * one of the 53 convolutions and fc runs; a convolution whose conv kernel cannot stage its
     * input rows (layer1.1.conv1: 56 x 256 channels of bf16 a row) runs as its im2col GEMM,
     * with SCALE-Sim's compute cycles all the same: M = 3136, N = 64, K = 256 on 4 x 4 ws is
     * ceil(K/4) x ceil(N/4) = 1024 folds of 2 x 4 + 4 + M - 2 = 3146 cycles, less 1 */
    const char *args[] = {"layer", "--model", "resnet50", "--json", NULL};
    harness_run r = harness_npusim_in(NULL, args);
    CU_ASSERT_EQUAL_FATAL(r.exit_status, 0);
    int n = 0;
    for (const char *p = r.out; (p = strstr(p, "\"name\": ")); p++)
        n++;
    CU_ASSERT_EQUAL(n, 54);
    const char *l = strstr(r.out, "\"name\": \"layer1.1.conv1\"");
    CU_ASSERT_PTR_NOT_NULL_FATAL(l);
    CU_ASSERT_EQUAL(ss_json_num(l, "m", 0), 3136);
    CU_ASSERT_EQUAL(ss_json_num(l, "compute_cycles", 0), 1024.0 * 3146 - 1);
    const char *kernel = strstr(l, "\"kernel\": ");
    CU_ASSERT_PTR_NOT_NULL_FATAL(kernel);
    CU_ASSERT_EQUAL(strncmp(kernel, "\"kernel\": \"matmul\"", 18), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "\"kernel\": \"conv\"")); /* conv1's kernel fits */
    harness_run_free(&r);
}
