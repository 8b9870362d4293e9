/* Self-test of the fakes: `selftest MODE` runs one scenario against the fake CUDA/NCCL (no
 * ncclguard) and prints "PASS MODE" or "FAIL MODE: why" (exit 0/1). Driven by tests/t_fake.sh. */
#define _GNU_SOURCE
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *mode;
#define FAIL(...) do { printf("FAIL %s: ", mode); printf(__VA_ARGS__); printf("\n"); fflush(stdout); _exit(1); } while (0)
#define NCHECK(call, want) do { ncclResult_t r_ = (call); if (r_ != (want)) FAIL("%s -> %d (%s), want %d; last error: %s", #call, (int)r_, ncclGetErrorString(r_), (int)(want), ncclGetLastError(NULL)); } while (0)
#define CCHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) FAIL("%s -> %s", #call, cudaGetErrorString(e_)); } while (0)

#define N 100000 /* elements: larger than the fake's staging area, so chunking is exercised */
static ncclUniqueId id;
static int nranks = 2;

/* collectives and a window on one rank; returns only when all checks pass */
static void rank_body(ncclComm_t comm, int rank)
{
  float *buf, *out;
  float *host = malloc(N * sizeof(float) * 2);
  NCHECK(ncclMemAlloc((void **)&buf, N * sizeof(float)), ncclSuccess);
  CCHECK(cudaMalloc((void **)&out, 2 * N * sizeof(float)));
  for (int i = 0; i < N; i++) host[i] = (float)(rank + 1) * (float)(i % 7);
  CCHECK(cudaMemcpy(buf, host, N * sizeof(float), cudaMemcpyHostToDevice));
  cudaStream_t s;
  CCHECK(cudaStreamCreate(&s));
  ncclWindow_t win = NULL;
  NCHECK(ncclCommWindowRegister(comm, buf, N * sizeof(float), &win, NCCL_WIN_COLL_SYMMETRIC), ncclSuccess);
  if (!win) FAIL("rank %d: NULL window", rank);
  NCHECK(ncclAllReduce(buf, buf, N, ncclFloat, ncclSum, comm, s), ncclSuccess); /* registered, in place */
  CCHECK(cudaStreamSynchronize(s));
  CCHECK(cudaMemcpy(host, buf, N * sizeof(float), cudaMemcpyDeviceToHost));
  float tri = (float)(nranks * (nranks + 1) / 2);
  for (int i = 0; i < N; i++) if (host[i] != tri * (float)(i % 7)) FAIL("allreduce[%d] = %g, want %g", i, host[i], tri * (float)(i % 7));
  int iv = rank + 10, *ib, ir;
  CCHECK(cudaMalloc((void **)&ib, 2 * sizeof(int)));
  CCHECK(cudaMemcpy(ib, &iv, sizeof iv, cudaMemcpyHostToDevice));
  NCHECK(ncclAllReduce(ib, ib + 1, 1, ncclInt32, ncclMax, comm, s), ncclSuccess); /* unregistered */
  CCHECK(cudaStreamSynchronize(s));
  CCHECK(cudaMemcpy(&ir, ib + 1, sizeof ir, cudaMemcpyDeviceToHost));
  if (ir != nranks - 1 + 10) FAIL("max = %d", ir);
  NCHECK(ncclAllGather(ib, out, 1, ncclInt32, comm, s), ncclSuccess);
  CCHECK(cudaStreamSynchronize(s));
  int g[64];
  CCHECK(cudaMemcpy(g, out, (size_t)nranks * sizeof(int), cudaMemcpyDeviceToHost));
  for (int r = 0; r < nranks; r++) if (g[r] != r + 10) FAIL("allgather[%d] = %d", r, g[r]);
  /* send/recv ring */
  int peer_to = (rank + 1) % nranks, peer_from = (rank + nranks - 1) % nranks, got = -1;
  NCHECK(ncclGroupStart(), ncclSuccess);
  NCHECK(ncclSend(ib, 1, ncclInt32, peer_to, comm, s), ncclSuccess);
  NCHECK(ncclRecv(ib + 1, 1, ncclInt32, peer_from, comm, s), ncclSuccess);
  NCHECK(ncclGroupEnd(), ncclSuccess);
  CCHECK(cudaStreamSynchronize(s));
  CCHECK(cudaMemcpy(&got, ib + 1, sizeof got, cudaMemcpyDeviceToHost));
  if (got != peer_from + 10) FAIL("recv %d, want %d", got, peer_from + 10);
  NCHECK(ncclCommWindowDeregister(comm, win), ncclSuccess);
  NCHECK(ncclCommDestroy(comm), ncclSuccess);
  NCHECK(ncclMemFree(buf), ncclSuccess);
  free(host);
}

static void *thread_rank(void *arg)
{
  int rank = (int)(long)arg;
  CCHECK(cudaSetDevice(rank));
  ncclComm_t comm;
  NCHECK(ncclCommInitRank(&comm, nranks, id, rank), ncclSuccess);
  rank_body(comm, rank);
  return NULL;
}

static void run_threads(void *(*fn)(void *))
{
  pthread_t t[64];
  for (long r = 0; r < nranks; r++) pthread_create(&t[r], NULL, fn, (void *)r);
  for (int r = 0; r < nranks; r++) pthread_join(t[r], NULL);
}

