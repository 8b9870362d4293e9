/* Wrappers of communicator creation and destruction: they record each communicator (rank, size,
 * device, blocking, state, parent, cid) so the registration policy knows it, and refuse calls on
 * communicators that were already destroyed (NCCL would touch freed memory). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <string.h>
#include <unistd.h>

#include "guard.h"

void ng_log_call(int level, const char* fn, ncclComm_t comm, ncclResult_t res, double t0, int decision, int reason,
                 const char* msg) {
  if (!ng_log_on(level)) return;
  ng_log_source();
  struct ng_commview cv;
  ng_reg_comm_get(comm, &cv);
  struct ng_line l;
  ng_line_begin(&l, level, cv.dev);
  ng_kv_str(&l, "fn", fn);
  ng_kv_ptr(&l, "comm", comm);
  if (cv.known) {
    ng_kv_u64hex(&l, "cid", cv.cid);
    ng_kv_int(&l, "rank", cv.rank);
    ng_kv_int(&l, "nranks", cv.nranks);
  }
  ng_kv_str(&l, "result", ng_result_name(res));
  ng_kv_dbl(&l, "us", ng_now_us() - t0);
  ng_kv_str(&l, "decision", ng_decision_name(decision));
  ng_kv_str(&l, "reason", ng_reason_name(reason));
  ng_line_end(&l, "%s", msg ? msg : "");
}

void ng_log_passed(const char* fn, ncclComm_t comm, ncclResult_t res, double t0, int why) {
  int ok = res == ncclSuccess || res == ncclInProgress;
  if (!ok) ng_stat_add(NG_ST_ERRORS, 1);
  ng_log_call(ok ? NG_LOG_INFO : NG_LOG_WARN, fn, comm, res, t0, NG_D_PASS, ok ? NG_R_OK : NG_R_NCCL_ERROR,
              ok || !why ? NULL : ng_last_error(comm));
}

ncclResult_t ng_refuse_stuck(const char* fn, ncclComm_t comm, double t0, ncclResult_t res) {
  if (res != ncclSuccess) ng_stat_add(NG_ST_ERRORS, 1);
  char msg[400];
  snprintf(msg, sizeof msg, "a call ncclguard made on this communicator is still blocked inside NCCL (its peers left "
           "during its connection setup): %s is not passed to NCCL (two calls at once on one communicator are "
           "undefined there); the communicator is not freed. Create a new communicator", fn);
  ng_log_call(NG_LOG_WARN, fn, comm, res, t0, res == ncclSuccess ? NG_D_NOOP : NG_D_ERROR, NG_R_COMM_BROKEN, msg);
  return res;
}

/* NCCLGUARD_STRICT at interpreter start (python/ncclguard/_boot.py): NCCLGUARD=1 turns ncclguard on in every
 * Python program of the environment, most of which never use NCCL (pip, Jupyter's kernels, the doctor): a
 * configuration the strict rule refuses stops none of them, only the NCCL job it would guard: its root
 * communicators are refused here, with the reason the package found. Children inherit nothing of it (a
 * Python child judges its environment itself). */
static pthread_mutex_t refuse_mu = PTHREAD_MUTEX_INITIALIZER;
static char refuse_why[600];
static int refusing;

NG_API void ncclguard_refuse_communicators(const char* why) {
  pthread_mutex_lock(&refuse_mu);
  snprintf(refuse_why, sizeof refuse_why, "%s", why && *why ? why : "the configuration is refused");
  __atomic_store_n(&refusing, 1, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&refuse_mu);
}

