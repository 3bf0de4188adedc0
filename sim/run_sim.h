/* run_sim.h — the running engine's state, shared by run_engine.c (the event handlers),
 * run_analysis.c (what the routes allow before the run: collective reuse, mirrored ranks),
 * run_reuse.c (reused collective timings) and run_result.c (the figures). Not a public API.
 *
 * Per rank and engine the state is three counters: `done` tasks completed (engines complete
 * in issue order, so dependency (e, p) of a task in step k is done iff eng[e].done >
 * k * n_e + p), and the head's step and index. An engine is idle or busy with its head:
 *
 *   idle ──(head's dependencies done: rs_try_start)──► busy ──(rs_complete)──► idle, next head
 *
 * A compute head completes at its finish event; a collective head waits in its group's
 * rendezvous slot until every simulated member has arrived, then all complete together; a
 * send completes at delivery; a recv completes when its channel has a delivered message.
 */
#ifndef NPUSIM_SIM_RUN_SIM_H
#define NPUSIM_SIM_RUN_SIM_H

#include "coll.h"
#include "evq.h"
#include "run_engine.h"
#include "run_impl.h"

#define RS_LINK_BINS 512       /* link byte histogram bins (the window doubles to keep them) */
#define RS_LINK_BIN0_PS 1048576 /* first window: 2^20 ps */
#define RS_GROUP_ROUTES_MAX 64 /* larger groups are assumed to touch every link */

typedef struct rs_eng {
    uint64_t done;  /* tasks completed, over all steps */
    uint32_t idx;   /* the head's index in its step's list */
    uint32_t step;  /* the head's step */
    uint8_t busy;
    uint64_t t_start; /* when the head started (for the observer) */
    uint64_t started; /* tasks started, over all steps (what a pipelined dependency waits for) */
    /* the head overlapping another task in chunks (rg_task.pipe_k): pipe 1 while both run,
     * 2 when the head's own part ended first and it waits for the other's end */
    uint8_t pipe;
    uint8_t pipe_eng;          /* the other's engine */
    uint8_t other_done;        /* the other has completed: other_end, other_ps hold */
    uint64_t pipe_need;        /* the other is done when pipe_eng's done count passes this */
    uint64_t own_ps;           /* the head's own time (its kernel's; a collective's as it ran) */
    uint64_t other_end, other_ps;
} rs_eng;

/* A pipeline (a pp group) in its latest step: the first start and the last end so far of its
 * ranks' RUN_TASK_PIPELINE tasks, each with a version its ranks compare with theirs to take
 * their idle time at that instant, lazily, when their accounting next moves (rs_acct). */
typedef struct rs_pipe {
    uint64_t lo, hi;
    uint32_t lo_ver, hi_ver;
    uint32_t step;    /* the step lo and hi are of (UINT32_MAX: none yet) */
    const uint32_t *members; /* its ranks, size of them */
    uint32_t size;
} rs_pipe;

typedef struct rs_rank {
    const rg_class *cls;
    uint32_t id, chip;
    uint8_t sim;       /* simulated (else a mirror of rank `rep`) */
    uint8_t computing; /* the compute engine is busy */
    uint32_t pipe_mask; /* engines whose head overlaps another task in chunks (rs_eng.pipe) */
    uint32_t n_active; /* collectives / transfers in flight that involve this rank */
    uint32_t active[RUN_COMM_COUNT];
    uint32_t rep;      /* the simulated rank it mirrors (itself when simulated) */
    double slow;       /* its chip's compute slowdown (run_opts.slow; 1: none) */
    uint32_t pipe_step; /* the step the pipeline figures are of (the last one) */
    uint64_t t_acct;   /* comm, compute and idle time accounted up to here */
    rs_pipe *pipe;     /* its pipeline (NULL: no pp groupset) */
    uint32_t lo_ver, hi_ver;  /* the pipe versions its idle time was taken at */
    uint64_t idle_lo, idle_hi; /* st.idle_ps at the pipe's lo and hi */
    uint32_t steps_done;
    uint64_t comm_since; /* the start of the current comm-busy interval (n_active > 0) */
    run_ktime kt;        /* the running compute task's timing (for the observer) */
    run_rank_stats st;
    uint64_t own_bytes[RUN_COMM_COUNT]; /* bytes of mirror-groupset collectives */
    rs_eng eng[RUN_ENGINES];
} rs_rank;

typedef struct rs_rchan {
    uint32_t arrived; /* delivered messages not yet consumed */
    uint8_t waiting;  /* 1 + engine of a recv waiting for one, 0 when none */
} rs_rchan;

/* A reused collective timing: duration and the link bytes it moved, at their times. */
typedef struct rs_prof {
    uint32_t local_link; /* index into the group's local link table */
    uint64_t rel_ps;     /* from the collective's start */
    uint64_t bytes;
} rs_prof;

typedef struct rs_reuse {
    uint32_t spec, sig;
    uint64_t dur_ps, bytes_sent;
    uint64_t reduced_bytes; /* coll_result.reduced_bytes: the ranks' reductions, for energy */
    uint32_t prof_off, prof_n;
} rs_reuse;

/* A route signature: a group's routes with links renumbered by first use. */
typedef struct rs_sig {
    uint32_t off, len; /* words in the signature pool */
} rs_sig;

