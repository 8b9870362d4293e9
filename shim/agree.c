/* Ready-wait and the agreement round (the protocol is in docs/DESIGN.md, "The agreement").
 *
 * A round is one small all-reduce (max over int32) per communicator, on the communicator itself,
 * on a private stream and buffer: no side channel, so it works on any launcher and any number of
 * nodes. Its vector is a header followed by NG_NVOTE values per registration of the batch on that
 * communicator, so a group of any size costs one all-reduce per communicator. The header carries
 * the round number and the number of registrations as (x, -x) pairs: after the max-reduction every
 * rank knows whether all ranks ran the same round with the same batch ("in step"). Several
 * communicators (a group's queue) are reduced in one NCCL group, so one thread driving several
 * GPUs cannot deadlock.
 *
 * Every wait is a poll bounded by one deadline (NCCLGUARD_TIMEOUT from the start of the round). A
 * round that times out, runs out of step or sees its communicator aborted leaves the communicator
 * "broken": ncclguard refuses every later registration on it (the error says to abort it), since
 * its queued all-reduce would otherwise pair with a peer's next round. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "guard.h"

/* header: round, -round, count, -count, then the host id as 4 x 16 bits, then their negations, then
 * the communicator's cid likewise (the ranks that named it differently adopt the largest: a rank that
 * joined through ncclCommGrow knows only the unique id, the others only the parent) */
#define NG_HDR_IDS 20
/* ... then, as (x, -x) pairs, the settings that shape a decision (every rank must decide alike: a
 * rank that degrades while its peer returns an error leaves them out of step) */
static const char* const set_names[] = {"NCCLGUARD_ON_FAILURE", "NCCLGUARD_NULL_WINDOW", "NCCLGUARD_CAPTURE",
                                        "NCCLGUARD_PREFLIGHT",  "NCCLGUARD_WARMUP",      "NCCLGUARD_RETRIES",
                                        "the NCCL version"};
#define NG_NSET ((int)(sizeof set_names / sizeof set_names[0]))
#define NG_HDR (NG_HDR_IDS + 2 * 7)
_Static_assert(NG_NSET == 7, "header layout");
static void settings(int32_t* v) {
  v[0] = ng_cfg.on_failure, v[1] = ng_cfg.null_window, v[2] = ng_cfg.capture, v[3] = ng_cfg.preflight;
  v[4] = ng_cfg.warmup, v[5] = ng_cfg.retries, v[6] = ng_nccl_version();
}

static void nap(double* us) {
  struct timespec ts = {0, (long)(*us * 1000)};
  nanosleep(&ts, NULL);
  if (*us < 2000) *us *= 2;
}

/* This host, as NCCL names a node (getHostHashOnce, src/misc/utils.cc at v2.27.7-1, v2.28.3-1, v2.28.9-1,
 * v2.30.7-1): NCCL_HOSTID when it is set at all (empty too), whole, in place of everything else; else the
 * host name ("unknown" if it cannot be read) followed by the first word of /proc's boot id; at most 1023
 * bytes either way. Ranks whose strings differ are different nodes to NCCL (its nNodes), ranks of one string
 * one node: processes that share a machine but not NCCL_HOSTID are hosts of their own. NCCL takes it once
 * per process, at its first communicator, after putting its configuration files into the environment; this
 * runs at the first round, on a communicator that exists, so it reads what NCCL read. */
static uint64_t host_id;
static pthread_once_t host_once = PTHREAD_ONCE_INIT;
static int blank(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); } /* isspace in the C locale */
static void host_init(void) {
  char buf[1024] = "";
  const char* id = secure_getenv("NCCL_HOSTID"); /* (a setuid program does not preload ncclguard at all) */
  if (id) {
    snprintf(buf, sizeof buf, "%s", id);
  } else {
    if (gethostname(buf, sizeof buf) != 0) snprintf(buf, sizeof buf, "unknown");
    buf[sizeof buf - 1] = 0;
    size_t l = strlen(buf), n = 0, i = 0;
    char b[128];
    int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      ssize_t k = read(fd, b, sizeof b);
      n = k > 0 ? (size_t)k : 0;
      close(fd);
    }
    while (i < n && blank(b[i])) i++; /* its first word, as NCCL's fscanf("%ms") reads it */
    while (i < n && !blank(b[i]) && l < sizeof buf - 1) buf[l++] = b[i++];
    buf[l] = 0;
  }
  host_id = ng_fnv(NG_FNV_INIT, buf, strlen(buf));
}

double ng_deadline(void) { return ng_now_us() + ng_cfg.timeout_s * 1e6; }

ncclResult_t ng_wait_ready_until(ncclComm_t comm, int dev, double deadline) {
  double t0 = ng_now_us(), delay = 20;
  ncclResult_t st = ncclInProgress;
  int logged = 0;
  for (;;) {
    if (!ng_reg_comm_usable(comm, 0)) return ncclInvalidUsage; /* aborted meanwhile: no more NCCL calls */
    ncclResult_t r;
    NG_CALL(r, ncclCommGetAsyncError, comm, &st);
    if (r != ncclSuccess) return r;
    if (st != ncclInProgress) break;
    if (!logged && ng_now_us() - t0 > 1000) {
      ng_log_msg(NG_LOG_INFO, dev, "ready-wait", "communicator %p still busy (initialising or completing a "
                 "nonblocking call): waiting", (void*)comm);
      logged = 1;
    }
    if (ng_now_us() > deadline) {
      ng_log_msg(NG_LOG_WARN, dev, "ready-wait", "communicator %p did not become ready within NCCLGUARD_TIMEOUT=%gs",
                 (void*)comm, ng_cfg.timeout_s);
      return ncclSystemError;
    }
    nap(&delay);
  }
  if (logged)
    ng_log_msg(NG_LOG_INFO, dev, "ready-wait", "communicator %p ready after %.0f us (async state %s)", (void*)comm,
               ng_now_us() - t0, ng_result_name(st));
  return st;
}

ncclResult_t ng_wait_ready(ncclComm_t comm, int dev) { return ng_wait_ready_until(comm, dev, ng_deadline()); }

/* ---- giving up: revoke, and the watchdog of calls that block in NCCL ------------------------- */
/* NCCL 2.28.7+ can revoke a communicator: its kernels and host waits stop, its collectives then
 * fail (ncclInvalidUsage) instead of pairing with a peer's next operation, and the memory stays
 * valid until the application aborts or destroys it. Revoke is local: a peer finds out by timing
 * out itself (bounded the same way). */
int ng_can_revoke(void) { return ng_nccl_version() >= 22807 && ng_real(NG_ID_ncclCommRevoke); }

/* NCCL's answer to "is an operation of this nonblocking communicator still in progress" */
static int busy(ncclComm_t comm) {
  ncclResult_t a = ncclSuccess, q;
  NG_CALL(q, ncclCommGetAsyncError, comm, &a);
  return q == ncclSuccess && a == ncclInProgress;
}