/* A root communicator's creation refused (refusing set): out[0..n-1] NULL, ncclInvalidUsage, one WARN line. */
static ncclResult_t refuse_create(const char* fn, ncclComm_t* out, int n, double t0) {
  for (int i = 0; out && i < n; i++) out[i] = NULL;
  ng_stat_add(NG_ST_ERRORS, 1);
  char msg[900];
  pthread_mutex_lock(&refuse_mu);
  snprintf(msg, sizeof msg, "%s: the communicator is not created (NCCLGUARD_STRICT=1, and ncclguard was turned on "
           "at the program's start). Fix: correct that variable (ncclguard-doctor), or NCCLGUARD_STRICT=0 to warn "
           "and run", refuse_why);
  pthread_mutex_unlock(&refuse_mu);
  ng_log_call(NG_LOG_WARN, fn, NULL, ncclInvalidUsage, t0, NG_D_ERROR, NG_R_CONFIG_REFUSED, msg);
  return ncclInvalidUsage;
}
#define NG_REFUSE_CREATE(fn, out, n)                                                                   \
  do {                                                                                                 \
    if (__atomic_load_n(&refusing, __ATOMIC_ACQUIRE)) return refuse_create(fn, out, n, ng_now_us()); \
  } while (0)

ncclResult_t ng_refuse_gone(const char* fn, ncclComm_t comm, double t0) {
  ng_stat_add(NG_ST_ERRORS, 1);
  char msg[200];
  snprintf(msg, sizeof msg, "%s; NCCL would use freed memory", ng_reason_advice(NG_R_COMM_DESTROYED));
  ng_log_call(NG_LOG_WARN, fn, comm, ncclInvalidArgument, t0, NG_D_ERROR, NG_R_COMM_DESTROYED, msg);
  return ncclInvalidArgument;
}

static void log_created(const char* fn, ncclComm_t comm, ncclResult_t res, double t0, uint64_t cid, uint64_t parent,
                        int rank, int nranks, int dev, int blocking, int state);
/* Record a new communicator after a creation call returned `res`. */
static void created_w(const char* fn, ncclComm_t comm, ncclResult_t res, double t0, uint64_t cid, uint64_t parent,
                      int rank, int nranks, int blocking_hint, int warm) {
  if (!comm || (res != ncclSuccess && res != ncclInProgress)) return;
  int state = res == ncclInProgress ? NG_COMM_INITIALIZING : NG_COMM_READY;
  int blocking = blocking_hint && res != ncclInProgress;
  int dev = -1;
  /* Inside ncclGroupStart/End the communicator exists only after ncclGroupEnd: its device, rank
   * and size are asked for at its first registration instead. */
  if (state == NG_COMM_READY && ng_grp()->depth == 0) {
    ncclResult_t e;
    NG_CALL(e, ncclCommCuDevice, comm, &dev);
    if (rank < 0) NG_CALL(e, ncclCommUserRank, comm, &rank);
    if (nranks <= 0) NG_CALL(e, ncclCommCount, comm, &nranks);
    (void)e;
  }
  ng_reg_comm_add(comm, cid, parent, rank, nranks, dev, blocking, state);
  ng_stat_add(NG_ST_COMMS, 1);
  if (rank >= 0) ng_log_set_rank(rank);
  ng_log_source();
  if (ng_log_on(NG_LOG_INFO)) log_created(fn, comm, res, t0, cid, parent, rank, nranks, dev, blocking, state);
  /* The warm-up where every rank is at the same place of the communicator's sequence: it is ready and the
   * application has nothing on it yet (a blocking one; inside a group, at the group's end). ncclCommInitAll
   * warms its communicators up together (one thread drives them all: their first collective is one group). */
  if (state == NG_COMM_READY && blocking && warm && ng_cfg.warmup != NG_WARMUP_NEVER) {
    if (ng_grp()->depth == 0) ng_warmup(&comm, 1, fn);
    else ng_group_warm_later(comm);
  }
}

static void log_created(const char* fn, ncclComm_t comm, ncclResult_t res, double t0, uint64_t cid, uint64_t parent,
                        int rank, int nranks, int dev, int blocking, int state) {
  struct ng_line l;
  ng_line_begin(&l, NG_LOG_INFO, dev);
  ng_kv_str(&l, "fn", fn);
  ng_kv_ptr(&l, "comm", comm);
  ng_kv_u64hex(&l, "cid", cid);
  ng_kv_int(&l, "rank", rank);
  ng_kv_int(&l, "nranks", nranks);
  if (parent) ng_kv_u64hex(&l, "parent", parent);
  ng_kv_int(&l, "blocking", blocking);
  ng_kv_str(&l, "state", ng_state_name(state));
  ng_kv_str(&l, "result", ng_result_name(res));
  ng_kv_dbl(&l, "us", ng_now_us() - t0);
  ng_kv_str(&l, "decision", "pass");
  ng_kv_str(&l, "reason", "ok");
  if (ng_cur_lib() > 0) /* made through another copy of libnccl (route.c): name it */
    ng_line_end(&l, "made by %s (NCCL %d), the communicator's own libnccl", ng_lib_path(ng_cur_lib()), ng_nccl_version());
  else
    ng_line_end(&l, NULL);
}