struct run_sim;

typedef struct rs_rdv {
    struct run_sim *s;
    uint32_t arrived, expect;
    uint32_t spec;
    uint32_t sig;      /* RUN_NONE: simulate on the network */
    uint32_t loc_off;  /* its local link table in loc_links (with sig) */
    uint32_t group;    /* its group in the groupset */
    const uint32_t *members; /* the simulated members, completed together */
    uint32_t n_members;
    coll *c;
    uint64_t t_start;
    uint32_t reuse;          /* the timing being replayed (index into run_sim.reuse) */
    uint64_t count;          /* collectives completed here (observer group ids) */
} rs_rdv;

typedef struct run_sim {
    const run_graph *g;
    const arch_config *cfg;
    uint64_t launch_ps[2]; /* a kernel's wait on the stream: [1] the first of a rank's step
                              (core_kernel_launch_ps), [0] every other */
    run_opts o;
    evq *q;
    coll_sys *cs;
    net *n;
    uint32_t n_links;
    rs_rank *rank;
    rs_rchan *rchan;
    rs_rdv *rdv;
    uint32_t **gs_chips;  /* per groupset: the chips of its members, in member order */
    /* kernels */
    run_ktime *ktime;     /* per kernel (cache on) */
    run_kcache *kc_own;
    /* reuse */
    uint32_t *sig_pool;
    uint32_t n_sig_pool, cap_sig_pool;
    rs_sig *sig;
    uint32_t n_sig, cap_sig;
    np_hmap sig_index;
    uint32_t *loc_links;  /* local -> global link tables of the reused slots */
    uint32_t n_loc, cap_loc;
    uint32_t *loc_n;      /* per signature: its local link count */
    rs_reuse *reuse;
    uint32_t n_reuse, cap_reuse;
    np_hmap reuse_index;
    rs_prof *prof;
    uint32_t n_prof, cap_prof;
    evq *sq;              /* scratch network for reuse */
    coll_sys *scs;
    /* mirrors */
    uint32_t mirror_gs, mirror_n;
    uint32_t *mirror_link; /* (mirror_n) * n_links: link of position k for link of position 0 */
    uint32_t *one_member;  /* per rank: itself (a 1-member list for mirror-groupset groups) */
    /* links */
    uint32_t *sampled;     /* links read by the sampler */
    uint32_t n_sampled;
    uint64_t *link_last;   /* per sampled link: net bytes at the last sample */
    uint32_t *bin_row;     /* per link: its row of RS_LINK_BINS in bins, made when the link first
                              carries bytes (RUN_NONE: none yet), so a big system's idle links
                              cost no histogram */
    uint64_t *bins;        /* n_bin_rows x RS_LINK_BINS */
    uint32_t n_bin_rows, cap_bin_rows;
    rs_pipe *pipes;        /* per group of the pp groupset */
    uint64_t *link_bytes;  /* per link, over the run */
    net_window_peak *replay_peak; /* per link: the busiest window of the bytes reused
                                     collectives replay (the network's: net_link_info) */
    uint64_t bin_ps;
    uint32_t bin_k;        /* the bin the next sample closes */
    /* progress */
    uint64_t tasks_total, tasks_done, progress_next;
    uint64_t t_last;       /* the last task start or end */
    uint32_t ranks_left, steps;
    uint64_t *step_end;
    /* counters */
    uint64_t kernels_timed, colls_sim, colls_reused, colls_scratch, transfers;
    uint32_t ranks_sim;
    const run_observer *obs; /* NULL: none */
    uint64_t n_transfers_seen; /* observer group ids of sends */
    /* a failure inside an event: the run stops */
    bool failed;
    np_err err;
} run_sim;

/* run_analysis.c: before the run — routes, exclusive groups and their signatures, mirrors,
 * the links to sample. */
np_status rs_analyze(run_sim *s, np_err *err);

/* run_reuse.c: the reused timing of rendezvous slot rdv's collective (spec), simulated on the
 * scratch network the first time. */
np_status rs_reuse_get(run_sim *s, const rs_rdv *rdv, uint32_t *out, np_err *err);
void rs_reuse_free(run_sim *s);

/* run_result.c: the figures, from the finished run. */
np_status rs_result(run_sim *s, run_result **out, np_err *err);

/* run_engine.c: link's row of bins, made (zeroed) when it has none; NULL when out of memory.
 * The pointer holds until the next row is made. */
uint64_t *rs_bin_row(run_sim *s, uint32_t link);

/* The row of a link that has one, or NULL. */
static inline const uint64_t *rs_bin_row_of(const run_sim *s, uint32_t link)
{
    uint32_t r = s->bin_row[link];
    return r == RUN_NONE ? NULL : &s->bins[(size_t)r * RS_LINK_BINS];
}

/* The bin of absolute time t (run_engine.c merges bins as time goes on); NULL when out of
 * memory. */
static inline uint64_t *rs_bin(run_sim *s, uint32_t link, uint64_t t)
{
    uint64_t k = t / s->bin_ps;
    if (k >= RS_LINK_BINS)
        k = RS_LINK_BINS - 1;
    uint64_t *row = rs_bin_row(s, link);
    return row ? row + k : NULL;
}

#endif
