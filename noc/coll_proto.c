/* coll_proto.c — NCCL's protocols as parameters of messages (coll_proto.h). */
#include "coll_proto.h"

#include <math.h>
#include <strings.h>

#include "parse.h"

/* Wire format of a line (NCCL src/include/device.h): LL's ncclLLFifoLine is four 32-bit words,
 * data1 flag1 data2 flag2; LL128's line is NCCL_LL128_LINESIZE (128) bytes, of which
 * NCCL_LL128_DATAELEMS (15) 8-byte words carry data and one the flag. */
enum { LL_LINE = 16, LL_DATA = 8, LL128_LINE = 128, LL128_DATA = 120 };

coll_proto coll_proto_of_arch(arch_coll_protocol p)
{
    switch (p) {
    case ARCH_COLL_PROTOCOL_AUTO: return COLL_PROTO_AUTO;
    case ARCH_COLL_PROTOCOL_LL: return COLL_PROTO_LL;
    case ARCH_COLL_PROTOCOL_LL128: return COLL_PROTO_LL128;
    case ARCH_COLL_PROTOCOL_SIMPLE: return COLL_PROTO_SIMPLE;
    default: return COLL_PROTO_RAW;
    }
}

coll_proto coll_proto_resolve(const arch_config *cfg, coll_proto p)
{
    return p == COLL_PROTO_SYSTEM ? coll_proto_of_arch(cfg->system.coll_protocol) : p;
}

const char *coll_proto_name(coll_proto p)
{
    if (p == COLL_PROTO_SYSTEM)
        return "system";
    if ((unsigned)p >= COLL_PROTO_COUNT)
        return NULL;
    /* the spellings of system.coll_protocol, in the same order from RAW on */
    return arch_keys[ARCH_KEY_system_coll_protocol].enum_info->values[p - COLL_PROTO_RAW];
}

np_status coll_proto_parse(const char *s, coll_proto *out, np_err *err)
{
    const char *names[COLL_PROTO_COUNT - COLL_PROTO_RAW];
    for (int i = COLL_PROTO_RAW; i < COLL_PROTO_COUNT; i++) {
        names[i - COLL_PROTO_RAW] = coll_proto_name((coll_proto)i);
        if (strcasecmp(s, names[i - COLL_PROTO_RAW]) == 0) {
            *out = (coll_proto)i;
            return NP_OK;
        }
    }
    const char *guess = np_suggest_name(s, names, COLL_PROTO_COUNT - COLL_PROTO_RAW);
    return np_err_set(err, NP_ERR_UNKNOWN_KEY, "unknown protocol '%s'%s%s%s (expected raw, "
                      "auto, ll, ll128 or simple)", s, guess ? "; did you mean '" : "",
                      guess ? guess : "", guess ? "'?" : "");
}

static uint64_t ns_to_ps(double ns) { return (uint64_t)llround(ns * 1000.0); }

void coll_proto_params_of(const arch_config *cfg, coll_proto p, coll_proto_params *out)
{
    const arch_system *s = &cfg->system;
    *out = (coll_proto_params){.line_bytes = 1, .line_data = 1};
    double net = 0;
    switch (p) {
    case COLL_PROTO_LL:
        *out = (coll_proto_params){.base_ps = ns_to_ps(s->coll_ll_base_ns),
                                   .step_ps = ns_to_ps(s->coll_ll_step_ns), .line_bytes = LL_LINE,
                                   .line_data = LL_DATA,
                                   .max_bytes_per_s = s->coll_ll_max_gb_per_s * 1e9};
        net = s->coll_ll_net_step_ns;
        break;
    case COLL_PROTO_LL128:
        *out = (coll_proto_params){.base_ps = ns_to_ps(s->coll_ll128_base_ns),
                                   .step_ps = ns_to_ps(s->coll_ll128_step_ns),
                                   .line_bytes = LL128_LINE, .line_data = LL128_DATA};
        net = s->coll_ll128_net_step_ns;
        break;
    case COLL_PROTO_SIMPLE:
        *out = (coll_proto_params){.base_ps = ns_to_ps(s->coll_simple_base_ns),
                                   .step_ps = ns_to_ps(s->coll_simple_step_ns), .line_bytes = 1,
                                   .line_data = 1};
        net = s->coll_simple_net_step_ns;
        break;
    default:
        break;
    }
    out->net_step_ps = net > 0 ? ns_to_ps(net) : out->step_ps;
    uint64_t ovh = p == COLL_PROTO_LL || p == COLL_PROTO_LL128 || p == COLL_PROTO_SIMPLE
                       ? ns_to_ps(s->coll_net_overhead_ns * (p == COLL_PROTO_SIMPLE ? 3 : 1))
                       : 0;
    out->span_step_ps = ovh > out->step_ps ? ovh : out->step_ps;
    out->serial = p == COLL_PROTO_SIMPLE && s->coll_pipeline;
}

double coll_proto_wire_factor(const coll_proto_params *pp, double route_bytes_per_s)
{
    double f = (double)pp->line_bytes / pp->line_data;
    if (pp->max_bytes_per_s > 0 && route_bytes_per_s / pp->max_bytes_per_s > f)
        f = route_bytes_per_s / pp->max_bytes_per_s;
    return f;
}