static void created(const char* fn, ncclComm_t comm, ncclResult_t res, double t0, uint64_t cid, uint64_t parent,
                    int rank, int nranks, int blocking_hint) {
  created_w(fn, comm, res, t0, cid, parent, rank, nranks, blocking_hint, 1);
}
/* A child NCCL wrote at the end of the group it was made in: recorded now; its warm-up joins the group's
 * (group_end_warm: the children of one group warmed up together, as a thread driving several of their
 * ranks needs: each alone would wait for its peers' connection) */
void ng_comm_created(const char* fn, ncclComm_t comm, ncclResult_t res, double t0, uint64_t cid, uint64_t parent,
                     int rank, int nranks, int blocking_hint) {
  created_w(fn, comm, res, t0, cid, parent, rank, nranks, blocking_hint, 0);
  if (res == ncclSuccess && blocking_hint && ng_cfg.warmup != NG_WARMUP_NEVER) ng_group_warm_later(comm);
}

/* A child communicator (split, shrink, grow): NCCL writes the caller's pointer only when the child's job ends
 * ("*newcomm should be NCCL_COMM_NULL until comm split fully complete", ncclCommInitChildComm, src/init.cc at
 * v2.27.7-1 - v2.30.7-1): at once outside a group on a blocking parent; at the group's end inside one; later,
 * from NCCL's thread, for a nonblocking parent (ncclInProgress). The first is recorded here, the second at the
 * group's end (wrap_group.c), the third at its first registration (an unknown communicator, policy.c). */
static void child_created(const char* fn, ncclComm_t* slot, ncclResult_t res, double t0, uint64_t cid, uint64_t parent,
                          int nranks, int blocking_hint) {
  if (!slot) return;
  if (*slot) {
    created(fn, *slot, res, t0, cid, parent, -1, nranks, blocking_hint);
    return;
  }
  if (res != ncclSuccess && res != ncclInProgress) return;
  if (ng_grp()->depth > 0) {
    struct ng_child c = {fn, slot, t0, cid, parent, nranks, blocking_hint};
    ng_group_child_later(&c);
    return;
  }
  if (ng_log_on(NG_LOG_INFO))
    ng_log_call(NG_LOG_INFO, fn, NULL, res, t0, NG_D_PASS, NG_R_OK, "the child communicator reaches the application "
                "when NCCL's background job ends (a nonblocking parent): ncclguard records it at its first registration");
}

static int cfg_blocking(const ncclConfig_t* config) {
  return !(config && config->blocking == 0);
}

static void failed(const char* fn, ncclComm_t comm, ncclResult_t res, double t0) {
  if (res == ncclSuccess || res == ncclInProgress) return;
  ng_stat_add(NG_ST_ERRORS, 1);
  ng_log_call(NG_LOG_WARN, fn, comm, res, t0, NG_D_PASS, NG_R_NCCL_ERROR, ng_last_error(NULL));
}

static uint64_t id_cid(const ncclUniqueId* ids, int n) {
  return ids && n > 0 ? ng_fnv(NG_FNV_INIT, ids, sizeof *ids * (size_t)n) : 0;
}

NG_API ncclResult_t ncclCommInitRank(ncclComm_t* newcomm, int nranks, ncclUniqueId commId, int rank) {
  NG_FOREIGN(ncclCommInitRank, newcomm, nranks, commId, rank);
  ncclResult_t res;
  if (ng_bypass()) {
    NG_CALL(res, ncclCommInitRank, newcomm, nranks, commId, rank);
    return res;
  }
  NG_REFUSE_CREATE("ncclCommInitRank", newcomm, 1);
  double t0 = ng_now_us();
  NG_CALL(res, ncclCommInitRank, newcomm, nranks, commId, rank);
  if (newcomm) created("ncclCommInitRank", *newcomm, res, t0, id_cid(&commId, 1), 0, rank, nranks, 1);
  failed("ncclCommInitRank", NULL, res, t0);
  return res;
}