static void revoke_comm(ncclComm_t comm, uint64_t gen, int dev, const char* why) {
  struct ng_commview v;
  int known = ng_reg_comm_get(comm, &v);
  if (known && gen && v.gen != gen) return; /* its communicator went; another lives at its address */
  /* once: a second revoke is an error in NCCL (the watchdog and the round may both give up) */
  if (!ng_can_revoke() || v.state == NG_COMM_REVOKED) return;
  /* counted in flight atomically with the check that it is usable: an ncclCommAbort from another
   * thread (PyTorch's watchdog) waits until this call is out of NCCL before it frees the communicator.
   * A communicator the registry could not record (out of memory) is revoked all the same: its peers
   * run the round this rank leaves. */
  if (known && !ng_reg_comm_enter(comm, v.gen)) return;
  if (known) ng_reg_comm_set_state(comm, NG_COMM_REVOKED); /* first: the other of two givers-up sees it */
  /* the revoke is what keeps a peer's round from pairing with this rank's next collective: a failed one is
   * tried again (twice; NCCL answers a revoke that did take effect with ncclInvalidArgument, harmless) */
  ncclResult_t r;
  NG_CALL(r, ncclCommRevoke, comm, 0);
  for (int again = 0; again < 2 && r != ncclSuccess && r != ncclInProgress; again++) NG_CALL(r, ncclCommRevoke, comm, 0);
  /* A nonblocking communicator with an operation still in progress (an agreement all-reduce being
   * enqueued) answers calls with ncclInvalidArgument until it is done ("Attempt to use communicator before
   * the previous operation returned ncclSuccess", measured for registration on 2.28.9; the fake applies it to
   * revoke too): tried again until it takes, bounded by the timeout, while the communicator is still
   * ncclguard's to call, and only while NCCL says an operation is in progress (any other refusal, such as a
   * communicator already revoked by another copy of the caller, is final) */
  double delay = 100, until = ng_deadline();
  while (r == ncclInvalidArgument && busy(comm) && ng_now_us() < until && ng_reg_comm_usable(comm, known ? v.gen : 0)) {
    nap(&delay);
    NG_CALL(r, ncclCommRevoke, comm, 0);
  }
  if (known && (r == ncclSuccess || r == ncclInProgress)) ng_reg_comm_guard_revoked(comm, v.gen);
  if (known) ng_reg_comm_leave(comm, v.gen);
  if (r != ncclSuccess && r != ncclInProgress)
    ng_log_msg(NG_LOG_WARN, dev, "agree", "communicator %p could not be revoked by ncclguard (%s): %s %s. Abort it on "
               "every rank (ncclCommAbort) before any other collective on it", (void*)comm, why, ng_result_name(r),
               ng_last_error(comm));
  else
    ng_log_msg(NG_LOG_WARN, dev, "agree", "communicator %p revoked by ncclguard (%s): %s; its pending operations are "
               "stopped and its collectives now fail. Abort it (ncclCommAbort) and create a new one", (void*)comm, why,
               ng_result_name(r));
}

/* A call into NCCL that can block on the host for a peer (the first collective's connection setup,
 * a registration's bootstrap exchange) has no timeout in NCCL: a watchdog thread revokes the
 * communicator when the call outlives its deadline, which ends the wait (NCCL polls the abort flag
 * there). Without ncclCommRevoke (NCCL < 2.28.7) such a call waits for its peer as NCCL alone does. */
static pthread_mutex_t wd_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wd_cond; /* CLOCK_MONOTONIC (ng_cond_init): made at the first watch */
/* The watch whose revoke the watchdog is making right now (NULL: none), and its end: a call whose watch
 * fired returns only once the revoke is done, or the application's next collective could be enqueued
 * while NCCL's revoke lands and be stopped half-way, with garbage in its buffer and no error (seen with
 * the fakes' revoke under tests/progs/failwalk.c) */
static struct watch* wd_firing;
static pthread_cond_t wd_fired_cv;
static pthread_once_t wd_once = PTHREAD_ONCE_INIT;
static void wd_init(void) {
  ng_cond_init(&wd_cond);
  ng_cond_init(&wd_fired_cv);
}
static struct watch* wd_list;
static int wd_running;
/* When the sleeping watchdog wakes next (1e300: only when signalled; 0: it is awake and scans
 * again before it sleeps): a watch due later needs no wake-up (no signal per round). */
static double wd_wake;

/* A watch fires once at its deadline (revoke); if the call is still inside NCCL a grace period
 * later, NCCL did not end the wait (measured on 2.28.9 for a first collective's connection setup
 * whose peer had left): one WARN says so, since nothing safe remains to end it from here. */
static double grace_us(void) { return ng_cfg.timeout_s * 1e6 < 5e6 ? 5e6 : ng_cfg.timeout_s * 1e6; }

static void* wd_main(void* arg) {
  (void)arg;
  ng_thread_name("ng-watchdog");
  pthread_mutex_lock(&wd_lock);
  for (;;) {
    wd_wake = 0;
    double now = ng_now_us(), next = -1;
    struct watch* due = NULL;
    for (struct watch* w = wd_list; w; w = w->next) {
      double when = w->fired == 0 ? w->deadline : w->fired == 1 ? w->deadline + grace_us() : -1;
      if (when < 0) continue;
      if (when <= now) { due = w; break; }
      if (next < 0 || when < next) next = when;
    }
    if (due) {
      int stage = due->fired++;
      ncclComm_t c = due->comm;
      uint64_t gen = due->gen;
      int dev = due->dev;
      char why[300];
      const char* call = due->what ? due->what : "a call into NCCL";
      if (due->seq >= 0)
        snprintf(why, sizeof why, "%s, step %d, has not returned after %.1f s (NCCLGUARD_TIMEOUT)%s", call, due->seq,
                 (now - due->armed) / 1e6, due->reached ? "; every rank had reached it (its vote round completed): "
                 "the wait is inside NCCL" : "");
      else
        snprintf(why, sizeof why, "%s has not returned after %.1f s (NCCLGUARD_TIMEOUT)", call,
                 (now - due->armed) / 1e6);
      ng_tls.lib = due->lib; /* the communicator's own libnccl (route.c) */
      wd_firing = due;
      pthread_mutex_unlock(&wd_lock); /* never held across a call into NCCL */
      if (stage == 0) {
        /* one structured line per stuck call (the report lists stuck ranks by call), then the revoke's */
        struct ng_commview sv;
        if (ng_log_on(NG_LOG_WARN) && ng_reg_comm_get(c, &sv)) {
          struct ng_line l;
          ng_line_begin(&l, NG_LOG_WARN, dev);
          ng_kv_str(&l, "fn", "stuck");
          ng_kv_ptr(&l, "comm", c);
          ng_kv_u64hex(&l, "cid", sv.cid);
          ng_kv_int(&l, "rank", sv.rank);
          ng_kv_int(&l, "nranks", sv.nranks);
          ng_kv_int(&l, "seq", due->seq);
          ng_kv_dbl(&l, "us", now - due->armed);
          ng_kv_str(&l, "call", call);
          ng_line_end(&l, "%s", why);
        }
        ng_reg_comm_set_broken(c, gen, NG_R_TIMEOUT);
        revoke_comm(c, gen, dev, why);
      } else {
        ng_log_msg(NG_LOG_WARN, dev, "agree", "a call into NCCL on communicator %p is still waiting for a peer %.0f s "
                   "after it was revoked: NCCL did not end the wait, and nothing safe can end it from another "
                   "thread. The peers left; end this process (or abort the communicator from this thread's caller "
                   "once it returns)", (void*)c, grace_us() / 1e6);
      }
      pthread_mutex_lock(&wd_lock);
      wd_firing = NULL;
      pthread_cond_broadcast(&wd_fired_cv);
      continue;
    }
    if (next < 0) {
      wd_wake = 1e300;
      pthread_cond_wait(&wd_cond, &wd_lock);
    } else {
      wd_wake = next;
      struct timespec ts = ng_mono_after(next - now + 1000);
      pthread_cond_timedwait(&wd_cond, &wd_lock, &ts);
    }
  }
  return NULL;
}

