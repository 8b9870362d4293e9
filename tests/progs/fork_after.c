/* fork_after: NCCL communicators and windows exist, then the process forks.
 * The child proves the library still works there: a registration with a NULL communicator (must
 * return, with an error, not crash), then a fresh 1-rank communicator of its own (ncclCommInitAll,
 * ndev=1) with a window, an all-reduce and teardown. The parent meanwhile uses its windows again and
 * tears down normally. --busy: a parent thread registers/deregisters in a loop on a separate 1-rank
 * communicator while fork() happens (catches a lock held across fork).
 * Real CUDA cannot be used in a child forked after CUDA was initialised: there the child reports
 * the fresh-communicator part as skipped (CUDA unusable) and only the NULL-comm part counts.
 * usage: fork_after [-n NRANKS] [--size BYTES] [--busy] [--no-null] [--timeout SEC]
 * Prints "fork_after parent|child: RESULT ok|fail ..."; exit 0 when both are ok. */
#define _GNU_SOURCE
#include "common.h"
#include <execinfo.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define FA_MAX 16
static const char* who = "parent";
static int bad;

static ncclResult_t logged(const char* what, ncclResult_t rc, double us) {
  ng_say("fork_after %s: %s -> %s \"%s\" %.0f us", who, what, ng_rc_name(rc), ncclGetErrorString(rc), us);
  return rc;
}
#define NC(what, expr) ({ double t0_ = ng_now_us(); ncclResult_t rc_ = (expr); logged((what), rc_, ng_now_us() - t0_); })
#define MUST(what, expr) do { if (NC(what, expr) != ncclSuccess) bad++; } while (0)

struct set {
  int n, devs[FA_MAX];
  ncclComm_t comm[FA_MAX];
  void* buf[FA_MAX];
  ncclWindow_t win[FA_MAX];
  cudaStream_t st[FA_MAX];
};

static int set_up(struct set* s, int n, int ndev, size_t size) {
  memset(s, 0, sizeof *s);
  s->n = n;
  for (int i = 0; i < n; i++) s->devs[i] = i % ndev;
  if (NC("ncclCommInitAll", ncclCommInitAll(s->comm, n, s->devs)) != ncclSuccess) return -1;
  for (int i = 0; i < n; i++) {
    cudaSetDevice(s->devs[i]);
    if (cudaStreamCreate(&s->st[i]) != cudaSuccess) return -1;
    if (NC("ncclMemAlloc", ncclMemAlloc(&s->buf[i], size)) != ncclSuccess) return -1;
  }
  int err = 0;
  if (NC("ncclGroupStart", ncclGroupStart())) err++;
  for (int i = 0; i < n; i++)
    if (NC("ncclCommWindowRegister", ncclCommWindowRegister(s->comm[i], s->buf[i], size, &s->win[i], NCCL_WIN_COLL_SYMMETRIC))) err++;
  if (NC("ncclGroupEnd [registration]", ncclGroupEnd())) err++;
  return err ? -1 : 0;
}

static int all_reduce(struct set* s, size_t size) {
  size_t count = size / sizeof(float);
  float* h = malloc(count * sizeof(float));
  int err = 0;
  if (!h) return -1;
  for (int i = 0; i < s->n; i++) {
    for (size_t j = 0; j < count; j++) h[j] = (float)(i + 1);
    cudaSetDevice(s->devs[i]);
    if (cudaMemcpy(s->buf[i], h, count * sizeof(float), cudaMemcpyHostToDevice) != cudaSuccess) err++;
  }
  if (NC("ncclGroupStart", ncclGroupStart())) err++;
  for (int i = 0; i < s->n; i++)
    if (NC("ncclAllReduce", ncclAllReduce(s->buf[i], s->buf[i], count, ncclFloat, ncclSum, s->comm[i], s->st[i]))) err++;
  if (NC("ncclGroupEnd [all-reduce]", ncclGroupEnd())) err++;
  float want = (float)(s->n * (s->n + 1) / 2);
  for (int i = 0; i < s->n && !err; i++) {
    cudaSetDevice(s->devs[i]);
    if (cudaStreamSynchronize(s->st[i]) != cudaSuccess ||
        cudaMemcpy(h, s->buf[i], count * sizeof(float), cudaMemcpyDeviceToHost) != cudaSuccess) { err++; break; }
    for (size_t j = 0; j < count; j++)
      if (h[j] != want) { ng_say("fork_after %s: rank %d [%zu]=%g want %g", who, i, j, h[j], want); err++; break; }
  }
  free(h);
  return err ? -1 : 0;
}

static void tear_down(struct set* s) {
  for (int i = 0; i < s->n; i++) {
    cudaSetDevice(s->devs[i]);
    if (s->comm[i]) MUST("ncclCommWindowDeregister", ncclCommWindowDeregister(s->comm[i], s->win[i]));
    if (s->comm[i]) MUST("ncclCommDestroy", ncclCommDestroy(s->comm[i]));
    if (s->buf[i]) MUST("ncclMemFree", ncclMemFree(s->buf[i]));
    if (s->st[i]) cudaStreamDestroy(s->st[i]);
  }
}

