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

static ncclResult_t group_start(void) {
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
    for (int i = 0; i < G->nlost; i++) {
      ng_give_up(G->lost[i], 0, -1, NG_R_AGREE_FAILED, "out of host memory to queue a registration of the group");
      if (res != ncclSuccess && res != ncclInProgress) /* and the group failed here: as policy.c after a step */
        ng_stop_comm(G->lost[i], 0, -1, NG_R_GROUP_FAILED, "this rank's application group failed");
    }
    G->nlost = 0;
    if (G->npending == 0) return res;
  }
  struct ng_regreq* reqs = G->pending;
  int n = G->npending;
  G->pending = NULL;
  G->npending = G->cappending = 0;
  /* NCCL drops a group in which a call failed (group.cc, 2.27.7 - 2.30.7), on this rank: its queued
   * registrations are refused on every rank alike (policy.c: the failure travels in the vote) */
  int failed = res != ncclSuccess && res != ncclInProgress;
  for (int i = 0; failed && i < n; i++) reqs[i].app_group_failed = 1;
  ncclResult_t pres = ng_policy_register(reqs, n);
  free(reqs);
  if (res == ncclSuccess || res == ncclInProgress) return pres != ncclSuccess ? pres : res;
  return res;
}

/* The blocking communicators created inside the group, warmed up once it ended (ready, and nothing of the
 * application's on them yet): their device, rank and size are known from now on. */
__attribute__((noinline)) static void group_end_warm(struct ng_group* G, ncclResult_t res) {
  ncclComm_t* w = G->warm;
  int n = G->nwarm;
  G->warm = NULL;
  G->nwarm = G->capwarm = 0;
  if (res == ncclSuccess) {
    for (int i = 0; i < n; i++) {
      int dev = -1, rank = -1, nranks = 0;
      ncclResult_t e;
      NG_CALL(e, ncclCommCuDevice, w[i], &dev);
      NG_CALL(e, ncclCommUserRank, w[i], &rank);
      NG_CALL(e, ncclCommCount, w[i], &nranks);
      (void)e;
      ng_reg_comm_set_info(w[i], rank, nranks, dev);
    }
    ng_warmup(w, n, "created in a group");
  }
  free(w);
}

/* The children made inside the group, recorded now that NCCL wrote their handles (a blocking group: before its
 * end returned). A nonblocking group's end returns first and NCCL writes them later, from its own thread: those
 * are recorded at their first registration instead (policy.c, complete_view), as an unknown one. */
__attribute__((noinline)) static void group_end_children(struct ng_group* G, ncclResult_t res) {
  struct ng_child* c = G->child;
  int n = G->nchild;
  G->child = NULL;
  G->nchild = G->capchild = 0;
  for (int i = 0; i < n; i++) {
    ncclComm_t comm = res == ncclSuccess ? __atomic_load_n(c[i].slot, __ATOMIC_ACQUIRE) : NULL;
    if (comm) ng_comm_created(c[i].fn, comm, res, c[i].t0, c[i].cid, c[i].parent, -1, c[i].nranks, c[i].blocking);
    else if (res == ncclInProgress)
      ng_log_msg(NG_LOG_INFO, -1, c[i].fn, "the child communicator of a nonblocking group reaches the application "
                 "when NCCL's job ends: ncclguard records it at its first registration");
  }
  free(c);
}

void ng_group_child_later(const struct ng_child* c) {
  struct ng_group* G = ng_grp();
  if (G->nchild == G->capchild) {
    int cap = G->capchild ? 2 * G->capchild : 8;
    struct ng_child* nc = ng_realloc("group.child", G->child, (size_t)cap * sizeof *nc);
    if (!nc) return; /* recorded at its first registration instead (an unknown communicator) */
    G->child = nc, G->capchild = cap;
  }
  G->child[G->nchild++] = *c;
}

void ng_group_warm_later(ncclComm_t comm) {
  struct ng_group* G = ng_grp();
  if (G->nwarm == G->capwarm) {
    int cap = G->capwarm ? 2 * G->capwarm : 8;
    ncclComm_t* nw = ng_realloc("group.warm", G->warm, (size_t)cap * sizeof *nw);
    if (!nw) return; /* no warm-up for it (the application's first collective connects instead) */
    G->warm = nw, G->capwarm = cap;
  }
  G->warm[G->nwarm++] = comm;
}

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
  if (G->nchild) group_end_children(G, res);
  if (G->nwarm) group_end_warm(G, res);
  if (G->npending == 0 && G->nlost == 0) return res; /* (the data path: one compare more) */
  return group_end_queued(G, res);
}

NG_API ncclResult_t ncclGroupStart(void) { NG_FOREIGN(ncclGroupStart); return group_start(); }
NG_API ncclResult_t ncclGroupEnd(void) { NG_FOREIGN(ncclGroupEnd); return group_end(NULL, 0); }
/* NCCL's profiling names of the same two calls: a tracer that forwards ncclGroupStart/End to pncclGroupStart/End
 * (the usual way to reach NCCL past other interposers), or an application that calls them, opens the same
 * group of NCCL's, and the registrations inside it must wait for its end here too (NCCL defers them to it:
 * read at once, their window would be NULL). A group opened through a lookup on libnccl's own handle
 * (dlsym(handle, "pncclGroupStart")) is not seen: docs/DESIGN.md, the agreement channel. */
NG_API ncclResult_t pncclGroupStart(void) { NG_FOREIGN(ncclGroupStart); return group_start(); }
NG_API ncclResult_t pncclGroupEnd(void) { NG_FOREIGN(ncclGroupEnd); return group_end(NULL, 0); }
/* exported through shim/exports.c */
NG_OPT_API ncclResult_t NG_OPT(ncclGroupSimulateEnd)(ncclSimInfo_t* simInfo) { NG_FOREIGN(ncclGroupSimulateEnd, simInfo); return group_end(simInfo, 1); }

/* ncclguard's own functions, for dlsym on libnccl's handle (dlsym.c) */
NG_SELF(ncclGroupStart) NG_SELF(ncclGroupEnd)
