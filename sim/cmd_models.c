/* cmd_models.c — `npusim models`: the model zoo (NAME.model files in models/, or $NPUSIM_MODEL_DIR). */
#include <inttypes.h>
#include <stdio.h>

#include "cli.h"
#include "csv.h"
#include "human.h"
#include "model.h"

const char cmd_models_usage[] =
    "usage: npusim models [--json | --csv]\n"
    "\n"
    "  Lists the zoo's models (NAME.model in $NPUSIM_MODEL_DIR, default: models/) with their\n"
    "  family, parameter count, active parameters (what one token uses: a mixture of experts'\n"
    "  chosen experts) and description. Any name works with `npusim summary --model`.\n"
    "  --json          print [{\"name\", \"family\", \"params\", \"active_params\",\n"
    "                  \"description\"}, ...]\n"
    "  --csv           print the table as CSV (the same columns)\n";

np_status cmd_models(int argc, char **argv, np_err *err)
{
    static const struct option longopts[] = {
        {"json", no_argument, NULL, 'j'}, {"csv", no_argument, NULL, 'c'},
        {"help", no_argument, NULL, 'h'}, {0}};
    bool json = false, csv = false;
    int c;
    cli_getopt_reset();
    while ((c = cli_getopt(argc, argv, "h", longopts, err)) != -1) {
        switch (c) {
        case 'j': json = true; break;
        case 'c': csv = true; break;
        case 'h': cli_print_usage(cli_find("models")); return NP_OK;
        default: return err->status;
        }
    }
    if (optind < argc)
        return np_err_set(err, NP_ERR_USAGE, "unexpected argument '%s'", argv[optind]);
    if (json && csv)
        return np_err_set(err, NP_ERR_USAGE, "--json and --csv: one output format at a time");
    char **names;
    size_t n;
    if (nn_model_names(&names, &n, err) != NP_OK)
        return err->status;
    json_t *arr = json ? json_array() : NULL;
    np_status st = NP_OK;
    static const char *const head[] = {"name", "family", "params", "active_params", "description"};
    if (csv)
        csv_row(stdout, head, 5);
    else if (!json)
        printf("%-16s %-13s %16s %16s  %s\n", "model", "family", "params", "active", "description");
    for (size_t i = 0; i < n && st == NP_OK; i++) {
        nn_model_desc d;
        nn_model m;
        nn_model_opts o = {.batch = 1, .seq = 1};
        if ((st = nn_model_load(names[i], &d, err)) != NP_OK)
            break;
        o.seq += nn_model_int(&d, "mtp", 0); /* a token for each multi-token prediction depth */
        if ((st = nn_model_build(&d, &o, &m, err)) != NP_OK) {
            nn_graph_free(m.g);
            break;
        }
        int64_t params = nn_graph_param_count(m.g), active = nn_graph_active_param_count(m.g);
        nn_graph_free(m.g);
        const char *desc = nn_model_word(&d, "description", "");
        if (json)
            json_array_append_new(arr, json_pack("{s:s, s:s, s:I, s:I, s:s}", "name", d.name,
                                                 "family", d.family, "params", (json_int_t)params,
                                                 "active_params", (json_int_t)active,
                                                 "description", desc));
        else if (csv) {
            char pb[24], ab[24];
            snprintf(pb, sizeof pb, "%" PRId64, params);
            snprintf(ab, sizeof ab, "%" PRId64, active);
            const char *row[] = {d.name, d.family, pb, ab, desc};
            csv_row(stdout, row, 5);
        } else {
            char pb[NP_HUMAN_MAX], ab[NP_HUMAN_MAX];
            printf("%-16s %-13s %16s %16s  %s\n", d.name, d.family,
                   np_human_int(params, pb, sizeof pb), np_human_int(active, ab, sizeof ab), desc);
        }
    }
    nn_model_names_free(names, n);
    if (st != NP_OK) {
        json_decref(arr);
        return st;
    }
    return json ? cli_print_json(arr, err) : NP_OK;
}
