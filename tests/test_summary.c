/* test_summary.c — `npusim summary` against torchinfo's own published table for torchvision's
 * resnet50 (tests/data/models/torchinfo/resnet50.out, provenance in its README): the same
 * layers with their types, depths, output shapes and parameters, the same totals and size
 * estimates to the printed digit, and every convolution's and linear layer's Mult-Adds by
 * torchinfo's rule (LayerInfo.calculate_macs). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define TI_MAX_ROWS 256

/* One row of a torchinfo-shaped table: "│    └─Conv2d: 3-1   [2, 64, 56, 56]   4,096 ...". */
typedef struct ti_row {
    char type[48], shape[48];
    int depth;
    long long params, mult_adds; /* -1: "--"; mult_adds -2: no such column */
} ti_row;

/* "9,408" -> 9408, "--" -> -1; *p moves past the token and the spaces after it. */
static long long ti_number(const char **p)
{
    long long v = -1;
    if (strncmp(*p, "--", 2) == 0) {
        *p += 2;
    } else if (**p >= '0' && **p <= '9') {
        v = 0;
        for (; (**p >= '0' && **p <= '9') || **p == ','; (*p)++)
            if (**p != ',')
                v = v * 10 + (**p - '0');
    } else {
        return -2;
    }
    while (**p == ' ')
        (*p)++;
    return v;
}

/* The module rows of a table (those with "Type: D-I"), in order. */
static int ti_rows(const char *text, ti_row *rows, int cap)
{
    int n = 0;
    for (const char *line = text; line && *line && n < cap;) {
        const char *eol = strchr(line, '\n');
        const char *p = line;
        /* the tree: spaces and box-drawing characters (3-byte UTF-8 sequences) */
        while (*p == ' ' || (unsigned char)*p == 0xe2)
            p += *p == ' ' ? 1 : 3;
        const char *colon = strstr(p, ": ");
        int depth, idx, used = 0;
        if (colon && (!eol || colon < eol) && p != line &&
            sscanf(colon + 2, "%d-%d%n", &depth, &idx, &used) == 2) {
            ti_row *r = &rows[n++];
            snprintf(r->type, sizeof r->type, "%.*s", (int)(colon - p), p);
            r->depth = depth;
            const char *q = colon + 2 + used;
            while (*q == ' ')
                q++;
            const char *close = *q == '[' ? strchr(q, ']') : q + 1;
            snprintf(r->shape, sizeof r->shape, "%.*s", (int)(close - q + 1), q);
            q = close + 1;
            while (*q == ' ')
                q++;
            r->params = ti_number(&q);
            r->mult_adds = ti_number(&q);
        }
        line = eol ? eol + 1 : NULL;
    }
    return n;
}

/* torchinfo at depth 3 (its default) shows the layers with parameters, the pools, and the
 * containers at depth 3 whose layers it hides (a block's downsample); ReLU modules and the
 * functional steps (npusim's add rows, which torchinfo does not see) are left out. */
static bool ti_compared(const ti_row *r)
{
    static const char *const types[] = {"Conv2d", "BatchNorm2d", "Linear", "MaxPool2d",
                                        "AdaptiveAvgPool2d"};
    if (r->depth > 3)
        return false;
    if (r->depth == 3 && !strcmp(r->type, "Sequential"))
        return true;
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (!strcmp(r->type, types[i]))
            return true;
    return false;
}

/* The product of the dimensions of "[2, 64, 56, 56]" from the from-th on, less the last
 * skip_last of them, times the first when from > 0. */
static long long ti_prod(const char *shape, int from, int skip_last)
{
    long long d[8] = {0};
    int n = 0;
    for (const char *p = shape + 1; *p && n < 8;) {
        d[n++] = strtoll(p, (char **)&p, 10);
        while (*p == ',' || *p == ' ' || *p == ']')
            p++;
    }
    long long v = from > 0 ? d[0] : 1;
    for (int i = from; i < n - skip_last; i++)
        v *= d[i];
    return v;
}