static int kind_of[2]; /* asym: 0 = cudaMalloc, 1 = ncclMemAlloc */
static void *reg_rank(void *arg)
{
  int rank = (int)(long)arg;
  CCHECK(cudaSetDevice(rank));
  ncclComm_t comm;
  NCHECK(ncclCommInitRank(&comm, nranks, id, rank), ncclSuccess);
  void *buf;
  if (kind_of[rank]) NCHECK(ncclMemAlloc(&buf, 1 << 20), ncclSuccess);
  else CCHECK(cudaMalloc(&buf, 1 << 20));
  ncclWindow_t win = NULL;
  ncclResult_t r = ncclCommWindowRegister(comm, buf, 1 << 20, &win, 0);
  printf("rank %d register -> %d win=%p\n", rank, (int)r, (void *)win);
  fflush(stdout);
  return NULL;
}

/* The collective-matching checker (modes mismatch, mismatch_fork, caller): on a 2-rank communicator,
 * rank 0's first all-reduce has count 1 and rank 1's count cnt1 (mismatch when 2); then one matched
 * all-reduce. In mode caller rank 0 issues its first through ncclguard_probe_allreduce when that is
 * loaded (libncclguard_probe.so preloaded: caller=guard) and rank 1 through pncclAllReduce (the
 * strong symbol: still caller=app). The data still flows: both return. */
static int cnt1 = 1, via_probe;
extern ncclResult_t pncclAllReduce(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t);
static void mm_body(int rank)
{
  CCHECK(cudaSetDevice(rank));
  ncclComm_t comm;
  NCHECK(ncclCommInitRank(&comm, 2, id, rank), ncclSuccess);
  int *b;
  CCHECK(cudaMalloc((void **)&b, 4 * sizeof(int)));
  CCHECK(cudaMemset(b, 0, 4 * sizeof(int)));
  cudaStream_t s;
  CCHECK(cudaStreamCreate(&s));
  typedef ncclResult_t (*ar_t)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t);
  ar_t probe = via_probe ? (ar_t)dlsym(RTLD_DEFAULT, "ncclguard_probe_allreduce") : NULL;
  size_t n = rank == 1 ? (size_t)cnt1 : 1;
  if (rank == 0 && probe) NCHECK(probe(b, b, n, ncclInt32, ncclMax, comm, s), ncclSuccess);
  else if (rank == 1 && via_probe) NCHECK(pncclAllReduce(b, b, n, ncclInt32, ncclMax, comm, s), ncclSuccess);
  else NCHECK(ncclAllReduce(b, b, n, ncclInt32, ncclMax, comm, s), ncclSuccess);
  NCHECK(ncclAllReduce(b, b + 2, 1, ncclInt32, ncclSum, comm, s), ncclSuccess);
  CCHECK(cudaStreamSynchronize(s));
  NCHECK(ncclCommDestroy(comm), ncclSuccess);
}
static void *mm_thread(void *arg) { mm_body((int)(long)arg); return NULL; }

/* Symmetric address space (README "Modelled behaviour"; nccl_reg.c): modes space (ranks as threads)
 * and space_fork (processes), NRANKS HALVES WANT MIB TAIL. Each rank allocates MIB MiB (ncclMemAlloc;
 * sparse in the fake: memfd, never touched) and registers 12 windows one at a time: the whole buffer,
 * or (HALVES=1) its two halves alternately. WANT: windows before the first failure (12: none); that
 * failure must be ncclInternalError with "No suitable space found to accommodate size=0x" TAIL in
 * ncclGetLastError; then deregistering one window lets exactly one more fit, and no further one. */
static int space_halves, space_want;
static size_t space_alloc;
static const char *space_tail = "";
static void space_body(ncclComm_t comm, int rank)
{
  char *buf;
  ncclWindow_t w[13] = {0};
  NCHECK(ncclMemAlloc((void **)&buf, space_alloc), ncclSuccess);
  size_t wsz = space_halves ? space_alloc / 2 : space_alloc;
  int n = 0;
  ncclResult_t r = ncclSuccess;
  for (; n < 12; n++) {
    char *p = buf + (space_halves && n % 2 ? wsz : 0);
    if ((r = ncclCommWindowRegister(comm, p, wsz, &w[n], 0)) != ncclSuccess) break;
    if (!w[n]) FAIL("rank %d: registration %d: NULL window", rank, n);
    for (int i = 0; i < n; i++) if (w[i] == w[n]) FAIL("rank %d: window %d repeats window %d", rank, n, i);
  }
  printf("rank %d: %d windows, then %d (%s)\n", rank, n, (int)r, n < 12 ? ncclGetLastError(comm) : "-");
  fflush(stdout);
  if (n != space_want) FAIL("rank %d: %d windows, want %d", rank, n, space_want);
  if (n < 12) {
    char want[160];
    snprintf(want, sizeof want, "No suitable space found to accommodate size=0x%s", space_tail);
    if (r != ncclInternalError || !strstr(ncclGetLastError(comm), want))
      FAIL("rank %d: failure %d (%s), want ncclInternalError and \"%s\"", rank, (int)r, ncclGetLastError(comm), want);
    if (w[n]) FAIL("rank %d: window written by the failed registration", rank);
    /* one deregistered: one more fits (in its place), the next does not */
    NCHECK(ncclCommWindowDeregister(comm, w[0]), ncclSuccess);
    NCHECK(ncclCommWindowRegister(comm, buf, wsz, &w[0], 0), ncclSuccess);
    if (!w[0]) FAIL("rank %d: NULL window after a deregistration", rank);
    NCHECK(ncclCommWindowRegister(comm, buf, wsz, &w[n], 0), ncclInternalError);
  }
  for (int i = 0; i < n; i++) NCHECK(ncclCommWindowDeregister(comm, w[i]), ncclSuccess);
  NCHECK(ncclCommDestroy(comm), ncclSuccess);
  NCHECK(ncclMemFree(buf), ncclSuccess);
}
static void *space_thread(void *arg)
{
  int rank = (int)(long)arg;
  CCHECK(cudaSetDevice(rank));
  ncclComm_t comm;
  NCHECK(ncclCommInitRank(&comm, nranks, id, rank), ncclSuccess);
  space_body(comm, rank);
  return NULL;
}

