/* Wrappers of window and buffer (de)registration and of ncclDevCommCreate. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "guard.h"

/* Answer a registration without NCCL (bad arguments): log and return `res`. */
static ncclResult_t refuse(struct ng_regreq* r, int reason, ncclResult_t res) {
  r->local_reason = reason;
  r->agreed_reason = reason;
  r->first_bad_rank = -1;
  r->decision = NG_D_ERROR;
  r->result = res;
  if (r->win) *r->win = NULL; /* an error never leaves a window pointer the application could free twice */
  ng_stat_add(NG_ST_ERRORS, 1);
  ng_log_reg(r, NG_LOG_WARN, ng_reason_advice(reason));
  return res;
}

static int queue(struct ng_regreq* r) {
  struct ng_group* t = ng_grp();
  if (t->npending == t->cappending) {
    int cap = t->cappending ? 2 * t->cappending : 8;
    struct ng_regreq* p = ng_realloc("wrap.queue", t->pending, (size_t)cap * sizeof *p);
    if (!p) return -1;
    t->pending = p;
    t->cappending = cap;
  }
  t->pending[t->npending++] = *r;
  return 0;
}

/* exported through shim/exports.c */
NG_OPT_API ncclResult_t NG_OPT(ncclCommWindowRegister)(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
                                           int winFlags) {
  NG_FOREIGN(ncclCommWindowRegister, comm, buff, size, win, winFlags);
  ncclResult_t res;
  if (ng_bypass()) {
    double t0 = ng_now_us();
    NG_CALL(res, ncclCommWindowRegister, comm, buff, size, win, winFlags);
    if (!ng_cfg.disable) ng_log_call(NG_LOG_TRACE, "ncclCommWindowRegister", comm, res, t0, NG_D_INTERNAL, NG_R_OK, NULL);
    return res;
  }
  struct ng_regreq r = {.comm = comm, .buff = buff, .size = size, .win = win, .flags = winFlags,
                        .t0 = ng_now_us(), .seq = -1};
  /* No communicator, or one that is gone or out of step: answered here. Other bad arguments are
   * agreed like any other reason (a rank alone with them would leave its peers waiting). */
  int reason = ng_check_reg_args(&r);
  if (reason != NG_R_OK) return refuse(&r, reason, ncclInvalidArgument);
  if (r.cv.suspended) {
    /* ncclCommSuspend'ed: NCCL's own answer, untouched (no round on a communicator that cannot be used) */
    NG_CALL(res, ncclCommWindowRegister, comm, buff, size, win, winFlags);
    if (res != ncclSuccess && res != ncclInProgress) ng_stat_add(NG_ST_ERRORS, 1);
    /* a NULL window handed out is counted as every other (its deregistration takes it away again); inside
     * an application group NCCL writes *win only at its end: not read here */
    if (res == ncclSuccess && win && !*win && ng_grp()->depth == 0) ng_reg_comm_mark(comm, 0, 0, 1);
    ng_log_call(res == ncclSuccess || res == ncclInProgress ? NG_LOG_INFO : NG_LOG_WARN, "ncclCommWindowRegister", comm,
                res, r.t0, NG_D_PASS, NG_R_COMM_SUSPENDED, ng_reason_advice(NG_R_COMM_SUSPENDED));
    return res;
  }
  if (ng_grp()->depth > 0) {
    /* Inside ncclGroupStart/End: NCCL completes registrations at group end and nothing can be
     * agreed inside the group, so the request waits for the outermost ncclGroupEnd. */
    if (queue(&r)) {
      /* its peers queue theirs and run a round at the group's end that this rank cannot match: the
       * communicator is broken now and given up (revoked) when the group ends, outside NCCL's group */
      struct ng_group* G = ng_grp();
      ng_reg_comm_set_broken(comm, r.cv.gen, NG_R_AGREE_FAILED);
      if (G->nlost < (int)(sizeof G->lost / sizeof G->lost[0])) G->lost[G->nlost++] = comm;
      else ng_give_up(comm, r.cv.gen, r.cv.dev, NG_R_AGREE_FAILED, "out of host memory to queue a registration");
      return refuse(&r, NG_R_AGREE_FAILED, ncclSystemError);
    }
    r.decision = NG_D_DEFERRED;
    r.result = ncclSuccess;
    ng_log_reg(&r, NG_LOG_TRACE, "queued until ncclGroupEnd");
    return ncclSuccess;
  }
  return ng_policy_register(&r, 1);
}

