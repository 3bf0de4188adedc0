/* cli_strategy.c — the strategy flags of `npusim plan` and `npusim run` (see cli_strategy.h). */
#include "cli_strategy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "parse.h"
#include "run_job.h"

void cli_strategy_init(cli_strategy *cs)
{
    memset(cs, 0, sizeof *cs);
    nn_strategy_default(&cs->s);
    cs->s.fuse_attention = true;
    cs->s.fuse_softmax = true;
    cs->o.compute = NN_BF16;
    cs->o.seed = 1;
}

_Static_assert(CLI_STRATEGY_OPT_END - CLI_STRATEGY_OPT_BASE <= 32, "cli_strategy.given has a bit per flag");

bool cli_strategy_is_flag(int c) { return c >= CLI_STRATEGY_OPT_BASE && c < CLI_STRATEGY_OPT_END; }

static np_status cs_int(const char *opt, const char *text, int64_t lo, int64_t hi, int64_t *out,
                        np_err *err)
{
    uint64_t v;
    if (cli_parse_u64(opt, text, (uint64_t)lo, (uint64_t)hi, &v, err) != NP_OK)
        return err->status;
    *out = (int64_t)v;
    return NP_OK;
}

static np_status cs_stage_layers(const char *text, nn_strategy *s, np_err *err)
{
    const char *p = text;
    int n = 0;
    int v[NN_STRATEGY_MAX_CHUNKS];
    for (;;) { /* every field read whole (the one door), at most NN_STRATEGY_MAX_CHUNKS */
        size_t len = strcspn(p, ",");
        char field[32];
        uint64_t x;
        if (n == NN_STRATEGY_MAX_CHUNKS || len >= sizeof field)
            return np_err_set(err, NP_ERR_USAGE, "--stage-layers: expected at most %d layer "
                              "counts separated by commas, got '%.60s'", NN_STRATEGY_MAX_CHUNKS,
                              text);
        memcpy(field, p, len);
        field[len] = '\0';
        if (np_parse_u64(NP_SRC_OPT("--stage-layers"), field, 0, 1 << 20, &x, err) != NP_OK)
            return err->status;
        v[n++] = (int)x;
        if (!p[len])
            break;
        p += len + 1;
    }
    for (int i = 0; i < n; i++)
        s->stage_layers[i] = v[i];
    s->n_stage_layers = n;
    return NP_OK;
}

