/* cli_trace.c — core-model runs into the trace layout for the commands (see cli_trace.h).
 *
 * core_trace_insn carries an instruction's text (the disassembler's, addresses resolved), not
 * its fields, so the bytes, peer and tag of DMA and COMM instructions are read back from the
 * text's operands: "dma.copy DST, SRC, DTYPE, N0[, N1, N2, ...]" (N1, N2 may be named),
 * "comm.send peer(C, K), SRC, BYTES, TAG", "comm.recv peer(C, K), DST, BYTES, TAG[, ...]". An
 * instruction whose text does not read that way gets its slice without bytes or flow. */
#include "cli_trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "human.h"
#include "isa.h"
#include "parse.h"

#define CLI_OPERANDS_MAX 12

typedef struct cli_trace_spad { /* a core's scratchpad filled by its running kernel's DMA */
    uint32_t chip, core;
    const char *kernel;
    uint64_t lo, hi;    /* [lo, hi): hi = 0 when nothing is filled */
    uint64_t t_ps;      /* its last sample */
    char name[24];      /* "core<N>.spad" */
} cli_trace_spad;

typedef struct cli_trace_work {
    uint32_t chip, core;
    char *kernel;
    uint64_t flops, bytes;
} cli_trace_work;

np_status cli_trace_flag(trace_layout_opts *o, int c, const char *arg, np_err *err)
{
    if (c == CLI_TRACE_OPT_CHIPS) {
        o->flag = o->flag ? o->flag : "--trace-chips";
        trace_chips_free(&o->chips);
        return trace_chips_parse("--trace-chips", arg, &o->chips, err);
    }
    if (c == CLI_TRACE_OPT_LEVEL) {
        o->flag = o->flag ? o->flag : "--trace-level";
        return trace_level_parse("--trace-level", arg, &o->level, err);
    }
    if (c == CLI_TRACE_OPT_MAX_BYTES) {
        o->flag = o->flag ? o->flag : "--trace-max-bytes";
        uint64_t v;
        if (np_parse_size(NP_SRC_OPT("--trace-max-bytes"), arg, 0, UINT64_MAX - 1, &v, err) !=
            NP_OK)
            return err->status;
        o->max_bytes = v ? v : UINT64_MAX;
        return NP_OK;
    }
    return np_err_set(err, NP_ERR_INTERNAL, "cli_trace_flag: option %d is not a trace option", c);
}

const char *cli_trace_cut_warning(uint64_t left_out, const trace_layout_opts *o, char *buf,
                                  size_t n)
{
    buf[0] = 0;
    if (!left_out)
        return buf;
    char size[32], count[32];
    uint64_t max = o && o->max_bytes ? o->max_bytes : TRACE_LAYOUT_MAX_BYTES;
    snprintf(buf, n, "warning: the trace reached %s and was cut there: %s later events left "
             "out (the simulation went on; --trace-max-bytes raises the limit, 0 lifts it; "
             "--trace-level kernel or --trace-chips make the trace smaller)",
             np_human_bytes(max, size, sizeof size), np_human_count(left_out, count, sizeof count));
    return buf;
}

np_status cli_trace_need_path(const char *trace_path, const trace_layout_opts *o, np_err *err)
{
    if (!trace_path && o->flag)
        return np_err_set(err, NP_ERR_USAGE, "%s needs --trace FILE", o->flag);
    return NP_OK;
}

np_status cli_trace_open_opts(cli_trace *t, const char *path, const trace_layout_opts *o,
                              np_err *err)
{
    memset(t, 0, sizeof *t);
    if (o)
        t->opts = *o;
    np_status st = trace_layout_open(path, o, &t->w, err);
    if (st == NP_OK)
        t->sink = trace_layout_sink(t->w);
    return st;
}

