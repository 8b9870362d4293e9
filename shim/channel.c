/* The agreement channel: a private communicator per application communicator, split from it at the
 * first registration that needs a round, on which every round of ncclguard's runs (docs/DESIGN.md, "The
 * agreement channel"). Its collectives pair only with each other: however the ranks interleave their
 * registrations with their collectives on the application's communicator, no round of ncclguard's can meet
 * one of the application's. Also here: ng_offload, the thread of ncclguard's that makes every such call
 * (NCCL's group state is the calling thread's: a group the application opened where ncclguard cannot see
 * it never swallows a split or a round). */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "guard.h"

/* ---- a call on a thread of ncclguard's, waited for until a deadline ----------------------------- */
static void* offload_main(void* p) {
  struct ng_job* J = p;
  ng_thread_name("ng-offload");
  ng_tls.lib = J->lib;
  int mode, relaxed = J->relaxed && ng_cuda_relaxed_capture(&mode) == 0; /* never break a capture */
  ng_ctx saved;
  int pushed = J->dev >= 0 && ng_cuda_push(J->dev, &saved) == 0; /* NCCL restores the device it found */
  J->run(J);
  if (pushed) ng_cuda_pop(saved);
  if (relaxed) ng_cuda_restore_capture(mode);
  pthread_mutex_lock(&J->mu);
  J->done = 1;
  int abandoned = J->abandoned;
  pthread_cond_signal(&J->cv);
  pthread_mutex_unlock(&J->mu);
  if (abandoned) { /* the caller gave up on it long ago: the job is this thread's to end */
    if (J->orphan) J->orphan(J);
    pthread_mutex_destroy(&J->mu);
    pthread_cond_destroy(&J->cv);
    free(J);
  }
  return NULL;
}

int ng_offload(struct ng_job* J, double until_us) {
  J->lib = ng_cur_lib();
  J->done = J->abandoned = 0;
  pthread_mutex_init(&J->mu, NULL);
  ng_cond_init(&J->cv);
  if (ng_spawn_detached(offload_main, J) != 0) {
    /* no thread to be had (out of resources): this thread makes the call, as it would without ncclguard */
    int mode, relaxed = J->relaxed && ng_cuda_relaxed_capture(&mode) == 0;
    ng_ctx saved;
    int pushed = J->dev >= 0 && ng_cuda_push(J->dev, &saved) == 0;
    J->run(J);
    if (pushed) ng_cuda_pop(saved);
    if (relaxed) ng_cuda_restore_capture(mode);
    J->done = 1;
    return 1;
  }
  pthread_mutex_lock(&J->mu);
  int done = ng_wait_done(&J->mu, &J->cv, &J->done, until_us);
  if (!done && J->abandon) J->abandon(J);
  if (!done) J->abandoned = 1;
  pthread_mutex_unlock(&J->mu);
  return done;
}

void ng_job_free(struct ng_job* J) {
  pthread_mutex_destroy(&J->mu);
  pthread_cond_destroy(&J->cv);
  free(J);
}

/* An abort of a channel on this thread (nobody else holds it any more): NCCL's abort is local. */
void ng_channel_abort_now(ncclComm_t chan) {
  ncclResult_t r;
  NG_CALL(r, ncclCommAbort, chan);
  (void)r;
}

/* ---- opening channels -------------------------------------------------------------------------- */
struct open_job {
  struct ng_job job;
  int n;
  double split_us; /* how long the split calls took (a blocking parent's split returns with the child made) */
  struct { ncclComm_t parent; uint64_t gen; int rank; ncclComm_t chan; ncclResult_t r, r0; } it[];
};

/* NCCL 2.27's ncclConfig_t (nccl_abi.h), filled for a channel: nonblocking, one CTA, no CGA cluster, no
 * CollNet, its own resources, named. NCCL takes sharing from the parent (init.cc at v2.30.7-1, line 3109):
 * splitShare here is what the channel's own splits would do (none), and says what ncclguard asks for. */
