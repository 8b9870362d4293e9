/* Fake NCCL: communicator lifecycle. Init is a rendezvous on the segment named by the unique
 * id; split/shrink/grow derive a new segment name every member computes alike. Destroyed and
 * aborted communicators stay allocated as tombstones, so late calls on them are defined. */
#define _GNU_SOURCE
#include "fake_nccl.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct init_rec { int pid, dev, rank, nranks; uint64_t host; };

/* stage helper: attach to c's segment and take part in the init rendezvous (generation 0) */
ncclResult_t fn_comm_init_rendezvous(struct fn_op *op, struct ncclComm *c, int complete)
{
  (void)op;
  if (!complete) {
    if (!c->blocking) usleep((useconds_t)c->init_delay_ms * 1000);
    ncclResult_t r = fn_shm_attach(c, c->name, c->nranks);
    if (r != ncclSuccess) return r;
    struct init_rec rec = {(int)getpid(), c->dev, c->rank, c->nranks, c->host};
    c->xgen = 1;
    return fn_xpost(c, 0, &rec, sizeof rec);
  }
  static __thread unsigned char recs[FN_MAXRANKS][FN_XREC];
  ncclResult_t r = fn_xcomplete(c, 0, recs);
  if (r != ncclSuccess) return r;
  /* (each record copied out: the exchange's rows are bytes, not aligned for the record's 64-bit host) */
  static __thread uint64_t hosts[FN_MAXRANKS];
  for (int i = 0; i < c->nranks; i++) {
    struct init_rec ir;
    memcpy(&ir, recs[i], sizeof ir);
    if (ir.rank != i || ir.nranks != c->nranks) {
      fn_set_error("init: rank %d of %d missing or duplicated", i, c->nranks);
      return ncclInvalidUsage;
    }
    hosts[i] = ir.host;
  }
  /* nNodes: the distinct host hashes among the ranks */
  int nodes = 0;
  for (int i = 0; i < c->nranks; i++) {
    int seen = 0;
    for (int j = 0; j < i && !seen; j++) seen = hosts[j] == hosts[i];
    nodes += !seen;
  }
  c->nnodes = nodes > 0 ? nodes : 1;
  return ncclSuccess;
}

static void finish_init(struct ncclComm *c, ncclResult_t r)
{
  __atomic_store_n(&c->state, r == ncclSuccess ? ST_READY : ST_FAILED, __ATOMIC_RELEASE);
}

/* ---- ncclCommInitRank* ---- */

struct init_arg { struct ncclComm *c; };

static ncclResult_t init_stage(struct fn_op *op, int stage, int complete)
{
  (void)stage;
  return fn_comm_init_rendezvous(op, ((struct init_arg *)op->arg)->c, complete);
}
static void init_finish(struct fn_op *op, ncclResult_t r) { finish_init(((struct init_arg *)op->arg)->c, r); }

static int config_blocking(const ncclConfig_t *config)
{
  return !(config && config->blocking == 0);
}

static int current_dev(void)
{
  CUdevice d = 0;
  if (cuCtxGetDevice(&d) != CUDA_SUCCESS) d = 0;
  return d;
}

/* make a communicator object for (name, nranks, rank) and its init op */
static struct fn_op *new_member(const char *name, int nranks, int rank, int dev, int blocking, struct ncclComm **out)
{
  struct ncclComm *c = fn_comm_new();
  if (!c) return NULL;
  snprintf(c->name, sizeof c->name, "%s", name);
  c->nranks = nranks; c->rank = rank; c->dev = dev; c->blocking = blocking;
  if (!blocking) c->async = ncclInProgress;
  struct init_arg *a = calloc(1, sizeof *a);
  a->c = c;
  *out = c;
  return fn_op_new(c, 1, init_stage, init_finish, a);
}