TEST(resnet50_table_equals_torchinfos_published_table_layer_by_layer_and_in_its_totals)
{
    size_t len;
    char *theirs = harness_read_file(harness_src_path("tests/data/models/torchinfo/resnet50.out"),
                                     &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(theirs);
    harness_run r = harness_npusim("summary", "--model", "resnet50", "--batch", "2", NULL);
    CU_ASSERT_EQUAL_FATAL(r.exit_status, 0);
    static ti_row t[TI_MAX_ROWS], o[TI_MAX_ROWS];
    int nt = ti_rows(theirs, t, TI_MAX_ROWS), no = ti_rows(r.out, o, TI_MAX_ROWS);
    CU_ASSERT_EQUAL(nt, 174); /* torchinfo's table: 174 module rows under ResNet */
    /* the rows both show, in order */
    int i = 0, k = 0, compared = 0;
    for (;; i++, k++) {
        while (i < nt && !ti_compared(&t[i]))
            i++;
        while (k < no && !ti_compared(&o[k]))
            k++;
        if (i == nt || k == no)
            break;
        compared++;
        if (strcmp(t[i].type, o[k].type) || t[i].depth != o[k].depth ||
            strcmp(t[i].shape, o[k].shape) || t[i].params != o[k].params)
            fprintf(stderr, "\n  torchinfo %s %d %s %lld; npusim %s %d %s %lld", t[i].type,
                    t[i].depth, t[i].shape, t[i].params, o[k].type, o[k].depth, o[k].shape,
                    o[k].params);
        CU_ASSERT_STRING_EQUAL(t[i].type, o[k].type);
        CU_ASSERT_EQUAL(t[i].depth, o[k].depth);
        CU_ASSERT_STRING_EQUAL(t[i].shape, o[k].shape);
        CU_ASSERT_EQUAL(t[i].params, o[k].params);
    }
    CU_ASSERT_EQUAL(i, nt);
    CU_ASSERT_EQUAL(k, no);
    /* 53 convolutions (4 in downsamples, hidden at depth 3), 53 batch norms, fc, 2 pools */
    CU_ASSERT_EQUAL(compared, 49 + 49 + 1 + 2 + 4);
    /* every convolution and linear layer, at any depth: torchinfo's Mult-Adds */
    int convs = 0, linears = 0;
    for (k = 0; k < no; k++) {
        if (!strcmp(o[k].type, "Conv2d")) {
            CU_ASSERT_EQUAL(o[k].mult_adds, o[k].params * ti_prod(o[k].shape, 2, 0));
            convs++;
        } else if (!strcmp(o[k].type, "Linear")) {
            CU_ASSERT_EQUAL(o[k].mult_adds, o[k].params * ti_prod(o[k].shape, 0, 1));
            linears++;
        }
    }
    CU_ASSERT_EQUAL(convs, 53);
    CU_ASSERT_EQUAL(linears, 1);
    /* torchinfo's totals and size estimates, line for line */
    static const char *const totals[] = {"Total params: ", "Trainable params: ",
                                         "Non-trainable params: ", "Total mult-adds (G): ",
                                         "Input size (MB): ", "Forward/backward pass size (MB): ",
                                         "Params size (MB): ", "Estimated Total Size (MB): "};
    for (size_t j = 0; j < sizeof totals / sizeof totals[0]; j++) {
        const char *line = strstr(theirs, totals[j]);
        CU_ASSERT_PTR_NOT_NULL_FATAL(line);
        char want[96];
        snprintf(want, sizeof want, "\n%.*s\n", (int)strcspn(line, "\n"), line);
        if (!strstr(r.out, want))
            fprintf(stderr, "\n  npusim lacks '%s'", want + 1);
        CU_ASSERT_PTR_NOT_NULL(strstr(r.out, want));
    }
    CU_ASSERT_PTR_NOT_NULL(strstr(theirs, "Total params: 25,557,032\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(theirs, "Total mult-adds (G): 8.18\n"));
    harness_run_free(&r);
    free(theirs);
}

TEST(a_linear_layers_mult_adds_count_every_token_as_torchinfo_does)
{
    /* torchinfo: a Linear's params x every output dimension but the last: GPT-2's c_attn at
     * batch 2, 16 tokens is (768 x 2304 + 2304) x 2 x 16 */
    harness_run r = harness_npusim("summary", "--model", "gpt2-small", "--batch", "2", "--seq",
                                   "16", NULL);
    CU_ASSERT_EQUAL_FATAL(r.exit_status, 0);
    static ti_row o[TI_MAX_ROWS * 2];
    int no = ti_rows(r.out, o, TI_MAX_ROWS * 2), n = 0;
    for (int k = 0; k < no; k++) {
        if (strcmp(o[k].type, "Linear") || o[k].params != 768 * 2304 + 2304)
            continue;
        CU_ASSERT_STRING_EQUAL(o[k].shape, "[2, 16, 2304]");
        CU_ASSERT_EQUAL(o[k].mult_adds, (768LL * 2304 + 2304) * 2 * 16);
        n++;
    }
    CU_ASSERT_EQUAL(n, 12); /* one per block */
    harness_run_free(&r);
}
