/* infer.c — the timing of inference iterations and of a request (infer.h): the kv inference
 * graph of the zoo's builder, its kernels timed by the run engine's kernel timer, decode
 * attention as its roofline. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "infer.h"
#include "kvcache.h"
#include "moe_route.h"
#include "run_engine.h"
#include "run_fuse.h"
#include "run_kernel.h"
#include "run_report.h"

struct infer_ctx {
    infer_opts o;
    run_ktimer *timer;
    run_kcache *seen;        /* timings of this context's kernels, by key */
    int64_t layers, kv_width, context;
    double peak, bw;         /* FLOP/s at bf16, HBM bytes/s */
    /* decode attention per attention node, at one sequence of context 2 (infer_time_decode_attn;
     * n_dattn 0: not measured yet): FLOPs, K/V bytes, q and out bytes */
    int n_dattn;
    double *dattn_flops, *dattn_kv, *dattn_qo;
};

/* What time_iter times: every kernel, the attention nodes alone (their kernels or
 * rooflines, each with its gap), or nothing (its byte counts only). */
typedef enum infer_what { INFER_ALL, INFER_ATTN_ONLY, INFER_NONE } infer_what;

#define INFER_DT NN_BF16
#define INFER_ELEM 2 /* bytes of a bf16 value */

np_status infer_ctx_create(const infer_opts *o, infer_ctx **out, np_err *err)
{
    *out = NULL;
    const nn_model_desc *d = o->model;
    struct { const char *flag; int64_t v; } pos[] = {
        {"--batch", o->batch}, {"--prompt", o->prompt}, {"--output", o->output},
        {"--kv-block", o->kv_block}, {"--tp", o->tp}};
    for (size_t i = 0; i < sizeof pos / sizeof pos[0]; i++)
        if (pos[i].v < 1)
            return np_err_set(err, NP_ERR_USAGE, "%s: %lld is not a positive count", pos[i].flag,
                              (long long)pos[i].v);
    if (o->tp != 1)
        return np_err_set(err, NP_ERR_USAGE, "--tp %d: inference is timed on one chip so far "
                          "(tensor-parallel serving is later work of docs/serving.md)", o->tp);
    if (strcmp(d->family, "gpt") != 0 && strcmp(d->family, "llama") != 0)
        return np_err_set(err, NP_ERR_USAGE, "--model %s: inference is built for the gpt and "
                          "llama families, not for %s", d->name, d->family);
    int64_t ctx = nn_model_int(d, "context", 1);
    if (o->prompt + o->output - 1 > ctx)
        return np_err_set(err, NP_ERR_USAGE, "--prompt %lld and --output %lld: %lld tokens "
                          "exceed %s's context of %lld", (long long)o->prompt,
                          (long long)o->output, (long long)(o->prompt + o->output - 1), d->name,
                          (long long)ctx);
    infer_ctx *c = calloc(1, sizeof *c);
    if (!c || !(c->seen = run_kcache_create())) {
        free(c);
        return np_err_set(err, NP_ERR_NOMEM, "out of memory");
    }
    c->o = *o;
    int64_t H = nn_model_int(d, "heads", 1), D = nn_model_int(d, "d_model", 1);
    c->layers = nn_model_int(d, "layers", 1);
    c->kv_width = nn_model_int(d, "kv_heads", H) * nn_model_int(d, "head_dim", D / H);
    c->context = ctx;
    c->peak = run_peak_flops(o->cfg, INFER_DT);
    c->bw = o->cfg->chip.hbm_gb_per_s * 1e9;
    np_status st = run_ktimer_create(o->cfg, o->kernel_cache, &c->timer, err);
    if (st != NP_OK) {
        infer_ctx_free(c);
        return st;
    }
    *out = c;
    return NP_OK;
}

void infer_ctx_free(infer_ctx *c)
{
    if (!c)
        return;
    run_ktimer_free(c->timer);
    run_kcache_free(c->seen);
    free(c->dattn_flops);
    free(c->dattn_kv);
    free(c->dattn_qo);
    free(c);
}

static uint64_t bytes_of(const nn_tensor *t)
{
    return (uint64_t)nn_numel(t) * (uint64_t)nn_dtype_size(t->dtype);
}

