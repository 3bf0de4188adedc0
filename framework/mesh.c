/* mesh.c — the device mesh (dp x tp x pp ranks) and its placement on the chips of an
 * architecture, the only place the framework looks at the system's topology; and the small
 * parsers of a strategy's text options.
 *
 * Ranks are numbered tp fastest, then pp, then dp (plan.h). The placement maps ranks to chips
 * from the facts of base/arch.h alone — system.topology, island_chips, torus_x/y/z (chips are
 * numbered x fastest, as noc/ numbers them) — so that the tensor-parallel group, whose
 * all-reduces are on the critical path of every layer, gets the fastest links:
 *   hierarchical   tp on consecutive chips: inside one island when tp divides island_chips
 *   torus2d/3d     tp along x (a torus row) and pp along y when tp divides torus_x and pp
 *                  torus_y; dp over what is left
 *   ring           tp on consecutive ring neighbours, pp groups next to each other
 *   switched       every chip is as far from every other: rank order
 * An explicit order ("pp,tp,dp": fastest first) overrides it with a plain mixed-radix map. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn_impl.h"
#include "plan.h"

static const char *const nn_mesh_axis_names[NN_MESH_AXES] = {"dp", "tp", "pp"};
static const char *const nn_comm_tag_names[NN_COMM_TAG_COUNT] = {"tp", "sp", "dp", "zero", "pp",
                                                                    "pp-sg"};

const char *nn_mesh_axis_name(nn_mesh_axis a) { return a < NN_MESH_AXES ? nn_mesh_axis_names[a] : "?"; }
const char *nn_comm_tag_name(nn_comm_tag t) { return t < NN_COMM_TAG_COUNT ? nn_comm_tag_names[t] : "?"; }

nn_mesh_axis nn_comm_tag_axis(nn_comm_tag t)
{
    switch (t) {
    case NN_COMM_TP:
    case NN_COMM_SP:
    case NN_COMM_PP_SG: return NN_MESH_TP;
    case NN_COMM_DP:
    case NN_COMM_ZERO: return NN_MESH_DP;
    default: return NN_MESH_PP;
    }
}

void nn_strategy_default(nn_strategy *s)
{
    memset(s, 0, sizeof *s);
    s->dp = s->tp = s->pp = 1;
    s->schedule = NN_PP_1F1B;
    s->virtual_stages = 1;
    s->recompute = NN_RECOMPUTE_NONE;
    s->bucket_mb = 25.0;
    s->pp_scatter_gather = true;
}

np_status nn_strategy_parse_schedule(nn_strategy *s, const char *text, np_err *err)
{
    if (strcmp(text, "gpipe") == 0) {
        s->schedule = NN_PP_GPIPE;
        s->virtual_stages = 1;
        return NP_OK;
    }
    if (strcmp(text, "1f1b") == 0) {
        s->schedule = NN_PP_1F1B;
        s->virtual_stages = 1;
        return NP_OK;
    }
    if (strcmp(text, "zb-h1") == 0) {
        s->schedule = NN_PP_ZB_H1;
        s->virtual_stages = 1;
        return NP_OK;
    }
    if (strncmp(text, "interleaved:", 12) == 0) {
        char *end = NULL;
        long v = strtol(text + 12, &end, 10);
        if (text[12] >= '0' && text[12] <= '9' && *end == '\0' && v >= 2 && v <= 64) {
            s->schedule = NN_PP_INTERLEAVED;
            s->virtual_stages = (int)v;
            return NP_OK;
        }
    }
    return np_err_set(err, NP_ERR_USAGE,
                      "--schedule: expected gpipe, 1f1b, interleaved:V with V in 2 .. 64 or zb-h1, "
                      "got '%s'",
                      text);
}

const char *nn_schedule_name(const nn_strategy *s, char *buf, size_t n)
{
    switch (s->schedule) {
    case NN_PP_GPIPE: snprintf(buf, n, "gpipe"); break;
    case NN_PP_1F1B: snprintf(buf, n, "1f1b"); break;
    case NN_PP_INTERLEAVED: snprintf(buf, n, "interleaved:%d", s->virtual_stages); break;
    case NN_PP_ZB_H1: snprintf(buf, n, "zb-h1"); break;
    default: snprintf(buf, n, "?"); break;
    }
    return buf;
}

const char *nn_ddp_name(nn_ddp d)
{
    return d == NN_DDP_TORCH ? "torch" : d == NN_DDP_LOCAL ? "local" : "?";
}

static const char *const nn_recompute_names[] = {"none", "selective", "full", "uniform"};

const char *nn_recompute_name(nn_recompute r)
{
    return (unsigned)r < sizeof nn_recompute_names / sizeof *nn_recompute_names
               ? nn_recompute_names[r] : "?";
}

np_status nn_strategy_parse_recompute(nn_strategy *s, const char *text, np_err *err)
{
    for (size_t i = 0; i < sizeof nn_recompute_names / sizeof *nn_recompute_names; i++)
        if (strcmp(text, nn_recompute_names[i]) == 0) {
            s->recompute = (nn_recompute)i;
            return NP_OK;
        }
    return np_err_set(err, NP_ERR_USAGE,
                      "--recompute: expected none, selective, full or uniform, got '%s'", text);
}

void nn_mesh_coords(const nn_mesh *m, int rank, int *c)
{
    c[NN_MESH_TP] = rank % m->size[NN_MESH_TP];
    rank /= m->size[NN_MESH_TP];
    c[NN_MESH_PP] = rank % m->size[NN_MESH_PP];
    c[NN_MESH_DP] = rank / m->size[NN_MESH_PP];
}

int nn_mesh_rank(const nn_mesh *m, const int *c)
{
    return c[NN_MESH_TP] + m->size[NN_MESH_TP] * (c[NN_MESH_PP] + m->size[NN_MESH_PP] * c[NN_MESH_DP]);
}

void nn_mesh_free(nn_mesh *m)
{
    free(m->chip);
    m->chip = NULL;
}

/* Parses "tp,pp,dp" (any permutation) into axes[3], fastest first. */
static bool nn_mesh_parse_order(const char *order, nn_mesh_axis *axes)
{
    char buf[16];
    snprintf(buf, sizeof buf, "%s", order);
    bool seen[NN_MESH_AXES] = {false};
    int n = 0;
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        int a = -1;
        for (int k = 0; k < NN_MESH_AXES; k++)
            if (strcmp(tok, nn_mesh_axis_names[k]) == 0)
                a = k;
        if (a < 0 || seen[a] || n >= NN_MESH_AXES)
            return false;
        seen[a] = true;
        axes[n++] = (nn_mesh_axis)a;
    }
    return n == NN_MESH_AXES;
}

