/* libnotready.so: preloaded after ncclguard (LD_PRELOAD="libncclguard.so:libnotready.so"), it stands
 * between ncclguard and NCCL and plays a communicator that is not ready yet when a window is registered:
 * the first NOTREADY_FAILS (default 1) calls of ncclCommWindowRegister in the process answer
 * ncclInvalidArgument without reaching NCCL, and the next ncclCommGetAsyncError on that communicator
 * says ncclInProgress once - NCCL's answer to a call on a nonblocking communicator whose previous
 * operation has not finished, the one case ncclguard's retry loop (NCCLGUARD_RETRIES) registers again
 * for. The fake NCCL cannot be caught in that state otherwise (ncclguard waits for the communicator to
 * be ready just before). Used by tests/t_policy.sh.
 *
 * ncclguard takes every NCCL function from the one library its first lookup found (shim/real.c: two
 * copies of NCCL are never mixed), so this library defines every pnccl* function ncclguard looks up
 * (shim/nccl_abi.h's lists): the two above in C, the others as a jump to NCCL's own (dlsym(RTLD_NEXT)).
 * x86-64 and aarch64 only; elsewhere it defines nothing and notready_active is absent (the test skips). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>

#include <nccl.h>

#define NR_FORWARDED(X)                                                                                     \
  X(ncclGetVersion) X(ncclGetLastError) X(ncclCommInitRank) X(ncclCommInitRankConfig) X(ncclCommInitAll)    \
  X(ncclCommInitRankScalable) X(ncclCommSplit) X(ncclCommShrink) X(ncclCommGrow) X(ncclCommFinalize)         \
  X(ncclCommDestroy) X(ncclCommAbort) X(ncclCommRevoke) X(ncclCommSuspend) X(ncclCommResume)                 \
  X(ncclCommWindowDeregister) X(ncclCommRegister) X(ncclCommDeregister) X(ncclGroupStart) X(ncclGroupEnd)    \
  X(ncclGroupSimulateEnd) X(ncclAllReduce) X(ncclCommCuDevice) X(ncclCommUserRank) X(ncclCommCount)          \
  X(ncclDevCommCreate) X(ncclDevCommDestroy) X(ncclCommQueryProperties) X(ncclMemAlloc)

#if defined(__x86_64__) || defined(__aarch64__)
int notready_active = 1;
#if defined(__x86_64__)
#define NR_JUMP(f) "  jmp *nr_fwd_" #f "(%rip)\n"
#else
#define NR_JUMP(f) "  adrp x16, nr_fwd_" #f "\n  ldr x16, [x16, :lo12:nr_fwd_" #f "]\n  br x16\n"
#endif
/* p<name>: jumps to NCCL's p<name> (or <name>), arguments and return untouched */
#define NR_TRAMPOLINE(f)                                                               \
  __attribute__((visibility("hidden"), used)) void* nr_fwd_##f;                        \
  __asm__(".text\n.globl p" #f "\n.type p" #f ", @function\np" #f ":\n" NR_JUMP(f)     \
          ".size p" #f ", .-p" #f "\n");
NR_FORWARDED(NR_TRAMPOLINE)

static void* next(const char* name) {
  void* f = dlsym(RTLD_NEXT, name);
  return f ? f : dlsym(RTLD_NEXT, name + 1); /* "pncclX", else "ncclX" */
}
static ncclResult_t (*real_reg)(ncclComm_t, void*, size_t, ncclWindow_t*, int);
static ncclResult_t (*real_async)(ncclComm_t, ncclResult_t*);

__attribute__((constructor)) static void nr_init(void) {
#define NR_RESOLVE(f) nr_fwd_##f = next("p" #f);
  NR_FORWARDED(NR_RESOLVE)
  real_reg = (ncclResult_t(*)(ncclComm_t, void*, size_t, ncclWindow_t*, int))next("pncclCommWindowRegister");
  real_async = (ncclResult_t(*)(ncclComm_t, ncclResult_t*))next("pncclCommGetAsyncError");
}

static int fails_left = -1;
static __thread ncclComm_t busy; /* the communicator whose next async query says "in progress" */

ncclResult_t pncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int winFlags) {
  if (fails_left < 0) {
    const char* e = getenv("NOTREADY_FAILS");
    fails_left = e ? atoi(e) : 1;
  }
  if (fails_left > 0) {
    fails_left--;
    busy = comm;
    return ncclInvalidArgument;
  }
  busy = NULL;
  return real_reg ? real_reg(comm, buff, size, win, winFlags) : ncclInternalError;
}

ncclResult_t pncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  if (busy && comm == busy) {
    busy = NULL;
    *asyncError = ncclInProgress;
    return ncclSuccess;
  }
  return real_async ? real_async(comm, asyncError) : ncclInternalError;
}
#endif