/* Decode attention's roofline (the attention op's inference form): its FLOPs at the matrix
 * peak against its q, out and K/V bytes at the HBM bandwidth; *kv_bytes the K/V part. Both
 * are linear in each sequence's context: kv_scale takes the node's (every sequence at the
 * longest context) to the batch's own (infer_time_decode). */
static double attn_roofline(const infer_ctx *c, const nn_tensor *a, double kv_scale,
                            uint64_t *kv_bytes, double *flops)
{
    *kv_bytes = (uint64_t)llround(kv_scale * (double)(bytes_of(a->src[1]) + bytes_of(a->src[2])));
    *flops = kv_scale * (double)nn_node_flops(a);
    double t_c = *flops / c->peak;
    double t_m = (double)(*kv_bytes + bytes_of(a->src[0]) + bytes_of(a) ) / c->bw;
    return t_c > t_m ? t_c : t_m;
}

/* Whether node t reads the kv cache before attention does: the gather of the cache's pages
 * and what reshapes and concatenates it (marked[] by node id, filled in creation order). */
static bool from_cache(const nn_tensor *t, const bool *marked)
{
    for (int i = 0; i < t->n_src; i++) {
        const nn_tensor *s = t->src[i];
        if (marked[s->id] || (s->op == NN_OP_LEAF && strstr(s->name, "_cache")))
            return true;
    }
    return false;
}

/* The node's kernel as timed: positions (rope's offset, the learned positions' slice) do not
 * change a kernel's time, so every decode step times the same kernels. */
static nn_tensor timing_node(const nn_tensor *t)
{
    nn_tensor k = *t;
    if (k.op == NN_OP_ROPE)
        k.fp[2] = 0;
    if (k.op == NN_OP_SLICE && t->src[0]->op == NN_OP_LEAF && t->src[0]->role == NN_ROLE_PARAM) {
        k.ip[2] -= k.ip[1]; /* wpe rows [past, past + S) -> [0, S) */
        k.ip[1] = 0;
    }
    return k;
}

/* The time of head's kernel (with its fused chain, as `npusim run` fuses it) as the run
 * engine times a step's kernels on the chip's stream: the stream's gap before it (the first
 * kernel of the iteration: and the host's launch), then its duration alone (the first) or
 * right after another kernel (run_ktime.chained_ps). */
static np_status time_kernel(infer_ctx *c, const run_fuse *f, const nn_tensor *head, bool first,
                             double *s, np_err *err)
{
    nn_tensor tn = timing_node(head);
    run_kspec ks = {.node = head, .flops = run_fuse_flops(f, head, false),
                    .model_flops = run_fuse_flops(f, head, true)};
    np_status st = run_fuse_kernel(f, &tn, (uint32_t)c->o.cfg->chip.cores, &ks.k, err);
    if (st != NP_OK)
        return st;
    char key[RUN_KEY_MAX];
    run_kernel_key(&ks.k, key, sizeof key);
    const run_ktime *seen = run_kcache_get(c->seen, key);
    run_ktime kt;
    if (seen)
        kt = *seen;
    else if ((st = run_ktimer_time(c->timer, &(run_kernel){.key = key, .data = &ks,
                                                          .flops = (double)ks.model_flops},
                                   &kt, err)) != NP_OK)
        return st;
    else if (!run_kcache_put(c->seen, key, &kt))
        return np_err_set(err, NP_ERR_NOMEM, "out of memory");
    uint64_t ps = !first && kt.chained_ps ? kt.chained_ps : kt.ps;
    *s = (double)(core_kernel_launch_ps(c->o.cfg, first) + ps) * 1e-12;
    return NP_OK;
}

/* Whether t is a node of the output head (scope lm_head: the logits of each sequence's last
 * token). */
static bool is_head(const nn_tensor *t)
{
    return strncmp(t->name, "lm_head", 7) == 0;
}

