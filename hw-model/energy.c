/* energy.c — energy and power from action counts (energy.h; docs/energy.md). */
#include "energy.h"

#include <math.h>

#include "human.h"

const char *const energy_part_names[ENERGY_PART_COUNT] = {
    [ENERGY_PART_MAC] = "mac",       [ENERGY_PART_VECTOR] = "vector",
    [ENERGY_PART_SRAM] = "sram",     [ENERGY_PART_ACC] = "acc",
    [ENERGY_PART_L2] = "l2",         [ENERGY_PART_HBM] = "hbm",
    [ENERGY_PART_NOC] = "noc",       [ENERGY_PART_LINK] = "link",
    [ENERGY_PART_STATIC] = "static",
};

bool energy_modelled(const arch_config *cfg)
{
    for (size_t i = 0; i < ARCH_KEY_COUNT; i++)
        if (arch_keys[i].section == ARCH_SECTION_energy && arch_keys[i].type == ARCH_TYPE_REAL &&
            *(const double *)((const char *)cfg + arch_keys[i].offset) != 0)
            return true;
    return false;
}

void energy_counts_of_report(const core_report *r, energy_counts *out)
{
    *out = (energy_counts){0};
    for (unsigned d = 0; d < ISA_DTYPE_COUNT; d++)
        out->macs[d] = r->macs[d];
    out->vector_ops = r->vector_ops;
    out->sram_bytes = r->sram_read_bytes + r->sram_write_bytes;
    out->acc_bytes = r->acc_read_bytes + r->acc_write_bytes;
    out->l2_bytes = r->l2.present ? r->l2.moved_bytes : 0;
    out->hbm_bytes = r->hbm_read_bytes + r->hbm_write_bytes;
    out->noc_flit_hops = r->noc_flit_hops;
}

void energy_counts_of_net(const net *n, energy_counts *out)
{
    *out = (energy_counts){0};
    for (uint32_t l = 0; l < net_links(n); l++) {
        net_link_info li;
        net_link_get(n, l, &li);
        out->link_bytes += li.bytes;
    }
}

void energy_counts_add(energy_counts *a, const energy_counts *b, uint64_t times)
{
    for (unsigned d = 0; d < ISA_DTYPE_COUNT; d++)
        a->macs[d] += times * b->macs[d];
    a->vector_ops += times * b->vector_ops;
    a->sram_bytes += times * b->sram_bytes;
    a->acc_bytes += times * b->acc_bytes;
    a->l2_bytes += times * b->l2_bytes;
    a->hbm_bytes += times * b->hbm_bytes;
    a->noc_flit_hops += times * b->noc_flit_hops;
    a->link_bytes += times * b->link_bytes;
}

/* The energy of one MAC of dtype d in pJ (0 for a dtype the array does not multiply). */
static double mac_pj(const arch_energy *e, isa_dtype d)
{
    switch (d) {
    case ISA_DTYPE_BF16: return e->mac_bf16_pj;
    case ISA_DTYPE_FP16: return e->mac_fp16_pj;
    case ISA_DTYPE_FP32: return e->mac_fp32_pj;
    case ISA_DTYPE_INT8: return e->mac_int8_pj;
    default: return 0;
    }
}

double energy_dynamic_j(const arch_config *cfg, const energy_counts *c, double *part_j)
{
    const arch_energy *e = &cfg->energy;
    double p[ENERGY_PART_COUNT] = {0}; /* pJ */
    for (unsigned d = 0; d < ISA_DTYPE_COUNT; d++)
        p[ENERGY_PART_MAC] +=
            (double)c->macs[d] * (mac_pj(e, (isa_dtype)d) + e->operand_pj_per_mac);
    p[ENERGY_PART_VECTOR] = (double)c->vector_ops * e->vector_op_pj;
    p[ENERGY_PART_SRAM] = (double)c->sram_bytes * e->sram_pj_per_byte;
    p[ENERGY_PART_ACC] = (double)c->acc_bytes * e->acc_pj_per_byte;
    p[ENERGY_PART_L2] = (double)c->l2_bytes * e->l2_pj_per_byte;
    p[ENERGY_PART_HBM] = 8.0 * (double)c->hbm_bytes * e->hbm_pj_per_bit;
    p[ENERGY_PART_NOC] = (double)c->noc_flit_hops * e->noc_pj_per_flit_hop;
    p[ENERGY_PART_LINK] = 8.0 * (double)c->link_bytes * e->link_pj_per_bit;
    double sum = 0;
    for (int i = 0; i < ENERGY_PART_COUNT; i++) {
        sum += p[i] * 1e-12;
        if (part_j)
            part_j[i] = p[i] * 1e-12;
    }
    return sum;
}

void energy_figures_of(const arch_config *cfg, const energy_counts *c, uint32_t chips,
                       uint64_t time_ps, double flops, energy_figures *out)
{
    energy_figures f = {.modelled = energy_modelled(cfg)};
    f.dynamic_j = energy_dynamic_j(cfg, c, f.part_j);
    f.time_s = (double)time_ps * 1e-12;
    f.static_j = cfg->energy.static_w * f.time_s * (double)chips;
    f.part_j[ENERGY_PART_STATIC] = f.static_j;
    f.total_j = f.dynamic_j + f.static_j;
    if (f.time_s > 0) {
        f.avg_w = f.total_j / f.time_s;
        f.dynamic_w = f.dynamic_j / f.time_s;
        if (f.avg_w > 0)
            f.tflops_per_w = flops / f.time_s / f.avg_w / 1e12;
    }
    *out = f;
}