static ncclResult_t init_rank(ncclComm_t *comm, int nranks, const ncclUniqueId *id, int rank, ncclConfig_t *config)
{
  if (!comm) { fn_set_error("comm argument is NULL"); return ncclInvalidArgument; }
  *comm = NULL;
  if (!id || memcmp(id->internal, FN_IDMAGIC, 8) != 0) { fn_set_error("invalid unique id"); return ncclInvalidArgument; }
  if (nranks < 1 || nranks > FN_MAXRANKS || rank < 0 || rank >= nranks) {
    fn_set_error("invalid rank %d / nranks %d", rank, nranks);
    return ncclInvalidArgument;
  }
  char name[80];
  fn_name_from_id(id, name, sizeof name);
  struct ncclComm *c;
  struct fn_op *op = new_member(name, nranks, rank, current_dev(), config_blocking(config), &c);
  if (!op) return ncclSystemError;
  c->split_share = fn_split_share_of(config);
  *comm = c;
  return fn_submit(op);
}

ncclResult_t pncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t *config)
{
  ENTER();
  ncclResult_t r = init_rank(comm, nranks, &commId, rank, config);
  return LEAVE("ncclCommInitRankConfig", r, "comm=%p nranks=%d rank=%d blocking=%d", comm ? (void *)*comm : NULL,
               nranks, rank, config_blocking(config));
}
FN_ALIAS(ncclCommInitRankConfig);

ncclResult_t pncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank)
{
  ENTER();
  ncclResult_t r = init_rank(comm, nranks, &commId, rank, NULL);
  return LEAVE("ncclCommInitRank", r, "comm=%p nranks=%d rank=%d", comm ? (void *)*comm : NULL, nranks, rank);
}
FN_ALIAS(ncclCommInitRank);

ncclResult_t pncclCommInitRankScalable(ncclComm_t *comm, int nranks, int myrank, int nId, ncclUniqueId *commIds,
                                       ncclConfig_t *config)
{
  ENTER();
  ncclResult_t r = nId < 1 || !commIds ? ncclInvalidArgument : init_rank(comm, nranks, &commIds[0], myrank, config);
  return LEAVE("ncclCommInitRankScalable", r, "comm=%p nranks=%d rank=%d nId=%d", comm ? (void *)*comm : NULL,
               nranks, myrank, nId);
}
FN_ALIAS(ncclCommInitRankScalable);

ncclResult_t pncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist)
{
  ENTER();
  ncclResult_t r = ncclSuccess;
  if (!comms || ndev < 1 || ndev > FN_MAXRANKS) {
    r = ncclInvalidArgument;
  } else {
    ncclUniqueId id;
    pncclGetUniqueId(&id);
    char name[80];
    fn_name_from_id(&id, name, sizeof name);
    struct fn_op *head = NULL, **tail = &head;
    for (int i = 0; i < ndev; i++) {
      struct ncclComm *c;
      struct fn_op *op = new_member(name, ndev, i, devlist ? devlist[i] : i, 1, &c);
      if (!op) { r = ncclSystemError; break; }
      comms[i] = c;
      *tail = op;
      tail = &op->next;
    }
    ncclResult_t e = fn_run_now(head);
    if (r == ncclSuccess) r = e;
  }
  return LEAVE("ncclCommInitAll", r, "ndev=%d", ndev);
}
FN_ALIAS(ncclCommInitAll);

/* ---- split ---- */

struct split_arg { struct ncclComm *parent, *child, **newcomm; int color, key, nsplit; };
struct split_rec { int color, key, rank; };

static ncclResult_t split_stage(struct fn_op *op, int stage, int complete)
{
  struct split_arg *a = op->arg;
  struct ncclComm *p = a->parent;
  if (stage == 1) return a->child ? fn_comm_init_rendezvous(op, a->child, complete) : ncclSuccess;
  if (!complete) {
    if (p->damaged) { fn_set_error("communicator is in error state"); return ncclInternalError; }
    struct split_rec rec = {a->color, a->key, p->rank};
    op->gen = p->xgen++;
    return fn_xpost(p, op->gen, &rec, sizeof rec);
  }
  static __thread unsigned char recs[FN_MAXRANKS][FN_XREC];
  ncclResult_t r = fn_xcomplete(p, op->gen, recs);
  if (r != ncclSuccess || !a->child) return r;
  int n = 0, me = 0;
  for (int i = 0; i < p->nranks; i++) {
    struct split_rec *x = (struct split_rec *)recs[i];
    if (x->color != a->color) continue;
    n++;
    if (x->key < a->key || (x->key == a->key && i < p->rank)) me++;
  }
  a->child->nranks = n;
  a->child->rank = me;
  fn_derive_name(a->child->name, sizeof a->child->name, p->name, "split", (uint64_t)a->nsplit, (uint64_t)(unsigned)a->color);
  return ncclSuccess;
}