static np_status cs_flag(cli_strategy *cs, int c, const char *arg, np_err *err)
{
    nn_strategy *s = &cs->s;
    int64_t v = 0;
    switch (c) {
    case CLI_STRATEGY_OPT_BATCH:
        return cs_int("--batch", arg, 1, INT64_MAX / 2, &cs->o.batch, err);
    case CLI_STRATEGY_OPT_SEQ:
        return cs_int("--seq", arg, 1, 1 << 24, &cs->o.seq, err);
    case CLI_STRATEGY_OPT_DP:
    case CLI_STRATEGY_OPT_TP:
    case CLI_STRATEGY_OPT_PP: {
        const char *opt = c == CLI_STRATEGY_OPT_DP ? "--dp" : c == CLI_STRATEGY_OPT_TP ? "--tp" : "--pp";
        if (cs_int(opt, arg, 1, 1 << 20, &v, err) != NP_OK)
            return err->status;
        *(c == CLI_STRATEGY_OPT_DP ? &s->dp : c == CLI_STRATEGY_OPT_TP ? &s->tp : &s->pp) = (int)v;
        return NP_OK;
    }
    case CLI_STRATEGY_OPT_ZERO:
        if (cs_int("--zero", arg, 0, 3, &v, err) != NP_OK)
            return err->status;
        s->zero = (int)v;
        return NP_OK;
    case CLI_STRATEGY_OPT_SP:
        s->sp = true;
        return NP_OK;
    case CLI_STRATEGY_OPT_MICROBATCH:
        return cs_int("--microbatch", arg, 1, INT64_MAX / 2, &s->microbatch, err);
    case CLI_STRATEGY_OPT_SCHEDULE:
        return nn_strategy_parse_schedule(s, arg, err);
    case CLI_STRATEGY_OPT_RECOMPUTE:
        return nn_strategy_parse_recompute(s, arg, err);
    case CLI_STRATEGY_OPT_ATTENTION: { /* flash; Megatron's fused softmax; every op alone */
        static const char *const forms[] = {"fused", "composite", "unfused"};
        size_t fi;
        if (np_parse_enum(NP_SRC_OPT("--attention"), arg, "attention", forms, 3, &fi, err) !=
            NP_OK)
            return err->status;
        s->fuse_attention = fi == 0;
        s->fuse_softmax = fi < 2;
        return NP_OK;
    }
    case CLI_STRATEGY_OPT_BUCKET: {
        double mb;
        if (np_parse_f64(NP_SRC_OPT("--bucket-mb"), arg, 1e-6, 1e6, &mb, err) != NP_OK)
            return err->status;
        s->bucket_mb = mb;
        return NP_OK;
    }
    case CLI_STRATEGY_OPT_PRECISION: {
        static const char *const precisions[] = {"bf16", "fp32"};
        size_t pi;
        if (np_parse_enum(NP_SRC_OPT("--precision"), arg, "precision", precisions, 2, &pi, err) !=
            NP_OK)
            return err->status;
        cs->o.compute = pi == 1 ? NN_F32 : NN_BF16;
        return NP_OK;
    }
    case CLI_STRATEGY_OPT_PLACEMENT:
        snprintf(s->placement, sizeof s->placement, "%s", arg);
        return NP_OK;
    case CLI_STRATEGY_OPT_STAGE_LAYERS:
        return cs_stage_layers(arg, s, err);
    case CLI_STRATEGY_OPT_DROPOUT:
        return np_parse_f64(NP_SRC_OPT("--dropout"), arg, 0, 0.99, &cs->o.dropout, err);
    case CLI_STRATEGY_OPT_NO_PP_SG:
        s->pp_scatter_gather = false;
        return NP_OK;
    case CLI_STRATEGY_OPT_DDP: {
        static const char *const impls[] = {"torch", "local"};
        size_t di;
        if (np_parse_enum(NP_SRC_OPT("--ddp"), arg, "DDP implementation", impls, 2, &di, err) !=
            NP_OK)
            return err->status;
        s->ddp = di == 1 ? NN_DDP_LOCAL : NN_DDP_TORCH;
        return NP_OK;
    }
    case CLI_STRATEGY_OPT_P2P: {
        static const char *const modes[] = {"eager", "blocking"};
        size_t mi;
        if (np_parse_enum(NP_SRC_OPT("--p2p"), arg, "p2p mode", modes, 2, &mi, err) != NP_OK)
            return err->status;
        s->p2p_blocking = mi == 1;
        return NP_OK;
    }
    case CLI_STRATEGY_OPT_HOST_SYNC:
        s->host_sync = true;
        return NP_OK;
    case CLI_STRATEGY_OPT_TP_OVERLAP:
        s->tp_comm_overlap = true;
        return NP_OK;
    case CLI_STRATEGY_OPT_PARAM_GATHER:
        s->overlap_param_gather = true;
        return NP_OK;
    case CLI_STRATEGY_OPT_LOSS_SCALE:
        return np_parse_f64(NP_SRC_OPT("--loss-scale"), arg, 0, 1e30, &s->loss_scale, err);
    case CLI_STRATEGY_OPT_CLIP_GRAD:
        return np_parse_f64(NP_SRC_OPT("--clip-grad"), arg, 0, 1e30, &s->clip_grad, err);
    default:
        return np_err_set(err, NP_ERR_INTERNAL, "not a strategy option");
    }
}

np_status cli_strategy_flag(cli_strategy *cs, int c, const char *arg, np_err *err)
{
    np_status st = cs_flag(cs, c, arg, err); /* refuses any c that is no strategy flag */
    if (st == NP_OK)
        cs->given |= 1u << (c - CLI_STRATEGY_OPT_BASE);
    return st;
}

bool cli_strategy_given(const cli_strategy *cs, int c)
{
    return cli_strategy_is_flag(c) && (cs->given >> (c - CLI_STRATEGY_OPT_BASE) & 1u);
}

nn_optim cli_strategy_optim(void) { return run_job_optim(); }