static np_status time_iter(infer_ctx *c, int64_t batch, int64_t tokens, int64_t past,
                           double kv_scale, infer_what what, infer_iter *out, np_err *err)
{
    memset(out, 0, sizeof *out);
    out->batch = batch, out->tokens = tokens, out->past = past;
    int64_t blk = c->o.kv_block, slots = batch * ((past + blk - 1) / blk) * blk;
    nn_model m;
    np_status st = nn_model_build(c->o.model, &(nn_model_opts){.batch = batch, .seq = tokens,
                                  .compute = INFER_DT, .kv = true, .past = past,
                                  .kv_slots = slots > 0 ? slots : 1}, &m, err);
    if (st != NP_OK)
        return st;
    nn_moe_route_spec uniform = nn_moe_route_uniform(); /* timing: MoE tokens spread evenly */
    if ((st = nn_moe_route_mark(m.g, &uniform, err)) != NP_OK) {
        nn_graph_free(m.g);
        return st;
    }
    int n = nn_graph_n_nodes(m.g);
    run_fuse *f = NULL;
    bool *marked = calloc((size_t)nn_graph_max_id(m.g) + 1, sizeof *marked);
    int *uses = nn_graph_use_counts(m.g);
    if (!marked || !uses)
        st = np_err_set(err, NP_ERR_NOMEM, "out of memory");
    else
        st = run_fuse_graph(m.g, &f, err);
    for (int i = 0; st == NP_OK && i < n; i++) {
        const nn_tensor *t = nn_graph_node(m.g, i);
        if (t->op == NN_OP_LEAF) {
            if (t->role == NN_ROLE_PARAM)
                out->weight_bytes += bytes_of(t), out->param_bytes += bytes_of(t);
            continue;
        }
        if (t->op == NN_OP_ATTENTION && !nn_same_shape(t->src[0], t->src[1])) {
            uint64_t kv;
            double fl, s = attn_roofline(c, t, kv_scale, &kv, &fl) +
                           (double)core_kernel_launch_ps(c->o.cfg, false) * 1e-12; /* its gap */
            out->roofline_s += s, out->time_s += s, out->kv_read_bytes += kv;
            out->attn_s += s, out->flops += fl;
            continue;
        }
        if ((marked[t->id] = from_cache(t, marked)))
            continue; /* folded into decode attention */
        if (t->op == NN_OP_EMBEDDING && t->src[0]->role == NN_ROLE_PARAM && uses &&
            uses[t->src[0]->id] == 1) /* an untied table: only the tokens' rows are read */
            out->weight_bytes = out->weight_bytes - bytes_of(t->src[0]) + bytes_of(t);
        if (strstr(t->name, "k_new") || strstr(t->name, "v_new"))
            out->kv_write_bytes += bytes_of(t);
        if (t->op == NN_OP_ATTENTION) /* prefill: the same keys, read once */
            out->kv_read_bytes += bytes_of(t->src[1]) + bytes_of(t->src[2]);
        out->flops += (double)nn_node_flops(t);
        if (run_fuse_kind_of(f, t) != RUN_FUSE_KERNEL)
            continue; /* a view, or inside another node's kernel */
        /* a prefill's grouped-query broadcast of the kv heads exists for the flash kernel
         * (q, k, v of one shape): it counts to attention */
        bool attn = t->op == NN_OP_ATTENTION || t->op == NN_OP_BROADCAST_TO;
        if (what == INFER_NONE || (what == INFER_ATTN_ONLY && !attn))
            continue;
        double s;
        st = time_kernel(c, f, t, out->kernels == 0 && what == INFER_ALL, &s, err);
        out->time_s += s, out->kernels++;
        if (attn)
            out->attn_s += s;
        else if (is_head(t))
            out->head_s += s;
    }
    run_fuse_free(f);
    free(marked);
    free(uses);
    nn_graph_free(m.g);
    out->compute_s = out->flops / c->peak;
    out->hbm_s = (double)(out->weight_bytes + out->kv_read_bytes + out->kv_write_bytes) / c->bw;
    out->hbm_bound = out->hbm_s > out->compute_s;
    return st;
}

np_status infer_time_iter(infer_ctx *c, int64_t batch, int64_t tokens, int64_t past,
                          infer_iter *out, np_err *err)
{
    return time_iter(c, batch, tokens, past, 1.0, INFER_ALL, out, err);
}

