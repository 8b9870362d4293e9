/* Fake NCCL: groups. Every collective-ish operation is an fn_op with one or more stages, each
 * run in two phases (post, then complete). Outside a group an op runs at once (the implicit
 * group); inside, ops are queued per thread and run at the outermost ncclGroupEnd: for each
 * stage, post all, then complete all, so one thread can drive several ranks. Errors found
 * inside a group are returned by ncclGroupEnd; an error a call inside the group returned drops
 * the whole group (drop_list). A group that touches a nonblocking
 * communicator runs on a background thread and ncclGroupEnd returns ncclInProgress. */
#define _GNU_SOURCE
#include "fake_nccl.h"
#include <stdlib.h>

static __thread int depth;
static __thread struct fn_op *qhead, *qtail;
static __thread ncclResult_t qerr;

int fn_in_group(void) { return depth > 0; }

void fn_group_error(ncclResult_t r)
{
  if (depth > 0 && qerr == ncclSuccess) qerr = r;
}

struct fn_op *fn_op_new(struct ncclComm *c, int nstages, fn_stage_t stage, fn_finish_t finish, void *arg)
{
  struct fn_op *op = calloc(1, sizeof *op);
  if (!op) return NULL;
  op->comm = c; op->nstages = nstages; op->stage = stage; op->finish = finish; op->arg = arg;
  op->nonblocking = c && !c->blocking;
  if (c) __atomic_add_fetch(&c->ops, 1, __ATOMIC_ACQ_REL);
  return op;
}

void fn_op_free(struct fn_op *op)
{
  if (op->comm) __atomic_sub_fetch(&op->comm->ops, 1, __ATOMIC_ACQ_REL);
  free(op->arg);
  free(op);
}

struct fn_op *fn_group_find(int (*match)(struct fn_op *, void *), void *key)
{
  for (struct fn_op *op = qhead; op; op = op->next)
    if (match(op, key)) return op;
  return NULL;
}

/* Several registration jobs (one per communicator) run in threads of their own, and the first that fails
 * sets the abort flag of every job's communicator (asyncJobLaunch in src/group.cc at v2.27.7-1 - v2.30.7-1:
 * `errorJobAbortFlag`, then `__atomic_store_n(job->abortFlag, 1)` for every job of the group): a job still
 * waiting in its exchange returns ncclInternalError, and every communicator of the group is left aborted
 * (the next registration, collective or split on it fails). One job runs in the caller's thread and aborts
 * nothing. From NCCL's source; not measured (it needs one process driving two GPUs: tests/fake/README.md,
 * "Not modelled exactly" keeps what is still assumed). */
static int jobs_failed(struct fn_op *list)
{
  for (struct fn_op *op = list; op; op = op->next)
    if (op->on_simulate && op->failed) return 1;
  return 0;
}

static void abort_job(struct fn_op *op)
{
  op->failed = 1;
  op->res = ncclInternalError;
  fn_set_error("registration job aborted: another registration job of the group failed");
}

/* Each stage in chunks: post at most FN_XSLOTS/2 ops per communicator (the exchange slots that
 * may be outstanding), complete them, post the next ones. All ranks queue the same ops in the same
 * order, so the generations line up; a thread driving several ranks posts for all of them before
 * completing any. Any number of registrations fits in one group (NCCL: 65 of 65 measured). */
/* The first registration of op's communicator before op in this group that failed, or NULL. */
static struct fn_op *reg_failed_before(struct fn_op *list, struct fn_op *op)
{
  for (struct fn_op *o = list; o && o != op; o = o->next)
    if (o->on_simulate && o->comm == op->comm && o->failed) return o;
  return NULL;
}