/* revoke_reg: after ncclCommRevoke a window registration still registers (every rank revoked, an
 * exchange among them), a collective is ncclInvalidUsage, the window deregisters */
static void *revoke_reg_thread(void *arg)
{
  int rank = (int)(long)arg;
  CCHECK(cudaSetDevice(rank));
  ncclComm_t comm;
  NCHECK(ncclCommInitRank(&comm, nranks, id, rank), ncclSuccess);
  void *buf;
  NCHECK(ncclMemAlloc(&buf, 1 << 21), ncclSuccess);
  NCHECK(ncclCommRevoke(comm, NCCL_REVOKE_DEFAULT), ncclSuccess);
  ncclWindow_t w = NULL;
  NCHECK(ncclCommWindowRegister(comm, buf, 1 << 21, &w, 0), ncclSuccess);
  if (!w) FAIL("rank %d: NULL window after revoke", rank);
  NCHECK(ncclAllReduce(buf, buf, 1, ncclFloat, ncclSum, comm, NULL), ncclInvalidUsage);
  NCHECK(ncclCommWindowDeregister(comm, w), ncclSuccess);
  NCHECK(ncclCommDestroy(comm), ncclSuccess);
  NCHECK(ncclMemFree(buf), ncclSuccess);
  return NULL;
}

/* wrap: `buff + size` wraps past the top of the address space (README "Modelled behaviour"). Rank 0
 * registers its ncclMemAlloc buffer (at the allocation's base) with a size that wraps, the others the
 * buffer itself; every rank must succeed with a window (2.27, 2.28: NCCL maps the whole allocation,
 * never the window's size), and a second registration after it must pair up (the exchanges in step). A
 * rank that fails alone leaves its peers waiting: the caller bounds it with NG_TIMEOUT. */
static void *wrap_thread(void *arg)
{
  int rank = (int)(long)arg;
  CCHECK(cudaSetDevice(rank));
  ncclComm_t comm;
  NCHECK(ncclCommInitRank(&comm, nranks, id, rank), ncclSuccess);
  char *buf;
  NCHECK(ncclMemAlloc((void **)&buf, 1 << 21), ncclSuccess);
  size_t n = rank == 0 ? (size_t)(UINTPTR_MAX - (uintptr_t)buf) + 1 + 4096 : (size_t)1 << 21; /* buf + n = 4096 */
  if (rank == 0 && (uintptr_t)buf + n >= (uintptr_t)buf) FAIL("rank 0: size %zu does not wrap", n);
  ncclWindow_t w = NULL, w2 = NULL;
  NCHECK(ncclCommWindowRegister(comm, buf, n, &w, 0), ncclSuccess);
  if (!w) FAIL("rank %d: NULL window", rank);
  NCHECK(ncclCommWindowRegister(comm, buf, 1 << 21, &w2, 0), ncclSuccess);
  if (!w2 || w2 == w) FAIL("rank %d: second window %p (first %p)", rank, (void *)w2, (void *)w);
  printf("rank %d: size %zu -> window %p, then %p\n", rank, n, (void *)w, (void *)w2);
  fflush(stdout);
  NCHECK(ncclCommWindowDeregister(comm, w), ncclSuccess);
  NCHECK(ncclCommWindowDeregister(comm, w2), ncclSuccess);
  NCHECK(ncclCommDestroy(comm), ncclSuccess);
  NCHECK(ncclMemFree(buf), ncclSuccess);
  return NULL;
}

/* nullwin: NULL `win` on 2.28 (README "Modelled behaviour"). In a symmetric space of 4 GiB
 * (NCCL_WIN_STRIDE=0x100000000, set by the caller), rank 0 registers a 1 GiB allocation A with a NULL
 * win, the other ranks theirs with a window; every rank must succeed (rank 0 takes part in the
 * exchange: no peer waits). The window exists, unwritten, and holds A's place until the communicator
 * goes: three more 1 GiB allocations fit, a fifth does not ("No suitable space", on every rank). */