np_status cli_trace_set_arch(cli_trace *t, const arch_config *cfg, np_err *err)
{
    if (!t->w || t->route_net)
        return NP_OK;
    net_params np;
    net_params_from_arch(cfg, &np);
    if (evq_create(&t->route_q, err) != NP_OK ||
        net_create(&np, t->route_q, NULL, &t->route_net, err) != NP_OK)
        return err->status;
    t->n_links = net_links(t->route_net);
    if (!(t->link_name = calloc(t->n_links + 1, sizeof *t->link_name)))
        return np_err_set(err, NP_ERR_NOMEM, "out of memory");
    for (uint32_t l = 0; l < t->n_links; l++)
        net_link_name(t->route_net, l, t->link_name[l], sizeof t->link_name[l]);
    return NP_OK;
}

/* A send's bytes over [start, end] into the counter of every link of its route. */
static void route_bytes(cli_trace *t, uint32_t src, uint32_t dst, uint64_t bytes,
                        uint64_t start, uint64_t end)
{
    net_path_info route;
    np_err e;
    if (!t->route_net || src == dst || src >= net_chips(t->route_net) ||
        dst >= net_chips(t->route_net) || net_route(t->route_net, src, dst, &route, &e) != NP_OK)
        return;
    for (uint32_t i = 0; i < route.n_links; i++)
        if (route.links[i] < t->n_links) {
            trace_transfer x = {TRACE_SYSTEM_CHIP, t->link_name[route.links[i]], bytes, start, end};
            t->sink.ops->transfer(t->sink.ctx, &x);
        }
}

np_status cli_trace_open(cli_trace *t, const char *path, np_err *err)
{
    return cli_trace_open_opts(t, path, NULL, err);
}

/* The operands of an instruction's text (after the mnemonic), split at top-level commas and
 * trimmed, into op[] (pointers into buf); returns how many. */
static size_t insn_operands(const char *text, char *buf, size_t n, const char **op)
{
    snprintf(buf, n, "%s", text);
    char *p = strchr(buf, ' ');
    size_t k = 0;
    int depth = 0;
    if (!p)
        return 0;
    for (char *s = ++p;; p++) {
        if (*p == '(' || *p == '[')
            depth++;
        else if (*p == ')' || *p == ']')
            depth--;
        if ((*p == ',' && !depth) || !*p) {
            bool end = !*p;
            *p = '\0';
            while (*s == ' ')
                s++;
            if (k < CLI_OPERANDS_MAX)
                op[k++] = s;
            if (end)
                break;
            s = p + 1;
        }
    }
    return k;
}

static bool parse_u64(const char *s, uint64_t *out)
{
    char *end;
    if (*s < '0' || *s > '9')
        return false;
    *out = strtoull(s, &end, 0);
    return *end == '\0';
}

/* A dma.copy's bytes: n0 x n1 x n2 elements of its dtype. */
static bool dma_bytes(const char **op, size_t n, uint64_t *bytes)
{
    if (n < 4)
        return false;
    int dt = -1;
    for (int d = 0; d < ISA_DTYPE_COUNT; d++)
        if (!strcmp(op[2], isa_dtype_names[d]))
            dt = d;
    uint64_t dims[3] = {0, 1, 1};
    if (dt < 0 || !parse_u64(op[3], &dims[0]))
        return false;
    for (size_t i = 4; i < n; i++) {
        const char *v = op[i];
        size_t d = i - 3; /* positional n1, n2 */
        if (!strncmp(v, "n1=", 3) || !strncmp(v, "n2=", 3))
            d = (size_t)(v[1] - '0'), v += 3;
        else if (strchr(v, '=') || d > 2)
            continue; /* strides */
        if (!parse_u64(v, &dims[d]))
            return false;
    }
    *bytes = dims[0] * dims[1] * dims[2] * isa_dtype_size[dt];
    return true;
}

/* A comm.*'s peer, bytes and tag. */
static bool comm_fields(const char **op, size_t n, uint32_t *chip, uint32_t *core,
                        uint64_t *bytes, uint64_t *tag)
{
    unsigned long long c, k;
    if (n < 4 || sscanf(op[0], "peer(%llu, %llu)", &c, &k) != 2 || c > UINT32_MAX ||
        k > UINT32_MAX)
        return false;
    *chip = (uint32_t)c, *core = (uint32_t)k;
    return parse_u64(op[2], bytes) && parse_u64(op[3], tag);
}