void ng_watch_arm(struct watch* w, ncclComm_t comm, int dev, double deadline, const char* what, int seq,
                  int reached) {
  struct ng_commview v;
  ng_reg_comm_get(comm, &v);
  /* gen 0 (a communicator the registry could not record): the watchdog acts on whatever is at comm */
  *w = (struct watch){.comm = comm, .gen = v.gen, .dev = dev, .lib = ng_cur_lib(), .deadline = deadline,
                      .armed = ng_now_us(), .what = what, .seq = seq, .reached = reached};
  if (!ng_can_revoke()) return;
  pthread_once(&wd_once, wd_init);
  pthread_mutex_lock(&wd_lock);
  if (!wd_running && ng_spawn_detached(wd_main, NULL) == 0) wd_running = 1;
  w->next = wd_list;
  wd_list = w;
  if (!wd_running || (wd_wake > 0 && deadline < wd_wake)) pthread_cond_signal(&wd_cond);
  pthread_mutex_unlock(&wd_lock);
}

/* 1 if the watchdog fired (the communicator was revoked while the call waited). */
int ng_watch_disarm(struct watch* w) {
  if (!ng_can_revoke()) return 0;
  pthread_mutex_lock(&wd_lock);
  for (struct watch** p = &wd_list; *p; p = &(*p)->next)
    if (*p == w) {
      *p = w->next;
      break;
    }
  while (wd_firing == w) pthread_cond_wait(&wd_fired_cv, &wd_lock); /* its revoke is under way: a few ms */
  int fired = w->fired;
  pthread_mutex_unlock(&wd_lock);
  return fired;
}

/* fork(): the watchdog's lock is taken before and released after, in both processes; in the child the
 * watchdog thread does not exist: start afresh. */
static void wd_fork_prepare(void) { pthread_mutex_lock(&wd_lock); }
static void wd_fork_parent(void) { pthread_mutex_unlock(&wd_lock); }
static void wd_fork_child(void) {
  pthread_mutex_unlock(&wd_lock);
  pthread_mutex_init(&wd_lock, NULL);
  ng_cond_init(&wd_cond);
  ng_cond_init(&wd_fired_cv);
  wd_firing = NULL;
  pthread_once(&wd_once, wd_init); /* (done, or the init above stands) */
  wd_list = NULL;
  wd_running = 0;
  wd_wake = 0;
}
NG_ON_FORK(NG_FORK_WATCH, wd_fork_prepare, wd_fork_parent, wd_fork_child)

/* This rank gives the communicator's agreement up: it is broken for ncclguard (every later registration on
 * it is refused without a round) and its channel is stopped (revoked where NCCL can, so that a pending
 * all-reduce of ours stops; aborted with the communicator). The communicator itself is left alone: no
 * round ran on it, so nothing of ncclguard's is queued there, and its collectives go on. A peer whose round
 * meets this rank's stopped channel times out and gives up too: every rank ends refused within the bound. */
void ng_give_up(ncclComm_t comm, uint64_t gen, int dev, int reason, const char* cause) {
  /* Before its channel exists the agreement's only exchange is the channel's split, on the communicator's own
   * bootstrap: a rank that leaves it (or whose split failed) leaves its peers' split pending on that sequence,
   * where it would meet this rank's next exchange (a split, a registration) or keep the communicator busy.
   * So there the communicator itself is stopped (revoked where NCCL can); once the channel exists only the
   * channel is, except on a communicator that ran no collective yet (not warmed up: a nonblocking one, or
   * NCCLGUARD_WARMUP=never): the application's first collective there would wait in NCCL's connection setup
   * for a peer that gave its agreement up too, without a bound (NCCL alone: the same wait). */
  struct ng_commview gv;
  ng_reg_comm_get(comm, &gv);
  int made = ng_reg_chan_made(comm, gen); /* (a launch left to its thread took the channel: it was made) */
  if (!made || (gv.known && !gv.warmed)) {
    char why[200];
    snprintf(why, sizeof why, "%s %s: %s", ng_reason_name(reason),
             made ? "before its first collective" : "before its agreement channel existed", cause);
    ng_stop_comm(comm, gen, dev, reason, why);
    return;
  }
  int first = ng_reg_comm_set_broken(comm, gen, reason);
  ng_channel_stop(comm, gen, dev);
  if (first)
    ng_log_msg(NG_LOG_WARN, dev, "agree", "communicator %p: ncclguard's agreement on it stops here (%s: %s); its "
               "registrations are refused from now on, on every rank within NCCLGUARD_TIMEOUT. The communicator itself "
               "is untouched: its collectives go on. To register windows again, create a new communicator",
               (void*)comm, ng_reason_name(reason), cause);
}

void ng_stop_comm(ncclComm_t comm, uint64_t gen, int dev, int reason, const char* why) {
  int first = ng_reg_comm_set_broken(comm, gen, reason);
  ng_channel_stop(comm, gen, dev);
  if (ng_can_revoke()) revoke_comm(comm, gen, dev, why);
  else if (first)
    ng_log_msg(NG_LOG_WARN, dev, "agree", "communicator %p: %s, so its collectives are out of step, and the loaded "
               "NCCL cannot revoke (before 2.28.7): abort it on every rank (ncclCommAbort) before any other collective "
               "on it", (void*)comm, why);
}

/* Resources of one communicator for one round: held (ng_reg_res_acquire) until released. */
struct grp {
  ncclComm_t comm;
  ncclComm_t chan; /* its agreement channel (channel.c): the round's all-reduce runs there */
  uint64_t gen; /* the communicator's generation when its resources were taken */
  int dev;
  int count;   /* registrations of the batch on this communicator */
  int held;    /* res acquired */
  int queued;  /* work enqueued on res.s */
  int status;  /* enum ng_agree_status */
  ncclResult_t err; /* NCCL's error where its channel could not be made */
  int32_t round;
  size_t len;  /* int32 elements: NG_HDR + count * NG_NVOTE */
  struct ng_agree_res res;
};

/* Make res hold at least `len` elements on the communicator's device. Resources come from the
 * communicator, else from the pool of destroyed communicators (idle ones only), else are made. */
