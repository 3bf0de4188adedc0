/* cmd_sweep.c — `npusim sweep SWEEP.yaml [-j N] [-o results.csv] [--resume]`: every point of
 * a sweep file (traces/sweep.h, docs/sweeps.md) as its own npusim run, on a local pool or,
 * under mpirun, split over the ranks; a progress bar with ETA on a terminal; the Pareto
 * front at the end. Exit status 3 when the sweep ran and a point failed (after printing the
 * summary; the results hold every row), 2 for a bad sweep file, option or results file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "sweep.h"

const char cmd_sweep_usage[] =
    "usage: npusim sweep SWEEP.yaml [-j N] [-o RESULTS.csv] [--resume] [--dry-run] [--json]\n"
    "                   [--max-points N]\n"
    "       mpirun -np K npusim sweep SWEEP.yaml ...   (the points split over K ranks)\n"
    "\n"
    "  -j N            run N points at once (default 1)\n"
    "  -o F            the CSV of results (default results.csv); the JSON lines go next to\n"
    "                  it (F with .jsonl for .csv); both are regular files (a device,\n"
    "                  directory or symlink is refused)\n"
    "  --resume        continue the results of an interrupted sweep: finished points are\n"
    "                  kept, the others run (without it the files must not exist); results\n"
    "                  of another sweep or of an edited grid are refused\n"
    "  --max-points N  refuse a sweep of more than N points (default 100000), counted\n"
    "                  before anything runs\n"
    "  --dry-run       print each point's npusim command instead of running it\n"
    "  --json          print {\"points\", \"ran\", \"resumed\", \"failed\", \"csv\", \"jsonl\",\n"
    "                  \"pareto\": [points]}\n"
    "\n"
    "The sweep file: command, arch, grid, zip, points, metrics, pareto (docs/sweeps.md).\n"
    "Exit status: 0 when every point is ok; 3 when a point failed (the summary is printed\n"
    "and its row says why); 2 for a bad sweep file, option or results file; an interrupted\n"
    "sweep (Ctrl-C) exits 2 and --resume runs the rest.\n";

typedef struct progress {
    bool tty;
    time_t start;
    size_t first; /* points already done when this run started */
} progress;

static void show_progress(void *ctx, size_t done, size_t total, size_t failed)
{
    progress *p = ctx;
    if (!p->tty)
        return;
    if (!p->start) {
        p->start = time(NULL);
        p->first = done;
    }
    int width = 30, fill = total ? (int)(width * done / total) : width;
    double el = difftime(time(NULL), p->start);
    char eta[32] = "--:--";
    if (done > p->first && done < total) {
        double left = el / (double)(done - p->first) * (double)(total - done);
        snprintf(eta, sizeof eta, "%d:%02d", (int)left / 60, (int)left % 60);
    } else if (done == total) {
        snprintf(eta, sizeof eta, "done");
    }
    fprintf(stderr, "\r[%.*s%.*s] %zu/%zu points, %zu failed, ETA %s ", fill,
            "##############################", width - fill, "..............................",
            done, total, failed, eta);
    if (done == total)
        fputc('\n', stderr);
    fflush(stderr);
}

np_status cmd_sweep(int argc, char **argv, np_err *err)
{
    static const struct option longopts[] = {
        {"jobs", required_argument, NULL, 'j'}, {"output", required_argument, NULL, 'o'},
        {"resume", no_argument, NULL, 'r'},     {"dry-run", no_argument, NULL, 'n'},
        {"json", no_argument, NULL, 'J'},       {"help", no_argument, NULL, 'h'},
        {"max-points", required_argument, NULL, 'm'},
        {0}};
    uint64_t jobs = 1, max_points = SWEEP_MAX_POINTS_DEFAULT;
    const char *out = "results.csv";
    bool resume = false, dry = false, json = false;
    int c;
    cli_getopt_reset();
    while ((c = cli_getopt(argc, argv, "hj:o:", longopts, err)) != -1) {
        switch (c) {
        case 'j':
            if (cli_parse_u64("-j", optarg, 1, 1024, &jobs, err) != NP_OK)
                return err->status;
            break;
        case 'm':
            if (cli_parse_u64("--max-points", optarg, 1, SIZE_MAX / 2, &max_points, err) != NP_OK)
                return err->status;
            break;
        case 'o': out = optarg; break;
        case 'r': resume = true; break;
        case 'n': dry = true; break;
        case 'J': json = true; break;
        case 'h': cli_print_usage(cli_find("sweep")); return NP_OK;
        default: return err->status;
        }
    }
    if (optind >= argc)
        return np_err_set(err, NP_ERR_USAGE, "missing the sweep file (SWEEP.yaml)");
    if (optind + 1 < argc)
        return np_err_set(err, NP_ERR_USAGE, "one sweep file at a time ('%s' is extra)",
                          argv[optind + 1]);
    sweep *s;
    if (sweep_load(argv[optind], (size_t)max_points, &s, err) != NP_OK)
        return err->status;
    if (dry) {
        for (size_t p = 0; p < sweep_points(s); p++) {
            printf("%zu: npusim", p);
            for (const char *const *a = sweep_point_args(s, p); *a; a++)
                printf(" %s", *a);
            putchar('\n');
        }
        sweep_free(s);
        return NP_OK;
    }
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        sweep_free(s);
        return np_err_set(err, NP_ERR_IO, "cannot find the npusim executable (/proc/self/exe)");
    }
    self[n] = '\0';
    progress pr = {isatty(2), 0, 0};
    sweep_opts o = {self, out, (unsigned)jobs, resume, show_progress, &pr};
    sweep_result r;
    np_status st = sweep_run(s, &o, &r, err);
    char *jl = sweep_jsonl_path(out);
    if (st == NP_OK && !jl)
        st = np_err_set(err, NP_ERR_NOMEM, "out of memory");
    if (st == NP_OK && sweep_is_root()) {
        if (json) {
            json_t *front = json_array();
            for (size_t i = 0; front && i < r.n_pareto; i++)
                json_array_append_new(front, json_integer((json_int_t)r.pareto[i]));
            st = cli_print_json(json_pack("{s:I, s:I, s:I, s:I, s:s, s:s, s:o}", "points",
                                          (json_int_t)r.points, "ran", (json_int_t)r.ran,
                                          "resumed", (json_int_t)r.resumed, "failed",
                                          (json_int_t)r.failed, "csv", out, "jsonl", jl,
                                          "pareto", front),
                                err);
        } else {
            printf("%zu points: %zu ran, %zu resumed, %zu failed; results in %s and %s\n",
                   r.points, r.ran, r.resumed, r.failed, out, jl);
            if (r.n_pareto) {
                printf("Pareto front (%zu points):", r.n_pareto);
                for (size_t i = 0; i < r.n_pareto; i++)
                    printf(" %zu", r.pareto[i]);
                putchar('\n');
            }
        }
    }
    if (st == NP_OK && sweep_is_root() && r.failed)
        st = np_err_at(err, NP_ERR_SIM_FAULT, out, 0, 0, "%zu of %zu points failed (status "
                       "error; the row of each says why)", r.failed, r.points);
    free(jl);
    free(r.pareto);
    sweep_free(s);
    return st;
}
