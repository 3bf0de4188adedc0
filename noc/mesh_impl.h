/* mesh_impl.h — the mesh's internals, shared by mesh.c (routers, messages, flow mode, the
 * event-queue driver) and mesh_mem.c (memory controllers and accesses). Private to noc/. */
#ifndef NPUSIM_NOC_MESH_IMPL_H
#define NPUSIM_NOC_MESH_IMPL_H

#include "mesh.h"
#include "mesh_flow.h"

#define NP MESH_PORT_COUNT
#define NONE UINT32_MAX

typedef struct mesh_flit {
    uint64_t arr; /* cycle it reaches (reached) the buffer */
    uint32_t pkt; /* index into m->pkts */
    uint32_t seq; /* 0 = head, flits - 1 = tail */
} mesh_flit;

typedef struct mesh_ivc {
    uint64_t t_ready; /* front flit: first cycle it may bid (valid while count > 0) */
    uint64_t t_base;  /* the cycle after the last departure (for the next front) */
    uint32_t head, count;
    int8_t out_port;  /* the front packet's output port */
    int16_t out_vc;   /* -1: the front head needs an output VC */
} mesh_ivc;

typedef struct mesh_ovc {
    uint64_t t_next;   /* return cycle of the oldest credit on its way back (UINT64_MAX: none) */
    uint32_t credits;
    uint32_t ret_base; /* its ring of return cycles: m->ret + ret_base, B entries */
    uint16_t ret_head, ret_n;
    uint8_t busy;
    uint8_t draining;  /* wait_tail_credit: the tail is sent, the VC frees when credits == B */
} mesh_ovc;

typedef struct mesh_msg {
    uint32_t src, dst, flits;
    uint32_t cut;  /* flits already cut into packets */
    uint32_t sent; /* flits injected */
    uint32_t recv; /* flits delivered */
    uint64_t tag, t_create, t_inject;
    uint32_t next; /* source-queue link while queued, free-list link while unused */
} mesh_msg;

typedef struct mesh_pkt {
    uint32_t msg, dst, flits;
    uint32_t recv;     /* flits delivered so far */
    uint32_t next_free;
} mesh_pkt;

typedef struct mesh_src { /* one endpoint's source queue */
    uint32_t first, last;  /* queued messages (linked through mesh_msg.next) */
    uint32_t pkt;          /* the packet being injected, NONE between packets */
    uint32_t seq;          /* its next flit */
    int32_t vc;            /* its injection VC, -1 until allocated */
    uint32_t last_vc;      /* round-robin start of the next injection VC allocation */
} mesh_src;

typedef struct mesh_eject { /* a flit on an ejection link (flit mode) */
    uint64_t t;
    uint32_t pkt, seq;
} mesh_eject;

/* A min-heap of (cycle, insertion order) -> id. */
typedef struct mesh_hent {
    uint64_t t, seq;
    uint32_t id;
} mesh_hent;
typedef struct mesh_heap {
    mesh_hent *v;
    uint32_t n, cap;
    uint64_t seq;
} mesh_heap;

/* A memory controller: its router, its links in the flow model, what it served. */
typedef struct mesh_ctrl {
    uint32_t router;
    double flits_per_cycle;
    uint32_t l_bw, l_out, l_in; /* flow links: bandwidth, port to the router, port from it */
    double read_flits, write_flits; /* of completed accesses */
} mesh_ctrl;

/* A memory access in flight (mesh_access plus its progress). */
typedef struct mesh_acc {
    mesh_access a;
    uint32_t head;      /* zero-load cycles of one flit between the ends */
    uint32_t lag;       /* a write started after its cycle's step: cycles its flow began late */
    uint32_t next_free;
} mesh_acc;

typedef struct mesh_list { /* a set of node ids in insertion order */
    uint32_t *v;
    uint8_t *in;
    uint32_t n;
} mesh_list;

struct mesh {
    mesh_params p;
    uint32_t n; /* routers = endpoints */
    uint32_t V, B, S, R, X, L, CD; /* vcs, buf_flits, input speedup, stages, link, credit */
    uint64_t cycle;