np_status infer_time_decode(infer_ctx *c, int64_t batch, const int64_t *past, infer_iter *out,
                            np_err *err)
{
    int64_t most = 0;
    double sum = 0;
    for (int64_t b = 0; b < batch; b++) {
        if (past[b] < 0)
            return np_err_set(err, NP_ERR_RANGE, "sequence %lld has %lld cached tokens",
                              (long long)b, (long long)past[b]);
        most = past[b] > most ? past[b] : most;
        sum += (double)(past[b] + 1);
    }
    if (batch < 1)
        return np_err_set(err, NP_ERR_RANGE, "a decode step of %lld sequences", (long long)batch);
    return time_iter(c, batch, 1, most, sum / ((double)batch * (double)(most + 1)), INFER_ALL,
                     out, err);
}

np_status infer_param_bytes(infer_ctx *c, uint64_t *bytes, np_err *err)
{
    infer_iter it;
    np_status st = time_iter(c, 1, 1, 0, 1.0, INFER_NONE, &it, err);
    *bytes = it.param_bytes;
    return st;
}

uint64_t infer_kv_block_bytes(const infer_ctx *c)
{
    return nn_kv_bytes(c->layers, c->kv_width, c->o.kv_block, c->o.kv_block, INFER_ELEM);
}

np_status infer_time_tokens(infer_ctx *c, int64_t tokens, double *body_s, double *head_s,
                            uint64_t *param_bytes, np_err *err)
{
    if (tokens < 1)
        return np_err_set(err, NP_ERR_RANGE, "an iteration of %lld tokens", (long long)tokens);
    infer_iter it;
    np_status st = time_iter(c, tokens, 1, 0, 1.0, INFER_ALL, &it, err);
    if (st != NP_OK)
        return st;
    *body_s = it.time_s - it.attn_s - it.head_s;
    *head_s = it.head_s;
    if (param_bytes)
        *param_bytes = it.param_bytes;
    return NP_OK;
}

np_status infer_time_prefill_attn(infer_ctx *c, int64_t tokens, int64_t past, double *s,
                                  np_err *err)
{
    if (tokens < 1 || past < 0 || tokens + past > c->context)
        return np_err_set(err, NP_ERR_RANGE, "attention of %lld new tokens after %lld cached "
                          "(context %lld)", (long long)tokens, (long long)past,
                          (long long)c->context);
    infer_iter it;
    np_status st = time_iter(c, 1, tokens, past, 1.0, INFER_ATTN_ONLY, &it, err);
    *s = it.attn_s;
    return st;
}

/* Measures decode attention's figures per attention node at one sequence of one new token
 * after one cached (context 2): every figure of the roofline is linear in the context (FLOPs
 * and K/V bytes) or in the sequences (q and out bytes). */
static np_status dattn_measure(infer_ctx *c, np_err *err)
{
    nn_model m;
    np_status st = nn_model_build(c->o.model, &(nn_model_opts){.batch = 1, .seq = 1,
                                  .compute = INFER_DT, .kv = true, .past = 1,
                                  .kv_slots = c->o.kv_block}, &m, err);
    if (st != NP_OK)
        return st;
    int n = nn_graph_n_nodes(m.g), k = 0;
    for (int i = 0; i < n; i++) {
        const nn_tensor *t = nn_graph_node(m.g, i);
        k += t->op == NN_OP_ATTENTION && !nn_same_shape(t->src[0], t->src[1]);
    }
    c->dattn_flops = calloc((size_t)k + 1, sizeof(double));
    c->dattn_kv = calloc((size_t)k + 1, sizeof(double));
    c->dattn_qo = calloc((size_t)k + 1, sizeof(double));
    if (!c->dattn_flops || !c->dattn_kv || !c->dattn_qo)
        st = np_err_set(err, NP_ERR_NOMEM, "out of memory");
    for (int i = 0, j = 0; st == NP_OK && i < n; i++) {
        const nn_tensor *t = nn_graph_node(m.g, i);
        if (t->op != NN_OP_ATTENTION || nn_same_shape(t->src[0], t->src[1]))
            continue;
        c->dattn_flops[j] = (double)nn_node_flops(t);
        c->dattn_kv[j] = (double)(bytes_of(t->src[1]) + bytes_of(t->src[2]));
        c->dattn_qo[j] = (double)(bytes_of(t->src[0]) + bytes_of(t));
        j++;
    }
    c->n_dattn = st == NP_OK ? k : 0;
    nn_graph_free(m.g);
    if (st == NP_OK && k == 0)
        st = np_err_set(err, NP_ERR_INTERNAL, "%s: the decode graph has no attention against "
                        "the cache", c->o.model->name);
    return st;
}