static void channel_config(struct ng_nccl_config_v22700* c) {
  memset(c, 0, sizeof *c);
  c->size = sizeof *c;
  c->magic = NG_NCCL_CONFIG_MAGIC;
  c->version = NG_NCCL_VERSION_2_27_0;
  c->blocking = 0;
  c->cgaClusterSize = 0;
  c->minCTAs = 1;
  c->maxCTAs = 1;
  c->netName = NULL;
  c->splitShare = 0;
  c->trafficClass = NG_CFG_UNDEF_INT;
  c->commName = "ncclguard-channel";
  c->collnetEnable = 0;
  c->CTAPolicy = NG_CFG_UNDEF_INT;
  c->shrinkShare = 0;
  c->nvlsCTAs = NG_CFG_UNDEF_INT;
}

static void open_run(struct ng_job* J) {
  struct open_job* O = (struct open_job*)J;
  struct ng_nccl_config_v22700 cfg;
  channel_config(&cfg);
  ncclResult_t g = ncclSuccess;
  double t0 = ng_now_us();
  if (O->n > 1) NG_CALL(g, ncclGroupStart); /* one thread driving several ranks: their splits meet */
  for (int j = 0; j < O->n; j++) {
    O->it[j].chan = NULL;
    O->it[j].r = g;
    if (g != ncclSuccess) continue;
    if (NG_FP("channel.split")) {
      O->it[j].r = ncclSystemError;
      continue;
    }
    NG_CALL(O->it[j].r, ncclCommSplit, O->it[j].parent, 0, O->it[j].rank, &O->it[j].chan, (ncclConfig_t*)(void*)&cfg);
  }
  if (O->n > 1 && g == ncclSuccess) {
    ncclResult_t e;
    NG_CALL(e, ncclGroupEnd);
    for (int j = 0; j < O->n; j++)
      if (e != ncclSuccess && e != ncclInProgress && (O->it[j].r == ncclSuccess || O->it[j].r == ncclInProgress))
        O->it[j].r = e;
  }
  O->split_us = ng_now_us() - t0;
  for (int j = 0; j < O->n; j++) O->it[j].r0 = O->it[j].r;
}

/* The split returned after its caller gave up: the channels it made are nobody's: aborted here. */
static void open_orphan(struct ng_job* J) {
  struct open_job* O = (struct open_job*)J;
  for (int j = 0; j < O->n; j++) {
    if (O->it[j].chan) ng_channel_abort_now(O->it[j].chan);
    ng_reg_comm_stuck(O->it[j].parent, O->it[j].gen, -1); /* the parent may be freed now */
  }
}

static void open_abandon(struct ng_job* J) {
  struct open_job* O = (struct open_job*)J;
  for (int j = 0; j < O->n; j++) ng_reg_comm_stuck(O->it[j].parent, O->it[j].gen, +1);
}

/* Poll a channel until NCCL says its last operation (its creation, a round's enqueue) is done, or the
 * deadline, or its parent goes. ncclSuccess, NCCL's error, or ncclSystemError at the deadline. */
ncclResult_t ng_channel_wait(ncclComm_t chan, ncclComm_t parent, uint64_t gen, double deadline) {
  double delay = 5;
  for (;;) {
    ncclResult_t st = ncclInProgress, q;
    NG_CALL(q, ncclCommGetAsyncError, chan, &st);
    if (q != ncclSuccess) return q;
    if (st != ncclInProgress) return st;
    if (!ng_reg_comm_usable(parent, gen)) return ncclInvalidUsage;
    if (ng_now_us() > deadline) return ncclSystemError;
    struct timespec ts = {0, (long)(delay * 1000)};
    if (delay < 50) sched_yield();
    else nanosleep(&ts, NULL);
    if (delay < 2000) delay *= 2;
  }
}

/* A channel that is nobody's any more (its creation failed or timed out): aborted, bounded. */
static void end_now(ncclComm_t chan, int dev, int abort);

