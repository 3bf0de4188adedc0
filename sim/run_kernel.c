/* run_kernel.c — a plan's compute node as a kernel of the kernel ABI, its key, and its timing
 * on the core model with an optional cache file (see run_kernel.h). */
#include "run_kernel.h"
#include "wallclock.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "human.h"
#include "core.h"
#include "lower.h"
#include "hmap.h"

/* ---- nodes --------------------------------------------------------------------------------- */

bool run_node_is_view(const nn_tensor *node)
{
    return lower_node_is_view(node);
}

char *run_node_desc(const nn_tensor *node, char *buf, size_t n)
{
    return lower_node_desc(node, buf, n);
}

np_status run_kernel_of_node(const nn_tensor *node, const arch_config *cfg, kc_kernel *k,
                             np_err *err)
{
    return lower_node_kernel(node, (uint32_t)cfg->chip.cores, k, err);
}

/* ---- keys ---------------------------------------------------------------------------------- */

static size_t rk_tensor_key(const kc_tensor *t, char *buf, size_t n)
{
    size_t k = (size_t)snprintf(buf, n, "%s[", nn_dtype_name(t->dtype));
    for (int d = 0; d < t->ndim && k < n; d++)
        k += (size_t)snprintf(buf + k, n - k, "%s%" PRId64, d ? "," : "", t->shape[d]);
    /* strides only when they are not the dense row-major ones */
    int64_t dense = (int64_t)nn_dtype_size(t->dtype);
    bool is_dense = true;
    for (int d = t->ndim - 1; d >= 0; d--) {
        is_dense = is_dense && t->stride[d] == dense;
        dense *= t->shape[d];
    }
    if (!is_dense)
        for (int d = 0; d < t->ndim && k < n; d++)
            k += (size_t)snprintf(buf + k, n - k, "%s%" PRId64, d ? "," : "/", t->stride[d]);
    if (k < n)
        k += (size_t)snprintf(buf + k, n - k, "]");
    return k;
}

void run_kernel_key(const kc_kernel *k, char *buf, size_t n)
{
    size_t o = (size_t)snprintf(buf, n, "%s", nn_op_name(k->op));
    for (int i = 0; i < k->n_in && o < n; i++) {
        o += (size_t)snprintf(buf + o, n - o, " in%d=", i);
        if (o < n)
            o += rk_tensor_key(&k->in[i], buf + o, n - o);
    }
    for (int i = 0; i < k->n_out && o < n; i++) {
        o += (size_t)snprintf(buf + o, n - o, " out%d=", i);
        if (o < n)
            o += rk_tensor_key(&k->out[i], buf + o, n - o);
    }
    const kc_kernel_def *def = kc_kernel_find(k->op);
    const char *values_only = def ? def->values_only_attr : NULL;
    for (int i = 0; i < k->n_attrs && o < n; i++)
        if (!values_only || strcmp(k->attrs[i].name, values_only) != 0)
            o += (size_t)snprintf(buf + o, n - o, " %s=%.17g", k->attrs[i].name, k->attrs[i].f);
    for (int i = 0; i < k->n_epi && o < n; i++) {
        const kc_epi *e = &k->epi[i];
        o += (size_t)snprintf(buf + o, n - o, " epi=%s/%.17g", nn_op_name(e->op), e->f);
        if (e->has_arg && o < n)
            o += rk_tensor_key(&e->arg, buf + o, n - o);
    }
    if (o < n)
        snprintf(buf + o, n - o, " cores=%" PRIu32 "+%" PRIu32, k->place.core0,
                 k->place.n_cores ? k->place.n_cores : 1);
}

uint64_t run_arch_fingerprint(const arch_config *cfg)
{
    json_t *j = arch_to_json(cfg);
    uint64_t h = 0;
    /* the energy section too under a power cap: a kernel's clock then depends on its power */
    const char *sections[] = {"core", "chip", "energy"};
    for (int i = 0; i < (cfg->chip.power_cap_w > 0 ? 3 : 2); i++) {
        char *s = j ? json_dumps(json_object_get(j, sections[i]), JSON_SORT_KEYS | JSON_COMPACT)
                    : NULL;
        if (s)
            h = np_hash_bytes(s, strlen(s), h);
        free(s);
    }
    json_decref(j);
    return h;
}

/* ---- the timer ----------------------------------------------------------------------------- */

/* A hash of the running executable's bytes: the build whose compiler and core model made a
 * timing (0 when it cannot be read; timings are then not kept in the file). */
