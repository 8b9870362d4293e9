/* ncclGroupStart / ncclGroupEnd / ncclGroupSimulateEnd: the group depth of each thread, and window registrations queued
 * inside a group, handled at the outermost ncclGroupEnd.
 *
 * Why: NCCL completes registrations issued inside a group only at ncclGroupEnd, and one thread may
 * drive several GPUs there (nccl-tests -R 2). Nothing can be agreed inside the group (a collective
 * issued there would only run at group end too), so ncclguard first lets the real ncclGroupEnd
 * complete the application's own operations, then runs the queued registrations through the policy
 * as one batch: one agreement group over all of them, one real group with those that go ahead.
 * The caller's `win` pointers are written before ncclGroupEnd returns, as NCCL 2.28+ does. Errors
 * come back from ncclGroupEnd, as NCCL's deferred errors do. These two wrappers cost one
 * thread-local increment on the data path; collectives themselves are not wrapped. */
#include <stdlib.h>

#include "guard.h"

__thread struct ng_tls ng_tls;

NG_API ncclResult_t ncclGroupStart(void) {
  NG_FOREIGN(ncclGroupStart);
  ncclResult_t res;
  ng_init();
  if (ng_cfg.disable || ng_tls.in_nccl) {
    NG_CALL(res, ncclGroupStart);
    return res;
  }
  NG_CALL(res, ncclGroupStart);
  if (res == ncclSuccess) ng_grp()->depth++;
  return res;
}

/* The outermost group end of a group with queued registrations (or one that could not be queued), out of
 * the data path's way (the empty group end stays as short as without them). */
__attribute__((noinline)) static ncclResult_t group_end_queued(struct ng_group* G, ncclResult_t res) {
  if (G->nlost) { /* a registration of the group could not be queued here */
    for (int i = 0; i < G->nlost; i++)
      ng_give_up(G->lost[i], 0, -1, NG_R_AGREE_FAILED, "out of host memory to queue a registration of the group");
    G->nlost = 0;
    if (G->npending == 0) return res;
  }
  struct ng_regreq* reqs = G->pending;
  int n = G->npending;
  G->pending = NULL;
  G->npending = G->cappending = 0;
  /* NCCL drops a group in which a call failed (group.cc, 2.27.7 - 2.30.7): its queued registrations are
   * refused without a round (policy.c, ng_policy_group_failed) */
  ncclResult_t pres = res != ncclSuccess && res != ncclInProgress ? ng_policy_group_failed(reqs, n, res)
                                                                   : ng_policy_register(reqs, n);
  free(reqs);
  if (res == ncclSuccess || res == ncclInProgress) return pres != ncclSuccess ? pres : res;
  return res;
}

/* The mark of a failed group: the generation the next communicator will get (every one made before the
 * failure has a smaller one). */
__attribute__((noinline)) static uint64_t ng_failed_group_gen(void) { return ng_reg_gen_now() + 1; }

/* The end of the application's group: the real ncclGroupEnd, or ncclGroupSimulateEnd, which ends
 * the group the same way (NCCL decrements its depth and still performs the registrations queued in
 * it; only collectives are not launched). Then the queued registrations go through the policy. */
static ncclResult_t group_end(ncclSimInfo_t* sim, int simulate) {
  ncclResult_t res;
  ng_init();
  if (ng_cfg.disable || ng_tls.in_nccl) {
    if (simulate) NG_CALL(res, ncclGroupSimulateEnd, sim);
    else NG_CALL(res, ncclGroupEnd);
    return res;
  }
  if (simulate) NG_CALL(res, ncclGroupSimulateEnd, sim);
  else NG_CALL(res, ncclGroupEnd);
  struct ng_group* G = ng_grp(); /* this libnccl's group (route.c: each copy of NCCL has its own) */
  if (G->depth == 0) return res; /* no group of the application's was open: NCCL refuses, nothing dropped */
  if (--G->depth > 0) return res;
  /* a failed group: NCCL dropped its collectives on this rank only, perhaps; the peers' may wait for them on
   * any communicator that existed then, and a round of this thread's on one of them would pair with them
   * (policy.c refuses those registrations; the group's own queued ones are refused below) */
  if (res != ncclSuccess && res != ncclInProgress) G->failed_gen = ng_failed_group_gen();
  if (G->npending == 0 && G->nlost == 0) return res; /* (the data path: one compare more) */
  return group_end_queued(G, res);
}

NG_API ncclResult_t ncclGroupEnd(void) { NG_FOREIGN(ncclGroupEnd); return group_end(NULL, 0); }
/* exported through shim/exports.c */
NG_OPT_API ncclResult_t NG_OPT(ncclGroupSimulateEnd)(ncclSimInfo_t* simInfo) { NG_FOREIGN(ncclGroupSimulateEnd, simInfo); return group_end(simInfo, 1); }

/* ncclguard's own functions, for dlsym on libnccl's handle (dlsym.c) */
NG_SELF(ncclGroupStart) NG_SELF(ncclGroupEnd)
