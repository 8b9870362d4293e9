/* faults: window registration under faults, one process per rank (fork), rank r on GPU r % ndev.
 * The same source runs against the fakes (CI) and a real NCCL (tests/gpu/run).
 *
 *   faults late [-n N] --late SEC      the last rank reaches the registration SEC seconds late (--after-fail 1:
 *                                       after a failed registration, ncclCommRegister and ncclDevCommCreate on
 *                                       that communicator: "AFTER rank=R breg=.. devcomm=..")
 *   faults abort --abort-ms MS          rank 0 registers while the last rank never comes; a
 *                                       watchdog thread of rank 0 aborts its communicator after MS
 *   faults many --windows K             K windows registered in one ncclGroupStart/End
 *   faults degrade-devcomm              cudaMalloc window (fails or degrades), deregistered, then an
 *                                       ncclMemAlloc window and ncclDevCommCreate
 *   faults simulate                     a registration queued in a group ended by ncclGroupSimulateEnd,
 *                                       then one outside any group
 *   faults devcomm-destroy              window, ncclDevCommCreate, ncclDevCommDestroy, then a cudaMalloc
 *                                       window (degraded with ncclguard: allowed again)
 *   faults suspend                      window, ncclCommSuspend(NCCL_SUSPEND_MEM), a window while suspended,
 *                                       ncclCommResume, a window and an all-reduce (skipped when the
 *                                       loaded NCCL lacks suspend: before 2.29.7)
 *   faults grow [-n N]                  ranks 0..N-2 create a communicator, rank N-1 joins it through
 *                                       ncclCommGrow (2.29.2+); every rank registers a window on the grown
 *                                       communicator and all-reduces on it (skipped where NCCL lacks it)
 *   faults shrink [-n N]                N ranks; ranks 0..N-2 ncclCommShrink away rank N-1, then a window
 *                                       and an all-reduce on the shrunk communicator
 *   faults scalable [-n N]              ncclCommInitRankScalable (one id), a window and an all-reduce
 *   faults cycles --cycles C [--seed S] [--faults MASK]
 *                                       C registration cycles, each with a random fault (bit 0 a late
 *                                       peer, 1 an abort of every rank, 2 a cudaMalloc buffer on one
 *                                       rank, 3 size 0 on one rank; MASK picks them, default 0xf); the
 *                                       communicator is recreated after an abort or an error;
 *                                       --max-growth-kb K fails a rank whose VmRSS grew more than K
 *   faults hidden-revoke                rank 0 revokes its communicator through pncclCommRevoke (NCCL's own
 *                                       name: a revoke ncclguard does not see), then every rank registers
 *                                       (an error on each; rank 0's must not wait for a revoke NCCL refuses)
 *   faults layout-sizes                 step 0: the last rank registers a 4 MiB allocation where the others
 *                                       register 2 MiB; step 1: every rank 2 MiB; then an all-reduce on the
 *                                       step-1 window (RESULT fail: wrong sum or a failed call)
 *   faults layout-sizes-flags0          layout-sizes with flags 0 at step 0 on every rank (NCCL places every
 *                                       window of a communicator with symmetric support, whatever its flags)
 *   faults layout-reuse                 step 0: every rank a window over the first half of a 4 MiB allocation
 *                                       A; step 1: the second half of A, but the last rank a new 4 MiB
 *                                       allocation B (NCCL before 2.30.7 reuses A's place, B takes a new
 *                                       one); step 2: every rank a new 2 MiB allocation, all-reduce in it
 *   faults layout-flags                 the same, step 0 with the same size but flags 0 on the last rank
 *                                       (NCCL_WIN_COLL_SYMMETRIC on the others; --flags0 N: N instead of 0)
 *   faults layout-segments              the same, step 0 a window over two allocations mapped back to back:
 *                                       2 + 2 MiB, the last rank 2 + 4 MiB (PyTorch's expandable segments);
 *                                       the first allocation is 2 MiB everywhere (not in the header-free build)
 *   faults win-garbage [-n N]           *win filled with garbage before a registration of an ncclMemAlloc buffer,
 *                                       then what the call left there ("garbage", "set", "null")
 *   faults handle-swap [-n N]           (N >= 1) a window given to ncclCommDeregister and a buffer registration's
 *                                       handle to ncclCommWindowDeregister, then each to its own function
 * Every rank prints "RESULT rank=R ..." lines; the parent exits 124 if a rank is still running after
 * --timeout SEC (default 60), 1 if a rank failed its checks, else 0. A rank's checks: the calls
 * return (no hang, no crash); in `cycles`, every rank saw the same outcome class in each cycle and
 * memory (VmRSS) and descriptors stay flat. */
#define _GNU_SOURCE
#include <dlfcn.h>
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
#ifndef NG_HEADERFREE
#include <cuda.h>
#endif

struct shared {
  volatile int gen;         /* unique id generation */
  ncclUniqueId id[2];
  unsigned char outcome[64][20000]; /* cycles: each rank's outcome class per cycle */
};
static struct shared* sh;
static const char* mode;
static int nranks = 2, windows = 1000, cycles = 100, timeout_s = 60, abort_ms = 500;
static double late_s = 4;
static unsigned seed = 1, fault_mask = 0xf;
static long max_growth_kb = -1;
static int after_fail; /* late: a buffer registration and a device communicator after a failed registration */
static int flags0;     /* layout-flags: the last rank's flags at step 0 */

static void share_id(int rank, int gen) {
  /* rank 0 publishes id generation `gen`; the others wait for it */
  if (rank == 0) {
    ncclGetUniqueId(&sh->id[gen % 2]);
    __atomic_store_n(&sh->gen, gen, __ATOMIC_RELEASE);
  } else {
    while (__atomic_load_n(&sh->gen, __ATOMIC_ACQUIRE) < gen) usleep(200);
  }
}