/* Deregistration (window or buffer) answered without NCCL: a NULL communicator is an error; on a
 * destroyed one NCCL already released everything (PyTorch deregisters its signal pad after
 * ncclCommDestroy, docs/PYTORCH.md §3), so it is a successful no-op. 1 when answered, with *res set. */
static int dereg_answered(const char* fn, ncclComm_t comm, double t0, struct ng_commview* cv, ncclResult_t* res) {
  if (!comm) {
    ng_stat_add(NG_ST_ERRORS, 1);
    ng_log_call(NG_LOG_WARN, fn, comm, ncclInvalidArgument, t0, NG_D_ERROR, NG_R_NULL_COMM,
                "deregistration with a NULL communicator");
    *res = ncclInvalidArgument;
    return 1;
  }
  ng_reg_comm_get(comm, cv);
  if (ng_comm_gone(cv)) {
    ng_stat_add(NG_ST_NOOPS, 1);
    ng_log_call(NG_LOG_INFO, fn, comm, ncclSuccess, t0, NG_D_NOOP, NG_R_COMM_DESTROYED,
                "deregistration after the communicator was destroyed: NCCL already released it; nothing to do");
    *res = ncclSuccess;
    return 1;
  }
  if (cv->stuck > 0) {
    ng_stat_add(NG_ST_NOOPS, 1);
    *res = ng_refuse_stuck(fn, comm, t0, ncclSuccess);
    return 1;
  }
  return 0;
}

/* A handle of the other kind (a window to ncclCommDeregister, a buffer registration's handle to
 * ncclCommWindowDeregister): NCCL would look for it among its own kind and fail (pytorch#181610: "Could not
 * find handle", then SIGABRT at teardown). Answered here, nothing deregistered, with the right function named. */
static ncclResult_t wrong_handle(const char* fn, ncclComm_t comm, const void* h, double t0) {
  int win = !strcmp(fn, "ncclCommDeregister");
  char msg[300];
  snprintf(msg, sizeof msg, "%p is a %s: nothing deregistered. Fix: deregister it with %s", h,
           win ? "window (from ncclCommWindowRegister)" : "buffer registration's handle (from ncclCommRegister)",
           win ? "ncclCommWindowDeregister" : "ncclCommDeregister");
  ng_stat_add(NG_ST_ERRORS, 1);
  ng_log_call(NG_LOG_WARN, fn, comm, ncclInvalidArgument, t0, NG_D_ERROR, NG_R_WRONG_HANDLE, msg);
  return ncclInvalidArgument;
}

