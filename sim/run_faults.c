/* run_faults.c — stragglers and the goodput estimate of a run (see run_faults.h). */
#include "run_faults.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "parse.h"

np_status run_faults_slow_flag(run_faults_job *j, const char *arg, uint32_t chips, np_err *err)
{
    const char *colon = strchr(arg, ':');
    char chip_text[24];
    if (!colon || colon == arg || (size_t)(colon - arg) >= sizeof chip_text)
        return np_err_set(err, NP_ERR_USAGE, "--slow-chip: expected CHIP:FACTOR (e.g. 3:1.5: "
                          "chip 3's compute takes 1.5 times as long), got '%s'", arg);
    memcpy(chip_text, arg, (size_t)(colon - arg));
    chip_text[colon - arg] = 0;
    uint64_t chip;
    double f;
    if (np_parse_u64(NP_SRC_OPT("--slow-chip"), chip_text, 0, chips - 1, &chip, err) != NP_OK ||
        np_parse_f64(NP_SRC_OPT("--slow-chip"), colon + 1, 1e-3, 1e6, &f, err) != NP_OK)
        return err->status;
    for (uint32_t i = 0; i < j->n_slow; i++)
        if (j->slow[i].chip == chip) {
            j->slow[i].factor = f;
            return NP_OK;
        }
    if (j->n_slow == RUN_SLOW_MAX)
        return np_err_set(err, NP_ERR_RANGE, "--slow-chip: at most %d chips", RUN_SLOW_MAX);
    j->slow[j->n_slow++] = (run_slow_chip){.chip = (uint32_t)chip, .factor = f};
    return NP_OK;
}

np_status run_faults_link_flag(run_faults_job *j, const char *arg, bool failed, np_err *err)
{
    const char *flag = failed ? "--fail-link" : "--slow-link";
    const char *colon = failed ? NULL : strrchr(arg, ':');
    size_t len = failed ? strlen(arg) : colon ? (size_t)(colon - arg) : 0;
    double share = 0;
    if (!failed && (!colon || len == 0))
        return np_err_set(err, NP_ERR_USAGE, "%s: expected LINK:SHARE (the share of its "
                          "bandwidth left, e.g. chip3->chip4:0.5), got '%s'", flag, arg);
    if (len == 0 || len >= sizeof j->links[0].name)
        return np_err_set(err, NP_ERR_USAGE, "%s: expected a link's name as the run's busiest "
                          "links print it (e.g. chip3->chip4), got '%s'", flag, arg);
    if (!failed && np_parse_f64(NP_SRC_OPT(flag), colon + 1, 1e-9, 1, &share, err) != NP_OK)
        return err->status;
    net_link_fault f = {.factor = share};
    memcpy(f.name, arg, len);
    f.name[len] = 0;
    for (uint32_t i = 0; i < j->n_links; i++)
        if (strcmp(j->links[i].name, f.name) == 0) {
            j->links[i] = f;
            return NP_OK;
        }
    if (j->n_links == RUN_SLOW_MAX)
        return np_err_set(err, NP_ERR_RANGE, "%s: at most %d links", flag, RUN_SLOW_MAX);
    j->links[j->n_links++] = f;
    return NP_OK;
}

double run_faults_ckpt_bytes(const nn_plan *p, np_err *err)
{
    double most = 0;
    int dp = p->s.dp > 0 ? p->s.dp : 1;
    for (int c = 0; c < p->n_classes; c++) {
        nn_plan_mem m;
        if (nn_plan_class_memory(p, &p->classes[c], &m, err) != NP_OK)
            return -1;
        double b = (p->s.zero >= 3 ? (double)m.params_bytes : (double)m.params_bytes / dp) +
                   (p->s.zero >= 1 ? (double)m.optstate_bytes : (double)m.optstate_bytes / dp);
        most = b > most ? b : most;
    }
    return most;
}

np_status run_faults_goodput(const run_faults_job *j, const nn_plan *p, const arch_config *cfg,
                             double step_s, uint32_t chips, run_report_faults *out, np_err *err)
{
    double bytes = run_faults_ckpt_bytes(p, err);
    if (bytes < 0)
        return err->status;
    double bw = cfg->system.storage_gb_per_s * 1e9, write_s = j->ckpt_write_s;
    double read_s = bw > 0 ? bytes / bw : 0;
    if (write_s < 0) {
        if (bw <= 0)
            return np_err_set(err, NP_ERR_USAGE, "--mtbf-hours: the checkpoint's write time "
                              "is not known: give --ckpt-write-s, or the storage bandwidth "
                              "per chip (--set system.storage_gb_per_s=GB/s)");
        write_s = bytes / bw;
    }
    out->goodput = true;
    out->ckpt_bytes = bytes;
    out->ckpt_read_s = read_s;
    out->step_s = step_s;
    out->in = (goodput_in){.mtbf_s = j->mtbf_hours * 3600, .chips = chips,
                           .ckpt_write_s = write_s, .restart_s = read_s + j->restart_s,
                           .interval_s = j->interval_s};
    return goodput_estimate(&out->in, &out->out, err);
}

bool run_faults_json(const run_report_faults *f, json_t *j)
{
    json_t *slow = json_array();
    bool ok = slow != NULL;
    for (uint32_t i = 0; ok && i < f->n_slow; i++)
        ok = json_array_append_new(slow, json_pack("{s:I, s:f}", "chip",
                                                   (json_int_t)f->slow[i].chip, "factor",
                                                   f->slow[i].factor)) == 0;
    ok = ok && json_object_set_new(j, "slow_chips", slow) == 0;
    json_t *links = json_array();
    ok = ok && links;
    for (uint32_t i = 0; ok && i < f->n_links; i++)
        ok = json_array_append_new(links, json_pack("{s:s, s:f, s:b}", "name", f->links[i].name,
                                                    "share", f->links[i].factor, "failed",
                                                    f->links[i].factor == 0)) == 0;
    ok = ok && json_object_set_new(j, "link_faults", links) == 0;
    if (!ok || !f->goodput)
        return ok;
    const goodput_out *o = &f->out;
    json_t *g = json_pack("{s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f}",
                          "mtbf_s", f->in.mtbf_s, "job_mtbf_s", o->job_mtbf_s,
                          "failures_per_day", o->failures_per_day,
                          "checkpoint_bytes", f->ckpt_bytes,
                          "checkpoint_write_s", f->in.ckpt_write_s,
                          "checkpoint_read_s", f->ckpt_read_s, "restart_s", f->in.restart_s,
                          "best_interval_s", o->best_interval_s, "best_goodput", o->best_goodput,
                          "young_interval_s", o->young_interval_s,
                          "daly_interval_s", o->daly_interval_s,
                          "interval_s", f->in.interval_s, "interval_goodput",
                          o->interval_goodput);
    return g && json_object_set_new(j, "goodput", g) == 0;
}
