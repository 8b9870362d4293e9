/* libtracer.so: a tracing library of the kind preloaded after ncclguard (LD_PRELOAD=libncclguard.so:libtracer.so):
 * it defines some NCCL functions under both names, nccl* and NCCL's profiling pnccl* (the names ncclguard looks up
 * first, shim/real.c), counts them and forwards each to the next definition (dlsym RTLD_NEXT), and leaves the
 * others to libnccl. Here: ncclGetVersion; and ncclCommInitRank, ncclCommWindowRegister under their public names
 * only (as most tracers define them). A function ncclguard forwards that takes no communicator
 * (ncclMemAlloc) must still reach NCCL where the tracer does not define it, as it does without ncclguard. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>

typedef int (*get_version_t)(int*);
static int calls;

int pncclGetVersion(int* version) {
  get_version_t next = (get_version_t)dlsym(RTLD_NEXT, "pncclGetVersion");
  calls++;
  return next ? next(version) : 3; /* ncclSystemError */
}

int ncclGetVersion(int* version) { return pncclGetVersion(version); }

/* Two more of the kind most tracers are: the public name only, forwarded to the next definition of that name. */
static int init_calls, reg_calls;
typedef int (*init_t)(void**, int, char[128], int);
int ncclCommInitRank(void** comm, int nranks, char id[128], int rank);
int ncclCommInitRank(void** comm, int nranks, char id[128], int rank) {
  init_t next = (init_t)dlsym(RTLD_NEXT, "ncclCommInitRank");
  init_calls++;
  return next ? next(comm, nranks, id, rank) : 3;
}
typedef int (*reg_t)(void*, void*, size_t, void**, int);
int ncclCommWindowRegister(void* comm, void* buff, size_t size, void** win, int flags);
int ncclCommWindowRegister(void* comm, void* buff, size_t size, void** win, int flags) {
  reg_t next = (reg_t)dlsym(RTLD_NEXT, "ncclCommWindowRegister");
  reg_calls++;
  return next ? next(comm, buff, size, win, flags) : 3;
}

__attribute__((destructor)) static void said(void) {
  if (calls) fprintf(stderr, "tracer: %d ncclGetVersion calls\n", calls);
  if (init_calls || reg_calls)
    fprintf(stderr, "tracer: %d ncclCommInitRank calls, %d ncclCommWindowRegister calls\n", init_calls, reg_calls);
}