/* Notes that kernel name ran comm.* instructions. */
static void note_comm_kernel(cli_trace *t, const char *name)
{
    if (name == t->last_comm_kernel)
        return;
    for (size_t i = 0; i < t->n_comm_kernels; i++)
        if (!strcmp(t->comm_kernels[i], name)) {
            t->last_comm_kernel = name;
            return;
        }
    if (t->n_comm_kernels == t->cap_comm_kernels) {
        size_t cap = t->cap_comm_kernels ? 2 * t->cap_comm_kernels : 8;
        char **v = realloc(t->comm_kernels, cap * sizeof *v);
        if (!v) {
            t->oom = true;
            return;
        }
        t->comm_kernels = v, t->cap_comm_kernels = cap;
    }
    if (!(t->comm_kernels[t->n_comm_kernels] = strdup(name))) {
        t->oom = true;
        return;
    }
    t->n_comm_kernels++;
    t->last_comm_kernel = name;
}

static bool is_comm_kernel(const cli_trace *t, const char *name)
{
    for (size_t i = 0; i < t->n_comm_kernels; i++)
        if (!strcmp(t->comm_kernels[i], name))
            return true;
    return false;
}

/* The FLOPs and bytes of kernel on (chip, core) in this run (created when add). */
static cli_trace_work *work_get(cli_trace *t, uint32_t chip, uint32_t core, const char *kernel,
                                bool add)
{
    for (uint64_t h = (tmap_mix((uint64_t)chip << 32 | core) ^ tmap_hash_str(kernel)) | 1;; h += 2) {
        if (!add) {
            uint64_t *v = u64map_get(&t->work_of, h);
            if (!v)
                return NULL;
            cli_trace_work *w = *v ? &t->work[*v - 1] : NULL;
            if (w && w->chip == chip && w->core == core && !strcmp(w->kernel, kernel))
                return w;
            continue;
        }
        bool fresh;
        uint64_t *v = u64map_slot(&t->work_of, h, &fresh);
        if (!v)
            break;
        if (!fresh) {
            cli_trace_work *w = *v ? &t->work[*v - 1] : NULL;
            if (w && w->chip == chip && w->core == core && !strcmp(w->kernel, kernel))
                return w;
            continue;
        }
        if (t->n_work == t->cap_work) {
            size_t cap = t->cap_work ? 2 * t->cap_work : 16;
            cli_trace_work *p = realloc(t->work, cap * sizeof *p);
            if (!p)
                break;
            t->work = p, t->cap_work = cap;
        }
        char *name = strdup(kernel);
        if (!name)
            break;
        t->work[t->n_work] = (cli_trace_work){chip, core, name, 0, 0};
        *v = ++t->n_work;
        return &t->work[t->n_work - 1];
    }
    t->oom = true;
    return NULL;
}

static void work_clear(cli_trace *t)
{
    for (size_t i = 0; i < t->n_work; i++)
        free(t->work[i].kernel);
    t->n_work = 0;
    u64map_free(&t->work_of);
}

void cli_trace_level(cli_trace *t, uint32_t chip, const char *counter, uint64_t t_ps,
                     double value)
{
    if (t->sink.ops && t->sink.ops->level)
        t->sink.ops->level(t->sink.ctx, chip, counter, t->offset_ps + t_ps, value);
}

/* The scratchpad of (chip, core), made when first seen (NULL: out of memory). */
static cli_trace_spad *spad_get(cli_trace *t, uint32_t chip, uint32_t core)
{
    bool fresh;
    uint64_t *v = u64map_slot(&t->spad_of, ((uint64_t)chip << 32 | core) + 1, &fresh);
    if (!v)
        return NULL;
    if (!*v) {
        if (t->n_spad == t->cap_spad) {
            size_t cap = t->cap_spad ? 2 * t->cap_spad : 16;
            cli_trace_spad *p = realloc(t->spad, cap * sizeof *p);
            if (!p)
                return NULL;
            t->spad = p, t->cap_spad = cap;
        }
        cli_trace_spad *s = &t->spad[t->n_spad];
        *s = (cli_trace_spad){.chip = chip, .core = core};
        snprintf(s->name, sizeof s->name, "core%u.spad", core);
        *v = ++t->n_spad;
    }
    return &t->spad[*v - 1];
}

