/* moe_route.h — how many tokens each expert of a mixture-of-experts layer receives when the
 * routing is not computed from real values: timing runs (`npusim run --routing`), where the
 * router's indices are not real numbers, take their per-expert token counts from here. This
 * module is the one place those counts come from: the grouped matmul's kernels
 * (compiler/kc_moe_gmm.c) and, later, expert parallelism's all-to-all-v counts per peer are
 * derived from nn_moe_route_counts; nothing else invents a distribution. With --functional the
 * real routing of the real tokens is used instead (framework/op_moe.c's layout).
 *
 * The distributions (docs/run.md, "--routing"), for T tokens, top-k and E experts, so that
 * the M = T k assignments are shared out and no expert gets more than T (a token picks an
 * expert at most once):
 *
 *   uniform    every expert M / E: floor(M / E), and one more for the first M mod E experts;
 *   skew:S     a Zipf law over ranks: the expert of rank r (0 the busiest) gets the share
 *              (r + 1)^-S / sum_{i<E} (i + 1)^-S of M; which expert holds which rank is a
 *              permutation drawn (Fisher-Yates, base/rng.h) from the seed and the layer, so
 *              every layer has its own busiest expert and a seed gives the same counts each
 *              time; S = 0 is uniform's shares;
 *   FILE       a histogram per MoE layer (below): expert e gets the share w_e / sum w.
 *
 * Shares become integers by the largest remainder (Hamilton's method): each expert gets the
 * floor of its share, and the units left go to the largest fractional parts, ties to the lower
 * expert number. An expert whose share passes T gets T and the rest is shared out again among
 * the others by the same weights, until none passes T. The counts always sum to T k.
 *
 * The histogram file: text; '#' starts a comment; blank lines are skipped; each other line
 * holds E non-negative numbers (token counts or any weights; not all zero): the i-th such
 * line is the i-th MoE layer of the model (dense layers have none). A file of one line gives
 * that histogram to every layer.
 *
 *   nn_moe_route_spec s;
 *   nn_moe_route_parse("skew:1.2", 7, &s, &err);        // or "uniform", or a file's path
 *   int64_t counts[8];
 *   nn_moe_route_counts(&s, 0, 4096, 2, 8, counts, &err); // layer 0: 4096 tokens, top-2
 *   nn_moe_route_spec_free(&s);
 */
#ifndef NPUSIM_MOE_ROUTE_H
#define NPUSIM_MOE_ROUTE_H

#include <stdint.h>

#include "err.h"

typedef enum nn_moe_route_kind {
    NN_ROUTE_UNIFORM = 0,
    NN_ROUTE_SKEW = 1,
    NN_ROUTE_FILE = 2,
} nn_moe_route_kind;

typedef struct nn_moe_route_spec {
    nn_moe_route_kind kind;
    double skew;        /* SKEW: S >= 0 */
    uint64_t seed;      /* SKEW: the seed of the ranks' permutation */
    /* FILE (owned: nn_moe_route_spec_free) */
    char path[256];
    int n_hist;         /* histograms (lines) */
    int64_t experts;    /* numbers per histogram */
    double *hist;       /* n_hist x experts weights */
    int *line;          /* each histogram's line in the file */
} nn_moe_route_spec;

/* The uniform distribution (a spec that owns nothing). */
nn_moe_route_spec nn_moe_route_uniform(void);

/* Parses a --routing value: "uniform", "skew:S" (S a real in [0, 64]) or the path of a
 * histogram file, read here. NP_ERR_SYNTAX / NP_ERR_RANGE for a bad S (the message names the
 * text), the file's errors (NP_ERR_IO, ...), and for its contents NP_ERR_SYNTAX / NP_ERR_RANGE
 * with the file and line in err. *out owns the histograms: free it with
 * nn_moe_route_spec_free (also after a failure). */
np_status nn_moe_route_parse(const char *text, uint64_t seed, nn_moe_route_spec *out,
                             np_err *err);

/* The histograms of a file's text (path names it in errors). As nn_moe_route_parse. */
np_status nn_moe_route_parse_hist(const char *path, const char *text, nn_moe_route_spec *out,
                                  np_err *err);

void nn_moe_route_spec_free(nn_moe_route_spec *s);

/* counts[0 .. experts) of MoE layer `layer` (0 the model's first MoE layer) for `tokens`
 * tokens each routed to top_k experts, as the header says: every count in [0, tokens], their
 * sum tokens x top_k. NP_ERR_RANGE for top_k outside 1..experts or a negative count of
 * tokens; NP_ERR_INCONSISTENT (naming the file and the line) when a histogram has another
 * number of experts, or the file has several histograms and none for this layer. */
np_status nn_moe_route_counts(const nn_moe_route_spec *s, int64_t layer, int64_t tokens,
                              int64_t top_k, int64_t experts, int64_t *counts, np_err *err);

/* Marks every grouped-matmul node of g (moe_gmm, moe_gmm_grad_w: ip[3] the kind + 1, ip[4]
 * the seed, ip[5] the layer — the model layer in the name of its indices' node,
 * "layers.N..." — and fp[0] the skew) so that its kernel (compiler/kc_moe_gmm.c) takes its
 * rows per expert from s instead of from the indices' values: what a timing run does (nodes
 * left unmarked, ip[3] 0, route by the real indices: functional runs). NP_ERR_INCONSISTENT
 * for a histogram file, which the kernels do not take yet (its counts do not fit a node's
 * parameters). */
struct nn_graph;
np_status nn_moe_route_mark(struct nn_graph *g, const nn_moe_route_spec *s, np_err *err);

/* "uniform", "skew:1.2" or the file's path, for reports. */
const char *nn_moe_route_name(const nn_moe_route_spec *s, char *buf, int n);

#endif