np_status infer_time_decode_attn(infer_ctx *c, int64_t seqs, int64_t ctx_tokens, double *s,
                                 np_err *err)
{
    *s = 0;
    if (seqs < 0 || ctx_tokens < seqs)
        return np_err_set(err, NP_ERR_RANGE, "decode attention of %lld sequences over %lld "
                          "tokens", (long long)seqs, (long long)ctx_tokens);
    if (seqs == 0)
        return NP_OK;
    if (!c->n_dattn && dattn_measure(c, err) != NP_OK)
        return err->status;
    double gap = (double)core_kernel_launch_ps(c->o.cfg, false) * 1e-12;
    double scale = (double)ctx_tokens / 2.0; /* the measure's context is 2 */
    for (int j = 0; j < c->n_dattn; j++) {
        double t_c = c->dattn_flops[j] * scale / c->peak;
        double t_m = (c->dattn_kv[j] * scale + c->dattn_qo[j] * (double)seqs) / c->bw;
        *s += (t_c > t_m ? t_c : t_m) + gap;
    }
    return NP_OK;
}

np_status infer_run(infer_ctx *c, infer_result *out, np_err *err)
{
    const infer_opts *o = &c->o;
    memset(out, 0, sizeof *out);
    np_status st = infer_time_iter(c, o->batch, o->prompt, 0, &out->prefill, err);
    out->decode_steps = o->output - 1;
    if (st == NP_OK && out->decode_steps > 0)
        st = infer_time_iter(c, o->batch, 1, o->prompt, &out->decode_first, err);
    if (st == NP_OK && out->decode_steps > 1)
        st = infer_time_iter(c, o->batch, 1, o->prompt + o->output - 2, &out->decode_last, err);
    else
        out->decode_last = out->decode_first;
    if (st != NP_OK)
        return st;
    out->ttft_s = out->prefill.time_s;
    /* a step is the first's kernels (the same for every step) and its attention's roofline,
     * whose time grows with the context: each step's, from the first's and the last's
     * K/V bytes per cached token (both rooflines are linear in the context) */
    double sum = 0;
    const infer_iter *f = &out->decode_first, *l = &out->decode_last;
    for (int64_t k = 0; k < out->decode_steps; k++) {
        double w = out->decode_steps > 1 ? (double)k / (double)(out->decode_steps - 1) : 0;
        sum += (f->time_s - f->roofline_s) + f->roofline_s + w * (l->roofline_s - f->roofline_s);
    }
    out->tpot_mean_s = out->decode_steps ? sum / (double)out->decode_steps : 0;
    out->tpot_last_s = out->decode_steps ? l->time_s : 0;
    out->e2e_s = out->ttft_s + sum;
    out->tokens_per_s = out->e2e_s > 0 ? (double)(o->batch * o->output) / out->e2e_s : 0;
    int64_t tokens = o->prompt + o->output - 1; /* the last token's k, v are not needed */
    out->kv_blocks = o->batch * ((tokens + o->kv_block - 1) / o->kv_block);
    out->kv_bytes = (uint64_t)o->batch * nn_kv_bytes(c->layers, c->kv_width, tokens, o->kv_block,
                                                     INFER_ELEM);
    out->weight_bytes = out->prefill.param_bytes;
    out->hbm_bytes = o->cfg->chip.hbm_bytes;
    out->fits = out->kv_bytes + out->weight_bytes <= out->hbm_bytes;
    out->peak_flops = c->peak, out->hbm_bytes_per_s = c->bw;
    return NP_OK;
}