static void split_finish(struct fn_op *op, ncclResult_t r)
{
  struct split_arg *a = op->arg;
  if (a->child) {
    finish_init(a->child, r);
    if (!a->child->blocking) __atomic_store_n(&a->child->async, r, __ATOMIC_RELEASE);
  }
  /* the child reaches the caller's pointer when the split's job ends, whatever its result (ncclCommInitRankFunc's
   * exit: __atomic_store_n(job->newcomm, comm); src/init.cc at v2.27.7-1 - v2.30.7-1) */
  if (a->newcomm) __atomic_store_n(a->newcomm, a->child, __ATOMIC_RELEASE);
}

ncclResult_t pncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm, ncclConfig_t *config)
{
  ENTER();
  ncclResult_t r = fn_check_comm(comm, 1);
  if (r == ncclSuccess && (!newcomm || (color < 0 && color != NCCL_SPLIT_NOCOLOR))) {
    fn_set_error("ncclCommSplit: invalid argument");
    r = ncclInvalidArgument;
  }
  if (r == ncclSuccess) {
    struct split_arg *a = calloc(1, sizeof *a);
    a->parent = comm; a->color = color; a->key = key; a->nsplit = comm->nsplit++;
    if (color != NCCL_SPLIT_NOCOLOR) {
      a->child = fn_comm_new();
      a->child->dev = comm->dev;
      a->child->blocking = config ? config_blocking(config) : comm->blocking;
      if (!a->child->blocking) a->child->async = ncclInProgress;
      /* The split call itself is as blocking as its PARENT: ncclCommSplit runs the child's init as an async job
       * of the parent (ncclAsyncLaunch(..., comm), which takes ncclGroupBlocking from that communicator's
       * config: src/group.cc, src/init.cc at v2.28.9-1), so a blocking parent's split returns with the child
       * initialised, whatever the child's config says; only a nonblocking split takes the init's time after
       * it returns (FAKE_NCCL_INIT_DELAY_MS) */
      if (comm->blocking) a->child->init_delay_ms = 0;
      /* sharing comes from the parent (struct ncclComm, split_share) */
      a->child->split_share = config ? fn_split_share_of(config) : comm->split_share;
      if (comm->split_share) {
        a->child->share_root = comm->share_root;
        __atomic_add_fetch(&comm->share_root->nshare, 1, __ATOMIC_ACQ_REL);
      }
    }
    /* "*newcomm should be NCCL_COMM_NULL until comm split fully complete" (ncclCommInitChildComm, src/init.cc at
     * v2.28.9-1): NULL until the split's job ends (split_finish), which for a nonblocking parent is after the call
     * returned ncclInProgress, and for any parent inside a group is at the group's end */
    *newcomm = NULL;
    a->newcomm = color != NCCL_SPLIT_NOCOLOR ? newcomm : NULL;
    r = fn_submit(fn_op_new(comm, 2, split_stage, split_finish, a));
  } else {
    fn_group_error(r);
  }
  return LEAVE("ncclCommSplit", r, "comm=%p color=%d key=%d newcomm=%p", (void *)comm, color, key,
               newcomm ? (void *)*newcomm : NULL);
}
FN_ALIAS(ncclCommSplit);

/* ---- shrink: no exchange on the parent (excluded ranks are typically gone) ---- */

struct child_arg { struct ncclComm *child; };
static ncclResult_t child_stage(struct fn_op *op, int stage, int complete)
{
  (void)stage;
  return fn_comm_init_rendezvous(op, ((struct child_arg *)op->arg)->child, complete);
}
static void child_finish(struct fn_op *op, ncclResult_t r)
{
  struct ncclComm *c = ((struct child_arg *)op->arg)->child;
  finish_init(c, r);
}

