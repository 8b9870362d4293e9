/* failwalk: exhaustive failure injection, as SQLite walks its mallocs. For one scenario on N ranks (one
 * process each, fork), every fallible step ncclguard takes on one rank (a failpoint: host allocation,
 * thread, CUDA driver call, NCCL call; shim/failpoint.c, a library built with `make FAILPOINTS=1`) is
 * failed in turn: a counting run learns the failpoint hits the scenario makes on that rank after its
 * communicator exists (NG_FAILPOINT=*:0), then case k fails the k-th hit (every failpoint site, the first
 * two and the last of a poll loop's hits; --every: every k), on every rank.
 * Each case checks, on every rank:
 *   - no wrong data: the application's all-reduce after the registration is correct, an error, or (only
 *     where some rank's registration failed) did not complete within its wait;
 *   - one outcome: the ranks' registrations all registered, all degraded, or all failed; or the
 *     application's all-reduce fails on every rank (the communicator was stopped everywhere); or the
 *     residual case of the last round ("split", counted apart): a rank failed after the last round
 *     reached its peers and returned an error (its channel stopped, the window NCCL made kept inside NCCL, so
 *     its all-reduce is correct; where a registration stuck in NCCL made the watchdog revoke it, an error),
 *     and the peers' all-reduce is correct or never completes (a hang, never wrong data) - no further round
 *     can tell them;
 *   - an error leaves *win NULL; no rank crashes or exits early; each registration returns within the
 *     bound (3 NCCLGUARD_TIMEOUT plus the grace of a first round, plus 2 s of slack);
 *   - nothing left behind: after the communicator is destroyed (or aborted, after an error) the process
 *     has at most two threads more than after the clean counting run, counted as the fewest over 300 ms (a
 *     detached thread that finished is counted until it exits): ncclguard's thread left in an NCCL call a
 *     peer never joined (a channel's split or round where NCCL cannot revoke) and the stream the fake runs
 *     for it as a thread; a violation names the threads counted;
 * and the fakes' collective-matching checker (FAKE_NCCL_MISMATCH_FILE) sees every collective. Where NCCL
 * cannot revoke (before 2.28.7) a rank whose own step fails after the last round leaves its peers in NCCL's
 * registration exchange, which has no timeout, as NCCL alone does when one rank fails locally: such a case
 * (a rank still running at the case's bound) is killed and counted apart ("nccl_wait"); on other versions
 * it is a violation.
 *
 *   failwalk -s SCENARIO [-n RANKS] [--timeout-ms T] [--jobs P] [--rank R] [--k K] [--every] [-v]
 * The hits failed: the first two and the last of each run of consecutive hits of one failpoint (a poll loop
 * that queries a hundred times fails the same way at its 3rd and its 99th query); --every: every hit.
 * SCENARIO: one (a registration on a warm communicator), cold (the registration is the communicator's
 * first operation), group (two registrations in one group), nonblocking (config.blocking = 0, registered
 * right after init), dereg (register, then deregister), appgroup (the group {application all-reduce;
 * registration} where the all-reduce of the rank under test has an invalid operation: NCCL drops that
 * rank's group only; walked like the others, its k = 0 case being the application error alone).
 * abort (the warm registration, but hit k does not fail: the test build calls this program's
 * ng_failpoint_hook there (NG_FAILPOINT=*:K:hook) and a second thread of the application calls
 * ncclCommAbort on the communicator while the library goes on from that hit: NCCL's way for an application
 * to end a call that hangs; that rank's registration may end either way but within the bound,
 * without a crash and with *win NULL on an error, and its all-reduce is not run; its peers end with an
 * error or correct data within the bound, or their all-reduce finds no partner (NCCL alone: an all-reduce
 * whose peer aborted never completes), never wrong data; a hit after the registration returned aborts
 * nothing, counted as not_aborted). ncclCommDestroy from another thread is not walked: NCCL forbids two
 * threads issuing operations on one communicator at once (its "Thread Safety" page) and documents only
 * abort as the way to end a call in progress; destroy then frees the communicator under the other call,
 * a use after free in NCCL alone.
 * reuse (register on A; abort A after an error, else deregister and destroy it; create B, which the fake
 * puts at A's address, FAKE_NCCL_REUSE_COMM_ADDR=1; register on B and all-reduce on it: the walk's checks
 * apply to B, and where the failed hit came before B existed, B must be untouched: registered alike on
 * every rank, its all-reduce correct; cases where A was still busy and B got another address are counted
 * as not_reused; a hit that fails NCCL's own init of B leaves the peers in NCCL's init: counted apart
 * with nccl_wait).
 * --rank/--k: one case only. Prints one line per violation and
 *   "failwalk: RESULT scenario=S ranks=N cases=C violations=V mismatch-free=... max_hits=H"
 * Exit 1 on any violation. Against the fakes only (FAKE_NCCL_VERSION picks the NCCL modelled). */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"