NG_API ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                           ncclConfig_t* config) {
  NG_FOREIGN(ncclCommInitRankConfig, comm, nranks, commId, rank, config);
  ncclResult_t res;
  if (ng_bypass()) {
    NG_CALL(res, ncclCommInitRankConfig, comm, nranks, commId, rank, config);
    return res;
  }
  NG_REFUSE_CREATE("ncclCommInitRankConfig", comm, 1);
  double t0 = ng_now_us();
  NG_CALL(res, ncclCommInitRankConfig, comm, nranks, commId, rank, config);
  if (comm)
    created("ncclCommInitRankConfig", *comm, res, t0, id_cid(&commId, 1), 0, rank, nranks, cfg_blocking(config));
  failed("ncclCommInitRankConfig", NULL, res, t0);
  return res;
}

/* exported through shim/exports.c */
NG_OPT_API ncclResult_t NG_OPT(ncclCommInitRankScalable)(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                             ncclUniqueId* commIds, ncclConfig_t* config) {
  NG_FOREIGN(ncclCommInitRankScalable, newcomm, nranks, myrank, nId, commIds, config);
  ncclResult_t res;
  if (ng_bypass()) {
    NG_CALL(res, ncclCommInitRankScalable, newcomm, nranks, myrank, nId, commIds, config);
    return res;
  }
  NG_REFUSE_CREATE("ncclCommInitRankScalable", newcomm, 1);
  double t0 = ng_now_us();
  NG_CALL(res, ncclCommInitRankScalable, newcomm, nranks, myrank, nId, commIds, config);
  if (newcomm)
    created("ncclCommInitRankScalable", *newcomm, res, t0, id_cid(commIds, nId), 0, myrank, nranks,
            cfg_blocking(config));
  failed("ncclCommInitRankScalable", NULL, res, t0);
  return res;
}

NG_API ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  NG_FOREIGN(ncclCommInitAll, comms, ndev, devlist);
  ncclResult_t res;
  if (ng_bypass()) {
    NG_CALL(res, ncclCommInitAll, comms, ndev, devlist);
    return res;
  }
  NG_REFUSE_CREATE("ncclCommInitAll", comms, ndev);
  static int calls;
  double t0 = ng_now_us();
  NG_CALL(res, ncclCommInitAll, comms, ndev, devlist);
  if (comms && res == ncclSuccess) {
    struct { pid_t pid; int n; } key = {getpid(), __atomic_fetch_add(&calls, 1, __ATOMIC_RELAXED)};
    uint64_t cid = ng_fnv(NG_FNV_INIT, &key, sizeof key);
    for (int i = 0; i < ndev; i++) created_w("ncclCommInitAll", comms[i], res, t0, cid, 0, i, ndev, 1, 0);
    if (ng_cfg.warmup != NG_WARMUP_NEVER && ndev > 0) {
      if (ng_grp()->depth == 0) ng_warmup(comms, ndev, "ncclCommInitAll");
      else
        for (int i = 0; i < ndev; i++) ng_group_warm_later(comms[i]);
    }
  }
  failed("ncclCommInitAll", NULL, res, t0);
  return res;
}

/* A child communicator's cid: every rank of the parent derives the same one. */
static uint64_t child_cid(ncclComm_t parent, int which, int color) {
  struct ng_commview pv;
  ng_reg_comm_get(parent, &pv);
  /* the fields one by one: a struct's padding bytes are not initialised (and would differ per rank) */
  int32_t f[3] = {which, ng_reg_comm_next(parent, which), color};
  return ng_fnv(ng_fnv(NG_FNV_INIT, &pv.cid, sizeof pv.cid), f, sizeof f);
}

