/* The registration policy: where ncclguard decides to register, retry, degrade or fail. A batch
 * of window registrations (one call outside a group, or a group's queue at its end) goes through
 * named phases, each a function below; one function, decide(), sets a decision from the agreed
 * votes, the same on every rank:
 *   1. prepare:   the communicator must exist, be alive and in step (not broken); a nonblocking
 *                 one still initialising is waited for (bounded); sequence numbers;
 *   2. warm-up:   a tiny collective before the first registration on a communicator (with the
 *                 agreement on, the first vote round is that collective);
 *   3. preflight: what the loaded NCCL will do (rules.c: symmetric path or not) and the checks its
 *                 symmetric path makes of this buffer (preflight.c);
 *   4. vote:      the ranks combine their facts (agree.c); decide(): NCCL would refuse the buffer on
 *                 some rank -> every rank falls back; otherwise all register. Without revoke
 *                 (NCCL < 2.28.7) a "go" round follows, so that a rank that arrives after its
 *                 peers gave up the vote does not enter NCCL's registration alone (docs/DESIGN.md);
 *   5. register:  the real registrations with the caller's own `win` pointers (NCCL 2.28+ writes
 *                 them at group end), retried only where a retry can succeed;
 *   6. outcome:   if NCCL failed on some rank after all, the others deregister and every rank takes
 *                 the same fallback;
 *   7. fallback:  degrade (success with *win = NULL, the buffer is used unregistered) or error;
 *                 never degrade on a communicator that device code reads windows from.
 * Where ncclguard cannot tell what NCCL would do, it does not degrade: the buffer goes to NCCL. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "guard.h"

const char* ng_decision_name(int d) {
  static const char* n[] = {
#define NG_DECISION(id, name, meaning) name,
#include "decisions.def"
#undef NG_DECISION
  };
  return (unsigned)d < sizeof n / sizeof n[0] ? n[d] : "unknown";
}

int ng_check_reg_args(struct ng_regreq* r) {
  ng_reg_comm_get(r->comm, &r->cv);
  r->arg_reason = !r->win ? NG_R_NULL_WIN : !r->buff ? NG_R_NULL_BUFF : !r->size ? NG_R_ZERO_SIZE : NG_R_OK;
  if (!r->comm) return NG_R_NULL_COMM;
  if (ng_comm_gone(&r->cv) || r->cv.aborting) return NG_R_COMM_DESTROYED;
  if (r->cv.broken) return NG_R_COMM_BROKEN;
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
  ng_kv_uint(&l, "size", r->size); /* a size_t: a wrapping size (buff + size past 2^64) reads as itself */
  ng_kv_int(&l, "flags", r->flags);
  /* *win is ours to read only once NCCL or ncclguard wrote it (a refused call leaves it untouched) */
  int written = r->win && (r->decision == NG_D_REGISTER || r->decision == NG_D_DEGRADE || r->decision == NG_D_REUSE);
  ng_kv_ptr(&l, "win", written ? (const void*)*r->win : NULL);
  ng_kv_int(&l, "seq", r->seq);
  ng_kv_str(&l, "result", ng_result_name(r->result));
  ng_kv_dbl(&l, "us", ng_now_us() - r->t0);
  if (r->agree_us > 0) ng_kv_dbl(&l, "agree_us", r->agree_us);
  if (r->nccl_us > 0) ng_kv_dbl(&l, "nccl_us", r->nccl_us);
  ng_kv_str(&l, "decision", ng_decision_name(r->decision));
  int reason = r->agreed_reason ? r->agreed_reason : r->local_reason;
  char rs[64];
  snprintf(rs, sizeof rs, "%s%s", reason != r->local_reason ? "peer_" : "", ng_reason_name(reason));
  ng_kv_str(&l, "reason", rs);
  if (r->first_bad_rank >= 0) ng_kv_int(&l, "bad_rank", r->first_bad_rank);
  if (r->acct) {
    ng_kv_int(&l, "comm_windows", r->comm_windows);
    ng_kv_uint(&l, "comm_bytes", r->comm_bytes);
  }
  ng_line_end(&l, "%s", msg ? msg : "");
}

static int lowest_reason(unsigned mask) {
  for (int k = 1; k < NG_NREASONS; k++)
    if (mask & (1u << k)) return k;
  return NG_R_OK;
}

static void error_out(struct ng_regreq* r, int reason, ncclResult_t res) {
  r->decision = NG_D_ERROR;
  r->result = res;
  if (!r->local_reason) r->local_reason = reason;
  r->agreed_reason = reason;
}

/* Step 7: `reason` is what the log names (this rank's own where it has one), `agreed` the reason
 * every rank found (the decision depends on it alone, so that it is the same everywhere). */
static void fallback(struct ng_regreq* r, int reason, int agreed, int first_bad) {
  r->agreed_reason = reason;
  r->first_bad_rank = first_bad;
  if (agreed == NG_R_NULL_WIN ||
      ((agreed == NG_R_NULL_BUFF || agreed == NG_R_ZERO_SIZE) && ng_nccl_version() >= 22900)) {
    /* nowhere to write a window; or NCCL 2.29+'s own answer to a NULL buffer or size 0 (2.27 and
     * 2.28 answer success without registering: degraded below). The same error on every rank. */
    r->decision = NG_D_ERROR;
    r->result = ncclInvalidArgument;
  } else if (r->cv.has_devcomm) {
    r->decision = NG_D_ERROR;
    r->result = ncclInvalidUsage;
  } else if (ng_cfg.on_failure == NG_FAIL_DEGRADE) {
    r->decision = NG_D_DEGRADE;
    r->result = ncclSuccess;
    *r->win = NULL;
  } else {
    r->decision = NG_D_ERROR;
    r->result = ncclInvalidArgument;
  }
}