#define COUNT 256
#define MAXR 8
enum { C_REG, C_NULL, C_ERR };
struct rankres {
  volatile int done;
  volatile int reg_done; /* its registration returned */
  int reg;       /* C_REG / C_NULL / C_ERR (the first registration of the scenario) */
  int rc;        /* its ncclResult_t */
  int stale_win; /* an error left *win set */
  double reg_us;
  char ar[8];    /* the application's all-reduce: ok / error / hang / wrong; "aborted": not run (abort) */
  int threads_before, threads_after;
  char thread_names[120]; /* the names of the threads counted after (a violation names them) */
  int aborted;   /* abort: the application aborted the communicator from another thread during the call */
  int late;      /* abort: the hit came after the registration had returned (nothing was aborted) */
  int fired_a;   /* reuse: the failed hit was before communicator B was created (or none failed) */
  int reused;    /* reuse: B lives at A's address */
  int a_reg, a_stale; /* reuse: A's registration */
  int binit_failed;   /* reuse: the armed hit failed NCCL's init of B on this rank */
};
struct shared {
  volatile int ready, ready2;
  ncclUniqueId id, id2;
  struct rankres r[MAXR];
};
static const char* scen = "one";
static int nranks = 2, timeout_ms = 400, jobs = 3, verbose;
static char repdir[256];
static int last_threads;
static int base_threads = -1; /* threads after the clean counting run (the fake runs a stream as a thread: the
                                 agreement's pooled stream, the watchdog): a case may leave one more (a
                                 stream with a round's work still queued is kept, by design) */

static int no_revoke, no_revoke_checked;
static int case_note; /* this case: abort, nothing aborted (the hit came after the call); reuse: B not at A's address */
static int mode_abort, mode_reuse; /* the scenarios abort and reuse */

/* abort: the application's second thread, which aborts the communicator when the library reaches the armed
 * hit (ng_failpoint_hook, called by the test build's failpoint.c at that hit with failing = 0) */
static struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int go, entered, quit, reg_returned, late;
  int phase;        /* reuse: 1 while communicator A lives, 2 from B's creation */
  int fired_phase;  /* reuse: the phase in which the armed hit failed (0: none) */
  ncclComm_t c;
  ncclResult_t rc;
} ab = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0, 0, 0, 0, 0, NULL, ncclSuccess};

void ng_failpoint_hook(const char* name, int failing);
void ng_failpoint_hook(const char* name, int failing) {
  (void)name;
  pthread_mutex_lock(&ab.mu);
  if (failing) ab.fired_phase = ab.phase;
  else if (!mode_abort || ab.reg_returned || ab.go) ab.late = 1;
  else {
    ab.go = 1;
    pthread_cond_broadcast(&ab.cv);
    /* until the other thread has entered ncclCommAbort (or 50 ms), then a few ms more: the library goes on
     * from this hit while the abort runs */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 50 * 1000 * 1000;
    if (ts.tv_nsec >= 1000000000) ts.tv_sec++, ts.tv_nsec -= 1000000000;
    while (!ab.entered && pthread_cond_timedwait(&ab.cv, &ab.mu, &ts) != ETIMEDOUT) {}
    pthread_mutex_unlock(&ab.mu);
    usleep(2000);
    return;
  }
  pthread_mutex_unlock(&ab.mu);
}
static void* abort_main(void* arg) {
  (void)arg;
  pthread_mutex_lock(&ab.mu);
  while (!ab.go && !ab.quit) pthread_cond_wait(&ab.cv, &ab.mu);
  int go = ab.go;
  if (go) ab.entered = 1, pthread_cond_broadcast(&ab.cv);
  pthread_mutex_unlock(&ab.mu);
  if (go) ab.rc = ncclCommAbort(ab.c);
  return NULL;
}
/* the hits to fail, from the counting run's report: every k (--every), or the first two and the last hit of
 * each run of consecutive hits of one failpoint (a poll loop polls the same way each time) */