NG_API ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config) {
  NG_FOREIGN(ncclCommSplit, comm, color, key, newcomm, config);
  ncclResult_t res;
  if (ng_bypass()) {
    NG_CALL(res, ncclCommSplit, comm, color, key, newcomm, config);
    return res;
  }
  double t0 = ng_now_us();
  struct ng_commview pv;
  ng_reg_comm_get(comm, &pv);
  if (comm && pv.stuck > 0) return ng_refuse_stuck("ncclCommSplit", comm, t0, ncclInvalidUsage);
  if (!comm || ng_comm_gone(&pv)) {
    ng_stat_add(NG_ST_ERRORS, 1);
    ng_log_call(NG_LOG_WARN, "ncclCommSplit", comm, ncclInvalidArgument, t0, NG_D_ERROR,
                comm ? NG_R_COMM_DESTROYED : NG_R_NULL_COMM, ng_reason_advice(comm ? NG_R_COMM_DESTROYED : NG_R_NULL_COMM));
    return ncclInvalidArgument;
  }
  uint64_t cid = child_cid(comm, NG_NEXT_SPLIT, color);
  NG_CALL(res, ncclCommSplit, comm, color, key, newcomm, config);
  child_created("ncclCommSplit", newcomm, res, t0, cid, pv.cid, 0, cfg_blocking(config) && pv.blocking);
  failed("ncclCommSplit", comm, res, t0);
  return res;
}

/* exported through shim/exports.c */
NG_OPT_API ncclResult_t NG_OPT(ncclCommShrink)(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                                   ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags) {
  NG_FOREIGN(ncclCommShrink, comm, excludeRanksList, excludeRanksCount, newcomm, config, shrinkFlags);
  ncclResult_t res;
  if (ng_bypass()) {
    NG_CALL(res, ncclCommShrink, comm, excludeRanksList, excludeRanksCount, newcomm, config, shrinkFlags);
    return res;
  }
  double t0 = ng_now_us();
  struct ng_commview pv;
  ng_reg_comm_get(comm, &pv);
  if (comm && pv.stuck > 0) return ng_refuse_stuck("ncclCommShrink", comm, t0, ncclInvalidUsage);
  if (!comm || ng_comm_gone(&pv)) {
    ng_stat_add(NG_ST_ERRORS, 1);
    ng_log_call(NG_LOG_WARN, "ncclCommShrink", comm, ncclInvalidArgument, t0, NG_D_ERROR,
                comm ? NG_R_COMM_DESTROYED : NG_R_NULL_COMM, "ncclCommShrink needs a live communicator");
    return ncclInvalidArgument;
  }
  uint64_t cid = child_cid(comm, NG_NEXT_SHRINK, 0);
  NG_CALL(res, ncclCommShrink, comm, excludeRanksList, excludeRanksCount, newcomm, config, shrinkFlags);
  child_created("ncclCommShrink", newcomm, res, t0, cid, pv.cid, 0, cfg_blocking(config) && pv.blocking);
  failed("ncclCommShrink", comm, res, t0);
  return res;
}

/* exported through shim/exports.c */
NG_OPT_API ncclResult_t NG_OPT(ncclCommGrow)(ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank,
                                 ncclComm_t* newcomm, ncclConfig_t* config) {
  NG_FOREIGN(ncclCommGrow, comm, nRanks, uniqueId, rank, newcomm, config);
  ncclResult_t res;
  if (ng_bypass()) {
    NG_CALL(res, ncclCommGrow, comm, nRanks, uniqueId, rank, newcomm, config);
    return res;
  }
  double t0 = ng_now_us();
  struct ng_commview pv;
  ng_reg_comm_get(comm, &pv);
  if (comm && pv.stuck > 0) return ng_refuse_stuck("ncclCommGrow", comm, t0, ncclInvalidUsage);
  if (comm && ng_comm_gone(&pv)) {
    /* comm == NULL is valid here: it is how a new rank joins. */
    ng_stat_add(NG_ST_ERRORS, 1);
    ng_log_call(NG_LOG_WARN, "ncclCommGrow", comm, ncclInvalidArgument, t0, NG_D_ERROR, NG_R_COMM_DESTROYED,
                ng_reason_advice(NG_R_COMM_DESTROYED));
    return ncclInvalidArgument;
  }
  /* New ranks know only the id, existing ranks the parent: the cid follows the id when there is one. */
  uint64_t cid = uniqueId ? id_cid(uniqueId, 1) : child_cid(comm, NG_NEXT_GROW, 0);
  NG_CALL(res, ncclCommGrow, comm, nRanks, uniqueId, rank, newcomm, config);
  child_created("ncclCommGrow", newcomm, res, t0, cid, pv.cid, nRanks, cfg_blocking(config));
  failed("ncclCommGrow", comm, res, t0);
  return res;
}

