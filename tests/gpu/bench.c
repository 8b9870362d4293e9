/* bench: what window registration buys and what ncclguard costs, one process per rank (one GPU
 * each). Run it once without and once with LD_PRELOAD=libncclguard.so; tests/gpu/run --bench
 * prints the ratios.
 * usage: bench [-n NRANKS (default 2)] [--iters N (200)] [--warmup N (20)] [--reg-iters N (20)]
 *              [--min-size BYTES (8)] [--max-size BYTES (64M)]
 * Rank 0 prints machine-readable lines:
 *   bench init_us=...                       ncclCommInitRank of the first communicator
 *   bench first_collective_us=... second_collective_us=...   1-float all-reduces on a fresh comm
 *   bench first_registration_us=... win=... registration as the first operation on a fresh comm
 *   bench reg_us=... dereg_us=... pairs=... median of register/deregister pairs at 2 MiB
 *   bench lat bytes=B win=US mem=US cuda=US  median all-reduce latency on a registered window,
 *                                            unregistered ncclMemAlloc memory, cudaMalloc memory
 *   bench window=PTR                         the window used for "win" (null: not registered)
 *   bench RESULT ok|fail ...
 * Latency: host clock around ncclAllReduce + cudaStreamSynchronize, per iteration. */
#define _GNU_SOURCE
#include "common.h"
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

struct shared { int ready; ncclUniqueId a, b; };
static int nranks = 2, iters = 200, warmup = 20, reg_iters = 20;
static size_t min_size = 8, max_size = 64u << 20;
static int rank, failed;

#define CK(what, expr) do { ncclResult_t rc_ = (expr); if (rc_ != ncclSuccess) { \
    ng_say("bench rank %d: %s -> %s \"%s\"", rank, what, ng_rc_name(rc_), ncclGetErrorString(rc_)); failed++; } } while (0)
#define CU(what, expr) do { cudaError_t e_ = (expr); if (e_ != cudaSuccess) { \
    ng_say("bench rank %d: %s -> %s", rank, what, cudaGetErrorString(e_)); failed++; } } while (0)

static double one_allreduce(void* buf, size_t count, ncclComm_t comm, cudaStream_t st) {
  double t0 = ng_now_us();
  CK("ncclAllReduce", ncclAllReduce(buf, buf, count, ncclFloat, ncclSum, comm, st));
  CU("cudaStreamSynchronize", cudaStreamSynchronize(st));
  return ng_now_us() - t0;
}

static double latency(void* buf, size_t bytes, ncclComm_t comm, cudaStream_t st, double* v) {
  size_t count = bytes / sizeof(float);
  for (int i = 0; i < warmup && !failed; i++) one_allreduce(buf, count, comm, st);
  for (int i = 0; i < iters && !failed; i++) v[i] = one_allreduce(buf, count, comm, st);
  return failed ? -1 : ng_median(v, iters);
}