/* exported through shim/exports.c */
NG_OPT_API ncclResult_t NG_OPT(ncclCommWindowDeregister)(ncclComm_t comm, ncclWindow_t win) {
  NG_FOREIGN(ncclCommWindowDeregister, comm, win);
  ncclResult_t res;
  double t0 = ng_now_us();
  if (ng_bypass()) {
    NG_CALL(res, ncclCommWindowDeregister, comm, win);
    if (!ng_cfg.disable) {
      /* NCCL's own call (inside ncclCommDestroy): the window is gone from NCCL, forget it too. */
      int seq;
      void* b;
      size_t s;
      ng_reg_win_del(win, &seq, &b, &s);
      ng_log_call(NG_LOG_TRACE, "ncclCommWindowDeregister", comm, res, t0, NG_D_INTERNAL, NG_R_OK, NULL);
    }
    return res;
  }
  struct ng_commview cv;
  if (dereg_answered("ncclCommWindowDeregister", comm, t0, &cv, &res)) return res;
  if (!win) {
    /* A degraded registration (or NCCL's own NULL window): nothing was registered. One NULL window
     * fewer on this communicator (device communicators are refused only while there are some). */
    ng_reg_comm_mark(comm, 0, 0, -1);
    ng_stat_add(NG_ST_NOOPS, 1);
    ng_log_call(NG_LOG_INFO, "ncclCommWindowDeregister", comm, ncclSuccess, t0, NG_D_NOOP, NG_R_NULL_WINDOW,
                "NULL window (degraded or never registered): nothing to deregister");
    return ncclSuccess;
  }
  if (ng_reg_handle_kind(win) == NG_HANDLE_BUFFER) return wrong_handle("ncclCommWindowDeregister", comm, win, t0);
  int left = ng_reg_win_ref(win, -1);
  if (left > 0) {
    /* a window that also serves exact repeats of its registration (decision=reuse): one use fewer */
    ng_stat_add(NG_ST_NOOPS, 1);
    char msg[160];
    snprintf(msg, sizeof msg, "one use of a shared window deregistered; NCCL's window stays for the %d other%s", left,
             left > 1 ? "s" : "");
    ng_log_call(NG_LOG_INFO, "ncclCommWindowDeregister", comm, ncclSuccess, t0, NG_D_NOOP, NG_R_SHARED_WINDOW, msg);
    return ncclSuccess;
  }
  NG_CALL(res, ncclCommWindowDeregister, comm, win);
  int seq = -1;
  void* buff = NULL;
  size_t size = 0;
  if (res == ncclSuccess) ng_reg_win_del(win, &seq, &buff, &size);
  if (ng_log_on(res == ncclSuccess ? NG_LOG_INFO : NG_LOG_WARN)) {
    struct ng_line l;
    ng_line_begin(&l, res == ncclSuccess ? NG_LOG_INFO : NG_LOG_WARN, cv.dev);
    ng_kv_str(&l, "fn", "ncclCommWindowDeregister");
    ng_kv_ptr(&l, "comm", comm);
    ng_kv_u64hex(&l, "cid", cv.cid);
    ng_kv_int(&l, "rank", cv.rank);
    ng_kv_int(&l, "nranks", cv.nranks);
    ng_kv_ptr(&l, "win", win);
    ng_kv_int(&l, "seq", seq);
    ng_kv_str(&l, "result", ng_result_name(res));
    ng_kv_dbl(&l, "us", ng_now_us() - t0);
    ng_kv_str(&l, "decision", "pass");
    ng_kv_str(&l, "reason", res == ncclSuccess ? "ok" : "nccl_error");
    struct ng_commview now;
    if (res == ncclSuccess && ng_reg_comm_get(comm, &now)) {
      ng_kv_int(&l, "comm_windows", now.nwindows);
      ng_kv_uint(&l, "comm_bytes", now.wbytes);
    }
    ng_line_end(&l, "%s", res == ncclSuccess ? "" : ng_last_error(comm));
  }
  if (res != ncclSuccess) ng_stat_add(NG_ST_ERRORS, 1);
  return res;
}

NG_API ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle) {
  NG_FOREIGN(ncclCommRegister, comm, buff, size, handle);
  ncclResult_t res;
  double t0 = ng_now_us();
  if (ng_bypass()) {
    NG_CALL(res, ncclCommRegister, comm, buff, size, handle);
    return res;
  }
  struct ng_commview cv;
  ng_reg_comm_get(comm, &cv);
  int reason = NG_R_OK;
  if (!comm) reason = NG_R_NULL_COMM;
  else if (ng_comm_gone(&cv)) reason = NG_R_COMM_DESTROYED;
  else if (!handle) reason = NG_R_NULL_WIN;
  if (reason) {
    ng_stat_add(NG_ST_ERRORS, 1);
    ng_log_call(NG_LOG_WARN, "ncclCommRegister", comm, ncclInvalidArgument, t0, NG_D_ERROR, reason,
                !comm ? ng_reason_advice(NG_R_NULL_COMM) : "invalid communicator or handle pointer");
    return ncclInvalidArgument;
  }
  /* a call of ncclguard's still blocked inside NCCL on it: not a second call at once (as ncclDevCommCreate) */
  if (cv.stuck > 0) return ng_refuse_stuck("ncclCommRegister", comm, t0, ncclInvalidUsage);
  NG_CALL(res, ncclCommRegister, comm, buff, size, handle);
  if (res == ncclSuccess && *handle) ng_reg_buf_add(*handle, comm, buff, size);
  ng_log_passed("ncclCommRegister", comm, res, t0, 1);
  return res;
}

