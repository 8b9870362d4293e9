/* soak: many window register/deregister cycles on one communicator, then many communicator
 * create/destroy cycles (each with one registration), watching memory and descriptors.
 * usage: soak [-n 1|2] [-c REG_CYCLES] [-k COMM_CYCLES] [--size BYTES]
 *             [--max-rss-growth KB] [--max-fd-growth N]
 *   -n 1: one rank (ncclCommInitAll, ndev=1); -n 2: two threads, ncclCommInitRank (default 1)
 *   -c register/deregister cycles (default 200), -k communicator cycles (default 20)
 * Prints "soak: <point> VmRSS=<kB> kB fds=<n>" at start (after the first communicator and one
 * warm-up cycle), middle, after the register cycles and at the end; then
 * "soak: RESULT ok|fail ..." (fail: a call failed or a growth limit was exceeded). */
#define _GNU_SOURCE
#include "common.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int nranks = 1, reg_cycles = 200, comm_cycles = 20;
static size_t size = 2u << 20;
static ncclUniqueId gid;
static pthread_barrier_t bar;
static int failures;
static long rss0 = -1, rss_end = -1;
static int fd0 = -1, fd_end = -1;

static void sample(const char* point) {
  long rss = ng_vmrss_kb();
  int fds = ng_fd_count();
  ng_say("soak: %s VmRSS=%ld kB fds=%d", point, rss, fds);
  if (!strcmp(point, "start")) { rss0 = rss; fd0 = fds; }
  if (!strcmp(point, "end")) { rss_end = rss; fd_end = fds; }
}

static int ok(int rank, const char* what, ncclResult_t rc) {
  if (rc == ncclSuccess) return 1;
  ng_say("soak: rank %d: %s -> %s \"%s\"", rank, what, ng_rc_name(rc), ncclGetErrorString(rc));
  __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);
  return 0;
}

static void sync_sample(int rank, const char* point) {
  if (nranks > 1) pthread_barrier_wait(&bar);
  if (rank == 0) sample(point);
  if (nranks > 1) pthread_barrier_wait(&bar);
}

static int reg_dereg(int rank, ncclComm_t c, void* buf) {
  ncclWindow_t w = NULL;
  if (!ok(rank, "ncclCommWindowRegister", ncclCommWindowRegister(c, buf, size, &w, NCCL_WIN_COLL_SYMMETRIC))) return -1;
  return ok(rank, "ncclCommWindowDeregister", ncclCommWindowDeregister(c, w)) ? 0 : -1;
}

static void* worker(void* arg) {
  int rank = (int)(long)arg, ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) { ok(rank, "cudaGetDeviceCount", ncclUnhandledCudaError); return NULL; }
  int dev = rank % ndev;
  cudaSetDevice(dev);
  void* buf = NULL;
  if (!ok(rank, "ncclMemAlloc", ncclMemAlloc(&buf, size))) return NULL;
  for (int k = 0; k <= comm_cycles; k++) {
    ncclComm_t c = NULL;
    if (nranks > 1) {
      if (rank == 0) ok(rank, "ncclGetUniqueId", ncclGetUniqueId(&gid));
      pthread_barrier_wait(&bar);
      if (!ok(rank, "ncclCommInitRank", ncclCommInitRank(&c, nranks, gid, rank))) break;
    } else if (!ok(rank, "ncclCommInitAll", ncclCommInitAll(&c, 1, &dev))) {
      break;
    }
    if (k == 0) {
      reg_dereg(rank, c, buf);
      sync_sample(rank, "start");
      for (int i = 0; i < reg_cycles; i++) {
        if (reg_dereg(rank, c, buf)) break;
        if (i == reg_cycles / 2) sync_sample(rank, "middle");
      }
      sync_sample(rank, "after-register-cycles");
    } else {
      reg_dereg(rank, c, buf);
    }
    ok(rank, "ncclCommDestroy", ncclCommDestroy(c));
    if (k == comm_cycles / 2 && k > 0) sync_sample(rank, "middle-of-comm-cycles");
  }
  ok(rank, "ncclMemFree", ncclMemFree(buf));
  sync_sample(rank, "end");
  return NULL;
}

int main(int argc, char** argv) {
  long max_rss = -1, max_fd = -1;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-n") && i + 1 < argc) nranks = atoi(argv[++i]);
    else if (!strcmp(argv[i], "-c") && i + 1 < argc) reg_cycles = atoi(argv[++i]);
    else if (!strcmp(argv[i], "-k") && i + 1 < argc) comm_cycles = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--size") && i + 1 < argc) { if (ng_parse_size(argv[++i], &size)) return 2; }
    else if (!strcmp(argv[i], "--max-rss-growth") && i + 1 < argc) max_rss = atol(argv[++i]);
    else if (!strcmp(argv[i], "--max-fd-growth") && i + 1 < argc) max_fd = atol(argv[++i]);
    else {
      fprintf(stderr, "usage: soak [-n 1|2] [-c REG_CYCLES] [-k COMM_CYCLES] [--size BYTES] [--max-rss-growth KB] [--max-fd-growth N]\n");
      return 2;
    }
  }
  if (nranks < 1 || nranks > 2 || reg_cycles < 0 || comm_cycles < 0) return 2;
  double t0 = ng_now_us();
  if (nranks == 1) {
    worker((void*)0L);
  } else {
    pthread_t th[2];
    pthread_barrier_init(&bar, NULL, 2);
    for (long r = 0; r < 2; r++) pthread_create(&th[r], NULL, worker, (void*)r);
    for (int r = 0; r < 2; r++) pthread_join(th[r], NULL);
    pthread_barrier_destroy(&bar);
  }
  long drss = rss0 >= 0 && rss_end >= 0 ? rss_end - rss0 : 0;
  int dfd = fd0 >= 0 && fd_end >= 0 ? fd_end - fd0 : 0;
  int over = (max_rss >= 0 && drss > max_rss) || (max_fd >= 0 && dfd > max_fd);
  ng_say("soak: RESULT %s nranks=%d reg_cycles=%d comm_cycles=%d failures=%d rss_growth=%ld kB fd_growth=%d %.1f s%s",
         failures || over ? "fail" : "ok", nranks, reg_cycles, comm_cycles, failures, drss, dfd, (ng_now_us() - t0) / 1e6,
         over ? " (growth over the limit)" : "");
  return failures || over ? 1 : 0;
}
