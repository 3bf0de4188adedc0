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