int ng_channel_open(struct ng_chanreq* c, int n, double deadline) {
  int need = 0;
  for (int j = 0; j < n; j++) {
    c[j].status = NG_AGREE_OK;
    c[j].chan = ng_reg_chan(c[j].comm, c[j].gen);
    need += !c[j].chan;
  }
  if (!need) return 0;
  struct open_job* O = ng_calloc("channel.open", 1, sizeof *O + (size_t)need * sizeof O->it[0]);
  if (!O) {
    for (int j = 0; j < n; j++)
      if (!c[j].chan) c[j].status = NG_AGREE_FAILED;
    return -1;
  }
  int k = 0, dev = -1;
  for (int j = 0; j < n; j++)
    if (!c[j].chan) {
      O->it[k].parent = c[j].comm, O->it[k].gen = c[j].gen, O->it[k].rank = c[j].rank, k++;
      if (dev < 0) dev = c[j].dev;
    }
  O->n = k;
  O->job.run = open_run;
  O->job.orphan = open_orphan;
  O->job.dev = dev;
  O->job.relaxed = 1;
  double t0 = ng_now_us();
  /* The split is a call into NCCL on the parent that may wait for its peers. While it runs, an abort of the
   * parent from another thread reaches NCCL, which ends the split's wait (its childAbortFlag, src/init.cc at
   * v2.30.7-1), as it ends a registration's. Once the split is abandoned, the parent counts as stuck (its end
   * of life leaves it to the end of the process rather than free it under the call) until the split returns. */
  O->job.abandon = open_abandon;
  if (!ng_offload(&O->job, deadline + ng_late_grace_us())) {
    /* the split itself never returned (a blocking one waiting for a peer that never came): the thread
     * keeps the job and aborts what it made if it ever returns */
    for (int j = 0; j < n; j++)
      if (!c[j].chan) c[j].status = NG_AGREE_TIMEOUT;
    ng_log_msg(NG_LOG_WARN, dev, "channel", "ncclCommSplit of the agreement channel did not return within "
               "NCCLGUARD_TIMEOUT=%gs plus %.0f s: a peer did not come to its first registration", ng_cfg.timeout_s,
               ng_late_grace_us() / 1e6);
    return -1;
  }
  int bad = 0, keep = 0;
  for (int j = 0, i = 0; j < n; j++) {
    if (c[j].chan) continue;
    ncclComm_t ch = O->it[i].chan;
    ncclResult_t r = O->it[i++].r;
    if (!ch && (r == ncclSuccess || r == ncclInProgress)) {
      /* A nonblocking parent: the split returned ncclInProgress and NCCL writes the channel into O when the
       * split's job ends ("*newcomm should be NCCL_COMM_NULL until comm split fully complete",
       * ncclCommInitChildComm; the store at ncclCommInitRankFunc's exit, src/init.cc at v2.27.7-1 - v2.30.7-1),
       * which the parent's state tells. Where that does not happen in time, NCCL may still write into O: it is
       * kept (a few hundred bytes, once per communicator whose channel failed). */
      r = ng_channel_wait(c[j].comm, c[j].comm, c[j].gen, deadline + ng_late_grace_us());
      ch = __atomic_load_n(&O->it[i - 1].chan, __ATOMIC_ACQUIRE);
      if (!ch && r != ncclSuccess) keep = 1;
      if (!ch && r == ncclSuccess) r = ncclInternalError; /* (a split that made nothing) */
    }
    /* (a nonblocking split's child takes its init's time after the call returned: NCCL's init, not a peer's
     * lateness, so the grace of a launch on top of the round's deadline) */
    if (ch && (r == ncclSuccess || r == ncclInProgress))
      r = ng_channel_wait(ch, c[j].comm, c[j].gen, deadline + ng_late_grace_us());
    if (r == ncclSuccess && ch && ng_reg_chan_set(c[j].comm, c[j].gen, ch) == 0) {
      c[j].chan = ch;
      ng_log_msg(NG_LOG_INFO, c[j].dev, "channel", "communicator %p: agreement channel %p made (ncclCommSplit, "
                 "nonblocking, one CTA, its own resources; the split returned %s after %.0f us) in %.0f us%s",
                 (void*)c[j].comm, (void*)ch, ng_result_name(O->it[i - 1].r0), O->split_us, ng_now_us() - t0,
                 ng_split_shares() ? "; NCCL_COMM_SPLIT_SHARE_RESOURCES is set, so NCCL shares the "
                 "communicator's resources with it: a registration placed between collectives differently on two "
                 "ranks times out instead of running" : "");
      continue;
    }
    bad = 1;
    /* (the application aborting or destroying the communicator from another thread ends the split: NCCL's
     * childAbortFlag) */
    c[j].status = !ng_reg_comm_usable(c[j].comm, c[j].gen) ? NG_AGREE_ABORTED
                  : r == ncclSystemError ? NG_AGREE_TIMEOUT : NG_AGREE_FAILED;
    c[j].result = r;
    ng_log_msg(NG_LOG_WARN, c[j].dev, "channel", "communicator %p: its agreement channel could not be made "
               "(ncclCommSplit: %s%s)", (void*)c[j].comm, ng_result_name(r),
               r == ncclSystemError ? ", not ready within NCCLGUARD_TIMEOUT: a peer did not come" : "");
    if (ch) end_now(ch, c[j].dev, 1);
  }
  if (!keep) ng_job_free(&O->job);
  return bad ? -1 : 0;
}