NG_API ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle) {
  NG_FOREIGN(ncclCommDeregister, comm, handle);
  ncclResult_t res;
  double t0 = ng_now_us();
  if (ng_bypass()) {
    NG_CALL(res, ncclCommDeregister, comm, handle);
    if (!ng_cfg.disable) ng_reg_buf_del(handle);
    return res;
  }
  struct ng_commview cv;
  if (dereg_answered("ncclCommDeregister", comm, t0, &cv, &res)) return res;
  if (ng_reg_handle_kind(handle) == NG_HANDLE_WINDOW) return wrong_handle("ncclCommDeregister", comm, handle, t0);
  NG_CALL(res, ncclCommDeregister, comm, handle);
  if (res == ncclSuccess) ng_reg_buf_del(handle);
  ng_log_passed("ncclCommDeregister", comm, res, t0, 1);
  return res;
}

/* NCCL's answer to ncclDevCommCreate, logged. NCCL 2.29+ refuse requirements that do not begin with the size, magic
 * and version of NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER (ncclInvalidUsage): the struct of NCCL 2.28's device API, which
 * has none (a program built against 2.28 - PyTorch 2.11 - on NCCL 2.29+; docs/PYTORCH.md §5, pytorch/pytorch#172398; no
 * translation exists, NCCL's compatibility table starts at 2.29.2). Then the one WARN line names that cause and the
 * fix; NCCL's answer is kept. The magic is read, never written: both layouts begin with at least 16 bytes. */
static void devcomm_logged(ncclComm_t comm, const struct ncclDevCommRequirements* reqs, ncclResult_t res, double t0) {
  unsigned magic = 0;
  if (reqs) memcpy(&magic, (const char*)reqs + sizeof(size_t), sizeof magic);
  int v = ng_nccl_version();
  if (res != ncclInvalidUsage || !reqs || v < 22900 || magic == NG_NCCL_CONFIG_MAGIC /* NCCL_API_MAGIC */) {
    ng_log_passed("ncclDevCommCreate", comm, res, t0, 1);
    return;
  }
  ng_stat_add(NG_ST_ERRORS, 1);
  char msg[700];
  snprintf(msg, sizeof msg, "NCCL %d.%d.%d refused the device-communicator requirements: they carry no "
           "NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER magic, the layout of NCCL 2.28's device API (a program built against "
           "NCCL 2.28, as PyTorch 2.11 is, on NCCL 2.29 or later, which cannot translate it). Fix: load the NCCL the "
           "program was built with (PyTorch: its nvidia-nccl wheel, not another libnccl put first), or use a build of "
           "the program against this NCCL", v / 10000, v % 10000 / 100, v % 100);
  ng_log_call(NG_LOG_WARN, "ncclDevCommCreate", comm, res, t0, NG_D_PASS, NG_R_NCCL_ERROR, msg);
}