ncclResult_t pncclCommShrink(ncclComm_t comm, int *excludeRanksList, int excludeRanksCount, ncclComm_t *newcomm,
                             ncclConfig_t *config, int shrinkFlags)
{
  ENTER();
  ncclResult_t r = fn_check_comm(comm, 1);
  if (r == ncclSuccess && (!newcomm || excludeRanksCount < 0 || (excludeRanksCount > 0 && !excludeRanksList))) {
    fn_set_error("ncclCommShrink: invalid argument");
    r = ncclInvalidArgument;
  }
  uint64_t h = 0;
  int below = 0, nex = 0;
  for (int i = 0; r == ncclSuccess && i < excludeRanksCount; i++) {
    int x = excludeRanksList[i];
    if (x < 0 || x >= comm->nranks || x == comm->rank) { fn_set_error("ncclCommShrink: bad excluded rank %d", x); r = ncclInvalidArgument; }
    h += (uint64_t)x * 0x9e3779b97f4a7c15ULL + 1; /* order-independent */
    if (x < comm->rank) below++;
    nex++;
  }
  if (r == ncclSuccess) {
    if (shrinkFlags & NCCL_SHRINK_ABORT) { FN_STORE(comm->revoked, 1); if (comm->shm) fn_shm_wake(comm->shm); }
    struct ncclComm *c = fn_comm_new();
    c->dev = comm->dev;
    c->blocking = config ? config_blocking(config) : comm->blocking;
    c->nranks = comm->nranks - nex;
    c->rank = comm->rank - below;
    fn_derive_name(c->name, sizeof c->name, comm->name, "shrink", (uint64_t)comm->nshrink++, h);
    if (!c->blocking) c->async = ncclInProgress;
    struct child_arg *a = calloc(1, sizeof *a);
    a->child = c;
    *newcomm = c;
    r = fn_submit(fn_op_new(c, 1, child_stage, child_finish, a));
  } else {
    fn_group_error(r);
  }
  return LEAVE("ncclCommShrink", r, "comm=%p exclude=%d newcomm=%p flags=%d", (void *)comm, excludeRanksCount,
               newcomm ? (void *)*newcomm : NULL, shrinkFlags);
}
FN_ALIAS(ncclCommShrink);

#ifndef FAKE_LEGACY
/* ---- grow (2.29.2+): existing ranks learn the id from the root over the parent ---- */

struct grow_arg { struct ncclComm *parent, *child; int has_id; ncclUniqueId id; };

static ncclResult_t grow_stage(struct fn_op *op, int stage, int complete)
{
  struct grow_arg *a = op->arg;
  if (stage == 1) return fn_comm_init_rendezvous(op, a->child, complete);
  if (!a->parent) return ncclSuccess; /* a new rank: nothing to learn */
  struct ncclComm *p = a->parent;
  if (!complete) {
    unsigned char rec[FN_XREC] = {0};
    rec[0] = (unsigned char)a->has_id;
    memcpy(rec + 8, &a->id, sizeof a->id);
    op->gen = p->xgen++;
    return fn_xpost(p, op->gen, rec, sizeof rec);
  }
  static __thread unsigned char recs[FN_MAXRANKS][FN_XREC];
  ncclResult_t r = fn_xcomplete(p, op->gen, recs);
  if (r != ncclSuccess) return r;
  for (int i = 0; i < p->nranks; i++)
    if (recs[i][0]) {
      ncclUniqueId id;
      memcpy(&id, recs[i] + 8, sizeof id);
      fn_name_from_id(&id, a->child->name, sizeof a->child->name);
      return ncclSuccess;
    }
  fn_set_error("ncclCommGrow: no existing rank passed the unique id");
  return ncclInvalidUsage;
}

static void grow_finish(struct fn_op *op, ncclResult_t r)
{
  struct ncclComm *c = ((struct grow_arg *)op->arg)->child;
  finish_init(c, r);
  if (!c->blocking) __atomic_store_n(&c->async, r, __ATOMIC_RELEASE);
}

