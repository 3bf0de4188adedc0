/* mxu_report.c — SCALE-Sim's report files (see mxu_report.h). */
#include "mxu_report.h"

#include <errno.h>
#include <stdbool.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

const char *const mxu_report_compute_columns[] = {
    "LayerID", "Total Cycles", "Stall Cycles", "Overall Util %", "Mapping Efficiency %",
    "Compute Util %", NULL};
const char *const mxu_report_bandwidth_columns[] = {
    "LayerID", "Avg IFMAP SRAM BW", "Avg FILTER SRAM BW", "Avg OFMAP SRAM BW",
    "Avg IFMAP DRAM BW", "Avg FILTER DRAM BW", "Avg OFMAP DRAM BW", NULL};
const char *const mxu_report_detail_columns[] = {
    "LayerID",
    "SRAM IFMAP Start Cycle", "SRAM IFMAP Stop Cycle", "SRAM IFMAP Reads",
    "SRAM Filter Start Cycle", "SRAM Filter Stop Cycle", "SRAM Filter Reads",
    "SRAM OFMAP Start Cycle", "SRAM OFMAP Stop Cycle", "SRAM OFMAP Writes",
    "DRAM IFMAP Start Cycle", "DRAM IFMAP Stop Cycle", "DRAM IFMAP Reads",
    "DRAM Filter Start Cycle", "DRAM Filter Stop Cycle", "DRAM Filter Reads",
    "DRAM OFMAP Start Cycle", "DRAM OFMAP Stop Cycle", "DRAM OFMAP Writes", NULL};

void mxu_report_words(const mxu_layer *l, uint64_t *ifmap, uint64_t *filter, uint64_t *ofmap)
{
    *filter = l->k * l->n;
    *ofmap = l->m * l->n;
    if (!l->is_conv) {
        *ifmap = l->m * l->k;
        return;
    }
    const mxu_conv *c = &l->conv;
    uint64_t eh = (c->ifmap_h - c->filt_h + c->stride_h + c->stride_h - 1) / c->stride_h;
    uint64_t ew = (c->ifmap_w - c->filt_w + c->stride_w + c->stride_w - 1) / c->stride_w;
    uint64_t uh = (eh - 1) * c->stride_h + c->filt_h, uw = (ew - 1) * c->stride_w + c->filt_w;
    *ifmap = (uh < c->ifmap_h ? uh : c->ifmap_h) * (uw < c->ifmap_w ? uw : c->ifmap_w) *
             c->channels;
}

/* x as Python's str(float) writes it: the shortest %.*g that reads back to x, with ".0" on
 * a whole number. */
static void report_real(FILE *f, double x)
{
    char buf[40];
    for (int p = 1; p <= 17; p++) {
        snprintf(buf, sizeof buf, "%.*g", p, x);
        if (strtod(buf, NULL) == x)
            break;
    }
    if (!strpbrk(buf, ".eEn"))
        strcat(buf, ".0");
    fputs(buf, f);
}

static void report_header(FILE *f, const char *const *cols)
{
    for (size_t i = 0; cols[i]; i++)
        fprintf(f, "%s%s", i ? ", " : "", cols[i]);
    fputs(",\n", f);
}

static np_status report_open(const char *folder, const char *name, FILE **f, char *path,
                             size_t n, np_err *err)
{
    snprintf(path, n, "%s/%s", folder, name);
    *f = fopen(path, "w");
    if (!*f)
        return np_err_at(err, NP_ERR_IO, path, 0, 0, "cannot create: %s", strerror(errno));
    return NP_OK;
}

static np_status report_close(FILE *f, const char *path, np_err *err)
{
    bool bad = ferror(f) != 0;
    if (fclose(f) != 0 || bad)
        return np_err_at(err, NP_ERR_IO, path, 0, 0, "cannot write");
    return NP_OK;
}

static np_status report_mkdir(const char *path, np_err *err)
{
    if (mkdir(path, 0777) == 0 || errno == EEXIST)
        return NP_OK;
    return np_err_at(err, NP_ERR_IO, path, 0, 0, "cannot create the folder: %s",
                     strerror(errno));
}

np_status mxu_reports_write(const char *dir, const char *run_name, const mxu_report_row *r,
                            size_t n, np_err *err)
{
    char folder[1024], path[1100];
    if (strchr(run_name, '/') || !run_name[0])
        return np_err_set(err, NP_ERR_USAGE, "run name '%s' is not a folder name", run_name);
    snprintf(folder, sizeof folder, "%s/%s", dir, run_name);
    if (report_mkdir(dir, err) != NP_OK || report_mkdir(folder, err) != NP_OK)
        return err->status;
    FILE *f;
    if (report_open(folder, "COMPUTE_REPORT.csv", &f, path, sizeof path, err) != NP_OK)
        return err->status;
    report_header(f, mxu_report_compute_columns);
    for (size_t i = 0; i < n; i++) {
        const mxu_timing *t = &r[i].t;
        /* SCALE-Sim: num_compute x 100 / (total_cycles x num_mac_unit) */
        double overall = r[i].total_cycles && r[i].pes
                             ? (double)t->macs * 100 /
                                   ((double)r[i].total_cycles * (double)r[i].pes)
                             : 0;
        fprintf(f, "%zu, %" PRIu64 ", %" PRIu64 ", ", i, r[i].total_cycles, r[i].stall_cycles);
        report_real(f, overall);
        fputs(", ", f);
        report_real(f, t->mapping_efficiency_pct);
        fputs(", ", f);
        report_real(f, t->compute_util_pct);
        fputs(",\n", f);
    }
    if (report_close(f, path, err) != NP_OK)
        return err->status;
    if (report_open(folder, "BANDWIDTH_REPORT.csv", &f, path, sizeof path, err) != NP_OK)
        return err->status;
    report_header(f, mxu_report_bandwidth_columns);
    for (size_t i = 0; i < n; i++) {
        const mxu_timing *t = &r[i].t;
        double tc = (double)(r[i].total_cycles ? r[i].total_cycles : 1);
        double dc = (double)(r[i].dram_cycles ? r[i].dram_cycles : 1);
        double v[6] = {(double)t->sram_ifmap_reads / tc, (double)t->sram_filter_reads / tc,
                       (double)t->sram_ofmap_writes / tc, (double)r[i].ifmap_words / dc,
                       (double)r[i].filter_words / dc, (double)r[i].ofmap_words / dc};
        fprintf(f, "%zu", i);
        for (int k = 0; k < 6; k++) {
            fputs(", ", f);
            report_real(f, v[k]);
        }
        fputs(",\n", f);
    }
    if (report_close(f, path, err) != NP_OK)
        return err->status;
    if (report_open(folder, "DETAILED_ACCESS_REPORT.csv", &f, path, sizeof path, err) != NP_OK)
        return err->status;
    report_header(f, mxu_report_detail_columns);
    for (size_t i = 0; i < n; i++) {
        const mxu_timing *t = &r[i].t;
        uint64_t cs = t->scalesim_cycles, ds = r[i].dram_cycles ? r[i].dram_cycles - 1 : 0;
        uint64_t counts[6] = {t->sram_ifmap_reads, t->sram_filter_reads, t->sram_ofmap_writes,
                              r[i].ifmap_words, r[i].filter_words, r[i].ofmap_words};
        fprintf(f, "%zu", i);
        for (int k = 0; k < 6; k++) {
            fputs(", 0.0, ", f);
            report_real(f, (double)(k < 3 ? cs : ds));
            fprintf(f, ", %" PRIu64, counts[k]);
        }
        fputs(",\n", f);
    }
    return report_close(f, path, err);
}