/* A DMA of `bytes` into the scratchpad at addr by kernel on (chip, core) ended at end_ps
 * (absolute): the core's "coreN.spad" level, restarted when the kernel changes. */
static void spad_fill(cli_trace *t, const core_trace_insn *in, uint64_t addr, uint64_t bytes,
                      uint64_t end_ps)
{
    cli_trace_spad *s = spad_get(t, in->chip, in->core);
    if (!s) {
        t->oom = true;
        return;
    }
    uint64_t at = end_ps > s->t_ps ? end_ps : s->t_ps; /* samples in time order */
    bool same = s->kernel == in->kernel ||
                (s->kernel && in->kernel && !strcmp(s->kernel, in->kernel));
    if (!same) {
        if (s->hi && t->sink.ops && t->sink.ops->level) /* the last kernel's is gone */
            t->sink.ops->level(t->sink.ctx, in->chip, s->name, at, 0);
        s->kernel = in->kernel, s->lo = s->hi = 0;
    }
    uint64_t lo = s->hi && s->lo < addr ? s->lo : addr, hi = addr + bytes > s->hi ? addr + bytes : s->hi;
    if (lo == s->lo && hi == s->hi)
        return;
    s->lo = lo, s->hi = hi, s->t_ps = at;
    if (t->sink.ops && t->sink.ops->level)
        t->sink.ops->level(t->sink.ctx, in->chip, s->name, at, (double)(hi - lo));
}

void cli_trace_insn(void *ctx, const core_trace_insn *in)
{
    cli_trace *t = ctx;
    const trace_sink_ops *ops = t->sink.ops;
    char name[32], buf[256];
    snprintf(name, sizeof name, "%.*s", (int)strcspn(in->text, " "), in->text);
    uint64_t start = t->offset_ps + in->start_ps, end = t->offset_ps + in->end_ps;
    trace_unit_slice s = {.chip = in->chip, .core = in->core, .unit = (unsigned)in->unit,
                          .unit_name = isa_unit_names[in->unit], .lane = in->lane, .name = name,
                          .start_ps = start, .end_ps = end};
    if (!strcmp(name, "sem.wait"))
        s.cat = "wait"; /* a sem.wait has a slice only when it waited: the wait */
    trace_arg args[5] = {TRACE_ARG_U("pc", in->pc), TRACE_ARG_S("insn", in->text),
                         TRACE_ARG_S("kernel", in->kernel)};
    s.args = args, s.n_args = 3;
    const char *op[CLI_OPERANDS_MAX];
    uint64_t bytes = 0;
    bool dma = !strcmp(name, "dma.copy"), send = !strcmp(name, "comm.send"),
         recv = !strcmp(name, "comm.recv"), load = !strcmp(name, "mxu.load"),
         mm = !strcmp(name, "mxu.mm");
    if (dma || send || recv || load || mm) {
        size_t n = insn_operands(in->text, buf, sizeof buf, op);
        uint64_t k, cols, rows;
        bool fresh;
        uint64_t *tile = load || mm ? u64map_slot(&t->mxu_tile, ((uint64_t)in->chip << 32 |
                                                                 in->core) + 1, &fresh)
                                    : NULL;
        if (load && tile && n >= 3 && parse_u64(op[1], &k) && parse_u64(op[2], &cols))
            *tile = k << 32 | (cols & 0xffffffff);
        if (mm && tile && n >= 3 && parse_u64(op[2], &rows) && in->kernel) {
            uint64_t flops = 2 * rows * (*tile >> 32) * (*tile & 0xffffffff);
            cli_trace_work *w = work_get(t, in->chip, in->core, in->kernel, true);
            if (w)
                w->flops += flops;
            args[s.n_args++] = TRACE_ARG_U("flops", flops);
        }
        if (dma && dma_bytes(op, n, &bytes)) {
            args[s.n_args++] = TRACE_ARG_U("bytes", bytes);
            bool rd = !strncmp(op[1], "hbm[", 4), wr = !strncmp(op[0], "hbm[", 4);
            cli_trace_work *w = (rd || wr) && in->kernel
                                    ? work_get(t, in->chip, in->core, in->kernel, true) : NULL;
            if (w)
                w->bytes += bytes;
            if (!strncmp(op[0], "spad[", 5) && op[0][5] >= '0' && op[0][5] <= '9') {
                char *e;
                uint64_t sp = strtoull(op[0] + 5, &e, 0);
                if (*e == ']')
                    spad_fill(t, in, sp, bytes, end);
            }
            if (in->l2 && ops && ops->transfer) { /* through the L2: what reached each */
                trace_transfer x = {in->chip, "l2", in->l2_bytes, start, end};
                if (in->l2_bytes)
                    ops->transfer(t->sink.ctx, &x);
                x.counter = "hbm.read", x.bytes = in->hbm_read_bytes;
                if (x.bytes)
                    ops->transfer(t->sink.ctx, &x);
                x.counter = "hbm.write", x.bytes = in->hbm_write_bytes;
                if (x.bytes)
                    ops->transfer(t->sink.ctx, &x);
            } else if ((rd || wr) && ops && ops->transfer) {
                trace_transfer x = {in->chip, NULL, bytes, start, end};
                if (rd)
                    x.counter = "hbm.read", ops->transfer(t->sink.ctx, &x);
                if (wr)
                    x.counter = "hbm.write", ops->transfer(t->sink.ctx, &x);
            }
        } else if ((send || recv) && comm_fields(op, n, &s.peer_chip, &s.peer_core, &bytes, &s.tag)) {
            args[s.n_args++] = TRACE_ARG_U("bytes", bytes);
            s.msg = send ? TRACE_MSG_SEND : TRACE_MSG_RECV;
            if (send && ops && ops->transfer) {
                trace_transfer x = {in->chip, s.peer_chip == in->chip ? "noc.send" : "c2c.send",
                                    bytes, start, end};
                ops->transfer(t->sink.ctx, &x);
                route_bytes(t, in->chip, s.peer_chip, bytes, start, end);
            }
        }
        if ((send || recv) && in->kernel)
            note_comm_kernel(t, in->kernel);
    }
    if (ops && ops->unit_slice)
        ops->unit_slice(t->sink.ctx, &s);
}