ncclResult_t pncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId *uniqueId, int rank, ncclComm_t *newcomm,
                           ncclConfig_t *config)
{
  ENTER();
  ncclResult_t r = ncclSuccess;
  if (!newcomm || nRanks < 1 || nRanks > FN_MAXRANKS) r = ncclInvalidArgument;
  else if (comm) {
    r = fn_check_comm(comm, 1);
    if (r == ncclSuccess && (rank != -1 || nRanks < comm->nranks)) r = ncclInvalidArgument;
  } else if (!uniqueId || memcmp(uniqueId->internal, FN_IDMAGIC, 8) != 0 || rank < 0 || rank >= nRanks) {
    r = ncclInvalidArgument;
  }
  if (r == ncclSuccess) {
    struct grow_arg *a = calloc(1, sizeof *a);
    a->parent = comm;
    a->has_id = uniqueId != NULL;
    if (uniqueId) a->id = *uniqueId;
    struct ncclComm *c = a->child = fn_comm_new();
    c->nranks = nRanks;
    c->rank = comm ? comm->rank : rank;
    c->dev = comm ? comm->dev : current_dev();
    c->blocking = config ? config_blocking(config) : comm ? comm->blocking : 1;
    if (!c->blocking) c->async = ncclInProgress;
    if (!comm) fn_name_from_id(uniqueId, c->name, sizeof c->name);
    else comm->ngrow++;
    *newcomm = c;
    r = fn_submit(fn_op_new(comm ? comm : c, 2, grow_stage, grow_finish, a));
  } else {
    fn_set_error("ncclCommGrow: invalid argument");
    fn_group_error(r);
  }
  return LEAVE("ncclCommGrow", r, "comm=%p nRanks=%d rank=%d newcomm=%p", (void *)comm, nRanks, rank,
               newcomm ? (void *)*newcomm : NULL);
}
FN_ALIAS(ncclCommGrow);
#endif

/* ---- finalize / destroy / abort / revoke ---- */

static void wait_idle(struct ncclComm *c)
{
  pthread_mutex_lock(&c->lk);
  while (c->inflight > 0 && !FN_LOAD(c->aborted) && !FN_LOAD(c->revoked)) pthread_cond_wait(&c->cv, &c->lk);
  pthread_mutex_unlock(&c->lk);
}

static void *finalize_bg(void *arg)
{
  struct ncclComm *c = arg;
  wait_idle(c);
  __atomic_store_n(&c->state, ST_FINALIZED, __ATOMIC_RELEASE);
  __atomic_store_n(&c->async, ncclSuccess, __ATOMIC_RELEASE);
  return NULL;
}

ncclResult_t pncclCommFinalize(ncclComm_t comm)
{
  ENTER();
  ncclResult_t r = fn_check_comm(comm, 0);
  if (r == ncclSuccess) {
    if (comm->blocking) {
      finalize_bg(comm); /* flushes: waits for this comm's collectives (forever if one hangs) */
    } else {
      pthread_t t;
      comm->async = ncclInProgress;
      if (pthread_create(&t, NULL, finalize_bg, comm) == 0) { pthread_detach(t); r = ncclInProgress; }
      else finalize_bg(comm);
    }
  }
  return LEAVE("ncclCommFinalize", r, "comm=%p", (void *)comm);
}
FN_ALIAS(ncclCommFinalize);

/* Free local resources. Like NCCL, this calls the public ncclCommWindowDeregister and
 * ncclCommDeregister (through the PLT: an LD_PRELOAD library receives them, docs/NCCL.md §6). */
static ncclResult_t teardown(struct ncclComm *c, int final_state)
{
  for (;;) {
    struct ncclWindow_vidmem *w;
    pthread_mutex_lock(&c->lk);
    w = c->wins;
    pthread_mutex_unlock(&c->lk);
    if (!w) break;
    if (ncclCommWindowDeregister(c, w) != ncclSuccess) { /* a wrapper refused: drop it ourselves */
      pthread_mutex_lock(&c->lk);
      if (c->wins == w) { c->wins = w->next; w->live = 0; }
      pthread_mutex_unlock(&c->lk);
    }
  }
  for (;;) {
    struct fn_reg *g;
    pthread_mutex_lock(&c->lk);
    g = c->regs;
    pthread_mutex_unlock(&c->lk);
    if (!g) break;
    if (ncclCommDeregister(c, g) != ncclSuccess) {
      pthread_mutex_lock(&c->lk);
      if (c->regs == g) { c->regs = g->next; g->live = 0; }
      pthread_mutex_unlock(&c->lk);
    }
  }
  __atomic_store_n(&c->state, final_state, __ATOMIC_RELEASE);
  /* the segment stays mapped: a hung stream worker may still be inside it */
  return ncclSuccess;
}

