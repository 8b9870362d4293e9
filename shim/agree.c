/* Ready-wait and the agreement round. The agreement is one small all-reduce (max over int32
 * votes) per registration, on the communicator itself, on a private stream and buffer: no side
 * channel, so it works on any launcher and any number of nodes. Several registrations (the queue
 * of a group) are agreed in one NCCL group, so one thread driving several GPUs cannot deadlock.
 * Every wait is a poll bounded by NCCLGUARD_TIMEOUT: a peer that never arrives is reported,
 * instead of hanging forever the way NCCL's bootstrap exchange does (FACTS 3). */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "guard.h"

#define NG_AGREE_SLOTS 64 /* votes per communicator per round */

static void nap(double* us) {
  struct timespec ts = {0, (long)(*us * 1000)};
  nanosleep(&ts, NULL);
  if (*us < 2000) *us *= 2;
}

ncclResult_t ng_wait_ready(ncclComm_t comm, int dev) {
  double t0 = ng_now_us(), delay = 20;
  ncclResult_t st = ncclInProgress;
  int logged = 0;
  for (;;) {
    ncclResult_t r;
    NG_CALL(r, ncclCommGetAsyncError, comm, &st);
    if (r != ncclSuccess) return r;
    if (st != ncclInProgress) break;
    if (!logged && ng_now_us() - t0 > 1000) {
      ng_log_msg(NG_LOG_INFO, dev, "ready-wait", "communicator %p still initialising: waiting before registering",
                 (void*)comm);
      logged = 1;
    }
    if (ng_now_us() - t0 > ng_cfg.timeout_s * 1e6) {
      ng_log_msg(NG_LOG_WARN, dev, "ready-wait",
                 "communicator %p did not finish initialising within NCCLGUARD_TIMEOUT=%gs", (void*)comm,
                 ng_cfg.timeout_s);
      return ncclSystemError;
    }
    nap(&delay);
  }
  if (logged)
    ng_log_msg(NG_LOG_INFO, dev, "ready-wait", "communicator %p ready after %.0f us (async state %s)", (void*)comm,
               ng_now_us() - t0, ng_result_name(st));
  return st;
}

/* The stream, scratch and host staging of a communicator, created on its device at first use. */
static int resources(ncclComm_t comm, int dev, struct ng_agree_res* res) {
  if (ng_reg_comm_agree_res(comm, res)) return 0;
  /* A destroyed communicator's resources, if idle; busy ones (a timed-out round may still use
   * them) go back to the pool, still owned there. */
  struct ng_agree_res busy[8];
  int nbusy = 0, found = 0;
  while (!found && nbusy < 8 && dev >= 0 && ng_reg_pool_take(dev, res)) {
    if (ng_cuda_stream_done(res->s) == 1) found = 1;
    else busy[nbusy++] = *res;
  }
  for (int i = 0; i < nbusy; i++) ng_reg_pool_put(dev, &busy[i]);
  if (found) {
    ng_reg_comm_set_agree_res(comm, res);
    return 0;
  }
  res->host = calloc(NG_AGREE_SLOTS * NG_NVOTE, sizeof(int32_t));
  if (!res->host) return -1;
  ng_ctx saved;
  if (ng_cuda_push(dev, &saved)) return free(res->host), -1;
  int bad = ng_cuda_stream_create(&res->s) || ng_cuda_alloc(&res->buf, NG_AGREE_SLOTS * NG_NVOTE * sizeof(int32_t));
  ng_cuda_pop(saved);
  if (bad) return free(res->host), -1;
  res->cap = NG_AGREE_SLOTS;
  ng_reg_comm_set_agree_res(comm, res);
  return 0;
}

struct slot {
  ng_stream s;
  ng_devptr buf;
  int32_t* host; /* NG_NVOTE values, owned by the communicator's resources */
};

/* Wait for every stream; 0 done, 1 timeout, <0 CUDA error. */
static int wait_streams(struct slot* sl, int n, double t0) {
  double delay = 5;
  for (;;) {
    int pending = 0;
    for (int i = 0; i < n; i++) {
      int d = ng_cuda_stream_done(sl[i].s);
      if (d < 0) return d;
      pending += !d;
    }
    if (!pending) return 0;
    if (ng_now_us() - t0 > ng_cfg.timeout_s * 1e6) return 1;
    nap(&delay);
  }
}