static long klist[8192];
static int nk, every;
/* the NCCL the fakes model here cannot revoke (before 2.28.7) */
static int no_revoke_version(void) {
  const char* v = getenv("FAKE_NCCL_VERSION");
  return v && atoi(v) > 0 && atoi(v) < 22807;
}
/* The process's threads; their names (comma-separated, into names[len]) where names is set */
static int threads_named(char* names, size_t len) {
  DIR* d = opendir("/proc/self/task");
  int n = 0;
  if (!d) return -1;
  if (names && len) names[0] = 0;
  for (struct dirent* e; (e = readdir(d));) {
    if (e->d_name[0] == '.') continue;
    n++;
    char p[300], nm[32] = "?";
    snprintf(p, sizeof p, "/proc/self/task/%s/comm", e->d_name);
    FILE* f = names ? fopen(p, "r") : NULL;
    if (f) {
      if (fgets(nm, sizeof nm, f)) nm[strcspn(nm, "\n")] = 0;
      fclose(f);
    }
    if (names && strlen(names) + strlen(nm) + 2 < len) snprintf(names + strlen(names), len - strlen(names), "%s%s", *names ? "," : "", nm);
  }
  closedir(d);
  return n;
}
static int threads(void) { return threads_named(NULL, 0); }
/* The threads that stay: the fewest seen over 300 ms (a detached thread that has finished its work, of
 * ncclguard's or of the fake's, is still counted for the moment it takes to exit; a thread left behind stays) */
static int threads_staying(char* names, size_t len) {
  int best = threads_named(names, len);
  for (int i = 0; i < 30 && best > 1; i++) {
    usleep(10000);
    char nm[sizeof ((struct rankres*)0)->thread_names];
    int n = threads_named(nm, sizeof nm);
    if (n >= 0 && n < best) best = n, snprintf(names, len, "%s", nm);
  }
  return best;
}

/* reuse: register on A; give A up (abort after an error, else deregister and destroy); create B (the fake hands
 * it A's memory: FAKE_NCCL_REUSE_COMM_ADDR=1); register on B, all-reduce on B. me->reg/rc/ar/reg_us are B's
 * (the walk's checks), a_reg/a_stale A's; fired_a says whether the armed hit failed before B existed, where B
 * must be untouched: registered alike on every rank and its all-reduce correct */
static int run_reuse(struct shared* sh, int rank, ncclComm_t a, float* d, void* vmm, int cid) {
  struct rankres* me = &sh->r[rank];
  ncclWindow_t sentinel = (ncclWindow_t)(uintptr_t)0x5a5a5a5a, w = sentinel;
  double t0 = ng_now_us();
  ncclResult_t r = ncclCommWindowRegister(a, vmm, 1 << 21, &w, NCCL_WIN_COLL_SYMMETRIC);
  double a_us = ng_now_us() - t0;
  me->a_reg = r != ncclSuccess ? C_ERR : w ? C_REG : C_NULL;
  me->a_stale = r != ncclSuccess && w != NULL;
  if (r != ncclSuccess) (void)ncclCommAbort(a); /* as an application does on an NCCL error */
  else {
    if (w) (void)ncclCommWindowDeregister(a, w);
    (void)ncclCommDestroy(a);
  }
  pthread_mutex_lock(&ab.mu);
  ab.phase = 2;
  pthread_mutex_unlock(&ab.mu);
  if (rank == 0) {
    ncclGetUniqueId(&sh->id2);
    __atomic_store_n(&sh->ready2, 1, __ATOMIC_RELEASE);
  } else {
    while (!__atomic_load_n(&sh->ready2, __ATOMIC_ACQUIRE)) usleep(100);
  }
  ncclComm_t b = NULL;
  if ((r = ncclCommInitRank(&b, nranks, sh->id2, rank)) != ncclSuccess) {
    /* the armed hit failed NCCL's own init of B (ncclguard forwards it and adds nothing): this rank has an
     * error, as with NCCL alone, and its peers wait in NCCL's init, which has no timeout: counted apart */
    (void)cid;
    me->binit_failed = 1;
    me->reg_done = 1;
    me->rc = r, me->reg = C_ERR;
    snprintf(me->ar, sizeof me->ar, "error");
    me->done = 1;
    exit(0);
  }
  me->reused = b == a;
  w = sentinel;
  t0 = ng_now_us();
  r = ncclCommWindowRegister(b, vmm, 1 << 21, &w, NCCL_WIN_COLL_SYMMETRIC);
  me->reg_us = ng_now_us() - t0;
  if (a_us > me->reg_us) me->reg_us = a_us; /* the bound: each registration's */
  me->reg_done = 1;
  me->rc = r;
  me->reg = r != ncclSuccess ? C_ERR : w ? C_REG : C_NULL;
  me->stale_win = r != ncclSuccess && w != NULL && w != sentinel;
  if (r != ncclSuccess && !no_revoke_checked) {
    int v = 0;
    ncclGetVersion(&v);
    no_revoke = v < 22807, no_revoke_checked = 1;
  }
  const char* ar = r != ncclSuccess && no_revoke ? (ncclCommAbort(b), b = NULL, "error")
                                                 : ng_app_allreduce(b, d, COUNT, rank, nranks, timeout_ms + 500);
  snprintf(me->ar, sizeof me->ar, "%s", ar);
  if (b && r == ncclSuccess && w) ncclCommWindowDeregister(b, w);
  if (b) (void)(r != ncclSuccess || strcmp(ar, "ok") ? ncclCommAbort(b) : ncclCommDestroy(b));
  pthread_mutex_lock(&ab.mu);
  me->fired_a = ab.fired_phase != 2; /* (the armed hit may come in B's registration or teardown) */
  pthread_mutex_unlock(&ab.mu);
  me->threads_after = threads_staying(me->thread_names, sizeof me->thread_names);
  me->done = 1;
  exit(0);
}