/* --busy: register/deregister in a loop on a 1-rank communicator until stop is set */
static int stop; /* read and written atomically */
static ncclComm_t busy_comm;
static void* busy_buf;
static long busy_cycles;
static void* busy_loop(void* arg) {
  size_t size = *(size_t*)arg;
  cudaSetDevice(0);
  while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) {
    ncclWindow_t w = NULL;
    if (ncclCommWindowRegister(busy_comm, busy_buf, size, &w, NCCL_WIN_COLL_SYMMETRIC) != ncclSuccess) break;
    if (ncclCommWindowDeregister(busy_comm, w) != ncclSuccess) break;
    busy_cycles++;
  }
  return NULL;
}

/* A crash in the child names where it happened (a backtrace on stderr), then dies the same way. */
static void on_fault(int sig) {
  void* pc[32];
  int n = backtrace(pc, 32);
  static const char hdr[] = "fork_after child: fault, backtrace:\n";
  if (write(2, hdr, sizeof hdr - 1) < 0) {}
  backtrace_symbols_fd(pc, n, 2);
  signal(sig, SIG_DFL);
  raise(sig);
}

static int child(size_t size, int null_part, void* stale_buf) {
  who = "child";
  signal(SIGSEGV, on_fault);
  int failed = 0;
  if (null_part) {
    ncclWindow_t w = NULL;
    ncclResult_t rc = NC("ncclCommWindowRegister(comm=NULL)", ncclCommWindowRegister(NULL, stale_buf, size, &w, NCCL_WIN_COLL_SYMMETRIC));
    if (rc == ncclSuccess) { ng_say("fork_after child: NULL comm registration returned ncclSuccess (win=%p)", (void*)w); failed++; }
  }
  int ndev = 0;
  cudaError_t e = cudaGetDeviceCount(&ndev);
  if (e == cudaSuccess && ndev > 0) e = cudaSetDevice(0);
  if (e != cudaSuccess || ndev < 1) {
    ng_say("fork_after child: RESULT %s CUDA is not usable after fork (%s): fresh communicator skipped",
           failed ? "fail" : "ok", cudaGetErrorString(e));
    return failed ? 1 : 0;
  }
  struct set s;
  bad = 0;
  if (set_up(&s, 1, ndev, size) || all_reduce(&s, size)) failed++;
  tear_down(&s);
  failed += bad;
  ng_say("fork_after child: RESULT %s fresh 1-rank communicator: register, all-reduce, teardown", failed ? "fail" : "ok");
  return failed ? 1 : 0;
}

int main(int argc, char** argv) {
  int n = 2, busy = 0, null_part = 1, timeout = 60;
  size_t size = 2u << 20;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-n") && i + 1 < argc) n = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--size") && i + 1 < argc) { if (ng_parse_size(argv[++i], &size)) return 2; }
    else if (!strcmp(argv[i], "--busy")) busy = 1;
    else if (!strcmp(argv[i], "--no-null")) null_part = 0;
    else if (!strcmp(argv[i], "--timeout") && i + 1 < argc) timeout = atoi(argv[++i]);
    else { fprintf(stderr, "usage: fork_after [-n NRANKS] [--size BYTES] [--busy] [--no-null] [--timeout SEC]\n"); return 2; }
  }
  if (n < 1 || n > FA_MAX || size < 4) return 2;
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) { ng_say("fork_after parent: RESULT fail no CUDA device"); return 1; }
  struct set s;
  int failed = 0;
  if (set_up(&s, n, ndev, size) || all_reduce(&s, size)) failed++;

  pthread_t th;
  int busy_on = 0;
  if (busy && !failed) {
    int dev0 = 0;
    cudaSetDevice(0);
    if (NC("ncclCommInitAll(busy)", ncclCommInitAll(&busy_comm, 1, &dev0)) == ncclSuccess &&
        NC("ncclMemAlloc(busy)", ncclMemAlloc(&busy_buf, size)) == ncclSuccess &&
        pthread_create(&th, NULL, busy_loop, &size) == 0) {
      busy_on = 1;
      usleep(20000);
    } else {
      failed++;
    }
  }
  fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) { perror("fork_after: fork"); return 1; }
  if (pid == 0) exit(child(size, null_part, s.buf[0]));

  if (busy_on) {
    __atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
    pthread_join(th, NULL);
    ng_say("fork_after parent: busy thread did %ld register/deregister cycles", busy_cycles);
    MUST("ncclCommDestroy(busy)", ncclCommDestroy(busy_comm));
    MUST("ncclMemFree(busy)", ncclMemFree(busy_buf));
  }
  if (!failed && all_reduce(&s, size)) failed++;
  int st = 0, child_rc = -1;
  double t0 = ng_now_us();
  for (;;) {
    pid_t p = waitpid(pid, &st, WNOHANG);
    if (p == pid) {
      child_rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      if (WIFSIGNALED(st)) ng_say("fork_after child: RESULT fail killed by signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
      break;
    }
    if (ng_now_us() - t0 > timeout * 1e6) {
      kill(pid, SIGKILL);
      waitpid(pid, NULL, 0);
      ng_say("fork_after child: RESULT fail hang (killed after %d s)", timeout);
      child_rc = 124;
      break;
    }
    usleep(10000);
  }
  tear_down(&s);
  failed += bad;
  ng_say("fork_after parent: RESULT %s nranks=%d child exit %d", failed ? "fail" : "ok", n, child_rc);
  return failed || child_rc ? 1 : 0;
}
