/* test_plan_verify.c — nn_plan_verify: plans of every schedule and runtime pass it, and each
 * invariant it names fails when a built plan is corrupted by hand to break exactly that one
 * (a dropped data dependency, a backward scheduled before its forward, a micro-batch run
 * twice, a send whose receive expects other bytes, two ranks on one chip, a dependency on an
 * entry issued later). */
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "plan.h"

static const nn_optim adam = {.kind = NN_OPTIM_ADAM, .lr = 1e-4, .beta1 = 0.9, .beta2 = 0.95,
                              .eps = 1e-8};

/* gpt-tiny (2 layers) on dp 2 x tp 2 x pp 2, 4 micro-batches of 1, under `schedule`. */
static nn_plan *tiny_plan(nn_pp_schedule schedule, bool runtime)
{
    nn_model_desc d;
    nn_strategy s;
    nn_strategy_default(&s);
    s.dp = s.tp = s.pp = 2;
    s.microbatch = 1;
    s.schedule = schedule;
    if (schedule == NN_PP_INTERLEAVED)
        s.virtual_stages = 2;
    if (runtime) { /* Megatron-LM 2021's: blocking p2p calls and host synchronizations */
        s.p2p_blocking = s.host_sync = true;
        s.zero = 1;
        s.sp = true;
    }
    nn_model_opts o = {.batch = 8, .seq = 0, .compute = NN_BF16, .seed = 1};
    np_err e = {0};
    nn_plan *p = NULL;
    if (nn_model_load("gpt-tiny", &d, &e) != NP_OK || nn_plan_build(&d, &o, &s, &adam, NULL, &p, &e) != NP_OK)
        fprintf(stderr, "%s\n", e.msg);
    return p;
}

static void expect_broken(const nn_plan *p, const char *phrase)
{
    np_err e = {0};
    CU_ASSERT_EQUAL(nn_plan_verify(p, &e), NP_ERR_INTERNAL);
    if (!strstr(e.msg, phrase))
        fprintf(stderr, "expected \"%s\" in: %s\n", phrase, e.msg);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, phrase));
}

/* The first entry of class c with a data dependency on an entry of its own block. */
static nn_plan_entry *entry_with_local_dep(nn_plan *p, int c, int *block, int *entry)
{
    nn_plan_class *cl = &p->classes[c];
    for (int b = 0; b < cl->n_blocks; b++)
        for (int i = 0; i < cl->blocks[b].n_entries; i++) {
            nn_plan_entry *en = &cl->blocks[b].entries[i];
            if (en->kind == NN_PLAN_COMPUTE && en->n_deps == 1 && en->deps[0].block < 0) {
                *block = b;
                *entry = i;
                return en;
            }
        }
    return NULL;
}

TEST(plans_of_every_schedule_and_runtime_pass_the_verifier)
{
    const nn_pp_schedule sch[] = {NN_PP_GPIPE, NN_PP_1F1B, NN_PP_INTERLEAVED, NN_PP_ZB_H1};
    for (int k = 0; k < 4; k++)
        for (int rt = 0; rt < (sch[k] == NN_PP_ZB_H1 ? 1 : 2); rt++) { /* ZB-H1: no 2021 runtime */
            nn_plan *p = tiny_plan(sch[k], rt);
            CU_ASSERT_PTR_NOT_NULL_FATAL(p);
            np_err e = {0};
            CU_ASSERT_EQUAL(nn_plan_verify(p, &e), NP_OK);
            if (e.status)
                fprintf(stderr, "schedule %d runtime %d: %s\n", k, rt, e.msg);
            nn_plan_free(p);
        }
}

TEST(a_dropped_data_dependency_is_found)
{
    nn_plan *p = tiny_plan(NN_PP_1F1B, false);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    int b, i;
    nn_plan_entry *en = entry_with_local_dep(p, 0, &b, &i);
    CU_ASSERT_PTR_NOT_NULL_FATAL(en);
    en->n_deps = 0;
    expect_broken(p, "without depending on it");
    en->n_deps = 1;
    nn_plan_free(p);
}