ncclResult_t fn_run_now(struct fn_op *list)
{
  enum { K = FN_XSLOTS / 2 };
  int maxs = 0;
  for (struct fn_op *op = list; op; op = op->next) if (op->nstages > maxs) maxs = op->nstages;
  /* the registration jobs of this group: one per communicator with a window registration in it */
  int saved_jobs = fn_reg_jobs, jobs = 0;
  for (struct fn_op *op = list; op; op = op->next) { /* (symmetric ones: a local registration is no job) */
    if (!op->on_simulate || !op->comm || !fn_symmetric(op->comm)) continue;
    int seen = 0;
    for (struct fn_op *o = list; o != op && !seen; o = o->next) seen = o->on_simulate && o->comm == op->comm;
    jobs += !seen;
  }
  int launched = 0; /* a dropped group (drop_list: every op failed already) launches no job */
  for (struct fn_op *op = list; op; op = op->next) launched |= !op->failed;
  if (!launched) jobs = 0;
  fn_reg_jobs = jobs;
  for (int s = 0; s < maxs; s++) {
    for (struct fn_op *op = list; op; op = op->next) op->posted = 0;
    for (;;) {
      struct { struct ncclComm *c; int n; } cnt[FN_MAXRANKS];
      int ncnt = 0, any = 0;
      for (struct fn_op *op = list; op; op = op->next) {
        if (op->posted || s >= op->nstages) continue;
        int j = 0;
        while (j < ncnt && cnt[j].c != op->comm) j++;
        if (j == ncnt) {
          if (ncnt == FN_MAXRANKS) continue;
          cnt[ncnt].c = op->comm; cnt[ncnt++].n = 0;
        }
        if (cnt[j].n >= K) continue;
        cnt[j].n++;
        op->posted = 1; /* in this chunk */
        any = 1;
        if (op->failed) continue;
        ncclResult_t r = op->stage(op, s, 0);
        if (r != ncclSuccess) { op->failed = 1; op->res = r; }
      }
      if (!any) break;
      for (struct fn_op *op = list; op; op = op->next) {
        if (op->posted != 1) continue;
        op->posted = 2; /* done */
        if (op->failed || s >= op->nstages) continue;
        if (op->on_simulate && fn_version() >= 22800 && reg_failed_before(list, op)) {
          /* NCCL 2.28+ registers a communicator's windows of one group in one job, one after the other,
           * and the first failure ends the job (ncclCommGroupRegisterSymmetric, src/group.cc:
           * NCCLCHECKGOTO(ncclDevrWindowRegisterInGroup(...), ret, fail) in the loop over regTaskQueue):
           * the later ones are never exchanged (a revoke that ended the first exchange would not end theirs) */
          op->failed = 1;
          op->res = reg_failed_before(list, op)->res;
          continue;
        }
        if (jobs > 1 && op->on_simulate && jobs_failed(list)) { abort_job(op); continue; }
        ncclResult_t r = op->stage(op, s, 1);
        if (r != ncclSuccess) { op->failed = 1; op->res = r; }
      }
    }
  }
  fn_reg_jobs = saved_jobs;
  if (jobs > 1 && jobs_failed(list)) /* the group's abort flag reached every job's communicator */
    for (struct fn_op *op = list; op; op = op->next)
      if (op->on_simulate && op->comm) op->comm->damaged = 1;
  ncclResult_t res = ncclSuccess;
  for (struct fn_op *op = list, *n; op; op = n) {
    n = op->next;
    if (op->finish) op->finish(op, op->res);
    if (op->comm && op->nonblocking) {
      /* nonblocking: the op's result becomes the comm's async state, unless a failure
       * already recorded a sticky error there */
      ncclResult_t cur = __atomic_load_n(&op->comm->async, __ATOMIC_ACQUIRE);
      if (cur == ncclInProgress || cur == ncclSuccess)
        __atomic_store_n(&op->comm->async, op->res, __ATOMIC_RELEASE);
    }
    if (res == ncclSuccess && op->res != ncclSuccess) res = op->res;
    fn_op_free(op);
  }
  return res;
}

static void *bg_main(void *arg)
{
  (void)pthread_setname_np(pthread_self(), "fake-group");
  fn_run_now(arg);
  return NULL;
}

