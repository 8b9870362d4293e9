/* Two copies of libnccl in one process: an older one (the fake-legacy build: no ncclCommRevoke)
 * loaded first into the global scope, a newer one (with ncclCommRevoke) after it, each by its
 * path. ncclguard must take every function from the first: a registration that times out (rank 1
 * of the two communicators never registers) must not be "revoked" by the second copy's
 * ncclCommRevoke, which does not know the first copy's communicator.
 * usage: two_nccl OLD/libnccl.so.2 NEW/libnccl.so.2; prints "RESULT reg=<rc>". */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>

#include <nccl.h>

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  if (!dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL) || !dlopen(argv[2], RTLD_NOW | RTLD_GLOBAL)) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return 2;
  }
  typedef ncclResult_t (*initall_t)(ncclComm_t*, int, const int*);
  typedef ncclResult_t (*alloc_t)(void**, size_t);
  typedef ncclResult_t (*reg_t)(ncclComm_t, void*, size_t, ncclWindow_t*, int);
  typedef ncclResult_t (*abort_t)(ncclComm_t);
  initall_t initall = (initall_t)dlsym(RTLD_DEFAULT, "ncclCommInitAll");
  alloc_t memalloc = (alloc_t)dlsym(RTLD_DEFAULT, "ncclMemAlloc");
  reg_t reg = (reg_t)dlsym(RTLD_DEFAULT, "ncclCommWindowRegister");
  abort_t abrt = (abort_t)dlsym(RTLD_DEFAULT, "ncclCommAbort");
  if (!initall || !memalloc || !reg || !abrt) return 2;
  ncclComm_t comms[2];
  int devs[2] = {0, 1};
  if (initall(comms, 2, devs) != ncclSuccess) { printf("RESULT init failed\n"); return 1; }
  void* b = NULL;
  memalloc(&b, 1 << 21);
  ncclWindow_t w = NULL;
  ncclResult_t r = reg(comms[0], b, 1 << 21, &w, NCCL_WIN_COLL_SYMMETRIC); /* comms[1] never registers */
  printf("RESULT reg=%d\n", (int)r);
  abrt(comms[0]);
  abrt(comms[1]);
  return 0;
}