    mesh_ivc *ivc;      /* n * NP * V */
    mesh_flit *buf;     /* n * NP * V * B */
    mesh_ovc *ovc;      /* n * NP * V */
    mesh_ovc *inj;      /* n * V */
    uint64_t *ret;      /* (n * NP * V + n * V) * B return cycles */
    uint32_t *occ;      /* flits in (or on their way to) each router's ivcs */
    uint64_t *vmask;    /* n * NP: bit v set when ivc v of that input port holds flits */
    uint8_t *pmask;     /* n: bit b set when BookSim input port b holds flits */
    uint16_t *va_gptr;  /* n * NP * V: per output VC (BookSim order), next input VC */
    uint16_t *va_aptr;  /* n * NP * V: per input VC (BookSim order), next output VC */
    uint8_t *sa_gptr;   /* n * NP: per output, next crossbar input */
    uint8_t *sa_aptr;   /* n * NP * S: per crossbar input, next output */
    uint8_t *sa_vc;     /* n * NP * S: per crossbar input, the VC round robin starts at */
    int32_t *nb;        /* n * NP: neighbour router through each port, -1 at the edge */

    mesh_msg *msgs;
    uint32_t n_msgs, cap_msgs, free_msg;
    mesh_pkt *pkts;
    uint32_t n_pkts, cap_pkts, free_pkt;
    mesh_src *src;      /* n */
    mesh_list act;      /* routers holding flits */
    mesh_list sact;     /* sources with queued messages */
    mesh_eject *ej;     /* flit mode: ring of pending deliveries, in time order */
    uint32_t ej_head, ej_n, ej_cap;

    mesh_flow *flow;    /* flow mode, and the memory accesses in either mode (else NULL) */
    uint32_t *route;    /* scratch for a route's links (flow mode, accesses) */
    uint64_t *ended;    /* flow users whose flow ended in this step */
    uint32_t n_ended, cap_ended;
    mesh_heap arr;      /* flow mode: message arrivals */
    uint32_t n_flow_links; /* the mesh's own links in the flow model (n * (NP + 1)) */

    /* memory controllers and accesses (mesh_mem.c) */
    mesh_ctrl *ctrl;
    uint32_t n_ctrl, cap_ctrl;
    mesh_acc *accs;     /* access records, reused through free_acc */
    uint32_t n_accs, cap_accs, free_acc;
    mesh_heap acc_start; /* reads whose data may start flowing, by cycle */
    mesh_heap acc_done;  /* accesses that complete, by cycle */
    uint64_t accs_live;  /* started, not yet completed */
    uint64_t accs_flowing; /* of those, with their flow in the flow model */
    uint64_t accs_started;
    mesh_access_fn access_done;
    void *access_done_ctx;

    stats_counter **links;    /* n * NP flit counters: in the registry, else own_links */
    stats_counter *own_links;

    mesh_deliver_fn deliver;
    void *deliver_ctx;
    mesh_deliver_fn on_sent;
    void *on_sent_ctx;

    mesh_totals tot;
    uint64_t order_errors; /* flits delivered out of order or twice, or lost */

    evq *q; /* mesh_attach */
    const clk_domain *clk;
    bool scheduled;      /* a tick is pending (or running: in_tick) */
    bool in_tick;
    evq_handle tick;     /* the pending tick */
    uint64_t tick_cycle; /* its cycle */
};


/* Flow-model user values: a message id, or an access id with MESH_USER_ACC. */
#define MESH_USER_ACC (1ull << 63)

/* mesh.c */
int mesh_route(const mesh *m, uint32_t r, uint32_t dst); /* the XY output port at r to dst */
bool mesh_heap_push(mesh_heap *h, uint64_t t, uint32_t id); /* false: out of memory */
mesh_hent mesh_heap_pop(mesh_heap *h);
np_status mesh_ensure_flow(mesh *m, np_err *err);  /* the flow model, for accesses */
void mesh_sync(mesh *m);  /* outside a tick: brings the cycle up to the queue's time */
void mesh_kick(mesh *m);  /* schedules the next tick if work became due earlier */

/* mesh_mem.c */
void mesh_mem_free(mesh *m);
void mesh_mem_due(mesh *m, uint64_t now);     /* completions and read starts due by now */
void mesh_mem_flow_ended(mesh *m, uint32_t acc, uint64_t now); /* an access's flow ended */
uint64_t mesh_mem_next_cycle(const mesh *m);  /* UINT64_MAX: nothing pending */

#endif