/* A buffer made of two CUDA VMM allocations of s0 and s1 bytes mapped back to back in one reserved range
 * (what PyTorch's expandable segments make), on the current device; NULL if the driver cannot. The driver
 * is looked up at run time (libcuda.so.1): the program links only the CUDA runtime. Never freed. */
static void* two_segments(size_t s0, size_t s1) {
#ifdef NG_HEADERFREE
  (void)s0, (void)s1;
  return NULL;
#else
  void* h = dlopen("libcuda.so.1", RTLD_NOW);
  if (!h) return NULL;
  CUresult (*reserve)(CUdeviceptr*, size_t, size_t, CUdeviceptr, unsigned long long) =
      (CUresult(*)(CUdeviceptr*, size_t, size_t, CUdeviceptr, unsigned long long))dlsym(h, "cuMemAddressReserve");
  CUresult (*create)(CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*, unsigned long long) =
      (CUresult(*)(CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*, unsigned long long))dlsym(h, "cuMemCreate");
  CUresult (*map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long) =
      (CUresult(*)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long))dlsym(h, "cuMemMap");
  CUresult (*access)(CUdeviceptr, size_t, const CUmemAccessDesc*, size_t) =
      (CUresult(*)(CUdeviceptr, size_t, const CUmemAccessDesc*, size_t))dlsym(h, "cuMemSetAccess");
  CUresult (*release)(CUmemGenericAllocationHandle) = (CUresult(*)(CUmemGenericAllocationHandle))dlsym(h, "cuMemRelease");
  CUresult (*ctxdev)(CUdevice*) = (CUresult(*)(CUdevice*))dlsym(h, "cuCtxGetDevice");
  CUdevice dev = 0;
  if (!reserve || !create || !map || !access || !release || !ctxdev || ctxdev(&dev) != CUDA_SUCCESS) return NULL;
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof prop);
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  CUmemAccessDesc acc;
  memset(&acc, 0, sizeof acc);
  acc.location = prop.location;
  acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CUdeviceptr va = 0;
  if (reserve(&va, s0 + s1, 2u << 20, 0, 0) != CUDA_SUCCESS) return NULL;
  size_t sz[2] = {s0, s1}, at = 0;
  for (int i = 0; i < 2; i++) {
    CUmemGenericAllocationHandle mh;
    if (create(&mh, sz[i], &prop, 0) != CUDA_SUCCESS) return NULL;
    CUresult r = map(va + at, sz[i], 0, mh, 0);
    release(mh);
    if (r != CUDA_SUCCESS || access(va + at, sz[i], &acc, 1) != CUDA_SUCCESS) return NULL;
    at += sz[i];
  }
  return (void*)(uintptr_t)va;
#endif
}

static ncclComm_t init_comm(int rank, int gen) {
  share_id(rank, gen);
  ncclComm_t c = NULL;
  ncclResult_t r = ncclCommInitRank(&c, nranks, sh->id[gen % 2], rank);
  if (r != ncclSuccess) {
    ng_say("RESULT rank=%d init=%s", rank, ng_rc_name(r));
    return NULL;
  }
  return c;
}

struct aborter { ncclComm_t comm; int ms; int done; };
static void* abort_main(void* a) {
  struct aborter* ab = a;
  usleep((useconds_t)ab->ms * 1000);
  ncclResult_t r = ncclCommAbort(ab->comm);
  ng_say("rank 0: watchdog ncclCommAbort -> %s", ng_rc_name(r));
  __atomic_store_n(&ab->done, 1, __ATOMIC_RELEASE);
  return NULL;
}

typedef ncclResult_t (*devcomm_fn)(ncclComm_t, const void*, void*);

/* A communicator made by `how` (its creation returned `made`): a window on it, an all-reduce of
 * every rank's (rank + 1) that must sum to n(n+1)/2 over its `n` ranks, then teardown. Prints the
 * RESULT line; 0 when all went right. */
static int use_new_comm(int rank, const char* how, ncclResult_t made, ncclComm_t c) {
  int crank = -1, n = 0;
  if (made != ncclSuccess || !c) {
    ng_say("rank %d/%d: RESULT fail rank=%d %s=%s", rank, nranks, rank, how, ng_rc_name(made));
    return 1;
  }
  ncclCommUserRank(c, &crank);
  ncclCommCount(c, &n);
  const size_t count = 1024;
  float* b = NULL;
  ncclMemAlloc((void**)&b, 1 << 21);
  float host[1024];
  for (size_t i = 0; i < count; i++) host[i] = (float)(crank + 1);
  cudaMemcpy(b, host, sizeof host, cudaMemcpyHostToDevice);
  ncclWindow_t w = NULL;
  ncclResult_t r = ncclCommWindowRegister(c, b, 1 << 21, &w, NCCL_WIN_COLL_SYMMETRIC);
  cudaStream_t st;
  cudaStreamCreate(&st);
  ncclResult_t ar = ncclAllReduce(b, b, count, ncclFloat, ncclSum, c, st);
  cudaError_t ce = cudaStreamSynchronize(st);
  cudaMemcpy(host, b, sizeof host, cudaMemcpyDeviceToHost);
  int sum_ok = 1;
  for (size_t i = 0; i < count; i++) sum_ok &= host[i] == (float)(n * (n + 1) / 2);
  int bad = r != ncclSuccess || !w || ar != ncclSuccess || ce != cudaSuccess || !sum_ok;
  ng_say("rank %d/%d: RESULT %s rank=%d %s=%s comm_rank=%d comm_size=%d reg=%s win=%s allreduce=%s sum=%s", rank,
         nranks, bad ? "fail" : "ok", rank, how, ng_rc_name(made), crank, n, ng_rc_name(r), w ? "set" : "null",
         ng_rc_name(ar), sum_ok ? "ok" : "wrong");
  if (w) ncclCommWindowDeregister(c, w);
  cudaStreamDestroy(st);
  ncclCommDestroy(c);
  ncclMemFree(b);
  return bad;
}