static int ensure(struct grp* g) {
  if (g->res.cap >= g->len) return 0;
  ng_ctx saved;
  if (ng_cuda_push(g->dev, &saved)) return -1;
  int bad = 0;
  if (!g->res.s) {
    struct ng_agree_res busy[8];
    int nbusy = 0, found = 0;
    while (!found && nbusy < 8 && g->dev >= 0 && ng_reg_pool_take(g->dev, &g->res)) {
      if (ng_cuda_stream_done(g->res.s) == 1) found = 1;
      else busy[nbusy++] = g->res; /* a timed-out round may still use it: stays in the pool */
    }
    for (int i = 0; i < nbusy; i++) ng_reg_pool_put(g->dev, &busy[i]);
    if (!found) {
      memset(&g->res, 0, sizeof g->res);
      bad = ng_cuda_stream_create(&g->res.s) != 0;
    }
  }
  if (!bad && g->res.cap < g->len) {
    /* the old buffers are idle: their last round completed (a failed one leaves the comm broken) */
    size_t cap = g->len < 256 ? 256 : g->len;
    ng_devptr nb = 0;
    void* nh = NULL;
    int pinned = !ng_cuda_host_alloc(&nh, cap * sizeof(int32_t));
    if (!pinned) nh = ng_calloc("agree.staging", cap, sizeof(int32_t));
    if (!nh || ng_cuda_alloc(&nb, cap * sizeof(int32_t))) {
      if (pinned) (void)ng_cuda_host_free(nh);
      else free(nh);
      bad = 1;
    } else {
      if (g->res.buf) (void)ng_cuda_free(g->res.buf);
      if (g->res.pinned) (void)ng_cuda_host_free(g->res.host);
      else free(g->res.host);
      g->res.buf = nb;
      g->res.host = nh;
      g->res.cap = cap;
      g->res.pinned = pinned;
    }
  }
  ng_cuda_pop(saved);
  return bad ? -1 : 0;
}

/* Wait for every queued stream until the deadline; groups still running are marked. 0 done, 1 some
 * timed out or were aborted, <0 a CUDA error. */
static int wait_streams(struct grp* g, int ng, double deadline) {
  double delay = 5, spin_until = ng_now_us() + 300; /* a round takes tens of us: poll, then sleep */
  for (;;) {
    int pending = 0;
    for (int j = 0; j < ng; j++) {
      if (!g[j].queued || g[j].status != NG_AGREE_OK) continue;
      int d = ng_cuda_stream_done(g[j].res.s);
      if (d < 0) return d;
      if (d == 0 && !ng_reg_comm_usable(g[j].comm, g[j].gen)) g[j].status = NG_AGREE_ABORTED;
      else pending += !d;
    }
    if (!pending) {
      for (int j = 0; j < ng; j++)
        if (g[j].status != NG_AGREE_OK) return 1;
      return 0;
    }
    if (ng_now_us() > deadline) {
      for (int j = 0; j < ng; j++)
        if (g[j].queued && g[j].status == NG_AGREE_OK && ng_cuda_stream_done(g[j].res.s) != 1)
          g[j].status = NG_AGREE_TIMEOUT;
      return 1;
    }
    if (ng_now_us() < spin_until) sched_yield(); /* (nanosleep sleeps 50 us or more: timer slack) */
    else nap(&delay);
  }
}

/* Queue the copy of the reduced vector of every group still in the round to its host staging. */
static ncclResult_t copy_back(struct grp* g, int ng) {
  for (int j = 0; j < ng; j++) {
    if (g[j].status != NG_AGREE_OK) continue;
    ng_ctx saved;
    int bad = ng_cuda_push(g[j].dev, &saved) ||
              ng_cuda_d2h(g[j].res.host, g[j].res.buf, g[j].len * sizeof(int32_t), g[j].res.s);
    ng_cuda_pop(saved);
    if (bad) return ncclUnhandledCudaError;
  }
  return ncclSuccess;
}

/* ---- the launch: one NCCL group of all-reduces, one per communicator's channel ------------------
 * Made on a thread of ncclguard's (ng_offload): a group the application opened on the calling thread where
 * ncclguard cannot see it (pncclGroupStart) would otherwise swallow the all-reduces, which would then
 * "complete" on an idle stream with nothing reduced. The channels are nonblocking: the group end returns at
 * once and NCCL connects a channel's first collective in the background (ng_channel_wait). A launch that
 * still does not return by the deadline plus a grace period is left to its thread, which releases the
 * round's resources and aborts the channels (taken from their communicators, so nothing else ends them)
 * when it returns. */
struct launch_job {
  struct ng_job job;
  int n;
  ncclResult_t r, e;
  struct { ncclComm_t comm, chan; uint64_t gen; int dev; ng_devptr buf; size_t len; ng_stream s; struct ng_agree_res res; int held; } it[];
};

static void launch_run(struct ng_job* J) {
  struct launch_job* L = (struct launch_job*)J;
  ncclResult_t r, e;
  NG_CALL(r, ncclGroupStart);
  int started = r == ncclSuccess;
  for (int j = 0; j < L->n && r == ncclSuccess; j++)
    NG_CALL(r, ncclAllReduce, (const void*)(uintptr_t)L->it[j].buf, (void*)(uintptr_t)L->it[j].buf, L->it[j].len,
            NG_NCCL_INT32, NG_NCCL_MAX, L->it[j].chan, (cudaStream_t)L->it[j].s);
  e = r;
  if (started) NG_CALL(e, ncclGroupEnd); /* only a group that started is ended */
  L->r = r, L->e = e;
}

static void launch_abandon(struct ng_job* J) {
  struct launch_job* L = (struct launch_job*)J;
  for (int j = 0; j < L->n; j++) {
    int lib;
    (void)ng_reg_chan_take(L->it[j].comm, L->it[j].gen, &lib);
  }
}

static void launch_orphan(struct ng_job* J) {
  struct launch_job* L = (struct launch_job*)J;
  for (int j = 0; j < L->n; j++) {
    if (L->it[j].chan) ng_channel_abort_now(L->it[j].chan);
    if (L->it[j].held) ng_reg_res_release(L->it[j].comm, L->it[j].gen, L->it[j].dev, &L->it[j].res);
  }
  ng_log_msg(NG_LOG_WARN, -1, "agree", "an agreement all-reduce that ncclguard had given up on returned after all (%s)",
             ng_result_name(L->r != ncclSuccess ? L->r : L->e));
}

/* How long past its deadline the caller waits for a launch (or a channel's split) that did not return. */
static double launch_grace_us(void) {
  double g = ng_cfg.timeout_s * 1e6 / 4;
  return g < 1e6 ? 1e6 : g > 10e6 ? 10e6 : g;
}

/* A peer that met this rank in a round of this batch leaves that round when its own batch's round ends,
 * which may be up to NCCLGUARD_TIMEOUT later (a communicator of its batch whose peer never came, timed
 * out there): the waits that follow such a round (the next round, NCCL's registration) give it this much
 * more than the timeout. The same grace as a launch's. */
double ng_late_grace_us(void) { return launch_grace_us(); }

/* Launch the round's all-reduces on the channels of the groups still in it; *r and *e: ncclAllReduce's
 * and ncclGroupEnd's results. Returns 1 when the launch was abandoned. */