static int run_rank(struct shared* sh, int rank, int victim, long k, int cid) {
  char b[64];
  snprintf(b, sizeof b, "%g", timeout_ms / 1000.0);
  setenv("NCCLGUARD_TIMEOUT", b, 1);
  int ndev = 1;
  cudaGetDeviceCount(&ndev);
  cudaSetDevice(rank % (ndev > 0 ? ndev : 1));
  struct rankres* me = &sh->r[rank];
  me->threads_before = threads();
  if (rank == 0) {
    ncclGetUniqueId(&sh->id);
    __atomic_store_n(&sh->ready, 1, __ATOMIC_RELEASE);
  } else {
    while (!__atomic_load_n(&sh->ready, __ATOMIC_ACQUIRE)) usleep(100);
  }
  ncclComm_t c = NULL;
  ncclResult_t r;
  int nonblocking = !strcmp(scen, "nonblocking");
  if (nonblocking) {
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    r = ncclCommInitRankConfig(&c, nranks, sh->id, rank, &cfg);
    if (r == ncclInProgress) r = ncclSuccess;
  } else {
    r = ncclCommInitRank(&c, nranks, sh->id, rank);
  }
  if (r != ncclSuccess) {
    ng_say("failwalk: VIOLATION case=%d rank=%d: ncclCommInitRank %s", cid, rank, ng_rc_name(r));
    return 3;
  }
  float* d = NULL;
  cudaMalloc((void**)&d, COUNT * sizeof(float));
  void* vmm = NULL;
  ncclMemAlloc(&vmm, 4 << 20);
  int warm = strcmp(scen, "cold") && !nonblocking;
  if (warm && strcmp(ng_app_allreduce(c, d, COUNT, rank, nranks, 10000), "ok")) {
    ng_say("failwalk: VIOLATION case=%d rank=%d: the warm-up all-reduce failed", cid, rank);
    return 3;
  }
  /* armed from here: the walk covers what ncclguard does for the scenario, not the set-up */
  if (rank == victim && k >= 0) {
    char fp[128], rep[300];
    /* FAILWALK_FP=NAME: the k-th hit of that failpoint instead of the k-th of any (reproducing one case) */
    snprintf(fp, sizeof fp, "%s:%ld%s", getenv("FAILWALK_FP") ? getenv("FAILWALK_FP") : "*", k, mode_abort ? ":hook" : "");
    snprintf(rep, sizeof rep, "%s/c%d.r%d", repdir, cid, rank);
    setenv("NG_FAILPOINT_REPORT", rep, 1);
    setenv("NG_FAILPOINT", fp, 1);
  }
  ncclWindow_t sentinel = (ncclWindow_t)(uintptr_t)0x5a5a5a5a;
  ncclWindow_t w[2] = {sentinel, sentinel};
  ncclResult_t r2 = ncclSuccess;
  pthread_t abort_thread;
  int have_abort_thread = 0;
  ab.phase = 1;
  if (mode_abort) { /* on every rank and in the counting run too, so that their threads compare alike */
    ab.c = c;
    have_abort_thread = pthread_create(&abort_thread, NULL, abort_main, NULL) == 0;
  }
  if (mode_reuse) return run_reuse(sh, rank, c, d, vmm, cid);
  double t0 = ng_now_us();
  int nostart = 0;
  if ((!strcmp(scen, "group") || !strcmp(scen, "appgroup")) && (r = ncclGroupStart()) != ncclSuccess) {
    /* the application's group could not start (NCCL refused its ncclGroupStart): it registers nothing and
     * gives the communicator up, as an application does on an NCCL error; a peer that registers meanwhile
     * must end with an error within the bound */
    nostart = 1;
    w[0] = w[1] = NULL;
  } else if (!strcmp(scen, "group") || !strcmp(scen, "appgroup")) {
    if (!strcmp(scen, "appgroup")) {
      ncclRedOp_t op = rank == victim ? (ncclRedOp_t)99 : ncclSum; /* invalid on the rank under test */
      ncclAllReduce(d, d, COUNT, ncclFloat, op, c, NULL);
    }
    r = ncclCommWindowRegister(c, vmm, 1 << 21, &w[0], NCCL_WIN_COLL_SYMMETRIC);
    if (!strcmp(scen, "group"))
      r2 = ncclCommWindowRegister(c, (char*)vmm + (2 << 20), 1 << 21, &w[1], NCCL_WIN_COLL_SYMMETRIC);
    ncclResult_t e = ncclGroupEnd();
    if (r == ncclSuccess) r = e;
    if (r2 == ncclSuccess) r2 = e;
    if (!strcmp(scen, "appgroup")) { /* the group's own all-reduce: waited for, bounded (a dropped peer never comes) */
      double until = ng_now_us() + (timeout_ms + 500) * 1e3;
      cudaError_t q;
      while ((q = cudaStreamQuery(NULL)) == cudaErrorNotReady && ng_now_us() < until) usleep(500);
      nostart = q == cudaErrorNotReady; /* still running: the application gives the communicator up */
    }
  } else {
    r = ncclCommWindowRegister(c, vmm, 1 << 21, &w[0], NCCL_WIN_COLL_SYMMETRIC);
  }
  me->reg_us = ng_now_us() - t0;
  if (have_abort_thread) {
    pthread_mutex_lock(&ab.mu);
    ab.reg_returned = 1;
    if (!ab.go) ab.quit = 1;
    pthread_cond_broadcast(&ab.cv);
    pthread_mutex_unlock(&ab.mu);
    pthread_join(abort_thread, NULL); /* the abort, if it ran, has returned */
    me->aborted = ab.go;
    me->late = ab.late;
  }
  me->reg_done = 1;
  me->rc = r;
  me->reg = r != ncclSuccess ? C_ERR : w[0] ? C_REG : C_NULL;
  me->stale_win = (r != ncclSuccess && w[0] != NULL) || (r2 != ncclSuccess && w[1] != NULL && w[1] != sentinel);
  int failed = r != ncclSuccess || r2 != ncclSuccess;
  if (!strcmp(scen, "dereg") && !failed && w[0]) {
    /* deregistration is local in NCCL (not collective): its result is this rank's alone, not an outcome the
     * ranks must share; what is checked is what follows (the all-reduce, the bound, nothing left) */
    (void)ncclCommWindowDeregister(c, w[0]);
    w[0] = NULL;
  }
  /* Where NCCL cannot revoke (before 2.28.7) ncclguard cannot stop a communicator it gives up; its WARN tells
   * the application to abort it on every rank before any other collective: this application does so after
   * any registration error (where NCCL can revoke, it runs its all-reduce, which must fail or be right) */
  if (failed && !no_revoke_checked) {
    int v = 0;
    ncclGetVersion(&v);
    no_revoke = v < 22807, no_revoke_checked = 1;
  }
  if (failed && no_revoke) nostart = 1;
  if (me->aborted) { /* the communicator is gone: no all-reduce, no deregistration, no teardown */
    snprintf(me->ar, sizeof me->ar, "aborted");
    me->threads_after = threads_staying(me->thread_names, sizeof me->thread_names);
    me->done = 1;
    exit(0);
  }
  const char* ar = nostart ? (ncclCommAbort(c), c = NULL, r == ncclSuccess ? "hang" : "error")
                            : ng_app_allreduce(c, d, COUNT, rank, nranks, timeout_ms + 500);
  snprintf(me->ar, sizeof me->ar, "%s", ar);
  for (int i = 0; i < 2; i++)
    if (!failed && w[i] && w[i] != sentinel) ncclCommWindowDeregister(c, w[i]);
  if (c) (void)(failed || strcmp(ar, "ok") ? ncclCommAbort(c) : ncclCommDestroy(c));
  me->threads_after = threads_staying(me->thread_names, sizeof me->thread_names);
  me->done = 1;
  exit(0); /* (exit, not _exit: the failpoint report is written at exit) */
}