/* exported through shim/exports.c */
NG_OPT_API ncclResult_t NG_OPT(ncclDevCommCreate)(ncclComm_t comm, struct ncclDevCommRequirements const* reqs,
                                      struct ncclDevComm* outDevComm) {
  NG_FOREIGN(ncclDevCommCreate, comm, reqs, outDevComm);
  ncclResult_t res;
  double t0 = ng_now_us();
  if (ng_bypass()) {
    NG_CALL(res, ncclDevCommCreate, comm, reqs, outDevComm);
    return res;
  }
  struct ng_commview cv;
  ng_reg_comm_get(comm, &cv);
  /* answered as a window registration on it is (ng_check_reg_args): no communicator, one destroyed or being
   * aborted (NCCL would use freed memory), one ncclguard stopped (revoked: its windows are not agreed) */
  int why = !comm ? NG_R_NULL_COMM : ng_comm_gone(&cv) || cv.aborting ? NG_R_COMM_DESTROYED : NG_R_OK;
  if (why != NG_R_OK) {
    ng_stat_add(NG_ST_ERRORS, 1);
    ng_log_call(NG_LOG_WARN, "ncclDevCommCreate", comm, ncclInvalidArgument, t0, NG_D_ERROR, why, ng_reason_advice(why));
    return ncclInvalidArgument;
  }
  if (cv.stuck > 0) return ng_refuse_stuck("ncclDevCommCreate", comm, t0, ncclInvalidUsage);
  /* ncclDevCommCreate is collective in NCCL (an exchange and a barrier over the communicator): a rank that
   * refused it alone would leave its peers waiting there. So the refusal is agreed, in a round on the
   * communicator's channel: any rank's reason refuses it on every rank. A rank whose channel is broken
   * refuses without a round; its peers' round times out on its stopped channel and refuses too. */
  int local = cv.broken ? NG_R_COMM_BROKEN : cv.ndegraded > 0 ? NG_R_DEGRADED_WINDOWS : NG_R_OK, agreed = local;
  if (!cv.broken && cv.nranks > 1 && ng_cfg.agree && ng_cuda_ok() && !cv.suspended) {
    struct ng_vote v;
    memset(&v, 0, sizeof v);
    v.comm = comm, v.dev = cv.dev;
    if (local != NG_R_OK) v.v[local] = 1;
    ncclResult_t a = ng_agree(&v, 1, "device communicator");
    agreed = a != ncclSuccess || v.status != NG_AGREE_OK ? NG_R_COMM_BROKEN
             : v.v[NG_R_DEGRADED_WINDOWS] ? NG_R_DEGRADED_WINDOWS : v.v[NG_R_COMM_BROKEN] ? NG_R_COMM_BROKEN : NG_R_OK;
  }
  if (agreed != NG_R_OK) {
    /* Device code reads windows unchecked (docs/PYTORCH.md §3): a NULL window there is an illegal address. */
    ng_stat_add(NG_ST_ERRORS, 1);
    char msg[700];
    if (agreed == NG_R_DEGRADED_WINDOWS && local == agreed)
      snprintf(msg, sizeof msg, "%d window(s) of this communicator are NULL (degraded, or NCCL gave no symmetric "
               "window): %s", cv.ndegraded, ng_reason_advice(NG_R_DEGRADED_WINDOWS));
    else if (local != agreed)
      snprintf(msg, sizeof msg, "refused on every rank (another rank: %s): %s", ng_reason_name(agreed),
               ng_reason_advice(agreed));
    else
      snprintf(msg, sizeof msg, "%s", ng_reason_advice(agreed));
    ng_log_call(NG_LOG_WARN, "ncclDevCommCreate", comm, ncclInvalidUsage, t0, NG_D_ERROR, agreed, msg);
    return ncclInvalidUsage;
  }
  NG_CALL(res, ncclDevCommCreate, comm, reqs, outDevComm);
  if (res == ncclSuccess) ng_reg_comm_mark(comm, 0, +1, 0);
  devcomm_logged(comm, reqs, res, t0);
  return res;
}

/* exported through shim/exports.c */
NG_OPT_API ncclResult_t NG_OPT(ncclDevCommDestroy)(ncclComm_t comm, struct ncclDevComm const* devComm) {
  NG_FOREIGN(ncclDevCommDestroy, comm, devComm);
  ncclResult_t res;
  double t0 = ng_now_us();
  if (ng_bypass()) {
    NG_CALL(res, ncclDevCommDestroy, comm, devComm);
    return res;
  }
  struct ng_commview cv;
  if (dereg_answered("ncclDevCommDestroy", comm, t0, &cv, &res)) return res;
  NG_CALL(res, ncclDevCommDestroy, comm, devComm);
  if (res == ncclSuccess) ng_reg_comm_mark(comm, 0, -1, 0); /* windows may degrade again once none is left */
  ng_log_passed("ncclDevCommDestroy", comm, res, t0, 1);
  return res;
}

/* ncclguard's own functions, for dlsym on libnccl's handle (dlsym.c) */
NG_SELF(ncclCommRegister) NG_SELF(ncclCommDeregister)