static ncclResult_t check_teardown(struct ncclComm *c)
{
  if (!c) { fn_set_error("comm argument is NULL"); return ncclInvalidArgument; }
  if (!fn_comm_known(c)) { fn_set_error("invalid communicator %p", (void *)c); return ncclInvalidArgument; }
  int st = __atomic_load_n(&c->state, __ATOMIC_ACQUIRE);
  if (st == ST_DESTROYED || st == ST_ABORTED) { fn_set_error("communicator %p was already destroyed", (void *)c); return ncclInvalidArgument; }
  return ncclSuccess;
}

/* The hang measured after a revoke ended a first collective's connection setup (nccl_coll.c):
 * the abort or destroy never returns. */
static void teardown_hang(ncclComm_t comm)
{
  if (!comm || !fn_comm_known(comm) || !comm->teardown_hangs) return;
  for (;;) pause();
}

ncclResult_t pncclCommDestroy(ncclComm_t comm)
{
  ENTER();
  teardown_hang(comm);
  ncclResult_t r = check_teardown(comm);
  if (r == ncclSuccess) r = teardown(comm, ST_DESTROYED);
  if (r == ncclSuccess) fn_comm_free(comm);
  return LEAVE("ncclCommDestroy", r, "comm=%p", (void *)comm);
}
FN_ALIAS(ncclCommDestroy);

ncclResult_t pncclCommAbort(ncclComm_t comm)
{
  ENTER();
  teardown_hang(comm);
  ncclResult_t r = comm ? check_teardown(comm) : ncclSuccess;
  if (comm && r == ncclSuccess) {
    FN_STORE(comm->aborted, 1);
    FN_STORE(comm->revoked, 1);
    if (comm->shm) { fn_shm_lock(comm->shm); fn_shm_wake(comm->shm); fn_shm_unlock(comm->shm); }
    pthread_mutex_lock(&comm->lk);
    pthread_cond_broadcast(&comm->cv);
    pthread_mutex_unlock(&comm->lk);
    r = teardown(comm, ST_ABORTED);
    if (r == ncclSuccess) fn_comm_free(comm);
  }
  return LEAVE("ncclCommAbort", r, "comm=%p", (void *)comm);
}
FN_ALIAS(ncclCommAbort);

#ifndef FAKE_LEGACY
ncclResult_t pncclCommRevoke(ncclComm_t comm, int revokeFlags)
{
  ENTER();
  ncclResult_t r = fn_check_comm(comm, 1);
  if (r == ncclSuccess && revokeFlags != NCCL_REVOKE_DEFAULT) { fn_set_error("revokeFlags must be 0"); r = ncclInvalidArgument; }
  /* a second revoke is refused: "The communicator must not be finalizing, destroyed, or already revoked.
   * Attempts to revoke in these states return ncclInvalidArgument" (NCCL's design note for ncclCommRevoke,
   * "Assumptions, constraints and dependencies") */
  if (r == ncclSuccess && __atomic_load_n(&comm->state, __ATOMIC_ACQUIRE) == ST_REVOKED) {
    fn_set_error("communicator %p already revoked", (void *)comm);
    r = ncclInvalidArgument;
  }
  if (r == ncclSuccess) {
    FN_STORE(comm->revoked, 1); /* in-flight collectives stop waiting for peers */
    __atomic_add_fetch(&comm->revoke_epoch, 1, __ATOMIC_RELEASE); /* and host waits begun before it */
    if (comm->shm) { fn_shm_lock(comm->shm); fn_shm_wake(comm->shm); fn_shm_unlock(comm->shm); }
    pthread_mutex_lock(&comm->lk);
    pthread_cond_broadcast(&comm->cv);
    pthread_mutex_unlock(&comm->lk);
    __atomic_store_n(&comm->state, ST_REVOKED, __ATOMIC_RELEASE);
  }
  return LEAVE("ncclCommRevoke", r, "comm=%p flags=%d", (void *)comm, revokeFlags);
}
FN_ALIAS(ncclCommRevoke);