void cli_trace_span(cli_trace *t, uint32_t pid, uint32_t tid, const char *thread,
                    const char *name, const char *cat, uint64_t start_ps, uint64_t dur_ps)
{
    (void)tid;
    trace_span s = {.chip = pid, .core = TRACE_NO_CORE, .track = thread, .name = name,
                    .cat = cat, .start_ps = t->offset_ps + start_ps,
                    .end_ps = t->offset_ps + start_ps + dur_ps};
    if (t->sink.ops && t->sink.ops->span)
        t->sink.ops->span(t->sink.ctx, &s);
}

static const core_report *sort_report; /* qsort's context (the commands are single-threaded) */

/* Kernels by name, then chip, then core: a collective's ranks come together, in rank order. */
static int kernel_order(const void *a, const void *b)
{
    const core_kernel_report *x = &sort_report->kernels[*(const uint32_t *)a],
                             *y = &sort_report->kernels[*(const uint32_t *)b];
    int c = strcmp(x->name, y->name);
    if (c)
        return c;
    if (x->chip != y->chip)
        return x->chip < y->chip ? -1 : 1;
    if (x->core != y->core)
        return x->core < y->core ? -1 : 1;
    return x->start_ps < y->start_ps ? -1 : x->start_ps > y->start_ps;
}

static bool kernel_ran(const core_kernel_report *k) { return k->end_ps > k->start_ps || k->cycles; }