static void *nullwin_thread(void *arg)
{
  int rank = (int)(long)arg;
  CCHECK(cudaSetDevice(rank));
  ncclComm_t comm;
  NCHECK(ncclCommInitRank(&comm, nranks, id, rank), ncclSuccess);
  void *b[5];
  ncclWindow_t w[5] = {0};
  for (int i = 0; i < 5; i++) NCHECK(ncclMemAlloc(&b[i], (size_t)1 << 30), ncclSuccess);
  NCHECK(ncclCommWindowRegister(comm, b[0], (size_t)1 << 30, rank == 0 ? NULL : &w[0], 0), ncclSuccess);
  if (rank != 0 && !w[0]) FAIL("rank %d: NULL window", rank);
  for (int i = 1; i < 4; i++) {
    NCHECK(ncclCommWindowRegister(comm, b[i], (size_t)1 << 30, &w[i], 0), ncclSuccess);
    if (!w[i]) FAIL("rank %d: registration %d: NULL window", rank, i);
  }
  ncclResult_t r = ncclCommWindowRegister(comm, b[4], (size_t)1 << 30, &w[4], 0);
  printf("rank %d: fifth allocation -> %d (%s)\n", rank, (int)r, r ? ncclGetLastError(comm) : "-");
  fflush(stdout);
  if (r != ncclInternalError || !strstr(ncclGetLastError(comm), "No suitable space"))
    FAIL("rank %d: the fifth 1 GiB allocation -> %d, want ncclInternalError: the NULL-win window holds its place", rank, (int)r);
  for (int i = 0; i < 4; i++) NCHECK(ncclCommWindowDeregister(comm, w[i]), ncclSuccess);
  NCHECK(ncclCommDestroy(comm), ncclSuccess);
  for (int i = 0; i < 5; i++) NCHECK(ncclMemFree(b[i]), ncclSuccess);
  return NULL;
}

static ncclComm_t one_rank(void)
{
  ncclComm_t c;
  ncclUniqueId u;
  NCHECK(ncclGetUniqueId(&u), ncclSuccess);
  NCHECK(ncclCommInitRank(&c, 1, u, 0), ncclSuccess);
  return c;
}

