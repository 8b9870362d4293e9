/* The registration policy: where ncclguard decides to register, retry, degrade or fail.
 *
 * For a batch of window registrations (one call outside a group, or a group's queue at its end):
 *   1. ready-wait: a nonblocking communicator still initialising is waited for (FACTS 3);
 *   2. warm-up: the first registration on a communicator is preceded by one tiny collective;
 *      with the agreement on (default), the first agreement round is that collective;
 *   3. preflight: local checks of each buffer (preflight.c);
 *   4. agreement: the ranks combine their reasons (agree.c); all register or none does;
 *   5. the real registration with the caller's own `win` pointer (NCCL 2.28+ writes it at group
 *      end, FACTS 4); retried only where a retry can succeed (not ready / in progress);
 *   6. outcome round: if NCCL failed on some rank after all, the others deregister and every
 *      rank takes the same fallback;
 *   7. fallback: degrade (success with *win = NULL, the buffer is used unregistered) or error,
 *      never degrade on a communicator that device code reads windows from. */
#include <stdio.h>
#include <string.h>

#include "guard.h"

const char* ng_decision_name(int d) {
  static const char* n[] = {"pass", "internal", "register", "retry", "degrade", "error", "noop", "deferred"};
  return (unsigned)d < sizeof n / sizeof n[0] ? n[d] : "unknown";
}

int ng_check_reg_args(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, struct ng_commview* cv) {
  ng_reg_comm_get(comm, cv);
  if (!comm) return NG_R_NULL_COMM;
  if (ng_comm_gone(cv)) return NG_R_COMM_DESTROYED;
  if (!win) return NG_R_NULL_WIN;
  if (!buff) return NG_R_NULL_BUFF;
  if (!size) return NG_R_ZERO_SIZE;
  return NG_R_OK;
}

void ng_log_reg(const struct ng_regreq* r, int level, const char* msg) {
  if (!ng_log_on(level)) return;
  ng_log_source();
  struct ng_line l;
  ng_line_begin(&l, level, r->cv.dev);
  ng_kv_str(&l, "fn", "ncclCommWindowRegister");
  ng_kv_ptr(&l, "comm", r->comm);
  if (r->cv.known) {
    ng_kv_u64hex(&l, "cid", r->cv.cid);
    ng_kv_int(&l, "rank", r->cv.rank);
    ng_kv_int(&l, "nranks", r->cv.nranks);
  }
  ng_kv_ptr(&l, "buff", r->buff);
  ng_kv_int(&l, "size", (long long)r->size);
  ng_kv_int(&l, "flags", r->flags);
  /* *win is ours to read only once NCCL or ncclguard wrote it (a refused call leaves it untouched) */
  int written = r->win && (r->decision == NG_D_REGISTER || r->decision == NG_D_DEGRADE);
  ng_kv_ptr(&l, "win", written ? (const void*)*r->win : NULL);
  ng_kv_int(&l, "seq", r->seq);
  ng_kv_str(&l, "result", ng_result_name(r->result));
  ng_kv_dbl(&l, "us", ng_now_us() - r->t0);
  ng_kv_str(&l, "decision", ng_decision_name(r->decision));
  int reason = r->agreed_reason ? r->agreed_reason : r->local_reason;
  char rs[64];
  snprintf(rs, sizeof rs, "%s%s", reason != r->local_reason ? "peer_" : "", ng_reason_name(reason));
  ng_kv_str(&l, "reason", rs);
  if (r->first_bad_rank >= 0) ng_kv_int(&l, "bad_rank", r->first_bad_rank);
  ng_line_end(&l, "%s", msg ? msg : "");
}

/* Lowest reason set in a reduced vote (reasons are ordered roughly by how fundamental they are). */
static int vote_reason(const int32_t* v) {
  for (int k = 1; k < NG_NREASONS; k++)
    if (v[k]) return k;
  return NG_R_OK;
}

static void vote_init(struct ng_vote* vt, const struct ng_regreq* r, int reason) {
  memset(vt, 0, sizeof *vt);
  vt->comm = r->comm;
  vt->dev = r->cv.dev;
  if (reason != NG_R_OK) {
    vt->v[reason] = 1;
    vt->v[NG_VOTE_FIRST_BAD] = r->cv.nranks - r->cv.rank;
  }
}

/* Make sure the view has rank, size and device (unknown communicators, nonblocking ones). */
static void complete_view(struct ng_regreq* r) {
  if (!r->cv.known) {
    uint64_t cid = ng_fnv(NG_FNV_INIT, &r->comm, sizeof r->comm);
    ng_reg_comm_add(r->comm, cid, 0, -1, 0, -1, 1, NG_COMM_READY);
  }
  if (r->cv.rank < 0 || r->cv.nranks <= 0 || r->cv.dev < 0) {
    int rank = -1, nranks = 0, dev = -1;
    ncclResult_t e;
    NG_CALL(e, ncclCommUserRank, r->comm, &rank);
    NG_CALL(e, ncclCommCount, r->comm, &nranks);
    NG_CALL(e, ncclCommCuDevice, r->comm, &dev);
    (void)e;
    ng_reg_comm_set_info(r->comm, rank, nranks, dev);
  }
  ng_reg_comm_get(r->comm, &r->cv);
}