/* ncclCommSuspend / ncclCommResume (NCCL 2.29.7, src/mem_manager.cc): NCCL_SUSPEND_MEM (1) releases
 * the communicator's dynamic memory; a second suspend ("Already suspended") and a resume that is not
 * preceded by one ("Not in suspended state") are ncclInvalidUsage. Not in nccl.h before 2.29.7. */
ncclResult_t pncclCommSuspend(ncclComm_t comm, int flags);
ncclResult_t pncclCommResume(ncclComm_t comm);
ncclResult_t pncclCommSuspend(ncclComm_t comm, int flags)
{
  ENTER();
  ncclResult_t r = fn_check_comm(comm, 0);
  if (r == ncclSuccess && (flags & 1)) {
    if (comm->suspended) { fn_set_error("MemManager: Already suspended"); r = ncclInvalidUsage; }
    else comm->suspended = 1;
  }
  return LEAVE("ncclCommSuspend", r, "comm=%p flags=%d", (void *)comm, flags);
}
FN_ALIAS(ncclCommSuspend);

ncclResult_t pncclCommResume(ncclComm_t comm)
{
  ENTER();
  ncclResult_t r = fn_check_comm(comm, 0);
  if (r == ncclSuccess && !comm->suspended) { fn_set_error("MemManager: Not in suspended state"); r = ncclInvalidUsage; }
  if (r == ncclSuccess) comm->suspended = 0;
  return LEAVE("ncclCommResume", r, "comm=%p", (void *)comm);
}
FN_ALIAS(ncclCommResume);
#endif

/* ---- queries ---- */

ncclResult_t pncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError)
{
  ENTER();
  ncclResult_t r = check_teardown(comm);
  if (r == ncclSuccess && !asyncError) r = ncclInvalidArgument;
  if (r == ncclSuccess) *asyncError = __atomic_load_n(&comm->async, __ATOMIC_ACQUIRE);
  return LEAVE("ncclCommGetAsyncError", r, "comm=%p async=%d", (void *)comm, r == ncclSuccess ? (int)*asyncError : -1);
}
FN_ALIAS(ncclCommGetAsyncError);

ncclResult_t pncclCommCount(const ncclComm_t comm, int *count)
{
  ENTER();
  ncclResult_t r = fn_check_comm(comm, 1);
  if (r == ncclSuccess && !count) r = ncclInvalidArgument;
  if (r == ncclSuccess) *count = comm->nranks;
  return LEAVE("ncclCommCount", r, "comm=%p", (void *)comm);
}
FN_ALIAS(ncclCommCount);

ncclResult_t pncclCommCuDevice(const ncclComm_t comm, int *device)
{
  ENTER();
  ncclResult_t r = fn_check_comm(comm, 1);
  if (r == ncclSuccess && !device) r = ncclInvalidArgument;
  /* Inside a group the communicator is only set up at ncclGroupEnd: until then real NCCL 2.28.9
   * reports device 0 (seen on 2 x H200 for the rank of GPU 1). */
  if (r == ncclSuccess) *device = comm->state == ST_INIT && fn_in_group() ? 0 : comm->dev;
  return LEAVE("ncclCommCuDevice", r, "comm=%p", (void *)comm);
}
FN_ALIAS(ncclCommCuDevice);

ncclResult_t pncclCommUserRank(const ncclComm_t comm, int *rank)
{
  ENTER();
  ncclResult_t r = fn_check_comm(comm, 1);
  if (r == ncclSuccess && !rank) r = ncclInvalidArgument;
  if (r == ncclSuccess) *rank = comm->rank;
  return LEAVE("ncclCommUserRank", r, "comm=%p", (void *)comm);
}
FN_ALIAS(ncclCommUserRank);