/* ---- a bounded end of life for a communicator ncclguard revoked --------------------------------
 * Measured on NCCL 2.28.9 (2 x H200, late-peer-past-timeout, tests/gpu/results/2026-12-01-*): after
 * ncclguard's watchdog revoked a communicator whose first collective was setting up connections to
 * a peer that never came, the application's ncclCommAbort never returned. NCCL alone would not have
 * revoked there, so that abort is run from a thread of its own and waited for a bounded time; one
 * still running then is left running (the communicator counts as stuck, see agree.c) and the call
 * returns success with a WARN: the communicator is gone for the application either way. */
/* The real finalize, destroy, abort or revoke. */
static ncclResult_t real_eol(enum ng_real_id id, ncclComm_t comm, int flags) {
  ncclResult_t res;
  switch (id) {
    case NG_ID_ncclCommFinalize: NG_CALL(res, ncclCommFinalize, comm); break;
    case NG_ID_ncclCommDestroy: NG_CALL(res, ncclCommDestroy, comm); break;
    case NG_ID_ncclCommAbort: NG_CALL(res, ncclCommAbort, comm); break;
    default: NG_CALL(res, ncclCommRevoke, comm, flags); break;
  }
  return res;
}

struct eol_job {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int done, abandoned;
  int lib; /* the caller's ng_tls.lib */
  enum ng_real_id id;
  ncclComm_t comm;
  uint64_t gen; /* its registry entry's generation */
  ncclResult_t res;
};

static void* eol_main(void* p) {
  struct eol_job* J = p;
  ng_thread_name("ng-end");
  ng_tls.lib = J->lib;
  J->res = real_eol(J->id, J->comm, 0);
  pthread_mutex_lock(&J->mu);
  J->done = 1;
  int abandoned = J->abandoned;
  pthread_cond_signal(&J->cv);
  pthread_mutex_unlock(&J->mu);
  if (abandoned) {
    ng_reg_comm_stuck(J->comm, J->gen, -1);
    pthread_mutex_destroy(&J->mu);
    pthread_cond_destroy(&J->cv);
    free(J);
  }
  return NULL;
}

/* The real destroy/abort; 1 when it was left running past the bound (*res then ncclSuccess). */
static int eol_bounded(enum ng_real_id id, ncclComm_t comm, uint64_t gen, ncclResult_t* res) {
  struct eol_job* J = ng_calloc("wrap.eol_job", 1, sizeof *J);
  int threaded = 0;
  if (J) {
    J->id = id, J->comm = comm, J->gen = gen, J->lib = ng_cur_lib();
    pthread_mutex_init(&J->mu, NULL);
    ng_cond_init(&J->cv);
    threaded = ng_spawn_detached(eol_main, J) == 0;
  }
  if (!threaded) {
    *res = real_eol(id, comm, 0);
    if (J) pthread_mutex_destroy(&J->mu), pthread_cond_destroy(&J->cv), free(J);
    return 0;
  }
  pthread_mutex_lock(&J->mu);
  int done = ng_wait_done(&J->mu, &J->cv, &J->done, ng_now_us() + 5e6); /* an abort takes milliseconds */
  if (!done) {
    ng_reg_comm_stuck(comm, gen, +1); /* before the thread can see `abandoned` */
    J->abandoned = 1;
  }
  pthread_mutex_unlock(&J->mu);
  if (!done) {
    *res = ncclSuccess;
    return 1;
  }
  *res = J->res;
  pthread_mutex_destroy(&J->mu);
  pthread_cond_destroy(&J->cv);
  free(J);
  return 0;
}