static int run_rank(struct shared* sh) {
  int ndev = 0;
  CU("cudaGetDeviceCount", cudaGetDeviceCount(&ndev));
  if (failed || ndev < 1) return 1;
  CU("cudaSetDevice", cudaSetDevice(rank % ndev));
  cudaStream_t st;
  CU("cudaStreamCreate", cudaStreamCreate(&st));
  if (rank == 0) {
    int v = 0;
    ncclGetVersion(&v);
    CK("ncclGetUniqueId", ncclGetUniqueId(&sh->a));
    CK("ncclGetUniqueId", ncclGetUniqueId(&sh->b));
    __atomic_store_n(&sh->ready, failed ? -1 : 1, __ATOMIC_RELEASE);
    ng_say("bench nranks=%d nccl=%d devices=%d iters=%d warmup=%d", nranks, v, ndev, iters, warmup);
  } else {
    double t0 = ng_now_us();
    while (__atomic_load_n(&sh->ready, __ATOMIC_ACQUIRE) == 0 && ng_now_us() - t0 < 120e6) usleep(1000);
    if (sh->ready != 1) { ng_say("bench rank %d: no unique id", rank); return 1; }
  }
  if (failed) return 1;

  /* fresh communicator: cost of the first collective (connection setup) */
  ncclComm_t comm, fresh;
  double t0 = ng_now_us();
  CK("ncclCommInitRank", ncclCommInitRank(&comm, nranks, sh->a, rank));
  double init_us = ng_now_us() - t0;
  if (failed) return 1;
  float* one;
  CU("cudaMalloc", cudaMalloc((void**)&one, sizeof(float)));
  double first = one_allreduce(one, 1, comm, st), second = one_allreduce(one, 1, comm, st);
  if (rank == 0) {
    ng_say("bench init_us=%.0f", init_us);
    ng_say("bench first_collective_us=%.1f second_collective_us=%.1f", first, second);
  }

  /* another fresh communicator: registration as its first operation */
  void* rbuf = NULL;
  size_t rsize = 2u << 20;
  CK("ncclCommInitRank", ncclCommInitRank(&fresh, nranks, sh->b, rank));
  CK("ncclMemAlloc", ncclMemAlloc(&rbuf, rsize));
  if (failed) return 1;
  ncclWindow_t w = NULL;
  t0 = ng_now_us();
  CK("ncclCommWindowRegister(first op)", ncclCommWindowRegister(fresh, rbuf, rsize, &w, NCCL_WIN_COLL_SYMMETRIC));
  double first_reg = ng_now_us() - t0;
  if (rank == 0) ng_say("bench first_registration_us=%.0f win=%p", first_reg, (void*)w);
  CK("ncclCommWindowDeregister", ncclCommWindowDeregister(fresh, w));
  CK("ncclCommDestroy", ncclCommDestroy(fresh));

  /* register/deregister pairs at 2 MiB on the warm communicator */
  double* rv = calloc((size_t)reg_iters, sizeof(double));
  double* dv = calloc((size_t)reg_iters, sizeof(double));
  int pairs = 0;
  for (int i = 0; i < reg_iters && !failed; i++, pairs++) {
    w = NULL;
    t0 = ng_now_us();
    CK("ncclCommWindowRegister", ncclCommWindowRegister(comm, rbuf, rsize, &w, NCCL_WIN_COLL_SYMMETRIC));
    double t1 = ng_now_us();
    CK("ncclCommWindowDeregister", ncclCommWindowDeregister(comm, w));
    rv[i] = t1 - t0;
    dv[i] = ng_now_us() - t1;
  }
  if (rank == 0 && pairs)
    ng_say("bench reg_us=%.0f dereg_us=%.0f pairs=%d", ng_median(rv, pairs), ng_median(dv, pairs), pairs);
  free(rv);
  free(dv);
  CK("ncclMemFree", ncclMemFree(rbuf));

  /* latency: registered window, unregistered ncclMemAlloc memory, cudaMalloc memory */
  void *bw = NULL, *bm = NULL, *bc = NULL;
  CK("ncclMemAlloc", ncclMemAlloc(&bw, max_size));
  CK("ncclMemAlloc", ncclMemAlloc(&bm, max_size));
  CU("cudaMalloc", cudaMalloc(&bc, max_size));
  if (failed) return 1;
  CU("cudaMemset", cudaMemset(bw, 0, max_size));
  CU("cudaMemset", cudaMemset(bm, 0, max_size));
  CU("cudaMemset", cudaMemset(bc, 0, max_size));
  w = NULL;
  CK("ncclCommWindowRegister", ncclCommWindowRegister(comm, bw, max_size, &w, NCCL_WIN_COLL_SYMMETRIC));
  if (rank == 0) ng_say("bench window=%p", (void*)w);
  double* v = calloc((size_t)iters, sizeof(double));
  size_t sizes[40];
  int ns = 0;
  for (size_t s = min_size; s <= max_size && ns < 39; s *= 4) sizes[ns++] = s;
  if (ns && sizes[ns - 1] != max_size) sizes[ns++] = max_size;
  for (int i = 0; i < ns && !failed; i++) {
    double lw = latency(bw, sizes[i], comm, st, v);
    double lm = latency(bm, sizes[i], comm, st, v);
    double lc = latency(bc, sizes[i], comm, st, v);
    if (rank == 0 && !failed) ng_say("bench lat bytes=%zu win=%.1f mem=%.1f cuda=%.1f", sizes[i], lw, lm, lc);
  }
  free(v);
  CK("ncclCommWindowDeregister", ncclCommWindowDeregister(comm, w));
  CK("ncclCommDestroy", ncclCommDestroy(comm));
  CK("ncclMemFree", ncclMemFree(bw));
  CK("ncclMemFree", ncclMemFree(bm));
  CU("cudaFree", cudaFree(bc));
  CU("cudaFree", cudaFree(one));
  cudaStreamDestroy(st);
  return failed ? 1 : 0;
}

int main(int argc, char** argv) {
  for (int i = 1; i < argc; i += 2) {
    const char* a = argv[i];
    const char* nx = i + 1 < argc ? argv[i + 1] : NULL;
    if (!nx) goto usage;
    if (!strcmp(a, "-n")) nranks = atoi(nx);
    else if (!strcmp(a, "--iters")) iters = atoi(nx);
    else if (!strcmp(a, "--warmup")) warmup = atoi(nx);
    else if (!strcmp(a, "--reg-iters")) reg_iters = atoi(nx);
    else if (!strcmp(a, "--min-size")) { if (ng_parse_size(nx, &min_size)) goto usage; }
    else if (!strcmp(a, "--max-size")) { if (ng_parse_size(nx, &max_size)) goto usage; }
    else goto usage;
  }
  if (nranks < 1 || nranks > 64 || iters < 1 || warmup < 0 || reg_iters < 0 || min_size < 4 || max_size < min_size) goto usage;
  struct shared* sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (sh == MAP_FAILED) return 1;
  pid_t pid[64];
  for (int r = 0; r < nranks; r++) {
    pid[r] = fork();
    if (pid[r] == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      rank = r;
      exit(run_rank(sh));
    }
  }
  int bad = 0;
  for (int r = 0; r < nranks; r++) {
    int st;
    if (waitpid(pid[r], &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st)) {
      bad++;
      if (WIFSIGNALED(st)) ng_say("bench rank %d: killed by signal %d (%s)", r, WTERMSIG(st), strsignal(WTERMSIG(st)));
    }
  }
  ng_say("bench RESULT %s nranks=%d", bad ? "fail" : "ok", nranks);
  return bad ? 1 : 0;
usage:
  fprintf(stderr, "usage: bench [-n NRANKS] [--iters N] [--warmup N] [--reg-iters N] [--min-size BYTES] [--max-size BYTES]\n");
  return 2;
}