/* Make sure the view has rank, size and device (unknown communicators, nonblocking ones). */
static void complete_view(struct ng_regreq* r) {
  if (!r->cv.known) {
    uint64_t cid = ng_fnv(NG_FNV_INIT, &r->comm, sizeof r->comm);
    (void)ng_reg_comm_add(r->comm, cid, 0, -1, 0, -1, 1, NG_COMM_READY); /* unrecorded: its round cannot run */
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

/* ---- 1. prepare ---------------------------------------------------------------------------- */
static void phase_prepare(struct ng_regreq* reqs, int n) {
  for (int i = 0; i < n; i++) {
    struct ng_regreq* r = &reqs[i];
    r->first_bad_rank = -1;
    r->agreed_reason = r->local_reason = NG_R_OK;
    r->decision = NG_D_REGISTER;
    r->result = ncclSuccess;
    int why = ng_check_reg_args(r); /* again: queued in a group, the comm may have gone since */
    if (why != NG_R_OK) {
      error_out(r, why, ncclInvalidArgument);
      continue;
    }
    ncclResult_t st = ng_wait_ready(r->comm, r->cv.dev);
    if (st == ncclSuccess) {
      if (r->cv.known && r->cv.state == NG_COMM_INITIALIZING) ng_reg_comm_set_state(r->comm, NG_COMM_READY);
      complete_view(r);
    }
    r->seq = ng_reg_comm_next(r->comm, NG_NEXT_WINSEQ);
    if (st != ncclSuccess) {
      /* this rank leaves before the vote its peers run: stopped for them too (the invariant) */
      error_out(r, st == ncclSystemError ? NG_R_TIMEOUT : NG_R_NOT_READY, st);
      /* (the communicator itself is in a state of its own here, its initialisation or last operation not
       * ended on this rank: it is stopped, revoked where NCCL can, as well as the agreement) */
      if (ng_cfg.agree && r->cv.nranks != 1)
        ng_stop_comm(r->comm, r->cv.gen, r->cv.dev, r->local_reason, "the communicator did not become ready");
    }
  }
  /* A communicator given up above leaves the batch whole: its other registrations do not vote either (a
   * vote with fewer registrations than the peers' would be an all-reduce of another length than theirs) */
  for (int i = 0; i < n; i++) {
    struct ng_regreq* r = &reqs[i];
    if (r->decision == NG_D_ERROR) continue;
    struct ng_commview now;
    if (ng_reg_comm_get(r->comm, &now) && now.broken) error_out(r, NG_R_COMM_BROKEN, ncclInvalidUsage);
  }
}

/* ---- 3. preflight ---------------------------------------------------------------------------- */
/* A registration that goes to NCCL's symmetric path in relaxed capture mode: a job of NCCL's group end. */
static int relaxed_job(const struct ng_regreq* r) {
  return r->relaxed && !r->arg_reason && r->decision != NG_D_ERROR && r->rules.sym == NG_SYM_YES;
}

static void phase_preflight(struct ng_regreq* reqs, int n, const struct ng_regreq* prior, int nprior) {
  for (int i = 0; i < n; i++) {
    struct ng_regreq* r = &reqs[i];
    if (r->decision == NG_D_ERROR) continue;
    ng_rules_for(r->comm, r->cv.dev, r->cv.nranks, &r->rules);
    r->facts = 0;
    if (!r->arg_reason && ng_cfg.preflight) {
      ng_preflight(r->buff, r->size, r->cv.dev, r->rules.version, &r->facts, &r->alloc_size, &r->alloc_base);
      /* 2.27 fails an address that is no CUDA allocation on every path (cuMemGetAddressRange) */
      if (r->rules.all_paths && ng_cuda_is_allocation(r->buff, r->cv.dev) == 0) r->arg_reason = NG_R_NOT_DEVICE;
    }
    /* NCCL with reuse (before 2.30.7) gives an allocation it already placed no new place: whether this
     * window's is one (a live window of the communicator in it, or an earlier step of the batch that NCCL
     * placed: registered, with a window; a refused or degraded one never reached NCCL) */
    r->alloc_live = -1;
    if (!r->arg_reason && !r->rules.no_reuse && r->alloc_size && r->alloc_base) {
      r->alloc_live = ng_reg_win_in_range(r->comm, r->alloc_base, r->alloc_size);
      for (int j = 0; j < nprior && !r->alloc_live; j++)
        r->alloc_live = prior[j].comm == r->comm && prior[j].decision == NG_D_REGISTER &&
                        prior[j].result == ncclSuccess && prior[j].win && *prior[j].win &&
                        prior[j].alloc_base == r->alloc_base && prior[j].alloc_size == r->alloc_size;
    }
    /* NCCL without reuse (2.30.7+): an exact repeat of a live registration can be served from its window */
    r->repeat_of = NULL;
    if (!r->arg_reason && r->rules.no_reuse) ng_reg_win_find(r->comm, r->buff, r->size, r->flags, &r->repeat_of);
    if (!r->arg_reason && ng_capture_hazard(r->rules.version)) {
      /* relaxed capture mode lets 2.28 - 2.30.6 register with the capture intact (measured on H200).
       * 2.27's symmetric registration fails and invalidates the capture even then, its local one
       * (a communicator without symmetric support) registers with the capture intact (both
       * measured): a fact of the symmetric path there. NCCLGUARD_CAPTURE=degrade: always. */
      if (ng_cfg.capture != NG_CAPTURE_RELAXED) r->arg_reason = NG_R_CAPTURING;
      else if (r->rules.version >= 22800) r->relaxed = 1;
      else r->facts |= 1u << NG_R_CAPTURING;
    }
  }
  /* Relaxed mode is this thread's: NCCL 2.28 - 2.30.6 run the symmetric registrations of several
   * communicators of one group each in a thread of its own (asyncJobLaunch, src/group.cc at v2.28.9-1,
   * v2.29.7-1), in CUDA's default capture mode, where they fail and invalidate the capture (one runs in
   * this thread). So a batch with more than one such communicator degrades under a capture, on every rank
   * (the reason is voted). From NCCL's source and the fake that follows it (tests/fake/README.md). */
  int jobs = 0;
  for (int i = 0; i < n; i++) {
    if (!relaxed_job(&reqs[i])) continue;
    int seen = 0;
    for (int j = 0; j < i && !seen; j++) seen = reqs[j].comm == reqs[i].comm && relaxed_job(&reqs[j]);
    jobs += !seen;
  }
  if (jobs > 1)
    for (int i = 0; i < n; i++)
      if (relaxed_job(&reqs[i])) {
        reqs[i].relaxed = 0;
        reqs[i].arg_reason = NG_R_CAPTURING;
      }
}

/* ---- 4. vote and decide ---------------------------------------------------------------------- */
static void vote_fill(struct ng_vote* vt, const struct ng_regreq* r) {
  memset(vt, 0, sizeof *vt);
  vt->comm = r->comm;
  vt->dev = r->cv.dev;
  int inv = r->cv.nranks - r->cv.rank;
  if (r->arg_reason) {
    vt->v[r->arg_reason] = 1;
    vt->v[NG_VOTE_FIRST_BAD] = inv;
  }
  vt->v[r->rules.sym == NG_SYM_YES ? NG_VOTE_SYM_YES : r->rules.sym == NG_SYM_NO ? NG_VOTE_SYM_NO
                                                                                 : NG_VOTE_SYM_UNKNOWN] = 1;
  vt->v[NG_VOTE_ONE_NODE] = r->rules.one_node;
  vt->v[NG_VOTE_FACTS] = (int32_t)r->facts;
  if (r->facts) vt->v[NG_VOTE_FACTS_FIRST_BAD] = inv;
  vt->v[NG_VOTE_NO_REPEAT] = r->repeat_of ? 0 : 1;
  /* the size NCCL 2.28+ places in the symmetric space is the allocation's (symMemoryObtain takes
   * cuMemGetAddressRange's size, not the window's; 2.27 maps the whole allocation too) */
  uint64_t sz = (uint64_t)r->alloc_size;
  for (int p = 0; p < 3; p++) {
    int32_t piece = (int32_t)((sz >> (22 * p)) & 0x3fffff);
    vt->v[NG_VOTE_SIZE_P0 + p] = piece;
    vt->v[NG_VOTE_NSIZE_P0 + p] = -piece;
  }
  uint64_t units = sz / 4096 + (sz % 4096 != 0);
  int32_t u = units > 0x7fffffffu ? 0x7fffffff : (int32_t)units;
  vt->v[NG_VOTE_SIZE_4K] = u;
  vt->v[NG_VOTE_NSIZE_4K] = -u;
  vt->v[NG_VOTE_WFLAGS] = r->flags;
  vt->v[NG_VOTE_NWFLAGS] = ~r->flags; /* ~x orders as -x does, and is defined for INT_MIN too */
  vt->v[NG_VOTE_SIZE_UNKNOWN] = sz == 0;
  vt->v[NG_VOTE_ALLOC_LIVE] = r->alloc_live == 1;
  vt->v[NG_VOTE_ALLOC_NEW] = r->alloc_live == 0;
  vt->v[NG_VOTE_GROUP_FAILED] = r->app_group_failed;
  vt->v[NG_VOTE_GROUP_OK] = !r->app_group_failed;
}

/* The window's layout against its peers' (the reduced votes): LAYOUT_MISMATCH when the flags differ, or
 * the sizes differ on a communicator with symmetric support where the loaded NCCL needs them equal (before
 * 2.30.7 each rank takes its window's place in the symmetric space from its own size: symMemoryObtain ->
 * ncclSpaceAlloc at v2.28.9-1, for every window of such a communicator whatever its flags, which gate only
 * the symmetric kernels' set-up; 2.27's symmetric registration task alike: so a window without
 * NCCL_WIN_COLL_SYMMETRIC of unequal sizes moves every later window's place; 2.30.7 reserves the largest
 * size among the ranks, lsaMaxSize). Unequal sizes that NCCL takes are logged at INFO. */
static int layout_check(struct ng_regreq* r, const int32_t* v, int sym) {
  int flags_differ = v[NG_VOTE_WFLAGS] != ~v[NG_VOTE_NWFLAGS];
  int sizes_differ = 0;
  if (!v[NG_VOTE_SIZE_UNKNOWN]) /* (where a rank cannot tell, NCCL decides, as without ncclguard) */
    for (int p = 0; p < 3; p++) sizes_differ |= v[NG_VOTE_SIZE_P0 + p] != -v[NG_VOTE_NSIZE_P0 + p];
  if (!flags_differ && v[NG_VOTE_ALLOC_LIVE] && v[NG_VOTE_ALLOC_NEW] && sym && ng_nccl_version() < 23007) {
    /* NCCL before 2.30.7 reuses the place of an allocation it already placed (symMemoryObtain's lookup at
     * v2.28.9-1 - v2.30.4-1): a window in such an allocation on some ranks and in a new one on others puts
     * this window and every later one at different places on the ranks */
    ng_log_msg(NG_LOG_WARN, r->cv.dev, "layout",
               "the ranks of communicator %p registered at step %d a window in an allocation that already holds one "
               "of their windows on some ranks and in a new allocation on others (this rank, %d: %s): the loaded NCCL "
               "places a new allocation and reuses the place of one it placed (before 2.30.7), so this and every "
               "later window would sit at different places and symmetric collectives would read the wrong memory; "
               "refused on every rank", (void*)r->comm, r->seq, r->cv.rank,
               r->alloc_live == 1 ? "an allocation it placed" : r->alloc_live == 0 ? "a new allocation" : "unknown");
    return NG_R_LAYOUT_MISMATCH;
  }
  if (!flags_differ && !sizes_differ) return NG_R_OK;
  int refuse = flags_differ || (sizes_differ && sym && ng_nccl_version() < 23007);
  double lo = (double)-v[NG_VOTE_NSIZE_4K] * 4096, hi = (double)v[NG_VOTE_SIZE_4K] * 4096;
  char msg[480];
  if (flags_differ)
    snprintf(msg, sizeof msg, "the ranks of communicator %p registered windows with different flags at step %d "
             "(from %d to %d; this rank, %d: flags=%d, size=%zu): NCCL does not exchange flags, and the ranks would "
             "fall out of step in its exchanges; a window symmetric on some ranks only is refused on every rank",
             (void*)r->comm, r->seq, ~v[NG_VOTE_NWFLAGS], v[NG_VOTE_WFLAGS], r->cv.rank, r->flags, r->size);
  else
    snprintf(msg, sizeof msg, "the ranks of communicator %p registered windows in allocations of different sizes at "
             "step %d: from %.0f to %.0f bytes (4 KiB units; this rank, %d: window %zu bytes in an allocation of %zu)%s",
             (void*)r->comm, r->seq, lo, hi, r->cv.rank, r->size, r->alloc_size,
             refuse ? ": the loaded NCCL places each rank's window by its own size (before 2.30.7, whatever the "
                      "window's flags), so this and every later window would sit at different places and symmetric "
                      "collectives would read the wrong memory; refused on every rank"
             : !sym ? ": no symmetric support here, NCCL takes it as it is"
                    : ": NCCL 2.30.7+ reserves the largest of them on every rank, so it is registered");
  ng_log_msg(refuse ? NG_LOG_WARN : NG_LOG_INFO, r->cv.dev, "layout", "%s", msg);
  return refuse ? NG_R_LAYOUT_MISMATCH : NG_R_OK;
}

/* THE decision, from the reduced votes alone (so every rank takes the same one). */
static void decide(struct ng_regreq* r, const struct ng_vote* vt) {
  const int32_t* v = vt->v;
  if (v[NG_VOTE_GROUP_FAILED]) {
    /* an application group holding this registration failed on some rank, and NCCL dropped it there: no
     * rank registers it (NCCL alone: the others would wait for that rank in the registration's exchange) */
    r->local_reason = r->app_group_failed ? NG_R_GROUP_FAILED : NG_R_OK;
    r->agreed_reason = NG_R_GROUP_FAILED;
    r->decision = NG_D_ERROR;
    r->result = ncclInvalidUsage;
    /* ... on some ranks only: the collectives of that group are pending on the ranks where it went ahead and
     * dropped where it failed, so the application's next collective on this communicator would pair with a
     * peer's pending one (wrong data, no error). Every rank knows it from the vote: each stops the
     * communicator (revoked where NCCL can), an error on every rank instead */
    if (v[NG_VOTE_GROUP_OK]) ng_stop_comm(r->comm, r->cv.gen, r->cv.dev, NG_R_GROUP_FAILED, "an application group failed on some ranks only");
    else r->group_failed_everywhere = 1;
    return;
  }
  unsigned always = 0;
  for (int k = 1; k < NG_NREASONS; k++)
    if (v[k]) always |= 1u << k;
  /* symmetric path on every rank, by every rank's rules (and on one host where they need it) */
  int sym = v[NG_VOTE_SYM_YES] && !v[NG_VOTE_SYM_NO] && !v[NG_VOTE_SYM_UNKNOWN] &&
            (!v[NG_VOTE_ONE_NODE] || vt->one_host == 1);
  r->sym_all = sym;
  unsigned facts = (unsigned)v[NG_VOTE_FACTS];
  int reason = lowest_reason(always), bad = v[NG_VOTE_FIRST_BAD];
  if (!reason && sym && facts) reason = lowest_reason(facts), bad = v[NG_VOTE_FACTS_FIRST_BAD];
  if (!reason && (reason = layout_check(r, v, sym))) { /* every rank's own reason: one layout, seen alike */
    r->local_reason = reason;
    fallback(r, reason, reason, -1);
    return;
  }
  /* (2.28.3's "yes" holds on one host only: ranks on several hosts have no symmetric support anywhere, NCCL
   * registers locally on every rank and nobody waits) */
  if (!reason && v[NG_VOTE_SYM_YES] && v[NG_VOTE_SYM_NO] && (v[NG_VOTE_WFLAGS] & NG_WIN_COLL_SYMMETRIC) &&
      ng_nccl_version() >= 22800 && !(v[NG_VOTE_ONE_NODE] && vt->one_host == 0)) {
    /* symmetric support on some ranks only: NCCL 2.28+ answers a rank without it locally (2.29+: success with a
     * NULL window; 2.28: a local handle) while the others wait for it in the registration's exchange (a hang;
     * torchcomms#4036, sglang#32200). One answer on every rank, before NCCL: NULL */
    r->agreed_reason = NG_R_NULL_WINDOW;
    r->local_reason = r->rules.sym == NG_SYM_NO ? NG_R_NULL_WINDOW : NG_R_OK;
    /* (an error, not a NULL window, where device code reads this communicator's windows) */
    if (ng_cfg.null_window == NG_NULLWIN_ERROR || r->cv.has_devcomm) r->decision = NG_D_ERROR, r->result = ncclInvalidUsage;
    else r->decision = NG_D_DEGRADE, r->result = ncclSuccess, *r->win = NULL;
    char msg[700];
    snprintf(msg, sizeof msg, "symmetric support on some ranks of this communicator only (here: %s): NCCL would give "
             "the ranks without it a NULL window (2.28: a local one) and leave the others waiting for them; every rank "
             "takes a NULL window instead. %s", r->rules.sym == NG_SYM_NO ? "none" : "yes",
             ng_reason_advice(NG_R_NULL_WINDOW));
    ng_log_msg(NG_LOG_WARN, r->cv.dev, "symmetric", "communicator %p, step %d: %s", (void*)r->comm, r->seq, msg);
    return;
  }
  if (!reason && !v[NG_VOTE_NO_REPEAT] && r->repeat_of) {
    /* every rank has a live window registered with exactly these arguments (agreed: one rank serving the
     * repeat while a peer calls NCCL would leave that peer in NCCL's exchange): served from it */
    r->decision = NG_D_REUSE;
    r->result = ncclSuccess;
    *r->win = r->repeat_of;
    return;
  }
  if (!reason) {
    if (facts && ng_log_on(NG_LOG_INFO)) {
      char msg[400];
      snprintf(msg, sizeof msg, "NCCL's symmetric path would refuse this buffer (%s), but %s: the buffer goes to "
               "NCCL as it would without ncclguard (%s)", ng_reason_name(lowest_reason(facts)),
               v[NG_VOTE_SYM_NO] && !v[NG_VOTE_SYM_YES] ? "this communicator does not take it"
               : v[NG_VOTE_SYM_YES] && v[NG_VOTE_ONE_NODE] && vt->one_host == 0 ? "its ranks span several hosts"
                                                                           : "ncclguard cannot tell whether it does",
               r->rules.why);
      ng_log_reg(r, NG_LOG_INFO, msg);
    }
    return;
  }
  /* this rank's own reason among those that count (the log says peer_<reason> otherwise) */
  r->local_reason = lowest_reason((r->arg_reason ? 1u << r->arg_reason : 0u) | (sym ? r->facts : 0u));
  fallback(r, r->local_reason ? r->local_reason : reason, reason, bad ? r->cv.nranks - bad : -1);
}

static void vote_failed(struct ng_regreq* r, const struct ng_vote* vt, ncclResult_t a) {
  int reason = vt->status == NG_AGREE_TIMEOUT ? NG_R_TIMEOUT : vt->status == NG_AGREE_STEP ? NG_R_OUT_OF_STEP
               : vt->status == NG_AGREE_ABORTED ? NG_R_COMM_DESTROYED
               : vt->status == NG_AGREE_SETTINGS ? NG_R_SETTINGS_MISMATCH : NG_R_AGREE_FAILED;
  error_out(r, reason, vt->status == NG_AGREE_SETTINGS ? ncclInvalidUsage : a == ncclSuccess ? ncclInternalError : a);
  r->local_reason = reason;
}

static void phase_vote(struct ng_regreq* reqs, int n, struct ng_vote* votes) {
  int nv = 0;
  for (int i = 0; i < n; i++)
    if (reqs[i].decision != NG_D_ERROR) vote_fill(&votes[nv++], &reqs[i]);
  ncclResult_t a = ng_agree(votes, nv, "registration");
  for (int i = 0, k = 0; i < n; i++) {
    struct ng_regreq* r = &reqs[i];
    if (r->decision == NG_D_ERROR) continue;
    struct ng_vote* vt = &votes[k++];
    struct ng_commview now;
    ng_reg_comm_get(r->comm, &now);
    r->cv.cid = now.cid; /* the round may have given it the name its ranks agree on */
    if (vt->status != NG_AGREE_OK) vote_failed(r, vt, a);
    else decide(r, vt);
  }
}

static int voted(const struct ng_regreq* r) {
  /* in the vote and through it: registering, degraded, or refused by the agreed decision */
  return r->decision == NG_D_REGISTER || r->decision == NG_D_DEGRADE ||
         (r->decision == NG_D_ERROR && r->agreed_reason != NG_R_TIMEOUT && r->agreed_reason != NG_R_OUT_OF_STEP &&
          r->agreed_reason != NG_R_COMM_DESTROYED && r->agreed_reason != NG_R_COMM_BROKEN &&
          r->agreed_reason != NG_R_NOT_READY && r->agreed_reason != NG_R_NCCL_ERROR &&
          r->agreed_reason != NG_R_AGREE_FAILED);
}

/* Does communicator `comm` register anything in this batch (some request on it decided REGISTER)? The
 * decision comes from that communicator's reduced votes alone, so every rank of it answers alike. */
static int comm_registers(const struct ng_regreq* reqs, int n, ncclComm_t comm) {
  for (int j = 0; j < n; j++)
    if (reqs[j].comm == comm && reqs[j].decision == NG_D_REGISTER) return 1;
  return 0;
}

/* The "go" round. It keeps a rank whose vote paired with the stale vote of a rank that gave up out of
 * NCCL's registration. Where NCCL can revoke (2.28.7+) the rank that gives up revokes, which stops its
 * stale all-reduce on the GPU: the late vote then has no partner and times out itself, and the go round
 * is skipped (it costs one all-reduce per registration). It runs per communicator: on a communicator
 * that registers something in this batch, over every request of it that went through the vote (the same
 * set on every rank of that communicator). A batch is only a way to share the round: a communicator that
 * registers nothing here has no go round, whatever the batch's other communicators do (its peers'
 * batches may hold nothing else, and a round they do not run would pair with their next collective). */
static void phase_go(struct ng_regreq* reqs, int n, struct ng_vote* votes) {
  if (ng_can_revoke()) return;
  int nv = 0;
  for (int i = 0; i < n; i++) /* (decided before the round: the round's failures change decisions) */
    reqs[i].in_go = voted(&reqs[i]) && comm_registers(reqs, n, reqs[i].comm);
  for (int i = 0; i < n; i++) {
    if (!reqs[i].in_go) continue;
    memset(&votes[nv], 0, sizeof votes[nv]);
    votes[nv].comm = reqs[i].comm;
    votes[nv].dev = reqs[i].cv.dev;
    nv++;
  }
  if (!nv) return;
  ncclResult_t a = ng_agree_after(votes, nv, "registration go");
  for (int i = 0, k = 0; i < n; i++) {
    if (!reqs[i].in_go) continue;
    struct ng_vote* vt = &votes[k++];
    if (vt->status == NG_AGREE_OK || reqs[i].decision != NG_D_REGISTER) continue;
    vote_failed(&reqs[i], vt, a);
  }
}

/* ---- 5. register ----------------------------------------------------------------------------- */
/* The real call for one request outside a group, retried where that can succeed. */
static ncclResult_t register_one(struct ng_regreq* r) {
  ncclResult_t res = ncclSuccess;
  for (int attempt = 0;; attempt++) {
    double t = ng_now_us();
    if (r->win) *r->win = NULL; /* NCCL may succeed without writing it (2.28, no symmetric support and
                                 * NCCL_LOCAL_REGISTER=0): ncclguard never reads the caller's old value */
    NG_CALL(res, ncclCommWindowRegister, r->comm, r->buff, r->size, r->win, r->flags);
    /* A nonblocking communicator may return ncclSuccess or ncclInProgress and finish in the
     * background: nothing else may be issued on it before ncclCommGetAsyncError says so. */
    if (res == ncclSuccess || res == ncclInProgress) res = ng_wait_ready(r->comm, r->cv.dev);
    r->nccl_us += ng_now_us() - t;
    if (res != ncclInvalidArgument || attempt >= ng_cfg.retries || !ng_reg_comm_usable(r->comm, r->cv.gen)) break;
    /* Invalid argument from a communicator that is not ready yet is the one retryable case. */
    ncclResult_t st = ncclSuccess, q;
    NG_CALL(q, ncclCommGetAsyncError, r->comm, &st);
    if (q != ncclSuccess || st != ncclInProgress) break;
    ng_stat_add(NG_ST_RETRIED, 1);
    r->decision = NG_D_RETRY;
    ng_log_reg(r, NG_LOG_INFO, "communicator not ready: waiting, then registering again");
    r->decision = NG_D_REGISTER;
    if (ng_wait_ready(r->comm, r->cv.dev) != ncclSuccess) break;
  }
  return res;
}

static void phase_register(struct ng_regreq* reqs, int n) {
  int ngo = 0, last = -1, relaxed = 0;
  for (int i = 0; i < n; i++)
    if (reqs[i].decision == NG_D_REGISTER && ng_reg_comm_usable(reqs[i].comm, reqs[i].cv.gen))
      ngo++, last = i, relaxed |= reqs[i].relaxed;
    else if (reqs[i].decision == NG_D_REGISTER) error_out(&reqs[i], NG_R_COMM_DESTROYED, ncclInvalidUsage);
  if (!ngo) return;
  /* NCCL's registration waits on the host for every rank (bootstrap, no timeout): watched. Unwatched it
   * could wait without bound: this rank leaves instead, its peers' watchdogs end their wait. */
  /* (without revoke the watchdog cannot act: no watch, nothing to fail between the go round and NCCL) */
  struct watch* wds = ng_can_revoke() ? ng_calloc("policy.watch", (size_t)n, sizeof *wds) : NULL;
  if (!wds && ng_can_revoke()) {
    for (int i = 0; i < n; i++)
      if (reqs[i].decision == NG_D_REGISTER) {
        error_out(&reqs[i], NG_R_AGREE_FAILED, ncclSystemError);
        ng_give_up(reqs[i].comm, reqs[i].cv.gen, reqs[i].cv.dev, NG_R_AGREE_FAILED,
                   "out of host memory before NCCL's registration");
      }
    return;
  }
  int mode = 0, sw = relaxed && !ng_cuda_relaxed_capture(&mode);
  /* (a peer that met this rank in the vote may come up to NCCLGUARD_TIMEOUT later: ng_late_grace_us) */
  double ta = ng_now_us(), deadline = ng_deadline() + ng_late_grace_us();
  for (int i = 0; wds && i < n; i++)
    if (reqs[i].decision == NG_D_REGISTER)
      ng_watch_arm(&wds[i], reqs[i].comm, reqs[i].cv.dev, deadline, "ncclCommWindowRegister", reqs[i].seq,
                   ng_cfg.agree && reqs[i].cv.nranks > 1);
  double t0 = ng_now_us();
  if (ngo == 1 && n == 1) {
    reqs[last].result = register_one(&reqs[last]);
  } else {
    ncclResult_t r, e;
    NG_CALL(r, ncclGroupStart);
    for (int i = 0; i < n; i++) {
      if (reqs[i].decision != NG_D_REGISTER) continue;
      ncclResult_t ri = r == ncclSuccess ? ncclInternalError : r;
      if (r == ncclSuccess && reqs[i].win) *reqs[i].win = NULL; /* as in register_one */
      if (r == ncclSuccess) NG_CALL(ri, ncclCommWindowRegister, reqs[i].comm, reqs[i].buff, reqs[i].size,
                                    reqs[i].win, reqs[i].flags);
      reqs[i].result = ri;
    }
    e = r;
    if (r == ncclSuccess) NG_CALL(e, ncclGroupEnd); /* only a group that started is ended */
    for (int i = 0; i < n; i++) {
      struct ng_regreq* q = &reqs[i];
      if (q->decision != NG_D_REGISTER) continue;
      if (q->result == ncclSuccess && (e == ncclSuccess || e == ncclInProgress))
        q->result = ng_wait_ready(q->comm, q->cv.dev);
      else if (q->result == ncclSuccess) q->result = e;
    }
    for (int i = 0; i < n; i++) reqs[i].nccl_us = reqs[i].decision == NG_D_REGISTER ? ng_now_us() - t0 : 0;
  }
  double t1 = ng_now_us();
  for (int i = 0; wds && i < n; i++)
    if (reqs[i].decision == NG_D_REGISTER && ng_watch_disarm(&wds[i])) {
      if (reqs[i].result == ncclSuccess && *reqs[i].win) { /* never leak a live window */
        ncclResult_t d;
        NG_CALL(d, ncclCommWindowDeregister, reqs[i].comm, *reqs[i].win);
        (void)d;
      }
      error_out(&reqs[i], NG_R_TIMEOUT, ncclSystemError);
      reqs[i].local_reason = NG_R_TIMEOUT;
    }
  free(wds);
  if (sw) ng_cuda_restore_capture(mode);
  if (ng_log_on(NG_LOG_TRACE))
    ng_log_msg(NG_LOG_TRACE, reqs[last].cv.dev, "ncclCommWindowRegister",
               "registration step: %.1f us to arm the watchdog, %.1f us in NCCL, %.1f us to disarm", t0 - ta,
               reqs[last].nccl_us, ng_now_us() - t1);
}

/* ---- 6. outcome ------------------------------------------------------------------------------ */
/* NCCL itself failed on this rank: invalid-argument class degrades (or errors, by policy); any
 * other error means NCCL reports the communicator broken, and degrading would hide that. Every
 * rank of the outcome round takes the same decision: the worst result is agreed. */
static void nccl_failed(struct ng_regreq* r, ncclResult_t agreed, int degradable, int here) {
  ncclResult_t own = r->result; /* this rank's NCCL result (where NCCL failed here) */
  if (here)
    ng_log_msg(NG_LOG_WARN, r->cv.dev, "ncclCommWindowRegister", "NCCL failed to register: %s %s",
               ng_result_name(r->result), ng_reg_comm_usable(r->comm, r->cv.gen) ? ng_last_error(r->comm) : "");
  int why = here && r->space_full ? NG_R_SYM_SPACE_FULL : NG_R_NCCL_ERROR;
  r->local_reason = here ? why : NG_R_OK;
  fallback(r, why, why, -1);
  if (!degradable && r->decision == NG_D_DEGRADE) r->decision = NG_D_ERROR;
  /* NCCL's own error code, never replaced: this rank's where NCCL failed here, else the worst agreed */
  if (r->decision == NG_D_ERROR) r->result = here && own != ncclSuccess ? own : agreed;
}

/* NCCL without reuse ran out of symmetric address space (NVIDIA/nccl#2331): its "internal error" is a
 * resource limit that degrades like an invalid argument (the communicator is intact), named for what it is.
 * Every rank's space has the same size and sees the same registrations: they run out together. */
static void note_space_full(struct ng_regreq* r) {
  r->space_full = r->rules.no_reuse && r->result == ncclInternalError && ng_reg_comm_usable(r->comm, r->cv.gen) &&
                  strstr(ng_last_error(r->comm), "No suitable space") != NULL;
}
static int degradable_here(const struct ng_regreq* r) { return r->result == ncclInvalidArgument || r->space_full; }

/* Every rank runs the outcome round after NCCL's registration, on every NCCL version. NCCL 2.28.3 -
 * 2.30.x end a symmetric registration with a bootstrap barrier (src/dev_runtime.cc,
 * ncclDevrWindowRegisterInGroup), so success there implies success everywhere; but a rank can still fail
 * on its own after NCCL's part (a failed readiness query, an error NCCL returns before its barrier while
 * the peers wait in it until their watchdogs revoke): without a round that rank would fall back alone while
 * its peers keep their windows, two outcomes. The round costs one small all-reduce (tens of us beside
 * NCCL's milliseconds) and makes the outcome one on every rank. */
static void phase_outcome(struct ng_regreq* reqs, int n, struct ng_vote* votes, int use_agree) {
  int ngo = 0;
  for (int i = 0; i < n; i++) ngo += reqs[i].decision == NG_D_REGISTER;
  if (!ngo) return;
  for (int i = 0; i < n; i++)
    if (reqs[i].decision == NG_D_REGISTER && reqs[i].result != ncclSuccess) note_space_full(&reqs[i]);
  if (!use_agree) {
    for (int i = 0; i < n; i++)
      if (reqs[i].decision == NG_D_REGISTER && reqs[i].result != ncclSuccess)
        nccl_failed(&reqs[i], reqs[i].result, degradable_here(&reqs[i]), 1);
    return;
  }
  int nv = 0;
  for (int i = 0; i < n; i++) {
    if (reqs[i].decision != NG_D_REGISTER) continue;
    memset(&votes[nv], 0, sizeof votes[nv]);
    votes[nv].comm = reqs[i].comm;
    votes[nv].dev = reqs[i].cv.dev;
    /* the worst NCCL result anywhere: invalid argument (4) degrades, others (and ours) error */
    if (reqs[i].result != ncclSuccess) votes[nv].v[NG_VOTE_FAILED] = degradable_here(&reqs[i]) ? 1 : 2 + reqs[i].result;
    else votes[nv].v[*reqs[i].win ? NG_VOTE_REAL_WIN : NG_VOTE_NULL_WIN] = 1;
    nv++;
  }
  ncclResult_t a = ng_agree_after(votes, nv, "registration outcome");
  for (int i = 0, k = 0; i < n; i++) {
    struct ng_regreq* r = &reqs[i];
    if (r->decision != NG_D_REGISTER) continue;
    struct ng_vote* vt = &votes[k++];
    int ok_here = r->result == ncclSuccess;
    if (vt->status != NG_AGREE_OK) {
      /* The ranks cannot learn each other's outcome (the race of the last round: the peers' round may have
       * completed, and they keep the window). This rank returns an error and hands no window out, but the
       * window NCCL made stays registered inside NCCL (it ends it with the communicator): deregistered here
       * alone, the ranks' next windows would sit at different places of the symmetric space. Its channel is
       * stopped: no later registration on this communicator goes ahead on any rank. */
      vote_failed(r, vt, a);
      continue;
    }
    int32_t f = vt->v[NG_VOTE_FAILED];
    if (!f && ok_here && *r->win && vt->v[NG_VOTE_NULL_WIN] && ng_reg_comm_usable(r->comm, r->cv.gen)) {
      /* success with a NULL window on another rank and a window here (torchcomms#4036): one answer on every
       * rank, NULL, so that no rank runs symmetric kernels its peers cannot pair (deregistration is local) */
      ncclResult_t d;
      NG_CALL(d, ncclCommWindowDeregister, r->comm, *r->win);
      (void)d;
      *r->win = NULL;
      r->null_peer = 1;
      continue;
    }
    if (!f) continue;
    ncclResult_t worst = f == 1 ? ncclInvalidArgument : (ncclResult_t)(f - 2);
    if (ok_here && ng_reg_comm_usable(r->comm, r->cv.gen)) {
      /* NCCL failed on another rank: drop ours (deregistration is local) and fall back with it. */
      ncclResult_t d;
      NG_CALL(d, ncclCommWindowDeregister, r->comm, *r->win);
      (void)d;
    }
    nccl_failed(r, worst, f == 1, !ok_here);
  }
}

/* ---- NCCL's own NULL window (no symmetric support, 2.29+) --------------------------------------- */
static void phase_null_window(struct ng_regreq* reqs, int n) {
  for (int i = 0; i < n; i++) {
    struct ng_regreq* r = &reqs[i];
    if (r->decision != NG_D_REGISTER || r->result != ncclSuccess || *r->win) continue;
    r->agreed_reason = NG_R_NULL_WINDOW;
    r->local_reason = r->null_peer ? NG_R_OK : NG_R_NULL_WINDOW; /* peer_null_window where it was another rank's */
    if (ng_cfg.null_window == NG_NULLWIN_ERROR) {
      r->decision = NG_D_ERROR;
      r->result = ncclInvalidUsage;
    } else {
      /* the true cause where ncclguard knows it: 2.27's allocation checks (on every path), or the
       * rules' reading of why the communicator has no symmetric support */
      char msg[640];
      unsigned alloc = r->facts & ((1u << NG_R_MISALIGNED) | (1u << NG_R_OUT_OF_RANGE));
      if (r->null_peer)
        snprintf(msg, sizeof msg, "NCCL returned success with a NULL window on another rank and a window here: this "
                 "rank's window was deregistered again, so that every rank has the same answer (NULL). %s",
                 ng_reason_advice(NG_R_NULL_WINDOW));
      else if (r->rules.all_paths && alloc)
        snprintf(msg, sizeof msg, "NCCL returned success with a NULL window: %s",
                 ng_reason_advice(alloc & (1u << NG_R_MISALIGNED) ? NG_R_MISALIGNED : NG_R_OUT_OF_RANGE));
      else if (r->rules.sym != NG_SYM_YES && r->rules.why[0])
        snprintf(msg, sizeof msg, "%s; here: %s", ng_reason_advice(NG_R_NULL_WINDOW), r->rules.why);
      else
        snprintf(msg, sizeof msg, "%s", ng_reason_advice(NG_R_NULL_WINDOW));
      ng_log_reg(r, NG_LOG_WARN, msg);
    }
  }
}

static void report(struct ng_regreq* r) {
  char msg[1024];
  int reason = r->agreed_reason;
  switch (r->decision) {
    case NG_D_REGISTER:
      ng_stat_add(NG_ST_REGISTERED, 1);
      /* (a window the registry cannot record is still the application's: NCCL deregisters it) */
      if (*r->win) (void)ng_reg_win_add(*r->win, r->comm, r->buff, r->size, r->flags, r->seq);
      if (*r->win) {
        r->acct = 1;
        if (ng_reg_budget_crossed(r->comm, ng_cfg.window_budget, &r->comm_windows, &r->comm_bytes))
          ng_log_msg(NG_LOG_WARN, r->cv.dev, "budget", "communicator %p (rank %d): %d live windows register %zu bytes, "
                     "past NCCLGUARD_WINDOW_BUDGET=%.0f (this one, step %d: %zu bytes). Registered memory that keeps "
                     "growing ends in failed registrations (a window per shape or per step that is never "
                     "deregistered): deregister windows no longer used, or reuse them", (void*)r->comm, r->cv.rank,
                     r->comm_windows, r->comm_bytes, ng_cfg.window_budget, r->seq, r->size);
      }
      ng_log_reg(r, NG_LOG_INFO, "registered");
      return;
    case NG_D_REUSE: {
      ng_stat_add(NG_ST_REGISTERED, 1);
      int uses = ng_reg_win_ref(r->repeat_of, +1);
      snprintf(msg, sizeof msg, "an exact repeat of a live registration (same communicator, buffer, size and flags) on "
               "every rank: served from its window, now %d uses (NCCL %d would reserve symmetric address space of the "
               "whole allocation again, NVIDIA/nccl#2331); each use is deregistered on its own", uses, r->rules.version);
      ng_log_reg(r, NG_LOG_INFO, msg);
      return;
    }
    case NG_D_DEGRADE:
      ng_stat_add(NG_ST_DEGRADED, 1);
      snprintf(msg, sizeof msg, "%s: %s. Every rank uses this buffer unregistered (correct, without the symmetric "
               "fast path); *win = NULL",
               reason == r->local_reason ? "this rank" : "another rank", ng_reason_advice(reason));
      break;
    default:
      ng_stat_add(NG_ST_ERRORS, 1);
      if (reason == NG_R_TIMEOUT || reason == NG_R_OUT_OF_STEP || reason == NG_R_COMM_BROKEN ||
          reason == NG_R_COMM_DESTROYED || reason == NG_R_NOT_READY || reason == NG_R_AGREE_FAILED)
        snprintf(msg, sizeof msg, "not registered: %s", ng_reason_advice(reason));
      else if (r->cv.has_devcomm && reason != NG_R_NCCL_ERROR && reason != NG_R_NULL_WIN)
        snprintf(msg, sizeof msg, "registration cannot go ahead (%s: %s) and %s", ng_reason_name(reason),
                 ng_reason_advice(reason), ng_reason_advice(NG_R_HAS_DEVCOMM));
      else
        snprintf(msg, sizeof msg, "registration refused on every rank (%s): %s", ng_reason_name(reason),
                 ng_reason_advice(reason));
      break;
  }
  ng_log_reg(r, NG_LOG_WARN, msg);
}

/* Requests that leave before any round (the one exit, docs/DESIGN.md): refused with `reason` and `res`,
 * *win NULL, logged; each communicator given up (ng_give_up) unless `keep` (its peers leave alike). */
static ncclResult_t abandon(struct ng_regreq* reqs, int n, int reason, ncclResult_t res, const char* cause,
                            const int* keep) {
  for (int i = 0; i < n; i++) {
    struct ng_regreq* r = &reqs[i];
    ng_check_reg_args(r);
    r->first_bad_rank = -1;
    r->decision = NG_D_ERROR;
    r->result = res;
    r->local_reason = r->agreed_reason = reason;
    if (r->win) *r->win = NULL;
    int seen = 0;
    for (int j = 0; j < i && !seen; j++) seen = reqs[j].comm == r->comm;
    int given_up = r->comm && !(keep && keep[i]) && r->cv.nranks != 1;
    if (given_up && !seen) ng_give_up(r->comm, r->cv.gen, r->cv.dev, reason, cause);
    /* (its own application group failed, and no vote said where: the communicator itself, as after a step) */
    if (r->app_group_failed && r->comm && r->cv.nranks != 1 && !seen)
      ng_stop_comm(r->comm, r->cv.gen, r->cv.dev, NG_R_GROUP_FAILED, "this rank's application group failed");
    ng_stat_add(NG_ST_ERRORS, 1);
    char msg[768];
    snprintf(msg, sizeof msg, "not registered (%s): %s%s", cause, ng_reason_advice(reason),
             given_up ? ". ncclguard cannot run the agreement its peers run: the communicator is given up (revoked "
                        "where NCCL can); abort it on every rank and create a new one" : "");
    ng_log_reg(r, NG_LOG_WARN, msg);
  }
  return res;
}

/* ---- one step: the phases for the registrations of one step (one per communicator) --------------- */
static void run_step(struct ng_regreq* reqs, int n, struct ng_vote* votes, const struct ng_regreq* prior, int nprior,
                     int use_agree) {
  phase_prepare(reqs, n);
  double t = ng_now_us(), agree_us = 0;
  phase_preflight(reqs, n, prior, nprior);
  if (use_agree) {
    phase_vote(reqs, n, votes);
    phase_go(reqs, n, votes);
    agree_us += ng_now_us() - t;
  } else {
    /* each rank alone: only its own facts, with its own rules */
    for (int i = 0; i < n; i++) {
      struct ng_regreq* r = &reqs[i];
      if (r->decision == NG_D_ERROR) continue;
      /* 2.27 under a capture: its symmetric registration would invalidate the capture, which cannot
       * be undone; without a round the one-host condition is unknown, so this rank's rules decide */
      if (!r->arg_reason && (r->facts & (1u << NG_R_CAPTURING)) && r->rules.sym == NG_SYM_YES)
        r->arg_reason = NG_R_CAPTURING;
      vote_fill(&votes[i], r);
      votes[i].v[NG_VOTE_NO_REPEAT] = 1; /* a repeat is served only where every rank agreed to */
      votes[i].one_host = r->rules.one_node ? -1 : 1; /* cannot know (-1): not symmetric-for-sure */
      decide(r, &votes[i]);
    }
  }
  for (int i = 0; i < n; i++) reqs[i].nccl_us = 0;
  phase_register(reqs, n); /* sets nccl_us: the time in NCCL's calls (and its readiness, nonblocking) */
  t = ng_now_us();
  phase_outcome(reqs, n, votes, use_agree);
  agree_us += ng_now_us() - t;
  for (int i = 0; i < n; i++) reqs[i].agree_us = agree_us;
  phase_null_window(reqs, n);
}

/* The step of each registration: the k-th registration of a batch on a communicator is in step k, and the
 * registrations on several ranks of one communicator that this thread drives (one clique: the same cid) share
 * their step, since their rounds and NCCL's registration must meet in one group. Steps run in the order of
 * their first call: a rank that grouped W1 and W2 and a rank that registered them one at a time run the same
 * rounds in the same order, and NCCL's registrations too. Returns the number of steps; step[i] for each. */
static int cut_steps(const struct ng_regreq* reqs, int n, int* step) {
  int nsteps = 0;
  for (int i = 0; i < n; i++) {
    int k = 0; /* earlier registrations on this very communicator */
    for (int j = 0; j < i; j++) k += reqs[j].comm == reqs[i].comm;
    uint64_t ci = reqs[i].cv.known ? reqs[i].cv.cid : 0;
    step[i] = -1;
    for (int j = 0; j < i && step[i] < 0; j++) { /* a registration of the same clique and index: its step */
      uint64_t cj = reqs[j].cv.known ? reqs[j].cv.cid : 0;
      if (reqs[j].comm == reqs[i].comm || !ci || cj != ci) continue;
      int kj = 0;
      for (int m = 0; m < j; m++) kj += reqs[m].comm == reqs[j].comm;
      if (kj == k) step[i] = step[j];
    }
    if (step[i] < 0) step[i] = nsteps++;
  }
  return nsteps;
}

ncclResult_t ng_policy_register(struct ng_regreq* reqs, int n) {
  if (n <= 0) return ncclSuccess;
  struct ng_vote* votes = ng_calloc("policy.votes", (size_t)n, sizeof *votes);
  int* step = ng_calloc("policy.steps", 2 * (size_t)n, sizeof *step); /* each one's step; then in step order */
  struct ng_regreq* tmp = n > 1 ? ng_calloc("policy.order", (size_t)n, sizeof *tmp) : NULL;
  if (!votes || !step || (n > 1 && !tmp)) {
    free(votes), free(step), free(tmp);
    return abandon(reqs, n, NG_R_AGREE_FAILED, ncclSystemError, "out of host memory", NULL);
  }
  ng_log_source();
  int use_agree = ng_cfg.agree && ng_cuda_ok();
  for (int i = 0; i < n; i++) ng_check_reg_args(&reqs[i]); /* the views, for the steps' cliques */
  int nsteps = cut_steps(reqs, n, step);
  if (nsteps > 1) { /* the batch in step order (stable: each step's registrations in their call order) */
    int k = 0;
    for (int s = 0; s < nsteps; s++)
      for (int i = 0; i < n; i++)
        if (step[i] == s) tmp[k] = reqs[i], step[n + k] = s, k++;
    memcpy(reqs, tmp, (size_t)n * sizeof *reqs);
    memcpy(step, step + n, (size_t)n * sizeof *step);
  }
  free(tmp);
  for (int a = 0; a < n;) {
    int b = a;
    while (b < n && step[b] == step[a]) b++;
    run_step(reqs + a, b - a, votes + a, reqs, a, use_agree);
    a = b;
  }
  free(step);
  /* A rank whose own application group failed and that did not learn from the vote that it failed on every
   * rank (the round failed, or no round ran) cannot know that its peers' groups did not go ahead, with their
   * collectives pending: it stops the communicator itself (revoked where NCCL can), so that its next collective
   * ends with an error instead of pairing with a peer's pending one */
  for (int i = 0; i < n; i++)
    if (reqs[i].app_group_failed && !reqs[i].group_failed_everywhere && reqs[i].comm && reqs[i].cv.nranks != 1)
      ng_stop_comm(reqs[i].comm, reqs[i].cv.gen, reqs[i].cv.dev, NG_R_GROUP_FAILED, "this rank's application group failed");
  /* A batch is one application group, and ncclGroupEnd returns one result, its first error. A registration
   * that failed rolls back the rest of its own communicator's part of the batch for the application (every
   * one an error, *win NULL), so that no window of that communicator is handed out from the failed group. The
   * windows NCCL made stay registered in NCCL (it ends them with the communicator): a peer that registered
   * the same windows one at a time, or in another group, has them, and a window deregistered on one rank and
   * kept on another would put the ranks' next windows at different places in the symmetric space (wrong data
   * in symmetric kernels). The batch's other communicators keep theirs (*win set). */
  for (int i = 0; n > 1 && i < n; i++) {
    struct ng_regreq* r = &reqs[i];
    if (r->result != ncclSuccess ||
        (r->decision != NG_D_REGISTER && r->decision != NG_D_REUSE && r->decision != NG_D_DEGRADE))
      continue;
    ncclResult_t cres = ncclSuccess;
    for (int j = 0; j < n && cres == ncclSuccess; j++)
      if (reqs[j].comm == r->comm) cres = reqs[j].result;
    if (cres == ncclSuccess) continue;
    r->decision = NG_D_ERROR;
    r->result = cres;
    r->local_reason = r->agreed_reason = NG_R_GROUP_ROLLBACK;
  }
  ncclResult_t ret = ncclSuccess;
  for (int i = 0; i < n; i++) {
    struct ng_regreq* r = &reqs[i];
    /* an error never leaves *win set: a window NCCL wrote and ncclguard deregistered again would be
     * deregistered a second time by the application's cleanup */
    if (r->result != ncclSuccess && r->win) *r->win = NULL;
    /* The communicator's count of NULL windows (a device communicator is refused while it has some) follows
     * the windows handed out: a success with *win NULL (degraded, or NCCL's own NULL window), counted here
     * once, after every change of the batch's outcome; its deregistration takes it away, and the count goes
     * with the communicator. An error hands out nothing, and neither does an empty or NULL buffer (NCCL 2.28
     * answers it with success and registers nothing: no window that device code could be given). */
    if (r->result == ncclSuccess && r->win && !*r->win && (r->decision == NG_D_DEGRADE || r->decision == NG_D_REGISTER) &&
        r->agreed_reason != NG_R_ZERO_SIZE && r->agreed_reason != NG_R_NULL_BUFF)
      ng_reg_comm_mark(r->comm, 0, 0, 1);
    report(r);
    if (ret == ncclSuccess && r->result != ncclSuccess) ret = r->result;
  }
  free(votes);
  return ret;
}