/* Finalize, destroy, abort and revoke share one shape. */
static ncclResult_t end_of_life(const char* fn, enum ng_real_id id, ncclComm_t comm, int flags, int new_state) {
  double t0 = ng_now_us();
  struct ng_commview cv;
  ng_reg_comm_get(comm, &cv);
  if (comm && ng_comm_gone(&cv)) return ng_refuse_gone(fn, comm, t0);
  ncclResult_t res;
  int ending = id == NG_ID_ncclCommDestroy || id == NG_ID_ncclCommAbort;
  if (comm && id == NG_ID_ncclCommRevoke && cv.guard_revoked) {
    /* ncclguard revoked it already (NCCL refuses a second revoke): the application's revoke is done */
    ng_log_call(NG_LOG_INFO, fn, comm, ncclSuccess, t0, NG_D_NOOP, NG_R_COMM_BROKEN,
                "already revoked by ncclguard: success without a second revoke (NCCL refuses one)");
    return ncclSuccess;
  }
  if (comm && cv.stuck > 0 && (ending || id == NG_ID_ncclCommFinalize)) {
    /* A call ncclguard made into NCCL on it never returned (agree.c, the launch): freeing the
     * communicator under it would make it use freed memory. It is left to the end of the process. */
    if (ending) ng_reg_comm_tombstone(comm, new_state);
    else ng_reg_comm_set_state(comm, new_state);
    return ng_refuse_stuck(fn, comm, t0, ncclSuccess);
  }
  /* From here ncclguard makes no call of its own on this communicator (another thread may be in an
   * agreement round on it: it stops at its next step). */
  if (comm && ending) {
    ng_reg_comm_set_aborting(comm, 1);
    /* ... and a call of its own from another thread (the watchdog's revoke) leaves NCCL before NCCL
     * frees the communicator: waited for, bounded (a revoke takes milliseconds) */
    for (double until = ng_now_us() + 5e6; ng_reg_comm_inflight(comm) > 0 && ng_now_us() < until;) usleep(200);
  }
  /* its agreement channel first (destroyed; aborted where a round failed on it or the communicator is
   * aborted): a private communicator of ncclguard's that nothing else ends */
  if (comm && (ending || id == NG_ID_ncclCommFinalize))
    ng_channel_end(comm, cv.gen, cv.dev, cv.broken || id == NG_ID_ncclCommAbort);
  int left = 0;
  if (comm && ending && cv.broken && cv.state == NG_COMM_REVOKED) {
    left = eol_bounded(id, comm, cv.gen, &res); /* revoked by ncclguard: bounded (above) */
  } else {
    res = real_eol(id, comm, flags);
  }
  if (left) {
    ng_reg_comm_tombstone(comm, new_state);
    ng_log_call(NG_LOG_WARN, fn, comm, ncclSuccess, t0, NG_D_NOOP, NG_R_COMM_BROKEN,
                "NCCL did not finish this call within 5 s on a communicator ncclguard revoked (measured on 2.28.9 "
                "after a peer never came to its first collective): it is left running in a thread of its own; the "
                "communicator is gone for the application, its resources go when that call ends or with the process");
    return ncclSuccess;
  }
  if (comm && ending && res != ncclSuccess && res != ncclInProgress) ng_reg_comm_set_aborting(comm, 0);
  if (comm && (res == ncclSuccess || res == ncclInProgress)) {
    /* Tombstoned only once NCCL is done: while a destroy still runs in the background, NCCL's own
     * threads call ncclCommWindowDeregister through the public symbol, and those calls must
     * reach NCCL (they do not carry this thread's in-NCCL mark). */
    int gone = new_state == NG_COMM_DESTROYED || new_state == NG_COMM_ABORTED;
    if (gone && res == ncclSuccess) ng_reg_comm_tombstone(comm, new_state);
    else if (!gone) ng_reg_comm_set_state(comm, new_state);
  }
  ng_log_passed(fn, comm, res, t0, 0);
  return res;
}

NG_API ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  NG_FOREIGN(ncclCommFinalize, comm);
  ncclResult_t res;
  if (ng_bypass()) {
    NG_CALL(res, ncclCommFinalize, comm);
    return res;
  }
  return end_of_life("ncclCommFinalize", NG_ID_ncclCommFinalize, comm, 0, NG_COMM_FINALIZED);
}