ncclResult_t ng_agree(struct ng_vote* votes, int n, const char* what) {
  if (n <= 0) return ncclSuccess;
  if (!ng_cuda_ok()) return ncclInvalidUsage;
  struct slot sl[n];
  double t0 = ng_now_us();
  /* Our stream is not captured; relaxed mode lets this thread allocate and enqueue while another
   * stream captures (in global mode even cuMemAlloc would fail and invalidate that capture). */
  int mode, relaxed = ng_cuda_relaxed_capture(&mode) == 0;
  for (int i = 0; i < n; i++) {
    int used = 0; /* earlier votes on the same communicator in this round */
    for (int j = 0; j < i; j++) used += votes[j].comm == votes[i].comm;
    struct ng_agree_res res;
    if (used >= NG_AGREE_SLOTS || resources(votes[i].comm, votes[i].dev, &res)) {
      ng_log_msg(NG_LOG_WARN, votes[i].dev, "agree", "cannot set up the agreement buffer for communicator %p",
                 (void*)votes[i].comm);
      if (relaxed) ng_cuda_restore_capture(mode);
      return ncclUnhandledCudaError;
    }
    sl[i].s = res.s;
    sl[i].buf = res.buf + (ng_devptr)used * NG_NVOTE * sizeof(int32_t);
    sl[i].host = res.host + (size_t)used * NG_NVOTE;
  }
  /* The copies use the communicator's own host staging, never the caller's stack: a round that
   * fails or times out may leave work queued on our stream that touches it after we return. */
  for (int i = 0; i < n; i++) memcpy(sl[i].host, votes[i].v, sizeof votes[i].v);
  ncclResult_t res = ncclSuccess;
  for (int i = 0; i < n && res == ncclSuccess; i++) {
    ng_ctx saved;
    if (ng_cuda_push(votes[i].dev, &saved) || ng_cuda_h2d(sl[i].buf, sl[i].host, sizeof votes[i].v, sl[i].s))
      res = ncclUnhandledCudaError;
    ng_cuda_pop(saved);
  }
  if (res == ncclSuccess) {
    ncclResult_t r, e;
    NG_CALL(r, ncclGroupStart);
    for (int i = 0; i < n && r == ncclSuccess; i++)
      NG_CALL(r, ncclAllReduce, (const void*)(uintptr_t)sl[i].buf, (void*)(uintptr_t)sl[i].buf, NG_NVOTE,
              NG_NCCL_INT32, NG_NCCL_MAX, votes[i].comm, (cudaStream_t)sl[i].s);
    NG_CALL(e, ncclGroupEnd);
    res = r != ncclSuccess ? r : e;
    if (res == ncclInProgress || res == ncclSuccess) /* nonblocking communicators: wait for the enqueue */
      for (int i = 0; i < n && (res == ncclInProgress || res == ncclSuccess); i++)
        res = ng_wait_ready(votes[i].comm, votes[i].dev);
  }
  int w = res == ncclSuccess ? wait_streams(sl, n, t0) : 0;
  if (res == ncclSuccess && w == 0) {
    for (int i = 0; i < n && res == ncclSuccess; i++) {
      ng_ctx saved;
      if (ng_cuda_push(votes[i].dev, &saved) || ng_cuda_d2h(sl[i].host, sl[i].buf, sizeof votes[i].v, sl[i].s))
        res = ncclUnhandledCudaError;
      ng_cuda_pop(saved);
    }
    if (res == ncclSuccess) w = wait_streams(sl, n, t0);
    if (res == ncclSuccess && w == 0)
      for (int i = 0; i < n; i++) memcpy(votes[i].v, sl[i].host, sizeof votes[i].v);
  }
  if (relaxed) ng_cuda_restore_capture(mode);
  if (w == 1) {
    ng_log_msg(NG_LOG_WARN, votes[0].dev, "agree",
               "%s: the agreement all-reduce did not complete within NCCLGUARD_TIMEOUT=%gs: %s", what,
               ng_cfg.timeout_s, ng_reason_advice(NG_R_TIMEOUT));
    return ncclSystemError;
  }
  if (w < 0) res = ncclUnhandledCudaError;
  if (res != ncclSuccess)
    ng_log_msg(NG_LOG_WARN, votes[0].dev, "agree", "%s: the agreement all-reduce failed: %s %s", what,
               ng_result_name(res), ng_last_error(votes[0].comm));
  else
    ng_stat_add(NG_ST_AGREE, n);
  return res;
}