static uint64_t rk_build_id(void)
{
    FILE *f = fopen("/proc/self/exe", "rb");
    if (!f)
        return 0;
    unsigned char buf[1 << 16];
    uint64_t h = 0;
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        h = np_hash_bytes(buf, n, h);
    bool bad = ferror(f) != 0;
    fclose(f);
    return bad ? 0 : h | 1;
}

typedef struct rk_entry {
    char *key;
    run_ktime t;
    uint64_t hbm_bytes, spad_bytes; /* spad_bytes 0: from the file (not kept there) */
    char name[64];
    bool from_file;
} rk_entry;

struct run_ktimer {
    const arch_config *cfg;
    uint64_t fingerprint; /* architecture x build */
    char *path;
    rk_entry *v;         /* timings of this architecture and build: from the file, then every
                            kernel timed (kept with or without a file: a timer shared by
                            several runs, as a search's, times each distinct kernel once) */
    uint32_t n, cap;
    np_hmap index;      /* key hash -> entry */
    run_ktimer_stats st;
    void (*progress)(void *ctx, const char *what);
    void *progress_ctx;
};

static const run_unit rk_units[] = {RUN_UNIT_DMA, RUN_UNIT_MXU, RUN_UNIT_VPU};
static const isa_unit rk_isa_units[] = {ISA_UNIT_DMA, ISA_UNIT_MXU, ISA_UNIT_VPU}; /* the same */

static const rk_entry *rk_get(const run_ktimer *t, const char *key)
{
    uint64_t h = np_hash_bytes(key, strlen(key), 0);
    for (uint32_t it = 0, i; (i = np_hmap_next(&t->index, h, &it)) != NP_HMAP_END;)
        if (!strcmp(t->v[i].key, key))
            return &t->v[i];
    return NULL;
}

static bool rk_put(run_ktimer *t, const char *key, const rk_entry *e)
{
    if (t->n == t->cap) {
        uint32_t cap = t->cap ? 2 * t->cap : 64;
        rk_entry *v = realloc(t->v, (size_t)cap * sizeof *v);
        if (!v)
            return false;
        t->v = v, t->cap = cap;
    }
    char *k = strdup(key);
    if (!k || !np_hmap_put(&t->index, np_hash_bytes(key, strlen(key), 0), t->n)) {
        free(k);
        return false;
    }
    t->v[t->n] = *e;
    t->v[t->n++].key = k;
    return true;
}

/* A line: fingerprint check ps chained_ps dma_ps mxu_ps vpu_ps hbm_bytes actions name key — the
 * fingerprint (architecture x build) and the check in hex, the check a hash of the rest of the
 * line under the fingerprint (rk_check): an edited or torn line does not match, and its kernel
 * is simulated again. Lines of other fingerprints (other architectures and builds, whatever
 * their format) are skipped. */
#define RK_MAX_PS (UINT64_C(1) << 62) /* a timing or byte count past this is not one */

/* After hbm_bytes, the kernel's actions (energy.h): its MACs by dtype (in isa_dtype order),
 * vector operations, scratchpad, accumulator, L2 and HBM bytes, and mesh flit-hops; then the
 * time the power cap's throttling added to it (run_ktime.throttle_ps). */
#define RK_ACTS (ISA_DTYPE_COUNT + 7) /* ... and, last, the power cap's throttle_ps */

static void rk_acts_to(const energy_counts *c, uint64_t throttle_ps, uint64_t a[RK_ACTS])
{
    int i = 0;
    for (unsigned d = 0; d < ISA_DTYPE_COUNT; d++)
        a[i++] = c->macs[d];
    a[i++] = c->vector_ops, a[i++] = c->sram_bytes, a[i++] = c->acc_bytes;
    a[i++] = c->l2_bytes, a[i++] = c->hbm_bytes, a[i++] = c->noc_flit_hops;
    a[i] = throttle_ps;
}

static void rk_acts_from(const uint64_t a[RK_ACTS], energy_counts *c, uint64_t *throttle_ps)
{
    int i = 0;
    *c = (energy_counts){0};
    for (unsigned d = 0; d < ISA_DTYPE_COUNT; d++)
        c->macs[d] = a[i++];
    c->vector_ops = a[i++], c->sram_bytes = a[i++], c->acc_bytes = a[i++];
    c->l2_bytes = a[i++], c->hbm_bytes = a[i++], c->noc_flit_hops = a[i++];
    *throttle_ps = a[i];
}

