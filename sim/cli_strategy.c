/* cli_strategy.c — the strategy flags of `npusim plan` and `npusim run` (see cli_strategy.h). */
#include "cli_strategy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

void cli_strategy_init(cli_strategy *cs)
{
    memset(cs, 0, sizeof *cs);
    nn_strategy_default(&cs->s);
    cs->o.compute = NN_BF16;
    cs->o.seed = 1;
}

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
    s->n_stage_layers = 0;
    while (*p) {
        char *end = NULL;
        long v = strtol(p, &end, 10);
        if (end == p || v < 0 || (*end && *end != ',') || s->n_stage_layers == NN_STRATEGY_MAX_CHUNKS)
            return np_err_set(err, NP_ERR_USAGE,
                              "--stage-layers: expected layer counts separated by commas, got '%s'",
                              text);
        s->stage_layers[s->n_stage_layers++] = (int)v;
        p = *end ? end + 1 : end;
    }
    return NP_OK;
}

np_status cli_strategy_flag(cli_strategy *cs, int c, const char *arg, np_err *err)
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
    case CLI_STRATEGY_OPT_BUCKET: {
        char *end = NULL;
        double mb = strtod(arg, &end);
        if (end == arg || *end || !(mb > 0) || mb > 1e6)
            return np_err_set(err, NP_ERR_USAGE, "--bucket-mb: expected a positive number of "
                              "MiB, got '%s'", arg);
        s->bucket_mb = mb;
        return NP_OK;
    }
    case CLI_STRATEGY_OPT_PRECISION:
        if (strcmp(arg, "bf16") && strcmp(arg, "fp32"))
            return np_err_set(err, NP_ERR_USAGE, "--precision: expected bf16 or fp32, got '%s'",
                              arg);
        cs->o.compute = strcmp(arg, "fp32") == 0 ? NN_F32 : NN_BF16;
        return NP_OK;
    case CLI_STRATEGY_OPT_PLACEMENT:
        snprintf(s->placement, sizeof s->placement, "%s", arg);
        return NP_OK;
    case CLI_STRATEGY_OPT_STAGE_LAYERS:
        return cs_stage_layers(arg, s, err);
    default:
        return np_err_set(err, NP_ERR_INTERNAL, "not a strategy option");
    }
}

nn_optim cli_strategy_optim(void)
{
    return (nn_optim){.kind = NN_OPTIM_ADAMW, .lr = 1e-4, .beta1 = 0.9, .beta2 = 0.95,
                      .eps = 1e-8, .weight_decay = 0.1};
}