int main(int argc, char **argv)
{
  mode = argc > 1 ? argv[1] : "threads";
  if (argc > 2) nranks = atoi(argv[2]);
  if (argc > 2) cnt1 = atoi(argv[2]); /* mismatch modes: rank 1's first count */
  ncclGetUniqueId(&id);
  if (!strcmp(mode, "threads")) {
    run_threads(thread_rank);
  } else if (!strcmp(mode, "fork")) {
    for (int r = 0; r < nranks; r++)
      if (fork() == 0) { thread_rank((void *)(long)r); _exit(0); }
    for (int r = 0; r < nranks; r++) {
      int st;
      wait(&st);
      if (!WIFEXITED(st) || WEXITSTATUS(st)) FAIL("a child failed (status %d)", st);
    }
  } else if (!strcmp(mode, "capturejobs")) {
    /* one thread registers a window on each of its nranks communicators in one group, in relaxed capture
     * mode, while a global capture runs (ncclguard's NCCLGUARD_CAPTURE=relaxed): one registration job runs
     * in the caller's thread and keeps its mode; several run in threads of their own (README, capture).
     * Exit 0: registered, capture intact; 3: ncclUnhandledCudaError and the capture invalidated. */
    ncclComm_t c[8];
    void *b[8];
    ncclWindow_t w[8] = {0};
    NCHECK(ncclGroupStart(), ncclSuccess);
    for (int r = 0; r < nranks; r++) { CCHECK(cudaSetDevice(r)); NCHECK(ncclCommInitRank(&c[r], nranks, id, r), ncclSuccess); }
    NCHECK(ncclGroupEnd(), ncclSuccess);
    for (int r = 0; r < nranks; r++) { CCHECK(cudaSetDevice(r)); NCHECK(ncclMemAlloc(&b[r], 2 << 20), ncclSuccess); }
    CCHECK(cudaSetDevice(0));
    cudaStream_t s;
    CCHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CCHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    enum cudaStreamCaptureMode m = cudaStreamCaptureModeRelaxed;
    CCHECK(cudaThreadExchangeStreamCaptureMode(&m));
    NCHECK(ncclGroupStart(), ncclSuccess);
    for (int r = 0; r < nranks; r++) NCHECK(ncclCommWindowRegister(c[r], b[r], 2 << 20, &w[r], 0), ncclSuccess);
    ncclResult_t res = ncclGroupEnd();
    CCHECK(cudaThreadExchangeStreamCaptureMode(&m));
    cudaGraph_t g = NULL;
    cudaError_t e = cudaStreamEndCapture(s, &g);
    printf("capturejobs %d: group end -> %d (%s), end capture -> %s\n", nranks, (int)res, ncclGetLastError(NULL),
           cudaGetErrorName(e));
    if (res == ncclSuccess && e == cudaSuccess) return 0;
    if (res == ncclUnhandledCudaError && e == cudaErrorStreamCaptureInvalidated) return 3;
    FAIL("neither registered with the capture intact nor failed with it invalidated");
  } else if (!strcmp(mode, "group")) { /* one thread drives every rank */
    ncclComm_t c[8];
    float *b[8];
    ncclWindow_t w[8] = {0};
    cudaStream_t s[8];
    NCHECK(ncclGroupStart(), ncclSuccess);
    for (int r = 0; r < nranks; r++) { CCHECK(cudaSetDevice(r)); NCHECK(ncclCommInitRank(&c[r], nranks, id, r), ncclSuccess); }
    NCHECK(ncclGroupEnd(), ncclSuccess);
    for (int r = 0; r < nranks; r++) {
      CCHECK(cudaSetDevice(r));
      NCHECK(ncclMemAlloc((void **)&b[r], 4 << 20), ncclSuccess);
      CCHECK(cudaStreamCreate(&s[r]));
      float v = (float)r + 1;
      CCHECK(cudaMemcpy(b[r], &v, sizeof v, cudaMemcpyHostToDevice));
    }
    int ver = 0;
    NCHECK(ncclGetVersion(&ver), ncclSuccess);
    NCHECK(ncclGroupStart(), ncclSuccess);
    for (int r = 0; r < nranks; r++) {
      NCHECK(ncclCommWindowRegister(c[r], b[r], 4 << 20, &w[r], 0), ncclSuccess);
      if (ver >= 22800 && w[r]) FAIL("*win written before ncclGroupEnd");
      if (ver < 22800 && !w[r]) FAIL("2.27: *win not written by the call (register.cc: ncclCalloc(win, 1))");
      NCHECK(ncclCommWindowRegister(c[r], b[r] + 1024, 1 << 20, &w[r + 4], 0), ncclSuccess); /* 2 per comm */
    }
    NCHECK(ncclGroupEnd(), ncclSuccess);
    for (int r = 0; r < nranks; r++) if (!w[r] || !w[r + 4] || w[r] == w[r + 4]) FAIL("windows %p %p", (void *)w[r], (void *)w[r + 4]);
    NCHECK(ncclGroupStart(), ncclSuccess);
    for (int r = 0; r < nranks; r++) NCHECK(ncclAllReduce(b[r], b[r], 1, ncclFloat, ncclSum, c[r], s[r]), ncclSuccess);
    NCHECK(ncclGroupEnd(), ncclSuccess);
    for (int r = 0; r < nranks; r++) {
      float v;
      CCHECK(cudaStreamSynchronize(s[r]));
      CCHECK(cudaMemcpy(&v, b[r], sizeof v, cudaMemcpyDeviceToHost));
      if (v != (float)(nranks * (nranks + 1) / 2)) FAIL("group allreduce %g", v);
    }
    ncclComm_t sc[8];
    NCHECK(ncclGroupStart(), ncclSuccess);
    for (int r = 0; r < nranks; r++) NCHECK(ncclCommSplit(c[r], r % 2, r, &sc[r], NULL), ncclSuccess);
    NCHECK(ncclGroupEnd(), ncclSuccess);
    for (int r = 0; r < nranks; r++) {
      int n, me;
      NCHECK(ncclCommCount(sc[r], &n), ncclSuccess);
      NCHECK(ncclCommUserRank(sc[r], &me), ncclSuccess);
      if (n != (nranks - r % 2 + 1) / 2 || me != r / 2) FAIL("split rank %d: n=%d me=%d", r, n, me);
    }
    for (int r = 0; r < nranks; r++) { NCHECK(ncclCommDestroy(sc[r]), ncclSuccess); NCHECK(ncclCommDestroy(c[r]), ncclSuccess); }
  } else if (!strcmp(mode, "nonblocking")) {
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    ncclComm_t c;
    ncclUniqueId u;
    ncclGetUniqueId(&u);
    NCHECK(ncclCommInitRankConfig(&c, 1, u, 0, &cfg), ncclInProgress);
    void *buf;
    NCHECK(ncclMemAlloc(&buf, 1 << 21), ncclSuccess);
    int ver = 0;
    NCHECK(ncclGetVersion(&ver), ncclSuccess);
    ncclWindow_t w = (ncclWindow_t)0x1;
    if (ver < 22900) { /* 2.28: the readiness check (docs/NCCL.md §7) */
      NCHECK(ncclCommWindowRegister(c, buf, 1 << 21, &w, 0), ncclInvalidArgument);
      if (!strstr(ncclGetLastError(c), "Attempt to use communicator before")) FAIL("last error: %s", ncclGetLastError(c));
    } else { /* 2.29+: no symmetric support yet: success with a NULL window, the init still running */
      NCHECK(ncclCommWindowRegister(c, buf, 1 << 21, &w, 0), ncclSuccess);
      if (w) FAIL("2.29+: window %p, want NULL", (void *)w);
      ncclResult_t a0 = ncclSuccess;
      NCHECK(ncclCommGetAsyncError(c, &a0), ncclSuccess);
      if (a0 != ncclInProgress) FAIL("2.29+: async %d after the registration, want ncclInProgress", (int)a0);
    }
    w = NULL;
    ncclResult_t a = ncclInProgress;
    int polls = 0;
    while (a == ncclInProgress) { NCHECK(ncclCommGetAsyncError(c, &a), ncclSuccess); usleep(10000); polls++; }
    if (a != ncclSuccess || polls < 10) FAIL("async %d after %d polls", (int)a, polls);
    ncclResult_t r = ncclCommWindowRegister(c, buf, 1 << 21, &w, 0);
    if (r != ncclSuccess && r != ncclInProgress) FAIL("register on ready nonblocking comm -> %d", (int)r);
    do { NCHECK(ncclCommGetAsyncError(c, &a), ncclSuccess); usleep(1000); } while (a == ncclInProgress);
    if (a != ncclSuccess || !w) FAIL("registration: async %d win %p", (int)a, (void *)w);
  } else if (!strcmp(mode, "mismatch") || !strcmp(mode, "caller")) {
    nranks = 2;
    via_probe = !strcmp(mode, "caller");
    run_threads(mm_thread);
  } else if (!strcmp(mode, "mismatch_fork")) {
    nranks = 2;
    for (int r = 0; r < 2; r++)
      if (fork() == 0) { mm_body(r); _exit(0); }
    for (int r = 0; r < 2; r++) {
      int st;
      wait(&st);
      if (!WIFEXITED(st) || WEXITSTATUS(st)) FAIL("a child failed (status %d)", st);
    }
  } else if (!strcmp(mode, "asym")) { /* docs/NCCL.md §7: must hang (the caller bounds it with timeout) */
    kind_of[0] = 0; kind_of[1] = 1;
    run_threads(reg_rank);
    FAIL("asymmetric registration returned on both ranks");
  } else if (!strcmp(mode, "bothmalloc")) {
    ncclComm_t c[2];
    void *b[2];
    ncclWindow_t w[2] = {0};
    NCHECK(ncclGroupStart(), ncclSuccess);
    for (int r = 0; r < 2; r++) { CCHECK(cudaSetDevice(r)); NCHECK(ncclCommInitRank(&c[r], 2, id, r), ncclSuccess); }
    NCHECK(ncclGroupEnd(), ncclSuccess);
    for (int r = 0; r < 2; r++) { CCHECK(cudaSetDevice(r)); CCHECK(cudaMalloc(&b[r], 1 << 21)); }
    NCHECK(ncclGroupStart(), ncclSuccess);
    for (int r = 0; r < 2; r++) NCHECK(ncclCommWindowRegister(c[r], b[r], 1 << 21, &w[r], 0), ncclSuccess);
    NCHECK(ncclGroupEnd(), ncclUnhandledCudaError);
    if (w[0] || w[1]) FAIL("windows not NULL");
    NCHECK(ncclGroupStart(), ncclSuccess);
    for (int r = 0; r < 2; r++) ncclAllReduce(b[r], b[r], 1, ncclFloat, ncclSum, c[r], NULL);
    NCHECK(ncclGroupEnd(), ncclInternalError);
  } else if (!strcmp(mode, "nullcomm")) {
    void *buf;
    NCHECK(ncclMemAlloc(&buf, 1 << 21), ncclSuccess);
    ncclWindow_t w = NULL;
    ncclResult_t r = ncclCommWindowRegister(NULL, buf, 1 << 21, &w, 0);
    printf("nullcomm -> %d (%s)\n", (int)r, ncclGetLastError(NULL));
    NCHECK(r, ncclInvalidArgument);
  } else if (!strcmp(mode, "capture")) { /* docs/NCCL.md §7; argv[2] = expected result (0 or 1) */
    ncclComm_t c = one_rank();
    void *buf;
    NCHECK(ncclMemAlloc(&buf, 1 << 21), ncclSuccess);
    cudaStream_t s;
    CCHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CCHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    ncclWindow_t w = NULL;
    ncclResult_t r = ncclCommWindowRegister(c, buf, 1 << 21, &w, 0);
    cudaGraph_t g = NULL;
    cudaError_t e = cudaStreamEndCapture(s, &g);
    printf("capture: register -> %d (%s), end capture -> %s\n", (int)r, ncclGetLastError(c), cudaGetErrorName(e));
    if (nranks == 1) { /* expect failure (argv[2]=1) */
      if (r != ncclUnhandledCudaError || !strstr(ncclGetLastError(c), "operation not permitted when stream is capturing") ||
          e != cudaErrorStreamCaptureInvalidated)
        FAIL("want ncclUnhandledCudaError and an invalidated capture");
    } else if (r != ncclSuccess || e != cudaSuccess || !w) {
      FAIL("want success under capture");
    }
  } else if (!strcmp(mode, "destroy")) { /* docs/PYTORCH.md §3 */
    ncclComm_t c = one_rank();
    void *buf, *h;
    NCHECK(ncclMemAlloc(&buf, 1 << 21), ncclSuccess);
    ncclWindow_t w1 = NULL, w2 = NULL;
    NCHECK(ncclCommWindowRegister(c, buf, 1 << 21, &w1, 0), ncclSuccess);
    NCHECK(ncclCommWindowRegister(c, buf, 1 << 21, &w2, 0), ncclSuccess);
    if (!w1 || !w2 || w1 == w2) FAIL("same buffer twice: %p %p", (void *)w1, (void *)w2);
    NCHECK(ncclCommWindowDeregister(c, NULL), ncclSuccess);
    NCHECK(ncclCommRegister(c, buf, 1 << 21, &h), ncclSuccess);
    NCHECK(ncclCommDestroy(c), ncclSuccess);
    NCHECK(ncclCommWindowDeregister(c, w1), ncclUnhandledCudaError);
    if (!strstr(ncclGetLastError(c), "invalid device ordinal")) FAIL("last error %s", ncclGetLastError(c));
    NCHECK(ncclCommDestroy(c), ncclInvalidArgument);
  } else if (!strcmp(mode, "misaligned")) {
    ncclComm_t c = one_rank();
    char *buf;
    NCHECK(ncclMemAlloc((void **)&buf, 1 << 21), ncclSuccess);
    ncclWindow_t w = NULL;
    NCHECK(ncclCommWindowRegister(c, buf + 512, 4096, &w, 0), ncclInvalidArgument);
    int host; /* 2.28+: cuMemGetAddressRange fails: "Cuda failure 500" (measured on 2.28.9, issue 23) */
    NCHECK(ncclCommWindowRegister(c, &host, sizeof host, &w, 0), ncclUnhandledCudaError);
    if (!strstr(ncclGetLastError(c), "Cuda failure 500")) FAIL("host buffer: last error %s", ncclGetLastError(c));
    NCHECK(ncclCommWindowRegister(c, buf + 4096, 4096, &w, 0), ncclSuccess);
    if (!w) FAIL("NULL window");
  } else if (!strcmp(mode, "ranges")) { /* argv[2]: the results wanted, "host,past,two,hole" (0, 1 = unhandled
                                          * CUDA error with "Cuda failure 500", 4 = invalid argument) */
    if (argc < 3) FAIL("usage: ranges WANT");
    int want[4];
    if (sscanf(argv[2], "%d,%d,%d,%d", &want[0], &want[1], &want[2], &want[3]) != 4) FAIL("bad WANT %s", argv[2]);
    ncclComm_t c = one_rank();
    const size_t M2 = (size_t)2 << 20;
    /* 6 MiB reserved; 2 MiB allocations mapped at 0 and 2 MiB (two allocations back to back), none at
     * 4 MiB: [0, 4 MiB) spans two allocations, [2, 6 MiB) runs into unmapped memory; a second reservation
     * maps 0 and 4 MiB: [0, 6 MiB) has a hole in the middle */
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    CUdeviceptr va[2];
    CUmemAccessDesc acc;
    memset(&acc, 0, sizeof acc);
    acc.location = prop.location;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    for (int k = 0; k < 2; k++) {
      if (cuMemAddressReserve(&va[k], 3 * M2, M2, 0, 0) != CUDA_SUCCESS) FAIL("cuMemAddressReserve");
      for (int j = 0; j < 2; j++) {
        CUmemGenericAllocationHandle h;
        CUdeviceptr at = va[k] + (k == 0 ? (size_t)j : 2 * (size_t)j) * M2;
        if (cuMemCreate(&h, M2, &prop, 0) != CUDA_SUCCESS || cuMemMap(at, M2, 0, h, 0) != CUDA_SUCCESS ||
            cuMemSetAccess(at, M2, &acc, 1) != CUDA_SUCCESS)
          FAIL("map %d/%d", k, j);
        cuMemRelease(h);
      }
    }
    int host[4];
    struct { const char *what; void *p; size_t n; } cs[4] = {
      {"host", host, sizeof host},
      {"past", (void *)(uintptr_t)(va[0] + M2), 2 * M2},
      {"two", (void *)(uintptr_t)va[0], 2 * M2},
      {"hole", (void *)(uintptr_t)va[1], 3 * M2},
    };
    for (int i = 0; i < 4; i++) {
      ncclWindow_t w = NULL;
      ncclResult_t r = ncclCommWindowRegister(c, cs[i].p, cs[i].n, &w, 0);
      const char *le = ncclGetLastError(c);
      printf("ranges %s -> %d (%s) win=%p\n", cs[i].what, (int)r, r ? le : "-", (void *)w);
      if ((int)r != want[i]) FAIL("%s: %d, want %d", cs[i].what, (int)r, want[i]);
      if (r == ncclUnhandledCudaError && !strstr(le, "Cuda failure 500")) FAIL("%s: last error %s", cs[i].what, le);
      if (r == ncclSuccess && !w) FAIL("%s: NULL window", cs[i].what);
      if (w) NCHECK(ncclCommWindowDeregister(c, w), ncclSuccess);
    }
    NCHECK(ncclCommDestroy(c), ncclSuccess);
  } else if (!strcmp(mode, "revoke_reg")) { /* ranks as threads: revoke, then register (a window), then
                                              * an all-reduce (ncclInvalidUsage) */
    run_threads(revoke_reg_thread);
  } else if (!strcmp(mode, "group_drop")) { /* one thread, 2 ranks: a call-time error drops the group */
    ncclComm_t c[2];
    float *b[2];
    ncclWindow_t w[2] = {0};
    NCHECK(ncclGroupStart(), ncclSuccess);
    for (int r = 0; r < 2; r++) { CCHECK(cudaSetDevice(r)); NCHECK(ncclCommInitRank(&c[r], 2, id, r), ncclSuccess); }
    NCHECK(ncclGroupEnd(), ncclSuccess);
    for (int r = 0; r < 2; r++) {
      CCHECK(cudaSetDevice(r));
      NCHECK(ncclMemAlloc((void **)&b[r], 1 << 21), ncclSuccess);
      float v = (float)r + 1;
      CCHECK(cudaMemcpy(b[r], &v, sizeof v, cudaMemcpyHostToDevice));
    }
    int simulate = nranks == 1; /* argv[2] = 1: end the group with ncclGroupSimulateEnd */
    NCHECK(ncclGroupStart(), ncclSuccess);
    for (int r = 0; r < 2; r++) NCHECK(ncclCommWindowRegister(c[r], b[r], 1 << 21, &w[r], 0), ncclSuccess);
    for (int r = 0; r < 2; r++) NCHECK(ncclAllReduce(b[r], b[r], 1, ncclFloat, ncclSum, c[r], NULL), ncclSuccess);
    NCHECK(ncclAllReduce(b[0], b[0], 1, ncclFloat, (ncclRedOp_t)99, c[0], NULL), ncclInvalidArgument);
    if (simulate) { ncclSimInfo_t si = NCCL_SIM_INFO_INITIALIZER; NCHECK(ncclGroupSimulateEnd(&si), ncclInvalidArgument); }
    else NCHECK(ncclGroupEnd(), ncclInvalidArgument);
    if (w[0] || w[1]) FAIL("dropped group: windows %p %p written", (void *)w[0], (void *)w[1]);
    for (int r = 0; r < 2; r++) {
      float v;
      CCHECK(cudaStreamSynchronize(NULL));
      CCHECK(cudaMemcpy(&v, b[r], sizeof v, cudaMemcpyDeviceToHost));
      if (v != (float)r + 1) FAIL("dropped group: all-reduce ran (rank %d: %g)", r, v);
    }
    /* the communicators are intact: the same group again works */
    NCHECK(ncclGroupStart(), ncclSuccess);
    for (int r = 0; r < 2; r++) NCHECK(ncclCommWindowRegister(c[r], b[r], 1 << 21, &w[r], 0), ncclSuccess);
    for (int r = 0; r < 2; r++) NCHECK(ncclAllReduce(b[r], b[r], 1, ncclFloat, ncclSum, c[r], NULL), ncclSuccess);
    NCHECK(ncclGroupEnd(), ncclSuccess);
    if (!w[0] || !w[1]) FAIL("second group: windows %p %p", (void *)w[0], (void *)w[1]);
    for (int r = 0; r < 2; r++) {
      float v;
      CCHECK(cudaSetDevice(r));
      CCHECK(cudaStreamSynchronize(NULL));
      CCHECK(cudaMemcpy(&v, b[r], sizeof v, cudaMemcpyDeviceToHost));
      if (v != 3.0f) FAIL("second group: all-reduce %g on rank %d", v, r);
    }
    for (int r = 0; r < 2; r++) NCHECK(ncclCommDestroy(c[r]), ncclSuccess);
  } else if (!strcmp(mode, "space") || !strcmp(mode, "space_fork")) {
    if (argc < 7) FAIL("usage: %s NRANKS HALVES WANT MIB TAIL", mode);
    space_halves = atoi(argv[3]);
    space_want = atoi(argv[4]);
    space_alloc = (size_t)atoi(argv[5]) << 20;
    space_tail = argv[6];
    if (!strcmp(mode, "space")) {
      run_threads(space_thread);
    } else {
      for (int r = 0; r < nranks; r++)
        if (fork() == 0) { space_thread((void *)(long)r); _exit(0); }
      for (int r = 0; r < nranks; r++) {
        int st;
        wait(&st);
        if (!WIFEXITED(st) || WEXITSTATUS(st)) FAIL("a child failed (status %d)", st);
      }
    }
  } else if (!strcmp(mode, "wrap")) { /* ranks as threads: rank 0's size wraps; argv[2] ranks */
    run_threads(wrap_thread);
  } else if (!strcmp(mode, "wrap1")) { /* one rank: argv[2] = the buffer's offset in its allocation,
                                         * argv[3] = the result wanted (a crash: the caller's exit status) */
    if (argc < 4) FAIL("usage: wrap1 OFFSET WANT");
    ncclComm_t c = one_rank();
    char *buf;
    NCHECK(ncclMemAlloc((void **)&buf, 1 << 21), ncclSuccess);
    char *p = buf + atoi(argv[2]);
    size_t n = (size_t)(UINTPTR_MAX - (uintptr_t)p) + 1 + 4096;
    ncclWindow_t w = NULL;
    ncclResult_t r = ncclCommWindowRegister(c, p, n, &w, 0);
    printf("wrap1 %p + %zu -> %d (%s) win=%p\n", (void *)p, n, (int)r, r ? ncclGetLastError(c) : "-", (void *)w);
    if ((int)r != atoi(argv[3])) FAIL("%d, want %s", (int)r, argv[3]);
    if (r == ncclSuccess && !w) FAIL("NULL window");
    if (w) NCHECK(ncclCommWindowDeregister(c, w), ncclSuccess);
    NCHECK(ncclCommDestroy(c), ncclSuccess);
  } else if (!strcmp(mode, "nullwin")) { /* ranks as threads: rank 0 with a NULL win; argv[2] ranks */
    run_threads(nullwin_thread);
  } else if (!strcmp(mode, "nullwin1")) { /* one rank, NULL win, buffer at argv[2] bytes into its allocation:
                                            * success (the caller sets what should crash) */
    if (argc < 3) FAIL("usage: nullwin1 OFFSET");
    ncclComm_t c = one_rank();
    char *buf;
    NCHECK(ncclMemAlloc((void **)&buf, 1 << 21), ncclSuccess);
    NCHECK(ncclCommWindowRegister(c, buf + atoi(argv[2]), 4096, NULL, 0), ncclSuccess);
    NCHECK(ncclCommDestroy(c), ncclSuccess);
  } else if (!strcmp(mode, "nosym")) { /* argv[2]: 1 = expect NULL window */
    ncclComm_t c = one_rank();
    void *buf;
    NCHECK(ncclMemAlloc(&buf, 1 << 21), ncclSuccess);
    ncclWindow_t w = (ncclWindow_t)0x1;
    NCHECK(ncclCommWindowRegister(c, buf, 1 << 21, &w, 0), ncclSuccess);
    if ((nranks == 1) != (w == NULL)) FAIL("window %p", (void *)w);
  } else {
    FAIL("unknown mode");
  }
  printf("PASS %s\n", mode);
  return 0;
}