static int launch(struct grp* g, int ng, double deadline, ncclResult_t* r, ncclResult_t* e, const char* what) {
  int k = 0;
  for (int j = 0; j < ng; j++) k += g[j].queued;
  *r = *e = ncclSuccess;
  if (!k) return 0;
  struct launch_job* L = ng_calloc("agree.launch", 1, sizeof *L + (size_t)k * sizeof L->it[0]);
  if (!L) {
    *r = ncclSystemError;
    return 0;
  }
  L->n = k;
  for (int j = 0, i = 0; j < ng; j++) {
    if (!g[j].queued) continue;
    if (L->job.dev < 0 || i == 0) L->job.dev = g[j].dev;
    L->it[i].comm = g[j].comm, L->it[i].chan = g[j].chan, L->it[i].gen = g[j].gen, L->it[i].dev = g[j].dev;
    L->it[i].buf = g[j].res.buf, L->it[i].len = g[j].len, L->it[i].s = g[j].res.s;
    L->it[i].res = g[j].res, L->it[i].held = g[j].held; /* the job's only once it is abandoned */
    i++;
  }
  L->job.run = launch_run;
  L->job.orphan = launch_orphan;
  L->job.abandon = launch_abandon;
  L->job.relaxed = 1; /* our stream is not captured: never break the application's capture */
  if (ng_offload(&L->job, deadline + launch_grace_us())) {
    *r = L->r, *e = L->e;
    ng_job_free(&L->job);
    return 0;
  }
  /* abandoned: the job owns the resources and the channels now (launch_abandon took the channels from their
   * communicators, so that nothing else ends them) */
  for (int j = 0, i = 0; j < ng; j++) {
    if (!g[j].queued) continue;
    g[j].held = 0;
    ng_log_msg(NG_LOG_WARN, g[j].dev, "agree", "%s: the agreement all-reduce on the channel of communicator %p did "
               "not return %.0f s after NCCLGUARD_TIMEOUT=%gs: ncclguard stops waiting; that call stays in a thread of "
               "its own, which aborts the channel when it returns", what, (void*)g[j].comm, launch_grace_us() / 1e6,
               ng_cfg.timeout_s);
    i++;
  }
  *r = ncclSystemError, *e = ncclSystemError;
  return 1;
}

static const char* status_name(int s) {
  static const char* n[] = {"ok", "timeout", "out of step", "communicator aborted", "failed", "settings differ"};
  return (unsigned)s < sizeof n / sizeof n[0] ? n[s] : "?";
}

static int status_reason(int s) {
  switch (s) {
    case NG_AGREE_TIMEOUT: return NG_R_TIMEOUT;
    case NG_AGREE_STEP: return NG_R_OUT_OF_STEP;
    case NG_AGREE_ABORTED: return NG_R_COMM_DESTROYED;
    default: return NG_R_AGREE_FAILED;
  }
}

/* A communicator of one rank has nothing to agree on: the reduced vector is this rank's own, so no round
 * runs and it never gets a channel. (On 1 x H200 with NCCL 2.28.9 a round was 18 us of a 69 us
 * registration whose NCCL part is 48 us: tests/gpu/results/2026-12-01-nvidia-h200-x1.md.) */
static int solo(ncclComm_t comm) {
  struct ng_commview cv;
  return ng_reg_comm_get(comm, &cv) && cv.known && cv.nranks == 1 && !cv.broken && !cv.suspended &&
         !cv.stuck && cv.state != NG_COMM_REVOKED && ng_reg_comm_usable(comm, cv.gen);
}

/* ---- one round, as the steps of docs/DESIGN.md ("The agreement"): fill, launch, complete, check, finish.
 * Each step runs on the round's state; a step that fails marks the groups it could not serve and leaves
 * the later steps nothing to do but finish, which stops every communicator this rank leaves (the
 * invariant: a rank leaves the sequence of rounds only with its communicator stopped). */
struct round {
  struct ng_vote* votes;
  int n, ng;
  const char* what;
  struct grp* g; /* one per communicator */
  int* gi;       /* votes[i] travels in g[gi[i]] */
  double t0, t1, t2, deadline;
  double extra;      /* past NCCLGUARD_TIMEOUT: ng_agree_after's grace */
  int relaxed, mode; /* this thread's capture mode, relaxed for the round */
  ncclResult_t res;  /* the first failure of a step (CUDA or NCCL) */
  int w;             /* wait_streams: 0 done, 1 some group timed out or was aborted, <0 a CUDA error */
};

/* The header of g's vector: round, batch size, host, cid, settings, each with its negation. */
static void fill_header(struct grp* q) {
  int32_t* h = q->res.host;
  h[0] = q->round, h[1] = -q->round, h[2] = q->count, h[3] = -q->count;
  pthread_once(&host_once, host_init);
  struct ng_commview cv;
  ng_reg_comm_get(q->comm, &cv);
  for (int k = 0; k < 4; k++) {
    h[4 + k] = (int32_t)((host_id >> (16 * k)) & 0xffff);
    h[8 + k] = -h[4 + k];
    h[12 + k] = (int32_t)((cv.cid >> (16 * k)) & 0xffff);
    h[16 + k] = -h[12 + k];
  }
  int32_t set[NG_NSET];
  settings(set);
  for (int k = 0; k < NG_NSET; k++) h[NG_HDR_IDS + 2 * k] = set[k], h[NG_HDR_IDS + 2 * k + 1] = -set[k];
}

/* 0. channels: every communicator's agreement channel, made where it has none yet (channel.c). A
 * communicator whose channel cannot be made leaves the round (its status says why): finish gives it up. */
static void round_channels(struct round* R) {
  struct ng_chanreq* c = ng_calloc("agree.channels", (size_t)R->ng, sizeof *c);
  if (!c) {
    R->res = ncclSystemError;
    return;
  }
  for (int j = 0; j < R->ng; j++) {
    struct ng_commview cv;
    ng_reg_comm_get(R->g[j].comm, &cv);
    int rank = cv.rank;
    if (rank < 0) {
      ncclResult_t e;
      NG_CALL(e, ncclCommUserRank, R->g[j].comm, &rank);
      if (e != ncclSuccess) rank = 0;
    }
    c[j] = (struct ng_chanreq){.comm = R->g[j].comm, .gen = cv.gen, .rank = rank, .dev = R->g[j].dev};
  }
  ng_channel_open(c, R->ng, R->deadline);
  for (int j = 0; j < R->ng; j++) {
    R->g[j].chan = c[j].chan;
    if (c[j].status != NG_AGREE_OK) R->g[j].status = c[j].status, R->g[j].err = c[j].result;
  }
  free(c);
}

/* 1. fill: resources, round numbers, the vectors copied to the device */
static void round_fill(struct round* R) {
  for (int j = 0; j < R->ng && R->res == ncclSuccess; j++) {
    struct grp* q = &R->g[j];
    if (q->status != NG_AGREE_OK) continue; /* no channel */
    if (!ng_reg_comm_usable(q->comm, 0)) {
      q->status = NG_AGREE_ABORTED;
      R->res = ncclInvalidUsage;
      return;
    }
    int a = ng_reg_res_acquire(q->comm, &q->res, &q->gen);
    q->held = a >= 0;
    q->len = NG_HDR + (size_t)q->count * NG_NVOTE;
    if (a < 0 || ensure(q)) {
      ng_log_msg(NG_LOG_WARN, q->dev, "agree", "%s: cannot set up the agreement buffer for communicator %p%s: "
                 "this rank cannot take part in a round its peers run, so the communicator is given up", R->what,
                 (void*)q->comm, a < 0 ? " (another thread runs a round on it)" : " (device or host out of memory?)");
      R->res = ncclUnhandledCudaError;
      return;
    }
    q->round = ng_reg_comm_next(q->comm, NG_NEXT_ROUND);
    fill_header(q);
    for (int i = 0, k = 0; i < R->n; i++)
      if (R->gi[i] == j) memcpy(q->res.host + NG_HDR + (size_t)(k++) * NG_NVOTE, R->votes[i].v, sizeof R->votes[i].v);
    ng_ctx saved;
    if (ng_cuda_push(q->dev, &saved) || ng_cuda_h2d(q->res.buf, q->res.host, q->len * sizeof(int32_t), q->res.s))
      R->res = ncclUnhandledCudaError;
    ng_cuda_pop(saved);
    q->queued = 1;
  }
}