np_status nn_mesh_place(nn_mesh *m, int dp, int tp, int pp, const char *order,
                        const arch_config *arch, np_err *err)
{
    memset(m, 0, sizeof *m);
    if (dp < 1 || tp < 1 || pp < 1)
        return np_err_set(err, NP_ERR_RANGE, "--dp, --tp and --pp must be at least 1 (got %d, %d, %d)",
                          dp, tp, pp);
    int64_t n = (int64_t)dp * tp * pp;
    if (arch && n > arch->system.chips)
        return np_err_set(err, NP_ERR_RANGE,
                          "--dp %d --tp %d --pp %d need dp*tp*pp = %lld chips, but %s has %lld",
                          dp, tp, pp, (long long)n, arch->name, (long long)arch->system.chips);
    if (n > (1 << 24))
        return np_err_set(err, NP_ERR_RANGE, "dp*tp*pp = %lld ranks is more than npusim plans for",
                          (long long)n);
    nn_mesh_axis axes[NN_MESH_AXES] = {NN_MESH_TP, NN_MESH_PP, NN_MESH_DP};
    if (order && order[0] && !nn_mesh_parse_order(order, axes))
        return np_err_set(err, NP_ERR_USAGE,
                          "--placement: expected the axes tp, pp and dp in some order, fastest "
                          "first (e.g. tp,pp,dp), got '%s'", order);
    m->size[NN_MESH_DP] = dp;
    m->size[NN_MESH_TP] = tp;
    m->size[NN_MESH_PP] = pp;
    m->n_ranks = (int)n;
    m->chip = nn_malloc((size_t)n * sizeof *m->chip);
    if (!m->chip)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory placing the mesh");
    snprintf(m->order, sizeof m->order, "%s,%s,%s", nn_mesh_axis_names[axes[0]],
             nn_mesh_axis_names[axes[1]], nn_mesh_axis_names[axes[2]]);
    const arch_system *sys = arch ? &arch->system : NULL;
    bool torus = sys && (sys->topology == ARCH_TOPOLOGY_TORUS2D || sys->topology == ARCH_TOPOLOGY_TORUS3D);
    int64_t X = torus ? sys->torus_x : 0, Y = torus ? sys->torus_y : 0;
    bool torus_rows = torus && !(order && order[0]) && X % tp == 0 && Y % pp == 0 &&
                      (tp > 1 || pp > 1) && sys->chips > 1;
    for (int r = 0; r < m->n_ranks; r++) {
        int c[NN_MESH_AXES];
        nn_mesh_coords(m, r, c);
        int64_t chip;
        if (torus_rows) { /* x = tp + tp*a, y = pp + pp*b, z: dp = a + (X/tp)(b + (Y/pp) z) */
            int64_t ax = X / tp, by = Y / pp, d = c[NN_MESH_DP];
            int64_t a = d % ax, b = (d / ax) % by, z = d / (ax * by);
            chip = (c[NN_MESH_TP] + tp * a) + X * ((c[NN_MESH_PP] + pp * b) + Y * z);
        } else {
            chip = c[axes[0]] + (int64_t)m->size[axes[0]] *
                                    (c[axes[1]] + (int64_t)m->size[axes[1]] * c[axes[2]]);
        }
        m->chip[r] = (int)chip;
    }
    /* the placement in words */
    if (order && order[0])
        snprintf(m->why, sizeof m->why, "explicit order %s (fastest first): chip = mixed-radix "
                 "rank over %s", m->order, m->order);
    else if (!sys || sys->chips == 1 || n == 1)
        snprintf(m->why, sizeof m->why, "rank order: chip = rank");
    else if (torus_rows)
        snprintf(m->why, sizeof m->why,
                 "tp along torus x (rows of %lld chips), pp along y, dp over the rest", (long long)X);
    else if (sys->topology == ARCH_TOPOLOGY_HIERARCHICAL) {
        if (tp <= sys->island_chips && sys->island_chips % tp == 0)
            snprintf(m->why, sizeof m->why,
                     "tp groups inside islands of %lld chips (island links), pp and dp across "
                     "islands when they do not fit one", (long long)sys->island_chips);
        else
            snprintf(m->why, sizeof m->why,
                     "tp %d spans islands of %lld chips: tp traffic crosses the scale-out network",
                     tp, (long long)sys->island_chips);
    } else if (sys->topology == ARCH_TOPOLOGY_RING)
        snprintf(m->why, sizeof m->why,
                 "tp groups on consecutive ring neighbours, pipeline neighbours next to each other");
    else if (torus)
        snprintf(m->why, sizeof m->why,
                 "tp %d and pp %d do not divide the torus rows (%lld x %lld): rank order", tp, pp,
                 (long long)X, (long long)Y);
    else
        snprintf(m->why, sizeof m->why,
                 "switched network (every chip equally far): tp groups on consecutive chips");
    return NP_OK;
}