/* One case: N ranks, failpoint k armed on `victim` (k = 0: count only; -1: none). Returns the hits the
 * victim made (from its report) or -1, and adds to *viol. */
static long run_case(int victim, long k, int cid, int* viol, int* fired, int* split) {
  struct shared* sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (sh == MAP_FAILED) return -1;
  memset((void*)sh, 0, sizeof *sh);
  pid_t pid[MAXR];
  for (int r = 0; r < nranks; r++) {
    pid[r] = fork();
    if (pid[r] == 0) _exit(run_rank(sh, r, victim, k, cid));
  }
  int bad = 0, stuck = 0;
  *split = 0;
  char why[512] = "";
  /* the case's own bound: registration, the all-reduce's wait and teardown, with room to spare */
  double start = ng_now_us(), until = start + (6.0 * timeout_ms + 1500) * 1e3 + 8e6;
  /* a registration still running well past its own bound (3 T and a first round's grace) is stuck there */
  double reg_until = start + (3.0 * timeout_ms + 1000) * 1e3 + 3e6;
  int st[MAXR], left = nranks;
  for (int r = 0; r < nranks; r++) st[r] = -1;
  while (left && ng_now_us() < until) {
    int reg_stuck = 0;
    for (int r = 0; r < nranks; r++) reg_stuck |= st[r] == -1 && !sh->r[r].reg_done;
    if (reg_stuck && ng_now_us() > reg_until) break;
    for (int r = 0; r < nranks; r++)
      if (st[r] == -1 && waitpid(pid[r], &st[r], WNOHANG) == pid[r]) left--;
    if (left) usleep(2000);
  }
  for (int r = 0; r < nranks; r++)
    if (st[r] == -1) {
      stuck = 1;
      kill(pid[r], SIGKILL);
      waitpid(pid[r], &st[r], 0);
    }
  int binit_failed = 0;
  for (int r = 0; r < nranks; r++) binit_failed |= sh->r[r].binit_failed;
  /* nonblocking: the communicator runs no collective before the registration (no warm-up where readiness is
   * not seen), so the application's all-reduce after it is its first, whose connection setup NCCL waits for on
   * the host with no timeout: where a peer's registration failed and it stopped the communicator (the last
   * round's residual case), the all-reduce of a rank whose registration succeeded waits there, as NCCL alone's
   * first collective waits for a peer that never comes (collectives are not intercepted): counted apart too */
  int first_coll_wait = 0;
  if (stuck && !strcmp(scen, "nonblocking")) {
    int peer_err = 0, only_in_ar = 1;
    for (int r = 0; r < nranks; r++) {
      peer_err |= sh->r[r].reg_done && sh->r[r].reg == C_ERR;
      if (st[r] == -1 || (WIFSIGNALED(st[r]) && WTERMSIG(st[r]) == SIGKILL && !sh->r[r].done))
        only_in_ar &= sh->r[r].reg_done && sh->r[r].reg != C_ERR;
    }
    first_coll_wait = peer_err && only_in_ar;
  }
  if (stuck && (no_revoke_version() || binit_failed || first_coll_wait)) {
    /* where NCCL cannot revoke, a rank whose own step failed after the last round leaves its peers in NCCL's
     * registration exchange, which has no timeout (NCCL alone, when one rank fails its registration
     * locally, does the same): counted apart; likewise (reuse) an init of B that failed on one rank */
    *split = 2;
    munmap(sh, sizeof *sh);
    return -1;
  }
  for (int r = 0; r < nranks; r++) {
    if (!WIFEXITED(st[r]) || WEXITSTATUS(st[r]) || !sh->r[r].done) {
      bad++;
      snprintf(why + strlen(why), sizeof why - strlen(why), " rank %d ended with %s %d;", r,
               WIFEXITED(st[r]) ? "exit" : "signal", WIFEXITED(st[r]) ? WEXITSTATUS(st[r]) : WTERMSIG(st[r]));
    }
  }
  if (!bad) {
    int same = 1, all_err_ar = 1, some_err = 0, residual = 1;
    double bound = 3 * timeout_ms * 1e3 + (timeout_ms * 250 < 1e6 ? 1e6 : timeout_ms * 250.0) + 2e6;
    for (int r = 0; r < nranks; r++) {
      struct rankres* x = &sh->r[r];
      same &= x->reg == sh->r[0].reg;
      all_err_ar &= !strcmp(x->ar, "error");
      some_err |= x->reg == C_ERR;
      /* (a rank that failed after the last round stops its channel only: its window stays inside NCCL, as on the
       * peers, so the all-reduce is right there too) */
      residual &= x->reg == C_ERR ? !strcmp(x->ar, "error") || !strcmp(x->ar, "ok") : !strcmp(x->ar, "ok") || !strcmp(x->ar, "hang");
    }
    /* abort: a rank that aborted has no outcome to share, and its peers' all-reduce may find no partner (NCCL
     * alone: an all-reduce whose peer aborted never completes): error, correct or that wait, never wrong */
    int any_abort = 0, untouched = mode_reuse;
    for (int r = 0; r < nranks; r++) any_abort |= sh->r[r].aborted, untouched &= sh->r[r].fired_a;
    if (!same && !all_err_ar && residual && !any_abort) *split = 1;
    for (int r = 0; r < nranks; r++) {
      struct rankres* x = &sh->r[r];
      const char* v = NULL;
      if (!strcmp(x->ar, "wrong")) v = "wrong data";
      else if (!strcmp(x->ar, "hang") && !some_err && !any_abort) v = "the all-reduce did not complete after a clean registration";
      else if (x->stale_win || x->a_stale) v = "an error left *win set";
      else if (x->reg_us > bound) v = "the registration overran its bound";
      else if (!same && !all_err_ar && !residual && !any_abort) v = "the ranks ended with different outcomes";
      else if (untouched && (x->reg == C_ERR || !same || strcmp(x->ar, "ok")))
        v = "communicator B, at A's address, was touched by what was done for A (its registration or all-reduce failed)";
      else if (base_threads >= 0 && x->threads_after > base_threads + 2) v = "threads left behind";
      if (v) {
        bad++;
        snprintf(why + strlen(why), sizeof why - strlen(why), " rank %d: %s%s%s%s;", r, v,
                 x->threads_after > 0 ? " (" : "", x->threads_after > 0 ? x->thread_names : "", x->threads_after > 0 ? ")" : "");
      }
    }
  }
  long hits = -1;
  *fired = 0;
  char rep[300], line[200];
  snprintf(rep, sizeof rep, "%s/c%d.r%d", repdir, cid, victim);
  FILE* f = fopen(rep, "r");
  char fname[128] = "";
  if (f) {
    if (k == 0) nk = 0;
    while (fgets(line, sizeof line, f)) {
      long first, count;
      if (k == 0 && sscanf(line, "run %ld %ld", &first, &count) == 2)
        for (long q = 0; q < count && nk < (int)(sizeof klist / sizeof klist[0]); q++)
          if (every || q < 2 || q == count - 1) klist[nk++] = first + q;
      if (!strncmp(line, "total ", 6)) hits = atol(line + 6);
      if (!strncmp(line, "fired ", 6)) *fired = 1, sscanf(line + 6, "%127s", fname);
    }
    fclose(f);
    unlink(rep);
  }
  if (bad || verbose || (*split && getenv("FAILWALK_SHOW_SPLIT"))) {
    char rs[400] = "";
    for (int r = 0; r < nranks; r++)
      snprintf(rs + strlen(rs), sizeof rs - strlen(rs), " r%d=%s/%s/%.0fms/threads%d->%d%s%s", r, ng_rc_name(sh->r[r].rc),
               sh->r[r].ar, sh->r[r].reg_us / 1e3, sh->r[r].threads_before, sh->r[r].threads_after,
               sh->r[r].late ? "/late" : "", mode_reuse ? (sh->r[r].reused ? "/reused" : "/new-address") : "");
    ng_say("failwalk: %s scenario=%s rank=%d k=%ld hits=%ld fp=%s pid0=%d:%s%s", bad ? "VIOLATION" : *split ? "split" : "case",
           scen, victim, k, hits, fname[0] ? fname : "-", (int)pid[0], rs, why);
  }
  *viol += bad > 0;
  case_note = 0; /* the walk's counts: abort cases where nothing was aborted; reuse cases with B elsewhere */
  for (int r = 0; r < nranks; r++)
    case_note |= (mode_abort && r == victim && k > 0 && !sh->r[r].aborted) || (mode_reuse && !sh->r[r].reused);
  last_threads = 0;
  for (int r = 0; r < nranks; r++)
    if (sh->r[r].threads_after > last_threads) last_threads = sh->r[r].threads_after;
  munmap(sh, sizeof *sh);
  return hits;
}