void cli_trace_kernels(cli_trace *t, const core_report *r)
{
    const trace_sink_ops *ops = t->sink.ops;
    t->runs++;
    uint32_t n = r ? r->n_kernels : 0;
    uint32_t *order = n ? malloc(n * sizeof *order) : NULL;
    if (n && !order)
        t->oom = true, n = 0;
    for (uint32_t i = 0; i < n; i++)
        order[i] = i;
    sort_report = r;
    if (n)
        qsort(order, n, sizeof *order, kernel_order);
    for (uint32_t i = 0, group = 0; i < n; group++) {
        /* one name: a collective when it communicated, a rank per core it ran on */
        uint32_t j = i, ranks = 0;
        const char *kname = r->kernels[order[i]].name;
        for (; j < n && !strcmp(r->kernels[order[j]].name, kname); j++)
            ranks += kernel_ran(&r->kernels[order[j]]);
        bool coll = ranks > 1 && is_comm_kernel(t, kname);
        for (; i < j; i++) {
            const core_kernel_report *k = &r->kernels[order[i]];
            if (!kernel_ran(k))
                continue;
            const cli_trace_work *w = work_get(t, k->chip, k->core, k->name, false);
            trace_arg a[] = {TRACE_ARG_U("cycles", k->cycles),
                             TRACE_ARG_U("flops", w ? w->flops : 0),
                             TRACE_ARG_U("bytes", w ? w->bytes : 0)};
            trace_span s = {.chip = k->chip, .core = k->core, .track = "kernels",
                            .name = k->name, .cat = "kernel",
                            .start_ps = t->offset_ps + k->start_ps,
                            .end_ps = t->offset_ps + k->end_ps, .args = a, .n_args = 3};
            if (coll)
                s.group = t->runs << 24 | (group + 1), s.group_size = ranks, s.cat = "collective";
            if (ops && ops->span)
                ops->span(t->sink.ctx, &s);
        }
    }
    free(order);
    work_clear(t);
    uint64_t end_ps = t->offset_ps + (r ? r->total_ps : 0);
    for (size_t i = 0; i < t->n_spad; i++) { /* the run's kernels (and their names) are gone */
        cli_trace_spad *s = &t->spad[i];
        if (s->hi && ops && ops->level)
            ops->level(t->sink.ctx, s->chip, s->name, end_ps > s->t_ps ? end_ps : s->t_ps, 0);
        s->kernel = NULL, s->lo = s->hi = 0;
        s->t_ps = end_ps > s->t_ps ? end_ps : s->t_ps;
    }
    if (ops && ops->run_end)
        ops->run_end(t->sink.ctx, t->offset_ps + (r ? r->total_ps : 0));
}

np_status cli_trace_close(cli_trace *t, np_err *err)
{
    for (size_t i = 0; i < t->n_comm_kernels; i++)
        free(t->comm_kernels[i]);
    free(t->comm_kernels);
    t->comm_kernels = NULL;
    work_clear(t);
    free(t->work);
    t->work = NULL;
    u64map_free(&t->mxu_tile);
    u64map_free(&t->spad_of);
    free(t->spad);
    t->spad = NULL;
    net_free(t->route_net);
    evq_free(t->route_q);
    free(t->link_name);
    t->route_net = NULL, t->route_q = NULL, t->link_name = NULL;
    char warn[320];
    uint64_t left_out = 0;
    np_status st = trace_layout_close_counted(t->w, &left_out, err);
    if (cli_trace_cut_warning(left_out, &t->opts, warn, sizeof warn)[0])
        fprintf(stderr, "npusim: %s\n", warn);
    t->w = NULL;
    if (st == NP_OK && t->oom)
        st = np_err_set(err, NP_ERR_NOMEM, "out of memory writing the trace");
    return st;
}

bool cli_trace_read_is_flag(int c) { return c == CLI_OPT_MAX_EVENTS || c == CLI_OPT_MAX_EVENT_SIZE; }

np_status cli_trace_read_flag(trace_read_opts *o, int c, const char *arg, np_err *err)
{
    if (c == CLI_OPT_MAX_EVENTS)
        return np_parse_u64(NP_SRC_OPT("--max-events"), arg, 1, UINT64_MAX - 1, &o->max_events,
                            err);
    return np_parse_size(NP_SRC_OPT("--max-event-size"), arg, 1u << 20, 1ull << 40,
                         &o->max_event_bytes, err);
}