NG_API ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  NG_FOREIGN(ncclCommDestroy, comm);
  ncclResult_t res;
  if (ng_bypass()) {
    NG_CALL(res, ncclCommDestroy, comm);
    return res;
  }
  return end_of_life("ncclCommDestroy", NG_ID_ncclCommDestroy, comm, 0, NG_COMM_DESTROYED);
}

NG_API ncclResult_t ncclCommAbort(ncclComm_t comm) {
  NG_FOREIGN(ncclCommAbort, comm);
  ncclResult_t res;
  if (ng_bypass()) {
    NG_CALL(res, ncclCommAbort, comm);
    return res;
  }
  return end_of_life("ncclCommAbort", NG_ID_ncclCommAbort, comm, 0, NG_COMM_ABORTED);
}

/* exported through shim/exports.c */
NG_OPT_API ncclResult_t NG_OPT(ncclCommRevoke)(ncclComm_t comm, int revokeFlags) {
  NG_FOREIGN(ncclCommRevoke, comm, revokeFlags);
  ncclResult_t res;
  if (ng_bypass()) {
    NG_CALL(res, ncclCommRevoke, comm, revokeFlags);
    return res;
  }
  return end_of_life("ncclCommRevoke", NG_ID_ncclCommRevoke, comm, revokeFlags, NG_COMM_REVOKED);
}

/* Suspend and resume (NCCL 2.29.7+): a suspended communicator "cannot be used" (nccl.h), its
 * memory may be released. ncclguard makes no call of its own on it meanwhile: a registration on it
 * goes to NCCL untouched, as without ncclguard (an agreement all-reduce there could touch released
 * memory, and its failure would otherwise break the communicator for good). */
static ncclResult_t suspend_resume(const char* fn, ncclComm_t comm, int flags, int suspend) {
  double t0 = ng_now_us();
  struct ng_commview cv;
  ng_reg_comm_get(comm, &cv);
  if (comm && ng_comm_gone(&cv)) return ng_refuse_gone(fn, comm, t0);
  if (comm && cv.stuck > 0) return ng_refuse_stuck(fn, comm, t0, ncclInvalidUsage);
  ncclResult_t res;
  if (suspend) {
    if (comm) ng_reg_comm_set_suspended(comm, 1); /* first: no round may start on it from now */
    NG_CALL(res, ncclCommSuspend, comm, flags);
    if (comm && res != ncclSuccess && res != ncclInProgress && !cv.suspended) ng_reg_comm_set_suspended(comm, 0);
  } else {
    NG_CALL(res, ncclCommResume, comm);
    if (comm && (res == ncclSuccess || res == ncclInProgress)) ng_reg_comm_set_suspended(comm, 0);
  }
  ng_log_passed(fn, comm, res, t0, 0);
  return res;
}

/* exported through shim/exports.c */
NG_OPT_API ncclResult_t NG_OPT(ncclCommSuspend)(ncclComm_t comm, int flags) {
  NG_FOREIGN(ncclCommSuspend, comm, flags);
  ncclResult_t res;
  if (ng_bypass()) {
    NG_CALL(res, ncclCommSuspend, comm, flags);
    return res;
  }
  return suspend_resume("ncclCommSuspend", comm, flags, 1);
}

/* exported through shim/exports.c */
NG_OPT_API ncclResult_t NG_OPT(ncclCommResume)(ncclComm_t comm) {
  NG_FOREIGN(ncclCommResume, comm);
  ncclResult_t res;
  if (ng_bypass()) {
    NG_CALL(res, ncclCommResume, comm);
    return res;
  }
  return suspend_resume("ncclCommResume", comm, 0, 0);
}

/* ncclguard's own functions, for dlsym on libnccl's handle (dlsym.c) */
NG_SELF(ncclCommInitRank) NG_SELF(ncclCommInitRankConfig) NG_SELF(ncclCommInitAll) NG_SELF(ncclCommSplit)
NG_SELF(ncclCommFinalize) NG_SELF(ncclCommDestroy) NG_SELF(ncclCommAbort)