TEST(a_dependency_on_an_entry_issued_later_is_found)
{
    nn_plan *p = tiny_plan(NN_PP_1F1B, false);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    int b, i;
    nn_plan_entry *en = entry_with_local_dep(p, 0, &b, &i);
    CU_ASSERT_PTR_NOT_NULL_FATAL(en);
    /* the producer stays a dependency (data dependencies hold); a second one names the last
     * entry of the block, which the block issues after this one */
    nn_plan_dep deps[2] = {en->deps[0], {-1, p->classes[0].blocks[b].n_entries - 1}};
    nn_plan_dep *saved = en->deps;
    CU_ASSERT_FATAL(deps[1].entry > i);
    en->deps = deps;
    en->n_deps = 2;
    expect_broken(p, "before its dependency");
    en->deps = saved;
    en->n_deps = 1;
    nn_plan_free(p);
}

TEST(a_backward_before_its_forward_and_a_micro_batch_run_twice_are_found)
{
    nn_plan *p = tiny_plan(NN_PP_1F1B, false);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    nn_plan_class *c = &p->classes[1]; /* the last stage: F0 B0 F1 B1 ... */
    nn_plan_sched f0 = c->sched[1], b0 = c->sched[2];
    CU_ASSERT_EQUAL_FATAL(c->blocks[f0.block].kind, NN_BLOCK_FORWARD);
    CU_ASSERT_EQUAL_FATAL(c->blocks[b0.block].kind, NN_BLOCK_BACKWARD);
    c->sched[1] = b0;
    c->sched[2] = f0;
    expect_broken(p, "before its forward");
    c->sched[1] = f0;
    c->sched[2] = f0; /* F0 twice, B0 never */
    expect_broken(p, "a second time");
    c->sched[2] = b0;
    np_err e = {0};
    CU_ASSERT_EQUAL(nn_plan_verify(p, &e), NP_OK); /* restored */
    nn_plan_free(p);
}

TEST(a_send_whose_receive_expects_other_bytes_is_found)
{
    nn_plan *p = tiny_plan(NN_PP_1F1B, false);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    nn_plan_entry *send = NULL;
    for (int b = 0; b < p->classes[0].n_blocks && !send; b++)
        for (int i = 0; i < p->classes[0].blocks[b].n_entries && !send; i++)
            if (p->classes[0].blocks[b].entries[i].kind == NN_PLAN_SEND)
                send = &p->classes[0].blocks[b].entries[i];
    CU_ASSERT_PTR_NOT_NULL_FATAL(send);
    send->peer = 0; /* to itself: its receive is on stage 1 */
    expect_broken(p, "sends");
    send->peer = 1;
    nn_tensor *node = send->nodes[0];
    send->nodes[0] = NULL;
    expect_broken(p, "is not of the stage's graph");
    send->nodes[0] = node;
    nn_plan_free(p);
}

TEST(two_ranks_on_one_chip_and_a_batch_the_micro_batches_do_not_make_are_found)
{
    nn_plan *p = tiny_plan(NN_PP_1F1B, false);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    int chip = p->mesh.chip[3];
    p->mesh.chip[3] = p->mesh.chip[0];
    expect_broken(p, "both on chip");
    p->mesh.chip[3] = chip;
    p->n_micro = 3; /* 3 x 1 x dp 2 is not the batch of 8 */
    expect_broken(p, "for a batch of 8");
    p->n_micro = 4;
    nn_plan_free(p);
}

TEST(a_zb_h1_w_pass_before_its_b_pass_is_found)
{
    nn_plan *p = tiny_plan(NN_PP_ZB_H1, false);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    nn_plan_class *c = &p->classes[0];
    int sb = -1, sw = -1;
    for (int s = 0; s < c->n_sched; s++) {
        nn_plan_block_kind k = c->blocks[c->sched[s].block].kind;
        if (k == NN_BLOCK_BACKWARD && c->sched[s].mb == 0)
            sb = s;
        if (k == NN_BLOCK_BACKWARD_W && c->sched[s].mb == 0)
            sw = s;
    }
    CU_ASSERT_FATAL(sb >= 0 && sw > sb);
    nn_plan_sched t = c->sched[sb];
    c->sched[sb] = c->sched[sw];
    c->sched[sw] = t;
    expect_broken(p, "before its B pass");
    c->sched[sw] = c->sched[sb];
    c->sched[sb] = t;
    np_err e = {0};
    CU_ASSERT_EQUAL(nn_plan_verify(p, &e), NP_OK);
    nn_plan_free(p);
}