/* 2. launch: the all-reduces on the channels, one NCCL group, from a thread of ncclguard's; the channels
 * are nonblocking: then each is polled until its enqueue (and, the first time, its connection setup) is
 * done. Nothing here touches the application's communicators. */
static void round_launch(struct round* R) {
  if (R->res != ncclSuccess) return;
  ncclResult_t r = ncclSuccess, e = ncclSuccess;
  int abandoned = launch(R->g, R->ng, R->deadline, &r, &e, R->what);
  R->res = r != ncclSuccess ? r : e;
  if (abandoned) {
    for (int j = 0; j < R->ng; j++)
      if (R->g[j].queued) R->g[j].status = NG_AGREE_TIMEOUT;
    R->res = ncclSystemError;
    return;
  }
  if (R->res == ncclInProgress) R->res = ncclSuccess;
  for (int j = 0; j < R->ng && R->res == ncclSuccess; j++) {
    if (!R->g[j].queued) continue;
    ncclResult_t w = ng_channel_wait(R->g[j].chan, R->g[j].comm, R->g[j].gen, R->deadline);
    if (w == ncclSystemError) R->g[j].status = NG_AGREE_TIMEOUT;
    else if (w == ncclInvalidUsage && !ng_reg_comm_usable(R->g[j].comm, R->g[j].gen)) R->g[j].status = NG_AGREE_ABORTED;
    else if (w != ncclSuccess) R->res = w;
  }
}

/* 3. complete: the reduced vectors back to the host. With pinned staging the copy back is queued
 * behind the all-reduce at once (one wait); a pageable one waits for the all-reduce first (a copy to
 * pageable memory would wait on the host, unbounded). A kernel stopped by an abort or revoke (another
 * thread's) completes without having reduced anything: a round whose communicator went meanwhile is
 * not a result. Each communicator's part completes or fails on its own: one that timed out (its peers'
 * round did not come) leaves the others' results standing, which their ranks have too. */
static void round_complete(struct round* R) {
  int all_pinned = 1, copied = 0;
  for (int j = 0; j < R->ng; j++) all_pinned &= R->g[j].res.pinned;
  if (R->res == ncclSuccess && all_pinned) {
    R->res = copy_back(R->g, R->ng);
    copied = 1;
  }
  if (R->res == ncclSuccess) R->w = wait_streams(R->g, R->ng, R->deadline);
  if (R->res == ncclSuccess && R->w >= 0 && !copied) {
    /* (the groups whose all-reduce completed: their streams are idle, the copy takes no time; a second or
     * more past the round's deadline where another group's timeout used it up) */
    double dl = R->deadline > ng_now_us() + 1e6 ? R->deadline : ng_now_us() + 1e6;
    R->res = copy_back(R->g, R->ng);
    if (R->res == ncclSuccess) {
      int w2 = wait_streams(R->g, R->ng, dl);
      R->w = w2 < 0 ? w2 : R->w > w2 ? R->w : w2;
    }
  }
  if (R->w < 0) R->res = ncclUnhandledCudaError;
  for (int j = 0; j < R->ng; j++) {
    struct ng_commview now;
    ng_reg_comm_get(R->g[j].comm, &now);
    if (R->g[j].status == NG_AGREE_OK &&
        (!ng_reg_comm_usable(R->g[j].comm, R->g[j].gen) || now.state == NG_COMM_REVOKED)) {
      R->g[j].status = NG_AGREE_ABORTED;
      if (R->w == 0) R->w = 1;
    }
  }
}

/* 4. check: in step (round and batch), the same settings, one name for the communicator; then the
 * reduced votes back to the caller */
static void check_in_step(struct round* R, struct grp* q) {
  const int32_t* h = q->res.host;
  if (h[0] == q->round && -h[1] == q->round && h[2] == q->count && -h[3] == q->count) return;
  q->status = NG_AGREE_STEP;
  ng_log_msg(NG_LOG_WARN, q->dev, "agree", "%s: ranks out of step on communicator %p: this rank ran round %d with "
             "%d registration(s), the ranks ran rounds %d..%d with %d..%d", R->what, (void*)q->comm, (int)q->round,
             q->count, (int)-h[1], (int)h[0], (int)-h[3], (int)h[2]);
}

static void check_settings(struct round* R, struct grp* q) {
  const int32_t* h = q->res.host;
  char diff[512] = "";
  size_t dl = 0;
  for (int k = 0; k < NG_NSET; k++) {
    int32_t hi = h[NG_HDR_IDS + 2 * k], lo = -h[NG_HDR_IDS + 2 * k + 1];
    if (hi == lo) continue;
    q->status = NG_AGREE_SETTINGS;
    int m = snprintf(diff + dl, sizeof diff - dl, "%s%s (values %d..%d)", dl ? ", " : "", set_names[k], (int)lo,
                     (int)hi);
    if (m > 0 && (size_t)m < sizeof diff - dl) dl += (size_t)m;
  }
  if (q->status == NG_AGREE_SETTINGS)
    ng_log_msg(NG_LOG_WARN, q->dev, "agree", "%s: the ranks of communicator %p run with different settings: %s. Every "
               "rank refuses this registration; %s", R->what, (void*)q->comm, diff,
               ng_reason_advice(NG_R_SETTINGS_MISMATCH));
}

static void check_cid(struct grp* q) {
  const int32_t* h = q->res.host;
  int same = 1;
  uint64_t cid = 0;
  for (int k = 0; k < 4; k++) same &= h[12 + k] == -h[16 + k], cid |= (uint64_t)(uint16_t)h[12 + k] << (16 * k);
  struct ng_commview cv;
  ng_reg_comm_get(q->comm, &cv);
  if (same || cid == cv.cid) return;
  ng_log_msg(NG_LOG_INFO, q->dev, "agree", "communicator %p: its ranks named it differently; cid %016llx from now on "
             "(was %016llx here)", (void*)q->comm, (unsigned long long)cid, (unsigned long long)cv.cid);
  ng_reg_comm_set_cid(q->comm, cid);
}

/* Per communicator: a round that failed as a whole on this rank (its launch, a CUDA error) fails every
 * communicator of it; otherwise each communicator's status is its own (a timeout on one leaves another's
 * completed round standing, as it stands on that one's other ranks). */