uint64_t coll_proto_wire_bytes(const coll_proto_params *pp, uint64_t payload,
                               double route_bytes_per_s)
{
    uint64_t wire = (payload + pp->line_data - 1) / pp->line_data * pp->line_bytes;
    if (pp->max_bytes_per_s > 0 && route_bytes_per_s > pp->max_bytes_per_s) {
        double paced = ceil((double)payload * (route_bytes_per_s / pp->max_bytes_per_s));
        if (paced > (double)wire)
            wire = (uint64_t)paced;
    }
    return wire;
}

/* NCCL's pipeline constants (src/include/device.h, collectives.h, comm.h, src/init.cc):
 * NCCL_STEPS; Simple's DEFAULT_BUFFSIZE, ring ALLREDUCE_CHUNKSTEPS (= ALLGATHER_ and
 * REDUCESCATTER_) and SLICESTEPS, and genericOp's least slice (a slice's steps / 32); LL's
 * chunk, half a step of NCCL_LL_LINES_PER_THREAD x NCCL_LL_MAX_NTHREADS lines; LL128's
 * NCCL_LL128_ELEMS_PER_THREAD x NCCL_LL128_MAX_NTHREADS words a step, 15 of 16 data; the
 * thread thresholds (NCCL_SIMPLE_THREAD_THRESHOLD, NCCL_LL128_, NCCL_LL_ x ranks for rings)
 * and the threads per channel (NCCL_SIMPLE_MAX_NTHREADS, NCCL_LL128_MAX_NTHREADS,
 * NCCL_LL_MAX_NTHREADS). */
enum {
    PIPE_STEPS = 8,
    SIMPLE_STEP = (4 << 20) / PIPE_STEPS,      /* 512 KiB */
    SIMPLE_CHUNK = 4 * SIMPLE_STEP,            /* 2 MiB: two slices */
    SIMPLE_MIN_SLICE = 2 * SIMPLE_STEP / 32,   /* 32 KiB */
    LL_CHUNK = 8 * 512 * 16 / 2,               /* 32 KiB of data a step */
    LL128_CHUNK = 120 * 640 * 8 / 128 * 120,   /* 576,000 bytes of data a step */
};

uint32_t coll_pipe_channels(coll_proto p, uint64_t bytes, uint32_t ranks, uint32_t max)
{
    uint64_t per; /* threads x threshold: the bytes a channel needs */
    switch (p) {
    case COLL_PROTO_SIMPLE: per = 512 * 64; break;
    case COLL_PROTO_LL128: per = 640 * 8; break;
    case COLL_PROTO_LL: per = 512 * 8 * (uint64_t)ranks; break;
    default: return max ? max : 1;
    }
    uint32_t nc = max ? max : 1;
    while (nc > 1 && bytes < (uint64_t)nc * per)
        nc--;
    return nc;
}

uint64_t coll_pipe_slices(coll_proto p, uint64_t seg)
{
    if (seg == 0)
        return 1;
    switch (p) {
    case COLL_PROTO_SIMPLE: {
        uint64_t loops = (seg + SIMPLE_CHUNK - 1) / SIMPLE_CHUNK;
        uint64_t last = seg - (loops - 1) * SIMPLE_CHUNK;
        return 2 * (loops - 1) + (last <= SIMPLE_MIN_SLICE ? 1 : 2);
    }
    case COLL_PROTO_LL: return (seg + LL_CHUNK - 1) / LL_CHUNK;
    case COLL_PROTO_LL128: return (seg + LL128_CHUNK - 1) / LL128_CHUNK;
    default: return 1;
    }
}

uint64_t coll_pipe_chunk(const arch_config *cfg, coll_proto p, uint64_t bytes, uint32_t ranks,
                         uint32_t elem, uint32_t lanes, uint32_t channels)
{
    if (ranks < 2)
        return 0;
    uint64_t el = elem ? elem : 4, units = bytes / el;
    uint64_t seg = (units / ranks + (units % ranks != 0)) * el + bytes % el; /* the largest */
    uint64_t part = seg, share = seg;
    if (lanes > 0) { /* a lane's part is the message */
        part = share = (seg / el / lanes + (seg / el % lanes != 0)) * el;
    } else {
        uint32_t C = channels ? channels
                              : coll_pipe_channels(p, bytes, ranks,
                                                   (uint32_t)cfg->system.coll_island_channels);
        part = (seg / el / C + (seg / el % C != 0)) * el; /* one channel's */
    }
    uint64_t k = coll_pipe_slices(p, part);
    return k > 1 ? ((share + k - 1) / k + el - 1) / el * el : 0;
}

uint64_t coll_pipe_nvls_chunk(uint64_t bytes, uint32_t ranks, uint32_t channels)
{
    uint64_t n = bytes / (channels ? channels : 1), heads = ranks ? ranks : 1;
    uint64_t chunk = 128 << 10;
    if (n < 64 * heads * chunk)
        chunk = 64 << 10;
    if (n < 8 * heads * chunk)
        chunk = 32 << 10;
    if (n < 2 * heads * chunk)
        chunk = 16 << 10;
    return chunk;
}