/* Step 1 for one request; ncclSuccess when the communicator is ready. */
static ncclResult_t ready(struct ng_regreq* r) {
  ncclResult_t st = ng_wait_ready(r->comm, r->cv.dev);
  if (st != ncclSuccess) return st;
  if (r->cv.known && r->cv.state == NG_COMM_INITIALIZING) ng_reg_comm_set_state(r->comm, NG_COMM_READY);
  complete_view(r);
  return ncclSuccess;
}

/* Step 5 for one request outside a group: the real call, retried where that can succeed. */
static ncclResult_t register_one(struct ng_regreq* r) {
  ncclResult_t res = ncclSuccess;
  for (int attempt = 0;; attempt++) {
    NG_CALL(res, ncclCommWindowRegister, r->comm, r->buff, r->size, r->win, r->flags);
    /* A nonblocking communicator may return ncclSuccess or ncclInProgress and finish in the
     * background: nothing else may be issued on it before ncclCommGetAsyncError says so. */
    if (res == ncclSuccess || res == ncclInProgress) res = ng_wait_ready(r->comm, r->cv.dev);
    if (res != ncclInvalidArgument || attempt >= ng_cfg.retries) break;
    /* Invalid argument from a communicator that is not ready yet is the one retryable case. */
    ncclResult_t st = ncclSuccess, q;
    NG_CALL(q, ncclCommGetAsyncError, r->comm, &st);
    if (q != ncclSuccess || st != ncclInProgress) break;
    ng_stat_add(NG_ST_RETRIED, 1);
    r->decision = NG_D_RETRY;
    ng_log_reg(r, NG_LOG_INFO, "communicator not ready: waiting, then registering again");
    if (ng_wait_ready(r->comm, r->cv.dev) != ncclSuccess) break;
  }
  return res;
}

static void fallback(struct ng_regreq* r, int reason, int peer_first_bad) {
  r->agreed_reason = reason;
  r->first_bad_rank = peer_first_bad;
  if (r->cv.has_devcomm) {
    r->decision = NG_D_ERROR;
    r->result = ncclInvalidUsage;
  } else if (ng_cfg.on_failure == NG_FAIL_DEGRADE) {
    r->decision = NG_D_DEGRADE;
    r->result = ncclSuccess;
    *r->win = NULL;
    ng_reg_comm_mark(r->comm, 0, 0, 1);
  } else {
    r->decision = NG_D_ERROR;
    r->result = ncclInvalidArgument;
  }
}

/* NCCL itself failed on this rank: invalid-argument class degrades (or errors, by policy); any
 * other error means NCCL reports the communicator broken, and degrading would hide that. */
static void nccl_failed(struct ng_regreq* r) {
  ng_log_msg(NG_LOG_WARN, r->cv.dev, "ncclCommWindowRegister", "NCCL failed to register: %s %s",
             ng_result_name(r->result), ng_last_error(r->comm));
  ncclResult_t nccl_res = r->result;
  r->local_reason = NG_R_NCCL_ERROR;
  fallback(r, NG_R_NCCL_ERROR, r->cv.rank);
  if (nccl_res != ncclInvalidArgument && r->decision == NG_D_DEGRADE) {
    r->decision = NG_D_ERROR;
    r->result = nccl_res;
  }
}

static void report(struct ng_regreq* r) {
  char msg[1024];
  int reason = r->agreed_reason;
  switch (r->decision) {
    case NG_D_REGISTER:
      ng_stat_add(NG_ST_REGISTERED, 1);
      if (*r->win) ng_reg_win_add(*r->win, r->comm, r->buff, r->size, r->flags, r->seq);
      ng_log_reg(r, NG_LOG_INFO, "registered");
      return;
    case NG_D_DEGRADE:
      ng_stat_add(NG_ST_DEGRADED, 1);
      snprintf(msg, sizeof msg, "%s: %s. Every rank uses this buffer unregistered (correct, without the symmetric "
               "fast path); *win = NULL",
               reason == r->local_reason ? "this rank" : "another rank", ng_reason_advice(reason));
      break;
    default:
      ng_stat_add(NG_ST_ERRORS, 1);
      if (reason == NG_R_TIMEOUT)
        snprintf(msg, sizeof msg, "not registered: %s", ng_reason_advice(reason));
      else if (r->cv.has_devcomm && reason != NG_R_NCCL_ERROR)
        snprintf(msg, sizeof msg, "registration cannot go ahead (%s: %s) and %s", ng_reason_name(reason),
                 ng_reason_advice(reason), ng_reason_advice(NG_R_HAS_DEVCOMM));
      else
        snprintf(msg, sizeof msg, "registration refused on every rank (%s): %s", ng_reason_name(reason),
                 ng_reason_advice(reason));
      break;
  }
  ng_log_reg(r, NG_LOG_WARN, msg);
}