static void round_check(struct round* R) {
  if (R->res != ncclSuccess || R->w < 0) {
    for (int i = 0; i < R->n; i++) {
      int s = R->g[R->gi[i]].status;
      R->votes[i].status = s == NG_AGREE_OK ? NG_AGREE_FAILED : s;
    }
    return;
  }
  for (int j = 0; j < R->ng; j++) {
    struct grp* q = &R->g[j];
    if (q->status == NG_AGREE_OK) check_in_step(R, q);
    if (q->status == NG_AGREE_OK) check_settings(R, q);
    if (q->status == NG_AGREE_OK) check_cid(q);
  }
  for (int j = 0; j < R->ng; j++) R->g[j].count = 0; /* reused as the position within the group */
  for (int i = 0; i < R->n; i++) {
    struct grp* q = &R->g[R->gi[i]];
    int idx = q->count++;
    R->votes[i].status = q->status;
    R->votes[i].one_host = 1;
    if (q->status != NG_AGREE_OK) continue; /* (a communicator without its channel has no vector) */
    for (int k = 0; k < 4; k++) R->votes[i].one_host &= q->res.host[4 + k] == -q->res.host[8 + k];
    memcpy(R->votes[i].v, q->res.host + NG_HDR + (size_t)idx * NG_NVOTE, sizeof R->votes[i].v);
  }
}

/* 5. finish: a failed round stops its communicator (broken for ncclguard, revoked where NCCL can);
 * settings that differ are a refusal on every rank; resources go back (busy ones stay owned). */
static ncclResult_t round_finish(struct round* R) {
  ncclResult_t ret = ncclSuccess;
  for (int j = 0; j < R->ng; j++) {
    struct grp* q = &R->g[j];
    int st = q->status;
    if (st == NG_AGREE_OK && !(R->res == ncclSuccess && R->w >= 0)) st = NG_AGREE_FAILED;
    if (st == NG_AGREE_SETTINGS) { /* the round itself completed in step: the ranks refuse alike */
      if (ret == ncclSuccess) ret = ncclInvalidUsage;
    } else if (st != NG_AGREE_OK) {
      /* A rank leaves the sequence of rounds only with its communicator stopped (the invariant,
       * docs/DESIGN.md): our all-reduce may still wait on the GPU for a peer, or (a round this rank
       * could not set up or enqueue) the peers' all-reduces wait for ours, and would pair with the
       * application's next collective here. Revoked where NCCL can; an aborted one is stopped already. */
      if (st == NG_AGREE_ABORTED) ng_reg_comm_set_broken(q->comm, q->gen, status_reason(st));
      else ng_give_up(q->comm, q->gen, q->dev, status_reason(st), R->what);
      if (st != NG_AGREE_ABORTED && !ng_can_revoke() && !q->queued)
        ng_log_msg(NG_LOG_WARN, q->dev, "agree", "%s: this rank could not run the agreement round on communicator %p "
                   "that its peers run, and the loaded NCCL cannot revoke (before 2.28.7): abort this communicator "
                   "on every rank (ncclCommAbort) before any other collective on it", R->what, (void*)q->comm);
      if (st == NG_AGREE_TIMEOUT)
        ng_log_msg(NG_LOG_WARN, q->dev, "agree", "%s: the agreement all-reduce on communicator %p did not complete "
                   "within NCCLGUARD_TIMEOUT=%gs: %s", R->what, (void*)q->comm, ng_cfg.timeout_s,
                   ng_reason_advice(NG_R_TIMEOUT));
      else if (st == NG_AGREE_FAILED)
        ng_log_msg(NG_LOG_WARN, q->dev, "agree", "%s: the agreement all-reduce on communicator %p failed: %s %s",
                   R->what, (void*)q->comm, ng_result_name(R->res != ncclSuccess ? R->res : q->err),
                   ng_reg_comm_usable(q->comm, q->gen) ? ng_last_error(q->comm) : "");
      else if (st == NG_AGREE_ABORTED)
        ng_log_msg(NG_LOG_WARN, q->dev, "agree", "%s: communicator %p was aborted or destroyed during the round",
                   R->what, (void*)q->comm);
      if (ret == ncclSuccess)
        ret = st == NG_AGREE_TIMEOUT ? ncclSystemError : st == NG_AGREE_ABORTED ? ncclInvalidUsage
              : st == NG_AGREE_STEP  ? ncclInvalidUsage : R->res != ncclSuccess ? R->res
              : q->err != ncclSuccess ? q->err : ncclUnhandledCudaError;
    }
    /* (an abandoned launch's resources went to its job: released when that launch returns) */
    if (q->held) ng_reg_res_release(q->comm, q->gen, q->dev, &q->res);
  }
  return ret;
}

static ncclResult_t agree(struct ng_vote* votes, int n, const char* what, double extra) {
  if (n <= 0) return ncclSuccess;
  int all_solo = 1;
  for (int i = 0; i < n && all_solo; i++) all_solo = solo(votes[i].comm);
  if (all_solo) {
    for (int i = 0; i < n; i++) votes[i].status = NG_AGREE_OK, votes[i].one_host = 1;
    if (ng_log_on(NG_LOG_TRACE))
      ng_log_msg(NG_LOG_TRACE, votes[0].dev, "agree", "%s round: not run (one rank: its own vote is the result)", what);
    return ncclSuccess;
  }
  for (int i = 0; i < n; i++) votes[i].status = NG_AGREE_FAILED;
  if (!ng_cuda_ok()) return ncclInvalidUsage;
  struct round R = {.votes = votes, .n = n, .what = what, .res = ncclSuccess, .extra = extra};
  R.g = ng_calloc("agree.groups", (size_t)n, sizeof *R.g);
  R.gi = ng_calloc("agree.index", (size_t)n, sizeof *R.gi);
  if (!R.g || !R.gi) { /* this rank cannot run the round its peers run */
    free(R.g), free(R.gi);
    for (int i = 0; i < n; i++) {
      int dup = 0;
      for (int j = 0; j < i && !dup; j++) dup = votes[j].comm == votes[i].comm;
      if (!dup) ng_give_up(votes[i].comm, 0, votes[i].dev, NG_R_AGREE_FAILED, "out of host memory for a round");
    }
    return ncclSystemError;
  }
  for (int i = 0; i < n; i++) { /* one group per communicator */
    int j = 0;
    while (j < R.ng && R.g[j].comm != votes[i].comm) j++;
    if (j == R.ng) R.g[R.ng++] = (struct grp){.comm = votes[i].comm, .dev = votes[i].dev, .status = NG_AGREE_OK};
    R.gi[i] = j;
    R.g[j].count++;
  }
  R.t0 = ng_now_us(), R.deadline = R.t0 + ng_cfg.timeout_s * 1e6 + extra;
  /* Our stream is not captured; relaxed mode lets this thread allocate and enqueue while another
   * stream captures (in global mode even cuMemAlloc would fail and invalidate that capture). */
  R.relaxed = ng_cuda_relaxed_capture(&R.mode) == 0;
  round_channels(&R);
  round_fill(&R);
  R.t1 = ng_now_us();
  round_launch(&R);
  R.t2 = ng_now_us();
  round_complete(&R);
  if (R.relaxed) ng_cuda_restore_capture(R.mode);
  if (ng_log_on(NG_LOG_TRACE))
    ng_log_msg(NG_LOG_TRACE, R.g[0].dev, "agree", "%s round: set-up %.1f us, enqueue %.1f us, completion %.1f us", what,
               R.t1 - R.t0, R.t2 - R.t1, ng_now_us() - R.t2);
  round_check(&R);
  ncclResult_t ret = round_finish(&R);
  if (ret == ncclSuccess) ng_stat_add(NG_ST_AGREE, n);
  else
    ng_log_msg(NG_LOG_INFO, R.g[0].dev, "agree", "%s round: %s after %.0f us", what, status_name(votes[0].status),
               ng_now_us() - R.t0);
  free(R.g);
  free(R.gi);
  return ret;
}