int main(int argc, char** argv) {
  int only_rank = -1;
  long only_k = -1;
  for (int i = 1; i < argc; i++) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "-v")) verbose = 1;
    else if (!strcmp(a, "--every")) every = 1;
    else if (!v) return 2;
    else if (!strcmp(a, "-s")) scen = v, i++;
    else if (!strcmp(a, "-n")) nranks = atoi(v), i++;
    else if (!strcmp(a, "--timeout-ms")) timeout_ms = atoi(v), i++;
    else if (!strcmp(a, "--jobs")) jobs = atoi(v), i++;
    else if (!strcmp(a, "--rank")) only_rank = atoi(v), i++;
    else if (!strcmp(a, "--k")) only_k = atol(v), i++;
    else return 2;
  }
  mode_abort = !strcmp(scen, "abort"), mode_reuse = !strcmp(scen, "reuse");
  if (mode_reuse) setenv("FAKE_NCCL_REUSE_COMM_ADDR", "1", 1); /* the fake hands B the memory of A */
  if (nranks < 2 || nranks > MAXR || jobs < 1) {
    fprintf(stderr, "failwalk: -n 2..%d, --jobs 1+\n", MAXR);
    return 2;
  }
  snprintf(repdir, sizeof repdir, "%s/failwalk.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  if (!mkdtemp(repdir)) return 2;
  int viol = 0, cases = 0, fired, splits = 0, split = 0, nccl_waits = 0, notes = 0;
  long max_hits = 0;
  int cid = 0;
  for (int victim = 0; victim < nranks; victim++) {
    if (only_rank >= 0 && victim != only_rank) continue;
    if (only_k >= 0) {
      run_case(victim, only_k, cid++, &viol, &fired, &split);
      if (split == 2) nccl_waits++;
      else splits += split;
      cases++;
      continue;
    }
    base_threads = -1;
    long hits = run_case(victim, 0, cid++, &viol, &fired, &split); /* counting run: k = 0 fails nothing */
    if (split == 2) nccl_waits++;
    else splits += split;
    base_threads = last_threads;
    cases++;
    if (hits < 0) {
      ng_say("failwalk: VIOLATION scenario=%s rank=%d: no failpoint report (not a FAILPOINTS=1 build?)", scen, victim);
      viol++;
      continue;
    }
    if (hits > max_hits) max_hits = hits;
    /* the hits of the list, P cases at a time */
    for (int i = 0; i < nk;) {
      int n = 0;
      pid_t kids[64];
      for (; n < jobs && n < 64 && i < nk; n++, i++) {
        kids[n] = fork();
        if (kids[n] == 0) {
          int v = 0, f = 0, sp = 0;
          run_case(victim, klist[i], cid + n, &v, &f, &sp);
          _exit(v ? 1 : sp == 2 ? 4 : sp ? 3 : case_note ? 5 : 0);
        }
      }
      cid += n;
      for (int j = 0; j < n; j++) {
        int st;
        waitpid(kids[j], &st, 0);
        if (WIFEXITED(st) && WEXITSTATUS(st) == 5) notes++;
        else if (WIFEXITED(st) && WEXITSTATUS(st) == 4) nccl_waits++;
        else if (WIFEXITED(st) && WEXITSTATUS(st) == 3) splits++;
        else if (!WIFEXITED(st) || WEXITSTATUS(st)) viol++;
        cases++;
      }
    }
  }
  rmdir(repdir);
  char note[64] = "";
  if (mode_abort) snprintf(note, sizeof note, " not_aborted=%d", notes); /* hits after the registration returned */
  if (mode_reuse) snprintf(note, sizeof note, " not_reused=%d", notes);  /* B not at A's address (A still busy) */
  ng_say("failwalk: RESULT scenario=%s ranks=%d cases=%d violations=%d split=%d nccl_wait=%d max_hits=%ld%s%s", scen,
         nranks, cases, viol, splits, nccl_waits, max_hits, note, every ? " every" : "");
  return viol ? 1 : 0;
}