static uint64_t rk_check(uint64_t fingerprint, const char *rest, size_t n)
{
    return np_hash_bytes(rest, n, fingerprint ^ UINT64_C(0x6b636163686531)) | 1;
}

static np_status rk_load(run_ktimer *t, np_err *err)
{
    FILE *f = fopen(t->path, "r");
    if (!f) {
        if (errno == ENOENT)
            return NP_OK;
        return np_err_set(err, NP_ERR_IO, "%s: cannot read the kernel cache: %s", t->path,
                          strerror(errno));
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int lineno = 0;
    np_status st = NP_OK;
    while (st == NP_OK && (len = getline(&line, &cap, f)) >= 0) {
        lineno++;
        if (len > 0 && line[len - 1] == '\n')
            line[--len] = '\0';
        if (line[0] == '#' || line[0] == '\0')
            continue;
        uint64_t fp, check, v[6], a[RK_ACTS];
        int at = 0;
        if (sscanf(line, "%" SCNx64 " %n", &fp, &at) != 1 || !at) {
            st = np_err_at(err, NP_ERR_FORMAT, t->path, lineno, 1, "not a kernel cache entry "
                           "(fingerprint, check, ps, chained ps, dma, mxu and vpu ps, HBM bytes, "
                           "actions, name, key)");
            break;
        }
        if (fp != t->fingerprint)
            continue; /* another architecture's or build's */
        const char *p = line + at;
        rk_entry e = {0};
        int body = 0, acts = 0, key = 0;
        int got = sscanf(p, "%" SCNx64 " %n%" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64
                         " %" SCNu64 " %" SCNu64 " %n", &check, &body, &v[0], &v[5], &v[1],
                         &v[2], &v[3], &v[4], &acts);
        for (int i = 0; got == 7 + i && acts && i < RK_ACTS; i++) {
            int at2 = 0;
            if (sscanf(p + acts, "%" SCNu64 " %n", &a[i], &at2) == 1 && at2)
                got++, acts += at2;
        }
        if (got == 7 + RK_ACTS && sscanf(p + acts, "%63s %n", e.name, &key) == 1 && key)
            got++, key += acts;
        /* this build's line, edited or torn (a killed run), or whose figures are no timings:
         * not trusted, its kernel simulated again */
        bool ok = got == 8 + RK_ACTS && body && key && p[key] &&
                  check == rk_check(fp, p + body, strlen(p + body)) && v[0] > 0 && v[5] > 0;
        for (int i = 0; i < 6; i++)
            ok = ok && v[i] < RK_MAX_PS && (i == 0 || i > 3 || v[i] <= v[0]);
        if (!ok) {
            t->st.rejected++;
            continue;
        }
        if (rk_get(t, p + key))
            continue;
        e.t.ps = v[0];
        e.t.chained_ps = v[5];
        for (int u = 0; u < 3; u++)
            e.t.unit_ps[rk_units[u]] = v[1 + u];
        e.hbm_bytes = v[4];
        e.from_file = true;
        rk_acts_from(a, &e.t.acts, &e.t.throttle_ps);
        if (!rk_put(t, p + key, &e))
            st = np_err_set(err, NP_ERR_NOMEM, "out of memory reading the kernel cache");
    }
    free(line);
    fclose(f);
    return st;
}

np_status run_ktimer_create(const arch_config *cfg, const char *path, run_ktimer **out,
                            np_err *err)
{
    run_ktimer *t = calloc(1, sizeof *t);
    if (!t || (path && !(t->path = strdup(path)))) {
        free(t);
        return np_err_set(err, NP_ERR_NOMEM, "out of memory");
    }
    t->cfg = cfg;
    if (t->path) {
        uint64_t build = rk_build_id();
        t->fingerprint = np_hash_bytes(&build, sizeof build, run_arch_fingerprint(cfg));
        if (!build) { /* no build identity: nothing can be known to be the same */
            free(t->path);
            t->path = NULL;
        }
    }
    if (t->path && rk_load(t, err) != NP_OK) {
        run_ktimer_free(t);
        return err->status;
    }
    *out = t;
    return NP_OK;
}

void run_ktimer_free(run_ktimer *t)
{
    if (!t)
        return;
    for (uint32_t i = 0; i < t->n; i++)
        free(t->v[i].key);
    free(t->path);
    free(t->v);
    np_hmap_free(&t->index);
    free(t);
}

void run_ktimer_set_progress(run_ktimer *t, void (*fn)(void *ctx, const char *what), void *ctx)
{
    t->progress = fn;
    t->progress_ctx = ctx;
}

run_ktimer_stats run_ktimer_get_stats(const run_ktimer *t) { return t->st; }

/* t's busy times of the DMA, matrix and vector units: their busy cycles summed over the
 * chip's cores (busy[0..2]), as a mean over the cores at ps_per_cycle. */
static void rk_unit_ps(const arch_config *cfg, const uint64_t busy[3], double ps_per_cycle,
                       run_ktime *t)
{
    for (int u = 0; u < 3; u++)
        t->unit_ps[rk_units[u]] =
            (uint64_t)((double)busy[u] * ps_per_cycle / (double)cfg->chip.cores + 0.5);
}

/* The kernel alone from the report of the program holding it twice (lower_kernel_repeated),
 * when that report shows it: its first copy, symbol `name` on chip 0, is the program
 * lower_kernel_alone compiles up to its halts, so while no instruction of the second copy has
 * been dispatched it runs event for event as the kernel alone does. Where the copies are
 * placed on several cores kc_compile puts a barrier between them and that always holds; on
 * one core there is none (a core orders its own accesses) and the second copy's instructions
 * may start beside the first's last ones, sharing the scratchpad ports and HBM (a conv2d on
 * edge ends 0.16 % later so): false then, and *t is not filled. Else the duration is the
 * latest end of the symbol over the cores (the run starts at 0; alone, the program ends when
 * the last core has retired its last instruction, the halt following it), and the mean busy
 * time over the chip's cores of the DMA, matrix and vector units is the symbol's busy cycles
 * (core_kernel_report.busy_cycles: alone, the units' over the whole program) at the alone
 * run's picoseconds per cycle. */
static bool rk_first_copy(const arch_config *cfg, const clk_domain *clk, const core_report *r,
                          const char *name, run_ktime *t)
{
    uint64_t end_ps = 0, second_ps = UINT64_MAX, busy[3] = {0};
    for (uint32_t i = 0; i < r->n_kernels; i++) {
        const core_kernel_report *k = &r->kernels[i];
        if (k->chip != 0 || !k->end_ps)
            continue;
        if (strcmp(k->name, name)) { /* the second copy: its first dispatch */
            second_ps = k->start_ps < second_ps ? k->start_ps : second_ps;
            continue;
        }
        end_ps = k->end_ps > end_ps ? k->end_ps : end_ps;
        for (int u = 0; u < 3; u++) /* (busy_cycles by the ISA's queue) */
            busy[u] += k->busy_cycles[rk_isa_units[u]];
    }
    if (!end_ps || second_ps < end_ps)
        return false;
    memset(t, 0, sizeof *t);
    uint64_t cycles = clk_ps_to_cycles(clk, end_ps);
    t->ps = end_ps;
    rk_unit_ps(cfg, busy, cycles ? (double)end_ps / (double)cycles : 0, t);
    return true;
}

/* The duration and the units' busy times of a program from its core report (the kernel alone). */
static void rk_from_report(const arch_config *cfg, const core_report *r, run_ktime *t)
{
    memset(t, 0, sizeof *t);
    t->ps = r->total_ps;
    uint64_t busy[3] = {0};
    for (uint32_t i = 0; i < r->n_units; i++)
        for (int u = 0; u < 3; u++)
            if (r->units[i].kind == rk_isa_units[u])
                busy[u] += r->units[i].busy_cycles;
    rk_unit_ps(cfg, busy,
               r->total_cycles ? (double)r->total_ps / (double)r->total_cycles : 0, t);
}

/* Half of every count: one copy's share of a program that runs the kernel twice. */
static void rk_halve(energy_counts *c)
{
    for (unsigned d = 0; d < ISA_DTYPE_COUNT; d++)
        c->macs[d] /= 2;
    c->vector_ops /= 2, c->sram_bytes /= 2, c->acc_bytes /= 2, c->l2_bytes /= 2;
    c->hbm_bytes /= 2, c->noc_flit_hops /= 2, c->link_bytes /= 2;
}

/* Compiles and simulates ks's kernel on cfg (the kernel twice, or alone when the copies ran
 * beside each other): *out its timing and actions, *name its symbol, *hbm_sim what reached the
 * HBM per copy. Counts compilations in t's statistics. */
static np_status rk_simulate(run_ktimer *t, const arch_config *cfg, const run_kspec *ks,
                             run_ktime *out, char name[64], uint64_t *hbm_out, uint64_t *spad,
                             np_err *err)
{
    /* the kernel twice, as a step runs a kernel that waits for the one before (kc_compile puts
     * a barrier between them on several cores): the first copy is the kernel alone
     * (rk_first_copy), the rest of the run its chained duration */
    kc_result res;
    isa_program *prog = NULL;
    core_report *rep = NULL;
    clk_domain clk;
    np_status st = clk_init_ghz(&clk, cfg->core.clock_ghz, err);
    if (st == NP_OK)
        st = lower_kernel_repeated(cfg, &ks->k, 2, &res, &prog, err);
    if (st == NP_OK) {
        t->st.compiled++;
        st = core_sim_run_opts(cfg, prog, NULL, NULL, &rep, err);
    }
    isa_program_free(prog);
    prog = NULL;
    uint64_t twice_ps = rep ? rep->total_ps : 0;
    energy_counts acts = {0}; /* a copy's share of the two's actions (energy.h) */
    if (rep) {
        energy_counts_of_report(rep, &acts);
        rk_halve(&acts);
    }
    /* with an L2 the schedule's bytes are what the cores move through it; what reaches the
     * HBM is the simulation's (here a copy's share of the two) */
    uint64_t hbm_sim = rep ? (rep->hbm_read_bytes + rep->hbm_write_bytes) / 2 : 0;
    if (st == NP_OK && !rk_first_copy(cfg, &clk, rep, res.name, out)) {
        /* the copies ran beside each other: the kernel alone too, compiled as the first copy
         * was */
        core_report_free(rep);
        rep = NULL;
        kc_result res1;
        st = lower_kernel_alone(cfg, &ks->k, &res1, &prog, err);
        if (st == NP_OK)
            st = core_sim_run_opts(cfg, prog, NULL, NULL, &rep, err);
        isa_program_free(prog);
        if (st == NP_OK) {
            rk_from_report(cfg, rep, out);
            energy_counts_of_report(rep, &acts);
            t->st.simulated_alone++;
            hbm_sim = rep->hbm_read_bytes + rep->hbm_write_bytes;
        }
    }
    core_report_free(rep);
    if (st != NP_OK)
        return st;
    out->chained_ps = twice_ps > out->ps ? twice_ps - out->ps : out->ps;
    out->acts = acts;
    snprintf(name, 64, "%s", res.name);
    *hbm_out = cfg->chip.l2_bytes ? hbm_sim : res.hbm_read_bytes + res.hbm_write_bytes;
    *spad = res.spad_bytes;
    return NP_OK;
}

/* energy_govern's simulation: ks's kernel at another core clock (the power cap). */
typedef struct rk_gov {
    run_ktimer *t;
    const run_kspec *ks;
    run_ktime last;
    char name[64];
    uint64_t hbm, spad;
} rk_gov;

static np_status rk_gov_sim(void *ctx, double ghz, uint64_t *ps, energy_counts *acts, np_err *err)
{
    rk_gov *g = ctx;
    arch_config cfg = *g->t->cfg;
    cfg.core.clock_ghz = ghz;
    np_status st = rk_simulate(g->t, &cfg, g->ks, &g->last, g->name, &g->hbm, &g->spad, err);
    if (st == NP_OK)
        *ps = g->last.ps, *acts = g->last.acts;
    return st;
}

np_status run_ktimer_time(void *ctx, const run_kernel *rk, run_ktime *out, np_err *err)
{
    run_ktimer *t = ctx;
    run_kspec *ks = rk->data;
    const rk_entry *have = rk_get(t, rk->key);
    if (have) {
        *out = have->t;
        snprintf(ks->name, sizeof ks->name, "%s", have->name);
        ks->hbm_bytes = have->hbm_bytes;
        ks->spad_bytes = have->spad_bytes;
        if (have->from_file)
            t->st.from_file++;
        else
            t->st.reused++;
        return NP_OK;
    }
    /* a kernel is compiled and run with its operands in one chip's HBM: a plan that does not
     * fit can be simulated (--allow-oom), a kernel that does not cannot */
    uint64_t operands = 0;
    for (int i = 0; i < ks->k.n_in; i++)
        operands += kc_tensor_extent(&ks->k.in[i]);
    for (int i = 0; i < ks->k.n_out; i++)
        operands += kc_tensor_extent(&ks->k.out[i]);
    if (operands > (uint64_t)t->cfg->chip.hbm_bytes) {
        char a[32], b[32];
        return np_err_set(err, NP_ERR_RANGE, "kernel %s: its operands (%s) do not fit in a "
                          "chip's HBM (%s, chip.hbm_bytes); --allow-oom simulates a plan whose "
                          "memory does not fit, but each kernel runs with its operands in HBM: "
                          "more tensor or pipeline parallelism, fewer samples per micro-batch, "
                          "or a larger chip.hbm_bytes", rk->key,
                          np_human_bytes(operands, a, sizeof a),
                          np_human_bytes((uint64_t)t->cfg->chip.hbm_bytes, b, sizeof b));
    }
    if (t->progress)
        t->progress(t->progress_ctx, rk->key);
    double t0 = np_wall_s();
    char name[64];
    uint64_t hbm = 0, spad = 0;
    np_status st = rk_simulate(t, t->cfg, ks, out, name, &hbm, &spad, err);
    /* the power cap: the kernel at the clock the governor chooses, what throttling cost kept */
    if (st == NP_OK && t->cfg->chip.power_cap_w > 0) {
        rk_gov g = {.t = t, .ks = ks};
        energy_throttle th;
        st = energy_govern(t->cfg, 1, out->ps, &out->acts, rk_gov_sim, &g, &th, err);
        if (st == NP_OK && th.capped) {
            g.last.throttle_ps = g.last.ps > out->ps ? g.last.ps - out->ps : 0;
            *out = g.last;
            snprintf(name, sizeof name, "%s", g.name);
            hbm = g.hbm, spad = g.spad;
        }
    }
    if (st != NP_OK) {
        np_err_prefix(err, "kernel %s", rk->key);
        return st;
    }
    t->st.simulated++;
    snprintf(ks->name, sizeof ks->name, "%s", name);
    ks->hbm_bytes = hbm;
    ks->spad_bytes = spad;
    t->st.sim_wall_s += np_wall_s() - t0;
    rk_entry e = {.t = *out, .hbm_bytes = ks->hbm_bytes, .spad_bytes = ks->spad_bytes};
    snprintf(e.name, sizeof e.name, "%s", ks->name[0] ? ks->name : nn_op_name(ks->k.op));
    if (!rk_put(t, rk->key, &e))
        return np_err_set(err, NP_ERR_NOMEM, "out of memory");
    if (!t->path)
        return NP_OK;
    char body[RUN_KEY_MAX + 512];
    uint64_t a[RK_ACTS];
    rk_acts_to(&out->acts, out->throttle_ps, a);
    int n = snprintf(body, sizeof body, "%" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64
                     " %" PRIu64, out->ps, out->chained_ps, out->unit_ps[RUN_UNIT_DMA],
                     out->unit_ps[RUN_UNIT_MXU], out->unit_ps[RUN_UNIT_VPU], ks->hbm_bytes);
    for (int i = 0; i < RK_ACTS && n > 0 && (size_t)n < sizeof body; i++)
        n += snprintf(body + n, sizeof body - (size_t)n, " %" PRIu64, a[i]);
    if (n > 0 && (size_t)n < sizeof body)
        n += snprintf(body + n, sizeof body - (size_t)n, " %s %s", e.name, rk->key);
    if (n < 0 || (size_t)n >= sizeof body)
        return NP_OK; /* cannot happen for keys of RUN_KEY_MAX; then simply not kept */
    FILE *f = fopen(t->path, "a");
    bool ok = f && fprintf(f, "%016" PRIx64 " %016" PRIx64 " %s\n", t->fingerprint,
                           rk_check(t->fingerprint, body, (size_t)n), body) > 0;
    if (f && fclose(f) != 0)
        ok = false;
    if (!ok)
        return np_err_set(err, NP_ERR_IO, "%s: cannot append to the kernel cache: %s", t->path,
                          strerror(errno));
    return NP_OK;
}

uint32_t run_ktimer_count(const run_ktimer *t) { return t->n; }

void run_ktimer_entry_get(const run_ktimer *t, uint32_t i, run_ktimer_entry *out)
{
    const rk_entry *e = &t->v[i];
    memset(out, 0, sizeof *out);
    snprintf(out->key, sizeof out->key, "%s", e->key);
    snprintf(out->name, sizeof out->name, "%s", e->name);
    out->t = e->t;
    out->hbm_bytes = e->hbm_bytes;
    out->spad_bytes = e->spad_bytes;
}

bool run_ktimer_entry_put(run_ktimer *t, const run_ktimer_entry *e)
{
    if (rk_get(t, e->key))
        return true;
    rk_entry r = {.t = e->t, .hbm_bytes = e->hbm_bytes, .spad_bytes = e->spad_bytes};
    snprintf(r.name, sizeof r.name, "%s", e->name);
    return rk_put(t, e->key, &r);
}