/* The layout modes' check: an all-reduce (sum of rank + 1) in the window over buf, on a stream of its own;
 * *ar and *ce what NCCL and CUDA said, 1 when every element holds the right sum. */
static int sum_in_window(ncclComm_t c, void* buf, int rank, ncclResult_t* ar, cudaError_t* ce) {
  enum { COUNT = 1024 };
  float host[COUNT];
  for (int i = 0; i < COUNT; i++) host[i] = (float)(rank + 1);
  cudaMemcpy(buf, host, sizeof host, cudaMemcpyHostToDevice);
  cudaStream_t st;
  cudaStreamCreate(&st);
  *ar = ncclAllReduce(buf, buf, COUNT, ncclFloat, ncclSum, c, st);
  *ce = cudaStreamSynchronize(st);
  cudaMemcpy(host, buf, sizeof host, cudaMemcpyDeviceToHost);
  cudaStreamDestroy(st);
  int ok = 1;
  for (int i = 0; i < COUNT; i++) ok &= host[i] == (float)(nranks * (nranks + 1) / 2);
  return ok;
}

static int run_rank(int rank) {
  int ndev = 1;
  cudaGetDeviceCount(&ndev);
  cudaSetDevice(rank % (ndev > 0 ? ndev : 1));
  int bad = 0;
  if (!strcmp(mode, "late")) {
    ncclComm_t c = init_comm(rank, 1);
    if (!c) return 1;
    void* b = NULL;
    ncclMemAlloc(&b, 1 << 21);
    if (rank == nranks - 1) usleep((useconds_t)(late_s * 1e6));
    ncclWindow_t w = NULL;
    double t0 = ng_now_us();
    ncclResult_t r = ncclCommWindowRegister(c, b, 1 << 21, &w, NCCL_WIN_COLL_SYMMETRIC);
    ng_say("rank %d/%d: RESULT %s rank=%d reg=%s win=%s ms=%.0f", rank, nranks, r == ncclSuccess ? "ok" : "fail", rank,
           ng_rc_name(r), w ? "set" : "null", (ng_now_us() - t0) / 1e3);
    if (r == ncclSuccess && w) ncclCommWindowDeregister(c, w);
    if (r != ncclSuccess && after_fail) {
      /* the communicator ncclguard stopped (or whose first round it left in NCCL): a buffer registration and
       * a device communicator on it */
      void* h = NULL;
      ncclResult_t br = ncclCommRegister(c, b, 1 << 21, &h);
      if (br == ncclSuccess && h) ncclCommDeregister(c, h);
      devcomm_fn create = (devcomm_fn)dlsym(RTLD_DEFAULT, "ncclDevCommCreate");
      static unsigned char reqs[256], out[4096]; /* zeroed requirements: NCCL 2.28's "none" */
      ncclResult_t dr = create ? create(c, reqs, out) : ncclInvalidUsage;
      ng_say("rank %d/%d: AFTER rank=%d breg=%s devcomm=%s", rank, nranks, rank, ng_rc_name(br),
             create ? ng_rc_name(dr) : "absent");
    }
    if (r == ncclSuccess) ncclCommDestroy(c);
    else ncclCommAbort(c);
    ncclMemFree(b);
    bad = r != ncclSuccess;
  } else if (!strcmp(mode, "hidden-revoke")) {
    ncclComm_t c = init_comm(rank, 1);
    if (!c) return 1;
    void* b = NULL;
    ncclMemAlloc(&b, 1 << 21);
    if (rank == 0) {
      ncclResult_t (*prevoke)(ncclComm_t, int) = (ncclResult_t(*)(ncclComm_t, int))dlsym(RTLD_DEFAULT, "pncclCommRevoke");
      ncclResult_t rv = prevoke ? prevoke(c, 0) : ncclInvalidUsage;
      ng_say("rank %d/%d: hidden revoke %s", rank, nranks, ng_rc_name(rv));
    }
    ncclWindow_t w = NULL;
    double t0 = ng_now_us();
    ncclResult_t r = ncclCommWindowRegister(c, b, 1 << 21, &w, NCCL_WIN_COLL_SYMMETRIC);
    ng_say("rank %d/%d: RESULT %s rank=%d reg=%s win=%s ms=%.0f", rank, nranks, r != ncclSuccess && !w ? "ok" : "fail",
           rank, ng_rc_name(r), w ? "set" : "null", (ng_now_us() - t0) / 1e3);
    if (w) ncclCommWindowDeregister(c, w);
    ncclCommAbort(c);
    ncclMemFree(b);
    bad = r == ncclSuccess || w;
  } else if (!strcmp(mode, "layout-reuse")) {
    ncclComm_t c = init_comm(rank, 1);
    if (!c) return 1;
    int last = rank == nranks - 1;
    char *a = NULL, *b = NULL;
    void* z = NULL;
    ncclMemAlloc((void**)&a, 4u << 20);
    if (last) ncclMemAlloc((void**)&b, 4u << 20);
    ncclMemAlloc(&z, 2u << 20);
    ncclWindow_t w0 = NULL, w1 = NULL, w2 = NULL;
    ncclResult_t r0 = ncclCommWindowRegister(c, a, 2u << 20, &w0, NCCL_WIN_COLL_SYMMETRIC);
    ncclResult_t r1 = ncclCommWindowRegister(c, last ? b : a + (2u << 20), 2u << 20, &w1, NCCL_WIN_COLL_SYMMETRIC);
    ncclResult_t r2 = ncclCommWindowRegister(c, z, 2u << 20, &w2, NCCL_WIN_COLL_SYMMETRIC);
    ncclResult_t ar;
    cudaError_t ce;
    int sum_ok = sum_in_window(c, z, rank, &ar, &ce);
    bad = r0 != ncclSuccess || r1 != ncclSuccess || r2 != ncclSuccess || ar != ncclSuccess || ce != cudaSuccess || !sum_ok;
    ng_say("rank %d/%d: RESULT %s rank=%d reg0=%s win0=%s reg1=%s win1=%s reg2=%s win2=%s allreduce=%s sum=%s", rank,
           nranks, bad ? "fail" : "ok", rank, ng_rc_name(r0), w0 ? "set" : "null", ng_rc_name(r1), w1 ? "set" : "null",
           ng_rc_name(r2), w2 ? "set" : "null", ng_rc_name(ar), sum_ok ? "ok" : "wrong");
    if (w2) ncclCommWindowDeregister(c, w2);
    if (w1) ncclCommWindowDeregister(c, w1);
    if (w0) ncclCommWindowDeregister(c, w0);
    ncclCommDestroy(c);
    ncclMemFree(a);
    if (b) ncclMemFree(b);
    ncclMemFree(z);
  } else if (!strncmp(mode, "layout-", 7)) {
    ncclComm_t c = init_comm(rank, 1);
    if (!c) return 1;
    int last = rank == nranks - 1, nosym0 = !strcmp(mode, "layout-sizes-flags0"), segs = !strcmp(mode, "layout-segments");
    int sizes = nosym0 || !strcmp(mode, "layout-sizes");
    size_t s0 = sizes && last ? (4u << 20) : (2u << 20);
    int f0 = nosym0 ? 0 : !sizes && !segs && last ? flags0 : NCCL_WIN_COLL_SYMMETRIC;
    void *a = NULL, *b = NULL;
    if (segs) { /* two allocations back to back, 2 + 2 MiB (the last rank 2 + 4 MiB), one window over both */
      size_t s1 = last ? (4u << 20) : (2u << 20);
      a = two_segments(2u << 20, s1);
      s0 = (2u << 20) + s1;
      if (!a) {
        ng_say("rank %d/%d: RESULT fail rank=%d two segments could not be mapped", rank, nranks, rank);
        return 1;
      }
    } else {
      ncclMemAlloc(&a, s0);
    }
    ncclMemAlloc(&b, 2u << 20);
    ncclWindow_t w0 = NULL, w1 = NULL;
    ncclResult_t r0 = ncclCommWindowRegister(c, a, s0, &w0, f0);
    ncclResult_t r1 = ncclCommWindowRegister(c, b, 2u << 20, &w1, NCCL_WIN_COLL_SYMMETRIC);
    ncclResult_t ar;
    cudaError_t ce;
    int sum_ok = sum_in_window(c, b, rank, &ar, &ce);
    bad = r0 != ncclSuccess || r1 != ncclSuccess || ar != ncclSuccess || ce != cudaSuccess || !sum_ok;
    ng_say("rank %d/%d: RESULT %s rank=%d reg0=%s win0=%s reg1=%s win1=%s allreduce=%s sum=%s", rank, nranks,
           bad ? "fail" : "ok", rank, ng_rc_name(r0), w0 ? "set" : "null", ng_rc_name(r1), w1 ? "set" : "null",
           ng_rc_name(ar), sum_ok ? "ok" : "wrong");
    if (w1) ncclCommWindowDeregister(c, w1);
    if (w0) ncclCommWindowDeregister(c, w0);
    ncclCommDestroy(c);
    if (!segs) ncclMemFree(a);
    ncclMemFree(b);
  } else if (!strcmp(mode, "win-garbage")) {
    /* the caller's *win holds garbage before the call (an uninitialised variable): where NCCL returns success
     * without writing it (2.28 without symmetric support and NCCL_LOCAL_REGISTER=0), the caller finds its own
     * value again; under ncclguard it must be NULL (or a window NCCL wrote), never given back to NCCL */
    ncclComm_t c = init_comm(rank, 1);
    if (!c) return 1;
    void* b = NULL;
    ncclMemAlloc(&b, 2u << 20);
    ncclWindow_t garbage = (ncclWindow_t)(uintptr_t)0x5a5a5a5a5a5a5a50ull, w = garbage;
    ncclResult_t r = ncclCommWindowRegister(c, b, 2u << 20, &w, NCCL_WIN_COLL_SYMMETRIC);
    const char* what = w == garbage ? "garbage" : w ? "set" : "null";
    ncclResult_t d = w && w != garbage ? ncclCommWindowDeregister(c, w) : ncclSuccess;
    ncclResult_t x = ncclCommDestroy(c);
    ncclMemFree(b);
    bad = r != ncclSuccess || d != ncclSuccess || x != ncclSuccess;
    ng_say("rank %d/%d: RESULT %s rank=%d reg=%s win=%s dereg=%s destroy=%s", rank, nranks, bad ? "fail" : "ok", rank,
           ng_rc_name(r), what, ng_rc_name(d), ng_rc_name(x));
  } else if (!strcmp(mode, "handle-swap")) {
    ncclComm_t c = init_comm(rank, 1);
    if (!c) return 1;
    void *a = NULL, *b = NULL, *h = NULL;
    ncclMemAlloc(&a, 2u << 20);
    ncclMemAlloc(&b, 2u << 20);
    ncclWindow_t w = NULL;
    ncclResult_t rw = ncclCommWindowRegister(c, a, 2u << 20, &w, NCCL_WIN_COLL_SYMMETRIC);
    ncclResult_t rb = ncclCommRegister(c, b, 2u << 20, &h);
    ncclResult_t x1 = ncclCommDeregister(c, (void *)w);              /* a window to the buffers' function */
    ncclResult_t x2 = ncclCommWindowDeregister(c, (ncclWindow_t)h); /* and the other way round */
    ncclResult_t d1 = ncclCommWindowDeregister(c, w), d2 = ncclCommDeregister(c, h);
    bad = rw != ncclSuccess || !w || rb != ncclSuccess || x1 == ncclSuccess || x2 == ncclSuccess ||
          d1 != ncclSuccess || d2 != ncclSuccess;
    ng_say("rank %d/%d: RESULT %s rank=%d reg=%s breg=%s win_to_dereg=%s handle_to_windereg=%s windereg=%s dereg=%s",
           rank, nranks, bad ? "fail" : "ok", rank, ng_rc_name(rw), ng_rc_name(rb), ng_rc_name(x1), ng_rc_name(x2),
           ng_rc_name(d1), ng_rc_name(d2));
    ncclCommDestroy(c);
    ncclMemFree(a);
    ncclMemFree(b);
  } else if (!strcmp(mode, "abort")) {
    ncclComm_t c = init_comm(rank, 1);
    if (!c) return 1;
    if (rank == nranks - 1) { /* never registers: waits, then leaves */
      usleep((useconds_t)abort_ms * 4000);
      ncclCommAbort(c);
      ng_say("rank %d/%d: RESULT ok rank=%d absent", rank, nranks, rank);
      return 0;
    }
    void* b = NULL;
    ncclMemAlloc(&b, 1 << 21);
    struct aborter ab = {c, abort_ms, 0};
    pthread_t t;
    if (rank == 0) pthread_create(&t, NULL, abort_main, &ab);
    ncclWindow_t w = NULL;
    double t0 = ng_now_us();
    ncclResult_t r = ncclCommWindowRegister(c, b, 1 << 21, &w, NCCL_WIN_COLL_SYMMETRIC);
    /* the peer never came: an error is the only right answer (NCCL alone: ncclInternalError) */
    ng_say("rank %d/%d: RESULT %s rank=%d reg=%s win=%s ms=%.0f", rank, nranks, r != ncclSuccess ? "ok" : "fail", rank,
           ng_rc_name(r), w ? "set" : "null", (ng_now_us() - t0) / 1e3);
    if (rank == 0) pthread_join(t, NULL);
    else ncclCommAbort(c);
    if (r == ncclSuccess) bad = 1; /* the peer never came: success is impossible */
    ncclMemFree(b);
  } else if (!strcmp(mode, "many")) {
    ncclComm_t c = init_comm(rank, 1);
    if (!c) return 1;
    size_t each = 64 << 10;
    char* b = NULL;
    ncclMemAlloc((void**)&b, each * (size_t)windows);
    ncclWindow_t* w = calloc((size_t)windows, sizeof *w);
    double t0 = ng_now_us();
    ncclResult_t g = ncclGroupStart(), r = ncclSuccess;
    for (int i = 0; i < windows && r == ncclSuccess; i++)
      r = ncclCommWindowRegister(c, b + each * (size_t)i, each, &w[i], NCCL_WIN_COLL_SYMMETRIC);
    ncclResult_t e = ncclGroupEnd();
    int set = 0;
    for (int i = 0; i < windows; i++) set += w[i] != NULL;
    ng_say("rank %d/%d: RESULT %s rank=%d windows=%d start=%s reg=%s end=%s set=%d ms=%.0f", rank, nranks,
           e == ncclSuccess && r == ncclSuccess ? "ok" : "fail", rank, windows, ng_rc_name(g), ng_rc_name(r),
           ng_rc_name(e), set, (ng_now_us() - t0) / 1e3);
    for (int i = 0; i < windows; i++)
      if (w[i]) ncclCommWindowDeregister(c, w[i]);
    bad = e != ncclSuccess || r != ncclSuccess;
    if (bad) ncclCommAbort(c);
    else ncclCommDestroy(c);
    ncclMemFree(b);
    free(w);
  } else if (!strcmp(mode, "degrade-devcomm")) {
    ncclComm_t c = init_comm(rank, 1);
    if (!c) return 1;
    void *cm = NULL, *vm = NULL;
    cudaMalloc(&cm, 1 << 21);
    ncclMemAlloc(&vm, 1 << 21);
    ncclWindow_t w1 = NULL, w2 = NULL;
    ncclResult_t r1 = ncclCommWindowRegister(c, cm, 1 << 21, &w1, NCCL_WIN_COLL_SYMMETRIC);
    ncclResult_t d1 = ncclCommWindowDeregister(c, w1);
    ncclResult_t r2 = ncclCommWindowRegister(c, vm, 1 << 21, &w2, NCCL_WIN_COLL_SYMMETRIC);
    devcomm_fn create = (devcomm_fn)dlsym(RTLD_DEFAULT, "ncclDevCommCreate");
    static unsigned char reqs[256], out[4096]; /* zeroed requirements: NCCL 2.28's "none" */
    ncclResult_t rd = create ? create(c, reqs, out) : ncclInvalidUsage;
    bad = r2 != ncclSuccess || (create && rd != ncclSuccess);
    ng_say("rank %d/%d: RESULT %s rank=%d first=%s win1=%s dereg=%s second=%s win2=%s devcomm=%s", rank, nranks,
           bad ? "fail" : "ok", rank, ng_rc_name(r1), w1 ? "set" : "null", ng_rc_name(d1), ng_rc_name(r2),
           w2 ? "set" : "null", create ? ng_rc_name(rd) : "absent");
    if (w2) ncclCommWindowDeregister(c, w2);
    ncclCommDestroy(c);
    cudaFree(cm);
    ncclMemFree(vm);
  } else if (!strcmp(mode, "simulate")) {
    /* ncclGroupSimulateEnd ends the group (NCCL still performs its registrations): a registration
     * queued in it is done, and a later one outside any group is not queued any more */
    ncclComm_t c = init_comm(rank, 1);
    if (!c) return 1;
    void* b = NULL;
    ncclMemAlloc(&b, 4 << 20);
    ncclWindow_t w1 = NULL, w2 = NULL;
    ncclGroupStart();
    ncclResult_t r1 = ncclCommWindowRegister(c, b, 1 << 21, &w1, NCCL_WIN_COLL_SYMMETRIC);
    ncclSimInfo_t si = NCCL_SIM_INFO_INITIALIZER;
    ncclResult_t e = ncclGroupSimulateEnd(&si);
    ncclResult_t r2 = ncclCommWindowRegister(c, (char*)b + (2 << 20), 1 << 21, &w2, NCCL_WIN_COLL_SYMMETRIC);
    bad = r1 != ncclSuccess || e != ncclSuccess || r2 != ncclSuccess || !w2;
    ng_say("rank %d/%d: RESULT %s rank=%d first=%s win1=%s simulate_end=%s second=%s win2=%s", rank, nranks,
           bad ? "fail" : "ok", rank, ng_rc_name(r1), w1 ? "set" : "null", ng_rc_name(e), ng_rc_name(r2),
           w2 ? "set" : "null");
    if (w1) ncclCommWindowDeregister(c, w1);
    if (w2) ncclCommWindowDeregister(c, w2);
    ncclCommDestroy(c);
    ncclMemFree(b);
  } else if (!strcmp(mode, "suspend")) {
    typedef ncclResult_t (*suspend_fn)(ncclComm_t, int);
    typedef ncclResult_t (*resume_fn)(ncclComm_t);
    int nv = 0;
    ncclGetVersion(&nv); /* NCCL loaded first (the header-free build opens it at its first call): what the
                          * lookups below find is what the loaded NCCL has */
    suspend_fn suspend = (suspend_fn)dlsym(RTLD_DEFAULT, "ncclCommSuspend");
    resume_fn resume = (resume_fn)dlsym(RTLD_DEFAULT, "ncclCommResume");
    if (!suspend || !resume) {
      ng_say("rank %d/%d: RESULT ok rank=%d suspend=absent", rank, nranks, rank);
      return 0;
    }
    ncclComm_t c = init_comm(rank, 1);
    if (!c) return 1;
    char* b = NULL;
    ncclMemAlloc((void**)&b, 6 << 20);
    ncclWindow_t w1 = NULL, w2 = NULL, w3 = NULL;
    ncclResult_t r1 = ncclCommWindowRegister(c, b, 2 << 20, &w1, NCCL_WIN_COLL_SYMMETRIC);
    ncclResult_t s = suspend(c, 1 /* NCCL_SUSPEND_MEM */);
    int in_group = getenv("FAULTS_SUSPEND_GROUP") != NULL; /* the registration while suspended inside a group */
    if (in_group) ncclGroupStart();
    ncclResult_t r2 = ncclCommWindowRegister(c, b + (2 << 20), 2 << 20, &w2, NCCL_WIN_COLL_SYMMETRIC);
    if (in_group && r2 == ncclSuccess) r2 = ncclGroupEnd();
    else if (in_group) ncclGroupEnd();
    ncclResult_t u = resume(c);
    ncclResult_t r3 = ncclCommWindowRegister(c, b + (4 << 20), 2 << 20, &w3, NCCL_WIN_COLL_SYMMETRIC);
    cudaStream_t st;
    cudaStreamCreate(&st);
    ncclResult_t ar = ncclAllReduce(b, b, 1024, ncclFloat, ncclSum, c, st);
    cudaError_t ce = cudaStreamSynchronize(st);
    /* suspend, resume and the registrations after resume succeed; the one made while suspended gets
     * NCCL's own answer (printed) */
    bad = r1 != ncclSuccess || s != ncclSuccess || u != ncclSuccess || r3 != ncclSuccess || !w3 || ar != ncclSuccess ||
          ce != cudaSuccess;
    ng_say("rank %d/%d: RESULT %s rank=%d first=%s suspend=%s while_suspended=%s win2=%s resume=%s after=%s win3=%s "
           "allreduce=%s", rank, nranks, bad ? "fail" : "ok", rank, ng_rc_name(r1), ng_rc_name(s), ng_rc_name(r2),
           w2 ? "set" : "null", ng_rc_name(u), ng_rc_name(r3), w3 ? "set" : "null", ng_rc_name(ar));
    if (getenv("FAULTS_SUSPEND_DEVCOMM") && in_group) {
      /* no NULL window is held (the one made in the group was written at its end): the device communicator
       * is NCCL's to answer */
      devcomm_fn create = (devcomm_fn)dlsym(RTLD_DEFAULT, "ncclDevCommCreate");
      static unsigned char reqs[256], out[4096];
      ncclResult_t rd = create ? create(c, reqs, out) : ncclInvalidUsage;
      ng_say("rank %d/%d: DEVCOMM rank=%d win2=%s devcomm=%s", rank, nranks, rank, w2 ? "set" : "null", ng_rc_name(rd));
    } else if (getenv("FAULTS_SUSPEND_DEVCOMM") && !w2) {
      /* the NULL window handed out while suspended given back (a no-op), then a device communicator, while
       * the other NULL windows (NCCL's own, without symmetric support) are still held: "DEVCOMM" */
      ncclResult_t d2 = ncclCommWindowDeregister(c, w2);
      devcomm_fn create = (devcomm_fn)dlsym(RTLD_DEFAULT, "ncclDevCommCreate");
      static unsigned char reqs[256], out[4096];
      ncclResult_t rd = create ? create(c, reqs, out) : ncclInvalidUsage;
      ng_say("rank %d/%d: DEVCOMM rank=%d dereg2=%s devcomm=%s", rank, nranks, rank, ng_rc_name(d2), ng_rc_name(rd));
    }
    if (w1) ncclCommWindowDeregister(c, w1);
    if (w2) ncclCommWindowDeregister(c, w2);
    if (w3) ncclCommWindowDeregister(c, w3);
    cudaStreamDestroy(st);
    ncclCommDestroy(c);
    ncclMemFree(b);
  } else if (!strcmp(mode, "devcomm-destroy")) {
    /* a device communicator created and destroyed: a bad buffer afterwards may degrade again */
    ncclComm_t c = init_comm(rank, 1);
    if (!c) return 1;
    void *vm = NULL, *cm = NULL;
    ncclMemAlloc(&vm, 1 << 21);
    cudaMalloc(&cm, 1 << 21);
    ncclWindow_t w1 = NULL, w2 = NULL;
    ncclResult_t r1 = ncclCommWindowRegister(c, vm, 1 << 21, &w1, NCCL_WIN_COLL_SYMMETRIC);
    devcomm_fn create = (devcomm_fn)dlsym(RTLD_DEFAULT, "ncclDevCommCreate");
    typedef ncclResult_t (*destroy_fn)(ncclComm_t, const void*);
    destroy_fn destroy = (destroy_fn)dlsym(RTLD_DEFAULT, "ncclDevCommDestroy");
    static unsigned char reqs[256], out[4096];
    ncclResult_t rc = create && destroy ? create(c, reqs, out) : ncclInvalidUsage;
    ncclResult_t rd = create && destroy ? destroy(c, out) : ncclInvalidUsage;
    ncclResult_t r2 = ncclCommWindowRegister(c, cm, 1 << 21, &w2, NCCL_WIN_COLL_SYMMETRIC);
    ng_say("rank %d/%d: RESULT %s rank=%d first=%s devcomm=%s destroy=%s second=%s win2=%s", rank, nranks,
           r2 == ncclSuccess ? "ok" : "fail", rank, ng_rc_name(r1), ng_rc_name(rc), ng_rc_name(rd), ng_rc_name(r2),
           w2 ? "set" : "null");
    bad = r2 != ncclSuccess;
    if (w1) ncclCommWindowDeregister(c, w1);
    if (w2) ncclCommWindowDeregister(c, w2);
    if (bad) ncclCommAbort(c);
    else ncclCommDestroy(c);
    ncclMemFree(vm);
    cudaFree(cm);
  } else if (!strcmp(mode, "grow")) {
    /* NCCL 2.29.2+: existing ranks pass their communicator and rank -1, one of them the new id; new
     * ranks pass NULL, the id and their rank (nccl.h before 2.29 lacks it: looked up) */
    typedef ncclResult_t (*grow_fn)(ncclComm_t, int, const ncclUniqueId*, int, ncclComm_t*, ncclConfig_t*);
    int nv = 0;
    ncclGetVersion(&nv); /* NCCL loaded first, as for suspend */
    grow_fn grow = (grow_fn)dlsym(RTLD_DEFAULT, "ncclCommGrow");
    if (!grow) {
      ng_say("rank %d/%d: RESULT ok rank=%d grow=absent", rank, nranks, rank);
      return 0;
    }
    int joining = rank == nranks - 1;
    ncclComm_t parent = NULL, c = NULL;
    share_id(rank, 1);
    if (!joining && ncclCommInitRank(&parent, nranks - 1, sh->id[1], rank) != ncclSuccess) {
      ng_say("rank %d/%d: RESULT fail rank=%d init of the parent", rank, nranks, rank);
      return 1;
    }
    share_id(rank, 2); /* the id of the grown communicator: rank 0's */
    ncclResult_t r = joining ? grow(NULL, nranks, &sh->id[0], rank, &c, NULL)
                             : grow(parent, nranks, rank == 0 ? &sh->id[0] : NULL, -1, &c, NULL);
    bad = use_new_comm(rank, "grow", r, c);
    if (parent) ncclCommDestroy(parent);
  } else if (!strcmp(mode, "shrink")) {
    typedef ncclResult_t (*shrink_fn)(ncclComm_t, int*, int, ncclComm_t*, ncclConfig_t*, int);
    shrink_fn shrink = (shrink_fn)dlsym(RTLD_DEFAULT, "ncclCommShrink");
    if (!shrink) {
      ng_say("rank %d/%d: RESULT ok rank=%d shrink=absent", rank, nranks, rank);
      return 0;
    }
    ncclComm_t parent = init_comm(rank, 1), c = NULL;
    if (!parent) return 1;
    if (rank == nranks - 1) { /* excluded: takes no part (NCCL_SHRINK_DEFAULT) */
      ng_say("rank %d/%d: RESULT ok rank=%d excluded", rank, nranks, rank);
      ncclCommDestroy(parent);
      return 0;
    }
    int excluded = nranks - 1;
    ncclResult_t r = shrink(parent, &excluded, 1, &c, NULL, 0 /* NCCL_SHRINK_DEFAULT */);
    bad = use_new_comm(rank, "shrink", r, c);
    ncclCommDestroy(parent);
  } else if (!strcmp(mode, "scalable")) {
    typedef ncclResult_t (*scalable_fn)(ncclComm_t*, int, int, int, ncclUniqueId*, ncclConfig_t*);
    scalable_fn scalable = (scalable_fn)dlsym(RTLD_DEFAULT, "ncclCommInitRankScalable");
    if (!scalable) {
      ng_say("rank %d/%d: RESULT ok rank=%d scalable=absent", rank, nranks, rank);
      return 0;
    }
    share_id(rank, 1);
    ncclComm_t c = NULL;
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    ncclResult_t r = scalable(&c, nranks, rank, 1, &sh->id[1], &cfg);
    bad = use_new_comm(rank, "scalable", r, c);
  } else if (!strcmp(mode, "cycles")) {
    /* every rank draws the same fault sequence from the seed */
    unsigned s = seed;
    int gen = 1;
    ncclComm_t c = init_comm(rank, gen);
    void *vm = NULL, *cm = NULL;
    ncclMemAlloc(&vm, 1 << 21);
    cudaMalloc(&cm, 1 << 21);
    long rss0 = 0;
    int fd0 = 0, counts[4] = {0};
    for (int k = 0; k < cycles && c; k++) {
      s = s * 1103515245u + 12345u;
      int fault = (int)((s >> 16) % 4), victim = (int)((s >> 8) % (unsigned)nranks);
      while (!(fault_mask & (1u << fault))) fault = (fault + 1) % 4;
      counts[fault]++;
      if (k == cycles / 10) rss0 = ng_vmrss_kb(), fd0 = ng_fd_count();
      ncclWindow_t w = NULL;
      void* buf = vm;
      size_t size = 1 << 21;
      if (fault == 0 && rank == victim) usleep(20000);            /* a late peer, well inside the timeout */
      if (fault == 2 && rank == victim) buf = cm;                 /* a bad buffer on one rank */
      if (fault == 3 && rank == victim) size = 0;                 /* a bad size on one rank */
      ncclResult_t r = fault == 1 ? ncclSuccess : ncclCommWindowRegister(c, buf, size, &w, NCCL_WIN_COLL_SYMMETRIC);
      if (w) ncclCommWindowDeregister(c, w);
      int cls = fault == 1 ? 3 : r != ncclSuccess ? 2 : w ? 1 : 0; /* registered / degraded / error / aborted */
      if (k < 20000) sh->outcome[rank][k] = (unsigned char)(cls + 1);
      if (fault == 1 || r != ncclSuccess) { /* an abort of every rank (or after an error): a new communicator */
        ncclCommAbort(c);
        c = init_comm(rank, ++gen);
      }
      if (fault == 2 || fault == 3) {
        if (cls == 1) bad = 1, ng_say("rank %d cycle %d: a window from a bad buffer", rank, k);
      }
    }
    long rss1 = ng_vmrss_kb();
    int fd1 = ng_fd_count();
    ng_say("RESULT rank=%d cycles=%d late=%d abort=%d badbuf=%d badsize=%d rss_kb=%ld->%ld fds=%d->%d", rank, cycles,
           counts[0], counts[1], counts[2], counts[3], rss0, rss1, fd0, fd1);
    if (fd1 > fd0 + 2) bad = 1, ng_say("rank %d: descriptors grew %d -> %d", rank, fd0, fd1);
    if (max_growth_kb >= 0 && rss0 > 0 && rss1 > rss0 + max_growth_kb)
      bad = 1, ng_say("rank %d: memory grew %ld -> %ld kB", rank, rss0, rss1);
    if (c) ncclCommDestroy(c);
    ncclMemFree(vm);
    cudaFree(cm);
  } else {
    fprintf(stderr, "faults: unknown mode %s\n", mode);
    return 2;
  }
  return bad;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: faults late|abort|many|degrade-devcomm|simulate|devcomm-destroy|suspend|grow|shrink|scalable|cycles [-n N] [--late SEC] [--abort-ms MS] "
                    "[--windows K] [--cycles C] [--seed S] [--faults MASK] [--max-growth-kb K] [--timeout SEC]\n");
    return 2;
  }
  mode = argv[1];
  for (int i = 2; i + 1 < argc; i += 2) {
    const char *k = argv[i], *v = argv[i + 1];
    if (!strcmp(k, "-n")) nranks = atoi(v);
    else if (!strcmp(k, "--late")) late_s = atof(v);
    else if (!strcmp(k, "--abort-ms")) abort_ms = atoi(v);
    else if (!strcmp(k, "--windows")) windows = atoi(v);
    else if (!strcmp(k, "--cycles")) cycles = atoi(v);
    else if (!strcmp(k, "--seed")) seed = (unsigned)strtoul(v, NULL, 0);
    else if (!strcmp(k, "--max-growth-kb")) max_growth_kb = atol(v);
    else if (!strcmp(k, "--faults")) fault_mask = (unsigned)strtoul(v, NULL, 0) & 0xf;
    else if (!strcmp(k, "--timeout")) timeout_s = atoi(v);
    else if (!strcmp(k, "--after-fail")) after_fail = atoi(v);
    else if (!strcmp(k, "--flags0")) flags0 = (int)strtol(v, NULL, 0);
    else { fprintf(stderr, "faults: unknown option %s\n", k); return 2; }
  }
  int one_ok = !strcmp(mode, "handle-swap") || !strcmp(mode, "hidden-revoke");
  if (nranks < (one_ok ? 1 : 2) || nranks > 64) {
    fprintf(stderr, "faults: -n must be %d..64 for %s\n", one_ok ? 1 : 2, mode);
    return 2;
  }
  sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  pid_t pid[64];
  for (int r = 0; r < nranks; r++) {
    pid[r] = fork();
    if (pid[r] == 0) _exit(run_rank(r));
  }
  int rc = 0, left = nranks;
  double t0 = ng_now_us();
  while (left > 0) {
    int st;
    pid_t p = waitpid(-1, &st, WNOHANG);
    if (p > 0) {
      left--;
      if (!WIFEXITED(st) || WEXITSTATUS(st)) {
        ng_say("faults: rank process %d %s %d", (int)p, WIFEXITED(st) ? "exited" : "killed by signal",
               WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
        if (rc == 0) rc = 1;
      }
      continue;
    }
    if (ng_now_us() - t0 > timeout_s * 1e6) {
      ng_say("RESULT hang: %d rank(s) still running after %d s", left, timeout_s);
      for (int r = 0; r < nranks; r++) kill(pid[r], SIGKILL);
      while (waitpid(-1, NULL, 0) > 0) {}
      return 124;
    }
    usleep(10000);
  }
  if (!strcmp(mode, "cycles")) { /* every rank ended every cycle the same way */
    int diverged = 0;
    for (int k = 0; k < cycles && k < 20000; k++)
      for (int r = 1; r < nranks; r++)
        if (sh->outcome[r][k] != sh->outcome[0][k]) {
          if (diverged++ < 5) ng_say("faults: cycle %d: rank 0 outcome %d, rank %d outcome %d", k, sh->outcome[0][k] - 1, r, sh->outcome[r][k] - 1);
        }
    ng_say("RESULT cycles diverged=%d", diverged);
    if (diverged && rc == 0) rc = 1;
  }
  return rc;
}