json_t *energy_figures_json(const energy_figures *f)
{
    json_t *parts = json_object();
    for (int i = 0; parts && i < ENERGY_PART_COUNT; i++)
        if (json_object_set_new(parts, energy_part_names[i], json_real(f->part_j[i])))
            json_decref(parts), parts = NULL;
    if (!parts)
        return NULL;
    return json_pack("{s:f, s:f, s:f, s:f, s:f, s:f, s:o}", "total_j", f->total_j, "dynamic_j",
                     f->dynamic_j, "static_j", f->static_j, "avg_w", f->avg_w, "dynamic_w",
                     f->dynamic_w, "tflops_per_w", f->tflops_per_w, "parts_j", parts);
}

/* Average power of ps and acts: dynamic energy over the time plus the chips' static power. */
static double gov_w(const arch_config *cfg, uint32_t chips, uint64_t ps, const energy_counts *a)
{
    double t = (double)ps * 1e-12;
    return (t > 0 ? energy_dynamic_j(cfg, a, NULL) / t : 0) + cfg->energy.static_w * chips;
}

np_status energy_govern(const arch_config *cfg, uint32_t chips, uint64_t ps,
                        const energy_counts *acts, energy_sim_fn sim, void *ctx,
                        energy_throttle *out, np_err *err)
{
    double f0 = cfg->core.clock_ghz, cap = cfg->chip.power_cap_w * chips;
    double ps_w = cfg->energy.static_w * chips;
    energy_throttle th = {.nominal_ghz = f0, .ghz = f0, .nominal_ps = ps, .ps = ps};
    th.nominal_w = th.w = gov_w(cfg, chips, ps, acts);
    if (cap <= 0 || th.nominal_w <= cap) {
        *out = th;
        return NP_OK;
    }
    if (ps_w >= cap)
        return np_err_set(err, NP_ERR_INCONSISTENT, "energy.static_w = %g W reaches "
                          "chip.power_cap_w = %g W: no core clock keeps a chip under its cap",
                          cfg->energy.static_w, cfg->chip.power_cap_w);
    th.capped = true;
    double lo = 0, hi = f0, last = 0;  /* lo: the fastest clock known under the cap (0: none) */
    uint64_t lo_ps = 0;
    double lo_w = 0;
    double f = f0 * (cap - ps_w) / (th.nominal_w - ps_w), f_min = f0 / 100;
    for (int it = 0; it < 12; it++) {
        if (f < f_min)
            f = f_min;
        uint64_t t;
        energy_counts a;
        np_status st = sim(ctx, f, &t, &a, err);
        if (st != NP_OK)
            return st;
        th.sims++;
        last = f;
        double w = gov_w(cfg, chips, t, &a);
        if (w <= cap) {
            lo = f, lo_ps = t, lo_w = w;
            if (w >= 0.99 * cap || f == f_min)
                break;
        } else {
            hi = f;
        }
        if (lo > 0 && hi - lo <= 0.005 * f0)
            break;
        f = lo > 0 ? (lo + hi) / 2 : f * (cap - ps_w) / (w - ps_w);
    }
    if (lo == 0) /* never under: the slowest clock tried is the answer */
        lo = f_min;
    if (last != lo) { /* the caller keeps the last simulation: make it the chosen clock's */
        uint64_t t;
        energy_counts a;
        np_status st = sim(ctx, lo, &t, &a, err);
        if (st != NP_OK)
            return st;
        th.sims++;
        lo_ps = t, lo_w = gov_w(cfg, chips, t, &a);
    }
    th.ghz = lo, th.ps = lo_ps, th.w = lo_w;
    *out = th;
    return NP_OK;
}

void energy_print(const energy_figures *f, const char *indent, FILE *out)
{
    char a[NP_HUMAN_MAX], b[NP_HUMAN_MAX], c[NP_HUMAN_MAX], d[NP_HUMAN_MAX];
    fprintf(out, "%senergy        %s: %s average (dynamic %s, static %s)", indent,
            np_human_j(f->total_j, a, sizeof a), np_human_si(f->avg_w, "W", b, sizeof b),
            np_human_si(f->dynamic_w, "W", c, sizeof c),
            np_human_si(f->time_s > 0 ? f->static_j / f->time_s : 0, "W", d, sizeof d));
    if (f->tflops_per_w > 0)
        fprintf(out, ", %.3g TFLOP/s per W", f->tflops_per_w);
    fprintf(out, "\n%s              ", indent);
    bool first = true;
    for (int i = 0; i < ENERGY_PART_COUNT; i++) {
        if (f->part_j[i] == 0)
            continue;
        fprintf(out, "%s%s %s (%.1f%%)", first ? "" : ", ", energy_part_names[i],
                np_human_j(f->part_j[i], a, sizeof a),
                f->total_j > 0 ? 100.0 * f->part_j[i] / f->total_j : 0.0);
        first = false;
    }
    fprintf(out, "%s\n", first ? "nothing" : "");
}