ncclResult_t ng_policy_register(struct ng_regreq* reqs, int n) {
  struct ng_vote votes[n > 0 ? n : 1];
  ng_log_source();
  /* 1. ready-wait and sequence numbers */
  for (int i = 0; i < n; i++) {
    struct ng_regreq* r = &reqs[i];
    r->first_bad_rank = -1;
    r->agreed_reason = NG_R_OK;
    r->decision = NG_D_REGISTER;
    struct ng_commview now;
    ng_reg_comm_get(r->comm, &now);
    if (ng_comm_gone(&now)) {
      /* queued in a group, then destroyed in the same group: NCCL must not see the freed comm */
      r->cv = now;
      r->local_reason = r->agreed_reason = NG_R_COMM_DESTROYED;
      r->decision = NG_D_ERROR;
      r->result = ncclInvalidArgument;
      continue;
    }
    r->result = ready(r);
    r->seq = ng_reg_comm_next(r->comm, NG_NEXT_WINSEQ);
    if (r->result != ncclSuccess) {
      r->local_reason = r->result == ncclSystemError ? NG_R_TIMEOUT : NG_R_NOT_READY;
      r->agreed_reason = r->local_reason;
      r->decision = NG_D_ERROR;
    }
  }
  int use_agree = ng_cfg.agree && ng_cuda_ok();
  /* 2. warm-up, once per communicator */
  if (ng_cfg.warmup == NG_WARMUP_ALWAYS || (ng_cfg.warmup == NG_WARMUP_AUTO && !use_agree)) {
    int nw = 0;
    for (int i = 0; i < n; i++) {
      int dup = 0;
      for (int j = 0; j < nw; j++) dup |= votes[j].comm == reqs[i].comm;
      if (reqs[i].decision != NG_D_ERROR && !reqs[i].cv.warmed && !dup) vote_init(&votes[nw++], &reqs[i], NG_R_OK);
    }
    double t0 = ng_now_us();
    ncclResult_t w = ng_cuda_ok() ? ng_agree(votes, nw, "warm-up") : ncclSuccess;
    for (int j = 0; j < nw; j++) {
      ng_reg_comm_mark(votes[j].comm, 1, 0, 0);
      ng_log_msg(w == ncclSuccess ? NG_LOG_INFO : NG_LOG_WARN, votes[j].dev, "warmup",
                 "warm-up all-reduce on communicator %p: %s in %.0f us", (void*)votes[j].comm, ng_result_name(w),
                 ng_now_us() - t0);
    }
  }
  /* 3. preflight */
  int relaxed[n > 0 ? n : 1];
  for (int i = 0; i < n; i++) {
    struct ng_regreq* r = &reqs[i];
    relaxed[i] = 0;
    if (r->decision == NG_D_ERROR) continue;
    r->local_reason = ng_cfg.preflight ? ng_preflight(r->buff, r->size, r->cv.dev) : NG_R_OK;
    if (r->local_reason == NG_R_CAPTURING && ng_cfg.capture == NG_CAPTURE_RELAXED) {
      r->local_reason = NG_R_OK;
      relaxed[i] = 1;
    }
  }
  /* 4. agreement */
  if (use_agree) {
    int nv = 0;
    for (int i = 0; i < n; i++)
      if (reqs[i].decision != NG_D_ERROR) vote_init(&votes[nv++], &reqs[i], reqs[i].local_reason);
    double t0 = ng_now_us();
    ncclResult_t a = ng_agree(votes, nv, "registration");
    for (int i = 0, k = 0; i < n; i++) {
      struct ng_regreq* r = &reqs[i];
      if (r->decision == NG_D_ERROR) continue;
      struct ng_vote* vt = &votes[k++];
      if (!r->cv.warmed) {
        ng_reg_comm_mark(r->comm, 1, 0, 0);
        r->cv.warmed = 1;
        ng_log_msg(NG_LOG_INFO, r->cv.dev, "warmup",
                   "first agreement round on communicator %p (doubles as the warm-up): %s in %.0f us",
                   (void*)r->comm, ng_result_name(a), ng_now_us() - t0);
      }
      if (a != ncclSuccess) {
        r->decision = NG_D_ERROR;
        r->result = a;
        r->agreed_reason = r->local_reason = a == ncclSystemError ? NG_R_TIMEOUT : NG_R_NCCL_ERROR;
        continue;
      }
      int agreed = vote_reason(vt->v);
      if (agreed != NG_R_OK) {
        int lowest = vt->v[NG_VOTE_FIRST_BAD] ? r->cv.nranks - vt->v[NG_VOTE_FIRST_BAD] : -1;
        fallback(r, r->local_reason != NG_R_OK ? r->local_reason : agreed, lowest);
      }
    }
  } else {
    for (int i = 0; i < n; i++)
      if (reqs[i].decision != NG_D_ERROR && reqs[i].local_reason != NG_R_OK)
        fallback(&reqs[i], reqs[i].local_reason, reqs[i].cv.rank);
  }
  /* 5. the real registrations */
  int ngo = 0;
  for (int i = 0; i < n; i++) ngo += reqs[i].decision == NG_D_REGISTER;
  if (ngo == 1 && n == 1) {
    int mode = 0, sw = relaxed[0] && !ng_cuda_relaxed_capture(&mode);
    reqs[0].result = register_one(&reqs[0]);
    if (sw) ng_cuda_restore_capture(mode);
  } else if (ngo > 0) {
    ncclResult_t r, e;
    int mode = 0, sw = 0;
    for (int i = 0; i < n; i++) sw |= relaxed[i];
    sw = sw && !ng_cuda_relaxed_capture(&mode);
    NG_CALL(r, ncclGroupStart);
    for (int i = 0; i < n; i++) {
      if (reqs[i].decision != NG_D_REGISTER) continue;
      ncclResult_t ri = ncclInternalError;
      if (r == ncclSuccess) NG_CALL(ri, ncclCommWindowRegister, reqs[i].comm, reqs[i].buff, reqs[i].size,
                                    reqs[i].win, reqs[i].flags);
      reqs[i].result = ri;
    }
    NG_CALL(e, ncclGroupEnd);
    if (sw) ng_cuda_restore_capture(mode);
    for (int i = 0; i < n; i++) {
      struct ng_regreq* q = &reqs[i];
      if (q->decision != NG_D_REGISTER) continue;
      if (q->result == ncclSuccess && (e == ncclSuccess || e == ncclInProgress))
        q->result = ng_wait_ready(q->comm, q->cv.dev);
      else if (q->result == ncclSuccess) q->result = e;
    }
  }
  /* 6. outcome round: all ranks learn whether NCCL failed anywhere */
  if (use_agree && ngo > 0) {
    int nv = 0;
    for (int i = 0; i < n; i++) {
      if (reqs[i].decision != NG_D_REGISTER) continue;
      vote_init(&votes[nv], &reqs[i], NG_R_OK);
      if (reqs[i].result != ncclSuccess) votes[nv].v[NG_VOTE_FAILED] = 1;
      nv++;
    }
    ncclResult_t a = ng_agree(votes, nv, "registration outcome");
    for (int i = 0, k = 0; i < n; i++) {
      struct ng_regreq* r = &reqs[i];
      if (r->decision != NG_D_REGISTER) continue;
      struct ng_vote* vt = &votes[k++];
      if (a != ncclSuccess) {
        if (r->result == ncclSuccess) r->result = a;
      } else if (vt->v[NG_VOTE_FAILED] && r->result == ncclSuccess) {
        /* NCCL failed on another rank: drop ours (deregistration is local) and fall back with it. */
        ncclResult_t d;
        NG_CALL(d, ncclCommWindowDeregister, r->comm, *r->win);
        (void)d;
        fallback(r, NG_R_NCCL_ERROR, -1);
        r->local_reason = NG_R_OK;
        continue;
      }
      if (r->result != ncclSuccess) nccl_failed(r);
    }
  } else {
    for (int i = 0; i < n; i++)
      if (reqs[i].decision == NG_D_REGISTER && reqs[i].result != ncclSuccess) nccl_failed(&reqs[i]);
  }
  /* NCCL's own NULL window (no symmetric support) */
  for (int i = 0; i < n; i++) {
    struct ng_regreq* r = &reqs[i];
    if (r->decision != NG_D_REGISTER || r->result != ncclSuccess || *r->win) continue;
    r->agreed_reason = r->local_reason = NG_R_NULL_WINDOW;
    ng_reg_comm_mark(r->comm, 0, 0, 1);
    if (ng_cfg.null_window == NG_NULLWIN_ERROR) {
      r->decision = NG_D_ERROR;
      r->result = ncclInvalidUsage;
    } else {
      ng_log_reg(r, NG_LOG_WARN, ng_reason_advice(NG_R_NULL_WINDOW));
    }
  }
  ncclResult_t ret = ncclSuccess;
  for (int i = 0; i < n; i++) {
    report(&reqs[i]);
    if (ret == ncclSuccess && reqs[i].result != ncclSuccess) ret = reqs[i].result;
  }
  return ret;
}