static ncclResult_t run_list(struct fn_op *list)
{
  int nb = 0;
  for (struct fn_op *op = list; op; op = op->next) nb |= op->nonblocking;
  if (!nb) return fn_run_now(list);
  for (struct fn_op *op = list; op; op = op->next)
    if (op->comm) __atomic_store_n(&op->comm->async, ncclInProgress, __ATOMIC_RELEASE);
  pthread_t t;
  pthread_attr_t a;
  pthread_attr_init(&a);
  pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
  int e = pthread_create(&t, &a, bg_main, list);
  pthread_attr_destroy(&a);
  if (e != 0) return fn_run_now(list);
  return ncclInProgress;
}

/* A call inside the group failed (ncclGroupError): NCCL's group end returns that error and drops the
 * whole group (groupCleanup): nothing queued runs; each op finishes with the error, and a nonblocking
 * communicator's async error becomes it (fn_run_now with every op failed). Source: group.cc,
 * ncclGroupEndInternal `if ((ret = ncclGroupError) != ncclSuccess) goto fail;` at v2.27.7-1, v2.28.9-1,
 * v2.29.7-1, v2.30.7-1; measured on 1 x H200 with 2.28.9 (issue 23). */
static ncclResult_t drop_list(struct fn_op *list, ncclResult_t e)
{
  for (struct fn_op *op = list; op; op = op->next) { op->failed = 1; op->res = e; }
  fn_run_now(list);
  return e;
}

ncclResult_t fn_submit(struct fn_op *op)
{
  if (!op) return ncclSystemError;
  if (depth > 0) {
    if (qtail) qtail->next = op; else qhead = op;
    qtail = op;
    return ncclSuccess;
  }
  return run_list(op);
}

ncclResult_t pncclGroupStart(void)
{
  ENTER();
  if (depth++ == 0) qerr = ncclSuccess;
  return LEAVE("ncclGroupStart", ncclSuccess, "depth=%d", depth);
}
FN_ALIAS(ncclGroupStart);

ncclResult_t pncclGroupEnd(void)
{
  ENTER();
  ncclResult_t r = ncclSuccess;
  if (depth == 0) {
    fn_set_error("ncclGroupEnd: not in a group");
    r = ncclInvalidUsage;
  } else if (--depth == 0) {
    struct fn_op *list = qhead;
    ncclResult_t e = qerr;
    qhead = qtail = NULL;
    qerr = ncclSuccess;
    r = !list ? e : e != ncclSuccess ? drop_list(list, e) : run_list(list);
  }
  return LEAVE("ncclGroupEnd", r, "depth=%d", depth);
}
FN_ALIAS(ncclGroupEnd);

/* Ends the group like ncclGroupEnd (depth down, group state reset); the queued registrations
 * are still performed (with their exchanges), collectives are not launched (NCCL source,
 * group.cc; docs/NCCL.md §4). */
ncclResult_t pncclGroupSimulateEnd(ncclSimInfo_t *simInfo)
{
  ENTER();
  ncclResult_t r = ncclSuccess;
  if (simInfo) simInfo->estimatedTime = 0;
  if (depth == 0) {
    fn_set_error("ncclGroupSimulateEnd: not in a group");
    r = ncclInvalidUsage;
  } else if (--depth == 0) {
    struct fn_op *keep = NULL, **tail = &keep;
    ncclResult_t e = qerr;
    for (struct fn_op *op = qhead, *n; op; op = n) {
      n = op->next;
      op->next = NULL;
      if (op->on_simulate) { *tail = op; tail = &op->next; }
      else fn_op_free(op);
    }
    qhead = qtail = NULL;
    qerr = ncclSuccess;
    r = !keep ? e : e != ncclSuccess ? drop_list(keep, e) : run_list(keep); /* the same group end */
  }
  return LEAVE("ncclGroupSimulateEnd", r, "%p", (void *)simInfo);
}
FN_ALIAS(ncclGroupSimulateEnd);