/* ---- stopping and ending ----------------------------------------------------------------------- */
struct end_job {
  struct ng_job job;
  ncclComm_t chan;
  int abort;
  ncclResult_t r;
};
static void end_run(struct ng_job* J) {
  struct end_job* E = (struct end_job*)J;
  if (E->abort) NG_CALL(E->r, ncclCommAbort, E->chan);
  else NG_CALL(E->r, ncclCommDestroy, E->chan);
}

static void end_now(ncclComm_t chan, int dev, int abort) {
  struct end_job* E = ng_calloc("channel.end", 1, sizeof *E);
  if (!E) { /* no memory for a job: ended by this thread, unbounded as NCCL alone's abort */
    ng_channel_abort_now(chan);
    return;
  }
  E->chan = chan, E->abort = abort;
  E->job.run = end_run;
  E->job.dev = dev;
  if (!ng_offload(&E->job, ng_now_us() + 5e6)) { /* an abort takes milliseconds: left running */
    ng_log_msg(NG_LOG_WARN, dev, "channel", "ending the agreement channel %p did not finish within 5 s: left "
               "running in a thread of its own", (void*)chan);
    return;
  }
  if (E->r != ncclSuccess && E->r != ncclInProgress && !abort) ng_channel_abort_now(chan); /* a destroy NCCL refused */
  ng_job_free(&E->job);
}

void ng_channel_stop(ncclComm_t comm, uint64_t gen, int dev) {
  ncclComm_t ch = ng_reg_chan(comm, gen);
  if (!ch || !ng_can_revoke()) return; /* (without revoke: aborted with its communicator) */
  ncclResult_t r;
  NG_CALL(r, ncclCommRevoke, ch, 0);
  ng_log_msg(NG_LOG_INFO, dev, "channel", "communicator %p: agreement channel %p revoked (%s): its pending round "
             "stops; the communicator itself is untouched", (void*)comm, (void*)ch, ng_result_name(r));
}

/* Ended with ncclCommAbort, healthy or not: an abort is local in NCCL (no exchange with the peers, which end
 * their own channels with their communicators) and returns on a nonblocking communicator without waiting for
 * its operations, where a destroy would first finalize (a flush that may wait for a peer's round). Nothing of
 * the application's runs on it. */
void ng_channel_end(ncclComm_t comm, uint64_t gen, int dev, int broken) {
  (void)broken;
  int lib = 0;
  ncclComm_t ch = ng_reg_chan_take(comm, gen, &lib);
  if (!ch) return;
  int saved = ng_tls.lib;
  ng_tls.lib = lib;
  end_now(ch, dev, 1);
  ng_tls.lib = saved;
}

/* NCCL_COMM_SPLIT_SHARE_RESOURCES overrides every config's splitShare (src/init.cc at v2.30.7-1, lines
 * 2131-2137): set to anything but 0, the channel shares its parent's resources. */
int ng_split_shares(void) {
  const char* v = secure_getenv("NCCL_COMM_SPLIT_SHARE_RESOURCES");
  return v && *v && strtol(v, NULL, 0) != 0;
}