ncclResult_t ng_agree(struct ng_vote* votes, int n, const char* what) { return agree(votes, n, what, 0); }
ncclResult_t ng_agree_after(struct ng_vote* votes, int n, const char* what) {
  return agree(votes, n, what, ng_late_grace_us());
}

/* ---- the warm-up ------------------------------------------------------------------------------
 * One 1-element all-reduce on each communicator that just became ready, before the application can have
 * issued anything on it, so that it is at the same place of every rank's device sequence (never between
 * two of the application's collectives). Enqueued on the communicator's agreement stream from a thread of
 * ncclguard's, and not waited for: its completion is the peers' business, and NCCL orders the
 * communicator's next collective after it. On a blocking communicator the group end of its first
 * collective sets up connections and waits on the host for the peers (no timeout in NCCL): the watchdog
 * revokes at the deadline, and a launch that still does not return is left to its thread (the
 * communicator counts as stuck: ncclguard never frees it under that call). */
struct warm_job {
  struct ng_job job;
  int n;
  ncclResult_t r, e;
  struct { ncclComm_t comm; uint64_t gen; int dev; struct ng_agree_res res; int held; } it[];
};

static void warm_run(struct ng_job* J) {
  struct warm_job* W = (struct warm_job*)J;
  ncclResult_t r, e;
  NG_CALL(r, ncclGroupStart);
  int started = r == ncclSuccess;
  for (int j = 0; j < W->n && r == ncclSuccess; j++) /* (every item holds its resources: ng_warmup keeps no other) */
    NG_CALL(r, ncclAllReduce, (const void*)(uintptr_t)W->it[j].res.buf, (void*)(uintptr_t)W->it[j].res.buf, 1,
            NG_NCCL_INT32, NG_NCCL_MAX, W->it[j].comm, (cudaStream_t)W->it[j].res.s);
  e = r;
  if (started) NG_CALL(e, ncclGroupEnd);
  W->r = r, W->e = e;
}

static void warm_orphan(struct ng_job* J) {
  struct warm_job* W = (struct warm_job*)J;
  for (int j = 0; j < W->n; j++) {
    ng_reg_comm_stuck(W->it[j].comm, W->it[j].gen, -1);
    if (W->it[j].held) ng_reg_res_release(W->it[j].comm, W->it[j].gen, W->it[j].dev, &W->it[j].res);
  }
}

static void warm_abandon(struct ng_job* J) {
  struct warm_job* W = (struct warm_job*)J;
  for (int j = 0; j < W->n; j++) ng_reg_comm_stuck(W->it[j].comm, W->it[j].gen, +1);
}

void ng_warmup(const ncclComm_t* comms, int n, const char* what) {
  if (n <= 0 || ng_cfg.warmup == NG_WARMUP_NEVER || !ng_cuda_ok()) return;
  struct warm_job* W = ng_calloc("agree.warmup", 1, sizeof *W + (size_t)n * sizeof W->it[0]);
  struct watch* wds = ng_calloc("agree.watch", (size_t)n, sizeof *wds);
  if (!W || !wds) {
    free(W), free(wds);
    return; /* no warm-up on any rank that cannot: the application's first collective connects instead */
  }
  double t0 = ng_now_us(), deadline = ng_deadline();
  int k = 0;
  for (int j = 0; j < n; j++) {
    struct ng_commview cv;
    /* (a communicator of one rank has no peer to connect to: nothing to warm up) */
    if (!comms[j] || !ng_reg_comm_get(comms[j], &cv) || !cv.known || cv.dev < 0 || cv.nranks == 1) continue;
    struct grp g = {.comm = comms[j], .dev = cv.dev, .len = 1};
    int a = ng_reg_res_acquire(comms[j], &g.res, &g.gen);
    if (a < 0) continue;
    ng_ctx saved;
    int bad = ensure(&g);
    if (!bad) { /* the one element reduced: defined (0), copied behind nothing else on its stream */
      g.res.host[0] = 0;
      bad = ng_cuda_push(cv.dev, &saved) || ng_cuda_h2d(g.res.buf, g.res.host, sizeof(int32_t), g.res.s);
      ng_cuda_pop(saved);
    }
    if (bad) {
      ng_reg_res_release(comms[j], g.gen, g.dev, &g.res);
      continue;
    }
    W->it[k].comm = comms[j], W->it[k].gen = g.gen, W->it[k].dev = cv.dev, W->it[k].res = g.res, W->it[k].held = 1;
    if (W->job.dev < 0 || k == 0) W->job.dev = cv.dev;
    k++;
  }
  W->n = k;
  if (!k) {
    free(W), free(wds);
    return;
  }
  for (int j = 0; j < k; j++) ng_watch_arm(&wds[j], W->it[j].comm, W->it[j].dev, deadline, "the warm-up all-reduce", -1, 0);
  W->job.run = warm_run;
  W->job.orphan = warm_orphan;
  W->job.relaxed = 1;
  W->job.abandon = warm_abandon; /* the communicator counts as stuck once the launch is abandoned */
  int done = ng_offload(&W->job, deadline + launch_grace_us());
  int fired = 0;
  for (int j = 0; j < k; j++) fired |= ng_watch_disarm(&wds[j]);
  free(wds);
  if (!done) {
    for (int j = 0; j < k; j++)
      ng_log_msg(NG_LOG_WARN, W->it[j].dev, "warmup", "%s: the warm-up all-reduce on communicator %p is still setting "
                 "up its connections %.0f s after NCCLGUARD_TIMEOUT=%gs (a peer did not come): that call stays blocked "
                 "in a thread of its own, and the communicator is never freed", what, (void*)W->it[j].comm,
                 launch_grace_us() / 1e6, ng_cfg.timeout_s);
    return;
  }
  ncclResult_t res = W->r != ncclSuccess ? W->r : W->e;
  for (int j = 0; j < k; j++) {
    ng_reg_comm_mark(W->it[j].comm, 1, 0, 0);
    ng_reg_res_release(W->it[j].comm, W->it[j].gen, W->it[j].dev, &W->it[j].res);
    ng_log_msg(res == ncclSuccess || res == ncclInProgress ? NG_LOG_INFO : NG_LOG_WARN, W->it[j].dev, "warmup",
               "warm-up all-reduce on communicator %p (%s): %s, enqueued in %.0f us%s", (void*)W->it[j].comm, what,
               ng_result_name(res), ng_now_us() - t0, fired ? " (the watchdog revoked it: a peer did not come)" : "");
  }
  ng_job_free(&W->job);
}
